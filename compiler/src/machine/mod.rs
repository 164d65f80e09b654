//! The machine graph: compute nodes, switches and links, as a petgraph multigraph.
//!
//! Node `i` of the graph is [`NodeId`]`(i)` and edge `j` is [`LinkId`]`(j)`, so ids from the
//! schedule IR index the graph directly. Machines are built from a topology file by
//! [`build::build`], which checks the declaration and reports every problem it finds; the
//! generators for each machine kind live in their own modules and document their naming.

pub mod bisection;
pub mod build;
pub mod fabric;
pub mod failures;
pub mod graph;
pub mod hypercube;
pub mod ladder;
pub mod mesh;
pub mod names;
pub mod overrides;
pub mod ring;
pub mod summary;
pub mod torus;
pub mod tree;

use petgraph::graph::{EdgeIndex, NodeIndex, UnGraph};
use petgraph::visit::EdgeRef;
use schedule_ir::{LinkId, NodeId, NodeKind};
use std::collections::BTreeMap;

pub use build::build;

/// A node of the machine graph.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeInfo {
    /// The user-facing name (`N3`, `gpu0`).
    pub name: String,
    /// Compute node or switch.
    pub kind: NodeKind,
}

/// A link of the machine graph.
#[derive(Clone, Debug, PartialEq)]
pub struct LinkInfo {
    /// The link identifier (`L02`, `nv3`).
    pub name: String,
    /// Per-direction bandwidth, Gbit/s.
    pub bandwidth_gbps: f64,
    /// One-way latency, µs.
    pub latency_us: f64,
    /// Transfers per direction per step.
    pub lanes: u32,
}

/// What generated the machine; lowerings that exploit a known structure look here.
#[derive(Clone, Debug, PartialEq)]
pub enum Shape {
    /// A cycle of nodes in id order.
    Ring,
    /// The ladder of facing pairs.
    Ladder(ladder::LadderLayout),
    /// A hypercube of `dims` dimensions, nodes in binary order.
    Hypercube {
        /// Number of dimensions.
        dims: u32,
    },
    /// The cube of the cube-plane method, with its faces.
    Cube(hypercube::CubeLayout),
    /// A torus of the given sizes, nodes in lexicographic order of their coordinates.
    Torus {
        /// The size of each dimension.
        dims: Vec<usize>,
    },
    /// A torus without its wrap-around links, nodes in the torus's order.
    Mesh {
        /// The size of each dimension.
        dims: Vec<usize>,
    },
    /// Every two nodes joined by one link.
    FullMesh,
    /// A tree of switches and processors, root first.
    Tree,
    /// Hosts of ranks, NICs and switches.
    Fabric,
    /// An explicit graph, or any machine once something in it has failed.
    Graph,
}

/// A machine: its graph, how it was made, and what the graph does not say.
#[derive(Clone, Debug)]
pub struct Machine {
    /// The name from the topology file.
    pub name: String,
    /// Nodes and links. Parallel links are allowed; self-loops are not.
    pub graph: UnGraph<NodeInfo, LinkInfo, u32>,
    /// Which generator made it. [`Shape::Graph`] once anything has failed: a structure with
    /// holes in it is no longer the structure.
    pub shape: Shape,
    /// Network devices that can do more than forward (a `Fabric`'s NICs and switches): a side
    /// table, so that the graph and the schedule's machine summary stay as they are.
    pub devices: BTreeMap<NodeId, DeviceCaps>,
    /// What the file declared out of service; already left out of `graph`.
    pub failed: Failed,
    /// How fast each compute node combines data, in Gbit/s (the file's `reduce_gbps`): only
    /// the cost model reads it.
    pub reduce_gbps: Option<f64>,
    /// What a transfer pays, in µs, for each switch it is forwarded by (the file's
    /// `switch_latency_us`, 0 when absent): only the cost model reads it.
    pub switch_latency_us: f64,
}

/// What a network device can do for in-network reduction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceCaps {
    /// Whether it can combine the segments passing through it.
    pub reduces: bool,
    /// How many segment buffer units it has.
    pub segment_buffers: u32,
    /// The largest segment it carries, in bytes.
    pub mtu_bytes: u32,
}

/// Links and nodes declared out of service, by the names the file gives.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Failed {
    /// Failed link ids.
    pub links: Vec<String>,
    /// Failed node names.
    pub nodes: Vec<String>,
    /// The shape the machine was declared with, before the failures made it a
    /// [`Shape::Graph`]: a method that needs that shape intact says so only when it was that
    /// shape.
    pub declared: Option<Shape>,
}

impl Failed {
    /// Whether nothing failed.
    pub fn is_empty(&self) -> bool {
        self.links.is_empty() && self.nodes.is_empty()
    }

    /// `, and L1, N2 failed` when the machine was declared with a shape `was` accepts and
    /// failures took it away, else nothing: the end of a method's refusal ("runs on intact
    /// `Cube` machines only"), which names the failures only where they are the reason.
    pub fn broke(&self, was: impl Fn(&Shape) -> bool) -> String {
        match &self.declared {
            Some(shape) if was(shape) => {
                let failed: Vec<&str> = self
                    .links
                    .iter()
                    .chain(&self.nodes)
                    .map(String::as_str)
                    .collect();
                format!(", and {} failed", failed.join(", "))
            }
            _ => String::new(),
        }
    }
}

impl LinkInfo {
    /// A link called `name` with the given parameters.
    pub fn new(name: String, params: &crate::topology::ast::LinkParams) -> LinkInfo {
        LinkInfo {
            name,
            bandwidth_gbps: params.bandwidth_gbps,
            latency_us: params.latency_us,
            lanes: params.lanes,
        }
    }
}

impl Machine {
    /// Assembles a machine: node `i` of `nodes` becomes `NodeId(i)`, link `j` of `links`
    /// (given by endpoint indices) becomes `LinkId(j)`.
    pub fn from_parts(
        name: &str,
        nodes: Vec<NodeInfo>,
        links: Vec<(usize, usize, LinkInfo)>,
        shape: Shape,
    ) -> Machine {
        let mut graph = UnGraph::with_capacity(nodes.len(), links.len());
        for n in nodes {
            graph.add_node(n);
        }
        for (a, b, info) in links {
            graph.add_edge(NodeIndex::new(a), NodeIndex::new(b), info);
        }
        Machine {
            name: name.to_string(),
            graph,
            shape,
            devices: BTreeMap::new(),
            failed: Failed::default(),
            reduce_gbps: None,
            switch_latency_us: 0.0,
        }
    }

    /// The number of nodes.
    pub fn node_count(&self) -> usize {
        self.graph.node_count()
    }

    /// The number of links.
    pub fn link_count(&self) -> usize {
        self.graph.edge_count()
    }

    /// The node's info.
    pub fn node(&self, id: NodeId) -> &NodeInfo {
        &self.graph[NodeIndex::new(id.index())]
    }

    /// The link's info.
    pub fn link(&self, id: LinkId) -> &LinkInfo {
        &self.graph[EdgeIndex::new(id.index())]
    }

    /// The endpoints of a link.
    pub fn endpoints(&self, id: LinkId) -> (NodeId, NodeId) {
        let (a, b) = self
            .graph
            .edge_endpoints(EdgeIndex::new(id.index()))
            .unwrap_or((NodeIndex::new(0), NodeIndex::new(0)));
        (NodeId::new(a.index()), NodeId::new(b.index()))
    }

    /// Whether any node is a switch.
    pub fn has_switches(&self) -> bool {
        self.graph
            .node_weights()
            .any(|n| n.kind == NodeKind::Switch)
    }

    /// Ids of the compute nodes, in order.
    pub fn compute_nodes(&self) -> Vec<NodeId> {
        self.graph
            .node_indices()
            .filter(|&i| self.graph[i].kind == NodeKind::Compute)
            .map(|i| NodeId::new(i.index()))
            .collect()
    }

    /// The links at `node`, as `(link, neighbour)`, in link id order.
    pub fn links_at(&self, node: NodeId) -> Vec<(LinkId, NodeId)> {
        let mut out: Vec<_> = self
            .graph
            .edges(NodeIndex::new(node.index()))
            .map(|e| {
                let other = if e.source().index() == node.index() {
                    e.target()
                } else {
                    e.source()
                };
                (LinkId::new(e.id().index()), NodeId::new(other.index()))
            })
            .collect();
        out.sort();
        out
    }

    /// The node called `name`.
    pub fn node_by_name(&self, name: &str) -> Option<NodeId> {
        self.graph
            .node_indices()
            .find(|&i| self.graph[i].name == name)
            .map(|i| NodeId::new(i.index()))
    }

    /// The link called `name`.
    pub fn link_by_name(&self, name: &str) -> Option<LinkId> {
        self.graph
            .edge_indices()
            .find(|&e| self.graph[e].name == name)
            .map(|e| LinkId::new(e.index()))
    }

    /// The machine summary carried by a schedule.
    pub fn to_ir(&self) -> schedule_ir::Machine {
        schedule_ir::Machine {
            name: self.name.clone(),
            nodes: self
                .graph
                .node_indices()
                .map(|i| {
                    let n = &self.graph[i];
                    // Reducing devices carry their segment units; other nodes none.
                    let capacity = self
                        .devices
                        .get(&NodeId::new(i.index()))
                        .filter(|c| c.reduces && c.segment_buffers > 0)
                        .map(|c| c.segment_buffers);
                    schedule_ir::Node {
                        name: n.name.clone(),
                        kind: n.kind,
                        capacity,
                    }
                })
                .collect(),
            links: self
                .graph
                .edge_indices()
                .map(|e| {
                    let info = &self.graph[e];
                    let (a, b) = self.endpoints(LinkId::new(e.index()));
                    schedule_ir::Link {
                        name: info.name.clone(),
                        a,
                        b,
                        bandwidth_gbps: info.bandwidth_gbps,
                        latency_us: info.latency_us,
                        lanes: info.lanes,
                    }
                })
                .collect(),
            reduce_gbps: self.reduce_gbps,
            switch_latency_us: self.switch_latency_us,
        }
    }
}
