//! Choosing a method for one phase: the one requested, or under `auto` every method weighed
//! by the cost model at the phase's own size, those that cannot win by their floors alone.

use crate::diag::Problem;
use crate::embed::EmbedError;
use crate::limits::Refusal;
use crate::lower::floor::Floor;
use crate::lower::{Choice, Knobs, Lowered, Method, PhaseSpec, Unless};
use crate::machine::Machine;
use crate::path;
use crate::topology::spans::Path;
use schedule_ir::Collective;

use super::PhaseNote;

/// What `auto` found of one method for a phase.
#[derive(Clone, Debug, PartialEq)]
pub struct Weighed {
    /// The method.
    pub method: Method,
    /// Its estimate, or why it has none.
    pub verdict: Verdict,
}

/// A method's outcome under `auto`.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    /// It lowered the phase; the cost model's estimate in seconds.
    Estimate(f64),
    /// It was not lowered: its floor, a lower bound on its estimate in seconds
    /// ([`Method::floor`]), is not below the estimate of a method lowered before it.
    Skipped(f64),
    /// It does not apply to this machine.
    Refused(EmbedError),
    /// It does not lower this collective.
    Unsupported,
}

/// Chooses a method for one phase and lowers it.
pub fn lower_phase(
    machine: &Machine,
    at: &Path,
    spec: &PhaseSpec,
    wanted: Choice,
    knobs: &Knobs,
) -> Result<(schedule_ir::Phase, PhaseNote), Problem> {
    let candidates: Vec<Method> = match wanted {
        Choice::Auto => Method::ALL.to_vec(),
        Choice::Method(m) => vec![m],
    };
    check_variant(at, wanted, knobs)?;
    check_supported(at, spec, &candidates)?;
    crate::limits::check_vector(at, spec.elements, spec.dtype)?;
    let mut refusals: Vec<(Method, EmbedError)> = Vec::new();
    if wanted == Choice::Auto {
        if let Some(chosen) = cheapest(machine, spec, knobs, HELD_INSTRUCTIONS, &mut refusals) {
            return Ok(chosen);
        }
    } else {
        for method in candidates.iter().filter(|m| m.supports(spec.collective)) {
            crate::progress::doing(|| format!("phase `{}`: lowering with {method}", spec.name));
            match method.lower(machine, spec, knobs) {
                Ok(lowered) => {
                    let reason = match &lowered.detail {
                        Some(detail) => format!("{method} requested; {detail}"),
                        None => format!("{method} requested"),
                    };
                    return Ok(noted(spec, *method, reason, lowered));
                }
                Err(e) => refusals.push((*method, e)),
            }
        }
    }
    // Methods over a limit are the machine's size problem: reported as such, with the budget.
    let over: Vec<(String, Refusal)> = refusals
        .iter()
        .filter_map(|(m, e)| match e {
            EmbedError::OverBudget(r) => Some((m.name().to_string(), r.clone())),
            _ => None,
        })
        .collect();
    if !over.is_empty() {
        return Err(crate::limits::refused(at, machine.node_count(), &over));
    }
    Err(no_method(machine, at, spec, &candidates, &refusals))
}

/// A variant is given only with a method that takes it, and is one of its variants.
fn check_variant(at: &Path, wanted: Choice, knobs: &Knobs) -> Result<(), Problem> {
    let Some(v) = knobs.variant else {
        return Ok(());
    };
    let Choice::Method(method) = wanted.filter(Method::takes_variant) else {
        let takers: Vec<&str> = Method::ALL
            .iter()
            .filter(|m| m.takes_variant())
            .map(|m| m.name())
            .collect();
        return Err(Problem::at(
            at.field("variant"),
            format!("variant {v} given for algorithm `{wanted}`"),
            "no variant here",
        )
        .hint(match takers.split_last() {
            Some((last, rest)) if !rest.is_empty() => format!(
                "only {} and {last} take a variant; name the algorithm too",
                rest.join(", ")
            ),
            _ => format!(
                "only {} takes a variant; name the algorithm too",
                takers.join(", ")
            ),
        }));
    };
    if method.variants().contains(&v) {
        return Ok(());
    }
    let known: Vec<String> = method.variants().iter().map(u32::to_string).collect();
    Err(Problem::at(
        at.field("variant"),
        format!("`{method}` has no variant {v}"),
        "unknown variant",
    )
    .hint(format!("write one of: {}", known.join(", "))))
}

/// Some candidate lowers the phase's collective.
fn check_supported(at: &Path, spec: &PhaseSpec, candidates: &[Method]) -> Result<(), Problem> {
    if candidates.iter().any(|m| m.supports(spec.collective)) {
        return Ok(());
    }
    let able: Vec<&str> = Method::ALL
        .iter()
        .filter(|m| m.supports(spec.collective))
        .map(|m| m.name())
        .collect();
    let what = describe(spec.collective);
    let (message, hint) = match (candidates, able.is_empty()) {
        (_, true) => (
            format!("no method lowers {what} yet"),
            "see docs/topology.md for the collectives each method lowers".to_string(),
        ),
        ([only], false) => (
            format!("`{only}` does not lower {what}"),
            format!("{what} is lowered by: {}; or write `auto`", able.join(", ")),
        ),
        (_, false) => (
            format!("no method lowers {what} here"),
            format!("{what} is lowered by: {}", able.join(", ")),
        ),
    };
    Err(Problem::at(at.field("collective"), message, "not supported").hint(hint))
}

/// Why no candidate lowered the phase: each one's refusal, and the failures that may be why.
fn no_method(
    machine: &Machine,
    at: &Path,
    spec: &PhaseSpec,
    candidates: &[Method],
    refusals: &[(Method, EmbedError)],
) -> Problem {
    let headline = match candidates {
        [one] => format!(
            "`{one}` cannot lower {} on machine `{}`",
            describe(spec.collective),
            machine.name
        ),
        _ => format!(
            "no method can lower {} on machine `{}`",
            describe(spec.collective),
            machine.name
        ),
    };
    // The default phase is written nowhere: point at the machine instead.
    let mut problem = if *at == path!["phases"] {
        Problem::at(
            path!["machine"],
            headline,
            "the default allreduce cannot be compiled for this machine",
        )
    } else {
        Problem::at(
            at.field("collective"),
            headline,
            "cannot be compiled for this machine",
        )
        .also(path!["machine"], "the machine")
    };
    for (m, e) in refusals {
        problem = problem.note(format!("{m}: {e}"));
    }
    if !machine.failed.links.is_empty() {
        problem = problem.also(path!["machine", "failed_links"], "out of service");
    }
    if !machine.failed.nodes.is_empty() {
        problem = problem.also(path!["machine", "failed_nodes"], "out of service");
    }
    if !machine.failed.is_empty() {
        let mut failed = machine.failed.links.clone();
        failed.extend(machine.failed.nodes.iter().cloned());
        problem = problem.note(format!(
            "the methods were tried on the machine without its failed links and nodes ({})",
            failed.join(", ")
        ));
    }
    // Adding links helps only where the ring search itself found no cycle; a method refused
    // for the machine's kind says nothing about its links.
    let no_cycle = refusals.iter().any(|(m, e)| {
        *m == Method::Ring
            && matches!(
                e,
                EmbedError::NoHamiltonianCycle { .. } | EmbedError::SearchGaveUp { .. }
            )
    });
    let hint = if no_cycle {
        "ring methods need a cycle through every compute node; add links so that one exists"
    } else {
        "write `auto` to let the compiler weigh every method that applies"
    };
    problem.hint(hint)
}

/// `auto`: of every method that supports `spec`'s collective, keeps the one whose schedule the
/// cost model prices lowest for the phase's own vector (of equal estimates, within a tie
/// ([`beats`]), the first in [`Method::ALL`]). The methods are lowered in the order of their
/// floors ([`Method::floor`]; a searching method's counted [`SEARCH_ORDER`] times; of equal
/// ones, a method that cannot decline ([`Method::declines`]) first), and one
/// whose floor shows it cannot beat the best estimate so far is
/// not lowered at all: the pick is the one lowering every method would make, since a floor
/// never exceeds the estimate it bounds. The note lists every method weighed
/// ([`PhaseNote::weighed`]) and says the same in words. `None` when no method applies;
/// `refusals` then says why each did not, those over a limit ([`EmbedError::OverBudget`])
/// among them, in registry order.
///
/// A schedule of more than `held` instructions from a method that does not search is let go
/// while a searching method runs, and lowered again if it wins ([`HELD_INSTRUCTIONS`]).
fn cheapest(
    machine: &Machine,
    spec: &PhaseSpec,
    knobs: &Knobs,
    held: usize,
    refusals: &mut Vec<(Method, EmbedError)>,
) -> Option<(schedule_ir::Phase, PhaseNote)> {
    let ir = machine.to_ir();
    let base = Floor::of(&ir, spec);
    let mut order: Vec<(usize, Method, f64)> = Method::ALL
        .into_iter()
        .enumerate()
        .filter(|(_, m)| m.supports(spec.collective))
        .map(|(i, m)| (i, m, m.floor(machine, spec, knobs, &base)))
        .collect();
    // In the order of their floors, a method that searches ([`Method::searches`]) taken as if
    // its floor were [`SEARCH_ORDER`] times as high: any order keeps the pick, and a search's
    // estimate lies further above its floor than that of a method built from the machine's
    // structure, so the quick methods' estimates come first and skip the searches that
    // cannot win.
    let key = |m: Method, floor: f64| {
        if m.searches() {
            floor * SEARCH_ORDER
        } else {
            floor
        }
    };
    // Of equal keys (floors often all equal the machine's), a method that lowers whatever
    // it is handed comes before one that can decline, which then has its estimate to beat.
    order.sort_by(|a, b| {
        key(a.1, a.2)
            .total_cmp(&key(b.1, b.2))
            .then(a.1.declines().cmp(&b.1.declines()))
            .then(a.0.cmp(&b.0))
    });
    let mut priced: Vec<(usize, Method, f64)> = Vec::new();
    let mut skipped: Vec<(usize, Method, f64)> = Vec::new();
    let mut failed: Vec<(usize, Method, EmbedError)> = Vec::new();
    let mut best: Option<Best> = None;
    let mut queue: std::collections::VecDeque<(usize, Method, f64)> = order.into();
    while let Some((i, method, floor)) = queue.pop_front() {
        // A method that can decline once it has a schedule to beat waits for one, behind the
        // next method that cannot decline.
        if best.is_none() && method.declines() {
            if let Some(next) = queue.iter().position(|(_, m, _)| !m.declines()) {
                queue.insert(next + 1, (i, method, floor));
                continue;
            }
        }
        // A method over a limit is refused as it would be when lowered, floor or not.
        if let Err(e) = method.admit(machine, spec, knobs) {
            failed.push((i, method, e));
            continue;
        }
        // Out where no estimate at or above its floor could beat the best so far.
        let ruled_out = |floor: f64, best: &Option<Best>| {
            best.as_ref()
                .is_some_and(|(b, _, s, _)| !could_beat(floor, i, (*s, *b)))
        };
        if ruled_out(floor, &best) {
            skipped.push((i, method, floor));
            continue;
        }
        if method.searches() {
            if let Some((_, kept, _, lowered)) = best.as_mut() {
                let large = lowered.as_ref().is_some_and(|l| instructions(l) > held);
                if !kept.searches() && large {
                    *lowered = None;
                }
            }
        }
        let out = |floor: f64| ruled_out(floor, &best);
        crate::progress::doing(|| format!("phase `{}`: lowering with {method}", spec.name));
        match method.lower_unless(machine, spec, knobs, &out) {
            Ok(Unless::Outpriced(floor)) => skipped.push((i, method, floor)),
            Ok(Unless::Lowered(lowered)) => {
                let seconds = schedule_ir::cost::estimate(&ir, &lowered.phase).seconds;
                priced.push((i, method, seconds));
                let wins = best
                    .as_ref()
                    .is_none_or(|(b, _, s, _)| beats((seconds, i), (*s, *b)));
                if wins {
                    best = Some((i, method, seconds, Some(*lowered)));
                }
            }
            Err(e) => failed.push((i, method, e)),
        }
    }
    failed.sort_by_key(|f| f.0);
    refusals.extend(failed.into_iter().map(|(_, m, e)| (m, e)));
    let (_, method, _, kept) = best?;
    // Lowering is deterministic: the schedule let go is lowered again as it was.
    let lowered = match kept {
        Some(lowered) => lowered,
        None => match method.lower(machine, spec, knobs) {
            Ok(lowered) => lowered,
            Err(e) => {
                refusals.push((method, e));
                return None;
            }
        },
    };
    priced.sort_by(|a, b| a.2.total_cmp(&b.2).then(a.0.cmp(&b.0)));
    skipped.sort_by(|a, b| a.2.total_cmp(&b.2).then(a.0.cmp(&b.0)));
    let mut weighed: Vec<Weighed> = priced
        .iter()
        .map(|&(_, method, s)| Weighed {
            method,
            verdict: Verdict::Estimate(s),
        })
        .collect();
    weighed.extend(skipped.iter().map(|&(_, method, floor)| Weighed {
        method,
        verdict: Verdict::Skipped(floor),
    }));
    weighed.extend(refusals.iter().map(|(method, e)| Weighed {
        method: *method,
        verdict: Verdict::Refused(e.clone()),
    }));
    weighed.extend(
        Method::ALL
            .into_iter()
            .filter(|m| !m.supports(spec.collective))
            .map(|method| Weighed {
                method,
                verdict: Verdict::Unsupported,
            }),
    );
    let reason = auto_reason(spec, &weighed, lowered.detail.as_deref());
    let (phase, mut note) = noted(spec, method, reason, lowered);
    note.weighed = weighed;
    Some((phase, note))
}

/// `auto`'s cheapest method so far: its index in [`Method::ALL`], the method, its estimate, and
/// its schedule unless it was let go while a search ran ([`HELD_INSTRUCTIONS`]).
type Best = (usize, Method, f64, Option<Lowered>);

/// The most instructions a lowered schedule may have for `auto` to hold it while a searching
/// method ([`Method::searches`]) runs; a larger one, from a method that does not search, is let
/// go and lowered again if it wins. Its instructions are most of the peak memory otherwise:
/// on a 32 × 32 torus `rotated-hd`'s million instructions (65 MB) were held while `matching`
/// searched, and the peak was the two together. A method that does not search lowers in a
/// fraction of the time a search takes, so lowering it twice costs little; a search is never
/// let go.
const HELD_INSTRUCTIONS: usize = 1 << 18;

/// The instructions of `lowered`'s phase.
fn instructions(lowered: &Lowered) -> usize {
    lowered
        .phase
        .programs
        .iter()
        .flat_map(|p| &p.steps)
        .map(Vec::len)
        .sum()
}

/// How much higher than its floor `auto` expects a searching method's estimate to lie, when it
/// orders the methods to lower: on an 8 × 8 torus at 4 MiB `matching`'s floor is 10% below
/// `rotated-hd`'s estimate and its estimate 5% above it; on a 32 × 32 torus as a graph
/// `matching` prices 5% above its floor and `halving-doubling` five times its own.
const SEARCH_ORDER: f64 = 1.25;

/// Estimates this close, relatively, are a tie: the same schedule reached by two methods
/// (a ring's both halves and `matching`'s on a ring) is priced from sums taken in another
/// order, a few units in the last place apart, and the pick must not turn on that.
const TIE: f64 = 1e-9;

/// Whether a schedule priced `seconds` by the method at `index` in [`Method::ALL`] beats the
/// best so far, `(seconds, index)`: cheaper by more than a tie ([`TIE`]), or tied and earlier
/// in the registry.
pub fn beats((seconds, index): (f64, usize), best: (f64, usize)) -> bool {
    seconds < best.0 * (1.0 - TIE) || (seconds <= best.0 * (1.0 + TIE) && index < best.1)
}

/// Whether some estimate at or above `floor`, by the method at `index`, could beat `best`
/// ([`beats`]).
fn could_beat(floor: f64, index: usize, best: (f64, usize)) -> bool {
    if index < best.1 {
        floor <= best.0 * (1.0 + TIE)
    } else {
        floor < best.0 * (1.0 - TIE)
    }
}

/// `auto`'s comparison in words: the estimates, cheapest first, then why the others were left.
fn auto_reason(spec: &PhaseSpec, weighed: &[Weighed], detail: Option<&str>) -> String {
    let bytes = spec.elements.saturating_mul(spec.dtype.size_bytes());
    let mut priced = Vec::new();
    let mut left = String::new();
    let mut unable = Vec::new();
    for w in weighed {
        match &w.verdict {
            Verdict::Estimate(s) => priced.push(format!(
                "{} {}",
                w.method,
                crate::simulate::format_seconds(*s)
            )),
            Verdict::Skipped(floor) => left.push_str(&format!(
                "; {} ≥ {}, not lowered",
                w.method,
                crate::simulate::format_seconds(*floor)
            )),
            Verdict::Refused(e) => left.push_str(&format!("; {} does not apply ({e})", w.method)),
            Verdict::Unsupported => unable.push(w.method.name()),
        }
    }
    let mut reason = format!(
        "auto: cheapest for {} at {}: {}{left}",
        describe(spec.collective),
        crate::simulate::format_bytes(bytes),
        priced.join(" < ")
    );
    if !unable.is_empty() {
        reason.push_str(&format!(
            "; {} do not lower {}",
            unable.join(", "),
            describe(spec.collective)
        ));
    }
    if let Some(detail) = detail {
        reason.push_str(&format!("; {detail}"));
    }
    reason
}

/// The phase a method lowered, with its note.
fn noted(
    spec: &PhaseSpec,
    method: Method,
    reason: String,
    lowered: Lowered,
) -> (schedule_ir::Phase, PhaseNote) {
    let note = PhaseNote {
        phase: spec.name.clone(),
        method,
        reason,
        rings: lowered.rings,
        embedding: lowered.embedding,
        trees: lowered.trees,
        weighed: Vec::new(),
    };
    (lowered.phase, note)
}

/// The collective in words, without its root.
pub fn describe(c: Collective) -> String {
    match c {
        Collective::Broadcast { .. } => "broadcast".to_string(),
        Collective::Reduce { .. } => "reduce".to_string(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::panic)]
    use super::*;
    use crate::lower::testing::{machine, spec};
    use schedule_ir::DType;

    /// A schedule let go while a search runs and lowered again is the one held: the same
    /// phase, method and note. On the ring `ring` is lowered first, `matching` then searches
    /// and ties it, and `ring` wins the tie, so with nothing held it is lowered twice.
    #[test]
    fn a_schedule_let_go_is_lowered_again_as_it_was() {
        let cases = [
            (
                r#"Topology(name: "r", machine: Ring(nodes: 8))"#,
                1 << 18,
                true,
            ),
            (
                r#"Topology(name: "c", machine: Cube(link: (bandwidth_gbps: 100.0, latency_us: 1.0)))"#,
                1 << 20,
                false,
            ),
            (
                r#"Topology(name: "l", machine: Ladder(pairs: 13))"#,
                1 << 20,
                false,
            ),
        ];
        for (text, elements, ring_wins) in cases {
            let m = machine(text);
            let spec = spec(Collective::AllReduce, DType::F32, elements);
            let knobs = Knobs::default();
            let held = cheapest(&m, &spec, &knobs, usize::MAX, &mut Vec::new()).unwrap();
            let again = cheapest(&m, &spec, &knobs, 0, &mut Vec::new()).unwrap();
            assert_eq!(held.0, again.0, "{}", m.name);
            let (a, b) = (&held.1, &again.1);
            assert_eq!(
                (a.method, &a.reason, &a.rings, &a.weighed),
                (b.method, &b.reason, &b.rings, &b.weighed),
                "{}",
                m.name
            );
            assert_eq!(format!("{:?}", a.embedding), format!("{:?}", b.embedding));
            assert_eq!(format!("{:?}", a.trees), format!("{:?}", b.trees));
            if ring_wins {
                let note = &again.1;
                assert_eq!(note.method, Method::Ring);
                let searched = note.weighed.iter().any(|w| {
                    w.method == Method::Matching && matches!(w.verdict, Verdict::Estimate(_))
                });
                assert!(searched, "{:?}", note.weighed);
            }
        }
    }
}
