//! The one-line Display of every [`VerifyError`] and [`Warning`]: where, then what, with the
//! user's names.
//!
//! The place comes from the error's [`Location`]; which part of it heads the line depends on
//! the kind (`machine: `, `phase `grads`: `, `phase `grads`, step 3: `). The texts are pinned
//! by `tests/bad/*.ron` and by the compiler's diagnostics snapshots.
//!
//! Every name, and every text built from names (a pattern's `problem`, a limit's `what`),
//! is shown through [`Shown`]: a line break in a name would otherwise forge a line of its own.

use super::error::{ErrorKind as K, VerifyError, Warning, WarningKind};
use super::location::Location;
use super::phrases::{
    ends, join, kind_name, result_phrase, scale_phrase, to_itself, to_switch, uses,
};
use crate::visible::Shown;
use std::fmt;

/// A location field, or `?` when the verifier did not set it (it always sets the fields its
/// message names; the mark only keeps Display total).
struct Or<'a, T>(&'a Option<T>);

impl<T: fmt::Display> fmt::Display for Or<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(v) => v.fmt(f),
            None => f.write_str("?"),
        }
    }
}

/// The phase of a location, shown as every name is ([`Shown`]), or `?` when it is not set.
struct PhaseName<'a>(&'a Location);

impl fmt::Display for PhaseName<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0.phase {
            Some(name) => Shown(name).fmt(f),
            None => f.write_str("?"),
        }
    }
}

/// The head of a pattern's message: as much of the phase, step, node and link as is known.
fn pattern_head(at: &Location) -> String {
    let mut head = String::new();
    if at.phase.is_some() {
        head.push_str(&format!("phase `{}`", PhaseName(at)));
        if let Some(step) = at.step {
            head.push_str(&format!(", {step}"));
        }
        head.push_str(": ");
    }
    if let Some(node) = &at.node {
        head.push_str(&format!("{node}: "));
    }
    if let Some(link) = &at.link {
        head.push_str(&format!("link {link}: "));
    }
    head
}

/// The head of a message for a phase: `phase `grads`: `.
struct InPhase<'a>(&'a Location);

impl fmt::Display for InPhase<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "phase `{}`: ", PhaseName(self.0))
    }
}

/// The head of a message for a step: `phase `grads`, step 3: `.
struct InStep<'a>(&'a Location);

impl fmt::Display for InStep<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "phase `{}`, {}: ", PhaseName(self.0), Or(&self.0.step))
    }
}

impl fmt::Display for VerifyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match well_formed(&self.kind, &self.location, f) {
            Some(result) => result,
            None => instructions_and_results(&self.kind, &self.location, f),
        }
    }
}

/// The messages of the schedule, machine and phase checks; `None` for the other kinds.
/// One arm per line: the messages read as a table.
#[rustfmt::skip]
fn well_formed(kind: &K, at: &Location, f: &mut fmt::Formatter<'_>) -> Option<fmt::Result> {
    let (phase, node, link, chunk) = (InPhase(at), Or(&at.node), Or(&at.link), Or(&at.chunk));
    Some(match kind {
        K::FormatVersion { found, expected } => write!(f, "schedule format version {found} is not supported (this verifier checks version {expected})"),
        K::TooLarge { what, count, limit } => write!(f, "{}: {count} is more than this verifier supports (limit {limit})", Shown(what)),
        K::NoComputeNodes { machine } => write!(f, "machine `{}` has no compute nodes", Shown(machine)),
        K::DuplicateNodeName { name, first, second } => write!(f, "machine: {first} and {second} are both called `{}`; node names must be unique", Shown(name)),
        K::DuplicateLinkName { name, first, second } => write!(f, "machine: {first} and {second} are both called `{}`; link names must be unique", Shown(name)),
        K::LinkEndpointUnknown { endpoint, nodes } => write!(f, "machine: link {link} ends at {endpoint}, but the machine has {nodes} nodes"),
        K::LinkToItself => write!(f, "machine: link {link} joins {node} to itself"),
        K::InvalidLink { field, value, rule } => write!(f, "machine: link {link} has {field} = {value}, but it must be {rule}"),
        K::InvalidReduceRate { machine, value } => write!(f, "machine `{}`: reduce_gbps = {value}, but it must be {}", Shown(machine), crate::limits::RATE_RULE),
        K::InvalidSwitchLatency { machine, value } => write!(f, "machine `{}`: switch_latency_us = {value}, but it must be {}", Shown(machine), crate::limits::LATENCY_RULE),
        K::BadCapacity { capacity } => write!(f, "node {node} has capacity {capacity}, but only switches have a capacity, of at least 1"),
        K::DuplicatePhaseName => write!(f, "schedule: two phases are called `{}`; phase names must be unique", PhaseName(at)),
        K::ProgramUnknownPhase { position, name } => write!(f, "program item {position} runs exchange phase `{}`, but no phase has that name", Shown(name)),
        K::BandsNameTaken => write!(f, "schedule: the banded exchange `{}` has the name of another phase or exchange; names must be unique", PhaseName(at)),
        K::NoBands => write!(f, "exchange `{}`: the banded exchange has no band; it needs at least one", PhaseName(at)),
        K::EmptyBand { band, min_bytes, max_bytes } => write!(f, "exchange `{}`: band {band} ({min_bytes}..{max_bytes} bytes) holds no size; its upper end must be above its lower end", PhaseName(at)),
        K::BandGap { band, min_bytes, expected: Some(end) } => write!(f, "exchange `{}`: band {band} starts at {min_bytes} bytes but band {} ends at {end} bytes; bands must follow each other without a hole or an overlap", PhaseName(at), band.saturating_sub(1)),
        K::BandGap { band, min_bytes, expected: None } => write!(f, "exchange `{}`: band {band} starts at {min_bytes} bytes but band {} has no upper end; only the last band may be unbounded", PhaseName(at), band.saturating_sub(1)),
        K::BandsDiffer { band, phase: p, what } => write!(f, "exchange `{}`: band {band} runs phase `{}`, whose {what} differs from band 0's; every band runs the same collective, op and dtype", PhaseName(at), Shown(p)),
        K::BandSizeOutside { band, phase: p, bytes } => write!(f, "exchange `{}`: band {band} runs phase `{}`, compiled for {bytes} bytes, a size outside the band; a band's phase is compiled for a size it serves", PhaseName(at), Shown(p)),
        K::ProgramPhaseCount { count } => write!(f, "program: phase `{}` is run {count} times; every phase must be run exactly once", PhaseName(at)),
        K::ProgramOrder { position, found, expected } => write!(f, "program item {position} runs `{}` where the phase order has `{}`; the program must run the phases in the order they are listed", Shown(found), Shown(expected)),
        K::NoDataBuffer => match &at.buffer {
            Some(b) => write!(f, "{phase}buffer 0 must be the data buffer (kind Data), but it is the scratch buffer `{b}`"),
            None => write!(f, "{phase}buffer 0 must be the data buffer (kind Data), but the phase declares no buffers"),
        },
        K::ExtraDataBuffer => {
            let id = at.buffer.as_ref().map(|b| b.id);
            write!(f, "{phase}buffer `{}` ({}) is a second data buffer; only buffer 0 is Data", Or(&at.buffer), Or(&id))
        }
        K::ChunkReversed { start, end } => write!(f, "{phase}{chunk} starts at element {start} but ends at {end}"),
        K::ChunkGap { start, expected } => write!(f, "{phase}{chunk} starts at element {start} but should start at {expected}; chunks are contiguous from element 0"),
        K::ChunksEnd { end, elements } => write!(f, "{phase}the chunks end at element {end}, but the vector has {elements} elements"),
        K::UnknownRoot { root, nodes } => write!(f, "{phase}the root {root} does not exist (the machine has {nodes} nodes)"),
        K::RootNotCompute => write!(f, "{phase}the root {node} is a switch; the root must be a compute node"),
        K::MissingOwner { collective } => write!(f, "{phase}{chunk} has no owner, but {} needs one for every chunk", kind_name(collective)),
        K::UnknownOwner { owner, nodes } => write!(f, "{phase}the owner of {chunk}, {owner}, does not exist (the machine has {nodes} nodes)"),
        K::OwnerNotCompute => write!(f, "{phase}the owner of {chunk}, {node}, is a switch; owners must be compute nodes"),
        K::ProgramCount { programs, nodes } => write!(f, "{phase}{programs} programs for {nodes} nodes; every node, switches included, needs one"),
        K::StepCount { steps, expected } => write!(f, "{phase}{node}'s program has {steps} steps, but the phase has {expected}"),
        K::SwitchProgram => write!(f, "{}switch {node} has instructions, but switches run no program", InStep(at)),
        K::UnknownId { .. } | K::WrongLink { .. } | K::RouteBroken { .. } | K::RouteEndsElsewhere { .. }
        | K::PeerIsSelf { .. } | K::PeerIsSwitch { .. } | K::EmptyChunkList { .. } | K::RepeatedChunk { .. }
        | K::ScaleNotMean { .. } | K::WrongDivisor { .. } | K::SameBuffer { .. } | K::LinkOverbooked { .. }
        | K::UnmatchedSend { .. } | K::UnmatchedRecv { .. } | K::DuplicateTransfer { .. }
        | K::ChunkListMismatch { .. } | K::ReadUndefined { .. } | K::ReduceIntoUndefined { .. }
        | K::InputCombinedTwice { .. } | K::CombineScaled { .. } | K::ScalePartial { .. } | K::ScaledTwice
        | K::ReduceInGather { .. } | K::WrongResult { .. } | K::NotScaled { .. } | K::ResultsNotListed { .. }
        | K::CapacityExceeded { .. } | K::NotAPattern { .. } => return None,
    })
}

/// The messages of the instruction, conflict, matching, correctness and capacity checks.
#[rustfmt::skip]
fn instructions_and_results(kind: &K, at: &Location, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    let (step, node, link, buffer, chunk) = (InStep(at), Or(&at.node), Or(&at.link), Or(&at.buffer), Or(&at.chunk));
    match kind {
        K::UnknownId { action, id, count } => write!(f, "{step}{node}'s {action} names {id}, but {}", id.count_phrase(*count)),
        K::WrongLink { action, ends } => write!(f, "{step}{node}'s {action} {} {link}, but {link} joins {} and {}, not {node}", uses(action), ends[0], ends[1]),
        K::RouteBroken { to, at: here, ends } => write!(f, "{step}the route of {node}'s send to {to} breaks at {link}: it has reached {here}, but {link} joins {} and {}", ends[0], ends[1]),
        K::RouteEndsElsewhere { to, end } => write!(f, "{step}the route of {node}'s send to {to} ends at {end}"),
        K::PeerIsSelf { action } => write!(f, "{step}{}", to_itself(&node, action)),
        K::PeerIsSwitch { action } => write!(f, "{step}{}", to_switch(&node, action)),
        K::EmptyChunkList { action } => write!(f, "{step}{node}'s {action} names no chunks"),
        K::RepeatedChunk { action } => write!(f, "{step}{node}'s {action} names {chunk} twice"),
        K::ScaleNotMean { op } => write!(f, "{step}{node} scales buffer `{buffer}`, but the phase's op is {op}; only a mean is divided"),
        K::WrongDivisor { divisor, expected } => write!(f, "{step}{node} scales buffer `{buffer}` by 1/{divisor}, but the mean is over {expected} compute nodes; the divisor must be {expected}"),
        K::SameBuffer { action } => write!(f, "{step}{node}'s {action} reads and writes buffer `{buffer}`; source and destination must differ"),
        K::NotAPattern { problem } => write!(f, "{}not a pattern: {}", pattern_head(at), Shown(problem)),
        K::LinkOverbooked { from, to, lanes, transfers } => write!(f, "{step}link {link} direction {from}→{to} carries {} transfers (lanes: {lanes}): {}", transfers.len(), join(transfers)),
        K::UnmatchedSend { transfer } => write!(f, "{step}{transfer} arriving over {link}, but {} posts no matching receive", transfer.to),
        K::UnmatchedRecv { from, chunks } => write!(f, "{step}{node} receives chunks {chunks} from {from} over {link}, but {from} sends nothing matching"),
        K::DuplicateTransfer { to, first, second } => write!(f, "{step}{node} sends chunks {first} and chunks {second} to {to} arriving over {link}; transfers between two nodes over one link in one step must start at different chunks"),
        K::ChunkListMismatch { to, sent, received } => write!(f, "{step}{node} sends chunks {sent} to {to} over {link}, but {to} receives chunks {received}; the lists must be identical"),
        K::ReadUndefined { action } => write!(f, "{step}{node}'s {action} reads {chunk} of buffer `{buffer}`, which is undefined at the start of the step"),
        K::ReduceIntoUndefined { action } => write!(f, "{step}{node}'s {action} reduces into {chunk} of buffer `{buffer}`, which is undefined; store into it first"),
        K::InputCombinedTwice { action, inputs, op } => write!(f, "{step}{node}'s {action} combines inputs {inputs} into {chunk} of buffer `{buffer}` a second time; {op} must combine every input exactly once"),
        K::CombineScaled { action } => write!(f, "{step}{node}'s {action} combines into {chunk} of buffer `{buffer}` a value that was already divided; a mean adds every input first and scales once, at the end"),
        K::ScalePartial { holds, count, missing } => write!(f, "{step}{node} scales {chunk} of buffer `{buffer}` {}", scale_phrase(holds, *count, missing)),
        K::ScaledTwice => write!(f, "{step}{node} scales {chunk} of buffer `{buffer}` a second time; it already holds the mean"),
        K::ReduceInGather { action, collective } => write!(f, "{step}{node}'s {action} reduces, but {} has nothing to combine; store instead", kind_name(collective)),
        K::ResultsNotListed { more } => write!(f, "{}{more} more chunks of data buffers end the phase wrong; only the first {} are listed", InPhase(at), crate::limits::MAX_LISTED_RESULTS),
        K::WrongResult { collective, holds, expected, missing, extra } => write!(f, "{}{node} ends {} with {chunk} {}", InPhase(at), ends(&at.step), result_phrase(holds, collective, expected, missing, extra)),
        K::NotScaled { collective, count } => write!(f, "{}{node} ends {} with {chunk} holding the sum of all {count} inputs, but it was never divided; a mean {} must scale it by {count} once", InPhase(at), ends(&at.step), kind_name(collective)),
        K::CapacityExceeded { live, capacity } => write!(f, "{step}device {node} holds {live} live chunk(s), more than its capacity of {capacity}"),
        K::FormatVersion { .. } | K::TooLarge { .. } | K::NoComputeNodes { .. } | K::DuplicateNodeName { .. }
        | K::DuplicateLinkName { .. } | K::LinkEndpointUnknown { .. } | K::LinkToItself | K::InvalidLink { .. }
        | K::InvalidReduceRate { .. } | K::InvalidSwitchLatency { .. } | K::BadCapacity { .. } | K::DuplicatePhaseName | K::BandsNameTaken | K::NoBands | K::EmptyBand { .. } | K::BandGap { .. } | K::BandsDiffer { .. } | K::BandSizeOutside { .. } | K::ProgramUnknownPhase { .. }
        | K::ProgramPhaseCount { .. } | K::ProgramOrder { .. } | K::NoDataBuffer | K::ExtraDataBuffer
        | K::ChunkReversed { .. } | K::ChunkGap { .. } | K::ChunksEnd { .. } | K::UnknownRoot { .. }
        | K::RootNotCompute | K::MissingOwner { .. } | K::UnknownOwner { .. } | K::OwnerNotCompute
        | K::ProgramCount { .. } | K::StepCount { .. } | K::SwitchProgram => {
            // Handled by `well_formed`, which `VerifyError::fmt` asks first.
            Ok(())
        }
    }
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let at = &self.location;
        match &self.kind {
            WarningKind::InputCombinedTwice { action, inputs, op } => write!(
                f,
                "{}{}'s {action} combines inputs {inputs} into {} of buffer `{}` a second time (harmless for {op}, but wasted traffic)",
                InStep(at),
                Or(&at.node),
                Or(&at.chunk),
                Or(&at.buffer)
            ),
        }
    }
}
