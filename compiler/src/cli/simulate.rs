//! `topoc simulate`: cost and bound table over message sizes.

use super::{is_topology, read, ReportFormat};
use std::path::Path;
use std::process::ExitCode;
use topoc::simulate::{self, format_bytes, format_seconds, Table};

pub fn simulate(
    path: &Path,
    sizes: &str,
    phase: Option<&str>,
    format: ReportFormat,
) -> Result<ExitCode, String> {
    let sizes: Vec<u64> = sizes
        .split(',')
        .map(simulate::parse_size)
        .collect::<Result<_, _>>()
        .map_err(|e| format!("error: --sizes: {e}"))?;
    let text = read(path)?;
    let table = if is_topology(&text) {
        // Report problems with the file itself before costing anything.
        topoc::compile::load(&text).map_err(|e| super::report_error(path, &text, &e))?;
        simulate::simulate_topology(&text, &sizes, phase)
    } else {
        let verified = super::load_verified(path)?;
        Table {
            rows: simulate::rows(verified.schedule(), &sizes, phase),
            skipped: Vec::new(),
        }
    };
    if table.rows.is_empty() {
        let why: Vec<String> = table
            .skipped
            .iter()
            .map(|s| format!("  {}: {}", s.algorithm, s.reason))
            .collect();
        return Err(format!(
            "error: nothing to simulate in {}{}{}",
            path.display(),
            if why.is_empty() { "" } else { "\n" },
            why.join("\n")
        ));
    }
    match format {
        ReportFormat::Json => println!(
            "{}",
            serde_json::to_string_pretty(&table)
                .map_err(|e| format!("error: cannot write the table: {e}"))?
        ),
        ReportFormat::Text => print_table(&table),
    }
    Ok(ExitCode::SUCCESS)
}

fn print_table(table: &Table) {
    let header = [
        "phase",
        "algorithm",
        "size",
        "steps",
        "estimate",
        "bound",
        "binding",
        "efficiency",
        "busiest link direction",
    ];
    let mut lines: Vec<Vec<String>> = vec![header.iter().map(|s| s.to_string()).collect()];
    for r in &table.rows {
        lines.push(vec![
            r.phase.clone(),
            r.algorithm.clone(),
            format_bytes(r.bytes),
            r.steps.to_string(),
            format_seconds(r.estimate.seconds),
            format_seconds(r.bound.seconds),
            r.bound.which.to_string(),
            format!("{:.1}%", 100.0 * r.efficiency),
            r.busiest.as_ref().map_or("-".to_string(), |b| {
                format!("{} {}→{} ({})", b.link, b.from, b.to, format_bytes(b.bytes))
            }),
        ]);
    }
    let widths: Vec<usize> = (0..header.len())
        .map(|c| {
            lines
                .iter()
                .map(|l| l[c].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    for line in &lines {
        let cells: Vec<String> = line
            .iter()
            .zip(&widths)
            .map(|(cell, w)| format!("{cell:<w$}"))
            .collect();
        println!("{}", cells.join("  ").trim_end());
    }
    for s in &table.skipped {
        println!("{} does not apply: {}", s.algorithm, s.reason);
    }
}
