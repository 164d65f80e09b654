//! The verifier: proves a [`Schedule`] correct, or reports every problem it finds.
//!
//! [`verify`] runs the passes below in order. The first pass checks every id and range so
//! that the later ones may index freely; if it finds anything, verification stops there and
//! returns its errors. Otherwise the other passes run on every phase, and every error of every
//! phase is reported (a phase's errors come together, in pass order). Each invariant is listed
//! with the [`ErrorKind`] that reports its violation; every [`VerifyError`] is such a kind and
//! the [`Location`] where it was found (phase, step, node, link, buffer, chunk).
//!
//! # 1. Well-formed (`handles.rs`, `instrs.rs`)
//!
//! If the machine itself is malformed, only the schedule-level and machine errors are reported:
//! every route of every phase would be suspect.
//! The schedule:
//! - `format_version` is [`FORMAT_VERSION`](crate::FORMAT_VERSION) — [`ErrorKind::FormatVersion`];
//! - node, link, chunk, buffer and step counts fit in a `u32` — [`ErrorKind::TooLarge`];
//! - phase names are unique — [`ErrorKind::DuplicatePhaseName`];
//! - a non-empty `program` names only existing phases — [`ErrorKind::ProgramUnknownPhase`] —
//!   runs every phase exactly once — [`ErrorKind::ProgramPhaseCount`] — and in the order of
//!   `phases` — [`ErrorKind::ProgramOrder`]; a banded exchange
//!   ([`ProgramItem::Bands`](crate::ProgramItem::Bands)) runs each band's phase, in band order.
//!
//! Each banded exchange (`bands.rs`; its bands' phases are proved like every phase):
//! - its name is no phase's and no other exchange's — [`ErrorKind::BandsNameTaken`];
//! - it has a band — [`ErrorKind::NoBands`]; every band holds a size (`max_bytes` above
//!   `min_bytes`) — [`ErrorKind::EmptyBand`]; each band starts where the one before ends, so
//!   the bands are ordered, disjoint and cover their whole range — [`ErrorKind::BandGap`];
//! - every band's phase runs the collective, op and dtype of band 0's —
//!   [`ErrorKind::BandsDiffer`] — and was compiled for a size inside its band —
//!   [`ErrorKind::BandSizeOutside`].
//!
//! The machine:
//! - it has at least one compute node — [`ErrorKind::NoComputeNodes`];
//! - node names are unique — [`ErrorKind::DuplicateNodeName`]; link names are unique —
//!   [`ErrorKind::DuplicateLinkName`];
//! - both endpoints of every link exist — [`ErrorKind::LinkEndpointUnknown`] — and differ —
//!   [`ErrorKind::LinkToItself`];
//! - a node's `capacity`, when given, is on a switch and at least 1 —
//!   [`ErrorKind::BadCapacity`]; such a switch is a *device* and runs a program;
//! - `bandwidth_gbps` is in [`RATE_GBPS`](crate::limits::RATE_GBPS), `latency_us` is 0 or in
//!   [`LATENCY_US`](crate::limits::LATENCY_US), `lanes` is at least 1 —
//!   [`ErrorKind::InvalidLink`];
//! - `reduce_gbps`, when given, is in [`RATE_GBPS`](crate::limits::RATE_GBPS) —
//!   [`ErrorKind::InvalidReduceRate`].
//! - `switch_latency_us` is 0 or in [`LATENCY_US`](crate::limits::LATENCY_US) —
//!   [`ErrorKind::InvalidSwitchLatency`].
//!
//! Each phase:
//! - buffer 0 exists and is [`BufferKind::Data`](crate::BufferKind::Data) —
//!   [`ErrorKind::NoDataBuffer`]; no other buffer is — [`ErrorKind::ExtraDataBuffer`];
//! - chunk `i` starts where chunk `i-1` ends (chunk 0 at 0) — [`ErrorKind::ChunkGap`];
//!   `start <= end` — [`ErrorKind::ChunkReversed`]; the last chunk ends at `elements` (0 when
//!   there are no chunks) — [`ErrorKind::ChunksEnd`];
//! - the vector holds at most [`MAX_VECTOR_BYTES`] bytes (`elements` times the dtype's size) —
//!   [`ErrorKind::TooLarge`];
//! - a broadcast or reduce root exists — [`ErrorKind::UnknownRoot`] — and is a compute node —
//!   [`ErrorKind::RootNotCompute`];
//! - every chunk owner that is given exists — [`ErrorKind::UnknownOwner`] — and is a compute
//!   node — [`ErrorKind::OwnerNotCompute`]; in a reduce-scatter or allgather every chunk has
//!   one — [`ErrorKind::MissingOwner`];
//! - there is one program per node — [`ErrorKind::ProgramCount`]; a compute node's program
//!   has exactly `steps` steps, a switch's has no steps or exactly `steps` —
//!   [`ErrorKind::StepCount`]; a switch's program has no instruction unless the switch is
//!   a device — [`ErrorKind::SwitchProgram`].
//!
//! Each instruction:
//! - every node, link, buffer and chunk id it names exists — [`ErrorKind::UnknownId`];
//! - its chunk list is not empty — [`ErrorKind::EmptyChunkList`] — and names no chunk twice —
//!   [`ErrorKind::RepeatedChunk`];
//! - a send's or receive's peer is another node — [`ErrorKind::PeerIsSelf`] — and a compute
//!   node or a device — [`ErrorKind::PeerIsSwitch`];
//! - a send's `link` has the sender as an endpoint and a receive's `link` has the receiver as
//!   an endpoint — [`ErrorKind::WrongLink`];
//! - a send's route `link, via…`, walked from the sender, is connected —
//!   [`ErrorKind::RouteBroken`] — and ends at `to` —
//!   [`ErrorKind::RouteEndsElsewhere`];
//! - a local reduce or copy reads and writes different buffers — [`ErrorKind::SameBuffer`];
//! - a scale is in a phase whose op is [`ReduceOp::Mean`](crate::ReduceOp::Mean) —
//!   [`ErrorKind::ScaleNotMean`] — and divides by the number of compute nodes —
//!   [`ErrorKind::WrongDivisor`].
//!
//! # 2. Conflict-free (`conflicts.rs`)
//!
//! In every step, every link direction carries at most `lanes` transfers. A send crosses every
//! link of its route, each in the direction found by walking the route from the sender —
//! [`ErrorKind::LinkOverbooked`].
//!
//! # 3. Matched (`matching.rs`)
//!
//! In every step, sends and receives pair up one to one: a send of `N` to `M` whose route ends
//! with link `L` pairs with a receive on `M` naming `from: N`, `link: L` and the identical chunk
//! list (same chunks, same order, hence the same size). A send without a partner is
//! [`ErrorKind::UnmatchedSend`], a receive without one [`ErrorKind::UnmatchedRecv`]; when
//! exactly one send and one receive are left over between the same sender, receiver and link,
//! they are reported together as [`ErrorKind::ChunkListMismatch`].
//!
//! Before pairing: no two sends of a step go from the same node to the same node, with routes
//! ending on the same link, starting at the same chunk — [`ErrorKind::DuplicateTransfer`]. A
//! message is known by these four (and its step), so that runtimes and transports can tell every
//! message of a step apart; such a pair is never needed (the second sends chunks the first
//! already carries). A step with such a pair is not paired further.
//!
//! # 4. Correct (`symbolic.rs`)
//!
//! Runs only on a phase whose transfers all match (an unmatched transfer has no defined
//! effect). It executes the phase symbolically with the semantics of the [crate
//! doc](crate#execution-semantics-bsp): for every compute node, buffer and chunk it tracks the
//! set of compute nodes whose inputs are combined into it, or "undefined", and whether it was
//! *scaled* (divided by a mean's [`Instr::Scale`]). Devices are tracked
//! like compute nodes but have no input: their buffers start undefined, and the final check
//! does not look at them.
//! - Initial data buffer: allreduce, reduce-scatter, reduce: chunk `c` of node `n` holds `{n}`;
//!   allgather: node `n` holds `{n}` in the chunks it owns, the others are undefined; broadcast:
//!   the root holds `{root}` in every chunk, the other nodes nothing. Scratch buffers start
//!   undefined.
//! - A send, or the source of a local reduce or copy, reads a defined chunk —
//!   [`ErrorKind::ReadUndefined`].
//! - A store or copy replaces the destination's set and scaled flag with the incoming ones.
//! - A reducing write (a receive with [`RecvMode::Reduce`](crate::RecvMode::Reduce), a local
//!   reduce) has a defined destination — [`ErrorKind::ReduceIntoUndefined`] — and an incoming
//!   set disjoint from the destination's — [`ErrorKind::InputCombinedTwice`] for sum and
//!   prod and mean, [`WarningKind::InputCombinedTwice`] in the [`Report`] for max and min; neither
//!   the destination nor the incoming value is scaled — [`ErrorKind::CombineScaled`]; the
//!   destination becomes the union, not scaled. Allgather and broadcast have no reducing writes at all —
//!   [`ErrorKind::ReduceInGather`].
//! - A scale, applied in program order among the writes, divides chunks that hold all compute
//!   nodes' inputs — [`ErrorKind::ScalePartial`] (an undefined chunk included) — and are not
//!   scaled yet — [`ErrorKind::ScaledTwice`]; they become scaled.
//! - At the end, the data buffer holds exactly: allreduce — every chunk on every compute node
//!   all compute nodes' inputs; reduce-scatter — every chunk on its owner all inputs (other
//!   nodes are unconstrained); allgather — every chunk on every compute node exactly
//!   `{owner}`; broadcast — every chunk on every compute node exactly `{root}`; reduce — every
//!   chunk on the root all inputs — [`ErrorKind::WrongResult`]. Under mean, with more than
//!   one compute node, every chunk of allreduce, reduce-scatter and reduce that holds all
//!   inputs where the collective needs them is scaled — [`ErrorKind::NotScaled`] (one
//!   compute node's input is its own mean and needs none). Allgather and broadcast combine
//!   nothing and need no scale. The first
//!   [`MAX_LISTED_RESULTS`](crate::limits::MAX_LISTED_RESULTS) such results of a phase are
//!   listed, and the rest counted in one more error — [`ErrorKind::ResultsNotListed`].
//!
//! After an error, the chunk concerned is marked *poisoned*, and so is whatever is computed
//! from it: reading, combining or checking a poisoned chunk reports nothing more, so a mistake
//! is reported once rather than at every node its data reaches. A store of a good value clears
//! the mark. (Consequences elsewhere — an input that never reached a data buffer — are still
//! reported by the final check.) A phase whose symbolic state would exceed
//! [`MAX_SYMBOLIC_WORDS`](crate::limits::MAX_SYMBOLIC_WORDS) words is not executed —
//! [`ErrorKind::TooLarge`].
//!
//! # 5. Capacity (`capacity.rs`)
//!
//! In every step, a device holds at most `capacity` live chunks (a chunk of a device's buffer
//! is live from a write to the last read before the next write; a write nothing reads, in its
//! own step only; a reducing write and a scale read the value they combine with, so they keep
//! it live from its previous write) — [`ErrorKind::CapacityExceeded`], once per device, at the
//! first step over. The size of a chunk is not checked against the device: the IR has no MTU.
//!
//! # The pattern form (`pattern.rs`)
//!
//! [`verify_pattern`] proves a [`Pattern`](crate::Pattern) without expanding it: the passes
//! above run on the origin's program, its neighbourhood and the fibre (see that module), after
//! the pattern's own checks — the grid is the machine's compute nodes, the phases are laid out
//! by it, the sends are direct and every link the origin uses moves to every node —
//! [`ErrorKind::NotAPattern`], with the reason; a phase spanning more grid nodes × steps than
//! [`MAX_PATTERN_STEP_SLOTS`](crate::limits::MAX_PATTERN_STEP_SLOTS) — [`ErrorKind::TooLarge`].
//!
//! # 6. Balance (`report.rs`)
//!
//! Not a check: for a schedule that passed, the [`Report`] gives per phase and per step the
//! bytes on each link direction, busy and idle directions, the busiest direction, bytes sent,
//! any warnings, and the [cost model](crate::cost)'s estimate, lower bound and efficiency.

mod bands;
mod capacity;
mod conflicts;
mod error;
mod handles;
mod instrs;
mod location;
mod matching;
mod message;
mod names;
mod pattern;
mod phrases;
mod report;
mod sets;
mod symbolic;

pub use error::{ErrorKind, VerifyError, VerifyErrors, Warning, WarningKind};
pub use location::Location;
pub use names::{Action, AnyId, ChunkList, Expected, Named, NodeList, Transfer};
pub use pattern::{
    origin_loads, verify_pattern, PatternPhaseReport, PatternReport, VerifiedPattern,
};
pub use report::{DirectionInfo, PhaseReport, Report, StepReport};

/// The largest vector a phase may work on (see [`crate::limits`]).
pub use crate::limits::MAX_VECTOR_BYTES;

use crate::{BufferId, Instr, LinkId, Machine, NodeId, Phase, Schedule};
use rayon::prelude::*;

/// A schedule that passed every check. Only [`verify`] makes one, so anything that takes a
/// `&VerifiedSchedule` (the runtime, the emitters) can trust it.
#[derive(Clone, Debug)]
pub struct VerifiedSchedule {
    schedule: Schedule,
    report: Report,
}

impl VerifiedSchedule {
    /// The schedule.
    pub fn schedule(&self) -> &Schedule {
        &self.schedule
    }
    /// What the verifier measured.
    pub fn report(&self) -> &Report {
        &self.report
    }
    /// Gives the schedule back.
    pub fn into_schedule(self) -> Schedule {
        self.schedule
    }
}

/// Checks `schedule` and returns the proof that it is valid, or every problem found (see the
/// [module doc](self) for the checks and their order).
pub fn verify(schedule: Schedule) -> Result<VerifiedSchedule, VerifyErrors> {
    let report = check(&schedule)?;
    Ok(VerifiedSchedule { schedule, report })
}

/// [`verify`], with `beside` given the schedule on another core while the checks run, and its
/// result returned with theirs. What `beside` makes of the schedule is not proved until the
/// checks pass: the command line writes its output file this way, under a temporary name that
/// it renames into place only once the schedule is proved.
pub fn verify_beside<T: Send>(
    schedule: Schedule,
    beside: impl FnOnce(&Schedule) -> T + Send,
) -> (Result<VerifiedSchedule, VerifyErrors>, T) {
    let (checked, aside) = rayon::join(|| check(&schedule), || beside(&schedule));
    let verified = checked.map(|report| VerifiedSchedule { schedule, report });
    (verified, aside)
}

/// Every check of [`verify`] on `schedule`: what the verifier measured, or every problem found.
fn check(schedule: &Schedule) -> Result<Report, VerifyErrors> {
    let mut errors = Vec::new();
    handles::check(schedule, &mut errors);
    if !errors.is_empty() {
        return Err(VerifyErrors { errors });
    }
    let machine = &schedule.machine;
    // The phases are checked side by side (each reads only itself and the machine) and their
    // errors appended in phase order, so the result does not depend on which finishes first.
    let checked: Vec<_> = schedule
        .phases
        .par_iter()
        .map(|phase| check_phase(machine, phase))
        .collect();
    let mut warnings = Vec::with_capacity(schedule.phases.len());
    for (found, phase_warnings) in checked {
        errors.extend(found);
        warnings.push(phase_warnings);
    }
    if !errors.is_empty() {
        return Err(VerifyErrors { errors });
    }
    Ok(report::build(schedule, warnings))
}

/// The passes after the handles on one phase: its errors, in the order conflicts, matching,
/// symbolic, capacity, and the symbolic pass's warnings. The passes read the phase only, so
/// conflicts and capacity run beside matching and the symbolic pass (on another core when there
/// is one); each gathers its own errors, appended in the fixed order, so the result does not
/// depend on which finishes first.
fn check_phase(machine: &Machine, phase: &Phase) -> (Vec<VerifyError>, Vec<Warning>) {
    let pass = |check: fn(&Machine, &Phase, &mut Vec<VerifyError>)| {
        let mut errors = Vec::new();
        check(machine, phase, &mut errors);
        errors
    };
    let ((mut errors, capacity), (matched, warnings)) = rayon::join(
        || rayon::join(|| pass(conflicts::check), || pass(capacity::check)),
        || {
            let mut errors = Vec::new();
            let warnings = match matching::check(machine, phase, &mut errors) {
                Some(matching) => symbolic::check(machine, phase, &matching, &mut errors),
                None => Vec::new(),
            };
            (errors, warnings)
        },
    );
    errors.extend(matched);
    errors.extend(capacity);
    (errors, warnings)
}

/// A node id with its name (the raw id when it does not exist).
fn node(machine: &Machine, id: NodeId) -> Named<NodeId> {
    Named {
        id,
        name: machine.node_name(id),
    }
}

/// A link id with its name (the raw id when it does not exist).
fn link(machine: &Machine, id: LinkId) -> Named<LinkId> {
    Named {
        id,
        name: machine.link_name(id),
    }
}

/// A buffer id with its name (the raw id when it does not exist).
fn buffer(phase: &Phase, id: BufferId) -> Named<BufferId> {
    Named {
        id,
        name: phase
            .buffers
            .get(id.index())
            .map_or_else(|| id.to_string(), |b| b.name.clone()),
    }
}

/// What an instruction does, for messages.
fn action(machine: &Machine, instr: &Instr) -> Action {
    match instr {
        Instr::Send { to, .. } => Action::Send {
            to: node(machine, *to),
        },
        Instr::Recv { from, .. } => Action::Recv {
            from: node(machine, *from),
        },
        Instr::Reduce { .. } => Action::Reduce,
        Instr::Copy { .. } => Action::Copy,
        Instr::Scale { .. } => Action::Scale,
    }
}

/// A step index as a [`StepId`](crate::StepId) (counts are checked to fit by the first pass).
fn step_id(k: usize) -> crate::StepId {
    crate::StepId(u32::try_from(k).unwrap_or(u32::MAX))
}

/// A node index as a [`NodeId`] (counts are checked to fit by the first pass).
fn node_id(n: usize) -> NodeId {
    NodeId(u32::try_from(n).unwrap_or(u32::MAX))
}

/// The instructions of step `k` of every node, in node order then program order, each with
/// its node and its *flat index*: its position in that order, counted from 0.
fn step_instrs(phase: &Phase, k: usize) -> impl Iterator<Item = (NodeId, usize, &Instr)> {
    phase
        .programs
        .iter()
        .enumerate()
        .flat_map(move |(n, program)| {
            program
                .steps
                .get(k)
                .into_iter()
                .flatten()
                .map(move |instr| (node_id(n), instr))
        })
        .enumerate()
        .map(|(flat, (n, instr))| (n, flat, instr))
}
