//! Latency in the cost model: what one transfer pays along its route, and the two latency
//! lower bounds (how far information must travel, and how many steps it needs to spread).
//!
//! A transfer pays the latency of every link it crosses and the machine's
//! [`switch_latency_us`](crate::Machine::switch_latency_us) for every switch it is forwarded
//! by. The bounds measure the same quantity on the machine graph: the cheapest walk between
//! two compute nodes, charging a switch only where a route would (a switch that runs no
//! program is never an endpoint of a transfer, so a walk through it always passes through).

use crate::{Machine, NodeId, NodeKind};
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// How many link relaxations the distance bound may spend: shortest-path searches are run
/// from as many sources as fit (at least one), so the bound stays cheap on the largest
/// machines. Every distance measured is a true one, so fewer sources give a weaker bound,
/// never an unsound one.
pub const SEARCH_BUDGET: usize = 1 << 22;

/// Seconds a transfer that leaves `from` on `first` and then crosses `via` spends in latency:
/// the sum of its links' latencies and the switch latency of every switch it passes through.
pub fn route_seconds(
    machine: &Machine,
    from: NodeId,
    first: crate::LinkId,
    via: &[crate::LinkId],
) -> f64 {
    let switch = switch_seconds(machine);
    let mut total = 0.0;
    let mut hops = machine.route(from, first, via).peekable();
    while let Some(hop) = hops.next() {
        if let Some(link) = machine.links.get(hop.link.index()) {
            total += link.latency_us * 1e-6;
        }
        let passes = hops.peek().is_some();
        if passes && is_switch(machine, hop.to) {
            total += switch;
        }
    }
    total
}

/// The machine's per-switch latency in seconds (0 when absent or not a valid number).
fn switch_seconds(machine: &Machine) -> f64 {
    let s = machine.switch_latency_us * 1e-6;
    if s.is_finite() && s > 0.0 {
        s
    } else {
        0.0
    }
}

fn is_switch(machine: &Machine, node: NodeId) -> bool {
    machine
        .nodes
        .get(node.index())
        .is_some_and(|n| n.kind == NodeKind::Switch)
}

/// Whether `node` runs a program, so may be where one transfer ends and the next begins.
fn runs_program(machine: &Machine, node: usize) -> bool {
    machine.nodes.get(node).is_some_and(|n| n.runs_program())
}

/// The adjacency of the machine for shortest paths: per node, `(neighbour, seconds)` of each
/// link, where leaving a switch that runs no program also pays the switch latency.
fn adjacency(machine: &Machine) -> Vec<Vec<(usize, f64)>> {
    let n = machine.nodes.len();
    let switch = switch_seconds(machine);
    let mut adj = vec![Vec::new(); n];
    for link in &machine.links {
        let (a, b) = (link.a.index(), link.b.index());
        if a >= n || b >= n || a == b {
            continue;
        }
        let lat = link.latency_us * 1e-6;
        let lat = if lat.is_finite() && lat > 0.0 {
            lat
        } else {
            0.0
        };
        let leave = |v: usize| {
            if runs_program(machine, v) {
                0.0
            } else {
                switch
            }
        };
        adj[a].push((b, lat + leave(a)));
        adj[b].push((a, lat + leave(b)));
    }
    adj
}

/// Latency from `source` to every node (infinite where unreachable), by Dijkstra's algorithm.
fn distances(adj: &[Vec<(usize, f64)>], source: usize) -> Vec<f64> {
    let mut dist = vec![f64::INFINITY; adj.len()];
    let Some(d0) = dist.get_mut(source) else {
        return dist;
    };
    *d0 = 0.0;
    // f64 latencies are non-negative and finite: their bit patterns order like the values.
    let mut heap = BinaryHeap::from([Reverse((0u64, source))]);
    while let Some(Reverse((bits, v))) = heap.pop() {
        let d = f64::from_bits(bits);
        if d > dist[v] {
            continue;
        }
        for &(w, lat) in &adj[v] {
            let nd = d + lat;
            if nd < dist[w] {
                dist[w] = nd;
                heap.push(Reverse((nd.to_bits(), w)));
            }
        }
    }
    dist
}

/// The largest latency, over the nodes of `sources` (at most as many as [`SEARCH_BUDGET`]
/// allows, spread evenly, and the farthest of them from the first), of the cheapest walk to
/// any compute node: a lower bound on the time for information from each source to reach
/// every compute node, and from every compute node to reach each source.
pub fn eccentricity_seconds(machine: &Machine, sources: &[NodeId]) -> f64 {
    if sources.is_empty() {
        return 0.0;
    }
    let adj = adjacency(machine);
    let work = adj.iter().map(Vec::len).sum::<usize>() + adj.len();
    let searches = (SEARCH_BUDGET / work.max(1)).clamp(1, sources.len());
    let compute: Vec<usize> = machine.compute_nodes().map(NodeId::index).collect();
    let ecc = |dist: &[f64]| {
        compute
            .iter()
            .filter_map(|&c| dist.get(c).copied())
            .filter(|d| d.is_finite())
            .fold(0.0, f64::max)
    };
    let first = distances(&adj, sources[0].index());
    let mut best = ecc(&first);
    // The source farthest from the first is a good guess at an end of a longest path.
    let far = sources
        .iter()
        .copied()
        .filter(|s| first.get(s.index()).is_some_and(|d| d.is_finite()))
        .max_by(|a, b| first[a.index()].total_cmp(&first[b.index()]));
    let step = sources.len().div_ceil(searches).max(1);
    let chosen = sources.iter().copied().step_by(step).skip(1);
    for s in far
        .into_iter()
        .chain(chosen)
        .take(searches.saturating_sub(1))
    {
        best = best.max(ecc(&distances(&adj, s.index())));
    }
    best
}

/// The most transfers a node that runs a program can receive (or send) in one step: the sum
/// of the lanes of its links. A link with `lanes: 2` and two parallel links count the same.
pub fn max_fan(machine: &Machine) -> u64 {
    let mut fan = vec![0u64; machine.nodes.len()];
    for link in &machine.links {
        for end in [link.a, link.b] {
            if let Some(f) = fan.get_mut(end.index()) {
                *f = f.saturating_add(u64::from(link.lanes.max(1)));
            }
        }
    }
    fan.iter()
        .enumerate()
        .filter(|&(i, _)| runs_program(machine, i))
        .map(|(_, &f)| f)
        .max()
        .unwrap_or(0)
}

/// The fewest steps in which something known at one node can reach `p` nodes (or the inputs
/// of `p` nodes reach one), when each node exchanges at most `fan` transfers per step: the
/// smallest `s` with `(1 + fan)^s ≥ p`.
pub fn spreading_steps(p: u64, fan: u64) -> u32 {
    if p <= 1 || fan == 0 {
        return 0;
    }
    let mut reach: u64 = 1;
    let mut steps = 0;
    while reach < p {
        reach = reach.saturating_mul(fan.saturating_add(1));
        steps += 1;
    }
    steps
}

/// The smallest latency a step with a transfer can have: the smallest link latency, in
/// seconds (0 for a machine without links).
pub fn min_link_seconds(machine: &Machine) -> f64 {
    let min = machine
        .links
        .iter()
        .map(|l| l.latency_us * 1e-6)
        .filter(|a| a.is_finite() && *a >= 0.0)
        .fold(f64::INFINITY, f64::min);
    if min.is_finite() {
        min
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Link, LinkId, Node};

    /// A line of `n` compute nodes with 1 µs links, or with a switch in the middle.
    fn line(n: u32) -> Machine {
        Machine {
            name: "line".into(),
            nodes: (0..n)
                .map(|i| Node {
                    name: format!("N{i}"),
                    kind: NodeKind::Compute,
                    capacity: None,
                })
                .collect(),
            links: (1..n)
                .map(|i| Link {
                    name: format!("L{i}"),
                    a: NodeId(i - 1),
                    b: NodeId(i),
                    bandwidth_gbps: 8.0,
                    latency_us: 1.0,
                    lanes: 1,
                })
                .collect(),
            reduce_gbps: None,
            switch_latency_us: 0.0,
        }
    }

    #[test]
    fn a_line_of_sixteen_is_fifteen_links_across() {
        let m = line(16);
        let all: Vec<NodeId> = m.compute_nodes().collect();
        assert!((eccentricity_seconds(&m, &all) - 15e-6).abs() < 1e-15);
        // From the middle only half the line.
        assert!((eccentricity_seconds(&m, &[NodeId(8)]) - 8e-6).abs() < 1e-15);
    }

    #[test]
    fn switches_charge_their_latency_when_passed_through() {
        let mut m = line(3);
        m.nodes[1].kind = NodeKind::Switch;
        m.switch_latency_us = 0.5;
        let e = eccentricity_seconds(&m, &[NodeId(0)]);
        assert!((e - 2.5e-6).abs() < 1e-15, "{e}");
        let r = route_seconds(&m, NodeId(0), LinkId(0), &[LinkId(1)]);
        assert!((r - 2.5e-6).abs() < 1e-15, "{r}");
        // A device (a switch that runs a program) may end a transfer: a walk through it is
        // charged nothing extra by the bound.
        m.nodes[1].capacity = Some(4);
        let e = eccentricity_seconds(&m, &[NodeId(0)]);
        assert!((e - 2e-6).abs() < 1e-15, "{e}");
    }

    #[test]
    fn lanes_and_parallel_links_fan_out_alike() {
        let mut m = line(2);
        m.links[0].lanes = 2;
        let lanes = max_fan(&m);
        let mut m = line(2);
        m.links.push(m.links[0].clone());
        assert_eq!(lanes, 2);
        assert_eq!(max_fan(&m), 2);
    }

    #[test]
    fn spreading_needs_logarithmic_steps() {
        assert_eq!(spreading_steps(1, 3), 0);
        assert_eq!(spreading_steps(8, 7), 1);
        assert_eq!(spreading_steps(9, 7), 2);
        assert_eq!(spreading_steps(8, 1), 3);
        assert_eq!(spreading_steps(4, 2), 2);
        assert_eq!(spreading_steps(5, 0), 0);
    }
}
