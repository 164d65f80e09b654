//! Lowerings: one module per method, each turning an embedding into a [`plan::Plan`] that
//! [`plan::assemble`] writes as per-node programs.
//!
//! The registry is [`Method`]: [`Method::ALL`] lists the methods in the order `auto` prefers
//! them on equal estimates, and [`Method::lowering`] gives each one's [`Lowering`] (its name,
//! what it does, which collectives it supports, whether it applies to a machine, and the
//! lowering itself). `auto`, `check`, `simulate`, `--algorithm` and the method table in
//! `docs/methods.md` are all generated from it.
//!
//! Every ring is run in both directions when that is faster ([`ring::orient`]), so each
//! method uses every link direction it embeds. `auto` keeps, of every method in the registry
//! that applies and supports the collective, the schedule the cost model prices lowest for the
//! phase's vector (of equal estimates, the one earlier in [`Method::ALL`]); it lowers them in
//! the order of their [`floor`]s (those of the methods that search, [`Lowering::searches`],
//! counted higher) and skips those whose floor shows they cannot win.
//! [`dag`] schedules lowerings that are described as a graph of dependent transfers. Every
//! method lowers the mean op as a sum; [`mean`] adds the divisions afterwards, the same way for
//! all of them.

pub mod balance;
pub mod cube_planes;
pub mod dag;
pub mod direct;
pub mod floor;
pub mod halving_doubling;
pub mod hierarchical;
pub mod in_network;
pub mod matching;
pub mod mean;
pub mod nic_ring;
pub mod pieces;
pub mod plan;
pub mod ring;
pub mod rotated;
pub mod tree;
pub mod trees;

use crate::embed::{EmbedError, Ring};
use crate::limits::{Budget, Estimate};
use crate::machine::Machine;
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
    /// A small allreduce, to see whether a method applies to a machine.
    pub fn probe() -> PhaseSpec {
        PhaseSpec {
            name: "probe".to_string(),
            collective: Collective::AllReduce,
            op: ReduceOp::Sum,
            dtype: DType::F32,
            elements: 1 << 20,
        }
    }

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
            links: schedule_ir::LinkUse::Exclusive,
            steps: u32::try_from(steps).unwrap_or(u32::MAX),
            programs,
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

/// The vector of `elements` cut into `count` chunks as [`even_chunks`] does, chunk `i` owned
/// by `owner(i)`.
pub fn vector_chunks(
    elements: u64,
    count: usize,
    owner: impl Fn(usize) -> Option<NodeId>,
) -> Vec<Chunk> {
    even_chunks(elements, count)
        .into_iter()
        .enumerate()
        .map(|(i, (start, end))| Chunk {
            start,
            end,
            owner: owner(i),
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

/// What a method is asked to lower: its own name (the schedule records it), the machine, the
/// phase and the knobs, as one value, so that every method's entry points read alike.
#[derive(Clone, Copy)]
pub struct Job<'a> {
    /// The method's name, from the registry.
    pub name: &'static str,
    /// The machine.
    pub machine: &'a Machine,
    /// The phase to lower.
    pub spec: &'a PhaseSpec,
    /// The phase's settings.
    pub knobs: &'a Knobs,
}

/// What every method provides: the one interface the compiler, `auto`, `check`, `simulate`,
/// the command line and the docs know methods by. A method is a unit struct in its own module
/// implementing this trait, and a row of the registry ([`Method`]: its id, name, one-line
/// description and the registry's order). The driver adds what every schedule needs after
/// lowering (the mean pass), so a method only plans its transfers (see [`plan`]).
pub trait Lowering: Sync {
    /// Whether the method lowers `collective` (on some machine). By default an allreduce and
    /// either of its halves.
    fn supports(&self, collective: Collective) -> bool {
        halves(collective).is_some()
    }
    /// What the method would run on `probe.machine`, or why it does not apply (`topoc
    /// check`); `probe` asks for a small allreduce. By default, that allreduce is lowered to
    /// see.
    fn applies(&self, probe: &Job<'_>) -> Result<Embedding, EmbedError> {
        let lowered = self.lower(probe)?;
        Ok(Embedding::summary(format!(
            "applies, {} steps",
            lowered.phase.steps
        )))
    }
    /// What lowering `spec` on `machine` would hold, counted without building it, so that the
    /// driver refuses a schedule over the budget before any of it is allocated
    /// ([`crate::limits`]). It must be cheap (linear in the machine at most) and must not
    /// under-count by more than a small factor. A method may refuse here a machine it cannot
    /// plan for; one it does not apply to at all may be estimated as empty, and [`lower`]
    /// then says why. By default: [`Estimate::generic`], a ring allreduce's size.
    ///
    /// [`lower`]: Lowering::lower
    fn estimate(&self, job: &Job<'_>) -> Result<Estimate, EmbedError> {
        Ok(Estimate::generic(job.machine))
    }
    /// A lower bound on the cost model's estimate of the schedule [`lower`] would return for
    /// `spec` on `machine`, found without lowering, so that `auto` lowers only the methods
    /// whose schedule could be the cheapest. It must be sound (never above that estimate) and
    /// cheap (no more than [`estimate`]). `base` holds the bounds every schedule meets; a method
    /// that knows from its structure how many steps send something says so with
    /// [`floor::Floor::in_steps`]. By default the machine's own bound, which every schedule
    /// meets. `docs/methods.md` ("How auto chooses") proves each method's.
    ///
    /// [`lower`]: Lowering::lower
    /// [`estimate`]: Lowering::estimate
    fn floor(&self, _job: &Job<'_>, base: &floor::Floor) -> f64 {
        base.seconds()
    }
    /// Lowers `spec` on `machine`, a mean as a sum.
    fn lower(&self, job: &Job<'_>) -> Result<Lowered, EmbedError>;
    /// [`lower`], unless a bound found on the way, after work [`floor`] cannot afford
    /// (`trees` builds its tree packings for it), is `out`: no cheaper than a schedule `auto`
    /// already has. Then [`Unless::Outpriced`] with that bound, which must be sound as a floor
    /// is. By default the method is lowered.
    ///
    /// [`lower`]: Lowering::lower
    /// [`floor`]: Lowering::floor
    fn lower_unless(
        &self,
        job: &Job<'_>,
        _out: &dyn Fn(f64) -> bool,
    ) -> Result<Unless, EmbedError> {
        self.lower(job)
            .map(|lowered| Unless::Lowered(Box::new(lowered)))
    }
    /// Whether [`Lowering::lower_unless`] may decline: `auto` then lowers another method
    /// first where it can, so that there is a schedule to beat.
    fn declines(&self) -> bool {
        false
    }
    /// Whether the schedule depends on the vector's length beyond its chunk sizes, so that
    /// `topoc simulate` lowers it again for every size instead of re-chunking one schedule.
    fn sized(&self) -> bool {
        false
    }
    /// Whether lowering searches many candidate schedules, each built and priced (pipeline
    /// depths, synthesis shapes, group shapes): its estimate lies further above its floor than
    /// that of a method built from the machine's structure, so `auto` orders it as if its floor
    /// were higher, and the quick methods' estimates skip the searches that cannot win.
    fn searches(&self) -> bool {
        false
    }
    /// The variants the method takes (`cube-planes`: 300 and 400); none by default.
    fn variants(&self) -> &'static [u32] {
        &[]
    }
}

/// What a method would run on a machine, for `topoc check`.
#[derive(Clone, Debug, Default)]
pub struct Embedding {
    /// One line.
    pub summary: String,
    /// One line per ring, tree or stage.
    pub parts: Vec<String>,
}

impl Embedding {
    /// A one-line embedding.
    pub fn summary(summary: String) -> Embedding {
        Embedding {
            summary,
            parts: Vec::new(),
        }
    }
}

/// A lowering method the user can ask for: an id of the registry ([`Method::lowering`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Method {
    /// The ladder's two barley-twist rings, both directions.
    LadderRings,
    /// Halving-doubling with rotated dimensions on hypercubes, the cube and equal-sided tori.
    RotatedHd,
    /// Allreduce on the cube's six faces (methods 300 and 400).
    CubePlanes,
    /// Every chunk straight to its owner and back, on machines whose compute nodes are joined
    /// pairwise.
    Direct,
    /// Allreduce in the NICs and the switch of a `Fabric`, segment by segment.
    InNetwork,
    /// Ring collectives over Hamiltonian rings (the machine's own ring, or found by search).
    Ring,
    /// Level-by-level reduce-scatter and gather on a `Tree` machine.
    Tree,
    /// Collectives over packed spanning trees: the generic method for any connected machine.
    Trees,
    /// Pipelined recursive halving/doubling over routed transfers.
    HalvingDoubling,
    /// Reduce-scatter inside each group, allreduce across groups on every rail, allgather
    /// inside, on machines built from groups joined by NICs.
    Hierarchical,
    /// All-gather synthesised step by step by matching chunks to links, reduce-scatter as its
    /// time reversal: the generic method for machines whose compute nodes are linked directly.
    Matching,
}

/// Per-phase settings some methods take.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Knobs {
    /// `cube-planes`: method 300 or 400 (400 when absent).
    pub variant: Option<u32>,
    /// `halving-doubling`: slices per round (the last repeats; empty: the default).
    pub slices: Vec<usize>,
    /// The memory the lowering may take (`--memory-budget`): checked against the method's
    /// [`Lowering::estimate`] before it lowers, and by the ring methods again once their rings
    /// are found.
    pub budget: Budget,
}

/// What [`Lowering::lower_unless`] comes back with.
pub enum Unless {
    /// The method lowered the phase.
    Lowered(Box<Lowered>),
    /// It did not: a lower bound on the estimate of the schedule it would have lowered, in
    /// seconds, which the caller's test ruled out.
    Outpriced(f64),
}

/// A lowered phase with what the compiler reports about it.
pub struct Lowered {
    /// The phase.
    pub phase: schedule_ir::Phase,
    /// The rings embedded (one direction each), the trees or the stages, in words.
    pub rings: Vec<String>,
    /// The rings as data, in the same order (for `topoc draw`); empty for other methods.
    pub embedding: Vec<Ring>,
    /// The spanning trees that carry a share, in the same order as `rings` (for `topoc
    /// draw`); empty for other methods.
    pub trees: Vec<crate::embed::trees::Tree>,
    /// Choices the method made, in words (`cube-planes`: the start choice found).
    pub detail: Option<String>,
}

impl Lowered {
    /// A phase and the lines that describe what it embeds (rings, trees, stages).
    pub fn described((phase, rings): (schedule_ir::Phase, Vec<String>)) -> Lowered {
        Lowered {
            rings,
            ..Lowered::phase(phase)
        }
    }

    /// A phase with nothing more to say.
    pub fn phase(phase: schedule_ir::Phase) -> Lowered {
        Lowered {
            phase,
            rings: Vec::new(),
            embedding: Vec::new(),
            trees: Vec::new(),
            detail: None,
        }
    }
}

impl Method {
    /// Every method, in the order `auto` weighs them (of equal estimates, the earlier wins).
    pub const ALL: [Method; 11] = [
        Method::LadderRings,
        Method::RotatedHd,
        Method::CubePlanes,
        Method::Direct,
        Method::InNetwork,
        Method::Ring,
        Method::Tree,
        Method::Trees,
        Method::HalvingDoubling,
        Method::Hierarchical,
        Method::Matching,
    ];

    /// The registry: each method's name, what it does and its implementation.
    fn entry(self) -> Entry {
        match self {
            Method::LadderRings => Entry {
                name: "ladder-rings",
                about: "the ladder's two link-disjoint barley-twist rings, each in both directions",
                lowering: &ring::LadderRings,
            },
            Method::RotatedHd => Entry {
                name: "rotated-hd",
                about: "halving-doubling along every dimension at once, the dimension order rotated per part",
                lowering: &rotated::RotatedHd,
            },
            Method::CubePlanes => Entry {
                name: "cube-planes",
                about: "allreduce as rings on the cube's six faces at once, then an exchange across the cube",
                lowering: &cube_planes::CubePlanes,
            },
            Method::Direct => Entry {
                name: "direct",
                about: "every chunk straight to its owner and back, one step each, where compute nodes are \
                 joined pairwise",
                lowering: &direct::Direct,
            },
            Method::InNetwork => Entry {
                name: "in-network",
                about: "allreduce combined in the NICs and the switch, segment by segment (a ring among the \
                 NICs where the switch cannot reduce)",
                lowering: &in_network::InNetwork,
            },
            Method::Ring => Entry {
                name: "ring",
                about: "ring collectives over as many link-disjoint Hamiltonian rings as the machine holds \
                 (a link of k lanes serving k rings), or rings two to a link where disjoint ones \
                 leave links idle, each walked both ways with its part of the vector (chunks \
                 meeting in the middle where that is cheaper: half the steps), or one ring routed \
                 through the switches",
                lowering: &ring::Rings,
            },
            Method::Tree => Entry {
                name: "tree",
                about: "the holders of each portion in sibling subtrees combine it level by level up a `Tree` \
                 machine, then gather it back down",
                lowering: &tree::Tree,
            },
            Method::Trees => Entry {
                name: "trees",
                about: "spanning trees packed by a linear program (for a broadcast or a reduce also trees \
                 that share no link direction), each carrying its share, pipelined to a depth chosen \
                 for the size",
                lowering: &trees::Trees,
            },
            Method::HalvingDoubling => Entry {
                name: "halving-doubling",
                about: "pipelined recursive halving then doubling between partners, every transfer routed",
                lowering: &halving_doubling::HalvingDoubling,
            },
            Method::Hierarchical => Entry {
                name: "hierarchical",
                about: "reduce-scatter inside each group of a machine built from groups, allreduce across \
                 groups over every NIC at once, allgather inside, pipelined; a broadcast scattered \
                 inside the root's group, passed along every NIC's rail and gathered inside every \
                 group (a reduce, the reverse)",
                lowering: &hierarchical::Hierarchical,
            },
            Method::Matching => Entry {
                name: "matching",
                about: "link-chunk matching: step by step, every link between compute nodes carries a chunk \
                 its receiver lacks, the rarest first; reduce-scatter runs the same steps backwards",
                lowering: &matching::Matching,
            },
        }
    }

    /// The method's implementation.
    pub fn lowering(self) -> &'static dyn Lowering {
        self.entry().lowering
    }

    /// The method's name on the command line and in schedules.
    pub fn name(self) -> &'static str {
        self.entry().name
    }

    /// What the method does, in one line for `--help` and the method table.
    pub fn about(self) -> &'static str {
        self.entry().about
    }

    /// The job of lowering `spec` on `machine` with this method.
    fn job<'a>(self, machine: &'a Machine, spec: &'a PhaseSpec, knobs: &'a Knobs) -> Job<'a> {
        Job {
            name: self.name(),
            machine,
            spec,
            knobs,
        }
    }

    /// Whether the method lowers `collective`.
    pub fn supports(self, collective: Collective) -> bool {
        self.lowering().supports(collective)
    }

    /// See [`Lowering::sized`].
    pub fn sized(self) -> bool {
        self.lowering().sized()
    }

    /// Whether the method takes a `variant` (only `cube-planes`: 300 or 400).
    pub fn takes_variant(self) -> bool {
        !self.variants().is_empty()
    }

    /// The variants the method takes.
    pub fn variants(self) -> &'static [u32] {
        self.lowering().variants()
    }

    /// See [`Lowering::applies`]; first, a small allreduce's estimate is admitted within
    /// `budget`, so that `topoc check` does no more than `topoc compile` would.
    pub fn applies(self, machine: &Machine, budget: &Budget) -> Result<Embedding, EmbedError> {
        let knobs = Knobs {
            budget: *budget,
            ..Knobs::default()
        };
        let probe = PhaseSpec::probe();
        self.admit(machine, &probe, &knobs)?;
        self.lowering().applies(&self.job(machine, &probe, &knobs))
    }

    /// Admits lowering `spec` on `machine` within `knobs.budget`, by the method's
    /// [`Lowering::estimate`], or says which limit it would pass.
    pub fn admit(
        self,
        machine: &Machine,
        spec: &PhaseSpec,
        knobs: &Knobs,
    ) -> Result<(), EmbedError> {
        let estimate = self.estimate(machine, spec, knobs)?;
        crate::limits::admit(estimate, &knobs.budget).map_err(EmbedError::OverBudget)
    }

    /// Lowers `spec` on `machine` with this method, once its estimate is admitted
    /// ([`Method::admit`]); then [`mean::add_scales`] adds a mean's divisions, for every
    /// method alike.
    pub fn lower(
        self,
        machine: &Machine,
        spec: &PhaseSpec,
        knobs: &Knobs,
    ) -> Result<Lowered, EmbedError> {
        self.admit(machine, spec, knobs)?;
        let mut lowered = self.lowering().lower(&self.job(machine, spec, knobs))?;
        mean::add_scales(&mut lowered.phase, &machine.compute_nodes());
        Ok(lowered)
    }

    /// See [`Lowering::declines`].
    pub fn declines(self) -> bool {
        self.lowering().declines()
    }

    /// See [`Lowering::searches`].
    pub fn searches(self) -> bool {
        self.lowering().searches()
    }

    /// See [`Lowering::lower_unless`]; what [`Method::lower`] does when it lowers.
    pub fn lower_unless(
        self,
        machine: &Machine,
        spec: &PhaseSpec,
        knobs: &Knobs,
        out: &dyn Fn(f64) -> bool,
    ) -> Result<Unless, EmbedError> {
        self.admit(machine, spec, knobs)?;
        let job = self.job(machine, spec, knobs);
        Ok(match self.lowering().lower_unless(&job, out)? {
            Unless::Lowered(mut lowered) => {
                mean::add_scales(&mut lowered.phase, &machine.compute_nodes());
                Unless::Lowered(lowered)
            }
            outpriced => outpriced,
        })
    }

    /// See [`Lowering::estimate`].
    pub fn estimate(
        self,
        machine: &Machine,
        spec: &PhaseSpec,
        knobs: &Knobs,
    ) -> Result<crate::limits::Estimate, EmbedError> {
        self.lowering().estimate(&self.job(machine, spec, knobs))
    }

    /// See [`Lowering::floor`].
    pub fn floor(
        self,
        machine: &Machine,
        spec: &PhaseSpec,
        knobs: &Knobs,
        base: &floor::Floor,
    ) -> f64 {
        self.lowering().floor(&self.job(machine, spec, knobs), base)
    }

    /// The method called `name`.
    pub fn from_name(name: &str) -> Option<Method> {
        Method::ALL.into_iter().find(|m| m.name() == name)
    }
}

/// Refuses a collective other than an allreduce and its halves, naming the method `name`.
pub(crate) fn halves_only(name: &str, collective: Collective) -> Result<(), EmbedError> {
    if halves(collective).is_some() {
        return Ok(());
    }
    Err(EmbedError::NotApplicable(format!(
        "`{name}` lowers allreduce, reduce-scatter and allgather, not {}",
        crate::compile::describe(collective)
    )))
}

/// A row of the registry.
struct Entry {
    name: &'static str,
    about: &'static str,
    lowering: &'static dyn Lowering,
}

/// What the user asks a phase to be lowered with: `auto`, or one method by name. Parsed where
/// names enter (the command line, a topology file), so that the compiler sees only this.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Choice {
    /// Every method that applies, priced by the cost model; the cheapest wins.
    #[default]
    Auto,
    /// This method only.
    Method(Method),
}

impl Choice {
    /// Every name a choice may be written as: `auto`, then the methods in registry order.
    pub fn names() -> impl Iterator<Item = &'static str> {
        std::iter::once("auto").chain(Method::ALL.into_iter().map(Method::name))
    }

    /// The method names, comma-separated (for hints).
    pub fn method_names() -> String {
        Method::ALL.map(Method::name).join(", ")
    }

    /// The method chosen, if it passes `keep`.
    pub fn filter(self, keep: impl Fn(Method) -> bool) -> Choice {
        match self {
            Choice::Method(m) if keep(m) => self,
            _ => Choice::Auto,
        }
    }
}

impl std::str::FromStr for Choice {
    type Err = String;

    fn from_str(name: &str) -> Result<Choice, String> {
        if name == "auto" {
            return Ok(Choice::Auto);
        }
        Method::from_name(name).map(Choice::Method).ok_or_else(|| {
            format!(
                "unknown algorithm `{name}`; write `auto` or one of: {}",
                Choice::method_names()
            )
        })
    }
}

impl fmt::Display for Choice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Choice::Auto => f.write_str("auto"),
            Choice::Method(m) => f.write_str(m.name()),
        }
    }
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The method table of `docs/methods.md`, generated from the registry (a test keeps the page
/// in step): every method with what it does and the collectives it lowers.
pub fn method_table() -> String {
    let collectives = [
        ("allreduce", Collective::AllReduce),
        ("reduce-scatter", Collective::ReduceScatter),
        ("allgather", Collective::AllGather),
        ("broadcast", Collective::Broadcast { root: NodeId(0) }),
        ("reduce", Collective::Reduce { root: NodeId(0) }),
    ];
    let mut table = String::from("| method | what it does | collectives |\n|---|---|---|\n");
    for method in Method::ALL {
        let lowers: Vec<&str> = collectives
            .iter()
            .filter(|(_, c)| method.supports(*c))
            .map(|(name, _)| *name)
            .collect();
        table.push_str(&format!(
            "| `{}` | {} | {} |\n",
            method.name(),
            method.about(),
            lowers.join(", ")
        ));
    }
    table
}

/// Refuses machines with more compute nodes than the planning methods handle (their planning
/// grows with the square of the node count).
fn check_planned(method: &str, machine: &Machine) -> Result<(), EmbedError> {
    let planned = machine.compute_nodes().len();
    if planned > crate::limits::MAX_PLANNED_NODES {
        return Err(EmbedError::NotApplicable(format!(
            "`{method}` plans for at most {} compute nodes, and this machine has {planned}",
            crate::limits::MAX_PLANNED_NODES
        )));
    }
    Ok(())
}

/// Which halves of an allreduce `collective` is: (reduce-scatter, allgather), or `None` for a
/// rooted collective. Methods built as a reduce-scatter followed by an allgather lower the
/// halves alone by leaving one out.
pub(crate) fn halves(collective: Collective) -> Option<(bool, bool)> {
    match collective {
        Collective::AllReduce => Some((true, true)),
        Collective::ReduceScatter => Some((true, false)),
        Collective::AllGather => Some((false, true)),
        Collective::Broadcast { .. } | Collective::Reduce { .. } => None,
    }
}

/// What the lowerings' unit tests share: a machine from topology text and a phase to lower.
#[cfg(test)]
#[allow(clippy::panic)]
pub(crate) mod testing {
    use super::PhaseSpec;
    use crate::machine::Machine;
    use schedule_ir::{Collective, DType, ReduceOp};

    /// The machine a topology text declares; panics with the diagnostics if it is invalid.
    pub fn machine(text: &str) -> Machine {
        match crate::compile::load(text) {
            Ok(loaded) => loaded.machine,
            Err(e) => panic!("{e}"),
        }
    }

    /// A summing phase `x` of `collective` over `elements` elements of `dtype`.
    pub fn spec(collective: Collective, dtype: DType, elements: u64) -> PhaseSpec {
        PhaseSpec {
            name: "x".into(),
            collective,
            op: ReduceOp::Sum,
            dtype,
            elements,
        }
    }
}
