//! The threaded in-process driver: one thread per compute node, messages over channels, every
//! wait bounded by a timeout. The shape of an MPI run (one node program per rank), inside one
//! process, so that failures of a distributed run — a node that stops, a peer that never
//! answers, a message of the wrong size — can be produced and tested.
//!
//! # The transport
//!
//! [`Threaded::endpoints`] makes one [`Endpoint`] per compute node, all connected; an endpoint
//! is a [`Transport`] for every element type (messages travel as little-endian bytes, as on a
//! wire). In every [`Transport::exchange`] it sends the step's messages to their receivers, then
//! waits for the messages it expects, keeping messages of later steps that arrive early.
//!
//! # Failures
//!
//! An exchange never blocks forever and never panics. It fails with a [`ThreadedError`]
//! (which the executor reports as [`Error::Transport`], naming the phase, the step and the
//! node whose exchange failed) when:
//! - a peer it must hear from, or send to, has **gone away**: its endpoint was dropped —
//!   because its program returned early, returned an error, or panicked (unwinding drops the
//!   endpoint). A dropping endpoint tells every peer, so they fail at once, not after the
//!   timeout: `N2 has gone away (last seen in step 1)`. The node named is the first one this
//!   node learned had gone: when one node fails, the nodes waiting for it fail after it, so the
//!   first departure is the one closest to the cause;
//! - an expected message has not arrived within the **timeout** (a peer that hangs):
//!   `timed out after 200ms waiting for the message from N2 over link L1`;
//! - a message's bytes are not a whole number of elements.
//!
//! A message of the wrong number of elements, one nobody expects, or one that comes twice is
//! passed through and refused by the executor ([`Error::WrongMessageSize`],
//! [`Error::UnexpectedMessage`], [`Error::DuplicateMessage`]). A failed node drops its endpoint
//! too, so a failure spreads to every node that depends on it, each within one timeout at most.
//!
//! [`Threaded::run`] runs a phase this way and returns the results, or the error that explains
//! the failure; [`Threaded::run_nodes`] lets each node's thread run its own code (for
//! injecting faults) and returns every node's outcome. A node whose code panics gets
//! [`Error::Panicked`]; the panic does not leave the run.
//!
//! # Example
//!
//! ```
//! # fn main() -> Result<(), runtime_lite::Error> {
//! use runtime_lite::threaded::Threaded;
//! use std::time::Duration;
//!
//! // Two nodes swap their vectors over link L0 and each adds the other's: an allreduce.
//! let text = r#"Schedule(format_version: 1,
//!   machine: Machine(name: "pair", nodes: [
//!       Node(name: "A", kind: Compute), Node(name: "B", kind: Compute)],
//!     links: [Link(name: "L0", a: 0, b: 1, bandwidth_gbps: 100.0, latency_us: 1.0, lanes: 1)]),
//!   phases: [Phase(name: "grads", collective: AllReduce, op: Sum, dtype: I32, elements: 3,
//!     algorithm: "exchange", chunks: [Chunk(start: 0, end: 3)],
//!     buffers: [Buffer(name: "data", kind: Data)], steps: 1,
//!     programs: [
//!       Program(steps: [[Send(link: 0, to: 1, buffer: 0, chunks: [0]),
//!                        Recv(link: 0, from: 1, buffer: 0, chunks: [0], mode: Reduce)]]),
//!       Program(steps: [[Send(link: 0, to: 0, buffer: 0, chunks: [0]),
//!                        Recv(link: 0, from: 0, buffer: 0, chunks: [0], mode: Reduce)]]),
//!     ])])"#;
//! let schedule = runtime_lite::load(text)?;
//! let threaded = Threaded::new(Duration::from_secs(5));
//! let outputs = threaded.run(&schedule, "grads", vec![vec![1, 2, 3], vec![10, 20, 30]])?;
//! assert_eq!(outputs, vec![vec![11, 22, 33]; 2]);
//!
//! // A node that gives up before its first step: its peer fails at once, naming it.
//! let outcomes = threaded.run_nodes(&schedule, "grads", vec![vec![0; 3]; 2], |node, data, endpoint| {
//!     if node.index() == 1 {
//!         drop(endpoint);
//!         return Ok(());
//!     }
//!     let mut endpoint = endpoint;
//!     runtime_lite::run_node_phase(&schedule, "grads", node, data, &mut endpoint)
//! })?;
//! assert_eq!(
//!     outcomes[0].as_ref().unwrap_err().to_string(),
//!     "phase `grads`, step 0: the transport failed on node A: B has gone away (before its first step)"
//! );
//! # Ok(()) }
//! ```

use crate::element::Element;
use crate::error::Error;
use crate::exec::NodeExecutor;
use crate::plan;
use crate::transport::{Expected, Message, MessageKey, Transport};
use schedule_ir::{NodeId, StepId, VerifiedSchedule};
use std::any::Any;
use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender, TryRecvError};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The timeout [`Threaded::default`] uses.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// Why an [`Endpoint`]'s exchange failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ThreadedError {
    /// A peer the node must hear from or send to has dropped its endpoint.
    #[error("{peer} has gone away ({})", last_seen(*.last_step))]
    PeerGone {
        /// The peer's name.
        peer: String,
        /// The last step the peer exchanged messages in, if any.
        last_step: Option<StepId>,
    },
    /// An expected message did not arrive in time.
    #[error(
        "timed out after {timeout:?} waiting for the message from {from} over link {link}{}",
        more(*.missing)
    )]
    Timeout {
        /// How long the exchange waited.
        timeout: Duration,
        /// The sender of the first missing message.
        from: String,
        /// Its link.
        link: String,
        /// How many expected messages were missing in all.
        missing: usize,
    },
    /// A message's bytes are not a whole number of elements.
    #[error("the message from {from} over link {link} has {bytes} bytes, not a whole number of {dtype} elements")]
    Ragged {
        /// The sender.
        from: String,
        /// The link.
        link: String,
        /// The message's length in bytes.
        bytes: usize,
        /// The element type expected.
        dtype: schedule_ir::DType,
    },
    /// A message is addressed to a node that has no endpoint (not a compute node).
    #[error("no endpoint for {peer}: it is not a compute node of this machine")]
    NoPeer {
        /// The node addressed.
        peer: String,
    },
}

fn last_seen(step: Option<StepId>) -> String {
    match step {
        Some(step) => format!("last seen in {step}"),
        None => "before its first step".to_string(),
    }
}

fn more(missing: usize) -> String {
    match missing {
        0 | 1 => String::new(),
        2 => " and 1 more".to_string(),
        n => format!(" and {} more", n - 1),
    }
}

/// What travels between endpoints.
enum Packet {
    /// A message of run `epoch` (see [`Endpoint`]), as bytes.
    Data {
        epoch: u64,
        key: MessageKey,
        bytes: Vec<u8>,
    },
    /// The sender's endpoint was dropped; it will send nothing more.
    Gone {
        from: NodeId,
        last_step: Option<StepId>,
    },
}

/// Names for error messages, shared by every endpoint of a run.
#[derive(Debug)]
struct Names {
    nodes: Vec<String>,
    links: Vec<String>,
}

impl Names {
    fn node(&self, id: NodeId) -> String {
        self.nodes
            .get(id.index())
            .cloned()
            .unwrap_or_else(|| id.to_string())
    }

    fn link(&self, id: schedule_ir::LinkId) -> String {
        self.links
            .get(id.index())
            .cloned()
            .unwrap_or_else(|| id.to_string())
    }
}

/// One compute node's end of a threaded run: a [`Transport`] for every element type.
///
/// An endpoint may run several phases (or the same phase several times) in a row: each time a
/// step number does not exceed the previous one, a new run begins, and messages are told apart
/// by run as well as by key. After an exchange has failed, drop the endpoint: its peers have
/// failed too.
pub struct Endpoint {
    node: NodeId,
    names: Arc<Names>,
    /// Senders to every node's inbox, indexed by [`NodeId`]; `None` for switches and this node.
    peers: Vec<Option<Sender<Packet>>>,
    inbox: Receiver<Packet>,
    /// Messages of later steps (or runs) that arrived early: `(epoch, key, bytes)`.
    early: Vec<(u64, MessageKey, Vec<u8>)>,
    /// For each node that has gone away, the last step it exchanged in.
    gone: Vec<Option<Option<StepId>>>,
    /// The nodes that have gone away, in the order their notices arrived.
    gone_order: Vec<NodeId>,
    epoch: u64,
    last_step: Option<StepId>,
    timeout: Duration,
    /// `last_step + 1`, or 0: read by [`Threaded::run_nodes`] to say where a panicking node was.
    progress: Arc<AtomicU64>,
}

impl fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Endpoint")
            .field("node", &self.names.node(self.node))
            .field("timeout", &self.timeout)
            .field("last_step", &self.last_step)
            .finish_non_exhaustive()
    }
}

impl Endpoint {
    /// The node this endpoint belongs to.
    pub fn node(&self) -> NodeId {
        self.node
    }

    /// Starts step `step`: a new run if the step does not follow the last one.
    fn enter(&mut self, step: StepId) {
        if self.last_step.is_some_and(|last| step <= last) {
            self.epoch += 1;
        }
        self.last_step = Some(step);
        self.progress
            .store(u64::from(step.0) + 1, Ordering::Relaxed);
    }

    /// Files one packet: data for now goes to `now`, data for later to `early`, notices of
    /// departure to `gone`.
    fn file(&mut self, packet: Packet, step: StepId, now: &mut Vec<(MessageKey, Vec<u8>)>) {
        match packet {
            Packet::Data { epoch, key, bytes } => {
                if (epoch, key.step) > (self.epoch, step) {
                    self.early.push((epoch, key, bytes));
                } else {
                    // This step's, or a stale one the executor will refuse as unexpected.
                    now.push((key, bytes));
                }
            }
            Packet::Gone { from, last_step } => {
                if let Some(cell) = self.gone.get_mut(from.index()) {
                    if cell.is_none() {
                        self.gone_order.push(from);
                    }
                    *cell = Some(last_step);
                }
            }
        }
    }

    /// The departure to report when the node cannot go on without `peer`: the first departure
    /// this node learned of (the closest it can see to the cause — when one node fails, its
    /// peers fail after it), which is `peer`'s if no other came before.
    fn peer_gone(&self, peer: NodeId) -> ThreadedError {
        let peer = self.gone_order.first().copied().unwrap_or(peer);
        ThreadedError::PeerGone {
            peer: self.names.node(peer),
            last_step: self.gone.get(peer.index()).copied().flatten().flatten(),
        }
    }

    /// Files every packet already waiting, without blocking.
    fn drain(&mut self, step: StepId, now: &mut Vec<(MessageKey, Vec<u8>)>) {
        loop {
            match self.inbox.try_recv() {
                Ok(packet) => self.file(packet, step, now),
                Err(TryRecvError::Empty | TryRecvError::Disconnected) => return,
            }
        }
    }
}

impl<T: Element> Transport<T> for Endpoint {
    type Error = ThreadedError;

    fn exchange(
        &mut self,
        step: StepId,
        outgoing: Vec<Message<T>>,
        expected: &[Expected],
    ) -> Result<Vec<Message<T>>, ThreadedError> {
        self.enter(step);
        let mut now: Vec<(MessageKey, Vec<u8>)> = Vec::new();
        for message in outgoing {
            let to = message.key.to;
            let Some(peer) = self.peers.get(to.index()).and_then(Option::as_ref) else {
                return Err(ThreadedError::NoPeer {
                    peer: self.names.node(to),
                });
            };
            let mut bytes = Vec::new();
            T::write_le_bytes(&message.data, &mut bytes);
            let packet = Packet::Data {
                epoch: self.epoch,
                key: message.key,
                bytes,
            };
            if peer.send(packet).is_err() {
                // The peer's inbox is gone; its notice of departure came before (see Drop).
                self.drain(step, &mut now);
                return Err(self.peer_gone(to));
            }
        }
        let (current, later): (Vec<_>, Vec<_>) = std::mem::take(&mut self.early)
            .into_iter()
            .partition(|(epoch, key, _)| (*epoch, key.step) <= (self.epoch, step));
        self.early = later;
        now.extend(current.into_iter().map(|(_, key, bytes)| (key, bytes)));
        let deadline = Instant::now() + self.timeout;
        loop {
            let missing: Vec<&Expected> = expected
                .iter()
                .filter(|e| !now.iter().any(|(key, _)| *key == e.key))
                .collect();
            let Some(first) = missing.first() else { break };
            // A peer that has gone away sent everything it ever will before its notice.
            if let Some(e) = missing.iter().find(|e| {
                self.gone
                    .get(e.key.from.index())
                    .is_some_and(Option::is_some)
            }) {
                return Err(self.peer_gone(e.key.from));
            }
            let left = deadline.saturating_duration_since(Instant::now());
            match self.inbox.recv_timeout(left) {
                Ok(packet) => self.file(packet, step, &mut now),
                Err(RecvTimeoutError::Timeout) => {
                    return Err(ThreadedError::Timeout {
                        timeout: self.timeout,
                        from: self.names.node(first.key.from),
                        link: self.names.link(first.key.link),
                        missing: missing.len(),
                    })
                }
                // Every sender is dropped only after its notice, so this is only reached when
                // every peer has left without one reaching us.
                Err(RecvTimeoutError::Disconnected) => return Err(self.peer_gone(first.key.from)),
            }
        }
        now.into_iter()
            .map(|(key, bytes)| {
                let mut data = Vec::with_capacity(bytes.len() / std::mem::size_of::<T>().max(1));
                if T::read_le_bytes(&bytes, &mut data) {
                    Ok(Message { key, data })
                } else {
                    Err(ThreadedError::Ragged {
                        from: self.names.node(key.from),
                        link: self.names.link(key.link),
                        bytes: bytes.len(),
                        dtype: T::DTYPE,
                    })
                }
            })
            .collect()
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        // Tell every peer before the inbox goes: a peer that then fails to send to this node
        // finds the notice in its own inbox.
        for peer in self.peers.iter().flatten() {
            // A peer that has gone already cannot be told; nothing to do.
            let _ = peer.send(Packet::Gone {
                from: self.node,
                last_step: self.last_step,
            });
        }
    }
}

/// A threaded in-process run: its receive timeout. See the [module doc](self).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Threaded {
    /// How long one exchange waits for its expected messages before it fails.
    pub timeout: Duration,
}

impl Default for Threaded {
    fn default() -> Self {
        Threaded {
            timeout: DEFAULT_TIMEOUT,
        }
    }
}

impl Threaded {
    /// A run whose exchanges wait at most `timeout` for their messages.
    pub fn new(timeout: Duration) -> Self {
        Threaded { timeout }
    }

    /// One endpoint per compute node of `schedule`'s machine, in node order, all connected.
    pub fn endpoints(&self, schedule: &VerifiedSchedule) -> Vec<Endpoint> {
        self.endpoints_with_progress(schedule)
            .into_iter()
            .map(|(endpoint, _)| endpoint)
            .collect()
    }

    fn endpoints_with_progress(
        &self,
        schedule: &VerifiedSchedule,
    ) -> Vec<(Endpoint, Arc<AtomicU64>)> {
        let machine = &schedule.schedule().machine;
        let names = Arc::new(Names {
            nodes: machine.nodes.iter().map(|n| n.name.clone()).collect(),
            links: machine.links.iter().map(|l| l.name.clone()).collect(),
        });
        let compute: Vec<NodeId> = machine.compute_nodes().collect();
        let mut senders: Vec<Option<Sender<Packet>>> = vec![None; machine.nodes.len()];
        let mut inboxes = Vec::with_capacity(compute.len());
        for &node in &compute {
            let (tx, rx) = channel();
            if let Some(cell) = senders.get_mut(node.index()) {
                *cell = Some(tx);
            }
            inboxes.push(rx);
        }
        compute
            .iter()
            .zip(inboxes)
            .map(|(&node, inbox)| {
                let mut peers = senders.clone();
                if let Some(me) = peers.get_mut(node.index()) {
                    *me = None;
                }
                let progress = Arc::new(AtomicU64::new(0));
                let endpoint = Endpoint {
                    node,
                    names: Arc::clone(&names),
                    peers,
                    inbox,
                    early: Vec::new(),
                    gone: vec![None; machine.nodes.len()],
                    gone_order: Vec::new(),
                    epoch: 0,
                    last_step: None,
                    timeout: self.timeout,
                    progress: Arc::clone(&progress),
                };
                (endpoint, progress)
            })
            .collect()
    }

    /// Runs the phase called `phase` with one thread per compute node. `inputs[i]` is the
    /// vector of the `i`-th compute node in [`NodeId`] order, as for
    /// [`run_phase`](crate::run_phase); so is the result.
    ///
    /// On failure, returns the error that explains it best: a node's own error (a panic, a
    /// message of the wrong size, …) before a timeout, and a timeout before a peer's departure
    /// (which is usually the consequence of another failure); among equals, the first node's.
    pub fn run<T: Element>(
        &self,
        schedule: &VerifiedSchedule,
        phase: &str,
        inputs: Vec<Vec<T>>,
    ) -> Result<Vec<Vec<T>>, Error> {
        let outcomes = self.run_nodes(schedule, phase, inputs, |node, data, mut endpoint| {
            NodeExecutor::<T>::new(schedule, phase, node)?.run(data, &mut endpoint)
        })?;
        let mut results = Vec::with_capacity(outcomes.len());
        let mut worst: Option<Error> = None;
        for outcome in outcomes {
            match outcome {
                Ok(data) => results.push(data),
                Err(e) => {
                    if worst.as_ref().is_none_or(|w| rank(&e) < rank(w)) {
                        worst = Some(e);
                    }
                }
            }
        }
        match worst {
            Some(e) => Err(e),
            None => Ok(results),
        }
    }

    /// Runs `node_main` on one thread per compute node, each with its node, its vector
    /// (`inputs[i]` for the `i`-th compute node) and its [`Endpoint`], and returns every node's
    /// outcome in node order: its vector as `node_main` left it, or its error. A panic in
    /// `node_main` becomes that node's [`Error::Panicked`]; its endpoint is dropped on the way,
    /// so its peers fail with [`ThreadedError::PeerGone`].
    ///
    /// Fails before starting if `phase` does not exist or `inputs` has the wrong length.
    pub fn run_nodes<T, F>(
        &self,
        schedule: &VerifiedSchedule,
        phase: &str,
        inputs: Vec<Vec<T>>,
        node_main: F,
    ) -> Result<Vec<Result<Vec<T>, Error>>, Error>
    where
        T: Element,
        F: Fn(NodeId, &mut [T], Endpoint) -> Result<(), Error> + Sync,
    {
        let p = plan::find_phase(schedule.schedule(), phase)?;
        let endpoints = self.endpoints_with_progress(schedule);
        if inputs.len() != endpoints.len() {
            return Err(Error::WrongBufferCount {
                phase: p.name.clone(),
                expected: endpoints.len(),
                found: inputs.len(),
            });
        }
        let machine = &schedule.schedule().machine;
        let node_main = &node_main;
        Ok(std::thread::scope(|scope| {
            let handles: Vec<_> = endpoints
                .into_iter()
                .zip(inputs)
                .map(|((endpoint, progress), mut data)| {
                    let node = endpoint.node();
                    let handle = scope.spawn(move || {
                        let result =
                            catch_unwind(AssertUnwindSafe(|| node_main(node, &mut data, endpoint)));
                        match result {
                            Ok(Ok(())) => Ok(data),
                            Ok(Err(e)) => Err(e),
                            Err(payload) => {
                                Err(panicked(&p.name, machine, node, &progress, &*payload))
                            }
                        }
                    });
                    (node, handle)
                })
                .collect();
            handles
                .into_iter()
                .map(|(node, handle)| {
                    // The thread catches its own panic; a failed join is reported all the same.
                    handle.join().unwrap_or_else(|payload| {
                        Err(Error::Panicked {
                            phase: p.name.clone(),
                            node: machine.node_name(node),
                            last_step: None,
                            message: panic_message(&*payload),
                        })
                    })
                })
                .collect()
        }))
    }
}

fn panicked(
    phase: &str,
    machine: &schedule_ir::Machine,
    node: NodeId,
    progress: &AtomicU64,
    payload: &(dyn Any + Send),
) -> Error {
    let reached = progress.load(Ordering::Relaxed);
    Error::Panicked {
        phase: phase.to_string(),
        node: machine.node_name(node),
        last_step: reached
            .checked_sub(1)
            .and_then(|s| u32::try_from(s).ok())
            .map(StepId),
        message: panic_message(payload),
    }
}

fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "(a panic without a message)".to_string()
    }
}

/// How well an error explains a failed run: lower is better.
fn rank(e: &Error) -> u8 {
    let Error::Transport { cause, .. } = e else {
        return 0;
    };
    match cause.downcast_ref::<ThreadedError>() {
        Some(ThreadedError::PeerGone { .. }) => 3,
        Some(ThreadedError::Timeout { .. }) => 2,
        _ => 1,
    }
}
