//! Sizing a pipeline's pieces to its timetable.
//!
//! A lowering that pipelines cuts the vector into `P` pieces of equal size and lets the list
//! scheduler ([`super::dag`]) overlap one piece's stages with the next's. Equal pieces leave
//! the pipeline's first and last steps light: the first carries only the first piece's first
//! stage, over one kind of link, while the others idle. But a timetable does not depend on
//! the pieces' sizes (the scheduler places transfers, not bytes), and the cost model prices a
//! step as `α + β` with `β` the busiest direction's bytes over its bandwidth, linear in the
//! pieces' sizes. So with the timetable fixed, the sizes that minimise the estimate are a
//! linear program: with `w_p` the share of the vector in piece `p` and `c[s][d][p]` the
//! seconds direction `d` is busy in step `s` per unit of `w_p`,
//!
//! ```text
//! minimise Σ_s τ_s   subject to   Σ_p c[s][d][p]·w_p ≤ τ_s   for every step s, direction d,
//!                                  Σ_p w_p = 1,   w_p ≥ (chunks in a piece) / (elements)
//! ```
//!
//! (the latency `α` of each step is fixed by its transfers and drops out). Equal pieces are
//! one feasible point, so the optimum is never dearer in this model; the caller prices both
//! with the full cost model (which also charges reductions) and keeps the cheaper. The
//! schedule is the same DAG on the same steps with other chunk boundaries, so everything the
//! verifier proves of it holds alike.

use super::balance;
use super::dag::{self, TransferId, Transfers};
use crate::ids::IdVec;
use crate::machine::Machine;
use good_lp::{variable, variables, Expression, Solution, SolverModel};
use schedule_ir::{Chunk, ChunkId, DType, DirectionId, NodeId};
use std::cmp::Reverse;

crate::ids::compiler_id!(
    /// A piece of a pipelined vector.
    PieceId,
    "piece "
);

/// How a lowering lays its chunks out: `pieces` runs of `per_piece` chunks each, in vector
/// order, piece `p` holding chunks `p · per_piece ..` cut evenly from its part of the vector.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Pieces in the pipeline.
    pub pieces: usize,
    /// Chunks per piece.
    pub per_piece: usize,
}

impl Layout {
    fn piece(self, c: ChunkId) -> usize {
        c.index() / self.per_piece.max(1)
    }
}

/// The chunks of `layout` over `elements`, piece `p` taking `shares[p]` of them and cutting
/// it evenly, chunk `i` owned by `owner(i)`. A piece's size is a whole number of units of
/// `per_piece` elements (at least one), the elements left over going to the last piece: so
/// every piece's chunks hold at least `n_p` elements each where `Σ n_p = ⌊elements /
/// per_piece⌋`, and a bound that counts `P · ⌊elements / (P · per_piece)⌋` elements per chunk
/// of a piece, as equal pieces would give, still holds summed over the pieces.
pub fn chunks(
    elements: u64,
    layout: Layout,
    shares: &IdVec<PieceId, f64>,
    owner: impl Fn(usize) -> Option<NodeId>,
) -> Vec<Chunk> {
    let per_piece = layout.per_piece.max(1) as u64;
    let mut units = balance::apportion(elements / per_piece, shares);
    // A share the solver's rounding left just under one unit still gets one, from the largest.
    while let Some(empty) = units.ids().find(|&p| units[p] == 0) {
        let Some((largest, most)) = units
            .iter_enumerated()
            .map(|(p, &n)| (p, n))
            .max_by_key(|&(p, n)| (n, Reverse(p)))
        else {
            break;
        };
        if most < 2 {
            break;
        }
        units[largest] -= 1;
        units[empty] += 1;
    }
    let left = elements % per_piece;
    let last = units.len().saturating_sub(1);
    let mut out = Vec::with_capacity(layout.pieces * layout.per_piece);
    let mut start = 0u64;
    for (p, &n) in units.iter().enumerate() {
        let size = n * per_piece + if p == last { left } else { 0 };
        for (a, b) in super::even_chunks(size, per_piece as usize) {
            out.push(Chunk {
                start: start + a,
                end: start + b,
                owner: owner(out.len()),
            });
        }
        start += size;
    }
    out
}

/// The linear program that sizes the pieces of a pipeline on its timetable (see the module
/// documentation), its coefficients in microseconds per unit share.
#[derive(Clone, Debug)]
pub struct Program {
    layout: Layout,
    /// Per step, the rows left by [`distinct`]: (piece, microseconds per unit share).
    rows: Vec<Vec<Vec<(usize, f64)>>>,
    /// The least `Σ τ` any shares give, microseconds ([`Program::least_seconds`]).
    least: f64,
    /// The least share of a piece: one unit of [`chunks`], one element per chunk.
    smallest: f64,
}

impl Program {
    /// The program of `transfers` on `timetable`, cut as `layout` over `elements` of `dtype`;
    /// `None` when the layout does not fit the transfers or the vector is too short to size
    /// (fewer elements than twice the chunks).
    pub fn new(
        machine: &Machine,
        transfers: &Transfers,
        timetable: &dag::Timetable,
        layout: Layout,
        elements: u64,
        dtype: DType,
    ) -> Option<Program> {
        let mut entries: Vec<Vec<(DirectionId, usize, f64)>> =
            vec![Vec::new(); timetable.steps as usize];
        let mut totals = vec![0.0; DirectionId::count(machine.link_count()) * layout.pieces];
        walk(machine, transfers, layout, elements, dtype, |t, d, p, c| {
            let step = entries.get_mut(*timetable.step.get(t)? as usize)?;
            step.push((d, p, c));
            *totals.get_mut(d.index() * layout.pieces + p)? += c;
            Some(())
        })?;
        Some(Program {
            layout,
            rows: distinct(entries.into_iter().map(merged).collect()),
            least: least(&totals, layout.pieces),
            smallest: 1.0 / (elements / layout.per_piece.max(1) as u64).max(1) as f64,
        })
    }

    /// [`Program::least_seconds`] of the program [`Program::new`] would build, without
    /// building it.
    pub fn least_of(
        machine: &Machine,
        transfers: &Transfers,
        layout: Layout,
        elements: u64,
        dtype: DType,
    ) -> Option<f64> {
        let mut totals = vec![0.0; DirectionId::count(machine.link_count()) * layout.pieces];
        walk(machine, transfers, layout, elements, dtype, |_, d, p, c| {
            *totals.get_mut(d.index() * layout.pieces + p)? += c;
            Some(())
        })?;
        Some(least(&totals, layout.pieces) * 1e-6)
    }

    /// The layout the program sizes.
    pub fn layout(&self) -> Layout {
        self.layout
    }

    /// The least summed `β` any shares could give, in seconds: the estimate of the sized
    /// pipeline is at least its steps' latency plus this.
    pub fn least_seconds(&self) -> f64 {
        self.least * 1e-6
    }

    /// The shares that minimise the summed `β`; `None` when the solver fails or finds
    /// nothing other than equal pieces.
    pub fn solve(&self) -> Option<IdVec<PieceId, f64>> {
        let largest = self
            .rows
            .iter()
            .flatten()
            .flat_map(|r| r.iter().map(|&(_, c)| c))
            .fold(0.0, f64::max);
        if !(largest.is_finite() && largest > 0.0) {
            return None;
        }
        let scale = 1.0 / largest;
        let mut vars = variables!();
        let w: Vec<_> = (0..self.layout.pieces)
            .map(|_| vars.add(variable().min(self.smallest).max(1.0)))
            .collect();
        let tau: Vec<_> = self
            .rows
            .iter()
            .map(|_| vars.add(variable().min(0.0)))
            .collect();
        let objective: Expression = tau.iter().copied().sum();
        let total: Expression = w.iter().copied().sum();
        let mut model = vars
            .minimise(objective)
            .using(good_lp::microlp)
            .with(total.eq(1.0));
        for (step, &t) in self.rows.iter().zip(&tau) {
            for row in step {
                let busy: Expression = row.iter().map(|&(p, c)| c * scale * w[p]).sum();
                model = model.with(busy.leq(t));
            }
        }
        let solution = model.solve().ok()?;
        let mut x: IdVec<PieceId, f64> = w.iter().map(|&v| solution.value(v).max(0.0)).collect();
        let sum: f64 = x.iter().sum();
        if !(sum.is_finite() && sum > 0.0) {
            return None;
        }
        x.iter_mut().for_each(|v| *v /= sum);
        // Among shares as good as equal pieces (a tie), equal pieces are kept.
        let even: IdVec<PieceId, f64> = IdVec::filled(1.0 / self.layout.pieces as f64, x.len());
        (self.summed(&x) < self.summed(&even) * (1.0 - 1e-9)).then_some(x)
    }

    /// `Σ τ` under `shares`: each step's busiest row.
    fn summed(&self, shares: &IdVec<PieceId, f64>) -> f64 {
        self.rows
            .iter()
            .map(|step| {
                step.iter()
                    .map(|row| row.iter().map(|&(p, c)| c * shares[PieceId::new(p)]).sum())
                    .fold(0.0, f64::max)
            })
            .sum()
    }
}

/// Every (transfer, direction of its route, piece, microseconds per unit share of the piece)
/// of `transfers` cut as `layout`, handed to `each`; `None` when the layout does not fit, the
/// vector is too short to size (fewer elements than twice the chunks), or `each` says so.
fn walk(
    machine: &Machine,
    transfers: &Transfers,
    layout: Layout,
    elements: u64,
    dtype: DType,
    mut each: impl FnMut(TransferId, DirectionId, usize, f64) -> Option<()>,
) -> Option<()> {
    let chunks = layout.pieces.checked_mul(layout.per_piece)?;
    if layout.pieces < 2 || elements < 2 * chunks as u64 {
        return None;
    }
    let bytes = elements as f64 * dtype.size_bytes() as f64;
    let mut counts: Vec<(usize, u64)> = Vec::new();
    for (t, transfer) in transfers.iter_enumerated() {
        counts.clear();
        for run in transfer.what.chunks.runs() {
            let (first, last) = (layout.piece(run.at(0)), layout.piece(run.at(run.len - 1)));
            if first == last {
                counts.push((first, u64::from(run.len)));
            } else {
                counts.extend(run.ids().map(|c| (layout.piece(c), 1)));
            }
        }
        if counts.iter().any(|&(p, _)| p >= layout.pieces) {
            return None;
        }
        for d in dag::directions(machine, t, transfer).ok()? {
            let rate = schedule_ir::cost::bytes_per_second(machine.link(d.link()).bandwidth_gbps);
            if !(rate.is_finite() && rate > 0.0) {
                return None;
            }
            // The whole vector's bytes over the direction's rate, microseconds, per chunk.
            let unit = bytes * 1e6 / rate / layout.per_piece as f64;
            for &(p, n) in &counts {
                each(t, d, p, n as f64 * unit)?;
            }
        }
    }
    Some(())
}

/// The least `Σ τ` any shares give, from each direction's total per piece (`totals`, by
/// direction then piece): a direction's time over the timetable is a weighted mean of its
/// per-piece totals, and `Σ τ` is at least each direction's time.
fn least(totals: &[f64], pieces: usize) -> f64 {
    totals
        .chunks(pieces.max(1))
        .map(|t| t.iter().copied().fold(f64::INFINITY, f64::min))
        .fold(0.0, f64::max)
}

/// One direction's load in one step: (piece, microseconds per unit share), by piece.
type Row = (DirectionId, Vec<(usize, f64)>);

/// A step's entries as one row per direction, each by piece, the entries of one piece summed.
fn merged(mut entries: Vec<(DirectionId, usize, f64)>) -> Vec<Row> {
    entries.sort_by_key(|&(d, p, _)| (d, p));
    let mut rows: Vec<Row> = Vec::new();
    for (d, p, c) in entries {
        match rows.last_mut() {
            Some((last, row)) if *last == d => match row.last_mut() {
                Some((q, sum)) if *q == p => *sum += c,
                _ => row.push((p, c)),
            },
            _ => rows.push((d, vec![(p, c)])),
        }
    }
    rows
}

/// Each step's rows without repeats or rows that another row of the step dominates (every
/// coefficient at most the other's): on a symmetric machine most directions of a step carry
/// the same pieces in the same proportions, and only one constraint per kind is needed.
fn distinct(rows: Vec<Vec<Row>>) -> Vec<Vec<Vec<(usize, f64)>>> {
    rows.into_iter()
        .map(|step| {
            let mut unique: Vec<Vec<(usize, f64)>> = step.into_iter().map(|(_, r)| r).collect();
            let bits = |r: &Vec<(usize, f64)>| -> Vec<(usize, u64)> {
                r.iter().map(|&(p, c)| (p, c.to_bits())).collect()
            };
            unique.sort_by_cached_key(bits);
            unique.dedup_by(|a, b| bits(a) == bits(b));
            let mut kept: Vec<Vec<(usize, f64)>> = Vec::new();
            for row in unique {
                if kept.iter().any(|k| dominates(k, &row)) {
                    continue;
                }
                kept.retain(|k| !dominates(&row, k));
                kept.push(row);
            }
            kept
        })
        .collect()
}

/// Whether `a`'s coefficients are at least `b`'s everywhere (both by piece).
fn dominates(a: &[(usize, f64)], b: &[(usize, f64)]) -> bool {
    b.iter().all(|&(p, c)| {
        a.binary_search_by_key(&p, |&(q, _)| q)
            .is_ok_and(|i| a[i].1 >= c)
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::panic)]

    use super::*;
    use crate::lower::dag::{Transfer, TransferId};
    use crate::lower::plan::Move;
    use schedule_ir::{BufferId, LinkId, LinkUse, RecvMode};

    /// `a —L1— b —L2— c`, L1 twice as fast as L2.
    fn line() -> Machine {
        crate::compile::load(
            r#"Topology(name: "line", machine: Graph(nodes: ["a", "b", "c"], links: [
                (id: "L1", between: ("a", "b"), bandwidth_gbps: 200.0),
                (id: "L2", between: ("b", "c"), bandwidth_gbps: 100.0),
            ]))"#,
        )
        .unwrap()
        .machine
    }

    fn hop(from: u32, link: u32, chunk: u32, after: Option<u32>) -> Transfer {
        Transfer {
            what: Move {
                from: NodeId(from),
                to: NodeId(from + 1),
                route: vec![LinkId(link)].into(),
                src: BufferId(0),
                dst: BufferId(0),
                chunks: vec![ChunkId(chunk)].into(),
                mode: RecvMode::Store,
            },
            after: after.into_iter().map(TransferId).collect(),
            rank: 0,
        }
    }

    /// Two pieces relayed a → b → c, one chunk each, on three steps: piece 0 over L1, then
    /// piece 0 over L2 beside piece 1 over L1, then piece 1 over L2. With shares `w` and `w'`
    /// the steps take `w/2`, `max(w, w'/2)` and `w'` (in units of the vector over L2), summed
    /// `1.5 − w` below `w = 1/3` and `1 + w/2` above it: least at `w = 1/3`, where equal pieces
    /// give 1.25 against 7/6.
    #[test]
    fn a_relay_puts_less_in_the_piece_that_fills_the_pipeline() {
        let machine = line();
        let transfers: Transfers = IdVec::from_raw(vec![
            hop(0, 0, 0, None),
            hop(1, 1, 0, Some(0)),
            hop(0, 0, 1, None),
            hop(1, 1, 1, Some(2)),
        ]);
        let timetable = dag::Timetable {
            step: IdVec::from_raw(vec![0, 1, 1, 2]),
            // Two sends in step 1 (one send would merge the two transfers onto one route).
            send: IdVec::from_raw(vec![0, 0, 1, 0]),
            steps: 3,
            links: LinkUse::Exclusive,
        };
        let layout = Layout {
            pieces: 2,
            per_piece: 1,
        };
        let elements = 3_000_000;
        let program = Program::new(
            &machine,
            &transfers,
            &timetable,
            layout,
            elements,
            DType::F32,
        )
        .unwrap();
        // The vector over L2 takes 960 µs; L2 carries all of it, so no shares do better.
        let over_l2 = elements as f64 * 4.0 / (100e9 / 8.0);
        assert!((program.least_seconds() - over_l2).abs() < 1e-12);
        let shares = program.solve().unwrap();
        assert!((shares[PieceId(0)] - 1.0 / 3.0).abs() < 1e-6, "{shares:?}");
        assert!((shares[PieceId(1)] - 2.0 / 3.0).abs() < 1e-6, "{shares:?}");
        // The chunks follow the shares in whole elements and cover the vector.
        let chunks = chunks(elements, layout, &shares, |_| None);
        assert_eq!(chunks.len(), 2);
        assert_eq!((chunks[0].start, chunks[1].end), (0, elements));
        assert_eq!(chunks[0].end, chunks[1].start);
        assert!((chunks[0].end as f64 - elements as f64 / 3.0).abs() <= 1.0);
        let scheduled = dag::Scheduled {
            chunks,
            transfers,
            timetable,
        };
        // The cost model's summed β is 7/6 of the vector over L2.
        let beta = scheduled
            .estimate(DType::F32, &machine.to_ir())
            .transfer_seconds;
        assert!(
            (beta / over_l2 - 7.0 / 6.0).abs() < 1e-5,
            "{}",
            beta / over_l2
        );
    }

    /// A pipeline whose steps are the same for every piece gains nothing: no shares.
    #[test]
    fn balanced_steps_give_equal_pieces() {
        let machine = line();
        // Both pieces over L1 in one step each.
        let transfers: Transfers = IdVec::from_raw(vec![hop(0, 0, 0, None), hop(0, 0, 1, None)]);
        let timetable = dag::Timetable {
            step: IdVec::from_raw(vec![0, 1]),
            send: IdVec::filled(0, 2),
            steps: 2,
            links: LinkUse::Exclusive,
        };
        let layout = Layout {
            pieces: 2,
            per_piece: 1,
        };
        let program =
            Program::new(&machine, &transfers, &timetable, layout, 1000, DType::F32).unwrap();
        assert_eq!(program.solve(), None);
        // Too short a vector to size: fewer elements than twice the chunks.
        assert!(Program::new(&machine, &transfers, &timetable, layout, 3, DType::F32).is_none());
    }

    /// Pieces are whole units of their chunk count, none empty, the last taking what is left;
    /// owners are asked by chunk index.
    #[test]
    fn chunks_are_whole_units_of_a_piece_and_cover_the_vector() {
        let layout = Layout {
            pieces: 3,
            per_piece: 4,
        };
        // A share far below one unit still gets one.
        let shares: IdVec<PieceId, f64> = IdVec::from_raw(vec![1e-9, 0.5, 0.5 - 1e-9]);
        let chunks = chunks(103, layout, &shares, |i| Some(NodeId(i as u32)));
        assert_eq!(chunks.len(), 12);
        assert_eq!(chunks[0].start, 0);
        assert_eq!(chunks[11].end, 103);
        for (i, pair) in chunks.windows(2).enumerate() {
            assert_eq!(pair[0].end, pair[1].start);
            assert!(pair[0].end > pair[0].start, "chunk {i} is empty");
            assert_eq!(pair[0].owner, Some(NodeId(i as u32)));
        }
        let piece = |p: usize| chunks[4 * p + 3].end - chunks[4 * p].start;
        assert_eq!(piece(0), 4);
        assert_eq!(piece(1) % 4, 0);
        assert_eq!(piece(0) + piece(1) + piece(2), 103);
        assert_eq!(piece(2) % 4, 103 % 4);
    }
}
