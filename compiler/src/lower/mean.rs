//! The mean op for every method: a lowered phase sums, and this pass adds the scales.
//!
//! Methods lower [`ReduceOp::Mean`] exactly as a sum. [`add_scales`] then walks the phase in BSP
//! order (reads at the start of a step, writes in program order at its end, as the IR defines
//! them), tracking for every (node, buffer, chunk) how many inputs its value combines. Right
//! after every write that makes a value complete *by combining* — a receive with
//! [`RecvMode::Reduce`] or a local [`Instr::Reduce`] that brings the count to `p`, the number
//! of compute nodes — it inserts an [`Instr::Scale`] of those chunks by `p` on the same node, in
//! the same step and buffer. The division then happens once per complete sum, where the sum is
//! formed (on a compute node or a device), and every later store or copy moves the mean.
//! Counts suffice because the lowering is correct for sum: no input is combined twice, so a
//! count of `p` means every input. With one compute node nothing combines and nothing is
//! scaled; allgather and broadcast combine nothing either.

use schedule_ir::pattern::Translator;
use schedule_ir::{
    BufferId, ChunkId, Collective, Grid, Instr, LinkId, NodeId, Phase, RecvMode, ReduceOp,
};
use std::collections::HashMap;

/// Inserts the scales of a mean phase (see the [module doc](self)); `compute` are the compute
/// nodes (the inputs). Does nothing to a phase whose op is not mean.
pub fn add_scales(phase: &mut Phase, compute: &[NodeId]) {
    if !scaled(phase, compute.len()) {
        return;
    }
    let nodes = (0..phase.programs.len()).map(NodeId::new).collect();
    let mut counts = Counts::new(phase, compute.len(), compute, nodes);
    insert(phase, &mut counts, |counts, phase, k| {
        counts.reads(phase, k)
    });
}

/// Inserts the scales of a mean phase in the pattern form: `phase` holds the origin's program
/// only (`grid.nodes[0]`'s), and every grid node runs it translated ([`schedule_ir::Pattern`]).
///
/// The counts are tracked for the origin alone. What a peer sends is its translated program
/// reading its own state, and a translated program's state is the origin's translated: the
/// node at grid offset `t` holds on chunk `x` what the origin holds on `x` moved back by `t`.
/// So the origin's counts answer for every sender, and the scales land exactly where
/// [`add_scales`] puts them on the expanded schedule, translated.
pub fn add_pattern_scales(phase: &mut Phase, machine: &schedule_ir::Machine, grid: &Grid) {
    let Some(&origin) = grid.nodes.first() else {
        return;
    };
    if !scaled(phase, grid.nodes.len()) {
        return;
    }
    let translator = Translator::new(machine, grid);
    let mut counts = Counts::new(phase, grid.nodes.len(), &[origin], vec![origin]);
    insert(phase, &mut counts, |counts, phase, k| {
        counts.translated_reads(phase, k, &translator, grid)
    });
}

/// Whether the phase is a mean that combines inputs of more than one node.
fn scaled(phase: &Phase, p: usize) -> bool {
    let reducing = matches!(
        phase.collective,
        Collective::AllReduce | Collective::ReduceScatter | Collective::Reduce { .. }
    );
    phase.op == ReduceOp::Mean && p > 1 && reducing
}

/// Walks the phase's steps, staging each step's reads with `reads` and applying its writes in
/// program order, and puts a scale right after every write that completes a sum.
fn insert(
    phase: &mut Phase,
    counts: &mut Counts,
    reads: impl Fn(&Counts, &Phase, usize) -> Staged,
) {
    let divisor = counts.p;
    for k in 0..phase.steps as usize {
        let staged = reads(counts, phase, k);
        for (row, program) in phase.programs.iter_mut().enumerate() {
            let (Some(&node), Some(instrs)) = (counts.nodes.get(row), program.steps.get_mut(k))
            else {
                continue;
            };
            let mut out = Vec::with_capacity(instrs.len());
            for (j, instr) in std::mem::take(instrs).into_iter().enumerate() {
                let complete = counts.write(&staged, node, j, &instr);
                let buffer = match &instr {
                    Instr::Recv { buffer, .. } => *buffer,
                    Instr::Reduce { dst, .. } => *dst,
                    _ => BufferId(0),
                };
                out.push(instr);
                if !complete.is_empty() {
                    out.push(Instr::Scale {
                        buffer,
                        chunks: complete.into(),
                        divisor,
                    });
                }
            }
            *instrs = out;
        }
    }
}

/// A message of a step, as the verifier pairs them: sender, receiver, last link, first chunk.
type Key = (NodeId, NodeId, LinkId, Option<ChunkId>);

/// What the reads of one step saw: the counts of every message and of every local source.
#[derive(Default)]
struct Staged {
    messages: HashMap<Key, Vec<u32>>,
    /// `(node, instruction index)` → counts of a local reduce's or copy's source chunks.
    local: HashMap<(NodeId, usize), Vec<u32>>,
}

/// Per (node, buffer, chunk), how many inputs the value combines (0: undefined), for the
/// tracked nodes: every node of an explicit phase, the origin of a pattern.
struct Counts {
    p: u32,
    buffers: usize,
    chunks: usize,
    /// The tracked nodes, one per program of the phase, in program order.
    nodes: Vec<NodeId>,
    /// Indexed by node: its row among the tracked nodes.
    rows: Vec<Option<usize>>,
    counts: Vec<u32>,
}

impl Counts {
    /// The start of the phase: each tracked compute node's data buffer holds its own input;
    /// `p` inputs make a complete sum.
    fn new(phase: &Phase, p: usize, compute: &[NodeId], nodes: Vec<NodeId>) -> Counts {
        let buffers = phase.buffers.len();
        let chunks = phase.chunks.len();
        let mut rows = vec![None; nodes.iter().map(|n| n.index() + 1).max().unwrap_or(0)];
        for (row, n) in nodes.iter().enumerate() {
            rows[n.index()] = Some(row);
        }
        let mut counts = Counts {
            p: u32::try_from(p).unwrap_or(u32::MAX),
            buffers,
            chunks,
            counts: vec![0; nodes.len() * buffers * chunks],
            nodes,
            rows,
        };
        for &n in compute {
            for c in 0..chunks {
                if let Some(slot) = counts.slot(n, BufferId(0), ChunkId::new(c)) {
                    counts.counts[slot] = 1;
                }
            }
        }
        counts
    }

    fn slot(&self, n: NodeId, b: BufferId, c: ChunkId) -> Option<usize> {
        let row = self.rows.get(n.index()).copied().flatten()?;
        (b.index() < self.buffers && c.index() < self.chunks)
            .then(|| (row * self.buffers + b.index()) * self.chunks + c.index())
            .filter(|&s| s < self.counts.len())
    }

    fn get(&self, n: NodeId, b: BufferId, c: ChunkId) -> u32 {
        self.slot(n, b, c).map_or(0, |s| self.counts[s])
    }

    /// The reads of step `k`, against the state at its start.
    fn reads(&self, phase: &Phase, k: usize) -> Staged {
        let mut staged = self.local_reads(phase, k);
        for (program, &node) in phase.programs.iter().zip(&self.nodes) {
            for instr in program.steps.get(k).into_iter().flatten() {
                if let Instr::Send {
                    to, buffer, chunks, ..
                } = instr
                {
                    let values = chunks.iter().map(|c| self.get(node, *buffer, c));
                    let link = instr.final_link().unwrap_or(LinkId(u32::MAX));
                    let key = (node, *to, link, chunks.first());
                    staged.messages.insert(key, values.collect());
                }
            }
        }
        staged
    }

    /// The local reads of step `k` (reduces' and copies' sources), against the state at its
    /// start; no messages.
    fn local_reads(&self, phase: &Phase, k: usize) -> Staged {
        let mut staged = Staged::default();
        for (program, &node) in phase.programs.iter().zip(&self.nodes) {
            for (j, instr) in program.steps.get(k).into_iter().flatten().enumerate() {
                if let Instr::Reduce { src, chunks, .. } | Instr::Copy { src, chunks, .. } = instr {
                    let values = chunks.iter().map(|c| self.get(node, *src, c));
                    staged.local.insert((node, j), values.collect());
                }
            }
        }
        staged
    }

    /// The reads of step `k` of a pattern, against the state at its start: the origin's own,
    /// and, for every send of the origin's program, the message its translate to the origin
    /// carries, read from the sender's state (the origin's, moved back by the translation).
    fn translated_reads(
        &self,
        phase: &Phase,
        k: usize,
        translator: &Translator,
        grid: &Grid,
    ) -> Staged {
        let mut staged = self.local_reads(phase, k);
        let Some(&origin) = self.nodes.first() else {
            return staged;
        };
        let program = phase.programs.first();
        for instr in program.and_then(|p| p.steps.get(k)).into_iter().flatten() {
            let Instr::Send { to, buffer, .. } = instr else {
                continue;
            };
            // The translation `t` that brings this send's receiver to the origin.
            let Some(i) = translator.index(*to) else {
                continue;
            };
            let t = grid.sub(0, i);
            let (Some(from), Some(moved)) =
                (translator.node(origin, t), translator.instr(instr, t))
            else {
                continue;
            };
            let Instr::Send { to: at, chunks, .. } = &moved else {
                continue;
            };
            let back = grid.sub(0, t);
            let values = chunks
                .iter()
                .map(|x| self.get(origin, *buffer, translator.chunk(x, back)));
            let link = moved.final_link().unwrap_or(LinkId(u32::MAX));
            staged
                .messages
                .insert((from, *at, link, chunks.first()), values.collect());
        }
        staged
    }

    /// Applies write `instr` (instruction `j` of `node`); returns the chunks it completed by
    /// combining, in its list's order.
    fn write(&mut self, staged: &Staged, node: NodeId, j: usize, instr: &Instr) -> Vec<ChunkId> {
        let (buffer, chunks, incoming, combine) = match instr {
            Instr::Recv {
                link,
                from,
                buffer,
                chunks,
                mode,
            } => {
                let key = (*from, node, *link, chunks.first());
                (
                    *buffer,
                    chunks,
                    staged.messages.get(&key),
                    *mode == RecvMode::Reduce,
                )
            }
            Instr::Reduce { dst, chunks, .. } => (*dst, chunks, staged.local.get(&(node, j)), true),
            Instr::Copy { dst, chunks, .. } => (*dst, chunks, staged.local.get(&(node, j)), false),
            Instr::Send { .. } | Instr::Scale { .. } => return Vec::new(),
        };
        let mut complete = Vec::new();
        for (i, c) in chunks.iter().enumerate() {
            let value = incoming.and_then(|v| v.get(i)).copied().unwrap_or(0);
            let Some(slot) = self.slot(node, buffer, c) else {
                continue;
            };
            let before = self.counts[slot];
            let after = if combine {
                before.saturating_add(value)
            } else {
                value
            };
            self.counts[slot] = after;
            if combine && after == self.p && before > 0 && value > 0 {
                complete.push(c);
            }
        }
        complete
    }
}

#[cfg(test)]
#[allow(clippy::panic)]
mod tests {
    use super::*;
    use schedule_ir::{Buffer, BufferKind, Chunk, DType, Program};

    fn ring3(op: ReduceOp) -> Phase {
        // The 3-node ring allreduce of docs/ir.md: in step s node i sends chunk i - s to i + 1.
        let send = |i: usize, c: usize| Instr::Send {
            link: LinkId::new(i),
            via: vec![],
            to: NodeId::new((i + 1) % 3),
            buffer: BufferId(0),
            chunks: vec![ChunkId::new(c)].into(),
        };
        let recv = |i: usize, c: usize, mode| Instr::Recv {
            link: LinkId::new((i + 2) % 3),
            from: NodeId::new((i + 2) % 3),
            buffer: BufferId(0),
            chunks: vec![ChunkId::new(c)].into(),
            mode,
        };
        let programs = (0..3)
            .map(|i| Program {
                steps: (0..4)
                    .map(|s| {
                        let mode = if s < 2 {
                            RecvMode::Reduce
                        } else {
                            RecvMode::Store
                        };
                        let (out, inc) = if s < 2 {
                            ((i + 3 - s) % 3, (i + 2 - s) % 3)
                        } else {
                            ((i + 4 - s) % 3, (i + 3 - s) % 3)
                        };
                        vec![send(i, out), recv(i, inc, mode)]
                    })
                    .collect(),
            })
            .collect();
        Phase {
            name: "g".into(),
            collective: Collective::AllReduce,
            op,
            dtype: DType::I32,
            elements: 3,
            algorithm: "ring".into(),
            chunks: (0..3)
                .map(|c| Chunk {
                    start: c,
                    end: c + 1,
                    owner: None,
                })
                .collect(),
            buffers: vec![Buffer {
                name: "data".into(),
                kind: BufferKind::Data,
            }],
            links: schedule_ir::LinkUse::Exclusive,
            steps: 4,
            programs,
        }
    }

    #[test]
    fn scales_follow_the_completing_receive() {
        let compute: Vec<NodeId> = (0..3).map(NodeId::new).collect();
        let mut phase = ring3(ReduceOp::Mean);
        add_scales(&mut phase, &compute);
        for (i, program) in phase.programs.iter().enumerate() {
            let scales: Vec<(usize, usize, &Instr)> = program
                .steps
                .iter()
                .enumerate()
                .flat_map(|(k, s)| s.iter().enumerate().map(move |(j, x)| (k, j, x)))
                .filter(|(_, _, x)| matches!(x, Instr::Scale { .. }))
                .collect();
            let want = Instr::Scale {
                buffer: BufferId(0),
                chunks: vec![ChunkId::new((i + 1) % 3)].into(),
                divisor: 3,
            };
            assert_eq!(scales, vec![(1, 2, &want)], "node {i}");
        }
        // Other ops, and one compute node, are left alone.
        let mut sum = ring3(ReduceOp::Sum);
        add_scales(&mut sum, &compute);
        assert_eq!(sum, ring3(ReduceOp::Sum));
        let mut one = ring3(ReduceOp::Mean);
        add_scales(&mut one, &compute[..1]);
        assert_eq!(one, ring3(ReduceOp::Mean));
    }
}
