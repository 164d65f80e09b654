//! `Ladder(pairs)`: the ladder of facing pairs.
//!
//! Pair `k` is nodes `N(2k)` (side 0) and `N(2k+1)` (side 1), joined by two "rung" links. On
//! each side, a ladder link joins pair `k` to pair `k+1`, and a return link joins the last pair
//! to the first (`L06`, `L17` for four pairs), so every node has four links. With two pairs
//! the ladder and return links join the same nodes and get lane digits (`L021`, `L022`); a
//! single pair has only its two rungs. Link ids follow [`super::names`].
//!
//! Link ids are laid out as: all rungs in pair order (lane 1 then lane 2), then the side links
//! by position (`position k` joins pair `k` and pair `k+1 mod pairs`), side 0 then side 1.

use super::{names, Machine, Shape};
use crate::topology::ast::LinkParams;
use schedule_ir::{LinkId, NodeId};

/// Where the links of a ladder are, so that embeddings can be built from the structure
/// instead of searched for.
#[derive(Clone, Debug, PartialEq)]
pub struct LadderLayout {
    /// Number of facing pairs.
    pub pairs: usize,
    /// `rungs[k]` = the two links of pair `k`.
    pub rungs: Vec<[LinkId; 2]>,
    /// `sides[k][s]` = the link on side `s` from pair `k` to pair `k+1 mod pairs`. Empty for a
    /// single pair.
    pub sides: Vec<[LinkId; 2]>,
}

impl LadderLayout {
    /// The node on side `s` of pair `k`.
    pub fn node(&self, k: usize, s: usize) -> NodeId {
        NodeId::new(2 * k + s)
    }
}

/// Builds a ladder of `pairs >= 1` pairs.
pub fn ladder(name: &str, pairs: usize, link: LinkParams, rung: LinkParams) -> Machine {
    let n = 2 * pairs;
    let mut links = Vec::new();
    let mut params = Vec::new();
    for k in 0..pairs {
        for _ in 0..2 {
            links.push((2 * k, 2 * k + 1));
            params.push(rung);
        }
    }
    let positions = if pairs > 1 { pairs } else { 0 };
    for k in 0..positions {
        for s in 0..2 {
            links.push((2 * k + s, 2 * ((k + 1) % pairs) + s));
            params.push(link);
        }
    }
    let layout = LadderLayout {
        pairs,
        rungs: (0..pairs)
            .map(|k| [LinkId::new(2 * k), LinkId::new(2 * k + 1)])
            .collect(),
        sides: (0..positions)
            .map(|k| {
                [
                    LinkId::new(2 * pairs + 2 * k),
                    LinkId::new(2 * pairs + 2 * k + 1),
                ]
            })
            .collect(),
    };
    names::uniform(name, n, &links, &params, Shape::Ladder(layout))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(m: &Machine) -> Vec<String> {
        m.graph.edge_weights().map(|l| l.name.clone()).collect()
    }

    #[test]
    fn eight_nodes_use_the_seed_link_ids() {
        let m = ladder("l", 4, LinkParams::default(), LinkParams::default());
        assert_eq!(
            ids(&m),
            [
                "L011", "L012", "L231", "L232", "L451", "L452", "L671", "L672", "L02", "L13",
                "L24", "L35", "L46", "L57", "L06", "L17"
            ]
        );
        for node in 0..8 {
            assert_eq!(
                m.links_at(NodeId::new(node)).len(),
                4,
                "N{node} has 4 links"
            );
        }
    }

    #[test]
    fn two_pairs_get_lanes_on_parallel_ladder_links() {
        let m = ladder("l", 2, LinkParams::default(), LinkParams::default());
        assert_eq!(
            ids(&m),
            ["L011", "L012", "L231", "L232", "L021", "L131", "L022", "L132"]
        );
    }

    #[test]
    fn twelve_pairs_use_dotted_ids() {
        let m = ladder("l", 12, LinkParams::default(), LinkParams::default());
        let names = ids(&m);
        assert!(names.contains(&"L10.11.1".to_string()));
        assert!(
            names.contains(&"L0.22".to_string()),
            "return link on side 0"
        );
        let unique: std::collections::BTreeSet<_> = names.iter().collect();
        assert_eq!(unique.len(), names.len());
    }
}
