//! From a topology file to a [`Machine`]: checks every number and name of the declaration,
//! runs the generator for its kind, checks that the result is connected, then takes out the
//! failed links and nodes ([`failures`]).

use super::{failures, graph, ladder, ring, Machine};
use crate::diag::Problem;
use crate::path;
use crate::topology::ast::{LinkParams, MachineDecl, TopologyFile};
use crate::topology::spans::Path;

/// The largest machine the compiler accepts, in nodes. Schedules grow with the square of the
/// node count; this keeps a typo (`nodes: 80000000`) from exhausting memory.
pub const MAX_NODES: u64 = 1 << 14;

/// Checks a link's parameters; `at` is the path of the declaration that holds the fields.
pub fn check_params(at: &Path, p: &LinkParams) -> Vec<Problem> {
    let mut problems = Vec::new();
    if !(p.bandwidth_gbps.is_finite() && p.bandwidth_gbps > 0.0) {
        problems.push(
            Problem::at(
                at.field("bandwidth_gbps"),
                format!("link bandwidth must be positive, not {}", p.bandwidth_gbps),
                "not a positive number",
            )
            .hint("bandwidth is per direction in Gbit/s, e.g. `bandwidth_gbps: 100.0`"),
        );
    }
    if !(p.latency_us.is_finite() && p.latency_us >= 0.0) {
        problems.push(
            Problem::at(
                at.field("latency_us"),
                format!("link latency must be zero or more, not {}", p.latency_us),
                "not a non-negative number",
            )
            .hint("latency is one-way in microseconds, e.g. `latency_us: 1.0`"),
        );
    }
    if p.lanes == 0 {
        problems.push(
            Problem::at(
                at.field("lanes"),
                "a link needs at least one lane",
                "0 lanes",
            )
            .hint("leave `lanes` out for the default of 1"),
        );
    }
    problems
}

pub(crate) fn too_many(at: Path, count: u64, what: &str) -> Problem {
    Problem::at(
        at,
        format!("{count} {what} is more than the compiler supports ({MAX_NODES} nodes)"),
        "too large",
    )
}

/// Builds the machine of a topology file, or reports every problem found.
pub fn build(file: &TopologyFile) -> Result<Machine, Vec<Problem>> {
    let machine = generate(file)?;
    check_connected(&machine)?;
    let (failed_links, failed_nodes) = file.machine.failures();
    let machine = failures::apply(machine, failed_links, failed_nodes)?;
    let compute = machine.compute_nodes().len();
    if compute < 2 {
        return Err(vec![Problem::at(
            path!["machine"],
            format!("the machine has {compute} compute node(s); a collective needs at least two"),
            "too few compute nodes",
        )]);
    }
    Ok(machine)
}

/// Runs the generator of the declared kind, after checking its numbers and names.
fn generate(file: &TopologyFile) -> Result<Machine, Vec<Problem>> {
    let name = file.name.as_str();
    Ok(match &file.machine {
        MachineDecl::Ring { nodes, link, .. } => {
            let mut problems = check_params(&path!["machine", "link"], link);
            if *nodes < 2 {
                problems.push(
                    Problem::at(
                        path!["machine", "nodes"],
                        format!("a ring needs at least 2 nodes, not {nodes}"),
                        "too few nodes",
                    )
                    .hint("a collective needs at least two nodes to exchange anything"),
                );
            } else if u64::from(*nodes) > MAX_NODES {
                problems.push(too_many(
                    path!["machine", "nodes"],
                    (*nodes).into(),
                    "nodes",
                ));
            }
            if !problems.is_empty() {
                return Err(problems);
            }
            ring::ring(name, *nodes as usize, *link)
        }
        MachineDecl::Ladder {
            pairs, link, rung, ..
        } => {
            let mut problems = check_params(&path!["machine", "link"], link);
            if let Some(r) = rung {
                problems.extend(check_params(&path!["machine", "rung"], r));
            }
            if *pairs == 0 {
                problems.push(
                    Problem::at(
                        path!["machine", "pairs"],
                        "a ladder needs at least 1 pair of nodes, not 0",
                        "no pairs",
                    )
                    .hint("seed 004's smallest figure has `pairs: 4` (8 nodes)"),
                );
            } else if 2 * u64::from(*pairs) > MAX_NODES {
                problems.push(too_many(
                    path!["machine", "pairs"],
                    2 * u64::from(*pairs),
                    "nodes",
                ));
            }
            if !problems.is_empty() {
                return Err(problems);
            }
            ladder::ladder(name, *pairs as usize, *link, rung.unwrap_or(*link))
        }
        MachineDecl::Graph {
            nodes,
            switches,
            links,
            link,
            ..
        } => {
            let problems = check_params(&path!["machine", "link"], link);
            if !problems.is_empty() {
                return Err(problems);
            }
            let count = nodes.len() as u64 + switches.len() as u64;
            if count > MAX_NODES {
                return Err(vec![too_many(path!["machine", "nodes"], count, "nodes")]);
            }
            graph::graph(name, nodes, switches, links, *link)?
        }
    })
}

/// A machine must be one piece as declared: a collective cannot cross from one part to another.
fn check_connected(machine: &Machine) -> Result<(), Vec<Problem>> {
    let parts = failures::components(machine);
    if parts.len() <= 1 {
        return Ok(());
    }
    let rest: Vec<String> = parts[1..]
        .iter()
        .map(|p| failures::show(machine, p))
        .collect();
    Err(vec![Problem::at(
        path!["machine"],
        format!(
            "the machine is not connected: {} cannot reach {}",
            rest.join(" and "),
            failures::show(machine, &parts[0])
        ),
        format!("{} separate parts", parts.len()),
    )
    .hint(
        "add links joining the parts, or declare them as separate machines",
    )])
}
