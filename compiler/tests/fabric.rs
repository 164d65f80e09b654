//! The `Fabric` kind with several NICs per host, several spines and a fabric inside each host:
//! it says what a handwritten `Graph` says (the bundled `nvswitch-2x8.ron` is
//! `fabric-nvswitch-2x8.ron`, node for node and link for link), and the hierarchical method
//! finds each host as a group whose members leave through their own NICs.
#![allow(clippy::panic, clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::path::Path;
use topoc::embed::groups;
use topoc::machine::Machine;

fn load(example: &str) -> Machine {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples")
        .join(example);
    let source = std::fs::read_to_string(&path).expect("readable example");
    match topoc::load(&source) {
        Ok(loaded) => loaded.machine,
        Err(e) => panic!("{example} does not load: {e:?}"),
    }
}

/// The handwritten graph's names in the fabric's scheme: `n1g3` is `H1R3`, `nvsw1` is `HS1`,
/// `nic1.3` is `NIC1.3`, `leaf` is `SW`.
fn fabric_name(graph_name: &str) -> String {
    if let Some(rest) = graph_name.strip_prefix("nvsw") {
        format!("HS{rest}")
    } else if let Some(rest) = graph_name.strip_prefix("nic") {
        format!("NIC{rest}")
    } else if graph_name == "leaf" {
        "SW".to_string()
    } else if let Some((host, rank)) = graph_name.strip_prefix('n').and_then(|r| r.split_once('g'))
    {
        format!("H{host}R{rank}")
    } else {
        panic!("unexpected name {graph_name}")
    }
}

/// Nodes as (name, kind) and links as (endpoints, bandwidth, latency, lanes), names mapped by
/// `rename`: the graph up to ids and link names.
type Shape = (BTreeSet<String>, Vec<(String, String, u64, u64, u32)>);

fn shape(m: &Machine, rename: impl Fn(&str) -> String) -> Shape {
    let ir = m.to_ir();
    let nodes = ir
        .nodes
        .iter()
        .map(|n| format!("{} {:?}", rename(&n.name), n.kind))
        .collect();
    let mut links: Vec<_> = ir
        .links
        .iter()
        .map(|l| {
            let mut ends = [
                rename(&ir.nodes[l.a.index()].name),
                rename(&ir.nodes[l.b.index()].name),
            ];
            ends.sort();
            let [a, b] = ends;
            (
                a,
                b,
                l.bandwidth_gbps.to_bits(),
                l.latency_us.to_bits(),
                l.lanes,
            )
        })
        .collect();
    links.sort();
    (nodes, links)
}

#[test]
fn the_fabric_builds_the_handwritten_nvswitch_machine() {
    let graph = load("nvswitch-2x8.ron");
    let fabric = load("fabric-nvswitch-2x8.ron");
    let (graph_nodes, graph_links) = shape(&graph, fabric_name);
    let (fabric_nodes, fabric_links) = shape(&fabric, str::to_string);
    assert_eq!(graph_nodes.len(), 16 + 2 + 16 + 1);
    assert_eq!(graph_links.len(), 16 + 16 + 16);
    assert_eq!(fabric_nodes, graph_nodes);
    assert_eq!(fabric_links, graph_links);
    assert_eq!(fabric.switch_latency_us, graph.switch_latency_us);
    // The fabric also records what its NICs and switch can do; none of them reduces here.
    assert!(fabric.devices.values().all(|d| !d.reduces));
}

#[test]
fn each_host_is_a_group_whose_rails_leave_through_their_own_nics() {
    let m = load("fabric-spines.ron");
    let g = groups::find(&m).unwrap_or_else(|e| panic!("groups: {e:?}"));
    assert_eq!((g.count(), g.size()), (8, 8));
    for (h, routes) in g.rail.iter().enumerate() {
        for (i, route) in routes.iter().enumerate() {
            let first = &m.link(route[0]).name;
            assert_eq!(
                first,
                &format!("NIC{h}.{i}-H{h}R{i}"),
                "rail {i} of host {h}"
            );
        }
    }
}

/// Four hosts of four GPUs, a NIC per GPU, two leaves (two hosts each) under four spines
/// joined by single 400 Gbit/s links: the rails that cross from one leaf to the other take
/// one spine each, where the first shortest route would send them all over `SP0`.
#[test]
fn rails_that_cross_leaves_spread_over_the_spines() {
    let source = r#"Topology(
        name: "thin-spines",
        machine: Fabric(
            hosts: 4,
            ranks_per_host: 4,
            nics_per_host: 4,
            host_fabric: Switch(link: (bandwidth_gbps: 3600.0)),
            leaf_switches: 2,
            spines: 4,
            host_link: (bandwidth_gbps: 512.0),
            network_link: (bandwidth_gbps: 400.0),
        ),
    )"#;
    let m = topoc::load(source).unwrap().machine;
    let g = groups::find(&m).unwrap_or_else(|e| panic!("groups: {e:?}"));
    assert_eq!((g.count(), g.size()), (4, 4));
    let spine_of = |route: &[schedule_ir::LinkId]| -> BTreeSet<String> {
        route
            .iter()
            .filter_map(|&l| m.link(l).name.split_once("-SW").map(|(s, _)| s.to_string()))
            .filter(|s| s.starts_with("SP"))
            .collect()
    };
    // Hosts 0 and 1 hang off SW0, hosts 2 and 3 off SW1: rails from host 1 to host 2 and
    // from host 3 to host 0 cross, the others stay on their leaf.
    for (h, crosses) in [(0, false), (1, true), (2, false), (3, true)] {
        let spines: Vec<BTreeSet<String>> = g.rail[h].iter().map(|r| spine_of(r)).collect();
        if crosses {
            let all: BTreeSet<&String> = spines.iter().flatten().collect();
            assert_eq!(
                all.len(),
                4,
                "host {h}'s rails take the four spines: {spines:?}"
            );
            assert!(spines.iter().all(|s| s.len() == 1));
        } else {
            assert!(
                spines.iter().all(BTreeSet::is_empty),
                "host {h}: {spines:?}"
            );
        }
    }
}

/// The largest counts the language accepts are refused by the size limits, at once and
/// without building anything (every count is multiplied in `u64`, saturating).
#[test]
fn the_largest_counts_are_refused_by_the_size_limits() {
    let max = u32::MAX;
    for machine in [
        format!("Fabric(hosts: 1, ranks_per_host: {max}, nics_per_host: {max}, leaf_switches: 1, spines: {max}, host_fabric: FullMesh())"),
        format!("Fabric(hosts: {max}, ranks_per_host: 1, leaf_switches: {max}, spines: {max}, host_fabric: Switch())"),
        "Fabric(hosts: 1, ranks_per_host: 2000, host_fabric: FullMesh())".to_string(),
    ] {
        let source = format!("Topology(name: \"huge\", machine: {machine})");
        match topoc::load(&source) {
            Err(topoc::Error::Topology(problems)) => {
                let message = &problems[0].message;
                assert!(message.contains("more than the compiler supports"), "{machine}: {message}");
            }
            Err(other) => panic!("{machine}: {other}"),
            Ok(_) => panic!("{machine} was built"),
        }
    }
}

/// A NIC count that does not divide a huge prime rank count is refused at once, naming the
/// divisors it may take.
#[test]
fn uneven_nics_are_refused_quickly_whatever_the_rank_count() {
    let source = "Topology(name: \"f\", machine: Fabric(hosts: 1, ranks_per_host: 4294967291, nics_per_host: 3))";
    match topoc::load(source) {
        Err(topoc::Error::Topology(problems)) => {
            assert_eq!(
                problems[0].message,
                "3 NICs per host cannot share 4294967291 ranks per host evenly"
            );
            assert!(
                problems[0].notes[0].ends_with(": 1, …, 4294967291"),
                "{:?}",
                problems[0].notes
            );
        }
        Err(other) => panic!("{other}"),
        Ok(_) => panic!("built"),
    }
}
