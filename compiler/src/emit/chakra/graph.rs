//! One rank's trace: the schedule's instructions as Chakra nodes with the data dependencies
//! their reads and writes need.
//!
//! A BSP step reads the state at its start and writes at its end, in program order. A trace
//! has no steps: ASTRA-sim issues a node as soon as the nodes it depends on are done. So each
//! node depends on exactly what keeps the BSP meaning, location by location (a location is one
//! chunk of one buffer of the rank):
//!
//! - a node that reads a location depends on the last node that wrote it (read after write);
//! - a node that writes a location depends on the last node that wrote it (write after write,
//!   which keeps program order among a step's writes) and on every node that read it since
//!   (write after read, which keeps a send reading the value from before a receive of the same
//!   step overwrites it).
//!
//! Nothing else is ordered: a rank does not wait for a whole step, and ranks never wait for
//! each other except through their messages. A received value that is combined into a
//! location first lands in the receive's own staging space (the receive depends on nothing and
//! may be posted at once); a compute node then combines it into place.

use super::schema::{AttributeProto, Int64List, Node, NodeType, Value};
use super::ChakraError;
use schedule_ir::{BufferId, ChunkId, Instr, Machine, NodeId, NodeKind, Phase, RecvMode};
use std::collections::{BTreeMap, BTreeSet};

/// Where each rank's messages are tagged: the tag of every send and every receive, by rank,
/// step and instruction index.
pub type Tags = BTreeMap<(u32, u32, usize), i32>;

/// Ranks of the compute nodes, in node order; `None` for switches.
pub fn ranks(machine: &Machine) -> Vec<Option<u32>> {
    let mut next = 0u32;
    machine
        .nodes
        .iter()
        .map(|n| {
            (n.kind == NodeKind::Compute).then(|| {
                next += 1;
                next - 1
            })
        })
        .collect()
}

/// Pairs every send with its receive, step by step, and gives each pair a tag: the number of
/// messages the same sender sent the same receiver before it. So a tag is unique per ordered
/// pair of ranks, and the peers agree on it.
pub fn tags(phase: &Phase, rank: &[Option<u32>]) -> Result<Tags, ChakraError> {
    let internal = |detail: String| ChakraError::Internal {
        phase: phase.name.clone(),
        detail,
    };
    let mut tags = Tags::new();
    let mut count: BTreeMap<(u32, u32), i32> = BTreeMap::new();
    for step in 0..phase.steps as usize {
        let mut used: BTreeSet<(usize, usize)> = BTreeSet::new();
        for (s, program) in phase.programs.iter().enumerate() {
            let Some(instrs) = program.steps.get(step) else {
                continue;
            };
            for (i, instr) in instrs.iter().enumerate() {
                let Instr::Send { to, chunks, .. } = instr else {
                    continue;
                };
                let final_link = instr.final_link();
                let receiver = phase
                    .programs
                    .get(to.index())
                    .and_then(|p| p.steps.get(step))
                    .map_or(&[][..], Vec::as_slice);
                let found = receiver.iter().enumerate().position(|(j, r)| {
                    !used.contains(&(to.index(), j))
                        && matches!(r, Instr::Recv { link, from, chunks: rc, .. }
                            if Some(*link) == final_link && from.index() == s && rc == chunks)
                });
                let (Some(j), Some(Some(src)), Some(Some(dst))) =
                    (found, rank.get(s), rank.get(to.index()))
                else {
                    return Err(internal(format!(
                        "the send of node {s} in step {step} to node {} has no receive",
                        to.index()
                    )));
                };
                used.insert((to.index(), j));
                let n = count.entry((*src, *dst)).or_insert(0);
                let tag = *n;
                *n = n
                    .checked_add(1)
                    .ok_or_else(|| ChakraError::TooManyMessages {
                        phase: phase.name.clone(),
                        src: *src,
                        dst: *dst,
                    })?;
                tags.insert((*src, step as u32, i), tag);
                tags.insert((*dst, step as u32, j), tag);
            }
        }
    }
    Ok(tags)
}

/// A location: one chunk of one buffer, as an index `buffer · chunks + chunk`.
type Loc = usize;

/// A node of one step before its final id is known.
struct Pending {
    node: Node,
    reads: Vec<Loc>,
    writes: Vec<Loc>,
    /// Pending nodes of the same step it depends on (a combine on its staged receive).
    local: Vec<usize>,
}

/// What one rank's trace is built from.
pub struct Rank<'a> {
    /// The machine.
    pub machine: &'a Machine,
    /// The phase, chunked for the size exported.
    pub phase: &'a Phase,
    /// The compute node.
    pub node: NodeId,
    /// Ranks by node.
    pub ranks: &'a [Option<u32>],
    /// Message tags.
    pub tags: &'a Tags,
}

/// The nodes of one rank's trace, ids from 0 in an order where every dependency comes first.
pub fn build(r: &Rank<'_>) -> Result<Vec<Node>, ChakraError> {
    let phase = r.phase;
    let me = r.ranks.get(r.node.index()).copied().flatten().unwrap_or(0);
    let width = phase.chunks.len();
    let locs = phase.buffers.len() * width;
    let mut last_writer: Vec<Option<u64>> = vec![None; locs];
    let mut readers: Vec<Vec<u64>> = vec![Vec::new(); locs];
    let mut out: Vec<Node> = Vec::new();
    let Some(program) = phase.programs.get(r.node.index()) else {
        return Ok(out);
    };
    for (step, instrs) in program.steps.iter().enumerate() {
        let mut pending = Vec::new();
        for (i, instr) in instrs.iter().enumerate() {
            lower(r, me, step as u32, i, instr, &mut pending)?;
        }
        let order = order(&pending).ok_or_else(|| ChakraError::Unorderable {
            phase: phase.name.clone(),
            step: step as u32,
            node: r.machine.node_name(r.node),
        })?;
        let base = out.len() as u64;
        let mut id_of = vec![0u64; pending.len()];
        for (k, &p) in order.iter().enumerate() {
            id_of[p] = base + k as u64;
        }
        // Dependencies on earlier steps and within the step, as the module doc says.
        // Only the locations the step touches: a step is small, the rank's buffers are not.
        let mut step_writer: BTreeMap<Loc, u64> = BTreeMap::new();
        let mut step_readers: BTreeMap<Loc, Vec<u64>> = BTreeMap::new();
        for (p, item) in pending.iter().enumerate() {
            for &l in &item.reads {
                step_readers.entry(l).or_default().push(id_of[p]);
            }
        }
        let mut deps: Vec<Vec<u64>> = vec![Vec::new(); pending.len()];
        for (p, item) in pending.iter().enumerate() {
            let d = &mut deps[p];
            d.extend(item.local.iter().map(|&q| id_of[q]));
            for &l in &item.reads {
                d.extend(last_writer[l]);
            }
            for &l in &item.writes {
                match step_writer.get(&l) {
                    Some(&w) => d.push(w),
                    None => {
                        d.extend(last_writer[l]);
                        d.extend(readers[l].iter().copied());
                    }
                }
                d.extend(step_readers.get(&l).into_iter().flatten().copied());
                step_writer.insert(l, id_of[p]);
            }
            d.retain(|&x| x != id_of[p]);
            d.sort_unstable();
            d.dedup();
        }
        for (&l, &w) in &step_writer {
            last_writer[l] = Some(w);
            readers[l].clear();
        }
        for (l, mut read) in step_readers {
            if !step_writer.contains_key(&l) {
                readers[l].append(&mut read);
            }
        }
        let staged: Vec<Option<u64>> = pending
            .iter()
            .map(|p| p.local.first().map(|&q| id_of[q]))
            .collect();
        let mut slots: Vec<Option<Node>> = pending.into_iter().map(|p| Some(p.node)).collect();
        for &p in &order {
            if let Some(mut node) = slots[p].take() {
                node.id = id_of[p];
                // A combine names the receive whose staged data it adds in.
                if let Some(recv) = staged[p] {
                    node.attr.push(attr_i64("topoc_staged", recv));
                }
                node.data_deps = std::mem::take(&mut deps[p]);
                out.push(node);
            }
        }
    }
    Ok(out)
}

/// An order of a step's nodes in which every node comes after those it depends on within the
/// step (Kahn's algorithm, lowest program position first, so the order is fixed); `None` when
/// the step's local copies and reductions read and overwrite each other in a cycle.
fn order(pending: &[Pending]) -> Option<Vec<usize>> {
    let n = pending.len();
    let mut after: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut writer: BTreeMap<Loc, usize> = BTreeMap::new();
    let mut readers: BTreeMap<Loc, Vec<usize>> = BTreeMap::new();
    for (p, item) in pending.iter().enumerate() {
        for &l in &item.reads {
            readers.entry(l).or_default().push(p);
        }
    }
    for (p, item) in pending.iter().enumerate() {
        after[p].extend(item.local.iter().copied());
        for &l in &item.writes {
            after[p].extend(writer.get(&l).copied());
            let read = readers.get(&l).into_iter().flatten().copied();
            after[p].extend(read.filter(|&q| q != p));
            writer.insert(l, p);
        }
    }
    let mut waiting: Vec<usize> = after.iter().map(Vec::len).collect();
    let mut users: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (p, a) in after.iter().enumerate() {
        for &q in a {
            users[q].push(p);
        }
    }
    let mut ready: BTreeSet<usize> = (0..n).filter(|&p| waiting[p] == 0).collect();
    let mut order = Vec::with_capacity(n);
    while let Some(p) = ready.pop_first() {
        order.push(p);
        for &u in &users[p] {
            waiting[u] -= 1;
            if waiting[u] == 0 {
                ready.insert(u);
            }
        }
    }
    (order.len() == n).then_some(order)
}

fn attr_i32(name: &str, v: u32) -> AttributeProto {
    AttributeProto::new(name, Value::Int32Val(i32::try_from(v).unwrap_or(i32::MAX)))
}

fn attr_i64(name: &str, v: u64) -> AttributeProto {
    AttributeProto::new(name, Value::Int64Val(i64::try_from(v).unwrap_or(i64::MAX)))
}

/// The attributes that say, for a replay, what a node does to the rank's buffers. ASTRA-sim
/// keeps attributes it does not know and ignores them.
fn topoc_attrs(op: &str, step: u32, buffer: BufferId, chunks: &[ChunkId]) -> Vec<AttributeProto> {
    vec![
        AttributeProto::new("is_cpu_op", Value::BoolVal(false)),
        AttributeProto::new("topoc_op", Value::StringVal(op.to_string())),
        attr_i64("topoc_step", u64::from(step)),
        attr_i64("topoc_buffer", u64::from(buffer.0)),
        AttributeProto::new(
            "topoc_chunks",
            Value::Int64List(Int64List {
                values: chunks.iter().map(|c| i64::from(c.0)).collect(),
            }),
        ),
    ]
}

/// The locations of `chunks` in `buffer`.
fn locs(width: usize, buffer: BufferId, chunks: &[ChunkId]) -> Vec<Loc> {
    chunks
        .iter()
        .map(|c| buffer.index() * width + c.index())
        .collect()
}

fn node(name: String, ty: NodeType, attr: Vec<AttributeProto>) -> Node {
    Node {
        name,
        r#type: ty as i32,
        attr,
        ..Node::default()
    }
}

/// A compute node's time, in whole microseconds, at the machine's reduction rate.
fn reduce_micros(machine: &Machine, bytes: u64) -> u64 {
    machine.reduce_gbps.map_or(0, |g| {
        let us = bytes as f64 * 8.0 / (g * 1e3);
        if us.is_finite() && us > 0.0 {
            us.round() as u64
        } else {
            0
        }
    })
}

/// One instruction being lowered, with what its nodes share.
struct Op<'a, 'r> {
    r: &'a Rank<'r>,
    /// The rank.
    me: u32,
    step: u32,
    /// Its position in the step's program.
    i: usize,
    bytes: u64,
    elements: u64,
}

impl Op<'_, '_> {
    fn tag(&self) -> Result<i32, ChakraError> {
        let (me, step, i) = (self.me, self.step, self.i);
        self.r
            .tags
            .get(&(me, step, i))
            .copied()
            .ok_or_else(|| ChakraError::Internal {
                phase: self.r.phase.name.clone(),
                detail: format!("rank {me}'s message {i} of step {step} has no tag"),
            })
    }

    fn peer(&self, n: NodeId) -> u32 {
        self.r.ranks.get(n.index()).copied().flatten().unwrap_or(0)
    }

    /// The attributes ASTRA-sim reads from a send or receive, in the members Chakra's feeder
    /// reads them from.
    fn comm(&self, src: u32, dst: u32, tag: i32) -> Vec<AttributeProto> {
        vec![
            attr_i32("comm_src", src),
            attr_i32("comm_dst", dst),
            attr_i64("comm_size", self.bytes),
            AttributeProto::new("comm_tag", Value::Int32Val(tag)),
        ]
    }

    /// A compute node's size attributes.
    fn compute(&self, attr: &mut Vec<AttributeProto>) {
        attr.push(attr_i64("num_ops", self.elements));
        attr.push(AttributeProto::new(
            "tensor_size",
            Value::Uint64Val(self.bytes),
        ));
    }

    fn locs(&self, buffer: BufferId, chunks: &[ChunkId]) -> Vec<Loc> {
        locs(self.r.phase.chunks.len(), buffer, chunks)
    }
}

/// The pending nodes of one instruction.
fn lower(
    r: &Rank<'_>,
    me: u32,
    step: u32,
    i: usize,
    instr: &Instr,
    pending: &mut Vec<Pending>,
) -> Result<(), ChakraError> {
    let phase = r.phase;
    let op = Op {
        r,
        me,
        step,
        i,
        bytes: instr.chunks().iter().map(|c| phase.chunk_bytes(c)).sum(),
        elements: instr
            .chunks()
            .iter()
            .filter_map(|c| phase.chunks.get(c.index()))
            .map(|c| c.len())
            .sum(),
    };
    let bytes = op.bytes;
    match instr {
        Instr::Send {
            to, buffer, chunks, ..
        } => {
            let dst = op.peer(*to);
            let mut attr = op.comm(me, dst, op.tag()?);
            attr.extend(topoc_attrs("send", step, *buffer, &chunks.to_vec()));
            pending.push(Pending {
                node: node(
                    format!(
                        "step {step}: send {bytes} B to rank {dst} ({})",
                        r.machine.node_name(*to)
                    ),
                    NodeType::CommSendNode,
                    attr,
                ),
                reads: op.locs(*buffer, &chunks.to_vec()),
                writes: Vec::new(),
                local: Vec::new(),
            });
        }
        Instr::Recv {
            from,
            buffer,
            chunks,
            mode,
            ..
        } => lower_recv(&op, *from, *buffer, &chunks.to_vec(), *mode, pending)?,
        Instr::Reduce { src, dst, chunks } | Instr::Copy { src, dst, chunks } => {
            let reduce = matches!(instr, Instr::Reduce { .. });
            let what = if reduce { "reduce" } else { "copy" };
            let mut attr = topoc_attrs(what, step, *dst, &chunks.to_vec());
            attr.push(attr_i64("topoc_src_buffer", u64::from(src.0)));
            op.compute(&mut attr);
            let mut n = node(
                format!("step {step}: {what} {bytes} B locally"),
                NodeType::CompNode,
                attr,
            );
            if reduce {
                n.duration_micros = reduce_micros(r.machine, bytes);
            }
            pending.push(Pending {
                node: n,
                reads: op.locs(*src, &chunks.to_vec()),
                writes: op.locs(*dst, &chunks.to_vec()),
                local: Vec::new(),
            });
        }
        Instr::Scale {
            buffer,
            chunks,
            divisor,
        } => {
            let mut attr = topoc_attrs("scale", step, *buffer, &chunks.to_vec());
            attr.push(attr_i64("topoc_divisor", u64::from(*divisor)));
            op.compute(&mut attr);
            pending.push(Pending {
                node: node(
                    format!("step {step}: divide {bytes} B by {divisor}"),
                    NodeType::CompNode,
                    attr,
                ),
                reads: Vec::new(),
                writes: op.locs(*buffer, &chunks.to_vec()),
                local: Vec::new(),
            });
        }
    }
    Ok(())
}

/// A receive: one node that stores, or a staged receive and the compute node that combines it.
fn lower_recv(
    op: &Op<'_, '_>,
    from: NodeId,
    buffer: BufferId,
    chunks: &[ChunkId],
    mode: RecvMode,
    pending: &mut Vec<Pending>,
) -> Result<(), ChakraError> {
    let (step, bytes) = (op.step, op.bytes);
    let src = op.peer(from);
    let staged = mode == RecvMode::Reduce;
    let mut attr = op.comm(src, op.me, op.tag()?);
    let what = if staged { "recv-staged" } else { "recv" };
    attr.extend(topoc_attrs(what, step, buffer, chunks));
    let name = format!(
        "step {step}: receive {bytes} B from rank {src} ({})",
        op.r.machine.node_name(from)
    );
    let at = op.locs(buffer, chunks);
    let recv = pending.len();
    pending.push(Pending {
        node: node(name, NodeType::CommRecvNode, attr),
        reads: Vec::new(),
        writes: if staged { Vec::new() } else { at.clone() },
        local: Vec::new(),
    });
    if staged {
        let mut attr = topoc_attrs("combine-received", step, buffer, chunks);
        op.compute(&mut attr);
        let mut n = node(
            format!("step {step}: combine {bytes} B received from rank {src}"),
            NodeType::CompNode,
            attr,
        );
        n.duration_micros = reduce_micros(op.r.machine, bytes);
        pending.push(Pending {
            node: n,
            reads: Vec::new(),
            writes: at,
            local: vec![recv],
        });
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use schedule_ir::{
        Buffer, BufferKind, Chunk, Collective, DType, Link, LinkId, Node as IrNode, Program,
        ReduceOp,
    };

    /// Two nodes that swap chunk 0 in one step and then combine what they received into
    /// chunk 1: the receive that overwrites chunk 0 must wait for the send that reads it.
    fn swap() -> (Machine, Phase) {
        let machine = Machine {
            name: "pair".into(),
            nodes: ["a", "b"]
                .iter()
                .map(|n| IrNode {
                    name: n.to_string(),
                    kind: NodeKind::Compute,
                    capacity: None,
                })
                .collect(),
            links: vec![Link {
                name: "L0".into(),
                a: NodeId(0),
                b: NodeId(1),
                bandwidth_gbps: 100.0,
                latency_us: 1.0,
                lanes: 2,
            }],
            reduce_gbps: Some(8.0),
            switch_latency_us: 0.0,
        };
        let program = |peer: u32| Program {
            steps: vec![
                vec![
                    Instr::Recv {
                        link: LinkId(0),
                        from: NodeId(peer),
                        buffer: BufferId(0),
                        chunks: vec![ChunkId(0)].into(),
                        mode: RecvMode::Store,
                    },
                    Instr::Send {
                        link: LinkId(0),
                        via: vec![],
                        to: NodeId(peer),
                        buffer: BufferId(0),
                        chunks: vec![ChunkId(0)].into(),
                    },
                ],
                vec![
                    Instr::Send {
                        link: LinkId(0),
                        via: vec![],
                        to: NodeId(peer),
                        buffer: BufferId(0),
                        chunks: vec![ChunkId(1)].into(),
                    },
                    Instr::Recv {
                        link: LinkId(0),
                        from: NodeId(peer),
                        buffer: BufferId(0),
                        chunks: vec![ChunkId(1)].into(),
                        mode: RecvMode::Reduce,
                    },
                ],
            ],
        };
        let phase = Phase {
            name: "p".into(),
            collective: Collective::AllGather,
            op: ReduceOp::Sum,
            dtype: DType::F32,
            elements: 2000,
            algorithm: "hand".into(),
            chunks: vec![
                Chunk {
                    start: 0,
                    end: 1000,
                    owner: None,
                },
                Chunk {
                    start: 1000,
                    end: 2000,
                    owner: None,
                },
            ],
            buffers: vec![Buffer {
                name: "data".into(),
                kind: BufferKind::Data,
            }],
            links: schedule_ir::LinkUse::Exclusive,
            steps: 2,
            programs: vec![program(1), program(0)],
        };
        (machine, phase)
    }

    #[test]
    fn a_receive_waits_for_the_send_that_reads_what_it_overwrites() {
        let (machine, phase) = swap();
        let ranks = ranks(&machine);
        let tags = tags(&phase, &ranks).unwrap();
        let nodes = build(&Rank {
            machine: &machine,
            phase: &phase,
            node: NodeId(0),
            ranks: &ranks,
            tags: &tags,
        })
        .unwrap();
        let summary: Vec<(u64, i32, Vec<u64>, u64)> = nodes
            .iter()
            .map(|n| (n.id, n.r#type, n.data_deps.clone(), n.duration_micros))
            .collect();
        let (send, recv, comp) = (
            NodeType::CommSendNode as i32,
            NodeType::CommRecvNode as i32,
            NodeType::CompNode as i32,
        );
        assert_eq!(
            summary,
            vec![
                // Step 0: the send first, the receive of the same chunk after it.
                (0, send, vec![], 0),
                (1, recv, vec![0], 0),
                // Step 1: chunk 1 is sent, its peer's copy received into staging at once,
                // and combined after the send read the old value: 4000 B at 8 Gb/s = 4 µs.
                (2, send, vec![], 0),
                (3, recv, vec![], 0),
                (4, comp, vec![2, 3], 4),
            ]
        );
        // Tags count per ordered pair: both messages of rank 0 to rank 1.
        assert_eq!(tags.get(&(0, 0, 1)), Some(&0));
        assert_eq!(tags.get(&(0, 1, 0)), Some(&1));
    }
}
