//! Makes one rank misbehave on purpose and prints what every rank's runtime reports, one line
//! per rank: `rank R: ok`, `rank R: silent` or `rank R: error: …`. Run by `tests/mpi.rs`
//! with 4 ranks; each run exits 0 once every rank has reported.
//!
//! ```sh
//! mpirun -np 4 target/debug/examples/mpi_faults MODE
//! ```
//!
//! On a ring allreduce of `p` nodes (one per rank), rank 1
//! - `wrong-size`: runs the phase compiled for 1004 elements where the others have 1000, so
//!   its messages are one element too long;
//! - `ragged`: runs an `f32` phase of 1004 elements where the others run `f64`, so its
//!   messages are no whole number of `f64`;
//! - `silent-peer`: does not run the phase at all (the messages are large, so its peers also
//!   wait for it to take theirs);
//!
//! (those three use the transport directly — [`MpiTransport`] with the node executor, which
//! do not agree on the schedule first — to show that the transport's own checks hold);
//! and, through [`MpiNode`], rank 1
//! - `wrong-length`: passes a buffer one element short;
//! - `other-schedule`: loads the same machine and phase with `max` where the others have `sum`;
//! - `other-phase`: runs phase `b` of the schedule where the others run `grads`;
//! - `silent-agree`: does not run the phase at all;
//! - `vanish`: exits (status 3) without finalising MPI instead of running the phase — the
//!   launcher then ends the whole job, which exits non-zero rather than hanging;
//! - `setup`: loads a schedule for a machine of `p + 1` nodes, so it cannot take a node, and
//!   the others, whose setup is fine, must not be left waiting for it;
//!
//! and `device`: every rank loads an in-network schedule (a reducing switch `NIC0` with a
//! program), which no rank can run.
//!
//! The timeout is 2 s, so the other ranks report within a few seconds.
#![allow(clippy::unwrap_used, clippy::panic)]

#[path = "../tests/common/mod.rs"]
mod common;

use mpi::topology::Communicator;
use mpi::traits::CommunicatorCollectives;
use runtime_lite::mpi::{MpiNode, MpiTransport};
use runtime_lite::AnyBuffer;
use schedule_ir::{DType, ReduceOp};
use std::time::Duration;

const MODES: &str = "wrong-size|ragged|silent-peer|wrong-length|other-schedule|other-phase|\
                     silent-agree|vanish|setup|device";

fn main() {
    let universe = mpi::initialize().unwrap();
    let world = universe.world();
    let rank = world.rank() as usize;
    let p = world.size() as usize;
    let mode = std::env::args().nth(1).unwrap_or_default();
    let odd = rank == 1;
    let (dtype, elements) = match mode.as_str() {
        "wrong-size" if odd => (DType::F32, 1004),
        "ragged" if odd => (DType::F32, 1004),
        "ragged" => (DType::F64, 1000),
        "silent-peer" => (DType::F32, 1 << 20),
        "wrong-size" | "wrong-length" | "other-schedule" | "other-phase" | "silent-agree"
        | "vanish" | "setup" | "device" => (DType::F32, 1000),
        _ => panic!("usage: mpi_faults {MODES}"),
    };
    let nodes = if odd && mode == "setup" { p + 1 } else { p };
    let op = if odd && mode == "other-schedule" {
        ReduceOp::Max
    } else {
        ReduceOp::Sum
    };
    let schedule = match mode.as_str() {
        "device" => common::verified_one(
            common::in_network_machine(p),
            common::in_network_allreduce(p, "grads", elements),
        ),
        "other-phase" => common::verified(common::build_schedule(
            common::ring_machine(nodes),
            vec![
                common::ring_allreduce(nodes, "grads", op, dtype, elements),
                common::ring_allreduce(nodes, "b", op, dtype, elements),
            ],
        )),
        _ => common::verified_one(
            common::ring_machine(nodes),
            common::ring_allreduce(nodes, "grads", op, dtype, elements),
        ),
    };
    let mut data = AnyBuffer::zeros(dtype, elements as usize);
    if odd && mode == "wrong-length" {
        data = AnyBuffer::zeros(dtype, elements as usize - 1);
    }
    let timeout = Some(Duration::from_secs(2));
    if matches!(mode.as_str(), "wrong-size" | "ragged" | "silent-peer") {
        let comm = world.duplicate();
        let report = if odd && mode == "silent-peer" {
            "silent".to_string()
        } else {
            let me = schedule
                .schedule()
                .machine
                .compute_nodes()
                .nth(rank)
                .unwrap();
            let run = match MpiTransport::new(&comm, &schedule, "grads") {
                Ok(t) => {
                    let mut transport = t.with_timeout(timeout);
                    runtime_lite::run_node_phase_any(
                        &schedule,
                        "grads",
                        me,
                        &mut data,
                        &mut transport,
                    )
                }
                Err(e) => Err(e),
            };
            outcome(run)
        };
        println!("rank {rank}: {report}");
        world.barrier();
        return;
    }
    let mut node = match MpiNode::new(&world, schedule) {
        Ok(node) => node,
        Err(e) => {
            println!("rank {rank}: error: {e}");
            return;
        }
    };
    node.set_timeout(timeout);
    if odd && mode == "vanish" {
        println!("rank {rank}: vanishing");
        std::process::exit(3);
    }
    let phase = if odd && mode == "other-phase" {
        "b"
    } else {
        "grads"
    };
    let report = if odd && mode == "silent-agree" {
        "silent".to_string()
    } else {
        outcome(node.run_any(phase, &mut data))
    };
    println!("rank {rank}: {report}");
    world.barrier();
}

fn outcome(run: Result<(), runtime_lite::Error>) -> String {
    match run {
        Ok(()) => "ok".to_string(),
        Err(e) => format!("error: {e}"),
    }
}
