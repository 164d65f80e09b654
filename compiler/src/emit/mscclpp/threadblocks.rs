//! From each GPU's operations to thread blocks: the `nop`s that order operations inside a
//! thread block, the cut into a chain of thread blocks joined by barriers, and channels.

use super::ops::{Op, Stream};
use super::{MscclppError, MAX_BARRIERS, MAX_OPERATIONS, MAX_TB_CHANNELS};
use crate::emit::layout::{Buf, Loc};
use schedule_ir::Phase;
use std::collections::{BTreeMap, BTreeSet};

/// What a thread block has done since its threads last met (`nop` or `barrier`). Every
/// operation runs on all threads of the block, each on its own part of the data, and a
/// `signal` or `wait` on the first threads only: an operation that depends on an earlier one
/// must wait for all threads to finish it.
#[derive(Clone, Debug, Default)]
pub(super) struct Hazards {
    read: BTreeSet<Loc>,
    written: BTreeSet<Loc>,
    put: bool,
    waited: bool,
}

impl Hazards {
    /// The local chunks an operation reads and writes (a put's remote write is the peer's).
    pub(super) fn touches(op: &Op) -> (Vec<Loc>, Vec<Loc>) {
        let span = |l: &Loc, cnt: u32| -> Vec<Loc> {
            (0..cnt)
                .map(|i| Loc {
                    buf: l.buf,
                    off: l.off + i,
                })
                .collect()
        };
        match op {
            Op::Put { src, cnt, .. } => (span(src, *cnt), Vec::new()),
            Op::Copy { src, dst, cnt } => (span(src, *cnt), span(dst, *cnt)),
            Op::Reduce { src, add, dst, cnt } => {
                let mut reads = span(src, *cnt);
                reads.extend(span(add, *cnt));
                (reads, span(dst, *cnt))
            }
            _ => (Vec::new(), Vec::new()),
        }
    }

    /// Whether `op` must wait for every thread to finish what came before: a signal
    /// announces finished puts, a read after a wait must see what arrived, and operations
    /// touching the same chunk (one of them writing) must not overlap.
    pub(super) fn needs_nop(&self, op: &Op) -> bool {
        match op {
            Op::Signal { .. } => self.put,
            Op::Wait { .. } | Op::Nop | Op::Barrier { .. } => false,
            _ => {
                let (reads, writes) = Hazards::touches(op);
                self.waited
                    || reads.iter().any(|l| self.written.contains(l))
                    || writes
                        .iter()
                        .any(|l| self.written.contains(l) || self.read.contains(l))
            }
        }
    }

    /// Notes that `op` ran.
    pub(super) fn record(&mut self, op: &Op) {
        match op {
            Op::Nop | Op::Barrier { .. } => *self = Hazards::default(),
            Op::Wait { .. } => self.waited = true,
            Op::Signal { .. } => {}
            _ => {
                if matches!(op, Op::Put { .. }) {
                    self.put = true;
                }
                let (reads, writes) = Hazards::touches(op);
                self.read.extend(reads);
                self.written.extend(writes);
            }
        }
    }
}

/// One thread block.
pub(super) struct ThreadBlock {
    pub(super) ops: Vec<Op>,
    /// Per channel source buffer, the GPU's channel indices this thread block uses.
    pub(super) channels: BTreeMap<Buf, Vec<u32>>,
}

/// One GPU of the plan.
pub(super) struct Gpu {
    pub(super) id: u32,
    pub(super) input_chunks: u32,
    pub(super) output_chunks: u32,
    pub(super) scratch_chunks: u32,
    /// Per channel source buffer, the peers, in channel-index order.
    pub(super) channels: BTreeMap<Buf, Vec<u32>>,
    pub(super) tbs: Vec<ThreadBlock>,
}

impl Gpu {
    /// The index of the channel to `peer` reading `key` among those `tb` uses, as operations
    /// name it.
    pub(super) fn channel_id(&self, tb: usize, key: Buf, peer: u32) -> usize {
        let cid = self.channels[&key]
            .iter()
            .position(|&p| p == peer)
            .unwrap_or(0) as u32;
        self.tbs[tb].channels[&key]
            .iter()
            .position(|&c| c == cid)
            .unwrap_or(0)
    }
}

/// The (source buffer, peer) channels an operation uses.
fn uses(op: &Op) -> Vec<(Buf, u32)> {
    match op {
        Op::Put { peer, src, .. } => vec![(src.buf, *peer)],
        Op::Signal { key, peers } | Op::Wait { key, peers } => {
            peers.iter().map(|&p| (*key, p)).collect()
        }
        _ => Vec::new(),
    }
}

/// Adds `nop`s to one step's operations, given what came before in the thread block.
fn with_nops(hazards: &mut Hazards, ops: &[Op]) -> Vec<Op> {
    let mut out = Vec::new();
    for op in ops {
        if hazards.needs_nop(op) {
            out.push(Op::Nop);
            hazards.record(&Op::Nop);
        }
        hazards.record(op);
        out.push(op.clone());
    }
    out
}

/// Cuts one GPU's operations, in order, into a chain of thread blocks of at most
/// [`MAX_OPERATIONS`] operations each; thread block `t` ends with barrier `t`, where thread
/// block `t + 1` starts, so the chain runs them one after the other.
fn chain(phase: &Phase, stream: &Stream) -> Result<Vec<Vec<Op>>, MscclppError> {
    let mut tbs: Vec<Vec<Op>> = Vec::new();
    let mut current: Vec<Op> = Vec::new();
    let mut hazards = Hazards::default();
    for op in stream.steps.iter().flat_map(|(_, ops)| ops) {
        let mut trial = hazards.clone();
        let mut piece = with_nops(&mut trial, std::slice::from_ref(op));
        // Room for the piece and the barrier that would close the block.
        if current.len() + piece.len() + 1 > MAX_OPERATIONS {
            let id = tbs.len() as u32;
            current.push(Op::Barrier { id, tbs: 2 });
            tbs.push(std::mem::replace(
                &mut current,
                vec![Op::Barrier { id, tbs: 2 }],
            ));
            trial = Hazards::default();
            piece = with_nops(&mut trial, std::slice::from_ref(op));
        }
        hazards = trial;
        current.extend(piece);
    }
    tbs.push(current);
    if tbs.len() > MAX_BARRIERS + 1 {
        return Err(MscclppError::TooManyThreadBlocks {
            phase: phase.name.clone(),
            node: stream.node.clone(),
            rank: stream.rank,
            tbs: tbs.len(),
        });
    }
    Ok(tbs)
}

/// Builds every GPU's thread blocks and channels.
pub(super) fn assemble(phase: &Phase, streams: Vec<Stream>) -> Result<Vec<Gpu>, MscclppError> {
    // Both ends of a pair declare the same channels, in the same order: the executor pairs
    // the ends' semaphores by order.
    let mut pairs: BTreeSet<(u32, u32, Buf)> = BTreeSet::new();
    for s in &streams {
        for op in s.steps.iter().flat_map(|(_, ops)| ops) {
            for (key, peer) in uses(op) {
                pairs.insert((s.rank, peer, key));
                pairs.insert((peer, s.rank, key));
            }
        }
    }
    let mut gpus = Vec::new();
    for s in &streams {
        let mut channels: BTreeMap<Buf, Vec<u32>> = BTreeMap::new();
        for &(_, peer, key) in
            pairs.range((s.rank, 0, Buf::Input)..=(s.rank, u32::MAX, Buf::Scratch))
        {
            channels.entry(key).or_default().push(peer);
        }
        for peers in channels.values_mut() {
            peers.sort_unstable();
        }
        let mut tbs = Vec::new();
        for (t, ops) in chain(phase, s)?.into_iter().enumerate() {
            let mut used: BTreeMap<Buf, BTreeSet<u32>> = BTreeMap::new();
            for (key, peer) in ops.iter().flat_map(uses) {
                let cid = channels[&key].iter().position(|&p| p == peer).unwrap_or(0) as u32;
                used.entry(key).or_default().insert(cid);
            }
            let count: usize = used.values().map(BTreeSet::len).sum();
            if count > MAX_TB_CHANNELS {
                return Err(MscclppError::TooManyChannels {
                    phase: phase.name.clone(),
                    node: s.node.clone(),
                    rank: s.rank,
                    tb: t,
                    count,
                });
            }
            tbs.push(ThreadBlock {
                ops,
                channels: used
                    .into_iter()
                    .map(|(k, c)| (k, c.into_iter().collect()))
                    .collect(),
            });
        }
        gpus.push(Gpu {
            id: s.rank,
            input_chunks: s.input_chunks,
            output_chunks: s.output_chunks,
            scratch_chunks: s.scratch_chunks,
            channels,
            tbs,
        });
    }
    Ok(gpus)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loc(buf: Buf, off: u32) -> Loc {
        Loc { buf, off }
    }

    #[test]
    fn threads_meet_where_one_operation_depends_on_another() {
        let put = Op::Put {
            peer: 1,
            src: loc(Buf::Output, 0),
            dst_off: 0,
            cnt: 1,
        };
        let signal = Op::Signal {
            key: Buf::Output,
            peers: vec![1],
        };
        let wait = Op::Wait {
            key: Buf::Output,
            peers: vec![1],
        };
        let store = Op::Copy {
            src: loc(Buf::Scratch, 0),
            dst: loc(Buf::Output, 0),
            cnt: 1,
        };
        let other = Op::Copy {
            src: loc(Buf::Scratch, 1),
            dst: loc(Buf::Output, 1),
            cnt: 1,
        };
        let out = with_nops(
            &mut Hazards::default(),
            &[put.clone(), signal, wait, store, other, put],
        );
        let names: Vec<&str> = out
            .iter()
            .map(|o| match o {
                Op::Put { .. } => "put",
                Op::Signal { .. } => "signal",
                Op::Wait { .. } => "wait",
                Op::Copy { .. } => "copy",
                Op::Nop => "nop",
                _ => "other",
            })
            .collect();
        // The put reads o[0] before the store replaces it; the store and the other copy touch
        // different chunks; the last put reads what the store wrote.
        assert_eq!(
            names,
            ["put", "nop", "signal", "wait", "nop", "copy", "copy", "nop", "put"]
        );
    }
}
