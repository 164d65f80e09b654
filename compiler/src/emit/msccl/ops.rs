//! The operations of one GPU: buffer locations step by step, MSCCL step types, thread blocks,
//! and the waits that keep the BSP order between thread blocks.

use super::plan::{step_instrs, Channels, Planner};
use super::{Buf, Dep, Gpu, Loc, MscclError, Step, StepKind, ThreadBlock};
use crate::emit::layout::DATA;
use schedule_ir::{BufferId, ChunkId, Instr, NodeId, RecvMode};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// An operation's place in time: the BSP step, 0 = reads / 1 = writes, the round (for a send or
/// receive, the message's place among its connection's messages in the step: the chunk's
/// position in the transfer, since a connection carries at most one transfer per step; 0 for
/// local operations), the program index, the chunk's position in its instruction's list, then
/// the order of operations made from one chunk.
type Time = (u32, u8, usize, usize, usize, u8);
/// One use of a memory cell: when, by which operation, whether it reads, whether it writes.
type CellUse = (Time, usize, bool, bool);

/// A memory access of an operation.
struct Access {
    time: Time,
    loc: Loc,
    read: bool,
    write: bool,
}

/// One MSCCL step before dependencies are known.
struct Op {
    tb: usize,
    anchor: Time,
    kind: StepKind,
    src: Loc,
    dst: Loc,
    access: Vec<Access>,
}

impl Op {
    /// Its place in its thread block: by BSP step, then round, then reads before writes. A
    /// connection's `r`-th message of a step is received before its `r + 1`-th is sent, so
    /// no thread block sends twice on a connection before its peer could take the first
    /// message, and both ends meet the messages in the same order (`docs/msccl.md`, "Steps,
    /// fusion and order").
    fn order(&self) -> (u32, usize, u8, usize, usize, u8) {
        let (step, part, round, j, i, sub) = self.anchor;
        (step, round, part, j, i, sub)
    }
}

/// A thread block before its steps are laid out.
struct TbPlan {
    window: u32,
    send: Option<usize>,
    recv: Option<usize>,
    chan: u32,
}

impl Planner<'_> {
    /// The thread blocks and steps of one GPU: per window, one thread block per incoming
    /// connection (with the outgoing one it is paired with) and per unpaired outgoing one.
    pub(super) fn gpu(
        &self,
        node: NodeId,
        rank: u32,
        forward: &BTreeMap<usize, usize>,
        (chan, active): (&Channels, &[BTreeSet<u32>]),
        fused: &[Option<usize>],
    ) -> Result<Gpu, MscclError> {
        let backward: BTreeMap<usize, usize> = forward.iter().map(|(&x, &y)| (y, x)).collect();
        let mut tbs: Vec<TbPlan> = Vec::new();
        for (c, conn) in self.conns.iter().enumerate() {
            if conn.to == node {
                let send = forward.get(&c).copied();
                let windows = active[c]
                    .iter()
                    .chain(send.iter().flat_map(|&s| &active[s]));
                for &window in windows.collect::<BTreeSet<_>>() {
                    tbs.push(TbPlan {
                        window,
                        send,
                        recv: Some(c),
                        chan: self.lookup(chan, (c, window))?,
                    });
                }
            } else if conn.from == node && !backward.contains_key(&c) {
                for &window in &active[c] {
                    tbs.push(TbPlan {
                        window,
                        send: Some(c),
                        recv: None,
                        chan: self.lookup(chan, (c, window))?,
                    });
                }
            }
        }
        tbs.sort_by_key(|t| (t.window, t.chan, t.recv, t.send));
        let ops = self.ops(node, rank, &mut tbs, fused)?;
        self.lay_out(node, rank, &tbs, ops)
    }

    /// The GPU's operations, in BSP order, each placed in its thread block. A local thread
    /// block is appended to `tbs` when local copies or reductions are needed.
    fn ops(
        &self,
        node: NodeId,
        rank: u32,
        tbs: &mut Vec<TbPlan>,
        fused: &[Option<usize>],
    ) -> Result<Vec<Op>, MscclError> {
        let mut walk = Walk::new(self, node, rank, tbs, fused);
        for k in 0..self.phase.steps {
            let instrs = step_instrs(self.phase, node.index(), k);
            // Reads happen before writes in a step: sends and local sources first.
            let mut sources: HashMap<(usize, ChunkId), Loc> = HashMap::new();
            for (j, instr) in instrs.iter().enumerate() {
                match instr {
                    Instr::Send { buffer, chunks, .. } => {
                        walk.send(k, j, *buffer, &chunks.to_vec())?
                    }
                    Instr::Copy { src, chunks, .. } | Instr::Reduce { src, chunks, .. } => {
                        for c in chunks {
                            sources.insert((j, c), walk.read(*src, c)?);
                        }
                    }
                    Instr::Recv { .. } | Instr::Scale { .. } => {}
                }
            }
            // Then the writes, round by round: the `r`-th chunk of every receive (local
            // operations in round 0), so that receives of one step into one cell from several
            // connections take turns in the order of their rounds, as their thread blocks run.
            let lists: Vec<Vec<ChunkId>> = instrs
                .iter()
                .map(|instr| match instr {
                    Instr::Recv { chunks, .. }
                    | Instr::Copy { chunks, .. }
                    | Instr::Reduce { chunks, .. } => chunks.to_vec(),
                    Instr::Send { .. } | Instr::Scale { .. } => Vec::new(),
                })
                .collect();
            let mut writes: Vec<(usize, usize, usize)> = Vec::new();
            for (j, instr) in instrs.iter().enumerate() {
                let n = lists[j].len();
                match instr {
                    Instr::Recv { .. } => writes.extend((0..n).map(|i| (self.round(i), j, i))),
                    Instr::Copy { .. } | Instr::Reduce { .. } => {
                        writes.extend((0..n).map(|i| (0, j, i)))
                    }
                    Instr::Send { .. } => {}
                    Instr::Scale { .. } => {
                        // `build` refuses mean phases before planning, and only they scale.
                        return Err(self.internal(format!(
                            "{} scales a chunk; MSCCL has no division step",
                            walk.name
                        )));
                    }
                }
            }
            writes.sort_unstable();
            for (_, j, i) in writes {
                let one = [(i, lists[j][i])];
                match &instrs[j] {
                    Instr::Recv { buffer, mode, .. } => walk.recv(k, j, *buffer, &one, *mode)?,
                    Instr::Copy { dst, .. } => walk.copy(tbs, (k, j), *dst, &one, &sources)?,
                    Instr::Reduce { dst, .. } => walk.reduce(tbs, (k, j), *dst, &one, &sources)?,
                    Instr::Send { .. } | Instr::Scale { .. } => {}
                }
            }
        }
        walk.finish(tbs)?;
        Ok(walk.ops)
    }

    /// Orders each thread block's operations, adds the waits that keep the BSP order between
    /// thread blocks (in out-of-place and in-place calls), and writes the steps.
    fn lay_out(
        &self,
        node: NodeId,
        rank: u32,
        tbs: &[TbPlan],
        ops: Vec<Op>,
    ) -> Result<Gpu, MscclError> {
        let mut order: Vec<Vec<usize>> = vec![Vec::new(); tbs.len()];
        for (i, op) in ops.iter().enumerate() {
            order[op.tb].push(i);
        }
        let mut pos = vec![0usize; ops.len()];
        for list in &mut order {
            list.sort_by_key(|&i| (ops[i].order(), i));
            for (p, &i) in list.iter().enumerate() {
                pos[i] = p;
            }
        }
        let waits = self.waits(node, rank, &ops, &pos)?;
        self.write(node, rank, tbs, &ops, &order, &waits)
    }

    /// Per operation: for every other thread block, the position of the last of its
    /// operations to wait for, so that every memory cell is written and read in BSP order in
    /// out-of-place and in-place calls alike. `pos` is each operation's place in its thread
    /// block.
    fn waits(
        &self,
        node: NodeId,
        rank: u32,
        ops: &[Op],
        pos: &[usize],
    ) -> Result<Vec<BTreeMap<usize, usize>>, MscclError> {
        let mut waits: Vec<BTreeMap<usize, usize>> = vec![BTreeMap::new(); ops.len()];
        for in_place in [false, true] {
            let cell = |l: Loc| {
                if in_place {
                    self.layout.in_place(rank, l)
                } else {
                    l
                }
            };
            let mut cells: HashMap<Loc, Vec<CellUse>> = HashMap::new();
            for (i, op) in ops.iter().enumerate() {
                let self_copy = op.kind == StepKind::Copy && cell(op.src) == cell(op.dst);
                for a in &op.access {
                    let write = a.write && !self_copy;
                    if a.read || write {
                        cells
                            .entry(cell(a.loc))
                            .or_default()
                            .push((a.time, i, a.read, write));
                    }
                }
            }
            let mut cells: Vec<(Loc, Vec<CellUse>)> = cells.into_iter().collect();
            cells.sort_by_key(|(l, _)| *l);
            for (_, mut uses) in cells {
                uses.sort_by_key(|&(time, i, _, _)| (time, i));
                let mut last_write: Option<usize> = None;
                let mut readers: Vec<usize> = Vec::new();
                for (_, i, r, w) in uses {
                    let mut before: Vec<usize> = last_write.into_iter().collect();
                    if w {
                        before.append(&mut readers);
                        last_write = Some(i);
                    } else if r {
                        readers.push(i);
                    }
                    for b in before {
                        if b == i {
                            continue;
                        }
                        if ops[b].tb == ops[i].tb {
                            if pos[b] > pos[i] {
                                return Err(MscclError::Unorderable {
                                    phase: self.phase.name.clone(),
                                    step: ops[i].anchor.0,
                                    node: self.names[node.index()].clone(),
                                    detail: format!(
                                        "its `{}` into {} must follow its `{}` into {} (step {}), \
                                         but one thread block runs them the other way round",
                                        ops[i].kind.code(),
                                        ops[i].dst,
                                        ops[b].kind.code(),
                                        ops[b].dst,
                                        ops[b].anchor.0
                                    ),
                                });
                            }
                        } else {
                            let w = waits[i].entry(ops[b].tb).or_insert(pos[b]);
                            *w = (*w).max(pos[b]);
                        }
                    }
                }
            }
        }
        Ok(waits)
    }

    /// The GPU's thread blocks: each operation's step after a `nop` for every wait beyond the
    /// first, with `hasdep` on every step another waits on.
    fn write(
        &self,
        node: NodeId,
        rank: u32,
        tbs: &[TbPlan],
        ops: &[Op],
        order: &[Vec<usize>],
        waits: &[BTreeMap<usize, usize>],
    ) -> Result<Gpu, MscclError> {
        // Step indices, counting one `nop` for every wait beyond the first.
        let mut index = vec![0u32; ops.len()];
        for list in order {
            let mut s = 0u32;
            for &i in list {
                s += waits[i].len().saturating_sub(1) as u32;
                index[i] = s;
                s += 1;
            }
        }
        let mut awaited: BTreeSet<(usize, u32)> = BTreeSet::new();
        let mut threadblocks = Vec::with_capacity(tbs.len());
        let peer = |c: Option<usize>, to: bool| {
            c.and_then(|c| {
                let conn = &self.conns[c];
                self.ranks
                    .rank(if to { conn.to } else { conn.from })
                    .map(|r| r.0)
            })
        };
        for (t, plan) in tbs.iter().enumerate() {
            let mut steps = Vec::new();
            for &i in &order[t] {
                let op = &ops[i];
                let deps: Vec<Dep> = waits[i]
                    .iter()
                    .map(|(&tb, &p)| Dep {
                        tb: tb as u32,
                        step: index[order[tb][p]],
                    })
                    .collect();
                for d in &deps {
                    awaited.insert((d.tb as usize, d.step));
                }
                let (last, rest) = match deps.split_last() {
                    Some((last, rest)) => (Some(*last), rest),
                    None => (None, &[][..]),
                };
                for d in rest {
                    let nothing = Loc {
                        buf: Buf::Input,
                        off: 0,
                    };
                    steps.push(Step {
                        kind: StepKind::Nop,
                        src: nothing,
                        dst: nothing,
                        cnt: 0,
                        dep: Some(*d),
                        has_dep: false,
                    });
                }
                steps.push(Step {
                    kind: op.kind,
                    src: op.src,
                    dst: op.dst,
                    cnt: 1,
                    dep: last,
                    has_dep: false,
                });
            }
            threadblocks.push(ThreadBlock {
                send: peer(plan.send, true),
                recv: peer(plan.recv, false),
                chan: plan.chan,
                steps,
            });
        }
        for (tb, s) in awaited {
            if let Some(step) = threadblocks
                .get_mut(tb)
                .and_then(|t| t.steps.get_mut(s as usize))
            {
                step.has_dep = true;
            }
        }
        Ok(Gpu {
            rank,
            node: self.names[node.index()].clone(),
            i_chunks: self.layout.i_chunks(),
            o_chunks: self.layout.o_chunks(),
            s_chunks: 0,
            tbs: threadblocks,
        })
    }
}

/// A memory access at `time`.
fn access(time: Time, loc: Loc, read: bool, write: bool) -> Access {
    Access {
        time,
        loc,
        read,
        write,
    }
}

/// One GPU's program walked step by step: where each buffer's chunk is held, and the
/// operations made so far.
struct Walk<'p, 'a> {
    planner: &'p Planner<'a>,
    rank: u32,
    name: &'p str,
    node: NodeId,
    fused: &'p [Option<usize>],
    /// Transfers whose send is fused into the receive that forwards them.
    absorbed: BTreeSet<usize>,
    sender_tb: HashMap<(usize, u32), usize>,
    receiver_tb: HashMap<(usize, u32), usize>,
    /// One local thread block per window that has local operations.
    local_tb: BTreeMap<u32, usize>,
    loc: HashMap<(BufferId, ChunkId), Loc>,
    ops: Vec<Op>,
}

impl<'p, 'a> Walk<'p, 'a> {
    fn new(
        planner: &'p Planner<'a>,
        node: NodeId,
        rank: u32,
        tbs: &[TbPlan],
        fused: &'p [Option<usize>],
    ) -> Walk<'p, 'a> {
        let mut sender_tb = HashMap::new();
        let mut receiver_tb = HashMap::new();
        for (i, tb) in tbs.iter().enumerate() {
            if let Some(c) = tb.send {
                sender_tb.insert((c, tb.window), i);
            }
            if let Some(c) = tb.recv {
                receiver_tb.insert((c, tb.window), i);
            }
        }
        let mut loc = HashMap::new();
        for c in (0..planner.phase.chunks.len()).map(ChunkId::new) {
            if let Some(off) = planner.layout.input(rank, c) {
                loc.insert(
                    (DATA, c),
                    Loc {
                        buf: Buf::Input,
                        off,
                    },
                );
            }
        }
        Walk {
            planner,
            rank,
            name: &planner.names[node.index()],
            node,
            fused,
            absorbed: fused.iter().flatten().copied().collect(),
            sender_tb,
            receiver_tb,
            local_tb: BTreeMap::new(),
            loc,
            ops: Vec::new(),
        }
    }

    /// Where chunk `c` of buffer `b` is held now.
    fn read(&self, b: BufferId, c: ChunkId) -> Result<Loc, MscclError> {
        self.loc.get(&(b, c)).copied().ok_or_else(|| {
            self.planner.internal(format!(
                "{} reads {c} of {b}, which holds no value",
                self.name
            ))
        })
    }

    /// The local thread block of step `k`'s window, appended to `tbs` on first use.
    fn local(&mut self, tbs: &mut Vec<TbPlan>, k: u32) -> usize {
        let window = self.planner.window(k);
        *self.local_tb.entry(window).or_insert_with(|| {
            tbs.push(TbPlan {
                window,
                send: None,
                recv: None,
                chan: 0,
            });
            tbs.len() - 1
        })
    }

    /// A send of step `k` (instruction `j`): one `s` per chunk, unless fused into a receive.
    fn send(
        &mut self,
        k: u32,
        j: usize,
        buffer: BufferId,
        chunks: &[ChunkId],
    ) -> Result<(), MscclError> {
        let p = self.planner;
        let Some(&t) = p.send_at.get(&(self.node, k, j)) else {
            return Err(p.internal(format!("{}: unmatched send", self.name)));
        };
        if self.absorbed.contains(&t) {
            return Ok(());
        }
        let tr = &p.transfers[t];
        let tb = p.lookup(&self.sender_tb, (tr.conn, p.window(k)))?;
        for (i, &c) in chunks.iter().enumerate() {
            let src = self.read(buffer, c)?;
            let time = (k, 0, p.round(i), tr.recv_j, i, 0);
            self.ops.push(Op {
                tb,
                anchor: time,
                kind: StepKind::Send,
                src,
                dst: src,
                access: vec![access(time, src, true, false)],
            });
        }
        Ok(())
    }

    /// A receive of step `k` (instruction `j`): `r`, `rrc`, or, fused with the send that
    /// forwards it, `rcs`, `rrs` or `rrcs`.
    fn recv(
        &mut self,
        k: u32,
        j: usize,
        buffer: BufferId,
        chunks: &[(usize, ChunkId)],
        mode: RecvMode,
    ) -> Result<(), MscclError> {
        let p = self.planner;
        let Some(&t) = p.recv_at.get(&(self.node, k, j)) else {
            return Err(p.internal(format!("{}: unmatched receive", self.name)));
        };
        let tr = &p.transfers[t];
        let tb = p.lookup(&self.receiver_tb, (tr.conn, p.window(k)))?;
        for &(i, c) in chunks {
            let time = (k, 1, p.round(i), j, i, 0);
            let store = p.layout.store(self.rank, buffer, c);
            let (kind, src, dst, accesses, now) = match (mode, self.fused[t]) {
                (RecvMode::Store, f) => (
                    if f.is_some() {
                        StepKind::RecvCopySend
                    } else {
                        StepKind::Recv
                    },
                    store,
                    store,
                    vec![access(time, store, false, true)],
                    Some(store),
                ),
                (RecvMode::Reduce, f) => {
                    let here = self.read(buffer, c)?;
                    match f {
                        None => (
                            StepKind::RecvReduceCopy,
                            here,
                            store,
                            vec![
                                access(time, here, true, false),
                                access(time, store, false, true),
                            ],
                            Some(store),
                        ),
                        Some(u) if p.dead_after(tr, u, c, self.rank) => (
                            StepKind::RecvReduceSend,
                            here,
                            here,
                            vec![access(time, here, true, false)],
                            None,
                        ),
                        Some(_) => (
                            StepKind::RecvReduceCopySend,
                            here,
                            store,
                            vec![
                                access(time, here, true, false),
                                access(time, store, false, true),
                            ],
                            Some(store),
                        ),
                    }
                }
            };
            match now {
                Some(l) => self.loc.insert((buffer, c), l),
                None => self.loc.remove(&(buffer, c)),
            };
            self.ops.push(Op {
                tb,
                anchor: time,
                kind,
                src,
                dst,
                access: accesses,
            });
        }
        Ok(())
    }

    /// A local copy of step `k`, instruction `j`, from the `sources` read at the step's start.
    fn copy(
        &mut self,
        tbs: &mut Vec<TbPlan>,
        (k, j): (u32, usize),
        dst: BufferId,
        chunks: &[(usize, ChunkId)],
        sources: &HashMap<(usize, ChunkId), Loc>,
    ) -> Result<(), MscclError> {
        for &(i, c) in chunks {
            let src = self.planner.lookup(sources, (j, c))?;
            let store = self.planner.layout.store(self.rank, dst, c);
            let time = (k, 1, 0, j, i, 0);
            let tb = self.local(tbs, k);
            self.ops.push(Op {
                tb,
                anchor: time,
                kind: StepKind::Copy,
                src,
                dst: store,
                access: vec![
                    access((k, 0, 0, j, i, 0), src, true, false),
                    access(time, store, false, true),
                ],
            });
            self.loc.insert((dst, c), store);
        }
        Ok(())
    }

    /// A local reduction of step `k`, instruction `j`: `re` in place at the chunk's store,
    /// after moving the held value there if it is elsewhere.
    fn reduce(
        &mut self,
        tbs: &mut Vec<TbPlan>,
        (k, j): (u32, usize),
        dst: BufferId,
        chunks: &[(usize, ChunkId)],
        sources: &HashMap<(usize, ChunkId), Loc>,
    ) -> Result<(), MscclError> {
        for &(i, c) in chunks {
            let src = self.planner.lookup(sources, (j, c))?;
            let here = self.read(dst, c)?;
            let store = self.planner.layout.store(self.rank, dst, c);
            let tb = self.local(tbs, k);
            if here != store {
                let time = (k, 1, 0, j, i, 0);
                self.ops.push(Op {
                    tb,
                    anchor: time,
                    kind: StepKind::Copy,
                    src: here,
                    dst: store,
                    access: vec![
                        access(time, here, true, false),
                        access(time, store, false, true),
                    ],
                });
            }
            let time = (k, 1, 0, j, i, 1);
            self.ops.push(Op {
                tb,
                anchor: time,
                kind: StepKind::Reduce,
                src,
                dst: store,
                access: vec![
                    access((k, 0, 0, j, i, 0), src, true, false),
                    access(time, store, true, true),
                ],
            });
            self.loc.insert((dst, c), store);
        }
        Ok(())
    }

    /// Copies of the chunks that must end in the output but were never stored there.
    fn finish(&mut self, tbs: &mut Vec<TbPlan>) -> Result<(), MscclError> {
        let p = self.planner;
        for c in (0..p.phase.chunks.len()).map(ChunkId::new) {
            let Some(off) = p.layout.output(self.rank, c) else {
                continue;
            };
            let out = Loc {
                buf: Buf::Output,
                off,
            };
            let here = self.read(DATA, c)?;
            if here != out {
                let time = (p.phase.steps, 1, 0, c.index(), 0, 0);
                let tb = self.local(tbs, p.phase.steps);
                self.ops.push(Op {
                    tb,
                    anchor: time,
                    kind: StepKind::Copy,
                    src: here,
                    dst: out,
                    access: vec![
                        access(time, here, true, false),
                        access(time, out, false, true),
                    ],
                });
            }
        }
        Ok(())
    }
}
