//! The greedy all-gather synthesis: step by step, every link direction between compute nodes
//! is matched with chunks its sender holds and its receiver lacks.
//!
//! The directions take one chunk each in turn, and a sender gives each of its directions, where
//! it can, a chunk it gives no other in the step: a step costs its most loaded direction, and
//! directions filled one after another left the last into a node with nothing the first had
//! not taken, and one node's neighbours with the same chunks.
//!
//! State is one bitset of held chunks per node and the chunks' holder counts, bit-sliced a
//! word of 64 chunks at a time, so a pick costs a few word operations per word it scans, not
//! per candidate: with `C` chunks, `D` directions, `T` steps and `R` receptions the synthesis
//! is `O(T · D · C / 64 + R · w)` word operations, `w` the words a pick scans (up to its window
//! of candidates) — about 0.2 s for a 32 × 32 mesh with one chunk per node and eight per link
//! and step, 71 steps, in a release build. A direction into a node that already receives every
//! chunk it lacks is not scanned.
//!
//! Each node receives each chunk it lacks exactly once (a receiver never takes the same chunk
//! over two directions in one step), so every chunk spreads along an arborescence rooted at its
//! owner: the property the reduce-scatter's time reversal needs. Every step moves at least one
//! chunk while some node lacks one (the directions form a connected graph, so some direction
//! leads from a holder of a missing chunk to a node that lacks it, and the first such direction
//! considered takes it), so the synthesis ends within `C · (p - 1)` steps.

/// How many candidates [`Pick::Rarest`] and [`Pick::Exclusive`] weigh per pick, from a seeded
/// position: enough to find a rare chunk, and it keeps a pick's cost bounded whatever the chunk
/// count.
const RAREST_WINDOW: usize = 48;

/// One usable link direction between compute nodes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Direction {
    /// The sender, as an index into the compute nodes.
    pub from: usize,
    /// The receiver, as an index into the compute nodes.
    pub to: usize,
    /// How many chunks the direction carries per step.
    pub capacity: u32,
}

/// How a direction picks among the chunks its sender could give.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pick {
    /// The chunk held by the fewest nodes: rare chunks spread first, so that late steps still
    /// find something for every direction to carry.
    Rarest,
    /// Any candidate, from a seeded position: TACOS's random matching.
    Any,
    /// The chunk the fewest of the receiver's other senders hold or receive in the step,
    /// then the rarest: a chunk the receiver can get only over this direction before one it
    /// could also get elsewhere. Why: where a group of nodes is joined to the rest by few
    /// links (the two dies of an MI250X, a ladder's rungs), every chunk must cross those links
    /// into the group once, and a chunk brought to two of its nodes over them wastes the
    /// scarcest capacity; rarest first on an MI250X node filled every link for two thirds of
    /// the steps and then starved (31 steps where 24 is the least; 25 with this rule).
    Exclusive,
}

/// A synthesised all-gather: per step, per direction used in it (an index into the
/// directions given), the chunks it carries.
///
/// Kept flat, three arrays for the whole synthesis: on 1 024 nodes it carries a million
/// chunks, and a vector per step and direction took eight times their size.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Gather {
    /// Per step, the end of its uses in `uses` (each step starts where the one before ends).
    ends: Vec<u32>,
    /// Per use, its direction and the end of its chunks in `chunks` (each use starts where
    /// the one before ends).
    uses: Vec<(u32, u32)>,
    /// The chunks carried, use after use.
    chunks: Vec<u32>,
}

impl Gather {
    /// The number of steps.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Whether there is no step.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Step `t`: per direction used in it, its index and the chunks it carries.
    pub fn step(&self, t: usize) -> impl Iterator<Item = (usize, &[u32])> + Clone + '_ {
        let end = self.ends[t] as usize;
        let start = t.checked_sub(1).map_or(0, |s| self.ends[s] as usize);
        (start..end).map(move |u| {
            let from = u.checked_sub(1).map_or(0, |v| self.uses[v].1 as usize);
            let (d, to) = self.uses[u];
            (d as usize, &self.chunks[from..to as usize])
        })
    }

    /// Every step in order, as [`Gather::step`] gives it.
    pub fn steps(
        &self,
    ) -> impl DoubleEndedIterator<Item = impl Iterator<Item = (usize, &[u32])> + Clone + '_> + '_
    {
        (0..self.len()).map(|t| self.step(t))
    }

    /// Appends a step: per direction used, its index and the chunks it carries (a direction
    /// that carries none is left out).
    fn push<'a>(&mut self, step: impl IntoIterator<Item = (usize, &'a [u32])>) {
        let index = |i: usize| u32::try_from(i).unwrap_or(u32::MAX);
        for (d, carried) in step {
            if !carried.is_empty() {
                self.chunks.extend_from_slice(carried);
                self.uses.push((index(d), index(self.chunks.len())));
            }
        }
        self.ends.push(index(self.uses.len()));
    }
}

/// A small deterministic generator (splitmix64): tie-breaks and direction orders depend on
/// the seed only, so the same machine always gives the same schedule.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator started at `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn bits(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number below `n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.bits() % n as u64) as usize
        }
    }
}

/// Synthesises an all-gather of `chunks` chunks over `nodes` compute nodes, chunk `c` starting
/// on node `owner(c)`, over `directions` (which must connect the nodes). Returns `None` if
/// the synthesis stalls (only when the directions do not connect the nodes) or passes
/// `max_steps`.
pub fn gather(
    nodes: usize,
    chunks: usize,
    owner: impl Fn(usize) -> usize,
    directions: &[Direction],
    pick: Pick,
    seed: u64,
    max_steps: usize,
) -> Option<Gather> {
    let words = chunks.div_ceil(64).max(1);
    let mut held = vec![0u64; nodes * words];
    let mut incoming = vec![0u64; nodes * words];
    let mut holders = Sliced::new(words, nodes);
    let mut missing = (nodes * chunks) as u64;
    for c in 0..chunks {
        let o = owner(c);
        if o < nodes {
            held[o * words + c / 64] |= 1 << (c % 64);
            holders.add(c / 64, 1 << (c % 64));
            missing -= 1;
        }
    }
    // lacking[v]: the chunks node v lacks; inbound[v]: the chunks its directions bring per step.
    let mut lacking = vec![chunks as u64; nodes];
    for c in 0..chunks {
        if let Some(l) = lacking.get_mut(owner(c)) {
            *l -= 1;
        }
    }
    let mut inbound = vec![0u64; nodes];
    for d in directions {
        inbound[d.to] += u64::from(d.capacity);
    }
    let mut rng = Rng::new(seed);
    // senders[v]: the nodes with a direction into v, each once.
    let mut senders: Vec<Vec<usize>> = vec![Vec::new(); nodes];
    for d in directions {
        if !senders[d.to].contains(&d.from) {
            senders[d.to].push(d.from);
        }
    }
    let mut order: Vec<usize> = (0..directions.len()).collect();
    let mut loads: Vec<Vec<u32>> = vec![Vec::new(); directions.len()];
    let mut out = Gather::default();
    let mut arrivals: Vec<(usize, u32)> = Vec::new();
    // given[v]: the chunks node v sends over some direction in this step.
    let mut given = vec![0u64; nodes * words];
    let mut limit = vec![0u32; directions.len()];
    let mut open: Vec<usize> = Vec::with_capacity(directions.len());
    // awaited[v]: the chunks node v lacks and receives over no direction in this step; where
    // none are left, no direction into v has anything to carry, and none is scanned.
    let mut awaited = lacking.clone();
    let most_senders = senders.iter().map(Vec::len).max().unwrap_or(0);
    let mut others = Sliced::new(1, most_senders);
    while missing > 0 {
        if out.len() >= max_steps {
            return None;
        }
        for i in (1..order.len()).rev() {
            order.swap(i, rng.below(i + 1));
        }
        // First each direction takes its share of what its receiver lacks, so that a node's
        // last chunks arrive spread over its directions (a step costs its most loaded one);
        // then, where a share left a receiver short, its directions fill up to capacity.
        let mut capped = false;
        for pass in 0..2 {
            for &d in &order {
                let dir = directions[d];
                limit[d] = if pass == 0 {
                    let share = (lacking[dir.to] * u64::from(dir.capacity))
                        .div_ceil(inbound[dir.to].max(1));
                    let share = u32::try_from(share).unwrap_or(u32::MAX).min(dir.capacity);
                    capped |= share < dir.capacity;
                    share
                } else {
                    dir.capacity
                };
            }
            // The directions take one chunk each in turn: filled one after another, the first
            // into a node would take the chunks the later ones could also give and leave those
            // idle, and the step costs its most loaded direction.
            open.clear();
            open.extend(
                order
                    .iter()
                    .copied()
                    .filter(|&d| loads[d].len() < limit[d] as usize),
            );
            while !open.is_empty() {
                open.retain(|&d| {
                    let dir = directions[d];
                    let start = rng.below(words);
                    if awaited[dir.to] == 0 {
                        return false;
                    }
                    // A chunk its sender gives no other direction this step first: what one
                    // node sends its neighbours then spreads further.
                    let state = State {
                        held: &held,
                        incoming: &incoming,
                        holders: &holders,
                        words,
                        senders: &senders,
                    };
                    let Some(c) = state.choose(dir, start, pick, &given, &mut others) else {
                        return false;
                    };
                    let (w, bit) = (c / 64, 1u64 << (c % 64));
                    incoming[dir.to * words + w] |= bit;
                    given[dir.from * words + w] |= bit;
                    arrivals.push((dir.to, c as u32));
                    awaited[dir.to] -= 1;
                    loads[d].push(c as u32);
                    loads[d].len() < limit[d] as usize
                });
            }
            if !capped {
                break;
            }
        }
        given.fill(0);
        if loads.iter().all(Vec::is_empty) {
            return None;
        }
        out.push(loads.iter().map(Vec::as_slice).enumerate());
        loads.iter_mut().for_each(Vec::clear);
        for (v, c) in arrivals.drain(..) {
            let (w, bit) = (v * words + c as usize / 64, 1u64 << (c % 64));
            incoming[w] &= !bit;
            held[w] |= bit;
            holders.add(c as usize / 64, 1 << (c % 64));
            lacking[v] -= 1;
            missing -= 1;
        }
        awaited.copy_from_slice(&lacking);
    }
    Some(out)
}

/// What [`State::choose`] reads of the synthesis: per node, the chunks it holds and those it
/// receives in this step (a bitset of `words` words each) and the nodes that send to it, and
/// per chunk how many nodes hold it.
struct State<'a> {
    held: &'a [u64],
    incoming: &'a [u64],
    holders: &'a Sliced,
    words: usize,
    senders: &'a [Vec<usize>],
}

impl State<'_> {
    /// The chunk direction `dir` carries next: one its sender holds, its receiver lacks and
    /// does not receive elsewhere this step, chosen as `pick` says, scanning from word `start`;
    /// of those, one its sender gives no other direction this step (`given`, a bitset per node)
    /// where there is one.
    ///
    /// The candidates are weighed a word (64 chunks) at a time on bit-sliced counts
    /// ([`Sliced`]), not one at a time: the window takes whole words, and a word's least key
    /// and the first candidate with it are what weighing its candidates in turn would find.
    /// One scan serves both: until a candidate not given elsewhere turns up, the words read
    /// are weighed for the fallback too, which is then what a second scan would weigh.
    fn choose(
        &self,
        dir: Direction,
        start: usize,
        pick: Pick,
        given: &[u64],
        others: &mut Sliced,
    ) -> Option<usize> {
        let words = self.words;
        let from = &self.held[dir.from * words..(dir.from + 1) * words];
        let to = &self.held[dir.to * words..(dir.to + 1) * words];
        let busy = &self.incoming[dir.to * words..(dir.to + 1) * words];
        let given = &given[dir.from * words..(dir.from + 1) * words];
        let (mut fresh, mut any) = (Window::default(), Window::default());
        for w in (start..words).chain(0..start) {
            if fresh.full() {
                break;
            }
            let bits = from[w] & !to[w] & !busy[w];
            let new = bits & !given[w];
            if new != 0 {
                self.weigh(&mut fresh, dir, pick, w, new, others);
            } else if bits != 0 && fresh.seen == 0 && !any.full() {
                self.weigh(&mut any, dir, pick, w, bits, others);
            }
        }
        fresh.chunk().or_else(|| any.chunk())
    }

    /// Weighs word `w`'s candidates `bits` (not empty) for `window`.
    fn weigh(
        &self,
        window: &mut Window,
        dir: Direction,
        pick: Pick,
        w: usize,
        bits: u64,
        others: &mut Sliced,
    ) {
        let State {
            held,
            incoming,
            holders,
            words,
            senders,
        } = *self;
        if pick == Pick::Any {
            window.best = Some(((0, 0), w * 64 + bits.trailing_zeros() as usize));
            window.settled = true;
            return;
        }
        window.seen += bits.count_ones() as usize;
        let (other, set) = if pick == Pick::Exclusive {
            others.clear();
            for &x in &senders[dir.to] {
                if x != dir.from {
                    others.add(0, (held[x * words + w] | incoming[x * words + w]) & bits);
                }
            }
            others.least(0, bits)
        } else {
            (0, bits)
        };
        let (held_by, set) = holders.least(w, set);
        let key = (other, held_by);
        if window.best.is_none_or(|(b, _)| key < b) {
            window.best = Some((key, w * 64 + set.trailing_zeros() as usize));
            // Nothing beats a chunk only its owner holds and no other sender has.
            window.settled = key <= (0, 1);
        }
    }
}

/// What one scan of [`State::choose`] has found: the least (other senders holding it,
/// holders) so far and its chunk, and how many candidates it has weighed.
#[derive(Default)]
struct Window {
    best: Option<((u32, u32), usize)>,
    seen: usize,
    /// Nothing can beat the best: the first candidate under [`Pick::Any`], or the least key.
    settled: bool,
}

impl Window {
    /// Whether the scan stops before the next word: settled, or [`RAREST_WINDOW`] candidates
    /// weighed.
    fn full(&self) -> bool {
        self.settled || self.seen >= RAREST_WINDOW
    }

    fn chunk(&self) -> Option<usize> {
        self.best.map(|(_, c)| c)
    }
}

/// Counts kept bit-sliced, one count per chunk of each word: plane `i` of word `w` holds bit
/// `i` of the counts of the word's 64 chunks. Adding a mask and finding a word's least count
/// among a set of its chunks then cost one word operation per plane, however many chunks.
struct Sliced {
    /// Per word, its planes, least significant first.
    planes: Vec<u64>,
    /// The planes per word: the bit length of the largest count.
    depth: usize,
}

impl Sliced {
    /// Counts of 0 for `words` words, each up to `most`.
    fn new(words: usize, most: usize) -> Sliced {
        let depth = (usize::BITS - most.leading_zeros()).max(1) as usize;
        Sliced {
            planes: vec![0; words * depth],
            depth,
        }
    }

    fn word(&self, w: usize) -> &[u64] {
        &self.planes[w * self.depth..(w + 1) * self.depth]
    }

    fn clear(&mut self) {
        self.planes.fill(0);
    }

    /// Adds one to the count of each chunk of word `w` in `mask`.
    fn add(&mut self, w: usize, mask: u64) {
        let mut carry = mask;
        for plane in &mut self.planes[w * self.depth..(w + 1) * self.depth] {
            if carry == 0 {
                break;
            }
            let next = *plane & carry;
            *plane ^= carry;
            carry = next;
        }
    }

    /// The least count in word `w` among the chunks in `set` (not empty), and those that have
    /// it: from the top plane down, the chunks with a 0 there where any has one.
    fn least(&self, w: usize, mut set: u64) -> (u32, u64) {
        let mut least = 0;
        for (i, &plane) in self.word(w).iter().enumerate().rev() {
            let zero = set & !plane;
            if zero != 0 {
                set = zero;
            } else {
                least |= 1 << i;
            }
        }
        (least, set)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A ring of `n` nodes, both directions, one chunk per step.
    fn ring(n: usize) -> Vec<Direction> {
        (0..n)
            .flat_map(|i| {
                let j = (i + 1) % n;
                [
                    Direction {
                        from: i,
                        to: j,
                        capacity: 1,
                    },
                    Direction {
                        from: j,
                        to: i,
                        capacity: 1,
                    },
                ]
            })
            .collect()
    }

    /// What [`State::choose`] must return, weighing one candidate at a time in scan order: the
    /// first with the least (other senders holding or receiving it, holders) among the words
    /// scanned until [`RAREST_WINDOW`] candidates are seen.
    fn choose_one_at_a_time(
        state: &State<'_>,
        dir: Direction,
        start: usize,
        pick: Pick,
        given: Option<&[u64]>,
    ) -> Option<usize> {
        let State {
            held,
            incoming,
            words,
            senders,
            ..
        } = *state;
        let holds = |v: usize, c: usize| held[v * words + c / 64] >> (c % 64) & 1 == 1;
        let gets = |v: usize, c: usize| incoming[v * words + c / 64] >> (c % 64) & 1 == 1;
        let nodes = held.len() / words;
        let mut best: Option<((usize, usize), usize)> = None;
        let mut seen = 0;
        for w in (start..words).chain(0..start) {
            if seen >= RAREST_WINDOW {
                break;
            }
            for c in w * 64..(w + 1) * 64 {
                let gave = given.is_some_and(|g| g[dir.from * words + w] >> (c % 64) & 1 == 1);
                if !holds(dir.from, c) || holds(dir.to, c) || gets(dir.to, c) || gave {
                    continue;
                }
                seen += 1;
                let others = senders[dir.to]
                    .iter()
                    .filter(|&&x| x != dir.from && (holds(x, c) || gets(x, c)))
                    .count();
                let holders = (0..nodes).filter(|&v| holds(v, c)).count();
                let key = match pick {
                    Pick::Any => return Some(c),
                    Pick::Rarest => (0, holders),
                    Pick::Exclusive => (others, holders),
                };
                if best.is_none_or(|(b, _)| key < b) {
                    best = Some((key, c));
                }
            }
        }
        best.map(|(_, c)| c)
    }

    /// Weighing a word of candidates at a time on bit-sliced counts, in one scan, picks what
    /// weighing them one at a time does, first among the chunks not given elsewhere and then
    /// among all: on random states of sparse and dense holdings, every rule, with some, none
    /// and every chunk given elsewhere.
    #[test]
    fn a_word_at_a_time_picks_what_one_at_a_time_does() {
        let mut rng = Rng::new(11);
        for case in 0..300 {
            let nodes = 2 + rng.below(12);
            let words = 1 + rng.below(4);
            // Denser holdings in later cases: from few holders per chunk to most.
            let density = 1 + case % 7;
            let bits = |rng: &mut Rng| {
                (0..density).fold(0u64, |m, _| m | rng.bits())
                    & (0..3).fold(!0, |m, _| m & rng.bits() | rng.bits())
            };
            let held: Vec<u64> = (0..nodes * words).map(|_| bits(&mut rng)).collect();
            let incoming: Vec<u64> = held.iter().map(|&h| rng.bits() & rng.bits() & !h).collect();
            let given: Vec<u64> = (0..nodes * words)
                .map(|_| rng.bits() & rng.bits())
                .collect();
            let (nothing, everything) = (vec![0; nodes * words], vec![!0; nodes * words]);
            let senders: Vec<Vec<usize>> = (0..nodes)
                .map(|v| (0..nodes).filter(|&x| x != v && rng.below(3) > 0).collect())
                .collect();
            let mut holders = Sliced::new(words, nodes);
            for v in 0..nodes {
                for w in 0..words {
                    holders.add(w, held[v * words + w]);
                }
            }
            let most = senders.iter().map(Vec::len).max().unwrap_or(0);
            let mut others = Sliced::new(1, most);
            let state = State {
                held: &held,
                incoming: &incoming,
                holders: &holders,
                words,
                senders: &senders,
            };
            for (to, froms) in senders.iter().enumerate() {
                for &from in froms {
                    let dir = Direction {
                        from,
                        to,
                        capacity: 1,
                    };
                    for pick in [Pick::Rarest, Pick::Exclusive, Pick::Any] {
                        for given in [&given, &nothing, &everything] {
                            let start = rng.below(words);
                            let one_at_a_time =
                                choose_one_at_a_time(&state, dir, start, pick, Some(given))
                                    .or_else(|| {
                                        choose_one_at_a_time(&state, dir, start, pick, None)
                                    });
                            assert_eq!(
                                state.choose(dir, start, pick, given, &mut others),
                                one_at_a_time,
                                "case {case}, {from} → {to}, {pick:?}, start {start}"
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn every_node_receives_every_chunk_once_from_a_holder() {
        let dirs = ring(6);
        for pick in [Pick::Rarest, Pick::Any] {
            let g = gather(6, 12, |c| c / 2, &dirs, pick, 7, 1000).expect("connected");
            let mut held: Vec<Vec<bool>> = (0..6)
                .map(|n| (0..12).map(|c| c / 2 == n).collect())
                .collect();
            for step in g.steps() {
                let before = held.clone();
                for (d, chunks) in step {
                    let dir = dirs[d];
                    assert!(chunks.len() <= dir.capacity as usize);
                    for &c in chunks {
                        assert!(before[dir.from][c as usize], "sender holds it");
                        assert!(!held[dir.to][c as usize], "received once");
                        held[dir.to][c as usize] = true;
                    }
                }
            }
            assert!(held.iter().flatten().all(|&h| h));
            // 12 chunks, 5 receptions each, 12 directions: at least 5 steps.
            assert!(g.len() >= 5);
        }
    }

    /// Node 3 owns two chunks; nodes 1 and 2 each get both in the first step (their shares
    /// are one each, and the second pass fills the rest), and node 0, joined to 1 and 2 by
    /// directions of four chunks per step, then takes one chunk over each: spread, the step
    /// costs one chunk's time; taken greedily, one direction would carry both.
    #[test]
    fn the_last_chunks_a_node_lacks_arrive_spread_over_its_directions() {
        let dir = |from, to| Direction {
            from,
            to,
            capacity: 4,
        };
        let dirs = [
            dir(3, 1),
            dir(3, 2),
            dir(1, 2),
            dir(2, 1),
            dir(1, 0),
            dir(2, 0),
        ];
        for pick in [Pick::Rarest, Pick::Any] {
            for seed in 0..8 {
                let g = gather(4, 2, |_| 3, &dirs, pick, seed, 10).expect("connected");
                assert_eq!(g.len(), 2, "{pick:?} {seed}");
                // Both chunks over both directions, in either order.
                let mut first: Vec<(usize, Vec<u32>)> =
                    g.step(0).map(|(d, c)| (d, c.to_vec())).collect();
                first.iter_mut().for_each(|(_, c)| c.sort_unstable());
                assert_eq!(first, vec![(0, vec![0, 1]), (1, vec![0, 1])]);
                let last: Vec<(usize, &[u32])> = g.step(1).collect();
                assert_eq!(last.len(), 2, "{last:?}");
                assert!(last
                    .iter()
                    .all(|(d, carried)| *d >= 4 && carried.len() == 1));
                assert_ne!(last[0].1, last[1].1);
            }
        }
    }

    /// Eight nodes in four pairs, as on an MI250X node: each node joined to its twin by four
    /// directions and to two nodes of other pairs by two and by one (capacity one each). Each
    /// node lacks 7 · 24 chunks and receives at most seven per step, so 24 steps at least; a
    /// pair takes at most six chunks per step from outside and lacks 6 · 24, so every chunk
    /// must enter each pair once. Picking what the receiver's other senders lack gets within
    /// a step of that, whatever the seed; rarest first took 31.
    #[test]
    fn scarce_links_into_a_group_carry_each_chunk_into_it_once() {
        let mut dirs = Vec::new();
        let mut join = |a: usize, b: usize, links: usize| {
            for _ in 0..links {
                for (from, to) in [(a, b), (b, a)] {
                    dirs.push(Direction {
                        from,
                        to,
                        capacity: 1,
                    });
                }
            }
        };
        for (a, b) in [(0, 1), (2, 3), (4, 5), (6, 7)] {
            join(a, b, 4);
        }
        for (a, b) in [(0, 6), (2, 4), (1, 5), (3, 7)] {
            join(a, b, 2);
        }
        for (a, b) in [(0, 2), (4, 6), (1, 3), (5, 7)] {
            join(a, b, 1);
        }
        for seed in 0..4 {
            let g = gather(8, 8 * 24, |c| c / 24, &dirs, Pick::Exclusive, seed, 1000)
                .expect("connected");
            assert!(
                (24..=25).contains(&g.len()),
                "seed {seed}: {} steps",
                g.len()
            );
        }
    }

    #[test]
    fn the_same_seed_gives_the_same_schedule_and_a_stall_gives_none() {
        let dirs = ring(5);
        let a = gather(5, 5, |c| c, &dirs, Pick::Rarest, 3, 100);
        assert_eq!(a, gather(5, 5, |c| c, &dirs, Pick::Rarest, 3, 100));
        // Node 4 unreachable: no direction leads to it.
        let cut: Vec<Direction> = dirs
            .into_iter()
            .filter(|d| d.from != 4 && d.to != 4)
            .collect();
        assert_eq!(gather(5, 5, |c| c, &cut, Pick::Rarest, 3, 100), None);
    }
}
