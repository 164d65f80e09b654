//! Completion entries and segment units of devices (the reducing NICs and switches of in-network allreduce).
//!
//! A *device* is a switch with a capacity: it holds segments in a fixed number of units. Every
//! piece of a segment a device receives is one **work request**; when its step completes the
//! driver records a [`Completion`] for it: the job (the phase), the message (which run of the
//! phase), the sequence id (the segment, i.e. the chunk), the device, the step and a status.
//! The units are modelled as the verifier defines liveness: the first write of a segment
//! claims a unit, which is freed at the last read of the segment before it is written again. A
//! request that finds no free unit completes with [`Status::BufferError`] (never, for a
//! verified schedule: the verifier's capacity pass proves it).

use schedule_ir::{BufferId, ChunkId, Instr, NodeId, Phase, Schedule, StepId};
use std::collections::{BTreeMap, BTreeSet};

/// How a work request ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// The piece was stored or combined into its segment's unit.
    Done,
    /// No unit was free for a new segment.
    BufferError,
}

/// One completion-queue entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Completion {
    /// The job: the phase's name.
    pub job: String,
    /// The message: which run of the phase (counted from 0 per driver).
    pub message: u64,
    /// The sequence id: the segment (chunk) the piece belongs to.
    pub sequence: ChunkId,
    /// The device that served the request.
    pub device: NodeId,
    /// The step the piece arrived in.
    pub step: StepId,
    /// How it ended.
    pub status: Status,
}

/// What a device does to its units in one step.
#[derive(Clone, Debug, Default)]
struct StepUnits {
    /// Pieces received, in program order: `(buffer, chunk)`.
    received: Vec<(BufferId, ChunkId)>,
    /// Segments whose last read before a rewrite (or the end) is this step.
    freed: Vec<(BufferId, ChunkId)>,
}

/// The devices of a phase with their units, ready to record completions run after run.
#[derive(Debug, Default)]
pub(crate) struct Devices {
    job: String,
    /// `(device, capacity, per step)`.
    devices: Vec<(NodeId, u32, Vec<StepUnits>)>,
    /// Units held per device, during a run.
    held: Vec<BTreeSet<(BufferId, ChunkId)>>,
    runs: u64,
    /// Every completion so far.
    pub(crate) completions: Vec<Completion>,
}

impl Devices {
    /// The devices of `phase` and their work, from the schedule.
    pub(crate) fn new(schedule: &Schedule, phase: &Phase) -> Devices {
        let steps = phase.steps as usize;
        let mut devices = Vec::new();
        for (n, (node, program)) in schedule
            .machine
            .nodes
            .iter()
            .zip(&phase.programs)
            .enumerate()
        {
            let Some(capacity) = node.capacity else {
                continue;
            };
            let mut per_step = vec![StepUnits::default(); steps];
            // Last read of each segment before its next write: track the open interval.
            let mut last_read: BTreeMap<(BufferId, ChunkId), Option<usize>> = BTreeMap::new();
            for (k, instrs) in program.steps.iter().enumerate().take(steps) {
                for instr in instrs {
                    if let Instr::Send { buffer, chunks, .. }
                    | Instr::Reduce {
                        src: buffer,
                        chunks,
                        ..
                    }
                    | Instr::Copy {
                        src: buffer,
                        chunks,
                        ..
                    } = instr
                    {
                        for c in chunks {
                            last_read.insert((*buffer, c), Some(k));
                        }
                    }
                }
                for instr in instrs {
                    let written = match instr {
                        Instr::Recv { buffer, chunks, .. } => {
                            for c in chunks {
                                per_step[k].received.push((*buffer, c));
                            }
                            Some((*buffer, chunks))
                        }
                        Instr::Reduce { dst, chunks, .. } | Instr::Copy { dst, chunks, .. } => {
                            Some((*dst, chunks))
                        }
                        // A scale rewrites its chunks in place, like a write.
                        Instr::Scale { buffer, chunks, .. } => Some((*buffer, chunks)),
                        Instr::Send { .. } => None,
                    };
                    if let Some((b, chunks)) = written {
                        for c in chunks {
                            // A rewrite ends the previous interval at its last read.
                            if let Some(Some(r)) = last_read.insert((b, c), None) {
                                if r < k {
                                    per_step[r].freed.push((b, c));
                                }
                            }
                        }
                    }
                }
            }
            for (unit, read) in last_read {
                if let Some(r) = read {
                    per_step[r].freed.push(unit);
                }
            }
            devices.push((schedule_ir::NodeId::new(n), capacity, per_step));
        }
        Devices {
            job: phase.name.clone(),
            held: vec![BTreeSet::new(); devices.len()],
            devices,
            runs: 0,
            completions: Vec::new(),
        }
    }

    /// A new run begins: every unit is free.
    pub(crate) fn start(&mut self) {
        self.held.iter_mut().for_each(BTreeSet::clear);
    }

    /// Step `k` completed: records its work requests and frees the units it finished with.
    pub(crate) fn step_done(&mut self, k: usize) {
        for (d, (device, capacity, per_step)) in self.devices.iter().enumerate() {
            let Some(units) = per_step.get(k) else {
                continue;
            };
            let held = &mut self.held[d];
            for &unit in &units.received {
                let status = if held.contains(&unit) || held.len() < *capacity as usize {
                    held.insert(unit);
                    Status::Done
                } else {
                    Status::BufferError
                };
                self.completions.push(Completion {
                    job: self.job.clone(),
                    message: self.runs,
                    sequence: unit.1,
                    device: *device,
                    step: StepId::new(k),
                    status,
                });
            }
            for unit in &units.freed {
                held.remove(unit);
            }
        }
    }

    /// The run finished.
    pub(crate) fn finish(&mut self) {
        self.runs += 1;
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::panic)]
mod tests {
    use super::*;
    use crate::test_common::{build_schedule, star_allreduce, star_machine};

    /// A device with one unit receiving two segments in one step: the second request finds no
    /// free unit (a schedule the verifier would refuse).
    #[test]
    fn a_request_without_a_free_unit_is_a_buffer_error() {
        let mut machine = star_machine(3);
        machine.nodes[3].capacity = Some(1);
        let mut phase = star_allreduce(
            3,
            "grads",
            schedule_ir::ReduceOp::Sum,
            schedule_ir::DType::I32,
            8,
        );
        let recv = Instr::Recv {
            link: schedule_ir::LinkId(0),
            from: NodeId(0),
            buffer: BufferId(0),
            chunks: vec![ChunkId(0), ChunkId(1)].into(),
            mode: schedule_ir::RecvMode::Store,
        };
        phase.programs[3].steps = vec![vec![recv]; phase.steps as usize];
        let schedule = build_schedule(machine, vec![phase]);
        let mut devices = Devices::new(&schedule, &schedule.phases[0]);
        devices.start();
        devices.step_done(0);
        let statuses: Vec<Status> = devices.completions.iter().map(|c| c.status).collect();
        assert_eq!(statuses, [Status::Done, Status::BufferError]);
        assert!(devices
            .completions
            .iter()
            .all(|c| c.device == NodeId(3) && c.message == 0));
    }
}
