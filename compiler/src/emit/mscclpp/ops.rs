//! From a verified phase to each GPU's operations, step by step: puts and signals for the
//! sends, waits then copies and reductions for the receives and local operations.

use super::threadblocks::Hazards;
use super::{MscclppError, MAX_OP_CHANNELS};
use crate::emit::layout::{Buf, Layout, LayoutError, Loc, DATA};
use schedule_ir::{BufferId, ChunkId, ChunkIds, Instr, Machine, NodeId, Phase, Ranks, RecvMode};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// One operation, with channels named by (source buffer, peer) until thread blocks give them
/// ids.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Op {
    /// `put`: `cnt` chunks from the local `src` into the peer's scratch at `dst_off`, over the
    /// memory channel that reads `src.buf`.
    Put {
        peer: u32,
        src: Loc,
        dst_off: u32,
        cnt: u32,
    },
    /// `signal` on the channels reading `key` to `peers`.
    Signal { key: Buf, peers: Vec<u32> },
    /// `wait` on the channels reading `key` to `peers` (each peer's signal on its own end).
    Wait { key: Buf, peers: Vec<u32> },
    /// `copy`: `dst = src`.
    Copy { src: Loc, dst: Loc, cnt: u32 },
    /// `re`: `dst = src + add`.
    Reduce {
        src: Loc,
        add: Loc,
        dst: Loc,
        cnt: u32,
    },
    /// `nop`: `__syncthreads` in the thread block.
    Nop,
    /// `barrier`: thread blocks meet at device syncer `id`.
    Barrier { id: u32, tbs: u32 },
}

/// One GPU's operations, per step, before they are cut into thread blocks.
pub(super) struct Stream {
    pub(super) rank: u32,
    pub(super) node: String,
    pub(super) input_chunks: u32,
    pub(super) output_chunks: u32,
    pub(super) scratch_chunks: u32,
    /// Per BSP step (and a last entry for the final copies), the operations in order.
    pub(super) steps: Vec<(u32, Vec<Op>)>,
}

/// A transfer as the receiver finds it: the slots its chunks landed in, and the channel each
/// was put on.
type Landed = Vec<(u32, Buf)>;

/// What a write puts into its chunk.
enum Value {
    /// The chunk at this location, as the step started.
    Replace(Loc),
    /// The chunk plus the one at this location.
    Add(Loc),
}

/// One write of a step, before ordering.
struct Write {
    op: Op,
    /// What it reads as the step started: it must run before whatever replaces that.
    reads: Vec<Loc>,
    /// An earlier write to the same chunk in the same step, which this one adds to.
    after: Option<usize>,
}

/// A step's writes at one node, in program order.
#[derive(Default)]
struct Writes {
    list: Vec<Write>,
    /// The last write of each (buffer, chunk).
    last: BTreeMap<(BufferId, ChunkId), usize>,
}

impl Writes {
    /// Adds the write of `value` into chunk `dst` of node `n`. Several receives that combine
    /// into one chunk in one step add up: each after the one before, on its result.
    fn write(
        &mut self,
        b: &Builder<'_>,
        n: usize,
        dst: (BufferId, ChunkId),
        value: Value,
    ) -> Result<(), MscclppError> {
        let rank = b.rank[n].ok_or_else(|| b.internal("a switch writes".into()))?;
        let to = b.layout.store(rank, dst.0, dst.1);
        let previous = self.last.get(&dst).copied();
        let (op, reads) = match value {
            Value::Replace(src) => (
                Op::Copy {
                    src,
                    dst: to,
                    cnt: 1,
                },
                vec![src],
            ),
            Value::Add(add) => {
                let (src, mut reads) = match previous {
                    Some(_) => (to, Vec::new()),
                    None => {
                        let cur = b.current(n, dst.0, dst.1)?;
                        (cur, vec![cur])
                    }
                };
                reads.push(add);
                (
                    Op::Reduce {
                        src,
                        add,
                        dst: to,
                        cnt: 1,
                    },
                    reads,
                )
            }
        };
        self.last.insert(dst, self.list.len());
        self.list.push(Write {
            op,
            reads,
            after: previous,
        });
        Ok(())
    }
}

struct Builder<'a> {
    machine: &'a Machine,
    phase: &'a Phase,
    layout: Layout,
    rank: Vec<Option<u32>>,
    names: Vec<String>,
    /// Where a chunk of a buffer lives once written.
    moved: HashMap<(usize, BufferId, ChunkId), Loc>,
    /// The next free scratch slot of each node.
    next_slot: Vec<u32>,
}

/// Builds every GPU's operations for `phase`.
pub(super) fn build(machine: &Machine, phase: &Phase) -> Result<Vec<Stream>, MscclppError> {
    let ranks = Ranks::new(machine);
    let rank: Vec<Option<u32>> = (0..machine.nodes.len())
        .map(|n| ranks.rank(NodeId::new(n)).map(|r| r.0))
        .collect();
    let names: Vec<String> = machine.nodes.iter().map(|n| n.name.clone()).collect();
    for (n, program) in phase.programs.iter().enumerate() {
        if rank.get(n).copied().flatten().is_none() && program.steps.iter().any(|s| !s.is_empty()) {
            return Err(MscclppError::InNetwork {
                phase: phase.name.clone(),
                node: names[n].clone(),
            });
        }
    }
    let layout =
        Layout::new(phase, &ranks, &names, u32::MAX).map_err(|e| layout_error(phase, e))?;
    let base = layout.scratch_region();
    let mut b = Builder {
        machine,
        phase,
        layout,
        next_slot: vec![base; rank.len()],
        rank,
        names,
        moved: HashMap::new(),
    };
    let mut steps: Vec<Vec<(u32, Vec<Op>)>> = vec![Vec::new(); b.rank.len()];
    for k in 0..phase.steps {
        let (sends, landed) = b.sends(k)?;
        let mut updates = Vec::new();
        for (n, ops) in sends.into_iter().enumerate() {
            let Some(_) = b.rank[n] else { continue };
            let mut ops = ops;
            ops.extend(b.receives(n, k, &landed, &mut updates)?);
            if !ops.is_empty() {
                steps[n].push((k, ops));
            }
        }
        b.moved.extend(updates);
    }
    let mut streams = Vec::new();
    for (n, r) in b.rank.iter().enumerate() {
        let Some(r) = *r else { continue };
        let finals = b.final_copies(n, r)?;
        if !finals.is_empty() {
            steps[n].push((phase.steps, finals));
        }
        let scratch = steps[n]
            .iter()
            .flat_map(|(_, ops)| ops.iter().flat_map(scratch_ends))
            .max()
            .unwrap_or(0);
        streams.push(Stream {
            rank: r,
            node: b.names[n].clone(),
            input_chunks: b.layout.i_chunks(),
            output_chunks: b.layout.o_chunks(),
            scratch_chunks: scratch,
            steps: std::mem::take(&mut steps[n]),
        });
    }
    // A put lands in the peer's scratch: size the receiver for it too.
    let landed: Vec<(u32, u32)> = streams
        .iter()
        .flat_map(|s| s.steps.iter().flat_map(|(_, ops)| ops.iter()))
        .filter_map(|op| match op {
            Op::Put {
                peer, dst_off, cnt, ..
            } => Some((*peer, dst_off + cnt)),
            _ => None,
        })
        .collect();
    for (peer, end) in landed {
        if let Some(s) = streams.iter_mut().find(|s| s.rank == peer) {
            s.scratch_chunks = s.scratch_chunks.max(end);
        }
    }
    Ok(streams)
}

/// One past the last local scratch chunk an operation touches.
fn scratch_ends(op: &Op) -> Option<u32> {
    let locs: Vec<(Loc, u32)> = match op {
        Op::Put { src, cnt, .. } => vec![(*src, *cnt)],
        Op::Copy { src, dst, cnt } => vec![(*src, *cnt), (*dst, *cnt)],
        Op::Reduce {
            src, add, dst, cnt, ..
        } => vec![(*src, *cnt), (*add, *cnt), (*dst, *cnt)],
        _ => Vec::new(),
    };
    locs.into_iter()
        .filter(|(l, _)| l.buf == Buf::Scratch)
        .map(|(l, c)| l.off + c)
        .max()
}

fn layout_error(phase: &Phase, e: LayoutError) -> MscclppError {
    let name = phase.name.clone();
    match e {
        LayoutError::NoChunks => MscclppError::NoChunks { phase: name },
        LayoutError::UnequalBlocks {
            node,
            owned,
            chunks,
            ranks,
        } => MscclppError::UnequalBlocks {
            phase: name,
            collective: phase.collective.to_string(),
            node,
            owned,
            chunks,
            ranks,
        },
        other => MscclppError::Internal {
            phase: name,
            detail: other.to_string(),
        },
    }
}

/// Splits channel groups into operations of at most [`MAX_OP_CHANNELS`] channels.
fn grouped(by_key: BTreeMap<Buf, BTreeSet<u32>>, wait: bool) -> Vec<Op> {
    let mut ops = Vec::new();
    for (key, peers) in by_key {
        let peers: Vec<u32> = peers.into_iter().collect();
        for group in peers.chunks(MAX_OP_CHANNELS) {
            let peers = group.to_vec();
            ops.push(if wait {
                Op::Wait { key, peers }
            } else {
                Op::Signal { key, peers }
            });
        }
    }
    ops
}

impl<'a> Builder<'a> {
    fn internal(&self, detail: String) -> MscclppError {
        MscclppError::Internal {
            phase: self.phase.name.clone(),
            detail,
        }
    }

    fn instrs(&self, n: usize, k: u32) -> &'a [Instr] {
        let phase: &'a Phase = self.phase;
        phase
            .programs
            .get(n)
            .and_then(|p| p.steps.get(k as usize))
            .map_or(&[], Vec::as_slice)
    }

    /// Where chunk `c` of buffer `buf` of node `n` is at the start of the current step.
    fn current(&self, n: usize, buf: BufferId, c: ChunkId) -> Result<Loc, MscclppError> {
        if let Some(&loc) = self.moved.get(&(n, buf, c)) {
            return Ok(loc);
        }
        let rank = self.rank[n].ok_or_else(|| self.internal("a switch holds data".into()))?;
        if buf == DATA {
            return self
                .layout
                .input(rank, c)
                .map(|off| Loc {
                    buf: Buf::Input,
                    off,
                })
                .ok_or_else(|| {
                    self.internal(format!(
                        "{} reads chunk {} before holding it",
                        self.names[n],
                        c.index()
                    ))
                });
        }
        Ok(self.layout.store(rank, buf, c))
    }

    /// Checks a send's route: through switches only.
    fn check_route(&self, n: usize, k: u32, instr: &Instr) -> Result<(), MscclppError> {
        let Instr::Send { link, via, to, .. } = instr else {
            return Ok(());
        };
        let mut at = NodeId::new(n);
        for l in std::iter::once(link).chain(via) {
            let link = &self.machine.links[l.index()];
            at = if link.a == at { link.b } else { link.a };
            if at != *to && self.rank[at.index()].is_some() {
                return Err(MscclppError::RouteThroughGpu {
                    phase: self.phase.name.clone(),
                    step: k,
                    from: self.names[n].clone(),
                    to: self.names[to.index()].clone(),
                    via: self.names[at.index()].clone(),
                });
            }
        }
        if self.rank[to.index()].is_none() {
            return Err(MscclppError::InNetwork {
                phase: self.phase.name.clone(),
                node: self.names[to.index()].clone(),
            });
        }
        Ok(())
    }

    /// Every node's puts and signals of step `k`, and where each transfer lands, by
    /// (receiver, sender, chunks, occurrence).
    #[allow(clippy::type_complexity)]
    fn sends(
        &mut self,
        k: u32,
    ) -> Result<
        (
            Vec<Vec<Op>>,
            HashMap<(usize, usize, ChunkIds, usize), Landed>,
        ),
        MscclppError,
    > {
        let mut all = Vec::with_capacity(self.rank.len());
        let mut landed = HashMap::new();
        for n in 0..self.rank.len() {
            let mut ops = Vec::new();
            let mut signals: BTreeMap<Buf, BTreeSet<u32>> = BTreeMap::new();
            let mut seen: HashMap<(usize, ChunkIds), usize> = HashMap::new();
            for instr in self.instrs(n, k) {
                let Instr::Send {
                    to, buffer, chunks, ..
                } = instr
                else {
                    continue;
                };
                self.check_route(n, k, instr)?;
                let to = to.index();
                let peer = self.rank[to].ok_or_else(|| self.internal("send to a switch".into()))?;
                let occurrence = seen.entry((to, chunks.clone())).or_insert(0);
                let mut slots = Vec::new();
                for c in chunks {
                    let src = self.current(n, *buffer, c)?;
                    let slot = self.next_slot[to];
                    self.next_slot[to] += 1;
                    slots.push((slot, src.buf));
                    signals.entry(src.buf).or_default().insert(peer);
                    push_merged(
                        &mut ops,
                        Op::Put {
                            peer,
                            src,
                            dst_off: slot,
                            cnt: 1,
                        },
                    );
                }
                landed.insert((to, n, chunks.clone(), *occurrence), slots);
                *occurrence += 1;
            }
            ops.extend(grouped(signals, false));
            all.push(ops);
        }
        Ok((all, landed))
    }

    /// Node `n`'s waits, then its stores and reductions of step `k` in an order where every
    /// read comes before the write that replaces it. The new locations go to `updates`.
    fn receives(
        &self,
        n: usize,
        k: u32,
        landed: &HashMap<(usize, usize, ChunkIds, usize), Landed>,
        updates: &mut Vec<((usize, BufferId, ChunkId), Loc)>,
    ) -> Result<Vec<Op>, MscclppError> {
        let rank = self.rank[n].ok_or_else(|| self.internal("a switch receives".into()))?;
        let mut waits: BTreeMap<Buf, BTreeSet<u32>> = BTreeMap::new();
        let mut writes = Writes::default();
        let mut seen: HashMap<(usize, ChunkIds), usize> = HashMap::new();
        for instr in self.instrs(n, k) {
            match instr {
                Instr::Recv {
                    from,
                    buffer,
                    chunks,
                    mode,
                    ..
                } => {
                    let from = from.index();
                    let peer = self.rank[from]
                        .ok_or_else(|| self.internal("receive from a switch".into()))?;
                    let occurrence = seen.entry((from, chunks.clone())).or_insert(0);
                    let key = (n, from, chunks.clone(), *occurrence);
                    *occurrence += 1;
                    let slots = landed.get(&key).ok_or_else(|| {
                        self.internal(format!("step {k}: a receive of {} has no send", rank))
                    })?;
                    for (c, &(slot, key)) in chunks.iter().zip(slots) {
                        waits.entry(key).or_default().insert(peer);
                        let at = Loc {
                            buf: Buf::Scratch,
                            off: slot,
                        };
                        let dst = (*buffer, c);
                        let value = match mode {
                            RecvMode::Store => Value::Replace(at),
                            RecvMode::Reduce => Value::Add(at),
                        };
                        writes.write(self, n, dst, value)?;
                    }
                }
                Instr::Copy { src, dst, chunks } | Instr::Reduce { src, dst, chunks } => {
                    for c in chunks {
                        let from = self.current(n, *src, c)?;
                        let value = if matches!(instr, Instr::Copy { .. }) {
                            Value::Replace(from)
                        } else {
                            Value::Add(from)
                        };
                        writes.write(self, n, (*dst, c), value)?;
                    }
                }
                Instr::Scale { .. } => {
                    return Err(self.internal("a scale in a phase with op Sum".into()));
                }
                Instr::Send { .. } => {}
            }
        }
        updates.extend(writes.last.iter().map(|(&(b, c), &i)| {
            let dst = match writes.list[i].op {
                Op::Copy { dst, .. } | Op::Reduce { dst, .. } => dst,
                _ => Loc {
                    buf: Buf::Scratch,
                    off: 0,
                },
            };
            ((n, b, c), dst)
        }));
        let mut ops = grouped(waits, true);
        for op in self.ordered(n, k, writes.list)? {
            push_merged(&mut ops, op);
        }
        Ok(ops)
    }

    /// Orders one step's writes so that every read of a chunk comes before the write that
    /// replaces it (BSP reads see the start of the step).
    fn ordered(&self, n: usize, k: u32, writes: Vec<Write>) -> Result<Vec<Op>, MscclppError> {
        let touched: Vec<(Vec<Loc>, Vec<Loc>)> = writes
            .iter()
            .map(|w| (w.reads.clone(), Hazards::touches(&w.op).1))
            .collect();
        let count = writes.len();
        // before[j]: writes that must run before j (they read what j replaces).
        let mut before = vec![0usize; count];
        let mut after: Vec<Vec<usize>> = vec![Vec::new(); count];
        for (j, w) in writes.iter().enumerate() {
            if let Some(i) = w.after {
                before[j] += 1;
                after[i].push(j);
            }
        }
        for i in 0..count {
            for j in 0..count {
                if i != j && touched[i].0.iter().any(|l| touched[j].1.contains(l)) {
                    before[j] += 1;
                    after[i].push(j);
                }
            }
        }
        let mut ready: BTreeSet<usize> = (0..count).filter(|&j| before[j] == 0).collect();
        let mut order = Vec::with_capacity(count);
        while let Some(i) = ready.pop_first() {
            order.push(i);
            for &j in &after[i] {
                before[j] -= 1;
                if before[j] == 0 {
                    ready.insert(j);
                }
            }
        }
        if order.len() < count {
            let stuck = (0..count).find(|&j| before[j] > 0).unwrap_or(0);
            return Err(MscclppError::Unorderable {
                phase: self.phase.name.clone(),
                step: k,
                node: self.names[n].clone(),
                detail: format!(
                    "the write of {} must come after a read that must come after it",
                    touched[stuck]
                        .1
                        .first()
                        .map_or(String::new(), Loc::to_string)
                ),
            });
        }
        let mut slots: Vec<Option<Op>> = writes.into_iter().map(|w| Some(w.op)).collect();
        Ok(order.into_iter().filter_map(|i| slots[i].take()).collect())
    }

    /// Copies into the output of every chunk the collective leaves there that is still
    /// elsewhere (in the input, never written).
    fn final_copies(&self, n: usize, rank: u32) -> Result<Vec<Op>, MscclppError> {
        let mut ops = Vec::new();
        for c in 0..self.phase.chunks.len() {
            let c = ChunkId::new(c);
            let Some(off) = self.layout.output(rank, c) else {
                continue;
            };
            let out = Loc {
                buf: Buf::Output,
                off,
            };
            let at = self.current(n, DATA, c)?;
            if at != out {
                push_merged(
                    &mut ops,
                    Op::Copy {
                        src: at,
                        dst: out,
                        cnt: 1,
                    },
                );
            }
        }
        Ok(ops)
    }
}

/// Appends `op`, or widens the last operation to cover it when both move consecutive chunks
/// the same way and neither touches what the other does.
fn push_merged(ops: &mut Vec<Op>, op: Op) {
    let next = |l: &Loc, n: u32| Loc {
        buf: l.buf,
        off: l.off + n,
    };
    if let Some(last) = ops.last_mut() {
        let mut h = Hazards::default();
        h.record(last);
        if !h.needs_nop(&op) {
            match (last, &op) {
                (
                    Op::Put {
                        peer,
                        src,
                        dst_off,
                        cnt,
                    },
                    Op::Put {
                        peer: p2,
                        src: s2,
                        dst_off: d2,
                        ..
                    },
                ) if peer == p2 && next(src, *cnt) == *s2 && *dst_off + *cnt == *d2 => {
                    *cnt += 1;
                    return;
                }
                (
                    Op::Copy { src, dst, cnt },
                    Op::Copy {
                        src: s2, dst: d2, ..
                    },
                ) if next(src, *cnt) == *s2 && next(dst, *cnt) == *d2 => {
                    *cnt += 1;
                    return;
                }
                (
                    Op::Reduce { src, add, dst, cnt },
                    Op::Reduce {
                        src: s2,
                        add: a2,
                        dst: d2,
                        ..
                    },
                ) if next(src, *cnt) == *s2 && next(add, *cnt) == *a2 && next(dst, *cnt) == *d2 => {
                    *cnt += 1;
                    return;
                }
                _ => {}
            }
        }
    }
    ops.push(op);
}
