//! The verifier (skeleton; the passes are being written).

use crate::Schedule;
use serde::Serialize;
use std::fmt;
use thiserror::Error;

/// A schedule that passed every check. Only [`verify`] makes one, so anything that takes a
/// `&VerifiedSchedule` (the runtime, the emitters) can trust it.
#[derive(Clone, Debug)]
pub struct VerifiedSchedule {
    schedule: Schedule,
    report: Report,
}

impl VerifiedSchedule {
    /// The schedule.
    pub fn schedule(&self) -> &Schedule {
        &self.schedule
    }
    /// What the verifier measured.
    pub fn report(&self) -> &Report {
        &self.report
    }
    /// Gives the schedule back.
    pub fn into_schedule(self) -> Schedule {
        self.schedule
    }
}

/// What the verifier measured about a valid schedule.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Report {}

impl fmt::Display for Report {
    fn fmt(&self, _f: &mut fmt::Formatter<'_>) -> fmt::Result {
        Ok(())
    }
}

/// One problem found by the verifier.
#[derive(Clone, Debug, Error, PartialEq, Serialize)]
pub enum VerifyError {}

/// Every problem the verifier found.
#[derive(Clone, Debug, Error, PartialEq, Serialize)]
#[error("schedule failed verification")]
pub struct VerifyErrors {
    /// The problems, in the order found.
    pub errors: Vec<VerifyError>,
}

/// Checks `schedule` and returns the proof that it is valid, or every problem found.
pub fn verify(schedule: Schedule) -> Result<VerifiedSchedule, VerifyErrors> {
    Ok(VerifiedSchedule {
        schedule,
        report: Report::default(),
    })
}
