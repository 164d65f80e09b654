//! Spanning trees for a broadcast or a reduce that share no link direction, grown level by
//! level from the root.
//!
//! # Why
//!
//! A broadcast is bounded by what the root can send, so each of the root's links should lead
//! a tree of its own; and a pipeline of `k` chunks down trees of height `h` takes `k + h - 1`
//! steps where no two trees meet on a link direction (each tree's chunks move one level per
//! step, and the trees never wait for each other). Edmonds' theorem says how many such trees
//! (arc-disjoint arborescences) a machine holds: as many as the fewest link directions
//! entering any set of nodes without the root. The multiplicative-weights packing spreads the
//! load as well but grows its trees by Prim's algorithm, which hangs each node from the
//! lightest link wherever it is: on a 4 × 4 × 4 torus its trees were up to ten levels high where
//! the machine's diameter is six, and the broadcast of 1 MiB took 50.5 µs against 38.3 µs
//! for six disjoint trees seven levels high.
//!
//! # How
//!
//! Tree `t` starts with the root and the `t`-th of the root's links; then, level by level,
//! every tree hangs the nodes it lacks from its nodes of the level below, over link directions
//! no tree uses yet. Within a level the attachment with the fewest choices goes first (a node
//! reachable over one free direction only takes it before another tree takes that direction
//! for a node it could reach otherwise), then the lowest tree, then the lowest node.
//! Such a greedy growth can leave a tree short where the trees exist (on random regular graphs
//! it found as many trees as the degree on 14 of 100, where other orders among attachments of
//! as few choices found them on 25 more), so where it does, up to [`ATTEMPTS`] more orders are
//! tried, each breaking those ties by a hash of the order, the tree and the node. Where
//! none spans, the construction is tried again with one tree fewer, down to two; a tree count
//! above the fewest links at any compute node is never tried (each tree enters every node over
//! a link of its own).
//!
//! Nothing here is trusted: the trees are proved like every other packing's
//! ([`super::prove_trees`]) and the schedule built on them is verified.

use super::{choose_shares, directions, prove_trees, traffic, Packing, Routes, Tree};
use crate::embed::EmbedError;
use crate::ids::{IdVec, TreeId};
use crate::lower::matching::synth::Rng;
use crate::machine::Machine;
use schedule_ir::{Collective, DirectionId, LinkId, NodeId};
use std::collections::{BTreeMap, BTreeSet};

/// The most trees grown: past this many links at the root, a tree per link costs more to
/// build and to pipeline than the machines that have them (switched fabrics, whose routes
/// share the root's few links anyway) gain.
const MOST_TREES: usize = 16;

/// The most route checks the constructions for one packing may make together before they give
/// up: where routes run through switches every node has one to every other, so a level's
/// choices grow with the square of the nodes, and each of [`ATTEMPTS`] orders reads them
/// again.
const WORK: u64 = 1 << 26;

/// How many orders among attachments of as few choices are tried, beyond the first, before
/// one tree fewer. On 100 random regular graphs (32 to 100 nodes, degrees 3 to 6, 20 seeds
/// each) the first order found as many trees as the degree on 14, these on 25 more; 61 stayed
/// a tree short.
const ATTEMPTS: u64 = 16;

/// The trees for `collective` (a broadcast or a reduce; `None` for any other) that share no
/// link direction, with their LP shares, proved; `None` where fewer than two such trees were
/// found.
pub fn disjoint(machine: &Machine, collective: Collective) -> Result<Option<Packing>, EmbedError> {
    let root = match collective {
        Collective::Broadcast { root } | Collective::Reduce { root } => root,
        _ => return Ok(None),
    };
    let routes = Routes::new(machine);
    let compute = machine.compute_nodes();
    // Each tree enters every node over a link of its own: at most as many trees as the fewest
    // links any compute node's routes start on.
    let links_used = |v: NodeId| {
        let mut first: Vec<LinkId> = routes
            .from
            .get(v)
            .into_iter()
            .flatten()
            .filter_map(|(_, r)| r.first().copied())
            .collect();
        first.sort();
        first.dedup();
        first.len()
    };
    let most = compute.iter().map(|&v| links_used(v)).min().unwrap_or(0);
    let mut work = 0;
    for count in (2..=most.min(MOST_TREES)).rev() {
        for order in 0..=ATTEMPTS {
            if work > WORK {
                return Ok(None);
            }
            let Some(trees) = grow(machine, &routes, (root, count), order, &mut work) else {
                continue;
            };
            prove_trees(machine, &trees)?;
            let loads = trees
                .iter()
                .map(|t| traffic(machine, t, collective))
                .collect();
            return choose_shares(&trees, &loads).map(Some);
        }
    }
    Ok(None)
}

/// One tree's growth: every node's depth (`u32::MAX` outside), its parent with the route
/// down from it (an index into [`Routes::from`] of the parent), and its size.
struct Growing {
    depth: IdVec<NodeId, u32>,
    parent: IdVec<NodeId, Option<(NodeId, usize)>>,
    size: usize,
}

/// `count` trees rooted at `root` that share no link direction, each spanning the compute
/// nodes; `None` where the level-by-level growth leaves a tree short (or `work`, the route
/// checks made so far, passes [`WORK`]). Order 0 breaks ties among attachments of as few
/// choices by the lower tree, then node; order `o` by a hash of `o`, the tree and the node.
fn grow(
    machine: &Machine,
    routes: &Routes,
    (root, count): (NodeId, usize),
    order: u64,
    work: &mut u64,
) -> Option<IdVec<TreeId, Tree>> {
    let n = machine.node_count();
    let p = machine.compute_nodes().len();
    let mut used: IdVec<DirectionId, bool> =
        IdVec::filled(false, DirectionId::count(machine.link_count()));
    let route = |u: NodeId, i: usize| routes.from.get(u).and_then(|r| r.get(i));
    let free = |used: &IdVec<DirectionId, bool>, u: NodeId, i: usize| {
        route(u, i).is_some_and(|(_, links)| {
            directions(machine, u, links).all(|d| !used.get(d).copied().unwrap_or(true))
        })
    };
    let mut trees: Vec<Growing> = Vec::with_capacity(count);
    let attach = |tree: &mut Growing, used: &mut IdVec<DirectionId, bool>, u, i, v| {
        if let Some((_, links)) = route(u, i) {
            for d in directions(machine, u, links) {
                if let Some(slot) = used.get_mut(d) {
                    *slot = true;
                }
            }
        }
        let below = tree.depth.get(u).copied().unwrap_or(0);
        if let (Some(depth), Some(parent)) = (tree.depth.get_mut(v), tree.parent.get_mut(v)) {
            *depth = below.saturating_add(1);
            *parent = Some((u, i));
        }
        tree.size += 1;
    };
    // Each tree starts on a route out of the root that no tree before it has used.
    let starts = routes.from.get(root)?;
    for (i, &(v, _)) in starts.iter().enumerate() {
        if trees.len() == count {
            break;
        }
        if free(&used, root, i) {
            let mut tree = Growing {
                depth: IdVec::filled(u32::MAX, n),
                parent: IdVec::filled(None, n),
                size: 1,
            };
            *tree.depth.get_mut(root)? = 0;
            attach(&mut tree, &mut used, root, i, v);
            trees.push(tree);
        }
    }
    if trees.len() < count {
        return None;
    }
    let tie = |t: usize, v: NodeId| match order {
        0 => t as u64,
        _ => Rng::new((order << 40) ^ ((t as u64) << 32) ^ v.index() as u64).bits(),
    };
    let mut level = 1;
    while trees.iter().any(|t| t.size < p) {
        // Every open attachment at this level: (tree, node) → the (parent, route) choices; and
        // per link direction, the attachments with a choice that crosses it, so that taking a
        // direction re-reads only the choices it closes.
        let mut open: BTreeMap<(usize, NodeId), Vec<(NodeId, usize)>> = BTreeMap::new();
        let mut crossing: BTreeMap<DirectionId, Vec<(usize, NodeId)>> = BTreeMap::new();
        for (t, tree) in trees.iter().enumerate() {
            for (u, _) in tree.depth.iter_enumerated().filter(|&(_, &d)| d == level) {
                for (i, (v, links)) in routes.from.get(u).into_iter().flatten().enumerate() {
                    *work += 1;
                    if tree.depth.get(*v) == Some(&u32::MAX) && free(&used, u, i) {
                        open.entry((t, *v)).or_default().push((u, i));
                        for d in directions(machine, u, links) {
                            crossing.entry(d).or_default().push((t, *v));
                        }
                    }
                }
            }
        }
        if open.is_empty() {
            return None;
        }
        // The fewest choices first, then as `order` breaks ties: (choices, tie, node, tree).
        let mut queue: BTreeSet<(usize, u64, NodeId, usize)> = open
            .iter()
            .map(|(&(t, v), c)| (c.len(), tie(t, v), v, t))
            .collect();
        while let Some((_, _, v, t)) = queue.pop_first() {
            *work += 1;
            if *work > WORK {
                return None;
            }
            let Some(&(u, i)) = open.remove(&(t, v)).as_ref().and_then(|c| c.first()) else {
                continue;
            };
            attach(&mut trees[t], &mut used, u, i, v);
            let taken = route(u, i).map(|(_, links)| directions(machine, u, links));
            for d in taken.into_iter().flatten() {
                for (t, v) in crossing.remove(&d).into_iter().flatten() {
                    let Some(choices) = open.get_mut(&(t, v)) else {
                        continue;
                    };
                    let before = choices.len();
                    *work += before as u64;
                    choices.retain(|&(u, i)| free(&used, u, i));
                    let after = choices.len();
                    if after < before {
                        queue.remove(&(before, tie(t, v), v, t));
                        if after == 0 {
                            open.remove(&(t, v));
                        } else {
                            queue.insert((after, tie(t, v), v, t));
                        }
                    }
                }
            }
        }
        level += 1;
    }
    Some(
        trees
            .into_iter()
            .map(|tree| finish(routes, root, tree))
            .collect(),
    )
}

/// The grown tree as a [`Tree`]: each node's route down from its parent, reversed.
fn finish(routes: &Routes, root: NodeId, tree: Growing) -> Tree {
    let n = tree.parent.len();
    let mut parent = IdVec::filled(None, n);
    let mut via = IdVec::filled(Vec::new(), n);
    for (v, &from) in tree.parent.iter_enumerated() {
        let Some((u, i)) = from else { continue };
        let Some((_, links)) = routes.from.get(u).and_then(|r| r.get(i)) else {
            continue;
        };
        let mut up = links.iter().rev();
        if let Some(&first) = up.next() {
            parent[v] = Some((u, first));
            via[v] = up.copied().collect();
        }
    }
    Tree { root, parent, via }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn machine(text: &str) -> Machine {
        crate::compile::load(text).unwrap().machine
    }

    /// The link directions a broadcast down `tree` uses.
    fn used(machine: &Machine, tree: &Tree) -> Vec<DirectionId> {
        traffic(machine, tree, Collective::Broadcast { root: tree.root })
            .seconds
            .keys()
            .copied()
            .collect()
    }

    #[test]
    fn a_torus_of_three_dimensions_holds_six_shallow_trees_that_share_no_direction() {
        let m = machine(
            "Topology(name: \"t\", machine: Torus(dims: [4, 4, 4], link: (bandwidth_gbps: 100.0, \
             latency_us: 1.0)))",
        );
        let root = NodeId::new(0);
        let packing = disjoint(&m, Collective::Broadcast { root })
            .unwrap()
            .unwrap();
        assert_eq!(packing.trees.len(), 6);
        let mut all: Vec<DirectionId> = Vec::new();
        for tree in packing.trees.iter() {
            assert_eq!(tree.root, root);
            // The diameter is six; the trees stay within one level of it.
            assert!(tree.height() <= 7, "height {}", tree.height());
            all.extend(used(&m, tree));
        }
        let count = all.len();
        all.sort();
        all.dedup();
        assert_eq!(all.len(), count, "two trees share a link direction");
        for share in packing.shares.iter() {
            assert!((share - 1.0 / 6.0).abs() < 1e-9, "share {share}");
        }
    }

    /// A connected random `degree`-regular graph of `nodes` nodes (the configuration model,
    /// drawn again until it has no loop, no repeated link and one component).
    fn regular(nodes: usize, degree: usize, seed: u64) -> Machine {
        let mut rng = Rng::new(seed);
        loop {
            let mut stubs: Vec<usize> = (0..nodes * degree).map(|s| s / degree).collect();
            for i in (1..stubs.len()).rev() {
                stubs.swap(i, rng.below(i + 1));
            }
            let mut links: Vec<(usize, usize)> = stubs
                .chunks(2)
                .map(|pair| (pair[0].min(pair[1]), pair[0].max(pair[1])))
                .collect();
            links.sort();
            let before = links.len();
            links.dedup();
            if links.len() < before || links.iter().any(|&(a, b)| a == b) {
                continue;
            }
            let names: Vec<String> = (0..nodes).map(|v| format!("\"v{v}\"")).collect();
            let edges: Vec<String> = links
                .iter()
                .map(|(a, b)| format!("(id: \"e{a}.{b}\", between: (\"v{a}\", \"v{b}\"))"))
                .collect();
            let text = format!(
                "Topology(name: \"r\", machine: Graph(nodes: [{}], links: [{}]))",
                names.join(", "),
                edges.join(", ")
            );
            // A machine in two pieces is refused by the loader: draw again.
            if let Ok(loaded) = crate::compile::load(&text) {
                return loaded.machine;
            }
        }
    }

    #[test]
    fn other_orders_find_every_tree_where_the_first_leaves_one_short() {
        let mut rescued = 0;
        for seed in 0..8 {
            let m = regular(64, 6, seed);
            let root = m.compute_nodes()[0];
            let packing = disjoint(&m, Collective::Broadcast { root })
                .unwrap()
                .unwrap();
            let mut all: Vec<DirectionId> = Vec::new();
            for tree in packing.trees.iter() {
                all.extend(used(&m, tree));
            }
            let count = all.len();
            all.sort();
            all.dedup();
            assert_eq!(
                all.len(),
                count,
                "seed {seed}: two trees share a link direction"
            );
            let mut work = 0;
            let first = grow(&m, &Routes::new(&m), (root, 6), 0, &mut work);
            if first.is_none() && packing.trees.len() == 6 {
                rescued += 1;
            }
        }
        assert!(rescued > 0, "no graph needed another order");
    }

    #[test]
    fn a_mesh_corner_limits_the_trees_to_its_two_links() {
        // The centre has four links, but a corner only two: no third tree can enter it.
        let m = machine(
            "Topology(name: \"m\", machine: Mesh(dims: [5, 5], link: (bandwidth_gbps: 100.0, \
             latency_us: 1.0)))",
        );
        let root = NodeId::new(12);
        let packing = disjoint(&m, Collective::Reduce { root }).unwrap().unwrap();
        assert_eq!(packing.trees.len(), 2);
    }

    #[test]
    fn collectives_without_a_root_and_single_link_roots_get_none() {
        let m = machine(
            "Topology(name: \"r\", machine: Mesh(dims: [6], link: (bandwidth_gbps: 100.0, \
             latency_us: 1.0)))",
        );
        assert!(disjoint(&m, Collective::AllReduce).unwrap().is_none());
        // The line's ends have one link each: one tree only, which is no packing of its own.
        let root = NodeId::new(2);
        assert!(disjoint(&m, Collective::Broadcast { root })
            .unwrap()
            .is_none());
    }
}
