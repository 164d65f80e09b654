//! A tree walked once for every chunk it carries: the order of its nodes, their children and
//! their routes up are computed when the packing is lowered, not once per chunk (an allgather
//! walks a tree once per piece of every pipeline chunk).

use crate::embed::trees::Tree;
use crate::ids::IdVec;
use crate::lower::dag::{After, Transfer, TransferId, Transfers};
use crate::lower::plan::{Move, Route};
use schedule_ir::{BufferId, ChunkId, NodeId, RecvMode};

/// What [`reduce_up`] and [`broadcast_down`] read of a tree.
#[derive(Clone, Debug)]
pub struct Walk {
    /// Where reductions end and broadcasts start.
    root: NodeId,
    /// The nodes from the root down, each after its parent ([`Tree::top_down`]).
    order: Vec<NodeId>,
    /// Indexed by node: its parent, `None` for the root and nodes outside the tree.
    parent: IdVec<NodeId, Option<NodeId>>,
    /// Indexed by node: its children in child order ([`Tree::children`]).
    children: IdVec<NodeId, Vec<NodeId>>,
    /// Indexed by node: the route up to its parent ([`Tree::route_up`]).
    up: IdVec<NodeId, Route>,
}

impl Walk {
    /// The walk of `tree`.
    pub fn of(tree: &Tree) -> Walk {
        let children = tree
            .children()
            .into_iter()
            .map(|list| list.into_iter().map(|(c, _)| c).collect())
            .collect();
        Walk {
            root: tree.root,
            order: tree.top_down(),
            parent: tree.parent.iter().map(|p| p.map(|(n, _)| n)).collect(),
            children,
            up: tree.parent.ids().map(|n| tree.route_up(n).into()).collect(),
        }
    }
}

/// Reduces `chunk` toward the tree's root, leaves first: each node sends its partial result to
/// its parent after all its children's have arrived. Returns the transfers into the root.
pub fn reduce_up(
    tree: &Walk,
    buffer: BufferId,
    chunk: ChunkId,
    transfers: &mut Transfers,
) -> Vec<TransferId> {
    // The tree was proved: its nodes, parents and children are in range of its tables.
    let mut up: IdVec<NodeId, Option<TransferId>> = IdVec::filled(None, tree.parent.len());
    for &v in tree.order.iter().rev() {
        let Some(parent) = tree.parent[v] else {
            continue;
        };
        let after = tree.children[v].iter().filter_map(|&c| up[c]).collect();
        up[v] = Some(transfers.push(transfer(
            v,
            parent,
            tree.up[v].clone(),
            buffer,
            chunk,
            RecvMode::Reduce,
            after,
        )));
    }
    tree.children[tree.root]
        .iter()
        .filter_map(|&c| up[c])
        .collect()
}

/// Broadcasts `chunk` from the tree's root, which has it once `at_root` have landed: each node
/// forwards it to its children once it has it.
pub fn broadcast_down(
    tree: &Walk,
    buffer: BufferId,
    chunk: ChunkId,
    at_root: &[TransferId],
    transfers: &mut Transfers,
) {
    let mut down: IdVec<NodeId, Option<TransferId>> = IdVec::filled(None, tree.parent.len());
    for &v in &tree.order {
        let Some(parent) = tree.parent[v] else {
            continue;
        };
        let route = tree.up[v].iter().rev().copied().collect();
        let after = match down[parent] {
            Some(t) => std::slice::from_ref(&t).into(),
            None => at_root.into(),
        };
        down[v] = Some(transfers.push(transfer(
            parent,
            v,
            route,
            buffer,
            chunk,
            RecvMode::Store,
            after,
        )));
    }
}

/// A transfer of `chunk` from `from` to `to` along `route` (its links in order, at least one).
fn transfer(
    from: NodeId,
    to: NodeId,
    route: Route,
    buffer: BufferId,
    chunk: ChunkId,
    mode: RecvMode,
    after: After,
) -> Transfer {
    // An empty route is reported by the scheduler as a bad route.
    Transfer {
        what: Move {
            from,
            to,
            route,
            src: buffer,
            dst: buffer,
            chunks: std::slice::from_ref(&chunk).into(),
            mode,
        },
        after,
        rank: 0,
    }
}
