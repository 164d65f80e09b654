//! No input makes the compiler panic: every prefix of every example and bad file, and a list
//! of odd machines, is either compiled or refused with problems that render.
#![allow(clippy::panic, clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use topoc::{diag, Error, Options};

fn files() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in [root.join("../examples"), root.join("tests/bad")] {
        for entry in std::fs::read_dir(&dir).expect("readable dir") {
            let path = entry.expect("entry").path();
            if path.extension().is_some_and(|e| e == "ron") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// Compiles `text`; a refusal must carry problems that render with a location.
fn handled(text: &str) -> bool {
    match topoc::compile_source(text, &Options::default()) {
        Ok(_) => true,
        Err(Error::Topology(problems)) => {
            assert!(!problems.is_empty());
            let rendered = diag::render("case.ron", text, &problems, false);
            assert!(rendered.contains("case.ron"), "{rendered}");
            false
        }
        Err(other) => panic!("not a topology problem: {other}\n{text}"),
    }
}

#[test]
fn every_prefix_of_every_file_is_handled() {
    for path in files() {
        let text = std::fs::read_to_string(&path).expect("readable");
        let step = (text.len() / 150).max(1);
        for cut in (0..text.len()).step_by(step) {
            if text.is_char_boundary(cut) {
                handled(&text[..cut]);
            }
        }
    }
}

#[test]
fn odd_machines_are_refused_not_panicked_on() {
    let cases = [
        "Hypercube(dims: 0)",
        "Torus(dims: [])",
        "Torus(dims: [4294967295, 4294967295])",
        "Torus(dims: [2])",
        "FullMesh(nodes: 4294967295)",
        "Fabric(hosts: 1, ranks_per_host: 1)",
        "Fabric(hosts: 4294967295, ranks_per_host: 4294967295)",
        "Fabric(hosts: 2, ranks_per_host: 2, leaf_switches: 0)",
        "Tree(root: Processor(name: \"only\"))",
        "Tree(root: Switch(name: \"\", children: [Processor(name: \"a\"), Processor(name: \"a\")]))",
        "Graph(nodes: [], switches: [\"s\"], links: [])",
        "Graph(nodes: [\"a\", \"b\"], switches: [\"s\"], links: [(id: \"l\", between: (\"a\", \"s\"))])",
        "Cube(link: (bandwidth_gbps: NaN))",
        "Cube(failed_nodes: [\"a\", \"b\", \"c\", \"d\", \"e\", \"f\", \"g\"])",
        "Cube(failed_links: [\"ab\", \"ad\", \"ae\"])",
        "Ring(nodes: 3, link_overrides: [(links: [])])",
        "Ladder(pairs: 2, failed_nodes: [\"N0\", \"N1\", \"N2\", \"N3\"])",
    ];
    for machine in cases {
        let text = format!("Topology(name: \"odd\", machine: {machine})");
        let compiled = handled(&text);
        // `Torus(dims: [2])` is two nodes and one link: it compiles.
        assert_eq!(compiled, machine == "Torus(dims: [2])", "{machine}");
    }
}

fn topoc(dir: &Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_topoc"))
        .args(args)
        .current_dir(dir)
        .output()
        .expect("topoc runs")
}

/// The control characters of `text` other than line breaks and tabs.
fn raw_controls(text: &[u8]) -> Vec<char> {
    String::from_utf8_lossy(text)
        .chars()
        .filter(|c| c.is_control() && *c != '\n' && *c != '\t')
        .collect()
}

/// A machine whose names hold a line break followed by DOT statements, ESC sequences that
/// clear the screen and retitle the terminal, BEL and NUL.
const HOSTILE: &str = r#"Topology(
    name: "evil\n}\ndigraph x { a -> b }\n// \u{1b}]0;pwned\u{7}\u{0}",
    machine: Graph(
        nodes: ["a\u{1b}[2J", "b\u{0}", "c"],
        links: [
            (id: "l\n1", between: ("a\u{1b}[2J", "b\u{0}")),
            (id: "l2", between: ("b\u{0}", "c")),
            (id: "l3", between: ("c", "a\u{1b}[2J")),
        ],
    ),
    phases: [
        Exchange(name: "g\u{1b}[2J\u{7}", collective: AllReduce, op: Sum, dtype: F32, elements: 64),
    ],
)"#;

#[test]
fn control_characters_in_names_are_shown_as_text_in_every_picture_and_report() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("evil.ron"), HOSTILE).unwrap();

    let dot = topoc(dir.path(), &["draw", "evil.ron", "--format", "dot"]);
    assert!(
        dot.status.success(),
        "{}",
        String::from_utf8_lossy(&dot.stderr)
    );
    assert_eq!(raw_controls(&dot.stdout), Vec::<char>::new());
    let text = String::from_utf8(dot.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    // The header comment stays one line: the name cannot end it and inject statements.
    assert!(
        lines[0].starts_with(
            "// topoc draw: evil\\x0a}\\x0adigraph x { a -> b }\\x0a// \\x1b]0;pwned\\x07\\x00 — "
        ),
        "{}",
        lines[0]
    );
    assert!(lines[1].starts_with("// Positions"), "{}", lines[1]);
    // The only statement-level `digraph` is topoc's own.
    assert_eq!(
        lines
            .iter()
            .filter(|l| l.trim_start().starts_with("digraph"))
            .count(),
        1,
        "{text}"
    );
    // In DOT strings the escape's backslash is itself escaped, so Graphviz shows `\x1b`; a
    // line break in a name is shown the same way, not as a Graphviz line break.
    assert!(text.contains(r#"label="a\\x1b[2J""#), "{text}");
    assert!(text.contains(r#"label="l\\x0a1""#), "{text}");

    for (format, args) in [
        ("check", vec!["check", "evil.ron"]),
        ("verify", vec!["verify", "evil.ron"]),
        ("run", vec!["run", "evil.ron", "--elements", "1000"]),
        ("svg", vec!["draw", "evil.ron", "--format", "svg"]),
        (
            "svg file",
            vec!["draw", "evil.ron", "-o", "evil\u{1b}[2J.svg"],
        ),
        (
            "ron file",
            vec!["compile", "evil.ron", "-o", "evil\u{7}.sched.ron"],
        ),
        ("json", vec!["compile", "evil.ron", "--emit", "json"]),
        ("ron", vec!["compile", "evil.ron"]),
    ] {
        let out = topoc(dir.path(), &args);
        assert!(
            out.status.success(),
            "{format}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(raw_controls(&out.stdout), Vec::<char>::new(), "{format}");
        assert_eq!(raw_controls(&out.stderr), Vec::<char>::new(), "{format}");
    }
    let svg = String::from_utf8(topoc(dir.path(), &["draw", "evil.ron", "--format", "svg"]).stdout)
        .unwrap();
    assert!(svg.contains("a\\x1b[2J"), "{svg}");
}

/// A machine whose names hold line breaks and tabs, beside ESC, quotes and XML's special
/// characters; the broadcast's root is the node whose name has a line break, so every report
/// of the broadcast names it.
const LINE_BREAKS: &str = r#"Topology(
    name: "m\nall good",
    machine: Graph(
        nodes: ["a\n1", "b\t2", "c\u{1b}3", "d\"<&>'4"],
        links: [
            (id: "l\n0", between: ("a\n1", "b\t2")),
            (id: "l1", between: ("b\t2", "c\u{1b}3")),
            (id: "l2", between: ("c\u{1b}3", "d\"<&>'4")),
            (id: "l3", between: ("d\"<&>'4", "a\n1")),
        ],
        link: (bandwidth_gbps: 100.0, latency_us: 1.0),
    ),
    phases: [
        Exchange(name: "g\tall good", collective: AllReduce, op: Sum, dtype: F32, elements: 96),
        Exchange(name: "w", collective: Broadcast(root: "a\n1"), dtype: F32, elements: 96),
    ],
)"#;

/// The names of [`LINE_BREAKS`] as every output shows them.
const SHOWN_NODES: [&str; 4] = ["a\\x0a1", "b\\x092", "c\\x1b3", "d\"<&>'4"];

/// Every line of `text` starts with one of `heads`: no name began a line of its own.
fn lines_start_with(text: &str, heads: &[&str]) {
    for line in text.lines() {
        assert!(
            heads.iter().any(|h| line.starts_with(h)),
            "a line not written by topoc: {line:?} in\n{text}"
        );
    }
}

#[test]
fn line_breaks_and_tabs_in_names_forge_no_line_of_a_report_or_an_error() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("nl.ron"), LINE_BREAKS).unwrap();
    let compiled = topoc(dir.path(), &["compile", "nl.ron", "-o", "nl.s.ron"]);
    assert!(
        compiled.status.success(),
        "{}",
        String::from_utf8_lossy(&compiled.stderr)
    );

    let verify = topoc(dir.path(), &["verify", "nl.s.ron"]);
    assert!(verify.status.success());
    let report = String::from_utf8(verify.stdout).unwrap();
    assert!(!report.contains('\t'), "{report}");
    lines_start_with(
        &report,
        &["machine `", "phase `", "  ", "nl.s.ron: verified"],
    );
    assert!(
        report.contains("machine `m\\x0aall good`: 4 compute nodes"),
        "{report}"
    );
    assert!(
        report.contains("phase `g\\x09all good`: allreduce"),
        "{report}"
    );
    assert!(
        report.contains("phase `w`: broadcast from a\\x0a1, "),
        "{report}"
    );

    let run = topoc(dir.path(), &["run", "nl.s.ron", "--elements", "96"]);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let ran = String::from_utf8(run.stdout).unwrap();
    assert!(!ran.contains('\t'), "{ran}");
    lines_start_with(
        &ran,
        &["nl.s.ron: schedule verified", "phase `", "  ", "ok"],
    );
    assert!(ran.contains("machine `m\\x0aall good`"), "{ran}");
    assert!(ran.contains("phase `w`: broadcast from a\\x0a1 ("), "{ran}");

    // A schedule the verifier refuses: its one error is one line, whose node's name would
    // otherwise forge `all good: schedule verified` on a line of its own.
    let bad = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../schedule-ir/tests/bad/names-with-line-breaks-and-tabs.ron");
    for command in ["verify", "run"] {
        let out = topoc(dir.path(), &[command, bad.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(1), "{command}");
        let errors = String::from_utf8(out.stderr).unwrap();
        assert!(!errors.contains('\t'), "{command}: {errors}");
        lines_start_with(&errors, &["error: "]);
        assert_eq!(errors.lines().count(), 2, "{command}: {errors}");
        assert!(
            errors.contains("N2 sends chunks [2] to N0\\x0aall good: schedule verified\\x09<-tab arriving over L\\x0902"),
            "{command}: {errors}"
        );
    }
}

#[test]
fn line_breaks_and_tabs_in_names_are_text_in_pictures_and_read_back_from_svg() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("nl.ron"), LINE_BREAKS).unwrap();

    let dot = topoc(
        dir.path(),
        &["draw", "nl.ron", "--phase", "w", "--format", "dot"],
    );
    assert!(dot.status.success());
    let dot = String::from_utf8(dot.stdout).unwrap();
    assert!(!dot.contains('\t'), "{dot}");
    // Every statement is on a line of its own: a name ends no string and no line.
    lines_start_with(&dot, &["//", "digraph ", "  ", "}", ""]);
    for (i, shown) in SHOWN_NODES.iter().enumerate() {
        let quoted = shown.replace('\\', "\\\\").replace('"', "\\\"");
        assert!(
            dot.contains(&format!("  n{i} [label=\"{quoted}\", ")),
            "{dot}"
        );
    }
    assert!(dot.contains(r#"label="l\\x0a0""#), "{dot}");
    // The title's one Graphviz line break is topoc's, between the title and its subtitle.
    assert!(
        dot.contains(r#"label="m\\x0aall good\nphase `w`: broadcast from a\\x0a1 by "#),
        "{dot}"
    );

    let svg = topoc(
        dir.path(),
        &["draw", "nl.ron", "--phase", "w", "--format", "svg"],
    );
    assert!(svg.status.success());
    let svg = String::from_utf8(svg.stdout).unwrap();
    assert!(!svg.contains('\t'), "{svg}");
    let doc = roxmltree::Document::parse(&svg).expect("well-formed SVG");
    // `data-node` reads back as the name the picture shows, the same text `check` prints.
    let attributes: Vec<&str> = doc
        .descendants()
        .filter_map(|n| n.attribute("data-node"))
        .collect();
    assert_eq!(attributes, SHOWN_NODES);
    let texts: Vec<&str> = doc
        .descendants()
        .filter(|n| n.has_tag_name("text"))
        .filter_map(|n| n.text())
        .collect();
    for shown in SHOWN_NODES {
        assert!(texts.contains(&shown), "{shown:?} not among {texts:?}");
    }
    assert!(
        texts.contains(&"m\\x0aall good"),
        "title not among {texts:?}"
    );
    assert!(
        texts
            .iter()
            .any(|t| t.starts_with("phase `w`: broadcast from a\\x0a1 by ")),
        "subtitle not among {texts:?}"
    );
    let check = topoc(dir.path(), &["check", "nl.ron"]);
    let check = String::from_utf8(check.stdout).unwrap();
    assert!(check.contains("a\\x0a1 -l\\x0a0-> b\\x092"), "{check}");
}
#[test]
fn thousands_of_problems_on_one_long_line_give_a_bounded_report() {
    // One line of about 154 KB with 4,000 unknown node names: once 920 MB of diagnostics,
    // each repeating the whole line.
    let links: Vec<String> = (0..4000)
        .map(|i| format!("(id: \"l{i}\", between: (\"x{i}\", \"a\"))"))
        .collect();
    let text = format!(
        "Topology(name: \"long\", machine: Graph(nodes: [\"a\", \"b\"], links: [{}]))",
        links.join(", ")
    );
    assert!(text.len() > 150_000 && !text.contains('\n'));
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("long.ron"), &text).unwrap();
    let out = topoc(dir.path(), &["check", "long.ron"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(
        stderr.len() < 20_000,
        "{} bytes of diagnostics",
        stderr.len()
    );
    assert_eq!(
        stderr.matches("names an unknown node").count(),
        diag::MAX_SHOWN
    );
    assert!(stderr.contains("note: 3980 more problem(s) not shown; the first 20 are above"));
    assert!(stderr.contains("long.ron has 4000 problem(s); nothing was written"));
    // Lines are cut to a window, and the location is still the original column.
    assert!(stderr.lines().all(|l| l.chars().count() < 300), "{stderr}");
    let column = text.find("(\"x0\"").unwrap() + 2;
    assert!(
        stderr.contains(&format!("long.ron:1:{column}\n")),
        "{stderr}"
    );
    assert!(stderr.contains("…hine: Graph(nodes: [\"a\", \"b\"], links: [(id: \"l0\", between: (\"x0\", \"a\")), (id: \"l1\""));
}

#[test]
fn a_cut_line_keeps_its_caret_under_the_named_value() {
    let pad = "x".repeat(500);
    let text = format!(
        "// {pad}\nTopology(name: \"t\", /* {pad} */ machine: Graph(nodes: [\"a\", \"b\"], links: [(id: \"l\", between: (\"a\", \"zz\"))]) /* {pad} */)"
    );
    let problems = match topoc::compile_source(&text, &Options::default()) {
        Err(Error::Topology(problems)) => problems,
        other => panic!("refused, not {:?}", other.map(|_| ())),
    };
    let rendered = diag::render("cut.ron", &text, &problems, false);
    let source_line = rendered.lines().find(|l| l.starts_with("2 │ …")).unwrap();
    let caret_line = rendered.lines().find(|l| l.contains("^^^^")).unwrap();
    let caret = caret_line.chars().position(|c| c == '^').unwrap();
    let named: String = source_line.chars().skip(caret).take(4).collect();
    assert_eq!(named, "\"zz\"", "{rendered}");
    assert!(source_line.ends_with('…'), "{rendered}");
    let column = text.lines().nth(1).unwrap().find("\"zz\"").unwrap() + 1;
    assert!(
        rendered.contains(&format!("cut.ron:2:{column}\n")),
        "{rendered}"
    );
}

#[test]
fn control_characters_in_a_file_reach_no_terminal_raw() {
    // Raw ESC, BEL and NUL bytes inside the file's strings, and escaped ones in a name.
    let text =
        "Topology(name: \"e\u{1b}]0;t\u{7}\", machine: Graph(nodes: [\"a\u{1b}[2J\", \"b\"], \
                links: [(id: \"l\", between: (\"a\u{1b}[2J\", \"c\u{0}\"))]))";
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("raw.ron"), text).unwrap();
    std::fs::write(
        dir.path().join("named.ron"),
        HOSTILE.replace("\"c\"))", "\"d\"))"),
    )
    .unwrap();
    for (file, expected) in [("raw.ron", "`c\\x00`"), ("named.ron", "`d`")] {
        let out = topoc(dir.path(), &["check", file]);
        assert_eq!(out.status.code(), Some(1), "{file}");
        assert_eq!(raw_controls(&out.stderr), Vec::<char>::new(), "{file}");
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert!(
            stderr.contains(&format!("names an unknown node {expected}")),
            "{stderr}"
        );
    }
    // Errors printed by the command line itself quote paths raw no more either.
    let missing = topoc(dir.path(), &["check", "gone\u{1b}[2J\u{7}.ron"]);
    assert_eq!(raw_controls(&missing.stderr), Vec::<char>::new());
    assert!(String::from_utf8_lossy(&missing.stderr).contains("gone\\x1b[2J\\x07.ron"));
    let rendered = String::from_utf8(topoc(dir.path(), &["check", "raw.ron"]).stderr).unwrap();
    assert!(
        rendered.contains("(\"a\\x1b[2J\", \"c\\x00\")"),
        "{rendered}"
    );
}

#[test]
fn files_starting_with_a_byte_order_mark_read_fine() {
    // A topology file: it compiles, and its problems point where they do without the mark.
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let ring = std::fs::read_to_string(root.join("../examples/ring8.ron")).unwrap();
    assert!(topoc::compile_source(&format!("\u{feff}{ring}"), &Options::default()).is_ok());
    let bad = std::fs::read_to_string(root.join("tests/bad/unknown-node.ron")).unwrap();
    let render = |text: &str| match topoc::compile_source(text, &Options::default()) {
        Err(Error::Topology(problems)) => diag::render("bad.ron", text, &problems, false),
        other => panic!("refused, not {:?}", other.map(|_| ())),
    };
    assert_eq!(render(&format!("\u{feff}{bad}")), render(&bad));

    // Through the command line, which tells topologies from schedules by their first word:
    // a topology and a JSON schedule, each with a mark.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("ring.ron"), format!("\u{feff}{ring}")).unwrap();
    let json = topoc(dir.path(), &["compile", "ring.ron", "--emit", "json"]);
    assert!(
        json.status.success(),
        "{}",
        String::from_utf8_lossy(&json.stderr)
    );
    let mut marked = "\u{feff}".as_bytes().to_vec();
    marked.extend(json.stdout);
    std::fs::write(dir.path().join("ring.json"), marked).unwrap();
    for file in ["ring.ron", "ring.json"] {
        let out = topoc(dir.path(), &["verify", file]);
        assert!(
            out.status.success(),
            "{file}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn labels_far_apart_on_one_long_line_keep_the_primary_in_view() {
    // A duplicate link id 3,000 bytes after its first declaration, on the same line.
    let links: Vec<String> = (0..100)
        .map(|i| format!("(id: \"l{i}\", between: (\"a\", \"b\"))"))
        .collect();
    let text = format!(
        "Topology(name: \"far\", machine: Graph(nodes: [\"a\", \"b\"], links: [{}, (id: \"l0\", between: (\"b\", \"a\"))]))",
        links.join(", ")
    );
    let problems = match topoc::compile_source(&text, &Options::default()) {
        Err(Error::Topology(problems)) => problems,
        other => panic!("refused, not {:?}", other.map(|_| ())),
    };
    let rendered = diag::render("far.ron", &text, &problems, false);
    let source_line = rendered.lines().find(|l| l.starts_with("1 │ …")).unwrap();
    let caret_line = rendered.lines().find(|l| l.contains('^')).unwrap();
    let caret = caret_line.chars().position(|c| c == '^').unwrap();
    let named: String = source_line.chars().skip(caret).take(4).collect();
    assert_eq!(named, "\"l0\"", "{rendered}");
    assert!(caret_line.contains("declared again here"), "{rendered}");
    let column = text.rfind("\"l0\"").unwrap() + 1;
    assert!(
        rendered.contains(&format!("far.ron:1:{column}\n")),
        "{rendered}"
    );
    assert!(
        rendered.lines().all(|l| l.chars().count() < 300),
        "{rendered}"
    );
}
