//! Compile + verify time and peak memory at the largest sizes: ladders of 4 to 512 pairs, tori
//! up to 64 × 64, balanced trees up to 4096 processors, a lopsided tree and the largest ring the
//! size limit admits, and the growth law.
//!
//! Run: `cargo bench -p topoc --bench scale` (every case), or with a filter on the case name:
//! `cargo bench -p topoc --bench scale -- ladder`. Without `--bench` (as `cargo test --benches`
//! runs it) it compiles the smallest case of each family in one process and stops.
//!
//! Every case runs in its own process (this binary again, with `--case NAME METHOD`), so that
//! the peak resident set it reports (`VmHWM` of `/proc/self/status`, read right after the first
//! compile) is that case's alone. A case is compiled with the method `auto` takes and, where
//! that differs, with the family's natural method (`ladder-rings`, `rotated-hd`, `tree`).
//! Each figure is the fastest of five runs, or of two when they take over two seconds:
//!
//! - `compile + verify`: `topoc::compile` (parse, build, embed, lower, verify);
//! - `lower`: the method's lowering alone (`Method::lower`, embedding included), on the machine
//!   loaded again; `verify`: `schedule_ir::verify` on the schedule compiled; the rest of
//!   `compile + verify` is parsing, building the machine and, for `auto`, the methods tried first;
//! - baselines, costs linear in the schedule's size by construction: writing the schedule as
//!   RON (`schedule_ir::serial::to_string`), and one pass summing every instruction's chunks.
//!
//! The load average is printed with every case: the machine may be shared, so compare the
//! ratios to a baseline of the same run rather than absolute times.

mod common;

use common::{load_average, status_kb};
use schedule_ir::{Collective, DType, Instr, ReduceOp, Schedule};
use std::hint::black_box;
use std::process::Command;
use std::time::{Duration, Instant};
use topoc::lower::Knobs;
use topoc::lower::PhaseSpec;

const ELEMENTS: u64 = 16_777_216;

/// A machine of one family at one size.
struct Case {
    name: String,
    family: &'static str,
    /// The method the family is built for.
    natural: &'static str,
    source: String,
}

fn exchange() -> String {
    format!(
        "phases: [Exchange(name: \"grads\", collective: AllReduce, op: Sum, dtype: F32, \
         elements: {ELEMENTS})]"
    )
}

fn ladder(pairs: usize) -> Case {
    Case {
        name: format!("ladder-{pairs}"),
        family: "ladder",
        natural: "ladder-rings",
        source: format!(
            "Topology(name: \"ladder-{pairs}\", machine: Ladder(pairs: {pairs}), {})",
            exchange()
        ),
    }
}

fn ring(nodes: usize) -> Case {
    Case {
        name: format!("ring-{nodes}"),
        family: "ring",
        natural: "ring",
        source: format!(
            "Topology(name: \"ring-{nodes}\", machine: Ring(nodes: {nodes}), {})",
            exchange()
        ),
    }
}

fn torus(n: usize) -> Case {
    Case {
        name: format!("torus-{n}x{n}"),
        family: "torus",
        natural: "rotated-hd",
        source: format!(
            "Topology(name: \"torus-{n}x{n}\", machine: Torus(dims: [{n}, {n}]), {})",
            exchange()
        ),
    }
}

/// A three-dimensional torus of `n × n × n` nodes.
fn torus3(n: usize) -> Case {
    Case {
        name: format!("torus-{n}x{n}x{n}"),
        family: "torus 3-d",
        natural: "rotated-hd",
        source: format!(
            "Topology(name: \"torus-{n}x{n}x{n}\", machine: Torus(dims: [{n}, {n}, {n}]), {})",
            exchange()
        ),
    }
}

/// A random 4-regular graph of `n` nodes (`n` even), the same every run: two random perfect
/// matchings' worth of edges per node, drawn by the configuration model and redrawn until no
/// edge is a loop or repeated and the graph is connected.
fn regular_graph(n: usize) -> Case {
    use rand::seq::SliceRandom;
    use rand::SeedableRng;
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(4);
    let edges = loop {
        let mut stubs: Vec<usize> = (0..n).flat_map(|v| [v; 4]).collect();
        stubs.shuffle(&mut rng);
        let mut edges: Vec<(usize, usize)> = stubs
            .chunks(2)
            .map(|p| (p[0].min(p[1]), p[0].max(p[1])))
            .collect();
        edges.sort_unstable();
        let simple = edges.windows(2).all(|w| w[0] != w[1]) && edges.iter().all(|(a, b)| a != b);
        if simple && connected(n, &edges) {
            break edges;
        }
    };
    let nodes: Vec<String> = (0..n).map(|i| format!("\"n{i}\"")).collect();
    let links: Vec<String> = edges
        .iter()
        .enumerate()
        .map(|(j, (a, b))| format!("(id: \"e{j}\", between: (\"n{a}\", \"n{b}\"))"))
        .collect();
    Case {
        name: format!("graph-{n}"),
        family: "4-regular graph",
        natural: "trees",
        source: format!(
            "Topology(name: \"graph-{n}\", machine: Graph(nodes: [{}], links: [{}], link: \
             (bandwidth_gbps: 100.0, latency_us: 1.0)), {})",
            nodes.join(", "),
            links.join(", "),
            exchange()
        ),
    }
}

/// Whether the edges join all `n` nodes.
fn connected(n: usize, edges: &[(usize, usize)]) -> bool {
    let mut adj = vec![Vec::new(); n];
    for &(a, b) in edges {
        adj[a].push(b);
        adj[b].push(a);
    }
    let mut seen = vec![false; n];
    let mut stack = vec![0];
    seen[0] = true;
    while let Some(v) = stack.pop() {
        for &w in &adj[v] {
            if !seen[w] {
                seen[w] = true;
                stack.push(w);
            }
        }
    }
    seen.iter().all(|&s| s)
}

/// A balanced tree of switches with `leaves` processors: 16 processors under every lowest
/// switch, 16 children per switch above, and the remaining factor at the root.
fn balanced_tree(leaves: usize) -> Case {
    let mut fanouts = vec![16usize.min(leaves)];
    let mut rest = leaves / fanouts[0];
    while rest > 1 {
        let f = if rest >= 16 { 16 } else { rest };
        fanouts.insert(0, f);
        rest /= f;
    }
    let mut next_processor = 0;
    let root = tree_level("s", &fanouts, &mut next_processor);
    Case {
        name: format!("tree-{leaves}"),
        family: "tree",
        natural: "tree",
        source: tree_source(&format!("tree-{leaves}"), &root),
    }
}

fn tree_level(name: &str, fanouts: &[usize], next: &mut usize) -> String {
    let children: Vec<String> = match fanouts {
        [] => return processor(next),
        [f, below @ ..] => (0..*f)
            .map(|i| {
                if below.is_empty() {
                    processor(next)
                } else {
                    tree_level(&format!("{name}.{i}"), below, next)
                }
            })
            .collect(),
    };
    format!(
        "Switch(name: \"{name}\", children: [{}])",
        children.join(", ")
    )
}

fn processor(next: &mut usize) -> String {
    let p = format!("Processor(name: \"p{next}\")");
    *next += 1;
    p
}

/// A lopsided tree with `leaves` processors: a switch over `n` processors has children over
/// `⌈n/2⌉`, `⌈n/4⌉`, … of them, so processors sit at every depth from 1 to about `log₂ n`.
fn lopsided_tree(leaves: usize) -> Case {
    fn node(name: &str, n: usize, next: &mut usize) -> String {
        if n == 1 {
            return processor(next);
        }
        let mut children = Vec::new();
        let mut rest = n;
        while rest > 0 {
            let part = rest.div_ceil(2);
            children.push(node(&format!("{name}.{}", children.len()), part, next));
            rest -= part;
        }
        format!(
            "Switch(name: \"{name}\", children: [{}])",
            children.join(", ")
        )
    }
    let mut next = 0;
    let root = node("s", leaves, &mut next);
    Case {
        name: format!("lopsided-{leaves}"),
        family: "lopsided tree",
        natural: "tree",
        source: tree_source(&format!("lopsided-{leaves}"), &root),
    }
}

fn tree_source(name: &str, root: &str) -> String {
    format!(
        "Topology(name: \"{name}\", machine: Tree(root: {root}), {})",
        exchange()
    )
}

fn cases() -> Vec<Case> {
    let mut all: Vec<Case> = [4, 8, 16, 32, 64, 128, 256, 512]
        .into_iter()
        .map(ladder)
        .collect();
    all.extend([4, 8, 16, 32, 64, 128, 200].into_iter().map(torus));
    all.extend([8, 16].into_iter().map(torus3));
    all.push(regular_graph(1024));
    all.extend([16, 64, 256, 1024, 4096].into_iter().map(balanced_tree));
    all.extend([100, 1000].into_iter().map(lopsided_tree));
    // The size limit's edge: the largest ring `limits::MAX_INSTRUCTIONS` lets through, and the
    // smallest it refuses.
    all.extend([1448, 1449].into_iter().map(ring));
    all
}

fn options(method: &str) -> topoc::Options {
    topoc::Options {
        algorithm: method.parse().ok(),
        ..topoc::Options::default()
    }
}

/// Chunk ids named by every instruction, and further route links named by every send: with
/// the instructions, the words of the schedule.
fn refs(schedule: &Schedule) -> (u64, u64) {
    let mut chunks = 0u64;
    let mut via = 0u64;
    for instr in schedule
        .phases
        .iter()
        .flat_map(|p| &p.programs)
        .flat_map(|p| p.steps.iter().flatten())
    {
        chunks += instr.chunks().len() as u64;
        if let Instr::Send { via: v, .. } = instr {
            via += v.len() as u64;
        }
    }
    (chunks, via)
}

fn instructions(schedule: &Schedule) -> u64 {
    schedule
        .phases
        .iter()
        .flat_map(|p| &p.programs)
        .map(|p| p.steps.iter().map(Vec::len).sum::<usize>() as u64)
        .sum()
}

/// One pass over every instruction, summing its chunk ids: a baseline linear by construction.
fn plain_pass(schedule: &Schedule) -> u64 {
    let mut sum = 0u64;
    for phase in &schedule.phases {
        for program in &phase.programs {
            for instr in program.steps.iter().flatten() {
                sum = instr
                    .chunks()
                    .iter()
                    .fold(sum, |s, c| s.wrapping_add(u64::from(c.0)));
            }
        }
    }
    sum
}

/// Runs `f` five times, or twice when that takes over two seconds, and returns the fastest
/// time with the last result.
fn fastest<T>(mut f: impl FnMut() -> T) -> (Duration, T) {
    let start = Instant::now();
    let mut best = Duration::MAX;
    let mut out = None;
    for runs in 1.. {
        // The previous result is freed before the clock starts.
        drop(out.take());
        let t = Instant::now();
        let result = f();
        best = best.min(t.elapsed());
        out = Some(result);
        if runs >= 5 || (runs >= 2 && start.elapsed() > Duration::from_secs(2)) {
            break;
        }
    }
    (best, out.expect("at least one run"))
}

/// The child: compiles one case with one method and prints one line of `key=value` fields.
fn run_case(case: &Case, method: &str) {
    let before_kb = status_kb("VmHWM");
    let load = load_average();
    let t = Instant::now();
    let first = topoc::compile_source(&case.source, &options(method));
    let first_time = t.elapsed();
    let compiled = match first {
        Ok(c) => c,
        Err(e) => {
            let message = match &e {
                topoc::Error::Topology(problems) => {
                    topoc::diag::render(&case.name, &case.source, problems, false)
                }
                topoc::Error::Unverified(e) => {
                    let first = e.errors.first().map(ToString::to_string);
                    format!("{e}: {}", first.unwrap_or_default())
                }
            };
            // The headline and what follows it (a hint, or the verifier's first error).
            let line = message
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty() && !l.contains('│') && !l.contains('┌'))
                .take(3)
                .collect::<Vec<_>>()
                .join(" — ");
            println!(
                "load={load} method={method} seconds={} error={line}",
                first_time.as_secs_f64()
            );
            return;
        }
    };
    let peak_kb = status_kb("VmHWM");
    let held_kb = status_kb("VmRSS");
    let used = compiled.notes[0].method.name();
    let schedule = compiled.schedule.schedule();
    let instrs = instructions(schedule);
    let steps = schedule.phases[0].steps;
    let (chunk_refs, via_refs) = refs(schedule);
    let nodes = schedule.machine.nodes.len();
    drop(compiled);
    let (total, compiled) =
        fastest(|| topoc::compile_source(&case.source, &options(method)).expect("compiled once"));
    // The lowering alone, with the method the compile took.
    let method_used = compiled.notes[0].method;
    let machine = topoc::compile::load(&case.source).expect("loads").machine;
    let spec = PhaseSpec {
        name: "grads".to_string(),
        collective: Collective::AllReduce,
        op: ReduceOp::Sum,
        dtype: DType::F32,
        elements: ELEMENTS,
    };
    let knobs = Knobs::default();
    let (lower, _) = fastest(|| method_used.lower(&machine, &spec, &knobs).ok());
    // Verify the same schedule again and again (freeing each report outside the clock).
    let mut schedule = compiled.schedule.into_schedule();
    let start = Instant::now();
    let mut verify = Duration::MAX;
    for runs in 1..=5 {
        let t = Instant::now();
        let verified = schedule_ir::verify(schedule).expect("verifies");
        verify = verify.min(t.elapsed());
        schedule = verified.into_schedule();
        if runs >= 2 && start.elapsed() > Duration::from_secs(2) {
            break;
        }
    }
    let (ron, bytes) = fastest(|| {
        schedule_ir::serial::to_string(black_box(&schedule), schedule_ir::serial::Format::Ron).len()
    });
    let (pass, _) = fastest(|| black_box(plain_pass(black_box(&schedule))));
    // The compact form: its size, and whether it reads back to the very same schedule.
    let compact = schedule_ir::serial::to_string_with(
        &schedule,
        schedule_ir::serial::Format::Ron,
        schedule_ir::serial::Form::Compact,
    );
    let same = schedule_ir::serial::from_str(&compact).is_ok_and(|back| back == schedule);
    let compact_bytes = compact.len();
    println!(
        "load={load} method={used} nodes={nodes} steps={steps} instructions={instrs} \
         chunk_refs={chunk_refs} via_refs={via_refs} \
         first={} total={} lower={} verify={} ron={} ron_bytes={bytes} pass={} before_kb={before_kb} \
         peak_kb={peak_kb} held_kb={held_kb} compact_bytes={compact_bytes} compact_same={same}",
        first_time.as_secs_f64(),
        total.as_secs_f64(),
        lower.as_secs_f64(),
        verify.as_secs_f64(),
        ron.as_secs_f64(),
        pass.as_secs_f64(),
    );
}

/// One child's result.
struct Row {
    case: String,
    family: &'static str,
    fields: Vec<(String, String)>,
}

impl Row {
    fn get(&self, key: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
    fn num(&self, key: &str) -> f64 {
        self.get(key)
            .and_then(|v| v.parse().ok())
            .unwrap_or(f64::NAN)
    }
}

fn spawn(case: &Case, method: &str) -> Row {
    let exe = std::env::current_exe().expect("own path");
    let output = Command::new(exe)
        .args(["--case", &case.name, method])
        .output()
        .expect("child runs");
    let text = String::from_utf8_lossy(&output.stdout);
    let line = text.lines().last().unwrap_or("").to_string();
    let mut fields = Vec::new();
    let (plain, error) = match line.split_once(" error=") {
        Some((a, b)) => (a.to_string(), Some(b.to_string())),
        None => (line, None),
    };
    for kv in plain.split_whitespace() {
        if let Some((k, v)) = kv.split_once('=') {
            fields.push((k.to_string(), v.to_string()));
        }
    }
    if let Some(e) = error {
        fields.push(("error".to_string(), e));
    }
    if !output.status.success() {
        fields.push((
            "error".to_string(),
            format!(
                "the process failed ({}): {}",
                output.status,
                String::from_utf8_lossy(&output.stderr)
                    .lines()
                    .last()
                    .unwrap_or("")
            ),
        ));
    }
    Row {
        case: case.name.clone(),
        family: case.family,
        fields,
    }
}

fn ms(seconds: f64) -> String {
    if seconds >= 10.0 {
        format!("{seconds:.1} s")
    } else if seconds >= 1.0 {
        format!("{seconds:.2} s")
    } else if seconds >= 0.1 {
        format!("{:.0} ms", seconds * 1e3)
    } else if seconds >= 0.01 {
        format!("{:.1} ms", seconds * 1e3)
    } else if seconds >= 0.001 {
        format!("{:.2} ms", seconds * 1e3)
    } else {
        format!("{:.0} µs", seconds * 1e6)
    }
}

const HEADER: &str = "| machine | method | nodes | steps | instructions | chunk refs | route refs | \
    compile + verify | lower | verify | write RON | ratio | plain pass | peak RSS | RSS/instr | RON | compact | load |\n\
    |---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|";

fn print_row(row: &Row) {
    if let Some(e) = row.get("error") {
        println!(
            "| {} | {} | —{} | {} |",
            row.case,
            row.get("method").unwrap_or("?"),
            " | —".repeat(14),
            row.get("load").unwrap_or("?"),
        );
        println!(
            "|   | refused after {}: {e} |{}",
            ms(row.num("seconds")),
            " |".repeat(16)
        );
        return;
    }
    let instrs = row.num("instructions");
    let total = row.num("total");
    let ron = row.num("ron");
    let peak = peak_bytes(row);
    println!(
        "| {} | {} | {} | {} | {:.0} | {:.0} | {:.0} | {} | {} | {} | {} | {:.2} | {} | {:.0} MiB | {:.0} B | {:.1} MiB | {:.2} MiB{} | {} |",
        row.case,
        row.get("method").unwrap_or("?"),
        row.get("nodes").unwrap_or("?"),
        row.get("steps").unwrap_or("?"),
        instrs,
        row.num("chunk_refs"),
        row.num("via_refs"),
        ms(total),
        ms(row.num("lower")),
        ms(row.num("verify")),
        ms(ron),
        total / ron,
        ms(row.num("pass")),
        peak / 1048576.0,
        peak / instrs,
        row.num("ron_bytes") / 1048576.0,
        row.num("compact_bytes") / 1048576.0,
        if row.get("compact_same") == Some("true") {
            ""
        } else {
            " (does not read back!)"
        },
        row.get("load").unwrap_or("?"),
    );
}

/// The case's peak resident set above the process's own before compiling, in bytes.
fn peak_bytes(row: &Row) -> f64 {
    (row.num("peak_kb") - row.num("before_kb")) * 1024.0
}

/// Least-squares slope of `ln y` against `ln x`.
fn slope(points: &[(f64, f64)]) -> f64 {
    let n = points.len() as f64;
    let (lx, ly): (Vec<f64>, Vec<f64>) = points.iter().map(|(x, y)| (x.ln(), y.ln())).unzip();
    let mx = lx.iter().sum::<f64>() / n;
    let my = ly.iter().sum::<f64>() / n;
    let cov: f64 = lx.iter().zip(&ly).map(|(x, y)| (x - mx) * (y - my)).sum();
    let var: f64 = lx.iter().map(|x| (x - mx) * (x - mx)).sum();
    cov / var
}

/// Instructions, chunk ids and route links: the words of the schedule.
fn words(row: &Row) -> f64 {
    row.num("instructions") + row.num("chunk_refs") + row.num("via_refs")
}

fn growth(rows: &[Row]) {
    println!();
    println!("Growth, over the cases of a family and method with at least 50 000 instructions:");
    println!("range of time and peak RSS per instruction, and log-log slopes against the");
    println!("instruction count (1 = linear) and against the schedule's words (instructions +");
    println!("chunk ids + route links).");
    println!();
    println!("| family | method | cases | ns/instr: compile + verify | RON | B/instr: peak RSS | words/instr | slope vs instr: compile + verify | lower | verify | RON | RSS | slope vs words: compile + verify | RON |");
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let mut groups: Vec<(&str, &str)> = Vec::new();
    for r in rows {
        if r.get("error").is_none() {
            let key = (r.family, r.get("method").unwrap_or("?"));
            if !groups.contains(&key) {
                groups.push(key);
            }
        }
    }
    for (family, method) in groups {
        let big: Vec<&Row> = rows
            .iter()
            .filter(|r| {
                r.family == family
                    && r.get("error").is_none()
                    && r.get("method") == Some(method)
                    && r.num("instructions") >= 50_000.0
            })
            .collect();
        if big.len() < 2 {
            continue;
        }
        let per = |f: &dyn Fn(&Row) -> f64| -> String {
            let v: Vec<f64> = big.iter().map(|r| f(r) / r.num("instructions")).collect();
            let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = v.iter().copied().fold(0.0, f64::max);
            format!("{lo:.0}–{hi:.0}")
        };
        let fit = |x: &dyn Fn(&Row) -> f64, y: &dyn Fn(&Row) -> f64| -> f64 {
            let pts: Vec<(f64, f64)> = big.iter().map(|r| (x(r), y(r))).collect();
            slope(&pts)
        };
        let instrs = |r: &Row| r.num("instructions");
        let total = |r: &Row| r.num("total");
        let ron = |r: &Row| r.num("ron");
        println!(
            "| {family} | {method} | {} | {} | {} | {} | {} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} |",
            big.len(),
            per(&|r| total(r) * 1e9),
            per(&|r| ron(r) * 1e9),
            per(&peak_bytes),
            per(&words),
            fit(&instrs, &total),
            fit(&instrs, &|r| r.num("lower")),
            fit(&instrs, &|r| r.num("verify")),
            fit(&instrs, &ron),
            fit(&instrs, &peak_bytes),
            fit(&words, &total),
            fit(&words, &ron),
        );
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let all = cases();
    if let Some(i) = args.iter().position(|a| a == "--case") {
        let name = args.get(i + 1).expect("case name");
        let method = args.get(i + 2).map_or("auto", String::as_str);
        let case = all.iter().find(|c| &c.name == name).expect("known case");
        run_case(case, method);
        return;
    }
    if !args.iter().any(|a| a == "--bench") {
        // Smoke run (`cargo test --benches`): the smallest case of each family, in process.
        for name in ["ladder-4", "torus-4x4", "tree-16", "lopsided-100"] {
            let case = all.iter().find(|c| c.name == name).expect("known case");
            let compiled = topoc::compile_source(&case.source, &options("auto")).expect("compiles");
            println!(
                "{name}: {} instructions",
                instructions(compiled.schedule.schedule())
            );
        }
        return;
    }
    let filter: Vec<&String> = args.iter().filter(|a| !a.starts_with("--")).collect();
    println!(
        "machine: {} cores, {} MiB memory; load average at start {}",
        std::thread::available_parallelism().map_or(0, usize::from),
        status_mem_mib(),
        load_average()
    );
    println!();
    println!("{HEADER}");
    let mut rows = Vec::new();
    for case in all
        .iter()
        .filter(|c| filter.is_empty() || filter.iter().any(|f| c.name.contains(f.as_str())))
    {
        let auto = spawn(case, "auto");
        print_row(&auto);
        let differs = auto.get("method") != Some(case.natural);
        rows.push(auto);
        if differs {
            let natural = spawn(case, case.natural);
            print_row(&natural);
            rows.push(natural);
        }
    }
    growth(&rows);
}

/// Total memory of the machine (`MemTotal` of `/proc/meminfo`), in MiB.
fn status_mem_mib() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        })
        .map_or(0, |kb| kb / 1024)
}
