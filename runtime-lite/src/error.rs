//! The runtime's one error type: every way running a schedule can fail, in user-facing names.

use schedule_ir::{serial::ReadError, DType, StepId, VerifyErrors};
use thiserror::Error;

/// An error from the runtime. Node and link names are the ones the user wrote in the
/// topology file (`Machine::node_name`); steps count from 0.
#[derive(Debug, Error)]
pub enum Error {
    /// A schedule text could not be read.
    #[error("cannot read the schedule: {0}")]
    Read(#[from] ReadError),

    /// A schedule failed verification, so it will not run.
    #[error("the schedule failed verification, so it will not run: {}", render_verify(.0))]
    Verify(VerifyErrors),

    /// No phase of the schedule has this name.
    #[error("the schedule has no phase named `{phase}` (its phases: {available})")]
    UnknownPhase {
        /// The name asked for.
        phase: String,
        /// The phases the schedule has, comma-separated.
        available: String,
    },

    /// The name is a banded exchange, which has one phase per size band, run by a caller
    /// that takes a phase, not a size.
    #[error(
        "`{phase}` is a banded exchange: which phase runs depends on the buffer's size; pick it \
         with `bands::select` (its bands: {bands})"
    )]
    Banded {
        /// The exchange.
        phase: String,
        /// Its bands, with their phases.
        bands: String,
    },

    /// A banded exchange has no band for a buffer of this size.
    #[error("exchange `{phase}` has no band for buffers of {bytes} bytes (its bands: {bands})")]
    NoBand {
        /// The exchange.
        phase: String,
        /// The buffer's size in bytes.
        bytes: u64,
        /// The bands it has, with their phases.
        bands: String,
    },

    /// No node of the machine has this name or id.
    #[error("the machine has no node `{node}`")]
    UnknownNode {
        /// The name or id asked for.
        node: String,
    },

    /// A node that runs no program (a switch) was asked to run one.
    #[error("phase `{phase}`: node {node} is a switch; only compute nodes run a phase")]
    NotComputeNode {
        /// The phase.
        phase: String,
        /// The switch.
        node: String,
    },

    /// The number of buffers differs from the number of compute nodes.
    #[error(
        "phase `{phase}`: got {found} buffers but the machine has {expected} compute nodes \
         (one buffer each, in node order)"
    )]
    WrongBufferCount {
        /// The phase.
        phase: String,
        /// The number of compute nodes.
        expected: usize,
        /// The number of buffers given.
        found: usize,
    },

    /// A buffer's length differs from the phase's element count.
    #[error("phase `{phase}`: the buffer of node {node} has {found} elements but the phase works on {expected}")]
    WrongLength {
        /// The phase.
        phase: String,
        /// The node whose buffer it is.
        node: String,
        /// The phase's element count.
        expected: u64,
        /// The buffer's length.
        found: u64,
    },

    /// A buffer's element type differs from the phase's.
    #[error("phase `{phase}` is compiled for {expected} elements but the buffer holds {found}")]
    WrongDType {
        /// The phase.
        phase: String,
        /// The phase's dtype.
        expected: DType,
        /// The buffer's dtype.
        found: DType,
    },

    /// The phase's vector does not fit in this machine's memory.
    #[error(
        "phase `{phase}` has {elements} elements: its buffers do not fit in this machine's memory"
    )]
    TooLarge {
        /// The phase.
        phase: String,
        /// Its element count.
        elements: u64,
    },

    /// Running the phase would hold more memory than the budget allows (see
    /// [`Limits`](crate::Limits)); nothing was allocated.
    #[error(
        "phase `{phase}` needs about {} of memory to run ({detail}), over the memory budget of \
         {}: run a shorter vector or raise the budget",
        crate::budget::bytes(*.needed),
        crate::budget::bytes(*.budget)
    )]
    OverMemoryBudget {
        /// The phase.
        phase: String,
        /// Bytes the run would hold at once.
        needed: u64,
        /// The budget.
        budget: u64,
        /// What the bytes are: data, scratch, messages.
        detail: String,
    },

    /// Running the phase would read and write more bytes than the work budget allows (see
    /// [`Limits`](crate::Limits)); nothing was run.
    #[error(
        "phase `{phase}` moves and combines about {} in all, over the work budget of {}: run a \
         shorter vector or raise the budget",
        crate::budget::bytes(*.needed),
        crate::budget::bytes(*.budget)
    )]
    OverWorkBudget {
        /// The phase.
        phase: String,
        /// Bytes the run would read and write.
        needed: u64,
        /// The budget.
        budget: u64,
    },

    /// The schedule contains something the runtime cannot execute (an id out of range, a chunk
    /// outside the vector, …). A verified schedule never does; this guards the runtime anyway.
    #[error("phase `{phase}`: cannot execute the schedule at {location}: {detail}")]
    Malformed {
        /// The phase.
        phase: String,
        /// Where: node, step and instruction.
        location: String,
        /// What is wrong.
        detail: String,
    },

    /// A receive's message did not arrive.
    #[error(
        "phase `{phase}`, {step}: node {node} expected {expected} elements from {from} over \
         link {link}, but the message never arrived"
    )]
    MissingMessage {
        /// The phase.
        phase: String,
        /// The step.
        step: StepId,
        /// The receiving node.
        node: String,
        /// The sending node.
        from: String,
        /// The link the message should have arrived on.
        link: String,
        /// The number of elements the receive expects.
        expected: usize,
    },

    /// A message arrived with the wrong number of elements.
    #[error(
        "phase `{phase}`, {step}: node {node} received {found} elements from {from} over link \
         {link}, but the receive expects {expected}"
    )]
    WrongMessageSize {
        /// The phase.
        phase: String,
        /// The step.
        step: StepId,
        /// The receiving node.
        node: String,
        /// The sending node.
        from: String,
        /// The link.
        link: String,
        /// Elements the receive expects.
        expected: usize,
        /// Elements that arrived.
        found: usize,
    },

    /// A message arrived that no receive of the step expects.
    #[error(
        "phase `{phase}`, {step}: node {node} received a message from {from} over link {link} \
         (for {message_step}) that no receive of this step expects"
    )]
    UnexpectedMessage {
        /// The phase.
        phase: String,
        /// The step being executed.
        step: StepId,
        /// The receiving node.
        node: String,
        /// The sender the message claims.
        from: String,
        /// The link the message claims.
        link: String,
        /// The step the message claims to belong to.
        message_step: StepId,
    },

    /// The same message arrived twice.
    #[error("phase `{phase}`, {step}: node {node} received the message from {from} over link {link} twice")]
    DuplicateMessage {
        /// The phase.
        phase: String,
        /// The step.
        step: StepId,
        /// The receiving node.
        node: String,
        /// The sender.
        from: String,
        /// The link.
        link: String,
    },

    /// The transport itself failed (a peer vanished, a connection broke).
    #[error("phase `{phase}`, {step}: the transport failed on node {node}: {cause}")]
    Transport {
        /// The phase.
        phase: String,
        /// The step.
        step: StepId,
        /// The node whose transport failed.
        node: String,
        /// What the transport reported.
        cause: Box<dyn std::error::Error + Send + Sync + 'static>,
    },

    /// The MPI transport cannot be set up (wrong number of ranks, too few tags, …).
    #[cfg(feature = "mpi")]
    #[error(transparent)]
    Mpi(Box<crate::mpi::MpiError>),
    /// A node's program panicked in a threaded run ([`crate::threaded`]); its peers see it
    /// as gone.
    #[error("phase `{phase}`: node {node} panicked ({}): {message}", match .last_step {
        Some(step) => format!("last seen in {step}"),
        None => "before its first step".to_string(),
    })]
    Panicked {
        /// The phase.
        phase: String,
        /// The node whose program panicked.
        node: String,
        /// The last step the node exchanged messages in, if any.
        last_step: Option<StepId>,
        /// The panic's message.
        message: String,
    },

    /// A result differs from the reference reduction.
    #[error(
        "phase `{phase}`: node {node}, element {element}: got {actual} but the reference is \
         {expected} ({})",
        render_tolerance(*.tolerance)
    )]
    Mismatch {
        /// The phase.
        phase: String,
        /// The node whose result differs.
        node: String,
        /// The index of the first differing element.
        element: u64,
        /// The reference value.
        expected: String,
        /// The value the run produced.
        actual: String,
        /// The allowed difference for float results that depend on the order of combination;
        /// `None` where the values must match exactly.
        tolerance: Option<f64>,
    },
}

fn render_tolerance(tolerance: Option<f64>) -> String {
    match tolerance {
        None => "the values must match exactly".to_string(),
        Some(t) => format!("allowed difference {t:e}"),
    }
}

fn render_verify(errors: &VerifyErrors) -> String {
    if errors.errors.is_empty() {
        return errors.to_string();
    }
    errors
        .errors
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(feature = "mpi")]
impl From<crate::mpi::MpiError> for Error {
    fn from(error: crate::mpi::MpiError) -> Self {
        Error::Mpi(Box::new(error))
    }
}

impl From<VerifyErrors> for Error {
    fn from(errors: VerifyErrors) -> Self {
        Error::Verify(errors)
    }
}
