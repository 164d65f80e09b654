//! `fuzz/run.sh` counts only libFuzzer's failure files as crashes: its slow-unit files (inputs
//! that merely ran slowly) were once counted as crashes.
#![allow(clippy::unwrap_used)]

use std::path::PathBuf;
use std::process::Command;

#[test]
fn slow_units_are_not_counted_as_crashes() {
    let dir = std::env::temp_dir().join(format!("topoc-run-sh-{}", std::process::id()));
    let artifacts: PathBuf = dir.join("topology");
    std::fs::create_dir_all(&artifacts).unwrap();
    for name in [
        "crash-0a1b",
        "timeout-2c3d",
        "oom-4e5f",
        "leak-6a7b",
        "slow-unit-8c9d",
        "slow-unit-0e1f",
    ] {
        std::fs::write(artifacts.join(name), b"input").unwrap();
    }
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("run.sh");
    let out = Command::new("bash")
        .arg(&script)
        .arg("--count-findings")
        .arg(&artifacts)
        .output()
        .unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8(out.stdout).unwrap(), "4 2\n");
}
