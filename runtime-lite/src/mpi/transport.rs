//! [`MpiTransport`]: one step's messages as MPI point-to-point messages — non-blocking sends,
//! probed receives, a deadline on both.

use super::error::MpiError;
use super::wire::{Address, Wire, MIN_TAG_UB};
use super::MpiElement;
use crate::error::Error;
use crate::transport::{Expected, Message, Transport};
use mpi::attribute::{AttributeKey, CommAttribute};
use mpi::datatype::Equivalence;
use mpi::point_to_point::{MatchedReceiveVec, Status};
use mpi::request::{Request, Scope};
use mpi::topology::{AnyCommunicator, Communicator};
use mpi::traits::{Destination, Source};
use schedule_ir::{NodeId, StepId, VerifiedSchedule};
use std::os::raw::c_int;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a step waits for its messages, and for its sends to be taken, by default.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);

/// The [`Transport`] of one phase over MPI: this process runs the compute node whose position
/// among the machine's compute nodes is its rank, and every message goes point to point to
/// the peer's rank with a tag derived from the phase, step, link, direction and lane (see the
/// [module doc](super)).
///
/// All ranks of the communicator must run the same schedule; the communicator should carry no
/// other point-to-point traffic with the same tags ([`super::MpiNode`] uses a duplicate of
/// the one it is given, so it never does).
#[derive(Debug)]
pub struct MpiTransport<'c, C: Communicator> {
    comm: &'c C,
    wire: Arc<Wire>,
    timeout: Option<Duration>,
}

impl<'c, C: Communicator> MpiTransport<'c, C> {
    /// Prepares this process's node to exchange the messages of phase `phase` over `comm`.
    /// Fails if there is no such phase, if the communicator's size differs from the number of
    /// compute nodes, or if the machine needs more tags per step than the MPI library has.
    pub fn new(comm: &'c C, schedule: &VerifiedSchedule, phase: &str) -> Result<Self, Error> {
        let wire = Wire::new(
            schedule.schedule(),
            phase,
            usize::try_from(comm.rank()).unwrap_or(usize::MAX),
            usize::try_from(comm.size()).unwrap_or(0),
            tag_ub(comm),
        )?;
        Ok(Self::from_wire(comm, Arc::new(wire), Some(DEFAULT_TIMEOUT)))
    }

    pub(crate) fn from_wire(comm: &'c C, wire: Arc<Wire>, timeout: Option<Duration>) -> Self {
        MpiTransport {
            comm,
            wire,
            timeout,
        }
    }

    /// The same transport with another deadline for each step (`None`: wait for ever, as MPI
    /// does).
    pub fn with_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.timeout = timeout;
        self
    }

    /// The compute node this process runs.
    pub fn node(&self) -> NodeId {
        self.wire.node
    }
}

/// `MPI_TAG_UB` of the communicator, or the least value the standard guarantees if the
/// library does not say.
pub(crate) fn tag_ub<C: Communicator>(comm: &C) -> i32 {
    comm.get_attr::<TagUb>()
        .map(|t| t.0)
        .filter(|&t| t > 0)
        .unwrap_or(MIN_TAG_UB)
}

/// The predefined attribute `MPI_TAG_UB`: a pointer to an `int`.
#[repr(C)]
#[derive(Clone)]
struct TagUb(c_int);

impl CommAttribute for TagUb {
    fn get_key() -> AttributeKey {
        // SAFETY: `MPI_TAG_UB` is a predefined attribute key; it is never freed.
        unsafe { AttributeKey::new_unchecked(mpi::ffi::MPI_TAG_UB as i32) }
    }
}

impl<T: MpiElement, C: Communicator> Transport<T> for MpiTransport<'_, C> {
    type Error = MpiError;

    /// Posts a non-blocking send per outgoing message, then polls for the expected messages
    /// (probing each one's size before receiving it), then waits for the sends to be taken,
    /// all before the deadline. On failure, sends not yet taken are abandoned to MPI and their
    /// buffers leaked, so the step returns at once and nothing MPI may still read is freed.
    fn exchange(
        &mut self,
        _step: StepId,
        outgoing: Vec<Message<T>>,
        expected: &[Expected],
    ) -> Result<Vec<Message<T>>, MpiError> {
        let wire = &*self.wire;
        if let Some(m) = outgoing.iter().find(|m| m.data.len() > i32::MAX as usize) {
            return Err(MpiError::TooLarge {
                phase: wire.phase.clone(),
                elements: m.data.len(),
            });
        }
        let to = wire.outgoing(outgoing.iter().map(|m| &m.key))?;
        let from = wire.incoming(expected.iter().map(|e| &e.key))?;
        let deadline = Deadline::new(self.timeout);
        let comm = self.comm;
        let (keys, buffers): (Vec<_>, Vec<_>) = outgoing
            .into_iter()
            .map(|m| (m.key, T::into_wire(m.data)))
            .unzip();
        let mut incoming = Vec::with_capacity(expected.len());
        let mut abandoned = false;
        let result = mpi::request::scope(|scope| {
            let mut sends: Sends<'_, T::Wire, _> = buffers
                .iter()
                .zip(&to)
                .enumerate()
                .map(|(i, (data, a))| {
                    let peer = comm.process_at_rank(a.rank);
                    (i, peer.immediate_send_with_tag(scope, &data[..], a.tag))
                })
                .collect();
            let mut result = receive_all(comm, wire, expected, &from, &deadline, &mut sends)
                .map(|received| incoming = received);
            if result.is_ok() {
                result = complete(&mut sends, &deadline).map_err(|i| {
                    let (key, address) = (keys.get(i), to.get(i));
                    MpiError::SendTimeout {
                        peer: key.map_or_else(String::new, |k| wire.node_name(k.to)),
                        rank: address.map_or(-1, |a| a.rank),
                        link: key.map_or_else(String::new, |k| wire.link_name(k.link)),
                        tag: address.map_or(-1, |a| a.tag),
                        waited: deadline.waited(),
                    }
                });
            }
            // Sends still pending after a failure are left to MPI: cancelling them is not
            // reliably local (MPICH over UCX waits for the peer), so this step does not wait.
            abandoned = !sends.is_empty();
            for (_, request) in sends {
                abandon(request);
            }
            result
        });
        if abandoned {
            // MPI may still read these buffers: they must never be freed.
            std::mem::forget(buffers);
        }
        result.map(|()| incoming)
    }
}

/// Gives up on a request that may never complete: takes it out of its scope and leaves it to
/// MPI. The caller must then never free the request's buffer.
pub(crate) fn abandon<'a, D: ?Sized, S: Scope<'a>>(request: Request<'a, D, S>) {
    // SAFETY: `into_raw` requires the request to complete while its buffer lives; the only
    // caller leaks the buffers (`mem::forget`) whenever it abandons a request, so they live
    // for ever.
    let _raw = unsafe { request.into_raw() };
}

/// A deadline, or none.
pub(crate) struct Deadline {
    start: Instant,
    timeout: Option<Duration>,
}

impl Deadline {
    pub(crate) fn new(timeout: Option<Duration>) -> Self {
        Deadline {
            start: Instant::now(),
            timeout,
        }
    }

    pub(crate) fn passed(&self) -> bool {
        self.timeout.is_some_and(|t| self.start.elapsed() >= t)
    }

    pub(crate) fn waited(&self) -> Duration {
        self.start.elapsed()
    }
}

/// The sends of a step still in flight, each with its index among the step's messages.
type Sends<'a, W, S> = Vec<(usize, Request<'a, [W], S>)>;

/// Polls until every expected message has been received, keeping the sends moving meanwhile.
fn receive_all<'a, T, C, S>(
    comm: &C,
    wire: &Wire,
    expected: &[Expected],
    from: &[Address],
    deadline: &Deadline,
    sends: &mut Sends<'a, T::Wire, S>,
) -> Result<Vec<Message<T>>, MpiError>
where
    T: MpiElement,
    C: Communicator,
    S: Scope<'a>,
{
    let mut incoming = Vec::with_capacity(expected.len());
    let mut waiting: Vec<usize> = (0..expected.len()).collect();
    while !waiting.is_empty() {
        let mut progressed = false;
        let mut i = 0;
        while let Some(&e) = waiting.get(i) {
            let (Some(exp), Some(address)) = (expected.get(e), from.get(e)) else {
                waiting.swap_remove(i);
                continue;
            };
            let source = comm.process_at_rank(address.rank);
            match source.immediate_matched_probe_with_tag(address.tag) {
                Some(probed) => {
                    let data = receive::<T>(probed).map_err(|bytes| MpiError::Ragged {
                        peer: wire.node_name(exp.key.from),
                        rank: address.rank,
                        link: wire.link_name(exp.key.link),
                        bytes,
                        size: T::DTYPE.size_bytes(),
                    })?;
                    incoming.push(Message { key: exp.key, data });
                    waiting.swap_remove(i);
                    progressed = true;
                }
                None => i += 1,
            }
        }
        if progressed || waiting.is_empty() {
            continue;
        }
        // Most MPI libraries move the sends along inside the probes; testing them does it in
        // the others, and frees the buffers of those already taken.
        test_all(sends);
        if deadline.passed() {
            let e = waiting.first().copied().unwrap_or(0);
            let (key, address) = (expected.get(e).map(|x| x.key), from.get(e));
            return Err(MpiError::ReceiveTimeout {
                peer: key.map_or_else(String::new, |k| wire.node_name(k.from)),
                rank: address.map_or(-1, |a| a.rank),
                link: key.map_or_else(String::new, |k| wire.link_name(k.link)),
                tag: address.map_or(-1, |a| a.tag),
                waited: deadline.waited(),
            });
        }
        std::thread::yield_now();
    }
    Ok(incoming)
}

/// Receives a probed message whole, whatever its size: as elements if it is a whole number
/// of them, else as bytes, returning its size in bytes as the error.
fn receive<T: MpiElement>(probed: (mpi::point_to_point::Message, Status)) -> Result<Vec<T>, i64> {
    let bytes = probed.1.count(u8::equivalent_datatype());
    let size = T::DTYPE.size_bytes();
    if u64::try_from(bytes).is_ok_and(|b| b % size == 0) {
        Ok(T::from_wire(probed.matched_receive_vec::<T::Wire>().0))
    } else {
        // The count in bytes is always defined, so the message can be taken as bytes.
        let _ = probed.matched_receive_vec::<u8>();
        Err(i64::from(bytes))
    }
}

/// Tests every pending request once, dropping those that completed.
fn test_all<'a, D: ?Sized, S: Scope<'a>>(requests: &mut Vec<(usize, Request<'a, D, S>)>) {
    let pending = std::mem::take(requests);
    for (i, request) in pending {
        if let Err(request) = request.test() {
            requests.push((i, request));
        }
    }
}

/// Waits until every request completed, or until the deadline; then returns the index of a
/// request still pending.
fn complete<'a, D: ?Sized, S: Scope<'a>>(
    requests: &mut Vec<(usize, Request<'a, D, S>)>,
    deadline: &Deadline,
) -> Result<(), usize> {
    loop {
        test_all(requests);
        match requests.first() {
            None => return Ok(()),
            Some(&(i, _)) if deadline.passed() => return Err(i),
            Some(_) => std::thread::yield_now(),
        }
    }
}
