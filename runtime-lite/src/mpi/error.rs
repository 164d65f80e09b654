//! [`MpiError`]: what can go wrong in the MPI transport, in the names of the topology file.

use std::time::Duration;
use thiserror::Error;

/// An error of the MPI transport. Setting up reports it as [`crate::Error::Mpi`]; a failed
/// step comes back as [`crate::Error::Transport`], which adds the phase, the step and the
/// node.
#[derive(Debug, Error)]
pub enum MpiError {
    /// The job has a different number of ranks than the machine has compute nodes.
    #[error(
        "the MPI job has {ranks} ranks but machine `{machine}` has {compute} compute nodes: \
         run one rank per compute node (`mpirun -np {compute} …`)"
    )]
    WorldSize {
        /// The machine's name.
        machine: String,
        /// The size of the communicator.
        ranks: usize,
        /// The number of compute nodes.
        compute: usize,
    },

    /// Another rank could not set up (its own error says why), so this one does not go on.
    #[error(
        "another rank could not set up its node (it reports why), so this rank does not go on"
    )]
    PeerSetup,

    /// A device (a NIC or switch reducing in the network) runs a program in a phase; under
    /// MPI only compute nodes have ranks.
    #[error(
        "phase `{phase}`: device {device} runs a program (it reduces in the network), but under \
         MPI only compute nodes run, one per rank, so nothing would run it: run the schedule in \
         one process (`topoc run`, `runtime_lite::run_phase`), or compile it for MPI without \
         reducing devices"
    )]
    DeviceProgram {
        /// The phase.
        phase: String,
        /// The device's name.
        device: String,
    },

    /// The ranks were given different schedules (their digests differ).
    #[error(
        "the ranks were given different schedules: node {node} (rank {rank}) and rank {peer} \
         differ in {what} (schedule digest {mine} here, {theirs} on rank {peer}); start every \
         rank with the same schedule"
    )]
    ScheduleMismatch {
        /// This rank's node.
        node: String,
        /// This rank.
        rank: usize,
        /// The first rank whose schedule differs.
        peer: usize,
        /// What differs, in words.
        what: &'static str,
        /// This rank's schedule digest.
        mine: crate::Digest,
        /// The peer's.
        theirs: crate::Digest,
    },

    /// Before a phase's first message, a peer rank turned out to run another phase, another
    /// element type or a buffer of another length, or could not start the phase.
    #[error(
        "phase `{phase}`: node {node} and {peer} (rank {rank}) cannot run it together: {detail}"
    )]
    PhaseMismatch {
        /// The phase this rank runs.
        phase: String,
        /// This rank's node.
        node: String,
        /// The peer's node.
        peer: String,
        /// The peer's rank.
        rank: usize,
        /// What differs.
        detail: String,
    },

    /// Before a phase's first message, a peer did not say which phase it runs in time.
    #[error(
        "phase `{phase}`: node {node} heard nothing from {peer} (rank {rank}) within \
         {waited:.1?} while agreeing on the phase to run: that rank has stopped, is stuck, or \
         runs something else"
    )]
    AgreeTimeout {
        /// The phase this rank runs.
        phase: String,
        /// This rank's node.
        node: String,
        /// The silent peer's node.
        peer: String,
        /// Its rank.
        rank: usize,
        /// How long this rank waited.
        waited: Duration,
    },

    /// The machine has more link directions and lanes than the MPI library has tags.
    #[error(
        "machine `{machine}` needs {needed} distinct MPI tags per step (2 directions × links × \
         lanes) but this MPI library's tag upper bound is {tag_ub}"
    )]
    TagSpace {
        /// The machine's name.
        machine: String,
        /// Tags one step may need.
        needed: u64,
        /// `MPI_TAG_UB`.
        tag_ub: i64,
    },

    /// A message is longer than an MPI count can say.
    #[error(
        "phase `{phase}`: a message of {elements} elements is longer than an MPI message can be \
         (at most {} elements)",
        i32::MAX
    )]
    TooLarge {
        /// The phase.
        phase: String,
        /// The message's length.
        elements: usize,
    },

    /// An expected message did not arrive in time.
    #[error(
        "no message from {peer} (rank {rank}) over link {link} arrived within {waited:.1?} \
         (MPI tag {tag}): that rank has stopped, is stuck, or runs another phase or schedule"
    )]
    ReceiveTimeout {
        /// The sending node.
        peer: String,
        /// Its rank.
        rank: i32,
        /// The link the message should come over.
        link: String,
        /// The message's tag.
        tag: i32,
        /// How long the transport waited.
        waited: Duration,
    },

    /// A message sent was not taken by its receiver in time.
    #[error(
        "{peer} (rank {rank}) did not take the message sent to it over link {link} within \
         {waited:.1?} (MPI tag {tag}): that rank has stopped, is stuck, or runs another phase or \
         schedule"
    )]
    SendTimeout {
        /// The receiving node.
        peer: String,
        /// Its rank.
        rank: i32,
        /// The link.
        link: String,
        /// The message's tag.
        tag: i32,
        /// How long the transport waited.
        waited: Duration,
    },

    /// A message's size in bytes is not a whole number of elements.
    #[error(
        "the message from {peer} (rank {rank}) over link {link} has {bytes} bytes, not a whole \
         number of {size}-byte elements: the sender runs a phase of another element type"
    )]
    Ragged {
        /// The sending node.
        peer: String,
        /// Its rank.
        rank: i32,
        /// The link.
        link: String,
        /// The message's size in bytes.
        bytes: i64,
        /// The element size in bytes.
        size: u64,
    },

    /// A message is addressed to a node, or over a link, that the machine does not have, or
    /// more transfers share a link direction in one step than it has lanes. A verified
    /// schedule never does this.
    #[error("cannot address a message from {from} to {to} over link {link}: {detail}")]
    Unaddressable {
        /// The sending node.
        from: String,
        /// The receiving node.
        to: String,
        /// The link.
        link: String,
        /// What is wrong.
        detail: String,
    },
}
