//! Back ends that write a verified schedule in a format other tools run.
//!
//! Every emitter takes a [`schedule_ir::VerifiedSchedule`]: only the verifier makes one, so
//! nothing unproved is ever written. An emitter either returns the whole text or an error that
//! says why the schedule cannot be expressed in its format; it never writes half a file.
//!
//! | module     | format | what it exports |
//! |------------|--------|-----------------|
//! | [`chakra`] | Chakra execution traces for ASTRA-sim | one allreduce, reduce-scatter or allgather phase, a trace per rank and size |
//! | [`msccl`]  | MSCCL algorithm XML (msccl-executor-nccl, RCCL, microsoft/msccl) | one allreduce, reduce-scatter or allgather phase |
//! | [`mscclpp`] | MSCCL++ execution-plan JSON (release v0.7.0) | one allreduce, reduce-scatter or allgather phase |

pub mod chakra;
mod layout;
pub mod msccl;
pub mod mscclpp;

use schedule_ir::{Phase, Schedule};
use thiserror::Error;

/// Why no one phase can be exported: each format holds one collective, so a schedule of
/// several phases needs `--phase`. `holder` says what the format holds, in words ("an MSCCL
/// file holds one algorithm").
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum PhaseChoiceError {
    /// The schedule has no phase at all.
    #[error("the schedule has no exchange phase to export")]
    NoPhase,
    /// Several phases and none chosen.
    #[error(
        "the schedule has {} exchange phases ({}) and {holder}; choose one with --phase NAME",
        .available.len(),
        quoted(.available)
    )]
    PhaseRequired {
        /// The phases there are.
        available: Vec<String>,
        /// What one file of the format holds.
        holder: &'static str,
    },
    /// The chosen phase does not exist.
    #[error("the schedule has no phase `{}`; its phases are {}", crate::visible::Shown(.name), quoted(.available))]
    NoSuchPhase {
        /// The name asked for.
        name: String,
        /// The phases there are.
        available: Vec<String>,
    },
}

/// The phase named `phase`, or the schedule's only phase when none is named.
pub(crate) fn choose_phase<'a>(
    schedule: &'a Schedule,
    phase: Option<&str>,
    holder: &'static str,
) -> Result<&'a Phase, PhaseChoiceError> {
    let available = || schedule.phases.iter().map(|p| p.name.clone()).collect();
    match (phase, schedule.phases.as_slice()) {
        (Some(name), _) => schedule
            .phase(name)
            .ok_or_else(|| PhaseChoiceError::NoSuchPhase {
                name: name.to_string(),
                available: available(),
            }),
        (None, []) => Err(PhaseChoiceError::NoPhase),
        (None, [only]) => Ok(only),
        (None, _) => Err(PhaseChoiceError::PhaseRequired {
            available: available(),
            holder,
        }),
    }
}

/// Names as a list of `quoted` items, for messages.
pub(crate) fn quoted(names: &[String]) -> String {
    names
        .iter()
        .map(|n| format!("`{}`", crate::visible::Shown(n)))
        .collect::<Vec<_>>()
        .join(", ")
}
