//! The example suite: every topology in `examples/` is compiled, verified, run against the
//! reference reduction for every element type, checked for bit-reproducibility, and its
//! emitted schedule pinned under `snapshots/examples/`. The folder is the list of cases:
//! adding a case means adding a file.
#![allow(clippy::panic, clippy::unwrap_used)]

use schedule_ir::serial::{self, Format};
use schedule_ir::{Collective, DType, VerifiedSchedule};
use std::path::{Path, PathBuf};
use topoc::trial;

fn examples() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("examples/ exists")
        .map(|e| e.expect("readable entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "ron"))
        .collect();
    files.sort();
    assert!(files.len() >= 4, "examples/ holds the bundled machines");
    files
}

fn compile(path: &Path) -> VerifiedSchedule {
    let source = std::fs::read_to_string(path).expect("readable example");
    match topoc::compile_source(&source, &topoc::Options::default()) {
        Ok(c) => c.schedule,
        Err(e) => panic!("{} does not compile: {e:?}", path.display()),
    }
}

fn name(path: &Path) -> &str {
    path.file_stem()
        .and_then(|s| s.to_str())
        .expect("utf-8 name")
}

#[test]
fn every_example_compiles_to_a_pinned_deterministic_schedule() {
    for path in examples() {
        let first = serial::to_string(compile(&path).schedule(), Format::Ron);
        let again = serial::to_string(compile(&path).schedule(), Format::Ron);
        assert_eq!(first, again, "{}: output is byte-identical", path.display());
        insta::with_settings!({
            snapshot_path => "../../snapshots/examples",
            prepend_module_to_snapshot => false,
            omit_expression => true,
        }, {
            insta::assert_snapshot!(name(&path), first);
        });
    }
}

#[test]
fn every_example_round_trips_through_ron_and_json() {
    for path in examples() {
        let schedule = compile(&path).into_schedule();
        for format in [Format::Ron, Format::Json] {
            let text = serial::to_string(&schedule, format);
            let back = serial::from_str(&text).expect("reads back");
            assert_eq!(back, schedule, "{} via {format:?}", path.display());
        }
    }
}

/// Every phase of every example, for every element type, at a moderate size and at a size
/// smaller than the number of chunks (empty chunks), matches the reference and reproduces.
/// The 16-bit floats run on fewer elements: they share the float code paths, and what is
/// theirs (rounding to 16 bits at every step) shows on any length.
#[test]
fn every_example_runs_and_matches_the_reference() {
    let sizes = |dtype: DType| match dtype {
        DType::F16 | DType::BF16 => [1_009, 3],
        _ => [30_011, 3],
    };
    let dtypes = [
        DType::F32,
        DType::F64,
        DType::I32,
        DType::I64,
        DType::F16,
        DType::BF16,
    ];
    for path in examples() {
        let verified = compile(&path);
        for dtype in dtypes {
            for elements in sizes(dtype) {
                let adjusted = trial::adjust(verified.clone(), Some(dtype), Some(elements))
                    .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                for (i, phase) in adjusted.schedule().phases.iter().enumerate() {
                    let run = trial::run_phase(&adjusted, phase, 42 + i as u64)
                        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                    let case = format!("{} `{}` {dtype} × {elements}", name(&path), phase.name);
                    assert_eq!(run.mismatch, None, "{case}: matches the reference");
                    assert!(run.reproducible, "{case}: two runs are bit-identical");
                }
            }
        }
    }
}

/// For allreduce, every node ends with the very same bits (each chunk is combined once, on one
/// node, and then copied), floats included.
#[test]
fn allreduce_results_agree_bitwise_across_nodes() {
    for path in examples() {
        let verified = trial::adjust(compile(&path), Some(DType::F32), Some(10_007))
            .expect("resized schedule verifies");
        for phase in &verified.schedule().phases {
            if phase.collective != Collective::AllReduce {
                continue;
            }
            let nodes = verified.schedule().machine.compute_nodes().count();
            let inputs = trial::random_inputs(phase.dtype, phase.op, nodes, 10_007, 9);
            let out = runtime_lite::run_phase_any(&verified, &phase.name, inputs).expect("runs");
            let runtime_lite::Buffers::F32(out) = out else {
                panic!("f32 in, f32 out");
            };
            for (n, v) in out.iter().enumerate() {
                let same = v
                    .iter()
                    .zip(&out[0])
                    .all(|(a, b)| a.to_bits() == b.to_bits());
                assert!(same, "{}: node {n} differs from node 0", path.display());
            }
        }
    }
}

/// FNV-1a over a text: a stable fingerprint for the every-method digest.
fn fingerprint(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Every example under every method of the registry that applies to each of its phases, not
/// only the one `auto` takes: each phase lowered alone, verified, run against the reference
/// for a float and an integer type, and pinned by a digest line (steps, chunks,
/// instructions, fingerprint of the phase's RON) in `snapshots/examples/every-method.snap`, so
/// a change to any method's schedule on any example shows up. A method added to the registry
/// is picked up here without a new test.
#[test]
fn every_example_under_every_method_that_applies() {
    let mut digest = String::new();
    for path in examples() {
        let source = std::fs::read_to_string(&path).expect("readable example");
        let loaded = topoc::load(&source).expect("example loads");
        let ir = loaded.machine.to_ir();
        let requests = loaded.phases().expect("example phases");
        for request in &requests {
            let knobs = request.knobs(&topoc::Options::default()).expect("knobs");
            for method in topoc::lower::Method::ALL {
                if !method.supports(request.spec.collective) {
                    continue;
                }
                let case = format!("{} `{}` {method}", name(&path), request.spec.name);
                let Ok(lowered) = method.lower(&loaded.machine, &request.spec, &knobs) else {
                    digest.push_str(&format!("{case}: does not apply\n"));
                    continue;
                };
                let schedule = schedule_ir::Schedule {
                    format_version: schedule_ir::FORMAT_VERSION,
                    machine: ir.clone(),
                    program: Vec::new(),
                    phases: vec![lowered.phase],
                };
                let verified = schedule_ir::verify(schedule)
                    .unwrap_or_else(|e| panic!("{case}: the verifier refuses it: {e}"));
                let phase = &verified.schedule().phases[0];
                // `auto` skips a method whose floor is not below the best estimate so far, so
                // the floor must never be above what the method's schedule costs.
                let base = topoc::lower::floor::Floor::of(&ir, &request.spec);
                let floor = method.floor(&loaded.machine, &request.spec, &knobs, &base);
                let estimate = schedule_ir::cost::estimate(&ir, phase).seconds;
                assert!(
                    floor <= estimate,
                    "{case}: floor {floor} s above the estimate {estimate} s"
                );
                // So must the bound with which it declines where it has a schedule to beat.
                let declined =
                    method.lower_unless(&loaded.machine, &request.spec, &knobs, &|_| true);
                if let Ok(topoc::lower::Unless::Outpriced(bound)) = declined {
                    assert!(
                        bound <= estimate,
                        "{case}: declined with {bound} s, above the estimate {estimate} s"
                    );
                }
                let instructions: usize = phase
                    .programs
                    .iter()
                    .flat_map(|p| &p.steps)
                    .map(Vec::len)
                    .sum();
                let text = serial::to_string(verified.schedule(), Format::Ron);
                digest.push_str(&format!(
                    "{case}: {} steps, {} chunks, {instructions} instructions, {:016x}\n",
                    phase.steps,
                    phase.chunks.len(),
                    fingerprint(&text)
                ));
                for dtype in [DType::F32, DType::I64] {
                    let adjusted = trial::adjust(verified.clone(), Some(dtype), Some(1_001))
                        .unwrap_or_else(|e| panic!("{case}: {e}"));
                    let phase = &adjusted.schedule().phases[0];
                    let run = trial::run_phase(&adjusted, phase, 7)
                        .unwrap_or_else(|e| panic!("{case}: {e}"));
                    assert_eq!(run.mismatch, None, "{case} {dtype}: matches the reference");
                    assert!(run.reproducible, "{case} {dtype}: bit-identical twice");
                }
            }
        }
    }
    insta::with_settings!({
        snapshot_path => "../../snapshots/examples",
        prepend_module_to_snapshot => false,
        omit_expression => true,
    }, {
        insta::assert_snapshot!("every-method", digest);
    });
}
