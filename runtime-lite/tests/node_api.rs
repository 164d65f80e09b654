//! The per-node embedding API, one thread per node over channels (the shape of one MPI rank
//! per node), gives the same bits as the in-process driver.
#![allow(clippy::unwrap_used, clippy::panic)]

mod common;

use common::*;
use runtime_lite::{find_node, run_node_phase_any, run_phase, AnyBuffer, NodeExecutor};
use schedule_ir::{DType, Machine, Phase, ReduceOp, VerifiedSchedule};
use std::time::Duration;

const TIMEOUT: Duration = Duration::from_secs(20);

/// Runs every compute node of `schedule`'s phase `grads` on its own thread, `runs` times in a
/// row with the same executor, and returns the last results in node order.
fn run_threads<T: Random>(
    schedule: &VerifiedSchedule,
    inputs: &[Vec<T>],
    runs: usize,
) -> Vec<Vec<T>> {
    let nodes: Vec<_> = schedule.schedule().machine.compute_nodes().collect();
    let transports = channel_transports(&nodes, TIMEOUT);
    std::thread::scope(|scope| {
        let handles: Vec<_> = transports
            .into_iter()
            .zip(inputs)
            .map(|((node, mut transport), input)| {
                scope.spawn(move || {
                    let mut executor = NodeExecutor::<T>::new(schedule, "grads", node).unwrap();
                    let mut data = input.clone();
                    for _ in 0..runs {
                        data.clone_from(input);
                        executor.run(&mut data, &mut transport).unwrap();
                    }
                    data
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

fn same_as_in_process<T: Random>(machine: Machine, phase: Phase, seed: u64) {
    let schedule = verified_one(machine, phase);
    let p = schedule.schedule().machine.compute_nodes().count();
    let len = schedule.schedule().phases[0].elements as usize;
    let op = schedule.schedule().phases[0].op;
    let inputs: Vec<Vec<T>> = random_inputs(seed, p, len, op);
    let in_process = run_phase(&schedule, "grads", inputs.clone()).unwrap();
    let threaded = run_threads(&schedule, &inputs, 2);
    assert_eq!(bits(&threaded), bits(&in_process), "{}", T::DTYPE);
}

#[test]
fn threads_over_channels_match_in_process() {
    for p in [2, 3, 5] {
        same_as_in_process::<f32>(
            ring_machine(p),
            ring_allreduce(p, "grads", ReduceOp::Sum, DType::F32, 1000),
            1,
        );
        same_as_in_process::<f64>(
            ring_machine(p),
            bidirectional_ring_allreduce(p, "grads", ReduceOp::Prod, DType::F64, 333),
            2,
        );
        same_as_in_process::<i64>(
            ring_machine(p),
            pipelined_ring_allreduce(p, "grads", ReduceOp::Sum, DType::I64, 500),
            3,
        );
        same_as_in_process::<f32>(
            star_machine(p),
            star_allreduce(p, "grads", ReduceOp::Sum, DType::F32, 64),
            4,
        );
    }
}

#[test]
fn dtype_erased_node_api() {
    let p = 3;
    let schedule = verified_one(
        ring_machine(p),
        ring_allreduce(p, "grads", ReduceOp::Max, DType::I32, 12),
    );
    let inputs: Vec<Vec<i32>> = random_inputs(5, p, 12, ReduceOp::Max);
    let expected = run_phase(&schedule, "grads", inputs.clone()).unwrap();
    let names = ["N0", "N1", "N2"];
    let nodes: Vec<_> = names
        .iter()
        .map(|n| find_node(&schedule, n).unwrap())
        .collect();
    let transports = channel_transports(&nodes, TIMEOUT);
    let results: Vec<AnyBuffer> = std::thread::scope(|scope| {
        let handles: Vec<_> = transports
            .into_iter()
            .zip(&inputs)
            .map(|((node, mut transport), input)| {
                let schedule = &schedule;
                scope.spawn(move || {
                    let mut data = AnyBuffer::from(input.clone());
                    run_node_phase_any(schedule, "grads", node, &mut data, &mut transport).unwrap();
                    data
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (got, want) in results.into_iter().zip(expected) {
        assert_eq!(got, AnyBuffer::I32(want));
    }
}
