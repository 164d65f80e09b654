//! `Hypercube(dims)` and the `Cube` with named faces.
//!
//! **Hypercube.** Nodes `N0 … N(2^dims - 1)`; node `Ni` is linked to `N(i XOR 2^k)` for every
//! dimension `k`. Link ids follow [`super::names`] (`L01`, `L02`, `L04` for three dimensions;
//! dotted from sixteen nodes on: `L0.1`, `L5.13`) and are laid out by dimension, then by the
//! lower node: dimension 0's links `N0–N1, N2–N3, …`, then dimension 1's, and so on.
//!
//! **Cube**. The eight vertices are `a … h`, with coordinates
//! `a (0,0,0)  b (1,0,0)  c (1,1,0)  d (0,1,0)  e (0,0,1)  f (1,0,1)  g (1,1,1)  h (0,1,1)`,
//! so that the seed's six faces are the planes `z = 0` (`abcd`), `z = 1` (`efgh`), `y = 0`
//! (`abef`), `y = 1` (`dchg`), `x = 0` (`adeh`) and `x = 1` (`bcgf`), and the opposite pairs are
//! `abcd`/`efgh` (the seed's pair R), `abef`/`dchg` (G) and `adeh`/`bcgf` (B). Node `a` has links
//! `ab`, `ad` and `ae`, exactly as the seed says; every link id is its two letters in
//! alphabetical order. Opposite nodes across pair R are `a–e`, `b–f`, `c–g`, `d–h`. As cycles,
//! the faces are `a-b-c-d`, `e-f-g-h`, `a-b-f-e`, `d-c-g-h`, `a-d-h-e` and `b-c-g-f` (the seed's
//! names list a face's letters, not always in cycle order). [`CubeLayout`] keeps them, each
//! oriented counter-clockwise as seen from outside the cube, the way all faces turn in the
//! seed's phase 1, so that every link is walked once each way by the six face rings.

use super::{names, LinkInfo, Machine, NodeInfo, Shape};
use crate::topology::ast::LinkParams;
use schedule_ir::{LinkId, NodeId, NodeKind};

/// One face of the cube.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CubeFace {
    /// The seed's name of the face (`abcd`).
    pub name: &'static str,
    /// The seed's name of its pair of opposite faces: `R`, `G` or `B`.
    pub pair: char,
    /// The face's nodes counter-clockwise as seen from outside, from the face name's first
    /// letter.
    pub cycle: [NodeId; 4],
    /// `links[i]` joins `cycle[i]` and `cycle[(i + 1) % 4]`.
    pub links: [LinkId; 4],
}

/// The cube's faces, in the cube-plane method's order: `abcd efgh abef dchg adeh bcgf`. Faces `2k` and
/// `2k + 1` are opposite.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CubeLayout {
    /// The six faces.
    pub faces: Vec<CubeFace>,
}

impl CubeLayout {
    /// The face opposite face `f`.
    pub fn opposite(f: usize) -> usize {
        f ^ 1
    }
}

/// The cube's vertex letters in node order, with their (x, y, z) coordinates.
const VERTICES: [(char, [u8; 3]); 8] = [
    ('a', [0, 0, 0]),
    ('b', [1, 0, 0]),
    ('c', [1, 1, 0]),
    ('d', [0, 1, 0]),
    ('e', [0, 0, 1]),
    ('f', [1, 0, 1]),
    ('g', [1, 1, 1]),
    ('h', [0, 1, 1]),
];

/// The twelve links, in id order: the `abcd` face, the `efgh` face, then the four between them.
const EDGES: [(usize, usize); 12] = [
    (0, 1),
    (1, 2),
    (2, 3),
    (0, 3),
    (4, 5),
    (5, 6),
    (6, 7),
    (4, 7),
    (0, 4),
    (1, 5),
    (2, 6),
    (3, 7),
];

/// The faces as (name, pair, counter-clockwise cycle seen from outside).
const FACES: [(&str, char, [usize; 4]); 6] = [
    ("abcd", 'R', [0, 3, 2, 1]),
    ("efgh", 'R', [4, 5, 6, 7]),
    ("abef", 'G', [0, 1, 5, 4]),
    ("dchg", 'G', [3, 7, 6, 2]),
    ("adeh", 'B', [0, 4, 7, 3]),
    ("bcgf", 'B', [1, 2, 6, 5]),
];

/// Builds the cube of the cube-plane method.
pub fn cube(name: &str, link: LinkParams) -> Machine {
    let letter = |i: usize| VERTICES[i].0;
    let nodes = VERTICES
        .iter()
        .map(|(c, _)| NodeInfo {
            name: c.to_string(),
            kind: NodeKind::Compute,
        })
        .collect();
    let links = EDGES
        .iter()
        .map(|&(a, b)| {
            (
                a,
                b,
                LinkInfo::new(format!("{}{}", letter(a), letter(b)), &link),
            )
        })
        .collect();
    let link_of = |a: usize, b: usize| {
        let j = EDGES
            .iter()
            .position(|&e| e == (a.min(b), a.max(b)))
            .unwrap_or(0);
        LinkId::new(j)
    };
    let faces = FACES
        .iter()
        .map(|&(face, pair, cycle)| CubeFace {
            name: face,
            pair,
            cycle: cycle.map(NodeId::new),
            links: [0, 1, 2, 3].map(|i| link_of(cycle[i], cycle[(i + 1) % 4])),
        })
        .collect();
    Machine::from_parts(name, nodes, links, Shape::Cube(CubeLayout { faces }))
}

/// Builds a hypercube of `dims` (1 to 14) dimensions.
pub fn hypercube(name: &str, dims: u32, link: LinkParams) -> Machine {
    let n = 1usize << dims;
    let mut links = Vec::with_capacity(n * dims as usize / 2);
    for k in 0..dims {
        for i in (0..n).filter(|i| i & (1 << k) == 0) {
            links.push((i, i | (1 << k)));
        }
    }
    let params = vec![link; links.len()];
    names::uniform(name, n, &links, &params, Shape::Hypercube { dims })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn letters(m: &Machine, ids: &[NodeId]) -> String {
        ids.iter().map(|&n| m.node(n).name.as_str()).collect()
    }

    #[test]
    fn cube_is_seed_000s() {
        let m = cube("c", LinkParams::default());
        let a = m.node_by_name("a").unwrap_or(NodeId(99));
        let links: Vec<&str> = m
            .links_at(a)
            .iter()
            .map(|&(l, _)| m.link(l).name.as_str())
            .collect();
        assert_eq!(links, ["ab", "ad", "ae"], "the seed's links at a");
        let Shape::Cube(layout) = &m.shape else {
            unreachable!("a cube has a cube layout")
        };
        let names: Vec<&str> = layout.faces.iter().map(|f| f.name).collect();
        assert_eq!(names, ["abcd", "efgh", "abef", "dchg", "adeh", "bcgf"]);
        // Each face holds the four letters of its name, as a 4-cycle over real links.
        let mut walked: BTreeMap<(NodeId, NodeId), usize> = BTreeMap::new();
        for f in &layout.faces {
            let mut held: Vec<char> = letters(&m, &f.cycle).chars().collect();
            let mut want: Vec<char> = f.name.chars().collect();
            held.sort_unstable();
            want.sort_unstable();
            assert_eq!(held, want, "face {}", f.name);
            for i in 0..4 {
                let (u, v) = (f.cycle[i], f.cycle[(i + 1) % 4]);
                let (x, y) = m.endpoints(f.links[i]);
                assert!((x, y) == (u, v) || (x, y) == (v, u), "face {}", f.name);
                *walked.entry((u, v)).or_default() += 1;
            }
        }
        // All faces counter-clockwise from outside: every link once in each direction.
        assert_eq!(walked.len(), 24);
        assert!(walked.values().all(|&c| c == 1));
        // Opposite faces pair up the seed's opposite nodes a–e, b–f, c–g, d–h.
        for (u, v) in [("a", "e"), ("b", "f"), ("c", "g"), ("d", "h")] {
            let u = m.node_by_name(u).unwrap_or(NodeId(99));
            let v = m.node_by_name(v).unwrap_or(NodeId(99));
            assert!(m.links_at(u).iter().any(|&(_, w)| w == v));
        }
        assert_eq!(
            letters(&m, &layout.faces[0].cycle),
            "adcb",
            "the seed's a→d→c→b"
        );
    }

    #[test]
    fn hypercube_links_flip_one_bit() {
        let m = hypercube("h", 4, LinkParams::default());
        assert_eq!(m.link_count(), 32);
        for j in 0..m.link_count() {
            let (a, b) = m.endpoints(LinkId::new(j));
            assert_eq!((a.index() ^ b.index()).count_ones(), 1);
        }
        assert_eq!(m.link(LinkId::new(0)).name, "L0.1");
        assert_eq!(m.link(LinkId::new(8)).name, "L0.2");
        let small = hypercube("h", 3, LinkParams::default());
        assert_eq!(small.link(LinkId::new(11)).name, "L37");
    }
}
