//! Compile + verify time of ladder allreduce schedules, 4 to 128 pairs.
//!
//! Run: `cargo bench -p topoc --bench compile`. The schedule of a `p`-pair ladder has
//! `2(2p-1)` steps of `8` instructions per node, so its size grows as `p²`; throughput is
//! reported per instruction. The baseline, measured in the same run, is writing the same
//! schedule out as RON: a cost that is linear in the schedule's size by construction.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use std::hint::black_box;

fn ladder_source(pairs: usize) -> String {
    format!(
        "Topology(name: \"ladder-{pairs}\", machine: Ladder(pairs: {pairs}), phases: [\
         Exchange(name: \"grads\", collective: AllReduce, op: Sum, dtype: F32, elements: 16777216)])"
    )
}

fn instructions(pairs: usize) -> u64 {
    let source = ladder_source(pairs);
    let compiled =
        topoc::compile_source(&source, &topoc::Options::default()).expect("ladder compiles");
    compiled.schedule.schedule().phases[0]
        .programs
        .iter()
        .map(|p| p.steps.iter().map(Vec::len).sum::<usize>() as u64)
        .sum()
}

fn compile_and_verify(c: &mut Criterion) {
    let mut group = c.benchmark_group("ladder_allreduce_compile_verify");
    group.sample_size(10);
    for pairs in [4usize, 8, 16, 32, 64, 128] {
        let source = ladder_source(pairs);
        group.throughput(Throughput::Elements(instructions(pairs)));
        group.bench_with_input(BenchmarkId::from_parameter(pairs), &source, |b, s| {
            b.iter(|| {
                let compiled = topoc::compile_source(black_box(s), &topoc::Options::default())
                    .expect("compiles");
                black_box(compiled.schedule.report().phases.len())
            })
        });
    }
    group.finish();

    let mut baseline = c.benchmark_group("ladder_allreduce_write_ron");
    baseline.sample_size(10);
    for pairs in [4usize, 8, 16, 32, 64, 128] {
        let compiled = topoc::compile_source(&ladder_source(pairs), &topoc::Options::default())
            .expect("ladder compiles");
        baseline.throughput(Throughput::Elements(instructions(pairs)));
        baseline.bench_with_input(
            BenchmarkId::from_parameter(pairs),
            compiled.schedule.schedule(),
            |b, s| {
                b.iter(|| {
                    schedule_ir::serial::to_string(black_box(s), schedule_ir::serial::Format::Ron)
                        .len()
                })
            },
        );
    }
    baseline.finish();
}

criterion_group!(benches, compile_and_verify);
criterion_main!(benches);
