//! The RON writer against ron's own serialiser, the oracle: the same bytes for random
//! schedules and patterns (awkward names, every instruction, empty, long and run-shaped chunk
//! lists, odd floats) and for every example, in both forms; and the output's errors reported
//! as they were, wherever they strike.
#![allow(clippy::unwrap_used, clippy::panic)]

use super::super::{runs, Form};
use super::{write, Document, FLUSH_AT};
use crate::pattern::{Grid, Pattern};
use crate::{
    Band, Buffer, BufferId, BufferKind, Chunk, ChunkId, ChunkIds, Collective, DType, Instr, Link,
    LinkId, LinkUse, Machine, Node, NodeId, NodeKind, Phase, Program, ProgramItem, RecvMode,
    ReduceOp, Schedule,
};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use serde::Serialize;
use std::io;
use std::path::Path;

/// The oracle: a schedule of either form written through serde by ron, with the
/// `PrettyConfig`s this crate wrote RON with before [`super`] took over, followed by a newline.
fn oracle<T: Serialize>(schedule: &T, form: Form) -> Vec<u8> {
    let _runs = runs::Compact::on(form == Form::Compact);
    let config = match form {
        Form::Compact => ron::ser::PrettyConfig::new()
            .indentor(String::new())
            .separator(String::new())
            .struct_names(true)
            .compact_structs(true)
            .depth_limit(3),
        Form::Explicit => ron::ser::PrettyConfig::new()
            .indentor("  ".to_string())
            .struct_names(true)
            .compact_structs(true)
            .depth_limit(4),
    };
    let mut text = String::new();
    ron::ser::to_writer_pretty(&mut text, schedule, config).unwrap();
    text.push('\n');
    text.into_bytes()
}

/// The new writer's bytes.
fn written<D: Document>(document: &D, form: Form) -> Vec<u8> {
    let mut bytes = Vec::new();
    write(document, form, &mut bytes).unwrap();
    bytes
}

/// Fails with both texts, from the first difference, when they differ.
fn same<D: Document + Serialize>(document: &D, form: Form) -> Result<(), String> {
    let (new, old) = (written(document, form), oracle(document, form));
    if new == old {
        return Ok(());
    }
    let at = new.iter().zip(&old).take_while(|(a, b)| a == b).count();
    let from = at.saturating_sub(80);
    Err(format!(
        "{form:?}: the texts differ at byte {at}\n   new: {}\noracle: {}",
        String::from_utf8_lossy(&new[from..new.len().min(at + 80)]),
        String::from_utf8_lossy(&old[from..old.len().min(at + 80)]),
    ))
}

// ---- Random schedules ----------------------------------------------------------------------

/// Pieces of names that escaping must get right.
const AWKWARD: &[&str] = &[
    "\"",
    "\\",
    "'",
    "r#",
    "r#\"x\"#",
    "##",
    "\0",
    "\t",
    "\n",
    "\r",
    "\u{1b}",
    "\u{7f}",
    "\u{80}",
    "\u{a0}",
    "\u{ad}",
    "e\u{301}",
    "\u{301}",
    "\u{200b}",
    "\u{200d}",
    "\u{2028}",
    "\u{feff}",
    "\u{fffd}",
    "\u{fffe}",
    "\u{10ffff}",
    "\u{e000}",
    "é",
    "日本",
    "🦀",
    "👩\u{200d}🔬",
    " ",
    "Some",
    "None",
    "true",
    "NaN",
    "inf",
    "N0",
    "L01",
    "",
];

fn name() -> impl Strategy<Value = String> {
    prop_oneof![
        "[A-Za-z0-9_-]{0,8}",
        any::<String>(),
        prop::collection::vec(prop::sample::select(AWKWARD), 0..6).prop_map(|p| p.concat()),
    ]
}

fn float() -> impl Strategy<Value = f64> {
    prop_oneof![
        any::<f64>(),
        prop::sample::select(
            &[
                0.0,
                -0.0,
                1.0,
                200.0,
                12.5,
                0.1,
                1e-9,
                1e-7,
                1e15,
                1e16,
                1e17,
                1e300,
                f64::MIN_POSITIVE,
                5e-324,
                f64::MAX,
                f64::INFINITY,
                f64::NEG_INFINITY,
                f64::NAN,
                -f64::NAN,
            ][..]
        ),
    ]
}

fn id() -> impl Strategy<Value = u32> {
    prop_oneof![0..16u32, any::<u32>(), (u32::MAX - 3)..=u32::MAX]
}

fn id_u64() -> impl Strategy<Value = u64> {
    prop_oneof![0..1000u64, any::<u64>()]
}

/// A chunk list: random ids, or the shapes the compact form writes as runs (consecutive,
/// strided, blocks of them), or several of those one after another.
fn chunk_ids() -> impl Strategy<Value = ChunkIds> {
    let random = prop::collection::vec(id(), 0..12);
    let stretch = (id(), 1..6u32, 0..40u32).prop_map(|(start, stride, len)| {
        (0..len)
            .map(|i| start.wrapping_add(i.wrapping_mul(stride)))
            .collect::<Vec<_>>()
    });
    let blocks = (0..5000u32, 1..5u32, 1..200u32, 1..8u32, 1..3u32).prop_map(
        |(start, blocks, step, count, stride)| {
            (0..blocks)
                .flat_map(|b| (0..count).map(move |i| start + b * step + i * stride))
                .collect::<Vec<_>>()
        },
    );
    let long = (0..100u32, 200..3000u32).prop_map(|(start, len)| (start..start + len).collect());
    let piece = prop_oneof![4 => random, 4 => stretch, 3 => blocks, 1 => long];
    prop::collection::vec(piece, 0..4).prop_map(|pieces| {
        let ids: Vec<ChunkId> = pieces.concat().into_iter().map(ChunkId).collect();
        ChunkIds::from_ids(&ids)
    })
}

fn instr() -> impl Strategy<Value = Instr> {
    prop_oneof![
        (
            id(),
            prop::collection::vec(id(), 0..3),
            id(),
            id(),
            chunk_ids()
        )
            .prop_map(|(link, via, to, buffer, chunks)| Instr::Send {
                link: LinkId(link),
                via: via.into_iter().map(LinkId).collect(),
                to: NodeId(to),
                buffer: BufferId(buffer),
                chunks,
            }),
        (id(), id(), id(), chunk_ids(), any::<bool>()).prop_map(
            |(link, from, buffer, chunks, reduce)| Instr::Recv {
                link: LinkId(link),
                from: NodeId(from),
                buffer: BufferId(buffer),
                chunks,
                mode: if reduce {
                    RecvMode::Reduce
                } else {
                    RecvMode::Store
                },
            }
        ),
        (id(), id(), chunk_ids()).prop_map(|(src, dst, chunks)| Instr::Reduce {
            src: BufferId(src),
            dst: BufferId(dst),
            chunks,
        }),
        (id(), id(), chunk_ids()).prop_map(|(src, dst, chunks)| Instr::Copy {
            src: BufferId(src),
            dst: BufferId(dst),
            chunks,
        }),
        (id(), chunk_ids(), id()).prop_map(|(buffer, chunks, divisor)| Instr::Scale {
            buffer: BufferId(buffer),
            chunks,
            divisor,
        }),
    ]
}

fn program() -> impl Strategy<Value = Program> {
    prop::collection::vec(prop::collection::vec(instr(), 0..4), 0..4)
        .prop_map(|steps| Program { steps })
}

fn collective() -> impl Strategy<Value = Collective> {
    prop_oneof![
        Just(Collective::AllReduce),
        Just(Collective::ReduceScatter),
        Just(Collective::AllGather),
        id().prop_map(|r| Collective::Broadcast { root: NodeId(r) }),
        id().prop_map(|r| Collective::Reduce { root: NodeId(r) }),
    ]
}

fn phase() -> impl Strategy<Value = Phase> {
    let kinds = (
        collective(),
        prop::sample::select(
            &[
                ReduceOp::Sum,
                ReduceOp::Prod,
                ReduceOp::Max,
                ReduceOp::Min,
                ReduceOp::Mean,
            ][..],
        ),
        prop::sample::select(
            &[
                DType::F32,
                DType::F64,
                DType::I32,
                DType::I64,
                DType::F16,
                DType::BF16,
            ][..],
        ),
        any::<bool>(),
    );
    let chunk =
        (id_u64(), id_u64(), prop::option::of(id())).prop_map(|(start, end, owner)| Chunk {
            start,
            end,
            owner: owner.map(NodeId),
        });
    let buffer = (name(), any::<bool>()).prop_map(|(name, data)| Buffer {
        name,
        kind: if data {
            BufferKind::Data
        } else {
            BufferKind::Scratch
        },
    });
    (
        name(),
        kinds,
        id_u64(),
        name(),
        prop::collection::vec(chunk, 0..5),
        prop::collection::vec(buffer, 0..3),
        id(),
        prop::collection::vec(program(), 0..4),
    )
        .prop_map(
            |(
                name,
                (collective, op, dtype, shared),
                elements,
                algorithm,
                chunks,
                buffers,
                steps,
                programs,
            )| {
                Phase {
                    name,
                    collective,
                    op,
                    dtype,
                    elements,
                    algorithm,
                    chunks,
                    buffers,
                    steps,
                    links: if shared {
                        LinkUse::Shared
                    } else {
                        LinkUse::Exclusive
                    },
                    programs,
                }
            },
        )
}

fn machine() -> impl Strategy<Value = Machine> {
    let node =
        (name(), any::<bool>(), prop::option::of(id())).prop_map(|(name, compute, capacity)| {
            Node {
                name,
                kind: if compute {
                    NodeKind::Compute
                } else {
                    NodeKind::Switch
                },
                capacity,
            }
        });
    let link = (name(), id(), id(), float(), float(), id()).prop_map(
        |(name, a, b, bandwidth_gbps, latency_us, lanes)| Link {
            name,
            a: NodeId(a),
            b: NodeId(b),
            bandwidth_gbps,
            latency_us,
            lanes,
        },
    );
    (
        name(),
        prop::collection::vec(node, 0..5),
        prop::collection::vec(link, 0..5),
        prop::option::of(float()),
        prop_oneof![Just(0.0), float()],
    )
        .prop_map(
            |(name, nodes, links, reduce_gbps, switch_latency_us)| Machine {
                name,
                nodes,
                links,
                reduce_gbps,
                switch_latency_us,
            },
        )
}

fn program_items() -> impl Strategy<Value = Vec<ProgramItem>> {
    let band =
        (id_u64(), prop::option::of(id_u64()), name()).prop_map(|(min_bytes, max_bytes, phase)| {
            Band {
                min_bytes,
                max_bytes,
                phase,
            }
        });
    let item = prop_oneof![
        name().prop_map(ProgramItem::Compute),
        name().prop_map(ProgramItem::Exchange),
        (name(), prop::collection::vec(band, 0..3))
            .prop_map(|(name, bands)| ProgramItem::Bands { name, bands }),
    ];
    prop::collection::vec(item, 0..4)
}

fn schedule() -> impl Strategy<Value = Schedule> {
    (
        prop_oneof![Just(crate::FORMAT_VERSION), any::<u32>()],
        machine(),
        program_items(),
        prop::collection::vec(phase(), 0..3),
    )
        .prop_map(|(format_version, machine, program, phases)| Schedule {
            format_version,
            machine,
            program,
            phases,
        })
}

fn pattern() -> impl Strategy<Value = Pattern> {
    (
        prop::collection::vec(id(), 0..4),
        prop::collection::vec(id(), 0..6),
        schedule(),
    )
        .prop_map(|(sizes, nodes, s)| Pattern {
            grid: Grid {
                sizes,
                nodes: nodes.into_iter().map(NodeId).collect(),
            },
            format_version: s.format_version,
            machine: s.machine,
            program: s.program,
            phases: s.phases,
        })
}

fn runner() -> TestRunner {
    TestRunner::new(Config {
        cases: 400,
        source_file: Some(file!()),
        ..Config::default()
    })
}

#[test]
fn random_schedules_are_written_as_ron_writes_them() {
    runner()
        .run(&schedule(), |s| {
            for form in [Form::Explicit, Form::Compact] {
                same(&s, form).map_err(TestCaseError::fail)?;
            }
            Ok(())
        })
        .unwrap();
}

#[test]
fn random_patterns_are_written_as_ron_writes_them() {
    runner()
        .run(&pattern(), |p| {
            for form in [Form::Explicit, Form::Compact] {
                same(&p, form).map_err(TestCaseError::fail)?;
            }
            Ok(())
        })
        .unwrap();
}

// ---- Fixed cases ---------------------------------------------------------------------------

/// A small schedule with one of everything, its names `name`.
fn one_of_everything(name: &str) -> Schedule {
    let ids = |v: &[u32]| ChunkIds::from_ids(&v.iter().map(|&i| ChunkId(i)).collect::<Vec<_>>());
    let steps = vec![
        vec![],
        vec![
            Instr::Send {
                link: LinkId(1),
                via: vec![LinkId(2), LinkId(3)],
                to: NodeId(2),
                buffer: BufferId(0),
                chunks: ids(&[0, 1, 2, 3, 8, 9, 10, 11, 40, 7]),
            },
            Instr::Recv {
                link: LinkId(0),
                from: NodeId(1),
                buffer: BufferId(1),
                chunks: ids(&[5]),
                mode: RecvMode::Reduce,
            },
        ],
        vec![
            Instr::Reduce {
                src: BufferId(1),
                dst: BufferId(0),
                chunks: ids(&[u32::MAX - 2, u32::MAX - 1, u32::MAX]),
            },
            Instr::Copy {
                src: BufferId(0),
                dst: BufferId(1),
                chunks: ChunkIds::new(),
            },
            Instr::Scale {
                buffer: BufferId(0),
                chunks: ids(&[3, 1]),
                divisor: 4,
            },
        ],
    ];
    Schedule {
        format_version: crate::FORMAT_VERSION,
        machine: Machine {
            name: name.to_string(),
            nodes: vec![
                Node {
                    name: name.to_string(),
                    kind: NodeKind::Compute,
                    capacity: None,
                },
                Node {
                    name: format!("{name}-switch"),
                    kind: NodeKind::Switch,
                    capacity: Some(2),
                },
            ],
            links: vec![Link {
                name: name.to_string(),
                a: NodeId(0),
                b: NodeId(1),
                bandwidth_gbps: 200.0,
                latency_us: 1e-9,
                lanes: 1,
            }],
            reduce_gbps: Some(0.1),
            switch_latency_us: 0.25,
        },
        program: vec![
            ProgramItem::Compute(name.to_string()),
            ProgramItem::Bands {
                name: name.to_string(),
                bands: vec![
                    Band {
                        min_bytes: 0,
                        max_bytes: Some(32768),
                        phase: name.to_string(),
                    },
                    Band {
                        min_bytes: 32768,
                        max_bytes: None,
                        phase: name.to_string(),
                    },
                ],
            },
        ],
        phases: vec![Phase {
            name: name.to_string(),
            collective: Collective::Broadcast { root: NodeId(0) },
            op: ReduceOp::Mean,
            dtype: DType::BF16,
            elements: u64::MAX,
            algorithm: name.to_string(),
            chunks: vec![Chunk {
                start: 0,
                end: 10,
                owner: Some(NodeId(1)),
            }],
            buffers: vec![Buffer {
                name: name.to_string(),
                kind: BufferKind::Scratch,
            }],
            steps: 3,
            links: LinkUse::Shared,
            programs: vec![Program { steps }, Program::default()],
        }],
    }
}

#[test]
fn awkward_names_are_escaped_as_ron_escapes_them() {
    for piece in AWKWARD {
        for name in [piece.to_string(), format!("a{piece}b{piece}")] {
            let s = one_of_everything(&name);
            for form in [Form::Explicit, Form::Compact] {
                same(&s, form).unwrap();
            }
        }
    }
    // Every character ron escapes differently from a plain copy, one by one: the controls,
    // the quotes, the backslash, and the first few thousand code points beyond ASCII.
    let every: String = (0..0x3000u32).filter_map(char::from_u32).collect();
    for form in [Form::Explicit, Form::Compact] {
        same(&one_of_everything(&every), form).unwrap();
    }
}

#[test]
fn a_pattern_with_one_of_everything_is_written_as_ron_writes_it() {
    let s = one_of_everything("p");
    let p = Pattern {
        grid: Grid {
            sizes: vec![4, 4],
            nodes: (0..16).map(NodeId).collect(),
        },
        format_version: s.format_version,
        machine: s.machine,
        program: vec![],
        phases: s.phases,
    };
    for form in [Form::Explicit, Form::Compact] {
        same(&p, form).unwrap();
    }
}

#[test]
fn integers_are_written_in_decimal_at_every_length() {
    let mut s = one_of_everything("n");
    let mut values: Vec<u64> = vec![0, 9, 10, 99, 100, 101, 999, 1000, u64::MAX, u64::MAX - 1];
    values.extend((0..20).map(|k| 10u64.pow(k) - 1));
    values.extend((0..20).map(|k| 10u64.pow(k)));
    s.phases[0].chunks = values
        .iter()
        .map(|&v| Chunk {
            start: v,
            end: v,
            owner: Some(NodeId(v as u32)),
        })
        .collect();
    for form in [Form::Explicit, Form::Compact] {
        same(&s, form).unwrap();
    }
}

/// Every example's pinned schedule (the insta snapshots of `compiler/tests/examples.rs`), and
/// the hand-written schedules of this crate's tests.
fn examples() -> Vec<(String, Schedule)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in ["../snapshots/examples", "tests/good"] {
        for entry in std::fs::read_dir(root.join(dir)).unwrap() {
            files.push(entry.unwrap().path());
        }
    }
    files.sort();
    files
        .into_iter()
        .filter_map(|path| {
            let text = std::fs::read_to_string(&path).ok()?;
            // A snapshot's header ends at its second `---` line.
            let body = match path.extension().and_then(|e| e.to_str()) {
                Some("snap") => text.splitn(3, "---\n").nth(2)?,
                Some("ron") => &text,
                _ => return None,
            };
            let schedule = super::super::from_str(body).ok()?;
            Some((path.display().to_string(), schedule))
        })
        .collect()
}

#[test]
fn every_example_is_written_as_ron_writes_it() {
    let examples = examples();
    assert!(
        examples.len() > 20,
        "only {} examples found",
        examples.len()
    );
    for (name, schedule) in examples {
        for form in [Form::Explicit, Form::Compact] {
            if let Err(e) = same(&schedule, form) {
                panic!("{name}: {e}");
            }
        }
    }
}

// ---- Errors --------------------------------------------------------------------------------

/// A writer that takes `room` bytes and then fails as a full disk does.
struct Full {
    room: usize,
    taken: usize,
}

impl io::Write for Full {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.room == 0 {
            return Err(io::Error::from(io::ErrorKind::StorageFull));
        }
        let n = buf.len().min(self.room);
        self.room -= n;
        self.taken += n;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A schedule whose text is several times [`FLUSH_AT`], so that it reaches the output in
/// several pieces.
fn large() -> Schedule {
    let mut s = one_of_everything("large");
    let step = s.phases[0].programs[0].steps[1].clone();
    s.phases[0].programs[0].steps = vec![step; 4000];
    s
}

#[test]
fn the_outputs_error_is_reported_as_it_was_wherever_it_strikes() {
    let s = large();
    for form in [Form::Explicit, Form::Compact] {
        let whole = written(&s, form).len();
        assert!(whole > 3 * FLUSH_AT, "{form:?}: {whole} bytes");
        for room in [
            0,
            1,
            FLUSH_AT - 1,
            FLUSH_AT,
            FLUSH_AT + 1,
            whole / 2,
            whole - 1,
        ] {
            let mut out = Full { room, taken: 0 };
            let e = write(&s, form, &mut out).unwrap_err();
            assert_eq!(
                e.kind(),
                io::ErrorKind::StorageFull,
                "{form:?}, {room}: {e}"
            );
            assert_eq!(
                out.taken, room,
                "{form:?}: the output took what it had room for"
            );
        }
        let mut out = Full {
            room: whole,
            taken: 0,
        };
        write(&s, form, &mut out).unwrap();
        assert_eq!(out.taken, whole);
    }
}

/// The output is handed the text in pieces of about [`FLUSH_AT`] bytes, not held whole.
#[test]
fn a_large_text_reaches_the_output_in_pieces() {
    struct Pieces(Vec<usize>);
    impl io::Write for Pieces {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0.push(buf.len());
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }
    let mut pieces = Pieces(Vec::new());
    write(&large(), Form::Explicit, &mut pieces).unwrap();
    assert!(pieces.0.len() > 3, "{:?}", pieces.0);
    assert!(pieces.0.iter().all(|&n| n < 2 * FLUSH_AT), "{:?}", pieces.0);
}
