//! Resource budgets: a verified schedule whose run would need more memory or work than the
//! budget allows is refused before anything is allocated, with the figures in the message;
//! the estimate is exact for a schedule small enough to count by hand.
#![allow(clippy::unwrap_used, clippy::panic)]

mod common;

use common::*;
use runtime_lite::{Error, InProcess, Limits, Needs, NodeExecutor};
use schedule_ir::{Collective, DType, NodeId, ReduceOp};

/// The 3-node ring allreduce of 30 `i32`: 4 steps, in each of which every node sends one chunk
/// of 10 elements and receives one.
#[test]
fn the_estimate_counts_data_scratch_messages_and_work() {
    let phase = ring_allreduce(3, "grads", ReduceOp::Sum, DType::I32, 30);
    let machine = ring_machine(3);
    let needs = Needs::in_process(&machine, &phase);
    assert_eq!(
        needs,
        Needs {
            nodes: 3,
            data_bytes: 3 * 30 * 4,
            scratch_bytes: 0,
            // One vector held per step (the send), as long as the longest message.
            message_bytes: 3 * 10 * 4,
            // Per node: 4 sends and 4 receives of 10 elements.
            work_bytes: 3 * 4 * (10 + 10) * 4,
        }
    );
    assert_eq!(needs.memory_bytes(), 480);
    assert_eq!(
        Needs::node(&phase, NodeId(1)),
        Needs {
            nodes: 1,
            data_bytes: 120,
            scratch_bytes: 0,
            message_bytes: 40,
            work_bytes: 320,
        }
    );
}

/// Scratch buffers are as long as the vector, on every node: they count.
#[test]
fn scratch_buffers_count() {
    let machine = ring_machine(2);
    let shape = Shape::new(Collective::AllReduce, ReduceOp::Sum, DType::F32, 1 << 10);
    let mut b = PhaseBuilder::new(&machine, "grads", shape, 2, 7, 1);
    b.transfer(0, 0, 1, &[0], 0, 0, &[0, 1], schedule_ir::RecvMode::Reduce)
        .transfer(0, 1, 0, &[0], 0, 0, &[0, 1], schedule_ir::RecvMode::Reduce);
    let phase = b.build();
    let needs = Needs::in_process(&machine, &phase);
    assert_eq!(needs.data_bytes, 2 * 4096);
    assert_eq!(needs.scratch_bytes, 2 * 7 * 4096);
    let schedule = verified_one(machine, phase);
    // Enough for the data and messages but not the scratch buffers: refused.
    let tight = Limits {
        memory_bytes: needs.data_bytes + needs.message_bytes + needs.scratch_bytes - 1,
        ..Limits::default()
    };
    let err = InProcess::<f32>::with_limits(&schedule, "grads", &tight).unwrap_err();
    assert_eq!(
        err.to_string(),
        "phase `grads` needs about 72.0 KiB of memory to run (data 8.0 KiB on 2 node(s), \
         scratch 56.0 KiB, messages 8.0 KiB), over the memory budget of 72.0 KiB: run a shorter \
         vector or raise the budget"
    );
    // At the budget exactly, it runs.
    let exact = Limits {
        memory_bytes: tight.memory_bytes + 1,
        ..Limits::default()
    };
    let out = InProcess::<f32>::with_limits(&schedule, "grads", &exact)
        .unwrap()
        .run(vec![vec![1.0; 1 << 10], vec![2.0; 1 << 10]])
        .unwrap();
    assert_eq!(out, vec![vec![3.0; 1 << 10]; 2]);
}

/// 64 nodes of 2²⁸ `f32` (1 GiB each): a verified schedule of a few kilobytes that would need
/// 65 GiB. Refused by the default budget at once, in process and per node.
#[test]
fn a_verified_schedule_past_the_default_memory_budget_is_refused_before_allocating() {
    let schedule = verified_one(
        ring_machine(64),
        ring_allreduce(64, "grads", ReduceOp::Sum, DType::F32, 1 << 28),
    );
    let err = InProcess::<f32>::new(&schedule, "grads").unwrap_err();
    assert!(matches!(err, Error::OverMemoryBudget { .. }), "{err}");
    assert_eq!(
        err.to_string(),
        "phase `grads` needs about 65.0 GiB of memory to run (data 64.0 GiB on 64 node(s), \
         scratch 0 B, messages 1.0 GiB), over the memory budget of 4.0 GiB: run a shorter \
         vector or raise the budget"
    );
    // One node alone needs its 1 GiB vector and a 16 MiB message: within the default budget,
    // but not within 1 GiB.
    assert!(NodeExecutor::<f32>::new(&schedule, "grads", NodeId(5)).is_ok());
    let small = Limits {
        memory_bytes: 1 << 30,
        ..Limits::default()
    };
    let err = NodeExecutor::<f32>::with_limits(&schedule, "grads", NodeId(5), &small).unwrap_err();
    assert_eq!(
        err.to_string(),
        "phase `grads` needs about 1.0 GiB of memory to run (data 1.0 GiB on 1 node(s), scratch \
         0 B, messages 16.0 MiB), over the memory budget of 1.0 GiB: run a shorter vector or \
         raise the budget"
    );
}

/// A phase that copies the whole vector back and forth in every one of many steps: its work
/// grows with steps × elements however small the file. Refused past the work budget.
#[test]
fn a_schedule_past_the_work_budget_is_refused() {
    let machine = ring_machine(2);
    let steps = 2000;
    let shape = Shape::new(Collective::AllReduce, ReduceOp::Sum, DType::I64, 1 << 16);
    let mut b = PhaseBuilder::new(&machine, "loops", shape, 2, 1, steps + 1);
    b.transfer(0, 0, 1, &[0], 0, 0, &[0, 1], schedule_ir::RecvMode::Reduce)
        .transfer(0, 1, 0, &[0], 0, 0, &[0, 1], schedule_ir::RecvMode::Reduce);
    for s in 1..=steps {
        for node in 0..2 {
            let (src, dst) = if s % 2 == 1 { (0, 1) } else { (1, 0) };
            b.local(node, s, false, src, dst, &[0, 1]);
        }
    }
    let phase = b.build();
    let needs = Needs::in_process(&machine, &phase);
    // 2 nodes × (2000 copies + 1 send + 1 receive) × 512 KiB.
    assert_eq!(needs.work_bytes, 2 * 2002 * (8 << 16));
    let schedule = verified_one(machine, phase);
    let limits = Limits {
        work_bytes: 1 << 30,
        ..Limits::default()
    };
    let err = InProcess::<i64>::with_limits(&schedule, "loops", &limits).unwrap_err();
    assert!(matches!(err, Error::OverWorkBudget { .. }), "{err}");
    assert_eq!(
        err.to_string(),
        "phase `loops` moves and combines about 2.0 GiB in all, over the work budget of 1.0 \
         GiB: run a shorter vector or raise the budget"
    );
    let err = NodeExecutor::<i64>::with_limits(
        &schedule,
        "loops",
        NodeId(0),
        &Limits {
            work_bytes: 100 << 20,
            ..Limits::default()
        },
    )
    .unwrap_err();
    assert!(matches!(err, Error::OverWorkBudget { .. }), "{err}");
    // Within the default budget it runs, and gives the sum.
    let out = InProcess::<i64>::new(&schedule, "loops")
        .unwrap()
        .run(vec![vec![1; 1 << 16], vec![5; 1 << 16]])
        .unwrap();
    assert_eq!(out, vec![vec![6; 1 << 16]; 2]);
}

/// Devices (reducing switches) hold a data buffer of the vector's length too, in process.
#[test]
fn device_buffers_count() {
    let machine = in_network_machine(3);
    let phase = in_network_allreduce(3, "grads", 1 << 20);
    let needs = Needs::in_process(&machine, &phase);
    assert_eq!(needs.nodes, 4);
    assert_eq!(needs.data_bytes, 4 * (4 << 20));
    let schedule = verified_one(machine, phase);
    let limits = Limits {
        memory_bytes: 3 * (4 << 20) + needs.message_bytes,
        ..Limits::default()
    };
    let err = InProcess::<f32>::with_limits(&schedule, "grads", &limits).unwrap_err();
    assert!(
        err.to_string()
            .contains("(data 16.0 MiB on 4 node(s), scratch 0 B"),
        "{err}"
    );
    let out = InProcess::<f32>::new(&schedule, "grads")
        .unwrap()
        .run(vec![
            vec![1.0; 1 << 20],
            vec![2.0; 1 << 20],
            vec![4.0; 1 << 20],
        ])
        .unwrap();
    assert_eq!(out, vec![vec![7.0; 1 << 20]; 3]);
}
