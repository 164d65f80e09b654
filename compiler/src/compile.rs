//! The compiler driver: topology text in, verified schedule out.
//!
//! parse → build the machine → for every exchange phase: choose a method, embed, lower →
//! assemble the [`Schedule`] → verify. Problems with the file come back as [`Problem`]s that
//! point into it; a schedule that fails verification is a compiler bug and is reported as such,
//! never emitted.

use crate::diag::Problem;
use crate::embed::EmbedError;
use crate::lower::{ring, Method};
use crate::machine::{self, Machine};
use crate::path;
use crate::topology::ast::{CollectiveDecl, DTypeDecl, Exchange, OpDecl, PhaseDecl, TopologyFile};
use crate::topology::{self, spans::Path};
use crate::Error;
use schedule_ir::{Collective, DType, ReduceOp, Schedule, VerifiedSchedule, FORMAT_VERSION};
use std::collections::BTreeMap;

/// Choices the command line can override.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Force a method for every phase (`None` or `auto`: each phase's own choice, or the best).
    pub algorithm: Option<String>,
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
    /// The embedded rings, one direction each, rendered with names.
    pub rings: Vec<String>,
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
    let file = topology::parse(source).map_err(|p| Error::Topology(vec![p]))?;
    let machine = machine::build(&file).map_err(Error::Topology)?;
    Ok((file, machine))
}

/// Compiles a topology text.
pub fn compile(source: &str, options: &Options) -> Result<Compiled, Error> {
    let (file, machine) = load(source)?;
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
        match lower_phase(&machine, at, spec, &wanted) {
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
        phases,
    };
    let schedule = schedule_ir::verify(schedule).map_err(Error::Unverified)?;
    Ok(Compiled {
        machine,
        schedule,
        notes,
    })
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
    if !ring::supports(spec.collective) {
        return Err(Problem::at(
            at.field("collective"),
            format!(
                "this compiler cannot lower {} yet",
                describe(spec.collective)
            ),
            "not supported",
        )
        .hint("allreduce, reduce-scatter and allgather are available; broadcast and reduce are planned"));
    }
    crate::limits::check_vector(at, spec.elements, spec.dtype)?;
    let mut refusals: Vec<(Method, EmbedError)> = Vec::new();
    for method in &candidates {
        match method.embed(machine) {
            Ok(rings) => {
                let logical = ring::both_directions(&rings);
                let size = crate::limits::ring_instructions(spec.collective, &logical);
                crate::limits::check(at, machine.node_count(), size)?;
                let phase = ring::lower(spec, method.name(), machine.node_count(), &logical)
                    .ok_or_else(|| {
                        Problem::at(
                            at.clone(),
                            "internal: lowering refused a supported collective",
                            "here",
                        )
                    })?;
                let reason = if wanted == "auto" {
                    let skipped: Vec<String> = refusals
                        .iter()
                        .map(|(m, e)| format!("{m} does not apply ({e})"))
                        .collect();
                    if skipped.is_empty() {
                        format!("auto: {method} is the first method that applies")
                    } else {
                        format!("auto: {}; using {method}", skipped.join("; "))
                    }
                } else {
                    format!("{method} requested")
                };
                let note = PhaseNote {
                    phase: spec.name.clone(),
                    method: *method,
                    reason,
                    rings: rings.iter().map(|r| r.describe(machine)).collect(),
                };
                return Ok((phase, note));
            }
            Err(e) => refusals.push((*method, e)),
        }
    }
    let mut problem = Problem::at(
        at.field("collective"),
        format!(
            "no method can lower {} on machine `{}`",
            describe(spec.collective),
            machine.name
        ),
        "cannot be compiled for this machine",
    )
    .also(path!["machine"], "the machine");
    for (m, e) in &refusals {
        problem = problem.note(format!("{m}: {e}"));
    }
    Err(problem
        .hint("ring methods need a cycle through every compute node; add links so that one exists"))
}

fn describe(c: Collective) -> String {
    match c {
        Collective::Broadcast { .. } => "broadcast".to_string(),
        Collective::Reduce { .. } => "reduce".to_string(),
        other => other.to_string(),
    }
}
