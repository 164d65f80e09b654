//! Hand-built schedules for the verifier's tests: ring machines and ring collectives, written
//! out step by step without the compiler, so that the verifier is tested against schedules
//! whose correctness can be checked by reading this file.
#![allow(
    dead_code,
    clippy::unwrap_used,
    clippy::panic,
    clippy::needless_range_loop
)]

use schedule_ir::{
    Buffer, BufferId, BufferKind, Chunk, ChunkId, Collective, DType, Instr, Link, LinkId, Machine,
    Node, NodeId, NodeKind, Phase, Program, RecvMode, ReduceOp, Schedule, FORMAT_VERSION,
};

/// Bandwidth of every ring link, Gbit/s (12.5e9 bytes per second).
pub const GBPS: f64 = 100.0;
/// Latency of every ring link, µs.
pub const LATENCY_US: f64 = 1.0;

/// A ring of `p` compute nodes `N0..`: link `Li` joins `Ni` (its `a` end) and `N(i+1 mod p)`.
pub fn ring_machine(p: usize) -> Machine {
    Machine {
        name: format!("ring-{p}"),
        nodes: (0..p)
            .map(|i| Node {
                name: format!("N{i}"),
                kind: NodeKind::Compute,
                capacity: None,
            })
            .collect(),
        links: (0..p)
            .map(|i| Link {
                name: format!("L{i}"),
                a: NodeId::new(i),
                b: NodeId::new((i + 1) % p),
                bandwidth_gbps: GBPS,
                latency_us: LATENCY_US,
                lanes: 1,
            })
            .collect(),
        reduce_gbps: None,
        switch_latency_us: 0.0,
    }
}

/// A ring embedded in the machine: `order[k]` sends to `order[k+1]` (cyclically) over
/// `links[k]`; the vector part it carries is cut into `p` blocks of chunks.
pub struct Ring {
    pub order: Vec<usize>,
    pub links: Vec<u32>,
    pub blocks: Vec<Vec<u32>>,
}

impl Ring {
    /// Clockwise: `Ni → N(i+1)` over `Li`.
    pub fn clockwise(p: usize, blocks: Vec<Vec<u32>>) -> Ring {
        Ring {
            order: (0..p).collect(),
            links: (0..p as u32).collect(),
            blocks,
        }
    }

    /// Counter-clockwise: `N0 → N(p-1) → … → N1 → N0`, over `L(p-1), L(p-2), …, L0`.
    pub fn counter_clockwise(p: usize, blocks: Vec<Vec<u32>>) -> Ring {
        Ring {
            order: (0..p).map(|k| (p - k) % p).collect(),
            links: (0..p as u32).map(|k| p as u32 - 1 - k).collect(),
            blocks,
        }
    }

    fn p(&self) -> usize {
        self.order.len()
    }

    /// The node that holds block `b` complete after the reduce-scatter: its owner.
    pub fn owner(&self, b: usize) -> usize {
        self.order[(b + self.p() - 1) % self.p()]
    }

    /// One transfer per ring position: in step `s` position `k` sends block `block(k, s)`.
    fn transfers(
        &self,
        programs: &mut [Program],
        step: usize,
        mode: RecvMode,
        block: impl Fn(usize) -> usize,
    ) {
        let p = self.p();
        for k in 0..p {
            let (from, to) = (self.order[k], self.order[(k + 1) % p]);
            let chunks: Vec<ChunkId> = self.blocks[block(k) % p]
                .iter()
                .map(|&c| ChunkId(c))
                .collect();
            programs[from].steps[step].push(send(self.links[k], from, to, &chunks));
            programs[to].steps[step].push(recv(self.links[k], from, &chunks, mode));
        }
    }

    /// The `p-1` reduce-scatter steps from `first`: in step `s`, position `k` sends block
    /// `k - s` and its successor reduces it.
    pub fn reduce_scatter(&self, programs: &mut [Program], first: usize) {
        let p = self.p();
        for s in 0..p - 1 {
            self.transfers(programs, first + s, RecvMode::Reduce, |k| k + p - s);
        }
    }

    /// The `p-1` allgather steps from `first`: in step `s`, position `k` sends block
    /// `k + 1 - s` and its successor stores it.
    pub fn allgather(&self, programs: &mut [Program], first: usize) {
        let p = self.p();
        for s in 0..p - 1 {
            self.transfers(programs, first + s, RecvMode::Store, |k| k + 1 + p - s);
        }
    }
}

pub fn send(link: u32, _from: usize, to: usize, chunks: &[ChunkId]) -> Instr {
    Instr::Send {
        link: LinkId(link),
        via: vec![],
        to: NodeId::new(to),
        buffer: BufferId(0),
        chunks: chunks.to_vec().into(),
    }
}

pub fn recv(link: u32, from: usize, chunks: &[ChunkId], mode: RecvMode) -> Instr {
    Instr::Recv {
        link: LinkId(link),
        from: NodeId::new(from),
        buffer: BufferId(0),
        chunks: chunks.to_vec().into(),
        mode,
    }
}

/// `count` chunks splitting `elements` as evenly as possible.
pub fn chunks(count: usize, elements: u64) -> Vec<Chunk> {
    (0..count as u64)
        .map(|i| Chunk {
            start: i * elements / count as u64,
            end: (i + 1) * elements / count as u64,
            owner: None,
        })
        .collect()
}

/// `blocks` blocks of `per_block` consecutive chunk ids from `base`.
pub fn blocks(base: u32, blocks: usize, per_block: usize) -> Vec<Vec<u32>> {
    (0..blocks)
        .map(|b| {
            let start = base + (b * per_block) as u32;
            (start..start + per_block as u32).collect()
        })
        .collect()
}

/// A schedule with one phase `grads` (sum over f32) on `machine`, with empty programs of
/// `steps` steps and one data buffer.
pub fn skeleton(
    machine: Machine,
    collective: Collective,
    algorithm: &str,
    chunk_count: usize,
    elements: u64,
    steps: usize,
) -> Schedule {
    let programs = machine
        .nodes
        .iter()
        .map(|_| Program {
            steps: vec![Vec::new(); steps],
        })
        .collect();
    Schedule {
        format_version: FORMAT_VERSION,
        machine,
        program: Vec::new(),
        phases: vec![Phase {
            name: "grads".into(),
            collective,
            op: ReduceOp::Sum,
            dtype: DType::F32,
            elements,
            algorithm: algorithm.into(),
            chunks: chunks(chunk_count, elements),
            buffers: vec![Buffer {
                name: "data".into(),
                kind: BufferKind::Data,
            }],
            links: schedule_ir::LinkUse::Exclusive,
            steps: steps as u32,
            programs,
        }],
    }
}

/// The only phase of a test schedule.
pub fn phase(s: &mut Schedule) -> &mut Phase {
    &mut s.phases[0]
}

/// The instructions of node `n` in step `k`.
pub fn at(s: &mut Schedule, n: usize, k: usize) -> &mut Vec<Instr> {
    &mut s.phases[0].programs[n].steps[k]
}

/// Ring allreduce on a ring of `p` nodes, clockwise only: `p` chunks, reduce-scatter then
/// allgather, `2(p-1)` steps.
pub fn ring_allreduce(p: usize, elements: u64) -> Schedule {
    let mut s = skeleton(
        ring_machine(p),
        Collective::AllReduce,
        "ring",
        p,
        elements,
        2 * (p - 1),
    );
    let ring = Ring::clockwise(p, blocks(0, p, 1));
    let programs = &mut phase(&mut s).programs;
    ring.reduce_scatter(programs, 0);
    ring.allgather(programs, p - 1);
    s
}

/// Ring allreduce over both directions of a ring of `p` nodes: chunks `0..p·k` go clockwise
/// and `p·k..2p·k` counter-clockwise, in blocks of `k` chunks; `2(p-1)` steps.
pub fn bidir_ring_allreduce(p: usize, k: usize, elements: u64) -> Schedule {
    let mut s = skeleton(
        ring_machine(p),
        Collective::AllReduce,
        "bidir-ring",
        2 * p * k,
        elements,
        2 * (p - 1),
    );
    let rings = [
        Ring::clockwise(p, blocks(0, p, k)),
        Ring::counter_clockwise(p, blocks((p * k) as u32, p, k)),
    ];
    let programs = &mut phase(&mut s).programs;
    for ring in &rings {
        ring.reduce_scatter(programs, 0);
        ring.allgather(programs, p - 1);
    }
    s
}

/// Ring reduce-scatter (clockwise): `p` chunks, chunk `c` owned by `N(c-1)`, `p-1` steps.
pub fn ring_reduce_scatter(p: usize, elements: u64) -> Schedule {
    let mut s = skeleton(
        ring_machine(p),
        Collective::ReduceScatter,
        "ring",
        p,
        elements,
        p - 1,
    );
    let ring = Ring::clockwise(p, blocks(0, p, 1));
    for c in 0..p {
        phase(&mut s).chunks[c].owner = Some(NodeId::new(ring.owner(c)));
    }
    ring.reduce_scatter(&mut phase(&mut s).programs, 0);
    s
}

/// Ring allgather (clockwise): `p` chunks, chunk `c` owned by `N(c-1)`, `p-1` steps.
pub fn ring_allgather(p: usize, elements: u64) -> Schedule {
    let mut s = skeleton(
        ring_machine(p),
        Collective::AllGather,
        "ring",
        p,
        elements,
        p - 1,
    );
    let ring = Ring::clockwise(p, blocks(0, p, 1));
    for c in 0..p {
        phase(&mut s).chunks[c].owner = Some(NodeId::new(ring.owner(c)));
    }
    ring.allgather(&mut phase(&mut s).programs, 0);
    s
}

/// Broadcast from `N0` down the chain `N0 → N1 → … → N(p-1)`, the whole vector per step, with
/// `chunk_count` chunks; `p-1` steps.
pub fn chain_broadcast(p: usize, chunk_count: usize, elements: u64) -> Schedule {
    chain(
        p,
        chunk_count,
        elements,
        Collective::Broadcast {
            root: NodeId::new(0),
        },
        RecvMode::Store,
    )
}

/// Reduce to `N(p-1)` up the chain `N0 → N1 → … → N(p-1)`; `p-1` steps.
pub fn chain_reduce(p: usize, chunk_count: usize, elements: u64) -> Schedule {
    chain(
        p,
        chunk_count,
        elements,
        Collective::Reduce {
            root: NodeId::new(p - 1),
        },
        RecvMode::Reduce,
    )
}

fn chain(
    p: usize,
    chunk_count: usize,
    elements: u64,
    collective: Collective,
    mode: RecvMode,
) -> Schedule {
    let mut s = skeleton(
        ring_machine(p),
        collective,
        "chain",
        chunk_count,
        elements,
        p - 1,
    );
    let all: Vec<ChunkId> = (0..chunk_count).map(ChunkId::new).collect();
    for k in 0..p - 1 {
        at(&mut s, k, k).push(send(k as u32, k, k + 1, &all));
        at(&mut s, k + 1, k).push(recv(k as u32, k, &all, mode));
    }
    s
}

/// Adds a scratch buffer (buffer 1) to the phase.
pub fn with_scratch(mut s: Schedule) -> Schedule {
    phase(&mut s).buffers.push(Buffer {
        name: "scratch".into(),
        kind: BufferKind::Scratch,
    });
    s
}

/// Chunk ids.
pub fn ids(chunks: &[u32]) -> Vec<ChunkId> {
    chunks.iter().map(|&c| ChunkId(c)).collect()
}

/// Replaces the chunk lists of the send `from → to` in step `k` and of its receive.
pub fn set_chunks(s: &mut Schedule, k: usize, from: usize, to: usize, chunks: &[u32]) {
    for instr in at(s, from, k).iter_mut() {
        if let Instr::Send {
            to: t, chunks: c, ..
        } = instr
        {
            if t.index() == to {
                *c = ids(chunks).into();
            }
        }
    }
    for instr in at(s, to, k).iter_mut() {
        if let Instr::Recv {
            from: f, chunks: c, ..
        } = instr
        {
            if f.index() == from {
                *c = ids(chunks).into();
            }
        }
    }
}

/// In `ring_allreduce(4, _)`: step 1's transfer `N0 → N1` (chunk 3) also carries chunk 0,
/// which N1 already combined with N0's input in step 0.
pub fn extend_step1_with_chunk0(s: &mut Schedule) {
    set_chunks(s, 1, 0, 1, &[3, 0]);
}

/// An independent, deliberately plain simulator of a *verified* phase (it indexes freely):
/// every chunk value is a vector of weights, one per node, of that node's input in the value
/// (a receive or reduce adds weights, a mean's scale divides them; sums of a few ones divided
/// once are exact in `f64`). Checks the final data buffers against the collective; `Err` says what is off.
/// Used to cross-check the verifier: whatever it accepts must simulate correctly.
pub fn simulate_counts(s: &Schedule) -> Result<(), String> {
    let machine = &s.machine;
    let nodes = machine.nodes.len();
    for phase in &s.phases {
        let chunks = phase.chunks.len();
        let unit = |n: usize| {
            let mut v = vec![0f64; nodes];
            v[n] = 1.0;
            Some(v)
        };
        let compute: Vec<usize> = (0..nodes)
            .filter(|&n| machine.nodes[n].kind == NodeKind::Compute)
            .collect();
        // state[n][b][c]
        let mut state: Vec<Vec<Vec<Option<Vec<f64>>>>> =
            vec![vec![vec![None; chunks]; phase.buffers.len()]; nodes];
        for &n in &compute {
            for c in 0..chunks {
                let has = match phase.collective {
                    Collective::AllReduce
                    | Collective::ReduceScatter
                    | Collective::Reduce { .. } => true,
                    Collective::AllGather => phase.chunks[c].owner == Some(NodeId::new(n)),
                    Collective::Broadcast { root } => root.index() == n,
                };
                if has {
                    state[n][0][c] = unit(n);
                }
            }
        }
        for k in 0..phase.steps as usize {
            // Reads, against the start-of-step state.
            let mut sends = Vec::new(); // (from, to, last link, chunks, values, used)
            let mut local = vec![Vec::new(); nodes]; // per node, per local instr in order
            for n in 0..nodes {
                for instr in phase.programs[n].steps.get(k).into_iter().flatten() {
                    match instr {
                        Instr::Send {
                            link,
                            via,
                            to,
                            buffer,
                            chunks,
                        } => {
                            let values: Vec<_> = chunks
                                .iter()
                                .map(|c| state[n][buffer.index()][c.index()].clone())
                                .collect();
                            let last = via.last().copied().unwrap_or(*link);
                            sends.push((n, to.index(), last, chunks.clone(), values, false));
                        }
                        Instr::Reduce { src, chunks, .. } | Instr::Copy { src, chunks, .. } => {
                            let values: Vec<_> = chunks
                                .iter()
                                .map(|c| state[n][src.index()][c.index()].clone())
                                .collect();
                            local[n].push(values);
                        }
                        Instr::Recv { .. } | Instr::Scale { .. } => {}
                    }
                }
            }
            // Writes, in program order.
            for n in 0..nodes {
                let mut next_local = 0;
                for instr in phase.programs[n].steps.get(k).into_iter().flatten() {
                    let (buffer, chunks, values, reduce) = match instr {
                        Instr::Send { .. } => continue,
                        Instr::Scale {
                            buffer,
                            chunks,
                            divisor,
                        } => {
                            for c in chunks {
                                let Some(v) = state[n][buffer.index()][c.index()].as_mut() else {
                                    return Err(format!(
                                        "step {k}: node {n} scales undefined data"
                                    ));
                                };
                                v.iter_mut().for_each(|w| *w /= f64::from(*divisor));
                            }
                            continue;
                        }
                        Instr::Recv {
                            link,
                            from,
                            buffer,
                            chunks,
                            mode,
                        } => {
                            let Some(send) = sends.iter_mut().find(|s| {
                                !s.5 && s.0 == from.index()
                                    && s.1 == n
                                    && s.2 == *link
                                    && s.3 == *chunks
                            }) else {
                                return Err(format!("step {k}: receive on node {n} unmatched"));
                            };
                            send.5 = true;
                            (*buffer, chunks, send.4.clone(), *mode == RecvMode::Reduce)
                        }
                        Instr::Reduce { dst, chunks, .. } | Instr::Copy { dst, chunks, .. } => {
                            let values = local[n][next_local].clone();
                            next_local += 1;
                            (*dst, chunks, values, matches!(instr, Instr::Reduce { .. }))
                        }
                    };
                    for (c, v) in chunks.iter().zip(values) {
                        let slot = &mut state[n][buffer.index()][c.index()];
                        if !reduce {
                            *slot = v;
                            continue;
                        }
                        match (slot.as_mut(), v) {
                            (Some(d), Some(v)) => {
                                if matches!(
                                    phase.collective,
                                    Collective::AllGather | Collective::Broadcast { .. }
                                ) {
                                    return Err(format!("step {k}: reduce in a gather"));
                                }
                                for (d, v) in d.iter_mut().zip(v) {
                                    *d += v;
                                }
                            }
                            _ => return Err(format!("step {k}: node {n} combines undefined data")),
                        }
                    }
                }
            }
            if sends.iter().any(|s| !s.5) {
                return Err(format!("step {k}: a send is unmatched"));
            }
        }
        // A mean's result weighs every input 1/p; anything else weighs them 1.
        let weight = if phase.op == ReduceOp::Mean {
            1.0 / compute.len() as f64
        } else {
            1.0
        };
        let all: Vec<f64> = (0..nodes)
            .map(|n| {
                if machine.nodes[n].kind == NodeKind::Compute {
                    weight
                } else {
                    0.0
                }
            })
            .collect();
        for &n in &compute {
            for c in 0..chunks {
                let want = match phase.collective {
                    Collective::AllReduce => Some(all.clone()),
                    Collective::ReduceScatter if phase.chunks[c].owner == Some(NodeId::new(n)) => {
                        Some(all.clone())
                    }
                    Collective::Reduce { root } if root.index() == n => Some(all.clone()),
                    Collective::AllGather => phase.chunks[c].owner.and_then(|o| unit(o.index())),
                    Collective::Broadcast { root } => unit(root.index()),
                    _ => None,
                };
                if let Some(want) = want {
                    if state[n][0][c].as_ref() != Some(&want) {
                        return Err(format!(
                            "node {n} chunk {c}: {:?}, want {want:?}",
                            state[n][0][c]
                        ));
                    }
                }
            }
        }
    }
    Ok(())
}
