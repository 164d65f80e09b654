//! The allreduce with its halves overlapped: every transfer of the synthesised trees is placed
//! in the earliest step after the transfers it depends on where its link direction still has
//! room, so that a chunk's all-gather starts as soon as its reduce-scatter has reached the
//! owner, while other chunks are still being reduced.
//!
//! Why: on a machine whose nodes differ in degree (a mesh's corners have two links, its inner
//! nodes four) the all-gather's last steps feed the low-degree nodes while the rest of the
//! machine idles, and the reduce-scatter's first steps (its reversal) drain them. Run one after
//! the other, the machine idles twice; overlapped, a corner sends its reduce-scatter partials
//! on its outgoing directions while it receives finished chunks on its incoming ones.
//!
//! Each chunk's transfers follow its tree: a reduce-scatter transfer `v → parent` waits for
//! the transfers from `v`'s children; the owner's first all-gather transfers wait for every
//! reduce-scatter transfer into the owner; every other all-gather transfer waits for the one
//! that brought the chunk to its sender. A node's all-gather store of a chunk thus lands after
//! its own reduce-scatter send of it (through the owner). The vector may be cut into `pieces`
//! copies of the chunking, each with the same trees, placed one after another (reduce-scatter
//! then all-gather of piece 0, then piece 1, …) so that later pieces fill the steps earlier
//! ones leave idle: a pipeline. Placement is first-fit in time per link direction, linear in
//! the transfers.

use super::synth::Gather;
use crate::lower::plan::Move;
use schedule_ir::{ChunkId, LinkId, NodeId, RecvMode};

/// One all-gather reception of the synthesis.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reception {
    /// The sender, as an index into the compute nodes (32 bits: a 1 024-node synthesis has a
    /// million receptions).
    pub from: u32,
    /// The receiver, likewise.
    pub to: u32,
    /// The link.
    pub link: LinkId,
    /// Chunks the link carries per step each way.
    pub capacity: u32,
    /// The chunk, within one piece.
    pub chunk: u32,
}

/// One placed transfer of the overlapped allreduce.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Placed {
    /// The BSP step.
    pub step: u32,
    /// The sender, as an index into the compute nodes.
    pub from: usize,
    /// The receiver, likewise.
    pub to: usize,
    /// The link.
    pub link: LinkId,
    /// The chunk of the vector (`piece · chunks + chunk`).
    pub chunk: u32,
    /// Whether the receiver reduces (reduce-scatter) or stores (all-gather).
    pub reduce: bool,
}

/// The receptions of `gather` in step order, each direction index resolved by `resolve` to
/// `(from, to, link, capacity)`.
pub fn receptions(
    gather: &Gather,
    resolve: impl Fn(usize) -> (usize, usize, LinkId, u32),
) -> Vec<Reception> {
    gather
        .steps()
        .flatten()
        .flat_map(|(d, carried)| {
            let (from, to, link, capacity) = resolve(d);
            let index = |i: usize| u32::try_from(i).unwrap_or(u32::MAX);
            let (from, to) = (index(from), index(to));
            carried.iter().map(move |&chunk| Reception {
                from,
                to,
                link,
                capacity,
                chunk,
            })
        })
        .collect()
}

/// Shortest-path trees over `p` compute nodes, one per chunk rooted at its owner (`per_node`
/// chunks per node, chunk `c` owned by node `c / per_node`), as all-gather receptions over the
/// directions `dirs` — `(from, to, link, capacity, gbps)` — in the order a node gets a chunk
/// before it passes it on: by hops from the owner, then by chunk.
///
/// Each node takes as its parent, among the neighbours one hop nearer the owner, the one whose
/// link has carried the least so far (in seconds per chunk, counting both halves: a tree edge
/// carries its chunk up in the reduce-scatter and down in the all-gather); ties go to the
/// first direction listed. Why shortest paths: every hop of a tree is a step of the chunk's
/// pipeline, so deeper trees fill and drain longer. Why balanced: every tree has `p - 1`
/// edges, so the links' total is fixed, and a deep pipeline takes as long as its busiest
/// direction; greedy choice keeps the busiest near the average (1 120 against 1 088 chunks on
/// a 16 × 16 mesh at eight pieces). Nodes the owner does not reach get no reception.
pub fn balanced(
    p: usize,
    per_node: usize,
    dirs: impl Iterator<Item = (usize, usize, LinkId, u32, f64)>,
) -> Vec<Reception> {
    // into[v]: the directions into v, as (from, link, capacity, seconds per gigabit).
    let mut into: Vec<Vec<(usize, LinkId, u32, f64)>> = vec![Vec::new(); p];
    let mut out_of: Vec<Vec<usize>> = vec![Vec::new(); p];
    let mut links = 0;
    for (from, to, link, capacity, gbps) in dirs {
        if from >= p || to >= p {
            continue;
        }
        let cost = if gbps > 0.0 {
            1.0 / gbps
        } else {
            f64::INFINITY
        };
        into[to].push((from, link, capacity, cost));
        out_of[from].push(to);
        links = links.max(link.index() + 1);
    }
    let mut carried = vec![0.0f64; links];
    let mut hops = vec![u32::MAX; p];
    let mut order: Vec<usize> = Vec::with_capacity(p);
    let mut out: Vec<(u32, Reception)> = Vec::with_capacity(per_node * p * p.saturating_sub(1));
    let index = |i: usize| u32::try_from(i).unwrap_or(u32::MAX);
    for chunk in 0..per_node * p {
        let owner = chunk / per_node.max(1);
        hops.fill(u32::MAX);
        hops[owner] = 0;
        order.clear();
        order.push(owner);
        let mut next = 0;
        while let Some(&u) = order.get(next) {
            next += 1;
            for &v in &out_of[u] {
                if hops[v] == u32::MAX {
                    hops[v] = hops[u] + 1;
                    order.push(v);
                }
            }
        }
        for &v in &order[1..] {
            let parent = into[v]
                .iter()
                .filter(|&&(u, ..)| hops[u].checked_add(1) == Some(hops[v]))
                .min_by(|a, b| {
                    (carried[a.1.index()] + a.3).total_cmp(&(carried[b.1.index()] + b.3))
                });
            if let Some(&(u, link, capacity, cost)) = parent {
                carried[link.index()] += cost;
                out.push((
                    hops[v],
                    Reception {
                        from: index(u),
                        to: index(v),
                        link,
                        capacity,
                        chunk: index(chunk),
                    },
                ));
            }
        }
    }
    // Stable: of equal hops, chunks in order, and a chunk's receptions in search order.
    out.sort_by_key(|&(hops, r)| (hops, r.chunk));
    out.into_iter().map(|(_, r)| r).collect()
}

/// What one link direction must carry in an overlapped allreduce, known from the receptions
/// before any transfer is placed: the bound that lets the search skip a pipeline depth.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Demand {
    /// All-gather transfers over the direction, over every piece.
    pub gather: u64,
    /// Reduce-scatter transfers over the direction (the all-gather's over its reverse).
    pub reduce: u64,
    /// The most chunks per step an all-gather transfer over it is placed with.
    gather_capacity: u32,
    /// Likewise for a reduce-scatter transfer.
    reduce_capacity: u32,
}

impl Demand {
    /// The fewest steps the direction is used in: [`place`] fills a step of a direction
    /// only while it holds fewer transfers than the capacity of the one being placed, and
    /// never mixes the modes in one step.
    pub fn least_steps(&self) -> u64 {
        self.gather.div_ceil(u64::from(self.gather_capacity.max(1)))
            + self.reduce.div_ceil(u64::from(self.reduce_capacity.max(1)))
    }
}

/// Per link direction (keyed as [`place`] keys its load), what [`place`] of `pieces`
/// copies of the trees `list` describes places on it, on a machine of `links` links.
pub fn demand(list: &[Reception], pieces: usize, links: usize) -> Vec<Demand> {
    let mut out = vec![Demand::default(); 2 * links];
    let pieces = pieces as u64;
    for r in list {
        if let Some(d) = out.get_mut(key(r.from, r.to, r.link)) {
            d.gather += pieces;
            d.gather_capacity = d.gather_capacity.max(r.capacity);
        }
        if let Some(d) = out.get_mut(key(r.to, r.from, r.link)) {
            d.reduce += pieces;
            d.reduce_capacity = d.reduce_capacity.max(r.capacity);
        }
    }
    out
}

/// The key of the direction from compute node `from` to `to` over `link`.
fn key(from: u32, to: u32, link: LinkId) -> usize {
    link.index() * 2 + usize::from(from > to)
}

/// The bit of a [`Timeline`] slot that marks its transfers reduced (a slot holds far fewer
/// transfers than 2³¹).
const REDUCED: u32 = 1 << 31;

/// Which link directions carry what in which step, as transfers are placed.
struct Timeline {
    /// `slots[key][step]`: chunks carried, with [`REDUCED`] set where they are reduced.
    slots: Vec<Vec<u32>>,
    /// `skip[key][step]`: a step at or after `step` that may have room; a full step points
    /// past itself (a union-find with path compression, so a placement skips full steps in
    /// near-constant time).
    skip: Vec<Vec<u32>>,
}

impl Timeline {
    /// The first step at or after `s` of direction `key` that is not full, growing the
    /// direction's columns as needed.
    fn free(&mut self, key: usize, s: usize) -> usize {
        let skip = &mut self.skip[key];
        let mut at = s;
        loop {
            if skip.len() <= at {
                let from = skip.len();
                skip.extend((from..=at).map(|i| u32::try_from(i).unwrap_or(u32::MAX)));
                self.slots[key].resize(at + 1, 0);
            }
            let next = skip[at] as usize;
            if next == at {
                break;
            }
            at = next;
        }
        // Path compression: every step visited points at the free one.
        let mut walk = s;
        while walk != at {
            let next = skip[walk] as usize;
            skip[walk] = u32::try_from(at).unwrap_or(u32::MAX);
            walk = next;
        }
        at
    }

    /// Places a transfer over direction `key` (of `capacity` chunks per step) in the first step
    /// from `earliest` with room and no transfer of the other mode, and returns that step.
    fn place(&mut self, key: usize, capacity: u32, earliest: u32, reduce: bool) -> u32 {
        let mut s = self.free(key, earliest as usize);
        loop {
            let slot = self.slots[key][s];
            let (n, r) = (slot & !REDUCED, slot & REDUCED != 0);
            if n == 0 || (r == reduce && n < capacity) {
                self.slots[key][s] = (n + 1) | if reduce { REDUCED } else { 0 };
                if n + 1 >= capacity {
                    self.skip[key][s] = u32::try_from(s + 1).unwrap_or(u32::MAX);
                }
                break;
            }
            s = self.free(key, s + 1);
        }
        u32::try_from(s).unwrap_or(u32::MAX)
    }
}

/// The overlapped allreduce of `pieces` copies of the trees `list` describes (see the
/// [module doc](self)) over `p` compute nodes, `chunks` chunks per piece owned by `owner`, on a
/// machine of `links` links: hands each transfer to `emit` in placement order, and returns per
/// link direction (`2 · link + 1` for the direction from the higher compute-node index to the
/// lower, `2 · link` for the other) the chunks it carries in each step. A search prices many
/// placements by their load alone and keeps the transfers of the one it assembles: on a
/// 1 024-node machine those of one placement take tens of megabytes.
pub fn place(
    p: usize,
    chunks: usize,
    owner: impl Fn(usize) -> usize,
    list: &[Reception],
    pieces: usize,
    links: usize,
    mut emit: impl FnMut(Placed),
) -> Vec<Vec<u32>> {
    let n = list.len();
    let index = |i: usize| u32::try_from(i).unwrap_or(u32::MAX);
    // arrival[v · chunks + c]: the reception that brings chunk c to node v.
    let mut arrival = vec![u32::MAX; p * chunks];
    for (i, r) in list.iter().enumerate() {
        arrival[r.to as usize * chunks + r.chunk as usize] = index(i);
    }
    // The reception that brought reception j's chunk to its sender (`None` where the sender
    // owns the chunk), whose children j is among.
    let parent = |j: usize| {
        let r = list[j];
        let c = r.chunk as usize;
        let from = r.from as usize;
        (owner(c) != from)
            .then(|| arrival[from * chunks + c] as usize)
            .filter(|&i| i < n)
    };
    // The children of reception i are `children[start[i]..start[i + 1]]`, receptions whose
    // sender got the chunk by reception i; `first[c]`, the owner's own sends of chunk c.
    let mut start = vec![0u32; n + 1];
    for j in 0..n {
        if let Some(i) = parent(j) {
            start[i + 1] += 1;
        }
    }
    for i in 0..n {
        start[i + 1] += start[i];
    }
    let mut fill = start.clone();
    let mut children = vec![0u32; start[n] as usize];
    let mut first: Vec<Vec<u32>> = vec![Vec::new(); chunks];
    for j in 0..n {
        match parent(j) {
            Some(i) => {
                children[fill[i] as usize] = index(j);
                fill[i] += 1;
            }
            None if owner(list[j].chunk as usize) == list[j].from as usize => {
                first[list[j].chunk as usize].push(index(j));
            }
            None => {}
        }
    }
    drop(fill);
    let children_of = |i: usize| &children[start[i] as usize..start[i + 1] as usize];
    let mut timeline = Timeline {
        slots: vec![Vec::new(); 2 * links],
        skip: vec![Vec::new(); 2 * links],
    };
    let mut scatter = vec![0u32; n];
    let mut gather = vec![0u32; n];
    for q in 0..pieces {
        let global = |c: u32| u32::try_from(q * chunks + c as usize).unwrap_or(u32::MAX);
        // Reduce-scatter: reception i reversed, after its children's; children come later in
        // the list, so the reversed list places them first.
        for i in (0..n).rev() {
            let r = list[i];
            let earliest = children_of(i)
                .iter()
                .map(|&j| scatter[j as usize] + 1)
                .max()
                .unwrap_or(0);
            let step = timeline.place(key(r.to, r.from, r.link), r.capacity, earliest, true);
            scatter[i] = step;
            emit(Placed {
                step,
                from: r.to as usize,
                to: r.from as usize,
                link: r.link,
                chunk: global(r.chunk),
                reduce: true,
            });
        }
        // All-gather: reception i, after its sender has the chunk.
        for (i, r) in list.iter().enumerate() {
            let c = r.chunk as usize;
            let earliest = match parent(i) {
                Some(from) => gather[from] + 1,
                None if owner(c) == r.from as usize => first[c]
                    .iter()
                    .map(|&j| scatter[j as usize] + 1)
                    .max()
                    .unwrap_or(0),
                None => 0,
            };
            let step = timeline.place(key(r.from, r.to, r.link), r.capacity, earliest, false);
            gather[i] = step;
            emit(Placed {
                step,
                from: r.from as usize,
                to: r.to as usize,
                link: r.link,
                chunk: global(r.chunk),
                reduce: false,
            });
        }
    }
    timeline
        .slots
        .into_iter()
        .map(|column| column.into_iter().map(|n| n & !REDUCED).collect())
        .collect()
}

/// The plan steps of placed transfers: per step, one move per link direction and mode,
/// carrying its chunks in placement order; a step's moves ordered by link, sender and mode.
///
/// Grouped by a counting sort on the step and a stable sort within each: a million transfers
/// are grouped in a fraction of what a map per step took, in the same order.
pub fn placed_steps(nodes: &[NodeId], placed: &[Placed]) -> Vec<Vec<Move>> {
    let steps = placed
        .iter()
        .map(|t| t.step as usize + 1)
        .max()
        .unwrap_or(0);
    let mut start = vec![0usize; steps + 1];
    for t in placed {
        start[t.step as usize + 1] += 1;
    }
    for s in 0..steps {
        start[s + 1] += start[s];
    }
    let mut order = vec![0u32; placed.len()];
    let mut fill = start.clone();
    for (i, t) in placed.iter().enumerate() {
        let at = &mut fill[t.step as usize];
        order[*at] = u32::try_from(i).unwrap_or(u32::MAX);
        *at += 1;
    }
    let key = |i: &u32| {
        let t = &placed[*i as usize];
        (t.link, t.from, t.reduce)
    };
    (0..steps)
        .map(|s| {
            let step = &mut order[start[s]..start[s + 1]];
            step.sort_by_key(key);
            step.chunk_by(|a, b| key(a) == key(b))
                .map(|group| {
                    let first = &placed[group[0] as usize];
                    let mode = if first.reduce {
                        RecvMode::Reduce
                    } else {
                        RecvMode::Store
                    };
                    let chunks: Vec<ChunkId> = group
                        .iter()
                        .map(|&i| ChunkId(placed[i as usize].chunk))
                        .collect();
                    Move::data(
                        nodes[first.from],
                        nodes[first.to],
                        vec![first.link],
                        chunks,
                        mode,
                    )
                })
                .collect()
        })
        .collect()
}
