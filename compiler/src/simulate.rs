//! Cost tables: estimated time, lower bound and efficiency of a schedule's phases over a range
//! of message sizes, for every method that applies (`topoc simulate`).
//!
//! The schedules of most methods are independent of the vector's length except through their
//! chunk sizes, so one compiled (and verified) schedule per method is re-chunked for each size
//! ([`schedule_ir::Phase::with_elements`]) and costed with the α-β model of
//! [`schedule_ir::cost`]. A method whose structure depends on the size ([`Method::sized`]:
//! `trees`, whose pipeline depth is chosen for the phase's vector) is lowered again for every
//! size, and each of those schedules verified, as compiling a file declaring that size would.

use crate::lower::PhaseSpec;
use crate::lower::{Knobs, Method};
use crate::{compile, Options};
use schedule_ir::cost::{self, Bound, Estimate};
use schedule_ir::{Machine, Phase, Schedule};
use serde::Serialize;

/// One row of the table: one phase, one method, one size.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    /// The phase's name.
    pub phase: String,
    /// The method that produced the schedule.
    pub algorithm: String,
    /// Vector size in bytes (rounded down to whole elements).
    pub bytes: u64,
    /// Vector length in elements.
    pub elements: u64,
    /// BSP steps.
    pub steps: u32,
    /// The α-β estimate.
    pub estimate: Estimate,
    /// The lower bound.
    pub bound: Bound,
    /// `bound / estimate`.
    pub efficiency: f64,
    /// The link direction that carries the most bytes over the phase.
    pub busiest: Option<Busiest>,
}

/// The busiest link direction of a phase.
#[derive(Clone, Debug, Serialize)]
pub struct Busiest {
    /// The link's id.
    pub link: String,
    /// The direction's sending end.
    pub from: String,
    /// The direction's receiving end.
    pub to: String,
    /// Bytes it carries over the whole phase.
    pub bytes: u64,
}

/// A method that does not apply to the machine, and why.
#[derive(Clone, Debug, Serialize)]
pub struct Skipped {
    /// The method.
    pub algorithm: String,
    /// Why it does not apply.
    pub reason: String,
}

/// The whole table.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Table {
    /// Rows by phase, method, then size.
    pub rows: Vec<Row>,
    /// Methods that do not apply.
    pub skipped: Vec<Skipped>,
}

/// Costs every applicable method for a topology text at each size in bytes.
pub fn simulate_topology(
    source: &str,
    sizes: &[u64],
    phase: Option<&str>,
    base: &Options,
) -> Table {
    let mut table = Table::default();
    for method in Method::ALL {
        let options = Options {
            algorithm: Some(method.name().to_string()),
            ..base.clone()
        };
        match compile(source, &options) {
            Ok(compiled) if method.sized() => {
                table
                    .rows
                    .extend(sized_rows(&compiled, method, sizes, phase));
            }
            Ok(compiled) => table
                .rows
                .extend(rows(compiled.schedule.schedule(), sizes, phase)),
            Err(crate::Error::Topology(problems)) => table.skipped.push(Skipped {
                algorithm: method.name().to_string(),
                reason: problems
                    .iter()
                    .flat_map(|p| p.notes.iter().chain(std::iter::once(&p.message)))
                    .find(|n| n.starts_with(method.name()))
                    .or_else(|| problems.first().map(|p| &p.message))
                    .cloned()
                    .unwrap_or_default(),
            }),
            Err(other) => table.skipped.push(Skipped {
                algorithm: method.name().to_string(),
                reason: other.to_string(),
            }),
        }
    }
    table.rows.sort_by(|a, b| {
        (a.phase.as_str(), a.bytes, a.algorithm.as_str()).cmp(&(
            b.phase.as_str(),
            b.bytes,
            b.algorithm.as_str(),
        ))
    });
    table
}

/// Costs the phases of one schedule at each size in bytes.
pub fn rows(schedule: &Schedule, sizes: &[u64], only: Option<&str>) -> Vec<Row> {
    let mut out = Vec::new();
    for phase in &schedule.phases {
        if only.is_some_and(|name| name != phase.name) {
            continue;
        }
        for &bytes in sizes {
            let elements = bytes / phase.dtype.size_bytes();
            let sized = phase.with_elements(elements);
            out.push(row(&schedule.machine, &sized));
        }
    }
    out
}

/// Costs the phases of a schedule compiled by `method` at each size, lowering and verifying
/// each phase again for the size. Where that fails (it does not for a method that compiled the
/// file), the compiled phase is re-chunked instead.
fn sized_rows(
    compiled: &crate::Compiled,
    method: Method,
    sizes: &[u64],
    only: Option<&str>,
) -> Vec<Row> {
    let schedule = compiled.schedule.schedule();
    let mut out = Vec::new();
    for (i, phase) in schedule.phases.iter().enumerate() {
        if only.is_some_and(|name| name != phase.name) {
            continue;
        }
        for &bytes in sizes {
            let elements = bytes / phase.dtype.size_bytes();
            let spec = PhaseSpec {
                name: phase.name.clone(),
                collective: phase.collective,
                op: phase.op,
                dtype: phase.dtype,
                elements,
            };
            let relowered = method
                .lower(&compiled.machine, &spec, &Knobs::default())
                .ok()
                .and_then(|lowered| {
                    let mut sized = schedule.clone();
                    *sized.phases.get_mut(i)? = lowered.phase;
                    schedule_ir::verify(sized).ok()
                });
            out.push(
                match relowered.as_ref().and_then(|v| {
                    let s = v.schedule();
                    Some((&s.machine, s.phases.get(i)?))
                }) {
                    Some((machine, sized)) => row(machine, sized),
                    None => row(&schedule.machine, &phase.with_elements(elements)),
                },
            );
        }
    }
    out
}

fn row(machine: &Machine, phase: &Phase) -> Row {
    let loads = cost::step_loads(machine, phase);
    let estimate = cost::estimate_loads(machine, &loads);
    let bound = cost::lower_bound(machine, phase);
    let mut totals = vec![0u64; machine.links.len() * 2];
    for step in &loads {
        for load in &step.loads {
            if let Some(t) = totals.get_mut(load.direction) {
                *t = t.saturating_add(load.bytes);
            }
        }
    }
    let busiest = totals
        .iter()
        .enumerate()
        .filter(|(_, &b)| b > 0)
        // The first of equal maxima, so the output is deterministic.
        .fold(None, |best: Option<(usize, u64)>, (d, &b)| match best {
            Some((_, bb)) if bb >= b => best,
            _ => Some((d, b)),
        })
        .and_then(|(d, bytes)| {
            let link = machine.links.get(d / 2)?;
            let (from, to) = if d % 2 == 0 {
                (link.a, link.b)
            } else {
                (link.b, link.a)
            };
            Some(Busiest {
                link: link.name.clone(),
                from: machine.node_name(from),
                to: machine.node_name(to),
                bytes,
            })
        });
    Row {
        phase: phase.name.clone(),
        algorithm: phase.algorithm.clone(),
        bytes: phase.elements * phase.dtype.size_bytes(),
        elements: phase.elements,
        steps: phase.steps,
        efficiency: cost::efficiency(&bound, &estimate),
        estimate,
        bound,
        busiest,
    }
}

/// Parses a size such as `4096`, `512B`, `1KiB`, `64MiB`, `1GiB` or `2MB` (decimal units).
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| format!("`{text}` is not a size (examples: 4096, 1KiB, 64MiB, 1GiB)"))?;
    let scale: f64 = match unit.trim() {
        "" | "B" => 1.0,
        "KiB" | "K" => 1024.0,
        "MiB" | "M" => 1024.0 * 1024.0,
        "GiB" | "G" => 1024.0 * 1024.0 * 1024.0,
        "KB" | "kB" => 1e3,
        "MB" => 1e6,
        "GB" => 1e9,
        other => {
            return Err(format!(
                "unknown unit `{other}` in `{text}`; use B, KiB, MiB, GiB, KB, MB or GB"
            ))
        }
    };
    let bytes = value * scale;
    if !(0.0..=1e18).contains(&bytes) {
        return Err(format!("`{text}` is out of range"));
    }
    Ok(bytes as u64)
}

/// Renders a byte count with binary units: `1 KiB`, `64 MiB`, `1.5 GiB`, `100 B`.
pub fn format_bytes(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["B", "KiB", "MiB", "GiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if value.fract() == 0.0 {
        format!("{value:.0} {}", UNITS[unit])
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// Renders seconds with a unit that keeps three significant digits.
pub fn format_seconds(s: f64) -> String {
    if s >= 1.0 {
        format!("{s:.3} s")
    } else if s >= 1e-3 {
        format!("{:.3} ms", s * 1e3)
    } else {
        format!("{:.3} µs", s * 1e6)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_binary_and_decimal_units() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("1KiB"), Ok(1024));
        assert_eq!(parse_size("64MiB"), Ok(64 << 20));
        assert_eq!(parse_size("1GiB"), Ok(1 << 30));
        assert_eq!(parse_size("2MB"), Ok(2_000_000));
        assert!(parse_size("12 parsecs").is_err());
        assert!(parse_size("MiB").is_err());
    }

    #[test]
    fn bytes_render_with_binary_units() {
        assert_eq!(format_bytes(1024), "1 KiB");
        assert_eq!(format_bytes(3 << 29), "1.5 GiB");
        assert_eq!(format_bytes(100), "100 B");
    }
}
