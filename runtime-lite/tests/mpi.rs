//! The MPI transport under a real `mpirun`: the example `bsp_allreduce` on 8 ranks matches
//! the reference and is bit-identical to the in-process run; a wrong number of ranks and
//! misbehaving peers (`examples/mpi_faults.rs`) are reported, not hung on.
//!
//! Needs `mpirun` (or `mpiexec`) on the PATH and the examples built — `cargo test -p
//! runtime-lite --features mpi` builds them. Without `mpirun` the tests are skipped, except
//! under `CI=true`, where they fail.
#![cfg(feature = "mpi")]
#![allow(clippy::unwrap_used, clippy::panic)]

mod common;

use common::*;
use schedule_ir::serial::{self, Format};
use schedule_ir::{DType, Machine, Phase, ReduceOp};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// One MPI job at a time: the machine has few cores and the jobs oversubscribe them.
static JOBS: Mutex<()> = Mutex::new(());

/// A job that runs longer than this has hung.
const JOB_LIMIT: Duration = Duration::from_secs(300);

/// `mpirun` and the flags this MPI library needs, or `None` (after saying why) to skip.
fn launcher() -> Option<(PathBuf, Vec<&'static str>)> {
    let found = ["mpirun", "mpiexec"].iter().find_map(|name| {
        std::env::var_os("PATH").and_then(|path| {
            std::env::split_paths(&path)
                .map(|dir| dir.join(name))
                .find(|p| p.is_file())
        })
    });
    let Some(mpirun) = found else {
        let message = "mpirun/mpiexec is not on the PATH: install an MPI implementation \
                       (`apt-get install -y mpich libmpich-dev libclang-dev clang`)";
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("{message}; CI must run the MPI tests");
        }
        eprintln!("skipping the MPI test: {message}");
        return None;
    };
    let version = Command::new(&mpirun)
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    // Open MPI refuses root and more ranks than cores unless told; MPICH needs nothing.
    let flags = if version.contains("Open MPI") || version.contains("OpenRTE") {
        vec!["--allow-run-as-root", "--oversubscribe"]
    } else {
        vec![]
    };
    Some((mpirun, flags))
}

/// The path of example `name`, built next to this test.
fn example(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().and_then(Path::parent).unwrap();
    let path = dir.join("examples").join(name);
    assert!(
        path.is_file(),
        "{} is missing: build the examples first (`cargo test -p runtime-lite --features mpi` \
         builds them; `--test mpi` alone does not)",
        path.display()
    );
    path
}

/// What a job printed and how it ended.
struct Job {
    success: bool,
    stdout: String,
    stderr: String,
}

/// Runs `program args` on `ranks` ranks, killing it if it outlives [`JOB_LIMIT`].
fn mpirun(ranks: usize, program: &Path, args: &[&str]) -> Option<Job> {
    mpmd(&[(ranks, program, args)])
}

/// Runs several programs in one MPI job (`mpirun -np R1 P1 A1 : -np R2 P2 A2 …`), ranks
/// numbered in that order, killing it if it outlives [`JOB_LIMIT`].
fn mpmd(parts: &[(usize, &Path, &[&str])]) -> Option<Job> {
    let (mpirun, flags) = launcher()?;
    let _one_at_a_time = JOBS.lock().unwrap_or_else(|e| e.into_inner());
    let mut command = Command::new(mpirun);
    command.args(flags);
    for (i, (ranks, program, args)) in parts.iter().enumerate() {
        if i > 0 {
            command.arg(":");
        }
        command
            .args(["-np", &ranks.to_string()])
            .arg(program)
            .args(*args);
    }
    let shown = format!("{command:?}");
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let stdout = std::thread::spawn(move || {
        let mut s = String::new();
        out.read_to_string(&mut s).map(|_| s).unwrap_or_default()
    });
    let stderr = std::thread::spawn(move || {
        let mut s = String::new();
        err.read_to_string(&mut s).map(|_| s).unwrap_or_default()
    });
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > JOB_LIMIT {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!(
                "the MPI job hung: killed after {JOB_LIMIT:?}\nstdout:\n{}",
                stdout.join().unwrap()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let job = Job {
        success: status.success(),
        stdout: stdout.join().unwrap(),
        stderr: stderr.join().unwrap(),
    };
    eprintln!("{shown}\n{}{}", job.stdout, job.stderr);
    Some(job)
}

/// A temporary file, removed when dropped.
struct TempFile(PathBuf);

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Writes a verified schedule of `phases` on `machine` to a temporary file.
fn schedule_file(name: &str, machine: Machine, phases: Vec<Phase>) -> TempFile {
    let schedule = verified(build_schedule(machine, phases));
    let path = std::env::temp_dir().join(format!(
        "runtime-lite-mpi-{}-{name}.ron",
        std::process::id()
    ));
    std::fs::write(&path, serial::to_string(schedule.schedule(), Format::Ron)).unwrap();
    TempFile(path)
}

/// Runs `bsp_allreduce` on 8 ranks and checks that every superstep and the final model pass.
fn bsp_allreduce(schedule: &Path, extra: &[&str]) {
    let mut args = vec![schedule.to_str().unwrap(), "--timeout", "60"];
    args.extend_from_slice(extra);
    let Some(job) = mpirun(8, &example("bsp_allreduce"), &args) else {
        return;
    };
    assert!(job.success, "the job failed:\n{}{}", job.stdout, job.stderr);
    let supersteps: Vec<&str> = job
        .stdout
        .lines()
        .filter(|l| l.starts_with("superstep "))
        .collect();
    assert_eq!(supersteps.len(), 3, "{}", job.stdout);
    for line in supersteps {
        assert!(
            line.ends_with("matches the reference: yes; bit-identical to the in-process run: yes"),
            "{line}"
        );
    }
    assert!(
        job.stdout
            .contains("final model on all 8 nodes: bit-identical to the in-process run: yes"),
        "{}",
        job.stdout
    );
}

#[test]
fn eight_ranks_match_the_reference_and_the_in_process_run_bit_for_bit() {
    let file = schedule_file(
        "ring8",
        ring_machine(8),
        vec![
            bidirectional_ring_allreduce(8, "grads", ReduceOp::Sum, DType::F32, 100_003),
            pipelined_ring_allreduce(8, "stats", ReduceOp::Prod, DType::F64, 4099),
        ],
    );
    bsp_allreduce(&file.0, &[]);
    bsp_allreduce(&file.0, &["--phase", "stats", "--seed", "9"]);
}

#[test]
fn routes_through_a_switch_and_integers() {
    // Eight compute nodes around a switch: the switch has no rank.
    let file = schedule_file(
        "star8",
        star_machine(8),
        vec![star_allreduce(8, "grads", ReduceOp::Sum, DType::I32, 5000)],
    );
    bsp_allreduce(&file.0, &["--supersteps", "3"]);
}

/// A phase whose links are shared sends two messages between two ranks over one link of one
/// lane in a step: each gets its own tag.
#[test]
fn a_shared_phase_sends_more_messages_per_link_than_it_has_lanes() {
    let file = schedule_file(
        "shared8",
        star_machine(8),
        vec![shared_star_allreduce(
            8,
            "grads",
            ReduceOp::Sum,
            DType::I64,
            10_007,
        )],
    );
    bsp_allreduce(&file.0, &[]);
}

#[test]
fn sixteen_bit_floats_go_over_mpi_as_their_bits() {
    // MPI has no f16 or bf16 datatype: the messages carry the bit patterns, and the result
    // must still be the in-process run's, bit for bit.
    let file = schedule_file(
        "half8",
        ring_machine(8),
        vec![
            bidirectional_ring_allreduce(8, "grads", ReduceOp::Sum, DType::F16, 10_007),
            pipelined_ring_allreduce(8, "stats", ReduceOp::Sum, DType::BF16, 4099),
        ],
    );
    bsp_allreduce(&file.0, &[]);
    bsp_allreduce(&file.0, &["--phase", "stats"]);
}

#[test]
fn a_wrong_number_of_ranks_is_an_error() {
    let file = schedule_file(
        "ranks",
        ring_machine(8),
        vec![ring_allreduce(8, "grads", ReduceOp::Sum, DType::F32, 64)],
    );
    let Some(job) = mpirun(3, &example("bsp_allreduce"), &[file.0.to_str().unwrap()]) else {
        return;
    };
    assert!(!job.success);
    assert!(
        job.stderr.contains(
            "error: the MPI job has 3 ranks but machine `ring-8` has 8 compute nodes: run one \
             rank per compute node (`mpirun -np 8 …`)"
        ),
        "{}",
        job.stderr
    );
}

#[test]
fn a_banded_exchange_runs_the_band_that_holds_the_buffers_size() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../schedule-ir/tests/good/bands-ring3.ron"
    );
    // f32: 100 elements are 400 bytes (the first band), 5000 are 20000 bytes (the second).
    for (elements, band) in [("100", "grads@120B"), ("5000", "grads@12000B")] {
        let args = [
            path,
            "--phase",
            "grads",
            "--elements",
            elements,
            "--timeout",
            "60",
        ];
        let Some(job) = mpirun(3, &example("bsp_allreduce"), &args) else {
            return;
        };
        assert!(job.success, "the job failed:\n{}{}", job.stdout, job.stderr);
        assert!(
            job.stdout.contains(&format!("phase `{band}`"))
                && job.stdout.contains(&format!("{elements} elements")),
            "{}",
            job.stdout
        );
        let passed = job
            .stdout
            .lines()
            .filter(|l| {
                l.starts_with("superstep ")
                    && l.ends_with(
                        "matches the reference: yes; bit-identical to the in-process run: yes",
                    )
            })
            .count();
        assert_eq!(passed, 3, "{}", job.stdout);
        assert!(
            job.stdout
                .contains("final model on all 3 nodes: bit-identical to the in-process run: yes"),
            "{}",
            job.stdout
        );
    }
}

/// Runs `mpi_faults mode` on 4 ranks and returns each rank's report, in rank order.
fn faults(mode: &str) -> Option<Vec<String>> {
    let job = mpirun(4, &example("mpi_faults"), &[mode])?;
    assert!(job.success, "{}{}", job.stdout, job.stderr);
    Some(
        (0..4)
            .map(|r| {
                let prefix = format!("rank {r}: ");
                job.stdout
                    .lines()
                    .find_map(|l| l.strip_prefix(&prefix))
                    .unwrap_or_else(|| panic!("rank {r} reported nothing:\n{}", job.stdout))
                    .to_string()
            })
            .collect(),
    )
}

/// Every rank other than `except` reports an error naming the phase and its node.
fn all_failed(reports: &[String], except: usize) {
    for (r, report) in reports.iter().enumerate().filter(|(r, _)| *r != except) {
        assert!(
            report.starts_with("error: phase `grads`") && report.contains(&format!("N{r}")),
            "rank {r}: {report}"
        );
    }
}

#[test]
fn a_message_of_the_wrong_size_is_reported() {
    let Some(reports) = faults("wrong-size") else {
        return;
    };
    assert_eq!(
        reports[2],
        "error: phase `grads`, step 0: node N2 received 251 elements from N1 over link L1, but \
         the receive expects 250"
    );
    assert_eq!(
        reports[1],
        "error: phase `grads`, step 0: node N1 received 250 elements from N0 over link L0, but \
         the receive expects 251"
    );
    all_failed(&reports, usize::MAX);
}

#[test]
fn a_message_of_another_element_type_is_reported() {
    let Some(reports) = faults("ragged") else {
        return;
    };
    assert_eq!(
        reports[2],
        "error: phase `grads`, step 0: the transport failed on node N2: the message from N1 \
         (rank 1) over link L1 has 1004 bytes, not a whole number of 8-byte elements: the \
         sender runs a phase of another element type"
    );
    all_failed(&reports, usize::MAX);
}

#[test]
fn a_silent_peer_times_out_with_the_phase_step_and_node() {
    let Some(reports) = faults("silent-peer") else {
        return;
    };
    assert_eq!(reports[1], "silent");
    // N0 sends a large message to N1, which never takes it.
    assert!(
        reports[0].starts_with(
            "error: phase `grads`, step 0: the transport failed on node N0: N1 (rank 1) did not \
             take the message sent to it over link L0 within 2"
        ),
        "{}",
        reports[0]
    );
    // N2 waits for N1's message.
    assert!(
        reports[2].starts_with(
            "error: phase `grads`, step 0: the transport failed on node N2: no message from N1 \
             (rank 1) over link L1 arrived within 2"
        ),
        "{}",
        reports[2]
    );
    all_failed(&reports, 1);
}

#[test]
fn a_buffer_of_the_wrong_length_is_reported() {
    let Some(reports) = faults("wrong-length") else {
        return;
    };
    assert_eq!(
        reports[1],
        "error: phase `grads`: the buffer of node N1 has 999 elements but the phase works on 1000"
    );
    // The others learn of it before the first message, not after a timeout.
    assert_eq!(
        reports[0],
        "error: phase `grads`: node N0 and N1 (rank 1) cannot run it together: its buffer has \
         999 elements but the phase works on 1000 (it reports why)"
    );
    all_failed(&reports, usize::MAX);
}

#[test]
fn a_vanished_peer_ends_the_job_instead_of_hanging() {
    let Some(job) = mpirun(4, &example("mpi_faults"), &["vanish"]) else {
        return;
    };
    // The launcher notices the rank that exited without finalising and ends the job; the
    // other ranks are killed or report a timeout, and nothing hangs (see `mpirun`'s limit).
    assert!(!job.success, "{}{}", job.stdout, job.stderr);
    assert!(job.stdout.contains("rank 1: vanishing"), "{}", job.stdout);
}

#[test]
fn a_rank_that_cannot_set_up_stops_every_rank() {
    let Some(reports) = faults("setup") else {
        return;
    };
    assert_eq!(
        reports[1],
        "error: the MPI job has 4 ranks but machine `ring-5` has 5 compute nodes: run one rank \
         per compute node (`mpirun -np 5 …`)"
    );
    for r in [0, 2, 3] {
        assert_eq!(
            reports[r],
            "error: another rank could not set up its node (it reports why), so this rank does \
             not go on"
        );
    }
}

#[test]
fn ranks_given_different_schedules_all_fail_naming_what_differs() {
    let Some(reports) = faults("other-schedule") else {
        return;
    };
    for (r, report) in reports.iter().enumerate() {
        let peer = if r == 1 { 0 } else { 1 };
        assert!(
            report.starts_with(&format!(
                "error: the ranks were given different schedules: node N{r} (rank {r}) and rank \
                 {peer} differ in the phases' collective, op, element type or length (schedule \
                 digest "
            )),
            "rank {r}: {report}"
        );
        assert!(
            report.ends_with("); start every rank with the same schedule"),
            "{report}"
        );
    }
}

/// The finding: `bsp_allreduce` started with a sum schedule on one rank and a max schedule of
/// the same machine and size on three reported success on every rank. Now every rank fails
/// before the first message.
#[test]
fn an_mpmd_job_with_two_schedules_fails_on_every_rank() {
    let sum = schedule_file(
        "ring4-sum",
        ring_machine(4),
        vec![ring_allreduce(4, "grads", ReduceOp::Sum, DType::F32, 1000)],
    );
    let max = schedule_file(
        "ring4-max",
        ring_machine(4),
        vec![ring_allreduce(4, "grads", ReduceOp::Max, DType::F32, 1000)],
    );
    let program = example("bsp_allreduce");
    let (a, b) = (sum.0.to_str().unwrap(), max.0.to_str().unwrap());
    let Some(job) = mpmd(&[(1, &program, &[a]), (3, &program, &[b])]) else {
        return;
    };
    assert!(!job.success, "{}{}", job.stdout, job.stderr);
    assert!(!job.stdout.contains("superstep"), "{}", job.stdout);
    for r in 0..4 {
        assert!(
            job.stderr.contains(&format!(
                "bsp_allreduce: rank {r}: error: the ranks were given different schedules: node \
                 N{r} (rank {r}) and rank {}",
                if r == 0 { 1 } else { 0 }
            )),
            "rank {r}:\n{}",
            job.stderr
        );
    }
}

#[test]
fn ranks_running_different_phases_all_fail_before_the_first_message() {
    let Some(reports) = faults("other-phase") else {
        return;
    };
    assert_eq!(
        reports[0],
        "error: phase `grads`: node N0 and N1 (rank 1) cannot run it together: that rank runs \
         another phase"
    );
    assert_eq!(
        reports[1],
        "error: phase `b`: node N1 and N0 (rank 0) cannot run it together: that rank runs \
         another phase"
    );
    all_failed(&reports, 1);
}

#[test]
fn a_rank_that_does_not_run_the_phase_is_reported_while_agreeing() {
    let Some(reports) = faults("silent-agree") else {
        return;
    };
    assert_eq!(reports[1], "silent");
    for r in [0, 2, 3] {
        assert!(
            reports[r].starts_with(&format!(
                "error: phase `grads`: node N{r} heard nothing from N1 (rank 1) within 2"
            )),
            "{}",
            reports[r]
        );
    }
}

#[test]
fn an_in_network_schedule_is_refused_at_set_up_naming_the_device() {
    let Some(reports) = faults("device") else {
        return;
    };
    for report in &reports {
        assert_eq!(
            report,
            "error: phase `grads`: device NIC0 runs a program (it reduces in the network), but \
             under MPI only compute nodes run, one per rank, so nothing would run it: run the \
             schedule in one process (`topoc run`, `runtime_lite::run_phase`), or compile it for \
             MPI without reducing devices"
        );
    }
}

/// The finding: a verified schedule of 2⁴⁶ elements made `bsp_allreduce` allocate its vectors
/// before the runtime's size check, and abort. Now every rank stops while setting up.
#[test]
fn a_vector_past_the_memory_budget_stops_every_rank_before_allocating() {
    let file = schedule_file(
        "huge",
        ring_machine(4),
        vec![ring_allreduce(
            4,
            "grads",
            ReduceOp::Sum,
            DType::F32,
            1 << 46,
        )],
    );
    let Some(job) = mpirun(4, &example("bsp_allreduce"), &[file.0.to_str().unwrap()]) else {
        return;
    };
    assert!(!job.success);
    assert!(
        job.stderr.contains(
            "bsp_allreduce: rank 1: error: phase `grads` needs about 576.0 TiB of memory to run \
             (data 256.0 TiB on 1 node(s), scratch 0 B, messages 64.0 TiB, copies held beside \
             the run 256.0 TiB)"
        ),
        "{}",
        job.stderr
    );
    assert!(!job.stderr.contains("memory allocation"), "{}", job.stderr);
}
