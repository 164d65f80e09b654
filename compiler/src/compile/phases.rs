//! The exchange phases a topology file asks for, checked, and the BSP program around them.

use super::Options;
use crate::diag::Problem;
use crate::lower::{halving_doubling, Choice, Knobs, PhaseSpec};
use crate::machine::Machine;
use crate::path;
use crate::topology::ast::{CollectiveDecl, DTypeDecl, Exchange, OpDecl, PhaseDecl, TopologyFile};
use crate::topology::spans::Path;
use schedule_ir::{Collective, DType, ProgramItem, ReduceOp};
use std::collections::BTreeMap;

/// One exchange phase as the file declares it: where, what it asks for, and the spec every
/// method lowers.
#[derive(Clone, Debug)]
pub struct PhaseRequest {
    /// Where the phase is declared (the default phase: `phases`).
    pub at: Path,
    /// The declaration.
    pub exchange: Exchange,
    /// What to lower.
    pub spec: PhaseSpec,
}

impl PhaseRequest {
    /// The method the phase names (`auto` when it names none), or a problem pointing at the
    /// name.
    pub fn choice(&self) -> Result<Choice, Problem> {
        let Some(name) = &self.exchange.algorithm else {
            return Ok(Choice::Auto);
        };
        name.parse::<Choice>().map_err(|_| {
            Problem::at(
                self.at.field("algorithm"),
                format!("unknown algorithm `{name}`"),
                "not a known method",
            )
            .hint(format!(
                "write `auto` or one of: {}",
                Choice::method_names()
            ))
        })
    }

    /// The phase's knobs, the command line's overriding the file's; a problem when its slices
    /// are out of range.
    pub fn knobs(&self, options: &Options) -> Result<Knobs, Problem> {
        let slices = match options.slices {
            Some(k) => vec![k],
            None => self
                .exchange
                .slices
                .as_ref()
                .map(|s| s.per_round())
                .unwrap_or_default(),
        };
        if options.slices.is_none() && self.exchange.slices.is_some() && slices.is_empty() {
            return Err(Problem::at(
                self.at.field("slices"),
                "an empty list of slices per round",
                "lists no round",
            )
            .hint(format!(
                "write one count for every round (`slices: 4`), or one per round \
                 (`slices: [2, 4, 4]`), each from 1 to {}; leave `slices` out for the default",
                halving_doubling::MAX_SLICES
            )));
        }
        if let Some(bad) = slices
            .iter()
            .find(|&&k| k == 0 || k > halving_doubling::MAX_SLICES)
        {
            return Err(Problem::at(
                self.at.field("slices"),
                format!("{bad} slices per round is out of range"),
                format!("not between 1 and {}", halving_doubling::MAX_SLICES),
            )
            .hint(format!(
                "cut each round's half into 1 to {} slices ({} is the default)",
                halving_doubling::MAX_SLICES,
                halving_doubling::DEFAULT_SLICES
            )));
        }
        Ok(Knobs {
            variant: options.variant.or(self.exchange.variant),
            slices,
            budget: options.budget,
        })
    }
}

/// The BSP program: the file's compute and exchange phases in order, or, when it declares no
/// exchange, its compute phases followed by the default exchange phase.
pub fn program(file: &TopologyFile, requests: &[PhaseRequest]) -> Vec<ProgramItem> {
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
            requests
                .iter()
                .map(|r| ProgramItem::Exchange(r.exchange.name.clone())),
        );
    }
    items
}

/// The exchange phases of the file (or the default one), checked, with their paths.
pub fn exchanges(
    file: &TopologyFile,
    machine: &Machine,
) -> Result<Vec<PhaseRequest>, Vec<Problem>> {
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
        let spec = PhaseSpec {
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
                DTypeDecl::F16 => DType::F16,
                DTypeDecl::BF16 => DType::BF16,
            },
            elements: e.elements,
        };
        out.push(PhaseRequest {
            at,
            exchange: e,
            spec,
        });
    }
    if problems.is_empty() {
        Ok(out)
    } else {
        Err(problems)
    }
}

pub(super) fn example_names(machine: &Machine) -> String {
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
