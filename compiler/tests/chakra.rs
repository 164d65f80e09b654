//! `--emit chakra`: every exported trace set, read back by an independent reader
//! (`chakra_sim`: the vendored schema parsed, the wire format decoded by hand) that enforces
//! what Chakra's feeder and ASTRA-sim's custom collectives rely on, and replayed chunk by chunk,
//! must leave every rank with the collective's result — for every example that exports, at
//! several sizes. Refusals must say why; traces broken on purpose must be caught.
#![allow(clippy::panic, clippy::unwrap_used)]

mod chakra_sim;

use chakra_sim::expect;
use prost::Message;
use schedule_ir::{NodeKind, VerifiedSchedule};
use std::path::{Path, PathBuf};
use std::process::Command;
use topoc::emit::chakra::{self, schema, ChakraError, Options};

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

fn example(name: &str) -> VerifiedSchedule {
    compile(&std::fs::read_to_string(repo().join(format!("examples/{name}.ron"))).unwrap())
}

/// Exports `phase` at `sizes` and checks every set; returns the export.
fn round_trip(
    case: &str,
    schedule: &VerifiedSchedule,
    phase: &str,
    sizes: &[u64],
) -> chakra::Export {
    let options = Options {
        phase: Some(phase.to_string()),
        sizes: sizes.to_vec(),
    };
    let export = chakra::export(schedule, &options).unwrap_or_else(|e| panic!("{case}: {e}"));
    assert_eq!(
        export,
        chakra::export(schedule, &options).unwrap(),
        "{case}: output is deterministic"
    );
    let s = schedule.schedule();
    let own = s.phase(phase).unwrap();
    let proto = chakra_sim::schema();
    for set in &export.sets {
        let sized = match set.size {
            Some(bytes) => own.with_elements(bytes / own.dtype.size_bytes()),
            None => own.clone(),
        };
        chakra_sim::check_set(&proto, &set.ranks, &expect(s, &sized))
            .unwrap_or_else(|e| panic!("{case} at {:?}: {e}", set.size));
    }
    export
}

#[test]
fn the_hand_written_messages_match_the_vendored_schema() {
    let proto = chakra_sim::schema();
    // Each declared field, set alone: the number and wire type it is written with must be the
    // schema's for the field of that name.
    let node = schema::Node::default;
    let attr = |v: schema::Value| schema::AttributeProto {
        value: Some(v),
        ..Default::default()
    };
    let io = schema::IoInfo::default;
    let cases: Vec<(&str, &str, Vec<u8>)> = vec![
        (
            "GlobalMetadata",
            "version",
            schema::GlobalMetadata {
                version: "v".into(),
                attr: vec![],
            }
            .encode_to_vec(),
        ),
        (
            "GlobalMetadata",
            "attr",
            schema::GlobalMetadata {
                version: String::new(),
                attr: vec![Default::default()],
            }
            .encode_to_vec(),
        ),
        (
            "Node",
            "id",
            schema::Node { id: 1, ..node() }.encode_to_vec(),
        ),
        (
            "Node",
            "name",
            schema::Node {
                name: "n".into(),
                ..node()
            }
            .encode_to_vec(),
        ),
        (
            "Node",
            "type",
            schema::Node {
                r#type: 5,
                ..node()
            }
            .encode_to_vec(),
        ),
        (
            "Node",
            "ctrl_deps",
            schema::Node {
                ctrl_deps: vec![1],
                ..node()
            }
            .encode_to_vec(),
        ),
        (
            "Node",
            "data_deps",
            schema::Node {
                data_deps: vec![1],
                ..node()
            }
            .encode_to_vec(),
        ),
        (
            "Node",
            "start_time_micros",
            schema::Node {
                start_time_micros: 1,
                ..node()
            }
            .encode_to_vec(),
        ),
        (
            "Node",
            "duration_micros",
            schema::Node {
                duration_micros: 1,
                ..node()
            }
            .encode_to_vec(),
        ),
        (
            "Node",
            "inputs",
            schema::Node {
                inputs: Some(io()),
                ..node()
            }
            .encode_to_vec(),
        ),
        (
            "Node",
            "outputs",
            schema::Node {
                outputs: Some(io()),
                ..node()
            }
            .encode_to_vec(),
        ),
        (
            "Node",
            "attr",
            schema::Node {
                attr: vec![Default::default()],
                ..node()
            }
            .encode_to_vec(),
        ),
        (
            "IOInfo",
            "values",
            schema::IoInfo {
                values: "v".into(),
                ..io()
            }
            .encode_to_vec(),
        ),
        (
            "IOInfo",
            "shapes",
            schema::IoInfo {
                shapes: "v".into(),
                ..io()
            }
            .encode_to_vec(),
        ),
        (
            "IOInfo",
            "types",
            schema::IoInfo {
                types: "v".into(),
                ..io()
            }
            .encode_to_vec(),
        ),
        (
            "AttributeProto",
            "name",
            schema::AttributeProto {
                name: "a".into(),
                ..Default::default()
            }
            .encode_to_vec(),
        ),
        (
            "AttributeProto",
            "doc_string",
            schema::AttributeProto {
                doc_string: "a".into(),
                ..Default::default()
            }
            .encode_to_vec(),
        ),
        (
            "AttributeProto",
            "double_val",
            attr(schema::Value::DoubleVal(1.0)).encode_to_vec(),
        ),
        (
            "AttributeProto",
            "int32_val",
            attr(schema::Value::Int32Val(1)).encode_to_vec(),
        ),
        (
            "AttributeProto",
            "int64_val",
            attr(schema::Value::Int64Val(1)).encode_to_vec(),
        ),
        (
            "AttributeProto",
            "int64_list",
            attr(schema::Value::Int64List(schema::Int64List {
                values: vec![1],
            }))
            .encode_to_vec(),
        ),
        (
            "AttributeProto",
            "uint64_val",
            attr(schema::Value::Uint64Val(1)).encode_to_vec(),
        ),
        (
            "AttributeProto",
            "bool_val",
            attr(schema::Value::BoolVal(true)).encode_to_vec(),
        ),
        (
            "AttributeProto",
            "string_val",
            attr(schema::Value::StringVal("s".into())).encode_to_vec(),
        ),
        (
            "Int64List",
            "values",
            schema::Int64List { values: vec![1] }.encode_to_vec(),
        ),
    ];
    for (message, field, bytes) in cases {
        let want = &proto.messages[message][field];
        let fields = chakra_sim::proto::fields(&bytes).unwrap();
        assert_eq!(fields.len(), 1, "{message}.{field} writes one field");
        let (number, wire) = &fields[0];
        assert_eq!(*number, want.number, "{message}.{field}'s number");
        let packed = want.repeated && wire.wire_type() == 2;
        assert!(
            packed || wire.wire_type() == proto.wire_type(&want.ty),
            "{message}.{field}'s wire type"
        );
    }
    // Enum values, by name.
    for (name, value) in [
        ("COMP_NODE", schema::NodeType::CompNode as i64),
        ("COMM_SEND_NODE", schema::NodeType::CommSendNode as i64),
        ("COMM_RECV_NODE", schema::NodeType::CommRecvNode as i64),
        ("COMM_COLL_NODE", schema::NodeType::CommCollNode as i64),
        ("METADATA_NODE", schema::NodeType::MetadataNode as i64),
    ] {
        assert_eq!(proto.enums["NodeType"][name], value, "NodeType {name}");
    }
    for (name, value) in [
        ("ALL_REDUCE", schema::CollectiveCommType::AllReduce as i64),
        (
            "REDUCE_SCATTER",
            schema::CollectiveCommType::ReduceScatter as i64,
        ),
        ("ALL_GATHER", schema::CollectiveCommType::AllGather as i64),
        ("BARRIER", schema::CollectiveCommType::Barrier as i64),
    ] {
        assert_eq!(
            proto.enums["CollectiveCommType"][name], value,
            "CollectiveCommType {name}"
        );
    }
}

/// Every file in `examples/` (the folder is the list of cases), every phase exported at its own
/// size and read back and replayed; a phase may instead be refused only for in-network
/// reduction or a collective ASTRA-sim has no custom key for.
#[test]
fn every_example_exports_and_replays() {
    let dir = repo().join("examples");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "ron"))
        .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let mut exported = Vec::new();
    let mut refused = Vec::new();
    for name in &names {
        let schedule = example(name);
        for phase in &schedule.schedule().phases {
            let case = format!("{name} `{}`", phase.name);
            let options = Options {
                phase: Some(phase.name.clone()),
                sizes: Vec::new(),
            };
            match chakra::export(&schedule, &options) {
                Ok(_) => {
                    round_trip(&case, &schedule, &phase.name, &[]);
                    exported.push(case);
                }
                Err(
                    e @ (ChakraError::InNetwork { .. } | ChakraError::UnsupportedCollective { .. }),
                ) => {
                    refused.push(format!("{case}: {e}"));
                }
                Err(e) => panic!("{case}: {e}"),
            }
        }
    }
    eprintln!(
        "{} phases export and replay; refused:\n{}",
        exported.len(),
        refused.join("\n")
    );
    for must in [
        "ring8 ",
        "ladder8 ",
        "cube ",
        "torus4x4 ",
        "fabric-dumb-switch ",
        "mean-ladder8 ",
    ] {
        assert!(
            exported.iter().any(|e| e.starts_with(must)),
            "{must}exports"
        );
    }
    assert!(
        refused.iter().any(|r| r.starts_with("fabric `")),
        "fabric's in-network phase is refused"
    );
}

/// Reduce-scatter and allgather of the ring and the ladder, and a mean, export and replay.
#[test]
fn reduce_scatter_allgather_and_mean_replay() {
    for name in ["ring8", "ladder8"] {
        let text = std::fs::read_to_string(repo().join(format!("examples/{name}.ron"))).unwrap();
        for collective in ["ReduceScatter", "AllGather"] {
            let schedule = compile(&text.replace(
                "collective: AllReduce",
                &format!("collective: {collective}"),
            ));
            for phase in &schedule.schedule().phases {
                let export =
                    round_trip(&format!("{name} {collective}"), &schedule, &phase.name, &[]);
                let key = if collective == "ReduceScatter" {
                    "reduce-scatter-implementation-custom"
                } else {
                    "all-gather-implementation-custom"
                };
                assert_eq!(export.key, key);
            }
        }
    }
}

/// One set per size, named by the size; messages scale with it; the snippet names the prefix.
#[test]
fn one_set_per_size() {
    let schedule = example("ring8");
    let phase = schedule.schedule().phases[0].name.clone();
    let export = round_trip("ring8 sized", &schedule, &phase, &[4096, 1 << 20]);
    assert_eq!(export.sets.len(), 2);
    let proto = chakra_sim::schema();
    let sent: Vec<u64> = export
        .sets
        .iter()
        .map(|s| {
            let own = schedule.schedule().phases[0].with_elements(s.size.unwrap() / 4);
            chakra_sim::check_set(&proto, &s.ranks, &expect(schedule.schedule(), &own))
                .unwrap()
                .bytes_sent
        })
        .collect();
    // A ring allreduce sends 2(p-1)/p of the vector per rank: 14/8 · 8 ranks.
    assert_eq!(sent, vec![4096 * 14, (1 << 20) * 14]);
    let files: Vec<String> = export.files("out/r").into_iter().map(|(n, _)| n).collect();
    assert_eq!(files.len(), 18);
    assert_eq!(files[0], "out/r.4096.0.et");
    assert_eq!(files[8], "out/r.4096.json");
    assert_eq!(files[17], "out/r.1048576.json");
    let json = &export.files("out/\"r")[8].1;
    let value: serde_json::Value = serde_json::from_slice(json).unwrap();
    assert_eq!(value["all-reduce-implementation-custom"][0], "out/\"r.4096");
}

/// On a machine with reducing NICs and switch, a phase lowered to run on the compute nodes
/// only exports: the idle devices get no rank.
#[test]
fn idle_devices_have_no_rank() {
    let text = std::fs::read_to_string(repo().join("examples/fabric.ron")).unwrap();
    let ring = text.replace(
        "elements: 1048576)",
        "elements: 1048576, algorithm: \"ring\")",
    );
    assert_ne!(ring, text);
    let schedule = compile(&ring);
    let export = round_trip("fabric ring", &schedule, "grads", &[]);
    let computes = schedule
        .schedule()
        .machine
        .nodes
        .iter()
        .filter(|n| n.kind == NodeKind::Compute)
        .count();
    assert_eq!(export.sets[0].ranks.len(), computes);
}

#[test]
fn refusals_say_why() {
    let phases = example("bsp-phases");
    let e = chakra::export(&phases, &Options::default()).unwrap_err();
    assert!(
        e.to_string().contains("choose one with --phase NAME") && e.to_string().contains("`grads`"),
        "{e}"
    );

    let fabric = example("fabric");
    let in_network = fabric
        .schedule()
        .phases
        .iter()
        .find(|p| p.algorithm == "in-network")
        .expect("fabric has an in-network phase");
    let e = chakra::export(
        &fabric,
        &Options {
            phase: Some(in_network.name.clone()),
            sizes: vec![],
        },
    )
    .unwrap_err();
    assert!(matches!(e, ChakraError::InNetwork { .. }), "{e}");
    assert!(e.to_string().contains("in-network reduction"), "{e}");
    assert!(e.to_string().contains("--algorithm ring"), "{e}");

    let ring = example("ring8");
    let e = chakra::export(
        &ring,
        &Options {
            phase: None,
            sizes: vec![6],
        },
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "size 6 B is not a whole, positive number of the phase's 4-byte elements; give sizes \
         that are multiples of 4 B"
    );
    let e = chakra::export(
        &ring,
        &Options {
            phase: Some("nope".into()),
            sizes: vec![],
        },
    )
    .unwrap_err();
    assert!(
        e.to_string()
            .starts_with("the schedule has no phase `nope`"),
        "{e}"
    );

    let text = std::fs::read_to_string(repo().join("examples/ring8.ron")).unwrap();
    let broadcast = compile(&text.replace(
        "collective: AllReduce",
        "collective: Broadcast(root: \"N0\")",
    ));
    let e = chakra::export(&broadcast, &Options::default()).unwrap_err();
    assert!(
        matches!(e, ChakraError::UnsupportedCollective { .. }),
        "{e}"
    );
    assert!(e.to_string().contains("broadcast from N0"), "{e}");
    assert!(
        e.to_string()
            .contains("ASTRA-sim takes custom implementations only for"),
        "{e}"
    );
}

/// Decodes a rank's file with topoc's own messages, so that tests can break it on purpose.
fn decode(bytes: &[u8]) -> (schema::GlobalMetadata, Vec<schema::Node>) {
    let mut buf = bytes;
    let meta = schema::GlobalMetadata::decode_length_delimited(&mut buf).unwrap();
    let mut nodes = Vec::new();
    while !buf.is_empty() {
        nodes.push(schema::Node::decode_length_delimited(&mut buf).unwrap());
    }
    (meta, nodes)
}

fn encode(meta: &schema::GlobalMetadata, nodes: &[schema::Node]) -> Vec<u8> {
    let mut out = meta.encode_length_delimited_to_vec();
    for n in nodes {
        out.extend(n.encode_length_delimited_to_vec());
    }
    out
}

/// Traces broken on purpose: the reader must refuse each with the error that names the fault.
#[test]
fn the_reader_catches_broken_traces() {
    let schedule = example("ring8");
    let s = schedule.schedule();
    let export = chakra::export(&schedule, &Options::default()).unwrap();
    let good = export.sets[0].ranks.clone();
    let want = expect(s, &s.phases[0]);
    let proto = chakra_sim::schema();
    chakra_sim::check_set(&proto, &good, &want).unwrap();
    let broken = |change: &dyn Fn(&mut Vec<schema::Node>)| {
        let mut files = good.clone();
        let (meta, mut nodes) = decode(&files[1]);
        change(&mut nodes);
        files[1] = encode(&meta, &nodes);
        chakra_sim::check_set(&proto, &files, &want).unwrap_err()
    };
    let is = |ty: schema::NodeType| move |n: &schema::Node| n.r#type == ty as i32;
    let attr = |n: &mut schema::Node, name: &str, v: schema::Value| {
        n.attr.iter_mut().find(|a| a.name == name).unwrap().value = Some(v);
    };

    let e = broken(&|nodes| {
        // The last receive: no node of the file depends on it.
        let at = nodes
            .iter()
            .rposition(is(schema::NodeType::CommRecvNode))
            .unwrap();
        nodes.remove(at);
    });
    assert!(e.contains("has no matching receive"), "{e}");

    let e = broken(&|nodes| {
        let send = nodes
            .iter_mut()
            .find(|n| is(schema::NodeType::CommSendNode)(n))
            .unwrap();
        attr(send, "comm_tag", schema::Value::Int32Val(9999));
    });
    assert!(
        e.contains("has no matching receive") || e.contains("no matching send"),
        "{e}"
    );

    let e = broken(&|nodes| {
        let send = nodes
            .iter_mut()
            .find(|n| is(schema::NodeType::CommSendNode)(n))
            .unwrap();
        attr(send, "comm_size", schema::Value::Uint64Val(16));
    });
    assert!(
        e.contains("attribute `comm_size`") && e.contains("int64_val"),
        "{e}"
    );

    let e = broken(&|nodes| {
        let last = nodes.len() as u64 - 1;
        nodes[0].data_deps.push(last);
    });
    assert!(
        e.contains("which is not an earlier node of the file"),
        "{e}"
    );

    let e = broken(&|nodes| nodes[1].id = nodes[0].id);
    assert!(
        e.contains("twice") || e.contains("not an earlier node"),
        "{e}"
    );

    let e = broken(&|nodes| nodes[0].r#type = schema::NodeType::MemLoadNode as i32);
    assert!(e.contains("ASTRA-sim never issues a MEM_LOAD_NODE"), "{e}");

    // Without its dependencies, a combine may run before the data it adds to is there, or a
    // send before the value it forwards: the replay must notice in one of its orders.
    let e = broken(&|nodes| {
        for n in nodes
            .iter_mut()
            .filter(|n| n.r#type == schema::NodeType::CommSendNode as i32)
        {
            n.data_deps.clear();
        }
    });
    assert!(e.contains("replay"), "{e}");

    let e = broken(&|nodes| {
        let send = nodes
            .iter_mut()
            .find(|n| is(schema::NodeType::CommSendNode)(n))
            .unwrap();
        attr(send, "comm_dst", schema::Value::Int32Val(1));
    });
    assert!(e.contains("comm_dst 1 is not another rank"), "{e}");
}

fn topoc(args: &[&str], dir: &Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_topoc"))
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap()
}

/// The `--help` example: files named as ASTRA-sim looks for them, whole sets, and errors that
/// say what to do.
#[test]
fn the_cli_writes_a_set_per_size() {
    let tmp = tempfile::tempdir().unwrap();
    let ring8 = repo().join("examples/ring8.ron");
    let ring8 = ring8.to_str().unwrap();
    let o = topoc(
        &[
            "compile",
            ring8,
            "--emit",
            "chakra",
            "-o",
            "ring8",
            "--sizes",
            "1MiB,64MiB",
        ],
        tmp.path(),
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut files: Vec<String> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    assert_eq!(files.len(), 18, "{files:?}");
    assert!(files.contains(&"ring8.1048576.7.et".to_string()));
    assert!(files.contains(&"ring8.67108864.json".to_string()));
    let json = std::fs::read_to_string(tmp.path().join("ring8.67108864.json")).unwrap();
    assert_eq!(
        json,
        "{\n  \"all-reduce-implementation-custom\": [\n    \"ring8.67108864\"\n  ]\n}\n"
    );
    let proto = chakra_sim::schema();
    let schedule = example("ring8");
    let own = schedule.schedule().phases[0].with_elements((1 << 20) / 4);
    let set: Vec<Vec<u8>> = (0..8)
        .map(|r| std::fs::read(tmp.path().join(format!("ring8.1048576.{r}.et"))).unwrap())
        .collect();
    chakra_sim::check_set(&proto, &set, &expect(schedule.schedule(), &own)).unwrap();

    let o = topoc(&["compile", ring8, "--emit", "chakra"], tmp.path());
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("give their prefix with -o PREFIX"));
    let o = topoc(&["compile", ring8, "--sizes", "1MiB"], tmp.path());
    assert!(String::from_utf8_lossy(&o.stderr).contains("--sizes applies to --emit chakra only"));

    let fabric = repo().join("examples/fabric.ron");
    let empty = tempfile::tempdir().unwrap();
    let o = topoc(
        &[
            "compile",
            fabric.to_str().unwrap(),
            "--emit",
            "chakra",
            "-o",
            "f",
            "--algorithm",
            "in-network",
        ],
        empty.path(),
    );
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("cannot be exported as Chakra traces") && err.contains("nothing was written"),
        "{err}"
    );
    assert_eq!(
        std::fs::read_dir(empty.path()).unwrap().count(),
        0,
        "nothing was written"
    );
}

/// The commands at the top of `docs/chakra.md` (the second is `topoc compile --help`'s
/// example) run as written, and the sets they write pass the reader.
#[test]
fn the_documented_commands_work() {
    let docs = std::fs::read_to_string(repo().join("docs/chakra.md")).unwrap();
    let block = docs
        .split("```sh\n")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .expect("docs/chakra.md has a sh block");
    let help = Command::new(env!("CARGO_BIN_EXE_topoc"))
        .args(["compile", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    let dir = tempfile::tempdir().unwrap();
    let mut in_help = 0;
    for line in block.lines().filter(|l| !l.trim().is_empty()) {
        in_help += usize::from(help.lines().any(|h| h.trim() == format!("Example: {line}")));
        let args: Vec<String> = line
            .split_whitespace()
            .skip(1)
            .map(|a| a.replace("examples/", &format!("{}/examples/", repo().display())))
            .collect();
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = topoc(&args, dir.path());
        assert!(
            o.status.success(),
            "{line}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    assert_eq!(
        in_help, 1,
        "compile --help shows one of the documented commands"
    );
    let schedule = example("ring8");
    let proto = chakra_sim::schema();
    for (base, size) in [("ring8", None), ("ring8.1048576", Some(1u64 << 20))] {
        let set: Vec<Vec<u8>> = (0..8)
            .map(|r| std::fs::read(dir.path().join(format!("{base}.{r}.et"))).unwrap())
            .collect();
        let own = &schedule.schedule().phases[0];
        let phase = size.map_or(own.clone(), |b| own.with_elements(b / 4));
        chakra_sim::check_set(&proto, &set, &expect(schedule.schedule(), &phase)).unwrap();
        assert!(dir.path().join(format!("{base}.json")).exists());
    }
}
