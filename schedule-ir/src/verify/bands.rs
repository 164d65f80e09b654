//! Pass 1, well-formed, for banded exchanges ([`ProgramItem::Bands`]): names, band ranges and
//! the phases the bands run. Each band's phase is an ordinary phase, proved by every pass like
//! any other; what is checked here is only how the bands fit together.

use super::{ErrorKind, Location, VerifyError};
use crate::{Band, Phase, ProgramItem, Schedule};
use std::collections::BTreeSet;

/// Runs the checks on every banded exchange of the program, appending every problem.
pub(super) fn check(schedule: &Schedule, errors: &mut Vec<VerifyError>) {
    let mut names: BTreeSet<&str> = schedule.phases.iter().map(|p| p.name.as_str()).collect();
    for item in &schedule.program {
        let ProgramItem::Bands { name, bands } = item else {
            continue;
        };
        let here = Location::phase(name);
        if !names.insert(name.as_str()) {
            errors.push(here.clone().error(ErrorKind::BandsNameTaken));
        }
        if bands.is_empty() {
            errors.push(here.error(ErrorKind::NoBands));
            continue;
        }
        check_ranges(bands, &here, errors);
        check_phases(schedule, bands, &here, errors);
    }
}

/// Every band is non-empty and starts where the one before it ends.
fn check_ranges(bands: &[Band], here: &Location, errors: &mut Vec<VerifyError>) {
    let mut previous_end: Option<Option<u64>> = None;
    for (band, b) in bands.iter().enumerate() {
        let Band {
            min_bytes,
            max_bytes,
            phase: _,
        } = b;
        if let Some(max) = max_bytes.filter(|max| max <= min_bytes) {
            errors.push(here.clone().error(ErrorKind::EmptyBand {
                band,
                min_bytes: *min_bytes,
                max_bytes: max,
            }));
        }
        if let Some(expected) = previous_end.filter(|end| *end != Some(*min_bytes)) {
            errors.push(here.clone().error(ErrorKind::BandGap {
                band,
                min_bytes: *min_bytes,
                expected,
            }));
        }
        previous_end = Some(*max_bytes);
    }
}

/// Every band's phase runs the first band's collective, op and dtype, and was compiled for a
/// size inside its band. (Phases that do not exist are reported with the program's checks.)
fn check_phases(
    schedule: &Schedule,
    bands: &[Band],
    here: &Location,
    errors: &mut Vec<VerifyError>,
) {
    let phases: Vec<Option<&Phase>> = bands.iter().map(|b| schedule.phase(&b.phase)).collect();
    let first = phases.first().copied().flatten();
    for (band, (b, phase)) in bands.iter().zip(&phases).enumerate() {
        let Some(phase) = phase else {
            continue;
        };
        if let Some(first) = first {
            let what = if phase.collective != first.collective {
                Some("collective")
            } else if phase.op != first.op {
                Some("op")
            } else if phase.dtype != first.dtype {
                Some("dtype")
            } else {
                None
            };
            if let Some(what) = what {
                errors.push(here.clone().error(ErrorKind::BandsDiffer {
                    band,
                    phase: phase.name.clone(),
                    what,
                }));
            }
        }
        let bytes = phase.elements.saturating_mul(phase.dtype.size_bytes());
        if !b.holds(bytes) {
            errors.push(here.clone().error(ErrorKind::BandSizeOutside {
                band,
                phase: phase.name.clone(),
                bytes,
            }));
        }
    }
}
