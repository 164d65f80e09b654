//! `cube-planes`: allreduce on the cube's six faces (its variants 300 and 400).
//!
//! The vector is cut into 12 chunks: three segments `R`, `G`, `B` (one per pair of opposite
//! faces: `abcd`/`efgh`, `abef`/`dchg`, `adeh`/`bcgf`), each of four sub-segments. Chunk
//! `4k + j` is sub-segment `j` of segment `k`. Both faces of a pair work on their pair's
//! segment, each over its own four nodes; every node sits on three faces, one of each pair.
//!
//! **Phase 1, in-face reduce-scatter (3 steps, both variants).** All six faces run a 4-node
//! ring reduce-scatter at once, all turning the same way seen from outside the cube (all
//! counter-clockwise, or all clockwise), so each link — which borders two faces — is walked
//! once in each direction in every step. A face's *start node* is the node that sends
//! sub-segment 0 in the first step; the node `i` places after it along the ring ends holding
//! sub-segment `(i + 1) mod 4` reduced over the face's four nodes (`r(i+1)abcd`).
//!
//! In each face the compiler pairs the four nodes along two parallel edges, the *partner*
//! pairs (`a–b`, `c–d` in `abcd`); the opposite face pairs the opposite nodes (`e–f`, `g–h`).
//! `opp(x)` is `x`'s neighbour across the pair of faces (`a–e`).
//!
//! **Method 300** (`--variant 300`, 8 steps). Phase 2, as the seed's S305/S306 and its
//! example (a holds `r4abcd`, e holds `r3efgh`; after the swap a also holds `r3efgh` and b,
//! which holds `r3abcd`, reduces it in):
//!
//! 1. *Opposite swap.* Every node sends its reduced sub-segment of each of its faces to the
//!    opposite node, which stores it (12 pairs × 3 faces: each link both ways).
//! 2. *Pair reduce-scatter.* Every node sends what it just received to its partner, which
//!    reduces it into its own reduced sub-segment. This needs `sub(opp(x)) = sub(partner(x))`
//!    for every node `x` — the opposite face must hold the partner's sub-segment. Then each
//!    node holds its own sub-segment reduced over all eight nodes.
//!
//! Phase 3 is a 4-node ring allgather on the phase-1 rings (3 steps).
//!
//! **Method 400** (`--variant 400`, the default, 6 steps). Phase 2, as S405/S406:
//!
//! 1. *Partner allgather.* Partners swap their reduced sub-segments (store): each then holds
//!    two sub-segments reduced over its face.
//! 2. *Opposite allreduce.* Opposite nodes swap both and each reduces the other's pair into
//!    its own. This needs opposite nodes to hold the same two sub-segments. Both sides compute
//!    `x ⊕ y` and `y ⊕ x`: the same bits, the operations being commutative.
//!
//! Phase 3 (1 step): each node swaps its two (now fully reduced) sub-segments with its other
//! in-face neighbour, which holds the complementary two.
//!
//! **Start choice.** Whether phase 2's requirements hold depends on the phase-1 start nodes
//! (seed figure 30 lists the valid placements), and the partner pairs of the three face pairs
//! must lie on three different edge directions, or phase 2's partner step books a link twice.
//! [`search`] enumerates the choices in a fixed order — orientation (counter-clockwise first),
//! then the start node of each face in face order, then the partner edges of each pair — builds
//! each candidate's transfers, and checks them: no link direction twice in a step, no
//! contribution combined twice, and every node holding every chunk reduced over all eight
//! nodes at the end. The first candidate that passes is lowered (and then proved again by the
//! verifier).
//!
//! **Reading the seed.** Its phase-2 prose is loose in places, and the verifier settles it:
//!
//! - Method 300, S306: the example says "a receives `r4abcd` from b and adds its own `r4efgh`",
//!   but after the swap a holds `r4abcd` and `r3efgh`, b holds `r3abcd` and `r4efgh`. The only
//!   reading that reduces each sub-segment exactly once over all eight nodes is the one above:
//!   each node forwards what it received across the cube (`r3efgh` from a to b, `r4efgh` from
//!   b to a) and keeps its own. Partners are the neighbours holding the same pair of
//!   sub-segments across the two opposite faces, as S306 says.
//! - Method 400, S405: the example for face `efgh` names pairs `a–f`, `f–g` and `g–h` twice;
//!   read as in face `abcd`: `e–f` and `g–h` swap, the partners being the images of `a–b`,
//!   `c–d` across the cube (S406 then pairs `a–e`, `b–f`, …, which needs exactly that).
//! - Both variants accept exactly the same start choices: for each pair of faces, 8 of the 16
//!   pairs of start nodes work, each with one partner direction, and the three pairs of faces
//!   must take three different directions — 256 of the 65 536 candidates in all (the seed's
//!   figure 30 shows six valid placements among twelve drawn). The search takes the 2 192nd
//!   candidate: counter-clockwise rings starting at `a` (abcd), `f` (efgh), `a` (abef), `h`
//!   (dchg), `a` (adeh), `c` (bcgf), partners along `ab`, `ae`, `ad`.
//!
//! Only allreduce is lowered: each phase-2 design ends with all nodes holding the result, so a
//! reduce-scatter or allgather on its own is refused (use `rotated-hd`).

use super::plan::{self, Move, Packing, Plan};
use super::{link_between, vector_chunks, Job, Lowered, Lowering, PhaseSpec};
use crate::embed::EmbedError;
use crate::ids::IdVec;
use crate::limits::Estimate;
use crate::machine::hypercube::CubeLayout;
use crate::machine::{Machine, Shape};
use schedule_ir::{ChunkId, Collective, NodeId, Phase, RecvMode};
use std::fmt;

/// `cube-planes`: allreduce on the cube's six faces, methods 300 and 400.
pub struct CubePlanes;

impl Lowering for CubePlanes {
    fn supports(&self, collective: Collective) -> bool {
        collective == Collective::AllReduce
    }
    fn variants(&self) -> &'static [u32] {
        &[300, 400]
    }
    /// The cube has 8 nodes and 12 chunks: the generic estimate bounds it. Other machines are
    /// estimated empty, and [`lower`] says why it does not apply.
    fn estimate(&self, job: &Job<'_>) -> Result<Estimate, EmbedError> {
        let machine = job.machine;
        Ok(match machine.shape {
            Shape::Cube(_) => Estimate::generic(machine),
            _ => Estimate::default(),
        })
    }
    fn lower(&self, job: &Job<'_>) -> Result<Lowered, EmbedError> {
        let (machine, spec, knobs) = (job.machine, job.spec, job.knobs);
        let number = knobs.variant.unwrap_or(400);
        let variant = Variant::from_number(number).ok_or_else(|| {
            EmbedError::NotApplicable(format!(
                "`cube-planes` has variants 300 and 400, not {number}"
            ))
        })?;
        lower(spec, job.name, machine, variant)
    }
}

/// The method's two ways to do phases 2 and 3.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    /// Method 300: opposite swap, pair reduce-scatter, ring allgather (8 steps).
    V300,
    /// Method 400: pair allgather, opposite allreduce, pair swap (6 steps).
    V400,
}

impl Variant {
    /// The variant numbered `n` (the seed's method number), if any.
    pub fn from_number(n: u32) -> Option<Variant> {
        match n {
            300 => Some(Variant::V300),
            400 => Some(Variant::V400),
            _ => None,
        }
    }

    /// The seed's method number.
    pub fn number(self) -> u32 {
        match self {
            Variant::V300 => 300,
            Variant::V400 => 400,
        }
    }
}

/// One candidate of the start search.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Choice {
    /// Phase-1 rings turn clockwise seen from outside (else counter-clockwise).
    pub clockwise: bool,
    /// Per face (layout order), the position in its counter-clockwise cycle of its start node.
    pub starts: [usize; 6],
    /// Per pair of faces, which parallel edges of its first face pair the partners: 0 pairs
    /// cycle positions 0–1 and 2–3, 1 pairs 1–2 and 3–0.
    pub partners: [usize; 3],
}

/// The result of the search: the choice taken and how many were rejected before it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Found {
    /// The first valid choice.
    pub choice: Choice,
    /// Candidates rejected before it.
    pub rejected: usize,
}

/// The cube as the method sees it: faces with node ids, opposite nodes, coordinates.
struct Cube<'a> {
    machine: &'a Machine,
    layout: &'a CubeLayout,
    /// `opp[f][x]`: node `x`'s neighbour on the face opposite face `f` (`x` on face `f`).
    opp: Vec<IdVec<NodeId, Option<NodeId>>>,
    /// `links[x][y]`: the link joining nodes `x` and `y`.
    links: IdVec<NodeId, IdVec<NodeId, Option<schedule_ir::LinkId>>>,
}

impl<'a> Cube<'a> {
    fn new(machine: &'a Machine) -> Result<Cube<'a>, EmbedError> {
        let Shape::Cube(layout) = &machine.shape else {
            let broke = machine.failed.broke(|s| matches!(s, Shape::Cube(_)));
            return Err(EmbedError::NotApplicable(format!(
                "`cube-planes` runs on intact `Cube` machines only{broke}"
            )));
        };
        let n = machine.node_count();
        let mut opp = vec![IdVec::filled(None, n); layout.faces.len()];
        for (f, face) in layout.faces.iter().enumerate() {
            let other = &layout.faces[CubeLayout::opposite(f)].cycle;
            for &x in &face.cycle {
                if let Some(slot) = opp[f].get_mut(x) {
                    *slot = machine
                        .links_at(x)
                        .into_iter()
                        .map(|(_, w)| w)
                        .find(|w| other.contains(w));
                }
            }
        }
        let links = IdVec::from_fn(n, |x| IdVec::from_fn(n, |y| link_between(machine, x, y)));
        Ok(Cube {
            machine,
            layout,
            opp,
            links,
        })
    }

    fn opp(&self, f: usize, x: NodeId) -> Result<NodeId, EmbedError> {
        self.opp[f]
            .get(x)
            .copied()
            .flatten()
            .ok_or_else(|| missing(x))
    }

    /// Face `f`'s phase-1 ring under `choice`, from its start node.
    fn ring(&self, f: usize, choice: &Choice) -> [NodeId; 4] {
        let c = self.layout.faces[f].cycle;
        let cyc = if choice.clockwise {
            [c[0], c[3], c[2], c[1]]
        } else {
            c
        };
        let s = choice.starts[f];
        [0, 1, 2, 3].map(|i| cyc[(s + i) % 4])
    }

    /// Node `x`'s partner on face `f` under `choice`.
    fn partner(&self, f: usize, x: NodeId, choice: &Choice) -> Result<NodeId, EmbedError> {
        let first = f & !1;
        let m = choice.partners[f / 2];
        let partner_on_first = |y: NodeId| -> Result<NodeId, EmbedError> {
            let c = self.layout.faces[first].cycle;
            let i = c.iter().position(|&z| z == y).ok_or_else(|| missing(y))?;
            // Position i pairs with its neighbour along the chosen parallel edges.
            let j = if (i + 4 - m) % 2 == 0 {
                (i + 1) % 4
            } else {
                (i + 3) % 4
            };
            Ok(c[j])
        };
        if f == first {
            partner_on_first(x)
        } else {
            let y = self.opp(f, x)?;
            self.opp(first, partner_on_first(y)?)
        }
    }

    /// Node `x`'s neighbour on face `f` that is not its partner.
    fn other(&self, f: usize, x: NodeId, choice: &Choice) -> Result<NodeId, EmbedError> {
        let p = self.partner(f, x, choice)?;
        let c = self.layout.faces[f].cycle;
        let i = c.iter().position(|&z| z == x).ok_or_else(|| missing(x))?;
        let (u, v) = (c[(i + 1) % 4], c[(i + 3) % 4]);
        Ok(if u == p { v } else { u })
    }

    fn transfer(
        &self,
        from: NodeId,
        to: NodeId,
        chunks: Vec<ChunkId>,
        mode: RecvMode,
    ) -> Result<Move, EmbedError> {
        let link = self
            .links
            .get(from)
            .and_then(|row| row.get(to).copied().flatten())
            .ok_or_else(|| missing(to))?;
        Ok(Move::data(from, to, vec![link], chunks, mode))
    }

    /// Whether phase 2 can meet under `choice`: every node's neighbour across the cube ends
    /// phase 1 holding the sub-segment its partner holds (`sub(opp(x)) = sub(partner(x))`),
    /// which both variants need (300 forwards what it got across the cube to the partner, 400
    /// swaps partners' pairs with the opposite nodes). Read from the rings alone, without
    /// building a candidate's transfers: in the search order, most candidates fail it.
    fn opposites_meet(&self, choice: &Choice) -> Result<bool, EmbedError> {
        let position = |f: usize, x: NodeId| {
            let ring = self.ring(f, choice);
            ring.iter()
                .position(|&y| y == x)
                .map(|i| (i + 1) % 4)
                .ok_or_else(|| missing(x))
        };
        for (f, face) in self.layout.faces.iter().enumerate() {
            for &x in &face.cycle {
                let across = position(CubeLayout::opposite(f), self.opp(f, x)?)?;
                if across != position(f, self.partner(f, x, choice)?)? {
                    return Ok(false);
                }
            }
        }
        Ok(true)
    }

    /// Every BSP step's transfers for `choice` and `variant`.
    fn steps(&self, choice: &Choice, variant: Variant) -> Result<Vec<Vec<Move>>, EmbedError> {
        let faces = self.layout.faces.len();
        let rings: Vec<[NodeId; 4]> = (0..faces).map(|f| self.ring(f, choice)).collect();
        let chunk = |f: usize, j: usize| ChunkId::new(4 * (f / 2) + j % 4);
        // sub[f][x]: the sub-segment node x holds reduced over face f after phase 1.
        let mut sub: Vec<IdVec<NodeId, usize>> =
            vec![IdVec::filled(0, self.machine.node_count()); faces];
        for (f, ring) in rings.iter().enumerate() {
            for (i, &x) in ring.iter().enumerate() {
                if let Some(slot) = sub[f].get_mut(x) {
                    *slot = (i + 1) % 4;
                }
            }
        }
        let sub_of = |f: usize, x: NodeId| -> Result<usize, EmbedError> {
            sub[f].get(x).copied().ok_or_else(|| missing(x))
        };
        let mut steps = Vec::new();
        // Phase 1: ring reduce-scatter on every face.
        for s in 0..3 {
            let mut step = Vec::new();
            for (f, ring) in rings.iter().enumerate() {
                for i in 0..4 {
                    let c = chunk(f, i + 4 - s);
                    step.push(self.transfer(
                        ring[i],
                        ring[(i + 1) % 4],
                        vec![c],
                        RecvMode::Reduce,
                    )?);
                }
            }
            steps.push(step);
        }
        // Phase 2 and, for 400, phase 3: per face, per node on it.
        let per_face = |make: &dyn Fn(usize, NodeId) -> Result<Move, EmbedError>| {
            let mut step = Vec::new();
            for (f, face) in self.layout.faces.iter().enumerate() {
                for &x in &face.cycle {
                    step.push(make(f, x)?);
                }
            }
            Ok::<_, EmbedError>(step)
        };
        match variant {
            Variant::V300 => {
                steps.push(per_face(&|f, x| {
                    let c = chunk(f, sub_of(f, x)?);
                    self.transfer(x, self.opp(f, x)?, vec![c], RecvMode::Store)
                })?);
                steps.push(per_face(&|f, x| {
                    let got = sub_of(f ^ 1, self.opp(f, x)?)?;
                    let p = self.partner(f, x, choice)?;
                    self.transfer(x, p, vec![chunk(f, got)], RecvMode::Reduce)
                })?);
                for t in 0..3 {
                    let mut step = Vec::new();
                    for (f, ring) in rings.iter().enumerate() {
                        for i in 0..4 {
                            let c = chunk(f, i + 1 + 4 - t);
                            step.push(self.transfer(
                                ring[i],
                                ring[(i + 1) % 4],
                                vec![c],
                                RecvMode::Store,
                            )?);
                        }
                    }
                    steps.push(step);
                }
            }
            Variant::V400 => {
                let pair = |f: usize, x: NodeId| -> Result<Vec<ChunkId>, EmbedError> {
                    let p = self.partner(f, x, choice)?;
                    let (a, b) = (sub_of(f, x)?, sub_of(f, p)?);
                    Ok(vec![chunk(f, a.min(b)), chunk(f, a.max(b))])
                };
                steps.push(per_face(&|f, x| {
                    let c = chunk(f, sub_of(f, x)?);
                    self.transfer(x, self.partner(f, x, choice)?, vec![c], RecvMode::Store)
                })?);
                steps.push(per_face(&|f, x| {
                    self.transfer(x, self.opp(f, x)?, pair(f, x)?, RecvMode::Reduce)
                })?);
                steps.push(per_face(&|f, x| {
                    self.transfer(x, self.other(f, x, choice)?, pair(f, x)?, RecvMode::Store)
                })?);
            }
        }
        Ok(steps)
    }
}

fn missing(x: NodeId) -> EmbedError {
    EmbedError::NotApplicable(format!("the cube's links at node {x} are not a cube's"))
}

/// Why `steps` is not a correct allreduce free of conflicts on `machine`, if it is not: a
/// link direction used twice in a step, a contribution combined twice, or a node missing a
/// contribution at the end. Contributions are tracked as sets of nodes per (node, chunk).
pub fn check(machine: &Machine, chunks: usize, steps: &[Vec<Move>]) -> Option<String> {
    let n = machine.node_count();
    let full: u64 = if n >= 64 { u64::MAX } else { (1u64 << n) - 1 };
    let mut held: IdVec<NodeId, IdVec<ChunkId, u64>> = IdVec::from_fn(n, |x: NodeId| {
        IdVec::filled(1u64 << (x.index() % 64), chunks)
    });
    for (k, step) in steps.iter().enumerate() {
        let mut used = std::collections::BTreeSet::new();
        for t in step {
            let &[link] = t.route.as_slice() else {
                return Some(format!("step {k}: a transfer is not between neighbours"));
            };
            let (a, _) = machine.endpoints(link);
            if !used.insert((link, a == t.from)) {
                return Some(format!("step {k}: link {link} is used twice one way"));
            }
        }
        let before = held.clone();
        for t in step {
            for c in &t.chunks {
                let incoming = before.get(t.from).and_then(|h| h.get(c)).copied();
                let mine = held.get_mut(t.to).and_then(|h| h.get_mut(c));
                let (Some(incoming), Some(mine)) = (incoming, mine) else {
                    return Some(format!(
                        "step {k}: {} → {} moves {c}, which is not on the machine",
                        t.from, t.to
                    ));
                };
                match t.mode {
                    RecvMode::Store => *mine = incoming,
                    RecvMode::Reduce if *mine & incoming != 0 => {
                        return Some(format!(
                            "step {k}: node {} combines a contribution twice into chunk {c}",
                            t.to
                        ))
                    }
                    RecvMode::Reduce => *mine |= incoming,
                }
            }
        }
    }
    let incomplete = held.iter_enumerated().find_map(|(x, cs)| {
        cs.iter()
            .position(|&m| m != full)
            .map(|c| format!("node {} ends with chunk {c} incomplete", x.index()))
    });
    incomplete
}

/// Every candidate choice, in the search order.
pub fn candidates() -> impl Iterator<Item = Choice> {
    (0..2 * 4usize.pow(6) * 8).map(|i| {
        let clockwise = i / (4usize.pow(6) * 8) == 1;
        let s = (i / 8) % 4usize.pow(6);
        let starts = [0, 1, 2, 3, 4, 5].map(|f| (s / 4usize.pow(5 - f as u32)) % 4);
        let partners = [0, 1, 2].map(|k| (i >> (2 - k)) & 1);
        Choice {
            clockwise,
            starts,
            partners,
        }
    })
}

/// Why `choice` does not work for `variant` on `machine`, if it does not.
pub fn reject(
    machine: &Machine,
    choice: &Choice,
    variant: Variant,
) -> Result<Option<String>, EmbedError> {
    rejections(machine, std::slice::from_ref(choice), variant).map(|mut r| r.pop().flatten())
}

/// [`reject`] for many choices, sharing the work of reading the cube.
pub fn rejections(
    machine: &Machine,
    choices: &[Choice],
    variant: Variant,
) -> Result<Vec<Option<String>>, EmbedError> {
    let cube = Cube::new(machine)?;
    choices
        .iter()
        .map(|c| Ok(check(machine, 12, &cube.steps(c, variant)?)))
        .collect()
}

/// The first choice that works for `variant` on `machine`.
pub fn search(machine: &Machine, variant: Variant) -> Result<Found, EmbedError> {
    let cube = Cube::new(machine)?;
    for (rejected, choice) in candidates().enumerate() {
        if !cube.opposites_meet(&choice)? {
            continue;
        }
        let steps = cube.steps(&choice, variant)?;
        if check(machine, 12, &steps).is_none() {
            return Ok(Found { choice, rejected });
        }
    }
    Err(EmbedError::NotApplicable(format!(
        "no start choice lets method {} run without conflicts",
        variant.number()
    )))
}

/// Lowers `spec` with the cube-plane method's `variant` on a `Cube` machine.
pub fn lower(
    spec: &PhaseSpec,
    algorithm: &str,
    machine: &Machine,
    variant: Variant,
) -> Result<Lowered, EmbedError> {
    if spec.collective != Collective::AllReduce {
        return Err(EmbedError::NotApplicable(format!(
            "`cube-planes` lowers allreduce only, not {}: its phase 2 leaves every node with the \
             whole result (use `rotated-hd` for reduce-scatter and allgather)",
            spec.collective
        )));
    }
    let found = search(machine, variant)?;
    let phase = lower_choice(spec, algorithm, machine, variant, &found.choice)?;
    let cube = Cube::new(machine)?;
    Ok(Lowered {
        detail: Some(describe(&cube, &found, variant)),
        ..Lowered::phase(phase)
    })
}

/// Lowers `spec` with `choice`, valid or not (the verifier rejects an invalid one): what
/// [`lower`] does with the choice [`search`] finds.
pub fn lower_choice(
    spec: &PhaseSpec,
    algorithm: &str,
    machine: &Machine,
    variant: Variant,
    choice: &Choice,
) -> Result<Phase, EmbedError> {
    let cube = Cube::new(machine)?;
    let steps = cube.steps(choice, variant)?;
    let chunks = vector_chunks(spec.elements, 12, |_| None);
    let plan = Plan::data(chunks, steps, Packing::AsGiven);
    Ok(plan::assemble(spec, algorithm, machine, plan))
}

/// The choice in words: `method 400; rings counter-clockwise from outside, starting abcd:a …`.
fn describe(cube: &Cube<'_>, found: &Found, variant: Variant) -> String {
    let name = |x: NodeId| cube.machine.node(x).name.clone();
    let starts: Vec<String> = cube
        .layout
        .faces
        .iter()
        .enumerate()
        .map(|(f, face)| format!("{}:{}", face.name, name(cube.ring(f, &found.choice)[0])))
        .collect();
    let partners: Vec<String> = (0..cube.layout.faces.len())
        .step_by(2)
        .map(|f| {
            let face = &cube.layout.faces[f];
            let x = face.cycle[0];
            let p = cube.partner(f, x, &found.choice).unwrap_or(x);
            format!("{}{}", name(x), name(p))
        })
        .collect();
    format!(
        "method {}; rings {} from outside, starting {}; partners along {}; \
         {} earlier start choices rejected",
        variant.number(),
        if found.choice.clockwise {
            "clockwise"
        } else {
            "counter-clockwise"
        },
        starts.join(" "),
        partners.join(" "),
        found.rejected
    )
}

impl fmt::Display for Variant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.number())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::lower::testing::machine;

    /// The requirement the search reads first rejects no candidate that the full check would
    /// take, for either variant, and leaves few to build: it is exactly where phase 2 meets.
    #[test]
    fn opposites_that_do_not_meet_fail_the_full_check() {
        let m = machine(r#"Topology(name: "c", machine: Cube(link: (bandwidth_gbps: 100.0)))"#);
        let cube = Cube::new(&m).unwrap();
        let all: Vec<Choice> = candidates().collect();
        let meet: Vec<bool> = all
            .iter()
            .map(|c| cube.opposites_meet(c).unwrap())
            .collect();
        for variant in [Variant::V300, Variant::V400] {
            for (choice, &meets) in all.iter().zip(&meet).step_by(7) {
                let passes = check(&m, 12, &cube.steps(choice, variant).unwrap()).is_none();
                assert!(meets || !passes, "{choice:?} passes {variant:?} unread");
            }
        }
        let read = meet.iter().filter(|&&m| m).count();
        assert!(
            read >= 256 && read * 16 <= all.len(),
            "{read} of {}",
            all.len()
        );
    }
}
