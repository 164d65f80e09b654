//! Lower bounds on the time of a phase: theorems about every valid schedule on the machine,
//! in the α-β-γ model of the [parent module](super). `docs/methods.md` ("Lower bounds") gives
//! each one's proof.
//!
//! A step costs its latency `α` (the slowest route of the step) plus at least its bandwidth
//! term `β` (the most loaded link direction); the estimate is the sum over steps. So any lower
//! bound `L` on `Σ α` and any lower bound `B` on `Σ β` (or on the step times beyond `α`) add
//! up: the bound reported is `L + B`, with `L` the larger of the two latency bounds and `B`
//! the largest of the bandwidth-type bounds.

use super::{bytes_per_second, cuts, latency};
use crate::{Collective, LinkUse, Machine, NodeId, Phase};
use serde::Serialize;

/// A lower bound on the time of a phase.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Bound {
    /// The bound, in seconds: [`Bound::latency_seconds`] plus the largest of the traffic,
    /// cut and reduction bounds.
    pub seconds: f64,
    /// The larger part of the bound: `"latency"`, or the bandwidth-type bound that binds,
    /// `"total traffic"`, `"group traffic"`, `"in-network"`, `"root egress"`, `"cut"` or
    /// `"reduction"`.
    pub which: &'static str,
    /// The bandwidth bound: total traffic, or, on a machine with reducing devices, the
    /// in-network bound; the root's egress for broadcast and reduce.
    pub traffic_seconds: f64,
    /// The group-traffic bound: the total-traffic bound between groups of compute nodes (the
    /// machine's tiers, [`cuts::group_sending`]), the largest over the partitions; 0 where no
    /// partition applies (one tier, reducing devices, broadcast and reduce).
    pub group_seconds: f64,
    /// The cut bound alone (0 when the machine has a single compute node).
    pub cut_seconds: f64,
    /// The reduction bound, `(p-1)/p · m / reduce rate` (0 when the machine declares no rate,
    /// has devices, or the collective combines nothing).
    pub reduce_seconds: f64,
    /// The latency bound: the larger of [`Bound::distance_seconds`] and
    /// [`Bound::spreading_seconds`].
    pub latency_seconds: f64,
    /// How far information must travel: the largest latency of the cheapest walk between two
    /// compute nodes that must hear from each other (for broadcast and reduce, from the root).
    pub distance_seconds: f64,
    /// How many steps information needs to spread, each node exchanging at most as many
    /// transfers per step as its links have lanes (any number where the phase's links are
    /// shared: one step), times the smallest link latency.
    pub spreading_seconds: f64,
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

/// [`egress`] of every node, indexed by node, in one pass over the links (summed in the same
/// order, so each value is the same to the bit): a bound over all nodes stays linear in the
/// machine instead of nodes × links.
pub fn egresses(machine: &Machine) -> Vec<f64> {
    let mut out = vec![0.0; machine.nodes.len()];
    for l in &machine.links {
        let rate = bytes_per_second(l.bandwidth_gbps);
        for end in [l.a, l.b] {
            if let Some(e) = out.get_mut(end.index()) {
                *e += rate;
            }
        }
    }
    out
}

fn ratio(bytes: f64, bandwidth: f64) -> f64 {
    if bytes <= 0.0 || bandwidth <= 0.0 {
        0.0
    } else {
        bytes / bandwidth
    }
}

/// What a phase's bound needs that depends on the machine and the phase's root but not on
/// its size: the minimum cuts from the cut bound's source and what each node can send. The
/// max-flows behind both are most of a bound's work on a large machine (two thirds of
/// `topoc simulate` on a 16 384-node torus when each size worked them out again), so a caller
/// pricing one phase at many sizes works them out once ([`lower_bound_with`]).
#[derive(Clone, Debug)]
pub struct BoundBasis {
    /// The node the cuts separate from the others ([`cut_source`]).
    source: Option<NodeId>,
    /// [`cuts::min_cuts`] from `source`.
    cuts: Vec<cuts::Cut>,
    /// What each node can send per second ([`egress_of`]).
    sending: Vec<f64>,
    /// The machine's tiers and what each group can send ([`cuts::group_sending`]); none on a
    /// machine with reducing devices, where merges may happen between groups.
    partitions: Vec<cuts::Partition>,
}

impl BoundBasis {
    /// The basis of the bounds of a `collective` on `machine`, at any size.
    pub fn new(machine: &Machine, collective: Collective) -> BoundBasis {
        let source = cut_source(machine, collective);
        let sending = egress_of(machine);
        let partitions = if in_network(machine) {
            Vec::new()
        } else {
            cuts::group_sending(machine, &sending)
        };
        BoundBasis {
            source,
            cuts: source.map_or_else(Vec::new, |s| cuts::min_cuts(machine, s)),
            sending,
            partitions,
        }
    }
}

/// The lower bound for `phase` on `machine` (see the [module doc](self)).
pub fn lower_bound(machine: &Machine, phase: &Phase) -> Bound {
    lower_bound_with(machine, phase, &BoundBasis::new(machine, phase.collective))
}

/// [`lower_bound`] from a basis worked out before, for the same machine; a basis whose cuts
/// were taken from another root than `phase`'s is not used (it is worked out again), so the
/// result is always `lower_bound(machine, phase)`.
pub fn lower_bound_with(machine: &Machine, phase: &Phase, basis: &BoundBasis) -> Bound {
    if basis.source != cut_source(machine, phase.collective) {
        return lower_bound(machine, phase);
    }
    let compute: Vec<NodeId> = machine.compute_nodes().collect();
    let m = phase.elements as f64 * phase.dtype.size_bytes() as f64;
    let (traffic_seconds, traffic_name) = traffic(machine, phase, &compute, m, &basis.sending);
    let reduce_seconds = reduction(machine, phase, compute.len() as f64, m);
    let cut_seconds = cut_bound(phase, &basis.cuts, m);
    let group_seconds = group_traffic(phase, &basis.partitions, m);
    let (distance_seconds, spreading_seconds) = latency_bounds(machine, phase, &compute, m);
    let latency_seconds = distance_seconds.max(spreading_seconds);
    let mut bandwidth = [
        (traffic_seconds, traffic_name),
        (cut_seconds, "cut"),
        (group_seconds, "group traffic"),
        (reduce_seconds, "reduction"),
    ];
    // The largest binds; of equal ones the first listed wins (a stable sort keeps the order).
    bandwidth.sort_by(|a, b| b.0.total_cmp(&a.0));
    let (bandwidth_seconds, bandwidth_name) = bandwidth[0];
    let which = if latency_seconds > bandwidth_seconds {
        "latency"
    } else {
        bandwidth_name
    };
    Bound {
        seconds: latency_seconds + bandwidth_seconds,
        which,
        traffic_seconds,
        group_seconds,
        cut_seconds,
        reduce_seconds,
        latency_seconds,
        distance_seconds,
        spreading_seconds,
    }
}

/// Bytes of the chunks `node` owns.
fn owned_by(phase: &Phase, node: NodeId) -> f64 {
    phase
        .chunks
        .iter()
        .enumerate()
        .filter(|(_, c)| c.owner == Some(node))
        .map(|(i, _)| phase.chunk_bytes(crate::ChunkId::new(i)) as f64)
        .sum()
}

/// What each node can send per second: its links' bandwidth on a machine with reducing
/// devices, otherwise the narrowest cut around it and the switches on its side
/// ([`cuts::sending`]).
fn egress_of(machine: &Machine) -> Vec<f64> {
    if in_network(machine) {
        egresses(machine)
    } else {
        cuts::sending(machine)
    }
}

/// Whether the machine has devices that combine: then merges need not happen on compute
/// nodes, and each node only has to get its contribution out and its result in.
fn in_network(machine: &Machine) -> bool {
    machine.nodes.iter().any(|n| n.capacity.is_some())
}

/// The total-traffic bound (or, with reducing devices, the in-network bound; for broadcast
/// and reduce, the root's egress), and its name. `egress_of` is [`egress_of`]`(machine)`.
fn traffic(
    machine: &Machine,
    phase: &Phase,
    compute: &[NodeId],
    m: f64,
    egress_of: &[f64],
) -> (f64, &'static str) {
    let p = compute.len() as f64;
    let in_network = in_network(machine);
    let egress_at = |n: NodeId| egress_of.get(n.index()).copied().unwrap_or(0.0);
    let total_egress: f64 = compute.iter().map(|&n| egress_at(n)).sum();
    let slowest_node = |bytes: &dyn Fn(NodeId) -> f64| {
        compute
            .iter()
            .map(|&n| ratio(bytes(n), egress_at(n)))
            .fold(0.0, f64::max)
    };
    match phase.collective {
        Collective::AllReduce if in_network => (
            slowest_node(&|_| if p > 1.0 { m } else { 0.0 }),
            "in-network",
        ),
        // A node sends its contribution to, or receives, every chunk it does not own.
        Collective::ReduceScatter | Collective::AllGather if in_network => (
            slowest_node(&|n| if p > 1.0 { m - owned_by(phase, n) } else { 0.0 }),
            "in-network",
        ),
        Collective::AllReduce => (
            ratio(2.0 * (p - 1.0).max(0.0) * m, total_egress),
            "total traffic",
        ),
        Collective::ReduceScatter | Collective::AllGather => {
            (ratio((p - 1.0).max(0.0) * m, total_egress), "total traffic")
        }
        Collective::Broadcast { root } | Collective::Reduce { root } => {
            let m = if compute.len() > 1 { m } else { 0.0 };
            (ratio(m, egress_at(root)), "root egress")
        }
    }
}

/// The group-traffic bound: the total-traffic argument with each group of a partition taken as
/// one node. Of `k` groups, for every element of an allreduce `k - 1` groups must send it out
/// before some group first holds its complete sum and `k - 1` must receive it after, each
/// transfer leaving its sender's group (`2(k-1)m` bytes; reduce-scatter, allgather: `k - 1`
/// senders or receivers, `(k-1)m`), and a group sends at most its cut's capacity per second.
/// The proof is in `docs/methods.md` ("Group traffic").
fn group_traffic(phase: &Phase, partitions: &[cuts::Partition], m: f64) -> f64 {
    let copies = |k: usize| match phase.collective {
        Collective::AllReduce => 2.0 * (k as f64 - 1.0),
        Collective::ReduceScatter | Collective::AllGather => k as f64 - 1.0,
        Collective::Broadcast { .. } | Collective::Reduce { .. } => 0.0,
    };
    partitions
        .iter()
        .map(|part| ratio(copies(part.groups) * m, part.capacity))
        .fold(0.0, f64::max)
}

/// The reduction bound: `(p-1)·m` bytes of operand combined, at best evenly over `p` nodes.
fn reduction(machine: &Machine, phase: &Phase, p: f64, m: f64) -> f64 {
    let in_network = machine.nodes.iter().any(|n| n.capacity.is_some());
    let combines = matches!(
        phase.collective,
        Collective::AllReduce | Collective::ReduceScatter | Collective::Reduce { .. }
    );
    let share = if p > 0.0 { (p - 1.0).max(0.0) / p } else { 0.0 };
    match machine.reduce_gbps {
        Some(rate) if combines && !in_network && rate.is_finite() && rate > 0.0 => {
            ratio(share * m, bytes_per_second(rate))
        }
        _ => 0.0,
    }
}

/// The two latency bounds: distance (information must cross the machine) and spreading
/// (a node hears from at most as many others per step as its links have lanes; from every
/// other in one step where the phase's links are shared). Both are 0
/// for an empty vector, which a schedule need not move at all.
fn latency_bounds(machine: &Machine, phase: &Phase, compute: &[NodeId], m: f64) -> (f64, f64) {
    if compute.len() < 2 || m <= 0.0 {
        return (0.0, 0.0);
    }
    let sources: Vec<NodeId> = match phase.collective {
        Collective::AllReduce => compute.to_vec(),
        Collective::Broadcast { root } | Collective::Reduce { root } => vec![root],
        // The owner of a non-empty chunk must hear from (reduce-scatter) or reach (allgather)
        // every compute node.
        Collective::ReduceScatter | Collective::AllGather => {
            let mut owners: Vec<NodeId> = phase
                .chunks
                .iter()
                .filter(|c| c.end > c.start)
                .filter_map(|c| c.owner)
                .collect();
            owners.sort_unstable();
            owners.dedup();
            owners
        }
    };
    if sources.is_empty() {
        return (0.0, 0.0);
    }
    let distance = latency::eccentricity_seconds(machine, &sources);
    // In a phase whose links are shared a node may send any number of transfers in a step,
    // so information may reach every node in one.
    let fan = match phase.links {
        LinkUse::Exclusive => latency::max_fan(machine),
        LinkUse::Shared => u64::MAX,
    };
    let steps = latency::spreading_steps(compute.len() as u64, fan);
    let spreading = latency::min_link_seconds(machine) * f64::from(steps);
    (distance, spreading)
}

/// The node the cut bound's cuts keep apart from the others: the root of a broadcast or
/// reduce, else the first compute node; `None` on a machine without compute nodes.
fn cut_source(machine: &Machine, collective: Collective) -> Option<NodeId> {
    match collective {
        Collective::Broadcast { root } | Collective::Reduce { root } => Some(root),
        _ => machine.compute_nodes().next(),
    }
}

/// The largest, over the machine's minimum cuts (`cuts`, from [`cut_source`]), of the bytes
/// that must cross a cut divided by its capacity.
fn cut_bound(phase: &Phase, cuts: &[cuts::Cut], m: f64) -> f64 {
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
    cuts.iter()
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
