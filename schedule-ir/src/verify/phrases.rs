//! The phrases error messages are built from: collective kinds, node sets, results.

use super::names::{Action, Expected, NodeList};
use crate::{Collective, StepId};
use std::fmt;

/// The short name of a collective's kind (`allreduce`, `broadcast`), without its root.
pub(crate) fn kind_name(collective: &Collective) -> &'static str {
    match collective {
        Collective::AllReduce => "allreduce",
        Collective::ReduceScatter => "reduce-scatter",
        Collective::AllGather => "allgather",
        Collective::Broadcast { .. } => "broadcast",
        Collective::Reduce { .. } => "reduce",
    }
}

/// `"sends on"` / `"receives on"` for [`ErrorKind::WrongLink`](super::ErrorKind::WrongLink).
pub(super) fn uses(action: &Action) -> &'static str {
    match action {
        Action::Recv { .. } => "arrives on",
        _ => "leaves on",
    }
}

/// The body of [`ErrorKind::PeerIsSelf`](super::ErrorKind::PeerIsSelf).
pub(super) fn to_itself(node: &impl fmt::Display, action: &Action) -> String {
    match action {
        Action::Recv { .. } => format!("{node} receives from itself"),
        _ => format!("{node} sends to itself"),
    }
}

/// The body of [`ErrorKind::PeerIsSwitch`](super::ErrorKind::PeerIsSwitch).
pub(super) fn to_switch(node: &impl fmt::Display, action: &Action) -> String {
    match action {
        Action::Send { to } => {
            format!("{node} sends to switch {to}, but only compute nodes receive")
        }
        Action::Recv { from } => {
            format!("{node} receives from switch {from}, but only compute nodes send")
        }
        other => format!("{node}'s {other} names a switch"),
    }
}

/// The body of [`ErrorKind::WrongResult`](super::ErrorKind::WrongResult) after `{node} ends {step} with {chunk} `.
pub(super) fn result_phrase(
    holds: &NodeList,
    collective: &Collective,
    expected: &Expected,
    missing: &NodeList,
    extra: &NodeList,
) -> String {
    let mut s = if holds.is_empty() {
        format!("undefined but {} needs {expected}", kind_name(collective))
    } else {
        format!(
            "holding inputs of {holds} but {} needs {expected}",
            kind_name(collective)
        )
    };
    if !missing.is_empty() {
        s.push_str(&format!("; missing {missing}"));
    }
    if !extra.is_empty() {
        s.push_str(&format!("; extra {extra}"));
    }
    s
}

/// `step 13` or `the phase (0 steps)`, for [`ErrorKind::WrongResult`](super::ErrorKind::WrongResult).
pub(super) fn ends(step: &Option<StepId>) -> String {
    match step {
        Some(step) => step.to_string(),
        None => "the phase (it has no steps)".to_string(),
    }
}

/// The body of [`ErrorKind::ScalePartial`](super::ErrorKind::ScalePartial) after
/// `{node} scales {chunk} of buffer `{buffer}` `.
pub(super) fn scale_phrase(holds: &NodeList, count: usize, missing: &NodeList) -> String {
    if holds.is_empty() {
        format!("which is undefined; a mean divides the sum of all {count} inputs")
    } else {
        format!(
            "holding inputs of {holds}, but a mean divides the sum of all {count} inputs; missing {missing}"
        )
    }
}

/// `a, b, c` for Display.
pub(super) fn join<T: fmt::Display>(items: &[T]) -> String {
    items
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}
