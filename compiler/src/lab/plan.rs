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
    /// The namespace of every node, by node index.
    pub namespaces: Vec<String>,
    /// Which nodes are switches (a bridge in their namespace).
    pub switch: Vec<bool>,
    /// By link index.
    pub links: Vec<LinkPlan>,
    /// The node indices of each link's ends `(a, b)`, by link index.
    pub ends: Vec<(usize, usize)>,
    /// The node address of each compute node (`None` for switches).
    pub node_address: Vec<Option<Ipv4Addr>>,
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
    let switch: Vec<bool> = machine
        .nodes
        .iter()
        .map(|x| x.kind == NodeKind::Switch)
        .collect();
    let namespaces = (0..n)
        .map(|i| format!("{prefix}{}{i}", if switch[i] { 's' } else { 'n' }))
        .collect();
    let segment = segments(machine, &switch)?;
    let mut next_host = vec![0u32; n];
    let mut links = Vec::with_capacity(machine.links.len());
    let mut ends = Vec::new();
    // Which segment each compute node already has an end on: two would be ambiguous.
    let mut on_segment: Vec<Vec<usize>> = vec![Vec::new(); n];
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
            if switch[node.index()] {
                continue;
            }
            let other = sides[1 - side];
            let (ip, prefix_len) = if switch[other.index()] {
                let d = segment[other.index()];
                if on_segment[node.index()].contains(&d) {
                    return Err(format!(
                        "`{}` has two links into the same switches (`{}` is one): the lab bridges \
                         switches, so it could not tell them apart",
                        machine.node_name(node),
                        link.name
                    ));
                }
                on_segment[node.index()].push(d);
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
    let node_address: Vec<Option<Ipv4Addr>> = (0..n)
        .map(|i| {
            (!switch[i]).then(|| Ipv4Addr::from(u32::from(Ipv4Addr::new(10, 254, 0, 1)) + i as u32))
        })
        .collect();
    let mut net = NetPlan {
        namespaces,
        switch,
        links,
        ends: machine
            .links
            .iter()
            .map(|l| (l.a.index(), l.b.index()))
            .collect(),
        node_address,
        routes: Vec::new(),
        wiring: Wiring { port: PORT, ends },
    };
    net.routes = routes(machine, &net);
    Ok(net)
}

/// Numbers the segments: switches joined by switch-to-switch links share one. Fails if the
/// switches of a segment form a loop (a bridged loop would flood).
fn segments(machine: &Machine, switch: &[bool]) -> Result<Vec<usize>, String> {
    let n = machine.nodes.len();
    let mut segment = vec![usize::MAX; n];
    let mut count = 0;
    for start in 0..n {
        if !switch[start] || segment[start] != usize::MAX {
            continue;
        }
        let (mut nodes, mut edges) = (0usize, 0usize);
        let mut queue = VecDeque::from([start]);
        segment[start] = count;
        while let Some(u) = queue.pop_front() {
            nodes += 1;
            for link in &machine.links {
                let (a, b) = (link.a.index(), link.b.index());
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
                machine.nodes[start].name
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
fn other(machine: &Machine, link: LinkId, node: usize) -> usize {
    let l = &machine.links[link.index()];
    if l.a.index() == node {
        l.b.index()
    } else {
        l.a.index()
    }
}

/// The address of `node` on `link`.
fn end_address(machine: &Machine, net: &NetPlan, link: LinkId, node: usize) -> Option<Ipv4Addr> {
    let side = usize::from(machine.links[link.index()].a.index() != node);
    net.links[link.index()].address[side].map(|(ip, _)| ip)
}

/// Shortest-path routes to every compute node's node address, from every other compute node.
fn routes(machine: &Machine, net: &NetPlan) -> Vec<Route> {
    let n = machine.nodes.len();
    let mut out = Vec::new();
    for v in (0..n).filter(|&v| !net.switch[v]) {
        // Breadth-first from v: toward[u] is the link u takes one hop nearer to v.
        let mut toward: Vec<Option<LinkId>> = vec![None; n];
        let mut seen = vec![false; n];
        seen[v] = true;
        let mut queue = VecDeque::from([v]);
        while let Some(u) = queue.pop_front() {
            // Only switches forward inside a segment; compute nodes route like IP hosts.
            for (l, link) in machine.links.iter().enumerate() {
                let w = if link.a.index() == u {
                    link.b.index()
                } else if link.b.index() == u {
                    link.a.index()
                } else {
                    continue;
                };
                if !seen[w] {
                    seen[w] = true;
                    toward[w] = Some(LinkId::new(l));
                    queue.push_back(w);
                }
            }
        }
        let Some(dest) = net.node_address[v] else {
            continue;
        };
        for u in (0..n).filter(|&u| u != v && !net.switch[u]) {
            let Some(first) = toward[u] else { continue };
            // Through switches, the next IP hop is the first compute node on the way.
            let (mut at, mut last) = (other(machine, first, u), first);
            while net.switch[at] {
                let Some(l) = toward[at] else { break };
                last = l;
                at = other(machine, l, at);
            }
            let (Some(gateway), side) = (
                end_address(machine, net, last, at),
                usize::from(machine.links[first.index()].a.index() != u),
            ) else {
                continue;
            };
            out.push(Route {
                node: NodeId::new(u),
                dest,
                gateway,
                dev: net.links[first.index()].ifname[side].clone(),
            });
        }
    }
    out
}
