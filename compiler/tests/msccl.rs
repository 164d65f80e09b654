//! `--emit msccl-xml`: the exported MSCCL algorithms, read back by an independent reader and run
//! by a simulator of the MSCCL runtime's semantics (`msccl_sim`), must leave every rank with
//! the right result — for the bundled ring and ladders, for allreduce, reduce-scatter and
//! allgather, in in-place and out-of-place calls, under several thread-block interleavings. The
//! 4-node ring must have the structure of MSCCL's own ring allreduce; refusals must say why.
#![allow(clippy::panic, clippy::unwrap_used)]

mod msccl_sim;

use msccl_sim::{Algo, Mode, Policy};
use schedule_ir::{
    Buffer, BufferId, BufferKind, Chunk, ChunkId, Collective, DType, Instr, Link, LinkId, Machine,
    Node, NodeId, NodeKind, Phase, Program, RecvMode, ReduceOp, Schedule, VerifiedSchedule,
    FORMAT_VERSION,
};
use std::path::{Path, PathBuf};
use std::process::Command;
use topoc::emit::msccl::{self, MscclError, Options};

/// The 4-node ring walked around (`variant: 1`): MSCCL's own ring allreduce shape.
const RING4: &str = r#"Topology(
    name: "ring-4",
    machine: Ring(nodes: 4, link: (bandwidth_gbps: 100.0, latency_us: 1.0)),
    phases: [
        Exchange(name: "grads", collective: AllReduce, op: Sum, dtype: F32, elements: 4096,
            algorithm: "ring", variant: 1),
    ],
)"#;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

fn compile(source: &str) -> VerifiedSchedule {
    match topoc::compile_source(source, &topoc::Options::default()) {
        Ok(c) => c.schedule,
        Err(e) => panic!("does not compile: {e:?}"),
    }
}

fn export(schedule: &VerifiedSchedule) -> String {
    msccl::to_xml(schedule, &Options::default()).unwrap_or_else(|e| panic!("exports: {e}"))
}

/// Reads the XML back, checks its structure, and runs it in both call modes under every policy,
/// with FIFOs of a single message; returns the algorithm.
fn round_trip(case: &str, xml: &str) -> Algo {
    msccl_sim::check_file(case, xml).unwrap_or_else(|e| panic!("{e}"))
}

fn types(algo: &Algo, gpu: usize, tb: usize) -> Vec<&str> {
    algo.gpus[gpu].tbs[tb]
        .steps
        .iter()
        .map(|s| s.ty.as_str())
        .collect()
}

/// The step types of one ring thread block of `p` GPUs in MSCCL's ring allreduce.
fn ring_allreduce_types(p: usize) -> Vec<&'static str> {
    let mut t = vec!["s"];
    t.extend(std::iter::repeat_n("rrs", p - 2));
    t.push("rrcs");
    t.extend(std::iter::repeat_n("rcs", p - 2));
    t.push("r");
    t
}

#[test]
fn ring4_has_the_structure_of_msccl_ring_allreduce() {
    let xml = export(&compile(RING4));
    insta::with_settings!({
        snapshot_path => "../../snapshots/msccl",
        prepend_module_to_snapshot => false,
        omit_expression => true,
    }, {
        insta::assert_snapshot!("ring4", xml);
    });
    let algo = round_trip("ring4", &xml);
    assert_eq!((algo.ngpus, algo.nchannels, algo.nchunksperloop), (4, 1, 8));
    assert_eq!(algo.coll, "allreduce");
    for (r, gpu) in algo.gpus.iter().enumerate() {
        assert_eq!(gpu.tbs.len(), 2, "one thread block per logical ring");
        // One thread block walks the ring N0 → N1 → N2 → N3, the other the reverse; each carries
        // four chunks. The two share no peer in either direction, so they share channel 0. At
        // step i, rank r's thread block works on chunk (position - i) mod 4 of its ring, as in
        // MSCCL's ring allreduce.
        for (chan, send, recv, position, base) in [
            (0, (r + 1) % 4, (r + 3) % 4, r, 0),
            (0, (r + 3) % 4, (r + 1) % 4, (4 - r) % 4, 4),
        ] {
            let tb = gpu
                .tbs
                .iter()
                .position(|t| t.send == send as i64)
                .expect("a thread block per direction");
            let t = &gpu.tbs[tb];
            assert_eq!((t.chan, t.send, t.recv), (chan, send as i64, recv as i64));
            assert_eq!(
                types(&algo, r, tb),
                ["s", "rrs", "rrs", "rrcs", "rcs", "rcs", "r"]
            );
            for (i, step) in t.steps.iter().enumerate() {
                let chunk = base + (position + 4 - i % 4) % 4;
                let (src, dst) = ((step.srcbuf, step.srcoff), (step.dstbuf, step.dstoff));
                match step.ty.as_str() {
                    // Reduce-scatter reads the input …
                    "s" | "rrs" => assert_eq!(src, ('i', chunk as i64)),
                    // … the last reduction stores the result in the output …
                    "rrcs" => {
                        assert_eq!(src, ('i', chunk as i64));
                        assert_eq!(dst, ('o', chunk as i64));
                    }
                    // … and the allgather stores into the output.
                    _ => assert_eq!(dst, ('o', chunk as i64)),
                }
                assert_eq!((step.cnt, step.depid, step.hasdep), (1, -1, false));
            }
        }
    }
}

/// The machines every round trip must pass: seed 004's ladders and the ring.
const ACCEPTANCE: [&str; 3] = ["ring8", "ladder8", "ladder24"];

/// Every file in `examples/` (the folder is the list of cases), each allreduce phase also
/// recompiled as reduce-scatter and allgather, every phase exported and round-tripped. Ring
/// lowerings over link-disjoint rings (every transfer one chunk) must give MSCCL's ring
/// structure: one channel per logical ring, one thread block
/// per ring and GPU, no waits. An example outside the acceptance set may instead be refused for
/// a runtime limit, an unsupported collective or an in-network reduction, never for anything
/// else — in particular never as a deadlock of its thread blocks.
#[test]
fn every_example_round_trips_for_every_collective() {
    let dir = repo().join("examples");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "ron"))
        .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    names.sort();
    for a in ACCEPTANCE {
        assert!(names.iter().any(|n| n == a), "examples/{a}.ron exists");
    }
    let mut exported = Vec::new();
    let mut failed = Vec::new();
    let mut refused = 0;
    for name in &names {
        let text = std::fs::read_to_string(dir.join(format!("{name}.ron"))).unwrap();
        let required = ACCEPTANCE.contains(&name.as_str());
        for collective in ["AllReduce", "ReduceScatter", "AllGather"] {
            if collective != "AllReduce" && !text.contains("collective: AllReduce") {
                continue;
            }
            let case = format!("{name} {collective}");
            let variant = text.replace(
                "collective: AllReduce",
                &format!("collective: {collective}"),
            );
            let schedule = match topoc::compile_source(&variant, &topoc::Options::default()) {
                Ok(c) => c.schedule,
                Err(e) if !required && collective != "AllReduce" => {
                    eprintln!("{case}: not compiled ({e}); skipped");
                    continue;
                }
                Err(e) => panic!("{case} does not compile: {e:?}"),
            };
            for phase in &schedule.schedule().phases {
                let options = Options {
                    phase: Some(phase.name.clone()),
                };
                let case = format!("{case} `{}`", phase.name);
                let xml = match msccl::to_xml(&schedule, &options) {
                    Ok(xml) => xml,
                    Err(
                        e @ (MscclError::UnsupportedCollective { .. }
                        | MscclError::MeanOp { .. }
                        | MscclError::TooManySteps { .. }
                        | MscclError::TooManyThreadBlocks { .. }
                        | MscclError::TooManyChannels { .. }
                        | MscclError::DependencyTooFar { .. }
                        | MscclError::TooManyElements { .. }
                        | MscclError::OffsetTooLarge { .. }
                        | MscclError::UnequalBlocks { .. }
                        | MscclError::DeviceProgram { .. }),
                    ) if !required => {
                        eprintln!("{case}: refused: {e}");
                        refused += 1;
                        continue;
                    }
                    Err(e) => panic!("{case}: {e}"),
                };
                let again = msccl::to_xml(&schedule, &options).unwrap();
                assert_eq!(xml, again, "{case}: output is deterministic");
                let algo = match msccl_sim::check_file(&case, &xml) {
                    Ok(algo) => algo,
                    Err(e) => {
                        failed.push(e);
                        continue;
                    }
                };
                exported.push(case.clone());
                // Rings that share a link send their chunks in one transfer there, and those
                // connections serve two rings; rings whose chunks meet in the middle run half
                // the steps. Only rings walked around, link-disjoint, map one to one.
                let one_chunk_each = phase.programs.iter().flat_map(|p| &p.steps).flatten().all(
                    |i| !matches!(i, schedule_ir::Instr::Send { chunks, .. } if chunks.len() > 1),
                );
                let ranks = schedule.schedule().machine.nodes.iter();
                let p = ranks
                    .filter(|n| n.kind == schedule_ir::NodeKind::Compute)
                    .count();
                let halves = if phase.collective == Collective::AllReduce {
                    2
                } else {
                    1
                };
                let around = phase.steps as usize == halves * (p - 1);
                if ["ring", "ladder-rings"].contains(&phase.algorithm.as_str())
                    && one_chunk_each
                    && around
                {
                    assert_ring_structure(&case, &algo, phase.collective);
                }
            }
        }
    }
    eprintln!(
        "{} exports pass the strict checker, {} fail it; {refused} refused with a reason",
        exported.len(),
        failed.len()
    );
    assert!(failed.is_empty(), "{}", failed.join("\n"));
    for a in ACCEPTANCE {
        for c in ["AllReduce", "ReduceScatter", "AllGather"] {
            let prefix = format!("{a} {c} ");
            assert!(
                exported.iter().any(|e| e.starts_with(&prefix)),
                "{prefix}round-trips"
            );
        }
    }
}

/// A ring lowering's export: at most one channel per logical ring (rings that share no peer
/// share a channel) and one thread block per logical ring and GPU, each thread
/// block `s, rrs…, rrcs, rcs…, r` (allreduce), `s, rrs…, rrc` (reduce-scatter) or
/// `s, rcs…, r` (allgather), and no waits between thread blocks.
fn assert_ring_structure(case: &str, algo: &Algo, collective: Collective) {
    let p = algo.ngpus as usize;
    let rings = algo.nchunksperloop / algo.ngpus;
    assert!(
        algo.nchannels <= rings,
        "{case}: at most one channel per logical ring, as the runtimes' rules allow"
    );
    let expected: Vec<&str> = match collective {
        Collective::AllReduce => ring_allreduce_types(p),
        Collective::ReduceScatter => {
            let mut t = vec!["s"];
            t.extend(std::iter::repeat_n("rrs", p - 2));
            t.push("rrc");
            t
        }
        _ => {
            let mut t = vec!["s"];
            t.extend(std::iter::repeat_n("rcs", p - 2));
            t.push("r");
            t
        }
    };
    let mut steps = algo.gpus.iter().flat_map(|g| &g.tbs).flat_map(|t| &t.steps);
    assert!(
        steps.all(|s| s.depid == -1 && s.ty != "nop"),
        "{case}: rings need no waits between thread blocks"
    );
    for (g, gpu) in algo.gpus.iter().enumerate() {
        let on_rings = gpu.tbs.iter().filter(|t| t.send >= 0).count();
        assert_eq!(on_rings as i64, rings, "{case} gpu {g}");
        for (t, tb) in gpu.tbs.iter().enumerate() {
            if tb.send < 0 {
                // Allgather: the rank copies its own blocks into its output.
                assert_eq!(collective, Collective::AllGather, "{case}");
                assert!(types(algo, g, t).iter().all(|&s| s == "cpy"), "{case}");
                continue;
            }
            assert_eq!(types(algo, g, t), expected, "{case} gpu {g} tb {t}");
        }
    }
}

/// Three compute nodes behind a switch; node A gathers both others' vectors into two scratch
/// buffers, combines them locally in two steps, and sends the result back. Exercises routes
/// through a switch, scratch buffers, local reductions, several chunks per transfer, waits
/// between thread blocks and `nop`s.
fn star_schedule() -> Schedule {
    let compute = |name: &str| Node {
        name: name.to_string(),
        kind: NodeKind::Compute,
        capacity: None,
    };
    let link = |name: &str, a: usize, lanes: u32| Link {
        name: name.to_string(),
        a: NodeId::new(a),
        b: NodeId(3),
        bandwidth_gbps: 100.0,
        latency_us: 1.0,
        lanes,
    };
    let (a, b, c) = (NodeId(0), NodeId(1), NodeId(2));
    let both = vec![ChunkId(0), ChunkId(1)];
    let send = |first: u32, via: u32, to: NodeId| Instr::Send {
        link: LinkId(first),
        via: vec![LinkId(via)],
        to,
        buffer: BufferId(0),
        chunks: both.clone().into(),
    };
    let recv = |link: u32, from: NodeId, buffer: u32| Instr::Recv {
        link: LinkId(link),
        from,
        buffer: BufferId(buffer),
        chunks: both.clone().into(),
        mode: RecvMode::Store,
    };
    let reduce = |src: u32, dst: u32| Instr::Reduce {
        src: BufferId(src),
        dst: BufferId(dst),
        chunks: both.clone().into(),
    };
    let scratch = |name: &str| Buffer {
        name: name.to_string(),
        kind: BufferKind::Scratch,
    };
    let idle = Vec::new;
    Schedule {
        format_version: FORMAT_VERSION,
        program: Vec::new(),
        machine: Machine {
            name: "star".to_string(),
            nodes: vec![
                compute("A"),
                compute("B"),
                compute("C"),
                Node {
                    name: "S".to_string(),
                    kind: NodeKind::Switch,
                    capacity: None,
                },
            ],
            links: vec![link("LA", 0, 2), link("LB", 1, 1), link("LC", 2, 1)],
            reduce_gbps: None,
            switch_latency_us: 0.0,
        },
        phases: vec![Phase {
            name: "sum".to_string(),
            collective: Collective::AllReduce,
            op: ReduceOp::Sum,
            dtype: DType::F32,
            elements: 4,
            algorithm: "by hand".to_string(),
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
            buffers: vec![
                Buffer {
                    name: "data".to_string(),
                    kind: BufferKind::Data,
                },
                scratch("from-b"),
                scratch("from-c"),
            ],
            links: schedule_ir::LinkUse::Exclusive,
            steps: 4,
            programs: vec![
                Program {
                    steps: vec![
                        vec![recv(0, b, 1), recv(0, c, 2)],
                        vec![reduce(1, 2)],
                        vec![reduce(2, 0)],
                        vec![send(0, 1, b), send(0, 2, c)],
                    ],
                },
                Program {
                    steps: vec![vec![send(1, 0, a)], idle(), idle(), vec![recv(1, a, 0)]],
                },
                Program {
                    steps: vec![vec![send(2, 0, a)], idle(), idle(), vec![recv(2, a, 0)]],
                },
                Program { steps: vec![] },
            ],
        }],
    }
}

#[test]
fn switches_scratch_and_local_reductions_round_trip_with_waits() {
    let verified = schedule_ir::verify(star_schedule()).expect("the hand-built schedule verifies");
    let xml = export(&verified);
    let algo = round_trip("star", &xml);
    let a = &algo.gpus[0];
    let local = a.tbs.last().expect("A has a local thread block");
    assert_eq!((local.send, local.recv), (-1, -1));
    let local_types: Vec<&str> = local.steps.iter().map(|s| s.ty.as_str()).collect();
    // Per chunk: wait for both receiving thread blocks (a nop, then the reduction itself), then
    // move the input to the output and add the other scratch buffer.
    assert_eq!(
        local_types,
        ["nop", "re", "nop", "re", "cpy", "re", "cpy", "re"]
    );
    assert!(a.s_chunks >= 4, "two scratch buffers of two chunks");
    let senders: Vec<_> = a.tbs.iter().filter(|t| t.send >= 0).collect();
    assert_eq!(senders.len(), 2);
    for tb in senders {
        assert!(
            tb.steps[0].depid == local.id.min(127),
            "sending the result waits for the local thread block"
        );
    }

    // Without its waits, some interleaving reads a scratch chunk before it arrives.
    let mut unordered = algo.clone();
    for gpu in &mut unordered.gpus {
        for tb in &mut gpu.tbs {
            tb.steps.retain(|s| s.ty != "nop");
            for (i, s) in tb.steps.iter_mut().enumerate() {
                (s.s, s.depid, s.deps, s.hasdep) = (i as i64, -1, -1, false);
            }
        }
    }
    let failures = msccl_sim::POLICIES
        .iter()
        .filter(|&&p| {
            msccl_sim::simulate(&unordered, Mode::OutOfPlace, p, 1)
                .map(|o| msccl_sim::check_result(&unordered, &o))
                .map_or(true, |wrong| !wrong.is_empty())
        })
        .count();
    assert!(failures > 0, "the simulator notices the missing waits");
}

#[test]
fn the_reader_rejects_a_wrong_algorithm() {
    let xml = export(&compile(RING4));
    // Forwarding without adding the local input loses a rank.
    let wrong = xml.replacen("type=\"rrs\"", "type=\"rcs\"", 1);
    let algo = msccl_sim::parse(&wrong).expect("still readable");
    for mode in [Mode::OutOfPlace, Mode::InPlace] {
        let result = msccl_sim::simulate(&algo, mode, Policy::RunAhead, 1)
            .map(|o| msccl_sim::check_result(&algo, &o));
        assert!(
            !matches!(result, Ok(ref e) if e.is_empty()),
            "{mode:?}: {result:?}"
        );
    }
    // A missing attribute, or a space the runtime's parser does not expect, is refused.
    assert!(msccl_sim::parse(&xml.replacen(" hasdep=\"0\"", "", 1)).is_err());
    assert!(msccl_sim::parse(&xml.replacen("\"/>", "\" />", 1)).is_err());
}

fn refusal(schedule: &VerifiedSchedule, options: &Options) -> MscclError {
    match msccl::to_xml(schedule, options) {
        Ok(_) => panic!("exported, but should be refused"),
        Err(e) => e,
    }
}

fn two_node_phase(collective: Collective, chunks: Vec<Chunk>, programs: Vec<Program>) -> Schedule {
    Schedule {
        format_version: FORMAT_VERSION,
        program: Vec::new(),
        machine: Machine {
            name: "pair".to_string(),
            nodes: ["N0", "N1"]
                .iter()
                .map(|n| Node {
                    name: n.to_string(),
                    kind: NodeKind::Compute,
                    capacity: None,
                })
                .collect(),
            links: vec![Link {
                name: "L0".to_string(),
                a: NodeId(0),
                b: NodeId(1),
                bandwidth_gbps: 100.0,
                latency_us: 1.0,
                lanes: 1,
            }],
            reduce_gbps: None,
            switch_latency_us: 0.0,
        },
        phases: vec![Phase {
            name: "x".to_string(),
            collective,
            op: ReduceOp::Sum,
            dtype: DType::F32,
            elements: chunks.last().map_or(0, |c| c.end),
            algorithm: "by hand".to_string(),
            chunks,
            buffers: vec![Buffer {
                name: "data".to_string(),
                kind: BufferKind::Data,
            }],
            links: schedule_ir::LinkUse::Exclusive,
            steps: 1,
            programs,
        }],
    }
}

fn transfer(from: u32, chunks: &[u32], mode: RecvMode) -> (Instr, Instr) {
    let chunks: Vec<ChunkId> = chunks.iter().map(|&c| ChunkId(c)).collect();
    (
        Instr::Send {
            link: LinkId(0),
            via: vec![],
            to: NodeId(1 - from),
            buffer: BufferId(0),
            chunks: chunks.clone().into(),
        },
        Instr::Recv {
            link: LinkId(0),
            from: NodeId(from),
            buffer: BufferId(0),
            chunks: chunks.into(),
            mode,
        },
    )
}

#[test]
fn refusals_say_why() {
    // Broadcast: a verified schedule, but not a collective the export handles.
    let (s, r) = transfer(0, &[0], RecvMode::Store);
    let broadcast = two_node_phase(
        Collective::Broadcast { root: NodeId(0) },
        vec![Chunk {
            start: 0,
            end: 4,
            owner: None,
        }],
        vec![
            Program {
                steps: vec![vec![s]],
            },
            Program {
                steps: vec![vec![r]],
            },
        ],
    );
    let e = refusal(
        &schedule_ir::verify(broadcast).unwrap(),
        &Options::default(),
    );
    assert_eq!(
        e.to_string(),
        "phase `x` is a broadcast; MSCCL export handles allreduce, reduce-scatter and allgather"
    );

    // Reduce-scatter where N0 owns two chunks and N1 one: MSCCL blocks are equal.
    let (s0, r0) = transfer(0, &[2], RecvMode::Reduce);
    let (s1, r1) = transfer(1, &[0, 1], RecvMode::Reduce);
    let owned = |start, end, owner| Chunk {
        start,
        end,
        owner: Some(NodeId(owner)),
    };
    let unequal = two_node_phase(
        Collective::ReduceScatter,
        vec![owned(0, 1, 0), owned(1, 2, 0), owned(2, 3, 1)],
        vec![
            Program {
                steps: vec![vec![s0, r1]],
            },
            Program {
                steps: vec![vec![s1, r0]],
            },
        ],
    );
    let e = refusal(&schedule_ir::verify(unequal).unwrap(), &Options::default());
    assert_eq!(
        e.to_string(),
        "phase `x`: MSCCL's reduce-scatter gives every rank an equal block of the vector, but N0 \
         owns 2 of the 3 chunks (each of the 2 ranks must own as many as the others)"
    );

    // Two phases: the file holds one algorithm.
    let two = RING4.replace(
        "    ],\n)",
        "        Exchange(name: \"more\", collective: AllGather, op: Sum, dtype: F32, elements: 64),\n    ],\n)",
    );
    let schedule = compile(&two);
    let e = refusal(&schedule, &Options::default());
    assert_eq!(
        e.to_string(),
        "the schedule has 2 exchange phases (`grads`, `more`) and an MSCCL file holds one \
         algorithm; choose one with --phase NAME"
    );
    let e = refusal(
        &schedule,
        &Options {
            phase: Some("nope".to_string()),
        },
    );
    assert_eq!(
        e.to_string(),
        "the schedule has no phase `nope`; its phases are `grads`, `more`"
    );
    let chosen = msccl::to_xml(
        &schedule,
        &Options {
            phase: Some("more".to_string()),
        },
    )
    .unwrap();
    let algo = round_trip("ring4 `more`", &chosen);
    assert_eq!(algo.coll, "allgather");

    // A local swap within one step: BSP reads both chunks first, one MSCCL thread block cannot.
    let copy = |src: u32, dst: u32| Instr::Copy {
        src: BufferId(src),
        dst: BufferId(dst),
        chunks: vec![ChunkId(0)].into(),
    };
    let mut swap = two_node_phase(
        Collective::AllReduce,
        vec![Chunk {
            start: 0,
            end: 4,
            owner: None,
        }],
        vec![Program {
            steps: vec![vec![copy(0, 1)], vec![copy(0, 1), copy(1, 0)]],
        }],
    );
    swap.machine.nodes.truncate(1);
    swap.machine.links.clear();
    swap.phases[0].steps = 2;
    swap.phases[0].buffers.push(Buffer {
        name: "scratch".to_string(),
        kind: BufferKind::Scratch,
    });
    let e = refusal(&schedule_ir::verify(swap).unwrap(), &Options::default());
    assert_eq!(
        e.to_string(),
        "phase `x`, step 1: N0's operations cannot be ordered for MSCCL: its `cpy` into s[0] must \
         follow its `cpy` into o[0] (step 1), but one thread block runs them the other way round"
    );

    // 65 chunks over one connection in one step: 65 steps in one thread block, which no cut
    // of the phase's steps can shorten.
    let chunks: Vec<u32> = (0..65).collect();
    let (s0, r0) = transfer(0, &chunks, RecvMode::Reduce);
    let (s1, r1) = transfer(1, &chunks, RecvMode::Reduce);
    let wide = two_node_phase(
        Collective::AllReduce,
        (0..65)
            .map(|c| Chunk {
                start: c,
                end: c + 1,
                owner: None,
            })
            .collect(),
        vec![
            Program {
                steps: vec![vec![s0, r1]],
            },
            Program {
                steps: vec![vec![s1, r0]],
            },
        ],
    );
    let e = refusal(&schedule_ir::verify(wide).unwrap(), &Options::default());
    assert_eq!(
        e.to_string(),
        "phase `x`: thread block 0 of N0 (rank 0, channel 0) needs 65 steps, but the MSCCL \
         runtimes run at most 64 per thread block (msccl-executor-nccl and RCCL), even with the \
         phase's steps cut among as many thread blocks as it allows (one window per step, at \
         most 64); move fewer chunks per step"
    );
}

fn topoc(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_topoc"))
        .args(args)
        .current_dir(repo())
        .output()
        .expect("topoc runs")
}

#[test]
fn the_command_line_writes_the_file_or_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("ring8.xml");
    let o = topoc(&[
        "compile",
        "examples/ring8.ron",
        "--emit",
        "msccl-xml",
        "-o",
        out.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    assert!(stderr.contains("MSCCL algorithm of the verified schedule written to"));
    round_trip("ring8 via the CLI", &std::fs::read_to_string(&out).unwrap());

    // Two phases and no --phase: refused, nothing written.
    let two = dir.path().join("two.ron");
    std::fs::write(
        &two,
        RING4.replace(
            "    ],\n)",
            "        Exchange(name: \"more\", collective: AllGather, elements: 64),\n    ],\n)",
        ),
    )
    .unwrap();
    let refused = dir.path().join("refused.xml");
    let o = topoc(&[
        "compile",
        two.to_str().unwrap(),
        "--emit",
        "msccl-xml",
        "-o",
        refused.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(stderr.contains("choose one with --phase NAME"), "{stderr}");
    assert!(stderr.contains("nothing was written"), "{stderr}");
    assert!(!refused.exists());

    let o = topoc(&[
        "compile",
        two.to_str().unwrap(),
        "--emit",
        "msccl-xml",
        "--phase",
        "more",
    ]);
    assert!(o.status.success());
    round_trip("--phase more", &String::from_utf8_lossy(&o.stdout));

    // --phase means nothing for RON and JSON, which hold every phase.
    let o = topoc(&["compile", "examples/ring8.ron", "--phase", "grads"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("--emit msccl-xml"));
}

/// The commands at the top of `docs/msccl.md` (and in `topoc compile --help`) run as written and
/// their files round-trip.
#[test]
fn the_documented_commands_work() {
    let docs = std::fs::read_to_string(repo().join("docs/msccl.md")).unwrap();
    let block = docs
        .split("```sh\n")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .expect("docs/msccl.md has a sh block");
    let help = topoc(&["compile", "--help"]);
    let help = String::from_utf8_lossy(&help.stdout);
    let dir = tempfile::tempdir().unwrap();
    let mut ran = 0;
    for line in block.lines().filter(|l| !l.trim().is_empty()) {
        let args: Vec<String> = line
            .split_whitespace()
            .skip(1)
            .map(|a| a.replace("examples/", &format!("{}/examples/", repo().display())))
            .collect();
        let o = Command::new(env!("CARGO_BIN_EXE_topoc"))
            .args(&args)
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "{line}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let file = args.last().unwrap();
        round_trip(
            line,
            &std::fs::read_to_string(dir.path().join(file)).unwrap(),
        );
        ran += 1;
    }
    assert_eq!(ran, 2);
    assert!(
        help.contains(block.lines().next().unwrap()),
        "the help shows the first documented command"
    );
}
