//! The plan as JSON, with the keys and spellings the MSCCL++ v0.7.0 loader reads.

use super::ops::Op;
use super::threadblocks::Gpu;
use super::THREADS_PER_BLOCK;
use crate::emit::layout::{Buf, Loc};
use serde_json::{json, Value};

/// The channel type of every channel: memory channels (CUDA IPC between GPUs of one node).
const CTYPE: &str = "memory";

/// The whole plan text. `serde_json` escapes the name; keys come out in a fixed order, so
/// the same plan always gives the same bytes.
pub(super) fn write(name: &str, collective: &str, gpus: &[Gpu]) -> String {
    let plan = json!({
        "name": name,
        "collective": collective,
        "protocol": "Simple",
        "inplace": false,
        "num_threads_per_block": THREADS_PER_BLOCK,
        "min_message_size": 0,
        "gpus": gpus.iter().map(gpu).collect::<Vec<_>>(),
    });
    let mut text = serde_json::to_string_pretty(&plan).unwrap_or_default();
    text.push('\n');
    text
}

fn gpu(g: &Gpu) -> Value {
    json!({
        "id": g.id,
        "inputChunks": g.input_chunks,
        "outputChunks": g.output_chunks,
        "scratchChunks": g.scratch_chunks,
        "chunkGroups": 1,
        "threadblocks": (0..g.tbs.len()).map(|t| threadblock(g, t)).collect::<Vec<_>>(),
        "channels": g.channels.iter().map(|(key, peers)| json!({
            "srcbuff": key.letter(),
            "dstbuff": "s",
            "type": CTYPE,
            "connectedTo": peers,
        })).collect::<Vec<_>>(),
    })
}

fn threadblock(g: &Gpu, t: usize) -> Value {
    let tb = &g.tbs[t];
    json!({
        "id": t,
        "ops": tb.ops.iter().map(|op| operation(g, t, op)).collect::<Vec<_>>(),
        "channels": tb.channels.iter().map(|(key, cids)| json!({
            "src": key.letter(),
            "dst": "s",
            "ctype": CTYPE,
            "cids": cids,
        })).collect::<Vec<_>>(),
    })
}

fn cids(g: &Gpu, t: usize, key: Buf, peers: &[u32], off: u32) -> Value {
    peers
        .iter()
        .map(|&p| json!({"id": g.channel_id(t, key, p), "off": off}))
        .collect()
}

fn local(op: &str, src: &Loc, dst: &Loc, cnt: u32) -> Value {
    json!({
        "name": op,
        "srcbuff": src.buf.letter(),
        "srcoff": src.off,
        "dstbuff": dst.buf.letter(),
        "dstoff": dst.off,
        "ctype": "none",
        "cnt": cnt,
    })
}

fn operation(g: &Gpu, t: usize, op: &Op) -> Value {
    match op {
        Op::Put {
            peer,
            src,
            dst_off,
            cnt,
        } => json!({
            "name": "put",
            "o_buff": {"src": src.buf.letter(), "dst": "s"},
            "o_cids": cids(g, t, src.buf, &[*peer], *dst_off),
            "srcs": [{"buff": src.buf.letter(), "off": src.off}],
            "ctype": CTYPE,
            "cnt": cnt,
        }),
        Op::Signal { key, peers } => json!({
            "name": "signal",
            "o_buff": {"src": key.letter(), "dst": "s"},
            "o_cids": cids(g, t, *key, peers, 0),
            "ctype": CTYPE,
        }),
        Op::Wait { key, peers } => json!({
            "name": "wait",
            "i_buff": {"src": key.letter(), "dst": "s"},
            "i_cids": cids(g, t, *key, peers, 0),
            "ctype": CTYPE,
        }),
        Op::Copy { src, dst, cnt } => local("copy", src, dst, *cnt),
        Op::Reduce { src, add, dst, cnt } => {
            let mut v = local("re", src, dst, *cnt);
            v["srcs"] = json!([{"buff": add.buf.letter(), "off": add.off}]);
            v
        }
        Op::Nop => json!({"name": "nop"}),
        Op::Barrier { id, tbs } => json!({
            "name": "barrier",
            "barrier_id": id,
            "nthread_blocks": tbs,
        }),
    }
}
