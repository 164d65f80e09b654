//! The compiler driver: topology text in, verified schedule out.
//!
//! parse → build the machine → for every exchange phase: choose a method, embed, lower →
//! assemble the [`Schedule`] → verify. Problems with the file come back as [`Problem`]s that
//! point into it; a schedule that fails verification is a compiler bug and is reported as such,
//! never emitted.

mod choose;
pub mod pattern;
mod phases;
mod sized;

pub use choose::{beats, describe, lower_phase, Verdict, Weighed};
pub use phases::PhaseRequest;
pub use sized::{edges as band_edges, size_name, Sizes};

use crate::diag::Problem;
use crate::embed::Ring;
use crate::lower::{Choice, Method};
use crate::machine::{self, Machine};
use crate::path;
use crate::topology;
use crate::topology::ast::TopologyFile;
use crate::Error;
use schedule_ir::{Schedule, VerifiedSchedule, FORMAT_VERSION};

/// Choices the command line can override.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Force a method (or `auto`) for every phase; `None`: each phase's own `algorithm`, or
    /// `auto` when it names none.
    pub algorithm: Option<Choice>,
    /// Slices per round for `halving-doubling` in every phase (`None`: each phase's own
    /// `slices`, or the method's default).
    pub slices: Option<usize>,
    /// Force a variant of the method (`cube-planes`: 300 or 400) for every phase.
    pub variant: Option<u32>,
    /// Link ids to take out of service, beyond the file's `failed_links`.
    pub fail_links: Vec<String>,
    /// Node names to take out of service, beyond the file's `failed_nodes`.
    pub fail_nodes: Vec<String>,
    /// The memory one phase's lowering and verification may take (`--memory-budget`): every
    /// method's estimate is compared with it before the method builds anything
    /// ([`crate::limits`]).
    pub budget: crate::limits::Budget,
}

/// How one phase was compiled, for humans and for `--report json`.
#[derive(Clone, Debug)]
pub struct PhaseNote {
    /// The phase's name.
    pub phase: String,
    /// The method used.
    pub method: Method,
    /// Why this method (for `auto`).
    pub reason: String,
    /// The embedded rings, one direction each, or the trees with their shares, rendered with
    /// names.
    pub rings: Vec<String>,
    /// The rings as data, in the same order (for `topoc draw`); empty for trees.
    pub embedding: Vec<Ring>,
    /// The spanning trees as data, in the same order (for `topoc draw`); empty for rings.
    pub trees: Vec<crate::embed::trees::Tree>,
    /// Under `auto`: every method weighed, cheapest first, then those that do not apply, then
    /// those that do not lower the collective. Empty when a method was requested.
    pub weighed: Vec<Weighed>,
}

/// A topology file read once: the file and its machine. Compile it as often as needed
/// ([`compile`]), with different options, without parsing it again.
#[derive(Clone, Debug)]
pub struct Loaded {
    /// The file as written.
    pub file: TopologyFile,
    /// The machine graph, with the file's own failures applied.
    pub machine: Machine,
}

impl Loaded {
    /// The same file with further links and nodes out of service (reported like the file's
    /// own `failed_links` and `failed_nodes`); itself when there are none.
    pub fn failing(&self, links: &[String], nodes: &[String]) -> Result<Loaded, Error> {
        if links.is_empty() && nodes.is_empty() {
            return Ok(self.clone());
        }
        let mut file = self.file.clone();
        file.machine.fail(links, nodes);
        let machine = machine::build(&file).map_err(Error::Topology)?;
        Ok(Loaded { file, machine })
    }

    /// The file's exchange phases (or the default one), checked, with what each asks for.
    pub fn phases(&self) -> Result<Vec<PhaseRequest>, Error> {
        phases::exchanges(&self.file, &self.machine).map_err(Error::Topology)
    }
}

/// A compiled topology: the machine, the verified schedule and notes on how it was made.
#[derive(Debug)]
pub struct Compiled {
    /// The machine graph.
    pub machine: Machine,
    /// The schedule, proved by the verifier.
    pub schedule: VerifiedSchedule,
    /// One note per exchange phase.
    pub notes: Vec<PhaseNote>,
}

/// Parses a topology text and builds its machine.
pub fn load(source: &str) -> Result<Loaded, Error> {
    let file = topology::parse(source).map_err(|p| Error::Topology(vec![p]))?;
    let machine = machine::build(&file).map_err(Error::Topology)?;
    Ok(Loaded { file, machine })
}

/// Loads and compiles a topology text in one go.
pub fn compile_source(source: &str, options: &Options) -> Result<Compiled, Error> {
    compile(&load(source)?, options)
}

/// Compiles a loaded topology: every exchange phase with the method chosen for it, verified
/// as one schedule.
pub fn compile(loaded: &Loaded, options: &Options) -> Result<Compiled, Error> {
    compile_sized(loaded, options, &Sizes::Declared)
}

/// [`compile`] at the sizes given ([`Sizes`]): each exchange phase at the file's size, at one
/// size, or once per size in bands (a [`ProgramItem::Bands`](schedule_ir::ProgramItem::Bands)
/// per exchange), `auto` deciding at every size.
pub fn compile_sized(loaded: &Loaded, options: &Options, sizes: &Sizes) -> Result<Compiled, Error> {
    compile_sized_beside(loaded, options, sizes, |_| ()).0
}

/// [`compile_sized`], with `beside` given the schedule while the verifier checks it
/// ([`schedule_ir::verify_beside`]), and its result (`None` where nothing was lowered to
/// verify): the command line writes its output file beside the proof and keeps it only once
/// the schedule is proved.
pub fn compile_sized_beside<T: Send>(
    loaded: &Loaded,
    options: &Options,
    sizes: &Sizes,
    beside: impl FnOnce(&Schedule) -> T + Send,
) -> (Result<Compiled, Error>, Option<T>) {
    match lower_sized(loaded, options, sizes) {
        Ok((machine, schedule, notes)) => {
            crate::progress::doing(|| "verifying the schedule".to_string());
            let (verified, aside) = schedule_ir::verify_beside(schedule, beside);
            let compiled = match verified {
                Ok(schedule) => Ok(Compiled {
                    machine,
                    schedule,
                    notes,
                }),
                Err(errors) => Err(too_large_to_prove(&machine, errors)),
            };
            (compiled, Some(aside))
        }
        Err(e) => (Err(e), None),
    }
}

/// Every exchange phase lowered as [`compile_sized`] says, assembled into one schedule not yet
/// verified, with the machine and the phases' notes.
fn lower_sized(
    loaded: &Loaded,
    options: &Options,
    sizes: &Sizes,
) -> Result<(Machine, Schedule, Vec<PhaseNote>), Error> {
    let loaded = loaded.failing(&options.fail_links, &options.fail_nodes)?;
    let requests = loaded.phases()?;
    let planned = sized::plan(&requests, sizes).map_err(Error::Topology)?;
    let machine = loaded.machine;
    let mut phases = Vec::new();
    let mut notes = Vec::new();
    let mut problems = Vec::new();
    for request in planned.iter().map(|p| &p.request) {
        let outcome = request.knobs(options).and_then(|knobs| {
            let wanted = match options.algorithm {
                Some(choice) => Ok(choice),
                None => request.choice(),
            }?;
            choose::lower_phase(&machine, &request.at, &request.spec, wanted, &knobs)
        });
        match outcome {
            Ok((phase, note)) => {
                phases.push(phase);
                notes.push(note);
            }
            Err(p) => problems.push(p),
        }
    }
    if !problems.is_empty() {
        return Err(Error::Topology(problems));
    }
    let program = phases::program(&loaded.file, &requests);
    let schedule = Schedule {
        format_version: FORMAT_VERSION,
        machine: machine.to_ir(),
        program: sized::program(program, &planned, &requests),
        phases,
    };
    Ok((machine, schedule, notes))
}

/// A schedule the verifier refused only for its size is the machine's size problem, not a
/// compiler bug: it is reported against the file, with what was too large. Anything else the
/// verifier found stays an internal error.
pub(super) fn too_large_to_prove(machine: &Machine, errors: schedule_ir::VerifyErrors) -> Error {
    let sizes: Vec<String> = errors
        .errors
        .iter()
        .filter_map(|e| match e {
            schedule_ir::VerifyError {
                kind: schedule_ir::verify::ErrorKind::TooLarge { what, count, limit },
                ..
            } => Some(format!("{what}: {count}, at most {limit}")),
            _ => None,
        })
        .collect();
    if sizes.is_empty() || sizes.len() != errors.errors.len() {
        return Error::Unverified(errors);
    }
    let mut problem = Problem::at(
        path!["machine"],
        format!(
            "the schedule for this {}-node machine is too large for the verifier to prove",
            machine.node_count()
        ),
        format!("{} nodes", machine.node_count()),
    )
    .hint("nothing is emitted unproved; compile a smaller machine, or a method with fewer chunks");
    for size in sizes {
        problem = problem.note(size);
    }
    Error::Topology(vec![problem])
}
