//! `topoc compile`: topology file to schedule file.

use super::{
    is_special, output_file, read, report_error, stage_with, write_atomic, write_atomic_with,
    write_stdout, Emit, ReportFormat,
};
use schedule_ir::serial::{self, Form, Format};
use schedule_ir::ProgramItem;
use serde::Serialize;
use std::path::Path;
use std::process::ExitCode;
use topoc::compile::{Compiled, PhaseNote, Sizes, Verdict};
use topoc::emit::{chakra, msccl, mscclpp};

/// One phase of the compile report (`--report json`).
#[derive(Serialize)]
struct PhaseReport<'a> {
    phase: &'a str,
    method: &'a str,
    steps: u32,
    chunks: usize,
    /// Present when the phase's links are shared.
    #[serde(skip_serializing_if = "schedule_ir::LinkUse::is_exclusive")]
    links: schedule_ir::LinkUse,
    reason: &'a str,
    /// Under `auto`: every method weighed, cheapest first.
    weighed: Vec<WeighedReport>,
}

/// One method `auto` weighed: its estimate, its floor when it was not lowered, or why it has
/// none.
#[derive(Serialize)]
struct WeighedReport {
    method: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    estimate_seconds: Option<f64>,
    /// Not lowered: a lower bound on its estimate, not below the best estimate.
    #[serde(skip_serializing_if = "Option::is_none")]
    floor_seconds: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    refused: Option<String>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    unsupported: bool,
}

/// Prints how every phase was compiled, on standard error (standard output may hold the
/// schedule).
fn report(compiled: &Compiled, format: ReportFormat) -> Result<(), String> {
    let schedule = compiled.schedule.schedule();
    report_phases(&compiled.notes, &schedule.phases, &schedule.machine, format)
}

/// [`report`] of any compiled form: a note per phase, beside the phase.
fn report_phases(
    notes: &[PhaseNote],
    phases: &[schedule_ir::Phase],
    machine: &schedule_ir::Machine,
    format: ReportFormat,
) -> Result<(), String> {
    let phases = notes.iter().zip(phases);
    match format {
        ReportFormat::Text => {
            for (note, phase) in phases {
                let line = format!(
                    "phase `{}`: {} ({}), {} steps, {} chunks{} — {}",
                    note.phase,
                    note.method,
                    phase.collective.describe(machine),
                    phase.steps,
                    phase.chunks.len(),
                    match phase.links {
                        schedule_ir::LinkUse::Exclusive => "",
                        schedule_ir::LinkUse::Shared => ", links shared",
                    },
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
                    links: phase.links,
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
                            floor_seconds: match w.verdict {
                                Verdict::Skipped(s) => Some(s),
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

/// What `topoc compile` was asked for, beside the file and the output.
pub struct Request<'a> {
    /// The compiler's options.
    pub options: topoc::Options,
    /// The sizes to compile at (`--size`, `--bands`).
    pub at: Sizes,
    /// The output format.
    pub emit: Emit,
    /// `--compact`: the schedule's compact form.
    pub form: Form,
    /// `--phase`: the exchange to export in a one-phase format.
    pub phase: Option<&'a str>,
    /// `--sizes`: the Chakra export's trace sizes.
    pub trace_sizes: Option<&'a str>,
    /// How to report each phase's method.
    pub report: ReportFormat,
}

/// `--size` and `--bands` as [`Sizes`], or the message for a size that does not parse.
pub fn sizes(size: Option<&str>, bands: Option<&str>) -> Result<Sizes, String> {
    if let Some(text) = size {
        let bytes = topoc::simulate::parse_size(text).map_err(|e| format!("error: --size: {e}"))?;
        return Ok(Sizes::One(bytes));
    }
    match bands {
        Some(list) => Ok(Sizes::Bands(
            list.split(',')
                .map(topoc::simulate::parse_size)
                .collect::<Result<_, _>>()
                .map_err(|e| format!("error: --bands: {e}"))?,
        )),
        None => Ok(Sizes::Declared),
    }
}

/// Refuses options that do not go together, before the (possibly long) compile.
fn refuse_mismatched(request: &Request<'_>, has_output: bool) -> Result<(), String> {
    let (emit, form, phase, sizes) = (
        request.emit,
        request.form,
        request.phase,
        request.trace_sizes,
    );
    let banded = matches!(request.at, Sizes::Bands(_));
    if phase.is_some() && !matches!(emit, Emit::MscclXml | Emit::Mscclpp | Emit::Chakra) {
        return Err(
            "error: --phase selects the phase to export with --emit msccl-xml, mscclpp or chakra; \
             RON and JSON schedules always hold every phase"
                .to_string(),
        );
    }
    if form == Form::Compact && !matches!(emit, Emit::Ron | Emit::Json) {
        return Err(
            "error: --compact writes RON and JSON schedules in the compact form; the other \
             --emit formats have their own"
                .to_string(),
        );
    }
    if sizes.is_some() && emit != Emit::Chakra {
        return Err("error: --sizes applies to --emit chakra only".to_string());
    }
    if banded && matches!(emit, Emit::Chakra | Emit::Mscclpp) {
        return Err(
            "error: --bands writes a schedule with one algorithm per size band, which RON, JSON \
             and MSCCL XML hold; Chakra traces and MSCCL++ plans hold one size (use --size)"
                .to_string(),
        );
    }
    if banded && emit == Emit::MscclXml && !has_output {
        return Err(
            "error: --emit msccl-xml with --bands writes one algorithm file per band: give their \
             directory with -o DIR"
                .to_string(),
        );
    }
    Ok(())
}

pub fn compile(
    path: &Path,
    request: &Request<'_>,
    output: Option<&Path>,
) -> Result<ExitCode, String> {
    let Request {
        options,
        at,
        emit,
        form,
        phase,
        trace_sizes: sizes,
        report: report_format,
    } = request;
    let (emit, form, phase, sizes, report_format) = (*emit, *form, *phase, *sizes, *report_format);
    let output = output_file(&[path], output)?;
    let banded = matches!(at, Sizes::Bands(_));
    refuse_mismatched(request, output.is_some())?;
    // The traces' options and prefix are checked before the (possibly long) compile.
    let traces = match emit {
        Emit::Chakra => Some((
            chakra_options(phase, sizes)?,
            output.ok_or(
                "error: --emit chakra writes one file per rank: give their prefix with -o PREFIX",
            )?,
        )),
        _ => None,
    };
    let text = read(path)?;
    let loaded = topoc::load(&text).map_err(|e| report_error(path, &text, &e))?;
    let patterned = matches!(emit, Emit::Ron | Emit::Json) && *at == Sizes::Declared;
    // A machine whose explicit schedule is over the limits may still compile as a pattern;
    // a memory budget the user set is obeyed as given (`--compact` asks for the pattern).
    let default_budget = options.budget.memory_bytes == topoc::limits::DEFAULT_MEMORY_BYTES;
    let oversized = default_budget && topoc::compile::pattern::explicit_too_large(&loaded, options);
    if patterned && (form == Form::Compact || oversized) {
        match pattern(path, &text, &loaded, request, output) {
            Ok(Some(done)) => return Ok(done),
            Ok(None) => {}
            Err(e) if form == Form::Compact => return Err(e),
            // Too large as a pattern as well: the explicit path says why it refuses, or
            // compiles what fits.
            Err(_) => {}
        }
    }
    // A schedule's own file is written beside the proof and put in place once it is proved.
    let format = if emit == Emit::Json {
        Format::Json
    } else {
        Format::Ron
    };
    let staging = output.filter(|o| matches!(emit, Emit::Ron | Emit::Json) && !is_special(o));
    let (compiled, staged) = match staging {
        Some(o) => topoc::compile::compile_sized_beside(&loaded, options, at, |schedule| {
            stage_with(o, |w| serial::write_with(schedule, format, form, w))
        }),
        None => (topoc::compile::compile_sized(&loaded, options, at), None),
    };
    topoc::progress::finish();
    // Not proved: its file is removed before anything else is written.
    let staged = staged.filter(|_| compiled.is_ok());
    if compiled.is_err() && patterned && default_budget && !oversized {
        if let Some(done) = pattern(path, &text, &loaded, request, output)? {
            return Ok(done);
        }
    }
    let compiled = compiled.map_err(|e| report_error(path, &text, &e))?;
    let schedule = compiled.schedule.schedule();
    let out = match emit {
        Emit::Ron | Emit::Json => {
            report(&compiled, report_format)?;
            let what = "verified schedule";
            return match (staged, output) {
                (Some(staged), Some(o)) => {
                    staged?.commit()?;
                    written(o, what, report_format);
                    Ok(ExitCode::SUCCESS)
                }
                _ => write_out(output, what, report_format, |w| {
                    serial::write_with(schedule, format, form, w)
                }),
            };
        }
        Emit::Chakra => {
            let Some((options, prefix)) = traces else {
                return Err("error: --emit chakra needs -o PREFIX".to_string());
            };
            let export = chakra::export(&compiled.schedule, &options).map_err(|e| {
                format!(
                    "error: {} cannot be exported as Chakra traces: {e}\nnothing was written",
                    path.display()
                )
            })?;
            report(&compiled, report_format)?;
            return write_chakra(prefix, &export, report_format);
        }
        Emit::MscclXml if banded => {
            let dir = output.ok_or("error: --bands with --emit msccl-xml needs -o DIR")?;
            let files = msccl_bands(&compiled, phase).map_err(|e| {
                format!(
                    "error: {} cannot be exported as MSCCL XML: {e}\nnothing was written",
                    path.display()
                )
            })?;
            report(&compiled, report_format)?;
            return write_bands(dir, &files, report_format);
        }
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
        Emit::Mscclpp => {
            let options = mscclpp::Options {
                phase: phase.map(str::to_string),
            };
            mscclpp::to_json(&compiled.schedule, &options).map_err(|e| {
                format!(
                    "error: {} cannot be exported as an MSCCL++ execution plan: {e}\nnothing was \
                     written",
                    path.display()
                )
            })?
        }
    };
    report(&compiled, report_format)?;
    let what = match emit {
        Emit::MscclXml => "MSCCL algorithm of the verified schedule",
        Emit::Mscclpp => "MSCCL++ execution plan of the verified schedule",
        Emit::Ron | Emit::Json | Emit::Chakra => "verified schedule",
    };
    write_out(output, what, report_format, |w| w.write_all(out.as_bytes()))
}

/// Says on standard error where the output went, unless the report there is JSON: a tool
/// that reads `--report json` from standard error reads the report alone.
fn status(report: ReportFormat, line: impl FnOnce() -> String) {
    if report == ReportFormat::Text {
        eprintln!("{}", line());
    }
}

/// Says that `what` was written to `output` ([`status`]).
fn written(output: &Path, what: &str, report: ReportFormat) {
    let to = output.display().to_string();
    status(report, || {
        format!("{what} written to {}", topoc::visible::line(&to))
    });
}

/// Writes what `write` writes to the output file (whole or not at all) and says so, or to
/// standard output; streamed either way.
fn write_out(
    output: Option<&Path>,
    what: &str,
    report: ReportFormat,
    write: impl FnOnce(&mut dyn std::io::Write) -> std::io::Result<()>,
) -> Result<ExitCode, String> {
    match output {
        Some(o) => {
            write_atomic_with(o, write)?;
            written(o, what, report);
        }
        None => write_stdout(write)?,
    }
    Ok(ExitCode::SUCCESS)
}

/// Compiles `loaded` to the pattern form and writes it, when every phase is one
/// ([`topoc::compile::pattern::compile_pattern`]); `None` when it is not.
fn pattern(
    path: &Path,
    text: &str,
    loaded: &topoc::Loaded,
    request: &Request<'_>,
    output: Option<&Path>,
) -> Result<Option<ExitCode>, String> {
    let compiled = topoc::compile::pattern::compile_pattern(loaded, &request.options);
    topoc::progress::finish();
    let Some(compiled) = compiled.map_err(|e| report_error(path, text, &e))? else {
        return Ok(None);
    };
    let format = if request.emit == Emit::Json {
        Format::Json
    } else {
        Format::Ron
    };
    let pattern = compiled.pattern.pattern();
    report_phases(
        &compiled.notes,
        &pattern.phases,
        &pattern.machine,
        request.report,
    )?;
    write_out(
        output,
        "verified schedule, in the pattern form,",
        request.report,
        |w| serial::write_pattern_with(pattern, format, Form::Compact, w),
    )
    .map(Some)
}

/// The MSCCL files of the banded exchange `--phase` names (or the only one): a file name and
/// its XML per band, `NN-SIZE.xml` after the band's position and the size it was compiled for.
fn msccl_bands(compiled: &Compiled, phase: Option<&str>) -> Result<Vec<(String, String)>, String> {
    let schedule = compiled.schedule.schedule();
    let exchanges: Vec<&str> = schedule
        .program
        .iter()
        .filter_map(|item| match item {
            ProgramItem::Bands { name, .. } => Some(name.as_str()),
            _ => None,
        })
        .collect();
    let exchange = match (phase, exchanges.as_slice()) {
        (Some(name), _) => name,
        (None, [only]) => only,
        (None, _) => {
            return Err(format!(
                "the schedule has {} banded exchanges and an MSCCL file holds one; choose one \
                 with --phase NAME",
                exchanges.len()
            ))
        }
    };
    let files = msccl::bands_to_xml(&compiled.schedule, exchange).map_err(|e| e.to_string())?;
    Ok(files
        .into_iter()
        .enumerate()
        .map(|(i, (band, xml))| {
            let size = schedule
                .phase(&band.phase)
                .map_or(0, |p| p.elements.saturating_mul(p.dtype.size_bytes()));
            (
                format!("{i:02}-{}.xml", topoc::compile::size_name(size)),
                xml,
            )
        })
        .collect())
}

/// Writes each band's file into `dir` (created if missing), each whole or not at all.
fn write_bands(
    dir: &Path,
    files: &[(String, String)],
    report: ReportFormat,
) -> Result<ExitCode, String> {
    std::fs::create_dir_all(dir)
        .map_err(|e| format!("error: cannot create the directory {}: {e}", dir.display()))?;
    for (name, xml) in files {
        write_atomic(&dir.join(name), xml)?;
    }
    let to = dir.display().to_string();
    status(report, || {
        format!(
            "{} MSCCL algorithms of the verified schedule, one per size band, written to {}",
            files.len(),
            topoc::visible::line(&to)
        )
    });
    Ok(ExitCode::SUCCESS)
}

/// The Chakra export's options from the command line.
fn chakra_options(phase: Option<&str>, sizes: Option<&str>) -> Result<chakra::Options, String> {
    let sizes = match sizes {
        Some(list) => list
            .split(',')
            .map(topoc::simulate::parse_size)
            .collect::<Result<_, _>>()
            .map_err(|e| format!("error: --sizes: {e}"))?,
        None => Vec::new(),
    };
    Ok(chakra::Options {
        phase: phase.map(str::to_string),
        sizes,
    })
}

/// Writes every file of a Chakra export whole or not at all: all into a temporary directory
/// beside them first, then each renamed into place.
fn write_chakra(
    prefix: &Path,
    export: &chakra::Export,
    report: ReportFormat,
) -> Result<ExitCode, String> {
    let fail = |e: &dyn std::fmt::Display| {
        format!("error: cannot write the traces {}.*: {e}", prefix.display())
    };
    let text = prefix
        .to_str()
        .ok_or_else(|| fail(&"the prefix is not valid UTF-8"))?;
    if text.is_empty() || text.ends_with(std::path::MAIN_SEPARATOR) || text.ends_with('/') {
        return Err(fail(&"-o needs a file prefix, not a directory"));
    }
    let dir = match prefix.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let tmp = tempfile::TempDir::new_in(dir).map_err(|e| fail(&e))?;
    let files = export.files(text);
    let mut staged = Vec::with_capacity(files.len());
    for (name, bytes) in &files {
        let file = Path::new(name)
            .file_name()
            .ok_or_else(|| fail(&format!("`{name}` has no file name")))?;
        let at = tmp.path().join(file);
        let mut f = std::fs::File::create(&at).map_err(|e| fail(&e))?;
        std::io::Write::write_all(&mut f, bytes).map_err(|e| fail(&e))?;
        f.sync_all().map_err(|e| fail(&e))?;
        staged.push((at, Path::new(name).to_path_buf()));
    }
    for (from, to) in &staged {
        std::fs::rename(from, to).map_err(|e| fail(&e))?;
    }
    let sets = export.sets.len();
    let ranks = export.sets.first().map_or(0, |s| s.ranks.len());
    status(report, || {
        format!(
            "Chakra traces of the verified schedule written: {sets} set(s) of {ranks} rank(s), \
             {} files under {}.*",
            files.len(),
            topoc::visible::line(&prefix.display().to_string())
        )
    });
    Ok(ExitCode::SUCCESS)
}
