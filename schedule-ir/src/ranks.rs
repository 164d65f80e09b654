//! Ranks: the second index space of a machine. Nodes are numbered among all nodes (switches
//! included, [`NodeId`]); the compute nodes are also numbered among themselves, in node order
//! ([`RankId`]), and that number is what MPI, MSCCL files and the runtime's inputs call a rank.
//! [`Ranks`] is the one place the two are converted, both ways and without panicking.

use crate::{Machine, NodeId, RankId};

/// The compute node of each rank and the rank of each node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ranks {
    nodes: Vec<NodeId>,
    rank: Vec<Option<RankId>>,
}

impl Ranks {
    /// The ranks of `machine`'s compute nodes.
    pub fn new(machine: &Machine) -> Ranks {
        let nodes: Vec<NodeId> = machine.compute_nodes().collect();
        let mut rank = vec![None; machine.nodes.len()];
        for (r, n) in nodes.iter().enumerate() {
            if let Some(cell) = rank.get_mut(n.index()) {
                *cell = Some(RankId::new(r));
            }
        }
        Ranks { nodes, rank }
    }

    /// How many ranks (compute nodes) there are.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether the machine has no compute node.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// The rank of `node`; `None` for a switch or a node out of range.
    pub fn rank(&self, node: NodeId) -> Option<RankId> {
        self.rank.get(node.index()).copied().flatten()
    }

    /// The compute node of `rank`; `None` past the last rank.
    pub fn node(&self, rank: RankId) -> Option<NodeId> {
        self.nodes.get(rank.index()).copied()
    }

    /// The compute nodes, by rank.
    pub fn nodes(&self) -> &[NodeId] {
        &self.nodes
    }

    /// Every rank with its compute node, in rank order.
    pub fn iter(&self) -> impl Iterator<Item = (RankId, NodeId)> + '_ {
        self.nodes
            .iter()
            .enumerate()
            .map(|(r, &n)| (RankId::new(r), n))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Link, Node, NodeKind};

    fn node(name: &str, kind: NodeKind) -> Node {
        Node {
            name: name.into(),
            kind,
            capacity: None,
        }
    }

    #[test]
    fn switches_have_no_rank_and_ranks_count_compute_nodes_in_order() {
        let machine = Machine {
            name: "star".into(),
            nodes: vec![
                node("a", NodeKind::Compute),
                node("sw", NodeKind::Switch),
                node("b", NodeKind::Compute),
            ],
            links: Vec::<Link>::new(),
            reduce_gbps: None,
            switch_latency_us: 0.0,
        };
        let ranks = Ranks::new(&machine);
        assert_eq!(ranks.len(), 2);
        assert_eq!(ranks.rank(NodeId(0)), Some(RankId(0)));
        assert_eq!(ranks.rank(NodeId(1)), None);
        assert_eq!(ranks.rank(NodeId(2)), Some(RankId(1)));
        assert_eq!(ranks.rank(NodeId(9)), None);
        assert_eq!(ranks.node(RankId(1)), Some(NodeId(2)));
        assert_eq!(ranks.node(RankId(2)), None);
        let pairs: Vec<_> = ranks.iter().collect();
        assert_eq!(pairs, vec![(RankId(0), NodeId(0)), (RankId(1), NodeId(2))]);
    }

    #[test]
    fn an_index_past_u32_saturates_instead_of_panicking() {
        assert_eq!(RankId::new(usize::MAX), RankId(u32::MAX));
        let machine = Machine {
            name: "pair".into(),
            nodes: vec![node("a", NodeKind::Compute), node("b", NodeKind::Compute)],
            links: Vec::new(),
            reduce_gbps: None,
            switch_latency_us: 0.0,
        };
        assert_eq!(Ranks::new(&machine).node(RankId::new(usize::MAX)), None);
    }
}
