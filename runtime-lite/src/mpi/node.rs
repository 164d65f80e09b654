//! [`MpiNode`]: the embedding API for a BSP node-level program under MPI — this process's node
//! of a verified schedule, its phases run by name.

use super::agree::{agree_phase, agree_schedule, PhaseTerms, Setup};
use super::transport::{tag_ub, MpiTransport, DEFAULT_TIMEOUT};
use super::wire::{no_device_programs, rank_node, tag_space, Wire};
use super::{MpiElement, MpiError};
use crate::budget::Limits;
use crate::buffer::AnyBuffer;
use crate::digest::{Digest, ScheduleDigest};
use crate::error::Error;
use crate::exec::NodeExecutor;
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
    /// A second duplicate, for agreeing on a phase before its first message: nothing else
    /// travels on it, so those words can never be taken for a step's message.
    agreement: SimpleCommunicator,
    /// The compute nodes' names, by rank.
    names: Vec<String>,
    schedule: VerifiedSchedule,
    node: NodeId,
    rank: usize,
    tag_ub: i32,
    timeout: Option<Duration>,
    limits: Limits,
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
        let checked = rank_node(machine, rank, size).and_then(|node| {
            tag_space(schedule.schedule(), tag_ub)?;
            no_device_programs(schedule.schedule(), None)?;
            Ok(node)
        });
        let digest = ScheduleDigest::of(schedule.schedule());
        let name = checked
            .as_ref()
            .map_or_else(|_| format!("rank {rank}"), |&n| machine.node_name(n));
        let agreed = agree_schedule(comm, checked.is_ok(), &digest, &name);
        let node = checked?;
        match agreed {
            Setup::Agreed => {}
            Setup::PeerFailed => return Err(MpiError::PeerSetup.into()),
            Setup::Mismatch(e) => return Err(e.into()),
        }
        let names = machine
            .compute_nodes()
            .map(|n| machine.node_name(n))
            .collect();
        Ok(MpiNode {
            comm: comm.duplicate(),
            agreement: comm.duplicate(),
            names,
            schedule,
            node,
            rank,
            tag_ub,
            timeout: Some(DEFAULT_TIMEOUT),
            limits: Limits::default(),
            phases: HashMap::new(),
        })
    }

    /// Runs the phase called `phase` on this node's `data`: the node's program, step by step,
    /// its messages exchanged with the peers' ranks. Every rank must run the same phase.
    /// `phase` may name a banded exchange: the band that holds `data`'s size in bytes runs,
    /// re-cut to `data`'s length and verified again ([`crate::bands::select`]), and is kept
    /// for the next run of that length.
    ///
    /// Fails — on this rank; the others then fail after the timeout, or earlier if they
    /// check the same thing — if there is no such phase (or no band for the size), if it is
    /// compiled for another element type or `data` has the wrong length, if a message arrives
    /// with the wrong size, or if a peer does not send or take a message within the timeout.
    pub fn run<T: MpiElement>(&mut self, phase: &str, data: &mut [T]) -> Result<(), Error> {
        let banded = self.schedule.schedule().bands(phase).is_some();
        // A banded exchange's executor depends on the size: one per element type and length.
        let key = if banded {
            format!("{phase} ({} × {})", data.len(), T::DTYPE)
        } else {
            phase.to_string()
        };
        let ready = self
            .phases
            .get(&key)
            .is_some_and(|slot| slot.executor.is::<NodeExecutor<T>>());
        if !ready {
            self.prepare::<T>(phase, &key, banded, data.len())?;
        }
        let slot = self
            .phases
            .get_mut(&key)
            .ok_or_else(|| internal(phase, "the phase was not prepared"))?;
        let executor = slot
            .executor
            .downcast_mut::<NodeExecutor<T>>()
            .ok_or_else(|| internal(phase, "the cached executor has another element type"))?;
        let mut transport =
            MpiTransport::from_wire(&self.comm, Arc::clone(&slot.wire), self.timeout);
        executor.run(data, &mut transport)
    }

    /// The first run of `phase` with element type `T` on a buffer of `len` elements (kept
    /// under `key`): plans the phase — for a banded exchange, the band of that size — within
    /// the limits, and agrees with every other rank on the phase, the element type and the
    /// length before any message. Every rank takes part even if its own checks fail, so that
    /// the others learn of it at once; its own error comes first.
    fn prepare<T: MpiElement>(
        &mut self,
        phase: &str,
        key: &str,
        banded: bool,
        len: usize,
    ) -> Result<(), Error> {
        let local = (|| {
            let sized = if banded {
                Some(crate::bands::select(
                    &self.schedule,
                    phase,
                    T::DTYPE,
                    len as u64,
                )?)
            } else {
                None
            };
            let (verified, name) = match &sized {
                Some(sized) => (sized.schedule(), sized.phase().name.as_str()),
                None => (&self.schedule, phase),
            };
            let schedule = verified.schedule();
            let wire = match self.phases.get(key) {
                Some(slot) => Arc::clone(&slot.wire),
                None => Arc::new(Wire::new(
                    schedule,
                    name,
                    self.rank,
                    usize::try_from(self.comm.size()).unwrap_or(0),
                    self.tag_ub,
                )?),
            };
            let executor = NodeExecutor::<T>::with_limits(verified, name, self.node, &self.limits)?;
            executor.check_len(len)?;
            let elements = schedule.phase(name).map_or(0, |p| p.elements);
            Ok::<_, Error>((wire, executor, elements))
        })();
        let elements = match &local {
            Ok((_, _, elements)) => *elements,
            Err(_) => self
                .schedule
                .schedule()
                .phase(phase)
                .map_or(0, |p| p.elements),
        };
        let terms = PhaseTerms {
            ok: local.is_ok(),
            name: Digest::of(phase.as_bytes()),
            dtype: T::DTYPE,
            elements,
            len: len as u64,
        };
        let agreed = agree_phase(&self.agreement, phase, &terms, &self.names, self.timeout);
        let (wire, executor, _) = local?;
        agreed?;
        self.phases.insert(
            key.to_string(),
            Slot {
                wire,
                executor: Box::new(executor),
            },
        );
        Ok(())
    }

    /// Sets the limits a phase's run must stay within (see [`Limits`]); they apply to phases
    /// not run yet. The default is [`Limits::default`].
    pub fn set_limits(&mut self, limits: Limits) {
        self.limits = limits;
    }

    /// [`MpiNode::run`] on a dtype-erased buffer.
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

/// An error that the node's own bookkeeping makes impossible; reported rather than panicking.
fn internal(phase: &str, detail: &str) -> Error {
    Error::Malformed {
        phase: phase.to_string(),
        location: "the MPI node".into(),
        detail: format!("internal error: {detail}"),
    }
}
