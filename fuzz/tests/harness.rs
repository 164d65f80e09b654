//! The fuzz targets' checks, run on stable over their seeds and over inputs built to be too
//! large — so that CI keeps the harness building and its oracles true without a nightly
//! toolchain or libFuzzer (`cargo test --manifest-path fuzz/Cargo.toml`).
#![allow(clippy::unwrap_used, clippy::panic)]

use std::path::Path;

/// Every `.ron` file of `dir`, relative to the fuzz crate, in name order.
fn files(dir: &str) -> Vec<(String, String)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "ron"))
        .collect();
    paths.sort();
    assert!(!paths.is_empty(), "no seeds in {}", dir.display());
    paths
        .into_iter()
        .map(|p| {
            (
                p.display().to_string(),
                std::fs::read_to_string(&p).unwrap(),
            )
        })
        .collect()
}

#[test]
fn the_topology_target_passes_its_seeds_and_the_bad_input_gallery() {
    for dir in ["seeds/topology", "../compiler/tests/bad"] {
        for (path, text) in files(dir) {
            eprintln!("{path}");
            topoc_fuzz::topology(&text);
        }
    }
}

#[test]
fn the_schedule_target_passes_its_seeds_and_the_bad_schedules() {
    for dir in ["seeds/schedule", "../schedule-ir/tests/bad"] {
        for (path, text) in files(dir) {
            eprintln!("{path}");
            topoc_fuzz::schedule(&text);
        }
    }
}

/// Machines far past what the compiler plans for are compiled, not skipped: the compiler must
/// refuse them itself, within the budget.
#[test]
fn a_machine_too_large_to_compile_is_refused_within_the_budget() {
    topoc_fuzz::topology(
        r#"Topology(
            name: "big-ring",
            machine: Ring(nodes: 16384, link: (bandwidth_gbps: 100.0, latency_us: 1.0)),
            phases: [Exchange(name: "g", collective: AllReduce, op: Sum, dtype: F32, elements: 1048576)],
        )"#,
    );
}

/// A verified schedule whose vector is too large to run within the limits is run, not cut
/// down: the runtime must refuse it, before allocating, within the budget.
#[test]
fn a_phase_too_large_to_run_is_refused_within_the_budget() {
    let (_, seed) = files("seeds/schedule")
        .into_iter()
        .find(|(p, _)| p.ends_with("ring3-allreduce-docs.ron"))
        .unwrap();
    let schedule = schedule_ir::serial::from_str(&seed).unwrap();
    let mut big = schedule.clone();
    for phase in &mut big.phases {
        *phase = phase.with_elements(1 << 40);
    }
    let text = schedule_ir::serial::to_string(&big, schedule_ir::serial::Format::Ron);
    let verified = schedule_ir::verify(big).unwrap();
    let phase = &verified.schedule().phases[0];
    let err =
        topoc::trial::run_phase_within(&verified, phase, 1, &topoc_fuzz::RUN_LIMITS).unwrap_err();
    assert!(err.contains("over the memory budget"), "{err}");
    topoc_fuzz::schedule(&text);
}
