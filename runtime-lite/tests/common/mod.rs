//! Shared test helpers: hand-built machines and schedules (rings, a star through a switch),
//! random inputs, and transports for the per-node API (threads over channels, fake peers
//! with injected faults).
#![allow(dead_code, clippy::unwrap_used, clippy::panic)]

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use runtime_lite::{Element, Expected, Message, MessageKey, Transport};
use schedule_ir::{
    Buffer, BufferId, BufferKind, Chunk, ChunkId, Collective, DType, Instr, Link, LinkId, LinkUse,
    Machine, Node, NodeId, NodeKind, Phase, Program, RecvMode, ReduceOp, Schedule, StepId,
    VerifiedSchedule, FORMAT_VERSION,
};
use std::collections::HashMap;
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::time::Duration;

// ---------------------------------------------------------------------------------------------
// Machines

/// `p` compute nodes `N0..N{p-1}` on a ring; link `Li` joins `Ni` (end a) and `N{i+1 mod p}`.
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
            .map(|i| link(format!("L{i}"), i, (i + 1) % p))
            .collect(),
        reduce_gbps: None,
        switch_latency_us: 0.0,
    }
}

/// `p` compute nodes `N0..N{p-1}` and a switch `S` (node `p`); link `Li` joins `Ni` and `S`.
pub fn star_machine(p: usize) -> Machine {
    let mut nodes: Vec<Node> = (0..p)
        .map(|i| Node {
            name: format!("N{i}"),
            kind: NodeKind::Compute,
            capacity: None,
        })
        .collect();
    nodes.push(Node {
        name: "S".into(),
        kind: NodeKind::Switch,
        capacity: None,
    });
    Machine {
        name: format!("star-{p}"),
        nodes,
        links: (0..p).map(|i| link(format!("L{i}"), i, p)).collect(),
        reduce_gbps: None,
        switch_latency_us: 0.0,
    }
}

fn link(name: String, a: usize, b: usize) -> Link {
    Link {
        name,
        a: NodeId::new(a),
        b: NodeId::new(b),
        bandwidth_gbps: 100.0,
        latency_us: 1.0,
        lanes: 1,
    }
}

/// `p` compute nodes `N0..N{p-1}` around a reducing switch `NIC0` (node `p`, one segment
/// unit); link `Li` joins `Ni` and `NIC0`.
pub fn in_network_machine(p: usize) -> Machine {
    let mut machine = star_machine(p);
    machine.name = format!("in-network-{p}");
    machine.nodes[p].name = "NIC0".into();
    machine.nodes[p].capacity = Some(1);
    machine
}

/// An f32 sum allreduce on [`in_network_machine`]: in step 0 `N0` stores its vector in the
/// switch, in step 1 the others add theirs, in step 2 the switch sends the sum to every node.
pub fn in_network_allreduce(p: usize, name: &str, elements: u64) -> Phase {
    let machine = in_network_machine(p);
    let shape = Shape::new(Collective::AllReduce, ReduceOp::Sum, DType::F32, elements);
    let mut b = PhaseBuilder::new(&machine, name, shape, 1, 0, 3);
    b.phase.programs[p].steps = vec![Vec::new(); 3];
    for i in 0..p {
        let mode = if i == 0 {
            RecvMode::Store
        } else {
            RecvMode::Reduce
        };
        b.transfer(usize::from(i > 0), i, p, &[i], 0, 0, &[0], mode);
        b.transfer(2, p, i, &[i], 0, 0, &[0], RecvMode::Store);
    }
    b.build()
}

// ---------------------------------------------------------------------------------------------
// Phase builder

/// Builds a phase instruction by instruction.
pub struct PhaseBuilder {
    pub phase: Phase,
}

/// The shape of a phase: everything but the programs.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    pub collective: Collective,
    pub op: ReduceOp,
    pub dtype: DType,
    pub elements: u64,
}

impl Shape {
    pub fn new(collective: Collective, op: ReduceOp, dtype: DType, elements: u64) -> Self {
        Shape {
            collective,
            op,
            dtype,
            elements,
        }
    }
}

impl PhaseBuilder {
    /// A phase called `name` with `chunks` equal(ish) chunks, `scratch` scratch buffers and
    /// `steps` empty steps on every compute node of `machine`.
    pub fn new(
        machine: &Machine,
        name: &str,
        shape: Shape,
        chunks: usize,
        scratch: usize,
        steps: usize,
    ) -> Self {
        let n = chunks as u64;
        let mut buffers = vec![Buffer {
            name: "data".into(),
            kind: BufferKind::Data,
        }];
        for i in 0..scratch {
            buffers.push(Buffer {
                name: format!("scratch{i}"),
                kind: BufferKind::Scratch,
            });
        }
        PhaseBuilder {
            phase: Phase {
                name: name.into(),
                collective: shape.collective,
                op: shape.op,
                dtype: shape.dtype,
                elements: shape.elements,
                algorithm: "hand-built".into(),
                chunks: (0..n)
                    .map(|c| Chunk {
                        start: c * shape.elements / n,
                        end: (c + 1) * shape.elements / n,
                        owner: None,
                    })
                    .collect(),
                buffers,
                links: schedule_ir::LinkUse::Exclusive,
                steps: steps as u32,
                programs: machine
                    .nodes
                    .iter()
                    .map(|node| Program {
                        steps: match node.kind {
                            NodeKind::Compute => vec![Vec::new(); steps],
                            NodeKind::Switch => Vec::new(),
                        },
                    })
                    .collect(),
            },
        }
    }

    pub fn push(&mut self, node: usize, step: usize, instr: Instr) -> &mut Self {
        self.phase.programs[node].steps[step].push(instr);
        self
    }

    /// A transfer in `step` from `from` to `to`: a send of `chunks` of `src` over `route`
    /// (first link, then the rest as `via`), and the matching receive into `dst`.
    #[allow(clippy::too_many_arguments)]
    pub fn transfer(
        &mut self,
        step: usize,
        from: usize,
        to: usize,
        route: &[usize],
        src: usize,
        dst: usize,
        chunks: &[usize],
        mode: RecvMode,
    ) -> &mut Self {
        let chunks: Vec<ChunkId> = chunks.iter().map(|&c| ChunkId::new(c)).collect();
        let links: Vec<LinkId> = route.iter().map(|&l| LinkId::new(l)).collect();
        self.push(
            from,
            step,
            Instr::Send {
                link: links[0],
                via: links[1..].to_vec(),
                to: NodeId::new(to),
                buffer: BufferId::new(src),
                chunks: chunks.clone().into(),
            },
        );
        self.push(
            to,
            step,
            Instr::Recv {
                link: *links.last().unwrap(),
                from: NodeId::new(from),
                buffer: BufferId::new(dst),
                chunks: chunks.into(),
                mode,
            },
        )
    }

    /// A local reduce (or copy) of `chunks` from `src` into `dst` on `node` in `step`.
    pub fn local(
        &mut self,
        node: usize,
        step: usize,
        reduce: bool,
        src: usize,
        dst: usize,
        chunks: &[usize],
    ) -> &mut Self {
        let (src, dst) = (BufferId::new(src), BufferId::new(dst));
        let chunks = chunks.iter().map(|&c| ChunkId::new(c)).collect();
        let instr = if reduce {
            Instr::Reduce { src, dst, chunks }
        } else {
            Instr::Copy { src, dst, chunks }
        };
        self.push(node, step, instr)
    }

    /// Sets the owner of every chunk: `owner(c)`.
    pub fn owners(&mut self, owner: impl Fn(usize) -> usize) -> &mut Self {
        for (c, chunk) in self.phase.chunks.iter_mut().enumerate() {
            chunk.owner = Some(NodeId::new(owner(c)));
        }
        self
    }

    pub fn build(&mut self) -> Phase {
        self.phase.clone()
    }
}

/// A schedule of `phases` on `machine`.
pub fn build_schedule(machine: Machine, phases: Vec<Phase>) -> Schedule {
    Schedule {
        format_version: FORMAT_VERSION,
        machine,
        program: Vec::new(),
        phases,
    }
}

/// A verified schedule of one phase on `machine`.
pub fn verified_one(machine: Machine, phase: Phase) -> VerifiedSchedule {
    verified(build_schedule(machine, vec![phase]))
}

/// Verifies a schedule the test expects to be valid.
pub fn verified(schedule: Schedule) -> VerifiedSchedule {
    match schedule_ir::verify(schedule) {
        Ok(v) => v,
        Err(e) => panic!("hand-built schedule fails verification: {e:?}"),
    }
}

/// Verifies a schedule built to be wrong. `None` if the verifier rejects it (then the runtime
/// never sees it, which is the point); while the verifier is a placeholder, it accepts it and
/// the runtime's own checks must catch the problem.
pub fn verified_or_rejected(schedule: Schedule) -> Option<VerifiedSchedule> {
    match schedule_ir::verify(schedule) {
        Ok(v) => Some(v),
        Err(e) => {
            eprintln!("the verifier rejects the schedule: {:?}", e.errors.first());
            None
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Ring schedules

fn modp(x: isize, p: usize) -> usize {
    x.rem_euclid(p as isize) as usize
}

/// Adds a ring reduce-scatter (`p - 1` steps from `first_step`) over chunks
/// `offset..offset + p`, going in direction `dir` (+1: `Ni → N{i+1}` over `Li`; -1:
/// `Ni → N{i-1}` over `L{i-1}`). Afterwards node `i` holds chunk `offset + (i + dir) mod p`
/// fully reduced.
fn ring_reduce_scatter(
    b: &mut PhaseBuilder,
    p: usize,
    first_step: usize,
    offset: usize,
    dir: isize,
) {
    for s in 0..p - 1 {
        for i in 0..p {
            let to = modp(i as isize + dir, p);
            let link = if dir > 0 { i } else { to };
            let chunk = offset + modp(i as isize - dir * s as isize, p);
            b.transfer(
                first_step + s,
                i,
                to,
                &[link],
                0,
                0,
                &[chunk],
                RecvMode::Reduce,
            );
        }
    }
}

/// Adds a ring allgather (`p - 1` steps from `first_step`), the second half of
/// [`ring_reduce_scatter`].
fn ring_allgather(b: &mut PhaseBuilder, p: usize, first_step: usize, offset: usize, dir: isize) {
    for s in 0..p - 1 {
        for i in 0..p {
            let to = modp(i as isize + dir, p);
            let link = if dir > 0 { i } else { to };
            let chunk = offset + modp(i as isize + dir - dir * s as isize, p);
            b.transfer(
                first_step + s,
                i,
                to,
                &[link],
                0,
                0,
                &[chunk],
                RecvMode::Store,
            );
        }
    }
}

/// The classic ring allreduce on `ring_machine(p)`: `p` chunks, reduce-scatter with
/// `Recv(Reduce)` then allgather with `Recv(Store)`, `2(p-1)` steps.
pub fn ring_allreduce(p: usize, name: &str, op: ReduceOp, dtype: DType, elements: u64) -> Phase {
    let shape = Shape::new(Collective::AllReduce, op, dtype, elements);
    let mut b = PhaseBuilder::new(&ring_machine(p), name, shape, p, 0, 2 * (p - 1));
    ring_reduce_scatter(&mut b, p, 0, 0, 1);
    ring_allgather(&mut b, p, p - 1, 0, 1);
    b.build()
}

/// A two-directional ring allreduce: `2p` chunks, the first `p` go clockwise, the others
/// counter-clockwise, at the same time; `2(p-1)` steps.
pub fn bidirectional_ring_allreduce(
    p: usize,
    name: &str,
    op: ReduceOp,
    dtype: DType,
    elements: u64,
) -> Phase {
    let shape = Shape::new(Collective::AllReduce, op, dtype, elements);
    let mut b = PhaseBuilder::new(&ring_machine(p), name, shape, 2 * p, 0, 2 * (p - 1));
    ring_reduce_scatter(&mut b, p, 0, 0, 1);
    ring_reduce_scatter(&mut b, p, 0, p, -1);
    ring_allgather(&mut b, p, p - 1, 0, 1);
    ring_allgather(&mut b, p, p - 1, p, -1);
    b.build()
}

/// A pipelined ring allreduce using a scratch buffer (as pipelined halving-doubling does): two streams of `p`
/// chunks each. A hop stores the incoming chunk in scratch; the next step reduces it into the
/// data buffer with a local `Reduce` (reading the scratch as it was at the start of that step,
/// while the other stream's chunk lands in scratch); the step after forwards it. Stream A
/// moves on even steps, stream B on odd ones. Then an allgather moves both streams' chunks in
/// one two-chunk transfer per step. `3p - 2` steps.
pub fn pipelined_ring_allreduce(
    p: usize,
    name: &str,
    op: ReduceOp,
    dtype: DType,
    elements: u64,
) -> Phase {
    let shape = Shape::new(Collective::AllReduce, op, dtype, elements);
    let steps = 3 * p - 2;
    let mut b = PhaseBuilder::new(&ring_machine(p), name, shape, 2 * p, 1, steps);
    for (stream, offset) in [(0, 0), (1, p)] {
        for h in 0..p - 1 {
            let step = 2 * h + stream;
            for i in 0..p {
                let to = (i + 1) % p;
                let chunk = offset + modp(i as isize - h as isize, p);
                b.transfer(step, i, to, &[i], 0, 1, &[chunk], RecvMode::Store);
                b.local(to, step + 1, true, 1, 0, &[chunk]);
            }
        }
    }
    for s in 0..p - 1 {
        for i in 0..p {
            let c = modp(i as isize + 1 - s as isize, p);
            b.transfer(
                2 * p - 1 + s,
                i,
                (i + 1) % p,
                &[i],
                0,
                0,
                &[c, p + c],
                RecvMode::Store,
            );
        }
    }
    b.build()
}

/// An allreduce through the switch of `star_machine(p)`: in step `k` node `i` sends its input
/// to node `i + k + 1` over `Li` then `L{i+k+1}`, which reduces it into its data. Step 0 sends
/// the data buffer (still the input at the start of the step) and copies it to scratch; later
/// steps send the scratch copy. `p - 1` steps; each node combines in a different order.
pub fn star_allreduce(p: usize, name: &str, op: ReduceOp, dtype: DType, elements: u64) -> Phase {
    let shape = Shape::new(Collective::AllReduce, op, dtype, elements);
    let mut b = PhaseBuilder::new(&star_machine(p), name, shape, 1, 1, p - 1);
    for i in 0..p {
        b.local(i, 0, false, 0, 1, &[0]);
    }
    for k in 0..p - 1 {
        for i in 0..p {
            let to = (i + k + 1) % p;
            let src = if k == 0 { 0 } else { 1 };
            b.transfer(k, i, to, &[i, to], src, 0, &[0], RecvMode::Reduce);
        }
    }
    b.build()
}

/// An allreduce in two steps around the switch of `star_machine(p)`, in a phase whose links
/// are shared: node `j` owns chunks `2j` and `2j + 1`; in step 0 every node sends each of them
/// to its owner, who reduces it, and in step 1 every owner sends them back. Each chunk is its
/// own transfer, so two messages go between every two nodes over one link (of one lane) in a
/// step.
pub fn shared_star_allreduce(
    p: usize,
    name: &str,
    op: ReduceOp,
    dtype: DType,
    elements: u64,
) -> Phase {
    let shape = Shape::new(Collective::AllReduce, op, dtype, elements);
    let mut b = PhaseBuilder::new(&star_machine(p), name, shape, 2 * p, 0, 2);
    for from in 0..p {
        for to in (0..p).filter(|&to| to != from) {
            for c in [2 * to, 2 * to + 1] {
                b.transfer(0, from, to, &[from, to], 0, 0, &[c], RecvMode::Reduce);
                b.transfer(1, to, from, &[to, from], 0, 0, &[c], RecvMode::Store);
            }
        }
    }
    let mut phase = b.build();
    phase.links = LinkUse::Shared;
    phase
}

/// The first half of the ring allreduce as a reduce-scatter: chunk `c` is owned by node
/// `c - 1 mod p`.
pub fn ring_reduce_scatter_phase(
    p: usize,
    name: &str,
    op: ReduceOp,
    dtype: DType,
    elements: u64,
) -> Phase {
    let shape = Shape::new(Collective::ReduceScatter, op, dtype, elements);
    let mut b = PhaseBuilder::new(&ring_machine(p), name, shape, p, 0, p - 1);
    ring_reduce_scatter(&mut b, p, 0, 0, 1);
    b.owners(|c| modp(c as isize - 1, p)).build()
}

/// The second half of the ring allreduce as an allgather: node `c - 1 mod p` contributes
/// chunk `c`.
pub fn ring_allgather_phase(
    p: usize,
    name: &str,
    op: ReduceOp,
    dtype: DType,
    elements: u64,
) -> Phase {
    let shape = Shape::new(Collective::AllGather, op, dtype, elements);
    let mut b = PhaseBuilder::new(&ring_machine(p), name, shape, p, 0, p - 1);
    ring_allgather(&mut b, p, 0, 0, 1);
    b.owners(|c| modp(c as isize - 1, p)).build()
}

/// A chain broadcast from `N0` along the ring: in step `s`, `Ns` sends everything to `N{s+1}`.
pub fn chain_broadcast(p: usize, name: &str, dtype: DType, elements: u64) -> Phase {
    let root = NodeId::new(0);
    let shape = Shape::new(
        Collective::Broadcast { root },
        ReduceOp::Sum,
        dtype,
        elements,
    );
    let mut b = PhaseBuilder::new(&ring_machine(p), name, shape, 1, 0, p - 1);
    for s in 0..p - 1 {
        b.transfer(s, s, s + 1, &[s], 0, 0, &[0], RecvMode::Store);
    }
    b.build()
}

/// A chain reduce to `N0` backwards along the ring: in step `s`, `N{p-1-s}` sends its partial
/// result to `N{p-2-s}`, which reduces it.
pub fn chain_reduce(p: usize, name: &str, op: ReduceOp, dtype: DType, elements: u64) -> Phase {
    let root = NodeId::new(0);
    let shape = Shape::new(Collective::Reduce { root }, op, dtype, elements);
    let mut b = PhaseBuilder::new(&ring_machine(p), name, shape, 1, 0, p - 1);
    for s in 0..p - 1 {
        let from = p - 1 - s;
        b.transfer(s, from, from - 1, &[from - 1], 0, 0, &[0], RecvMode::Reduce);
    }
    b.build()
}

// ---------------------------------------------------------------------------------------------
// Random inputs

/// Random test values for each element type.
pub trait Random: Element {
    /// A value suited to `op` (products stay near 1 so floats do not overflow).
    fn random(rng: &mut ChaCha8Rng, op: ReduceOp) -> Self;
}

impl Random for f32 {
    fn random(rng: &mut ChaCha8Rng, op: ReduceOp) -> Self {
        match op {
            ReduceOp::Prod => rng.random_range(0.5..2.0),
            _ => rng.random_range(-1000.0..1000.0),
        }
    }
}

impl Random for f64 {
    fn random(rng: &mut ChaCha8Rng, op: ReduceOp) -> Self {
        match op {
            ReduceOp::Prod => rng.random_range(0.5..2.0),
            _ => rng.random_range(-1.0e6..1.0e6),
        }
    }
}

impl Random for i32 {
    fn random(rng: &mut ChaCha8Rng, _op: ReduceOp) -> Self {
        // Full range: sums and products overflow and must wrap.
        rng.random()
    }
}

impl Random for i64 {
    fn random(rng: &mut ChaCha8Rng, _op: ReduceOp) -> Self {
        rng.random()
    }
}

/// 16-bit floats: drawn as `f32` in a narrower range (sums over a few nodes stay far inside
/// `f16`'s 65504; products near 1), rounded to the type.
fn random_half(rng: &mut ChaCha8Rng, op: ReduceOp) -> f32 {
    match op {
        ReduceOp::Prod => rng.random_range(0.75..1.25),
        _ => rng.random_range(-100.0..100.0),
    }
}

impl Random for half::f16 {
    fn random(rng: &mut ChaCha8Rng, op: ReduceOp) -> Self {
        half::f16::from_f32(random_half(rng, op))
    }
}

impl Random for half::bf16 {
    fn random(rng: &mut ChaCha8Rng, op: ReduceOp) -> Self {
        half::bf16::from_f32(random_half(rng, op))
    }
}

/// `nodes` random vectors of `len` elements, from a fixed seed.
pub fn random_inputs<T: Random>(seed: u64, nodes: usize, len: usize, op: ReduceOp) -> Vec<Vec<T>> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..nodes)
        .map(|_| (0..len).map(|_| T::random(&mut rng, op)).collect())
        .collect()
}

/// Bit patterns, to compare float vectors bit for bit.
pub fn bits<T: Element>(v: &[Vec<T>]) -> Vec<Vec<u64>> {
    v.iter()
        .map(|x| x.iter().map(|e| e.to_bits_u64()).collect())
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Transports for the per-node API

/// One node's end of a set of channels joining every compute node: the shape of an MPI
/// transport, with threads for ranks. Like a wire, it carries bytes, so it works for every
/// element type.
pub struct ChannelTransport {
    peers: HashMap<NodeId, Sender<(MessageKey, Vec<u8>)>>,
    inbox: Receiver<(MessageKey, Vec<u8>)>,
    /// Messages of later steps that arrived early.
    early: Vec<(MessageKey, Vec<u8>)>,
    timeout: Duration,
}

/// A channel transport failure.
#[derive(Debug, thiserror::Error)]
pub enum ChannelError {
    #[error("no channel to {0}")]
    NoPeer(NodeId),
    #[error("{0} has gone away")]
    PeerGone(NodeId),
    #[error("timed out after {0:?} waiting for messages")]
    Timeout(Duration),
    #[error("every peer has gone away")]
    Disconnected,
    #[error("a message of {0} bytes is not a whole number of elements")]
    Ragged(usize),
}

/// One transport per node of `nodes`, all connected.
pub fn channel_transports(nodes: &[NodeId], timeout: Duration) -> Vec<(NodeId, ChannelTransport)> {
    let (senders, receivers): (Vec<_>, Vec<_>) = nodes.iter().map(|_| channel()).unzip();
    nodes
        .iter()
        .zip(receivers)
        .map(|(&me, inbox)| {
            let peers = nodes.iter().copied().zip(senders.iter().cloned()).collect();
            (
                me,
                ChannelTransport {
                    peers,
                    inbox,
                    early: Vec::new(),
                    timeout,
                },
            )
        })
        .collect()
}

impl<T: Element> Transport<T> for ChannelTransport {
    type Error = ChannelError;

    fn exchange(
        &mut self,
        step: StepId,
        outgoing: Vec<Message<T>>,
        expected: &[Expected],
    ) -> Result<Vec<Message<T>>, ChannelError> {
        for message in outgoing {
            let to = message.key.to;
            let peer = self.peers.get(&to).ok_or(ChannelError::NoPeer(to))?;
            let mut bytes = Vec::new();
            T::write_le_bytes(&message.data, &mut bytes);
            peer.send((message.key, bytes))
                .map_err(|_| ChannelError::PeerGone(to))?;
        }
        let (mut now, later): (Vec<_>, Vec<_>) =
            self.early.drain(..).partition(|(key, _)| key.step == step);
        self.early = later;
        while now.len() < expected.len() {
            match self.inbox.recv_timeout(self.timeout) {
                Ok(m) if m.0.step == step => now.push(m),
                Ok(m) => self.early.push(m),
                Err(RecvTimeoutError::Timeout) => return Err(ChannelError::Timeout(self.timeout)),
                Err(RecvTimeoutError::Disconnected) => return Err(ChannelError::Disconnected),
            }
        }
        now.into_iter()
            .map(|(key, bytes)| {
                let mut data = Vec::new();
                if T::read_le_bytes(&bytes, &mut data) {
                    Ok(Message { key, data })
                } else {
                    Err(ChannelError::Ragged(bytes.len()))
                }
            })
            .collect()
    }
}

/// What [`FakePeers`] does wrong, and in which step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    None,
    /// Leaves out the first expected message.
    Drop(usize),
    /// Delivers the first expected message one element short.
    Truncate(usize),
    /// Delivers an extra message nobody expects.
    Extra(usize),
    /// Delivers the first expected message twice.
    Duplicate(usize),
    /// Fails outright, as when a peer vanishes.
    Fail(usize),
}

/// Stands in for all of a node's peers: answers every expected message with zeros, except
/// where told to misbehave. Records what the node sent.
pub struct FakePeers {
    pub fault: Fault,
    pub sent: Vec<(StepId, NodeId, usize)>,
}

impl FakePeers {
    pub fn new(fault: Fault) -> Self {
        FakePeers {
            fault,
            sent: Vec::new(),
        }
    }
}

/// The failure [`Fault::Fail`] reports.
#[derive(Debug, thiserror::Error)]
#[error("peer vanished")]
pub struct Vanished;

impl<T: Element> Transport<T> for FakePeers {
    type Error = Vanished;

    fn exchange(
        &mut self,
        step: StepId,
        outgoing: Vec<Message<T>>,
        expected: &[Expected],
    ) -> Result<Vec<Message<T>>, Vanished> {
        self.sent
            .extend(outgoing.iter().map(|m| (step, m.key.to, m.data.len())));
        let mut incoming: Vec<Message<T>> = expected
            .iter()
            .map(|e| Message {
                key: e.key,
                data: vec![T::ZERO; e.len],
            })
            .collect();
        let k = step.index();
        match self.fault {
            Fault::Drop(s) if s == k => {
                incoming.remove(0);
            }
            Fault::Truncate(s) if s == k => {
                incoming[0].data.pop();
            }
            Fault::Extra(s) if s == k => {
                let mut extra = incoming[0].clone();
                extra.key.link = LinkId::new(1);
                extra.key.from = NodeId::new(1);
                incoming.push(extra);
            }
            Fault::Duplicate(s) if s == k => {
                let again = incoming[0].clone();
                incoming.push(again);
            }
            Fault::Fail(s) if s == k => return Err(Vanished),
            _ => {}
        }
        Ok(incoming)
    }
}
