//! What the verifier says: [`VerifyError`], [`Warning`] and [`VerifyErrors`].
//!
//! Every error carries the ids of what it is about (for tools) next to the names the user wrote
//! (for people): a [`Named`] is both. The Display of an error is one line that starts with where
//! the problem is (`phase `grads`, step 3: …`) and reads with the names from the machine.

use super::names::{Action, AnyId, ChunkList, Expected, Named, NodeList, Transfer};
use super::phrases::{
    ends, join, kind_name, result_phrase, scale_phrase, to_itself, to_switch, uses,
};
use crate::{BufferId, ChunkId, Collective, LinkId, NodeId, ReduceOp, StepId};
use serde::Serialize;
use std::fmt;
use thiserror::Error;

/// One problem found by the verifier. The Display is one line that names the phase, step,
/// node, link and chunk with the user's names. See the [module doc](super) for which pass
/// reports which variant.
#[derive(Clone, Debug, Error, PartialEq, Serialize)]
pub enum VerifyError {
    // ---- well-formed: the schedule as a whole ----
    /// The schedule's format version is not [`FORMAT_VERSION`](crate::FORMAT_VERSION).
    #[error("schedule format version {found} is not supported (this verifier checks version {expected})")]
    FormatVersion {
        /// The version the schedule declares.
        found: u32,
        /// The version this verifier checks.
        expected: u32,
    },
    /// A count exceeds what the verifier can represent or afford.
    #[error("{what}: {count} is more than this verifier supports (limit {limit})")]
    TooLarge {
        /// What was counted, with its phase when it is about one.
        what: String,
        /// The count.
        count: u64,
        /// The limit.
        limit: u64,
    },
    /// The machine has no compute node.
    #[error("machine `{machine}` has no compute nodes")]
    NoComputeNodes {
        /// The machine's name.
        machine: String,
    },
    /// Two nodes have the same name.
    #[error("machine: {first} and {second} are both called `{name}`; node names must be unique")]
    DuplicateNodeName {
        /// The name.
        name: String,
        /// The first node with it.
        first: NodeId,
        /// A later node with it.
        second: NodeId,
    },
    /// Two links have the same name.
    #[error("machine: {first} and {second} are both called `{name}`; link names must be unique")]
    DuplicateLinkName {
        /// The name.
        name: String,
        /// The first link with it.
        first: LinkId,
        /// A later link with it.
        second: LinkId,
    },
    /// A link ends at a node that does not exist.
    #[error("machine: link {link} ends at {endpoint}, but the machine has {nodes} nodes")]
    LinkEndpointUnknown {
        /// The link.
        link: Named<LinkId>,
        /// The endpoint.
        endpoint: NodeId,
        /// How many nodes the machine has.
        nodes: usize,
    },
    /// A link's two endpoints are the same node.
    #[error("machine: link {link} joins {node} to itself")]
    LinkToItself {
        /// The link.
        link: Named<LinkId>,
        /// The node.
        node: Named<NodeId>,
    },
    /// A link's bandwidth, latency or lane count is out of range.
    #[error("machine: link {link} has {field} = {value}, but it must be {rule}")]
    InvalidLink {
        /// The link.
        link: Named<LinkId>,
        /// The field: `bandwidth_gbps`, `latency_us` or `lanes`.
        field: &'static str,
        /// The value found.
        value: String,
        /// What the value must be.
        rule: &'static str,
    },
    /// The machine's reduction rate is not a positive finite number.
    #[error("machine `{machine}`: reduce_gbps = {value}, but it must be positive and finite")]
    InvalidReduceRate {
        /// The machine's name.
        machine: String,
        /// The value found.
        value: String,
    },
    /// The machine's switch latency is negative or not finite.
    #[error(
        "machine `{machine}`: switch_latency_us = {value}, but it must be zero or more and finite"
    )]
    InvalidSwitchLatency {
        /// The machine's name.
        machine: String,
        /// The value found.
        value: String,
    },
    /// Two phases have the same name.
    #[error("schedule: two phases are called `{name}`; phase names must be unique")]
    DuplicatePhaseName {
        /// The name.
        name: String,
    },
    /// The program runs an exchange phase that the schedule does not have.
    #[error("program item {position} runs exchange phase `{name}`, but no phase has that name")]
    ProgramUnknownPhase {
        /// The item's position in the program, from 0.
        position: usize,
        /// The name it gives.
        name: String,
    },
    /// A phase is not run exactly once by the program.
    #[error("program: phase `{name}` is run {count} times; every phase must be run exactly once")]
    ProgramPhaseCount {
        /// The phase's name.
        name: String,
        /// How many exchange items name it.
        count: usize,
    },
    /// The program runs the phases in another order than the schedule lists them.
    #[error("program item {position} runs `{found}` where the phase order has `{expected}`; the program must run the phases in the order they are listed")]
    ProgramOrder {
        /// The item's position in the program, from 0.
        position: usize,
        /// The phase it names.
        found: String,
        /// The phase the order of `phases` expects there.
        expected: String,
    },

    // ---- well-formed: one phase ----
    /// Buffer 0 is missing or not the data buffer.
    #[error("phase `{phase}`: buffer 0 must be the data buffer (kind Data), but {}", match found {
        Some(b) => format!("it is the scratch buffer `{b}`"),
        None => "the phase declares no buffers".to_string(),
    })]
    NoDataBuffer {
        /// The phase.
        phase: String,
        /// Buffer 0, if there is one.
        found: Option<Named<BufferId>>,
    },
    /// A buffer other than buffer 0 is a data buffer.
    #[error("phase `{phase}`: buffer `{buffer}` ({}) is a second data buffer; only buffer 0 is Data", buffer.id)]
    ExtraDataBuffer {
        /// The phase.
        phase: String,
        /// The buffer.
        buffer: Named<BufferId>,
    },
    /// A chunk ends before it starts.
    #[error("phase `{phase}`: {chunk} starts at element {start} but ends at {end}")]
    ChunkReversed {
        /// The phase.
        phase: String,
        /// The chunk.
        chunk: ChunkId,
        /// Its start.
        start: u64,
        /// Its end.
        end: u64,
    },
    /// A chunk does not start where the previous one ends (or chunk 0 does not start at 0).
    #[error("phase `{phase}`: {chunk} starts at element {start} but should start at {expected}; chunks are contiguous from element 0")]
    ChunkGap {
        /// The phase.
        phase: String,
        /// The chunk.
        chunk: ChunkId,
        /// Its start.
        start: u64,
        /// Where the previous chunk ends (0 for chunk 0).
        expected: u64,
    },
    /// The chunks do not end at the vector's end.
    #[error(
        "phase `{phase}`: the chunks end at element {end}, but the vector has {elements} elements"
    )]
    ChunksEnd {
        /// The phase.
        phase: String,
        /// Where the last chunk ends (0 without chunks).
        end: u64,
        /// The vector's length.
        elements: u64,
    },
    /// The collective's root does not exist.
    #[error("phase `{phase}`: the root {root} does not exist (the machine has {nodes} nodes)")]
    UnknownRoot {
        /// The phase.
        phase: String,
        /// The root id.
        root: NodeId,
        /// How many nodes the machine has.
        nodes: usize,
    },
    /// The collective's root is a switch.
    #[error("phase `{phase}`: the root {root} is a switch; the root must be a compute node")]
    RootNotCompute {
        /// The phase.
        phase: String,
        /// The root.
        root: Named<NodeId>,
    },
    /// A reduce-scatter or allgather chunk has no owner.
    #[error(
        "phase `{phase}`: {chunk} has no owner, but {} needs one for every chunk",
        kind_name(collective)
    )]
    MissingOwner {
        /// The phase.
        phase: String,
        /// The chunk.
        chunk: ChunkId,
        /// The phase's collective.
        collective: Collective,
    },
    /// A chunk's owner does not exist.
    #[error("phase `{phase}`: the owner of {chunk}, {owner}, does not exist (the machine has {nodes} nodes)")]
    UnknownOwner {
        /// The phase.
        phase: String,
        /// The chunk.
        chunk: ChunkId,
        /// The owner id.
        owner: NodeId,
        /// How many nodes the machine has.
        nodes: usize,
    },
    /// A chunk's owner is a switch.
    #[error(
        "phase `{phase}`: the owner of {chunk}, {owner}, is a switch; owners must be compute nodes"
    )]
    OwnerNotCompute {
        /// The phase.
        phase: String,
        /// The chunk.
        chunk: ChunkId,
        /// The owner.
        owner: Named<NodeId>,
    },
    /// There is not one program per node.
    #[error("phase `{phase}`: {programs} programs for {nodes} nodes; every node, switches included, needs one")]
    ProgramCount {
        /// The phase.
        phase: String,
        /// Programs found.
        programs: usize,
        /// Nodes in the machine.
        nodes: usize,
    },
    /// A compute node's program does not have [`Phase::steps`](crate::Phase::steps) steps.
    #[error("phase `{phase}`: {node}'s program has {steps} steps, but the phase has {expected}")]
    StepCount {
        /// The phase.
        phase: String,
        /// The node.
        node: Named<NodeId>,
        /// Steps in its program.
        steps: usize,
        /// Steps of the phase.
        expected: u32,
    },
    /// A switch's program has instructions.
    #[error(
        "phase `{phase}`, {step}: switch {node} has instructions, but switches run no program"
    )]
    SwitchProgram {
        /// The phase.
        phase: String,
        /// The first step with instructions.
        step: StepId,
        /// The switch.
        node: Named<NodeId>,
    },
    /// A node's capacity is given on a compute node, or is 0.
    #[error(
        "node {node} has capacity {capacity}, but only switches have a capacity, of at least 1"
    )]
    BadCapacity {
        /// The node.
        node: Named<NodeId>,
        /// The capacity given.
        capacity: u32,
    },
    /// A device holds more live chunks in a step than its capacity.
    #[error("phase `{phase}`, {step}: device {node} holds {live} live chunk(s), more than its capacity of {capacity}")]
    CapacityExceeded {
        /// The phase.
        phase: String,
        /// The step.
        step: StepId,
        /// The device.
        node: Named<NodeId>,
        /// Chunks live in the step.
        live: usize,
        /// The device's capacity.
        capacity: u32,
    },
    /// An instruction names an id that does not exist.
    #[error("phase `{phase}`, {step}: {node}'s {action} names {id}, but {}", id.count_phrase(*count))]
    UnknownId {
        /// The phase.
        phase: String,
        /// The step.
        step: StepId,
        /// The node whose program holds the instruction.
        node: Named<NodeId>,
        /// The instruction.
        action: Action,
        /// The id.
        id: AnyId,
        /// How many entities of that kind exist.
        count: usize,
    },
    /// A send leaves on, or a receive arrives on, a link that does not touch the node.
    #[error("phase `{phase}`, {step}: {node}'s {action} {} {link}, but {link} joins {} and {}, not {node}", uses(action), ends[0], ends[1])]
    WrongLink {
        /// The phase.
        phase: String,
        /// The step.
        step: StepId,
        /// The node whose program holds the instruction.
        node: Named<NodeId>,
        /// The instruction.
        action: Action,
        /// The link.
        link: Named<LinkId>,
        /// The link's endpoints.
        ends: [Named<NodeId>; 2],
    },
    /// A route's next link does not touch the node the route has reached.
    #[error("phase `{phase}`, {step}: the route of {node}'s send to {to} breaks at {link}: it has reached {at}, but {link} joins {} and {}", ends[0], ends[1])]
    RouteBroken {
        /// The phase.
        phase: String,
        /// The step.
        step: StepId,
        /// The sending node.
        node: Named<NodeId>,
        /// The receiving node.
        to: Named<NodeId>,
        /// The link that does not continue the route.
        link: Named<LinkId>,
        /// The node the route has reached before it.
        at: Named<NodeId>,
        /// The link's endpoints.
        ends: [Named<NodeId>; 2],
    },
    /// A route does not end at the receiving node.
    #[error("phase `{phase}`, {step}: the route of {node}'s send to {to} ends at {end}")]
    RouteEndsElsewhere {
        /// The phase.
        phase: String,
        /// The step.
        step: StepId,
        /// The sending node.
        node: Named<NodeId>,
        /// The receiving node.
        to: Named<NodeId>,
        /// Where the route ends.
        end: Named<NodeId>,
    },
    /// A send to, or receive from, the node itself.
    #[error("phase `{phase}`, {step}: {}", to_itself(node, action))]
    PeerIsSelf {
        /// The phase.
        phase: String,
        /// The step.
        step: StepId,
        /// The node.
        node: Named<NodeId>,
        /// The instruction.
        action: Action,
    },
    /// A send to, or receive from, a switch.
    #[error("phase `{phase}`, {step}: {}", to_switch(node, action))]
    PeerIsSwitch {
        /// The phase.
        phase: String,
        /// The step.
        step: StepId,
        /// The node.
        node: Named<NodeId>,
        /// The instruction (its peer is the switch).
        action: Action,
    },
    /// An instruction names no chunks.
    #[error("phase `{phase}`, {step}: {node}'s {action} names no chunks")]
    EmptyChunkList {
        /// The phase.
        phase: String,
        /// The step.
        step: StepId,
        /// The node.
        node: Named<NodeId>,
        /// The instruction.
        action: Action,
    },
    /// An instruction names a chunk twice.
    #[error("phase `{phase}`, {step}: {node}'s {action} names {chunk} twice")]
    RepeatedChunk {
        /// The phase.
        phase: String,
        /// The step.
        step: StepId,
        /// The node.
        node: Named<NodeId>,
        /// The instruction.
        action: Action,
        /// The chunk.
        chunk: ChunkId,
    },
    /// A scale in a phase whose op is not [`ReduceOp::Mean`].
    #[error("phase `{phase}`, {step}: {node} scales buffer `{buffer}`, but the phase's op is {op}; only a mean is divided")]
    ScaleNotMean {
        /// The phase.
        phase: String,
        /// The step.
        step: StepId,
        /// The node.
        node: Named<NodeId>,
        /// The buffer scaled.
        buffer: Named<BufferId>,
        /// The phase's op.
        op: ReduceOp,
    },
    /// A scale whose divisor is not the number of compute nodes.
    #[error("phase `{phase}`, {step}: {node} scales buffer `{buffer}` by 1/{divisor}, but the mean is over {expected} compute nodes; the divisor must be {expected}")]
    WrongDivisor {
        /// The phase.
        phase: String,
        /// The step.
        step: StepId,
        /// The node.
        node: Named<NodeId>,
        /// The buffer scaled.
        buffer: Named<BufferId>,
        /// The divisor found.
        divisor: u32,
        /// The number of compute nodes.
        expected: usize,
    },
    /// A local reduce or copy reads and writes the same buffer.
    #[error("phase `{phase}`, {step}: {node}'s {action} reads and writes buffer `{buffer}`; source and destination must differ")]
    SameBuffer {
        /// The phase.
        phase: String,
        /// The step.
        step: StepId,
        /// The node.
        node: Named<NodeId>,
        /// The instruction.
        action: Action,
        /// The buffer.
        buffer: Named<BufferId>,
    },

    // ---- conflict-free ----
    /// A link direction carries more transfers in one step than it has lanes.
    #[error("phase `{phase}`, {step}: link {link} direction {from}→{to} carries {} transfers (lanes: {lanes}): {}", transfers.len(), join(transfers))]
    LinkOverbooked {
        /// The phase.
        phase: String,
        /// The step.
        step: StepId,
        /// The link.
        link: Named<LinkId>,
        /// The direction's start.
        from: Named<NodeId>,
        /// The direction's end.
        to: Named<NodeId>,
        /// The link's lanes per direction.
        lanes: u32,
        /// Every transfer crossing the direction in the step, in program order of the senders.
        transfers: Vec<Transfer>,
    },

    // ---- matched ----
    /// A send with no matching receive.
    #[error("phase `{phase}`, {step}: {transfer} arriving over {link}, but {} posts no matching receive", transfer.to)]
    UnmatchedSend {
        /// The phase.
        phase: String,
        /// The step.
        step: StepId,
        /// The send.
        transfer: Transfer,
        /// The last link of its route.
        link: Named<LinkId>,
    },
    /// A receive with no matching send.
    #[error("phase `{phase}`, {step}: {node} receives chunks {chunks} from {from} over {link}, but {from} sends nothing matching")]
    UnmatchedRecv {
        /// The phase.
        phase: String,
        /// The step.
        step: StepId,
        /// The receiving node.
        node: Named<NodeId>,
        /// The sender it names.
        from: Named<NodeId>,
        /// The link it names.
        link: Named<LinkId>,
        /// The chunks it expects.
        chunks: ChunkList,
    },
    /// Two sends of one step from the same node to the same node, whose routes end with the
    /// same link, start at the same chunk: their messages could not be told apart.
    #[error("phase `{phase}`, {step}: {from} sends chunks {first} and chunks {second} to {to} arriving over {link}; transfers between two nodes over one link in one step must start at different chunks")]
    DuplicateTransfer {
        /// The phase.
        phase: String,
        /// The step.
        step: StepId,
        /// The sender.
        from: Named<NodeId>,
        /// The receiver.
        to: Named<NodeId>,
        /// The last link of both routes.
        link: Named<LinkId>,
        /// The chunks of the first send, in program order.
        first: ChunkList,
        /// The chunks of the second.
        second: ChunkList,
    },
    /// A send and a receive that pair up except for their chunk lists.
    #[error("phase `{phase}`, {step}: {from} sends chunks {sent} to {to} over {link}, but {to} receives chunks {received}; the lists must be identical")]
    ChunkListMismatch {
        /// The phase.
        phase: String,
        /// The step.
        step: StepId,
        /// The sender.
        from: Named<NodeId>,
        /// The receiver.
        to: Named<NodeId>,
        /// The last link of the route.
        link: Named<LinkId>,
        /// The chunks sent.
        sent: ChunkList,
        /// The chunks the receive names.
        received: ChunkList,
    },

    // ---- correct ----
    /// An instruction reads a chunk that holds nothing yet.
    #[error("phase `{phase}`, {step}: {node}'s {action} reads {chunk} of buffer `{buffer}`, which is undefined at the start of the step")]
    ReadUndefined {
        /// The phase.
        phase: String,
        /// The step.
        step: StepId,
        /// The node.
        node: Named<NodeId>,
        /// The instruction.
        action: Action,
        /// The buffer read.
        buffer: Named<BufferId>,
        /// The chunk read.
        chunk: ChunkId,
    },
    /// A reducing write into a chunk that holds nothing yet.
    #[error("phase `{phase}`, {step}: {node}'s {action} reduces into {chunk} of buffer `{buffer}`, which is undefined; store into it first")]
    ReduceIntoUndefined {
        /// The phase.
        phase: String,
        /// The step.
        step: StepId,
        /// The node.
        node: Named<NodeId>,
        /// The instruction.
        action: Action,
        /// The buffer written.
        buffer: Named<BufferId>,
        /// The chunk written.
        chunk: ChunkId,
    },
    /// A reducing write that would combine some input a second time (sum, prod).
    #[error("phase `{phase}`, {step}: {node}'s {action} combines inputs {inputs} into {chunk} of buffer `{buffer}` a second time; {op} must combine every input exactly once")]
    InputCombinedTwice {
        /// The phase.
        phase: String,
        /// The step.
        step: StepId,
        /// The node.
        node: Named<NodeId>,
        /// The instruction.
        action: Action,
        /// The buffer written.
        buffer: Named<BufferId>,
        /// The chunk written.
        chunk: ChunkId,
        /// The inputs both in the destination and in the incoming data.
        inputs: NodeList,
        /// The phase's op.
        op: ReduceOp,
    },
    /// A reducing write where the destination or the incoming value was already scaled
    /// (mean): a divided mean added to anything is no longer a mean.
    #[error("phase `{phase}`, {step}: {node}'s {action} combines into {chunk} of buffer `{buffer}` a value that was already divided; a mean adds every input first and scales once, at the end")]
    CombineScaled {
        /// The phase.
        phase: String,
        /// The step.
        step: StepId,
        /// The node.
        node: Named<NodeId>,
        /// The instruction.
        action: Action,
        /// The buffer written.
        buffer: Named<BufferId>,
        /// The chunk written.
        chunk: ChunkId,
    },
    /// A scale of a chunk that does not hold the sum of every compute node's input.
    #[error("phase `{phase}`, {step}: {node} scales {chunk} of buffer `{buffer}` {}", scale_phrase(holds, *count, missing))]
    ScalePartial {
        /// The phase.
        phase: String,
        /// The step.
        step: StepId,
        /// The node.
        node: Named<NodeId>,
        /// The buffer scaled.
        buffer: Named<BufferId>,
        /// The chunk scaled.
        chunk: ChunkId,
        /// The inputs combined into the chunk (empty: undefined).
        holds: NodeList,
        /// The number of compute nodes.
        count: usize,
        /// Inputs not yet combined into the chunk.
        missing: NodeList,
    },
    /// A scale of a chunk that was already scaled.
    #[error("phase `{phase}`, {step}: {node} scales {chunk} of buffer `{buffer}` a second time; it already holds the mean")]
    ScaledTwice {
        /// The phase.
        phase: String,
        /// The step.
        step: StepId,
        /// The node.
        node: Named<NodeId>,
        /// The buffer scaled.
        buffer: Named<BufferId>,
        /// The chunk scaled.
        chunk: ChunkId,
    },
    /// A reducing write in a collective that combines nothing (allgather, broadcast).
    #[error("phase `{phase}`, {step}: {node}'s {action} reduces, but {} has nothing to combine; store instead", kind_name(collective))]
    ReduceInGather {
        /// The phase.
        phase: String,
        /// The step.
        step: StepId,
        /// The node.
        node: Named<NodeId>,
        /// The instruction.
        action: Action,
        /// The phase's collective.
        collective: Collective,
    },
    /// A node's data buffer does not hold what the collective promises at the end of the phase.
    #[error(
        "phase `{phase}`: {node} ends {} with {chunk} {}",
        ends(step),
        result_phrase(holds, collective, expected, missing, extra)
    )]
    WrongResult {
        /// The phase.
        phase: String,
        /// The phase's last step (`None` for a phase without steps).
        step: Option<StepId>,
        /// The node.
        node: Named<NodeId>,
        /// The chunk of its data buffer.
        chunk: ChunkId,
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
    /// A mean's result chunk holds the sum of all inputs but was never divided.
    #[error(
        "phase `{phase}`: {node} ends {} with {chunk} holding the sum of all {count} inputs, but it was never divided; a mean {} must scale it by {count} once",
        ends(step),
        kind_name(collective)
    )]
    NotScaled {
        /// The phase.
        phase: String,
        /// The phase's last step (`None` for a phase without steps).
        step: Option<StepId>,
        /// The node.
        node: Named<NodeId>,
        /// The chunk of its data buffer.
        chunk: ChunkId,
        /// The phase's collective.
        collective: Collective,
        /// The number of compute nodes (the divisor).
        count: usize,
    },
}

/// Something the verifier noticed that does not make the schedule wrong.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub enum Warning {
    /// A reducing write combines an input a second time, which max and min forgive.
    InputCombinedTwice {
        /// The phase.
        phase: String,
        /// The step.
        step: StepId,
        /// The node.
        node: Named<NodeId>,
        /// The instruction.
        action: Action,
        /// The buffer written.
        buffer: Named<BufferId>,
        /// The chunk written.
        chunk: ChunkId,
        /// The inputs both in the destination and in the incoming data.
        inputs: NodeList,
        /// The phase's op (max or min).
        op: ReduceOp,
    },
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Warning::InputCombinedTwice {
                phase,
                step,
                node,
                action,
                buffer,
                chunk,
                inputs,
                op,
            } => write!(
                f,
                "phase `{phase}`, {step}: {node}'s {action} combines inputs {inputs} into {chunk} of buffer `{buffer}` a second time (harmless for {op}, but wasted traffic)"
            ),
        }
    }
}

/// Every problem the verifier found. Displays as a one-line summary
/// (`schedule failed verification (3 errors)`); each error displays as one line of its own.
#[derive(Clone, Debug, Error, PartialEq, Serialize)]
#[error("schedule failed verification ({} error{})", errors.len(), if errors.len() == 1 { "" } else { "s" })]
pub struct VerifyErrors {
    /// The problems, in the order found.
    pub errors: Vec<VerifyError>,
}
