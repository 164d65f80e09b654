//! Running an exchange by its name and the size of the buffers: for a banded exchange
//! ([`ProgramItem::Bands`](schedule_ir::ProgramItem::Bands)), the band that holds the size.
//!
//! A band's phase was compiled for one size; on buffers of another length in its band it runs
//! re-cut ([`Phase::with_elements`]): every chunk keeps its share of the vector, so the
//! programs are unchanged and the verifier's proof, which is per chunk id, still holds. The
//! re-cut phase is verified again all the same: nothing runs unverified.

use crate::Error;
use schedule_ir::{Band, DType, Phase, PhaseLookup, Schedule, VerifiedSchedule};

/// A phase ready to run on buffers of a given length: the one-phase schedule, verified.
#[derive(Clone, Debug)]
pub struct Sized {
    schedule: VerifiedSchedule,
}

impl Sized {
    /// The verified schedule holding the one phase (run it by [`Sized::phase`]'s name).
    pub fn schedule(&self) -> &VerifiedSchedule {
        &self.schedule
    }

    /// The phase chosen, at the length asked for: its name is the band's phase's.
    pub fn phase(&self) -> &Phase {
        // `select` builds the schedule with exactly one phase.
        &self.schedule.schedule().phases[0]
    }
}

/// The phase that runs the exchange called `name` on buffers of `elements` elements of
/// `dtype` (the size in bytes picks the band of a banded exchange; an exchange without bands
/// is the phase of that name), re-cut to `elements` and verified.
///
/// Fails with [`Error::NoBand`] when the exchange is banded and no band holds the size, with
/// [`Error::UnknownPhase`] when there is no such exchange, and with [`Error::Verify`] if the
/// re-cut phase does not verify.
pub fn select(
    schedule: &VerifiedSchedule,
    name: &str,
    dtype: DType,
    elements: u64,
) -> Result<Sized, Error> {
    let s = schedule.schedule();
    let bytes = elements.saturating_mul(dtype.size_bytes());
    let phase = s.phase_for_bytes(name, bytes).map_err(|e| match e {
        PhaseLookup::NoBand(bands) => Error::NoBand {
            phase: name.to_string(),
            bytes,
            bands: describe(bands),
        },
        PhaseLookup::Unknown => Error::UnknownPhase {
            phase: name.to_string(),
            available: exchanges(s).join(", "),
        },
    })?;
    let mut one = phase.with_elements(elements);
    one.dtype = dtype;
    let schedule = schedule_ir::verify(Schedule {
        format_version: s.format_version,
        machine: s.machine.clone(),
        program: Vec::new(),
        phases: vec![one],
    })
    .map_err(Error::Verify)?;
    Ok(Sized { schedule })
}

/// Bands for a message: `[0 B, 2 MiB) (grads@1MiB), …`.
pub fn describe(bands: &[Band]) -> String {
    bands
        .iter()
        .map(|b| format!("{b} ({})", b.phase))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The names callers can run: banded exchanges, and phases that are no band's.
fn exchanges(s: &Schedule) -> Vec<String> {
    let banded: Vec<&str> = s
        .program
        .iter()
        .filter_map(|item| match item {
            schedule_ir::ProgramItem::Bands { bands, .. } => Some(bands),
            _ => None,
        })
        .flatten()
        .map(|b| b.phase.as_str())
        .collect();
    let mut names: Vec<String> = s
        .program
        .iter()
        .filter_map(|item| match item {
            schedule_ir::ProgramItem::Bands { name, .. } => Some(format!("`{name}` (banded)")),
            _ => None,
        })
        .collect();
    names.extend(
        s.phases
            .iter()
            .filter(|p| !banded.contains(&p.name.as_str()))
            .map(|p| format!("`{}`", p.name)),
    );
    if names.is_empty() {
        names.push("none".to_string());
    }
    names
}
