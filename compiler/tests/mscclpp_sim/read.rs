//! Reads an MSCCL++ v0.7.0 execution plan the way its loader (`execution_plan.cc`) does, into
//! this reader's own structures, and checks the rules the loader and executor rely on.

use serde_json::{Map, Value};
use std::collections::{BTreeMap, BTreeSet};

/// Op names the v0.7.0 loader knows (`getOpType`); anything else makes it throw.
pub const OP_NAMES: [&str; 21] = [
    "nop", "barrier", "put", "pws", "pwsf", "get", "copy", "signal", "wait", "flush", "re", "rs",
    "rrc", "rrcs", "ppkt", "rppkt", "rspkt", "cpkt", "tpkt", "rpkt", "glres",
];
/// Operations per thread block (`MAX_OPERATION`).
pub const MAX_OPERATION: usize = 64;
/// Memory (or port) channels per thread block (`MAX_CHANNEL`).
pub const MAX_CHANNEL: usize = 16;
/// Channels per operation (`MAX_CHANNEL_PER_OPERATION`).
pub const MAX_CHANNEL_PER_OPERATION: usize = 8;
/// Device syncers (`MAX_DEVICE_SYNCERS`).
pub const MAX_DEVICE_SYNCERS: u64 = 16;

/// A buffer and chunk offset.
pub type At = (char, u64);

/// A channel a GPU declares.
#[derive(Clone, Debug)]
pub struct Channel {
    pub src: char,
    pub dst: char,
    pub ctype: String,
    pub peers: Vec<usize>,
}

/// A thread block's use of the GPU's channels of one key.
#[derive(Clone, Debug)]
pub struct TbChannel {
    pub src: char,
    pub dst: char,
    pub ctype: String,
    pub cids: Vec<usize>,
}

/// One operation, with every field the loader may read.
#[derive(Clone, Debug, Default)]
pub struct Op {
    pub name: String,
    pub ctype: Option<String>,
    pub o_buff: Option<(char, char)>,
    pub o_cids: Vec<(usize, u64)>,
    pub i_buff: Option<(char, char)>,
    pub i_cids: Vec<(usize, u64)>,
    pub srcs: Vec<At>,
    pub src: Option<At>,
    pub dst: Option<At>,
    pub cnt: Option<u64>,
    pub barrier: Option<(u64, u64)>,
}

#[derive(Clone, Debug)]
pub struct Tb {
    pub id: usize,
    pub ops: Vec<Op>,
    pub channels: Vec<TbChannel>,
}

#[derive(Clone, Debug)]
pub struct Gpu {
    pub id: usize,
    pub input_chunks: u64,
    pub output_chunks: u64,
    pub scratch_chunks: u64,
    pub chunk_groups: u64,
    pub tbs: Vec<Tb>,
    pub channels: Vec<Channel>,
}

#[derive(Clone, Debug)]
pub struct Plan {
    pub name: String,
    pub collective: String,
    pub protocol: String,
    pub inplace: bool,
    pub gpus: Vec<Gpu>,
}

fn get<'a>(obj: &'a Map<String, Value>, key: &str, at: &str) -> Result<&'a Value, String> {
    obj.get(key).ok_or_else(|| format!("{at}: missing `{key}`"))
}

fn obj<'a>(v: &'a Value, at: &str) -> Result<&'a Map<String, Value>, String> {
    v.as_object().ok_or_else(|| format!("{at}: not an object"))
}

fn uint(obj: &Map<String, Value>, key: &str, at: &str) -> Result<u64, String> {
    get(obj, key, at)?
        .as_u64()
        .ok_or_else(|| format!("{at}: `{key}` is not an unsigned integer"))
}

fn text(obj: &Map<String, Value>, key: &str, at: &str) -> Result<String, String> {
    get(obj, key, at)?
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| format!("{at}: `{key}` is not a string"))
}

fn list<'a>(obj: &'a Map<String, Value>, key: &str, at: &str) -> Result<&'a Vec<Value>, String> {
    get(obj, key, at)?
        .as_array()
        .ok_or_else(|| format!("{at}: `{key}` is not an array"))
}

/// A buffer letter (`convertToBufferType`).
fn buffer(obj: &Map<String, Value>, key: &str, at: &str) -> Result<char, String> {
    match text(obj, key, at)?.as_str() {
        "i" => Ok('i'),
        "o" => Ok('o'),
        "s" => Ok('s'),
        other => Err(format!(
            "{at}: `{key}` is `{other}`, not a buffer (i, o or s)"
        )),
    }
}

/// A channel type (`convertToChannelType`, v0.7.0 spellings and their older aliases).
fn ctype(obj: &Map<String, Value>, key: &str, at: &str) -> Result<String, String> {
    let t = text(obj, key, at)?;
    match t.as_str() {
        "memory" | "sm" => Ok("memory".into()),
        "port" | "proxy" => Ok("port".into()),
        "none" | "nvls" => Ok(t),
        other => Err(format!("{at}: `{key}` is `{other}`, not a channel type")),
    }
}

fn pair(obj: &Map<String, Value>, key: &str, at: &str) -> Result<(char, char), String> {
    let o = self::obj(get(obj, key, at)?, at)?;
    let at = format!("{at} {key}");
    Ok((buffer(o, "src", &at)?, buffer(o, "dst", &at)?))
}

fn cids(obj: &Map<String, Value>, key: &str, at: &str) -> Result<Vec<(usize, u64)>, String> {
    list(obj, key, at)?
        .iter()
        .map(|c| {
            let c = self::obj(c, at)?;
            Ok((uint(c, "id", at)? as usize, uint(c, "off", at)?))
        })
        .collect()
}

fn read_op(v: &Value, at: &str) -> Result<Op, String> {
    let o = obj(v, at)?;
    let name = text(o, "name", at)?;
    if !OP_NAMES.contains(&name.as_str()) {
        return Err(format!(
            "{at}: `{name}` is not an operation of MSCCL++ v0.7.0"
        ));
    }
    let mut op = Op {
        name,
        ..Op::default()
    };
    if o.contains_key("ctype") {
        op.ctype = Some(ctype(o, "ctype", at)?);
    }
    if o.contains_key("o_cids") {
        op.o_buff = Some(pair(o, "o_buff", at)?);
        op.o_cids = cids(o, "o_cids", at)?;
    }
    if o.contains_key("i_cids") {
        op.i_buff = Some(pair(o, "i_buff", at)?);
        op.i_cids = cids(o, "i_cids", at)?;
    }
    if o.contains_key("srcs") {
        for s in list(o, "srcs", at)? {
            let s = obj(s, at)?;
            op.srcs.push((buffer(s, "buff", at)?, uint(s, "off", at)?));
        }
    }
    if o.contains_key("srcbuff") || o.contains_key("srcoff") {
        op.src = Some((buffer(o, "srcbuff", at)?, uint(o, "srcoff", at)?));
    }
    if o.contains_key("dstbuff") || o.contains_key("dstoff") {
        op.dst = Some((buffer(o, "dstbuff", at)?, uint(o, "dstoff", at)?));
    }
    if o.contains_key("cnt") {
        op.cnt = Some(uint(o, "cnt", at)?);
    }
    if op.name == "barrier" {
        op.barrier = Some((uint(o, "barrier_id", at)?, uint(o, "nthread_blocks", at)?));
    }
    Ok(op)
}

fn read_tb(v: &Value, at: &str) -> Result<Tb, String> {
    let o = obj(v, at)?;
    let id = uint(o, "id", at)? as usize;
    let at = format!("{at} (id {id})");
    let ops = list(o, "ops", &at)?
        .iter()
        .enumerate()
        .map(|(i, op)| read_op(op, &format!("{at} op {i}")))
        .collect::<Result<_, _>>()?;
    let mut channels = Vec::new();
    for c in list(o, "channels", &at)? {
        let c = obj(c, &at)?;
        channels.push(TbChannel {
            src: buffer(c, "src", &at)?,
            dst: buffer(c, "dst", &at)?,
            ctype: ctype(c, "ctype", &at)?,
            cids: list(c, "cids", &at)?
                .iter()
                .map(|x| x.as_u64().map(|x| x as usize))
                .collect::<Option<_>>()
                .ok_or_else(|| format!("{at}: a channel id is not an unsigned integer"))?,
        });
    }
    Ok(Tb { id, ops, channels })
}

fn read_gpu(v: &Value, i: usize) -> Result<Gpu, String> {
    let at = format!("gpus[{i}]");
    let o = obj(v, &at)?;
    let mut channels = Vec::new();
    for c in list(o, "channels", &at)? {
        let c = obj(c, &at)?;
        channels.push(Channel {
            src: buffer(c, "srcbuff", &at)?,
            dst: buffer(c, "dstbuff", &at)?,
            ctype: ctype(c, "type", &at)?,
            peers: list(c, "connectedTo", &at)?
                .iter()
                .map(|x| x.as_u64().map(|x| x as usize))
                .collect::<Option<_>>()
                .ok_or_else(|| format!("{at}: a peer is not an unsigned integer"))?,
        });
    }
    let tbs = list(o, "threadblocks", &at)?
        .iter()
        .enumerate()
        .map(|(t, tb)| read_tb(tb, &format!("{at} threadblock {t}")))
        .collect::<Result<_, _>>()?;
    Ok(Gpu {
        id: uint(o, "id", &at)? as usize,
        input_chunks: uint(o, "inputChunks", &at)?,
        output_chunks: uint(o, "outputChunks", &at)?,
        scratch_chunks: uint(o, "scratchChunks", &at)?,
        chunk_groups: uint(o, "chunkGroups", &at)?,
        tbs,
        channels,
    })
}

/// Reads the plan, failing where the loader would (a missing key, a wrong type, an unknown
/// name).
pub fn parse(json: &str) -> Result<Plan, String> {
    let v: Value = serde_json::from_str(json).map_err(|e| format!("not JSON: {e}"))?;
    let o = obj(&v, "plan")?;
    let inplace = get(o, "inplace", "plan")?
        .as_bool()
        .ok_or("plan: `inplace` is not a boolean")?;
    Ok(Plan {
        name: text(o, "name", "plan")?,
        collective: text(o, "collective", "plan")?,
        protocol: text(o, "protocol", "plan")?,
        inplace,
        gpus: list(o, "gpus", "plan")?
            .iter()
            .enumerate()
            .map(|(i, g)| read_gpu(g, i))
            .collect::<Result<_, _>>()?,
    })
}

impl Gpu {
    /// The chunks a buffer holds.
    pub fn size(&self, buf: char) -> u64 {
        match buf {
            'i' => self.input_chunks,
            'o' => self.output_chunks,
            _ => self.scratch_chunks,
        }
    }

    /// The GPU's channels of one key, flattened as the loader's `channelMap`: per declared
    /// channel in order, per peer in order.
    pub fn channel_map(&self, src: char, dst: char, ctype: &str) -> Vec<usize> {
        self.channels
            .iter()
            .filter(|c| c.src == src && c.dst == dst && c.ctype == ctype)
            .flat_map(|c| c.peers.iter().copied())
            .collect()
    }

    /// The peer of channel `id` of an operation of thread block `tb` (the loader's
    /// `channelIndexes[key][id]`), with that channel's ordinal among the GPU's channels to the
    /// peer (which the executor pairs with the peer's channel of the same ordinal).
    pub fn resolve(
        &self,
        tb: &Tb,
        key: (char, char),
        ctype: &str,
        id: usize,
    ) -> Option<(usize, usize)> {
        let cid = *tb
            .channels
            .iter()
            .filter(|c| (c.src, c.dst) == key && c.ctype == ctype)
            .flat_map(|c| c.cids.iter())
            .nth(id)?;
        let map = self.channel_map(key.0, key.1, ctype);
        let peer = *map.get(cid)?;
        Some((peer, self.ordinal(ctype, key, cid)))
    }

    /// The ordinal, among this GPU's channels of `ctype` to the same peer, of the `cid`-th
    /// channel of `key` (the order in which the executor builds their semaphores).
    fn ordinal(&self, ctype: &str, key: (char, char), cid: usize) -> usize {
        let mut seen = 0;
        let mut before: BTreeMap<usize, usize> = BTreeMap::new();
        for c in self.channels.iter().filter(|c| c.ctype == ctype) {
            for &p in &c.peers {
                if (c.src, c.dst) == key {
                    if seen == cid {
                        return before.get(&p).copied().unwrap_or(0);
                    }
                    seen += 1;
                }
                *before.entry(p).or_default() += 1;
            }
        }
        0
    }

    /// The keys of this GPU's channels of `ctype` to `peer`, in semaphore order.
    pub fn keys_to(&self, ctype: &str, peer: usize) -> Vec<(char, char)> {
        let mut keys = Vec::new();
        for c in self.channels.iter().filter(|c| c.ctype == ctype) {
            for &p in &c.peers {
                if p == peer {
                    keys.push((c.src, c.dst));
                }
            }
        }
        keys
    }
}

/// Every rule of the plan's shape that the loader or executor relies on; empty when none is
/// broken.
pub fn check_structure(plan: &Plan) -> Vec<String> {
    let mut bad = Vec::new();
    if plan.protocol != "Simple" {
        bad.push(format!(
            "protocol `{}`: this reader runs Simple plans only",
            plan.protocol
        ));
    }
    if !["allreduce", "reducescatter", "allgather"].contains(&plan.collective.as_str()) {
        bad.push(format!(
            "collective `{}` is not one this reader checks",
            plan.collective
        ));
    }
    let n = plan.gpus.len();
    for (i, g) in plan.gpus.iter().enumerate() {
        if g.id != i {
            bad.push(format!(
                "gpus[{i}] has id {}: ids must be 0..{n} in order",
                g.id
            ));
        }
    }
    for g in &plan.gpus {
        super::rules::check_gpu(plan, g, &mut bad);
    }
    // Both ends of a pair declare matching channels: the executor builds their semaphores in
    // declaration order and pairs the k-th of each side.
    for a in &plan.gpus {
        for b in &plan.gpus {
            for t in ["memory", "port"] {
                if a.id < b.id && a.keys_to(t, b.id) != b.keys_to(t, a.id) {
                    bad.push(format!(
                        "gpu {} and gpu {}: their {t} channels to each other differ ({:?} and \
                         {:?}); the semaphores would pair the wrong channels",
                        a.id,
                        b.id,
                        a.keys_to(t, b.id),
                        b.keys_to(t, a.id)
                    ));
                }
            }
        }
    }
    super::rules::check_scratch_writes(plan, &mut bad);
    bad
}

/// The set of ranks, as a helper for messages.
pub fn ranks(set: &BTreeSet<usize>) -> String {
    format!("{set:?}")
}
