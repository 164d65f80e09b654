//! The α-β-γ cost model of a phase and its lower bounds (SPEC §7).
//!
//! # Model
//!
//! A step costs `α + max(β, γ_overlapped) + γ_arrival`, where
//! - `α` is the latency of the slowest transfer of the step, or 0 for an idle step; a
//!   transfer's latency is the sum of the latencies ([`Link::latency_us`](crate::Link::latency_us))
//!   of every link its route crosses, plus the machine's
//!   [`switch_latency_us`](crate::Machine::switch_latency_us) for every switch it is
//!   forwarded by ([`latency::route_seconds`]);
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
//! [`lower_bound`] ([`bounds`]) gives a bound that holds for every valid schedule on the
//! machine: the latency bound (information must cross the machine, and can spread only as
//! fast as the nodes' lanes allow) plus the largest of the bandwidth bounds (total traffic or
//! in-network, root egress, [`cuts`], reduction). Efficiency is bound / estimate, at most 1.
//! `docs/methods.md` ("Lower bounds") proves each one.
//!
//! The functions here do not panic on unverified input (unknown ids are skipped), but their
//! numbers only mean something for a verified schedule.

pub mod bounds;
pub mod cuts;
pub mod latency;

pub use bounds::{egress, egresses, lower_bound, lower_bound_with, Bound, BoundBasis};

use crate::{Machine, NodeId, NodeKind, Phase, StepId};
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
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StepLoad {
    /// The step.
    pub step: StepId,
    /// Every link direction that carries something in the step, by direction.
    pub loads: Vec<DirectionLoad>,
    /// Bytes of every send of the step, each counted once however many links it crosses.
    pub bytes_sent: u64,
    /// Number of sends in the step.
    pub transfers: u32,
    /// The latency of the slowest send of the step, in seconds ([`latency::route_seconds`]);
    /// 0 for a step without sends.
    pub latency_seconds: f64,
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
    let mut tally = StepTally::new(machine);
    let mut out = Vec::with_capacity(steps);
    let chunk_bytes = crate::ChunkBytes::of(phase);
    for k in 0..steps {
        for (n, program) in phase.programs.iter().enumerate() {
            let Some(step) = program.steps.get(k) else {
                continue;
            };
            let Ok(n) = u32::try_from(n) else { continue };
            let node = NodeId(n);
            for instr in step {
                match instr {
                    crate::Instr::Send {
                        link, via, chunks, ..
                    } => tally.send(node, *link, via, chunk_bytes.bytes(chunks)),
                    crate::Instr::Reduce { chunks, .. } => {
                        tally.combine(node, chunk_bytes.bytes(chunks), 0)
                    }
                    crate::Instr::Recv {
                        chunks,
                        mode: crate::RecvMode::Reduce,
                        ..
                    } => tally.combine(node, 0, chunk_bytes.bytes(chunks)),
                    _ => {}
                }
            }
        }
        out.push(tally.finish(k));
    }
    out
}

/// One step's traffic, gathered send by send: what [`step_loads`] reads from a phase's
/// programs, and what a lowering that prices candidate timetables before writing any program
/// reads from its own transfers, so that both price a step the same way to the bit.
pub struct StepTally<'m> {
    machine: &'m Machine,
    /// Bytes and sends on each link direction so far, by direction index.
    bytes: Vec<u64>,
    transfers: Vec<u32>,
    /// Directions carrying something, to read and clear at the end of the step.
    touched: Vec<usize>,
    bytes_sent: u64,
    sends: u32,
    slowest: f64,
    /// Bytes combined so far by each node, (local, arrival), by node index.
    combined: Vec<(u64, u64)>,
    /// Nodes combining something, to read and clear at the end of the step.
    combining: Vec<usize>,
    /// The steps priced so far ([`StepTally::price`]).
    totals: Totals,
}

impl<'m> StepTally<'m> {
    /// An empty step on `machine`.
    pub fn new(machine: &'m Machine) -> Self {
        let directions = machine.links.len().saturating_mul(2);
        StepTally {
            machine,
            bytes: vec![0; directions],
            transfers: vec![0; directions],
            touched: Vec::new(),
            bytes_sent: 0,
            sends: 0,
            slowest: 0.0,
            combined: vec![(0, 0); machine.nodes.len()],
            combining: Vec::new(),
            totals: Totals::default(),
        }
    }

    /// A send of `bytes` leaving `from` on `link` and crossing `via` after it.
    pub fn send(&mut self, from: NodeId, link: crate::LinkId, via: &[crate::LinkId], bytes: u64) {
        self.bytes_sent = self.bytes_sent.saturating_add(bytes);
        self.sends = self.sends.saturating_add(1);
        let latency = latency::route_seconds(self.machine, from, link, via);
        self.slowest = self.slowest.max(latency);
        for hop in self.machine.route(from, link, via) {
            let d = hop.direction();
            if let (Some(b), Some(t)) = (self.bytes.get_mut(d), self.transfers.get_mut(d)) {
                if *t == 0 {
                    self.touched.push(d);
                }
                *b = b.saturating_add(bytes);
                *t = t.saturating_add(1);
            }
        }
    }

    /// Combining on `node`: `local` bytes by local reductions, `arrival` bytes by receives
    /// that reduce. Only compute nodes are charged; devices combine at line rate.
    pub fn combine(&mut self, node: NodeId, local: u64, arrival: u64) {
        let computes = self
            .machine
            .nodes
            .get(node.index())
            .is_some_and(|n| n.kind == NodeKind::Compute);
        if computes && (local > 0 || arrival > 0) {
            let (l, a) = &mut self.combined[node.index()];
            if (*l, *a) == (0, 0) {
                self.combining.push(node.index());
            }
            *l = l.saturating_add(local);
            *a = a.saturating_add(arrival);
        }
    }

    /// The step's load, numbered `step`; the tally is empty again for the next step.
    pub fn finish(&mut self, step: usize) -> StepLoad {
        self.touched.sort_unstable();
        let loads = self
            .touched
            .drain(..)
            .map(|d| {
                let load = DirectionLoad {
                    direction: d,
                    bytes: self.bytes[d],
                    transfers: self.transfers[d],
                };
                self.bytes[d] = 0;
                self.transfers[d] = 0;
                load
            })
            .collect();
        // One entry per node, by node.
        self.combining.sort_unstable();
        let reductions = self
            .combining
            .drain(..)
            .map(|n| {
                let (local_bytes, arrival_bytes) = std::mem::take(&mut self.combined[n]);
                NodeReduce {
                    node: NodeId::new(n),
                    local_bytes,
                    arrival_bytes,
                }
            })
            .collect();
        let load = StepLoad {
            step: StepId(u32::try_from(step).unwrap_or(u32::MAX)),
            loads,
            bytes_sent: self.bytes_sent,
            transfers: self.sends,
            latency_seconds: self.slowest,
            reductions,
        };
        self.bytes_sent = 0;
        self.sends = 0;
        self.slowest = 0.0;
        load
    }

    /// Ends the step without building its [`StepLoad`]: its cost, as [`estimate_loads`]
    /// charges it, is added to the totals ([`StepTally::estimate`]), and the tally is empty
    /// again for the next step. A lowering that prices many candidate timetables reads them
    /// so, with no allocation per step.
    pub fn price(&mut self) {
        let machine = self.machine;
        let mut beta: f64 = 0.0;
        for d in self.touched.drain(..) {
            if let Some(link) = machine.links.get(d / 2) {
                beta = beta.max(self.bytes[d] as f64 / bytes_per_second(link.bandwidth_gbps));
            }
            self.bytes[d] = 0;
            self.transfers[d] = 0;
        }
        let combined = &mut self.combined;
        let reductions = self
            .combining
            .drain(..)
            .map(|n| std::mem::take(&mut combined[n]));
        self.totals
            .add(StepCost::of(machine, self.slowest, beta, reductions));
        self.bytes_sent = 0;
        self.sends = 0;
        self.slowest = 0.0;
    }

    /// The estimate of the steps priced so far ([`StepTally::price`]), in their order.
    pub fn estimate(&self) -> Estimate {
        self.totals.estimate()
    }
}

/// What one step costs: its latency `α`, its busiest direction's `β`, and the busiest of `β`
/// and each node's combining time.
#[derive(Clone, Copy, Debug)]
struct StepCost {
    alpha: f64,
    beta: f64,
    busy: f64,
}

impl StepCost {
    /// The cost of a step of latency `alpha` and busiest direction `beta` in which nodes
    /// combine `reductions` (local, arrival bytes) on `machine`.
    fn of(
        machine: &Machine,
        alpha: f64,
        beta: f64,
        reductions: impl Iterator<Item = (u64, u64)>,
    ) -> StepCost {
        let rate = machine
            .reduce_gbps
            .filter(|r| r.is_finite() && *r > 0.0)
            .map(bytes_per_second);
        let busy = reductions.fold(beta, |slowest, (local, arrival)| {
            let node = beta.max(combine_seconds(local, rate)) + combine_seconds(arrival, rate);
            slowest.max(node)
        });
        StepCost { alpha, beta, busy }
    }
}

/// Steps' costs added up in order into an [`Estimate`].
#[derive(Clone, Debug, Default)]
struct Totals {
    per_step: Vec<f64>,
    latency_seconds: f64,
    transfer_seconds: f64,
    reduce_seconds: f64,
}

impl Totals {
    fn add(&mut self, step: StepCost) {
        self.latency_seconds += step.alpha;
        self.transfer_seconds += step.beta;
        self.reduce_seconds += step.busy - step.beta;
        self.per_step.push(step.alpha + step.busy);
    }

    fn estimate(&self) -> Estimate {
        Estimate {
            seconds: self.per_step.iter().sum(),
            per_step: self.per_step.clone(),
            latency_seconds: self.latency_seconds,
            transfer_seconds: self.transfer_seconds,
            reduce_seconds: self.reduce_seconds,
        }
    }
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
    let mut totals = Totals::default();
    for step in loads {
        let mut beta: f64 = 0.0;
        for load in &step.loads {
            let Some(link) = machine.links.get(load.direction / 2) else {
                continue;
            };
            beta = beta.max(load.bytes as f64 / bytes_per_second(link.bandwidth_gbps));
        }
        let reductions = step
            .reductions
            .iter()
            .map(|r| (r.local_bytes, r.arrival_bytes));
        totals.add(StepCost::of(
            machine,
            step.latency_seconds,
            beta,
            reductions,
        ));
    }
    totals.estimate()
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
        Buffer, BufferId, BufferKind, Chunk, ChunkId, Collective, DType, Instr, Link, LinkId, Node,
        Program, RecvMode, ReduceOp,
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
            switch_latency_us: 0.0,
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
            links: crate::LinkUse::Exclusive,
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
        // Step 0: α = the slower route, N0 → S → N1 at 2 + 3 µs (N1 → N0 takes 0.5 µs);
        // β = max(2000/1e10, 2000/1e10, 2000/1e9) = 2 µs.
        // Step 1: α = 0.5 µs; β = 4000/1e9 = 4 µs.
        assert!(close(e.per_step[0], 7e-6), "{:?}", e);
        assert!(close(e.per_step[1], 4.5e-6), "{:?}", e);
        assert!(close(e.seconds, 11.5e-6));
        assert!(close(e.latency_seconds, 5.5e-6));
        assert!(close(e.transfer_seconds, 6e-6));
    }

    /// Nine nodes around a switch, one lane each: information needs `⌈log2 9⌉ = 4` steps to
    /// spread at one transfer per node and step, and one where the phase's links are shared.
    #[test]
    fn shared_links_spread_in_one_step() {
        let mut m = machine();
        m.nodes.truncate(2);
        m.links.clear();
        for i in 0..8u32 {
            m.nodes.push(Node {
                name: format!("C{i}"),
                kind: NodeKind::Compute,
                capacity: None,
            });
            m.links.push(Link {
                name: format!("U{i}"),
                a: NodeId(2 + i),
                b: NodeId(1),
                bandwidth_gbps: 80.0,
                latency_us: 2.0,
                lanes: 1,
            });
        }
        // N0 keeps a link so that the machine stays connected; it has one lane too.
        m.links.push(Link {
            name: "U".into(),
            a: NodeId(0),
            b: NodeId(1),
            bandwidth_gbps: 80.0,
            latency_us: 2.0,
            lanes: 1,
        });
        let mut p = phase(Collective::AllReduce);
        for program in &mut p.programs {
            program.steps.iter_mut().for_each(Vec::clear);
        }
        p.programs.resize(m.nodes.len(), p.programs[0].clone());
        p.programs[1].steps.clear();
        let exclusive = lower_bound(&m, &p);
        // 9 compute nodes: 4 steps of 2 µs.
        assert!(close(exclusive.spreading_seconds, 8e-6), "{exclusive:?}");
        p.links = crate::LinkUse::Shared;
        let shared = lower_bound(&m, &p);
        assert!(close(shared.spreading_seconds, 2e-6), "{shared:?}");
        // Two links of 2 µs between any two compute nodes, whatever the phase's links.
        assert!(close(shared.distance_seconds, 4e-6), "{shared:?}");
        assert!(close(shared.latency_seconds, 4e-6), "{shared:?}");
    }

    #[test]
    fn bounds_by_collective() {
        let m = machine();
        // Egress: N0 = 1e10 + 1e9 = 1.1e10 B/s, N1 likewise; E = 2.2e10. m = 4000 B, p = 2.
        // Latency: N0 and N1 are 0.5 µs apart (over L2), and one step suffices.
        let b = lower_bound(&m, &phase(Collective::AllReduce));
        assert!(close(b.traffic_seconds, 2.0 * 4000.0 / 2.2e10));
        assert!(close(b.latency_seconds, 0.5e-6));
        assert!(close(b.distance_seconds, 0.5e-6));
        assert!(close(b.spreading_seconds, 0.5e-6));
        assert_eq!(b.which, "latency");
        // The cut between N0 and N1 carries 1.1e10 B/s: m / 1.1e10 equals the traffic bound.
        assert!(close(b.seconds, 0.5e-6 + 2.0 * 4000.0 / 2.2e10));

        let b = lower_bound(&m, &phase(Collective::ReduceScatter));
        assert!(close(b.traffic_seconds, 4000.0 / 2.2e10));
        let b = lower_bound(&m, &phase(Collective::AllGather));
        assert!(close(b.traffic_seconds, 4000.0 / 2.2e10));

        let b = lower_bound(&m, &phase(Collective::Broadcast { root: NodeId(0) }));
        assert!(close(b.traffic_seconds, 4000.0 / 1.1e10));
        let b = lower_bound(&m, &phase(Collective::Reduce { root: NodeId(2) }));
        assert!(close(b.traffic_seconds, 4000.0 / 1.1e10));
    }

    /// A basis worked out once gives, at every size, the bound worked out from scratch; a
    /// basis of another root is not used.
    #[test]
    fn a_bound_from_a_basis_is_the_bound() {
        let m = machine();
        let collectives = [
            Collective::AllReduce,
            Collective::ReduceScatter,
            Collective::AllGather,
            Collective::Broadcast { root: NodeId(0) },
            Collective::Reduce { root: NodeId(2) },
        ];
        for collective in collectives {
            let basis = BoundBasis::new(&m, collective);
            let other = BoundBasis::new(&m, Collective::Broadcast { root: NodeId(2) });
            for elements in [0, 1, 1000, 1_000_000_000] {
                let mut p = phase(collective);
                p.elements = elements;
                let fresh = lower_bound(&m, &p);
                assert_eq!(lower_bound_with(&m, &p, &basis), fresh, "{collective:?}");
                assert_eq!(lower_bound_with(&m, &p, &other), fresh, "{collective:?}");
            }
        }
    }

    #[test]
    fn traffic_bound_binds_for_big_vectors() {
        let mut p = phase(Collective::AllReduce);
        p.elements = 1_000_000_000; // 4e9 B
        let b = lower_bound(&machine(), &p);
        assert_eq!(b.which, "total traffic");
        assert!(close(b.seconds, 0.5e-6 + 2.0 * 4e9 / 2.2e10));
    }

    #[test]
    fn efficiency_is_bound_over_estimate() {
        let m = machine();
        let p = phase(Collective::AllReduce);
        let e = estimate(&m, &p);
        let b = lower_bound(&m, &p);
        assert!(close(efficiency(&b, &e), b.seconds / 11.5e-6));
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
            chunks: vec![ChunkId(1)].into(),
            mode: RecvMode::Store,
        };
        let local = Instr::Reduce {
            src: BufferId(1),
            dst: BufferId(0),
            chunks: vec![ChunkId(1)].into(),
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
        // Step 0: α 5 µs, β 2 µs, then N1 combines 2000 B at 1e9 B/s after arrival: 2 µs.
        assert!(close(e.per_step[0], 9e-6), "{e:?}");
        // Step 1: α 0.5 µs, β 4 µs; N0's local 2 µs hides under β; N1 combines 4000 B after
        // arrival: 4 µs.
        assert!(close(e.per_step[1], 8.5e-6), "{e:?}");
        assert!(close(e.reduce_seconds, 6e-6), "{e:?}");
        assert!(close(e.transfer_seconds, 6e-6));
        // Without a rate, reduction is free: the α-β estimate.
        let free = estimate(&machine(), &p);
        assert!(close(free.seconds, 11.5e-6), "{free:?}");
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
        // N0 owns chunk 0, N1 chunk 1: each sends its contribution to the other's.
        let mut rs = phase(Collective::ReduceScatter);
        rs.chunks[0].owner = Some(NodeId(0));
        rs.chunks[1].owner = Some(NodeId(2));
        let b = lower_bound(&m, &rs);
        assert!(close(b.traffic_seconds, 0.5 * 4000.0 / 1.1e10), "{b:?}");
        // An owner with the whole vector needs nothing; the other needs all of it.
        rs.chunks[1].owner = Some(NodeId(0));
        let b = lower_bound(&m, &rs);
        assert!(close(b.traffic_seconds, 4000.0 / 1.1e10), "{b:?}");
        // Broadcast keeps its root-egress bound.
        let b = lower_bound(&m, &phase(Collective::Broadcast { root: NodeId(0) }));
        assert!(close(b.traffic_seconds, 4000.0 / 1.1e10), "{b:?}");
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

    /// Pricing a step as it ends ([`StepTally::price`]) gives the estimate of the loads that
    /// ending it with [`StepTally::finish`] gives, to the bit: steps through the switch and
    /// direct, several sends and combines per node in one step, an empty step, with and without
    /// a reduction rate.
    #[test]
    fn pricing_steps_as_they_end_is_estimating_their_loads() {
        for rate in [None, Some(3.0)] {
            let m = Machine {
                reduce_gbps: rate,
                ..machine()
            };
            let (mut loads, mut priced) = (Vec::new(), StepTally::new(&m));
            let mut tally = StepTally::new(&m);
            // Per send: link, sender, links after the first, bytes, bytes combined.
            type Sends<'a> = &'a [(u32, u32, &'a [u32], u64, u64)];
            let steps: [Sends; 4] = [
                &[(0, 0, &[1], 4096, 0), (2, 0, &[], 1000, 0)],
                &[
                    (0, 0, &[1], 77, 77),
                    (0, 0, &[1], 5000, 5000),
                    (1, 2, &[0], 3, 0),
                ],
                &[],
                &[
                    (2, 2, &[], 123_456, 123_456),
                    (2, 0, &[], 10, 0),
                    (0, 0, &[1], 1, 1),
                ],
            ];
            for (k, sends) in steps.iter().enumerate() {
                for t in [&mut tally, &mut priced] {
                    for &(link, from, via, bytes, combined) in sends.iter() {
                        let via: Vec<LinkId> = via.iter().map(|&l| LinkId(l)).collect();
                        t.send(NodeId(from), LinkId(link), &via, bytes);
                        // The receiver combines what arrives; the sender also combines locally.
                        t.combine(NodeId(2 - from), 0, combined);
                        t.combine(NodeId(from), combined / 2, 0);
                    }
                }
                loads.push(tally.finish(k));
                priced.price();
            }
            let (by_loads, stepwise) = (estimate_loads(&m, &loads), priced.estimate());
            assert_eq!(by_loads.seconds.to_bits(), stepwise.seconds.to_bits());
            assert_eq!(by_loads.per_step, stepwise.per_step);
            assert_eq!(by_loads.latency_seconds, stepwise.latency_seconds);
            assert_eq!(by_loads.transfer_seconds, stepwise.transfer_seconds);
            assert_eq!(by_loads.reduce_seconds, stepwise.reduce_seconds);
            assert!(stepwise.seconds > 0.0 && stepwise.per_step[2] == 0.0);
            assert_eq!(rate.is_some(), stepwise.reduce_seconds > 0.0, "{rate:?}");
        }
    }
}
