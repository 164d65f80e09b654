//! The mean op: schedules add like a sum and scale once; results match the reference (the plain
//! sum divided by `p`) bit for bit for integers, and are bit-identical run to run for floats,
//! in process and with one thread per node.
#![allow(clippy::unwrap_used, clippy::panic)]

mod common;

use common::*;
use runtime_lite::threaded::Threaded;
use runtime_lite::{compare, reference, run_phase};
use schedule_ir::{BufferId, ChunkId, DType, Instr, Machine, Phase, ReduceOp, VerifiedSchedule};
use std::time::Duration;

fn scale(chunks: &[usize], p: usize) -> Instr {
    Instr::Scale {
        buffer: BufferId(0),
        chunks: chunks.iter().map(|&c| ChunkId::new(c)).collect(),
        divisor: p as u32,
    }
}

/// Where a schedule scales: `(node, step, chunks)`.
type Scales = Vec<(usize, usize, Vec<usize>)>;

/// A mean phase and its machine: `build` under `Mean`, with `scales` pushed as
/// `(node, step, chunks)`.
struct Case {
    name: &'static str,
    machine: fn(usize) -> Machine,
    build: fn(usize, DType, u64) -> Phase,
    scales: fn(usize) -> Scales,
}

const CASES: [Case; 4] = [
    Case {
        name: "ring allreduce",
        machine: ring_machine,
        build: |p, dtype, len| ring_allreduce(p, "grads", ReduceOp::Mean, dtype, len),
        // Node j completes chunk j+1 in the last reduce-scatter step.
        scales: |p| (0..p).map(|j| (j, p - 2, vec![(j + 1) % p])).collect(),
    },
    Case {
        name: "star allreduce",
        machine: star_machine,
        build: |p, dtype, len| star_allreduce(p, "grads", ReduceOp::Mean, dtype, len),
        // Every node completes its one chunk in the last step, each in its own order.
        scales: |p| (0..p).map(|j| (j, p - 2, vec![0])).collect(),
    },
    Case {
        name: "ring reduce-scatter",
        machine: ring_machine,
        build: |p, dtype, len| ring_reduce_scatter_phase(p, "grads", ReduceOp::Mean, dtype, len),
        scales: |p| (0..p).map(|j| (j, p - 2, vec![(j + 1) % p])).collect(),
    },
    Case {
        name: "chain reduce",
        machine: ring_machine,
        build: |p, dtype, len| chain_reduce(p, "grads", ReduceOp::Mean, dtype, len),
        scales: |p| vec![(0, p - 2, vec![0])],
    },
];

fn schedule(case: &Case, p: usize, dtype: DType, len: u64) -> VerifiedSchedule {
    let mut phase = (case.build)(p, dtype, len);
    for (node, step, chunks) in (case.scales)(p) {
        phase.programs[node].steps[step].push(scale(&chunks, p));
    }
    verified_one((case.machine)(p), phase)
}

fn check<T: Random>(case: &Case, p: usize) {
    let schedule = schedule(case, p, T::DTYPE, 37);
    let s = schedule.schedule();
    let inputs: Vec<Vec<T>> = random_inputs(77 + p as u64, p, 37, ReduceOp::Mean);
    let outputs = run_phase(&schedule, "grads", inputs.clone()).unwrap();
    let expected = reference(&s.machine, &s.phases[0], &inputs).unwrap();
    let what = format!("{} p={p} {}", case.name, T::DTYPE);
    // Exact for integers, on every element the collective promises.
    compare(&s.machine, &s.phases[0], &inputs, &expected, &outputs)
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    let again = run_phase(&schedule, "grads", inputs.clone()).unwrap();
    assert_eq!(bits(&again), bits(&outputs), "{what}: second run");
    let threaded = Threaded::new(Duration::from_secs(5))
        .run(&schedule, "grads", inputs)
        .unwrap();
    assert_eq!(bits(&threaded), bits(&outputs), "{what}: threaded");
}

#[test]
fn every_case_matches_the_reference() {
    for case in &CASES {
        for p in 2..=6 {
            check::<i32>(case, p);
            check::<i64>(case, p);
            check::<f32>(case, p);
            check::<f64>(case, p);
            check::<half::f16>(case, p);
            check::<half::bf16>(case, p);
        }
    }
}

#[test]
fn integer_mean_is_the_wrapped_sum_divided() {
    // 3 nodes, i32: (MAX + MAX + 4) wraps to 2, and 2 / 3 truncates to 0; (-7 + 0 + 0) / 3
    // truncates toward zero to -2.
    let schedule = schedule(&CASES[0], 3, DType::I32, 3);
    let inputs = vec![vec![i32::MAX, -7, 9], vec![i32::MAX, 0, 9], vec![4, 0, 9]];
    let out = run_phase(&schedule, "grads", inputs.clone()).unwrap();
    assert_eq!(out, vec![vec![0, -2, 9]; 3]);
    let s = schedule.schedule();
    assert_eq!(reference(&s.machine, &s.phases[0], &inputs).unwrap(), out);
}

#[test]
fn float_mean_divides_once() {
    let schedule = schedule(&CASES[0], 4, DType::F64, 4);
    let inputs = vec![vec![1.0f64; 4], vec![2.0; 4], vec![3.0; 4], vec![4.5; 4]];
    let out = run_phase(&schedule, "grads", inputs).unwrap();
    assert_eq!(out, vec![vec![2.625; 4]; 4]);
}
