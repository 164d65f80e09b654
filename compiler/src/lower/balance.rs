//! LP bandwidth balancing: how much of the vector each embedding should carry.
//!
//! When a machine offers several embeddings (rings, trees, …) over links of different
//! bandwidth, giving each the same share leaves the fast ones idle while the slowest finishes.
//! Each embedding `e` is described by the time every link direction `d` needs to carry its
//! traffic if `e` carried the whole vector: `cost[e][d]` seconds. With shares `x_e`, direction
//! `d` is busy for `Σ_e x_e·cost[e][d]`; the linear program
//!
//! ```text
//! minimise t   subject to   Σ_e x_e·cost[e][d] ≤ t  for every direction d,
//!                           Σ_e x_e = 1,  x_e ≥ 0
//! ```
//!
//! gives the shares that finish soonest. It is solved with good_lp's pure-Rust `microlp`
//! back end. For link-disjoint embeddings the optimum is known in closed form (shares
//! proportional to each embedding's speed), which the tests use to check the solver.

use crate::ids::{Id, IdVec};
use good_lp::{variable, variables, Expression, Solution, SolverModel};
use schedule_ir::DirectionId;
use std::collections::BTreeMap;

/// The traffic of one embedding: seconds per link direction when it carries everything.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Load {
    /// `direction → seconds`.
    pub seconds: BTreeMap<DirectionId, f64>,
}

/// The optimal shares, one per embedding (`E`, the embedding's id: a ring, a tree), summing
/// to 1; `None` if the program could not be solved (it always can when every embedding has a
/// finite, positive cost somewhere).
pub fn balance<E: Id>(loads: &IdVec<E, Load>) -> Option<IdVec<E, f64>> {
    match loads.len() {
        0 => return Some(IdVec::new()),
        1 => return Some(IdVec::filled(1.0, 1)),
        _ => {}
    }
    let mut vars = variables!();
    let shares: Vec<_> = loads
        .iter()
        .map(|_| vars.add(variable().min(0.0).max(1.0)))
        .collect();
    let t = vars.add(variable().min(0.0));
    let largest = loads
        .iter()
        .flat_map(|l| l.seconds.values())
        .copied()
        .fold(0.0, f64::max);
    let scale = unit_scale(largest);
    let mut by_direction: BTreeMap<DirectionId, Expression> = BTreeMap::new();
    for (load, &x) in loads.iter().zip(&shares) {
        for (&d, &s) in &load.seconds {
            if !(s.is_finite() && s >= 0.0) {
                return None;
            }
            *by_direction.entry(d).or_default() += s * scale * x;
        }
    }
    let total: Expression = shares.iter().copied().sum();
    let mut model = vars.minimise(t).using(good_lp::microlp).with(total.eq(1.0));
    for (_, busy) in by_direction {
        model = model.with(busy.leq(t));
    }
    let solution = model.solve().ok()?;
    let mut x: IdVec<E, f64> = shares.iter().map(|&v| solution.value(v).max(0.0)).collect();
    // Renormalise away the solver's rounding so the shares sum to exactly 1.
    let sum: f64 = x.iter().sum();
    if !(sum.is_finite() && sum > 0.0) {
        return None;
    }
    x.iter_mut().for_each(|v| *v /= sum);
    Some(x)
}

/// The busiest direction's seconds when each embedding carries its share: the time the shares
/// leave the slowest direction, what [`balance`] minimises.
pub fn busiest<E: Id>(loads: &IdVec<E, Load>, shares: &IdVec<E, f64>) -> f64 {
    let mut busy: BTreeMap<DirectionId, f64> = BTreeMap::new();
    for (load, &x) in loads.iter().zip(shares.iter()) {
        for (&d, &s) in &load.seconds {
            *busy.entry(d).or_default() += s * x;
        }
    }
    busy.into_values().fold(0.0, f64::max)
}

/// Shares in proportion to each embedding's own speed (the inverse of its busiest direction's
/// seconds): the optimum of [`balance`] when no two embeddings share a direction, found
/// without solving anything. An embedding that uses no direction gets no share.
pub fn by_speed<E: Id>(loads: &IdVec<E, Load>) -> IdVec<E, f64> {
    let speed: IdVec<E, f64> = loads
        .iter()
        .map(|l| {
            let busiest = l.seconds.values().copied().fold(0.0, f64::max);
            if busiest.is_finite() && busiest > 0.0 {
                1.0 / busiest
            } else {
                0.0
            }
        })
        .collect();
    let total: f64 = speed.iter().sum();
    speed
        .iter()
        .map(|s| if total > 0.0 { s / total } else { 0.0 })
        .collect()
}

/// The factor the program's costs are multiplied by: 1 when the largest cost is within
/// [`SOLVER_RANGE`] of 1, else the power of two that brings it into `[0.5, 1)`. The solver's
/// tolerances are absolute (about 1e-9), so costs far below 1 — seconds per byte are around
/// 1e-11 — would all look like zero to it and any shares would pass for optimal. A power of two
/// rescales exactly; costs already in range are left alone, because a rescaling, exact as it
/// is, changes which of several equally good solutions the solver returns (a tree packing's
/// seconds per gigabyte, 0.002 to 0.08 on real links, are in range).
fn unit_scale(largest: f64) -> f64 {
    if !(largest.is_finite() && largest > 0.0) {
        return 1.0;
    }
    if (1.0 / SOLVER_RANGE..=SOLVER_RANGE).contains(&largest) {
        return 1.0;
    }
    let exponent = largest.log2().floor() as i32 + 1;
    2f64.powi(-exponent.clamp(-1000, 1000))
}

/// How far from 1 the largest cost may be before [`unit_scale`] rescales: `2^10` either way, six
/// orders of magnitude clear of the solver's tolerance below.
const SOLVER_RANGE: f64 = 1024.0;

/// Splits `elements` among embeddings in proportion to `shares`, in whole elements, exactly
/// (largest remainders; ties to the earlier embedding).
pub fn apportion<E: Id>(elements: u64, shares: &IdVec<E, f64>) -> IdVec<E, u64> {
    let exact: IdVec<E, f64> = shares.iter().map(|s| s * elements as f64).collect();
    let mut out: IdVec<E, u64> = exact.iter().map(|e| e.floor() as u64).collect();
    let assigned: u64 = out.iter().sum();
    let mut order: Vec<E> = shares.ids().collect();
    let by_remainder = |a: &E, b: &E| {
        let (ra, rb) = (exact[*a] - exact[*a].floor(), exact[*b] - exact[*b].floor());
        rb.total_cmp(&ra).then(a.cmp(b))
    };
    let extra = elements.saturating_sub(assigned) as usize;
    if extra < order.len() {
        // Only which `extra` come first matters: a selection, not a sort (`trees` apportions
        // every pipeline depth up to thousands to bound them).
        if extra > 0 {
            order.select_nth_unstable_by(extra - 1, by_remainder);
        }
        order.truncate(extra);
    } else {
        order.sort_by(by_remainder);
    }
    for &i in order.iter().cycle().take(extra) {
        out[i] += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::ids::TreeId;

    fn load(pairs: &[(usize, f64)]) -> Load {
        Load {
            seconds: pairs
                .iter()
                .map(|&(d, s)| (<DirectionId as Id>::from_index(d), s))
                .collect(),
        }
    }

    fn loads(of: &[Load]) -> IdVec<TreeId, Load> {
        of.iter().cloned().collect()
    }

    fn shares(of: &[f64]) -> IdVec<TreeId, f64> {
        of.iter().copied().collect()
    }

    #[test]
    fn disjoint_embeddings_get_shares_proportional_to_speed() {
        // Embedding 0 is twice as fast as embedding 1 on its own links.
        let shares = balance(&loads(&[
            load(&[(0, 1.0), (1, 1.0)]),
            load(&[(2, 2.0), (3, 2.0)]),
        ]))
        .expect("solvable");
        assert!((shares[TreeId(0)] - 2.0 / 3.0).abs() < 1e-6, "{shares:?}");
        assert!((shares[TreeId(1)] - 1.0 / 3.0).abs() < 1e-6, "{shares:?}");
    }

    #[test]
    fn a_shared_link_is_balanced_too() {
        // Both embeddings cross direction 0; embedding 1 also uses a slow direction 1.
        let shares =
            balance(&loads(&[load(&[(0, 1.0)]), load(&[(0, 1.0), (1, 3.0)])])).expect("ok");
        // Best: everything on embedding 0 (t = 1); any share on 1 costs 3x on direction 1.
        assert!((shares[TreeId(0)] - 1.0).abs() < 1e-6, "{shares:?}");
    }

    #[test]
    fn equal_embeddings_share_equally() {
        let e = load(&[(0, 1.0)]);
        let f = load(&[(1, 1.0)]);
        let shares = balance(&loads(&[e.clone(), f.clone(), load(&[(2, 1.0)])])).expect("ok");
        for s in shares {
            assert!((s - 1.0 / 3.0).abs() < 1e-6);
        }
    }

    #[test]
    fn costs_of_any_magnitude_are_balanced_alike() {
        // Seconds per byte on 100 Gbit/s links are 8e-11: far below the solver's tolerances
        // unless rescaled. Embedding 1 is twice as fast as embedding 0 at any scale.
        for unit in [8e-11, 1.0, 8e6] {
            let shares = balance(&loads(&[
                load(&[(0, 2.0 * unit), (1, 2.0 * unit)]),
                load(&[(2, unit), (3, unit)]),
            ]))
            .expect("solvable");
            assert!(
                (shares[TreeId(0)] - 1.0 / 3.0).abs() < 1e-6,
                "{unit}: {shares:?}"
            );
            assert!(
                (shares[TreeId(1)] - 2.0 / 3.0).abs() < 1e-6,
                "{unit}: {shares:?}"
            );
        }
        assert_eq!(unit_scale(0.75), 1.0);
        assert_eq!(unit_scale(3.0), 1.0, "in range: left alone");
        assert_eq!(unit_scale(3000.0), 1.0 / 4096.0);
        assert_eq!(unit_scale(8e-11), 2f64.powi(33));
        assert_eq!(unit_scale(0.0), 1.0);
    }

    #[test]
    fn shares_by_speed_are_the_optimum_for_disjoint_embeddings() {
        let disjoint = loads(&[
            load(&[(0, 2.0), (1, 1.0)]),
            load(&[(2, 1.0), (3, 1.0)]),
            load(&[(4, 4.0)]),
        ]);
        let quick = by_speed(&disjoint);
        let solved = balance(&disjoint).expect("solvable");
        for (q, s) in quick.iter().zip(solved.iter()) {
            assert!((q - s).abs() < 1e-6, "{quick:?} against {solved:?}");
        }
        assert!((quick[TreeId(1)] - 4.0 / 7.0).abs() < 1e-12, "{quick:?}");
    }

    #[test]
    fn apportion_is_exact() {
        let split = |n: u64, of: &[f64]| apportion(n, &shares(of)).into_raw();
        assert_eq!(split(10, &[2.0 / 3.0, 1.0 / 3.0]), vec![7, 3]);
        assert_eq!(split(3, &[0.25, 0.25, 0.25, 0.25]), vec![1, 1, 1, 0]);
        assert_eq!(split(0, &[0.5, 0.5]), vec![0, 0]);
        assert_eq!(split(1_000_003, &[0.5, 0.5]).iter().sum::<u64>(), 1_000_003);
    }
}
