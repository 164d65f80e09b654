//! The mean op: sums scaled once, at the end. Correct mean schedules verify; each way of
//! getting the scale wrong is a file in `tests/bad/mean-*.ron`, with its exact errors.
#![allow(clippy::unwrap_used, clippy::panic)]

mod common;

use common::*;
use schedule_ir::{verify, BufferId, Collective, Instr, ReduceOp, Schedule};

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

fn scale(chunks: &[u32], divisor: u32) -> Instr {
    Instr::Scale {
        buffer: BufferId(0),
        chunks: ids(chunks).into(),
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
    for j in 0..4 {
        at(&mut s, j, 2).push(scale(&[((j + 1) % 4) as u32], 4));
    }
    ok(s);
}

#[test]
fn mean_reduce_needs_the_root_scaled_only() {
    let mut s = chain_reduce(4, 2, 64);
    phase(&mut s).op = ReduceOp::Mean;
    at(&mut s, 3, 2).push(scale(&[0, 1], 4));
    ok(s);
}

#[test]
fn gathers_under_mean_need_no_scale() {
    for mut s in [ring_allgather(4, 64), chain_broadcast(4, 2, 64)] {
        phase(&mut s).op = ReduceOp::Mean;
        ok(s);
    }
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
