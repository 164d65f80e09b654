//! Pipelined recursive halving/doubling: reduce-scatter by halving, then collection.
//!
//! **Ranks.** The compute nodes in id order are ranks `0 … p-1`; for `Reduce { root }` they
//! are rotated so that the root is rank 0. With `p = 2^k + r` (`0 <= r < 2^k`), the first `2r`
//! ranks fold in pairs before anything else: in one **fold** step each odd rank `2j+1` sends
//! its whole vector to rank `2j`, which combines it on arrival, and then sits out. The `2^k`
//! ranks left — the even ones among the first `2r`, then every rank from `2r` on — take virtual
//! ranks `v = 0 … 2^k-1` in order. (This is the usual scheme for non-powers of two; the seed
//! only says that some processes sit out a round.)
//!
//! **Chunks.** The vector is cut into `2^k` blocks of `B` chunks each, where `B` is the
//! largest slice count of any round, so that every half and every slice is a whole run of
//! chunks (chunks may be empty for tiny vectors).
//!
//! **Distribution (rounds `i = 0 … k-1`).** Every virtual rank holds a run of blocks, the whole
//! vector at first. In round `i` its partner is `v XOR 2^i`; the lower of the two keeps the
//! lower half of the run and the higher keeps the upper half, and each sends the other half.
//! The half in flight is cut into `K_i` slices (`--slices`, default 2, may differ per round),
//! one slice per step: in step `t` of the round each rank sends slice `t` to its partner,
//! receives the partner's slice `t` into the scratch buffer, and combines the slice it
//! received in step `t-1` from scratch into its data with a local `Reduce`. So reducing slice
//! `t-1` overlaps sending slice `t`, and the round's last slice is combined in the first step
//! of the next round, while that round's first slice is on the wire. For that to be safe the
//! last slice received in a round must lie in the half the rank keeps next round (the half
//! it sends next must be complete when the round starts), so a rank receives its slices in
//! descending order when it keeps the lower half next round, ascending otherwise. The very
//! last slice of the distribution, with nothing left to overlap it, and every slice of a round
//! with `K_i = 1`, are combined on arrival (`Recv` with `Reduce`). After `k` rounds virtual
//! rank `v` holds one block fully combined.
//!
//! **Collection.** `ReduceScatter` stops there (the folded-out ranks own nothing). For
//! `AllReduce` the rounds run backwards, `i = k-1 … 0`, one step each: partners swap
//! everything they hold and store what they receive; then each folded-out rank gets the whole
//! result back from its even neighbour in one **unfold** step. For `Reduce` (the method's
//! collection to root 0), in round `j = 0 … k-1` a virtual rank that is a multiple of
//! `2^(j+1)` receives from `v + 2^j` everything that rank has gathered so far, so virtual rank
//! 0 — the root — ends with the whole vector.
//!
//! **Routes.** Partners are rarely neighbours: every transfer takes a shortest route through
//! the machine (compute nodes forward), and the transfers of one logical step are packed into
//! as many BSP sub-steps as their shared link directions need ([`plan`]). A node's local
//! reduce goes in the first sub-step where it sends or receives, so it reads the scratch slice
//! before the node's own receive of that step can store over it. Splitting is safe because
//! within a logical step no transfer reads what another one of that step writes.

use super::floor::Floor;
use super::plan::{self, Move, Packing, Plan, Route, Step};
use super::{even_chunks, Job, Lowered, Lowering, PhaseSpec};
use crate::embed::routed::{adjacency, RouteSearch};
use crate::embed::EmbedError;
use crate::limits::Estimate;
use crate::machine::Machine;
use schedule_ir::{
    Buffer, BufferId, BufferKind, Chunk, ChunkId, Collective, Instr, LinkId, NodeId, Phase,
    RecvMode,
};
use std::collections::BTreeMap;

/// The slice count of a round when none is given.
pub const DEFAULT_SLICES: usize = 2;
/// The most slices a round may be cut into.
pub const MAX_SLICES: usize = 64;

use super::DATA;

/// `halving-doubling`: pipelined recursive halving and doubling, every transfer routed.
pub struct HalvingDoubling;

impl Lowering for HalvingDoubling {
    fn supports(&self, collective: Collective) -> bool {
        supports(collective)
    }
    fn estimate(&self, job: &Job<'_>) -> Result<Estimate, EmbedError> {
        let (machine, spec, knobs) = (job.machine, job.spec, job.knobs);
        super::check_planned(job.name, machine)?;
        Ok(estimate(machine, spec.collective, &knobs.slices))
    }
    fn floor(&self, job: &Job<'_>, base: &Floor) -> f64 {
        floor(job.machine, job.spec, &job.knobs.slices, base)
    }
    fn lower(&self, job: &Job<'_>) -> Result<Lowered, EmbedError> {
        let (machine, spec, knobs) = (job.machine, job.spec, job.knobs);
        super::check_planned(job.name, machine)?;
        let phase = lower(spec, job.name, machine, &knobs.slices)?;
        Ok(Lowered {
            detail: Some(describe(machine, &knobs.slices)),
            ..Lowered::phase(phase)
        })
    }
}
const SCRATCH: BufferId = BufferId(1);

/// The size of [`lower`]'s schedule, counted from the rank layout without building it: round
/// `i` of the distribution sends `K_i` slices that together hold half of every rank's run
/// (`2^k · B / 2^(i+1)` chunks), each over the route to the partner `2^i` ranks away (its
/// length measured once, from rank 0), and reduces them locally; the collection mirrors it;
/// folding sends whole vectors.
fn estimate(machine: &Machine, collective: Collective, slices: &[usize]) -> Estimate {
    let compute = machine.compute_nodes();
    let Some(ranks) = Ranks::new(&compute, None) else {
        return Estimate::default();
    };
    let ks = round_slices(slices, ranks.rounds);
    let per_block = ks.iter().copied().max().unwrap_or(1) as u64;
    let pow = ranks.pow as u64;
    let chunks = pow.saturating_mul(per_block);
    let hops = crate::limits::hops_from(machine, ranks.virtual_node(0));
    let hops_to = |v: usize| hops[ranks.virtual_node(v).index()].clamp(1, u64::MAX / 2);
    let (mut transfers, mut carried, mut routed, mut locals) = (0u64, 0u64, 0u64, 0u64);
    // Packing a step first-fit tries each transfer's route against the sub-steps so far: about
    // as many as the busiest link direction's load, the step's hops over the directions.
    let directions = 2 * machine.link_count().max(1) as u64;
    let mut planning = 0u64;
    // `steps` steps of `count` transfers each, of `chunks_each` chunks over `route` links.
    let mut add = |steps: u64, count: u64, chunks_each: u64, route: u64| {
        let all = steps.saturating_mul(count);
        transfers = transfers.saturating_add(all);
        carried = carried.saturating_add(all.saturating_mul(chunks_each));
        let hops = count.saturating_mul(route);
        routed = routed.saturating_add(steps.saturating_mul(hops));
        let sub_steps = hops.div_ceil(directions).max(1);
        let packing = steps.saturating_mul(hops).saturating_mul(sub_steps);
        planning = planning.saturating_add(packing);
    };
    if ranks.extra > 0 {
        let folds = if collective == Collective::AllReduce {
            2
        } else {
            1
        };
        add(
            folds,
            ranks.extra as u64,
            chunks,
            hops[ranks.node[1].index()].max(1),
        );
    }
    for (i, &k) in ks.iter().enumerate() {
        let half = chunks >> (i + 1);
        let route = hops_to(1 << i);
        // `k` slices of the half from every rank, and as many local reduces.
        add(k as u64, pow, half / k as u64, route);
        locals = locals.saturating_add(pow.saturating_mul(half));
        match collective {
            Collective::AllReduce => add(1, pow, half, route),
            Collective::Reduce { .. } => {
                add(1, pow >> (i + 1), chunks >> (ranks.rounds - i), route)
            }
            _ => {}
        }
    }
    let mut estimate = Estimate::transfers(
        transfers,
        carried.saturating_add(routed),
        chunks,
        if ks.iter().any(|&k| k > 1) { 2 } else { 1 },
    )
    .on(compute.len())
    .in_steps(ks.iter().sum::<usize>() as u64 + 2 * ranks.rounds as u64 + 2);
    estimate.instructions = estimate.instructions.saturating_add(pow * ks.len() as u64);
    estimate.chunk_refs = estimate.chunk_refs.saturating_add(locals);
    estimate.planning = planning;
    estimate
}

/// A lower bound on the estimate of [`lower`]'s schedule, counted from the rank layout
/// without building it.
///
/// *Proof.* Every logical step — the fold, each slice of a distribution round, each collection
/// round, the unfold — holds at least one transfer, so it becomes at least one BSP sub-step that
/// sends: with `S` logical steps the latencies sum to at least `S · α_min`. In each logical step
/// one transfer is known in full: virtual rank 0's (the slice it receives in a distribution
/// round — it keeps the lower half, so the slices are those of blocks `0 … 2^k/2^(i+1)` — the
/// run it sends in a doubling round, the blocks it gathers in a reduce's round, the whole
/// vector in a fold or unfold). Its route crosses at least one link, so the sub-step that
/// carries it is busy for at least its bytes over the fastest link's bandwidth; the logical
/// steps' sub-steps are distinct, so these terms add up. Slices are counted at their smallest
/// (their order within a round does not matter) and a reduce's gathered blocks at `2^j` times
/// the smallest block.
fn floor(machine: &Machine, spec: &PhaseSpec, slices: &[usize], base: &Floor) -> f64 {
    let compute = machine.compute_nodes();
    let root = match spec.collective {
        Collective::Reduce { root } => Some(root),
        _ => None,
    };
    let Some(ranks) = Ranks::new(&compute, root).filter(|_| compute.len() >= 2) else {
        return base.seconds();
    };
    if !supports(spec.collective) {
        return base.seconds();
    }
    let ks = round_slices(slices, ranks.rounds);
    let per_block = ks.iter().copied().max().unwrap_or(1);
    let chunks = (ranks.pow * per_block) as u128;
    let elements = u128::from(spec.elements);
    // Elements of the chunks `a .. b`, cut as `even_chunks` cuts them.
    let at = |k: usize| k as u128 * elements / chunks.max(1);
    let run = |a: usize, b: usize| (at(b) - at(a)) as f64;
    let size = spec.dtype.size_bytes() as f64;
    let fastest = super::floor::fastest_link(machine);
    let (mut steps, mut carried) = (0u64, 0.0f64);
    let mut add = |count: usize, elements: f64| {
        steps += count as u64;
        carried += count as f64 * elements * size;
    };
    let whole = run(0, ranks.pow * per_block);
    let folds = usize::from(ranks.extra > 0);
    add(folds, whole);
    for (i, &k) in ks.iter().enumerate() {
        let keep = (ranks.pow >> (i + 1)) * per_block;
        let least = super::even_chunks(keep as u64, k)
            .into_iter()
            .map(|(a, b)| run(a as usize, b as usize))
            .fold(f64::INFINITY, f64::min);
        add(k, if least.is_finite() { least } else { 0.0 });
    }
    match spec.collective {
        Collective::AllReduce => {
            for i in 0..ranks.rounds {
                add(1, run(0, (ranks.pow >> (i + 1)) * per_block));
            }
            add(folds, whole);
        }
        Collective::Reduce { .. } => {
            let block = (0..ranks.pow)
                .map(|b| run(b * per_block, (b + 1) * per_block))
                .fold(f64::INFINITY, f64::min);
            for j in 0..ranks.rounds {
                add(1, (1usize << j) as f64 * block);
            }
        }
        _ => {}
    }
    base.in_steps_carrying(steps, super::floor::carrying(1, carried, fastest))
}

/// The plan in words: ranks, rounds, ranks folded in first, slices per round.
pub fn describe(machine: &Machine, slices: &[usize]) -> String {
    let p = machine.compute_nodes().len();
    let rounds = p.checked_ilog2().unwrap_or(0) as usize;
    let folded = p - (1 << rounds);
    let per_round = round_slices(slices, rounds);
    let fold = if folded > 0 {
        format!(", {folded} ranks folded in first")
    } else {
        String::new()
    };
    format!("{p} ranks, {rounds} rounds{fold}, slices per round {per_round:?}")
}

/// Whether [`lower`] can produce `collective`.
pub fn supports(collective: Collective) -> bool {
    matches!(
        collective,
        Collective::AllReduce | Collective::ReduceScatter | Collective::Reduce { .. }
    )
}

/// A transfer of a logical step, routed later by [`route_all`].
fn transfer(from: NodeId, to: NodeId, chunks: Vec<ChunkId>, dst: BufferId, mode: RecvMode) -> Move {
    Move {
        from,
        to,
        route: Route::new(),
        src: DATA,
        dst,
        chunks: chunks.into(),
        mode,
    }
}

/// The local `Reduce { src: scratch, dst: data }` of `chunks` on `node`.
fn reduce(node: NodeId, chunks: Vec<ChunkId>) -> (NodeId, Instr) {
    (
        node,
        Instr::Reduce {
            src: SCRATCH,
            dst: DATA,
            chunks: chunks.into(),
        },
    )
}

/// How ranks and virtual ranks map onto compute nodes.
struct Ranks {
    /// Rank `r`'s compute node.
    node: Vec<NodeId>,
    /// `2^k`.
    pow: usize,
    /// `p - 2^k`: pairs folded before the rounds.
    extra: usize,
    /// `k`.
    rounds: usize,
}

impl Ranks {
    fn new(compute: &[NodeId], root: Option<NodeId>) -> Option<Ranks> {
        let p = compute.len();
        let at = match root {
            Some(root) => compute.iter().position(|&n| n == root)?,
            None => 0,
        };
        let node = (0..p).map(|r| compute[(at + r) % p]).collect();
        let rounds = usize::try_from(p.checked_ilog2()?).ok()?;
        let pow = 1usize << rounds;
        Some(Ranks {
            node,
            pow,
            extra: p - pow,
            rounds,
        })
    }

    /// Virtual rank `v`'s compute node.
    fn virtual_node(&self, v: usize) -> NodeId {
        if v < self.extra {
            self.node[2 * v]
        } else {
            self.node[v + self.extra]
        }
    }
}

/// The slice count of every round: `slices[i]`, the last entry for rounds past the list's
/// end, [`DEFAULT_SLICES`] when the list is empty; each clamped to `1 ..= MAX_SLICES`.
pub fn round_slices(slices: &[usize], rounds: usize) -> Vec<usize> {
    (0..rounds)
        .map(|i| {
            slices
                .get(i)
                .or(slices.last())
                .copied()
                .unwrap_or(DEFAULT_SLICES)
                .clamp(1, MAX_SLICES)
        })
        .collect()
}

/// Lowers `spec` by halving/doubling on `machine`, with `slices` per round (see
/// [`round_slices`]). `algorithm` names the method in the schedule.
pub fn lower(
    spec: &PhaseSpec,
    algorithm: &str,
    machine: &Machine,
    slices: &[usize],
) -> Result<Phase, EmbedError> {
    let not = |why: String| EmbedError::NotApplicable(why);
    if !supports(spec.collective) {
        return Err(not(format!(
            "`{algorithm}` lowers allreduce, reduce-scatter and reduce, not {}",
            spec.collective
        )));
    }
    let compute = machine.compute_nodes();
    if compute.len() < 2 {
        return Err(not(format!(
            "`{algorithm}` needs at least two compute nodes"
        )));
    }
    let root = match spec.collective {
        Collective::Reduce { root } => Some(root),
        _ => None,
    };
    let ranks = Ranks::new(&compute, root)
        .ok_or_else(|| not("the root is not a compute node".to_string()))?;
    let ks = round_slices(slices, ranks.rounds);
    let blocks = Blocks {
        per_block: ks.iter().copied().max().unwrap_or(1),
    };
    let all = blocks.run((0, ranks.pow));
    let mut steps: Vec<Step> = Vec::new();
    // Fold: odd ranks among the first 2r hand their vector to their even neighbour.
    if ranks.extra > 0 {
        steps.push(Step::of(
            (0..ranks.extra)
                .map(|j| {
                    let (odd, even) = (ranks.node[2 * j + 1], ranks.node[2 * j]);
                    transfer(odd, even, all.clone(), DATA, RecvMode::Reduce)
                })
                .collect(),
        ));
    }
    let held = distribute(&ranks, &blocks, &ks, &mut steps);
    let finals = held.last().cloned().unwrap_or_default();
    match spec.collective {
        Collective::AllReduce => {
            double(&ranks, &blocks, &held, &mut steps);
            if ranks.extra > 0 {
                steps.push(Step::of(
                    (0..ranks.extra)
                        .map(|j| {
                            let (even, odd) = (ranks.node[2 * j], ranks.node[2 * j + 1]);
                            transfer(even, odd, all.clone(), DATA, RecvMode::Store)
                        })
                        .collect(),
                ));
            }
        }
        Collective::Reduce { .. } => gather_to_root(&ranks, &blocks, &finals, &mut steps),
        _ => {}
    }

    let mut owner: Vec<Option<NodeId>> = vec![None; ranks.pow * blocks.per_block];
    if spec.collective == Collective::ReduceScatter {
        for (v, &range) in finals.iter().enumerate() {
            for c in blocks.run(range) {
                owner[c.index()] = Some(ranks.virtual_node(v));
            }
        }
    }
    let chunks: Vec<Chunk> = even_chunks(spec.elements, ranks.pow * blocks.per_block)
        .into_iter()
        .zip(owner)
        .map(|((start, end), owner)| Chunk { start, end, owner })
        .collect();
    let mut buffers = vec![Buffer {
        name: "data".to_string(),
        kind: BufferKind::Data,
    }];
    if ks.iter().any(|&k| k > 1) {
        buffers.push(Buffer {
            name: "scratch".to_string(),
            kind: BufferKind::Scratch,
        });
    }
    route_all(machine, &mut steps)?;
    Ok(plan::assemble(
        spec,
        algorithm,
        machine,
        Plan {
            chunks,
            buffers,
            steps,
            packing: Packing::FirstFit,
        },
    ))
}

/// The vector as `2^k` blocks of `per_block` chunks each.
struct Blocks {
    per_block: usize,
}

impl Blocks {
    /// The chunks of blocks `lo .. hi`.
    fn run(&self, (lo, hi): (usize, usize)) -> Vec<ChunkId> {
        (lo * self.per_block..hi * self.per_block)
            .map(ChunkId::new)
            .collect()
    }
}

/// The distribution rounds (see the module doc), one plan step per slice. Returns `held[i][v]`:
/// the block run virtual rank `v` holds after round `i - 1`.
fn distribute(
    ranks: &Ranks,
    blocks: &Blocks,
    ks: &[usize],
    steps: &mut Vec<Step>,
) -> Vec<Vec<(usize, usize)>> {
    let mut held: Vec<Vec<(usize, usize)>> = vec![vec![(0, ranks.pow); ranks.pow]];
    let mut pending: Vec<Option<Vec<ChunkId>>> = vec![None; ranks.pow];
    for (i, &k) in ks.iter().enumerate() {
        let before = &held[i];
        let halves: Vec<((usize, usize), (usize, usize))> = (0..ranks.pow)
            .map(|v| {
                let (lo, hi) = before[v];
                let mid = (lo + hi) / 2;
                if v & (1 << i) == 0 {
                    ((lo, mid), (mid, hi))
                } else {
                    ((mid, hi), (lo, mid))
                }
            })
            .collect();
        // The slices each rank receives, in the order it receives them.
        let incoming: Vec<Vec<Vec<ChunkId>>> = (0..ranks.pow)
            .map(|v| {
                let keep = blocks.run(halves[v].0);
                let descending = i + 1 < ranks.rounds && v & (1 << (i + 1)) == 0;
                let mut parts: Vec<Vec<ChunkId>> = even_chunks(keep.len() as u64, k)
                    .into_iter()
                    .map(|(a, b)| keep[a as usize..b as usize].to_vec())
                    .collect();
                if descending {
                    parts.reverse();
                }
                parts
            })
            .collect();
        for t in 0..k {
            let mut step = Step::default();
            for v in 0..ranks.pow {
                let partner = v ^ (1 << i);
                let direct = k == 1 || (i + 1 == ranks.rounds && t + 1 == k);
                let (dst, mode) = if direct {
                    (DATA, RecvMode::Reduce)
                } else {
                    (SCRATCH, RecvMode::Store)
                };
                step.moves.push(transfer(
                    ranks.virtual_node(partner),
                    ranks.virtual_node(v),
                    incoming[v][t].clone(),
                    dst,
                    mode,
                ));
                let previous = if t == 0 {
                    pending[v].take()
                } else {
                    Some(incoming[v][t - 1].clone())
                };
                if let Some(chunks) = previous {
                    step.locals.push(reduce(ranks.virtual_node(v), chunks));
                }
            }
            steps.push(step);
        }
        for (v, slot) in pending.iter_mut().enumerate() {
            let last_in_scratch = k > 1 && i + 1 < ranks.rounds;
            *slot = last_in_scratch.then(|| incoming[v][k - 1].clone());
        }
        held.push(halves.iter().map(|h| h.0).collect());
    }
    held
}

/// The allreduce's collection: the rounds backwards, partners swapping all they hold.
fn double(ranks: &Ranks, blocks: &Blocks, held: &[Vec<(usize, usize)>], steps: &mut Vec<Step>) {
    for i in (0..ranks.rounds).rev() {
        let after = &held[i + 1];
        steps.push(Step::of(
            (0..ranks.pow)
                .map(|v| {
                    transfer(
                        ranks.virtual_node(v),
                        ranks.virtual_node(v ^ (1 << i)),
                        blocks.run(after[v]),
                        DATA,
                        RecvMode::Store,
                    )
                })
                .collect(),
        ));
    }
}

/// The reduce's collection to virtual rank 0: in round `j`, rank `v + 2^j` hands everything it
/// has gathered to `v`, for `v` a multiple of `2^(j+1)`.
fn gather_to_root(
    ranks: &Ranks,
    blocks: &Blocks,
    finals: &[(usize, usize)],
    steps: &mut Vec<Step>,
) {
    for j in 0..ranks.rounds {
        let span = 1 << j;
        steps.push(Step::of(
            (0..ranks.pow)
                .step_by(2 * span)
                .map(|v| {
                    let mut chunks: Vec<ChunkId> = (v + span..v + 2 * span)
                        .flat_map(|u| blocks.run(finals[u]))
                        .collect();
                    chunks.sort();
                    transfer(
                        ranks.virtual_node(v + span),
                        ranks.virtual_node(v),
                        chunks,
                        DATA,
                        RecvMode::Store,
                    )
                })
                .collect(),
        ));
    }
}

/// Gives every transfer a shortest route (compute nodes forward), one search per pair.
fn route_all(machine: &Machine, steps: &mut [Step]) -> Result<(), EmbedError> {
    let adj = adjacency(machine);
    let mut search = RouteSearch::new(machine.node_count());
    let mut routes: BTreeMap<(NodeId, NodeId), Vec<LinkId>> = BTreeMap::new();
    for m in steps.iter_mut().flat_map(|s| s.moves.iter_mut()) {
        let route = match routes.entry((m.from, m.to)) {
            std::collections::btree_map::Entry::Occupied(known) => known.get().clone(),
            std::collections::btree_map::Entry::Vacant(slot) => {
                let route = search
                    .shortest(machine, &adj, m.from, m.to, true)
                    .filter(|r| !r.is_empty())
                    .ok_or_else(|| {
                        EmbedError::NotApplicable(format!(
                            "no route from {} to {}",
                            machine.node(m.from).name,
                            machine.node(m.to).name
                        ))
                    })?;
                slot.insert(route).clone()
            }
        };
        m.route = route.into();
    }
    Ok(())
}
