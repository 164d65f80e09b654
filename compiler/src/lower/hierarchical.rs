//! `hierarchical`: collectives on machines built from equal groups (NVSwitch or fully
//! connected nodes) joined by NICs and switches — reduce-scatter inside each group, allreduce
//! across groups over every NIC at once, allgather inside.
//!
//! **Structure.** [`crate::embed::groups`] finds `G` groups of `k` members each; member `i` of
//! every group forms rail `i`, whose members reach each other through their own NICs.
//!
//! **Chunks.** The vector is cut into `n` pieces (the pipeline), each piece into `k` shards
//! (shard `i` ends on member `i`), each shard into `G` blocks (block `b` ends on group `b`),
//! each block into `m` slices: chunk `((p·k + i)·G + b)·m + s`.
//!
//! **Transfers** (all as a DAG, [`super::dag`]), per piece:
//! 1. inside every group, a reduce-scatter of the `k` shards: recursive halving when `k` is a
//!    power of two (`log2 k` steps), a ring (`k - 1` steps), or a direct exchange (each member
//!    sends every other its shard: one step where the group's links have `k - 1` lanes); every
//!    transfer carries whole shards, so it is one send on the group fabric;
//! 2. along every rail, a reduce-scatter then allgather of the shard's `G` blocks, slice by
//!    slice: by a ring (`G - 1` steps each way, one block per transfer: the slices are small,
//!    so a NIC transfer lasts about as long as a fabric transfer and the two share BSP steps),
//!    or, when `G` is a power of two, by recursive halving and doubling between partner groups
//!    (`log2 G` steps each way of 1/2, 1/4, … of the shard: the same fractions as the groups'
//!    own halving, so that each rail step pairs with a fabric step of about its length), or
//!    by a direct exchange (up to 16 groups) or a grid exchange (beyond): one or two rounds
//!    in which every member sends each peer its block at once (`Builder::rail_rounds`);
//! 3. inside every group, the allgather mirroring step 1.
//!
//! Reduce-scatter stops after the rail reduce-scatter (member `i` of group `b` owns block `b`
//! of every piece's shard `i`); allgather starts at the rail allgather.
//!
//! **Broadcast and reduce** ([`Rail::Chain`], [`Rail::Scatter`]). A broadcast:
//! 1. inside the root's group, the root sends shard `i` to member `i` (its own shard chunk by
//!    chunk to the others in turn, who pass each on);
//! 2. along every rail, member `i` of the root's group passes its shard on, slice by slice,
//!    to member `i` of the next group, which passes it on to the next, around the rail's ring;
//!    or, where every two groups have routes between them, sends block `b` of it to the `b`-th
//!    group after its own, and those groups send each other their blocks: either way every
//!    member's NIC carries the shard once, what the machine's cut into a group needs;
//! 3. inside every group, the allgather of step 3 above (the root's own group leaves the root
//!    out).
//!
//! A reduce runs it backwards: the reduce-scatter inside every group, the shards reduced
//! along each rail toward the root's group, and member `i` of the root's group sending the root
//! shard `i`.
//!
//! **Pipelining.** The list scheduler places the transfers of later pieces behind earlier ones
//! (by rank), so one piece's rail transfers run in the same steps as the next piece's fabric
//! transfers: a step is priced by its most loaded link direction, and the NICs and the fabric
//! are different links. The piece count `n` and slice count `m` are chosen per phase size: the
//! method lowers a few candidates and keeps the one the cost model prices lowest.

use super::dag::{self, Scheduled, Transfer, TransferId, Transfers};
use super::plan::Move;
use super::{pieces, vector_chunks, Embedding, Job, Lowered, Lowering, PhaseSpec};
use crate::embed::groups::{self, Groups};
use crate::embed::EmbedError;
use crate::limits::Estimate;
use crate::machine::Machine;
use schedule_ir::{ChunkId, Collective, NodeId, RecvMode};

/// How far above the cheapest schedule a shape's price may lie for its offloading twin
/// ([`Shape::offload`]) to be tried: the twin changes only the end pieces, which sizing keeps
/// small, and took 2% off the best on NVSwitch hosts; a shape 10% dearer than the best is not
/// lowered again.
const OFFLOAD_REACH: f64 = 1.1;

/// How far above the cheapest schedule a shape's price may lie for its twins that move fewer of
/// the groups' own blocks beside the rails ([`Shape::beside`]) to be tried, among `groups`
/// groups: within a `10 G`-th. The own block is a `G`-th of what a group's fabric carries, and
/// where a twin won (NVSwitch hosts at 256 MiB and more, where the fabric bounds the steps) its
/// shape came within that of the cheapest; trying every twin of every shape doubled the
/// compile, and at this reach picked the same schedules on the NVSwitch machines from 1 MiB to
/// 1 GiB.
fn beside_reach(groups: usize) -> f64 {
    1.0 + 0.1 / groups.max(1) as f64
}

/// The most transfers a broadcast's or reduce's shape that scatters along the rails
/// ([`Rail::Scatter`]) may exchange between the groups, `pieces · slices · k · G²` (every member
/// of every group sends each slice of each piece to its rail's members in the other groups):
/// beyond [`groups::MAX_EXCHANGE_GROUPS`] groups the shapes of many pieces grow past what a
/// compile of seconds can schedule. On 64 eight-GPU hosts at 256 MiB a broadcast took 19.8 s
/// and 788 MiB with every shape, 7.1 s and 296 MiB under this cap, with the same pick; it
/// leaves every shape of 16 groups of 16 members.
const MAX_SCATTER_TRANSFERS: usize = 1 << 19;

/// The size of the schedules [`Hierarchical`] lowers, for the limits: the larger of the
/// generic estimate and the most pieces of [`PIECES`] of direct exchanges, one slice per
/// block. Per piece and half every member sends each other member of its group one transfer
/// and each group it exchanges with along its rail one more (`G - 1` of them, or `a + b - 2`
/// over a grid). The generic estimate (a ring allreduce's size) fell six times short of the
/// hybrid cube-mesh's schedule of six pieces, whose groups of four exchange directly.
fn estimate(machine: &Machine, groups: &Groups) -> Estimate {
    let generic = Estimate::generic(machine);
    let (g, k) = (groups.count(), groups.size());
    let peers = match groups::grid_digits(g) {
        Some(digits) if g > groups::MAX_EXCHANGE_GROUPS => digits[0].0 + digits[1].0 - 2,
        _ => g.saturating_sub(1),
    };
    let most = PIECES.into_iter().max().unwrap_or(1) as u64;
    let per_piece = 2 * (g * k) as u64 * (k.saturating_sub(1) + peers) as u64;
    let transfers = per_piece.saturating_mul(most);
    // Per piece: the reduce-scatter inside the groups, along the rails, then the allgather
    // along them and inside.
    let pieces = Estimate::transfers(transfers, transfers, most * (g * k) as u64, 2)
        .on(g * k)
        .in_steps(most * 4);
    if pieces.bytes() > generic.bytes() {
        pieces
    } else {
        generic
    }
}

/// The piece counts tried.
const PIECES: [usize; 6] = [1, 2, 3, 4, 6, 8];

/// The further piece counts tried where link directions are shared ([`lane_policies`]): a
/// step then carries a piece's whole exchange inside a group beside another piece's rail
/// transfers, so the pipeline's fill shrinks with more pieces while its steps stay few.
const SHARED_PIECES: [usize; 4] = [12, 16, 24, 32];

/// `hierarchical`: reduce-scatter in each group, allreduce across groups on every rail,
/// allgather in each group, pipelined.
pub struct Hierarchical;

impl Lowering for Hierarchical {
    fn supports(&self, collective: Collective) -> bool {
        supports(collective)
    }
    /// Finds the groups first, so that a machine without them is refused for that reason and
    /// not counted; then the size of its pipelines ([`estimate`]).
    fn estimate(&self, job: &Job<'_>) -> Result<Estimate, EmbedError> {
        let machine = job.machine;
        let groups = groups::find(machine)?;
        Ok(estimate(machine, &groups))
    }
    fn applies(&self, job: &Job<'_>) -> Result<Embedding, EmbedError> {
        let machine = job.machine;
        let groups = groups::find(machine)?;
        Ok(Embedding {
            summary: format!(
                "{} groups of {}, {} rails",
                groups.count(),
                groups.size(),
                groups.size()
            ),
            parts: groups.describe(machine),
        })
    }
    fn lower(&self, job: &Job<'_>) -> Result<Lowered, EmbedError> {
        let (machine, spec) = (job.machine, job.spec);
        let groups = groups::find(machine)?;
        if has_root(spec.collective) && root(&groups, spec.collective).is_none() {
            return Err(EmbedError::NotApplicable(
                "`hierarchical`: the root is in none of the groups".to_string(),
            ));
        }
        let routes = Routes::of(machine, &groups, has_root(spec.collective));
        let ir = machine.to_ir();
        // On group links of several lanes the list scheduler may stack transfers that fewer
        // lanes would have paired with others; timetables with fewer transfers per direction
        // and step are valid too, so they are priced as well ([`dag::Lanes`]). Lanes on the
        // network (a spine bundle) are for several rails at once, and are kept.
        let many_lanes = groups
            .inner
            .iter()
            .flatten()
            .flatten()
            .flatten()
            .any(|&l| machine.link(l).lanes > 1);
        let sharing = dag::links_differ(machine);
        let mut best: Option<(f64, Scheduled, Shape)> = None;
        // The price of each shape lowered, equal or sized, under each lane policy: a twin (an
        // offloading shape, or one that moves fewer own blocks beside the rails) is tried only
        // where the shape it varies came near the cheapest.
        let mut reached: Vec<(Shape, dag::Lanes, f64)> = Vec::new();
        // Three rounds: the shapes that move every own block beside the rails and keep to
        // the fabric; their offloading twins; their twins that move fewer own blocks beside
        // the rails. A twin is tried only where its shape came near the cheapest.
        let usual = |s: &Shape| Shape {
            beside: Beside::usual(s.inside, spec.collective),
            ..*s
        };
        let round_of = |s: &Shape| match (s.offload, s.beside == usual(s).beside) {
            (0, true) => 0,
            (_, true) => 1,
            (_, false) => 2,
        };
        let shapes = candidates(machine, (&groups, &routes), spec, sharing);
        let rounds = [0, 1, 2].map(|r| {
            let of_round = shapes.iter().filter(|s| round_of(s) == r);
            of_round.copied().collect::<Vec<Shape>>()
        });
        for round in rounds {
            // Cheapest floor first: the shapes that could cost least set the price to beat
            // early, and a shape whose floor is not below it is never lowered.
            let mut round: Vec<(f64, Shape)> = round
                .into_iter()
                .map(|shape| {
                    let both = (&groups, &routes);
                    (
                        floor(machine, both, spec, shape, shares(shape, sharing)),
                        shape,
                    )
                })
                .collect();
            round.sort_by(|a, b| a.0.total_cmp(&b.0));
            for (least, shape) in round {
                let twin = match round_of(&shape) {
                    0 => None,
                    1 => Some((
                        Shape {
                            offload: 0,
                            ..shape
                        },
                        OFFLOAD_REACH,
                    )),
                    _ => Some((usual(&shape), beside_reach(groups.count()))),
                };
                // The lanes under which the twin came near the cheapest.
                let near: Option<Vec<dag::Lanes>> = twin.map(|(twin, reach)| {
                    let cheapest = best.as_ref().map_or(0.0, |b| b.0);
                    let twins = reached
                        .iter()
                        .filter(|&&(s, _, price)| s == twin && price < cheapest * reach);
                    twins.map(|&(_, lanes, _)| lanes).collect()
                });
                if near.as_ref().is_some_and(Vec::is_empty) {
                    continue;
                }
                // A shape whose floor is not below the cheapest so far cannot win: not lowered.
                if best
                    .as_ref()
                    .is_some_and(|(s, _, _)| least * (1.0 - FLOOR_ROUNDING) >= *s)
                {
                    continue;
                }
                for lanes in
                    lane_policies(shape, (groups.size(), groups.count()), many_lanes, sharing)
                {
                    // A twin that moves fewer blocks beside the rails takes its shape's lane
                    // policies: only those that came near are tried again.
                    let kept = |near: &Vec<dag::Lanes>| near.contains(&lanes);
                    if round_of(&shape) == 2 && !near.as_ref().is_some_and(kept) {
                        continue;
                    }
                    let lowered = lower_shape(machine, &groups, &routes, spec, shape, lanes);
                    // A route that crosses a direction twice needs its lanes: then only the
                    // declared lanes are tried.
                    let mut scheduled = match (lowered, lanes) {
                        (Ok(scheduled), _) => scheduled,
                        (Err(_), dag::Lanes::AtMost(_) | dag::Lanes::Shared(_)) => continue,
                        (Err(e), dag::Lanes::Declared) => return Err(e),
                    };
                    let (mut seconds, reach) =
                        sizable(machine, &groups, spec, shape, &ir, &scheduled);
                    reached.push((shape, lanes, seconds));
                    // Its pieces sized to its timetable, where that could beat the cheapest
                    // so far: sizing never prices above equal pieces, and no shape is left
                    // unsized that could beat the schedule kept.
                    let beat = best.as_ref().map_or(seconds, |b| b.0.min(seconds));
                    if reach.is_some_and(|least| least < beat) {
                        if let Some(sized) =
                            resize(machine, &groups, spec, shape, &ir, &mut scheduled)
                        {
                            reached.push((shape, lanes, sized));
                            seconds = sized;
                        }
                    }
                    if best.as_ref().is_none_or(|(s, _, _)| seconds < *s) {
                        best = Some((seconds, scheduled, shape));
                    }
                }
            }
        }
        let Some((_, scheduled, shape)) = best else {
            return Err(EmbedError::NotApplicable(
                "`hierarchical` found no pipeline shape".to_string(),
            ));
        };
        let mut lowered = Lowered::phase(scheduled.phase(spec, job.name, machine));
        lowered.rings = groups.describe(machine);
        lowered.detail = Some(format!(
            "{} pieces, {} inside groups{}{}, {} along the rails, {} slice(s) per block",
            shape.pieces,
            shape.inside.name(),
            match shape.offload {
                0 => String::new(),
                c => format!(
                    " (the first and last pieces send {c} of {} chunks to the next member \
                     through the NICs)",
                    groups.count() * shape.slices
                ),
            },
            shape.beside.describe(),
            shape.rail.name(),
            shape.slices
        ));
        Ok(lowered)
    }
    /// The machine's floor; where `hierarchical` may share link directions
    /// ([`lane_policies`]), without the steps information needs to spread one transfer per
    /// lane at a time ([`Floor::shared`](super::floor::Floor::shared)).
    fn floor(&self, job: &Job<'_>, base: &super::floor::Floor) -> f64 {
        if dag::links_differ(job.machine) {
            base.shared().seconds()
        } else {
            base.seconds()
        }
    }
    fn sized(&self) -> bool {
        true
    }
    fn searches(&self) -> bool {
        true
    }
}

/// The estimate of `scheduled`, a pipeline of `shape` with equal pieces, and the least its
/// pieces sized to its timetable ([`pieces`]) could price, where they can differ.
fn sizable(
    machine: &Machine,
    groups: &Groups,
    spec: &PhaseSpec,
    shape: Shape,
    ir: &schedule_ir::Machine,
    scheduled: &Scheduled,
) -> (f64, Option<f64>) {
    let estimate = scheduled.estimate(spec.dtype, ir);
    let least = pieces::Program::least_of(
        machine,
        &scheduled.transfers,
        cut(groups, shape),
        spec.elements,
        spec.dtype,
    )
    .map(|least| estimate.latency_seconds + least);
    (estimate.seconds, least.filter(|&l| l < estimate.seconds))
}

/// The program that sizes `scheduled`'s pieces, a pipeline of `shape`.
fn program(
    machine: &Machine,
    groups: &Groups,
    spec: &PhaseSpec,
    shape: Shape,
    scheduled: &Scheduled,
) -> Option<pieces::Program> {
    pieces::Program::new(
        machine,
        &scheduled.transfers,
        &scheduled.timetable,
        cut(groups, shape),
        spec.elements,
        spec.dtype,
    )
}

/// How `shape` cuts the vector into pieces: each piece is `k · G · m` chunks.
fn cut(groups: &Groups, shape: Shape) -> pieces::Layout {
    pieces::Layout {
        pieces: shape.pieces,
        per_piece: Layout::of(groups, shape).per_piece(),
    }
}

/// `scheduled`'s estimate with its pieces sized to its timetable, where that prices lower than
/// equal pieces; `scheduled` then holds the sized chunks.
fn resize(
    machine: &Machine,
    groups: &Groups,
    spec: &PhaseSpec,
    shape: Shape,
    ir: &schedule_ir::Machine,
    scheduled: &mut Scheduled,
) -> Option<f64> {
    let program = program(machine, groups, spec, shape, scheduled)?;
    let shares = program.solve()?;
    let layout = Layout::of(groups, shape);
    let chunks = pieces::chunks(
        spec.elements,
        program.layout(),
        &shares,
        layout.owner(groups),
    );
    let even = scheduled.seconds(spec.dtype, ir);
    let before = std::mem::replace(&mut scheduled.chunks, chunks);
    let resized = scheduled.seconds(spec.dtype, ir);
    if resized < even {
        Some(resized)
    } else {
        scheduled.chunks = before;
        None
    }
}

/// A floor is compared with estimates summed in another order: it is lowered by this relative
/// margin so that rounding never lifts it above the estimate it bounds.
const FLOOR_ROUNDING: f64 = 1e-9;

/// A lower bound on the cost model's estimate of `shape`'s schedule for `spec`, from the
/// shape alone, whatever the lane policy and however its pieces are sized.
///
/// *Proof.* The estimate is `Σ (α + β)` over the steps, so it is at least any lower bound on
/// the steps' latency plus any on their transfer time. Latency, each a count of steps that each
/// cost at least some route's latency:
///
/// - member 0 of group 0 sends, per piece and half of the collective, `k - 1` transfers inside
///   its group (ring, direct exchange) or `log2 k` (halving), and a step carries at most as
///   many of them as its links inside the group have lanes ([`inner_floor`]); the same along
///   its rail ([`rail_floor`]). In a broadcast or reduce every member of a group other than
///   the root's sends its shard to the `k - 1` others (the allgather) or theirs to them (the
///   reduce-scatter): member 0 of the group after the root's is counted;
/// - every piece is one chain of dependent transfers: its reduce-scatter inside the groups,
///   along the rails, then its allgather along the rails and inside the groups, each link of
///   the chain in a step after the one before; a step that carries a transfer inside a group
///   costs at least the cheapest such route's latency, one along a rail the cheapest rail
///   route's ([`chain_latency`]).
///
/// Transfer time: that member's bytes inside its group (`k - 1` shards per piece and half) leave
/// over the first links of its routes at most at their summed bandwidth, and its rail's bytes
/// (`G - 1` blocks) over its rail routes' first links. Sizing the pieces changes no transfer's
/// route and no count, and every piece's bytes still add up to the vector's. Where link
/// directions may be shared (`sharing`), a direction takes at most what shared lanes allow
/// ([`dag::room`], more than its lanes) per step.
fn floor(
    machine: &Machine,
    (groups, routes): (&Groups, &Routes),
    spec: &PhaseSpec,
    shape: Shape,
    sharing: bool,
) -> f64 {
    let slowest = dag::slowest_lane(machine);
    let room = |l: schedule_ir::LinkId| {
        if let Some(lanes) = exchange_lanes(shape, groups.count()) {
            dag::room(machine, l, lanes, slowest)
        } else if sharing {
            dag::room(machine, l, dag::Lanes::Shared(dag::SHARED_SENDS), slowest)
        } else {
            u64::from(machine.link(l).lanes.max(1))
        }
    };
    // An offloading shape sends some of member 0's transfers through its NIC: they leave over
    // that route's first link instead.
    let offload = routes
        .offload
        .as_ref()
        .filter(|_| shape.offload > 0)
        .and_then(|o| o.first()?.first()?.first().copied());
    // The group whose member 0 is counted: one without the root of a broadcast or reduce.
    let counted = root(groups, spec.collective).map_or(0, |(r, _)| (r + 1) % groups.count());
    let inner = inner_floor(machine, (groups, counted), spec, (shape, offload), &room);
    let rail = rail_floor(machine, (groups, routes), spec, shape, &room);
    let chain = chain_latency(groups, routes, spec.collective, shape);
    inner.latency.max(rail.latency).max(chain) + inner.transfer.max(rail.transfer)
}

/// A floor's two parts, in seconds: the latency of steps and the time moving bytes.
#[derive(Clone, Copy, Debug, Default)]
struct Parts {
    latency: f64,
    transfer: f64,
}

/// How many halves of the collective run: an allreduce's two, or one.
fn halves(collective: Collective) -> u64 {
    if collective == Collective::AllReduce {
        2
    } else {
        1
    }
}

/// The least elements of a chunk of `shape`: the vector is cut into chunks whose sizes differ
/// by at most one element.
fn least_chunk(groups: &Groups, spec: &PhaseSpec, shape: Shape) -> u64 {
    let chunks = (shape.pieces * Layout::of(groups, shape).per_piece()) as u64;
    spec.elements / chunks.max(1)
}

/// [`floor`]'s latency of one piece's chain: per half, [`Inside::chain`] steps inside a group
/// and, along a rail, `G - 1` (ring, or a broadcast's or reduce's chain), `log2 G` (halving)
/// or one (direct exchange), each costing at least the cheapest route of its kind.
fn chain_latency(groups: &Groups, routes: &Routes, collective: Collective, shape: Shape) -> f64 {
    let (k, g) = (groups.size(), groups.count());
    let least = routes.least;
    let inner = if k < 2 {
        0.0
    } else {
        shape.inside.chain(k) as f64 * least.inner
    };
    let rail = if g < 2 {
        0.0
    } else {
        match shape.rail {
            Rail::Ring => (g - 1) as f64 * least.ring,
            Rail::Halving => g.trailing_zeros() as f64 * least.partners,
            Rail::Direct => least.exchange,
            Rail::Grid => 2.0 * least.grid,
            Rail::Chain => (g - 1) as f64 * least.ring,
            Rail::Scatter => 2.0 * least.exchange,
        }
    };
    let chain = halves(collective) as f64 * (inner + rail);
    if chain.is_finite() {
        chain
    } else {
        0.0
    }
}

/// [`floor`]'s parts for member 0's rail: per piece and half it sends `(G - 1) · m` slices,
/// in `(G - 1) · m` transfers over the first links of its rail routes (one route for a ring,
/// one to each other group for a direct exchange) or `log2 G · m` (halving, one route per
/// round); a broadcast's or reduce's, [`rooted_rail_floor`].
fn rail_floor(
    machine: &Machine,
    (groups, routes): (&Groups, &Routes),
    spec: &PhaseSpec,
    shape: Shape,
    room: &dyn Fn(schedule_ir::LinkId) -> u64,
) -> Parts {
    fn first(by_group: &[Vec<Vec<schedule_ir::LinkId>>]) -> Option<&Vec<schedule_ir::LinkId>> {
        by_group.first()?.first()
    }
    let (sent, per_half): (Vec<&Vec<schedule_ir::LinkId>>, usize) = match shape.rail {
        Rail::Ring => (
            groups
                .rail
                .first()
                .and_then(|g| g.first())
                .into_iter()
                .collect(),
            groups.count().saturating_sub(1),
        ),
        Rail::Direct => (
            routes
                .exchange
                .iter()
                .flatten()
                .filter_map(|r| first(r))
                .collect(),
            groups.count().saturating_sub(1),
        ),
        Rail::Halving => (
            routes
                .partners
                .iter()
                .flatten()
                .filter_map(|r| first(r))
                .collect(),
            groups.count().trailing_zeros() as usize,
        ),
        Rail::Chain | Rail::Scatter => {
            return rooted_rail_floor(machine, (groups, routes), spec, shape, room);
        }
        Rail::Grid => (
            routes
                .grid
                .iter()
                .flatten()
                .flatten()
                .filter_map(|r| first(r))
                .collect(),
            groups::grid_digits(groups.count())
                .map_or(0, |digits| digits.iter().map(|&(radix, _)| radix - 1).sum()),
        ),
    };
    let Some(&from) = groups.members.first().and_then(|m| m.first()) else {
        return Parts::default();
    };
    if groups.count() < 2 || sent.is_empty() || sent.iter().any(|r| r.is_empty()) {
        return Parts::default();
    }
    let rounds = shape.pieces as u64 * halves(spec.collective) * shape.slices as u64;
    let slices = rounds * (groups.count() as u64 - 1);
    let bytes = (slices * least_chunk(groups, spec, shape)) as f64 * spec.dtype.size_bytes() as f64;
    sends_floor(
        machine,
        (from, &sent, None),
        room,
        (rounds * per_half as u64, bytes),
    )
}

/// [`floor`]'s parts for a broadcast's or reduce's rail ([`Rail::Chain`], [`Rail::Scatter`]):
/// member 0 of the root's group sends its shard along its rail once (a reduce: takes it in),
/// in `m` slices per piece over its route to the next group (a chain; a reduce's from the group
/// before) or `(G - 1) · m` slices of blocks over its routes to every other group (a scatter;
/// a reduce's from them), a step carrying at most `room` of them over each first link. A
/// broadcast's last such send is followed by the chain's `G - 2` further hops (the scatter's
/// exchange between the other groups), a reduce's first arrival preceded by them, each in a
/// step of its own costing at least the cheapest such route's latency. A reduce's routes are
/// counted reversed: lanes and bandwidths are the same both ways.
fn rooted_rail_floor(
    machine: &Machine,
    (groups, routes): (&Groups, &Routes),
    spec: &PhaseSpec,
    shape: Shape,
    room: &dyn Fn(schedule_ir::LinkId) -> u64,
) -> Parts {
    let Some((r, _)) = root(groups, spec.collective) else {
        return Parts::default();
    };
    let gc = groups.count();
    let Some(&from) = groups.members.get(r).and_then(|m| m.first()) else {
        return Parts::default();
    };
    if gc < 2 {
        return Parts::default();
    }
    let reduce = matches!(spec.collective, Collective::Reduce { .. });
    // Member 0's route from group `a` to group `a + d`, as the rails hold it.
    let route = |a: usize, d: usize| -> Option<Vec<schedule_ir::LinkId>> {
        match shape.rail {
            Rail::Scatter => routes
                .exchange
                .as_ref()?
                .get(d - 1)?
                .get(a)?
                .first()
                .cloned(),
            _ => groups.rail.get(a)?.first().cloned(),
        }
    };
    let offsets: Vec<usize> = match shape.rail {
        Rail::Scatter => (1..gc).collect(),
        _ => vec![1],
    };
    let used: Option<Vec<Vec<schedule_ir::LinkId>>> = offsets
        .iter()
        .map(|&d| {
            if reduce {
                let mut back = route((r + gc - d) % gc, d)?;
                back.reverse();
                Some(back)
            } else {
                route(r, d)
            }
        })
        .collect();
    let Some(used) = used.filter(|u| !u.is_empty() && u.iter().all(|r| !r.is_empty())) else {
        return Parts::default();
    };
    let sent: Vec<&Vec<schedule_ir::LinkId>> = used.iter().collect();
    let least = routes.least;
    let tail = match shape.rail {
        Rail::Scatter => least.exchange,
        _ => (gc - 2) as f64 * least.ring,
    };
    let layout = Layout::of(groups, shape);
    let per_piece = (layout.g * layout.m) as u64;
    let transfers = shape.pieces as u64 * per_piece;
    let shard = per_piece * least_chunk(groups, spec, shape);
    let bytes = (shape.pieces as u64 * shard) as f64 * spec.dtype.size_bytes() as f64;
    let parts = sends_floor(machine, (from, &sent, None), room, (transfers, bytes));
    Parts {
        latency: parts.latency + if tail.is_finite() { tail } else { 0.0 },
        ..parts
    }
}

/// [`floor`]'s parts for the transfers of member 0 of group `g` inside its group: per piece
/// and half, `log2 k` (halving) or `k - 1` transfers, `k - 1` shards' worth of bytes, over the
/// first links of its routes inside the group and `offload`, the first link of its route
/// through the NICs where the shape takes it.
fn inner_floor(
    machine: &Machine,
    (groups, g): (&Groups, usize),
    spec: &PhaseSpec,
    (shape, offload): (Shape, Option<schedule_ir::LinkId>),
    room: &dyn Fn(schedule_ir::LinkId) -> u64,
) -> Parts {
    let k = groups.size();
    let Some(routes) = groups.inner.get(g).and_then(|g| g.first()) else {
        return Parts::default();
    };
    let Some(&from) = groups.members.get(g).and_then(|m| m.first()) else {
        return Parts::default();
    };
    if k < 2 {
        return Parts::default();
    }
    // Its route to itself is empty.
    let sent: Vec<&Vec<schedule_ir::LinkId>> = routes.iter().filter(|r| !r.is_empty()).collect();
    let halves = halves(spec.collective);
    let per_half = match shape.inside {
        Inside::Halving => u64::from(k.trailing_zeros()),
        Inside::Ring | Inside::Direct => (k - 1) as u64,
    };
    let pieces = shape.pieces as u64;
    let transfers = pieces * halves * per_half;
    // Every chunk holds at least `elements / chunks` elements (rounded down); a shard is
    // `G · m` chunks, and each half sends `k - 1` shards' worth of every piece.
    let layout = Layout::of(groups, shape);
    let shard = (layout.g * layout.m) as u64 * least_chunk(groups, spec, shape);
    let bytes = (halves * pieces * (k as u64 - 1) * shard) as f64 * spec.dtype.size_bytes() as f64;
    sends_floor(machine, (from, &sent, offload), room, (transfers, bytes))
}

/// The least time the `transfers` of member `from`, carrying `bytes` in all, take, leaving
/// over the first links of `routes` (and the link `also`): a step carries at most `room` of
/// them over each of those links and pays at least the cheapest route's links' latency, and
/// the bytes leave at most at those links' summed bandwidth, and cross every direction all
/// the routes share at most at its own. Nothing where the routes bound nothing.
fn sends_floor(
    machine: &Machine,
    (from, routes, also): (
        NodeId,
        &[&Vec<schedule_ir::LinkId>],
        Option<schedule_ir::LinkId>,
    ),
    room: &dyn Fn(schedule_ir::LinkId) -> u64,
    (transfers, bytes): (u64, f64),
) -> Parts {
    // Every byte crosses each direction all the routes share: the slowest of those bounds
    // the time as well (a NIC behind a faster PCIe link). Bytes sent over `also` may take
    // another way.
    let narrowest = also.map_or_else(|| narrowest(machine, from, routes), |_| f64::INFINITY);
    let mut first: Vec<schedule_ir::LinkId> = routes
        .iter()
        .filter_map(|r| r.first().copied())
        .chain(also)
        .collect();
    first.sort_unstable();
    first.dedup();
    let lanes: u64 = first.iter().map(|&l| room(l)).sum();
    let bandwidth: f64 = first
        .iter()
        .map(|&l| schedule_ir::cost::bytes_per_second(machine.link(l).bandwidth_gbps))
        .sum();
    let latency = routes
        .iter()
        .map(|r| r.iter().map(|&l| machine.link(l).latency_us).sum::<f64>())
        .fold(f64::INFINITY, f64::min);
    if lanes == 0 || !latency.is_finite() || bandwidth.is_nan() || bandwidth <= 0.0 {
        return Parts::default();
    }
    Parts {
        latency: transfers.div_ceil(lanes) as f64 * latency * 1e-6,
        transfer: bytes / bandwidth.min(narrowest),
    }
}

/// The least bandwidth, in bytes per second, of a link direction that every one of `routes`
/// crosses, all leaving `from` (infinite where they share none).
fn narrowest(machine: &Machine, from: NodeId, routes: &[&Vec<schedule_ir::LinkId>]) -> f64 {
    let crossed = |route: &[schedule_ir::LinkId]| -> Vec<(schedule_ir::LinkId, bool)> {
        let mut at = from;
        let mut out: Vec<(schedule_ir::LinkId, bool)> = route
            .iter()
            .map(|&l| {
                let (x, y) = machine.endpoints(l);
                let reversed = at != x;
                at = if at == x { y } else { x };
                (l, reversed)
            })
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    };
    let mut common: Option<Vec<(schedule_ir::LinkId, bool)>> = None;
    for route in routes {
        let here = crossed(route);
        common = Some(match common {
            None => here,
            Some(before) => before.into_iter().filter(|d| here.contains(d)).collect(),
        });
    }
    common
        .into_iter()
        .flatten()
        .map(|(l, _)| schedule_ir::cost::bytes_per_second(machine.link(l).bandwidth_gbps))
        .fold(f64::INFINITY, f64::min)
}

/// The lane policies a shape is scheduled with on groups of `k`: a direct exchange keeps to
/// `k - 1` transfers per direction and step, so that one piece's exchange fills a member's
/// port and the next piece's waits for the following step instead of stacking on it; rings
/// and halving are scheduled on the declared lanes and, where some link has several, on one.
/// Where `sharing` (the machine's links differ in speed, [`dag::links_differ`]: NVSwitch
/// ports beside NICs), a direct exchange is also scheduled with shared link directions
/// ([`dag::Lanes::Shared`]), and only so in [`SHARED_PIECES`] pieces: one send per lane and
/// step would let a group's fast port carry no more of a piece per step than a NIC. Rings and
/// halving inside a group take more steps for the same bytes, and are not. A direct exchange
/// along the rails is scheduled with shared link directions only ([`rail_exchange_lanes`]).
fn lane_policies(
    shape: Shape,
    (k, g): (usize, usize),
    many_lanes: bool,
    sharing: bool,
) -> Vec<dag::Lanes> {
    let exchange = u32::try_from(k.saturating_sub(1)).unwrap_or(u32::MAX);
    let shared = dag::Lanes::Shared(dag::SHARED_SENDS);
    if let Some(lanes) = exchange_lanes(shape, g) {
        return vec![lanes];
    }
    match shape.inside {
        Inside::Direct if shape.offload > 0 => vec![shared],
        Inside::Direct if shares(shape, sharing) && !PIECES.contains(&shape.pieces) => {
            vec![shared]
        }
        Inside::Direct if shares(shape, sharing) => vec![dag::Lanes::AtMost(exchange), shared],
        Inside::Direct => vec![dag::Lanes::AtMost(exchange)],
        Inside::Halving | Inside::Ring if many_lanes => {
            vec![dag::Lanes::Declared, dag::Lanes::AtMost(1)]
        }
        Inside::Halving | Inside::Ring => vec![dag::Lanes::Declared],
    }
}

/// The link use of a direct exchange along the rails among `g` groups: shared link directions
/// that take, per lane of the slowest link, the `g - 1` sends of one piece's reduce-scatter
/// beside the `g - 1` of another's allgather, so that a member's NIC carries both halves of a
/// pipeline in one step. At [`dag::SHARED_SENDS`] (4) the rails of two pieces could not meet
/// there from four groups on: on four 8-GPU NVSwitch nodes at 256 MiB no direct exchange along
/// the rails then priced below halving along them (1.143 ms), against 1.113 ms.
fn rail_exchange_lanes(g: usize) -> dag::Lanes {
    let sends = u32::try_from(2 * g.saturating_sub(1)).unwrap_or(u32::MAX);
    dag::Lanes::Shared(sends.max(dag::SHARED_SENDS))
}

/// The link use of `shape` among `g` groups where it exchanges directly along the rails: a
/// direct exchange's ([`rail_exchange_lanes`] of `g`), or a grid exchange's, as many sends as
/// both its rounds of one piece's reduce-scatter beside both of another's allgather,
/// `2(a + b - 2)` (with only the larger round's, `2(b - 1)`, the pieces of 64 hosts as an
/// 8 × 8 grid met on no NIC and took two steps each: 1.628 ms at 256 MiB against 1.459 ms).
fn exchange_lanes(shape: Shape, g: usize) -> Option<dag::Lanes> {
    match shape.rail {
        Rail::Direct | Rail::Scatter => Some(rail_exchange_lanes(g)),
        Rail::Grid => {
            let sends = groups::grid_digits(g).map_or(g, |d| d[0].0 + d[1].0 - 1);
            Some(rail_exchange_lanes(sends))
        }
        Rail::Ring | Rail::Halving | Rail::Chain => None,
    }
}

/// Whether `shape` is scheduled with shared link directions too ([`lane_policies`]).
fn shares(shape: Shape, sharing: bool) -> bool {
    sharing && shape.inside == Inside::Direct
}

/// Whether `hierarchical` lowers `collective`: every collective (an allreduce and either of
/// its halves, a broadcast and a reduce).
pub fn supports(_collective: Collective) -> bool {
    true
}

/// Where the root of a broadcast or reduce is: its group and its member number; `None` for
/// the other collectives, and for a root in no group.
fn root(groups: &Groups, collective: Collective) -> Option<(usize, usize)> {
    let (Collective::Broadcast { root } | Collective::Reduce { root }) = collective else {
        return None;
    };
    groups
        .members
        .iter()
        .enumerate()
        .find_map(|(g, members)| Some((g, members.iter().position(|&n| n == root)?)))
}

/// Whether `collective` is a broadcast or a reduce, which has a root.
fn has_root(collective: Collective) -> bool {
    matches!(
        collective,
        Collective::Broadcast { .. } | Collective::Reduce { .. }
    )
}

/// A pipeline shape: `pieces` pieces, each rail block cut into `slices` slices.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    /// Pieces of the vector in the pipeline.
    pub pieces: usize,
    /// Slices of each block on the rails.
    pub slices: usize,
    /// How the groups reduce-scatter and allgather their shards.
    pub inside: Inside,
    /// How each rail reduce-scatters and allgathers a shard's blocks between the groups.
    pub rail: Rail,
    /// How many chunks of each direct-exchange send to the next member go through the NICs
    /// instead of the group's fabric, in the pipeline's first and last pieces (0: none). Their
    /// exchanges run while the NICs carry no rail: the first piece's reduce-scatter, the last
    /// piece's allgather. The fabric must carry `2(k - 1)/k` of the vector per member, a
    /// member's NIC only its rail's share; on NVSwitch hosts with a NIC per GPU the two
    /// together carry more ([`end_share`]).
    pub offload: usize,
    /// Which halves of a direct exchange inside the groups move the block of a shard that its
    /// group ends with beside the rails.
    pub beside: Beside,
}

/// How a group reduce-scatters and allgathers a piece's shards.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Inside {
    /// Halving and doubling: `log2 k` steps of unequal sizes, for `k` a power of two.
    Halving,
    /// A ring: `k - 1` equal steps, which pair better with the rails' slices.
    Ring,
    /// Every member sends each other member its shard directly: one step where the group's
    /// links have `k - 1` lanes (an NVSwitch port is many links), and no chain of
    /// dependencies for the scheduler to wait on where they have fewer.
    Direct,
}

impl Inside {
    /// How it reads in the compiler's notes.
    fn name(self) -> &'static str {
        match self {
            Inside::Halving => "halving",
            Inside::Ring => "rings",
            Inside::Direct => "direct exchange",
        }
    }

    /// The longest chain of dependent transfers of a piece's reduce-scatter inside a group.
    fn chain(self, k: usize) -> usize {
        match self {
            Inside::Halving => k.trailing_zeros() as usize,
            Inside::Ring => k - 1,
            Inside::Direct => 1,
        }
    }
}

/// Which halves of a direct exchange inside the groups move the block of a shard that its
/// group ends with beside the rails. The pipeline's first step (an allgather's) or last (a
/// reduce-scatter's) then carries part of a piece inside the groups, where otherwise only the
/// rails run; the steps beside the rails carry more inside the groups, which costs where the
/// group's fabric is what bounds them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Beside {
    /// The reduce-scatter's: a step after the blocks that go on along the rails (which bring
    /// that block only into its member).
    pub scatter: bool,
    /// The allgather's: as soon as its member holds it (its input, or reduced along the rails),
    /// before the rails bring the others.
    pub gather: bool,
}

impl Beside {
    const NONE: Beside = Beside {
        scatter: false,
        gather: false,
    };

    /// A shape's first choice: in a direct exchange inside the groups, every half that
    /// `collective` runs; else none (the other ways inside have no such block apart).
    fn usual(inside: Inside, collective: Collective) -> Beside {
        if inside != Inside::Direct {
            return Beside::NONE;
        }
        Beside {
            scatter: matches!(
                collective,
                Collective::AllReduce | Collective::ReduceScatter
            ),
            gather: matches!(collective, Collective::AllReduce | Collective::AllGather),
        }
    }

    /// How it reads in the compiler's notes, after the way inside the groups.
    fn describe(self) -> &'static str {
        match (self.scatter, self.gather) {
            (true, true) => ", the group's own block beside the rails each way",
            (true, false) => ", the group's own block beside the rails in the reduce-scatter",
            (false, true) => ", the group's own block beside the rails in the allgather",
            (false, false) => "",
        }
    }

    /// The choices short of [`Beside::usual`] for a direct exchange: fewer halves.
    fn fewer(collective: Collective) -> impl Iterator<Item = Beside> {
        let all = Beside::usual(Inside::Direct, collective);
        let halves = [false, true].into_iter().flat_map(|scatter| {
            [false, true]
                .into_iter()
                .map(move |gather| Beside { scatter, gather })
        });
        halves
            .filter(move |b| *b != all && (all.scatter || !b.scatter) && (all.gather || !b.gather))
    }
}

/// How a rail reduce-scatters and allgathers a shard's blocks between the groups.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rail {
    /// A ring: `G - 1` steps each way, a block per transfer.
    Ring,
    /// Halving and doubling between partner groups `g XOR 2^r`: `log2 G` steps each way, for
    /// `G` a power of two ([`groups::partner_routes`]).
    Halving,
    /// Every member sends each other group's member on its rail its block directly: the
    /// `G - 1` sends of a half leave together where link directions are shared, so a half
    /// pays one step's latency through the network, not `G - 1` or `log2 G`
    /// ([`groups::exchange_routes`]).
    Direct,
    /// The groups as an `a × b` grid: a direct exchange along one side, then along the other
    /// (two rounds, `a + b - 2` sends per member and half), where there are too many groups to
    /// exchange directly ([`groups::grid_routes`]).
    Grid,
    /// Broadcast and reduce: each shard passed slice by slice from group to group around the
    /// rail's ring, from the root's group on (a reduce: toward it), so that every member's NIC
    /// carries it once. A scatter then allgather along the rail would send the root group's
    /// member's NIC `2(G - 1)/G` shards.
    Chain,
    /// Broadcast and reduce where every two groups have routes between them: member `i` of the
    /// root's group sends block `b` of shard `i` (of `G - 1`) to member `i` of the `b`-th
    /// group after it, and those members send each other their blocks directly (a reduce: the
    /// reverse). Each NIC still carries a shard once, in two steps along the rails where the
    /// chain takes `G - 1`.
    Scatter,
}

impl Rail {
    /// Whether the rail carries a broadcast or reduce ([`Rail::Chain`], [`Rail::Scatter`]).
    fn rooted(self) -> bool {
        matches!(self, Rail::Chain | Rail::Scatter)
    }

    /// How it reads in the compiler's notes.
    fn name(self) -> &'static str {
        match self {
            Rail::Ring => "rings",
            Rail::Halving => "halving",
            Rail::Direct => "direct exchange",
            Rail::Grid => "grid exchange",
            Rail::Chain => "a chain from the root's group",
            Rail::Scatter => "scattered from the root's group, exchanged directly",
        }
    }
}

/// Routes between partner groups, by round, group and rail ([`groups::partner_routes`]).
type Partners = Vec<Vec<Vec<Vec<schedule_ir::LinkId>>>>;

/// Routes from each group to the group `d` further on, by offset `d - 1`, group and rail
/// ([`groups::exchange_routes`]).
type Exchange = Vec<Vec<Vec<Vec<schedule_ir::LinkId>>>>;

/// Routes through the NICs from each member to the next, by group and member
/// ([`groups::offload_routes`]).
type Offload = Vec<Vec<Vec<schedule_ir::LinkId>>>;

/// The share of one shard that each member sends its next member through its NIC in the
/// first piece's reduce-scatter and the last piece's allgather, where no rail uses the NIC:
/// its fabric port (bandwidth `inner`) carries `k - 1 - y` shards and its NIC (`rail`) `y`,
/// which finish together when `y = (k - 1) rail / (inner + rail)`.
fn end_share(k: usize, inner: f64, rail: f64) -> f64 {
    let y = (k as f64 - 1.0) * rail / (inner + rail);
    if y.is_finite() {
        y.max(0.0)
    } else {
        0.0
    }
}

/// The routes beyond a group's fabric and its rails that some shapes take.
#[derive(Clone, Debug, Default)]
pub struct Routes {
    /// Between partner groups, where the rails may halve and double.
    partners: Option<Partners>,
    /// From each group to every other, where the rails may exchange directly.
    exchange: Option<Exchange>,
    /// Through the NICs inside each group, where the direct exchange may offload.
    offload: Option<Offload>,
    /// By round, the routes of a grid exchange along the rails ([`groups::grid_digits`]).
    grid: Option<Vec<Exchange>>,
    /// The least latency of a route of each kind, for [`floor`].
    least: Latencies,
}

/// The least latency, in seconds, that a transfer of each kind pays: over the cheapest route
/// of that kind, its links and the switches it passes through, as the cost model charges
/// them ([`schedule_ir::cost::latency::route_seconds`]). Infinite where there is no route.
#[derive(Clone, Copy, Debug)]
struct Latencies {
    /// Inside a group.
    inner: f64,
    /// Along a rail to the next group (a ring).
    ring: f64,
    /// Along a rail to a partner group (halving).
    partners: f64,
    /// Along a rail to any other group (a direct exchange).
    exchange: f64,
    /// Along a rail to a group in the same row or column (a grid exchange).
    grid: f64,
}

impl Default for Latencies {
    fn default() -> Latencies {
        Latencies {
            inner: f64::INFINITY,
            ring: f64::INFINITY,
            partners: f64::INFINITY,
            exchange: f64::INFINITY,
            grid: f64::INFINITY,
        }
    }
}

impl Routes {
    /// The routes `machine` has for `groups`. Those of a direct exchange along the rails only
    /// where its links differ in speed: the exchange is tried only on shared link directions
    /// ([`candidates`]), and its routes take `G · k · (G - 1)` searches.
    pub fn of(machine: &Machine, groups: &Groups, rooted: bool) -> Routes {
        let partners = groups::partner_routes(machine, groups);
        let exchange = dag::links_differ(machine)
            .then(|| groups::exchange_routes(machine, groups, rooted))
            .flatten();
        let grid = dag::links_differ(machine)
            .then(|| groups::grid_routes(machine, groups))
            .flatten();
        let ir = machine.to_ir();
        // The least over routes by group and member (`[g][i]`), each leaving that member.
        let least = |by_group: &mut dyn Iterator<Item = &Vec<Vec<schedule_ir::LinkId>>>| {
            let mut least = f64::INFINITY;
            for (g, by_member) in by_group.enumerate() {
                for (i, route) in by_member.iter().enumerate() {
                    let (Some(&from), Some((&first, via))) = (
                        groups.members.get(g).and_then(|m| m.get(i)),
                        route.split_first(),
                    ) else {
                        continue;
                    };
                    let seconds = schedule_ir::cost::latency::route_seconds(&ir, from, first, via);
                    least = least.min(seconds);
                }
            }
            least
        };
        let every = |routes: Option<&[Vec<Vec<Vec<schedule_ir::LinkId>>>]>| {
            routes
                .into_iter()
                .flatten()
                .fold(f64::INFINITY, |l, by_group| {
                    l.min(least(&mut by_group.iter()))
                })
        };
        // Inside a group, member `i`'s routes to every member: one group of routes per
        // member, numbered as the group.
        let inner = groups
            .inner
            .iter()
            .enumerate()
            .flat_map(|(g, by_member)| by_member.iter().enumerate().map(move |(i, to)| (g, i, to)))
            .flat_map(|(g, i, to)| to.iter().map(move |route| (g, i, route)))
            .filter_map(|(g, i, route)| {
                let from = *groups.members.get(g)?.get(i)?;
                let (&first, via) = route.split_first()?;
                Some(schedule_ir::cost::latency::route_seconds(
                    &ir, from, first, via,
                ))
            })
            .fold(f64::INFINITY, f64::min);
        let latencies = Latencies {
            inner,
            ring: least(&mut groups.rail.iter()),
            partners: every(partners.as_deref()),
            exchange: every(exchange.as_deref()),
            grid: grid
                .iter()
                .flatten()
                .fold(f64::INFINITY, |l, round| l.min(every(Some(round)))),
        };
        Routes {
            partners,
            exchange,
            offload: groups::offload_routes(machine, groups),
            grid,
            least: latencies,
        }
    }
}

/// The shapes tried for a vector of `elements`: every piece count of [`PIECES`], with one slice
/// and with the slice count that makes a rail transfer about as long as a fabric transfer (a
/// block is `1/G` of a shard; the rail is slower than the fabric by the ratio of their
/// bottleneck bandwidths, the rail's divided among the rails that share a link), halving or
/// ring inside groups, ring or (with `partners`) halving along the rails; where `sharing`,
/// also a direct exchange inside groups in [`SHARED_PIECES`] pieces of one slice, and (with
/// routes between every two groups, or along a grid's rows and columns) direct exchanges
/// inside groups beside direct or grid exchanges along the rails, whose sends leave together
/// only where link directions are shared. A broadcast or reduce passes shards along the rails
/// ([`Rail::Chain`]) in 1, 2 or 4 slices, and where every two groups have routes
/// between them also scatters them ([`Rail::Scatter`]) in one or two slices, with a direct
/// exchange inside the groups, up to [`MAX_SCATTER_TRANSFERS`]. Shapes with more chunks than
/// elements are left out, except the first.
pub fn candidates(
    machine: &Machine,
    (groups, routes): (&Groups, &Routes),
    spec: &PhaseSpec,
    sharing: bool,
) -> Vec<Shape> {
    let elements = spec.elements;
    if has_root(spec.collective) {
        let pieces = PIECES
            .into_iter()
            .chain(SHARED_PIECES.into_iter().filter(|_| sharing));
        let scatters = routes.exchange.is_some() && groups.count() > 2;
        let rails = [(Rail::Chain, &[1, 2, 4][..]), (Rail::Scatter, &[1, 2][..])];
        let shaped = rails
            .into_iter()
            .filter(|&(rail, _)| rail == Rail::Chain || scatters)
            .flat_map(|(rail, slices)| {
                let pieces = pieces.clone();
                slices.iter().flat_map(move |&slices| {
                    pieces.clone().map(move |pieces| Shape {
                        pieces,
                        slices,
                        inside: Inside::Direct,
                        rail,
                        offload: 0,
                        beside: Beside::NONE,
                    })
                })
            });
        // A scattering shape's exchange between the groups grows with the square of them.
        let (k, g) = (groups.size(), groups.count());
        let within = |s: &Shape| {
            let exchanged = (s.pieces * s.slices).saturating_mul(k * g * g);
            s.rail != Rail::Scatter || exchanged <= MAX_SCATTER_TRANSFERS
        };
        return fitting(groups, shaped.filter(within), elements);
    }
    let slowest = |route: &[schedule_ir::LinkId]| {
        route
            .iter()
            .map(|&l| machine.link(l).bandwidth_gbps)
            .fold(f64::INFINITY, f64::min)
    };
    let inner = groups
        .inner
        .first()
        .and_then(|g| g.first())
        .and_then(|r| r.get(1))
        .map_or(1.0, |r| slowest(r));
    let rail = groups
        .rail
        .first()
        .and_then(|g| g.first())
        .map_or(1.0, |r| slowest(r));
    // Rails that share a link (one NIC for several members) share its bandwidth.
    let shared = groups.rail.first().map_or(1, |routes| {
        routes
            .iter()
            .flatten()
            .map(|l| routes.iter().filter(|r| r.contains(l)).count())
            .max()
            .unwrap_or(1)
    });
    let rail = rail / shared.max(1) as f64;
    let g = groups.count() as f64;
    let balanced = (inner / (g * rail)).round().clamp(1.0, 16.0) as usize;
    let mut slices = vec![1, balanced, balanced + 1];
    slices.dedup();
    let inside: &[Inside] = if groups.size().is_power_of_two() {
        &[Inside::Halving, Inside::Ring, Inside::Direct]
    } else {
        &[Inside::Ring, Inside::Direct]
    };
    let mut rails = vec![Rail::Ring];
    if routes.partners.is_some() {
        rails.push(Rail::Halving);
    }
    if sharing && routes.exchange.is_some() {
        rails.push(Rail::Direct);
    }
    if sharing && routes.grid.is_some() {
        rails.push(Rail::Grid);
    }
    let mut tried: Vec<Shape> = Vec::new();
    for rail in rails {
        // A direct exchange along the rails pairs with one inside the groups: both take one
        // step where link directions are shared.
        let inside = inside
            .iter()
            .filter(|&&i| !matches!(rail, Rail::Direct | Rail::Grid) || i == Inside::Direct);
        for &inside in inside {
            for pieces in PIECES {
                for &slices in &slices {
                    tried.push(Shape {
                        pieces,
                        slices,
                        inside,
                        rail,
                        offload: 0,
                        beside: Beside::NONE,
                    });
                }
            }
        }
        for pieces in SHARED_PIECES.into_iter().filter(|_| sharing) {
            tried.push(Shape {
                pieces,
                slices: 1,
                inside: Inside::Direct,
                rail,
                offload: 0,
                beside: Beside::NONE,
            });
        }
    }
    // Where link directions are shared and the NICs reach each member's neighbour, every
    // direct exchange is also tried with the share of a shard that balances a member's fabric
    // port against its NIC in the pipeline's end pieces ([`end_share`]) sent through the NICs,
    // rounded to whole chunks. (Sharing the middle pieces' exchanges too was tried: with the
    // rails on the NICs there, no shape priced lower.)
    let share = end_share(groups.size(), inner, rail);
    if sharing && routes.offload.is_some() {
        let offloaded: Vec<Shape> = tried
            .iter()
            .filter(|s| s.inside == Inside::Direct)
            .filter_map(|&shape| {
                let per_shard = groups.count() * shape.slices;
                let offload = ((share * per_shard as f64).round() as usize).min(per_shard - 1);
                (offload > 0).then_some(Shape { offload, ..shape })
            })
            .collect();
        tried.extend(offloaded);
    }
    // Every direct exchange inside the groups with the groups' own blocks beside the rails, in
    // every half or fewer: which is cheaper depends on whether the fabric or the rails bound
    // the steps.
    let collective = spec.collective;
    for shape in &mut tried {
        shape.beside = Beside::usual(shape.inside, collective);
    }
    let fewer: Vec<Shape> = tried
        .iter()
        .filter(|s| s.inside == Inside::Direct)
        .flat_map(|&shape| Beside::fewer(collective).map(move |beside| Shape { beside, ..shape }))
        .collect();
    tried.extend(fewer);
    fitting(groups, tried, elements)
}

/// `shapes` without repeats and without those of more chunks than `elements`, except the first.
fn fitting(groups: &Groups, shapes: impl IntoIterator<Item = Shape>, elements: u64) -> Vec<Shape> {
    let mut kept: Vec<Shape> = Vec::new();
    for shape in shapes {
        let chunks = (shape.pieces * Layout::of(groups, shape).per_piece()) as u64;
        if (kept.is_empty() || chunks <= elements) && !kept.contains(&shape) {
            kept.push(shape);
        }
    }
    kept
}

/// Lowers `spec` with one pipeline shape, scheduled with `lanes` per link direction; a shape
/// that halves or exchanges directly along the rails needs those routes.
fn lower_shape(
    machine: &Machine,
    groups: &Groups,
    routes: &Routes,
    spec: &PhaseSpec,
    shape: Shape,
    lanes: dag::Lanes,
) -> Result<Scheduled, EmbedError> {
    let layout = Layout::of(groups, shape);
    let count = shape.pieces * layout.per_piece();
    let chunks = vector_chunks(spec.elements, count, layout.owner(groups));
    let rounds: Vec<Round<'_>> = match (shape.rail, &routes.partners, &routes.exchange) {
        (Rail::Ring | Rail::Chain, _, _) => Vec::new(),
        (Rail::Halving, Some(partners), _) => (0..partners.len())
            .map(|bit| Round {
                radix: 2,
                stride: 1 << bit,
                routes: &partners[bit..=bit],
            })
            .collect(),
        (Rail::Direct | Rail::Scatter, _, Some(exchange)) => vec![Round {
            radix: groups.count(),
            stride: 1,
            routes: exchange,
        }],
        (Rail::Grid, _, _) if routes.grid.is_some() => {
            let digits = groups::grid_digits(layout.g).unwrap_or_default();
            digits
                .iter()
                .zip(routes.grid.iter().flatten())
                .map(|(&(radix, stride), routes)| Round {
                    radix,
                    stride,
                    routes,
                })
                .collect()
        }
        (Rail::Halving | Rail::Direct | Rail::Grid | Rail::Scatter, _, _) => {
            return Err(EmbedError::NotApplicable(format!(
                "`hierarchical`: no routes between the groups for a {} along the rails",
                shape.rail.name()
            )))
        }
    };
    let along = match shape.rail {
        Rail::Ring | Rail::Chain => Along::Ring,
        _ => Along::Rounds(&rounds),
    };
    let offload = match (shape.offload, routes.offload.as_ref()) {
        (0, _) => None,
        (c, Some(o)) => Some((o, c)),
        (_, None) => {
            return Err(EmbedError::NotApplicable(
                "`hierarchical`: no routes through the NICs between members of a group".to_string(),
            ))
        }
    };
    let mut b = Builder {
        groups,
        along,
        offload,
        piece: 0,
        pieces: shape.pieces,
        layout,
        inside: shape.inside,
        beside: shape.beside,
        root: root(groups, spec.collective),
        transfers: Transfers::new(),
    };
    // A piece's chain inside a group is log2 k, k - 1 or 1 step per half.
    let half = shape.inside.chain(layout.k);
    let stride = u32::try_from(half.max(1)).unwrap_or(1);
    for p in 0..shape.pieces {
        let first = b.transfers.len();
        b.piece = p;
        b.piece(p, spec.collective);
        let rank = u32::try_from(p).unwrap_or(u32::MAX).saturating_mul(stride);
        b.transfers
            .iter_mut()
            .skip(first)
            .for_each(|t| t.rank = t.rank.saturating_add(rank));
    }
    let options = dag::Options {
        batching: dag::Batching::One,
        lanes,
        // A direct exchange depends on nothing: without holding each piece to its rank, every
        // piece's would start in the first steps.
        hold_to_rank: shape.inside == Inside::Direct,
    };
    let timetable = dag::schedule_with(machine, &b.transfers, options)
        .map_err(|e| EmbedError::NotApplicable(format!("`hierarchical`: {e}")))?;
    Ok(Scheduled {
        chunks,
        transfers: b.transfers,
        timetable,
    })
}

/// How chunks are numbered.
#[derive(Clone, Copy, Debug)]
struct Layout {
    /// Members per group (shards per piece).
    k: usize,
    /// Blocks per shard: one per group, one ([`Rail::Chain`]) or one per group but the root's
    /// ([`Rail::Scatter`]).
    g: usize,
    /// Slices per block.
    m: usize,
    /// Whether chunks have owners (an allreduce's halves), block `b` ending on group `b`.
    owned: bool,
}

impl Layout {
    /// The layout of `shape`'s pipeline: a block per group, a whole shard per block where the
    /// rails pass shards along ([`Rail::Chain`]), or a block per group but the root's where
    /// they scatter them ([`Rail::Scatter`]).
    fn of(groups: &Groups, shape: Shape) -> Layout {
        let g = match shape.rail {
            Rail::Chain => 1,
            Rail::Scatter => groups.count().saturating_sub(1).max(1),
            Rail::Ring | Rail::Halving | Rail::Direct | Rail::Grid => groups.count(),
        };
        Layout {
            k: groups.size(),
            g,
            m: shape.slices,
            owned: !shape.rail.rooted(),
        }
    }

    /// Chunks per piece.
    fn per_piece(self) -> usize {
        self.k * self.g * self.m
    }

    /// Who owns chunk `c` at the end: the member of its shard in the group of its block.
    fn owner(self, groups: &Groups) -> impl Fn(usize) -> Option<NodeId> + '_ {
        move |c| {
            if !self.owned {
                return None;
            }
            let block = (c / self.m) % self.g;
            let shard = (c / (self.m * self.g)) % self.k;
            Some(groups.members[block][shard])
        }
    }

    fn chunk(&self, p: usize, i: usize, b: usize, s: usize) -> ChunkId {
        ChunkId::new(((p * self.k + i) * self.g + b) * self.m + s)
    }

    /// The block of chunk `c` ([`Layout::chunk`]'s `b`).
    fn block(&self, c: ChunkId) -> usize {
        (c.index() / self.m) % self.g
    }

    /// Every chunk of the given shards of piece `p`, in vector order.
    fn shards(&self, p: usize, shards: &[usize]) -> Vec<ChunkId> {
        let mut out = Vec::with_capacity(shards.len() * self.g * self.m);
        for &i in shards {
            for b in 0..self.g {
                for s in 0..self.m {
                    out.push(self.chunk(p, i, b, s));
                }
            }
        }
        out
    }
}

/// Member by member, what either list waits for.
fn join(a: &[Vec<TransferId>], b: &[Vec<TransferId>]) -> Vec<Vec<TransferId>> {
    a.iter()
        .zip(b)
        .map(|(a, b)| a.iter().chain(b).copied().collect())
        .collect()
}

/// How a [`Builder`]'s rails run ([`Rail`]), with the routes they need.
#[derive(Clone, Copy)]
enum Along<'a> {
    Ring,
    /// Rounds of exchanges between the groups that differ in one digit of their number.
    Rounds(&'a [Round<'a>]),
}

/// One round of an exchange along the rails: the groups are numbered in mixed radix, and
/// every group exchanges with the `radix - 1` others whose number differs from its own only in
/// the digit of weight `stride`. Halving is one round of radix 2 per bit, a direct exchange
/// one round of radix `G`, a grid two rounds.
#[derive(Clone, Copy)]
struct Round<'a> {
    radix: usize,
    stride: usize,
    /// `routes[d - 1][g][i]`: rail `i`'s route from group `g` to the group `d` further on in
    /// this round's digit (cyclically).
    routes: &'a [Vec<Vec<Vec<schedule_ir::LinkId>>>],
}

impl Round<'_> {
    /// Group `g`'s digit in this round.
    fn digit(&self, g: usize) -> usize {
        (g / self.stride) % self.radix
    }

    /// The group `d` further on than `g` in this round's digit.
    fn peer(&self, g: usize, d: usize) -> usize {
        groups::peer(g, (self.radix, self.stride), d)
    }
}

/// Collects the transfers of the DAG.
struct Builder<'a> {
    groups: &'a Groups,
    /// How the rails run, with their routes.
    along: Along<'a>,
    /// Routes through the NICs from each member to the next, and how many chunks of each such
    /// send of the direct exchange take them ([`Shape::offload`]).
    offload: Option<(&'a Offload, usize)>,
    /// The piece being built, of `pieces`.
    piece: usize,
    pieces: usize,
    layout: Layout,
    /// How the groups exchange shards.
    inside: Inside,
    /// Which halves move the block a group ends with beside the rails ([`Shape::beside`]).
    beside: Beside,
    /// A broadcast's or reduce's root: its group and member number.
    root: Option<(usize, usize)>,
    transfers: Transfers,
}

impl Builder<'_> {
    fn push(&mut self, what: Move, after: Vec<TransferId>) -> TransferId {
        self.transfers.push(Transfer {
            what,
            after: after.into(),
            rank: 0,
        })
    }

    /// A transfer inside group `g` from member `i` to member `j`.
    fn inner(
        &mut self,
        g: usize,
        i: usize,
        j: usize,
        chunks: Vec<ChunkId>,
        mode: RecvMode,
        after: Vec<TransferId>,
    ) -> TransferId {
        let members = &self.groups.members[g];
        let what = Move::data(
            members[i],
            members[j],
            self.groups.inner[g][i][j].as_slice(),
            chunks,
            mode,
        );
        self.push(what, after)
    }

    /// The direct exchange's send inside group `g` from member `i` to member `j`: where the
    /// shape offloads ([`Shape::offload`]) and `j` is the next member, its last chunks (all
    /// but one at most) go through the NICs as a second transfer. Returns the transfers.
    fn exchange(
        &mut self,
        g: usize,
        (i, j): (usize, usize),
        mut chunks: Vec<ChunkId>,
        mode: RecvMode,
        after: Vec<TransferId>,
    ) -> Vec<TransferId> {
        let k = self.layout.k;
        match self.offload {
            Some((routes, c))
                if j == (i + 1) % k
                    && (self.piece == 0 || self.piece + 1 == self.pieces)
                    && chunks.len() > 1 =>
            {
                // A send that moves the group's own block beside the rails carries fewer
                // chunks than a shard: all but one of them go through the NICs.
                let c = c.min(chunks.len() - 1);
                let members = &self.groups.members[g];
                let through = chunks.split_off(chunks.len() - c);
                let route = routes[g][i].as_slice();
                let what = Move::data(members[i], members[j], route, through, mode);
                let nic = self.push(what, after.clone());
                vec![self.inner(g, i, j, chunks, mode, after), nic]
            }
            _ => vec![self.inner(g, i, j, chunks, mode, after)],
        }
    }

    /// Every transfer of piece `p` for `collective`.
    fn piece(&mut self, p: usize, collective: Collective) {
        match (collective, self.root) {
            (Collective::Broadcast { .. }, Some(root)) => return self.broadcast(p, root),
            (Collective::Reduce { .. }, Some(root)) => return self.reduce(p, root),
            _ => {}
        }
        let (k, gc) = (self.layout.k, self.layout.g);
        // ready[g][i]: what member i of group g waits for before its next phase; held[g][i]:
        // before it holds, complete, the block of its shard that ends on its group.
        let mut ready: Vec<Vec<Vec<TransferId>>> = vec![vec![Vec::new(); k]; gc];
        let mut held = ready.clone();
        if collective != Collective::AllGather {
            let mut own = ready.clone();
            for g in 0..gc {
                (ready[g], own[g]) = self.group_reduce_scatter(p, g);
            }
            let railed = self.rails(p, &ready, RecvMode::Reduce);
            // A member holds its block of the group's own block complete once every rail
            // transfer into it landed and, inside the group, its part of that block (where it
            // went beside the rails) or the whole reduce-scatter into it.
            let inside = if self.beside.scatter { own } else { ready };
            ready = railed
                .iter()
                .zip(&inside)
                .map(|(a, b)| join(a, b))
                .collect();
            held = ready.clone();
        }
        if collective != Collective::ReduceScatter {
            let gathered = self.rails(p, &ready, RecvMode::Store);
            for (g, r) in gathered.iter().enumerate() {
                // The allgather inside starts once every rail transfer into the member landed.
                let start = join(r, &ready[g]);
                self.group_allgather(p, g, (&held[g], start));
            }
        }
    }

    /// Piece `p` of a broadcast from member `ri` of group `r`: the root sends each member of its
    /// group that member's shard, the shards pass along the rails from group `r` on, and every
    /// group's members send each other their shards. In the root's group the root's own shard
    /// goes out chunk by chunk, each chunk to one other member in turn, who passes it to the
    /// rest: so the root sends each byte of the piece once over its link into the group, not
    /// its own shard `k - 1` times.
    fn broadcast(&mut self, p: usize, (r, ri): (usize, usize)) {
        let k = self.layout.k;
        let mut landed: Vec<Vec<Vec<TransferId>>> = vec![vec![Vec::new(); k]; self.groups.count()];
        for i in (0..k).filter(|&i| i != ri) {
            let chunks = self.layout.shards(p, &[i]);
            landed[r][i] = vec![self.inner(r, ri, i, chunks, RecvMode::Store, Vec::new())];
        }
        let arrived = match self.along {
            Along::Ring => self.chain(p, r, &landed, RecvMode::Store),
            Along::Rounds(_) => self.spread(p, r, &landed),
        };
        for (g, arrived) in arrived {
            landed[g] = arrived;
        }
        for (g, landed) in landed.into_iter().enumerate() {
            for (i, after) in landed
                .into_iter()
                .enumerate()
                .filter(|&(i, _)| (g, i) != (r, ri))
            {
                let to: Vec<usize> = (0..k).filter(|&j| j != i && (g, j) != (r, ri)).collect();
                for j in to {
                    let chunks = self.layout.shards(p, &[i]);
                    self.inner(g, i, j, chunks, RecvMode::Store, after.clone());
                }
            }
        }
        let others: Vec<usize> = (0..k).filter(|&i| i != ri).collect();
        for (chunk, via) in self.in_turn(p, ri, &others) {
            let slice = vec![chunk];
            let first = self.inner(r, ri, via, slice.clone(), RecvMode::Store, Vec::new());
            for &j in others.iter().filter(|&&j| j != via) {
                self.inner(r, via, j, slice.clone(), RecvMode::Store, vec![first]);
            }
        }
    }

    /// Piece `p` of a reduce to member `ri` of group `r`: every group reduce-scatters its
    /// shards, the shards are reduced along the rails from the group after `r` around to `r`,
    /// and each member of group `r` sends the root its shard. In the root's group the root's
    /// own shard is reduced chunk by chunk at one other member in turn, which sends the root
    /// the chunk: so the root takes in each byte of the piece once over its link from the
    /// group, not its own shard `k - 1` times.
    fn reduce(&mut self, p: usize, (r, ri): (usize, usize)) {
        let (k, gc) = (self.layout.k, self.groups.count());
        let mut done: Vec<Vec<Vec<TransferId>>> = vec![vec![Vec::new(); k]; gc];
        for (g, done) in done.iter_mut().enumerate() {
            for (i, done) in done
                .iter_mut()
                .enumerate()
                .filter(|&(i, _)| (g, i) != (r, ri))
            {
                for j in (0..k).filter(|&j| j != i) {
                    let chunks = self.layout.shards(p, &[i]);
                    done.push(self.inner(g, j, i, chunks, RecvMode::Reduce, Vec::new()));
                }
            }
        }
        let others: Vec<usize> = (0..k).filter(|&i| i != ri).collect();
        for (chunk, via) in self.in_turn(p, ri, &others) {
            let slice = vec![chunk];
            let gathered: Vec<TransferId> = others
                .iter()
                .filter(|&&j| j != via)
                .map(|&j| self.inner(r, j, via, slice.clone(), RecvMode::Reduce, Vec::new()))
                .collect();
            let last = self.inner(r, via, ri, slice, RecvMode::Reduce, gathered);
            done[r][ri].push(last);
        }
        let arrived = match self.along {
            Along::Ring => self.chain(p, (r + 1) % gc, &done, RecvMode::Reduce),
            Along::Rounds(_) => self.gather(p, r, &done),
        };
        for (g, arrived) in arrived {
            for (done, arrived) in done[g].iter_mut().zip(arrived) {
                done.extend(arrived);
            }
        }
        for (i, after) in std::mem::take(&mut done[r]).into_iter().enumerate() {
            if i != ri {
                let chunks = self.layout.shards(p, &[i]);
                self.inner(r, i, ri, chunks, RecvMode::Store, after);
            }
        }
    }

    /// Shard `i` of piece `p` as group `g`'s direct exchange sends it: the block that group `g`
    /// ends with and the rest, apart where that block crosses the fabric `beside` the rails
    /// ([`Shape::beside`]); else nothing and the whole shard.
    fn apart(&self, p: usize, i: usize, g: usize, beside: bool) -> (Vec<ChunkId>, Vec<ChunkId>) {
        let shard = self.layout.shards(p, &[i]);
        if beside {
            shard.into_iter().partition(|&c| self.layout.block(c) == g)
        } else {
            (Vec::new(), shard)
        }
    }

    /// The chunks of piece `p`'s shard `ri` (the root's own), each with the member of `others`
    /// that passes it on (a reduce: combines it), in turn.
    fn in_turn(&self, p: usize, ri: usize, others: &[usize]) -> Vec<(ChunkId, usize)> {
        let chunks = self.layout.shards(p, &[ri]);
        let turns = others.iter().copied().cycle();
        chunks.into_iter().zip(turns).collect()
    }

    /// A transfer along rail `i` from group `from` to group `to`, over the direct exchange's
    /// route between them.
    fn across(
        &mut self,
        (from, to): (usize, usize),
        i: usize,
        chunks: Vec<ChunkId>,
        (mode, after): (RecvMode, Vec<TransferId>),
    ) -> TransferId {
        let gc = self.groups.count();
        let route = match self.along {
            Along::Rounds(rounds) => rounds
                .first()
                .and_then(|round| round.routes.get((to + gc - from) % gc - 1))
                .and_then(|routes| routes.get(from)?.get(i))
                .map_or(&[][..], Vec::as_slice),
            Along::Ring => &[][..],
        };
        let what = Move::data(
            self.groups.members[from][i],
            self.groups.members[to][i],
            route,
            chunks,
            mode,
        );
        self.push(what, after)
    }

    /// Piece `p`'s shards scattered from group `r` along every rail, slice by slice: member `i`
    /// of group `r` sends block `b` of shard `i` to member `i` of the `b`-th group after `r`
    /// once `after[r][i]` landed, and that member sends it on to member `i` of every other
    /// group but `r`. Returns, for every group but `r`, per member, the transfers into it.
    fn spread(
        &mut self,
        p: usize,
        r: usize,
        after: &[Vec<Vec<TransferId>>],
    ) -> Vec<(usize, Vec<Vec<TransferId>>)> {
        let (k, gc, m) = (self.layout.k, self.groups.count(), self.layout.m);
        let mut into: Vec<Vec<Vec<TransferId>>> = vec![vec![Vec::new(); k]; gc];
        let other = |b: usize| (r + 1 + b) % gc;
        for i in 0..k {
            for b in 0..gc - 1 {
                for s in 0..m {
                    let slice = vec![self.layout.chunk(p, i, b, s)];
                    let waits = after[r][i].clone();
                    let first =
                        self.across((r, other(b)), i, slice.clone(), (RecvMode::Store, waits));
                    into[other(b)][i].push(first);
                    for c in (0..gc - 1).filter(|&c| c != b) {
                        let next = (RecvMode::Store, vec![first]);
                        let id = self.across((other(b), other(c)), i, slice.clone(), next);
                        into[other(c)][i].push(id);
                    }
                }
            }
        }
        into.into_iter()
            .enumerate()
            .filter(|&(g, _)| g != r)
            .collect()
    }

    /// [`Builder::spread`] backwards, reducing: member `i` of the `b`-th group after `r` takes
    /// in block `b` of shard `i` from member `i` of every other group but `r`, each once
    /// `done[·][i]` landed there, and sends it, reduced, to member `i` of group `r`. Returns
    /// group `r`, per member, the transfers into it.
    fn gather(
        &mut self,
        p: usize,
        r: usize,
        done: &[Vec<Vec<TransferId>>],
    ) -> Vec<(usize, Vec<Vec<TransferId>>)> {
        let (k, gc, m) = (self.layout.k, self.groups.count(), self.layout.m);
        let mut into: Vec<Vec<TransferId>> = vec![Vec::new(); k];
        let other = |b: usize| (r + 1 + b) % gc;
        for (i, into) in into.iter_mut().enumerate() {
            for b in 0..gc - 1 {
                for s in 0..m {
                    let slice = vec![self.layout.chunk(p, i, b, s)];
                    let mut waits = done[other(b)][i].clone();
                    for c in (0..gc - 1).filter(|&c| c != b) {
                        let sent = (RecvMode::Reduce, done[other(c)][i].clone());
                        waits.push(self.across((other(c), other(b)), i, slice.clone(), sent));
                    }
                    into.push(self.across((other(b), r), i, slice, (RecvMode::Reduce, waits)));
                }
            }
        }
        vec![(r, into)]
    }

    /// Piece `p`'s shards passed along every rail, slice by slice, from group `from` around
    /// the ring to the group before it: member `i` of each group sends each slice of shard `i`
    /// on once it holds it (`after[g][i]` landed, and the slice from the group before),
    /// storing or reducing it (`mode`). Returns, for every group but `from`, per member, the
    /// transfers into it.
    fn chain(
        &mut self,
        p: usize,
        from: usize,
        after: &[Vec<Vec<TransferId>>],
        mode: RecvMode,
    ) -> Vec<(usize, Vec<Vec<TransferId>>)> {
        let (k, gc, m) = (self.layout.k, self.groups.count(), self.layout.m);
        let mut into: Vec<Vec<Vec<TransferId>>> = vec![vec![Vec::new(); k]; gc];
        for i in 0..k {
            for s in 0..m {
                let mut before: Vec<TransferId> = Vec::new();
                for hop in 0..gc - 1 {
                    let g = (from + hop) % gc;
                    let to = (g + 1) % gc;
                    let what = Move::data(
                        self.groups.members[g][i],
                        self.groups.members[to][i],
                        self.groups.rail[g][i].as_slice(),
                        vec![self.layout.chunk(p, i, 0, s)],
                        mode,
                    );
                    let waits = after[g][i].iter().chain(&before).copied().collect();
                    let id = self.push(what, waits);
                    into[to][i].push(id);
                    before = vec![id];
                }
            }
        }
        into.into_iter()
            .enumerate()
            .filter(|&(g, _)| g != from)
            .collect()
    }

    /// Reduce-scatter of piece `p`'s shards inside group `g`; returns, per member, the
    /// transfers that complete its shard.
    fn group_reduce_scatter(
        &mut self,
        p: usize,
        g: usize,
    ) -> (Vec<Vec<TransferId>>, Vec<Vec<TransferId>>) {
        let k = self.layout.k;
        let mut last: Vec<Vec<TransferId>> = vec![Vec::new(); k];
        let mut own = last.clone();
        if self.inside == Inside::Direct {
            // Member i sends shard j to member j; shard j is complete once all have landed.
            // Beside the rails ([`Shape::beside`]), the block that group g ends with, which
            // the rails only bring into j, goes a step after the blocks that go on along them
            // (ranked a step later and held to it: placed as early as the links allow, it would
            // share the blocks' step and delay the rails).
            for i in 0..k {
                for j in (0..k).filter(|&j| j != i) {
                    let (ends, rest) = self.apart(p, j, g, self.beside.scatter);
                    let mode = RecvMode::Reduce;
                    let sent = self.exchange(g, (i, j), rest, mode, Vec::new());
                    last[j].extend(sent);
                    if !ends.is_empty() {
                        let first = self.transfers.len();
                        let sent = self.exchange(g, (i, j), ends, mode, Vec::new());
                        self.transfers
                            .iter_mut()
                            .skip(first)
                            .for_each(|t| t.rank = 1);
                        own[j].extend(sent);
                    }
                }
            }
        } else if self.inside == Inside::Halving {
            // Recursive halving, high bit first: member i keeps the shards that agree with it
            // on the bit and sends the others to its partner. What it sends holds every
            // earlier round's contribution, so it waits for all of them, not only the last
            // round's (that one's sender waited for its own, not for i's); and its shard is
            // complete once every round's has landed.
            let mut held: Vec<Vec<usize>> = vec![(0..k).collect(); k];
            for bit in (0..k.trailing_zeros()).rev() {
                let mut into = vec![Vec::new(); k];
                for i in 0..k {
                    let j = i ^ (1 << bit);
                    let send: Vec<usize> = held[i]
                        .iter()
                        .copied()
                        .filter(|s| (s >> bit) & 1 == (j >> bit) & 1)
                        .collect();
                    let chunks = self.layout.shards(p, &send);
                    into[j] = vec![self.inner(g, i, j, chunks, RecvMode::Reduce, last[i].clone())];
                }
                for (i, h) in held.iter_mut().enumerate() {
                    h.retain(|s| (s >> bit) & 1 == (i >> bit) & 1);
                }
                for (got, new) in last.iter_mut().zip(into) {
                    got.extend(new);
                }
            }
        } else {
            // A ring: in step t member i sends shard i - t - 1 to member i + 1.
            for t in 0..k - 1 {
                let mut into = vec![Vec::new(); k];
                for (i, after) in last.iter().enumerate() {
                    let j = (i + 1) % k;
                    let shard = (i + 2 * k - t - 1) % k;
                    let chunks = self.layout.shards(p, &[shard]);
                    into[j] = vec![self.inner(g, i, j, chunks, RecvMode::Reduce, after.clone())];
                }
                last = into;
            }
        }
        (last, own)
    }

    /// Allgather of piece `p`'s shards inside group `g`, member `i` starting once `start[i]`
    /// landed; in a direct exchange, the block of its shard that ends on group `g` once
    /// `held[i]` landed, before the rails bring the others.
    fn group_allgather(
        &mut self,
        p: usize,
        g: usize,
        (held, start): (&[Vec<TransferId>], Vec<Vec<TransferId>>),
    ) {
        let k = self.layout.k;
        let mut last = start;
        if self.inside == Inside::Direct {
            // Member i sends its shard to every other member once every rail transfer into it
            // landed; or, beside the rails ([`Shape::beside`]), the block its own group ends
            // with (of an allgather, its input; of an allreduce, reduced along the rails) as
            // soon as it holds it, and the rest after the rails.
            for (i, start) in last.iter().enumerate() {
                let (own, rest) = self.apart(p, i, g, self.beside.gather);
                let after = held.get(i).cloned().unwrap_or_default();
                for j in (0..k).filter(|&j| j != i) {
                    if !own.is_empty() {
                        self.exchange(g, (i, j), own.clone(), RecvMode::Store, after.clone());
                    }
                    self.exchange(g, (i, j), rest.clone(), RecvMode::Store, start.clone());
                }
            }
        } else if self.inside == Inside::Halving {
            // Recursive doubling, low bit first: partners swap everything they hold, so a
            // member's send waits for its start and every earlier round's arrival.
            let mut held: Vec<Vec<usize>> = (0..k).map(|i| vec![i]).collect();
            for bit in 0..k.trailing_zeros() {
                let mut into = vec![Vec::new(); k];
                for i in 0..k {
                    let j = i ^ (1 << bit);
                    let chunks = self.layout.shards(p, &held[i]);
                    into[j] = vec![self.inner(g, i, j, chunks, RecvMode::Store, last[i].clone())];
                }
                let before = held.clone();
                for (i, h) in held.iter_mut().enumerate() {
                    h.extend(&before[i ^ (1 << bit)]);
                    h.sort_unstable();
                }
                for (got, new) in last.iter_mut().zip(into) {
                    got.extend(new);
                }
            }
        } else {
            // A ring: in step t member i sends shard i - t to member i + 1.
            for t in 0..k - 1 {
                let mut into = vec![Vec::new(); k];
                for (i, after) in last.iter().enumerate() {
                    let j = (i + 1) % k;
                    let shard = (i + k - t) % k;
                    let chunks = self.layout.shards(p, &[shard]);
                    into[j] = vec![self.inner(g, i, j, chunks, RecvMode::Store, after.clone())];
                }
                last = into;
            }
        }
    }

    /// The transfers along every rail for piece `p`: by halving and doubling between partner
    /// groups when the builder has their routes, else by a ring.
    fn rails(
        &mut self,
        p: usize,
        start: &[Vec<Vec<TransferId>>],
        mode: RecvMode,
    ) -> Vec<Vec<Vec<TransferId>>> {
        match self.along {
            Along::Ring => self.rail_ring(p, start, mode),
            Along::Rounds(rounds) => self.rail_rounds(p, start, mode, rounds),
        }
    }

    /// Exchanges along every rail over piece `p`'s shards, slice by slice, in `rounds`: a
    /// reduce-scatter (`Reduce`: group `g` ends with block `g`), the digit of the largest
    /// stride first, each group giving every peer of the round the blocks held that agree
    /// with that peer on the round's digit; or an allgather (`Store`: group `g` starts with
    /// block `g`), the smallest stride first, each group sending its peers everything held.
    /// Halving and doubling (radix 2, high bit first) and a direct exchange (one round of
    /// radix `G`) are its cases. Member `i` of group `g` starts once `start[g][i]` landed,
    /// and each round waits for every earlier round's transfers into it (what it sends holds
    /// their contributions). Returns, per group and member, every transfer into it: a block is
    /// complete only when every round's part of it has landed.
    fn rail_rounds(
        &mut self,
        p: usize,
        start: &[Vec<Vec<TransferId>>],
        mode: RecvMode,
        rounds: &[Round<'_>],
    ) -> Vec<Vec<Vec<TransferId>>> {
        let (k, gc, m) = (self.layout.k, self.layout.g, self.layout.m);
        let reduce = mode == RecvMode::Reduce;
        let mut order: Vec<&Round<'_>> = rounds.iter().collect();
        order.sort_by_key(|r| r.stride);
        if reduce {
            order.reverse();
        }
        let mut into_all: Vec<Vec<Vec<TransferId>>> = vec![vec![Vec::new(); k]; gc];
        for i in 0..k {
            for s in 0..m {
                let mut held: Vec<Vec<usize>> = if reduce {
                    vec![(0..gc).collect(); gc]
                } else {
                    (0..gc).map(|g| vec![g]).collect()
                };
                // Every transfer into each group so far.
                let mut got: Vec<Vec<TransferId>> = vec![Vec::new(); gc];
                let layout = self.layout;
                for round in &order {
                    let mut into = Vec::new();
                    for (d, routes) in round.routes.iter().enumerate() {
                        for g in 0..gc {
                            let to = round.peer(g, d + 1);
                            let blocks = held[g]
                                .iter()
                                .filter(|&&b| !reduce || round.digit(b) == round.digit(to));
                            let chunks: Vec<ChunkId> =
                                blocks.map(|&b| layout.chunk(p, i, b, s)).collect();
                            let what = Move::data(
                                self.groups.members[g][i],
                                self.groups.members[to][i],
                                routes[g][i].as_slice(),
                                chunks,
                                mode,
                            );
                            let after = start[g][i].iter().chain(&got[g]).copied().collect();
                            let id = self.push(what, after);
                            into.push((to, id));
                            into_all[to][i].push(id);
                        }
                    }
                    for (to, id) in into {
                        got[to].push(id);
                    }
                    let before = held.clone();
                    for (g, h) in held.iter_mut().enumerate() {
                        if reduce {
                            h.retain(|&b| round.digit(b) == round.digit(g));
                        } else {
                            for d in 1..round.radix {
                                h.extend(&before[round.peer(g, d)]);
                            }
                            h.sort_unstable();
                        }
                    }
                }
            }
        }
        into_all
    }

    /// A ring along every rail over piece `p`'s shards, slice by slice: reduce-scatter of the
    /// blocks (`Reduce`: group `g` ends with block `g`) or allgather (`Store`: group `g`
    /// starts with block `g`). Member `i` of group `g` starts once `start[g][i]` landed.
    /// Returns, per group and member, every transfer into it.
    fn rail_ring(
        &mut self,
        p: usize,
        start: &[Vec<Vec<TransferId>>],
        mode: RecvMode,
    ) -> Vec<Vec<Vec<TransferId>>> {
        let (k, gc, m) = (self.layout.k, self.layout.g, self.layout.m);
        let mut into_all: Vec<Vec<Vec<TransferId>>> = vec![vec![Vec::new(); k]; gc];
        // The reduce-scatter's step u sends block g - u - 1, the allgather's block g - u.
        let reduce = mode == RecvMode::Reduce;
        let lag = usize::from(reduce);
        for i in 0..k {
            for s in 0..m {
                let mut last: Vec<Vec<TransferId>> = vec![Vec::new(); gc];
                for u in 0..gc - 1 {
                    let mut into = vec![Vec::new(); gc];
                    for g in 0..gc {
                        let to = (g + 1) % gc;
                        let block = (g + 2 * gc - u - lag) % gc;
                        let what = Move::data(
                            self.groups.members[g][i],
                            self.groups.members[to][i],
                            self.groups.rail[g][i].as_slice(),
                            vec![self.layout.chunk(p, i, block, s)],
                            mode,
                        );
                        // The sender's own part must be complete, and what it forwards landed.
                        let after = start[g][i].iter().chain(&last[g]).copied().collect();
                        let id = self.push(what, after);
                        into[to] = vec![id];
                        // A reduce-scatter completes a block with its last step only.
                        if !reduce || u == gc - 2 {
                            into_all[to][i].push(id);
                        }
                    }
                    last = into;
                }
            }
        }
        into_all
    }
}

#[cfg(test)]
#[allow(clippy::panic)]
mod tests {
    use super::*;
    use schedule_ir::DType;
    use std::collections::BTreeSet;

    /// `hosts` hosts of 4 ranks behind an NVSwitch-like host switch, a NIC per rank, under two
    /// leaves and two spines; each leaf–spine link has as many lanes as half the leaf's NICs,
    /// so that every NIC of a leaf can cross to the other leaf in the same step.
    fn fabric(hosts: u32) -> Machine {
        let lanes = hosts;
        crate::lower::testing::machine(&format!(
            r#"Topology(name: "f", machine: Fabric(hosts: {hosts}, ranks_per_host: 4,
            nics_per_host: 4, leaf_switches: 2, spines: 2,
            host_fabric: Switch(link: (bandwidth_gbps: 3600.0)),
            host_link: (bandwidth_gbps: 512.0), network_link: (bandwidth_gbps: 400.0),
            spine_link: (bandwidth_gbps: 3200.0, lanes: {lanes})))"#
        ))
    }

    /// An allreduce and its halves, which every rail shape lowers.
    const COLLECTIVES: [Collective; 3] = [
        Collective::AllReduce,
        Collective::ReduceScatter,
        Collective::AllGather,
    ];

    /// Every collective `hierarchical` lowers: [`COLLECTIVES`], a broadcast from member 1 of
    /// group 1 and a reduce to the last member of the last group.
    fn collectives(groups: &Groups) -> Vec<Collective> {
        let at = |g: usize, i: usize| groups.members[g][i];
        let last = groups.count() - 1;
        let mut all = COLLECTIVES.to_vec();
        all.push(Collective::Broadcast { root: at(1, 1) });
        all.push(Collective::Reduce {
            root: at(last, groups.size() - 1),
        });
        all
    }

    /// The floor that lets `auto` skip a shape is never above the estimate of the schedule the
    /// shape lowers to, under any lane policy (shared link directions included), for every
    /// collective and for vectors that do
    /// and do not divide evenly: on hosts with one lane per switch port and with seven.
    #[test]
    fn a_shapes_floor_is_never_above_its_estimate() {
        let seven = crate::lower::testing::machine(
            r#"Topology(name: "f", machine: Fabric(hosts: 2, ranks_per_host: 8,
            nics_per_host: 8, leaf_switches: 1,
            host_fabric: Switch(link: (bandwidth_gbps: 3600.0, latency_us: 0.5, lanes: 7)),
            host_link: (bandwidth_gbps: 512.0), network_link: (bandwidth_gbps: 400.0)))"#,
        );
        // The closest a floor comes to its estimate: a floor far below every estimate would
        // be sound and useless.
        let mut tightest: f64 = 0.0;
        let (mut sized, mut offloading, mut exchanging) = (0, 0, 0);
        for machine in [fabric(4), seven] {
            let groups = groups::find(&machine).unwrap_or_else(|e| panic!("{e}"));
            let routes = Routes::of(&machine, &groups, false);
            let ir = machine.to_ir();
            for collective in collectives(&groups) {
                for elements in [7, 3001, 1 << 22] {
                    let spec = crate::lower::testing::spec(collective, DType::F32, elements);
                    let shapes = candidates(&machine, (&groups, &routes), &spec, true);
                    offloading += shapes.iter().filter(|s| s.offload > 0).count();
                    exchanging += shapes.iter().filter(|s| s.rail == Rail::Direct).count();
                    for shape in shapes {
                        // Every policy, shared link directions too, under the floor that
                        // allows for them.
                        let both = (&groups, &routes);
                        let least = floor(&machine, both, &spec, shape, shares(shape, true));
                        for lanes in
                            lane_policies(shape, (groups.size(), groups.count()), true, true)
                        {
                            let Ok(mut scheduled) =
                                lower_shape(&machine, &groups, &routes, &spec, shape, lanes)
                            else {
                                continue;
                            };
                            // The floor holds of the pieces sized to the timetable too, and so
                            // does the least that sizing could reach.
                            let (even, reach) =
                                sizable(&machine, &groups, &spec, shape, &ir, &scheduled);
                            let resized =
                                resize(&machine, &groups, &spec, shape, &ir, &mut scheduled);
                            if let Some(resized) = resized {
                                sized += 1;
                                assert!(resized < even, "{shape:?}: {resized} ≥ {even}");
                                let reach = reach.unwrap_or_else(|| panic!("{shape:?}: no least"));
                                assert!(
                                    reach * (1.0 - FLOOR_ROUNDING) <= resized,
                                    "{shape:?}: least {reach} above {resized}"
                                );
                            }
                            let priced = scheduled.seconds(spec.dtype, &ir);
                            let phase = scheduled.phase(&spec, "hierarchical", &machine);
                            let estimate = schedule_ir::cost::estimate(&ir, &phase).seconds;
                            // The price the shapes are weighed by is the phase's estimate.
                            assert_eq!(priced.to_bits(), estimate.to_bits(), "{shape:?}");
                            assert_eq!(resized.unwrap_or(even).to_bits(), estimate.to_bits());
                            tightest = tightest.max(least / estimate);
                            assert!(
                                least * (1.0 - FLOOR_ROUNDING) <= estimate,
                                "{collective:?} × {elements}, {shape:?}, {lanes:?}: floor {least} above {estimate}"
                            );
                        }
                    }
                }
            }
        }
        assert!(
            tightest > 0.5,
            "the floors reach at most {tightest} of an estimate"
        );
        assert!(sized > 0, "no pipeline was sized");
        assert!(offloading > 0, "no shape sent through the NICs");
        assert!(
            exchanging > 0,
            "no shape exchanged directly along the rails"
        );
    }

    /// Every shape that halves or exchanges directly along the rails, for every collective the
    /// method lowers and a vector with fewer elements than chunks as well as one with several
    /// per chunk, verifies and runs against the reference.
    #[test]
    fn halving_and_direct_exchange_along_the_rails_verify_and_run() {
        for hosts in [4, 8] {
            let machine = fabric(hosts);
            let groups = groups::find(&machine).unwrap_or_else(|e| panic!("{e}"));
            let routes = Routes::of(&machine, &groups, false);
            assert!(routes.partners.is_some(), "{hosts} groups have partners");
            assert!(
                routes.exchange.is_some(),
                "{hosts} groups exchange directly"
            );
            for collective in COLLECTIVES {
                for elements in [7, 3001] {
                    let spec = crate::lower::testing::spec(collective, DType::I64, elements);
                    let large = crate::lower::testing::spec(collective, DType::I64, 1 << 20);
                    let shapes: Vec<Shape> = candidates(&machine, (&groups, &routes), &large, true)
                        .into_iter()
                        .filter(|s| s.rail != Rail::Ring && s.pieces <= 2)
                        .collect();
                    for rail in [Rail::Halving, Rail::Direct] {
                        assert!(shapes.iter().any(|s| s.rail == rail), "{rail:?}");
                    }
                    let lanes = [
                        dag::Lanes::Declared,
                        dag::Lanes::AtMost(1),
                        dag::Lanes::Shared(dag::SHARED_SENDS),
                    ];
                    for (shape, lanes) in shapes.into_iter().flat_map(|s| lanes.map(|l| (s, l))) {
                        let case = format!(
                            "{hosts} hosts, {collective:?} × {elements}, {shape:?}, {lanes:?}"
                        );
                        let shaped = (&routes, shape, lanes);
                        verifies_and_runs(&machine, &groups, &spec, shaped, &case);
                    }
                }
            }
        }
    }

    /// `spec` lowered with one shape (the routes beyond the groups, shape and lane policy),
    /// verified on its own and run bit-exact against the reference; `case` names it in a
    /// failure.
    fn verifies_and_runs(
        machine: &Machine,
        groups: &Groups,
        spec: &PhaseSpec,
        (routes, shape, lanes): (&Routes, Shape, dag::Lanes),
        case: &str,
    ) {
        let even = lower_shape(machine, groups, routes, spec, shape, lanes)
            .unwrap_or_else(|e| panic!("{case}: {e}"));
        // The same timetable with its pieces sized to it, where that prices lower.
        let mut sized = even.clone();
        let resized = resize(machine, groups, spec, shape, &machine.to_ir(), &mut sized);
        for scheduled in std::iter::once(even).chain(resized.map(|_| sized)) {
            let phase = scheduled.phase(spec, "hierarchical", machine);
            let schedule = schedule_ir::Schedule {
                format_version: schedule_ir::FORMAT_VERSION,
                machine: machine.to_ir(),
                program: Vec::new(),
                phases: vec![phase.clone()],
            };
            let verified = schedule_ir::verify(schedule).unwrap_or_else(|e| panic!("{case}: {e}"));
            let run = crate::trial::run_phase(&verified, &phase, 5)
                .unwrap_or_else(|e| panic!("{case}: {e}"));
            assert_eq!(run.mismatch, None, "{case}");
        }
    }

    /// Hosts of 8 ranks behind one NIC each: the rails into the members share that NIC, so
    /// they land at very different steps, and a member's halving or doubling round must wait
    /// for every earlier round's arrival, not only the last one's. Every shape of every
    /// collective verifies and runs bit-exact (this failed verification before, on
    /// allgather and allreduce with halving inside).
    #[test]
    fn members_sharing_one_nic_verify_under_every_shape() {
        let machine = crate::lower::testing::machine(
            r#"Topology(name: "f", machine: Fabric(hosts: 2, ranks_per_host: 8,
            host_fabric: Switch(link: (bandwidth_gbps: 2000.0))))"#,
        );
        let groups = groups::find(&machine).unwrap_or_else(|e| panic!("{e}"));
        let routes = Routes::of(&machine, &groups, false);
        for collective in collectives(&groups) {
            for elements in [8, 4099] {
                let spec = crate::lower::testing::spec(collective, DType::I64, elements);
                let large = crate::lower::testing::spec(collective, DType::I64, 1 << 20);
                for shape in candidates(&machine, (&groups, &routes), &large, true) {
                    for lanes in lane_policies(shape, (groups.size(), groups.count()), true, true) {
                        let case = format!("{collective:?} × {elements}, {shape:?}, {lanes:?}");
                        let shaped = (&routes, shape, lanes);
                        verifies_and_runs(&machine, &groups, &spec, shaped, &case);
                    }
                }
            }
        }
    }

    /// A broadcast or reduce passes each element along the rails once per group it reaches:
    /// from the first member of the first group, a middle member and the last member of the
    /// last group, every shape (chained and scattered along the rails) verifies and runs
    /// bit-exact, its rails carry `G - 1`
    /// vectors in all (a scatter then allgather along each rail would carry more), and the root
    /// sends (takes in) each element once over its links inside its group: its own shard goes
    /// out slice by slice through the other members, not `k - 1` times.
    #[test]
    fn broadcast_and_reduce_pass_each_element_along_the_rails_once() {
        let machine = fabric(4);
        let groups = groups::find(&machine).unwrap_or_else(|e| panic!("{e}"));
        let routes = Routes::of(&machine, &groups, false);
        let (k, gc) = (groups.size(), groups.count());
        let group: std::collections::HashMap<NodeId, usize> = groups
            .members
            .iter()
            .enumerate()
            .flat_map(|(g, members)| members.iter().map(move |&n| (n, g)))
            .collect();
        let elements = 4099;
        let mut checked = 0;
        for (g, i) in [(0, 0), (1, 2), (gc - 1, k - 1)] {
            let root = groups.members[g][i];
            for collective in [Collective::Broadcast { root }, Collective::Reduce { root }] {
                let spec = crate::lower::testing::spec(collective, DType::I64, elements);
                let shapes = candidates(&machine, (&groups, &routes), &spec, true);
                assert!(shapes
                    .iter()
                    .all(|s| s.rail.rooted() && s.inside == Inside::Direct));
                for rail in [Rail::Chain, Rail::Scatter] {
                    assert!(shapes.iter().any(|s| s.rail == rail), "no {rail:?}");
                }
                for shape in shapes.into_iter().filter(|s| s.pieces <= 3) {
                    for lanes in lane_policies(shape, (k, gc), true, true) {
                        let case = format!("{collective:?}, {shape:?}, {lanes:?}");
                        verifies_and_runs(&machine, &groups, &spec, (&routes, shape, lanes), &case);
                        let scheduled =
                            lower_shape(&machine, &groups, &routes, &spec, shape, lanes)
                                .unwrap_or_else(|e| panic!("{case}: {e}"));
                        let size = |t: &Transfer| -> u64 {
                            let chunk = |c: ChunkId| &scheduled.chunks[c.index()];
                            t.what
                                .chunks
                                .iter()
                                .map(|c| chunk(c).end - chunk(c).start)
                                .sum()
                        };
                        let along: u64 = scheduled
                            .transfers
                            .iter()
                            .filter(|t| group[&t.what.from] != group[&t.what.to])
                            .map(size)
                            .sum();
                        assert_eq!(along, (gc as u64 - 1) * elements, "{case}");
                        let at_root: u64 = scheduled
                            .transfers
                            .iter()
                            .filter(|t| group[&t.what.from] == group[&t.what.to])
                            .filter(|t| match collective {
                                Collective::Broadcast { .. } => t.what.from == root,
                                _ => t.what.to == root,
                            })
                            .map(size)
                            .sum();
                        assert_eq!(at_root, elements, "{case}");
                        checked += 1;
                    }
                }
            }
        }
        assert!(checked >= 6 * 4, "only {checked} schedules checked");
    }

    /// Halving along the rails takes `log2 G` rounds each way where the ring takes `G - 1`:
    /// with one piece, halving inside groups and one slice, 2 + 3 + 3 + 2 steps on 8 hosts of
    /// 4 against 2 + 7 + 7 + 2; a direct exchange inside the groups and along the rails, one
    /// step each, 1 + 1 + 1 + 1, where its link directions take a rail's `G - 1` sends.
    #[test]
    fn the_rails_take_log_g_rounds_halving_and_one_exchanging() {
        let machine = fabric(8);
        let groups = groups::find(&machine).unwrap_or_else(|e| panic!("{e}"));
        let routes = Routes::of(&machine, &groups, false);
        let spec = crate::lower::testing::spec(Collective::AllReduce, DType::F32, 1 << 12);
        let steps = |inside, rail, lanes| {
            let shape = Shape {
                pieces: 1,
                slices: 1,
                inside,
                rail,
                offload: 0,
                beside: Beside::NONE,
            };
            lower_shape(&machine, &groups, &routes, &spec, shape, lanes)
                .unwrap_or_else(|e| panic!("{e}"))
                .timetable
                .steps
        };
        let declared = dag::Lanes::Declared;
        assert_eq!(
            steps(Inside::Halving, Rail::Halving, declared),
            2 + 3 + 3 + 2
        );
        assert_eq!(steps(Inside::Halving, Rail::Ring, declared), 2 + 7 + 7 + 2);
        // A direct exchange's sends leave together where link directions are shared as its
        // lanes say: one step each way inside the groups and one each way along the rails. At
        // four sends per step a rail's seven take two.
        let exchange = rail_exchange_lanes(groups.count());
        assert_eq!(steps(Inside::Direct, Rail::Direct, exchange), 1 + 1 + 1 + 1);
        let four = dag::Lanes::Shared(dag::SHARED_SENDS);
        assert_eq!(steps(Inside::Direct, Rail::Direct, four), 1 + 2 + 2 + 1);
    }

    /// Beyond [`groups::MAX_EXCHANGE_GROUPS`] groups the rails exchange over a grid, or
    /// directly where the count is prime: 18 hosts as 3 × 6, two rounds each way (one step each where the sends share their link
    /// directions), `2 + 5` sends per member and half. Every collective of it verifies and runs
    /// bit-exact, equal pieces and sized, and no shape's floor is above its estimate.
    #[test]
    fn beyond_a_direct_exchange_the_rails_exchange_over_a_grid() {
        let machine = fabric(18);
        let groups = groups::find(&machine).unwrap_or_else(|e| panic!("{e}"));
        let routes = Routes::of(&machine, &groups, false);
        assert_eq!(groups::grid_digits(18), Some([(3, 1), (6, 3)]));
        assert!(routes.exchange.is_none(), "18 groups exchange directly");
        assert!(routes.grid.is_some(), "18 groups have no grid routes");
        // A prime count has no grid: its rails exchange directly, however many.
        let prime = fabric(17);
        let prime_groups = groups::find(&prime).unwrap_or_else(|e| panic!("{e}"));
        let prime_routes = Routes::of(&prime, &prime_groups, false);
        assert_eq!(groups::grid_digits(17), None);
        assert!(
            prime_routes.exchange.is_some(),
            "17 groups do not exchange directly"
        );
        assert!(prime_routes.grid.is_none(), "17 groups have a grid");
        let ir = machine.to_ir();
        let mut offloading = 0;
        for collective in COLLECTIVES {
            for elements in [7, 3001] {
                let spec = crate::lower::testing::spec(collective, DType::I64, elements);
                let large = crate::lower::testing::spec(collective, DType::I64, 1 << 20);
                let shapes: Vec<Shape> = candidates(&machine, (&groups, &routes), &large, true)
                    .into_iter()
                    .filter(|s| s.rail == Rail::Grid && s.pieces <= 2 && s.slices == 1)
                    .collect();
                assert!(!shapes.is_empty(), "no grid shape");
                offloading += shapes.iter().filter(|s| s.offload > 0).count();
                for shape in shapes {
                    let least = floor(&machine, (&groups, &routes), &spec, shape, true);
                    for lanes in lane_policies(shape, (groups.size(), groups.count()), true, true) {
                        let case = format!("{collective:?} × {elements}, {shape:?}, {lanes:?}");
                        verifies_and_runs(&machine, &groups, &spec, (&routes, shape, lanes), &case);
                        let scheduled =
                            lower_shape(&machine, &groups, &routes, &spec, shape, lanes)
                                .unwrap_or_else(|e| panic!("{case}: {e}"));
                        let estimate = scheduled.seconds(spec.dtype, &ir);
                        assert!(
                            least * (1.0 - FLOOR_ROUNDING) <= estimate,
                            "{case}: floor {least} above {estimate}"
                        );
                        if collective == Collective::AllReduce
                            && shape.pieces == 1
                            && shape.offload == 0
                        {
                            assert_eq!(scheduled.timetable.steps, 1 + 2 + 2 + 1, "{case}");
                            let sends = scheduled
                                .transfers
                                .iter()
                                .filter(|t| t.what.from == groups.members[0][0])
                                .count();
                            // Inside, three shards (each in two transfers where the block the
                            // group ends with goes beside the rails); along the grid, two and
                            // five blocks each way; inside again, three shards (two transfers
                            // each likewise).
                            let (scatter, gather) = (shape.beside.scatter, shape.beside.gather);
                            let inside = |apart: bool| 3 * (1 + usize::from(apart));
                            assert_eq!(
                                sends,
                                (inside(scatter) + 2 + 5) + (2 + 5 + inside(gather)),
                                "{case}"
                            );
                        }
                    }
                }
            }
        }
        assert!(offloading > 0, "no grid shape sent through the NICs");
    }

    /// Beyond [`groups::MAX_EXCHANGE_GROUPS`] groups, a broadcast or reduce still scatters
    /// along the rails (the routes between every two groups are searched for it, within the
    /// budget, while an allreduce exchanges over the grid): on 18 hosts its scattering shapes
    /// verify and run bit-exact, no floor is above its estimate, and at 4 MiB the cheapest
    /// prices below every chain along the rails, whose pipeline fills through 17 hosts.
    #[test]
    fn beyond_a_direct_exchange_a_broadcast_still_scatters_along_the_rails() {
        let machine = fabric(18);
        let groups = groups::find(&machine).unwrap_or_else(|e| panic!("{e}"));
        let routes = Routes::of(&machine, &groups, true);
        assert!(
            routes.exchange.is_some(),
            "no routes between every two groups"
        );
        let ir = machine.to_ir();
        for collective in collectives(&groups).into_iter().filter(|&c| has_root(c)) {
            let spec = crate::lower::testing::spec(collective, DType::I64, 3001);
            let large = crate::lower::testing::spec(collective, DType::F32, 1 << 20);
            let shapes = candidates(&machine, (&groups, &routes), &large, true);
            let cheapest = |rail: Rail| {
                let mut least = f64::INFINITY;
                for &shape in shapes.iter().filter(|s| s.rail == rail) {
                    for lanes in lane_policies(shape, (groups.size(), groups.count()), true, true) {
                        if let Ok(scheduled) =
                            lower_shape(&machine, &groups, &routes, &large, shape, lanes)
                        {
                            least = least.min(scheduled.seconds(large.dtype, &ir));
                        }
                    }
                }
                least
            };
            let (scattered, chained) = (cheapest(Rail::Scatter), cheapest(Rail::Chain));
            assert!(
                scattered < chained,
                "{collective:?}: scattered {scattered} against chained {chained}"
            );
            let scattering = shapes
                .iter()
                .filter(|s| s.rail == Rail::Scatter && s.pieces <= 2);
            for &shape in scattering {
                let least = floor(&machine, (&groups, &routes), &spec, shape, true);
                for lanes in lane_policies(shape, (groups.size(), groups.count()), true, true) {
                    let case = format!("{collective:?}, {shape:?}, {lanes:?}");
                    verifies_and_runs(&machine, &groups, &spec, (&routes, shape, lanes), &case);
                    let scheduled = lower_shape(&machine, &groups, &routes, &spec, shape, lanes)
                        .unwrap_or_else(|e| panic!("{case}: {e}"));
                    let estimate = scheduled.seconds(spec.dtype, &ir);
                    assert!(
                        least * (1.0 - FLOOR_ROUNDING) <= estimate,
                        "{case}: floor {least} above {estimate}"
                    );
                }
            }
        }
    }

    /// Two NVSwitch hosts of 8 GPUs with a 400 Gbit/s NIC per GPU under one leaf
    /// (`examples/nvswitch-2x8.ron`).
    fn nvswitch_pair() -> Machine {
        crate::lower::testing::machine(
            r#"Topology(name: "f", machine: Fabric(hosts: 2, ranks_per_host: 8,
            nics_per_host: 8, leaf_switches: 1,
            host_fabric: Switch(link: (bandwidth_gbps: 3600.0, latency_us: 0.5)),
            host_link: (bandwidth_gbps: 512.0, latency_us: 0.5),
            network_link: (bandwidth_gbps: 400.0)))"#,
        )
    }

    /// The block a group ends with crosses its fabric beside the rails: on two NVSwitch hosts
    /// of 8 GPUs with a NIC each, one piece of a reduce-scatter, which without it ends with a
    /// step of rail transfers alone, moves that block inside the hosts in the rails' step (an
    /// allgather's first step likewise), and prices lower at 4 MiB; every choice of an
    /// allreduce's halves verifies and runs bit-exact.
    #[test]
    fn the_groups_own_block_crosses_the_fabric_beside_the_rails() {
        let machine = nvswitch_pair();
        let groups = groups::find(&machine).unwrap_or_else(|e| panic!("{e}"));
        let routes = Routes::of(&machine, &groups, false);
        let ir = machine.to_ir();
        let group_of = |n: NodeId| groups.members.iter().position(|m| m.contains(&n));
        let lanes = dag::Lanes::Shared(dag::SHARED_SENDS);
        for collective in [Collective::ReduceScatter, Collective::AllGather] {
            let spec = crate::lower::testing::spec(collective, DType::F32, 1 << 20);
            let usual = Shape {
                pieces: 1,
                slices: 1,
                inside: Inside::Direct,
                rail: Rail::Ring,
                offload: 0,
                beside: Beside::usual(Inside::Direct, collective),
            };
            let none = Shape {
                beside: Beside::NONE,
                ..usual
            };
            // Whether every step that carries a rail transfer carries one inside a host too,
            // and the price.
            let lowered = |shape: Shape| {
                let scheduled = lower_shape(&machine, &groups, &routes, &spec, shape, lanes)
                    .unwrap_or_else(|e| panic!("{collective:?}, {shape:?}: {e}"));
                let steps = |rail: bool| -> BTreeSet<u32> {
                    let ids = scheduled.transfers.ids();
                    ids.filter(|&t| {
                        let what = &scheduled.transfers[t].what;
                        (group_of(what.from) != group_of(what.to)) == rail
                    })
                    .map(|t| scheduled.timetable.step[t])
                    .collect()
                };
                let beside = steps(true).is_subset(&steps(false));
                (beside, scheduled.seconds(spec.dtype, &ir))
            };
            let ((beside, with), (alone, without)) = (lowered(usual), lowered(none));
            assert!(
                beside,
                "{collective:?}: a rail step without a transfer inside a host"
            );
            assert!(
                !alone,
                "{collective:?}: every rail step moved data inside the hosts"
            );
            assert!(with < without, "{collective:?}: {with} ≥ {without}");
        }
        let spec = crate::lower::testing::spec(Collective::AllReduce, DType::I64, 3001);
        for beside in Beside::fewer(Collective::AllReduce) {
            let shape = Shape {
                pieces: 2,
                slices: 1,
                inside: Inside::Direct,
                rail: Rail::Ring,
                offload: 0,
                beside,
            };
            let case = format!("{shape:?}");
            verifies_and_runs(&machine, &groups, &spec, (&routes, shape, lanes), &case);
        }
        assert_eq!(Beside::fewer(Collective::AllReduce).count(), 3);
        assert_eq!(Beside::fewer(Collective::ReduceScatter).count(), 1);
    }

    /// Hosts whose switch (800 Gbit/s) is as fast as the links to their NICs (512): the NICs
    /// are found off the fabric, and a shape that moves the group's own block beside the rails
    /// still sends part of its exchange through them, though its sends then carry fewer
    /// chunks than its offload names (all but one go): it prices below its twin on the
    /// fabric alone, and every collective verifies and runs.
    #[test]
    fn sends_that_carry_the_own_block_beside_still_offload() {
        let machine = crate::lower::testing::machine(
            r#"Topology(name: "f", machine: Fabric(hosts: 4, ranks_per_host: 4,
            nics_per_host: 4, leaf_switches: 1,
            host_fabric: Switch(link: (bandwidth_gbps: 800.0, latency_us: 0.5)),
            host_link: (bandwidth_gbps: 512.0, latency_us: 0.5),
            network_link: (bandwidth_gbps: 400.0)))"#,
        );
        let groups = groups::find(&machine).unwrap_or_else(|e| panic!("{e}"));
        let routes = Routes::of(&machine, &groups, false);
        assert!(routes.offload.is_some(), "the NICs lead off the fabric");
        let ir = machine.to_ir();
        let spec = crate::lower::testing::spec(Collective::AllGather, DType::F32, 1 << 24);
        let plain = Shape {
            pieces: 1,
            slices: 1,
            inside: Inside::Direct,
            rail: Rail::Direct,
            offload: 0,
            beside: Beside::usual(Inside::Direct, spec.collective),
        };
        // A shard is 4 chunks; beside the rails, a send inside the group carries 3.
        let offloaded = Shape {
            offload: 3,
            ..plain
        };
        let lanes = dag::Lanes::Shared(dag::SHARED_SENDS);
        let priced = |shape: Shape| {
            let scheduled = lower_shape(&machine, &groups, &routes, &spec, shape, lanes)
                .unwrap_or_else(|e| panic!("{e}"));
            let phase = scheduled.phase(&spec, "hierarchical", &machine);
            schedule_ir::cost::estimate(&ir, &phase).seconds
        };
        let (without, with) = (priced(plain), priced(offloaded));
        assert!(
            with < 0.95 * without,
            "{with} s offloaded against {without} s"
        );
        for collective in COLLECTIVES {
            let spec = crate::lower::testing::spec(collective, DType::I64, 4099);
            let shape = Shape {
                beside: Beside::usual(Inside::Direct, collective),
                ..offloaded
            };
            let case = format!("{collective:?}, {shape:?}");
            verifies_and_runs(&machine, &groups, &spec, (&routes, shape, lanes), &case);
        }
    }

    /// Two NVSwitch hosts of 8 GPUs with a 400 Gbit/s NIC each (`examples/nvswitch-2x8.ron`):
    /// a schedule that keeps each host's own traffic on NVLink sends `1.75 V` over each GPU's
    /// port, at least `1.75 V / 450 GB/s` of moving bytes. With the end pieces' sends to the
    /// next GPU partly through the NICs, the same pipeline (6 pieces, shared link directions,
    /// sized) moves its bytes in less; every collective of it verifies and runs bit-exact.
    #[test]
    fn the_end_pieces_send_through_the_nics_beside_nvlink() {
        let machine = nvswitch_pair();
        let groups = groups::find(&machine).unwrap_or_else(|e| panic!("{e}"));
        let routes = Routes::of(&machine, &groups, false);
        let ir = machine.to_ir();
        let elements = 1u64 << 26;
        let spec = crate::lower::testing::spec(Collective::AllReduce, DType::F32, elements);
        let shapes = candidates(&machine, (&groups, &routes), &spec, true);
        let plain = Shape {
            pieces: 6,
            slices: 1,
            inside: Inside::Direct,
            rail: Rail::Ring,
            offload: 0,
            beside: Beside::NONE,
        };
        // 0.7 of a shard balances 7 shards on the port against the NIC: one chunk of two.
        let offloaded = Shape {
            offload: 1,
            ..plain
        };
        assert!(shapes.contains(&plain) && shapes.contains(&offloaded));
        let lanes = dag::Lanes::Shared(dag::SHARED_SENDS);
        // The estimate's time moving bytes: its steps' latencies left out.
        let priced = |shape: Shape| {
            let mut scheduled = lower_shape(&machine, &groups, &routes, &spec, shape, lanes)
                .unwrap_or_else(|e| panic!("{e}"));
            resize(&machine, &groups, &spec, shape, &ir, &mut scheduled);
            let phase = scheduled.phase(&spec, "hierarchical", &machine);
            let estimate = schedule_ir::cost::estimate(&ir, &phase);
            estimate.seconds - estimate.latency_seconds
        };
        let nvlink = 1.75 * (elements * 4) as f64 / 450e9;
        let (without, with) = (priced(plain), priced(offloaded));
        assert!(without > nvlink, "{without} ≤ {nvlink}");
        assert!(with < nvlink, "{with} ≥ {nvlink}");
        for collective in COLLECTIVES {
            let spec = crate::lower::testing::spec(collective, DType::I64, 4099);
            let case = format!("{collective:?}, {offloaded:?}");
            verifies_and_runs(&machine, &groups, &spec, (&routes, offloaded, lanes), &case);
        }
    }
}
