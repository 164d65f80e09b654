//! Lowerings: one module per method, each turning an embedding into a schedule phase.
//!
//! | method         | machines                         | embedding                        |
//! |----------------|----------------------------------|----------------------------------|
//! | `ladder-rings` | `Ladder` with an even pair count | seed 004's two barley-twist rings |
//! | `rotated-hd`   | `Hypercube`, `Cube`, equal-sided `Torus` | halving-doubling with the dimensions rotated per part ([`rotated`]) |
//! | `cube-planes`  | `Cube` (allreduce only)          | seed 000's face rings, methods 300 and 400 ([`cube_planes`]) |
//! | `direct`       | any machine whose compute nodes are joined pairwise (`FullMesh`) | none: each chunk goes straight to its owner and back, one step each ([`direct`]) |
//! | `in-network`   | `Fabric` whose NICs reduce | seed 003: segments of at most the MTU reduced rank → NIC → switch and sent back, in batches that fit the devices' segment units ([`in_network`]); without a reducing switch, a ring among the NICs ([`nic_ring`]); allreduce only |
//! | `ring`         | any machine with a Hamiltonian cycle, or with switches | one or two rings found by search; with switches, the compute nodes in depth-first order, each hop routed through the switches |
//! | `tree`         | `Tree`                           | seed 002: the holders of each portion in sibling subtrees combine it, level by level up to the root, then gather back down ([`tree`]); after `ring`, which is faster where uplinks carry one transfer per step; `tree` wins where uplinks have lanes (`examples/tree-fat.ron`) |
//! | `trees`        | any connected machine (tree edges through switches are routes) | spanning trees packed by an LP ([`trees`], [`crate::embed::trees`]), pipelined to a depth chosen for the phase's size |
//! | `halving-doubling` | any machine whose compute nodes reach each other | seed 001's pipelined recursive halving/doubling; no rings, every transfer routed ([`halving_doubling`]) |
//!
//! Every ring is run in both directions when that is faster ([`ring::orient`]), so each
//! method uses every link direction it embeds. `auto` lowers the phase with every method in
//! this table that applies and supports the collective, and keeps the schedule the cost model
//! prices lowest for the phase's vector (of equal estimates, the one higher in the table).
//! [`dag`] schedules lowerings that are described as a graph of dependent transfers. Every
//! method lowers the mean op as a sum; [`mean`] adds the divisions afterwards, the same way for
//! all of them.

pub mod balance;
pub mod cube_planes;
pub mod dag;
pub mod direct;
pub mod halving_doubling;
pub mod in_network;
pub mod mean;
pub mod nic_ring;
pub mod plan;
pub mod ring;
pub mod rotated;
pub mod tree;
pub mod trees;

use crate::embed::{self, hamiltonian, routed, structured, EmbedError, Ring};
use crate::machine::{Machine, Shape};
use schedule_ir::{
    Buffer, BufferId, BufferKind, Chunk, Collective, DType, LinkId, NodeId, Phase, Program,
    ReduceOp,
};
use std::fmt;

/// What a lowering is asked to produce, independent of method.
#[derive(Clone, Debug)]
pub struct PhaseSpec {
    /// The phase's name.
    pub name: String,
    /// The collective.
    pub collective: Collective,
    /// The combining operation.
    pub op: ReduceOp,
    /// The element type.
    pub dtype: DType,
    /// The vector length.
    pub elements: u64,
}

impl PhaseSpec {
    /// The phase this spec asks for, as a method lowered it: `steps` BSP steps of `programs`
    /// (one per node) over `chunks` and `buffers`.
    pub fn phase(
        &self,
        algorithm: &str,
        chunks: Vec<Chunk>,
        buffers: Vec<Buffer>,
        steps: usize,
        programs: Vec<Program>,
    ) -> Phase {
        Phase {
            name: self.name.clone(),
            collective: self.collective,
            op: self.op,
            dtype: self.dtype,
            elements: self.elements,
            algorithm: algorithm.to_string(),
            chunks,
            buffers,
            steps: u32::try_from(steps).unwrap_or(u32::MAX),
            programs,
            candidates: Vec::new(),
        }
    }
}

/// The user's data: buffer 0 of every method.
pub const DATA: BufferId = BufferId(0);

/// The one buffer most methods need: the user's data.
pub fn data_buffer() -> Vec<Buffer> {
    vec![Buffer {
        name: "data".to_string(),
        kind: BufferKind::Data,
    }]
}

/// Cuts `elements` into `count` contiguous chunks whose sizes differ by at most one.
pub fn even_chunks(elements: u64, count: usize) -> Vec<(u64, u64)> {
    let count = count.max(1) as u128;
    (0..count)
        .map(|i| {
            let at = |k: u128| (k * elements as u128 / count) as u64;
            (at(i), at(i + 1))
        })
        .collect()
}

/// The link joining `a` and `b`, the lowest id when there are several.
pub fn link_between(machine: &Machine, a: NodeId, b: NodeId) -> Option<LinkId> {
    machine
        .links_at(a)
        .into_iter()
        .filter(|&(_, w)| w == b)
        .map(|(l, _)| l)
        .min()
}

/// A lowering method the user can ask for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Method {
    /// Seed 004: the ladder's two barley-twist rings, both directions.
    LadderRings,
    /// Halving-doubling with rotated dimensions on hypercubes, the cube and equal-sided tori.
    RotatedHd,
    /// Seed 000: allreduce on the cube's six faces (methods 300 and 400).
    CubePlanes,
    /// Every chunk straight to its owner and back, on machines whose compute nodes are joined
    /// pairwise.
    Direct,
    /// Seed 003: allreduce in the NICs and the switch of a `Fabric`, segment by segment.
    InNetwork,
    /// Ring collectives over Hamiltonian rings (the machine's own ring, or found by search).
    Ring,
    /// Seed 002: level-by-level reduce-scatter and gather on a `Tree` machine.
    Tree,
    /// Collectives over packed spanning trees: the generic method for any connected machine.
    Trees,
    /// Seed 001: pipelined recursive halving/doubling over routed transfers.
    HalvingDoubling,
}

/// Per-phase settings some methods take.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Knobs {
    /// `cube-planes`: seed 000's method 300 or 400 (400 when absent).
    pub variant: Option<u32>,
    /// `halving-doubling`: slices per round (the last repeats; empty: the default).
    pub slices: Vec<usize>,
}

/// A lowered phase with what the compiler reports about it.
pub struct Lowered {
    /// The phase.
    pub phase: schedule_ir::Phase,
    /// The rings embedded (one direction each), in words; empty for structured methods.
    pub rings: Vec<String>,
    /// The same rings as data, in the same order (for `topoc draw`).
    pub embedding: Vec<Ring>,
    /// Choices the method made, in words (`cube-planes`: the start choice found).
    pub detail: Option<String>,
}

impl Method {
    /// Every method, in the order `auto` tries them.
    pub const ALL: [Method; 9] = [
        Method::LadderRings,
        Method::RotatedHd,
        Method::CubePlanes,
        Method::Direct,
        Method::InNetwork,
        Method::Ring,
        Method::Tree,
        Method::Trees,
        Method::HalvingDoubling,
    ];

    /// The method's name on the command line and in schedules.
    pub fn name(self) -> &'static str {
        match self {
            Method::LadderRings => "ladder-rings",
            Method::RotatedHd => "rotated-hd",
            Method::CubePlanes => "cube-planes",
            Method::Direct => "direct",
            Method::InNetwork => "in-network",
            Method::Tree => "tree",
            Method::Ring => "ring",
            Method::Trees => "trees",
            Method::HalvingDoubling => "halving-doubling",
        }
    }

    /// Whether the method lowers `collective`.
    pub fn supports(self, collective: schedule_ir::Collective) -> bool {
        match self {
            Method::LadderRings | Method::Ring | Method::RotatedHd | Method::Tree => {
                ring::supports(collective)
            }
            Method::InNetwork => collective == schedule_ir::Collective::AllReduce,
            Method::CubePlanes => collective == schedule_ir::Collective::AllReduce,
            Method::Trees => trees::supports(collective),
            Method::Direct => direct::supports(collective),
            Method::HalvingDoubling => halving_doubling::supports(collective),
        }
    }

    /// Whether the method's schedule depends on the vector's length beyond its chunk sizes:
    /// `trees` chooses its pipeline depth for the phase's size, and `in-network` cuts the
    /// vector into segments of at most the MTU (re-chunked to a larger vector, its segments
    /// would outgrow the MTU), so `topoc simulate` lowers them again for every size instead
    /// of re-chunking one schedule.
    pub fn sized(self) -> bool {
        matches!(self, Method::Trees | Method::InNetwork)
    }

    /// Whether the method takes a `variant` (only `cube-planes`: 300 or 400).
    pub fn takes_variant(self) -> bool {
        !self.variants().is_empty()
    }

    /// The variants the method takes: `cube-planes` has seed 000's methods 300 and 400.
    pub fn variants(self) -> &'static [u32] {
        match self {
            Method::CubePlanes => &[300, 400],
            _ => &[],
        }
    }

    /// Lowers `spec` on `machine`: ring methods embed, orient and lower their rings; the
    /// structured methods build their steps from the machine's shape. `variant` is
    /// `cube-planes`' seed method number (default 400). Every method lowers a mean as a sum;
    /// [`mean::add_scales`] then adds its divisions, for all of them alike.
    pub fn lower(
        self,
        machine: &Machine,
        spec: &PhaseSpec,
        knobs: &Knobs,
    ) -> Result<Lowered, EmbedError> {
        let mut lowered = self.lower_as_sum(machine, spec, knobs)?;
        mean::add_scales(&mut lowered.phase, &machine.compute_nodes());
        Ok(lowered)
    }

    /// [`Method::lower`] before the mean's scales.
    fn lower_as_sum(
        self,
        machine: &Machine,
        spec: &PhaseSpec,
        knobs: &Knobs,
    ) -> Result<Lowered, EmbedError> {
        let structured = |phase, detail| Lowered {
            phase,
            rings: Vec::new(),
            embedding: Vec::new(),
            detail,
        };
        let planned = machine.compute_nodes().len();
        if matches!(self, Method::Trees | Method::HalvingDoubling)
            && planned > crate::limits::MAX_PLANNED_NODES
        {
            return Err(EmbedError::NotApplicable(format!(
                "`{self}` plans for at most {} compute nodes, and this machine has {planned}",
                crate::limits::MAX_PLANNED_NODES
            )));
        }
        match self {
            Method::RotatedHd => Ok(structured(
                rotated::lower(spec, self.name(), machine)?,
                None,
            )),
            Method::Direct => Ok(structured(direct::lower(spec, self.name(), machine)?, None)),
            Method::CubePlanes => {
                let number = knobs.variant.unwrap_or(400);
                let v = cube_planes::Variant::from_number(number).ok_or_else(|| {
                    EmbedError::NotApplicable(format!(
                        "`cube-planes` has variants 300 and 400, not {number}"
                    ))
                })?;
                let lowered = cube_planes::lower(spec, self.name(), machine, v)?;
                Ok(structured(lowered.phase, Some(lowered.detail)))
            }
            Method::Tree | Method::InNetwork => {
                let lowered = if self == Method::Tree {
                    tree::lower(spec, machine)?
                } else {
                    in_network::lower(spec, machine)?
                };
                let (phase, lines) = lowered.ok_or_else(|| {
                    EmbedError::NotApplicable(format!(
                        "`{self}` does not lower {}",
                        spec.collective
                    ))
                })?;
                Ok(Lowered {
                    phase,
                    rings: lines,
                    embedding: Vec::new(),
                    detail: None,
                })
            }
            Method::Trees => {
                let packing = embed::trees::pack(machine, spec.collective)?;
                let lowered = trees::lower(spec, self.name(), machine, &packing).map_err(|e| {
                    EmbedError::NotApplicable(format!("scheduling the trees failed: {e}"))
                })?;
                let total: usize = lowered.chunks_per_tree.iter().sum();
                let described = packing
                    .trees
                    .iter()
                    .zip(&lowered.chunks_per_tree)
                    .filter(|(_, &c)| c > 0)
                    .map(|(t, c)| format!("{c}/{total} of the vector, {}", t.describe(machine)))
                    .collect();
                Ok(Lowered {
                    phase: lowered.phase,
                    rings: described,
                    embedding: Vec::new(),
                    detail: None,
                })
            }
            Method::HalvingDoubling => {
                let phase = halving_doubling::lower(spec, self.name(), machine, &knobs.slices)?;
                let detail = halving_doubling::describe(machine, &knobs.slices);
                Ok(structured(phase, Some(detail)))
            }
            Method::LadderRings | Method::Ring => {
                let rings = self.embed(machine)?;
                let logical = ring::orient(machine, &rings);
                // Refuse before building: a ring schedule grows with the square of the nodes.
                let instructions = crate::limits::ring_instructions(spec.collective, &logical);
                if instructions > crate::limits::MAX_INSTRUCTIONS {
                    return Err(EmbedError::TooLarge { instructions });
                }
                let phase = ring::lower(spec, self.name(), machine, &logical).ok_or_else(|| {
                    EmbedError::NotApplicable(format!("rings do not lower {}", spec.collective))
                })?;
                Ok(Lowered {
                    phase,
                    rings: rings.iter().map(|r| r.describe(machine)).collect(),
                    embedding: rings,
                    detail: None,
                })
            }
        }
    }

    /// The method called `name`.
    pub fn from_name(name: &str) -> Option<Method> {
        Method::ALL.into_iter().find(|m| m.name() == name)
    }

    /// The proved rings this method runs on `machine` (one direction each); none for
    /// `halving-doubling`, which routes its transfers as it lowers.
    pub fn embed(self, machine: &Machine) -> Result<Vec<Ring>, EmbedError> {
        let rings = match (self, &machine.shape) {
            (Method::HalvingDoubling, _) => return Ok(Vec::new()),
            (Method::Trees, _) => {
                return Err(EmbedError::NotApplicable(
                    "`trees` embeds spanning trees, not rings".to_string(),
                ))
            }
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
                    "`tree` embeds no rings: it combines level by level through a `Tree` machine"
                        .to_string(),
                ))
            }
            (Method::RotatedHd | Method::CubePlanes | Method::Direct, _) => {
                return Err(EmbedError::NotApplicable(format!(
                    "`{self}` embeds no rings: it builds its steps from the machine's shape"
                )))
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
