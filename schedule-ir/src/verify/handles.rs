//! Pass 1, well-formed: every id in range, every count and range sane, every route connected.
//!
//! Nothing here indexes a vector with a value from the schedule before checking it; the later
//! passes run only when this one found nothing, and may then index freely.

use super::instrs::InstrChecker;
use super::{buffer, link, node, step_id, ErrorKind, Location, VerifyError};
use crate::limits::{MAX_COUNT, MAX_VECTOR_BYTES};
use crate::{
    Buffer, BufferKind, Chunk, ChunkId, Collective, Link, LinkId, Machine, Node, NodeId, NodeKind,
    Phase, Program, ProgramItem, Schedule, FORMAT_VERSION,
};
use std::collections::BTreeMap;

/// Runs the pass, appending every problem to `errors`.
pub(super) fn check(schedule: &Schedule, errors: &mut Vec<VerifyError>) {
    check_with(schedule, true, errors);
}

/// The pass without the phases' programs: the schedule, the machine, the phase headers and
/// the BSP program. For a pattern, whose one program per phase is checked apart.
pub(super) fn check_headers(schedule: &Schedule, errors: &mut Vec<VerifyError>) {
    check_with(schedule, false, errors);
}

fn check_with(schedule: &Schedule, programs: bool, errors: &mut Vec<VerifyError>) {
    let Schedule {
        format_version,
        machine,
        program,
        phases,
    } = schedule;
    if *format_version != FORMAT_VERSION {
        errors.push(Location::schedule().error(ErrorKind::FormatVersion {
            found: *format_version,
            expected: FORMAT_VERSION,
        }));
    }
    if !counts_fit(schedule, errors) {
        return;
    }
    if !check_machine(machine, errors) {
        // Every route and link use of a phase would be suspect: report the machine alone.
        return;
    }
    let mut names = BTreeMap::new();
    for phase in phases {
        if names.insert(phase.name.as_str(), ()).is_some() {
            errors.push(Location::phase(&phase.name).error(ErrorKind::DuplicatePhaseName));
        }
        check_header(machine, phase, errors);
        if programs {
            check_programs(machine, phase, &Location::phase(&phase.name), errors);
        }
    }
    check_program(program, phases, errors);
    super::bands::check(schedule, errors);
}

/// The program names every phase once, in the order of `phases` (an empty program is fine).
fn check_program(program: &[ProgramItem], phases: &[Phase], errors: &mut Vec<VerifyError>) {
    if program.is_empty() {
        return;
    }
    let mut counts: BTreeMap<&str, usize> = phases.iter().map(|p| (p.name.as_str(), 0)).collect();
    let mut runs: Vec<(usize, &str)> = Vec::new();
    // A banded exchange runs each of its bands' phases, in band order.
    let named = program
        .iter()
        .enumerate()
        .flat_map(|(position, item)| -> Vec<(usize, &String)> {
            match item {
                ProgramItem::Compute(_) => Vec::new(),
                ProgramItem::Exchange(name) => vec![(position, name)],
                ProgramItem::Bands { bands, .. } => {
                    bands.iter().map(|b| (position, &b.phase)).collect()
                }
            }
        });
    for (position, name) in named {
        match counts.get_mut(name.as_str()) {
            Some(count) => {
                *count += 1;
                runs.push((position, name));
            }
            None => errors.push(Location::schedule().error(ErrorKind::ProgramUnknownPhase {
                position,
                name: name.clone(),
            })),
        }
    }
    let mut miscounted = false;
    for phase in phases {
        let count = counts.get(phase.name.as_str()).copied().unwrap_or(0);
        if count != 1 {
            miscounted = true;
            errors.push(Location::phase(&phase.name).error(ErrorKind::ProgramPhaseCount { count }));
        }
    }
    if miscounted {
        return;
    }
    // Each phase named once: the names must come in the order of `phases`.
    if let Some(((position, found), expected)) = runs
        .iter()
        .zip(phases)
        .find(|((_, found), phase)| *found != phase.name)
    {
        errors.push(Location::phase(found).error(ErrorKind::ProgramOrder {
            position: *position,
            found: found.to_string(),
            expected: expected.name.clone(),
        }));
    }
}

/// Whether every count fits in a `u32` (reporting those that do not).
fn counts_fit(schedule: &Schedule, errors: &mut Vec<VerifyError>) -> bool {
    let mut counts = vec![
        (
            None,
            "nodes in the machine".to_string(),
            schedule.machine.nodes.len(),
        ),
        (
            None,
            "links in the machine".to_string(),
            schedule.machine.links.len(),
        ),
    ];
    for phase in &schedule.phases {
        let longest = phase.programs.iter().map(|p| p.steps.len()).max();
        for (what, count) in [
            ("chunks", phase.chunks.len()),
            ("buffers", phase.buffers.len()),
            ("steps", longest.unwrap_or(0)),
        ] {
            counts.push((
                Some(phase.name.as_str()),
                format!("phase `{}`: {what}", phase.name),
                count,
            ));
        }
    }
    let before = errors.len();
    for (phase, what, count) in counts {
        let count = count as u64;
        if count > MAX_COUNT {
            let at = phase.map_or_else(Location::schedule, Location::phase);
            errors.push(at.error(ErrorKind::TooLarge {
                what,
                count,
                limit: MAX_COUNT,
            }));
        }
    }
    errors.len() == before
}

/// The machine's invariants; returns whether they all hold.
fn check_machine(machine: &Machine, errors: &mut Vec<VerifyError>) -> bool {
    let before = errors.len();
    let Machine {
        name,
        nodes,
        links: _,
        reduce_gbps,
        switch_latency_us,
    } = machine;
    if !crate::limits::latency_accepted(*switch_latency_us) {
        errors.push(Location::schedule().error(ErrorKind::InvalidSwitchLatency {
            machine: name.clone(),
            value: figure(*switch_latency_us),
        }));
    }
    if let Some(rate) = *reduce_gbps {
        if !crate::limits::rate_accepted(rate) {
            errors.push(Location::schedule().error(ErrorKind::InvalidReduceRate {
                machine: name.clone(),
                value: figure(rate),
            }));
        }
    }
    if !nodes.iter().any(|n| n.kind == NodeKind::Compute) {
        errors.push(Location::schedule().error(ErrorKind::NoComputeNodes {
            machine: name.clone(),
        }));
    }
    check_nodes(machine, errors);
    check_links(machine, errors);
    errors.len() == before
}

/// Each node's capacity and the uniqueness of its name.
fn check_nodes(machine: &Machine, errors: &mut Vec<VerifyError>) {
    let mut node_names: BTreeMap<&str, NodeId> = BTreeMap::new();
    for (i, n) in machine.nodes.iter().enumerate() {
        let Node {
            name,
            kind,
            capacity,
        } = n;
        let id = super::node_id(i);
        if let Some(c) = *capacity {
            if *kind == NodeKind::Compute || c == 0 {
                errors.push(
                    Location::schedule()
                        .node(node(machine, id))
                        .error(ErrorKind::BadCapacity { capacity: c }),
                );
            }
        }
        if let Some(&first) = node_names.get(name.as_str()) {
            errors.push(Location::schedule().node(node(machine, id)).error(
                ErrorKind::DuplicateNodeName {
                    name: name.clone(),
                    first,
                    second: id,
                },
            ));
        } else {
            node_names.insert(name, id);
        }
    }
}

/// Each link's ends, figures and the uniqueness of its name.
fn check_links(machine: &Machine, errors: &mut Vec<VerifyError>) {
    let nodes = &machine.nodes;
    let mut link_names: BTreeMap<&str, LinkId> = BTreeMap::new();
    for (i, l) in machine.links.iter().enumerate() {
        let Link {
            name,
            a,
            b,
            bandwidth_gbps,
            latency_us,
            lanes,
        } = l;
        let id = LinkId(u32::try_from(i).unwrap_or(u32::MAX));
        let named = link(machine, id);
        if let Some(&first) = link_names.get(name.as_str()) {
            errors.push(Location::schedule().link(named.clone()).error(
                ErrorKind::DuplicateLinkName {
                    name: name.clone(),
                    first,
                    second: id,
                },
            ));
        } else {
            link_names.insert(name, id);
        }
        for endpoint in [*a, *b] {
            if endpoint.index() >= nodes.len() {
                errors.push(Location::schedule().link(named.clone()).error(
                    ErrorKind::LinkEndpointUnknown {
                        endpoint,
                        nodes: nodes.len(),
                    },
                ));
            }
        }
        if a == b {
            errors.push(
                Location::schedule()
                    .link(named.clone())
                    .node(node(machine, *a))
                    .error(ErrorKind::LinkToItself),
            );
        }
        let mut invalid = |field, value: String, rule| {
            errors.push(
                Location::schedule()
                    .link(named.clone())
                    .error(ErrorKind::InvalidLink { field, value, rule }),
            );
        };
        if !crate::limits::rate_accepted(*bandwidth_gbps) {
            invalid(
                "bandwidth_gbps",
                figure(*bandwidth_gbps),
                crate::limits::RATE_RULE,
            );
        }
        if !crate::limits::latency_accepted(*latency_us) {
            invalid(
                "latency_us",
                figure(*latency_us),
                crate::limits::LATENCY_RULE,
            );
        }
        if !(1..=crate::limits::MAX_LANES).contains(lanes) {
            invalid("lanes", lanes.to_string(), crate::limits::LANES_RULE);
        }
    }
}

/// A machine figure as an error message shows it: as written for everyday values, with an
/// exponent where the plain form would run to hundreds of digits (`5e-324`, `1e300`).
fn figure(value: f64) -> String {
    let magnitude = value.abs();
    if magnitude != 0.0 && magnitude.is_finite() && !(1e-4..1e15).contains(&magnitude) {
        format!("{value:e}")
    } else {
        value.to_string()
    }
}

/// The kind of node `id`, if it exists.
pub(super) fn kind(machine: &Machine, id: NodeId) -> Option<NodeKind> {
    machine.nodes.get(id.index()).map(|n| n.kind)
}

/// One phase's invariants but its programs: buffers, chunks, owners, size, root.
fn check_header(machine: &Machine, phase: &Phase, errors: &mut Vec<VerifyError>) {
    let Phase {
        name,
        collective,
        op: _,
        dtype,
        elements,
        algorithm: _,
        // Metadata: nothing in it affects execution.
        chunks,
        buffers,
        // Checked by `check_programs`.
        steps: _,
        // Either value is valid; it decides whether the conflict pass runs.
        links: _,
        programs: _,
    } = phase;
    let nodes = machine.nodes.len();
    let here = Location::phase(name);

    // Buffers.
    match buffers.first() {
        Some(Buffer {
            kind: BufferKind::Data,
            name: _,
        }) => {}
        Some(_) => errors.push(
            here.clone()
                .buffer(Some(buffer(phase, crate::BufferId(0))))
                .error(ErrorKind::NoDataBuffer),
        ),
        None => errors.push(here.clone().error(ErrorKind::NoDataBuffer)),
    }
    for (i, b) in buffers.iter().enumerate().skip(1) {
        if b.kind == BufferKind::Data {
            let id = crate::BufferId(u32::try_from(i).unwrap_or(u32::MAX));
            errors.push(
                here.clone()
                    .buffer(Some(buffer(phase, id)))
                    .error(ErrorKind::ExtraDataBuffer),
            );
        }
    }

    // Chunks and owners.
    let mut expected = 0u64;
    for (i, c) in chunks.iter().enumerate() {
        let Chunk { start, end, owner } = c;
        let chunk = ChunkId(u32::try_from(i).unwrap_or(u32::MAX));
        let at = here.clone().chunk(chunk);
        if *start != expected {
            errors.push(at.clone().error(ErrorKind::ChunkGap {
                start: *start,
                expected,
            }));
        }
        if end < start {
            errors.push(at.clone().error(ErrorKind::ChunkReversed {
                start: *start,
                end: *end,
            }));
        }
        expected = *end;
        match owner {
            Some(owner) => match kind(machine, *owner) {
                None => errors.push(at.error(ErrorKind::UnknownOwner {
                    owner: *owner,
                    nodes,
                })),
                Some(NodeKind::Switch) => errors.push(
                    at.node(node(machine, *owner))
                        .error(ErrorKind::OwnerNotCompute),
                ),
                Some(NodeKind::Compute) => {}
            },
            None => {
                if matches!(
                    collective,
                    Collective::ReduceScatter | Collective::AllGather
                ) {
                    errors.push(at.error(ErrorKind::MissingOwner {
                        collective: *collective,
                    }));
                }
            }
        }
    }
    if expected != *elements {
        errors.push(here.clone().error(ErrorKind::ChunksEnd {
            end: expected,
            elements: *elements,
        }));
    }
    // Byte counts (chunk sizes, link loads, the report) must fit in a u64 with room to add.
    let limit = MAX_VECTOR_BYTES / dtype.size_bytes();
    if *elements > limit {
        errors.push(here.clone().error(ErrorKind::TooLarge {
            what: format!("phase `{name}`: {dtype} elements in the vector"),
            count: *elements,
            limit,
        }));
    }

    // Root.
    if let Collective::Broadcast { root } | Collective::Reduce { root } = collective {
        match kind(machine, *root) {
            None => errors.push(
                here.clone()
                    .error(ErrorKind::UnknownRoot { root: *root, nodes }),
            ),
            Some(NodeKind::Switch) => errors.push(
                here.clone()
                    .node(node(machine, *root))
                    .error(ErrorKind::RootNotCompute),
            ),
            Some(NodeKind::Compute) => {}
        }
    }
}

/// One phase's programs: one per node, of the right length, none on a plain switch; then every
/// instruction, step by step like the later passes.
fn check_programs(
    machine: &Machine,
    phase: &Phase,
    here: &Location,
    errors: &mut Vec<VerifyError>,
) {
    let Phase {
        name,
        steps,
        programs,
        ..
    } = phase;
    let nodes = machine.nodes.len();
    if programs.len() != nodes {
        errors.push(here.clone().error(ErrorKind::ProgramCount {
            programs: programs.len(),
            nodes,
        }));
    }
    let mut checker = InstrChecker::new(machine, phase, errors);
    for (n, (program, n_info)) in programs.iter().zip(&machine.nodes).enumerate() {
        let Program {
            steps: program_steps,
        } = program;
        let id = super::node_id(n);
        let count_ok = program_steps.len() == *steps as usize
            || (n_info.kind == NodeKind::Switch && program_steps.is_empty());
        if !count_ok {
            checker.report(
                here.clone()
                    .node(node(machine, id))
                    .error(ErrorKind::StepCount {
                        steps: program_steps.len(),
                        expected: *steps,
                    }),
            );
        }
        match n_info.kind {
            NodeKind::Switch if n_info.capacity.is_none() => {
                if let Some(k) = program_steps.iter().position(|s| !s.is_empty()) {
                    checker.report(
                        Location::step(name, step_id(k))
                            .node(node(machine, id))
                            .error(ErrorKind::SwitchProgram),
                    );
                }
            }
            NodeKind::Switch | NodeKind::Compute => {}
        }
    }
    // Instructions, step by step, like the later passes.
    let longest = programs.iter().map(|p| p.steps.len()).max().unwrap_or(0);
    for k in 0..longest {
        for (n, (program, n_info)) in programs.iter().zip(&machine.nodes).enumerate() {
            if !n_info.runs_program() {
                continue;
            }
            for instr in program.steps.get(k).into_iter().flatten() {
                checker.instr(step_id(k), super::node_id(n), instr);
            }
        }
    }
}
