//! runtime-lite: executes verified topoc schedules on real buffers, deterministically.
//!
//! # Contents
//! - [`load`], [`find_node`]: read and verify a schedule, pick a node by name;
//! - [`run_phase`] / [`InProcess`]: run a phase with every compute node in this process (tests,
//!   `topoc run`), devices (reducing NICs and switches) included, recording a [`Completion`]
//!   per work request a device serves;
//! - [`bands::select`]: the phase that runs an exchange on buffers of a given size — for a
//!   banded exchange, the band that holds the size — re-cut to their length and verified;
//! - [`run_node_phase`] / [`NodeExecutor`]: run one node's part of a phase over a
//!   [`Transport`] (embedding in a BSP node program, one node per process — MPI);
//! - [`threaded`]: one thread per node over channels, with timeouts (failure tests);
//! - [`reference()`], [`compare`]: what each node must hold, by a plain loop, and the check of a
//!   run against it;
//! - [`Element`]: the element types (`f32`, `f64`, `i32`, `i64`, `f16`, `bf16`) and how they combine;
//!   [`AnyBuffer`] and [`Buffers`] for element types chosen at run time;
//! - [`inputs`]: deterministic inputs from `(seed, node)`, the same in every process;
//! - [`Limits`], [`Needs`]: the memory and work a run needs, estimated from the schedule before
//!   anything is allocated, and the budget past which a run is refused (4 GiB and 64 GiB by
//!   default);
//! - [`ScheduleDigest`]: a stable digest of a schedule, so that processes can check they run
//!   the same one;
//! - `mpi` (cargo feature `mpi`): the MPI transport and `mpi::MpiNode`, one compute node per
//!   MPI rank, for BSP programs launched with `mpirun`. The ranks agree on the schedule's
//!   digest when they set up, and on the phase, element type and length before a phase's first
//!   message. Schedules in which a device reduces in the network (a NIC or switch that runs a
//!   program) do not run over MPI — only compute nodes have ranks — and are refused at set-up,
//!   naming the device; run them in process;
//! - [`Error`]: everything that can go wrong, in the names the user wrote.
//!
//! # Pipeline
//!
//! ```text
//! schedule text ──serial::from_str──▶ Schedule ──verify──▶ VerifiedSchedule
//!                                                               │  phase name (+ node)
//!                           lower (plan): ids → element ranges, messages keyed, all checked
//!                                                               │
//!            InProcess: all nodes, lockstep, one thread   NodeExecutor + Transport: one node
//!                                                              (mpi::MpiNode: one rank each)
//! ```
//!
//! Every entry point takes a [`schedule_ir::VerifiedSchedule`]: nothing
//! runs unverified. The runtime still trusts nothing else: it lowers the phase into a plan,
//! checking every id and chunk range once (so a schedule it cannot execute is an
//! [`Error::Malformed`], not a panic), checks the buffers it is given (count, length, element
//! type), and checks every message a transport delivers (present, of the right size, expected,
//! not duplicated) before it writes anything.
//!
//! # Semantics
//!
//! The runtime implements the BSP semantics of the schedule IR (see the `schedule_ir` crate
//! doc). For each step `k`, on every compute node:
//! 1. **read**: every [`Instr::Send`](schedule_ir::Instr::Send) copies its chunks, as they are
//!    at the start of step `k`, into a [`Message`]; the source of a local
//!    `Reduce`/`Copy` is read at the start of the step too (copied aside only when an earlier
//!    write of the same step would change it);
//! 2. **transfer**: the messages go to their receivers — moved between nodes in process, or
//!    through the [`Transport`];
//! 3. **write**: once every expected message has arrived and been checked, the node applies
//!    its writes **in program order**: a receive's `Store` replaces the chunks and its `Reduce`
//!    sets `dst = dst ⊕ incoming` with the phase's op; a local
//!    [`Reduce`](schedule_ir::Instr::Reduce) sets `dst = dst ⊕ src`, a local
//!    [`Copy`](schedule_ir::Instr::Copy) sets `dst = src` (the source as it was at the start
//!    of the step); a [`Scale`](schedule_ir::Instr::Scale) divides its chunks in place by its
//!    divisor (only in a phase whose op is a mean: the sum becomes the mean; integers divide
//!    truncating, see [`Element`]).
//!
//! Devices (switches with a capacity: reducing NICs and switches) run programs too, in
//! process: the in-process driver keeps their buffers, runs them in lockstep with the compute
//! nodes and records a [`Completion`] per piece of a segment they receive.
//!
//! # Limits
//!
//! A schedule's size says nothing about what running it costs: a few kilobytes can name a
//! vector of 2⁴⁰ elements, a dozen scratch buffers or a thousand copies of the whole vector.
//! Every driver first estimates what the run needs ([`Needs`]: data, scratch and message
//! buffers per node; bytes copied and combined) and refuses, with
//! [`Error::OverMemoryBudget`] or [`Error::OverWorkBudget`] and nothing allocated, a run past
//! its [`Limits`]: [`DEFAULT_MEMORY_BUDGET`] (4 GiB) and [`DEFAULT_WORK_BUDGET`] (64 GiB)
//! unless the caller sets others ([`InProcess::with_limits`], [`NodeExecutor::with_limits`],
//! `MpiNode::set_limits`, `topoc run --memory-budget/--work-budget`). Within the budget, time
//! is proportional to the work the schedule states.
//!
//! Buffer 0 is the caller's vector (input before the phase, result after). Scratch buffers
//! are set to zero at the start of every run. Sends with a route (`via`) go end to end:
//! switches forward and do no arithmetic, so the runtime needs no switch program. Integer
//! arithmetic wraps; float max/min are order-independent (see [`Element`]); with one thread
//! and a fixed order of writes, every run of a schedule on the same inputs gives bit-identical
//! results.
//!
//! # Example
//!
//! ```
//! # fn main() -> Result<(), runtime_lite::Error> {
//! // Two nodes swap their vectors over link L0 and each adds the other's: an allreduce.
//! let text = r#"Schedule(
//!   format_version: 1,
//!   machine: Machine(name: "pair", nodes: [
//!       Node(name: "A", kind: Compute), Node(name: "B", kind: Compute)],
//!     links: [Link(name: "L0", a: 0, b: 1, bandwidth_gbps: 100.0, latency_us: 1.0, lanes: 1)]),
//!   phases: [Phase(name: "grads", collective: AllReduce, op: Sum, dtype: I32, elements: 3,
//!     algorithm: "exchange", chunks: [Chunk(start: 0, end: 3)],
//!     buffers: [Buffer(name: "data", kind: Data)], steps: 1,
//!     programs: [
//!       Program(steps: [[Send(link: 0, to: 1, buffer: 0, chunks: [0]),
//!                        Recv(link: 0, from: 1, buffer: 0, chunks: [0], mode: Reduce)]]),
//!       Program(steps: [[Send(link: 0, to: 0, buffer: 0, chunks: [0]),
//!                        Recv(link: 0, from: 0, buffer: 0, chunks: [0], mode: Reduce)]]),
//!     ])],
//! )"#;
//! let schedule = runtime_lite::load(text)?;
//! let inputs = vec![vec![1, 2, 3], vec![10, 20, i32::MAX]];
//! let outputs = runtime_lite::run_phase(&schedule, "grads", inputs.clone())?;
//! assert_eq!(outputs, vec![vec![11, 22, i32::MIN + 2]; 2]);
//!
//! let phase = schedule.schedule().phase("grads").expect("the phase exists");
//! let expected = runtime_lite::reference(&schedule.schedule().machine, phase, &inputs)?;
//! runtime_lite::compare(&schedule.schedule().machine, phase, &inputs, &expected, &outputs)?;
//! # Ok(()) }
//! ```

pub mod bands;
mod budget;
mod buffer;
mod completion;
mod digest;
mod element;
mod error;
mod exec;
mod inprocess;
pub mod inputs;
#[cfg(feature = "link")]
pub mod link;
#[cfg(feature = "mpi")]
pub mod mpi;
mod plan;
mod reference;
pub mod threaded;
mod transport;

#[cfg(test)]
extern crate self as runtime_lite;
#[cfg(test)]
#[path = "../tests/common/mod.rs"]
mod test_common;
#[cfg(test)]
mod tests;

pub use budget::{Limits, Needs, DEFAULT_MEMORY_BUDGET, DEFAULT_WORK_BUDGET};
pub use buffer::{AnyBuffer, Buffers};
pub use completion::{Completion, Status};
pub use digest::{Digest, ScheduleDigest};
pub use element::Element;
pub use error::Error;
pub use exec::{run_node_phase, run_node_phase_any, NodeExecutor};
pub use inprocess::{run_phase, run_phase_any, run_phase_any_within, InProcess};
pub use reference::{compare, compare_any, reference, reference_any};
pub use transport::{Expected, Message, MessageKey, Transport};

use schedule_ir::{NodeId, VerifiedSchedule};

/// Reads a schedule written as RON or JSON and verifies it: the one way from a file to
/// something the runtime will run.
pub fn load(text: &str) -> Result<VerifiedSchedule, Error> {
    let schedule = schedule_ir::serial::from_str(text)?;
    Ok(schedule_ir::verify(schedule)?)
}

/// The id of the node the user calls `name`.
pub fn find_node(schedule: &VerifiedSchedule, name: &str) -> Result<NodeId, Error> {
    schedule
        .schedule()
        .machine
        .nodes
        .iter()
        .position(|n| n.name == name)
        .map(NodeId::new)
        .ok_or_else(|| Error::UnknownNode {
            node: name.to_string(),
        })
}
