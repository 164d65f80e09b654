//! `topoc lab`: run a compiled schedule on an emulated network whose links have the
//! topology's bandwidths (scaled down) and measure it against the cost model.
//!
//! # What it builds
//!
//! One network namespace per node of the machine; one veth pair per link, each end shaped
//! with `tbf` to the link's bandwidth times `--scale`; a Linux bridge in each switch's
//! namespace (switches forward frames, as the schedule's routes assume); an address per
//! compute-node end of each link (see [`plan`]), written to a wiring file; and shortest-path IP
//! routes between per-node addresses, as a network with ordinary routing has. Everything lives
//! in namespaces named `tlab<pid>…`, which the lab deletes afterwards, on failure too
//! (`topoc lab cleanup` removes what a killed lab left).
//!
//! # What it measures
//!
//! 1. α and the delivered rate of one link, by a TCP ping-pong (64 B and 4 MiB messages);
//! 2. for each size, the schedule over the link transport
//!    ([`runtime_lite::link`]): one process per compute node in its namespace, started
//!    together by the launcher, one warm-up run and `--runs` timed runs (each the slowest
//!    node's time); every node's result is checked against the reference reduction and bit
//!    for bit against the in-process run;
//! 3. beside it, the cost model's estimate on the scaled links, and on the calibrated links
//!    (the lab's α, the bandwidths times the measured efficiency).
//!
//! The kernel here has no `netem`, so the lab adds no latency of its own: α is what the
//! namespaces, veths and TCP give, measured, and used in the calibrated estimate.

mod baseline;
mod launch;
mod measure;
mod net;
mod node;
pub mod plan;

use clap::{Args, Subcommand};
use measure::{Calibration, Session, SizeRow};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// `topoc lab` and its commands.
#[derive(Debug, Args)]
pub struct LabArgs {
    #[command(subcommand)]
    command: LabCommand,
}

#[derive(Debug, Subcommand)]
enum LabCommand {
    /// Build the emulated network of a topology, run its schedule at each size and print the
    /// measured times beside the cost model's (needs root: namespaces, veth pairs and tc).
    ///
    /// Example: topoc lab run examples/ladder8.ron --scale 0.0005 --sizes 1MiB,16MiB
    Run(RunArgs),
    /// Delete the namespaces of labs that are no longer running (or of all labs, with --all).
    ///
    /// Example: topoc lab cleanup
    Cleanup {
        /// Also delete the namespaces of labs still running.
        #[arg(long)]
        all: bool,
    },
    /// One compute node's process (started by `lab run` inside the node's namespace).
    #[command(hide = true)]
    Node {
        #[arg(long)]
        schedule: PathBuf,
        #[arg(long)]
        wiring: PathBuf,
        #[arg(long)]
        node: String,
        #[arg(long)]
        phase: String,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        #[arg(long, default_value_t = 1)]
        runs: usize,
        #[arg(long, default_value_t = 30)]
        timeout: u64,
    },
    /// The echo end of the calibration ping-pong.
    #[command(hide = true)]
    Pong { listen: std::net::SocketAddr },
    /// The measuring end of the calibration ping-pong.
    #[command(hide = true)]
    Ping { peer: std::net::SocketAddr },
}

/// `topoc lab run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// A topology file (compiled first) or a schedule (RON or JSON).
    input: PathBuf,
    /// Every link's bandwidth is multiplied by this (0.0005: 100 Gbit/s becomes 50 Mbit/s).
    #[arg(long, default_value_t = 0.0005)]
    scale: f64,
    /// Message sizes, comma-separated (B, KiB, MiB, GiB).
    #[arg(long, default_value = "1MiB,16MiB")]
    sizes: String,
    /// Timed runs per size, after one warm-up run.
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Seed of the input data.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// The exchange phase to run (the first when absent).
    #[arg(long)]
    phase: Option<String>,
    /// Also run this baseline over the same links, alternating with the schedule.
    #[arg(long, value_enum, default_value_t = Baseline::None)]
    baseline: Baseline,
    /// Rounds per size: each runs the schedule, then the baseline (warm-up and timed runs).
    #[arg(long, default_value_t = 1)]
    rounds: usize,
    /// Scheduling priority of every process the lab starts, schedule and baseline alike
    /// (`nice -n`; negative is more urgent). On a loaded machine a negative value keeps
    /// the nodes' wake-ups from waiting behind other work.
    #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
    nice: i32,
    /// Report format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Baseline {
    /// No baseline.
    None,
    /// MPI_Allreduce of MPICH (f32 sum), over shortest-path IP routes between node addresses.
    Mpi,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Format {
    Text,
    Json,
}

/// Runs a `topoc lab` command. `Err` carries a message for the terminal.
pub fn main(args: LabArgs) -> Result<ExitCode, String> {
    match args.command {
        LabCommand::Run(run) => lab_run(&run),
        LabCommand::Cleanup { all } => {
            for ns in net::cleanup(all)? {
                println!("deleted namespace {ns}");
            }
            Ok(ExitCode::SUCCESS)
        }
        LabCommand::Node {
            schedule,
            wiring,
            node,
            phase,
            seed,
            runs,
            timeout,
        } => node::node(&node::NodeJob {
            schedule: &schedule,
            wiring: &wiring,
            node: &node,
            phase: &phase,
            seed,
            runs,
            timeout: Duration::from_secs(timeout),
        })
        .map(|()| ExitCode::SUCCESS)
        .map_err(|e| format!("error: node {node}: {e}")),
        LabCommand::Pong { listen } => node::pong(listen, Duration::from_secs(60))
            .map(|()| ExitCode::SUCCESS)
            .map_err(|e| format!("error: pong: {e}")),
        LabCommand::Ping { peer } => node::ping(peer, Duration::from_secs(60))
            .map(|()| ExitCode::SUCCESS)
            .map_err(|e| format!("error: ping: {e}")),
    }
}

/// What `lab run` reports.
#[derive(Debug, serde::Serialize)]
struct Report {
    machine: String,
    /// The exchange measured; each size's row names the phase and method that ran.
    phase: String,
    scale: f64,
    runs: usize,
    calibration: Calibration,
    sizes: Vec<SizeRow>,
}

/// Loads a schedule file, or compiles a topology file once per size measured (one band each,
/// `auto` deciding at each size), so that every size runs the schedule compiled for it.
fn load(path: &std::path::Path, sizes: &[u64]) -> Result<schedule_ir::VerifiedSchedule, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("error: cannot read {}: {e}", path.display()))?;
    if let Ok(schedule) = schedule_ir::serial::from_str(&text) {
        return schedule_ir::verify(schedule).map_err(|e| {
            format!(
                "error: {} failed verification ({} problems)",
                path.display(),
                e.errors.len()
            )
        });
    }
    let mut sizes = sizes.to_vec();
    sizes.sort_unstable();
    sizes.dedup();
    let at = match sizes.as_slice() {
        [one] => crate::compile::Sizes::One(*one),
        _ => crate::compile::Sizes::Bands(sizes),
    };
    crate::load(&text)
        .and_then(|loaded| crate::compile::compile_sized(&loaded, &crate::Options::default(), &at))
        .map(|c| c.schedule)
        .map_err(|e| {
            format!(
                "error: {}: {e} (run `topoc check` for details)",
                path.display()
            )
        })
}

fn lab_run(args: &RunArgs) -> Result<ExitCode, String> {
    if !(args.scale.is_finite() && args.scale > 0.0) {
        return Err(format!(
            "error: --scale {} must be a positive number",
            args.scale
        ));
    }
    let sizes = args
        .sizes
        .split(',')
        .map(crate::simulate::parse_size)
        .collect::<Result<Vec<u64>, String>>()
        .map_err(|e| format!("error: {e}"))?;
    let verified = load(&args.input, &sizes)?;
    let schedule = verified.schedule();
    let exchange = exchange_name(schedule, args.phase.as_deref())?;
    // The phase each size runs: the band that holds it, or the one phase of that name.
    let phases = sizes
        .iter()
        .map(|&bytes| {
            schedule
                .phase_for_bytes(&exchange, bytes)
                .map(|p| (bytes, p.clone()))
                .map_err(|_| format!("error: exchange `{exchange}` has no phase for {bytes} bytes"))
        })
        .collect::<Result<Vec<_>, String>>()?;
    let machine = &schedule.machine;
    if let Some(n) = machine.nodes.iter().find(|n| n.capacity.is_some()) {
        return Err(format!(
            "error: `{}` reduces in the network; the lab runs compute nodes only (use a machine \
             whose switches only forward)",
            n.name
        ));
    }
    if let Some(problem) = phases
        .iter()
        .find_map(|(_, phase)| route_through_compute(machine, phase))
    {
        return Err(format!("error: {problem}"));
    }
    let _ = net::cleanup(false);
    let prefix = format!("{}{}", net::PREFIX, std::process::id());
    let net_plan = plan::plan(machine, args.scale, &prefix).map_err(|e| format!("error: {e}"))?;
    let dir = tempfile::tempdir().map_err(|e| format!("error: no temporary directory: {e}"))?;
    std::fs::write(dir.path().join("wiring.ron"), net_plan.wiring.to_ron())
        .map_err(|e| format!("error: cannot write the wiring: {e}"))?;
    let exe = std::env::current_exe().map_err(|e| format!("error: {e}"))?;
    let lab = net::Lab::build(&net_plan).map_err(|e| format!("error: {e}"))?;
    let session = Session {
        net: &net_plan,
        dir: dir.path(),
        exe,
        machine,
        seed: args.seed,
        runs: args.runs.max(1),
        nice: args.nice,
    };
    let timeout = Duration::from_secs(60);
    let calibration =
        measure::calibrate(&session, timeout).map_err(|e| format!("error: calibration: {e}"))?;
    let mpi = match args.baseline {
        Baseline::None => None,
        Baseline::Mpi => Some(baseline::build(dir.path()).map_err(|e| format!("error: {e}"))?),
    };
    let mut rows = Vec::new();
    for (bytes, phase) in &phases {
        let bytes = *bytes;
        let plan = SizePlan {
            bytes,
            scale: args.scale,
            rounds: args.rounds.max(1),
            mpi: mpi.as_deref(),
        };
        rows.push(measure_size(
            &session,
            &verified,
            phase,
            &plan,
            &calibration,
        )?);
    }
    drop(lab);
    let report = Report {
        machine: machine.name.clone(),
        phase: exchange,
        scale: args.scale,
        runs: session.runs,
        calibration,
        sizes: rows,
    };
    print_report(&report, args.format)?;
    let ok = report.sizes.iter().all(|r| r.checked != Some(false));
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// The exchange the lab runs: `wanted`, else the program's first exchange (banded or not).
fn exchange_name(schedule: &schedule_ir::Schedule, wanted: Option<&str>) -> Result<String, String> {
    if let Some(name) = wanted {
        return if schedule.bands(name).is_some() || schedule.phase(name).is_some() {
            Ok(name.to_string())
        } else {
            Err(format!("error: the schedule has no phase `{name}`"))
        };
    }
    let banded = schedule.program.iter().find_map(|item| match item {
        schedule_ir::ProgramItem::Bands { name, .. } => Some(name.clone()),
        _ => None,
    });
    banded
        .or_else(|| schedule.phases.first().map(|p| p.name.clone()))
        .ok_or_else(|| "error: the schedule has no exchange phase".to_string())
}

/// How to measure one size.
struct SizePlan<'a> {
    bytes: u64,
    scale: f64,
    rounds: usize,
    /// The baseline program, if one runs.
    mpi: Option<&'a std::path::Path>,
}

/// Runs one size, alternating with the baseline, and sets it beside the model.
fn measure_size(
    s: &Session<'_>,
    verified: &schedule_ir::VerifiedSchedule,
    phase: &schedule_ir::Phase,
    plan: &SizePlan<'_>,
    cal: &Calibration,
) -> Result<SizeRow, String> {
    let (bytes, scale) = (plan.bytes, plan.scale);
    let elements = (bytes / phase.dtype.size_bytes()).max(1);
    // The one phase, re-cut to the size and verified again (other bands stay out of it).
    let one = runtime_lite::bands::select(verified, &phase.name, phase.dtype, elements)
        .map_err(|e| format!("error: {e}"))?;
    let (sized, p) = (one.schedule().clone(), one.phase().clone());
    let machine = &sized.schedule().machine;
    let nominal = measure::lab_machine(machine, scale, 1.0, None);
    let calibrated =
        measure::lab_machine(machine, scale, cal.efficiency(), Some(cal.alpha_seconds));
    let estimate = schedule_ir::cost::estimate(&nominal, &p).seconds;
    let calibrated_seconds = schedule_ir::cost::estimate(&calibrated, &p).seconds;
    let timeout = Duration::from_secs_f64((30.0 + 20.0 * calibrated_seconds).min(600.0));
    let fail = |e: String| format!("error: {} at {bytes} bytes: {e}", machine.name);
    let (mut times, mut base, mut hashes) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..plan.rounds {
        let (t, h) = s.run_schedule(&sized, &p.name, timeout).map_err(fail)?;
        times.extend(t);
        if !hashes.is_empty() && hashes != h {
            return Err(fail("two rounds gave different results".into()));
        }
        hashes = h;
        if let Some(program) = plan.mpi {
            let elements = bytes / 4;
            let t = baseline::run(
                s.nice, s.net, machine, program, s.dir, elements, s.runs, timeout,
            )
            .map_err(|e| fail(format!("baseline: {e}")))?;
            base.extend(t);
        }
    }
    let checked = measure::check(&sized, &p, s.seed, &hashes).map_err(|e| format!("error: {e}"))?;
    Ok(SizeRow {
        bytes,
        phase: p.name.clone(),
        algorithm: p.algorithm.clone(),
        median_seconds: measure::median(&times),
        min_seconds: times.iter().copied().fold(f64::INFINITY, f64::min),
        estimate_seconds: estimate,
        calibrated_seconds,
        baseline_seconds: (!base.is_empty()).then(|| measure::median(&base)),
        checked,
    })
}

fn print_report(r: &Report, format: Format) -> Result<(), String> {
    if format == Format::Json {
        let text = serde_json::to_string_pretty(r).map_err(|e| format!("error: {e}"))?;
        println!("{text}");
        return Ok(());
    }
    let c = &r.calibration;
    println!(
        "lab: machine `{}`, exchange `{}`, links scaled by {}, {} timed run(s) per size",
        r.machine, r.phase, r.scale, r.runs
    );
    println!(
        "calibration ({}): α = {:.1} µs, {:.1} of {:.1} Mbit/s delivered ({:.0}%)",
        c.path,
        c.alpha_seconds * 1e6,
        c.measured_bits / 1e6,
        c.shaped_bits / 1e6,
        c.efficiency() * 100.0
    );
    println!(
        "{:>10}  {:<18}  {:>11}  {:>11}  {:>11}  {:>9}  {:>11}  {:>9}  result",
        "size", "method", "measured", "estimate", "calibrated", "meas/cal", "MPI", "MPI/meas"
    );
    for row in &r.sizes {
        println!(
            "{:>10}  {:<18}  {:>9.2}ms  {:>9.2}ms  {:>9.2}ms  {:>9.2}  {:>11}  {:>9}  {}",
            crate::simulate::format_bytes(row.bytes),
            row.algorithm,
            row.median_seconds * 1e3,
            row.estimate_seconds * 1e3,
            row.calibrated_seconds * 1e3,
            row.median_seconds / row.calibrated_seconds,
            row.baseline_seconds
                .map_or_else(|| "-".to_string(), |b| format!("{:.2}ms", b * 1e3)),
            row.baseline_seconds.map_or_else(
                || "-".to_string(),
                |b| format!("{:.2}", b / row.median_seconds)
            ),
            match row.checked {
                Some(true) => "reference ok, bit-identical",
                Some(false) => "MISMATCH",
                None => "not checked (too large)",
            }
        );
    }
    Ok(())
}

/// The first transfer whose route passes through a compute node, described: the lab forwards
/// only through switches (bridges), so it cannot run such a schedule.
fn route_through_compute(
    machine: &schedule_ir::Machine,
    phase: &schedule_ir::Phase,
) -> Option<String> {
    for (n, program) in phase.programs.iter().enumerate() {
        for (k, step) in program.steps.iter().enumerate() {
            for instr in step {
                let schedule_ir::Instr::Send { link, via, .. } = instr else {
                    continue;
                };
                let mut at = n;
                for l in std::iter::once(link).chain(via).take(via.len()) {
                    let Some(l) = machine.links.get(l.index()) else {
                        break;
                    };
                    at = if l.a.index() == at {
                        l.b.index()
                    } else {
                        l.a.index()
                    };
                    if machine
                        .nodes
                        .get(at)
                        .is_some_and(|x| x.kind != schedule_ir::NodeKind::Switch)
                    {
                        return Some(format!(
                            "step {k}: a transfer of `{}` passes through compute node `{}`; the \
                             lab forwards through switches only",
                            machine.node_name(schedule_ir::NodeId::new(n)),
                            machine.nodes[at].name
                        ));
                    }
                }
            }
        }
    }
    None
}
