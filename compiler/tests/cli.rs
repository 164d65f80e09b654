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
/// data in every step, and none carries two transfers.
#[test]
fn verify_shows_every_ladder_link_direction_busy_in_every_step() {
    let out = topoc(&["verify", "examples/ladder8.ron"]);
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
    assert!(json.is_object(), "{json}");
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
    assert!(
        text.contains("8 nodes (8 compute), 16 links, degree 4..4"),
        "{text}"
    );
    assert!(
        text.contains("ring 1: N0 -L011-> N1 -L13-> N3 -L231-> N2 -L24-> N4 -L451-> N5 -L57-> N7 -L671-> N6 -L06-> N0"),
        "{text}"
    );
    assert!(
        text.contains("ring 2: N0 -L02-> N2 -L232-> N3 -L35-> N5 -L452-> N4 -L46-> N6 -L672-> N7 -L17-> N1 -L012-> N0"),
        "{text}"
    );
}

#[test]
fn every_command_has_help_with_an_example() {
    for cmd in ["check", "compile", "verify", "run"] {
        let out = topoc(&[cmd, "--help"]);
        assert!(out.status.success());
        assert!(
            stdout(&out).contains(&format!("Example: topoc {cmd}")),
            "{cmd}"
        );
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
