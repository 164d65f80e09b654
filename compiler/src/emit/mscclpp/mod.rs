//! MSCCL++ execution-plan JSON: one verified phase as a plan for the MSCCL++ executor, pinned
//! to release **v0.7.0** (the format carries no version; its loader is
//! `src/executor/execution_plan.cc` and its kernel `src/include/execution_kernel.hpp` of that
//! release).
//!
//! [`to_json`] takes a [`VerifiedSchedule`] and the phase to export and returns the whole file,
//! or an [`MscclppError`] saying why the phase cannot be expressed. `docs/mscclpp.md` describes
//! the mapping for users; in short:
//!
//! - **GPUs and buffers.** Compute node `n` is GPU `id` = its position among the compute nodes.
//!   Chunks sit in the input (`i`), output (`o`) and scratch (`s`) buffers as in the MSCCL
//!   export (the shared layout of `emit`): a data chunk is read from the input until its first
//!   store, which goes to the output, so the input is never written (`inplace: false`).
//! - **Transfers.** A send becomes a `put` of each chunk from where it lives into a slot of the
//!   receiver's scratch buffer, then a `signal` on the memory channel to the receiver. The
//!   receive becomes a `wait` on the channel from the sender, then a `copy` (store) or `re`
//!   (reduce) from the slot into the destination. Every transferred chunk has a scratch slot
//!   of its own, so no slot is written twice and a fast sender can never overwrite what a slow
//!   receiver has not read yet.
//! - **Channels.** A memory channel reads from one buffer of its GPU (`srcbuff`) and writes the
//!   peer's scratch (`dstbuff: s`). Each pair of GPUs that exchange anything declares the same
//!   channels on both sides, in the same order, because the executor pairs the two ends'
//!   semaphores by order.
//! - **Ordering.** A GPU runs its operations in BSP order: per step, puts, signals, waits, then
//!   stores and reductions (reads before the writes that replace them). Thread blocks run
//!   every operation with all their threads, and only `nop` (`__syncthreads`) orders them, so a
//!   `nop` separates a `put` from its `signal`, a `wait` from the reads it guards, and any two
//!   operations that touch the same chunk. A GPU whose operations do not fit one thread block
//!   ([`MAX_OPERATIONS`]) gets a chain of thread blocks, each starting where the last stopped
//!   (between any two operations): they meet at a `barrier` (one of [`MAX_BARRIERS`] device
//!   syncers).
//!
//! Refused: collectives other than allreduce, reduce-scatter and allgather; reductions with an
//! op other than Sum (the executor always adds); programs on switches (in-network reduction);
//! routes through another GPU (a channel joins two GPUs directly; routes through switches are
//! plain peer connections); and anything beyond the executor's limits.

mod json;
mod ops;
mod threadblocks;

use super::{choose_phase, PhaseChoiceError};
use schedule_ir::{Collective, ReduceOp, VerifiedSchedule};
use thiserror::Error;

/// The MSCCL++ release whose loader and kernel the plans follow.
pub const RELEASE: &str = "v0.7.0";
/// Operations one thread block may hold (`MAX_OPERATION`).
pub const MAX_OPERATIONS: usize = 64;
/// Memory channels one thread block may use (`MAX_CHANNEL`).
pub const MAX_TB_CHANNELS: usize = 16;
/// Channels one operation may name (`MAX_CHANNEL_PER_OPERATION`).
pub const MAX_OP_CHANNELS: usize = 8;
/// Device syncers a barrier may use (`MAX_DEVICE_SYNCERS`); barrier ids run from 0 to 15.
pub const MAX_BARRIERS: usize = 16;
/// Threads per block written to the plan (the loader's default).
pub const THREADS_PER_BLOCK: u32 = 1024;

/// What to export.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// The phase to export; `None` is fine when the schedule has exactly one phase.
    pub phase: Option<String>,
}

/// Why a schedule cannot be written as an MSCCL++ execution plan.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum MscclppError {
    /// No one phase to export.
    #[error(transparent)]
    Phase(#[from] PhaseChoiceError),
    /// A collective the export does not handle.
    #[error(
        "phase `{phase}` is a {collective}; MSCCL++ export handles allreduce, reduce-scatter \
         and allgather"
    )]
    UnsupportedCollective {
        /// The phase.
        phase: String,
        /// The collective, in words.
        collective: String,
    },
    /// A reduction with an op the executor does not have.
    #[error(
        "phase `{phase}` reduces with op {op}, but the MSCCL++ {RELEASE} executor always adds \
         (its plans have no op); compile the phase with op Sum"
    )]
    NotSum {
        /// The phase.
        phase: String,
        /// The op, in words.
        op: String,
    },
    /// A phase without chunks.
    #[error("phase `{phase}` has no chunks; an MSCCL++ plan needs at least one input chunk")]
    NoChunks {
        /// The phase.
        phase: String,
    },
    /// Reduce-scatter or allgather where ranks own unequal shares.
    #[error(
        "phase `{phase}`: an MSCCL++ {collective} gives every rank an equal block of the \
         vector, but {node} owns {owned} of the {chunks} chunks (each of the {ranks} ranks must \
         own as many as the others)"
    )]
    UnequalBlocks {
        /// The phase.
        phase: String,
        /// The collective, in words.
        collective: String,
        /// A node whose share differs.
        node: String,
        /// How many chunks it owns.
        owned: usize,
        /// Chunks in the phase.
        chunks: usize,
        /// Compute nodes.
        ranks: usize,
    },
    /// A switch that runs a program: in-network reduction or forwarding by a device.
    #[error(
        "phase `{phase}`: switch {node} runs a program of its own (in-network reduction or \
         storage), but MSCCL++ plans run only on GPUs"
    )]
    InNetwork {
        /// The phase.
        phase: String,
        /// The switch.
        node: String,
    },
    /// A route that passes through a compute node.
    #[error(
        "phase `{phase}`, step {step}: {from} sends to {to} through {via}, but an MSCCL++ \
         channel joins two GPUs directly and a GPU forwards nothing it has no operation for; \
         compile without routes through compute nodes"
    )]
    RouteThroughGpu {
        /// The phase.
        phase: String,
        /// The BSP step.
        step: u32,
        /// The sender.
        from: String,
        /// The receiver.
        to: String,
        /// The compute node in between.
        via: String,
    },
    /// Operations of one step that would have to run in both orders.
    #[error("phase `{phase}`, step {step}: {node}'s operations cannot be ordered: {detail}")]
    Unorderable {
        /// The phase.
        phase: String,
        /// The BSP step.
        step: u32,
        /// The node.
        node: String,
        /// What conflicts.
        detail: String,
    },
    /// More chained thread blocks than there are barriers to join them.
    #[error(
        "phase `{phase}`: {node} (GPU {rank}) needs {tbs} thread blocks of at most \
         {MAX_OPERATIONS} operations, chained by barriers, but the executor has \
         {MAX_BARRIERS} barriers (so at most {} thread blocks); use fewer steps or chunks",
        MAX_BARRIERS + 1
    )]
    TooManyThreadBlocks {
        /// The phase.
        phase: String,
        /// The node.
        node: String,
        /// Its GPU id.
        rank: u32,
        /// Thread blocks needed.
        tbs: usize,
    },
    /// A thread block that would use more channels than the executor gives it.
    #[error(
        "phase `{phase}`: thread block {tb} of {node} (GPU {rank}) uses {count} memory \
         channels, but an MSCCL++ {RELEASE} thread block has at most {MAX_TB_CHANNELS}"
    )]
    TooManyChannels {
        /// The phase.
        phase: String,
        /// The node.
        node: String,
        /// Its GPU id.
        rank: u32,
        /// The thread block.
        tb: usize,
        /// Channels it uses.
        count: usize,
    },
    /// Something a verified schedule rules out; a bug in topoc.
    #[error(
        "internal error exporting phase `{phase}` to an MSCCL++ plan: {detail}; please report \
         this"
    )]
    Internal {
        /// The phase.
        phase: String,
        /// What went wrong.
        detail: String,
    },
}

/// The phase chosen by `options`, or why none can be.
fn choose<'a>(
    schedule: &'a schedule_ir::Schedule,
    options: &Options,
) -> Result<&'a schedule_ir::Phase, MscclppError> {
    Ok(choose_phase(
        schedule,
        options.phase.as_deref(),
        "an MSCCL++ plan holds one collective",
    )?)
}

/// The `collective` field for a phase, or why it has none.
fn collective_name(phase: &schedule_ir::Phase) -> Result<&'static str, MscclppError> {
    let name = match phase.collective {
        Collective::AllReduce => "allreduce",
        Collective::ReduceScatter => "reducescatter",
        Collective::AllGather => "allgather",
        Collective::Broadcast { .. } | Collective::Reduce { .. } => {
            let collective = if matches!(phase.collective, Collective::Broadcast { .. }) {
                "broadcast"
            } else {
                "reduce"
            };
            return Err(MscclppError::UnsupportedCollective {
                phase: phase.name.clone(),
                collective: collective.to_string(),
            });
        }
    };
    // An allgather moves inputs unchanged: its op plays no part.
    if phase.op != ReduceOp::Sum && name != "allgather" {
        return Err(MscclppError::NotSum {
            phase: phase.name.clone(),
            op: format!("{:?}", phase.op).to_lowercase(),
        });
    }
    Ok(name)
}

/// Exports one phase of a verified schedule as MSCCL++ execution-plan JSON.
pub fn to_json(schedule: &VerifiedSchedule, options: &Options) -> Result<String, MscclppError> {
    let schedule = schedule.schedule();
    let phase = choose(schedule, options)?;
    let collective = collective_name(phase)?;
    let streams = ops::build(&schedule.machine, phase)?;
    let gpus = threadblocks::assemble(phase, streams)?;
    let name = format!(
        "topoc {} {} {} (MSCCL++ {RELEASE})",
        schedule.machine.name, phase.name, phase.algorithm
    );
    Ok(json::write(&name, collective, &gpus))
}
