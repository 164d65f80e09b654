//! The [`Transport`] trait: how one node's executor exchanges a step's messages with its peers.
//!
//! A node executor ([`crate::NodeExecutor`]) runs one node's program. In every step it reads the
//! chunks it sends (start-of-step state), packs each send into a [`Message`], and hands them to
//! the transport together with the list of messages it [`Expected`]s. The transport delivers
//! the outgoing messages and returns the incoming ones. The executor then checks what came
//! back — a missing message, one of the wrong size, one nobody expects, one that came twice are
//! all errors naming the phase, step and node — and only then applies the step's writes.
//!
//! # Identifying messages
//!
//! A message is named by its [`MessageKey`]: `(step, link, from, to, first_chunk)`. `link` is
//! the *last* link of the sender's route (the one the receive names), and `first_chunk` the
//! first chunk of the transfer, which tells apart two transfers between the same pair of
//! nodes over the same link in one step (links with several lanes). A transport only needs to
//! carry the key and the elements; it never interprets them.
//!
//! # Transports
//!
//! [`crate::InProcess`] moves messages between the nodes of one process directly. The MPI
//! transport (`crate::mpi`, cargo feature `mpi`) runs one node per rank: each outgoing message
//! becomes a non-blocking send to the receiver's rank, each expected one a probed receive, with
//! a tag derived from the key. A transport that can carry every element type implements the
//! trait for all of them, dispatching on [`Element::DTYPE`] where the wire format needs to know
//! (or going through [`Element::write_le_bytes`] / [`Element::read_le_bytes`] for
//! byte-oriented channels). A peer that vanishes must become an error from `exchange` (after a
//! timeout if the channel cannot tell), never a hang or a panic.

use crate::element::Element;
use schedule_ir::{ChunkId, LinkId, NodeId, StepId};

/// Names one message of a phase: which step, over which link, between which nodes, starting at
/// which chunk. Ordered, so a transport can sort or index messages by it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MessageKey {
    /// The step the message belongs to.
    pub step: StepId,
    /// The last link of the route: the link the receiving node receives on.
    pub link: LinkId,
    /// The sending compute node.
    pub from: NodeId,
    /// The receiving compute node.
    pub to: NodeId,
    /// The first chunk of the transfer.
    pub first_chunk: ChunkId,
}

/// A message: a key and the elements of the transferred chunks, concatenated in the order the
/// send lists them.
#[derive(Clone, Debug, PartialEq)]
pub struct Message<T> {
    /// Which message this is.
    pub key: MessageKey,
    /// The elements carried.
    pub data: Vec<T>,
}

/// A message a node expects in the current step, and its size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Expected {
    /// The message's key (`key.to` is the expecting node).
    pub key: MessageKey,
    /// The number of elements the receive needs.
    pub len: usize,
}

/// Delivers one node's messages of element type `T` to its peers and collects the messages
/// addressed to it.
///
/// A transport that can carry every element type implements it for all of them
/// (`impl<T: Element> Transport<T> for MyTransport`), dispatching on [`Element::DTYPE`] where
/// the wire format needs to know; a typed one (a channel of `Message<f32>`) implements it for
/// its type only.
pub trait Transport<T: Element> {
    /// What can go wrong in the transport itself (a peer vanished, a timeout, a broken link).
    type Error: std::error::Error + Send + Sync + 'static;

    /// Sends every message of `outgoing` (all of step `step`, from this node) and returns the
    /// messages addressed to this node in `step`: normally exactly one per entry of
    /// `expected`, in any order. The caller checks the returned messages against `expected`,
    /// so a transport may return whatever it received; it must not block forever.
    fn exchange(
        &mut self,
        step: StepId,
        outgoing: Vec<Message<T>>,
        expected: &[Expected],
    ) -> Result<Vec<Message<T>>, Self::Error>;
}
