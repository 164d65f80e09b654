//! Pictures of a machine (`topoc draw`): its links with their ids, the structures a method
//! embeds in it, and the link directions one step of a schedule uses.
//!
//! A [`Scene`] is everything a picture shows, gathered from a compiled topology
//! ([`Scene::from_compiled`]) or from a verified schedule alone ([`Scene::from_schedule`]).
//! [`layout::compute`] places the nodes; [`dot::render`] writes Graphviz DOT (with the
//! positions, so Graphviz keeps the layout) and [`svg::render`] draws SVG itself, so no
//! external tool is needed at run time.
//!
//! Embeddings come from the compiler's notes when it has them as data (the rings of the ring
//! methods). Otherwise — a schedule file, or a method whose structures are not rings — they
//! are derived from the schedule: [`channels::derive`] groups the link directions that carry
//! the same chunks into *channels*, which for a ring method are exactly its rings.
//!
//! Every scene is built from a [`VerifiedSchedule`], so the renderers may index machine and
//! phase freely.

pub mod channels;
pub mod dot;
mod geom;
pub mod layout;
pub mod svg;

use crate::compile::Compiled;
use crate::embed::trees::Tree;
use crate::embed::Ring;
use crate::machine::Shape;
use crate::visible::{line, Shown};
use schedule_ir::{
    ChunkId, Hop, Instr, LinkId, Machine, NodeId, NodeKind, Phase, RecvMode, VerifiedSchedule,
};
use std::collections::BTreeSet;
use thiserror::Error;

/// What to draw of a schedule.
#[derive(Clone, Debug, Default)]
pub struct Request {
    /// The phase whose embedding and steps are drawn (the first when `None`).
    pub phase: Option<String>,
    /// Draw the link use of this step (counted from 0) instead of the embedding.
    pub step: Option<u32>,
}

/// Why a picture cannot be drawn as asked.
#[derive(Clone, Debug, Error, PartialEq)]
pub enum DrawError {
    /// `--phase` names no phase of the schedule.
    #[error("there is no phase `{}`; the phases are: {}", Shown(.name), list(.known))]
    UnknownPhase {
        /// The name asked for.
        name: String,
        /// The phases there are.
        known: Vec<String>,
    },
    /// `--step` is past the phase's last step.
    #[error("phase `{}` has {}; there is no step {step}", Shown(.phase), step_range(*.steps))]
    NoSuchStep {
        /// The phase.
        phase: String,
        /// The step asked for.
        step: u32,
        /// How many steps the phase has.
        steps: u32,
    },
    /// A step was asked for, but the schedule has no phase.
    #[error("the schedule has no exchange phase, so it has no step {0}")]
    NoPhase(u32),
}

fn step_range(steps: u32) -> String {
    match steps {
        0 => "no steps".to_string(),
        1 => "1 step (0)".to_string(),
        n => format!("{n} steps (0 to {})", n - 1),
    }
}

/// The phases there are, each shown as every name is.
fn list(names: &[String]) -> String {
    if names.is_empty() {
        "none".to_string()
    } else {
        names.iter().map(|n| line(n)).collect::<Vec<_>>().join(", ")
    }
}

/// What is known about how the machine was generated, for layouts that exploit it.
#[derive(Clone, Debug, PartialEq)]
pub enum ShapeHint {
    /// A cycle of nodes in id order.
    Ring,
    /// A ladder: `rows[k]` is pair `k`, side 0 then side 1.
    Ladder {
        /// The facing pairs, in ladder order.
        rows: Vec<[NodeId; 2]>,
    },
    /// Nothing known.
    Other,
}

/// A structure drawn over the machine: an embedded ring (or a channel derived from the
/// schedule), as directed link crossings.
#[derive(Clone, Debug, PartialEq)]
pub struct Overlay {
    /// Its name in the legend (`ring 1`, `channel 2`).
    pub name: String,
    /// A short description for the legend (`N0 → N1 → … → N0`).
    pub detail: String,
    /// The link crossings, in walking order for a ring.
    pub edges: Vec<Hop>,
    /// Whether the phase also walks every edge backwards.
    pub both_ways: bool,
}

/// One link direction crossed by one transfer in the drawn step.
#[derive(Clone, Debug, PartialEq)]
pub struct Carry {
    /// The crossing.
    pub hop: Hop,
    /// The chunks carried.
    pub chunks: Vec<ChunkId>,
    /// What the receiver does with them.
    pub mode: RecvMode,
    /// The overlay the crossing belongs to, if any (for its colour).
    pub overlay: Option<usize>,
}

/// The link use of one step.
#[derive(Clone, Debug, PartialEq)]
pub struct StepUse {
    /// The step, counted from 0.
    pub step: u32,
    /// The phase's number of steps.
    pub steps: u32,
    /// How many sends the step has (a routed send crosses several links).
    pub transfers: usize,
    /// Every crossing of the step, in program order of the sending nodes.
    pub carries: Vec<Carry>,
}

/// Everything a picture shows.
#[derive(Clone, Debug)]
pub struct Scene {
    /// The machine: nodes, links and their ids.
    pub machine: Machine,
    /// How the machine was generated, when known.
    pub shape: ShapeHint,
    /// The title line (the machine's name).
    pub title: String,
    /// The line under the title: phase, collective, method, what is shown.
    pub subtitle: String,
    /// Embedded structures, each drawn in its own colour.
    pub overlays: Vec<Overlay>,
    /// With `--step`: the link use of that step.
    pub step: Option<StepUse>,
}

impl Scene {
    /// The scene for a compiled topology: its machine and shape, the chosen phase's
    /// embedding from the compiler's notes (or derived channels when the notes hold none).
    pub fn from_compiled(compiled: &Compiled, request: &Request) -> Result<Scene, DrawError> {
        let shape = match &compiled.machine.shape {
            Shape::Ring => ShapeHint::Ring,
            Shape::Ladder(l) => ShapeHint::Ladder {
                rows: (0..l.pairs).map(|k| [l.node(k, 0), l.node(k, 1)]).collect(),
            },
            _ => ShapeHint::Other,
        };
        let schedule = compiled.schedule.schedule();
        let phase = pick_phase(&schedule.phases, request)?;
        let note = phase.and_then(|p| compiled.notes.iter().find(|n| n.phase == p.name));
        let overlays = match note {
            Some(n) if !n.embedding.is_empty() => Some((
                ring_overlays(&schedule.machine, &n.embedding),
                "embedded ring",
            )),
            Some(n) if !n.trees.is_empty() => {
                Some((tree_overlays(&schedule.machine, &n.trees), "spanning tree"))
            }
            _ => None,
        };
        Ok(build(&schedule.machine, shape, phase, overlays, request))
    }

    /// The scene for a schedule alone: the machine summary it carries, its shape recognised
    /// from the links where it is a ring or a ladder, and channels derived from the chosen
    /// phase.
    pub fn from_schedule(
        verified: &VerifiedSchedule,
        request: &Request,
    ) -> Result<Scene, DrawError> {
        let schedule = verified.schedule();
        let phase = pick_phase(&schedule.phases, request)?;
        let shape = layout::recognise(&schedule.machine);
        Ok(build(&schedule.machine, shape, phase, None, request))
    }
}

/// The phase asked for (or the first), checking the step too.
fn pick_phase<'a>(phases: &'a [Phase], request: &Request) -> Result<Option<&'a Phase>, DrawError> {
    let phase = match &request.phase {
        Some(name) => Some(phases.iter().find(|p| &p.name == name).ok_or_else(|| {
            DrawError::UnknownPhase {
                name: name.clone(),
                known: phases.iter().map(|p| p.name.clone()).collect(),
            }
        })?),
        None => phases.first(),
    };
    if let Some(step) = request.step {
        match phase {
            None => return Err(DrawError::NoPhase(step)),
            Some(p) if step >= p.steps => {
                return Err(DrawError::NoSuchStep {
                    phase: p.name.clone(),
                    step,
                    steps: p.steps,
                })
            }
            Some(_) => {}
        }
    }
    Ok(phase)
}

fn build(
    machine: &Machine,
    shape: ShapeHint,
    phase: Option<&Phase>,
    overlays: Option<(Vec<Overlay>, &'static str)>,
    request: &Request,
) -> Scene {
    let (mut overlays, kind) = match (overlays, phase) {
        (Some(o), _) => o,
        (None, Some(p)) => (channels::derive(machine, p), "channel"),
        (None, None) => (Vec::new(), "channel"),
    };
    if let Some(p) = phase {
        let used = used_directions(machine, p);
        for o in &mut overlays {
            // Only meaningful when the overlay itself goes one way over each of its links.
            let own: BTreeSet<usize> = o.edges.iter().map(Hop::direction).collect();
            o.both_ways = !o.edges.is_empty()
                && o.edges.iter().all(|h| {
                    !own.contains(&(h.direction() ^ 1)) && used.contains(&(h.link, h.to, h.from))
                });
        }
    }
    let step = match (phase, request.step) {
        (Some(p), Some(k)) => Some(step_use(machine, p, k, &overlays)),
        _ => None,
    };
    let subtitle = match (phase, &step) {
        (None, _) => format!(
            "{} nodes, {} links; no exchange phase",
            machine.nodes.len(),
            machine.links.len()
        ),
        (Some(p), None) => {
            let ways = match overlays.len() {
                0 => "",
                _ if !overlays.iter().all(|o| o.both_ways) => "",
                1 => ", walked both ways",
                _ => ", each walked both ways",
            };
            format!(
                "phase `{}`: {} by {} · {} {kind}{}{ways}",
                p.name,
                p.collective.describe(machine),
                p.algorithm,
                overlays.len(),
                if overlays.len() == 1 { "" } else { "s" },
            )
        }
        (Some(p), Some(s)) => {
            let directions: BTreeSet<usize> = s.carries.iter().map(|c| c.hop.direction()).collect();
            format!(
                "phase `{}`: {} by {} · step {} of 0–{}: {} transfers, {} of {} link directions busy",
                p.name,
                p.collective.describe(machine),
                p.algorithm,
                s.step,
                s.steps.saturating_sub(1),
                s.transfers,
                directions.len(),
                2 * machine.links.len()
            )
        }
    };
    Scene {
        machine: machine.clone(),
        shape,
        title: machine.name.clone(),
        subtitle,
        overlays,
        step,
    }
}

/// The rings of a compiler note as overlays, named `ring 1`, `ring 2`, ….
fn ring_overlays(machine: &Machine, rings: &[Ring]) -> Vec<Overlay> {
    rings
        .iter()
        .enumerate()
        .map(|(i, ring)| {
            let n = ring.nodes.len();
            let edges: Vec<Hop> = (0..n)
                .filter_map(|j| {
                    let (from, to) = (ring.nodes[j], ring.nodes[(j + 1) % n]);
                    hop(machine, ring.links[j], from, to)
                })
                .collect();
            Overlay {
                name: format!("ring {}", i + 1),
                detail: walk(machine, &ring.nodes),
                edges,
                both_ways: false,
            }
        })
        .collect()
}

/// The spanning trees of a compiler note as overlays, named `tree 1`, `tree 2`, …: each
/// child's route up to its parent, every link of it crossed towards the parent.
fn tree_overlays(machine: &Machine, trees: &[Tree]) -> Vec<Overlay> {
    trees
        .iter()
        .enumerate()
        .map(|(i, tree)| {
            let mut edges = Vec::new();
            for (child, _, first) in tree.edges() {
                let via = tree.via.get(child).map_or(&[][..], Vec::as_slice);
                let mut at = child;
                for &link in std::iter::once(&first).chain(via) {
                    let Some(next) = machine.links.get(link.index()).and_then(|l| l.other(at))
                    else {
                        break;
                    };
                    edges.extend(hop(machine, link, at, next));
                    at = next;
                }
            }
            Overlay {
                name: format!("tree {}", i + 1),
                detail: format!(
                    "rooted at {}, {} edges towards the root",
                    machine.node_name(tree.root),
                    edges.len()
                ),
                edges,
                both_ways: false,
            }
        })
        .collect()
}

/// The crossing of `link` from `from` to `to`, if the link joins them.
pub(crate) fn hop(machine: &Machine, link: LinkId, from: NodeId, to: NodeId) -> Option<Hop> {
    let l = machine.links.get(link.index())?;
    (l.other(from) == Some(to)).then_some(Hop {
        link,
        from,
        to,
        backward: from != l.a,
    })
}

/// `N0 → N1 → … → N0`, shortened for long cycles.
pub(crate) fn walk(machine: &Machine, nodes: &[NodeId]) -> String {
    const SHOWN: usize = 12;
    let mut names: Vec<String> = nodes
        .iter()
        .take(SHOWN)
        .map(|&n| machine.node_name(n))
        .collect();
    if nodes.len() > SHOWN {
        names.push(format!("… ({} nodes)", nodes.len()));
    }
    if let Some(&first) = nodes.first() {
        names.push(machine.node_name(first));
    }
    names.join(" → ")
}

/// Every `(link, from, to)` crossed by some transfer of the phase.
fn used_directions(machine: &Machine, phase: &Phase) -> BTreeSet<(LinkId, NodeId, NodeId)> {
    let mut used = BTreeSet::new();
    for (node, program) in phase.programs.iter().enumerate() {
        for instr in program.steps.iter().flatten() {
            if let Instr::Send { link, via, .. } = instr {
                for h in machine.route(NodeId::new(node), *link, via) {
                    used.insert((h.link, h.from, h.to));
                }
            }
        }
    }
    used
}

/// The crossings of step `k`, each with the receiver's mode and its overlay.
fn step_use(machine: &Machine, phase: &Phase, k: u32, overlays: &[Overlay]) -> StepUse {
    let mut carries = Vec::new();
    let mut transfers = 0;
    let step = k as usize;
    for (node, program) in phase.programs.iter().enumerate() {
        let from = NodeId::new(node);
        for instr in program.steps.get(step).into_iter().flatten() {
            let Instr::Send {
                link,
                via,
                to,
                chunks,
                ..
            } = instr
            else {
                continue;
            };
            let last = via.last().copied().unwrap_or(*link);
            let mode = phase
                .programs
                .get(to.index())
                .and_then(|p| p.steps.get(step))
                .into_iter()
                .flatten()
                .find_map(|i| match i {
                    Instr::Recv {
                        link: l,
                        from: f,
                        chunks: c,
                        mode,
                        ..
                    } if *l == last && *f == from && c == chunks => Some(*mode),
                    _ => None,
                })
                .unwrap_or(RecvMode::Store);
            transfers += 1;
            for h in machine.route(from, *link, via) {
                carries.push(Carry {
                    hop: h,
                    chunks: chunks.clone().to_vec(),
                    mode,
                    overlay: overlay_of(overlays, &h),
                });
            }
        }
    }
    StepUse {
        step: k,
        steps: phase.steps,
        transfers,
        carries,
    }
}

/// The overlay that crosses `hop` the same way, else the first that uses its link at all.
fn overlay_of(overlays: &[Overlay], hop: &Hop) -> Option<usize> {
    overlays
        .iter()
        .position(|o| o.edges.iter().any(|e| e == hop))
        .or_else(|| {
            overlays
                .iter()
                .position(|o| o.edges.iter().any(|e| e.link == hop.link))
        })
}

/// Colours for overlays, in order: distinguishable, also for common colour blindness
/// (Okabe–Ito without yellow and black, then Tol's muted tones).
pub const PALETTE: [&str; 10] = [
    "#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#882255", "#44AA99",
    "#999933", "#AA4499",
];

/// The colour of overlay `i` (`None`: traffic outside every overlay).
pub fn colour(i: Option<usize>) -> &'static str {
    match i {
        Some(i) => PALETTE[i % PALETTE.len()],
        None => "#333333",
    }
}

/// Dash pattern of overlay `i`: solid for the first round of colours, then dashed, so more
/// than ten overlays stay distinguishable.
pub fn overlay_dash(i: usize) -> Option<&'static str> {
    match (i / PALETTE.len()) % 3 {
        0 => None,
        1 => Some("8 4"),
        _ => Some("2 3"),
    }
}

/// Colour of links themselves.
pub const LINK_COLOUR: &str = "#a0a0a0";

/// `c3` or `c3,c4`.
pub fn chunk_label(chunks: &[ChunkId]) -> String {
    chunks
        .iter()
        .map(|c| format!("c{}", c.0))
        .collect::<Vec<_>>()
        .join(",")
}

/// Whether the node is a switch.
pub fn is_switch(machine: &Machine, node: NodeId) -> bool {
    machine
        .nodes
        .get(node.index())
        .is_some_and(|n| n.kind == NodeKind::Switch)
}
