//! Bisection bandwidth: over every split of the compute nodes into two halves (sizes differing
//! by at most one), the least link bandwidth that must be cut to separate them, per direction.
//!
//! On a machine of compute nodes only, a split's cut is the bandwidth of the links between the
//! halves. With switches, a switch may side with either half, so a split's cut is a minimum
//! cut between the two halves, found as a maximum flow (Dinic's algorithm) in which every link
//! carries its bandwidth each way.
//!
//! **Exact** for up to [`EXACT_MAX_COMPUTE`] compute nodes (when the work stays reasonable):
//! every split is tried. **Estimate** otherwise: the best of a few balanced splits — the
//! compute nodes in id order cut in half (the natural cut of tori, hypercubes and fabrics),
//! and halves grown by breadth-first search from several nodes — each improved, on machines
//! without switches, by Kernighan–Lin-style swaps of the pair that lowers the cut most. An
//! estimate is an upper bound: the true bisection may be lower.

use super::Machine;
use crate::ids::IdVec;
use schedule_ir::{LinkId, NodeId, NodeKind};
use std::collections::VecDeque;

/// Exact search up to this many compute nodes.
pub const EXACT_MAX_COMPUTE: usize = 20;

/// Work allowed for the exact search, in (splits × graph size).
const EXACT_WORK: u64 = 300_000_000;

/// Breadth-first seeds tried by the estimate.
const SEEDS: usize = 8;

/// A machine's bisection bandwidth.
#[derive(Clone, Debug, PartialEq)]
pub struct Bisection {
    /// Gbit/s per direction across the best split found.
    pub gbps: f64,
    /// Whether every split was tried (otherwise an upper bound from the splits tried).
    pub exact: bool,
    /// How many splits were evaluated.
    pub splits: u64,
}

/// Computes the bisection bandwidth of `machine`: exactly when it is small, else an estimate.
pub fn bisection(machine: &Machine) -> Bisection {
    let compute = machine.compute_nodes();
    let c = compute.len();
    let cuts = Cuts::new(machine);
    if c < 2 {
        return Bisection {
            gbps: 0.0,
            exact: true,
            splits: 0,
        };
    }
    let splits = binomial(c as u64, (c / 2) as u64) / if c % 2 == 0 { 2 } else { 1 };
    let size = if cuts.switched {
        (machine.node_count() + machine.link_count()) as u64
    } else {
        machine.link_count() as u64
    };
    if c <= EXACT_MAX_COMPUTE && splits.saturating_mul(size.max(1)) <= EXACT_WORK {
        exact(&cuts, &compute, splits)
    } else {
        estimate(machine, &cuts, &compute)
    }
}

fn exact(cuts: &Cuts, compute: &[NodeId], splits: u64) -> Bisection {
    let c = compute.len();
    let k = c / 2;
    let mut best = f64::INFINITY;
    let mut side: Side = IdVec::filled(false, cuts.adj.len());
    // Every k-subset as a bit mask (Gosper's hack); with an even count, node 0's half only.
    let mut mask: u32 = (1 << k) - 1;
    let limit: u32 = 1 << c;
    while mask < limit {
        if c % 2 == 1 || mask & 1 == 1 {
            for (i, &v) in compute.iter().enumerate() {
                side[v] = mask & (1 << i) != 0;
            }
            best = best.min(cuts.cut(&side));
        }
        let low = mask & mask.wrapping_neg();
        let ripple = mask + low;
        mask = (((ripple ^ mask) >> 2) / low) | ripple;
    }
    Bisection {
        gbps: best,
        exact: true,
        splits,
    }
}

fn estimate(machine: &Machine, cuts: &Cuts, compute: &[NodeId]) -> Bisection {
    let c = compute.len();
    let mut candidates: Vec<Vec<NodeId>> = vec![compute[..c / 2].to_vec()];
    for s in 0..SEEDS.min(c) {
        let seed = compute[s * c / SEEDS.min(c)];
        candidates.push(bfs_half(machine, seed, c / 2));
    }
    let mut best = f64::INFINITY;
    let mut splits = 0;
    for half in candidates {
        let mut side: Side = IdVec::filled(false, cuts.adj.len());
        for &v in &half {
            side[v] = true;
        }
        if !cuts.switched {
            cuts.refine(&mut side, compute);
        }
        best = best.min(cuts.cut(&side));
        splits += 1;
    }
    Bisection {
        gbps: best,
        exact: false,
        splits,
    }
}

/// The first `k` compute nodes reached by breadth-first search from `seed`.
fn bfs_half(machine: &Machine, seed: NodeId, k: usize) -> Vec<NodeId> {
    let mut seen: IdVec<NodeId, bool> = IdVec::filled(false, machine.node_count());
    let mut queue = VecDeque::from([seed]);
    seen[seed] = true;
    let mut half = Vec::with_capacity(k);
    while let Some(v) = queue.pop_front() {
        if half.len() == k {
            break;
        }
        if machine.node(v).kind == NodeKind::Compute {
            half.push(v);
        }
        for (_, u) in machine.links_at(v) {
            if !std::mem::replace(&mut seen[u], true) {
                queue.push_back(u);
            }
        }
    }
    half
}

fn binomial(n: u64, k: u64) -> u64 {
    (0..k).fold(1u64, |acc, i| acc.saturating_mul(n - i) / (i + 1))
}

/// Which half each node is in (`true`: the marked half; switches are never marked). Its nodes
/// are the machine's, as are those of [`Cuts`], so either indexes the other.
type Side = IdVec<NodeId, bool>;

/// The machine as adjacency lists of (neighbour, bandwidth), for evaluating cuts.
struct Cuts {
    switched: bool,
    compute: IdVec<NodeId, bool>,
    adj: IdVec<NodeId, Vec<(NodeId, f64)>>,
}

impl Cuts {
    fn new(machine: &Machine) -> Cuts {
        let n = machine.node_count();
        let mut adj: IdVec<NodeId, Vec<(NodeId, f64)>> = IdVec::filled(Vec::new(), n);
        for j in 0..machine.link_count() {
            let (a, b) = machine.endpoints(LinkId::new(j));
            let bw = machine.link(LinkId::new(j)).bandwidth_gbps;
            adj[a].push((b, bw));
            adj[b].push((a, bw));
        }
        Cuts {
            switched: machine.has_switches(),
            compute: IdVec::from_fn(n, |v| machine.node(v).kind == NodeKind::Compute),
            adj,
        }
    }

    /// The bandwidth separating the compute nodes marked `true` from the other compute nodes.
    fn cut(&self, side: &Side) -> f64 {
        if !self.switched {
            let mut sum = 0.0;
            for (v, nbrs) in self.adj.iter_enumerated() {
                for &(u, bw) in nbrs {
                    if v < u && side[v] != side[u] {
                        sum += bw;
                    }
                }
            }
            return sum;
        }
        self.min_cut(side)
    }

    /// Maximum flow from the marked compute nodes to the unmarked ones (switches free).
    fn min_cut(&self, side: &Side) -> f64 {
        // The flow network's vertices are the nodes' indices, then a source and a sink.
        let n = self.adj.len();
        let mut flow = Flow::new(n + 2);
        let (s, t) = (n, n + 1);
        for (v, nbrs) in self.adj.iter_enumerated() {
            for &(u, bw) in nbrs {
                if v < u {
                    flow.edge(v.index(), u.index(), bw);
                }
            }
        }
        // Every compute node is a source or a sink; switches (never marked) are neither.
        for ((v, &marked), &compute) in side.iter_enumerated().zip(&self.compute) {
            if marked {
                flow.arc(s, v.index(), f64::INFINITY);
            } else if compute {
                flow.arc(v.index(), t, f64::INFINITY);
            }
        }
        flow.max_flow(s, t)
    }

    /// Kernighan–Lin-style improvement: repeatedly swap the compute node of each half whose
    /// move lowers the cut most, while the swap lowers it.
    fn refine(&self, side: &mut Side, compute: &[NodeId]) {
        let gain = |side: &Side, v: NodeId| -> f64 {
            self.adj[v]
                .iter()
                .map(|&(u, bw)| if side[u] != side[v] { bw } else { -bw })
                .sum()
        };
        let weight = |a: NodeId, b: NodeId| -> f64 {
            self.adj[a]
                .iter()
                .filter(|&&(u, _)| u == b)
                .map(|&(_, bw)| bw)
                .sum()
        };
        for _ in 0..compute.len().min(2000) {
            let best = |want: bool, side: &Side| {
                compute
                    .iter()
                    .copied()
                    .filter(|&v| side[v] == want)
                    .map(|v| (gain(side, v), v))
                    .max_by(|x, y| x.0.total_cmp(&y.0).then(y.1.cmp(&x.1)))
            };
            let (Some((ga, a)), Some((gb, b))) = (best(true, side), best(false, side)) else {
                return;
            };
            if ga + gb - 2.0 * weight(a, b) <= 1e-9 {
                return;
            }
            side[a] = false;
            side[b] = true;
        }
    }
}

/// A flow network for Dinic's algorithm.
struct Flow {
    /// (to, residual capacity), paired arcs at `2i` and `2i + 1`.
    arcs: Vec<(usize, f64)>,
    out: Vec<Vec<usize>>,
}

impl Flow {
    fn new(n: usize) -> Flow {
        Flow {
            arcs: Vec::new(),
            out: vec![Vec::new(); n],
        }
    }

    /// A directed arc `a → b` of capacity `cap`.
    fn arc(&mut self, a: usize, b: usize, cap: f64) {
        self.out[a].push(self.arcs.len());
        self.arcs.push((b, cap));
        self.out[b].push(self.arcs.len());
        self.arcs.push((a, 0.0));
    }

    /// An undirected edge: capacity `cap` each way.
    fn edge(&mut self, a: usize, b: usize, cap: f64) {
        self.out[a].push(self.arcs.len());
        self.arcs.push((b, cap));
        self.out[b].push(self.arcs.len());
        self.arcs.push((a, cap));
    }

    fn max_flow(&mut self, s: usize, t: usize) -> f64 {
        let n = self.out.len();
        let mut total = 0.0;
        loop {
            let mut level = vec![usize::MAX; n];
            level[s] = 0;
            let mut queue = VecDeque::from([s]);
            while let Some(v) = queue.pop_front() {
                for &e in &self.out[v] {
                    let (u, cap) = self.arcs[e];
                    if cap > 1e-12 && level[u] == usize::MAX {
                        level[u] = level[v] + 1;
                        queue.push_back(u);
                    }
                }
            }
            if level[t] == usize::MAX {
                return total;
            }
            let mut next = vec![0; n];
            loop {
                let pushed = self.push(s, t, f64::INFINITY, &level, &mut next);
                if pushed <= 1e-12 {
                    break;
                }
                total += pushed;
            }
        }
    }

    /// One augmenting path in the level graph, found iteratively.
    fn push(&mut self, s: usize, t: usize, limit: f64, level: &[usize], next: &mut [usize]) -> f64 {
        let mut path: Vec<usize> = Vec::new(); // arcs
        let mut v = s;
        loop {
            if v == t {
                let amount = path.iter().map(|&e| self.arcs[e].1).fold(limit, f64::min);
                for &e in &path {
                    self.arcs[e].1 -= amount;
                    self.arcs[e ^ 1].1 += amount;
                }
                return amount;
            }
            let mut advanced = false;
            while next[v] < self.out[v].len() {
                let e = self.out[v][next[v]];
                let (u, cap) = self.arcs[e];
                if cap > 1e-12 && level[u] == level[v] + 1 {
                    path.push(e);
                    v = u;
                    advanced = true;
                    break;
                }
                next[v] += 1;
            }
            if !advanced {
                // Dead end: retreat one arc and skip it from now on.
                let Some(e) = path.pop() else {
                    return 0.0;
                };
                v = self.arcs[e ^ 1].0;
                next[v] += 1;
            }
        }
    }
}
