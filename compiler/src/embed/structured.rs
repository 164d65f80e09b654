//! Two link-disjoint Hamiltonian rings built from a machine's structure: tori, hypercubes and
//! full meshes. Search finds rings on small machines, but on large or higher-dimensional tori
//! and hypercubes it often finds only one ring, or none within its budget; these constructions
//! take time linear in the machine. Like every embedding, their rings are proved by
//! [`super::prove_rings`] before use.
//!
//! **Tori and hypercubes: diagonal rings.** Split the dimensions into two groups, A and B, and
//! take a Hamiltonian cycle through each group's sub-grid (`C_A` of length `m`, `C_B` of length
//! `n`; a reflected Gray code). Node `(i, j)` — position `i` on `C_A`, `j` on `C_B` — is then
//! linked to `(i + 1, j)` and `(i, j + 1)`: the machine contains the 2-D torus `C_m × C_n`. In
//! it, let ring 1 step from `(i, j)` to `(i, j + 1)` when `(i + j) mod d < r` and to
//! `(i + 1, j)` otherwise, with `d = gcd(m, n)`; ring 2 takes the other step everywhere. Every
//! node is entered by exactly one step of each ring (the choice depends only on `i + j`), so
//! each ring is a union of cycles and the two use disjoint links. Every `d` steps a ring moves
//! by `(d - r, r)`; it is a single Hamiltonian cycle exactly when that vector generates the
//! nodes with `i + j ≡ 0 (mod d)`, which is checked by walking the ring. For power-of-two
//! sizes (every hypercube) and square tori `r = 1` works; a split for which no `r` works (e.g.
//! `3 × 6`) leaves the machine to the search.
//!
//! **Full meshes.** Ring 1 visits `N0, N1, …` in order; ring 2 steps by the smallest `k ≥ 2`
//! prime to the node count (`N0, Nk, N2k, …`), which shares no link with ring 1 as long as
//! `k < n - 1`: from seven nodes on.

use super::Ring;
use crate::machine::Machine;
use schedule_ir::{LinkId, NodeId};
use std::collections::BTreeMap;

/// Most dimension splits tried before giving up on a torus.
const MAX_SPLITS: usize = 256;

/// Two rings of a torus of sizes `dims` whose node at coordinates `c` is `node_of(c)`, or
/// `None` when no split of the dimensions gives them.
pub fn grid_rings(
    machine: &Machine,
    dims: &[usize],
    node_of: &dyn Fn(&[usize]) -> NodeId,
) -> Option<Vec<Ring>> {
    let k = dims.len();
    if !(2..=16).contains(&k) {
        return None;
    }
    // Splits as bit masks of group A (always holding dimension 0), most balanced first.
    let total: f64 = dims.iter().map(|&d| (d as f64).ln()).sum();
    let mut splits: Vec<(u64, u32)> = (0u32..(1 << (k - 1)))
        .map(|rest| {
            let mask = (rest << 1) | 1;
            let a: f64 = (0..k)
                .filter(|i| mask & (1 << i) != 0)
                .map(|i| (dims[i] as f64).ln())
                .sum();
            (((2.0 * a - total).abs() * 1e6) as u64, mask)
        })
        .collect();
    splits.sort();
    let links = link_map(machine);
    for &(_, mask) in splits.iter().take(MAX_SPLITS) {
        let group_a: Vec<usize> = (0..k).filter(|i| mask & (1 << i) != 0).collect();
        let group_b: Vec<usize> = (0..k).filter(|i| mask & (1 << i) == 0).collect();
        if group_b.is_empty() {
            continue;
        }
        let sizes = |g: &[usize]| g.iter().map(|&i| dims[i]).collect::<Vec<_>>();
        let (Some(ca), Some(cb)) = (cycle(&sizes(&group_a)), cycle(&sizes(&group_b))) else {
            continue;
        };
        let (m, n) = (ca.len(), cb.len());
        if m < 3 || n < 3 {
            continue;
        }
        let Some(r) = diagonal_r(m, n) else {
            continue;
        };
        let node = |i: usize, j: usize| {
            let mut c = vec![0; k];
            for (&dim, &x) in group_a.iter().zip(&ca[i]) {
                c[dim] = x;
            }
            for (&dim, &x) in group_b.iter().zip(&cb[j]) {
                c[dim] = x;
            }
            node_of(&c)
        };
        let d = gcd(m, n);
        let rings = [true, false].map(|first| {
            let mut nodes = Vec::with_capacity(m * n);
            let (mut i, mut j) = (0, 0);
            for _ in 0..m * n {
                nodes.push(node(i, j));
                if ((i + j) % d < r) == first {
                    j = (j + 1) % n;
                } else {
                    i = (i + 1) % m;
                }
            }
            nodes
        });
        if let [Some(r1), Some(r2)] = rings.map(|nodes| direct_ring(&links, nodes)) {
            return Some(vec![r1, r2]);
        }
    }
    None
}

/// Two rings of a full mesh of `n >= 7` nodes, `None` for smaller meshes.
pub fn full_mesh_rings(machine: &Machine) -> Option<Vec<Ring>> {
    let n = machine.node_count();
    let k = (2..n.saturating_sub(1)).find(|&k| gcd(k, n) == 1)?;
    let links = link_map(machine);
    let r1 = direct_ring(&links, (0..n).map(NodeId::new).collect())?;
    let r2 = direct_ring(&links, (0..n).map(|i| NodeId::new(i * k % n)).collect())?;
    Some(vec![r1, r2])
}

/// The first link joining each pair of nodes, keyed by (lower, higher) node id.
fn link_map(machine: &Machine) -> BTreeMap<(NodeId, NodeId), LinkId> {
    let mut map = BTreeMap::new();
    for j in (0..machine.link_count()).rev() {
        let (a, b) = machine.endpoints(LinkId::new(j));
        map.insert((a.min(b), a.max(b)), LinkId::new(j));
    }
    map
}

/// The ring through `nodes` in order over the links joining consecutive nodes.
fn direct_ring(links: &BTreeMap<(NodeId, NodeId), LinkId>, nodes: Vec<NodeId>) -> Option<Ring> {
    let n = nodes.len();
    let ring_links = (0..n)
        .map(|i| {
            let (a, b) = (nodes[i], nodes[(i + 1) % n]);
            links.get(&(a.min(b), a.max(b))).copied()
        })
        .collect::<Option<Vec<_>>>()?;
    Some(Ring::direct(nodes, ring_links))
}

/// The smallest `r` for which both diagonal rings of `C_m × C_n` are Hamiltonian.
fn diagonal_r(m: usize, n: usize) -> Option<usize> {
    let d = gcd(m, n);
    (1..d).find(|&r| {
        [true, false].iter().all(|&first| {
            let (mut i, mut j, mut len) = (0, 0, 0);
            loop {
                if ((i + j) % d < r) == first {
                    j = (j + 1) % n;
                } else {
                    i = (i + 1) % m;
                }
                len += 1;
                if (i, j) == (0, 0) {
                    return len == m * n;
                }
            }
        })
    })
}

/// A Hamiltonian cycle through the grid of sizes `dims` (coordinates, in order), with wrap
/// links in every dimension of size 3 or more and one link per pair in a dimension of size 2.
/// The reflected Gray code with an even dimension outermost ends one step from where it
/// started; with every size odd (and more than one dimension) there is none here.
fn cycle(dims: &[usize]) -> Option<Vec<Vec<usize>>> {
    if let [only] = dims {
        return (*only >= 3).then(|| (0..*only).map(|x| vec![x]).collect());
    }
    let outer = dims.iter().position(|&d| d % 2 == 0)?;
    let mut order: Vec<usize> = vec![outer];
    order.extend((0..dims.len()).filter(|&i| i != outer));
    let sizes: Vec<usize> = order.iter().map(|&i| dims[i]).collect();
    Some(
        gray(&sizes)
            .into_iter()
            .map(|p| {
                let mut c = vec![0; dims.len()];
                for (&dim, &x) in order.iter().zip(&p) {
                    c[dim] = x;
                }
                c
            })
            .collect(),
    )
}

/// The reflected mixed-radix Gray code: every point of the grid once, consecutive points one
/// step apart in one coordinate (no wrap).
fn gray(sizes: &[usize]) -> Vec<Vec<usize>> {
    let Some((&first, rest)) = sizes.split_first() else {
        return vec![Vec::new()];
    };
    let inner = gray(rest);
    let mut out = Vec::with_capacity(first * inner.len());
    for x in 0..first {
        let mut push = |p: &Vec<usize>| {
            let mut v = Vec::with_capacity(sizes.len());
            v.push(x);
            v.extend_from_slice(p);
            out.push(v);
        };
        if x % 2 == 0 {
            inner.iter().for_each(&mut push);
        } else {
            inner.iter().rev().for_each(&mut push);
        }
    }
    out
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::embed::prove_rings;
    use crate::machine::{hypercube, mesh, torus};
    use crate::topology::ast::LinkParams;

    fn torus_rings(dims: &[usize]) -> Option<Vec<Ring>> {
        let m = torus::torus("t", dims, LinkParams::default());
        let rings = grid_rings(&m, dims, &|c| NodeId::new(torus::index(dims, c)))?;
        assert_eq!(prove_rings(&m, &rings), Ok(()), "{dims:?}");
        Some(rings)
    }

    #[test]
    fn tori_get_two_proved_rings() {
        for dims in [
            &[4, 4][..],
            &[16, 16],
            &[8, 4],
            &[4, 4, 4],
            &[3, 3],
            &[6, 4],
            &[2, 2, 4],
            &[5, 5],
        ] {
            assert_eq!(torus_rings(dims).map(|r| r.len()), Some(2), "{dims:?}");
        }
        assert!(
            torus_rings(&[3, 6]).is_none(),
            "no diagonal pair: left to the search"
        );
        assert!(
            torus_rings(&[12]).is_none(),
            "one dimension: the ring itself"
        );
    }

    #[test]
    fn hypercubes_get_two_proved_rings() {
        for dims in 4..=10 {
            let m = hypercube::hypercube("h", dims, LinkParams::default());
            let sizes = vec![2; dims as usize];
            let rings = grid_rings(&m, &sizes, &|c| {
                NodeId::new(c.iter().enumerate().map(|(k, &b)| b << k).sum())
            });
            let rings = rings.unwrap_or_default();
            assert_eq!(rings.len(), 2, "Q{dims}");
            assert_eq!(prove_rings(&m, &rings), Ok(()));
        }
    }

    #[test]
    fn full_meshes_get_two_proved_rings_from_seven_nodes() {
        for n in 7..40 {
            let m = mesh::full_mesh("m", n, LinkParams::default());
            let rings = full_mesh_rings(&m).unwrap_or_default();
            assert_eq!(rings.len(), 2, "{n} nodes");
            assert_eq!(prove_rings(&m, &rings), Ok(()));
        }
        let small = mesh::full_mesh("m", 6, LinkParams::default());
        assert!(full_mesh_rings(&small).is_none());
    }
}
