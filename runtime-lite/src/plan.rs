//! Lowering one phase of a schedule into per-node execution plans: ids resolved to element
//! ranges, messages keyed, and every index checked once so execution can index freely.

use crate::error::Error;
use crate::transport::{Expected, MessageKey};
use schedule_ir::{
    BufferId, ChunkId, ChunkIds, Instr, LinkId, Machine, NodeId, NodeKind, Phase, RecvMode,
    ReduceOp, Schedule, StepId,
};
use std::ops::Range;

/// What every node of a phase shares: its name, op, sizes, and the user-facing names used in
/// error messages.
#[derive(Debug)]
pub(crate) struct PhaseInfo {
    pub name: String,
    pub op: ReduceOp,
    /// The vector's length; every buffer has exactly this many elements.
    pub elements: usize,
    /// Number of buffers, data buffer included.
    pub buffers: usize,
    pub steps: u32,
    node_names: Vec<String>,
    link_names: Vec<String>,
    /// The compute nodes, in id order: the order of the in-process driver's buffers.
    pub compute: Vec<NodeId>,
    /// The devices (switches with a capacity, which run programs), in id order.
    pub devices: Vec<NodeId>,
}

impl PhaseInfo {
    /// The user-facing name of `node` (its raw id if out of range).
    pub fn node_name(&self, node: NodeId) -> String {
        self.node_names
            .get(node.index())
            .cloned()
            .unwrap_or_else(|| node.to_string())
    }

    /// The user-facing name of `link` (its raw id if out of range).
    pub fn link_name(&self, link: LinkId) -> String {
        self.link_names
            .get(link.index())
            .cloned()
            .unwrap_or_else(|| link.to_string())
    }
}

/// One node's plan for a whole phase.
#[derive(Debug)]
pub(crate) struct NodePlan {
    pub node: NodeId,
    pub steps: Vec<StepPlan>,
    /// The most data vectors one step needs at once (sends plus snapshots): how many spare
    /// vectors are worth keeping between steps.
    pub max_vectors: usize,
}

/// One node's plan for one step.
#[derive(Debug, Default)]
pub(crate) struct StepPlan {
    /// Sends, in program order.
    pub sends: Vec<SendOp>,
    /// Messages expected, in program order of the receives.
    pub expected: Vec<Expected>,
    /// `(key, index into expected)`, sorted by key, for matching incoming messages.
    pub lookup: Vec<(MessageKey, usize)>,
    /// Writes (receives, local reduce/copy and scales), in program order.
    pub writes: Vec<WriteOp>,
    /// Local operations whose source must be copied at the start of the step because an
    /// earlier write of the same step changes it: `(buffer, ranges)`, indexed by
    /// [`WriteOp::Local::snapshot`].
    pub snapshots: Vec<(usize, Vec<Range<usize>>)>,
}

/// A send: copy `ranges` of `buffer` (start-of-step state) into a message.
#[derive(Debug)]
pub(crate) struct SendOp {
    pub key: MessageKey,
    pub buffer: usize,
    pub ranges: Vec<Range<usize>>,
    pub len: usize,
}

/// A write applied at the end of a step.
#[derive(Debug)]
pub(crate) enum WriteOp {
    /// Write the message expected in `slot` into `ranges` of `buffer`.
    Recv {
        slot: usize,
        buffer: usize,
        ranges: Vec<Range<usize>>,
        mode: RecvMode,
    },
    /// Combine (`reduce`) or copy `ranges` of `src` into the same ranges of `dst`. The source
    /// is read from snapshot `snapshot` if set, else directly (nothing earlier in the step
    /// wrote it, so it still holds its start-of-step state).
    Local {
        reduce: bool,
        src: usize,
        dst: usize,
        ranges: Vec<Range<usize>>,
        snapshot: Option<usize>,
    },
    /// Divide `ranges` of `buffer` by `divisor` (at least 1), in place.
    Scale {
        buffer: usize,
        ranges: Vec<Range<usize>>,
        divisor: u32,
    },
}

impl WriteOp {
    fn target(&self) -> (usize, &[Range<usize>]) {
        match self {
            WriteOp::Recv { buffer, ranges, .. } => (*buffer, ranges),
            WriteOp::Local { dst, ranges, .. } => (*dst, ranges),
            WriteOp::Scale { buffer, ranges, .. } => (*buffer, ranges),
        }
    }
}

/// The phase called `name`, or the error listing the phases there are (or, when `name` is a
/// banded exchange, the error saying that its phase depends on the buffer's size).
pub(crate) fn find_phase<'a>(schedule: &'a Schedule, name: &str) -> Result<&'a Phase, Error> {
    if let Some(bands) = schedule.bands(name) {
        return Err(Error::Banded {
            phase: name.to_string(),
            bands: crate::bands::describe(bands),
        });
    }
    schedule.phase(name).ok_or_else(|| Error::UnknownPhase {
        phase: name.to_string(),
        available: if schedule.phases.is_empty() {
            "none".to_string()
        } else {
            schedule
                .phases
                .iter()
                .map(|p| format!("`{}`", p.name))
                .collect::<Vec<_>>()
                .join(", ")
        },
    })
}

/// Checks the phase-wide facts every node plan relies on and gathers the shared information.
pub(crate) fn phase_info(machine: &Machine, phase: &Phase) -> Result<PhaseInfo, Error> {
    let malformed = |location: &str, detail: String| Error::Malformed {
        phase: phase.name.clone(),
        location: location.to_string(),
        detail,
    };
    let elements = usize::try_from(phase.elements).map_err(|_| Error::TooLarge {
        phase: phase.name.clone(),
        elements: phase.elements,
    })?;
    if phase.buffers.is_empty() {
        return Err(malformed(
            "its buffer list",
            "the phase declares no buffers".into(),
        ));
    }
    if phase.programs.len() != machine.nodes.len() {
        return Err(malformed(
            "its program list",
            format!(
                "the phase has {} programs but the machine has {} nodes",
                phase.programs.len(),
                machine.nodes.len()
            ),
        ));
    }
    for (i, chunk) in phase.chunks.iter().enumerate() {
        if chunk.start > chunk.end || chunk.end > phase.elements {
            return Err(malformed(
                &ChunkId::new(i).to_string(),
                format!(
                    "elements {}..{} are not a range inside the vector of {} elements",
                    chunk.start, chunk.end, phase.elements
                ),
            ));
        }
    }
    for (node, program) in machine.nodes.iter().zip(&phase.programs) {
        let where_ = format!("node {}", node.name);
        match node.kind {
            _ if node.runs_program()
                && !(node.kind == NodeKind::Switch && program.steps.is_empty())
                && program.steps.len() != phase.steps as usize =>
            {
                return Err(malformed(
                    &where_,
                    format!(
                        "the program has {} steps but the phase has {}",
                        program.steps.len(),
                        phase.steps
                    ),
                ));
            }
            NodeKind::Switch
                if node.capacity.is_none() && program.steps.iter().any(|s| !s.is_empty()) =>
            {
                return Err(malformed(
                    &where_,
                    "the node is a switch but its program has instructions".into(),
                ));
            }
            _ => {}
        }
    }
    Ok(PhaseInfo {
        name: phase.name.clone(),
        op: phase.op,
        elements,
        buffers: phase.buffers.len(),
        steps: phase.steps,
        node_names: machine.nodes.iter().map(|n| n.name.clone()).collect(),
        link_names: machine.links.iter().map(|l| l.name.clone()).collect(),
        compute: machine.compute_nodes().collect(),
        devices: machine
            .nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| n.kind == NodeKind::Switch && n.capacity.is_some())
            .map(|(i, _)| NodeId::new(i))
            .collect(),
    })
}

/// Lowers the program of compute node `node` (already checked to be one) into a plan.
pub(crate) fn plan_node(
    info: &PhaseInfo,
    machine: &Machine,
    phase: &Phase,
    node: NodeId,
) -> Result<NodePlan, Error> {
    let program = phase
        .programs
        .get(node.index())
        .ok_or_else(|| Error::UnknownNode {
            node: node.to_string(),
        })?;
    let mut steps = Vec::with_capacity(program.steps.len());
    let mut max_vectors = 0;
    for (k, instrs) in program.steps.iter().enumerate() {
        let step = StepId::new(k);
        let mut ctx = Ctx {
            info,
            machine,
            phase,
            node,
            step,
            index: 0,
        };
        let mut plan = StepPlan::default();
        for (index, instr) in instrs.iter().enumerate() {
            ctx.index = index;
            ctx.lower(instr, &mut plan)?;
        }
        plan.lookup = plan
            .expected
            .iter()
            .enumerate()
            .map(|(i, e)| (e.key, i))
            .collect();
        plan.lookup.sort_unstable();
        max_vectors = max_vectors.max(plan.sends.len() + plan.snapshots.len());
        steps.push(plan);
    }
    Ok(NodePlan {
        node,
        steps,
        max_vectors,
    })
}

/// Where in the schedule an instruction is being lowered, for error messages.
struct Ctx<'a> {
    info: &'a PhaseInfo,
    machine: &'a Machine,
    phase: &'a Phase,
    node: NodeId,
    step: StepId,
    index: usize,
}

impl Ctx<'_> {
    fn error(&self, detail: String) -> Error {
        Error::Malformed {
            phase: self.info.name.clone(),
            location: format!(
                "node {}, {}, instruction {}",
                self.info.node_name(self.node),
                self.step,
                self.index
            ),
            detail,
        }
    }

    fn buffer(&self, id: BufferId) -> Result<usize, Error> {
        if id.index() < self.info.buffers {
            Ok(id.index())
        } else {
            Err(self.error(format!(
                "{id} does not exist (the phase has {} buffers)",
                self.info.buffers
            )))
        }
    }

    fn link(&self, id: LinkId) -> Result<LinkId, Error> {
        if id.index() < self.machine.links.len() {
            Ok(id)
        } else {
            Err(self.error(format!("{id} does not exist")))
        }
    }

    fn peer(&self, id: NodeId) -> Result<NodeId, Error> {
        match self.machine.nodes.get(id.index()) {
            Some(n) if n.runs_program() => Ok(id),
            Some(n) => Err(self.error(format!(
                "the peer {} is a switch; transfers go between compute nodes and devices",
                n.name
            ))),
            None => Err(self.error(format!("the peer {id} does not exist"))),
        }
    }

    /// The element ranges of `chunks`, adjacent ranges merged, empty ones dropped, and the
    /// total number of elements.
    fn ranges(&self, chunks: &ChunkIds) -> Result<(Vec<Range<usize>>, usize), Error> {
        if chunks.is_empty() {
            return Err(self.error("the chunk list is empty".into()));
        }
        let mut ranges: Vec<Range<usize>> = Vec::with_capacity(chunks.len());
        let mut total = 0usize;
        for c in chunks {
            let chunk = self
                .phase
                .chunks
                .get(c.index())
                .ok_or_else(|| self.error(format!("{c} does not exist")))?;
            // Bounds were checked against `elements`, which fits in usize.
            let (start, end) = match (usize::try_from(chunk.start), usize::try_from(chunk.end)) {
                (Ok(s), Ok(e)) if s <= e && e <= self.info.elements => (s, e),
                _ => return Err(self.error(format!("{c} lies outside the vector"))),
            };
            total += end - start;
            if start == end {
                continue;
            }
            match ranges.last_mut() {
                Some(last) if last.end == start => last.end = end,
                _ => ranges.push(start..end),
            }
        }
        Ok((ranges, total))
    }

    fn lower(&self, instr: &Instr, plan: &mut StepPlan) -> Result<(), Error> {
        match instr {
            Instr::Send {
                link,
                via,
                to,
                buffer,
                chunks,
            } => {
                self.link(*link)?;
                for l in via {
                    self.link(*l)?;
                }
                let key = MessageKey {
                    step: self.step,
                    link: via.last().copied().unwrap_or(*link),
                    from: self.node,
                    to: self.peer(*to)?,
                    first_chunk: chunks.first().unwrap_or(ChunkId(0)),
                };
                let buffer = self.buffer(*buffer)?;
                let (ranges, len) = self.ranges(chunks)?;
                if plan.sends.iter().any(|s| s.key == key) {
                    return Err(self.error(format!(
                        "a second transfer to {} over {} starting at {} in the same step",
                        self.info.node_name(key.to),
                        self.info.link_name(key.link),
                        key.first_chunk
                    )));
                }
                plan.sends.push(SendOp {
                    key,
                    buffer,
                    ranges,
                    len,
                });
            }
            Instr::Recv {
                link,
                from,
                buffer,
                chunks,
                mode,
            } => {
                let key = MessageKey {
                    step: self.step,
                    link: self.link(*link)?,
                    from: self.peer(*from)?,
                    to: self.node,
                    first_chunk: chunks.first().unwrap_or(ChunkId(0)),
                };
                let buffer = self.buffer(*buffer)?;
                let (ranges, len) = self.ranges(chunks)?;
                if plan.expected.iter().any(|e| e.key == key) {
                    return Err(self.error(format!(
                        "a second receive from {} over {} starting at {} in the same step",
                        self.info.node_name(key.from),
                        self.info.link_name(key.link),
                        key.first_chunk
                    )));
                }
                plan.writes.push(WriteOp::Recv {
                    slot: plan.expected.len(),
                    buffer,
                    ranges,
                    mode: *mode,
                });
                plan.expected.push(Expected { key, len });
            }
            Instr::Reduce { src, dst, chunks } | Instr::Copy { src, dst, chunks } => {
                let reduce = matches!(instr, Instr::Reduce { .. });
                let src = self.buffer(*src)?;
                let dst = self.buffer(*dst)?;
                let (ranges, _) = self.ranges(chunks)?;
                // The source must be read as it was at the start of the step: snapshot it if
                // an earlier write of this step (or this very write) touches it.
                let dirty = src == dst
                    || plan.writes.iter().any(|w| {
                        let (b, written) = w.target();
                        b == src && overlaps(written, &ranges)
                    });
                let snapshot = if dirty {
                    plan.snapshots.push((src, ranges.clone()));
                    Some(plan.snapshots.len() - 1)
                } else {
                    None
                };
                plan.writes.push(WriteOp::Local {
                    reduce,
                    src,
                    dst,
                    ranges,
                    snapshot,
                });
            }
            Instr::Scale {
                buffer,
                chunks,
                divisor,
            } => {
                if self.info.op != ReduceOp::Mean {
                    return Err(self.error(format!(
                        "a scale in a phase whose op is {}; only a mean is divided",
                        self.info.op
                    )));
                }
                if *divisor == 0 {
                    return Err(self.error("a scale divides by 0".into()));
                }
                let buffer = self.buffer(*buffer)?;
                let (ranges, _) = self.ranges(chunks)?;
                plan.writes.push(WriteOp::Scale {
                    buffer,
                    ranges,
                    divisor: *divisor,
                });
            }
        }
        Ok(())
    }
}

/// Whether two sorted lists of ranges share an element.
fn overlaps(a: &[Range<usize>], b: &[Range<usize>]) -> bool {
    a.iter()
        .any(|x| b.iter().any(|y| x.start < y.end && y.start < x.end))
}
