//! Searching a graph for Hamiltonian cycles, and for two that share no link.
//!
//! The search is a depth-first backtracking walk from the first compute node that tries the
//! neighbour with the fewest unvisited neighbours first (Warnsdorff's rule), which finds cycles
//! on rings, ladders, tori and similar regular machines without backtracking at all. It runs
//! on an explicit stack (machines can have thousands of nodes) and under a step budget, so
//! that a hard graph ends in a clear "gave up" rather than a hang. An exhaustive search that
//! finds nothing is a proof that no cycle exists.

use super::{EmbedError, Ring};
use crate::machine::Machine;
use schedule_ir::{LinkId, NodeKind};
use std::collections::BTreeSet;

/// Search steps allowed by default: enough for every exhaustive search on small graphs and for
/// a straight walk around large regular ones.
pub const DEFAULT_BUDGET: u64 = 2_000_000;

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

    /// Walks every Hamiltonian cycle from node 0 avoiding `forbidden`, calling `found` for
    /// each until it returns `false`.
    fn search(
        &mut self,
        forbidden: &BTreeSet<LinkId>,
        found: &mut dyn FnMut(Ring) -> bool,
    ) -> Outcome {
        let n = self.adj.len();
        let mut visited = vec![false; n];
        let mut path: Vec<usize> = vec![0];
        let mut via: Vec<LinkId> = Vec::new();
        visited[0] = true;
        let mut candidates: Vec<Vec<(usize, LinkId)>> = vec![self.order(0, &visited, forbidden)];
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
            if path.len() == n {
                // Close the cycle back to node 0 over any allowed link.
                let closing: Vec<LinkId> = self.adj[next]
                    .iter()
                    .filter(|(m, l)| *m == 0 && !forbidden.contains(l) && !via.contains(l))
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
            let order = self.order(next, &visited, forbidden);
            candidates.push(order);
        }
        Outcome::Exhausted
    }

    /// Unvisited neighbours of `v`, ordered so that `pop` yields the one with the fewest
    /// unvisited neighbours first (ties: lowest id).
    fn order(
        &self,
        v: usize,
        visited: &[bool],
        forbidden: &BTreeSet<LinkId>,
    ) -> Vec<(usize, LinkId)> {
        let mut out: Vec<(usize, usize, LinkId)> = Vec::new();
        for &(u, l) in &self.adj[v] {
            if visited[u] || forbidden.contains(&l) || out.iter().any(|&(_, w, _)| w == u) {
                continue;
            }
            let free = self.adj[u]
                .iter()
                .filter(|(w, l2)| !visited[*w] && !forbidden.contains(l2))
                .count();
            out.push((free, u, l));
        }
        out.sort();
        out.reverse();
        out.into_iter().map(|(_, u, l)| (u, l)).collect()
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

/// Finds up to two link-disjoint Hamiltonian rings over the compute nodes: two when the
/// search finds a pair, otherwise one.
pub fn find_rings(machine: &Machine, budget: u64) -> Result<Vec<Ring>, EmbedError> {
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
    let mut firsts: Vec<Ring> = Vec::new();
    let outcome = searcher.search(&BTreeSet::new(), &mut |ring| {
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
    let second_budget = (budget / FIRST_CYCLE_TRIES as u64).max(10_000);
    for first in &firsts {
        let forbidden: BTreeSet<LinkId> = first.links.iter().copied().collect();
        let mut second = None;
        let mut s = Searcher::new(machine, second_budget);
        s.search(&forbidden, &mut |ring| {
            second = Some(ring);
            false
        });
        if let Some(second) = second {
            return Ok(vec![first.clone(), second]);
        }
    }
    Ok(vec![firsts.swap_remove(0)])
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
            let method = crate::lower::ring::rings(m).map(|r| r.len());
            println!(
                "{what}: search {searched:?} rings in {search_time:?}; ring method {method:?} rings in {:?}",
                t.elapsed()
            );
        }
    }
}
