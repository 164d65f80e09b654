//! The wiring file: which address each compute node has on each of its links, and the port
//! the transport listens on. Read from RON or JSON and checked against the machine.

use super::error::LinkError;
use schedule_ir::{LinkId, Machine, NodeId, NodeKind};
use serde::{Deserialize, Serialize};
use std::net::IpAddr;

/// Where each end of each link is: written by the lab (or by hand for real machines), read by
/// every node process.
///
/// ```ron
/// Wiring(port: 7100, ends: [
///     (node: "N0", link: "L011", address: "10.0.0.1"),
///     (node: "N1", link: "L011", address: "10.0.0.2"),
/// ])
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Wiring {
    /// The TCP port every node listens on, on each of its link addresses.
    pub port: u16,
    /// One entry per compute-node end of a link. Ends at switches have no entry: switches
    /// forward frames and own no address.
    pub ends: Vec<End>,
}

/// The address of one compute node on one link.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct End {
    /// The node's name, as in the schedule.
    pub node: String,
    /// The link's name, as in the schedule.
    pub link: String,
    /// The node's address on that link (every lane of the link shares it).
    pub address: IpAddr,
}

/// A wiring checked against a machine: the address of every compute-node end, by link.
#[derive(Clone, Debug)]
pub struct AddressPlan {
    /// The port.
    pub port: u16,
    /// `ends[l] = [address of l.a, address of l.b]`, `None` where there is none.
    ends: Vec<[Option<IpAddr>; 2]>,
}

impl Wiring {
    /// Reads a wiring file's text (RON).
    pub fn parse(text: &str) -> Result<Wiring, LinkError> {
        ron::from_str(text).map_err(|e| LinkError::Wiring {
            detail: format!("not a readable wiring file: {e}"),
        })
    }

    /// The wiring as pretty RON.
    pub fn to_ron(&self) -> String {
        ron::ser::to_string_pretty(self, ron::ser::PrettyConfig::default())
            .unwrap_or_else(|e| format!("// cannot write the wiring: {e}"))
    }

    /// Checks every entry against `machine`: the node and link exist, the node is a compute
    /// node at one end of the link, and no end is given twice.
    pub fn resolve(&self, machine: &Machine) -> Result<AddressPlan, LinkError> {
        let fail = |detail: String| Err(LinkError::Wiring { detail });
        if self.port == 0 {
            return fail("port 0 is not a port a peer can connect to".into());
        }
        let mut ends = vec![[None; 2]; machine.links.len()];
        for end in &self.ends {
            let Some(l) = machine.links.iter().position(|l| l.name == end.link) else {
                return fail(format!(
                    "link `{}` (for node `{}`) is not a link of machine `{}`",
                    end.link, end.node, machine.name
                ));
            };
            let Some(n) = machine.nodes.iter().position(|n| n.name == end.node) else {
                return fail(format!(
                    "node `{}` (on link `{}`) is not a node of machine `{}`",
                    end.node, end.link, machine.name
                ));
            };
            let (link, node) = (&machine.links[l], NodeId::new(n));
            if machine.nodes[n].kind == NodeKind::Switch {
                return fail(format!(
                    "`{}` is a switch: switches forward and have no address (link `{}`)",
                    end.node, end.link
                ));
            }
            let side = if link.a == node {
                0
            } else if link.b == node {
                1
            } else {
                return fail(format!(
                    "node `{}` is not an end of link `{}`",
                    end.node, end.link
                ));
            };
            let cell = &mut ends[l][side];
            if cell.is_some() {
                return fail(format!(
                    "node `{}` is given two addresses on link `{}`",
                    end.node, end.link
                ));
            }
            *cell = Some(end.address);
        }
        Ok(AddressPlan {
            port: self.port,
            ends,
        })
    }
}

impl AddressPlan {
    /// The address of `node` on `link`, or an error naming both.
    pub fn address(
        &self,
        machine: &Machine,
        node: NodeId,
        link: LinkId,
    ) -> Result<IpAddr, LinkError> {
        let found = machine.links.get(link.index()).and_then(|l| {
            let side = if l.a == node { 0 } else { 1 };
            self.ends.get(link.index())?[side]
        });
        found.ok_or_else(|| LinkError::Wiring {
            detail: format!(
                "node `{}` has no address on link `{}`",
                machine.node_name(node),
                machine.link_name(link)
            ),
        })
    }

    /// Which compute node and link an address belongs to.
    pub fn owner(&self, machine: &Machine, address: IpAddr) -> Option<(NodeId, LinkId)> {
        self.ends.iter().enumerate().find_map(|(l, sides)| {
            let side = sides.iter().position(|a| *a == Some(address))?;
            let link = machine.links.get(l)?;
            Some((if side == 0 { link.a } else { link.b }, LinkId::new(l)))
        })
    }
}
