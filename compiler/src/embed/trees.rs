//! Spanning-tree packing: rooted spanning trees over the compute nodes, with a share of the
//! vector each, that together spread a collective's traffic over every link direction.
//!
//! # Why trees
//!
//! Every connected machine has spanning trees, and every collective runs on a tree: reduce
//! toward a root, broadcast from it, flood each owner's piece outward. One tree uses only
//! `p - 1` links, so the idea of Blink (Wang et al., *Blink: Fast and Generic Collectives for
//! Distributed ML*, MLSys 2020) is to run several trees at once, each on its share of the
//! vector, and to choose the trees and shares so that the busiest link direction is as lightly
//! loaded as possible. How many trees a machine can carry at full rate is bounded by the
//! Nash-Williams/Tutte theorem: a graph has `k` edge-disjoint spanning trees iff every
//! partition of its nodes into `r` parts is crossed by at least `k(r - 1)` edges; fractionally,
//! the best packing is `min over partitions of crossing / (r - 1)`, which for the partition
//! into single nodes is `links / (p - 1)` — exactly the total-traffic bound of allreduce.
//!
//! # How the trees are found
//!
//! A fractional packing by multiplicative weights (the Garg–Könemann scheme): every link
//! direction has a length `exp(η · load)`, where `load` counts how much the trees chosen so far
//! put on it (relative to the fastest link); each round grows a spanning tree with Prim's
//! algorithm minimising the total length of the directions the collective will use on it, then
//! adds that tree's traffic to the loads. Ties go to the shallower attachment (shallow trees
//! fill their pipeline sooner), then to the lower node and link ids, so the result is
//! deterministic. The shares are then chosen by the bandwidth LP of [`crate::lower::balance`]
//! over the candidates; trees that get a negligible share are dropped and the LP solved again.
//!
//! Every tree is *proved* ([`prove_trees`]) before use: it spans exactly the compute nodes, has
//! `p - 1` links, reaches its root from every node without a cycle, and every link joins the
//! nodes it claims to.

use super::EmbedError;
use crate::ids::{IdVec, TreeId};
use crate::lower::balance::{self, Load};
use crate::machine::Machine;
use schedule_ir::{Collective, DirectionId, LinkId, NodeId, NodeKind};
use std::collections::BTreeSet;

mod disjoint;

/// How strongly a direction's length grows with its load (`exp(η · load)`).
const ETA: f64 = 1.0;

/// Shares below this fraction of the largest are dropped: such a tree would carry a chunk or
/// two and add pipeline steps for almost no bandwidth.
const MIN_RELATIVE_SHARE: f64 = 0.08;

/// The most candidate trees generated in the first run of rounds.
const MAX_CANDIDATES: usize = 24;

/// How many times the first run's rounds the second run of [`packings`] grows.
const WIDE_ROUNDS: usize = 5;

/// How much lighter (a fraction) the second packing's busiest direction must be to be tried.
const WIDE_GAIN: f64 = 0.005;

/// A spanning tree over the compute nodes with a root. A tree edge is a direct link or a
/// route through switches.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tree {
    /// Where reductions end and broadcasts start.
    pub root: NodeId,
    /// Indexed by node: for every compute node but the root, its parent and the first link of
    /// the route from the node up to it; `None` for the root and for nodes outside the tree.
    pub parent: IdVec<NodeId, Option<(NodeId, LinkId)>>,
    /// Indexed by node: the further links of the route up to the parent, through switches;
    /// empty for a direct link (and missing entries count as empty).
    pub via: IdVec<NodeId, Vec<LinkId>>,
}

impl Tree {
    /// The tree's edges as `(child, parent, first link of the route up)`, in child order.
    pub fn edges(&self) -> impl Iterator<Item = (NodeId, NodeId, LinkId)> + '_ {
        self.parent
            .iter_enumerated()
            .filter_map(|(c, p)| p.map(|(p, l)| (c, p, l)))
    }

    /// The links of the route from `child` up to its parent, in order (empty for the root).
    pub fn route_up(&self, child: NodeId) -> Vec<LinkId> {
        let Some(Some((_, first))) = self.parent.get(child) else {
            return Vec::new();
        };
        let mut route = vec![*first];
        route.extend(self.via.get(child).into_iter().flatten());
        route
    }

    /// Children of every node, as `(child, link)` in child order; indexed by node.
    pub fn children(&self) -> IdVec<NodeId, Vec<(NodeId, LinkId)>> {
        let mut out = IdVec::filled(Vec::new(), self.parent.len());
        for (c, p, l) in self.edges() {
            if let Some(list) = out.get_mut(p) {
                list.push((c, l));
            }
        }
        out
    }

    /// The nodes from the root down, each after its parent (breadth first, children in id
    /// order).
    pub fn top_down(&self) -> Vec<NodeId> {
        let children = self.children();
        let mut order = vec![self.root];
        let mut i = 0;
        while let Some(&n) = order.get(i) {
            if order.len() > self.parent.len() {
                break; // not a tree; the proof reports it
            }
            order.extend(children.get(n).into_iter().flatten().map(|&(c, _)| c));
            i += 1;
        }
        order
    }

    /// Depth of every node below the root (`None` outside the tree); indexed by node.
    pub fn depths(&self) -> IdVec<NodeId, Option<usize>> {
        let mut depth = IdVec::filled(None, self.parent.len());
        for n in self.top_down() {
            let d = match self.parent.get(n).copied().flatten() {
                Some((p, _)) => depth.get(p).copied().flatten().map_or(0, |d| d + 1),
                None => 0,
            };
            if let Some(slot) = depth.get_mut(n) {
                *slot = Some(d);
            }
        }
        depth
    }

    /// The number of links on the longest path from the root.
    pub fn height(&self) -> usize {
        self.depths().into_iter().flatten().max().unwrap_or(0)
    }

    /// The same edges, hanging from another root.
    pub fn rerooted(&self, root: NodeId) -> Tree {
        let n = self.parent.len();
        // Per node: its tree neighbours and the route to each.
        let mut adjacent: IdVec<NodeId, Vec<(NodeId, Vec<LinkId>)>> = IdVec::filled(Vec::new(), n);
        for (c, p, _) in self.edges() {
            if c.index() < n && p.index() < n {
                let up = self.route_up(c);
                let down = up.iter().rev().copied().collect();
                adjacent[c].push((p, up));
                adjacent[p].push((c, down));
            }
        }
        adjacent.iter_mut().for_each(|a| a.sort());
        let mut parent = IdVec::filled(None, n);
        let mut via = IdVec::filled(Vec::new(), n);
        let mut seen: IdVec<NodeId, bool> = IdVec::filled(false, n);
        let mut queue = std::collections::VecDeque::from([root]);
        if let Some(s) = seen.get_mut(root) {
            *s = true;
        }
        while let Some(u) = queue.pop_front() {
            for &(v, ref down) in adjacent.get(u).into_iter().flatten() {
                if !std::mem::replace(&mut seen[v], true) {
                    let mut up = down.iter().rev().copied();
                    if let Some(first) = up.next() {
                        parent[v] = Some((u, first));
                        via[v] = up.collect();
                    }
                    queue.push_back(v);
                }
            }
        }
        Tree { root, parent, via }
    }

    /// The node whose farthest node is nearest (the tree's centre; ties to the lower id), so
    /// that reduce-then-broadcast crosses as few levels as possible. `nodes` are the tree's
    /// own nodes (every compute node, as [`pack`] builds them); `None` for a node outside it.
    ///
    /// Found in linear time, not by re-rooting at every node: in a tree the nodes of least
    /// eccentricity are the middle one or two nodes of any longest path (Jordan's theorem), and
    /// a longest path runs from a node farthest from any start to the node farthest from it.
    pub fn centre(&self, nodes: &[NodeId]) -> NodeId {
        let n = self.parent.len();
        let mut adjacent: IdVec<NodeId, Vec<NodeId>> = IdVec::filled(Vec::new(), n);
        for (c, p, _) in self.edges() {
            if c.index() < n && p.index() < n {
                adjacent[c].push(p);
                adjacent[p].push(c);
            }
        }
        // Breadth first from `from`: the last node reached (a farthest one) and each node's
        // predecessor on the way.
        let farthest = |from: NodeId| -> (NodeId, IdVec<NodeId, Option<NodeId>>) {
            let mut before: IdVec<NodeId, Option<NodeId>> = IdVec::filled(None, n);
            let mut seen: IdVec<NodeId, bool> = IdVec::filled(false, n);
            let mut queue = std::collections::VecDeque::from([from]);
            let mut last = from;
            if let Some(s) = seen.get_mut(from) {
                *s = true;
            }
            while let Some(u) = queue.pop_front() {
                last = u;
                for &v in adjacent.get(u).into_iter().flatten() {
                    if !std::mem::replace(&mut seen[v], true) {
                        before[v] = Some(u);
                        queue.push_back(v);
                    }
                }
            }
            (last, before)
        };
        let (a, _) = farthest(self.root);
        let (b, before) = farthest(a);
        let mut path = vec![b];
        while let Some(&Some(u)) = before.get(*path.last().unwrap_or(&b)) {
            path.push(u);
        }
        // `path` runs b … a over `len - 1` links: one middle node if that is even, two if odd.
        let len = path.len();
        let middle = [path[(len - 1) / 2], path[len / 2]];
        middle
            .into_iter()
            .filter(|m| nodes.contains(m))
            .min()
            .unwrap_or(self.root)
    }

    /// The tree with names: `root a; b -L1-> a, c -L2-> b`.
    pub fn describe(&self, machine: &Machine) -> String {
        let name = |n: NodeId| machine.node(n).name.clone();
        let edges: Vec<String> = self
            .edges()
            .map(|(c, p, _)| {
                let route: Vec<&str> = self
                    .route_up(c)
                    .into_iter()
                    .map(|l| machine.link(l).name.as_str())
                    .collect();
                format!("{} -{}-> {}", name(c), route.join(","), name(p))
            })
            .collect();
        format!("root {}; {}", name(self.root), edges.join(", "))
    }
}

/// Trees and the share of the vector each carries.
#[derive(Clone, Debug, PartialEq)]
pub struct Packing {
    /// The proved trees.
    pub trees: IdVec<TreeId, Tree>,
    /// One share per tree, positive, summing to 1.
    pub shares: IdVec<TreeId, f64>,
    /// The seconds per gigabyte of the busiest link direction with these shares: what the
    /// LP minimised.
    pub busiest: f64,
}

/// The trees and shares for `collective` on `machine`, proved (see [`packings`]): the
/// packing from the first, shorter run of rounds.
pub fn pack(machine: &Machine, collective: Collective) -> Result<Packing, EmbedError> {
    let mut all = packings(machine, collective)?;
    Ok(all.swap_remove(0))
}

/// Packings for `collective` on `machine`, proved; broadcast and reduce trees are rooted at the
/// collective's root, the others at each tree's centre. The first packing mixes the trees of
/// the first [`candidate_rounds`] rounds; the second, when there is one, those of
/// [`WIDE_ROUNDS`] times as many, kept only where the LP finds it a busiest direction at least
/// [`WIDE_GAIN`] lighter. More trees let the shares even out the links (on an 8 × 8 mesh the
/// busiest direction carries 9% more than the average with the first, under 1% with the
/// second), but they may be deeper or round worse into whole pipeline chunks, so the lowering
/// prices both and keeps the cheaper schedule. A broadcast or a reduce also gets, where the
/// machine holds two or more, trees that share no link direction ([`disjoint::disjoint`]):
/// fewer levels than the weighted packing's, and no tree waits for another.
pub fn packings(machine: &Machine, collective: Collective) -> Result<Vec<Packing>, EmbedError> {
    let mut packed = weighted(machine, collective)?;
    packed.extend(disjoint::disjoint(machine, collective)?);
    Ok(packed)
}

/// [`packings`] by multiplicative weights: the shorter run's, and the wider run's where it
/// is lighter.
fn weighted(machine: &Machine, collective: Collective) -> Result<Vec<Packing>, EmbedError> {
    let routes = Routes::new(machine);
    let compute = machine.compute_nodes();
    let Some(&first) = compute.first() else {
        return Err(EmbedError::NotApplicable(
            "the machine has no compute node".to_string(),
        ));
    };
    let fixed_root = match collective {
        Collective::Broadcast { root } | Collective::Reduce { root } => Some(root),
        _ => None,
    };
    if let Some(root) = fixed_root.filter(|r| !compute.contains(r)) {
        return Err(EmbedError::NotApplicable(format!(
            "the root {root} is not a compute node of the machine"
        )));
    }
    let mut candidates: IdVec<TreeId, Tree> = IdVec::new();
    let mut seen: BTreeSet<Vec<Vec<LinkId>>> = BTreeSet::new();
    let mut load: IdVec<DirectionId, f64> =
        IdVec::filled(0.0, DirectionId::count(machine.link_count()));
    let fastest = (0..machine.link_count())
        .map(|l| machine.link(LinkId::new(l)).bandwidth_gbps)
        .fold(0.0, f64::max);
    let narrow = candidate_rounds(machine.link_count(), compute.len());
    let mut grow = |rounds: std::ops::Range<usize>, candidates: &mut IdVec<TreeId, Tree>| {
        for round in rounds {
            let start = fixed_root
                .or_else(|| compute.get(round % compute.len()).copied())
                .unwrap_or(first);
            let Some(tree) = prim(
                machine,
                &routes,
                start,
                (collective, Attach::Cheapest),
                &load,
            ) else {
                return Err(EmbedError::NotATree {
                    tree: candidates.len(),
                    detail: "the compute nodes are not connected".to_string(),
                });
            };
            let tree = match fixed_root {
                Some(_) => tree,
                None => tree.rerooted(tree.centre(&compute)),
            };
            for (d, s) in traffic(machine, &tree, collective).seconds {
                // In units of "the whole vector over the fastest link".
                if let Some(l) = load.get_mut(d) {
                    *l += s * fastest / 8.0;
                }
            }
            let mut key: Vec<Vec<LinkId>> = tree
                .edges()
                .map(|(c, _, _)| {
                    let mut r = tree.route_up(c);
                    r.sort();
                    r
                })
                .collect();
            key.sort();
            if seen.insert(key) {
                candidates.push(tree);
            }
        }
        prove_trees(machine, candidates)
    };
    grow(0..narrow, &mut candidates)?;
    // Each candidate's traffic, computed once for both LPs and the floor.
    let mut loads: IdVec<TreeId, Load> = candidates
        .iter()
        .map(|t| traffic(machine, t, collective))
        .collect();
    let shorter = choose_shares(&candidates, &loads)?;
    // Every mix of trees puts on the directions, together, at least the lightest tree's
    // total, so its busiest direction carries at least that over the directions' number.
    let directions = (2 * machine.link_count()).max(1) as f64;
    let least = loads
        .iter()
        .map(|l| l.seconds.values().sum::<f64>())
        .fold(f64::INFINITY, f64::min)
        / directions;
    if shorter.busiest <= least * (1.0 + WIDE_GAIN) {
        return Ok(vec![shorter]);
    }
    let before = candidates.len();
    grow(narrow..narrow * WIDE_ROUNDS, &mut candidates)?;
    if candidates.len() == before {
        return Ok(vec![shorter]);
    }
    for t in candidates.iter().skip(before) {
        loads.push(traffic(machine, t, collective));
    }
    let wide = choose_shares(&candidates, &loads)?;
    if wide.busiest < shorter.busiest * (1.0 - WIDE_GAIN) {
        Ok(vec![shorter, wide])
    } else {
        Ok(vec![shorter])
    }
}

/// The most starts [`shallow`] tries for a tree of least height.
const SHALLOW_STARTS: usize = 32;

/// One breadth-first tree carrying the whole vector, proved: rooted at the collective's root,
/// or else at the start (of up to [`SHALLOW_STARTS`] compute nodes spread over the machine)
/// whose tree is lowest. The packings trade levels for spread load; at sizes where every step
/// costs mostly its latency the fewest levels win, so the lowering prices this one too (on a
/// 3 × 3 torus with two fast links, a broadcast of 1 KiB in 3 steps instead of 4).
pub fn shallow(machine: &Machine, collective: Collective) -> Result<Packing, EmbedError> {
    let routes = Routes::new(machine);
    let compute = machine.compute_nodes();
    let load: IdVec<DirectionId, f64> =
        IdVec::filled(0.0, DirectionId::count(machine.link_count()));
    let starts: Vec<NodeId> = match collective {
        Collective::Broadcast { root } | Collective::Reduce { root } => vec![root],
        _ => {
            let every = compute.len().div_ceil(SHALLOW_STARTS).max(1);
            compute.iter().step_by(every).copied().collect()
        }
    };
    let tree = starts
        .into_iter()
        .filter_map(|start| {
            prim(
                machine,
                &routes,
                start,
                (collective, Attach::Shallowest),
                &load,
            )
        })
        .min_by_key(Tree::height)
        .ok_or_else(|| EmbedError::NotATree {
            tree: 0,
            detail: "the compute nodes are not connected".to_string(),
        })?;
    let trees: IdVec<TreeId, Tree> = IdVec::from_fn(1, |_| tree.clone());
    prove_trees(machine, &trees)?;
    let load = traffic(machine, &tree, collective);
    let busiest = load.seconds.values().copied().fold(0.0, f64::max);
    Ok(Packing {
        trees,
        shares: IdVec::from_fn(1, |_| 1.0),
        busiest,
    })
}

/// How many trees to try: about four times the Nash-Williams estimate of how many fit, so that
/// the LP has enough different trees to mix (on the bundled examples, fewer rounds left the
/// busiest direction 4–15% above the fractional optimum; more found nothing better).
fn candidate_rounds(links: usize, nodes: usize) -> usize {
    let fit = links.div_ceil(nodes.saturating_sub(1).max(1));
    (4 * fit + 8).clamp(8, MAX_CANDIDATES)
}

/// The LP shares over `candidates`, whose traffic is `loads`; negligible ones dropped and the rest
/// re-balanced.
fn choose_shares(
    candidates: &IdVec<TreeId, Tree>,
    loads: &IdVec<TreeId, Load>,
) -> Result<Packing, EmbedError> {
    let failed = || EmbedError::NotApplicable("the tree-share LP could not be solved".to_string());
    let shares = balance::balance(loads).ok_or_else(failed)?;
    let largest = shares.iter().copied().fold(0.0, f64::max);
    let keep: Vec<TreeId> = shares
        .iter_enumerated()
        .filter(|&(_, &x)| x >= MIN_RELATIVE_SHARE * largest)
        .map(|(t, _)| t)
        .collect();
    let kept_loads: IdVec<TreeId, Load> =
        keep.iter().filter_map(|&t| loads.get(t).cloned()).collect();
    let shares = balance::balance(&kept_loads).ok_or_else(failed)?;
    let trees = keep
        .iter()
        .filter_map(|&t| candidates.get(t).cloned())
        .collect();
    let busiest = balance::busiest(&kept_loads, &shares);
    Ok(Packing {
        trees,
        shares,
        busiest,
    })
}

/// Seconds per gigabyte each link direction spends when `tree` carries the whole vector of
/// `collective`: reduce-then-broadcast crosses every tree link once each way; a broadcast
/// crosses it downward, a reduce upward; an allgather floods every owner's piece outward, so
/// direction `u → v` carries the pieces of the owners on `u`'s side (and a reduce-scatter,
/// its mirror image, those of the owners on `v`'s side).
pub fn traffic(machine: &Machine, tree: &Tree, collective: Collective) -> Load {
    let p = tree.top_down().len().max(1) as f64;
    let below = subtree_sizes(tree);
    let mut load = Load::default();
    for (child, _, _) in tree.edges() {
        let inside = below.get(child).copied().unwrap_or(0) as f64 / p;
        let (up_share, down_share) = match collective {
            Collective::AllReduce => (1.0, 1.0),
            Collective::Broadcast { .. } => (0.0, 1.0),
            Collective::Reduce { .. } => (1.0, 0.0),
            Collective::AllGather => (inside, 1.0 - inside),
            Collective::ReduceScatter => (1.0 - inside, inside),
        };
        let mut at = child;
        for link in tree.route_up(child) {
            let (a, b) = machine.endpoints(link);
            let up = DirectionId::new(link, at != a);
            let down = DirectionId::new(link, at == a);
            at = if at == a { b } else { a };
            let seconds = 8.0 / machine.link(link).bandwidth_gbps;
            for (d, share) in [(up, up_share), (down, down_share)] {
                if share > 0.0 {
                    *load.seconds.entry(d).or_default() += share * seconds;
                }
            }
        }
    }
    load
}

/// The number of nodes in every node's subtree (itself included); indexed by node.
pub fn subtree_sizes(tree: &Tree) -> IdVec<NodeId, usize> {
    let mut size: IdVec<NodeId, usize> = IdVec::filled(0, tree.parent.len());
    // The walk follows the tree's own parent links, in range of its tables.
    for n in tree.top_down().into_iter().rev() {
        size[n] += 1;
        if let Some((p, _)) = tree.parent[n] {
            size[p] += size[n];
        }
    }
    size
}

/// The routes a tree edge may take from every compute node: each direct link to another
/// compute node, and for every compute node reachable through switches only, the route with
/// the fewest links (ties to lower link ids). Indexed by node: `(other end, links in order)`.
struct Routes {
    from: IdVec<NodeId, Vec<(NodeId, Vec<LinkId>)>>,
}

impl Routes {
    fn new(machine: &Machine) -> Self {
        let n = machine.node_count();
        let compute = |v: NodeId| machine.node(v).kind == NodeKind::Compute;
        let mut from = IdVec::filled(Vec::new(), n);
        for u in machine.compute_nodes() {
            let mut out: Vec<(NodeId, Vec<LinkId>)> = Vec::new();
            let mut reached: IdVec<NodeId, bool> = IdVec::filled(false, n);
            let mut crossed: IdVec<NodeId, bool> = IdVec::filled(false, n);
            let mut queue = std::collections::VecDeque::from([(u, Vec::new())]);
            while let Some((x, path)) = queue.pop_front() {
                for (l, y) in machine.links_at(x) {
                    let mut route: Vec<LinkId> = path.clone();
                    route.push(l);
                    if compute(y) {
                        // Every direct link; through switches, the first route found.
                        let first = !std::mem::replace(&mut reached[y], !path.is_empty());
                        if y != u && (path.is_empty() || first) {
                            out.push((y, route));
                        }
                    } else if !std::mem::replace(&mut crossed[y], true) {
                        queue.push_back((y, route));
                    }
                }
            }
            from[u] = out;
        }
        Routes { from }
    }
}

/// Which attachment [`prim`] takes first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Attach {
    /// The cheapest (a route costs the sum of its directions' lengths), then the shallowest:
    /// trees that spread the load.
    Cheapest,
    /// The shallowest, then the cheapest: a breadth-first tree, the fewest levels from the
    /// start.
    Shallowest,
}

/// A node's least attachment so far in [`prim`]: its two keys (a length's bits and a depth,
/// in the order of [`Attach`]), the tree node it would hang from, and which of that node's
/// routes ([`Routes`]) it would take.
type Offer = ((u64, u64), NodeId, usize);

/// Prim's algorithm from `start` under direction lengths `exp(η · load)`, attaching in the
/// order `attach` gives, then by the lowest node id, route (its links in order) and tree node.
/// `None` when some compute node cannot be reached.
///
/// Through switches every compute node reaches every other, so the graph Prim walks is dense
/// (`p²` routes): each node keeps its least offer and the next to attach is found by one scan,
/// `O(p²)` per tree, where a heap of every offer cost a logarithm and a route's copy each (on a
/// fabric of 512 GPUs the trees took 45% of `auto`'s time that way). Lengths are positive and
/// finite, and such floats order like their bit patterns.
fn prim(
    machine: &Machine,
    routes: &Routes,
    start: NodeId,
    (collective, attach): (Collective, Attach),
    load: &IdVec<DirectionId, f64>,
) -> Option<Tree> {
    let n = machine.node_count();
    let lengths: IdVec<DirectionId, f64> = load.iter().map(|&l| (ETA * l).exp()).collect();
    let length = |d: DirectionId| lengths.get(d).copied().unwrap_or(1.0);
    let mut parent = IdVec::filled(None, n);
    let mut via = IdVec::filled(Vec::new(), n);
    let mut inside: IdVec<NodeId, bool> = IdVec::filled(false, n);
    let mut depth: IdVec<NodeId, u64> = IdVec::filled(0, n);
    let mut offers: IdVec<NodeId, Option<Offer>> = IdVec::filled(None, n);
    // The nodes with an offer, not yet attached.
    let mut open: Vec<NodeId> = Vec::new();
    let route = |(_, u, i): Offer| routes.from.get(u).and_then(|r| r.get(i)).map(|r| &r.1[..]);
    // Nodes come from the machine's own links, in range of every table of nodes.
    inside[start] = true;
    let mut reached = 1;
    let mut u = start;
    loop {
        for (i, (v, links)) in routes.from.get(u).into_iter().flatten().enumerate() {
            let v = *v;
            if inside[v] {
                continue;
            }
            let cost = route_length(machine, (u, links), collective, &length);
            let d = depth[u] + 1;
            let keys = match attach {
                Attach::Cheapest => (cost.to_bits(), d),
                Attach::Shallowest => (d, cost.to_bits()),
            };
            let offer = (keys, u, i);
            match offers[v] {
                None => {
                    offers[v] = Some(offer);
                    open.push(v);
                }
                Some(held) => {
                    if (keys, route(offer), u) < (held.0, route(held), held.1) {
                        offers[v] = Some(offer);
                    }
                }
            }
        }
        // The least offer: by keys, then node.
        let Some((at, _)) = open
            .iter()
            .enumerate()
            .filter_map(|(at, &v)| offers[v].map(|o| (at, (o.0, v))))
            .min_by_key(|&(_, key)| key)
        else {
            break;
        };
        let v = open.swap_remove(at);
        let Some(offer @ (keys, from, _)) = offers[v] else {
            break;
        };
        let mut up = route(offer).unwrap_or_default().iter().rev();
        if let Some(&first) = up.next() {
            parent[v] = Some((from, first));
            via[v] = up.copied().collect();
        }
        inside[v] = true;
        depth[v] = match attach {
            Attach::Cheapest => keys.1,
            Attach::Shallowest => keys.0,
        };
        reached += 1;
        u = v;
    }
    (reached == machine.compute_nodes().len()).then_some(Tree {
        root: start,
        parent,
        via,
    })
}

/// The length of the route `links` from `from` under the direction lengths `length`, counting
/// the directions `collective` uses on a tree edge: down (away from the tree) for a broadcast,
/// up for a reduce, both otherwise.
fn route_length(
    machine: &Machine,
    (from, links): (NodeId, &[LinkId]),
    collective: Collective,
    length: &dyn Fn(DirectionId) -> f64,
) -> f64 {
    directions(machine, from, links)
        .map(|away| {
            let back = DirectionId::new(away.link(), !away.backward());
            match collective {
                Collective::Broadcast { .. } => length(away),
                Collective::Reduce { .. } => length(back),
                _ => length(away) + length(back),
            }
        })
        .sum()
}

/// The link directions a route `links` from `from` crosses, in order, away from `from`.
fn directions<'a>(
    machine: &'a Machine,
    from: NodeId,
    links: &'a [LinkId],
) -> impl Iterator<Item = DirectionId> + 'a {
    links.iter().scan(from, move |at, &l| {
        let (a, b) = machine.endpoints(l);
        let away = DirectionId::new(l, *at != a);
        *at = if *at == a { b } else { a };
        Some(away)
    })
}

/// Proves that every tree spans exactly the compute nodes with `p - 1` real links and reaches
/// its root from every node without a cycle.
pub fn prove_trees(machine: &Machine, trees: &IdVec<TreeId, Tree>) -> Result<(), EmbedError> {
    let compute: BTreeSet<NodeId> = machine.compute_nodes().into_iter().collect();
    let name = |n: NodeId| {
        if n.index() < machine.node_count() {
            machine.node(n).name.clone()
        } else {
            n.to_string()
        }
    };
    for (t, tree) in trees.iter_enumerated() {
        let bad = |detail: String| EmbedError::NotATree {
            tree: t.index(),
            detail,
        };
        if tree.parent.len() != machine.node_count() {
            return Err(bad(format!(
                "it lists {} nodes but the machine has {}",
                tree.parent.len(),
                machine.node_count()
            )));
        }
        if !compute.contains(&tree.root) {
            return Err(bad(format!(
                "its root {} is not a compute node",
                name(tree.root)
            )));
        }
        for (n, p) in tree.parent.iter_enumerated() {
            match (p, n == tree.root, compute.contains(&n)) {
                (Some(_), true, _) => {
                    return Err(bad(format!("its root {} has a parent", name(n))))
                }
                (None, false, true) => return Err(bad(format!("{} is not in the tree", name(n)))),
                (Some(_), _, false) => {
                    return Err(bad(format!("{} is not a compute node", name(n))))
                }
                _ => {}
            }
        }
        let mut edges = 0;
        for (child, parent, _) in tree.edges() {
            edges += 1;
            let route = tree.route_up(child);
            if !compute.contains(&parent) || route.iter().any(|l| l.index() >= machine.link_count())
            {
                return Err(bad(format!(
                    "{} hangs from a missing node or link",
                    name(child)
                )));
            }
            // The route leads from the child to the parent, through switches only.
            let mut at = child;
            for (i, &link) in route.iter().enumerate() {
                let (a, b) = machine.endpoints(link);
                let through = i > 0 && machine.node(at).kind == NodeKind::Compute;
                if through || (at != a && at != b) {
                    return Err(bad(format!(
                        "the route from {} does not lead to {}: link {} does not leave {}",
                        name(child),
                        name(parent),
                        machine.link(link).name,
                        name(at)
                    )));
                }
                at = if at == a { b } else { a };
            }
            if at != parent {
                return Err(bad(format!(
                    "the route from {} does not lead to {}: it ends at {}",
                    name(child),
                    name(parent),
                    name(at)
                )));
            }
        }
        if edges + 1 != compute.len() {
            return Err(bad(format!(
                "it has {edges} links; a spanning tree of {} nodes has {}",
                compute.len(),
                compute.len() - 1
            )));
        }
        // Every node reaches the root within p - 1 parent steps: connected and acyclic.
        for &n in &compute {
            let mut at = n;
            let mut hops = 0;
            while let Some(&Some((p, _))) = tree.parent.get(at) {
                at = p;
                hops += 1;
                if hops >= compute.len() {
                    return Err(bad(format!("{} lies on a cycle of parents", name(n))));
                }
            }
            if at != tree.root {
                return Err(bad(format!("{} does not reach the root", name(n))));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
