//! The mean op: sums scaled once, at the end. Correct mean schedules verify; each way of
//! getting the scale wrong is named exactly.
#![allow(clippy::unwrap_used, clippy::panic)]

mod common;

use common::*;
use schedule_ir::verify::{Action, Named, NodeList};
use schedule_ir::{
    verify, BufferId, ChunkId, Collective, Instr, NodeId, RecvMode, ReduceOp, Schedule, StepId,
    VerifyError,
};

fn errors(s: Schedule) -> Vec<VerifyError> {
    match verify(s) {
        Ok(_) => panic!("expected verification to fail"),
        Err(e) => e.errors,
    }
}

fn messages(s: Schedule) -> Vec<String> {
    errors(s).iter().map(ToString::to_string).collect()
}

fn ok(s: Schedule) -> schedule_ir::VerifiedSchedule {
    match verify(s) {
        Ok(v) => {
            assert_eq!(simulate_counts(v.schedule()), Ok(()));
            v
        }
        Err(e) => panic!(
            "expected the schedule to verify, got:\n{}",
            e.errors
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("\n")
        ),
    }
}

fn n(i: u32) -> Named<NodeId> {
    Named {
        id: NodeId(i),
        name: format!("N{i}"),
    }
}

fn data() -> Named<BufferId> {
    Named {
        id: BufferId(0),
        name: "data".into(),
    }
}

fn scale(chunks: &[u32], divisor: u32) -> Instr {
    Instr::Scale {
        buffer: BufferId(0),
        chunks: ids(chunks),
        divisor,
    }
}

/// The clockwise ring allreduce under mean: in the last reduce-scatter step (`p - 2`), node
/// `j` completes chunk `j + 1` with a reducing receive and scales it right after.
fn mean_ring(p: usize) -> Schedule {
    let mut s = ring_allreduce(p, 64);
    phase(&mut s).op = ReduceOp::Mean;
    for j in 0..p {
        at(&mut s, j, p - 2).push(scale(&[((j + 1) % p) as u32], p as u32));
    }
    s
}

#[test]
fn ring_mean_allreduce_verifies_and_reports_its_scales() {
    for p in 2..=7 {
        ok(mean_ring(p));
    }
    let v = ok(mean_ring(4));
    let text = v.report().to_string();
    assert!(
        text.contains("step  2  busy 4/8 directions  max 64 B  scales 4  idle:"),
        "{text}"
    );
    assert!(!text.contains("step  3  busy 4/8 directions  max 64 B  scales"));
}

#[test]
fn mean_reduce_scatter_scales_on_the_owners() {
    let mut s = ring_reduce_scatter(4, 64);
    phase(&mut s).op = ReduceOp::Mean;
    assert_eq!(
        messages(s.clone()),
        [
            "phase `grads`: N0 ends step 2 with chunk 1 holding the sum of all 4 inputs, but it was never divided; a mean reduce-scatter must scale it by 4 once",
            "phase `grads`: N1 ends step 2 with chunk 2 holding the sum of all 4 inputs, but it was never divided; a mean reduce-scatter must scale it by 4 once",
            "phase `grads`: N2 ends step 2 with chunk 3 holding the sum of all 4 inputs, but it was never divided; a mean reduce-scatter must scale it by 4 once",
            "phase `grads`: N3 ends step 2 with chunk 0 holding the sum of all 4 inputs, but it was never divided; a mean reduce-scatter must scale it by 4 once",
        ]
    );
    for j in 0..4 {
        at(&mut s, j, 2).push(scale(&[((j + 1) % 4) as u32], 4));
    }
    ok(s);
}

#[test]
fn mean_reduce_needs_the_root_scaled_only() {
    let mut s = chain_reduce(4, 2, 64);
    phase(&mut s).op = ReduceOp::Mean;
    assert_eq!(
        messages(s.clone()),
        [
            "phase `grads`: N3 ends step 2 with chunk 0 holding the sum of all 4 inputs, but it was never divided; a mean reduce must scale it by 4 once",
            "phase `grads`: N3 ends step 2 with chunk 1 holding the sum of all 4 inputs, but it was never divided; a mean reduce must scale it by 4 once",
        ]
    );
    at(&mut s, 3, 2).push(scale(&[0, 1], 4));
    ok(s);
}

#[test]
fn gathers_under_mean_need_no_scale() {
    for mut s in [ring_allgather(4, 64), chain_broadcast(4, 2, 64)] {
        phase(&mut s).op = ReduceOp::Mean;
        ok(s);
    }
    // A scale there divides one node's input: a partial value.
    let mut s = ring_allgather(4, 64);
    phase(&mut s).op = ReduceOp::Mean;
    at(&mut s, 0, 2).push(scale(&[1], 4));
    assert_eq!(
        messages(s),
        ["phase `grads`, step 2: N0 scales chunk 1 of buffer `data` holding inputs of {N0}, but a mean divides the sum of all 4 inputs; missing {N1..N3}"]
    );
}

#[test]
fn one_node_is_its_own_mean() {
    let mut machine = ring_machine(1);
    machine.links.clear();
    let mut s = skeleton(machine, Collective::AllReduce, "none", 2, 10, 0);
    phase(&mut s).op = ReduceOp::Mean;
    ok(s.clone());
    // A scale by 1 is accepted (it changes nothing).
    phase(&mut s).steps = 1;
    phase(&mut s).programs[0].steps = vec![vec![scale(&[0, 1], 1)]];
    ok(s);
}

#[test]
fn scale_of_a_partial_value() {
    // N0 completes chunk 1 in step 2; scaling it in step 1 divides {N0} alone.
    let mut s = mean_ring(4);
    at(&mut s, 0, 2).pop();
    at(&mut s, 0, 1).push(scale(&[1], 4));
    let e = errors(s);
    assert_eq!(
        e,
        [VerifyError::ScalePartial {
            phase: "grads".into(),
            step: StepId(1),
            node: n(0),
            buffer: data(),
            chunk: ChunkId(1),
            holds: NodeList(vec![n(0)]),
            count: 4,
            missing: NodeList(vec![n(1), n(2), n(3)]),
        }]
    );
    assert_eq!(
        e[0].to_string(),
        "phase `grads`, step 1: N0 scales chunk 1 of buffer `data` holding inputs of {N0}, but a mean divides the sum of all 4 inputs; missing {N1..N3}"
    );
}

#[test]
fn scale_of_an_undefined_chunk() {
    let mut s = with_scratch(mean_ring(4));
    at(&mut s, 2, 0).push(Instr::Scale {
        buffer: BufferId(1),
        chunks: ids(&[3]),
        divisor: 4,
    });
    assert_eq!(
        messages(s),
        ["phase `grads`, step 0: N2 scales chunk 3 of buffer `scratch` which is undefined; a mean divides the sum of all 4 inputs"]
    );
}

#[test]
fn scaled_twice() {
    let mut s = mean_ring(4);
    at(&mut s, 0, 2).push(scale(&[1], 4));
    let e = errors(s);
    assert_eq!(
        e,
        [VerifyError::ScaledTwice {
            phase: "grads".into(),
            step: StepId(2),
            node: n(0),
            buffer: data(),
            chunk: ChunkId(1),
        }]
    );
    assert_eq!(
        e[0].to_string(),
        "phase `grads`, step 2: N0 scales chunk 1 of buffer `data` a second time; it already holds the mean"
    );
}

#[test]
fn scaled_twice_on_another_node() {
    // N1 stores N0's scaled chunk 1 in step 3: the copy is scaled, scaling it again is wrong.
    let mut s = mean_ring(4);
    at(&mut s, 1, 3).push(scale(&[1], 4));
    assert_eq!(
        messages(s),
        ["phase `grads`, step 3: N1 scales chunk 1 of buffer `data` a second time; it already holds the mean"]
    );
}

#[test]
fn combine_after_scale() {
    // In step 3 N1 receives N0's scaled chunk 1; reducing it in adds a mean to a partial sum.
    let mut s = mean_ring(4);
    for instr in at(&mut s, 1, 3) {
        if let Instr::Recv { mode, .. } = instr {
            *mode = RecvMode::Reduce;
        }
    }
    let e = errors(s);
    assert_eq!(
        e,
        [VerifyError::CombineScaled {
            phase: "grads".into(),
            step: StepId(3),
            node: n(1),
            action: Action::Recv { from: n(0) },
            buffer: data(),
            chunk: ChunkId(1),
        }]
    );
    assert_eq!(
        e[0].to_string(),
        "phase `grads`, step 3: N1's receive from N0 combines into chunk 1 of buffer `data` a value that was already divided; a mean adds every input first and scales once, at the end"
    );
}

#[test]
fn combine_into_a_scaled_chunk() {
    // N0 copies its scaled chunk 1 to scratch in step 3 and then reduces the data buffer into
    // it in step 4: the destination is already divided.
    let mut s = with_scratch(mean_ring(4));
    at(&mut s, 0, 3).push(Instr::Copy {
        src: BufferId(0),
        dst: BufferId(1),
        chunks: ids(&[1]),
    });
    at(&mut s, 0, 4).push(Instr::Reduce {
        src: BufferId(0),
        dst: BufferId(1),
        chunks: ids(&[1]),
    });
    assert_eq!(
        messages(s),
        ["phase `grads`, step 4: N0's local reduce combines into chunk 1 of buffer `scratch` a value that was already divided; a mean adds every input first and scales once, at the end"]
    );
}

#[test]
fn missing_scale_at_the_end() {
    // Without N0's scale, chunk 1 reaches every node as a sum.
    let mut s = mean_ring(4);
    at(&mut s, 0, 2).pop();
    let e = errors(s);
    assert_eq!(
        e[0],
        VerifyError::NotScaled {
            phase: "grads".into(),
            step: Some(StepId(5)),
            node: n(0),
            chunk: ChunkId(1),
            collective: Collective::AllReduce,
            count: 4,
        }
    );
    assert_eq!(
        e.iter().map(ToString::to_string).collect::<Vec<_>>(),
        (0..4)
            .map(|i| format!("phase `grads`: N{i} ends step 5 with chunk 1 holding the sum of all 4 inputs, but it was never divided; a mean allreduce must scale it by 4 once"))
            .collect::<Vec<_>>()
    );
}

#[test]
fn scale_under_a_non_mean_op() {
    let mut s = ring_allreduce(4, 64);
    at(&mut s, 0, 2).push(scale(&[1], 4));
    let e = errors(s);
    assert_eq!(
        e,
        [VerifyError::ScaleNotMean {
            phase: "grads".into(),
            step: StepId(2),
            node: n(0),
            buffer: data(),
            op: ReduceOp::Sum,
        }]
    );
    assert_eq!(
        e[0].to_string(),
        "phase `grads`, step 2: N0 scales buffer `data`, but the phase's op is sum; only a mean is divided"
    );
}

#[test]
fn wrong_divisor() {
    let mut s = mean_ring(4);
    *at(&mut s, 2, 2).last_mut().unwrap() = scale(&[3], 3);
    let e = errors(s);
    assert_eq!(
        e,
        [VerifyError::WrongDivisor {
            phase: "grads".into(),
            step: StepId(2),
            node: n(2),
            buffer: data(),
            divisor: 3,
            expected: 4,
        }]
    );
    assert_eq!(
        e[0].to_string(),
        "phase `grads`, step 2: N2 scales buffer `data` by 1/3, but the mean is over 4 compute nodes; the divisor must be 4"
    );
}

#[test]
fn scale_names_existing_chunks_and_buffers() {
    let mut s = mean_ring(4);
    at(&mut s, 1, 0).push(Instr::Scale {
        buffer: BufferId(5),
        chunks: vec![],
        divisor: 4,
    });
    assert_eq!(
        messages(s),
        [
            "phase `grads`, step 0: N1's scale names buffer 5, but the phase has 1 buffer",
            "phase `grads`, step 0: N1's scale names no chunks",
        ]
    );
}
