//! The α-β-γ cost model of a phase and its lower bounds (SPEC §7).
//!
//! # Model
//!
//! A step costs `α + max(β, γ_overlapped) + γ_arrival`, where
//! - `α` is the largest latency ([`Link::latency_us`](crate::Link::latency_us)) of any link a
//!   transfer of the step crosses (every link of a route counts), or 0 for an idle step;
//! - `β` is the largest, over link directions, of the bytes the direction carries in the step
//!   divided by its bandwidth (`bandwidth_gbps · 10⁹ / 8` bytes per second);
//! - the γ terms charge the combining a compute node does, at the machine's
//!   [`reduce_gbps`](crate::Machine::reduce_gbps) (free when the machine declares none; devices
//!   combine at line rate and are never charged). A local [`Instr::Reduce`](crate::Instr::Reduce)
//!   reads the state at the start of the step, so it runs *while* the step's transfers are on
//!   the wire: its time overlaps `β`. A [`Recv`](crate::Instr::Recv) in
//!   [`RecvMode::Reduce`](crate::RecvMode::Reduce) combines data that has only just arrived, so
//!   its time comes after the transfer. Per node, the step then lasts
//!   `max(β, γ·local bytes) + γ·arrival bytes`, and the step as a whole lasts as long as its
//!   slowest node (`α` added once). This is what makes seed 001's pipelining pay: receiving a
//!   slice into scratch and reducing it one step later hides the reduction behind the next
//!   transfer.
//!
//! A transfer's bytes are the sum of its chunks' sizes for the phase's dtype; so are the bytes
//! a reduction combines. The estimate of a phase is the sum of its steps, in seconds.
//!
//! # Lower bounds
//!
//! With `p` compute nodes, `m` the vector's size in bytes, `egress(n)` the sum of the
//! bandwidths of the links at node `n` (bytes per second) and `E` the sum of `egress` over the
//! compute nodes:
//! - allreduce: `2(p-1)·m / E` (p-1 merges and p-1 deliveries of every block);
//! - reduce-scatter and allgather: `(p-1)·m / E`;
//! - broadcast and reduce: `m / egress(root)`;
//! - *in-network*: on a machine with reducing devices ([`Node::capacity`](crate::Node::capacity))
//!   merges can happen in the network, so the total-traffic bound above does not hold; in its
//!   place, every compute node must send its own contribution and receive its result over its
//!   own links: allreduce `m / egress(n)`, reduce-scatter and allgather `(p-1)/p · m /
//!   egress(n)`, the largest over the compute nodes (seed 003: the cut bound around a host then
//!   gives `m` over the host's link);
//! - *reduction*, when the machine declares `reduce_gbps` and has no devices: combining every
//!   block of an allreduce, reduce-scatter or reduce takes `(p-1)·m` bytes of operand, spread at
//!   best evenly over the `p` nodes: `(p-1)/p · m / rate`;
//! - every collective with `p > 1`: `α_min · ⌈log2 p⌉`, `α_min` the smallest link latency;
//! - cuts ([`cuts`]): for a cut with capacity `c` (bytes per second each way) whose two sides
//!   hold compute nodes, what one side needs from the other divided by `c`: allreduce, broadcast
//!   and reduce need the whole vector `m` across (a function of every input, or the root's
//!   vector); reduce-scatter needs across the chunks the far side owns, allgather the chunks
//!   the near side owns, whichever side is larger. This is what binds on an oversubscribed
//!   tree uplink.
//!
//! The bound reported is the largest of these; efficiency is bound / estimate.
//!
//! The functions here do not panic on unverified input (unknown ids are skipped), but their
//! numbers only mean something for a verified schedule.

pub mod cuts;

use crate::{Collective, Machine, NodeId, NodeKind, Phase, StepId};
use serde::Serialize;

/// Bytes per second of a link direction of `gbps` gigabits per second.
pub fn bytes_per_second(gbps: f64) -> f64 {
    gbps * 1e9 / 8.0
}

/// What one link direction carries in one step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct DirectionLoad {
    /// The link direction ([`Hop::direction`](crate::Hop::direction) numbering).
    pub direction: usize,
    /// Bytes carried.
    pub bytes: u64,
    /// Transfers carried.
    pub transfers: u32,
}

/// The traffic of one step.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct StepLoad {
    /// The step.
    pub step: StepId,
    /// Every link direction that carries something in the step, by direction.
    pub loads: Vec<DirectionLoad>,
    /// Bytes of every send of the step, each counted once however many links it crosses.
    pub bytes_sent: u64,
    /// Number of sends in the step.
    pub transfers: u32,
    /// The combining done by compute nodes in the step, one entry per node that combines, by
    /// node.
    pub reductions: Vec<NodeReduce>,
}

/// What one compute node combines in one step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct NodeReduce {
    /// The node.
    pub node: NodeId,
    /// Bytes combined by local [`Instr::Reduce`](crate::Instr::Reduce)s, which overlap the
    /// step's transfers.
    pub local_bytes: u64,
    /// Bytes combined by receives in [`RecvMode::Reduce`](crate::RecvMode::Reduce), which
    /// follow the transfer.
    pub arrival_bytes: u64,
}

impl StepLoad {
    /// How many link directions carry something.
    pub fn busy(&self) -> usize {
        self.loads.len()
    }

    /// The most bytes carried by one link direction (0 for an idle step).
    pub fn max_bytes(&self) -> u64 {
        self.loads.iter().map(|l| l.bytes).max().unwrap_or(0)
    }

    /// Bytes carried by all link directions together (a route's bytes count once per link).
    pub fn link_bytes(&self) -> u64 {
        self.loads
            .iter()
            .fold(0u64, |sum, l| sum.saturating_add(l.bytes))
    }
}

/// The number of steps the programs of `phase` actually have (for a verified phase,
/// [`Phase::steps`]).
fn step_count(phase: &Phase) -> usize {
    let longest = phase
        .programs
        .iter()
        .map(|p| p.steps.len())
        .max()
        .unwrap_or(0);
    longest.min(phase.steps as usize)
}

/// The traffic of every step of `phase`: bytes and transfers per link direction, following every
/// send along its whole route.
pub fn step_loads(machine: &Machine, phase: &Phase) -> Vec<StepLoad> {
    let steps = step_count(phase);
    let directions = machine.links.len().saturating_mul(2);
    let mut bytes = vec![0u64; directions];
    let mut transfers = vec![0u32; directions];
    let mut touched: Vec<usize> = Vec::new();
    let mut out = Vec::with_capacity(steps);
    for k in 0..steps {
        let mut bytes_sent = 0u64;
        let mut sends = 0u32;
        let mut reductions = Vec::new();
        for (n, program) in phase.programs.iter().enumerate() {
            let Some(step) = program.steps.get(k) else {
                continue;
            };
            let Ok(n) = u32::try_from(n) else { continue };
            let bytes_of = |chunks: &[crate::ChunkId]| {
                chunks
                    .iter()
                    .fold(0u64, |sum, &c| sum.saturating_add(phase.chunk_bytes(c)))
            };
            let computes = machine
                .nodes
                .get(n as usize)
                .is_some_and(|node| node.kind == NodeKind::Compute);
            let mut reduce = NodeReduce {
                node: NodeId(n),
                local_bytes: 0,
                arrival_bytes: 0,
            };
            for instr in step {
                let (link, via, chunks) = match instr {
                    crate::Instr::Send {
                        link, via, chunks, ..
                    } => (link, via, chunks),
                    crate::Instr::Reduce { chunks, .. } if computes => {
                        reduce.local_bytes = reduce.local_bytes.saturating_add(bytes_of(chunks));
                        continue;
                    }
                    crate::Instr::Recv {
                        chunks,
                        mode: crate::RecvMode::Reduce,
                        ..
                    } if computes => {
                        reduce.arrival_bytes =
                            reduce.arrival_bytes.saturating_add(bytes_of(chunks));
                        continue;
                    }
                    _ => continue,
                };
                let size = bytes_of(chunks);
                bytes_sent = bytes_sent.saturating_add(size);
                sends = sends.saturating_add(1);
                for hop in machine.route(NodeId(n), *link, via) {
                    let d = hop.direction();
                    if let (Some(b), Some(t)) = (bytes.get_mut(d), transfers.get_mut(d)) {
                        if *t == 0 {
                            touched.push(d);
                        }
                        *b = b.saturating_add(size);
                        *t = t.saturating_add(1);
                    }
                }
            }
            if reduce.local_bytes > 0 || reduce.arrival_bytes > 0 {
                reductions.push(reduce);
            }
        }
        touched.sort_unstable();
        let loads = touched
            .drain(..)
            .map(|d| {
                let load = DirectionLoad {
                    direction: d,
                    bytes: bytes[d],
                    transfers: transfers[d],
                };
                bytes[d] = 0;
                transfers[d] = 0;
                load
            })
            .collect();
        out.push(StepLoad {
            step: StepId(u32::try_from(k).unwrap_or(u32::MAX)),
            loads,
            bytes_sent,
            transfers: sends,
            reductions,
        });
    }
    out
}

/// The α-β-γ estimate of a phase.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Estimate {
    /// Total time, in seconds: the sum of [`Estimate::per_step`].
    pub seconds: f64,
    /// Time of each step, in seconds.
    pub per_step: Vec<f64>,
    /// The latency part of the total (sum of each step's α), in seconds.
    pub latency_seconds: f64,
    /// The bandwidth part of the total (sum of each step's β), in seconds.
    pub transfer_seconds: f64,
    /// The part of the total spent combining and not hidden behind transfers (sum over steps
    /// of the step's time beyond `α + β`), in seconds; 0 when the machine declares no
    /// `reduce_gbps`.
    pub reduce_seconds: f64,
}

/// The α-β-γ estimate of `phase` on `machine` (see the [module doc](self)).
pub fn estimate(machine: &Machine, phase: &Phase) -> Estimate {
    estimate_loads(machine, &step_loads(machine, phase))
}

/// Seconds to combine `bytes` at `rate` bytes per second (0 when combining is free).
fn combine_seconds(bytes: u64, rate: Option<f64>) -> f64 {
    match rate {
        Some(r) if r > 0.0 => bytes as f64 / r,
        _ => 0.0,
    }
}

/// The α-β-γ estimate of steps whose traffic is `loads` (as computed by [`step_loads`]).
pub fn estimate_loads(machine: &Machine, loads: &[StepLoad]) -> Estimate {
    let rate = machine
        .reduce_gbps
        .filter(|r| r.is_finite() && *r > 0.0)
        .map(bytes_per_second);
    let mut per_step = Vec::with_capacity(loads.len());
    let mut latency_seconds = 0.0;
    let mut transfer_seconds = 0.0;
    let mut reduce_seconds = 0.0;
    for step in loads {
        let mut alpha: f64 = 0.0;
        let mut beta: f64 = 0.0;
        for load in &step.loads {
            let Some(link) = machine.links.get(load.direction / 2) else {
                continue;
            };
            alpha = alpha.max(link.latency_us * 1e-6);
            beta = beta.max(load.bytes as f64 / bytes_per_second(link.bandwidth_gbps));
        }
        let busy = step.reductions.iter().fold(beta, |slowest, r| {
            let node = beta.max(combine_seconds(r.local_bytes, rate))
                + combine_seconds(r.arrival_bytes, rate);
            slowest.max(node)
        });
        latency_seconds += alpha;
        transfer_seconds += beta;
        reduce_seconds += busy - beta;
        per_step.push(alpha + busy);
    }
    Estimate {
        seconds: per_step.iter().sum(),
        per_step,
        latency_seconds,
        transfer_seconds,
        reduce_seconds,
    }
}

/// A lower bound on the time of a phase.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Bound {
    /// The bound, in seconds: the largest of the bounds below.
    pub seconds: f64,
    /// Which bound binds: `"total traffic"`, `"in-network"`, `"root egress"`, `"cut"`,
    /// `"reduction"` or `"latency"`.
    pub which: &'static str,
    /// The bandwidth bound: total traffic, or, on a machine with reducing devices, the
    /// in-network bound; the root's egress for broadcast and reduce.
    pub traffic_seconds: f64,
    /// The cut bound alone (0 when the machine has a single compute node).
    pub cut_seconds: f64,
    /// The reduction bound, `(p-1)/p · m / reduce rate` (0 when the machine declares no rate,
    /// has devices, or the collective combines nothing).
    pub reduce_seconds: f64,
    /// The latency bound, `α_min · ⌈log2 p⌉`.
    pub latency_seconds: f64,
}

/// Sum of the bandwidths (bytes per second) of the links at `node`.
pub fn egress(machine: &Machine, node: NodeId) -> f64 {
    machine
        .links
        .iter()
        .filter(|l| l.a == node || l.b == node)
        .map(|l| bytes_per_second(l.bandwidth_gbps))
        .sum()
}

/// `⌈log2 p⌉` for `p ≥ 1`, 0 for `p = 0`.
fn ceil_log2(p: u64) -> u32 {
    if p <= 1 {
        0
    } else {
        64 - (p - 1).leading_zeros()
    }
}

/// The lower bound for `phase` on `machine` (see the [module doc](self)).
pub fn lower_bound(machine: &Machine, phase: &Phase) -> Bound {
    let compute: Vec<NodeId> = machine
        .nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| n.kind == NodeKind::Compute)
        .filter_map(|(i, _)| u32::try_from(i).ok().map(NodeId))
        .collect();
    let p = compute.len() as f64;
    let m = phase.elements as f64 * phase.dtype.size_bytes() as f64;
    let total_egress: f64 = compute.iter().map(|&n| egress(machine, n)).sum();
    let ratio = |bytes: f64, bandwidth: f64| {
        if bytes <= 0.0 || bandwidth <= 0.0 {
            0.0
        } else {
            bytes / bandwidth
        }
    };
    // With devices that combine, merges need not happen on compute nodes: each node only
    // has to get its contribution out and its result in.
    let in_network = machine.nodes.iter().any(|n| n.capacity.is_some());
    let slowest_node = |bytes: f64| {
        compute
            .iter()
            .map(|&n| ratio(bytes, egress(machine, n)))
            .fold(0.0, f64::max)
    };
    let share = if p > 0.0 { (p - 1.0).max(0.0) / p } else { 0.0 };
    let (traffic_seconds, traffic_name) = match phase.collective {
        Collective::AllReduce if in_network => {
            (slowest_node(if p > 1.0 { m } else { 0.0 }), "in-network")
        }
        Collective::ReduceScatter | Collective::AllGather if in_network => {
            (slowest_node(share * m), "in-network")
        }
        Collective::AllReduce => (
            ratio(2.0 * (p - 1.0).max(0.0) * m, total_egress),
            "total traffic",
        ),
        Collective::ReduceScatter | Collective::AllGather => {
            (ratio((p - 1.0).max(0.0) * m, total_egress), "total traffic")
        }
        Collective::Broadcast { root } | Collective::Reduce { root } => {
            let m = if compute.len() > 1 { m } else { 0.0 };
            (ratio(m, egress(machine, root)), "root egress")
        }
    };
    let combines = matches!(
        phase.collective,
        Collective::AllReduce | Collective::ReduceScatter | Collective::Reduce { .. }
    );
    let reduce_seconds = match machine.reduce_gbps {
        Some(rate) if combines && !in_network && rate.is_finite() && rate > 0.0 => {
            ratio(share * m, bytes_per_second(rate))
        }
        _ => 0.0,
    };
    let alpha_min = machine
        .links
        .iter()
        .map(|l| l.latency_us * 1e-6)
        .filter(|a| a.is_finite())
        .fold(f64::INFINITY, f64::min);
    let alpha_min = if alpha_min.is_finite() {
        alpha_min
    } else {
        0.0
    };
    let latency_seconds = alpha_min * f64::from(ceil_log2(compute.len() as u64));
    let cut_seconds = cut_bound(machine, phase, &compute, m);
    let mut candidates = [
        (traffic_seconds, traffic_name),
        (cut_seconds, "cut"),
        (reduce_seconds, "reduction"),
        (latency_seconds, "latency"),
    ];
    // The largest binds; of equal ones the first listed wins (a stable sort keeps the order).
    candidates.sort_by(|a, b| b.0.total_cmp(&a.0));
    let (seconds, which) = candidates[0];
    Bound {
        seconds,
        which,
        traffic_seconds,
        cut_seconds,
        reduce_seconds,
        latency_seconds,
    }
}

/// The largest, over the machine's minimum cuts, of the bytes that must cross a cut divided
/// by its capacity.
fn cut_bound(machine: &Machine, phase: &Phase, compute: &[NodeId], m: f64) -> f64 {
    let source = match phase.collective {
        Collective::Broadcast { root } | Collective::Reduce { root } => root,
        _ => match compute.first() {
            Some(&n) => n,
            None => return 0.0,
        },
    };
    let owned_bytes = |inside: &[bool], want_inside: bool| -> f64 {
        phase
            .chunks
            .iter()
            .enumerate()
            .filter(|(_, c)| {
                c.owner
                    .is_some_and(|o| inside.get(o.index()).copied() == Some(want_inside))
            })
            .map(|(i, _)| phase.chunk_bytes(crate::ChunkId::new(i)) as f64)
            .sum()
    };
    cuts::min_cuts(machine, source)
        .iter()
        .filter(|cut| cut.capacity > 0.0)
        .map(|cut| {
            let needed = match phase.collective {
                Collective::AllReduce
                | Collective::Broadcast { .. }
                | Collective::Reduce { .. } => m,
                // Each side must receive the chunks it owns, reduced over the other side;
                // for an allgather, the chunks the other side owns. Either way the larger
                // share bounds the time, as each direction has the same capacity.
                Collective::ReduceScatter | Collective::AllGather => {
                    owned_bytes(&cut.inside, true).max(owned_bytes(&cut.inside, false))
                }
            };
            needed / cut.capacity
        })
        .fold(0.0, f64::max)
}

/// `bound / estimate`, between 0 and 1 for a sound bound; 1 when the estimate is 0.
pub fn efficiency(bound: &Bound, estimate: &Estimate) -> f64 {
    if estimate.seconds > 0.0 {
        bound.seconds / estimate.seconds
    } else {
        1.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        Buffer, BufferId, BufferKind, Chunk, ChunkId, DType, Instr, Link, LinkId, Node, Program,
        RecvMode, ReduceOp,
    };

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-12 * a.abs().max(b.abs()).max(1e-30)
    }

    /// N0 — S — N1 and N0 — N1 directly: links L0 (N0-S, 80 Gbps = 1e10 B/s, 2 µs),
    /// L1 (S-N1, 80 Gbps, 3 µs), L2 (N0-N1, 8 Gbps = 1e9 B/s, 0.5 µs).
    fn machine() -> Machine {
        let node = |name: &str, kind| Node {
            name: name.into(),
            kind,
            capacity: None,
        };
        let link = |name: &str, a, b, gbps, lat| Link {
            name: name.into(),
            a: NodeId(a),
            b: NodeId(b),
            bandwidth_gbps: gbps,
            latency_us: lat,
            lanes: 2,
        };
        Machine {
            name: "m".into(),
            nodes: vec![
                node("N0", NodeKind::Compute),
                node("S", NodeKind::Switch),
                node("N1", NodeKind::Compute),
            ],
            links: vec![
                link("L0", 0, 1, 80.0, 2.0),
                link("L1", 1, 2, 80.0, 3.0),
                link("L2", 0, 2, 8.0, 0.5),
            ],
            reduce_gbps: None,
        }
    }

    fn send(link: u32, via: &[u32], to: u32, chunks: &[u32]) -> Instr {
        Instr::Send {
            link: LinkId(link),
            via: via.iter().map(|&l| LinkId(l)).collect(),
            to: NodeId(to),
            buffer: BufferId(0),
            chunks: chunks.iter().map(|&c| ChunkId(c)).collect(),
        }
    }

    fn recv(link: u32, from: u32, chunks: &[u32]) -> Instr {
        Instr::Recv {
            link: LinkId(link),
            from: NodeId(from),
            buffer: BufferId(0),
            chunks: chunks.iter().map(|&c| ChunkId(c)).collect(),
            mode: RecvMode::Reduce,
        }
    }

    /// 1000 f32 in two chunks of 500 (2000 B each). Step 0: N0 sends chunk 0 to N1 through the
    /// switch and N1 sends chunk 1 to N0 directly. Step 1: N0 sends both chunks directly.
    fn phase(collective: Collective) -> Phase {
        Phase {
            name: "p".into(),
            collective,
            op: ReduceOp::Sum,
            dtype: DType::F32,
            elements: 1000,
            algorithm: "test".into(),
            chunks: vec![
                Chunk {
                    start: 0,
                    end: 500,
                    owner: None,
                },
                Chunk {
                    start: 500,
                    end: 1000,
                    owner: None,
                },
            ],
            buffers: vec![Buffer {
                name: "data".into(),
                kind: BufferKind::Data,
            }],
            steps: 2,
            programs: vec![
                Program {
                    steps: vec![
                        vec![send(0, &[1], 2, &[0]), recv(2, 2, &[1])],
                        vec![send(2, &[], 2, &[0, 1])],
                    ],
                },
                Program::default(),
                Program {
                    steps: vec![
                        vec![send(2, &[], 0, &[1]), recv(1, 0, &[0])],
                        vec![recv(2, 0, &[0, 1])],
                    ],
                },
            ],
        }
    }

    #[test]
    fn loads_follow_routes() {
        let loads = step_loads(&machine(), &phase(Collective::AllReduce));
        assert_eq!(loads.len(), 2);
        // Step 0: L0 N0→S (dir 0), L1 S→N1 (dir 2), L2 N1→N0 (dir 5), 2000 B each.
        let dirs: Vec<(usize, u64)> = loads[0]
            .loads
            .iter()
            .map(|l| (l.direction, l.bytes))
            .collect();
        assert_eq!(dirs, vec![(0, 2000), (2, 2000), (5, 2000)]);
        assert_eq!(loads[0].bytes_sent, 4000);
        assert_eq!(loads[0].link_bytes(), 6000);
        assert_eq!(loads[0].transfers, 2);
        // Step 1: L2 N0→N1 (dir 4), 4000 B.
        assert_eq!(loads[1].busy(), 1);
        assert_eq!(loads[1].max_bytes(), 4000);
    }

    #[test]
    fn estimate_is_alpha_plus_beta_per_step() {
        let e = estimate(&machine(), &phase(Collective::AllReduce));
        // Step 0: α = max(2, 3, 0.5) µs = 3 µs; β = max(2000/1e10, 2000/1e10, 2000/1e9) = 2 µs.
        // Step 1: α = 0.5 µs; β = 4000/1e9 = 4 µs.
        assert!(close(e.per_step[0], 5e-6), "{:?}", e);
        assert!(close(e.per_step[1], 4.5e-6), "{:?}", e);
        assert!(close(e.seconds, 9.5e-6));
        assert!(close(e.latency_seconds, 3.5e-6));
        assert!(close(e.transfer_seconds, 6e-6));
    }

    #[test]
    fn bounds_by_collective() {
        let m = machine();
        // Egress: N0 = 1e10 + 1e9 = 1.1e10 B/s, N1 likewise; E = 2.2e10. m = 4000 B, p = 2.
        // α_min = 0.5 µs, ⌈log2 2⌉ = 1.
        let b = lower_bound(&m, &phase(Collective::AllReduce));
        assert!(close(b.traffic_seconds, 2.0 * 4000.0 / 2.2e10));
        assert!(close(b.latency_seconds, 0.5e-6));
        assert_eq!(b.which, "latency");
        assert!(close(b.seconds, 0.5e-6));

        let b = lower_bound(&m, &phase(Collective::ReduceScatter));
        assert!(close(b.traffic_seconds, 4000.0 / 2.2e10));
        let b = lower_bound(&m, &phase(Collective::AllGather));
        assert!(close(b.traffic_seconds, 4000.0 / 2.2e10));

        let b = lower_bound(&m, &phase(Collective::Broadcast { root: NodeId(0) }));
        assert!(close(b.traffic_seconds, 4000.0 / 1.1e10));
        let b = lower_bound(&m, &phase(Collective::Reduce { root: NodeId(2) }));
        assert!(close(b.traffic_seconds, 4000.0 / 1.1e10));
    }

    #[test]
    fn traffic_bound_binds_for_big_vectors() {
        let mut p = phase(Collective::AllReduce);
        p.elements = 1_000_000_000; // 4e9 B
        let b = lower_bound(&machine(), &p);
        assert_eq!(b.which, "total traffic");
        assert!(close(b.seconds, 2.0 * 4e9 / 2.2e10));
    }

    #[test]
    fn efficiency_is_bound_over_estimate() {
        let m = machine();
        let p = phase(Collective::AllReduce);
        let e = estimate(&m, &p);
        let b = lower_bound(&m, &p);
        assert!(close(efficiency(&b, &e), 0.5e-6 / 9.5e-6));
        let idle = Estimate {
            seconds: 0.0,
            per_step: vec![],
            latency_seconds: 0.0,
            transfer_seconds: 0.0,
            reduce_seconds: 0.0,
        };
        assert_eq!(efficiency(&b, &idle), 1.0);
    }

    /// N0 and N1 joined by L2 only, combining at 8 Gbit/s = 1e9 B/s: step 0 receives chunk 1
    /// into scratch while N1 receives chunk 0 reducing on arrival; step 1 reduces N0's scratch
    /// locally while N0 sends both chunks.
    fn gamma_phase() -> (Machine, Phase) {
        let mut m = machine();
        m.reduce_gbps = Some(8.0);
        let mut p = phase(Collective::AllReduce);
        p.buffers.push(Buffer {
            name: "scratch".into(),
            kind: BufferKind::Scratch,
        });
        let into_scratch = Instr::Recv {
            link: LinkId(2),
            from: NodeId(2),
            buffer: BufferId(1),
            chunks: vec![ChunkId(1)],
            mode: RecvMode::Store,
        };
        let local = Instr::Reduce {
            src: BufferId(1),
            dst: BufferId(0),
            chunks: vec![ChunkId(1)],
        };
        p.programs[0].steps = vec![
            vec![send(0, &[1], 2, &[0]), into_scratch],
            vec![send(2, &[], 2, &[0, 1]), local],
        ];
        (m, p)
    }

    #[test]
    fn gamma_charges_arrival_reductions_and_hides_local_ones() {
        let (m, p) = gamma_phase();
        let loads = step_loads(&m, &p);
        assert_eq!(
            loads[0].reductions,
            vec![NodeReduce {
                node: NodeId(2),
                local_bytes: 0,
                arrival_bytes: 2000,
            }]
        );
        assert_eq!(
            loads[1].reductions,
            vec![
                NodeReduce {
                    node: NodeId(0),
                    local_bytes: 2000,
                    arrival_bytes: 0,
                },
                NodeReduce {
                    node: NodeId(2),
                    local_bytes: 0,
                    arrival_bytes: 4000,
                },
            ]
        );
        let e = estimate_loads(&m, &loads);
        // Step 0: α 3 µs, β 2 µs, then N1 combines 2000 B at 1e9 B/s after arrival: 2 µs.
        assert!(close(e.per_step[0], 7e-6), "{e:?}");
        // Step 1: α 0.5 µs, β 4 µs; N0's local 2 µs hides under β; N1 combines 4000 B after
        // arrival: 4 µs.
        assert!(close(e.per_step[1], 8.5e-6), "{e:?}");
        assert!(close(e.reduce_seconds, 6e-6), "{e:?}");
        assert!(close(e.transfer_seconds, 6e-6));
        // Without a rate, reduction is free: the α-β estimate.
        let free = estimate(&machine(), &p);
        assert!(close(free.seconds, 9.5e-6), "{free:?}");
        assert_eq!(free.reduce_seconds, 0.0);
    }

    #[test]
    fn a_slow_local_reduction_sets_the_step() {
        let (mut m, p) = gamma_phase();
        m.reduce_gbps = Some(0.8); // 1e8 B/s: N0's 2000 B local reduce takes 20 µs > β 4 µs.
        let e = estimate(&m, &p);
        // Step 1: α 0.5 + max(β 4, N0 20, N1 0) and N1's arrival 40 µs after β: the slowest
        // node is N1 at 4 + 40 = 44 µs.
        assert!(close(e.per_step[1], 44.5e-6), "{e:?}");
    }

    #[test]
    fn reduction_bound_binds_when_combining_is_slow() {
        let mut m = machine();
        m.reduce_gbps = Some(0.008); // 1e6 B/s
        let mut p = phase(Collective::AllReduce);
        p.elements = 1_000_000; // 4e6 B; (p-1)/p · m = 2e6 B → 2 s.
        let b = lower_bound(&m, &p);
        assert_eq!(b.which, "reduction");
        assert!(close(b.reduce_seconds, 2.0), "{b:?}");
        // An allgather combines nothing.
        let b = lower_bound(&m, &phase(Collective::AllGather));
        assert_eq!(b.reduce_seconds, 0.0);
    }

    #[test]
    fn in_network_bound_replaces_total_traffic_on_machines_with_devices() {
        let mut m = machine();
        m.nodes[1].capacity = Some(4);
        let mut p = phase(Collective::AllReduce);
        p.elements = 1_000_000_000; // 4e9 B
        let b = lower_bound(&m, &p);
        // Each node sends its 4e9 B and receives its result over 1.1e10 B/s of links.
        assert_eq!(b.which, "in-network");
        assert!(close(b.traffic_seconds, 4e9 / 1.1e10), "{b:?}");
        let b = lower_bound(&m, &phase(Collective::ReduceScatter));
        assert!(close(b.traffic_seconds, 0.5 * 4000.0 / 1.1e10), "{b:?}");
        // Broadcast keeps its root-egress bound.
        let b = lower_bound(&m, &phase(Collective::Broadcast { root: NodeId(0) }));
        assert!(close(b.traffic_seconds, 4000.0 / 1.1e10), "{b:?}");
    }

    #[test]
    fn ceil_log2_values() {
        assert_eq!(
            [0, 1, 2, 3, 4, 5, 8, 9].map(ceil_log2),
            [0, 0, 1, 2, 2, 3, 3, 4]
        );
    }

    #[test]
    fn unknown_ids_are_skipped() {
        let m = machine();
        let mut p = phase(Collective::AllReduce);
        p.programs[0].steps[0].push(send(99, &[], 2, &[7]));
        p.steps = 1000;
        let loads = step_loads(&m, &p);
        assert_eq!(loads.len(), 2);
        let b = lower_bound(&m, &phase(Collective::Broadcast { root: NodeId(42) }));
        assert_eq!(b.traffic_seconds, 0.0);
    }
}
