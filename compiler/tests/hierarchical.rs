//! The hierarchical method on machines built from groups joined by NICs: 2 to 4 groups of 2 to
//! 8 members, each group one switch or fully connected (links of 1 to 18 lanes), one NIC per
//! member or per pair. Every collective it lowers verifies and runs bit-exact against the
//! reference; machines without the structure are refused with the reason; on the bundled
//! NVSwitch machines it beats halving-doubling by a wide margin at 256 MiB; on random machines
//! of the kind it is never priced under the lower bound.
#![allow(clippy::panic, clippy::unwrap_used)]

use schedule_ir::{DType, VerifiedSchedule};
use topoc::lower::{Method, PhaseSpec};
use topoc::trial;

/// How the members of a group are joined.
#[derive(Clone, Copy, Debug)]
enum Fabric {
    /// One switch, a fast link to every member.
    Switch,
    /// A fast link between every two members.
    Clique,
}

/// Link rates of a machine built from groups, in Gbit/s.
#[derive(Clone, Copy, Debug)]
struct Rates {
    /// Links inside a group.
    fabric: f64,
    /// A member to its NIC.
    host: f64,
    /// A NIC to the leaf.
    nic: f64,
    /// Lanes of each link inside a group (an NVSwitch port is many NVLinks).
    lanes: u32,
}

/// The NVSwitch machines' rates: 3600, 512 and 400 Gbit/s.
const NVSWITCH: Rates = Rates {
    fabric: 3600.0,
    host: 512.0,
    nic: 400.0,
    lanes: 1,
};

/// `groups` groups of `k` members joined inside by `fabric` (3600 Gbit/s), each member (or
/// each pair, with `per_pair`) with a NIC (512 Gbit/s to the member, 400 Gbit/s to one leaf).
fn machine(groups: usize, k: usize, fabric: Fabric, per_pair: bool) -> String {
    machine_at(groups, k, fabric, per_pair, NVSWITCH)
}

/// [`machine`] with the given link rates.
fn machine_at(groups: usize, k: usize, fabric: Fabric, per_pair: bool, rates: Rates) -> String {
    let Rates {
        fabric: fast,
        host,
        nic,
        lanes,
    } = rates;
    let fast = if lanes > 1 {
        format!("{fast:?}, lanes: {lanes}")
    } else {
        format!("{fast:?}")
    };
    let mut nodes = Vec::new();
    let mut switches = vec!["\"leaf\"".to_string()];
    let mut links = Vec::new();
    let nics = if per_pair { k.div_ceil(2) } else { k };
    for g in 0..groups {
        for i in 0..k {
            nodes.push(format!("\"n{g}g{i}\""));
        }
        match fabric {
            Fabric::Switch => {
                switches.push(format!("\"sw{g}\""));
                for i in 0..k {
                    links.push(format!(
                        "(id: \"f{g}.{i}\", between: (\"n{g}g{i}\", \"sw{g}\"), bandwidth_gbps: {fast})"
                    ));
                }
            }
            Fabric::Clique => {
                for i in 0..k {
                    for j in i + 1..k {
                        links.push(format!(
                            "(id: \"f{g}.{i}.{j}\", between: (\"n{g}g{i}\", \"n{g}g{j}\"), bandwidth_gbps: {fast})"
                        ));
                    }
                }
            }
        }
        for n in 0..nics {
            switches.push(format!("\"nic{g}.{n}\""));
            links.push(format!(
                "(id: \"e{g}.{n}\", between: (\"nic{g}.{n}\", \"leaf\"))"
            ));
        }
        for i in 0..k {
            let n = if per_pair { i / 2 } else { i };
            links.push(format!(
                "(id: \"p{g}.{i}\", between: (\"n{g}g{i}\", \"nic{g}.{n}\"), bandwidth_gbps: {host})"
            ));
        }
    }
    format!(
        "Graph(nodes: [{}], switches: [{}], link: (bandwidth_gbps: {nic}, latency_us: 1.0), links: [{}])",
        nodes.join(", "),
        switches.join(", "),
        links.join(", ")
    )
}

fn topology(machine: &str, collective: &str, elements: u64) -> String {
    topology_at(machine, collective, elements, 0.3)
}

/// [`topology`] with the given switch latency, in µs.
fn topology_at(machine: &str, collective: &str, elements: u64, switch_us: f64) -> String {
    format!(
        r#"Topology(name: "h", switch_latency_us: {switch_us}, machine: {machine}, phases: [
            Exchange(name: "x", collective: {collective}, elements: {elements}),
        ])"#
    )
}

fn compile(source: &str, algorithm: &str) -> topoc::Compiled {
    let options = topoc::Options {
        algorithm: algorithm.parse().ok(),
        ..topoc::Options::default()
    };
    match topoc::compile_source(source, &options) {
        Ok(c) => c,
        Err(e) => panic!("does not compile: {e:?}\n{source}"),
    }
}

/// Runs every phase for i32 (must match the reference exactly) and f32 (must reproduce).
fn runs(verified: &VerifiedSchedule, case: &str) {
    for dtype in [DType::I32, DType::F32] {
        let adjusted = trial::adjust(verified.clone(), Some(dtype), None)
            .unwrap_or_else(|e| panic!("{case}: {e}"));
        for phase in &adjusted.schedule().phases {
            assert_eq!(phase.algorithm, "hierarchical", "{case}");
            let run =
                trial::run_phase(&adjusted, phase, 3).unwrap_or_else(|e| panic!("{case}: {e}"));
            assert_eq!(run.mismatch, None, "{case} {dtype}: matches the reference");
            assert!(
                run.reproducible,
                "{case} {dtype}: two runs are bit-identical"
            );
        }
    }
}

#[test]
fn every_collective_verifies_and_runs_on_machines_built_from_groups() {
    let shapes = [
        (2, 2, Fabric::Switch, false),
        (2, 8, Fabric::Switch, false),
        (3, 4, Fabric::Switch, true),
        (4, 3, Fabric::Clique, false),
        (2, 4, Fabric::Clique, true),
        (4, 8, Fabric::Switch, true),
    ];
    for (groups, k, fabric, per_pair) in shapes {
        let m = machine(groups, k, fabric, per_pair);
        let last = format!("Reduce(root: \"n{}g{}\")", groups - 1, k - 1);
        let rooted = [
            "Broadcast(root: \"n1g1\")",
            "Broadcast(root: \"n0g0\")",
            &last,
        ];
        for collective in ["AllReduce", "ReduceScatter", "AllGather"]
            .into_iter()
            .chain(rooted)
        {
            // Fewer elements than chunks, and enough for several pieces and slices.
            for elements in [5, 4099] {
                let case =
                    format!("{groups}x{k} {fabric:?} pairs {per_pair} {collective} × {elements}");
                let compiled = compile(&topology(&m, collective, elements), "hierarchical");
                runs(&compiled.schedule, &case);
            }
        }
    }
}

/// A group's switch ports written with lanes (an NVSwitch GPU has 18 NVLinks): a group's
/// reduce-scatter and allgather are direct exchanges of one step each, every collective
/// verifies and runs, and the lanes never make the schedule dearer than the same machine with
/// one lane per port.
#[test]
fn switch_ports_of_many_lanes_exchange_in_one_step() {
    let one = machine(2, 8, Fabric::Switch, false);
    let seven = Rates {
        lanes: 7,
        ..NVSWITCH
    };
    let many = machine_at(2, 8, Fabric::Switch, false, seven);
    assert_eq!(many.matches("lanes: 7").count(), 16, "{many}");
    let small = compile(&topology(&many, "AllReduce", 256), "hierarchical");
    // Inside, across the two groups (reduce-scatter, allgather), inside.
    assert_eq!(small.schedule.schedule().phases[0].steps, 4);
    let rooted = ["Broadcast(root: \"n0g3\")", "Reduce(root: \"n1g0\")"];
    for collective in ["AllReduce", "ReduceScatter", "AllGather"]
        .into_iter()
        .chain(rooted)
    {
        for elements in [5, 4099] {
            let case = format!("lanes 7, {collective} × {elements}");
            let compiled = compile(&topology(&many, collective, elements), "hierarchical");
            runs(&compiled.schedule, &case);
        }
    }
    let price = |machine: &str| {
        let compiled = compile(&topology(machine, "AllReduce", 64 << 20), "hierarchical");
        let schedule = compiled.schedule.schedule();
        schedule_ir::cost::estimate(&schedule.machine, &schedule.phases[0]).seconds
    };
    let (one, many) = (price(&one), price(&many));
    assert!(many <= one, "{many} s with lanes against {one} s without");
}

#[test]
fn finds_the_groups_and_rails_from_link_speeds() {
    let source = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../examples/nvswitch-2x8.ron"
    ))
    .unwrap();
    let loaded = topoc::compile::load(&source).unwrap();
    let found = Method::Hierarchical
        .applies(&loaded.machine, &topoc::limits::Budget::default())
        .unwrap();
    assert_eq!(found.summary, "2 groups of 8, 8 rails");
    assert_eq!(
        found.parts,
        vec![
            "group 0: n0g0 n0g1 n0g2 n0g3 n0g4 n0g5 n0g6 n0g7",
            "group 1: n1g0 n1g1 n1g2 n1g3 n1g4 n1g5 n1g6 n1g7",
        ]
    );
}

/// Groups whose fabric is not twice as fast as what leaves them: a switch of 800 Gbit/s
/// beside links of 512 to NICs of 400 (half the fastest link would count every link fast and
/// make the machine one group, so the groups are found at the next faster bandwidth), and
/// members linked to each other at the speed of their NICs' links (the links between compute
/// nodes are then the fabric). Every collective verifies and runs, and at 1 MiB `auto` takes
/// `hierarchical`'s allgather, cheaper than every method without the groups.
#[test]
fn fabrics_not_twice_as_fast_as_the_nics_still_make_groups() {
    let switch = Rates {
        fabric: 800.0,
        ..NVSWITCH
    };
    let even = Rates {
        fabric: 300.0,
        host: 300.0,
        nic: 300.0,
        lanes: 1,
    };
    for (fabric, rates) in [(Fabric::Switch, switch), (Fabric::Clique, even)] {
        let m = machine_at(3, 4, fabric, false, rates);
        let loaded = topoc::compile::load(&topology(&m, "AllReduce", 64)).unwrap();
        let found = Method::Hierarchical
            .applies(&loaded.machine, &topoc::limits::Budget::default())
            .unwrap();
        assert_eq!(found.summary, "3 groups of 4, 4 rails", "{fabric:?}");
        for collective in [
            "AllReduce",
            "ReduceScatter",
            "AllGather",
            "Broadcast(root: \"n1g2\")",
            "Reduce(root: \"n0g0\")",
        ] {
            for elements in [5, 4099] {
                let case = format!("{fabric:?} {}, {collective} × {elements}", rates.fabric);
                let compiled = compile(&topology(&m, collective, elements), "hierarchical");
                runs(&compiled.schedule, &case);
            }
        }
        let picked = compile(&topology(&m, "AllGather", 1 << 20), "auto");
        assert_eq!(
            picked.schedule.schedule().phases[0].algorithm,
            "hierarchical",
            "{fabric:?}"
        );
    }
}

fn refusal(machine_text: &str) -> String {
    let source = topology(machine_text, "AllReduce", 64);
    let loaded = topoc::compile::load(&source).unwrap();
    let err = Method::Hierarchical
        .applies(&loaded.machine, &topoc::limits::Budget::default())
        .unwrap_err();
    let lowered =
        Method::Hierarchical.lower(&loaded.machine, &PhaseSpec::probe(), &Default::default());
    assert!(lowered.is_err(), "lowering refuses too");
    err.to_string()
}

#[test]
fn refuses_machines_without_group_structure_saying_why() {
    assert_eq!(
        refusal("FullMesh(nodes: 4)"),
        "the machine is one group: no slower network joins groups"
    );
    assert_eq!(
        refusal("Ring(nodes: 6)"),
        "the machine is one group: no slower network joins groups"
    );
    // Groups of 3 and 2 (the fast links make two components of unequal size).
    let unequal = r#"Graph(nodes: ["a0", "a1", "a2", "b0", "b1"], switches: ["leaf"],
        link: (bandwidth_gbps: 100.0),
        links: [
            (id: "fa01", between: ("a0", "a1"), bandwidth_gbps: 1000.0),
            (id: "fa12", between: ("a1", "a2"), bandwidth_gbps: 1000.0),
            (id: "fa02", between: ("a0", "a2"), bandwidth_gbps: 1000.0),
            (id: "fb01", between: ("b0", "b1"), bandwidth_gbps: 1000.0),
            (id: "e0", between: ("a0", "leaf")), (id: "e1", between: ("a1", "leaf")),
            (id: "e2", between: ("a2", "leaf")), (id: "e3", between: ("b0", "leaf")),
            (id: "e4", between: ("b1", "leaf")),
        ])"#;
    assert_eq!(
        refusal(unequal),
        "the groups are unequal: the group of a0 has 3 members, that of b0 has 2 members"
    );
    // Two groups of three joined in a line by fast links: neither a clique nor one switch.
    let line = r#"Graph(nodes: ["a0", "a1", "a2", "b0", "b1", "b2"], switches: ["leaf"],
        link: (bandwidth_gbps: 100.0),
        links: [
            (id: "fa01", between: ("a0", "a1"), bandwidth_gbps: 1000.0),
            (id: "fa12", between: ("a1", "a2"), bandwidth_gbps: 1000.0),
            (id: "fb01", between: ("b0", "b1"), bandwidth_gbps: 1000.0),
            (id: "fb12", between: ("b1", "b2"), bandwidth_gbps: 1000.0),
            (id: "e0", between: ("a0", "leaf")), (id: "e1", between: ("a1", "leaf")),
            (id: "e2", between: ("a2", "leaf")), (id: "e3", between: ("b0", "leaf")),
            (id: "e4", between: ("b1", "leaf")), (id: "e5", between: ("b2", "leaf")),
        ])"#;
    assert_eq!(
        refusal(line),
        "the group of a0 is neither fully connected nor joined by one switch"
    );
    // Two pairs whose second members have no way out of their group: no rail joins them.
    let no_rail = r#"Graph(nodes: ["a0", "a1", "b0", "b1"], switches: ["leaf"],
        link: (bandwidth_gbps: 100.0),
        links: [
            (id: "fa", between: ("a0", "a1"), bandwidth_gbps: 1000.0),
            (id: "fb", between: ("b0", "b1"), bandwidth_gbps: 1000.0),
            (id: "e0", between: ("a0", "leaf")), (id: "e1", between: ("b0", "leaf")),
        ])"#;
    assert_eq!(
        refusal(no_rail),
        "no route from a1 to b1 over the network between groups"
    );
}

#[test]
fn beats_halving_doubling_on_the_nvswitch_machines_at_256_mib() {
    for file in ["nvswitch-2x8", "nvswitch-4x8", "dgx-a100-2x8"] {
        let path = format!("{}/../examples/{file}.ron", env!("CARGO_MANIFEST_DIR"));
        let source = std::fs::read_to_string(&path).unwrap();
        let loaded = topoc::compile::load(&source).unwrap();
        let machine = &loaded.machine;
        let ir = machine.to_ir();
        let spec = PhaseSpec {
            elements: 64 << 20,
            ..PhaseSpec::probe()
        };
        let efficiency = |method: Method| {
            let phase = method
                .lower(machine, &spec, &Default::default())
                .unwrap()
                .phase;
            let estimate = schedule_ir::cost::estimate(&ir, &phase);
            schedule_ir::cost::efficiency(&schedule_ir::cost::lower_bound(&ir, &phase), &estimate)
        };
        let hierarchical = efficiency(Method::Hierarchical);
        let halving = efficiency(Method::HalvingDoubling);
        assert!(
            hierarchical > halving + 0.1,
            "{file}: hierarchical {hierarchical:.3} against halving-doubling {halving:.3}"
        );
        assert!(
            hierarchical > 0.68,
            "{file}: hierarchical reaches {hierarchical:.3} of the bound"
        );
    }
}

/// A broadcast or reduce of 256 MiB on the bundled NVSwitch machines: each shard passed along
/// its NIC's rail once, the root's port carrying each byte once, at least 75% of the cut bound
/// (a remote node's NICs must let the whole vector in), where `trees` reaches 57–80%.
#[test]
fn broadcast_and_reduce_pass_the_rails_near_the_cut_on_the_nvswitch_machines() {
    for (file, root) in [
        ("nvswitch-2x8", "n1g3"),
        ("nvswitch-4x8", "n0g0"),
        ("dgx-a100-2x8", "n0g5"),
    ] {
        let path = format!("{}/../examples/{file}.ron", env!("CARGO_MANIFEST_DIR"));
        let source = std::fs::read_to_string(&path).unwrap();
        let loaded = topoc::compile::load(&source).unwrap();
        let machine = &loaded.machine;
        let ir = machine.to_ir();
        let root = machine.node_by_name(root).unwrap();
        for collective in [
            schedule_ir::Collective::Broadcast { root },
            schedule_ir::Collective::Reduce { root },
        ] {
            let spec = PhaseSpec {
                collective,
                elements: 64 << 20,
                ..PhaseSpec::probe()
            };
            let phase = Method::Hierarchical
                .lower(machine, &spec, &Default::default())
                .unwrap()
                .phase;
            let estimate = schedule_ir::cost::estimate(&ir, &phase);
            let bound = schedule_ir::cost::lower_bound(&ir, &phase);
            let efficiency = schedule_ir::cost::efficiency(&bound, &estimate);
            assert!(
                efficiency > 0.75,
                "{file} {collective:?}: {efficiency:.3} of the bound"
            );
        }
    }
}

/// A small deterministic generator (a linear congruential one, Knuth's MMIX constants), so the
/// random machines are the same on every run.
struct Lcg(u64);

impl Lcg {
    /// A value in `0..n`.
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }

    fn pick<T: Copy>(&mut self, from: &[T]) -> T {
        from[self.below(from.len() as u64) as usize]
    }
}

/// Machines not among the examples: random group counts and sizes, group fabrics, NICs per
/// member or per pair, link rates and switch latencies. On every one, every collective the
/// method lowers verifies, runs bit-exact against the reference, and is never priced below
/// the lower bound (a schedule cheaper than the bound would prove the cost model or the
/// schedule wrong).
#[test]
fn random_machines_built_from_groups_verify_run_and_respect_the_bound() {
    let mut rng = Lcg(12);
    for _ in 0..16 {
        let groups = rng.pick(&[2, 3, 4]);
        let k = rng.pick(&[2, 3, 4, 5, 8]);
        let fabric = rng.pick(&[Fabric::Switch, Fabric::Clique]);
        let per_pair = rng.pick(&[false, true]);
        let rates = Rates {
            // Inside a group twice the host link or more, or less (the groups are then found
            // at a faster bandwidth, or by their direct links).
            fabric: rng.pick(&[300.0, 800.0, 1200.0, 2400.0, 3600.0]),
            host: rng.pick(&[256.0, 512.0]),
            nic: rng.pick(&[100.0, 200.0, 400.0]),
            lanes: rng.pick(&[1, 1, 2, 7, 18]),
        };
        // A switch no faster than the NICs' links is one network with them: no groups.
        let fabric = if rates.fabric <= rates.nic {
            Fabric::Clique
        } else {
            fabric
        };
        let switch_us = rng.pick(&[0.0, 0.3, 2.0]);
        let collective = rng.pick(&[
            "AllReduce",
            "ReduceScatter",
            "AllGather",
            "Broadcast(root: \"n1g0\")",
            "Reduce(root: \"n0g1\")",
        ]);
        let elements = rng.pick(&[3, 1000, 65536]);
        let case = format!(
            "{groups}x{k} {fabric:?} pairs {per_pair} {rates:?} switch {switch_us} µs \
             {collective} × {elements}"
        );
        let m = machine_at(groups, k, fabric, per_pair, rates);
        let compiled = compile(
            &topology_at(&m, collective, elements, switch_us),
            "hierarchical",
        );
        runs(&compiled.schedule, &case);
        let schedule = compiled.schedule.schedule();
        for phase in &schedule.phases {
            let estimate = schedule_ir::cost::estimate(&schedule.machine, phase);
            let bound = schedule_ir::cost::lower_bound(&schedule.machine, phase);
            assert!(
                estimate.seconds >= bound.seconds * (1.0 - 1e-9),
                "{case}: priced {} s, under the bound {} s",
                estimate.seconds,
                bound.seconds
            );
        }
    }
}
