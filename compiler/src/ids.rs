//! Typed tables: vectors indexed by one kind of id only.
//!
//! The compiler keeps many tables beside the machine — a parent per node, a load per link
//! direction, a step per transfer, a share per tree. Kept as `Vec<T>` indexed by `usize`, a
//! node number could index a table of links and a malformed machine could make a lookup
//! panic. An [`IdVec<I, T>`] is indexed only by its id kind `I`: an id of another kind does not
//! compile, ids it hands out ([`IdVec::push`], [`IdVec::ids`]) are in range by construction,
//! and an id from elsewhere (user data, another table) is looked up with [`IdVec::get`], which
//! answers `None` rather than panicking.
//!
//! The id kinds are the schedule IR's ([`NodeId`], [`RankId`], [`LinkId`], [`DirectionId`], …)
//! and the compiler's own, declared with `compiler_id!`: a tree of a packing
//! ([`TreeId`]), a transfer of a DAG ([`crate::lower::dag::TransferId`]).

use schedule_ir::{BufferId, ChunkId, DirectionId, LinkId, NodeId, RankId, StepId};
use std::fmt;
use std::iter::FromIterator;
use std::marker::PhantomData;
use std::ops::{Index, IndexMut};

/// An id that indexes a table: a position that converts to and from `usize`.
pub trait Id: Copy + Eq + Ord + fmt::Debug {
    /// The id at `index`. Saturates past the id's range, so that no input can make it panic:
    /// such an id is out of range of every table and refused like any id out of range.
    fn from_index(index: usize) -> Self;

    /// The position this id stands for in its tables.
    fn to_index(self) -> usize;
}

macro_rules! ir_ids {
    ($($id:ty),*) => {$(
        impl Id for $id {
            fn from_index(index: usize) -> Self {
                <$id>::new(index)
            }

            fn to_index(self) -> usize {
                self.index()
            }
        }
    )*};
}

ir_ids!(NodeId, RankId, LinkId, ChunkId, BufferId, StepId);

impl Id for DirectionId {
    fn from_index(index: usize) -> Self {
        // `new` saturates at u32::MAX for a link past the range: the same out-of-range id.
        DirectionId::from_index(index).unwrap_or(DirectionId::new(LinkId(u32::MAX), true))
    }

    fn to_index(self) -> usize {
        self.index()
    }
}

/// Declares a compiler id kind: a `u32` newtype with a saturating `new`, `index`, a `Display`
/// that reads like the diagnostics (`ring 2`), and an [`Id`] impl.
macro_rules! compiler_id {
    ($(#[$doc:meta])* $name:ident, $prefix:literal) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(pub u32);

        impl $name {
            /// The id's index in the tables it indexes.
            pub fn index(self) -> usize {
                self.0 as usize
            }

            /// The id at `index`; saturates beyond `u32::MAX` (such an id is then out of
            /// range of every table, and refused like any id out of range).
            pub fn new(index: usize) -> Self {
                Self(u32::try_from(index).unwrap_or(u32::MAX))
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, concat!($prefix, "{}"), self.0)
            }
        }

        impl $crate::ids::Id for $name {
            fn from_index(index: usize) -> Self {
                Self::new(index)
            }

            fn to_index(self) -> usize {
                self.index()
            }
        }
    };
}
pub(crate) use compiler_id;

compiler_id!(
    /// A tree of a packing of spanning trees, in the order the packing gives them.
    TreeId,
    "tree "
);

compiler_id!(
    /// A logical ring of a ring schedule (a ring walked one way), in the schedule's order.
    RingId,
    "ring "
);

/// A vector indexed by the id kind `I` only (see the [module doc](self)).
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct IdVec<I, T> {
    raw: Vec<T>,
    id: PhantomData<fn(I) -> I>,
}

impl<I: Id, T> IdVec<I, T> {
    /// An empty table.
    pub fn new() -> Self {
        IdVec::from_raw(Vec::new())
    }

    /// An empty table with room for `capacity` entries.
    pub fn with_capacity(capacity: usize) -> Self {
        IdVec::from_raw(Vec::with_capacity(capacity))
    }

    /// The table whose entry `i` is `raw[i]`.
    pub fn from_raw(raw: Vec<T>) -> Self {
        IdVec {
            raw,
            id: PhantomData,
        }
    }

    /// The table of `len` entries, entry `id` being `f(id)`.
    pub fn from_fn(len: usize, f: impl FnMut(I) -> T) -> Self {
        (0..len).map(I::from_index).map(f).collect()
    }

    /// Appends `value`; returns its id.
    pub fn push(&mut self, value: T) -> I {
        let id = I::from_index(self.raw.len());
        self.raw.push(value);
        id
    }

    /// How many entries there are.
    pub fn len(&self) -> usize {
        self.raw.len()
    }

    /// Whether there is no entry.
    pub fn is_empty(&self) -> bool {
        self.raw.is_empty()
    }

    /// The entry of `id`; `None` when `id` is out of range.
    pub fn get(&self, id: I) -> Option<&T> {
        self.raw.get(id.to_index())
    }

    /// The entry of `id` to change; `None` when `id` is out of range.
    pub fn get_mut(&mut self, id: I) -> Option<&mut T> {
        self.raw.get_mut(id.to_index())
    }

    /// Every id, in order.
    pub fn ids(&self) -> impl DoubleEndedIterator<Item = I> + ExactSizeIterator + Clone {
        (0..self.raw.len()).map(I::from_index)
    }

    /// Every entry, in id order.
    pub fn iter(&self) -> std::slice::Iter<'_, T> {
        self.raw.iter()
    }

    /// Every entry to change, in id order.
    pub fn iter_mut(&mut self) -> std::slice::IterMut<'_, T> {
        self.raw.iter_mut()
    }

    /// Every entry with its id, in id order.
    pub fn iter_enumerated(&self) -> impl DoubleEndedIterator<Item = (I, &T)> + Clone {
        self.raw
            .iter()
            .enumerate()
            .map(|(i, t)| (I::from_index(i), t))
    }

    /// The entries in id order, for code that reads them all (sums, sorts, output).
    pub fn as_slice(&self) -> &[T] {
        &self.raw
    }

    /// The entries in id order, leaving the table.
    pub fn into_raw(self) -> Vec<T> {
        self.raw
    }
}

impl<I: Id, T: Clone> IdVec<I, T> {
    /// The table of `len` copies of `value`.
    pub fn filled(value: T, len: usize) -> Self {
        IdVec::from_raw(vec![value; len])
    }
}

impl<I: Id, T> Default for IdVec<I, T> {
    fn default() -> Self {
        IdVec::new()
    }
}

impl<I: Id, T: fmt::Debug> fmt::Debug for IdVec<I, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(&self.raw).finish()
    }
}

/// Indexing by an id this table handed out, or that came from a table of the same length;
/// an id from outside goes through [`IdVec::get`].
impl<I: Id, T> Index<I> for IdVec<I, T> {
    type Output = T;

    fn index(&self, id: I) -> &T {
        &self.raw[id.to_index()]
    }
}

impl<I: Id, T> IndexMut<I> for IdVec<I, T> {
    fn index_mut(&mut self, id: I) -> &mut T {
        &mut self.raw[id.to_index()]
    }
}

impl<I: Id, T> FromIterator<T> for IdVec<I, T> {
    fn from_iter<It: IntoIterator<Item = T>>(iter: It) -> Self {
        IdVec::from_raw(iter.into_iter().collect())
    }
}

impl<I: Id, T> Extend<T> for IdVec<I, T> {
    fn extend<It: IntoIterator<Item = T>>(&mut self, iter: It) {
        self.raw.extend(iter);
    }
}

impl<'a, I: Id, T> IntoIterator for &'a IdVec<I, T> {
    type Item = &'a T;
    type IntoIter = std::slice::Iter<'a, T>;

    fn into_iter(self) -> Self::IntoIter {
        self.raw.iter()
    }
}

impl<'a, I: Id, T> IntoIterator for &'a mut IdVec<I, T> {
    type Item = &'a mut T;
    type IntoIter = std::slice::IterMut<'a, T>;

    fn into_iter(self) -> Self::IntoIter {
        self.raw.iter_mut()
    }
}

impl<I: Id, T> IntoIterator for IdVec<I, T> {
    type Item = T;
    type IntoIter = std::vec::IntoIter<T>;

    fn into_iter(self) -> Self::IntoIter {
        self.raw.into_iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn push_hands_out_ids_in_order_and_get_refuses_an_id_out_of_range() {
        let mut t: IdVec<NodeId, &str> = IdVec::new();
        assert_eq!(t.push("a"), NodeId(0));
        assert_eq!(t.push("b"), NodeId(1));
        assert_eq!(t[NodeId(1)], "b");
        assert_eq!(t.get(NodeId(2)), None);
        assert_eq!(t.get(NodeId::new(usize::MAX)), None);
        let pairs: Vec<_> = t.iter_enumerated().collect();
        assert_eq!(pairs, vec![(NodeId(0), &"a"), (NodeId(1), &"b")]);
    }

    #[test]
    fn from_fn_gives_each_id_its_entry() {
        let t: IdVec<DirectionId, (LinkId, bool)> =
            IdVec::from_fn(4, |d: DirectionId| (d.link(), d.backward()));
        assert_eq!(
            t.as_slice(),
            &[
                (LinkId(0), false),
                (LinkId(0), true),
                (LinkId(1), false),
                (LinkId(1), true)
            ]
        );
        assert_eq!(t.ids().last(), Some(DirectionId::new(LinkId(1), true)));
    }

    #[test]
    fn a_compiler_id_past_u32_saturates_and_is_out_of_range() {
        let t: IdVec<TreeId, u8> = IdVec::filled(0, 3);
        assert_eq!(TreeId::new(usize::MAX), TreeId(u32::MAX));
        assert_eq!(t.get(TreeId::new(usize::MAX)), None);
        assert_eq!(TreeId(2).to_string(), "tree 2");
        assert_eq!(
            <DirectionId as Id>::from_index(usize::MAX),
            DirectionId::new(LinkId(u32::MAX), true)
        );
    }
}
