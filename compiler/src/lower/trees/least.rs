//! A lower bound on the cost model's estimate of one pipeline depth's schedule, from its
//! transfers alone: [`super::lower`] list-schedules and prices only the depths whose bound
//! is below the cheapest so far, since no other can replace it.

use crate::lower::dag::{self, DagError, Transfers};
use crate::machine::Machine;
use schedule_ir::DirectionId;

/// A bound is compared with an estimate summed in another order: it is lowered by this
/// relative margin so that rounding never lifts it above the estimate it bounds.
const ROUNDING: f64 = 1e-9;

/// A lower bound on [`schedule_ir::cost::estimate`] of the schedule [`dag::schedule`] makes of
/// `transfers` under [`dag::Batching::ByBandwidth`], every transfer carrying at least
/// `chunk_bytes` bytes.
///
/// *Proof.* The estimate sums, per step, `α + busy`: `α` the route latency of the step's
/// slowest send (a route's latency is at least that of each link it crosses), `busy` at least
/// the bytes crossing each link direction in the step over its link's bandwidth.
///
/// - Per direction `d` crossed by `n_d` transfers: a step takes at most `lanes × batch` of them
///   over `d` (one send per lane, each batching at most `batch` transfers, `batch` the ratio of
///   `d`'s lane speed to the slowest lane the transfers cross, as [`dag::schedule`] computes
///   it), so `d` is used in at least `⌈n_d / (lanes × batch)⌉` steps, each charged at least
///   `d`'s latency; and the steps together are busy at least `n_d · chunk_bytes` over `d`'s
///   bandwidth.
/// - Per dependency chain of `L` transfers: the scheduler puts a transfer in a step after those
///   it waits for, so the chain takes `L` steps, each charged at least the least link latency
///   and one chunk over the fastest link.
///
/// The estimate is at least the largest of these. Transfers wait only for earlier ones
/// (creation order); a wait on a later one is not counted, which only shortens the chain.
/// A route the scheduler would refuse is refused here with the same error.
pub fn estimate(
    machine: &Machine,
    transfers: &Transfers,
    chunk_bytes: f64,
) -> Result<f64, DagError> {
    let directions = DirectionId::count(machine.link_count());
    let mut crossings = vec![0u64; directions];
    let mut chain = vec![0u64; transfers.len()];
    let mut slowest_lane = f64::INFINITY;
    let lane = |d: DirectionId| {
        let link = machine.link(d.link());
        link.bandwidth_gbps / f64::from(link.lanes.max(1))
    };
    for (id, t) in transfers.iter_enumerated() {
        for d in dag::directions(machine, id, t)? {
            crossings[d.index()] += 1;
            slowest_lane = slowest_lane.min(lane(d));
        }
        let before = t
            .after
            .iter()
            .filter(|a| **a < id)
            .map(|a| chain[a.index()])
            .max()
            .unwrap_or(0);
        chain[id.index()] = before + 1;
    }
    let (mut least_latency, mut fastest) = (f64::INFINITY, 0.0f64);
    let mut bound = 0.0f64;
    for (i, &n) in crossings.iter().enumerate() {
        let Some(d) = DirectionId::from_index(i).filter(|_| n > 0) else {
            continue;
        };
        let link = machine.link(d.link());
        let ratio = (lane(d) / slowest_lane * (1.0 + 1e-9)).floor();
        let batch = if ratio.is_finite() && ratio >= 1.0 {
            ratio.min(f64::from(u16::MAX))
        } else {
            1.0
        };
        let room = f64::from(link.lanes.max(1)) * batch;
        let latency = link.latency_us * 1e-6;
        let rate = schedule_ir::cost::bytes_per_second(link.bandwidth_gbps);
        least_latency = least_latency.min(latency);
        fastest = fastest.max(rate);
        if rate > 0.0 {
            bound = bound.max((n as f64 / room).ceil() * latency + n as f64 * chunk_bytes / rate);
        }
    }
    let longest = chain.iter().copied().max().unwrap_or(0) as f64;
    if least_latency.is_finite() && fastest > 0.0 {
        bound = bound.max(longest * (least_latency + chunk_bytes / fastest));
    }
    Ok(bound * (1.0 - ROUNDING))
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
                    for (total, rate) in [1, 2, 3, 8, 20, 64]
                        .into_iter()
                        .flat_map(|t| RANK_RATES.map(|r| (t, r)))
                    {
                        let counts: IdVec<TreeId, usize> =
                            balance::apportion(total, &packing.shares)
                                .into_iter()
                                .map(|c| c as usize)
                                .collect();
                        let (chunks, transfers) = pipeline(&spec, &m, &packing, &counts, rate);
                        let least = chunks.iter().map(|c| c.end - c.start).min().unwrap() as f64;
                        let bound = super::estimate(&m, &transfers, least * 4.0).unwrap();
                        let timetable =
                            dag::schedule(&m, &transfers, dag::Batching::ByBandwidth).unwrap();
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
                             {from_timetable} from the timetable, {priced} as a phase",
                            m.name
                        );
                        assert!(
                            bound <= priced && bound > 0.0,
                            "{} {collective} {elements} elements, {total} chunks ranked at \
                             {rate}: bound {bound} against the estimate {priced}",
                            m.name
                        );
                    }
                }
            }
        }
    }
}
