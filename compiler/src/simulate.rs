//! Cost tables: estimated time, lower bound and efficiency of a schedule's phases over a range
//! of message sizes, for every method that applies (`topoc simulate`).
//!
//! The file is read once. Every exchange phase is lowered on its own by every method that
//! supports its collective, and each schedule verified. The schedules of most methods are
//! independent of the vector's length except through their chunk sizes, so one schedule per
//! phase and method is re-chunked for each size ([`schedule_ir::Phase::with_elements`]) and
//! costed with the α-β model of [`schedule_ir::cost`]. A method whose structure depends on the
//! size ([`Method::sized`]: `trees`, whose pipeline depth is chosen for the vector, and
//! `in-network`, whose segments follow the MTU) is lowered again for every size, and each of
//! those schedules verified, as compiling a file declaring that size would. `rotated-hd`, when
//! its explicit schedule is over the limits, is proved and priced as the pattern `compile`
//! writes for it ([`crate::compile::pattern`]). At every size the cheapest row is the one
//! `auto` takes ([`Row::auto`]).
//!
//! Each row carries nccl-tests' algorithm and bus bandwidth ([`bandwidth`]), sizes can be swept
//! as nccl-tests sweeps them ([`sweep()`]), and a table can be drawn ([`plot`]).

mod bandwidth;
pub mod plot;
mod sweep;

pub use bandwidth::{algbw_gbps, bus_factor, bus_formula};
pub use sweep::sweep;

use crate::compile::PhaseRequest;
use crate::lower::{Knobs, Method, PhaseSpec};
use crate::{Error, Loaded, Options};
use rayon::prelude::*;
use schedule_ir::cost::{self, Bound, Estimate};
use schedule_ir::{Grid, Machine, Pattern, Phase, Schedule, FORMAT_VERSION};
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
    /// The collective, without its root (`allreduce`, `broadcast`, …).
    pub collective: String,
    /// Compute nodes taking part: nccl-tests' ranks.
    pub ranks: usize,
    /// BSP steps.
    pub steps: u32,
    /// The α-β estimate.
    pub estimate: Estimate,
    /// The lower bound.
    pub bound: Bound,
    /// `bound / estimate`.
    pub efficiency: f64,
    /// Algorithm bandwidth: `bytes / estimate`, in GB/s (10⁹ bytes per second).
    pub algbw_gbps: f64,
    /// Bus bandwidth: `algbw_gbps × bus_factor`, in GB/s.
    pub busbw_gbps: f64,
    /// nccl-tests' factor for the collective ([`bus_factor`]).
    pub bus_factor: f64,
    /// The link direction that carries the most bytes over the phase.
    pub busiest: Option<Busiest>,
    /// Whether `auto` takes this method at this size: the lowest estimate of the phase's rows
    /// at the size (of equal estimates, the method first in the registry).
    pub auto: bool,
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

/// A method that does not apply to a phase on the machine, and why.
#[derive(Clone, Debug, Serialize)]
pub struct Skipped {
    /// The phase.
    pub phase: String,
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

/// Costs every method that applies to each phase of a loaded topology at each size in bytes
/// (`only`: one phase). `base` gives the failures and knobs; its algorithm is ignored.
pub fn simulate_topology(
    loaded: &Loaded,
    sizes: &[u64],
    only: Option<&str>,
    base: &Options,
) -> Result<Table, Error> {
    let loaded = loaded.failing(&base.fail_links, &base.fail_nodes)?;
    let machine = &loaded.machine;
    let ir = machine.to_ir();
    let mut table = Table::default();
    for request in loaded.phases()? {
        if only.is_some_and(|name| name != request.spec.name) {
            continue;
        }
        let knobs = request.knobs(base).map_err(|p| Error::Topology(vec![p]))?;
        // The bound's max-flows depend on the machine and the collective only: worked out
        // once for every method and size of the phase.
        let basis = cost::BoundBasis::new(&ir, request.spec.collective);
        let first = table.rows.len();
        // Every method, and a method tuned to the size at every size, is lowered side by
        // side, on every core; the rows keep the methods' and sizes' order.
        let methods: Vec<Result<Vec<Result<Row, Skipped>>, Skipped>> = Method::ALL
            .par_iter()
            .map(|&method| {
                let skip = |reason: String| Skipped {
                    phase: request.spec.name.clone(),
                    algorithm: method.name().to_string(),
                    reason,
                };
                if !method.supports(request.spec.collective) {
                    return Err(skip(format!(
                        "does not lower {}",
                        crate::compile::describe(request.spec.collective)
                    )));
                }
                let phase = match verified(machine, &ir, method, &request.spec, &knobs) {
                    Ok(phase) => phase,
                    // Too large to build in the explicit form, `rotated-hd` is priced as the
                    // pattern `compile` would write. As for `compile`, a memory budget the
                    // user set is obeyed as given: under it, the explicit form or nothing.
                    Err(reason) => {
                        let oversized = method == Method::RotatedHd
                            && knobs.budget.memory_bytes == crate::limits::DEFAULT_MEMORY_BYTES
                            && crate::compile::pattern::explicit_over_limits(
                                machine,
                                &request.spec,
                                &knobs.budget,
                            );
                        let pattern = oversized
                            .then(|| verified_pattern(machine, &ir, &request.spec, &knobs))
                            .flatten()
                            .ok_or_else(|| skip(reason))?;
                        return Ok(sizes
                            .par_iter()
                            .map(|&bytes| Ok(pattern_row(&ir, &basis, &pattern, bytes)))
                            .collect());
                    }
                };
                Ok(sizes
                    .par_iter()
                    .map(|&bytes| {
                        sized_row(
                            machine, &ir, &basis, method, &request, &knobs, &phase, bytes,
                        )
                        .map_err(skip)
                    })
                    .collect())
            })
            .collect();
        for method in methods {
            match method {
                Ok(rows) => {
                    for row in rows {
                        match row {
                            Ok(row) => table.rows.push(row),
                            Err(skipped) => table.skipped.push(skipped),
                        }
                    }
                }
                Err(skipped) => table.skipped.push(skipped),
            }
        }
        mark_auto(&mut table.rows[first..]);
    }
    table.rows.sort_by(|a, b| {
        (a.phase.as_str(), a.bytes, a.algorithm.as_str()).cmp(&(
            b.phase.as_str(),
            b.bytes,
            b.algorithm.as_str(),
        ))
    });
    Ok(table)
}

/// `spec` lowered by `method` and verified on its own, or why not.
fn verified(
    machine: &crate::machine::Machine,
    ir: &Machine,
    method: Method,
    spec: &PhaseSpec,
    knobs: &Knobs,
) -> Result<Phase, String> {
    let lowered = method
        .lower(machine, spec, knobs)
        .map_err(|e| e.to_string())?;
    let schedule = Schedule {
        format_version: FORMAT_VERSION,
        machine: ir.clone(),
        program: Vec::new(),
        phases: vec![lowered.phase],
    };
    let verified = schedule_ir::verify(schedule).map_err(|e| e.to_string())?;
    verified
        .schedule()
        .phases
        .first()
        .cloned()
        .ok_or_else(|| "no phase".to_string())
}

/// `spec`'s `rotated-hd` schedule as a pattern, proved: its grid and the origin's phase; `None`
/// where the pattern form does not hold it or the proof fails.
fn verified_pattern(
    machine: &crate::machine::Machine,
    ir: &Machine,
    spec: &PhaseSpec,
    knobs: &Knobs,
) -> Option<(Grid, Phase)> {
    let (grid, phase) = crate::compile::pattern::pattern_phase(machine, ir, spec, knobs)?;
    let pattern = Pattern {
        grid,
        format_version: FORMAT_VERSION,
        machine: ir.clone(),
        program: Vec::new(),
        phases: vec![phase],
    };
    let mut pattern = schedule_ir::verify_pattern(pattern).ok()?.pattern().clone();
    Some((pattern.grid, pattern.phases.pop()?))
}

/// The row of a proved pattern's phase at `bytes`: re-chunked, and priced from the origin's
/// program ([`schedule_ir::verify::origin_loads`]); every node runs it translated.
fn pattern_row(
    machine: &Machine,
    basis: &cost::BoundBasis,
    (grid, phase): &(Grid, Phase),
    bytes: u64,
) -> Row {
    let phase = phase.with_elements(bytes / phase.dtype.size_bytes());
    let loads = schedule_ir::verify::origin_loads(machine, grid, &phase);
    priced(machine, basis, &phase, &loads)
}

/// The row of `phase` at `bytes`: re-chunked, or for a [`Method::sized`] method lowered again
/// for the size (re-chunked when that fails, which it does not for a method that lowered the
/// phase's own size). A re-chunked phase whose chunks would outgrow the segments that its
/// reducing devices carry (`mtu_bytes`) is no schedule those devices can run: no row, and the
/// reason, at that size.
#[allow(clippy::too_many_arguments)]
fn sized_row(
    machine: &crate::machine::Machine,
    ir: &Machine,
    basis: &cost::BoundBasis,
    method: Method,
    request: &PhaseRequest,
    knobs: &Knobs,
    phase: &Phase,
    bytes: u64,
) -> Result<Row, String> {
    let elements = bytes / phase.dtype.size_bytes();
    let mut failed = None;
    if method.sized() {
        let spec = PhaseSpec {
            elements,
            ..request.spec.clone()
        };
        match verified(machine, ir, method, &spec, knobs) {
            Ok(sized) => return Ok(row(ir, basis, &sized)),
            Err(e) => failed = Some(e),
        }
    }
    let rechunked = phase.with_elements(elements);
    let largest = rechunked.chunks.iter().map(|c| c.len()).max().unwrap_or(0);
    let largest = largest.saturating_mul(rechunked.dtype.size_bytes());
    let devices_run =
        rechunked.programs.iter().enumerate().any(|(n, p)| {
            ir.nodes.get(n).is_some_and(|n| n.capacity.is_some()) && !p.steps.is_empty()
        });
    let mtu = machine.devices.values().map(|d| d.mtu_bytes).min();
    match mtu {
        Some(mtu) if devices_run && largest > u64::from(mtu) => Err(format!(
            "at {} its segments would be {}, over the devices' {mtu}-byte MTU (lowered for \
             that size: {})",
            format_bytes(bytes),
            format_bytes(largest),
            failed.unwrap_or_else(|| "not a method lowered per size".to_string())
        )),
        _ => Ok(row(ir, basis, &rechunked)),
    }
}

/// Marks, per phase and size, the row `auto` takes. `rows` are one phase's, in registry
/// order, so the first of tied estimates wins as under `auto` ([`crate::compile::beats`]).
fn mark_auto(rows: &mut [Row]) {
    let mut best: Vec<(u64, usize)> = Vec::new();
    for (i, r) in rows.iter().enumerate() {
        match best.iter_mut().find(|(bytes, _)| *bytes == r.bytes) {
            Some((_, at))
                if crate::compile::beats(
                    (r.estimate.seconds, i),
                    (rows[*at].estimate.seconds, *at),
                ) =>
            {
                *at = i
            }
            Some(_) => {}
            None => best.push((r.bytes, i)),
        }
    }
    for (_, i) in best {
        rows[i].auto = true;
    }
}

/// Costs the phases of one schedule at each size in bytes. A banded exchange
/// ([`schedule_ir::ProgramItem::Bands`]) is priced as the runtime runs it: at each size, the
/// band that holds it (its rows carry the exchange's name and the band's method); a size no
/// band holds has no row.
pub fn rows(schedule: &Schedule, sizes: &[u64], only: Option<&str>) -> Table {
    let mut out = Table::default();
    let bands: Vec<(&str, &[schedule_ir::Band])> = schedule
        .program
        .iter()
        .filter_map(|item| match item {
            schedule_ir::ProgramItem::Bands { name, bands } => Some((name.as_str(), &bands[..])),
            _ => None,
        })
        .collect();
    for phase in &schedule.phases {
        let banded = bands
            .iter()
            .find(|(_, list)| list.iter().any(|b| b.phase == phase.name));
        // A banded exchange is priced once, at its first band, its band chosen per size; a
        // band asked for by its own phase name is priced as any phase.
        if let Some((name, list)) = banded.filter(|_| only != Some(phase.name.as_str())) {
            if list.first().is_some_and(|b| b.phase == phase.name)
                && only.is_none_or(|o| o == *name)
            {
                banded_rows(schedule, name, sizes, &mut out);
            }
            continue;
        }
        if only.is_some_and(|name| name != phase.name) {
            continue;
        }
        let basis = cost::BoundBasis::new(&schedule.machine, phase.collective);
        for &bytes in sizes {
            let elements = bytes / phase.dtype.size_bytes();
            let sized = phase.with_elements(elements);
            out.rows.push(row(&schedule.machine, &basis, &sized));
        }
    }
    out
}

/// The rows of the banded exchange `name`: at each size, its band's phase re-chunked; a size
/// no band holds (the runtime would refuse it too) is skipped with the bands there are.
fn banded_rows(schedule: &Schedule, name: &str, sizes: &[u64], out: &mut Table) {
    for &bytes in sizes {
        let phase = match schedule.phase_for_bytes(name, bytes) {
            Ok(phase) => phase,
            Err(lookup) => {
                let bands = match lookup {
                    schedule_ir::PhaseLookup::NoBand(bands) => runtime_lite::bands::describe(bands),
                    schedule_ir::PhaseLookup::Unknown => "none".to_string(),
                };
                out.skipped.push(Skipped {
                    phase: name.to_string(),
                    algorithm: "the banded schedule".to_string(),
                    reason: format!("no band holds {}; its bands: {bands}", format_bytes(bytes)),
                });
                continue;
            }
        };
        let elements = bytes / phase.dtype.size_bytes();
        let basis = cost::BoundBasis::new(&schedule.machine, phase.collective);
        let mut r = row(&schedule.machine, &basis, &phase.with_elements(elements));
        r.phase = name.to_string();
        out.rows.push(r);
    }
}

fn row(machine: &Machine, basis: &cost::BoundBasis, phase: &Phase) -> Row {
    priced(machine, basis, phase, &cost::step_loads(machine, phase))
}

/// The row of `phase` whose steps put `loads` on the links; `basis` is its bound's
/// ([`cost::BoundBasis`]).
fn priced(
    machine: &Machine,
    basis: &cost::BoundBasis,
    phase: &Phase,
    loads: &[cost::StepLoad],
) -> Row {
    let estimate = cost::estimate_loads(machine, loads);
    let bound = cost::lower_bound_with(machine, phase, basis);
    let mut totals = vec![0u64; schedule_ir::DirectionId::count(machine.links.len())];
    for step in loads {
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
            let d = schedule_ir::DirectionId::from_index(d)?;
            let link = machine.links.get(d.link().index())?;
            let (from, to) = d.ends(machine)?;
            Some(Busiest {
                link: link.name.clone(),
                from: machine.node_name(from),
                to: machine.node_name(to),
                bytes,
            })
        });
    let bytes = phase.elements * phase.dtype.size_bytes();
    let ranks = machine.compute_nodes().count();
    let factor = bus_factor(phase.collective, ranks);
    let algbw = algbw_gbps(bytes, estimate.seconds);
    Row {
        phase: phase.name.clone(),
        algorithm: phase.algorithm.clone(),
        bytes,
        elements: phase.elements,
        collective: crate::compile::describe(phase.collective),
        ranks,
        steps: phase.steps,
        efficiency: cost::efficiency(&bound, &estimate),
        algbw_gbps: algbw,
        busbw_gbps: algbw * factor,
        bus_factor: factor,
        estimate,
        bound,
        busiest,
        auto: false,
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
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// Where a part's chunks have one size, a pattern's row is the explicit form's, figure for
    /// figure: `simulate` prices `rotated-hd` above the explicit limits as the schedule it is.
    #[test]
    fn a_pattern_row_is_the_explicit_row_where_chunks_divide_evenly() {
        let loaded = crate::load(
            r#"Topology(
                name: "t8",
                machine: Torus(dims: [8, 8], link: (bandwidth_gbps: 400.0, latency_us: 0.5)),
                phases: [
                    Exchange(name: "g", collective: AllReduce, op: Sum, dtype: F32,
                             elements: 16777216),
                ],
            )"#,
        )
        .unwrap();
        let machine = &loaded.machine;
        let ir = machine.to_ir();
        let requests = loaded.phases().unwrap();
        let knobs = requests[0].knobs(&Options::default()).unwrap();
        let spec = &requests[0].spec;
        let explicit = verified(machine, &ir, Method::RotatedHd, spec, &knobs).unwrap();
        let pattern = verified_pattern(machine, &ir, spec, &knobs).unwrap();
        let basis = cost::BoundBasis::new(&ir, spec.collective);
        for bytes in [1 << 10, 1 << 20, 64 << 20] {
            let a = row(&ir, &basis, &explicit.with_elements(bytes / 4));
            let b = pattern_row(&ir, &basis, &pattern, bytes);
            assert_eq!(
                serde_json::to_value(&a).unwrap(),
                serde_json::to_value(&b).unwrap(),
                "{bytes} B"
            );
        }
    }

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
