//! Compile + verify in the pattern form, tori of 256 to 40 000 nodes and hypercubes to 65 536.
//!
//! `cargo bench -p topoc --bench pattern` (every case) or `-- 200x200` (the cases whose name
//! contains it). Each case runs in a process of its own (the bench runs itself again with
//! `--case NAME`), so that its peak resident set (`VmHWM`, `/proc/self/status`) is its own.
//! A case is one 16 Mi-element f32 allreduce under `auto`, compiled by
//! `topoc::compile::pattern::compile_pattern` (parse, build, weigh the methods, lower the
//! origin's program, prove it); the baseline, in the same process, is writing the proved
//! pattern as compact RON. The explicit form's size (instructions) is what the pattern stands
//! for; the growth law is fitted over the tori.

mod common;

use common::{load_average, status_kb};
use std::process::Command;
use std::time::Instant;

/// One machine.
struct Case {
    name: String,
    source: String,
}

fn case(name: &str, machine: &str) -> Case {
    Case {
        name: name.to_string(),
        source: format!(
            "Topology(name: \"{name}\", machine: {machine}, phases: [Exchange(name: \"grads\", \
             collective: AllReduce, op: Sum, dtype: F32, elements: 16777216)])"
        ),
    }
}

fn cases() -> Vec<Case> {
    let mut all: Vec<Case> = [16, 32, 64, 128, 200]
        .iter()
        .map(|n| {
            case(
                &format!("torus-{n}x{n}"),
                &format!("Torus(dims: [{n}, {n}])"),
            )
        })
        .collect();
    all.push(case("torus-16x16x16", "Torus(dims: [16, 16, 16])"));
    all.push(case("torus-32x32x32", "Torus(dims: [32, 32, 32])"));
    for d in [12, 14, 16] {
        all.push(case(
            &format!("hypercube-{d}"),
            &format!("Hypercube(dims: {d})"),
        ));
    }
    all
}

/// User + system CPU seconds of this process so far.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields 14 and 15 (utime, stime) in clock ticks, after the command name's parentheses.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let tick = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (tick(11) + tick(12)) / 100.0
}

/// The child: one case, one line of `key=value` fields.
fn run_case(case: &Case) {
    let before = status_kb("VmHWM");
    let cpu = cpu_seconds();
    let start = Instant::now();
    let loaded = topoc::load(&case.source).expect("loads");
    let compiled = topoc::compile::pattern::compile_pattern(&loaded, &topoc::Options::default())
        .expect("compiles")
        .expect("a pattern");
    let wall = start.elapsed().as_secs_f64();
    let cpu = cpu_seconds() - cpu;
    let peak = status_kb("VmHWM").saturating_sub(before);
    let pattern = compiled.pattern.pattern();
    let report = &compiled.pattern.report().phases[0];
    let t = Instant::now();
    let text = schedule_ir::serial::pattern_to_string(
        pattern,
        schedule_ir::serial::Format::Ron,
        schedule_ir::serial::Form::Compact,
    );
    let write = t.elapsed().as_secs_f64();
    let back = schedule_ir::serial::pattern_from_str(&text).expect("reads back") == *pattern;
    println!(
        "name={} nodes={} steps={} per_node={} instructions={} wall={wall} cpu={cpu} write={write} \
         bytes={} peak_kb={peak} efficiency={} back={back} load={}",
        case.name,
        pattern.grid.nodes.len(),
        report.steps,
        report.instructions_per_node,
        report.instructions,
        text.len(),
        report.efficiency,
        load_average()
    );
}

fn field<'a>(line: &'a str, key: &str) -> &'a str {
    line.split_whitespace()
        .find_map(|f| f.strip_prefix(key)?.strip_prefix('='))
        .unwrap_or("?")
}

fn num(line: &str, key: &str) -> f64 {
    field(line, key).parse().unwrap_or(f64::NAN)
}

/// Least-squares slope of `ln y` against `ln x`.
fn slope(points: &[(f64, f64)]) -> f64 {
    let logs: Vec<(f64, f64)> = points.iter().map(|&(x, y)| (x.ln(), y.ln())).collect();
    let n = logs.len() as f64;
    let (mx, my) = logs
        .iter()
        .fold((0.0, 0.0), |(a, b), &(x, y)| (a + x / n, b + y / n));
    let (num, den) = logs.iter().fold((0.0, 0.0), |(a, b), &(x, y)| {
        (a + (x - mx) * (y - my), b + (x - mx) * (x - mx))
    });
    num / den
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let all = cases();
    if let Some(i) = args.iter().position(|a| a == "--case") {
        let name = args.get(i + 1).expect("case name");
        run_case(all.iter().find(|c| &c.name == name).expect("known case"));
        return;
    }
    if !args.iter().any(|a| a == "--bench") {
        // Smoke run (`cargo test --benches`): the smallest case, in process.
        run_case(&all[0]);
        return;
    }
    let filter: Vec<&String> = args.iter().filter(|a| !a.starts_with("--")).collect();
    println!("load average at start {}", load_average());
    println!(
        "| machine | nodes | steps | instructions per node | explicit instructions | compile + verify (wall) | CPU | write pattern | ratio | pattern file | peak RSS | efficiency | reads back | load |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|");
    let mut tori = Vec::new();
    for case in all
        .iter()
        .filter(|c| filter.is_empty() || filter.iter().any(|f| c.name.contains(f.as_str())))
    {
        let exe = std::env::current_exe().expect("own path");
        let out = Command::new(exe)
            .args(["--case", &case.name])
            .output()
            .expect("runs");
        let line = String::from_utf8_lossy(&out.stdout).to_string();
        if !out.status.success() {
            println!(
                "| {} | failed: {} |",
                case.name,
                String::from_utf8_lossy(&out.stderr)
                    .lines()
                    .last()
                    .unwrap_or("")
            );
            continue;
        }
        let (wall, write) = (num(&line, "wall"), num(&line, "write"));
        println!(
            "| {} | {} | {} | {} | {} | {:.2} s | {:.2} s | {:.1} ms | {:.0} | {:.2} MB | {:.0} MiB | {:.1}% | {} | {} |",
            case.name,
            field(&line, "nodes"),
            field(&line, "steps"),
            field(&line, "per_node"),
            field(&line, "instructions"),
            wall,
            num(&line, "cpu"),
            write * 1e3,
            wall / write,
            num(&line, "bytes") / 1e6,
            num(&line, "peak_kb") / 1024.0,
            num(&line, "efficiency") * 100.0,
            field(&line, "back"),
            field(&line, "load"),
        );
        // The growth law of the pattern alone: from 4096 nodes every other method is refused
        // before lowering, below it `auto` also lowers the explicit methods that could win.
        if case.name.starts_with("torus")
            && case.name.matches('x').count() == 1
            && num(&line, "nodes") >= 4096.0
        {
            tori.push((
                num(&line, "nodes"),
                num(&line, "cpu"),
                num(&line, "peak_kb"),
            ));
        }
    }
    if tori.len() >= 2 {
        let time: Vec<(f64, f64)> = tori.iter().map(|t| (t.0, t.1)).collect();
        let memory: Vec<(f64, f64)> = tori.iter().map(|t| (t.0, t.2)).collect();
        println!();
        println!(
            "growth over the 2-D tori of 4096 nodes and more (log-log least squares against nodes): CPU time {:.2}, peak RSS {:.2}",
            slope(&time),
            slope(&memory)
        );
    }
}
