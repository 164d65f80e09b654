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

/// Runs topoc in `dir`.
fn topoc_in(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_topoc"))
        .args(args)
        .current_dir(dir)
        .output()
        .expect("topoc runs")
}

#[test]
fn an_output_naming_the_input_is_refused_for_every_command() {
    let dir = tempfile::tempdir().unwrap();
    let topology = dir.path().join("ring8.ron");
    std::fs::copy(repo().join("examples/ring8.ron"), &topology).unwrap();
    let xml = dir.path().join("dgx.xml");
    std::fs::copy(repo().join("examples/import/dgx-a100.xml"), &xml).unwrap();
    let before = (
        std::fs::read(&topology).unwrap(),
        std::fs::read(&xml).unwrap(),
    );
    // The same file by its own name, through `./` and through another directory.
    for args in [
        vec!["compile", "ring8.ron", "-o", "ring8.ron"],
        vec!["compile", "ring8.ron", "-o", "./ring8.ron"],
        vec![
            "compile",
            "./ring8.ron",
            "--emit",
            "json",
            "-o",
            "../x/ring8.ron",
        ],
        vec!["draw", "ring8.ron", "-o", "ring8.ron"],
        vec!["import", "nccl-xml", "dgx.xml", "-o", "dgx.xml"],
    ] {
        let args: Vec<String> = args
            .iter()
            .map(|a| {
                a.replace(
                    "../x/",
                    &format!("../{}/", dir.path().file_name().unwrap().to_str().unwrap()),
                )
            })
            .collect();
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = topoc_in(dir.path(), &args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("is the input"), "{args:?}: {stderr}");
        assert!(stderr.contains("nothing was written"), "{args:?}: {stderr}");
    }
    assert_eq!(
        (
            std::fs::read(&topology).unwrap(),
            std::fs::read(&xml).unwrap()
        ),
        before,
        "the inputs are untouched"
    );
    assert_eq!(entries(dir.path()), ["dgx.xml", "ring8.ron"]);
}

#[test]
fn an_output_of_a_dash_is_standard_output() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        repo().join("examples/ring8.ron"),
        dir.path().join("ring8.ron"),
    )
    .unwrap();
    std::fs::copy(
        repo().join("examples/import/dgx-a100.xml"),
        dir.path().join("dgx.xml"),
    )
    .unwrap();
    for (args, starts) in [
        (vec!["compile", "ring8.ron", "-o", "-"], "Schedule("),
        (
            vec!["compile", "ring8.ron", "--emit", "json", "--output", "-"],
            "{",
        ),
        (vec!["draw", "ring8.ron", "-o", "-"], "// topoc draw:"),
        (
            vec!["import", "nccl-xml", "dgx.xml", "-o", "-"],
            "// Imported by topoc",
        ),
    ] {
        let out = topoc_in(dir.path(), &args);
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let stdout = String::from_utf8(out.stdout).unwrap();
        assert!(
            stdout.trim_start().starts_with(starts),
            "{args:?}: {stdout:.200}"
        );
    }
    assert_eq!(
        entries(dir.path()),
        ["dgx.xml", "ring8.ron"],
        "no file named `-`"
    );
}

/// An output that names a device or a named pipe (`-o /dev/null`, `-o /dev/stdout`) is
/// written through, not renamed over: run as root, a rename would replace `/dev/null` with a
/// regular file. A named pipe stands in for the device here, so a failure cannot harm the
/// machine.
#[cfg(unix)]
#[test]
fn an_output_that_is_a_named_pipe_is_written_through_and_stays_a_pipe() {
    use std::os::unix::fs::FileTypeExt;
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("schedule.pipe");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success(), "mkfifo");
    // The reader blocks until a writer opens the pipe; a program that renamed a file over
    // the pipe never does, so the wait for what it read has a limit.
    let (sender, read) = std::sync::mpsc::channel();
    {
        let fifo = fifo.clone();
        std::thread::spawn(move || sender.send(std::fs::read_to_string(fifo).unwrap()));
    }
    let out = topoc(&[
        "compile",
        "examples/ring8.ron",
        "-o",
        fifo.to_str().unwrap(),
    ]);
    if !out.status.success() {
        // Open the pipe once for writing so that the reader sees its end.
        drop(std::fs::OpenOptions::new().write(true).open(&fifo));
    }
    let read = read
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("the schedule arrives through the pipe");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(read, stdout_of(&["compile", "examples/ring8.ron"]));
    assert!(
        std::fs::metadata(&fifo).unwrap().file_type().is_fifo(),
        "the pipe is still a pipe"
    );
    assert_eq!(entries(dir.path()), ["schedule.pipe"], "no temporary file");
}

fn stdout_of(args: &[&str]) -> String {
    let out = topoc(args);
    assert!(out.status.success(), "{args:?}");
    String::from_utf8(out.stdout).unwrap()
}

#[cfg(unix)]
#[test]
fn a_read_only_output_is_refused_and_kept() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("kept.ron");
    std::fs::write(&out, "earlier contents\n").unwrap();
    std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o444)).unwrap();
    let o = out.to_str().unwrap();
    for args in [
        vec!["compile", "examples/ring8.ron", "-o", o],
        vec!["draw", "examples/ring8.ron", "-o", o],
        vec![
            "import",
            "nccl-xml",
            "examples/import/dgx-a100.xml",
            "-o",
            o,
        ],
    ] {
        let failed = topoc(&args);
        assert_eq!(failed.status.code(), Some(1), "{args:?}");
        let stderr = String::from_utf8_lossy(&failed.stderr);
        assert!(
            stderr.contains(&format!("error: {o} is read-only; nothing was written")),
            "{args:?}: {stderr}"
        );
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "earlier contents\n");
        assert_eq!(entries(dir.path()), ["kept.ron"]);
    }
}

/// SIGTERM while `-o` is being written removes the temporary file (its destructor never
/// runs), and the process still ends by the signal. The test polls the directory until the
/// temporary file appears, then signals; if the compile ever finishes first it tries again,
/// and fails after several attempts rather than passing without having interrupted a write.
#[cfg(unix)]
#[test]
fn an_interrupted_write_leaves_no_temporary_file() {
    use std::os::unix::process::ExitStatusExt;
    let dir = tempfile::tempdir().unwrap();
    // About 19 MB of JSON: writing and syncing it takes long enough to be caught.
    std::fs::write(
        dir.path().join("big.ron"),
        "Topology(name: \"big\", machine: Ring(nodes: 96))",
    )
    .unwrap();
    let temporary = |dir: &Path| entries(dir).into_iter().find(|e| e.starts_with(".tmp"));
    for _attempt in 0..4 {
        let mut child = Command::new(env!("CARGO_BIN_EXE_topoc"))
            .args(["compile", "big.ron", "--emit", "json", "-o", "out.json"])
            .current_dir(dir.path())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break Err(status);
            }
            if temporary(dir.path()).is_some() {
                let pid = libc::pid_t::try_from(child.id()).unwrap();
                // SAFETY: signals our own child, which has not been reaped yet.
                assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
                break Ok(child.wait().unwrap());
            }
            std::thread::sleep(std::time::Duration::from_micros(500));
        };
        match status {
            Ok(status) => {
                assert_eq!(status.signal(), Some(libc::SIGTERM), "{status:?}");
                assert_eq!(temporary(dir.path()), None, "{:?}", entries(dir.path()));
                return;
            }
            // Finished before the temporary file was seen: remove the output, try again.
            Err(status) => {
                assert!(status.success(), "{status:?}");
                std::fs::remove_file(dir.path().join("out.json")).unwrap();
            }
        }
    }
    panic!("the write was never caught in progress in 4 attempts");
}

/// A full disk (`/dev/full`) is an error that names what could not be written, for a file and
/// for standard output alike; never a panic.
#[cfg(target_os = "linux")]
#[test]
fn a_full_disk_is_an_error_naming_the_output() {
    let full = Path::new("/dev/full");
    if !full.exists() {
        return;
    }
    let out = topoc(&["compile", "examples/ring8.ron", "-o", "/dev/full"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("cannot write /dev/full"), "{stderr}");
    for command in ["compile", "draw"] {
        let out = Command::new(env!("CARGO_BIN_EXE_topoc"))
            .args([command, "examples/ring8.ron"])
            .current_dir(repo())
            .stdout(std::fs::OpenOptions::new().write(true).open(full).unwrap())
            .output()
            .expect("topoc runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{command}: {stderr}");
        assert!(
            stderr.contains("cannot write to standard output"),
            "{command}: {stderr}"
        );
        assert!(!stderr.contains("panicked"), "{command}: {stderr}");
    }
}
