//! `FullMesh(nodes)`: every two compute nodes joined by one link.
//!
//! Nodes are `N0 … N(n-1)`; links follow [`super::names`] (`L01`, `L02`, …, dotted from eleven
//! nodes on) and are laid out in lexicographic order of their endpoints: `N0–N1, N0–N2, …,
//! N1–N2, …`.

use super::{names, Machine, Shape};
use crate::topology::ast::LinkParams;

/// Builds a full mesh of `n >= 2` nodes.
pub fn full_mesh(name: &str, n: usize, link: LinkParams) -> Machine {
    let links: Vec<(usize, usize)> = (0..n)
        .flat_map(|a| (a + 1..n).map(move |b| (a, b)))
        .collect();
    let params = vec![link; links.len()];
    names::uniform(name, n, &links, &params, Shape::FullMesh)
}
