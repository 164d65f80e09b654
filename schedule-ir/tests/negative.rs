//! Valid schedules made wrong on purpose: the verifier must name exactly what is wrong.
//!
//! Every test asserts the full list of errors — variant, fields and the rendered message — so
//! that a change in what the verifier reports, or how, shows up here.
#![allow(clippy::unwrap_used, clippy::panic)]

mod common;

use common::*;
use schedule_ir::verify::{Action, AnyId, ChunkList, Named, Transfer};
use schedule_ir::{
    verify, BufferId, ChunkId, Instr, LinkId, NodeId, NodeKind, RecvMode, Schedule, StepId,
    VerifyError,
};

fn errors(s: Schedule) -> Vec<VerifyError> {
    match verify(s) {
        Ok(_) => panic!("expected verification to fail"),
        Err(e) => e.errors,
    }
}

fn messages(s: Schedule) -> Vec<String> {
    errors(s).iter().map(ToString::to_string).collect()
}

fn n(i: u32) -> Named<NodeId> {
    Named {
        id: NodeId(i),
        name: format!("N{i}"),
    }
}

fn l(i: u32) -> Named<LinkId> {
    Named {
        id: LinkId(i),
        name: format!("L{i}"),
    }
}

fn grads() -> String {
    "grads".to_string()
}

// ---- conflict-free ----

#[test]
fn link_direction_double_booked() {
    // A second transfer N0 → N1 over L0 in step 0, received into scratch so that only the
    // conflict is wrong.
    let mut s = with_scratch(ring_allreduce(4, 1024));
    at(&mut s, 0, 0).push(send(0, 0, 1, &ids(&[3])));
    at(&mut s, 1, 0).push(Instr::Recv {
        link: LinkId(0),
        from: NodeId(0),
        buffer: BufferId(1),
        chunks: ids(&[3]),
        mode: RecvMode::Store,
    });
    let e = errors(s);
    assert_eq!(
        e,
        vec![VerifyError::LinkOverbooked {
            phase: grads(),
            step: StepId(0),
            link: l(0),
            from: n(0),
            to: n(1),
            lanes: 1,
            transfers: vec![
                Transfer {
                    from: n(0),
                    to: n(1),
                    chunks: ChunkList(ids(&[0]))
                },
                Transfer {
                    from: n(0),
                    to: n(1),
                    chunks: ChunkList(ids(&[3]))
                },
            ],
        }]
    );
    assert_eq!(
        e[0].to_string(),
        "phase `grads`, step 0: link L0 direction N0→N1 carries 2 transfers (lanes: 1): N0 sends chunks [0] to N1, N0 sends chunks [3] to N1"
    );
}

#[test]
fn two_lanes_allow_two_transfers() {
    let mut s = with_scratch(ring_allreduce(4, 1024));
    s.machine.links[0].lanes = 2;
    at(&mut s, 0, 0).push(send(0, 0, 1, &ids(&[3])));
    at(&mut s, 1, 0).push(Instr::Recv {
        link: LinkId(0),
        from: NodeId(0),
        buffer: BufferId(1),
        chunks: ids(&[3]),
        mode: RecvMode::Store,
    });
    assert!(verify(s).is_ok());
}

#[test]
fn routes_count_every_link_they_cross() {
    // Bidirectional ring on 4 nodes with a switch S (node 4) added, linked to N0 (L4) and N2
    // (L5). An extra transfer N0 → S → N2 in step 0 uses L4 and L5 once each: fine. Then a
    // second one overbooks both.
    let mut s = with_scratch(bidir_ring_allreduce(4, 1, 1024));
    s.machine.nodes.push(schedule_ir::Node {
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
    let routed = |chunk: u32| Instr::Send {
        link: LinkId(4),
        via: vec![LinkId(5)],
        to: NodeId(2),
        buffer: BufferId(0),
        chunks: ids(&[chunk]),
    };
    let landed = |chunk: u32| Instr::Recv {
        link: LinkId(5),
        from: NodeId(0),
        buffer: BufferId(1),
        chunks: ids(&[chunk]),
        mode: RecvMode::Store,
    };
    at(&mut s, 0, 0).push(routed(1));
    at(&mut s, 2, 0).push(landed(1));
    assert!(verify(s.clone()).is_ok());
    let v = verify(s.clone()).unwrap();
    let step0 = &v.report().phases[0].step_reports[0];
    // 8 ring directions + S→N0? no: N0→S (dir 9) and S→N2 (dir 10); of 12 directions.
    assert_eq!((step0.busy, step0.idle), (10, 2));

    at(&mut s, 0, 0).push(routed(2));
    at(&mut s, 2, 0).push(landed(2));
    assert_eq!(
        messages(s),
        vec![
            "phase `grads`, step 0: link L4 direction N0→S carries 2 transfers (lanes: 1): N0 sends chunks [1] to N2, N0 sends chunks [2] to N2",
            "phase `grads`, step 0: link L5 direction S→N2 carries 2 transfers (lanes: 1): N0 sends chunks [1] to N2, N0 sends chunks [2] to N2",
        ]
    );
}

// ---- matched ----

#[test]
fn receive_dropped() {
    let mut s = ring_allreduce(4, 1024);
    at(&mut s, 2, 3).retain(|i| !matches!(i, Instr::Recv { .. }));
    let e = errors(s);
    assert_eq!(
        e,
        vec![VerifyError::UnmatchedSend {
            phase: grads(),
            step: StepId(3),
            transfer: Transfer {
                from: n(1),
                to: n(2),
                chunks: ChunkList(ids(&[2])),
            },
            link: l(1),
        }]
    );
    assert_eq!(
        e[0].to_string(),
        "phase `grads`, step 3: N1 sends chunks [2] to N2 arriving over L1, but N2 posts no matching receive"
    );
}

#[test]
fn send_dropped() {
    let mut s = ring_allreduce(4, 1024);
    at(&mut s, 3, 2).retain(|i| !matches!(i, Instr::Send { .. }));
    let e = errors(s);
    assert_eq!(
        e,
        vec![VerifyError::UnmatchedRecv {
            phase: grads(),
            step: StepId(2),
            node: n(0),
            from: n(3),
            link: l(3),
            chunks: ChunkList(ids(&[1])),
        }]
    );
    assert_eq!(
        e[0].to_string(),
        "phase `grads`, step 2: N0 receives chunks [1] from N3 over L3, but N3 sends nothing matching"
    );
}

#[test]
fn chunk_lists_differ() {
    let mut s = ring_allreduce(4, 1024);
    for instr in at(&mut s, 1, 0).iter_mut() {
        if let Instr::Recv { chunks, .. } = instr {
            *chunks = ids(&[0, 2]);
        }
    }
    let e = errors(s);
    assert_eq!(
        e,
        vec![VerifyError::ChunkListMismatch {
            phase: grads(),
            step: StepId(0),
            from: n(0),
            to: n(1),
            link: l(0),
            sent: ChunkList(ids(&[0])),
            received: ChunkList(ids(&[0, 2])),
        }]
    );
    assert_eq!(
        e[0].to_string(),
        "phase `grads`, step 0: N0 sends chunks [0] to N1 over L0, but N1 receives chunks [0, 2]; the lists must be identical"
    );
}

#[test]
fn receive_on_the_wrong_link_is_unmatched_both_ways() {
    // N1 expects step 0's chunk from N0 over L1 (which does touch N1) instead of L0.
    let mut s = ring_allreduce(4, 1024);
    for instr in at(&mut s, 1, 0).iter_mut() {
        if let Instr::Recv { link, .. } = instr {
            *link = LinkId(1);
        }
    }
    assert_eq!(
        messages(s),
        vec![
            "phase `grads`, step 0: N0 sends chunks [0] to N1 arriving over L0, but N1 posts no matching receive",
            "phase `grads`, step 0: N1 receives chunks [0] from N0 over L1, but N0 sends nothing matching",
        ]
    );
}

// ---- correct ----

#[test]
fn input_combined_twice() {
    let mut s = ring_allreduce(4, 1024);
    extend_step1_with_chunk0(&mut s);
    let e = errors(s);
    assert_eq!(
        e,
        vec![VerifyError::InputCombinedTwice {
            phase: grads(),
            step: StepId(1),
            node: n(1),
            action: Action::Recv { from: n(0) },
            buffer: Named {
                id: BufferId(0),
                name: "data".into()
            },
            chunk: ChunkId(0),
            inputs: schedule_ir::verify::NodeList(vec![n(0)]),
            op: schedule_ir::ReduceOp::Sum,
        }]
    );
    assert_eq!(
        e[0].to_string(),
        "phase `grads`, step 1: N1's receive from N0 combines inputs {N0} into chunk 0 of buffer `data` a second time; sum must combine every input exactly once"
    );
}

#[test]
fn transfer_repeated_in_a_later_step() {
    // Step 0's N0 → N1 transfer (chunk 0, reduced) again in step 2, on a machine with two
    // lanes per direction: N1 combines N0's input into chunk 0 twice.
    let mut s = ring_allreduce(4, 1024);
    for link in &mut s.machine.links {
        link.lanes = 2;
    }
    let again = (at(&mut s, 0, 0)[0].clone(), at(&mut s, 1, 0)[0].clone());
    at(&mut s, 0, 2).push(again.0);
    at(&mut s, 1, 2).push(again.1);
    assert_eq!(
        messages(s),
        vec!["phase `grads`, step 2: N1's receive from N0 combines inputs {N0} into chunk 0 of buffer `data` a second time; sum must combine every input exactly once"]
    );
}

#[test]
fn last_allgather_step_dropped() {
    // Without step 5, node j never receives chunk j+2, which then lacks N(j+1)'s input.
    let mut s = ring_allreduce(4, 1024);
    for program in &mut phase(&mut s).programs {
        program.steps.pop();
    }
    phase(&mut s).steps = 5;
    let e = errors(s);
    assert_eq!(
        e[0],
        VerifyError::WrongResult {
            phase: grads(),
            step: Some(StepId(4)),
            node: n(0),
            chunk: ChunkId(2),
            collective: schedule_ir::Collective::AllReduce,
            holds: schedule_ir::verify::NodeList(vec![n(0), n(2), n(3)]),
            expected: schedule_ir::verify::Expected::AllInputs { count: 4 },
            missing: schedule_ir::verify::NodeList(vec![n(1)]),
            extra: schedule_ir::verify::NodeList(vec![]),
        }
    );
    assert_eq!(
        e.iter().map(ToString::to_string).collect::<Vec<_>>(),
        vec![
            "phase `grads`: N0 ends step 4 with chunk 2 holding inputs of {N0,N2,N3} but allreduce needs all 4; missing {N1}",
            "phase `grads`: N1 ends step 4 with chunk 3 holding inputs of {N0,N1,N3} but allreduce needs all 4; missing {N2}",
            "phase `grads`: N2 ends step 4 with chunk 0 holding inputs of {N0..N2} but allreduce needs all 4; missing {N3}",
            "phase `grads`: N3 ends step 4 with chunk 1 holding inputs of {N1..N3} but allreduce needs all 4; missing {N0}",
        ]
    );
}

#[test]
fn allgather_retargeted() {
    // In the last step N3 should send chunk 2 to N0; both ends name chunk 3 instead, so N0
    // stores chunk 3 a second time (harmless) and keeps a partial chunk 2.
    let mut s = ring_allreduce(4, 1024);
    set_chunks(&mut s, 5, 3, 0, &[3]);
    assert_eq!(
        messages(s),
        vec!["phase `grads`: N0 ends step 5 with chunk 2 holding inputs of {N0,N2,N3} but allreduce needs all 4; missing {N1}"]
    );
}

#[test]
fn reading_undefined_scratch() {
    // N0 sends chunk 0 of the (never written) scratch buffer in step 0.
    let mut s = with_scratch(ring_allreduce(4, 1024));
    if let Instr::Send { buffer, .. } = &mut at(&mut s, 0, 0)[0] {
        *buffer = BufferId(1);
    }
    let e = errors(s);
    assert_eq!(
        e,
        vec![VerifyError::ReadUndefined {
            phase: grads(),
            step: StepId(0),
            node: n(0),
            action: Action::Send { to: n(1) },
            buffer: Named {
                id: BufferId(1),
                name: "scratch".into()
            },
            chunk: ChunkId(0),
        }]
    );
    assert_eq!(
        e[0].to_string(),
        "phase `grads`, step 0: N0's send to N1 reads chunk 0 of buffer `scratch`, which is undefined at the start of the step"
    );
}

#[test]
fn reduce_into_undefined_scratch() {
    // N1 reduces N0's chunk 0 into scratch instead of data. The scratch chunk is poisoned (no
    // further errors about it), but N0's input never reaches the data buffers: the final check
    // reports that consequence at every node too.
    let mut s = with_scratch(ring_allreduce(4, 1024));
    if let Instr::Recv { buffer, .. } = &mut at(&mut s, 1, 0)[0] {
        *buffer = BufferId(1);
    }
    assert_eq!(
        messages(s),
        vec![
            "phase `grads`, step 0: N1's receive from N0 reduces into chunk 0 of buffer `scratch`, which is undefined; store into it first",
            "phase `grads`: N0 ends step 5 with chunk 0 holding inputs of {N1..N3} but allreduce needs all 4; missing {N0}",
            "phase `grads`: N1 ends step 5 with chunk 0 holding inputs of {N1..N3} but allreduce needs all 4; missing {N0}",
            "phase `grads`: N2 ends step 5 with chunk 0 holding inputs of {N1..N3} but allreduce needs all 4; missing {N0}",
            "phase `grads`: N3 ends step 5 with chunk 0 holding inputs of {N1..N3} but allreduce needs all 4; missing {N0}",
        ]
    );
}

#[test]
fn scratch_staging_is_fine() {
    // Receive into scratch (store), then reduce scratch into data locally one step later:
    // the pipelining pattern of seed 001. Here, on the chain reduce: N1 stores N0's vector in
    // step 0 and folds it in with a local reduce in step 1, alongside its own forwarding
    // step… which would read the data buffer before the fold; so the chain is shifted.
    let p = 3;
    let mut s = with_scratch(skeleton(
        ring_machine(p),
        schedule_ir::Collective::Reduce { root: NodeId(2) },
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
        chunks: ids(&[0, 1]),
        mode: RecvMode::Store,
    };
    let fold = Instr::Reduce {
        src: BufferId(1),
        dst: BufferId(0),
        chunks: all.clone(),
    };
    at(&mut s, 0, 0).push(send(0, 0, 1, &all));
    at(&mut s, 1, 0).push(staged(0));
    at(&mut s, 1, 1).push(fold.clone());
    at(&mut s, 1, 2).push(send(1, 1, 2, &all));
    at(&mut s, 2, 2).push(staged(1));
    at(&mut s, 2, 3).push(fold);
    assert!(verify(s.clone()).is_ok());

    // Sending in the same step as the fold sends the unfolded data: N2 misses N0's input.
    let moved = at(&mut s, 1, 2).pop().unwrap();
    at(&mut s, 1, 1).push(moved);
    let recv = at(&mut s, 2, 2).pop().unwrap();
    at(&mut s, 2, 1).push(recv);
    assert_eq!(
        messages(s),
        vec!["phase `grads`: N2 ends step 3 with chunk 0 holding inputs of {N1,N2} but reduce needs all 3; missing {N0}",
             "phase `grads`: N2 ends step 3 with chunk 1 holding inputs of {N1,N2} but reduce needs all 3; missing {N0}"]
    );
}

#[test]
fn reduce_in_allgather() {
    let mut s = ring_allgather(4, 100);
    if let Instr::Recv { mode, .. } = &mut at(&mut s, 1, 0)[0] {
        *mode = RecvMode::Reduce;
    }
    let e = messages(s);
    assert_eq!(
        e,
        vec!["phase `grads`, step 0: N1's receive from N0 reduces, but allgather has nothing to combine; store instead"]
    );
}

#[test]
fn allgather_chunk_never_delivered() {
    let mut s = ring_allgather(3, 30);
    at(&mut s, 2, 1).clear(); // N2 neither forwards chunk 1 to N0 nor receives chunk 0
    at(&mut s, 0, 1).retain(|i| !matches!(i, Instr::Recv { .. }));
    at(&mut s, 1, 1).retain(|i| !matches!(i, Instr::Send { .. }));
    assert_eq!(
        messages(s),
        vec![
            "phase `grads`: N0 ends step 1 with chunk 2 undefined but allgather needs exactly the input of N1; missing {N1}",
            "phase `grads`: N2 ends step 1 with chunk 1 undefined but allgather needs exactly the input of N0; missing {N0}",
        ]
    );
}

// ---- well-formed ----

#[test]
fn link_out_of_range() {
    let mut s = ring_allreduce(4, 1024);
    if let Instr::Send { link, .. } = &mut at(&mut s, 0, 0)[0] {
        *link = LinkId(99);
    }
    let e = errors(s);
    assert_eq!(
        e,
        vec![VerifyError::UnknownId {
            phase: grads(),
            step: StepId(0),
            node: n(0),
            action: Action::Send { to: n(1) },
            id: AnyId::Link(LinkId(99)),
            count: 4,
        }]
    );
    assert_eq!(
        e[0].to_string(),
        "phase `grads`, step 0: N0's send to N1 names link#99, but the machine has 4 links"
    );
}

#[test]
fn every_kind_of_id_out_of_range() {
    let mut s = ring_allreduce(3, 30);
    at(&mut s, 0, 0)[0] = Instr::Send {
        link: LinkId(0),
        via: vec![],
        to: NodeId(7),
        buffer: BufferId(3),
        chunks: ids(&[0, 9]),
    };
    at(&mut s, 1, 0)[0] = Instr::Copy {
        src: BufferId(0),
        dst: BufferId(0),
        chunks: vec![],
    };
    assert_eq!(
        messages(s),
        vec![
            "phase `grads`, step 0: N0's send to node#7 names node#7, but the machine has 3 nodes",
            "phase `grads`, step 0: N0's send to node#7 names buffer 3, but the phase has 1 buffer",
            "phase `grads`, step 0: N0's send to node#7 names chunk 9, but the phase has 3 chunks",
            "phase `grads`, step 0: N1's copy reads and writes buffer `data`; source and destination must differ",
            "phase `grads`, step 0: N1's copy names no chunks",
        ]
    );
}

#[test]
fn route_through_compute_nodes_that_misses_its_destination() {
    // Compute nodes forward, so N0 may reach N2 through N1 (L0 then L1); but this route goes
    // on through N2 to N3 (L2), and N2 waits for it over L1.
    let mut s = with_scratch(ring_allreduce(4, 1024));
    at(&mut s, 0, 0).push(Instr::Send {
        link: LinkId(0),
        via: vec![LinkId(1), LinkId(2)],
        to: NodeId(2),
        buffer: BufferId(0),
        chunks: ids(&[0]),
    });
    at(&mut s, 2, 0).push(Instr::Recv {
        link: LinkId(1),
        from: NodeId(0),
        buffer: BufferId(1),
        chunks: ids(&[0]),
        mode: RecvMode::Store,
    });
    let e = errors(s);
    assert_eq!(
        e,
        vec![VerifyError::RouteEndsElsewhere {
            phase: grads(),
            step: StepId(0),
            node: n(0),
            to: n(2),
            end: n(3),
        }]
    );
    assert_eq!(
        e[0].to_string(),
        "phase `grads`, step 0: the route of N0's send to N2 ends at N3"
    );
}

#[test]
fn broken_routes() {
    let mut s = ring_allreduce(4, 1024);
    // Leaves on a link that does not touch N0.
    if let Instr::Send { link, .. } = &mut at(&mut s, 0, 0)[0] {
        *link = LinkId(2);
    }
    // L1 then L3: after L1 the route is at N2, which L3 does not touch.
    if let Instr::Send { via, .. } = &mut at(&mut s, 1, 1)[1] {
        *via = vec![LinkId(3)];
    }
    // Receives over a link that does not touch N3.
    if let Instr::Recv { link, .. } = &mut at(&mut s, 3, 2)[0] {
        *link = LinkId(0);
    }
    // A send to N3 that ends at N1 (over L0 from N0).
    if let Instr::Send { to, .. } = &mut at(&mut s, 0, 4)[0] {
        *to = NodeId(3);
    }
    assert_eq!(
        messages(s),
        vec![
            "phase `grads`, step 0: N0's send to N1 leaves on L2, but L2 joins N2 and N3, not N0",
            "phase `grads`, step 1: the route of N1's send to N2 breaks at L3: it has reached N2, but L3 joins N3 and N0",
            "phase `grads`, step 2: N3's receive from N2 arrives on L0, but L0 joins N0 and N1, not N3",
            "phase `grads`, step 4: the route of N0's send to N3 ends at N1",
        ]
    );
}

#[test]
fn wrong_step_count() {
    let mut s = ring_allreduce(4, 1024);
    phase(&mut s).programs[2].steps.pop();
    let e = errors(s);
    assert_eq!(
        e,
        vec![VerifyError::StepCount {
            phase: grads(),
            node: n(2),
            steps: 5,
            expected: 6,
        }]
    );
    assert_eq!(
        e[0].to_string(),
        "phase `grads`: N2's program has 5 steps, but the phase has 6"
    );
}

#[test]
fn machine_problems() {
    let mut s = ring_allreduce(3, 30);
    s.format_version = 7;
    s.machine.nodes[1].name = "N0".into();
    s.machine.links[1].name = "L0".into();
    s.machine.links[2].b = NodeId(2); // L2: N2 — N2
    s.machine.links[0].bandwidth_gbps = 0.0;
    s.machine.links[0].latency_us = f64::NAN;
    s.machine.links[1].lanes = 0;
    s.machine.links[1].a = NodeId(5);
    assert_eq!(
        messages(s),
        vec![
            "schedule format version 7 is not supported (this verifier checks version 1)",
            "machine: node#0 and node#1 are both called `N0`; node names must be unique",
            "machine: link L0 has bandwidth_gbps = 0, but it must be positive and finite",
            "machine: link L0 has latency_us = NaN, but it must be non-negative and finite",
            "machine: link#0 and link#1 are both called `L0`; link names must be unique",
            "machine: link L0 ends at node#5, but the machine has 3 nodes",
            "machine: link L0 has lanes = 0, but it must be at least 1",
            "machine: link L2 joins N2 to itself",
        ]
    );
}

#[test]
fn reduce_rate_must_be_positive_and_finite() {
    for (rate, shown) in [(0.0, "0"), (-3.5, "-3.5"), (f64::INFINITY, "inf")] {
        let mut s = ring_allreduce(3, 6);
        s.machine.reduce_gbps = Some(rate);
        assert_eq!(
            messages(s),
            vec![format!(
                "machine `{}`: reduce_gbps = {shown}, but it must be positive and finite",
                "ring-3"
            )]
        );
    }
    let mut s = ring_allreduce(3, 6);
    s.machine.reduce_gbps = Some(400.0);
    assert!(schedule_ir::verify(s).is_ok());
}

#[test]
fn phase_problems() {
    let mut s = ring_reduce_scatter(3, 30);
    let mut copy = s.phases[0].clone();
    copy.chunks[1].start = 11;
    copy.chunks[2].end = 5;
    copy.chunks[0].owner = None;
    copy.chunks[1].owner = Some(NodeId(8));
    copy.buffers[0].kind = schedule_ir::BufferKind::Scratch;
    copy.buffers.push(schedule_ir::Buffer {
        name: "other".into(),
        kind: schedule_ir::BufferKind::Data,
    });
    copy.programs.pop();
    s.phases.push(copy);
    assert_eq!(
        messages(s),
        vec![
            "schedule: two phases are called `grads`; phase names must be unique",
            "phase `grads`: buffer 0 must be the data buffer (kind Data), but it is the scratch buffer `data`",
            "phase `grads`: buffer `other` (buffer 1) is a second data buffer; only buffer 0 is Data",
            "phase `grads`: chunk 0 has no owner, but reduce-scatter needs one for every chunk",
            "phase `grads`: chunk 1 starts at element 11 but should start at 10; chunks are contiguous from element 0",
            "phase `grads`: the owner of chunk 1, node#8, does not exist (the machine has 3 nodes)",
            "phase `grads`: chunk 2 starts at element 20 but ends at 5",
            "phase `grads`: the chunks end at element 5, but the vector has 30 elements",
            "phase `grads`: 2 programs for 3 nodes; every node, switches included, needs one",
        ]
    );
}

#[test]
fn program_problems() {
    use schedule_ir::ProgramItem::{Compute, Exchange};
    let mut s = ring_allreduce(3, 30);
    let mut second = s.phases[0].clone();
    second.name = "shards".into();
    s.phases.push(second);
    s.program = vec![
        Compute("forward".into()),
        Exchange("grads".into()),
        Exchange("grads".into()),
        Exchange("nope".into()),
    ];
    assert_eq!(
        messages(s.clone()),
        vec![
            "program item 3 runs exchange phase `nope`, but no phase has that name",
            "program: phase `grads` is run 2 times; every phase must be run exactly once",
            "program: phase `shards` is run 0 times; every phase must be run exactly once",
        ]
    );
    s.program = vec![
        Exchange("shards".into()),
        Compute("forward".into()),
        Exchange("grads".into()),
    ];
    assert_eq!(
        errors(s),
        vec![VerifyError::ProgramOrder {
            position: 0,
            found: "shards".into(),
            expected: "grads".into(),
        }]
    );
}

#[test]
fn switches_and_peers() {
    let mut s = with_scratch(chain_broadcast(3, 1, 10));
    s.machine.nodes.push(schedule_ir::Node {
        name: "S".into(),
        kind: NodeKind::Switch,
        capacity: None,
    });
    let mut to_switch = s.machine.links[0].clone();
    to_switch.name = "L3".into();
    to_switch.b = NodeId(3);
    s.machine.links.push(to_switch);
    let mut switch_program = schedule_ir::Program {
        steps: vec![vec![]; 2],
    };
    switch_program.steps[1].push(send(3, 3, 0, &ids(&[0])));
    phase(&mut s).programs.push(switch_program);
    phase(&mut s).collective = schedule_ir::Collective::Broadcast { root: NodeId(3) };
    at(&mut s, 0, 1).push(send(3, 0, 3, &ids(&[0])));
    at(&mut s, 1, 1).push(recv(0, 1, &ids(&[0, 0]), RecvMode::Store));
    assert_eq!(
        messages(s),
        vec![
            "phase `grads`: the root S is a switch; the root must be a compute node",
            "phase `grads`, step 1: switch S has instructions, but switches run no program",
            "phase `grads`, step 1: N0 sends to switch S, but only compute nodes receive",
            "phase `grads`, step 1: N1 receives from itself",
            "phase `grads`, step 1: N1's receive from N1 names chunk 0 twice",
        ]
    );
}

// ---- all errors, not only the first ----

#[test]
fn every_error_is_reported() {
    // Three independent mistakes in different steps and passes of one phase: a double-booked
    // direction (step 0), a dropped receive (step 2) and a chunk-list mismatch (step 4).
    let mut s = with_scratch(ring_allreduce(4, 1024));
    at(&mut s, 0, 0).push(send(0, 0, 1, &ids(&[3])));
    at(&mut s, 1, 0).push(Instr::Recv {
        link: LinkId(0),
        from: NodeId(0),
        buffer: BufferId(1),
        chunks: ids(&[3]),
        mode: RecvMode::Store,
    });
    at(&mut s, 3, 2).retain(|i| !matches!(i, Instr::Recv { .. }));
    for instr in at(&mut s, 2, 4).iter_mut() {
        if let Instr::Recv { chunks, .. } = instr {
            *chunks = ids(&[0]);
        }
    }
    assert_eq!(
        messages(s),
        vec![
            "phase `grads`, step 0: link L0 direction N0→N1 carries 2 transfers (lanes: 1): N0 sends chunks [0] to N1, N0 sends chunks [3] to N1",
            "phase `grads`, step 2: N2 sends chunks [0] to N3 arriving over L2, but N3 posts no matching receive",
            "phase `grads`, step 4: N1 sends chunks [1] to N2 over L1, but N2 receives chunks [0]; the lists must be identical",
        ]
    );
}

#[test]
fn errors_of_every_phase_are_reported() {
    // Two phases, each with its own mistake in the correctness pass.
    let mut s = ring_allreduce(4, 1024);
    let mut second = s.phases[0].clone();
    second.name = "again".into();
    s.phases.push(second);
    extend_step1_with_chunk0(&mut s);
    if let Instr::Recv { mode, .. } = &mut s.phases[1].programs[1].steps[0][0] {
        *mode = RecvMode::Store;
    }
    assert_eq!(
        messages(s),
        vec![
            "phase `grads`, step 1: N1's receive from N0 combines inputs {N0} into chunk 0 of buffer `data` a second time; sum must combine every input exactly once",
            "phase `again`: N0 ends step 5 with chunk 0 holding inputs of {N0,N2,N3} but allreduce needs all 4; missing {N1}",
            "phase `again`: N1 ends step 5 with chunk 0 holding inputs of {N0,N2,N3} but allreduce needs all 4; missing {N1}",
            "phase `again`: N2 ends step 5 with chunk 0 holding inputs of {N0,N2,N3} but allreduce needs all 4; missing {N1}",
            "phase `again`: N3 ends step 5 with chunk 0 holding inputs of {N0,N2,N3} but allreduce needs all 4; missing {N1}",
        ]
    );
}

#[test]
fn verify_errors_display_and_serialise() {
    let mut s = ring_allreduce(4, 1024);
    phase(&mut s).programs[2].steps.pop();
    phase(&mut s).programs[3].steps.pop();
    let e = verify(s).unwrap_err();
    assert_eq!(e.to_string(), "schedule failed verification (2 errors)");
    assert_eq!(
        e.errors.iter().map(ToString::to_string).collect::<Vec<_>>(),
        vec![
            "phase `grads`: N2's program has 5 steps, but the phase has 6",
            "phase `grads`: N3's program has 5 steps, but the phase has 6",
        ]
    );
    let json = serde_json::to_value(&e).unwrap();
    assert_eq!(json["errors"][0]["StepCount"]["node"]["name"], "N2");
}

#[test]
fn owners_roots_and_compute_nodes() {
    let mut s = ring_allgather(3, 30);
    s.machine.nodes.push(schedule_ir::Node {
        name: "S".into(),
        kind: NodeKind::Switch,
        capacity: None,
    });
    phase(&mut s).programs.push(Default::default());
    phase(&mut s).chunks[1].owner = Some(NodeId(3));
    assert_eq!(
        messages(s.clone()),
        vec!["phase `grads`: the owner of chunk 1, S, is a switch; owners must be compute nodes"]
    );
    phase(&mut s).chunks[1].owner = Some(NodeId(0));
    phase(&mut s).collective = schedule_ir::Collective::Reduce { root: NodeId(9) };
    assert_eq!(
        messages(s.clone()),
        vec!["phase `grads`: the root node#9 does not exist (the machine has 4 nodes)"]
    );
    for node in &mut s.machine.nodes {
        node.kind = NodeKind::Switch;
    }
    assert_eq!(messages(s), vec!["machine `ring-3` has no compute nodes"]);
}

#[test]
fn broadcast_from_the_wrong_node() {
    // The chain broadcast from N0, declared as a broadcast from N1: N0 sends data it does not
    // have (poisoning what N1 stores), and N0 never receives N1's vector.
    let mut s = chain_broadcast(3, 2, 10);
    phase(&mut s).collective = schedule_ir::Collective::Broadcast { root: NodeId(1) };
    assert_eq!(
        messages(s),
        vec![
            "phase `grads`, step 0: N0's send to N1 reads chunk 0 of buffer `data`, which is undefined at the start of the step",
            "phase `grads`, step 0: N0's send to N1 reads chunk 1 of buffer `data`, which is undefined at the start of the step",
            "phase `grads`: N0 ends step 1 with chunk 0 undefined but broadcast needs exactly the input of N1; missing {N1}",
            "phase `grads`: N0 ends step 1 with chunk 1 undefined but broadcast needs exactly the input of N1; missing {N1}",
        ]
    );
}

#[test]
fn local_copies_read_at_the_start_of_the_step() {
    // In an allgather, N1 parks its own chunk 2 in scratch (step 0) and copies it back (step 1):
    // harmless. Copying it back in step 0 already reads scratch before the park lands.
    let mut s = with_scratch(ring_allgather(3, 30));
    let park = Instr::Copy {
        src: BufferId(0),
        dst: BufferId(1),
        chunks: ids(&[2]),
    };
    let back = Instr::Copy {
        src: BufferId(1),
        dst: BufferId(0),
        chunks: ids(&[2]),
    };
    at(&mut s, 1, 0).push(park);
    at(&mut s, 1, 1).push(back.clone());
    assert!(verify(s.clone()).is_ok());
    at(&mut s, 1, 0).push(back);
    assert_eq!(
        messages(s),
        vec!["phase `grads`, step 0: N1's copy reads chunk 2 of buffer `scratch`, which is undefined at the start of the step"]
    );
}
