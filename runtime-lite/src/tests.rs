//! The runtime's own guards, tested on schedules the verifier would refuse (built without it):
//! a verified schedule never reaches these paths, but a bug in the verifier must give an
//! error here, not a panic or a wrong result.
#![allow(clippy::unwrap_used, clippy::panic)]

use crate::test_common::*;
use crate::{Error, InProcess, Limits, NodeExecutor};
use schedule_ir::{ChunkId, DType, Instr, NodeId, Phase, ReduceOp};

/// Runs the 3-node ring allreduce broken by `break_it`, unverified, in process.
fn run_broken(break_it: impl FnOnce(&mut Phase)) -> Result<Vec<Vec<i32>>, Error> {
    let mut phase = ring_allreduce(3, "grads", ReduceOp::Sum, DType::I32, 30);
    let before = phase.clone();
    break_it(&mut phase);
    assert_ne!(phase, before, "the test must change the phase");
    let schedule = build_schedule(ring_machine(3), vec![phase]);
    InProcess::<i32>::from_schedule(&schedule, "grads", &Limits::default())?
        .run(vec![vec![0; 30]; 3])
}

fn message(result: Result<Vec<Vec<i32>>, Error>) -> String {
    result.unwrap_err().to_string()
}

#[test]
fn a_send_without_a_receive() {
    assert_eq!(
        message(run_broken(|p| p.programs[2].steps[1].retain(|i| !matches!(i, Instr::Recv { .. })))),
        "phase `grads`, step 1: node N2 received a message from N1 over link L1 (for step 1) that no receive of this step expects"
    );
}

#[test]
fn a_receive_without_a_send() {
    assert_eq!(
        message(run_broken(|p| p.programs[0].steps[3].retain(|i| !matches!(i, Instr::Send { .. })))),
        "phase `grads`, step 3: node N1 expected 10 elements from N0 over link L0, but the message never arrived"
    );
}

#[test]
fn a_send_and_receive_of_different_sizes() {
    // In step 0, N1 expects chunk 0 but N0 sends chunks [0, 1].
    let result = run_broken(|p| {
        for instr in &mut p.programs[0].steps[0] {
            if let Instr::Send { chunks, .. } = instr {
                chunks.push(ChunkId(1));
            }
        }
    });
    assert_eq!(
        message(result),
        "phase `grads`, step 0: node N1 received 20 elements from N0 over link L0, but the receive expects 10"
    );
}

#[test]
fn ids_and_ranges_out_of_bounds() {
    type Breaker = fn(&mut Phase);
    let cases: Vec<(Breaker, &str)> = vec![
        (
            |p| p.chunks[2].end = 31,
            "phase `grads`: cannot execute the schedule at chunk 2: elements 20..31 are not a range inside the vector of 30 elements",
        ),
        (
            |p| p.programs.truncate(2),
            "phase `grads`: cannot execute the schedule at its program list: the phase has 2 programs but the machine has 3 nodes",
        ),
        (
            |p| {
                p.programs[1].steps.pop();
            },
            "phase `grads`: cannot execute the schedule at node N1: the program has 3 steps but the phase has 4",
        ),
        (
            |p| p.buffers.clear(),
            "phase `grads`: cannot execute the schedule at its buffer list: the phase declares no buffers",
        ),
        (
            |p| {
                if let Instr::Send { chunks, .. } = &mut p.programs[1].steps[0][1] {
                    let mut ids = chunks.to_vec();
                    ids[0] = ChunkId(9);
                    *chunks = ids.into();
                }
            },
            "phase `grads`: cannot execute the schedule at node N1, step 0, instruction 1: chunk 9 does not exist",
        ),
        (
            |p| {
                if let Instr::Send { chunks, .. } = &mut p.programs[1].steps[0][1] {
                    chunks.clear();
                }
            },
            "phase `grads`: cannot execute the schedule at node N1, step 0, instruction 1: the chunk list is empty",
        ),
        (
            |p| {
                if let Instr::Recv { buffer, .. } = &mut p.programs[2].steps[3][0] {
                    buffer.0 = 4;
                }
            },
            "phase `grads`: cannot execute the schedule at node N2, step 3, instruction 0: buffer 4 does not exist (the phase has 1 buffers)",
        ),
        (
            |p| {
                if let Instr::Send { to, .. } = &mut p.programs[0].steps[2][0] {
                    *to = NodeId(5);
                }
            },
            "phase `grads`: cannot execute the schedule at node N0, step 2, instruction 0: the peer node#5 does not exist",
        ),
        (
            |p| {
                if let Instr::Send { link, .. } = &mut p.programs[0].steps[2][0] {
                    link.0 = 3;
                }
            },
            "phase `grads`: cannot execute the schedule at node N0, step 2, instruction 0: link#3 does not exist",
        ),
        (
            |p| {
                let send = p.programs[0].steps[2][0].clone();
                p.programs[0].steps[2].push(send);
            },
            "phase `grads`: cannot execute the schedule at node N0, step 2, instruction 2: a second transfer to N1 over L0 starting at chunk 1 in the same step",
        ),
    ];
    for (break_it, want) in cases {
        assert_eq!(message(run_broken(break_it)), want);
    }
}

#[test]
fn a_transfer_to_a_switch_and_a_switch_with_a_program() {
    let mut phase = star_allreduce(3, "grads", ReduceOp::Sum, DType::I32, 8);
    if let Instr::Send { to, .. } = &mut phase.programs[0].steps[0][1] {
        *to = NodeId(3);
    }
    let schedule = build_schedule(star_machine(3), vec![phase]);
    assert_eq!(
        InProcess::<i32>::from_schedule(&schedule, "grads", &Limits::default()).unwrap_err().to_string(),
        "phase `grads`: cannot execute the schedule at node N0, step 0, instruction 1: the peer S is a switch; transfers go between compute nodes and devices"
    );

    let mut phase = star_allreduce(3, "grads", ReduceOp::Sum, DType::I32, 8);
    let instr = phase.programs[0].steps[0][0].clone();
    phase.programs[3].steps = vec![vec![instr], Vec::new()];
    let schedule = build_schedule(star_machine(3), vec![phase]);
    assert_eq!(
        NodeExecutor::<i32>::from_schedule(&schedule, "grads", NodeId(0), &Limits::default())
            .unwrap_err()
            .to_string(),
        "phase `grads`: cannot execute the schedule at node S: the node is a switch but its program has instructions"
    );
}

#[test]
fn a_runner_is_usable_again_after_an_error() {
    // Drop N2's receive in the last step: every run fails there, the same way each time.
    let mut phase = ring_allreduce(3, "grads", ReduceOp::Sum, DType::I32, 30);
    phase.programs[0].steps[3].retain(|i| !matches!(i, Instr::Recv { .. }));
    let schedule = build_schedule(ring_machine(3), vec![phase]);
    let mut runner =
        InProcess::<i32>::from_schedule(&schedule, "grads", &Limits::default()).unwrap();
    let first = runner.run(vec![vec![1; 30]; 3]).unwrap_err().to_string();
    let second = runner.run(vec![vec![1; 30]; 3]).unwrap_err().to_string();
    assert_eq!(first, second);
    assert!(
        first.starts_with("phase `grads`, step 3: node N0 received"),
        "{first}"
    );
}

#[test]
fn a_vector_too_large_to_allocate_is_an_error() {
    let mut phase = pipelined_ring_allreduce(2, "grads", ReduceOp::Sum, DType::F64, 4);
    phase.elements = u64::MAX >> 4;
    for chunk in &mut phase.chunks {
        chunk.end = phase.elements;
        chunk.start = phase.elements;
    }
    let schedule = build_schedule(ring_machine(2), vec![phase]);
    // The budget refuses it before anything is allocated …
    let err = InProcess::<f64>::from_schedule(&schedule, "grads", &Limits::default()).unwrap_err();
    assert!(matches!(err, Error::OverMemoryBudget { .. }), "{err}");
    // … and without a budget, the failed allocation is an error, not an abort.
    let unlimited = Limits {
        memory_bytes: u64::MAX,
        work_bytes: u64::MAX,
    };
    let err = InProcess::<f64>::from_schedule(&schedule, "grads", &unlimited).unwrap_err();
    assert!(matches!(err, Error::TooLarge { .. }), "{err}");
}
