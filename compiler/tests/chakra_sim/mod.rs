//! An independent reader and replayer of Chakra execution traces, written from the schema
//! (`compiler/proto/chakra/et_def.proto`, parsed here, never topoc's `prost` declarations) and
//! from what Chakra's feeder and ASTRA-sim's custom collectives do with a trace, not from
//! topoc's emitter.
//!
//! - [`read::read_rank`] decodes one file and checks what the feeder and ASTRA-sim rely on.
//! - [`check_set`] then matches every send with exactly one receive on its peer, with the same
//!   tag and size (ASTRA-sim pairs messages by source, destination and tag), and replays the
//!   set: a node runs once every node it depends on has run (and, for a receive, once its
//!   message was sent), in two opposite orders of the ready nodes. Values are symbolic: which
//!   ranks' inputs a chunk combines, and whether it was divided. The `topoc_*` attributes say
//!   which buffer and chunks a node touches. Each order must end with the collective's result.
#![allow(dead_code)]

pub mod proto;
pub mod read;

use proto::Proto;
use read::EtNode;
use schedule_ir::{Collective, NodeKind, Phase, ReduceOp, Schedule};
use std::collections::{BTreeMap, BTreeSet};

/// The vendored schema.
pub fn schema() -> Proto {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/proto/chakra/et_def.proto");
    let text = std::fs::read_to_string(path).unwrap_or_default();
    Proto::parse(&text).unwrap_or_else(|e| panic!("the vendored schema reads: {e}"))
}

/// What the reader must find for `phase` (chunked for the size exported).
pub fn expect(schedule: &Schedule, phase: &Phase) -> Expect {
    let ranks: Vec<Option<u32>> = {
        let mut next = 0;
        schedule
            .machine
            .nodes
            .iter()
            .map(|n| {
                (n.kind == NodeKind::Compute).then(|| {
                    next += 1;
                    next - 1
                })
            })
            .collect()
    };
    Expect {
        kind: match phase.collective {
            Collective::AllReduce => Kind::AllReduce,
            Collective::ReduceScatter => Kind::ReduceScatter,
            Collective::AllGather => Kind::AllGather,
            other => panic!("{other} is not exported"),
        },
        mean: phase.op == ReduceOp::Mean && phase.collective != Collective::AllGather,
        chunk_bytes: (0..phase.chunks.len())
            .map(|c| phase.chunk_bytes(schedule_ir::ChunkId::new(c)))
            .collect(),
        owners: phase
            .chunks
            .iter()
            .map(|c| c.owner.and_then(|o| ranks[o.index()]))
            .collect(),
    }
}

/// What the set must compute.
#[derive(Clone, Debug)]
pub struct Expect {
    pub kind: Kind,
    /// Whether every result must have been divided once (op mean).
    pub mean: bool,
    /// Bytes of each chunk, by chunk index.
    pub chunk_bytes: Vec<u64>,
    /// The rank owning each chunk (reduce-scatter, allgather).
    pub owners: Vec<Option<u32>>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    AllReduce,
    ReduceScatter,
    AllGather,
}

/// A symbolic value: how many times each rank's input is in it, and whether it was divided.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Val {
    counts: Vec<u32>,
    scaled: bool,
}

/// What a checked set holds.
#[derive(Debug, Default)]
pub struct Stats {
    pub nodes: usize,
    pub messages: usize,
    pub bytes_sent: u64,
}

type Key = (u32, u32, i128);

/// Reads and checks a whole set of files (rank `r`'s file is `files[r]`); see the module doc.
pub fn check_set(proto: &Proto, files: &[Vec<u8>], expect: &Expect) -> Result<Stats, String> {
    let ranks = u32::try_from(files.len()).map_err(|_| "too many ranks")?;
    let mut set = Vec::new();
    for (r, bytes) in files.iter().enumerate() {
        set.push(
            read::read_rank(proto, bytes, r as u32, ranks).map_err(|e| format!("rank {r}: {e}"))?,
        );
    }
    let mut sends: BTreeMap<Key, (i128, usize, usize)> = BTreeMap::new();
    let mut recvs: BTreeMap<Key, (i128, usize, usize)> = BTreeMap::new();
    let mut stats = Stats::default();
    for (r, nodes) in set.iter().enumerate() {
        stats.nodes += nodes.len();
        for (i, n) in nodes.iter().enumerate() {
            let (map, src, dst) = match n.ty.as_str() {
                "COMM_SEND_NODE" => (&mut sends, r as i128, n.int("comm_dst", "int32_val")?),
                "COMM_RECV_NODE" => (&mut recvs, n.int("comm_src", "int32_val")?, r as i128),
                _ => continue,
            };
            let size = n.int("comm_size", "int64_val")?;
            let chunks: u64 = n
                .list("topoc_chunks")?
                .iter()
                .map(|&c| {
                    usize::try_from(c)
                        .ok()
                        .and_then(|c| expect.chunk_bytes.get(c))
                        .copied()
                })
                .sum::<Option<u64>>()
                .ok_or(format!("rank {r} node {}: a chunk out of range", n.id))?;
            if i128::from(chunks) != size {
                return Err(format!(
                    "rank {r} node {}: comm_size {size} but its chunks hold {chunks} bytes",
                    n.id
                ));
            }
            let key = (src as u32, dst as u32, n.int("comm_tag", "int32_val")?);
            if map.insert(key, (size, r, i)).is_some() {
                return Err(format!(
                    "two {}s with source, destination and tag {key:?}",
                    n.ty
                ));
            }
        }
    }
    for (key, (size, r, i)) in &sends {
        match recvs.get(key) {
            Some((s, _, _)) if s == size => {}
            Some((s, _, _)) => {
                return Err(format!("send {key:?} of {size} B meets a receive of {s} B"));
            }
            None => {
                return Err(format!(
                    "rank {r} node {}: send {key:?} has no matching receive",
                    set[*r][*i].id
                ))
            }
        }
        stats.messages += 1;
        stats.bytes_sent += *size as u64;
    }
    if let Some((key, _)) = recvs.iter().find(|(k, _)| !sends.contains_key(k)) {
        return Err(format!("receive {key:?} has no matching send"));
    }
    for last_first in [false, true] {
        replay(&set, &sends, &recvs, expect, last_first).map_err(|e| {
            format!(
                "replay ({} ready node first): {e}",
                if last_first { "last" } else { "first" }
            )
        })?;
    }
    Ok(stats)
}

/// Runs the set once: whenever several nodes are ready, the one with the lowest (or, with
/// `last_first`, the highest) position in its file, then rank, goes first.
fn replay(
    set: &[Vec<EtNode>],
    sends: &BTreeMap<Key, (i128, usize, usize)>,
    recvs: &BTreeMap<Key, (i128, usize, usize)>,
    expect: &Expect,
    last_first: bool,
) -> Result<(), String> {
    let ranks = set.len();
    let mut waiting: Vec<Vec<usize>> = Vec::new();
    let mut users: Vec<Vec<Vec<usize>>> = Vec::new();
    for nodes in set {
        let at: BTreeMap<u64, usize> = nodes.iter().enumerate().map(|(i, n)| (n.id, i)).collect();
        let mut u = vec![Vec::new(); nodes.len()];
        let mut w = vec![0; nodes.len()];
        for (i, n) in nodes.iter().enumerate() {
            for d in &n.data_deps {
                u[at[d]].push(i);
            }
            w[i] = n.data_deps.len() + usize::from(n.ty == "COMM_RECV_NODE");
        }
        waiting.push(w);
        users.push(u);
    }
    let mut state: Vec<BTreeMap<(i64, i64), Val>> = (0..ranks)
        .map(|r| {
            (0..expect.chunk_bytes.len() as i64)
                .map(|c| {
                    let mut counts = vec![0; ranks];
                    counts[r] = 1;
                    (
                        (0, c),
                        Val {
                            counts,
                            scaled: false,
                        },
                    )
                })
                .collect()
        })
        .collect();
    let mut messages: BTreeMap<Key, Vec<Val>> = BTreeMap::new();
    let mut staged: BTreeMap<(usize, u64), Vec<Val>> = BTreeMap::new();
    let mut ready: BTreeSet<(usize, usize)> = BTreeSet::new();
    for (r, w) in waiting.iter().enumerate() {
        ready.extend(
            w.iter()
                .enumerate()
                .filter(|(_, &k)| k == 0)
                .map(|(i, _)| (i, r)),
        );
    }
    let mut ran = 0;
    let total: usize = set.iter().map(Vec::len).sum();
    while let Some((i, r)) = if last_first {
        ready.pop_last()
    } else {
        ready.pop_first()
    } {
        ran += 1;
        let n = &set[r][i];
        let key_of = |src: i128, dst: i128| -> Result<Key, String> {
            Ok((src as u32, dst as u32, n.int("comm_tag", "int32_val")?))
        };
        let mut wake = users[r][i].clone();
        let buffer = match n.attrs.get("topoc_buffer") {
            Some(read::Attr::Int(_, b)) => *b as i64,
            _ => return Err(format!("rank {r} node {}: no topoc_buffer", n.id)),
        };
        let chunks = n.list("topoc_chunks")?.to_vec();
        let here = |b: i64, c: i64, st: &BTreeMap<(i64, i64), Val>| -> Result<Val, String> {
            st.get(&(b, c)).cloned().ok_or(format!(
                "rank {r} node {} ({}) reads chunk {c} of buffer {b}, which holds no value yet",
                n.id, n.name
            ))
        };
        let combine = |a: Val, b: &Val| -> Result<Val, String> {
            if a.scaled || b.scaled {
                return Err(format!("rank {r} node {}: combines a divided mean", n.id));
            }
            let counts = a.counts.iter().zip(&b.counts).map(|(x, y)| x + y).collect();
            Ok(Val {
                counts,
                scaled: false,
            })
        };
        let st = &mut state[r];
        match n.string("topoc_op")? {
            "send" => {
                let key = key_of(r as i128, n.int("comm_dst", "int32_val")?)?;
                let payload = chunks
                    .iter()
                    .map(|&c| here(buffer, c, st))
                    .collect::<Result<_, _>>()?;
                messages.insert(key, payload);
                let (_, rr, ri) = recvs[&key];
                waiting[rr][ri] -= 1;
                if waiting[rr][ri] == 0 {
                    ready.insert((ri, rr));
                }
            }
            op @ ("recv" | "recv-staged") => {
                let key = key_of(n.int("comm_src", "int32_val")?, r as i128)?;
                let payload = messages
                    .remove(&key)
                    .ok_or("a receive ran before its send")?;
                if op == "recv" {
                    for (&c, v) in chunks.iter().zip(payload) {
                        st.insert((buffer, c), v);
                    }
                } else {
                    staged.insert((r, n.id), payload);
                }
            }
            "combine-received" => {
                let recv = match n.attrs.get("topoc_staged") {
                    Some(read::Attr::Int(_, v)) => *v as u64,
                    _ => return Err(format!("rank {r} node {}: no topoc_staged", n.id)),
                };
                if !n.data_deps.contains(&recv) {
                    return Err(format!(
                        "rank {r} node {}: does not wait for its receive",
                        n.id
                    ));
                }
                let payload = staged.remove(&(r, recv)).ok_or(format!(
                    "rank {r} node {}: its receive {recv} staged nothing",
                    n.id
                ))?;
                for (&c, v) in chunks.iter().zip(&payload) {
                    let cur = here(buffer, c, st)?;
                    st.insert((buffer, c), combine(cur, v)?);
                }
            }
            op @ ("reduce" | "copy") => {
                let src = match n.attrs.get("topoc_src_buffer") {
                    Some(read::Attr::Int(_, b)) => *b as i64,
                    _ => return Err(format!("rank {r} node {}: no topoc_src_buffer", n.id)),
                };
                for &c in &chunks {
                    let v = here(src, c, st)?;
                    let v = if op == "reduce" {
                        combine(here(buffer, c, st)?, &v)?
                    } else {
                        v
                    };
                    st.insert((buffer, c), v);
                }
            }
            "scale" => {
                for &c in &chunks {
                    let mut v = here(buffer, c, st)?;
                    if v.scaled {
                        return Err(format!("rank {r} node {}: divides chunk {c} twice", n.id));
                    }
                    v.scaled = true;
                    st.insert((buffer, c), v);
                }
            }
            other => {
                return Err(format!(
                    "rank {r} node {}: unknown topoc_op `{other}`",
                    n.id
                ))
            }
        }
        for u in wake.drain(..) {
            waiting[r][u] -= 1;
            if waiting[r][u] == 0 {
                ready.insert((u, r));
            }
        }
    }
    if ran != total {
        let stuck: Vec<String> = set
            .iter()
            .enumerate()
            .flat_map(|(r, nodes)| {
                let waiting = &waiting[r];
                nodes
                    .iter()
                    .enumerate()
                    .filter(move |(i, _)| waiting[*i] > 0)
                    .map(move |(_, n)| format!("rank {r} node {} ({})", n.id, n.name))
            })
            .take(4)
            .collect();
        return Err(format!(
            "deadlock: {} of {total} nodes never run, e.g. {}",
            total - ran,
            stuck.join("; ")
        ));
    }
    let _ = sends;
    result(&state, expect)
}

/// Every rank's data buffer (buffer 0) against the collective.
fn result(state: &[BTreeMap<(i64, i64), Val>], expect: &Expect) -> Result<(), String> {
    let ranks = state.len();
    for (r, st) in state.iter().enumerate() {
        for c in 0..expect.chunk_bytes.len() {
            let owner = expect.owners.get(c).copied().flatten();
            let want = match expect.kind {
                Kind::AllReduce => Some(Val {
                    counts: vec![1; ranks],
                    scaled: expect.mean,
                }),
                Kind::ReduceScatter if owner == Some(r as u32) => Some(Val {
                    counts: vec![1; ranks],
                    scaled: expect.mean,
                }),
                Kind::ReduceScatter => None,
                Kind::AllGather => {
                    let mut counts = vec![0; ranks];
                    counts[owner.ok_or(format!("chunk {c} has no owner"))? as usize] = 1;
                    Some(Val {
                        counts,
                        scaled: false,
                    })
                }
            };
            let Some(want) = want else { continue };
            let got = st.get(&(0, c as i64));
            if got != Some(&want) {
                return Err(format!(
                    "rank {r} ends with chunk {c} = {got:?}, but the {:?} needs {want:?}",
                    expect.kind
                ));
            }
        }
    }
    Ok(())
}
