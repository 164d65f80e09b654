//! The schedule IR of topoc: what a compiled collective *is*.
//!
//! A [`Schedule`] is the whole output of the compiler for one machine: a summary of the
//! machine (nodes and links, with the names the user wrote) and one [`Phase`] per exchange
//! phase of the BSP program. A phase is one collective (allreduce, reduce-scatter, …) on one
//! vector, cut into [`Chunk`]s, and one [`Program`] per node.
//!
//! # Contents
//! - the IR types (this module), with their invariants written on the fields;
//! - [`serial`]: reading and writing schedules as RON (the default) and JSON;
//! - [`verify`](mod@verify): the verifier, which turns a [`Schedule`] into a [`VerifiedSchedule`] or a list
//!   of every problem it found;
//! - [`cost`]: the α-β cost model and lower bounds;
//! - [`limits`]: every size limit, with its reason;
//! - [`visible`]: how control characters in users' names are shown, in every output.
//!
//! # Execution semantics (BSP)
//!
//! Every program of a phase has exactly [`Phase::steps`] steps. Step `k` of every node runs
//! "at the same time", in three parts:
//!
//! 1. **Read.** Every instruction that reads a buffer — [`Instr::Send`] and the source side of
//!    [`Instr::Reduce`] / [`Instr::Copy`] — reads the node's state *as it was at the start of
//!    step `k`*. Nothing written during step `k` is visible to a read of step `k`.
//! 2. **Transfer.** Every send of step `k` travels over its link (and the further links of its
//!    route) and is matched by exactly one [`Instr::Recv`] of step `k` on the receiving node,
//!    naming the same final link, the sender, and the same chunks.
//! 3. **Write.** At the end of step `k`, each node applies its writes — receives and the
//!    destination side of local reduce/copy — **in program order**. A write either replaces the
//!    destination chunk ([`RecvMode::Store`]) or combines into it with the phase's op
//!    ([`RecvMode::Reduce`]: `dst = dst ⊕ incoming`). An [`Instr::Scale`] is a write too: in
//!    its place in program order it divides the chunks as they are at that point (after the
//!    receives and reduces before it in the same step), so a chunk completed by a receive of
//!    step `k` can be scaled in step `k`, and the sends of step `k + 1` read the scaled value.
//!
//! Then every node passes a barrier and step `k + 1` begins. Because reads see only the state
//! at the start of a step and writes are applied in a fixed order, the result never depends on
//! timing: the same schedule on the same inputs gives bit-identical outputs, floats included.
//!
//! # Mean
//!
//! [`ReduceOp::Mean`] combines by addition, exactly like [`ReduceOp::Sum`]; the division
//! happens once, explicitly, by an [`Instr::Scale`] with `divisor` = the number of compute
//! nodes, on a chunk that holds the sum of all inputs. A chunk that must hold the result at the
//! end of an allreduce, reduce-scatter or reduce has been scaled exactly once; a scaled chunk
//! is never combined again (a divided mean added to anything is no longer a mean). Copies of a
//! scaled chunk (stores, [`Instr::Copy`]) are scaled too. With one compute node the input is
//! already its own mean and needs no scale (a scale by 1 is accepted and changes nothing).
//! Allgather and broadcast combine nothing, so under `Mean` they need no scale.
//!
//! # Routes, links and lanes
//!
//! A send names the link it leaves on and, when its destination is not a neighbour, the further
//! links of its route ([`Instr::Send::via`]); the receive names the route's last link. Any node
//! may forward: switches, and compute nodes, whose routers pass a transfer through without
//! computing on it or storing it (as on torus machines); forwarding takes no instruction. A transfer occupies one direction of every link of its route for
//! the whole step; each direction of a link carries at most [`Link::lanes`] transfers per step.
//! Directions are numbered machine-wide (see [`Link`] and [`Hop::direction`]).
//!
//! # Buffers
//!
//! Every node has the buffers of [`Phase::buffers`]. Each buffer holds the whole vector,
//! laid out by the phase's chunking (chunk `c` is elements `chunks[c].start..chunks[c].end`).
//! [`BufferId`] 0 is always the user's data buffer (input and output); further buffers are
//! scratch space whose contents start undefined.
//!
//! # Size bands
//!
//! An exchange may be compiled once per size: the program then holds a
//! [`ProgramItem::Bands`] in its place, whose [`Band`]s each name a complete phase and the
//! range of buffer sizes, in bytes, it serves ([`Schedule::phase_for_bytes`] picks one). On a
//! buffer of another length in its range a band's phase runs re-chunked
//! ([`Phase::with_elements`]), which keeps it valid: the verifier's proof is per chunk id.
//!
//! # ChunkIdsIter
//!
//! Entities live in vectors and are named by newtype ids that index them ([`NodeId`] into
//! [`Machine::nodes`], [`LinkId`] into [`Machine::links`], [`ChunkId`] into
//! [`Phase::chunks`], [`BufferId`] into [`Phase::buffers`]). ChunkIdsIter serialise as plain numbers.
//! The verifier checks every id is in range before anything else looks at the schedule.
#![deny(missing_docs)]

use serde::{Deserialize, Serialize};
use std::fmt;

mod bands;
mod chunk_ids;
pub mod cost;
pub mod limits;
pub mod pattern;
pub mod ranks;
pub mod serial;
pub mod verify;
pub mod visible;

pub use bands::{Band, PhaseLookup};
pub use chunk_ids::{ChunkBytes, ChunkIds, ChunkIdsIter, ChunkRun};
pub use pattern::{Grid, Pattern};
pub use ranks::Ranks;
pub use verify::{
    verify, verify_beside, verify_pattern, Report, VerifiedPattern, VerifiedSchedule, VerifyError,
    VerifyErrors,
};

/// The IR format version written into every schedule. Readers refuse other versions.
pub const FORMAT_VERSION: u32 = 1;

macro_rules! entity_id {
    ($(#[$doc:meta])* $name:ident, $prefix:literal) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(pub u32);

        impl $name {
            /// The index of this entity in the vector that holds it.
            pub fn index(self) -> usize {
                self.0 as usize
            }

            /// The id of the entity at `index`. An index past `u32::MAX` saturates: the id
            /// is then out of range of every table and refused like any id out of range,
            /// so no input can make this panic.
            pub fn new(index: usize) -> Self {
                Self(u32::try_from(index).unwrap_or(u32::MAX))
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!($prefix, "{}"), self.0)
            }
        }
    };
}

entity_id!(
    /// A node of the machine (compute node or switch); indexes [`Machine::nodes`].
    NodeId,
    "node#"
);
entity_id!(
    /// A compute node's position among the machine's compute nodes, in node order: its MPI
    /// rank, its GPU id in an MSCCL file, its input's place in the runtime. [`Ranks`] maps
    /// ranks to nodes and back.
    RankId,
    "rank "
);
entity_id!(
    /// A link of the machine; indexes [`Machine::links`].
    LinkId,
    "link#"
);
entity_id!(
    /// A chunk of a phase's vector; indexes [`Phase::chunks`].
    ChunkId,
    "chunk "
);
entity_id!(
    /// A buffer of a phase; indexes [`Phase::buffers`]. Buffer 0 is the user's data.
    BufferId,
    "buffer "
);
entity_id!(
    /// A BSP step of a phase, counted from 0.
    StepId,
    "step "
);

/// A whole compiled schedule: the machine it is for and one phase per exchange phase.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Schedule {
    /// Always [`FORMAT_VERSION`] when written by this crate; readers refuse other values.
    pub format_version: u32,
    /// The machine the schedule was compiled for.
    pub machine: Machine,
    /// The BSP program every node runs: compute phases and exchange phases, in order. Each
    /// exchange item names a phase of [`Schedule::phases`]; every phase is named exactly once,
    /// in the order of `phases`. Empty means "the phases in order, no compute phases recorded".
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub program: Vec<ProgramItem>,
    /// The exchange phases, in program order. Names are unique.
    pub phases: Vec<Phase>,
}

/// One item of the BSP program: local computation, or an exchange phase framed by barriers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ProgramItem {
    /// A compute phase: local work the schedule has no instructions for; recorded so that the
    /// program reads as the topology file wrote it. Names need not be unique.
    Compute(String),
    /// An exchange phase, by the name of its [`Phase`]: a barrier, the phase's steps, a barrier.
    Exchange(String),
    /// An exchange compiled once per size band: the runtime runs the band whose byte range
    /// holds the buffer's size. Each band names a complete [`Phase`] of [`Schedule::phases`]
    /// (each proved on its own, like any phase), and counts as that phase's one run in the
    /// program. The item's name is what callers run; it is no phase's name.
    Bands {
        /// The exchange's name from the topology file.
        name: String,
        /// The bands, in increasing size: non-empty, each range non-empty, each starting where
        /// the one before ends (no hole, no overlap).
        bands: Vec<Band>,
    },
}

/// The machine summary carried by a schedule: everything the verifier and the runtime need to
/// know about the hardware.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Machine {
    /// The machine's name from the topology file.
    pub name: String,
    /// Nodes, indexed by [`NodeId`]. Names are unique.
    pub nodes: Vec<Node>,
    /// Links, indexed by [`LinkId`]. Names are unique.
    pub links: Vec<Link>,
    /// How fast every compute node combines data, in gigabits of operand per second (the γ
    /// of the cost model: combining `b` bytes takes `8·b / (reduce_gbps · 10⁹)` seconds).
    /// `None` when the machine declares no rate: reduction is then free in the cost model.
    /// Positive and finite. Devices ([`Node::capacity`]) combine at line rate and are not
    /// charged. Only the cost model reads it; execution does not depend on it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reduce_gbps: Option<f64>,
    /// What a transfer pays, in microseconds, for each switch its route passes through (a
    /// switch it is forwarded by, not one it starts or ends at), on top of the latencies of the
    /// links it crosses. Non-negative and finite; 0 when the machine declares none, and then
    /// not written, so that schedules of machines without it read exactly as before. Only the
    /// cost model reads it; execution does not depend on it.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub switch_latency_us: f64,
}

/// Whether a field that defaults to 0 holds its default (and so is not written).
fn is_zero(value: &f64) -> bool {
    *value == 0.0
}

/// A node of the machine.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Node {
    /// The name the user knows the node by (`N3`, `a`, `gpu0`).
    pub name: String,
    /// Whether the node computes or only forwards.
    pub kind: NodeKind,
    /// For a switch that can combine data in the network (seed 003's reducing NICs and
    /// switches, a *device*): how many chunks of its buffers may be live at once (its segment
    /// buffer units; see [`Phase::programs`]). At least 1. `None` for every other node, and
    /// always `None` on a compute node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<u32>,
}

impl Node {
    /// Whether the node runs a program: a compute node, or a switch with a capacity.
    pub fn runs_program(&self) -> bool {
        self.kind == NodeKind::Compute || self.capacity.is_some()
    }
}

/// What a node can do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum NodeKind {
    /// A processing node: holds a data buffer, sends, receives and reduces.
    Compute,
    /// A switch: forwards transfers along routes. It runs no program, unless it has a
    /// [`Node::capacity`]: then it is a *device* that may also hold, send, receive and combine
    /// chunks like a compute node, but has no input and no result.
    Switch,
}

/// A bidirectional link between two distinct nodes. Each direction is independent: in one step
/// `a → b` and `b → a` may each carry up to `lanes` transfers.
///
/// Link directions are numbered machine-wide: direction `2·l` is link `l` from `a` to `b`, and
/// `2·l + 1` is link `l` from `b` to `a` (see [`Hop::direction`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Link {
    /// The link identifier from the topology file (`L011`, `L02`, …).
    pub name: String,
    /// One endpoint. `a != b`.
    pub a: NodeId,
    /// The other endpoint.
    pub b: NodeId,
    /// Bandwidth of each direction, in gigabits per second. Positive and finite.
    pub bandwidth_gbps: f64,
    /// One-way latency, in microseconds. Non-negative and finite.
    pub latency_us: f64,
    /// How many transfers each direction may carry in one step. At least 1.
    pub lanes: u32,
}

impl Link {
    /// The endpoint opposite `node`, or `None` if `node` is not an endpoint of this link.
    pub fn other(&self, node: NodeId) -> Option<NodeId> {
        if node == self.a {
            Some(self.b)
        } else if node == self.b {
            Some(self.a)
        } else {
            None
        }
    }
}

/// One exchange phase: a collective on one vector, and one program per node.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Phase {
    /// The phase's name from the topology file; the runtime runs phases by name.
    pub name: String,
    /// What the phase promises at its end.
    pub collective: Collective,
    /// The combining operation used by [`RecvMode::Reduce`] and [`Instr::Reduce`].
    pub op: ReduceOp,
    /// The element type the phase was compiled for (the schedule itself is type-agnostic).
    pub dtype: DType,
    /// The vector's length in elements.
    pub elements: u64,
    /// Which method produced the schedule (`ring`, `ladder-rings`, …), for humans.
    pub algorithm: String,
    /// The chunking of the vector: chunk `i` is elements `start..end`. Chunks are in order,
    /// contiguous, start at 0 and end at `elements`; a chunk may be empty.
    pub chunks: Vec<Chunk>,
    /// Buffers every node has. Entry 0 is the data buffer.
    pub buffers: Vec<Buffer>,
    /// The number of BSP steps; every program has exactly this many.
    pub steps: u32,
    /// Whether the transfers of a step may outnumber a link direction's lanes
    /// ([`LinkUse`]); exclusive when absent, and then not written.
    #[serde(default, skip_serializing_if = "LinkUse::is_exclusive")]
    pub links: LinkUse,
    /// One program per node, indexed by [`NodeId`]. A switch's program is empty unless the
    /// switch is a device ([`Node::capacity`]). A device's buffers start undefined; a chunk of
    /// a device's buffer is *live* from a step that writes it to the last step that reads it
    /// before it is written again (the write's own step when nothing reads it), and in no step
    /// are more than `capacity` chunks of a device live.
    pub programs: Vec<Program>,
}

/// A contiguous range of the vector.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Chunk {
    /// First element (inclusive).
    pub start: u64,
    /// One past the last element. `start <= end`.
    pub end: u64,
    /// The node that owns this chunk where the collective gives chunks owners: the node that
    /// must hold it reduced after a reduce-scatter, or that contributes it to an allgather.
    /// `None` for collectives where every node ends with every chunk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<NodeId>,
}

impl Chunk {
    /// Number of elements in the chunk.
    pub fn len(&self) -> u64 {
        self.end.saturating_sub(self.start)
    }

    /// Whether the chunk holds no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A buffer declaration. Every buffer spans the whole vector.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Buffer {
    /// A name for humans (`data`, `scratch`).
    pub name: String,
    /// Whether the buffer is the user's data or scratch space.
    pub kind: BufferKind,
}

/// The role of a buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum BufferKind {
    /// The user's vector: input at the start of the phase, result at its end. Exactly one,
    /// at index 0.
    Data,
    /// Scratch space; undefined at the start of the phase.
    Scratch,
}

/// The program of one node: `steps[k]` is what the node does in step `k`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Program {
    /// Exactly [`Phase::steps`] entries; an entry may be empty (the node idles).
    pub steps: Vec<Vec<Instr>>,
}

/// One instruction of a step.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Instr {
    /// Send `chunks` of `buffer` (as they were at the start of the step) to node `to`.
    Send {
        /// The link the transfer leaves on; one endpoint is the sending node.
        link: LinkId,
        /// Further links of the route, in order, through forwarding nodes (switches or compute
        /// nodes). Empty for a direct transfer. The last link of the route ends at `to`.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        via: Vec<LinkId>,
        /// The receiving compute node or device.
        to: NodeId,
        /// The buffer read.
        buffer: BufferId,
        /// The chunks sent, in order; non-empty and without repeats.
        #[serde(with = "crate::serial::runs")]
        chunks: ChunkIds,
    },
    /// Receive `chunks` from node `from`, arriving over `link`, into `buffer`.
    Recv {
        /// The last link of the sender's route; one endpoint is the receiving node.
        link: LinkId,
        /// The sending compute node or device.
        from: NodeId,
        /// The buffer written at the end of the step.
        buffer: BufferId,
        /// The chunks received; the same list, in the same order, as the matching send.
        #[serde(with = "crate::serial::runs")]
        chunks: ChunkIds,
        /// Replace the destination, or combine into it.
        mode: RecvMode,
    },
    /// Combine `chunks` of `src` (start-of-step state) into `dst` with the phase's op.
    Reduce {
        /// Buffer read.
        src: BufferId,
        /// Buffer written at the end of the step. Differs from `src` (a chunk combined with
        /// itself would count its inputs twice).
        dst: BufferId,
        /// The chunks combined; non-empty and without repeats.
        #[serde(with = "crate::serial::runs")]
        chunks: ChunkIds,
    },
    /// Copy `chunks` of `src` (start-of-step state) into `dst`.
    Copy {
        /// Buffer read.
        src: BufferId,
        /// Buffer written at the end of the step. Differs from `src`.
        dst: BufferId,
        /// The chunks copied; non-empty and without repeats.
        #[serde(with = "crate::serial::runs")]
        chunks: ChunkIds,
    },
    /// Divide `chunks` of `buffer` by `divisor`, in the step's write part (see the crate doc):
    /// each element becomes `value / divisor` — IEEE division by the divisor converted to the
    /// dtype for floats, truncating (`wrapping_div`) division for integers. Only in a phase
    /// whose op is [`ReduceOp::Mean`]; `divisor` is the number of compute nodes, and each
    /// chunk holds the sum of every compute node's input, not yet scaled, when the scale
    /// applies. Moves no bytes.
    Scale {
        /// The buffer written.
        buffer: BufferId,
        /// The chunks divided; non-empty and without repeats.
        #[serde(with = "crate::serial::runs")]
        chunks: ChunkIds,
        /// What every element is divided by: the number of compute nodes of the machine.
        divisor: u32,
    },
}

/// How the transfers of a phase's steps use the link directions they cross.
///
/// A step lasts as long as its slowest transfer and its most loaded direction's bytes, however
/// many transfers share that direction. Exclusive phases are *conflict-free*: no direction
/// carries more transfers in a step than its link has lanes, the discipline the topology's
/// methods are proved against. On a machine whose links differ in speed, that rule lets a
/// fast link carry only as many pieces per step as a slow one, so a method that spreads the
/// vector over links in proportion to their speed (spanning-tree packing) cannot keep the fast
/// ones busy. A shared phase drops the rule and is priced the same way: by each direction's
/// total bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum LinkUse {
    /// At most `lanes` transfers per link direction and step (the verifier checks it).
    #[default]
    Exclusive,
    /// Any number of transfers per link direction and step, priced by their total bytes.
    Shared,
}

impl LinkUse {
    /// Whether this is [`LinkUse::Exclusive`] (the default, not written in files).
    pub fn is_exclusive(&self) -> bool {
        *self == LinkUse::Exclusive
    }
}

/// How a receive writes its destination.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum RecvMode {
    /// Replace the destination chunks with the incoming data.
    Store,
    /// `dst = dst ⊕ incoming`, with the phase's op.
    Reduce,
}

/// A collective: what every node must hold when the phase ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Collective {
    /// Every compute node ends with every chunk combined over all compute nodes' inputs.
    AllReduce,
    /// Every chunk's owner ends with that chunk combined over all inputs.
    ReduceScatter,
    /// Every compute node ends with every chunk as its owner contributed it.
    AllGather,
    /// Every compute node ends with the root's vector.
    Broadcast {
        /// The node whose vector is broadcast.
        root: NodeId,
    },
    /// The root ends with every chunk combined over all inputs.
    Reduce {
        /// The node that receives the result.
        root: NodeId,
    },
}

impl fmt::Display for Collective {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Collective::AllReduce => f.write_str("allreduce"),
            Collective::ReduceScatter => f.write_str("reduce-scatter"),
            Collective::AllGather => f.write_str("allgather"),
            Collective::Broadcast { root } => write!(f, "broadcast from {root}"),
            Collective::Reduce { root } => write!(f, "reduce to {root}"),
        }
    }
}

impl Collective {
    /// The collective in words, with its root named as the user knows it (`broadcast from o0`).
    pub fn describe(&self, machine: &Machine) -> String {
        match self {
            Collective::Broadcast { root } => {
                format!("broadcast from {}", machine.node_name(*root))
            }
            Collective::Reduce { root } => format!("reduce to {}", machine.node_name(*root)),
            other => other.to_string(),
        }
    }
}

/// The combining operation of a phase.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ReduceOp {
    /// Addition (wrapping for integers).
    Sum,
    /// Multiplication (wrapping for integers).
    Prod,
    /// Maximum.
    Max,
    /// Minimum.
    Min,
    /// The arithmetic mean over the compute nodes' inputs: combines by addition (wrapping for
    /// integers), and each result chunk is divided once by the number of compute nodes with
    /// an [`Instr::Scale`] (truncating for integers). See the [crate doc](crate#mean).
    Mean,
}

impl ReduceOp {
    /// Whether combining the same input twice leaves the result unchanged.
    pub fn is_idempotent(self) -> bool {
        matches!(self, ReduceOp::Max | ReduceOp::Min)
    }
}

impl fmt::Display for ReduceOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ReduceOp::Sum => "sum",
            ReduceOp::Prod => "prod",
            ReduceOp::Max => "max",
            ReduceOp::Min => "min",
            ReduceOp::Mean => "mean",
        })
    }
}

/// Element types.
///
/// New variants are only ever added at the end, so that files written before them still read
/// and the serialised names of the others never change.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum DType {
    /// 32-bit float.
    F32,
    /// 64-bit float.
    F64,
    /// 32-bit signed integer.
    I32,
    /// 64-bit signed integer.
    I64,
    /// 16-bit IEEE 754 binary16 float (half precision: 11-bit significand, 5-bit exponent).
    F16,
    /// 16-bit bfloat16 float (the upper half of an `f32`: 8-bit significand, 8-bit exponent).
    BF16,
}

impl DType {
    /// Size of one element in bytes.
    pub fn size_bytes(self) -> u64 {
        match self {
            DType::F16 | DType::BF16 => 2,
            DType::F32 | DType::I32 => 4,
            DType::F64 | DType::I64 => 8,
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DType::F32 => "f32",
            DType::F64 => "f64",
            DType::I32 => "i32",
            DType::I64 => "i64",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
        })
    }
}

impl Machine {
    /// The node's user-facing name, or its raw id if out of range.
    pub fn node_name(&self, id: NodeId) -> String {
        self.nodes
            .get(id.index())
            .map_or_else(|| id.to_string(), |n| n.name.clone())
    }

    /// The link's user-facing name, or its raw id if out of range.
    pub fn link_name(&self, id: LinkId) -> String {
        self.links
            .get(id.index())
            .map_or_else(|| id.to_string(), |l| l.name.clone())
    }

    /// ChunkIdsIter of the compute nodes, in order.
    pub fn compute_nodes(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| n.kind == NodeKind::Compute)
            .map(|(i, _)| NodeId::new(i))
    }
}

/// A link crossed one way: index `2·link` for `a → b`, `2·link + 1` for `b → a`. Every table
/// kept per link direction (the verifier's conflicts, the cost model's loads, the compiler's
/// packing, the MPI runtime's tags) is indexed by it, so the encoding lives here only.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DirectionId(u32);

impl DirectionId {
    /// `link` crossed from its `b` end to its `a` end when `backward`, else from `a` to `b`.
    /// Saturates for a link id past `u32::MAX / 2` (such a direction is then out of range of
    /// every table, and refused like any id out of range).
    pub fn new(link: LinkId, backward: bool) -> DirectionId {
        DirectionId(link.0.saturating_mul(2).saturating_add(u32::from(backward)))
    }

    /// The direction of table index `index`, if it is one.
    pub fn from_index(index: usize) -> Option<DirectionId> {
        u32::try_from(index).ok().map(DirectionId)
    }

    /// The number of directions of `links` links: the length of a table indexed by direction.
    pub fn count(links: usize) -> usize {
        links.saturating_mul(2)
    }

    /// The index into a table of directions.
    pub fn index(self) -> usize {
        self.0 as usize
    }

    /// The link crossed.
    pub fn link(self) -> LinkId {
        LinkId(self.0 / 2)
    }

    /// Whether the link is crossed from its `b` end to its `a` end.
    pub fn backward(self) -> bool {
        self.0 % 2 == 1
    }

    /// The direction of `link` leaving `from`, or `None` when the link does not exist or does
    /// not touch `from`.
    pub fn leaving(machine: &Machine, link: LinkId, from: NodeId) -> Option<DirectionId> {
        let l = machine.links.get(link.index())?;
        l.other(from)?;
        Some(DirectionId::new(link, from != l.a))
    }

    /// The sending and receiving ends, or `None` when the link does not exist.
    pub fn ends(self, machine: &Machine) -> Option<(NodeId, NodeId)> {
        let l = machine.links.get(self.link().index())?;
        Some(if self.backward() {
            (l.b, l.a)
        } else {
            (l.a, l.b)
        })
    }
}

/// One hop of a route: a link crossed in one direction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hop {
    /// The link crossed.
    pub link: LinkId,
    /// The node the hop leaves.
    pub from: NodeId,
    /// The node the hop reaches.
    pub to: NodeId,
    /// Whether the hop goes from the link's `b` end to its `a` end.
    pub backward: bool,
}

impl Hop {
    /// The machine-wide index of the link direction crossed: `2·link` for `a → b`,
    /// `2·link + 1` for `b → a`.
    pub fn direction(&self) -> usize {
        self.direction_id().index()
    }

    /// The link direction crossed.
    pub fn direction_id(&self) -> DirectionId {
        DirectionId::new(self.link, self.backward)
    }
}

impl Machine {
    /// The hops of a transfer that leaves `from` on `first` and then crosses `via`, in order
    /// (the route of an [`Instr::Send`]). The iterator stops early at a link that does not
    /// exist or does not touch the node reached so far; in a verified schedule it never does.
    pub fn route<'a>(
        &'a self,
        from: NodeId,
        first: LinkId,
        via: &'a [LinkId],
    ) -> impl Iterator<Item = Hop> + 'a {
        let mut at = Some(from);
        std::iter::once(first)
            .chain(via.iter().copied())
            .map_while(move |link| {
                let here = at.take()?;
                let l = self.links.get(link.index())?;
                let to = l.other(here)?;
                at = Some(to);
                Some(Hop {
                    link,
                    from: here,
                    to,
                    backward: here != l.a,
                })
            })
    }
}

impl Instr {
    /// The chunks the instruction reads or writes.
    pub fn chunks(&self) -> &ChunkIds {
        match self {
            Instr::Send { chunks, .. }
            | Instr::Recv { chunks, .. }
            | Instr::Reduce { chunks, .. }
            | Instr::Copy { chunks, .. }
            | Instr::Scale { chunks, .. } => chunks,
        }
    }

    /// For a send, the last link of its route (the one the receive names); `None` otherwise.
    pub fn final_link(&self) -> Option<LinkId> {
        match self {
            Instr::Send { link, via, .. } => Some(via.last().copied().unwrap_or(*link)),
            _ => None,
        }
    }
}

impl Schedule {
    /// The phase called `name`.
    pub fn phase(&self, name: &str) -> Option<&Phase> {
        self.phases.iter().find(|p| p.name == name)
    }
}

impl Phase {
    /// Bytes in `chunk` for this phase's dtype.
    pub fn chunk_bytes(&self, chunk: ChunkId) -> u64 {
        self.chunks
            .get(chunk.index())
            .map_or(0, |c| c.len().saturating_mul(self.dtype.size_bytes()))
    }

    /// The same phase re-chunked for a vector of `elements` elements: every chunk keeps its
    /// place and its share of the vector (cumulative boundaries are scaled), so the programs
    /// stay valid. Used to run a schedule on a different vector length.
    pub fn with_elements(&self, elements: u64) -> Phase {
        let mut phase = self.clone();
        let old = self.elements;
        let n = self.chunks.len() as u128;
        for (i, chunk) in phase.chunks.iter_mut().enumerate() {
            let i = i as u128;
            let scale = |x: u64, fallback: u128| -> u64 {
                let v = if old == 0 {
                    fallback * elements as u128 / n.max(1)
                } else {
                    x as u128 * elements as u128 / old as u128
                };
                v as u64
            };
            chunk.start = scale(chunk.start, i);
            chunk.end = scale(chunk.end, i + 1);
        }
        phase.elements = elements;
        phase
    }
}
