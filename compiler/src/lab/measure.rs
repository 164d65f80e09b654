//! One lab session: build the network, calibrate it with a ping-pong, run the schedule at
//! each size (timed, checked against the reference and bit for bit against the in-process
//! run), optionally run the baseline alternately, and set each time beside the cost model's.

use super::launch::{Procs, Spec};
use super::plan::NetPlan;
use runtime_lite::Buffers;
use schedule_ir::{LinkId, Machine, NodeId, Phase, VerifiedSchedule};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What the lab measured on one link with the ping-pong.
#[derive(Clone, Debug, Serialize)]
pub struct Calibration {
    /// The link (or the two links through a switch) measured.
    pub path: String,
    /// Half the fastest round trip of a 64-byte message: the lab's α, seconds.
    pub alpha_seconds: f64,
    /// Bits per second a 4 MiB message moved at, one way, α removed.
    pub measured_bits: f64,
    /// The rate the link is shaped to.
    pub shaped_bits: f64,
}

impl Calibration {
    /// Measured over shaped rate: what the lab's links deliver of what they are given.
    pub fn efficiency(&self) -> f64 {
        if self.shaped_bits > 0.0 {
            self.measured_bits / self.shaped_bits
        } else {
            1.0
        }
    }
}

/// The figures of one message size.
#[derive(Clone, Debug, Serialize)]
pub struct SizeRow {
    pub bytes: u64,
    /// The phase that ran at this size (a band's, when the exchange is banded) and its method.
    pub phase: String,
    pub algorithm: String,
    /// Median and fastest of the timed runs, seconds (the first, warm-up run is not counted).
    pub median_seconds: f64,
    pub min_seconds: f64,
    /// The cost model on the scaled links with the file's latencies.
    pub estimate_seconds: f64,
    /// The cost model on the calibrated links: the lab's α, the scaled bandwidths times the
    /// measured efficiency.
    pub calibrated_seconds: f64,
    /// The same size's baseline (median), when one ran.
    pub baseline_seconds: Option<f64>,
    /// Every node's result matched the reference and the in-process run bit for bit
    /// (`None`: not checked, the inputs would not fit the launcher's memory budget).
    pub checked: Option<bool>,
}

/// Everything the launcher needs for one run of node processes.
pub struct Session<'a> {
    pub net: &'a NetPlan,
    pub dir: &'a Path,
    pub exe: PathBuf,
    pub machine: &'a Machine,
    pub seed: u64,
    pub runs: usize,
    /// Scheduling priority of every process the lab starts (`nice -n`).
    pub nice: i32,
}

/// The inputs the launcher checks in process at most: above it the check is skipped.
const CHECK_BYTES: u128 = 1 << 30;

impl Session<'_> {
    /// Runs `phase` of `schedule` on every compute node over the links, `runs + 1` times
    /// (the first a warm-up); returns the timed runs' durations (the slowest node's, each)
    /// and each node's result hash, in compute-node order.
    pub fn run_schedule(
        &self,
        schedule: &VerifiedSchedule,
        phase: &str,
        timeout: Duration,
    ) -> Result<(Vec<f64>, Vec<u64>), String> {
        let sched_path = self.dir.join("schedule.ron");
        let text =
            schedule_ir::serial::to_string(schedule.schedule(), schedule_ir::serial::Format::Ron);
        std::fs::write(&sched_path, text).map_err(|e| format!("cannot write the schedule: {e}"))?;
        let wiring_path = self.dir.join("wiring.ron");
        let specs: Vec<Spec> = self
            .machine
            .compute_nodes()
            .map(|n| Spec {
                name: self.machine.node_name(n),
                namespace: self.net.namespaces[n].clone(),
                program: self.exe.clone(),
                nice: self.nice,
                args: vec![
                    "lab".into(),
                    "node".into(),
                    "--schedule".into(),
                    sched_path.display().to_string(),
                    "--wiring".into(),
                    wiring_path.display().to_string(),
                    "--node".into(),
                    self.machine.node_name(n),
                    "--phase".into(),
                    phase.into(),
                    "--seed".into(),
                    self.seed.to_string(),
                    "--runs".into(),
                    (self.runs + 1).to_string(),
                    "--timeout".into(),
                    timeout.as_secs().max(1).to_string(),
                ],
            })
            .collect();
        let mut procs = Procs::spawn(&specs, self.dir)?;
        procs.expect("ready", timeout)?;
        let mut times = Vec::new();
        for run in 0..=self.runs {
            procs.tell("go")?;
            let done = procs.expect("done", timeout)?;
            let slowest = done
                .iter()
                .map(|t| t.parse::<f64>().unwrap_or(f64::INFINITY))
                .fold(0.0, f64::max);
            if run > 0 {
                times.push(slowest);
            }
        }
        let hashes = procs
            .expect("hash", timeout)?
            .iter()
            .map(|h| u64::from_str_radix(h, 16).unwrap_or(0))
            .collect();
        procs.finish(timeout)?;
        Ok((times, hashes))
    }
}

/// Checks node results (as hashes) against the in-process run of the same inputs, and that
/// run against the reference reduction. `None` when the inputs are too large to check here.
pub fn check(
    schedule: &VerifiedSchedule,
    phase: &Phase,
    seed: u64,
    hashes: &[u64],
) -> Result<Option<bool>, String> {
    let machine = &schedule.schedule().machine;
    let nodes = machine.compute_nodes().count();
    let bytes = u128::from(phase.elements) * nodes as u128 * u128::from(phase.dtype.size_bytes());
    if bytes > CHECK_BYTES {
        return Ok(None);
    }
    let len = usize::try_from(phase.elements).map_err(|e| e.to_string())?;
    let inputs = generate_all(phase, seed, nodes, len);
    let fail = |e: runtime_lite::Error| format!("in-process run of phase `{}`: {e}", phase.name);
    let outputs =
        runtime_lite::run_phase_any(schedule, &phase.name, inputs.clone()).map_err(fail)?;
    let expected = runtime_lite::reference_any(machine, phase, &inputs).map_err(fail)?;
    runtime_lite::compare_any(machine, phase, &inputs, &expected, &outputs).map_err(fail)?;
    let local = hashes_of(&outputs);
    Ok(Some(local == hashes))
}

fn generate_all(phase: &Phase, seed: u64, nodes: usize, len: usize) -> Buffers {
    use runtime_lite::inputs::generate_all as g;
    match phase.dtype {
        schedule_ir::DType::F32 => Buffers::F32(g(phase.op, seed, nodes, len)),
        schedule_ir::DType::F64 => Buffers::F64(g(phase.op, seed, nodes, len)),
        schedule_ir::DType::I32 => Buffers::I32(g(phase.op, seed, nodes, len)),
        schedule_ir::DType::I64 => Buffers::I64(g(phase.op, seed, nodes, len)),
        schedule_ir::DType::F16 => Buffers::F16(g(phase.op, seed, nodes, len)),
        schedule_ir::DType::BF16 => Buffers::BF16(g(phase.op, seed, nodes, len)),
    }
}

fn hashes_of(buffers: &Buffers) -> Vec<u64> {
    fn each<T: runtime_lite::Element>(v: &[Vec<T>]) -> Vec<u64> {
        v.iter()
            .map(|x| {
                let mut bytes = Vec::new();
                T::write_le_bytes(x, &mut bytes);
                super::node::hash_bytes(&bytes)
            })
            .collect()
    }
    match buffers {
        Buffers::F32(v) => each(v),
        Buffers::F64(v) => each(v),
        Buffers::I32(v) => each(v),
        Buffers::I64(v) => each(v),
        Buffers::F16(v) => each(v),
        Buffers::BF16(v) => each(v),
    }
}

/// The median of `v` (0 when empty).
pub fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    match s.len() {
        0 => 0.0,
        n if n % 2 == 1 => s[n / 2],
        n => (s[n / 2 - 1] + s[n / 2]) / 2.0,
    }
}

/// `machine` as the lab runs it: every bandwidth times `scale · efficiency`, and, when
/// `alpha` is given, every latency replaced by it.
pub fn lab_machine(machine: &Machine, scale: f64, efficiency: f64, alpha: Option<f64>) -> Machine {
    let mut m = machine.clone();
    for l in &mut m.links {
        l.bandwidth_gbps *= scale * efficiency;
        if let Some(a) = alpha {
            l.latency_us = a * 1e6;
        }
    }
    m
}

/// Measures α and the delivered rate between the ends of the first link joining two compute
/// nodes (or two compute nodes on the same switch), with `topoc lab ping`/`pong`.
pub fn calibrate(s: &Session<'_>, timeout: Duration) -> Result<Calibration, String> {
    let m = s.machine;
    let compute: Vec<_> = m.compute_nodes().collect();
    // The plan's tables cover every node and link of the machine it was made for.
    let net = s.net;
    let direct = net
        .ends
        .iter_enumerated()
        .find(|&(_, &(a, b))| !net.switch[a] && !net.switch[b]);
    let (a, b, _a_addr, b_addr, path, rate) = if let Some((i, &(a, b))) = direct {
        let (Some((pa, _)), Some((pb, _))) = (net.links[i].address[0], net.links[i].address[1])
        else {
            return Err(format!("link `{}` has no addresses", m.link_name(i)));
        };
        let path = format!("link {}", m.link_name(i));
        (a, b, pa, pb, path, net.links[i].rate_bits)
    } else {
        // Two compute nodes on the same switch: their single links.
        let first_link = |n: NodeId| {
            net.ends
                .iter_enumerated()
                .find(|&(_, &(a, b))| a == n || b == n)
                .map(|(l, _)| l)
                .ok_or_else(|| format!("`{}` has no link", m.node_name(n)))
        };
        let (&x, &y) = match (compute.first(), compute.get(1)) {
            (Some(x), Some(y)) => (x, y),
            _ => return Err("the machine needs two compute nodes to calibrate".into()),
        };
        let (lx, ly) = (first_link(x)?, first_link(y)?);
        let addr = |l: LinkId, n: NodeId| {
            let side = usize::from(net.ends[l].0 != n);
            net.links[l].address[side].map(|(ip, _)| ip)
        };
        let (Some(ax), Some(ay)) = (addr(lx, x), addr(ly, y)) else {
            return Err("no addresses to calibrate between".into());
        };
        let rate = net.links[lx].rate_bits.min(net.links[ly].rate_bits);
        let path = format!(
            "links {} and {} through their switch",
            m.link_name(lx),
            m.link_name(ly)
        );
        (x, y, ax, ay, path, rate)
    };
    let port = (super::plan::PORT + 1).to_string();
    let pong = Spec {
        name: format!("{} (pong)", m.node_name(b)),
        namespace: net.namespaces[b].clone(),
        program: s.exe.clone(),
        nice: s.nice,
        args: vec!["lab".into(), "pong".into(), format!("{b_addr}:{port}")],
    };
    let mut server = Procs::spawn(&[pong], s.dir)?;
    server.expect("ready", timeout)?;
    let ping = Spec {
        name: format!("{} (ping)", m.node_name(a)),
        namespace: net.namespaces[a].clone(),
        program: s.exe.clone(),
        nice: s.nice,
        args: vec!["lab".into(), "ping".into(), format!("{b_addr}:{port}")],
    };
    let mut client = Procs::spawn(&[ping], s.dir)?;
    let small = client.expect("rtt", timeout)?;
    let large = client.expect("rtt", timeout)?;
    client.finish(timeout)?;
    server.finish(timeout)?;
    let parse = |v: &[String]| -> Result<(f64, f64), String> {
        let line = v.first().cloned().unwrap_or_default();
        let mut it = line.split_whitespace().map(str::parse::<f64>);
        match (it.next(), it.next()) {
            (Some(Ok(size)), Some(Ok(rtt))) => Ok((size, rtt)),
            _ => Err(format!("the ping-pong printed `{line}`")),
        }
    };
    let ((_, rtt_small), (size, rtt_large)) = (parse(&small)?, parse(&large)?);
    let alpha = rtt_small / 2.0;
    let one_way = (rtt_large / 2.0 - alpha).max(1e-9);
    Ok(Calibration {
        path,
        alpha_seconds: alpha,
        measured_bits: size * 8.0 / one_way,
        shaped_bits: rate as f64,
    })
}
