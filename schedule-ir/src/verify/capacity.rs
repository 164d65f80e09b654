//! Pass 5, capacity: no device holds more live chunks in a step than its segment units.
//!
//! A chunk of a device's buffer is live from a step that writes it (a receive, the destination
//! of a local reduce or copy, a scale) to the last step that reads it before the next write; a
//! write nothing reads is live in its own step only. Reads are sends and local sources, and
//! also every write that combines with the value held: a receive in
//! [`RecvMode::Reduce`](crate::RecvMode::Reduce), the destination of a local reduce, and a
//! scale, which divides the chunk in place. Such a write keeps the held value live up to its
//! step, as a segment unit waiting for its further pieces stays claimed. A chunk read and
//! rewritten in the same step counts once there: its unit is freed and claimed again, or kept.

use super::{node, step_id, ErrorKind, Location, VerifyError};
use crate::{BufferId, ChunkId, Instr, Machine, Phase, RecvMode};
use std::collections::BTreeMap;

/// Runs the pass on one (well-formed) phase; reports, per device, the first step over its
/// capacity.
pub(super) fn check(machine: &Machine, phase: &Phase, errors: &mut Vec<VerifyError>) {
    let steps = phase.steps as usize;
    for (n, (info, program)) in machine.nodes.iter().zip(&phase.programs).enumerate() {
        let Some(capacity) = info.capacity else {
            continue;
        };
        // (buffer, chunk) → (step, is_write), in step order, reads of a step before writes.
        let mut events: BTreeMap<(BufferId, ChunkId), Vec<(usize, bool)>> = BTreeMap::new();
        for (k, instrs) in program.steps.iter().enumerate() {
            for instr in instrs {
                // (buffers read, buffer written); a combining write reads what it combines with.
                let (reads, write) = match instr {
                    Instr::Send { buffer, .. } => ([Some(*buffer), None], None),
                    Instr::Recv { buffer, mode, .. } => {
                        let held = (*mode == RecvMode::Reduce).then_some(*buffer);
                        ([held, None], Some(*buffer))
                    }
                    Instr::Reduce { src, dst, .. } => ([Some(*src), Some(*dst)], Some(*dst)),
                    Instr::Copy { src, dst, .. } => ([Some(*src), None], Some(*dst)),
                    // A scale divides the chunk in place, in the write part of its step.
                    Instr::Scale { buffer, .. } => ([Some(*buffer), None], Some(*buffer)),
                };
                for c in instr.chunks() {
                    for b in reads.into_iter().flatten() {
                        events.entry((b, c)).or_default().push((k, false));
                    }
                    if let Some(b) = write {
                        events.entry((b, c)).or_default().push((k, true));
                    }
                }
            }
        }
        let mut live = vec![0usize; steps];
        for list in events.values_mut() {
            // Stable: reads of a step come before its writes.
            list.sort_by_key(|&(k, write)| (k, write));
            let mut marked: Option<usize> = None;
            let mut mark = |from: usize, to: usize, live: &mut Vec<usize>| {
                let start = marked.map_or(from, |m| from.max(m + 1));
                for cell in live.iter_mut().take(to + 1).skip(start) {
                    *cell += 1;
                }
                marked = Some(marked.map_or(to, |m| m.max(to)));
            };
            let mut open: Option<(usize, usize)> = None;
            for &(k, write) in list.iter() {
                match (write, open) {
                    (false, Some((start, _))) => open = Some((start, k)),
                    (false, None) => {}
                    (true, Some((start, end))) => {
                        mark(start, end, &mut live);
                        open = Some((k, k));
                    }
                    (true, None) => open = Some((k, k)),
                }
            }
            if let Some((start, end)) = open {
                mark(start, end, &mut live);
            }
        }
        if let Some((k, &count)) = live
            .iter()
            .enumerate()
            .find(|(_, &c)| c > capacity as usize)
        {
            errors.push(
                Location::step(&phase.name, step_id(k))
                    .node(node(machine, super::node_id(n)))
                    .error(ErrorKind::CapacityExceeded {
                        live: count,
                        capacity,
                    }),
            );
        }
    }
}
