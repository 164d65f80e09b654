//! Rings over machines with switches: the compute nodes in depth-first order, each hop routed
//! through the switches along a shortest path.
//!
//! A ring's hops are forwarded by switches only (the IR lets compute nodes forward too, but a
//! ring keeps each compute node's links for its own hops), so a machine whose compute nodes
//! hang off switches — a tree, a fabric — has no Hamiltonian cycle among its compute nodes; its ring is made of routes instead. The order is the
//! depth-first order of the compute nodes (neighbours in link-id order) from node 0. On a tree
//! this makes consecutive nodes share as much of their path as possible: walked once around,
//! the routes cross every tree link exactly once in each direction (the ring is the tree's
//! Euler tour), so one direction of the ring never puts two transfers on one link direction.
//! On other graphs the same order is used; where hops share a link direction the lowering
//! serialises them ([`crate::lower::ring`]).
//!
//! Each hop takes a shortest path through switches only, found by breadth-first search with
//! neighbours in link-id order, so that the same machine always gets the same routes. The same
//! search, allowed to pass through compute nodes too ([`RouteSearch::shortest`]), routes the
//! transfers of methods whose partners are not neighbours (halving-doubling).

use super::{EmbedError, Ring};
use crate::ids::IdVec;
use crate::machine::Machine;
use schedule_ir::{LinkId, NodeId, NodeKind};
use std::collections::VecDeque;

/// The ring of a machine with switches: every compute node once, in depth-first order, each
/// hop a shortest route through switches.
pub fn switched_ring(machine: &Machine) -> Result<Ring, EmbedError> {
    let adj = adjacency(machine);
    let order = depth_first_compute(machine, &adj);
    if order.len() < 2 {
        return Err(EmbedError::NotApplicable(
            "a ring needs at least two compute nodes".to_string(),
        ));
    }
    let mut search = RouteSearch::new(adj.len());
    let n = order.len();
    let mut links = Vec::with_capacity(n);
    let mut via = Vec::with_capacity(n);
    for i in 0..n {
        let (from, to) = (order[i], order[(i + 1) % n]);
        let route = search
            .shortest(machine, &adj, from, to, false)
            .ok_or_else(|| EmbedError::NoRoute {
                from: machine.node(from).name.clone(),
                to: machine.node(to).name.clone(),
            })?;
        links.push(route[0]);
        via.push(route[1..].to_vec());
    }
    Ok(Ring {
        nodes: order,
        links,
        via,
    })
}

/// The compute nodes in depth-first preorder from node 0, neighbours in link-id order.
fn depth_first_compute(machine: &Machine, adj: &Adjacency) -> Vec<NodeId> {
    let mut seen: IdVec<NodeId, bool> = IdVec::filled(false, adj.len());
    let mut order = Vec::new();
    let root = NodeId::new(0);
    if adj.is_empty() {
        return order;
    }
    // Stack of (node, index of the next neighbour to look at). Neighbours are the machine's
    // own nodes, in range of every table of nodes.
    let mut stack: Vec<(NodeId, usize)> = vec![(root, 0)];
    seen[root] = true;
    if machine.node(root).kind == NodeKind::Compute {
        order.push(root);
    }
    while let Some(top) = stack.last_mut() {
        let (v, next) = *top;
        let Some(&(_, u)) = adj[v].get(next) else {
            stack.pop();
            continue;
        };
        top.1 += 1;
        if !seen[u] {
            seen[u] = true;
            if machine.node(u).kind == NodeKind::Compute {
                order.push(u);
            }
            stack.push((u, 0));
        }
    }
    order
}

/// Every node's links as `(link, neighbour)`, by node.
pub type Adjacency = IdVec<NodeId, Vec<(LinkId, NodeId)>>;

/// Every node's links as `(link, neighbour)`, in link-id order: the input of [`RouteSearch`].
pub fn adjacency(machine: &Machine) -> Adjacency {
    IdVec::from_fn(machine.node_count(), |n| machine.links_at(n))
}

/// Breadth-first search state reused across hops: a visit stamp per node, so that a search
/// costs what it explores, not the size of the machine.
pub struct RouteSearch {
    stamp: IdVec<NodeId, u32>,
    parent: IdVec<NodeId, (LinkId, NodeId)>,
    current: u32,
}

impl RouteSearch {
    /// A search over a machine of `nodes` nodes.
    pub fn new(nodes: usize) -> RouteSearch {
        RouteSearch {
            stamp: IdVec::filled(0, nodes),
            parent: IdVec::filled((LinkId(0), NodeId(0)), nodes),
            current: 0,
        }
    }

    /// The links of a shortest route from `from` to `to` whose inner nodes are switches, or
    /// any nodes when `compute_forwards`; `None` also when `from` is not a node of the
    /// machine. `adj` is [`adjacency`]`(machine)`, and the search was made for its nodes.
    pub fn shortest(
        &mut self,
        machine: &Machine,
        adj: &Adjacency,
        from: NodeId,
        to: NodeId,
        compute_forwards: bool,
    ) -> Option<Vec<LinkId>> {
        self.current += 1;
        let mark = self.current;
        *self.stamp.get_mut(from)? = mark;
        let mut queue = VecDeque::from([from]);
        while let Some(v) = queue.pop_front() {
            if v != from && !compute_forwards && machine.node(v).kind != NodeKind::Switch {
                continue; // compute nodes end routes unless asked to forward
            }
            // `v` and its neighbours are the machine's nodes: in range of the search's tables.
            for &(link, u) in &adj[v] {
                if self.stamp[u] == mark {
                    continue;
                }
                self.stamp[u] = mark;
                self.parent[u] = (link, v);
                if u == to {
                    return Some(self.path(from, to));
                }
                queue.push_back(u);
            }
        }
        None
    }

    fn path(&self, from: NodeId, to: NodeId) -> Vec<LinkId> {
        let mut links = Vec::new();
        let mut at = to;
        while at != from {
            let (link, prev) = self.parent[at];
            links.push(link);
            at = prev;
        }
        links.reverse();
        links
    }
}
