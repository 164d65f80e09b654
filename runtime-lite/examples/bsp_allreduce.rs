//! A BSP program over MPI: each rank runs one compute node of a compiled schedule. In every
//! superstep, each node computes its local vector (a compute phase), all pass a barrier, and
//! the exchange phase runs through the runtime by name; the node then adds the result into
//! its model. At the end, rank 0 replays the whole program in one process and checks that
//! every superstep's result matches the reference reduction and that the MPI run is
//! bit-identical to the in-process run, superstep by superstep and in the final model.
//!
//! ```sh
//! cargo run -p topoc -- compile examples/ladder8.ron -o /tmp/ladder8.sched.ron
//! cargo build --release -p runtime-lite --features mpi --example bsp_allreduce
//! mpirun -np 8 target/release/examples/bsp_allreduce /tmp/ladder8.sched.ron
//! ```
//!
//! Options: `--phase NAME` (default: the schedule's first phase; a banded exchange needs
//! `--elements N`, and runs the band that holds N elements), `--supersteps N` (3),
//! `--seed S` (1), `--timeout SECONDS` (120; 0 waits for ever). Rank `i` runs the `i`-th
//! compute node; the local vector of node `i` in superstep `s` is
//! `runtime_lite::inputs::generate(op, seed + s, i, elements)`. Exit status: 0 when every
//! check passes, 1 when one fails, 2 on an error: one found while setting up (a bad file, a
//! wrong number of ranks) stops every rank together; one found while running ends the job
//! with `MPI_Abort`, since the other ranks may be waiting for this one. A run a rank cannot
//! hold within the runtime's default memory budget is refused while setting up, before any
//! vector is allocated.

use mpi::collective::SystemOperation;
use mpi::topology::{Communicator, SimpleCommunicator};
use mpi::traits::{CommunicatorCollectives, Root};
use runtime_lite::mpi::{MpiElement, MpiError, MpiNode};
use runtime_lite::{bands, compare, inputs, reference, Error, InProcess, Limits, Needs};
use schedule_ir::{DType, Phase, ReduceOp, VerifiedSchedule};
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// The command line.
struct Options {
    schedule: String,
    phase: Option<String>,
    elements: Option<u64>,
    supersteps: u64,
    seed: u64,
    timeout: Option<Duration>,
}

const USAGE: &str = "usage: bsp_allreduce SCHEDULE [--phase NAME] [--elements N] \
                     [--supersteps N] [--seed S] [--timeout SECONDS]";

fn parse(mut args: impl Iterator<Item = String>) -> Result<Options, String> {
    let mut options = Options {
        schedule: String::new(),
        phase: None,
        elements: None,
        supersteps: 3,
        seed: 1,
        timeout: Some(runtime_lite::mpi::DEFAULT_TIMEOUT),
    };
    while let Some(arg) = args.next() {
        let mut value = |name: &str| args.next().ok_or(format!("{name} needs a value"));
        match arg.as_str() {
            "--phase" => options.phase = Some(value("--phase")?),
            "--elements" => options.elements = Some(number(&value("--elements")?)?),
            "--supersteps" => options.supersteps = number(&value("--supersteps")?)?,
            "--seed" => options.seed = number(&value("--seed")?)?,
            "--timeout" => {
                let seconds = number(&value("--timeout")?)?;
                options.timeout = (seconds > 0).then(|| Duration::from_secs(seconds));
            }
            "--help" | "-h" => return Err(USAGE.into()),
            _ if arg.starts_with('-') => return Err(format!("unknown option {arg}\n{USAGE}")),
            _ if options.schedule.is_empty() => options.schedule = arg,
            _ => return Err(format!("unexpected argument {arg}\n{USAGE}")),
        }
    }
    if options.schedule.is_empty() {
        return Err(USAGE.into());
    }
    Ok(options)
}

fn number(text: &str) -> Result<u64, String> {
    text.parse()
        .map_err(|_| format!("`{text}` is not a whole number"))
}

fn main() -> ExitCode {
    let Some(universe) = mpi::initialize() else {
        say("bsp_allreduce: MPI could not be initialised".into());
        return ExitCode::from(2);
    };
    let world = universe.world();
    let rank = world.rank();
    let outcome = parse(std::env::args().skip(1))
        .map_err(Failure::Usage)
        .and_then(|options| program(&world, &options));
    match outcome {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(Failure::Usage(message)) => {
            // Every rank parses the same command line: rank 0 speaks for all.
            if rank == 0 {
                say(format!("bsp_allreduce: {message}"));
            }
            ExitCode::from(2)
        }
        Err(Failure::Setup(message)) => {
            // The ranks agreed to stop before running anything: finalise and exit.
            if let Some(message) = message {
                say(format!("bsp_allreduce: rank {rank}: error: {message}"));
            }
            // Every rank is here: wait until all have spoken, since the launcher may end the
            // job as soon as one rank exits with an error.
            world.barrier();
            ExitCode::from(2)
        }
        Err(Failure::Runtime(error)) => {
            // The other ranks may be waiting for this one: end the job. Give the launcher a
            // moment to pass the message on before it tears the job down.
            say(format!("bsp_allreduce: rank {rank}: error: {error}"));
            std::thread::sleep(Duration::from_millis(200));
            world.abort(2)
        }
    }
}

/// Writes `line` to standard error in one write, so that the launcher, which merges every
/// rank's output, cannot interleave it with another rank's (`eprintln!` writes piece by piece).
fn say(mut line: String) {
    use std::io::Write;
    line.push('\n');
    let _ = std::io::stderr().write_all(line.as_bytes());
}

/// Why the program stopped.
enum Failure {
    /// A bad command line (the same on every rank).
    Usage(String),
    /// Setting up failed on some rank, so every rank stops; the message, where this rank has
    /// one, says what went wrong here.
    Setup(Option<String>),
    /// The runtime failed while running.
    Runtime(Box<Error>),
}

impl From<Error> for Failure {
    fn from(error: Error) -> Self {
        Failure::Runtime(Box::new(error))
    }
}

/// Loads the schedule, takes this rank's node and runs the program for the phase's element
/// type. Returns whether every check passed (the same answer on every rank).
fn program(world: &SimpleCommunicator, options: &Options) -> Result<bool, Failure> {
    let loaded = load(options).and_then(|(schedule, target)| {
        fits(&target.replay, &target.phase, world.rank()).map(|()| (schedule, target))
    });
    // Go on only if every rank could load the schedule (the file may differ between hosts)
    // and can hold what it runs.
    let mut failed_somewhere = 0i32;
    world.all_reduce_into(
        &i32::from(loaded.is_err()),
        &mut failed_somewhere,
        SystemOperation::max(),
    );
    let (schedule, target) = loaded.map_err(|e| Failure::Setup(Some(e)))?;
    if failed_somewhere != 0 {
        return Err(Failure::Setup(None));
    }
    // Collective: fails on every rank together (this rank's own reason, or `PeerSetup`).
    let mut node = MpiNode::new(world, schedule).map_err(|e| match e {
        Error::Mpi(e) if matches!(*e, MpiError::PeerSetup) => Failure::Setup(None),
        e => Failure::Setup(Some(e.to_string())),
    })?;
    node.set_timeout(options.timeout);
    match target.phase.dtype {
        DType::F32 => supersteps::<f32>(&mut node, &target, options),
        DType::F64 => supersteps::<f64>(&mut node, &target, options),
        DType::I32 => supersteps::<i32>(&mut node, &target, options),
        DType::I64 => supersteps::<i64>(&mut node, &target, options),
        DType::F16 => supersteps::<half::f16>(&mut node, &target, options),
        DType::BF16 => supersteps::<half::bf16>(&mut node, &target, options),
    }
}

/// What the program runs: the name it hands to [`MpiNode::run`] (a phase, or a banded
/// exchange), the phase that runs (for a banded exchange, its band re-cut to `--elements`),
/// and the schedule rank 0 replays that phase from.
struct Target {
    name: String,
    phase: Phase,
    replay: VerifiedSchedule,
}

/// Reads and verifies the schedule and finds what to run.
fn load(options: &Options) -> Result<(VerifiedSchedule, Target), String> {
    let text = std::fs::read_to_string(&options.schedule)
        .map_err(|e| format!("cannot read {}: {e}", options.schedule))?;
    let schedule = runtime_lite::load(&text).map_err(|e| e.to_string())?;
    if let (Some(name), Some(elements)) = (&options.phase, options.elements) {
        // The dtype the exchange was compiled for: its smallest band's phase's.
        let dtype = schedule
            .schedule()
            .phase_for_bytes(name, 0)
            .map_or(DType::F32, |p| p.dtype);
        let sized = bands::select(&schedule, name, dtype, elements).map_err(|e| e.to_string())?;
        let target = Target {
            name: name.clone(),
            phase: sized.phase().clone(),
            replay: sized.schedule().clone(),
        };
        return Ok((schedule, target));
    }
    let phase = match &options.phase {
        Some(name) => schedule.schedule().phase(name).cloned(),
        None => schedule.schedule().phases.first().cloned(),
    };
    match phase {
        Some(phase) => {
            let target = Target {
                name: phase.name.clone(),
                phase,
                replay: schedule.clone(),
            };
            Ok((schedule, target))
        }
        None => Err(Error::UnknownPhase {
            phase: options.phase.clone().unwrap_or_default(),
            available: schedule
                .schedule()
                .phases
                .iter()
                .map(|p| format!("`{}`", p.name))
                .collect::<Vec<_>>()
                .join(", "),
        }
        .to_string()),
    }
}

/// Refuses, before anything is allocated, a run this rank cannot hold within the default
/// [`Limits`]: its node's buffers and messages plus its model; rank 0 also replays every node
/// in one process and holds, per node, the inputs, the reference, the gathered results and the
/// model. (A rank past the number of compute nodes is left to `MpiNode::new` to report.)
fn fits(schedule: &VerifiedSchedule, phase: &Phase, rank: i32) -> Result<(), String> {
    let machine = &schedule.schedule().machine;
    let limits = Limits::default();
    let vector = phase.elements.saturating_mul(phase.dtype.size_bytes());
    let Some(node) = usize::try_from(rank)
        .ok()
        .and_then(|r| machine.compute_nodes().nth(r))
    else {
        return Ok(());
    };
    let mine = Needs::node(phase, node);
    let replay = if rank == 0 {
        let all = Needs::in_process(machine, phase);
        all.memory_bytes()
            .saturating_add(all.data_bytes.saturating_mul(4))
    } else {
        0
    };
    mine.check(&phase.name, &limits, vector.saturating_add(replay))
        .map_err(|e| e.to_string())
}

/// The BSP program proper, then the checks.
fn supersteps<T: MpiElement>(
    node: &mut MpiNode,
    target: &Target,
    options: &Options,
) -> Result<bool, Failure> {
    let phase = &target.phase;
    let len = usize::try_from(phase.elements).map_err(|_| Error::TooLarge {
        phase: phase.name.clone(),
        elements: phase.elements,
    })?;
    let (me, p) = (node.rank(), node.size());
    let mut check = match me {
        0 => Some(Check::<T>::new(node, target, options)?),
        _ => None,
    };
    if let Some(check) = &check {
        check.header(node, phase, options);
    }
    let mut model = vec![T::ZERO; len];
    let mut grads: Vec<T>;
    let mut passed = true;
    for s in 0..options.supersteps {
        // Compute phase: this node's local vector for the superstep.
        grads = inputs::generate(phase.op, options.seed.wrapping_add(s), me, len);
        node.barrier();
        // Exchange phase, by name.
        let start = Instant::now();
        node.run(&target.name, &mut grads)?;
        let took = start.elapsed();
        T::combine_into(ReduceOp::Sum, &mut model, &grads);
        let gathered = gather(node.communicator(), &grads, p);
        if let (Some(check), Some(results)) = (&mut check, gathered) {
            passed &= check.superstep(s, results, took)?;
        }
    }
    let models = gather(node.communicator(), &model, p);
    if let (Some(check), Some(models)) = (&check, models) {
        passed &= check.finish(&models, p);
    }
    // Every rank exits with rank 0's verdict.
    let mut verdict = u8::from(passed);
    node.communicator()
        .process_at_rank(0)
        .broadcast_into(&mut verdict);
    Ok(verdict == 1)
}

/// Every node's `data`, in rank order, on rank 0; `None` elsewhere.
fn gather<T: MpiElement>(comm: &SimpleCommunicator, data: &[T], p: usize) -> Option<Vec<Vec<T>>> {
    let root = comm.process_at_rank(0);
    // As wire values: the 16-bit floats have no MPI datatype of their own.
    let mine = T::into_wire(data.to_vec());
    if comm.rank() == 0 {
        let mut all = T::into_wire(vec![T::ZERO; data.len() * p]);
        root.gather_into_root(&mine[..], &mut all[..]);
        let all = T::from_wire(all);
        Some(
            all.chunks(data.len().max(1))
                .map(<[T]>::to_vec)
                .take(p)
                .collect(),
        )
    } else {
        root.gather_into(&mine[..]);
        None
    }
}

/// Rank 0's replay of the program in one process, and its verdicts.
struct Check<T: MpiElement> {
    schedule: VerifiedSchedule,
    phase: Phase,
    runner: InProcess<T>,
    model: Vec<Vec<T>>,
    seed: u64,
}

impl<T: MpiElement> Check<T> {
    fn new(node: &MpiNode, target: &Target, options: &Options) -> Result<Self, Failure> {
        let phase = &target.phase;
        Ok(Check {
            schedule: target.replay.clone(),
            phase: phase.clone(),
            runner: InProcess::new(&target.replay, &phase.name)?,
            model: vec![vec![T::ZERO; phase.elements as usize]; node.size()],
            seed: options.seed,
        })
    }

    fn header(&self, node: &MpiNode, phase: &Phase, options: &Options) {
        let machine = &self.schedule.schedule().machine;
        let ranks: Vec<String> = machine
            .compute_nodes()
            .enumerate()
            .map(|(r, n)| format!("{r}→{}", machine.node_name(n)))
            .collect();
        println!(
            "bsp_allreduce: machine `{}`, phase `{}` ({:?} {:?}, {}, {} elements, {} steps), \
             {} ranks, {} supersteps, seed {}, MPI tag bound {}",
            machine.name,
            phase.name,
            phase.collective,
            phase.op,
            phase.dtype,
            phase.elements,
            phase.steps,
            node.size(),
            options.supersteps,
            options.seed,
            node.tag_ub()
        );
        println!("ranks → nodes: {}", ranks.join(" "));
    }

    /// Checks superstep `s`'s results of every node against the reference and the in-process
    /// run, and updates the replayed models.
    fn superstep(&mut self, s: u64, mpi: Vec<Vec<T>>, took: Duration) -> Result<bool, Failure> {
        let machine = &self.schedule.schedule().machine;
        let p = mpi.len();
        let len = self.phase.elements as usize;
        let inputs: Vec<Vec<T>> =
            inputs::generate_all(self.phase.op, self.seed.wrapping_add(s), p, len);
        let expected = reference(machine, &self.phase, &inputs)?;
        let reference_ok = compare(machine, &self.phase, &inputs, &expected, &mpi);
        let in_process = self.runner.run(inputs)?;
        let identical = same_bits(&mpi, &in_process);
        for (model, result) in self.model.iter_mut().zip(&in_process) {
            T::combine_into(ReduceOp::Sum, model, result);
        }
        println!(
            "superstep {s}: exchange {took:.2?} on rank 0; matches the reference: {}; \
             bit-identical to the in-process run: {}",
            yes_no(reference_ok.is_ok()),
            yes_no(identical)
        );
        if let Err(e) = &reference_ok {
            println!("  {e}");
        }
        Ok(reference_ok.is_ok() && identical)
    }

    fn finish(&self, models: &[Vec<T>], p: usize) -> bool {
        let identical = same_bits(models, &self.model);
        println!(
            "final model on all {p} nodes: bit-identical to the in-process run: {}",
            yes_no(identical)
        );
        identical
    }
}

fn same_bits<T: MpiElement>(a: &[Vec<T>], b: &[Vec<T>]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| {
            x.len() == y.len()
                && x.iter()
                    .zip(y)
                    .all(|(u, v)| u.to_bits_u64() == v.to_bits_u64())
        })
}

fn yes_no(ok: bool) -> &'static str {
    if ok {
        "yes"
    } else {
        "NO"
    }
}
