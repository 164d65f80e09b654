//! The location types errors and reports carry: ids with their names, node sets, chunk
//! lists, instructions and transfers, each with a Display that reads like the user's files.

use crate::{BufferId, ChunkId, LinkId, NodeId};
use serde::Serialize;
use std::fmt;

/// An id together with the name the user knows it by. Displays as the name, shown through
/// [`visible::line`](crate::visible::line): a name with a line break in it cannot forge a line
/// of a message or a report. Serialises with the name as written.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Named<I> {
    /// The id.
    pub id: I,
    /// The user-facing name (a node or link name from the machine, a buffer name from the
    /// phase); the id's own rendering (`node#7`) when the id does not exist.
    pub name: String,
}

impl<I> fmt::Display for Named<I> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        crate::visible::Shown(&self.name).fmt(f)
    }
}

/// A set of nodes, in id order. Displays as `{N0,N2..N5}`: runs of three or more consecutive
/// ids are shortened to `first..last` (inclusive).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct NodeList(pub Vec<Named<NodeId>>);

impl NodeList {
    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Display for NodeList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("{")?;
        let nodes = &self.0;
        let mut i = 0;
        let mut first = true;
        while i < nodes.len() {
            let mut j = i;
            while j + 1 < nodes.len() && nodes[j + 1].id.0 == nodes[j].id.0.wrapping_add(1) {
                j += 1;
            }
            if !first {
                f.write_str(",")?;
            }
            first = false;
            if j >= i + 2 {
                write!(f, "{}..{}", nodes[i], nodes[j])?;
            } else {
                write!(f, "{}", nodes[i])?;
                if j > i {
                    write!(f, ",{}", nodes[j])?;
                }
            }
            i = j + 1;
        }
        f.write_str("}")
    }
}

/// The chunk list of an instruction, displayed as `[4, 7]` (long lists are shortened).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct ChunkList(pub Vec<ChunkId>);

impl fmt::Display for ChunkList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const SHOWN: usize = 12;
        f.write_str("[")?;
        for (i, c) in self.0.iter().take(SHOWN).enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{}", c.0)?;
        }
        if self.0.len() > SHOWN {
            write!(f, ", … ({} chunks)", self.0.len())?;
        }
        f.write_str("]")
    }
}

/// An instruction, named by what it does. Displays as `send to N2`, `receive from N0`,
/// `local reduce`, `copy` or `scale`, so that `{node}'s {action}` reads `N1's receive from N0`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub enum Action {
    /// An [`Instr::Send`](crate::Instr::Send).
    Send {
        /// The receiving node.
        to: Named<NodeId>,
    },
    /// An [`Instr::Recv`](crate::Instr::Recv).
    Recv {
        /// The sending node.
        from: Named<NodeId>,
    },
    /// An [`Instr::Reduce`](crate::Instr::Reduce).
    Reduce,
    /// An [`Instr::Copy`](crate::Instr::Copy).
    Copy,
    /// An [`Instr::Scale`](crate::Instr::Scale).
    Scale,
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Action::Send { to } => write!(f, "send to {to}"),
            Action::Recv { from } => write!(f, "receive from {from}"),
            Action::Reduce => f.write_str("local reduce"),
            Action::Copy => f.write_str("copy"),
            Action::Scale => f.write_str("scale"),
        }
    }
}

/// Any id, for [`ErrorKind::UnknownId`](super::ErrorKind::UnknownId). Displays as the raw id (`link#99`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum AnyId {
    /// A node id.
    Node(NodeId),
    /// A link id.
    Link(LinkId),
    /// A chunk id.
    Chunk(ChunkId),
    /// A buffer id.
    Buffer(BufferId),
}

impl AnyId {
    /// What the id counts, and where: `"the machine has 4 links"`.
    pub(super) fn count_phrase(self, count: usize) -> String {
        let (noun, place) = match self {
            AnyId::Node(_) => ("node", "machine"),
            AnyId::Link(_) => ("link", "machine"),
            AnyId::Chunk(_) => ("chunk", "phase"),
            AnyId::Buffer(_) => ("buffer", "phase"),
        };
        let plural = if count == 1 { "" } else { "s" };
        format!("the {place} has {count} {noun}{plural}")
    }
}

impl fmt::Display for AnyId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AnyId::Node(id) => write!(f, "{id}"),
            AnyId::Link(id) => write!(f, "{id}"),
            AnyId::Chunk(id) => write!(f, "{id}"),
            AnyId::Buffer(id) => write!(f, "{id}"),
        }
    }
}

/// One transfer, for messages. Displays as `N0 sends chunks [4] to N2`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Transfer {
    /// The sending node.
    pub from: Named<NodeId>,
    /// The receiving node.
    pub to: Named<NodeId>,
    /// The chunks sent.
    pub chunks: ChunkList,
}

impl fmt::Display for Transfer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} sends chunks {} to {}",
            self.from, self.chunks, self.to
        )
    }
}

/// What a collective requires of one chunk at the end of a phase.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub enum Expected {
    /// The chunk combined over every compute node's input.
    AllInputs {
        /// The number of compute nodes.
        count: usize,
    },
    /// Exactly one node's input, uncombined (the owner's in an allgather, the root's in a
    /// broadcast).
    OnlyInput {
        /// That node.
        node: Named<NodeId>,
    },
}

impl fmt::Display for Expected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Expected::AllInputs { count } => write!(f, "all {count}"),
            Expected::OnlyInput { node } => write!(f, "exactly the input of {node}"),
        }
    }
}
