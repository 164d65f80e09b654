//! Tests of the spanning-tree packing and its proof.
#![allow(clippy::unwrap_used, clippy::panic)]

use super::*;
use crate::machine::{LinkInfo, NodeInfo, Shape};

fn machine(text: &str) -> Machine {
    crate::compile::load(text).unwrap().machine
}

fn petersen() -> Machine {
    machine(
        r#"Topology(name: "petersen", machine: Graph(
            nodes: ["o0", "o1", "o2", "o3", "o4", "i0", "i1", "i2", "i3", "i4"],
            links: [
                (id: "o01", between: ("o0", "o1")), (id: "o12", between: ("o1", "o2")),
                (id: "o23", between: ("o2", "o3")), (id: "o34", between: ("o3", "o4")),
                (id: "o40", between: ("o4", "o0")), (id: "s0", between: ("o0", "i0")),
                (id: "s1", between: ("o1", "i1")), (id: "s2", between: ("o2", "i2")),
                (id: "s3", between: ("o3", "i3")), (id: "s4", between: ("o4", "i4")),
                (id: "i02", between: ("i0", "i2")), (id: "i24", between: ("i2", "i4")),
                (id: "i41", between: ("i4", "i1")), (id: "i13", between: ("i1", "i3")),
                (id: "i30", between: ("i3", "i0")),
            ]))"#,
    )
}

/// The share of the vector the busiest link direction carries (all links 100 Gbit/s here).
fn busiest(m: &Machine, packing: &Packing, collective: Collective) -> f64 {
    let mut busy = std::collections::BTreeMap::<DirectionId, f64>::new();
    for (tree, x) in packing.trees.iter().zip(&packing.shares) {
        for (d, s) in traffic(m, tree, collective).seconds {
            *busy.entry(d).or_default() += x * s * 100.0 / 8.0;
        }
    }
    busy.values().copied().fold(0.0, f64::max)
}

#[test]
fn a_ring_packs_into_its_paths_with_equal_shares() {
    let m = machine(r#"Topology(name: "r", machine: Ring(nodes: 6))"#);
    let packing = pack(&m, Collective::AllReduce).unwrap();
    prove_trees(&m, &packing.trees).unwrap();
    // Every spanning tree of a ring is the ring minus one link; the packing uses all six.
    let mut missing: Vec<LinkId> = packing
        .trees
        .iter()
        .map(|t| {
            let used: BTreeSet<LinkId> = t.edges().map(|(_, _, l)| l).collect();
            assert_eq!(used.len(), 5);
            let absent: Vec<LinkId> = (0..6)
                .map(LinkId::new)
                .filter(|l| !used.contains(l))
                .collect();
            assert_eq!(absent.len(), 1);
            absent[0]
        })
        .collect();
    missing.sort();
    assert_eq!(missing, (0..6).map(LinkId::new).collect::<Vec<_>>());
    for x in &packing.shares {
        assert!((x - 1.0 / 6.0).abs() < 1e-6, "{:?}", packing.shares);
    }
    // So every direction carries 5/6 of the vector: the ring's allreduce bound 2(p-1)/(2p).
    assert!((busiest(&m, &packing, Collective::AllReduce) - 5.0 / 6.0).abs() < 1e-6);
}

#[test]
fn petersen_reaches_the_nash_williams_fractional_packing() {
    // 15 links, 9 per tree: at best 15/9 trees, so every direction carries 9/15 = 0.6 of the
    // vector — exactly the allreduce traffic bound 2(p-1)m / (p · 3 links).
    let m = petersen();
    let packing = pack(&m, Collective::AllReduce).unwrap();
    assert!(packing.trees.len() >= 2);
    let load = busiest(&m, &packing, Collective::AllReduce);
    assert!((0.6 - 1e-9..=0.6 * 1.01).contains(&load), "{load}");
    let sum: f64 = packing.shares.iter().sum();
    assert!((sum - 1.0).abs() < 1e-9);
}

#[test]
fn broadcast_trees_hang_from_the_root_and_use_its_three_links() {
    let m = petersen();
    let root = m.node_by_name("i3").unwrap();
    let packing = pack(&m, Collective::Broadcast { root }).unwrap();
    assert!(packing.trees.iter().all(|t| t.root == root));
    // Three arborescences that share no link direction exist (Edmonds); the root's egress
    // bounds a broadcast to 1/3 of the vector per link.
    let load = busiest(&m, &packing, Collective::Broadcast { root });
    assert!(load < 1.0 / 3.0 * 1.02, "{load}");
}

#[test]
fn packing_is_deterministic() {
    let m = petersen();
    for c in [Collective::AllReduce, Collective::AllGather] {
        assert_eq!(pack(&m, c).unwrap(), pack(&m, c).unwrap());
    }
}

#[test]
fn trees_hang_from_their_centre_for_allreduce() {
    let m = machine(r#"Topology(name: "r", machine: Ring(nodes: 7))"#);
    for tree in pack(&m, Collective::AllReduce).unwrap().trees {
        // A 7-node path hung from its middle is 3 deep.
        assert_eq!(tree.height(), 3, "{}", tree.describe(&m));
        assert_eq!(tree.rerooted(tree.root), tree);
    }
}

/// The centre found along a longest path is the one re-rooting at every node finds: the least
/// height, of equal heights the lowest id; checked on every tree of every candidate round of
/// machines whose trees differ in shape (paths of both parities, a hypercube, the Petersen
/// graph, a mesh with dead ends), and from every root each tree can hang from.
#[test]
fn the_centre_is_the_node_of_least_height() {
    let machines = [
        machine(r#"Topology(name: "r", machine: Ring(nodes: 7))"#),
        machine(r#"Topology(name: "r", machine: Ring(nodes: 8))"#),
        machine(r#"Topology(name: "h", machine: Hypercube(dims: 4))"#),
        machine(r#"Topology(name: "m", machine: Mesh(dims: [3, 5]))"#),
        petersen(),
    ];
    for m in &machines {
        let compute = m.compute_nodes();
        for tree in pack(m, Collective::AllReduce).unwrap().trees {
            for &root in &compute {
                let hung = tree.rerooted(root);
                let slow = compute
                    .iter()
                    .map(|&n| (hung.rerooted(n).height(), n))
                    .min()
                    .unwrap()
                    .1;
                assert_eq!(hung.centre(&compute), slow, "{}", hung.describe(m));
            }
        }
    }
}

#[test]
fn the_proof_rejects_what_is_not_a_spanning_tree() {
    let m = petersen();
    let good = pack(&m, Collective::AllReduce).unwrap().trees[TreeId(0)].clone();
    let root = good.root;
    let (child, (parent, link)) = good
        .parent
        .iter_enumerated()
        .find_map(|(c, p)| p.map(|p| (c, p)))
        .unwrap();
    let one = |tree: Tree| IdVec::from_raw(vec![tree]);
    let message = |tree: Tree| prove_trees(&m, &one(tree)).unwrap_err().to_string();

    let mut t = good.clone();
    t.parent[child] = None;
    assert!(message(t).contains("is not in the tree"));

    let mut t = good.clone();
    t.parent[root] = Some((child, link));
    assert!(message(t).contains("has a parent"));

    // A link that does not join the child and its parent.
    let wrong = (0..m.link_count())
        .map(LinkId::new)
        .find(|&l| {
            let (a, b) = m.endpoints(l);
            ![a, b].contains(&child) || ![a, b].contains(&parent)
        })
        .unwrap();
    let mut t = good.clone();
    t.parent[child] = Some((parent, wrong));
    assert!(message(t).contains("does not lead to"));

    // A parent loop: a node two levels down becomes its parent's parent.
    let depths = good.depths();
    let deep = (0..m.node_count())
        .map(NodeId::new)
        .find(|&n| depths[n] == Some(2))
        .unwrap();
    let (up, up_link) = good.parent[deep].unwrap();
    let mut t = good.clone();
    t.parent[up] = Some((deep, up_link));
    assert!(message(t).contains("cycle of parents"));

    assert!(prove_trees(&m, &one(good)).is_ok());
}

#[test]
fn tree_edges_route_through_switches() {
    let link = || LinkInfo {
        name: String::new(),
        bandwidth_gbps: 100.0,
        latency_us: 1.0,
        lanes: 1,
    };
    let node = |name: &str, kind| NodeInfo {
        name: name.to_string(),
        kind,
    };
    let m = Machine::from_parts(
        "star",
        vec![
            node("a", NodeKind::Compute),
            node("b", NodeKind::Compute),
            node("sw", NodeKind::Switch),
        ],
        vec![(0, 2, link()), (1, 2, link())],
        Shape::Graph,
    );
    let packing = pack(&m, Collective::AllReduce).unwrap();
    let tree = &packing.trees[TreeId(0)];
    let child = if tree.root == NodeId::new(0) { 1 } else { 0 };
    // The only edge is the route a – sw – b, both links.
    assert_eq!(tree.route_up(NodeId::new(child)).len(), 2);
    assert_eq!(packing.shares.as_slice(), [1.0]);
}

/// Where the first packing leaves the links unbalanced (the 8 × 8 mesh: 9% above the average
/// direction) a second, wider one is offered, lighter by at least the threshold and proved;
/// where the first is already at the floor (a ring's paths) there is only one. No packing is
/// ever lighter than the floor that decides it.
#[test]
fn a_second_packing_is_offered_only_where_it_is_lighter() {
    let mesh = machine(
        r#"Topology(name: "m", machine: Mesh(dims: [8, 8], link: (bandwidth_gbps: 100.0)))"#,
    );
    let found = packings(&mesh, Collective::AllReduce).unwrap();
    assert_eq!(found.len(), 2);
    assert!(
        found[1].busiest < found[0].busiest * (1.0 - WIDE_GAIN),
        "{} against {}",
        found[1].busiest,
        found[0].busiest
    );
    for p in &found {
        prove_trees(&mesh, &p.trees).unwrap();
        assert!((p.shares.iter().sum::<f64>() - 1.0).abs() < 1e-9);
        // The LP's figure is the busiest direction of the shares it returned.
        let again = busiest(&mesh, p, Collective::AllReduce) * 8.0 / 100.0;
        assert!(
            (again - p.busiest).abs() < 1e-9 * again.max(1.0),
            "{again} {}",
            p.busiest
        );
    }
    let ring = machine(r#"Topology(name: "r", machine: Ring(nodes: 8))"#);
    assert_eq!(packings(&ring, Collective::AllReduce).unwrap().len(), 1);

    // The floor: the lightest tree's total traffic over the directions.
    for (m, collective) in [
        (mesh, Collective::AllReduce),
        (petersen(), Collective::AllGather),
        (ring, Collective::ReduceScatter),
    ] {
        let directions = 2.0 * m.link_count() as f64;
        for p in packings(&m, collective).unwrap() {
            let least = p
                .trees
                .iter()
                .map(|t| traffic(&m, t, collective).seconds.values().sum::<f64>())
                .fold(f64::INFINITY, f64::min)
                / directions;
            assert!(p.busiest >= least * (1.0 - 1e-9), "{} < {least}", p.busiest);
        }
    }
}

/// Prim's algorithm as a heap of every offer, each with its route: what [`prim`] scanned
/// offers for must choose, attachment by attachment.
fn prim_by_heap(
    machine: &Machine,
    routes: &Routes,
    start: NodeId,
    (collective, attach): (Collective, Attach),
    load: &IdVec<DirectionId, f64>,
) -> Option<Tree> {
    use std::cmp::Reverse;
    type Offer = Reverse<(u64, u64, NodeId, Vec<LinkId>, NodeId)>;
    let n = machine.node_count();
    let length = |d: DirectionId| (ETA * load.get(d).copied().unwrap_or(0.0)).exp();
    let mut parent = IdVec::filled(None, n);
    let mut via = IdVec::filled(Vec::new(), n);
    let mut inside: IdVec<NodeId, bool> = IdVec::filled(false, n);
    let mut heap: std::collections::BinaryHeap<Offer> = Default::default();
    let push = |heap: &mut std::collections::BinaryHeap<Offer>, u: NodeId, depth: u64| {
        for (v, route) in &routes.from[u] {
            let cost = route_length(machine, (u, route), collective, &length);
            let keys = match attach {
                Attach::Cheapest => (cost.to_bits(), depth + 1),
                Attach::Shallowest => (depth + 1, cost.to_bits()),
            };
            heap.push(Reverse((keys.0, keys.1, *v, route.clone(), u)));
        }
    };
    inside[start] = true;
    let mut reached = 1;
    push(&mut heap, start, 0);
    while let Some(Reverse((first, second, v, route, u))) = heap.pop() {
        if std::mem::replace(&mut inside[v], true) {
            continue;
        }
        let mut up = route.into_iter().rev();
        if let Some(first) = up.next() {
            parent[v] = Some((u, first));
            via[v] = up.collect();
        }
        reached += 1;
        let depth = match attach {
            Attach::Cheapest => second,
            Attach::Shallowest => first,
        };
        push(&mut heap, v, depth);
    }
    (reached == machine.compute_nodes().len()).then_some(Tree {
        root: start,
        parent,
        via,
    })
}

/// [`prim`] keeps one offer per node and scans them: it must grow the tree a heap of every
/// offer grows, ties included (equal lengths are everywhere on a machine of equal links, and
/// through switches every node is offered by every other), from every start, under both
/// attachment orders, with no load and with uneven loads.
#[test]
fn prim_by_one_offer_per_node_grows_the_tree_a_heap_of_every_offer_grows() {
    let fabric = machine(
        r#"Topology(name: "f", machine: Fabric(hosts: 4, ranks_per_host: 4, nics_per_host: 2,
        host_fabric: Switch(link: (bandwidth_gbps: 3600.0)), leaf_switches: 2, spines: 2,
        host_link: (bandwidth_gbps: 512.0), network_link: (bandwidth_gbps: 400.0),
        spine_link: (bandwidth_gbps: 800.0, lanes: 2)))"#,
    );
    let torus = machine(
        r#"Topology(name: "t", machine: Torus(dims: [4, 4], link: (bandwidth_gbps: 100.0)))"#,
    );
    let mut compared = 0;
    for m in [fabric, torus, petersen()] {
        let routes = Routes::new(&m);
        let directions = DirectionId::count(m.link_count());
        let even: IdVec<DirectionId, f64> = IdVec::filled(0.0, directions);
        let uneven: IdVec<DirectionId, f64> = (0..directions)
            .map(|d| ((d * 7919) % 13) as f64 / 4.0)
            .collect();
        for load in [&even, &uneven] {
            for start in m.compute_nodes() {
                for collective in [Collective::AllReduce, Collective::Broadcast { root: start }] {
                    for attach in [Attach::Cheapest, Attach::Shallowest] {
                        let scanned = prim(&m, &routes, start, (collective, attach), load);
                        let heaped = prim_by_heap(&m, &routes, start, (collective, attach), load);
                        assert!(scanned.is_some());
                        assert_eq!(scanned, heaped, "from {start}, {collective:?}, {attach:?}");
                        compared += 1;
                    }
                }
            }
        }
    }
    assert_eq!(compared, 2 * 2 * 2 * (16 + 16 + 10));
}
