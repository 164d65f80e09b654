//! The baseline: `MPI_Allreduce` of MPICH over the same emulated links, with ordinary IP
//! routing along shortest paths between per-node addresses — what a user runs today on such
//! a network. One rank per compute node, each started inside its node's namespace by
//! MPICH's own launcher (`mpiexec -launcher fork`, every rank wrapped in `ip netns exec`);
//! MPICH's shared memory is off (`MPIR_CVAR_NOLOCAL=1`) and UCX speaks TCP only, from the
//! node address, so every byte crosses the shaped veths. UCX's rendezvous protocol stalls
//! over TCP on routed paths in these namespaces, so every message goes eager
//! (`UCX_RNDV_THRESH=inf`).

use super::launch::{Procs, Spec};
use super::plan::NetPlan;
use schedule_ir::Machine;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// The baseline program's source, compiled with `mpicc` into the lab's directory.
const SOURCE: &str = include_str!("../../../lab/mpi_allreduce.c");

/// Compiles the baseline program into `dir`.
pub fn build(dir: &Path) -> Result<PathBuf, String> {
    let src = dir.join("mpi_allreduce.c");
    let exe = dir.join("mpi_allreduce");
    std::fs::write(&src, SOURCE).map_err(|e| format!("cannot write {}: {e}", src.display()))?;
    let out = Command::new("mpicc")
        .args(["-O2", "-o"])
        .arg(&exe)
        .arg(&src)
        .output()
        .map_err(|e| format!("cannot run mpicc (apt-get install -y mpich libmpich-dev): {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "mpicc failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(exe)
}

/// Runs `MPI_Allreduce` of `elements` `f32`s on every compute node, one warm-up and `runs`
/// timed runs; returns the timed runs' durations (the slowest rank's, each).
#[allow(clippy::too_many_arguments)]
pub fn run(
    nice: i32,
    net: &NetPlan,
    machine: &Machine,
    program: &Path,
    dir: &Path,
    elements: u64,
    runs: usize,
    timeout: Duration,
) -> Result<Vec<f64>, String> {
    let mut args: Vec<String> = vec!["-launcher".into(), "fork".into()];
    for (k, n) in machine.compute_nodes().enumerate() {
        if k > 0 {
            args.push(":".into());
        }
        args.extend(
            ["-n", "1", "ip", "netns", "exec", net.namespaces[n].as_str()].map(String::from),
        );
        args.push(program.display().to_string());
        args.push(elements.to_string());
        args.push(runs.to_string());
    }
    let spec = Spec {
        name: "MPI_Allreduce".into(),
        namespace: String::new(),
        program: PathBuf::from("mpiexec"),
        args,
        nice,
    };
    let env = [
        ("MPIR_CVAR_NOLOCAL", "1"),
        ("UCX_TLS", "tcp,self"),
        ("UCX_NET_DEVICES", "lo"),
        // UCX's rendezvous over TCP stalls on routed paths here; eager sends do not.
        ("UCX_RNDV_THRESH", "inf"),
    ];
    let mut procs = Procs::spawn_with_env(&[spec], dir, &env)?;
    let mut times = Vec::new();
    for _ in 0..runs {
        let line = procs.expect("done", timeout)?;
        let t: f64 = line
            .first()
            .and_then(|t| t.parse().ok())
            .ok_or_else(|| format!("MPI_Allreduce printed `done {line:?}`"))?;
        times.push(t);
    }
    let check = procs.expect("check", timeout)?;
    // MPICH over UCX's TCP can hang in `MPI_Finalize` here after the work is done and
    // checked; ending the job through `mpiexec` ends every rank.
    procs.terminate(Duration::from_secs(5));
    if check.first().map(String::as_str) != Some("ok") {
        return Err("MPI_Allreduce's result is wrong".into());
    }
    Ok(times)
}
