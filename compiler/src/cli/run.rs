//! `topoc run`: execute every phase in one process on random data and compare each node's
//! result with a plain reference reduction; run twice and compare the two runs bit for bit.
//! Each phase's run is refused, before its inputs are made, if it would need more memory or
//! work than `--memory-budget` and `--work-budget` allow (see `runtime_lite::Limits`).

use super::{load_verified, ReportFormat};
use runtime_lite::Limits;
use schedule_ir::DType;
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
    let verified = adjust(verified, dtype, elements)?;
    let schedule = verified.schedule();
    if let Some(name) = only {
        if schedule.phase(name).is_none() {
            let names: Vec<&str> = schedule.phases.iter().map(|p| p.name.as_str()).collect();
            return Err(format!(
                "error: {} has no phase `{name}`; its phases are: {}",
                path.display(),
                names.join(", ")
            ));
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
                phases: &runs,
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
            for r in &runs {
                println!(
                    "phase `{}`: {} ({}, {}, {} elements) by {} on {} nodes, {} steps, seed {}",
                    line(&r.phase),
                    r.collective,
                    r.op,
                    r.dtype,
                    r.elements,
                    r.algorithm,
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
