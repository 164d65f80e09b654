//! From a topology file to a [`Machine`]: checks every number and name of the declaration,
//! runs the generator for its kind, checks that the result is connected, applies per-link
//! parameters ([`overrides`]) and then takes out the failed links and nodes ([`failures`]).

use super::{
    fabric, failures, graph, hypercube, ladder, mesh, overrides, ring, torus, tree, Machine,
};
use crate::diag::Problem;
use crate::path;
use crate::topology::ast::{LinkParams, MachineDecl, TopologyFile};
use crate::topology::spans::Path;

/// The largest machine the compiler accepts, in nodes. Schedules grow with the square of the
/// node count; this keeps a typo (`nodes: 80000000`) from exhausting memory.
pub const MAX_NODES: u64 = 1 << 16;

/// The most links a machine may have (a full mesh grows with the square of its nodes).
pub const MAX_LINKS: u64 = 1 << 20;

/// The most dimensions of a hypercube: 2^16 nodes is [`MAX_NODES`].
pub const MAX_HYPERCUBE_DIMS: u32 = 16;

/// A number of the topology language with a unit and the range of values the compiler
/// accepts. The range keeps the cost model's arithmetic meaningful: a bandwidth of `1e-320`
/// (subnormal) made every estimate `inf` and every efficiency `NaN`, so figures are held to
/// sane physical bounds rather than merely to being finite and positive; the ranges are the
/// schedule IR's ([`schedule_ir::limits`]), so every machine the language accepts verifies. Counts (a link's
/// lanes) are figures too, so that every bounded number of a link is refused the same way.
pub struct Figure {
    /// What the number is, for the message ("link bandwidth").
    pub what: &'static str,
    /// The field's name in the file, for the hint.
    pub field: &'static str,
    /// Its unit as the docs write it.
    pub unit: &'static str,
    /// The smallest accepted value other than zero.
    pub min: f64,
    /// The largest accepted value.
    pub max: f64,
    /// Whether exactly zero is accepted (latencies), beside `[min, max]`.
    pub zero: bool,
    /// What the number means, for the hint.
    pub meaning: &'static str,
    /// An example value for the hint.
    pub example: &'static str,
    /// Whether the figure counts something: its values are whole and shown in full
    /// (`4000000000`, not `4e9`), as the user wrote them.
    pub whole: bool,
}

/// A link's bandwidth per direction: 1 kbit/s to 10^9 Gbit/s.
pub const BANDWIDTH: Figure = Figure {
    what: "link bandwidth",
    field: "bandwidth_gbps",
    meaning: "the bandwidth of each direction",
    unit: "Gbit/s",
    min: *schedule_ir::limits::RATE_GBPS.start(),
    max: *schedule_ir::limits::RATE_GBPS.end(),
    zero: false,
    example: "100.0",
    whole: false,
};

/// A link's one-way latency: zero, or 1 ps to 1000 s.
pub const LATENCY: Figure = Figure {
    what: "link latency",
    field: "latency_us",
    meaning: "the one-way latency",
    unit: "µs",
    min: *schedule_ir::limits::LATENCY_US.start(),
    max: *schedule_ir::limits::LATENCY_US.end(),
    zero: true,
    example: "1.0",
    whole: false,
};

/// How fast a node combines data: the same range as a bandwidth.
pub const REDUCE_RATE: Figure = Figure {
    what: "reduction rate",
    field: "reduce_gbps",
    meaning: "the rate at which a node combines data (leave it out to make reduction free in the estimates)",
    unit: "Gbit/s",
    min: *schedule_ir::limits::RATE_GBPS.start(),
    max: *schedule_ir::limits::RATE_GBPS.end(),
    zero: false,
    example: "800.0",
    whole: false,
};

/// What a transfer pays per switch: the same range as a latency.
pub const SWITCH_LATENCY: Figure = Figure {
    what: "switch latency",
    field: "switch_latency_us",
    meaning: "what a transfer pays for each switch it passes through",
    unit: "µs",
    min: *schedule_ir::limits::LATENCY_US.start(),
    max: *schedule_ir::limits::LATENCY_US.end(),
    zero: true,
    example: "0.3",
    whole: false,
};

/// The most lanes a link may have ([`schedule_ir::limits::MAX_LANES`], which a schedule's
/// machine is held to as well).
pub const MAX_LANES: u32 = schedule_ir::limits::MAX_LANES;

/// A link's lanes per direction: 1 to [`MAX_LANES`] (0 would carry nothing).
pub const LANES: Figure = Figure {
    what: "link's lane count",
    field: "lanes",
    meaning: "how many transfers each direction of the link carries in one step (1 when left out)",
    unit: "lanes",
    min: 1.0,
    max: MAX_LANES as f64,
    zero: false,
    example: "2",
    whole: true,
};

impl Figure {
    /// Whether `value` is accepted.
    pub fn accepts(&self, value: f64) -> bool {
        (self.zero && value == 0.0) || (self.min..=self.max).contains(&value)
    }

    /// The accepted range in words, as the docs state it.
    pub fn range(&self) -> String {
        let zero = if self.zero { "0 or " } else { "" };
        let bound = |v: f64| {
            if self.whole {
                self.shown(v)
            } else {
                format!("{v:e}")
            }
        };
        format!(
            "{zero}between {} and {} {}",
            bound(self.min),
            bound(self.max),
            self.unit
        )
    }

    /// A value of this figure as the user would recognise it.
    fn shown(&self, value: f64) -> String {
        if self.whole {
            format!("{value:.0}")
        } else {
            shown(value)
        }
    }

    /// The problem with `value` at `at` (the field's own path), if any.
    pub fn check(&self, at: Path, value: f64) -> Option<Problem> {
        if self.accepts(value) {
            return None;
        }
        let label = if value.is_nan() {
            "not a number"
        } else if value < 0.0 || (value == 0.0 && !self.zero) {
            if self.zero {
                "negative"
            } else {
                "not a positive number"
            }
        } else if value < self.min {
            "too small"
        } else {
            "too large"
        };
        Some(
            Problem::at(
                at,
                format!(
                    "a {} must be {}, not {}",
                    self.what,
                    self.range(),
                    self.shown(value)
                ),
                label,
            )
            .hint(format!(
                "`{}` is {}, {}, e.g. `{}: {}`",
                self.field,
                self.meaning,
                self.range(),
                self.field,
                self.example
            )),
        )
    }
}

/// A number as the user would recognise it: plain when of ordinary size, else in exponent
/// form (a subnormal written out in full is hundreds of digits).
fn shown(value: f64) -> String {
    let size = value.abs();
    if value == 0.0 || (1e-4..1e7).contains(&size) || !value.is_finite() {
        format!("{value}")
    } else {
        format!("{value:e}")
    }
}

/// Checks a link's parameters; `at` is the path of the declaration that holds the fields.
pub fn check_params(at: &Path, p: &LinkParams) -> Vec<Problem> {
    [
        BANDWIDTH.check(at.field("bandwidth_gbps"), p.bandwidth_gbps),
        LATENCY.check(at.field("latency_us"), p.latency_us),
        LANES.check(at.field("lanes"), f64::from(p.lanes)),
    ]
    .into_iter()
    .flatten()
    .collect()
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
    let figures = [
        file.reduce_gbps
            .and_then(|v| REDUCE_RATE.check(path!["reduce_gbps"], v)),
        file.switch_latency_us
            .and_then(|v| SWITCH_LATENCY.check(path!["switch_latency_us"], v)),
    ];
    let mut problems: Vec<Problem> = figures.into_iter().flatten().collect();
    // The machine's own figures are reported beside the file's, not after they are fixed.
    let machine = match generate(file) {
        Ok(machine) if problems.is_empty() => machine,
        Ok(_) => return Err(problems),
        Err(more) => {
            problems.extend(more);
            return Err(problems);
        }
    };
    check_connected(&machine)?;
    let common = file.machine.common();
    let machine = overrides::apply(machine, common.link_overrides)?;
    let mut machine = failures::apply(machine, common.failed_links, common.failed_nodes)?;
    machine.reduce_gbps = file.reduce_gbps;
    machine.switch_latency_us = file.switch_latency_us.unwrap_or(0.0);
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
    let link_at = path!["machine", "link"];
    Ok(match &file.machine {
        MachineDecl::Ring { nodes, link, .. } => {
            all_well(check_ring(*nodes, check_params(&link_at, link)))?;
            ring::ring(name, *nodes as usize, *link)
        }
        MachineDecl::Ladder {
            pairs, link, rung, ..
        } => {
            let mut problems = check_params(&link_at, link);
            if let Some(r) = rung {
                problems.extend(check_params(&path!["machine", "rung"], r));
            }
            all_well(check_ladder(*pairs, problems))?;
            ladder::ladder(name, *pairs as usize, *link, rung.unwrap_or(*link))
        }
        MachineDecl::Hypercube { dims, link, .. } => {
            all_well(check_hypercube(*dims, check_params(&link_at, link)))?;
            hypercube::hypercube(name, *dims, *link)
        }
        MachineDecl::Cube { link, .. } => {
            all_well(check_params(&link_at, link))?;
            hypercube::cube(name, *link)
        }
        MachineDecl::Torus { dims, link, .. } => {
            let dims = check_grid(dims, link, "torus")?;
            torus::torus(name, &dims, *link)
        }
        MachineDecl::Mesh { dims, link, .. } => {
            let dims = check_grid(dims, link, "mesh")?;
            torus::mesh(name, &dims, *link)
        }
        MachineDecl::FullMesh { nodes, link, .. } => {
            all_well(check_full_mesh(*nodes, check_params(&link_at, link)))?;
            mesh::full_mesh(name, *nodes as usize, *link)
        }
        MachineDecl::Tree { root, link, .. } => tree::tree(name, root, *link)?,
        MachineDecl::Fabric {
            hosts,
            ranks_per_host,
            nics_per_host,
            leaf_switches,
            spines,
            host_fabric,
            nic,
            switch,
            host_link,
            network_link,
            spine_link,
            ..
        } => fabric::fabric(
            name,
            &fabric::FabricDecl {
                hosts: *hosts,
                ranks_per_host: *ranks_per_host,
                nics_per_host: *nics_per_host,
                leaf_switches: *leaf_switches,
                spines: *spines,
                host_fabric: *host_fabric,
                nic,
                switch,
                host_link: *host_link,
                network_link: *network_link,
                spine_link: spine_link.unwrap_or(*network_link),
            },
        )?,
        MachineDecl::Graph {
            nodes,
            switches,
            links,
            link,
            ..
        } => {
            all_well(check_params(&link_at, link))?;
            let count = nodes.len() as u64 + switches.len() as u64;
            if count > MAX_NODES {
                return Err(vec![too_many(path!["machine", "nodes"], count, "nodes")]);
            }
            graph::graph(name, nodes, switches, links, *link)?
        }
    })
}

/// `Ok` when no problem was found: the generators run only on checked declarations.
fn all_well(problems: Vec<Problem>) -> Result<(), Vec<Problem>> {
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems)
    }
}

/// Adds the problems of a `Ring`'s node count to `problems`.
fn check_ring(nodes: u32, mut problems: Vec<Problem>) -> Vec<Problem> {
    if nodes < 2 {
        problems.push(
            Problem::at(
                path!["machine", "nodes"],
                format!("a ring needs at least 2 nodes, not {nodes}"),
                "too few nodes",
            )
            .hint("a collective needs at least two nodes to exchange anything"),
        );
    } else if u64::from(nodes) > MAX_NODES {
        problems.push(too_many(path!["machine", "nodes"], nodes.into(), "nodes"));
    }
    problems
}

/// Adds the problems of a `Ladder`'s pair count to `problems`.
fn check_ladder(pairs: u32, mut problems: Vec<Problem>) -> Vec<Problem> {
    if pairs == 0 {
        problems.push(
            Problem::at(
                path!["machine", "pairs"],
                "a ladder needs at least 1 pair of nodes, not 0",
                "no pairs",
            )
            .hint("write `pairs: 1` or more; `examples/ladder8.ron` has 4"),
        );
    } else if 2 * u64::from(pairs) > MAX_NODES {
        problems.push(too_many(
            path!["machine", "pairs"],
            2 * u64::from(pairs),
            "nodes",
        ));
    }
    problems
}

/// Adds the problems of a `Hypercube`'s dimension count to `problems`.
fn check_hypercube(dims: u32, mut problems: Vec<Problem>) -> Vec<Problem> {
    if dims == 0 || dims > MAX_HYPERCUBE_DIMS {
        problems.push(
            Problem::at(
                path!["machine", "dims"],
                format!("a hypercube has 1 to {MAX_HYPERCUBE_DIMS} dimensions, not {dims}"),
                "out of range",
            )
            .hint(format!(
                "`dims: d` gives 2^d nodes; {MAX_HYPERCUBE_DIMS} dimensions are {MAX_NODES} nodes"
            )),
        );
    }
    problems
}

/// Adds the problems of a `FullMesh`'s node count to `problems`.
fn check_full_mesh(nodes: u32, mut problems: Vec<Problem>) -> Vec<Problem> {
    let links = u64::from(nodes) * u64::from(nodes.saturating_sub(1)) / 2;
    if nodes < 2 {
        problems.push(
            Problem::at(
                path!["machine", "nodes"],
                format!("a full mesh needs at least 2 nodes, not {nodes}"),
                "too few nodes",
            )
            .hint("a collective needs at least two nodes to exchange anything"),
        );
    } else if links > MAX_LINKS {
        problems.push(
            Problem::at(
                path!["machine", "nodes"],
                format!(
                    "a full mesh of {nodes} nodes has {links} links, more than the compiler supports ({MAX_LINKS})"
                ),
                "too large",
            )
            .hint("1448 nodes is the largest full mesh"),
        );
    }
    problems
}

/// Checks the sizes of a torus's or mesh's grid (`kind` names it in messages) and its link.
fn check_grid(dims: &[u32], link: &LinkParams, kind: &str) -> Result<Vec<usize>, Vec<Problem>> {
    let mut problems = check_params(&path!["machine", "link"], link);
    if dims.is_empty() {
        problems.push(
            Problem::at(
                path!["machine", "dims"],
                format!("a {kind} needs at least one dimension"),
                "no dimensions",
            )
            .hint("give the size of each dimension, e.g. `dims: [4, 4]`"),
        );
    }
    for (k, &d) in dims.iter().enumerate() {
        if d < 2 {
            problems.push(
                Problem::at(
                    path!["machine", "dims", k],
                    format!("dimension {k} of the {kind} has size {d}; each needs at least 2"),
                    "too small",
                )
                .hint(if d == 1 {
                    "a dimension of size 1 adds no link; leave it out"
                } else {
                    "a dimension of size 0 has no nodes at all"
                }),
            );
        }
    }
    let count = dims.iter().try_fold(1u64, |acc, &d| {
        acc.checked_mul(u64::from(d)).filter(|&c| c <= MAX_NODES)
    });
    if problems.is_empty() && count.is_none() {
        let shown: Vec<String> = dims.iter().map(ToString::to_string).collect();
        problems.push(Problem::at(
            path!["machine", "dims"],
            format!(
                "a {} {kind} is more than the compiler supports ({MAX_NODES} nodes)",
                shown.join(" × ")
            ),
            "too large",
        ));
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    Ok(dims.iter().map(|&d| d as usize).collect())
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
