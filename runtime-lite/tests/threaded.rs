//! Runtime faults in a threaded run (one thread per node over channels, the shape of an MPI
//! run): a node that stops, panics or hangs, and a message of the wrong size each end in an
//! error naming the phase, the step and the node, within a bounded time — never a hang, never a
//! panic out of the run. Also: a tampered schedule file is refused by `load` before it runs.
#![allow(clippy::unwrap_used, clippy::panic)]
// The node programs below return `runtime_lite::Error`, as `run_nodes` asks.
#![allow(clippy::result_large_err)]

mod common;

use common::*;
use runtime_lite::threaded::{Endpoint, Threaded, ThreadedError};
use runtime_lite::{run_node_phase, run_phase, Element, Error, Expected, Message, Transport};
use schedule_ir::{DType, NodeId, ReduceOp, StepId, VerifiedSchedule};
use std::time::{Duration, Instant};

/// The receive timeout of the tests about a node that hangs.
const SHORT: Duration = Duration::from_millis(200);
/// The timeout of the other tests: long enough that it never fires on a loaded machine.
const LONG: Duration = Duration::from_secs(5);
/// Every run must be over within this (generous, so CI under load does not flake).
const BOUND: Duration = Duration::from_secs(10);

/// A ring allreduce of 30 `i32`s called `grads` on `p` nodes: in step `s`, `Ni` sends one
/// chunk to `N(i+1)` over link `Li`.
fn ring(p: usize) -> VerifiedSchedule {
    verified_one(
        ring_machine(p),
        ring_allreduce(p, "grads", ReduceOp::Sum, DType::I32, 30),
    )
}

fn inputs(p: usize) -> Vec<Vec<i32>> {
    (0..p)
        .map(|i| (0..30).map(|e| (i * 100 + e) as i32).collect())
        .collect()
}

/// What a faulty node does when it reaches the step.
#[derive(Clone, Copy, Debug)]
enum Fault {
    /// Drops its endpoint and gives up.
    Stop,
    /// Panics.
    Panic,
    /// Sleeps for this long, then carries on.
    Hang(Duration),
    /// Sends its messages one element short.
    Truncate,
}

/// The error a node that stops on purpose reports for itself.
#[derive(Debug, thiserror::Error)]
#[error("stopped on purpose")]
struct Stopped;

#[derive(Debug, thiserror::Error)]
enum FaultyError {
    #[error(transparent)]
    Stopped(#[from] Stopped),
    #[error(transparent)]
    Threaded(#[from] ThreadedError),
}

/// An endpoint that misbehaves as `fault` says in step `at`.
struct Faulty {
    endpoint: Option<Endpoint>,
    at: usize,
    fault: Fault,
}

impl<T: Element> Transport<T> for Faulty {
    type Error = FaultyError;

    fn exchange(
        &mut self,
        step: StepId,
        mut outgoing: Vec<Message<T>>,
        expected: &[Expected],
    ) -> Result<Vec<Message<T>>, FaultyError> {
        if step.index() == self.at {
            match self.fault {
                Fault::Stop => {
                    self.endpoint = None;
                    return Err(Stopped.into());
                }
                Fault::Panic => panic!("node program crashed"),
                Fault::Hang(time) => std::thread::sleep(time),
                Fault::Truncate => {
                    for m in &mut outgoing {
                        m.data.pop();
                    }
                }
            }
        }
        let endpoint = self.endpoint.as_mut().ok_or(Stopped)?;
        Ok(endpoint.exchange(step, outgoing, expected)?)
    }
}

/// Runs `grads` of `schedule` with one thread per node; node `bad` misbehaves in step `at`.
/// Returns every node's outcome as text (`ok` or the error message) and the run's duration.
fn run_with_fault(
    schedule: &VerifiedSchedule,
    timeout: Duration,
    bad: usize,
    at: usize,
    fault: Fault,
) -> (Vec<String>, Duration) {
    let p = schedule.schedule().machine.compute_nodes().count();
    let start = Instant::now();
    let outcomes = Threaded::new(timeout)
        .run_nodes(schedule, "grads", inputs(p), |node, data, endpoint| {
            if node == NodeId::new(bad) {
                let mut faulty = Faulty {
                    endpoint: Some(endpoint),
                    at,
                    fault,
                };
                run_node_phase(schedule, "grads", node, data, &mut faulty)
            } else {
                let mut endpoint = endpoint;
                run_node_phase(schedule, "grads", node, data, &mut endpoint)
            }
        })
        .unwrap();
    let elapsed = start.elapsed();
    assert!(elapsed < BOUND, "the run took {elapsed:?}");
    let texts = outcomes
        .into_iter()
        .map(|o| match o {
            Ok(_) => "ok".to_string(),
            Err(e) => e.to_string(),
        })
        .collect();
    (texts, elapsed)
}

#[test]
fn a_threaded_run_matches_the_in_process_driver_bit_for_bit() {
    let threaded = Threaded::default();
    for p in [2, 3, 5] {
        let s = verified_one(
            ring_machine(p),
            bidirectional_ring_allreduce(p, "grads", ReduceOp::Sum, DType::F32, 101),
        );
        let x: Vec<Vec<f32>> = random_inputs(p as u64, p, 101, ReduceOp::Sum);
        let want = run_phase(&s, "grads", x.clone()).unwrap();
        assert_eq!(bits(&threaded.run(&s, "grads", x).unwrap()), bits(&want));
    }
    // Routes through a switch, and a scratch buffer.
    let star = verified_one(
        star_machine(4),
        star_allreduce(4, "grads", ReduceOp::Max, DType::I64, 33),
    );
    let x: Vec<Vec<i64>> = random_inputs(9, 4, 33, ReduceOp::Max);
    let want = run_phase(&star, "grads", x.clone()).unwrap();
    assert_eq!(threaded.run(&star, "grads", x).unwrap(), want);
    let piped = verified_one(
        ring_machine(3),
        pipelined_ring_allreduce(3, "grads", ReduceOp::Sum, DType::I32, 40),
    );
    let x: Vec<Vec<i32>> = random_inputs(4, 3, 40, ReduceOp::Sum);
    let want = run_phase(&piped, "grads", x.clone()).unwrap();
    assert_eq!(threaded.run(&piped, "grads", x).unwrap(), want);
}

#[test]
fn endpoints_can_run_a_phase_again() {
    let s = ring(3);
    let endpoints = Threaded::new(LONG).endpoints(&s);
    let want = run_phase(&s, "grads", inputs(3)).unwrap();
    let got: Vec<Vec<i32>> = std::thread::scope(|scope| {
        let handles: Vec<_> = endpoints
            .into_iter()
            .zip(inputs(3))
            .map(|(mut endpoint, input)| {
                let s = &s;
                scope.spawn(move || {
                    let node = endpoint.node();
                    let mut data = input.clone();
                    for _ in 0..3 {
                        data.clone_from(&input);
                        run_node_phase(s, "grads", node, &mut data, &mut endpoint).unwrap();
                    }
                    data
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(got, want);
}

#[test]
fn a_node_that_stops_makes_its_peer_fail_at_once() {
    let (outcomes, elapsed) = run_with_fault(&ring(2), LONG, 1, 1, Fault::Stop);
    assert_eq!(
        outcomes,
        [
            "phase `grads`, step 1: the transport failed on node N0: N1 has gone away (last seen in step 0)",
            "phase `grads`, step 1: the transport failed on node N1: stopped on purpose",
        ]
    );
    assert!(
        elapsed < LONG,
        "the departure is noticed before the timeout"
    );
}

#[test]
fn a_node_that_panics_is_reported_and_its_peer_fails() {
    let (outcomes, elapsed) = run_with_fault(&ring(2), LONG, 1, 1, Fault::Panic);
    assert_eq!(
        outcomes,
        [
            "phase `grads`, step 1: the transport failed on node N0: N1 has gone away (last seen in step 0)",
            "phase `grads`: node N1 panicked (last seen in step 0): node program crashed",
        ]
    );
    assert!(
        elapsed < LONG,
        "the departure is noticed before the timeout"
    );
}

#[test]
fn a_node_that_hangs_makes_its_peer_time_out() {
    let (outcomes, _) = run_with_fault(&ring(2), SHORT, 1, 1, Fault::Hang(10 * SHORT));
    assert_eq!(
        outcomes,
        [
            "phase `grads`, step 1: the transport failed on node N0: timed out after 200ms waiting for the message from N1 over link L1",
            // When it wakes up, the peer it must send to has gone.
            "phase `grads`, step 1: the transport failed on node N1: N0 has gone away (last seen in step 1)",
        ]
    );
}

#[test]
fn a_failure_spreads_through_a_ring_and_every_node_reports_where_it_was() {
    // N1 stops in step 2 of the 4 of a 3-node ring. N2 waits for it in step 2 and fails at
    // once; N0, which hears only from N2, fails when sending to N1 or waiting for N2.
    let (outcomes, elapsed) = run_with_fault(&ring(3), LONG, 1, 2, Fault::Stop);
    assert!(elapsed < LONG, "{outcomes:?}");
    assert_eq!(
        outcomes[1],
        "phase `grads`, step 2: the transport failed on node N1: stopped on purpose"
    );
    assert_eq!(
        outcomes[2],
        "phase `grads`, step 2: the transport failed on node N2: N1 has gone away (last seen in step 1)"
    );
    // Whether N0 notices in step 2 or 3 depends on timing; it names N1, the first node to go.
    let n0 = [
        "phase `grads`, step 2: the transport failed on node N0: N1 has gone away (last seen in step 1)",
        "phase `grads`, step 3: the transport failed on node N0: N1 has gone away (last seen in step 1)",
    ];
    assert!(n0.contains(&outcomes[0].as_str()), "{}", outcomes[0]);
}

#[test]
fn a_message_of_the_wrong_size_is_refused_by_its_receiver() {
    let s = ring(3);
    let (outcomes, elapsed) = run_with_fault(&s, LONG, 0, 1, Fault::Truncate);
    assert!(elapsed < LONG, "{outcomes:?}");
    assert_eq!(
        outcomes[1],
        "phase `grads`, step 1: node N1 received 9 elements from N0 over link L0, but the receive expects 10"
    );
    assert_eq!(
        outcomes[2],
        "phase `grads`, step 2: the transport failed on node N2: N1 has gone away (last seen in step 1)"
    );
    let n0 = [
        "phase `grads`, step 2: the transport failed on node N0: N1 has gone away (last seen in step 1)",
        "phase `grads`, step 3: the transport failed on node N0: N1 has gone away (last seen in step 1)",
    ];
    assert!(n0.contains(&outcomes[0].as_str()), "{}", outcomes[0]);
}

#[test]
fn run_reports_the_cause_rather_than_its_consequences() {
    let s = ring(3);
    let threaded = Threaded::new(LONG);
    // A node that panics in the middle of a run: `run` names it, not the peers it left behind.
    let err = threaded
        .run_nodes(&s, "grads", inputs(3), |node, data, mut endpoint| {
            let mut executor = runtime_lite::NodeExecutor::<i32>::new(&s, "grads", node)?;
            if node == NodeId(2) {
                panic!("out of memory, say");
            }
            executor.run(data, &mut endpoint)
        })
        .unwrap();
    assert!(matches!(
        &err[2],
        Err(Error::Panicked {
            last_step: None,
            ..
        })
    ));
    assert_eq!(
        err[2].as_ref().unwrap_err().to_string(),
        "phase `grads`: node N2 panicked (before its first step): out of memory, say"
    );
    // The default node program, with a buffer of the wrong length on one node.
    let mut x = inputs(3);
    x[1].pop();
    let start = Instant::now();
    assert_eq!(
        threaded.run(&s, "grads", x).unwrap_err().to_string(),
        "phase `grads`: the buffer of node N1 has 29 elements but the phase works on 30"
    );
    assert!(start.elapsed() < BOUND);
    // Wrong element type, unknown phase, wrong number of buffers: refused before any thread.
    assert_eq!(
        threaded
            .run(&s, "grads", vec![vec![0f32; 30]; 3])
            .unwrap_err()
            .to_string(),
        "phase `grads` is compiled for i32 elements but the buffer holds f32"
    );
    assert_eq!(
        threaded
            .run(&s, "weights", inputs(3))
            .unwrap_err()
            .to_string(),
        "the schedule has no phase named `weights` (its phases: `grads`)"
    );
    assert_eq!(
        threaded.run(&s, "grads", inputs(2)).unwrap_err().to_string(),
        "phase `grads`: got 2 buffers but the machine has 3 compute nodes (one buffer each, in node order)"
    );
}

/// A schedule written to a file and edited there is read back through `load`, which verifies
/// it: the edit is refused with the verifier's message before anything runs.
#[test]
fn a_tampered_schedule_file_is_refused_by_load() {
    let s = ring(3);
    let text = schedule_ir::serial::to_string(s.schedule(), schedule_ir::serial::Format::Ron);
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
    let path = dir.join(format!("tampered-{}.ron", std::process::id()));
    // N1 reduces instead of storing the chunk N0 sends it in step 2 (the first allgather step):
    // it would add N0's inputs to that chunk a second time.
    let needle = "Recv(link: 0, from: 0, buffer: 0, chunks: [1], mode: Store)";
    assert_eq!(text.matches(needle).count(), 1, "{text}");
    std::fs::write(
        &path,
        text.replacen(needle, &needle.replace("Store", "Reduce"), 1),
    )
    .unwrap();
    let read_back = std::fs::read_to_string(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    let err = runtime_lite::load(&read_back).unwrap_err();
    assert!(matches!(err, Error::Verify(_)), "{err:?}");
    assert_eq!(
        err.to_string(),
        "the schedule failed verification, so it will not run: phase `grads`, step 2: N1's receive from N0 combines inputs {N1} into chunk 1 of buffer `data` a second time; sum must combine every input exactly once"
    );
    // The untouched text loads and runs.
    let loaded = runtime_lite::load(&text).unwrap();
    assert!(run_phase(&loaded, "grads", inputs(3)).is_ok());
}
