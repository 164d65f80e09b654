//! Where things go on the page: node outlines, the bounding box of the drawing, and text
//! labels placed where they hit the fewest other labels, nodes and lines.

use super::{esc, f, LABEL_SIZE};
use crate::draw::geom::{self, P};

/// How a node is drawn.
#[derive(Clone, Copy)]
pub(super) enum Shape {
    Circle(f64),
    Box(f64, f64),
}

#[derive(Clone, Copy)]
pub(super) struct NodeBox {
    pub(super) c: P,
    pub(super) shape: Shape,
}

impl NodeBox {
    pub(super) fn inside(&self, p: P, pad: f64) -> bool {
        match self.shape {
            Shape::Circle(r) => geom::dist(p, self.c) < r + pad,
            Shape::Box(hw, hh) => {
                (p.0 - self.c.0).abs() < hw + pad && (p.1 - self.c.1).abs() < hh + pad
            }
        }
    }

    pub(super) fn extent(&self) -> f64 {
        match self.shape {
            Shape::Circle(r) => r,
            Shape::Box(hw, hh) => hw.hypot(hh),
        }
    }
}

/// Text width estimate for a sans-serif font, of `s` as [`esc`](super::esc) shows it (a
/// control character takes the width of its text form, `\x0a`).
pub(super) fn text_width(s: &str, size: f64) -> f64 {
    0.6 * size * crate::visible::line(s).chars().count() as f64
}

/// The bounding box of everything drawn, in layout coordinates.
#[derive(Default)]
pub(super) struct Drawing {
    min: Option<P>,
    max: Option<P>,
}

impl Drawing {
    pub(super) fn extend(&mut self, pts: &[P]) {
        for &p in pts {
            self.min = Some(self.min.map_or(p, |m| (m.0.min(p.0), m.1.min(p.1))));
            self.max = Some(self.max.map_or(p, |m| (m.0.max(p.0), m.1.max(p.1))));
        }
    }

    pub(super) fn bounds(&self) -> (P, P) {
        (
            self.min.unwrap_or((0.0, 0.0)),
            self.max.unwrap_or((0.0, 0.0)),
        )
    }
}

/// An axis-aligned box: left, top, right, bottom.
pub(super) type Rect = (f64, f64, f64, f64);

/// Where a text label goes: at `p`, set off towards a unit vector (zero: centred on `p`).
#[derive(Clone)]
pub(super) struct Spot {
    x: f64,
    baseline: f64,
    anchor: &'static str,
    pub(super) rect: Rect,
}

impl Spot {
    pub(super) fn new(p: P, towards: P, text: &str, bold: bool) -> Spot {
        let w = text_width(text, LABEL_SIZE) * if bold { 1.12 } else { 1.0 };
        let (anchor, x0) = if towards.0 > 0.4 {
            ("start", p.0)
        } else if towards.0 < -0.4 {
            ("end", p.0 - w)
        } else {
            ("middle", p.0 - w / 2.0)
        };
        let baseline = if towards.1 > 0.4 {
            p.1 + LABEL_SIZE * 0.8
        } else if towards.1 < -0.4 {
            p.1 - 2.0
        } else {
            p.1 + LABEL_SIZE * 0.35
        };
        Spot {
            x: p.0,
            baseline,
            anchor,
            rect: (x0, baseline - LABEL_SIZE * 0.8, x0 + w, baseline + 2.0),
        }
    }

    /// The label as SVG text with a white halo.
    pub(super) fn text(
        &self,
        d: &mut Drawing,
        class: &str,
        text: &str,
        fill: &str,
        bold: bool,
    ) -> String {
        let r = self.rect;
        d.extend(&[(r.0, r.1), (r.2, r.3)]);
        let weight = if bold { r#" font-weight="bold""# } else { "" };
        format!(
            r#"<text class="{class}" x="{}" y="{}" font-size="{LABEL_SIZE}" text-anchor="{}" fill="{fill}"{weight} stroke="white" stroke-width="3.5" stroke-linejoin="round" paint-order="stroke">{}</text>
"#,
            f(self.x),
            f(self.baseline),
            self.anchor,
            esc(text)
        )
    }
}

/// What labels must keep clear of.
pub(super) struct Placer<'a> {
    pub(super) nodes: &'a [NodeBox],
    /// Lines with their bounding boxes.
    pub(super) lines: Vec<(Rect, &'a Vec<P>)>,
    pub(super) placed: Vec<Rect>,
}

impl Placer<'_> {
    /// Clear of labels and nodes (lines allowed).
    pub(super) fn clear_of_labels(&self, r: &Rect) -> bool {
        let overlaps = |o: &Rect| r.0 < o.2 && o.0 < r.2 && r.1 < o.3 && o.1 < r.3;
        !self.placed.iter().any(overlaps)
            && !self.nodes.iter().any(|b| {
                let near = (b.c.0.clamp(r.0, r.2), b.c.1.clamp(r.1, r.3));
                b.inside(near, 1.0)
            })
    }

    /// How badly a label at `r` would clash: other labels and nodes count ten, lines one.
    pub(super) fn conflicts(&self, r: &Rect) -> usize {
        let pad = (r.0 - 2.0, r.1 - 2.0, r.2 + 2.0, r.3 + 2.0);
        let overlaps = |o: &&Rect| pad.0 < o.2 && o.0 < pad.2 && pad.1 < o.3 && o.1 < pad.3;
        let labels = self.placed.iter().filter(overlaps).count();
        let nodes = self
            .nodes
            .iter()
            .filter(|b| {
                let near = (b.c.0.clamp(pad.0, pad.2), b.c.1.clamp(pad.1, pad.3));
                b.inside(near, 1.0)
            })
            .count();
        let lines = self
            .lines
            .iter()
            .filter(|(b, l)| overlaps(&b) && l.windows(2).any(|w| segment_hits(w[0], w[1], &pad)))
            .count();
        10 * (labels + nodes) + lines
    }
}

/// The bounding box of a polyline.
pub(super) fn bbox(line: &[P]) -> Rect {
    line.iter().fold(
        (
            f64::INFINITY,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NEG_INFINITY,
        ),
        |r, p| (r.0.min(p.0), r.1.min(p.1), r.2.max(p.0), r.3.max(p.1)),
    )
}

/// Whether the segment `a`–`b` meets the box (Liang–Barsky clipping).
pub(super) fn segment_hits(a: P, b: P, r: &Rect) -> bool {
    let (dx, dy) = (b.0 - a.0, b.1 - a.1);
    let (mut t0, mut t1) = (0.0_f64, 1.0_f64);
    for (p, q) in [
        (-dx, a.0 - r.0),
        (dx, r.2 - a.0),
        (-dy, a.1 - r.1),
        (dy, r.3 - a.1),
    ] {
        if p == 0.0 {
            if q < 0.0 {
                return false;
            }
        } else {
            let t = q / p;
            if p < 0.0 {
                t0 = t0.max(t);
            } else {
                t1 = t1.min(t);
            }
            if t0 > t1 {
                return false;
            }
        }
    }
    true
}
