//! Lower bounds on the cost model's estimate of a pipeline of trees, for every depth at once:
//! [`super::lower`] list-schedules and prices only the depths whose bound is below the cheapest
//! so far, since no other can replace it, and `auto` skips `trees` where no depth's bound is
//! below another method's estimate ([`Profile::least`]).
//!
//! A pipeline chunk's transfers depend only on transfers of the same chunk, so what a depth
//! asks of each link direction is what one chunk of each tree asks, times the tree's chunks
//! ([`Crossings`], [`Profile`]): the bound of any depth is read from one chunk per tree,
//! without building or scheduling the pipeline.

use super::{pieces, Walks};
use crate::embed::trees::Packing;
use crate::ids::{IdVec, TreeId};
use crate::lower::balance;
use crate::lower::dag::{self, DagError, Transfers};
use crate::lower::floor::least_chunk;
use crate::lower::PhaseSpec;
use crate::machine::Machine;
use schedule_ir::DirectionId;

/// A bound is compared with an estimate summed in another order: it is lowered by this
/// relative margin so that rounding never lifts it above the estimate it bounds.
const ROUNDING: f64 = 1e-9;

/// Ranges of fewer pipeline depths than this are bounded depth by depth by
/// [`Profile::least`]: a floor over so few costs about as much as the depths themselves.
const DEPTH_BY_DEPTH: usize = 16;

/// The depths 1, 2, 4, … up to `most`, and `most` itself: bounded first, their least bound
/// rules out most ranges of depths, or shows that no depth is ruled out at all.
pub fn doublings(most: usize) -> impl Iterator<Item = usize> {
    std::iter::successors(Some(1), move |&n| (n < most).then(|| (2 * n).min(most)))
}

/// What a set of transfers asks of each link direction it crosses, and its longest
/// dependency chains.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Crossings {
    /// Every direction crossed, in direction order.
    directions: Vec<Crossing>,
    /// The longest dependency chain, in transfers.
    longest: u64,
    /// The dependency chain of the most route latency, in seconds.
    heaviest: f64,
}

/// One link direction's part of [`Crossings`].
#[derive(Clone, Copy, Debug, PartialEq)]
struct Crossing {
    direction: DirectionId,
    /// Transfers crossing it (a route crossing it twice counts twice).
    count: u64,
    /// The fewest transfers chained before one of them.
    fill: u64,
    /// The fewest transfers chained after one of them.
    drain: u64,
    /// Route latencies, in seconds: the least of one of them, and the least summed over the
    /// transfers chained before and after one of them.
    waits: Waits,
}

/// Latencies along a direction's transfers ([`Crossing::waits`]), in seconds.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Waits {
    /// The least route latency of a transfer crossing the direction.
    own: f64,
    /// The least, over those transfers, of the most route latency chained before one.
    fill: f64,
    /// The least, over those transfers, of the most route latency chained after one.
    drain: f64,
}

impl Waits {
    /// Nothing crosses: no bound yet, each taken as the least of those it meets.
    const NONE: Waits = Waits {
        own: f64::INFINITY,
        fill: f64::INFINITY,
        drain: f64::INFINITY,
    };

    fn least(self, other: Waits) -> Waits {
        Waits {
            own: self.own.min(other.own),
            fill: self.fill.min(other.fill),
            drain: self.drain.min(other.drain),
        }
    }
}

impl Crossings {
    /// The crossings of `transfers`, with route latencies as the cost model charges them on
    /// `ir` (the machine's IR). Transfers wait only for earlier ones (creation order); a wait
    /// on a later one is not counted, which only shortens the chains. A route the scheduler
    /// would refuse is refused here with the same error.
    pub fn of(
        machine: &Machine,
        ir: &schedule_ir::Machine,
        transfers: &Transfers,
    ) -> Result<Crossings, DagError> {
        // `chain[t]`: transfers chained up to and including `t`; `below[t]`: those after it;
        // `heavy` and `under`: the same in route latency.
        let mut chain = vec![0u64; transfers.len()];
        let mut below = vec![0u64; transfers.len()];
        let mut latency = vec![0.0f64; transfers.len()];
        let mut heavy = vec![0.0f64; transfers.len()];
        let mut above = vec![0.0f64; transfers.len()];
        let mut under = vec![0.0f64; transfers.len()];
        let mut routes = Vec::with_capacity(transfers.len());
        for (id, t) in transfers.iter_enumerated() {
            routes.push(dag::directions(machine, id, t)?);
            latency[id.index()] = t.what.route.split_first().map_or(0.0, |(&first, via)| {
                schedule_ir::cost::latency::route_seconds(ir, t.what.from, first, via)
            });
            let earlier = t.after.iter().filter(|a| **a < id);
            let before = earlier.clone().map(|a| chain[a.index()]).max().unwrap_or(0);
            let waited = earlier.map(|a| heavy[a.index()]).fold(0.0, f64::max);
            chain[id.index()] = before + 1;
            above[id.index()] = waited;
            heavy[id.index()] = waited + latency[id.index()];
        }
        for (id, t) in transfers.iter_enumerated().rev() {
            let after = below[id.index()] + 1;
            let waited = under[id.index()] + latency[id.index()];
            for a in t.after.iter().filter(|a| **a < id) {
                below[a.index()] = below[a.index()].max(after);
                under[a.index()] = under[a.index()].max(waited);
            }
        }
        let mut by_direction: std::collections::BTreeMap<DirectionId, Crossing> =
            Default::default();
        for (i, route) in routes.iter().enumerate() {
            for &direction in route {
                let entry = by_direction.entry(direction).or_insert(Crossing {
                    direction,
                    count: 0,
                    fill: u64::MAX,
                    drain: u64::MAX,
                    waits: Waits::NONE,
                });
                entry.count += 1;
                entry.fill = entry.fill.min(chain[i] - 1);
                entry.drain = entry.drain.min(below[i]);
                entry.waits = entry.waits.least(Waits {
                    own: latency[i],
                    fill: above[i],
                    drain: under[i],
                });
            }
        }
        Ok(Crossings {
            directions: by_direction.into_values().collect(),
            longest: chain.iter().copied().max().unwrap_or(0),
            heaviest: heavy.iter().copied().fold(0.0, f64::max),
        })
    }
}

/// A link direction as [`Profile::bound_with`] reads it.
#[derive(Clone, Copy, Debug)]
struct Direction {
    /// Its lane's speed, Gbit/s.
    lane: f64,
    /// The sends it takes per step: its link's lanes, or what the schedule's
    /// [`dag::Lanes`] allows.
    sends: f64,
    /// Bytes per second.
    rate: f64,
    /// Seconds.
    latency: f64,
}

/// One part's crossings with its directions numbered as the profile's.
#[derive(Clone, Debug, Default)]
struct Part {
    /// (profile direction, its crossing).
    crossings: Vec<(usize, Crossing)>,
    /// Its longest dependency chain, in transfers.
    longest: u64,
    /// Its dependency chain of the most route latency, in seconds.
    heaviest: f64,
    /// The slowest lane, least latency and fastest rate among its directions.
    slowest_lane: f64,
    least_latency: f64,
    fastest: f64,
}

/// What bounds every pipeline depth of one packing: one pipeline chunk of each tree
/// ([`Crossings`]), and how a depth's chunks are shared among the trees.
#[derive(Clone, Debug)]
pub struct Profile {
    /// Every direction some part crosses.
    directions: Vec<Direction>,
    /// One per tree: a chunk's crossings, empty for a tree that carries no chunk at any depth
    /// up to the most.
    parts: Vec<Part>,
    shares: IdVec<TreeId, f64>,
    elements: u64,
    pieces: u64,
    element_bytes: f64,
}

impl Profile {
    /// The profile of `packing` for `spec`, for depths of at most `most` pipeline chunks
    /// scheduled with `lanes`, on `machine` (`ir` its IR, for the routes' latencies).
    pub fn of(
        spec: &PhaseSpec,
        (machine, ir): (&Machine, &schedule_ir::Machine),
        packing: &Packing,
        most: usize,
        lanes: dag::Lanes,
    ) -> Result<Profile, DagError> {
        // A tree whose rounded share is zero at every depth is never built.
        let mut used: IdVec<TreeId, bool> = IdVec::filled(false, packing.trees.len());
        for total in 1..=most.max(1) {
            let counts = balance::apportion(total as u64, &packing.shares);
            for (u, &c) in used.iter_mut().zip(&counts) {
                *u |= c > 0;
            }
            if used.iter().all(|&u| u) {
                break;
            }
        }
        let walks = Walks::of(machine, spec.collective, packing, |i| used[i]);
        let mut parts = Vec::with_capacity(packing.trees.len());
        for (i, &u) in used.iter_enumerated() {
            let mut transfers = Transfers::new();
            if u {
                walks.chunk(spec.collective, i, 0, &mut transfers);
            }
            parts.push(Crossings::of(machine, ir, &transfers)?);
        }
        Ok(Profile::new(
            machine,
            &parts,
            packing.shares.clone(),
            spec,
            lanes,
        ))
    }

    /// The profile of `chunks`, the crossings of one chunk per share.
    fn new(
        machine: &Machine,
        chunks: &[Crossings],
        shares: IdVec<TreeId, f64>,
        spec: &PhaseSpec,
        policy: dag::Lanes,
    ) -> Profile {
        let mut number: std::collections::BTreeMap<DirectionId, usize> = Default::default();
        let mut directions: Vec<Direction> = Vec::new();
        let mut parts = Vec::with_capacity(chunks.len());
        for c in chunks {
            let mut part = Part {
                crossings: Vec::with_capacity(c.directions.len()),
                longest: c.longest,
                heaviest: c.heaviest,
                slowest_lane: f64::INFINITY,
                least_latency: f64::INFINITY,
                fastest: 0.0,
            };
            for x in &c.directions {
                let at = *number.entry(x.direction).or_insert_with(|| {
                    let link = machine.link(x.direction.link());
                    let lanes = link.lanes.max(1);
                    directions.push(Direction {
                        lane: link.bandwidth_gbps / f64::from(lanes),
                        sends: f64::from(match policy {
                            dag::Lanes::Declared => lanes,
                            dag::Lanes::AtMost(most) => lanes.min(most.max(1)),
                            dag::Lanes::Shared(most) => most.max(1).saturating_mul(lanes),
                        }),
                        rate: schedule_ir::cost::bytes_per_second(link.bandwidth_gbps),
                        latency: link.latency_us * 1e-6,
                    });
                    directions.len() - 1
                });
                let d = directions[at];
                part.slowest_lane = part.slowest_lane.min(d.lane);
                part.least_latency = part.least_latency.min(d.latency);
                part.fastest = part.fastest.max(d.rate);
                part.crossings.push((at, *x));
            }
            parts.push(part);
        }
        Profile {
            directions,
            parts,
            shares,
            elements: spec.elements,
            pieces: pieces(machine, spec.collective) as u64,
            element_bytes: spec.dtype.size_bytes() as f64,
        }
    }

    /// A lower bound on the estimate of the pipeline of `total` chunks, at any ranking rate.
    pub fn bound(&self, total: usize) -> f64 {
        let counts = balance::apportion(total as u64, &self.shares);
        self.bound_with(counts.as_slice(), self.chunk_bytes(total))
    }

    /// The least [`Profile::bound`] of any depth from 1 to `most` chunks: a lower bound on the
    /// estimate of every pipeline of this packing a depth search can lower, equal to the bit to
    /// the least of the depths' bounds taken one by one.
    ///
    /// A range of depths is split in halves until its floor ([`Profile::floor_over`]) is no
    /// lower than the least bound found so far, where none of its depths can lower it, or until
    /// it is short enough to bound depth by depth ([`Tally`], each depth updating the one
    /// before). On a DGX-1, ruling out `trees` took 14 285 depths per packing bounded one by
    /// one; the ranges far from the least are ruled out whole.
    pub fn least(&self, most: usize) -> f64 {
        let most = most.max(1);
        let mut tally = Tally::new(self);
        let mut least = f64::INFINITY;
        let bound = |tally: &mut Tally, total: usize| {
            let counts = balance::apportion(total as u64, &self.shares);
            tally.set(self, counts.as_slice());
            tally.seconds(self, self.chunk_bytes(total))
        };
        // The doublings first, so that the least found early rules out ranges.
        for total in doublings(most) {
            least = least.min(bound(&mut tally, total));
        }
        let whole = Tally::whole(self);
        let mut ranges = vec![(1, most)];
        while let Some((first, last)) = ranges.pop() {
            if last - first < DEPTH_BY_DEPTH {
                for total in first..=last {
                    least = least.min(bound(&mut tally, total));
                }
            } else if self.floor_over(&whole, first, last) < least {
                let middle = first + (last - first) / 2;
                // The upper half is popped first: it is where the least usually lies.
                ranges.push((first, middle));
                ranges.push((middle + 1, last));
            }
        }
        least
    }

    /// A lower bound on [`Profile::bound`] of every depth from `first` to `last`: each tree's
    /// copies at least those `first` gives it before the remainders are handed out (what
    /// [`balance::apportion`] gives only grows with the total), every transfer at least the
    /// least chunk of `last` chunks, and what depends on which trees have copies — the fewest
    /// transfers chained before and after one on a direction, the slowest lane, the least
    /// latency, the fastest link — taken over every tree (`whole`), which can only lower it.
    /// Every step of [`Tally::seconds`] is monotone in these, in floating point too.
    fn floor_over(&self, whole: &Tally, first: usize, last: usize) -> f64 {
        let mut floor = Tally {
            times: Vec::new(),
            crossings: whole.crossings.iter().map(|&(_, f, d)| (0, f, d)).collect(),
            waits: whole.waits.clone(),
            longest: 0,
            heaviest: 0.0,
            room: whole.room.clone(),
            least_latency: whole.least_latency,
            fastest: whole.fastest,
        };
        for (part, share) in self.parts.iter().zip(self.shares.iter()) {
            let copies = (share * first as f64).floor() as u64;
            if copies == 0 {
                continue;
            }
            floor.longest = floor.longest.max(part.longest);
            floor.heaviest = floor.heaviest.max(part.heaviest);
            for (d, crossing) in &part.crossings {
                floor.crossings[*d].0 += crossing.count * copies;
            }
        }
        floor.seconds(self, self.chunk_bytes(last))
    }

    /// The least [`Profile::bound`] of the depths `totals`.
    pub fn least_of(&self, totals: impl Iterator<Item = usize>) -> f64 {
        let mut tally = Tally::new(self);
        let mut least = f64::INFINITY;
        for total in totals {
            let counts = balance::apportion(total as u64, &self.shares);
            tally.set(self, counts.as_slice());
            least = least.min(tally.seconds(self, self.chunk_bytes(total)));
        }
        least
    }

    /// The bytes of the least chunk of the pipeline of `total` chunks.
    fn chunk_bytes(&self, total: usize) -> f64 {
        least_chunk(self.elements, (total as u64).saturating_mul(self.pieces)) as f64
            * self.element_bytes
    }

    /// A lower bound on [`schedule_ir::cost::estimate`] of the schedule [`dag::schedule`]
    /// makes under [`dag::Batching::ByBandwidth`] of `times[i]` copies of part `i`'s
    /// transfers, the copies independent of each other, every transfer carrying at least
    /// `chunk_bytes` bytes.
    ///
    /// *Proof.* The estimate sums, per step, `α + busy`: `α` the route latency of the step's
    /// slowest send (its links' latencies and the switches it passes, so at least that of
    /// each link it crosses), `busy` at least the bytes crossing each link direction in the
    /// step over its link's bandwidth. Every step carries at least one transfer (the scheduler
    /// never leaves one empty), so every step is charged at least the least latency and one
    /// chunk over the fastest link. The `α`s and the `busy`s of a set of steps are bounded
    /// apart and added.
    ///
    /// - Per direction `d` crossed by `n_d` transfers: a step takes at most `lanes × batch` of
    ///   them over `d` (one send per lane, each batching at most `batch` transfers, `batch` the
    ///   ratio of `d`'s lane speed to the slowest lane the transfers cross, as
    ///   [`dag::schedule`] computes it; under [`dag::Lanes::Shared`]`(m)`, `m × lanes × batch`
    ///   sends of one transfer each), so `d` is used in at least `⌈n_d / (lanes × batch)⌉`
    ///   steps, each charged at least the least route latency of a transfer crossing `d` (one
    ///   of them is in the step); and the steps together are busy at least
    ///   `n_d · chunk_bytes` over `d`'s bandwidth.
    /// - Fill and drain, per direction `d`: the scheduler puts a transfer in a step after
    ///   those it waits for, so a transfer with `a` transfers chained before it runs in step
    ///   `a` at the earliest, and one with `b` chained after it leaves at least `b` steps after
    ///   its own. So before `d`'s first step come at least `a_d` steps (the least `a` among
    ///   `d`'s transfers) and after its last at least `b_d` (the least `b`), none of them
    ///   `d`'s: `d`'s bound above grows by `a_d + b_d` steps' least busy time, and by their
    ///   `α`s: each transfer chained before the first of `d`'s transfers runs in its own step
    ///   before it, which is charged at least that transfer's route latency, so those steps'
    ///   `α`s add up to at least the least, over `d`'s transfers, of the most route latency
    ///   chained before one (and at least `a_d` least latencies); likewise after. This is what
    ///   a pipeline pays to fill and drain, and it is what rules out most of the depths a
    ///   search would otherwise schedule.
    /// - Per dependency chain of `L` transfers: `L` steps, each busy at least one chunk over
    ///   the fastest link; and the chain of the most route latency, each of its transfers in
    ///   its own step: all the steps' `α`s add up to at least that latency (and at least `L`
    ///   least latencies).
    ///
    /// The estimate is at least the largest of these. Copies of a part add their crossings
    /// and keep its chains, since no copy waits for another.
    fn bound_with(&self, times: &[u64], chunk_bytes: f64) -> f64 {
        let mut tally = Tally::new(self);
        tally.set(self, times);
        tally.seconds(self, chunk_bytes)
    }
}

/// What [`Profile::bound_with`] adds up for some copies of the parts, kept so that the next
/// depth's copies update it: from one depth to the next only a few trees' counts change.
struct Tally {
    /// Copies of each part.
    times: Vec<u64>,
    /// Per direction: transfers, least fill, least drain (over the parts with copies).
    crossings: Vec<(u64, u64, u64)>,
    /// Per direction: the least route latencies of its transfers and chained before and
    /// after them (over the parts with copies).
    waits: Vec<Waits>,
    longest: u64,
    heaviest: f64,
    /// Per direction: transfers it takes per step (lanes × batch, the batch set by the
    /// slowest lane of the parts with copies).
    room: Vec<f64>,
    least_latency: f64,
    fastest: f64,
}

impl Tally {
    fn new(profile: &Profile) -> Tally {
        Tally {
            times: vec![0; profile.parts.len()],
            crossings: vec![(0, u64::MAX, u64::MAX); profile.directions.len()],
            waits: vec![Waits::NONE; profile.directions.len()],
            longest: 0,
            heaviest: 0.0,
            room: vec![1.0; profile.directions.len()],
            least_latency: f64::INFINITY,
            fastest: 0.0,
        }
    }

    /// One copy of every part: what depends on which parts have copies, over all of them.
    fn whole(profile: &Profile) -> Tally {
        let mut whole = Tally::new(profile);
        whole.set(profile, &vec![1; profile.parts.len()]);
        whole
    }

    /// Sets the copies of part `i` to `times[i]`.
    fn set(&mut self, profile: &Profile, times: &[u64]) {
        let mut reshaped = false;
        for ((part, was), &now) in profile.parts.iter().zip(&mut self.times).zip(times) {
            if *was == now {
                continue;
            }
            reshaped |= (*was == 0) != (now == 0);
            for (d, crossing) in &part.crossings {
                let n = &mut self.crossings[*d].0;
                *n = *n - crossing.count * *was + crossing.count * now;
            }
            *was = now;
        }
        if !reshaped {
            return;
        }
        // Which parts have copies changed: what depends on the set alone is found again.
        self.longest = 0;
        self.heaviest = 0.0;
        self.least_latency = f64::INFINITY;
        self.fastest = 0.0;
        let mut slowest_lane = f64::INFINITY;
        self.crossings
            .iter_mut()
            .for_each(|c| (c.1, c.2) = (u64::MAX, u64::MAX));
        self.waits.fill(Waits::NONE);
        for (part, _) in profile
            .parts
            .iter()
            .zip(&self.times)
            .filter(|(_, &t)| t > 0)
        {
            self.longest = self.longest.max(part.longest);
            self.heaviest = self.heaviest.max(part.heaviest);
            slowest_lane = slowest_lane.min(part.slowest_lane);
            self.least_latency = self.least_latency.min(part.least_latency);
            self.fastest = self.fastest.max(part.fastest);
            for (d, crossing) in &part.crossings {
                let c = &mut self.crossings[*d];
                (c.1, c.2) = (c.1.min(crossing.fill), c.2.min(crossing.drain));
                self.waits[*d] = self.waits[*d].least(crossing.waits);
            }
        }
        for (room, d) in self.room.iter_mut().zip(&profile.directions) {
            *room = d.sends * f64::from(dag::batch(d.lane, slowest_lane));
        }
    }

    /// The bound ([`Profile::bound_with`]) when every transfer carries `chunk_bytes` bytes.
    fn seconds(&self, profile: &Profile, chunk_bytes: f64) -> f64 {
        // The least latency and busy time of a step.
        let (latency, busy) = if self.least_latency.is_finite() && self.fastest > 0.0 {
            (self.least_latency, chunk_bytes / self.fastest)
        } else {
            (0.0, 0.0)
        };
        // Steps chained: their latencies, at least the least latency each.
        let chained = |steps: u64, waits: f64| {
            let waits = if waits.is_finite() { waits } else { 0.0 };
            waits.max(steps as f64 * latency)
        };
        let mut best = self.longest as f64 * busy + chained(self.longest, self.heaviest);
        let directions = profile
            .directions
            .iter()
            .zip(&self.crossings)
            .zip(&self.waits)
            .zip(&self.room);
        for (((d, &(n, fill, drain)), waits), &room) in directions {
            if n == 0 || d.rate <= 0.0 {
                continue;
            }
            let own = chained(1, waits.own).max(d.latency);
            let used = (n as f64 / room).ceil() * own + n as f64 * chunk_bytes / d.rate;
            let around = (fill + drain) as f64 * busy
                + chained(fill, waits.fill)
                + chained(drain, waits.drain);
            best = best.max(used + around);
        }
        best * (1.0 - ROUNDING)
    }
}

/// The bound of a pipeline's own transfers, for the tests: what [`Profile::bound`] must equal.
#[cfg(test)]
fn estimate(
    machine: &Machine,
    spec: &PhaseSpec,
    transfers: &Transfers,
    chunk_bytes: f64,
    lanes: dag::Lanes,
) -> Result<f64, DagError> {
    let all = Crossings::of(machine, &machine.to_ir(), transfers)?;
    let profile = Profile::new(machine, &[all], IdVec::filled(1.0, 1), spec, lanes);
    Ok(profile.bound_with(&[1], chunk_bytes))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::super::{balance, pipeline, RANK_RATES};
    use crate::embed::trees::pack;
    use crate::ids::{IdVec, TreeId};
    use crate::lower::dag::{self, Scheduled};
    use crate::lower::testing::{machine, spec};
    use schedule_ir::{Collective, DType};

    /// The least bound over depths, found by ruling out ranges of depths and bounding the rest
    /// depth after depth from the one before, is the least of the bounds computed one by one;
    /// and no depth's bound is below the floor of a range holding it.
    #[test]
    fn the_least_bound_is_the_least_of_every_depths() {
        let machines = [
            r#"Topology(name: "t", machine: Torus(dims: [4, 4]))"#,
            include_str!("../../../../examples/mesh8x8.ron"),
            include_str!("../../../../examples/nvswitch-2x8.ron"),
            include_str!("../../../../examples/graph-petersen.ron"),
            include_str!("../../../../examples/dgx1-v100.ron"),
            include_str!("../../../../examples/tree-asym.ron"),
        ];
        for text in machines {
            let m = machine(text);
            let ir = m.to_ir();
            for collective in [Collective::AllReduce, Collective::AllGather] {
                for (elements, most) in [(1 << 20, 300), (1 << 26, 2000), (5000, 2000)] {
                    let spec = spec(collective, DType::F32, elements);
                    let packings = crate::embed::trees::packings(&m, collective).unwrap();
                    let policies = [dag::Lanes::Declared, dag::Lanes::Shared(dag::SHARED_SENDS)];
                    for (packing, lanes) in packings
                        .iter()
                        .flat_map(|p| policies.map(|lanes| (p, lanes)))
                    {
                        // A route crossing a direction more often than shared lanes allow.
                        let Ok(profile) =
                            super::Profile::of(&spec, (&m, &ir), packing, most, lanes)
                        else {
                            assert_ne!(lanes, dag::Lanes::Declared, "{}", m.name);
                            continue;
                        };
                        let bounds: Vec<f64> = (1..=most).map(|t| profile.bound(t)).collect();
                        let one_by_one = bounds.iter().copied().fold(f64::INFINITY, f64::min);
                        assert_eq!(
                            profile.least(most).to_bits(),
                            one_by_one.to_bits(),
                            "{} {collective} {elements} elements, {lanes:?}",
                            m.name
                        );
                        let whole = super::Tally::whole(&profile);
                        for (first, last) in [(1, most), (1, 7), (40, 41), (100, 163), (17, most)] {
                            let floor = profile.floor_over(&whole, first, last);
                            let least = bounds[first - 1..last]
                                .iter()
                                .copied()
                                .fold(f64::INFINITY, f64::min);
                            assert!(
                                floor <= least,
                                "{} {collective} {lanes:?}: depths {first}..={last} bounded at \
                                 {least}, their floor is {floor}",
                                m.name
                            );
                        }
                    }
                }
            }
        }
    }

    /// Where routes cross switches, the bound charges each transfer of a chain its route's
    /// latency, links and switches, not the least link latency: on NVSwitch hosts joined by
    /// NICs, a pipeline of one chunk per tree is bounded by at least its longest chain times
    /// the least route latency of any of its transfers, read here from the cost model's own
    /// route latency, and that is above what the least link latency per step gives.
    #[test]
    fn a_chain_through_switches_pays_its_routes_latency() {
        let m = machine(include_str!("../../../../examples/nvswitch-2x8.ron"));
        let ir = m.to_ir();
        let collective = Collective::AllReduce;
        let packing = pack(&m, collective).unwrap();
        let spec = spec(collective, DType::F32, 1 << 10);
        let counts: IdVec<TreeId, usize> =
            balance::apportion(packing.trees.len() as u64, &packing.shares)
                .into_iter()
                .map(|c| c as usize)
                .collect();
        let (_, transfers) = pipeline(&spec, &m, &packing, &counts, RANK_RATES[0]);
        let mut chain = vec![0u64; transfers.len()];
        let mut least_route = f64::INFINITY;
        for (id, t) in transfers.iter_enumerated() {
            let before = t
                .after
                .iter()
                .filter(|a| **a < id)
                .map(|a| chain[a.index()])
                .max();
            chain[id.index()] = before.unwrap_or(0) + 1;
            let (&first, via) = t.what.route.split_first().unwrap();
            least_route = least_route.min(schedule_ir::cost::latency::route_seconds(
                &ir,
                t.what.from,
                first,
                via,
            ));
        }
        let longest = chain.iter().copied().max().unwrap() as f64;
        let least_link = ir
            .links
            .iter()
            .map(|l| l.latency_us * 1e-6)
            .fold(f64::INFINITY, f64::min);
        assert!(least_route > least_link);
        let bound = super::estimate(&m, &spec, &transfers, 4.0, dag::Lanes::Declared).unwrap();
        assert!(
            bound >= longest * least_route * (1.0 - 1e-6),
            "{bound} below {longest} chained transfers of {least_route} s"
        );
    }

    /// Every pipeline depth's schedule is priced at no less than its bound, on machines whose
    /// links differ in speed, lanes and latency and that route through switches: the bound
    /// that lets `trees` skip a depth without changing its pick. And the price read from the
    /// timetable, which the depth search compares, is the estimate of the phase written from it,
    /// to the bit, step by step.
    #[test]
    fn no_depth_is_priced_below_its_bound() {
        let machines = [
            r#"Topology(name: "t", machine: Torus(dims: [4, 4]))"#,
            r#"Topology(name: "l", machine: Ladder(pairs: 5))"#,
            r#"Topology(name: "r", reduce_gbps: 100.0, machine: Ladder(pairs: 3))"#,
            include_str!("../../../../examples/cube.ron"),
            r#"Topology(name: "g", machine: Graph(nodes: ["a", "b", "c", "d"], links: [
                (id: "ab", between: ("a", "b"), bandwidth_gbps: 400.0, latency_us: 0.3, lanes: 2),
                (id: "bc", between: ("b", "c"), bandwidth_gbps: 100.0),
                (id: "cd", between: ("c", "d"), bandwidth_gbps: 100.0, latency_us: 2.0),
                (id: "da", between: ("d", "a"), bandwidth_gbps: 200.0),
                (id: "ac", between: ("a", "c"), bandwidth_gbps: 50.0)]))"#,
            include_str!("../../../../examples/nvswitch-2x8.ron"),
            include_str!("../../../../examples/dgx1-v100-lanes.ron"),
        ];
        let collectives = [
            Collective::AllReduce,
            Collective::AllGather,
            Collective::ReduceScatter,
        ];
        for text in machines {
            let m = machine(text);
            let ir = m.to_ir();
            for collective in collectives {
                let packing = pack(&m, collective).unwrap();
                for elements in [100, 1 << 12, 1 << 20] {
                    let spec = spec(collective, DType::F32, elements);
                    let policies = [dag::Lanes::Declared, dag::Lanes::Shared(dag::SHARED_SENDS)];
                    for (total, rate, lanes) in [1, 2, 3, 8, 20, 64]
                        .into_iter()
                        .flat_map(|t| RANK_RATES.map(|r| (t, r)))
                        .flat_map(|(t, r)| policies.map(|l| (t, r, l)))
                    {
                        let counts: IdVec<TreeId, usize> =
                            balance::apportion(total, &packing.shares)
                                .into_iter()
                                .map(|c| c as usize)
                                .collect();
                        let (chunks, transfers) = pipeline(&spec, &m, &packing, &counts, rate);
                        let least = chunks.iter().map(|c| c.end - c.start).min().unwrap() as f64;
                        let bound =
                            super::estimate(&m, &spec, &transfers, least * 4.0, lanes).unwrap();
                        // The profile's bound is the same, read from one chunk per tree.
                        let profile =
                            super::Profile::of(&spec, (&m, &ir), &packing, 64, lanes).unwrap();
                        assert_eq!(
                            profile.bound(total as usize).to_bits(),
                            bound.to_bits(),
                            "{} {collective} {elements} elements, {total} chunks",
                            m.name
                        );
                        let options = dag::Options {
                            batching: dag::Batching::ByBandwidth,
                            lanes,
                            hold_to_rank: false,
                        };
                        let timetable = dag::schedule_with(&m, &transfers, options).unwrap();
                        let scheduled = Scheduled {
                            chunks,
                            transfers,
                            timetable,
                        };
                        let from_timetable = scheduled.seconds(spec.dtype, &ir);
                        let phase = scheduled.phase(&spec, "trees", &m);
                        let priced = schedule_ir::cost::estimate(&ir, &phase).seconds;
                        assert_eq!(
                            from_timetable.to_bits(),
                            priced.to_bits(),
                            "{} {collective} {elements} elements, {total} chunks: priced \
                             {from_timetable} from the timetable, {priced} as a phase ({lanes:?})",
                            m.name
                        );
                        assert!(
                            bound <= priced && bound > 0.0,
                            "{} {collective} {elements} elements, {total} chunks ranked at \
                             {rate}, {lanes:?}: bound {bound} against the estimate {priced}",
                            m.name
                        );
                    }
                }
            }
        }
    }
}
