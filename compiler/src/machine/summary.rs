//! A one-screen summary of a machine for `topoc check`: its nodes, links, degrees, diameter,
//! bisection bandwidth, failures and devices. Each figure says whether it is exact.

use super::bisection::{self, Bisection};
use super::{Machine, Shape};
use crate::ids::IdVec;
use schedule_ir::{LinkId, NodeId, NodeKind};
use std::collections::VecDeque;
use std::fmt;

/// Breadth-first searches allowed for an exact diameter, in (searches × graph size).
const EXACT_DIAMETER_WORK: u64 = 50_000_000;

/// Breadth-first searches of an estimated diameter.
const DIAMETER_SAMPLES: usize = 16;

/// What `topoc check` prints about a machine.
#[derive(Clone, Debug)]
pub struct Summary {
    /// Compute nodes.
    pub compute: usize,
    /// Switches.
    pub switches: usize,
    /// Links.
    pub links: usize,
    /// Fewest and most links at a compute node.
    pub degree: (usize, usize),
    /// Lowest and highest link bandwidth, Gbit/s.
    pub bandwidth: (f64, f64),
    /// Longest shortest path between two compute nodes, in links, and whether it is exact
    /// (else a lower bound from a sample of searches).
    pub diameter: (usize, bool),
    /// Bisection bandwidth.
    pub bisection: Bisection,
}

/// Summarises `machine`.
pub fn summarize(machine: &Machine) -> Summary {
    let compute = machine.compute_nodes();
    let degrees: Vec<usize> = compute.iter().map(|&n| machine.links_at(n).len()).collect();
    let bandwidths: Vec<f64> = (0..machine.link_count())
        .map(|j| machine.link(LinkId::new(j)).bandwidth_gbps)
        .collect();
    Summary {
        compute: compute.len(),
        switches: machine.node_count() - compute.len(),
        links: machine.link_count(),
        degree: (
            degrees.iter().copied().min().unwrap_or(0),
            degrees.iter().copied().max().unwrap_or(0),
        ),
        bandwidth: (
            bandwidths.iter().copied().fold(f64::INFINITY, f64::min),
            bandwidths.iter().copied().fold(0.0, f64::max),
        ),
        diameter: diameter(machine, &compute),
        bisection: bisection::bisection(machine),
    }
}

/// The diameter over compute nodes: exact by a search from every compute node when that is
/// cheap, exact by formula for intact tori, hypercubes and full meshes, otherwise the largest
/// distance seen from a sample of compute nodes (a lower bound).
fn diameter(machine: &Machine, compute: &[NodeId]) -> (usize, bool) {
    let size = (machine.node_count() + machine.link_count()) as u64;
    let adj: IdVec<NodeId, Vec<NodeId>> = IdVec::from_fn(machine.node_count(), |n| {
        machine.links_at(n).iter().map(|&(_, u)| u).collect()
    });
    let is_compute: IdVec<NodeId, bool> = IdVec::from_fn(machine.node_count(), |n| {
        machine.node(n).kind == NodeKind::Compute
    });
    let eccentricity = |&s: &NodeId| eccentricity(&adj, &is_compute, s);
    if (compute.len() as u64).saturating_mul(size) <= EXACT_DIAMETER_WORK {
        let d = compute.iter().map(eccentricity).max();
        return (d.unwrap_or(0), true);
    }
    match &machine.shape {
        Shape::Torus { dims } => return (dims.iter().map(|d| d / 2).sum(), true),
        Shape::Mesh { dims } => return (dims.iter().map(|d| d - 1).sum(), true),
        Shape::Hypercube { dims } => return (*dims as usize, true),
        Shape::FullMesh => return (1, true),
        _ => {}
    }
    let step = (compute.len() / DIAMETER_SAMPLES).max(1);
    let d = compute.iter().step_by(step).map(eccentricity).max();
    (d.unwrap_or(0), false)
}

/// The largest distance, in links, from `source` to a compute node.
fn eccentricity(
    adj: &IdVec<NodeId, Vec<NodeId>>,
    is_compute: &IdVec<NodeId, bool>,
    source: NodeId,
) -> usize {
    // `adj` and `is_compute` have a slot per node of the machine, `source` among them.
    let mut dist: IdVec<NodeId, usize> = IdVec::filled(usize::MAX, adj.len());
    let Some(d) = dist.get_mut(source) else {
        return 0;
    };
    *d = 0;
    let mut queue = VecDeque::from([source]);
    let mut far = 0;
    while let Some(v) = queue.pop_front() {
        if is_compute[v] {
            far = far.max(dist[v]);
        }
        for &u in &adj[v] {
            if dist[u] == usize::MAX {
                dist[u] = dist[v] + 1;
                queue.push_back(u);
            }
        }
    }
    far
}

/// `100` or `12.5`: a number without trailing zeros.
fn num(x: f64) -> String {
    let s = format!("{x:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "  nodes      {} compute, {} switch{}",
            self.compute,
            self.switches,
            if self.switches == 1 { "" } else { "es" }
        )?;
        let bw = if self.bandwidth.0 == self.bandwidth.1 {
            format!("{} Gbit/s", num(self.bandwidth.0))
        } else {
            format!(
                "{} to {} Gbit/s",
                num(self.bandwidth.0),
                num(self.bandwidth.1)
            )
        };
        writeln!(
            f,
            "  links      {} ({} directions), {bw} per direction",
            self.links,
            2 * self.links
        )?;
        let (lo, hi) = self.degree;
        if lo == hi {
            let plural = if lo == 1 { "" } else { "s" };
            writeln!(f, "  degree     {lo} link{plural} at every compute node")?;
        } else {
            writeln!(f, "  degree     {lo} to {hi} links at a compute node")?;
        }
        let (d, exact) = self.diameter;
        writeln!(
            f,
            "  diameter   {d} link{} between the farthest compute nodes{}",
            if d == 1 { "" } else { "s" },
            if exact {
                " (exact)"
            } else {
                " (estimate: at least this, from a sample of searches)"
            }
        )?;
        let b = &self.bisection;
        if b.exact {
            writeln!(
                f,
                "  bisection  {} Gbit/s per direction (exact: all {} balanced splits of the compute nodes)",
                num(b.gbps),
                b.splits
            )
        } else {
            writeln!(
                f,
                "  bisection  {} Gbit/s per direction (estimate: at most this; best of {} balanced splits grown by breadth-first search{})",
                num(b.gbps),
                b.splits,
                if self.switches == 0 {
                    " and improved by Kernighan-Lin swaps"
                } else {
                    ""
                }
            )
        }
    }
}

/// The failed links and nodes and the device table, for `topoc check`; empty when there are
/// none.
pub fn extras(machine: &Machine) -> String {
    let mut out = String::new();
    if !machine.failed.links.is_empty() {
        out.push_str(&format!(
            "  failed     links {}\n",
            machine.failed.links.join(", ")
        ));
    }
    if !machine.failed.nodes.is_empty() {
        out.push_str(&format!(
            "  failed     nodes {}\n",
            machine.failed.nodes.join(", ")
        ));
    }
    // Devices with the same capabilities are listed together.
    let mut groups: Vec<(super::DeviceCaps, Vec<&str>)> = Vec::new();
    for (&n, &caps) in &machine.devices {
        let name = machine.node(n).name.as_str();
        match groups.iter_mut().find(|(c, _)| *c == caps) {
            Some((_, names)) => names.push(name),
            None => groups.push((caps, vec![name])),
        }
    }
    for (caps, names) in groups {
        let shown = if names.len() > 4 {
            format!(
                "{} … {} ({})",
                names[0],
                names[names.len() - 1],
                names.len()
            )
        } else {
            names.join(", ")
        };
        out.push_str(&format!(
            "  devices    {shown}: {}, {} segment buffers, MTU {} B\n",
            if caps.reduces {
                "reduces"
            } else {
                "does not reduce"
            },
            caps.segment_buffers,
            caps.mtu_bytes
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::{fabric, hypercube, torus, tree};
    use crate::topology::ast::{DeviceDecl, LinkParams, TreeNode};

    #[test]
    fn small_machines_are_exact() {
        let t = torus::torus("t", &[4, 4], LinkParams::default());
        let s = summarize(&t);
        assert_eq!(s.diameter, (4, true));
        assert!(s.bisection.exact);
        assert_eq!(s.bisection.gbps, 800.0, "8 links of 100 Gbit/s");
        let q = hypercube::hypercube("h", 3, LinkParams::default());
        assert_eq!(summarize(&q).bisection.gbps, 400.0);
    }

    #[test]
    fn switches_side_with_either_half() {
        // Two processors on each of two switches under a root: the cheapest cut is one uplink.
        let p = |n: &str| TreeNode::Processor {
            name: n.into(),
            up: None,
            children: vec![],
        };
        let s = |n: &str, children| TreeNode::Switch {
            name: n.into(),
            up: None,
            children,
        };
        let root = s(
            "r",
            vec![
                s("a", vec![p("p0"), p("p1")]),
                s("b", vec![p("p2"), p("p3")]),
            ],
        );
        let m = tree::tree("t", &root, LinkParams::default()).unwrap_or_else(|_| unreachable!());
        let b = bisection::bisection(&m);
        assert_eq!((b.gbps, b.exact, b.splits), (100.0, true, 3));
    }

    #[test]
    fn large_machines_are_estimated_near_the_truth() {
        let t = torus::torus("t", &[16, 16], LinkParams::default());
        let b = bisection::bisection(&t);
        assert!(!b.exact);
        assert_eq!(b.gbps, 3200.0, "32 links: the natural cut");
        let nic = DeviceDecl::default();
        let d = fabric::FabricDecl::new(8, 4, &nic, &nic);
        let f = fabric::fabric("f", &d).unwrap_or_else(|_| unreachable!());
        assert_eq!(bisection::bisection(&f).gbps, 400.0, "four NIC uplinks");
    }

    /// Run with `cargo test --release -p topoc summary_timings -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn summary_timings() {
        let link = LinkParams::default();
        for m in [
            hypercube::hypercube("h", 10, link),
            hypercube::hypercube("h", 14, link),
            torus::torus("t", &[128, 128], link),
        ] {
            let t = std::time::Instant::now();
            let s = summarize(&m);
            println!(
                "{} nodes: {:?} {:?} in {:?}",
                m.node_count(),
                s.diameter,
                s.bisection,
                t.elapsed()
            );
        }
    }
}
