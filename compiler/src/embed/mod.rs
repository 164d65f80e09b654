//! Embeddings: structures laid over the machine graph that lowerings run on.
//!
//! Every embedding is *proved* before use, whether it was constructed from a known structure
//! (the ladder's barley-twist rings) or found by search: [`prove_rings`] checks that each ring
//! visits every compute node exactly once over links that really join consecutive nodes, and
//! that no two rings share a link.

pub mod groups;
pub mod hamiltonian;
pub mod ladder;
pub mod routed;
pub mod structured;
pub mod trees;

use crate::ids::IdVec;
use crate::machine::Machine;
use schedule_ir::{LinkId, NodeId, NodeKind};
use std::collections::BTreeMap;
use thiserror::Error;

/// A ring: `nodes[i]` sends to `nodes[i+1 mod n]`, leaving on `links[i]` and, when the two are
/// not adjacent, crossing the switches of `via[i]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ring {
    /// The nodes in ring order.
    pub nodes: Vec<NodeId>,
    /// `links[i]` is the first link of the hop from `nodes[i]` to `nodes[i+1 mod n]`; for a
    /// direct hop, the link that joins them.
    pub links: Vec<LinkId>,
    /// `via[i]` is the rest of hop `i`'s route, through forwarding switches; empty for a direct
    /// hop. Same length as `nodes`.
    pub via: Vec<Vec<LinkId>>,
}

impl Ring {
    /// A ring of direct hops: `links[i]` joins `nodes[i]` and `nodes[i+1 mod n]`.
    pub fn direct(nodes: Vec<NodeId>, links: Vec<LinkId>) -> Ring {
        let via = vec![Vec::new(); links.len()];
        Ring { nodes, links, via }
    }

    /// The route of hop `i`: `links[i]` followed by `via[i]`.
    pub fn route(&self, i: usize) -> impl Iterator<Item = LinkId> + '_ {
        std::iter::once(self.links[i]).chain(self.via[i].iter().copied())
    }

    /// The last link of hop `i`'s route, the one its receiver names.
    pub fn last_link(&self, i: usize) -> LinkId {
        self.via[i].last().copied().unwrap_or(self.links[i])
    }

    /// Whether some hop crosses a switch.
    pub fn is_routed(&self) -> bool {
        self.via.iter().any(|v| !v.is_empty())
    }

    /// The same cycle walked the other way, each hop's route reversed.
    pub fn reversed(&self) -> Ring {
        let n = self.nodes.len();
        let nodes: Vec<NodeId> = (0..n).map(|i| self.nodes[(n - i) % n]).collect();
        // In the reversed ring, nodes[i] = old[-i] sends to old[-i-1] over old hop -i-1, backwards.
        let mut links = Vec::with_capacity(n);
        let mut via = Vec::with_capacity(n);
        for i in 0..n {
            let mut route: Vec<LinkId> = self.route((2 * n - i - 1) % n).collect();
            route.reverse();
            links.push(route[0]);
            via.push(route[1..].to_vec());
        }
        Ring { nodes, links, via }
    }

    /// Renders the ring with user-facing names: `N0 -L011-> N1 -L13-> N3 …`; a hop through
    /// switches lists its route in brackets: `p2 -[s0-p2 root-s0 root-s1 s1-p3]-> p3`.
    pub fn describe(&self, machine: &Machine) -> String {
        let mut s = String::new();
        for (i, node) in self.nodes.iter().enumerate() {
            let route: Vec<&str> = self
                .route(i)
                .map(|l| machine.link(l).name.as_str())
                .collect();
            if route.len() == 1 {
                s.push_str(&format!("{} -{}-> ", machine.node(*node).name, route[0]));
            } else {
                s.push_str(&format!(
                    "{} -[{}]-> ",
                    machine.node(*node).name,
                    route.join(" ")
                ));
            }
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
    /// A ring's hop does not lead from one node to the next, or is forwarded by a compute node.
    #[error(
        "ring {ring}: the route {route} from {from} does not reach {to} through switches only"
    )]
    BadRoute {
        /// Which ring.
        ring: usize,
        /// The route's link ids.
        route: String,
        /// The node before it.
        from: String,
        /// The node after it.
        to: String,
    },
    /// Two consecutive ring nodes have no route between them through switches.
    #[error("no route from {from} to {to} passes through switches only, and a ring's hops are forwarded by switches only")]
    NoRoute {
        /// The sending node.
        from: String,
        /// The receiving node.
        to: String,
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
    /// More rings use a link of several lanes than it has lanes.
    #[error("rings {rings} use link {link}, which has {lanes} lanes")]
    LanesExceeded {
        /// The rings using it, listed for people ("0, 1 and 2").
        rings: String,
        /// The link's id.
        link: String,
        /// How many rings it can carry.
        lanes: u32,
    },
    /// More rings share a link than it may carry.
    #[error("rings {rings} use link {link}, which carries at most {most}")]
    OverShared {
        /// The rings using it, listed for people ("0, 1 and 2").
        rings: String,
        /// The link's id.
        link: String,
        /// How many rings it may carry.
        most: u32,
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
    /// The schedule would be larger than the budget or topoc's limits allow
    /// ([`crate::limits`]).
    #[error("the schedule {0}")]
    OverBudget(crate::limits::Refusal),
}

/// Proves that `rings` are Hamiltonian cycles over the compute nodes, each hop a real link or a
/// route that reaches the next node through switches only, and that no link carries more rings
/// than it has lanes (so no two rings share a link of one lane).
pub fn prove_rings(machine: &Machine, rings: &[Ring]) -> Result<(), EmbedError> {
    prove_shared_rings(machine, rings, 1)
}

/// [`prove_rings`] for rings that may share links: at most `share` rings on each lane.
pub fn prove_shared_rings(machine: &Machine, rings: &[Ring], share: u32) -> Result<(), EmbedError> {
    let compute = machine.compute_nodes();
    let mut owner: BTreeMap<LinkId, Vec<usize>> = BTreeMap::new();
    for (r, ring) in rings.iter().enumerate() {
        let name = |n: NodeId| machine.node(n).name.clone();
        if ring.nodes.len() != ring.links.len() {
            return Err(EmbedError::NotHamiltonian {
                ring: r,
                detail: format!("{} nodes but {} links", ring.nodes.len(), ring.links.len()),
            });
        }
        let mut seen: IdVec<NodeId, bool> = IdVec::filled(false, machine.node_count());
        for &n in &ring.nodes {
            let Some(visited) = seen.get_mut(n) else {
                return Err(EmbedError::NotHamiltonian {
                    ring: r,
                    detail: format!("{n} is not a node of the machine"),
                });
            };
            if std::mem::replace(visited, true) {
                return Err(EmbedError::NotHamiltonian {
                    ring: r,
                    detail: format!("{} is visited twice", name(n)),
                });
            }
        }
        if let Some(&missing) = compute.iter().find(|&&c| !seen[c]) {
            return Err(EmbedError::NotHamiltonian {
                ring: r,
                detail: format!("{} is never visited", name(missing)),
            });
        }
        let n = ring.nodes.len();
        if ring.via.len() != n {
            return Err(EmbedError::NotHamiltonian {
                ring: r,
                detail: format!("{n} nodes but {} routes", ring.via.len()),
            });
        }
        let mut own: Vec<LinkId> = Vec::with_capacity(n);
        for i in 0..n {
            let (from, to) = (ring.nodes[i], ring.nodes[(i + 1) % n]);
            if ring.via[i].is_empty() {
                let link = ring.links[i];
                let (a, b) = machine.endpoints(link);
                if !((a == from && b == to) || (a == to && b == from)) {
                    return Err(EmbedError::BadLink {
                        ring: r,
                        link: machine.link(link).name.clone(),
                        from: name(from),
                        to: name(to),
                    });
                }
            } else if !route_reaches(machine, from, to, ring.route(i)) {
                let route: Vec<String> = ring
                    .route(i)
                    .map(|l| machine.link(l).name.clone())
                    .collect();
                return Err(EmbedError::BadRoute {
                    ring: r,
                    route: format!("[{}]", route.join(" ")),
                    from: name(from),
                    to: name(to),
                });
            }
            own.extend(ring.route(i));
        }
        own.sort();
        own.dedup();
        for link in own {
            let users = owner.entry(link).or_default();
            users.push(r);
            let lanes = machine.link(link).lanes;
            let most = lanes.saturating_mul(share.max(1));
            if users.len() > most as usize {
                let name = machine.link(link).name.clone();
                return Err(if share > 1 {
                    EmbedError::OverShared {
                        rings: listed(users),
                        link: name,
                        most,
                    }
                } else if lanes <= 1 {
                    EmbedError::SharedLink {
                        first: users[0],
                        second: r,
                        link: name,
                    }
                } else {
                    EmbedError::LanesExceeded {
                        rings: listed(users),
                        link: name,
                        lanes,
                    }
                });
            }
        }
    }
    Ok(())
}

/// `0, 1 and 2`: ring numbers as a sentence lists them.
fn listed(rings: &[usize]) -> String {
    match rings.split_last() {
        Some((last, rest)) if !rest.is_empty() => {
            let rest: Vec<String> = rest.iter().map(usize::to_string).collect();
            format!("{} and {last}", rest.join(", "))
        }
        _ => rings.iter().map(usize::to_string).collect(),
    }
}

/// Whether `route`, walked from `from`, crosses real links, passes only through switches and
/// ends at `to`.
fn route_reaches(
    machine: &Machine,
    from: NodeId,
    to: NodeId,
    route: impl Iterator<Item = LinkId>,
) -> bool {
    let mut at = from;
    let mut first = true;
    for link in route {
        if link.index() >= machine.link_count() {
            return false;
        }
        if !first && machine.node(at).kind != NodeKind::Switch {
            return false;
        }
        first = false;
        let (a, b) = machine.endpoints(link);
        at = if a == at {
            b
        } else if b == at {
            a
        } else {
            return false;
        };
    }
    at == to
}
