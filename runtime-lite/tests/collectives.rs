//! The other collectives (reduce-scatter, allgather, broadcast, reduce), the reference for
//! each, and the comparison's verdicts.
#![allow(clippy::unwrap_used, clippy::panic)]

mod common;

use common::*;
use runtime_lite::{
    compare, compare_any, reference, reference_any, run_phase, run_phase_any, Buffers,
};
use schedule_ir::{DType, ReduceOp};

#[test]
fn reduce_scatter_gives_each_owner_its_chunk() {
    let p = 4;
    let phase = ring_reduce_scatter_phase(p, "rs", ReduceOp::Sum, DType::I64, 10);
    let schedule = verified_one(ring_machine(p), phase);
    let inputs: Vec<Vec<i64>> = (0..p as i64)
        .map(|n| (0..10).map(|e| 100 * n + e).collect())
        .collect();
    let out = run_phase(&schedule, "rs", inputs.clone()).unwrap();
    let s = schedule.schedule();
    let expected = reference(&s.machine, &s.phases[0], &inputs).unwrap();
    // Chunk c (elements 10c/4 .. 10(c+1)/4) is owned by node c-1; column sums are 600 + 4e.
    for (c, chunk) in s.phases[0].chunks.iter().enumerate() {
        let owner = (c + p - 1) % p;
        for e in chunk.start as usize..chunk.end as usize {
            assert_eq!(out[owner][e], 600 + 4 * e as i64);
            assert_eq!(expected[owner][e], 600 + 4 * e as i64);
        }
    }
    // Elements the collective promises nothing about hold partial sums in the run and the
    // inputs in the reference; the comparison ignores them.
    assert_ne!(out, expected);
    compare(&s.machine, &s.phases[0], &inputs, &expected, &out).unwrap();
}

#[test]
fn allgather_copies_each_owners_chunk() {
    let p = 5;
    let phase = ring_allgather_phase(p, "ag", ReduceOp::Sum, DType::F32, 13);
    let schedule = verified_one(ring_machine(p), phase);
    let inputs: Vec<Vec<f32>> = random_inputs(7, p, 13, ReduceOp::Sum);
    let out = run_phase(&schedule, "ag", inputs.clone()).unwrap();
    let s = schedule.schedule();
    let expected = reference(&s.machine, &s.phases[0], &inputs).unwrap();
    assert_eq!(bits(&out), bits(&expected));
    for (c, chunk) in s.phases[0].chunks.iter().enumerate() {
        let owner = (c + p - 1) % p;
        for e in chunk.start as usize..chunk.end as usize {
            assert_eq!(out[2][e].to_bits(), inputs[owner][e].to_bits());
        }
    }
    compare(&s.machine, &s.phases[0], &inputs, &expected, &out).unwrap();
}

#[test]
fn broadcast_gives_everyone_the_roots_vector() {
    let p = 4;
    let schedule = verified_one(ring_machine(p), chain_broadcast(p, "bc", DType::F64, 9));
    let inputs: Vec<Vec<f64>> = random_inputs(3, p, 9, ReduceOp::Sum);
    let out = run_phase(&schedule, "bc", inputs.clone()).unwrap();
    assert_eq!(bits(&out), bits(&vec![inputs[0].clone(); p]));
    let s = schedule.schedule();
    let expected = reference(&s.machine, &s.phases[0], &inputs).unwrap();
    compare(&s.machine, &s.phases[0], &inputs, &expected, &out).unwrap();
}

#[test]
fn reduce_gives_the_root_the_reduction() {
    let p = 5;
    for op in [ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Max, ReduceOp::Min] {
        let schedule = verified_one(ring_machine(p), chain_reduce(p, "r", op, DType::I32, 17));
        let inputs: Vec<Vec<i32>> = random_inputs(4, p, 17, op);
        let out = run_phase(&schedule, "r", inputs.clone()).unwrap();
        let s = schedule.schedule();
        let expected = reference(&s.machine, &s.phases[0], &inputs).unwrap();
        assert_eq!(out[0], expected[0], "{op}");
        assert_eq!(expected[1], inputs[1]);
        compare(&s.machine, &s.phases[0], &inputs, &expected, &out).unwrap();
    }
}

#[test]
fn dtype_erased_run_reference_and_compare() {
    let p = 3;
    let schedule = verified_one(
        ring_machine(p),
        ring_allreduce(p, "g", ReduceOp::Sum, DType::F64, 20),
    );
    let inputs = Buffers::from(random_inputs::<f64>(9, p, 20, ReduceOp::Sum));
    let out = run_phase_any(&schedule, "g", inputs.clone()).unwrap();
    let s = schedule.schedule();
    let expected = reference_any(&s.machine, &s.phases[0], &inputs).unwrap();
    compare_any(&s.machine, &s.phases[0], &inputs, &expected, &out).unwrap();
    assert_eq!(out.dtype(), DType::F64);
    assert_eq!(out.len(), p);
}

#[test]
fn compare_reports_the_first_differing_node_and_element() {
    let p = 3;
    let schedule = verified_one(
        ring_machine(p),
        ring_allreduce(p, "g", ReduceOp::Sum, DType::I32, 4),
    );
    let s = schedule.schedule();
    let inputs = vec![vec![1, 2, 3, 4]; p];
    let expected = reference(&s.machine, &s.phases[0], &inputs).unwrap();
    let mut actual = expected.clone();
    actual[1][2] = 10;
    actual[2][0] = 0;
    let err = compare(&s.machine, &s.phases[0], &inputs, &expected, &actual).unwrap_err();
    assert_eq!(
        err.to_string(),
        "phase `g`: node N1, element 2: got 10 but the reference is 9 (the values must match exactly)"
    );
}

#[test]
fn float_sums_are_compared_within_a_rounding_tolerance() {
    let p = 4;
    let schedule = verified_one(
        ring_machine(p),
        ring_allreduce(p, "g", ReduceOp::Sum, DType::F32, 1),
    );
    let s = schedule.schedule();
    // 1e8 + 1 - 1e8 + 1: the order of combination decides whether the ones survive.
    let inputs = vec![vec![1.0e8f32], vec![1.0], vec![-1.0e8], vec![1.0]];
    let expected = reference(&s.machine, &s.phases[0], &inputs).unwrap();
    let reordered = vec![vec![expected[0][0] + 8.0]; p];
    compare(&s.machine, &s.phases[0], &inputs, &expected, &reordered).unwrap();
    // Beyond 2·p·ε·Σ|x| (≈ 190.7) it is a mismatch.
    let wrong = vec![vec![expected[0][0] + 200.0]; p];
    let err = compare(&s.machine, &s.phases[0], &inputs, &expected, &wrong).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("phase `g`: node N0, element 0: got 201 but the reference is 1 (allowed difference 1.907"),
        "{err}"
    );
    // NaN against a number is a mismatch too.
    let nan = vec![vec![f32::NAN]; p];
    assert!(compare(&s.machine, &s.phases[0], &inputs, &expected, &nan).is_err());
}

#[test]
fn float_allgather_must_match_exactly() {
    let p = 2;
    let schedule = verified_one(
        ring_machine(p),
        ring_allgather_phase(p, "ag", ReduceOp::Sum, DType::F64, 2),
    );
    let s = schedule.schedule();
    let inputs = vec![vec![1.0f64, 2.0], vec![3.0, 4.0]];
    let expected = reference(&s.machine, &s.phases[0], &inputs).unwrap();
    let mut actual = expected.clone();
    actual[0][1] = f64::from_bits(actual[0][1].to_bits() + 1);
    let err = compare(&s.machine, &s.phases[0], &inputs, &expected, &actual).unwrap_err();
    assert!(
        err.to_string().contains("the values must match exactly"),
        "{err}"
    );
}
