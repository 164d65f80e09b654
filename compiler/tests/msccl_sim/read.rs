//! Reading an algorithm file the way the runtime's parser does, and its structural rules.

use std::collections::{BTreeSet, HashMap};

/// Limits the runtimes enforce.
pub const MAX_STEPS: usize = 64;
const MAX_COUNT: i64 = 72;
const MAX_DEPID: i64 = 127;
/// `MAXCHANNELS` of msccl-executor-nccl: channels 0 to 31 (RCCL allows 128).
const MAX_CHANNELS: i64 = 32;
/// Thread blocks of one GPU sending (or receiving) on one channel.
const MAX_TBS_PER_CHANNEL: usize = 32;
/// XML elements the reader keeps for one rank.
const MAX_ELEMENTS: usize = 4096;

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
    super::lint::lint(text)?;
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
pub struct Kind {
    pub sends: bool,
    pub receives: bool,
    pub reads_src: bool,
    pub writes_dst: bool,
}

pub fn kind(ty: &str) -> Option<Kind> {
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
pub fn real_sizes(algo: &Algo) -> (i64, i64) {
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
    if algo.nchannels < 1 || algo.nchannels > MAX_CHANNELS {
        errors.push(format!(
            "nchannels={} outside 1..={MAX_CHANNELS}, the channels msccl-executor-nccl has",
            algo.nchannels
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
        let elements = 1
            + algo.gpus.len()
            + gpu.tbs.len()
            + gpu.tbs.iter().map(|t| t.steps.len()).sum::<usize>();
        if elements > MAX_ELEMENTS {
            errors.push(format!(
                "gpu {g}: {elements} XML elements for this rank; the reader keeps {MAX_ELEMENTS}"
            ));
        }
        let mut send_chan = BTreeSet::new();
        let mut recv_chan = BTreeSet::new();
        let mut senders: HashMap<i64, usize> = HashMap::new();
        let mut receivers: HashMap<i64, usize> = HashMap::new();
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
            if tb.chan >= MAX_CHANNELS {
                errors.push(format!(
                    "{at}: channel {} beyond 31; the parser accepts 32 but then writes past its \
                     32-entry channel array",
                    tb.chan
                ));
            } else if tb.chan < 0 || tb.chan >= algo.nchannels {
                errors.push(format!("{at}: channel {} outside nchannels", tb.chan));
            }
            if tb.send >= 0 {
                *senders.entry(tb.chan).or_default() += 1;
                if !send_chan.insert((tb.send, tb.chan)) {
                    errors.push(format!(
                        "{at}: a second thread block sends to {} on channel {}",
                        tb.send, tb.chan
                    ));
                }
            }
            if tb.recv >= 0 {
                *receivers.entry(tb.chan).or_default() += 1;
                if !recv_chan.insert((tb.recv, tb.chan)) {
                    errors.push(format!(
                        "{at}: a second thread block receives from {} on channel {}",
                        tb.recv, tb.chan
                    ));
                }
            }
            check_steps(algo, gpu, tb, &mut errors);
            for st in &tb.steps {
                let Some(k) = kind(&st.ty) else { continue };
                if k.sends {
                    sent.entry((g, tb.send, tb.chan)).or_default().push(st.cnt);
                }
                if k.receives {
                    received
                        .entry((tb.recv, g, tb.chan))
                        .or_default()
                        .push(st.cnt);
                }
            }
        }
        for (counts, what) in [(senders, "send"), (receivers, "receive")] {
            let mut counts: Vec<_> = counts.into_iter().collect();
            counts.sort();
            for (chan, n) in counts {
                if n > MAX_TBS_PER_CHANNEL {
                    errors.push(format!(
                        "gpu {g}: {n} thread blocks {what} on channel {chan}; the runtime \
                         allows {MAX_TBS_PER_CHANNEL}"
                    ));
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
    if errors.is_empty() {
        errors.extend(super::order::cycle(algo));
    }
    errors
}

/// The rules on one thread block's steps: indices, limits, dependencies, bounds, peers.
fn check_steps(algo: &Algo, gpu: &Gpu, tb: &Tb, errors: &mut Vec<String>) {
    let g = gpu.id;
    let at = format!("gpu {g} tb {}", tb.id);
    let _ = algo;
    let mut after_nop = false;
    for (si, st) in tb.steps.iter().enumerate() {
        let at = format!("{at} step {si}");
        if st.s != si as i64 {
            errors.push(format!("{at}: s={} out of order", st.s));
        }
        if st.s >= MAX_STEPS as i64 {
            errors.push(format!(
                "{at}: s={} but the runtimes stop at step {}",
                st.s,
                MAX_STEPS - 1
            ));
        }
        let Some(k) = kind(&st.ty) else {
            errors.push(format!("{at}: unknown type {}", st.ty));
            continue;
        };
        if st.depid >= 0 {
            match gpu.tbs.get(st.depid as usize) {
                _ if st.depid == tb.id => errors.push(format!("{at}: waits for itself")),
                _ if st.depid > MAX_DEPID => errors.push(format!(
                    "{at}: depid {} beyond {MAX_DEPID} (the runtime keeps it in 8 bits)",
                    st.depid
                )),
                None => errors.push(format!("{at}: depid {} does not exist", st.depid)),
                Some(other) => match other.steps.get(st.deps as usize) {
                    // The runtime sets a thread block's flag only at steps it executes.
                    Some(target) if st.deps >= 0 && target.ty == "nop" => errors.push(format!(
                        "{at}: waits for tb {} step {}, a nop, which never signals",
                        st.depid, st.deps
                    )),
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
        if k.sends && tb.send < 0 {
            errors.push(format!("{at}: sends without a send peer"));
        }
        if k.receives && tb.recv < 0 {
            errors.push(format!("{at}: receives without a recv peer"));
        }
    }
}
