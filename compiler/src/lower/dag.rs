//! List scheduling: places a DAG of transfers onto BSP steps without overbooking any link
//! direction, and writes the per-node programs.
//!
//! Lowerings that are not built step by step (trees, and anything whose transfers form an
//! irregular graph) describe a collective as [`Transfer`]s — "send these chunks of this buffer
//! from `u` to `v` over this route; the receiver stores or reduces them" — with dependencies:
//! `t.after` lists the transfers whose data `t` needs. [`schedule`] gives every transfer a step
//! such that
//!
//! - each dependency lands first: a transfer runs in a step strictly after every transfer it
//!   depends on (a receive lands at the end of its step, and the next step's sends see it);
//! - each link direction carries at most `lanes` transfers per step, counting every link of a
//!   route;
//! - the result is deterministic: the same transfers give the same steps.
//!
//! The method is greedy list scheduling (Graham): steps are filled one after another; in each
//! step the ready transfers are taken in priority order and placed when every direction of
//! their route still has a free lane, and left for a later step otherwise. List scheduling
//! never idles a direction that a ready transfer could use; optimal scheduling under link
//! capacities is NP-hard. The priority of a transfer, smallest first, is
//!
//! 1. its [`Transfer::rank`] plus its *top level* (the length of the longest dependency chain
//!    that leads to it): the step at which it would run if its chain started at its rank and
//!    nothing were ever delayed. A lowering that pipelines chunks ranks later chunks higher, so
//!    that overdue transfers of earlier chunks go first; with every rank 0 this is "as soon as
//!    possible" order;
//! 2. then its *bottom level* (the longest chain that starts with it), largest first: the
//!    critical path;
//! 3. then its [`TransferId`]: creation order.
//!
//! With [`Batching::ByBandwidth`], transfers with the same route, buffer and receive mode may
//! share one send (one lane) on links faster than the slowest one used: on a machine whose
//! links differ in speed a step lasts as long as its slowest transfer, and a fast link can carry
//! several chunks in that time. Speeds are per lane: a link of `k` lanes shares its bandwidth
//! among its `k` sends, so it is counted as `k` links of a `k`-th of its bandwidth each.
//!
//! [`schedule_with`] takes [`Options`]: lanes capped below what the links declare
//! ([`Lanes::AtMost`]), and transfers held back until the step of their rank
//! ([`Options::hold_to_rank`]); both give timetables valid on the machine, which a lowering
//! that prices its candidates may find cheaper.
//!
//! The scheduler knows nothing about buffers: the caller must express every data hazard as a
//! dependency. In particular a transfer that overwrites a chunk on a node must depend on every
//! transfer that reads the old value there, or run in the same step as the read at the latest
//! (reads see the start-of-step state).

use super::plan::{self, Move, Packing, Plan, Step};
use super::PhaseSpec;
use crate::few::Few;
use crate::ids::{compiler_id, IdVec};
use crate::machine::Machine;
use schedule_ir::cost::{Estimate, StepTally};
use schedule_ir::{
    BufferId, Chunk, ChunkBytes, ChunkIds, DType, DirectionId, LinkId, LinkUse, NodeId, Phase,
    RecvMode,
};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap, HashMap};
use std::ops::Bound::{Excluded, Included, Unbounded};
use thiserror::Error;

compiler_id!(
    /// A transfer of a DAG; indexes the table given to [`schedule`].
    TransferId,
    "transfer "
);

/// The transfers of a DAG, each known by its [`TransferId`].
pub type Transfers = IdVec<TransferId, Transfer>;

/// What a transfer waits for: most wait for a few, held without allocating ([`Few`]).
pub type After = Few<TransferId, 4>;

/// One transfer of the DAG: a move and what it waits for.
#[derive(Clone, Debug, PartialEq)]
pub struct Transfer {
    /// What moves: between compute nodes, over a route of at least one link.
    pub what: Move,
    /// Transfers that must land before this one starts.
    pub after: After,
    /// Pipeline position: the step from which the lowering would like the transfer's chain
    /// to start.
    pub rank: u32,
}

/// The step of every transfer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Timetable {
    /// `step[t]`: the step transfer `t` runs in.
    pub step: IdVec<TransferId, u32>,
    /// `send[t]`: which send of its step carries transfer `t`; transfers with the same step
    /// and send are merged into one send (see [`Batching`]).
    pub send: IdVec<TransferId, u32>,
    /// The number of steps (one more than the last used step; 0 for no transfers).
    pub steps: u32,
    /// Whether some step's sends outnumber a link direction's lanes: only under
    /// [`Lanes::Shared`].
    pub links: LinkUse,
}

/// Why a DAG cannot be scheduled.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum DagError {
    /// A route does not lead from the sender to the receiver over real links.
    #[error("{transfer}: {detail}")]
    BadRoute {
        /// The transfer.
        transfer: TransferId,
        /// What is wrong.
        detail: String,
    },
    /// A dependency names a transfer that does not exist.
    #[error("{transfer} depends on {missing}, which does not exist")]
    UnknownDependency {
        /// The transfer.
        transfer: TransferId,
        /// The missing one.
        missing: TransferId,
    },
    /// Dependencies form a cycle, so some transfers can never run.
    #[error("the dependencies form a cycle: {transfer} can never run")]
    Cycle {
        /// The lowest transfer on or behind a cycle.
        transfer: TransferId,
    },
}

/// The link directions of a transfer's route (a direction appears once per crossing).
pub fn directions(
    machine: &Machine,
    id: TransferId,
    t: &Transfer,
) -> Result<Vec<DirectionId>, DagError> {
    let bad = |detail: String| DagError::BadRoute {
        transfer: id,
        detail,
    };
    let t = &t.what;
    if t.route.is_empty() {
        return Err(bad("its route crosses no link".to_string()));
    }
    let mut at = t.from;
    let mut out = Vec::with_capacity(t.route.len());
    for &link in &t.route {
        if link.index() >= machine.link_count() {
            return Err(bad(format!("{link} does not exist")));
        }
        let (a, b) = machine.endpoints(link);
        let (d, next) = if at == a {
            (DirectionId::new(link, false), b)
        } else if at == b {
            (DirectionId::new(link, true), a)
        } else {
            return Err(bad(format!(
                "link {} does not touch {}",
                machine.link(link).name,
                machine.node(at).name
            )));
        };
        out.push(d);
        at = next;
    }
    if at != t.to || t.from == t.to {
        return Err(bad(format!(
            "the route from {} ends at {}, not at {}",
            machine.node(t.from).name,
            machine.node(at).name,
            machine.node(t.to).name
        )));
    }
    Ok(out)
}

/// Whether transfers may share a send.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Batching {
    /// Every transfer is its own send.
    One,
    /// For transfers of about equal size: a lane `k` times as fast as the slowest one the
    /// transfers use (a lane's speed is its link's bandwidth over its lanes) may carry `k`
    /// transfers with the same route, buffer and mode in one send, since a step lasts as long
    /// as its slowest transfer anyway.
    ByBandwidth,
}

/// How many transfers a link direction may carry in one step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lanes {
    /// As many as the link has lanes.
    Declared,
    /// At most this many (and at least one), whatever the link declares. The timetable is
    /// valid on the machine all the same, and greedy placement is not monotone in capacity:
    /// with many lanes it may stack a later piece's transfers beside an earlier one's and
    /// lengthen steps that fewer lanes would have paired with transfers on other links. A
    /// lowering that prices its candidates can try several.
    AtMost(u32),
    /// As many as fit a step's time, whatever the link declares: the timetable is for a phase
    /// whose links are shared ([`LinkUse::Shared`]), priced by each direction's total bytes.
    /// Each lane of the slowest lane the transfers use takes this many per step (at least
    /// one), and a lane `k` times as fast `k` times as many, so that for transfers of about
    /// equal size every direction's share of a step takes about the same time. Each transfer
    /// is its own send, whatever the batching. Where no direction ends up carrying more sends
    /// in a step than its lanes, the timetable is exclusive all the same
    /// ([`Timetable::links`]).
    Shared(u32),
}

/// How [`schedule_with`] fills steps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    /// Whether transfers may share a send.
    pub batching: Batching,
    /// How many transfers a link direction carries per step.
    pub lanes: Lanes,
    /// Whether a transfer waits for the step of its [`Transfer::rank`] before it is placed,
    /// unless nothing else could run. On links of many lanes, transfers that depend on
    /// nothing would otherwise all go into the first steps, stacking every pipeline piece's
    /// start on the same links instead of spreading them along the pipeline.
    pub hold_to_rank: bool,
}

/// Places every transfer in a step (see the [module doc](self)), each link direction carrying
/// as many transfers per step as it has lanes.
pub fn schedule(
    machine: &Machine,
    transfers: &Transfers,
    batching: Batching,
) -> Result<Timetable, DagError> {
    let options = Options {
        batching,
        lanes: Lanes::Declared,
        hold_to_rank: false,
    };
    schedule_with(machine, transfers, options)
}

/// [`schedule`], filling steps as `options` say.
pub fn schedule_with(
    machine: &Machine,
    transfers: &Transfers,
    options: Options,
) -> Result<Timetable, DagError> {
    fill(machine, transfers, options, Walk::ByRouteWhereIndependent)
}

/// How a step reads the ready transfers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Walk {
    /// One merged walk over every route, in priority order, always: what the tests hold the
    /// walk route by route to.
    #[cfg(test)]
    Merged,
    /// Route by route where no two routes share a direction (every route one direction long),
    /// which places the same transfers with no merge; merged otherwise.
    ByRouteWhereIndependent,
}

/// [`schedule_with`], reading the ready transfers as `walk` says.
fn fill(
    machine: &Machine,
    transfers: &Transfers,
    options: Options,
    walk: Walk,
) -> Result<Timetable, DagError> {
    let Options {
        batching,
        lanes: policy,
        hold_to_rank,
    } = options;
    let n = transfers.len();
    let routes = Routes::new(machine, transfers)?;
    let declared = |d: DirectionId| machine.link(d.link()).lanes.max(1);
    let lanes: IdVec<DirectionId, u32> = match policy {
        Lanes::Declared => IdVec::from_fn(DirectionId::count(machine.link_count()), declared),
        Lanes::AtMost(most) => IdVec::from_fn(DirectionId::count(machine.link_count()), |d| {
            declared(d).min(most.max(1))
        }),
        Lanes::Shared(most) => shared_lanes(machine, &routes, most),
    };
    check_lanes(machine, &routes, &lanes)?;
    let batching = match policy {
        Lanes::Shared(_) => Batching::One,
        Lanes::Declared | Lanes::AtMost(_) => batching,
    };
    let (successors, waiting) = dependencies(transfers)?;
    let (top, level) = levels(&successors, &waiting)?;

    let mut step: IdVec<TransferId, u32> = IdVec::filled(u32::MAX, n);
    let batch = batch_sizes(machine, batching, &routes);
    let (class, classes) = send_classes(transfers, &batch);
    let (route, distinct) = (&routes.number, &routes.distinct);
    // A class's transfers share one route ([`SendKey`]).
    let mut route_of_class = vec![0u32; classes];
    for (t, &c) in class.iter_enumerated() {
        if let Some(r) = route_of_class.get_mut(c as usize) {
            *r = route[t];
        }
    }
    let class_route = |c: u32| route_of_class.get(c as usize).copied();
    // Routes of one direction each are distinct directions: no two share a lane.
    let independent =
        walk == Walk::ByRouteWhereIndependent && distinct.iter().all(|r| r.len() == 1);
    // What placing a transfer reads of each successor, side by side.
    let mut pending: IdVec<TransferId, Pending> = IdVec::from_fn(n, |t: TransferId| Pending {
        key: (
            transfers[t].rank.saturating_add(top[t]),
            Reverse(level[t]),
            t,
        ),
        place: (route[t], class[t]),
        waiting: waiting[t],
    });
    let mut ready = Ready::new(distinct.len(), classes);
    // Ready transfers held back for their rank, by rank: kept out of the walks until their
    // step (or a step that nothing else fills), which place what walking past them would.
    let mut held: BTreeMap<u32, Vec<TransferId>> = BTreeMap::new();
    let holds = |t: TransferId, now: u32| hold_to_rank && transfers[t].rank > now;
    for t in pending.ids().filter(|&t| pending[t].waiting == 0) {
        if holds(t, 0) {
            held.entry(transfers[t].rank).or_default().push(t);
        } else {
            ready.insert(pending[t].place, pending[t].key);
        }
    }
    let mut booking = Booking::new(&routes, (&class, classes), lanes, batch);
    let mut send: IdVec<TransferId, u32> = IdVec::filled(0, n);
    let mut placed = 0;
    let mut now: u32 = 0;
    let mut taken: Vec<TransferId> = Vec::new();
    while placed < n {
        // A step that holds transfers back for their rank and so would stay empty is filled
        // again without holding any back.
        let mut booked = false;
        for hold in [hold_to_rank, false]
            .into_iter()
            .take(1 + usize::from(hold_to_rank))
        {
            // Released: what this step may place, or everything where holding left it empty.
            let released = if hold { now } else { u32::MAX };
            while let Some(entry) = held.first_entry().filter(|e| *e.key() <= released) {
                for t in entry.remove() {
                    ready.insert(pending[t].place, pending[t].key);
                }
            }
            booking.start_step();
            // Places `k`'s transfer in this step unless it is held back or finds no lane.
            let mut consider = |k: Key, booking: &mut Booking| {
                let t = k.2;
                if hold && transfers[t].rank > now {
                    // Held back: the next transfer of its stream may go.
                } else if let Some(s) = booking.place(t, &transfers[t]) {
                    send[t] = s;
                    step[t] = now;
                    placed += 1;
                    taken.push(t);
                }
            };
            if independent {
                // No two routes share a direction, so what one route's transfers book never
                // changes what another's may: each route is walked on its own, in priority
                // order, which places exactly what the merged walk below would.
                for &r in &ready.occupied {
                    let mut next = ready.by_route.get(r as usize).and_then(|set| set.first());
                    while let Some(&k) = next {
                        if booking.full() {
                            break;
                        }
                        if booking.crosses_full(&distinct[r as usize]) {
                            for c in booking.open_with_room(|c| class_route(c) == Some(r)) {
                                let mut join = ready.class_from(c, k);
                                while let Some(j) = join.filter(|_| booking.has_room(c)) {
                                    consider(j, &mut booking);
                                    join = ready.after(Stream::Class(c), j);
                                }
                            }
                            break;
                        }
                        consider(k, &mut booking);
                        next = ready
                            .by_route
                            .get(r as usize)
                            .and_then(|set| set.range((Excluded(k), Unbounded)).next());
                    }
                }
            } else {
                // The ready transfers in priority order, as one merged walk over the routes'
                // sets. A route that crosses a direction with no lane free leaves the walk:
                // each of its transfers would be refused, now and for the rest of the step,
                // unless it joins a send already open, and those are walked by class instead.
                let mut heads: BinaryHeap<Reverse<(Key, Stream)>> = ready
                    .heads()
                    .map(|(r, k)| Reverse((k, Stream::Route(r))))
                    .collect();
                while let Some(Reverse((k, stream))) = heads.pop() {
                    if booking.full() {
                        break;
                    }
                    match stream {
                        Stream::Route(r) if booking.crosses_full(&distinct[r as usize]) => {
                            // No send opens on this route for the rest of the step (lanes are
                            // never freed within one): only transfers joining a send already
                            // open on it can go. Read only their classes, from `k` on.
                            for c in booking.open_with_room(|c| class_route(c) == Some(r)) {
                                if let Some(head) = ready.class_from(c, k) {
                                    heads.push(Reverse((head, Stream::Class(c))));
                                }
                            }
                            continue;
                        }
                        Stream::Class(c) if !booking.has_room(c) => continue,
                        _ => {}
                    }
                    consider(k, &mut booking);
                    if let Some(next) = ready.after(stream, k) {
                        heads.push(Reverse((next, stream)));
                    }
                }
            }
            booked = booking.end_step();
            if booked {
                break;
            }
        }
        if !booked {
            // Nothing fitted an idle machine: only possible when nothing is ready.
            let transfer = step.ids().find(|&t| step[t] == u32::MAX);
            return Err(DagError::Cycle {
                transfer: transfer.unwrap_or(TransferId(0)),
            });
        }
        for t in taken.drain(..) {
            ready.remove(pending[t].place, pending[t].key);
            for &s in successors.of(t) {
                let next = &mut pending[s];
                next.waiting -= 1;
                if next.waiting == 0 {
                    if holds(s, now + 1) {
                        held.entry(transfers[s].rank).or_default().push(s);
                    } else {
                        ready.insert(next.place, next.key);
                    }
                }
            }
        }
        now += 1;
    }
    let links = match policy {
        Lanes::Shared(_) if overbooked(machine, &routes, &step) => LinkUse::Shared,
        _ => LinkUse::Exclusive,
    };
    Ok(Timetable {
        step,
        send,
        steps: if n == 0 { 0 } else { now },
        links,
    })
}

/// The transfers per step of every direction under [`Lanes::Shared`]`(most)`: `most` per lane
/// of the slowest lane the routes use, proportionally more on faster lanes, times the lanes (a
/// route that crosses a direction more often than that is refused, as under declared lanes).
fn shared_lanes(machine: &Machine, routes: &Routes, most: u32) -> IdVec<DirectionId, u32> {
    batch_sizes(machine, Batching::ByBandwidth, routes)
        .iter_enumerated()
        .map(|(d, &k)| {
            k.saturating_mul(most.max(1))
                .saturating_mul(machine.link(d.link()).lanes.max(1))
        })
        .collect()
}

/// The transfers a lowering's shared link directions take per step on the slowest direction
/// it uses ([`Lanes::Shared`]). More cost fewer steps' latency but put more of each chunk's
/// pipeline in one step; 4 priced lowest of 1, 2, 4, 8 and 16 for `trees` on a 5-level switch
/// tree and on two DGX A100 nodes at 256 MiB (8 and 16 gained under 1% there and tripled the
/// time to compile).
pub const SHARED_SENDS: u32 = 4;

/// Whether some link of `machine` is at least twice as fast as another: where every link is
/// about as fast as every other, a step's transfers take about the same time on each, and
/// [`Lanes::Shared`] would only stack several where one send per lane does.
pub fn links_differ(machine: &Machine) -> bool {
    let (slowest, fastest) = (0..machine.link_count())
        .map(|l| machine.link(LinkId::new(l)).bandwidth_gbps)
        .fold((f64::INFINITY, 0.0f64), |(s, f), b| (s.min(b), f.max(b)));
    fastest >= 2.0 * slowest
}

/// The most transfers a direction of `link` takes per step under `lanes`, whatever the
/// transfers: its lanes (at most `m` under [`Lanes::AtMost`]`(m)`, `m` times as many under
/// [`Lanes::Shared`]`(m)`) times its batch against `slowest`, the machine's slowest lane
/// ([`slowest_lane`]), which the transfers' slowest lane is no slower than
/// ([`Batching::ByBandwidth`]). Floors bound a schedule's steps with it.
pub fn room(machine: &Machine, link: LinkId, lanes: Lanes, slowest: f64) -> u64 {
    let declared = machine.link(link).lanes.max(1);
    let sends = match lanes {
        Lanes::Declared => u64::from(declared),
        Lanes::AtMost(most) => u64::from(declared.min(most.max(1))),
        Lanes::Shared(most) => u64::from(most.max(1)) * u64::from(declared),
    };
    sends * u64::from(batch(lane_speed(machine, link), slowest))
}

/// The speed of the machine's slowest lane ([`lane_speed`]), Gbit/s: computed once by a
/// caller that asks [`room`] of many links.
pub fn slowest_lane(machine: &Machine) -> f64 {
    (0..machine.link_count())
        .map(|l| lane_speed(machine, LinkId::new(l)))
        .fold(f64::INFINITY, f64::min)
}

/// A lane's speed: its link's bandwidth over its lanes, Gbit/s. A link of `k` lanes shares its
/// bandwidth among its `k` sends of a step, so each send may carry a `k`-th of what the whole
/// direction could.
pub fn lane_speed(machine: &Machine, link: LinkId) -> f64 {
    let info = machine.link(link);
    info.bandwidth_gbps / f64::from(info.lanes.max(1))
}

/// How many transfers of about equal size one send on a lane of speed `lane` carries where
/// the slowest lane used has speed `slowest` ([`Batching::ByBandwidth`]): their ratio rounded
/// down, from 1 to `u16::MAX`.
pub fn batch(lane: f64, slowest: f64) -> u32 {
    let ratio = (lane / slowest * (1.0 + 1e-9)).floor();
    if ratio.is_finite() && ratio >= 1.0 {
        ratio.min(f64::from(u16::MAX)) as u32
    } else {
        1
    }
}

/// Whether some step of a timetable of one transfer per send has a direction carrying more
/// transfers than its link's lanes.
fn overbooked(machine: &Machine, routes: &Routes, step: &IdVec<TransferId, u32>) -> bool {
    let mut count: HashMap<(u32, DirectionId), u32> = HashMap::new();
    step.ids().any(|t| {
        routes.route(t).iter().any(|&d| {
            let c = count.entry((step[t], d)).or_default();
            *c += 1;
            *c > machine.link(d.link()).lanes.max(1)
        })
    })
}

/// A transfer's priority, smallest first: its rank plus top level, its bottom level (largest
/// first), its id ([module doc](self)).
type Key = (u32, Reverse<u32>, TransferId);

/// A transfer as the scheduler tracks it until it is placed.
#[derive(Clone, Copy, Debug)]
struct Pending {
    key: Key,
    /// Where it waits when ready: its route and its send class.
    place: (u32, u32),
    /// The transfers it still waits for.
    waiting: usize,
}

/// The ready transfers, each under its route, in priority order. Grouping by route lets a step
/// skip, in one go, every transfer whose route crosses a direction already full, instead of
/// reading each of them in every step: on a deep pipeline thousands of transfers wait behind a
/// handful of busy directions, and on a machine with switches the full direction may be any
/// hop of a route, not only its first.
struct Ready {
    by_route: Vec<BTreeSet<Key>>,
    /// Routes holding a ready transfer.
    occupied: BTreeSet<u32>,
    /// The same transfers by send class ([`send_classes`]; none where no send carries more
    /// than one): once a route crosses a full direction, only transfers that join a send
    /// already open on it can go, and those are read from their classes' sets alone.
    by_class: Vec<BTreeSet<Key>>,
}

impl Ready {
    fn new(routes: usize, classes: usize) -> Self {
        Ready {
            by_route: vec![BTreeSet::new(); routes],
            occupied: BTreeSet::new(),
            by_class: vec![BTreeSet::new(); classes],
        }
    }

    fn insert(&mut self, (route, class): (u32, u32), k: Key) {
        if let Some(set) = self.by_route.get_mut(route as usize) {
            // Only the first transfer of a route makes it occupied.
            if set.insert(k) && set.len() == 1 {
                self.occupied.insert(route);
            }
        }
        if let Some(set) = self.by_class.get_mut(class as usize) {
            set.insert(k);
        }
    }

    fn remove(&mut self, (route, class): (u32, u32), k: Key) {
        if let Some(set) = self.by_route.get_mut(route as usize) {
            set.remove(&k);
            if set.is_empty() {
                self.occupied.remove(&route);
            }
        }
        if let Some(set) = self.by_class.get_mut(class as usize) {
            set.remove(&k);
        }
    }

    /// The first ready transfer of every route that has one.
    fn heads(&self) -> impl Iterator<Item = (u32, Key)> + '_ {
        self.occupied.iter().filter_map(|&r| {
            self.by_route
                .get(r as usize)
                .and_then(|set| set.first())
                .map(|&k| (r, k))
        })
    }

    /// The ready transfer after `k` in `stream`.
    fn after(&self, stream: Stream, k: Key) -> Option<Key> {
        let set = match stream {
            Stream::Route(r) => self.by_route.get(r as usize)?,
            Stream::Class(c) => self.by_class.get(c as usize)?,
        };
        set.range((Excluded(k), Unbounded)).next().copied()
    }

    /// The first ready transfer of class `class` from `k` on.
    fn class_from(&self, class: u32, k: Key) -> Option<Key> {
        self.by_class
            .get(class as usize)?
            .range((Included(k), Unbounded))
            .next()
            .copied()
    }
}

/// Where a step's walk over the ready transfers reads next: the transfers of one route, or,
/// once that route crosses a full direction, those of one class with a send open on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Stream {
    Route(u32),
    Class(u32),
}

/// Every transfer's route as link directions ([`directions`]), each distinct route held once:
/// a pipeline has far more transfers than routes (every chunk of a tree crosses the same
/// links), and reading each transfer's route from an allocation of its own scattered the
/// scheduler's hottest reads over the heap.
struct Routes {
    /// `number[t]`: the distinct route of transfer `t`, numbered in order of first appearance.
    number: IdVec<TransferId, u32>,
    /// The distinct routes, by number.
    distinct: Vec<Vec<DirectionId>>,
    /// The first transfer of each distinct route, which an error about the route names.
    first: Vec<TransferId>,
}

impl Routes {
    /// The routes of `transfers` on `machine`, each checked ([`directions`]).
    fn new(machine: &Machine, transfers: &Transfers) -> Result<Routes, DagError> {
        let mut numbers: HashMap<(NodeId, NodeId, &[LinkId]), u32, Words> = HashMap::default();
        let mut distinct = Vec::new();
        let mut first = Vec::new();
        let mut number = IdVec::with_capacity(transfers.len());
        for (id, t) in transfers.iter_enumerated() {
            let key = (t.what.from, t.what.to, t.what.route.as_slice());
            let k = match numbers.get(&key) {
                Some(&k) => k,
                None => {
                    let k = distinct.len() as u32;
                    distinct.push(directions(machine, id, t)?);
                    first.push(id);
                    numbers.insert(key, k);
                    k
                }
            };
            number.push(k);
        }
        Ok(Routes {
            number,
            distinct,
            first,
        })
    }

    /// The route of transfer `t`.
    fn route(&self, t: TransferId) -> &[DirectionId] {
        &self.distinct[self.number[t] as usize]
    }
}

/// The lanes and sends of the step being filled.
struct Booking<'a> {
    /// Every transfer's route.
    routes: &'a Routes,
    /// Lanes of each direction.
    lanes: IdVec<DirectionId, u32>,
    /// Transfers one send may carry on each direction ([`batch_sizes`]).
    batch: IdVec<DirectionId, u32>,
    /// Sends booked on each direction in this step.
    used: IdVec<DirectionId, u32>,
    /// Directions booked in this step, to clear at its end.
    touched: Vec<DirectionId>,
    /// Directions some transfer crosses.
    relevant: usize,
    /// Relevant directions with a lane free in this step.
    free: usize,
    /// Each transfer's send class ([`send_classes`]): transfers of one class may share a
    /// send.
    class: &'a IdVec<TransferId, u32>,
    /// Open sends of this step that have room for more transfers, by class: (send, room,
    /// chunks carried). Only sends with room are kept: a send without room takes no one
    /// else, and one of the same class (the same route) never has room either.
    open: Vec<Option<(u32, u32, ChunkIds)>>,
    /// Classes with an open send in this step, to clear at the next.
    opened: Vec<usize>,
    /// The room of all open sends together.
    open_room: u64,
    /// Sends opened in this step.
    sends: u32,
}

impl<'a> Booking<'a> {
    fn new(
        routes: &'a Routes,
        (class, classes): (&'a IdVec<TransferId, u32>, usize),
        lanes: IdVec<DirectionId, u32>,
        batch: IdVec<DirectionId, u32>,
    ) -> Self {
        // Routes were checked against the machine ([`directions`]): their directions are in
        // range of every table of directions.
        let mut crossed: IdVec<DirectionId, bool> = IdVec::filled(false, lanes.len());
        routes
            .distinct
            .iter()
            .flatten()
            .for_each(|&d| crossed[d] = true);
        let relevant = crossed.iter().filter(|&&r| r).count();
        Booking {
            routes,
            used: IdVec::filled(0, lanes.len()),
            lanes,
            batch,
            touched: Vec::new(),
            relevant,
            free: relevant,
            class,
            open: vec![None; classes],
            opened: Vec::new(),
            open_room: 0,
            sends: 0,
        }
    }

    fn start_step(&mut self) {
        for k in self.opened.drain(..) {
            self.open[k] = None;
        }
        self.open_room = 0;
        self.free = self.relevant;
        self.sends = 0;
    }

    /// Whether nothing more fits in this step: no direction a transfer crosses has a lane
    /// free and no open send has room, so the rest of the ready list waits unread.
    fn full(&self) -> bool {
        self.free == 0 && self.open_room == 0
    }

    /// Whether `route` crosses a direction with no lane free: no send opens on it for the rest
    /// of the step.
    fn crosses_full(&self, route: &[DirectionId]) -> bool {
        route.iter().any(|&d| self.used[d] >= self.lanes[d])
    }

    /// The classes `wanted` with a send open in this step that has room for another transfer.
    fn open_with_room(&self, wanted: impl Fn(u32) -> bool) -> Vec<u32> {
        self.opened
            .iter()
            .filter_map(|&c| u32::try_from(c).ok())
            .filter(|&c| wanted(c) && self.has_room(c))
            .collect()
    }

    /// Whether class `class` has a send open in this step with room for another transfer.
    fn has_room(&self, class: u32) -> bool {
        self.open
            .get(class as usize)
            .is_some_and(|o| o.as_ref().is_some_and(|(_, room, _)| *room > 0))
    }

    /// Books transfer `id` into this step if it fits, joining an open send with room or
    /// opening a send where every direction of its route has a lane free; returns its send.
    fn place(&mut self, id: TransferId, t: &Transfer) -> Option<u32> {
        let route = self.routes.route(id);
        let chunks = &t.what.chunks;
        // Classes are numbered below their count ([`send_classes`]).
        let class = self.class[id] as usize;
        // A send to join has this route, so it uses the route's first direction.
        let may_join = self.open_room > 0 && route.first().is_some_and(|&d| self.used[d] > 0);
        if may_join {
            let joins = self.open[class].as_mut().filter(|(_, room, carried)| {
                *room > 0 && !chunks.iter().any(|c| carried.contains(c))
            });
            if let Some((s, room, carried)) = joins {
                *room -= 1;
                self.open_room -= 1;
                carried.extend(chunks.iter());
                return Some(*s);
            }
        }
        if !route.iter().all(|&d| self.used[d] < self.lanes[d]) {
            return None;
        }
        for &d in route {
            if self.used[d] == 0 {
                self.touched.push(d);
            }
            self.used[d] += 1;
            if self.used[d] == self.lanes[d] {
                self.free -= 1;
            }
        }
        let room = route
            .iter()
            .map(|&d| self.batch[d])
            .min()
            .unwrap_or(1)
            .saturating_sub(1);
        if room > 0 {
            let entry = (self.sends, room, chunks.clone());
            match self.open[class].replace(entry) {
                Some(old) => {
                    self.open_room -= u64::from(old.1);
                }
                None => self.opened.push(class),
            }
            self.open_room += u64::from(room);
        }
        self.sends += 1;
        Some(self.sends - 1)
    }

    /// Frees the step's lanes; returns whether anything was booked.
    fn end_step(&mut self) -> bool {
        let any = !self.touched.is_empty();
        for d in self.touched.drain(..) {
            self.used[d] = 0;
        }
        any
    }
}

/// Refuses a route that crosses a link direction more often than the link has lanes: no step
/// could carry it.
fn check_lanes(
    machine: &Machine,
    routes: &Routes,
    lanes: &IdVec<DirectionId, u32>,
) -> Result<(), DagError> {
    for (route, &id) in routes.distinct.iter().zip(&routes.first) {
        for &d in route {
            if route.iter().filter(|&&e| e == d).count() as u64 > u64::from(lanes[d]) {
                return Err(DagError::BadRoute {
                    transfer: id,
                    detail: format!(
                        "its route crosses link {} the same way more often than it has lanes",
                        machine.link(d.link()).name
                    ),
                });
            }
        }
    }
    Ok(())
}

/// Each transfer's successors, in one table: the scheduler reads them for every transfer it
/// places, and one allocation per transfer would scatter them over the heap.
struct Successors {
    /// Where each transfer's successors start in `list`; one more entry than transfers.
    start: Vec<usize>,
    /// Every transfer's successors, by transfer, each in id order.
    list: Vec<TransferId>,
}

impl Successors {
    /// The successors of `t`.
    fn of(&self, t: TransferId) -> &[TransferId] {
        let (from, to) = (self.start[t.index()], self.start[t.index() + 1]);
        &self.list[from..to]
    }

    fn len(&self) -> usize {
        self.start.len() - 1
    }
}

/// Each transfer's successors and the number of transfers it waits for.
fn dependencies(transfers: &Transfers) -> Result<(Successors, IdVec<TransferId, usize>), DagError> {
    let n = transfers.len();
    let mut waiting: IdVec<TransferId, usize> = IdVec::filled(0, n);
    let mut start = vec![0usize; n + 1];
    for (id, t) in transfers.iter_enumerated() {
        for &p in &t.after {
            if p.index() >= n {
                return Err(DagError::UnknownDependency {
                    transfer: id,
                    missing: p,
                });
            }
            start[p.index() + 1] += 1;
            waiting[id] += 1;
        }
    }
    for i in 0..n {
        start[i + 1] += start[i];
    }
    let mut next = start.clone();
    let mut list = vec![TransferId(0); start[n]];
    for (id, t) in transfers.iter_enumerated() {
        for &p in &t.after {
            list[next[p.index()]] = id;
            next[p.index()] += 1;
        }
    }
    Ok((Successors { start, list }, waiting))
}

/// What makes two transfers one send: the same route, buffer and receive mode.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct SendKey<'a> {
    from: NodeId,
    to: NodeId,
    route: &'a [LinkId],
    src: BufferId,
    dst: BufferId,
    reduce: bool,
}

impl<'a> SendKey<'a> {
    fn of(t: &'a Transfer) -> Self {
        let m = &t.what;
        SendKey {
            from: m.from,
            to: m.to,
            route: &m.route,
            src: m.src,
            dst: m.dst,
            reduce: m.mode == RecvMode::Reduce,
        }
    }
}

/// Numbers each transfer's [`SendKey`] (in order of first appearance), and counts the
/// numbers: comparing two numbers in every step is cheaper than hashing two routes. Where no
/// direction lets a send carry more than one transfer (`batch`), no send is ever joined and
/// nothing is numbered: every transfer is class 0 of none.
fn send_classes(
    transfers: &Transfers,
    batch: &IdVec<DirectionId, u32>,
) -> (IdVec<TransferId, u32>, usize) {
    if batch.iter().all(|&b| b <= 1) {
        return (IdVec::filled(0, transfers.len()), 0);
    }
    let mut numbers: HashMap<SendKey<'_>, u32, Words> = HashMap::default();
    let class = transfers
        .iter()
        .map(|t| {
            let next = numbers.len() as u32;
            *numbers.entry(SendKey::of(t)).or_insert(next)
        })
        .collect();
    (class, numbers.len())
}

/// How many transfers each direction may merge into one send (see [`Batching`]).
fn batch_sizes(machine: &Machine, batching: Batching, routes: &Routes) -> IdVec<DirectionId, u32> {
    let directions = DirectionId::count(machine.link_count());
    let lane = |d: DirectionId| lane_speed(machine, d.link());
    match batching {
        Batching::One => IdVec::filled(1, directions),
        Batching::ByBandwidth => {
            let slowest = routes
                .distinct
                .iter()
                .flatten()
                .map(|&d| lane(d))
                .fold(f64::INFINITY, f64::min);
            IdVec::from_fn(directions, |d| batch(lane(d), slowest))
        }
    }
}

/// A number per transfer.
type PerTransfer = IdVec<TransferId, u32>;

/// The longest dependency chain leading to every transfer and the longest starting at it,
/// counted in transfers; a cycle is an error.
fn levels(
    successors: &Successors,
    waiting: &IdVec<TransferId, usize>,
) -> Result<(PerTransfer, PerTransfer), DagError> {
    let n = successors.len();
    let mut left = waiting.clone();
    let mut order: Vec<TransferId> = left.ids().filter(|&t| left[t] == 0).collect();
    let mut i = 0;
    while let Some(&t) = order.get(i) {
        for &s in successors.of(t) {
            left[s] -= 1;
            if left[s] == 0 {
                order.push(s);
            }
        }
        i += 1;
    }
    if order.len() < n {
        let transfer = left.ids().find(|&t| left[t] > 0);
        return Err(DagError::Cycle {
            transfer: transfer.unwrap_or(TransferId(0)),
        });
    }
    let mut level: IdVec<TransferId, u32> = IdVec::filled(1, n);
    for &t in order.iter().rev() {
        let below = successors
            .of(t)
            .iter()
            .map(|&s| level[s])
            .max()
            .unwrap_or(0);
        level[t] = below + 1;
    }
    let mut top: IdVec<TransferId, u32> = IdVec::filled(0, n);
    for &t in &order {
        for &s in successors.of(t) {
            top[s] = top[s].max(top[t] + 1);
        }
    }
    Ok((top, level))
}

/// The plan steps of `transfers` at the steps of `timetable`, one per BSP step: in each, the
/// sends in the order of their first transfer, a merged send carrying its transfers' chunks in
/// transfer order. So receives that combine into the same chunk in one step do so in a fixed
/// order.
pub fn steps(transfers: &Transfers, timetable: &Timetable) -> Vec<Step> {
    let (starts, order) = by_step(timetable);
    // `slot[send]`: where the step's list holds that send, `usize::MAX` where it holds none.
    let mut slot: Vec<usize> = Vec::new();
    starts
        .windows(2)
        .map(|w| {
            let mut list: Vec<(u32, Vec<TransferId>)> = Vec::new();
            for &t in &order[w[0]..w[1]] {
                let k = timetable.send[t];
                let s = k as usize;
                if slot.len() <= s {
                    slot.resize(s + 1, usize::MAX);
                }
                match slot[s] {
                    usize::MAX => {
                        slot[s] = list.len();
                        list.push((k, vec![t]));
                    }
                    at => list[at].1.push(t),
                }
            }
            for &(k, _) in &list {
                slot[k as usize] = usize::MAX;
            }
            Step::of(
                list.into_iter()
                    .filter_map(|(_, members)| {
                        let mut merged = transfers.get(*members.first()?)?.what.clone();
                        merged.chunks = members
                            .iter()
                            .filter_map(|&t| transfers.get(t))
                            .flat_map(|t| t.what.chunks.iter())
                            .collect();
                        Some(merged)
                    })
                    .collect(),
            )
        })
        .collect()
}

/// The transfers of `timetable` by step, each step's in id order (a counting sort): step `k`'s
/// are `order[starts[k]..starts[k + 1]]`.
fn by_step(timetable: &Timetable) -> (Vec<usize>, Vec<TransferId>) {
    let steps = timetable.steps as usize;
    let mut starts = vec![0usize; steps + 1];
    for &s in timetable.step.iter() {
        if let Some(n) = starts.get_mut(s as usize + 1) {
            *n += 1;
        }
    }
    for k in 0..steps {
        starts[k + 1] += starts[k];
    }
    let mut order = vec![TransferId(0); starts[steps]];
    // Where each step's next transfer goes; a step past the last (none in a timetable the
    // scheduler made) is left out, as it is from the counts.
    let mut next = starts[..steps].to_vec();
    for (t, &s) in timetable.step.iter_enumerated() {
        if let Some(at) = next.get_mut(s as usize) {
            order[*at] = t;
            *at += 1;
        }
    }
    (starts, order)
}

/// A DAG of transfers over `chunks`, list-scheduled: what a lowering that weighs many
/// candidates keeps of each. It is priced from its timetable ([`Scheduled::seconds`], the
/// estimate of the phase to the bit), and only the candidate kept is written into programs
/// ([`Scheduled::phase`]).
#[derive(Clone, Debug)]
pub struct Scheduled {
    /// The vector's chunks.
    pub chunks: Vec<Chunk>,
    /// The transfers.
    pub transfers: Transfers,
    /// Their steps.
    pub timetable: Timetable,
}

impl Scheduled {
    /// The cost model's estimate in seconds for elements of `dtype`: the same as
    /// [`schedule_ir::cost::estimate`] of [`Scheduled::phase`].
    pub fn seconds(&self, dtype: DType, machine: &schedule_ir::Machine) -> f64 {
        self.estimate(dtype, machine).seconds
    }

    /// The cost model's estimate for elements of `dtype`: the same as
    /// [`schedule_ir::cost::estimate`] of [`Scheduled::phase`], to the bit.
    pub fn estimate(&self, dtype: DType, machine: &schedule_ir::Machine) -> Estimate {
        let bytes = ChunkBytes::new(&self.chunks, dtype);
        estimate(machine, &self.transfers, &self.timetable, &bytes)
    }

    /// The phase `spec` asks for, as method `algorithm`: one BSP step per step of the
    /// timetable, over the data buffer.
    pub fn phase(self, spec: &PhaseSpec, algorithm: &str, machine: &Machine) -> Phase {
        let links = self.timetable.links;
        let plan = Plan {
            chunks: self.chunks,
            buffers: super::data_buffer(),
            steps: steps(&self.transfers, &self.timetable),
            packing: Packing::AsGiven,
        };
        Phase {
            links,
            ..plan::assemble(spec, algorithm, machine, plan)
        }
    }
}

/// The cost model's estimate of `timetable`, with chunks of `bytes`: each step's traffic as
/// [`schedule_ir::cost::step_loads`] reads it from the programs that [`steps`] and the
/// assembler write — the same sends, merged the same way — priced as
/// [`schedule_ir::cost::estimate_loads`] prices it, so the estimate is the same to the bit. A
/// lowering that list-schedules many candidates prices each so, without building its steps'
/// loads, and writes programs for the one it keeps.
pub fn estimate(
    machine: &schedule_ir::Machine,
    transfers: &Transfers,
    timetable: &Timetable,
    bytes: &ChunkBytes,
) -> Estimate {
    let (starts, order) = by_step(timetable);
    let mut tally = StepTally::new(machine);
    // Each send of a step, by its number: its first transfer and its bytes so far.
    let mut sends: Vec<Option<(TransferId, u64)>> = Vec::new();
    for w in starts.windows(2) {
        sends.clear();
        for &t in &order[w[0]..w[1]] {
            let s = timetable.send[t] as usize;
            if sends.len() <= s {
                sends.resize(s + 1, None);
            }
            let b = bytes.bytes(&transfers[t].what.chunks);
            match &mut sends[s] {
                Some((_, sum)) => *sum = sum.saturating_add(b),
                empty => *empty = Some((t, b)),
            }
        }
        for &(t, b) in sends.iter().flatten() {
            let m = &transfers[t].what;
            if let Some((&first, via)) = m.route.split_first() {
                tally.send(m.from, first, via, b);
            }
            if m.mode == RecvMode::Reduce {
                tally.combine(m.to, 0, b);
            }
        }
        tally.price();
    }
    tally.estimate()
}

/// A hasher for the scheduler's tables, keyed by small integers and routes of a few links:
/// a multiply and a rotate per word (the mixing of rustc's own `FxHasher`). The default
/// `SipHash` resists collisions an adversary picks, which keys built from a machine's own ids
/// cannot be, and took a twentieth of a deep pipeline's scheduling. Nothing iterates the
/// tables, so no output depends on the hash.
#[derive(Clone, Copy, Debug, Default)]
struct Words(u64);

impl Words {
    const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(Self::SEED);
    }
}

impl std::hash::Hasher for Words {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(c);
            self.add(u64::from_le_bytes(word));
        }
        for &b in chunks.remainder() {
            self.add(u64::from(b));
        }
    }

    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }

    fn write_u32(&mut self, i: u32) {
        self.add(u64::from(i));
    }

    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }

    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }
}

impl std::hash::BuildHasher for Words {
    type Hasher = Words;

    fn build_hasher(&self) -> Words {
        Words(0)
    }
}

#[cfg(test)]
mod tests;
