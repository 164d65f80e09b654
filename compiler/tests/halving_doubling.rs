//! Halving-doubling (seed 001) on rings of 6, 8, 12 and 24 nodes, a tree of switches and the
//! bundled ladder: every collective it lowers verifies, runs bit-exact against the reference for
//! i32 and bit-reproducibly for f32, and more slices spread the local reductions over more steps.
#![allow(clippy::panic, clippy::unwrap_used)]

use schedule_ir::{DType, VerifiedSchedule};
use topoc::trial;

/// A topology with one exchange phase of `collective` on `machine`.
fn topology(machine: &str, collective: &str) -> String {
    format!(
        r#"Topology(name: "hd", machine: {machine}, phases: [
            Exchange(name: "x", collective: {collective}, elements: 4099),
        ])"#
    )
}

fn ring(n: usize) -> String {
    format!("Ring(nodes: {n})")
}

const TREE: &str = r#"Tree(root: Switch(name: "root", children: [
    Switch(name: "s0", children: [Processor(name: "p0"), Processor(name: "p1"), Processor(name: "p2")]),
    Switch(name: "s1", children: [Processor(name: "p3"), Processor(name: "p4")]),
    Processor(name: "p5"),
]))"#;

fn compile(source: &str, slices: Option<usize>) -> VerifiedSchedule {
    let options = topoc::Options {
        algorithm: "halving-doubling".parse().ok(),
        slices,
        ..topoc::Options::default()
    };
    match topoc::compile_source(source, &options) {
        Ok(c) => c.schedule,
        Err(e) => panic!("does not compile: {e:?}\n{source}"),
    }
}

/// Runs every phase for i32 (must match the reference exactly) and f32 (must reproduce bit
/// for bit), at a moderate size and at a size smaller than the chunk count.
fn runs(verified: &VerifiedSchedule, case: &str) {
    for dtype in [DType::I32, DType::F32] {
        for elements in [10_007, 3] {
            let adjusted = trial::adjust(verified.clone(), Some(dtype), Some(elements))
                .unwrap_or_else(|e| panic!("{case}: {e}"));
            for phase in &adjusted.schedule().phases {
                let run =
                    trial::run_phase(&adjusted, phase, 5).unwrap_or_else(|e| panic!("{case}: {e}"));
                let what = format!("{case} {dtype} × {elements}");
                assert_eq!(run.mismatch, None, "{what}: matches the reference");
                assert!(run.reproducible, "{what}: two runs are bit-identical");
            }
        }
    }
}

#[test]
fn every_collective_verifies_and_runs_on_rings_of_any_size() {
    for n in [2, 3, 6, 8, 12, 24] {
        let root = format!("N{}", n / 2);
        for collective in [
            "AllReduce".to_string(),
            "ReduceScatter".to_string(),
            format!("Reduce(root: {root:?})"),
            "Reduce(root: \"N0\")".to_string(),
        ] {
            for slices in [1, 2, 4] {
                let case = format!("ring{n} {collective} slices {slices}");
                runs(
                    &compile(&topology(&ring(n), &collective), Some(slices)),
                    &case,
                );
            }
        }
    }
}

#[test]
fn routes_through_switches_verify_and_run() {
    for collective in ["AllReduce", "ReduceScatter", "Reduce(root: \"p4\")"] {
        runs(
            &compile(&topology(TREE, collective), None),
            &format!("tree {collective}"),
        );
    }
}

#[test]
fn the_ladder_runs_halving_doubling() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/ladder8.ron");
    let source = std::fs::read_to_string(path).unwrap();
    runs(&compile(&source, Some(2)), "ladder8");
    let reduce = source.replace("collective: AllReduce", "collective: Reduce(root: \"N3\")");
    assert_ne!(reduce, source, "ladder8 declares an allreduce");
    runs(&compile(&reduce, Some(4)), "ladder8 reduce");
}

/// Local reductions per step of the only phase, from the verifier's report.
fn reduces(verified: &VerifiedSchedule) -> Vec<usize> {
    verified.report().phases[0]
        .step_reports
        .iter()
        .map(|r| r.reduces)
        .collect()
}

#[test]
fn more_slices_spread_the_local_reductions_over_more_steps() {
    // Eight nodes on a full mesh: every partner is a neighbour, so a round of K slices is
    // exactly K steps and the counts can be read off. Three rounds.
    let mesh = topology("FullMesh(nodes: 8)", "AllReduce");
    let two = reduces(&compile(&mesh, Some(2)));
    let four = reduces(&compile(&mesh, Some(4)));
    // K = 2: round 0 is steps 0-1, round 1 steps 2-3, round 2 steps 4-5, then 3 collection
    // steps. Step t of a round reduces slice t-1; step 0 of a round reduces the last slice of
    // the round before; the very last slice is combined on arrival.
    assert_eq!(two, vec![0, 8, 8, 8, 8, 8, 0, 0, 0]);
    // K = 4: twelve distribution steps, every one but the first reduces on every node.
    assert_eq!(
        four,
        vec![0, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 0, 0, 0],
        "local reductions spread over the round's steps"
    );
    let text = compile(&mesh, Some(4)).report().to_string();
    assert!(text.contains("  reduces 8  "), "{text}");
    // The per-round override: 1 slice (combine on arrival) then 4, then 4.
    let source = mesh.replace("elements: 4099", "elements: 4099, slices: [1, 4]");
    let per_round = compile(&source, None);
    assert_eq!(
        reduces(&per_round),
        vec![0, 0, 8, 8, 8, 8, 8, 8, 8, 0, 0, 0]
    );
    runs(&per_round, "full mesh slices [1, 4]");
}

#[test]
fn slices_out_of_range_are_refused() {
    let source =
        topology(&ring(6), "AllReduce").replace("elements: 4099", "elements: 9, slices: 0");
    let Err(e) = topoc::compile_source(&source, &topoc::Options::default()) else {
        panic!("0 slices compiles");
    };
    assert!(format!("{e:?}").contains("out of range"), "{e:?}");
}

/// Seed 001's claim, in the cost model: on a machine that declares how fast it combines
/// (`reduce_gbps`), receiving a slice into scratch and reducing it one step later hides the
/// reduction behind the next transfer, so more slices leave less reduction exposed while the
/// transfer time stays the same.
#[test]
fn slices_hide_the_reduction_behind_the_transfers() {
    let source = topology(&ring(12), "AllReduce")
        .replace("Topology(", "Topology(reduce_gbps: 100.0, ")
        .replace("elements: 4099", "elements: 67108864");
    let priced = |slices| {
        let verified = compile(&source, Some(slices));
        let schedule = verified.schedule();
        schedule_ir::cost::estimate(&schedule.machine, &schedule.phases[0])
    };
    let estimates: Vec<_> = [1, 2, 4, 8].into_iter().map(priced).collect();
    for pair in estimates.windows(2) {
        assert!(
            pair[1].reduce_seconds < pair[0].reduce_seconds,
            "{:?}",
            estimates
                .iter()
                .map(|e| e.reduce_seconds)
                .collect::<Vec<_>>()
        );
        let same = (pair[1].transfer_seconds - pair[0].transfer_seconds).abs();
        assert!(same < 1e-9 * pair[0].transfer_seconds, "{estimates:?}");
    }
    // One slice reduces every received half on arrival: each round's combining is exposed.
    assert!(estimates[0].reduce_seconds > 0.4 * estimates[0].transfer_seconds);
    // Without a rate nothing is charged.
    let free = compile(&topology(&ring(12), "AllReduce"), Some(1));
    let schedule = free.schedule();
    let e = schedule_ir::cost::estimate(&schedule.machine, &schedule.phases[0]);
    assert_eq!(e.reduce_seconds, 0.0);
}
