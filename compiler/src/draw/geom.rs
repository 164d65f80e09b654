//! Plane geometry for the SVG renderer: points, polylines, offsets and trimming.
//!
//! Coordinates are SVG's: `x` to the right, `y` downwards. "Right of travel" along a path is
//! therefore `(-dy, dx)`.

/// A point.
pub type P = (f64, f64);

pub fn add(a: P, b: P) -> P {
    (a.0 + b.0, a.1 + b.1)
}

pub fn sub(a: P, b: P) -> P {
    (a.0 - b.0, a.1 - b.1)
}

pub fn scale(a: P, k: f64) -> P {
    (a.0 * k, a.1 * k)
}

pub fn len(a: P) -> f64 {
    a.0.hypot(a.1)
}

pub fn dist(a: P, b: P) -> f64 {
    len(sub(a, b))
}

/// The unit vector along `a`, or `(1, 0)` for a zero vector.
pub fn unit(a: P) -> P {
    let l = len(a);
    if l > 1e-9 {
        scale(a, 1.0 / l)
    } else {
        (1.0, 0.0)
    }
}

/// The unit normal to the right of travel along `a`.
pub fn right(a: P) -> P {
    let u = unit(a);
    (-u.1, u.0)
}

/// The path from `p` to `q` that bulges `bulge` to the right of travel at its middle: a
/// straight segment when `bulge` is zero, else a sampled quadratic Bézier curve.
pub fn curve(p: P, q: P, bulge: f64) -> Vec<P> {
    if bulge.abs() < 1e-9 {
        return vec![p, q];
    }
    // A quadratic curve reaches half of its control point's offset at its middle.
    let control = add(scale(add(p, q), 0.5), scale(right(sub(q, p)), 2.0 * bulge));
    const SAMPLES: usize = 40;
    (0..=SAMPLES)
        .map(|i| {
            let t = i as f64 / SAMPLES as f64;
            let u = 1.0 - t;
            (
                u * u * p.0 + 2.0 * u * t * control.0 + t * t * q.0,
                u * u * p.1 + 2.0 * u * t * control.1 + t * t * q.1,
            )
        })
        .collect()
}

/// A straight segment cut into `parts` pieces (other polylines unchanged), so that offsets
/// and trimming have vertices to work with.
pub fn densify(path: &[P], parts: usize) -> Vec<P> {
    match path {
        [p, q] => (0..=parts)
            .map(|i| add(*p, scale(sub(*q, *p), i as f64 / parts.max(1) as f64)))
            .collect(),
        _ => path.to_vec(),
    }
}

/// The distance from `c` to the polyline.
pub fn dist_to(path: &[P], c: P) -> f64 {
    let mut best = f64::INFINITY;
    for w in path.windows(2) {
        let (a, b) = (w[0], w[1]);
        let ab = sub(b, a);
        let l2 = ab.0 * ab.0 + ab.1 * ab.1;
        let t = if l2 > 0.0 {
            (((c.0 - a.0) * ab.0 + (c.1 - a.1) * ab.1) / l2).clamp(0.0, 1.0)
        } else {
            0.0
        };
        best = best.min(dist(c, add(a, scale(ab, t))));
    }
    if path.len() == 1 {
        best = dist(path[0], c);
    }
    best
}

/// The polyline moved `by` to the right of travel (each vertex along the normal of the
/// segments meeting there).
pub fn offset(path: &[P], by: f64) -> Vec<P> {
    let n = path.len();
    if n < 2 {
        return path.to_vec();
    }
    (0..n)
        .map(|i| {
            let before = if i > 0 {
                sub(path[i], path[i - 1])
            } else {
                (0.0, 0.0)
            };
            let after = if i + 1 < n {
                sub(path[i + 1], path[i])
            } else {
                (0.0, 0.0)
            };
            let dir = add(unit_or_zero(before), unit_or_zero(after));
            add(path[i], scale(right(dir), by))
        })
        .collect()
}

fn unit_or_zero(a: P) -> P {
    if len(a) > 1e-9 {
        unit(a)
    } else {
        (0.0, 0.0)
    }
}

/// The part of the polyline after it first leaves `inside_start` and before it last enters
/// `inside_end`; crossings are found by bisection. `None` when nothing is left.
pub fn trim(
    path: &[P],
    inside_start: impl Fn(P) -> bool,
    inside_end: impl Fn(P) -> bool,
) -> Option<Vec<P>> {
    let n = path.len();
    let first_out = (0..n).find(|&i| !inside_start(path[i]))?;
    let last_out = (0..n).rev().find(|&i| !inside_end(path[i]))?;
    if first_out > last_out {
        return None;
    }
    let mut out = Vec::with_capacity(last_out - first_out + 3);
    if first_out > 0 {
        out.push(crossing(
            path[first_out - 1],
            path[first_out],
            &inside_start,
        ));
    }
    out.extend_from_slice(&path[first_out..=last_out]);
    if last_out + 1 < n {
        out.push(crossing(path[last_out + 1], path[last_out], &inside_end));
    }
    (out.len() >= 2 && length(&out) > 1.0).then_some(out)
}

/// The boundary point between `a` (inside) and `b` (outside).
fn crossing(mut a: P, mut b: P, inside: &impl Fn(P) -> bool) -> P {
    for _ in 0..30 {
        let m = scale(add(a, b), 0.5);
        if inside(m) {
            a = m;
        } else {
            b = m;
        }
    }
    b
}

/// The polyline's length.
pub fn length(path: &[P]) -> f64 {
    path.windows(2).map(|w| dist(w[0], w[1])).sum()
}

/// The point at fraction `t` of the polyline's length, and the direction of travel there.
pub fn at(path: &[P], t: f64) -> (P, P) {
    let total = length(path);
    let mut left = total * t.clamp(0.0, 1.0);
    for w in path.windows(2) {
        let l = dist(w[0], w[1]);
        if left <= l && l > 0.0 {
            return (add(w[0], scale(sub(w[1], w[0]), left / l)), sub(w[1], w[0]));
        }
        left -= l;
    }
    match path {
        [.., a, b] => (*b, sub(*b, *a)),
        [a] => (*a, (1.0, 0.0)),
        [] => ((0.0, 0.0), (1.0, 0.0)),
    }
}

/// The polyline with its last `by` units removed (for the arrowhead).
pub fn shorten_end(path: &[P], by: f64) -> Vec<P> {
    let total = length(path);
    if total <= by {
        return path.to_vec();
    }
    let keep = total - by;
    let mut out = vec![];
    let mut walked = 0.0;
    for w in path.windows(2) {
        out.push(w[0]);
        let l = dist(w[0], w[1]);
        if walked + l >= keep {
            let f = if l > 0.0 { (keep - walked) / l } else { 0.0 };
            out.push(add(w[0], scale(sub(w[1], w[0]), f)));
            return out;
        }
        walked += l;
    }
    path.to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: P, b: P) -> bool {
        dist(a, b) < 1e-6
    }

    #[test]
    fn right_of_travel_is_clockwise_on_screen() {
        // Travelling east on a y-down page, the right-hand side is south.
        assert!(close(right((1.0, 0.0)), (0.0, 1.0)));
        let moved = offset(&[(0.0, 0.0), (10.0, 0.0)], 3.0);
        assert!(close(moved[0], (0.0, 3.0)) && close(moved[1], (10.0, 3.0)));
    }

    #[test]
    fn a_bulging_curve_reaches_its_bulge_at_the_middle() {
        let c = curve((0.0, 0.0), (100.0, 0.0), 20.0);
        assert!(close(c[c.len() / 2], (50.0, 20.0)));
        assert_eq!(curve((0.0, 0.0), (100.0, 0.0), 0.0).len(), 2);
    }

    #[test]
    fn trimming_cuts_at_both_outlines() {
        let line = densify(&[(0.0, 0.0), (100.0, 0.0)], 10);
        let inside = |c: P| move |p: P| dist(p, c) < 20.0;
        let t = trim(&line, inside((0.0, 0.0)), inside((100.0, 0.0))).expect("something left");
        assert!((t[0].0 - 20.0).abs() < 1e-3 && (t[t.len() - 1].0 - 80.0).abs() < 1e-3);
        let short = densify(&[(0.0, 0.0), (30.0, 0.0)], 10);
        assert!(trim(&short, inside((0.0, 0.0)), inside((30.0, 0.0))).is_none());
        assert!((length(&shorten_end(&t, 10.0)) - 50.0).abs() < 1e-6);
        assert!(close(at(&t, 0.5).0, (50.0, 0.0)));
    }

    #[test]
    fn distance_to_a_polyline() {
        assert!((dist_to(&[(0.0, 0.0), (10.0, 0.0)], (5.0, 4.0)) - 4.0).abs() < 1e-9);
        assert!((dist_to(&[(0.0, 0.0), (10.0, 0.0)], (13.0, 4.0)) - 5.0).abs() < 1e-9);
    }
}
