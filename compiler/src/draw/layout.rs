//! Node placement, deterministic and without external tools.
//!
//! | layout    | used by `auto` for                      | placement |
//! |-----------|-----------------------------------------|-----------|
//! | `ladder`  | ladders                                 | pairs as rows, side 0 left, side 1 right |
//! | `circle`  | rings, and machines whose nodes all have two links | nodes on a circle in ring order (the first embedded ring's, else id order) |
//! | `layered` | machines with switches                  | breadth-first levels from the best-connected switch, top down |
//! | `stress`  | everything else up to [`STRESS_MAX`] nodes (larger: `circle`) | distances on the page follow hop counts in the graph (stress majorisation), so meshes, tori and cubes keep their shape |
//!
//! Positions are in SVG pixels (`y` downwards); the renderers translate them onto the page.

use super::{is_switch, Scene, ShapeHint};
use crate::ids::IdVec;
use crate::machine::{ladder, ring};
use crate::topology::ast::LinkParams;
use schedule_ir::{Machine, NodeId, NodeKind};
use std::collections::VecDeque;
use std::f64::consts::PI;

/// Which layout to use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LayoutKind {
    /// Choose from the machine's shape (see the module table).
    Auto,
    /// Nodes on a circle.
    Circle,
    /// Pairs as rows (ladders only; others fall back to `auto`).
    Ladder,
    /// Breadth-first levels from a switch (or from the best-connected node).
    Layered,
    /// Graph distances as page distances.
    Stress,
}

/// Node positions.
#[derive(Clone, Debug, PartialEq)]
pub struct Layout {
    /// The layout actually used (`auto` resolved).
    pub kind: LayoutKind,
    /// Position of every node, in pixels.
    pub pos: Positions,
}

/// A position per node, in pixels.
pub type Positions = IdVec<NodeId, (f64, f64)>;

/// Every node's neighbours, each once, in id order.
type Adjacency = IdVec<NodeId, Vec<NodeId>>;

/// The largest machine the `stress` layout is used for (it is quadratic in the node count).
pub const STRESS_MAX: usize = 150;

/// Distance between neighbouring nodes on the page, pixels.
const UNIT: f64 = 130.0;

/// Places the nodes of `scene`.
pub fn compute(scene: &Scene, wanted: LayoutKind) -> Layout {
    let m = &scene.machine;
    let n = m.nodes.len();
    let kind = match wanted {
        LayoutKind::Ladder if !matches!(scene.shape, ShapeHint::Ladder { .. }) => auto(scene),
        LayoutKind::Stress if n > STRESS_MAX => LayoutKind::Circle,
        LayoutKind::Auto => auto(scene),
        k => k,
    };
    let pos = match (kind, &scene.shape) {
        (LayoutKind::Ladder, ShapeHint::Ladder { rows }) => ladder_rows(n, rows),
        (LayoutKind::Layered, _) => layered(m),
        (LayoutKind::Stress, _) => stress(m),
        _ => circle(&circle_order(scene)),
    };
    Layout { kind, pos }
}

fn auto(scene: &Scene) -> LayoutKind {
    let m = &scene.machine;
    match scene.shape {
        ShapeHint::Ladder { .. } => LayoutKind::Ladder,
        ShapeHint::Ring => LayoutKind::Circle,
        ShapeHint::Other => {
            let n = m.nodes.len();
            if m.nodes.iter().any(|x| x.kind == NodeKind::Switch) {
                LayoutKind::Layered
            } else if (0..n).all(|i| degree(m, NodeId::new(i)) == 2) || n > STRESS_MAX {
                LayoutKind::Circle
            } else {
                LayoutKind::Stress
            }
        }
    }
}

fn degree(m: &Machine, node: NodeId) -> usize {
    m.links
        .iter()
        .filter(|l| l.a == node || l.b == node)
        .count()
}

/// Recognises a schedule's machine as one topoc generates: a ring or a ladder (same nodes,
/// same links in the same order).
pub fn recognise(m: &Machine) -> ShapeHint {
    let n = m.nodes.len();
    if n < 2
        || n as u64 > crate::machine::build::MAX_NODES
        || m.nodes.iter().any(|x| x.kind != NodeKind::Compute)
    {
        return ShapeHint::Other;
    }
    let ends = |g: &crate::machine::Machine| -> Vec<(NodeId, NodeId)> {
        (0..g.link_count())
            .map(|l| {
                let (a, b) = g.endpoints(schedule_ir::LinkId::new(l));
                (a.min(b), a.max(b))
            })
            .collect()
    };
    let ours: Vec<(NodeId, NodeId)> = m
        .links
        .iter()
        .map(|l| (l.a.min(l.b), l.a.max(l.b)))
        .collect();
    let p = LinkParams::default();
    if ends(&ring::ring("", n, p)) == ours {
        return ShapeHint::Ring;
    }
    if n % 2 == 0 && ends(&ladder::ladder("", n / 2, p, p)) == ours {
        return ShapeHint::Ladder {
            rows: (0..n / 2)
                .map(|k| [NodeId::new(2 * k), NodeId::new(2 * k + 1)])
                .collect(),
        };
    }
    ShapeHint::Other
}

/// Ring order for the circle: the machine's own ring, else the first overlay when it is a
/// cycle through every node, else id order.
fn circle_order(scene: &Scene) -> Vec<NodeId> {
    let n = scene.machine.nodes.len();
    if scene.shape != ShapeHint::Ring {
        if let Some(o) = scene.overlays.first() {
            let order: Vec<NodeId> = o.edges.iter().map(|h| h.from).collect();
            let mut seen: IdVec<NodeId, bool> = IdVec::filled(false, n);
            // An overlay's nodes come from a schedule file: looked up, not trusted.
            let cycle = order.len() == n
                && o.edges.windows(2).all(|w| w[0].to == w[1].from)
                && order
                    .iter()
                    .all(|&x| seen.get_mut(x).is_some_and(|s| !std::mem::replace(s, true)));
            if cycle {
                return order;
            }
        }
    }
    (0..n).map(NodeId::new).collect()
}

/// Nodes on a circle, the first at the top, clockwise.
fn circle(order: &[NodeId]) -> Positions {
    let n = order.len();
    let r = (UNIT * n as f64 / (2.0 * PI)).max(UNIT);
    let mut pos = IdVec::filled((0.0, 0.0), n);
    for (i, &node) in order.iter().enumerate() {
        let a = -PI / 2.0 + 2.0 * PI * i as f64 / n.max(1) as f64;
        if let Some(p) = pos.get_mut(node) {
            *p = (round(r * a.cos()), round(r * a.sin()));
        }
    }
    pos
}

/// Pairs as rows.
fn ladder_rows(n: usize, rows: &[[NodeId; 2]]) -> Positions {
    const COLUMN: f64 = 300.0;
    const ROW: f64 = 150.0;
    let mut pos = IdVec::filled((0.0, 0.0), n);
    for (k, row) in rows.iter().enumerate() {
        for (s, &node) in row.iter().enumerate() {
            if let Some(p) = pos.get_mut(node) {
                *p = (s as f64 * COLUMN, k as f64 * ROW);
            }
        }
    }
    pos
}

/// Breadth-first levels from the switch with the most links (ties: lowest id), or from the
/// node with the most links when there is no switch. Within a level, nodes follow the mean
/// position of their neighbours in the level above.
fn layered(m: &Machine) -> Positions {
    const ROW: f64 = 140.0;
    const COLUMN: f64 = 110.0;
    let n = m.nodes.len();
    if n == 0 {
        return IdVec::new();
    }
    // Every table here has a slot per node, and `adjacency` keeps only links between nodes.
    let adj = adjacency(m);
    let has_switch = adj.ids().any(|i| is_switch(m, i));
    let root = adj
        .ids()
        .filter(|&i| !has_switch || is_switch(m, i))
        .max_by_key(|&i| (adj[i].len(), std::cmp::Reverse(i)))
        .unwrap_or(NodeId(0));
    let level = bfs(&adj, root);
    let deepest = level
        .iter()
        .copied()
        .filter(|&l| l != usize::MAX)
        .max()
        .unwrap_or(0);
    let mut levels: Vec<Vec<NodeId>> = vec![Vec::new(); deepest + 2];
    for (i, &l) in level.iter_enumerated() {
        let l = if l == usize::MAX { deepest + 1 } else { l };
        levels[l].push(i);
    }
    let mut x: IdVec<NodeId, f64> = IdVec::filled(0.0, n);
    let mut pos = IdVec::filled((0.0, 0.0), n);
    for (l, nodes) in levels.iter_mut().enumerate() {
        if l > 0 {
            let key = |i: NodeId| -> f64 {
                let above: Vec<f64> = adj[i]
                    .iter()
                    .filter(|&&j| level[j] != usize::MAX && level[j] + 1 == l)
                    .map(|&j| x[j])
                    .collect();
                if above.is_empty() {
                    f64::MAX
                } else {
                    above.iter().sum::<f64>() / above.len() as f64
                }
            };
            nodes.sort_by(|&a, &b| key(a).total_cmp(&key(b)).then(a.cmp(&b)));
        }
        let width = (nodes.len().saturating_sub(1)) as f64 * COLUMN;
        for (k, &i) in nodes.iter().enumerate() {
            x[i] = k as f64 * COLUMN - width / 2.0;
            pos[i] = (x[i], l as f64 * ROW);
        }
    }
    pos
}

/// Stress majorisation: page distances approach `UNIT` × hop count. Starts from the circle
/// in id order and runs a fixed number of rounds, so it is deterministic.
fn stress(m: &Machine) -> Positions {
    let adj = adjacency(m);
    let hops: IdVec<NodeId, IdVec<NodeId, usize>> = adj.ids().map(|i| bfs(&adj, i)).collect();
    let order: Vec<NodeId> = adj.ids().collect();
    let mut pos = circle(&order);
    // Break the circle's symmetry a little so symmetric graphs do not stay on it.
    for (i, p) in pos.iter_mut().enumerate() {
        let k = (i * 7919 % 97) as f64 / 97.0 - 0.5;
        *p = (p.0 + 13.0 * k, p.1 - 11.0 * k);
    }
    for _ in 0..300 {
        let mut next = pos.clone();
        for i in adj.ids() {
            let (mut sx, mut sy, mut sw) = (0.0, 0.0, 0.0);
            for j in adj.ids() {
                let d = hops[i][j];
                if i == j || d == usize::MAX {
                    continue;
                }
                let target = UNIT * d as f64;
                let w = 1.0 / (target * target);
                let (dx, dy) = (pos[i].0 - pos[j].0, pos[i].1 - pos[j].1);
                let now = dx.hypot(dy).max(1e-6);
                sx += w * (pos[j].0 + target * dx / now);
                sy += w * (pos[j].1 + target * dy / now);
                sw += w;
            }
            if sw > 0.0 {
                next[i] = (sx / sw, sy / sw);
            }
        }
        pos = next;
    }
    // Stretch the result until no two nodes are closer than `UNIT`.
    let mut closest = f64::INFINITY;
    let all = pos.as_slice();
    for (i, p) in all.iter().enumerate() {
        for q in &all[i + 1..] {
            closest = closest.min((p.0 - q.0).hypot(p.1 - q.1));
        }
    }
    let k = if closest.is_finite() && closest > 1e-3 {
        (UNIT / closest).clamp(1.0, 4.0)
    } else {
        1.0
    };
    pos.into_iter()
        .map(|(x, y)| (round(k * x), round(k * y)))
        .collect()
}

fn adjacency(m: &Machine) -> Adjacency {
    let n = m.nodes.len();
    let mut adj: Adjacency = IdVec::filled(Vec::new(), n);
    // A schedule's machine comes from a file: a link to a node it does not have is skipped.
    for l in &m.links {
        let (a, b) = (l.a, l.b);
        if a.index() < n && b.index() < n && !adj[a].contains(&b) {
            adj[a].push(b);
            adj[b].push(a);
        }
    }
    for a in &mut adj {
        a.sort_unstable();
    }
    adj
}

/// Hop counts from `from` (`usize::MAX`: unreachable).
fn bfs(adj: &Adjacency, from: NodeId) -> IdVec<NodeId, usize> {
    let mut d: IdVec<NodeId, usize> = IdVec::filled(usize::MAX, adj.len());
    let mut queue = VecDeque::from([from]);
    if let Some(x) = d.get_mut(from) {
        *x = 0;
    }
    while let Some(i) = queue.pop_front() {
        for &j in &adj[i] {
            if d[j] == usize::MAX {
                d[j] = d[i] + 1;
                queue.push_back(j);
            }
        }
    }
    d
}

/// Rounds to a tenth of a pixel, so that output does not depend on the last bits of `sin`.
fn round(x: f64) -> f64 {
    let r = (x * 10.0).round() / 10.0;
    if r == 0.0 {
        0.0
    } else {
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_rings_and_ladders_are_recognised_from_their_links() {
        let p = LinkParams::default();
        assert_eq!(recognise(&ring::ring("r", 5, p).to_ir()), ShapeHint::Ring);
        assert_eq!(
            recognise(&ladder::ladder("l", 3, p, p).to_ir()),
            ShapeHint::Ladder {
                rows: vec![
                    [NodeId(0), NodeId(1)],
                    [NodeId(2), NodeId(3)],
                    [NodeId(4), NodeId(5)]
                ]
            }
        );
        // The same links in another order are not the generator's ladder.
        let mut m = ladder::ladder("l", 3, p, p).to_ir();
        m.links.swap(0, 7);
        assert_eq!(recognise(&m), ShapeHint::Other);
    }

    #[test]
    fn stress_keeps_nodes_apart() {
        let p = LinkParams::default();
        let m = ladder::ladder("l", 3, p, p).to_ir();
        let pos = stress(&m);
        let all = pos.as_slice();
        for i in 0..all.len() {
            for j in i + 1..all.len() {
                let d = (all[i].0 - all[j].0).hypot(all[i].1 - all[j].1);
                assert!(d >= UNIT - 1.0, "{i} and {j} are {d} apart");
            }
        }
        assert_eq!(pos, stress(&m), "deterministic");
    }
}
