//! Bad inputs give the exact expected error, never a panic: buffers of the wrong count, length
//! or type, unknown phases and nodes, transports that lose, truncate, add or repeat messages,
//! and schedules the runtime cannot execute.
#![allow(clippy::unwrap_used, clippy::panic)]

mod common;

use common::*;
use runtime_lite::{
    find_node, load, run_node_phase, run_node_phase_any, run_phase, run_phase_any, AnyBuffer,
    Buffers, Error, InProcess, NodeExecutor,
};
use schedule_ir::{ChunkId, DType, Instr, NodeId, ReduceOp, VerifiedSchedule};

/// A 3-node ring allreduce of 30 `i32`s called `grads`.
fn ring3() -> VerifiedSchedule {
    verified_one(
        ring_machine(3),
        ring_allreduce(3, "grads", ReduceOp::Sum, DType::I32, 30),
    )
}

fn message<T: std::fmt::Debug>(result: Result<T, Error>) -> String {
    result.unwrap_err().to_string()
}

#[test]
fn unknown_phase() {
    let s = ring3();
    assert_eq!(
        message(run_phase(&s, "grad", vec![vec![0i32; 30]; 3])),
        "the schedule has no phase named `grad` (its phases: `grads`)"
    );
    assert!(matches!(
        InProcess::<i32>::new(&s, "grad"),
        Err(Error::UnknownPhase { .. })
    ));
    assert!(matches!(
        NodeExecutor::<i32>::new(&s, "grad", NodeId(0)),
        Err(Error::UnknownPhase { .. })
    ));
}

#[test]
fn wrong_number_of_buffers() {
    assert_eq!(
        message(run_phase(&ring3(), "grads", vec![vec![0i32; 30]; 2])),
        "phase `grads`: got 2 buffers but the machine has 3 compute nodes (one buffer each, in node order)"
    );
}

#[test]
fn wrong_buffer_length() {
    let err = run_phase(
        &ring3(),
        "grads",
        vec![vec![0i32; 30], vec![0; 30], vec![0; 29]],
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "phase `grads`: the buffer of node N2 has 29 elements but the phase works on 30"
    );
    assert!(matches!(
        err,
        Error::WrongLength {
            expected: 30,
            found: 29,
            ..
        }
    ));
    let mut short = vec![0i32; 31];
    assert_eq!(
        message(run_node_phase(
            &ring3(),
            "grads",
            NodeId(1),
            &mut short,
            &mut FakePeers::new(Fault::None)
        )),
        "phase `grads`: the buffer of node N1 has 31 elements but the phase works on 30"
    );
}

#[test]
fn wrong_element_type() {
    let s = ring3();
    let want = "phase `grads` is compiled for i32 elements but the buffer holds f32";
    assert_eq!(
        message(run_phase(&s, "grads", vec![vec![0f32; 30]; 3])),
        want
    );
    assert_eq!(
        message(run_phase_any(
            &s,
            "grads",
            Buffers::zeros(DType::F32, 3, 30)
        )),
        want
    );
    let mut buffer = AnyBuffer::zeros(DType::I64, 30);
    assert_eq!(
        message(run_node_phase_any(
            &s,
            "grads",
            NodeId(0),
            &mut buffer,
            &mut FakePeers::new(Fault::None)
        )),
        "phase `grads` is compiled for i32 elements but the buffer holds i64"
    );
    assert!(matches!(
        NodeExecutor::<f64>::new(&s, "grads", NodeId(0)),
        Err(Error::WrongDType {
            expected: DType::I32,
            found: DType::F64,
            ..
        })
    ));
}

#[test]
fn unknown_node_and_switch_node() {
    let s = ring3();
    assert_eq!(find_node(&s, "N2").unwrap(), NodeId(2));
    assert_eq!(message(find_node(&s, "N9")), "the machine has no node `N9`");
    assert_eq!(
        message(NodeExecutor::<i32>::new(&s, "grads", NodeId(7))),
        "the machine has no node `node#7`"
    );
    let star = verified_one(
        star_machine(3),
        star_allreduce(3, "grads", ReduceOp::Sum, DType::I32, 8),
    );
    let switch = find_node(&star, "S").unwrap();
    assert_eq!(
        message(NodeExecutor::<i32>::new(&star, "grads", switch)),
        "phase `grads`: node S is a switch; only compute nodes run a phase"
    );
}

#[test]
fn unreadable_schedule_text() {
    let err = load("Schedule(").unwrap_err();
    assert!(matches!(err, Error::Read(_)), "{err:?}");
    assert!(
        err.to_string()
            .starts_with("cannot read the schedule: RON syntax error"),
        "{err}"
    );
}

/// Runs node N1 of the 3-node ring with fake peers that misbehave as `fault` says.
fn node1_with(fault: Fault) -> (Result<(), Error>, Vec<i32>) {
    let mut data: Vec<i32> = (0..30).collect();
    let result = run_node_phase(
        &ring3(),
        "grads",
        NodeId(1),
        &mut data,
        &mut FakePeers::new(fault),
    );
    (result, data)
}

#[test]
fn correct_fake_peers_run_to_the_end() {
    let mut peers = FakePeers::new(Fault::None);
    let mut data = vec![1i32; 30];
    run_node_phase(&ring3(), "grads", NodeId(1), &mut data, &mut peers).unwrap();
    // N1 sends one 10-element chunk to N2 in each of the 4 steps.
    assert_eq!(peers.sent.len(), 4);
    assert!(peers
        .sent
        .iter()
        .all(|&(_, to, len)| to == NodeId(2) && len == 10));
}

#[test]
fn a_lost_message_names_step_node_sender_and_link() {
    let (result, _) = node1_with(Fault::Drop(2));
    let err = result.unwrap_err();
    assert_eq!(
        err.to_string(),
        "phase `grads`, step 2: node N1 expected 10 elements from N0 over link L0, but the message never arrived"
    );
    assert!(matches!(err, Error::MissingMessage { expected: 10, .. }));
}

#[test]
fn a_short_message_is_refused() {
    let (result, _) = node1_with(Fault::Truncate(1));
    assert_eq!(
        message(result),
        "phase `grads`, step 1: node N1 received 9 elements from N0 over link L0, but the receive expects 10"
    );
}

#[test]
fn an_unexpected_message_is_refused() {
    let (result, _) = node1_with(Fault::Extra(0));
    assert_eq!(
        message(result),
        "phase `grads`, step 0: node N1 received a message from N1 over link L1 (for step 0) that no receive of this step expects"
    );
}

#[test]
fn a_repeated_message_is_refused() {
    let (result, _) = node1_with(Fault::Duplicate(3));
    assert_eq!(
        message(result),
        "phase `grads`, step 3: node N1 received the message from N0 over link L0 twice"
    );
}

#[test]
fn a_failing_transport_is_reported_and_the_step_is_not_applied() {
    let (result, data) = node1_with(Fault::Fail(0));
    let err = result.unwrap_err();
    assert_eq!(
        err.to_string(),
        "phase `grads`, step 0: the transport failed on node N1: peer vanished"
    );
    assert!(matches!(err, Error::Transport { .. }));
    assert_eq!(data, (0..30).collect::<Vec<i32>>());

    // A short message in step 1: step 0 was applied (the zeros N0 "sent" were added: no
    // change), step 1 was not.
    let (result, data) = node1_with(Fault::Truncate(1));
    assert!(result.is_err());
    assert_eq!(data, (0..30).collect::<Vec<i32>>());
}

/// Ways to break the 3-node ring allreduce; each must be refused by the verifier or, failing
/// that, by the runtime. (The runtime's own guards are tested without the verifier in the
/// crate's unit tests.)
#[test]
fn broken_schedules_never_run() {
    type Breaker = fn(&mut schedule_ir::Phase);
    let cases: Vec<Breaker> = vec![
        |p| p.programs[2].steps[1].retain(|i| !matches!(i, Instr::Recv { .. })),
        |p| p.programs[0].steps[3].retain(|i| !matches!(i, Instr::Send { .. })),
        |p| {
            for instr in &mut p.programs[0].steps[0] {
                if let Instr::Send { chunks, .. } = instr {
                    chunks.push(ChunkId(1));
                }
            }
        },
        |p| p.chunks[2].end = 31,
        |p| p.programs.truncate(2),
        |p| {
            p.programs[1].steps.pop();
        },
        |p| {
            if let Instr::Send { to, .. } = &mut p.programs[0].steps[2][0] {
                *to = NodeId(5);
            }
        },
    ];
    for (k, break_it) in cases.into_iter().enumerate() {
        let mut phase = ring_allreduce(3, "grads", ReduceOp::Sum, DType::I32, 30);
        let before = phase.clone();
        break_it(&mut phase);
        assert_ne!(phase, before, "case {k} must change the phase");
        if let Some(s) = verified_or_rejected(build_schedule(ring_machine(3), vec![phase])) {
            assert!(
                run_phase(&s, "grads", vec![vec![0i32; 30]; 3]).is_err(),
                "case {k}"
            );
        }
    }
}
