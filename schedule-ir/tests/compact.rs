//! The compact form: chunk lists as runs, read back to the very same schedule; malformed runs
//! refused with their place in the file, before anything is expanded.
#![allow(clippy::unwrap_used, clippy::panic)]

mod common;

use common::*;
use schedule_ir::serial::{self, Form, Format, ReadError};
use schedule_ir::{ChunkId, Instr, Schedule};
use std::path::Path;

/// Every example's pinned schedule (the insta snapshots of `compiler/tests/examples.rs`).
fn examples() -> Vec<(String, Schedule)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../snapshots/examples");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "snap"))
        .collect();
    files.sort();
    files
        .into_iter()
        .filter_map(|path| {
            let text = std::fs::read_to_string(&path).unwrap();
            // The snapshot's header ends at its second `---` line.
            let body = text.splitn(3, "---\n").nth(2)?;
            let schedule = serial::from_str(body).ok()?;
            Some((path.display().to_string(), schedule))
        })
        .collect()
}

/// A small deterministic generator (xorshift), so that the random schedules are the same on
/// every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// A random chunk list mixing the shapes runs capture (stretches, progressions, blocks) with
/// arbitrary ids, descending ones and the largest id.
fn random_list(rng: &mut Rng) -> Vec<ChunkId> {
    let mut ids = Vec::new();
    for _ in 0..rng.below(5) + 1 {
        let start = rng.below(1 << 20) as u32;
        match rng.below(6) {
            0 => ids.extend((0..rng.below(40)).map(|i| start + i as u32)),
            1 => {
                let stride = rng.below(70) as u32 + 1;
                ids.extend((0..rng.below(40)).map(|i| start + i as u32 * stride));
            }
            2 => {
                let (blocks, each, gap) = (rng.below(6), rng.below(9) + 1, rng.below(100) + 10);
                for b in 0..blocks {
                    ids.extend((0..each).map(|i| start + (b * gap + i) as u32));
                }
            }
            3 => ids.extend((0..rng.below(10)).map(|i| start.saturating_sub(i as u32 * 3))),
            4 => ids.push(u32::MAX - rng.below(3) as u32),
            _ => ids.extend((0..rng.below(8)).map(|_| rng.below(1 << 32) as u32)),
        }
    }
    ids.into_iter().map(ChunkId).collect()
}

/// `schedule` with every chunk list replaced by a random one.
fn randomised(mut schedule: Schedule, rng: &mut Rng) -> Schedule {
    for phase in &mut schedule.phases {
        for program in &mut phase.programs {
            for instr in program.steps.iter_mut().flatten() {
                let chunks = match instr {
                    Instr::Send { chunks, .. }
                    | Instr::Recv { chunks, .. }
                    | Instr::Reduce { chunks, .. }
                    | Instr::Copy { chunks, .. }
                    | Instr::Scale { chunks, .. } => chunks,
                };
                *chunks = random_list(rng).into();
            }
        }
    }
    schedule
}

/// `schedule` written compact in `format` and read back is `schedule`, and the text is the same
/// every time.
fn round_trips(name: &str, schedule: &Schedule) {
    for format in [Format::Ron, Format::Json] {
        let text = serial::to_string_with(schedule, format, Form::Compact);
        assert_eq!(
            text,
            serial::to_string_with(schedule, format, Form::Compact),
            "{name}: not deterministic"
        );
        let back = serial::from_str(&text).unwrap_or_else(|e| panic!("{name} {format:?}: {e}"));
        assert!(
            back == *schedule,
            "{name} {format:?}: differs after the trip"
        );
        // And back to the explicit form: the same text as written from the original.
        assert_eq!(
            serial::to_string(&back, format),
            serial::to_string(schedule, format),
            "{name} {format:?}"
        );
    }
}

#[test]
fn every_example_round_trips_through_the_compact_form() {
    let examples = examples();
    assert!(
        examples.len() >= 20,
        "only {} snapshots read",
        examples.len()
    );
    for (name, schedule) in &examples {
        round_trips(name, schedule);
        let explicit = serial::to_string(schedule, Format::Ron).len();
        let compact = serial::to_string_with(schedule, Format::Ron, Form::Compact).len();
        assert!(
            compact < explicit,
            "{name}: {compact} B compact, {explicit} explicit"
        );
    }
}

#[test]
fn random_chunk_lists_round_trip_through_the_compact_form() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let bases = [
        ring_allreduce(4, 1000),
        bidir_ring_allreduce(4, 2, 1 << 20),
        chain_broadcast(3, 2, 10),
        ring_reduce_scatter(5, 7),
    ];
    for round in 0..50 {
        for (i, base) in bases.iter().enumerate() {
            let schedule = randomised(base.clone(), &mut rng);
            round_trips(&format!("round {round}, schedule {i}"), &schedule);
        }
    }
}

#[test]
fn a_run_is_written_for_blocks_and_progressions() {
    let mut s = ring_allreduce(4, 1000);
    let blocks: Vec<u32> = (0..4)
        .flat_map(|b| (1080 + 64 * b)..(1088 + 64 * b))
        .collect();
    set_chunks(&mut s, 0, 0, 1, &blocks);
    let text = serial::to_string_with(&s, Format::Ron, Form::Compact);
    assert!(text.contains("chunks:[(1080,[(4,64),(8,1)])]"), "{text}");
    let json = serial::to_string_with(&s, Format::Json, Form::Compact);
    assert!(
        json.contains(r#""chunks":[[1080,[[4,64],[8,1]]]]"#),
        "{json}"
    );
}

/// The text of `s` with its first run replaced by `run`.
fn with_run(run: &str) -> String {
    let mut s = ring_allreduce(4, 1000);
    set_chunks(&mut s, 0, 0, 1, &[5, 6, 7, 8]);
    let text = serial::to_string_with(&s, Format::Ron, Form::Compact);
    assert!(text.contains("(5,[(4,1)])"), "{text}");
    text.replacen("(5,[(4,1)])", run, 1)
}

fn read_error(text: &str) -> (usize, String) {
    match serial::from_str(text) {
        Err(ReadError::Syntax { line, message, .. }) => (line, message),
        other => panic!("expected a syntax error, got {other:?}"),
    }
}

#[test]
fn malformed_runs_are_refused_with_their_place() {
    let line_of = |text: &str| {
        text.lines()
            .position(|l| l.contains("RUN"))
            .map(|i| i + 1)
            .unwrap()
    };
    let cases = [
        ("(5,[(0,1)])", "chunk run (5, [(0, 1)]) is empty"),
        ("(5,[])", "chunk run (5, []) has no (count, stride)"),
        ("(5,[(3,0)])", "chunk run (5, [(3, 0)]) repeats an id"),
        (
            "(4294967290,[(9,1)])",
            "reaches chunk 4294967298, past the largest id",
        ),
        (
            "(5,[(-2,1)])",
            "a chunk id or a run (start, [(count, stride), …])",
        ),
        (
            "(0,[(65536,1),(65536,1),(2,1)])",
            "names 8589934592 ids, past the 4294967296",
        ),
    ];
    for (run, expected) in cases {
        // A marker on the line, to find where the run is.
        let text = with_run(run);
        let marked = with_run(&format!("{run}/*RUN*/"));
        let (line, message) = read_error(&text);
        assert!(message.contains(expected), "{run}: {message}");
        assert_eq!(line, line_of(&marked), "{run}: {message}");
    }
}
