//! Allreduce schedules (ring, two-directional ring, pipelined ring with scratch, star through a
//! switch) run in process on random data and checked against the reference reduction.
#![allow(clippy::unwrap_used, clippy::panic)]

mod common;

use common::*;
use runtime_lite::{compare, reference, run_phase, InProcess};
use schedule_ir::{DType, Machine, Phase, ReduceOp};

const OPS: [ReduceOp; 4] = [ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Max, ReduceOp::Min];

type Builder = fn(usize, &str, ReduceOp, DType, u64) -> Phase;

/// Runs `build(p, …)` on random inputs for every op and checks it against the reference; if
/// `identical`, also that every node ends with the same bits. Returns nothing; panics on
/// failure.
fn check<T: Random>(
    machine: fn(usize) -> Machine,
    build: Builder,
    p: usize,
    len: usize,
    identical: bool,
) {
    for (k, op) in OPS.into_iter().enumerate() {
        let phase = build(p, "grads", op, T::DTYPE, len as u64);
        let schedule = verified_one(machine(p), phase);
        let inputs: Vec<Vec<T>> = random_inputs(1000 * p as u64 + k as u64, p, len, op);
        let outputs = run_phase(&schedule, "grads", inputs.clone()).unwrap();
        let s = schedule.schedule();
        let phase = &s.phases[0];
        let expected = reference(&s.machine, phase, &inputs).unwrap();
        if !T::IS_FLOAT || matches!(op, ReduceOp::Max | ReduceOp::Min) {
            // Integers, and float max/min, do not depend on the order of combination.
            assert_eq!(bits(&outputs), bits(&expected), "{} p={p} {op}", T::DTYPE);
        }
        compare(&s.machine, phase, &inputs, &expected, &outputs)
            .unwrap_or_else(|e| panic!("{} p={p} {op}: {e}", T::DTYPE));
        if identical {
            for node in &outputs[1..] {
                assert_eq!(
                    bits(std::slice::from_ref(node)),
                    bits(&outputs[..1]),
                    "{} p={p} {op}",
                    T::DTYPE
                );
            }
        }
        // Two runs give the same bits.
        let again = run_phase(&schedule, "grads", inputs).unwrap();
        assert_eq!(bits(&again), bits(&outputs));
    }
}

fn check_all_types(
    machine: fn(usize) -> Machine,
    build: Builder,
    p: usize,
    len: usize,
    identical: bool,
) {
    check::<i32>(machine, build, p, len, identical);
    check::<i64>(machine, build, p, len, identical);
    check::<f32>(machine, build, p, len, identical);
    check::<f64>(machine, build, p, len, identical);
    check::<half::f16>(machine, build, p, len, identical);
    check::<half::bf16>(machine, build, p, len, identical);
}

#[test]
fn ring_allreduce_matches_reference() {
    for p in [2, 3, 4, 5, 8] {
        for len in [1, p - 1, p, 1000, 1003] {
            check_all_types(ring_machine, ring_allreduce, p, len, true);
        }
    }
}

#[test]
fn bidirectional_ring_allreduce_matches_reference() {
    for p in [2, 3, 4, 7] {
        for len in [3, 2 * p, 999] {
            check_all_types(ring_machine, bidirectional_ring_allreduce, p, len, true);
        }
    }
}

#[test]
fn pipelined_ring_allreduce_with_scratch_matches_reference() {
    for p in [2, 3, 4, 6] {
        for len in [5, 2 * p, 1001] {
            check_all_types(ring_machine, pipelined_ring_allreduce, p, len, true);
        }
    }
}

#[test]
fn allreduce_through_a_switch_matches_reference() {
    // Every node combines in its own order, so float sums differ between nodes (within the
    // tolerance); integers still agree exactly.
    for p in [2, 3, 5] {
        check_all_types(star_machine, star_allreduce, p, 257, false);
    }
}

#[test]
fn integer_sums_and_products_wrap() {
    let p = 4;
    let phase = ring_allreduce(p, "grads", ReduceOp::Sum, DType::I32, 4);
    let schedule = verified_one(ring_machine(p), phase);
    let inputs = vec![vec![i32::MAX, i32::MIN, -1, 7]; p];
    let out = run_phase(&schedule, "grads", inputs).unwrap();
    let want = vec![i32::MAX.wrapping_mul(4), i32::MIN.wrapping_mul(4), -4, 28];
    assert_eq!(out, vec![want; p]);

    let phase = ring_allreduce(p, "grads", ReduceOp::Prod, DType::I64, 2);
    let schedule = verified_one(ring_machine(p), phase);
    let inputs = vec![vec![i64::MAX, 1 << 40]; p];
    let out = run_phase(&schedule, "grads", inputs).unwrap();
    let want = vec![i64::MAX.wrapping_pow(4), (1i64 << 40).wrapping_pow(4)];
    assert_eq!(out, vec![want; p]);
}

#[test]
fn float_max_min_ignore_nan_and_order_signed_zeros() {
    let p = 3;
    for (op, want) in [
        (ReduceOp::Max, [2.0f32, 0.0]),
        (ReduceOp::Min, [-1.0, -0.0]),
    ] {
        let phase = ring_allreduce(p, "m", op, DType::F32, 2);
        let schedule = verified_one(ring_machine(p), phase);
        let inputs = vec![vec![f32::NAN, -0.0], vec![2.0, 0.0], vec![-1.0, f32::NAN]];
        let out = run_phase(&schedule, "m", inputs).unwrap();
        assert_eq!(bits(&out), bits(&vec![want.to_vec(); p]), "{op}");
    }
}

#[test]
fn in_process_runner_is_reusable_and_resets_scratch() {
    let p = 4;
    let phase = pipelined_ring_allreduce(p, "grads", ReduceOp::Sum, DType::F64, 100);
    let schedule = verified_one(ring_machine(p), phase);
    let mut runner = InProcess::<f64>::new(&schedule, "grads").unwrap();
    assert_eq!(runner.nodes().len(), p);
    let a: Vec<Vec<f64>> = random_inputs(1, p, 100, ReduceOp::Sum);
    let b: Vec<Vec<f64>> = random_inputs(2, p, 100, ReduceOp::Sum);
    let first = runner.run(a.clone()).unwrap();
    let _ = runner.run(b).unwrap();
    let third = runner.run(a).unwrap();
    assert_eq!(bits(&first), bits(&third));
}

#[test]
fn empty_vector_runs() {
    let p = 3;
    let phase = ring_allreduce(p, "grads", ReduceOp::Sum, DType::I64, 0);
    let schedule = verified_one(ring_machine(p), phase);
    let out = run_phase::<i64>(&schedule, "grads", vec![Vec::new(); p]).unwrap();
    assert_eq!(out, vec![Vec::<i64>::new(); p]);
}
