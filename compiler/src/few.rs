//! A list of a few small `Copy` items held inline, spilling to the heap only past `N`.
//!
//! A lowering builds one transfer per hop of every chunk: on a deep pipeline hundreds of
//! thousands per candidate depth, each with a route of a few links and a handful of transfers
//! it waits for. Held in two `Vec`s, that was two or three allocations per transfer,
//! and allocating and freeing them took a fifth of a tree pipeline's compile. Held inline, a
//! transfer allocates nothing unless its route or its waits are longer than `N`.

use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Deref;

/// Up to `N` items inline, more on the heap; reads as a slice (`Deref<Target = [T]>`), and
/// compares and hashes as one, however it is held.
#[derive(Clone)]
pub enum Few<T: Copy, const N: usize> {
    /// `len` items (at least one), the first `len` of `items`; the rest repeat the first.
    Inline { len: u8, items: [T; N] },
    /// No item (an empty `Vec` allocates nothing), or more than `N`.
    Heap(Vec<T>),
}

impl<T: Copy, const N: usize> Few<T, N> {
    /// The empty list.
    pub fn new() -> Self {
        Few::Heap(Vec::new())
    }

    /// Appends `item`, moving the list to the heap when it outgrows `N`.
    pub fn push(&mut self, item: T) {
        match self {
            Few::Heap(list) if list.is_empty() && N > 0 => {
                *self = Few::Inline {
                    len: 1,
                    items: [item; N],
                }
            }
            Few::Inline { len, items } if usize::from(*len) < N.min(usize::from(u8::MAX)) => {
                items[usize::from(*len)] = item;
                *len += 1;
            }
            Few::Inline { len, items } => {
                let mut spilled = Vec::with_capacity(2 * N + 1);
                spilled.extend_from_slice(&items[..usize::from(*len)]);
                spilled.push(item);
                *self = Few::Heap(spilled);
            }
            Few::Heap(list) => list.push(item),
        }
    }

    /// The items, in order.
    pub fn as_slice(&self) -> &[T] {
        match self {
            Few::Inline { len, items } => &items[..usize::from(*len)],
            Few::Heap(list) => list,
        }
    }
}

impl<T: Copy, const N: usize> Default for Few<T, N> {
    fn default() -> Self {
        Few::new()
    }
}

impl<T: Copy, const N: usize> Deref for Few<T, N> {
    type Target = [T];

    fn deref(&self) -> &[T] {
        self.as_slice()
    }
}

impl<T: Copy, const N: usize> FromIterator<T> for Few<T, N> {
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
        let mut out = Few::new();
        for item in iter {
            out.push(item);
        }
        out
    }
}

impl<T: Copy, const N: usize> From<&[T]> for Few<T, N> {
    fn from(items: &[T]) -> Self {
        if items.len() <= N {
            items.iter().copied().collect()
        } else {
            Few::Heap(items.to_vec())
        }
    }
}

impl<T: Copy, const N: usize> From<Vec<T>> for Few<T, N> {
    fn from(items: Vec<T>) -> Self {
        if items.len() <= N {
            items.as_slice().into()
        } else {
            Few::Heap(items)
        }
    }
}

impl<'a, T: Copy, const N: usize> IntoIterator for &'a Few<T, N> {
    type Item = &'a T;
    type IntoIter = std::slice::Iter<'a, T>;

    fn into_iter(self) -> Self::IntoIter {
        self.as_slice().iter()
    }
}

impl<T: Copy + PartialEq, const N: usize> PartialEq for Few<T, N> {
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl<T: Copy + Eq, const N: usize> Eq for Few<T, N> {}

impl<T: Copy + PartialOrd, const N: usize> PartialOrd for Few<T, N> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        self.as_slice().partial_cmp(other.as_slice())
    }
}

impl<T: Copy + Ord, const N: usize> Ord for Few<T, N> {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.as_slice().cmp(other.as_slice())
    }
}

impl<T: Copy + Hash, const N: usize> Hash for Few<T, N> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_slice().hash(state);
    }
}

impl<T: Copy + fmt::Debug, const N: usize> fmt::Debug for Few<T, N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.as_slice().fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::Few;
    use std::collections::hash_map::DefaultHasher;
    use std::hash::{Hash, Hasher};

    fn hash<T: Hash + ?Sized>(x: &T) -> u64 {
        let mut h = DefaultHasher::new();
        x.hash(&mut h);
        h.finish()
    }

    /// Pushed one at a time past `N`, built from a slice or a `Vec` of any length, collected:
    /// every way gives the items in order, equal to each other and hashed as the slice.
    #[test]
    fn reads_compares_and_hashes_as_its_slice_whatever_its_length() {
        for n in 0..12u32 {
            let items: Vec<u32> = (0..n).map(|i| i * 7 + 1).collect();
            let mut pushed: Few<u32, 4> = Few::new();
            for &i in &items {
                pushed.push(i);
            }
            let from_slice: Few<u32, 4> = items.as_slice().into();
            let from_vec: Few<u32, 4> = items.clone().into();
            let collected: Few<u32, 4> = items.iter().copied().collect();
            for few in [&pushed, &from_slice, &from_vec, &collected] {
                assert_eq!(few.as_slice(), items.as_slice());
                assert_eq!(&**few, items.as_slice());
                assert_eq!(few.iter().count(), items.len());
                assert_eq!(hash(few), hash(items.as_slice()));
                assert_eq!(format!("{few:?}"), format!("{items:?}"));
                assert_eq!(*few, pushed);
            }
            assert_eq!(
                matches!(pushed, Few::Inline { .. }),
                (1..=4).contains(&n),
                "{n} items are held inline only from 1 up to 4"
            );
        }
        let mut longer: Few<u32, 2> = [1, 2].as_slice().into();
        assert_ne!(longer, Few::from([1, 2, 3].as_slice()));
        longer.push(3);
        assert_eq!(longer, Few::from(vec![1, 2, 3]));
        assert_ne!(longer, Few::default());
    }
}
