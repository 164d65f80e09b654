//! `topoc verify`: prove a schedule and print the link report.

use super::{is_topology, load_verified, read, ReportFormat};
use serde::Serialize;
use std::path::Path;
use std::process::ExitCode;

pub fn verify(path: &Path, format: ReportFormat) -> Result<ExitCode, String> {
    let text = read(path)?;
    if !is_topology(&text) && schedule_ir::serial::is_pattern(&text) {
        return verify_pattern(path, &text, format);
    }
    if format == ReportFormat::Json {
        return verify_json(path);
    }
    let verified = load_verified(path)?;
    // The report quotes the schedule's names: control characters are shown as text.
    print!(
        "{}",
        topoc::visible::message(&verified.report().to_string())
    );
    println!(
        "{}: verified",
        topoc::visible::line(&path.display().to_string())
    );
    Ok(ExitCode::SUCCESS)
}

/// The JSON form: `{"ok": true, "report": …}`, or `{"ok": false, "errors": […]}` with every
/// verifier error (its fields and its message) when the schedule is refused.
fn verify_json(path: &Path) -> Result<ExitCode, String> {
    #[derive(Serialize)]
    struct Failure<'a> {
        ok: bool,
        errors: Vec<Entry<'a>>,
    }
    #[derive(Serialize)]
    struct Entry<'a> {
        message: String,
        error: &'a schedule_ir::VerifyError,
    }
    #[derive(Serialize)]
    struct Success<'a> {
        ok: bool,
        report: &'a schedule_ir::Report,
    }
    let text = read(path)?;
    let refused = if is_topology(&text) {
        None
    } else {
        let schedule = schedule_ir::serial::from_str(&text)
            .map_err(|e| format!("error: {} is not a readable schedule: {e}", path.display()))?;
        schedule_ir::verify(schedule).err()
    };
    let json = match &refused {
        Some(errors) => serde_json::to_string_pretty(&Failure {
            ok: false,
            errors: errors
                .errors
                .iter()
                .map(|e| Entry {
                    message: e.to_string(),
                    error: e,
                })
                .collect(),
        }),
        None => {
            let verified = load_verified(path)?;
            serde_json::to_string_pretty(&Success {
                ok: true,
                report: verified.report(),
            })
        }
    }
    .map_err(|e| format!("error: cannot write the report: {e}"))?;
    println!("{json}");
    Ok(if refused.is_some() {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// A schedule in the pattern form, proved without expanding it: its report, or every
/// problem (as text, or in the JSON of [`verify_json`]).
fn verify_pattern(path: &Path, text: &str, format: ReportFormat) -> Result<ExitCode, String> {
    let pattern = schedule_ir::serial::pattern_from_str(text)
        .map_err(|e| format!("error: {} is not a readable schedule: {e}", path.display()))?;
    let verdict = schedule_ir::verify_pattern(pattern);
    if format == ReportFormat::Json {
        #[derive(Serialize)]
        struct Entry<'a> {
            message: String,
            error: &'a schedule_ir::VerifyError,
        }
        let json = match &verdict {
            Ok(verified) => serde_json::json!({"ok": true, "report": verified.report()}),
            Err(errors) => serde_json::json!({
                "ok": false,
                "errors": errors
                    .errors
                    .iter()
                    .map(|e| Entry { message: e.to_string(), error: e })
                    .collect::<Vec<_>>(),
            }),
        };
        let json = serde_json::to_string_pretty(&json)
            .map_err(|e| format!("error: cannot write the report: {e}"))?;
        println!("{json}");
        return Ok(if verdict.is_ok() {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        });
    }
    let shown = path.display().to_string();
    let name = topoc::visible::line(&shown);
    match verdict {
        Ok(verified) => {
            print!(
                "{}",
                topoc::visible::message(&verified.report().to_string())
            );
            println!("{name}: verified");
            Ok(ExitCode::SUCCESS)
        }
        Err(errors) => Err(format!(
            "{}\nerror: {name} failed verification with {} problem(s); it will not run",
            render_errors(&errors),
            errors.errors.len()
        )),
    }
}

/// Every verifier error, one per line.
pub fn render_errors(errors: &schedule_ir::VerifyErrors) -> String {
    errors
        .errors
        .iter()
        .map(|e| format!("error: {e}"))
        .collect::<Vec<_>>()
        .join("\n")
}
