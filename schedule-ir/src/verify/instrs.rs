//! Pass 1, well-formed, for instructions: ids in range, peers, routes and chunk lists.

use super::{action, buffer, link, node, AnyId, ErrorKind, Location, VerifyError};
use crate::{ChunkId, ChunkIds, Instr, LinkId, Machine, NodeId, NodeKind, Phase, ReduceOp, StepId};

/// Checks instructions, with a reusable marker array for repeated chunks.
pub(super) struct InstrChecker<'a> {
    machine: &'a Machine,
    phase: &'a Phase,
    /// `seen[c] == generation` when chunk `c` is in the list being checked.
    seen: Vec<u64>,
    generation: u64,
    /// The number of compute nodes: the divisor of every scale.
    inputs: usize,
    errors: &'a mut Vec<VerifyError>,
}

impl<'a> InstrChecker<'a> {
    /// A checker for the instructions of `phase`, reporting into `errors`.
    pub(super) fn new(
        machine: &'a Machine,
        phase: &'a Phase,
        errors: &'a mut Vec<VerifyError>,
    ) -> Self {
        InstrChecker {
            machine,
            phase,
            seen: vec![0; phase.chunks.len()],
            generation: 0,
            inputs: machine
                .nodes
                .iter()
                .filter(|n| n.kind == NodeKind::Compute)
                .count(),
            errors,
        }
    }

    /// Reports a problem found outside an instruction while the checker holds the error list.
    pub(super) fn report(&mut self, error: VerifyError) {
        self.errors.push(error);
    }

    /// Where an instruction of node `at` in `step` is.
    fn at(&self, step: StepId, at: NodeId) -> Location {
        Location::step(&self.phase.name, step).node(node(self.machine, at))
    }

    /// Reports `kind` for an instruction of node `at` in `step`.
    fn push(&mut self, step: StepId, at: NodeId, kind: ErrorKind) {
        let here = self.at(step, at);
        self.errors.push(here.error(kind));
    }

    /// Reports `id` unless it is below `count`; returns whether it is.
    fn in_range(&mut self, step: StepId, at: NodeId, act: &Instr, id: AnyId) -> bool {
        let (index, count) = match id {
            AnyId::Node(i) => (i.index(), self.machine.nodes.len()),
            AnyId::Link(i) => (i.index(), self.machine.links.len()),
            AnyId::Chunk(i) => (i.index(), self.phase.chunks.len()),
            AnyId::Buffer(i) => (i.index(), self.phase.buffers.len()),
        };
        if index < count {
            return true;
        }
        let kind = ErrorKind::UnknownId {
            action: action(self.machine, act),
            id,
            count,
        };
        self.push(step, at, kind);
        false
    }

    pub(super) fn instr(&mut self, step: StepId, at: NodeId, instr: &Instr) {
        let act = instr;
        match instr {
            Instr::Send {
                link: first,
                via,
                to,
                buffer: b,
                chunks,
            } => {
                let mut route_ok = true;
                for l in std::iter::once(first).chain(via) {
                    route_ok &= self.in_range(step, at, act, AnyId::Link(*l));
                }
                let to_ok = self.in_range(step, at, act, AnyId::Node(*to));
                self.in_range(step, at, act, AnyId::Buffer(*b));
                if to_ok {
                    self.peer(step, at, act, *to);
                }
                if route_ok && to_ok {
                    self.route(step, at, act, *to, *first, via);
                }
                self.chunk_list(step, at, act, chunks);
            }
            Instr::Recv {
                link: l,
                from,
                buffer: b,
                chunks,
                mode: _,
            } => {
                let link_ok = self.in_range(step, at, act, AnyId::Link(*l));
                let from_ok = self.in_range(step, at, act, AnyId::Node(*from));
                self.in_range(step, at, act, AnyId::Buffer(*b));
                if from_ok {
                    self.peer(step, at, act, *from);
                }
                if link_ok {
                    if let Some(lk) = self.machine.links.get(l.index()) {
                        if lk.other(at).is_none() {
                            let kind = ErrorKind::WrongLink {
                                action: action(self.machine, act),
                                ends: [node(self.machine, lk.a), node(self.machine, lk.b)],
                            };
                            let here = self.at(step, at).link(link(self.machine, *l));
                            self.errors.push(here.error(kind));
                        }
                    }
                }
                self.chunk_list(step, at, act, chunks);
            }
            Instr::Reduce { src, dst, chunks } | Instr::Copy { src, dst, chunks } => {
                let src_ok = self.in_range(step, at, act, AnyId::Buffer(*src));
                let dst_ok = self.in_range(step, at, act, AnyId::Buffer(*dst));
                if src_ok && dst_ok && src == dst {
                    let here = self.at(step, at).buffer(Some(buffer(self.phase, *src)));
                    self.errors.push(here.error(ErrorKind::SameBuffer {
                        action: action(self.machine, act),
                    }));
                }
                self.chunk_list(step, at, act, chunks);
            }
            Instr::Scale {
                buffer: b,
                chunks,
                divisor,
            } => {
                self.in_range(step, at, act, AnyId::Buffer(*b));
                let here = self.at(step, at).buffer(Some(buffer(self.phase, *b)));
                if self.phase.op != ReduceOp::Mean {
                    self.errors
                        .push(here.error(ErrorKind::ScaleNotMean { op: self.phase.op }));
                } else if *divisor as usize != self.inputs {
                    self.errors.push(here.error(ErrorKind::WrongDivisor {
                        divisor: *divisor,
                        expected: self.inputs,
                    }));
                }
                self.chunk_list(step, at, act, chunks);
            }
        }
    }

    /// A chunk list: not empty, ids in range, no repeats. A list whose runs increase and end
    /// in range has neither problem and is passed on its runs alone; any other is checked run
    /// by run, in list order: the ids of a run that are in range one by one for repeats, and
    /// the rest of the run, past the phase's chunks, reported once at its first id. A run is a
    /// few bytes of text however many ids it names, so an error per id would let a small file
    /// claim gigabytes of errors.
    fn chunk_list(&mut self, step: StepId, at: NodeId, act: &Instr, chunks: &ChunkIds) {
        if chunks.is_empty() {
            let kind = ErrorKind::EmptyChunkList {
                action: action(self.machine, act),
            };
            self.push(step, at, kind);
            return;
        }
        if chunks.is_increasing_below(self.phase.chunks.len()) {
            return;
        }
        self.generation += 1;
        let count = self.phase.chunks.len() as u64;
        for &run in chunks.runs() {
            let inside = if u64::from(run.start) >= count {
                0
            } else {
                let stride = u64::from(run.stride.max(1));
                ((count - 1 - u64::from(run.start)) / stride + 1).min(u64::from(run.len)) as u32
            };
            (0..inside).for_each(|i| self.unrepeated(step, at, act, run.at(i)));
            if inside < run.len {
                self.in_range(step, at, act, AnyId::Chunk(run.at(inside)));
            }
        }
    }

    /// Reports chunk `c` (in range) when the list being checked named it before.
    fn unrepeated(&mut self, step: StepId, at: NodeId, act: &Instr, c: ChunkId) {
        let generation = self.generation;
        let Some(mark) = self.seen.get_mut(c.index()) else {
            return;
        };
        let repeated = *mark == generation;
        *mark = generation;
        if repeated {
            let kind = ErrorKind::RepeatedChunk {
                action: action(self.machine, act),
            };
            let here = self.at(step, at).chunk(c);
            self.errors.push(here.error(kind));
        }
    }

    /// A send's or receive's peer (known to exist) is another compute node.
    fn peer(&mut self, step: StepId, at: NodeId, act: &Instr, peer: NodeId) {
        if peer == at {
            let kind = ErrorKind::PeerIsSelf {
                action: action(self.machine, act),
            };
            self.push(step, at, kind);
        } else if self
            .machine
            .nodes
            .get(peer.index())
            .is_some_and(|n| !n.runs_program())
        {
            let kind = ErrorKind::PeerIsSwitch {
                action: action(self.machine, act),
            };
            self.push(step, at, kind);
        }
    }

    /// Walks a send's route (every link id known to exist) from the sender.
    fn route(
        &mut self,
        step: StepId,
        at: NodeId,
        act: &Instr,
        to: NodeId,
        first: LinkId,
        via: &[LinkId],
    ) {
        let machine = self.machine;
        let mut here = at;
        for (i, l) in std::iter::once(first)
            .chain(via.iter().copied())
            .enumerate()
        {
            let Some(lk) = machine.links.get(l.index()) else {
                return;
            };
            let Some(next) = lk.other(here) else {
                let ends = [node(machine, lk.a), node(machine, lk.b)];
                let kind = if i == 0 {
                    ErrorKind::WrongLink {
                        action: action(self.machine, act),
                        ends,
                    }
                } else {
                    ErrorKind::RouteBroken {
                        to: node(machine, to),
                        at: node(machine, here),
                        ends,
                    }
                };
                let place = self.at(step, at).link(link(machine, l));
                self.errors.push(place.error(kind));
                return;
            };
            // Any node may forward: switches, and compute nodes whose routers pass traffic
            // through without computing (as on torus machines).
            here = next;
        }
        if here != to {
            let kind = ErrorKind::RouteEndsElsewhere {
                to: node(machine, to),
                end: node(machine, here),
            };
            self.push(step, at, kind);
        }
    }
}
