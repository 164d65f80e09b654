//! `topoc compile`: topology file to schedule file.

use super::{read, report_error, write_atomic, Emit};
use schedule_ir::serial::{self, Format};
use std::path::Path;
use std::process::ExitCode;

pub fn compile(
    path: &Path,
    algorithm: &str,
    variant: Option<u32>,
    emit: Emit,
    output: Option<&Path>,
) -> Result<ExitCode, String> {
    let text = read(path)?;
    let options = topoc::Options {
        algorithm: (algorithm != "auto").then(|| algorithm.to_string()),
        variant,
    };
    let compiled = topoc::compile(&text, &options).map_err(|e| report_error(path, &text, &e))?;
    let format = match emit {
        Emit::Ron => Format::Ron,
        Emit::Json => Format::Json,
    };
    let out = serial::to_string(compiled.schedule.schedule(), format);
    for (note, phase) in compiled
        .notes
        .iter()
        .zip(&compiled.schedule.schedule().phases)
    {
        eprintln!(
            "phase `{}`: {} ({}), {} steps, {} chunks — {}",
            note.phase,
            note.method,
            phase.collective,
            phase.steps,
            phase.chunks.len(),
            note.reason
        );
    }
    match output {
        Some(o) => {
            write_atomic(o, &out)?;
            eprintln!("verified schedule written to {}", o.display());
        }
        None => print!("{out}"),
    }
    Ok(ExitCode::SUCCESS)
}
