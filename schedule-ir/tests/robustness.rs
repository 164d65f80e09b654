//! The verifier and the cost model receive untrusted schedules: randomly damaged schedules
//! must give errors (or verify), never a panic.
#![allow(clippy::unwrap_used, clippy::panic)]

mod common;

use common::*;
use schedule_ir::{
    cost, verify, BufferId, BufferKind, ChunkId, Collective, Instr, LinkId, NodeId, NodeKind,
    RecvMode, Schedule,
};

/// xorshift64*: a small deterministic generator, so failures reproduce.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
    /// A value that is usually a valid index below `n`, sometimes just past it, rarely huge.
    fn id(&mut self, n: usize) -> u32 {
        match self.below(10) {
            0 => u32::MAX - self.below(3) as u32,
            1 => (n + self.below(3)) as u32,
            _ => self.below(n.max(1)) as u32,
        }
    }
}

fn mutate(s: &mut Schedule, rng: &mut Rng) {
    let nodes = s.machine.nodes.len();
    let links = s.machine.links.len();
    let phase = &mut s.phases[0];
    let chunks = phase.chunks.len();
    let buffers = phase.buffers.len();
    let steps = phase.steps as usize;
    match rng.below(24) {
        8..=15 => pair_mutation(s, rng),
        0 => phase.steps = rng.id(steps + 1),
        1 => {
            let c = rng.below(chunks);
            if let Some(chunk) = phase.chunks.get_mut(c) {
                chunk.start = rng.next() % 64;
                chunk.end = rng.next() % 64;
            }
        }
        2 => {
            let c = rng.below(chunks);
            let owner = NodeId(rng.id(nodes));
            if let Some(chunk) = phase.chunks.get_mut(c) {
                chunk.owner = if rng.below(3) == 0 { None } else { Some(owner) };
            }
        }
        3 => {
            phase.collective = match rng.below(5) {
                0 => Collective::AllReduce,
                1 => Collective::ReduceScatter,
                2 => Collective::AllGather,
                3 => Collective::Broadcast {
                    root: NodeId(rng.id(nodes)),
                },
                _ => Collective::Reduce {
                    root: NodeId(rng.id(nodes)),
                },
            }
        }
        4 => {
            let l = rng.below(links);
            let (a, b) = (rng.id(nodes), rng.id(nodes));
            if let Some(link) = s.machine.links.get_mut(l) {
                link.a = NodeId(a);
                link.b = NodeId(b);
            }
        }
        5 => {
            if rng.below(2) == 0 {
                phase.programs.pop();
            } else {
                phase.programs.push(Default::default());
            }
        }
        6 => phase.buffers.push(schedule_ir::Buffer {
            name: "scratch".into(),
            kind: if rng.below(4) == 0 {
                BufferKind::Data
            } else {
                BufferKind::Scratch
            },
        }),
        7 => {
            let n = rng.below(nodes);
            if let Some(node) = s.machine.nodes.get_mut(n) {
                node.kind = NodeKind::Switch;
            }
        }
        _ => {
            // Damage one instruction.
            let n = rng.below(phase.programs.len());
            let Some(program) = phase.programs.get_mut(n) else {
                return;
            };
            let k = rng.below(program.steps.len());
            let Some(step) = program.steps.get_mut(k) else {
                return;
            };
            let i = rng.below(step.len());
            if step.is_empty() {
                return;
            }
            let what = rng.below(8);
            match what {
                0 => {
                    step.remove(i);
                }
                1 => {
                    let copy = step[i].clone();
                    step.push(copy);
                }
                _ => {}
            }
            let Some(instr) = step.get_mut(i) else { return };
            match instr {
                Instr::Send {
                    link,
                    via,
                    to,
                    buffer,
                    chunks: cs,
                } => match what {
                    2 => *link = LinkId(rng.id(links)),
                    3 => via.push(LinkId(rng.id(links))),
                    4 => *to = NodeId(rng.id(nodes)),
                    5 => *buffer = BufferId(rng.id(buffers)),
                    6 => cs.push(ChunkId(rng.id(chunks))),
                    _ => cs.clear(),
                },
                Instr::Recv {
                    link,
                    from,
                    buffer,
                    chunks: cs,
                    mode,
                } => match what {
                    2 => *link = LinkId(rng.id(links)),
                    3 => *from = NodeId(rng.id(nodes)),
                    4 => *buffer = BufferId(rng.id(buffers)),
                    5 => cs.push(ChunkId(rng.id(chunks))),
                    6 => {
                        *mode = if *mode == RecvMode::Store {
                            RecvMode::Reduce
                        } else {
                            RecvMode::Store
                        }
                    }
                    _ => {
                        *instr = Instr::Reduce {
                            src: BufferId(rng.id(buffers)),
                            dst: BufferId(rng.id(buffers)),
                            chunks: vec![ChunkId(rng.id(chunks))].into(),
                        }
                    }
                },
                Instr::Reduce {
                    src,
                    dst,
                    chunks: cs,
                }
                | Instr::Copy {
                    src,
                    dst,
                    chunks: cs,
                } => match what {
                    2 => *src = BufferId(rng.id(buffers)),
                    3 => *dst = BufferId(rng.id(buffers)),
                    4 => {
                        *instr = Instr::Scale {
                            buffer: BufferId(rng.id(buffers)),
                            chunks: vec![ChunkId(rng.id(chunks))].into(),
                            divisor: rng.id(nodes),
                        }
                    }
                    _ => cs.push(ChunkId(rng.id(chunks))),
                },
                Instr::Scale {
                    buffer,
                    chunks: cs,
                    divisor,
                } => match what {
                    2 => *buffer = BufferId(rng.id(buffers)),
                    3 => *divisor = rng.id(nodes),
                    _ => cs.push(ChunkId(rng.id(chunks))),
                },
            }
        }
    }
}

/// Changes a matched send/receive pair consistently (chunk, step or mode), so that the damage
/// gets past matching and only the symbolic execution can catch it.
fn pair_mutation(s: &mut Schedule, rng: &mut Rng) {
    let phase = &mut s.phases[0];
    let steps = phase.steps as usize;
    let chunks = phase.chunks.len() as u32;
    let n = rng.below(phase.programs.len());
    let k = rng.below(steps);
    let Some(step) = phase.programs.get(n).and_then(|p| p.steps.get(k)) else {
        return;
    };
    let Some(i) = step.iter().position(|i| matches!(i, Instr::Send { .. })) else {
        return;
    };
    let Instr::Send {
        to, chunks: sent, ..
    } = step[i].clone()
    else {
        return;
    };
    let t = to.index();
    let fits = |p: &schedule_ir::Phase, node: usize, k: usize| {
        p.programs.get(node).is_some_and(|p| k < p.steps.len())
    };
    if !fits(phase, t, k) {
        return;
    }
    let Some(j) = phase.programs[t].steps[k].iter().position(
        |r| matches!(r, Instr::Recv { from, chunks: c, .. } if from.index() == n && *c == sent),
    ) else {
        return;
    };
    match rng.below(3) {
        0 => {
            let c = vec![ChunkId(rng.below(chunks as usize) as u32)];
            for (node, at) in [(n, i), (to.index(), j)] {
                if let Instr::Send { chunks, .. } | Instr::Recv { chunks, .. } =
                    &mut phase.programs[node].steps[k][at]
                {
                    *chunks = c.clone().into();
                }
            }
        }
        1 => {
            let k2 = rng.below(steps);
            if !fits(phase, n, k2) || !fits(phase, t, k2) {
                return;
            }
            let send = phase.programs[n].steps[k].remove(i);
            let recv = phase.programs[to.index()].steps[k].remove(j);
            phase.programs[n].steps[k2].push(send);
            phase.programs[to.index()].steps[k2].insert(0, recv);
        }
        _ => {
            if let Instr::Recv { mode, .. } = &mut phase.programs[to.index()].steps[k][j] {
                *mode = match mode {
                    RecvMode::Store => RecvMode::Reduce,
                    RecvMode::Reduce => RecvMode::Store,
                };
            }
        }
    }
}

#[test]
fn damaged_schedules_never_panic() {
    let mut rng = Rng(0x5eed_1234_abcd_0001);
    let bases = [
        ring_allreduce(4, 64),
        with_scratch(bidir_ring_allreduce(3, 2, 48)),
        ring_reduce_scatter(5, 40),
        ring_allgather(4, 16),
        chain_broadcast(3, 2, 10),
        chain_reduce(4, 3, 30),
    ];
    let (mut passed, mut failed) = (0, 0);
    for round in 0..6000 {
        let mut s = bases[round % bases.len()].clone();
        for _ in 0..1 + rng.below(3) {
            mutate(&mut s, &mut rng);
        }
        for phase in &s.phases {
            let e = cost::estimate(&s.machine, phase);
            let _ = cost::lower_bound(&s.machine, phase);
            assert!(e.per_step.len() <= phase.steps as usize);
        }
        match verify(s) {
            Ok(v) => {
                passed += 1;
                let _ = v.report().to_string();
                // Sound: what the verifier accepts really computes the collective (sum).
                if let Err(why) = simulate_counts(v.schedule()) {
                    panic!("round {round}: verified but wrong: {why}");
                }
            }
            Err(e) => {
                failed += 1;
                assert!(!e.errors.is_empty());
                let _ = e.to_string();
            }
        }
    }
    // Most damage is caught; some (a duplicated store, a harmless re-chunking) is harmless.
    assert!(failed > 4000, "{passed} passed, {failed} failed");
    assert!(passed > 100, "{passed} passed, {failed} failed");
}
