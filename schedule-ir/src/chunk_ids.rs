//! Chunk lists held as runs of evenly spaced ids: what an instruction names, in memory.
//!
//! Methods move regular sets of chunks (a ring step carries one block, a halving step half
//! of the vector, a torus step every chunk whose coordinate in one dimension is fixed), so a
//! list of ids is almost always a few arithmetic progressions. Holding them keeps a
//! schedule's size proportional to what it says: a halving step on a 4096-node machine names
//! thousands of ids in one run of 12 bytes. The explicit file form still writes every id
//! ([`crate::serial`]), and iteration yields ids in order, so nothing downstream sees runs
//! unless it asks for them ([`ChunkIds::runs`]).

use crate::{Chunk, ChunkId, DType, Phase};
use std::cmp::Ordering;
use std::fmt;

/// A run of evenly spaced chunk ids: `start`, `start + stride`, …, `start + (len - 1)·stride`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ChunkRun {
    /// The first id.
    pub start: u32,
    /// How many ids; at least 1 in a [`ChunkIds`].
    pub len: u32,
    /// The step between ids: at least 1 when `len > 1`, and 1 in a run of one id.
    pub stride: u32,
}

impl ChunkRun {
    /// The consecutive ids `start .. start + len`.
    pub fn consecutive(start: u32, len: u32) -> ChunkRun {
        ChunkRun {
            start,
            len,
            stride: 1,
        }
    }

    /// The last id, as a `u64`.
    pub fn last(self) -> u64 {
        u64::from(self.start) + u64::from(self.len.saturating_sub(1)) * u64::from(self.stride)
    }

    /// The id at position `i` (`i < len`).
    pub fn at(self, i: u32) -> ChunkId {
        ChunkId(self.start + i * self.stride)
    }

    /// The ids, in order.
    pub fn ids(self) -> impl Iterator<Item = ChunkId> + Clone {
        (0..self.len).map(move |i| self.at(i))
    }

    /// What is left after the first `step` ids, if anything.
    fn advance(self, step: u32) -> Option<ChunkRun> {
        (self.len > step).then(|| ChunkRun {
            start: self.start + step * self.stride,
            len: self.len - step,
            stride: if self.len - step > 1 { self.stride } else { 1 },
        })
    }
}

/// A list of chunk ids, in order, held as runs cut greedily from the front: each run takes
/// every following id that continues its progression (a run of one id takes any larger id
/// next, which fixes its stride). The runs are a function of the ids, however the list was
/// built, so `==` compares lists. One run is held without allocating.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct ChunkIds {
    repr: Repr,
}

#[derive(Clone, PartialEq, Eq, Hash)]
enum Repr {
    /// No run (`len == 0`) or exactly one.
    One(ChunkRun),
    /// Two runs or more.
    Many(Vec<ChunkRun>),
}

impl Default for ChunkIds {
    fn default() -> Self {
        ChunkIds::new()
    }
}

impl ChunkIds {
    /// The empty list.
    pub const fn new() -> ChunkIds {
        ChunkIds {
            repr: Repr::One(ChunkRun {
                start: 0,
                len: 0,
                stride: 1,
            }),
        }
    }

    /// The ids of `range`, in order.
    pub fn from_range(range: std::ops::Range<u32>) -> ChunkIds {
        let mut list = ChunkIds::new();
        if range.start < range.end {
            list.push_run(ChunkRun::consecutive(range.start, range.end - range.start));
        }
        list
    }

    /// The list of `ids`, in their order.
    pub fn from_ids(ids: &[ChunkId]) -> ChunkIds {
        ids.iter().copied().collect()
    }

    /// The runs, in list order.
    pub fn runs(&self) -> &[ChunkRun] {
        match &self.repr {
            Repr::One(run) if run.len == 0 => &[],
            Repr::One(run) => std::slice::from_ref(run),
            Repr::Many(runs) => runs,
        }
    }

    /// How many ids the list names.
    pub fn len(&self) -> usize {
        self.runs().iter().map(|r| r.len as usize).sum()
    }

    /// Whether the list names no id.
    pub fn is_empty(&self) -> bool {
        self.runs().is_empty()
    }

    /// The ids, in order.
    pub fn iter(&self) -> ChunkIdsIter<'_> {
        ChunkIdsIter {
            runs: self.runs().iter(),
            run: None,
            next: 0,
            left: self.len(),
        }
    }

    /// The first id.
    pub fn first(&self) -> Option<ChunkId> {
        self.runs().first().map(|r| ChunkId(r.start))
    }

    /// The last id.
    pub fn last(&self) -> Option<ChunkId> {
        self.runs().last().map(|r| ChunkId(r.last() as u32))
    }

    /// Whether `id` is in the list.
    pub fn contains(&self, id: ChunkId) -> bool {
        let i = u64::from(id.0);
        self.runs().iter().any(|r| {
            let start = u64::from(r.start);
            start <= i && i <= r.last() && (i - start) % u64::from(r.stride.max(1)) == 0
        })
    }

    /// The ids in a vector.
    pub fn to_vec(&self) -> Vec<ChunkId> {
        self.iter().collect()
    }

    /// Empties the list.
    pub fn clear(&mut self) {
        *self = ChunkIds::new();
    }

    /// Appends `id`.
    pub fn push(&mut self, id: ChunkId) {
        self.push_run(ChunkRun {
            start: id.0,
            len: 1,
            stride: 1,
        });
    }

    /// Appends the ids of `run`, in order, keeping the runs those of the ids pushed one by
    /// one (see [`ChunkIds`]), in time independent of the run's length. A run of more than
    /// one id with stride 0 is taken as that many runs of one id.
    pub fn push_run(&mut self, run: ChunkRun) {
        if run.len == 0 {
            return;
        }
        if run.stride == 0 && run.len > 1 {
            for _ in 0..run.len {
                self.push(ChunkId(run.start));
            }
            return;
        }
        // The first id joins the last run or starts one; the rest then follow it.
        let first = ChunkRun {
            start: run.start,
            len: 1,
            stride: 1,
        };
        let last = self.last_run_mut();
        let joined = last.is_some_and(|l| join(l, run.start));
        if !joined {
            self.append_run(first);
        }
        let Some(rest) = run.advance(1) else { return };
        let Some(last) = self.last_run_mut() else {
            return;
        };
        if last.len == 1 || (last.stride == run.stride && last.len.checked_add(rest.len).is_some())
        {
            if last.len == 1 {
                last.stride = run.stride;
            }
            match last.len.checked_add(rest.len) {
                Some(len) => last.len = len,
                None => self.append_run(rest),
            }
        } else {
            // The second id does not continue the last run: it starts one, which the rest
            // continue.
            self.append_run(rest);
        }
    }

    /// Appends every id of `other`, in order.
    pub fn append(&mut self, other: &ChunkIds) {
        for &run in other.runs() {
            self.push_run(run);
        }
    }

    fn last_run_mut(&mut self) -> Option<&mut ChunkRun> {
        match &mut self.repr {
            Repr::One(run) if run.len == 0 => None,
            Repr::One(run) => Some(run),
            Repr::Many(runs) => runs.last_mut(),
        }
    }

    /// Adds `run` after the last run, as a run of its own.
    fn append_run(&mut self, run: ChunkRun) {
        match &mut self.repr {
            Repr::One(last) if last.len == 0 => *last = run,
            Repr::One(last) => self.repr = Repr::Many(vec![*last, run]),
            Repr::Many(runs) => runs.push(run),
        }
    }

    /// Whether the ids increase from run to run and within runs, and every id is below
    /// `count`: then the list has no repeat and no id out of range, which the verifier can
    /// tell from the runs without looking at ids.
    pub fn is_increasing_below(&self, count: usize) -> bool {
        let mut next = 0u64;
        for r in self.runs() {
            if u64::from(r.start) < next {
                return false;
            }
            next = r.last() + 1;
        }
        next <= count as u64
    }
}

/// Whether `id` extends `last` (and extends it if so): a run of one id takes any larger id,
/// a longer run the id that continues its stride.
fn join(last: &mut ChunkRun, id: u32) -> bool {
    let Some(len) = last.len.checked_add(1) else {
        return false;
    };
    if last.len == 1 {
        if id <= last.start {
            return false;
        }
        last.stride = id - last.start;
    } else if last.last() + u64::from(last.stride) != u64::from(id) {
        return false;
    }
    last.len = len;
    true
}

/// Lists are ordered as their sequences of ids are (lexicographically), compared run by run.
impl Ord for ChunkIds {
    fn cmp(&self, other: &Self) -> Ordering {
        let (mut a, mut b) = (self.runs().iter().copied(), other.runs().iter().copied());
        let (mut x, mut y) = (a.next(), b.next());
        loop {
            match (x, y) {
                (None, None) => return Ordering::Equal,
                (None, Some(_)) => return Ordering::Less,
                (Some(_), None) => return Ordering::Greater,
                (Some(p), Some(q)) => {
                    if p.start != q.start {
                        return p.start.cmp(&q.start);
                    }
                    // Equal progressions agree for the shorter one's length; others only on
                    // their first id.
                    let step = if p.stride == q.stride {
                        p.len.min(q.len)
                    } else {
                        1
                    };
                    x = p.advance(step).or_else(|| a.next());
                    y = q.advance(step).or_else(|| b.next());
                }
            }
        }
    }
}

impl PartialOrd for ChunkIds {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// The bytes of every prefix of a phase's chunks, so that a list's bytes are summed run by
/// run rather than id by id where the run is consecutive.
pub struct ChunkBytes {
    /// `prefix[i]` = bytes of chunks `0..i` (saturating).
    prefix: Vec<u64>,
}

impl ChunkBytes {
    /// The prefix sums of `phase`'s chunks, in bytes of its dtype.
    pub fn of(phase: &Phase) -> ChunkBytes {
        ChunkBytes::new(&phase.chunks, phase.dtype)
    }

    /// The prefix sums of `chunks` in bytes of `dtype`: for a phase not yet built.
    pub fn new(chunks: &[Chunk], dtype: DType) -> ChunkBytes {
        let mut prefix = Vec::with_capacity(chunks.len() + 1);
        let mut sum = 0u64;
        prefix.push(0);
        for c in chunks {
            sum = sum.saturating_add(c.len().saturating_mul(dtype.size_bytes()));
            prefix.push(sum);
        }
        ChunkBytes { prefix }
    }

    /// The bytes of chunk `index`, 0 when out of range.
    fn one(&self, index: u64) -> u64 {
        let i = usize::try_from(index).unwrap_or(usize::MAX);
        match (self.prefix.get(i), self.prefix.get(i.saturating_add(1))) {
            (Some(a), Some(b)) => b - a,
            _ => 0,
        }
    }

    /// The bytes `list` names; ids out of range count 0, as in [`Phase::chunk_bytes`].
    pub fn bytes(&self, list: &ChunkIds) -> u64 {
        let total = (self.prefix.len() - 1) as u64;
        list.runs().iter().fold(0u64, |sum, r| {
            let run = if r.stride == 1 || r.len == 1 {
                let start = u64::from(r.start).min(total) as usize;
                let end = (r.last() + 1).min(total) as usize;
                self.prefix[end] - self.prefix[start]
            } else {
                r.ids()
                    .fold(0u64, |s, c| s.saturating_add(self.one(u64::from(c.0))))
            };
            sum.saturating_add(run)
        })
    }
}

impl FromIterator<ChunkId> for ChunkIds {
    fn from_iter<I: IntoIterator<Item = ChunkId>>(iter: I) -> Self {
        let mut list = ChunkIds::new();
        list.extend(iter);
        list
    }
}

impl Extend<ChunkId> for ChunkIds {
    fn extend<I: IntoIterator<Item = ChunkId>>(&mut self, iter: I) {
        for id in iter {
            self.push(id);
        }
    }
}

impl From<Vec<ChunkId>> for ChunkIds {
    fn from(ids: Vec<ChunkId>) -> Self {
        ChunkIds::from_ids(&ids)
    }
}

impl From<&[ChunkId]> for ChunkIds {
    fn from(ids: &[ChunkId]) -> Self {
        ChunkIds::from_ids(ids)
    }
}

impl<'a> IntoIterator for &'a ChunkIds {
    type Item = ChunkId;
    type IntoIter = ChunkIdsIter<'a>;

    fn into_iter(self) -> ChunkIdsIter<'a> {
        self.iter()
    }
}

/// The ids of a [`ChunkIds`], in order.
#[derive(Clone, Debug)]
pub struct ChunkIdsIter<'a> {
    runs: std::slice::Iter<'a, ChunkRun>,
    /// The current run, and the position in it of the next id.
    run: Option<ChunkRun>,
    next: u32,
    /// How many ids are left in all.
    left: usize,
}

impl Iterator for ChunkIdsIter<'_> {
    type Item = ChunkId;

    fn next(&mut self) -> Option<ChunkId> {
        loop {
            if let Some(run) = self.run {
                if self.next < run.len {
                    let id = run.at(self.next);
                    self.next += 1;
                    self.left -= 1;
                    return Some(id);
                }
            }
            self.run = Some(*self.runs.next()?);
            self.next = 0;
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl ExactSizeIterator for ChunkIdsIter<'_> {}

/// Written as the list of ids, as a `Vec<ChunkId>` would be, so that test failures read the
/// same as before the lists held runs.
impl fmt::Debug for ChunkIds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(v: &[u32]) -> Vec<ChunkId> {
        v.iter().map(|&i| ChunkId(i)).collect()
    }

    fn run(start: u32, len: u32, stride: u32) -> ChunkRun {
        ChunkRun { start, len, stride }
    }

    #[test]
    fn lists_cut_into_progressions_and_give_back_their_ids() {
        for v in [
            vec![],
            vec![0],
            vec![3, 4, 5, 9, 10, 2],
            vec![5, 3, 1, 2, 3, 4],
            vec![u32::MAX - 1, u32::MAX],
            vec![u32::MAX, 0, 1],
            vec![0, 64, 128, 1, 65, 129],
            vec![7, 7, 7],
        ] {
            let list = ChunkIds::from_ids(&ids(&v));
            assert_eq!(list.to_vec(), ids(&v), "{v:?}");
            assert_eq!(list.len(), v.len());
            assert_eq!(list.iter().len(), v.len());
            assert_eq!(list.is_empty(), v.is_empty());
            assert_eq!(list.first(), v.first().map(|&i| ChunkId(i)));
            assert_eq!(list.last(), v.last().map(|&i| ChunkId(i)));
        }
        let list = ChunkIds::from_ids(&ids(&[3, 4, 5, 9, 10, 2]));
        assert_eq!(list.runs(), &[run(3, 3, 1), run(9, 2, 1), run(2, 1, 1)]);
        assert!(list.contains(ChunkId(10)) && !list.contains(ChunkId(6)));
        let strided = ChunkIds::from_ids(&ids(&[0, 64, 128, 1, 65, 129]));
        assert_eq!(strided.runs(), &[run(0, 3, 64), run(1, 3, 64)]);
        assert!(strided.contains(ChunkId(65)) && !strided.contains(ChunkId(66)));
    }

    #[test]
    fn runs_depend_on_the_ids_only_however_the_list_is_built() {
        let cases: [(&[u32], &[ChunkRun]); 4] = [
            (&[0, 2, 3, 4], &[run(0, 2, 2), run(3, 2, 1)]),
            (&[0, 2, 4, 5, 6], &[run(0, 3, 2), run(5, 2, 1)]),
            (&[9, 3, 4, 5], &[run(9, 1, 1), run(3, 3, 1)]),
            (&[1, 2, 3, 4, 5, 6], &[run(1, 6, 1)]),
        ];
        for (v, want) in cases {
            assert_eq!(ChunkIds::from_ids(&ids(v)).runs(), want, "{v:?}");
            let by_id = ChunkIds::from_ids(&ids(v));
            // The same ids pushed as runs of every split.
            for cut in 0..=v.len() {
                let mut by_runs = ChunkIds::from_ids(&ids(&v[..cut]));
                by_runs.append(&ChunkIds::from_ids(&ids(&v[cut..])));
                assert_eq!(by_runs, by_id, "{v:?} cut at {cut}");
                assert_eq!(by_runs.runs(), by_id.runs(), "{v:?} cut at {cut}");
            }
        }
        let mut a = ChunkIds::from_range(0..4);
        a.append(&ChunkIds::from_range(4..8));
        assert_eq!(a, ChunkIds::from_range(0..8));
        assert_eq!(a.runs().len(), 1);
        assert_ne!(
            ChunkIds::from_ids(&ids(&[1, 0])),
            ChunkIds::from_ids(&ids(&[0, 1]))
        );
        assert_eq!(ChunkIds::from_range(5..5), ChunkIds::new());
    }

    #[test]
    fn lists_order_as_their_ids_do() {
        let lists = [
            vec![],
            vec![0],
            vec![0, 1],
            vec![0, 1, 2],
            vec![0, 1, 5],
            vec![0, 2],
            vec![0, 2, 4],
            vec![0, 2, 3],
            vec![1],
        ];
        for a in &lists {
            for b in &lists {
                let (x, y) = (ChunkIds::from_ids(&ids(a)), ChunkIds::from_ids(&ids(b)));
                assert_eq!(x.cmp(&y), a.cmp(b), "{a:?} {b:?}");
            }
        }
    }

    #[test]
    fn increasing_lists_below_a_count_are_told_from_their_runs() {
        assert!(ChunkIds::from_ids(&ids(&[0, 1, 5, 6])).is_increasing_below(7));
        assert!(!ChunkIds::from_ids(&ids(&[0, 1, 5, 6])).is_increasing_below(6));
        assert!(!ChunkIds::from_ids(&ids(&[5, 0])).is_increasing_below(9));
        assert!(!ChunkIds::from_ids(&ids(&[0, 1, 2, 1])).is_increasing_below(9));
        assert!(!ChunkIds::from_ids(&ids(&[0, 2, 1, 3])).is_increasing_below(9));
        assert!(ChunkIds::new().is_increasing_below(0));
    }
}
