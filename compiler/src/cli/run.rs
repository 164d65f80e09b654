//! `topoc run`: execute every phase in one process on random data and compare each node's
//! result with a plain reference reduction; run twice and compare the two runs bit for bit.
//! Each phase's run is refused, before its inputs are made, if it would need more memory or
//! work than `--memory-budget` and `--work-budget` allow (see `runtime_lite::Limits`).

use super::{load_verified, ReportFormat};
use runtime_lite::Limits;
use schedule_ir::{DType, ProgramItem, Schedule, VerifiedSchedule};
use serde::Serialize;
use std::path::Path;
use std::process::ExitCode;
use topoc::simulate::parse_size;
use topoc::trial::{adjust, run_phase_within, PhaseRun};

pub fn run(
    path: &Path,
    dtype: Option<DType>,
    elements: Option<u64>,
    seed: u64,
    only: Option<&str>,
    format: ReportFormat,
    limits: Limits,
) -> Result<ExitCode, String> {
    let verified = load_verified(path)?;
    let banded = verified
        .schedule()
        .program
        .iter()
        .any(|item| matches!(item, ProgramItem::Bands { .. }));
    if banded {
        let runs = banded_runs(&verified, dtype, elements, seed, only, &limits)?;
        return finish(path, verified.schedule(), &runs, format);
    }
    let verified = adjust(verified, dtype, elements)?;
    let schedule = verified.schedule();
    if let Some(name) = only {
        if schedule.phase(name).is_none() {
            let names: Vec<&str> = schedule.phases.iter().map(|p| p.name.as_str()).collect();
            return Err(super::no_phase(path, name, &names));
        }
    }
    let mut runs = Vec::new();
    for (index, phase) in schedule.phases.iter().enumerate() {
        if only.is_some_and(|name| name != phase.name) {
            continue;
        }
        let phase_seed = seed.wrapping_add(index as u64);
        runs.push(run_phase_within(&verified, phase, phase_seed, &limits)?);
    }
    finish(path, schedule, &runs, format)
}

/// The runs of a schedule with banded exchanges: every exchange of the program (or `only`)
/// at `elements` of `dtype` — a banded one by the band that holds that size — or, without
/// `--elements`, every band at the size it was compiled for.
fn banded_runs(
    verified: &VerifiedSchedule,
    dtype: Option<DType>,
    elements: Option<u64>,
    seed: u64,
    only: Option<&str>,
    limits: &Limits,
) -> Result<Vec<PhaseRun>, String> {
    let schedule = verified.schedule();
    // Each name to run, and whether it is a band's phase (already chosen by `only`).
    let mut targets: Vec<(&str, bool)> = Vec::new();
    for item in &schedule.program {
        match item {
            ProgramItem::Compute(_) => {}
            ProgramItem::Exchange(name) => targets.push((name, false)),
            ProgramItem::Bands { name, bands } => match elements {
                Some(_) => targets.push((name, false)),
                None if only.is_none_or(|o| o == name) => {
                    targets.extend(bands.iter().map(|b| (b.phase.as_str(), true)));
                }
                None => {}
            },
        }
    }
    if let Some(name) = only {
        let known = targets.iter().any(|(t, _)| *t == name) || schedule.bands(name).is_some();
        if !known {
            return Err(format!("error: the schedule has no exchange `{name}`"));
        }
    }
    let mut runs = Vec::new();
    for (index, (name, in_band)) in targets.into_iter().enumerate() {
        if !in_band && only.is_some_and(|o| o != name) {
            continue;
        }
        // A band run without --elements runs its phase at the size it was compiled for.
        let own = schedule.phase(name);
        let dtype = dtype
            .or(own.map(|p| p.dtype))
            .or_else(|| first_band_dtype(schedule, name))
            .unwrap_or(DType::F32);
        let n = match (elements, own) {
            (Some(n), _) => n,
            (None, Some(p)) => p.elements,
            (None, None) => 0,
        };
        let sized = runtime_lite::bands::select(verified, name, dtype, n)
            .map_err(|e| format!("error: {e}"))?;
        let seed = seed.wrapping_add(index as u64);
        runs.push(run_phase_within(
            sized.schedule(),
            sized.phase(),
            seed,
            limits,
        )?);
    }
    Ok(runs)
}

/// The dtype of the first band of the banded exchange `name`.
fn first_band_dtype(schedule: &Schedule, name: &str) -> Option<DType> {
    let band = schedule.bands(name)?.first()?;
    schedule.phase(&band.phase).map(|p| p.dtype)
}

/// Prints the runs and gives the exit status: success only when every run matched.
fn finish(
    path: &Path,
    schedule: &Schedule,
    runs: &[PhaseRun],
    format: ReportFormat,
) -> Result<ExitCode, String> {
    let all_ok = runs.iter().all(PhaseRun::ok);
    match format {
        ReportFormat::Json => {
            #[derive(Serialize)]
            struct Out<'a> {
                ok: bool,
                phases: &'a [PhaseRun],
            }
            let text = serde_json::to_string_pretty(&Out {
                ok: all_ok,
                phases: runs,
            })
            .map_err(|e| format!("error: cannot write the report: {e}"))?;
            println!("{text}");
        }
        ReportFormat::Text => {
            // Names come from the user's files: control characters are shown as text.
            use topoc::visible::line;
            println!(
                "{}: schedule verified ({} phase(s) on machine `{}`)",
                line(&path.display().to_string()),
                schedule.phases.len(),
                line(&schedule.machine.name)
            );
            for r in runs {
                println!(
                    "phase `{}`: {} ({}, {}, {} elements) by {} on {} nodes, {} steps, seed {}",
                    line(&r.phase),
                    line(&r.collective),
                    r.op,
                    r.dtype,
                    r.elements,
                    line(&r.algorithm),
                    r.nodes,
                    r.steps,
                    r.seed
                );
                match &r.mismatch {
                    None => println!("  every node matches the reference reduction"),
                    Some(m) => println!("  MISMATCH: {}", line(m)),
                }
                println!(
                    "  second run bit-identical: {}",
                    if r.reproducible { "yes" } else { "NO" }
                );
            }
            println!("{}", if all_ok { "ok" } else { "FAILED" });
        }
    }
    Ok(if all_ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// The limits from the `--memory-budget` and `--work-budget` sizes.
pub fn budget(memory: &str, work: &str) -> Result<Limits, String> {
    let size = |flag: &str, text: &str| parse_size(text).map_err(|e| format!("error: {flag}: {e}"));
    Ok(Limits {
        memory_bytes: size("--memory-budget", memory)?,
        work_bytes: size("--work-budget", work)?,
    })
}
