//! The node executor: runs one compute node's program of a phase, step by step, on real
//! buffers.
//!
//! Each step runs in parts, so that the in-process driver can run many nodes in lockstep:
//! 1. *send half*: read the start-of-step state — copy every sent chunk into an outgoing
//!    [`Message`], and snapshot the sources of local reduce/copy operations that an earlier
//!    write of the same step would change;
//! 2. *check half*: match the incoming messages against the receives of the step (every one
//!    present, of the right size, nothing extra, nothing twice);
//! 3. *apply half*: apply the step's writes in program order.
//!
//! [`NodeExecutor::run`] strings the parts together over a [`Transport`].

use crate::budget::{Limits, Needs};
use crate::element::Element;
use crate::error::Error;
use crate::plan::{self, NodePlan, PhaseInfo, StepPlan, WriteOp};
use crate::transport::{Message, MessageKey, Transport};
use schedule_ir::{NodeId, NodeKind, ReduceOp, Schedule, StepId, VerifiedSchedule};
use std::ops::Range;
use std::sync::Arc;

/// Runs one compute node's program of one phase. Build it once, run it as often as the BSP
/// program reaches the phase: plans, scratch buffers and message buffers are reused.
#[derive(Debug)]
pub struct NodeExecutor<T: Element> {
    info: Arc<PhaseInfo>,
    plan: NodePlan,
    /// Buffers 1.. of the phase (buffer 0 is the caller's data).
    scratch: Vec<Vec<T>>,
    /// Spare message vectors, reused for sends and snapshots.
    spare: Vec<Vec<T>>,
    /// Start-of-step copies of local operation sources, indexed like `StepPlan::snapshots`.
    snapshots: Vec<Vec<T>>,
    /// The current step's incoming messages, indexed like `StepPlan::expected`.
    slots: Vec<Option<Message<T>>>,
}

impl<T: Element> NodeExecutor<T> {
    /// Prepares `node` to run the phase called `phase` of `schedule`.
    ///
    /// Fails if there is no such phase, if `node` is not a compute node of the machine, or if
    /// the phase is compiled for another element type than `T`.
    pub fn new(schedule: &VerifiedSchedule, phase: &str, node: NodeId) -> Result<Self, Error> {
        Self::with_limits(schedule, phase, node, &Limits::default())
    }

    /// [`NodeExecutor::new`] within `limits`: fails with [`Error::OverMemoryBudget`] or
    /// [`Error::OverWorkBudget`], before allocating anything, if this node's part of the phase
    /// needs more (see [`Needs::node`]; the node's data buffer is counted, as the caller must
    /// hold it).
    pub fn with_limits(
        schedule: &VerifiedSchedule,
        phase: &str,
        node: NodeId,
        limits: &Limits,
    ) -> Result<Self, Error> {
        Self::from_schedule(schedule.schedule(), phase, node, limits)
    }

    /// [`NodeExecutor::with_limits`] without the proof of verification: for the runtime's own
    /// tests of its guards against schedules the verifier would refuse.
    pub(crate) fn from_schedule(
        s: &Schedule,
        phase: &str,
        node: NodeId,
        limits: &Limits,
    ) -> Result<Self, Error> {
        let p = plan::find_phase(s, phase)?;
        check_dtype::<T>(&p.name, p.dtype)?;
        match s.machine.nodes.get(node.index()) {
            None => {
                return Err(Error::UnknownNode {
                    node: node.to_string(),
                })
            }
            Some(n) if n.kind == NodeKind::Switch => {
                return Err(Error::NotComputeNode {
                    phase: p.name.clone(),
                    node: n.name.clone(),
                })
            }
            Some(_) => {}
        }
        let info = Arc::new(plan::phase_info(&s.machine, p)?);
        Needs::node(p, node).check(&p.name, limits, 0)?;
        let node_plan = plan::plan_node(&info, &s.machine, p, node)?;
        Self::from_plan(info, node_plan)
    }

    /// An executor for an already lowered plan (shared phase information). Fails, rather than
    /// aborting, if the scratch buffers cannot be allocated.
    pub(crate) fn from_plan(info: Arc<PhaseInfo>, plan: NodePlan) -> Result<Self, Error> {
        let scratch = crate::buffer::zeroed_buffers(info.buffers.saturating_sub(1), &info)?;
        Ok(NodeExecutor {
            info,
            plan,
            scratch,
            spare: Vec::new(),
            snapshots: Vec::new(),
            slots: Vec::new(),
        })
    }

    /// The node this executor runs.
    pub fn node(&self) -> NodeId {
        self.plan.node
    }

    /// The phase's name.
    pub fn phase(&self) -> &str {
        &self.info.name
    }

    /// The number of elements the data buffer must hold.
    pub fn elements(&self) -> usize {
        self.info.elements
    }

    /// The number of BSP steps of the phase.
    pub fn steps(&self) -> u32 {
        self.info.steps
    }

    /// Runs the whole phase on `data` (this node's vector: input before, result after),
    /// exchanging messages through `transport`.
    ///
    /// Every step's incoming messages are checked before any of the step's writes is applied,
    /// so after an error `data` holds the state at the end of the last completed step.
    pub fn run<Tr: Transport<T>>(
        &mut self,
        data: &mut [T],
        transport: &mut Tr,
    ) -> Result<(), Error> {
        self.start(data.len())?;
        for k in 0..self.plan.steps.len() {
            let step = StepId::new(k);
            let mut outgoing = Vec::new();
            self.send_half(step, data, &mut outgoing)?;
            let expected = self
                .plan
                .steps
                .get(k)
                .map_or(&[][..], |s| s.expected.as_slice());
            let mut incoming =
                transport
                    .exchange(step, outgoing, expected)
                    .map_err(|e| Error::Transport {
                        phase: self.info.name.clone(),
                        step,
                        node: self.info.node_name(self.plan.node),
                        cause: Box::new(e),
                    })?;
            self.receive_half(step, data, &mut incoming)?;
        }
        Ok(())
    }

    /// Checks the data buffer's length and resets the scratch buffers to zero.
    pub(crate) fn start(&mut self, len: usize) -> Result<(), Error> {
        self.check_len(len)?;
        for buffer in &mut self.scratch {
            buffer.fill(T::ZERO);
        }
        Ok(())
    }

    /// Refuses a data buffer of `len` elements if the phase works on another length.
    pub(crate) fn check_len(&self, len: usize) -> Result<(), Error> {
        if len != self.info.elements {
            return Err(Error::WrongLength {
                phase: self.info.name.clone(),
                node: self.info.node_name(self.plan.node),
                expected: self.info.elements as u64,
                found: len as u64,
            });
        }
        Ok(())
    }

    /// The first half of step `step`: reads the start-of-step state, appends this node's
    /// outgoing messages to `out` and takes the snapshots the step's local operations need.
    pub(crate) fn send_half(
        &mut self,
        step: StepId,
        data: &[T],
        out: &mut Vec<Message<T>>,
    ) -> Result<(), Error> {
        let Self {
            info,
            plan,
            scratch,
            spare,
            snapshots,
            ..
        } = self;
        let Some(sp) = plan.steps.get(step.index()) else {
            return Ok(());
        };
        for send in &sp.sends {
            let source = buffer(data, scratch, send.buffer);
            let mut message = take_spare(spare, send.len);
            gather(&mut message, source, &send.ranges).ok_or_else(|| internal(info, step))?;
            out.push(Message {
                key: send.key,
                data: message,
            });
        }
        // Return last step's snapshots to the spare list before taking this step's.
        spare.append(snapshots);
        for (b, ranges) in &sp.snapshots {
            let len = ranges.iter().map(|r| r.len()).sum();
            let mut copy = take_spare(spare, len);
            gather(&mut copy, buffer(data, scratch, *b), ranges)
                .ok_or_else(|| internal(info, step))?;
            snapshots.push(copy);
        }
        Ok(())
    }

    /// The second half of step `step`: [`Self::check_half`], then [`Self::apply_half`].
    pub(crate) fn receive_half(
        &mut self,
        step: StepId,
        data: &mut [T],
        incoming: &mut Vec<Message<T>>,
    ) -> Result<(), Error> {
        self.check_half(step, incoming)?;
        self.apply_half(step, data)
    }

    /// Takes every message out of `incoming` and matches it to a receive of step `step`:
    /// every receive must get exactly one message of the right size, and every message must
    /// belong to a receive.
    pub(crate) fn check_half(
        &mut self,
        step: StepId,
        incoming: &mut Vec<Message<T>>,
    ) -> Result<(), Error> {
        let Self {
            info, plan, slots, ..
        } = self;
        let node = plan.node;
        let empty = StepPlan::default();
        let sp = plan.steps.get(step.index()).unwrap_or(&empty);
        slots.clear();
        slots.resize_with(sp.expected.len(), || None);
        let mut result = Ok(());
        for (i, message) in incoming.drain(..).enumerate() {
            if result.is_err() {
                continue; // drain the rest so the caller's vector is left empty
            }
            let slot = match sp.expected.get(i) {
                Some(e) if e.key == message.key => Some(i),
                _ => sp
                    .lookup
                    .binary_search_by(|(k, _)| k.cmp(&message.key))
                    .ok()
                    .and_then(|j| sp.lookup.get(j))
                    .map(|&(_, slot)| slot),
            };
            let key = message.key;
            result = match slot.and_then(|s| slots.get_mut(s).map(|cell| (s, cell))) {
                None => Err(Error::UnexpectedMessage {
                    phase: info.name.clone(),
                    step,
                    node: info.node_name(node),
                    from: info.node_name(key.from),
                    link: info.link_name(key.link),
                    message_step: key.step,
                }),
                Some((_, cell)) if cell.is_some() => Err(Error::DuplicateMessage {
                    phase: info.name.clone(),
                    step,
                    node: info.node_name(node),
                    from: info.node_name(key.from),
                    link: info.link_name(key.link),
                }),
                Some((s, cell)) => {
                    let expected = sp.expected.get(s).map_or(0, |e| e.len);
                    if message.data.len() == expected {
                        *cell = Some(message);
                        Ok(())
                    } else {
                        Err(Error::WrongMessageSize {
                            phase: info.name.clone(),
                            step,
                            node: info.node_name(node),
                            from: info.node_name(key.from),
                            link: info.link_name(key.link),
                            expected,
                            found: message.data.len(),
                        })
                    }
                }
            };
        }
        result?;
        if let Some((e, _)) = sp
            .expected
            .iter()
            .zip(slots.iter())
            .find(|(_, m)| m.is_none())
        {
            return Err(missing(info, step, node, &e.key, e.len));
        }
        Ok(())
    }

    /// Applies the writes of step `step` in program order, from the messages
    /// [`Self::check_half`] matched and the snapshots [`Self::send_half`] took.
    pub(crate) fn apply_half(&mut self, step: StepId, data: &mut [T]) -> Result<(), Error> {
        let Self {
            info,
            plan,
            scratch,
            spare,
            snapshots,
            slots,
        } = self;
        let empty = StepPlan::default();
        let sp = plan.steps.get(step.index()).unwrap_or(&empty);
        // Apply the writes in program order.
        let op = info.op;
        for write in &sp.writes {
            match write {
                WriteOp::Recv {
                    slot,
                    buffer: b,
                    ranges,
                    mode,
                } => {
                    let Some(message) = slots.get_mut(*slot).and_then(Option::take) else {
                        return Err(internal(info, step));
                    };
                    let dst = buffer_mut(data, scratch, *b);
                    let reduce = *mode == schedule_ir::RecvMode::Reduce;
                    scatter(dst, &message.data, ranges, reduce.then_some(op))
                        .ok_or_else(|| internal(info, step))?;
                    put_spare(spare, message.data, plan.max_vectors);
                }
                WriteOp::Local {
                    reduce,
                    src,
                    dst,
                    ranges,
                    snapshot,
                } => {
                    let op = reduce.then_some(op);
                    let done = match snapshot {
                        Some(s) => snapshots.get(*s).and_then(|copy| {
                            scatter(buffer_mut(data, scratch, *dst), copy, ranges, op)
                        }),
                        None => pair(data, scratch, *src, *dst)
                            .and_then(|(from, to)| apply_in_place(to, from, ranges, op)),
                    };
                    done.ok_or_else(|| internal(info, step))?;
                }
                WriteOp::Scale {
                    buffer: b,
                    ranges,
                    divisor,
                } => {
                    let values = buffer_mut(data, scratch, *b);
                    for r in ranges {
                        let chunk = values
                            .get_mut(r.clone())
                            .ok_or_else(|| internal(info, step))?;
                        T::divide_into(chunk, *divisor);
                    }
                }
            }
        }
        Ok(())
    }
}

/// Runs the phase called `phase` of `schedule` on one node's `data`, exchanging messages
/// through `transport`: the embedding API for a BSP node-level program.
///
/// ```no_run
/// # fn demo(text: &str, mut transport: impl runtime_lite::Transport<f32>) -> Result<(), runtime_lite::Error> {
/// let schedule = runtime_lite::load(text)?; // parse and verify
/// let me = runtime_lite::find_node(&schedule, "N3")?;
/// let mut grads = vec![0.0f32; 1 << 20];
/// runtime_lite::run_node_phase(&schedule, "grads", me, &mut grads, &mut transport)?;
/// # Ok(()) }
/// ```
///
/// To run the same phase many times, build a [`NodeExecutor`] once instead.
pub fn run_node_phase<T: Element, Tr: Transport<T>>(
    schedule: &VerifiedSchedule,
    phase: &str,
    node: NodeId,
    data: &mut [T],
    transport: &mut Tr,
) -> Result<(), Error> {
    NodeExecutor::<T>::new(schedule, phase, node)?.run(data, transport)
}

/// [`run_node_phase`] on a dtype-erased buffer; refuses a buffer whose element type is not the
/// phase's.
pub fn run_node_phase_any<Tr>(
    schedule: &VerifiedSchedule,
    phase: &str,
    node: NodeId,
    data: &mut crate::AnyBuffer,
    transport: &mut Tr,
) -> Result<(), Error>
where
    Tr: Transport<f32>
        + Transport<f64>
        + Transport<i32>
        + Transport<i64>
        + Transport<half::f16>
        + Transport<half::bf16>,
{
    let p = plan::find_phase(schedule.schedule(), phase)?;
    check_dtype_of(&p.name, p.dtype, data.dtype())?;
    match data {
        crate::AnyBuffer::F32(v) => run_node_phase(schedule, phase, node, v, transport),
        crate::AnyBuffer::F64(v) => run_node_phase(schedule, phase, node, v, transport),
        crate::AnyBuffer::I32(v) => run_node_phase(schedule, phase, node, v, transport),
        crate::AnyBuffer::I64(v) => run_node_phase(schedule, phase, node, v, transport),
        crate::AnyBuffer::F16(v) => run_node_phase(schedule, phase, node, v, transport),
        crate::AnyBuffer::BF16(v) => run_node_phase(schedule, phase, node, v, transport),
    }
}

/// Refuses to run a phase compiled for another element type than `T`.
pub(crate) fn check_dtype<T: Element>(phase: &str, dtype: schedule_ir::DType) -> Result<(), Error> {
    check_dtype_of(phase, dtype, T::DTYPE)
}

fn check_dtype_of(
    phase: &str,
    expected: schedule_ir::DType,
    found: schedule_ir::DType,
) -> Result<(), Error> {
    if expected == found {
        Ok(())
    } else {
        Err(Error::WrongDType {
            phase: phase.to_string(),
            expected,
            found,
        })
    }
}

fn missing(info: &PhaseInfo, step: StepId, node: NodeId, key: &MessageKey, len: usize) -> Error {
    Error::MissingMessage {
        phase: info.name.clone(),
        step,
        node: info.node_name(node),
        from: info.node_name(key.from),
        link: info.link_name(key.link),
        expected: len,
    }
}

/// An index the plan promised to be valid was not. Unreachable for plans built by
/// [`plan::plan_node`]; reported rather than panicking.
fn internal(info: &PhaseInfo, step: StepId) -> Error {
    Error::Malformed {
        phase: info.name.clone(),
        location: step.to_string(),
        detail: "internal error: an element range is outside its buffer".into(),
    }
}

/// Buffer `b` for reading: 0 is the data, the rest scratch. An unknown index reads as empty
/// (plans never produce one; the range checks then report it).
fn buffer<'a, T>(data: &'a [T], scratch: &'a [Vec<T>], b: usize) -> &'a [T] {
    match b.checked_sub(1) {
        None => data,
        Some(i) => scratch.get(i).map_or(&[], Vec::as_slice),
    }
}

fn buffer_mut<'a, T>(data: &'a mut [T], scratch: &'a mut [Vec<T>], b: usize) -> &'a mut [T] {
    match b.checked_sub(1) {
        None => data,
        Some(i) => scratch.get_mut(i).map_or(&mut [], Vec::as_mut_slice),
    }
}

/// Buffer `src` for reading and a different buffer `dst` for writing, at once.
fn pair<'a, T>(
    data: &'a mut [T],
    scratch: &'a mut [Vec<T>],
    src: usize,
    dst: usize,
) -> Option<(&'a [T], &'a mut [T])> {
    match (src.checked_sub(1), dst.checked_sub(1)) {
        (None, Some(d)) => Some((data, scratch.get_mut(d)?)),
        (Some(s), None) => Some((scratch.get(s)?, data)),
        (Some(s), Some(d)) if s < d => {
            let (low, high) = scratch.split_at_mut(d);
            Some((low.get(s)?, high.first_mut()?))
        }
        (Some(s), Some(d)) if d < s => {
            let (low, high) = scratch.split_at_mut(s);
            Some((high.first()?, low.get_mut(d)?))
        }
        // Same buffer: the plan always snapshots the source then.
        _ => None,
    }
}

/// A cleared spare vector with room for `len` elements.
fn take_spare<T>(spare: &mut Vec<Vec<T>>, len: usize) -> Vec<T> {
    match spare.pop() {
        Some(mut v) => {
            v.clear();
            v.reserve(len);
            v
        }
        None => Vec::with_capacity(len),
    }
}

/// Keeps `v` for reuse unless `limit` spares are already kept.
fn put_spare<T>(spare: &mut Vec<Vec<T>>, v: Vec<T>, limit: usize) {
    if spare.len() < limit {
        spare.push(v);
    }
}

/// Appends `ranges` of `source` to `out`. `None` if a range is out of bounds.
fn gather<T: Copy>(out: &mut Vec<T>, source: &[T], ranges: &[Range<usize>]) -> Option<()> {
    for r in ranges {
        out.extend_from_slice(source.get(r.clone())?);
    }
    Some(())
}

/// Writes the packed `incoming` elements into `ranges` of `dst`: copies them, or combines
/// them with `op`. `None` if the sizes do not fit.
fn scatter<T: Element>(
    dst: &mut [T],
    incoming: &[T],
    ranges: &[Range<usize>],
    op: Option<ReduceOp>,
) -> Option<()> {
    let mut offset = 0;
    for r in ranges {
        let end = offset + r.len();
        let from = incoming.get(offset..end)?;
        let to = dst.get_mut(r.clone())?;
        match op {
            None => to.copy_from_slice(from),
            Some(op) => T::combine_into(op, to, from),
        }
        offset = end;
    }
    Some(())
}

/// Copies or combines `ranges` of `src` into the same ranges of `dst`.
fn apply_in_place<T: Element>(
    dst: &mut [T],
    src: &[T],
    ranges: &[Range<usize>],
    op: Option<ReduceOp>,
) -> Option<()> {
    for r in ranges {
        let from = src.get(r.clone())?;
        let to = dst.get_mut(r.clone())?;
        match op {
            None => to.copy_from_slice(from),
            Some(op) => T::combine_into(op, to, from),
        }
    }
    Some(())
}
