//! `topoc compile`: topology file to schedule file.

use super::{read, report_error, write_atomic, Emit};
use schedule_ir::serial::{self, Format};
use std::path::Path;
use std::process::ExitCode;
use topoc::emit::msccl;

pub fn compile(
    path: &Path,
    options: &topoc::Options,
    emit: Emit,
    output: Option<&Path>,
    phase: Option<&str>,
) -> Result<ExitCode, String> {
    if phase.is_some() && emit != Emit::MscclXml {
        return Err(
            "error: --phase selects the phase to export with --emit msccl-xml; RON and JSON \
             schedules always hold every phase"
                .to_string(),
        );
    }
    let text = read(path)?;
    let compiled = topoc::compile(&text, options).map_err(|e| report_error(path, &text, &e))?;
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
    for (note, phase) in compiled
        .notes
        .iter()
        .zip(&compiled.schedule.schedule().phases)
    {
        eprintln!(
            "phase `{}`: {} ({}), {} steps, {} chunks — {}",
            note.phase,
            note.method,
            phase
                .collective
                .describe(&compiled.schedule.schedule().machine),
            phase.steps,
            phase.chunks.len(),
            note.reason
        );
    }
    match output {
        Some(o) => {
            write_atomic(o, &out)?;
            let what = match emit {
                Emit::MscclXml => "MSCCL algorithm of the verified schedule",
                Emit::Ron | Emit::Json => "verified schedule",
            };
            eprintln!("{what} written to {}", o.display());
        }
        None => print!("{out}"),
    }
    Ok(ExitCode::SUCCESS)
}
