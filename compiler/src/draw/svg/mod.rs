//! SVG drawn by topoc itself, from a [`Layout`]: no Graphviz needed.
//!
//! Links are grey lines labelled with their ids; parallel links fan out as curves, and a link
//! that would pass over a node it does not join bends around it. Each overlay edge (or, with a
//! step, each busy link direction) is an arrow in its overlay's colour beside its link, on the
//! right-hand side of travel, so the two directions of one link are on opposite sides. Chunk
//! labels sit beside their arrow near its sending end. A legend below names every colour.
//!
//! Elements carry classes for tools and tests: `link` (with `data-link`), `ring-edge` (with
//! `data-overlay` and `data-link`), `transfer`, `node`, `link-id`, `chunk-label`.

mod place;

use crate::draw::geom::{self, P};
use crate::draw::layout::Layout;
use crate::draw::{chunk_label, colour, is_switch, overlay_dash, Scene, LINK_COLOUR};
use place::{bbox, text_width, Drawing, NodeBox, Placer, Shape, Spot};
use schedule_ir::{Hop, Machine, NodeId, RecvMode};
use std::collections::BTreeMap;
use std::fmt::Write as _;

const FONT: &str = "DejaVu Sans, Helvetica, Arial, sans-serif";
const MARGIN: f64 = 36.0;
/// Top of the drawing, below the title lines.
const TOP: f64 = 92.0;
const NODE_R: f64 = 19.0;
/// Distance between parallel links at their middle.
const SPREAD: f64 = 44.0;
/// Distance of an arrow from its link.
const ARROW_GAP: f64 = 8.0;
/// Extra distance for each further arrow on the same link direction.
const ARROW_STACK: f64 = 6.0;
/// How far a link keeps from the nodes it does not join.
const CLEAR: f64 = 32.0;
const HEAD_LEN: f64 = 10.0;
const HEAD_HALF: f64 = 4.5;
/// Font size of link ids and chunk labels.
pub(super) const LABEL_SIZE: f64 = 11.0;

/// Renders the scene as a standalone SVG document.
pub fn render(scene: &Scene, layout: &Layout) -> String {
    let m = &scene.machine;
    let nodes = node_boxes(m, layout);
    let paths = link_paths(m, &nodes);
    let mut d = Drawing::default();

    let links_svg = links(m, &paths, &mut d);
    let (arrows_svg, chunk_lines) = match &scene.step {
        None => (overlay_arrows(scene, &paths, &nodes, &mut d), Vec::new()),
        Some(step) => step_arrows(step, m, &paths, &nodes, &mut d),
    };
    // Link ids at the middle of each link, then chunk labels where they hit nothing.
    let mut placer = Placer {
        nodes: &nodes,
        lines: paths
            .iter()
            .chain(chunk_lines.iter().map(|a| &a.0))
            .map(|l| (bbox(l), l))
            .collect(),
        placed: Vec::new(),
    };
    let ids_svg = link_ids(m, &paths, &mut placer, &mut d);
    let labels_svg = chunk_labels(&chunk_lines, &mut placer, &mut d);
    let nodes_svg = node_shapes(m, &nodes, &mut d);
    page(
        scene,
        &d,
        [
            ("links", links_svg),
            ("arrows", arrows_svg),
            ("nodes", nodes_svg),
            ("link-ids", ids_svg),
            ("chunk-labels", labels_svg),
        ],
    )
}

/// An arrow drawn for a step: its line, the chunks it carries, and its colour.
type Carried = (Vec<P>, String, &'static str);

/// Every link as a grey line.
fn links(m: &Machine, paths: &[Vec<P>], d: &mut Drawing) -> String {
    let mut svg = String::new();
    for (l, path) in paths.iter().enumerate() {
        d.extend(path);
        let _ = writeln!(
            svg,
            r#"<path class="link" data-link="{}" d="{}" fill="none" stroke="{LINK_COLOUR}" stroke-width="2"/>"#,
            esc(&m.link_name(schedule_ir::LinkId::new(l))),
            path_d(path)
        );
    }
    svg
}

/// One arrow per overlay edge, stacked outwards where several share a link direction.
fn overlay_arrows(scene: &Scene, paths: &[Vec<P>], nodes: &[NodeBox], d: &mut Drawing) -> String {
    let m = &scene.machine;
    let mut svg = String::new();
    let mut stacked: BTreeMap<usize, usize> = BTreeMap::new();
    for (i, o) in scene.overlays.iter().enumerate() {
        for h in &o.edges {
            let k = stacked.entry(h.direction()).or_insert(0);
            let gap = ARROW_GAP + ARROW_STACK * *k as f64;
            *k += 1;
            let Some((line, head)) = arrow(paths, nodes, h, gap) else {
                continue;
            };
            d.extend(&line);
            let c = colour(Some(i));
            let dash = overlay_dash(i)
                .map(|x| format!(r#" stroke-dasharray="{x}""#))
                .unwrap_or_default();
            let _ = writeln!(
                svg,
                r#"<path class="ring-edge" data-overlay="{}" data-link="{}" d="{}" fill="none" stroke="{c}" stroke-width="2.5"{dash}/>"#,
                esc(&o.name),
                esc(&m.link_name(h.link)),
                path_d(&line)
            );
            let _ = writeln!(
                svg,
                r#"<polygon class="arrowhead" points="{}" fill="{c}"/>"#,
                points(&head)
            );
        }
    }
    svg
}

/// One arrow per busy link direction of the step, dashed when it only stores; returns the
/// arrows with the chunk labels still to place.
fn step_arrows(
    step: &super::StepUse,
    m: &Machine,
    paths: &[Vec<P>],
    nodes: &[NodeBox],
    d: &mut Drawing,
) -> (String, Vec<Carried>) {
    let mut svg = String::new();
    let mut by_direction: BTreeMap<usize, Vec<&super::Carry>> = BTreeMap::new();
    for c in &step.carries {
        by_direction.entry(c.hop.direction()).or_default().push(c);
    }
    let mut drawn = Vec::new();
    for carries in by_direction.values() {
        let h = carries[0].hop;
        let Some((line, head)) = arrow(paths, nodes, &h, ARROW_GAP) else {
            continue;
        };
        d.extend(&line);
        let c = colour(carries[0].overlay);
        let stored = carries.iter().all(|c| c.mode == RecvMode::Store);
        let dash = if stored {
            r#" stroke-dasharray="7 4""#
        } else {
            ""
        };
        let text: Vec<String> = carries.iter().map(|c| chunk_label(&c.chunks)).collect();
        let text = text.join(" ");
        let _ = writeln!(
            svg,
            r#"<path class="transfer" data-link="{}" data-chunks="{}" d="{}" fill="none" stroke="{c}" stroke-width="2.5"{dash}/>"#,
            esc(&m.link_name(h.link)),
            esc(&text),
            path_d(&line)
        );
        let _ = writeln!(
            svg,
            r#"<polygon class="arrowhead" points="{}" fill="{c}"/>"#,
            points(&head)
        );
        drawn.push((line, text, c));
    }
    (svg, drawn)
}

/// Each link's id on the link near its middle, clear of other labels where possible.
fn link_ids(m: &Machine, paths: &[Vec<P>], placer: &mut Placer, d: &mut Drawing) -> String {
    let mut svg = String::new();
    for (l, path) in paths.iter().enumerate() {
        let name = m.link_name(schedule_ir::LinkId::new(l));
        let spots: Vec<Spot> = [0.5, 0.4, 0.6, 0.3, 0.7]
            .into_iter()
            .map(|t| Spot::new(geom::at(path, t).0, (0.0, 0.0), &name, false))
            .collect();
        let spot = spots
            .iter()
            .find(|s| placer.clear_of_labels(&s.rect))
            .unwrap_or(&spots[0])
            .clone();
        placer.placed.push(spot.rect);
        svg.push_str(&spot.text(d, "link-id", &name, "#555555", false));
    }
    svg
}

/// Each arrow's chunk label beside it: the first spot that hits nothing, else the one that
/// hits least.
fn chunk_labels(arrows: &[Carried], placer: &mut Placer, d: &mut Drawing) -> String {
    let mut svg = String::new();
    for (line, text, c) in arrows {
        let mut candidates = Vec::new();
        for t in [0.3, 0.4, 0.2, 0.5, 0.6, 0.7, 0.15, 0.8] {
            for off in [9.0, 18.0, 28.0] {
                let (at, dir) = geom::at(line, t);
                let n = geom::right(dir);
                candidates.push(Spot::new(geom::add(at, geom::scale(n, off)), n, text, true));
            }
        }
        let spot = candidates
            .iter()
            .enumerate()
            .min_by_key(|(i, s)| (placer.conflicts(&s.rect), *i))
            .map(|(_, s)| s.clone());
        if let Some(spot) = spot {
            placer.placed.push(spot.rect);
            svg.push_str(&spot.text(d, "chunk-label", text, c, true));
        }
    }
    svg
}

/// Compute nodes as circles and switches as boxes, each with its name.
fn node_shapes(m: &Machine, nodes: &[NodeBox], d: &mut Drawing) -> String {
    let mut svg = String::new();
    for (i, b) in nodes.iter().enumerate() {
        let name = m.node_name(NodeId::new(i));
        let (x, y) = b.c;
        match b.shape {
            Shape::Circle(r) => {
                d.extend(&[(x - r, y - r), (x + r, y + r)]);
                let _ = writeln!(
                    svg,
                    r##"<circle class="node" data-node="{}" cx="{}" cy="{}" r="{}" fill="#ffffff" stroke="#222222" stroke-width="1.5"/>"##,
                    esc(&name),
                    f(x),
                    f(y),
                    f(r)
                );
            }
            Shape::Box(hw, hh) => {
                d.extend(&[(x - hw, y - hh), (x + hw, y + hh)]);
                let _ = writeln!(
                    svg,
                    r##"<rect class="node switch" data-node="{}" x="{}" y="{}" width="{}" height="{}" rx="4" fill="#fff3d0" stroke="#222222" stroke-width="1.5"/>"##,
                    esc(&name),
                    f(x - hw),
                    f(y - hh),
                    f(2.0 * hw),
                    f(2.0 * hh)
                );
            }
        }
        let _ = writeln!(
            svg,
            r##"<text x="{}" y="{}" font-size="12" font-weight="bold" text-anchor="middle" fill="#222222">{}</text>"##,
            f(x),
            f(y + 4.2),
            esc(&name)
        );
    }
    svg
}

/// The page: title lines, the drawing's layers moved to the margin below them, the legend.
fn page(scene: &Scene, d: &Drawing, layers: [(&str, String); 5]) -> String {
    let (min, max) = d.bounds();
    let (dx, dy) = (MARGIN - min.0, TOP - min.1);
    let legend = legend(scene, &scene.machine);
    let legend_top = max.1 + dy + 36.0;
    let legend_height = 22.0 * legend.len() as f64;
    let widest_text = [
        text_width(&scene.title, 18.0),
        text_width(&scene.subtitle, 13.0),
    ]
    .into_iter()
    .chain(legend.iter().map(|e| 44.0 + text_width(&e.text, 12.0)))
    .fold(0.0, f64::max);
    let width = (max.0 - min.0 + 2.0 * MARGIN)
        .max(widest_text + 2.0 * MARGIN)
        .ceil();
    let height = (legend_top + legend_height + MARGIN / 2.0).ceil();

    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="{FONT}">"#,
        w = f(width),
        h = f(height)
    );
    let _ = writeln!(
        out,
        "<title>{}</title>",
        esc(&format!("{} — {}", scene.title, scene.subtitle))
    );
    let _ = writeln!(
        out,
        r##"<rect width="100%" height="100%" fill="#ffffff"/>"##
    );
    let _ = writeln!(
        out,
        r##"<text class="title" x="{}" y="34" font-size="18" font-weight="bold" fill="#111111">{}</text>"##,
        f(MARGIN),
        esc(&scene.title)
    );
    let _ = writeln!(
        out,
        r##"<text class="subtitle" x="{}" y="58" font-size="13" fill="#444444">{}</text>"##,
        f(MARGIN),
        esc(&scene.subtitle)
    );
    let _ = writeln!(out, r#"<g transform="translate({},{})">"#, f(dx), f(dy));
    for (id, part) in layers {
        let _ = writeln!(out, r#"<g id="{id}">"#);
        out.push_str(&part);
        out.push_str("</g>\n");
    }
    out.push_str("</g>\n");
    out.push_str(&render_legend(&legend, legend_top));
    out.push_str("</svg>\n");
    out
}

fn node_boxes(m: &Machine, layout: &Layout) -> Vec<NodeBox> {
    (0..m.nodes.len())
        .map(|i| {
            let id = NodeId::new(i);
            let w = text_width(&m.node_name(id), 12.0);
            let c = layout.pos.get(id).copied().unwrap_or((0.0, 0.0));
            let shape = if is_switch(m, id) {
                Shape::Box((w / 2.0 + 9.0).max(24.0), 14.0)
            } else {
                Shape::Circle((w / 2.0 + 6.0).max(NODE_R))
            };
            NodeBox { c, shape }
        })
        .collect()
}

/// The path of every link, from its `a` end to its `b` end.
fn link_paths(m: &Machine, nodes: &[NodeBox]) -> Vec<Vec<P>> {
    let centre = {
        let n = nodes.len().max(1) as f64;
        let s = nodes.iter().fold((0.0, 0.0), |s, b| geom::add(s, b.c));
        geom::scale(s, 1.0 / n)
    };
    // Parallel links fan out symmetrically around the straight line.
    let mut groups: BTreeMap<(NodeId, NodeId), Vec<usize>> = BTreeMap::new();
    for (l, link) in m.links.iter().enumerate() {
        groups
            .entry((link.a.min(link.b), link.a.max(link.b)))
            .or_default()
            .push(l);
    }
    let mut paths = vec![Vec::new(); m.links.len()];
    let at = |n: NodeId| nodes.get(n.index()).map_or((0.0, 0.0), |b| b.c);
    for ((lo, hi), links) in groups {
        let (p, q) = (at(lo), at(hi));
        let k = links.len() as f64;
        // Which way to bend around obstacles first: away from the middle of the drawing.
        let mid = geom::scale(geom::add(p, q), 0.5);
        let away = geom::right(geom::sub(q, p));
        let side = {
            let v = geom::sub(mid, centre);
            if away.0 * v.0 + away.1 * v.1 >= 0.0 {
                1.0
            } else {
                -1.0
            }
        };
        let clear = |path: &[P]| {
            nodes.iter().enumerate().all(|(i, b)| {
                i == lo.index() || i == hi.index() || geom::dist_to(path, b.c) >= b.extent() + CLEAR
            })
        };
        // The smallest extra bend that clears every other node (none if nothing does).
        let extra = (0..=24)
            .flat_map(|s| {
                let e = 20.0 * f64::from(s);
                [side * e, -side * e]
            })
            .find(|&e| {
                let lane = -(k - 1.0) / 2.0 * SPREAD;
                (0..links.len()).all(|i| clear(&geom::curve(p, q, lane + i as f64 * SPREAD + e)))
            })
            .unwrap_or(0.0);
        for (i, &l) in links.iter().enumerate() {
            let bulge = (i as f64 - (k - 1.0) / 2.0) * SPREAD + extra;
            let mut path = geom::curve(p, q, bulge);
            if m.links[l].a != lo {
                path.reverse();
            }
            paths[l] = path;
        }
    }
    paths
}

/// The arrow for a crossing: its line (trimmed at both nodes and short of the head) and its
/// head.
fn arrow(paths: &[Vec<P>], nodes: &[NodeBox], h: &Hop, gap: f64) -> Option<(Vec<P>, [P; 3])> {
    let mut path = geom::densify(paths.get(h.link.index())?, 40);
    if h.backward {
        path.reverse();
    }
    let (from, to) = (nodes.get(h.from.index())?, nodes.get(h.to.index())?);
    let moved = geom::offset(&path, gap);
    let trimmed = geom::trim(&moved, |x| from.inside(x, 4.0), |x| to.inside(x, 3.0))?;
    let (tip, dir) = geom::at(&trimmed, 1.0);
    let u = geom::unit(dir);
    let n = geom::right(dir);
    let base = geom::sub(tip, geom::scale(u, HEAD_LEN));
    let head = [
        tip,
        geom::add(base, geom::scale(n, HEAD_HALF)),
        geom::sub(base, geom::scale(n, HEAD_HALF)),
    ];
    Some((geom::shorten_end(&trimmed, HEAD_LEN - 1.0), head))
}

/// One row of the legend.
struct Entry {
    swatch: Swatch,
    text: String,
}

enum Swatch {
    Arrow {
        colour: &'static str,
        dash: Option<&'static str>,
    },
    Link,
    Switch,
}

fn legend(scene: &Scene, m: &Machine) -> Vec<Entry> {
    let mut rows = Vec::new();
    for (i, o) in scene.overlays.iter().enumerate() {
        let ways = if o.both_ways {
            " (walked both ways)"
        } else {
            ""
        };
        rows.push(Entry {
            swatch: Swatch::Arrow {
                colour: colour(Some(i)),
                dash: overlay_dash(i),
            },
            text: format!("{}: {}{ways}", o.name, o.detail),
        });
    }
    if let Some(step) = &scene.step {
        if step.carries.iter().any(|c| c.overlay.is_none()) {
            rows.push(Entry {
                swatch: Swatch::Arrow {
                    colour: colour(None),
                    dash: None,
                },
                text: "outside every drawn structure".to_string(),
            });
        }
        if step.carries.iter().any(|c| c.mode == RecvMode::Reduce) {
            rows.push(Entry {
                swatch: Swatch::Arrow {
                    colour: "#555555",
                    dash: None,
                },
                text: "solid: the receiver reduces the chunks (cN) into its own".to_string(),
            });
        }
        if step.carries.iter().any(|c| c.mode == RecvMode::Store) {
            rows.push(Entry {
                swatch: Swatch::Arrow {
                    colour: "#555555",
                    dash: Some("7 4"),
                },
                text: "dashed: the receiver stores the chunks (cN)".to_string(),
            });
        }
    }
    rows.push(Entry {
        swatch: Swatch::Link,
        text: "link, labelled with its id".to_string(),
    });
    if m.nodes
        .iter()
        .any(|n| n.kind == schedule_ir::NodeKind::Switch)
    {
        rows.push(Entry {
            swatch: Swatch::Switch,
            text: "switch (forwards, does not compute)".to_string(),
        });
    }
    rows
}

fn render_legend(rows: &[Entry], top: f64) -> String {
    let mut out = String::from("<g id=\"legend\">\n");
    for (i, e) in rows.iter().enumerate() {
        let y = top + 22.0 * i as f64;
        let (x0, x1) = (MARGIN, MARGIN + 30.0);
        match e.swatch {
            Swatch::Arrow { colour, dash } => {
                let dash = dash
                    .map(|x| format!(r#" stroke-dasharray="{x}""#))
                    .unwrap_or_default();
                let _ = writeln!(
                    out,
                    r#"<line class="legend-swatch" x1="{}" y1="{}" x2="{}" y2="{}" stroke="{colour}" stroke-width="2.5"{dash}/>"#,
                    f(x0),
                    f(y),
                    f(x1 - 8.0),
                    f(y)
                );
                let _ = writeln!(
                    out,
                    r#"<polygon points="{},{} {},{} {},{}" fill="{colour}"/>"#,
                    f(x1),
                    f(y),
                    f(x1 - HEAD_LEN),
                    f(y - HEAD_HALF),
                    f(x1 - HEAD_LEN),
                    f(y + HEAD_HALF)
                );
            }
            Swatch::Link => {
                let _ = writeln!(
                    out,
                    r#"<line class="legend-swatch" x1="{}" y1="{}" x2="{}" y2="{}" stroke="{LINK_COLOUR}" stroke-width="2"/>"#,
                    f(x0),
                    f(y),
                    f(x1),
                    f(y)
                );
            }
            Swatch::Switch => {
                let _ = writeln!(
                    out,
                    r##"<rect x="{}" y="{}" width="30" height="14" rx="3" fill="#fff3d0" stroke="#222222"/>"##,
                    f(x0),
                    f(y - 7.0)
                );
            }
        }
        let _ = writeln!(
            out,
            r##"<text x="{}" y="{}" font-size="12" fill="#222222">{}</text>"##,
            f(x1 + 10.0),
            f(y + 4.2),
            esc(&e.text)
        );
    }
    out.push_str("</g>\n");
    out
}

/// `M x y L x y …`.
fn path_d(path: &[P]) -> String {
    let mut s = String::new();
    for (i, p) in path.iter().enumerate() {
        let _ = write!(
            s,
            "{}{} {}",
            if i == 0 { "M" } else { " L" },
            f(p.0),
            f(p.1)
        );
    }
    s
}

fn points(pts: &[P]) -> String {
    pts.iter()
        .map(|p| format!("{},{}", f(p.0), f(p.1)))
        .collect::<Vec<_>>()
        .join(" ")
}

/// A number with one decimal, never `-0.0`.
pub(super) fn f(x: f64) -> String {
    let s = format!("{x:.1}");
    if s == "-0.0" {
        "0.0".to_string()
    } else {
        s
    }
}

/// Escapes text for XML content and attribute values. Every control character is shown as
/// text ([`crate::visible::line`]: a line break is `\x0a`, a tab `\x09`), as in every other
/// output: XML 1.0 cannot carry NUL or ESC even as a reference, and a parser turns a raw line
/// break or tab in an attribute into a space, so a `data-node` would not read back as the name
/// the picture shows.
pub fn esc(s: &str) -> String {
    let shown = crate::visible::line(s);
    let mut out = String::with_capacity(shown.len());
    for ch in shown.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
    out
}
