//! Searching a graph for Hamiltonian cycles, and for as many as it holds that share no link.
//!
//! The search is a depth-first backtracking walk from the first compute node that tries the
//! neighbour with the fewest unvisited neighbours first (Warnsdorff's rule), which finds cycles
//! on rings, ladders, tori and similar regular machines without backtracking at all. It prunes
//! a branch as soon as an unvisited node is left with fewer than two ways in and out (its
//! unvisited neighbours, the walk's head, and the start, which the cycle must close to): on
//! grids and meshes, whose corners and edges Warnsdorff's rule alone strands, this turns a hopeless
//! search into a straight walk. It runs on an explicit stack (machines can have thousands of
//! nodes) and under a step budget, so that a hard graph ends in a clear "gave up" rather than a
//! hang. An exhaustive search that finds nothing is a proof that no cycle exists.
//!
//! **Several rings.** A node with `d` links lies on at most `⌊d/2⌋` link-disjoint rings, so
//! the machine holds at most the smallest of these over its nodes (parallel links count one
//! each: the DGX-1's doubled NVLinks give every GPU six links and room for three rings). The
//! search looks for that many: it takes a first ring, searches the links left for a second,
//! and so on, backtracking to other choices for earlier rings (a bounded number of each) when
//! a later one cannot be found, and keeps the largest set it met.
//!
//! **Rings that share links.** A node with an odd number of links (the MI250X's seven, a
//! cube's three) leaves one idle in every set of disjoint rings. Counting every lane `s` times
//! ([`find_shared_rings`] with `share: s`) asks for rings of which at most `s` cross any lane:
//! each then carries `1/s` of what a disjoint ring would, and with `s = 2` a node of `d` links
//! lies on up to `d` rings — all of its links busy.

use super::{EmbedError, Ring};
use crate::machine::Machine;
use schedule_ir::{LinkId, NodeKind};
use std::collections::BTreeSet;

/// Search steps allowed by default: enough for every exhaustive search on small graphs and for
/// a straight walk around large regular ones.
pub const DEFAULT_BUDGET: u64 = 2_000_000;

/// The largest machine on which every search step checks that the unvisited nodes are still
/// reachable (a linear-time check that saves grids and meshes from hopeless branches).
const CONNECTED_CHECK_MAX: usize = 1024;

/// How many first cycles are tried when looking for a second, link-disjoint one.
const FIRST_CYCLE_TRIES: usize = 64;

enum Outcome {
    /// Every possibility was explored.
    Exhausted,
    /// The callback asked to stop.
    Stopped,
    /// The budget ran out.
    GaveUp,
}

struct Searcher<'a> {
    machine: &'a Machine,
    /// adjacency over node indices: (neighbour, link), sorted.
    adj: Vec<Vec<(usize, LinkId)>>,
    steps: u64,
    budget: u64,
}

impl<'a> Searcher<'a> {
    fn new(machine: &'a Machine, budget: u64) -> Self {
        let adj = (0..machine.node_count())
            .map(|i| {
                machine
                    .links_at(schedule_ir::NodeId::new(i))
                    .into_iter()
                    .map(|(l, n)| (n.index(), l))
                    .collect()
            })
            .collect();
        Searcher {
            machine,
            adj,
            steps: 0,
            budget,
        }
    }

    /// Walks every Hamiltonian cycle from node 0 over links `taken` has room on, calling `found` for
    /// each until it returns `false`.
    fn search(&mut self, taken: &Taken, found: &mut dyn FnMut(Ring) -> bool) -> Outcome {
        let n = self.adj.len();
        let mut visited = vec![false; n];
        let mut path: Vec<usize> = vec![0];
        let mut via: Vec<LinkId> = Vec::new();
        visited[0] = true;
        let mut candidates: Vec<Vec<(usize, LinkId)>> = vec![self.order(0, &visited, taken)];
        while let Some(top) = candidates.last_mut() {
            let Some((next, link)) = top.pop() else {
                candidates.pop();
                if let Some(v) = path.pop() {
                    visited[v] = false;
                }
                via.pop();
                continue;
            };
            self.steps += 1;
            if self.steps > self.budget {
                return Outcome::GaveUp;
            }
            path.push(next);
            via.push(link);
            visited[next] = true;
            if path.len() < n
                && (self.stranded(&path, &visited, taken)
                    || (n <= CONNECTED_CHECK_MAX && self.cut_off(next, &visited, taken)))
            {
                // Some node can no longer be passed through: this branch holds no cycle.
                path.pop();
                via.pop();
                visited[next] = false;
                continue;
            }
            if path.len() == n {
                // Close the cycle back to node 0 over any allowed link.
                let closing: Vec<LinkId> = self.adj[next]
                    .iter()
                    .filter(|(m, l)| *m == 0 && !taken.full(*l) && !via.contains(l))
                    .map(|&(_, l)| l)
                    .collect();
                for l in closing {
                    let mut links = via.clone();
                    links.push(l);
                    let ring = Ring::direct(
                        path.iter().map(|&i| schedule_ir::NodeId::new(i)).collect(),
                        links,
                    );
                    if !found(ring) {
                        return Outcome::Stopped;
                    }
                }
                path.pop();
                via.pop();
                visited[next] = false;
                continue;
            }
            let order = self.order(next, &visited, taken);
            candidates.push(order);
        }
        Outcome::Exhausted
    }

    /// Unvisited neighbours of `v`, ordered so that `pop` yields first the one over the link
    /// fewest rings use yet, then the one with the fewest unvisited neighbours (ties: lowest
    /// id). Among parallel links to one neighbour, the least used is taken. Where rings may
    /// share lanes, preferring unused links spreads the rings over every link; where they may
    /// not, uses do not count ([`Taken::uses`]) and the order is Warnsdorff's alone.
    fn order(&self, v: usize, visited: &[bool], taken: &Taken) -> Vec<(usize, LinkId)> {
        let mut out: Vec<(u32, usize, usize, LinkId)> = Vec::new();
        for &(u, l) in &self.adj[v] {
            if visited[u] || taken.full(l) {
                continue;
            }
            let uses = taken.uses(l);
            if let Some(seen) = out.iter_mut().find(|e| e.2 == u) {
                if uses < seen.0 {
                    (seen.0, seen.3) = (uses, l);
                }
                continue;
            }
            let free = self.adj[u]
                .iter()
                .filter(|(w, l2)| !visited[*w] && !taken.full(*l2))
                .count();
            out.push((uses, free, u, l));
        }
        out.sort();
        out.reverse();
        out.into_iter().map(|(_, _, u, l)| (u, l)).collect()
    }

    /// Whether the walk `path` has left an unvisited node next to its last two nodes with
    /// fewer than two ways to be passed through: distinct neighbours over allowed links that
    /// are unvisited, the head of the walk, or the start (to which the cycle closes). Only the
    /// neighbours of the node that just stopped being the head lost a way, and the neighbours
    /// of the new head may have to be its next step.
    fn stranded(&self, path: &[usize], visited: &[bool], taken: &Taken) -> bool {
        let head = path[path.len() - 1];
        let Some(&inner) = path.len().checked_sub(2).and_then(|i| path.get(i)) else {
            return false;
        };
        let ways = |w: usize| {
            let mut seen: Vec<usize> = Vec::with_capacity(4);
            for &(x, l) in &self.adj[w] {
                if taken.full(l) || seen.contains(&x) {
                    continue;
                }
                if !visited[x] || x == head || x == 0 {
                    seen.push(x);
                    if seen.len() >= 2 {
                        break;
                    }
                }
            }
            seen.len()
        };
        let mut forced = 0;
        for &v in &[inner, head] {
            for &(w, l) in &self.adj[v] {
                if visited[w] || taken.full(l) {
                    continue;
                }
                if ways(w) < 2 {
                    return true;
                }
            }
        }
        // Two unvisited neighbours of the head with no way out but through it cannot both
        // be reached: the walk can continue into only one of them.
        let mut checked: Vec<usize> = Vec::new();
        for &(w, l) in &self.adj[head] {
            if visited[w] || taken.full(l) || checked.contains(&w) {
                continue;
            }
            checked.push(w);
            let others = self.adj[w]
                .iter()
                .filter(|&&(x, l2)| !taken.full(l2) && x != head && (!visited[x] || x == 0))
                .map(|&(x, _)| x)
                .collect::<BTreeSet<usize>>();
            if others.len() == 1 {
                forced += 1;
            }
        }
        forced >= 2
    }

    /// Whether some unvisited node can no longer be reached from the walk's head through
    /// unvisited nodes, or the start can no longer be reached to close the cycle: then no
    /// continuation visits every node. Linear in the machine, so only run on machines of up
    /// to [`CONNECTED_CHECK_MAX`] nodes.
    fn cut_off(&self, head: usize, visited: &[bool], taken: &Taken) -> bool {
        let unvisited = visited.iter().filter(|&&v| !v).count();
        let mut seen = vec![false; self.adj.len()];
        let mut stack = vec![head];
        seen[head] = true;
        let mut reached = 0;
        let mut closes = false;
        while let Some(v) = stack.pop() {
            for &(w, l) in &self.adj[v] {
                if taken.full(l) {
                    continue;
                }
                if w == 0 && v != head {
                    closes = true;
                }
                if !visited[w] && !seen[w] {
                    seen[w] = true;
                    reached += 1;
                    stack.push(w);
                }
            }
        }
        reached < unvisited || (unvisited > 0 && !closes)
    }

    /// A node with fewer than two neighbours can be on no cycle.
    fn too_few_neighbours(&self) -> Option<String> {
        self.adj.iter().enumerate().find_map(|(i, nbrs)| {
            let distinct: BTreeSet<usize> = nbrs.iter().map(|&(u, _)| u).collect();
            (distinct.len() < 2).then(|| {
                format!(
                    "{} has {} neighbour(s); every node of a ring needs two",
                    self.machine.graph[petgraph::graph::NodeIndex::new(i)].name,
                    distinct.len()
                )
            })
        })
    }

    fn why_none(&self) -> String {
        self.too_few_neighbours().unwrap_or_else(|| {
            format!(
                "an exhaustive search of the {}-node graph found none",
                self.adj.len()
            )
        })
    }
}

/// Finds as many link-disjoint Hamiltonian rings over the compute nodes as the search can,
/// up to the most the machine can hold ([`most_rings`]); at least one, or an error saying why
/// there is none.
pub fn find_rings(machine: &Machine, budget: u64) -> Result<Vec<Ring>, EmbedError> {
    find_shared_rings(machine, budget, 1)
}

/// Finds as many Hamiltonian rings over the compute nodes as the search can, at most `share` of
/// them on any lane of any link, up to the most the machine can hold so
/// ([`most_shared_rings`]); at least one, or an error saying why there is none. `share: 1` asks
/// for link-disjoint rings.
pub fn find_shared_rings(
    machine: &Machine,
    budget: u64,
    share: u32,
) -> Result<Vec<Ring>, EmbedError> {
    if machine
        .graph
        .node_weights()
        .any(|n| n.kind != NodeKind::Compute)
    {
        return Err(EmbedError::NotApplicable(
            "ring search covers machines of compute nodes only".to_string(),
        ));
    }
    let n = machine.node_count();
    if n == 2 {
        return Ok(two_node_rings(machine));
    }
    let mut searcher = Searcher::new(machine, budget);
    if let Some(reason) = searcher
        .too_few_neighbours()
        .or_else(|| unbalanced_sides(&searcher.adj, machine))
    {
        return Err(EmbedError::NoHamiltonianCycle { reason });
    }
    let start = Taken::sharing(machine, share);
    let mut firsts: Vec<Ring> = Vec::new();
    let outcome = searcher.search(&start, &mut |ring| {
        firsts.push(ring);
        firsts.len() < FIRST_CYCLE_TRIES
    });
    if firsts.is_empty() {
        return Err(match outcome {
            Outcome::GaveUp => EmbedError::SearchGaveUp { budget },
            Outcome::Exhausted | Outcome::Stopped => EmbedError::NoHamiltonianCycle {
                reason: searcher.why_none(),
            },
        });
    }
    let want = most_shared_rings(machine, share);
    let mut more = Disjoint {
        machine,
        want,
        budget: budget.saturating_sub(searcher.steps),
        best: vec![firsts[0].clone()],
    };
    for first in &firsts {
        let taken = start.clone().with(first);
        let mut chosen = vec![first.clone()];
        if more.extend(&mut chosen, &taken) || more.budget == 0 {
            break;
        }
    }
    Ok(more.best)
}

/// How many rings already use each link, against how many it can carry: a link of `k` lanes
/// carries `k` transfers per direction per step, so it serves `k` rings as `k` parallel links
/// would. Two spellings of the same hardware (two parallel links, or one link of two lanes)
/// then hold the same rings.
#[derive(Clone)]
struct Taken {
    /// Rings using each link, by link index.
    uses: Vec<u32>,
    /// Lanes of each link, by link index.
    lanes: Vec<u32>,
    /// Whether rings may share a lane: only then does the walk prefer the least used links.
    shared: bool,
}

impl Taken {
    /// No link used yet, and each lane may carry `share` rings.
    fn sharing(machine: &Machine, share: u32) -> Taken {
        let lanes: Vec<u32> = (0..machine.link_count())
            .map(|l| {
                machine
                    .link(LinkId::new(l))
                    .lanes
                    .saturating_mul(share.max(1))
            })
            .collect();
        Taken {
            uses: vec![0; lanes.len()],
            lanes,
            shared: share > 1,
        }
    }

    /// These uses and one more ring's.
    fn with(mut self, ring: &Ring) -> Taken {
        for &l in &ring.links {
            if let Some(u) = self.uses.get_mut(l.index()) {
                *u += 1;
            }
        }
        self
    }

    /// How many rings use the link, where rings may share lanes; 0 where they may not, so that
    /// the search for disjoint rings (links of several lanes included) walks as it always has.
    fn uses(&self, link: LinkId) -> u32 {
        if !self.shared {
            return 0;
        }
        self.uses.get(link.index()).copied().unwrap_or(0)
    }

    /// Whether the link has no lane left for another ring.
    fn full(&self, link: LinkId) -> bool {
        let i = link.index();
        self.uses.get(i).copied().unwrap_or(0) >= self.lanes.get(i).copied().unwrap_or(0)
    }
}

/// The most link-disjoint rings the machine can hold: a ring takes two links at every node,
/// so `⌊links / 2⌋` at the node with the fewest links, a link of `k` lanes counting as `k`
/// parallel links.
pub fn most_rings(machine: &Machine) -> usize {
    most_shared_rings(machine, 1)
}

/// The most rings the machine can hold when each lane may carry `share` of them:
/// `⌊share · lanes / 2⌋` at the node with the fewest lanes.
pub fn most_shared_rings(machine: &Machine, share: u32) -> usize {
    (0..machine.node_count())
        .map(|i| {
            let lanes: u64 = machine
                .links_at(schedule_ir::NodeId::new(i))
                .iter()
                .map(|&(l, _)| u64::from(machine.link(l).lanes))
                .sum();
            usize::try_from(lanes * u64::from(share.max(1)) / 2).unwrap_or(usize::MAX)
        })
        .min()
        .unwrap_or(0)
}

/// How many rings are tried at each level after the first when looking for further ones.
const LATER_CYCLE_TRIES: usize = 8;

/// The search for further rings once one is chosen.
struct Disjoint<'a> {
    machine: &'a Machine,
    /// Stop once this many rings are found.
    want: usize,
    /// Search steps left for all further searches together.
    budget: u64,
    /// The largest set of disjoint rings found so far.
    best: Vec<Ring>,
}

impl Disjoint<'_> {
    /// Adds rings over the lanes `taken` leaves (the links of `chosen` use theirs) until `want` are chosen,
    /// trying other rings at each level when a later level finds none. Returns whether
    /// `want` rings were found; `best` holds the most found either way.
    fn extend(&mut self, chosen: &mut Vec<Ring>, taken: &Taken) -> bool {
        if chosen.len() > self.best.len() {
            self.best = chosen.clone();
        }
        if chosen.len() >= self.want {
            return true;
        }
        if self.budget == 0 {
            return false;
        }
        // A second ring gets a share of the budget per first ring, as before; later levels
        // search what is left, which is small.
        let share = (self.budget / FIRST_CYCLE_TRIES as u64)
            .max(10_000)
            .min(self.budget);
        let mut s = Searcher::new(self.machine, share);
        let mut options: Vec<Ring> = Vec::new();
        s.search(taken, &mut |ring| {
            options.push(ring);
            options.len() < LATER_CYCLE_TRIES
        });
        self.budget = self.budget.saturating_sub(s.steps);
        for ring in options {
            let more = taken.clone().with(&ring);
            chosen.push(ring);
            let done = self.extend(chosen, &more);
            chosen.pop();
            if done {
                return true;
            }
            if self.budget == 0 {
                break;
            }
        }
        false
    }
}

/// A cycle in a bipartite graph alternates between the two sides, so a Hamiltonian cycle needs
/// as many nodes on each side. When they differ (a torus or hypercube that lost a node), this
/// says so at once instead of searching exhaustively.
fn unbalanced_sides(adj: &[Vec<(usize, LinkId)>], machine: &Machine) -> Option<String> {
    let n = adj.len();
    let mut side: Vec<Option<bool>> = vec![None; n];
    let mut count = [0usize; 2];
    for start in 0..n {
        if side[start].is_some() {
            continue;
        }
        side[start] = Some(false);
        count[0] += 1;
        let mut stack = vec![start];
        while let Some(v) = stack.pop() {
            let here = side[v].unwrap_or(false);
            for &(u, _) in &adj[v] {
                match side[u] {
                    Some(s) if s == here => return None, // an odd cycle: not bipartite
                    Some(_) => {}
                    None => {
                        side[u] = Some(!here);
                        count[usize::from(!here)] += 1;
                        stack.push(u);
                    }
                }
            }
        }
    }
    if count[0] == count[1] {
        return None;
    }
    let name = |side_wanted: bool| {
        (0..n)
            .find(|&i| side[i] == Some(side_wanted))
            .map(|i| {
                machine.graph[petgraph::graph::NodeIndex::new(i)]
                    .name
                    .clone()
            })
            .unwrap_or_default()
    };
    Some(format!(
        "its links join two sides ({} nodes with {}, {} with {}) and every link crosses between \
         them, so a ring alternates sides and needs as many nodes on each",
        count[0],
        name(false),
        count[1],
        name(true)
    ))
}

/// Two nodes: each pair of parallel links is a ring; a single link is a one-way ring.
fn two_node_rings(machine: &Machine) -> Vec<Ring> {
    let links: Vec<LinkId> = machine
        .links_at(schedule_ir::NodeId::new(0))
        .into_iter()
        .map(|(l, _)| l)
        .collect();
    let nodes = vec![schedule_ir::NodeId::new(0), schedule_ir::NodeId::new(1)];
    if links.len() == 1 {
        return vec![Ring::direct(nodes, vec![links[0], links[0]])];
    }
    links
        .chunks_exact(2)
        .take(2)
        .map(|pair| Ring::direct(nodes.clone(), pair.to_vec()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::ast::LinkParams;

    fn load(text: &str) -> Machine {
        crate::compile::load(text).expect("builds").machine
    }

    fn example(name: &str) -> Machine {
        let path = format!("{}/../examples/{name}.ron", env!("CARGO_MANIFEST_DIR"));
        load(&std::fs::read_to_string(path).expect("example exists"))
    }

    /// Rings found by the search alone, proved disjoint and Hamiltonian.
    fn searched(m: &Machine) -> Vec<Ring> {
        let rings = find_rings(m, DEFAULT_BUDGET).expect("a ring");
        crate::embed::prove_rings(m, &rings).expect("proved");
        rings
    }

    #[test]
    fn the_dgx1_splits_into_three_rings_both_ways_it_is_written() {
        let m = example("dgx1-v100");
        assert_eq!(most_rings(&m), 3);
        let rings = searched(&m);
        assert_eq!(rings.len(), 3);
        // Three rings of eight links use all 24.
        let used: BTreeSet<LinkId> = rings.iter().flat_map(|r| r.links.clone()).collect();
        assert_eq!(used.len(), 24);
    }

    #[test]
    fn a_link_of_two_lanes_carries_two_rings_as_two_parallel_links_would() {
        let m = example("dgx1-v100-lanes");
        assert_eq!(most_rings(&m), 3, "every GPU has six lanes");
        let rings = searched(&m);
        assert_eq!(rings.len(), 3);
        // 16 links, 8 of them with two lanes: 24 lanes, each used by exactly one ring.
        let mut uses: std::collections::BTreeMap<LinkId, u32> = Default::default();
        for l in rings.iter().flat_map(|r| r.links.iter()) {
            *uses.entry(*l).or_default() += 1;
        }
        assert_eq!(uses.len(), 16);
        for (l, n) in uses {
            assert_eq!(n, m.link(l).lanes, "{}", m.link(l).name);
        }
    }

    #[test]
    fn a_third_ring_over_a_link_of_two_lanes_is_refused_by_name() {
        let m = load(
            r#"Topology(name: "t", machine: Graph(nodes: ["a", "b", "c"],
                link: (bandwidth_gbps: 100.0, latency_us: 1.0, lanes: 2),
                links: [(id: "ab", between: ("a", "b")), (id: "bc", between: ("b", "c")),
                        (id: "ca", between: ("c", "a"))]), phases: [])"#,
        );
        assert_eq!(most_rings(&m), 2);
        let ring = searched(&m)[0].clone();
        let two = vec![ring.clone(), ring.clone()];
        assert_eq!(crate::embed::prove_rings(&m, &two), Ok(()));
        let three = vec![ring.clone(), ring.clone(), ring];
        let err = crate::embed::prove_rings(&m, &three).expect_err("three rings on two lanes");
        assert_eq!(
            err.to_string(),
            "rings 0, 1 and 2 use link ab, which has 2 lanes"
        );
    }

    #[test]
    fn the_mi250x_node_holds_three_rings() {
        let m = example("mi250x-node");
        assert_eq!(most_rings(&m), 3);
        assert_eq!(searched(&m).len(), 3);
    }

    #[test]
    fn meshes_and_grids_get_their_boustrophedon() {
        let m = example("mesh8x8");
        assert_eq!(most_rings(&m), 1, "corners have two links");
        assert_eq!(searched(&m).len(), 1);
        for dims in [[4, 6], [6, 10], [16, 16], [2, 9], [8, 8]] {
            let m = crate::machine::torus::mesh("m", &dims, LinkParams::default());
            let rings = find_rings(&m, DEFAULT_BUDGET);
            assert!(
                rings.as_ref().is_ok_and(|r| r.len() == 1),
                "{dims:?}: {rings:?}"
            );
        }
        // An odd number of nodes on a bipartite grid has no Hamiltonian cycle, and says so.
        let m = crate::machine::torus::mesh("m", &[3, 5], LinkParams::default());
        assert!(matches!(
            find_rings(&m, DEFAULT_BUDGET),
            Err(EmbedError::NoHamiltonianCycle { .. })
        ));
    }

    #[test]
    fn odd_ladders_hold_one_ring_and_the_search_finds_it() {
        for pairs in [3, 5, 13] {
            let m = crate::machine::ladder::ladder(
                "l",
                pairs,
                LinkParams::default(),
                LinkParams::default(),
            );
            assert_eq!(searched(&m).len(), 1, "{pairs} pairs");
        }
        let m =
            crate::machine::ladder::ladder("l", 4, LinkParams::default(), LinkParams::default());
        assert_eq!(searched(&m).len(), 2, "an even ladder holds two");
    }

    #[test]
    fn rings_two_to_a_link_use_every_link_of_a_node_with_seven() {
        let m = crate::machine::hypercube::hypercube("h", 7, LinkParams::default());
        assert_eq!(most_shared_rings(&m, 2), 7);
        let rings = find_shared_rings(&m, 1 << 20, 2).expect("rings");
        crate::embed::prove_shared_rings(&m, &rings, 2).expect("proved");
        assert_eq!(rings.len(), 7);
        // A third ring on a link is refused, saying how many it may carry.
        let three = vec![rings[0].clone(), rings[0].clone(), rings[0].clone()];
        let err = crate::embed::prove_shared_rings(&m, &three, 2).expect_err("three on a link");
        assert_eq!(
            err.to_string(),
            format!(
                "rings 0, 1 and 2 use link {}, which carries at most 2",
                m.link(rings[0].links[0]).name
            )
        );
    }

    #[test]
    fn a_hypercube_of_six_dimensions_holds_three_rings() {
        let m = crate::machine::hypercube::hypercube("h", 6, LinkParams::default());
        assert_eq!(most_rings(&m), 3);
        assert_eq!(searched(&m).len(), 3);
    }

    /// How long finding rings takes on the machines the issue names, by search alone and by
    /// the `ring` method (structural construction first); run with
    /// `cargo test --release -p topoc ring_timings -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn ring_timings() {
        let link = LinkParams::default();
        let machines = [
            (
                "torus 16x16",
                crate::machine::torus::torus("t", &[16, 16], link),
            ),
            (
                "torus 4x4x4",
                crate::machine::torus::torus("t", &[4, 4, 4], link),
            ),
            (
                "torus 64x64",
                crate::machine::torus::torus("t", &[64, 64], link),
            ),
            (
                "hypercube 6 (64 nodes)",
                crate::machine::hypercube::hypercube("h", 6, link),
            ),
            (
                "hypercube 10",
                crate::machine::hypercube::hypercube("h", 10, link),
            ),
            (
                "hypercube 14",
                crate::machine::hypercube::hypercube("h", 14, link),
            ),
            (
                "full mesh 64",
                crate::machine::mesh::full_mesh("m", 64, link),
            ),
        ];
        for (what, m) in &machines {
            let t = std::time::Instant::now();
            let searched = find_rings(m, DEFAULT_BUDGET).map(|r| r.len());
            let search_time = t.elapsed();
            let t = std::time::Instant::now();
            let method = crate::lower::ring::rings(m).map(|r| r.rings.len());
            println!(
                "{what}: search {searched:?} rings in {search_time:?}; ring method {method:?} rings in {:?}",
                t.elapsed()
            );
        }
    }
}
