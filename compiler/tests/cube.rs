//! The cube methods: `cube-planes` (seed 000, methods 300 and 400) and `rotated-hd`: step
//! counts, link busyness, transfer times, efficiency, runs against the reference, and the
//! start-choice search.
#![allow(clippy::panic, clippy::unwrap_used)]

use schedule_ir::{Collective, DType, Schedule, VerifiedSchedule, FORMAT_VERSION};
use topoc::lower::cube_planes::{self, Variant};
use topoc::lower::PhaseSpec;
use topoc::trial;

/// Bytes per second of one direction of a 100 Gbit/s link.
const B: f64 = 100e9 / 8.0;

fn cube_text(collective: &str, algorithm: &str, variant: Option<u32>, elements: u64) -> String {
    let variant = variant.map_or(String::new(), |v| format!(", variant: {v}"));
    format!(
        r#"Topology(name: "cube", machine: Cube(link: (bandwidth_gbps: 100.0, latency_us: 1.0)),
        phases: [Exchange(name: "x", collective: {collective}, dtype: I32, elements: {elements},
        algorithm: "{algorithm}"{variant})])"#
    )
}

fn compile(text: &str) -> VerifiedSchedule {
    match topoc::compile_source(text, &topoc::Options::default()) {
        Ok(c) => c.schedule,
        Err(e) => panic!("does not compile: {e:?}"),
    }
}

/// Runs every phase for i32 and f32 against the reference, twice.
fn runs_exactly(verified: &VerifiedSchedule, what: &str) {
    for dtype in [DType::I32, DType::F32] {
        for elements in [12 * 1001 + 7, 5] {
            let adjusted = trial::adjust(verified.clone(), Some(dtype), Some(elements)).unwrap();
            for phase in &adjusted.schedule().phases {
                let run = trial::run_phase(&adjusted, phase, 7).unwrap();
                assert_eq!(run.mismatch, None, "{what} {dtype} × {elements}");
                assert!(run.reproducible, "{what} {dtype} × {elements}");
            }
        }
    }
}

/// Steps, and whether all 24 directions are busy in every step.
fn busyness(verified: &VerifiedSchedule) -> (u32, u64, Vec<usize>) {
    let report = &verified.report().phases[0];
    let busy = report.step_reports.iter().map(|s| s.busy).collect();
    (report.steps, report.idle_direction_steps, busy)
}

#[test]
fn cube_planes_400_is_six_busy_steps_at_two_thirds_q_over_b() {
    let q_elements = 12 * 4096u64;
    let v = compile(&cube_text(
        "AllReduce",
        "cube-planes",
        Some(400),
        q_elements,
    ));
    let (steps, idle, busy) = busyness(&v);
    assert_eq!(steps, 6);
    assert_eq!(idle, 0);
    assert_eq!(busy, vec![24; 6]);
    let q = (q_elements * 4) as f64;
    let est = schedule_ir::cost::estimate(&v.schedule().machine, &v.schedule().phases[0]);
    let want = 2.0 * q / (3.0 * B);
    assert!(
        (est.transfer_seconds - want).abs() < 1e-12 * want.max(1.0),
        "{est:?}"
    );
    runs_exactly(&v, "cube-planes 400");
}

#[test]
fn cube_planes_300_is_eight_busy_steps_at_two_thirds_q_over_b() {
    let q_elements = 12 * 4096u64;
    let v = compile(&cube_text(
        "AllReduce",
        "cube-planes",
        Some(300),
        q_elements,
    ));
    let (steps, idle, busy) = busyness(&v);
    assert_eq!(steps, 8);
    assert_eq!(idle, 0);
    assert_eq!(busy, vec![24; 8]);
    let q = (q_elements * 4) as f64;
    let est = schedule_ir::cost::estimate(&v.schedule().machine, &v.schedule().phases[0]);
    let want = 2.0 * q / (3.0 * B);
    assert!(
        (est.transfer_seconds - want).abs() < 1e-12 * want.max(1.0),
        "{est:?}"
    );
    runs_exactly(&v, "cube-planes 300");
}

#[test]
fn cube_planes_defaults_to_400() {
    let v = compile(&cube_text("AllReduce", "cube-planes", None, 1200));
    assert_eq!(v.schedule().phases[0].steps, 6);
}

#[test]
fn cube_planes_refuses_other_collectives_and_other_variants() {
    for (text, want) in [
        (
            cube_text("ReduceScatter", "cube-planes", None, 1200),
            "`cube-planes` does not lower reduce-scatter",
        ),
        (
            cube_text("AllReduce", "cube-planes", Some(500), 1200),
            "no variant 500",
        ),
        (
            cube_text("AllReduce", "ring", Some(300), 1200),
            "variant 300",
        ),
    ] {
        let e = topoc::compile_source(&text, &topoc::Options::default()).unwrap_err();
        assert!(format!("{e:?}").contains(want), "{e:?}");
    }
}

#[test]
fn rotated_hd_on_the_cube_reaches_the_traffic_bound() {
    let q_elements = 24 * 4096u64;
    let v = compile(&cube_text("AllReduce", "rotated-hd", None, q_elements));
    let (steps, idle, busy) = busyness(&v);
    assert_eq!(steps, 6);
    assert_eq!(idle, 0);
    assert_eq!(busy, vec![24; 6]);
    let q = (q_elements * 4) as f64;
    let est = schedule_ir::cost::estimate(&v.schedule().machine, &v.schedule().phases[0]);
    let want = 7.0 * q / (12.0 * B);
    assert!(
        (est.transfer_seconds - want).abs() < 1e-12 * want.max(1.0),
        "{est:?}"
    );
    runs_exactly(&v, "rotated-hd");
    // 256 MiB of f32.
    let big = trial::adjust(v, Some(DType::F32), Some(64 << 20)).unwrap();
    let eff = big.report().phases[0].efficiency;
    assert!(eff >= 0.99, "efficiency {eff}");
}

#[test]
fn rotated_hd_reduce_scatter_and_allgather_on_cube_and_hypercube() {
    for collective in ["ReduceScatter", "AllGather"] {
        let v = compile(&cube_text(collective, "rotated-hd", None, 24 * 100));
        let (steps, idle, _) = busyness(&v);
        assert_eq!((steps, idle), (3, 0), "{collective}");
        runs_exactly(&v, collective);
    }
    for (dims, collective) in [(4, "AllReduce"), (5, "ReduceScatter"), (2, "AllGather")] {
        let text = format!(
            r#"Topology(name: "h", machine: Hypercube(dims: {dims}), phases: [
            Exchange(name: "x", collective: {collective}, elements: 5000, algorithm: "rotated-hd")])"#
        );
        let v = compile(&text);
        let report = &v.report().phases[0];
        let half = if collective == "AllReduce" { 2 } else { 1 };
        assert_eq!(report.steps, half * dims, "{dims} dims {collective}");
        assert_eq!(report.idle_direction_steps, 0, "{dims} dims {collective}");
        runs_exactly(&v, collective);
        if collective == "AllReduce" {
            let big = trial::adjust(v, Some(DType::F32), Some(64 << 20)).unwrap();
            assert!(big.report().phases[0].efficiency >= 0.99);
        }
    }
}

#[test]
fn auto_prefers_rotated_hd_on_the_cube() {
    let text = cube_text("AllReduce", "auto", None, 1200);
    let c = topoc::compile_source(&text, &topoc::Options::default()).unwrap();
    assert_eq!(c.notes[0].method.name(), "rotated-hd");
}

fn spec() -> PhaseSpec {
    PhaseSpec {
        name: "x".to_string(),
        collective: Collective::AllReduce,
        op: schedule_ir::ReduceOp::Sum,
        dtype: DType::I32,
        elements: 1200,
    }
}

fn verify(machine: &topoc::machine::Machine, phase: schedule_ir::Phase) -> Result<(), String> {
    let schedule = Schedule {
        format_version: FORMAT_VERSION,
        machine: machine.to_ir(),
        program: Vec::new(),
        phases: vec![phase],
    };
    schedule_ir::verify(schedule)
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// The search rejects candidates the verifier rejects too, and takes one it proves.
#[test]
fn start_search_rejects_what_the_verifier_rejects() {
    let machine = topoc::compile::load(&cube_text("AllReduce", "auto", None, 1200))
        .unwrap()
        .machine;
    for variant in [Variant::V300, Variant::V400] {
        let found = cube_planes::search(&machine, variant).unwrap();
        assert!(found.rejected > 0, "some choices fail");
        let chosen =
            cube_planes::lower_choice(&spec(), "cube-planes", &machine, variant, &found.choice);
        verify(&machine, chosen.unwrap()).unwrap();
        // Every rejected candidate before it fails the real verifier as well (checked on a
        // sample: every 97th, and the first).
        let mut checked = 0;
        for (i, choice) in cube_planes::candidates().take(found.rejected).enumerate() {
            if i % 97 != 0 {
                continue;
            }
            let why = cube_planes::reject(&machine, &choice, variant).unwrap();
            assert!(why.is_some(), "candidate {i} was rejected");
            let phase =
                cube_planes::lower_choice(&spec(), "cube-planes", &machine, variant, &choice)
                    .unwrap();
            assert!(verify(&machine, phase).is_err(), "candidate {i}: {why:?}");
            checked += 1;
        }
        assert!(checked > 5);
        // Both ring orientations have valid choices (the seed's figures 24 and 25).
        let valid_clockwise = cube_planes::candidates().filter(|c| c.clockwise).any(|c| {
            cube_planes::reject(&machine, &c, variant)
                .unwrap()
                .is_none()
        });
        assert!(valid_clockwise, "clockwise has valid choices for {variant}");
    }
}

/// Of the 65 536 candidates, 256 work, for both variants alike (their phase-2 conditions turn
/// out to select the same choices): per pair of faces, 8 of the 16
/// start pairs work, each with one partner direction (4 with each of its two directions), and
/// the three pairs' partner directions must differ — 2 ways — in each of 2 orientations:
/// 2 · 2 · 4³ = 256.
#[test]
fn the_valid_start_choices_are_counted() {
    let machine = topoc::compile::load(&cube_text("AllReduce", "auto", None, 1200))
        .unwrap()
        .machine;
    // All candidates for 400; the counter-clockwise half (128 valid) for 300, to save time.
    for (variant, clockwise_too, want) in [(Variant::V400, true, 256), (Variant::V300, false, 128)]
    {
        let all: Vec<_> = cube_planes::candidates()
            .filter(|c| clockwise_too || !c.clockwise)
            .collect();
        let valid = cube_planes::rejections(&machine, &all, variant)
            .unwrap()
            .iter()
            .filter(|r| r.is_none())
            .count();
        assert_eq!(valid, want, "{variant}");
    }
    let found = cube_planes::search(&machine, Variant::V400).unwrap();
    assert_eq!(found.rejected, 2191);
    assert!(!found.choice.clockwise);
}

#[test]
fn rotated_hd_on_equal_sided_tori() {
    for (dims, collective, steps) in [
        ("[4, 4]", "AllReduce", 12),
        ("[3, 3, 3]", "AllReduce", 12),
        ("[5, 5]", "ReduceScatter", 8),
        ("[4, 4]", "AllGather", 6),
        ("[2, 2, 2]", "AllReduce", 6),
    ] {
        let text = format!(
            r#"Topology(name: "t", machine: Torus(dims: {dims}), phases: [
            Exchange(name: "x", collective: {collective}, elements: 7000, algorithm: "rotated-hd")])"#
        );
        let v = compile(&text);
        let report = &v.report().phases[0];
        assert_eq!(report.steps, steps, "{dims} {collective}");
        assert_eq!(report.idle_direction_steps, 0, "{dims} {collective}");
        runs_exactly(&v, &format!("torus {dims} {collective}"));
        if collective == "AllReduce" {
            let big = trial::adjust(v, Some(DType::F32), Some(64 << 20)).unwrap();
            let eff = big.report().phases[0].efficiency;
            assert!(eff >= 0.99, "{dims}: efficiency {eff}");
        }
    }
    let text = r#"Topology(name: "t", machine: Torus(dims: [4, 2]), phases: [
        Exchange(name: "x", collective: AllReduce, elements: 64, algorithm: "rotated-hd")])"#;
    let e = topoc::compile_source(text, &topoc::Options::default()).unwrap_err();
    assert!(format!("{e:?}").contains("one size"), "{e:?}");
}
