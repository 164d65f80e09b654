//! The link transport (cargo feature `link`): one compute node per process, every transfer
//! sent on a TCP connection of the very link the schedule names.
//!
//! # Contents
//! - [`LinkNode`]: this process's node — connects to its peers over its links, then
//!   [`LinkNode::run`]s exchange phases by name on its buffer;
//! - [`Wiring`]: the wiring file, which address each compute node has on each link;
//! - [`LinkTransport`]: the [`Transport`](crate::Transport) underneath;
//! - [`LinkError`]: what the transport reports.
//!
//! # Connections
//!
//! A transfer leaves its sender on the link its `Send` names and, when it has a route
//! (`via`), crosses the switches of the route to arrive on the route's last link. For each
//! such direction of a route, and each lane (the transfers of one step between the same two
//! nodes over the same route, numbered by first chunk), the sender holds one TCP connection:
//! from its address on the first link to the receiver's address on the last link, both from
//! the wiring. A direct link therefore has one connection per direction and lane, and the two
//! links of a ladder pair (`L011`, `L012`) have their own connections and addresses.
//! Switches are not processes: the network between the two addresses forwards (a Linux
//! bridge per switch in the lab).
//!
//! Setting up, every node listens on its addresses, connects to each peer it sends to
//! (retrying until the peer listens), sends a hello naming the channel, and accepts the
//! connections of each peer that sends to it. The receiver checks the hello against the
//! schedule and the addresses against the wiring: a connection from the wrong address, or
//! one the schedule has no transfer for, is refused and reported, and so is a connection the
//! system routed out of another address than the first link's.
//!
//! # One step
//!
//! Each outgoing message (a header with the phase, step, link, nodes, first chunk and size,
//! then the elements in little-endian order) is queued on its connection's writer thread;
//! a reader thread per incoming connection reads whole messages. The step ends when every
//! expected message is here and every write has finished. Messages of later steps or phases
//! that arrive early wait for their step, so peers may run ahead. The executor checks every
//! message against the schedule before it writes anything, so results are bit-identical to
//! the in-process run.
//!
//! # Failures
//!
//! Nothing waits for ever: connecting and accepting have a deadline, each step has one
//! ([`LinkNode::set_timeout`], default [`DEFAULT_TIMEOUT`]), and so has each write. A link
//! that cannot connect, a peer that dies (its connections close), a message of the wrong size
//! or on the wrong connection, or a header announcing more bytes than the phase's vector
//! (refused before anything is allocated) is an error naming this node, the peer and the
//! link; inside a phase it comes wrapped in [`Error::Transport`], which adds the phase and
//! the step.

mod bind;
mod channels;
mod conn;
mod error;
mod frame;
mod transport;
mod wiring;

pub use error::LinkError;
pub use transport::LinkTransport;
pub use wiring::{AddressPlan, End, Wiring};

use crate::buffer::AnyBuffer;
use crate::element::Element;
use crate::error::Error;
use crate::exec::NodeExecutor;
use crate::transport::MessageKey;
use schedule_ir::{NodeId, NodeKind, VerifiedSchedule};
use std::any::Any;
use std::collections::HashMap;
use std::time::{Duration, Instant};
use transport::{Names, Wires};

/// How long a step waits for its messages, and setting up for its connections, by default.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// This process's compute node of a schedule, over the links of a wiring.
pub struct LinkNode {
    schedule: VerifiedSchedule,
    node: NodeId,
    wires: Wires,
    timeout: Duration,
    phases: HashMap<String, Slot>,
}

/// What a phase keeps between runs.
struct Slot {
    position: u32,
    /// The outgoing connection of each message this node sends.
    routes: HashMap<MessageKey, usize>,
    /// A `NodeExecutor<T>` for the phase's element type.
    executor: Box<dyn Any>,
}

impl std::fmt::Debug for LinkNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LinkNode")
            .field("node", &self.node)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl LinkNode {
    /// Takes compute node `node` of `schedule` and opens its connections: to every peer it
    /// sends to in any phase, from every peer that sends to it, each on the addresses the
    /// wiring gives, all within `timeout`.
    pub fn connect(
        schedule: VerifiedSchedule,
        wiring: &Wiring,
        node: NodeId,
        timeout: Duration,
    ) -> Result<Self, LinkError> {
        let s = schedule.schedule();
        let machine = &s.machine;
        match machine.nodes.get(node.index()) {
            Some(n) if n.kind == NodeKind::Compute => {}
            _ => {
                return Err(LinkError::Wiring {
                    detail: format!("`{}` is not a compute node", machine.node_name(node)),
                })
            }
        }
        let plan = wiring.resolve(machine)?;
        let max_bytes = s
            .phases
            .iter()
            .map(|p| p.elements.saturating_mul(p.dtype.size_bytes()))
            .max()
            .unwrap_or(0);
        let setup = conn::Setup {
            machine,
            plan: &plan,
            node,
            deadline: Instant::now() + timeout,
            timeout,
            max_bytes,
        };
        let (outgoing, incoming) = channels::node_channels(s, node);
        let conns = conn::open(&setup, outgoing, incoming)?;
        let wires = Wires::new(node, Names::new(machine), conns);
        Ok(LinkNode {
            schedule,
            node,
            wires,
            timeout,
            phases: HashMap::new(),
        })
    }

    /// Runs the phase called `phase` on this node's `data`, its messages over the links.
    /// Every node must run the same phases in the same order.
    pub fn run<T: Element>(&mut self, phase: &str, data: &mut [T]) -> Result<(), Error> {
        if !self.phases.contains_key(phase) {
            let s = self.schedule.schedule();
            let position = s.phases.iter().position(|p| p.name == phase);
            let executor = NodeExecutor::<T>::new(&self.schedule, phase, self.node)?;
            let (Some(position), Some(p)) = (position, s.phase(phase)) else {
                return Err(internal(phase));
            };
            let index: HashMap<_, _> = self
                .wires
                .conns
                .outgoing
                .iter()
                .enumerate()
                .map(|(i, c)| (*c, i))
                .collect();
            let routes = channels::routes(p, self.node)
                .into_iter()
                .filter_map(|(key, c)| Some((key, *index.get(&c)?)))
                .collect();
            let slot = Slot {
                position: u32::try_from(position).unwrap_or(u32::MAX),
                routes,
                executor: Box::new(executor),
            };
            self.phases.insert(phase.to_string(), slot);
        }
        let Some(slot) = self.phases.get_mut(phase) else {
            return Err(internal(phase));
        };
        if !slot.executor.is::<NodeExecutor<T>>() {
            slot.executor = Box::new(NodeExecutor::<T>::new(&self.schedule, phase, self.node)?);
        }
        let Some(executor) = slot.executor.downcast_mut::<NodeExecutor<T>>() else {
            return Err(internal(phase));
        };
        let mut transport = LinkTransport {
            wires: &mut self.wires,
            phase: slot.position,
            routes: &slot.routes,
            timeout: self.timeout,
        };
        executor.run(data, &mut transport)
    }

    /// [`LinkNode::run`] on a dtype-erased buffer.
    pub fn run_any(&mut self, phase: &str, data: &mut AnyBuffer) -> Result<(), Error> {
        match data {
            AnyBuffer::F32(v) => self.run(phase, v),
            AnyBuffer::F64(v) => self.run(phase, v),
            AnyBuffer::I32(v) => self.run(phase, v),
            AnyBuffer::I64(v) => self.run(phase, v),
            AnyBuffer::F16(v) => self.run(phase, v),
            AnyBuffer::BF16(v) => self.run(phase, v),
        }
    }

    /// Sets how long a step waits for its messages and writes.
    pub fn set_timeout(&mut self, timeout: Duration) {
        self.timeout = timeout;
    }

    /// The compute node this process runs.
    pub fn node(&self) -> NodeId {
        self.node
    }

    /// The schedule.
    pub fn schedule(&self) -> &VerifiedSchedule {
        &self.schedule
    }
}

/// An error that a correct runtime never returns: the phase's cached state is missing.
fn internal(phase: &str) -> Error {
    Error::Malformed {
        phase: phase.to_string(),
        location: "the link node".into(),
        detail: "internal error: the phase's cached executor is missing".into(),
    }
}
