//! The topology file as written: serde types that mirror the RON syntax one to one.
//!
//! Nothing here is checked beyond what serde checks (shape and types). Meaning — names that
//! exist, ids that are unique, a machine that is connected — is checked when the file is
//! turned into a [`crate::machine::Machine`], with diagnostics that point back into the file.

use serde::Deserialize;

pub use super::kinds::{DeviceDecl, HostFabric, LinkDecl, LinkOverride, LinkSetting, TreeNode};

/// A whole topology file: `Topology(name: …, machine: …, phases: […])`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename = "Topology")]
pub struct TopologyFile {
    /// The machine's name; carried into the schedule.
    pub name: String,
    /// The machine declaration.
    pub machine: MachineDecl,
    /// How fast each compute node combines data, in Gbit/s of operand: the γ of the cost model,
    /// so that estimates charge reductions that are not hidden behind transfers. Absent:
    /// combining is free in the estimates.
    #[serde(default)]
    pub reduce_gbps: Option<f64>,
    /// What a transfer pays, in microseconds, for each switch its route passes through, on
    /// top of the latencies of the links it crosses. Absent: switches add nothing.
    #[serde(default)]
    pub switch_latency_us: Option<f64>,
    /// The BSP program: compute phases and the exchange phases to compile. When empty, one
    /// allreduce phase (see [`Exchange::default_phase`]) is compiled.
    #[serde(default)]
    pub phases: Vec<PhaseDecl>,
}

/// Bandwidth, latency and lane count of a link.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct LinkParams {
    /// Per-direction bandwidth in Gbit/s.
    #[serde(default = "LinkParams::default_bandwidth")]
    pub bandwidth_gbps: f64,
    /// One-way latency in microseconds.
    #[serde(default = "LinkParams::default_latency")]
    pub latency_us: f64,
    /// Transfers each direction can carry in one step.
    #[serde(default = "LinkParams::default_lanes")]
    pub lanes: u32,
}

impl LinkParams {
    fn default_bandwidth() -> f64 {
        100.0
    }
    fn default_latency() -> f64 {
        1.0
    }
    fn default_lanes() -> u32 {
        1
    }
}

impl Default for LinkParams {
    fn default() -> Self {
        Self {
            bandwidth_gbps: Self::default_bandwidth(),
            latency_us: Self::default_latency(),
            lanes: Self::default_lanes(),
        }
    }
}

/// The default of counts that are 1 unless given.
fn one() -> u32 {
    1
}

/// The kinds of machine the language can declare.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename = "Machine")]
pub enum MachineDecl {
    /// `nodes` compute nodes `N0…` in a cycle.
    Ring {
        /// Number of nodes (at least 2).
        nodes: u32,
        /// Parameters of every link.
        #[serde(default)]
        link: LinkParams,
        /// Links out of service: left out of the machine graph.
        #[serde(default)]
        failed_links: Vec<String>,
        /// Nodes out of service: left out of the machine graph, with their links.
        #[serde(default)]
        failed_nodes: Vec<String>,
        /// Links whose parameters differ from the kind's defaults.
        #[serde(default)]
        link_overrides: Vec<LinkSetting>,
    },
    /// Seed 004's ladder: `pairs` facing pairs joined by two links each, ladder links between
    /// neighbouring pairs and return links between the end pairs.
    Ladder {
        /// Number of facing pairs (at least 1).
        pairs: u32,
        /// Parameters of every link, unless overridden below.
        #[serde(default)]
        link: LinkParams,
        /// Parameters of the two intra-pair ("rung") links, if they differ.
        #[serde(default)]
        rung: Option<LinkParams>,
        /// Links out of service.
        #[serde(default)]
        failed_links: Vec<String>,
        /// Nodes out of service.
        #[serde(default)]
        failed_nodes: Vec<String>,
        /// Links whose parameters differ from the kind's defaults.
        #[serde(default)]
        link_overrides: Vec<LinkSetting>,
    },
    /// A `dims`-dimensional hypercube: nodes `N0 … N(2^dims - 1)`, linked when their indices
    /// differ in one bit.
    Hypercube {
        /// Number of dimensions (1 to 14).
        dims: u32,
        /// Parameters of every link.
        #[serde(default)]
        link: LinkParams,
        /// Links out of service.
        #[serde(default)]
        failed_links: Vec<String>,
        /// Nodes out of service.
        #[serde(default)]
        failed_nodes: Vec<String>,
        /// Links whose parameters differ from the kind's defaults.
        #[serde(default)]
        link_overrides: Vec<LinkSetting>,
    },
    /// Seed 000's cube: the 3-dimensional hypercube with nodes `a … h` and faces `abcd`/`efgh`,
    /// `abef`/`dchg`, `adeh`/`bcgf`.
    Cube {
        /// Parameters of every link.
        #[serde(default)]
        link: LinkParams,
        /// Links out of service.
        #[serde(default)]
        failed_links: Vec<String>,
        /// Nodes out of service.
        #[serde(default)]
        failed_nodes: Vec<String>,
        /// Links whose parameters differ from the kind's defaults.
        #[serde(default)]
        link_overrides: Vec<LinkSetting>,
    },
    /// A torus: one node per point of a grid of the given sizes, linked to its neighbours
    /// along each dimension, with wrap-around links.
    Torus {
        /// The size of each dimension (each at least 2).
        dims: Vec<u32>,
        /// Parameters of every link.
        #[serde(default)]
        link: LinkParams,
        /// Links out of service.
        #[serde(default)]
        failed_links: Vec<String>,
        /// Nodes out of service.
        #[serde(default)]
        failed_nodes: Vec<String>,
        /// Links whose parameters differ from the kind's defaults.
        #[serde(default)]
        link_overrides: Vec<LinkSetting>,
    },
    /// A mesh: one node per point of a grid of the given sizes, linked to its neighbours along
    /// each dimension, without wrap-around links (a torus with its wrap-around links left out).
    Mesh {
        /// The size of each dimension (each at least 2).
        dims: Vec<u32>,
        /// Parameters of every link.
        #[serde(default)]
        link: LinkParams,
        /// Links out of service.
        #[serde(default)]
        failed_links: Vec<String>,
        /// Nodes out of service.
        #[serde(default)]
        failed_nodes: Vec<String>,
        /// Links whose parameters differ from the kind's defaults.
        #[serde(default)]
        link_overrides: Vec<LinkSetting>,
    },
    /// `nodes` compute nodes, every two joined by a link.
    FullMesh {
        /// Number of nodes (at least 2).
        nodes: u32,
        /// Parameters of every link.
        #[serde(default)]
        link: LinkParams,
        /// Links out of service.
        #[serde(default)]
        failed_links: Vec<String>,
        /// Nodes out of service.
        #[serde(default)]
        failed_nodes: Vec<String>,
        /// Links whose parameters differ from the kind's defaults.
        #[serde(default)]
        link_overrides: Vec<LinkSetting>,
    },
    /// A tree of switches and processors (seed 002): inner nodes forward, processors compute.
    Tree {
        /// The root of the tree, usually a switch.
        root: TreeNode,
        /// Parameters of every tree link, unless a node's `up` overrides them.
        #[serde(default)]
        link: LinkParams,
        /// Links out of service.
        #[serde(default)]
        failed_links: Vec<String>,
        /// Nodes out of service.
        #[serde(default)]
        failed_nodes: Vec<String>,
        /// Links whose parameters differ from the kind's defaults.
        #[serde(default)]
        link_overrides: Vec<LinkSetting>,
    },
    /// Seed 003's fabric: hosts of several ranks, one or several NICs per host, and one
    /// switch or a two-level leaf/spine network of switches; NICs and switches may reduce.
    Fabric {
        /// Number of hosts (at least 1).
        hosts: u32,
        /// Ranks (compute nodes) per host (at least 1).
        ranks_per_host: u32,
        /// NICs per host (at least 1, dividing `ranks_per_host`): the host's ranks are split
        /// into that many contiguous blocks, one per NIC (a GPU with its own NIC is a block of
        /// one).
        #[serde(default = "one")]
        nics_per_host: u32,
        /// `None`: one switch `SW` joins the NICs. `Some(k)`: `k` leaf switches `SW0…` each join
        /// a block of the NICs, and the spines join the leaves.
        #[serde(default)]
        leaf_switches: Option<u32>,
        /// Spine switches over the leaves (at least 1; several only with `leaf_switches`):
        /// every leaf is linked to every spine. One spine is named `SW`, several `SP0…`.
        #[serde(default = "one")]
        spines: u32,
        /// A fast fabric joining the ranks of each host besides their NICs; none when absent.
        #[serde(default)]
        host_fabric: Option<HostFabric>,
        /// What every NIC can do.
        #[serde(default)]
        nic: DeviceDecl,
        /// What every switch can do.
        #[serde(default)]
        switch: DeviceDecl,
        /// The links between a host's ranks and its NIC.
        #[serde(default)]
        host_link: LinkParams,
        /// The links between NICs and switches.
        #[serde(default)]
        network_link: LinkParams,
        /// The links between leaf switches and spines, when they differ from `network_link`.
        #[serde(default)]
        spine_link: Option<LinkParams>,
        /// Links out of service.
        #[serde(default)]
        failed_links: Vec<String>,
        /// Nodes out of service.
        #[serde(default)]
        failed_nodes: Vec<String>,
        /// Links whose parameters differ from the kind's defaults.
        #[serde(default)]
        link_overrides: Vec<LinkSetting>,
    },
    /// An explicit graph with user-chosen node names and link ids.
    Graph {
        /// Compute node names, unique.
        nodes: Vec<String>,
        /// Switch names, unique among all nodes: they forward transfers and compute nothing.
        #[serde(default)]
        switches: Vec<String>,
        /// Links between named nodes, each with a unique id.
        links: Vec<LinkDecl>,
        /// Parameters for links that do not give their own.
        #[serde(default)]
        link: LinkParams,
        /// Links out of service.
        #[serde(default)]
        failed_links: Vec<String>,
        /// Nodes out of service.
        #[serde(default)]
        failed_nodes: Vec<String>,
        /// Links whose parameters differ from the kind's defaults.
        #[serde(default)]
        link_overrides: Vec<LinkSetting>,
    },
}

impl MachineDecl {
    /// Adds failures given outside the file (`topoc compile --fail-link ID --fail-node ID`),
    /// after the file's own.
    pub fn fail(&mut self, links: &[String], nodes: &[String]) {
        match self {
            MachineDecl::Ring {
                failed_links,
                failed_nodes,
                ..
            }
            | MachineDecl::Ladder {
                failed_links,
                failed_nodes,
                ..
            }
            | MachineDecl::Hypercube {
                failed_links,
                failed_nodes,
                ..
            }
            | MachineDecl::Cube {
                failed_links,
                failed_nodes,
                ..
            }
            | MachineDecl::Torus {
                failed_links,
                failed_nodes,
                ..
            }
            | MachineDecl::Mesh {
                failed_links,
                failed_nodes,
                ..
            }
            | MachineDecl::FullMesh {
                failed_links,
                failed_nodes,
                ..
            }
            | MachineDecl::Tree {
                failed_links,
                failed_nodes,
                ..
            }
            | MachineDecl::Fabric {
                failed_links,
                failed_nodes,
                ..
            }
            | MachineDecl::Graph {
                failed_links,
                failed_nodes,
                ..
            } => {
                failed_links.extend(links.iter().cloned());
                failed_nodes.extend(nodes.iter().cloned());
            }
        }
    }
    /// What every kind may declare besides its shape.
    pub fn common(&self) -> Common<'_> {
        match self {
            MachineDecl::Ring {
                failed_links,
                failed_nodes,
                link_overrides,
                ..
            }
            | MachineDecl::Ladder {
                failed_links,
                failed_nodes,
                link_overrides,
                ..
            }
            | MachineDecl::Hypercube {
                failed_links,
                failed_nodes,
                link_overrides,
                ..
            }
            | MachineDecl::Cube {
                failed_links,
                failed_nodes,
                link_overrides,
                ..
            }
            | MachineDecl::Torus {
                failed_links,
                failed_nodes,
                link_overrides,
                ..
            }
            | MachineDecl::Mesh {
                failed_links,
                failed_nodes,
                link_overrides,
                ..
            }
            | MachineDecl::FullMesh {
                failed_links,
                failed_nodes,
                link_overrides,
                ..
            }
            | MachineDecl::Tree {
                failed_links,
                failed_nodes,
                link_overrides,
                ..
            }
            | MachineDecl::Fabric {
                failed_links,
                failed_nodes,
                link_overrides,
                ..
            }
            | MachineDecl::Graph {
                failed_links,
                failed_nodes,
                link_overrides,
                ..
            } => Common {
                failed_links,
                failed_nodes,
                link_overrides,
            },
        }
    }
}

/// The fields every machine kind has.
#[derive(Clone, Copy, Debug)]
pub struct Common<'a> {
    /// Link ids out of service.
    pub failed_links: &'a [String],
    /// Node names out of service.
    pub failed_nodes: &'a [String],
    /// Links with their own parameters.
    pub link_overrides: &'a [LinkSetting],
}

/// One phase of the BSP program.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename = "Phase")]
pub enum PhaseDecl {
    /// Local computation; the compiler emits nothing for it but keeps its place in the program.
    Compute(String),
    /// An exchange phase: one collective to compile.
    Exchange(Exchange),
}

/// An exchange phase declaration.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Exchange {
    /// The phase's name; the runtime runs phases by name. Unique among exchange phases.
    pub name: String,
    /// The collective.
    pub collective: CollectiveDecl,
    /// The combining operation.
    #[serde(default = "Exchange::default_op")]
    pub op: OpDecl,
    /// The element type.
    #[serde(default = "Exchange::default_dtype")]
    pub dtype: DTypeDecl,
    /// Vector length in elements.
    pub elements: u64,
    /// Force a lowering method (`auto` when absent).
    #[serde(default)]
    pub algorithm: Option<String>,
    /// Slices per round for `halving-doubling`: one count for every round, or one per round
    /// (the last repeated). The method's default when absent.
    #[serde(default)]
    pub slices: Option<SlicesDecl>,
    /// The method's variant (`cube-planes`: 300 or 400; default 400).
    #[serde(default)]
    pub variant: Option<u32>,
}

/// A slice count as written in a file: `slices: 4` or `slices: [2, 4, 4]`.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(untagged)]
pub enum SlicesDecl {
    /// The same count for every round.
    Every(usize),
    /// One count per round; rounds past the end use the last.
    PerRound(Vec<usize>),
}

impl SlicesDecl {
    /// The counts, one per round (the last repeated for later rounds).
    pub fn per_round(&self) -> Vec<usize> {
        match self {
            SlicesDecl::Every(k) => vec![*k],
            SlicesDecl::PerRound(ks) => ks.clone(),
        }
    }
}

impl Exchange {
    fn default_op() -> OpDecl {
        OpDecl::Sum
    }
    fn default_dtype() -> DTypeDecl {
        DTypeDecl::F32
    }

    /// The phase compiled when a file declares none: a 1 Mi-element f32 sum allreduce.
    pub fn default_phase() -> Exchange {
        Exchange {
            name: "allreduce".to_string(),
            collective: CollectiveDecl::AllReduce,
            op: OpDecl::Sum,
            dtype: DTypeDecl::F32,
            elements: 1 << 20,
            algorithm: None,
            slices: None,
            variant: None,
        }
    }
}

/// Collectives as written in a file; roots are node names.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename = "Collective")]
pub enum CollectiveDecl {
    /// Everyone ends with the combination of everyone's vector.
    AllReduce,
    /// Each chunk's owner ends with that chunk combined.
    ReduceScatter,
    /// Everyone ends with every owner's chunk.
    AllGather,
    /// Everyone ends with the root's vector.
    Broadcast {
        /// The root's node name.
        root: String,
    },
    /// The root ends with the combination of everyone's vector.
    Reduce {
        /// The root's node name.
        root: String,
    },
}

/// Combining operations as written in a file.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename = "Op")]
pub enum OpDecl {
    /// Addition.
    Sum,
    /// Multiplication.
    Prod,
    /// Maximum.
    Max,
    /// Minimum.
    Min,
    /// Arithmetic mean over the compute nodes: summed, then divided once by their number.
    Mean,
}

/// Element types as written in a file.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename = "DType")]
pub enum DTypeDecl {
    /// 32-bit float.
    F32,
    /// 64-bit float.
    F64,
    /// 32-bit integer.
    I32,
    /// 64-bit integer.
    I64,
    /// 16-bit IEEE 754 float (half precision).
    F16,
    /// 16-bit bfloat16 float.
    BF16,
}
