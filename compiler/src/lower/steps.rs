//! A small builder for phases written transfer by transfer, shared by the structured methods.

use crate::machine::Machine;
use schedule_ir::{
    BufferId, Chunk, ChunkId, Instr, LinkId, NodeId, NodeKind, Phase, Program, RecvMode,
};

use super::ring::PhaseSpec;

/// One direct transfer: `from` sends `chunks` over `link` to `to`, which stores or reduces them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transfer {
    /// The sender.
    pub from: NodeId,
    /// The receiver, a neighbour of `from`.
    pub to: NodeId,
    /// The link between them.
    pub link: LinkId,
    /// The chunks moved, in order.
    pub chunks: Vec<ChunkId>,
    /// How the receiver writes them.
    pub mode: RecvMode,
}

/// The link joining `a` and `b`, the lowest id when there are several.
pub fn link_between(machine: &Machine, a: NodeId, b: NodeId) -> Option<LinkId> {
    machine
        .links_at(a)
        .into_iter()
        .filter(|&(_, w)| w == b)
        .map(|(l, _)| l)
        .min()
}

/// Assembles a phase of one data buffer from `steps[k]`, the transfers of BSP step `k`. Each
/// node's program lists its sends of the step first, then its receives, each in the order the
/// transfers are given — a fixed, readable program order.
pub fn assemble(
    spec: &PhaseSpec,
    algorithm: &str,
    machine: &Machine,
    chunks: Vec<Chunk>,
    steps: &[Vec<Transfer>],
) -> Phase {
    let mut programs: Vec<Program> = (0..machine.node_count())
        .map(|i| match machine.node(NodeId::new(i)).kind {
            NodeKind::Compute => Program {
                steps: vec![Vec::new(); steps.len()],
            },
            NodeKind::Switch => Program::default(),
        })
        .collect();
    let data = BufferId(0);
    for (k, transfers) in steps.iter().enumerate() {
        for t in transfers {
            programs[t.from.index()].steps[k].push(Instr::Send {
                link: t.link,
                via: Vec::new(),
                to: t.to,
                buffer: data,
                chunks: t.chunks.clone(),
            });
        }
        for t in transfers {
            programs[t.to.index()].steps[k].push(Instr::Recv {
                link: t.link,
                from: t.from,
                buffer: data,
                chunks: t.chunks.clone(),
                mode: t.mode,
            });
        }
    }
    spec.phase(
        algorithm,
        chunks,
        super::ring::data_buffer(),
        steps.len(),
        programs,
    )
}
