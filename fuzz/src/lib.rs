//! The checks behind topoc's fuzz targets (see `README.md`). Each takes untrusted text, drives
//! it as far through the pipeline as it goes, and panics — which libFuzzer reports as a crash —
//! only when a promise of the product is broken:
//!
//! - nothing panics, overflows, hangs or exhausts memory on any input;
//! - every refused topology comes with at least one problem, and every problem renders with a
//!   location in the file;
//! - the compiler never produces a schedule its own verifier refuses;
//! - a verified schedule reads back unchanged from its RON and JSON text;
//! - a verified phase, cut down to a few elements, still verifies, runs, matches the reference
//!   reduction and gives bit-identical results twice.

use schedule_ir::{serial, Phase, Schedule, VerifiedSchedule};
use topoc::{diag, Error, Options};

/// Machines with more compute nodes are parsed and built but not compiled: a ring allreduce on
/// `p` nodes has `2p(p-1)` transfers, and compiling large machines tells the fuzzer nothing
/// new while slowing it down a hundredfold.
pub const MAX_COMPILE_NODES: usize = 48;

/// The vector length phases are cut down to before they run.
pub const TINY: u64 = 40;

/// The topology target: parse, build the machine, compile with `auto` and with every method
/// forced, render every diagnostic, and check every schedule produced.
pub fn topology(text: &str) {
    let machine = match topoc::compile::load(text) {
        Ok((_, machine)) => machine,
        Err(e) => return refused(text, &e),
    };
    if machine.compute_nodes().len() > MAX_COMPILE_NODES {
        return;
    }
    let mut algorithms = vec![None];
    algorithms.extend(
        topoc::lower::Method::ALL
            .iter()
            .map(|m| Some(m.name().to_string())),
    );
    let mut checked: Vec<Schedule> = Vec::new();
    for algorithm in algorithms {
        match topoc::compile_source(text, &Options { algorithm }) {
            // `auto` gives the same schedule as one of the forced methods: check it once.
            Ok(compiled) if checked.contains(compiled.schedule.schedule()) => {}
            Ok(compiled) => {
                check_verified(&compiled.schedule);
                checked.push(compiled.schedule.into_schedule());
            }
            Err(e) => refused(text, &e),
        }
    }
}

/// The schedule target: read, run the cost model (it must cope with unverified schedules),
/// verify, and check what verifies.
pub fn schedule(text: &str) {
    let Ok(schedule) = serial::from_str(text) else {
        return;
    };
    for phase in &schedule.phases {
        let estimate = schedule_ir::cost::estimate(&schedule.machine, phase);
        let bound = schedule_ir::cost::lower_bound(&schedule.machine, phase);
        let _ = schedule_ir::cost::efficiency(&bound, &estimate);
    }
    match schedule_ir::verify(schedule) {
        Ok(verified) => check_verified(&verified),
        Err(errors) => {
            assert!(!errors.errors.is_empty(), "refused without a reason");
            for e in &errors.errors {
                assert!(!e.to_string().is_empty());
            }
        }
    }
}

/// A refused topology: at least one problem, each rendered with a place in the file.
fn refused(text: &str, error: &Error) {
    match error {
        Error::Topology(problems) => {
            assert!(!problems.is_empty(), "refused without a problem");
            let plain = diag::render("fuzz.ron", text, problems, false);
            assert!(
                plain.matches("fuzz.ron:").count() >= problems.len(),
                "a problem without a location:\n{plain}"
            );
            let _ = diag::render("fuzz.ron", text, problems, true);
        }
        Error::Unverified(errors) => {
            panic!("topoc compiled a schedule its verifier refuses:\n{errors:#?}")
        }
    }
}

/// A verified schedule: its report renders, it survives both text formats, and every phase
/// runs correctly on a tiny vector.
pub fn check_verified(verified: &VerifiedSchedule) {
    let schedule = verified.schedule();
    let _ = verified.report().to_string();
    for format in [serial::Format::Ron, serial::Format::Json] {
        let text = serial::to_string(schedule, format);
        let back = serial::from_str(&text).unwrap_or_else(|e| {
            panic!("a written schedule does not read back ({format:?}): {e}\n{text}")
        });
        assert!(
            back == *schedule,
            "the {format:?} round trip changed the schedule:\n{text}"
        );
    }
    for phase in &schedule.phases {
        run_tiny(schedule, phase);
    }
}

/// Runs `phase` cut down to at most [`TINY`] elements and compares with the reference.
fn run_tiny(schedule: &Schedule, phase: &Phase) {
    let small = phase.with_elements(phase.elements.min(TINY));
    let one = Schedule {
        format_version: schedule.format_version,
        machine: schedule.machine.clone(),
        phases: vec![small],
    };
    let verified = schedule_ir::verify(one).unwrap_or_else(|e| {
        panic!(
            "phase `{}` cut down to {TINY} elements fails verification: {e:#?}",
            phase.name
        )
    });
    let small = &verified.schedule().phases[0];
    let run = topoc::trial::run_phase(&verified, small, 7)
        .unwrap_or_else(|e| panic!("verified phase `{}` does not run: {e}", phase.name));
    assert!(
        run.ok(),
        "verified phase `{}` runs wrong: {run:?}",
        phase.name
    );
}
