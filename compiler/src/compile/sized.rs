//! Compiling at sizes the command line gives (`compile --size`, `compile --bands`) rather
//! than the file's own: one size overrides every exchange phase's vector; several compile each
//! exchange phase once per size, `auto` deciding at each, into one phase per size band.
//!
//! # Band edges
//!
//! For sizes `s₀ < s₁ < … < sₙ` (in bytes), band `i` runs the phase compiled for `sᵢ` and
//! serves buffers from `eᵢ` up to (not including) `eᵢ₊₁`, where `e₀ = 0`, the last band has
//! no upper end, and between two sizes the edge is their geometric midpoint
//! `⌊√(sᵢ₋₁·sᵢ)⌋` (raised to `sᵢ₋₁ + 1` when it rounds down onto `sᵢ₋₁`). Methods' costs
//! change with the size by factors, not by amounts, so the size halfway in ratio is where one
//! band's choice is as likely to be wrong as the other's. Every size lies inside its own band,
//! and the bands cover every size without hole or overlap, as the verifier requires.

use super::PhaseRequest;
use crate::diag::Problem;
use schedule_ir::{Band, ProgramItem};

/// The sizes to compile at.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Sizes {
    /// Each phase's own, as the file declares it.
    #[default]
    Declared,
    /// One size, in bytes, for every exchange phase.
    One(u64),
    /// Several sizes, in bytes: every exchange phase compiled once per size, one band each.
    Bands(Vec<u64>),
}

/// One phase to lower: the request (its vector resized) and, for a band, its byte range.
pub(super) struct Planned {
    /// What to lower; its spec's name is the phase's (a band's: `name@size`).
    pub request: PhaseRequest,
    /// The band's range, `min..max` bytes (`None`: unbounded); `None` outside bands.
    pub band: Option<(u64, Option<u64>)>,
}

/// The phases to lower for `requests` at `sizes`, in order: one per request, or one per
/// request and size. A size that is not a whole number of a phase's elements, or is larger
/// than a vector may be, is a problem pointing at the phase.
pub(super) fn plan(requests: &[PhaseRequest], sizes: &Sizes) -> Result<Vec<Planned>, Vec<Problem>> {
    let mut out = Vec::new();
    let mut problems = Vec::new();
    for request in requests {
        match sizes {
            Sizes::Declared => out.push(Planned {
                request: request.clone(),
                band: None,
            }),
            Sizes::One(bytes) => match resized(request, *bytes, false) {
                Ok(r) => out.push(Planned {
                    request: r,
                    band: None,
                }),
                Err(p) => problems.push(p),
            },
            Sizes::Bands(list) => {
                let list = sorted(list);
                for (&bytes, (min, max)) in list.iter().zip(edges(&list)) {
                    match resized(request, bytes, true) {
                        Ok(r) => out.push(Planned {
                            request: r,
                            band: Some((min, max)),
                        }),
                        Err(p) => problems.push(p),
                    }
                }
            }
        }
    }
    if problems.is_empty() {
        Ok(out)
    } else {
        Err(problems)
    }
}

/// The sizes in increasing order, each once.
fn sorted(sizes: &[u64]) -> Vec<u64> {
    let mut list = sizes.to_vec();
    list.sort_unstable();
    list.dedup();
    list
}

/// The band of each size of `sizes` (increasing, distinct): see the [module doc](self).
pub fn edges(sizes: &[u64]) -> Vec<(u64, Option<u64>)> {
    let cuts: Vec<u64> = sizes
        .windows(2)
        .map(|w| {
            let mid = isqrt(u128::from(w[0]) * u128::from(w[1]));
            mid.max(w[0].saturating_add(1))
        })
        .collect();
    // Band `i` runs from cut `i - 1` (0 for the first) to cut `i` (none for the last).
    (0..sizes.len())
        .map(|i| {
            let start = if i == 0 { 0 } else { cuts[i - 1] };
            (start, cuts.get(i).copied())
        })
        .collect()
}

/// `⌊√n⌋`, exactly, as a `u64` (it always fits: `n` is a product of two `u64`s).
fn isqrt(n: u128) -> u64 {
    u64::try_from(n.isqrt()).unwrap_or(u64::MAX)
}

/// `request` with a vector of `bytes` bytes (and, for a band, the name `name@size`).
fn resized(request: &PhaseRequest, bytes: u64, band: bool) -> Result<PhaseRequest, Problem> {
    let dtype = request.spec.dtype;
    let width = dtype.size_bytes();
    let option = if band { "--bands" } else { "--size" };
    if bytes % width != 0 {
        return Err(Problem::at(
            request.at.field("dtype"),
            format!(
                "{option}: {bytes} bytes is not a whole number of phase `{}`'s {dtype} elements",
                request.spec.name
            ),
            format!("{dtype}: {width} bytes per element"),
        )
        .hint(format!("give a size that is a multiple of {width} bytes")));
    }
    let elements = bytes / width;
    crate::limits::check_vector(&request.at, elements, dtype)
        .map_err(|p| p.note(format!("the size comes from {option} {}", size_name(bytes))))?;
    let mut r = request.clone();
    r.spec.elements = elements;
    if band {
        r.spec.name = format!("{}@{}", request.spec.name, size_name(bytes));
    }
    Ok(r)
}

/// A size as a name part: `1KiB`, `64MiB`, `1GiB`, or `1000B` when no binary unit divides it.
pub fn size_name(bytes: u64) -> String {
    for (shift, unit) in [(30, "GiB"), (20, "MiB"), (10, "KiB")] {
        if bytes != 0 && bytes % (1 << shift) == 0 {
            return format!("{}{unit}", bytes >> shift);
        }
    }
    format!("{bytes}B")
}

/// The program with every exchange that was compiled in bands turned into a
/// [`ProgramItem::Bands`] of its band phases.
pub(super) fn program(
    items: Vec<ProgramItem>,
    planned: &[Planned],
    requests: &[PhaseRequest],
) -> Vec<ProgramItem> {
    items
        .into_iter()
        .map(|item| {
            let ProgramItem::Exchange(name) = &item else {
                return item;
            };
            let Some(request) = requests.iter().find(|r| &r.exchange.name == name) else {
                return item;
            };
            let bands: Vec<Band> = planned
                .iter()
                .filter(|p| p.request.exchange.name == request.exchange.name)
                .filter_map(|p| {
                    let (min, max) = p.band?;
                    Some(Band {
                        min_bytes: min,
                        max_bytes: max,
                        phase: p.request.spec.name.clone(),
                    })
                })
                .collect();
            if bands.is_empty() {
                item
            } else {
                ProgramItem::Bands {
                    name: name.clone(),
                    bands,
                }
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edges_are_geometric_midpoints_covering_every_size() {
        assert_eq!(
            edges(&[1024, 4096, 1 << 20]),
            vec![(0, Some(2048)), (2048, Some(65536)), (65536, None)]
        );
        assert_eq!(edges(&[8]), vec![(0, None)]);
        // Neighbours so close the midpoint rounds onto the smaller: it is raised past it.
        assert_eq!(edges(&[4, 5]), vec![(0, Some(5)), (5, None)]);
        assert_eq!(isqrt(u128::from(u64::MAX) * u128::from(u64::MAX)), u64::MAX);
    }

    #[test]
    fn size_names_use_the_largest_binary_unit_that_divides() {
        assert_eq!(size_name(1024), "1KiB");
        assert_eq!(size_name(3 << 20), "3MiB");
        assert_eq!(size_name(1 << 30), "1GiB");
        assert_eq!(size_name(1000), "1000B");
        assert_eq!(size_name(0), "0B");
    }
}
