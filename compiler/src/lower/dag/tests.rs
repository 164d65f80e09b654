//! Tests of the list scheduler: capacity, dependencies, determinism, errors, batching.
#![allow(clippy::unwrap_used, clippy::panic)]

use super::*;
use schedule_ir::ChunkId;

/// `a —L1— b —L2— c`, with L1's bandwidth and lanes as given.
fn line(bandwidth: f64, lanes: u32) -> Machine {
    let text = format!(
        r#"Topology(name: "line", machine: Graph(nodes: ["a", "b", "c"], links: [
            (id: "L1", between: ("a", "b"), bandwidth_gbps: {bandwidth}, lanes: {lanes}),
            (id: "L2", between: ("b", "c")),
        ]))"#
    );
    crate::compile::load(&text).unwrap().machine
}

fn t(from: u32, to: u32, link: u32, chunk: u32, after: &[u32]) -> Transfer {
    Transfer {
        what: Move {
            from: NodeId(from),
            to: NodeId(to),
            route: vec![LinkId(link)].into(),
            src: BufferId(0),
            dst: BufferId(0),
            chunks: vec![ChunkId(chunk)].into(),
            mode: RecvMode::Store,
        },
        after: after.iter().map(|&i| TransferId(i)).collect(),
        rank: 0,
    }
}

/// The transfers `x`, transfer `i` being `x[i]`.
fn dag(x: Vec<Transfer>) -> Transfers {
    IdVec::from_raw(x)
}

/// Six chunks a → b → c: transfer `2k` is chunk `k` over L1, `2k + 1` the same chunk over L2.
fn relay() -> Transfers {
    (0..6)
        .flat_map(|k| [t(0, 1, 0, k, &[]), t(1, 2, 1, k, &[2 * k])])
        .collect()
}

/// Transfers per direction and step never exceed the lanes, and dependencies land first.
fn check(machine: &Machine, transfers: &Transfers, table: &Timetable) {
    let mut sends = std::collections::BTreeSet::<(u32, DirectionId, u32)>::new();
    for (i, x) in transfers.iter_enumerated() {
        let s = table.step[i];
        assert!(s < table.steps);
        for &p in &x.after {
            assert!(table.step[p] < s, "{i} runs after {p}");
        }
        for d in directions(machine, i, x).unwrap() {
            sends.insert((s, d, table.send[i]));
        }
    }
    for &(s, d, _) in &sends {
        let count = sends
            .iter()
            .filter(|&&(s2, d2, _)| s2 == s && d2 == d)
            .count();
        let lanes = machine.link(d.link()).lanes as usize;
        assert!(count <= lanes, "step {s}, direction {d:?}: {count} sends");
    }
}

#[test]
fn a_relay_pipelines_one_chunk_per_step() {
    let m = line(100.0, 1);
    let x = relay();
    let table = schedule(&m, &x, Batching::One).unwrap();
    check(&m, &x, &table);
    // Six chunks over L1 take six steps; the last one crosses L2 one step later.
    assert_eq!(table.steps, 7);
    assert_eq!(table.step.as_slice()[..4], [0, 1, 1, 2]);
}

#[test]
fn lanes_carry_several_transfers_per_step() {
    let m = line(100.0, 2);
    let x = relay();
    let table = schedule(&m, &x, Batching::One).unwrap();
    check(&m, &x, &table);
    // L1 takes two chunks a step (3 steps), L2 one: the six chunks leave b in steps 1..=6.
    assert_eq!(table.steps, 7);
    assert_eq!(table.step[TransferId(0)], table.step[TransferId(2)]);
}

#[test]
fn scheduling_is_deterministic() {
    let m = line(100.0, 1);
    let mut x = relay();
    // Some transfers back the other way, competing for nothing but adding readiness ties.
    x.extend((0..4).map(|k| t(2, 1, 1, 10 + k, &[])));
    let first = schedule(&m, &x, Batching::One).unwrap();
    check(&m, &x, &first);
    assert_eq!(first, schedule(&m, &x, Batching::One).unwrap());
    assert_eq!(
        steps(&x, &first),
        steps(&x, &schedule(&m, &x, Batching::One).unwrap())
    );
}

#[test]
fn the_critical_path_goes_first() {
    let m = line(100.0, 1);
    // Transfer 0 (a → b) has nothing after it; transfer 1 (a → b) feeds transfer 2 (b → c).
    let x = dag(vec![
        t(0, 1, 0, 0, &[]),
        t(0, 1, 0, 1, &[]),
        t(1, 2, 1, 1, &[1]),
    ]);
    let table = schedule(&m, &x, Batching::One).unwrap();
    assert_eq!(table.step.as_slice(), [1, 0, 1]);
    assert_eq!(table.steps, 2);
    // A rank holds a chain back: ranked 2, transfer 1 now waits for transfer 0.
    let mut ranked = x.clone();
    ranked[TransferId(1)].rank = 2;
    ranked[TransferId(2)].rank = 2;
    assert_eq!(
        schedule(&m, &ranked, Batching::One)
            .unwrap()
            .step
            .as_slice(),
        [0, 1, 2]
    );
}

#[test]
fn cycles_missing_dependencies_and_bad_routes_are_errors() {
    let m = line(100.0, 1);
    let cycle = dag(vec![t(0, 1, 0, 0, &[1]), t(1, 2, 1, 0, &[0])]);
    assert!(matches!(
        schedule(&m, &cycle, Batching::One),
        Err(DagError::Cycle { .. })
    ));
    let missing = dag(vec![t(0, 1, 0, 0, &[7])]);
    assert_eq!(
        schedule(&m, &missing, Batching::One),
        Err(DagError::UnknownDependency {
            transfer: TransferId(0),
            missing: TransferId(7)
        })
    );
    // L2 does not touch a.
    let e = schedule(&m, &dag(vec![t(0, 2, 1, 0, &[])]), Batching::One).unwrap_err();
    assert_eq!(e.to_string(), "transfer 0: link L2 does not touch a");
    // L1 leads from a to b, not to c.
    let e = schedule(&m, &dag(vec![t(0, 2, 0, 0, &[])]), Batching::One).unwrap_err();
    assert!(e.to_string().contains("ends at b, not at c"), "{e}");
    assert_eq!(
        schedule(&m, &Transfers::new(), Batching::One).unwrap(),
        Timetable {
            step: IdVec::new(),
            send: IdVec::new(),
            steps: 0,
            links: LinkUse::Exclusive,
        }
    );
}

#[test]
fn a_link_twice_as_fast_carries_two_chunks_per_send() {
    let m = line(200.0, 1);
    let x = relay();
    let table = schedule(&m, &x, Batching::ByBandwidth).unwrap();
    check(&m, &x, &table);
    // L1 sends chunks in pairs (3 steps); L2, the slowest link, one at a time after them.
    assert_eq!(table.step[TransferId(0)], table.step[TransferId(2)]);
    assert_eq!(table.send[TransferId(0)], table.send[TransferId(2)]);
    assert_eq!(table.steps, 7);
    let first = &steps(&x, &table)[0].moves[0];
    assert_eq!((first.from, first.to), (NodeId(0), NodeId(1)));
    assert_eq!(first.chunks.to_vec(), [ChunkId(0), ChunkId(1)]);
    assert_eq!(first.mode, RecvMode::Store);
}

#[test]
fn a_link_of_two_lanes_at_twice_the_speed_carries_one_chunk_per_send() {
    // L1 is two lanes of 100 Gbit/s each: two sends of one chunk per step, not two of two.
    let m = line(200.0, 2);
    let x = relay();
    let table = schedule(&m, &x, Batching::ByBandwidth).unwrap();
    check(&m, &x, &table);
    assert_eq!(table.step[TransferId(0)], table.step[TransferId(2)]);
    assert_ne!(
        table.send[TransferId(0)],
        table.send[TransferId(2)],
        "two sends, one per lane"
    );
    assert_ne!(
        table.step[TransferId(0)],
        table.step[TransferId(4)],
        "the third chunk waits for the next step"
    );
    for s in steps(&x, &table) {
        assert!(s.moves.iter().all(|m| m.chunks.len() == 1), "{:?}", s.moves);
    }
}

#[test]
fn plan_steps_keep_transfer_order() {
    let m = line(100.0, 1);
    // b sends to a and to c in the same step, and receives from c.
    let x = dag(vec![
        t(1, 0, 0, 0, &[]),
        t(1, 2, 1, 1, &[]),
        t(2, 1, 1, 2, &[]),
    ]);
    let table = schedule(&m, &x, Batching::One).unwrap();
    assert_eq!(table.steps, 1);
    let plan = steps(&x, &table);
    let pairs: Vec<(NodeId, NodeId)> = plan[0].moves.iter().map(|m| (m.from, m.to)).collect();
    assert_eq!(
        pairs,
        [
            (NodeId(1), NodeId(0)),
            (NodeId(1), NodeId(2)),
            (NodeId(2), NodeId(1))
        ]
    );
}

#[test]
fn a_lane_cap_spreads_what_the_declared_lanes_would_stack() {
    // L1 has two lanes: two chunks a → b share a step, unless the lanes are capped at one.
    let m = line(100.0, 2);
    let x = dag(vec![t(0, 1, 0, 0, &[]), t(0, 1, 0, 1, &[])]);
    let with = |lanes| Options {
        batching: Batching::One,
        lanes,
        hold_to_rank: false,
    };
    let declared = schedule_with(&m, &x, with(Lanes::Declared)).unwrap();
    assert_eq!(declared.steps, 1);
    let capped = schedule_with(&m, &x, with(Lanes::AtMost(1))).unwrap();
    check(&m, &x, &capped);
    assert_eq!(capped.steps, 2);
    // A cap above the declared lanes changes nothing, and a cap of 0 still allows one.
    assert_eq!(
        schedule_with(&m, &x, with(Lanes::AtMost(5))).unwrap(),
        declared
    );
    assert_eq!(
        schedule_with(&m, &x, with(Lanes::AtMost(0))).unwrap(),
        capped
    );
}

#[test]
fn holding_to_rank_starts_a_transfer_at_its_rank_unless_nothing_else_could_run() {
    let m = line(100.0, 1);
    // Two independent transfers on different links, the second ranked for step 1.
    let mut x = dag(vec![t(0, 1, 0, 0, &[]), t(1, 2, 1, 1, &[])]);
    x[TransferId(1)].rank = 1;
    let hold = |hold_to_rank| Options {
        batching: Batching::One,
        lanes: Lanes::Declared,
        hold_to_rank,
    };
    let free = schedule_with(&m, &x, hold(false)).unwrap();
    assert_eq!(free.steps, 1, "without holding, both run at once");
    let held = schedule_with(&m, &x, hold(true)).unwrap();
    assert_eq!((held.step[TransferId(0)], held.step[TransferId(1)]), (0, 1));
    // Alone, a transfer ranked for step 3 is not held back into empty steps.
    let mut alone = dag(vec![t(0, 1, 0, 0, &[])]);
    alone[TransferId(0)].rank = 3;
    let table = schedule_with(&m, &alone, hold(true)).unwrap();
    assert_eq!((table.steps, table.step[TransferId(0)]), (1, 0));
}

/// Walking the ready transfers route by route places exactly what the merged walk places,
/// where no two routes share a direction: on the pipelines of `trees` (batched sends on
/// links of two speeds, several lanes, ranks held back) the two walks give the same steps and
/// the same transfers in the same sends.
#[test]
fn walking_route_by_route_places_what_the_merged_walk_places() {
    let machines = [
        r#"Topology(name: "m", machine: Mesh(dims: [4, 5]))"#,
        r#"Topology(name: "l", machine: Ladder(pairs: 5, link: (lanes: 2)))"#,
        r#"Topology(name: "g", machine: Graph(nodes: ["a", "b", "c", "d"], links: [
            (id: "ab", between: ("a", "b"), bandwidth_gbps: 400.0),
            (id: "bc", between: ("b", "c")),
            (id: "cd", between: ("c", "d"), bandwidth_gbps: 200.0, lanes: 2),
            (id: "da", between: ("d", "a")),
            (id: "ac", between: ("a", "c"), bandwidth_gbps: 300.0),
        ]))"#,
    ];
    for text in machines {
        let machine = crate::compile::load(text).unwrap().machine;
        let packing =
            crate::embed::trees::pack(&machine, schedule_ir::Collective::AllReduce).unwrap();
        let spec = crate::lower::PhaseSpec {
            name: "x".to_string(),
            collective: schedule_ir::Collective::AllReduce,
            op: schedule_ir::ReduceOp::Sum,
            dtype: DType::F32,
            elements: 1 << 16,
        };
        let (_, lowered) = crate::lower::trees::lower(&spec, &machine, &packing, 24).unwrap();
        let transfers = &lowered.scheduled.transfers;
        for batching in [Batching::One, Batching::ByBandwidth] {
            for hold_to_rank in [false, true] {
                for lanes in [Lanes::Declared, Lanes::AtMost(1), Lanes::Shared(2)] {
                    let options = Options {
                        batching,
                        lanes,
                        hold_to_rank,
                    };
                    let by_route =
                        fill(&machine, transfers, options, Walk::ByRouteWhereIndependent).unwrap();
                    let merged = fill(&machine, transfers, options, Walk::Merged).unwrap();
                    assert_eq!(by_route.step, merged.step, "{text} {options:?}");
                    assert_eq!(by_route.steps, merged.steps);
                    assert_eq!(by_route.links, merged.links);
                    // Send numbers count in walk order; the sends are the same sets.
                    let sends = |t: &Timetable| {
                        let mut by: std::collections::BTreeMap<(u32, u32), Vec<TransferId>> =
                            Default::default();
                        for (x, (&s, &k)) in t.step.iter().zip(&t.send).enumerate() {
                            by.entry((s, k)).or_default().push(TransferId(x as u32));
                        }
                        let mut sets: Vec<Vec<TransferId>> = by.into_values().collect();
                        sets.sort();
                        sets
                    };
                    assert_eq!(sends(&by_route), sends(&merged), "{text} {options:?}");
                    if by_route.links == LinkUse::Exclusive {
                        check(&machine, transfers, &by_route);
                    }
                }
            }
        }
    }
}
