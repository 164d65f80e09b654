//! `topoc verify`: prove a schedule and print the link report.

use super::{is_topology, load_verified, read, ReportFormat};
use serde::Serialize;
use std::path::Path;
use std::process::ExitCode;

pub fn verify(path: &Path, format: ReportFormat) -> Result<ExitCode, String> {
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

/// Every verifier error, one per line.
pub fn render_errors(errors: &schedule_ir::VerifyErrors) -> String {
    errors
        .errors
        .iter()
        .map(|e| format!("error: {e}"))
        .collect::<Vec<_>>()
        .join("\n")
}
