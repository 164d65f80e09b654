//! `topoc run` within its budgets: a run that would need more memory or work than
//! `--memory-budget` / `--work-budget` allow is refused before its inputs are made, with the
//! figures; within them it runs.
#![allow(clippy::unwrap_used, clippy::panic)]

use std::path::Path;
use std::process::{Command, Output};

fn topoc(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_topoc"))
        .args(args)
        .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap())
        .output()
        .expect("topoc runs")
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Eight nodes of 2²⁸ `f32` (1 GiB each): 8 GiB of inputs, refused by the default 4 GiB budget
/// at once (the finding: such runs grew until the allocator aborted).
#[test]
fn a_run_past_the_default_memory_budget_is_refused_before_allocating() {
    let out = topoc(&["run", "examples/ring8.ron", "--elements", "268435456"]);
    assert!(!out.status.success());
    let all = text(&out);
    assert!(
        all.contains(
            "error: running phase `grads`: phase `grads` needs about 26.0 GiB of memory to run \
             (data 8.0 GiB on 8 node(s), scratch 0 B, messages 2.0 GiB, copies held beside the \
             run 16.0 GiB)"
        ),
        "{all}"
    );
    assert!(
        all.contains("over the memory budget of 4.0 GiB: run a shorter vector or raise the budget"),
        "{all}"
    );
}

#[test]
fn the_budgets_are_options() {
    let small = ["run", "examples/ring8.ron", "--elements", "1000"];
    let ok = topoc(&small);
    assert!(ok.status.success(), "{}", text(&ok));

    let out = topoc(&[&small[..], &["--memory-budget", "64KiB"]].concat());
    assert!(!out.status.success());
    assert!(
        text(&out).contains("over the memory budget of 64.0 KiB"),
        "{}",
        text(&out)
    );

    let out = topoc(&[&small[..], &["--work-budget", "10KiB"]].concat());
    assert!(!out.status.success());
    assert!(
        text(&out).contains("over the work budget of 10.0 KiB"),
        "{}",
        text(&out)
    );

    // A size that does not parse is a usage error (exit status 2).
    let out = topoc(&[&small[..], &["--memory-budget", "lots"]].concat());
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out).contains(
            "invalid value 'lots' for '--memory-budget <MEMORY_BUDGET>': `lots` is not a size"
        ),
        "{}",
        text(&out)
    );
}
