//! The mean op through every method: on every machine of `examples/`, a mean allreduce,
//! reduce-scatter and reduce is compiled with each method in turn; whatever compiles verifies,
//! scales, and runs bit-exact against the reference (the plain sum divided once) for `i32` and
//! `i64`, and bit-identical over two runs for `f32`. Every method must cover every reducing
//! collective it supports on at least one machine. The folder is the list of machines.
#![allow(clippy::panic, clippy::unwrap_used)]

use schedule_ir::{Collective, DType, Instr, NodeKind, ReduceOp};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use topoc::lower::Method;
use topoc::{trial, Error, Options};

fn examples() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "ron"))
        .collect();
    files.sort();
    files
}

/// The example's machine with one mean phase of `collective` instead of its own phases.
fn with_mean_phase(text: &str, collective: &str) -> String {
    let at = text.rfind("phases:").unwrap();
    format!(
        "{}phases: [Exchange(name: \"m\", collective: {collective}, op: Mean, dtype: I32, elements: 1000)],\n)\n",
        &text[..at]
    )
}

fn compile(text: &str, method: Method) -> Option<schedule_ir::VerifiedSchedule> {
    let options = Options {
        algorithm: Some(topoc::lower::Choice::Method(method)),
        ..Options::default()
    };
    match topoc::compile_source(text, &options) {
        Ok(c) => Some(c.schedule),
        Err(Error::Topology(_)) => None,
        Err(e) => panic!("{method}: {e}"),
    }
}

/// Runs the mean phase for each element type and length; integers must match exactly.
fn check_runs(verified: schedule_ir::VerifiedSchedule, case: &str) {
    for dtype in [DType::I32, DType::I64, DType::F32] {
        for elements in [1000, 5] {
            let adjusted = trial::adjust(verified.clone(), Some(dtype), Some(elements))
                .unwrap_or_else(|e| panic!("{case}: {e}"));
            let phase = &adjusted.schedule().phases[0];
            let run = trial::run_phase(&adjusted, phase, 7).unwrap_or_else(|e| panic!("{e}"));
            let what = format!("{case} {dtype} × {elements}");
            // `compare` is exact for integers and within rounding for float sums.
            assert_eq!(run.mismatch, None, "{what}");
            assert!(run.reproducible, "{what}: two runs differ");
        }
    }
}

#[test]
fn every_method_averages_on_every_machine_it_takes() {
    let mut covered: BTreeSet<(Method, &str)> = BTreeSet::new();
    for path in examples() {
        let text = std::fs::read_to_string(&path).unwrap();
        let file = path.file_name().unwrap().to_string_lossy().into_owned();
        // A reduce needs a root: the first compute node the allreduce names.
        let Some(any) = Method::ALL
            .into_iter()
            .find_map(|m| compile(&with_mean_phase(&text, "AllReduce"), m))
        else {
            continue;
        };
        let machine = &any.schedule().machine;
        let root = machine
            .nodes
            .iter()
            .find(|n| n.kind == NodeKind::Compute)
            .unwrap()
            .name
            .clone();
        let p = machine.compute_nodes().count();
        let reduce = format!("Reduce(root: \"{root}\")");
        for (collective, label) in [
            ("AllReduce", "allreduce"),
            ("ReduceScatter", "reduce-scatter"),
            (reduce.as_str(), "reduce"),
        ] {
            let source = with_mean_phase(&text, collective);
            for method in Method::ALL {
                let Some(verified) = compile(&source, method) else {
                    continue;
                };
                let case = format!("{file} {label} by {method}");
                let phase = &verified.schedule().phases[0];
                assert_eq!(phase.op, ReduceOp::Mean, "{case}");
                let scales = phase
                    .programs
                    .iter()
                    .flat_map(|prog| prog.steps.iter().flatten())
                    .filter(|i| matches!(i, Instr::Scale { divisor, .. } if *divisor as usize == p))
                    .count();
                assert!(p == 1 || scales > 0, "{case}: no scale");
                check_runs(verified, &case);
                covered.insert((method, label));
            }
        }
    }
    let mut missing = Vec::new();
    for method in Method::ALL {
        for (collective, label) in [
            (Collective::AllReduce, "allreduce"),
            (Collective::ReduceScatter, "reduce-scatter"),
            (
                Collective::Reduce {
                    root: schedule_ir::NodeId(0),
                },
                "reduce",
            ),
        ] {
            if method.supports(collective) && !covered.contains(&(method, label)) {
                missing.push(format!("{method} {label}"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "no example machine exercises: {missing:?}"
    );
}

/// A 4-node ring with one phase of `collective` under mean.
fn ring4(collective: &str) -> String {
    format!(
        r#"Topology(name: "ring-4", machine: Ring(nodes: 4, link: (bandwidth_gbps: 100.0, latency_us: 1.0)),
        phases: [Exchange(name: "grads", collective: {collective}, op: Mean, dtype: F32, elements: 4096, algorithm: "ring")])"#
    )
}

#[test]
fn msccl_export_refuses_a_mean_reduction() {
    use topoc::emit::msccl::{self, MscclError};
    for collective in ["AllReduce", "ReduceScatter"] {
        let verified = topoc::compile_source(&ring4(collective), &Options::default())
            .unwrap()
            .schedule;
        let e = msccl::to_xml(&verified, &msccl::Options::default()).unwrap_err();
        assert_eq!(
            e,
            MscclError::MeanOp {
                phase: "grads".into()
            }
        );
        assert_eq!(
            e.to_string(),
            "phase `grads` has op mean, but an MSCCL algorithm takes its op from the collective \
             call and has no division step; compile the phase with op Sum, export that, and call \
             it with ncclAvg"
        );
    }
    // An allgather moves inputs unchanged: under mean it exports like any allgather.
    let verified = topoc::compile_source(&ring4("AllGather"), &Options::default())
        .unwrap()
        .schedule;
    let xml = msccl::to_xml(&verified, &msccl::Options::default()).unwrap();
    assert!(xml.contains(r#"coll="allgather""#), "{xml}");
}

#[test]
fn the_verify_report_counts_scales() {
    let verified = topoc::compile_source(&ring4("AllReduce"), &Options::default())
        .unwrap()
        .schedule;
    let text = verified.report().to_string();
    // The ring completes its chunks in its last reduce-scatter step: step 1 of 4, its chunks
    // meeting in the middle (both halves of each owner's chunk, from both sides).
    let scaled: Vec<&str> = text.lines().filter(|l| l.contains("scales")).collect();
    assert_eq!(scaled.len(), 1, "{text}");
    assert!(scaled[0].starts_with("  step  1  "), "{text}");
}
