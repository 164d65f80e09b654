//! Seed 004's two "barley-twist" rings on a ladder, built from its structure.
//!
//! Ring 1 crosses every pair on its first rung and walks the ladder links on alternating
//! sides: `N0 N1 N3 N2 N4 N5 N7 N6`. Ring 2 crosses on the second rungs and takes the other
//! side at every position: `N0 N2 N3 N5 N4 N6 N7 N1`. Entering pair `k` on one side and leaving
//! on the other flips the side once per pair, so the rings close only when the number of pairs
//! is even; with an odd number no pair of link-disjoint Hamiltonian rings exists at all (a
//! Hamiltonian cycle of the ladder either crosses every pair, which needs an even count, or
//! leaves both side links of one position unused, and then its complement is not connected).

use super::{EmbedError, Ring};
use crate::machine::ladder::LadderLayout;
use schedule_ir::{LinkId, NodeId};

/// The two barley-twist rings of a ladder with an even number of pairs (or a single pair,
/// whose one "ring" crosses over one rung and back over the other).
pub fn barley_twist(layout: &LadderLayout) -> Result<Vec<Ring>, EmbedError> {
    let p = layout.pairs;
    if p == 1 {
        return Ok(vec![Ring::direct(
            vec![layout.node(0, 0), layout.node(0, 1)],
            vec![layout.rungs[0][0], layout.rungs[0][1]],
        )]);
    }
    if p % 2 == 1 {
        return Err(EmbedError::NotApplicable(format!(
            "a ladder of {p} pairs has no two link-disjoint Hamiltonian rings: each barley-twist \
             ring changes side at every pair and returns to its start only after an even number \
             of pairs"
        )));
    }
    // Ring 1: enter pair k on side k%2, cross on rung lane 0, leave on side (k+1)%2.
    let mut r1_nodes: Vec<NodeId> = Vec::with_capacity(2 * p);
    let mut r1_links: Vec<LinkId> = Vec::with_capacity(2 * p);
    for k in 0..p {
        let s = k % 2;
        r1_nodes.push(layout.node(k, s));
        r1_links.push(layout.rungs[k][0]);
        r1_nodes.push(layout.node(k, 1 - s));
        r1_links.push(layout.sides[k][1 - s]);
    }
    // Ring 2: from N0 along side 0 to pair 1; enter pair k (k = 1.., then 0) on side (k+1)%2,
    // cross on rung lane 1, leave on side k%2.
    let mut r2_nodes = vec![layout.node(0, 0)];
    let mut r2_links = vec![layout.sides[0][0]];
    for step in 1..=p {
        let k = step % p;
        let s = (k + 1) % 2;
        r2_nodes.push(layout.node(k, s));
        r2_links.push(layout.rungs[k][1]);
        if k != 0 {
            r2_nodes.push(layout.node(k, 1 - s));
            r2_links.push(layout.sides[k][1 - s]);
        }
    }
    // The walk ends on pair 0's side-1 node, whose second rung closes the ring at N0.
    Ok(vec![
        Ring::direct(r1_nodes, r1_links),
        Ring::direct(r2_nodes, r2_links),
    ])
}
