//! Pass 4, correct: symbolic execution of a phase, tracking which inputs each chunk combines.
//!
//! The state of one (compute node, buffer, chunk) is a set of compute nodes (bit `i` of a
//! bitset for the `i`-th compute node in id order), empty meaning undefined, a *scaled* flag
//! (the value was divided by a mean's [`Instr::Scale`]), and a *poisoned* flag set when an
//! error was reported about the chunk (see the [module doc](super)). The sets are kept once
//! each in a [`SetTable`] and the slots hold their ids, so that the state grows with the slots
//! and the distinct sets, not with slots × compute nodes.

use super::matching::Matching;
use super::sets::{SetId, SetTable};
use super::{
    action, buffer, node, step_id, step_instrs, ErrorKind, Expected, Location, NodeList,
    VerifyError, Warning, WarningKind,
};
use crate::limits::MAX_SYMBOLIC_WORDS;
use crate::{
    BufferId, ChunkId, Collective, Instr, Machine, NodeId, NodeKind, Phase, RecvMode, ReduceOp,
};

/// Runs the pass on one well-formed, fully matched phase, appending every problem to `errors`.
/// Returns the phase's warnings.
pub(super) fn check(
    machine: &Machine,
    phase: &Phase,
    matching: &Matching,
    errors: &mut Vec<VerifyError>,
) -> Vec<Warning> {
    let Some(mut run) = Run::new(machine, phase, errors) else {
        return Vec::new();
    };
    for k in 0..phase.steps as usize {
        if run.full {
            return run.warnings;
        }
        run.step(k, &matching.partner[k]);
    }
    if !run.full {
        run.finish();
    }
    run.warnings
}

/// The state of a symbolic run.
struct Run<'a> {
    machine: &'a Machine,
    phase: &'a Phase,
    errors: &'a mut Vec<VerifyError>,
    warnings: Vec<Warning>,
    /// Compute index of every node (`u32::MAX` for switches).
    cindex: Vec<u32>,
    /// The nodes that hold state: the compute nodes (their index is their input's bit), then
    /// the devices (switches with a capacity), which have no input.
    compute: Vec<NodeId>,
    /// How many of `compute` are compute nodes (the inputs).
    inputs: usize,
    /// Words per set.
    words: usize,
    chunks: usize,
    /// The set of every slot (`slot(ci, b, c)`).
    sets: Vec<SetId>,
    /// The sets.
    table: SetTable,
    /// Whether the table ran out of room (the phase was reported too large and is abandoned).
    full: bool,
    /// Every poisoned flag, at `slot(ci, b, c)`.
    poison: Vec<bool>,
    /// Every scaled flag, at `slot(ci, b, c)`.
    scaled: Vec<bool>,
    /// The set of all inputs.
    all: SetId,
    /// Sets read in the current step, in read order.
    staged: Vec<SetId>,
    staged_poison: Vec<bool>,
    staged_scaled: Vec<bool>,
    /// Per flat instruction of the current step, where its reads start in `staged_poison`.
    staged_at: Vec<usize>,
}

impl<'a> Run<'a> {
    /// The initial state, or `None` (with an error) if it would be too large.
    fn new(
        machine: &'a Machine,
        phase: &'a Phase,
        errors: &'a mut Vec<VerifyError>,
    ) -> Option<Self> {
        let mut cindex = vec![u32::MAX; machine.nodes.len()];
        let mut compute = Vec::new();
        for (i, n) in machine.nodes.iter().enumerate() {
            if n.kind == NodeKind::Compute {
                cindex[i] = u32::try_from(compute.len()).unwrap_or(u32::MAX);
                compute.push(super::node_id(i));
            }
        }
        let inputs = compute.len();
        for (i, n) in machine.nodes.iter().enumerate() {
            if n.kind == NodeKind::Switch && n.runs_program() {
                cindex[i] = u32::try_from(compute.len()).unwrap_or(u32::MAX);
                compute.push(super::node_id(i));
            }
        }
        let words = inputs.div_ceil(64).max(1);
        let buffers = phase.buffers.len();
        let chunks = phase.chunks.len();
        let slots = compute
            .len()
            .checked_mul(buffers)
            .and_then(|x| x.checked_mul(chunks));
        // A slot takes a set id and two flags: 6 bytes.
        let total = slots
            .and_then(|s| s.checked_mul(6))
            .map(|b| (b as u64).div_ceil(8));
        let (Some(slots), Some(total)) = (slots, total.filter(|&t| t <= MAX_SYMBOLIC_WORDS)) else {
            errors.push(Location::phase(&phase.name).error(ErrorKind::TooLarge {
                what: format!(
                    "phase `{}`: words of symbolic state ({} nodes × {} buffers × {} chunks, 6 bytes each)",
                    phase.name,
                    compute.len(),
                    buffers,
                    chunks,
                ),
                count: total.unwrap_or(u64::MAX),
                limit: MAX_SYMBOLIC_WORDS,
            }));
            return None;
        };
        // The rest is for the distinct sets: their words and about three of bookkeeping.
        let room = (MAX_SYMBOLIC_WORDS - total) / (words as u64 + 3);
        let mut table = SetTable::new(words, usize::try_from(room).unwrap_or(usize::MAX));
        let mut all = vec![0u64; words];
        for bit in 0..inputs {
            all[bit / 64] |= 1 << (bit % 64);
        }
        let all = table.intern(&all).unwrap_or(SetId::EMPTY);
        let mut run = Run {
            machine,
            phase,
            errors,
            warnings: Vec::new(),
            cindex,
            compute,
            inputs,
            words,
            chunks,
            sets: vec![SetId::EMPTY; slots],
            table,
            full: false,
            poison: vec![false; slots],
            scaled: vec![false; slots],
            all,
            staged: Vec::new(),
            staged_poison: Vec::new(),
            staged_scaled: Vec::new(),
            staged_at: Vec::new(),
        };
        run.initialise();
        Some(run)
    }

    /// Where (compute node `ci`, buffer `b`, chunk `c`) lives. Chunk-major: the copies of one
    /// chunk on all nodes sit together, as transfers move a chunk between nodes.
    fn slot(&self, ci: usize, b: BufferId, c: ChunkId) -> usize {
        (b.index() * self.chunks + c.index()) * self.compute.len() + ci
    }

    fn ci(&self, n: NodeId) -> usize {
        self.cindex[n.index()] as usize
    }

    /// Records that the table is full: the phase is reported too large, once, and abandoned.
    fn out_of_room(&mut self) {
        if !self.full {
            self.full = true;
            let what = format!(
                "phase `{}`: distinct input sets of the symbolic state ({} words each)",
                self.phase.name, self.words
            );
            let limit = self.table.len() as u64;
            self.errors.push(
                Location::phase(&self.phase.name).error(ErrorKind::TooLarge {
                    what,
                    count: limit + 1,
                    limit,
                }),
            );
        }
    }

    /// `a ∪ b`, or the empty set after reporting that the table is full.
    fn union(&mut self, a: SetId, b: SetId) -> SetId {
        match self.table.union(a, b) {
            Some(id) => id,
            None => {
                self.out_of_room();
                SetId::EMPTY
            }
        }
    }

    /// The initial data buffer of the phase's collective (scratch stays undefined).
    fn initialise(&mut self) {
        let data = BufferId(0);
        for ci in 0..self.inputs {
            let n = self.compute[ci];
            for c in 0..self.chunks {
                let chunk = ChunkId(u32::try_from(c).unwrap_or(u32::MAX));
                let holds = match self.phase.collective {
                    Collective::AllReduce
                    | Collective::ReduceScatter
                    | Collective::Reduce { .. } => true,
                    Collective::AllGather => self.phase.chunks[c].owner == Some(n),
                    Collective::Broadcast { root } => root == n,
                };
                if holds {
                    let s = self.slot(ci, data, chunk);
                    match self.table.single(ci) {
                        Some(id) => self.sets[s] = id,
                        None => self.out_of_room(),
                    }
                }
            }
        }
    }

    /// Runs step `k`: all reads against the start-of-step state, then all writes in order.
    fn step(&mut self, k: usize, partner: &[u32]) {
        let phase = self.phase;
        self.staged.clear();
        self.staged_poison.clear();
        self.staged_scaled.clear();
        self.staged_at.clear();
        self.staged_at.resize(partner.len(), 0);
        for (n, flat, instr) in step_instrs(phase, k) {
            let src = match instr {
                Instr::Send { buffer, .. } => *buffer,
                Instr::Reduce { src, .. } | Instr::Copy { src, .. } => *src,
                Instr::Recv { .. } | Instr::Scale { .. } => continue,
            };
            self.staged_at[flat] = self.staged_poison.len();
            for &c in instr.chunks() {
                self.read(k, n, instr, src, c);
            }
        }
        for (n, flat, instr) in step_instrs(phase, k) {
            if self.full {
                // Abandoned: nothing more is reported about this phase.
                return;
            }
            match instr {
                Instr::Send { .. } => {}
                Instr::Recv {
                    buffer,
                    chunks,
                    mode,
                    ..
                } => {
                    let from = self.staged_at[partner[flat] as usize];
                    self.write(
                        k,
                        n,
                        instr,
                        *buffer,
                        chunks,
                        from,
                        *mode == RecvMode::Reduce,
                    );
                }
                Instr::Reduce { dst, chunks, .. } => {
                    let from = self.staged_at[flat];
                    self.write(k, n, instr, *dst, chunks, from, true);
                }
                Instr::Copy { dst, chunks, .. } => {
                    let from = self.staged_at[flat];
                    self.write(k, n, instr, *dst, chunks, from, false);
                }
                Instr::Scale { buffer, chunks, .. } => self.scale(k, n, *buffer, chunks),
            }
        }
    }

    /// Stages chunk `c` of buffer `b` of node `n` for an instruction of step `k`.
    fn read(&mut self, k: usize, n: NodeId, instr: &Instr, b: BufferId, c: ChunkId) {
        let s = self.slot(self.ci(n), b, c);
        let set = self.sets[s];
        let poisoned = self.poison[s];
        let undefined = !poisoned && set == SetId::EMPTY;
        self.staged.push(set);
        self.staged_poison.push(poisoned || undefined);
        self.staged_scaled.push(self.scaled[s]);
        if undefined {
            let kind = ErrorKind::ReadUndefined {
                action: action(self.machine, instr),
            };
            self.errors.push(self.at(k, n, b, c).error(kind));
        }
    }

    /// Applies the writes of one instruction: `chunks` of buffer `b` of node `n` get the staged
    /// sets starting at `from`, replacing (`reduce == false`) or combining.
    #[allow(clippy::too_many_arguments)]
    fn write(
        &mut self,
        k: usize,
        n: NodeId,
        instr: &Instr,
        b: BufferId,
        chunks: &[ChunkId],
        from: usize,
        reduce: bool,
    ) {
        let ci = self.ci(n);
        if reduce
            && matches!(
                self.phase.collective,
                Collective::AllGather | Collective::Broadcast { .. }
            )
        {
            let kind = ErrorKind::ReduceInGather {
                action: action(self.machine, instr),
                collective: self.phase.collective,
            };
            let here = Location::step(&self.phase.name, step_id(k)).node(node(self.machine, n));
            self.errors.push(here.error(kind));
            for &c in chunks {
                let s = self.slot(ci, b, c);
                self.poison[s] = true;
            }
            return;
        }
        for (i, &c) in chunks.iter().enumerate() {
            let s = self.slot(ci, b, c);
            let incoming = self.staged[from + i];
            let in_poison = self.staged_poison[from + i];
            let dst = self.sets[s];
            if !reduce {
                self.sets[s] = incoming;
                self.poison[s] = in_poison;
                self.scaled[s] = self.staged_scaled[from + i];
                continue;
            }
            if in_poison || self.poison[s] {
                self.poison[s] = true;
                continue;
            }
            if dst == SetId::EMPTY {
                self.poison[s] = true;
                let kind = ErrorKind::ReduceIntoUndefined {
                    action: action(self.machine, instr),
                };
                self.errors.push(self.at(k, n, b, c).error(kind));
                continue;
            }
            if self.scaled[s] || self.staged_scaled[from + i] {
                self.poison[s] = true;
                let kind = ErrorKind::CombineScaled {
                    action: action(self.machine, instr),
                };
                self.errors.push(self.at(k, n, b, c).error(kind));
                continue;
            }
            let twice = if self.table.overlap(dst, incoming) {
                Some(self.nodes(&self.table.both(dst, incoming)))
            } else {
                None
            };
            self.sets[s] = self.union(dst, incoming);
            if self.full {
                return;
            }
            let Some(inputs) = twice else { continue };
            let (location, act, op) = (
                self.at(k, n, b, c),
                action(self.machine, instr),
                self.phase.op,
            );
            if op.is_idempotent() {
                self.warnings.push(Warning {
                    location,
                    kind: WarningKind::InputCombinedTwice {
                        action: act,
                        inputs,
                        op,
                    },
                });
            } else {
                self.poison[s] = true;
                self.errors
                    .push(location.error(ErrorKind::InputCombinedTwice {
                        action: act,
                        inputs,
                        op,
                    }));
            }
        }
    }

    /// Applies a scale of `chunks` of buffer `b` of node `n` in step `k`: each must hold all
    /// inputs, not yet scaled.
    fn scale(&mut self, k: usize, n: NodeId, b: BufferId, chunks: &[ChunkId]) {
        let ci = self.ci(n);
        for &c in chunks {
            let s = self.slot(ci, b, c);
            if self.poison[s] {
                continue;
            }
            let have = self.sets[s];
            // Equal sets have equal ids.
            let error = if have != self.all {
                let missing = self.table.minus(self.all, have);
                ErrorKind::ScalePartial {
                    holds: self.nodes(self.table.get(have)),
                    count: self.inputs,
                    missing: self.nodes(&missing),
                }
            } else if self.scaled[s] {
                ErrorKind::ScaledTwice
            } else {
                self.scaled[s] = true;
                continue;
            };
            self.poison[s] = true;
            self.errors.push(self.at(k, n, b, c).error(error));
        }
    }

    /// Where chunk `c` of buffer `b` of node `n` is in step `k`.
    fn at(&self, k: usize, n: NodeId, b: BufferId, c: ChunkId) -> Location {
        Location::step(&self.phase.name, step_id(k))
            .node(node(self.machine, n))
            .buffer(Some(buffer(self.phase, b)))
            .chunk(c)
    }

    /// The nodes of a set.
    fn nodes(&self, set: &[u64]) -> NodeList {
        let mut out = Vec::new();
        for (wi, &word) in set.iter().enumerate() {
            let mut word = word;
            while word != 0 {
                let bit = wi * 64 + word.trailing_zeros() as usize;
                word &= word - 1;
                if let Some(&n) = self.compute.get(bit) {
                    out.push(node(self.machine, n));
                }
            }
        }
        NodeList(out)
    }

    /// Checks the final data buffer against the collective.
    fn finish(&mut self) {
        let w = self.words;
        let p = self.inputs;
        let all = self.table.get(self.all).to_vec();
        // A mean's result must have been divided, unless there is one input (its own mean).
        let must_scale = self.phase.op == ReduceOp::Mean && p > 1;
        let single = |n: NodeId, cindex: &[u32]| {
            let mut set = vec![0u64; w];
            let bit = cindex[n.index()] as usize;
            set[bit / 64] |= 1 << (bit % 64);
            set
        };
        let phase = self.phase;
        let last = (phase.steps as usize).checked_sub(1).map(step_id);
        let data = buffer(phase, BufferId(0));
        for ci in 0..p {
            let n = self.compute[ci];
            for (c, chunk) in phase.chunks.iter().enumerate() {
                let (want, expected) = match phase.collective {
                    Collective::AllReduce => (all.clone(), Expected::AllInputs { count: p }),
                    Collective::ReduceScatter if chunk.owner == Some(n) => {
                        (all.clone(), Expected::AllInputs { count: p })
                    }
                    Collective::Reduce { root } if root == n => {
                        (all.clone(), Expected::AllInputs { count: p })
                    }
                    Collective::AllGather => {
                        let Some(owner) = chunk.owner else { continue };
                        (
                            single(owner, &self.cindex),
                            Expected::OnlyInput {
                                node: node(self.machine, owner),
                            },
                        )
                    }
                    Collective::Broadcast { root } => (
                        single(root, &self.cindex),
                        Expected::OnlyInput {
                            node: node(self.machine, root),
                        },
                    ),
                    _ => continue,
                };
                let chunk = ChunkId(u32::try_from(c).unwrap_or(u32::MAX));
                let s = self.slot(ci, BufferId(0), chunk);
                let have = self.table.get(self.sets[s]);
                if self.poison[s] {
                    continue;
                }
                let here = Location::phase(&phase.name)
                    .at_step(last)
                    .node(node(self.machine, n))
                    .buffer(Some(data.clone()))
                    .chunk(chunk);
                if have == want.as_slice() {
                    if must_scale
                        && !self.scaled[s]
                        && matches!(expected, Expected::AllInputs { .. })
                    {
                        self.errors.push(here.error(ErrorKind::NotScaled {
                            collective: phase.collective,
                            count: p,
                        }));
                    }
                    continue;
                }
                let missing: Vec<u64> = want.iter().zip(have).map(|(x, h)| x & !h).collect();
                let extra: Vec<u64> = have.iter().zip(&want).map(|(h, x)| h & !x).collect();
                let error = here.error(ErrorKind::WrongResult {
                    collective: phase.collective,
                    holds: self.nodes(have),
                    expected,
                    missing: self.nodes(&missing),
                    extra: self.nodes(&extra),
                });
                self.errors.push(error);
            }
        }
    }
}
