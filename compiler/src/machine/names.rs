//! Node names and link ids of generated machines.
//!
//! Nodes are `N0`, `N1`, …. A link between `Na` and `Nb` (`a < b`) is `L` followed by the two
//! numbers, and, when several links join the same two nodes, a lane digit `1`, `2`, … — the
//! scheme of the ladder's source description (`L02`, `L13`, `L011`, `L012`, return link `L06`). Concatenated digits
//! are ambiguous once a machine has ten or more nodes (`L1011`: 1–011 or 10–11?), so machines
//! with more than ten nodes separate the numbers with dots: `L8.10`, `L10.11.1`.

/// Name of compute node `i`.
pub fn node(i: usize) -> String {
    format!("N{i}")
}

/// How link ids are spelled for a machine of `nodes` nodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinkNames {
    dotted: bool,
}

impl LinkNames {
    /// The spelling for a machine with `nodes` nodes.
    pub fn for_nodes(nodes: usize) -> LinkNames {
        LinkNames { dotted: nodes > 10 }
    }

    /// The id of a link between nodes `a` and `b`; `lane` is `Some(k)` (1-based) when several
    /// links join the same two nodes.
    pub fn link(self, a: usize, b: usize, lane: Option<u32>) -> String {
        let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
        match (self.dotted, lane) {
            (false, None) => format!("L{lo}{hi}"),
            (false, Some(k)) => format!("L{lo}{hi}{k}"),
            (true, None) => format!("L{lo}.{hi}"),
            (true, Some(k)) => format!("L{lo}.{hi}.{k}"),
        }
    }
}

/// Ids for a list of links given by endpoints: links that share their two endpoints get lane
/// digits in list order, the others none.
pub fn name_links(names: LinkNames, links: &[(usize, usize)]) -> Vec<String> {
    use std::collections::BTreeMap;
    let key = |&(a, b): &(usize, usize)| if a <= b { (a, b) } else { (b, a) };
    let mut count: BTreeMap<(usize, usize), u32> = BTreeMap::new();
    for l in links {
        *count.entry(key(l)).or_default() += 1;
    }
    let mut seen: BTreeMap<(usize, usize), u32> = BTreeMap::new();
    links
        .iter()
        .map(|l| {
            let k = key(l);
            let lane = if count[&k] > 1 {
                let s = seen.entry(k).or_default();
                *s += 1;
                Some(*s)
            } else {
                None
            };
            names.link(k.0, k.1, lane)
        })
        .collect()
}

/// A machine of `n` compute nodes `N0…` with the given links, `params[j]` for link `j`.
pub fn uniform(
    name: &str,
    n: usize,
    links: &[(usize, usize)],
    params: &[crate::topology::ast::LinkParams],
    shape: super::Shape,
) -> super::Machine {
    use super::{LinkInfo, Machine, NodeInfo};
    let nodes = (0..n)
        .map(|i| NodeInfo {
            name: node(i),
            kind: schedule_ir::NodeKind::Compute,
        })
        .collect();
    let ids = name_links(LinkNames::for_nodes(n), links);
    let links = links
        .iter()
        .zip(ids)
        .zip(params)
        .map(|((&(a, b), id), p)| (a, b, LinkInfo::new(id, p)))
        .collect();
    Machine::from_parts(name, nodes, links, shape)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_machines_use_the_seed_spelling() {
        let n = LinkNames::for_nodes(8);
        assert_eq!(n.link(0, 1, Some(1)), "L011");
        assert_eq!(n.link(6, 0, None), "L06");
        assert_eq!(n.link(1, 3, None), "L13");
    }

    #[test]
    fn large_machines_stay_unambiguous() {
        let n = LinkNames::for_nodes(24);
        assert_eq!(n.link(10, 11, Some(2)), "L10.11.2");
        assert_eq!(n.link(1, 0, Some(1)), "L0.1.1");
        assert_ne!(n.link(1, 11, None), n.link(11, 1, Some(1)));
    }
}
