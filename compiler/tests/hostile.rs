//! Hostile inputs: small files that describe machines or vectors far too large to compile.
//! Every file in `tests/hostile/` is given to `topoc compile`, `check`, `simulate` and `draw`,
//! each run under an address-space limit and a wall-clock timeout. Each must end by itself with
//! status 0 or the ordinary error status 1 — never a signal (an allocator abort, the limit's
//! kill) and never a panic — and when it refuses, its diagnostic names the limit it met.
//! A file may pick its commands on its first line, `// commands: compile check draw`; by
//! default it gets all four. Times to refuse are measured in release builds, not here
//! (BENCHMARKS.md, "Hostile inputs").
#![allow(clippy::unwrap_used, clippy::panic)]

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The address space each run may map: above the 4 GiB default budget, with room for the
/// program itself, so that a run that kept to its estimate is never killed by the limit.
const ADDRESS_SPACE: u64 = 6 << 30;

/// How long a run may take before it counts as hung: generous, for debug builds on loaded
/// machines (a release build refuses each of these files in well under two seconds).
const TIMEOUT: Duration = Duration::from_secs(30);

/// What every refusal says, one of which each refused run's diagnostic must contain.
const LIMITS: [&str; 4] = [
    "memory budget",
    "more than topoc builds",
    "more than the verifier proves",
    "plans for at most",
];

struct Outcome {
    status: std::process::ExitStatus,
    stderr: String,
}

/// Runs `topoc args` under [`ADDRESS_SPACE`], killing it after [`TIMEOUT`].
fn run_limited(args: &[&str]) -> Outcome {
    let mut command = Command::new(env!("CARGO_BIN_EXE_topoc"));
    command
        .args(args)
        .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        // SAFETY: `setrlimit` is async-signal-safe and only touches the child's own limits.
        unsafe {
            command.pre_exec(|| {
                let limit = libc::rlimit {
                    rlim_cur: ADDRESS_SPACE as libc::rlim_t,
                    rlim_max: ADDRESS_SPACE as libc::rlim_t,
                };
                if libc::setrlimit(libc::RLIMIT_AS, &limit) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    let mut child = command.spawn().expect("topoc starts");
    let mut stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        stderr.read_to_string(&mut text).ok();
        text
    });
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > TIMEOUT {
            child.kill().ok();
            child.wait().ok();
            panic!("topoc {} did not finish within {TIMEOUT:?}", args.join(" "));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Outcome {
        status,
        stderr: reader.join().unwrap(),
    }
}

fn hostile_files() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/hostile");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "ron"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no hostile files in {}", dir.display());
    files
}

#[test]
fn every_hostile_file_is_refused_or_handled_by_every_command() {
    let out = tempfile::tempdir().unwrap();
    let sink = out.path().join("out");
    let sink = sink.to_str().unwrap();
    for file in hostile_files() {
        let path = file.to_str().unwrap();
        let text = std::fs::read_to_string(&file).unwrap();
        let picked: Option<Vec<&str>> = text
            .lines()
            .next()
            .and_then(|l| l.strip_prefix("// commands:"))
            .map(|l| {
                l.split('(')
                    .next()
                    .unwrap_or("")
                    .split_whitespace()
                    .collect()
            });
        let commands: [Vec<&str>; 4] = [
            vec!["compile", path, "-o", sink],
            vec!["check", path],
            vec!["simulate", path, "--sizes", "1MiB"],
            vec!["draw", path, "--format", "svg", "-o", sink],
        ];
        for args in commands {
            if picked.as_ref().is_some_and(|p| !p.contains(&args[0])) {
                continue;
            }
            let what = format!("topoc {}", args.join(" "));
            let outcome = run_limited(&args);
            let code = outcome.status.code();
            assert!(
                matches!(code, Some(0) | Some(1)),
                "{what} ended with {:?} (a signal or an unexpected status):\n{}",
                outcome.status,
                outcome.stderr
            );
            assert!(
                !outcome.stderr.contains("panicked"),
                "{what} panicked:\n{}",
                outcome.stderr
            );
            if code == Some(1) {
                assert!(
                    LIMITS.iter().any(|l| outcome.stderr.contains(l)),
                    "{what} was refused without naming a limit:\n{}",
                    outcome.stderr
                );
            }
        }
    }
}

/// A refusal by the memory budget says how to raise it, and raising it is obeyed: a machine
/// refused at a small budget compiles at the default.
#[test]
fn the_memory_budget_is_an_option_of_every_command_that_compiles() {
    let file = "examples/torus4x4.ron";
    let out = tempfile::tempdir().unwrap();
    let sink = out.path().join("out");
    let sink = sink.to_str().unwrap();
    for command in ["compile", "check", "simulate", "draw"] {
        let mut args = vec![command, file, "--memory-budget", "64KiB"];
        if command == "compile" || command == "draw" {
            args.extend(["-o", sink]);
        }
        let refused = run_limited(&args);
        assert_eq!(
            refused.status.code(),
            Some(1),
            "{command}: {}",
            refused.stderr
        );
        assert!(
            refused
                .stderr
                .contains("more than the memory budget of 64 KiB (--memory-budget)"),
            "{command}: {}",
            refused.stderr
        );
        assert!(
            refused
                .stderr
                .contains("raise the budget with --memory-budget")
                || command == "simulate",
            "{command}: {}",
            refused.stderr
        );
    }
    let fits = run_limited(&["compile", file, "--memory-budget", "64MiB", "-o", sink]);
    assert_eq!(fits.status.code(), Some(0), "{}", fits.stderr);
    let bad = run_limited(&["compile", file, "--memory-budget", "lots"]);
    assert_eq!(bad.status.code(), Some(2), "{}", bad.stderr);
    assert!(bad.stderr.contains("--memory-budget"), "{}", bad.stderr);
}
