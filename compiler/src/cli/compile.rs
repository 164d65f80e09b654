//! `topoc compile`: topology file to schedule file.

use super::{output_file, read, report_error, write_atomic, Emit, ReportFormat};
use schedule_ir::serial::{self, Format};
use serde::Serialize;
use std::path::Path;
use std::process::ExitCode;
use topoc::compile::{Compiled, Verdict};
use topoc::emit::msccl;

/// One phase of the compile report (`--report json`).
#[derive(Serialize)]
struct PhaseReport<'a> {
    phase: &'a str,
    method: &'a str,
    steps: u32,
    chunks: usize,
    reason: &'a str,
    /// Under `auto`: every method weighed, cheapest first.
    weighed: Vec<WeighedReport>,
}

/// One method `auto` weighed: its estimate, or why it has none.
#[derive(Serialize)]
struct WeighedReport {
    method: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    estimate_seconds: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    refused: Option<String>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    unsupported: bool,
}

/// Prints how every phase was compiled, on standard error (standard output may hold the
/// schedule).
fn report(compiled: &Compiled, format: ReportFormat) -> Result<(), String> {
    let schedule = compiled.schedule.schedule();
    let phases = compiled.notes.iter().zip(&schedule.phases);
    match format {
        ReportFormat::Text => {
            for (note, phase) in phases {
                let line = format!(
                    "phase `{}`: {} ({}), {} steps, {} chunks — {}",
                    note.phase,
                    note.method,
                    phase.collective.describe(&schedule.machine),
                    phase.steps,
                    phase.chunks.len(),
                    note.reason
                );
                // Phase and node names come from the user's file.
                eprintln!("{}", topoc::visible::line(&line));
            }
        }
        ReportFormat::Json => {
            let reports: Vec<PhaseReport<'_>> = phases
                .map(|(note, phase)| PhaseReport {
                    phase: &note.phase,
                    method: note.method.name(),
                    steps: phase.steps,
                    chunks: phase.chunks.len(),
                    reason: &note.reason,
                    weighed: note
                        .weighed
                        .iter()
                        .map(|w| WeighedReport {
                            method: w.method.name(),
                            estimate_seconds: match w.verdict {
                                Verdict::Estimate(s) => Some(s),
                                _ => None,
                            },
                            refused: match &w.verdict {
                                Verdict::Refused(e) => Some(e.to_string()),
                                _ => None,
                            },
                            unsupported: w.verdict == Verdict::Unsupported,
                        })
                        .collect(),
                })
                .collect();
            let text = serde_json::to_string_pretty(&reports)
                .map_err(|e| format!("error: cannot write the report: {e}"))?;
            eprintln!("{text}");
        }
    }
    Ok(())
}

pub fn compile(
    path: &Path,
    options: &topoc::Options,
    emit: Emit,
    output: Option<&Path>,
    phase: Option<&str>,
    report_format: ReportFormat,
) -> Result<ExitCode, String> {
    if phase.is_some() && emit != Emit::MscclXml {
        return Err(
            "error: --phase selects the phase to export with --emit msccl-xml; RON and JSON \
             schedules always hold every phase"
                .to_string(),
        );
    }
    let output = output_file(&[path], output)?;
    let text = read(path)?;
    let compiled =
        topoc::compile_source(&text, options).map_err(|e| report_error(path, &text, &e))?;
    let out = match emit {
        Emit::Ron => serial::to_string(compiled.schedule.schedule(), Format::Ron),
        Emit::Json => serial::to_string(compiled.schedule.schedule(), Format::Json),
        Emit::MscclXml => {
            let options = msccl::Options {
                phase: phase.map(str::to_string),
            };
            msccl::to_xml(&compiled.schedule, &options).map_err(|e| {
                format!(
                    "error: {} cannot be exported as MSCCL XML: {e}\nnothing was written",
                    path.display()
                )
            })?
        }
    };
    report(&compiled, report_format)?;
    match output {
        Some(o) => {
            write_atomic(o, &out)?;
            let what = match emit {
                Emit::MscclXml => "MSCCL algorithm of the verified schedule",
                Emit::Ron | Emit::Json => "verified schedule",
            };
            let to = o.display().to_string();
            eprintln!("{what} written to {}", topoc::visible::line(&to));
        }
        None => print!("{out}"),
    }
    Ok(ExitCode::SUCCESS)
}
