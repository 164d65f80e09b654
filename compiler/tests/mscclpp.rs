//! `--emit mscclpp`: the exported MSCCL++ execution plans, read back by an independent reader
//! of the v0.7.0 loader's rules and run by a simulator of its executor (`mscclpp_sim`), must
//! leave every rank with the right result — for every example, for allreduce, reduce-scatter
//! and allgather, under two thread-block interleavings. Every rule of the reader rejects a
//! plan broken on purpose with its own message; refusals say why.
#![allow(clippy::panic, clippy::unwrap_used)]

mod mscclpp_sim;

use mscclpp_sim::{Plan, Policy};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Command;
use topoc::emit::mscclpp::{self, MscclppError, Options};

const RING4: &str = r#"Topology(
    name: "ring-4",
    machine: Ring(nodes: 4, link: (bandwidth_gbps: 100.0, latency_us: 1.0)),
    phases: [
        Exchange(name: "grads", collective: AllReduce, op: Sum, dtype: F32, elements: 4096,
            algorithm: "ring", variant: 1),
    ],
)"#;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

fn export(source: &str) -> Result<String, MscclppError> {
    let compiled = topoc::compile_source(source, &topoc::Options::default())
        .unwrap_or_else(|e| panic!("does not compile: {e:?}"));
    mscclpp::to_json(&compiled.schedule, &Options::default())
}

/// The 4-node ring walked around (`variant: 1`): MSCCL's own ring allreduce shape.
fn ring4() -> String {
    export(RING4).unwrap_or_else(|e| panic!("exports: {e}"))
}

fn names(plan: &Plan, gpu: usize, tb: usize) -> Vec<&str> {
    plan.gpus[gpu].tbs[tb]
        .ops
        .iter()
        .map(|o| o.name.as_str())
        .collect()
}

/// Examples whose every collective must export (the others may be refused with a reason).
const ACCEPTANCE: [&str; 3] = ["ring8", "ladder8", "torus4x4"];

/// Every file in `examples/`, each allreduce phase also recompiled as reduce-scatter and
/// allgather, every phase exported and checked by the reader and simulator.
#[test]
fn every_example_exports_or_says_why() {
    let dir = repo().join("examples");
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "ron"))
        .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    files.sort();
    let (mut exported, mut refused, mut failed) = (Vec::new(), 0, Vec::new());
    for name in &files {
        let text = std::fs::read_to_string(dir.join(format!("{name}.ron"))).unwrap();
        let required = ACCEPTANCE.contains(&name.as_str());
        for collective in ["AllReduce", "ReduceScatter", "AllGather"] {
            if collective != "AllReduce" && !text.contains("collective: AllReduce") {
                continue;
            }
            let case = format!("{name} {collective}");
            let variant = text.replace(
                "collective: AllReduce",
                &format!("collective: {collective}"),
            );
            let schedule = match topoc::compile_source(&variant, &topoc::Options::default()) {
                Ok(c) => c.schedule,
                Err(e) if !required && collective != "AllReduce" => {
                    eprintln!("{case}: not compiled ({e}); skipped");
                    continue;
                }
                Err(e) => panic!("{case} does not compile: {e:?}"),
            };
            for phase in &schedule.schedule().phases {
                let options = Options {
                    phase: Some(phase.name.clone()),
                };
                let case = format!("{case} `{}`", phase.name);
                let text = match mscclpp::to_json(&schedule, &options) {
                    Ok(text) => text,
                    Err(
                        e @ (MscclppError::UnsupportedCollective { .. }
                        | MscclppError::NotSum { .. }
                        | MscclppError::InNetwork { .. }
                        | MscclppError::RouteThroughGpu { .. }
                        | MscclppError::UnequalBlocks { .. }
                        | MscclppError::TooManyThreadBlocks { .. }
                        | MscclppError::TooManyChannels { .. }),
                    ) if !required => {
                        eprintln!("{case}: refused: {e}");
                        refused += 1;
                        continue;
                    }
                    Err(e) => panic!("{case}: {e}"),
                };
                assert_eq!(
                    text,
                    mscclpp::to_json(&schedule, &options).unwrap(),
                    "{case}: output is deterministic"
                );
                match mscclpp_sim::check_plan(&case, &text) {
                    Ok(_) => exported.push(case),
                    Err(e) => failed.push(e),
                }
            }
        }
    }
    eprintln!(
        "{} exports pass the reader and simulator, {} fail; {refused} refused with a reason",
        exported.len(),
        failed.len()
    );
    assert!(failed.is_empty(), "{}", failed.join("\n"));
    for a in ACCEPTANCE {
        for c in ["AllReduce", "ReduceScatter", "AllGather"] {
            let prefix = format!("{a} {c} ");
            assert!(
                exported.iter().any(|e| e.starts_with(&prefix)),
                "{prefix}exports"
            );
        }
    }
}

/// The 4-node ring allreduce: per step a put to each neighbour, its signal, the wait for the
/// neighbours' data, then one reduction (reduce-scatter half) or store (allgather half) per
/// neighbour, each group separated by the `nop` the thread block needs.
#[test]
fn ring4_is_put_signal_wait_then_reduce_or_copy() {
    let plan = mscclpp_sim::check_plan("ring4", &ring4()).unwrap();
    assert_eq!(plan.collective, "allreduce");
    assert!(plan.name.contains("MSCCL++ v0.7.0"), "{}", plan.name);
    assert!(!plan.inplace);
    for g in 0..4 {
        let ops = names(&plan, g, 0);
        let steps: Vec<&[&str]> = ops.split(|&n| n == "nop").collect();
        assert!(
            steps.first().unwrap().iter().all(|&n| n == "put"),
            "{ops:?}"
        );
        assert!(ops.iter().filter(|&&n| n == "re").count() >= 3, "{ops:?}");
        assert!(ops.iter().filter(|&&n| n == "copy").count() >= 3, "{ops:?}");
        assert_eq!(
            ops.iter().filter(|&&n| n == "signal").count(),
            ops.iter().filter(|&&n| n == "wait").count()
        );
        assert!(steps.iter().any(|s| *s == ["signal", "wait"]), "{ops:?}");
        assert_eq!(plan.gpus[g].channels.len(), 2, "input and output sources");
    }
}

/// A long ring runs out of one thread block's 64 operations: the GPU gets a chain of thread
/// blocks joined by a barrier, and the reader still runs it to the right result.
#[test]
fn long_plans_chain_thread_blocks_with_barriers() {
    let text =
        export(&std::fs::read_to_string(repo().join("examples/ring8.ron")).unwrap()).unwrap();
    let plan = mscclpp_sim::check_plan("ring8", &text).unwrap();
    for g in &plan.gpus {
        assert_eq!(g.tbs.len(), 2, "gpu {}", g.id);
        assert_eq!(g.tbs[0].ops.last().unwrap().name, "barrier");
        assert_eq!(g.tbs[1].ops.first().unwrap().name, "barrier");
        assert!(g.tbs.iter().all(|t| t.ops.len() <= 64));
    }
}

fn refusal(source: &str, algorithm: Option<&str>, phase: Option<&str>) -> MscclppError {
    let mut options = topoc::Options::default();
    if let Some(a) = algorithm {
        options.algorithm = Some(a.parse().unwrap());
    }
    let compiled = topoc::compile_source(source, &options).unwrap();
    let options = Options {
        phase: phase.map(str::to_string),
    };
    match mscclpp::to_json(&compiled.schedule, &options) {
        Ok(_) => panic!("exported, but should be refused"),
        Err(e) => e,
    }
}

fn example(name: &str) -> String {
    std::fs::read_to_string(repo().join(format!("examples/{name}.ron"))).unwrap()
}

#[test]
fn refusals_say_why() {
    let e = refusal(&example("fabric"), Some("in-network"), None);
    assert!(matches!(e, MscclppError::InNetwork { .. }), "{e:?}");
    assert!(e
        .to_string()
        .contains("switch NIC0 runs a program of its own (in-network reduction"));

    let e = refusal(&example("ring8"), Some("halving-doubling"), None);
    assert_eq!(
        e.to_string(),
        "phase `grads`, step 2: N0 sends to N2 through N1, but an MSCCL++ channel joins two \
         GPUs directly and a GPU forwards nothing it has no operation for; compile without \
         routes through compute nodes"
    );

    let mean = example("mean-ladder8");
    let e = refusal(&mean, None, None);
    assert!(
        e.to_string().contains("choose one with --phase NAME"),
        "{e}"
    );
    let e = refusal(&mean, None, Some("nope"));
    assert!(
        e.to_string()
            .starts_with("the schedule has no phase `nope`"),
        "{e}"
    );
    let mean_phase = mscclpp_phase_with_op(&mean, "Mean");
    let e = refusal(&mean, None, Some(&mean_phase));
    assert!(
        e.to_string()
            .contains("reduces with op mean, but the MSCCL++ v0.7.0 executor always adds"),
        "{e}"
    );
    let prod = RING4.replace("op: Sum", "op: Max");
    let e = refusal(&prod, None, None);
    assert!(e.to_string().contains("reduces with op max"), "{e}");
    let e = refusal(&example("graph-petersen"), None, Some("weights"));
    assert_eq!(
        e.to_string(),
        "phase `weights` is a broadcast; MSCCL++ export handles allreduce, reduce-scatter and \
         allgather"
    );
    // An allgather's op plays no part.
    let gather = prod.replace("collective: AllReduce", "collective: AllGather");
    assert!(export(&gather).is_ok());
}

/// The name of the phase of `source` declared with `op`.
fn mscclpp_phase_with_op(source: &str, op: &str) -> String {
    let compiled = topoc::compile_source(source, &topoc::Options::default()).unwrap();
    compiled
        .schedule
        .schedule()
        .phases
        .iter()
        .find(|p| format!("{:?}", p.op) == op)
        .map(|p| p.name.clone())
        .unwrap()
}

/// The index of the `nth` operation named `name` of thread block `tb` of GPU `gpu`.
fn op_index(v: &Value, gpu: usize, tb: usize, name: &str, nth: usize) -> usize {
    v["gpus"][gpu]["threadblocks"][tb]["ops"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
        .filter(|(_, o)| o["name"] == name)
        .nth(nth)
        .unwrap()
        .0
}

fn ops(v: &mut Value, gpu: usize, tb: usize) -> &mut Vec<Value> {
    v["gpus"][gpu]["threadblocks"][tb]["ops"]
        .as_array_mut()
        .unwrap()
}

/// Every problem the reader finds in the plan `broken` makes of a good one: a parse error,
/// or the structural problems, or the simulation's error.
fn problems(good: &str, broken: impl FnOnce(&mut Value)) -> String {
    let mut v: Value = serde_json::from_str(good).unwrap();
    broken(&mut v);
    let text = v.to_string();
    let plan = match mscclpp_sim::parse(&text) {
        Ok(plan) => plan,
        Err(e) => return e,
    };
    let found = mscclpp_sim::check_structure(&plan);
    if !found.is_empty() {
        return found.join("\n");
    }
    match mscclpp_sim::simulate(&plan, Policy::Lockstep) {
        Ok(out) => mscclpp_sim::check_result(&plan, &out).join("\n"),
        Err(e) => e,
    }
}

/// A way to break a good plan.
type Breakage = Box<dyn FnOnce(&mut Value)>;

#[test]
fn the_reader_enforces_every_rule() {
    let good = ring4();
    assert_eq!(problems(&good, |_| {}), "", "the good plan passes");
    let cases: Vec<(&str, Breakage)> = vec![
        (
            "plan: missing `protocol`",
            Box::new(|v| {
                v.as_object_mut().unwrap().remove("protocol");
            }),
        ),
        (
            "gpus[0]: missing `inputChunks`",
            Box::new(|v| {
                v["gpus"][0].as_object_mut().unwrap().remove("inputChunks");
            }),
        ),
        (
            "plan: `inplace` is not a boolean",
            Box::new(|v| v["inplace"] = json!(0)),
        ),
        (
            "gpus[0] threadblock 0 (id 0) op 0: `send` is not an operation of MSCCL++ v0.7.0",
            Box::new(|v| ops(v, 0, 0)[0]["name"] = json!("send")),
        ),
        (
            "`buff` is `x`, not a buffer (i, o or s)",
            Box::new(|v| ops(v, 0, 0)[0]["srcs"][0]["buff"] = json!("x")),
        ),
        (
            "gpus[0]: `type` is `nvlink`, not a channel type",
            Box::new(|v| v["gpus"][0]["channels"][0]["type"] = json!("nvlink")),
        ),
        (
            "protocol `LL`: this reader runs Simple plans only",
            Box::new(|v| v["protocol"] = json!("LL")),
        ),
        (
            "gpus[1] has id 3: ids must be 0..4 in order",
            Box::new(|v| v["gpus"][1]["id"] = json!(3)),
        ),
        (
            "gpu 0 threadblock 0: id 2 (ids must be 0.. in order)",
            Box::new(|v| v["gpus"][0]["threadblocks"][0]["id"] = json!(2)),
        ),
        (
            "gpu 0: inputChunks or outputChunks must be greater than 0",
            Box::new(|v| {
                v["gpus"][0]["inputChunks"] = json!(0);
                v["gpus"][0]["outputChunks"] = json!(0);
            }),
        ),
        (
            "gpu 0: chunkGroups 3 does not divide its 8 chunks",
            Box::new(|v| v["gpus"][0]["chunkGroups"] = json!(3)),
        ),
        (
            "gpu 0: channel connectedTo 0: not another GPU, or repeated",
            Box::new(|v| v["gpus"][0]["channels"][0]["connectedTo"][0] = json!(0)),
        ),
        (
            "gpu 0 threadblock 0: channel id 9 of i->s memory is past the GPU's 2 such channels",
            Box::new(|v| v["gpus"][0]["threadblocks"][0]["channels"][0]["cids"][0] = json!(9)),
        ),
        (
            "gpu 0 threadblock 0: 65 operations, more than the executor's 64",
            Box::new(|v| {
                let o = ops(v, 0, 0);
                while o.len() < 65 {
                    o.push(json!({"name": "nop"}));
                }
            }),
        ),
        (
            "gpu 0 threadblock 0 op 0 (put): channel 5 of i->s is not one of the thread block's",
            Box::new(|v| ops(v, 0, 0)[0]["o_cids"][0]["id"] = json!(5)),
        ),
        (
            "gpu 0 threadblock 0 op 0 (put): source i[99..100] is past gpu 0's 8 i chunks",
            Box::new(|v| ops(v, 0, 0)[0]["srcs"][0]["off"] = json!(99)),
        ),
        (
            "gpu 0 threadblock 0 op 0 (put): remote s[999..1000] is past gpu 1's",
            Box::new(|v| ops(v, 0, 0)[0]["o_cids"][0]["off"] = json!(999)),
        ),
        (
            "gpu 0 threadblock 0 op 0 (put): reads o but its channel reads i (a channel's source is fixed)",
            Box::new(|v| ops(v, 0, 0)[0]["srcs"][0]["buff"] = json!("o")),
        ),
        (
            "gpu 0 threadblock 0 op 1 (put): needs 1 to 8 channels",
            Box::new(|v| {
                let many: Vec<Value> = (0..9).map(|_| json!({"id": 0, "off": 0})).collect();
                ops(v, 0, 0)[1]["o_cids"] = json!(many);
            }),
        ),
        (
            "writes the input of an out-of-place plan",
            Box::new(|v| {
                let i = op_index(v, 0, 0, "copy", 0);
                ops(v, 0, 0)[i]["dstbuff"] = json!("i");
            }),
        ),
        (
            "(signal): signals a put that other threads may not have finished; a nop must come between",
            Box::new(|v| {
                let i = op_index(v, 0, 0, "nop", 0);
                ops(v, 0, 0).remove(i);
            }),
        ),
        (
            "(re): reads what a wait guards before all threads have waited; a nop must come between",
            Box::new(|v| {
                let i = op_index(v, 0, 0, "nop", 1);
                ops(v, 0, 0).remove(i);
            }),
        ),
        (
            "touches a chunk an earlier operation of the block may still be using; a nop must come between",
            Box::new(|v| {
                // The second step's put forwards what the first step's reduction wrote.
                let i = op_index(v, 0, 0, "nop", 2);
                ops(v, 0, 0).remove(i);
            }),
        ),
        (
            "gpu 0 and gpu 1: their memory channels to each other differ",
            Box::new(|v| {
                let c = v["gpus"][0]["channels"].as_array_mut().unwrap();
                c.swap(0, 1);
            }),
        ),
        (
            "receives 2 puts: a later one may overwrite it before it is read",
            Box::new(|v| {
                let first = ops(v, 0, 0)[0]["o_cids"][0]["off"].clone();
                let i = op_index(v, 0, 0, "put", 2);
                ops(v, 0, 0)[i]["o_cids"][0]["off"] = first;
            }),
        ),
        (
            "before the put that wrote it was signalled and waited for",
            Box::new(|v| {
                // No wait: the reduction reads the scratch slot as soon as the data is put.
                let i = op_index(v, 1, 0, "wait", 0);
                ops(v, 1, 0)[i] = json!({"name": "nop"});
            }),
        ),
        (
            "deadlock: ",
            Box::new(|v| {
                let i = op_index(v, 0, 0, "signal", 0);
                ops(v, 0, 0)[i] = json!({"name": "nop"});
            }),
        ),
        (
            "adds chunk",
            Box::new(|v| {
                // The reduction adds the GPU's own input to itself.
                let i = op_index(v, 0, 0, "re", 0);
                let src = json!([{"buff": ops(v, 0, 0)[i]["srcbuff"].clone(),
                                  "off": ops(v, 0, 0)[i]["srcoff"].clone()}]);
                ops(v, 0, 0)[i]["srcs"] = src;
            }),
        ),
        (
            "gpu 0 o[",
            Box::new(|v| {
                // The last store of the allgather half is dropped: an output chunk stays empty.
                let i = op_index(v, 0, 0, "copy", 2);
                ops(v, 0, 0)[i] = json!({"name": "nop"});
            }),
        ),
    ];
    for (want, broken) in cases {
        let got = problems(&good, broken);
        assert!(got.contains(want), "want `{want}`, got:\n{got}");
    }
}

/// Thread blocks of one GPU run at the same time: two that use one chunk need a barrier.
#[test]
fn thread_blocks_of_one_gpu_must_be_ordered_by_barriers() {
    let got = problems(&ring4(), |v| {
        let tbs = v["gpus"][0]["threadblocks"].as_array_mut().unwrap();
        tbs.push(json!({"id": 1, "channels": [], "ops": [
            {"name": "copy", "srcbuff": "i", "srcoff": 3, "dstbuff": "o", "dstoff": 3,
             "ctype": "none", "cnt": 1}
        ]}));
    });
    assert!(
        got.contains("gpu 0: thread blocks 1 and 0 both use o[3] with no barrier ordering them"),
        "{got}"
    );
}

#[test]
fn barriers_must_be_reached_by_every_thread_block_they_wait_for() {
    let good = export(&example("ring8")).unwrap();
    let got = problems(&good, |v| {
        let last = ops(v, 0, 0).len() - 1;
        ops(v, 0, 0)[last]["nthread_blocks"] = json!(3);
        ops(v, 0, 1)[0]["nthread_blocks"] = json!(3);
    });
    assert!(
        got.contains("gpu 0: barrier 0 waits for 3 thread blocks but is reached 2 times"),
        "{got}"
    );
    let got = problems(&good, |v| {
        let last = ops(v, 0, 0).len() - 1;
        ops(v, 0, 0)[last]["barrier_id"] = json!(16);
        ops(v, 0, 1)[0]["barrier_id"] = json!(16);
    });
    assert!(
        got.contains("gpu 0: barrier id 16, but there are 16 device syncers"),
        "{got}"
    );
}

/// A second put into a scratch chunk the receiver has not read yet is caught while running,
/// not only by the static rule.
#[test]
fn the_simulator_catches_a_scratch_overwrite_before_it_is_read() {
    let mut v: Value = serde_json::from_str(&ring4()).unwrap();
    // GPU 0 puts its second step's data where its first step's landed on the same peer.
    let first = ops(&mut v, 0, 0)[0].clone();
    let i = op_index(&v, 0, 0, "put", 2);
    ops(&mut v, 0, 0)[i]["o_cids"] = first["o_cids"].clone();
    let plan = mscclpp_sim::parse(&v.to_string()).unwrap();
    let e = mscclpp_sim::simulate(&plan, Policy::RunAheadReversed)
        .err()
        .unwrap_or_default();
    assert!(e.contains("overwrites"), "{e}");
}

fn topoc(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_topoc"))
        .args(args)
        .current_dir(repo())
        .output()
        .expect("topoc runs")
}

#[test]
fn the_command_line_writes_the_plan_or_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("ring8.json");
    let o = topoc(&[
        "compile",
        "examples/ring8.ron",
        "--emit",
        "mscclpp",
        "-o",
        out.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    assert!(stderr.contains("MSCCL++ execution plan of the verified schedule written to"));
    mscclpp_sim::check_plan("ring8 via the CLI", &std::fs::read_to_string(&out).unwrap()).unwrap();

    let refused = dir.path().join("fabric.json");
    let o = topoc(&[
        "compile",
        "examples/fabric.ron",
        "--algorithm",
        "in-network",
        "--emit",
        "mscclpp",
        "-o",
        refused.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(
        stderr.contains("cannot be exported as an MSCCL++ execution plan"),
        "{stderr}"
    );
    assert!(stderr.contains("nothing was written"), "{stderr}");
    assert!(!refused.exists());
}

#[test]
fn names_from_users_are_escaped() {
    let text = export(&RING4.replace("ring-4", "ring \\\"4\\\" <&>")).unwrap();
    let v: Value = serde_json::from_str(&text).unwrap();
    assert!(v["name"].as_str().unwrap().contains("ring \"4\" <&>"));
}

#[test]
fn the_documented_commands_work() {
    let docs = std::fs::read_to_string(repo().join("docs/mscclpp.md")).unwrap();
    let block = docs
        .split("```sh\n")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .expect("docs/mscclpp.md has a sh block");
    let dir = tempfile::tempdir().unwrap();
    let mut ran = 0;
    for line in block.lines().filter(|l| !l.trim().is_empty()) {
        let args: Vec<String> = line
            .split_whitespace()
            .skip(1)
            .map(|a| a.replace("examples/", &format!("{}/examples/", repo().display())))
            .collect();
        let o = Command::new(env!("CARGO_BIN_EXE_topoc"))
            .args(&args)
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "{line}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let file = args.last().unwrap();
        mscclpp_sim::check_plan(
            line,
            &std::fs::read_to_string(dir.path().join(file)).unwrap(),
        )
        .unwrap();
        ran += 1;
    }
    assert_eq!(ran, 2);
}
