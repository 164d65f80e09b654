//! The BSP semantics on small hand-written schedules: sends and local sources read the state
//! at the start of the step, writes land at its end in program order, messages are matched by
//! key whatever the order.
#![allow(clippy::unwrap_used, clippy::panic)]

mod common;

use common::*;
use runtime_lite::run_phase;
use schedule_ir::{
    BufferId, ChunkId, Collective, DType, Instr, LinkId, NodeId, RecvMode, ReduceOp,
};

fn shape(elements: u64) -> Shape {
    Shape::new(Collective::AllReduce, ReduceOp::Sum, DType::I32, elements)
}

#[test]
fn a_send_reads_the_start_of_step_state_even_when_the_step_writes_that_chunk() {
    // Both nodes send their vector and reduce the other's into it, in one step. Each lists the
    // receive *before* the send: the send must still carry the input, not the sum.
    let machine = ring_machine(2);
    let mut b = PhaseBuilder::new(&machine, "x", shape(2), 1, 0, 1);
    for (me, peer, link) in [(0, 1, 0), (1, 0, 1)] {
        b.push(
            me,
            0,
            Instr::Recv {
                link: LinkId::new(1 - link),
                from: NodeId::new(peer),
                buffer: BufferId(0),
                chunks: vec![ChunkId(0)].into(),
                mode: RecvMode::Reduce,
            },
        );
        b.push(
            me,
            0,
            Instr::Send {
                link: LinkId::new(link),
                via: Vec::new(),
                to: NodeId::new(peer),
                buffer: BufferId(0),
                chunks: vec![ChunkId(0)].into(),
            },
        );
    }
    let schedule = verified_one(machine, b.build());
    let out = run_phase(&schedule, "x", vec![vec![1, 2], vec![10, 20]]).unwrap();
    // Reading after the write would give 1 + 11 = 12 and 10 + 11 = 21.
    assert_eq!(out, vec![vec![11, 22], vec![11, 22]]);
}

#[test]
fn a_local_reduce_reads_its_source_as_it_was_at_the_start_of_the_step() {
    // Step 0: N0 stores its input a in N1's scratch; N1 sends b, which N0 reduces: N0 = a+b.
    // Step 1: N0 sends a+b, which N1 stores in scratch; in the same step, listed after that
    // receive, N1 reduces scratch into its data. The reduce must read a (start of step 1),
    // giving b+a; reading the fresh a+b would give a+2b.
    let machine = ring_machine(2);
    let mut b = PhaseBuilder::new(&machine, "x", shape(1), 1, 1, 2);
    b.transfer(0, 0, 1, &[0], 0, 1, &[0], RecvMode::Store);
    b.transfer(0, 1, 0, &[1], 0, 0, &[0], RecvMode::Reduce);
    b.transfer(1, 0, 1, &[0], 0, 1, &[0], RecvMode::Store);
    b.local(1, 1, true, 1, 0, &[0]);
    let schedule = verified_one(machine, b.build());
    let out = run_phase(&schedule, "x", vec![vec![1], vec![10]]).unwrap();
    assert_eq!(out, vec![vec![11], vec![11]]);
}

#[test]
fn writes_of_a_step_land_in_program_order() {
    // Step 0: both nodes copy their input to scratch; N1 sends b, N0 reduces it: N0 = a+b.
    // Step 1: N0 sends its scratch copy a; N1 first stores it over its data, then reduces its
    // scratch (b) into its data: a+b. In the other order N1 would end with a.
    let machine = ring_machine(2);
    let mut b = PhaseBuilder::new(&machine, "x", shape(1), 1, 1, 2);
    b.local(0, 0, false, 0, 1, &[0]);
    b.local(1, 0, false, 0, 1, &[0]);
    b.transfer(0, 1, 0, &[1], 0, 0, &[0], RecvMode::Reduce);
    b.transfer(1, 0, 1, &[0], 1, 0, &[0], RecvMode::Store);
    b.local(1, 1, true, 1, 0, &[0]);
    let schedule = verified_one(machine, b.build());
    let out = run_phase(&schedule, "x", vec![vec![1], vec![10]]).unwrap();
    assert_eq!(out, vec![vec![11], vec![11]]);
}

#[test]
fn transfers_sharing_a_link_in_one_step_are_told_apart_by_their_chunks() {
    // One link with two lanes; each node sends both halves as separate transfers and lists the
    // receives in the opposite order.
    let mut machine = ring_machine(2);
    machine.links.truncate(1);
    machine.links[0].lanes = 2;
    let mut b = PhaseBuilder::new(&machine, "x", shape(4), 2, 0, 1);
    for (me, peer) in [(0usize, 1usize), (1, 0)] {
        for c in [0, 1] {
            b.push(
                me,
                0,
                Instr::Send {
                    link: LinkId(0),
                    via: Vec::new(),
                    to: NodeId::new(peer),
                    buffer: BufferId(0),
                    chunks: vec![ChunkId::new(c)].into(),
                },
            );
        }
        for c in [1, 0] {
            b.push(
                me,
                0,
                Instr::Recv {
                    link: LinkId(0),
                    from: NodeId::new(peer),
                    buffer: BufferId(0),
                    chunks: vec![ChunkId::new(c)].into(),
                    mode: RecvMode::Reduce,
                },
            );
        }
    }
    let schedule = verified_one(machine, b.build());
    let out = run_phase(&schedule, "x", vec![vec![1, 2, 3, 4], vec![10, 20, 30, 40]]).unwrap();
    assert_eq!(out, vec![vec![11, 22, 33, 44]; 2]);
}

#[test]
fn a_multi_chunk_transfer_packs_chunks_in_the_order_listed() {
    // N0 sends chunks [2, 0] of its vector to N1, which stores them as [2, 0]: the message
    // carries chunk 2 first, and the receive unpacks it in the same order. Then N0 sends the
    // remaining chunk, so both hold N0's vector (a broadcast from N0).
    let machine = ring_machine(2);
    let root = NodeId(0);
    let shape = Shape::new(Collective::Broadcast { root }, ReduceOp::Sum, DType::I64, 6);
    let mut b = PhaseBuilder::new(&machine, "x", shape, 3, 0, 2);
    b.transfer(0, 0, 1, &[0], 0, 0, &[2, 0], RecvMode::Store);
    b.transfer(1, 0, 1, &[0], 0, 0, &[1], RecvMode::Store);
    let schedule = verified_one(machine, b.build());
    let out = run_phase(&schedule, "x", vec![vec![1i64, 2, 3, 4, 5, 6], vec![0; 6]]).unwrap();
    assert_eq!(out, vec![vec![1, 2, 3, 4, 5, 6]; 2]);
}
