//! The `in-network` method (seed 003) on `Fabric` machines: segments, device capacity,
//! completion entries, and the fallback to `ring` where the network cannot reduce.
#![allow(clippy::panic, clippy::unwrap_used)]

use schedule_ir::{cost, DType};
use topoc::trial;

fn read(name: &str) -> String {
    let path = format!("{}/../examples/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(path).unwrap()
}

fn compile(source: &str, method: &str) -> topoc::compile::Compiled {
    let options = topoc::Options {
        algorithm: method.parse().ok(),
        ..topoc::Options::default()
    };
    topoc::compile_source(source, &options).unwrap_or_else(|e| panic!("{method}: {e:?}"))
}

/// A fabric of 3 hosts × 2 ranks with the given units on NICs and the switch.
fn fabric(nic_units: u32, switch_units: u32, mtu: u32, leaves: &str) -> String {
    format!(
        r#"Topology(name: "f", machine: Fabric(hosts: 3, ranks_per_host: 2, {leaves}
            nic: (reduce: true, segment_buffers: {nic_units}, mtu_bytes: {mtu}),
            switch: (reduce: true, segment_buffers: {switch_units}, mtu_bytes: {mtu})),
        phases: [Exchange(name: "x", collective: AllReduce, op: Sum, dtype: I32, elements: 1000)])"#
    )
}

#[test]
fn fabric_example_runs_in_network_and_beats_the_ring() {
    let source = read("fabric.ron");
    let auto = compile(&source, "auto");
    assert_eq!(auto.notes[0].method.name(), "in-network");
    let phase = &auto.schedule.schedule().phases[0];
    // 4 MiB in 4096-byte segments: 1024 of them, 16 per batch (64 NIC units / 4).
    assert_eq!(phase.chunks.len(), 1024);
    assert_eq!(phase.steps, 64 + 3);
    assert!(phase
        .chunks
        .iter()
        .all(|c| c.len() * phase.dtype.size_bytes() <= 4096));
    let estimate = |c: &topoc::compile::Compiled| {
        let s = c.schedule.schedule();
        cost::estimate(&s.machine, &s.phases[0]).seconds
    };
    let ring = compile(&source, "ring");
    assert!(estimate(&auto) < estimate(&ring));
    for dtype in [DType::I32, DType::F32] {
        for elements in [0, 1, 5, 30_011] {
            let adjusted = trial::adjust(auto.schedule.clone(), Some(dtype), Some(elements))
                .unwrap_or_else(|e| panic!("{e}"));
            let run = trial::run_phase(&adjusted, &adjusted.schedule().phases[0], 3).unwrap();
            assert_eq!(run.mismatch, None, "{dtype} × {elements}");
            assert!(run.reproducible, "{dtype} × {elements}");
        }
    }
}

#[test]
fn every_work_request_completes_once_per_run() {
    let source = read("fabric.ron");
    let compiled = compile(&source, "in-network");
    let verified = trial::adjust(compiled.schedule, Some(DType::F32), Some(50_000)).unwrap();
    let mut driver = runtime_lite::InProcess::<f32>::new(&verified, "grads").unwrap();
    let inputs = vec![vec![1.0f32; 50_000]; 16];
    let out = driver.run(inputs.clone()).unwrap();
    assert!(out.iter().all(|v| v.iter().all(|&x| x == 16.0)));
    // Per segment: 16 ranks into their NICs, 4 NICs into the switch, the switch into 4 NICs.
    let per_run = 1024 * (16 + 4 + 4);
    assert_eq!(driver.completions().len(), per_run);
    driver.run(inputs).unwrap();
    let all = driver.completions();
    assert_eq!(all.len(), 2 * per_run);
    assert!(all
        .iter()
        .all(|c| c.status == runtime_lite::Status::Done && c.job == "grads"));
    assert_eq!(all[per_run].message, 1);
    let sequences: std::collections::BTreeSet<u32> = all.iter().map(|c| c.sequence.0).collect();
    assert_eq!(sequences.len(), 1024);
}

#[test]
fn few_segment_units_space_the_batches_out() {
    for (nic, switch) in [(1, 1), (2, 1), (3, 5), (4, 2), (9, 3)] {
        let compiled = compile(&fabric(nic, switch, 256, ""), "in-network");
        let phase = &compiled.schedule.schedule().phases[0];
        // 1000 i32 in 256-byte segments: 16 segments.
        assert_eq!(phase.chunks.len(), 16, "{nic}/{switch}");
        let run = trial::run_phase(&compiled.schedule, phase, 1).unwrap();
        assert!(run.ok(), "{nic}/{switch}: {:?}", run.mismatch);
    }
}

/// The host's ranks reach the network only through its NIC, whose switch cannot reduce:
/// `auto` takes the cheapest of the other methods (`hierarchical`, sharing the NIC's link
/// directions) and says why `in-network` does not apply.
#[test]
fn where_the_network_cannot_reduce_auto_takes_another_method_and_says_why() {
    let dumb = compile(&read("fabric-dumb-switch.ron"), "auto");
    assert_eq!(dumb.notes[0].method.name(), "hierarchical");
    assert!(
        dumb.notes[0].reason.contains("in-network does not apply"),
        "{}",
        dumb.notes[0].reason
    );
    assert!(dumb.notes[0].reason.contains("cannot reduce"));
}

/// A switch that cannot reduce, or leaf switches under a spine: asked for, `in-network` runs a
/// ring among the NICs and says why; `auto` weighs it against `ring` and takes the cheaper.
#[test]
fn without_a_reducing_switch_the_nics_run_a_ring() {
    let no_switch = read("fabric.ron").replace("switch: (reduce: true", "switch: (reduce: false");
    let two_level = read("fabric.ron").replace("hosts: 4,", "hosts: 4, leaf_switches: 2,");
    for (source, why) in [
        (&no_switch, "the switch `SW` cannot reduce"),
        (&two_level, "leaf switches under a spine"),
    ] {
        let nic_ring = compile(source, "in-network");
        assert!(
            nic_ring.notes[0].rings[0].contains(why),
            "{:?}",
            nic_ring.notes
        );
        assert!(nic_ring.notes[0].rings[0].contains("a ring among the 4 NICs"));
        let phase = &nic_ring.schedule.schedule().phases[0];
        for elements in [0, 1, 7, 30_011] {
            let adjusted = trial::adjust(nic_ring.schedule.clone(), None, Some(elements)).unwrap();
            let run = trial::run_phase(&adjusted, &adjusted.schedule().phases[0], 5).unwrap();
            assert!(run.ok(), "{why} × {elements}: {:?}", run.mismatch);
        }
        assert_eq!(phase.algorithm, "in-network");
        // `auto` prices the NIC ring and takes a method through the ranks, which is cheaper
        // (every hop of the NIC ring crosses two network links and a switch); the note
        // records every estimate, cheapest first.
        let auto = compile(source, "auto");
        let chosen = auto.notes[0].method.name();
        assert_ne!(chosen, "in-network");
        let weighed: Vec<(&str, f64)> = auto.notes[0]
            .weighed
            .iter()
            .filter_map(|w| match w.verdict {
                topoc::compile::Verdict::Estimate(s) => Some((w.method.name(), s)),
                _ => None,
            })
            .collect();
        let at = |name: &str| weighed.iter().position(|(m, _)| *m == name);
        let (best, nics) = (at(chosen).unwrap(), at("in-network").unwrap());
        assert_eq!(best, 0, "{weighed:?}");
        assert!(weighed[best].1 < weighed[nics].1, "{weighed:?}");
        assert!(
            auto.notes[0].reason.contains("in-network"),
            "{}",
            auto.notes[0].reason
        );
    }
    // Few units and few segments: waves smaller than the NIC count leave pieces empty.
    let small = fabric(2, 1, 256, "leaf_switches: 2,");
    let compiled = compile(&small, "in-network");
    let run = trial::run_phase(
        &compiled.schedule,
        &compiled.schedule.schedule().phases[0],
        1,
    )
    .unwrap();
    assert!(run.ok(), "{:?}", run.mismatch);
}

#[test]
fn check_says_how_in_network_applies() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_topoc"))
        .args(["check", "examples/fabric.ron"])
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("in-network: 4 NICs (64 units each) reduce into `SW` (256 units), segments of at most 4096 B"),
        "{text}"
    );
}
