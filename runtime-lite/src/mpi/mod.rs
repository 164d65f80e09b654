//! The MPI transport (cargo feature `mpi`): one compute node's program per MPI rank, every
//! transfer a point-to-point message to the peer's rank.
//!
//! # Contents
//! - [`MpiNode`]: the embedding API — build it on every rank from a verified schedule, then
//!   [`MpiNode::run`] an exchange phase by name on this node's buffer, with
//!   [`MpiNode::barrier`] between compute and exchange where the program needs one;
//! - [`MpiTransport`]: the [`Transport`](crate::Transport) underneath, for use with
//!   [`NodeExecutor`](crate::NodeExecutor) or [`run_node_phase`](crate::run_node_phase);
//! - [`MpiElement`]: the element types that go over MPI (all six the runtime has);
//! - [`MpiError`]: what the transport reports.
//!
//! # Ranks
//!
//! Rank `i` of the communicator runs the `i`-th compute node of the machine in [`NodeId`]
//! order (the order of [`Machine::compute_nodes`](schedule_ir::Machine::compute_nodes), the
//! same order in which [`run_phase`](crate::run_phase) takes its buffers); switches have no
//! rank. The communicator must have exactly one rank per compute node, or setting up fails
//! with [`MpiError::WorldSize`].
//!
//! Devices — NICs and switches that reduce in the network and run programs of their own — have
//! no rank either, so a schedule in which a device runs a program (in-network reduction, seed
//! 003's fabric with a reducing switch) cannot run over MPI: [`MpiNode::new`] (and
//! [`MpiTransport::new`] for the phase) refuses it on every rank with
//! [`MpiError::DeviceProgram`], naming the phase and the device. Such schedules run in one
//! process ([`run_phase`](crate::run_phase), `topoc run`), where the driver runs the devices.
//! A fabric whose switch does not reduce compiles to a NIC ring, which runs over MPI.
//!
//! # Agreement
//!
//! Ranks that were given different schedules would exchange messages that fit and compute
//! something else — a sum on one rank, a max on the others — and report success. So before
//! anything is exchanged:
//! - [`MpiNode::new`] gathers every rank's set-up status and the [`ScheduleDigest`] of its
//!   schedule (128-bit FNV-1a of its canonical RON text; see [`crate::ScheduleDigest`]); if
//!   they differ, every rank fails with [`MpiError::ScheduleMismatch`], which names the first
//!   rank that differs and what differs (the machine, the phases' names, their collective, op,
//!   element type or length, or their programs);
//! - the first [`MpiNode::run`] of a phase (and the first with another element type) sends
//!   every other rank the phase's name digest, the element type, the phase's length and the
//!   buffer's length, on a communicator of its own, within the timeout; a rank that runs
//!   another phase, another element type or a buffer of the wrong length makes every rank fail
//!   ([`MpiError::PhaseMismatch`]) before the first message, and a rank that does not run the
//!   phase at all is reported after the timeout ([`MpiError::AgreeTimeout`]).
//!
//! [`MpiTransport`] used directly (with [`NodeExecutor`](crate::NodeExecutor)) does neither:
//! agreeing is the caller's business there.
//!
//! # One step
//!
//! The node executor hands the transport the step's outgoing messages and the list of
//! messages it expects. The transport
//! 1. posts a non-blocking send (`MPI_Isend`) of each outgoing message to the receiver's rank;
//! 2. polls for each expected message with a matched probe (`MPI_Improbe`) on its sender's rank
//!    and tag, reads its size from the probe, and receives it whole (`MPI_Mrecv`), whatever
//!    its size — so a message of the wrong size is received and then reported by the executor
//!    as [`Error::WrongMessageSize`](crate::Error::WrongMessageSize) (and one that is not even
//!    a whole number of elements as [`MpiError::Ragged`]), never truncated or left pending;
//! 3. waits until the receivers have taken its sends.
//!
//! Sends are non-blocking and receives polled, so no order of ranks can deadlock. The matched
//! receives are the BSP barrier between steps: a node cannot finish step `k` before every peer
//! it hears from in step `k` has started it, and the executor applies the step's writes only
//! after all of its messages have arrived and been checked. A phase therefore needs no
//! `MPI_Barrier`; a BSP program calls [`MpiNode::barrier`] where its own compute phases need
//! one.
//!
//! # Tags
//!
//! A message is matched by its sender's rank and its tag. The tag of a message of step `k` of
//! the phase at position `p` in the schedule, arriving over its (last) link `l` in direction
//! `d` (0 from the link's `a` end to its `b` end, 1 the other way), on lane `j`, is
//!
//! ```text
//! tag = (g · S + (2·l + d) · Λ + j) mod (MPI_TAG_UB + 1)
//!   g = steps(phase 0) + … + steps(phase p-1) + k     the global step
//!   Λ = the most lanes any link of the machine has, or, if more, the most messages
//!       of one step between two nodes over one link in a phase whose links are shared
//!   S = 2 · links · Λ                                 tag slots per step
//! ```
//!
//! The lane `j` numbers, from 0, the transfers of the step between the same two nodes over
//! the same link, in the order of their first chunk; sender and receiver number them alike.
//! `MPI_TAG_UB` is read from the communicator's attribute (2²⁸ − 1 for Debian's MPICH 4.0);
//! an MPI library that does not give it is assumed to have the least the standard guarantees,
//! 32767.
//! Setting up fails with [`MpiError::TagSpace`] if `S > MPI_TAG_UB + 1`.
//!
//! So within a step, every message between two ranks has its own tag, and a message can only
//! match the receive it was sent for. While `g · S` stays below the bound (ladder-8 has 16
//! links, so `S = 32`: 8 million steps under MPICH, 1024 under the least bound), the tag
//! spells out phase, step, link, direction and lane,
//! and a rank that runs another phase or step than its peer waits for a tag that never comes
//! and reports it (below) instead of combining the wrong data. Past the bound, tags repeat,
//! and correctness rests on MPI's non-overtaking rule: messages between two ranks with the
//! same tag are received in the order they were sent, and both ranks go through the steps in
//! the same order. Running a phase again (the next superstep) reuses its tags the same way.
//!
//! # Failures
//!
//! Nothing here hangs for ever or panics on what the peers send:
//! - a wrong number of ranks, a machine too large for the tags, or a device with a program: an
//!   error from [`MpiNode::new`] or [`MpiTransport::new`] on every rank; [`MpiNode::new`] also
//!   agrees with the other ranks first, so if one rank cannot set up (it was given a schedule
//!   for another machine), the others fail with [`MpiError::PeerSetup`] instead of waiting for
//!   it, and if all can but their schedules differ, all fail with
//!   [`MpiError::ScheduleMismatch`];
//! - a run past the node's [`Limits`](crate::Limits) (see [`MpiNode::set_limits`]), a wrong
//!   buffer length or element type: an error on that rank before anything is sent, and
//!   [`MpiError::PhaseMismatch`] on the others (through [`MpiNode`]);
//! - a message of the wrong size: received, then reported with the phase, step, node, peer and
//!   link;
//! - a peer that does not send a message, or does not take one, within the timeout (default
//!   [`DEFAULT_TIMEOUT`], see [`MpiNode::set_timeout`]): [`MpiError::ReceiveTimeout`] or
//!   [`MpiError::SendTimeout`], naming the peer and link, inside
//!   [`Error::Transport`](crate::Error::Transport), which names the phase, step and node.
//!
//! After a failure the step returns at once. Sends that no peer has taken are abandoned to
//! MPI and their buffers are leaked, never freed while MPI may still read them (cancelling a
//! send is not reliably local: MPICH over UCX waits for the peer). A message whose arrival a
//! probe has seen is received with a blocking `MPI_Mrecv`, which completes as long as the
//! sender's MPI library runs, as it does while the sender is inside any MPI call. After a
//! failure, what the node's peers have sent or still expect is unknown, so running a phase
//! again on the same communicator may pair old messages with new receives: a program should
//! end the job (`MPI_Abort`), as `bsp_allreduce` does.
//!
//! A peer that *vanished* — its process died — is normally noticed by the MPI launcher first:
//! MPICH's and Open MPI's `mpirun` end the whole job when a rank exits without finalising, so
//! the other ranks are killed rather than left waiting. If the library lets them live on, they
//! get the timeout error above. A rank that fails should end the job the same way: the example
//! `bsp_allreduce` prints the error and calls `MPI_Abort`.

mod agree;
mod error;
mod node;
mod transport;
mod wire;

pub use error::MpiError;
pub use node::MpiNode;
pub use transport::{MpiTransport, DEFAULT_TIMEOUT};

use crate::element::Element;
#[cfg(doc)]
use crate::ScheduleDigest;
use mpi::datatype::Equivalence;
#[cfg(doc)]
use schedule_ir::NodeId;

mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for f64 {}
    impl Sealed for i32 {}
    impl Sealed for i64 {}
    impl Sealed for half::f16 {}
    impl Sealed for half::bf16 {}
}

/// An [`Element`] that goes over MPI: `f32`, `f64`, `i32` and `i64` as themselves
/// (`MPI_FLOAT`, `MPI_DOUBLE`, `MPI_INT32_T`, `MPI_INT64_T`); `f16` and `bf16`, which MPI has
/// no standard datatype for, as their bit patterns (`MPI_UINT16_T`). The transport only moves
/// elements, never combines them in MPI, so the bits are all it needs.
pub trait MpiElement: Element + sealed::Sealed {
    /// What a message holds on the wire: a type with an MPI datatype, of the element's size.
    type Wire: Equivalence + Copy;

    /// The elements as wire values (no copy: the same allocation).
    fn into_wire(data: Vec<Self>) -> Vec<Self::Wire>;

    /// Wire values back as elements (no copy).
    fn from_wire(data: Vec<Self::Wire>) -> Vec<Self>;
}

macro_rules! as_itself {
    ($($t:ty),*) => {$(
        impl MpiElement for $t {
            type Wire = $t;

            fn into_wire(data: Vec<Self>) -> Vec<Self> {
                data
            }

            fn from_wire(data: Vec<Self>) -> Vec<Self> {
                data
            }
        }
    )*};
}

as_itself!(f32, f64, i32, i64);

macro_rules! as_bits {
    ($($t:ty),*) => {$(
        impl MpiElement for $t {
            type Wire = u16;

            fn into_wire(data: Vec<Self>) -> Vec<u16> {
                half::vec::HalfFloatVecExt::reinterpret_into(data)
            }

            fn from_wire(data: Vec<u16>) -> Vec<Self> {
                half::vec::HalfBitsVecExt::reinterpret_into(data)
            }
        }
    )*};
}

as_bits!(half::f16, half::bf16);
