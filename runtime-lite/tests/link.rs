//! The link transport on loopback: every node a thread with its own `127.0.x.y` address per
//! link end. Results bit-identical to the in-process run (rings, a route through a switch);
//! a peer that never comes, one that leaves mid-phase, and one that sends a message of the
//! wrong size each end in an error naming node, link and step within the timeout.
#![cfg(feature = "link")]
#![allow(clippy::unwrap_used, clippy::panic)]

mod common;

use common::*;
use runtime_lite::link::{End, LinkError, LinkNode, Wiring};
use runtime_lite::{run_phase, Element, Error};
use schedule_ir::{DType, NodeId, NodeKind, ReduceOp, VerifiedSchedule};
use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

/// Every run must be over within this.
const BOUND: Duration = Duration::from_secs(20);

/// A wiring on loopback: node end `side` of link `l` is `127.0.net.(2l + side + 1)`. Each
/// test takes its own `net` and port, so tests may run at once.
fn loopback_wiring(schedule: &VerifiedSchedule, net: u8, port: u16) -> Wiring {
    let machine = &schedule.schedule().machine;
    let mut ends = Vec::new();
    for (l, link) in machine.links.iter().enumerate() {
        for (side, node) in [link.a, link.b].into_iter().enumerate() {
            if machine.nodes[node.index()].kind == NodeKind::Switch {
                continue;
            }
            let host = u8::try_from(2 * l + side + 1).unwrap();
            ends.push(End {
                node: machine.node_name(node),
                link: link.name.clone(),
                address: IpAddr::V4(Ipv4Addr::new(127, 0, net, host)),
            });
        }
    }
    Wiring { port, ends }
}

/// Runs phase `grads` `runs` times on every compute node, one thread per node, each over its
/// own `LinkNode`; returns each node's result.
fn run_over_links<T: Element>(
    schedule: &VerifiedSchedule,
    wiring: &Wiring,
    inputs: &[Vec<T>],
    runs: usize,
) -> Vec<Result<Vec<T>, String>> {
    let nodes: Vec<NodeId> = schedule.schedule().machine.compute_nodes().collect();
    std::thread::scope(|scope| {
        let handles: Vec<_> = nodes
            .iter()
            .zip(inputs)
            .map(|(&node, input)| {
                scope.spawn(move || {
                    let mut link =
                        LinkNode::connect(schedule.clone(), wiring, node, Duration::from_secs(5))
                            .map_err(|e| e.to_string())?;
                    let mut data = input.clone();
                    for _ in 0..runs {
                        data.clone_from(input);
                        link.run("grads", &mut data).map_err(|e| e.to_string())?;
                    }
                    Ok(data)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

fn bits<T: Element>(v: &[T]) -> Vec<u64> {
    v.iter().map(|x| x.to_bits_u64()).collect()
}

#[test]
fn ring_over_links_matches_the_in_process_run_bit_for_bit() {
    let p = 4;
    let schedule = verified_one(
        ring_machine(p),
        bidirectional_ring_allreduce(p, "grads", ReduceOp::Sum, DType::F32, 1000),
    );
    let inputs = random_inputs_f32(p, 1000, 11);
    let expected = run_phase(&schedule, "grads", inputs.clone()).unwrap();
    let start = Instant::now();
    let got = run_over_links(&schedule, &loopback_wiring(&schedule, 1, 7301), &inputs, 3);
    assert!(start.elapsed() < BOUND);
    for (node, (got, want)) in got.into_iter().zip(&expected).enumerate() {
        let got = got.unwrap_or_else(|e| panic!("N{node}: {e}"));
        assert_eq!(
            bits(&got),
            bits(want),
            "N{node} differs from the in-process run"
        );
    }
}

#[test]
fn routes_through_a_switch_arrive_on_the_last_link() {
    let p = 3;
    let schedule = verified_one(
        star_machine(p),
        star_allreduce(p, "grads", ReduceOp::Sum, DType::I64, 100),
    );
    let inputs: Vec<Vec<i64>> = (0..p)
        .map(|i| (0..100).map(|e| (i as i64) << 40 | e).collect())
        .collect();
    let expected = run_phase(&schedule, "grads", inputs.clone()).unwrap();
    let got = run_over_links(&schedule, &loopback_wiring(&schedule, 2, 7302), &inputs, 1);
    for (got, want) in got.into_iter().zip(&expected) {
        assert_eq!(&got.unwrap(), want);
    }
}

#[test]
fn a_peer_that_never_connects_is_named_with_its_link() {
    let schedule = verified_one(
        ring_machine(2),
        ring_allreduce(2, "grads", ReduceOp::Sum, DType::I32, 10),
    );
    let wiring = loopback_wiring(&schedule, 3, 7303);
    let start = Instant::now();
    let e = LinkNode::connect(
        schedule,
        &wiring,
        NodeId::new(0),
        Duration::from_millis(500),
    )
    .unwrap_err();
    assert!(start.elapsed() < Duration::from_secs(5));
    let text = e.to_string();
    assert!(
        matches!(e, LinkError::Connect { .. }),
        "unexpected error: {text}"
    );
    assert!(
        text.contains("node N0 cannot connect to N1 over link L"),
        "{text}"
    );
}

#[test]
fn a_peer_that_leaves_mid_phase_ends_the_step_with_an_error() {
    let p = 4;
    let schedule = verified_one(
        ring_machine(p),
        ring_allreduce(p, "grads", ReduceOp::Sum, DType::I32, 40),
    );
    let wiring = loopback_wiring(&schedule, 4, 7304);
    let start = Instant::now();
    let results: Vec<Result<(), String>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..p)
            .map(|i| {
                let (schedule, wiring) = (&schedule, &wiring);
                scope.spawn(move || {
                    let mut link = LinkNode::connect(
                        schedule.clone(),
                        wiring,
                        NodeId::new(i),
                        Duration::from_secs(5),
                    )
                    .map_err(|e| e.to_string())?;
                    if i == 2 {
                        // N2 leaves before sending anything: its connections close.
                        return Ok(());
                    }
                    let mut data = vec![1i32; 40];
                    link.run("grads", &mut data).map_err(|e| e.to_string())
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(start.elapsed() < Duration::from_secs(10));
    // N3 receives from N2 over L2 in step 0.
    let e = results[3].as_ref().unwrap_err();
    assert!(
        e.contains("step 0") && e.contains("N3") && e.contains("from N2 over link L2 closed"),
        "{e}"
    );
}

/// Plays node N1 of a two-node ring by hand, following the documented framing: accepts
/// N0's connection, connects to N0 from `n1_l1` (its address on L1 in the wiring, or not),
/// says hello, then sends `bytes` bytes as its step-0 message.
fn fake_n1(
    schedule: &VerifiedSchedule,
    wiring: &Wiring,
    bytes: usize,
) -> std::thread::JoinHandle<()> {
    let addr = |node: &str, link: &str| {
        let e = wiring
            .ends
            .iter()
            .find(|e| e.node == node && e.link == link)
            .unwrap();
        (e.address, wiring.port)
    };
    let (n1_l0, n0_l1) = (addr("N1", "L0"), addr("N0", "L1"));
    // N1's first chunk in step 0, which names its message.
    let phase = &schedule.schedule().phases[0];
    let first_chunk = phase.programs[1].steps[0]
        .iter()
        .find_map(|i| match i {
            schedule_ir::Instr::Send { chunks, .. } => chunks.first().map(|c| c.index() as u32),
            _ => None,
        })
        .unwrap();
    let listener = TcpListener::bind(n1_l0).unwrap();
    std::thread::spawn(move || {
        let (mut from_n0, _) = listener.accept().unwrap();
        let mut hello = [0u8; 28];
        from_n0.read_exact(&mut hello).unwrap();
        let mut to_n0 = loop {
            match TcpStream::connect(n0_l1) {
                Ok(s) => break s,
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        };
        // hello: from N1 to N0, first and last link L1, lane 0.
        let mut out = b"TPLH".to_vec();
        for f in [1u32, 1, 0, 1, 1, 0] {
            out.extend_from_slice(&f.to_le_bytes());
        }
        // message: phase 0, step 0, link L1, from N1, to N0, first chunk, 0, bytes.
        out.extend_from_slice(b"TPLM");
        for f in [0u32, 0, 1, 1, 0, first_chunk, 0] {
            out.extend_from_slice(&f.to_le_bytes());
        }
        out.extend_from_slice(&(bytes as u64).to_le_bytes());
        out.resize(out.len() + bytes, 7);
        let _ = to_n0.write_all(&out);
        std::thread::sleep(Duration::from_millis(500));
    })
}

#[test]
fn a_message_of_the_wrong_size_is_an_error_naming_node_link_and_step() {
    let schedule = verified_one(
        ring_machine(2),
        ring_allreduce(2, "grads", ReduceOp::Sum, DType::I32, 10),
    );
    let mut wiring = loopback_wiring(&schedule, 5, 7305);
    // The fake connects with the standard library, from loopback's own source address.
    for e in &mut wiring.ends {
        if e.node == "N1" && e.link == "L1" {
            e.address = IpAddr::V4(Ipv4Addr::LOCALHOST);
        }
    }
    // A chunk is 5 elements (20 bytes); 4 elements arrive.
    let fake = fake_n1(&schedule, &wiring, 16);
    let start = Instant::now();
    let mut node =
        LinkNode::connect(schedule, &wiring, NodeId::new(0), Duration::from_secs(3)).unwrap();
    let e = node.run("grads", &mut [1i32; 10]).unwrap_err();
    assert!(start.elapsed() < Duration::from_secs(10));
    fake.join().unwrap();
    assert!(matches!(e, Error::WrongMessageSize { .. }), "{e}");
    assert_eq!(
        e.to_string(),
        "phase `grads`, step 0: node N0 received 4 elements from N1 over link L1, but the receive expects 5"
    );
}

#[test]
fn a_connection_from_the_wrong_address_is_refused() {
    let schedule = verified_one(
        ring_machine(2),
        ring_allreduce(2, "grads", ReduceOp::Sum, DType::I32, 10),
    );
    // N1's address on L1 is 127.0.6.3, but the fake connects from 127.0.0.1.
    let wiring = loopback_wiring(&schedule, 6, 7306);
    let fake = fake_n1(&schedule, &wiring, 20);
    let e = LinkNode::connect(schedule, &wiring, NodeId::new(0), Duration::from_secs(3))
        .unwrap_err()
        .to_string();
    fake.join().unwrap();
    assert!(
        e.starts_with("node N0: refused a connection from 127.0.0.1:"),
        "{e}"
    );
    assert!(
        e.ends_with("it says it is `N1` on link `L1`, whose address is 127.0.6.3"),
        "{e}"
    );
}

/// `p` random `f32` vectors.
fn random_inputs_f32(p: usize, len: usize, seed: u64) -> Vec<Vec<f32>> {
    (0..p)
        .map(|i| {
            (0..len)
                .map(|e| {
                    ((seed as usize * 7919 + i * 104_729 + e * 31) % 1000) as f32 * 0.37 - 150.0
                })
                .collect()
        })
        .collect()
}
