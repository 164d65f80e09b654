//! A stable digest of a schedule, so that processes that each loaded "the same" schedule can
//! check that they did before they exchange a single message (the MPI node does).
//!
//! The digest is 128-bit FNV-1a over the schedule's canonical text: the RON that
//! [`schedule_ir::serial::to_string`] writes, which depends only on the schedule's value (the
//! same schedule read from RON or JSON, on any machine, gives the same text). FNV-1a is not
//! a cryptographic hash — it guards against mistakes (a different file, a stale copy), not
//! against an adversary — and it is a dozen lines, so no dependency is needed. Besides the
//! whole schedule's digest, [`ScheduleDigest`] keeps digests of its parts, so that a mismatch
//! can say *what* differs: the machine, the phases' names, their shapes, or their programs.

use schedule_ir::serial::{self, Format};
use schedule_ir::{Phase, Schedule};
use std::fmt;

/// A 128-bit FNV-1a digest.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Digest(pub u128);

impl Digest {
    const OFFSET: u128 = 0x6c62_272e_07bb_0142_62b8_2175_6295_c58d;
    const PRIME: u128 = 0x0000_0000_0100_0000_0000_0000_0000_013b;

    /// The digest of `bytes`.
    pub fn of(bytes: &[u8]) -> Digest {
        let mut state = Self::OFFSET;
        for &b in bytes {
            state ^= u128::from(b);
            state = state.wrapping_mul(Self::PRIME);
        }
        Digest(state)
    }

    /// The digest as two 64-bit words, high word first (for sending).
    pub fn words(self) -> [u64; 2] {
        [(self.0 >> 64) as u64, self.0 as u64]
    }

    /// The digest from its two words, high word first.
    pub fn from_words(high: u64, low: u64) -> Digest {
        Digest((u128::from(high) << 64) | u128::from(low))
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:032x}", self.0)
    }
}

/// Digests of a schedule and of its parts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScheduleDigest {
    /// The whole schedule's canonical text.
    pub schedule: Digest,
    /// The machine: nodes, links and their parameters.
    pub machine: Digest,
    /// The phases' names, in order.
    pub names: Digest,
    /// Each phase's collective, op, element type and length.
    pub shapes: Digest,
}

impl ScheduleDigest {
    /// The digests of `schedule`.
    pub fn of(schedule: &Schedule) -> ScheduleDigest {
        let text = serial::to_string(schedule, Format::Ron);
        let machine_only = Schedule {
            format_version: schedule.format_version,
            machine: schedule.machine.clone(),
            program: Vec::new(),
            phases: Vec::new(),
        };
        let machine = serial::to_string(&machine_only, Format::Ron);
        let names: Vec<&str> = schedule.phases.iter().map(|p| p.name.as_str()).collect();
        let shapes: Vec<String> = schedule.phases.iter().map(shape).collect();
        ScheduleDigest {
            schedule: Digest::of(text.as_bytes()),
            machine: Digest::of(machine.as_bytes()),
            names: Digest::of(names.join("\0").as_bytes()),
            shapes: Digest::of(shapes.join("\0").as_bytes()),
        }
    }

    /// What differs between two schedules with these digests, in words, or `None` if they
    /// are the same.
    pub fn difference(&self, other: &ScheduleDigest) -> Option<&'static str> {
        if self.schedule == other.schedule {
            None
        } else if self.machine != other.machine {
            Some("the machine (nodes, links or their parameters)")
        } else if self.names != other.names {
            Some("the phases' names")
        } else if self.shapes != other.shapes {
            Some("the phases' collective, op, element type or length")
        } else {
            Some("the phases' programs")
        }
    }
}

/// A phase's shape: what a caller must agree on to run it.
fn shape(phase: &Phase) -> String {
    format!(
        "{:?} {} {} {}",
        phase.collective, phase.op, phase.dtype, phase.elements
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// The published FNV-1a 128-bit values.
    #[test]
    fn fnv1a_128_test_vectors() {
        assert_eq!(
            Digest::of(b"").to_string(),
            "6c62272e07bb014262b821756295c58d"
        );
        assert_eq!(
            Digest::of(b"a").to_string(),
            "d228cb696f1a8caf78912b704e4a8964"
        );
        let d = Digest::of(b"foobar");
        let [h, l] = d.words();
        assert_eq!(Digest::from_words(h, l), d);
    }
}
