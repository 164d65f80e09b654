//! `Fabric(hosts, ranks_per_host, …)`: hosts, NICs and switches.
//!
//! Every host `h` holds ranks `HhR0 … HhR(r-1)` (compute nodes) and one NIC `NICh`; each rank
//! is linked to its host's NIC (`NICh-HhRk`, with `host_link:` parameters). With one switch,
//! `SW` is linked to every NIC (`SW-NICh`, `network_link:`). With `leaf_switches: k`, hosts
//! are split into `k` contiguous blocks as evenly as possible (host `h` goes to leaf
//! `⌊h·k / hosts⌋`), leaf `SWj` is linked to its hosts' NICs (`SWj-NICh`) and the spine `SW`
//! to every leaf (`SW-SWj`, `spine_link:`, by default `network_link:`).
//!
//! Nodes are laid out ranks first (host by host), then NICs, then leaves, then `SW`; links
//! rank links first (host by host), then NIC links, then spine links. NICs and switches are
//! switch nodes of the graph; what they can do for in-network reduction (reduce or not,
//! segment buffers, MTU) is kept in [`Machine::devices`].

use super::build::{check_params, MAX_NODES};
use super::{DeviceCaps, LinkInfo, Machine, NodeInfo, Shape};
use crate::diag::Problem;
use crate::path;
use crate::topology::ast::{DeviceDecl, LinkParams};
use crate::topology::spans::Path;
use schedule_ir::{NodeId, NodeKind};

/// A fabric's declaration, as the machine kind gives it.
#[derive(Clone, Copy, Debug)]
pub struct FabricDecl<'a> {
    /// Number of hosts.
    pub hosts: u32,
    /// Ranks per host.
    pub ranks_per_host: u32,
    /// Leaf switches under a spine, or one switch.
    pub leaf_switches: Option<u32>,
    /// What every NIC can do.
    pub nic: &'a DeviceDecl,
    /// What every switch can do.
    pub switch: &'a DeviceDecl,
    /// Rank–NIC links.
    pub host_link: LinkParams,
    /// NIC–switch links.
    pub network_link: LinkParams,
    /// Leaf–spine links.
    pub spine_link: LinkParams,
}

/// Checks a fabric's numbers; every problem points at its field.
fn check(d: &FabricDecl) -> Vec<Problem> {
    let mut problems = check_params(&path!["machine", "host_link"], &d.host_link);
    problems.extend(check_params(
        &path!["machine", "network_link"],
        &d.network_link,
    ));
    problems.extend(check_params(&path!["machine", "spine_link"], &d.spine_link));
    for (field, count, what) in [
        ("hosts", d.hosts, "host"),
        ("ranks_per_host", d.ranks_per_host, "rank per host"),
    ] {
        if count == 0 {
            problems.push(
                Problem::at(
                    path!["machine", field],
                    format!("a fabric needs at least 1 {what}, not 0"),
                    "nothing here",
                )
                .hint("a fabric has several hosts, each with several ranks"),
            );
        }
    }
    match d.leaf_switches {
        Some(0) => problems.push(
            Problem::at(
                path!["machine", "leaf_switches"],
                "a two-level fabric needs at least 1 leaf switch, not 0",
                "no leaves",
            )
            .hint("leave `leaf_switches` out for a single switch"),
        ),
        Some(k) if d.hosts > 0 && k > d.hosts => problems.push(
            Problem::at(
                path!["machine", "leaf_switches"],
                format!(
                    "{k} leaf switches for {} hosts would leave some leaves with no host",
                    d.hosts
                ),
                "more leaves than hosts",
            )
            .hint(format!("use at most {} leaf switches", d.hosts)),
        ),
        _ => {}
    }
    for (field, device) in [("nic", d.nic), ("switch", d.switch)] {
        problems.extend(check_device(&path!["machine", field], device));
    }
    let hosts = u64::from(d.hosts);
    let nodes =
        hosts * u64::from(d.ranks_per_host) + hosts + u64::from(d.leaf_switches.unwrap_or(0)) + 1;
    if problems.is_empty() && nodes > MAX_NODES {
        problems.push(Problem::at(
            path!["machine", "hosts"],
            format!(
                "{} hosts of {} ranks make {nodes} nodes with NICs and switches, more than the compiler supports ({MAX_NODES})",
                d.hosts, d.ranks_per_host
            ),
            "too large",
        ));
    }
    problems
}

fn check_device(at: &Path, device: &DeviceDecl) -> Vec<Problem> {
    let mut problems = Vec::new();
    if device.mtu_bytes == 0 {
        problems.push(
            Problem::at(
                at.field("mtu_bytes"),
                "an MTU of 0 bytes carries nothing",
                "must be at least 1",
            )
            .hint("messages are cut into segments of at most the MTU; 4096 is common"),
        );
    }
    if device.reduce && device.segment_buffers == 0 {
        problems.push(
            Problem::at(
                at.field("segment_buffers"),
                "a device that reduces needs at least one segment buffer",
                "no buffers",
            )
            .hint("each segment being combined occupies one buffer unit until it is complete"),
        );
    }
    problems
}

fn caps(d: &DeviceDecl) -> DeviceCaps {
    DeviceCaps {
        reduces: d.reduce,
        segment_buffers: d.segment_buffers,
        mtu_bytes: d.mtu_bytes,
    }
}

/// Builds a fabric, reporting every problem in its declaration.
pub fn fabric(name: &str, d: &FabricDecl) -> Result<Machine, Vec<Problem>> {
    let problems = check(d);
    if !problems.is_empty() {
        return Err(problems);
    }
    let (hosts, ranks) = (d.hosts as usize, d.ranks_per_host as usize);
    let leaves = d.leaf_switches.map_or(0, |k| k as usize);
    let node = |name: String, kind| NodeInfo { name, kind };
    let mut nodes = Vec::with_capacity(hosts * (ranks + 1) + leaves + 1);
    for h in 0..hosts {
        for r in 0..ranks {
            nodes.push(node(format!("H{h}R{r}"), NodeKind::Compute));
        }
    }
    let nic = |h: usize| hosts * ranks + h;
    let leaf = |j: usize| hosts * ranks + hosts + j;
    let spine = hosts * ranks + hosts + leaves;
    for h in 0..hosts {
        nodes.push(node(format!("NIC{h}"), NodeKind::Switch));
    }
    for j in 0..leaves {
        nodes.push(node(format!("SW{j}"), NodeKind::Switch));
    }
    nodes.push(node("SW".to_string(), NodeKind::Switch));

    let mut links = Vec::new();
    let add = |links: &mut Vec<(usize, usize, LinkInfo)>, up: usize, down: usize, p| {
        let id = format!("{}-{}", nodes[up].name, nodes[down].name);
        links.push((up, down, LinkInfo::new(id, p)));
    };
    for h in 0..hosts {
        for r in 0..ranks {
            add(&mut links, nic(h), h * ranks + r, &d.host_link);
        }
    }
    for h in 0..hosts {
        let up = if leaves == 0 {
            spine
        } else {
            leaf(h * leaves / hosts)
        };
        add(&mut links, up, nic(h), &d.network_link);
    }
    for j in 0..leaves {
        add(&mut links, spine, leaf(j), &d.spine_link);
    }
    let mut machine = Machine::from_parts(name, nodes, links, Shape::Fabric);
    for h in 0..hosts {
        machine.devices.insert(NodeId::new(nic(h)), caps(d.nic));
    }
    for j in 0..leaves {
        machine.devices.insert(NodeId::new(leaf(j)), caps(d.switch));
    }
    machine.devices.insert(NodeId::new(spine), caps(d.switch));
    Ok(machine)
}

#[cfg(test)]
mod tests {
    use super::*;
    use schedule_ir::LinkId;

    #[test]
    fn two_level_fabric_names_and_blocks() {
        let (nic, switch) = (DeviceDecl::default(), DeviceDecl::default());
        let d = FabricDecl {
            hosts: 3,
            ranks_per_host: 2,
            leaf_switches: Some(2),
            nic: &nic,
            switch: &switch,
            host_link: LinkParams::default(),
            network_link: LinkParams::default(),
            spine_link: LinkParams::default(),
        };
        let m = match fabric("f", &d) {
            Ok(m) => m,
            Err(p) => unreachable!("{p:?}"),
        };
        assert_eq!(m.node_count(), 6 + 3 + 2 + 1);
        let names: Vec<&str> = (0..m.link_count())
            .map(|j| m.link(LinkId::new(j)).name.as_str())
            .collect();
        assert_eq!(
            names,
            [
                "NIC0-H0R0",
                "NIC0-H0R1",
                "NIC1-H1R0",
                "NIC1-H1R1",
                "NIC2-H2R0",
                "NIC2-H2R1",
                "SW0-NIC0",
                "SW0-NIC1",
                "SW1-NIC2",
                "SW-SW0",
                "SW-SW1"
            ]
        );
        assert_eq!(m.devices.len(), 3 + 2 + 1);
    }
}
