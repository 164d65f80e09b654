//! The greedy all-gather synthesis: step by step, every link direction between compute nodes
//! is matched with chunks its sender holds and its receiver lacks.
//!
//! State is one bitset of held chunks per node and a holder count per chunk, so one step costs
//! a scan of two bitsets per link direction: with `C` chunks, `D` directions and `T` steps the
//! synthesis is `O(T · D · C / 64)` word operations plus the chunks it picks — about a tenth of
//! a second for a 32 × 32 mesh with one chunk per node in a release build.
//!
//! Each node receives each chunk it lacks exactly once (a receiver never takes the same chunk
//! over two directions in one step), so every chunk spreads along an arborescence rooted at its
//! owner: the property the reduce-scatter's time reversal needs. Every step moves at least one
//! chunk while some node lacks one (the directions form a connected graph, so some direction
//! leads from a holder of a missing chunk to a node that lacks it, and the first such direction
//! considered takes it), so the synthesis ends within `C · (p - 1)` steps.

use schedule_ir::RankId;

/// How many candidates [`Pick::Rarest`] weighs per pick, from a seeded position: enough to
/// find a rare chunk, and it keeps a pick's cost bounded whatever the chunk count.
const RAREST_WINDOW: usize = 48;

/// One usable link direction between compute nodes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Direction {
    /// The sender.
    pub from: RankId,
    /// The receiver.
    pub to: RankId,
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
}

/// A synthesised all-gather: `steps[t]` lists, per direction used in step `t` (an index into
/// the directions given), the chunks it carries.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Gather {
    /// The steps, in order.
    pub steps: Vec<Vec<(usize, Vec<u32>)>>,
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
    owner: impl Fn(usize) -> RankId,
    directions: &[Direction],
    pick: Pick,
    seed: u64,
    max_steps: usize,
) -> Option<Gather> {
    let words = chunks.div_ceil(64).max(1);
    let mut held = vec![0u64; nodes * words];
    let mut incoming = vec![0u64; nodes * words];
    let mut count = vec![0u32; chunks];
    for (c, n) in count.iter_mut().enumerate() {
        let o = owner(c).index();
        if o < nodes {
            held[o * words + c / 64] |= 1 << (c % 64);
            *n = 1;
        }
    }
    let mut missing = (nodes * chunks) as u64 - count.iter().map(|&n| u64::from(n)).sum::<u64>();
    let mut rng = Rng::new(seed);
    let mut order: Vec<usize> = (0..directions.len()).collect();
    let mut out = Gather::default();
    let mut arrivals: Vec<(RankId, u32)> = Vec::new();
    while missing > 0 {
        if out.steps.len() >= max_steps {
            return None;
        }
        for i in (1..order.len()).rev() {
            order.swap(i, rng.below(i + 1));
        }
        let mut step: Vec<(usize, Vec<u32>)> = Vec::new();
        for &d in &order {
            let dir = directions[d];
            let mut carried: Vec<u32> = Vec::new();
            for _ in 0..dir.capacity {
                let start = rng.below(words);
                let Some(c) = choose(&held, &incoming, &count, words, dir, start, pick) else {
                    break;
                };
                incoming[dir.to.index() * words + c / 64] |= 1 << (c % 64);
                arrivals.push((dir.to, c as u32));
                carried.push(c as u32);
            }
            if !carried.is_empty() {
                step.push((d, carried));
            }
        }
        if step.is_empty() {
            return None;
        }
        for (v, c) in arrivals.drain(..) {
            let (w, bit) = (v.index() * words + c as usize / 64, 1u64 << (c % 64));
            incoming[w] &= !bit;
            held[w] |= bit;
            count[c as usize] += 1;
            missing -= 1;
        }
        step.sort_unstable_by_key(|(d, _)| *d);
        out.steps.push(step);
    }
    Some(out)
}

/// The chunk direction `dir` carries next: one its sender holds, its receiver lacks and does
/// not receive elsewhere this step, chosen as `pick` says, scanning from word `start`.
fn choose<'a>(
    held: &'a [u64],
    incoming: &'a [u64],
    count: &[u32],
    words: usize,
    dir: Direction,
    start: usize,
    pick: Pick,
) -> Option<usize> {
    // A rank's bits are the `words` words from `rank · words`.
    let bits_of = |table: &'a [u64], r: RankId| &table[r.index() * words..(r.index() + 1) * words];
    let from = bits_of(held, dir.from);
    let to = bits_of(held, dir.to);
    let busy = bits_of(incoming, dir.to);
    let mut best: Option<(u32, usize)> = None;
    let mut seen = 0;
    for i in 0..words {
        if seen >= RAREST_WINDOW {
            break;
        }
        let w = (start + i) % words;
        let mut bits = from[w] & !to[w] & !busy[w];
        while bits != 0 {
            let c = w * 64 + bits.trailing_zeros() as usize;
            bits &= bits - 1;
            seen += 1;
            match pick {
                Pick::Any => return Some(c),
                Pick::Rarest => {
                    let n = count[c];
                    if best.is_none_or(|(b, _)| n < b) {
                        best = Some((n, c));
                        if n <= 1 {
                            return Some(c);
                        }
                    }
                }
            }
        }
    }
    best.map(|(_, c)| c)
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
                        from: RankId::new(i),
                        to: RankId::new(j),
                        capacity: 1,
                    },
                    Direction {
                        from: RankId::new(j),
                        to: RankId::new(i),
                        capacity: 1,
                    },
                ]
            })
            .collect()
    }

    #[test]
    fn every_node_receives_every_chunk_once_from_a_holder() {
        let dirs = ring(6);
        for pick in [Pick::Rarest, Pick::Any] {
            let g = gather(6, 12, |c| RankId::new(c / 2), &dirs, pick, 7, 1000).expect("connected");
            let mut held: Vec<Vec<bool>> = (0..6)
                .map(|n| (0..12).map(|c| c / 2 == n).collect())
                .collect();
            for step in &g.steps {
                let before = held.clone();
                for (d, chunks) in step {
                    let dir = dirs[*d];
                    assert!(chunks.len() <= dir.capacity as usize);
                    for &c in chunks {
                        assert!(before[dir.from.index()][c as usize], "sender holds it");
                        assert!(!held[dir.to.index()][c as usize], "received once");
                        held[dir.to.index()][c as usize] = true;
                    }
                }
            }
            assert!(held.iter().flatten().all(|&h| h));
            // 12 chunks, 5 receptions each, 12 directions: at least 5 steps.
            assert!(g.steps.len() >= 5);
        }
    }

    #[test]
    fn the_same_seed_gives_the_same_schedule_and_a_stall_gives_none() {
        let dirs = ring(5);
        let a = gather(5, 5, RankId::new, &dirs, Pick::Rarest, 3, 100);
        assert_eq!(a, gather(5, 5, RankId::new, &dirs, Pick::Rarest, 3, 100));
        // Node 4 unreachable: no direction leads to it.
        let cut: Vec<Direction> = dirs
            .into_iter()
            .filter(|d| d.from != RankId(4) && d.to != RankId(4))
            .collect();
        assert_eq!(gather(5, 5, RankId::new, &cut, Pick::Rarest, 3, 100), None);
    }
}
