//! Floors: lower bounds on the cost model's estimate of the schedule a method would lower,
//! computed without lowering it, so that `auto` lowers only the methods that could win
//! ([`Lowering::floor`](super::Lowering::floor)).
//!
//! The cost model charges a step `α + busy`, with `α` the latency of its slowest send (0 for a
//! step without sends) and `busy ≥ β`, its most loaded link direction's time. So the estimate
//! of any schedule is at least a bound on `Σ α` plus a bound on `Σ β`:
//!
//! - `Σ α` is at least the machine's latency bound (how far information must travel, how many
//!   steps it needs to spread), and at least `s · α_min` for a schedule of which `s` steps
//!   send something, `α_min` being the smallest link latency: a send's route crosses at least
//!   one link. A method that knows `s` from its structure says so ([`Floor::in_steps`]).
//! - `Σ β` is at least the machine's bandwidth bound: the total traffic over the compute nodes'
//!   egress, or on a machine with reducing devices each node's own contribution over its own
//!   egress, or the root's egress for broadcast and reduce; and the reduction bound when
//!   combining is charged.
//!
//! These are the bounds of [`schedule_ir::cost::bounds`] (proved in `docs/methods.md`, "Lower
//! bounds") less the ones that depend on where a method puts its chunks (the cut bound and,
//! for reduce-scatter and allgather, the owners' distances), which a floor cannot know before
//! the lowering.

use super::PhaseSpec;
use schedule_ir::cost::{bytes_per_second, egress, egresses, latency};
use schedule_ir::{Collective, Machine, NodeId};

/// A floor is compared with estimates summed in a different order: it is lowered by this
/// relative margin so that rounding never lifts a floor above the estimate it bounds (a
/// method that meets its floor exactly, as `rotated-hd` does on a torus, must not be skipped).
const ROUNDING: f64 = 1e-9;

/// What every floor of one phase on one machine shares, computed once per phase.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Floor {
    /// A lower bound on the sum of the step latencies of any schedule, in seconds.
    pub latency: f64,
    /// The part of [`Floor::latency`] that holds where link directions are shared too: how
    /// far information must travel, without the steps it needs to spread one transfer per
    /// lane at a time ([`Floor::shared`]).
    pub distance: f64,
    /// A lower bound on the sum of the steps' bandwidth (and combining) terms, in seconds.
    pub bandwidth: f64,
    /// The least latency a step that sends something is charged, in seconds.
    pub step_latency: f64,
}

impl Floor {
    /// The bounds that hold for every valid schedule of `spec` on `machine`.
    pub fn of(machine: &Machine, spec: &PhaseSpec) -> Floor {
        let compute: Vec<NodeId> = machine.compute_nodes().collect();
        let p = compute.len() as f64;
        let m = spec.elements as f64 * spec.dtype.size_bytes() as f64;
        let moves = compute.len() > 1 && m > 0.0;
        let (distance, spreading) = if moves {
            latency_bounds(machine, spec.collective, &compute)
        } else {
            (0.0, 0.0)
        };
        Floor {
            latency: distance.max(spreading),
            distance,
            bandwidth: if moves {
                traffic(machine, spec.collective, &compute, m).max(reduction(
                    machine,
                    spec.collective,
                    p,
                    m,
                ))
            } else {
                0.0
            },
            step_latency: if moves {
                latency::min_link_seconds(machine)
            } else {
                0.0
            },
        }
    }

    /// The floor of schedules whose phases may share link directions
    /// ([`schedule_ir::LinkUse::Shared`]): a node may then send any number of transfers in a
    /// step, so information can spread in one, and only the distance bound stays.
    pub fn shared(&self) -> Floor {
        Floor {
            latency: self.distance,
            ..*self
        }
    }

    /// The floor of any schedule: the machine's own lower bound.
    pub fn seconds(&self) -> f64 {
        (self.latency + self.bandwidth) * (1.0 - ROUNDING)
    }

    /// The floor of a schedule of which at least `steps` steps send something.
    pub fn in_steps(&self, steps: u64) -> f64 {
        self.in_steps_carrying(steps, 0.0)
    }

    /// The floor of a schedule of which at least `steps` steps send something and whose
    /// steps' bandwidth terms sum to at least `busy` seconds, as a method may know from the
    /// sizes of the transfers its structure forces into distinct steps. The latency and
    /// bandwidth sums are bounded apart, each by the larger of the machine's bound and the
    /// method's, since a step's cost is its latency plus its bandwidth term.
    pub fn in_steps_carrying(&self, steps: u64, busy: f64) -> f64 {
        let latency = self.latency.max(steps as f64 * self.step_latency);
        let bandwidth = if busy.is_finite() {
            self.bandwidth.max(busy)
        } else {
            self.bandwidth
        };
        (latency + bandwidth) * (1.0 - ROUNDING)
    }
}

/// The bandwidth of the machine's fastest link, in bytes per second: a transfer of `b` bytes
/// keeps the step it is sent in busy for at least `b` over it, whatever link it takes.
pub fn fastest_link(machine: &crate::machine::Machine) -> f64 {
    (0..machine.link_count())
        .map(|l| machine.link(schedule_ir::LinkId::new(l)).bandwidth_gbps)
        .filter(|b| b.is_finite())
        .fold(0.0, f64::max)
        * 1e9
        / 8.0
}

/// The seconds `steps` steps are busy at least when each carries a transfer of `bytes` bytes
/// and links are at most `fastest` bytes per second fast (0 when that is not known).
pub fn carrying(steps: u64, bytes: f64, fastest: f64) -> f64 {
    steps as f64 * ratio(bytes, fastest)
}

/// The least number of elements in any of the chunks [`super::even_chunks`] cuts `elements`
/// into when it cuts them into at most `count` chunks.
pub fn least_chunk(elements: u64, count: u64) -> u64 {
    elements / count.max(1)
}

/// Whether some device of the machine combines (a `Fabric`'s NICs or switch).
fn in_network(machine: &Machine) -> bool {
    machine.nodes.iter().any(|n| n.capacity.is_some())
}

/// The latency bounds: the distance information must travel and the steps it needs to spread.
/// Reduce-scatter and allgather have none here: theirs depend on the chunks' owners.
fn latency_bounds(machine: &Machine, collective: Collective, compute: &[NodeId]) -> (f64, f64) {
    let sources: Vec<NodeId> = match collective {
        Collective::AllReduce => compute.to_vec(),
        Collective::Broadcast { root } | Collective::Reduce { root } => vec![root],
        Collective::ReduceScatter | Collective::AllGather => return (0.0, 0.0),
    };
    let distance = latency::eccentricity_seconds(machine, &sources);
    let steps = latency::spreading_steps(compute.len() as u64, latency::max_fan(machine));
    (
        distance,
        latency::min_link_seconds(machine) * f64::from(steps),
    )
}

/// `bytes / bandwidth`, 0 when either is not positive.
fn ratio(bytes: f64, bandwidth: f64) -> f64 {
    if bytes <= 0.0 || bandwidth <= 0.0 {
        0.0
    } else {
        bytes / bandwidth
    }
}

/// The traffic bound: every byte a compute node must send or receive, over the links it has.
fn traffic(machine: &Machine, collective: Collective, compute: &[NodeId], m: f64) -> f64 {
    let p = compute.len() as f64;
    let egress_of = egresses(machine);
    let egress_at = |n: NodeId| egress_of.get(n.index()).copied().unwrap_or(0.0);
    let total: f64 = compute.iter().map(|&n| egress_at(n)).sum();
    match collective {
        // Each node gets its contribution out and its result in over its own links.
        Collective::AllReduce if in_network(machine) => compute
            .iter()
            .map(|&n| ratio(m, egress_at(n)))
            .fold(0.0, f64::max),
        // What a node must move depends on the chunks it owns, unknown before lowering.
        Collective::ReduceScatter | Collective::AllGather if in_network(machine) => 0.0,
        Collective::AllReduce => ratio(2.0 * (p - 1.0) * m, total),
        Collective::ReduceScatter | Collective::AllGather => ratio((p - 1.0) * m, total),
        Collective::Broadcast { root } | Collective::Reduce { root } => {
            ratio(m, egress(machine, root))
        }
    }
}

/// The reduction bound: `(p-1)·m` bytes of operand combined, at best evenly over `p` nodes.
fn reduction(machine: &Machine, collective: Collective, p: f64, m: f64) -> f64 {
    let combines = matches!(
        collective,
        Collective::AllReduce | Collective::ReduceScatter | Collective::Reduce { .. }
    );
    match machine.reduce_gbps {
        Some(rate) if combines && !in_network(machine) && rate.is_finite() && rate > 0.0 => {
            ratio((p - 1.0) / p * m, bytes_per_second(rate))
        }
        _ => 0.0,
    }
}
