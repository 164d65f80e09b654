//! Output files are written whole or not at all: a failed compile leaves an existing output
//! file exactly as it was, and leaves no temporary file behind.
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

fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn a_failed_compile_leaves_the_previous_output_byte_identical() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("schedule.ron");
    let o = out.to_str().unwrap();
    let first = topoc(&["compile", "examples/ring8.ron", "-o", o]);
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    let before = std::fs::read(&out).unwrap();
    assert!(!before.is_empty());

    // Bad files of every stage: a syntax error, a problem found when building the machine,
    // and a collective no method can lower on the machine.
    for bad in [
        "compiler/tests/bad/syntax-error.ron",
        "compiler/tests/bad/duplicate-link-id.ron",
        "compiler/tests/bad/petersen-no-ring.ron",
    ] {
        let failed = topoc(&["compile", bad, "-o", o]);
        assert_eq!(failed.status.code(), Some(1), "{bad}");
        let stderr = String::from_utf8_lossy(&failed.stderr);
        assert!(stderr.contains("nothing was written"), "{bad}: {stderr}");
        assert_eq!(
            std::fs::read(&out).unwrap(),
            before,
            "{bad}: the earlier output is untouched"
        );
        assert_eq!(
            entries(dir.path()),
            ["schedule.ron"],
            "{bad}: no temporary file left behind"
        );
    }

    // The same for JSON output over an existing JSON file.
    let json = dir.path().join("schedule.json");
    let j = json.to_str().unwrap();
    assert!(
        topoc(&["compile", "examples/ladder8.ron", "--emit", "json", "-o", j])
            .status
            .success()
    );
    let before = std::fs::read(&json).unwrap();
    let failed = topoc(&[
        "compile",
        "compiler/tests/bad/unknown-node.ron",
        "--emit",
        "json",
        "-o",
        j,
    ]);
    assert_eq!(failed.status.code(), Some(1));
    assert_eq!(std::fs::read(&json).unwrap(), before);
    assert_eq!(entries(dir.path()), ["schedule.json", "schedule.ron"]);
}

#[test]
fn an_output_in_a_missing_directory_is_an_error_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("no-such-dir").join("schedule.ron");
    let failed = topoc(&["compile", "examples/ring8.ron", "-o", out.to_str().unwrap()]);
    assert_eq!(failed.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&failed.stderr);
    assert!(stderr.contains("error: cannot write"), "{stderr}");
    assert!(entries(dir.path()).is_empty());
}
