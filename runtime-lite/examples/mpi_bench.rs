//! Times a compiled allreduce schedule run by the runtime over MPI against `MPI_Allreduce` on
//! the same ranks, the same vector sizes (1 KiB to 64 MiB per node by default) and the same
//! data, in the same job, and prints a Markdown table with the ratio.
//!
//! ```sh
//! cargo run --release -p topoc -- compile examples/ladder8.ron -o /tmp/ladder8.sched.ron
//! cargo build --release -p runtime-lite --features mpi --example mpi_bench
//! mpirun -np 8 target/release/examples/mpi_bench /tmp/ladder8.sched.ron
//! ```
//!
//! Options: `--phase NAME` (default: the first phase; it must be an allreduce), `--sizes
//! 1K,64K,4M` (bytes per node; `K` and `M` are binary), `--runs N` (timed runs per size and
//! method; default 10 up to 1 MiB, 5 up to 16 MiB, 3 above). For each size the phase is
//! re-chunked to the vector length (`Phase::with_elements`) and verified again. Every timed run
//! starts after a barrier, and its time is the slowest rank's; the table shows the median of
//! the runs, after one untimed warm-up run. The runtime works in place; `MPI_Allreduce` gets a
//! separate receive buffer. Before timing, both results are compared: the largest difference
//! relative to `p · max|input|` is printed (floats combine in different orders). The machine's
//! load average before and after is printed too: other work on the cores skews the times.

use mpi::collective::SystemOperation;
use mpi::topology::{Communicator, SimpleCommunicator};
use mpi::traits::CommunicatorCollectives;
use runtime_lite::mpi::{MpiElement, MpiNode};
use runtime_lite::{inputs, Element, Error};
use schedule_ir::{Collective, DType, Phase, ReduceOp, Schedule};
use std::process::ExitCode;
use std::time::Instant;

const USAGE: &str = "usage: mpi_bench SCHEDULE [--phase NAME] [--sizes 1K,64K,4M] [--runs N]";

/// The command line.
struct Options {
    schedule: String,
    phase: Option<String>,
    sizes: Vec<u64>,
    runs: Option<usize>,
}

fn parse(mut args: impl Iterator<Item = String>) -> Result<Options, String> {
    let mut options = Options {
        schedule: String::new(),
        phase: None,
        sizes: (0..9).map(|i| 1024u64 << (2 * i)).collect(),
        runs: None,
    };
    while let Some(arg) = args.next() {
        let mut value = |name: &str| args.next().ok_or(format!("{name} needs a value"));
        match arg.as_str() {
            "--phase" => options.phase = Some(value("--phase")?),
            "--sizes" => {
                options.sizes = value("--sizes")?
                    .split(',')
                    .map(bytes)
                    .collect::<Result<_, _>>()?
            }
            "--runs" => {
                let runs = value("--runs")?;
                options.runs = Some(runs.parse().map_err(|_| format!("bad --runs {runs}"))?);
            }
            _ if arg.starts_with('-') => return Err(USAGE.into()),
            _ if options.schedule.is_empty() => options.schedule = arg,
            _ => return Err(USAGE.into()),
        }
    }
    if options.schedule.is_empty() {
        return Err(USAGE.into());
    }
    Ok(options)
}

/// `64K` → 65536.
fn bytes(text: &str) -> Result<u64, String> {
    let (number, unit) = match text.strip_suffix(['K', 'k']) {
        Some(n) => (n, 1 << 10),
        None => match text.strip_suffix(['M', 'm']) {
            Some(n) => (n, 1 << 20),
            None => (text, 1),
        },
    };
    number
        .parse::<u64>()
        .map(|n| n * unit)
        .map_err(|_| format!("bad size {text}"))
}

fn main() -> ExitCode {
    let Some(universe) = mpi::initialize() else {
        eprintln!("mpi_bench: MPI could not be initialised");
        return ExitCode::from(2);
    };
    let world = universe.world();
    let rank = world.rank();
    let result = parse(std::env::args().skip(1)).and_then(|options| bench(&world, &options));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("mpi_bench: rank {rank}: {message}");
            world.abort(2)
        }
    }
}

fn bench(world: &SimpleCommunicator, options: &Options) -> Result<(), String> {
    let text = std::fs::read_to_string(&options.schedule)
        .map_err(|e| format!("cannot read {}: {e}", options.schedule))?;
    let schedule = runtime_lite::load(&text).map_err(|e| e.to_string())?;
    let phase = match &options.phase {
        Some(name) => schedule.schedule().phase(name),
        None => schedule.schedule().phases.first(),
    }
    .ok_or("no such phase")?
    .clone();
    if phase.collective != Collective::AllReduce {
        return Err(format!("phase `{}` is not an allreduce", phase.name));
    }
    if world.rank() == 0 {
        let machine = &schedule.schedule().machine;
        println!(
            "mpi_bench: machine `{}`, phase `{}` ({}, {} steps, {:?} {}), {} ranks on {} cores, \
             {}",
            machine.name,
            phase.name,
            phase.algorithm,
            phase.steps,
            phase.op,
            phase.dtype,
            world.size(),
            std::thread::available_parallelism().map_or(0, |n| n.get()),
            mpi::environment::library_version()
                .unwrap_or_default()
                .lines()
                .next()
                .unwrap_or("")
                .trim()
        );
        println!("load average before the run: {}", load_average());
        println!();
        println!(
            "| size per node | elements | runtime over MPI | MPI_Allreduce | ratio | max rel. diff |"
        );
        println!("|---:|---:|---:|---:|---:|---:|");
    }
    for &size in &options.sizes {
        let row = match phase.dtype {
            DType::F32 => one_size::<f32>(world, schedule.schedule(), &phase, size, options),
            DType::F64 => one_size::<f64>(world, schedule.schedule(), &phase, size, options),
            DType::I32 => one_size::<i32>(world, schedule.schedule(), &phase, size, options),
            DType::I64 => one_size::<i64>(world, schedule.schedule(), &phase, size, options),
            // MPI_Allreduce, the baseline, has no 16-bit float type to reduce.
            DType::F16 | DType::BF16 => Err(format!(
                "MPI_Allreduce has no {} reduction to compare with; run the phase as f32",
                phase.dtype
            )),
        };
        row?;
    }
    if world.rank() == 0 {
        println!();
        println!("load average after the run: {}", load_average());
    }
    Ok(())
}

/// The machine's load averages (1, 5, 15 minutes), where the system tells them: the benchmark
/// shares its cores with whatever else runs.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

/// Times both methods on vectors of `bytes` bytes per node and prints the table row.
fn one_size<T: MpiElement + mpi::datatype::Equivalence>(
    world: &SimpleCommunicator,
    schedule: &Schedule,
    phase: &Phase,
    bytes: u64,
    options: &Options,
) -> Result<(), String> {
    let text = |e: Error| e.to_string();
    let elements = bytes / T::DTYPE.size_bytes();
    let resized = phase.with_elements(elements);
    let verified = schedule_ir::verify(Schedule {
        format_version: schedule.format_version,
        machine: schedule.machine.clone(),
        program: Vec::new(),
        phases: vec![resized],
    })
    .map_err(|e| text(e.into()))?;
    let mut node = MpiNode::new(world, verified).map_err(text)?;
    let len = elements as usize;
    let input: Vec<T> = inputs::generate(phase.op, 1, node.rank(), len);
    let mut data = input.clone();
    let mut received = vec![T::ZERO; len];
    let op = match phase.op {
        // MPI has no mean: its sum, divided below once, like the schedule's scales.
        ReduceOp::Sum | ReduceOp::Mean => SystemOperation::sum(),
        ReduceOp::Prod => SystemOperation::product(),
        ReduceOp::Max => SystemOperation::max(),
        ReduceOp::Min => SystemOperation::min(),
    };

    // Both must compute the same thing.
    node.run(&phase.name, &mut data).map_err(text)?;
    world.all_reduce_into(&input[..], &mut received[..], op);
    if phase.op == ReduceOp::Mean {
        T::divide_into(
            &mut received,
            u32::try_from(world.size()).unwrap_or(u32::MAX),
        );
    }
    let diff = relative_difference(world, &input, &data, &received);

    let runs = options.runs.unwrap_or(if bytes <= 1 << 20 {
        10
    } else if bytes <= 16 << 20 {
        5
    } else {
        3
    });
    let mut ours = Vec::with_capacity(runs);
    let mut theirs = Vec::with_capacity(runs);
    for run in 0..=runs {
        data.copy_from_slice(&input);
        let mut outcome = Ok(());
        let t = timed(world, || outcome = node.run(&phase.name, &mut data));
        outcome.map_err(text)?;
        let u = timed(world, || {
            world.all_reduce_into(&input[..], &mut received[..], op);
        });
        if run > 0 {
            ours.push(t);
            theirs.push(u);
        }
    }
    let (ours, theirs) = (median(&mut ours), median(&mut theirs));
    if world.rank() == 0 {
        println!(
            "| {} | {elements} | {} | {} | {:.2} | {diff:.1e} |",
            human(bytes),
            ms(ours),
            ms(theirs),
            ours / theirs
        );
    }
    Ok(())
}

/// Runs `f` after a barrier and returns the slowest rank's time, in seconds.
fn timed(world: &SimpleCommunicator, f: impl FnOnce()) -> f64 {
    world.barrier();
    let start = Instant::now();
    f();
    let local = start.elapsed().as_secs_f64();
    let mut slowest = 0.0f64;
    world.all_reduce_into(&local, &mut slowest, SystemOperation::max());
    slowest
}

/// The largest `|a - b| / (p · max|input|)` over all elements and ranks (0 for exact types).
fn relative_difference<T: Element>(
    world: &SimpleCommunicator,
    input: &[T],
    a: &[T],
    b: &[T],
) -> f64 {
    let scale = input
        .iter()
        .map(|x| x.to_f64().abs())
        .fold(f64::MIN_POSITIVE, f64::max)
        * f64::from(world.size());
    let local = a
        .iter()
        .zip(b)
        .map(|(x, y)| (x.to_f64() - y.to_f64()).abs() / scale)
        .fold(0.0, f64::max);
    let mut worst = 0.0f64;
    world.all_reduce_into(&local, &mut worst, SystemOperation::max());
    worst
}

fn median(times: &mut [f64]) -> f64 {
    times.sort_by(f64::total_cmp);
    times.get(times.len() / 2).copied().unwrap_or(f64::NAN)
}

fn ms(seconds: f64) -> String {
    let ms = seconds * 1e3;
    if ms < 1.0 {
        format!("{ms:.3} ms")
    } else if ms < 100.0 {
        format!("{ms:.2} ms")
    } else {
        format!("{ms:.0} ms")
    }
}

fn human(bytes: u64) -> String {
    if bytes >= 1 << 20 {
        format!("{} MiB", bytes >> 20)
    } else {
        format!("{} KiB", bytes >> 10)
    }
}
