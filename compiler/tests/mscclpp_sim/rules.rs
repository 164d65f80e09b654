//! Per-GPU rules: chunk counts, channels, thread blocks, operation fields and bounds,
//! barriers, and the ordering of operations inside a thread block.

use super::read::{
    At, Gpu, Op, Plan, Tb, MAX_CHANNEL, MAX_CHANNEL_PER_OPERATION, MAX_DEVICE_SYNCERS,
    MAX_OPERATION,
};
use std::collections::{BTreeMap, BTreeSet};

/// The operations this reader runs; the others are valid for the loader but not modelled.
pub const SIMULATED: [&str; 7] = ["nop", "barrier", "put", "signal", "wait", "copy", "re"];

pub fn check_gpu(plan: &Plan, g: &Gpu, bad: &mut Vec<String>) {
    let at = format!("gpu {}", g.id);
    if g.input_chunks == 0 && g.output_chunks == 0 {
        bad.push(format!(
            "{at}: inputChunks or outputChunks must be greater than 0"
        ));
    }
    let chunks = if g.input_chunks != 0 {
        g.input_chunks
    } else {
        g.output_chunks
    };
    if g.chunk_groups == 0 || chunks % g.chunk_groups.max(1) != 0 {
        bad.push(format!(
            "{at}: chunkGroups {} does not divide its {chunks} chunks",
            g.chunk_groups
        ));
    }
    for c in &g.channels {
        if c.ctype != "memory" && c.ctype != "port" {
            bad.push(format!(
                "{at}: channel type `{}` is not run by this reader",
                c.ctype
            ));
        }
        let mut seen = BTreeSet::new();
        for &p in &c.peers {
            if p >= plan.gpus.len() || p == g.id || !seen.insert(p) {
                bad.push(format!(
                    "{at}: channel connectedTo {p}: not another GPU, or repeated"
                ));
            }
        }
    }
    let mut barriers: BTreeMap<u64, (u64, usize)> = BTreeMap::new();
    for (t, tb) in g.tbs.iter().enumerate() {
        let at = format!("{at} threadblock {t}");
        if tb.id != t {
            bad.push(format!("{at}: id {} (ids must be 0.. in order)", tb.id));
        }
        if tb.ops.len() > MAX_OPERATION {
            bad.push(format!(
                "{at}: {} operations, more than the executor's {MAX_OPERATION}",
                tb.ops.len()
            ));
        }
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        for c in &tb.channels {
            let map = g.channel_map(c.src, c.dst, &c.ctype);
            for &cid in &c.cids {
                if cid >= map.len() {
                    bad.push(format!(
                        "{at}: channel id {cid} of {}->{} {} is past the GPU's {} such channels",
                        c.src,
                        c.dst,
                        c.ctype,
                        map.len()
                    ));
                }
            }
            *counts.entry(c.ctype.as_str()).or_default() += c.cids.len();
        }
        for (t, count) in counts {
            if count > MAX_CHANNEL {
                bad.push(format!(
                    "{at}: {count} {t} channels, more than {MAX_CHANNEL}"
                ));
            }
        }
        for (i, op) in tb.ops.iter().enumerate() {
            check_op(plan, g, tb, op, &format!("{at} op {i} ({})", op.name), bad);
            if let Some((id, n)) = op.barrier {
                let e = barriers.entry(id).or_insert((n, 0));
                if e.0 != n {
                    bad.push(format!(
                        "{at} op {i}: barrier {id} with {n} thread blocks, elsewhere {}",
                        e.0
                    ));
                }
                e.1 += 1;
            }
        }
        check_sync(tb, &at, bad);
    }
    for (id, (n, calls)) in barriers {
        if id >= MAX_DEVICE_SYNCERS {
            bad.push(format!(
                "{at}: barrier id {id}, but there are {MAX_DEVICE_SYNCERS} device syncers"
            ));
        }
        if n as usize != calls {
            bad.push(format!(
                "{at}: barrier {id} waits for {n} thread blocks but is reached {calls} times"
            ));
        }
    }
}

fn in_bounds(g: &Gpu, (buf, off): At, cnt: u64, what: &str, at: &str, bad: &mut Vec<String>) {
    if off + cnt > g.size(buf) {
        bad.push(format!(
            "{at}: {what} {buf}[{off}..{}] is past gpu {}'s {} {buf} chunks",
            off + cnt,
            g.id,
            g.size(buf)
        ));
    }
}

fn check_op(plan: &Plan, g: &Gpu, tb: &Tb, op: &Op, at: &str, bad: &mut Vec<String>) {
    if !SIMULATED.contains(&op.name.as_str()) {
        bad.push(format!("{at}: a valid operation this reader does not run"));
        return;
    }
    let cnt = op.cnt.unwrap_or(0);
    let needs = |ok: bool, what: &str, bad: &mut Vec<String>| {
        if !ok {
            bad.push(format!("{at}: needs {what}"));
        }
    };
    match op.name.as_str() {
        "put" | "signal" | "wait" => {
            let (key, cids) = if op.name == "wait" {
                (op.i_buff, &op.i_cids)
            } else {
                (op.o_buff, &op.o_cids)
            };
            let Some(key) = key else {
                return needs(false, "channels (o_cids/i_cids with o_buff/i_buff)", bad);
            };
            let ctype = op.ctype.clone().unwrap_or_default();
            needs(
                ctype == "memory" || ctype == "port",
                "ctype memory or port",
                bad,
            );
            needs(
                !cids.is_empty() && cids.len() <= MAX_CHANNEL_PER_OPERATION,
                "1 to 8 channels",
                bad,
            );
            for &(id, off) in cids {
                let Some((peer, _)) = g.resolve(tb, key, &ctype, id) else {
                    bad.push(format!(
                        "{at}: channel {id} of {}->{} is not one of the thread block's",
                        key.0, key.1
                    ));
                    continue;
                };
                if op.name == "put" {
                    in_bounds(&plan.gpus[peer], (key.1, off), cnt, "remote", at, bad);
                }
            }
            if op.name == "put" {
                needs(cnt > 0, "cnt", bad);
                needs(
                    op.srcs.len() >= cids.len(),
                    "a source per channel (srcs)",
                    bad,
                );
                for &s in &op.srcs {
                    if s.0 != key.0 {
                        bad.push(format!(
                            "{at}: reads {} but its channel reads {} (a channel's source is fixed)",
                            s.0, key.0
                        ));
                    }
                    in_bounds(g, s, cnt, "source", at, bad);
                }
            }
        }
        "copy" | "re" => {
            let (Some(src), Some(dst)) = (op.src, op.dst) else {
                return needs(false, "srcbuff/srcoff and dstbuff/dstoff", bad);
            };
            needs(cnt > 0, "cnt", bad);
            in_bounds(g, src, cnt, "source", at, bad);
            in_bounds(g, dst, cnt, "destination", at, bad);
            if dst.0 == 'i' && !plan.inplace {
                bad.push(format!("{at}: writes the input of an out-of-place plan"));
            }
            if op.name == "re" {
                needs(
                    !op.srcs.is_empty() && op.srcs.len() <= MAX_CHANNEL_PER_OPERATION,
                    "1 to 8 srcs",
                    bad,
                );
                if op.srcs.iter().any(|s| s.0 != op.srcs[0].0) {
                    bad.push(format!(
                        "{at}: srcs in different buffers (the executor takes the first's)"
                    ));
                }
                for &s in &op.srcs {
                    in_bounds(g, s, cnt, "operand", at, bad);
                }
            }
        }
        _ => {}
    }
}

/// The chunks an operation reads and writes on its own GPU.
pub fn touches(op: &Op) -> (Vec<At>, Vec<At>) {
    let cnt = op.cnt.unwrap_or(0);
    let span = |(b, o): At| (o..o + cnt).map(move |x| (b, x));
    match op.name.as_str() {
        "put" => (op.srcs.iter().flat_map(|&s| span(s)).collect(), Vec::new()),
        "copy" | "re" => {
            let mut reads: Vec<At> = op.src.into_iter().flat_map(span).collect();
            if op.name == "re" {
                reads.extend(op.srcs.iter().flat_map(|&s| span(s)));
            }
            (reads, op.dst.into_iter().flat_map(span).collect())
        }
        _ => (Vec::new(), Vec::new()),
    }
}

/// Inside a thread block every thread runs every operation on its own share of the data, and
/// only `nop` or `barrier` make them meet: a `signal` after a `put`, a read after a `wait`, and
/// two operations on the same chunk (one writing) need one in between.
fn check_sync(tb: &Tb, at: &str, bad: &mut Vec<String>) {
    let (mut read, mut written) = (BTreeSet::new(), BTreeSet::new());
    let (mut put, mut waited) = (false, false);
    for (i, op) in tb.ops.iter().enumerate() {
        let (r, w) = touches(op);
        let problem = match op.name.as_str() {
            "nop" | "barrier" => {
                (read, written, put, waited) = (BTreeSet::new(), BTreeSet::new(), false, false);
                continue;
            }
            "signal" if put => Some("signals a put that other threads may not have finished"),
            "wait" => {
                waited = true;
                None
            }
            "put" | "copy" | "re" if waited => {
                Some("reads what a wait guards before all threads have waited")
            }
            "put" | "copy" | "re"
                if r.iter().any(|l| written.contains(l))
                    || w.iter().any(|l| written.contains(l) || read.contains(l)) =>
            {
                Some("touches a chunk an earlier operation of the block may still be using")
            }
            _ => None,
        };
        if let Some(p) = problem {
            bad.push(format!(
                "{at} op {i} ({}): {p}; a nop must come between",
                op.name
            ));
        }
        put |= op.name == "put";
        read.extend(r);
        written.extend(w);
    }
}

/// A scratch chunk that receives a put receives exactly one, and nothing local writes it: a
/// second write could land before the receiver has read the first.
pub fn check_scratch_writes(plan: &Plan, bad: &mut Vec<String>) {
    let mut remote: BTreeMap<(usize, At), usize> = BTreeMap::new();
    for g in &plan.gpus {
        for tb in &g.tbs {
            for op in tb.ops.iter().filter(|o| o.name == "put") {
                let (Some(key), Some(ctype)) = (op.o_buff, op.ctype.as_deref()) else {
                    continue;
                };
                for &(id, off) in &op.o_cids {
                    if let Some((peer, _)) = g.resolve(tb, key, ctype, id) {
                        for x in off..off + op.cnt.unwrap_or(0) {
                            *remote.entry((peer, (key.1, x))).or_default() += 1;
                        }
                    }
                }
            }
        }
    }
    for (&(peer, (b, x)), &count) in &remote {
        if count > 1 {
            bad.push(format!(
                "gpu {peer} {b}[{x}] receives {count} puts: a later one may overwrite it before it is read"
            ));
        }
        let local = plan.gpus[peer]
            .tbs
            .iter()
            .flat_map(|t| t.ops.iter())
            .any(|o| touches(o).1.contains(&(b, x)));
        if local {
            bad.push(format!(
                "gpu {peer} {b}[{x}] receives a put and is also written locally"
            ));
        }
    }
}
