//! Ring collectives over one or more logical rings at once.
//!
//! The vector is cut into `R × p` chunks (`R` logical rings of `p` nodes); logical ring `r`
//! carries chunks `r·p … r·p + p - 1`. On every ring, at once:
//!
//! - **reduce-scatter** (`p - 1` steps): in step `s`, the node at position `i` sends chunk
//!   `(i - s) mod p` of its ring to the next node, which reduces it into its own. After the
//!   last step the node at position `i` holds chunk `(i + 1) mod p` combined over all nodes.
//! - **allgather** (`p - 1` steps): in step `t`, the node at position `i` sends chunk
//!   `(i + 1 - t) mod p` to the next node, which stores it.
//!
//! Allreduce is the two in sequence, `2(p - 1)` ring steps. A chunk's owner — where it ends up
//! reduced, and where an allgather takes it from — is the node before its position.
//!
//! `ring` also lowers rings walked both ways as chunks **meeting in the middle** ([`meet_plan`]):
//! each chunk reduced from both sides at once, `⌊p/2⌋` steps per half, and keeps whichever of
//! the two walks the cost model prices lower.
//!
//! A hop may be a route through switches. When the hops of one ring step need some link
//! direction more often than its `lanes` allow (logical rings that share links, routes that
//! share a tree's uplink), the ring step is split into sub-steps, each a BSP step that
//! overbooks nothing ([`sub_steps`]). That is always correct: within a ring step every hop moves a
//! different chunk than its receiver sends, and what a node sends in ring step `s` was
//! complete at the end of ring step `s - 1`, before any sub-step of `s`. When no direction is
//! shared, a ring step is one BSP step and each node sends on `R` links and receives on `R`
//! links in every step.

use super::balance::{self, Load};
use super::floor::Floor;
use super::plan::{self, Move, Packing, Plan, Route, Step};
use super::{data_buffer, even_chunks, Embedding, Job, Knobs, Lowered, Lowering, PhaseSpec};
use crate::embed::{self, hamiltonian, routed, structured, EmbedError, Ring};
use crate::ids::{IdVec, RingId};
use crate::limits::Estimate;
use crate::machine::{Machine, Shape};
use schedule_ir::{Chunk, ChunkId, Collective, LinkId, NodeId, Phase, RecvMode};

/// `ladder-rings`: the ladder's two barley-twist rings, each walked both ways.
pub struct LadderRings;

/// `ring`: the machine's own ring, rings built from its structure, or rings found by search;
/// through switches, the compute nodes in depth-first order.
pub struct Rings;

impl Lowering for LadderRings {
    fn applies(&self, job: &Job<'_>) -> Result<Embedding, EmbedError> {
        let machine = job.machine;
        describe_rings(machine, &RingSet::disjoint(barley_twist(machine)?))
    }
    /// The barley twist is built, not searched: its exact size.
    fn estimate(&self, job: &Job<'_>) -> Result<Estimate, EmbedError> {
        let (machine, spec) = (job.machine, job.spec);
        let rings = barley_twist(machine)?;
        Ok(Estimate::rings(spec.collective, &orient(machine, &rings)))
    }
    fn floor(&self, job: &Job<'_>, base: &Floor) -> f64 {
        let (machine, spec) = (job.machine, job.spec);
        ring_floor(machine, spec, base, Walk::Around)
    }
    fn lower(&self, job: &Job<'_>) -> Result<Lowered, EmbedError> {
        let (machine, spec, knobs) = (job.machine, job.spec, job.knobs);
        let set = RingSet::disjoint(barley_twist(machine)?);
        lower_rings(job.name, machine, spec, knobs, &set, Walk::Around)
    }
}

impl Lowering for Rings {
    fn applies(&self, job: &Job<'_>) -> Result<Embedding, EmbedError> {
        let machine = job.machine;
        describe_rings(machine, &rings(machine)?)
    }
    /// A `Ring` machine's own ring is exact; otherwise, before the search, one logical ring
    /// over the compute nodes: the least any ring schedule holds. [`lower_rings`] admits the
    /// rings found again, exactly.
    fn estimate(&self, job: &Job<'_>) -> Result<Estimate, EmbedError> {
        let (machine, spec) = (job.machine, job.spec);
        Ok(match machine.shape {
            Shape::Ring => {
                Estimate::rings(spec.collective, &orient(machine, &[natural_ring(machine)]))
            }
            _ => Estimate::logical_rings(spec.collective, 1, machine.compute_nodes().len()),
        })
    }
    fn floor(&self, job: &Job<'_>, base: &Floor) -> f64 {
        let (machine, spec) = (job.machine, job.spec);
        ring_floor(machine, spec, base, Walk::Cheaper)
    }
    /// `1`: every ring walked around (MSCCL's own ring allreduce, which its runtimes fuse);
    /// `2`: chunks meeting in the middle wherever that applies. By default the cheaper.
    fn variants(&self) -> &'static [u32] {
        &[AROUND, MEET]
    }
    fn lower(&self, job: &Job<'_>) -> Result<Lowered, EmbedError> {
        let (machine, spec, knobs) = (job.machine, job.spec, job.knobs);
        let walk = match knobs.variant {
            None => Walk::Cheaper,
            Some(AROUND) => Walk::Around,
            Some(MEET) => Walk::Meet,
            Some(other) => {
                return Err(EmbedError::NotApplicable(format!(
                    "`ring` has variants {AROUND} (around) and {MEET} (meeting in the middle), \
                     not {other}"
                )))
            }
        };
        lower_rings(job.name, machine, spec, knobs, &rings(machine)?, walk)
    }
}

/// `ring`'s variant that walks every ring around.
pub const AROUND: u32 = 1;

/// `ring`'s variant whose chunks meet in the middle.
pub const MEET: u32 = 2;

/// A ring schedule over the `p` compute nodes runs `p - 1` ring steps per half walking around
/// ([`ring_plan`]), `⌊p/2⌋` meeting in the middle ([`meet_plan`]; never more, as `p - 1 ≥ ⌊p/2⌋`),
/// and every ring step is at least one BSP step in which every node sends. Its steps are busy
/// for at least what every node sends over its own links ([`sending`]).
fn ring_floor(machine: &Machine, spec: &PhaseSpec, base: &Floor, walk: Walk) -> f64 {
    let p = machine.compute_nodes().len() as u64;
    let halves = super::halves(spec.collective).map_or(0, |(rs, ag)| u64::from(rs) + u64::from(ag));
    let per_half = match walk {
        Walk::Around => p.saturating_sub(1),
        Walk::Cheaper | Walk::Meet => (p / 2).min(p.saturating_sub(1)),
    };
    base.in_steps_carrying(halves * per_half, halves as f64 * sending(machine, spec))
}

/// A lower bound on the seconds the steps of one half (a reduce-scatter or an allgather) of any
/// ring schedule are busy: the bytes the busiest node sends over its egress.
///
/// *Proof.* Both walks cut the vector into groups of `p` chunks — a logical ring's part
/// ([`ring_plan`]), or a half of a ring walked both ways ([`meet_plan`]) — each cut evenly
/// ([`ring_chunks`]), and in each half every compute node sends every chunk of every group but
/// one (around: all but the chunk it receives last; meeting: `h` chunks forward and `g`
/// backward, all but its own). A group of `e_g` elements loses at most `⌈e_g/p⌉ ≤ (e_g + p -
/// 1)/p` of them so, over `G` groups summing to `e` elements, a node sends at least `(e - G)(p -
/// 1)/p` elements per half. There are no more groups than logical rings, each ring is run at
/// most both ways ([`orient`], [`Logical::of`]), and a proved ring set has at most `lanes ×`
/// [`MOST_SHARED`] rings crossing any link ([`embed::prove_shared_rings`]) while every ring
/// leaves every compute node `v` over a link at `v`: `G ≤ 2 · MOST_SHARED · lanes(v)` for the
/// `v` with the fewest lanes. In a step, `v` sends at most `β_k` times its links' summed
/// bandwidth, `egress(v)`, and merging hops into one transfer or splitting a ring step into
/// sub-steps moves no fewer bytes; so `Σ β_k` over a half is at least those bytes over
/// `egress(v)`, for every `v`. On a 32 × 32 mesh a corner's two links bound the ring's
/// allreduce at twice the total-traffic bound.
fn sending(machine: &Machine, spec: &PhaseSpec) -> f64 {
    let ir = machine.to_ir();
    let egress = schedule_ir::cost::egresses(&ir);
    let mut lanes = vec![0u64; ir.nodes.len()];
    for link in &ir.links {
        for end in [link.a, link.b] {
            if let Some(l) = lanes.get_mut(end.index()) {
                *l += u64::from(link.lanes);
            }
        }
    }
    let compute = machine.compute_nodes();
    let fewest = compute
        .iter()
        .filter_map(|v| lanes.get(v.index()).copied())
        .min()
        .unwrap_or(0);
    let groups = 2 * u64::from(MOST_SHARED) * fewest;
    let p = compute.len() as f64;
    if p < 2.0 {
        return 0.0;
    }
    let elements = spec.elements.saturating_sub(groups) as f64 * (p - 1.0) / p;
    let bytes = elements * spec.dtype.size_bytes() as f64;
    compute
        .iter()
        .filter_map(|v| egress.get(v.index()))
        .filter(|&&rate| rate > 0.0)
        .map(|rate| bytes / rate)
        .fold(0.0, f64::max)
}

/// The most rings that may cross one lane of a link: searched rings that share lanes
/// ([`searched_rings`]) are two to a lane; every other ring set is link-disjoint.
const MOST_SHARED: u32 = 2;

/// The ladder's barley-twist rings, proved.
fn barley_twist(machine: &Machine) -> Result<Vec<Ring>, EmbedError> {
    let rings = match &machine.shape {
        Shape::Ladder(layout) => embed::ladder::barley_twist(layout)?,
        _ => {
            let broke = machine.failed.broke(|s| matches!(s, Shape::Ladder(_)));
            return Err(EmbedError::NotApplicable(format!(
                "`ladder-rings` runs on intact `Ladder` machines only{broke}"
            )));
        }
    };
    embed::prove_rings(machine, &rings)?;
    Ok(rings)
}

/// Rings to run, one direction each, and how many of them a lane may carry.
#[derive(Clone, Debug)]
pub struct RingSet {
    /// The rings.
    pub rings: Vec<Ring>,
    /// At most this many rings cross any lane of any link: 1 when they are link-disjoint.
    pub share: u32,
}

impl RingSet {
    /// Link-disjoint rings.
    pub fn disjoint(rings: Vec<Ring>) -> RingSet {
        RingSet { rings, share: 1 }
    }
}

/// The rings `ring` runs on `machine`, proved.
pub fn rings(machine: &Machine) -> Result<RingSet, EmbedError> {
    let set = match &machine.shape {
        Shape::Ring => RingSet::disjoint(vec![natural_ring(machine)]),
        _ if machine.has_switches() => RingSet::disjoint(vec![routed::switched_ring(machine)?]),
        shape => match structured_rings(machine, shape) {
            Some(rings) => RingSet::disjoint(rings),
            None => searched_rings(machine)?,
        },
    };
    embed::prove_shared_rings(machine, &set.rings, set.share)?;
    Ok(set)
}

/// Rings found by search: as many link-disjoint ones as the search finds and, where those leave
/// some node's links idle (an odd number of links, or fewer rings found than fit), rings of
/// which two may share a lane, each carrying its part of the vector ([`Logical::of`]) —
/// whichever moves the vector faster. On a 5-dimensional hypercube two disjoint rings leave
/// one link of five idle; five rings two to a link use them all.
fn searched_rings(machine: &Machine) -> Result<RingSet, EmbedError> {
    let disjoint = RingSet::disjoint(hamiltonian::find_rings(
        machine,
        hamiltonian::DEFAULT_BUDGET,
    )?);
    let pace = Logical::of(machine, &disjoint).pace;
    if pace <= node_pace(machine) * (1.0 + SHARING_GAIN) {
        return Ok(disjoint);
    }
    let Ok(shared) = hamiltonian::find_shared_rings(machine, shared_budget(machine), MOST_SHARED)
    else {
        return Ok(disjoint);
    };
    let shared = RingSet {
        rings: shared,
        share: MOST_SHARED,
    };
    Ok(
        if Logical::of(machine, &shared).pace < pace * (1.0 - SHARING_GAIN) {
            shared
        } else {
            disjoint
        },
    )
}

/// Search steps for rings that share lanes: enough for Warnsdorff's straight walks to find
/// each ring with some backtracking, small beside the disjoint search's, which has already
/// run.
fn shared_budget(machine: &Machine) -> u64 {
    let rings =
        (hamiltonian::most_shared_rings(machine, MOST_SHARED) as u64).min(SHARED_RINGS_BUDGETED);
    (SHARED_STEPS_PER_NODE * machine.node_count() as u64 * rings)
        .clamp(10_000, hamiltonian::DEFAULT_BUDGET)
}

/// Search steps per node and ring sought when rings may share lanes ([`shared_budget`]).
const SHARED_STEPS_PER_NODE: u64 = 256;

/// The most rings [`shared_budget`] pays for: links of many lanes make room for dozens of
/// rings (176 on a 24-node full mesh of 8-lane links), and a budget for all of them would let a
/// search that cannot finish run for seconds; the first rings are found fastest and bring the
/// most.
const SHARED_RINGS_BUDGETED: u64 = 8;

/// The least gain for which rings sharing lanes replace disjoint ones: below it, the search
/// is not worth its time and the disjoint rings' simpler schedule stays.
const SHARING_GAIN: f64 = 1e-3;

/// The fastest any set of rings can move the vector, in seconds per byte-share of a ring step
/// ([`Logical::pace`]): every logical ring leaves every node on one of its link directions, so
/// the node with the least bandwidth out bounds them all.
fn node_pace(machine: &Machine) -> f64 {
    machine
        .compute_nodes()
        .iter()
        .map(|&n| {
            let out: f64 = machine
                .links_at(n)
                .iter()
                .map(|&(l, _)| schedule_ir::cost::bytes_per_second(machine.link(l).bandwidth_gbps))
                .sum();
            1.0 / out
        })
        .fold(0.0, f64::max)
}

/// The logical rings a [`RingSet`] runs, and the part of the vector each carries.
#[derive(Clone, Debug)]
pub struct Logical {
    /// The logical rings, each already oriented.
    pub rings: Vec<Ring>,
    /// The part of the vector each ring carries, summing to 1; `None` for equal parts.
    pub shares: Option<Vec<f64>>,
    /// Whether rings may cross a lane together, their chunks then travelling as one transfer
    /// ([`plan::merged`]); link-disjoint rings keep a transfer, and a lane, each.
    pub merge: bool,
    /// Seconds per byte of the vector that the busiest link direction needs in one ring step,
    /// with these shares: what ring steps cost beyond their latency, per byte.
    pub pace: f64,
}

impl Logical {
    /// Disjoint rings run as [`orient`] says; rings that share lanes each run both ways. The
    /// parts are those of the linear program of [`balance`] (the busiest direction as idle as
    /// can be), or equal parts where those are optimal: link-disjoint rings over links of one
    /// bandwidth, and rings routed through switches, whose ring steps are split into sub-steps.
    pub fn of(machine: &Machine, set: &RingSet) -> Logical {
        let rings = if set.share > 1 {
            set.rings
                .iter()
                .flat_map(|r| [r.clone(), r.reversed()])
                .collect()
        } else {
            orient(machine, &set.rings)
        };
        let loads: IdVec<RingId, Load> = rings.iter().map(|r| ring_load(machine, r)).collect();
        let even: IdVec<RingId, f64> = IdVec::filled(1.0 / rings.len().max(1) as f64, rings.len());
        let even_pace = balance::busiest(&loads, &even);
        let terms: usize = loads.iter().map(|l| l.seconds.len()).sum();
        let balanced = if rings.iter().any(Ring::is_routed) {
            None
        } else if terms > MAX_SHARE_TERMS {
            Some(balance::by_speed(&loads))
        } else {
            balance::balance(&loads)
        }
        .map(|shares| (balance::busiest(&loads, &shares), shares))
        .filter(|&(p, _)| p < even_pace * (1.0 - 1e-9));
        match balanced {
            Some((pace, shares)) => Logical {
                rings,
                shares: Some(shares.into_raw()),
                merge: set.share > 1,
                pace,
            },
            None => Logical {
                rings,
                shares: None,
                merge: set.share > 1,
                pace: even_pace,
            },
        }
    }
}

/// The largest share program solved (logical rings times the link directions each uses): the
/// solver's time grows fast with it, and past it (a 24-node full mesh of 8-lane links holds
/// 88 rings, 176 walked both ways) each ring gets a share in proportion to its own speed,
/// the optimum when the rings share no link direction.
const MAX_SHARE_TERMS: usize = 2048;

/// Seconds per byte each link direction needs when `ring` carries one byte per hop: the
/// input of [`balance`].
fn ring_load(machine: &Machine, ring: &Ring) -> Load {
    let mut load = Load::default();
    for i in 0..ring.nodes.len() {
        for (d, _) in directions(machine, ring, i) {
            let gbps = machine.link(d.link()).bandwidth_gbps;
            *load.seconds.entry(d).or_default() += 1.0 / schedule_ir::cost::bytes_per_second(gbps);
        }
    }
    load
}

/// The rings in words, for `topoc check`.
fn describe_rings(machine: &Machine, set: &RingSet) -> Result<Embedding, EmbedError> {
    let rings = &set.rings;
    let count = rings.len();
    let plural = if count == 1 { "" } else { "s" };
    let summary = if rings.iter().any(Ring::is_routed) {
        format!("{count} ring{plural} through the switches, each hop routed, proved")
    } else if set.share > 1 {
        format!(
            "{count} Hamiltonian rings, at most {} on any lane, each carrying its part of the \
             vector, proved",
            set.share
        )
    } else {
        format!("{count} link-disjoint Hamiltonian ring{plural}, proved")
    };
    Ok(Embedding {
        summary,
        parts: rings
            .iter()
            .enumerate()
            .map(|(i, r)| format!("ring {}: {}", i + 1, r.describe(machine)))
            .collect(),
    })
}

/// Orients the rings of `set`, refuses a schedule too large to build, and lowers.
fn lower_rings(
    method: &str,
    machine: &Machine,
    spec: &PhaseSpec,
    knobs: &Knobs,
    set: &RingSet,
    walk: Walk,
) -> Result<Lowered, EmbedError> {
    let logical = Logical::of(machine, set);
    // Admit the rings found before building: a ring schedule grows with the square of the
    // nodes, and a search may find more rings than the estimate assumed.
    crate::limits::admit(
        Estimate::rings(spec.collective, &logical.rings),
        &knobs.budget,
    )
    .map_err(EmbedError::OverBudget)?;
    let phase = lower(spec, method, machine, &logical, walk).ok_or_else(|| {
        EmbedError::NotApplicable(format!(
            "rings do not lower {}",
            crate::compile::describe(spec.collective)
        ))
    })?;
    Ok(Lowered {
        phase,
        rings: set.rings.iter().map(|r| r.describe(machine)).collect(),
        embedding: set.rings.clone(),
        trees: Vec::new(),
        detail: None,
    })
}

/// Two rings built from a torus's, hypercube's or full mesh's structure, where a construction
/// applies ([`structured`]); `None` leaves the machine to the search.
fn structured_rings(machine: &Machine, shape: &Shape) -> Option<Vec<Ring>> {
    match shape {
        Shape::Torus { dims } => structured::grid_rings(machine, dims, &|c| {
            NodeId::new(crate::machine::torus::index(dims, c))
        }),
        Shape::Hypercube { dims } => {
            let sizes = vec![2; *dims as usize];
            structured::grid_rings(machine, &sizes, &|c| {
                NodeId::new(c.iter().enumerate().map(|(k, &b)| b << k).sum())
            })
        }
        Shape::FullMesh => structured::full_mesh_rings(machine),
        _ => None,
    }
}

/// A `Ring` machine's own cycle: node `i` to node `i+1` over link `i`.
fn natural_ring(machine: &Machine) -> Ring {
    let n = machine.node_count();
    Ring::direct(
        (0..n).map(NodeId::new).collect(),
        (0..n).map(LinkId::new).collect(),
    )
}

/// Whether [`lower`] can produce `collective`.
pub fn supports(collective: Collective) -> bool {
    super::halves(collective).is_some()
}

/// Which transfers of a ring step go in which BSP step: `groups[g]` lists the hops `(ring,
/// position)` that move in sub-step `g`. Hops are placed by [`plan::first_fit`], in ring order, into the
/// first sub-step where every link direction of their route still has a free lane, so that no
/// sub-step overbooks a direction. Every ring step has the same routes (only the chunks
/// differ), so one plan serves them all.
pub fn sub_steps(machine: &Machine, rings: &[Ring]) -> Vec<Vec<(usize, usize)>> {
    let hops: Vec<(usize, usize)> = rings
        .iter()
        .enumerate()
        .flat_map(|(r, ring)| (0..ring.nodes.len()).map(move |i| (r, i)))
        .collect();
    let routes = hops.iter().map(|&(r, i)| directions(machine, &rings[r], i));
    plan::first_fit(routes)
        .into_iter()
        .map(|group| group.into_iter().map(|t| hops[t]).collect())
        .collect()
}

/// The link directions hop `i` of `ring` crosses (numbered as in the IR: `2·link`, `+1` when
/// crossed from `b` to `a`), each with its link's lane count.
fn directions(machine: &Machine, ring: &Ring, i: usize) -> Vec<(schedule_ir::DirectionId, u32)> {
    plan::route_directions(machine, ring.nodes[i], ring.route(i))
}

/// The logical rings to run: the embedded rings one way, or each also walked back, whichever
/// moves the vector faster. Walking back doubles the rings (each carries half as much) but
/// may need more sub-steps per ring step ([`sub_steps`]) where the two ways share link directions —
/// a two-node ring over one link, or routes through a tree, which already use both
/// directions of every link. Ties go to fewer rings (fewer steps).
pub fn orient(machine: &Machine, rings: &[Ring]) -> Vec<Ring> {
    let one_way = rings.to_vec();
    let mut both = Vec::with_capacity(2 * rings.len());
    for ring in rings {
        both.push(ring.clone());
        both.push(ring.reversed());
    }
    // Time per ring step ∝ sub-steps × chunk size ∝ sub-steps / logical rings.
    let (g1, g2) = (
        sub_steps(machine, &one_way).len(),
        sub_steps(machine, &both).len(),
    );
    if g2 * one_way.len() < g1 * both.len() {
        both
    } else {
        one_way
    }
}

/// How rings walked both ways move their chunks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Walk {
    /// Every logical ring runs its own reduce-scatter and allgather all the way around:
    /// `2(p - 1)` ring steps for an allreduce (seed 004's four logical rings on the ladder).
    Around,
    /// Also price [`meet_plan`], in which each chunk is reduced from both sides at once and
    /// meets at its owner, in about half the steps, and keep whichever the cost model prices
    /// lower.
    Cheaper,
    /// [`meet_plan`] wherever it applies, priced or not.
    Meet,
}

/// Lowers `spec` onto the `logical` rings of `machine`. `algorithm` names the method in the
/// schedule. Each ring step is one plan step; the assembler splits it into as many BSP steps
/// as its shared link directions need (one when the rings share none). With [`Walk::Cheaper`]
/// rings walked both ways also try meeting in the middle. Returns `None` for a collective
/// rings do not lower (see [`supports`]).
pub fn lower(
    spec: &PhaseSpec,
    algorithm: &str,
    machine: &Machine,
    logical: &Logical,
    walk: Walk,
) -> Option<Phase> {
    let around = plan::assemble(spec, algorithm, machine, ring_plan(spec, logical)?);
    let meet = match walk {
        Walk::Around => None,
        Walk::Cheaper | Walk::Meet => meet_plan(spec, logical),
    };
    let Some(meet) = meet else {
        return Some(around);
    };
    let meet = plan::assemble(spec, algorithm, machine, meet);
    if walk == Walk::Meet {
        return Some(meet);
    }
    let ir = machine.to_ir();
    let seconds = |phase: &Phase| schedule_ir::cost::estimate(&ir, phase).seconds;
    Some(if seconds(&meet) < seconds(&around) {
        meet
    } else {
        around
    })
}

/// Rings walked both ways, meeting in the middle: the plan of [`Walk::Cheaper`]'s second
/// candidate, or `None` where it does not apply (rings not walked both ways, routed rings,
/// fewer than three nodes).
///
/// Each ring `r` of `p` nodes takes the part of the vector its two logical rings carried
/// together and cuts it into `p` chunks, chunk `j` owned by the node at position `j` — into
/// two halves of `p` chunks each when `p` is even. Reduce-scatter: chunk `j`'s partial sum
/// starts at position `j - h` and travels forward to `j`, and another starts at `j + g` and
/// travels backward to `j` (`h + g = p - 1`), each receiver reducing it in; the owner reduces
/// both (in one step when `h = g`: two reducing receives into one chunk combine one after the
/// other). For odd `p`, `h = g = (p - 1)/2`; for even `p` the two halves take
/// `(h, g) = (p/2 - 1, p/2)` and `(p/2, p/2 - 1)`, so that both directions stay equally loaded.
/// Allgather: the owner's chunk travels forward `g` hops and backward `h`, each node storing
/// it once. `⌈(p - 1)/2⌉` steps per half instead of `p - 1`, each moving over every direction
/// of a ring's hops what its two logical rings moved in two steps: the bandwidth term of
/// walking around, half its latencies.
pub fn meet_plan(spec: &PhaseSpec, logical: &Logical) -> Option<Plan> {
    let (reduce_scatter, allgather) = super::halves(spec.collective)?;
    let pairs: Vec<&[Ring]> = logical.rings.chunks(2).collect();
    let p = logical.rings.first().map_or(0, |r| r.nodes.len());
    let walked_both_ways = pairs.iter().all(|pair| match pair {
        [one, back] => *back == one.reversed() && !one.is_routed(),
        _ => false,
    });
    if p < 3 || pairs.is_empty() || !walked_both_ways {
        return None;
    }
    let rings: Vec<&Ring> = pairs.iter().map(|pair| &pair[0]).collect();
    // Each half of an even ring: (hops forward, hops backward) of its reduce-scatter.
    let halves: Vec<(usize, usize)> = if p % 2 == 1 {
        vec![(p / 2, p / 2)]
    } else {
        vec![(p / 2 - 1, p / 2), (p / 2, p / 2 - 1)]
    };
    let parts = halves.len();
    let shares: Option<Vec<f64>> = logical.shares.as_ref().map(|x| {
        x.chunks(2)
            .flat_map(|two| vec![two.iter().sum::<f64>() / parts as f64; parts])
            .collect()
    });
    let owners_needed = !matches!(spec.collective, Collective::AllReduce);
    // Chunk `j` of half `q` of ring `r`.
    let chunk_id = |r: usize, q: usize, j: usize| ChunkId::new((r * parts + q) * p + j % p);
    let chunks: Vec<Chunk> = ring_chunks(spec.elements, rings.len() * parts, p, shares.as_deref())
        .into_iter()
        .enumerate()
        .map(|(c, (start, end))| Chunk {
            start,
            end,
            owner: owners_needed.then(|| rings[c / (p * parts)].nodes[c % p]),
        })
        .collect();
    let back: Vec<Ring> = rings.iter().map(|r| r.reversed()).collect();
    // Hop `i` forward goes from position `i` to `i + 1`; backward, from `i` to `i - 1`, which is
    // hop `(p - i) mod p` of the reversed ring.
    let forward = |r: usize, i: usize, chunk: ChunkId, mode: RecvMode| {
        let ring = rings[r];
        Move::data(
            ring.nodes[i],
            ring.nodes[(i + 1) % p],
            ring.route(i).collect::<Route>(),
            vec![chunk],
            mode,
        )
    };
    let backward = |r: usize, i: usize, chunk: ChunkId, mode: RecvMode| {
        let ring = rings[r];
        Move::data(
            ring.nodes[i],
            ring.nodes[(i + p - 1) % p],
            back[r].route((p - i) % p).collect::<Route>(),
            vec![chunk],
            mode,
        )
    };
    // One round of either half: `carried(h, g, i)` names the chunk position `i` of a ring half
    // `(h, g)` carries forward and the one it carries backward, if any. The halves of a ring
    // cross each direction together: one transfer.
    let round = |mode: RecvMode, carried: &dyn Fn(usize, usize, usize) -> [Option<usize>; 2]| {
        let mut moves = Vec::new();
        for r in 0..rings.len() {
            for (q, &(h, g)) in halves.iter().enumerate() {
                for i in 0..p {
                    let [ahead, behind] = carried(h, g, i);
                    if let Some(j) = ahead {
                        moves.push(forward(r, i, chunk_id(r, q, j), mode));
                    }
                    if let Some(j) = behind {
                        moves.push(backward(r, i, chunk_id(r, q, j), mode));
                    }
                }
            }
        }
        Step::of(plan::merged(moves))
    };
    let rounds = p / 2;
    let mut steps = Vec::new();
    if reduce_scatter {
        // Partial sums travel `h` hops forward and `g` backward: in round `s`, position `i`
        // carries chunk `i + h - s` forward and chunk `i - g + s` backward.
        steps.extend((0..rounds).map(|s| {
            round(RecvMode::Reduce, &|h, g, i| {
                [
                    (s < h).then_some(i + h + p - s),
                    (s < g).then_some(i + p - g + s),
                ]
            })
        }));
    }
    if allgather {
        // Results travel `g` hops forward and `h` backward: in round `t`, position `i` passes on
        // chunk `i - t` forward and chunk `i + t` backward.
        steps.extend((0..rounds).map(|t| {
            round(RecvMode::Store, &|h, g, i| {
                [(t < g).then_some(i + p - t), (t < h).then_some(i + t)]
            })
        }));
    }
    Some(Plan {
        chunks,
        buffers: data_buffer(),
        steps,
        packing: Packing::FirstFit,
    })
}

/// The vector cut for `count` logical rings of `p` chunks each: equal chunks, or ring `r`'s
/// part of the vector (`shares[r]`, in whole elements) cut evenly among its `p` chunks.
fn ring_chunks(elements: u64, count: usize, p: usize, shares: Option<&[f64]>) -> Vec<(u64, u64)> {
    let Some(shares) = shares else {
        return even_chunks(elements, count * p);
    };
    let shares: IdVec<RingId, f64> = shares.iter().copied().collect();
    let mut at = 0;
    let mut out = Vec::with_capacity(count * p);
    for part in balance::apportion(elements, &shares) {
        out.extend(
            even_chunks(part, p)
                .into_iter()
                .map(|(a, b)| (at + a, at + b)),
        );
        at += part;
    }
    out
}

/// The plan of [`lower`]: one step per ring step, every hop of every ring in ring order; where
/// rings may share lanes, hops that cross a link direction together in a step travel as one
/// transfer ([`plan::merged`]).
pub fn ring_plan(spec: &PhaseSpec, logical: &Logical) -> Option<Plan> {
    let (reduce_scatter, allgather) = super::halves(spec.collective)?;
    let rings = &logical.rings;
    let p = rings.first().map_or(0, |r| r.nodes.len());
    let owners_needed = !matches!(spec.collective, Collective::AllReduce);
    let chunk_id = |r: usize, j: usize| ChunkId::new(r * p + j);
    let shares = logical.shares.as_deref();

    let chunks: Vec<Chunk> = ring_chunks(spec.elements, rings.len(), p, shares)
        .into_iter()
        .enumerate()
        .map(|(c, (start, end))| {
            let (r, j) = (c / p, c % p);
            Chunk {
                start,
                end,
                owner: owners_needed.then(|| rings[r].nodes[(j + p - 1) % p]),
            }
        })
        .collect();

    let rs_steps = if reduce_scatter { p - 1 } else { 0 };
    let ag_steps = if allgather { p - 1 } else { 0 };
    let steps = (0..rs_steps + ag_steps)
        .map(|ring_step| {
            let (mode, offset) = if ring_step < rs_steps {
                (RecvMode::Reduce, p - ring_step % p)
            } else {
                (RecvMode::Store, 1 + p - (ring_step - rs_steps) % p)
            };
            let moves: Vec<Move> = rings
                .iter()
                .enumerate()
                .flat_map(|(r, ring)| {
                    (0..p).map(move |i| {
                        Move::data(
                            ring.nodes[i],
                            ring.nodes[(i + 1) % p],
                            ring.route(i).collect::<Route>(),
                            vec![chunk_id(r, (i + offset) % p)],
                            mode,
                        )
                    })
                })
                .collect();
            Step::of(if logical.merge {
                plan::merged(moves)
            } else {
                moves
            })
        })
        .collect();
    Some(Plan {
        chunks,
        buffers: data_buffer(),
        steps,
        packing: Packing::FirstFit,
    })
}

#[cfg(test)]
#[allow(clippy::panic)]
mod tests {
    use super::*;
    use crate::embed::routed;

    /// Four compute nodes on one switch: every hop of the routed ring crosses the switch.
    fn star(lanes: u32) -> Machine {
        let text = format!(
            r#"Topology(name: "star", machine: Graph(nodes: ["a", "b", "c", "d"], switches: ["sw"],
            link: (lanes: {lanes}), links: [
                (id: "la", between: ("sw", "a")), (id: "lb", between: ("sw", "b")),
                (id: "lc", between: ("sw", "c")), (id: "ld", between: ("sw", "d")),
            ]))"#
        );
        crate::lower::testing::machine(&text)
    }

    fn spec() -> PhaseSpec {
        crate::lower::testing::spec(Collective::AllReduce, schedule_ir::DType::F32, 1000)
    }

    fn verified(machine: &Machine, rings: &[Ring]) -> schedule_ir::Phase {
        let logical = Logical {
            rings: rings.to_vec(),
            shares: None,
            merge: false,
            pace: 0.0,
        };
        let phase = lower(&spec(), "ring", machine, &logical, Walk::Around)
            .unwrap_or_else(|| panic!("lowers"));
        let schedule = schedule_ir::Schedule {
            format_version: schedule_ir::FORMAT_VERSION,
            machine: machine.to_ir(),
            program: Vec::new(),
            phases: vec![phase.clone()],
        };
        if let Err(e) = schedule_ir::verify(schedule) {
            panic!("{e}");
        }
        phase
    }

    /// On a mesh a corner sends as much as every other node over two links, where the average
    /// node has more: the floor sits well above the total-traffic bound, and at or below the
    /// estimate of the schedule `ring` lowers, at every size.
    #[test]
    fn a_corners_two_links_bound_the_ring_on_a_mesh() {
        let m = crate::lower::testing::machine(
            "Topology(name: \"m\", machine: Mesh(dims: [6, 6], link: (bandwidth_gbps: 400.0, \
             latency_us: 0.5)), phases: [])",
        );
        let ir = m.to_ir();
        for elements in [1u64 << 8, 1 << 18, 1 << 26] {
            let spec = crate::lower::testing::spec(
                Collective::AllReduce,
                schedule_ir::DType::F32,
                elements,
            );
            let base = Floor::of(&ir, &spec);
            let floor = ring_floor(&m, &spec, &base, Walk::Cheaper);
            let set = rings(&m).unwrap_or_else(|e| panic!("{e}"));
            let logical = Logical::of(&m, &set);
            let phase = lower(&spec, "ring", &m, &logical, Walk::Cheaper)
                .unwrap_or_else(|| panic!("lowers"));
            let estimate = schedule_ir::cost::estimate(&ir, &phase).seconds;
            assert!(
                floor <= estimate,
                "{elements}: floor {floor} above {estimate}"
            );
            if elements == 1 << 26 {
                // 120 link directions out of 36 nodes, two out of a corner: 5/3 as long.
                assert!(
                    floor > 1.65 * base.bandwidth,
                    "{floor} against the traffic bound {}",
                    base.bandwidth
                );
                assert!(floor > 0.99 * estimate, "{floor} against {estimate}");
            }
        }
    }

    #[test]
    fn shared_link_directions_are_serialised_into_sub_steps() {
        let m = star(1);
        let ring = routed::switched_ring(&m).unwrap_or_else(|e| panic!("{e}"));
        // One way, the ring's routes use every direction once: one sub-step per ring step.
        assert_eq!(sub_steps(&m, std::slice::from_ref(&ring)).len(), 1);
        assert_eq!(
            orient(&m, std::slice::from_ref(&ring)).len(),
            1,
            "one way is as fast"
        );
        assert_eq!(verified(&m, std::slice::from_ref(&ring)).steps, 6);
        // Both ways, each direction is needed twice: two sub-steps, and the verifier agrees.
        let both = [ring.clone(), ring.reversed()];
        assert_eq!(sub_steps(&m, &both).len(), 2);
        assert_eq!(verified(&m, &both).steps, 12);
    }

    #[test]
    fn lanes_let_both_ways_share_a_step() {
        let m = star(2);
        let ring = routed::switched_ring(&m).unwrap_or_else(|e| panic!("{e}"));
        let logical = orient(&m, std::slice::from_ref(&ring));
        assert_eq!(logical.len(), 2, "two lanes: both ways in one sub-step");
        assert_eq!(sub_steps(&m, &logical).len(), 1);
        assert_eq!(verified(&m, &logical).steps, 6);
    }

    #[test]
    fn chunks_cover_the_vector_evenly() {
        assert_eq!(even_chunks(10, 4), vec![(0, 2), (2, 5), (5, 7), (7, 10)]);
        assert_eq!(even_chunks(2, 4), vec![(0, 0), (0, 1), (1, 1), (1, 2)]);
        assert_eq!(even_chunks(0, 3), vec![(0, 0), (0, 0), (0, 0)]);
    }
}
