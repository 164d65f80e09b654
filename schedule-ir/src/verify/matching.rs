//! Pass 3, matched: every send pairs with exactly one receive of the same step, and back; no
//! two sends of a step share sender, receiver, last link and first chunk.

use super::conflicts::transfer;
use super::{link, node, step_id, step_instrs, ChunkList, ErrorKind, Location, VerifyError};
use crate::{ChunkIds, Instr, Machine, Phase};
use std::cmp::Ordering;
use std::collections::BTreeMap;

/// The pairing of a phase whose transfers all match: `partner[k][r]` is the flat index (see
/// [`super::step_instrs`]) of the send that receive `r` of step `k` pairs with. Entries of
/// instructions that are not receives are `u32::MAX`.
pub(super) struct Matching {
    pub(super) partner: Vec<Vec<u32>>,
}

/// One side of a transfer, sortable by what must match.
struct End<'a> {
    /// Receiving node, sending node, last link.
    key: (u32, u32, u32),
    chunks: &'a ChunkIds,
    flat: u32,
}

fn order(x: &End<'_>, y: &End<'_>) -> Ordering {
    (x.key, x.chunks).cmp(&(y.key, y.chunks))
}

/// Runs the pass on one (well-formed) phase. Returns the pairing if every transfer matched,
/// otherwise appends every problem to `errors` and returns `None`.
pub(super) fn check(
    machine: &Machine,
    phase: &Phase,
    errors: &mut Vec<VerifyError>,
) -> Option<Matching> {
    let mut partner = Vec::with_capacity(phase.steps as usize);
    let mut ok = true;
    for k in 0..phase.steps as usize {
        let mut sends = Vec::new();
        let mut recvs = Vec::new();
        let mut count = 0usize;
        for (n, flat, instr) in step_instrs(phase, k) {
            count = flat + 1;
            let flat = u32::try_from(flat).unwrap_or(u32::MAX);
            match instr {
                Instr::Send { to, chunks, .. } => {
                    let last = instr.final_link().map_or(u32::MAX, |l| l.0);
                    sends.push(End {
                        key: (to.0, n.0, last),
                        chunks,
                        flat,
                    });
                }
                Instr::Recv {
                    link, from, chunks, ..
                } => recvs.push(End {
                    key: (n.0, from.0, link.0),
                    chunks,
                    flat,
                }),
                Instr::Reduce { .. } | Instr::Copy { .. } | Instr::Scale { .. } => {}
            }
        }
        // Stable sorts: equal ends stay in program order, so pairing is deterministic.
        sends.sort_by(order);
        recvs.sort_by(order);
        // A message is known by its sender, receiver, last link and first chunk: two sends that
        // share them cannot be told apart (sorted, they are neighbours).
        let mut twins: Vec<(u32, VerifyError)> = sends
            .windows(2)
            .filter(|w| w[0].key == w[1].key && w[0].chunks.first() == w[1].chunks.first())
            .map(|w| {
                let (a, b) = if w[0].flat < w[1].flat {
                    (&w[0], &w[1])
                } else {
                    (&w[1], &w[0])
                };
                let (to, from, last) = a.key;
                let error = Location::step(&phase.name, step_id(k))
                    .node(node(machine, crate::NodeId(from)))
                    .link(link(machine, crate::LinkId(last)))
                    .error(ErrorKind::DuplicateTransfer {
                        to: node(machine, crate::NodeId(to)),
                        first: ChunkList(a.chunks.to_vec()),
                        second: ChunkList(b.chunks.to_vec()),
                    });
                (b.flat, error)
            })
            .collect();
        if !twins.is_empty() {
            twins.sort_by_key(|(flat, _)| *flat);
            errors.extend(twins.into_iter().map(|(_, e)| e));
            ok = false;
            continue;
        }
        let mut pairs = vec![u32::MAX; count];
        let mut lone_sends = Vec::new();
        let mut lone_recvs = Vec::new();
        let (mut i, mut j) = (0, 0);
        while i < sends.len() && j < recvs.len() {
            match order(&sends[i], &recvs[j]) {
                Ordering::Equal => {
                    pairs[recvs[j].flat as usize] = sends[i].flat;
                    i += 1;
                    j += 1;
                }
                Ordering::Less => {
                    lone_sends.push(&sends[i]);
                    i += 1;
                }
                Ordering::Greater => {
                    lone_recvs.push(&recvs[j]);
                    j += 1;
                }
            }
        }
        lone_sends.extend(&sends[i..]);
        lone_recvs.extend(&recvs[j..]);
        if lone_sends.is_empty() && lone_recvs.is_empty() {
            partner.push(pairs);
            continue;
        }
        ok = false;
        report(machine, phase, k, &lone_sends, &lone_recvs, errors);
    }
    ok.then_some(Matching { partner })
}

/// Reports the unpaired ends of step `k`, in program order of the instruction reported.
fn report(
    machine: &Machine,
    phase: &Phase,
    k: usize,
    lone_sends: &[&End<'_>],
    lone_recvs: &[&End<'_>],
    errors: &mut Vec<VerifyError>,
) {
    type Group<'a, 'b> = (Vec<&'a End<'b>>, Vec<&'a End<'b>>);
    let mut groups: BTreeMap<(u32, u32, u32), Group<'_, '_>> = BTreeMap::new();
    for s in lone_sends {
        groups.entry(s.key).or_default().0.push(s);
    }
    for r in lone_recvs {
        groups.entry(r.key).or_default().1.push(r);
    }
    let mut found: Vec<(u32, VerifyError)> = Vec::new();
    let step = Location::step(&phase.name, step_id(k));
    for ((to, from, last), (sends, recvs)) in groups {
        let (to, from, last) = (crate::NodeId(to), crate::NodeId(from), crate::LinkId(last));
        let sender = step
            .clone()
            .node(node(machine, from))
            .link(link(machine, last));
        if let ([s], [r]) = (sends.as_slice(), recvs.as_slice()) {
            let kind = ErrorKind::ChunkListMismatch {
                to: node(machine, to),
                sent: ChunkList(s.chunks.to_vec()),
                received: ChunkList(r.chunks.to_vec()),
            };
            found.push((s.flat.min(r.flat), sender.error(kind)));
            continue;
        }
        for s in sends {
            let kind = ErrorKind::UnmatchedSend {
                transfer: transfer(machine, from, to, s.chunks),
            };
            found.push((s.flat, sender.clone().error(kind)));
        }
        let receiver = step
            .clone()
            .node(node(machine, to))
            .link(link(machine, last));
        for r in recvs {
            let kind = ErrorKind::UnmatchedRecv {
                from: node(machine, from),
                chunks: ChunkList(r.chunks.to_vec()),
            };
            found.push((r.flat, receiver.clone().error(kind)));
        }
    }
    found.sort_by_key(|(flat, _)| *flat);
    errors.extend(found.into_iter().map(|(_, e)| e));
}
