//! Resource budgets: what a run of a phase will need — memory and work — estimated from the
//! schedule alone, before anything is allocated, and refused past a budget.
//!
//! A schedule of a few kilobytes can name a vector of 2⁴⁰ elements, a dozen scratch buffers or
//! a million copies of the whole vector: its size on disk says nothing about what running it
//! costs. So every driver ([`InProcess`](crate::InProcess), [`NodeExecutor`](crate::NodeExecutor)
//! and the MPI node) asks [`Needs`] first and fails with [`Error::OverMemoryBudget`] or
//! [`Error::OverWorkBudget`] instead of aborting on a failed allocation or running for hours.
//!
//! - **Memory**: per node that runs a program, its data buffer (the caller's vector for a
//!   compute node, the driver's for a device), its scratch buffers (buffers `1..` of the
//!   phase, each as long as the vector), and its messages: the most vectors one of its steps
//!   holds at once (sends plus snapshots) times the longest message of the phase. Plans and
//!   bookkeeping are proportional to the schedule's own size and are not counted.
//! - **Work**: the bytes the run reads and writes: every element a send copies out, a receive
//!   stores or combines, a local reduce or copy writes and a scale divides. A run's time is
//!   proportional to it (plus a small cost per instruction and step, proportional to the
//!   schedule's size).
//!
//! Defaults: [`DEFAULT_MEMORY_BUDGET`] (4 GiB) and [`DEFAULT_WORK_BUDGET`] (64 GiB: tens of
//! seconds to a minute of one core, at the 1–4 GiB/s the in-process driver moves and combines
//! data — `examples/ring_speed.rs`). An allreduce that fits the memory budget does a few times
//! its data in work, far below the work budget; a schedule that copies its vector over and
//! over does not.

use crate::error::Error;
use schedule_ir::{Instr, Machine, NodeId, NodeKind, Phase};

/// The memory a run may use by default: 4 GiB.
pub const DEFAULT_MEMORY_BUDGET: u64 = 4 << 30;

/// The bytes a run may move and combine by default: 64 GiB.
pub const DEFAULT_WORK_BUDGET: u64 = 64 << 30;

/// How much a run may use. The default is [`DEFAULT_MEMORY_BUDGET`] and
/// [`DEFAULT_WORK_BUDGET`]; `u64::MAX` lifts a limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Bytes of buffers and messages a run may hold at once (all nodes it runs).
    pub memory_bytes: u64,
    /// Bytes a run may read and write (see the `budget` module).
    pub work_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            memory_bytes: DEFAULT_MEMORY_BUDGET,
            work_bytes: DEFAULT_WORK_BUDGET,
        }
    }
}

/// What running a phase needs, estimated from the schedule (see the `budget` module).
/// Every figure saturates at `u64::MAX` rather than overflowing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Needs {
    /// Nodes counted (compute nodes and devices).
    pub nodes: u64,
    /// The data buffers of those nodes, in bytes.
    pub data_bytes: u64,
    /// Their scratch buffers, in bytes.
    pub scratch_bytes: u64,
    /// Their message vectors, in bytes (an upper bound).
    pub message_bytes: u64,
    /// Bytes read and written by the run.
    pub work_bytes: u64,
}

impl Needs {
    /// What a run of `phase` with every compute node and device in one process needs.
    pub fn in_process(machine: &Machine, phase: &Phase) -> Needs {
        let runs = machine
            .nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| n.kind == NodeKind::Compute || n.capacity.is_some())
            .map(|(i, _)| NodeId::new(i));
        Self::of_nodes(phase, runs)
    }

    /// What a run of one node's program of `phase` needs (one MPI rank).
    pub fn node(phase: &Phase, node: NodeId) -> Needs {
        Self::of_nodes(phase, std::iter::once(node))
    }

    fn of_nodes(phase: &Phase, nodes: impl Iterator<Item = NodeId>) -> Needs {
        let size = phase.dtype.size_bytes();
        let vector = phase.elements.saturating_mul(size);
        let scratch = phase.buffers.len().saturating_sub(1) as u64;
        // Bytes summed run by run; elements are bytes over the element size.
        let bytes = schedule_ir::ChunkBytes::of(phase);
        let elements = |chunks: &schedule_ir::ChunkIds| bytes.bytes(chunks) / size.max(1);
        let longest = phase
            .programs
            .iter()
            .flat_map(|p| p.steps.iter().flatten())
            .map(|i| elements(i.chunks()))
            .max()
            .unwrap_or(0);
        let mut needs = Needs::default();
        for node in nodes {
            let Some(program) = phase.programs.get(node.index()) else {
                continue;
            };
            needs.nodes += 1;
            needs.data_bytes = needs.data_bytes.saturating_add(vector);
            needs.scratch_bytes = needs
                .scratch_bytes
                .saturating_add(vector.saturating_mul(scratch));
            let mut vectors = 0u64;
            for step in &program.steps {
                // Sends, and local operations that may need a snapshot of their source.
                let held = step
                    .iter()
                    .filter(|i| {
                        matches!(
                            i,
                            Instr::Send { .. } | Instr::Reduce { .. } | Instr::Copy { .. }
                        )
                    })
                    .count() as u64;
                vectors = vectors.max(held);
                for instr in step {
                    needs.work_bytes = needs
                        .work_bytes
                        .saturating_add(elements(instr.chunks()).saturating_mul(size));
                }
            }
            needs.message_bytes = needs
                .message_bytes
                .saturating_add(vectors.saturating_mul(longest).saturating_mul(size));
        }
        needs
    }

    /// Bytes of memory in all: data, scratch and messages.
    pub fn memory_bytes(&self) -> u64 {
        self.data_bytes
            .saturating_add(self.scratch_bytes)
            .saturating_add(self.message_bytes)
    }

    /// Refuses a run of phase `phase` that needs more than `limits` allow, plus `extra_bytes`
    /// of memory the caller holds beside the run (copies of inputs, a reference).
    pub fn check(&self, phase: &str, limits: &Limits, extra_bytes: u64) -> Result<(), Error> {
        let memory = self.memory_bytes().saturating_add(extra_bytes);
        if memory > limits.memory_bytes {
            return Err(Error::OverMemoryBudget {
                phase: phase.to_string(),
                needed: memory,
                budget: limits.memory_bytes,
                detail: format!(
                    "data {} on {} node(s), scratch {}, messages {}{}",
                    bytes(self.data_bytes),
                    self.nodes,
                    bytes(self.scratch_bytes),
                    bytes(self.message_bytes),
                    if extra_bytes > 0 {
                        format!(", copies held beside the run {}", bytes(extra_bytes))
                    } else {
                        String::new()
                    }
                ),
            });
        }
        if self.work_bytes > limits.work_bytes {
            return Err(Error::OverWorkBudget {
                phase: phase.to_string(),
                needed: self.work_bytes,
                budget: limits.work_bytes,
            });
        }
        Ok(())
    }
}

/// A byte count for people: `512 B`, `3.0 KiB`, `7.9 GiB`.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut value = n as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS.get(unit).copied().unwrap_or("EiB"))
}
