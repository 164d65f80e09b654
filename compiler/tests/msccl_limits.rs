//! MSCCL export at the runtimes' limits: a phase too long for one thread block per connection
//! is cut into windows, each with thread blocks and channels of its own, and still passes the
//! strict checker (`msccl_sim`); so does a phase with several chunks per connection and step;
//! a phase that reduces in the network is refused with the reason.
#![allow(clippy::panic, clippy::unwrap_used)]

mod msccl_sim;

use std::path::{Path, PathBuf};
use topoc::emit::msccl::{self, MscclError, Options};

const RING4: &str = r#"Topology(
    name: "ring-4",
    machine: Ring(nodes: 4, link: (bandwidth_gbps: 100.0, latency_us: 1.0)),
    phases: [
        Exchange(name: "grads", collective: AllReduce, op: Sum, dtype: F32, elements: 4096,
            algorithm: "ring"),
    ],
)"#;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

fn compile(source: &str) -> schedule_ir::VerifiedSchedule {
    match topoc::compile_source(source, &topoc::Options::default()) {
        Ok(c) => c.schedule,
        Err(e) => panic!("does not compile: {e:?}"),
    }
}

fn round_trip(case: &str, xml: &str) -> msccl_sim::Algo {
    msccl_sim::check_file(case, xml).unwrap_or_else(|e| panic!("{e}"))
}

fn export(schedule: &schedule_ir::VerifiedSchedule) -> String {
    msccl::to_xml(schedule, &Options::default()).unwrap_or_else(|e| panic!("exports: {e}"))
}

/// A ring of 34 needs 2·33 + 1 = 67 steps per thread block, more than the runtimes run: the
/// export cuts the phase's steps into windows, each with its own thread blocks and channels,
/// and the result passes the strict checker and computes the allreduce.
#[test]
fn long_rings_are_cut_into_shorter_thread_blocks() {
    let long = RING4.replace("Ring(nodes: 4", "Ring(nodes: 34");
    let xml = export(&compile(&long));
    let algo = round_trip("ring34", &xml);
    let longest = algo
        .gpus
        .iter()
        .flat_map(|g| g.tbs.iter().map(|t| t.steps.len()))
        .max()
        .unwrap();
    assert!(longest <= 64, "{longest}");
    assert!(
        algo.nchannels >= 2 && algo.nchannels <= 32,
        "{}",
        algo.nchannels
    );
    assert!(
        algo.gpus.iter().all(|g| g.tbs.len() >= 4),
        "two windows per ring direction"
    );
}

/// The dimension-rotated halving-doubling on the cube sends several chunks over every
/// connection in every step and forwards them from the thread block that received them. Laid
/// out with all of a step's sends before its receives, its thread blocks waited for each other
/// and the export refused it as a deadlock; interleaved message by message, every phase exports,
/// passes the strict checker with one-message FIFOs, and computes its collective.
#[test]
fn several_chunks_per_connection_and_step_export_without_deadlock() {
    let text = std::fs::read_to_string(repo().join("examples/cube-rotated-hd.ron")).unwrap();
    let schedule = compile(&text);
    for phase in &schedule.schedule().phases {
        assert_eq!(phase.algorithm, "rotated-hd");
        let options = Options {
            phase: Some(phase.name.clone()),
        };
        let xml = msccl::to_xml(&schedule, &options)
            .unwrap_or_else(|e| panic!("phase `{}` exports: {e}", phase.name));
        round_trip(&format!("cube-rotated-hd `{}`", phase.name), &xml);
    }
}

/// A small dragonfly: `g` groups of `a` routers, fully connected inside a group, every two groups
/// joined by one global link; every router is a GPU.
fn dragonfly(g: usize, a: usize) -> String {
    let mut nodes = Vec::new();
    let mut links = Vec::new();
    for i in 0..g {
        for j in 0..a {
            nodes.push(format!("\"r{i}.{j}\""));
            for k in j + 1..a {
                links.push((format!("r{i}.{j}"), format!("r{i}.{k}")));
            }
        }
    }
    for i in 0..g {
        for k in i + 1..g {
            links.push((format!("r{i}.{}", (k - 1) % a), format!("r{k}.{}", i % a)));
        }
    }
    let links: Vec<String> = links
        .iter()
        .enumerate()
        .map(|(n, (x, y))| format!("(id: \"L{n}\", between: (\"{x}\", \"{y}\"))"))
        .collect();
    format!(
        "Topology(name: \"dragonfly\", machine: Graph(nodes: [{}], links: [{}]), phases: [\
         Exchange(name: \"grads\", collective: AllReduce, op: Sum, dtype: F32, elements: 65536)])",
        nodes.join(", "),
        links.join(", ")
    )
}

/// Before channels were packed under the runtimes' rules, every chain of thread blocks had a
/// channel of its own, and a small dragonfly asked for hundreds; packed, it fits in a channel
/// or two and passes the strict checker.
#[test]
fn a_dragonfly_fits_in_few_channels() {
    let xml = export(&compile(&dragonfly(5, 4)));
    let algo = round_trip("dragonfly 5×4", &xml);
    assert_eq!(algo.ngpus, 20);
    assert!(algo.nchannels <= 2, "{} channels", algo.nchannels);
}

/// In-network reduction has the NICs and the switch combine chunks: MSCCL runs programs on
/// GPUs only, so the export refuses the phase and names a switch, instead of writing thread
/// blocks whose sends to the switch nobody receives.
#[test]
fn a_phase_that_reduces_in_the_network_is_refused() {
    let text = std::fs::read_to_string(repo().join("examples/fabric.ron")).unwrap();
    let text = text.replace(
        "elements: 1048576)",
        "elements: 1048576, algorithm: \"in-network\")",
    );
    let schedule = compile(&text);
    assert_eq!(schedule.schedule().phases[0].algorithm, "in-network");
    match msccl::to_xml(&schedule, &Options::default()) {
        Err(e @ MscclError::DeviceProgram { .. }) => assert_eq!(
            e.to_string(),
            "phase `grads`: switch NIC0 sends, receives or combines chunks itself (in-network \
             reduction), but an MSCCL algorithm runs only on the GPUs; compile the phase with a \
             method whose switches only forward, e.g. --algorithm ring"
        ),
        other => panic!("expected the in-network refusal, got {other:?}"),
    }
    // The same machine with a ring routed through the switches exports and runs.
    let ring = text.replace("\"in-network\"", "\"ring\"");
    round_trip("fabric ring", &export(&compile(&ring)));
}
