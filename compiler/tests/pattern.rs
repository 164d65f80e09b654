//! The pattern form: `rotated-hd`'s origin program, proved without expanding it, against the
//! explicit verifier on its expansion — on valid patterns and on patterns wrong on purpose.

#![allow(clippy::panic)]

use schedule_ir::{
    serial, verify, verify_pattern, ChunkId, ChunkIds, Collective, DType, Instr, NodeId, Pattern,
    RecvMode, ReduceOp, FORMAT_VERSION,
};
use topoc::lower::{mean, rotated, PhaseSpec};

fn machine(kind: &str) -> topoc::machine::Machine {
    let text = format!("Topology(name: \"m\", machine: {kind})");
    topoc::load(&text).expect("machine builds").machine
}

fn spec(collective: Collective, elements: u64) -> PhaseSpec {
    PhaseSpec {
        name: "grads".to_string(),
        collective,
        op: ReduceOp::Sum,
        dtype: DType::F32,
        elements,
    }
}

fn pattern_of(machine: &topoc::machine::Machine, spec: &PhaseSpec) -> Pattern {
    let (grid, phase) = rotated::pattern(spec, "rotated-hd", machine).expect("pattern lowers");
    Pattern {
        grid,
        format_version: FORMAT_VERSION,
        machine: machine.to_ir(),
        program: Vec::new(),
        phases: vec![phase],
    }
}

const MACHINES: [&str; 9] = [
    "Ring(nodes: 5)",
    "Torus(dims: [3, 3])",
    "Torus(dims: [4, 4])",
    "Torus(dims: [5, 5])",
    "Torus(dims: [3, 3, 3])",
    "Torus(dims: [7])",
    "Hypercube(dims: 3)",
    "Hypercube(dims: 4)",
    "Cube()",
];

const COLLECTIVES: [Collective; 3] = [
    Collective::AllReduce,
    Collective::ReduceScatter,
    Collective::AllGather,
];

/// A step's instructions in a fixed order, to compare two programs that list the same
/// instructions in different orders.
fn sorted(step: &[Instr]) -> Vec<String> {
    let mut v: Vec<String> = step.iter().map(|i| format!("{i:?}")).collect();
    v.sort();
    v
}

/// Asserts that `expanded` and `explicit` hold the same instructions, node by node and step by
/// step (in any order within a step).
fn same_steps(expanded: &schedule_ir::Phase, explicit: &schedule_ir::Phase, what: &str) {
    assert_eq!(expanded.programs.len(), explicit.programs.len(), "{what}");
    for (n, (a, b)) in expanded.programs.iter().zip(&explicit.programs).enumerate() {
        assert_eq!(a.steps.len(), b.steps.len(), "{what}: node {n}");
        for (k, (x, y)) in a.steps.iter().zip(&b.steps).enumerate() {
            assert_eq!(sorted(x), sorted(y), "{what}: node {n} step {k}");
        }
    }
}

#[test]
fn a_pattern_is_proved_and_expands_to_the_explicit_schedule() {
    for kind in MACHINES {
        let m = machine(kind);
        for collective in COLLECTIVES {
            // Divisible by every chunk count here, and not.
            for elements in [7560u64 * 8, 1001] {
                let spec = spec(collective, elements);
                let pattern = pattern_of(&m, &spec);
                let verified = verify_pattern(pattern.clone())
                    .unwrap_or_else(|e| panic!("{kind} {collective}: {e}"));
                let explicit = rotated::lower(&spec, "rotated-hd", &m).expect("lowers");
                let origin = pattern.grid.nodes[0];
                assert_eq!(
                    explicit.programs[origin.index()],
                    pattern.phases[0].programs[0],
                    "{kind} {collective}: the origin's program is node 0's"
                );
                let expanded = pattern.expand().expect("expands");
                same_steps(
                    &expanded.phases[0],
                    &explicit,
                    &format!("{kind} {collective}"),
                );
                let proved = verify(expanded).expect("the expansion verifies");
                let explicit_seconds = proved.report().phases[0].estimate.seconds;
                let pattern_seconds = verified.report().phases[0].estimate.seconds;
                if elements % 7560 == 0 {
                    assert!(
                        (explicit_seconds - pattern_seconds).abs() <= 1e-12 * explicit_seconds,
                        "{kind} {collective}: {pattern_seconds} against {explicit_seconds}"
                    );
                } else {
                    assert!(pattern_seconds >= explicit_seconds * (1.0 - 1e-12));
                }
                let bound = verified.report().phases[0].bound.seconds;
                assert!(
                    bound <= pattern_seconds * (1.0 + 1e-9),
                    "{kind}: bound {bound}"
                );
            }
        }
    }
}

/// The pattern of a mean phase, with its scales placed on the origin's program.
fn mean_pattern_of(machine: &topoc::machine::Machine, collective: Collective, n: u64) -> Pattern {
    let spec = PhaseSpec {
        op: ReduceOp::Mean,
        ..spec(collective, n)
    };
    let mut pattern = pattern_of(machine, &spec);
    let grid = pattern.grid.clone();
    mean::add_pattern_scales(&mut pattern.phases[0], &pattern.machine, &grid);
    pattern
}

#[test]
fn a_mean_pattern_scales_where_the_explicit_mean_schedule_does() {
    for kind in MACHINES {
        let m = machine(kind);
        for collective in [Collective::AllReduce, Collective::ReduceScatter] {
            for elements in [7560u64 * 8, 1001] {
                let pattern = mean_pattern_of(&m, collective, elements);
                let scales = pattern.phases[0].programs[0]
                    .steps
                    .iter()
                    .flatten()
                    .filter(|i| matches!(i, Instr::Scale { .. }))
                    .count();
                assert!(
                    scales > 0,
                    "{kind} {collective}: the origin divides its sums"
                );
                verify_pattern(pattern.clone())
                    .unwrap_or_else(|e| panic!("{kind} {collective}: {e}"));
                let spec = PhaseSpec {
                    op: ReduceOp::Mean,
                    ..spec(collective, elements)
                };
                let mut explicit = rotated::lower(&spec, "rotated-hd", &m).expect("lowers");
                mean::add_scales(&mut explicit, &m.compute_nodes());
                let expanded = pattern.expand().expect("expands");
                same_steps(
                    &expanded.phases[0],
                    &explicit,
                    &format!("{kind} {collective}"),
                );
                verify(expanded).expect("the expansion verifies");
            }
        }
    }
}

#[test]
fn a_mean_pattern_without_its_scales_or_scaling_twice_is_refused_as_its_expansion_is() {
    let m = machine("Torus(dims: [4, 4])");
    let unscaled = |pattern: &mut Pattern| {
        for step in &mut pattern.phases[0].programs[0].steps {
            step.retain(|i| !matches!(i, Instr::Scale { .. }));
        }
    };
    let twice = |pattern: &mut Pattern| {
        for step in &mut pattern.phases[0].programs[0].steps {
            let scales: Vec<Instr> = step
                .iter()
                .filter(|i| matches!(i, Instr::Scale { .. }))
                .cloned()
                .collect();
            step.extend(scales);
        }
    };
    type Change<'a> = &'a dyn Fn(&mut Pattern);
    let cases: [(&str, Change); 2] = [("scales removed", &unscaled), ("every scale twice", &twice)];
    for (what, change) in cases {
        let mut pattern = mean_pattern_of(&m, Collective::AllReduce, 4096);
        change(&mut pattern);
        let by_pattern = verify_pattern(pattern.clone()).expect_err(what);
        let by_explicit = verify(pattern.expand().expect(what)).expect_err(what);
        assert_eq!(
            kinds(&by_pattern),
            kinds(&by_explicit),
            "{what}: {by_pattern}"
        );
    }
}

#[test]
fn a_pattern_reads_back_and_is_smaller_than_its_expansion() {
    let m = machine("Torus(dims: [8, 8])");
    let pattern = pattern_of(&m, &spec(Collective::AllReduce, 1 << 16));
    for format in [serial::Format::Ron, serial::Format::Json] {
        let text = serial::pattern_to_string(&pattern, format, serial::Form::Compact);
        assert!(serial::is_pattern(&text));
        let back = serial::pattern_from_str(&text).expect("reads back");
        assert_eq!(back, pattern);
        // Read as a schedule, it is its expansion.
        let schedule = serial::from_str(&text).expect("expands on reading");
        assert_eq!(schedule, pattern.expand().expect("expands"));
        let explicit = serial::to_string_with(&schedule, format, serial::Form::Compact);
        assert!(!serial::is_pattern(&explicit));
        assert!(
            text.len() * 20 < explicit.len(),
            "{} against {}",
            text.len(),
            explicit.len()
        );
    }
}

/// The kinds of the errors of a refused schedule, sorted.
fn kinds(errors: &schedule_ir::VerifyErrors) -> Vec<String> {
    let mut v: Vec<String> = errors
        .errors
        .iter()
        .map(|e| {
            let json = serde_json::to_value(e).expect("serialises");
            json["kind"].as_str().unwrap_or("?").to_string()
        })
        .collect();
    v.sort();
    v.dedup();
    v
}

/// Applies `change` to the origin's program of a valid 4 × 4 torus allreduce.
fn mutant(change: impl Fn(&mut Vec<Vec<Instr>>)) -> Pattern {
    let m = machine("Torus(dims: [4, 4])");
    let mut pattern = pattern_of(&m, &spec(Collective::AllReduce, 4096));
    change(&mut pattern.phases[0].programs[0].steps);
    pattern
}

fn chunks_mut(instr: &mut Instr) -> &mut ChunkIds {
    match instr {
        Instr::Send { chunks, .. }
        | Instr::Recv { chunks, .. }
        | Instr::Reduce { chunks, .. }
        | Instr::Copy { chunks, .. }
        | Instr::Scale { chunks, .. } => chunks,
    }
}

#[test]
fn wrong_patterns_get_the_errors_their_expansions_get() {
    let cases: Vec<(&str, Pattern)> = vec![
        (
            "a send dropped",
            mutant(|s| {
                s[2].remove(0);
            }),
        ),
        (
            "a receive dropped",
            mutant(|s| {
                let last = s[2].len() - 1;
                s[2].remove(last);
            }),
        ),
        (
            "a receive stores instead of reducing",
            mutant(|s| {
                for i in s[1].iter_mut() {
                    if let Instr::Recv { mode, .. } = i {
                        *mode = RecvMode::Store;
                    }
                }
            }),
        ),
        (
            "a send carries another chunk, and so does its receive",
            mutant(|s| {
                for i in s[0].iter_mut() {
                    let list = chunks_mut(i);
                    let moved: ChunkIds = list.iter().map(|c| ChunkId(c.0 ^ 1)).collect();
                    *list = moved;
                }
            }),
        ),
        (
            "the last allgather step is gone from every node",
            mutant(|s| {
                let last = s.len() - 1;
                s[last].clear();
            }),
        ),
        (
            "a step sends twice on one link",
            mutant(|s| {
                let first = s[3][0].clone();
                s[3].push(first);
            }),
        ),
    ];
    for (what, pattern) in cases {
        let by_pattern = verify_pattern(pattern.clone()).expect_err(what);
        let expanded = pattern.expand().expect(what);
        let by_explicit = verify(expanded).expect_err(what);
        assert_eq!(
            kinds(&by_pattern),
            kinds(&by_explicit),
            "{what}: {by_pattern}"
        );
    }
}

#[test]
fn patterns_that_are_not_patterns_are_refused_with_their_reason() {
    let m = machine("Torus(dims: [4, 4])");
    let good = pattern_of(&m, &spec(Collective::AllReduce, 4096));
    let message = |p: Pattern| verify_pattern(p).expect_err("refused").errors[0].to_string();

    let mut p = good.clone();
    p.grid.nodes.pop();
    assert_eq!(
        message(p),
        "not a pattern: the grid's sizes [4, 4] make 16 positions, but it lists 15 nodes"
    );

    let mut p = good.clone();
    p.grid.nodes.swap(1, 2);
    let text = message(p);
    assert!(
        text.contains("not a pattern: moved to grid index"),
        "{text}"
    );

    let mut p = good.clone();
    p.phases[0].chunks[3].owner = Some(NodeId(0));
    p.phases[0].collective = Collective::ReduceScatter;
    for (c, chunk) in p.phases[0].chunks.iter_mut().enumerate() {
        if c != 3 {
            chunk.owner = Some(good.grid.nodes[c % 16]);
        }
    }
    assert_eq!(
        message(p),
        "phase `grads`: not a pattern: chunk 3 must be owned by grid node 3 (N(3,0)), the translate of chunk 0's owner"
    );

    let mut p = good.clone();
    p.phases[0].collective = Collective::Broadcast { root: NodeId(0) };
    assert_eq!(
        message(p),
        "phase `grads`: not a pattern: a broadcast from node#0 has a root, which no translation keeps; only allreduce, reduce-scatter and allgather are patterns"
    );

    let mut p = good.clone();
    let again = p.phases[0].programs[0].clone();
    p.phases[0].programs.push(again);
    assert_eq!(
        message(p),
        "phase `grads`: not a pattern: it has 2 programs; a pattern's phase has one, the origin's"
    );

    let mut p = good;
    if let Instr::Send { via, .. } = &mut p.phases[0].programs[0].steps[0][0] {
        via.push(schedule_ir::LinkId(0));
    }
    let text = message(p);
    assert!(
        text.contains("not a pattern") || text.contains("route"),
        "{text}"
    );
}

#[test]
fn a_pattern_whose_links_differ_is_refused_by_the_proof_and_by_expansion_alike() {
    // One verdict per file: `verify` proves the pattern, `run`, `draw` and `simulate` expand
    // it; a link slower than the origin's would make the expansion a valid schedule that the
    // pattern's estimate, priced from the origin, does not describe.
    let m = machine("Torus(dims: [4, 4])");
    let mut p = pattern_of(&m, &spec(Collective::AllReduce, 4096));
    let last = p.machine.links.len() - 1;
    p.machine.links[last].bandwidth_gbps /= 2.0;
    let errors = verify_pattern(p.clone()).expect_err("refused");
    assert!(
        errors.errors[0]
            .to_string()
            .contains("with its bandwidth, latency and lanes, and the machine has none"),
        "{errors}"
    );
    let expanded = p.expand().expect_err("refused").to_string();
    assert!(
        expanded.contains("no one link with the bandwidth, latency and lanes of the origin's"),
        "{expanded}"
    );
}

#[test]
fn a_pattern_naming_chunks_past_its_phase_is_refused_before_expanding() {
    // A run of 2^31 ids is a few bytes of text; expanding it at every node would take 8 GiB.
    let m = machine("Torus(dims: [4, 4])");
    let mut p = pattern_of(&m, &spec(Collective::AllReduce, 4096));
    let mut run = ChunkIds::default();
    run.push_run(schedule_ir::ChunkRun::consecutive(0, 1 << 31));
    *chunks_mut(&mut p.phases[0].programs[0].steps[0][0]) = run;
    let refused = p.expand().expect_err("refused").to_string();
    assert!(
        refused
            .contains("the origin's program names chunk 2147483647, but the phase has 64 chunks"),
        "{refused}"
    );
}

#[test]
fn a_pattern_on_a_large_torus_is_proved_without_expanding() {
    // 64 × 64: 8 257 536 instructions once expanded; the pattern holds 2016.
    let m = machine("Torus(dims: [64, 64])");
    let pattern = pattern_of(&m, &spec(Collective::AllReduce, 1 << 26));
    let verified = verify_pattern(pattern).expect("proved");
    let report = &verified.report().phases[0];
    assert_eq!(report.instructions, 8_257_536);
    assert_eq!(report.steps, 252);
    assert!(
        report.efficiency > 0.9 && report.efficiency <= 1.0,
        "{}",
        report.efficiency
    );
}

/// `topoc` on `args`, from a temporary directory: its exit code, standard output and error.
fn topoc(dir: &std::path::Path, args: &[&str]) -> (i32, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_topoc"))
        .args(args)
        .current_dir(dir)
        .output()
        .expect("topoc runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn compile_writes_a_pattern_that_verify_proves_and_run_runs() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let topology = "Topology(name: \"t\", machine: Torus(dims: [4, 4]), phases: [Exchange(name: \"grads\", collective: AllReduce, op: Sum, dtype: I32, elements: 4096, algorithm: \"rotated-hd\")])";
    std::fs::write(dir.path().join("t.ron"), topology).expect("writes");
    let (code, _, err) = topoc(
        dir.path(),
        &["compile", "t.ron", "--compact", "-o", "t.pat.ron"],
    );
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("in the pattern form"), "{err}");
    let text = std::fs::read_to_string(dir.path().join("t.pat.ron")).expect("written");
    assert!(text.starts_with("Pattern("), "{}", &text[..40]);

    let (code, out, err) = topoc(dir.path(), &["verify", "t.pat.ron"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("16 compute nodes on a 4 × 4 grid"), "{out}");
    assert!(out.contains("t.pat.ron: verified"), "{out}");

    let (code, out, err) = topoc(dir.path(), &["run", "t.pat.ron"]);
    assert_eq!(code, 0, "{out}{err}");

    // Two grid nodes swapped: the origin's links no longer move to every node.
    let mut pattern = serial::pattern_from_str(&text).expect("reads");
    pattern.grid.nodes.swap(1, 2);
    let bad = serial::pattern_to_string(&pattern, serial::Format::Json, serial::Form::Compact);
    std::fs::write(dir.path().join("bad.json"), bad).expect("writes");
    let (code, _, err) = topoc(dir.path(), &["verify", "bad.json"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("not a pattern: moved to grid index"), "{err}");
    assert!(err.contains("failed verification"), "{err}");
    let (code, out, _) = topoc(dir.path(), &["verify", "bad.json", "--format", "json"]);
    assert_eq!(code, 1);
    assert!(out.contains("\"kind\": \"NotAPattern\""), "{out}");
}

#[test]
fn a_ring_too_large_for_the_explicit_form_compiles_as_a_pattern_and_a_small_one_does_not() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let ring = |n: usize, elements: usize| {
        format!(
            "Topology(name: \"r\", machine: Ring(nodes: {n}), phases: [Exchange(name: \"grads\", \
             collective: AllReduce, op: Sum, dtype: I32, elements: {elements})])"
        )
    };
    // 1449 nodes: both walks of the ring, explicit, would be over 2^24 instructions, and
    // `auto` would take halving-doubling at hundreds of times the time.
    std::fs::write(dir.path().join("big.ron"), ring(1449, 2 * 1449)).expect("writes");
    let (code, _, err) = topoc(dir.path(), &["compile", "big.ron", "-o", "big.out"]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("rotated-hd (allreduce), 2896 steps"), "{err}");
    assert!(err.contains("in the pattern form"), "{err}");
    let (code, out, err) = topoc(dir.path(), &["verify", "big.out"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("big.out: verified"), "{out}");

    // Too large for the pattern form as well: the explicit form's refusal, and nothing written.
    std::fs::write(dir.path().join("huge.ron"), ring(16384, 1 << 20)).expect("writes");
    let (code, _, err) = topoc(dir.path(), &["compile", "huge.ron", "-o", "huge.out"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("would have 2147352576 instructions"), "{err}");
    assert!(!dir.path().join("huge.out").exists());

    // A small ring keeps its explicit `ring` schedule, with or without --compact (at 4 MiB,
    // where the ring is `auto`'s pick).
    std::fs::write(dir.path().join("small.ron"), ring(8, 1 << 20)).expect("writes");
    for extra in [&[][..], &["--compact"][..]] {
        let mut args = vec!["compile", "small.ron", "-o", "small.out"];
        args.extend(extra);
        let (code, _, err) = topoc(dir.path(), &args);
        assert_eq!(code, 0, "{err}");
        assert!(err.contains("`grads`: ring (allreduce)"), "{err}");
        assert!(
            err.contains("verified schedule written to small.out"),
            "{err}"
        );
    }
    let (code, _, err) = topoc(
        dir.path(),
        &[
            "compile",
            "small.ron",
            "--algorithm",
            "rotated-hd",
            "-o",
            "x.out",
        ],
    );
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("on a `Ring` machine `ring` runs this schedule"),
        "{err}"
    );
}

#[test]
fn a_pattern_too_large_to_expand_is_refused_when_read_as_a_schedule() {
    let m = machine("Torus(dims: [128, 128])");
    let pattern = pattern_of(&m, &spec(Collective::AllReduce, 1 << 20));
    let text = serial::pattern_to_string(&pattern, serial::Format::Ron, serial::Form::Compact);
    let error = serial::from_str(&text).expect_err("too large to expand");
    assert!(
        error
            .to_string()
            .starts_with("the explicit form of phase `grads` would have 66584576 instructions"),
        "{error}"
    );
}

/// A max allreduce whose gather half combines a complete result into what the receiver
/// already holds, instead of storing it: max forgives the inputs combined twice, so the
/// pattern is proved, and its report carries the symbolic pass's warnings, each one the
/// expansion also reports. With sum the same change is an error.
#[test]
fn a_patterns_report_carries_the_warnings_of_its_expansion() {
    let m = machine("Torus(dims: [4, 4])");
    let mutated = |op: ReduceOp| {
        let mut pattern = pattern_of(
            &m,
            &PhaseSpec {
                op,
                ..spec(Collective::AllReduce, 4096)
            },
        );
        let steps = &mut pattern.phases[0].programs[0].steps;
        let half = steps.len() / 2;
        let recv = steps[half..]
            .iter_mut()
            .flatten()
            .find_map(|i| match i {
                Instr::Recv { mode, .. } if *mode == RecvMode::Store => Some(mode),
                _ => None,
            })
            .expect("the gather half stores what it receives");
        *recv = RecvMode::Reduce;
        pattern
    };
    let pattern = mutated(ReduceOp::Max);
    let verified = verify_pattern(pattern.clone()).expect("max forgives");
    let warnings = &verified.report().phases[0].warnings;
    assert!(!warnings.is_empty(), "no warning");
    let expanded = verify(pattern.expand().expect("expands")).expect("max forgives");
    let explicit: Vec<String> = expanded.report().phases[0]
        .warnings
        .iter()
        .map(|w| w.to_string())
        .collect();
    for w in warnings {
        assert!(
            explicit.contains(&w.to_string()),
            "{w} is not among {explicit:?}"
        );
    }
    let text = verified.report().to_string();
    assert!(text.contains("  warning: "), "{text}");

    let sum = mutated(ReduceOp::Sum);
    assert!(kinds(&verify_pattern(sum).expect_err("sum counts twice"))
        .contains(&"InputCombinedTwice".to_string()));
}
