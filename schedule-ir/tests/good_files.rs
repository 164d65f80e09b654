//! Valid schedules that once tripped something (most found by fuzzing): every
//! `tests/good/*.ron` must verify, its report must render, and it must read back unchanged from
//! its RON and its JSON text. Adding a case means adding a file (the folder is read, there is no
//! list); say in a comment at its top what it once broke.
#![allow(clippy::unwrap_used, clippy::panic)]

use schedule_ir::{serial, verify};
use std::path::Path;

#[test]
fn every_good_file_verifies_and_survives_both_formats() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/good");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "ron"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no cases in {}", dir.display());
    let mut failures = Vec::new();
    for file in &files {
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(file).unwrap();
        let schedule = match serial::from_str(&text) {
            Ok(s) => s,
            Err(e) => {
                failures.push(format!("{name}: unreadable: {e}"));
                continue;
            }
        };
        let verified = match verify(schedule.clone()) {
            Ok(v) => v,
            Err(e) => {
                failures.push(format!("{name}: fails verification: {e:?}"));
                continue;
            }
        };
        let _ = verified.report().to_string();
        for format in [serial::Format::Ron, serial::Format::Json] {
            let written = serial::to_string(&schedule, format);
            match serial::from_str(&written) {
                Ok(back) if back == schedule => {}
                Ok(back) => failures.push(format!(
                    "{name}: changed by a {format:?} round trip: {:?} became {:?}",
                    schedule.machine.links, back.machine.links
                )),
                Err(e) => failures.push(format!("{name}: {format:?} does not read back: {e}")),
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
