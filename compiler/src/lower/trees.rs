//! Collectives over packed spanning trees: every tree carries its share of the vector, cut into
//! pipeline chunks, and the transfers of all trees are list-scheduled together.
//!
//! # Per tree
//!
//! Tree `i` carries a contiguous share of the vector — its LP share ([`Packing::shares`])
//! rounded to `c_i` whole pipeline chunks ([`balance::apportion`]) — and where chunks have
//! owners each pipeline chunk is cut into one piece per compute node. All chunks have the same
//! size (to an element): a BSP step lasts as long as its largest transfer, so smaller chunks
//! would leave the links that carry them idle for the rest of the step. For every chunk:
//!
//! - **allreduce**: reduce toward the root — a node sends the chunk to its parent (which
//!   combines it into its own) once every child's contribution has arrived — then broadcast
//!   down from the root, each node storing what its parent sends once the parent has it;
//! - **reduce(root)**: the first half only, on trees rooted at `root`;
//! - **broadcast(root)**: the second half only, on trees rooted at `root`;
//! - **allgather**: each owner's piece floods the tree outward from its owner (the tree
//!   re-rooted at the owner, broadcast down): every link carries each piece once, in the
//!   direction away from its owner, which is the least any allgather can send;
//! - **reduce-scatter**: the mirror image: each piece is reduced toward its owner.
//!
//! The chunks of a tree flow as a pipeline: while one chunk climbs from the leaves another is
//! already nearer the root, so after the first chunk's *fill* (the tree's height, twice for
//! allreduce) a link can be busy in every step. All trees run at once; when two transfers want
//! the same link direction in one step, the [`dag`] list scheduler delays one.
//!
//! # How many pipeline chunks
//!
//! More chunks spread the fill and drain (steps where links idle) over more useful steps and
//! round the LP shares to whole chunks more finely; but every chunk adds a step on the busiest
//! link direction, and every step costs a link latency α. Which wins depends on the vector's
//! size, so the total `N` is chosen for the phase's size: the phase is lowered for `N = 1, 2,
//! 4, …` until two doublings in a row give no lower α-β estimate ([`schedule_ir::cost`]), then
//! for `N` a factor 2^±½, 2^±¼ and 2^±⅛ from the best so far, and the cheapest is kept. `N`
//! is at most [`max_transfers`] transfers' worth (large machines get shorter pipelines) and
//! at most one chunk per element. The schedule still runs at any size (the IR re-chunks it);
//! it is only tuned for the size compiled, and `topoc simulate` lowers it again per size.
//!
//! # Shared link directions
//!
//! A packing loads each link in proportion to its speed, but with one send per lane a fast
//! link carries no more pipeline chunks per step than a slow one. On machines whose links
//! differ in speed the packings are also priced with shared link directions
//! ([`dag::Lanes::Shared`], a phase of [`schedule_ir::LinkUse::Shared`]), and the cheapest
//! schedule under either rule is kept ([`lane_policies`]).

mod least;
mod walk;

use super::balance;
use super::dag::{self, DagError, Scheduled, Transfers};
use super::floor::Floor;
use super::{Embedding, Job, Lowered as Planned, Lowering, PhaseSpec, Unless};
use crate::embed::trees::{traffic, Packing};
use crate::embed::EmbedError;
use crate::ids::{IdVec, TreeId};
use crate::machine::Machine;
use least::Profile;
use schedule_ir::{BufferId, Chunk, ChunkId, Collective, DirectionId, NodeId};
use std::collections::BTreeSet;
use walk::{broadcast_down, reduce_up, Walk};

/// `trees`: collectives over spanning trees packed by an LP, pipelined.
pub struct Trees;

impl Lowering for Trees {
    fn supports(&self, collective: Collective) -> bool {
        supports(collective)
    }
    fn applies(&self, job: &Job<'_>) -> Result<Embedding, crate::embed::EmbedError> {
        let machine = job.machine;
        let packing = crate::embed::trees::pack(machine, Collective::AllReduce)?;
        Ok(Embedding {
            summary: format!(
                "{} spanning tree(s) for allreduce, proved",
                packing.trees.len()
            ),
            parts: packing
                .trees
                .iter_enumerated()
                .zip(&packing.shares)
                .map(|((i, t), x)| {
                    let n = i.index() + 1;
                    format!("tree {n}: {:.1}% {}", 100.0 * x, t.describe(machine))
                })
                .collect(),
        })
    }
    /// Machines past [`crate::limits::MAX_PLANNED_NODES`] are refused before the packing;
    /// below it, the larger of the generic estimate and the most the pipeline may hold: at
    /// most [`max_transfers`] transfers (every hop one) of one piece each. Packing the trees
    /// grows with the square of the compute nodes (about 7 s for 2048 in a release build):
    /// `512·p²` operations of planning, so that past about 1448 nodes `trees` is refused
    /// before it starts rather than keeping `auto` busy for seconds.
    fn estimate(&self, job: &Job<'_>) -> Result<crate::limits::Estimate, crate::embed::EmbedError> {
        let (machine, spec) = (job.machine, job.spec);
        super::check_planned(job.name, machine)?;
        let generic = crate::limits::Estimate::generic(machine);
        let pieces = pieces(machine, spec.collective) as u64;
        let chunks = most_chunks(machine, spec.collective, spec.elements) as u64 * pieces;
        let transfers = max_transfers(machine.compute_nodes().len()) as u64;
        let pipeline = crate::limits::Estimate::transfers(transfers, transfers, chunks, 2)
            .on(machine.compute_nodes().len())
            .in_steps(transfers);
        let mut estimate = if pipeline.bytes() > generic.bytes() {
            pipeline
        } else {
            generic
        };
        let p = machine.compute_nodes().len() as u64;
        estimate.planning = 512 * p * p;
        Ok(estimate)
    }
    fn floor(&self, job: &Job<'_>, base: &Floor) -> f64 {
        floor(job.machine, job.spec, base)
    }
    fn lower(&self, job: &Job<'_>) -> Result<Planned, EmbedError> {
        match lower_unless(job, None)? {
            Unless::Lowered(lowered) => Ok(*lowered),
            Unless::Outpriced(_) => Err(EmbedError::NotApplicable(
                "`trees` was asked to beat no schedule and declined".to_string(),
            )),
        }
    }
    /// Before searching any pipeline, the least bound of every depth on every packing
    /// ([`least::Profile::least`]), which sees what each depth pays to fill and drain: where
    /// `out` rules it out, nothing is scheduled.
    fn lower_unless(&self, job: &Job<'_>, out: &dyn Fn(f64) -> bool) -> Result<Unless, EmbedError> {
        lower_unless(job, Some(out))
    }
    fn declines(&self) -> bool {
        true
    }
    fn sized(&self) -> bool {
        true
    }
    fn searches(&self) -> bool {
        true
    }
}

/// [`Trees`]' lowering: the packings, then each one's pipeline depth, then the ranking rates on
/// the cheapest, then one breadth-first tree; unless `out` rules out the least bound of every
/// depth on every packing, which is then returned instead.
fn lower_unless(job: &Job<'_>, out: Option<&dyn Fn(f64) -> bool>) -> Result<Unless, EmbedError> {
    let (machine, spec) = (job.machine, job.spec);
    super::check_planned(job.name, machine)?;
    let failed =
        |e: DagError| EmbedError::NotApplicable(format!("scheduling the trees failed: {e}"));
    // The packings, and last one breadth-first tree, tried where its fewer levels beat them.
    let mut packings = crate::embed::trees::packings(machine, spec.collective)?;
    packings.push(crate::embed::trees::shallow(machine, spec.collective)?);
    let most = most_chunks(machine, spec.collective, spec.elements);
    let ir = machine.to_ir();
    // Every packing under every way of using the links: (packing, lanes, profile).
    let mut candidates: Vec<(usize, dag::Lanes, Profile)> = Vec::new();
    for (i, packing) in packings.iter().enumerate() {
        for lanes in lane_policies(machine) {
            match Profile::of(spec, (machine, &ir), packing, most, lanes) {
                Ok(profile) => candidates.push((i, lanes, profile)),
                // A route that crosses a direction more often than shared lanes allow.
                Err(_) if lanes != dag::Lanes::Declared => {}
                Err(e) => return Err(failed(e)),
            }
        }
    }
    if let Some(out) = out {
        // The depths 1, 2, 4, … first: where their least bound is not out, no least is, and
        // the depths between them need not be bounded.
        let least = |totals: &dyn Fn(&Profile) -> f64| {
            candidates
                .iter()
                .map(|(_, _, p)| totals(p))
                .fold(f64::INFINITY, f64::min)
        };
        if out(least(&|p| p.least_of(least::doublings(most)))) {
            let least = least(&|p| p.least(most));
            if out(least) {
                return Ok(Unless::Outpriced(least));
            }
        }
    }
    let search = |c: usize| {
        let (i, lanes, ref profile) = candidates[c];
        Search::new(spec, machine, &packings[i], profile, lanes)
    };
    let shallow = packings.len() - 1;
    // Every packing is lowered and priced with one send per lane; the cheapest schedule is
    // kept (the first on a tie), and the other ranking rates are tried on it.
    let mut best: Option<(f64, usize, Lowered)> = None;
    let deep = |c: &usize| candidates[*c].0 < shallow;
    let declared = |c: &usize| deep(c) && candidates[*c].1 == dag::Lanes::Declared;
    for c in (0..candidates.len()).filter(declared) {
        let from = best
            .as_ref()
            .map_or(1, |b| b.2.chunks_per_tree.iter().sum());
        let (seconds, _, lowered) = search(c).depth(from).map_err(failed)?;
        if best.as_ref().is_none_or(|b| seconds < b.0) {
            best = Some((seconds, c, lowered));
        }
    }
    let Some((seconds, mut index, lowered)) = best else {
        return Err(EmbedError::NotApplicable(
            "no tree packing was found".to_string(),
        ));
    };
    let from: usize = lowered.chunks_per_tree.iter().sum();
    let unranked = seconds;
    let mut best = search(index).ranked((seconds, lowered)).map_err(failed)?;
    // With shared link directions, whose depth searches go deep, every packing is priced at
    // the depth found and only the cheapest searched. Where it prices below the schedule
    // above before ranking, its ranking rates are tried too, and the cheaper of the two
    // ranked schedules is kept: never a dearer one than without sharing.
    let mut probed: Option<(f64, usize)> = None;
    for c in (0..candidates.len()).filter(|c| deep(c) && !declared(c)) {
        let probe = search(c);
        let (seconds, _, _) = probe
            .price(probe.build(from, RANK_RATES[0]))
            .map_err(failed)?;
        if probed.is_none_or(|p| seconds < p.0) {
            probed = Some((seconds, c));
        }
    }
    if let Some((_, c)) = probed {
        let shared = search(c);
        let (seconds, _, lowered) = shared.depth(from).map_err(failed)?;
        if seconds < unranked {
            let ranked = shared.ranked((seconds, lowered)).map_err(failed)?;
            if ranked.0 < best.0 {
                (best, index) = (ranked, c);
            }
        }
    }
    for c in (0..candidates.len()).filter(|&c| candidates[c].0 == shallow) {
        let deep = search(c);
        if let Some(found) = deep.depth_below(best.0).map_err(failed)? {
            best = deep.ranked((found.0, found.2)).map_err(failed)?;
            index = c;
        }
    }
    let (lowered, packing) = (best.2, &packings[candidates[index].0]);
    let total: usize = lowered.chunks_per_tree.iter().sum();
    let used: Vec<(&crate::embed::trees::Tree, usize)> = packing
        .trees
        .iter()
        .zip(lowered.chunks_per_tree.iter().copied())
        .filter(|&(_, c)| c > 0)
        .collect();
    Ok(Unless::Lowered(Box::new(Planned {
        rings: used
            .iter()
            .map(|(t, c)| format!("{c}/{total} of the vector, {}", t.describe(machine)))
            .collect(),
        trees: used.iter().map(|(t, _)| (*t).clone()).collect(),
        ..Planned::phase(lowered.scheduled.phase(spec, job.name, machine))
    })))
}

/// The ways `trees` may use the links: one send per lane and step, and where the machine's
/// links differ in speed also shared directions ([`dag::Lanes::Shared`]). A tree packing
/// loads each link in proportion to its speed, but one send per lane lets a fast link carry
/// only as many pipeline chunks per step as a slow one (or a batch of chunks on one route, and
/// chunks of different trees take different routes): fast links idle most of each step. With
/// shared directions every link carries its share of a step's time. Where every link is
/// about equally fast, sharing would only stack several chunks where one does, and is not
/// tried.
fn lane_policies(machine: &Machine) -> Vec<dag::Lanes> {
    if dag::links_differ(machine) {
        vec![dag::Lanes::Declared, dag::Lanes::Shared(dag::SHARED_SENDS)]
    } else {
        vec![dag::Lanes::Declared]
    }
}

/// How tightly the scheduler keeps pipeline chunks in order (see [`lower`]): chunk `q` is
/// ranked `⌊q · r · rate⌋`, `r` the busiest direction's chunks per pipeline chunk. 0 (order by
/// dependency depth only) lets early chunks' broadcasts starve behind later chunks' reductions
/// on ladders; 1 (strict pipeline order) leaves links idle on machines with links of different
/// speeds. The depth is searched at the first rate; the others are then tried at the depth
/// found, and the cheapest schedule is kept: which order fills a machine's links best depends
/// on the machine (on the 8 × 8 mesh 0.5, on a ladder of 13 pairs 0.125).
const RANK_RATES: [f64; 3] = [0.25, 0.125, 0.5];

/// The least relative gain for which the depth search keeps doubling the pipeline. Fill and
/// drain cost about `c / N` for `N` chunks, so once a doubling gains `g`, every further doubling
/// together gains about `g` more, while each costs twice the one before to schedule. Where
/// steps cost no latency every deeper pipeline is a little cheaper, and without a threshold the
/// search would double to the transfer cap (an 8-node broadcast to 16 384 chunks).
const DOUBLING_GAIN: f64 = 0.005;

/// The most transfers a phase's pipeline may grow to on a machine of at most 64 compute
/// nodes: at 256 MiB the 8 × 8 mesh's best depth, about 1 600 chunks, fits.
pub const MAX_TRANSFERS: usize = 200_000;

/// The fewest transfers the cap allows, whatever the machine's size.
const MIN_TRANSFERS: usize = 20_000;

/// The most transfers a phase's pipeline may grow to on a machine of `p` compute nodes: the
/// verifier's work and the schedule's size grow with transfers × nodes, so that product is
/// kept to what [`MAX_TRANSFERS`] costs on 64 nodes, and never below [`MIN_TRANSFERS`]
/// (large machines get shorter pipelines).
pub fn max_transfers(p: usize) -> usize {
    (64 * MAX_TRANSFERS / p.max(1)).clamp(MIN_TRANSFERS, MAX_TRANSFERS)
}

/// Whether [`lower`] can produce `collective`: trees lower every collective.
pub fn supports(_collective: Collective) -> bool {
    true
}

/// A lower bound on the estimate of the schedule [`Trees`] lowers, from the machine's shape
/// alone, without packing trees.
///
/// *Proof.* A tree edge is a direct link between compute nodes or a route through switches
/// only, so the tree distance of two compute nodes is at least their distance in hops
/// ([`hops`]: switches cost nothing, compute nodes one). Every pipeline chunk's transfers
/// follow dependency chains, and the scheduler puts a transfer in a step strictly after those it
/// depends on ([`dag`]), so a chain of `n` transfers occupies `n` distinct steps that send:
///
/// - allreduce: some tree carries a chunk; from its root `r`, a node `e(r)` hops away sends the
///   chunk up `e(r)` edges and gets the result back down as many, so at least twice the
///   machine's radius;
/// - reduce and broadcast: the trees hang from the root, so at least the root's eccentricity;
/// - allgather (reduce-scatter, its mirror): each owner's piece reaches every node (every
///   node's reaches its owner), so at least the diameter; and node `v` receives (sends) every
///   other owner's piece of every pipeline chunk, `p - 1` at least, while each link direction
///   at `v` takes at most `lanes × batch` of them per step (the scheduler's batching, bounded
///   by the machine's slowest lane; where `trees` may share link directions, what shared
///   lanes allow, [`dag::room`]).
///
/// Where `trees` may share link directions ([`lane_policies`]), a node may send any number of
/// transfers in a step, and the machine's latency bound keeps only its distance part
/// ([`Floor::shared`]).
///
/// Each of those steps carries at least one piece, of at least the smallest size the pipeline
/// may cut ([`most_chunks`] chunks at most), so it is busy for at least that over the fastest
/// link's bandwidth ([`Floor::in_steps_carrying`]).
fn floor(machine: &Machine, spec: &PhaseSpec, base: &Floor) -> f64 {
    let sharing = dag::links_differ(machine);
    let base = &if sharing { base.shared() } else { *base };
    let compute = machine.compute_nodes();
    if compute.len() < 2 || super::check_planned("trees", machine).is_err() {
        return base.seconds();
    }
    let far = eccentricities(machine, &compute);
    let steps = match spec.collective {
        Collective::AllReduce => 2 * far.iter().copied().min().unwrap_or(0),
        Collective::Broadcast { root } | Collective::Reduce { root } => compute
            .iter()
            .position(|&n| n == root)
            .map_or(0, |i| far[i]),
        Collective::AllGather | Collective::ReduceScatter => {
            let diameter = far.iter().copied().max().unwrap_or(0);
            diameter.max(by_count(machine, &compute, sharing))
        }
    };
    let pieces = pieces(machine, spec.collective) as u64;
    let most = most_chunks(machine, spec.collective, spec.elements) as u64;
    let piece = super::floor::least_chunk(spec.elements, most.saturating_mul(pieces)) as f64
        * spec.dtype.size_bytes() as f64;
    let fastest = super::floor::fastest_link(machine);
    base.in_steps_carrying(steps, super::floor::carrying(steps, piece, fastest))
}

/// Every compute node's eccentricity in hops ([`hops`]), in the order of `compute`; a node
/// that does not reach another counts only the ones it reaches (the packing refuses such a
/// machine anyway).
fn eccentricities(machine: &Machine, compute: &[NodeId]) -> Vec<u64> {
    let adjacent: Vec<Vec<NodeId>> = (0..machine.node_count())
        .map(|n| {
            machine
                .links_at(NodeId::new(n))
                .into_iter()
                .map(|(_, m)| m)
                .collect()
        })
        .collect();
    let mut distance = vec![u64::MAX; machine.node_count()];
    compute
        .iter()
        .map(|&from| {
            hops(machine, &adjacent, from, &mut distance);
            compute
                .iter()
                .filter_map(|n| distance.get(n.index()).copied())
                .filter(|&d| d != u64::MAX)
                .max()
                .unwrap_or(0)
        })
        .collect()
}

/// The hops from `from` to every node, into `distance`: entering a compute node costs one,
/// entering a switch nothing (a tree edge may be a route through switches). A 0-1 breadth-first
/// search.
fn hops(machine: &Machine, adjacent: &[Vec<NodeId>], from: NodeId, distance: &mut [u64]) {
    distance.fill(u64::MAX);
    let Some(start) = distance.get_mut(from.index()) else {
        return;
    };
    *start = 0;
    let mut queue = std::collections::VecDeque::from([from]);
    while let Some(u) = queue.pop_front() {
        let at = distance[u.index()];
        for &v in adjacent.get(u.index()).into_iter().flatten() {
            let free = machine.node(v).kind != schedule_ir::NodeKind::Compute;
            let d = at + u64::from(!free);
            if d < distance[v.index()] {
                distance[v.index()] = d;
                if free {
                    queue.push_front(v);
                } else {
                    queue.push_back(v);
                }
            }
        }
    }
}

/// The steps an allgather's (reduce-scatter's) pieces need at the busiest node: it receives
/// (sends) `p - 1` pieces at least, and each link direction at it takes at most
/// [`dag::room`] of them per step: under its declared lanes, or, where `sharing`, under shared
/// ones (which allow more).
fn by_count(machine: &Machine, compute: &[NodeId], sharing: bool) -> u64 {
    let lanes = if sharing {
        dag::Lanes::Shared(dag::SHARED_SENDS)
    } else {
        dag::Lanes::Declared
    };
    let slowest = dag::slowest_lane(machine);
    let per_step = |l: schedule_ir::LinkId| dag::room(machine, l, lanes, slowest);
    let others = compute.len().saturating_sub(1) as u64;
    compute
        .iter()
        .map(|&n| {
            let room: u64 = machine
                .links_at(n)
                .into_iter()
                .map(|(l, _)| per_step(l))
                .sum();
            others.div_ceil(room.max(1))
        })
        .max()
        .unwrap_or(0)
}

/// A pipeline list-scheduled, and how many pipeline chunks each tree of the packing carries (a
/// tree whose rounded share is zero carries none). The depth search schedules dozens of
/// candidates and prices each from its timetable; only the one kept is written into programs.
#[derive(Clone, Debug)]
pub struct Lowered {
    /// Pipeline chunks per tree of the packing.
    pub chunks_per_tree: IdVec<TreeId, usize>,
    /// The pipeline.
    pub scheduled: Scheduled,
}

/// Lowers `spec` onto the trees of `packing` on `machine`, searching the pipeline depth from
/// `from` chunks up (1 searches every depth; another packing's best depth is a good start for
/// a second one, as the depth depends mostly on the vector's size) at the first ranking rate
/// of [`RANK_RATES`] (the others are tried on the cheapest packing only, by [`Trees`]).
/// Returns the lowering and its α-β estimate in seconds.
pub fn lower(
    spec: &PhaseSpec,
    machine: &Machine,
    packing: &Packing,
    from: usize,
) -> Result<(f64, Lowered), DagError> {
    let most = most_chunks(machine, spec.collective, spec.elements);
    let lanes = dag::Lanes::Declared;
    let profile = Profile::of(spec, (machine, &machine.to_ir()), packing, most, lanes)?;
    let best = Search::new(spec, machine, packing, &profile, lanes).depth(from)?;
    Ok((best.0, best.2))
}

/// The search for a packing's pipeline: its depth, then its ranking rate.
struct Search<'a> {
    spec: &'a PhaseSpec,
    machine: &'a Machine,
    packing: &'a Packing,
    ir: schedule_ir::Machine,
    /// The most pipeline chunks ([`most_chunks`]).
    most: usize,
    /// What bounds every depth's estimate, so that depths that cannot win are never built.
    profile: &'a Profile,
    /// How many transfers a link direction takes per step.
    lanes: dag::Lanes,
}

impl<'a> Search<'a> {
    fn new(
        spec: &'a PhaseSpec,
        machine: &'a Machine,
        packing: &'a Packing,
        profile: &'a Profile,
        lanes: dag::Lanes,
    ) -> Search<'a> {
        Search {
            spec,
            machine,
            packing,
            ir: machine.to_ir(),
            most: most_chunks(machine, spec.collective, spec.elements),
            profile,
            lanes,
        }
    }

    /// The pipeline of `total` chunks ranked at `rate`: its counts per tree, chunks and
    /// transfers.
    fn build(&self, total: usize, rate: f64) -> Built {
        let counts: IdVec<TreeId, usize> = balance::apportion(total as u64, &self.packing.shares)
            .into_iter()
            .map(|c| c as usize)
            .collect();
        let (chunks, transfers) = pipeline(self.spec, self.machine, self.packing, &counts, rate);
        (total, counts, chunks, transfers)
    }

    /// Its estimate in seconds, total and lowering.
    fn price(&self, (total, counts, chunks, transfers): Built) -> Result<Priced, DagError> {
        let options = dag::Options {
            batching: dag::Batching::ByBandwidth,
            lanes: self.lanes,
            hold_to_rank: false,
        };
        let timetable = dag::schedule_with(self.machine, &transfers, options)?;
        let scheduled = Scheduled {
            chunks,
            transfers,
            timetable,
        };
        let seconds = scheduled.seconds(self.spec.dtype, &self.ir);
        let lowered = Lowered {
            chunks_per_tree: counts,
            scheduled,
        };
        Ok((seconds, total, lowered))
    }

    /// The pipeline of `total` chunks at `rate`, priced, unless its bound
    /// ([`Profile::bound`]) shows it cannot be below `beat`: then it is not even built.
    fn priced_below(&self, total: usize, rate: f64, beat: f64) -> Result<Option<Priced>, DagError> {
        if self.profile.bound(total) >= beat {
            return Ok(None);
        }
        self.price(self.build(total, rate)).map(Some)
    }

    /// `best`, or the pipeline of `total` chunks at `rate` where that prices lower.
    fn try_total(&self, best: &mut Priced, total: usize, rate: f64) -> Result<(), DagError> {
        if let Some(candidate) = self.priced_below(total, rate, best.0)? {
            if candidate.0 < best.0 {
                *best = candidate;
            }
        }
        Ok(())
    }

    /// The cheapest depth at the first ranking rate: doubling from `from` until two doublings
    /// in a row are no cheaper, then finer steps around the cheapest.
    fn depth(&self, from: usize) -> Result<Priced, DagError> {
        let start = from.clamp(1, self.most);
        let best = self.price(self.build(start, RANK_RATES[0]))?;
        self.deepen(best, BTreeSet::from([start]))
    }

    /// [`Search::depth`] from one chunk, keeping only depths priced below `beat` (another
    /// packing's cheapest): `None` when none is. A depth whose bound shows it cannot beat
    /// `beat` is not scheduled, so a packing that cannot win at this size costs little more
    /// than building its pipelines.
    fn depth_below(&self, beat: f64) -> Result<Option<Priced>, DagError> {
        let rate = RANK_RATES[0];
        let mut tried = BTreeSet::new();
        let mut total = 1;
        while tried.len() < 3 && total <= self.most {
            tried.insert(total);
            if let Some(first) = self.priced_below(total, rate, beat)? {
                if first.0 < beat {
                    return self.deepen(first, tried).map(Some);
                }
            }
            total *= 2;
        }
        Ok(None)
    }

    /// Doubling the depth from `best` until two doublings in a row (one, with shared link
    /// directions) gain less than [`DOUBLING_GAIN`], then finer steps around the cheapest;
    /// `tried` holds the depths already priced.
    fn deepen(&self, mut best: Priced, mut tried: BTreeSet<usize>) -> Result<Priced, DagError> {
        let rate = RANK_RATES[0];
        let (mut total, mut worse) = (best.1, 0);
        // With shared link directions the pipelines are deep and each costs more to schedule;
        // one doubling that gains too little ends the search there.
        let patience = if self.lanes == dag::Lanes::Declared {
            2
        } else {
            1
        };
        while worse < patience && total < self.most {
            total = (2 * total).min(self.most);
            tried.insert(total);
            let before = best.0;
            self.try_total(&mut best, total, rate)?;
            worse = if best.0 < before * (1.0 - DOUBLING_GAIN) {
                0
            } else {
                worse + 1
            };
        }
        self.refine(&mut best, rate, &mut tried)?;
        Ok(best)
    }

    /// Depths a factor 2^±½, 2^±¼ and 2^±⅛ from the cheapest so far, at `rate`, skipping
    /// those in `tried`.
    fn refine(
        &self,
        best: &mut Priced,
        rate: f64,
        tried: &mut BTreeSet<usize>,
    ) -> Result<(), DagError> {
        for ratio in [2f64.sqrt(), 2f64.powf(0.25), 2f64.powf(0.125)] {
            let at = best.1 as f64;
            for next in [at / ratio, at * ratio] {
                let next = (next.round() as usize).clamp(1, self.most);
                if tried.insert(next) {
                    self.try_total(best, next, rate)?;
                }
            }
        }
        Ok(())
    }

    /// [`Search::rates`] of a lowering priced at `seconds`.
    fn ranked(&self, (seconds, lowered): (f64, Lowered)) -> Result<Priced, DagError> {
        let total = lowered.chunks_per_tree.iter().sum();
        self.rates((seconds, total, lowered))
    }

    /// The other ranking rates, each at `best`'s depth; where one is cheaper, finer depth steps
    /// around it at that rate.
    fn rates(&self, mut best: Priced) -> Result<Priced, DagError> {
        for &rate in &RANK_RATES[1..] {
            let (before, total) = (best.0, best.1);
            self.try_total(&mut best, total, rate)?;
            if best.0 < before {
                let mut tried = BTreeSet::from([best.1]);
                self.refine(&mut best, rate, &mut tried)?;
            }
        }
        Ok(best)
    }
}

/// The most pipeline chunks a phase may have: within [`max_transfers`] transfers, and at
/// least one element per piece.
fn most_chunks(machine: &Machine, collective: Collective, elements: u64) -> usize {
    let pieces = pieces(machine, collective);
    let p = machine.compute_nodes().len();
    let hops = p.saturating_sub(1).max(1);
    let transfers_per_chunk = match collective {
        Collective::AllReduce => 2 * hops,
        _ => pieces * hops,
    };
    (max_transfers(p) / transfers_per_chunk)
        .min(usize::try_from(elements / pieces as u64).unwrap_or(usize::MAX))
        .max(1)
}

/// A pipeline built for one total of chunks: the total, the chunks per tree, the chunks and
/// the transfers ([`pipeline`]).
type Built = (usize, IdVec<TreeId, usize>, Vec<Chunk>, Transfers);

/// A pipeline scheduled: its estimate in seconds, its total of chunks and its lowering.
type Priced = (f64, usize, Lowered);

/// The chunks and transfers of `spec` with `counts[i]` pipeline chunks on tree `i` of
/// `packing`, before they are scheduled.
fn pipeline(
    spec: &PhaseSpec,
    machine: &Machine,
    packing: &Packing,
    counts: &IdVec<TreeId, usize>,
    rank_rate: f64,
) -> (Vec<Chunk>, Transfers) {
    let compute = machine.compute_nodes();
    let pieces = pieces(machine, spec.collective);
    let owned = matches!(
        spec.collective,
        Collective::AllGather | Collective::ReduceScatter
    );
    let total: usize = counts.iter().sum();

    // Chunks of one size, in vector order: tree, then pipeline chunk, then owner. Tree `i`'s
    // share is its whole number of chunks (its LP share rounded): a BSP step lasts as long as
    // its largest transfer, so unequal chunks would waste the links that carry the smaller.
    let chunks: Vec<Chunk> = super::even_chunks(spec.elements, total * pieces)
        .into_iter()
        .enumerate()
        .map(|(k, (start, end))| Chunk {
            start,
            end,
            owner: owned.then(|| compute[k % pieces]),
        })
        .collect();
    let mut first_chunk: IdVec<TreeId, usize> = IdVec::with_capacity(counts.len());
    let mut next = 0;
    for &c in counts {
        first_chunk.push(next);
        next += c * pieces;
    }
    let walks = Walks::of(machine, spec.collective, packing, |i| counts[i] > 0);

    // Transfers chunk by chunk, the trees' pipelines interleaved. Pipeline chunk `q` (in that
    // order) gets rank ⌊q · r · rank_rate⌋, `r` the chunks the busiest direction carries per pipeline
    // chunk: the scheduler then prefers earlier chunks over later ones, but only loosely, so
    // that a late chunk can fill a link that an early one cannot use yet.
    let mut transfers = Transfers::new();
    let weights: IdVec<TreeId, f64> = counts.iter().map(|&c| c as f64).collect();
    let rate = busiest_count(machine, packing, spec.collective, &weights) / total.max(1) as f64;
    for (q, (i, j)) in interleave(counts).into_iter().enumerate() {
        let first = transfers.len();
        walks.chunk(
            spec.collective,
            i,
            first_chunk[i] + j * pieces,
            &mut transfers,
        );
        let rank = (q as f64 * rate * rank_rate).floor() as u32;
        transfers.iter_mut().skip(first).for_each(|t| t.rank = rank);
    }
    (chunks, transfers)
}

/// The trees of a packing as walked for pipeline chunks: each from its root and, where chunks
/// have owners, from each owner in turn (the tree re-rooted there).
struct Walks {
    plain: IdVec<TreeId, Walk>,
    rooted: IdVec<TreeId, Vec<Walk>>,
    /// Pieces per pipeline chunk ([`pieces`]).
    pieces: usize,
}

impl Walks {
    /// The walks of `packing`'s trees for `collective`; re-rooted walks only for the trees
    /// `used` says carry chunks.
    fn of(
        machine: &Machine,
        collective: Collective,
        packing: &Packing,
        used: impl Fn(TreeId) -> bool,
    ) -> Walks {
        let compute = machine.compute_nodes();
        let owned = matches!(
            collective,
            Collective::AllGather | Collective::ReduceScatter
        );
        let rooted = packing
            .trees
            .iter_enumerated()
            .map(|(i, t)| {
                if owned && used(i) {
                    compute.iter().map(|&o| Walk::of(&t.rerooted(o))).collect()
                } else {
                    Vec::new()
                }
            })
            .collect();
        Walks {
            plain: packing.trees.iter().map(Walk::of).collect(),
            rooted,
            pieces: pieces(machine, collective),
        }
    }

    /// Appends the transfers of one pipeline chunk on tree `i`, whose pieces are chunks
    /// `first`, `first + 1`, … (one per owner where chunks have owners).
    fn chunk(&self, collective: Collective, i: TreeId, first: usize, transfers: &mut Transfers) {
        let data = BufferId(0);
        let tree = &self.plain[i];
        for k in 0..self.pieces {
            let chunk = ChunkId::new(first + k);
            // The tree hanging from this piece's owner (where pieces have owners).
            let owners = self.rooted[i].get(k).unwrap_or(tree);
            match collective {
                Collective::AllReduce => {
                    let into_root = reduce_up(tree, data, chunk, transfers);
                    broadcast_down(tree, data, chunk, &into_root, transfers);
                }
                Collective::Reduce { .. } => {
                    reduce_up(tree, data, chunk, transfers);
                }
                Collective::Broadcast { .. } => broadcast_down(tree, data, chunk, &[], transfers),
                Collective::AllGather => broadcast_down(owners, data, chunk, &[], transfers),
                Collective::ReduceScatter => {
                    reduce_up(owners, data, chunk, transfers);
                }
            }
        }
    }
}

/// `(tree, chunk)` pairs with the trees' pipelines interleaved: ordered by how far through its
/// tree's share the chunk lies, then by tree.
fn interleave(counts: &IdVec<TreeId, usize>) -> Vec<(TreeId, usize)> {
    let mut order: Vec<(TreeId, usize)> = counts
        .iter_enumerated()
        .flat_map(|(i, &c)| (0..c).map(move |j| (i, j)))
        .collect();
    // (j + ½) / c_i against (l + ½) / c_k, exactly: (2j + 1)·c_k against (2l + 1)·c_i.
    order.sort_by(|&(i, j), &(k, l)| {
        ((2 * j + 1) * counts[k])
            .cmp(&((2 * l + 1) * counts[i]))
            .then(i.cmp(&k))
    });
    order
}

/// How many chunks cross the busiest link direction when tree `i` has `counts[i]` pipeline
/// chunks.
fn busiest_count(
    machine: &Machine,
    packing: &Packing,
    collective: Collective,
    counts: &IdVec<TreeId, f64>,
) -> f64 {
    let pieces = pieces(machine, collective);
    // Chunks of each tree crossing each direction, per pipeline chunk.
    let crossings: IdVec<TreeId, Vec<(DirectionId, f64)>> = packing
        .trees
        .iter()
        .map(|t| {
            traffic(machine, t, collective)
                .seconds
                .into_iter()
                .map(|(d, s)| {
                    let bw = machine.link(d.link()).bandwidth_gbps;
                    (d, s * bw / 8.0 * pieces as f64)
                })
                .collect()
        })
        .collect();
    let mut busy: std::collections::BTreeMap<DirectionId, f64> = Default::default();
    for (c, list) in counts.iter().zip(&crossings) {
        for &(d, n) in list {
            *busy.entry(d).or_default() += *c * n;
        }
    }
    busy.values().copied().fold(0.0, f64::max)
}

/// Pieces per pipeline chunk: one per compute node where chunks have owners, else one.
fn pieces(machine: &Machine, collective: Collective) -> usize {
    match collective {
        Collective::AllGather | Collective::ReduceScatter => machine.compute_nodes().len().max(1),
        _ => 1,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::embed::trees::pack;

    #[test]
    fn pipelines_interleave_by_progress() {
        let order = |counts: &[usize]| -> Vec<(u32, usize)> {
            let counts: IdVec<TreeId, usize> = counts.iter().copied().collect();
            interleave(&counts)
                .into_iter()
                .map(|(t, j)| (t.0, j))
                .collect()
        };
        assert_eq!(order(&[2, 1]), [(0, 0), (1, 0), (0, 1)]);
        assert_eq!(order(&[1, 0, 1]), [(0, 0), (2, 0)]);
    }

    #[test]
    fn longer_vectors_get_longer_pipelines() {
        let m = crate::compile::load(r#"Topology(name: "r", machine: Ring(nodes: 6))"#)
            .unwrap()
            .machine;
        let packing = pack(&m, Collective::AllReduce).unwrap();
        let chunks = |elements| {
            let spec = PhaseSpec {
                name: "x".to_string(),
                collective: Collective::AllReduce,
                op: schedule_ir::ReduceOp::Sum,
                dtype: schedule_ir::DType::F32,
                elements,
            };
            let (_, lowered) = lower(&spec, &m, &packing, 1).unwrap();
            lowered.chunks_per_tree.iter().sum::<usize>()
        };
        let (small, large) = (chunks(1 << 10), chunks(1 << 26));
        assert!(small < large, "{small} chunks at 4 KiB, {large} at 256 MiB");
    }

    #[test]
    fn a_broadcast_down_trees_that_share_no_direction_never_waits() {
        // A 4 × 4 × 4 torus holds six trees from a root that share no link direction, seven
        // levels high: `k` chunks down each take `k + 6` steps, and they beat the weighted
        // packing, whose trees are deeper.
        let m = crate::compile::load(
            r#"Topology(name: "t", machine: Torus(dims: [4, 4, 4],
                link: (bandwidth_gbps: 100.0, latency_us: 1.0)))"#,
        )
        .unwrap()
        .machine;
        let root = m.compute_nodes()[0];
        let collective = Collective::Broadcast { root };
        let mut packings = crate::embed::trees::packings(&m, collective).unwrap();
        let disjoint = packings.pop().unwrap();
        assert_eq!(disjoint.trees.len(), 6);
        let spec = PhaseSpec {
            name: "x".to_string(),
            collective,
            op: schedule_ir::ReduceOp::Sum,
            dtype: schedule_ir::DType::F32,
            elements: 1 << 18,
        };
        let (seconds, lowered) = lower(&spec, &m, &disjoint, 1).unwrap();
        let height = disjoint.trees.iter().map(|t| t.height()).max().unwrap();
        let deepest = lowered.chunks_per_tree.iter().copied().max().unwrap();
        let steps = lowered.scheduled.timetable.steps as usize;
        assert!(
            steps < deepest + height,
            "{steps} steps for {deepest} chunks, {height} high"
        );
        for weighted in &packings {
            let (other, _) = lower(&spec, &m, weighted, 1).unwrap();
            assert!(
                seconds < other,
                "{seconds} s down disjoint trees, {other} s weighted"
            );
        }
    }

    #[test]
    fn links_without_latency_do_not_deepen_the_pipeline_to_the_cap() {
        // Every doubling is a little cheaper when steps cost no latency: the search stops
        // where doublings gain less than `DOUBLING_GAIN`, far below the transfer cap.
        let m = crate::compile::load(
            r#"Topology(name: "h", machine: Hypercube(dims: 3,
                link: (bandwidth_gbps: 100.0, latency_us: 0.0)))"#,
        )
        .unwrap()
        .machine;
        let root = m.compute_nodes()[0];
        let collective = Collective::Broadcast { root };
        let packing = pack(&m, collective).unwrap();
        let spec = PhaseSpec {
            name: "x".to_string(),
            collective,
            op: schedule_ir::ReduceOp::Sum,
            dtype: schedule_ir::DType::F32,
            elements: 1 << 20,
        };
        let most = most_chunks(&m, collective, spec.elements);
        let (_, lowered) = lower(&spec, &m, &packing, 1).unwrap();
        let chunks: usize = lowered.chunks_per_tree.iter().sum();
        assert!(2 * chunks <= most, "{chunks} chunks of at most {most}");
    }
}
