//! `topoc simulate` as nccl-tests users read it: `-b/-e/-f` sweeps, algorithm and bus bandwidth
//! with nccl-tests' factors for every collective, and `--plot`'s SVG (well-formed, one line per
//! method in each panel, the bound drawn, `auto`'s picks marked, names escaped, the same bytes
//! every run).
#![allow(clippy::panic, clippy::unwrap_used)]

use serde_json::Value;
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

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The JSON table of a successful run.
fn table(args: &[&str]) -> Value {
    let mut all = vec!["simulate"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--format", "json"]);
    let out = topoc(&all);
    assert!(out.status.success(), "{}", stderr(&out));
    serde_json::from_slice(&out.stdout).expect("JSON")
}

fn rows(json: &Value) -> &Vec<Value> {
    json["rows"].as_array().expect("rows")
}

/// The distinct sizes of a table, in order.
fn sizes(json: &Value) -> Vec<u64> {
    let mut out: Vec<u64> = rows(json)
        .iter()
        .map(|r| r["bytes"].as_u64().expect("bytes"))
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// A machine with one phase of every collective, and a phase name that needs escaping in XML.
const EVERY_COLLECTIVE: &str = r#"Topology(
    name: "mesh-6",
    machine: FullMesh(nodes: 6, link: (bandwidth_gbps: 50.0, latency_us: 2.0)),
    phases: [
        Exchange(name: "a<&\">r", collective: AllReduce, op: Sum, dtype: F32, elements: 1024),
        Exchange(name: "rs", collective: ReduceScatter, op: Sum, dtype: F32, elements: 1024),
        Exchange(name: "ag", collective: AllGather, dtype: F32, elements: 1024),
        Exchange(name: "bc", collective: Broadcast(root: "N0"), dtype: F32, elements: 1024),
        Exchange(name: "rd", collective: Reduce(root: "N1"), op: Sum, dtype: F32, elements: 1024),
    ],
)
"#;

fn every_collective(dir: &tempfile::TempDir) -> String {
    let path = dir.path().join("every.ron");
    std::fs::write(&path, EVERY_COLLECTIVE).expect("write");
    path.display().to_string()
}

#[test]
fn sweeps_are_the_smallest_size_times_powers_of_the_factor() {
    let json = table(&[
        "examples/ladder8.ron",
        "-b",
        "1KiB",
        "-e",
        "1MiB",
        "-f",
        "4",
    ]);
    assert_eq!(
        sizes(&json),
        [1024, 4096, 16384, 65536, 262144, 1048576],
        "1 KiB to 1 MiB by 4"
    );
    // The largest size is a ceiling, not a size that must appear; -f defaults to 2.
    let json = table(&[
        "examples/ladder8.ron",
        "-b",
        "1000",
        "-e",
        "10000",
        "-f",
        "3",
    ]);
    assert_eq!(sizes(&json), [1000, 3000, 9000]);
    let json = table(&[
        "examples/ladder8.ron",
        "--minbytes",
        "4KiB",
        "--maxbytes",
        "20KiB",
    ]);
    assert_eq!(sizes(&json), [4096, 8192, 16384]);
}

#[test]
fn bad_sweeps_name_the_flag() {
    // Usage errors (status 2: a missing, clashing or unparsable value) come from the argument
    // parser, values that parse but cannot be used (status 1) from topoc.
    for (args, code, expected) in [
        (
            &["-b", "1KiB"][..],
            2,
            "the following required arguments were not provided",
        ),
        (
            &["-b", "1KiB", "-e", "1MiB", "--sizes", "1KiB"][..],
            2,
            "cannot be used with",
        ),
        (
            &["-b", "1MiB", "-e", "1KiB"][..],
            1,
            "-e/--maxbytes (1024 B) is smaller",
        ),
        (
            &["-b", "1KiB", "-e", "1MiB", "-f", "1"][..],
            1,
            "-f/--stepfactor must be 2 or more",
        ),
        (
            &["-b", "0", "-e", "1MiB"][..],
            1,
            "-b/--minbytes must be at least 1 byte",
        ),
        (
            &["-b", "1 parsec", "-e", "1MiB"][..],
            2,
            "invalid value '1 parsec' for '--minbytes <MINBYTES>': unknown unit `parsec`",
        ),
    ] {
        let mut all = vec!["simulate", "examples/ladder8.ron"];
        all.extend_from_slice(args);
        let out = topoc(&all);
        assert_eq!(out.status.code(), Some(code), "{args:?}: {}", stderr(&out));
        assert!(
            stderr(&out).contains(expected),
            "{args:?}: {}",
            stderr(&out)
        );
    }
}

/// busbw = algbw × 2(n−1)/n for allreduce, (n−1)/n for reduce-scatter and allgather, 1 for
/// broadcast and reduce; algbw = size / time in GB/s.
#[test]
fn bus_bandwidth_is_algorithm_bandwidth_times_the_collective_factor() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = every_collective(&dir);
    let json = table(&[&file, "-b", "1KiB", "-e", "1MiB", "-f", "32"]);
    let n = 6.0;
    let mut seen = Vec::new();
    for row in rows(&json) {
        let collective = row["collective"].as_str().expect("collective");
        let factor = match collective {
            "allreduce" => 2.0 * (n - 1.0) / n,
            "reduce-scatter" | "allgather" => (n - 1.0) / n,
            "broadcast" | "reduce" => 1.0,
            other => panic!("unexpected collective {other}"),
        };
        let bytes = row["bytes"].as_f64().expect("bytes");
        let seconds = row["estimate"]["seconds"].as_f64().expect("seconds");
        let algbw = row["algbw_gbps"].as_f64().expect("algbw");
        let busbw = row["busbw_gbps"].as_f64().expect("busbw");
        assert_eq!(row["ranks"], 6, "{row}");
        assert_eq!(row["bus_factor"].as_f64(), Some(factor), "{row}");
        assert!(
            (algbw - bytes / seconds / 1e9).abs() <= 1e-9 * algbw,
            "{row}"
        );
        assert!(
            (busbw - algbw * factor).abs() <= 1e-12 * busbw.max(1.0),
            "{row}"
        );
        if !seen.contains(&collective) {
            seen.push(collective);
        }
    }
    seen.sort_unstable();
    assert_eq!(
        seen,
        [
            "allgather",
            "allreduce",
            "broadcast",
            "reduce",
            "reduce-scatter"
        ]
    );
}

/// The text table carries nccl-tests' columns and states each phase's factor.
#[test]
fn the_table_has_nccl_tests_columns() {
    let out = topoc(&[
        "simulate",
        "examples/ladder8.ron",
        "-b",
        "1KiB",
        "-e",
        "4KiB",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.starts_with("# phase grads: allreduce, n = 8 ranks, busbw = algbw × 1.7500\n"),
        "{text}"
    );
    let header = text.lines().nth(1).expect("header");
    let columns = [
        "size (B)",
        "count",
        "method",
        "time (µs)",
        "algbw (GB/s)",
        "busbw (GB/s)",
        "bound (µs)",
        "efficiency",
        "auto",
    ];
    let mut at = 0;
    for c in columns {
        let found = header[at..]
            .find(c)
            .unwrap_or_else(|| panic!("{c} in order: {header}"));
        at += found + c.len();
    }
    assert!(text.contains("grads  2048      512    ring"), "{text}");
}

/// The `<polyline>`s of a plot whose stroke has the given width, with their point counts.
fn polylines<'a>(doc: &'a roxmltree::Document<'a>, width: &str) -> Vec<roxmltree::Node<'a, 'a>> {
    doc.descendants()
        .filter(|n| n.has_tag_name("polyline") && n.attribute("stroke-width") == Some(width))
        .collect()
}

fn points(node: &roxmltree::Node<'_, '_>) -> usize {
    node.attribute("points")
        .unwrap_or("")
        .split_whitespace()
        .count()
}

#[test]
fn the_plot_draws_one_line_per_method_the_bound_and_autos_picks() {
    let dir = tempfile::tempdir().expect("tempdir");
    let svg = dir.path().join("ladder8.svg");
    let svg_arg = svg.display().to_string();
    let args = [
        "examples/ladder8.ron",
        "-b",
        "1KiB",
        "-e",
        "4MiB",
        "-f",
        "4",
        "--plot",
        &svg_arg,
    ];
    let json = table(&args);
    let text = std::fs::read_to_string(&svg).expect("the plot is written");
    let doc = roxmltree::Document::parse(&text).expect("well-formed SVG");
    assert_eq!(doc.root_element().tag_name().name(), "svg");

    let mut methods: Vec<&str> = rows(&json)
        .iter()
        .map(|r| r["algorithm"].as_str().expect("algorithm"))
        .collect();
    methods.sort_unstable();
    methods.dedup();
    let n_sizes = sizes(&json).len();
    assert_eq!(n_sizes, 7);
    // Each method is one line through every size in each of the two panels, and its name
    // appears once in each panel's legend.
    let lines: Vec<_> = polylines(&doc, "2")
        .into_iter()
        .filter(|l| points(l) == n_sizes)
        .collect();
    assert_eq!(lines.len(), 2 * methods.len(), "{methods:?}");
    let mut colours: Vec<&str> = lines.iter().filter_map(|l| l.attribute("stroke")).collect();
    colours.sort_unstable();
    colours.dedup();
    assert_eq!(colours.len(), methods.len(), "one colour per method");
    let texts: Vec<&str> = doc
        .descendants()
        .filter(|n| n.has_tag_name("text"))
        .filter_map(|n| n.text())
        .map(str::trim)
        .collect();
    for method in &methods {
        assert_eq!(texts.iter().filter(|t| *t == method).count(), 2, "{method}");
    }
    // The bound: dashed, so many short grey segments, and named in both legends.
    let bound = polylines(&doc, "1")
        .into_iter()
        .filter(|l| l.attribute("stroke") == Some("#505050"))
        .count();
    assert!(bound > 2 * n_sizes, "a dashed bound in each panel: {bound}");
    assert_eq!(texts.iter().filter(|t| **t == "bound").count(), 2);
    assert_eq!(texts.iter().filter(|t| **t == "auto's pick").count(), 2);
    // `auto`'s pick: one ring per size in each panel, and one in each legend.
    let rings = doc
        .descendants()
        .filter(|n| n.has_tag_name("circle"))
        .count();
    assert_eq!(rings, 2 * (n_sizes + 1));
    assert_eq!(
        rows(&json).iter().filter(|r| r["auto"] == true).count(),
        n_sizes
    );

    // The same input draws the same bytes.
    let again = dir.path().join("again.svg");
    let again_arg = again.display().to_string();
    let mut args = args;
    args[8] = &again_arg;
    table(&args);
    assert_eq!(std::fs::read(&again).expect("plot"), text.as_bytes());
}

#[test]
fn the_plot_escapes_phase_names_and_draws_every_phase() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = every_collective(&dir);
    let svg = dir.path().join("every.svg");
    let svg_arg = svg.display().to_string();
    table(&[&file, "-b", "1KiB", "-e", "64KiB", "--plot", &svg_arg]);
    let text = std::fs::read_to_string(&svg).expect("the plot is written");
    let doc = roxmltree::Document::parse(&text).expect("well-formed SVG");
    let captions: Vec<&str> = doc
        .descendants()
        .filter(|n| n.has_tag_name("text"))
        .filter_map(|n| n.text())
        .map(str::trim)
        .filter(|t| t.starts_with("phase "))
        .collect();
    // Two panels per phase, each captioned with the phase's name as written.
    assert_eq!(captions.len(), 10, "{captions:?}");
    assert!(
        captions.contains(&"phase a<&\">r: allreduce over 6 ranks"),
        "{captions:?}"
    );

    // Control characters, which XML 1.0 cannot carry, are shown as text, as everywhere.
    let hostile = dir.path().join("hostile.ron");
    std::fs::write(
        &hostile,
        EVERY_COLLECTIVE.replace(r#"name: "rs""#, r#"name: "r\u{1b}[2J\ns\t""#),
    )
    .expect("write");
    let svg_arg = dir.path().join("hostile.svg").display().to_string();
    table(&[
        &hostile.display().to_string(),
        "-b",
        "1KiB",
        "-e",
        "1KiB",
        "--plot",
        &svg_arg,
    ]);
    let text = std::fs::read_to_string(&svg_arg).expect("the plot is written");
    assert!(!text.contains(['\u{1b}', '\t']), "{text}");
    let doc = roxmltree::Document::parse(&text).expect("well-formed SVG");
    assert!(
        doc.descendants()
            .filter_map(|n| n.text())
            .any(|t| t.trim() == "phase r\\x1b[2J\\x0as\\x09: reduce-scatter over 6 ranks"),
        "{text}"
    );
}

#[test]
fn a_plot_that_cannot_be_written_leaves_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let svg = dir.path().join("missing-dir").join("p.svg");
    let out = topoc(&[
        "simulate",
        "examples/ladder8.ron",
        "--sizes",
        "1KiB",
        "--plot",
        &svg.display().to_string(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("cannot write"), "{}", stderr(&out));
    assert!(!svg.exists());
}

/// The README's path from an NCCL dump to a plot and an MSCCL file runs as written, and leaves
/// a well-formed plot and an MSCCL file.
#[test]
fn the_readme_path_from_a_dump_to_a_plot_runs() {
    let readme = std::fs::read_to_string(repo().join("README.md")).expect("README.md");
    let block = readme
        .split("## From an NCCL dump to a plot and an MSCCL file")
        .nth(1)
        .and_then(|s| s.split("```sh\n").nth(1))
        .and_then(|b| b.split("```").next())
        .expect("the README's section has a sh block");
    let dir = tempfile::tempdir().expect("tempdir");
    let examples = format!("{}/examples/", repo().display());
    let mut ran = 0;
    for line in block.lines().filter(|l| !l.trim().is_empty()) {
        let args: Vec<String> = line
            .split_whitespace()
            .skip(1)
            .map(|a| a.replace("examples/", &examples))
            .collect();
        let out = Command::new(env!("CARGO_BIN_EXE_topoc"))
            .args(&args)
            .current_dir(dir.path())
            .output()
            .expect("topoc runs");
        assert!(out.status.success(), "{line}: {}", stderr(&out));
        ran += 1;
    }
    assert_eq!(ran, 4, "import, compile, simulate with a plot, export");
    let svg = std::fs::read_to_string(dir.path().join("m.svg")).expect("the plot");
    roxmltree::Document::parse(&svg).expect("well-formed SVG");
    let xml = std::fs::read_to_string(dir.path().join("m.xml")).expect("the MSCCL file");
    roxmltree::Document::parse(&xml).expect("well-formed MSCCL XML");
}

/// A schedule's table holds its own method only: the plot draws its line and the bound, and no
/// pick of `auto`, which chose nothing.
#[test]
fn a_schedules_plot_has_its_own_line_and_no_picks() {
    let dir = tempfile::tempdir().expect("tempdir");
    let schedule = dir.path().join("ring8.sched.ron");
    let schedule_arg = schedule.display().to_string();
    let out = topoc(&["compile", "examples/ring8.ron", "-o", &schedule_arg]);
    assert!(out.status.success(), "{}", stderr(&out));
    let svg = dir.path().join("ring8.svg");
    let svg_arg = svg.display().to_string();
    let json = table(&[
        &schedule_arg,
        "-b",
        "1KiB",
        "-e",
        "64KiB",
        "--plot",
        &svg_arg,
    ]);
    assert!(rows(&json).iter().all(|r| r["algorithm"] == "ring"));
    let text = std::fs::read_to_string(&svg).expect("the plot is written");
    let doc = roxmltree::Document::parse(&text).expect("well-formed SVG");
    let lines = polylines(&doc, "2")
        .into_iter()
        .filter(|l| points(l) == 7)
        .count();
    assert_eq!(lines, 2, "one line in each panel");
    assert_eq!(
        doc.descendants()
            .filter(|n| n.has_tag_name("circle"))
            .count(),
        0
    );
    let legend: Vec<&str> = doc
        .descendants()
        .filter(|n| n.has_tag_name("text"))
        .filter_map(|n| n.text())
        .map(str::trim)
        .collect();
    assert!(
        legend.contains(&"ring") && legend.contains(&"bound"),
        "{legend:?}"
    );
    assert!(!legend.contains(&"auto's pick"), "{legend:?}");
}

/// `rotated-hd` too large to build in the explicit form (a torus of 16 384 nodes: every
/// method is over the limits there) is priced as the pattern `compile` writes, proved,
/// instead of leaving no table; on a ring small enough for the explicit form, `rotated-hd` is
/// `ring` by another name, which the explicit form keeps, and gets no row.
#[test]
fn rotated_hd_too_large_to_build_is_priced_as_its_pattern() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("t128.ron");
    std::fs::write(
        &file,
        r#"Topology(
    name: "t128",
    machine: Torus(dims: [128, 128], link: (bandwidth_gbps: 400.0, latency_us: 0.5)),
    phases: [
        Exchange(name: "grads", collective: AllReduce, op: Sum, dtype: F32, elements: 16777216),
    ],
)"#,
    )
    .unwrap();
    let big = table(&[file.to_str().unwrap(), "--sizes", "1MiB,64MiB"]);
    let priced = rows(&big);
    assert_eq!(priced.len(), 2, "{priced:?}");
    for r in priced {
        assert_eq!(r["algorithm"], "rotated-hd");
        assert_eq!(r["auto"], true);
        // 2 · 2 · (128 − 1) steps: reduce-scatter and allgather, both dimensions.
        assert_eq!(r["steps"], 508);
        let (estimate, bound) = (
            r["estimate"]["seconds"].as_f64().unwrap(),
            r["bound"]["seconds"].as_f64().unwrap(),
        );
        assert!(bound > 0.0 && estimate >= bound, "{r}");
    }
    let ring = table(&["examples/ring8.ron", "--sizes", "1KiB"]);
    assert!(
        !rows(&ring).iter().any(|r| r["algorithm"] == "rotated-hd"),
        "{ring}"
    );
}

/// `in-network`'s chunks are the devices' segments. Where it cannot be lowered for a size (here
/// 1 GiB in 64-byte segments is over the instruction limit), its schedule for the file's size is
/// not stretched to it, which would carry 16 MiB segments the devices cannot hold: no row at
/// that size, and the reason, naming the MTU. At the file's size it is priced as usual.
#[test]
fn in_network_is_not_stretched_past_the_mtu() {
    let dir = std::env::temp_dir().join(format!("topoc-mtu-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temporary directory");
    let file = dir.join("mtu.ron");
    std::fs::write(
        &file,
        r#"Topology(name: "f", machine: Fabric(hosts: 2, ranks_per_host: 2,
            nic: (reduce: true, segment_buffers: 8, mtu_bytes: 64),
            switch: (reduce: true, segment_buffers: 16, mtu_bytes: 64)),
          phases: [Exchange(name: "g", collective: AllReduce, op: Sum, dtype: F32, elements: 1024)])"#,
    )
    .expect("write the file");
    let json = table(&[file.to_str().expect("utf-8 path"), "--sizes", "4KiB,1GiB"]);
    let in_network: Vec<u64> = rows(&json)
        .iter()
        .filter(|r| r["algorithm"] == "in-network")
        .map(|r| r["bytes"].as_u64().expect("bytes"))
        .collect();
    assert_eq!(in_network, [4096]);
    let reason = json["skipped"]
        .as_array()
        .expect("skipped")
        .iter()
        .find(|s| s["algorithm"] == "in-network")
        .and_then(|s| s["reason"].as_str())
        .expect("a reason for in-network at 1 GiB")
        .to_string();
    assert!(
        reason.contains("at 1 GiB") && reason.contains("64-byte MTU"),
        "{reason}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_table_takes_names_longer_than_a_format_width() {
    // `format!`'s padding width stops at 65 535: a longer name used to panic the text table.
    let dir = tempfile::tempdir().expect("tempdir");
    let name = "p".repeat(70_000);
    let file = dir.path().join("long.ron");
    std::fs::write(
        &file,
        format!(
            r#"Topology(name: "r", machine: Ring(nodes: 3),
                phases: [Exchange(name: "{name}", collective: AllReduce, dtype: F32, elements: 12)])"#
        ),
    )
    .expect("written");
    let out = topoc(&["simulate", &file.display().to_string(), "--sizes", "1KiB"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.lines().any(|l| l.starts_with(&name)),
        "no row names the phase"
    );
}
