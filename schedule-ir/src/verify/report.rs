//! Pass 5, balance: what a verified schedule costs and how evenly it uses the machine.

use super::{link, node, Named, Warning};
use crate::cost::{self, Bound, Estimate};
use crate::visible::Shown;
use crate::{
    Collective, DType, LinkId, LinkUse, Machine, NodeId, NodeKind, ReduceOp, Schedule, StepId,
};
use serde::Serialize;
use std::fmt;

/// What the verifier measured about a valid schedule. `Display` is a table for a terminal;
/// `Serialize` is the machine-readable form.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Report {
    /// The machine's name.
    pub machine: String,
    /// Compute nodes in the machine.
    pub compute_nodes: usize,
    /// Switches in the machine.
    pub switches: usize,
    /// Every link direction of the machine, indexed as in
    /// [`Hop::direction`](crate::Hop::direction): `2·link` is `a → b`, `2·link + 1` is `b → a`.
    pub directions: Vec<DirectionInfo>,
    /// One entry per phase, in order.
    pub phases: Vec<PhaseReport>,
}

/// A link direction, displayed as `L02 N0→N2`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DirectionInfo {
    /// The link.
    pub link: Named<LinkId>,
    /// Where the direction starts.
    pub from: Named<NodeId>,
    /// Where it ends.
    pub to: Named<NodeId>,
}

impl fmt::Display for DirectionInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}→{}", self.link, self.from, self.to)
    }
}

/// What the verifier measured about one phase.
#[derive(Clone, Debug, Serialize)]
pub struct PhaseReport {
    /// The phase's name.
    pub name: String,
    /// Its collective.
    pub collective: Collective,
    /// The root of a broadcast or reduce, by name.
    pub root: Option<Named<NodeId>>,
    /// Its op.
    pub op: ReduceOp,
    /// Its element type.
    pub dtype: DType,
    /// Its vector's length in elements.
    pub elements: u64,
    /// Its vector's size in bytes.
    pub vector_bytes: u64,
    /// The method that produced it.
    pub algorithm: String,
    /// Its number of steps.
    pub steps: u32,
    /// Whether its steps may carry more transfers over a link direction than its lanes
    /// (omitted from JSON when exclusive).
    #[serde(skip_serializing_if = "LinkUse::is_exclusive")]
    pub links: LinkUse,
    /// Bytes of every send, each counted once.
    pub bytes_sent: u64,
    /// Bytes summed over link directions (a send crossing two links counts twice).
    pub link_bytes: u64,
    /// Bytes each link direction carries over the whole phase, indexed like
    /// [`Report::directions`].
    pub direction_bytes: Vec<u64>,
    /// The most bytes one direction carries in one step.
    pub max_step_bytes: u64,
    /// Sum over steps of the idle link directions.
    pub idle_direction_steps: u64,
    /// The directions that carry nothing in any step (indices into [`Report::directions`]).
    pub never_used: Vec<usize>,
    /// One entry per step.
    pub step_reports: Vec<StepReport>,
    /// What the verifier noticed that is not wrong.
    pub warnings: Vec<Warning>,
    /// The α-β estimate.
    pub estimate: Estimate,
    /// The lower bound.
    pub bound: Bound,
    /// `bound / estimate`.
    pub efficiency: f64,
}

/// The load of one step.
#[derive(Clone, Debug, Serialize)]
pub struct StepReport {
    /// The step.
    pub step: StepId,
    /// Link directions that carry something.
    pub busy: usize,
    /// Link directions that carry nothing.
    pub idle: usize,
    /// The most bytes one direction carries.
    pub max_bytes: u64,
    /// Bytes of every send of the step, each counted once.
    pub bytes_sent: u64,
    /// Local reductions of the step: [`Instr::Reduce`](crate::Instr::Reduce) instructions,
    /// summed over every node. Shown on the step's line when not zero, so that a pipelined
    /// schedule's combining work can be seen spread over its steps.
    pub reduces: usize,
    /// Scales of the step: [`Instr::Scale`](crate::Instr::Scale) instructions (a mean's
    /// division), summed over every node. Shown on the step's line when not zero; omitted
    /// from JSON when zero.
    #[serde(skip_serializing_if = "is_zero")]
    pub scales: usize,
    /// The estimated time of the step, in seconds.
    pub seconds: f64,
    /// Every busy direction with its bytes and transfers.
    pub loads: Vec<cost::DirectionLoad>,
}

/// Builds the report of a verified schedule; `warnings[i]` are phase `i`'s.
pub(super) fn build(schedule: &Schedule, warnings: Vec<Vec<Warning>>) -> Report {
    let machine = &schedule.machine;
    let directions = directions(machine);
    let phases = schedule
        .phases
        .iter()
        .zip(warnings)
        .map(|(phase, warnings)| {
            // The bound (minimum cuts, distances) needs no loads: both at once.
            let (loads, bound) = rayon::join(
                || cost::step_loads(machine, phase),
                || cost::lower_bound(machine, phase),
            );
            let estimate = cost::estimate_loads(machine, &loads);
            let efficiency = cost::efficiency(&bound, &estimate);
            let mut direction_bytes = vec![0u64; directions.len()];
            let mut used = vec![false; directions.len()];
            for load in loads.iter().flat_map(|s| &s.loads) {
                direction_bytes[load.direction] =
                    direction_bytes[load.direction].saturating_add(load.bytes);
                used[load.direction] = true;
            }
            let never_used = (0..directions.len()).filter(|&d| !used[d]).collect();
            let step_reports: Vec<StepReport> = loads
                .into_iter()
                .zip(&estimate.per_step)
                .map(|(load, &seconds)| StepReport {
                    reduces: count_instrs(phase, load.step, |i| {
                        matches!(i, crate::Instr::Reduce { .. })
                    }),
                    scales: count_instrs(phase, load.step, |i| {
                        matches!(i, crate::Instr::Scale { .. })
                    }),
                    step: load.step,
                    busy: load.busy(),
                    idle: directions.len() - load.busy(),
                    max_bytes: load.max_bytes(),
                    bytes_sent: load.bytes_sent,
                    seconds,
                    loads: load.loads,
                })
                .collect();
            let sum = |f: fn(&StepReport) -> u64| {
                step_reports
                    .iter()
                    .fold(0u64, |s, r| s.saturating_add(f(r)))
            };
            PhaseReport {
                name: phase.name.clone(),
                collective: phase.collective,
                root: match phase.collective {
                    Collective::Broadcast { root } | Collective::Reduce { root } => {
                        Some(node(machine, root))
                    }
                    _ => None,
                },
                op: phase.op,
                dtype: phase.dtype,
                elements: phase.elements,
                vector_bytes: phase.elements.saturating_mul(phase.dtype.size_bytes()),
                algorithm: phase.algorithm.clone(),
                steps: phase.steps,
                links: phase.links,
                bytes_sent: sum(|r| r.bytes_sent),
                link_bytes: direction_bytes
                    .iter()
                    .fold(0u64, |s, &b| s.saturating_add(b)),
                direction_bytes,
                max_step_bytes: step_reports.iter().map(|r| r.max_bytes).max().unwrap_or(0),
                idle_direction_steps: sum(|r| r.idle as u64),
                never_used,
                step_reports,
                warnings,
                estimate,
                bound,
                efficiency,
            }
        })
        .collect();
    Report {
        machine: machine.name.clone(),
        compute_nodes: machine.compute_nodes().count(),
        switches: machine
            .nodes
            .iter()
            .filter(|n| n.kind == NodeKind::Switch)
            .count(),
        directions,
        phases,
    }
}

/// The number of instructions of `step` that are `kind`, over every node.
fn count_instrs(phase: &crate::Phase, step: StepId, kind: fn(&crate::Instr) -> bool) -> usize {
    phase
        .programs
        .iter()
        .filter_map(|p| p.steps.get(step.index()))
        .flatten()
        .filter(|i| kind(i))
        .count()
}

/// For `skip_serializing_if`.
fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// Every link direction of the machine, in direction order.
fn directions(machine: &Machine) -> Vec<DirectionInfo> {
    let mut out = Vec::with_capacity(machine.links.len() * 2);
    for (i, l) in machine.links.iter().enumerate() {
        let id = LinkId(u32::try_from(i).unwrap_or(u32::MAX));
        for (from, to) in [(l.a, l.b), (l.b, l.a)] {
            out.push(DirectionInfo {
                link: link(machine, id),
                from: node(machine, from),
                to: node(machine, to),
            });
        }
    }
    out
}

/// A duration with a unit that keeps it readable: `6.49 µs`.
pub(super) fn seconds(s: f64) -> String {
    let (value, unit) = if s == 0.0 {
        (0.0, "s")
    } else if s < 1e-6 {
        (s * 1e9, "ns")
    } else if s < 1e-3 {
        (s * 1e6, "µs")
    } else if s < 1.0 {
        (s * 1e3, "ms")
    } else {
        (s, "s")
    };
    format!("{value:.3} {unit}")
}

/// At most `shown` directions by name, then how many more.
fn direction_names(report: &Report, dirs: &[usize], shown: usize) -> String {
    if dirs.is_empty() {
        return "-".to_string();
    }
    let mut s: Vec<String> = dirs
        .iter()
        .take(shown)
        .filter_map(|&d| report.directions.get(d).map(ToString::to_string))
        .collect();
    if dirs.len() > shown {
        s.push(format!("(+{} more)", dirs.len() - shown));
    }
    s.join(", ")
}

/// What a phase's heading adds when its links are shared.
fn shared_note(links: LinkUse) -> &'static str {
    match links {
        LinkUse::Exclusive => "",
        LinkUse::Shared => {
            ", links shared (several transfers may cross a link direction in a step)"
        }
    }
}

/// Steps shown at each end of a phase longer than [`MAX_STEPS_SHOWN`].
const EDGE_STEPS: usize = 8;
/// Phases with more steps than this show only their first and last [`EDGE_STEPS`].
const MAX_STEPS_SHOWN: usize = 64;
/// Idle directions named on a step's line.
const IDLE_SHOWN: usize = 4;

impl Report {
    fn fmt_phase(&self, f: &mut fmt::Formatter<'_>, p: &PhaseReport) -> fmt::Result {
        let collective = match (&p.collective, &p.root) {
            (Collective::Broadcast { .. }, Some(root)) => format!("broadcast from {root}"),
            (Collective::Reduce { .. }, Some(root)) => format!("reduce to {root}"),
            (c, _) => c.to_string(),
        };
        writeln!(
            f,
            "phase `{}`: {collective}, {} over {} {} ({} B), algorithm `{}`, {} steps{}",
            Shown(&p.name),
            p.op,
            p.elements,
            p.dtype,
            p.vector_bytes,
            Shown(&p.algorithm),
            p.steps,
            shared_note(p.links)
        )?;
        writeln!(
            f,
            "  estimate {}, lower bound {} ({}), efficiency {:.1}%",
            seconds(p.estimate.seconds),
            seconds(p.bound.seconds),
            p.bound.which,
            p.efficiency * 100.0
        )?;
        writeln!(
            f,
            "  bytes sent {} B, on links {} B; busiest direction-step {} B",
            p.bytes_sent, p.link_bytes, p.max_step_bytes
        )?;
        let total = self.directions.len();
        let width = p
            .step_reports
            .len()
            .saturating_sub(1)
            .to_string()
            .len()
            .max(2);
        let line = |f: &mut fmt::Formatter<'_>, r: &StepReport| {
            let idle: Vec<usize> = idle_directions(total, r);
            let reduces = if r.reduces == 0 {
                String::new()
            } else {
                format!("  reduces {}", r.reduces)
            };
            let scales = if r.scales == 0 {
                String::new()
            } else {
                format!("  scales {}", r.scales)
            };
            writeln!(
                f,
                "  step {:>width$}  busy {}/{} directions  max {} B{reduces}{scales}  idle: {}",
                r.step.0,
                r.busy,
                total,
                r.max_bytes,
                direction_names(self, &idle, IDLE_SHOWN)
            )
        };
        let n = p.step_reports.len();
        if n <= MAX_STEPS_SHOWN {
            for r in &p.step_reports {
                line(f, r)?;
            }
        } else {
            for r in &p.step_reports[..EDGE_STEPS] {
                line(f, r)?;
            }
            let middle = &p.step_reports[EDGE_STEPS..n - EDGE_STEPS];
            let min_busy = middle.iter().map(|r| r.busy).min().unwrap_or(0);
            let max_busy = middle.iter().map(|r| r.busy).max().unwrap_or(0);
            let max_bytes = middle.iter().map(|r| r.max_bytes).max().unwrap_or(0);
            writeln!(
                f,
                "  … {} more steps: busy {}..{}/{} directions, max {} B",
                middle.len(),
                min_busy,
                max_busy,
                total,
                max_bytes
            )?;
            for r in &p.step_reports[n - EDGE_STEPS..] {
                line(f, r)?;
            }
        }
        if p.idle_direction_steps == 0 {
            writeln!(f, "  every link direction busy in every step: yes")?;
        } else {
            writeln!(
                f,
                "  every link direction busy in every step: no ({} idle direction-steps)",
                p.idle_direction_steps
            )?;
        }
        if !p.never_used.is_empty() {
            writeln!(
                f,
                "  never used: {}",
                direction_names(self, &p.never_used, 8)
            )?;
        }
        for w in &p.warnings {
            writeln!(f, "  warning: {w}")?;
        }
        Ok(())
    }
}

/// The idle directions of a step, in order.
fn idle_directions(total: usize, r: &StepReport) -> Vec<usize> {
    let mut busy = r.loads.iter().map(|l| l.direction).peekable();
    let mut idle = Vec::new();
    for d in 0..total {
        if busy.peek() == Some(&d) {
            busy.next();
        } else {
            idle.push(d);
        }
    }
    idle
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "machine `{}`: {} compute nodes, {} switches, {} links ({} directions)",
            Shown(&self.machine),
            self.compute_nodes,
            self.switches,
            self.directions.len() / 2,
            self.directions.len()
        )?;
        for p in &self.phases {
            self.fmt_phase(f, p)?;
        }
        Ok(())
    }
}
