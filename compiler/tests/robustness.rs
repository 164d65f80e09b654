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
