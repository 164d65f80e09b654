//! [`LinkTransport`]: one step's messages, each written to the connection of the route it
//! names and read from the connections of the links it arrives on, within a deadline.

use super::channels::Channel;
use super::conn::{Connections, Event};
use super::error::LinkError;
use super::frame::{self, HEADER_LEN};
use crate::element::Element;
use crate::transport::{Expected, Message, MessageKey, Transport};
use schedule_ir::{Machine, NodeId, StepId};
use std::collections::HashMap;
use std::sync::mpsc::RecvTimeoutError;
use std::time::{Duration, Instant};

/// A node's connections and what has arrived on them ahead of need: kept across phases and
/// runs, so a peer may run ahead into the next step or phase.
pub(crate) struct Wires {
    pub node: NodeId,
    pub names: Names,
    pub conns: Connections,
    /// Messages that arrived before their step, by (phase position, key).
    pending: HashMap<(u32, MessageKey), Vec<u8>>,
    /// Why each incoming connection ended, if it did.
    closed: Vec<Option<String>>,
    /// Messages queued on each outgoing connection and not yet written.
    queued: Vec<usize>,
}

/// Node and link names, for errors.
pub(crate) struct Names {
    nodes: Vec<String>,
    links: Vec<String>,
}

impl Names {
    pub fn new(machine: &Machine) -> Self {
        Names {
            nodes: machine.nodes.iter().map(|n| n.name.clone()).collect(),
            links: machine.links.iter().map(|l| l.name.clone()).collect(),
        }
    }

    pub fn node(&self, n: NodeId) -> String {
        self.nodes
            .get(n.index())
            .cloned()
            .unwrap_or_else(|| n.to_string())
    }

    pub fn link(&self, l: schedule_ir::LinkId) -> String {
        self.links
            .get(l.index())
            .cloned()
            .unwrap_or_else(|| l.to_string())
    }
}

impl Wires {
    pub fn new(node: NodeId, names: Names, conns: Connections) -> Self {
        let closed = vec![None; conns.incoming.len()];
        let queued = vec![0; conns.outgoing.len()];
        Wires {
            node,
            names,
            conns,
            pending: HashMap::new(),
            closed,
            queued,
        }
    }
}

/// The [`Transport`] of one phase over the links: built by
/// [`LinkNode`](super::LinkNode) for each run of a phase.
pub struct LinkTransport<'n> {
    pub(crate) wires: &'n mut Wires,
    /// The phase's position in the schedule, carried in every message header.
    pub(crate) phase: u32,
    /// The outgoing connection of each message this node sends in the phase.
    pub(crate) routes: &'n HashMap<MessageKey, usize>,
    pub(crate) timeout: Duration,
}

impl<T: Element> Transport<T> for LinkTransport<'_> {
    type Error = LinkError;

    /// Queues every outgoing message on its connection's writer, then handles what the
    /// threads report — messages, closed connections, finished writes — until every expected
    /// message is here and every write is done, or the deadline passes.
    fn exchange(
        &mut self,
        _step: StepId,
        outgoing: Vec<Message<T>>,
        expected: &[Expected],
    ) -> Result<Vec<Message<T>>, LinkError> {
        let deadline = Instant::now() + self.timeout;
        let size = T::DTYPE.size_bytes();
        for m in outgoing {
            let conn = *self.routes.get(&m.key).ok_or_else(|| LinkError::Wiring {
                detail: format!(
                    "node `{}` has no connection for its message to `{}` over link `{}`",
                    self.wires.names.node(m.key.from),
                    self.wires.names.node(m.key.to),
                    self.wires.names.link(m.key.link)
                ),
            })?;
            let payload = m.data.len() as u64 * size;
            let mut bytes = Vec::with_capacity(HEADER_LEN + usize::try_from(payload).unwrap_or(0));
            frame::write_header(self.phase, &m.key, payload, &mut bytes);
            T::write_le_bytes(&m.data, &mut bytes);
            let w = &mut *self.wires;
            let sent = w.conns.writers.get(conn).map(|q| q.send(bytes));
            if !matches!(sent, Some(Ok(()))) {
                return Err(w.send_failed(conn, "the connection's writer has stopped".into()));
            }
            if let Some(q) = w.queued.get_mut(conn) {
                *q += 1;
            }
        }
        self.wait(expected, deadline)?;
        let w = &mut *self.wires;
        let mut incoming = Vec::with_capacity(expected.len());
        for e in expected {
            let Some(bytes) = w.pending.remove(&(self.phase, e.key)) else {
                continue;
            };
            let mut data = Vec::new();
            if !T::read_le_bytes(&bytes, &mut data) {
                return Err(LinkError::BadMessage {
                    node: w.names.node(w.node),
                    peer: w.names.node(e.key.from),
                    link: w.names.link(e.key.link),
                    detail: format!(
                        "{} bytes are not a whole number of {size}-byte elements",
                        bytes.len()
                    ),
                });
            }
            incoming.push(Message { key: e.key, data });
        }
        Ok(incoming)
    }
}

impl LinkTransport<'_> {
    /// Handles events until the step is complete or the deadline passes.
    fn wait(&mut self, expected: &[Expected], deadline: Instant) -> Result<(), LinkError> {
        let phase = self.phase;
        let w = &mut *self.wires;
        loop {
            let missing = expected
                .iter()
                .find(|e| !w.pending.contains_key(&(phase, e.key)));
            let unsent = w.queued.iter().position(|&q| q > 0);
            if missing.is_none() && unsent.is_none() {
                return Ok(());
            }
            if let Some(e) = missing {
                w.check_open(e.key)?;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            match w.conns.events.recv_timeout(left) {
                Ok(Event::Frame {
                    conn,
                    header,
                    payload,
                }) => {
                    let channel = w.conns.incoming.get(conn).copied();
                    w.check_frame(channel, &header.key)?;
                    w.pending.insert((header.phase, header.key), payload);
                }
                Ok(Event::Closed { conn, reason }) => {
                    if let Some(c) = w.closed.get_mut(conn) {
                        *c = Some(reason);
                    }
                }
                Ok(Event::Sent { conn, result }) => {
                    if let Some(q) = w.queued.get_mut(conn) {
                        *q = q.saturating_sub(1);
                    }
                    if let Err(cause) = result {
                        return Err(w.send_failed(conn, cause));
                    }
                }
                Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => {
                    return Err(w.timed_out(missing.map(|e| e.key), unsent, self.timeout));
                }
            }
        }
    }
}

impl Wires {
    /// Fails if every connection the message `key` could arrive on has closed.
    fn check_open(&self, key: MessageKey) -> Result<(), LinkError> {
        let mut reasons = self
            .conns
            .incoming
            .iter()
            .zip(&self.closed)
            .filter(|(c, _)| c.from == key.from && c.last == key.link)
            .map(|(_, closed)| closed.as_ref());
        let first = reasons.next().flatten();
        if let Some(reason) = first {
            if reasons.all(|r| r.is_some()) {
                return Err(LinkError::Closed {
                    node: self.names.node(self.node),
                    peer: self.names.node(key.from),
                    link: self.names.link(key.link),
                    cause: reason.clone(),
                });
            }
        }
        Ok(())
    }

    /// Fails if a message arrived on the connection of another route than the one it names.
    fn check_frame(&self, channel: Option<Channel>, key: &MessageKey) -> Result<(), LinkError> {
        let Some(c) = channel else {
            return Ok(());
        };
        if key.from == c.from && key.link == c.last && key.to == self.node {
            return Ok(());
        }
        Err(LinkError::BadMessage {
            node: self.names.node(self.node),
            peer: self.names.node(c.from),
            link: self.names.link(c.last),
            detail: format!(
                "it names a message from `{}` to `{}` over link `{}`",
                self.names.node(key.from),
                self.names.node(key.to),
                self.names.link(key.link)
            ),
        })
    }

    fn send_failed(&self, conn: usize, cause: String) -> LinkError {
        let c = self.conns.outgoing.get(conn);
        LinkError::SendFailed {
            node: self.names.node(self.node),
            peer: c.map_or_else(String::new, |c| self.names.node(c.to)),
            link: c.map_or_else(String::new, |c| self.names.link(c.first)),
            cause,
        }
    }

    fn timed_out(
        &self,
        missing: Option<MessageKey>,
        unsent: Option<usize>,
        waited: Duration,
    ) -> LinkError {
        if let Some(key) = missing {
            return LinkError::ReceiveTimeout {
                node: self.names.node(self.node),
                peer: self.names.node(key.from),
                link: self.names.link(key.link),
                waited,
            };
        }
        let c = unsent.and_then(|i| self.conns.outgoing.get(i));
        LinkError::SendTimeout {
            node: self.names.node(self.node),
            peer: c.map_or_else(String::new, |c| self.names.node(c.to)),
            link: c.map_or_else(String::new, |c| self.names.link(c.first)),
            waited,
        }
    }
}
