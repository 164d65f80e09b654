//! The in-process driver: every compute node of the machine in one process, run in lockstep on
//! one thread, messages routed between them by moving their vectors.
//!
//! Buffers are indexed by compute node in [`NodeId`] order: `buffers[i]` belongs to the `i`-th
//! compute node of [`Machine::compute_nodes`](schedule_ir::Machine::compute_nodes); switches
//! have no buffer, except devices (switches with a capacity), whose buffers the driver keeps. Per step, every node runs its send half (start-of-step reads), the messages
//! are moved into their receivers' inboxes, then every node runs its receive half (writes). A
//! transfer costs one copy out of the sender's buffer and one copy or combine into the
//! receiver's; message vectors are recycled, so after the first step nothing is allocated.

use crate::budget::{Limits, Needs};
use crate::buffer::{zeroed_buffers, Buffers};
use crate::completion::{Completion, Devices};
use crate::element::Element;
use crate::error::Error;
use crate::exec::{check_dtype, NodeExecutor};
use crate::plan;
use crate::transport::Message;
use schedule_ir::{NodeId, Schedule, StepId, VerifiedSchedule};
use std::sync::Arc;

/// All compute nodes of one phase, ready to run in one process. Build it once and call
/// [`InProcess::run`] as often as needed: plans and scratch space are reused.
#[derive(Debug)]
pub struct InProcess<T: Element> {
    phase: String,
    steps: u32,
    /// One executor per compute node, in node order, then one per device (a switch with a
    /// capacity, which runs a program).
    executors: Vec<NodeExecutor<T>>,
    /// How many of `executors` are compute nodes.
    compute: usize,
    /// The devices' buffers: their data vectors, which are not the caller's (devices have no
    /// input and no result). They start zeroed; a verified schedule reads nothing of them
    /// before writing it.
    device_buffers: Vec<Vec<T>>,
    /// The devices' segment units and completion entries.
    units: Devices,
    /// For each [`NodeId`] index, the position of that compute node in `executors`.
    position: Vec<Option<usize>>,
    outbox: Vec<Message<T>>,
    inboxes: Vec<Vec<Message<T>>>,
}

impl<T: Element> InProcess<T> {
    /// Prepares every compute node to run the phase called `phase`. Fails if there is no such
    /// phase or it is compiled for another element type than `T`.
    pub fn new(schedule: &VerifiedSchedule, phase: &str) -> Result<Self, Error> {
        Self::with_limits(schedule, phase, &Limits::default())
    }

    /// [`InProcess::new`] within `limits`: fails with [`Error::OverMemoryBudget`] or
    /// [`Error::OverWorkBudget`], before allocating anything, if the run needs more (see
    /// [`Needs::in_process`]; the callers' data buffers are counted, as they must hold them).
    pub fn with_limits(
        schedule: &VerifiedSchedule,
        phase: &str,
        limits: &Limits,
    ) -> Result<Self, Error> {
        Self::from_schedule(schedule.schedule(), phase, limits)
    }

    /// [`InProcess::with_limits`] without the proof of verification: for the runtime's own
    /// tests of its guards against schedules the verifier would refuse.
    pub(crate) fn from_schedule(s: &Schedule, phase: &str, limits: &Limits) -> Result<Self, Error> {
        let p = plan::find_phase(s, phase)?;
        check_dtype::<T>(&p.name, p.dtype)?;
        let info = Arc::new(plan::phase_info(&s.machine, p)?);
        Needs::in_process(&s.machine, p).check(&p.name, limits, 0)?;
        let mut position = vec![None; s.machine.nodes.len()];
        let mut executors = Vec::with_capacity(info.compute.len() + info.devices.len());
        for (i, &node) in info.compute.iter().chain(&info.devices).enumerate() {
            if let Some(cell) = position.get_mut(node.index()) {
                *cell = Some(i);
            }
            let node_plan = plan::plan_node(&info, &s.machine, p, node)?;
            executors.push(NodeExecutor::from_plan(Arc::clone(&info), node_plan)?);
        }
        Ok(InProcess {
            compute: info.compute.len(),
            units: Devices::new(s, p),
            device_buffers: zeroed_buffers(info.devices.len(), &info)?,
            phase: p.name.clone(),
            steps: p.steps,
            inboxes: (0..executors.len()).map(|_| Vec::new()).collect(),
            executors,
            position,
            outbox: Vec::new(),
        })
    }

    /// One completion entry per work request the devices served, over every run so far (see
    /// [`Completion`]); empty when the machine has no device.
    pub fn completions(&self) -> &[Completion] {
        &self.units.completions
    }

    /// The compute nodes, in the order their buffers are given.
    pub fn nodes(&self) -> Vec<NodeId> {
        self.executors[..self.compute]
            .iter()
            .map(NodeExecutor::node)
            .collect()
    }

    /// Runs the phase on `inputs` (one vector per compute node, in node order) and returns
    /// the vectors as the phase leaves them.
    pub fn run(&mut self, mut inputs: Vec<Vec<T>>) -> Result<Vec<Vec<T>>, Error> {
        self.run_in_place(&mut inputs)?;
        Ok(inputs)
    }

    /// Runs the phase on `buffers` in place (one vector per compute node, in node order).
    ///
    /// Every step's messages are checked before any node applies its writes of that step, so
    /// after an error `buffers` hold the state at the end of the last completed step.
    pub fn run_in_place(&mut self, buffers: &mut [Vec<T>]) -> Result<(), Error> {
        if buffers.len() != self.compute {
            return Err(Error::WrongBufferCount {
                phase: self.phase.clone(),
                expected: self.compute,
                found: buffers.len(),
            });
        }
        for device in &mut self.device_buffers {
            device.fill(T::ZERO);
        }
        let all = buffers.iter().chain(self.device_buffers.iter());
        for (executor, buffer) in self.executors.iter_mut().zip(all) {
            executor.start(buffer.len())?;
        }
        // Nothing left over from a run that stopped with an error.
        self.outbox.clear();
        self.inboxes.iter_mut().for_each(Vec::clear);
        self.units.start();
        for k in 0..self.steps as usize {
            let step = StepId::new(k);
            let all = buffers.iter().chain(self.device_buffers.iter());
            for (executor, buffer) in self.executors.iter_mut().zip(all) {
                executor.send_half(step, buffer, &mut self.outbox)?;
            }
            for message in self.outbox.drain(..) {
                let to = message.key.to;
                // Plans only address compute nodes and devices, so every message has an inbox.
                if let Some(inbox) = self
                    .position
                    .get(to.index())
                    .copied()
                    .flatten()
                    .and_then(|i| self.inboxes.get_mut(i))
                {
                    inbox.push(message);
                }
            }
            for (executor, inbox) in self.executors.iter_mut().zip(&mut self.inboxes) {
                executor.check_half(step, inbox)?;
            }
            let all = buffers.iter_mut().chain(self.device_buffers.iter_mut());
            for (executor, buffer) in self.executors.iter_mut().zip(all) {
                executor.apply_half(step, buffer)?;
            }
            self.units.step_done(k);
        }
        self.units.finish();
        Ok(())
    }
}

/// Runs the phase called `phase` of `schedule` with every compute node in this process.
/// `inputs[i]` is the vector of the `i`-th compute node in [`NodeId`] order (switches have no
/// vector); the result is in the same order.
///
/// To run the same phase many times, build an [`InProcess`] once instead.
pub fn run_phase<T: Element>(
    schedule: &VerifiedSchedule,
    phase: &str,
    inputs: Vec<Vec<T>>,
) -> Result<Vec<Vec<T>>, Error> {
    InProcess::new(schedule, phase)?.run(inputs)
}

/// [`run_phase_any`] within `limits` (see [`InProcess::with_limits`]).
pub fn run_phase_any_within(
    schedule: &VerifiedSchedule,
    phase: &str,
    inputs: Buffers,
    limits: &Limits,
) -> Result<Buffers, Error> {
    fn run<T: Element>(
        schedule: &VerifiedSchedule,
        phase: &str,
        inputs: Vec<Vec<T>>,
        limits: &Limits,
    ) -> Result<Vec<Vec<T>>, Error> {
        InProcess::with_limits(schedule, phase, limits)?.run(inputs)
    }
    Ok(match inputs {
        Buffers::F32(v) => Buffers::F32(run(schedule, phase, v, limits)?),
        Buffers::F64(v) => Buffers::F64(run(schedule, phase, v, limits)?),
        Buffers::I32(v) => Buffers::I32(run(schedule, phase, v, limits)?),
        Buffers::I64(v) => Buffers::I64(run(schedule, phase, v, limits)?),
        Buffers::F16(v) => Buffers::F16(run(schedule, phase, v, limits)?),
        Buffers::BF16(v) => Buffers::BF16(run(schedule, phase, v, limits)?),
    })
}

/// [`run_phase`] on dtype-erased buffers; refuses buffers whose element type is not the
/// phase's.
pub fn run_phase_any(
    schedule: &VerifiedSchedule,
    phase: &str,
    inputs: Buffers,
) -> Result<Buffers, Error> {
    Ok(match inputs {
        Buffers::F32(v) => Buffers::F32(run_phase(schedule, phase, v)?),
        Buffers::F64(v) => Buffers::F64(run_phase(schedule, phase, v)?),
        Buffers::I32(v) => Buffers::I32(run_phase(schedule, phase, v)?),
        Buffers::I64(v) => Buffers::I64(run_phase(schedule, phase, v)?),
        Buffers::F16(v) => Buffers::F16(run_phase(schedule, phase, v)?),
        Buffers::BF16(v) => Buffers::BF16(run_phase(schedule, phase, v)?),
    })
}
