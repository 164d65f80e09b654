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
use crate::limits::{MAX_LISTED_RESULTS, MAX_SYMBOLIC_WORDS};
use crate::{
    BufferId, ChunkId, ChunkIds, ChunkRun, Collective, Instr, Machine, NodeId, NodeKind, Phase,
    RecvMode, ReduceOp, StepId,
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
        // The rest is for the distinct sets, their words and bookkeeping.
        let room = MAX_SYMBOLIC_WORDS - total;
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

    /// Where (compute node `ci`, buffer `b`, chunk `c`) lives. Node-major: the chunks of one
    /// buffer of one node sit together, so that a run of chunk ids an instruction names is a
    /// run of slots, read and written as slices.
    fn slot(&self, ci: usize, b: BufferId, c: ChunkId) -> usize {
        (ci * self.phase.buffers.len() + b.index()) * self.chunks + c.index()
    }

    fn ci(&self, n: NodeId) -> usize {
        self.cindex[n.index()] as usize
    }

    /// Records that the table is full: the phase is reported too large, once, and abandoned.
    fn out_of_room(&mut self) {
        if !self.full {
            self.full = true;
            let what = format!(
                "phase `{}`: words of the symbolic state's distinct input sets ({} sets of \
                 up to {} words; the limit is what the slots leave of {MAX_SYMBOLIC_WORDS})",
                self.phase.name,
                self.table.len() + 1,
                self.words
            );
            self.errors.push(
                Location::phase(&self.phase.name).error(ErrorKind::TooLarge {
                    what,
                    count: self.table.used_words() as u64 + 1,
                    limit: self.table.max_words() as u64,
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
            // Every chunk a node holds at the start holds the same set: its own input.
            let mut own = None;
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
                    if own.is_none() {
                        own = self.table.single(ci);
                    }
                    match own {
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
            for run in instr.chunks().runs() {
                self.read(k, n, instr, src, *run);
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

    /// Stages the run of chunks `run` of buffer `b` of node `n` for an instruction of step
    /// `k`. The slots of a run are evenly spaced like its ids; consecutive ones are copied as
    /// slices.
    fn read(&mut self, k: usize, n: NodeId, instr: &Instr, b: BufferId, run: ChunkRun) {
        let first = self.slot(self.ci(n), b, ChunkId(run.start));
        let stride = run.stride as usize;
        let slots = (0..run.len as usize).map(|i| first + i * stride);
        if stride == 1 {
            let all = first..first + run.len as usize;
            self.staged.extend_from_slice(&self.sets[all.clone()]);
            self.staged_scaled.extend_from_slice(&self.scaled[all]);
        } else {
            self.staged.extend(slots.clone().map(|s| self.sets[s]));
            self.staged_scaled
                .extend(slots.clone().map(|s| self.scaled[s]));
        }
        for (i, s) in slots.enumerate() {
            let poisoned = self.poison[s];
            let undefined = !poisoned && self.sets[s] == SetId::EMPTY;
            self.staged_poison.push(poisoned || undefined);
            if undefined {
                let kind = ErrorKind::ReadUndefined {
                    action: action(self.machine, instr),
                };
                let c = run.at(i as u32);
                self.errors.push(self.at(k, n, b, c).error(kind));
            }
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
        chunks: &ChunkIds,
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
            for c in chunks {
                let s = self.slot(ci, b, c);
                self.poison[s] = true;
            }
            return;
        }
        // The last union that combined two disjoint sets: neighbouring chunks of a run mostly
        // combine the same two sets, and then take the same result without hashing a set.
        let mut last: Option<(SetId, SetId, SetId)> = None;
        for (i, c) in chunks.iter().enumerate() {
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
            if let Some((x, y, union)) = last {
                if (x, y) == (dst, incoming) {
                    self.sets[s] = union;
                    continue;
                }
            }
            let twice = if self.table.overlap(dst, incoming) {
                Some(self.nodes(&self.table.both(dst, incoming)))
            } else {
                None
            };
            let union = self.union(dst, incoming);
            self.sets[s] = union;
            if self.full {
                return;
            }
            let Some(inputs) = twice else {
                last = Some((dst, incoming, union));
                continue;
            };
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
    fn scale(&mut self, k: usize, n: NodeId, b: BufferId, chunks: &ChunkIds) {
        let ci = self.ci(n);
        for c in chunks {
            let s = self.slot(ci, b, c);
            if self.poison[s] {
                continue;
            }
            let have = self.sets[s];
            // Equal sets have equal ids.
            let error = if have != self.all {
                let missing = self.table.minus(self.all, have);
                ErrorKind::ScalePartial {
                    holds: self.nodes(&self.table.dense(have)),
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
        let p = self.inputs;
        // A mean's result must have been divided, unless there is one input (its own mean).
        let must_scale = self.phase.op == ReduceOp::Mean && p > 1;
        let phase = self.phase;
        let last = (phase.steps as usize).checked_sub(1).map(step_id);
        // Built only while they are listed: past the limit a wrong result is counted.
        let (mut listed, mut more) = (Vec::new(), 0u64);
        let mut list = |listed: &mut Vec<VerifyError>, error: &dyn Fn() -> VerifyError| {
            if (listed.len() as u64) < MAX_LISTED_RESULTS {
                listed.push(error());
            } else {
                more += 1;
            }
        };
        for ci in 0..p {
            let n = self.compute[ci];
            for (c, chunk) in phase.chunks.iter().enumerate() {
                // Whose input the chunk must hold: all of them (`None`), or one node's.
                let one = match phase.collective {
                    Collective::AllReduce => None,
                    Collective::ReduceScatter if chunk.owner == Some(n) => None,
                    Collective::Reduce { root } if root == n => None,
                    Collective::AllGather => {
                        let Some(owner) = chunk.owner else { continue };
                        Some(owner)
                    }
                    Collective::Broadcast { root } => Some(root),
                    _ => continue,
                };
                let chunk = ChunkId(u32::try_from(c).unwrap_or(u32::MAX));
                let s = self.slot(ci, BufferId(0), chunk);
                if self.poison[s] {
                    continue;
                }
                // Equal sets have equal ids: the common case compares ids and builds no set.
                let want = match one {
                    None => Some(self.all),
                    Some(owner) => self.table.find_single(self.cindex[owner.index()] as usize),
                };
                if want == Some(self.sets[s]) {
                    if must_scale && one.is_none() && !self.scaled[s] {
                        list(&mut listed, &|| {
                            self.final_at(last, n, chunk).error(ErrorKind::NotScaled {
                                collective: phase.collective,
                                count: p,
                            })
                        });
                    }
                    continue;
                }
                list(&mut listed, &|| self.wrong_result(last, n, chunk, s, one));
            }
        }
        self.errors.append(&mut listed);
        if more > 0 {
            let here = Location::phase(&phase.name);
            self.errors
                .push(here.error(ErrorKind::ResultsNotListed { more }));
        }
    }

    /// Where chunk `chunk` of node `n`'s data buffer is at the end of the phase.
    fn final_at(&self, last: Option<StepId>, n: NodeId, chunk: ChunkId) -> Location {
        Location::phase(&self.phase.name)
            .at_step(last)
            .node(node(self.machine, n))
            .buffer(Some(buffer(self.phase, BufferId(0))))
            .chunk(chunk)
    }

    /// The error for slot `s` (chunk `chunk` of node `n`'s data buffer), which does not hold
    /// what it must: every input (`one == None`) or only `one`'s.
    fn wrong_result(
        &self,
        last: Option<StepId>,
        n: NodeId,
        chunk: ChunkId,
        s: usize,
        one: Option<NodeId>,
    ) -> VerifyError {
        let (want, expected) = match one {
            None => (
                self.table.dense(self.all),
                Expected::AllInputs { count: self.inputs },
            ),
            Some(owner) => {
                let mut set = vec![0u64; self.words];
                let bit = self.cindex[owner.index()] as usize;
                set[bit / 64] |= 1 << (bit % 64);
                let expected = Expected::OnlyInput {
                    node: node(self.machine, owner),
                };
                (set, expected)
            }
        };
        let have = self.table.dense(self.sets[s]);
        let have = &have[..];
        let missing: Vec<u64> = want.iter().zip(have).map(|(x, h)| x & !h).collect();
        let extra: Vec<u64> = have.iter().zip(&want).map(|(h, x)| h & !x).collect();
        self.final_at(last, n, chunk).error(ErrorKind::WrongResult {
            collective: self.phase.collective,
            holds: self.nodes(have),
            expected,
            missing: self.nodes(&missing),
            extra: self.nodes(&extra),
        })
    }
}
