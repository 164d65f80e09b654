//! Lowerings: one module per method, each turning an embedding into a schedule phase.
//!
//! | method         | machines                         | embedding                        |
//! |----------------|----------------------------------|----------------------------------|
//! | `ladder-rings` | `Ladder` with an even pair count | seed 004's two barley-twist rings |
//! | `ring`         | any machine with a Hamiltonian cycle | one or two rings found by search |
//! | `trees`        | any connected machine of compute nodes | spanning trees packed by an LP |
//!
//! Every ring is run in both directions, so each method uses every link direction it embeds.
//! `auto` picks the first method in this table that applies and lowers the collective; rings
//! lower allreduce, reduce-scatter and allgather, trees every collective. [`dag`] schedules
//! lowerings that are described as a graph of dependent transfers.

pub mod balance;
pub mod dag;
pub mod ring;
pub mod trees;

use crate::embed::{self, hamiltonian, EmbedError, Ring};
use crate::machine::{Machine, Shape};
use std::fmt;

/// A lowering method the user can ask for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Method {
    /// Seed 004: the ladder's two barley-twist rings, both directions.
    LadderRings,
    /// Ring collectives over Hamiltonian rings (the machine's own ring, or found by search).
    Ring,
    /// Collectives over packed spanning trees: the generic method for any connected machine.
    Trees,
}

impl Method {
    /// Every method, in the order `auto` tries them.
    pub const ALL: [Method; 3] = [Method::LadderRings, Method::Ring, Method::Trees];

    /// The method's name on the command line and in schedules.
    pub fn name(self) -> &'static str {
        match self {
            Method::LadderRings => "ladder-rings",
            Method::Ring => "ring",
            Method::Trees => "trees",
        }
    }

    /// Whether the method can lower `collective` at all (on a machine it applies to).
    pub fn supports(self, collective: schedule_ir::Collective) -> bool {
        match self {
            Method::LadderRings | Method::Ring => ring::supports(collective),
            Method::Trees => trees::supports(collective),
        }
    }

    /// The method called `name`.
    pub fn from_name(name: &str) -> Option<Method> {
        Method::ALL.into_iter().find(|m| m.name() == name)
    }

    /// The proved rings this method runs on `machine` (one direction each). `trees` runs on
    /// trees, not rings: see [`crate::embed::trees::pack`].
    pub fn embed(self, machine: &Machine) -> Result<Vec<Ring>, EmbedError> {
        let rings = match (self, &machine.shape) {
            (Method::LadderRings, Shape::Ladder(layout)) => embed::ladder::barley_twist(layout)?,
            (Method::LadderRings, _) => {
                return Err(EmbedError::NotApplicable(
                    "`ladder-rings` runs on `Ladder` machines only".to_string(),
                ))
            }
            (Method::Ring, Shape::Ring) => vec![natural_ring(machine)],
            (Method::Ring, _) => hamiltonian::find_rings(machine, hamiltonian::DEFAULT_BUDGET)?,
            (Method::Trees, _) => {
                return Err(EmbedError::NotApplicable(
                    "`trees` embeds spanning trees, not rings".to_string(),
                ))
            }
        };
        embed::prove_rings(machine, &rings)?;
        Ok(rings)
    }
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A `Ring` machine's own cycle: node `i` to node `i+1` over link `i`.
fn natural_ring(machine: &Machine) -> Ring {
    let n = machine.node_count();
    Ring {
        nodes: (0..n).map(schedule_ir::NodeId::new).collect(),
        links: (0..n).map(schedule_ir::LinkId::new).collect(),
    }
}
