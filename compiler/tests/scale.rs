//! `auto` at scale: it lowers only the methods whose floor shows they could win, and its pick
//! is the one lowering every method would make.
//!
//! For a random machine of every kind (`gen/random.rs`) and a random collective, at sizes from
//! 1 KiB to 1 GiB: every method's floor ([`Method::floor`]) and the bound with which it may
//! decline to lower ([`Method::lower_unless`]) are at most the cost model's estimate of the
//! schedule it lowers, and `auto`'s pick equals the exhaustive pick (the
//! cheapest estimate, of equal ones — within a tie, [`beats`] — the first in [`Method::ALL`]). Examples are checked by
//! `examples.rs`, which lowers every method on every example and checks its floor, and whose
//! snapshot pins `auto`'s pick.
#![allow(clippy::panic, clippy::unwrap_used)]

mod gen;

use proptest::test_runner::{Config, TestCaseError, TestRng, TestRunner};
use topoc::compile::{beats, lower_phase, PhaseNote, Verdict};
use topoc::lower::floor::Floor;
use topoc::lower::{Choice, Knobs, Method, Unless};

/// Default number of random machines; `TOPOC_PROPTEST_CASES` asks for more.
const CASES: u32 = 3;

/// The sizes every phase is weighed at: 1 KiB to 1 GiB.
const SIZES: [u64; 3] = [1 << 10, 1 << 20, 1 << 30];

fn cases() -> u32 {
    std::env::var("TOPOC_PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(CASES)
}

/// Checks every phase of `text` at `sizes` (bytes; `None`: the phase's own size).
fn floors_hold(text: &str, sizes: &[Option<u64>]) -> Result<(), TestCaseError> {
    let loaded = topoc::load(text).map_err(|e| TestCaseError::fail(format!("{e}")))?;
    let machine = &loaded.machine;
    let ir = machine.to_ir();
    let knobs = Knobs::default();
    for request in loaded.phases().unwrap() {
        for size in sizes {
            let mut spec = request.spec.clone();
            if let Some(bytes) = size {
                spec.elements = bytes / spec.dtype.size_bytes();
            }
            let base = Floor::of(&ir, &spec);
            let mut exhaustive: Option<(f64, usize, Method)> = None;
            for (i, method) in Method::ALL.into_iter().enumerate() {
                if !method.supports(spec.collective) {
                    continue;
                }
                let floor = method.floor(machine, &spec, &knobs, &base);
                let Ok(lowered) = method.lower(machine, &spec, &knobs) else {
                    continue;
                };
                let estimate = schedule_ir::cost::estimate(&ir, &lowered.phase).seconds;
                if floor.is_nan() || floor > estimate {
                    return Err(TestCaseError::fail(format!(
                        "{method} at {} elements: floor {floor} s above its estimate \
                         {estimate} s\n{text}",
                        spec.elements
                    )));
                }
                // Asked to beat nothing, a method that declines says by how much it would lose:
                // that bound holds as a floor does.
                let declined = method.lower_unless(machine, &spec, &knobs, &|_| true);
                if let Ok(Unless::Outpriced(bound)) = declined {
                    if bound.is_nan() || bound > estimate {
                        return Err(TestCaseError::fail(format!(
                            "{method} at {} elements: declined with the bound {bound} s, \
                             above its estimate {estimate} s\n{text}",
                            spec.elements
                        )));
                    }
                }
                if exhaustive.is_none_or(|(s, b, _)| beats((estimate, i), (s, b))) {
                    exhaustive = Some((estimate, i, method));
                }
            }
            let picked = lower_phase(machine, &request.at, &spec, Choice::Auto, &knobs);
            match (exhaustive, picked) {
                (Some((_, _, best)), Ok((phase, note))) => {
                    if note.method != best || phase.algorithm != best.name() {
                        return Err(TestCaseError::fail(format!(
                            "auto picked {} where lowering every method picks {best} at {} \
                             elements: {}\n{text}",
                            note.method, spec.elements, note.reason
                        )));
                    }
                }
                (None, Err(_)) => {}
                (best, picked) => {
                    return Err(TestCaseError::fail(format!(
                        "exhaustive {best:?}, auto {:?}\n{text}",
                        picked.map(|(_, n)| n.reason)
                    )))
                }
            }
        }
    }
    Ok(())
}

#[test]
fn floors_bound_estimates_and_pruning_keeps_the_pick_on_random_machines() {
    let config = Config {
        cases: cases(),
        source_file: Some(file!()),
        ..Config::default()
    };
    let rng = TestRng::deterministic_rng(config.rng_algorithm);
    let mut runner = TestRunner::new_with_rng(config, rng);
    let sizes: Vec<Option<u64>> = SIZES.iter().map(|&s| Some(s)).collect();
    runner
        .run(&proptest::prelude::any::<u64>(), |seed| {
            floors_hold(&gen::random::topology(seed), &sizes)
        })
        .unwrap();
}

/// What `auto` says of the first phase of the topology `text`.
fn auto_note(text: &str) -> PhaseNote {
    let loaded = topoc::load(text).unwrap();
    let request = &loaded.phases().unwrap()[0];
    let (_, note) = lower_phase(
        &loaded.machine,
        &request.at,
        &request.spec,
        Choice::Auto,
        &Knobs::default(),
    )
    .unwrap();
    note
}

/// What `auto` says of a 4 MiB allreduce on an 8 × 8 torus of links of `gbps` and `latency_us`.
fn torus_8x8_allreduce(gbps: f64, latency_us: f64) -> PhaseNote {
    auto_note(&format!(
        "Topology(name: \"t\", machine: Torus(dims: [8, 8], link: (bandwidth_gbps: {gbps:?}, \
         latency_us: {latency_us:?})), phases: [Exchange(name: \"p\", collective: AllReduce, \
         op: Sum, dtype: F32, elements: 1048576)])"
    ))
}

/// On an 8×8 torus `ring` needs `2·63` steps of at least one link latency each, `rotated-hd`
/// 28 at the bandwidth bound and `matching` 20: `auto` never lowers the ring, and says so.
#[test]
fn auto_skips_the_ring_on_a_large_torus_and_says_so() {
    let note = torus_8x8_allreduce(100.0, 1.0);
    assert_ne!(note.method, Method::Ring, "{}", note.reason);
    let ring = note
        .weighed
        .iter()
        .find(|w| w.method == Method::Ring)
        .unwrap();
    let Verdict::Skipped(floor) = ring.verdict else {
        panic!("ring was not skipped: {:?}", ring.verdict);
    };
    // 126 steps of 1 µs at least.
    assert!(floor >= 126e-6 * (1.0 - 1e-9), "{floor}");
    assert!(
        note.reason.contains("; ring ≥ "),
        "the reason names the skipped ring: {}",
        note.reason
    );
    assert!(note.reason.contains(", not lowered"), "{}", note.reason);
}

/// On a 4 × 4 torus at 256 MiB `rotated-hd` and `matching` meet the bandwidth bound within
/// 0.1%, and `trees`' floor (its pipeline's steps) is below both: `trees` is handed the
/// winner's estimate and declines with
/// the least bound of its pipeline depths, which sees what every depth pays to fill and
/// drain, before it schedules any of them. Without the decline it would be lowered and priced.
#[test]
fn trees_declines_where_no_pipeline_depth_can_win() {
    let text = include_str!("../../examples/torus4x4.ron");
    let loaded = topoc::load(text).unwrap();
    let machine = &loaded.machine;
    let ir = machine.to_ir();
    let knobs = Knobs::default();
    let request = &loaded.phases().unwrap()[0];
    let mut spec = request.spec.clone();
    spec.elements = (256 << 20) / spec.dtype.size_bytes();
    let (_, note) = lower_phase(machine, &request.at, &spec, Choice::Auto, &knobs).unwrap();
    assert!(
        matches!(note.method, Method::RotatedHd | Method::Matching),
        "{}",
        note.reason
    );
    let estimate = |m: Method| {
        let lowered = m.lower(machine, &spec, &knobs).unwrap();
        schedule_ir::cost::estimate(&ir, &lowered.phase).seconds
    };
    let best = estimate(note.method);
    let floor = Method::Trees.floor(machine, &spec, &knobs, &Floor::of(&ir, &spec));
    assert!(
        floor < best,
        "trees' floor {floor} already rules it out against {best}"
    );
    let trees = note
        .weighed
        .iter()
        .find(|w| w.method == Method::Trees)
        .unwrap();
    let Verdict::Skipped(bound) = trees.verdict else {
        panic!("trees was lowered: {:?}; {}", trees.verdict, note.reason);
    };
    assert!(
        best < bound && bound <= estimate(Method::Trees),
        "{best} {bound}"
    );
}

/// On a 32 × 32 torus (1 024 nodes) `auto` lowers one method only, for the allreduce and for
/// the allgather of `examples/torus4x4.ron`'s phases: the one it picks. The floors of `trees`
/// (its trees' depth, its pipeline's pieces), `ring` (its steps) and, for the allreduce,
/// `halving-doubling` (the bytes each of its steps moves over one link) show that none can beat
/// it, so none of them is packed or routed, and whichever of `rotated-hd` and `matching` (the steps its receptions take) is
/// lowered second is skipped by its floor too (BENCHMARKS.md, "`auto` compile time: small
/// machines and 1,024-node meshes").
#[test]
fn auto_lowers_one_method_on_a_1024_node_torus() {
    let text = "Topology(name: \"t\", machine: Torus(dims: [32, 32], link: (bandwidth_gbps: \
                200.0, latency_us: 0.5)), phases: [Exchange(name: \"grads\", collective: \
                AllReduce, op: Sum, dtype: F32, elements: 1048576), Exchange(name: \
                \"activations\", collective: AllGather, op: Sum, dtype: F32, elements: 65536)])";
    let loaded = topoc::load(text).unwrap();
    for request in loaded.phases().unwrap() {
        let (_, note) = lower_phase(
            &loaded.machine,
            &request.at,
            &request.spec,
            Choice::Auto,
            &Knobs::default(),
        )
        .unwrap();
        let lowered: Vec<Method> = note
            .weighed
            .iter()
            .filter(|w| matches!(w.verdict, Verdict::Estimate(_)))
            .map(|w| w.method)
            .collect();
        assert_eq!(lowered, [note.method], "{}", note.reason);
        let other = match note.method {
            Method::Matching => Method::RotatedHd,
            _ => Method::Matching,
        };
        for skipped in [Method::Trees, Method::Ring, other] {
            assert!(
                note.reason.contains(&format!("; {skipped} ≥ ")),
                "{skipped} is skipped with its floor: {}",
                note.reason
            );
        }
    }
}

/// A 64 × 64 torus (4096 nodes): `auto` compiles and proves an allreduce whose instructions
/// name more chunk ids (2^28) than the limit before lists were held as runs (2^25), and the
/// lists hold a run or two each. Takes minutes in a debug build, so it runs with
/// `TOPOC_LARGE_EXAMPLES=1` only (a release build takes a few seconds; BENCHMARKS.md).
#[test]
fn a_4096_node_torus_compiles_and_verifies_past_the_old_chunk_id_limit() {
    if std::env::var_os("TOPOC_LARGE_EXAMPLES").is_none() {
        return;
    }
    let text = "Topology(name: \"t\", machine: Torus(dims: [64, 64]), phases: [Exchange(name: \
                \"p\", collective: AllReduce, op: Sum, dtype: F32, elements: 16777216)])";
    let compiled =
        topoc::compile_source(text, &topoc::Options::default()).unwrap_or_else(|e| panic!("{e}"));
    let schedule = compiled.schedule.schedule();
    let (mut ids, mut runs, mut instrs) = (0u64, 0u64, 0u64);
    for instr in schedule.phases[0]
        .programs
        .iter()
        .flat_map(|p| p.steps.iter().flatten())
    {
        ids += instr.chunks().len() as u64;
        runs += instr.chunks().runs().len() as u64;
        instrs += 1;
    }
    assert!(ids > 1 << 25, "{ids} chunk ids");
    assert!(runs <= 2 * instrs, "{runs} runs in {instrs} instructions");
}

/// A hypercube of 15 dimensions (32 768 nodes): `auto` compiles and proves `rotated-hd`'s
/// allreduce in the pattern form. Its fibre holds about half a million distinct input sets
/// of 512 words; dense they were over the verifier's memory limit and the phase was refused;
/// stored sparse (`docs/ir.md`, "Scaling the symbolic state") they fit. Runs with
/// `TOPOC_LARGE_EXAMPLES=1` only (a release build takes about 6 s and 0.5 GB; BENCHMARKS.md).
#[test]
fn a_32768_node_hypercube_compiles_and_verifies() {
    if std::env::var_os("TOPOC_LARGE_EXAMPLES").is_none() {
        return;
    }
    let text = "Topology(name: \"h\", machine: Hypercube(dims: 15), phases: [Exchange(name: \
                \"p\", collective: AllReduce, op: Sum, dtype: F32, elements: 16777216)])";
    let loaded = topoc::load(text).unwrap_or_else(|e| panic!("{e}"));
    let compiled = topoc::compile::pattern::compile_pattern(&loaded, &topoc::Options::default())
        .unwrap_or_else(|e| panic!("{e}"))
        .expect("a hypercube's allreduce is a pattern");
    assert_eq!(compiled.notes.len(), 1);
    assert_eq!(compiled.notes[0].method.to_string(), "rotated-hd");
}

/// `auto` orders a searching method as if its floor were higher: on an 8 × 8 torus at 4 MiB
/// `matching`'s and `trees`' floors are below `rotated-hd`'s estimate, so taken by floors alone
/// they would be lowered first, and `matching`'s estimate, had it been above `trees`' floor,
/// would have let `trees` search its pipelines too. Lowered first, `rotated-hd` prices below
/// `trees`' floor, and `trees` is skipped; `matching`, lowered next, prices lower still.
#[test]
fn auto_orders_the_searches_as_if_their_floors_were_higher() {
    let note = torus_8x8_allreduce(200.0, 0.5);
    assert_eq!(note.method, Method::Matching, "{}", note.reason);
    let verdict = |m: Method| &note.weighed.iter().find(|w| w.method == m).unwrap().verdict;
    let Verdict::Estimate(rotated) = *verdict(Method::RotatedHd) else {
        panic!("{}", note.reason);
    };
    // `matching` could still win by its floor, so it is lowered; `trees` could not, and is not.
    assert!(
        matches!(verdict(Method::Matching), Verdict::Estimate(_)),
        "{}",
        note.reason
    );
    let Verdict::Skipped(trees) = *verdict(Method::Trees) else {
        panic!("trees was lowered: {}", note.reason);
    };
    assert!(trees >= rotated, "{}", note.reason);
}
