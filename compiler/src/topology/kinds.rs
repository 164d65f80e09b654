//! The parts of machine declarations that nest: tree nodes, link overrides, fabric devices,
//! host fabrics and explicit links. Re-exported from [`super::ast`], where [`super::ast::MachineDecl`] uses them.

use super::ast::LinkParams;
use serde::Deserialize;

/// A node of a [`super::ast::MachineDecl::Tree`], with the link to its parent.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename = "TreeNode")]
pub enum TreeNode {
    /// A switch: forwards between its children and its parent, computes nothing.
    Switch {
        /// Unique among the tree's nodes.
        name: String,
        /// The link to the parent, where it differs from the tree's `link`.
        #[serde(default)]
        up: Option<LinkOverride>,
        /// The switch's children (at least one).
        #[serde(default)]
        children: Vec<TreeNode>,
    },
    /// A processor: a compute node, always a leaf.
    Processor {
        /// Unique among the tree's nodes.
        name: String,
        /// The link to the parent, where it differs from the tree's `link`.
        #[serde(default)]
        up: Option<LinkOverride>,
        /// Accepted only to be refused with a clear diagnostic: processors have no children.
        #[serde(default)]
        children: Vec<TreeNode>,
    },
}

impl TreeNode {
    /// The node's name.
    pub fn name(&self) -> &str {
        match self {
            TreeNode::Switch { name, .. } | TreeNode::Processor { name, .. } => name,
        }
    }
}

/// Link parameters that override some of a default's fields.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct LinkOverride {
    /// Per-direction bandwidth in Gbit/s.
    #[serde(default)]
    pub bandwidth_gbps: Option<f64>,
    /// One-way latency in microseconds.
    #[serde(default)]
    pub latency_us: Option<f64>,
    /// Transfers each direction can carry in one step.
    #[serde(default)]
    pub lanes: Option<u32>,
}

impl LinkOverride {
    /// `defaults` with the fields given here replaced.
    pub fn over(&self, defaults: LinkParams) -> LinkParams {
        LinkParams {
            bandwidth_gbps: self.bandwidth_gbps.unwrap_or(defaults.bandwidth_gbps),
            latency_us: self.latency_us.unwrap_or(defaults.latency_us),
            lanes: self.lanes.unwrap_or(defaults.lanes),
        }
    }
}

/// Parameters for some links of a generated machine, by id: `(links: ["L02", "L13"],
/// bandwidth_gbps: 50.0)`. The fields given replace the kind's own for those links.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct LinkSetting {
    /// The link ids.
    pub links: Vec<String>,
    /// Per-direction bandwidth in Gbit/s.
    #[serde(default)]
    pub bandwidth_gbps: Option<f64>,
    /// One-way latency in microseconds.
    #[serde(default)]
    pub latency_us: Option<f64>,
    /// Transfers each direction can carry in one step.
    #[serde(default)]
    pub lanes: Option<u32>,
}

impl LinkSetting {
    /// The fields given, as an override.
    pub fn change(&self) -> LinkOverride {
        LinkOverride {
            bandwidth_gbps: self.bandwidth_gbps,
            latency_us: self.latency_us,
            lanes: self.lanes,
        }
    }
}

/// What a NIC or switch of a [`super::ast::MachineDecl::Fabric`] can do (seed 003).
#[derive(Clone, Copy, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct DeviceDecl {
    /// Whether the device can combine segments passing through it.
    #[serde(default)]
    pub reduce: bool,
    /// Segment buffer units (at least 1 on a device that reduces).
    #[serde(default = "DeviceDecl::default_segment_buffers")]
    pub segment_buffers: u32,
    /// The largest segment, in bytes (at least 1).
    #[serde(default = "DeviceDecl::default_mtu")]
    pub mtu_bytes: u32,
}

impl DeviceDecl {
    fn default_segment_buffers() -> u32 {
        64
    }
    fn default_mtu() -> u32 {
        4096
    }
}

impl Default for DeviceDecl {
    fn default() -> Self {
        DeviceDecl {
            reduce: false,
            segment_buffers: Self::default_segment_buffers(),
            mtu_bytes: Self::default_mtu(),
        }
    }
}

/// How the ranks of a [`super::ast::MachineDecl::Fabric`]'s host are joined to each other,
/// besides through their NICs: the fast fabric inside a host (NVSwitch, Infinity Fabric) that
/// makes its ranks a group for the hierarchical method.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename = "HostFabric")]
pub enum HostFabric {
    /// One switch per host (`HSh`) with a link to every rank of the host (an NVSwitch
    /// fabric). It forwards and computes nothing.
    Switch {
        /// The links between the ranks and the host's switch.
        #[serde(default)]
        link: LinkParams,
    },
    /// A link between every two ranks of the host.
    FullMesh {
        /// The links between the ranks.
        #[serde(default)]
        link: LinkParams,
    },
}

impl HostFabric {
    /// The parameters of the fabric's links.
    pub fn link(&self) -> LinkParams {
        match self {
            HostFabric::Switch { link } | HostFabric::FullMesh { link } => *link,
        }
    }
}

/// One link of a [`super::ast::MachineDecl::Graph`].
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkDecl {
    /// The link identifier, unique in the machine.
    pub id: String,
    /// The two endpoints, by node name.
    pub between: (String, String),
    /// Per-direction bandwidth in Gbit/s; the machine's default when absent.
    #[serde(default)]
    pub bandwidth_gbps: Option<f64>,
    /// Latency in microseconds; the machine's default when absent.
    #[serde(default)]
    pub latency_us: Option<f64>,
    /// Lanes per direction; the machine's default when absent.
    #[serde(default)]
    pub lanes: Option<u32>,
}
