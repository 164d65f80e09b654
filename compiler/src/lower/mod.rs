//! Lowerings: one module per method, each turning an embedding into a schedule phase.
//!
//! | method         | machines                         | embedding                        |
//! |----------------|----------------------------------|----------------------------------|
//! | `ladder-rings` | `Ladder` with an even pair count | seed 004's two barley-twist rings |
//! | `in-network`   | `Fabric` whose NICs reduce | seed 003: segments of at most the MTU reduced rank → NIC → switch and sent back, in batches that fit the devices' segment units ([`in_network`]); without a reducing switch, a ring among the NICs ([`nic_ring`]); allreduce only |
//! | `ring`         | any machine with a Hamiltonian cycle, or with switches | one or two rings found by search; with switches, the compute nodes in depth-first order, each hop routed through the switches |
//! | `tree`         | `Tree`                           | seed 002: the holders of each portion in sibling subtrees combine it, level by level up to the root, then gather back down ([`tree`]); `auto` tries it after `ring`, which is faster on `examples/tree-asym.ron` (its slow leaf link bounds both and the ring keeps it busier) and wherever uplinks carry one transfer per step; `tree` wins where uplinks have lanes (`examples/tree-fat.ron`: 12 steps against 30) |
//!
//! Every ring is run in both directions when that is faster ([`ring::orient`]), so each
//! method uses every link direction it embeds. `auto` picks the first method in this table that
//! applies.

pub mod in_network;
pub mod nic_ring;
pub mod ring;
pub mod tree;

use crate::embed::{self, hamiltonian, routed, structured, EmbedError, Ring};
use crate::machine::{Machine, Shape};
use std::fmt;

/// A lowering method the user can ask for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Method {
    /// Seed 004: the ladder's two barley-twist rings, both directions.
    LadderRings,
    /// Seed 003: allreduce in the NICs and the switch of a `Fabric`, segment by segment.
    InNetwork,
    /// Ring collectives over Hamiltonian rings (the machine's own ring, or found by search).
    Ring,
    /// Seed 002: level-by-level reduce-scatter and gather on a `Tree` machine.
    Tree,
}

impl Method {
    /// Every method, in the order `auto` tries them.
    pub const ALL: [Method; 4] = [
        Method::LadderRings,
        Method::InNetwork,
        Method::Ring,
        Method::Tree,
    ];

    /// The method's name on the command line and in schedules.
    pub fn name(self) -> &'static str {
        match self {
            Method::LadderRings => "ladder-rings",
            Method::Tree => "tree",
            Method::InNetwork => "in-network",
            Method::Ring => "ring",
        }
    }

    /// The method called `name`.
    pub fn from_name(name: &str) -> Option<Method> {
        Method::ALL.into_iter().find(|m| m.name() == name)
    }

    /// The proved rings this method runs on `machine` (one direction each).
    pub fn embed(self, machine: &Machine) -> Result<Vec<Ring>, EmbedError> {
        let rings = match (self, &machine.shape) {
            (Method::LadderRings, Shape::Ladder(layout)) => embed::ladder::barley_twist(layout)?,
            (Method::LadderRings, _) if !machine.failed.is_empty() => {
                let mut failed = machine.failed.links.clone();
                failed.extend(machine.failed.nodes.iter().cloned());
                return Err(EmbedError::NotApplicable(format!(
                    "`ladder-rings` runs on intact `Ladder` machines only, and {} failed",
                    failed.join(", ")
                )));
            }
            (Method::LadderRings, _) => {
                return Err(EmbedError::NotApplicable(
                    "`ladder-rings` runs on `Ladder` machines only".to_string(),
                ))
            }
            (Method::InNetwork, _) => {
                return Err(EmbedError::NotApplicable(
                    "`in-network` embeds no rings: the NICs and the switch combine segments"
                        .to_string(),
                ))
            }
            (Method::Tree, _) => {
                return Err(EmbedError::NotApplicable(
                    "`tree` embeds no rings: it combines level by level through a `Tree` machine (`topoc compile --algorithm tree`)"
                        .to_string(),
                ))
            }
            (Method::Ring, Shape::Ring) => vec![natural_ring(machine)],
            (Method::Ring, _) if machine.has_switches() => vec![routed::switched_ring(machine)?],
            (Method::Ring, shape) => match structured_rings(machine, shape) {
                Some(rings) => rings,
                None => hamiltonian::find_rings(machine, hamiltonian::DEFAULT_BUDGET)?,
            },
        };
        embed::prove_rings(machine, &rings)?;
        Ok(rings)
    }
}

impl Method {
    /// Lowers `spec` on `machine` with this method: the phase and a line per ring or stage
    /// for humans, why the method does not apply, or `Ok(None)` for a collective it does not
    /// lower. `auto`: the method is being tried by `auto`, so a fallback slower than a later
    /// method is refused (with both estimates) rather than taken.
    pub fn lower(
        self,
        spec: &ring::PhaseSpec,
        machine: &Machine,
        auto: bool,
    ) -> Result<Option<(schedule_ir::Phase, Vec<String>)>, EmbedError> {
        match self {
            Method::Tree => return tree::lower(spec, machine),
            Method::InNetwork => return in_network::lower(spec, machine, auto),
            Method::LadderRings | Method::Ring => {}
        }
        let rings = self.embed(machine)?;
        let logical = ring::orient(machine, &rings);
        Ok(ring::lower(spec, self.name(), machine, &logical)
            .map(|phase| (phase, rings.iter().map(|r| r.describe(machine)).collect())))
    }
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Two rings built from a torus's, hypercube's or full mesh's structure, where a construction
/// applies ([`structured`]); `None` leaves the machine to the search.
fn structured_rings(machine: &Machine, shape: &Shape) -> Option<Vec<Ring>> {
    match shape {
        Shape::Torus { dims } => structured::grid_rings(machine, dims, &|c| {
            schedule_ir::NodeId::new(crate::machine::torus::index(dims, c))
        }),
        Shape::Hypercube { dims } => {
            let sizes = vec![2; *dims as usize];
            structured::grid_rings(machine, &sizes, &|c| {
                schedule_ir::NodeId::new(c.iter().enumerate().map(|(k, &b)| b << k).sum())
            })
        }
        Shape::FullMesh => structured::full_mesh_rings(machine),
        _ => None,
    }
}

/// A `Ring` machine's own cycle: node `i` to node `i+1` over link `i`.
fn natural_ring(machine: &Machine) -> Ring {
    let n = machine.node_count();
    Ring::direct(
        (0..n).map(schedule_ir::NodeId::new).collect(),
        (0..n).map(schedule_ir::LinkId::new).collect(),
    )
}
