//! The compiler driver: topology text in, verified schedule out.
//!
//! parse → build the machine → for every exchange phase: choose a method, embed, lower →
//! assemble the [`Schedule`] → verify. Problems with the file come back as [`Problem`]s that
//! point into it; a schedule that fails verification is a compiler bug and is reported as such,
//! never emitted.

use crate::diag::Problem;
use crate::embed::{EmbedError, Ring};
use crate::lower::{halving_doubling, ring, Knobs, Lowered, Method};
use crate::machine::{self, Machine};
use crate::path;
use crate::topology::ast::{CollectiveDecl, DTypeDecl, Exchange, OpDecl, PhaseDecl, TopologyFile};
use crate::topology::{self, spans::Path};
use crate::Error;
use schedule_ir::{
    Collective, DType, ProgramItem, ReduceOp, Schedule, VerifiedSchedule, FORMAT_VERSION,
};
use std::collections::BTreeMap;

/// Choices the command line can override.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Force a method for every phase (`None` or `auto`: each phase's own choice, or the best).
    pub algorithm: Option<String>,
    /// Slices per round for `halving-doubling` in every phase (`None`: each phase's own
    /// `slices`, or the method's default).
    pub slices: Option<usize>,
    /// Force a variant of the method (`cube-planes`: 300 or 400) for every phase.
    pub variant: Option<u32>,
    /// Link ids to take out of service, beyond the file's `failed_links`.
    pub fail_links: Vec<String>,
    /// Node names to take out of service, beyond the file's `failed_nodes`.
    pub fail_nodes: Vec<String>,
}

/// How one phase was compiled, for humans.
#[derive(Clone, Debug)]
pub struct PhaseNote {
    /// The phase's name.
    pub phase: String,
    /// The method used.
    pub method: Method,
    /// Why this method (for `auto`).
    pub reason: String,
    /// The embedded rings, one direction each, or the trees with their shares, rendered with
    /// names.
    pub rings: Vec<String>,
    /// The rings as data, in the same order (for `topoc draw`); empty for trees.
    pub embedding: Vec<Ring>,
}

/// A compiled topology: the machine, the verified schedule and notes on how it was made.
#[derive(Debug)]
pub struct Compiled {
    /// The machine graph.
    pub machine: Machine,
    /// The schedule, proved by the verifier.
    pub schedule: VerifiedSchedule,
    /// One note per exchange phase.
    pub notes: Vec<PhaseNote>,
}

/// Parses and builds the machine only (`topoc check`).
pub fn load(source: &str) -> Result<(TopologyFile, Machine), Error> {
    load_failing(source, &[], &[])
}

/// Parses and builds the machine with extra links and nodes out of service (reported like the
/// file's own `failed_links` and `failed_nodes`).
pub fn load_failing(
    source: &str,
    links: &[String],
    nodes: &[String],
) -> Result<(TopologyFile, Machine), Error> {
    let mut file = topology::parse(source).map_err(|p| Error::Topology(vec![p]))?;
    file.machine.fail(links, nodes);
    let machine = machine::build(&file).map_err(Error::Topology)?;
    Ok((file, machine))
}

/// Compiles a topology text.
pub fn compile(source: &str, options: &Options) -> Result<Compiled, Error> {
    let (file, machine) = load_failing(source, &options.fail_links, &options.fail_nodes)?;
    let exchanges = exchanges(&file, &machine).map_err(Error::Topology)?;
    let mut phases = Vec::new();
    let mut notes = Vec::new();
    let mut problems = Vec::new();
    for (at, decl, spec) in &exchanges {
        let wanted = options
            .algorithm
            .clone()
            .or_else(|| decl.algorithm.clone())
            .unwrap_or_else(|| "auto".to_string());
        let slices = match options.slices {
            Some(k) => vec![k],
            None => decl
                .slices
                .as_ref()
                .map(|s| s.per_round())
                .unwrap_or_default(),
        };
        if let Some(bad) = slices
            .iter()
            .find(|&&k| k == 0 || k > halving_doubling::MAX_SLICES)
        {
            problems.push(
                Problem::at(
                    at.field("slices"),
                    format!("{bad} slices per round is out of range"),
                    "not between 1 and 64",
                )
                .hint("cut each round's half into 1 to 64 slices (2 is the default)"),
            );
            continue;
        }
        let knobs = Knobs {
            variant: options.variant.or(decl.variant),
            slices,
        };
        match lower_phase(&machine, at, spec, &wanted, &knobs) {
            Ok((phase, note)) => {
                phases.push(phase);
                notes.push(note);
            }
            Err(p) => problems.push(p),
        }
    }
    if !problems.is_empty() {
        return Err(Error::Topology(problems));
    }
    let schedule = Schedule {
        format_version: FORMAT_VERSION,
        machine: machine.to_ir(),
        program: program(&file, &exchanges),
        phases,
    };
    let schedule =
        schedule_ir::verify(schedule).map_err(|errors| too_large_to_prove(&machine, errors))?;
    Ok(Compiled {
        machine,
        schedule,
        notes,
    })
}

/// A schedule the verifier refused only for its size is the machine's size problem, not a
/// compiler bug: it is reported against the file, with what was too large. Anything else the
/// verifier found stays an internal error.
fn too_large_to_prove(machine: &Machine, errors: schedule_ir::VerifyErrors) -> Error {
    let sizes: Vec<String> = errors
        .errors
        .iter()
        .filter_map(|e| match e {
            schedule_ir::VerifyError {
                kind: schedule_ir::verify::ErrorKind::TooLarge { what, count, limit },
                ..
            } => Some(format!("{what}: {count}, at most {limit}")),
            _ => None,
        })
        .collect();
    if sizes.is_empty() || sizes.len() != errors.errors.len() {
        return Error::Unverified(errors);
    }
    let mut problem = Problem::at(
        path!["machine"],
        format!(
            "the schedule for this {}-node machine is too large for the verifier to prove",
            machine.node_count()
        ),
        format!("{} nodes", machine.node_count()),
    )
    .hint("nothing is emitted unproved; compile a smaller machine, or a method with fewer chunks");
    for size in sizes {
        problem = problem.note(size);
    }
    Error::Topology(vec![problem])
}

/// The BSP program: the file's compute and exchange phases in order, or, when it declares no
/// exchange, its compute phases followed by the default exchange phase.
fn program(
    file: &TopologyFile,
    exchanges: &[(Path, Exchange, ring::PhaseSpec)],
) -> Vec<ProgramItem> {
    let mut items: Vec<ProgramItem> = file
        .phases
        .iter()
        .map(|p| match p {
            PhaseDecl::Compute(name) => ProgramItem::Compute(name.clone()),
            PhaseDecl::Exchange(e) => ProgramItem::Exchange(e.name.clone()),
        })
        .collect();
    if !file
        .phases
        .iter()
        .any(|p| matches!(p, PhaseDecl::Exchange(_)))
    {
        items.extend(
            exchanges
                .iter()
                .map(|(_, e, _)| ProgramItem::Exchange(e.name.clone())),
        );
    }
    items
}

/// The exchange phases of the file (or the default one), checked, with their paths.
fn exchanges(
    file: &TopologyFile,
    machine: &Machine,
) -> Result<Vec<(Path, Exchange, ring::PhaseSpec)>, Vec<Problem>> {
    let mut problems = Vec::new();
    let mut out = Vec::new();
    let mut names: BTreeMap<String, Path> = BTreeMap::new();
    let declared: Vec<(Path, Exchange)> = file
        .phases
        .iter()
        .enumerate()
        .filter_map(|(i, p)| match p {
            PhaseDecl::Exchange(e) => Some((path!["phases", i], e.clone())),
            PhaseDecl::Compute(_) => None,
        })
        .collect();
    let declared = if declared.is_empty() {
        vec![(path!["phases"], Exchange::default_phase())]
    } else {
        declared
    };
    for (at, e) in declared {
        if let Some(first) = names.get(&e.name) {
            problems.push(
                Problem::at(
                    at.field("name"),
                    format!("exchange phase `{}` is declared twice", e.name),
                    "declared again here",
                )
                .also(first.field("name"), "first declared here")
                .hint("the runtime runs phases by name, so names must be unique"),
            );
            continue;
        }
        names.insert(e.name.clone(), at.clone());
        let root = |name: &str| -> Result<schedule_ir::NodeId, Problem> {
            match machine.node_by_name(name) {
                Some(id) if machine.node(id).kind == schedule_ir::NodeKind::Compute => Ok(id),
                Some(_) => Err(Problem::at(
                    at.field("collective").field("root"),
                    format!("the root `{name}` is a switch"),
                    "not a compute node",
                )
                .hint("a root must hold data: pick a compute node")),
                None => Err(Problem::at(
                    at.field("collective").field("root"),
                    format!("the root `{name}` is not a node of the machine"),
                    "unknown node",
                )
                .hint(format!("nodes are named {}", example_names(machine)))),
            }
        };
        let collective = match &e.collective {
            CollectiveDecl::AllReduce => Ok(Collective::AllReduce),
            CollectiveDecl::ReduceScatter => Ok(Collective::ReduceScatter),
            CollectiveDecl::AllGather => Ok(Collective::AllGather),
            CollectiveDecl::Broadcast { root: r } => {
                root(r).map(|root| Collective::Broadcast { root })
            }
            CollectiveDecl::Reduce { root: r } => root(r).map(|root| Collective::Reduce { root }),
        };
        let collective = match collective {
            Ok(c) => c,
            Err(p) => {
                problems.push(p);
                continue;
            }
        };
        let spec = ring::PhaseSpec {
            name: e.name.clone(),
            collective,
            op: match e.op {
                OpDecl::Sum => ReduceOp::Sum,
                OpDecl::Prod => ReduceOp::Prod,
                OpDecl::Max => ReduceOp::Max,
                OpDecl::Min => ReduceOp::Min,
                OpDecl::Mean => ReduceOp::Mean,
            },
            dtype: match e.dtype {
                DTypeDecl::F32 => DType::F32,
                DTypeDecl::F64 => DType::F64,
                DTypeDecl::I32 => DType::I32,
                DTypeDecl::I64 => DType::I64,
            },
            elements: e.elements,
        };
        out.push((at, e, spec));
    }
    if problems.is_empty() {
        Ok(out)
    } else {
        Err(problems)
    }
}

fn example_names(machine: &Machine) -> String {
    let names: Vec<String> = machine
        .compute_nodes()
        .iter()
        .take(4)
        .map(|&n| format!("`{}`", machine.node(n).name))
        .collect();
    format!(
        "{}{}",
        names.join(", "),
        if machine.node_count() > 4 {
            ", …"
        } else {
            ""
        }
    )
}

/// Chooses a method for one phase and lowers it.
fn lower_phase(
    machine: &Machine,
    at: &Path,
    spec: &ring::PhaseSpec,
    wanted: &str,
    knobs: &Knobs,
) -> Result<(schedule_ir::Phase, PhaseNote), Problem> {
    let at_algorithm = at.field("algorithm");
    let candidates: Vec<Method> = if wanted == "auto" {
        Method::ALL.to_vec()
    } else {
        match Method::from_name(wanted) {
            Some(m) => vec![m],
            None => {
                let known: Vec<&str> = Method::ALL.iter().map(|m| m.name()).collect();
                return Err(Problem::at(
                    at_algorithm,
                    format!("unknown algorithm `{wanted}`"),
                    "not a known method",
                )
                .hint(format!("write `auto` or one of: {}", known.join(", "))));
            }
        }
    };
    if let Some(v) = knobs.variant {
        if !Method::from_name(wanted).is_some_and(Method::takes_variant) {
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
            .hint(format!(
                "only {} takes a variant; name the algorithm too",
                takers.join(", ")
            )));
        }
        let method = Method::from_name(wanted).unwrap_or(Method::CubePlanes);
        if !method.variants().contains(&v) {
            let known: Vec<String> = method.variants().iter().map(u32::to_string).collect();
            return Err(Problem::at(
                at.field("variant"),
                format!("`{method}` has no variant {v}"),
                "unknown variant",
            )
            .hint(format!("write one of: {}", known.join(", "))));
        }
    }
    if !candidates.iter().any(|m| m.supports(spec.collective)) {
        let able: Vec<&str> = Method::ALL
            .iter()
            .filter(|m| m.supports(spec.collective))
            .map(|m| m.name())
            .collect();
        let what = describe(spec.collective);
        let (message, hint) = match (candidates.as_slice(), able.is_empty()) {
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
        return Err(Problem::at(at.field("collective"), message, "not supported").hint(hint));
    }
    crate::limits::check_vector(at, spec.elements, spec.dtype)?;
    let mut refusals: Vec<(Method, EmbedError)> = Vec::new();
    let mut too_large: Option<u64> = None;
    if wanted == "auto" {
        if let Some(chosen) = cheapest(machine, spec, knobs, &mut refusals, &mut too_large) {
            return Ok(chosen);
        }
    } else {
        for method in candidates.iter().filter(|m| m.supports(spec.collective)) {
            match method.lower(machine, spec, knobs) {
                Ok(lowered) => {
                    let reason = match &lowered.detail {
                        Some(detail) => format!("{method} requested; {detail}"),
                        None => format!("{method} requested"),
                    };
                    return Ok(noted(spec, *method, reason, lowered));
                }
                Err(EmbedError::TooLarge { instructions }) => too_large = Some(instructions),
                Err(e) => refusals.push((*method, e)),
            }
        }
    }
    if let Some(instructions) = too_large {
        return Err(crate::limits::check(at, machine.node_count(), instructions)
            .err()
            .unwrap_or_else(|| Problem::at(at.clone(), "internal: size limit disagrees", "here")));
    }
    let headline = format!(
        "no method can lower {} on machine `{}`",
        describe(spec.collective),
        machine.name
    );
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
    for (m, e) in &refusals {
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
    let hint = if candidates
        .iter()
        .any(|m| matches!(m, Method::Ring | Method::LadderRings))
    {
        "ring methods need a cycle through every compute node; add links so that one exists"
    } else {
        "write `auto` to let the compiler take the first method that applies"
    };
    Err(problem.hint(hint))
}

/// `auto`: lowers `spec` with every method that supports its collective and keeps the one
/// whose schedule the cost model prices lowest for the phase's own vector (of equal estimates,
/// the first in [`Method::ALL`]). The phase records every method weighed
/// ([`schedule_ir::Phase::candidates`]) and the note says the same in words. `None` when no
/// method applies; `refusals` then says why each did not, and `too_large` holds the size of
/// a schedule refused for its size.
fn cheapest(
    machine: &Machine,
    spec: &ring::PhaseSpec,
    knobs: &Knobs,
    refusals: &mut Vec<(Method, EmbedError)>,
    too_large: &mut Option<u64>,
) -> Option<(schedule_ir::Phase, PhaseNote)> {
    let ir = machine.to_ir();
    let mut weighed: Vec<(Method, f64)> = Vec::new();
    let mut best: Option<(Method, f64, Lowered)> = None;
    for method in Method::ALL {
        if !method.supports(spec.collective) {
            continue;
        }
        match method.lower(machine, spec, knobs) {
            Ok(lowered) => {
                let seconds = schedule_ir::cost::estimate(&ir, &lowered.phase).seconds;
                weighed.push((method, seconds));
                // Strictly cheaper only: of equal estimates the earlier method stays.
                if best.as_ref().is_none_or(|(_, s, _)| seconds < *s) {
                    best = Some((method, seconds, lowered));
                }
            }
            Err(EmbedError::TooLarge { instructions }) => {
                too_large.get_or_insert(instructions);
                refusals.push((method, EmbedError::TooLarge { instructions }));
            }
            Err(e) => refusals.push((method, e)),
        }
    }
    let (method, _, lowered) = best?;
    // A stable sort keeps `Method::ALL`'s order among equal estimates.
    weighed.sort_by(|a, b| a.1.total_cmp(&b.1));
    let bytes = spec.elements.saturating_mul(spec.dtype.size_bytes());
    let priced: Vec<String> = weighed
        .iter()
        .map(|(m, s)| format!("{m} {}", crate::simulate::format_seconds(*s)))
        .collect();
    let unable: Vec<&str> = Method::ALL
        .iter()
        .filter(|m| !m.supports(spec.collective))
        .map(|m| m.name())
        .collect();
    let mut reason = format!(
        "auto: cheapest for {} at {}: {}",
        describe(spec.collective),
        crate::simulate::format_bytes(bytes),
        priced.join(" < ")
    );
    for (m, e) in refusals.iter() {
        reason.push_str(&format!("; {m} does not apply ({e})"));
    }
    if !unable.is_empty() {
        reason.push_str(&format!(
            "; {} do not lower {}",
            unable.join(", "),
            describe(spec.collective)
        ));
    }
    if let Some(detail) = &lowered.detail {
        reason.push_str(&format!("; {detail}"));
    }
    let mut candidates: Vec<schedule_ir::Candidate> = weighed
        .iter()
        .map(|(m, s)| schedule_ir::Candidate {
            method: m.name().to_string(),
            estimate_seconds: Some(*s),
            note: String::new(),
        })
        .collect();
    candidates.extend(refusals.iter().map(|(m, e)| schedule_ir::Candidate {
        method: m.name().to_string(),
        estimate_seconds: None,
        note: e.to_string(),
    }));
    candidates.extend(unable.iter().map(|m| schedule_ir::Candidate {
        method: (*m).to_string(),
        estimate_seconds: None,
        note: format!("does not lower {}", describe(spec.collective)),
    }));
    let (mut phase, note) = noted(spec, method, reason, lowered);
    phase.candidates = candidates;
    Some((phase, note))
}

/// The phase a method lowered, with its note.
fn noted(
    spec: &ring::PhaseSpec,
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
    };
    (lowered.phase, note)
}

fn describe(c: Collective) -> String {
    match c {
        Collective::Broadcast { .. } => "broadcast".to_string(),
        Collective::Reduce { .. } => "reduce".to_string(),
        other => other.to_string(),
    }
}
