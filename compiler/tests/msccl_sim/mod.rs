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

use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::collections::{BTreeSet, HashMap, VecDeque};

/// Limits the runtimes enforce.
pub const MAX_STEPS: usize = 64;
const MAX_COUNT: i64 = 72;
const MAX_DEPID: i64 = 127;
const MAX_ATTRS: usize = 16;

#[derive(Clone, Debug)]
pub struct Algo {
    pub name: String,
    pub proto: String,
    pub nchannels: i64,
    pub nchunksperloop: i64,
    pub ngpus: i64,
    pub coll: String,
    pub inplace: bool,
    pub outofplace: bool,
    pub gpus: Vec<Gpu>,
}

#[derive(Clone, Debug)]
pub struct Gpu {
    pub id: i64,
    pub i_chunks: i64,
    pub o_chunks: i64,
    pub s_chunks: i64,
    pub tbs: Vec<Tb>,
}

#[derive(Clone, Debug)]
pub struct Tb {
    pub id: i64,
    pub send: i64,
    pub recv: i64,
    pub chan: i64,
    pub steps: Vec<Step>,
}

#[derive(Clone, Debug)]
pub struct Step {
    pub s: i64,
    pub ty: String,
    pub srcbuf: char,
    pub srcoff: i64,
    pub dstbuf: char,
    pub dstoff: i64,
    pub cnt: i64,
    pub depid: i64,
    pub deps: i64,
    pub hasdep: bool,
}

const ALGO_ATTRS: [&str; 10] = [
    "name",
    "proto",
    "nchannels",
    "nchunksperloop",
    "ngpus",
    "coll",
    "inplace",
    "outofplace",
    "minBytes",
    "maxBytes",
];
const GPU_ATTRS: [&str; 4] = ["id", "i_chunks", "o_chunks", "s_chunks"];
const TB_ATTRS: [&str; 4] = ["id", "send", "recv", "chan"];
const STEP_ATTRS: [&str; 10] = [
    "s", "type", "srcbuf", "srcoff", "dstbuf", "dstoff", "cnt", "depid", "deps", "hasdep",
];

/// Checks the lexical layout the runtime's parser needs, line by line.
fn lint(text: &str) -> Result<(), String> {
    if text.trim_start().starts_with("<?") {
        return Err("the runtime's parser does not read an XML prolog".into());
    }
    for (n, line) in text.lines().enumerate() {
        let at = |m: &str| format!("line {}: {m}: {line}", n + 1);
        let l = line.trim();
        if l.is_empty() {
            continue;
        }
        if !l.starts_with('<') || !l.ends_with('>') || l[1..].contains('<') {
            return Err(at("one element per line"));
        }
        if l.starts_with("</") {
            continue;
        }
        let body = l
            .trim_start_matches('<')
            .trim_end_matches('>')
            .trim_end_matches('/');
        if body.ends_with(' ') {
            return Err(at("no space before `>` or `/>`"));
        }
        // name, then ` key="value"` pairs separated by exactly one space.
        let mut rest = match body.split_once(' ') {
            Some((_, r)) => r,
            None => "",
        };
        let mut count = 0;
        while !rest.is_empty() {
            let (key, after) = rest
                .split_once("=\"")
                .ok_or_else(|| at("attribute values in double quotes"))?;
            if key.is_empty() || key.contains(' ') {
                return Err(at("attributes separated by single spaces"));
            }
            let (_, after) = after
                .split_once('"')
                .ok_or_else(|| at("unterminated value"))?;
            count += 1;
            rest = match after.strip_prefix(' ') {
                Some(r) if !r.starts_with(' ') && !r.is_empty() => r,
                Some(_) => return Err(at("attributes separated by single spaces")),
                None if after.is_empty() => "",
                None => return Err(at("attributes separated by single spaces")),
            };
        }
        if count > MAX_ATTRS {
            return Err(at("more than 16 attributes"));
        }
    }
    Ok(())
}

fn attrs<'a>(
    node: roxmltree::Node<'a, '_>,
    names: &[&str],
) -> Result<HashMap<String, &'a str>, String> {
    let mut out = HashMap::new();
    for name in names {
        let v = node.attribute(*name).ok_or_else(|| {
            format!(
                "<{}> misses the mandatory attribute `{name}`",
                node.tag_name().name()
            )
        })?;
        out.insert(name.to_string(), v);
    }
    for a in node.attributes() {
        if !names.contains(&a.name()) {
            return Err(format!(
                "<{}> has an unknown attribute `{}`",
                node.tag_name().name(),
                a.name()
            ));
        }
    }
    Ok(out)
}

fn int(map: &HashMap<String, &str>, key: &str) -> Result<i64, String> {
    map[key]
        .parse()
        .map_err(|e| format!("`{key}` = {:?} is not an integer: {e}", map[key]))
}

fn flag(map: &HashMap<String, &str>, key: &str) -> Result<bool, String> {
    match map[key] {
        "0" => Ok(false),
        "1" => Ok(true),
        v => Err(format!("`{key}` must be 0 or 1, not {v:?}")),
    }
}

fn buffer(map: &HashMap<String, &str>, key: &str) -> Result<char, String> {
    match map[key] {
        "i" => Ok('i'),
        "o" => Ok('o'),
        "s" => Ok('s'),
        v => Err(format!("`{key}` must be i, o or s, not {v:?}")),
    }
}

fn children<'a, 'i>(
    node: roxmltree::Node<'a, 'i>,
    tag: &str,
) -> Result<Vec<roxmltree::Node<'a, 'i>>, String> {
    let mut out = Vec::new();
    for c in node.children().filter(|c| c.is_element()) {
        if c.tag_name().name() != tag {
            return Err(format!(
                "<{}> inside <{}>, expected <{tag}>",
                c.tag_name().name(),
                node.tag_name().name()
            ));
        }
        out.push(c);
    }
    Ok(out)
}

/// Reads an algorithm file.
pub fn parse(text: &str) -> Result<Algo, String> {
    lint(text)?;
    let doc = roxmltree::Document::parse(text).map_err(|e| e.to_string())?;
    let root = doc.root_element();
    if root.tag_name().name() != "algo" {
        return Err("the root element is not <algo>".into());
    }
    let a = attrs(root, &ALGO_ATTRS)?;
    int(&a, "minBytes")?;
    int(&a, "maxBytes")?;
    let mut gpus = Vec::new();
    for g in children(root, "gpu")? {
        let ga = attrs(g, &GPU_ATTRS)?;
        let mut tbs = Vec::new();
        for t in children(g, "tb")? {
            let ta = attrs(t, &TB_ATTRS)?;
            let mut steps = Vec::new();
            for s in children(t, "step")? {
                let sa = attrs(s, &STEP_ATTRS)?;
                steps.push(Step {
                    s: int(&sa, "s")?,
                    ty: sa["type"].to_string(),
                    srcbuf: buffer(&sa, "srcbuf")?,
                    srcoff: int(&sa, "srcoff")?,
                    dstbuf: buffer(&sa, "dstbuf")?,
                    dstoff: int(&sa, "dstoff")?,
                    cnt: int(&sa, "cnt")?,
                    depid: int(&sa, "depid")?,
                    deps: int(&sa, "deps")?,
                    hasdep: flag(&sa, "hasdep")?,
                });
            }
            tbs.push(Tb {
                id: int(&ta, "id")?,
                send: int(&ta, "send")?,
                recv: int(&ta, "recv")?,
                chan: int(&ta, "chan")?,
                steps,
            });
        }
        gpus.push(Gpu {
            id: int(&ga, "id")?,
            i_chunks: int(&ga, "i_chunks")?,
            o_chunks: int(&ga, "o_chunks")?,
            s_chunks: int(&ga, "s_chunks")?,
            tbs,
        });
    }
    Ok(Algo {
        name: a["name"].to_string(),
        proto: a["proto"].to_string(),
        nchannels: int(&a, "nchannels")?,
        nchunksperloop: int(&a, "nchunksperloop")?,
        ngpus: int(&a, "ngpus")?,
        coll: a["coll"].to_string(),
        inplace: flag(&a, "inplace")?,
        outofplace: flag(&a, "outofplace")?,
        gpus,
    })
}

/// What a step type does.
struct Kind {
    sends: bool,
    receives: bool,
    reads_src: bool,
    writes_dst: bool,
}

fn kind(ty: &str) -> Option<Kind> {
    let k = |sends, receives, reads_src, writes_dst| {
        Some(Kind {
            sends,
            receives,
            reads_src,
            writes_dst,
        })
    };
    match ty {
        "s" => k(true, false, true, false),
        "r" => k(false, true, false, true),
        "rcs" => k(true, true, false, true),
        "rrs" => k(true, true, true, false),
        "rrc" => k(false, true, true, true),
        "rrcs" => k(true, true, true, true),
        "cpy" => k(false, false, true, true),
        "re" => k(false, false, true, true),
        "nop" => k(false, false, false, false),
        _ => None,
    }
}

/// The real size of each buffer, in chunks, for the collective (what the runtime hands over).
fn real_sizes(algo: &Algo) -> (i64, i64) {
    let n = algo.nchunksperloop;
    let k = n / algo.ngpus.max(1);
    match algo.coll.as_str() {
        "reducescatter" => (n, k),
        "allgather" => (k, n),
        _ => (n, n),
    }
}

/// Every structural rule; returns every violation.
pub fn check_structure(algo: &Algo) -> Vec<String> {
    let mut errors = Vec::new();
    if !["Simple", "LL", "LL128"].contains(&algo.proto.as_str()) {
        errors.push(format!("unknown proto {}", algo.proto));
    }
    if !["allreduce", "reducescatter", "allgather"].contains(&algo.coll.as_str()) {
        errors.push(format!(
            "collective {} is not one this reader checks",
            algo.coll
        ));
    }
    if algo.gpus.len() as i64 != algo.ngpus {
        errors.push(format!(
            "{} <gpu> for ngpus={}",
            algo.gpus.len(),
            algo.ngpus
        ));
    }
    if algo.coll != "allreduce" && algo.nchunksperloop % algo.ngpus.max(1) != 0 {
        errors.push("nchunksperloop is not a multiple of ngpus".into());
    }
    let (real_i, real_o) = real_sizes(algo);
    // (sender, receiver, chan) → counts of sends / receives, in order.
    let mut sent: HashMap<(i64, i64, i64), Vec<i64>> = HashMap::new();
    let mut received: HashMap<(i64, i64, i64), Vec<i64>> = HashMap::new();
    for (gi, gpu) in algo.gpus.iter().enumerate() {
        let g = gpu.id;
        if g != gi as i64 {
            errors.push(format!("gpu {gi} has id {g}"));
        }
        if gpu.i_chunks > real_i || gpu.o_chunks > real_o || gpu.s_chunks < 0 {
            errors.push(format!("gpu {g}: buffer sizes beyond the call's buffers"));
        }
        let mut send_chan = BTreeSet::new();
        let mut recv_chan = BTreeSet::new();
        for (ti, tb) in gpu.tbs.iter().enumerate() {
            let at = format!("gpu {g} tb {}", tb.id);
            if tb.id != ti as i64 {
                errors.push(format!("{at}: thread-block ids must be 0, 1, … in order"));
            }
            for (p, what) in [(tb.send, "send"), (tb.recv, "recv")] {
                if p == g || p < -1 || p >= algo.ngpus {
                    errors.push(format!("{at}: {what} peer {p} is not another rank or -1"));
                }
            }
            if tb.chan < 0 || tb.chan >= algo.nchannels {
                errors.push(format!("{at}: channel {} outside nchannels", tb.chan));
            }
            if tb.send >= 0 && !send_chan.insert((tb.send, tb.chan)) {
                errors.push(format!(
                    "{at}: a second thread block sends to {} on channel {}",
                    tb.send, tb.chan
                ));
            }
            if tb.recv >= 0 && !recv_chan.insert((tb.recv, tb.chan)) {
                errors.push(format!(
                    "{at}: a second thread block receives from {} on channel {}",
                    tb.recv, tb.chan
                ));
            }
            if tb.steps.len() > MAX_STEPS {
                errors.push(format!(
                    "{at}: {} steps (limit {MAX_STEPS})",
                    tb.steps.len()
                ));
            }
            let mut after_nop = false;
            for (si, st) in tb.steps.iter().enumerate() {
                let at = format!("{at} step {si}");
                if st.s != si as i64 {
                    errors.push(format!("{at}: s={} out of order", st.s));
                }
                let Some(k) = kind(&st.ty) else {
                    errors.push(format!("{at}: unknown type {}", st.ty));
                    continue;
                };
                if st.depid >= 0 {
                    match gpu.tbs.get(st.depid as usize) {
                        _ if st.depid == tb.id => errors.push(format!("{at}: waits for itself")),
                        _ if st.depid > MAX_DEPID => {
                            errors.push(format!("{at}: depid > {MAX_DEPID}"))
                        }
                        None => errors.push(format!("{at}: depid {} does not exist", st.depid)),
                        Some(other) => match other.steps.get(st.deps as usize) {
                            Some(target) if st.deps >= 0 && target.hasdep => {}
                            Some(_) if st.deps >= 0 => errors.push(format!(
                                "{at}: waits for tb {} step {}, which has hasdep=0",
                                st.depid, st.deps
                            )),
                            _ => errors.push(format!("{at}: deps {} out of range", st.deps)),
                        },
                    }
                } else if st.depid != -1 || st.deps != -1 {
                    errors.push(format!("{at}: no dependency must be depid=-1 deps=-1"));
                }
                if st.ty == "nop" {
                    if st.depid < 0 {
                        errors.push(format!("{at}: a nop without a dependency"));
                    }
                    after_nop = true;
                    continue;
                }
                if after_nop && st.depid < 0 {
                    errors.push(format!(
                        "{at}: the step after nops must carry the last dependency"
                    ));
                }
                after_nop = false;
                if st.cnt < 1 || st.cnt >= MAX_COUNT {
                    errors.push(format!("{at}: cnt {} outside 1..{MAX_COUNT}", st.cnt));
                }
                let size = |b: char| match b {
                    'i' => gpu.i_chunks,
                    'o' => gpu.o_chunks,
                    _ => gpu.s_chunks,
                };
                if k.reads_src && (st.srcoff < 0 || st.srcoff + st.cnt > size(st.srcbuf)) {
                    errors.push(format!(
                        "{at}: source {}[{}..+{}] out of bounds",
                        st.srcbuf, st.srcoff, st.cnt
                    ));
                }
                if k.writes_dst && (st.dstoff < 0 || st.dstoff + st.cnt > size(st.dstbuf)) {
                    errors.push(format!(
                        "{at}: destination {}[{}..+{}] out of bounds",
                        st.dstbuf, st.dstoff, st.cnt
                    ));
                }
                if k.sends {
                    if tb.send < 0 {
                        errors.push(format!("{at}: sends without a send peer"));
                    }
                    sent.entry((g, tb.send, tb.chan)).or_default().push(st.cnt);
                }
                if k.receives {
                    if tb.recv < 0 {
                        errors.push(format!("{at}: receives without a recv peer"));
                    }
                    received
                        .entry((tb.recv, g, tb.chan))
                        .or_default()
                        .push(st.cnt);
                }
            }
        }
    }
    // Every step another thread block waits for must exist; hasdep only where someone waits.
    for gpu in &algo.gpus {
        let waited: BTreeSet<(i64, i64)> = gpu
            .tbs
            .iter()
            .flat_map(|t| t.steps.iter())
            .filter(|s| s.depid >= 0)
            .map(|s| (s.depid, s.deps))
            .collect();
        for tb in &gpu.tbs {
            for st in &tb.steps {
                if st.hasdep && !waited.contains(&(tb.id, st.s)) {
                    errors.push(format!(
                        "gpu {} tb {} step {}: hasdep=1 but nobody waits",
                        gpu.id, tb.id, st.s
                    ));
                }
            }
        }
    }
    let keys: BTreeSet<_> = sent.keys().chain(received.keys()).copied().collect();
    for key in keys {
        let (s, r) = (sent.get(&key), received.get(&key));
        if s != r {
            errors.push(format!(
                "FIFO {} → {} channel {}: sends {:?}, receives {:?}",
                key.0, key.1, key.2, s, r
            ));
        }
    }
    errors
}

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
                order.shuffle(&mut rng);
                for &(g, t) in &order {
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
