//! The operations of one GPU: buffer locations step by step, MSCCL step types, thread blocks,
//! and the waits that keep the BSP order between thread blocks.

use super::plan::{step_instrs, Channels, Planner};
use super::{Buf, Dep, Gpu, Loc, MscclError, Step, StepKind, ThreadBlock};
use crate::emit::layout::DATA;
use schedule_ir::{BufferId, ChunkId, Instr, NodeId, RecvMode};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// An operation's place in time: the BSP step, 0 = reads / 1 = writes, the program index, then
/// the chunk's position in its instruction's list, then the order of operations made from one
/// chunk.
type Time = (u32, u8, usize, usize, u8);
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
        let layout = &self.layout;
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
        let absorbed: BTreeSet<usize> = fused.iter().flatten().copied().collect();
        // One local thread block per window that has local operations.
        let mut local_tb: BTreeMap<u32, usize> = BTreeMap::new();
        let mut local = |tbs: &mut Vec<TbPlan>, k: u32| {
            let window = self.window(k);
            *local_tb.entry(window).or_insert_with(|| {
                tbs.push(TbPlan {
                    window,
                    send: None,
                    recv: None,
                    chan: 0,
                });
                tbs.len() - 1
            })
        };
        let mut loc: HashMap<(BufferId, ChunkId), Loc> = HashMap::new();
        for c in (0..self.phase.chunks.len()).map(ChunkId::new) {
            if let Some(off) = layout.input(rank, c) {
                loc.insert(
                    (DATA, c),
                    Loc {
                        buf: Buf::Input,
                        off,
                    },
                );
            }
        }
        let name = &self.names[node.index()];
        let read = |loc: &HashMap<(BufferId, ChunkId), Loc>, b: BufferId, c: ChunkId| {
            loc.get(&(b, c)).copied().ok_or_else(|| {
                self.internal(format!("{name} reads {c} of {b}, which holds no value"))
            })
        };
        let access = |time: Time, loc: Loc, read: bool, write: bool| Access {
            time,
            loc,
            read,
            write,
        };
        let mut ops = Vec::new();
        for k in 0..self.phase.steps {
            let instrs = step_instrs(self.phase, node.index(), k);
            let mut sources: HashMap<(usize, ChunkId), Loc> = HashMap::new();
            for (j, instr) in instrs.iter().enumerate() {
                match instr {
                    Instr::Send { buffer, chunks, .. } => {
                        let Some(&t) = self.send_at.get(&(node, k, j)) else {
                            return Err(self.internal(format!("{name}: unmatched send")));
                        };
                        if absorbed.contains(&t) {
                            continue;
                        }
                        let tr = &self.transfers[t];
                        let tb = self.lookup(&sender_tb, (tr.conn, self.window(k)))?;
                        for (p, &c) in chunks.iter().enumerate() {
                            let src = read(&loc, *buffer, c)?;
                            let time = (k, 0, tr.recv_j, p, 0);
                            ops.push(Op {
                                tb,
                                anchor: time,
                                kind: StepKind::Send,
                                src,
                                dst: src,
                                access: vec![access(time, src, true, false)],
                            });
                        }
                    }
                    Instr::Copy { src, chunks, .. } | Instr::Reduce { src, chunks, .. } => {
                        for &c in chunks {
                            sources.insert((j, c), read(&loc, *src, c)?);
                        }
                    }
                    Instr::Recv { .. } | Instr::Scale { .. } => {}
                }
            }
            for (j, instr) in instrs.iter().enumerate() {
                match instr {
                    Instr::Recv {
                        buffer,
                        chunks,
                        mode,
                        ..
                    } => {
                        let Some(&t) = self.recv_at.get(&(node, k, j)) else {
                            return Err(self.internal(format!("{name}: unmatched receive")));
                        };
                        let tr = &self.transfers[t];
                        let tb = self.lookup(&receiver_tb, (tr.conn, self.window(k)))?;
                        for (p, &c) in chunks.iter().enumerate() {
                            let time = (k, 1, j, p, 0);
                            let store = layout.store(rank, *buffer, c);
                            let (kind, src, dst, accesses, now) = match (mode, fused[t]) {
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
                                    let here = read(&loc, *buffer, c)?;
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
                                        Some(u) if self.dead_after(tr, u, c, rank) => (
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
                                Some(l) => loc.insert((*buffer, c), l),
                                None => loc.remove(&(*buffer, c)),
                            };
                            ops.push(Op {
                                tb,
                                anchor: time,
                                kind,
                                src,
                                dst,
                                access: accesses,
                            });
                        }
                    }
                    Instr::Copy { dst, chunks, .. } => {
                        for (p, &c) in chunks.iter().enumerate() {
                            let src = self.lookup(&sources, (j, c))?;
                            let store = layout.store(rank, *dst, c);
                            let time = (k, 1, j, p, 0);
                            ops.push(Op {
                                tb: local(tbs, k),
                                anchor: time,
                                kind: StepKind::Copy,
                                src,
                                dst: store,
                                access: vec![
                                    access((k, 0, j, p, 0), src, true, false),
                                    access(time, store, false, true),
                                ],
                            });
                            loc.insert((*dst, c), store);
                        }
                    }
                    Instr::Reduce { dst, chunks, .. } => {
                        for (p, &c) in chunks.iter().enumerate() {
                            let src = self.lookup(&sources, (j, c))?;
                            let here = read(&loc, *dst, c)?;
                            let store = layout.store(rank, *dst, c);
                            let tb = local(tbs, k);
                            if here != store {
                                // `re` combines in place: move the value to its store first.
                                let time = (k, 1, j, p, 0);
                                ops.push(Op {
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
                            let time = (k, 1, j, p, 1);
                            ops.push(Op {
                                tb,
                                anchor: time,
                                kind: StepKind::Reduce,
                                src,
                                dst: store,
                                access: vec![
                                    access((k, 0, j, p, 0), src, true, false),
                                    access(time, store, true, true),
                                ],
                            });
                            loc.insert((*dst, c), store);
                        }
                    }
                    Instr::Send { .. } => {}
                    Instr::Scale { .. } => {
                        // `build` refuses mean phases before planning, and only they scale.
                        return Err(self.internal(format!(
                            "{name} scales a chunk; MSCCL has no division step"
                        )));
                    }
                }
            }
        }
        // Chunks that must end in the output but were never stored there.
        for c in (0..self.phase.chunks.len()).map(ChunkId::new) {
            let Some(off) = layout.output(rank, c) else {
                continue;
            };
            let out = Loc {
                buf: Buf::Output,
                off,
            };
            let here = read(&loc, DATA, c)?;
            if here != out {
                let time = (self.phase.steps, 1, c.index(), 0, 0);
                ops.push(Op {
                    tb: local(tbs, self.phase.steps),
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
        Ok(ops)
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
            list.sort_by_key(|&i| (ops[i].anchor, i));
            for (p, &i) in list.iter().enumerate() {
                pos[i] = p;
            }
        }
        // Per operation: for every other thread block, the last of its operations to wait for.
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
        // Step indices, counting one `nop` for every wait beyond the first.
        let mut index = vec![0u32; ops.len()];
        for list in &order {
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
                self.rank[if to { conn.to } else { conn.from }.index()]
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
