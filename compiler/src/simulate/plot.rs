//! `topoc simulate --plot`: the table as a picture. For each phase two panels side by side:
//! time against size (log-log) and bus bandwidth against size (log size), one line per method,
//! the lower bound dashed, and a ring around the method `auto` takes at each size.
//!
//! Drawn with plotters' SVG backend alone: no fonts are read (the text is laid out by the
//! viewer), so the picture depends on nothing but the table, byte for byte. Phase and method
//! names are shown as every name is ([`Shown`]: a control character as text such as `\x1b`,
//! which XML 1.0 could not carry); the backend escapes XML's special characters.

use super::{format_bytes, Row, Table};
use crate::visible::Shown;
use plotters::coord::ranged1d::ValueFormatter;
use plotters::coord::Shift;
use plotters::prelude::*;

/// Width of one panel, in pixels.
const PANEL_WIDTH: u32 = 720;
/// Height of one panel (one phase), in pixels.
const PANEL_HEIGHT: u32 = 420;
/// Width of method lines; the bound is thinner and dashed.
const LINE_WIDTH: u32 = 2;
/// The bound's colour.
const BOUND: RGBColor = RGBColor(80, 80, 80);
/// Method colours, in the order the methods appear in a phase's rows (colour-blind safe).
const COLOURS: [RGBColor; 8] = [
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(230, 159, 0),
    RGBColor(86, 180, 233),
    RGBColor(120, 60, 160),
    RGBColor(160, 120, 40),
];

/// The table drawn as an SVG document. Rows of zero bytes are left out (a log axis has no 0).
pub fn svg(table: &Table) -> Result<String, String> {
    let phases = phases(table);
    if phases.is_empty() {
        return Err("nothing to plot: no row has a size of at least one element".to_string());
    }
    let mut out = String::new();
    {
        let height = PANEL_HEIGHT * phases.len() as u32;
        let root = SVGBackend::with_string(&mut out, (2 * PANEL_WIDTH, height)).into_drawing_area();
        root.fill(&WHITE).map_err(failed)?;
        let panels = root.split_evenly((phases.len(), 2));
        for (rows, pair) in phases.iter().zip(panels.chunks(2)) {
            if let [time, bus] = pair {
                draw_phase(time, bus, rows)?;
            }
        }
        root.present().map_err(failed)?;
    }
    Ok(out)
}

/// One phase's plottable rows, with its methods in the order they first appear.
struct PhaseRows<'a> {
    rows: Vec<&'a Row>,
    methods: Vec<&'a str>,
}

/// The table's rows grouped by phase, in table order.
fn phases(table: &Table) -> Vec<PhaseRows<'_>> {
    let mut out: Vec<PhaseRows<'_>> = Vec::new();
    for row in table.rows.iter().filter(|r| r.bytes > 0) {
        let at = match out
            .iter()
            .position(|p| p.rows.first().is_some_and(|r| r.phase == row.phase))
        {
            Some(at) => at,
            None => {
                out.push(PhaseRows {
                    rows: Vec::new(),
                    methods: Vec::new(),
                });
                out.len() - 1
            }
        };
        let phase = &mut out[at];
        phase.rows.push(row);
        if !phase.methods.contains(&row.algorithm.as_str()) {
            phase.methods.push(&row.algorithm);
        }
    }
    out
}

/// What a panel plots against size.
#[derive(Clone, Copy)]
enum Measure {
    /// Estimated time in µs (the bound: its time).
    Time,
    /// Bus bandwidth in GB/s (the bound: the bus bandwidth it allows).
    BusBandwidth,
}

impl Measure {
    fn of(self, row: &Row) -> f64 {
        match self {
            Measure::Time => row.estimate.seconds * 1e6,
            Measure::BusBandwidth => row.busbw_gbps,
        }
    }

    fn bound(self, row: &Row) -> f64 {
        match self {
            Measure::Time => row.bound.seconds * 1e6,
            Measure::BusBandwidth => {
                super::algbw_gbps(row.bytes, row.bound.seconds) * row.bus_factor
            }
        }
    }

    fn describe(self) -> &'static str {
        match self {
            Measure::Time => "time (µs)",
            Measure::BusBandwidth => "bus bandwidth (GB/s)",
        }
    }
}

fn draw_phase(
    time: &DrawingArea<SVGBackend<'_>, Shift>,
    bus: &DrawingArea<SVGBackend<'_>, Shift>,
    phase: &PhaseRows<'_>,
) -> Result<(), String> {
    let Some(first) = phase.rows.first() else {
        return Ok(());
    };
    let title = format!(
        "phase {}: {} over {} ranks",
        Shown(&first.phase),
        Shown(&first.collective),
        first.ranks
    );
    draw_panel(time, phase, &title, Measure::Time)?;
    draw_panel(bus, phase, &title, Measure::BusBandwidth)
}

/// The bound at each size: the largest of the rows' bounds (they are the collective's, so
/// every method's row gives the same).
fn bound_line(rows: &[&Row], measure: Measure) -> Vec<(f64, f64)> {
    let mut line: Vec<(f64, f64)> = Vec::new();
    for row in rows {
        let point = (row.bytes as f64, measure.bound(row));
        match line.iter_mut().find(|(x, _)| *x == point.0) {
            Some(p) => p.1 = p.1.max(point.1),
            None => line.push(point),
        }
    }
    // A bound of no time bounds nothing (and has no place on a log axis).
    line.retain(|p| p.1 > 0.0);
    line.sort_by(|a, b| a.0.total_cmp(&b.0));
    line
}

fn draw_panel(
    area: &DrawingArea<SVGBackend<'_>, Shift>,
    phase: &PhaseRows<'_>,
    title: &str,
    measure: Measure,
) -> Result<(), String> {
    let bound = bound_line(&phase.rows, measure);
    let (mut x_lo, mut x_hi) = span(phase.rows.iter().map(|r| r.bytes as f64));
    if x_lo == x_hi {
        x_lo /= 2.0;
        x_hi *= 2.0;
    }
    let values = phase
        .rows
        .iter()
        .map(|r| measure.of(r))
        .chain(bound.iter().map(|p| p.1))
        .filter(|v| v.is_finite() && *v > 0.0);
    let (y_lo, y_hi) = span(values);
    let mut builder = ChartBuilder::on(area);
    builder
        .caption(title, ("sans-serif", 16))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(64);
    // Powers of two on the size axis, so its labels read 1 KiB, 8 KiB, 64 KiB, …
    let x_range = (x_lo..x_hi).log_scale().base(2.0);
    match measure {
        Measure::Time => {
            let y_range = (y_lo / 1.5..y_hi * 1.5).log_scale();
            let mut chart = builder
                .build_cartesian_2d(x_range, y_range)
                .map_err(failed)?;
            mesh_and_series(&mut chart, phase, &bound, measure)
        }
        Measure::BusBandwidth => {
            let mut chart = builder
                .build_cartesian_2d(x_range, 0.0..y_hi * 1.15)
                .map_err(failed)?;
            mesh_and_series(&mut chart, phase, &bound, measure)
        }
    }
}

/// Draws the axes, one line per method, the dashed bound, `auto`'s picks and the legend.
fn mesh_and_series<'a, Y>(
    chart: &mut ChartContext<'a, SVGBackend<'a>, Cartesian2d<LogCoord<f64>, Y>>,
    phase: &PhaseRows<'_>,
    bound: &[(f64, f64)],
    measure: Measure,
) -> Result<(), String>
where
    Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    chart
        .configure_mesh()
        .x_desc("size")
        .y_desc(measure.describe())
        .x_label_formatter(&|x| format_bytes(*x as u64))
        .y_label_formatter(&|y| short(*y))
        .max_light_lines(0)
        .bold_line_style(RGBColor(225, 225, 225))
        .draw()
        .map_err(failed)?;
    for (i, method) in phase.methods.iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        let points = phase
            .rows
            .iter()
            .filter(|r| r.algorithm == *method)
            .map(|r| (r.bytes as f64, measure.of(r)))
            // A log axis has no 0: an estimate of no time has no place on it.
            .filter(|p| p.1 > 0.0 || matches!(measure, Measure::BusBandwidth));
        chart
            .draw_series(LineSeries::new(points, colour.stroke_width(LINE_WIDTH)))
            .map_err(failed)?
            .label(Shown(method).to_string())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(LINE_WIDTH))
            });
    }
    chart
        .draw_series(DashedLineSeries::new(
            bound.iter().copied(),
            6,
            4,
            BOUND.stroke_width(1),
        ))
        .map_err(failed)?
        .label("bound")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BOUND.stroke_width(1)));
    // A schedule's table has no picks: it holds one method, the schedule's own.
    if phase.rows.iter().any(|r| r.auto) {
        let picks = phase
            .rows
            .iter()
            .filter(|r| r.auto)
            .map(|r| Circle::new((r.bytes as f64, measure.of(r)), 6, BLACK.stroke_width(2)));
        chart
            .draw_series(picks)
            .map_err(failed)?
            .label("auto's pick")
            .legend(|(x, y)| Circle::new((x + 10, y), 5, BLACK.stroke_width(2)));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(failed)
}

/// The smallest and largest of some positive values (1 and 10 when there are none).
fn span(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (lo, hi) = values.fold((f64::INFINITY, 0.0f64), |(lo, hi), v| {
        (lo.min(v), hi.max(v))
    });
    if lo.is_finite() && hi > 0.0 {
        (lo, hi)
    } else {
        (1.0, 10.0)
    }
}

/// An axis value with as few digits as it needs.
fn short(v: f64) -> String {
    if v.fract() == 0.0 || v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
    }
}

fn failed(e: impl std::fmt::Display) -> String {
    format!("cannot draw the plot: {e}")
}
