//! [`MpiNode`]: the embedding API for a BSP node-level program under MPI — this process's node
//! of a verified schedule, its phases run by name.

use super::transport::{tag_ub, MpiTransport, DEFAULT_TIMEOUT};
use super::wire::{rank_node, tag_space, Wire};
use super::{MpiElement, MpiError};
use crate::buffer::AnyBuffer;
use crate::error::Error;
use crate::exec::NodeExecutor;
use mpi::collective::SystemOperation;
use mpi::topology::{Communicator, SimpleCommunicator};
use mpi::traits::CommunicatorCollectives;
use schedule_ir::{NodeId, VerifiedSchedule};
use std::any::Any;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// This process's compute node of a schedule, over MPI: build it once on every rank, then
/// call [`MpiNode::run`] with the phase's name and this node's buffer wherever the BSP program
/// reaches an exchange phase.
///
/// Rank `i` of the communicator runs the `i`-th compute node of the machine, in node order
/// (switches have no rank). The node keeps a duplicate of the communicator for its own
/// messages, so the program may use the original for anything else; and it keeps, per phase,
/// the executor and the tag plan, so running a phase again allocates nothing new.
///
/// ```no_run
/// # fn demo(text: &str) -> Result<(), runtime_lite::Error> {
/// use runtime_lite::mpi::MpiNode;
/// let universe = mpi::initialize().expect("MPI is initialised once");
/// let mut node = MpiNode::new(&universe.world(), runtime_lite::load(text)?)?;
/// let mut grads = vec![0.0f32; 1 << 20];
/// for _ in 0..10 {
///     // … compute this node's grads …
///     node.barrier();
///     node.run("grads", &mut grads)?; // every node now holds the sum
/// }
/// # Ok(()) }
/// ```
pub struct MpiNode {
    comm: SimpleCommunicator,
    schedule: VerifiedSchedule,
    node: NodeId,
    rank: usize,
    tag_ub: i32,
    timeout: Option<Duration>,
    phases: HashMap<String, Slot>,
}

/// What a phase keeps between runs.
struct Slot {
    wire: Arc<Wire>,
    /// A `NodeExecutor<T>` for the phase's element type.
    executor: Box<dyn Any>,
}

impl std::fmt::Debug for MpiNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MpiNode")
            .field("node", &self.node)
            .field("rank", &self.rank)
            .field("tag_ub", &self.tag_ub)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl MpiNode {
    /// Takes this process's node of `schedule`: the compute node whose position is this
    /// process's rank in `comm`. Collective: every rank of `comm` must call it (it agrees with
    /// the others on whether all can go on, then duplicates the communicator).
    ///
    /// Fails if `comm` has a different number of ranks than the machine has compute nodes, or
    /// if the machine needs more MPI tags per step than the library has. If one rank fails
    /// (given another schedule, say), every rank fails — with [`MpiError::PeerSetup`] where
    /// its own checks passed — and none is left waiting in the duplication.
    pub fn new<C: Communicator>(comm: &C, schedule: VerifiedSchedule) -> Result<Self, Error> {
        let size = usize::try_from(comm.size()).unwrap_or(0);
        let rank = usize::try_from(comm.rank()).unwrap_or(usize::MAX);
        let tag_ub = tag_ub(comm);
        let machine = &schedule.schedule().machine;
        let checked = rank_node(machine, rank, size)
            .and_then(|node| tag_space(machine, tag_ub).map(|_| node));
        let mut failed_somewhere = 0i32;
        comm.all_reduce_into(
            &i32::from(checked.is_err()),
            &mut failed_somewhere,
            SystemOperation::max(),
        );
        let node = checked?;
        if failed_somewhere != 0 {
            return Err(MpiError::PeerSetup.into());
        }
        Ok(MpiNode {
            comm: comm.duplicate(),
            schedule,
            node,
            rank,
            tag_ub,
            timeout: Some(DEFAULT_TIMEOUT),
            phases: HashMap::new(),
        })
    }

    /// Runs the phase called `phase` on this node's `data`: the node's program, step by step,
    /// its messages exchanged with the peers' ranks. Every rank must run the same phase.
    ///
    /// Fails — on this rank; the others then fail after the timeout, or earlier if they
    /// check the same thing — if there is no such phase, if it is compiled for another element
    /// type or `data` has the wrong length, if a message arrives with the wrong size, or if a
    /// peer does not send or take a message within the timeout.
    pub fn run<T: MpiElement>(&mut self, phase: &str, data: &mut [T]) -> Result<(), Error> {
        let slot = match self.phases.get_mut(phase) {
            Some(slot) => slot,
            None => {
                let wire = Wire::new(
                    self.schedule.schedule(),
                    phase,
                    self.rank,
                    usize::try_from(self.comm.size()).unwrap_or(0),
                    self.tag_ub,
                )?;
                let executor = NodeExecutor::<T>::new(&self.schedule, phase, self.node)?;
                self.phases
                    .entry(phase.to_string())
                    .or_insert_with(|| Slot {
                        wire: Arc::new(wire),
                        executor: Box::new(executor),
                    })
            }
        };
        if !slot.executor.is::<NodeExecutor<T>>() {
            // The phase ran before with another element type; this refuses `T` if the phase
            // is not compiled for it.
            slot.executor = Box::new(NodeExecutor::<T>::new(&self.schedule, phase, self.node)?);
        }
        let executor = slot
            .executor
            .downcast_mut::<NodeExecutor<T>>()
            .ok_or_else(|| Error::Malformed {
                phase: phase.to_string(),
                location: "the MPI node".into(),
                detail: "internal error: the cached executor has another element type".into(),
            })?;
        let mut transport =
            MpiTransport::from_wire(&self.comm, Arc::clone(&slot.wire), self.timeout);
        executor.run(data, &mut transport)
    }

    /// [`MpiNode::run`] on a dtype-erased buffer.
    pub fn run_any(&mut self, phase: &str, data: &mut AnyBuffer) -> Result<(), Error> {
        match data {
            AnyBuffer::F32(v) => self.run(phase, v),
            AnyBuffer::F64(v) => self.run(phase, v),
            AnyBuffer::I32(v) => self.run(phase, v),
            AnyBuffer::I64(v) => self.run(phase, v),
        }
    }

    /// Waits until every rank has called it: the BSP barrier between a compute phase and an
    /// exchange. (A phase needs none: its matched receives order the steps.)
    pub fn barrier(&self) {
        self.comm.barrier();
    }

    /// Sets how long a step waits for a peer's message, or for a peer to take one, before it
    /// fails (`None`: wait for ever). The default is [`DEFAULT_TIMEOUT`].
    pub fn set_timeout(&mut self, timeout: Option<Duration>) {
        self.timeout = timeout;
    }

    /// The compute node this process runs.
    pub fn node(&self) -> NodeId {
        self.node
    }

    /// The name of the compute node this process runs.
    pub fn node_name(&self) -> String {
        self.schedule.schedule().machine.node_name(self.node)
    }

    /// This process's rank, which is also the node's position among the compute nodes.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// The number of ranks, which is the number of compute nodes.
    pub fn size(&self) -> usize {
        usize::try_from(self.comm.size()).unwrap_or(0)
    }

    /// The MPI library's tag upper bound (`MPI_TAG_UB`) in use.
    pub fn tag_ub(&self) -> i32 {
        self.tag_ub
    }

    /// The schedule.
    pub fn schedule(&self) -> &VerifiedSchedule {
        &self.schedule
    }

    /// The node's own communicator (a duplicate of the one it was built with).
    pub fn communicator(&self) -> &SimpleCommunicator {
        &self.comm
    }
}
