//! Command definitions and the code shared by the commands: reading inputs (topology or
//! schedule, told apart by their first word), rendering problems, writing files atomically.

mod check;
mod compile;
mod run;
mod verify;

use clap::{Parser, Subcommand, ValueEnum};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use topoc::diag;
use topoc::Error;

/// topoc — compile collectives for a declared machine into verified, per-node schedules.
#[derive(Debug, Parser)]
#[command(name = "topoc", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Parse a topology file, report every problem, and summarise the machine.
    ///
    /// Example: topoc check examples/ladder8.ron
    Check {
        /// The topology file (RON).
        file: PathBuf,
    },
    /// Compile a topology file into a verified schedule.
    ///
    /// Example: topoc compile examples/ladder8.ron -o ladder8.sched.ron
    Compile {
        /// The topology file (RON).
        file: PathBuf,
        /// Lowering method for every exchange phase: auto, ladder-rings, in-network, ring or tree.
        #[arg(long, default_value = "auto")]
        algorithm: String,
        /// Output format of the schedule.
        #[arg(long, value_enum, default_value_t = Emit::Ron)]
        emit: Emit,
        /// Where to write the schedule (standard output when absent). Written whole or not at
        /// all.
        #[arg(short, long)]
        output: Option<PathBuf>,
    },
    /// Verify a schedule (or compile and verify a topology file) and print the link report.
    ///
    /// Example: topoc verify ladder8.sched.ron
    Verify {
        /// A schedule (RON or JSON) or a topology file.
        input: PathBuf,
        /// Report format.
        #[arg(long, value_enum, default_value_t = ReportFormat::Text)]
        format: ReportFormat,
    },
    /// Run a schedule in one process on random data and compare with a plain reduction.
    ///
    /// Exits with status 0 only when every node's result matches the reference and a second
    /// run gives bit-identical results.
    ///
    /// Example: topoc run examples/ladder8.ron --dtype i32 --seed 7
    Run {
        /// A schedule (RON or JSON) or a topology file (compiled and verified first).
        input: PathBuf,
        /// Element type to run with (the phase's own when absent).
        #[arg(long, value_enum)]
        dtype: Option<DTypeArg>,
        /// Vector length to run with (the phase's own when absent).
        #[arg(long)]
        elements: Option<u64>,
        /// Seed of the random input data.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Run only this phase (all phases when absent).
        #[arg(long)]
        phase: Option<String>,
        /// Report format.
        #[arg(long, value_enum, default_value_t = ReportFormat::Text)]
        format: ReportFormat,
    },
}

/// Schedule output formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Emit {
    /// Rusty Object Notation.
    Ron,
    /// JSON.
    Json,
}

/// Report formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ReportFormat {
    /// A readable table.
    Text,
    /// Machine-readable JSON.
    Json,
}

/// Element types on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum DTypeArg {
    /// 32-bit float.
    F32,
    /// 64-bit float.
    F64,
    /// 32-bit integer.
    I32,
    /// 64-bit integer.
    I64,
}

impl From<DTypeArg> for schedule_ir::DType {
    fn from(d: DTypeArg) -> Self {
        match d {
            DTypeArg::F32 => schedule_ir::DType::F32,
            DTypeArg::F64 => schedule_ir::DType::F64,
            DTypeArg::I32 => schedule_ir::DType::I32,
            DTypeArg::I64 => schedule_ir::DType::I64,
        }
    }
}

/// Runs a parsed command line. `Err` carries a message already formatted for the terminal.
pub fn run(cli: Cli) -> Result<ExitCode, String> {
    match cli.command {
        Command::Check { file } => check::check(&file),
        Command::Compile {
            file,
            algorithm,
            emit,
            output,
        } => compile::compile(&file, &algorithm, emit, output.as_deref()),
        Command::Verify { input, format } => verify::verify(&input, format),
        Command::Run {
            input,
            dtype,
            elements,
            seed,
            phase,
            format,
        } => run::run(
            &input,
            dtype.map(Into::into),
            elements,
            seed,
            phase.as_deref(),
            format,
        ),
    }
}

/// Reads a file, naming it in the error.
pub fn read(path: &Path) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("error: cannot read {}: {e}", path.display()))
}

/// Writes `text` to `path` whole or not at all: a temporary file beside it, renamed over it.
pub fn write_atomic(path: &Path, text: &str) -> Result<(), String> {
    use std::io::Write;
    let fail = |e: &dyn std::fmt::Display| format!("error: cannot write {}: {e}", path.display());
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(|e| fail(&e))?;
    tmp.write_all(text.as_bytes()).map_err(|e| fail(&e))?;
    tmp.as_file().sync_all().map_err(|e| fail(&e))?;
    tmp.persist(path).map_err(|e| fail(&e.error))?;
    Ok(())
}

/// Whether a text is a topology file (rather than a schedule): its first word is `Topology`.
pub fn is_topology(text: &str) -> bool {
    let mut rest = text;
    loop {
        rest = rest.trim_start();
        if let Some(after) = rest.strip_prefix("//") {
            rest = after.split_once('\n').map_or("", |(_, r)| r);
        } else if let Some(after) = rest.strip_prefix("/*") {
            rest = after.split_once("*/").map_or("", |(_, r)| r);
        } else if rest.starts_with("#![") {
            rest = rest.split_once(']').map_or("", |(_, r)| r);
        } else {
            break;
        }
    }
    rest.starts_with("Topology")
}

/// Formats a compiler error about the file at `path` for the terminal.
pub fn report_error(path: &Path, source: &str, error: &Error) -> String {
    match error {
        Error::Topology(problems) => {
            let color = std::io::stderr().is_terminal();
            let mut out = diag::render(&path.display().to_string(), source, problems, color);
            out.push_str(&format!(
                "error: {} has {} problem(s); nothing was written",
                path.display(),
                problems.len()
            ));
            out
        }
        Error::Unverified(errors) => format!("{error}\n{}", verify::render_errors(errors)),
    }
}

/// Loads a verified schedule from a schedule file, or compiles a topology file.
pub fn load_verified(path: &Path) -> Result<schedule_ir::VerifiedSchedule, String> {
    let text = read(path)?;
    if is_topology(&text) {
        let compiled = topoc::compile(&text, &topoc::Options::default())
            .map_err(|e| report_error(path, &text, &e))?;
        return Ok(compiled.schedule);
    }
    let schedule = schedule_ir::serial::from_str(&text)
        .map_err(|e| format!("error: {} is not a readable schedule: {e}", path.display()))?;
    schedule_ir::verify(schedule).map_err(|errors| {
        format!(
            "{}\nerror: {} failed verification with {} problem(s); it will not run",
            verify::render_errors(&errors),
            path.display(),
            errors.errors.len()
        )
    })
}
