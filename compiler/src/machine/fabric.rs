//! `Fabric(hosts, ranks_per_host, …)`: hosts, NICs and switches.
//!
//! Every host `h` holds ranks `HhR0 … HhR(r-1)` (compute nodes) and `n` NICs (`nics_per_host`,
//! default 1): `NICh` when there is one, `NICh.0 … NICh.(n-1)` when there are several. The
//! host's ranks are split into `n` contiguous blocks of `r/n`, one per NIC: rank `k` is linked
//! to NIC `⌊k·n/r⌋` (`NICh-HhRk` or `NICh.j-HhRk`, `host_link:`). On DGX-class nodes each GPU
//! has its own NIC on its own PCIe switch (`n = r`); a host whose ranks share fewer NICs is a
//! block of several ranks per NIC.
//!
//! With `host_fabric: Switch(…)` a switch `HSh` per host is linked to each of its ranks
//! (`HSh-HhRk`); with `host_fabric: FullMesh(…)` every two ranks of a host are linked
//! (`HhRa-HhRb`, `a < b`). Either makes the host a group for the hierarchical method.
//!
//! With one switch, `SW` is linked to every NIC (`SW-NICh`, `network_link:`). With
//! `leaf_switches: k`, the NICs, host by host, are split into `k` contiguous blocks as evenly
//! as possible (NIC `q` of `Q = hosts·n`, counted host by host, goes to leaf `⌊q·k/Q⌋`, so one
//! NIC per host gives host `h` leaf `⌊h·k/hosts⌋`); leaf `SWj` is linked to its NICs
//! (`SWj-NICh`) and to every spine (`spine_link:`, by default `network_link:`): the spine `SW`
//! when there is one (`SW-SWj`), spines `SP0 … SP(s-1)` when `spines: s` is more than one
//! (`SPi-SWj`).
//!
//! Nodes are laid out ranks first (host by host), then NICs (host by host), then host
//! switches, then leaves, then the spines; links rank–NIC links (host by host), then host
//! fabric links (host by host), then NIC links, then spine links (leaf by leaf, spine by
//! spine). NICs and switches are switch nodes of the graph; what NICs, leaves and spines can do
//! for in-network reduction (reduce or not, segment buffers, MTU) is kept in
//! [`Machine::devices`]; host switches only forward.

use super::build::{check_params, MAX_LINKS, MAX_NODES};
use super::{DeviceCaps, LinkInfo, Machine, NodeInfo, Shape};
use crate::diag::Problem;
use crate::path;
use crate::topology::ast::{DeviceDecl, HostFabric, LinkParams};
use crate::topology::spans::Path;
use schedule_ir::{NodeId, NodeKind};

/// A fabric's declaration, as the machine kind gives it.
#[derive(Clone, Copy, Debug)]
pub struct FabricDecl<'a> {
    /// Number of hosts.
    pub hosts: u32,
    /// Ranks per host.
    pub ranks_per_host: u32,
    /// NICs per host, each serving a block of the host's ranks.
    pub nics_per_host: u32,
    /// Leaf switches under the spines, or one switch.
    pub leaf_switches: Option<u32>,
    /// Spine switches over the leaves.
    pub spines: u32,
    /// The fast fabric inside each host, if any.
    pub host_fabric: Option<HostFabric>,
    /// What every NIC can do.
    pub nic: &'a DeviceDecl,
    /// What every switch can do.
    pub switch: &'a DeviceDecl,
    /// Rank–NIC links.
    pub host_link: LinkParams,
    /// NIC–switch links.
    pub network_link: LinkParams,
    /// Leaf–spine links.
    pub spine_link: LinkParams,
}

impl<'a> FabricDecl<'a> {
    /// `hosts` hosts of `ranks_per_host` ranks, one NIC each, one switch, default links: the
    /// declaration with every optional field left out.
    pub fn new(
        hosts: u32,
        ranks_per_host: u32,
        nic: &'a DeviceDecl,
        switch: &'a DeviceDecl,
    ) -> FabricDecl<'a> {
        FabricDecl {
            hosts,
            ranks_per_host,
            nics_per_host: 1,
            leaf_switches: None,
            spines: 1,
            host_fabric: None,
            nic,
            switch,
            host_link: LinkParams::default(),
            network_link: LinkParams::default(),
            spine_link: LinkParams::default(),
        }
    }
}

/// Checks a fabric's numbers; every problem points at its field.
fn check(d: &FabricDecl) -> Vec<Problem> {
    let mut problems = check_params(&path!["machine", "host_link"], &d.host_link);
    problems.extend(check_params(
        &path!["machine", "network_link"],
        &d.network_link,
    ));
    problems.extend(check_params(&path!["machine", "spine_link"], &d.spine_link));
    if let Some(f) = d.host_fabric {
        problems.extend(check_params(
            &path!["machine", "host_fabric", "link"],
            &f.link(),
        ));
    }
    for (field, count, what) in [
        ("hosts", d.hosts, "host"),
        ("ranks_per_host", d.ranks_per_host, "rank per host"),
    ] {
        if count == 0 {
            problems.push(
                Problem::at(
                    path!["machine", field],
                    format!("a fabric needs at least 1 {what}, not 0"),
                    "nothing here",
                )
                .hint("a fabric has several hosts, each with several ranks"),
            );
        }
    }
    problems.extend(check_nics(d));
    problems.extend(check_switches(d));
    for (field, device) in [("nic", d.nic), ("switch", d.switch)] {
        problems.extend(check_device(&path!["machine", field], device));
    }
    if problems.is_empty() {
        problems.extend(check_size(d));
    }
    problems
}

/// Checks the NIC count: at least one, and the host's ranks split evenly among them.
fn check_nics(d: &FabricDecl) -> Option<Problem> {
    let (ranks, nics) = (d.ranks_per_host, d.nics_per_host);
    let at = path!["machine", "nics_per_host"];
    if nics == 0 {
        return Some(
            Problem::at(at, "a host needs at least 1 NIC, not 0", "no NICs")
                .hint("leave `nics_per_host` out for one NIC per host"),
        );
    }
    if ranks > 0 && ranks % nics != 0 {
        // The small divisors and the count itself: a search bounded whatever the count.
        let mut divisors: Vec<String> = (1..=ranks.min(1024))
            .filter(|k| ranks % k == 0)
            .take(16)
            .map(|k| k.to_string())
            .collect();
        if ranks > 1024 {
            divisors.push(format!("…, {ranks}"));
        }
        return Some(
            Problem::at(
                at,
                format!("{nics} NICs per host cannot share {ranks} ranks per host evenly"),
                format!("does not divide {ranks}"),
            )
            .hint(format!(
                "each NIC serves the same number of ranks; `nics_per_host` must divide `ranks_per_host`: {}",
                divisors.join(", ")
            )),
        );
    }
    None
}

/// Checks the leaf and spine counts.
fn check_switches(d: &FabricDecl) -> Vec<Problem> {
    let mut problems = Vec::new();
    let nics = u64::from(d.hosts) * u64::from(d.nics_per_host);
    match d.leaf_switches {
        Some(0) => problems.push(
            Problem::at(
                path!["machine", "leaf_switches"],
                "a two-level fabric needs at least 1 leaf switch, not 0",
                "no leaves",
            )
            .hint("leave `leaf_switches` out for a single switch"),
        ),
        Some(k) if d.nics_per_host <= 1 && d.hosts > 0 && k > d.hosts => problems.push(
            Problem::at(
                path!["machine", "leaf_switches"],
                format!(
                    "{k} leaf switches for {} hosts would leave some leaves with no host",
                    d.hosts
                ),
                "more leaves than hosts",
            )
            .hint(format!("use at most {} leaf switches", d.hosts)),
        ),
        Some(k) if nics > 0 && u64::from(k) > nics => problems.push(
            Problem::at(
                path!["machine", "leaf_switches"],
                format!("{k} leaf switches for {nics} NICs would leave some leaves with no NIC"),
                "more leaves than NICs",
            )
            .hint(format!("use at most {nics} leaf switches")),
        ),
        _ => {}
    }
    if d.spines == 0 {
        problems.push(
            Problem::at(
                path!["machine", "spines"],
                "a fabric needs at least 1 spine switch, not 0",
                "no spines",
            )
            .hint("leave `spines` out for one spine"),
        );
    } else if d.spines > 1 && d.leaf_switches.is_none() {
        problems.push(
            Problem::at(
                path!["machine", "spines"],
                format!(
                    "{} spines need leaf switches to join: without `leaf_switches` one switch joins every NIC",
                    d.spines
                ),
                "no leaves under these spines",
            )
            .hint("add `leaf_switches: k`, or leave `spines` out for a single switch"),
        );
    }
    problems
}

/// Checks that the machine stays within the node and link limits; counted in `u64`, saturating,
/// so that no declaration overflows.
fn check_size(d: &FabricDecl) -> Option<Problem> {
    let l = Layout::of(d);
    let nodes = l.node_count();
    if nodes > MAX_NODES {
        return Some(Problem::at(
            path!["machine", "hosts"],
            format!(
                "{} hosts of {} ranks make {nodes} nodes with NICs and switches, more than the compiler supports ({MAX_NODES})",
                d.hosts, d.ranks_per_host
            ),
            "too large",
        ));
    }
    let links = l.link_count();
    if links > MAX_LINKS {
        let problem = Problem::at(
            path!["machine", "hosts"],
            format!(
                "{} hosts of {} ranks make {links} links, more than the compiler supports ({MAX_LINKS})",
                d.hosts, d.ranks_per_host
            ),
            "too large",
        );
        return Some(if l.mesh_links > 0 {
            problem.hint(format!(
                "a `FullMesh` host fabric has {} links in each host of {} ranks; a `Switch` has {}",
                l.mesh_links, d.ranks_per_host, d.ranks_per_host
            ))
        } else {
            problem
        });
    }
    None
}

fn check_device(at: &Path, device: &DeviceDecl) -> Vec<Problem> {
    let mut problems = Vec::new();
    if device.mtu_bytes == 0 {
        problems.push(
            Problem::at(
                at.field("mtu_bytes"),
                "an MTU of 0 bytes carries nothing",
                "must be at least 1",
            )
            .hint("messages are cut into segments of at most the MTU; 4096 is common"),
        );
    }
    if device.reduce && device.segment_buffers == 0 {
        problems.push(
            Problem::at(
                at.field("segment_buffers"),
                "a device that reduces needs at least one segment buffer",
                "no buffers",
            )
            .hint("each segment being combined occupies one buffer unit until it is complete"),
        );
    }
    problems
}

fn caps(d: &DeviceDecl) -> DeviceCaps {
    DeviceCaps {
        reduces: d.reduce,
        segment_buffers: d.segment_buffers,
        mtu_bytes: d.mtu_bytes,
    }
}

/// Where each node of a fabric sits in the node table, and what it is called; counts in `u64`
/// so that a declaration can be sized before it is checked.
#[derive(Clone, Copy, Debug)]
struct Layout {
    hosts: u64,
    ranks: u64,
    nics: u64,
    /// Host switches: `hosts` with a switched host fabric, else 0.
    host_switches: u64,
    /// Rank–rank links per host of a fully connected host fabric.
    mesh_links: u64,
    leaves: u64,
    /// Spines, or the single switch.
    spines: u64,
}

impl Layout {
    fn of(d: &FabricDecl) -> Layout {
        let (hosts, ranks) = (u64::from(d.hosts), u64::from(d.ranks_per_host));
        let (host_switches, mesh_links) = match d.host_fabric {
            None => (0, 0),
            Some(HostFabric::Switch { .. }) => (hosts, 0),
            Some(HostFabric::FullMesh { .. }) => {
                (0, ranks.saturating_mul(ranks.saturating_sub(1)) / 2)
            }
        };
        Layout {
            hosts,
            ranks,
            nics: u64::from(d.nics_per_host).max(1),
            host_switches,
            mesh_links,
            leaves: u64::from(d.leaf_switches.unwrap_or(0)),
            spines: u64::from(d.spines).max(1),
        }
    }

    fn node_count(&self) -> u64 {
        let per_host = self.ranks.saturating_add(self.nics);
        self.hosts
            .saturating_mul(per_host)
            .saturating_add(self.host_switches)
            .saturating_add(self.leaves)
            .saturating_add(self.spines)
    }

    fn link_count(&self) -> u64 {
        let inside = if self.host_switches > 0 {
            self.ranks
        } else {
            self.mesh_links
        };
        let per_host = self.ranks.saturating_add(inside).saturating_add(self.nics);
        self.hosts
            .saturating_mul(per_host)
            .saturating_add(self.leaves.saturating_mul(self.spines))
    }

    // Indices below are used only after the size check, so they fit a `usize`.
    fn rank(&self, h: u64, r: u64) -> usize {
        (h * self.ranks + r) as usize
    }
    fn nic(&self, h: u64, n: u64) -> usize {
        (self.hosts * self.ranks + h * self.nics + n) as usize
    }
    fn host_switch(&self, h: u64) -> usize {
        (self.hosts * (self.ranks + self.nics) + h) as usize
    }
    fn leaf(&self, j: u64) -> usize {
        (self.hosts * (self.ranks + self.nics) + self.host_switches + j) as usize
    }
    fn spine(&self, s: u64) -> usize {
        (self.hosts * (self.ranks + self.nics) + self.host_switches + self.leaves + s) as usize
    }
    /// The NIC (of its host) that rank `r` reaches the network through.
    fn nic_of_rank(&self, r: u64) -> u64 {
        r * self.nics / self.ranks
    }
    /// The leaf switch of NIC `n` of host `h`.
    fn leaf_of_nic(&self, h: u64, n: u64) -> u64 {
        (h * self.nics + n) * self.leaves / (self.hosts * self.nics)
    }
    fn nic_name(&self, h: u64, n: u64) -> String {
        if self.nics == 1 {
            format!("NIC{h}")
        } else {
            format!("NIC{h}.{n}")
        }
    }
    fn spine_name(&self, s: u64) -> String {
        if self.spines == 1 {
            "SW".to_string()
        } else {
            format!("SP{s}")
        }
    }
}

/// The nodes of a fabric, in the layout's order.
fn nodes(l: &Layout) -> Vec<NodeInfo> {
    let node = |name: String, kind| NodeInfo { name, kind };
    let mut nodes = Vec::with_capacity(l.node_count() as usize);
    for h in 0..l.hosts {
        for r in 0..l.ranks {
            nodes.push(node(format!("H{h}R{r}"), NodeKind::Compute));
        }
    }
    for h in 0..l.hosts {
        for n in 0..l.nics {
            nodes.push(node(l.nic_name(h, n), NodeKind::Switch));
        }
    }
    for h in 0..l.host_switches {
        nodes.push(node(format!("HS{h}"), NodeKind::Switch));
    }
    for j in 0..l.leaves {
        nodes.push(node(format!("SW{j}"), NodeKind::Switch));
    }
    for s in 0..l.spines {
        nodes.push(node(l.spine_name(s), NodeKind::Switch));
    }
    nodes
}

/// The links of a fabric, in the layout's order, named upper end first.
fn links(l: &Layout, d: &FabricDecl, nodes: &[NodeInfo]) -> Vec<(usize, usize, LinkInfo)> {
    let mut links = Vec::with_capacity(l.link_count() as usize);
    let mut add = |up: usize, down: usize, p: &LinkParams| {
        let id = format!("{}-{}", nodes[up].name, nodes[down].name);
        links.push((up, down, LinkInfo::new(id, p)));
    };
    for h in 0..l.hosts {
        for r in 0..l.ranks {
            add(l.nic(h, l.nic_of_rank(r)), l.rank(h, r), &d.host_link);
        }
    }
    for h in 0..l.hosts {
        match d.host_fabric {
            None => {}
            Some(HostFabric::Switch { link }) => {
                for r in 0..l.ranks {
                    add(l.host_switch(h), l.rank(h, r), &link);
                }
            }
            Some(HostFabric::FullMesh { link }) => {
                for a in 0..l.ranks {
                    for b in a + 1..l.ranks {
                        add(l.rank(h, a), l.rank(h, b), &link);
                    }
                }
            }
        }
    }
    for h in 0..l.hosts {
        for n in 0..l.nics {
            let up = if l.leaves == 0 {
                l.spine(0)
            } else {
                l.leaf(l.leaf_of_nic(h, n))
            };
            add(up, l.nic(h, n), &d.network_link);
        }
    }
    for j in 0..l.leaves {
        for s in 0..l.spines {
            add(l.spine(s), l.leaf(j), &d.spine_link);
        }
    }
    links
}

/// Builds a fabric, reporting every problem in its declaration.
pub fn fabric(name: &str, d: &FabricDecl) -> Result<Machine, Vec<Problem>> {
    let problems = check(d);
    if !problems.is_empty() {
        return Err(problems);
    }
    let l = Layout::of(d);
    let nodes = nodes(&l);
    let links = links(&l, d, &nodes);
    let mut machine = Machine::from_parts(name, nodes, links, Shape::Fabric);
    for h in 0..l.hosts {
        for n in 0..l.nics {
            machine
                .devices
                .insert(NodeId::new(l.nic(h, n)), caps(d.nic));
        }
    }
    for j in 0..l.leaves {
        machine
            .devices
            .insert(NodeId::new(l.leaf(j)), caps(d.switch));
    }
    for s in 0..l.spines {
        machine
            .devices
            .insert(NodeId::new(l.spine(s)), caps(d.switch));
    }
    Ok(machine)
}

#[cfg(test)]
mod tests {
    use super::*;
    use schedule_ir::LinkId;

    fn build(d: &FabricDecl) -> Machine {
        match fabric("f", d) {
            Ok(m) => m,
            Err(p) => unreachable!("{p:?}"),
        }
    }

    fn link_names(m: &Machine) -> Vec<&str> {
        (0..m.link_count())
            .map(|j| m.link(LinkId::new(j)).name.as_str())
            .collect()
    }

    fn params(bandwidth_gbps: f64) -> LinkParams {
        LinkParams {
            bandwidth_gbps,
            ..LinkParams::default()
        }
    }

    #[test]
    fn two_level_fabric_names_and_blocks() {
        let (nic, switch) = (DeviceDecl::default(), DeviceDecl::default());
        let d = FabricDecl {
            leaf_switches: Some(2),
            ..FabricDecl::new(3, 2, &nic, &switch)
        };
        let m = build(&d);
        assert_eq!(m.node_count(), 6 + 3 + 2 + 1);
        assert_eq!(
            link_names(&m),
            [
                "NIC0-H0R0",
                "NIC0-H0R1",
                "NIC1-H1R0",
                "NIC1-H1R1",
                "NIC2-H2R0",
                "NIC2-H2R1",
                "SW0-NIC0",
                "SW0-NIC1",
                "SW1-NIC2",
                "SW-SW0",
                "SW-SW1"
            ]
        );
        assert_eq!(m.devices.len(), 3 + 2 + 1);
    }

    #[test]
    fn ranks_split_evenly_among_their_hosts_nics() {
        let nic = DeviceDecl::default();
        let d = FabricDecl {
            nics_per_host: 2,
            host_link: params(512.0),
            network_link: params(400.0),
            ..FabricDecl::new(2, 4, &nic, &nic)
        };
        let m = build(&d);
        assert_eq!(m.node_count(), 8 + 4 + 1);
        assert_eq!(
            link_names(&m),
            [
                "NIC0.0-H0R0",
                "NIC0.0-H0R1",
                "NIC0.1-H0R2",
                "NIC0.1-H0R3",
                "NIC1.0-H1R0",
                "NIC1.0-H1R1",
                "NIC1.1-H1R2",
                "NIC1.1-H1R3",
                "SW-NIC0.0",
                "SW-NIC0.1",
                "SW-NIC1.0",
                "SW-NIC1.1",
            ]
        );
        let bandwidth = |name: &str| m.link_by_name(name).map(|l| m.link(l).bandwidth_gbps);
        assert_eq!(bandwidth("NIC1.1-H1R3"), Some(512.0));
        assert_eq!(bandwidth("SW-NIC1.1"), Some(400.0));
        assert_eq!(m.devices.len(), 4 + 1, "four NICs and the switch");
    }

    #[test]
    fn every_leaf_joins_every_spine() {
        let nic = DeviceDecl::default();
        let d = FabricDecl {
            nics_per_host: 2,
            leaf_switches: Some(2),
            spines: 3,
            spine_link: params(800.0),
            ..FabricDecl::new(4, 2, &nic, &nic)
        };
        let m = build(&d);
        assert_eq!(m.node_count(), 8 + 8 + 2 + 3);
        let names = link_names(&m);
        assert_eq!(names.len(), 8 + 8 + 2 * 3);
        // NICs host by host in two blocks of four: hosts 0 and 1 on SW0, 2 and 3 on SW1.
        assert_eq!(
            names[8..16],
            [
                "SW0-NIC0.0",
                "SW0-NIC0.1",
                "SW0-NIC1.0",
                "SW0-NIC1.1",
                "SW1-NIC2.0",
                "SW1-NIC2.1",
                "SW1-NIC3.0",
                "SW1-NIC3.1",
            ]
        );
        assert_eq!(
            names[16..],
            ["SP0-SW0", "SP1-SW0", "SP2-SW0", "SP0-SW1", "SP1-SW1", "SP2-SW1"]
        );
        for name in &names[16..] {
            let l = m.link_by_name(name).unwrap_or_else(|| unreachable!());
            assert_eq!(m.link(l).bandwidth_gbps, 800.0, "{name}");
        }
        assert!(m.node_by_name("SW").is_none(), "several spines are SP0 …");
        assert_eq!(m.devices.len(), 8 + 2 + 3);
    }

    #[test]
    fn host_fabrics_join_each_hosts_ranks() {
        let nic = DeviceDecl::default();
        let switched = FabricDecl {
            host_fabric: Some(HostFabric::Switch {
                link: params(3600.0),
            }),
            ..FabricDecl::new(2, 3, &nic, &nic)
        };
        let m = build(&switched);
        assert_eq!(m.node_count(), 6 + 2 + 2 + 1);
        assert_eq!(
            link_names(&m)[6..12],
            ["HS0-H0R0", "HS0-H0R1", "HS0-H0R2", "HS1-H1R0", "HS1-H1R1", "HS1-H1R2"]
        );
        assert_eq!(m.link(LinkId::new(6)).bandwidth_gbps, 3600.0);
        assert_eq!(
            m.devices.len(),
            2 + 1,
            "host switches only forward: no device entry"
        );
        let meshed = FabricDecl {
            host_fabric: Some(HostFabric::FullMesh {
                link: params(900.0),
            }),
            ..switched
        };
        let m = build(&meshed);
        assert_eq!(m.node_count(), 6 + 2 + 1);
        assert_eq!(
            link_names(&m)[6..12],
            [
                "H0R0-H0R1",
                "H0R0-H0R2",
                "H0R1-H0R2",
                "H1R0-H1R1",
                "H1R0-H1R2",
                "H1R1-H1R2"
            ]
        );
        assert_eq!(m.link(LinkId::new(11)).bandwidth_gbps, 900.0);
    }

    #[test]
    fn every_count_is_checked_before_building() {
        let nic = DeviceDecl::default();
        let fields = |d: FabricDecl| -> Vec<String> {
            match fabric("f", &d) {
                Ok(_) => Vec::new(),
                Err(problems) => problems.iter().map(|p| p.message.clone()).collect(),
            }
        };
        let base = FabricDecl::new(4, 6, &nic, &nic);
        assert!(fields(base).is_empty());
        let zero = fields(FabricDecl {
            nics_per_host: 0,
            spines: 0,
            leaf_switches: Some(2),
            ..base
        });
        assert_eq!(
            zero,
            [
                "a host needs at least 1 NIC, not 0",
                "a fabric needs at least 1 spine switch, not 0"
            ]
        );
        let uneven = fields(FabricDecl {
            nics_per_host: 4,
            ..base
        });
        assert_eq!(
            uneven,
            ["4 NICs per host cannot share 6 ranks per host evenly"]
        );
        // 4 hosts × 3 NICs = 12 NICs: 12 leaves is the most.
        let leaves = |k| {
            fields(FabricDecl {
                nics_per_host: 3,
                leaf_switches: Some(k),
                ..base
            })
        };
        assert!(leaves(12).is_empty());
        assert_eq!(
            leaves(13),
            ["13 leaf switches for 12 NICs would leave some leaves with no NIC"]
        );
    }
}
