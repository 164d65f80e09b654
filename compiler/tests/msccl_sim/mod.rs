//! An independent reader and simulator of MSCCL algorithm XML, written from the runtimes'
//! semantics (`../shared/MSCCL-XML.md`), not from topoc's emitter or schedule IR.
//!
//! - [`parse`] checks the text against the runtime's hand-written parser (no prolog, one
//!   element per line, double quotes, single spaces, every attribute on every element) and reads
//!   it with `roxmltree`.
//! - [`check_structure`] checks what the runtime checks or relies on: contiguous thread-block
//!   ids, peers, one thread block per (peer, channel) and direction, step indices and limits,
//!   offsets in bounds, dependencies, and that every FIFO gets as many receives as sends.
//! - [`simulate`] runs every thread block of every GPU: each thread block's steps in order, a
//!   step waiting for its dependency (thread block `depid` has completed a step ≥ `deps`
//!   marked `hasdep`), one FIFO per (sender, receiver, channel) whose k-th send meets the k-th
//!   receive, with room for `capacity` messages. A value is the MSCCL chunk of the full vector
//!   it belongs to and the set of ranks whose inputs it combines; combining different chunks,
//!   or a rank twice, reading an undefined chunk or writing a read-only input is an error.
//!   The order in which ready thread blocks run is a [`Policy`].
//! - [`check_result`] checks every rank's output against the collective, as topoc's verifier
//!   does symbolically: every expected input combined exactly once.
#![allow(dead_code)]

mod lint;
mod order;
mod read;

pub use read::{check_structure, parse, Algo};

/// The interleavings every file is run under.
pub const POLICIES: [Policy; 5] = [
    Policy::RunAhead,
    Policy::RunAheadReversed,
    Policy::Random(1),
    Policy::Random(2),
    Policy::Random(3),
];

/// Everything the checker knows, on one file: it must read, pass every structural rule, be
/// allowed in both call modes, and in both modes, under every policy with FIFOs of a single
/// message, run to the end and leave every rank with the collective's result. Returns the
/// algorithm, or the first thing wrong with it, prefixed by `case`.
pub fn check_file(case: &str, xml: &str) -> Result<Algo, String> {
    let algo = parse(xml).map_err(|e| format!("{case}: unreadable: {e}"))?;
    let problems = check_structure(&algo);
    if !problems.is_empty() {
        return Err(format!("{case}: {problems:#?}"));
    }
    if !(algo.inplace && algo.outofplace) {
        return Err(format!("{case}: not valid for both call modes"));
    }
    for mode in [Mode::OutOfPlace, Mode::InPlace] {
        for policy in POLICIES {
            let outcome = simulate(&algo, mode, policy, 1)
                .map_err(|e| format!("{case} {mode:?} {policy:?}: {e}"))?;
            let wrong = check_result(&algo, &outcome);
            if !wrong.is_empty() {
                return Err(format!("{case} {mode:?} {policy:?}: {wrong:#?}"));
            }
        }
    }
    Ok(algo)
}

use rand::Rng;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use read::{kind, real_sizes};
use std::collections::{BTreeSet, HashMap, VecDeque};

/// How a call passes its buffers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Input and output are separate; the input is read-only.
    OutOfPlace,
    /// One buffer: reduce-scatter's output is the rank's block of the input, allgather's input
    /// the rank's block of the output, allreduce's input is its output.
    InPlace,
}

/// Which ready thread block runs next.
#[derive(Clone, Copy, Debug)]
pub enum Policy {
    /// Thread blocks in file order; each runs as far as it can before the next.
    RunAhead,
    /// The same from the last thread block of the last GPU.
    RunAheadReversed,
    /// A random ready thread block, one stage at a time.
    Random(u64),
}

/// A symbolic value: the MSCCL chunk (of the full vector) and the ranks combined into it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Value {
    pub chunk: i64,
    pub ranks: BTreeSet<i64>,
}

/// The outputs of every rank after a run.
#[derive(Debug)]
pub struct Outcome {
    /// Per rank, per output chunk.
    pub output: Vec<Vec<Option<Value>>>,
    /// Steps executed.
    pub executed: usize,
}

#[derive(Clone)]
enum Stage {
    Start,
    Received(Vec<Value>),
}

struct Machine<'a> {
    algo: &'a Algo,
    mode: Mode,
    k: i64,
    memory: Vec<HashMap<(char, i64), Value>>,
    fifos: HashMap<(i64, i64, i64), VecDeque<Vec<Value>>>,
    capacity: usize,
    pc: Vec<Vec<usize>>,
    stage: Vec<Vec<Stage>>,
    flag: Vec<Vec<i64>>,
}

impl Machine<'_> {
    /// The memory cell a location is, in this mode.
    fn cell(&self, g: i64, buf: char, off: i64) -> (char, i64) {
        if self.mode == Mode::OutOfPlace {
            return (buf, off);
        }
        match (self.algo.coll.as_str(), buf) {
            ("allreduce", 'o') => ('i', off),
            ("reducescatter", 'o') => ('i', g * self.k + off),
            ("allgather", 'i') => ('o', g * self.k + off),
            _ => (buf, off),
        }
    }

    fn read(&self, g: i64, buf: char, off: i64, cnt: i64) -> Result<Vec<Value>, String> {
        (off..off + cnt)
            .map(|o| {
                self.memory[g as usize]
                    .get(&self.cell(g, buf, o))
                    .cloned()
                    .ok_or_else(|| format!("reads {buf}[{o}], which holds no value"))
            })
            .collect()
    }

    fn write(&mut self, g: i64, buf: char, off: i64, values: Vec<Value>) -> Result<(), String> {
        if self.mode == Mode::OutOfPlace && buf == 'i' {
            return Err(
                "writes the input buffer, which an out-of-place call passes read-only".into(),
            );
        }
        for (i, v) in values.into_iter().enumerate() {
            let cell = self.cell(g, buf, off + i as i64);
            self.memory[g as usize].insert(cell, v);
        }
        Ok(())
    }

    /// Tries to advance thread block `t` of GPU `g` by one stage.
    fn advance(&mut self, g: usize, t: usize) -> Result<bool, String> {
        let algo = self.algo;
        let tb = &algo.gpus[g].tbs[t];
        let Some(st) = tb.steps.get(self.pc[g][t]) else {
            return Ok(false);
        };
        let gi = g as i64;
        let at = |e: String| format!("gpu {g} tb {t} step {} ({}): {e}", st.s, st.ty);
        let out_key = (gi, tb.send, tb.chan);
        let in_key = (tb.recv, gi, tb.chan);
        let k = kind(&st.ty).ok_or_else(|| at("unknown type".into()))?;
        match self.stage[g][t].clone() {
            Stage::Start => {
                if st.depid >= 0 && self.flag[g][st.depid as usize] < st.deps {
                    return Ok(false);
                }
                let room = self.fifos.get(&out_key).map_or(0, VecDeque::len) < self.capacity;
                if k.receives {
                    let Some(head) = self.fifos.get_mut(&in_key).and_then(VecDeque::pop_front)
                    else {
                        return Ok(false);
                    };
                    if head.len() as i64 != st.cnt {
                        return Err(at(format!(
                            "receives {} chunks, expects {}",
                            head.len(),
                            st.cnt
                        )));
                    }
                    let result = if st.ty.starts_with("rr") {
                        let local = self.read(gi, st.srcbuf, st.srcoff, st.cnt).map_err(at)?;
                        local
                            .into_iter()
                            .zip(head)
                            .map(|(a, b)| combine(a, b))
                            .collect::<Result<Vec<_>, _>>()
                            .map_err(at)?
                    } else {
                        head
                    };
                    if k.writes_dst {
                        self.write(gi, st.dstbuf, st.dstoff, result.clone())
                            .map_err(at)?;
                    }
                    if k.sends {
                        self.stage[g][t] = Stage::Received(result);
                        return Ok(true);
                    }
                } else if k.sends {
                    if !room {
                        return Ok(false);
                    }
                    let values = self.read(gi, st.srcbuf, st.srcoff, st.cnt).map_err(at)?;
                    self.fifos.entry(out_key).or_default().push_back(values);
                } else if st.ty == "cpy" {
                    let values = self.read(gi, st.srcbuf, st.srcoff, st.cnt).map_err(at)?;
                    self.write(gi, st.dstbuf, st.dstoff, values).map_err(at)?;
                } else if st.ty == "re" {
                    let src = self.read(gi, st.srcbuf, st.srcoff, st.cnt).map_err(at)?;
                    let dst = self.read(gi, st.dstbuf, st.dstoff, st.cnt).map_err(at)?;
                    let values = dst
                        .into_iter()
                        .zip(src)
                        .map(|(a, b)| combine(a, b))
                        .collect::<Result<Vec<_>, _>>()
                        .map_err(at)?;
                    self.write(gi, st.dstbuf, st.dstoff, values).map_err(at)?;
                }
            }
            Stage::Received(values) => {
                if self.fifos.get(&out_key).map_or(0, VecDeque::len) >= self.capacity {
                    return Ok(false);
                }
                self.fifos.entry(out_key).or_default().push_back(values);
            }
        }
        // The step is complete.
        if st.hasdep && st.ty != "nop" {
            self.flag[g][t] = st.s;
        }
        self.stage[g][t] = Stage::Start;
        self.pc[g][t] += 1;
        Ok(true)
    }
}

fn combine(a: Value, b: Value) -> Result<Value, String> {
    if a.chunk != b.chunk {
        return Err(format!("combines chunk {} with chunk {}", a.chunk, b.chunk));
    }
    if let Some(r) = a.ranks.intersection(&b.ranks).next() {
        return Err(format!(
            "combines the input of rank {r} twice into chunk {}",
            a.chunk
        ));
    }
    let mut ranks = a.ranks;
    ranks.extend(b.ranks);
    Ok(Value {
        chunk: a.chunk,
        ranks,
    })
}

/// Runs the algorithm until every thread block is done; errors on a deadlock or a bad value.
pub fn simulate(
    algo: &Algo,
    mode: Mode,
    policy: Policy,
    capacity: usize,
) -> Result<Outcome, String> {
    let n = algo.ngpus;
    let k = algo.nchunksperloop / n.max(1);
    let mut m = Machine {
        algo,
        mode,
        k,
        memory: vec![HashMap::new(); algo.gpus.len()],
        fifos: HashMap::new(),
        capacity: capacity.max(1),
        pc: algo.gpus.iter().map(|g| vec![0; g.tbs.len()]).collect(),
        stage: algo
            .gpus
            .iter()
            .map(|g| vec![Stage::Start; g.tbs.len()])
            .collect(),
        flag: algo.gpus.iter().map(|g| vec![-1; g.tbs.len()]).collect(),
    };
    // Inputs: chunk identities in the full vector.
    let (real_i, real_o) = real_sizes(algo);
    for g in 0..n {
        for off in 0..real_i {
            let chunk = if algo.coll == "allgather" {
                g * k + off
            } else {
                off
            };
            let value = Value {
                chunk,
                ranks: BTreeSet::from([g]),
            };
            let cell = m.cell(g, 'i', off);
            m.memory[g as usize].insert(cell, value);
        }
    }
    let mut order: Vec<(usize, usize)> = algo
        .gpus
        .iter()
        .enumerate()
        .flat_map(|(g, gpu)| (0..gpu.tbs.len()).map(move |t| (g, t)))
        .collect();
    if let Policy::RunAheadReversed = policy {
        order.reverse();
    }
    let mut rng = ChaCha8Rng::seed_from_u64(match policy {
        Policy::Random(seed) => seed,
        _ => 0,
    });
    let mut executed = 0;
    loop {
        let mut progressed = false;
        match policy {
            Policy::RunAhead | Policy::RunAheadReversed => {
                for &(g, t) in &order {
                    while m.advance(g, t)? {
                        progressed = true;
                        executed += 1;
                    }
                }
            }
            Policy::Random(_) => {
                // A random thread block first, then the next ones in turn until one can step:
                // one draw per step rather than a shuffle of every thread block, so that large
                // exports stay linear in their steps times the blocked thread blocks.
                let start = rng.random_range(0..order.len().max(1));
                for i in 0..order.len() {
                    let (g, t) = order[(start + i) % order.len()];
                    if m.advance(g, t)? {
                        progressed = true;
                        executed += 1;
                        break;
                    }
                }
            }
        }
        if !progressed {
            break;
        }
    }
    let stuck: Vec<String> = order
        .iter()
        .filter(|&&(g, t)| m.pc[g][t] < algo.gpus[g].tbs[t].steps.len())
        .map(|&(g, t)| format!("gpu {g} tb {t} at step {}", m.pc[g][t]))
        .collect();
    if !stuck.is_empty() {
        return Err(format!(
            "deadlock: {} thread blocks cannot go on: {}",
            stuck.len(),
            stuck.join(", ")
        ));
    }
    if let Some((key, q)) = m.fifos.iter().find(|(_, q)| !q.is_empty()) {
        return Err(format!(
            "{} message(s) left unreceived in FIFO {key:?}",
            q.len()
        ));
    }
    let output = (0..n)
        .map(|g| {
            (0..real_o)
                .map(|off| m.memory[g as usize].get(&m.cell(g, 'o', off)).cloned())
                .collect()
        })
        .collect();
    Ok(Outcome { output, executed })
}

/// Every rank's output against the collective; returns every difference.
pub fn check_result(algo: &Algo, outcome: &Outcome) -> Vec<String> {
    let n = algo.ngpus;
    let k = algo.nchunksperloop / n.max(1);
    let all: BTreeSet<i64> = (0..n).collect();
    let mut errors = Vec::new();
    for (g, out) in outcome.output.iter().enumerate() {
        let g = g as i64;
        for (off, value) in out.iter().enumerate() {
            let off = off as i64;
            let expected = match algo.coll.as_str() {
                "allreduce" => Value {
                    chunk: off,
                    ranks: all.clone(),
                },
                "reducescatter" => Value {
                    chunk: g * k + off,
                    ranks: all.clone(),
                },
                _ => Value {
                    chunk: off,
                    ranks: BTreeSet::from([off / k]),
                },
            };
            match value {
                Some(v) if *v == expected => {}
                Some(v) => errors.push(format!(
                    "rank {g} output chunk {off}: holds chunk {} of ranks {:?}, expected chunk {} of ranks {:?}",
                    v.chunk, v.ranks, expected.chunk, expected.ranks
                )),
                None => errors.push(format!("rank {g} output chunk {off}: undefined")),
            }
        }
    }
    errors
}
