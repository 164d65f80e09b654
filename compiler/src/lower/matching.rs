//! `matching`: collectives synthesised step by step by matching chunks to links, on any
//! machine whose compute nodes are joined by direct links — the generic method that needs no
//! structure (no rings, planes or groups) to be recognised.
//!
//! **All-gather** ([`synth`]): each node starts with its own `k` chunks. In every step each
//! link direction between compute nodes carries chunks its sender holds and its receiver lacks
//! (and does not receive elsewhere in the step), the rarest first; the steps repeat until every
//! node holds every chunk. This is the time-stepped link–chunk matching of TACOS (Won et al.,
//! "TACOS: Topology-Aware Collective Algorithm Synthesizer", MICRO 2024), which reaches close
//! to the bandwidth bound on meshes and tori because every direction stays busy nearly to the
//! end.
//!
//! **Reduce-scatter** is the all-gather run backwards. In the all-gather each node receives each
//! chunk exactly once, so the chunk spreads along an arborescence rooted at its owner; reversed
//! (step `t` becomes step `T - 1 - t`, each transfer `u → v` becomes `v → u` in reduce mode),
//! every node sends its partial sum of the chunk toward the owner after each of its children in
//! that tree has sent it theirs. A direction used once per step becomes its reverse used once
//! per step, so the reversed schedule books no direction twice either.
//!
//! **All-reduce** is the reduce-scatter followed by the all-gather of the same synthesis: in
//! turn, the all-gather searched as for an all-gather phase (every grain and chunk count), or
//! overlapped ([`overlap`]), whichever prices lower. Where every node has as many links (a
//! torus or hypercube written as a plain graph) the halves in turn cost twice the all-gather,
//! which moves its bulk a shard or more per step; where degrees differ (a mesh's corners) the
//! overlap keeps the low-degree nodes' links busy both ways. The halves in turn are searched
//! first, and an overlap's shape whose least price cannot beat them is not synthesised.
//!
//! **Shape.** A BSP step lasts as long as its slowest transfer, so on a machine whose links
//! differ in speed the synthesis is run per *reference bandwidth* `b` (each distinct link
//! bandwidth): links slower than `b` are left out (if the rest still joins the compute nodes)
//! and a link of bandwidth `B ≥ b` carries `⌊B/b⌋` chunks per step in one send. Likewise a step
//! costs its slowest link's latency, so where latencies differ the synthesis is also run
//! without the links above the smallest latency that still joins the compute nodes: a link
//! of high latency beside fast ones would otherwise make the machine with it slower than the
//! machine without it. The chunks per
//! node `k`, the *grain* (how many chunks a direction of bandwidth `b` carries per step: one, or
//! one, two, four or eight shards of `k`; see `grains`), the pick rule (rarest first; the chunk
//! the receiver's other senders lack first; or any candidate, as TACOS does) and the seed of the
//! tie-breaks are the other knobs. Every candidate's
//! all-gather is priced by the α-β cost model for the phase's vector, and the cheapest is kept;
//! the search stops at a work budget, so large machines try fewer shapes.

pub mod overlap;
pub mod synth;

use super::floor::Floor;
use super::plan::{self, Move, Packing, Plan};
use super::{vector_chunks, Job, Lowered, Lowering, PhaseSpec, Unless};
use crate::embed::EmbedError;
use crate::limits::Estimate;
use crate::machine::Machine;
use schedule_ir::{ChunkId, ChunkIds, Collective, LinkId, NodeId, NodeKind, RecvMode};
use synth::{Direction, Gather, Pick};

/// The chunk counts per node tried, in order. Small machines gain from many: the fill and
/// drain of an all-gather last a few steps whatever the chunk count, so finer chunks shorten
/// them, until the latency of the extra steps outweighs that.
const CHUNKS_PER_NODE: [usize; 10] = [1, 2, 3, 4, 6, 8, 12, 16, 24, 32];

/// The most chunks per node an overlapped allreduce's search tries: its pipeline pieces
/// multiply the chunks, and its work budget is better spent on fewer, coarser shapes.
const ALLREDUCE_CHUNKS_PER_NODE: usize = 12;

/// The most chunk receptions (`chunks · (p - 1)`) one all-gather candidate may synthesise:
/// about a million, one chunk per node on 1 024 nodes.
const MAX_RECEPTIONS: u64 = 1 << 20;

/// The receptions all candidates together may synthesise: the search's work budget, which
/// keeps a compile of a 1 024-node machine within its time.
const SEARCH_RECEPTIONS: u64 = 1 << 21;

/// The most chunks a fast link carries per step.
const MAX_CAPACITY: u32 = 8;

/// The fixed seed of the tie-breaks.
const SEED: u64 = 0x0074_6f70_6f63;

/// The pick rules [`search`] tries for each shape, in order.
const RULES: [Pick; 3] = [Pick::Rarest, Pick::Exclusive, Pick::Any];

/// `matching`: all-gather synthesised by link–chunk matching, reduce-scatter as its time
/// reversal.
pub struct Matching;

/// The most compute nodes `matching` synthesises for. Its search prices several shapes, each a
/// step-by-step synthesis over every node and chunk: 2.7 s at 256 nodes in a release build, so
/// past 1024 nodes it would keep `auto` busy far beyond the two seconds a compile should take,
/// and the methods built from a machine's structure serve such machines.
pub const MAX_NODES: usize = 1024;

/// Refuses a machine past [`MAX_NODES`] compute nodes, before anything is counted.
fn check_size(machine: &Machine) -> Result<(), EmbedError> {
    let p = machine.compute_nodes().len();
    if p > MAX_NODES {
        return Err(EmbedError::NotApplicable(format!(
            "`matching` synthesises schedules for at most {MAX_NODES} compute nodes, and this \
             machine has {p}"
        )));
    }
    Ok(())
}

impl Lowering for Matching {
    /// Every node receives each chunk it lacks once per half: `C · (p - 1)` transfers of one
    /// chunk for `C` chunks, with `C` the largest chunk count tried for the vector (times the
    /// deepest pipeline of an overlapped allreduce). Steps are
    /// counted as if every direction were busy in every step, plus `p` for the fill and drain.
    /// A machine whose compute nodes are not joined by direct links is refused here, before
    /// anything is counted.
    fn estimate(&self, job: &Job<'_>) -> Result<Estimate, EmbedError> {
        let (machine, spec) = (job.machine, job.spec);
        super::check_planned(job.name, machine)?;
        check_size(machine)?;
        let links = Links::of(machine)?;
        let p = links.nodes.len() as u64;
        let halves = if spec.collective == Collective::AllReduce {
            2
        } else {
            1
        };
        let per_piece = chunk_counts(links.nodes.len(), spec.elements, usize::MAX)
            .last()
            .map_or(p, |&k| k as u64 * p);
        // An overlapped allreduce repeats the chunking in up to 8 pieces, within the same
        // limits on receptions and elements.
        let pieces = if spec.collective == Collective::AllReduce {
            PIECES
                .into_iter()
                .filter(|&n| {
                    let chunks = per_piece.saturating_mul(n as u64);
                    chunks.saturating_mul(p.saturating_sub(1)) <= MAX_RECEPTIONS
                        && chunks <= spec.elements.max(1)
                })
                .max()
                .unwrap_or(1)
        } else {
            1
        };
        let chunks = per_piece.saturating_mul(pieces as u64);
        let receptions = chunks.saturating_mul(p.saturating_sub(1));
        let transfers = receptions.saturating_mul(halves);
        let directions = (links.dirs.len() as u64).max(1);
        let steps = halves * (receptions.div_ceil(directions) + p);
        let mut estimate = Estimate::transfers(transfers, transfers, chunks, 1)
            .on(links.nodes.len())
            .in_steps(steps);
        estimate.planning = SEARCH_RECEPTIONS.saturating_mul(64);
        Ok(estimate)
    }
    fn floor(&self, job: &Job<'_>, base: &Floor) -> f64 {
        floor(job.machine, job.spec, base)
    }
    fn lower(&self, job: &Job<'_>) -> Result<Lowered, EmbedError> {
        match lower_unless(job, &|_| false)? {
            Unless::Lowered(lowered) => Ok(*lowered),
            // Nothing is ruled out where nothing is out; kept for the type's sake.
            Unless::Outpriced(_) => Err(EmbedError::NotApplicable(
                "`matching` found no schedule within its step limit".into(),
            )),
        }
    }
    fn lower_unless(&self, job: &Job<'_>, out: &dyn Fn(f64) -> bool) -> Result<Unless, EmbedError> {
        lower_unless(job, out)
    }
    fn sized(&self) -> bool {
        true
    }
    fn searches(&self) -> bool {
        true
    }
}

/// [`Matching`]'s lowering, unless `out` rules out what it would keep. For an all-gather or a
/// reduce-scatter the shapes whose least estimate ([`Rounding`]) `out` rules out are not
/// synthesised; where the cheapest of the others is ruled out too (or there are none), so is
/// the cheapest of all, and the least of their estimates is returned instead. An allreduce's
/// searches are not cut short by `out` (its halves in turn are searched to a plateau, which
/// reads every price, and its overlap's shapes are those that could beat them), but where the
/// price of what it would keep, rounded as [`Rounding`] says, is ruled out, it is not
/// assembled: on a 1 024-node torus at 64 MiB, `rotated-hd` wins and assembling `matching`'s
/// schedule beside it took over two seconds and doubled the peak memory.
fn lower_unless(job: &Job<'_>, out: &dyn Fn(f64) -> bool) -> Result<Unless, EmbedError> {
    let (machine, spec) = (job.machine, job.spec);
    super::halves_only("matching", spec.collective)?;
    super::check_planned(job.name, machine)?;
    check_size(machine)?;
    let links = Links::of(machine)?;
    if spec.collective != Collective::AllReduce {
        let found = search(&links, spec, &Scope { out, ..Scope::ALL })?;
        let Some(best) = found.kept.first() else {
            return Ok(Unless::Outpriced(found.outpriced));
        };
        if found.outpriced.is_finite() {
            let least = Rounding::of(links.nodes.len(), spec).least_estimate(best.seconds);
            if out(least) {
                return Ok(Unless::Outpriced(least.min(found.outpriced)));
            }
        }
        let mut lowered = Lowered::phase(assemble(machine, &links, spec, job.name, best));
        lowered.detail = Some(best.describe(&links));
        return Ok(Unless::Lowered(Box::new(lowered)));
    }
    // The halves in turn first: the all-gather searched as for an all-gather phase (every
    // grain and chunk count, to a plateau). Its price, twice over, is what an overlapped
    // allreduce must beat, so the overlap's shapes whose least price cannot are not
    // synthesised: on a 1 024-node mesh, the halves in turn at eight chunks per step win by a
    // margin the overlap's bound sees before it synthesises anything.
    let halves = halves_in_turn(&links, spec);
    let in_turn = halves
        .as_ref()
        .ok()
        .and_then(|h| h.kept.first())
        .map_or(f64::INFINITY, |b| 2.0 * b.seconds);
    let overlaps = search(
        &links,
        spec,
        &Scope {
            beat: in_turn,
            ..Scope::ALL
        },
    );
    // Per chunk count, the overlap's shapes (one chunk per direction and step): each is a
    // half too, as cheap as the all-gather search found or dearer.
    let shapes = match (&overlaps, &halves) {
        (Ok(found), _) => found.kept.as_slice(),
        (Err(_), Ok(_)) => &[],
        (Err(e), Err(_)) => return Err(e.clone()),
    };
    // Of two halves priced alike, the overlap's shape.
    let best = overlaps
        .as_ref()
        .ok()
        .into_iter()
        .chain(halves.as_ref().ok())
        .flat_map(|found| found.kept.first())
        .min_by(|a, b| a.seconds.total_cmp(&b.seconds))
        .ok_or_else(|| {
            EmbedError::NotApplicable("`matching` found no schedule within its step limit".into())
        })?;
    let mut choice: Option<(usize, f64, &Best, Trees)> = None;
    // Each kind of trees has its own budget: the synthesis's trees placed as they were
    // whatever the balanced ones add.
    let mut budgets = [SEARCH_RECEPTIONS / 2; 2];
    for shape in shapes {
        for (trees, budget) in [Trees::Synthesised, Trees::Balanced]
            .into_iter()
            .zip(&mut budgets)
        {
            let beat = choice.as_ref().map_or(in_turn, |c| c.1.min(in_turn));
            let list = receptions(&links, shape, trees);
            if let Some((pieces, seconds)) = overlapped(&links, spec, shape, &list, beat, budget) {
                if choice.as_ref().is_none_or(|c| seconds < c.1) {
                    choice = Some((pieces, seconds, shape, trees));
                }
            }
        }
    }
    let priced = choice
        .as_ref()
        .map_or(2.0 * best.seconds, |c| c.1.min(2.0 * best.seconds));
    let least = Rounding::of(links.nodes.len(), spec).least_estimate(priced);
    if out(least) {
        return Ok(Unless::Outpriced(least));
    }
    let (phase, detail) = match choice {
        Some((pieces, seconds, shape, trees)) if seconds < 2.0 * best.seconds => {
            let chunks = vector_chunks(
                spec.elements,
                shape.per_node * links.nodes.len() * pieces,
                |c| {
                    links
                        .nodes
                        .get((c % (shape.per_node * links.nodes.len())) / shape.per_node)
                        .copied()
                },
            );
            let mut placed = Vec::new();
            overlap::place(
                links.nodes.len(),
                shape.per_node * links.nodes.len(),
                |c| c / shape.per_node,
                &receptions(&links, shape, trees),
                pieces,
                links.count(),
                |t| placed.push(t),
            );
            let plan = Plan::data(
                chunks,
                overlap::placed_steps(&links.nodes, &placed),
                Packing::AsGiven,
            );
            (
                plan::assemble(spec, job.name, machine, plan),
                format!(
                    "{}, halves overlapped in {pieces} piece(s){}",
                    shape.describe(&links),
                    match trees {
                        Trees::Synthesised => "",
                        Trees::Balanced => " over shortest-path trees balanced across the links",
                    }
                ),
            )
        }
        _ => (
            assemble(machine, &links, spec, job.name, best),
            format!("{}, halves in turn", best.describe(&links)),
        ),
    };
    let mut lowered = Lowered::phase(phase);
    lowered.detail = Some(detail);
    Ok(Unless::Lowered(Box::new(lowered)))
}

/// An allreduce's halves in turn: its all-gather, searched as for an all-gather phase (every
/// grain and chunk count) until the prices stop falling.
fn halves_in_turn(links: &Links, spec: &PhaseSpec) -> Result<Searched, EmbedError> {
    let gather = PhaseSpec {
        collective: Collective::AllGather,
        ..spec.clone()
    };
    let scope = Scope {
        until_plateau: true,
        ..Scope::ALL
    };
    search(links, &gather, &scope)
}

/// A lower bound on the estimate of the schedule [`Matching`] lowers, from the shapes its
/// search may try, without synthesising any.
///
/// *Proof.* With `k` chunks per node, node `v` lacks `(p - 1) · k` chunks and receives each
/// exactly once in the all-gather, at most `c_v` per step, `c_v` being the chunks per step the
/// directions into `v` carry at the shape's reference bandwidth and grain ([`Links::at`]): so
/// an all-gather takes at least `T = max_v ⌈(p - 1) · k / c_v⌉` steps, and its reversal, the
/// reduce-scatter, as many (`v` sends each chunk once, over the same directions reversed). An
/// allreduce is either both halves in turn, searched as an all-gather is (every grain and
/// chunk count, one piece): `2T` steps; or the overlapped placement ([`overlap`]), whose
/// all-gather transfers alone, `pieces` times as many chunks at the same capacities (grain 1),
/// take at least `T`. Each half also takes at least the tier's diameter in steps (the most
/// hops between two compute nodes over its links): a chunk moves one hop per step, and every
/// node's share must reach, or be reached from, every other node; the overlapped allreduce
/// too, since every node's result depends on every node's contribution. Counted over the whole
/// machine too: each half moves every one of the
/// `k · p` chunks (of every piece) over `p - 1` tree edges, and all directions together carry
/// at most `Σ_v c_v` per step (a direction and its reverse carry as many), so there are at
/// least `h · (p - 1) · k · p / Σ_v c_v` steps for `h` halves. Every one of these steps sends
/// at least one chunk over a link, so it is charged at least one link latency and at least the
/// smallest chunk's bytes over the fastest link's bandwidth (with up to 8 pieces for the
/// overlapped allreduce). The floor is the least, over every way and shape [`search`] may try,
/// of the machine's bound in that many steps with that much carried
/// ([`Floor::in_steps_carrying`]).
fn floor(machine: &Machine, spec: &PhaseSpec, base: &Floor) -> f64 {
    let usable = super::halves(spec.collective).is_some()
        && super::check_planned("matching", machine).is_ok()
        && check_size(machine).is_ok();
    let Some(links) = usable.then(|| Links::of(machine).ok()).flatten() else {
        return base.seconds();
    };
    let p = links.nodes.len();
    let halves = super::halves(spec.collective).map_or(1, |(rs, ag)| u64::from(rs) + u64::from(ag));
    // (shapes, pieces, halves a node's steps add up over) of each way the phase may be built.
    let ways = if spec.collective == Collective::AllReduce {
        let most_pieces = PIECES.into_iter().max().unwrap_or(1);
        vec![
            (shapes(p, spec.elements, spec.collective), most_pieces, 1),
            (shapes(p, spec.elements, Collective::AllGather), 1, 2),
        ]
    } else {
        vec![(shapes(p, spec.elements, spec.collective), 1, 1)]
    };
    let fastest = super::floor::fastest_link(machine);
    let size = spec.dtype.size_bytes() as f64;
    let tiers = links.tiers_and_diameters();
    let mut least = f64::INFINITY;
    for (shapes, pieces, in_turn) in ways {
        for (per_node, grains) in shapes {
            let lacking = p.saturating_sub(1) as u64 * per_node as u64;
            let chunks = (per_node * p * pieces) as u64;
            let chunk = super::floor::least_chunk(spec.elements, chunks) as f64 * size;
            for &(tier, diameter) in &tiers {
                for &grain in &grains {
                    let (dirs, _) = links.at(tier, grain);
                    let mut inbound = vec![0u64; p];
                    for d in &dirs {
                        inbound[d.to] += u64::from(d.capacity);
                    }
                    let per_node_steps = inbound
                        .iter()
                        .map(|&c| in_turn * lacking.div_ceil(c.max(1)).max(diameter))
                        .max()
                        .unwrap_or(0);
                    let capacity: u64 = inbound.iter().sum();
                    let all = (halves * lacking).saturating_mul(p as u64);
                    let steps = per_node_steps.max(all.div_ceil(capacity.max(1)));
                    let carried = super::floor::carrying(steps, chunk, fastest);
                    least = least.min(base.in_steps_carrying(steps, carried));
                }
            }
        }
    }
    if least.is_finite() {
        least
    } else {
        base.seconds()
    }
}

/// Whether `matching` lowers `collective`.
pub fn supports(collective: Collective) -> bool {
    // An allreduce and either of its halves.
    super::halves(collective).is_some()
}

/// One direction of a link between two compute nodes.
#[derive(Clone, Copy, Debug)]
struct LinkDirection {
    from: usize,
    to: usize,
    link: LinkId,
    bandwidth_gbps: f64,
    latency_us: f64,
}

/// Which links a synthesis uses: those of at least the reference bandwidth `gbps` (a link of
/// `k` times it carries `k` times the grain per step) and of at most `latency_us`.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Tier {
    gbps: f64,
    latency_us: f64,
}

impl Tier {
    /// Every link.
    const EVERY: Tier = Tier {
        gbps: f64::NEG_INFINITY,
        latency_us: f64::INFINITY,
    };

    /// Whether the synthesis uses direction `d`.
    fn uses(self, d: &LinkDirection) -> bool {
        d.bandwidth_gbps >= self.gbps && d.latency_us <= self.latency_us
    }
}

/// The compute nodes and the link directions that join them directly.
struct Links {
    nodes: Vec<NodeId>,
    dirs: Vec<LinkDirection>,
}

impl Links {
    /// One more than the highest link index among the directions: the link count the
    /// overlapped allreduce's per-direction tables are sized for.
    fn count(&self) -> usize {
        self.dirs
            .iter()
            .map(|d| d.link.index() + 1)
            .max()
            .unwrap_or(0)
    }

    /// The direct links between compute nodes; refuses a machine where they do not join every
    /// compute node to the first, naming one that is reached only through switches.
    fn of(machine: &Machine) -> Result<Links, EmbedError> {
        let nodes = machine.compute_nodes();
        let mut index = vec![usize::MAX; machine.node_count()];
        for (i, n) in nodes.iter().enumerate() {
            index[n.index()] = i;
        }
        let mut dirs = Vec::new();
        for (i, &a) in nodes.iter().enumerate() {
            for (link, b) in machine.links_at(a) {
                if machine.node(b).kind != NodeKind::Compute {
                    continue;
                }
                let info = machine.link(link);
                dirs.push(LinkDirection {
                    from: i,
                    to: index[b.index()],
                    link,
                    bandwidth_gbps: info.bandwidth_gbps,
                    latency_us: info.latency_us,
                });
            }
        }
        let links = Links { nodes, dirs };
        if let Some(alone) = links.unreached(Tier::EVERY) {
            return Err(EmbedError::NotApplicable(format!(
                "`matching` moves chunks over links between compute nodes only, and {} is \
                 joined to {} only through switches",
                machine.node(links.nodes[alone]).name,
                machine.node(links.nodes[0]).name
            )));
        }
        Ok(links)
    }

    /// The first compute node that the links of `tier` do not join to the first one.
    fn unreached(&self, tier: Tier) -> Option<usize> {
        let p = self.nodes.len();
        let mut adjacent: Vec<Vec<usize>> = vec![Vec::new(); p];
        for d in self.dirs.iter().filter(|d| tier.uses(d)) {
            adjacent[d.from].push(d.to);
        }
        let mut seen = vec![false; p];
        let mut stack = Vec::new();
        if p > 0 {
            seen[0] = true;
            stack.push(0);
        }
        while let Some(n) = stack.pop() {
            for &m in &adjacent[n] {
                if !seen[m] {
                    seen[m] = true;
                    stack.push(m);
                }
            }
        }
        seen.iter().position(|&s| !s)
    }

    /// The most hops between two compute nodes over the links of `tier` (`None` where they do
    /// not join every compute node): no chunk moves more than one hop per step, so every
    /// all-gather or reduce-scatter over those links takes at least this many steps.
    fn diameter(&self, tier: Tier) -> Option<u64> {
        let p = self.nodes.len();
        let mut adjacent: Vec<Vec<usize>> = vec![Vec::new(); p];
        for d in self.dirs.iter().filter(|d| tier.uses(d)) {
            adjacent[d.from].push(d.to);
        }
        let mut hops = vec![u64::MAX; p];
        let mut queue = std::collections::VecDeque::with_capacity(p);
        let mut most = 0;
        for start in 0..p {
            hops.fill(u64::MAX);
            hops[start] = 0;
            queue.push_back(start);
            let mut reached = 1;
            while let Some(n) = queue.pop_front() {
                for &m in &adjacent[n] {
                    if hops[m] == u64::MAX {
                        hops[m] = hops[n] + 1;
                        most = most.max(hops[m]);
                        reached += 1;
                        queue.push_back(m);
                    }
                }
            }
            if reached < p {
                return None;
            }
        }
        Some(most)
    }

    /// [`Links::tiers`], each with its [`Links::diameter`] (the tiers join every compute node).
    fn tiers_and_diameters(&self) -> Vec<(Tier, u64)> {
        self.tiers()
            .into_iter()
            .map(|t| (t, self.diameter(t).unwrap_or(0)))
            .collect()
    }

    /// The tiers worth trying. Under every latency ceiling — the largest link latency (every
    /// link), then the smallest that still joins every compute node, if it differs — each
    /// distinct bandwidth of the links under it whose links and the faster ones still join
    /// every compute node, fastest first (at most three per ceiling). A step costs its slowest
    /// link's latency, so a link of high latency may cost more than its bandwidth brings, and
    /// a machine without it would get a cheaper schedule than the machine with it.
    fn tiers(&self) -> Vec<Tier> {
        let mut latencies: Vec<f64> = self.dirs.iter().map(|d| d.latency_us).collect();
        latencies.sort_by(f64::total_cmp);
        latencies.dedup();
        let mut ceilings: Vec<f64> = latencies.last().copied().into_iter().collect();
        let lowest = latencies.iter().copied().find(|&l| {
            self.unreached(Tier {
                gbps: f64::NEG_INFINITY,
                latency_us: l,
            })
            .is_none()
        });
        ceilings.extend(lowest.filter(|l| Some(l) != latencies.last()));
        let mut out = Vec::new();
        for latency_us in ceilings {
            let mut speeds: Vec<f64> = self
                .dirs
                .iter()
                .filter(|d| d.latency_us <= latency_us)
                .map(|d| d.bandwidth_gbps)
                .collect();
            speeds.sort_by(|a, b| b.total_cmp(a));
            speeds.dedup();
            let mut tiers: Vec<Tier> = speeds
                .into_iter()
                .map(|gbps| Tier { gbps, latency_us })
                .filter(|&t| self.unreached(t).is_none())
                .collect();
            // The slowest reference uses every link under the ceiling; keep it and the two
            // fastest that connect.
            if tiers.len() > 3 {
                let slowest = tiers[tiers.len() - 1];
                tiers.truncate(2);
                tiers.push(slowest);
            }
            out.extend(tiers);
        }
        out
    }

    /// The directions the synthesis uses in `tier`, each carrying `grain` chunks per step for
    /// each multiple of the tier's reference bandwidth it has, with the index of each in
    /// [`Links::dirs`].
    fn at(&self, tier: Tier, grain: u32) -> (Vec<Direction>, Vec<usize>) {
        let gbps = tier.gbps;
        self.dirs
            .iter()
            .enumerate()
            .filter(|(_, d)| tier.uses(d))
            .map(|(i, d)| {
                let ratio = (d.bandwidth_gbps / gbps * (1.0 + 1e-9)).floor();
                let capacity = if ratio.is_finite() && ratio >= 1.0 {
                    (ratio as u32).min(MAX_CAPACITY)
                } else {
                    1
                };
                (
                    Direction {
                        from: d.from,
                        to: d.to,
                        capacity: capacity * grain,
                    },
                    i,
                )
            })
            .unzip()
    }
}

/// The chunk counts per node tried for `p` nodes and a vector of `elements`: every one of
/// [`CHUNKS_PER_NODE`] (up to `most`) within [`MAX_RECEPTIONS`] and with no more chunks than
/// elements, and always one chunk per node.
fn chunk_counts(p: usize, elements: u64, most: usize) -> Vec<usize> {
    let receptions = |k: usize| (k * p) as u64 * p.saturating_sub(1) as u64;
    CHUNKS_PER_NODE
        .into_iter()
        .filter(|&k| {
            k == 1 || (k <= most && receptions(k) <= MAX_RECEPTIONS && (k * p) as u64 <= elements)
        })
        .collect()
}

/// The chunk counts and grains ([`grains`]) the search tries for `collective`. The overlapped
/// allreduce places the all-gather's trees one chunk per direction and step at a time and
/// pipelines them in pieces, so it is searched with one chunk per step and at most
/// [`ALLREDUCE_CHUNKS_PER_NODE`] chunks per node (more candidates there left the budget for
/// fewer chunk counts and priced the 8 × 8 mesh's allreduce at 74.9% instead of 78.9%); its
/// halves alone (an all-gather, a reduce-scatter) take every shape.
fn shapes(p: usize, elements: u64, collective: Collective) -> Vec<(usize, Vec<u32>)> {
    let overlapped = collective == Collective::AllReduce;
    let most = if overlapped {
        ALLREDUCE_CHUNKS_PER_NODE
    } else {
        usize::MAX
    };
    chunk_counts(p, elements, most)
        .into_iter()
        .map(|k| (k, if overlapped { vec![1] } else { grains(k) }))
        .collect()
}

/// The chunks per step a reference-speed direction is given with `per_node` chunks per node,
/// the largest first: eight, four, two shards, a whole shard, one chunk. A step costs one
/// latency however much a direction carries, so a few whole shards per step move the bulk in
/// a fraction of the steps (and latencies) that one shard per step takes, and far fewer than
/// one chunk per step; the last steps, when nodes lack only a few chunks, carry fractions of a
/// shard spread over every direction into the node: the step count of coarse chunks with the
/// tail of fine ones. Eight shards let a large sparse machine (a node of a 16 × 16 torus lacks
/// 255 shards and has four links) finish in as many steps as its diameter, which four did not
/// where the synthesis leaves some direction short; two shards sit between one and four, where
/// a whole shard leaves the tail too long and four load the bulk unevenly. Pricing keeps
/// whichever is cheapest for the vector.
fn grains(per_node: usize) -> Vec<u32> {
    let whole = u32::try_from(per_node).unwrap_or(1);
    let mut out = vec![
        whole.saturating_mul(8),
        whole.saturating_mul(4),
        whole.saturating_mul(2),
        whole,
        1,
    ];
    out.dedup();
    out
}

/// A synthesised all-gather with the shape that produced it and its price.
struct Best {
    gather: Gather,
    /// Indices into [`Links::dirs`] of the synthesis's directions.
    dirs: Vec<usize>,
    /// The chunks per step of each of the synthesis's directions.
    capacity: Vec<u32>,
    per_node: usize,
    /// The chunks a direction of the reference bandwidth carries per step.
    grain: u32,
    /// The links it uses.
    tier: Tier,
    pick: Pick,
    seconds: f64,
}

impl Best {
    fn describe(&self, links: &Links) -> String {
        // The latency ceiling is named only where it leaves links out.
        let ceiling = if links
            .dirs
            .iter()
            .all(|d| d.latency_us <= self.tier.latency_us)
        {
            String::new()
        } else {
            format!(" and {} µs or less", self.tier.latency_us)
        };
        format!(
            "{} chunk(s) per node, up to {} per link and step, {} first, links of {} Gbit/s or \
             more{ceiling}, {} steps per half",
            self.per_node,
            self.grain,
            match self.pick {
                Pick::Rarest => "rarest",
                Pick::Any => "any candidate",
                Pick::Exclusive => "fewest other senders",
            },
            self.tier.gbps,
            self.gather.len()
        )
    }
}

/// How [`search`] may cut its work short.
struct Scope<'a> {
    /// A shape whose least price ([`least_price`]), rounded as [`Rounding`] says, is not
    /// below this is not synthesised. For an allreduce's overlap, this is the price of the
    /// halves in turn: an overlapped allreduce of `M` pieces of a shape moves the shape's
    /// all-gather `M` times over in chunks `M` times smaller, which the proof of
    /// [`least_price`] bounds as it bounds the shape (at `M` times the steps, each carrying a
    /// chunk `M` times smaller, and the same bytes into every node); chunks rounded as
    /// [`Rounding`] says.
    beat: f64,
    /// Whether to stop once two chunk counts in a row lower the cheapest price synthesised by
    /// less than [`PLATEAU_GAIN`] (a chunk count whose every shape is skipped lowers nothing):
    /// finer chunks shorten an all-gather's fill and drain less and less and cost more steps,
    /// so past a plateau the price rises.
    until_plateau: bool,
    /// The caller's test: an estimate it rules out. Where only the cheapest counts and no
    /// plateau is read, a shape whose least estimate ([`Rounding`]) it rules out is not
    /// synthesised.
    out: &'a dyn Fn(f64) -> bool,
    /// The receptions from which a synthesis is run beside the next one the search may need
    /// ([`Admit`], running ahead): [`PARALLEL_RECEPTIONS`], or none in tests that compare.
    ahead_from: u64,
}

impl Scope<'_> {
    /// Every shape, within the work budget only.
    const ALL: Scope<'static> = Scope {
        beat: f64::INFINITY,
        until_plateau: false,
        out: &|_| false,
        ahead_from: PARALLEL_RECEPTIONS,
    };
}

/// The least relative gain in price for which [`Scope::until_plateau`] tries more chunks per
/// node.
const PLATEAU_GAIN: f64 = 0.005;

/// How far below `matching`'s own price the cost model's estimate of a schedule may lie.
///
/// `matching` prices every chunk at the largest chunk's bytes, `⌈n / c⌉` elements for `n`
/// elements in `c` chunks; the cost model reads each chunk's own, at least `⌊n / c⌋`
/// ([`super::floor::least_chunk`]). A step is priced its latency plus its most loaded
/// direction's bytes over its bandwidth, so a schedule's estimate is at least its price times
/// the least ratio `⌊n / c⌋ / ⌈n / c⌉` over every chunk count `c` it may be cut into (and
/// the divisions of a mean only add to it). Where a shape ruled out by its least price times
/// that ratio would have been the cheapest, whatever `matching` keeps instead is priced at
/// least as high, so its estimate is ruled out too.
#[derive(Clone, Copy)]
struct Rounding(f64);

impl Rounding {
    /// The least ratio over every chunk count of the shapes [`search`] tries for `spec` on `p`
    /// compute nodes; for an allreduce, also over its overlap's pipeline pieces and its halves
    /// in turn (searched as an all-gather).
    fn of(p: usize, spec: &PhaseSpec) -> Rounding {
        let n = spec.elements;
        let (pieces, halves): (&[usize], _) = if spec.collective == Collective::AllReduce {
            (&PIECES, shapes(p, n, Collective::AllGather))
        } else {
            (&[1], Vec::new())
        };
        let counts = shapes(p, n, spec.collective)
            .into_iter()
            .flat_map(|(k, _)| pieces.iter().map(move |&m| (k * p * m) as u64))
            .chain(halves.into_iter().map(|(k, _)| (k * p) as u64));
        Rounding(counts.fold(1.0, |least, c| {
            let most = n.div_ceil(c.max(1)).max(1);
            least.min(super::floor::least_chunk(n, c) as f64 / most as f64)
        }))
    }

    /// A lower bound on the estimate of a schedule whose price is at least `price`, lowered
    /// by a relative `10⁻⁹` against rounding.
    fn least_estimate(self, price: f64) -> f64 {
        price * self.0 * (1.0 - 1e-9)
    }
}

/// What [`search`] found.
struct Searched {
    /// Per chunk count, the cheapest all-gather; the cheapest first.
    kept: Vec<Best>,
    /// The least estimate ([`Rounding`]) of the shapes [`Scope::out`] ruled out; infinite
    /// where none.
    outpriced: f64,
}

/// The receptions (`chunks · (p - 1)`) from which [`search`] runs a shape's synthesis beside
/// the next one it may still need: below that, a synthesis takes well under a millisecond and
/// a second thread would cost more than it saves.
const PARALLEL_RECEPTIONS: u64 = 1 << 17;

/// What [`search`] does with a shape, from what it holds before the shape's turn.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Admitted {
    /// It cannot beat what the search holds, or the work budget is spent: not synthesised, nor
    /// charged to the budget.
    Skipped,
    /// Charged to the budget but ruled out by [`Scope::out`]: its least estimate.
    RuledOut(f64),
    /// Charged to the budget and synthesised.
    Synthesised,
}

/// What [`search`] holds when a shape's turn comes: the price it must beat, the work spent, and
/// whether nothing has been synthesised yet (the first shape is always tried).
///
/// **Running ahead.** A large synthesis is run beside the next shape the search would admit
/// if the first priced at its least, on a second core (`rayon::join`). That shape's result is
/// used only where its own turn admits it: a synthesis is a pure function of its shape, so
/// the search synthesises, keeps and picks exactly what it does one shape at a time; a wrong
/// guess costs the second core's time, and a wait where it runs longer than the first.
struct Admit {
    held: f64,
    spent: u64,
    first: bool,
}

impl Admit {
    /// Admits a shape of least price `least` and `receptions`, charging the budget.
    fn shape(
        &mut self,
        least: f64,
        receptions: u64,
        (rounding, scope, rules_out): (Rounding, &Scope<'_>, bool),
    ) -> Admitted {
        // A shape that cannot beat what this search already holds (this chunk count's best;
        // where only the cheapest counts, the cheapest of all) is not synthesised, nor charged
        // to the budget: what the search holds depends on its own syntheses alone, so the
        // budget then goes to shapes that could still win, whatever the scope.
        if least >= self.held || rounding.least_estimate(least) >= scope.beat {
            return Admitted::Skipped;
        }
        if !self.first && self.spent.saturating_add(receptions) > SEARCH_RECEPTIONS {
            return Admitted::Skipped;
        }
        // Spent even when the scope skips it, so that the shapes tried are those tried without
        // the scope and the pick stays the same.
        self.spent = self.spent.saturating_add(receptions);
        let least = rounding.least_estimate(least);
        if rules_out && (scope.out)(least) {
            Admitted::RuledOut(least)
        } else {
            Admitted::Synthesised
        }
    }

    /// The place of the first of `later` (places and least prices, in turn) that the search
    /// would still admit once a shape of least price `least` is synthesised, guessing that it
    /// prices at its least: a shape only its least could beat (a coarser grain's, the same
    /// grain's under the next rule) is run ahead, and not one its result will rule out.
    fn ahead(
        mut self,
        least: f64,
        later: impl IntoIterator<Item = (usize, f64)>,
        receptions: u64,
        context: (Rounding, &Scope<'_>, bool),
    ) -> Option<usize> {
        self.first = false;
        self.held = self.held.min(least * (1.0 + 1e-9));
        later
            .into_iter()
            .find(|&(_, least)| self.shape(least, receptions, context) == Admitted::Synthesised)
            .map(|(at, _)| at)
    }
}

/// Tries the shapes (see the [module doc](self)) within the work budget and keeps, per chunk
/// count, the all-gather the cost model prices lowest for the phase's vector; the cheapest
/// comes first, within `scope`. An error where no shape was synthesised nor ruled out.
///
/// A shape ruled out by [`Scope::out`] leaves the others as they were: a shape it does not
/// rule out has a least price below every price it rules out, so below the price of any shape
/// it kept from being synthesised, and is synthesised with or without those.
fn search(links: &Links, spec: &PhaseSpec, scope: &Scope<'_>) -> Result<Searched, EmbedError> {
    let p = links.nodes.len();
    let mut spent = 0u64;
    let mut kept: Vec<Best> = Vec::new();
    // An allreduce overlaps the best of every chunk count; a half alone keeps only the best of
    // all, so a shape whose price cannot beat it need not be synthesised.
    let only_best = spec.collective != Collective::AllReduce;
    // The cheapest price synthesised; the cheapest of one chunk per step and of more; and
    // the chunk counts in a row that lowered neither of those by `PLATEAU_GAIN`. Each
    // family has its own plateau: finer chunks lower the price of coarse grains for longer
    // than that of one chunk per step, or the other way round (a cube's allreduce at
    // 256 MiB is cheapest at 32 chunks per node one per step, while that family's price is
    // flat from 4 to 12 and the coarse grains' still falls).
    let (mut own, mut flat) = (f64::INFINITY, 0);
    let mut family = [f64::INFINITY; 2];
    // Ruling out reads no price, so not where the plateau does.
    let rules_out = only_best && !scope.until_plateau;
    let rounding = Rounding::of(p, spec);
    let mut outpriced = f64::INFINITY;
    let tiers = links.tiers_and_diameters();
    for (per_node, grains) in shapes(p, spec.elements, spec.collective) {
        if scope.until_plateau && flat >= 2 {
            break;
        }
        let before = family;
        let chunks = per_node * p;
        let receptions = chunks as u64 * p.saturating_sub(1) as u64;
        let mut best: Option<Best> = None;
        for &(tier, diameter) in &tiers {
            // Each grain's directions and least price, once.
            let grained: Vec<_> = grains
                .iter()
                .map(|&grain| {
                    let (dirs, index) = links.at(tier, grain);
                    let least = least_price(links, (&dirs, &index, diameter), spec, per_node);
                    (grain, dirs, index, least)
                })
                .collect();
            // Every grain under the first rule before any under the next: where the budget
            // runs out (a large machine affords two or three syntheses), it has gone to
            // different grains, coarse for small vectors and fine for large ones, rather than
            // to one grain under every rule.
            let tried: Vec<(Pick, usize)> = RULES
                .into_iter()
                .flat_map(|pick| (0..grained.len()).map(move |g| (pick, g)))
                .collect();
            let synthesise = |(pick, g): (Pick, usize)| {
                let max_steps = usize::try_from(receptions).unwrap_or(usize::MAX);
                let dirs = &grained[g].1;
                synth::gather(
                    p,
                    chunks,
                    |c| c / per_node,
                    dirs,
                    pick,
                    SEED,
                    max_steps.max(1),
                )
            };
            let context = (rounding, scope, rules_out);
            // A synthesis run ahead of its turn ([`Admit`]), by its place in `tried`.
            let mut ahead: Option<(usize, Option<Gather>)> = None;
            for (at, &(pick, g)) in tried.iter().enumerate() {
                let (grain, ref dirs, ref index, least) = grained[g];
                let held = best.as_ref().map_or(f64::INFINITY, |b| b.seconds);
                let first = kept.is_empty() && best.is_none();
                let mut admit = Admit {
                    held: if only_best { held.min(own) } else { held },
                    spent,
                    first,
                };
                match admit.shape(least, receptions, context) {
                    Admitted::Skipped => continue,
                    Admitted::RuledOut(least) => {
                        spent = admit.spent;
                        outpriced = outpriced.min(least);
                        continue;
                    }
                    Admitted::Synthesised => spent = admit.spent,
                }
                let gather = match ahead.take() {
                    Some((then, gather)) if then == at => gather,
                    _ => {
                        // The next shape this one's result could still leave to synthesise,
                        // run beside it where both are large.
                        let later = (at + 1..tried.len()).map(|n| (n, grained[tried[n].1].3));
                        let next = (receptions >= scope.ahead_from)
                            .then(|| admit.ahead(least, later, receptions, context))
                            .flatten();
                        match next {
                            Some(n) => {
                                let (gather, later) =
                                    rayon::join(|| synthesise((pick, g)), || synthesise(tried[n]));
                                ahead = Some((n, later));
                                gather
                            }
                            None => synthesise((pick, g)),
                        }
                    }
                };
                let Some(gather) = gather else {
                    continue;
                };
                let seconds = price(links, index, &gather, spec, chunks);
                own = own.min(seconds);
                let f = &mut family[usize::from(grain == 1)];
                *f = f.min(seconds);
                if best.as_ref().is_none_or(|b| seconds < b.seconds) {
                    best = Some(Best {
                        gather,
                        dirs: index.clone(),
                        capacity: dirs.iter().map(|d| d.capacity).collect(),
                        per_node,
                        grain,
                        tier,
                        pick,
                        seconds,
                    });
                }
            }
        }
        kept.extend(best);
        let lower = |now: f64, then: f64| now < then * (1.0 - PLATEAU_GAIN);
        flat = if (0..2).any(|f| lower(family[f], before[f])) {
            0
        } else {
            flat + 1
        };
    }
    if kept.is_empty() && outpriced.is_infinite() {
        return Err(EmbedError::NotApplicable(
            "`matching` found no schedule within its step limit".into(),
        ));
    }
    kept.sort_by(|a, b| a.seconds.total_cmp(&b.seconds));
    Ok(Searched { kept, outpriced })
}

/// A lower bound on [`price`] of any all-gather synthesised over `dirs` (with their indices
/// `index` into [`Links::dirs`]) with `per_node` chunks per node.
///
/// *Proof.* Node `v` receives each of the `(p - 1) · per_node` chunks it lacks once, at most
/// `c_v` per step (the capacities of the directions into it), so there are at least
/// `T = max_v ⌈(p - 1) · per_node / c_v⌉` steps, and at least `diameter` (the most hops
/// between two nodes over `dirs`: a chunk moves one hop per step, and every node owns one),
/// each priced at least the least latency and one chunk over the fastest bandwidth of `dirs`. And a step's most loaded direction takes at
/// least as long as all the directions into `v` together take for what they carry in it, so
/// the steps' bandwidth terms add up to at least `v`'s chunks over its directions' total
/// bandwidth. Lowered by a relative `10⁻⁹` against rounding.
fn least_price(
    links: &Links,
    (dirs, index, diameter): (&[Direction], &[usize], u64),
    spec: &PhaseSpec,
    per_node: usize,
) -> f64 {
    let p = links.nodes.len();
    let chunks = per_node * p;
    let bytes =
        (spec.elements as f64 / chunks.max(1) as f64).ceil() * spec.dtype.size_bytes() as f64;
    let lacking = (p.saturating_sub(1) * per_node) as f64;
    let mut inbound = vec![(0u64, 0.0f64); p];
    let (mut latency, mut fastest) = (f64::INFINITY, 0.0f64);
    for (d, &i) in dirs.iter().zip(index) {
        let dir = links.dirs[i];
        let rate = schedule_ir::cost::bytes_per_second(dir.bandwidth_gbps);
        inbound[d.to].0 += u64::from(d.capacity);
        inbound[d.to].1 += rate;
        latency = latency.min(dir.latency_us * 1e-6);
        fastest = fastest.max(rate);
    }
    if !latency.is_finite() || fastest <= 0.0 {
        return 0.0;
    }
    let steps = inbound
        .iter()
        .map(|&(c, _)| (lacking / c.max(1) as f64).ceil())
        .fold(diameter as f64, f64::max);
    let ingress = inbound
        .iter()
        .filter(|&&(_, rate)| rate > 0.0)
        .map(|&(_, rate)| lacking * bytes / rate)
        .fold(0.0, f64::max);
    (steps * latency + (steps * bytes / fastest).max(ingress)) * (1.0 - 1e-9)
}

/// The α-β price of one half (`gather`'s steps) for the phase's vector cut into `chunks`
/// chunks: per step, the slowest latency used plus the most loaded direction's bytes over its
/// bandwidth, as [`schedule_ir::cost`] prices it.
fn price(links: &Links, index: &[usize], gather: &Gather, spec: &PhaseSpec, chunks: usize) -> f64 {
    let bytes =
        (spec.elements as f64 / chunks.max(1) as f64).ceil() * spec.dtype.size_bytes() as f64;
    gather
        .steps()
        .map(|step| {
            step.clone().fold(0.0f64, |slowest, (d, carried)| {
                let dir = links.dirs[index[d]];
                slowest.max(
                    carried.len() as f64 * bytes
                        / schedule_ir::cost::bytes_per_second(dir.bandwidth_gbps),
                )
            }) + step
                .map(|(d, _)| links.dirs[index[d]].latency_us * 1e-6)
                .fold(0.0, f64::max)
        })
        .sum()
}

/// Writes the chosen synthesis as the phase `spec` asks for: the reduce-scatter (the
/// all-gather reversed, in reduce mode), the all-gather, or both in that order.
fn assemble(
    machine: &Machine,
    links: &Links,
    spec: &PhaseSpec,
    algorithm: &str,
    best: &Best,
) -> schedule_ir::Phase {
    let nodes = &links.nodes;
    let k = best.per_node;
    let chunks = vector_chunks(spec.elements, k * nodes.len(), |c| {
        nodes.get(c / k).copied()
    });
    let moves = |reverse: bool| {
        let dirs = &best.dirs;
        move |t: usize| -> Vec<Move> {
            best.gather
                .step(t)
                .map(|(d, carried)| {
                    let dir = links.dirs[dirs[d]];
                    let (from, to, mode) = if reverse {
                        (dir.to, dir.from, RecvMode::Reduce)
                    } else {
                        (dir.from, dir.to, RecvMode::Store)
                    };
                    Move::data(
                        nodes[from],
                        nodes[to],
                        vec![dir.link],
                        carried.iter().map(|&c| ChunkId(c)).collect::<ChunkIds>(),
                        mode,
                    )
                })
                .collect()
        }
    };
    let (scatter, gather) = super::halves(spec.collective).unwrap_or((false, false));
    let mut steps: Vec<Vec<Move>> = Vec::new();
    if scatter {
        steps.extend((0..best.gather.len()).rev().map(moves(true)));
    }
    if gather {
        steps.extend((0..best.gather.len()).map(moves(false)));
    }
    let plan = Plan::data(chunks, steps, Packing::AsGiven);
    plan::assemble(spec, algorithm, machine, plan)
}

/// Which trees an overlapped allreduce reduces and gathers each chunk over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Trees {
    /// Those of the all-gather `matching` synthesised: its order of receptions is a good
    /// all-gather's, which a shallow pipeline keeps.
    Synthesised,
    /// Shortest-path trees balanced across the links ([`overlap::balanced`]): the synthesis
    /// fills every direction in every step of an all-gather, which on a mesh leaves the inner
    /// links carrying a quarter more than the average over both halves (174 chunks against 136
    /// on a 16 × 16 mesh); a deep pipeline's time is its busiest direction's.
    Balanced,
}

/// The all-gather receptions over `best`'s directions of the `trees` its overlapped allreduce
/// runs on.
fn receptions(links: &Links, best: &Best, trees: Trees) -> Vec<overlap::Reception> {
    let resolve = |d: usize| {
        let dir = links.dirs[best.dirs[d]];
        let capacity = best.capacity.get(d).copied().unwrap_or(1);
        (dir.from, dir.to, dir.link, capacity)
    };
    match trees {
        Trees::Synthesised => overlap::receptions(&best.gather, resolve),
        Trees::Balanced => overlap::balanced(
            links.nodes.len(),
            best.per_node,
            (0..best.dirs.len()).map(|d| {
                let (from, to, link, capacity) = resolve(d);
                let rate = links.dirs[best.dirs[d]].bandwidth_gbps;
                (from, to, link, capacity, rate)
            }),
        ),
    }
}

/// The pipeline depths tried for the overlapped allreduce.
const PIECES: [usize; 4] = [1, 2, 4, 8];

/// The cheapest overlapped allreduce of `best`'s shape over the trees whose receptions `list`
/// holds ([`overlap`]) over the pipeline depths of
/// [`PIECES`] within [`MAX_RECEPTIONS`], no more chunks than elements and the work left in
/// `budget` (receptions placed), with its depth and price; `None` when none is priced below
/// `beat`. A depth whose [`least_price_load`] shows it cannot be priced below `beat` nor
/// below the cheapest depth so far is not placed (its work is spent all the same, so that
/// the depths tried stay those tried without skipping): the one returned, when it is below
/// `beat`, is the one placing every depth would return.
fn overlapped(
    links: &Links,
    spec: &PhaseSpec,
    best: &Best,
    list: &[overlap::Reception],
    beat: f64,
    budget: &mut u64,
) -> Option<(usize, f64)> {
    let p = links.nodes.len();
    let k = best.per_node;
    let per_piece = k * p;
    let link_count = links.count();
    let mut kept: Option<(usize, f64)> = None;
    for pieces in PIECES {
        let receptions = (list.len() * pieces) as u64;
        let chunks = (per_piece * pieces) as u64;
        if receptions > MAX_RECEPTIONS || chunks > spec.elements.max(1) || receptions > *budget {
            break;
        }
        *budget -= receptions;
        let least = kept.map_or(beat, |(_, s)| s.min(beat));
        let demand = overlap::demand(list, pieces, link_count);
        if least_price_load(links, spec, chunks as usize, &demand) >= least {
            continue;
        }
        let load = overlap::place(p, per_piece, |c| c / k, list, pieces, link_count, |_| {});
        let seconds = price_load(links, spec, chunks as usize, &load);
        if kept.is_none_or(|(_, s)| seconds < s) {
            kept = Some((pieces, seconds));
        }
    }
    kept
}

/// A lower bound on [`price_load`] of the overlapped allreduce whose directions must carry
/// `demand` ([`overlap::demand`]) for the phase's vector cut into `chunks` chunks.
///
/// *Proof.* A step is priced at least the latency and the bytes over the bandwidth of each
/// direction it uses. So the steps that use direction `d` cost at least, together, `d`'s
/// latency for each of them (at least [`overlap::Demand::least_steps`]) plus all `d` carries
/// over its bandwidth; the price is at least the largest of these over the directions.
/// Lowered by a relative `10⁻⁹` against rounding.
fn least_price_load(
    links: &Links,
    spec: &PhaseSpec,
    chunks: usize,
    demand: &[overlap::Demand],
) -> f64 {
    let bytes =
        (spec.elements as f64 / chunks.max(1) as f64).ceil() * spec.dtype.size_bytes() as f64;
    let mut least = 0.0f64;
    for d in &links.dirs {
        let key = d.link.index() * 2 + usize::from(d.from > d.to);
        let Some(need) = demand.get(key) else {
            continue;
        };
        let rate = schedule_ir::cost::bytes_per_second(d.bandwidth_gbps);
        let carried = (need.gather + need.reduce) as f64 * bytes / rate;
        least = least.max(need.least_steps() as f64 * d.latency_us * 1e-6 + carried);
    }
    least * (1.0 - 1e-9)
}

/// The α-β price of an overlapped allreduce whose directions carry `load` (see
/// [`overlap::place`]) for the phase's vector cut into `chunks` chunks.
fn price_load(links: &Links, spec: &PhaseSpec, chunks: usize, load: &[Vec<u32>]) -> f64 {
    let bytes =
        (spec.elements as f64 / chunks.max(1) as f64).ceil() * spec.dtype.size_bytes() as f64;
    let steps = load.iter().map(Vec::len).max().unwrap_or(0);
    let mut beta = vec![0.0f64; steps];
    let mut alpha = vec![0.0f64; steps];
    for d in &links.dirs {
        let key = d.link.index() * 2 + usize::from(d.from > d.to);
        let rate = schedule_ir::cost::bytes_per_second(d.bandwidth_gbps);
        let Some(column) = load.get(key) else {
            continue;
        };
        for (s, &n) in column.iter().enumerate().filter(|(_, &n)| n > 0) {
            beta[s] = beta[s].max(f64::from(n) * bytes / rate);
            alpha[s] = alpha[s].max(d.latency_us * 1e-6);
        }
    }
    beta.iter().zip(&alpha).map(|(b, a)| a + b).sum()
}

#[cfg(test)]
mod tests;
