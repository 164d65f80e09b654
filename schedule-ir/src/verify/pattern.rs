//! Proving a schedule in the pattern form ([`Pattern`]) without expanding it.
//!
//! Every node of the grid runs the origin's program translated, so the explicit schedule is
//! invariant under the grid's translations, and every check of the verifier is too: a
//! translated conflict, mismatch or wrong set is a conflict, mismatch or wrong set. The checks
//! therefore run on small schedules built from the origin's program (`docs/ir.md`, "The
//! pattern form", gives the argument in full):
//!
//! - **Well-formed.** The machine, the phase headers and the BSP program as for any schedule;
//!   the grid is the machine's compute nodes, each once, with no device; every phase holds one
//!   program of `steps` steps, lays out `m·n` chunks by grid index, gives chunk `j·n + i` to
//!   grid node `i` where the collective has owners, and is an allreduce, reduce-scatter or
//!   allgather (a root is no translate of the others); the origin's instructions are checked
//!   as a node's; every send is direct (no `via`), and for every peer `u` of the origin and
//!   every translation `t` exactly one link joins the translates of the origin and `u`, with
//!   the parameters of the origin's link.
//! - **Conflict-free**, on the origin's program alone: a link direction leaving node `x`
//!   carries exactly the translates of the origin's sends on the direction it is the
//!   translate of.
//! - **Matched**, on the origin's program and, for each of its peers, the peer's translated
//!   instructions that name the origin: every transfer of the explicit schedule is a translate
//!   of one of these pairs.
//! - **Correct**: the symbolic state of chunk `j·n + i` on node `x` is that of chunk `j·n` on
//!   node `x − i`, translated. So the verifier runs the explicit schedule restricted to the `m`
//!   chunks `j·n` (the *fibre*: every node's translated instructions, each cut to those chunks)
//!   through the ordinary passes, and reports what they find at the chunk's real id.

use super::conflicts;
use super::instrs::InstrChecker;
use super::{
    handles, link, matching, node, step_id, symbolic, ErrorKind, Location, VerifyError,
    VerifyErrors, Warning,
};
use crate::cost::{self, Bound, DirectionLoad, Estimate, NodeReduce, StepLoad};
use crate::pattern::{Grid, Pattern, Translator};
use crate::visible::Shown;
use crate::{
    Chunk, ChunkId, ChunkIds, Collective, Instr, Machine, NodeId, NodeKind, Phase, Program,
    RecvMode, Schedule,
};
use serde::Serialize;
use std::fmt;

/// A pattern that passed every check, with what the cost model says of it. Only [`verify_pattern`]
/// makes one.
#[derive(Clone, Debug)]
pub struct VerifiedPattern {
    pattern: Pattern,
    report: PatternReport,
}

impl VerifiedPattern {
    /// The pattern.
    pub fn pattern(&self) -> &Pattern {
        &self.pattern
    }
    /// What the verifier measured.
    pub fn report(&self) -> &PatternReport {
        &self.report
    }
}

/// The cost of a verified pattern, phase by phase.
#[derive(Clone, Debug, Serialize)]
pub struct PatternReport {
    /// The machine's name.
    pub machine: String,
    /// Its compute nodes: the grid's positions.
    pub compute_nodes: usize,
    /// The grid's dimensions, fastest first.
    pub grid: Vec<u32>,
    /// One entry per phase.
    pub phases: Vec<PatternPhaseReport>,
}

/// The cost of one phase of a pattern.
#[derive(Clone, Debug, Serialize)]
pub struct PatternPhaseReport {
    /// The phase's name.
    pub name: String,
    /// Its collective.
    pub collective: Collective,
    /// The method that produced it.
    pub algorithm: String,
    /// Its vector's size in bytes.
    pub vector_bytes: u64,
    /// Its steps.
    pub steps: u32,
    /// Instructions of the origin's program (every node runs as many).
    pub instructions_per_node: u64,
    /// Instructions of the explicit form: per node × nodes.
    pub instructions: u64,
    /// The α-β-γ estimate. Each transfer is priced at the largest chunks it can carry on any
    /// node (its part's largest chunk per id), so this is the explicit form's estimate when
    /// the parts' chunks have one size, and above it otherwise.
    pub estimate: Estimate,
    /// The lower bound on every schedule of the phase.
    pub bound: Bound,
    /// `bound / estimate`.
    pub efficiency: f64,
    /// What the symbolic pass noticed without failing the phase (max and min forgive an
    /// input combined twice), on the chunks it runs: the first chunk of every part (chunk
    /// `j·n`). Every other chunk's warnings are these, translated.
    pub warnings: Vec<Warning>,
}

impl fmt::Display for PatternReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sizes: Vec<String> = self.grid.iter().map(u32::to_string).collect();
        writeln!(
            f,
            "machine `{}`: {} compute nodes on a {} grid, each running the origin's program translated",
            Shown(&self.machine),
            self.compute_nodes,
            sizes.join(" × ")
        )?;
        for p in &self.phases {
            writeln!(
                f,
                "phase `{}`: {} of {} B, algorithm `{}`, {} steps, {} instructions per node ({} in all)",
                Shown(&p.name), p.collective, p.vector_bytes, Shown(&p.algorithm), p.steps, p.instructions_per_node, p.instructions
            )?;
            writeln!(
                f,
                "  estimate {}, lower bound {} ({}), efficiency {:.1}%",
                super::report::seconds(p.estimate.seconds),
                super::report::seconds(p.bound.seconds),
                p.bound.which,
                p.efficiency * 100.0
            )?;
            for w in &p.warnings {
                writeln!(f, "  warning: {w}")?;
            }
        }
        Ok(())
    }
}

/// Checks `pattern` and returns the proof that the explicit schedule it stands for is valid,
/// or every problem found (see the verifier's doc, "The pattern form").
pub fn verify_pattern(pattern: Pattern) -> Result<VerifiedPattern, VerifyErrors> {
    let shell = Schedule {
        format_version: pattern.format_version,
        machine: pattern.machine.clone(),
        program: pattern.program.clone(),
        phases: pattern.phases.clone(),
    };
    let mut errors = Vec::new();
    handles::check_headers(&shell, &mut errors);
    if !errors.is_empty() {
        return Err(VerifyErrors { errors });
    }
    drop(shell);
    let machine = &pattern.machine;
    check_grid(machine, &pattern.grid, &mut errors);
    if !errors.is_empty() {
        return Err(VerifyErrors { errors });
    }
    let translator = Translator::new(machine, &pattern.grid);
    let mut phases = Vec::with_capacity(pattern.phases.len());
    for phase in &pattern.phases {
        phases.extend(check_phase(
            machine,
            &pattern.grid,
            &translator,
            phase,
            &mut errors,
        ));
    }
    if !errors.is_empty() {
        return Err(VerifyErrors { errors });
    }
    let report = PatternReport {
        machine: machine.name.clone(),
        compute_nodes: pattern.grid.nodes.len(),
        grid: pattern.grid.sizes.clone(),
        phases,
    };
    Ok(VerifiedPattern { pattern, report })
}

/// The grid is the machine's compute nodes, each once, in a grid of that many positions, and
/// the machine has no device (a device would run a program of its own).
fn check_grid(machine: &Machine, grid: &Grid, errors: &mut Vec<VerifyError>) {
    let mut wrong = |problem: String| {
        errors.push(Location::schedule().error(ErrorKind::NotAPattern { problem }));
    };
    if grid.sizes.contains(&0) {
        wrong(format!("the grid's sizes {:?} include 0", grid.sizes));
    }
    if grid.positions() != grid.nodes.len() as u64 {
        wrong(format!(
            "the grid's sizes {:?} make {} positions, but it lists {} nodes",
            grid.sizes,
            grid.positions(),
            grid.nodes.len()
        ));
    }
    let mut seen = vec![false; machine.nodes.len()];
    for &n in &grid.nodes {
        match machine.nodes.get(n.index()) {
            None => wrong(format!(
                "the grid lists {n}, which the machine does not have"
            )),
            Some(info) if info.kind != NodeKind::Compute => {
                wrong(format!("the grid lists switch {}", info.name));
            }
            Some(info) if seen[n.index()] => wrong(format!("the grid lists {} twice", info.name)),
            Some(_) => seen[n.index()] = true,
        }
    }
    for (i, info) in machine.nodes.iter().enumerate() {
        if info.kind == NodeKind::Compute && !seen[i] {
            wrong(format!("compute node {} is not on the grid", info.name));
        }
        if info.capacity.is_some() {
            wrong(format!(
                "device {} would run a program of its own; a pattern's only program is the grid's",
                info.name
            ));
        }
    }
}

/// Every check of one phase (the grid is sound), and its report when it passes.
fn check_phase(
    machine: &Machine,
    grid: &Grid,
    translator: &Translator<'_>,
    phase: &Phase,
    errors: &mut Vec<VerifyError>,
) -> Option<PatternPhaseReport> {
    let before = errors.len();
    let origin = layout(machine, grid, phase, errors)?;
    let at = grid.nodes[0];
    let mut checker = InstrChecker::new(machine, phase, errors);
    for (k, step) in origin.steps.iter().enumerate() {
        for instr in step {
            checker.instr(step_id(k), at, instr);
        }
    }
    if errors.len() > before {
        return None;
    }
    check_moves(machine, grid, translator, phase, origin, errors);
    if errors.len() > before {
        return None;
    }
    // Conflicts: the origin's sends alone.
    let mut alone = vec![Program::default(); machine.nodes.len()];
    alone[at.index()] = origin.clone();
    let local = Phase {
        programs: alone,
        ..header(phase)
    };
    conflicts::check(machine, &local, errors);
    // Matching: the origin and what its peers exchange with it.
    let neighbourhood = Phase {
        programs: neighbourhood(machine, grid, translator, origin, phase.steps),
        ..header(phase)
    };
    let _ = matching::check(machine, &neighbourhood, errors);
    if errors.len() > before {
        return None;
    }
    // The report's bound (max-flow cuts) is as much work as the fibre on large machines: the
    // two run side by side, on another core when there is one.
    let ((found, warnings), report) = rayon::join(
        || {
            let mut found = Vec::new();
            let warnings = correct(machine, grid, translator, phase, origin, &mut found);
            (found, warnings)
        },
        || phase_report(machine, grid, phase),
    );
    let ok = found.is_empty();
    errors.extend(found);
    ok.then_some(PatternPhaseReport { warnings, ..report })
}

/// The phase without its programs.
fn header(phase: &Phase) -> Phase {
    Phase {
        name: phase.name.clone(),
        collective: phase.collective,
        op: phase.op,
        dtype: phase.dtype,
        elements: phase.elements,
        algorithm: phase.algorithm.clone(),
        chunks: phase.chunks.clone(),
        buffers: phase.buffers.clone(),
        steps: phase.steps,
        links: phase.links,
        programs: Vec::new(),
    }
}

/// The phase is laid out by the grid; returns the origin's program.
fn layout<'p>(
    machine: &Machine,
    grid: &Grid,
    phase: &'p Phase,
    errors: &mut Vec<VerifyError>,
) -> Option<&'p Program> {
    let here = Location::phase(&phase.name);
    let mut wrong = |at: Location, problem: String| {
        errors.push(at.error(ErrorKind::NotAPattern { problem }));
    };
    let n = grid.nodes.len();
    let mut ok = true;
    if !matches!(
        phase.collective,
        Collective::AllReduce | Collective::ReduceScatter | Collective::AllGather
    ) {
        wrong(
            here.clone(),
            format!(
                "a {} has a root, which no translation keeps; only allreduce, reduce-scatter and allgather are patterns",
                phase.collective
            ),
        );
        ok = false;
    }
    if phase.chunks.len() % n != 0 {
        wrong(
            here.clone(),
            format!(
                "it has {} chunks, not a multiple of the grid's {n} nodes",
                phase.chunks.len()
            ),
        );
        ok = false;
    } else if matches!(
        phase.collective,
        Collective::ReduceScatter | Collective::AllGather
    ) {
        for (c, chunk) in phase.chunks.iter().enumerate() {
            let expected = grid.nodes[c % n];
            if chunk.owner != Some(expected) {
                wrong(
                    here.clone().chunk(ChunkId::new(c)),
                    format!(
                        "chunk {c} must be owned by grid node {} ({}), the translate of chunk {}'s owner",
                        c % n,
                        machine.node_name(expected),
                        c - c % n
                    ),
                );
                ok = false;
                break;
            }
        }
    }
    let [origin] = phase.programs.as_slice() else {
        wrong(
            here,
            format!(
                "it has {} programs; a pattern's phase has one, the origin's",
                phase.programs.len()
            ),
        );
        return None;
    };
    let slots = u64::from(phase.steps).saturating_mul(grid.nodes.len() as u64);
    if slots > crate::limits::MAX_PATTERN_STEP_SLOTS {
        errors.push(here.error(ErrorKind::TooLarge {
            what: format!(
                "phase `{}`: grid nodes × steps of the pattern ({} × {})",
                phase.name,
                grid.nodes.len(),
                phase.steps
            ),
            count: slots,
            limit: crate::limits::MAX_PATTERN_STEP_SLOTS,
        }));
        return None;
    }
    if origin.steps.len() != phase.steps as usize {
        wrong(
            here,
            format!(
                "the origin's program has {} steps, but the phase has {}",
                origin.steps.len(),
                phase.steps
            ),
        );
        return None;
    }
    ok.then_some(origin)
}

/// Every send is direct, and every link the origin uses moves to every grid node: one link
/// joins the translated ends, with the same bandwidth, latency and lanes.
fn check_moves(
    machine: &Machine,
    grid: &Grid,
    translator: &Translator<'_>,
    phase: &Phase,
    origin: &Program,
    errors: &mut Vec<VerifyError>,
) {
    let at = grid.nodes[0];
    let mut checked: Vec<(NodeId, crate::LinkId)> = Vec::new();
    for (k, step) in origin.steps.iter().enumerate() {
        for instr in step {
            let here = Location::step(&phase.name, step_id(k)).node(node(machine, at));
            let (l, peer) = match instr {
                Instr::Send {
                    link: l, via, to, ..
                } => {
                    if !via.is_empty() {
                        errors.push(here.link(link(machine, *l)).error(ErrorKind::NotAPattern {
                            problem: format!(
                                "the send to {} is routed through other nodes; a pattern's sends go to neighbours",
                                machine.node_name(*to)
                            ),
                        }));
                        continue;
                    }
                    (*l, *to)
                }
                Instr::Recv { link: l, from, .. } => (*l, *from),
                _ => continue,
            };
            if checked.contains(&(peer, l)) {
                continue;
            }
            checked.push((peer, l));
            let here = here.link(link(machine, l));
            let template = &machine.links[l.index()];
            if translator.link(at, peer, 0) != Some(l) {
                errors.push(here.error(ErrorKind::NotAPattern {
                    problem: format!(
                        "{} is not the one link between {} and {}",
                        template.name,
                        machine.node_name(at),
                        machine.node_name(peer)
                    ),
                }));
                continue;
            }
            let moved =
                (0..grid.nodes.len()).find(|&t| translator.link_like(l, at, peer, t).is_none());
            if let Some(t) = moved {
                let (a, b) = (
                    translator.node(at, t).unwrap_or(at),
                    translator.node(peer, t).unwrap_or(peer),
                );
                errors.push(here.error(ErrorKind::NotAPattern {
                    problem: format!(
                        "moved to grid index {t}, {} needs one link between {} and {} with its bandwidth, latency and lanes, and the machine has none",
                        template.name,
                        machine.node_name(a),
                        machine.node_name(b)
                    ),
                }));
            }
        }
    }
}

/// Programs for the origin (all of it) and for each of its peers (the translated instructions
/// that name the origin): every send and receive of the explicit schedule is a translate of a
/// pair among them.
fn neighbourhood(
    machine: &Machine,
    grid: &Grid,
    translator: &Translator<'_>,
    origin: &Program,
    steps: u32,
) -> Vec<Program> {
    let at = grid.nodes[0];
    let mut programs = vec![Program::default(); machine.nodes.len()];
    // The origin as the expansion has it: its lists in the canonical order.
    programs[at.index()] = Program {
        steps: origin
            .steps
            .iter()
            .map(|step| step.iter().filter_map(|i| translator.instr(i, 0)).collect())
            .collect(),
    };
    let mut peers: Vec<NodeId> = origin
        .steps
        .iter()
        .flatten()
        .filter_map(|i| match i {
            Instr::Send { to, .. } => Some(*to),
            Instr::Recv { from, .. } => Some(*from),
            _ => None,
        })
        .filter(|&p| p != at)
        .collect();
    peers.sort_unstable();
    peers.dedup();
    for peer in peers {
        let Some(t) = translator.index(peer) else {
            continue;
        };
        let mut program = Program {
            steps: vec![Vec::new(); steps as usize],
        };
        for (k, step) in origin.steps.iter().enumerate() {
            for instr in step {
                // Only the instructions whose peer moves onto the origin, translated whole.
                let names_origin = match instr {
                    Instr::Send { to: p, .. } | Instr::Recv { from: p, .. } => {
                        translator.node(*p, t) == Some(at)
                    }
                    _ => false,
                };
                if let Some(moved) = names_origin.then(|| translator.instr(instr, t)).flatten() {
                    program.steps[k].push(moved);
                }
            }
        }
        programs[peer.index()] = program;
    }
    programs
}

/// The correctness pass on the fibre: every node's translated instructions cut to the chunks
/// `j·n` (renamed `j`), run through the ordinary verifier; its errors are reported at the
/// chunks' real ids.
fn correct(
    machine: &Machine,
    grid: &Grid,
    translator: &Translator<'_>,
    phase: &Phase,
    origin: &Program,
    errors: &mut Vec<VerifyError>,
) -> Vec<Warning> {
    let n = grid.nodes.len();
    let parts = phase.chunks.len() / n;
    let mut programs = vec![Program::default(); machine.nodes.len()];
    for &node in &grid.nodes {
        programs[node.index()].steps = vec![Vec::new(); phase.steps as usize];
    }
    for (k, step) in origin.steps.iter().enumerate() {
        for instr in step {
            // The list's ids by grid index, each index's parts in list order: index `i`
            // reaches chunk `j·n` on the node at `−i`, a different node for every index, so
            // each node gets at most one instruction from this one.
            let mut ids: Vec<(usize, usize)> = instr
                .chunks()
                .iter()
                .map(|c| (c.index() % n, c.index() / n))
                .collect();
            ids.sort_by_key(|&(i, _)| i);
            let bare = with_chunks(instr.clone(), ChunkIds::new());
            for group in ids.chunk_by(|a, b| a.0 == b.0) {
                let t = grid.sub(0, group[0].0);
                let Some(moved) = translator.instr(&bare, t) else {
                    continue;
                };
                let fibre: ChunkIds = group.iter().map(|&(_, j)| ChunkId::new(j)).collect();
                programs[grid.nodes[t].index()].steps[k].push(with_chunks(moved, fibre));
            }
        }
    }
    let chunks: Vec<Chunk> = (0..parts)
        .map(|j| {
            let real = phase.chunks[j * n];
            Chunk {
                start: 0,
                end: real.end - real.start,
                owner: real.owner,
            }
        })
        .scan(0u64, |start, mut c| {
            c.end += *start;
            c.start = *start;
            *start = c.end;
            Some(c)
        })
        .collect();
    let fibre = Phase {
        elements: chunks.last().map_or(0, |c| c.end),
        chunks,
        programs,
        ..header(phase)
    };
    let schedule = Schedule {
        format_version: crate::FORMAT_VERSION,
        machine: machine.clone(),
        program: Vec::new(),
        phases: vec![fibre],
    };
    // Well formed by construction (every id comes from the checked origin, translated; the
    // fibre's chunks are the parts), so the well-formedness pass is not run again. No
    // conflicts (a fibre carries a subset of the transfers checked above), no capacity (no
    // device), no report.
    let mut found = Vec::new();
    let mut warnings = Vec::new();
    if let Some(pairs) = matching::check(machine, &schedule.phases[0], &mut found) {
        warnings = symbolic::check(machine, &schedule.phases[0], &pairs, &mut found);
    }
    // Fibre chunk `j` is part `j`'s first chunk, `j·n`.
    let real = |location: &mut Location| {
        if let Some(c) = location.chunk {
            location.chunk = Some(ChunkId::new(c.index() * n));
        }
    };
    errors.extend(found.into_iter().map(|mut e| {
        real(&mut e.location);
        e
    }));
    warnings.iter_mut().for_each(|w| real(&mut w.location));
    warnings
}

/// `instr` with its chunk list replaced.
fn with_chunks(mut instr: Instr, list: ChunkIds) -> Instr {
    match &mut instr {
        Instr::Send { chunks, .. }
        | Instr::Recv { chunks, .. }
        | Instr::Reduce { chunks, .. }
        | Instr::Copy { chunks, .. }
        | Instr::Scale { chunks, .. } => *chunks = list,
    }
    instr
}

/// The cost of one verified phase, from the origin's program: every link direction is the
/// translate of one leaving the origin and carries the translates of its transfers, and every
/// node combines what the origin combines.
fn phase_report(machine: &Machine, grid: &Grid, phase: &Phase) -> PatternPhaseReport {
    let n = grid.nodes.len().max(1);
    let loads = origin_loads(machine, grid, phase);
    let estimate = cost::estimate_loads(machine, &loads);
    let bound = cost::lower_bound(machine, &header(phase));
    let per_node: u64 = phase
        .programs
        .first()
        .map_or(0, |o| o.steps.iter().map(|s| s.len() as u64).sum());
    PatternPhaseReport {
        name: phase.name.clone(),
        collective: phase.collective,
        algorithm: phase.algorithm.clone(),
        vector_bytes: phase.elements.saturating_mul(phase.dtype.size_bytes()),
        steps: phase.steps,
        instructions_per_node: per_node,
        instructions: per_node.saturating_mul(n as u64),
        efficiency: cost::efficiency(&bound, &estimate),
        estimate,
        bound,
        warnings: Vec::new(),
    }
}

/// The traffic and combining of a pattern phase's origin in each step, what the pattern's
/// estimate is priced from: each transfer carries the largest chunk of its part on any node,
/// so the estimate is the explicit form's when a part's chunks have one size and above it
/// otherwise. Every node runs the origin's program translated, so every link direction carries
/// what some direction leaving the origin carries: the busiest of these is the machine's
/// busiest. `topoc simulate` re-prices a proved pattern at other sizes with this
/// ([`Phase::with_elements`] moves only the chunks' bounds).
pub fn origin_loads(machine: &Machine, grid: &Grid, phase: &Phase) -> Vec<StepLoad> {
    let n = grid.nodes.len().max(1);
    let Some(origin) = phase.programs.first() else {
        return Vec::new();
    };
    // The largest chunk of each part bounds what a translated list carries.
    let size = phase.dtype.size_bytes();
    let largest: Vec<u64> = phase
        .chunks
        .chunks(n)
        .map(|part| part.iter().map(|c| c.len() * size).max().unwrap_or(0))
        .collect();
    let carried = |chunks: &ChunkIds| -> u64 {
        chunks
            .iter()
            .map(|c| largest.get(c.index() / n).copied().unwrap_or(0))
            .fold(0u64, u64::saturating_add)
    };
    let Some(&at) = grid.nodes.first() else {
        return Vec::new();
    };
    origin
        .steps
        .iter()
        .enumerate()
        .map(|(k, step)| step_load(machine, at, k, step, &carried))
        .collect()
}

/// The origin's traffic and combining in step `k`, each transfer priced by `carried`.
fn step_load(
    machine: &Machine,
    at: NodeId,
    k: usize,
    step: &[Instr],
    carried: &dyn Fn(&ChunkIds) -> u64,
) -> StepLoad {
    let mut loads: Vec<DirectionLoad> = Vec::new();
    let mut load = StepLoad {
        step: step_id(k),
        loads: Vec::new(),
        bytes_sent: 0,
        transfers: 0,
        latency_seconds: 0.0,
        reductions: Vec::new(),
    };
    let mut reduce = NodeReduce {
        node: at,
        local_bytes: 0,
        arrival_bytes: 0,
    };
    for instr in step {
        match instr {
            Instr::Send { link, chunks, .. } => {
                let size = carried(chunks);
                load.bytes_sent = load.bytes_sent.saturating_add(size);
                load.transfers = load.transfers.saturating_add(1);
                load.latency_seconds =
                    load.latency_seconds
                        .max(cost::latency::route_seconds(machine, at, *link, &[]));
                if let Some(d) = crate::DirectionId::leaving(machine, *link, at) {
                    match loads.iter_mut().find(|l| l.direction == d.index()) {
                        Some(l) => {
                            l.bytes = l.bytes.saturating_add(size);
                            l.transfers = l.transfers.saturating_add(1);
                        }
                        None => loads.push(DirectionLoad {
                            direction: d.index(),
                            bytes: size,
                            transfers: 1,
                        }),
                    }
                }
            }
            Instr::Reduce { chunks, .. } => {
                reduce.local_bytes = reduce.local_bytes.saturating_add(carried(chunks));
            }
            Instr::Recv {
                chunks,
                mode: RecvMode::Reduce,
                ..
            } => {
                reduce.arrival_bytes = reduce.arrival_bytes.saturating_add(carried(chunks));
            }
            _ => {}
        }
    }
    loads.sort_by_key(|l| l.direction);
    load.loads = loads;
    if reduce.local_bytes > 0 || reduce.arrival_bytes > 0 {
        load.reductions.push(reduce);
    }
    load
}
