//! The shape of the verifier's errors for tools: every error is a location (phase, step, node,
//! link, buffer, chunk — ids with names) and a kind, and serialises as both side by side. The
//! messages themselves are pinned by `tests/bad/*.ron`.
#![allow(clippy::unwrap_used, clippy::panic)]

mod common;

use common::*;
use schedule_ir::verify::{ErrorKind, Location, Named};
use schedule_ir::{verify, BufferId, ChunkId, NodeId, StepId};

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
    assert_eq!(
        json["errors"][0],
        serde_json::json!({
            "location": {"phase": "grads", "node": {"id": 2, "name": "N2"}},
            "kind": "StepCount",
            "steps": 5,
            "expected": 6,
        })
    );
}

#[test]
fn a_correctness_error_is_located_at_its_step_node_buffer_and_chunk() {
    let mut s = ring_allreduce(4, 1024);
    extend_step1_with_chunk0(&mut s);
    let e = verify(s).unwrap_err();
    assert_eq!(e.errors.len(), 1);
    assert_eq!(
        e.errors[0].location,
        Location::step("grads", StepId(1))
            .node(Named {
                id: NodeId(1),
                name: "N1".into()
            })
            .buffer(Some(Named {
                id: BufferId(0),
                name: "data".into()
            }))
            .chunk(ChunkId(0))
    );
    assert!(matches!(
        e.errors[0].kind,
        ErrorKind::InputCombinedTwice { .. }
    ));
    let json = serde_json::to_value(&e.errors[0]).unwrap();
    assert_eq!(json["kind"], "InputCombinedTwice");
    assert_eq!(json["location"]["step"], 1);
    assert_eq!(json["location"]["chunk"], 0);
    assert_eq!(json["location"]["buffer"]["name"], "data");
    assert_eq!(json["inputs"][0]["name"], "N0");
    assert!(
        json["location"].get("link").is_none(),
        "unset fields are left out: {json}"
    );
}

#[test]
fn a_transfer_error_is_located_at_its_link() {
    let mut s = ring_allreduce(4, 1024);
    at(&mut s, 2, 3).retain(|i| !matches!(i, schedule_ir::Instr::Recv { .. }));
    let e = verify(s).unwrap_err();
    let json = serde_json::to_value(&e.errors[0]).unwrap();
    assert_eq!(json["kind"], "UnmatchedSend");
    assert_eq!(
        json["location"],
        serde_json::json!({
            "phase": "grads",
            "step": 3,
            "node": {"id": 1, "name": "N1"},
            "link": {"id": 1, "name": "L1"},
        })
    );
}

#[test]
fn wrong_results_past_the_listed_ones_are_counted_in_one_error() {
    // 40 nodes with empty programs: every one of the 40 × 40 (node, chunk) results is wrong.
    let mut s = ring_allreduce(40, 4000);
    phase(&mut s).steps = 0;
    for program in &mut phase(&mut s).programs {
        program.steps.clear();
    }
    let e = verify(s).unwrap_err();
    let listed = schedule_ir::limits::MAX_LISTED_RESULTS as usize;
    assert_eq!(e.errors.len(), listed + 1);
    assert!(e.errors[..listed]
        .iter()
        .all(|e| matches!(e.kind, ErrorKind::WrongResult { .. })));
    assert_eq!(
        e.errors[listed].to_string(),
        "phase `grads`: 576 more chunks of data buffers end the phase wrong; only the first 1024 are listed"
    );
}
