//! The `tree` method (seed 002): the asymmetric example, its collectives and its cost against
//! `ring`, and a property test over random tree shapes.
#![allow(clippy::panic, clippy::unwrap_used)]

use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use schedule_ir::{cost, DType, VerifiedSchedule};
use topoc::trial;

/// How many random trees the property test tries.
const CASES: u32 = 128;

fn example() -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/tree-asym.ron");
    std::fs::read_to_string(path).unwrap()
}

fn compile(source: &str, method: &str) -> VerifiedSchedule {
    let options = topoc::Options {
        algorithm: method.parse().ok(),
        ..topoc::Options::default()
    };
    match topoc::compile_source(source, &options) {
        Ok(c) => c.schedule,
        Err(e) => panic!("does not compile with {method}: {e:?}"),
    }
}

/// Runs every phase at every size and type given; each must match the reference and
/// reproduce bit for bit.
fn runs(verified: &VerifiedSchedule, dtypes: &[DType], sizes: &[u64], case: &str) {
    for &dtype in dtypes {
        for &elements in sizes {
            let adjusted = trial::adjust(verified.clone(), Some(dtype), Some(elements))
                .unwrap_or_else(|e| panic!("{case}: {e}"));
            for phase in &adjusted.schedule().phases {
                let run =
                    trial::run_phase(&adjusted, phase, 7).unwrap_or_else(|e| panic!("{case}: {e}"));
                let what = format!("{case} {} {dtype} × {elements}", phase.collective);
                assert_eq!(run.mismatch, None, "{what}: matches the reference");
                assert!(run.reproducible, "{what}: two runs are bit-identical");
            }
        }
    }
}

#[test]
fn tree_asym_verifies_and_runs_for_every_collective() {
    let source = example();
    for collective in ["AllReduce", "ReduceScatter", "AllGather"] {
        let text = source.replace(
            "collective: AllReduce",
            &format!("collective: {collective}"),
        );
        let verified = compile(&text, "tree");
        let phase = &verified.schedule().phases[0];
        assert_eq!(phase.algorithm, "tree");
        runs(
            &verified,
            &[DType::I32, DType::F32],
            &[0, 1, 5, 30_011],
            collective,
        );
    }
}

/// `tree` is slower than `ring` on the example: both are bound by the slow leaf link
/// `s00-p2`, which the ring keeps busy in every step. `auto` takes neither: `trees`, whose
/// links carry chunks in proportion to their speed in shared link directions, is cheaper
/// than both.
#[test]
fn ring_is_faster_than_tree_on_tree_asym_and_trees_faster_still() {
    let source = example();
    let estimate = |method: &str| {
        let v = compile(&source, method);
        let s = v.schedule();
        cost::estimate(&s.machine, &s.phases[0]).seconds
    };
    let (tree, ring, trees) = (estimate("tree"), estimate("ring"), estimate("trees"));
    assert!(ring <= tree, "tree {tree} s, ring {ring} s");
    assert!(trees < ring, "trees {trees} s, ring {ring} s");
    let auto = compile(&source, "auto");
    let phase = &auto.schedule().phases[0];
    assert_eq!(phase.algorithm, "trees");
    assert_eq!(phase.links, schedule_ir::LinkUse::Shared);
}

/// Where uplinks carry several transfers per step, `tree` beats the ring: fewer steps and a
/// better estimate (`examples/tree-fat.ron` says so in its comment).
#[test]
fn tree_beats_ring_on_a_fat_tree() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/tree-fat.ron");
    let source = std::fs::read_to_string(path).unwrap();
    let measure = |method: &str| {
        let v = compile(&source, method);
        let s = v.schedule();
        (
            s.phases[0].steps,
            cost::estimate(&s.machine, &s.phases[0]).seconds,
        )
    };
    let ((tree_steps, tree), (ring_steps, ring)) = (measure("tree"), measure("ring"));
    assert_eq!((tree_steps, ring_steps), (12, 30));
    assert!(tree < ring, "tree {tree} s, ring {ring} s");
}

/// A random tree in the topology syntax: 2 to `max_procs` (at least 2) processors, switches at most
/// `depth` levels deep with at most `fanout` children, random bandwidths and lanes.
fn random_tree(seed: u64, max_procs: usize, depth: u32, fanout: u32, collective: &str) -> String {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut budget = max_procs;
    let mut names = 0usize;
    // The root tries at least two children, so the tree has at least two processors.
    let root = switch(&mut rng, &mut budget, &mut names, depth, fanout, false);
    format!(
        "Topology(name: \"random\", machine: Tree(link: (bandwidth_gbps: 100.0, latency_us: 1.0), root: {root}),
        phases: [Exchange(name: \"x\", collective: {collective}, op: Sum, dtype: I32, elements: 1000)])"
    )
}

fn up(rng: &mut ChaCha8Rng, has_parent: bool) -> String {
    if !has_parent || rng.random_bool(0.5) {
        return String::new();
    }
    let bw = [25.0, 50.0, 100.0, 200.0, 400.0][rng.random_range(0..5)];
    let lanes = rng.random_range(1..=3);
    format!(", up: (bandwidth_gbps: {bw:.1}, lanes: {lanes})")
}

fn switch(
    rng: &mut ChaCha8Rng,
    budget: &mut usize,
    names: &mut usize,
    depth: u32,
    fanout: u32,
    has_parent: bool,
) -> String {
    *names += 1;
    let name = format!("s{names}");
    let up = up(rng, has_parent);
    let k = rng.random_range(if has_parent { 1 } else { 2 }..=fanout.max(2));
    let mut children = Vec::new();
    for i in 0..k {
        if *budget == 0 && i > 0 {
            break;
        }
        if depth == 0 || *budget < 2 || rng.random_bool(0.5) {
            *budget -= 1;
            *names += 1;
            children.push(format!(
                "Processor(name: \"p{names}\"{})",
                self::up(rng, true)
            ));
        } else {
            children.push(self::switch(rng, budget, names, depth - 1, fanout, true));
        }
    }
    format!(
        "Switch(name: \"{name}\"{up}, children: [{}])",
        children.join(", ")
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(CASES))]

    /// Random tree shapes up to 64 processors (random depth, fan-out, asymmetry, bandwidths
    /// and lanes), every collective `tree` lowers, vectors of 0, 1 and a random number of
    /// elements: every schedule verifies and runs to the reference result, reproducibly.
    #[test]
    fn random_trees_verify_and_run(
        seed in any::<u64>(),
        max_procs in 2usize..=64,
        depth in 0u32..=6,
        fanout in 1u32..=8,
        collective in prop::sample::select(vec!["AllReduce", "ReduceScatter", "AllGather"]),
        elements in 2u64..400,
    ) {
        let text = random_tree(seed, max_procs, depth, fanout, collective);
        let verified = compile(&text, "tree");
        runs(&verified, &[DType::I32], &[0, 1, elements], &text);
    }
}

#[test]
fn check_lists_the_tree_stages() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_topoc"))
        .args(["check", "examples/tree-asym.ron"])
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("tree: 3 stage(s), level by level"), "{text}");
    assert!(
        text.contains("height 3: `root` combines its children s0, s1, p5"),
        "{text}"
    );
}
