//! `topoc verify`: prove a schedule and print the link report.

use super::{load_verified, ReportFormat};
use std::path::Path;
use std::process::ExitCode;

pub fn verify(path: &Path, format: ReportFormat) -> Result<ExitCode, String> {
    let verified = load_verified(path)?;
    match format {
        ReportFormat::Text => {
            print!("{}", verified.report());
            println!("{}: verified", path.display());
        }
        ReportFormat::Json => println!(
            "{}",
            serde_json::to_string_pretty(verified.report())
                .map_err(|e| format!("error: cannot write the report: {e}"))?
        ),
    }
    Ok(ExitCode::SUCCESS)
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
