//! The checks behind topoc's fuzz targets (see `README.md`). Each takes untrusted text, drives
//! it as far through the pipeline as it goes, and panics — which libFuzzer reports as a crash —
//! only when a promise of the product is broken:
//!
//! - nothing panics, overflows, hangs or exhausts memory on any input;
//! - every input is dealt with within a budget: compiling (or refusing) a topology within
//!   [`COMPILE_BUDGET`] per method, running a verified phase within [`RUN_LIMITS`] and
//!   [`RUN_BUDGET`] — or refusing it, before allocating, within [`REFUSAL_BUDGET`];
//! - every refused topology comes with at least one problem, and every problem renders with a
//!   location in the file;
//! - the compiler never produces a schedule its own verifier refuses;
//! - a verified schedule reads back unchanged from its RON and JSON text;
//! - a verified phase that the runtime accepts within its limits runs, matches the reference
//!   reduction and gives bit-identical results twice.
//!
//! Nothing is skipped for being large: a machine of any size is compiled, and a phase of any
//! length is run or refused. Large inputs are the compiler's and the runtime's to refuse, and
//! the targets check that they do, and quickly.

use runtime_lite::Limits;
use schedule_ir::{serial, Phase, Schedule, VerifiedSchedule};
use std::time::{Duration, Instant};
use topoc::{diag, Error, Options};

/// The most one compile (one method, or `auto`) of one input may take, refusal included: the
/// compiler sizes a lowering before making it and refuses what is too large (see
/// `compiler/src/limits.rs`), so even the largest machine it accepts compiles well within
/// this in a fuzz build (release, with debug assertions).
pub const COMPILE_BUDGET: Duration = Duration::from_secs(8);

/// The memory and work a verified phase may use when run by the targets. The runtime refuses
/// anything larger before allocating it.
pub const RUN_LIMITS: Limits = Limits {
    memory_bytes: 64 << 20,
    work_bytes: 256 << 20,
};

/// The most one run of a phase within [`RUN_LIMITS`] may take (two runs, the reference and
/// the comparison).
pub const RUN_BUDGET: Duration = Duration::from_secs(5);

/// The most the runtime may take to refuse a phase over [`RUN_LIMITS`]: it must not have
/// allocated or run anything first.
pub const REFUSAL_BUDGET: Duration = Duration::from_millis(500);

/// The topology target: parse, build the machine, compile with `auto` and with every method
/// forced, render every diagnostic, and check every schedule produced.
pub fn topology(text: &str) {
    let loaded = match topoc::compile::load(text) {
        Ok(loaded) => loaded,
        Err(e) => return refused(text, &e),
    };
    let mut algorithms = vec![None];
    algorithms.extend(
        topoc::lower::Method::ALL
            .into_iter()
            .map(|m| Some(topoc::lower::Choice::Method(m))),
    );
    let mut checked: Vec<Schedule> = Vec::new();
    for algorithm in algorithms {
        let options = Options {
            algorithm,
            ..Options::default()
        };
        let start = Instant::now();
        let compiled = topoc::compile(&loaded, &options);
        let took = start.elapsed();
        assert!(
            took <= COMPILE_BUDGET,
            "compiling with {} took {took:?}, over the budget of {COMPILE_BUDGET:?} ({})",
            algorithm.unwrap_or_default(),
            if compiled.is_ok() {
                "compiled"
            } else {
                "refused"
            }
        );
        match compiled {
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
            // The first `MAX_SHOWN` are shown, the rest counted.
            let shown = problems.len().min(diag::MAX_SHOWN);
            assert!(
                plain.matches("fuzz.ron:").count() >= shown,
                "a problem without a location:\n{plain}"
            );
            if problems.len() > shown {
                assert!(
                    plain.contains(&format!(
                        "{} more problem(s) not shown",
                        problems.len() - shown
                    )),
                    "the problems not shown are not counted:\n{plain}"
                );
            }
            let _ = diag::render("fuzz.ron", text, problems, true);
        }
        Error::Unverified(errors) => {
            panic!("topoc compiled a schedule its verifier refuses:\n{errors:#?}")
        }
    }
}

/// A verified schedule: its report renders, it survives both text formats, and every phase
/// runs correctly within the run limits, or is refused quickly.
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
        run_within_limits(verified, phase);
    }
}

/// Runs `phase` as it is, within [`RUN_LIMITS`], and compares with the reference; a phase
/// over the limits must be refused, by the runtime's estimate, within [`REFUSAL_BUDGET`].
fn run_within_limits(verified: &VerifiedSchedule, phase: &Phase) {
    let start = Instant::now();
    let run = topoc::trial::run_phase_within(verified, phase, 7, &RUN_LIMITS);
    let took = start.elapsed();
    match run {
        Ok(run) => {
            assert!(
                run.ok(),
                "verified phase `{}` runs wrong: {run:?}",
                phase.name
            );
            assert!(
                took <= RUN_BUDGET,
                "phase `{}` ran within the limits but took {took:?}, over {RUN_BUDGET:?}",
                phase.name
            );
        }
        Err(e) if e.contains("over the memory budget") || e.contains("over the work budget") => {
            assert!(
                took <= REFUSAL_BUDGET,
                "phase `{}` was refused only after {took:?}: {e}",
                phase.name
            );
        }
        Err(e) => panic!("verified phase `{}` does not run: {e}", phase.name),
    }
}
