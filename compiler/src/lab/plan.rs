//! The emulated network of a machine, on paper: a namespace per node, a veth pair per link,
//! an address per compute-node end, a bridge per switch, the shaping rate of each link, the
//! wiring the node processes read, and the shortest-path routes the baseline uses.
//!
//! Addresses (all inside the lab's own namespaces):
//! - a link between two compute nodes gets the /30 `10.0.0.0 + 4·l` (its index `l`): end `a`
//!   the first host, end `b` the second;
//! - the switches joined by switch-to-switch links form a *segment* (one bridged Ethernet);
//!   segment `d` is the /16 `172.(16+d).0.0`, and each compute-node end on it gets the next
//!   host address;
//! - each compute node `i` also gets the node address `10.254.0.0 + i + 1` (on its loopback),
//!   reached along shortest paths (fewest links, the first link in file order on a tie), as
//!   ordinary IP routing would: the address the baseline's processes use.

use crate::ids::IdVec;
use runtime_lite::link::{End, Wiring};
use schedule_ir::{LinkId, Machine, NodeId, NodeKind};
use std::collections::VecDeque;
use std::net::{IpAddr, Ipv4Addr};

/// One link of the emulated machine: a veth pair.
#[derive(Clone, Debug)]
pub struct LinkPlan {
    /// Interface name at each end (`[a, b]`), inside that end's namespace.
    pub ifname: [String; 2],
    /// Address and prefix length at each end; `None` at a switch (a bridge port).
    pub address: [Option<(Ipv4Addr, u8)>; 2],
    /// Shaping rate of each direction, bits per second.
    pub rate_bits: u64,
}

/// A route of the baseline: in `node`'s namespace, `dest` via `gateway` on `dev`.
#[derive(Clone, Debug)]
pub struct Route {
    pub node: NodeId,
    pub dest: Ipv4Addr,
    pub gateway: Ipv4Addr,
    pub dev: String,
}

/// The whole emulated network.
#[derive(Clone, Debug)]
pub struct NetPlan {
    /// The namespace of every node.
    pub namespaces: IdVec<NodeId, String>,
    /// Which nodes are switches (a bridge in their namespace).
    pub switch: IdVec<NodeId, bool>,
    /// The veth pair of every link.
    pub links: IdVec<LinkId, LinkPlan>,
    /// Each link's ends `(a, b)`.
    pub ends: IdVec<LinkId, (NodeId, NodeId)>,
    /// The node address of each compute node (`None` for switches).
    pub node_address: IdVec<NodeId, Option<Ipv4Addr>>,
    /// Shortest-path routes between node addresses.
    pub routes: Vec<Route>,
    /// What the node processes read.
    pub wiring: Wiring,
}

/// The port the link transport listens on inside the lab.
pub const PORT: u16 = 7100;

/// Plans the network of `machine`, its link bandwidths multiplied by `scale`. Namespaces are
/// named `{prefix}n{i}` (compute nodes) and `{prefix}s{i}` (switches).
pub fn plan(machine: &Machine, scale: f64, prefix: &str) -> Result<NetPlan, String> {
    let n = machine.nodes.len();
    // Every table below is indexed by the links' ends: refuse ends that are not nodes first.
    if let Some(link) = machine
        .links
        .iter()
        .find(|l| l.a.index() >= n || l.b.index() >= n)
    {
        return Err(format!(
            "link `{}` joins a node the machine does not have",
            link.name
        ));
    }
    let switch: IdVec<NodeId, bool> = machine
        .nodes
        .iter()
        .map(|x| x.kind == NodeKind::Switch)
        .collect();
    let namespaces = IdVec::from_fn(n, |v: NodeId| {
        let kind = if switch[v] { 's' } else { 'n' };
        format!("{prefix}{kind}{}", v.index())
    });
    let segment = segments(machine, &switch)?;
    let mut next_host = vec![0u32; n];
    let mut links = IdVec::with_capacity(machine.links.len());
    let mut ends = Vec::new();
    // Which segment each compute node already has an end on: two would be ambiguous.
    let mut on_segment: IdVec<NodeId, Vec<usize>> = IdVec::filled(Vec::new(), n);
    for (l, link) in machine.links.iter().enumerate() {
        let rate = link.bandwidth_gbps * 1e9 * scale;
        if !rate.is_finite() || rate < 1e5 {
            return Err(format!(
                "link `{}` would run at {rate:.0} bit/s after scaling by {scale}; give a larger --scale",
                link.name
            ));
        }
        let sides = [link.a, link.b];
        let mut address = [None, None];
        for (side, &node) in sides.iter().enumerate() {
            if switch[node] {
                continue;
            }
            let other = sides[1 - side];
            let (ip, prefix_len) = if switch[other] {
                let d = segment[other];
                if on_segment[node].contains(&d) {
                    return Err(format!(
                        "`{}` has two links into the same switches (`{}` is one): the lab bridges \
                         switches, so it could not tell them apart",
                        machine.node_name(node),
                        link.name
                    ));
                }
                on_segment[node].push(d);
                next_host[d] += 1;
                let base = u32::from(Ipv4Addr::new(172, 16, 0, 0)) + ((d as u32) << 16);
                (Ipv4Addr::from(base + next_host[d]), 16)
            } else {
                let base = u32::from(Ipv4Addr::new(10, 0, 0, 0)) + 4 * l as u32;
                (Ipv4Addr::from(base + 1 + side as u32), 30)
            };
            address[side] = Some((ip, prefix_len));
            ends.push(End {
                node: machine.node_name(node),
                link: link.name.clone(),
                address: IpAddr::V4(ip),
            });
        }
        links.push(LinkPlan {
            ifname: [format!("l{l}a"), format!("l{l}b")],
            address,
            rate_bits: rate as u64,
        });
    }
    let first = u32::from(Ipv4Addr::new(10, 254, 0, 1));
    let node_address = IdVec::from_fn(n, |v: NodeId| {
        (!switch[v]).then(|| Ipv4Addr::from(first + v.index() as u32))
    });
    let mut net = NetPlan {
        namespaces,
        switch,
        links,
        ends: machine.links.iter().map(|l| (l.a, l.b)).collect(),
        node_address,
        routes: Vec::new(),
        wiring: Wiring { port: PORT, ends },
    };
    net.routes = routes(&net);
    Ok(net)
}

/// Numbers the segments: switches joined by switch-to-switch links share one. Fails if the
/// switches of a segment form a loop (a bridged loop would flood).
fn segments(
    machine: &Machine,
    switch: &IdVec<NodeId, bool>,
) -> Result<IdVec<NodeId, usize>, String> {
    let mut segment: IdVec<NodeId, usize> = IdVec::filled(usize::MAX, switch.len());
    let mut count = 0;
    for start in switch.ids() {
        if !switch[start] || segment[start] != usize::MAX {
            continue;
        }
        let (mut nodes, mut edges) = (0usize, 0usize);
        let mut queue = VecDeque::from([start]);
        segment[start] = count;
        while let Some(u) = queue.pop_front() {
            nodes += 1;
            for link in &machine.links {
                let (a, b) = (link.a, link.b);
                if !(switch[a] && switch[b]) || (a != u && b != u) {
                    continue;
                }
                if a == u {
                    edges += 1;
                }
                let v = if a == u { b } else { a };
                if segment[v] == usize::MAX {
                    segment[v] = count;
                    queue.push_back(v);
                }
            }
        }
        if edges >= nodes {
            return Err(format!(
                "the switches around `{}` form a loop; the lab bridges switches and needs them to \
                 form a tree",
                machine.node_name(start)
            ));
        }
        count += 1;
    }
    if count > 16 {
        return Err(format!(
            "{count} switch segments; the lab addresses at most 16"
        ));
    }
    Ok(segment)
}

/// The other end of `link` from `node`.
fn other(net: &NetPlan, link: LinkId, node: NodeId) -> NodeId {
    let (a, b) = net.ends[link];
    if a == node {
        b
    } else {
        a
    }
}

/// The address of `node` on `link`.
fn end_address(net: &NetPlan, link: LinkId, node: NodeId) -> Option<Ipv4Addr> {
    let side = usize::from(net.ends[link].0 != node);
    net.links[link].address[side].map(|(ip, _)| ip)
}

/// Shortest-path routes to every compute node's node address, from every other compute node.
fn routes(net: &NetPlan) -> Vec<Route> {
    let n = net.switch.len();
    let mut out = Vec::new();
    let compute = || net.switch.ids().filter(|&v| !net.switch[v]);
    for v in compute() {
        // Breadth-first from v: toward[u] is the link u takes one hop nearer to v.
        let mut toward: IdVec<NodeId, Option<LinkId>> = IdVec::filled(None, n);
        let mut seen: IdVec<NodeId, bool> = IdVec::filled(false, n);
        seen[v] = true;
        let mut queue = VecDeque::from([v]);
        while let Some(u) = queue.pop_front() {
            // Only switches forward inside a segment; compute nodes route like IP hosts.
            for (l, &(a, b)) in net.ends.iter_enumerated() {
                let w = if a == u {
                    b
                } else if b == u {
                    a
                } else {
                    continue;
                };
                if !seen[w] {
                    seen[w] = true;
                    toward[w] = Some(l);
                    queue.push_back(w);
                }
            }
        }
        let Some(dest) = net.node_address[v] else {
            continue;
        };
        for u in compute().filter(|&u| u != v) {
            let Some(first) = toward[u] else { continue };
            // Through switches, the next IP hop is the first compute node on the way.
            let (mut at, mut last) = (other(net, first, u), first);
            while net.switch[at] {
                let Some(l) = toward[at] else { break };
                last = l;
                at = other(net, l, at);
            }
            let (Some(gateway), side) = (
                end_address(net, last, at),
                usize::from(net.ends[first].0 != u),
            ) else {
                continue;
            };
            out.push(Route {
                node: u,
                dest,
                gateway,
                dev: net.links[first].ifname[side].clone(),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use schedule_ir::{Link, Node};

    /// `a – sw – b`, or with the second link's far end `b_end`.
    fn star(b_end: u32) -> Machine {
        let node = |name: &str, kind| Node {
            name: name.into(),
            kind,
            capacity: None,
        };
        let link = |name: &str, a: u32, b: u32| Link {
            name: name.into(),
            a: NodeId(a),
            b: NodeId(b),
            bandwidth_gbps: 1.0,
            latency_us: 1.0,
            lanes: 1,
        };
        Machine {
            name: "star".into(),
            nodes: vec![
                node("a", NodeKind::Compute),
                node("sw", NodeKind::Switch),
                node("b", NodeKind::Compute),
            ],
            links: vec![link("up", 0, 1), link("down", 1, b_end)],
            reduce_gbps: None,
            switch_latency_us: 0.0,
        }
    }

    #[test]
    fn nodes_get_namespaces_and_compute_nodes_routes_through_their_switch() {
        let net = plan(&star(2), 1.0, "t").unwrap();
        assert_eq!(net.namespaces.as_slice(), ["tn0", "ts1", "tn2"]);
        assert_eq!(net.node_address[NodeId(1)], None);
        assert_eq!(net.ends[LinkId(1)], (NodeId(1), NodeId(2)));
        let routes: Vec<(NodeId, Ipv4Addr, &str)> = net
            .routes
            .iter()
            .map(|r| (r.node, r.dest, r.dev.as_str()))
            .collect();
        assert_eq!(
            routes,
            [
                (NodeId(2), Ipv4Addr::new(10, 254, 0, 1), "l1b"),
                (NodeId(0), Ipv4Addr::new(10, 254, 0, 3), "l0a"),
            ]
        );
    }

    #[test]
    fn a_link_to_a_node_that_does_not_exist_is_refused() {
        let e = plan(&star(9), 1.0, "t").unwrap_err();
        assert_eq!(e, "link `down` joins a node the machine does not have");
    }
}
