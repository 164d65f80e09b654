//! The bad-input gallery: every file in `tests/bad/` must be refused with a diagnostic that
//! points into the file; the rendered diagnostic is pinned as a snapshot under
//! `snapshots/bad/`. Adding a case means adding a file.
#![allow(clippy::panic, clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use topoc::{diag, Error, Options};

fn cases() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/bad");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("tests/bad exists")
        .map(|e| e.expect("readable entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "ron"))
        .collect();
    files.sort();
    assert!(files.len() >= 10, "the gallery has its cases");
    files
}

#[test]
fn every_bad_file_is_refused_with_a_pinned_diagnostic() {
    for path in cases() {
        let name = path
            .file_stem()
            .and_then(|s| s.to_str())
            .expect("utf-8 name");
        let source = std::fs::read_to_string(&path).expect("readable case");
        let problems = match topoc::compile_source(&source, &Options::default()) {
            Err(Error::Topology(problems)) => problems,
            Err(other) => panic!("{name}: expected a topology diagnostic, got {other}"),
            Ok(_) => panic!("{name}: a bad file compiled"),
        };
        assert!(!problems.is_empty(), "{name}: at least one problem");
        let rendered = diag::render(&format!("{name}.ron"), &source, &problems, false);
        // Every diagnostic points at a line of the file (codespan prints `┌─ file:line:col`).
        assert!(
            rendered.contains(&format!("{name}.ron:")),
            "{name}: diagnostic has a location:\n{rendered}"
        );
        insta::with_settings!({
            snapshot_path => "../../snapshots/bad",
            prepend_module_to_snapshot => false,
            omit_expression => true,
        }, {
            insta::assert_snapshot!(name, rendered);
        });
    }
}
