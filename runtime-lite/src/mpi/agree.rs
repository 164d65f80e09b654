//! Agreement between the ranks before anything is exchanged: on the schedule when a node is
//! set up, on the phase before its first message.
//!
//! Ranks that run different schedules, or different phases of one, would otherwise exchange
//! messages that happen to fit and return wrong data as success (a sum on one rank, a max on
//! the others, of the same machine and size). So:
//! - [`agree_schedule`] (collective, in [`MpiNode::new`](super::MpiNode::new)): every rank
//!   sends every other its setup status and the [`ScheduleDigest`] of its schedule; a rank
//!   that cannot set up stops every rank, and different digests are an error on every rank
//!   naming what differs;
//! - [`agree_phase`] (before a phase's first run on a node, and again if the element type
//!   changes): every rank sends every other the phase's name digest, element type and length
//!   and its buffer's length, by point-to-point messages with the node's timeout, on a
//!   communicator of their own — so a rank that never runs the phase is reported after the
//!   timeout instead of hanging the others in a collective.

use super::error::MpiError;
use super::transport::Deadline;
use crate::digest::{Digest, ScheduleDigest};
use mpi::point_to_point::{Destination, MatchedReceiveVec};
use mpi::request::Request;
use mpi::topology::Communicator;
use mpi::traits::{CommunicatorCollectives, Source};
use schedule_ir::DType;
use std::time::Duration;

/// Words a rank sends when agreeing on the schedule: its status, then four digests of two
/// words each.
const SETUP_WORDS: usize = 9;

/// How agreeing on the schedule ended, for this rank.
pub(crate) enum Setup {
    /// Every rank set up, with the same schedule.
    Agreed,
    /// Another rank could not set up.
    PeerFailed,
    /// Every rank set up, but the schedules differ.
    Mismatch(MpiError),
}

/// Collective: every rank of `comm` tells the others whether it could set up (`ok`) and the
/// digest of its schedule; `node` names this rank's node in messages.
pub(crate) fn agree_schedule<C: Communicator>(
    comm: &C,
    ok: bool,
    digest: &ScheduleDigest,
    node: &str,
) -> Setup {
    let size = usize::try_from(comm.size()).unwrap_or(0);
    let rank = usize::try_from(comm.rank()).unwrap_or(0);
    let mine = setup_words(ok, digest);
    let mut all = vec![0u64; size * SETUP_WORDS];
    comm.all_gather_into(&mine[..], &mut all[..]);
    let peers: Vec<(usize, &[u64])> = all.chunks(SETUP_WORDS).enumerate().collect();
    if peers.iter().any(|(_, words)| words.first() != Some(&1)) {
        return Setup::PeerFailed;
    }
    let differing = peers
        .iter()
        .map(|&(r, words)| (r, digest_of(words)))
        .find(|(_, theirs)| theirs.schedule != digest.schedule);
    match differing {
        None => Setup::Agreed,
        Some((peer, theirs)) => Setup::Mismatch(MpiError::ScheduleMismatch {
            node: node.to_string(),
            rank,
            peer,
            what: digest.difference(&theirs).unwrap_or("the schedule"),
            mine: digest.schedule,
            theirs: theirs.schedule,
        }),
    }
}

fn setup_words(ok: bool, d: &ScheduleDigest) -> [u64; SETUP_WORDS] {
    let [s0, s1] = d.schedule.words();
    let [m0, m1] = d.machine.words();
    let [n0, n1] = d.names.words();
    let [h0, h1] = d.shapes.words();
    [u64::from(ok), s0, s1, m0, m1, n0, n1, h0, h1]
}

fn digest_of(words: &[u64]) -> ScheduleDigest {
    let pair = |i: usize| {
        Digest::from_words(
            words.get(i).copied().unwrap_or(0),
            words.get(i + 1).copied().unwrap_or(0),
        )
    };
    ScheduleDigest {
        schedule: pair(1),
        machine: pair(3),
        names: pair(5),
        shapes: pair(7),
    }
}

/// What a rank says about the phase it is about to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PhaseTerms {
    /// Whether this rank can start the phase (it exists, the element type and buffer fit).
    pub ok: bool,
    /// The digest of the phase's name.
    pub name: Digest,
    /// The element type the caller runs it with.
    pub dtype: DType,
    /// The phase's element count.
    pub elements: u64,
    /// The caller's buffer length.
    pub len: u64,
}

const PHASE_WORDS: usize = 6;

impl PhaseTerms {
    fn words(&self) -> [u64; PHASE_WORDS] {
        let [n0, n1] = self.name.words();
        let dtype = match self.dtype {
            DType::F32 => 0,
            DType::F64 => 1,
            DType::I32 => 2,
            DType::I64 => 3,
            DType::F16 => 4,
            DType::BF16 => 5,
        };
        [u64::from(self.ok), n0, n1, dtype, self.elements, self.len]
    }

    fn from_words(words: &[u64]) -> Option<PhaseTerms> {
        let &[ok, n0, n1, dtype, elements, len] = words else {
            return None;
        };
        Some(PhaseTerms {
            ok: ok == 1,
            name: Digest::from_words(n0, n1),
            dtype: match dtype {
                0 => DType::F32,
                1 => DType::F64,
                2 => DType::I32,
                3 => DType::I64,
                4 => DType::F16,
                5 => DType::BF16,
                _ => return None,
            },
            elements,
            len,
        })
    }

    /// Why a peer with `theirs` cannot run the phase with this rank, or `None` if it can.
    fn conflict(&self, theirs: &PhaseTerms) -> Option<String> {
        if !theirs.ok {
            return Some(
                if theirs.len != theirs.elements && theirs.name == self.name {
                    format!(
                        "its buffer has {} elements but the phase works on {} (it reports why)",
                        theirs.len, theirs.elements
                    )
                } else {
                    "that rank could not start the phase (it reports why)".to_string()
                },
            );
        }
        if theirs.name != self.name {
            Some("that rank runs another phase".to_string())
        } else if theirs.dtype != self.dtype {
            Some(format!(
                "that rank runs it with {} elements, this one with {}",
                theirs.dtype, self.dtype
            ))
        } else if theirs.elements != self.elements {
            Some(format!(
                "that rank's phase has {} elements, this one's {}",
                theirs.elements, self.elements
            ))
        } else {
            None
        }
    }
}

/// Tells every other rank of `comm` this rank's `terms` for phase `phase` and checks theirs,
/// within `timeout`. `names` gives each rank's node name. Point to point, on a communicator
/// that carries nothing else, so it cannot be confused with a step's messages.
pub(crate) fn agree_phase<C: Communicator>(
    comm: &C,
    phase: &str,
    terms: &PhaseTerms,
    names: &[String],
    timeout: Option<Duration>,
) -> Result<(), MpiError> {
    let size = usize::try_from(comm.size()).unwrap_or(0);
    let rank = usize::try_from(comm.rank()).unwrap_or(0);
    let name = |r: usize| names.get(r).cloned().unwrap_or_else(|| format!("rank {r}"));
    // On the heap, so that it can outlive this call if a send must be abandoned.
    let words: Box<[u64]> = Box::new(terms.words());
    let deadline = Deadline::new(timeout);
    let mut abandoned = false;
    let result = mpi::request::scope(|scope| {
        let mut sends: Vec<Request<'_, [u64], _>> = (0..size)
            .filter(|&r| r != rank)
            .filter_map(|r| i32::try_from(r).ok())
            .map(|r| {
                comm.process_at_rank(r)
                    .immediate_send_with_tag(scope, &words[..], 0)
            })
            .collect();
        // Hear every peer (or wait out the deadline) before judging, so that the peer named
        // is the lowest-ranked one that conflicts, whatever the order of arrival.
        let mut conflicts: Vec<(usize, String)> = Vec::new();
        let mut waiting: Vec<usize> = (0..size).filter(|&r| r != rank).collect();
        while !waiting.is_empty() && !deadline.passed() {
            let mut i = 0;
            while let Some(&r) = waiting.get(i) {
                let probed = i32::try_from(r)
                    .ok()
                    .and_then(|r| comm.process_at_rank(r).immediate_matched_probe_with_tag(0));
                let Some(probed) = probed else {
                    i += 1;
                    continue;
                };
                waiting.swap_remove(i);
                let (theirs, _) = probed.matched_receive_vec::<u64>();
                let detail = match PhaseTerms::from_words(&theirs) {
                    Some(theirs) => terms.conflict(&theirs),
                    None => Some("that rank sent terms this rank cannot read".to_string()),
                };
                if let Some(detail) = detail {
                    conflicts.push((r, detail));
                }
            }
            std::thread::yield_now();
        }
        conflicts.sort();
        waiting.sort_unstable();
        let result = if let Some((r, detail)) = conflicts.into_iter().next() {
            Err(MpiError::PhaseMismatch {
                phase: phase.to_string(),
                node: name(rank),
                peer: name(r),
                rank: r,
                detail,
            })
        } else if let Some(&r) = waiting.first() {
            Err(MpiError::AgreeTimeout {
                phase: phase.to_string(),
                node: name(rank),
                peer: name(r),
                rank: r,
                waited: deadline.waited(),
            })
        } else {
            Ok(())
        };
        // The terms are a few words, sent eagerly: the sends complete as soon as MPI has
        // copied them. Wait for them within the deadline; past it, leave them to MPI.
        while result.is_ok() && !sends.is_empty() && !deadline.passed() {
            sends = sends.into_iter().filter_map(|s| s.test().err()).collect();
            std::thread::yield_now();
        }
        abandoned = !sends.is_empty();
        for request in sends {
            super::transport::abandon(request);
        }
        result
    });
    if abandoned {
        // MPI may still read the words: they must never be freed.
        std::mem::forget(words);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_dtype_survives_the_words_and_an_unknown_code_is_refused() {
        let dtypes = [
            DType::F32,
            DType::F64,
            DType::I32,
            DType::I64,
            DType::F16,
            DType::BF16,
        ];
        for dtype in dtypes {
            let terms = PhaseTerms {
                ok: true,
                name: Digest::from_words(1, 2),
                dtype,
                elements: 7,
                len: 7,
            };
            let back = PhaseTerms::from_words(&terms.words()).map(|t| t.dtype);
            assert_eq!(back, Some(dtype));
        }
        assert!(PhaseTerms::from_words(&[1, 1, 2, 6, 7, 7]).is_none());
    }
}
