//! Devices: switches with a capacity (seed 003's reducing NICs and switches) run programs,
//! hold partial sets, and are held to their capacity.
#![allow(clippy::unwrap_used, clippy::panic)]

use schedule_ir::{
    verify, Buffer, BufferId, BufferKind, Chunk, ChunkId, Collective, DType, Instr, Link, LinkId,
    Machine, Node, NodeId, NodeKind, Phase, Program, RecvMode, ReduceOp, Schedule, VerifyError,
    FORMAT_VERSION,
};

/// `a` and `b` on switch `sw` (node 2): links `la` (a–sw) and `lb` (b–sw).
fn machine(capacity: Option<u32>) -> Machine {
    let node = |name: &str, kind, capacity| Node {
        name: name.into(),
        kind,
        capacity,
    };
    let link = |name: &str, a| Link {
        name: name.into(),
        a: NodeId(a),
        b: NodeId(2),
        bandwidth_gbps: 100.0,
        latency_us: 1.0,
        lanes: 1,
    };
    Machine {
        name: "star".into(),
        nodes: vec![
            node("a", NodeKind::Compute, None),
            node("b", NodeKind::Compute, None),
            node("sw", NodeKind::Switch, capacity),
        ],
        links: vec![link("la", 0), link("lb", 1)],
        reduce_gbps: None,
        switch_latency_us: 0.0,
    }
}

/// Allreduce in the switch: both send both chunks up (step 0), the switch stores `a`'s and
/// reduces `b`'s in, then sends the sums back down (step 1).
fn in_switch(capacity: Option<u32>) -> Schedule {
    let chunks = vec![ChunkId(0), ChunkId(1)];
    let data = BufferId(0);
    let up = |n: u32| Instr::Send {
        link: LinkId(n),
        via: Vec::new(),
        to: NodeId(2),
        buffer: data,
        chunks: chunks.clone().into(),
    };
    let down = |n: u32| Instr::Send {
        link: LinkId(n),
        via: Vec::new(),
        to: NodeId(n),
        buffer: data,
        chunks: chunks.clone().into(),
    };
    let recv = |link: u32, from: u32, mode| Instr::Recv {
        link: LinkId(link),
        from: NodeId(from),
        buffer: data,
        chunks: chunks.clone().into(),
        mode,
    };
    let compute = |n: u32| Program {
        steps: vec![vec![up(n)], vec![recv(n, 2, RecvMode::Store)]],
    };
    let switch = Program {
        steps: vec![
            vec![recv(0, 0, RecvMode::Store), recv(1, 1, RecvMode::Reduce)],
            vec![down(0), down(1)],
        ],
    };
    Schedule {
        format_version: FORMAT_VERSION,
        machine: machine(capacity),
        program: Vec::new(),
        phases: vec![Phase {
            name: "x".into(),
            collective: Collective::AllReduce,
            op: ReduceOp::Sum,
            dtype: DType::F32,
            elements: 4,
            algorithm: "hand".into(),
            chunks: vec![
                Chunk {
                    start: 0,
                    end: 2,
                    owner: None,
                },
                Chunk {
                    start: 2,
                    end: 4,
                    owner: None,
                },
            ],
            buffers: vec![Buffer {
                name: "data".into(),
                kind: BufferKind::Data,
            }],
            links: schedule_ir::LinkUse::Exclusive,
            steps: 2,
            programs: vec![compute(0), compute(1), switch],
        }],
    }
}

fn errors(s: Schedule) -> Vec<VerifyError> {
    match verify(s) {
        Ok(_) => Vec::new(),
        Err(e) => e.errors,
    }
}

#[test]
fn a_device_combines_and_returns_the_result() {
    assert_eq!(errors(in_switch(Some(2))), Vec::new());
}

#[test]
fn capacity_round_trips_and_is_omitted_when_absent() {
    use schedule_ir::serial::{self, Format};
    let with = in_switch(Some(2));
    let text = serial::to_string(&with, Format::Ron);
    assert!(
        text.contains("capacity: Some(2)") || text.contains("capacity: 2"),
        "{text}"
    );
    assert_eq!(serial::from_str(&text).unwrap(), with);
    let plain = serial::to_string(&in_switch(None), Format::Ron);
    assert!(!plain.contains("capacity"));
}

#[test]
fn the_capacity_counterexamples_fit_a_device_of_two() {
    // `tests/bad/device-*-keeps-the-held-chunk-live.ron` hold two chunks on a device of
    // capacity 1; with capacity 2 nothing else is wrong with them.
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/bad");
    for name in [
        "device-reducing-write-keeps-the-held-chunk-live.ron",
        "device-in-place-scale-keeps-the-held-chunk-live.ron",
    ] {
        let text = std::fs::read_to_string(dir.join(name)).unwrap();
        let two = text.replace("capacity: Some(1)", "capacity: Some(2)");
        assert_ne!(two, text, "{name}");
        let s = schedule_ir::serial::from_str(&two).unwrap();
        assert_eq!(errors(s), Vec::new(), "{name}");
    }
}
