//! Chunk lists written as runs: the compact form's chunk lists (`docs/ir.md`, "The compact
//! form").
//!
//! A chunk list is a sequence of items. An item is a chunk id, or a run
//! `(start, [(count₁, stride₁), …, (countₖ, strideₖ)])` naming the ids
//! `start + i₁·stride₁ + … + iₖ·strideₖ` for every `0 ≤ iⱼ < countⱼ`, the last index varying
//! fastest: `(1080, [(8, 1)])` is `1080 … 1087`, `(1080, [(3, 64), (8, 1)])` three such blocks
//! 64 apart. The list is the items' ids in order. Reading accepts ids and runs mixed, so an
//! explicit list is also a valid compact one; writing uses runs only in the compact form: the
//! RON writer cuts lists with an `Encoder` of its own, serde (JSON) for the duration of one
//! [`super::to_string_with`] call.
//!
//! A run is a few bytes of text however many ids it names, so reading refuses an empty run, a
//! zero stride (it repeats an id), an id past `u32::MAX`, and runs that expand past
//! [`MAX_EXPANDED_CHUNK_IDS`](crate::limits::MAX_EXPANDED_CHUNK_IDS) ids in one file, before
//! expanding any of them.

use crate::limits::MAX_EXPANDED_CHUNK_IDS;
use crate::{ChunkId, ChunkIds};
use serde::de::{Error as _, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::cell::Cell;
use std::fmt;

thread_local! {
    /// Whether chunk lists are being written as runs (set by [`Compact`]).
    static COMPACT: Cell<bool> = const { Cell::new(false) };
    /// How many more ids runs may expand to in the file being read (reset by [`Budget`]).
    static BUDGET: Cell<u64> = const { Cell::new(MAX_EXPANDED_CHUNK_IDS) };
}

/// While alive, chunk lists serialised on this thread are written as runs.
pub(super) struct Compact {
    before: bool,
}

impl Compact {
    pub(super) fn on(compact: bool) -> Compact {
        Compact {
            before: COMPACT.with(|c| c.replace(compact)),
        }
    }
}

impl Drop for Compact {
    fn drop(&mut self) {
        COMPACT.with(|c| c.set(self.before));
    }
}

/// Starts reading one file: its runs may expand to [`MAX_EXPANDED_CHUNK_IDS`] ids in all.
pub(super) fn new_file() {
    BUDGET.with(|b| b.set(MAX_EXPANDED_CHUNK_IDS));
}

/// One item of a written chunk list.
#[derive(Serialize, Deserialize)]
#[cfg_attr(test, derive(Debug, PartialEq))]
#[serde(
    untagged,
    expecting = "a chunk id or a run (start, [(count, stride), …]) of chunk ids"
)]
enum Item {
    Id(u32),
    Run(u32, Vec<(u32, u32)>),
}

/// Writes `chunks`: a plain list of ids, or in the compact form items of runs.
pub fn serialize<S: Serializer>(chunks: &ChunkIds, s: S) -> Result<S::Ok, S::Error> {
    if COMPACT.with(Cell::get) {
        encode(chunks).serialize(s)
    } else {
        use serde::ser::SerializeSeq;
        let mut seq = s.serialize_seq(Some(chunks.len()))?;
        for id in chunks.iter() {
            seq.serialize_element(&id)?;
        }
        seq.end()
    }
}

/// Reads a chunk list of ids and runs, expanding the runs.
pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<ChunkIds, D::Error> {
    d.deserialize_seq(ListVisitor)
}

struct ListVisitor;

impl<'de> Visitor<'de> for ListVisitor {
    type Value = ChunkIds;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a list of chunk ids and runs")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<ChunkIds, A::Error> {
        let mut ids = ChunkIds::new();
        while let Some(item) = seq.next_element::<Item>()? {
            match item {
                Item::Id(id) => ids.push(ChunkId(id)),
                Item::Run(start, dims) => {
                    let count = check(start, &dims).map_err(A::Error::custom)?;
                    let left = BUDGET.with(Cell::get);
                    if count > left {
                        return Err(A::Error::custom(format!(
                            "chunk run {} names {count} ids, past the {MAX_EXPANDED_CHUNK_IDS} \
                             runs of one file may expand to",
                            show(start, &dims)
                        )));
                    }
                    BUDGET.with(|b| b.set(left - count));
                    expand(start, &dims, &mut ids);
                }
            }
        }
        Ok(ids)
    }
}

/// A run as written.
fn show(start: u32, dims: &[(u32, u32)]) -> String {
    let dims: Vec<String> = dims.iter().map(|(c, s)| format!("({c}, {s})")).collect();
    format!("({start}, [{}])", dims.join(", "))
}

/// How many ids the run names, or why it is malformed.
fn check(start: u32, dims: &[(u32, u32)]) -> Result<u64, String> {
    if dims.is_empty() {
        return Err(format!(
            "chunk run {} has no (count, stride): write at least one",
            show(start, dims)
        ));
    }
    let mut count: u64 = 1;
    let mut last = u64::from(start);
    for &(c, s) in dims {
        if c == 0 {
            return Err(format!(
                "chunk run {} is empty: every count must be at least 1",
                show(start, dims)
            ));
        }
        if s == 0 && c > 1 {
            return Err(format!(
                "chunk run {} repeats an id: a stride must be at least 1",
                show(start, dims)
            ));
        }
        count = count.saturating_mul(u64::from(c));
        last = last.saturating_add(u64::from(c - 1) * u64::from(s));
    }
    if last > u64::from(u32::MAX) {
        return Err(format!(
            "chunk run {} reaches chunk {last}, past the largest id {}",
            show(start, dims),
            u32::MAX
        ));
    }
    Ok(count)
}

/// Appends the run's ids, the last dimension fastest. [`check`] has bounded every id.
fn expand(start: u32, dims: &[(u32, u32)], out: &mut ChunkIds) {
    match dims.split_first() {
        None => out.push(ChunkId(start)),
        // The innermost dimension: one run, however many ids.
        Some((&(count, stride), [])) => out.push_run(crate::ChunkRun {
            start,
            len: count,
            stride: if count > 1 { stride } else { 1 },
        }),
        Some((&(count, stride), inner)) => {
            for i in 0..count {
                expand(start + i * stride, inner, out);
            }
        }
    }
}

/// A maximal stretch of the list with a constant positive stride: `count` ids from `start`.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Stretch {
    start: u32,
    count: u32,
    stride: u32,
}

/// One item of a chunk list as written, held without allocating: an id, or a run of `count`
/// ids `stride` apart, repeated in `blocks` (how many, and how far apart their starts are)
/// when it is a two-level run.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Written {
    Id(u32),
    Run {
        start: u32,
        blocks: Option<(u32, u32)>,
        count: u32,
        stride: u32,
    },
}

impl From<Written> for Item {
    fn from(item: Written) -> Item {
        match item {
            Written::Id(id) => Item::Id(id),
            Written::Run {
                start,
                blocks: Some(blocks),
                count,
                stride,
            } => Item::Run(start, vec![blocks, (count, stride)]),
            Written::Run {
                start,
                blocks: None,
                count,
                stride,
            } => Item::Run(start, vec![(count, stride)]),
        }
    }
}

/// The list as items ([`Encoder::items`]), for serde.
fn encode(chunks: &ChunkIds) -> Vec<Item> {
    Encoder::default()
        .items(chunks)
        .iter()
        .map(|&item| Item::from(item))
        .collect()
}

/// Cuts chunk lists into the items the compact form writes, in buffers kept from one list to
/// the next: a schedule has millions of lists, and allocating for each one cost more than
/// writing it.
#[derive(Default)]
pub(super) struct Encoder {
    ids: Vec<u32>,
    stretches: Vec<Stretch>,
    items: Vec<Written>,
}

impl Encoder {
    /// The list as items: stretches of three or more ids become runs, and equal runs whose
    /// starts step evenly become one two-level run. Expanding the items gives back exactly
    /// `chunks`.
    pub(super) fn items(&mut self, chunks: &ChunkIds) -> &[Written] {
        self.ids.clear();
        for run in chunks.runs() {
            self.ids.extend(run.ids().map(|id| id.0));
        }
        stretches(&self.ids, &mut self.stretches);
        let stretches = &self.stretches;
        let items = &mut self.items;
        items.clear();
        let mut i = 0;
        while i < stretches.len() {
            let a = stretches[i];
            if a.count < 2 {
                items.push(Written::Id(a.start));
                i += 1;
                continue;
            }
            // Following stretches of the same shape whose starts step by the same amount.
            let mut j = i + 1;
            let step = stretches
                .get(j)
                .filter(|b| b.count == a.count && b.stride == a.stride && b.start > a.start)
                .map(|b| b.start - a.start);
            if let Some(step) = step {
                while let Some(b) = stretches.get(j) {
                    let prev = stretches[j - 1];
                    if b.count == a.count
                        && b.stride == a.stride
                        && b.start.checked_sub(prev.start) == Some(step)
                    {
                        j += 1;
                    } else {
                        break;
                    }
                }
            }
            let blocks = (j - i) as u32;
            items.push(Written::Run {
                start: a.start,
                blocks: (blocks > 1).then(|| (blocks, step.unwrap_or(0))),
                count: a.count,
                stride: a.stride,
            });
            i = j;
        }
        items
    }
}

/// The list `ids` cut into maximal stretches of constant positive stride, greedily from the
/// front, into `out`; a stretch of two is kept only when no longer one starts at its second
/// id.
fn stretches(ids: &[u32], out: &mut Vec<Stretch>) {
    out.clear();
    let mut i = 0;
    while i < ids.len() {
        let start = ids[i];
        let Some(stride) = ids
            .get(i + 1)
            .and_then(|&next| next.checked_sub(start))
            .filter(|&s| s > 0)
        else {
            out.push(Stretch {
                start,
                count: 1,
                stride: 1,
            });
            i += 1;
            continue;
        };
        let mut j = i + 1;
        while ids.get(j + 1).and_then(|&n| n.checked_sub(ids[j])) == Some(stride) {
            j += 1;
        }
        let count = j - i + 1;
        if count == 2 {
            // A pair: the first id alone, the second may start a longer stretch.
            out.push(Stretch {
                start,
                count: 1,
                stride: 1,
            });
            i += 1;
            continue;
        }
        out.push(Stretch {
            start,
            count: count as u32,
            stride,
        });
        i = j + 1;
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ids(v: &[u32]) -> Vec<ChunkId> {
        v.iter().map(|&i| ChunkId(i)).collect()
    }

    fn list(v: &[u32]) -> ChunkIds {
        ChunkIds::from_ids(&ids(v))
    }

    fn round_trip(v: &[u32]) -> Vec<ChunkId> {
        let mut out = ChunkIds::new();
        for item in encode(&list(v)) {
            match item {
                Item::Id(i) => out.push(ChunkId(i)),
                Item::Run(start, dims) => {
                    check(start, &dims).unwrap();
                    expand(start, &dims, &mut out);
                }
            }
        }
        out.to_vec()
    }

    #[test]
    fn blocks_and_progressions_become_runs_and_expand_back() {
        let blocks: Vec<u32> = (0..4)
            .flat_map(|b| (1080 + 64 * b)..(1088 + 64 * b))
            .collect();
        let items = encode(&list(&blocks));
        assert_eq!(items.len(), 1);
        assert!(matches!(&items[0], Item::Run(1080, d) if d == &vec![(4, 64), (8, 1)]));
        for v in [
            blocks.clone(),
            (0..100).map(|i| 7 + 8 * i).collect(),
            vec![5, 3, 1, 2, 3, 4, 9, 10],
            vec![7, 1080, 1081, 1082, 9],
            vec![],
            vec![0],
            vec![1, 2],
            vec![u32::MAX - 2, u32::MAX - 1, u32::MAX],
        ] {
            assert_eq!(round_trip(&v), ids(&v), "{v:?}");
        }
    }

    /// The items as they were cut before [`Encoder`] kept its buffers from one list to the
    /// next, with a fresh vector for everything: the reference [`Encoder::items`] must agree
    /// with.
    fn reference_encode(chunks: &[ChunkId]) -> Vec<Item> {
        let stretches = reference_stretches(chunks);
        let mut items = Vec::new();
        let mut i = 0;
        while i < stretches.len() {
            let a = stretches[i];
            if a.count < 2 {
                items.push(Item::Id(a.start));
                i += 1;
                continue;
            }
            // Following stretches of the same shape whose starts step by the same amount.
            let mut j = i + 1;
            let step = stretches
                .get(j)
                .filter(|b| b.count == a.count && b.stride == a.stride && b.start > a.start)
                .map(|b| b.start - a.start);
            if let Some(step) = step {
                while let Some(b) = stretches.get(j) {
                    let prev = stretches[j - 1];
                    if b.count == a.count
                        && b.stride == a.stride
                        && b.start.checked_sub(prev.start) == Some(step)
                    {
                        j += 1;
                    } else {
                        break;
                    }
                }
            }
            let blocks = (j - i) as u32;
            let dims = if blocks > 1 {
                vec![(blocks, step.unwrap_or(0)), (a.count, a.stride)]
            } else {
                vec![(a.count, a.stride)]
            };
            items.push(Item::Run(a.start, dims));
            i = j;
        }
        items
    }

    /// The list's stretches, by the encoder's own cut ([`stretches`]): what the reference
    /// checks is how the encoder joins them into runs, reusing its buffers; the cut itself is
    /// held to the list by this module's round trips.
    fn reference_stretches(chunks: &[ChunkId]) -> Vec<Stretch> {
        let ids: Vec<u32> = chunks.iter().map(|c| c.0).collect();
        let mut out = Vec::new();
        stretches(&ids, &mut out);
        out
    }

    /// Lists of every shape: random ids, progressions, blocks of them, one after another.
    fn lists() -> impl Strategy<Value = Vec<u32>> {
        let random = prop::collection::vec(prop_oneof![0..20u32, any::<u32>()], 0..10);
        let stretch = (0..100u32, 1..5u32, 0..12u32)
            .prop_map(|(start, stride, len)| (0..len).map(|i| start + i * stride).collect());
        let blocks = (0..100u32, 1..4u32, 1..40u32, 1..6u32, 1..3u32).prop_map(
            |(start, blocks, step, count, stride)| {
                (0..blocks)
                    .flat_map(|b| (0..count).map(move |i| start + b * step + i * stride))
                    .collect()
            },
        );
        prop::collection::vec(prop_oneof![random, stretch, blocks], 0..5)
            .prop_map(|pieces: Vec<Vec<u32>>| pieces.concat())
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

        /// One encoder, reused from list to list as the RON writer reuses it, cuts every list
        /// as the reference does.
        #[test]
        fn a_reused_encoder_cuts_lists_as_the_reference_does(
            lists in prop::collection::vec(lists(), 1..6)
        ) {
            let mut encoder = Encoder::default();
            for v in lists {
                let items: Vec<Item> =
                    encoder.items(&list(&v)).iter().map(|&i| Item::from(i)).collect();
                prop_assert_eq!(&items, &reference_encode(&ids(&v)), "{:?}", v);
                prop_assert_eq!(round_trip(&v), ids(&v));
            }
        }
    }

    #[test]
    fn malformed_runs_are_named() {
        assert!(check(5, &[(0, 1)]).unwrap_err().contains("is empty"));
        assert!(check(5, &[]).unwrap_err().contains("no (count, stride)"));
        assert!(check(5, &[(2, 0)]).unwrap_err().contains("repeats"));
        assert!(check(u32::MAX, &[(2, 1)])
            .unwrap_err()
            .contains("past the largest id"));
        assert_eq!(check(3, &[(1, 0)]), Ok(1));
        assert_eq!(check(0, &[(3, 64), (8, 1)]), Ok(24));
    }

    #[derive(Deserialize)]
    struct List(#[serde(with = "super")] ChunkIds);

    #[test]
    fn runs_share_one_budget_per_file_and_are_refused_before_expanding() {
        new_file();
        BUDGET.with(|b| b.set(10));
        let read = |text: &str| serde_json::from_str::<List>(text).map(|l| l.0.len());
        assert_eq!(read("[[0, [[6, 1]]], 99]").unwrap(), 7);
        // 4 ids left: a run of 5 is refused, explicit ids do not count.
        let e = read("[[0, [[5, 1]]]]").unwrap_err().to_string();
        assert!(e.contains("names 5 ids, past the"), "{e}");
        assert_eq!(read("[1, 2, 3, 4, 5, 6, 7, 8, 9]").unwrap(), 9);
        assert_eq!(read("[[0, [[2, 1], [2, 5]]]]").unwrap(), 4);
        new_file();
        assert_eq!(read("[[0, [[5, 1]]]]").unwrap(), 5);
    }
}
