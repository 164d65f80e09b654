//! `topoc draw`: DOT pinned by snapshots under `snapshots/draw/`, SVG parsed as XML and checked
//! for what a reader must see (every link id, one colour per embedded ring), every example
//! drawn in every view, schedule files drawn like their topologies, and a machine with a
//! switch, routed sends and parallel links.
#![allow(clippy::panic, clippy::unwrap_used)]

use schedule_ir::serial::{self, Format};
use schedule_ir::{
    Buffer, BufferKind, Chunk, ChunkId, Collective, DType, Instr, Link, LinkId, Machine, Node,
    NodeId, NodeKind, Phase, Program, RecvMode, ReduceOp, Schedule, FORMAT_VERSION,
};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use topoc::draw::layout::{self, LayoutKind};
use topoc::draw::{dot, svg, DrawError, Request, Scene, ShapeHint};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

fn examples() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(repo().join("examples"))
        .expect("examples/ exists")
        .map(|e| e.expect("readable entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "ron"))
        .collect();
    files.sort();
    files
}

fn compiled(path: &Path) -> topoc::Compiled {
    compiled_as(path, None)
}

/// `path` compiled with `algorithm` (`auto` when `None`).
fn compiled_as(path: &Path, algorithm: Option<&str>) -> topoc::Compiled {
    let source = std::fs::read_to_string(path).expect("readable example");
    let options = topoc::Options {
        algorithm: algorithm.and_then(|a| a.parse().ok()),
        ..topoc::Options::default()
    };
    topoc::compile_source(&source, &options)
        .unwrap_or_else(|e| panic!("{} does not compile: {e:?}", path.display()))
}

/// `examples/ladder8.ron` under seed 004's method: its two barley-twist rings, walked around.
fn seed_ladder(example: &str) -> topoc::Compiled {
    compiled_as(&repo().join("examples").join(example), Some("ladder-rings"))
}

fn scene(example: &str, step: Option<u32>) -> Scene {
    let c = compiled(&repo().join("examples").join(example));
    Scene::from_compiled(&c, &Request { phase: None, step }).expect("scene")
}

fn ladder_scene(step: Option<u32>) -> Scene {
    let c = seed_ladder("ladder8.ron");
    Scene::from_compiled(&c, &Request { phase: None, step }).expect("scene")
}

fn render_dot(scene: &Scene) -> String {
    dot::render(scene, &layout::compute(scene, LayoutKind::Auto))
}

fn render_svg(scene: &Scene) -> String {
    svg::render(scene, &layout::compute(scene, LayoutKind::Auto))
}

fn snapshot(name: &str, text: &str) {
    insta::with_settings!({
        snapshot_path => "../../snapshots/draw",
        prepend_module_to_snapshot => false,
        omit_expression => true,
    }, {
        insta::assert_snapshot!(name, text);
    });
}

#[test]
fn dot_of_the_ring_is_pinned() {
    snapshot("ring8", &render_dot(&scene("ring8.ron", None)));
}

#[test]
fn dot_of_the_ladder_and_its_two_rings_is_pinned() {
    let text = render_dot(&ladder_scene(None));
    // Every link once, undirected, with its id; parallel rungs are separate edges.
    assert_eq!(text.matches("dir=none").count(), 16, "{text}");
    assert_eq!(text.matches("label=\"L011\"").count(), 1);
    assert_eq!(text.matches("label=\"L012\"").count(), 1);
    snapshot("ladder8", &text);
}

#[test]
fn dot_of_a_ladder_step_is_pinned() {
    let text = render_dot(&ladder_scene(Some(0)));
    // Seed 004: every one of the 32 link directions carries one chunk in step 0.
    let busy = text.lines().filter(|l| l.contains("label=\"c")).count();
    assert_eq!(busy, 32, "{text}");
    snapshot("ladder8-step0", &text);
}

/// The SVG parses as XML, names every link, and draws the two barley-twist rings in two
/// colours, eight edges each.
#[test]
fn svg_of_the_ladder_shows_both_rings_in_distinct_colours() {
    let text = render_svg(&ladder_scene(None));
    let doc = roxmltree::Document::parse(&text).expect("well-formed SVG");
    let root = doc.root_element();
    assert_eq!(root.tag_name().name(), "svg");
    assert_eq!(
        root.tag_name().namespace(),
        Some("http://www.w3.org/2000/svg")
    );

    let texts: BTreeSet<String> = doc
        .descendants()
        .filter(|n| n.has_tag_name("text"))
        .filter_map(|n| n.text().map(str::to_string))
        .collect();
    let c = seed_ladder("ladder8.ron");
    for link in &c.schedule.schedule().machine.links {
        assert!(texts.contains(&link.name), "link id {} is drawn", link.name);
    }

    let mut by_colour: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
    for n in doc
        .descendants()
        .filter(|n| n.attribute("class") == Some("ring-edge"))
    {
        by_colour
            .entry(n.attribute("stroke").expect("stroke").to_string())
            .or_default()
            .push((
                n.attribute("data-overlay").expect("overlay").to_string(),
                n.attribute("data-link").expect("link").to_string(),
            ));
    }
    assert_eq!(by_colour.len(), 2, "two ring colours: {by_colour:?}");
    for (colour, edges) in &by_colour {
        assert_eq!(edges.len(), 8, "{colour}: 8 ring edges");
        let rings: BTreeSet<&str> = edges.iter().map(|(r, _)| r.as_str()).collect();
        assert_eq!(rings.len(), 1, "{colour} is one ring's colour");
    }
    // The rings are link-disjoint and cover all 16 links between them.
    let links: BTreeSet<&str> = by_colour
        .values()
        .flatten()
        .map(|(_, l)| l.as_str())
        .collect();
    assert_eq!(links.len(), 16);
    assert!(texts.iter().any(|t| t.starts_with("ring 1: N0 → N1 → N3")));
    assert!(texts.iter().any(|t| t.starts_with("ring 2: N0 → N2 → N3")));
}

/// A `trees` schedule draws each spanning tree in its own colour: every compute node but the
/// root has one edge towards the root in each tree, and the legend names each tree.
#[test]
fn svg_of_a_trees_schedule_shows_each_tree_in_its_own_colour() {
    let source = r#"Topology(name: "mesh", machine: Mesh(dims: [3, 3]), phases: [
        Exchange(name: "g", collective: AllReduce, op: Sum, dtype: F32, elements: 4194304,
            algorithm: "trees"),
    ])"#;
    let compiled = topoc::compile_source(source, &topoc::Options::default()).expect("compiles");
    let trees = compiled.notes[0].trees.len();
    assert!(trees >= 2, "the 3×3 mesh packs several trees, not {trees}");
    let scene = Scene::from_compiled(&compiled, &Request::default()).expect("a scene");
    assert_eq!(scene.overlays.len(), trees);
    assert!(scene.subtitle.contains(&format!("{trees} spanning trees")));
    let text = render_svg(&scene);
    let doc = roxmltree::Document::parse(&text).expect("well-formed SVG");
    let mut by_tree: BTreeMap<String, (BTreeSet<String>, usize)> = BTreeMap::new();
    for n in doc
        .descendants()
        .filter(|n| n.attribute("class") == Some("ring-edge"))
    {
        let entry = by_tree
            .entry(n.attribute("data-overlay").expect("overlay").to_string())
            .or_default();
        entry
            .0
            .insert(n.attribute("stroke").expect("stroke").to_string());
        entry.1 += 1;
    }
    assert_eq!(by_tree.len(), trees);
    let colours: BTreeSet<&String> = by_tree.values().flat_map(|(c, _)| c).collect();
    assert_eq!(
        colours.len(),
        trees.min(10),
        "one colour per tree: {by_tree:?}"
    );
    for (name, (colour, edges)) in &by_tree {
        assert_eq!(colour.len(), 1, "{name} is drawn in one colour");
        assert_eq!(
            *edges, 8,
            "{name}: one edge up from each of the 8 other nodes"
        );
    }
    let texts: Vec<&str> = doc
        .descendants()
        .filter(|n| n.has_tag_name("text"))
        .filter_map(|n| n.text())
        .collect();
    assert!(texts.iter().any(|t| t.starts_with("tree 1: rooted at")));
}

/// Every example, in the embedding view and at its first and last step, gives well-formed SVG
/// naming every link, and the same bytes when drawn again.
#[test]
fn every_example_draws_in_every_view() {
    for path in examples() {
        let c = compiled(&path);
        let steps = c.schedule.schedule().phases[0].steps;
        for step in [None, Some(0), Some(steps - 1)] {
            let request = Request { phase: None, step };
            let s = Scene::from_compiled(&c, &request).expect("scene");
            let placed = layout::compute(&s, LayoutKind::Auto);
            let text = svg::render(&s, &placed);
            let again = svg::render(&Scene::from_compiled(&c, &request).unwrap(), &placed);
            assert_eq!(text, again, "{}: deterministic", path.display());
            let doc = roxmltree::Document::parse(&text)
                .unwrap_or_else(|e| panic!("{} {step:?}: {e}", path.display()));
            let texts: BTreeSet<&str> = doc
                .descendants()
                .filter(|n| n.has_tag_name("text"))
                .filter_map(|n| n.text())
                .collect();
            for link in &s.machine.links {
                assert!(texts.contains(link.name.as_str()), "{}", path.display());
            }
            if step.is_some() {
                let arrows = doc
                    .descendants()
                    .filter(|n| n.attribute("class") == Some("transfer"))
                    .count();
                assert!(
                    arrows > 0,
                    "{}: the step's transfers are drawn",
                    path.display()
                );
            }
            let d = dot::render(&s, &placed);
            assert!(d.starts_with("// topoc draw") && d.trim_end().ends_with('}'));
        }
    }
}

/// A schedule file carries no embedding; the channels derived from it are the topology's
/// rings (seed 004's walk around the ladder's rings, and the 8-node ring's chunks meeting in
/// the middle), and its ladder is recognised from the links, so the pictures agree.
#[test]
fn a_schedule_draws_like_its_topology() {
    for name in ["ladder8.ron", "ring8.ron", "ladder24.ron"] {
        let c = if name.starts_with("ladder") {
            seed_ladder(name)
        } else {
            compiled(&repo().join("examples").join(name))
        };
        let text = serial::to_string(c.schedule.schedule(), Format::Ron);
        let verified = schedule_ir::verify(serial::from_str(&text).unwrap()).unwrap();
        let from_schedule = Scene::from_schedule(&verified, &Request::default()).unwrap();
        let from_topology = Scene::from_compiled(&c, &Request::default()).unwrap();
        assert_eq!(from_schedule.shape, from_topology.shape, "{name}");
        assert_eq!(
            from_schedule.overlays.len(),
            from_topology.overlays.len(),
            "{name}"
        );
        for (a, b) in from_schedule.overlays.iter().zip(&from_topology.overlays) {
            assert!(a.name.starts_with("channel") && b.name.starts_with("ring"));
            // Links, not directions: a ring whose chunks meet in the middle is read from the
            // schedule as one channel over both directions of its links.
            let set = |o: &topoc::draw::Overlay| -> BTreeSet<usize> {
                o.edges.iter().map(|h| h.direction() / 2).collect()
            };
            assert_eq!(set(a), set(b), "{name}: {} is {}", a.name, b.name);
            let directions: BTreeSet<usize> = a.edges.iter().map(|h| h.direction()).collect();
            assert!(b.both_ways, "{name}");
            assert!(
                a.both_ways || directions.len() == 2 * set(a).len(),
                "{name}: {} runs both ways",
                a.name
            );
        }
        assert_eq!(
            layout::compute(&from_schedule, LayoutKind::Auto).kind,
            layout::compute(&from_topology, LayoutKind::Auto).kind
        );
    }
}

#[test]
fn bad_phase_and_step_are_refused_with_the_choices() {
    let c = seed_ladder("ladder8.ron");
    let err = Scene::from_compiled(
        &c,
        &Request {
            phase: Some("weights".to_string()),
            step: None,
        },
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "there is no phase `weights`; the phases are: grads"
    );
    let err = Scene::from_compiled(
        &c,
        &Request {
            phase: None,
            step: Some(14),
        },
    )
    .unwrap_err();
    assert_eq!(
        err,
        DrawError::NoSuchStep {
            phase: "grads".to_string(),
            step: 14,
            steps: 14
        }
    );
    assert_eq!(
        err.to_string(),
        "phase `grads` has 14 steps (0 to 13); there is no step 14"
    );
}

#[test]
fn a_broadcast_is_titled_by_its_roots_name() {
    // The root is `o0` (node 0): the title names it as `compile` does, not as `node#0`, the
    // form kept for ids that do not exist.
    let path = repo().join("examples/graph-petersen.ron");
    let c = compiled(&path);
    let request = Request {
        phase: Some("weights".to_string()),
        step: None,
    };
    let from_topology = Scene::from_compiled(&c, &request).unwrap();
    assert!(
        from_topology
            .subtitle
            .starts_with("phase `weights`: broadcast from o0 by "),
        "{}",
        from_topology.subtitle
    );
    let from_schedule = Scene::from_schedule(&c.schedule, &request).unwrap();
    assert!(
        from_schedule
            .subtitle
            .starts_with("phase `weights`: broadcast from o0 by "),
        "{}",
        from_schedule.subtitle
    );
    let stepped = Scene::from_compiled(
        &c,
        &Request {
            step: Some(0),
            ..request
        },
    )
    .unwrap();
    assert!(
        stepped
            .subtitle
            .starts_with("phase `weights`: broadcast from o0 by "),
        "{}",
        stepped.subtitle
    );
    for scene in [&from_topology, &stepped] {
        assert!(render_dot(scene).contains("broadcast from o0 by "));
        assert!(render_svg(scene).contains("broadcast from o0 by "));
    }
}

/// Three compute nodes around a switch, plus two parallel links between two of them, and an
/// allgather whose every send is routed through the switch.
fn switch_schedule() -> Schedule {
    let link = |name: &str, a: u32, b: u32| Link {
        name: name.to_string(),
        a: NodeId(a),
        b: NodeId(b),
        bandwidth_gbps: 100.0,
        latency_us: 1.0,
        lanes: 1,
    };
    let node = |name: &str, kind| Node {
        name: name.to_string(),
        kind,
        capacity: None,
    };
    let machine = Machine {
        name: "star-3".to_string(),
        nodes: vec![
            node("c0", NodeKind::Compute),
            node("c1", NodeKind::Compute),
            node("c2", NodeKind::Compute),
            node("sw", NodeKind::Switch),
        ],
        links: vec![
            link("u0", 0, 3),
            link("u1", 1, 3),
            link("u2", 2, 3),
            link("p1", 0, 1),
            link("p2", 0, 1),
        ],
        reduce_gbps: None,
        switch_latency_us: 0.0,
    };
    let mut programs = vec![
        Program {
            steps: vec![Vec::new(); 2]
        };
        4
    ];
    for k in 0..2usize {
        for i in 0..3usize {
            let to = (i + 1) % 3;
            let chunk = vec![ChunkId::new((i + 3 - k) % 3)];
            programs[i].steps[k].push(Instr::Send {
                link: LinkId::new(i),
                via: vec![LinkId::new(to)],
                to: NodeId::new(to),
                buffer: schedule_ir::BufferId(0),
                chunks: chunk.clone().into(),
            });
            programs[to].steps[k].push(Instr::Recv {
                link: LinkId::new(to),
                from: NodeId::new(i),
                buffer: schedule_ir::BufferId(0),
                chunks: chunk.into(),
                mode: RecvMode::Store,
            });
        }
    }
    Schedule {
        format_version: FORMAT_VERSION,
        machine,
        program: Vec::new(),
        phases: vec![Phase {
            name: "gather".to_string(),
            collective: Collective::AllGather,
            op: ReduceOp::Sum,
            dtype: DType::F32,
            elements: 3,
            algorithm: "by-hand".to_string(),
            chunks: (0..3)
                .map(|c| Chunk {
                    start: c,
                    end: c + 1,
                    owner: Some(NodeId(c as u32)),
                })
                .collect(),
            buffers: vec![Buffer {
                name: "data".to_string(),
                kind: BufferKind::Data,
            }],
            links: schedule_ir::LinkUse::Exclusive,
            steps: 2,
            programs,
        }],
    }
}

#[test]
fn switches_routes_and_parallel_links_are_drawn() {
    let verified = schedule_ir::verify(switch_schedule()).expect("the hand-made schedule verifies");
    let s = Scene::from_schedule(
        &verified,
        &Request {
            phase: None,
            step: Some(0),
        },
    )
    .unwrap();
    assert_eq!(s.shape, ShapeHint::Other);
    // Three sends, each crossing two links through the switch.
    let step = s.step.as_ref().unwrap();
    assert_eq!(step.transfers, 3);
    assert_eq!(step.carries.len(), 6);
    assert!(step.carries.iter().all(|c| c.mode == RecvMode::Store));
    // One channel: every chunk passes every node.
    assert_eq!(s.overlays.len(), 1);
    assert_eq!(s.overlays[0].detail, "6 link directions over 3 links");

    let placed = layout::compute(&s, LayoutKind::Auto);
    assert_eq!(placed.kind, LayoutKind::Layered);
    let switch_y = placed.pos.as_slice()[3].1;
    assert!(
        placed.pos.as_slice()[..3].iter().all(|p| p.1 > switch_y),
        "switch on top"
    );

    let d = dot::render(&s, &placed);
    assert!(d.contains("n3 [label=\"sw\", shape=box"), "{d}");
    assert!(
        d.contains("label=\"p1\"") && d.contains("label=\"p2\""),
        "{d}"
    );
    assert!(d.contains("style=dashed, label=\"c0\""), "{d}");

    let text = svg::render(&s, &placed);
    let doc = roxmltree::Document::parse(&text).expect("well-formed");
    assert_eq!(
        doc.descendants()
            .filter(|n| n.attribute("class") == Some("node switch"))
            .count(),
        1
    );
    assert_eq!(
        doc.descendants()
            .filter(|n| n.attribute("class") == Some("transfer"))
            .count(),
        6
    );
    // The two parallel links are drawn apart.
    let paths: Vec<&str> = doc
        .descendants()
        .filter(|n| n.attribute("class") == Some("link"))
        .filter(|n| matches!(n.attribute("data-link"), Some("p1" | "p2")))
        .filter_map(|n| n.attribute("d"))
        .collect();
    assert_eq!(paths.len(), 2);
    assert_ne!(paths[0], paths[1]);
}
