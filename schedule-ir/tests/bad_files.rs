//! Bad schedules as files: every `tests/bad/*.ron` is a schedule that must fail verification
//! with exactly the errors its `// error: …` comment lines give, in order. Adding a case means
//! adding a file (the folder is read, there is no list).
#![allow(clippy::unwrap_used, clippy::panic)]

use schedule_ir::{serial, verify};
use std::path::Path;

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
        let schedule = match serial::from_str(&text) {
            Ok(s) => s,
            Err(e) => {
                failures.push(format!("{name}: unreadable: {e}"));
                continue;
            }
        };
        let actual: Vec<String> = match verify(schedule) {
            Ok(_) => vec![],
            Err(e) => e.errors.iter().map(ToString::to_string).collect(),
        };
        if actual.is_empty() || actual != expected {
            failures.push(format!(
                "{name}:\n  expected:\n    {}\n  actual:\n    {}",
                expected.join("\n    "),
                actual.join("\n    ")
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
