//! Plans and the one assembler: every method describes its collective as a [`Plan`] — steps of
//! [`Move`]s between nodes — and [`assemble`] turns any plan into per-node programs.
//!
//! A method decides *what* moves where and in which logical step; the assembler owns *how*
//! that becomes a schedule, the same way for every method:
//!
//! - **Sub-steps.** With [`Packing::FirstFit`] a logical step whose moves would need some link
//!   direction more often than its lanes allow is split into BSP sub-steps ([`first_fit`]):
//!   each move goes, in plan order, into the first sub-step where every direction of its route
//!   still has a free lane. That is sound when no move of a step reads what another move of the
//!   same step writes — the contract of a logical step. With [`Packing::AsGiven`] every plan
//!   step is one BSP step: the method has placed its moves itself (pipelines whose steps
//!   overlap, list-scheduled DAGs) and the verifier checks that nothing is overbooked.
//! - **Program order.** In every BSP step a node issues its sends, then its local
//!   instructions, then its receives, each in plan order: a fixed, readable order in which a
//!   local `Reduce` reads scratch before the node's own receive of that step can store over it.
//!   A logical step's local instructions go in the first of its sub-steps where their node
//!   sends or receives (the first sub-step when it does neither).
//! - **Routes.** A move names its whole route; the send names the first link and the rest as
//!   `via`, the receive names the last link.
//! - **Programs.** Compute nodes and every node that sends, receives or computes in the plan
//!   (reducing devices) get a program of one entry per BSP step; nodes that only forward
//!   (switches on routes) run no program.
//!
//! The mean pass ([`super::mean`]) runs after assembly, for every method alike.

use super::PhaseSpec;
use crate::few::Few;
use crate::machine::Machine;
use schedule_ir::{
    Buffer, BufferId, Chunk, ChunkIds, DirectionId, Instr, LinkId, NodeId, NodeKind, Phase,
    Program, RecvMode,
};
use std::collections::BTreeMap;

/// One transfer: `from` sends `chunks` of `src` along `route` to `to`, which writes them into
/// `dst` as `mode` says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Move {
    /// The sender.
    pub from: NodeId,
    /// The receiver.
    pub to: NodeId,
    /// Every link crossed, from `from` to `to`; one link for neighbours.
    pub route: Route,
    /// The buffer read on the sender.
    pub src: BufferId,
    /// The buffer written on the receiver.
    pub dst: BufferId,
    /// The chunks carried, in order, as runs.
    pub chunks: ChunkIds,
    /// Whether the receiver stores or reduces.
    pub mode: RecvMode,
}

/// A move's links: held without allocating up to eight ([`Few`]), enough for a route from a
/// GPU through its NIC, a leaf, a spine, another leaf and a NIC to another GPU.
pub type Route = Few<LinkId, 8>;

impl Move {
    /// A move within the data buffer (the common case).
    pub fn data(
        from: NodeId,
        to: NodeId,
        route: impl Into<Route>,
        chunks: impl Into<ChunkIds>,
        mode: RecvMode,
    ) -> Move {
        Move {
            from,
            to,
            route: route.into(),
            src: super::DATA,
            dst: super::DATA,
            chunks: chunks.into(),
            mode,
        }
    }
}

/// One logical step: moves that read nothing another move of the step writes, and local
/// instructions (`Reduce`, `Copy`) by node.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Step {
    /// The transfers, in plan order.
    pub moves: Vec<Move>,
    /// Local instructions, each with the node that runs it.
    pub locals: Vec<(NodeId, Instr)>,
}

impl Step {
    /// A step of moves only.
    pub fn of(moves: Vec<Move>) -> Step {
        Step {
            moves,
            locals: Vec::new(),
        }
    }
}

/// How the assembler turns plan steps into BSP steps (see the [module doc](self)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Packing {
    /// Every plan step is exactly one BSP step, empty or not.
    AsGiven,
    /// Every plan step is split first-fit into sub-steps that overbook no link direction; a
    /// step with neither moves nor local instructions takes none.
    FirstFit,
}

/// What a method produces: the vector's chunks, the buffers, and the steps.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    /// The chunks, in vector order.
    pub chunks: Vec<Chunk>,
    /// The buffers every node has.
    pub buffers: Vec<Buffer>,
    /// The logical steps.
    pub steps: Vec<Step>,
    /// How steps become BSP steps.
    pub packing: Packing,
}

impl Plan {
    /// A plan over the data buffer alone, with one step per list of moves.
    pub fn data(chunks: Vec<Chunk>, steps: Vec<Vec<Move>>, packing: Packing) -> Plan {
        Plan {
            chunks,
            buffers: super::data_buffer(),
            steps: steps.into_iter().map(Step::of).collect(),
            packing,
        }
    }
}

/// Turns `plan` into the phase `spec` asks for, as method `algorithm` (see the
/// [module doc](self) for the rules every method's schedule follows).
pub fn assemble(spec: &PhaseSpec, algorithm: &str, machine: &Machine, plan: Plan) -> Phase {
    let groups: Vec<Vec<Vec<usize>>> = plan
        .steps
        .iter()
        .map(|step| sub_steps(machine, step, plan.packing))
        .collect();
    let total: usize = groups.iter().map(Vec::len).sum();
    let mut runs: Vec<bool> = (0..machine.node_count())
        .map(|i| machine.node(NodeId::new(i)).kind == NodeKind::Compute)
        .collect();
    for step in &plan.steps {
        for m in &step.moves {
            for n in [m.from, m.to] {
                if let Some(r) = runs.get_mut(n.index()) {
                    *r = true;
                }
            }
        }
        for (n, _) in &step.locals {
            if let Some(r) = runs.get_mut(n.index()) {
                *r = true;
            }
        }
    }
    let mut programs: Vec<Program> = runs
        .iter()
        .map(|&r| Program {
            steps: if r {
                vec![Vec::new(); total]
            } else {
                Vec::new()
            },
        })
        .collect();
    let mut base = 0;
    for (step, groups) in plan.steps.into_iter().zip(&groups) {
        write_step(&mut programs, base, step, groups);
        base += groups.len();
    }
    spec.phase(algorithm, plan.chunks, plan.buffers, total, programs)
}

/// The sub-steps of one plan step, as lists of indices into its moves.
fn sub_steps(machine: &Machine, step: &Step, packing: Packing) -> Vec<Vec<usize>> {
    match packing {
        Packing::AsGiven => vec![(0..step.moves.len()).collect()],
        Packing::FirstFit => {
            let groups = first_fit(
                step.moves
                    .iter()
                    .map(|m| route_directions(machine, m.from, m.route.iter().copied())),
            );
            if groups.is_empty() && !step.locals.is_empty() {
                vec![Vec::new()]
            } else {
                groups
            }
        }
    }
}

/// Writes one plan step into BSP steps `base …` of `programs`: per sub-step, sends, then local
/// instructions, then receives.
fn write_step(programs: &mut [Program], base: usize, step: Step, groups: &[Vec<usize>]) {
    let mut put = |node: NodeId, at: usize, instr: Instr| {
        if let Some(slot) = programs
            .get_mut(node.index())
            .and_then(|p| p.steps.get_mut(base + at))
        {
            slot.push(instr);
        }
    };
    for (g, group) in groups.iter().enumerate() {
        for &i in group {
            let m = &step.moves[i];
            let Some((&first, via)) = m.route.split_first() else {
                continue;
            };
            put(
                m.from,
                g,
                Instr::Send {
                    link: first,
                    via: via.to_vec(),
                    to: m.to,
                    buffer: m.src,
                    chunks: m.chunks.clone(),
                },
            );
        }
    }
    for (node, instr) in step.locals {
        let g = groups
            .iter()
            .position(|group| {
                group
                    .iter()
                    .any(|&i| step.moves[i].from == node || step.moves[i].to == node)
            })
            .unwrap_or(0);
        put(node, g, instr);
    }
    for (g, group) in groups.iter().enumerate() {
        for &i in group {
            let m = &step.moves[i];
            let Some(&last) = m.route.last() else {
                continue;
            };
            put(
                m.to,
                g,
                Instr::Recv {
                    link: last,
                    from: m.from,
                    buffer: m.dst,
                    chunks: m.chunks.clone(),
                    mode: m.mode,
                },
            );
        }
    }
}

/// Joins the moves of one step that go between the same two nodes along the same route, read
/// and write the same buffers and combine alike, into one move carrying all their chunks (in
/// the order first met): one transfer, where several would each take a lane and a sub-step.
/// Logical rings that share a link direction in a step travel so. Moves that differ in
/// anything keep their order.
pub fn merged(moves: Vec<Move>) -> Vec<Move> {
    type Key = (NodeId, NodeId, Route, BufferId, BufferId, RecvMode);
    let mut out: Vec<(Move, Vec<schedule_ir::ChunkId>)> = Vec::with_capacity(moves.len());
    let mut at: BTreeMap<Key, usize> = BTreeMap::new();
    for m in moves {
        let key = (m.from, m.to, m.route.clone(), m.src, m.dst, m.mode);
        match at.get(&key) {
            Some(&i) => out[i].1.extend(m.chunks.iter()),
            None => {
                at.insert(key, out.len());
                let ids = m.chunks.to_vec();
                out.push((m, ids));
            }
        }
    }
    out.into_iter()
        .map(|(mut m, ids)| {
            if ids.len() != m.chunks.len() {
                m.chunks = ids.into();
            }
            m
        })
        .collect()
}

/// Packs transfers into sub-steps: `groups[g]` lists the indices of the transfers (each given
/// by the link directions of its route with their lane counts, as [`route_directions`] returns
/// them) that move in sub-step `g`. Each goes, in order, into the first sub-step where every
/// direction of its route still has a free lane, so that no sub-step overbooks a direction.
pub fn first_fit(routes: impl IntoIterator<Item = Vec<(DirectionId, u32)>>) -> Vec<Vec<usize>> {
    let mut groups: Vec<Vec<usize>> = Vec::new();
    let mut load: Vec<BTreeMap<DirectionId, u32>> = Vec::new();
    for (t, dirs) in routes.into_iter().enumerate() {
        let fits = |l: &BTreeMap<DirectionId, u32>| {
            dirs.iter()
                .all(|&(d, lanes)| l.get(&d).copied().unwrap_or(0) < lanes)
        };
        let g = match load.iter().position(fits) {
            Some(g) => g,
            None => {
                groups.push(Vec::new());
                load.push(BTreeMap::new());
                groups.len() - 1
            }
        };
        groups[g].push(t);
        for &(d, _) in &dirs {
            *load[g].entry(d).or_default() += 1;
        }
    }
    groups
}

/// The link directions a route leaving `from` over `links` crosses, each with its link's lane
/// count (the input of [`first_fit`]).
pub fn route_directions(
    machine: &Machine,
    from: NodeId,
    links: impl IntoIterator<Item = LinkId>,
) -> Vec<(DirectionId, u32)> {
    let mut at = from;
    links
        .into_iter()
        .map(|link| {
            let (a, b) = machine.endpoints(link);
            let backward = at != a;
            at = if backward { a } else { b };
            (DirectionId::new(link, backward), machine.link(link).lanes)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use schedule_ir::ChunkId;

    fn hop(from: usize, to: usize, link: usize, chunk: usize, mode: RecvMode) -> Move {
        Move::data(
            NodeId::new(from),
            NodeId::new(to),
            vec![LinkId::new(link)],
            vec![ChunkId::new(chunk)],
            mode,
        )
    }

    #[test]
    fn moves_along_one_route_travel_as_one() {
        let moves = vec![
            hop(0, 1, 0, 3, RecvMode::Reduce),
            hop(1, 0, 0, 4, RecvMode::Reduce),
            hop(0, 1, 0, 7, RecvMode::Reduce),
            hop(0, 1, 1, 8, RecvMode::Reduce),
            hop(0, 1, 0, 9, RecvMode::Store),
        ];
        let out = merged(moves);
        let chunks: Vec<Vec<usize>> = out
            .iter()
            .map(|m| m.chunks.iter().map(ChunkId::index).collect())
            .collect();
        // The same sender, receiver, route and mode join, in the order first met; the other
        // direction, a parallel link and another mode stay apart.
        assert_eq!(chunks, vec![vec![3, 7], vec![4], vec![8], vec![9]]);
    }
}
