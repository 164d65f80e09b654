//! Input sets for the correctness pass, each distinct set stored once.
//!
//! A set of compute nodes is a bitset of `words` `u64`s. Schedules hold few distinct sets —
//! a ring's partial sums are runs of consecutive ring positions, halving-doubling's are the
//! ranks that share some bits, and the end state of an allreduce is the same full set on every
//! node and chunk — while the (node, buffer, chunk) slots that hold them are many. So the
//! table keeps each distinct set once and a slot holds its [`SetId`]: four bytes per slot
//! instead of `words · 8`, and equal sets have equal ids. The sets are exact; only their
//! storage is shared, so every check sees the same sets as with one bitset per slot.

use std::collections::HashMap;

/// A set in a [`SetTable`]. [`SetId::EMPTY`] is the empty set: an undefined chunk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct SetId(u32);

impl SetId {
    /// The empty set, interned first.
    pub(super) const EMPTY: SetId = SetId(0);
}

/// Every distinct set met so far.
pub(super) struct SetTable {
    words: usize,
    /// Set `i` at `data[i * words..(i + 1) * words]`.
    data: Vec<u64>,
    /// Hash of a set's words → the ids with that hash.
    index: HashMap<u64, Vec<u32>>,
    /// The most sets the table may hold.
    max_sets: usize,
    /// Room for one set being built.
    scratch: Vec<u64>,
}

impl SetTable {
    /// A table of sets of `words` words holding at most `max_sets` sets (at least the empty
    /// one).
    pub(super) fn new(words: usize, max_sets: usize) -> Self {
        let mut table = SetTable {
            words,
            data: Vec::new(),
            index: HashMap::new(),
            max_sets: max_sets.max(1),
            scratch: vec![0; words],
        };
        let empty = vec![0; words];
        let _ = table.intern(&empty);
        table
    }

    /// How many distinct sets the table holds.
    pub(super) fn len(&self) -> usize {
        self.data.len() / self.words.max(1)
    }

    /// The words of `id`.
    pub(super) fn get(&self, id: SetId) -> &[u64] {
        let i = id.0 as usize * self.words;
        &self.data[i..i + self.words]
    }

    /// The id of `set`, adding it if it is new; `None` when the table is full.
    pub(super) fn intern(&mut self, set: &[u64]) -> Option<SetId> {
        if let Some(id) = self.find(set) {
            return Some(id);
        }
        let hash = hash(set);
        let next = self.len();
        if next >= self.max_sets {
            return None;
        }
        let id = u32::try_from(next).ok()?;
        self.data.extend_from_slice(set);
        self.index.entry(hash).or_default().push(id);
        Some(SetId(id))
    }

    /// The set of the one input `bit`.
    pub(super) fn single(&mut self, bit: usize) -> Option<SetId> {
        let mut set = std::mem::take(&mut self.scratch);
        set.iter_mut().for_each(|w| *w = 0);
        set[bit / 64] |= 1 << (bit % 64);
        let id = self.intern(&set);
        self.scratch = set;
        id
    }

    /// The id of the set of the one input `bit`, if the table holds it (it adds nothing, so
    /// a full table is no problem: a set it does not hold is no slot's).
    pub(super) fn find_single(&mut self, bit: usize) -> Option<SetId> {
        let mut set = std::mem::take(&mut self.scratch);
        set.iter_mut().for_each(|w| *w = 0);
        set[bit / 64] |= 1 << (bit % 64);
        let id = self.find(&set);
        self.scratch = set;
        id
    }

    /// The id of `set`, if the table holds it.
    fn find(&self, set: &[u64]) -> Option<SetId> {
        let ids = self.index.get(&hash(set))?;
        ids.iter()
            .map(|&id| SetId(id))
            .find(|&id| self.get(id) == set)
    }

    /// `a ∪ b`.
    pub(super) fn union(&mut self, a: SetId, b: SetId) -> Option<SetId> {
        if a == b || b == SetId::EMPTY {
            return Some(a);
        }
        if a == SetId::EMPTY {
            return Some(b);
        }
        let mut set = std::mem::take(&mut self.scratch);
        for ((s, x), y) in set.iter_mut().zip(self.get(a)).zip(self.get(b)) {
            *s = x | y;
        }
        let id = self.intern(&set);
        self.scratch = set;
        id
    }

    /// `a ∩ b`, as words (for messages).
    pub(super) fn both(&self, a: SetId, b: SetId) -> Vec<u64> {
        self.get(a)
            .iter()
            .zip(self.get(b))
            .map(|(x, y)| x & y)
            .collect()
    }

    /// `a \ b`, as words (for messages).
    pub(super) fn minus(&self, a: SetId, b: SetId) -> Vec<u64> {
        self.get(a)
            .iter()
            .zip(self.get(b))
            .map(|(x, y)| x & !y)
            .collect()
    }

    /// Whether `a` and `b` share an input.
    pub(super) fn overlap(&self, a: SetId, b: SetId) -> bool {
        a != SetId::EMPTY
            && b != SetId::EMPTY
            && self.get(a).iter().zip(self.get(b)).any(|(x, y)| x & y != 0)
    }
}

/// A set's hash, for the table's index.
fn hash(set: &[u64]) -> u64 {
    set.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &w| {
        (h ^ w).wrapping_mul(0x0100_0000_01b3).rotate_left(5)
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn equal_sets_share_an_id_and_the_table_is_bounded() {
        let mut t = SetTable::new(2, 5);
        let a = t.single(3).unwrap();
        let b = t.single(70).unwrap();
        let ab = t.union(a, b).unwrap();
        assert_eq!(t.get(ab), &[1 << 3, 1 << 6]);
        assert_eq!(t.union(b, a), Some(ab));
        assert_eq!(t.single(3), Some(a));
        assert!(t.overlap(ab, a));
        assert!(!t.overlap(a, b));
        assert!(!t.overlap(SetId::EMPTY, ab));
        assert_eq!(t.minus(ab, a), vec![0, 1 << 6]);
        assert_eq!(t.both(ab, b), vec![0, 1 << 6]);
        assert_eq!(t.len(), 4);
        let c = t.single(0).unwrap();
        assert_eq!(t.len(), 5);
        // Full: a new set is refused, a known one still found.
        assert_eq!(t.union(c, a), None);
        assert_eq!(t.union(a, SetId::EMPTY), Some(a));
        assert_eq!(t.union(a, b), Some(ab));
    }
}
