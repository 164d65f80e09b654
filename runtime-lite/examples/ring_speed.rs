//! Measures the in-process driver on an 8-node ring allreduce of 16 Mi `f32` (64 MiB per node)
//! against a plain loop doing the same copies and additions, and prints the ratio.
//!
//! Run with `cargo run --release -p runtime-lite --example ring_speed [elements] [nodes]`.
#![allow(clippy::unwrap_used, clippy::panic)]

#[path = "../tests/common/mod.rs"]
mod common;

use runtime_lite::InProcess;
use schedule_ir::{DType, ReduceOp};
use std::time::{Duration, Instant};

const RUNS: usize = 5;

fn main() {
    let mut args = std::env::args().skip(1);
    let elements: usize = args.next().map_or(16 << 20, |a| a.parse().unwrap());
    let p: usize = args.next().map_or(8, |a| a.parse().unwrap());

    let phase = common::ring_allreduce(p, "grads", ReduceOp::Sum, DType::F32, elements as u64);
    let schedule = common::verified_one(common::ring_machine(p), phase);
    let mut runner = InProcess::<f32>::new(&schedule, "grads").unwrap();
    let mut buffers: Vec<Vec<f32>> = (0..p)
        .map(|n| {
            (0..elements)
                .map(|i| ((i + n) % 1000) as f32 * 1e-3)
                .collect()
        })
        .collect();

    let runtime = best_of(|| runner.run_in_place(&mut buffers).unwrap());
    let mut temps: Vec<Vec<f32>> = (0..p)
        .map(|_| Vec::with_capacity(elements / p + 1))
        .collect();
    let baseline = best_of(|| plain_ring(&mut buffers, &mut temps));

    // Every step moves one chunk per node: 2(p-1) steps of p chunks of elements/p.
    let moved = 2 * (p - 1) * elements * std::mem::size_of::<f32>();
    let gib = |d: Duration| moved as f64 / d.as_secs_f64() / f64::from(1 << 30);
    println!(
        "{p}-node ring allreduce of {elements} f32 ({} MiB per node, {} MiB moved)",
        (elements * 4) >> 20,
        moved >> 20
    );
    println!(
        "runtime-lite in process: {runtime:>10.2?}  ({:.2} GiB/s moved)",
        gib(runtime)
    );
    println!(
        "plain copy + add loop:   {baseline:>10.2?}  ({:.2} GiB/s moved)",
        gib(baseline)
    );
    println!(
        "ratio runtime / plain:   {:.3}",
        runtime.as_secs_f64() / baseline.as_secs_f64()
    );
}

/// The fastest of `RUNS` timed runs, after one warm-up.
fn best_of(mut f: impl FnMut()) -> Duration {
    f();
    (0..RUNS)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed()
        })
        .min()
        .unwrap()
}

/// The same data movement as the ring schedule, written as plain loops: per step, copy every
/// sent chunk out (start-of-step reads), then add (reduce-scatter) or copy (allgather) it into
/// the receiver. `temps` (one per node) are reused between calls, as the runtime reuses its
/// message vectors.
fn plain_ring(buffers: &mut [Vec<f32>], temps: &mut [Vec<f32>]) {
    let p = buffers.len();
    let n = buffers[0].len();
    let range = |c: usize| c * n / p..(c + 1) * n / p;
    for step in 0..2 * (p - 1) {
        let reduce = step < p - 1;
        let s = if reduce { step } else { step - (p - 1) };
        let chunk_of = |i: usize| {
            if reduce {
                (i + p - s) % p
            } else {
                (i + 1 + p - s) % p
            }
        };
        for (i, temp) in temps.iter_mut().enumerate() {
            temp.clear();
            temp.extend_from_slice(&buffers[i][range(chunk_of(i))]);
        }
        for (i, temp) in temps.iter().enumerate() {
            let dst = &mut buffers[(i + 1) % p][range(chunk_of(i))];
            if reduce {
                dst.iter_mut().zip(temp).for_each(|(d, s)| *d += *s);
            } else {
                dst.copy_from_slice(temp);
            }
        }
    }
}
