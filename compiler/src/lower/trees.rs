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
//! More chunks spread the fill and drain (steps where links idle) over more useful steps: with
//! `N` chunks crossing the busiest link direction and a fill of `F` steps, the bandwidth time
//! is about `(N + F) / N` of the ideal. But every chunk adds a step on the busiest direction,
//! every step costs a link latency α, and the schedule grows with the chunk count. The rule:
//! the fewest chunks such that the busiest link direction carries at least [`PIPELINE`] × `F`
//! of them (≈ 12% fill overhead) and rounding the shares to whole chunks costs the busiest
//! direction at most [`ROUNDING_SLACK`] more time than the exact shares — capped at
//! [`MAX_TRANSFERS`] transfers, beyond which large machines get shorter pipelines. The schedule
//! does not depend on the vector's length, so one schedule serves every size (`topoc simulate`
//! re-chunks it): at small sizes the extra steps' α dominates, and a single tree would be
//! faster.

use super::balance;
use super::dag::{self, DagError, Transfer, TransferId};
use super::ring::PhaseSpec;
use crate::embed::trees::{traffic, Packing, Tree};
use crate::machine::Machine;
use schedule_ir::{BufferId, Chunk, ChunkId, Collective, NodeId, Phase, RecvMode};

/// The busiest link direction carries at least this many times the fill, in chunks.
pub const PIPELINE: usize = 8;

/// How much more the busiest link direction may carry once the LP shares are rounded to whole
/// chunks than under the exact shares.
pub const ROUNDING_SLACK: f64 = 0.05;

/// How tightly the scheduler keeps pipeline chunks in order (see [`lower`]): chunk `q` is
/// ranked `⌊q · r · RANK_RATE⌋`, `r` the busiest direction's chunks per pipeline chunk. Chosen
/// on the bundled examples: 0 (order by dependency depth only) lets early chunks' broadcasts
/// starve behind later chunks' reductions on ladders; 1 (strict pipeline order) leaves links
/// idle on machines with links of different speeds.
const RANK_RATE: f64 = 0.25;

/// The most transfers a phase's pipeline is allowed to grow to (a bound on schedule size).
pub const MAX_TRANSFERS: usize = 20_000;

/// Whether [`lower`] can produce `collective`: trees lower every collective.
pub fn supports(_collective: Collective) -> bool {
    true
}

/// A lowered phase and how many pipeline chunks each tree of the packing carries (a tree whose
/// rounded share is zero carries none).
#[derive(Clone, Debug)]
pub struct Lowered {
    /// The phase.
    pub phase: Phase,
    /// Pipeline chunks per tree of the packing, in its order.
    pub chunks_per_tree: Vec<usize>,
}

/// Lowers `spec` onto the trees of `packing` on `machine`. `algorithm` names the method in the
/// schedule.
pub fn lower(
    spec: &PhaseSpec,
    algorithm: &str,
    machine: &Machine,
    packing: &Packing,
) -> Result<Lowered, DagError> {
    let compute = machine.compute_nodes();
    let pieces = pieces(machine, spec.collective);
    let owned = matches!(
        spec.collective,
        Collective::AllGather | Collective::ReduceScatter
    );
    let counts = pipeline_chunks(machine, packing, spec.collective);
    let total: usize = counts.iter().sum();

    // Chunks of one size, in vector order: tree, then pipeline chunk, then owner. Tree `i`'s
    // share is its whole number of chunks (its LP share rounded): a BSP step lasts as long as
    // its largest transfer, so unequal chunks would waste the links that carry the smaller.
    let chunks: Vec<Chunk> = super::ring::even_chunks(spec.elements, total * pieces)
        .into_iter()
        .enumerate()
        .map(|(k, (start, end))| Chunk {
            start,
            end,
            owner: owned.then(|| compute[k % pieces]),
        })
        .collect();
    let mut first_chunk: Vec<usize> = Vec::with_capacity(counts.len());
    let mut next = 0;
    for &c in &counts {
        first_chunk.push(next);
        next += c * pieces;
    }
    // Where chunks have owners, every tree hangs from each owner in turn.
    let rooted: Vec<Vec<Tree>> = packing
        .trees
        .iter()
        .zip(&counts)
        .map(|(t, &c)| match (owned, c) {
            (true, 1..) => compute.iter().map(|&o| t.rerooted(o)).collect(),
            _ => Vec::new(),
        })
        .collect();

    // Transfers chunk by chunk, the trees' pipelines interleaved. Pipeline chunk `q` (in that
    // order) gets rank ⌊q · r / 4⌋, `r` the chunks the busiest direction carries per pipeline
    // chunk: the scheduler then prefers earlier chunks over later ones, but only loosely, so
    // that a late chunk can fill a link that an early one cannot use yet.
    let data = BufferId(0);
    let mut transfers: Vec<Transfer> = Vec::new();
    let weights: Vec<f64> = counts.iter().map(|&c| c as f64).collect();
    let rate = busiest_count(machine, packing, spec.collective, &weights) / total.max(1) as f64;
    for (q, (i, j)) in interleave(&counts).into_iter().enumerate() {
        let tree = &packing.trees[i];
        let first = transfers.len();
        for k in 0..pieces {
            let chunk = ChunkId::new(first_chunk[i] + j * pieces + k);
            // The tree hanging from this piece's owner (where pieces have owners).
            let owners = rooted[i].get(k).unwrap_or(tree);
            let add = &mut transfers;
            match spec.collective {
                Collective::AllReduce => {
                    let into_root = reduce_up(tree, data, chunk, add);
                    broadcast_down(tree, data, chunk, &into_root, add);
                }
                Collective::Reduce { .. } => {
                    reduce_up(tree, data, chunk, add);
                }
                Collective::Broadcast { .. } => broadcast_down(tree, data, chunk, &[], add),
                Collective::AllGather => broadcast_down(owners, data, chunk, &[], add),
                Collective::ReduceScatter => {
                    reduce_up(owners, data, chunk, add);
                }
            }
        }
        let rank = (q as f64 * rate * RANK_RATE).floor() as u32;
        transfers[first..].iter_mut().for_each(|t| t.rank = rank);
    }
    let timetable = dag::schedule(machine, &transfers, dag::Batching::ByBandwidth)?;
    let programs = dag::programs(machine.node_count(), &transfers, &timetable);
    let phase = spec.phase(
        algorithm,
        chunks,
        super::ring::data_buffer(),
        timetable.steps as usize,
        programs,
    );
    Ok(Lowered {
        phase,
        chunks_per_tree: counts,
    })
}

/// Reduces `chunk` toward the tree's root, leaves first: each node sends its partial result to
/// its parent after all its children's have arrived. Returns the transfers into the root.
fn reduce_up(
    tree: &Tree,
    buffer: BufferId,
    chunk: ChunkId,
    transfers: &mut Vec<Transfer>,
) -> Vec<TransferId> {
    let children = tree.children();
    let mut up: Vec<Option<TransferId>> = vec![None; tree.parent.len()];
    for v in tree.top_down().into_iter().rev() {
        let Some((parent, link)) = tree.parent[v.index()] else {
            continue;
        };
        let after = children[v.index()]
            .iter()
            .filter_map(|&(c, _)| up[c.index()])
            .collect();
        up[v.index()] = Some(TransferId::new(transfers.len()));
        transfers.push(transfer(
            v,
            parent,
            link,
            buffer,
            chunk,
            RecvMode::Reduce,
            after,
        ));
    }
    children[tree.root.index()]
        .iter()
        .filter_map(|&(c, _)| up[c.index()])
        .collect()
}

/// Broadcasts `chunk` from the tree's root, which has it once `at_root` have landed: each node
/// forwards it to its children once it has it.
fn broadcast_down(
    tree: &Tree,
    buffer: BufferId,
    chunk: ChunkId,
    at_root: &[TransferId],
    transfers: &mut Vec<Transfer>,
) {
    let mut down: Vec<Option<TransferId>> = vec![None; tree.parent.len()];
    for v in tree.top_down() {
        let Some((parent, link)) = tree.parent[v.index()] else {
            continue;
        };
        let after = match down[parent.index()] {
            Some(t) => vec![t],
            None => at_root.to_vec(),
        };
        down[v.index()] = Some(TransferId::new(transfers.len()));
        transfers.push(transfer(
            parent,
            v,
            link,
            buffer,
            chunk,
            RecvMode::Store,
            after,
        ));
    }
}

fn transfer(
    from: NodeId,
    to: NodeId,
    link: schedule_ir::LinkId,
    buffer: BufferId,
    chunk: ChunkId,
    mode: RecvMode,
    after: Vec<TransferId>,
) -> Transfer {
    Transfer {
        from,
        to,
        link,
        via: Vec::new(),
        buffer,
        chunks: vec![chunk],
        mode,
        after,
        rank: 0,
    }
}

/// `(tree, chunk)` pairs with the trees' pipelines interleaved: ordered by how far through its
/// tree's share the chunk lies, then by tree.
fn interleave(counts: &[usize]) -> Vec<(usize, usize)> {
    let mut order: Vec<(usize, usize)> = counts
        .iter()
        .enumerate()
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

/// Pipeline chunks per tree (see the [module doc](self)): the shares rounded to whole chunks
/// of one size, with the fewest chunks such that the busiest link direction carries
/// [`PIPELINE`] × the deepest tree's fill, within [`MAX_TRANSFERS`]. A tree may get none.
pub fn pipeline_chunks(machine: &Machine, packing: &Packing, collective: Collective) -> Vec<usize> {
    let fill = packing
        .trees
        .iter()
        .map(|t| match collective {
            Collective::Broadcast { .. } | Collective::Reduce { .. } => t.height(),
            _ => 2 * t.height(),
        })
        .max()
        .unwrap_or(0)
        .max(1);
    let pieces = pieces(machine, collective);
    let hops = machine.compute_nodes().len().saturating_sub(1).max(1);
    let transfers_per_chunk = match collective {
        Collective::AllReduce => 2 * hops,
        _ => pieces * hops,
    };
    let counts_for = |total: usize| -> Vec<usize> {
        balance::apportion(total as u64, &packing.shares)
            .into_iter()
            .map(|c| c as usize)
            .collect()
    };
    let wanted = (PIPELINE * fill) as f64;
    let most = (MAX_TRANSFERS / transfers_per_chunk).max(1);
    // The LP's busiest load, in chunks crossing per pipeline chunk.
    let ideal = busiest_time(machine, packing, collective, &packing.shares);
    let mut total = 1;
    loop {
        let counts = counts_for(total);
        let weights: Vec<f64> = counts.iter().map(|&c| c as f64).collect();
        let busiest = busiest_count(machine, packing, collective, &weights);
        let time = busiest_time(machine, packing, collective, &weights);
        let close = time <= (1.0 + ROUNDING_SLACK) * ideal * total as f64;
        if (busiest >= wanted && close) || total >= most {
            return counts;
        }
        total += 1;
    }
}

/// How many chunks cross the busiest link direction when tree `i` has `counts[i]` pipeline
/// chunks.
fn busiest_count(
    machine: &Machine,
    packing: &Packing,
    collective: Collective,
    counts: &[f64],
) -> f64 {
    let pieces = pieces(machine, collective);
    // Chunks of each tree crossing each direction, per pipeline chunk.
    let crossings: Vec<Vec<(usize, f64)>> = packing
        .trees
        .iter()
        .map(|t| {
            traffic(machine, t, collective)
                .seconds
                .into_iter()
                .map(|(d, s)| {
                    let bw = machine.link(schedule_ir::LinkId::new(d / 2)).bandwidth_gbps;
                    (d, s * bw / 8.0 * pieces as f64)
                })
                .collect()
        })
        .collect();
    let mut busy: std::collections::BTreeMap<usize, f64> = Default::default();
    for (c, list) in counts.iter().zip(&crossings) {
        for &(d, n) in list {
            *busy.entry(d).or_default() += *c * n;
        }
    }
    busy.values().copied().fold(0.0, f64::max)
}

/// The time the busiest link direction needs (seconds per gigabyte of vector) when tree `i`
/// carries `weights[i]` of it.
fn busiest_time(
    machine: &Machine,
    packing: &Packing,
    collective: Collective,
    weights: &[f64],
) -> f64 {
    let mut busy: std::collections::BTreeMap<usize, f64> = Default::default();
    for (tree, &w) in packing.trees.iter().zip(weights) {
        for (d, s) in traffic(machine, tree, collective).seconds {
            *busy.entry(d).or_default() += w * s;
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
        assert_eq!(interleave(&[2, 1]), [(0, 0), (1, 0), (0, 1)]);
        assert_eq!(interleave(&[1, 0, 1]), [(0, 0), (2, 0)]);
    }

    #[test]
    fn equal_trees_get_even_pipelines_just_long_enough_to_fill() {
        let (_, m) =
            crate::compile::load(r#"Topology(name: "r", machine: Ring(nodes: 6))"#).unwrap();
        let packing = pack(&m, Collective::AllReduce).unwrap();
        let counts = pipeline_chunks(&m, &packing, Collective::AllReduce);
        let (least, most) = (counts.iter().min().unwrap(), counts.iter().max().unwrap());
        assert!(most - least <= 1, "{counts:?}");
        // Paths of 6 hung from their middle are 3 deep: fill 6 steps, so the busiest direction
        // (5 of every 6 chunks) needs at least 48 chunks.
        let weights: Vec<f64> = counts.iter().map(|&c| c as f64).collect();
        let busiest = busiest_count(&m, &packing, Collective::AllReduce, &weights);
        assert_eq!(busiest, 48.0, "the fewest chunks that reach it: {counts:?}");
    }
}
