//! Input sets for the correctness pass, each distinct set stored once, and stored small.
//!
//! A set of compute nodes is a bitset of `words` `u64`s. Schedules hold few distinct sets —
//! a ring's partial sums are runs of consecutive ring positions, halving-doubling's are the
//! ranks that share some bits, and the end state of an allreduce is the same full set on every
//! node and chunk — while the (node, buffer, chunk) slots that hold them are many. So the
//! table keeps each distinct set once and a slot holds its [`SetId`]: four bytes per slot
//! instead of `words · 8`, and equal sets have equal ids.
//!
//! Most of those sets are also small: every input alone, and the partial sums of the first
//! rounds of a halving or a tree, which combine a handful of inputs. A set whose nonzero words
//! are fewer than half its words is stored **sparse**, as (word index, word) pairs: an input
//! alone takes two words instead of `words`, so on a 32 768-node hypercube (512 words a set)
//! the sets of a halving's first nine rounds take a few megabytes instead of gigabytes. The
//! sets are exact; only their storage differs, so every check sees the same sets as with one
//! bitset per slot.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A set in a [`SetTable`]. [`SetId::EMPTY`] is the empty set: an undefined chunk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct SetId(u32);

impl SetId {
    /// The empty set, interned first.
    pub(super) const EMPTY: SetId = SetId(0);
}

/// Where a set's words are in [`SetTable::data`].
#[derive(Clone, Copy, Debug)]
struct Stored {
    /// The first word.
    start: usize,
    /// Dense: the set's `words` words. Sparse: `2 · nonzero` words, each nonzero word's index
    /// then the word, by increasing index.
    sparse: bool,
    /// The set stored before it with the same [`hash`], if any ([`NONE`]).
    earlier: u32,
}

/// No set: the end of a chain of [`Stored::earlier`].
const NONE: u32 = u32::MAX;

/// The index's keys are [`hash`]es already: they are mixed once more (splitmix64's finaliser)
/// so that every bit of the key reaches the bits the map reads, instead of being hashed again
/// from scratch, which took a tenth of a 1 024-node mesh's verification.
#[derive(Clone, Copy, Default)]
struct Mixed(u64);

impl Hasher for Mixed {
    fn finish(&self) -> u64 {
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 ^= n;
    }
}

/// Bookkeeping words a set costs beyond its data: where it is stored and its index entry.
pub(super) const SET_OVERHEAD_WORDS: usize = 4;

/// Every distinct set met so far.
pub(super) struct SetTable {
    words: usize,
    /// Every set's words, as [`Stored`] says.
    data: Vec<u64>,
    /// By set id.
    stored: Vec<Stored>,
    /// Hash of a set ([`hash`]) → the last id stored with that hash (the others are chained
    /// by [`Stored::earlier`]).
    index: HashMap<u64, u32, BuildHasherDefault<Mixed>>,
    /// The most words the table may hold, data and bookkeeping ([`SET_OVERHEAD_WORDS`] per
    /// set) together.
    max_words: usize,
    /// Room for one set being built.
    scratch: Vec<u64>,
}

impl SetTable {
    /// A table of sets of `words` words holding at most `max_words` words in all (and at
    /// least the empty set).
    pub(super) fn new(words: usize, max_words: usize) -> Self {
        let mut table = SetTable {
            words: words.max(1),
            data: Vec::new(),
            stored: Vec::new(),
            index: HashMap::default(),
            max_words,
            scratch: vec![0; words.max(1)],
        };
        let empty = vec![0; table.words];
        table.insert(hash(&empty), &empty);
        table
    }

    /// How many distinct sets the table holds.
    pub(super) fn len(&self) -> usize {
        self.stored.len()
    }

    /// How many words the table holds, bookkeeping included.
    pub(super) fn used_words(&self) -> usize {
        self.data.len() + SET_OVERHEAD_WORDS * self.stored.len()
    }

    /// The most words the table may hold.
    pub(super) fn max_words(&self) -> usize {
        self.max_words
    }

    /// The words of `id`, dense (for messages and the few checks that read a whole set).
    pub(super) fn dense(&self, id: SetId) -> Vec<u64> {
        let mut set = vec![0; self.words];
        self.or_into(id, &mut set);
        set
    }

    /// ORs the words of `id` into `set`.
    fn or_into(&self, id: SetId, set: &mut [u64]) {
        let s = self.stored[id.0 as usize];
        if s.sparse {
            for pair in self.sparse_pairs(id) {
                if let Some(w) = set.get_mut(pair[0] as usize) {
                    *w |= pair[1];
                }
            }
        } else {
            for (w, &x) in set
                .iter_mut()
                .zip(&self.data[s.start..s.start + self.words])
            {
                *w |= x;
            }
        }
    }

    /// The (index, word) pairs of a sparse set, flat.
    fn pair_words(&self, id: SetId) -> &[u64] {
        let i = id.0 as usize;
        let start = self.stored[i].start;
        let end = self
            .stored
            .get(i + 1)
            .map_or(self.data.len(), |next| next.start);
        &self.data[start..end]
    }

    /// The (index, word) pairs of a sparse set.
    fn sparse_pairs(&self, id: SetId) -> std::slice::ChunksExact<'_, u64> {
        self.pair_words(id).chunks_exact(2)
    }

    /// Word `k` of `id`.
    fn word(&self, id: SetId, k: u64) -> u64 {
        let s = self.stored[id.0 as usize];
        if !s.sparse {
            return usize::try_from(k)
                .ok()
                .and_then(|k| self.data.get(s.start + k))
                .copied()
                .unwrap_or(0);
        }
        // Binary search over the pairs, by index.
        let flat = self.pair_words(id);
        let (mut lo, mut hi) = (0, flat.len() / 2);
        while lo < hi {
            let mid = (lo + hi) / 2;
            match flat[2 * mid].cmp(&k) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return flat[2 * mid + 1],
            }
        }
        0
    }

    /// Whether `id` is the set whose dense words are `set`.
    fn is(&self, id: SetId, set: &[u64]) -> bool {
        let s = self.stored[id.0 as usize];
        if s.sparse {
            let mut pairs = self.sparse_pairs(id).peekable();
            set.iter().enumerate().all(|(k, &w)| match pairs.peek() {
                Some(p) if p[0] as usize == k => {
                    let equal = p[1] == w;
                    pairs.next();
                    equal
                }
                _ => w == 0,
            })
        } else {
            &self.data[s.start..s.start + self.words] == set
        }
    }

    /// Adds `set` (dense) as a new set, sparse where that is smaller; `None` when the table
    /// has no room for it.
    fn insert(&mut self, hashed: u64, set: &[u64]) -> Option<SetId> {
        let nonzero = set.iter().filter(|&&w| w != 0).count();
        let sparse = 2 * nonzero < set.len();
        let size = if sparse { 2 * nonzero } else { set.len() };
        let id = u32::try_from(self.stored.len()).ok()?;
        // The empty set always fits: a table too small for anything still starts.
        if id > 0 && self.used_words() + size + SET_OVERHEAD_WORDS > self.max_words {
            return None;
        }
        let start = self.data.len();
        if sparse {
            for (k, &w) in set.iter().enumerate().filter(|(_, &w)| w != 0) {
                self.data.push(k as u64);
                self.data.push(w);
            }
        } else {
            self.data.extend_from_slice(set);
        }
        let earlier = self.index.insert(hashed, id).unwrap_or(NONE);
        self.stored.push(Stored {
            start,
            sparse,
            earlier,
        });
        Some(SetId(id))
    }

    /// The id of `set`, adding it if it is new; `None` when the table is full.
    pub(super) fn intern(&mut self, set: &[u64]) -> Option<SetId> {
        let hashed = hash(set);
        match self.find_hashed(hashed, set) {
            Some(id) => Some(id),
            None => self.insert(hashed, set),
        }
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
        self.find_hashed(hash(set), set)
    }

    /// [`SetTable::find`] of `set`, whose [`hash`] is `hashed`.
    fn find_hashed(&self, hashed: u64, set: &[u64]) -> Option<SetId> {
        let mut id = *self.index.get(&hashed)?;
        while id != NONE {
            if self.is(SetId(id), set) {
                return Some(SetId(id));
            }
            id = self.stored[id as usize].earlier;
        }
        None
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
        set.iter_mut().for_each(|w| *w = 0);
        self.or_into(a, &mut set);
        self.or_into(b, &mut set);
        let id = self.intern(&set);
        self.scratch = set;
        id
    }

    /// `a ∩ b`, as words (for messages).
    pub(super) fn both(&self, a: SetId, b: SetId) -> Vec<u64> {
        let b = self.dense(b);
        let mut set = self.dense(a);
        set.iter_mut().zip(&b).for_each(|(x, y)| *x &= y);
        set
    }

    /// `a \ b`, as words (for messages).
    pub(super) fn minus(&self, a: SetId, b: SetId) -> Vec<u64> {
        let b = self.dense(b);
        let mut set = self.dense(a);
        set.iter_mut().zip(&b).for_each(|(x, y)| *x &= !y);
        set
    }

    /// Whether `a` and `b` share an input: the nonzero words of one stored sparse against the
    /// same words of the other, or word by word where both are dense.
    pub(super) fn overlap(&self, a: SetId, b: SetId) -> bool {
        if a == SetId::EMPTY || b == SetId::EMPTY {
            return false;
        }
        let (sa, sb) = (self.stored[a.0 as usize], self.stored[b.0 as usize]);
        let against = |few: SetId, other: SetId| {
            self.sparse_pairs(few)
                .any(|p| p[1] & self.word(other, p[0]) != 0)
        };
        match (sa.sparse, sb.sparse) {
            (true, _) => against(a, b),
            (false, true) => against(b, a),
            (false, false) => self.data[sa.start..sa.start + self.words]
                .iter()
                .zip(&self.data[sb.start..sb.start + self.words])
                .any(|(x, y)| x & y != 0),
        }
    }
}

/// A set's hash, for the table's index: of its nonzero words and their indices only, so that
/// it does not depend on how the set is stored.
fn hash(set: &[u64]) -> u64 {
    set.iter()
        .enumerate()
        .filter(|(_, &w)| w != 0)
        .fold(0xcbf2_9ce4_8422_2325u64, |h, (k, &w)| {
            let h = (h ^ k as u64).wrapping_mul(0x0100_0000_01b3).rotate_left(5);
            (h ^ w).wrapping_mul(0x0100_0000_01b3).rotate_left(5)
        })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn equal_sets_share_an_id_and_the_table_is_bounded() {
        // Sets of 2 words: one nonzero word is not fewer than half, so these are dense.
        let room = |sets: usize| sets * (2 + SET_OVERHEAD_WORDS);
        let mut t = SetTable::new(2, room(5));
        let a = t.single(3).unwrap();
        let b = t.single(70).unwrap();
        let ab = t.union(a, b).unwrap();
        assert_eq!(t.dense(ab), [1 << 3, 1 << 6]);
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

    /// Sets whose hashes collide are told apart: each is found as itself, dense or sparse,
    /// and a third set with the same hash is not found.
    #[test]
    fn sets_with_one_hash_are_chained_and_told_apart() {
        let mut t = SetTable::new(4, usize::MAX);
        let sets: [[u64; 4]; 3] = [[1, 0, 0, 0], [7, 7, 7, 7], [0, 0, 0, 2]];
        let a = t.insert(42, &sets[0]).unwrap();
        let b = t.insert(42, &sets[1]).unwrap();
        assert_ne!(a, b);
        assert_eq!(t.find_hashed(42, &sets[0]), Some(a));
        assert_eq!(t.find_hashed(42, &sets[1]), Some(b));
        assert_eq!(t.find_hashed(42, &sets[2]), None);
        assert_eq!(t.find_hashed(43, &sets[0]), None);
        assert_eq!(t.dense(a), sets[0]);
        assert_eq!(t.dense(b), sets[1]);
    }

    /// Small sets of a wide table are stored as their nonzero words, and every operation
    /// gives what it gives on the dense words, whichever way each operand is stored.
    #[test]
    fn sparse_and_dense_sets_are_the_same_sets() {
        let words = 8;
        let mut t = SetTable::new(words, usize::MAX);
        let bits = |list: &[usize]| {
            let mut set = vec![0u64; words];
            for &b in list {
                set[b / 64] |= 1 << (b % 64);
            }
            set
        };
        let lists: [&[usize]; 6] = [
            &[0],
            &[511],
            &[1, 65, 300],
            &[0, 64, 128, 192, 256, 320, 384, 448],
            &[5, 70, 130, 200, 260, 330, 390, 450, 500],
            &[300, 301],
        ];
        let ids: Vec<SetId> = lists.iter().map(|l| t.intern(&bits(l)).unwrap()).collect();
        // One input takes two words, not eight.
        assert!(t.stored[ids[0].0 as usize].sparse);
        assert!(!t.stored[ids[3].0 as usize].sparse);
        for (i, &x) in ids.iter().enumerate() {
            assert_eq!(t.dense(x), bits(lists[i]));
            assert_eq!(t.intern(&bits(lists[i])), Some(x), "found again: {i}");
            for (j, &y) in ids.iter().enumerate() {
                let (dx, dy) = (bits(lists[i]), bits(lists[j]));
                let or: Vec<u64> = dx.iter().zip(&dy).map(|(a, b)| a | b).collect();
                let and: Vec<u64> = dx.iter().zip(&dy).map(|(a, b)| a & b).collect();
                let not: Vec<u64> = dx.iter().zip(&dy).map(|(a, b)| a & !b).collect();
                let u = t.union(x, y).unwrap();
                assert_eq!(t.dense(u), or, "{i} ∪ {j}");
                assert_eq!(t.intern(&or), Some(u));
                assert_eq!(t.both(x, y), and, "{i} ∩ {j}");
                assert_eq!(t.minus(x, y), not, "{i} \\ {j}");
                assert_eq!(t.overlap(x, y), and.iter().any(|&w| w != 0), "{i}, {j}");
            }
        }
    }
}
