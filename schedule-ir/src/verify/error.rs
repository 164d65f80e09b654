//! What the verifier says: [`VerifyError`], [`Warning`] and [`VerifyErrors`].
//!
//! Every error is a [`Location`] — the phase, step, node, link, buffer and chunk it is about,
//! ids with the names the user wrote — and an [`ErrorKind`]: what is wrong there, with the
//! values that show it. The Display of an error (in `message.rs`) is one line that starts with
//! where the problem is (`phase `grads`, step 3: …`) and reads with the names from the machine.

use super::location::Location;
use super::names::{Action, AnyId, ChunkList, Expected, Named, NodeList, Transfer};
use crate::{Collective, LinkId, NodeId, ReduceOp};
use serde::Serialize;
use thiserror::Error;

/// One problem found by the verifier: where, and what. Displays as one line that names the
/// phase, step, node, link and chunk with the user's names.
///
/// Serialises as its location and its kind side by side, the kind's name under `kind`:
/// `{"location": {"phase": "grads", "node": {"id": 2, "name": "N2"}}, "kind": "StepCount",
/// "steps": 5, "expected": 6}`.
#[derive(Clone, Debug, Error, PartialEq, Serialize)]
pub struct VerifyError {
    /// Where the problem is.
    pub location: Location,
    /// What the problem is.
    #[serde(flatten)]
    pub kind: ErrorKind,
}

/// What is wrong, beyond where: one variant per check. See the [module doc](super) for which
/// pass reports which variant; the fields the [`Location`] of each variant holds are listed on
/// it.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind")]
pub enum ErrorKind {
    // ---- well-formed: the schedule as a whole ----
    /// The schedule's format version is not [`FORMAT_VERSION`](crate::FORMAT_VERSION).
    FormatVersion {
        /// The version the schedule declares.
        found: u32,
        /// The version this verifier checks.
        expected: u32,
    },
    /// A count exceeds what the verifier can represent or afford (see [`crate::limits`]).
    /// Location: the phase, when it is about one.
    TooLarge {
        /// What was counted, with its phase when it is about one.
        what: String,
        /// The count.
        count: u64,
        /// The limit.
        limit: u64,
    },
    /// The machine has no compute node.
    NoComputeNodes {
        /// The machine's name.
        machine: String,
    },
    /// Two nodes have the same name. Location: the later node.
    DuplicateNodeName {
        /// The name.
        name: String,
        /// The first node with it.
        first: NodeId,
        /// A later node with it.
        second: NodeId,
    },
    /// Two links have the same name. Location: the later link.
    DuplicateLinkName {
        /// The name.
        name: String,
        /// The first link with it.
        first: LinkId,
        /// A later link with it.
        second: LinkId,
    },
    /// A link ends at a node that does not exist. Location: the link.
    LinkEndpointUnknown {
        /// The endpoint.
        endpoint: NodeId,
        /// How many nodes the machine has.
        nodes: usize,
    },
    /// A link's two endpoints are the same node. Location: the link and the node.
    LinkToItself,
    /// A link's bandwidth, latency or lane count is out of range. Location: the link.
    InvalidLink {
        /// The field: `bandwidth_gbps`, `latency_us` or `lanes`.
        field: &'static str,
        /// The value found.
        value: String,
        /// What the value must be.
        rule: &'static str,
    },
    /// The machine's reduction rate is not a positive finite number.
    InvalidReduceRate {
        /// The machine's name.
        machine: String,
        /// The value found.
        value: String,
    },
    /// The machine's switch latency is negative or not finite.
    InvalidSwitchLatency {
        /// The machine's name.
        machine: String,
        /// The value found.
        value: String,
    },
    /// A node's capacity is given on a compute node, or is 0. Location: the node.
    BadCapacity {
        /// The capacity given.
        capacity: u32,
    },
    /// Two phases have the same name. Location: the phase.
    DuplicatePhaseName,
    /// The program runs an exchange phase that the schedule does not have.
    ProgramUnknownPhase {
        /// The item's position in the program, from 0.
        position: usize,
        /// The name it gives.
        name: String,
    },
    /// A banded exchange's name is also a phase's or another exchange's. Location: the
    /// exchange (its name in `phase`).
    BandsNameTaken,
    /// A banded exchange lists no band. Location: the exchange.
    NoBands,
    /// A band serves no size: its upper end is not above its lower end. Location: the
    /// exchange.
    EmptyBand {
        /// The band's position, from 0.
        band: usize,
        /// Its lower end, in bytes.
        min_bytes: u64,
        /// Its upper end, in bytes.
        max_bytes: u64,
    },
    /// A band does not start where the band before it ends: a hole or an overlap. Location:
    /// the exchange.
    BandGap {
        /// The band's position, from 0.
        band: usize,
        /// Where it starts, in bytes.
        min_bytes: u64,
        /// Where the band before it ends, in bytes; `None`: that band has no upper end.
        expected: Option<u64>,
    },
    /// A band's phase runs another collective, op or dtype than the first band's. Location:
    /// the exchange.
    BandsDiffer {
        /// The band's position, from 0.
        band: usize,
        /// Its phase.
        phase: String,
        /// What differs: `collective`, `op` or `dtype`.
        what: &'static str,
    },
    /// A band's phase was compiled for a size outside the band. Location: the exchange.
    BandSizeOutside {
        /// The band's position, from 0.
        band: usize,
        /// Its phase.
        phase: String,
        /// The size the phase was compiled for, in bytes.
        bytes: u64,
    },
    /// A phase is not run exactly once by the program. Location: the phase.
    ProgramPhaseCount {
        /// How many exchange items name it.
        count: usize,
    },
    /// The program runs the phases in another order than the schedule lists them. Location:
    /// the phase the program runs out of order.
    ProgramOrder {
        /// The item's position in the program, from 0.
        position: usize,
        /// The phase it names.
        found: String,
        /// The phase the order of `phases` expects there.
        expected: String,
    },

    // ---- well-formed: one phase (location: the phase) ----
    /// Buffer 0 is missing or not the data buffer. Location: buffer 0, if there is one.
    NoDataBuffer,
    /// A buffer other than buffer 0 is a data buffer. Location: the buffer.
    ExtraDataBuffer,
    /// A chunk ends before it starts. Location: the chunk.
    ChunkReversed {
        /// Its start.
        start: u64,
        /// Its end.
        end: u64,
    },
    /// A chunk does not start where the previous one ends (or chunk 0 does not start at 0).
    /// Location: the chunk.
    ChunkGap {
        /// Its start.
        start: u64,
        /// Where the previous chunk ends (0 for chunk 0).
        expected: u64,
    },
    /// The chunks do not end at the vector's end.
    ChunksEnd {
        /// Where the last chunk ends (0 without chunks).
        end: u64,
        /// The vector's length.
        elements: u64,
    },
    /// The collective's root does not exist.
    UnknownRoot {
        /// The root id.
        root: NodeId,
        /// How many nodes the machine has.
        nodes: usize,
    },
    /// The collective's root is a switch. Location: the root.
    RootNotCompute,
    /// A reduce-scatter or allgather chunk has no owner. Location: the chunk.
    MissingOwner {
        /// The phase's collective.
        collective: Collective,
    },
    /// A chunk's owner does not exist. Location: the chunk.
    UnknownOwner {
        /// The owner id.
        owner: NodeId,
        /// How many nodes the machine has.
        nodes: usize,
    },
    /// A chunk's owner is a switch. Location: the chunk and the owner.
    OwnerNotCompute,
    /// There is not one program per node.
    ProgramCount {
        /// Programs found.
        programs: usize,
        /// Nodes in the machine.
        nodes: usize,
    },
    /// A compute node's program does not have [`Phase::steps`](crate::Phase::steps) steps.
    /// Location: the node.
    StepCount {
        /// Steps in its program.
        steps: usize,
        /// Steps of the phase.
        expected: u32,
    },
    /// A switch's program has instructions. Location: the first step with instructions, the
    /// switch.
    SwitchProgram,

    // ---- well-formed: one instruction (location: its step and node) ----
    /// An instruction names an id that does not exist.
    UnknownId {
        /// The instruction.
        action: Action,
        /// The id.
        id: AnyId,
        /// How many entities of that kind exist.
        count: usize,
    },
    /// A send leaves on, or a receive arrives on, a link that does not touch the node.
    /// Location: also the link.
    WrongLink {
        /// The instruction.
        action: Action,
        /// The link's endpoints.
        ends: [Named<NodeId>; 2],
    },
    /// A route's next link does not touch the node the route has reached. Location: the
    /// sender and the link that does not continue the route.
    RouteBroken {
        /// The receiving node.
        to: Named<NodeId>,
        /// The node the route has reached before the link.
        at: Named<NodeId>,
        /// The link's endpoints.
        ends: [Named<NodeId>; 2],
    },
    /// A route does not end at the receiving node. Location: the sender.
    RouteEndsElsewhere {
        /// The receiving node.
        to: Named<NodeId>,
        /// Where the route ends.
        end: Named<NodeId>,
    },
    /// A send to, or receive from, the node itself.
    PeerIsSelf {
        /// The instruction.
        action: Action,
    },
    /// A send to, or receive from, a switch.
    PeerIsSwitch {
        /// The instruction (its peer is the switch).
        action: Action,
    },
    /// An instruction names no chunks.
    EmptyChunkList {
        /// The instruction.
        action: Action,
    },
    /// An instruction names a chunk twice. Location: also the chunk.
    RepeatedChunk {
        /// The instruction.
        action: Action,
    },
    /// A scale in a phase whose op is not [`ReduceOp::Mean`]. Location: also the buffer.
    ScaleNotMean {
        /// The phase's op.
        op: ReduceOp,
    },
    /// A scale whose divisor is not the number of compute nodes. Location: also the buffer.
    WrongDivisor {
        /// The divisor found.
        divisor: u32,
        /// The number of compute nodes.
        expected: usize,
    },
    /// A local reduce or copy reads and writes the same buffer. Location: also the buffer.
    SameBuffer {
        /// The instruction.
        action: Action,
    },

    // ---- the pattern form ----
    /// A pattern ([`crate::pattern::Pattern`]) is not one: its grid is not the machine's
    /// compute nodes, a phase is not laid out by the grid, or an instruction of the origin
    /// cannot be moved to every grid node. Location: the phase, step, node and link concerned.
    NotAPattern {
        /// What is wrong, in words.
        problem: String,
    },

    // ---- conflict-free ----
    /// A link direction carries more transfers in one step than it has lanes. Location: the
    /// step and the link.
    LinkOverbooked {
        /// The direction's start.
        from: Named<NodeId>,
        /// The direction's end.
        to: Named<NodeId>,
        /// The link's lanes per direction.
        lanes: u32,
        /// Every transfer crossing the direction in the step, in program order of the senders.
        transfers: Vec<Transfer>,
    },

    // ---- matched (location: the step, the sending or receiving node, the last link) ----
    /// A send with no matching receive. Location: the sender.
    UnmatchedSend {
        /// The send.
        transfer: Transfer,
    },
    /// A receive with no matching send. Location: the receiver.
    UnmatchedRecv {
        /// The sender it names.
        from: Named<NodeId>,
        /// The chunks it expects.
        chunks: ChunkList,
    },
    /// Two sends of one step from the same node to the same node, whose routes end with the
    /// same link, start at the same chunk: their messages could not be told apart. Location:
    /// the sender.
    DuplicateTransfer {
        /// The receiver.
        to: Named<NodeId>,
        /// The chunks of the first send, in program order.
        first: ChunkList,
        /// The chunks of the second.
        second: ChunkList,
    },
    /// A send and a receive that pair up except for their chunk lists. Location: the sender.
    ChunkListMismatch {
        /// The receiver.
        to: Named<NodeId>,
        /// The chunks sent.
        sent: ChunkList,
        /// The chunks the receive names.
        received: ChunkList,
    },

    // ---- correct (location: the step, node, buffer and chunk) ----
    /// An instruction reads a chunk that holds nothing yet.
    ReadUndefined {
        /// The instruction.
        action: Action,
    },
    /// A reducing write into a chunk that holds nothing yet.
    ReduceIntoUndefined {
        /// The instruction.
        action: Action,
    },
    /// A reducing write that would combine some input a second time (sum, prod, mean).
    InputCombinedTwice {
        /// The instruction.
        action: Action,
        /// The inputs both in the destination and in the incoming data.
        inputs: NodeList,
        /// The phase's op.
        op: ReduceOp,
    },
    /// A reducing write where the destination or the incoming value was already scaled
    /// (mean): a divided mean added to anything is no longer a mean.
    CombineScaled {
        /// The instruction.
        action: Action,
    },
    /// A scale of a chunk that does not hold the sum of every compute node's input.
    ScalePartial {
        /// The inputs combined into the chunk (empty: undefined).
        holds: NodeList,
        /// The number of compute nodes.
        count: usize,
        /// Inputs not yet combined into the chunk.
        missing: NodeList,
    },
    /// A scale of a chunk that was already scaled.
    ScaledTwice,
    /// A reducing write in a collective that combines nothing (allgather, broadcast).
    /// Location: the step and node.
    ReduceInGather {
        /// The instruction.
        action: Action,
        /// The phase's collective.
        collective: Collective,
    },
    /// A node's data buffer does not hold what the collective promises at the end of the
    /// phase. Location: the phase's last step (none for a phase without steps), the node, the
    /// data buffer, the chunk.
    WrongResult {
        /// The phase's collective.
        collective: Collective,
        /// The inputs combined into the chunk (empty: undefined).
        holds: NodeList,
        /// What the collective needs.
        expected: Expected,
        /// Inputs needed but not held.
        missing: NodeList,
        /// Inputs held but not wanted.
        extra: NodeList,
    },
    /// More results are wrong (or unscaled) at the end of the phase than the verifier lists
    /// ([`MAX_LISTED_RESULTS`](crate::limits::MAX_LISTED_RESULTS)): how many more. Location:
    /// the phase.
    ResultsNotListed {
        /// Wrong results found past the listed ones.
        more: u64,
    },
    /// A mean's result chunk holds the sum of all inputs but was never divided. Location: as
    /// for [`ErrorKind::WrongResult`].
    NotScaled {
        /// The phase's collective.
        collective: Collective,
        /// The number of compute nodes (the divisor).
        count: usize,
    },
    /// A device holds more live chunks in a step than its capacity. Location: the first step
    /// over, the device.
    CapacityExceeded {
        /// Chunks live in the step.
        live: usize,
        /// The device's capacity.
        capacity: u32,
    },
}

/// Something the verifier noticed that does not make the schedule wrong: where, and what.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Warning {
    /// Where: the step, node, buffer and chunk.
    pub location: Location,
    /// What.
    #[serde(flatten)]
    pub kind: WarningKind,
}

/// What a [`Warning`] is about.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind")]
pub enum WarningKind {
    /// A reducing write combines an input a second time, which max and min forgive.
    InputCombinedTwice {
        /// The instruction.
        action: Action,
        /// The inputs both in the destination and in the incoming data.
        inputs: NodeList,
        /// The phase's op (max or min).
        op: ReduceOp,
    },
}

/// Every problem the verifier found. Displays as a one-line summary
/// (`schedule failed verification (3 errors)`); each error displays as one line of its own.
#[derive(Clone, Debug, Error, PartialEq, Serialize)]
#[error("schedule failed verification ({} error{})", errors.len(), if errors.len() == 1 { "" } else { "s" })]
pub struct VerifyErrors {
    /// The problems, in the order found.
    pub errors: Vec<VerifyError>,
}
