//! Command definitions and the code shared by the commands: reading inputs (topology or
//! schedule, told apart by their first word), rendering problems, writing files atomically.

mod check;
mod cleanup;
mod compile;
mod draw;
mod import;
mod run;
mod simulate;
mod verify;

use clap::{Parser, Subcommand, ValueEnum};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use topoc::diag;
use topoc::lower::{Choice, Method};
use topoc::Error;

/// `--algorithm`'s values, generated from the registry: `auto` and every method, each with
/// what it does (shown by `--help`).
fn algorithm_parser() -> impl clap::builder::TypedValueParser<Value = Choice> {
    let values = std::iter::once(
        clap::builder::PossibleValue::new("auto")
            .help("every method that applies, priced by the cost model; the cheapest wins"),
    )
    .chain(
        Method::ALL
            .into_iter()
            .map(|m| clap::builder::PossibleValue::new(m.name()).help(m.about())),
    );
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(values).try_map(|name| name.parse::<Choice>())
}

/// topoc — compile collectives for a declared machine into verified, per-node schedules.
#[derive(Debug, Parser)]
#[command(name = "topoc", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Parse a topology file, report every problem, and summarise the machine: nodes, links,
    /// degree, diameter, bisection bandwidth (exact up to 20 compute nodes, else an estimate)
    /// and the rings each method finds.
    ///
    /// Example: topoc check examples/ladder8.ron
    Check {
        /// The topology file (RON).
        file: PathBuf,
        #[command(flatten)]
        budget: MemoryBudget,
    },
    /// Compile a topology file into a verified schedule.
    ///
    /// Example: topoc compile examples/ladder8.ron -o ladder8.sched.ron
    ///
    /// Example: topoc compile examples/ring8.ron --emit msccl-xml -o ring8.xml
    ///
    /// Example: topoc compile examples/ring8.ron --emit chakra -o ring8 --sizes 1MiB,64MiB
    ///
    /// Example: topoc compile examples/ladder8.ron --bands 1KiB,1MiB,256MiB -o ladder8.sched.ron
    Compile {
        /// The topology file (RON).
        file: PathBuf,
        /// Lowering method for every exchange phase (`auto`: each phase's own, or the cheapest
        /// by the cost model).
        #[arg(long, default_value = "auto", value_parser = algorithm_parser())]
        algorithm: Choice,
        /// Slices per round for halving-doubling, in every phase (1 to 64; default: each
        /// phase's `slices`, else 2).
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..=64))]
        slices: Option<u32>,
        /// The method's variant: the cube-plane method's 300 or 400 (default 400); `ring`'s 1
        /// (every ring walked around, MSCCL's own ring shape) or 2 (chunks meeting in the
        /// middle; by default the cheaper).
        #[arg(long)]
        variant: Option<u32>,
        /// Output format of the schedule.
        #[arg(long, value_enum, default_value_t = Emit::Ron)]
        emit: Emit,
        /// With --emit ron or json: write the schedule in the compact form, chunk lists as
        /// runs and no indentation (docs/ir.md, "The compact form"). Every reader takes both
        /// forms; large regular machines' files shrink many times. On an equal-sided torus, a
        /// hypercube or a ring too large for the explicit form, whose phases rotated-hd lowers
        /// (requested, or auto's pick), the pattern form: the origin's program and the grid, proved without expanding it (docs/ir.md,
        /// "The pattern form"): tori of tens of thousands of nodes compile in seconds.
        #[arg(long)]
        compact: bool,
        /// Show no progress line while compiling (shown on standard error only when it is a
        /// terminal).
        #[arg(long)]
        no_progress: bool,
        /// Where to write the schedule (standard output when absent or `-`).
        /// Written whole or not at all.
        #[arg(short, long)]
        output: Option<PathBuf>,
        /// With --emit msccl-xml or mscclpp: the exchange phase to export (an MSCCL file or
        /// MSCCL++ plan holds one collective; needed when the topology declares several).
        #[arg(long)]
        phase: Option<String>,
        /// With --emit chakra: message sizes per rank, comma-separated (B, KiB, MiB, GiB; KB,
        /// MB, GB), one set of traces each (default: the phase's own size).
        #[arg(long, value_parser = sizes_text)]
        sizes: Option<String>,
        /// Compile every exchange phase for a vector of this many bytes (B, KiB, MiB, GiB; KB,
        /// MB, GB) instead of the file's element count; a whole number of elements.
        #[arg(long, value_name = "BYTES", conflicts_with = "bands", value_parser = size_text)]
        size: Option<String>,
        /// Compile every exchange phase once per size, comma-separated (as --size), `auto`
        /// choosing at each, into one band per size: the runtime runs the band that holds the
        /// buffer's size (edges at the geometric midpoints; see docs/cli.md).
        #[arg(long, value_name = "SIZES", value_parser = sizes_text)]
        bands: Option<String>,
        /// How to report each phase's method on standard error: a line each, or JSON with
        /// every method `auto` weighed and its estimate or refusal.
        #[arg(long, value_enum, default_value_t = ReportFormat::Text)]
        report: ReportFormat,
        #[command(flatten)]
        failures: Failures,
        #[command(flatten)]
        budget: MemoryBudget,
    },
    /// Verify a schedule (or compile and verify a topology file) and print the link report.
    ///
    /// Example: topoc verify ladder8.sched.ron
    Verify {
        /// A schedule (RON or JSON) or a topology file.
        input: PathBuf,
        /// Report format.
        #[arg(long, value_enum, default_value_t = ReportFormat::Text)]
        format: ReportFormat,
    },
    /// Run a schedule in one process on random data and compare with a plain reduction.
    ///
    /// Exits with status 0 only when every node's result matches the reference and a second
    /// run gives bit-identical results.
    ///
    /// Example: topoc run examples/ladder8.ron --dtype i32 --seed 7
    Run {
        /// A schedule (RON or JSON) or a topology file (compiled and verified first).
        input: PathBuf,
        /// Element type to run with (the phase's own when absent).
        #[arg(long, value_enum)]
        dtype: Option<DTypeArg>,
        /// Vector length to run with (the phase's own when absent).
        #[arg(long)]
        elements: Option<u64>,
        /// Seed of the random input data.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Run only this phase (all phases when absent).
        #[arg(long)]
        phase: Option<String>,
        /// Report format.
        #[arg(long, value_enum, default_value_t = ReportFormat::Text)]
        format: ReportFormat,
        /// Most memory a phase's run may hold: every node's input, result, scratch and
        /// message buffers, the reference (B, KiB, MiB, GiB; KB, MB, GB).
        #[arg(long, default_value = "4GiB", value_parser = size_text)]
        memory_budget: String,
        /// Most bytes a phase's run may copy and combine, over every node and step.
        #[arg(long, default_value = "64GiB", value_parser = size_text)]
        work_budget: String,
    },
    /// Estimate the time of every phase over message sizes, beside its lower bound.
    ///
    /// For a topology file every method that applies is costed; for a schedule, its own. The
    /// efficiency is bound / estimate (1.0 = at the bound).
    ///
    /// Sizes are whole vectors in bytes, as nccl-tests counts them; each row gives the time,
    /// the algorithm bandwidth (size / time) and the bus bandwidth (algorithm bandwidth times
    /// 2(n-1)/n for allreduce, (n-1)/n for reduce-scatter and allgather, 1 for broadcast and
    /// reduce; see docs/cli.md).
    ///
    /// Example: topoc simulate examples/ladder8.ron --sizes 1KiB,1MiB,256MiB
    ///
    /// Example: topoc simulate examples/ladder8.ron -b 1KiB -e 1GiB -f 4 --plot ladder8.svg
    Simulate {
        /// A topology file or a schedule (RON or JSON).
        input: PathBuf,
        /// Message sizes, comma-separated (B, KiB, MiB, GiB; KB, MB, GB).
        #[arg(long, default_value = "1KiB,1MiB,64MiB,1GiB", conflicts_with_all = ["minbytes", "maxbytes"],
              value_parser = sizes_text)]
        sizes: String,
        /// Smallest size of a sweep (as nccl-tests' -b; needs -e).
        #[arg(short = 'b', long, requires = "maxbytes", value_parser = size_text)]
        minbytes: Option<String>,
        /// Largest size of a sweep (as nccl-tests' -e; needs -b).
        #[arg(short = 'e', long, requires = "minbytes", value_parser = size_text)]
        maxbytes: Option<String>,
        /// Factor from one size of the sweep to the next (as nccl-tests' -f).
        #[arg(short = 'f', long, default_value_t = 2, requires = "minbytes")]
        stepfactor: u64,
        /// Also draw time and bus bandwidth against size, one line per method, to this SVG
        /// file (written whole or not at all).
        #[arg(long, value_name = "FILE.svg")]
        plot: Option<PathBuf>,
        /// Only this phase (all phases when absent).
        #[arg(long)]
        phase: Option<String>,
        /// Table or JSON.
        #[arg(long, value_enum, default_value_t = ReportFormat::Text)]
        format: ReportFormat,
        #[command(flatten)]
        failures: Failures,
        #[command(flatten)]
        budget: MemoryBudget,
    },
    /// Draw the machine with its link ids, the embedded rings in distinct colours, or the link
    /// directions one step uses with the chunks they carry.
    ///
    /// SVG is drawn by topoc itself; DOT carries the same node positions for Graphviz.
    ///
    /// Example: topoc draw examples/ladder8.ron --format svg -o ladder8.svg
    Draw {
        /// A topology file (compiled first) or a schedule (RON or JSON; verified first).
        input: PathBuf,
        /// Draw the link use of this step (counted from 0) instead of the embedding.
        #[arg(long)]
        step: Option<u32>,
        /// The phase to draw (the first when absent).
        #[arg(long)]
        phase: Option<String>,
        /// Picture format (svg when the output file ends in .svg, else dot).
        #[arg(long, value_enum)]
        format: Option<draw::DrawFormat>,
        /// Node placement.
        #[arg(long, value_enum, default_value_t = draw::LayoutArg::Auto)]
        layout: draw::LayoutArg,
        /// Where to write the picture (standard output when absent or `-`).
        /// Written whole or not at all.
        #[arg(short, long)]
        output: Option<PathBuf>,
        #[command(flatten)]
        budget: MemoryBudget,
    },
    /// Write a topology file from NCCL's topology dump or `nvidia-smi topo -m` (docs/import.md).
    ///
    /// Example: topoc import nccl-xml examples/import/dgx-a100.xml -o dgx-a100.ron
    Import(import::ImportArgs),
    /// Run the schedule on an emulated network (namespaces, veth pairs, tc) whose links have
    /// the topology's bandwidths, scaled, and measure it against the cost model.
    ///
    /// Example: topoc lab run examples/ladder8.ron --scale 0.0005 --sizes 1MiB,16MiB (as root)
    Lab(topoc::lab::LabArgs),
}

/// Links and nodes to take out of service for this run, beyond the file's own
/// `failed_links` and `failed_nodes`.
#[derive(Clone, Debug, Default, clap::Args)]
pub struct Failures {
    /// A link id to treat as failed (repeatable).
    #[arg(long = "fail-link", value_name = "ID")]
    pub links: Vec<String>,
    /// A node name to treat as failed (repeatable).
    #[arg(long = "fail-node", value_name = "NAME")]
    pub nodes: Vec<String>,
}

impl Failures {
    /// Whether anything is failed.
    pub fn is_empty(&self) -> bool {
        self.links.is_empty() && self.nodes.is_empty()
    }
}

/// How much memory compiling one phase may take.
#[derive(Clone, Copy, Debug, clap::Args)]
pub struct MemoryBudget {
    /// Most memory one phase's lowering and verification may take (B, KiB, MiB, GiB; KB, MB,
    /// GB). Every method's size is estimated before it builds anything; one that would need
    /// more is refused with a diagnostic, and `auto` weighs the others.
    #[arg(long = "memory-budget", value_name = "SIZE", default_value = "4GiB",
          value_parser = parse_budget)]
    pub memory: topoc::limits::Budget,
}

/// A size option's text, checked as the command line is read, so that a size that does not
/// parse is a usage error (exit status 2, as for every other bad value), and read again where
/// it is used.
fn size_text(text: &str) -> Result<String, String> {
    topoc::simulate::parse_size(text).map(|_| text.to_string())
}

/// A comma-separated list of sizes, checked as [`size_text`] checks one.
fn sizes_text(text: &str) -> Result<String, String> {
    text.split(',')
        .try_for_each(|size| size_text(size).map(drop))
        .map(|()| text.to_string())
}

/// `--memory-budget`'s value, read as `topoc run --memory-budget` reads its own.
fn parse_budget(text: &str) -> Result<topoc::limits::Budget, String> {
    topoc::simulate::parse_size(text).map(|memory_bytes| topoc::limits::Budget { memory_bytes })
}

/// Schedule output formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Emit {
    /// Rusty Object Notation.
    Ron,
    /// JSON.
    Json,
    /// MSCCL algorithm XML of one phase (allreduce, reduce-scatter or allgather), for
    /// msccl-executor-nccl, RCCL and msccl; see docs/msccl.md.
    MscclXml,
    /// Chakra execution traces of one phase for ASTRA-sim: PREFIX.<rank>.et per rank and the
    /// system-configuration snippet PREFIX.json (needs -o PREFIX); see docs/chakra.md.
    Chakra,
    /// MSCCL++ execution-plan JSON of one phase (allreduce, reduce-scatter or allgather), for
    /// the MSCCL++ v0.7.0 executor; see docs/mscclpp.md.
    Mscclpp,
}

/// Report formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ReportFormat {
    /// A readable table.
    Text,
    /// Machine-readable JSON.
    Json,
}

/// Element types on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum DTypeArg {
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
    Bf16,
}

impl From<DTypeArg> for schedule_ir::DType {
    fn from(d: DTypeArg) -> Self {
        match d {
            DTypeArg::F32 => schedule_ir::DType::F32,
            DTypeArg::F64 => schedule_ir::DType::F64,
            DTypeArg::I32 => schedule_ir::DType::I32,
            DTypeArg::I64 => schedule_ir::DType::I64,
            DTypeArg::F16 => schedule_ir::DType::F16,
            DTypeArg::Bf16 => schedule_ir::DType::BF16,
        }
    }
}

/// Runs a parsed command line. `Err` carries a message already formatted for the terminal.
pub fn run(cli: Cli) -> Result<ExitCode, String> {
    match cli.command {
        Command::Check { file, budget } => check::check(&file, &budget.memory),
        Command::Compile {
            file,
            algorithm,
            slices,
            variant,
            emit,
            compact,
            no_progress,
            output,
            phase,
            sizes,
            size,
            bands,
            report,
            failures,
            budget,
        } => {
            let options = topoc::Options {
                // `auto` on the command line leaves each phase its own choice.
                algorithm: (algorithm != Choice::Auto).then_some(algorithm),
                slices: slices.map(|k| k as usize),
                variant,
                fail_links: failures.links,
                fail_nodes: failures.nodes,
                budget: budget.memory,
            };
            if !no_progress && std::io::stderr().is_terminal() {
                topoc::progress::enable();
            }
            let form = if compact {
                schedule_ir::serial::Form::Compact
            } else {
                schedule_ir::serial::Form::Explicit
            };
            compile::compile(
                &file,
                &compile::Request {
                    options,
                    at: compile::sizes(size.as_deref(), bands.as_deref())?,
                    emit,
                    form,
                    phase: phase.as_deref(),
                    trace_sizes: sizes.as_deref(),
                    report,
                },
                output.as_deref(),
            )
        }
        Command::Verify { input, format } => verify::verify(&input, format),
        Command::Run {
            input,
            dtype,
            elements,
            seed,
            phase,
            format,
            memory_budget,
            work_budget,
        } => run::run(
            &input,
            dtype.map(Into::into),
            elements,
            seed,
            phase.as_deref(),
            format,
            run::budget(&memory_budget, &work_budget)?,
        ),
        Command::Simulate {
            input,
            sizes,
            minbytes,
            maxbytes,
            stepfactor,
            plot,
            phase,
            format,
            failures,
            budget,
        } => simulate::simulate(
            &input,
            &simulate::sizes(&sizes, minbytes.zip(maxbytes), stepfactor)?,
            phase.as_deref(),
            format,
            plot.as_deref(),
            &failures,
            &topoc::Options {
                budget: budget.memory,
                ..topoc::Options::default()
            },
        ),
        Command::Draw {
            input,
            step,
            phase,
            format,
            layout,
            output,
            budget,
        } => draw::draw(
            &input,
            &topoc::draw::Request { phase, step },
            format,
            layout,
            output.as_deref(),
            &budget.memory,
        ),
        Command::Import(args) => import::import(&args),
        Command::Lab(args) => topoc::lab::main(args),
    }
}

/// The error for `--phase NAME` where the file at `path` has no phase `name`: the phases it
/// has, so that the user can pick one.
pub fn no_phase(path: &Path, name: &str, names: &[&str]) -> String {
    format!(
        "error: {} has no phase `{}`; its phases are: {}",
        topoc::visible::line(&path.display().to_string()),
        topoc::visible::line(name),
        topoc::visible::line(&names.join(", "))
    )
}

/// Reads a file, naming it in the error.
pub fn read(path: &Path) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("error: cannot read {}: {e}", path.display()))
}

/// Where `-o` sends a command's output: `None` for standard output (no `-o`, or `-o -`), else
/// the file. Refused before any work, so nothing is written: a file that is one of the
/// command's `inputs` (the topology would be replaced by its own schedule), and a read-only
/// file (as `cp` without `-f` refuses; a rename would replace it silently).
pub fn output_file<'a>(
    inputs: &[&Path],
    output: Option<&'a Path>,
) -> Result<Option<&'a Path>, String> {
    let Some(path) = output.filter(|o| o.as_os_str() != "-") else {
        return Ok(None);
    };
    let Ok(meta) = std::fs::metadata(path) else {
        return Ok(Some(path));
    };
    for input in inputs {
        if same_file(input, path) {
            return Err(format!(
                "error: the output {} is the input {}; nothing was written (choose another -o)",
                path.display(),
                input.display()
            ));
        }
    }
    if meta.permissions().readonly() {
        return Err(format!(
            "error: {} is read-only; nothing was written (make it writable or remove it first)",
            path.display()
        ));
    }
    Ok(Some(path))
}

/// Whether two paths name the same file (through links and `./` too).
fn same_file(a: &Path, b: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        if let (Ok(a), Ok(b)) = (std::fs::metadata(a), std::fs::metadata(b)) {
            return a.dev() == b.dev() && a.ino() == b.ino();
        }
    }
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// Writes `text` to `path` whole or not at all: a temporary file beside it, renamed over it.
///
/// A path that already names something other than a regular file (`/dev/null`,
/// `/dev/stdout`, a named pipe) is written through instead: renaming over it would replace
/// the device with a file, and run as root that turns `-o /dev/null` into a regular file
/// that every later program's discarded output lands in and is read back from.
pub fn write_atomic(path: &Path, text: &str) -> Result<(), String> {
    write_atomic_with(path, |out| std::io::Write::write_all(out, text.as_bytes()))
}

/// [`write_atomic`] of what `write` writes, streamed through a buffer: a schedule of hundreds
/// of megabytes goes to its file without being held as text first.
pub fn write_atomic_with(
    path: &Path,
    write: impl FnOnce(&mut dyn std::io::Write) -> std::io::Result<()>,
) -> Result<(), String> {
    if is_special(path) {
        let fail =
            |e: &dyn std::fmt::Display| format!("error: cannot write {}: {e}", path.display());
        let out = std::fs::OpenOptions::new()
            .write(true)
            .open(path)
            .map_err(|e| fail(&e))?;
        return buffered(out, write).map_err(|e| fail(&e));
    }
    stage_with(path, write)?.commit()
}

/// Whether `path` is a file that cannot be replaced by renaming another over it (a FIFO, a
/// device such as `/dev/stdout`): it is written directly.
pub fn is_special(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| !m.is_file() && !m.is_dir())
}

/// An output file written in full under a temporary name beside its target, not yet in place:
/// [`Staged::commit`] renames it over the target; dropped, it is removed. The command line
/// writes a schedule this way while the verifier checks it, and commits it once proved.
pub struct Staged {
    // Dropped in this order: the file (which removes it), then its record for the signal
    // handler.
    tmp: tempfile::NamedTempFile,
    path: PathBuf,
    _pending: Pending,
}

/// The temporary file recorded for removal on a signal ([`cleanup`]) until this is dropped:
/// then the file has been renamed into place or removed.
struct Pending;

impl Drop for Pending {
    fn drop(&mut self) {
        cleanup::done();
    }
}

impl Staged {
    /// Renames the file over its target.
    pub fn commit(self) -> Result<(), String> {
        let Staged {
            tmp,
            path,
            _pending: pending,
        } = self;
        // Renamed, or removed with the error: only then is its record for a signal dropped.
        let persisted = tmp
            .persist(&path)
            .map(drop)
            .map_err(|e| format!("error: cannot write {}: {}", path.display(), e.error));
        drop(pending);
        persisted
    }
}

/// Writes what `write` writes, through a buffer, to a new temporary file beside `path` (which
/// must not be a special file, [`is_special`]) with the permissions of the file it will replace
/// (or 0644), synced to disk: the [`Staged`] file, to commit. On error it is removed.
pub fn stage_with(
    path: &Path,
    write: impl FnOnce(&mut dyn std::io::Write) -> std::io::Result<()>,
) -> Result<Staged, String> {
    let fail = |e: &dyn std::fmt::Display| format!("error: cannot write {}: {e}", path.display());
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    // The name is recorded before the file exists, so an interrupt that finds the file finds it
    // recorded and removes it (the destructor would not run); recorded after, a signal between
    // the two left it behind.
    let tmp = tempfile::Builder::new()
        .make_in(dir, |name| {
            cleanup::pending(name);
            let created = private_new_file(name);
            if created.is_err() {
                // Not ours: a file of that name may exist, and is tried again under another.
                cleanup::done();
            }
            created
        })
        .map_err(|e| fail(&e))?;
    let staged = Staged {
        tmp,
        path: path.to_path_buf(),
        _pending: Pending,
    };
    let file = staged.tmp.as_file();
    buffered(file, write).map_err(|e| fail(&e))?;
    // Temporary files are private (0600); give the result the permissions of the file it
    // replaces, or those of an ordinary new file (0644).
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let permissions = std::fs::metadata(path)
            .map(|m| m.permissions())
            .unwrap_or_else(|_| std::fs::Permissions::from_mode(0o644));
        file.set_permissions(permissions).map_err(|e| fail(&e))?;
    }
    file.sync_all().map_err(|e| fail(&e))?;
    Ok(staged)
}

/// Writes to `standard output` what `write` writes, through a buffer; an error (a closed pipe)
/// is reported, not a panic.
pub fn write_stdout(
    write: impl FnOnce(&mut dyn std::io::Write) -> std::io::Result<()>,
) -> Result<(), String> {
    buffered(std::io::stdout().lock(), write)
        .map_err(|e| format!("error: cannot write to standard output: {e}"))
}

/// Runs `write` on `out` through a buffer of [`WRITE_BUFFER`] bytes, and flushes it.
fn buffered<W: std::io::Write>(
    out: W,
    write: impl FnOnce(&mut dyn std::io::Write) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let mut out = std::io::BufWriter::with_capacity(WRITE_BUFFER, out);
    write(&mut out)?;
    std::io::Write::flush(&mut out)
}

/// The buffer between a serialiser's many small writes and the output file.
const WRITE_BUFFER: usize = 1 << 20;

/// Creates `path`, which must not exist, readable and writable by its owner only (0600) as
/// temporary files are.
fn private_new_file(path: &Path) -> std::io::Result<std::fs::File> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true).write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options.open(path)
}

/// Whether a text is a topology file (rather than a schedule): its first word is `Topology`.
pub fn is_topology(text: &str) -> bool {
    let mut rest = text
        .strip_prefix(topoc::topology::parse::BOM)
        .unwrap_or(text);
    loop {
        rest = rest.trim_start();
        if let Some(after) = rest.strip_prefix("//") {
            rest = after.split_once('\n').map_or("", |(_, r)| r);
        } else if let Some(after) = rest.strip_prefix("/*") {
            rest = after.split_once("*/").map_or("", |(_, r)| r);
        } else if rest.starts_with("#![") {
            rest = rest.split_once(']').map_or("", |(_, r)| r);
        } else {
            break;
        }
    }
    rest.starts_with("Topology")
}

/// Formats a compiler error about the file at `path` for the terminal.
pub fn report_error(path: &Path, source: &str, error: &Error) -> String {
    match error {
        Error::Topology(problems) => {
            let color = std::io::stderr().is_terminal();
            let mut out = diag::render(&path.display().to_string(), source, problems, color);
            out.push_str(&format!(
                "error: {} has {} problem(s); nothing was written",
                path.display(),
                problems.len()
            ));
            out
        }
        Error::Unverified(errors) => format!("{error}\n{}", verify::render_errors(errors)),
    }
}

/// Loads a verified schedule from a schedule file, or compiles a topology file.
pub fn load_verified(path: &Path) -> Result<schedule_ir::VerifiedSchedule, String> {
    let text = read(path)?;
    if is_topology(&text) {
        let compiled = topoc::compile_source(&text, &topoc::Options::default())
            .map_err(|e| report_error(path, &text, &e))?;
        return Ok(compiled.schedule);
    }
    let schedule = schedule_ir::serial::from_str(&text)
        .map_err(|e| format!("error: {} is not a readable schedule: {e}", path.display()))?;
    schedule_ir::verify(schedule).map_err(|errors| {
        format!(
            "{}\nerror: {} failed verification with {} problem(s); it will not run",
            verify::render_errors(&errors),
            path.display(),
            errors.errors.len()
        )
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// A staged file is in place only once committed: dropped (a schedule the verifier refused)
    /// or failed while written, it leaves the target as it was and nothing beside it.
    #[test]
    fn a_staged_file_is_in_place_only_once_committed() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("out.ron");
        std::fs::write(&target, "before").unwrap();
        let names = || {
            let mut names: Vec<String> = std::fs::read_dir(dir.path())
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            names.sort();
            names
        };
        let content = || std::fs::read_to_string(&target).unwrap();

        let staged = stage_with(&target, |w| w.write_all(b"after")).unwrap();
        assert_eq!(content(), "before");
        assert_eq!(names().len(), 2, "the staged file beside the target");
        drop(staged);
        assert_eq!(
            (content(), names()),
            ("before".into(), vec!["out.ron".into()])
        );

        let failed = stage_with(&target, |w| {
            w.write_all(b"half")?;
            Err(std::io::Error::other("refused"))
        });
        let error = failed.err().unwrap_or_default();
        assert!(
            error.contains("cannot write") && error.contains("refused"),
            "{error}"
        );
        assert_eq!(
            (content(), names()),
            ("before".into(), vec!["out.ron".into()])
        );

        let staged = stage_with(&target, |w| w.write_all(b"after")).unwrap();
        staged.commit().unwrap();
        assert_eq!(
            (content(), names()),
            ("after".into(), vec!["out.ron".into()])
        );
    }
}
