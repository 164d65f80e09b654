//! Makes one rank misbehave on purpose and prints what every rank's runtime reports, one line
//! per rank: `rank R: ok`, `rank R: silent` or `rank R: error: …`. Run by `tests/mpi.rs`
//! with 4 ranks; each run exits 0 once every rank has reported.
//!
//! ```sh
//! mpirun -np 4 target/debug/examples/mpi_faults wrong-size|ragged|silent-peer|wrong-length|vanish|setup
//! ```
//!
//! On a ring allreduce of `p` nodes (one per rank), rank 1
//! - `wrong-size`: runs the phase compiled for 1004 elements where the others have 1000, so
//!   its messages are one element too long;
//! - `ragged`: runs an `f32` phase of 1004 elements where the others run `f64`, so its
//!   messages are no whole number of `f64`;
//! - `silent-peer`: does not run the phase at all (the messages are large, so its peers also
//!   wait for it to take theirs);
//! - `wrong-length`: passes a buffer one element short;
//! - `vanish`: exits (status 3) without finalising MPI instead of running the phase — the
//!   launcher then ends the whole job, which exits non-zero rather than hanging;
//! - `setup`: loads a schedule for a machine of `p + 1` nodes, so it cannot take a node, and
//!   the others, whose setup is fine, must not be left waiting for it.
//!
//! The transport's timeout is 2 s, so the other ranks report within a few seconds.
#![allow(clippy::unwrap_used, clippy::panic)]

#[path = "../tests/common/mod.rs"]
mod common;

use mpi::topology::Communicator;
use mpi::traits::CommunicatorCollectives;
use runtime_lite::mpi::MpiNode;
use runtime_lite::AnyBuffer;
use schedule_ir::{DType, ReduceOp};
use std::time::Duration;

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
        "wrong-size" | "wrong-length" | "vanish" | "setup" => (DType::F32, 1000),
        _ => panic!("usage: mpi_faults wrong-size|ragged|silent-peer|wrong-length|vanish|setup"),
    };
    let nodes = if odd && mode == "setup" { p + 1 } else { p };
    let phase = common::ring_allreduce(nodes, "grads", ReduceOp::Sum, dtype, elements);
    let schedule = common::verified_one(common::ring_machine(nodes), phase);
    let mut node = match MpiNode::new(&world, schedule) {
        Ok(node) => node,
        Err(e) => {
            println!("rank {rank}: error: {e}");
            return;
        }
    };
    node.set_timeout(Some(Duration::from_secs(2)));
    let mut data = AnyBuffer::zeros(dtype, elements as usize);
    if odd && mode == "wrong-length" {
        data = AnyBuffer::zeros(dtype, elements as usize - 1);
    }
    if odd && mode == "vanish" {
        println!("rank {rank}: vanishing");
        std::process::exit(3);
    }
    let report = if odd && mode == "silent-peer" {
        "silent".to_string()
    } else {
        match node.run_any("grads", &mut data) {
            Ok(()) => "ok".to_string(),
            Err(e) => format!("error: {e}"),
        }
    };
    println!("rank {rank}: {report}");
    world.barrier();
}
