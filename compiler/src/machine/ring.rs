//! `Ring(nodes)`: nodes `N0 … N(n-1)` in a cycle; link `i` joins `Ni` and `N(i+1 mod n)`.
//! Two nodes make a ring of two parallel links (`L011`, `L012`).

use super::{names, Machine, Shape};
use crate::topology::ast::LinkParams;

/// Builds a ring of `n >= 2` nodes.
pub fn ring(name: &str, n: usize, link: LinkParams) -> Machine {
    let links: Vec<(usize, usize)> = (0..n).map(|i| (i, (i + 1) % n)).collect();
    names::uniform(name, n, &links, &vec![link; n], Shape::Ring)
}
