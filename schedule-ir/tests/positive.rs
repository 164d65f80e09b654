//! Correct schedules verify, and their reports give the numbers worked out by hand.
#![allow(clippy::unwrap_used, clippy::panic)]

mod common;

use common::*;
use schedule_ir::{
    verify, BufferId, Collective, Instr, LinkId, Node, NodeId, NodeKind, RecvMode, ReduceOp,
    Schedule, VerifiedSchedule,
};

fn ok(s: Schedule) -> VerifiedSchedule {
    match verify(s) {
        Ok(v) => {
            assert_eq!(simulate_counts(v.schedule()), Ok(()));
            v
        }
        Err(e) => panic!("expected the schedule to verify, got:\n{e}"),
    }
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs())
}

#[test]
fn ring_allreduce_verifies_for_many_sizes() {
    for p in 2..=9 {
        for elements in [0, 1, 7, 1000] {
            ok(ring_allreduce(p, elements));
        }
    }
}

#[test]
fn bidirectional_ring_allreduce_verifies() {
    for p in 2..=8 {
        for k in 1..=3 {
            ok(bidir_ring_allreduce(p, k, 4096));
        }
    }
}

#[test]
fn other_collectives_verify() {
    for p in 2..=7 {
        ok(ring_reduce_scatter(p, 100));
        ok(ring_allgather(p, 100));
        ok(chain_broadcast(p, 3, 100));
        ok(chain_reduce(p, 3, 100));
    }
}

#[test]
fn one_node_needs_no_steps() {
    let mut machine = ring_machine(1);
    machine.links.clear(); // a one-node "ring" would link N0 to itself
    let v = ok(skeleton(
        machine,
        schedule_ir::Collective::AllReduce,
        "none",
        1,
        10,
        0,
    ));
    let p = &v.report().phases[0];
    assert_eq!(p.steps, 0);
    assert_eq!(p.efficiency, 1.0);
}

#[test]
fn unidirectional_ring_report() {
    // 4 nodes, 1024 f32 = 4096 B in 4 chunks of 1024 B; 6 steps; each step every node sends
    // one chunk clockwise: 4 busy directions of 8, 1024 B each.
    let v = ok(ring_allreduce(4, 1024));
    let r = v.report();
    assert_eq!(r.directions.len(), 8);
    assert_eq!(r.directions[0].to_string(), "L0 N0→N1");
    assert_eq!(r.directions[1].to_string(), "L0 N1→N0");
    let p = &r.phases[0];
    assert_eq!(p.steps, 6);
    assert_eq!(p.vector_bytes, 4096);
    assert_eq!(p.step_reports.len(), 6);
    for s in &p.step_reports {
        assert_eq!(
            (s.busy, s.idle, s.max_bytes, s.bytes_sent),
            (4, 4, 1024, 4096)
        );
    }
    assert_eq!(p.bytes_sent, 6 * 4096);
    assert_eq!(p.link_bytes, 6 * 4096);
    assert_eq!(p.direction_bytes, vec![6144, 0, 6144, 0, 6144, 0, 6144, 0]);
    assert_eq!(p.idle_direction_steps, 24);
    assert_eq!(p.never_used, vec![1, 3, 5, 7]);
    assert!(p.warnings.is_empty());

    // Each step: α = 1 µs, β = 1024 B / 12.5e9 B/s = 81.92 ns.
    let step = 1e-6 + 1024.0 / 12.5e9;
    assert!(p.estimate.per_step.iter().all(|&s| close(s, step)));
    assert!(close(p.estimate.seconds, 6.0 * step));
    // Bounds: traffic 2·3·4096 / (4 nodes · 2 links · 12.5e9) = 245.76 ns;
    // latency: opposite nodes are 2 links apart (2 µs), and with 2 links a node hears from
    // at most 2 others per step, so 4 inputs need 2 steps (2 µs); the bound adds the two.
    let bound = 2e-6 + 2.0 * 3.0 * 4096.0 / 1e11;
    assert!(close(p.bound.traffic_seconds, 2.0 * 3.0 * 4096.0 / 1e11));
    assert!(close(p.bound.latency_seconds, 2e-6));
    assert_eq!(p.bound.which, "latency");
    assert!(close(p.bound.seconds, bound));
    assert!(close(p.efficiency, bound / (6.0 * step)));

    let text = r.to_string();
    assert!(
        text.contains("  step  0  busy 4/8 directions  max 1024 B  idle: L0 N1→N0, L1 N2→N1, L2 N3→N2, L3 N0→N3\n"),
        "{text}"
    );
    assert!(
        text.contains("  every link direction busy in every step: no (24 idle direction-steps)\n"),
        "{text}"
    );
}

#[test]
fn bidirectional_ring_uses_every_direction_in_every_step() {
    // 4 nodes, 8 chunks of 128 f32 = 512 B; every direction carries one chunk per step.
    let v = ok(bidir_ring_allreduce(4, 1, 1024));
    let p = &v.report().phases[0];
    for s in &p.step_reports {
        assert_eq!(
            (s.busy, s.idle, s.max_bytes, s.bytes_sent),
            (8, 0, 512, 4096)
        );
    }
    assert_eq!(p.idle_direction_steps, 0);
    assert!(p.never_used.is_empty());
    // Each step: 1 µs + 512 / 12.5e9 s. The traffic bound is now met by the β part exactly:
    // 6 steps × 40.96 ns = 245.76 ns = 2·3·4096 / 1e11.
    assert!(close(p.estimate.transfer_seconds, p.bound.traffic_seconds));
    let text = v.report().to_string();
    assert_eq!(
        text,
        "machine `ring-4`: 4 compute nodes, 0 switches, 4 links (8 directions)\n\
         phase `grads`: allreduce, sum over 1024 f32 (4096 B), algorithm `bidir-ring`, 6 steps\n\
         \x20 estimate 6.246 µs, lower bound 2.246 µs (latency), efficiency 36.0%\n\
         \x20 bytes sent 24576 B, on links 24576 B; busiest direction-step 512 B\n\
         \x20 step  0  busy 8/8 directions  max 512 B  idle: -\n\
         \x20 step  1  busy 8/8 directions  max 512 B  idle: -\n\
         \x20 step  2  busy 8/8 directions  max 512 B  idle: -\n\
         \x20 step  3  busy 8/8 directions  max 512 B  idle: -\n\
         \x20 step  4  busy 8/8 directions  max 512 B  idle: -\n\
         \x20 step  5  busy 8/8 directions  max 512 B  idle: -\n\
         \x20 every link direction busy in every step: yes\n"
    );
}

#[test]
fn long_phases_are_summarised() {
    let v = ok(bidir_ring_allreduce(40, 1, 80 * 16));
    let text = v.report().to_string();
    let steps = text.lines().filter(|l| l.starts_with("  step ")).count();
    assert_eq!(steps, 16, "{text}");
    assert!(
        text.contains("  … 62 more steps: busy 80..80/80 directions, max 64 B\n"),
        "{text}"
    );
    assert!(text.contains("  step 77  busy 80/80"), "{text}");
}

#[test]
fn other_collectives_report_bytes() {
    // Chain broadcast on 4 nodes: one transfer of the whole 400 B vector per step.
    let v = ok(chain_broadcast(4, 2, 100));
    let p = &v.report().phases[0];
    assert_eq!(p.bytes_sent, 3 * 400);
    assert!(p
        .step_reports
        .iter()
        .all(|s| s.busy == 1 && s.max_bytes == 400));
    // Root egress: 2 links × 12.5e9 B/s; m = 400 B.
    assert!(close(p.bound.traffic_seconds, 400.0 / 25e9));
    assert_eq!(p.root.as_ref().map(|r| r.name.as_str()), Some("N0"));
    assert!(v.report().to_string().contains("broadcast from N0"));

    let v = ok(ring_reduce_scatter(4, 100));
    let p = &v.report().phases[0];
    assert_eq!(p.bytes_sent, 3 * 4 * 100);
    assert!(close(p.bound.traffic_seconds, 3.0 * 400.0 / 1e11));
}

#[test]
fn max_combining_twice_is_a_warning() {
    // As in negative::input_combined_twice, but max forgives it.
    let mut s = ring_allreduce(4, 1024);
    phase(&mut s).op = ReduceOp::Max;
    extend_step1_with_chunk0(&mut s);
    let v = ok(s);
    let warnings = &v.report().phases[0].warnings;
    assert_eq!(warnings.len(), 1);
    assert_eq!(
        warnings[0].to_string(),
        "phase `grads`, step 1: N1's receive from N0 combines inputs {N0} into chunk 0 of buffer `data` a second time (harmless for max, but wasted traffic)"
    );
    assert!(v
        .report()
        .to_string()
        .contains("  warning: phase `grads`, step 1: N1's receive"));
}

#[test]
fn report_serialises() {
    let v = ok(ring_allreduce(3, 30));
    let json = serde_json::to_value(v.report()).unwrap();
    assert_eq!(json["phases"][0]["steps"], 4);
    assert_eq!(json["phases"][0]["bound"]["which"], "latency");
    assert_eq!(json["directions"][1]["from"]["name"], "N1");
    assert_eq!(
        json["phases"][0]["step_reports"][0]["loads"][0]["bytes"],
        40
    );
}

// ---- near misses: the correct schedules beside some of `tests/bad/*.ron` ----

#[test]
fn two_lanes_allow_two_transfers() {
    // `link-direction-double-booked.ron` with two lanes per direction.
    let mut s = with_scratch(ring_allreduce(4, 1024));
    s.machine.links[0].lanes = 2;
    at(&mut s, 0, 0).push(send(0, 0, 1, &ids(&[3])));
    at(&mut s, 1, 0).push(Instr::Recv {
        link: LinkId(0),
        from: NodeId(0),
        buffer: BufferId(1),
        chunks: ids(&[3]).into(),
        mode: RecvMode::Store,
    });
    ok(s);
}

#[test]
fn one_routed_transfer_uses_each_link_of_its_route_once() {
    // `routed-transfers-overbook-every-link.ron` with one routed transfer instead of two: a
    // switch S (node 4) linked to N0 (L4) and N2 (L5), and N0 → S → N2 in step 0.
    let mut s = with_scratch(bidir_ring_allreduce(4, 1, 1024));
    s.machine.nodes.push(Node {
        name: "S".into(),
        kind: NodeKind::Switch,
        capacity: None,
    });
    for (name, b) in [("L4", 0), ("L5", 2)] {
        let mut link = s.machine.links[0].clone();
        link.name = name.into();
        link.a = NodeId(4);
        link.b = NodeId(b);
        s.machine.links.push(link);
    }
    phase(&mut s).programs.push(Default::default());
    at(&mut s, 0, 0).push(Instr::Send {
        link: LinkId(4),
        via: vec![LinkId(5)],
        to: NodeId(2),
        buffer: BufferId(0),
        chunks: ids(&[1]).into(),
    });
    at(&mut s, 2, 0).push(Instr::Recv {
        link: LinkId(5),
        from: NodeId(0),
        buffer: BufferId(1),
        chunks: ids(&[1]).into(),
        mode: RecvMode::Store,
    });
    let v = ok(s);
    let step0 = &v.report().phases[0].step_reports[0];
    // The 8 ring directions, N0→S and S→N2 are busy; S→N0 and N2→S are idle.
    assert_eq!((step0.busy, step0.idle), (10, 2));
}

#[test]
fn scratch_staging_is_fine() {
    // Receive into scratch (store), then reduce scratch into data locally one step later: the
    // pipelining pattern of seed 001, on a chain reduce. `send-before-the-staged-fold.ron`
    // sends in the same step as the fold instead.
    let mut s = with_scratch(skeleton(
        ring_machine(3),
        Collective::Reduce { root: NodeId(2) },
        "chain-staged",
        2,
        100,
        4,
    ));
    let all = ids(&[0, 1]);
    let staged = |from: usize| Instr::Recv {
        link: LinkId(from as u32),
        from: NodeId::new(from),
        buffer: BufferId(1),
        chunks: ids(&[0, 1]).into(),
        mode: RecvMode::Store,
    };
    let fold = Instr::Reduce {
        src: BufferId(1),
        dst: BufferId(0),
        chunks: all.clone().into(),
    };
    at(&mut s, 0, 0).push(send(0, 0, 1, &all));
    at(&mut s, 1, 0).push(staged(0));
    at(&mut s, 1, 1).push(fold.clone());
    at(&mut s, 1, 2).push(send(1, 1, 2, &all));
    at(&mut s, 2, 2).push(staged(1));
    at(&mut s, 2, 3).push(fold);
    ok(s);
}

#[test]
fn a_copy_parked_in_scratch_comes_back_a_step_later() {
    // In an allgather, N1 parks its own chunk 2 in scratch (step 0) and copies it back (step
    // 1). `local-copies-read-at-the-start-of-the-step.ron` copies it back in step 0.
    let mut s = with_scratch(ring_allgather(3, 30));
    at(&mut s, 1, 0).push(Instr::Copy {
        src: BufferId(0),
        dst: BufferId(1),
        chunks: ids(&[2]).into(),
    });
    at(&mut s, 1, 1).push(Instr::Copy {
        src: BufferId(1),
        dst: BufferId(0),
        chunks: ids(&[2]).into(),
    });
    ok(s);
}

#[test]
fn a_positive_finite_reduce_rate_is_accepted() {
    // `reduce-rate-{zero,negative,infinite}.ron` are refused.
    let mut s = ring_allreduce(3, 6);
    s.machine.reduce_gbps = Some(400.0);
    ok(s);
}
