//! `ring` on machines whose nodes have an odd number of links: link-disjoint rings leave one
//! link of every node idle, rings two to a link use them all. Every collective verifies and runs
//! bit-exact against the reference (parts of the vector of unequal size included), and at
//! 256 MiB the schedule reaches the total-traffic bound where disjoint rings stay at `(d-1)/d`
//! of it. Rings walked both ways meet in the middle where that is cheaper: half the steps,
//! every collective on rings of 3 to 9 nodes verified and run.
#![allow(clippy::panic, clippy::unwrap_used)]

use schedule_ir::DType;
use topoc::lower::{Method, PhaseSpec};
use topoc::trial;

/// The `dims`-dimensional hypercube written as a plain `Graph`: nothing says it is a hypercube,
/// so `ring` searches.
fn hypercube_graph(dims: u32, collective: &str, elements: u64) -> String {
    let n = 1u32 << dims;
    let nodes: Vec<String> = (0..n).map(|i| format!("\"n{i}\"")).collect();
    let mut links = String::new();
    for i in 0..n {
        for k in 0..dims {
            let j = i ^ (1 << k);
            if i < j {
                links += &format!(r#"(id: "l{i}.{j}", between: ("n{i}", "n{j}")), "#);
            }
        }
    }
    format!(
        r#"Topology(name: "q{dims}", machine: Graph(nodes: [{}],
            link: (bandwidth_gbps: 100.0, latency_us: 1.0), links: [{links}]),
            phases: [Exchange(name: "x", collective: {collective}, elements: {elements})])"#,
        nodes.join(", ")
    )
}

/// A `Ring` machine of `nodes` nodes with one phase of `collective`.
fn ring_machine(nodes: usize, collective: &str, elements: u64) -> String {
    format!(
        r#"Topology(name: "r{nodes}", machine: Ring(nodes: {nodes},
            link: (bandwidth_gbps: 100.0, latency_us: 1.0)),
            phases: [Exchange(name: "x", collective: {collective}, elements: {elements})])"#
    )
}

/// Runs the phase for i32 (must match the reference exactly) and f32 (must reproduce).
fn runs(compiled: &topoc::Compiled, case: &str) {
    for dtype in [DType::I32, DType::F32] {
        let adjusted = trial::adjust(compiled.schedule.clone(), Some(dtype), None)
            .unwrap_or_else(|e| panic!("{case}: {e}"));
        let phase = &adjusted.schedule().phases[0];
        assert_eq!(phase.algorithm, "ring", "{case}");
        let run = trial::run_phase(&adjusted, phase, 3).unwrap_or_else(|e| panic!("{case}: {e}"));
        assert_eq!(run.mismatch, None, "{case} {dtype}: matches the reference");
        assert!(run.reproducible, "{case} {dtype}: bit-identical runs");
    }
}

#[test]
fn rings_meeting_in_the_middle_take_half_the_steps_and_run_bit_exact() {
    for nodes in 3..=9usize {
        for (collective, halves) in [("AllReduce", 2), ("ReduceScatter", 1), ("AllGather", 1)] {
            // A small vector: latency dominates, so meeting in the middle is the cheaper walk.
            for elements in [5, 4099] {
                let case = format!("{nodes} nodes, {collective} × {elements}");
                let compiled = compile(&ring_machine(nodes, collective, elements));
                let phase = &compiled.schedule.schedule().phases[0];
                assert_eq!(
                    phase.steps as usize,
                    halves * (nodes / 2),
                    "{case}: ⌊p/2⌋ steps per half, against p - 1 around"
                );
                runs(&compiled, &case);
            }
        }
    }
}

#[test]
fn a_variant_picks_the_walk() {
    // Around: 2(p - 1) steps, what `ring` by default would not take on this small vector;
    // meeting in the middle: 2⌊p/2⌋.
    let source = ring_machine(8, "AllReduce", 4099);
    let with = |variant: &str| {
        source.replace(
            "elements: 4099",
            &format!("elements: 4099, algorithm: \"ring\", variant: {variant}"),
        )
    };
    for (variant, steps) in [(1, 14), (2, 8)] {
        let compiled = compile(&with(&variant.to_string()));
        let phase = &compiled.schedule.schedule().phases[0];
        assert_eq!(phase.steps, steps, "variant {variant}");
        runs(&compiled, &format!("variant {variant}"));
    }
    let err = topoc::compile_source(&with("3"), &topoc::Options::default())
        .err()
        .map(|e| format!("{e:?}"))
        .unwrap_or_default();
    assert!(err.contains("`ring` has no variant 3"), "{err}");
}

fn compile(source: &str) -> topoc::Compiled {
    let options = topoc::Options {
        algorithm: "ring".parse().ok(),
        ..topoc::Options::default()
    };
    topoc::compile_source(source, &options).unwrap_or_else(|e| panic!("{e:?}"))
}

#[test]
fn rings_sharing_links_verify_and_run_bit_exact() {
    for collective in ["AllReduce", "ReduceScatter", "AllGather"] {
        // Fewer elements than chunks, and a count no part divides evenly.
        for elements in [5, 4099] {
            let case = format!("{collective} × {elements}");
            runs(&compile(&hypercube_graph(5, collective, elements)), &case);
        }
    }
}

#[test]
fn five_links_per_node_carry_five_rings_and_reach_the_bound() {
    let source = hypercube_graph(5, "AllReduce", 1024);
    let machine = topoc::compile::load(&source).unwrap().machine;
    let set = topoc::lower::ring::rings(&machine).unwrap();
    assert_eq!(
        (set.rings.len(), set.share),
        (5, 2),
        "five rings, two to a link"
    );
    // Every link carries exactly two rings: all five links of every node are busy.
    let mut uses = vec![0u32; machine.link_count()];
    for ring in &set.rings {
        for l in &ring.links {
            uses[l.index()] += 1;
        }
    }
    assert!(uses.iter().all(|&u| u == 2), "{uses:?}");
    // Two disjoint rings would carry the vector over four links of five: 80% of the bound.
    let ir = machine.to_ir();
    let spec = PhaseSpec {
        elements: 64 << 20,
        ..PhaseSpec::probe()
    };
    let phase = Method::Ring
        .lower(&machine, &spec, &Default::default())
        .unwrap()
        .phase;
    let estimate = schedule_ir::cost::estimate(&ir, &phase);
    let efficiency =
        schedule_ir::cost::efficiency(&schedule_ir::cost::lower_bound(&ir, &phase), &estimate);
    assert!(
        efficiency > 0.99,
        "ring reaches {efficiency:.4} of the bound"
    );
}

#[test]
fn where_disjoint_rings_use_every_link_they_stay() {
    // A 4-dimensional hypercube holds two disjoint rings over all its links.
    let source = hypercube_graph(4, "AllReduce", 1024);
    let machine = topoc::compile::load(&source).unwrap().machine;
    let set = topoc::lower::ring::rings(&machine).unwrap();
    assert_eq!((set.rings.len(), set.share), (2, 1));
}
