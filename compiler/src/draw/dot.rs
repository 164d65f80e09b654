//! Graphviz DOT: deterministic text, for Graphviz or for diffing.
//!
//! The graph is a `digraph`: links are undirected grey edges (`dir=none`) labelled with their
//! ids, one edge per link so parallel links stay separate; overlay edges (or, with a step, the
//! busy link directions, labelled with their chunks) are coloured directed edges beside them.
//! Compute nodes are circles, switches boxes. Every node carries its position from topoc's own
//! layout, pinned (`pos="x,y!"`, `layout=neato`), so Graphviz draws the same picture as
//! `--format svg`; a legend node names the colours.

use super::layout::Layout;
use super::{chunk_label, colour, is_switch, overlay_dash, Scene, LINK_COLOUR};
use crate::visible;
use schedule_ir::{NodeId, RecvMode};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// Renders the scene as a DOT graph.
pub fn render(scene: &Scene, layout: &Layout) -> String {
    let mut out = String::new();
    header(&mut out, scene);
    // Graphviz's y axis points up.
    let top = layout.pos.iter().map(|p| p.1).fold(0.0, f64::max);
    nodes(&mut out, scene, layout, top);
    links(&mut out, scene);
    match &scene.step {
        None => overlays(&mut out, scene),
        Some(step) => step_edges(&mut out, scene, step),
    }
    if !scene.overlays.is_empty() {
        legend(&mut out, scene, layout, top);
    }
    out.push_str("}\n");
    out
}

/// The comment naming the picture, and the graph's defaults.
fn header(out: &mut String, scene: &Scene) {
    let _ = writeln!(
        out,
        "// topoc draw: {} — {}",
        comment(&scene.title),
        comment(&scene.subtitle)
    );
    let _ = writeln!(
        out,
        "// Positions are topoc's layout, pinned: `dot -Tsvg` (which runs neato here) keeps them."
    );
    let _ = writeln!(out, "digraph {} {{", quote(&scene.title));
    let _ = writeln!(
        out,
        "  graph [layout=neato, inputscale=72, splines=true, outputorder=edgesfirst, fontname=\"Helvetica\", labelloc=t, labeljust=l, label={}];",
        quote_lines(&[&scene.title, &scene.subtitle])
    );
    let _ = writeln!(
        out,
        "  node [fontname=\"Helvetica\", fontsize=12, style=filled, fillcolor=\"#ffffff\", color=\"#222222\"];"
    );
    let _ = writeln!(out, "  edge [fontname=\"Helvetica\", fontsize=10];");
}

/// Every node at its pinned position (`top` is the layout's lowest y, which Graphviz's upward
/// y axis turns into 0).
fn nodes(out: &mut String, scene: &Scene, layout: &Layout, top: f64) {
    let m = &scene.machine;
    let _ = writeln!(
        out,
        "\n  // nodes: compute nodes as circles, switches as boxes"
    );
    for (i, node) in m.nodes.iter().enumerate() {
        let shape = if is_switch(m, NodeId::new(i)) {
            "box, fillcolor=\"#fff3d0\""
        } else {
            "circle"
        };
        let p = layout
            .pos
            .get(NodeId::new(i))
            .copied()
            .unwrap_or((0.0, 0.0));
        let _ = writeln!(
            out,
            "  n{i} [label={}, shape={shape}, pos=\"{},{}!\"];",
            quote(&node.name),
            num(p.0),
            num(top - p.1)
        );
    }
}

/// Every link as an undirected grey edge labelled with its id.
fn links(out: &mut String, scene: &Scene) {
    let _ = writeln!(
        out,
        "\n  // links, each labelled with its id; parallel links are separate edges"
    );
    for link in &scene.machine.links {
        let _ = writeln!(
            out,
            "  n{} -> n{} [dir=none, color=\"{LINK_COLOUR}\", penwidth=2, label={}, fontcolor=\"#555555\"];",
            link.a.0,
            link.b.0,
            quote(&link.name)
        );
    }
}

/// Each overlay's edges in its colour, under a comment naming it.
fn overlays(out: &mut String, scene: &Scene) {
    for (i, o) in scene.overlays.iter().enumerate() {
        let ways = if o.both_ways {
            ", walked both ways"
        } else {
            ""
        };
        let _ = writeln!(
            out,
            "\n  // {}: {}{ways}",
            comment(&o.name),
            comment(&o.detail)
        );
        let style = overlay_dash(i).map_or("solid", |_| "dashed");
        for h in &o.edges {
            let _ = writeln!(
                out,
                "  n{} -> n{} [color=\"{}\", penwidth=2.5, arrowsize=0.8, style={style}, tooltip={}];",
                h.from.0,
                h.to.0,
                colour(Some(i)),
                quote(&format!("{} over {}", o.name, scene.machine.link_name(h.link)))
            );
        }
    }
}

/// One edge per busy link direction of the step, labelled with the chunks it carries.
fn step_edges(out: &mut String, scene: &Scene, step: &super::StepUse) {
    let m = &scene.machine;
    let _ = writeln!(
        out,
        "\n  // step {}: the busy link directions, labelled with the chunks they carry (solid: reduced, dashed: stored)",
        step.step
    );
    let mut by_direction: BTreeMap<usize, Vec<&super::Carry>> = BTreeMap::new();
    for c in &step.carries {
        by_direction.entry(c.hop.direction()).or_default().push(c);
    }
    for carries in by_direction.values() {
        let h = carries[0].hop;
        let text: Vec<String> = carries.iter().map(|c| chunk_label(&c.chunks)).collect();
        let text = text.join(" ");
        let stored = carries.iter().all(|c| c.mode == RecvMode::Store);
        let _ = writeln!(
            out,
            "  n{} -> n{} [color=\"{c}\", fontcolor=\"{c}\", penwidth=2.5, arrowsize=0.8, style={}, label={}, tooltip={}];",
            h.from.0,
            h.to.0,
            if stored { "dashed" } else { "solid" },
            quote(&text),
            quote(&format!(
                "{} {} → {}: {text}",
                m.link_name(h.link),
                m.node_name(h.from),
                m.node_name(h.to)
            )),
            c = colour(carries[0].overlay),
        );
    }
}

/// A legend node below the drawing naming each overlay's colour (and, with a step, the two
/// edge styles).
fn legend(out: &mut String, scene: &Scene, layout: &Layout, top: f64) {
    let bottom = layout.pos.iter().map(|p| p.1).fold(0.0, f64::max);
    let left = layout.pos.iter().map(|p| p.0).fold(f64::INFINITY, f64::min);
    let right = layout
        .pos
        .iter()
        .map(|p| p.0)
        .fold(f64::NEG_INFINITY, f64::max);
    let middle = if left.is_finite() {
        (left + right) / 2.0
    } else {
        0.0
    };
    let _ = writeln!(out, "\n  // legend");
    let mut rows = String::new();
    for (i, o) in scene.overlays.iter().enumerate() {
        let ways = if o.both_ways {
            " (walked both ways)"
        } else {
            ""
        };
        let _ = write!(
            rows,
            "<tr><td bgcolor=\"{}\" width=\"24\"></td><td align=\"left\">{}</td></tr>",
            colour(Some(i)),
            html(&format!("{}: {}{ways}", o.name, o.detail))
        );
    }
    if let Some(step) = &scene.step {
        for (mode, text) in [
            (
                RecvMode::Reduce,
                "solid: the receiver reduces the chunks (cN) into its own",
            ),
            (
                RecvMode::Store,
                "dashed: the receiver stores the chunks (cN)",
            ),
        ] {
            if step.carries.iter().any(|c| c.mode == mode) {
                let _ = write!(rows, "<tr><td></td><td align=\"left\">{text}</td></tr>");
            }
        }
    }
    let _ = writeln!(
        out,
        "  legend [shape=plaintext, style=\"\", fontsize=11, pos=\"{},{}!\", label=<<table border=\"0\" cellspacing=\"3\">{rows}</table>>];",
        num(middle),
        num(top - bottom - 90.0)
    );
}

/// A DOT string literal holding one line of text: quotes and backslashes escaped for DOT, and
/// every control character shown as text ([`visible::line`]: a line break in a name is
/// `\x0a`, as every other output shows it, never a Graphviz line break, so a name stays one
/// label line and Graphviz sees no NUL, which it refuses, or ESC, which it passes through).
fn quote(s: &str) -> String {
    quote_lines(&[s])
}

/// A DOT string literal of several lines, each as [`quote`] shows it, joined by Graphviz's
/// own line break `\n`: the only line breaks a label has are topoc's.
fn quote_lines(lines: &[&str]) -> String {
    let mut out = String::from("\"");
    for (i, line) in lines.iter().enumerate() {
        if i > 0 {
            out.push_str("\\n");
        }
        for ch in visible::line(line).chars() {
            match ch {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                c => out.push(c),
            }
        }
    }
    out.push('"');
    out
}

/// Text inside a `//` comment: one line whatever the text holds, so a name cannot end the
/// comment and be read as DOT statements.
fn comment(s: &str) -> std::borrow::Cow<'_, str> {
    visible::line(s)
}

/// Text inside an HTML-like label.
fn html(s: &str) -> String {
    super::svg::esc(s)
}

/// A coordinate: whole points, never `-0`.
fn num(x: f64) -> String {
    let r = x.round();
    if r == 0.0 {
        "0".to_string()
    } else {
        format!("{r}")
    }
}
