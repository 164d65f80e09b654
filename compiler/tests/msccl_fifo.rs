//! Several messages on one MSCCL connection within one BSP step: the shape link-matching
//! schedules have (every link carries a few chunks per step, and what a node receives it
//! forwards in the next step). Laid out step by step (all of a step's sends, then its
//! receives, several of them fused), such a ring deadlocks on one-message connections, and the
//! export refused it. Now the export falls back to interleaving each thread block's sends and
//! receives message by message, so that no thread block sends a second message on a connection
//! before its peer could take the first, and fuses a receive with the next step's send only when
//! that send is the connection's next message; the strict checker runs the result. Where the
//! step-by-step order runs (one chunk per transfer), it is kept, fused.
#![allow(clippy::panic, clippy::unwrap_used)]

mod msccl_sim;

use schedule_ir::{
    Buffer, BufferId, BufferKind, Chunk, ChunkId, Collective, DType, Instr, Link, LinkId, Machine,
    Node, NodeId, NodeKind, Phase, Program, RecvMode, ReduceOp, Schedule, VerifiedSchedule,
    FORMAT_VERSION,
};
use topoc::emit::msccl::{self, Options};

/// A one-way ring of `n` GPUs (node `i` sends to `i + 1`), `k` chunks owned by each, lowered
/// by hand as a ring allgather or reduce-scatter: in step `s`, node `i` sends all `k` chunks of
/// one owner in one transfer, and forwards in step `s + 1` what it received in step `s`. So
/// every connection carries `k` messages in every step, and every thread block both sends and
/// receives in every step.
fn one_way_ring(collective: Collective, n: u32, k: u32) -> VerifiedSchedule {
    let owned = |owner: u32| -> Vec<ChunkId> { (0..k).map(|m| ChunkId(owner * k + m)).collect() };
    let gather = collective == Collective::AllGather;
    // The owner whose chunks node `i` sends in step `s`.
    let sent = |i: u32, s: u32| {
        if gather {
            (i + n - s) % n
        } else {
            (i + 2 * n - 1 - s) % n
        }
    };
    let programs = (0..n)
        .map(|i| {
            let prev = (i + n - 1) % n;
            let steps = (0..n - 1)
                .map(|s| {
                    vec![
                        Instr::Send {
                            link: LinkId(i),
                            via: vec![],
                            to: NodeId((i + 1) % n),
                            buffer: BufferId(0),
                            chunks: owned(sent(i, s)).into(),
                        },
                        Instr::Recv {
                            link: LinkId(prev),
                            from: NodeId(prev),
                            buffer: BufferId(0),
                            chunks: owned(sent(prev, s)).into(),
                            mode: if gather {
                                RecvMode::Store
                            } else {
                                RecvMode::Reduce
                            },
                        },
                    ]
                })
                .collect();
            Program { steps }
        })
        .collect();
    let schedule = Schedule {
        format_version: FORMAT_VERSION,
        program: Vec::new(),
        machine: Machine {
            name: "one-way ring".to_string(),
            nodes: (0..n)
                .map(|i| Node {
                    name: format!("N{i}"),
                    kind: NodeKind::Compute,
                    capacity: None,
                })
                .collect(),
            links: (0..n)
                .map(|i| Link {
                    name: format!("L{i}"),
                    a: NodeId(i),
                    b: NodeId((i + 1) % n),
                    bandwidth_gbps: 100.0,
                    latency_us: 1.0,
                    lanes: 1,
                })
                .collect(),
            reduce_gbps: None,
            switch_latency_us: 0.0,
        },
        phases: vec![Phase {
            name: "x".to_string(),
            collective,
            op: ReduceOp::Sum,
            dtype: DType::F32,
            elements: u64::from(n * k * 4),
            algorithm: "by hand".to_string(),
            chunks: (0..n * k)
                .map(|c| Chunk {
                    start: u64::from(c * 4),
                    end: u64::from(c * 4 + 4),
                    owner: Some(NodeId(c / k)),
                })
                .collect(),
            buffers: vec![Buffer {
                name: "data".to_string(),
                kind: BufferKind::Data,
            }],
            links: schedule_ir::LinkUse::Exclusive,
            steps: n - 1,
            programs,
        }],
    };
    schedule_ir::verify(schedule).unwrap_or_else(|e| panic!("the ring verifies: {e:?}"))
}

/// The step types of every GPU's ring thread block (the one that both sends and receives).
fn ring_types(case: &str, xml: &str) -> Vec<Vec<String>> {
    let algo = msccl_sim::check_file(case, xml).unwrap_or_else(|e| panic!("{e}"));
    algo.gpus
        .iter()
        .map(|gpu| {
            let ring: Vec<_> = gpu
                .tbs
                .iter()
                .filter(|t| t.send >= 0 && t.recv >= 0)
                .collect();
            assert_eq!(ring.len(), 1, "{case}: one ring thread block per GPU");
            ring[0].steps.iter().map(|s| s.ty.clone()).collect()
        })
        .collect()
}

#[test]
fn several_messages_per_step_alternate_and_pass_the_checker() {
    for (collective, receive) in [
        (Collective::AllGather, "r"),
        (Collective::ReduceScatter, "rrc"),
    ] {
        for (n, k) in [(3, 2), (4, 3), (5, 2)] {
            let case = format!("{collective:?} one-way ring of {n}, {k} chunks each");
            let xml = msccl::to_xml(&one_way_ring(collective, n, k), &Options::default())
                .unwrap_or_else(|e| panic!("{case}: exports: {e}"));
            // Every step: send a message, receive one, k times; nothing fused, since the
            // forward connection carries k messages in every step.
            let expected: Vec<&str> = (0..(n - 1) * k).flat_map(|_| ["s", receive]).collect();
            for (g, types) in ring_types(&case, &xml).iter().enumerate() {
                assert_eq!(types, &expected, "{case}: gpu {g}");
            }
        }
    }
}

#[test]
fn one_message_per_step_still_fuses() {
    // The same ring with one chunk per owner is MSCCL's ring: receive and forward in one step.
    let xml = msccl::to_xml(
        &one_way_ring(Collective::AllGather, 4, 1),
        &Options::default(),
    )
    .unwrap();
    for types in ring_types("allgather one-way ring of 4", &xml) {
        assert_eq!(types, ["s", "rcs", "rcs", "r"]);
    }
    let xml = msccl::to_xml(
        &one_way_ring(Collective::ReduceScatter, 4, 1),
        &Options::default(),
    )
    .unwrap();
    for types in ring_types("reduce-scatter one-way ring of 4", &xml) {
        assert_eq!(types, ["s", "rrs", "rrs", "rrc"]);
    }
}

#[test]
fn messages_meet_in_the_same_order_at_both_ends() {
    // Node i's ring thread block sends chunk offsets in the order its successor receives them:
    // the k-th `s` on a connection carries the chunk the k-th receive at the other end stores.
    let xml = msccl::to_xml(
        &one_way_ring(Collective::AllGather, 4, 3),
        &Options::default(),
    )
    .unwrap();
    let algo = msccl_sim::check_file("allgather one-way ring of 4", &xml).unwrap();
    let ring = |g: usize| {
        algo.gpus[g]
            .tbs
            .iter()
            .find(|t| t.send >= 0 && t.recv >= 0)
            .unwrap()
    };
    for g in 0..4 {
        let sent: Vec<i64> = ring(g)
            .steps
            .iter()
            .filter(|s| s.ty == "s")
            .map(|s| s.srcoff + if s.srcbuf == 'i' { g as i64 * 3 } else { 0 })
            .collect();
        let received: Vec<i64> = ring((g + 1) % 4)
            .steps
            .iter()
            .filter(|s| s.ty == "r")
            .map(|s| s.dstoff)
            .collect();
        assert_eq!(sent, received, "gpu {g} to gpu {}", (g + 1) % 4);
    }
}
