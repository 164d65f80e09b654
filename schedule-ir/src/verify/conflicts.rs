//! Pass 2, conflict-free: no link direction carries more transfers in a step than its lanes,
//! in every phase whose links are exclusive ([`LinkUse`]).

use super::{
    link, node, step_id, step_instrs, ChunkList, ErrorKind, Location, Transfer, VerifyError,
};
use crate::{Instr, LinkUse, Machine, NodeId, Phase};
use std::collections::BTreeMap;

/// Runs the pass on one (well-formed) phase, appending every problem to `errors`.
pub(super) fn check(machine: &Machine, phase: &Phase, errors: &mut Vec<VerifyError>) {
    if phase.links == LinkUse::Shared {
        return;
    }
    let directions = machine.links.len() * 2;
    let mut count = vec![0u32; directions];
    let mut touched: Vec<usize> = Vec::new();
    for k in 0..phase.steps as usize {
        for (n, _, instr) in step_instrs(phase, k) {
            if let Instr::Send { link, via, .. } = instr {
                for hop in machine.route(n, *link, via) {
                    let d = hop.direction();
                    if count[d] == 0 {
                        touched.push(d);
                    }
                    count[d] = count[d].saturating_add(1);
                }
            }
        }
        let lanes = |d: usize| machine.links[d / 2].lanes;
        let mut over: BTreeMap<usize, Vec<Transfer>> = touched
            .iter()
            .filter(|&&d| count[d] > lanes(d))
            .map(|&d| (d, Vec::new()))
            .collect();
        for &d in &touched {
            count[d] = 0;
        }
        touched.clear();
        if over.is_empty() {
            continue;
        }
        // Rare path: walk the step again to name the transfers on the overbooked directions.
        for (n, _, instr) in step_instrs(phase, k) {
            if let Instr::Send {
                link,
                via,
                to,
                chunks,
                ..
            } = instr
            {
                for hop in machine.route(n, *link, via) {
                    if let Some(list) = over.get_mut(&hop.direction()) {
                        list.push(transfer(machine, n, *to, chunks));
                    }
                }
            }
        }
        for (d, transfers) in over {
            let l = &machine.links[d / 2];
            let (from, to) = if d % 2 == 0 { (l.a, l.b) } else { (l.b, l.a) };
            let id = crate::LinkId(u32::try_from(d / 2).unwrap_or(u32::MAX));
            errors.push(
                Location::step(&phase.name, step_id(k))
                    .link(link(machine, id))
                    .error(ErrorKind::LinkOverbooked {
                        from: node(machine, from),
                        to: node(machine, to),
                        lanes: l.lanes,
                        transfers,
                    }),
            );
        }
    }
}

/// A send, for messages.
pub(super) fn transfer(
    machine: &Machine,
    from: NodeId,
    to: NodeId,
    chunks: &crate::ChunkIds,
) -> Transfer {
    Transfer {
        from: node(machine, from),
        to: node(machine, to),
        chunks: ChunkList(chunks.to_vec()),
    }
}
