//! The pattern form: a schedule in which every compute node runs one program, translated.
//!
//! On a torus or a hypercube every node can run the same program as every other, moved along
//! the machine: node `x` sends where the origin sends, shifted by `x`, the chunks the origin
//! sends, shifted by `x`. Such a schedule is written as its [`Grid`] and the origin's program
//! alone ([`Pattern`]); its size is that of one node's program, not of every node's, and the
//! verifier proves it without expanding it ([`crate::verify_pattern`]). `docs/ir.md` ("The
//! pattern form") specifies the form and why proving the origin's program proves them all.
//!
//! **Translation.** The grid numbers its nodes by coordinate index: dimension 0 is the fastest
//! digit, `index = Σ digitₖ · Π_{i<k} sizeᵢ`. Translating index `a` by `t` adds them digit by
//! digit, modulo each dimension's size (on a hypercube, where every size is 2, this is XOR).
//! A phase's chunks are laid out by index: with `n` grid nodes there are `m·n` chunks, and
//! chunk `j·n + i` is chunk `i` of part `j`; translating it by `t` gives chunk `j·n + (i + t)`.
//! The program of the node at index `t` is the origin's with every peer, chunk and link
//! translated by `t`; a link is translated to the one link that joins the translated ends.

use crate::limits::{MAX_COUNT, MAX_EXPANDED_INSTRUCTIONS, MAX_PATTERN_STEP_SLOTS};
use crate::{
    ChunkId, ChunkIds, Instr, LinkId, Machine, NodeId, Phase, Program, ProgramItem, Schedule,
};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use thiserror::Error;

/// The compute nodes of a machine as a grid of coordinates.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grid {
    /// The size of every dimension, the fastest-varying digit first; each at least 1.
    pub sizes: Vec<u32>,
    /// The node at each coordinate index: exactly the machine's compute nodes, each once.
    /// Index 0 is the *origin*, whose program the phases hold.
    pub nodes: Vec<NodeId>,
}

impl Grid {
    /// The number of grid positions, `Π sizes` (saturating; a verified grid has exactly
    /// `nodes.len()`).
    pub fn positions(&self) -> u64 {
        self.sizes
            .iter()
            .fold(1u64, |p, &s| p.saturating_mul(u64::from(s)))
    }

    /// Index `a` translated by `t`: digit by digit, modulo each size.
    pub fn add(&self, a: usize, t: usize) -> usize {
        self.combine(a, t, |x, y, s| (x + y) % s)
    }

    /// Index `a` translated back by `t`: the `b` with `add(b, t) == a`.
    pub fn sub(&self, a: usize, t: usize) -> usize {
        self.combine(a, t, |x, y, s| (x + s - y) % s)
    }

    /// Applies `digit` to the digits of `a` and `b`, dimension by dimension.
    fn combine(
        &self,
        mut a: usize,
        mut b: usize,
        digit: impl Fn(usize, usize, usize) -> usize,
    ) -> usize {
        let mut out = 0;
        let mut scale = 1;
        for &s in &self.sizes {
            let s = (s as usize).max(1);
            out += digit(a % s, b % s, s) * scale;
            a /= s;
            b /= s;
            scale *= s;
        }
        out
    }

    /// The grid index of every node of a machine of `nodes` nodes (`None` off the grid).
    pub fn index_of(&self, nodes: usize) -> Vec<Option<usize>> {
        let mut index = vec![None; nodes];
        for (i, n) in self.nodes.iter().enumerate() {
            if let Some(slot) = index.get_mut(n.index()) {
                *slot = Some(i);
            }
        }
        index
    }
}

/// A schedule in the pattern form: the machine, its grid, and phases whose `programs` hold one
/// program, the origin's, that every grid node runs translated.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Pattern {
    /// The grid. First, so that a reader tells a pattern from an explicit schedule by its
    /// first field.
    pub grid: Grid,
    /// Always [`FORMAT_VERSION`](crate::FORMAT_VERSION) when written by this crate.
    pub format_version: u32,
    /// The machine the schedule was compiled for.
    pub machine: Machine,
    /// The BSP program, as in [`Schedule::program`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub program: Vec<ProgramItem>,
    /// The exchange phases, each with exactly one program: the origin's.
    pub phases: Vec<Phase>,
}

/// Why a pattern could not be expanded into the explicit form.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum ExpandError {
    /// The pattern is not one the verifier accepts; verify it for the details.
    #[error("the pattern is malformed: {0}; `topoc verify` the file for every problem")]
    Malformed(String),
    /// The explicit form would be larger than this build expands.
    #[error("the explicit form of phase `{}` would have {instructions} instructions, more than are expanded ({limit}), or more steps × nodes than {MAX_PATTERN_STEP_SLOTS}; use the pattern form as it is (`topoc verify` proves it)", crate::visible::Shown(.phase))]
    TooLarge {
        /// The phase.
        phase: String,
        /// Its instructions once expanded.
        instructions: u64,
        /// The most instructions expanded per phase.
        limit: u64,
    },
}

/// The links of a machine by their two ends, for translating links.
pub struct Links {
    /// `(smaller end, larger end)` → the first link joining them and how many do.
    by_ends: HashMap<(u32, u32), (LinkId, u32)>,
}

impl Links {
    /// Indexes every link of `machine`.
    pub fn of(machine: &Machine) -> Links {
        let mut by_ends: HashMap<(u32, u32), (LinkId, u32)> = HashMap::new();
        for (i, l) in machine.links.iter().enumerate() {
            let key = (l.a.0.min(l.b.0), l.a.0.max(l.b.0));
            by_ends
                .entry(key)
                .and_modify(|e| e.1 += 1)
                .or_insert((LinkId::new(i), 1));
        }
        Links { by_ends }
    }

    /// The one link joining `a` and `b`; `None` when none or several do.
    pub fn between(&self, a: NodeId, b: NodeId) -> Option<LinkId> {
        match self.by_ends.get(&(a.0.min(b.0), a.0.max(b.0))) {
            Some(&(link, 1)) => Some(link),
            _ => None,
        }
    }
}

/// Moves the origin's instructions to another grid position.
pub struct Translator<'a> {
    grid: &'a Grid,
    index: Vec<Option<usize>>,
    links: Links,
    /// Every link's bandwidth, latency and lanes: a link moves only to a link with the same
    /// figures.
    figures: Vec<(f64, f64, u32)>,
    /// `n`, the grid's node count: chunk `c` is part `c / n`, index `c % n`.
    n: usize,
}

impl<'a> Translator<'a> {
    /// A translator on `machine`'s grid.
    pub fn new(machine: &Machine, grid: &'a Grid) -> Translator<'a> {
        Translator {
            grid,
            index: grid.index_of(machine.nodes.len()),
            links: Links::of(machine),
            figures: machine
                .links
                .iter()
                .map(|l| (l.bandwidth_gbps, l.latency_us, l.lanes))
                .collect(),
            n: grid.nodes.len().max(1),
        }
    }

    /// The grid index of `node`, if it is on the grid.
    pub fn index(&self, node: NodeId) -> Option<usize> {
        self.index.get(node.index()).copied().flatten()
    }

    /// `node` translated by `t`.
    pub fn node(&self, node: NodeId, t: usize) -> Option<NodeId> {
        let i = self.index(node)?;
        self.grid.nodes.get(self.grid.add(i, t)).copied()
    }

    /// Chunk `c` translated by `t`.
    pub fn chunk(&self, c: ChunkId, t: usize) -> ChunkId {
        let (part, i) = (c.index() / self.n, c.index() % self.n);
        ChunkId::new(part * self.n + self.grid.add(i, t))
    }

    /// A chunk list translated by `t`, in increasing order: a translated run wraps around
    /// the grid, and sorting gives every node's list one canonical order (a send's and its
    /// receive's lists, translated alike, stay identical).
    pub fn chunks(&self, chunks: &ChunkIds, t: usize) -> ChunkIds {
        let mut ids: Vec<ChunkId> = chunks.iter().map(|c| self.chunk(c, t)).collect();
        ids.sort_unstable();
        ids.into()
    }

    /// The link joining the translates of `at` (the node running the instruction) and `peer`.
    pub fn link(&self, at: NodeId, peer: NodeId, t: usize) -> Option<LinkId> {
        self.links.between(self.node(at, t)?, self.node(peer, t)?)
    }

    /// [`Translator::link`] where it has the bandwidth, latency and lanes of `template`: a
    /// translated transfer must cost what the origin's does, or the pattern's estimate (priced
    /// from the origin alone) would not be the expanded schedule's.
    pub fn link_like(
        &self,
        template: LinkId,
        at: NodeId,
        peer: NodeId,
        t: usize,
    ) -> Option<LinkId> {
        let moved = self.link(at, peer, t)?;
        let figures = |l: LinkId| self.figures.get(l.index());
        (figures(moved).is_some() && figures(moved) == figures(template)).then_some(moved)
    }

    /// The origin's instruction `instr` as the node at index `t` runs it; `None` when a peer
    /// is off the grid, no single link joins the translated ends with the figures of the
    /// origin's link ([`Translator::link_like`]), or a send has further links.
    pub fn instr(&self, instr: &Instr, t: usize) -> Option<Instr> {
        let origin = *self.grid.nodes.first()?;
        Some(match instr {
            Instr::Send {
                link,
                via,
                to,
                buffer,
                chunks,
            } => {
                if !via.is_empty() {
                    return None;
                }
                Instr::Send {
                    link: self.link_like(*link, origin, *to, t)?,
                    via: Vec::new(),
                    to: self.node(*to, t)?,
                    buffer: *buffer,
                    chunks: self.chunks(chunks, t),
                }
            }
            Instr::Recv {
                link,
                from,
                buffer,
                chunks,
                mode,
            } => Instr::Recv {
                link: self.link_like(*link, origin, *from, t)?,
                from: self.node(*from, t)?,
                buffer: *buffer,
                chunks: self.chunks(chunks, t),
                mode: *mode,
            },
            Instr::Reduce { src, dst, chunks } => Instr::Reduce {
                src: *src,
                dst: *dst,
                chunks: self.chunks(chunks, t),
            },
            Instr::Copy { src, dst, chunks } => Instr::Copy {
                src: *src,
                dst: *dst,
                chunks: self.chunks(chunks, t),
            },
            Instr::Scale {
                buffer,
                chunks,
                divisor,
            } => Instr::Scale {
                buffer: *buffer,
                chunks: self.chunks(chunks, t),
                divisor: *divisor,
            },
        })
    }
}

impl Pattern {
    /// The explicit schedule the pattern stands for: every grid node runs the origin's
    /// program translated to it; nodes off the grid run nothing. Meant for a verified pattern
    /// ([`crate::verify_pattern`]); a malformed one gets an error, never a panic.
    pub fn expand(&self) -> Result<Schedule, ExpandError> {
        let translator = Translator::new(&self.machine, &self.grid);
        let mut phases = Vec::with_capacity(self.phases.len());
        for phase in &self.phases {
            phases.push(self.expand_phase(&translator, phase)?);
        }
        Ok(Schedule {
            format_version: self.format_version,
            machine: self.machine.clone(),
            program: self.program.clone(),
            phases,
        })
    }

    fn expand_phase(
        &self,
        translator: &Translator<'_>,
        phase: &Phase,
    ) -> Result<Phase, ExpandError> {
        let malformed = |what: String| {
            ExpandError::Malformed(format!(
                "phase `{}`: {what}",
                crate::visible::Shown(&phase.name)
            ))
        };
        let [origin] = phase.programs.as_slice() else {
            return Err(malformed(format!(
                "it has {} programs; a pattern's phase has one, the origin's",
                phase.programs.len()
            )));
        };
        let nodes = self.grid.nodes.len() as u64;
        let per_node: u64 = origin.steps.iter().map(|s| s.len() as u64).sum();
        let instructions = per_node.saturating_mul(nodes);
        let slots = (origin.steps.len() as u64).saturating_mul(nodes);
        if instructions > MAX_EXPANDED_INSTRUCTIONS
            || slots > MAX_PATTERN_STEP_SLOTS
            || self.grid.positions() > MAX_COUNT
        {
            return Err(ExpandError::TooLarge {
                phase: phase.name.clone(),
                instructions,
                limit: MAX_EXPANDED_INSTRUCTIONS,
            });
        }
        // Every chunk id in range before anything is translated: a run is a few bytes of text
        // however many ids it names, and each node's translate would hold them all.
        let count = phase.chunks.len() as u64;
        let beyond = origin.steps.iter().flatten().find_map(|i| {
            let last = i.chunks().runs().iter().map(|r| r.last()).max()?;
            (last >= count).then_some(last)
        });
        if let Some(last) = beyond {
            return Err(malformed(format!(
                "the origin's program names chunk {last}, but the phase has {count} chunks"
            )));
        }
        let mut programs = vec![Program::default(); self.machine.nodes.len()];
        for (t, node) in self.grid.nodes.iter().enumerate() {
            let Some(program) = programs.get_mut(node.index()) else {
                return Err(malformed(format!("grid node {node} is not in the machine")));
            };
            let mut steps = Vec::with_capacity(origin.steps.len());
            for step in &origin.steps {
                let moved: Option<Vec<Instr>> =
                    step.iter().map(|i| translator.instr(i, t)).collect();
                steps.push(moved.ok_or_else(|| {
                    malformed(format!(
                        "an instruction of the origin's program cannot be moved to grid index \
                         {t}: no one link with the bandwidth, latency and lanes of the origin's \
                         joins the moved ends"
                    ))
                })?);
            }
            program.steps = steps;
        }
        Ok(Phase {
            programs,
            ..phase.clone()
        })
    }
}
