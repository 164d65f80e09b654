//! Bad schedules as files: every `tests/bad/*.ron` is a schedule that must fail verification
//! with exactly the errors its `// error: …` comment lines give, in order. Adding a case means
//! adding a file (the folder is read, there is no list); its first comment lines say what is
//! wrong on purpose. Every check of the verifier has at least one file here.
//!
//! The files are read without the reader's format-version check ([`serial::from_str`] refuses
//! other versions), so that the verifier's own version check has a case too.
#![allow(clippy::unwrap_used, clippy::panic)]

use schedule_ir::{serial, verify, verify_beside, Schedule};
use std::path::Path;

/// How many cases `tests/bad` holds at least.
const MIN_CASES: usize = 64;

#[test]
fn every_bad_file_gives_its_errors() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/bad");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "ron"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no cases in {}", dir.display());
    let mut failures = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        let expected: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("// error: "))
            .collect();
        let name = file.file_name().unwrap().to_string_lossy();
        if expected.is_empty() {
            failures.push(format!("{name}: no `// error: ` line"));
            continue;
        }
        let read: Result<Schedule, String> = match serial::detect(&text) {
            serial::Format::Ron => ron::from_str(&text).map_err(|e| e.to_string()),
            serial::Format::Json => serde_json::from_str(&text).map_err(|e| e.to_string()),
        };
        let schedule = match read {
            Ok(s) => s,
            Err(e) => {
                failures.push(format!("{name}: unreadable: {e}"));
                continue;
            }
        };
        // Verified with work beside it, the same errors, and the work saw the same schedule.
        let shape = |s: &Schedule| {
            let phases = s.phases.iter().map(|p| (p.name.clone(), p.programs.len()));
            (s.machine.nodes.len(), phases.collect::<Vec<_>>())
        };
        let own = shape(&schedule);
        let (beside, saw) = verify_beside(schedule.clone(), |s| shape(s) == own);
        if !saw {
            failures.push(format!(
                "{name}: the work beside the checks saw another schedule"
            ));
        }
        let errors = |verified: Result<_, schedule_ir::VerifyErrors>| match verified {
            Ok(_) => vec![],
            Err(e) => e
                .errors
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<String>>(),
        };
        let actual = errors(verify(schedule));
        if errors(beside) != actual {
            failures.push(format!("{name}: verified beside other work, other errors"));
        }
        if actual != expected {
            failures.push(format!(
                "{name}:\n  expected:\n    {}\n  actual:\n    {}",
                expected.join("\n    "),
                actual.join("\n    ")
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // The cases there were when the suite was last extended: a file lost shows up here.
    assert!(
        files.len() >= MIN_CASES,
        "{} cases, expected at least {MIN_CASES}",
        files.len()
    );
}
