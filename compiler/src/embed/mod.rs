//! Embeddings: structures laid over the machine graph that lowerings run on.
//!
//! Every embedding is *proved* before use, whether it was constructed from a known structure
//! (the ladder's barley-twist rings) or found by search: [`prove_rings`] checks that each ring
//! visits every compute node exactly once over links that really join consecutive nodes, and
//! that no two rings share a link.

pub mod hamiltonian;
pub mod ladder;
pub mod trees;

use crate::machine::Machine;
use schedule_ir::{LinkId, NodeId};
use std::collections::BTreeMap;
use thiserror::Error;

/// A ring: `nodes[i]` sends to `nodes[i+1 mod n]` over `links[i]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ring {
    /// The nodes in ring order.
    pub nodes: Vec<NodeId>,
    /// `links[i]` joins `nodes[i]` and `nodes[i+1 mod n]`.
    pub links: Vec<LinkId>,
}

impl Ring {
    /// The same cycle walked the other way.
    pub fn reversed(&self) -> Ring {
        let n = self.nodes.len();
        let nodes: Vec<NodeId> = (0..n).map(|i| self.nodes[(n - i) % n]).collect();
        // In the reversed ring, nodes[i] = old[-i] sends to old[-i-1] over old link[-i-1].
        let links: Vec<LinkId> = (0..n).map(|i| self.links[(2 * n - i - 1) % n]).collect();
        Ring { nodes, links }
    }

    /// Whether walking the ring both ways would send twice over one link direction: only a
    /// two-node ring that uses the same link there and back.
    pub fn is_one_way_only(&self) -> bool {
        self.nodes.len() == 2 && self.links[0] == self.links[1]
    }

    /// Renders the ring with user-facing names: `N0 -L011-> N1 -L13-> N3 …`.
    pub fn describe(&self, machine: &Machine) -> String {
        let mut s = String::new();
        for (node, link) in self.nodes.iter().zip(&self.links) {
            s.push_str(&format!(
                "{} -{}-> ",
                machine.node(*node).name,
                machine.link(*link).name
            ));
        }
        if let Some(first) = self.nodes.first() {
            s.push_str(&machine.node(*first).name);
        }
        s
    }
}

/// Why a claimed embedding is not valid, or why none could be found.
#[derive(Clone, Debug, Error, PartialEq)]
pub enum EmbedError {
    /// A ring misses a compute node or visits one twice.
    #[error("ring {ring} is not Hamiltonian: {detail}")]
    NotHamiltonian {
        /// Which ring (0-based).
        ring: usize,
        /// What is wrong, with names.
        detail: String,
    },
    /// A ring's link does not join the nodes it claims to.
    #[error("ring {ring}: link {link} does not join {from} and {to}")]
    BadLink {
        /// Which ring.
        ring: usize,
        /// The link's id.
        link: String,
        /// The node before it.
        from: String,
        /// The node after it.
        to: String,
    },
    /// Two rings share a link.
    #[error("rings {first} and {second} both use link {link}")]
    SharedLink {
        /// The first ring using it.
        first: usize,
        /// The second ring using it.
        second: usize,
        /// The link's id.
        link: String,
    },
    /// No Hamiltonian cycle exists (the search was exhaustive).
    #[error("the machine has no Hamiltonian cycle: {reason}")]
    NoHamiltonianCycle {
        /// Why, as precisely as known.
        reason: String,
    },
    /// The search gave up before finding a cycle or proving there is none.
    #[error("no Hamiltonian cycle found within the search budget of {budget} steps")]
    SearchGaveUp {
        /// How many search steps were allowed.
        budget: u64,
    },
    /// A claimed spanning tree is not one (see [`trees::prove_trees`]).
    #[error("tree {tree} is not a spanning tree of the compute nodes: {detail}")]
    NotATree {
        /// Which tree (0-based).
        tree: usize,
        /// What is wrong, with names.
        detail: String,
    },
    /// The structural construction does not apply to this machine.
    #[error("{0}")]
    NotApplicable(String),
}

/// Proves that `rings` are Hamiltonian cycles over the compute nodes, over real links, and
/// pairwise link-disjoint.
pub fn prove_rings(machine: &Machine, rings: &[Ring]) -> Result<(), EmbedError> {
    let compute = machine.compute_nodes();
    let mut owner: BTreeMap<LinkId, usize> = BTreeMap::new();
    for (r, ring) in rings.iter().enumerate() {
        let name = |n: NodeId| machine.node(n).name.clone();
        if ring.nodes.len() != ring.links.len() {
            return Err(EmbedError::NotHamiltonian {
                ring: r,
                detail: format!("{} nodes but {} links", ring.nodes.len(), ring.links.len()),
            });
        }
        let mut seen = vec![false; machine.node_count()];
        for &n in &ring.nodes {
            if n.index() >= seen.len() {
                return Err(EmbedError::NotHamiltonian {
                    ring: r,
                    detail: format!("{n} is not a node of the machine"),
                });
            }
            if std::mem::replace(&mut seen[n.index()], true) {
                return Err(EmbedError::NotHamiltonian {
                    ring: r,
                    detail: format!("{} is visited twice", name(n)),
                });
            }
        }
        if let Some(&missing) = compute.iter().find(|c| !seen[c.index()]) {
            return Err(EmbedError::NotHamiltonian {
                ring: r,
                detail: format!("{} is never visited", name(missing)),
            });
        }
        let n = ring.nodes.len();
        let mut own: Vec<LinkId> = Vec::with_capacity(n);
        for i in 0..n {
            let (from, to, link) = (ring.nodes[i], ring.nodes[(i + 1) % n], ring.links[i]);
            let (a, b) = machine.endpoints(link);
            if !((a == from && b == to) || (a == to && b == from)) {
                return Err(EmbedError::BadLink {
                    ring: r,
                    link: machine.link(link).name.clone(),
                    from: name(from),
                    to: name(to),
                });
            }
            own.push(link);
        }
        own.sort();
        own.dedup();
        for link in own {
            if let Some(&first) = owner.get(&link) {
                return Err(EmbedError::SharedLink {
                    first,
                    second: r,
                    link: machine.link(link).name.clone(),
                });
            }
            owner.insert(link, r);
        }
    }
    Ok(())
}
