//! `topoc simulate`: cost and bound table over message sizes.

use super::{is_topology, read, write_atomic, ReportFormat};
use serde::Serialize;
use std::path::Path;
use std::process::ExitCode;
use topoc::simulate::{self, format_bytes, format_seconds, Table};
use topoc::visible;

/// The sizes to simulate: the `--sizes` list, or the sweep `-b`..`-e` by `-f`.
pub fn sizes(list: &str, sweep: Option<(String, String)>, factor: u64) -> Result<Vec<u64>, String> {
    let Some((min, max)) = sweep else {
        return list
            .split(',')
            .map(simulate::parse_size)
            .collect::<Result<_, _>>()
            .map_err(|e| format!("error: --sizes: {e}"));
    };
    let min = simulate::parse_size(&min).map_err(|e| format!("error: -b/--minbytes: {e}"))?;
    let max = simulate::parse_size(&max).map_err(|e| format!("error: -e/--maxbytes: {e}"))?;
    simulate::sweep(min, max, factor).map_err(|e| format!("error: {e}"))
}

pub fn simulate(
    path: &Path,
    sizes: &[u64],
    phase: Option<&str>,
    format: ReportFormat,
    plot: Option<&Path>,
    failures: &super::Failures,
    base: &topoc::Options,
) -> Result<ExitCode, String> {
    let text = read(path)?;
    if !failures.is_empty() {
        if !is_topology(&text) {
            return Err(
                "error: --fail-link and --fail-node apply to topology files, not schedules"
                    .to_string(),
            );
        }
        let failed = topoc::Options {
            fail_links: failures.links.clone(),
            fail_nodes: failures.nodes.clone(),
            ..base.clone()
        };
        return degraded(path, &text, sizes, phase, format, plot, &failed);
    }
    let table = if is_topology(&text) {
        let report = |e: topoc::Error| super::report_error(path, &text, &e);
        let loaded = topoc::load(&text).map_err(report)?;
        if let Some(name) = phase {
            let requests = loaded.phases().map_err(report)?;
            let names: Vec<&str> = requests.iter().map(|r| r.spec.name.as_str()).collect();
            if !names.contains(&name) {
                return Err(super::no_phase(path, name, &names));
            }
        }
        simulate::simulate_topology(&loaded, sizes, phase, base).map_err(report)?
    } else {
        let verified = super::load_verified(path)?;
        let schedule = verified.schedule();
        if let Some(name) = phase.filter(|&name| schedule.phase_for_bytes(name, 0).is_err()) {
            let mut names: Vec<&str> = schedule.phases.iter().map(|p| p.name.as_str()).collect();
            names.extend(schedule.program.iter().filter_map(|item| match item {
                schedule_ir::ProgramItem::Bands { name, .. } => Some(name.as_str()),
                _ => None,
            }));
            if !names.contains(&name) {
                return Err(super::no_phase(path, name, &names));
            }
        }
        simulate::rows(schedule, sizes, phase)
    };
    if table.rows.is_empty() {
        let why: Vec<String> = table
            .skipped
            .iter()
            .map(|s| format!("  phase `{}`, {}: {}", s.phase, s.algorithm, s.reason))
            .collect();
        return Err(format!(
            "error: nothing to simulate in {}{}{}",
            path.display(),
            if why.is_empty() { "" } else { "\n" },
            why.join("\n")
        ));
    }
    if let Some(plot) = plot {
        write_plot(plot, &table)?;
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

/// The cost of running with failures against the healthy machine: both tables, and per phase
/// and size the best estimate of each with the slowdown. `failed` holds the failures; the
/// healthy machine is compiled with the same options without them.
fn degraded(
    path: &Path,
    text: &str,
    sizes: &[u64],
    phase: Option<&str>,
    format: ReportFormat,
    plot: Option<&Path>,
    failed: &topoc::Options,
) -> Result<ExitCode, String> {
    #[derive(Serialize)]
    struct Slowdown {
        phase: String,
        bytes: u64,
        healthy_seconds: f64,
        degraded_seconds: f64,
        ratio: f64,
    }
    #[derive(Serialize)]
    struct Out<'a> {
        failed_links: &'a [String],
        failed_nodes: &'a [String],
        healthy: &'a Table,
        degraded: &'a Table,
        slowdown: Vec<Slowdown>,
    }
    let report = |e: topoc::Error| super::report_error(path, text, &e);
    let loaded = topoc::load(text).map_err(report)?;
    let healthy_options = topoc::Options {
        fail_links: Vec::new(),
        fail_nodes: Vec::new(),
        ..failed.clone()
    };
    let healthy =
        simulate::simulate_topology(&loaded, sizes, phase, &healthy_options).map_err(report)?;
    let degraded = simulate::simulate_topology(&loaded, sizes, phase, failed).map_err(report)?;
    if let Some(plot) = plot {
        // The picture is of the machine as it runs: with the failures.
        write_plot(plot, &degraded)?;
    }
    let best = |table: &Table, name: &str, bytes: u64| {
        table
            .rows
            .iter()
            .filter(|r| r.phase == name && r.bytes == bytes)
            .map(|r| r.estimate.seconds)
            .fold(f64::INFINITY, f64::min)
    };
    let mut slowdown = Vec::new();
    for r in &healthy.rows {
        if slowdown
            .iter()
            .any(|s: &Slowdown| s.phase == r.phase && s.bytes == r.bytes)
        {
            continue;
        }
        let (h, d) = (
            best(&healthy, &r.phase, r.bytes),
            best(&degraded, &r.phase, r.bytes),
        );
        slowdown.push(Slowdown {
            phase: r.phase.clone(),
            bytes: r.bytes,
            healthy_seconds: h,
            degraded_seconds: d,
            ratio: d / h,
        });
    }
    let what: Vec<String> = failed
        .fail_links
        .iter()
        .chain(&failed.fail_nodes)
        .cloned()
        .collect();
    match format {
        ReportFormat::Json => println!(
            "{}",
            serde_json::to_string_pretty(&Out {
                failed_links: &failed.fail_links,
                failed_nodes: &failed.fail_nodes,
                healthy: &healthy,
                degraded: &degraded,
                slowdown,
            })
            .map_err(|e| format!("error: cannot write the table: {e}"))?
        ),
        ReportFormat::Text => {
            println!("healthy machine:");
            print_table(&healthy);
            println!();
            println!("with {} out of service:", what.join(", "));
            print_table(&degraded);
            println!();
            println!("cost of the failure (best method each way):");
            for s in &slowdown {
                println!(
                    "  {} {}: {} healthy, {} degraded, {:.2}x",
                    visible::line(&s.phase),
                    format_bytes(s.bytes),
                    format_seconds(s.healthy_seconds),
                    format_seconds(s.degraded_seconds),
                    s.ratio
                );
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Draws the table to `path`, whole or not at all.
fn write_plot(path: &Path, table: &Table) -> Result<(), String> {
    let svg = simulate::plot::svg(table).map_err(|e| format!("error: --plot: {e}"))?;
    write_atomic(path, &svg)?;
    eprintln!("plot written to {}", path.display());
    Ok(())
}

/// The table in nccl-tests' order of columns, after a line per phase giving its collective,
/// ranks and bus-bandwidth factor.
fn print_table(table: &Table) {
    let mut seen: Vec<&str> = Vec::new();
    for r in &table.rows {
        if !seen.contains(&r.phase.as_str()) {
            seen.push(&r.phase);
            println!(
                "# phase {}: {}, n = {} ranks, busbw = algbw × {:.4}",
                visible::line(&r.phase),
                r.collective,
                r.ranks,
                r.bus_factor
            );
        }
    }
    let header = [
        "phase",
        "size (B)",
        "count",
        "method",
        "time (µs)",
        "algbw (GB/s)",
        "busbw (GB/s)",
        "bound (µs)",
        "binding",
        "efficiency",
        "auto",
        "steps",
        "busiest link direction",
    ];
    let mut lines: Vec<Vec<String>> = vec![header.iter().map(|s| s.to_string()).collect()];
    for r in &table.rows {
        lines.push(vec![
            visible::line(&r.phase).into_owned(),
            r.bytes.to_string(),
            r.elements.to_string(),
            r.algorithm.clone(),
            format!("{:.2}", r.estimate.seconds * 1e6),
            format!("{:.2}", r.algbw_gbps),
            format!("{:.2}", r.busbw_gbps),
            format!("{:.2}", r.bound.seconds * 1e6),
            r.bound.which.to_string(),
            format!("{:.1}%", 100.0 * r.efficiency),
            if r.auto { "*" } else { "" }.to_string(),
            r.steps.to_string(),
            r.busiest.as_ref().map_or("-".to_string(), |b| {
                visible::line(&format!(
                    "{} {}→{} ({})",
                    b.link,
                    b.from,
                    b.to,
                    format_bytes(b.bytes)
                ))
                .into_owned()
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
            // Padded by hand: `format!`'s width is at most 65 535, and a name may be longer.
            .map(|(cell, w)| {
                let pad = w.saturating_sub(cell.chars().count());
                format!("{cell}{}", " ".repeat(pad))
            })
            .collect();
        println!("{}", cells.join("  ").trim_end());
    }
    for s in &table.skipped {
        println!(
            "phase `{}`: {} does not apply: {}",
            s.phase, s.algorithm, s.reason
        );
    }
}
