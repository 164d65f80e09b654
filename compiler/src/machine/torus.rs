//! `Torus(dims: [..])`: one node per point of a grid, linked to its neighbours along every
//! dimension, with wrap-around links; and `Mesh(dims: [..])`, the same grid without them.
//!
//! Nodes are named by their coordinates, `N(x,y)` for two dimensions (`N(3)` for one,
//! `N(1,0,2)` for three), and numbered in lexicographic order of the coordinates: `N(0,0)`,
//! `N(0,1)`, …, `N(0,3)`, `N(1,0)`, … for a 4 × 4 torus. The link from a node to the next node
//! along dimension `k` is named by both coordinates, the node first: `L(1,2)-(2,2)`, and the
//! wrap-around links of a 4 × 4 torus are `L(3,y)-(0,y)` and `L(x,3)-(x,0)`. Links are laid out
//! node by node, and for each node dimension by dimension.
//!
//! A dimension of size 2 gets one link per pair of nodes, not two parallel ones: going "up" or
//! wrapping around reaches the same neighbour, and a second link there would be a different
//! machine. (Declare a `Graph` for that one.) A dimension of size 1 adds nothing and is refused.
//!
//! A mesh has the same nodes, names and link order, less the wrap-around links: a node at the
//! end of a dimension has no link onward along it.

use super::{LinkInfo, Machine, NodeInfo, Shape};
use crate::topology::ast::LinkParams;
use schedule_ir::NodeKind;

/// The coordinates of node `index` in a grid of sizes `dims` (dimension 0 slowest).
pub fn coords(dims: &[usize], mut index: usize) -> Vec<usize> {
    let mut c = vec![0; dims.len()];
    for k in (0..dims.len()).rev() {
        c[k] = index % dims[k];
        index /= dims[k];
    }
    c
}

/// The index of the node at `coords`.
pub fn index(dims: &[usize], coords: &[usize]) -> usize {
    dims.iter().zip(coords).fold(0, |acc, (&d, &c)| acc * d + c)
}

fn spell(c: &[usize]) -> String {
    let parts: Vec<String> = c.iter().map(ToString::to_string).collect();
    format!("({})", parts.join(","))
}

/// The name of the node at `coords`: `N(1,2)`.
pub fn node_name(coords: &[usize]) -> String {
    format!("N{}", spell(coords))
}

/// Builds a torus; every size is at least 2 and their product at most
/// [`super::build::MAX_NODES`].
pub fn torus(name: &str, dims: &[usize], link: LinkParams) -> Machine {
    grid(name, dims, link, true)
}

/// Builds a mesh: the torus without its wrap-around links, named and laid out the same way.
pub fn mesh(name: &str, dims: &[usize], link: LinkParams) -> Machine {
    grid(name, dims, link, false)
}

/// A grid of the given sizes, with wrap-around links when `wrap`.
fn grid(name: &str, dims: &[usize], link: LinkParams, wrap: bool) -> Machine {
    let n: usize = dims.iter().product();
    let nodes = (0..n)
        .map(|i| NodeInfo {
            name: node_name(&coords(dims, i)),
            kind: NodeKind::Compute,
        })
        .collect();
    let mut links = Vec::with_capacity(n * dims.len());
    for i in 0..n {
        let here = coords(dims, i);
        for (k, &size) in dims.iter().enumerate() {
            if size == 2 && here[k] == 1 {
                continue; // the pair already has its one link
            }
            if !wrap && here[k] + 1 == size {
                continue; // a mesh ends here
            }
            let mut next = here.clone();
            next[k] = (here[k] + 1) % size;
            let id = format!("L{}-{}", spell(&here), spell(&next));
            links.push((i, index(dims, &next), LinkInfo::new(id, &link)));
        }
    }
    let dims = dims.to_vec();
    let shape = if wrap {
        Shape::Torus { dims }
    } else {
        Shape::Mesh { dims }
    };
    Machine::from_parts(name, nodes, links, shape)
}

#[cfg(test)]
mod tests {
    use super::*;
    use schedule_ir::{LinkId, NodeId};

    #[test]
    fn four_by_four_is_four_regular_with_readable_names() {
        let m = torus("t", &[4, 4], LinkParams::default());
        assert_eq!(m.link_count(), 32);
        for i in 0..16 {
            assert_eq!(m.links_at(NodeId::new(i)).len(), 4);
        }
        assert_eq!(m.node(NodeId::new(6)).name, "N(1,2)");
        assert_eq!(m.link(LinkId::new(0)).name, "L(0,0)-(1,0)");
        assert_eq!(m.link(LinkId::new(1)).name, "L(0,0)-(0,1)");
        assert!(m.link_by_name("L(3,2)-(0,2)").is_some(), "wrap-around");
    }

    #[test]
    fn a_mesh_is_the_torus_without_wrap_around() {
        let m = mesh("m", &[3, 4], LinkParams::default());
        // 3 rows of 3 links along dimension 1, 4 columns of 2 along dimension 0.
        assert_eq!(m.link_count(), 9 + 8);
        assert_eq!(m.links_at(NodeId::new(0)).len(), 2, "a corner");
        assert_eq!(m.links_at(NodeId::new(4)).len(), 3, "an edge: (1,0)");
        assert_eq!(m.links_at(NodeId::new(5)).len(), 4, "inside: (1,1)");
        assert!(m.link_by_name("L(2,0)-(0,0)").is_none());
        assert!(m.link_by_name("L(1,2)-(2,2)").is_some());
        assert_eq!(m.shape, Shape::Mesh { dims: vec![3, 4] });
    }

    #[test]
    fn size_two_dimensions_have_one_link_per_pair() {
        let m = torus("t", &[2, 3], LinkParams::default());
        assert_eq!(m.link_count(), 3 + 6);
        assert_eq!(m.links_at(NodeId::new(0)).len(), 3);
        assert_eq!(index(&[2, 3], &coords(&[2, 3], 5)), 5);
    }
}
