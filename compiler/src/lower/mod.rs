//! Lowerings: one module per method, each turning an embedding into a schedule phase.
//!
//! | method         | machines                         | embedding                        |
//! |----------------|----------------------------------|----------------------------------|
//! | `ladder-rings` | `Ladder` with an even pair count | seed 004's two barley-twist rings |
//! | `ring`         | any machine with a Hamiltonian cycle | one or two rings found by search |
//!
//! Every ring is run in both directions, so each method uses every link direction it embeds.
//! `auto` picks the first method in this table that applies.

pub mod balance;
pub mod dag;
pub mod ring;

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
}

impl Method {
    /// Every method, in the order `auto` tries them.
    pub const ALL: [Method; 2] = [Method::LadderRings, Method::Ring];

    /// The method's name on the command line and in schedules.
    pub fn name(self) -> &'static str {
        match self {
            Method::LadderRings => "ladder-rings",
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
            (Method::LadderRings, _) => {
                return Err(EmbedError::NotApplicable(
                    "`ladder-rings` runs on `Ladder` machines only".to_string(),
                ))
            }
            (Method::Ring, Shape::Ring) => vec![natural_ring(machine)],
            (Method::Ring, _) => hamiltonian::find_rings(machine, hamiltonian::DEFAULT_BUDGET)?,
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
