//! The `topoc` binary end to end: the README's quick start, exit statuses, machine-readable
//! reports, tampered schedules, and files written whole or not at all.
#![allow(clippy::panic, clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn topoc(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_topoc"))
        .args(args)
        .current_dir(repo())
        .output()
        .expect("topoc runs")
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The README's first command, as written there, runs and succeeds.
#[test]
fn readme_quick_start_runs() {
    let readme = std::fs::read_to_string(repo().join("README.md")).expect("README.md");
    let block = readme
        .split("```sh\n")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .expect("README has a sh block");
    let commands: Vec<&str> = block.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(commands.len(), 2, "exactly two set-up commands");
    let first = commands[0];
    let args = first
        .split_once(" -- ")
        .map(|(_, a)| a)
        .expect("the first command passes arguments to topoc");
    let out = topoc(&args.split_whitespace().collect::<Vec<_>>());
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("every node matches the reference reduction"),
        "{text}"
    );
    assert!(text.contains("second run bit-identical: yes"), "{text}");
    assert!(
        commands[1].contains("cargo test"),
        "the second runs the tests"
    );
    let ci = std::fs::read_to_string(repo().join(".ci/run")).expect(".ci/run");
    assert!(
        ci.contains(commands[1]),
        "CI runs the README's test command"
    );
    assert!(ci.contains(first), "CI runs the README's quick start");
}

/// Seed 004's claim, as `topoc verify` prints it: every link direction of the ladder carries
/// data in every step, and none carries two transfers — in the 8 steps of `auto`'s pick (the
/// barley-twist rings meeting in the middle), as in the 14 of the seed's own walk.
#[test]
fn verify_shows_every_ladder_link_direction_busy_in_every_step() {
    let out = topoc(&["verify", "examples/ladder8.ron"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("every link direction busy in every step: yes"),
        "{text}"
    );
    assert_eq!(text.matches("busy 32/32 directions").count(), 8, "{text}");
    let dir = tempfile::tempdir().expect("temp dir");
    let seed = dir.path().join("ladder-rings.ron");
    let p = seed.to_str().expect("utf-8 path");
    let args = [
        "compile",
        "examples/ladder8.ron",
        "--algorithm",
        "ladder-rings",
        "-o",
        p,
    ];
    assert!(topoc(&args).status.success());
    let out = topoc(&["verify", p]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("every link direction busy in every step: yes"),
        "{text}"
    );
    assert_eq!(text.matches("busy 32/32 directions").count(), 14, "{text}");

    let out = topoc(&["verify", "examples/ladder8.ron", "--format", "json"]);
    assert!(out.status.success());
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON report");
    assert_eq!(json["ok"], true);
    let phase = &json["report"]["phases"][0];
    assert_eq!(phase["idle_direction_steps"], 0, "{phase}");
    assert_eq!(phase["steps"], 8);
}

#[test]
fn compile_writes_a_schedule_that_verify_and_run_accept() {
    let dir = tempfile::tempdir().expect("temp dir");
    for (emit, file) in [("ron", "s.ron"), ("json", "s.json")] {
        let path = dir.path().join(file);
        let p = path.to_str().expect("utf-8 path");
        let out = topoc(&["compile", "examples/ring8.ron", "--emit", emit, "-o", p]);
        assert!(out.status.success(), "{}", stderr(&out));
        assert!(
            stderr(&out).contains("phase `grads`: ring"),
            "{}",
            stderr(&out)
        );
        let out = topoc(&["verify", p]);
        assert!(out.status.success(), "{}", stderr(&out));
        let out = topoc(&[
            "run",
            p,
            "--dtype",
            "i64",
            "--elements",
            "1000",
            "--format",
            "json",
        ]);
        assert!(out.status.success(), "{}", stderr(&out));
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
        assert_eq!(json["ok"], true);
        assert_eq!(json["phases"][0]["dtype"], "i64");
        assert_eq!(json["phases"][0]["elements"], 1000);
    }
}

#[test]
fn compile_output_is_byte_identical_across_runs() {
    let a = topoc(&["compile", "examples/ladder8.ron"]);
    let b = topoc(&["compile", "examples/ladder8.ron"]);
    assert!(a.status.success());
    assert_eq!(a.stdout, b.stdout);
}

/// A schedule edited by hand so that two transfers share a link direction is refused before
/// it runs, with the step, node, link and chunk named.
#[test]
fn a_tampered_schedule_is_refused_by_verify_and_run() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("tampered.ron");
    let out = topoc(&["compile", "examples/ring8.ron"]);
    let text = stdout(&out);
    // N0 sends chunk 0 to N1 over L01 in step 0; redirect its other send (chunk 8 to N7 over
    // L07) to N1 over L01 as well: a double-booked link direction and two unmatched ends.
    let tampered = text.replacen("Send(link: 7, to: 7,", "Send(link: 0, to: 1,", 1);
    assert_ne!(tampered, text, "the edit applies");
    std::fs::write(&path, tampered).expect("write");
    let p = path.to_str().expect("utf-8");
    let out = topoc(&["verify", p, "--format", "json"]);
    assert_eq!(out.status.code(), Some(1));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON errors");
    assert_eq!(json["ok"], false);
    assert_eq!(json["errors"].as_array().map(Vec::len), Some(3), "{json}");
    assert!(json["errors"][0]["message"]
        .as_str()
        .is_some_and(|m| m.contains("link L01 direction N0→N1 carries 2 transfers")));
    for cmd in ["verify", "run"] {
        let out = topoc(&[cmd, p]);
        assert!(!out.status.success(), "{cmd} refuses it");
        let err = stderr(&out);
        assert!(err.contains("step 0"), "{cmd}: {err}");
        assert!(err.contains("N0"), "{cmd}: {err}");
        assert!(err.contains("L01"), "{cmd}: {err}");
        assert!(err.contains("chunk"), "{cmd}: {err}");
    }
}

#[test]
fn a_bad_topology_exits_non_zero_and_writes_nothing() {
    let dir = tempfile::tempdir().expect("temp dir");
    let out_path = dir.path().join("out.ron");
    let o = out_path.to_str().expect("utf-8");
    let out = topoc(&["compile", "compiler/tests/bad/unknown-node.ron", "-o", o]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("did you mean `gpu0`?"),
        "{}",
        stderr(&out)
    );
    assert!(!out_path.exists(), "no output file on failure");
    assert_eq!(
        std::fs::read_dir(dir.path()).expect("dir").count(),
        0,
        "no temporary file left behind"
    );
}

#[test]
fn missing_files_and_unknown_phases_are_clear_errors() {
    let out = topoc(&["check", "examples/nope.ron"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("cannot read examples/nope.ron"),
        "{}",
        stderr(&out)
    );

    let out = topoc(&["run", "examples/ring8.ron", "--phase", "weights"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("no phase `weights`; its phases are: grads"));
}

#[test]
fn check_summarises_the_machine_and_its_rings() {
    let out = topoc(&["check", "examples/ladder8.ron"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    for line in [
        "  nodes      8 compute, 0 switches",
        "  links      16 (32 directions), 100 Gbit/s per direction",
        "  degree     4 links at every compute node",
        "  diameter   3 links between the farthest compute nodes (exact)",
        "  bisection  400 Gbit/s per direction (exact: all 35 balanced splits of the compute nodes)",
        "  ladder-rings: 2 link-disjoint Hamiltonian rings, proved",
    ] {
        assert!(text.contains(line), "{line}\n{text}");
    }
    assert!(
        text.contains("ring 1: N0 -L011-> N1 -L13-> N3 -L231-> N2 -L24-> N4 -L451-> N5 -L57-> N7 -L671-> N6 -L06-> N0"),
        "{text}"
    );
    assert!(
        text.contains("ring 2: N0 -L02-> N2 -L232-> N3 -L35-> N5 -L452-> N4 -L46-> N6 -L672-> N7 -L17-> N1 -L012-> N0"),
        "{text}"
    );
    // What `auto` takes, with its estimate and the weighing in words: the same rings meeting
    // in the middle, below the seed's walk around them; `matching`, searched, declines with
    // the bound its search price gives.
    assert!(text.contains("  phase `grads`: auto takes ring (154.801 µs, below every other method's floor)\n    auto: cheapest for allreduce at 4 MiB: ring 154.801 µs; matching ≥ 160.683 µs, not lowered; ladder-rings ≥ 160.801 µs, not lowered; trees ≥ 189.480 µs, not lowered"), "{text}");
}

/// The summary of a machine with switches: devices, failures, routed rings, and a bisection
/// labelled exact or estimated.
#[test]
fn check_summarises_switched_and_failed_machines() {
    let out = topoc(&["check", "examples/fabric.ron"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains(
            "  phase `grads`: auto takes in-network (475.883 µs, 21.3% below hierarchical at 604.716 µs)"
        ),
        "{text}"
    );
    // `trees` declines before scheduling: every pipeline depth's bound, with link directions
    // shared or not, is above the in-network schedule's estimate.
    assert!(
        text.contains("; trees ≥ 551.700 µs, not lowered;"),
        "{text}"
    );
    assert!(
        text.contains(
            "ladder-rings does not apply (`ladder-rings` runs on intact `Ladder` machines only)"
        ),
        "{text}"
    );
    for line in [
        "  nodes      16 compute, 5 switches",
        "  degree     1 link at every compute node",
        "  bisection  200 Gbit/s per direction (exact: all 6435 balanced splits of the compute nodes)",
        "  devices    NIC0, NIC1, NIC2, NIC3: reduces, 64 segment buffers, MTU 4096 B",
        "  devices    SW: reduces, 256 segment buffers, MTU 4096 B",
        "  ring: 1 ring through the switches, each hop routed, proved",
        "    ring 1: H0R0 -[NIC0-H0R0 NIC0-H0R1]-> H0R1",
    ] {
        assert!(text.contains(line), "{line}\n{text}");
    }

    // A method the file names is reported as such: `auto` did not weigh anything.
    let out = topoc(&["check", "examples/tree-fat.ron"]);
    assert!(
        stdout(&out).contains("  phase `grads`: tree, named by the file (tree requested)"),
        "{}",
        stdout(&out)
    );

    let out = topoc(&["check", "examples/ladder8-failed.ron"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("  failed     links L231"), "{text}");
    assert!(text.contains("ladder-rings: does not apply: `ladder-rings` runs on intact `Ladder` machines only, and L231 failed"), "{text}");
    // A machine that was never a ladder is not told that its failures are why.
    let dir = tempfile::tempdir().unwrap();
    let cube = dir.path().join("cube-failed.ron");
    std::fs::write(
        &cube,
        r#"Topology(name: "c", machine: Cube(failed_links: ["ab"]), phases: [
            Exchange(name: "x", collective: AllReduce, elements: 1024)])"#,
    )
    .unwrap();
    let out = topoc(&["check", cube.to_str().unwrap()]);
    let text = stdout(&out);
    assert!(
        text.contains(
            "ladder-rings: does not apply: `ladder-rings` runs on intact `Ladder` machines only\n"
        ),
        "{text}"
    );

    let out = topoc(&["check", "examples/ladder24.ron"]);
    let text = stdout(&out);
    assert!(text.contains("  bisection  400 Gbit/s per direction (estimate: at most this; best of 9 balanced splits grown by breadth-first search and improved by Kernighan-Lin swaps)"), "{text}");
}

#[test]
fn every_command_has_help_with_an_example() {
    for cmd in ["check", "compile", "verify", "run", "simulate", "draw"] {
        let out = topoc(&[cmd, "--help"]);
        assert!(out.status.success());
        assert!(
            stdout(&out).contains(&format!("Example: topoc {cmd}")),
            "{cmd}"
        );
    }
}

/// The ladder's ring schedules reach the total-traffic bound at large sizes: their bandwidth
/// term equals the bound and only the latency term remains.
#[test]
fn simulate_reports_efficiency_against_the_bound() {
    let out = topoc(&[
        "simulate",
        "examples/ladder8.ron",
        "--sizes",
        "1KiB,256MiB",
        "--format",
        "json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let rows = json["rows"].as_array().expect("rows");
    let row = rows
        .iter()
        .find(|r| r["algorithm"] == "ladder-rings" && r["bytes"] == 256u64 << 20)
        .expect("ladder-rings at 256 MiB");
    let efficiency = row["efficiency"].as_f64().expect("number");
    assert!(efficiency > 0.99 && efficiency <= 1.0, "{row}");
    assert_eq!(row["bound"]["which"], "total traffic");
    let small = rows
        .iter()
        .find(|r| r["algorithm"] == "ladder-rings" && r["bytes"] == 1024)
        .expect("1 KiB row");
    assert_eq!(small["bound"]["which"], "latency");

    let out = topoc(&["simulate", "examples/ladder8.ron", "--sizes", "12 parsecs"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("unknown unit `parsecs`"),
        "{}",
        stderr(&out)
    );
}

/// The issue's example: the ladder as SVG, written atomically to the named file, with the two
/// rings in two colours; DOT on standard output by default; bad requests name the choices.
#[test]
fn draw_writes_svg_and_dot_and_refuses_bad_requests() {
    let dir = tempfile::tempdir().expect("temp dir");
    let svg = dir.path().join("ladder8.svg");
    let s = svg.to_str().expect("utf-8");
    let out = topoc(&["draw", "examples/ladder8.ron", "--format", "svg", "-o", s]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = std::fs::read_to_string(&svg).expect("written");
    assert!(text.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
    assert!(text.contains("stroke=\"#0072B2\"") && text.contains("stroke=\"#D55E00\""));
    assert_eq!(std::fs::read_dir(dir.path()).expect("dir").count(), 1);

    let out = topoc(&["draw", "examples/ring8.ron", "--step", "2"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).starts_with("// topoc draw: ring-8"));
    assert!(stdout(&out).contains("step 2"));

    // A schedule file is verified and drawn; the format follows the output's extension.
    let sched = dir.path().join("ring8.sched.ron");
    let p = sched.to_str().expect("utf-8");
    assert!(topoc(&["compile", "examples/ring8.ron", "-o", p])
        .status
        .success());
    let pic = dir.path().join("ring8.svg");
    let o = pic.to_str().expect("utf-8");
    let out = topoc(&["draw", p, "--step", "0", "-o", o]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(std::fs::read_to_string(&pic)
        .expect("written")
        .starts_with("<svg"));

    let out = topoc(&["draw", "examples/ladder8.ron", "--step", "99"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("phase `grads` has 8 steps (0 to 7); there is no step 99"),
        "{}",
        stderr(&out)
    );
    let out = topoc(&["draw", "examples/ladder8.ron", "--phase", "weights"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("the phases are: grads"),
        "{}",
        stderr(&out)
    );
}

/// The commands of docs/draw.md's example block, as written there, run and succeed (Graphviz
/// commands are skipped: it is not needed at run time).
#[test]
fn draw_doc_examples_run() {
    let doc = std::fs::read_to_string(repo().join("docs/draw.md")).expect("docs/draw.md");
    let block = doc
        .split("```sh\n")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .expect("docs/draw.md has a sh block");
    let dir = tempfile::tempdir().expect("temp dir");
    let examples = dir.path().join("examples");
    std::fs::create_dir(&examples).expect("mkdir");
    for name in ["ladder8.ron", "ring8.ron"] {
        std::fs::copy(repo().join("examples").join(name), examples.join(name)).expect("copy");
    }
    let mut ran = 0;
    for line in block.lines() {
        let line = line.split(" # ").next().unwrap_or("").trim();
        for command in line.split("&&").map(str::trim) {
            let Some(rest) = command.strip_prefix("topoc ") else {
                assert!(
                    command.is_empty() || command.starts_with("dot "),
                    "{command}"
                );
                continue;
            };
            let (args, redirect) = match rest.split_once(" > ") {
                Some((a, file)) => (a, Some(file.trim())),
                None => (rest, None),
            };
            let out = Command::new(env!("CARGO_BIN_EXE_topoc"))
                .args(args.split_whitespace())
                .current_dir(dir.path())
                .output()
                .expect("topoc runs");
            assert!(out.status.success(), "{command}: {}", stderr(&out));
            if let Some(file) = redirect {
                std::fs::write(dir.path().join(file), &out.stdout).expect("write");
            }
            ran += 1;
        }
    }
    assert_eq!(ran, 5, "every topoc command of the block ran");
    for (file, start) in [
        ("ladder8.svg", "<svg"),
        ("ladder8-step0.svg", "<svg"),
        ("ring8.dot", "// topoc draw"),
        ("s.svg", "<svg"),
    ] {
        let text = std::fs::read_to_string(dir.path().join(file)).expect(file);
        assert!(text.starts_with(start), "{file}");
    }
}

/// `--variant` picks seed 000's method for `cube-planes`; the compiler reports the start
/// choice it found, and verify sees every direction busy in every step.
#[test]
fn compile_cube_planes_variants_report_the_start_choice() {
    let dir = tempfile::tempdir().expect("temp dir");
    for (variant, steps) in [("400", 6), ("300", 8)] {
        let path = dir.path().join(format!("cube-{variant}.ron"));
        let out = topoc(&[
            "compile",
            "examples/cube.ron",
            "--algorithm",
            "cube-planes",
            "--variant",
            variant,
            "-o",
            path.to_str().unwrap(),
        ]);
        assert!(out.status.success(), "{}", stderr(&out));
        let err = stderr(&out);
        assert!(err.contains(&format!("{steps} steps")), "{err}");
        assert!(err.contains(&format!("method {variant}; rings")), "{err}");
        assert!(err.contains("starting abcd:"), "{err}");
        let out = topoc(&["verify", path.to_str().unwrap()]);
        let text = stdout(&out);
        assert!(out.status.success(), "{text}");
        assert_eq!(
            text.matches("busy 24/24 directions").count(),
            steps,
            "{text}"
        );
    }
    let out = topoc(&["compile", "examples/cube.ron", "--variant", "300"]);
    assert!(!out.status.success(), "a variant needs cube-planes");
}

/// Degraded machines from the command line: the cube with one failed edge and the ladder with a
/// failed rung compile to verified schedules, an unknown id is refused by name, and `simulate`
/// prices the failure against the healthy machine.
#[test]
fn failures_from_the_command_line_compile_and_are_priced() {
    let out = topoc(&["compile", "examples/cube.ron", "--fail-link", "ab"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("ab failed"), "{}", stderr(&out));
    let schedule = schedule_ir::serial::from_str(&stdout(&out)).expect("a schedule");
    assert!(schedule.machine.links.iter().all(|l| l.name != "ab"));
    schedule_ir::verify(schedule).expect("verified");

    let out = topoc(&["compile", "examples/cube.ron", "--fail-link", "zz"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("zz"), "{}", stderr(&out));

    let out = topoc(&[
        "simulate",
        "examples/ladder8.ron",
        "--sizes",
        "256MiB",
        "--fail-link",
        "L231",
        "--format",
        "json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let ratio = json["slowdown"][0]["ratio"].as_f64().expect("a ratio");
    assert!(ratio > 1.0, "losing a rung costs time: {json}");
    assert_eq!(json["failed_links"][0], "L231");
}

#[test]
fn run_averages_a_mean_phase() {
    let out = topoc(&[
        "run",
        "examples/mean-ladder8.ron",
        "--phase",
        "counts",
        "--format",
        "json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(json["ok"], true, "{json}");
    assert_eq!(json["phases"][0]["op"], "mean", "{json}");
    assert_eq!(json["phases"][0]["dtype"], "i32", "{json}");
    assert_eq!(
        json["phases"][0]["mismatch"],
        serde_json::Value::Null,
        "{json}"
    );
}

/// `compile --report json` leaves the report alone on standard error, for tools to parse.
#[test]
fn the_compile_report_in_json_is_all_of_standard_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out_file = dir.path().join("ring8.sched.ron");
    let out = topoc(&[
        "compile",
        "examples/ring8.ron",
        "-o",
        &out_file.display().to_string(),
        "--report",
        "json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(out_file.exists());
    let report: serde_json::Value = serde_json::from_slice(&out.stderr).expect("only JSON");
    assert_eq!(report[0]["method"], "ring", "{report}");
}
