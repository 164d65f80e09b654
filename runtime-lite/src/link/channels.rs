//! Which connections a schedule needs: one per direction of every route a transfer takes, per
//! lane, and which connection each message of each step goes out on.

use crate::transport::MessageKey;
use schedule_ir::{ChunkId, Instr, LinkId, NodeId, Phase, Schedule, StepId};
use std::collections::{BTreeSet, HashMap};

/// One direction of a route between two compute nodes, on one lane: a TCP connection from the
/// sender's address on the route's first link to the receiver's address on its last link.
/// A direct transfer has `first == last`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct Channel {
    pub from: NodeId,
    pub to: NodeId,
    pub first: LinkId,
    pub last: LinkId,
    /// Numbers, from 0, the transfers of one step between the same two nodes over the same
    /// route, in the order of their first chunk; sender and receiver number them alike.
    pub lane: u32,
}

/// One send of a step, as the transport sees it.
struct Transfer {
    to: NodeId,
    first: LinkId,
    last: LinkId,
    first_chunk: ChunkId,
}

/// The sends of `from` in one step, each with its channel and message key.
pub(crate) fn step_channels(
    from: NodeId,
    step: StepId,
    instrs: &[Instr],
) -> Vec<(MessageKey, Channel)> {
    let mut sends: Vec<Transfer> = instrs
        .iter()
        .filter_map(|i| match i {
            Instr::Send {
                link,
                via,
                to,
                chunks,
                ..
            } => Some(Transfer {
                to: *to,
                first: *link,
                last: via.last().copied().unwrap_or(*link),
                first_chunk: chunks.first()?,
            }),
            _ => None,
        })
        .collect();
    sends.sort_by_key(|t| (t.to, t.first, t.last, t.first_chunk));
    let mut out = Vec::with_capacity(sends.len());
    let mut previous = None;
    let mut lane = 0;
    for t in sends {
        let group = Some((t.to, t.first, t.last));
        lane = if group == previous { lane + 1 } else { 0 };
        previous = group;
        let key = MessageKey {
            step,
            link: t.last,
            from,
            to: t.to,
            first_chunk: t.first_chunk,
        };
        let channel = Channel {
            from,
            to: t.to,
            first: t.first,
            last: t.last,
            lane,
        };
        out.push((key, channel));
    }
    out
}

/// Every channel any phase of `schedule` uses that starts or ends at `node`: what it sends
/// on, and what it receives on.
pub(crate) fn node_channels(
    schedule: &Schedule,
    node: NodeId,
) -> (BTreeSet<Channel>, BTreeSet<Channel>) {
    let mut outgoing = BTreeSet::new();
    let mut incoming = BTreeSet::new();
    for phase in &schedule.phases {
        for (n, program) in phase.programs.iter().enumerate() {
            let from = NodeId::new(n);
            for (k, instrs) in program.steps.iter().enumerate() {
                for (_, c) in step_channels(from, StepId::new(k), instrs) {
                    if c.from == node {
                        outgoing.insert(c);
                    }
                    if c.to == node {
                        incoming.insert(c);
                    }
                }
            }
        }
    }
    (outgoing, incoming)
}

/// The channel of each message `node` sends in `phase`.
pub(crate) fn routes(phase: &Phase, node: NodeId) -> HashMap<MessageKey, Channel> {
    let Some(program) = phase.programs.get(node.index()) else {
        return HashMap::new();
    };
    program
        .steps
        .iter()
        .enumerate()
        .flat_map(|(k, instrs)| step_channels(node, StepId::new(k), instrs))
        .collect()
}
