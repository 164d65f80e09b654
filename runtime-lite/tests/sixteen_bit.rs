//! The 16-bit floats (`f16`, `bf16`): sums that cannot round are exact, every run gives the
//! same bits, and a `bf16` allreduce stays within the documented tolerance of the same inputs
//! reduced in `f32`, while a result outside it is reported.
#![allow(clippy::unwrap_used, clippy::panic)]

mod common;

use common::*;
use half::{bf16, f16};
use runtime_lite::{compare, reference, run_phase, Element, Error};
use schedule_ir::{DType, Machine, Phase, ReduceOp};

type Builder = fn(usize, &str, ReduceOp, DType, u64) -> Phase;
type MachineOf = fn(usize) -> Machine;

/// The allreduce schedules to try: each adds in its own order.
const SCHEDULES: [(MachineOf, Builder); 3] = [
    (ring_machine, ring_allreduce),
    (ring_machine, pipelined_ring_allreduce),
    (star_machine, star_allreduce),
];

/// Small integers, so that every partial sum is an integer the type holds exactly: `f16`
/// holds every integer up to 2048, `bf16` up to 256.
fn small_integers(p: usize, len: usize, bound: i32) -> Vec<Vec<i32>> {
    (0..p)
        .map(|n| {
            (0..len)
                .map(|i| ((n * 31 + i * 17) % (2 * bound as usize + 1)) as i32 - bound)
                .collect()
        })
        .collect()
}

fn exact_sums<T: Element>(bound: i32, from: fn(f32) -> T) {
    let (p, len) = (8, 101);
    let ints = small_integers(p, len, bound);
    let inputs: Vec<Vec<T>> = ints
        .iter()
        .map(|v| v.iter().map(|&x| from(x as f32)).collect())
        .collect();
    for (machine, build) in SCHEDULES {
        let phase = build(p, "g", ReduceOp::Sum, T::DTYPE, len as u64);
        let schedule = verified_one(machine(p), phase);
        let out = run_phase(&schedule, "g", inputs.clone()).unwrap();
        let want: Vec<T> = (0..len)
            .map(|i| from(ints.iter().map(|v| v[i]).sum::<i32>() as f32))
            .collect();
        assert_eq!(bits(&out), bits(&vec![want; p]), "{}", T::DTYPE);
        let s = schedule.schedule();
        let expected = reference(&s.machine, &s.phases[0], &inputs).unwrap();
        assert_eq!(bits(&out), bits(&expected), "{}", T::DTYPE);
    }
}

#[test]
fn sums_of_small_integers_are_exact() {
    // |partial sums| <= 8 · 200 = 1600 < 2048 for f16; 8 · 16 = 128 < 256 for bf16.
    exact_sums::<f16>(200, f16::from_f32);
    exact_sums::<bf16>(16, bf16::from_f32);
}

/// Every schedule and op gives the same bits run after run (the mean: `tests/mean.rs`).
fn reproducible<T: Random>() {
    let p = 5;
    for (machine, build) in SCHEDULES {
        for op in [ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Max] {
            let schedule = verified_one(machine(p), build(p, "g", op, T::DTYPE, 777));
            let inputs: Vec<Vec<T>> = random_inputs(11, p, 777, op);
            let first = run_phase(&schedule, "g", inputs.clone()).unwrap();
            for _ in 0..3 {
                let again = run_phase(&schedule, "g", inputs.clone()).unwrap();
                assert_eq!(bits(&again), bits(&first), "{} {op}", T::DTYPE);
            }
        }
    }
}

#[test]
fn runs_are_bit_identical() {
    reproducible::<f16>();
    reproducible::<bf16>();
}

/// The documented sum tolerance, `2·p·ε·Σ|inputs|`, with `ε` the 16-bit type's.
fn tolerance(p: usize, epsilon: f64, inputs: &[Vec<f64>], i: usize) -> f64 {
    2.0 * p as f64 * epsilon * inputs.iter().map(|v| v[i].abs()).sum::<f64>()
}

#[test]
fn bf16_sum_is_within_the_tolerance_of_the_f32_sum() {
    let (p, len) = (8, 2000);
    let inputs: Vec<Vec<bf16>> = random_inputs(5, p, len, ReduceOp::Sum);
    // The same values in f32, exactly (a bf16 is the upper half of an f32).
    let wide: Vec<Vec<f32>> = inputs
        .iter()
        .map(|v| v.iter().map(|x| x.to_f32()).collect())
        .collect();
    let as_f64: Vec<Vec<f64>> = inputs
        .iter()
        .map(|v| v.iter().map(|x| x.to_f64()).collect())
        .collect();
    let narrow = verified_one(
        ring_machine(p),
        ring_allreduce(p, "g", ReduceOp::Sum, DType::BF16, len as u64),
    );
    let out = run_phase(&narrow, "g", inputs.clone()).unwrap();
    let wide_schedule = verified_one(
        ring_machine(p),
        ring_allreduce(p, "g", ReduceOp::Sum, DType::F32, len as u64),
    );
    let wide_out = run_phase(&wide_schedule, "g", wide).unwrap();
    let mut rounded_differently = 0;
    for i in 0..len {
        let (got, exact) = (out[0][i].to_f64(), f64::from(wide_out[0][i]));
        let allowed = tolerance(p, <bf16 as Element>::EPSILON, &as_f64, i);
        assert!(
            (got - exact).abs() <= allowed,
            "element {i}: bf16 {got} vs f32 {exact}, allowed {allowed}"
        );
        if out[0][i] != bf16::from_f32(wide_out[0][i]) {
            rounded_differently += 1;
        }
    }
    // The sum is carried in bf16 between steps: many elements differ from the f32 sum rounded
    // once, which a sum carried in f32 would give.
    assert!(
        rounded_differently > len / 10,
        "{rounded_differently} of {len}"
    );
}

#[test]
fn a_result_outside_the_tolerance_is_reported_and_one_inside_is_not() {
    let p = 4;
    let len = 64;
    let phase = ring_allreduce(p, "g", ReduceOp::Sum, DType::F16, len as u64);
    let schedule = verified_one(ring_machine(p), phase);
    let inputs: Vec<Vec<f16>> = random_inputs(3, p, len, ReduceOp::Sum);
    let s = schedule.schedule();
    let expected = reference(&s.machine, &s.phases[0], &inputs).unwrap();
    let as_f64: Vec<Vec<f64>> = inputs
        .iter()
        .map(|v| v.iter().map(|x| x.to_f64()).collect())
        .collect();
    // One unit in the last place off: within the tolerance.
    let mut near = expected.clone();
    near[2][5] = f16::from_bits(near[2][5].to_bits() ^ 1);
    compare(&s.machine, &s.phases[0], &inputs, &expected, &near).unwrap();
    // Twice the tolerance off: reported, naming the node, the element and the tolerance.
    let allowed = tolerance(p, <f16 as Element>::EPSILON, &as_f64, 5);
    let mut far = expected.clone();
    far[2][5] = f16::from_f64(expected[2][5].to_f64() + 2.0 * allowed + 1.0);
    match compare(&s.machine, &s.phases[0], &inputs, &expected, &far) {
        Err(Error::Mismatch {
            node,
            element,
            tolerance,
            ..
        }) => {
            assert_eq!((node.as_str(), element), ("N2", 5));
            assert_eq!(tolerance, Some(allowed));
        }
        other => panic!("expected a mismatch, got {other:?}"),
    }
}
