//! The process that runs inside a compute node's namespace: `topoc lab node` (one node's
//! part of a phase over its links, timed between the launcher's go signals) and `topoc lab
//! pingpong` (the calibration's two ends).
//!
//! A node talks to the launcher over its standard input and output, one line each way:
//! it prints `ready` once connected, then for each `go` it reads runs the phase and prints
//! `done SECONDS`; at the end it prints `hash HEX` (of its result) and exits. Errors go to
//! standard error and end the process with status 1.

use runtime_lite::link::{LinkNode, Wiring};
use runtime_lite::AnyBuffer;
use std::io::{BufRead, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::time::{Duration, Instant};

/// What a node process is asked to do.
pub struct NodeJob<'a> {
    pub schedule: &'a Path,
    pub wiring: &'a Path,
    pub node: &'a str,
    pub phase: &'a str,
    pub seed: u64,
    pub runs: usize,
    pub timeout: Duration,
}

/// Runs one compute node: connect, then one timed run of the phase per `go`.
pub fn node(job: &NodeJob<'_>) -> Result<(), String> {
    let text = std::fs::read_to_string(job.schedule)
        .map_err(|e| format!("cannot read {}: {e}", job.schedule.display()))?;
    let schedule = runtime_lite::load(&text).map_err(|e| e.to_string())?;
    let wiring_text = std::fs::read_to_string(job.wiring)
        .map_err(|e| format!("cannot read {}: {e}", job.wiring.display()))?;
    let wiring = Wiring::parse(&wiring_text).map_err(|e| e.to_string())?;
    let id = runtime_lite::find_node(&schedule, job.node).map_err(|e| e.to_string())?;
    let position = schedule
        .schedule()
        .machine
        .compute_nodes()
        .position(|n| n == id)
        .ok_or_else(|| format!("`{}` is not a compute node", job.node))?;
    let phase = schedule
        .schedule()
        .phase(job.phase)
        .ok_or_else(|| format!("the schedule has no phase `{}`", job.phase))?
        .clone();
    let len = usize::try_from(phase.elements).map_err(|e| e.to_string())?;
    let input = runtime_lite::inputs::generate_any(phase.dtype, phase.op, job.seed, position, len);
    let mut link =
        LinkNode::connect(schedule, &wiring, id, job.timeout).map_err(|e| e.to_string())?;
    let mut data = input.clone();
    let mut last = None;
    let mut out = std::io::stdout().lock();
    let mut lines = std::io::stdin().lock().lines();
    say(&mut out, "ready")?;
    for _ in 0..job.runs {
        match lines.next() {
            Some(Ok(line)) if line == "go" => {}
            other => return Err(format!("the launcher said {other:?} instead of go")),
        }
        let start = Instant::now();
        link.run_any(job.phase, &mut data)
            .map_err(|e| e.to_string())?;
        let seconds = start.elapsed().as_secs_f64();
        // The next run starts from the input again; the result is kept for the hash.
        last = Some(std::mem::replace(&mut data, input.clone()));
        say(&mut out, &format!("done {seconds:.9}"))?;
    }
    let hash = last.as_ref().map_or(0, hash_buffer);
    say(&mut out, &format!("hash {hash:016x}"))
}

fn say(out: &mut impl Write, line: &str) -> Result<(), String> {
    writeln!(out, "{line}")
        .and_then(|()| out.flush())
        .map_err(|e| format!("the launcher went away: {e}"))
}

/// FNV-1a over the little-endian bytes of the elements: the launcher compares it with the
/// hash of the in-process run's result.
pub fn hash_buffer(buffer: &AnyBuffer) -> u64 {
    let mut bytes = Vec::new();
    match buffer {
        AnyBuffer::F32(v) => runtime_lite::Element::write_le_bytes(v, &mut bytes),
        AnyBuffer::F64(v) => runtime_lite::Element::write_le_bytes(v, &mut bytes),
        AnyBuffer::I32(v) => runtime_lite::Element::write_le_bytes(v, &mut bytes),
        AnyBuffer::I64(v) => runtime_lite::Element::write_le_bytes(v, &mut bytes),
        AnyBuffer::F16(v) => runtime_lite::Element::write_le_bytes(v, &mut bytes),
        AnyBuffer::BF16(v) => runtime_lite::Element::write_le_bytes(v, &mut bytes),
    }
    hash_bytes(&bytes)
}

/// FNV-1a, 64 bits.
pub fn hash_bytes(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The echo end of the ping-pong: accepts one connection on `listen` and sends every message
/// back once it has it whole (a 8-byte length, then the bytes), until the peer closes.
pub fn pong(listen: SocketAddr, timeout: Duration) -> Result<(), String> {
    let listener =
        TcpListener::bind(listen).map_err(|e| format!("cannot listen on {listen}: {e}"))?;
    println!("ready");
    std::io::stdout().flush().map_err(|e| e.to_string())?;
    let (mut s, _) = listener.accept().map_err(|e| e.to_string())?;
    s.set_nodelay(true).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(timeout))
        .map_err(|e| e.to_string())?;
    let mut buffer = Vec::new();
    loop {
        let mut len = [0u8; 8];
        if s.read_exact(&mut len).is_err() {
            return Ok(());
        }
        let n = u64::from_le_bytes(len);
        if n > MAX_PING {
            return Err(format!(
                "a ping of {n} bytes is larger than the largest ({MAX_PING})"
            ));
        }
        buffer.resize(usize::try_from(n).unwrap_or(0), 0);
        s.read_exact(&mut buffer).map_err(|e| e.to_string())?;
        s.write_all(&len)
            .and_then(|()| s.write_all(&buffer))
            .map_err(|e| e.to_string())?;
    }
}

/// The largest ping-pong message: bounds what the echo end allocates.
pub const MAX_PING: u64 = 64 << 20;

/// What the measuring end sends: 64 bytes (for α) and 4 MiB (for the rate), with how many
/// round trips of each.
const PINGS: [(u64, usize); 2] = [(64, 50), (4 << 20, 4)];

/// The measuring end: round trips to `peer`; prints `rtt SIZE SECONDS` with the fastest
/// round trip of each size of [`PINGS`].
pub fn ping(peer: SocketAddr, timeout: Duration) -> Result<(), String> {
    let deadline = Instant::now() + timeout;
    let mut s = loop {
        match TcpStream::connect_timeout(&peer, Duration::from_secs(1)) {
            Ok(s) => break s,
            Err(e) if Instant::now() >= deadline => {
                return Err(format!("cannot connect to {peer}: {e}"))
            }
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    };
    s.set_nodelay(true).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(timeout))
        .map_err(|e| e.to_string())?;
    let mut back = Vec::new();
    for (size, reps) in PINGS {
        let message = vec![0x5au8; usize::try_from(size).unwrap_or(0)];
        let mut best = f64::INFINITY;
        for _ in 0..reps {
            let start = Instant::now();
            s.write_all(&size.to_le_bytes())
                .and_then(|()| s.write_all(&message))
                .map_err(|e| e.to_string())?;
            let mut len = [0u8; 8];
            s.read_exact(&mut len).map_err(|e| e.to_string())?;
            back.resize(message.len(), 0);
            s.read_exact(&mut back).map_err(|e| e.to_string())?;
            best = best.min(start.elapsed().as_secs_f64());
        }
        println!("rtt {size} {best:.9}");
    }
    Ok(())
}
