//! Cut bounds: the bandwidth of the narrowest places in the machine.
//!
//! For every cut that separates compute nodes, whatever one side needs from the other must
//! cross it. The cuts measured are the minimum cuts between one source compute node and each
//! other compute node (max-flow, Dinic's algorithm, link bandwidths as capacities in both
//! directions): every cut separating compute nodes separates the source from some compute node,
//! so the narrowest of them is among these. On machines with more than [`MAX_TARGETS`] compute
//! nodes only that many targets, spread evenly over the node order, are measured — fewer on
//! machines of very many links ([`MAX_CUT_WORK`]); the bound is then still a valid lower bound,
//! possibly a weaker one.

use super::bytes_per_second;
use crate::{Machine, NodeId, NodeKind};
use std::collections::VecDeque;

/// The most max-flow computations one bound makes.
pub const MAX_TARGETS: usize = 512;

/// The work, in arcs and nodes visited, the targets' max-flows may take together, roughly: on
/// a machine of many links fewer targets are measured (never fewer than [`MIN_TARGETS`]), so
/// that a 40 000-node torus's bound takes seconds. Every machine of up to 32 768 links and nodes
/// together keeps all [`MAX_TARGETS`].
pub const MAX_CUT_WORK: usize = 1 << 24;

/// The fewest targets measured when [`MAX_CUT_WORK`] limits them.
pub const MIN_TARGETS: usize = 16;

/// A cut of the machine.
#[derive(Clone, Debug, PartialEq)]
pub struct Cut {
    /// Bytes per second the cut carries in each direction.
    pub capacity: f64,
    /// `inside[n]`: whether node `n` is on the source's side.
    pub inside: Vec<bool>,
}

/// Minimum cuts between `source` and each other compute node (or a spread sample of them),
/// without duplicates, in target order.
pub fn min_cuts(machine: &Machine, source: NodeId) -> Vec<Cut> {
    let n = machine.nodes.len();
    if source.index() >= n {
        return Vec::new();
    }
    let targets: Vec<usize> = machine
        .nodes
        .iter()
        .enumerate()
        .filter(|&(i, node)| node.kind == NodeKind::Compute && i != source.index())
        .map(|(i, _)| i)
        .collect();
    let size = machine.links.len() + n;
    let most = (MAX_CUT_WORK / size.max(1)).clamp(MIN_TARGETS, MAX_TARGETS);
    let step = targets.len().div_ceil(most).max(1);
    let mut network = Network::new(machine);
    let mut cuts: Vec<Cut> = Vec::new();
    for &t in targets.iter().step_by(step) {
        let (capacity, inside) = network.min_cut(source.index(), t);
        if !cuts.iter().any(|c| c.inside == inside) {
            cuts.push(Cut { capacity, inside });
        }
    }
    cuts
}

/// How fast each node can get bytes to the other compute nodes, in bytes per second each
/// way: for a compute node, the capacity of the narrowest cut that keeps it, with any
/// switches on its side, apart from every other compute node (a max-flow to all of them at
/// once); for other nodes, their egress. A compute node none of whose links leads to a switch
/// has its egress: a cut around it and some switches also crosses all its own links. On a
/// machine whose compute nodes reach switches, more than the work budget allows
/// ([`MAX_CUT_WORK`], at least [`MIN_TARGETS`] nodes) keep their egress, which is never below
/// the cut: a figure from fewer cuts is weaker, never wrong.
///
/// Why it bounds what a node sends in a step: every route from the node to another compute
/// node crosses the cut, and each direction of the cut carries at most its bandwidth times the
/// step's `β`. On a GPU whose PCIe link (64 GB/s) leads only to its NIC (50 GB/s to the
/// network), the cut is its NVLink plus 50 GB/s, where its egress counts 64.
pub fn sending(machine: &Machine) -> Vec<f64> {
    let mut out = super::egresses(machine);
    let n = machine.nodes.len();
    let compute = |i: usize| {
        machine
            .nodes
            .get(i)
            .is_some_and(|x| x.kind == NodeKind::Compute)
    };
    let mut near_switch = vec![false; n];
    for l in &machine.links {
        let (a, b) = (l.a.index(), l.b.index());
        if a < n && b < n {
            near_switch[a] |= !compute(b);
            near_switch[b] |= !compute(a);
        }
    }
    let sources: Vec<usize> = (0..n).filter(|&i| compute(i) && near_switch[i]).collect();
    if sources.is_empty() {
        return out;
    }
    let size = machine.links.len() + n;
    let most = (MAX_CUT_WORK / size.max(1)).max(MIN_TARGETS);
    let mut network = Network::new(machine);
    // A sink joined to every compute node by an arc wider than the whole machine; the
    // source's own arc is closed while its cut is measured.
    let wide: f64 = network.capacity.iter().sum::<f64>() + 1.0;
    let sink = n;
    network.out.push(Vec::new());
    let mut to_sink = vec![usize::MAX; n];
    for (i, arc) in to_sink.iter_mut().enumerate().filter(|&(i, _)| compute(i)) {
        *arc = network.to.len();
        network.out[i].push(network.to.len());
        network.to.push(sink);
        network.capacity.push(wide);
        network.out[sink].push(network.to.len());
        network.to.push(i);
        network.capacity.push(wide);
    }
    network.flow = vec![0.0; network.to.len()];
    for &s in sources.iter().take(most) {
        let arc = to_sink[s];
        network.capacity[arc] = 0.0;
        network.capacity[arc ^ 1] = 0.0;
        let (_, inside) = network.min_cut(s, sink);
        network.capacity[arc] = wide;
        network.capacity[arc ^ 1] = wide;
        // The capacity of the cut found, from its links: any cut that keeps the node apart
        // from the other compute nodes bounds what it sends, so a flow stopped a rounding
        // short of the maximum still gives a sound figure.
        let capacity = cut_capacity(machine, &inside);
        if let Some(e) = out.get_mut(s) {
            *e = e.min(capacity);
        }
    }
    out
}

/// The most partitions [`group_sending`] measures: one per distinct bandwidth, the fastest
/// first, so a machine of many link speeds is not searched for ever (fewer partitions give a
/// weaker bound, never a wrong one).
pub const MAX_PARTITIONS: usize = 8;

/// One partition of the compute nodes into groups, and how fast each group can get bytes to
/// the compute nodes outside it.
#[derive(Clone, Debug, PartialEq)]
pub struct Partition {
    /// The number of groups, at least 2 and fewer than the compute nodes.
    pub groups: usize,
    /// The sum over the groups of their send capacity, bytes per second: the narrowest cut
    /// around the group and any switches, or (past the work budget) the sum of its members'
    /// [`sending`], which is never below it.
    pub capacity: f64,
}

/// The partitions of the compute nodes into the machine's tiers, and their send capacity.
///
/// For each distinct bandwidth `t` between two nodes (parallel links summed; fastest first, at
/// most [`MAX_PARTITIONS`]), the groups are the compute nodes joined by pairs at least that
/// fast, through any nodes: the GPUs
/// of one NVSwitch box, the ranks behind one NIC. Partitions of one group or of single nodes are
/// left out (the second is the ordinary total-traffic bound's). `sending` is [`sending`]'s
/// result, the fallback when a group's own max-flow is past the work budget ([`MAX_CUT_WORK`]):
/// the union of the members' cuts keeps the group apart from every other compute node, and
/// every link leaving the union leaves one member's cut, so the sum of the members' figures is
/// at least the group's narrowest cut.
pub fn group_sending(machine: &Machine, sending: &[f64]) -> Vec<Partition> {
    let n = machine.nodes.len();
    let compute: Vec<usize> = (0..n)
        .filter(|&i| machine.nodes[i].kind == NodeKind::Compute)
        .collect();
    let pairs = joined(machine);
    let mut speeds: Vec<f64> = pairs.iter().map(|&(_, _, gbps)| gbps).collect();
    speeds.sort_by(|a, b| b.total_cmp(a));
    speeds.dedup();
    let size = machine.links.len() + n;
    let mut budget = MAX_CUT_WORK;
    let mut seen: Vec<Vec<usize>> = Vec::new();
    let mut out = Vec::new();
    for &t in speeds.iter().take(MAX_PARTITIONS) {
        let group_of = tiers(n, &pairs, &compute, t);
        let groups = group_of.iter().copied().max().map_or(0, |g| g + 1);
        if groups < 2 || groups >= compute.len() || seen.contains(&group_of) {
            continue;
        }
        let mut members = vec![Vec::new(); groups];
        for (&node, &g) in compute.iter().zip(&group_of) {
            members[g].push(node);
        }
        let mut capacity = 0.0;
        for group in &members {
            let fallback: f64 = group
                .iter()
                .map(|&v| sending.get(v).copied().unwrap_or(0.0))
                .sum();
            capacity += if budget >= size {
                budget -= size;
                group_cut(machine, group).min(fallback)
            } else {
                fallback
            };
        }
        seen.push(group_of);
        out.push(Partition { groups, capacity });
    }
    out
}

/// The nodes joined by links, each pair once with the bandwidth of all its links together
/// (Gbit/s), in the order of the pairs: two parallel links and one link of twice the bandwidth
/// with two lanes are the same hardware, and make the same tiers.
fn joined(machine: &Machine) -> Vec<(usize, usize, f64)> {
    let n = machine.nodes.len();
    let mut pairs = std::collections::BTreeMap::new();
    for l in &machine.links {
        let (a, b) = (l.a.index(), l.b.index());
        if a < n && b < n && a != b && l.bandwidth_gbps.is_finite() && l.bandwidth_gbps > 0.0 {
            *pairs.entry((a.min(b), a.max(b))).or_insert(0.0) += l.bandwidth_gbps;
        }
    }
    pairs.into_iter().map(|((a, b), g)| (a, b, g)).collect()
}

/// The group of each compute node (in `compute`'s order, groups numbered by first member) when
/// the pairs of `n` nodes joined by less than `gbps` are parted.
fn tiers(n: usize, pairs: &[(usize, usize, f64)], compute: &[usize], gbps: f64) -> Vec<usize> {
    let mut parent: Vec<usize> = (0..n).collect();
    fn root(parent: &mut [usize], mut v: usize) -> usize {
        while parent[v] != v {
            parent[v] = parent[parent[v]];
            v = parent[v];
        }
        v
    }
    for &(a, b, _) in pairs.iter().filter(|p| p.2 >= gbps) {
        let (ra, rb) = (root(&mut parent, a), root(&mut parent, b));
        parent[ra] = rb;
    }
    let mut number = vec![usize::MAX; n];
    let mut next = 0;
    compute
        .iter()
        .map(|&v| {
            let r = root(&mut parent, v);
            if number[r] == usize::MAX {
                number[r] = next;
                next += 1;
            }
            number[r]
        })
        .collect()
}

/// The capacity of the narrowest cut keeping `group` (compute nodes), with any other nodes
/// except compute nodes, apart from every other compute node: a max-flow from all of the group
/// at once to all the others at once ([`cut_capacity`] of the cut found).
fn group_cut(machine: &Machine, group: &[usize]) -> f64 {
    let n = machine.nodes.len();
    let mut network = Network::new(machine);
    let wide: f64 = network.capacity.iter().sum::<f64>() + 1.0;
    let (source, sink) = (n, n + 1);
    network.out.push(Vec::new());
    network.out.push(Vec::new());
    let join = |network: &mut Network, from: usize, to: usize| {
        network.out[from].push(network.to.len());
        network.to.push(to);
        network.capacity.push(wide);
        network.out[to].push(network.to.len());
        network.to.push(from);
        network.capacity.push(0.0);
    };
    let mut member = vec![false; n];
    for &v in group.iter().filter(|&&v| v < n) {
        member[v] = true;
    }
    for (i, node) in machine.nodes.iter().enumerate() {
        if node.kind != NodeKind::Compute {
            continue;
        }
        if member[i] {
            join(&mut network, source, i);
        } else {
            join(&mut network, i, sink);
        }
    }
    network.flow = vec![0.0; network.to.len()];
    let (_, inside) = network.min_cut(source, sink);
    cut_capacity(machine, &inside)
}

/// The bandwidth, bytes per second each way, of the links with one end `inside` and the
/// other not: the capacity of a cut read from its links, so that a flow stopped a rounding
/// short of the maximum still names a cut that exists.
fn cut_capacity(machine: &Machine, inside: &[bool]) -> f64 {
    machine
        .links
        .iter()
        .filter(|l| {
            let side = |x: NodeId| inside.get(x.index()).copied();
            side(l.a).zip(side(l.b)).is_some_and(|(a, b)| a != b)
        })
        .map(|l| bytes_per_second(l.bandwidth_gbps))
        .filter(|c| c.is_finite() && *c > 0.0)
        .sum()
}

/// A flow network with an arc each way per link.
struct Network {
    /// `head[v]`: arcs leaving `v`, as indices into `to`/`cap`.
    out: Vec<Vec<usize>>,
    to: Vec<usize>,
    capacity: Vec<f64>,
    flow: Vec<f64>,
}

impl Network {
    fn new(machine: &Machine) -> Network {
        let n = machine.nodes.len();
        let mut net = Network {
            out: vec![Vec::new(); n],
            to: Vec::new(),
            capacity: Vec::new(),
            flow: Vec::new(),
        };
        for link in &machine.links {
            let (a, b) = (link.a.index(), link.b.index());
            if a >= n || b >= n || a == b {
                continue;
            }
            let c = bytes_per_second(link.bandwidth_gbps);
            if !(c.is_finite() && c > 0.0) {
                continue;
            }
            // Arc 2k is a→b, arc 2k+1 is b→a; each is the other's reverse.
            net.out[a].push(net.to.len());
            net.to.push(b);
            net.capacity.push(c);
            net.out[b].push(net.to.len());
            net.to.push(a);
            net.capacity.push(c);
        }
        net.flow = vec![0.0; net.to.len()];
        net
    }

    fn residual(&self, arc: usize) -> f64 {
        // The reverse arc's flow can be pushed back as well.
        self.capacity[arc] - self.flow[arc] + self.flow[arc ^ 1]
    }

    fn push(&mut self, arc: usize, amount: f64) {
        let back = self.flow[arc ^ 1].min(amount);
        self.flow[arc ^ 1] -= back;
        self.flow[arc] += amount - back;
    }

    /// Max flow from `s` to `t`; returns its value and the source side of a minimum cut.
    fn min_cut(&mut self, s: usize, t: usize) -> (f64, Vec<bool>) {
        self.flow.iter_mut().for_each(|f| *f = 0.0);
        let n = self.out.len();
        let eps = 1e-9 * self.capacity.iter().copied().fold(0.0, f64::max);
        let mut total = 0.0;
        loop {
            let level = self.levels(s, eps);
            if level[t] == usize::MAX {
                let inside = level.iter().map(|&l| l != usize::MAX).collect();
                return (total, inside);
            }
            let mut next = vec![0usize; n];
            loop {
                let pushed = self.augment(s, t, f64::INFINITY, &level, &mut next, eps);
                if pushed <= eps {
                    break;
                }
                total += pushed;
            }
        }
    }

    fn levels(&self, s: usize, eps: f64) -> Vec<usize> {
        let mut level = vec![usize::MAX; self.out.len()];
        level[s] = 0;
        let mut queue = VecDeque::from([s]);
        while let Some(v) = queue.pop_front() {
            for &arc in &self.out[v] {
                let w = self.to[arc];
                if level[w] == usize::MAX && self.residual(arc) > eps {
                    level[w] = level[v] + 1;
                    queue.push_back(w);
                }
            }
        }
        level
    }

    /// One blocking-flow augmentation along level-increasing arcs (iterative DFS).
    fn augment(
        &mut self,
        s: usize,
        t: usize,
        limit: f64,
        level: &[usize],
        next: &mut [usize],
        eps: f64,
    ) -> f64 {
        let mut path: Vec<usize> = Vec::new();
        let mut v = s;
        loop {
            if v == t {
                let amount = path.iter().map(|&a| self.residual(a)).fold(limit, f64::min);
                for &a in &path {
                    self.push(a, amount);
                }
                return amount;
            }
            let mut advanced = false;
            while next[v] < self.out[v].len() {
                let arc = self.out[v][next[v]];
                let w = self.to[arc];
                if level[w] == level[v] + 1 && self.residual(arc) > eps {
                    path.push(arc);
                    v = w;
                    advanced = true;
                    break;
                }
                next[v] += 1;
            }
            if !advanced {
                // Dead end: retreat and skip the arc that led here.
                let Some(arc) = path.pop() else {
                    return 0.0;
                };
                v = self.to[arc ^ 1];
                next[v] += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Link, Node};

    fn machine(nodes: &[(&str, NodeKind)], links: &[(u32, u32, f64)]) -> Machine {
        Machine {
            name: "m".into(),
            nodes: nodes
                .iter()
                .map(|&(name, kind)| Node {
                    name: name.into(),
                    kind,
                    capacity: None,
                })
                .collect(),
            links: links
                .iter()
                .enumerate()
                .map(|(i, &(a, b, gbps))| Link {
                    name: format!("L{i}"),
                    a: NodeId(a),
                    b: NodeId(b),
                    bandwidth_gbps: gbps,
                    latency_us: 1.0,
                    lanes: 1,
                })
                .collect(),
            reduce_gbps: None,
            switch_latency_us: 0.0,
        }
    }

    /// An unlowered f32 allreduce of 2^20 elements: what a bound needs of a phase.
    fn allreduce_of_a_mebi_element() -> crate::Phase {
        crate::Phase {
            name: "p".into(),
            collective: crate::Collective::AllReduce,
            op: crate::ReduceOp::Sum,
            dtype: crate::DType::F32,
            elements: 1 << 20,
            algorithm: "none".into(),
            chunks: vec![crate::Chunk {
                start: 0,
                end: 1 << 20,
                owner: None,
            }],
            buffers: Vec::new(),
            links: crate::LinkUse::Exclusive,
            steps: 0,
            programs: Vec::new(),
        }
    }

    #[test]
    fn a_ring_is_cut_in_two_places() {
        let c = NodeKind::Compute;
        let m = machine(
            &[("A", c), ("B", c), ("C", c), ("D", c)],
            &[(0, 1, 8.0), (1, 2, 8.0), (2, 3, 8.0), (3, 0, 8.0)],
        );
        let cuts = min_cuts(&m, NodeId(0));
        let narrowest = cuts
            .iter()
            .map(|c| c.capacity)
            .fold(f64::INFINITY, f64::min);
        assert_eq!(narrowest, 2.0 * bytes_per_second(8.0));
    }

    #[test]
    fn an_oversubscribed_uplink_is_the_narrowest_cut() {
        // Two leaf switches with two hosts each, joined through a spine by 10 Gb/s uplinks;
        // hosts attach at 100 Gb/s.
        let (c, s) = (NodeKind::Compute, NodeKind::Switch);
        let m = machine(
            &[
                ("h0", c),
                ("h1", c),
                ("h2", c),
                ("h3", c),
                ("s0", s),
                ("s1", s),
                ("spine", s),
            ],
            &[
                (0, 4, 100.0),
                (1, 4, 100.0),
                (2, 5, 100.0),
                (3, 5, 100.0),
                (4, 6, 10.0),
                (5, 6, 10.0),
            ],
        );
        let cuts = min_cuts(&m, NodeId(0));
        let narrowest = cuts
            .iter()
            .min_by(|a, b| a.capacity.total_cmp(&b.capacity))
            .expect("cuts");
        assert_eq!(narrowest.capacity, bytes_per_second(10.0));
        assert!(narrowest.inside[0] && narrowest.inside[1]);
        assert!(!narrowest.inside[2] && !narrowest.inside[3]);
    }

    #[test]
    fn the_uplink_binds_an_allreduce_on_an_oversubscribed_tree() {
        let (c, s) = (NodeKind::Compute, NodeKind::Switch);
        let m = machine(
            &[
                ("h0", c),
                ("h1", c),
                ("h2", c),
                ("h3", c),
                ("s0", s),
                ("s1", s),
            ],
            &[
                (0, 4, 100.0),
                (1, 4, 100.0),
                (2, 5, 100.0),
                (3, 5, 100.0),
                (4, 5, 10.0),
            ],
        );
        let phase = allreduce_of_a_mebi_element();
        let bound = super::super::lower_bound(&m, &phase);
        assert_eq!(bound.which, "cut");
        let expected = 4.0 * f64::from(1u32 << 20) / bytes_per_second(10.0);
        assert!((bound.cut_seconds - expected).abs() < 1e-12, "{bound:?}");
        assert!(bound.traffic_seconds < bound.cut_seconds);
    }

    /// Four hosts of two ranks, each rank joined to its host's NIC at 256 Gbit/s, the NICs to
    /// one switch at 100 Gbit/s: the hosts are the one tier between single ranks and the whole
    /// machine, and each sends at most its NIC's network link.
    fn four_hosts_behind_nics() -> Machine {
        use NodeKind::{Compute, Switch};
        let mut nodes = Vec::new();
        let mut links = Vec::new();
        for h in 0..4u32 {
            nodes.push(("r", Compute));
            nodes.push(("r", Compute));
            nodes.push(("nic", Switch));
            links.push((3 * h, 3 * h + 2, 256.0));
            links.push((3 * h + 1, 3 * h + 2, 256.0));
            links.push((3 * h + 2, 12, 100.0));
        }
        nodes.push(("sw", Switch));
        machine(&nodes, &links)
    }

    #[test]
    fn the_ranks_behind_one_nic_are_one_group() {
        let m = four_hosts_behind_nics();
        let parts = group_sending(&m, &sending(&m));
        assert_eq!(
            parts,
            vec![Partition {
                groups: 4,
                capacity: 4.0 * bytes_per_second(100.0)
            }]
        );
        // A rank alone can send over its own link (the NIC also leads to its neighbour), so
        // past the work budget a host would count two of those: weaker, still a bound.
        let rank_alone = sending(&m)[0];
        assert_eq!(rank_alone, bytes_per_second(256.0));
        assert!(2.0 * rank_alone >= bytes_per_second(100.0));
    }

    #[test]
    fn group_traffic_binds_where_hosts_share_a_network_link() {
        let m = four_hosts_behind_nics();
        let phase = allreduce_of_a_mebi_element();
        let bound = super::super::lower_bound(&m, &phase);
        let bytes = 4.0 * f64::from(1u32 << 20);
        // 2(k-1) copies of the vector between 4 hosts, each sending 12.5 GB/s at most.
        let expected = 2.0 * 3.0 * bytes / (4.0 * bytes_per_second(100.0));
        assert_eq!(bound.which, "group traffic");
        assert!((bound.group_seconds - expected).abs() < 1e-12, "{bound:?}");
        // The single ranks' total traffic counts 8 senders of 32 GB/s; the cut, one host's
        // network link carrying the vector.
        assert!(bound.traffic_seconds < bound.group_seconds);
        assert!(bound.cut_seconds < bound.group_seconds);
    }

    #[test]
    fn a_machine_of_one_link_speed_has_no_tiers() {
        let c = NodeKind::Compute;
        let m = machine(
            &[("A", c), ("B", c), ("C", c), ("D", c)],
            &[(0, 1, 8.0), (1, 2, 8.0), (2, 3, 8.0), (3, 0, 8.0)],
        );
        assert!(group_sending(&m, &sending(&m)).is_empty());
    }

    #[test]
    fn parallel_links_add_up() {
        let c = NodeKind::Compute;
        let m = machine(&[("A", c), ("B", c)], &[(0, 1, 25.0), (0, 1, 25.0)]);
        let cuts = min_cuts(&m, NodeId(0));
        assert_eq!(cuts.len(), 1);
        assert_eq!(cuts[0].capacity, bytes_per_second(50.0));
    }

    /// Two GPUs on a switch (NVLink 400 Gbit/s each), each with a PCIe link (512 Gbit/s) to its
    /// own NIC, the NICs on a network switch at 400 Gbit/s: a GPU can send at most its NVLink
    /// plus its NIC's network link, not its PCIe link's rate. A third compute node joined to
    /// the first GPU directly (no switch at it) keeps its egress.
    #[test]
    fn a_node_sends_no_faster_than_the_narrowest_cut_around_it() {
        use NodeKind::{Compute, Switch};
        let m = machine(
            &[
                ("g0", Compute),
                ("g1", Compute),
                ("nvs", Switch),
                ("nic0", Switch),
                ("nic1", Switch),
                ("net", Switch),
                ("h", Compute),
            ],
            &[
                (0, 2, 400.0),
                (1, 2, 400.0),
                (0, 3, 512.0),
                (1, 4, 512.0),
                (3, 5, 400.0),
                (4, 5, 400.0),
                (6, 0, 100.0),
            ],
        );
        let gbps = |g: f64| bytes_per_second(g);
        let sending = sending(&m);
        let egress = crate::cost::egresses(&m);
        assert_eq!(sending[0], gbps(400.0) + gbps(400.0) + gbps(100.0));
        assert_eq!(egress[0], gbps(400.0) + gbps(512.0) + gbps(100.0));
        assert_eq!(sending[1], gbps(400.0) + gbps(400.0));
        assert_eq!(sending[6], egress[6]);
        for (s, e) in sending.iter().zip(&egress) {
            assert!(s <= e);
        }
    }
}
