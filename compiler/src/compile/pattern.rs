//! Compiling to the pattern form: on a torus or a hypercube, `rotated-hd`'s schedule is every
//! node running the origin's program translated, and is written and proved as that one
//! program ([`schedule_ir::Pattern`], `docs/ir.md` "The pattern form"). Its size is one
//! node's program, so machines whose explicit schedule no build could hold (a 200 × 200 torus:
//! 254 million instructions) compile and verify in seconds.
//!
//! The pattern form is a way of writing the schedule `auto` (or the phase) chose, never a
//! different choice: under `auto` a phase becomes a pattern only when every other method is
//! refused, has a floor above the pattern's estimate, or is lowered (as `auto` lowers it) and
//! priced above it: `auto` picks `rotated-hd` too. Otherwise [`compile_pattern`] says so and the
//! caller compiles the explicit form as usual.

use super::{Loaded, Options, PhaseNote, Verdict, Weighed};
use crate::lower::floor::Floor;
use crate::lower::{mean, rotated, Choice, Knobs, Method, PhaseSpec, Unless};
use crate::machine::{Machine, Shape};
use crate::Error;
use schedule_ir::{Collective, Grid, Pattern, Phase, VerifiedPattern, FORMAT_VERSION};

/// A topology compiled to the pattern form.
#[derive(Debug)]
pub struct CompiledPattern {
    /// The machine graph.
    pub machine: Machine,
    /// The pattern, proved by the verifier.
    pub pattern: VerifiedPattern,
    /// One note per exchange phase.
    pub notes: Vec<PhaseNote>,
}

/// Compiles `loaded` to the pattern form, when every exchange phase is one: the machine is an
/// intact torus of equal sides, hypercube or cube; the phase is an allreduce, reduce-scatter
/// or allgather (a mean's divisions placed by [`mean::add_pattern_scales`]), compiled at the
/// file's size; and its method is `rotated-hd`, requested or the one `auto` would take.
/// `Ok(None)` otherwise.
pub fn compile_pattern(
    loaded: &Loaded,
    options: &Options,
) -> Result<Option<CompiledPattern>, Error> {
    let declared = loaded;
    let loaded = loaded.failing(&options.fail_links, &options.fail_nodes)?;
    let requests = loaded.phases()?;
    let machine = &loaded.machine;
    if rotated::coordinates(machine).is_err() {
        return Ok(None);
    }
    // On a ring `rotated-hd` is `ring` by another name, which the explicit form keeps; only
    // a ring too large for it is written as a pattern.
    if machine.shape == Shape::Ring && !explicit_too_large(declared, options) {
        return Ok(None);
    }
    let ir = machine.to_ir();
    let mut grid = None;
    let mut phases = Vec::new();
    let mut chosen = Vec::new();
    for request in &requests {
        let knobs = request
            .knobs(options)
            .map_err(|p| Error::Topology(vec![p]))?;
        let wanted = match options.algorithm {
            Some(choice) => choice,
            None => request.choice().map_err(|p| Error::Topology(vec![p]))?,
        };
        let spec = &request.spec;
        if !matches!(wanted, Choice::Auto | Choice::Method(Method::RotatedHd)) {
            return Ok(None);
        }
        let Some((g, phase)) = pattern_phase(machine, &ir, spec, &knobs) else {
            return Ok(None);
        };
        grid = Some(g);
        phases.push(phase);
        chosen.push((request, knobs, wanted));
    }
    let Some(grid) = grid else {
        return Ok(None);
    };
    let pattern = Pattern {
        grid,
        format_version: FORMAT_VERSION,
        machine: ir.clone(),
        program: super::phases::program(&loaded.file, &requests),
        phases,
    };
    crate::progress::doing(|| "verifying the pattern".to_string());
    let verified = schedule_ir::verify_pattern(pattern)
        .map_err(|errors| super::too_large_to_prove(machine, errors))?;
    let mut notes = Vec::new();
    for ((request, knobs, wanted), report) in chosen.iter().zip(&verified.report().phases) {
        let seconds = report.estimate.seconds;
        let weighed = match wanted {
            Choice::Auto => match weigh(machine, &ir, &request.spec, knobs, seconds) {
                Some(weighed) => weighed,
                None => return Ok(None),
            },
            Choice::Method(_) => Vec::new(),
        };
        let reason = match wanted {
            Choice::Auto => format!(
                "auto: rotated-hd {} as a pattern; every other method is refused or cannot beat it by its floor",
                crate::simulate::format_seconds(seconds)
            ),
            Choice::Method(_) => "rotated-hd requested; written as a pattern".to_string(),
        };
        notes.push(PhaseNote {
            phase: request.spec.name.clone(),
            method: Method::RotatedHd,
            reason,
            rings: Vec::new(),
            embedding: Vec::new(),
            trees: Vec::new(),
            weighed,
        });
    }
    Ok(Some(CompiledPattern {
        machine: loaded.machine,
        pattern: verified,
        notes,
    }))
}

/// `spec`'s `rotated-hd` schedule on `machine` as a pattern, a mean's divisions placed: its
/// grid and the origin's phase, unproved. `None` where the pattern form does not hold it: a
/// machine that is not an intact torus of equal sides, hypercube or cube, a collective other
/// than allreduce, reduce-scatter and allgather, or a variant asked for.
pub fn pattern_phase(
    machine: &Machine,
    ir: &schedule_ir::Machine,
    spec: &PhaseSpec,
    knobs: &Knobs,
) -> Option<(Grid, Phase)> {
    let eligible = knobs.variant.is_none()
        && matches!(
            spec.collective,
            Collective::AllReduce | Collective::ReduceScatter | Collective::AllGather
        );
    if !eligible {
        return None;
    }
    crate::progress::doing(|| {
        format!(
            "phase `{}`: lowering with rotated-hd, as a pattern",
            spec.name
        )
    });
    let (grid, mut phase) = rotated::pattern(spec, Method::RotatedHd.name(), machine).ok()?;
    mean::add_pattern_scales(&mut phase, ir, &grid);
    Some((grid, phase))
}

/// Whether the explicit schedule `rotated-hd` would lower for some exchange phase is over the
/// limits of `options.budget`. The explicit `auto` then refuses `rotated-hd` for its size alone
/// and takes another method (on a ring of 1449 nodes, halving-doubling at 280 times the time);
/// the pattern form holds the same schedule in one node's program, so it is tried first, and
/// [`compile_pattern`] still writes it only where `auto` picks `rotated-hd`.
pub fn explicit_too_large(loaded: &Loaded, options: &Options) -> bool {
    let Ok(loaded) = loaded.failing(&options.fail_links, &options.fail_nodes) else {
        return false;
    };
    let Ok(requests) = loaded.phases() else {
        return false;
    };
    requests
        .iter()
        .any(|request| explicit_over_limits(&loaded.machine, &request.spec, &options.budget))
}

/// Whether `rotated-hd`'s explicit schedule of `spec` on `machine` is over the limits of
/// `budget`: where it is, the same schedule is held as a pattern.
pub fn explicit_over_limits(
    machine: &Machine,
    spec: &PhaseSpec,
    budget: &crate::limits::Budget,
) -> bool {
    rotated::explicit_estimate(spec, machine)
        .is_ok_and(|e| crate::limits::admit(e, budget).is_err())
}

/// `auto`'s verdicts when the pattern's estimate is `seconds`: every other method is refused
/// before lowering, or has a floor above it, or is lowered (as `auto` lowers it) and priced
/// above it (a tie goes to the method listed first). `None` when some method wins.
fn weigh(
    machine: &Machine,
    ir: &schedule_ir::Machine,
    spec: &crate::lower::PhaseSpec,
    knobs: &crate::lower::Knobs,
    seconds: f64,
) -> Option<Vec<Weighed>> {
    let base = Floor::of(ir, spec);
    let rank = |m: Method| {
        Method::ALL
            .iter()
            .position(|&x| x == m)
            .unwrap_or(usize::MAX)
    };
    let mut weighed = vec![Weighed {
        method: Method::RotatedHd,
        verdict: Verdict::Estimate(seconds),
    }];
    let mut refused = Vec::new();
    for method in Method::ALL {
        if method == Method::RotatedHd {
            continue;
        }
        if !method.supports(spec.collective) {
            weighed.push(Weighed {
                method,
                verdict: Verdict::Unsupported,
            });
            continue;
        }
        if let Err(e) = method.admit(machine, spec, knobs) {
            refused.push(Weighed {
                method,
                verdict: Verdict::Refused(e),
            });
            continue;
        }
        let earlier = rank(method) < rank(Method::RotatedHd);
        let out = |floor: f64| floor > seconds || (floor == seconds && !earlier);
        let floor = method.floor(machine, spec, knobs, &base);
        if out(floor) {
            weighed.push(Weighed {
                method,
                verdict: Verdict::Skipped(floor),
            });
            continue;
        }
        // It could win by its floor: lowered, as `auto` would.
        crate::progress::doing(|| format!("phase `{}`: lowering with {method}", spec.name));
        match method.lower_unless(machine, spec, knobs, &out) {
            Ok(Unless::Outpriced(floor)) => weighed.push(Weighed {
                method,
                verdict: Verdict::Skipped(floor),
            }),
            Ok(Unless::Lowered(lowered)) => {
                let s = schedule_ir::cost::estimate(ir, &lowered.phase).seconds;
                if s < seconds || (s == seconds && earlier) {
                    return None;
                }
                weighed.push(Weighed {
                    method,
                    verdict: Verdict::Estimate(s),
                });
            }
            Err(e) => refused.push(Weighed {
                method,
                verdict: Verdict::Refused(e),
            }),
        }
    }
    weighed.extend(refused);
    Some(weighed)
}
