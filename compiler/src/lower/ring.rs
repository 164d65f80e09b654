//! Ring collectives over one or more logical rings at once.
//!
//! The vector is cut into `R × p` chunks (`R` logical rings of `p` nodes); logical ring `r`
//! carries chunks `r·p … r·p + p - 1`. On every ring, at once:
//!
//! - **reduce-scatter** (`p - 1` steps): in step `s`, the node at position `i` sends chunk
//!   `(i - s) mod p` of its ring to the next node, which reduces it into its own. After the
//!   last step the node at position `i` holds chunk `(i + 1) mod p` combined over all nodes.
//! - **allgather** (`p - 1` steps): in step `t`, the node at position `i` sends chunk
//!   `(i + 1 - t) mod p` to the next node, which stores it.
//!
//! Allreduce is the two in sequence, `2(p - 1)` steps. A chunk's owner — where it ends up
//! reduced, and where an allgather takes it from — is the node before its position.
//! Logical rings must not share a link direction; each node sends on `R` links and receives
//! on `R` links in every step.

use crate::embed::Ring;
use schedule_ir::{
    Buffer, BufferId, BufferKind, Chunk, ChunkId, Collective, Instr, Phase, Program, RecvMode,
};

/// What a lowering is asked to produce, independent of method.
#[derive(Clone, Debug)]
pub struct PhaseSpec {
    /// The phase's name.
    pub name: String,
    /// The collective.
    pub collective: Collective,
    /// The combining operation.
    pub op: schedule_ir::ReduceOp,
    /// The element type.
    pub dtype: schedule_ir::DType,
    /// The vector length.
    pub elements: u64,
}

/// Which halves of allreduce a collective needs.
fn parts(collective: Collective) -> Option<(bool, bool)> {
    match collective {
        Collective::AllReduce => Some((true, true)),
        Collective::ReduceScatter => Some((true, false)),
        Collective::AllGather => Some((false, true)),
        Collective::Broadcast { .. } | Collective::Reduce { .. } => None,
    }
}

/// Whether [`lower`] can produce `collective`.
pub fn supports(collective: Collective) -> bool {
    parts(collective).is_some()
}

/// Cuts `elements` into `count` contiguous chunks whose sizes differ by at most one.
pub fn even_chunks(elements: u64, count: usize) -> Vec<(u64, u64)> {
    let count = count.max(1) as u128;
    (0..count)
        .map(|i| {
            let at = |k: u128| (k * elements as u128 / count) as u64;
            (at(i), at(i + 1))
        })
        .collect()
}

/// Lowers `spec` onto the logical `rings` (each already oriented) of a machine with
/// `node_count` nodes. `algorithm` names the method in the schedule. Returns `None` for a
/// collective rings do not lower (see [`supports`]).
pub fn lower(
    spec: &PhaseSpec,
    algorithm: &str,
    node_count: usize,
    rings: &[Ring],
) -> Option<Phase> {
    let (reduce_scatter, allgather) = parts(spec.collective)?;
    let p = rings.first().map_or(0, |r| r.nodes.len());
    let owners_needed = !matches!(spec.collective, Collective::AllReduce);
    let chunk_id = |r: usize, j: usize| ChunkId::new(r * p + j);

    let chunks: Vec<Chunk> = even_chunks(spec.elements, rings.len() * p)
        .into_iter()
        .enumerate()
        .map(|(c, (start, end))| {
            let (r, j) = (c / p, c % p);
            Chunk {
                start,
                end,
                owner: owners_needed.then(|| rings[r].nodes[(j + p - 1) % p]),
            }
        })
        .collect();

    let rs_steps = if reduce_scatter { p - 1 } else { 0 };
    let ag_steps = if allgather { p - 1 } else { 0 };
    let steps = rs_steps + ag_steps;
    let mut programs = vec![
        Program {
            steps: vec![Vec::new(); steps],
        };
        node_count
    ];
    let data = BufferId(0);
    for step in 0..steps {
        // Sends first, then receives, each in ring order: a fixed, readable program order.
        let mut recvs: Vec<(usize, Instr)> = Vec::new();
        for (r, ring) in rings.iter().enumerate() {
            for i in 0..p {
                let (from, to, link) = (ring.nodes[i], ring.nodes[(i + 1) % p], ring.links[i]);
                let (j, mode) = if step < rs_steps {
                    ((i + p - step % p) % p, RecvMode::Reduce)
                } else {
                    let t = step - rs_steps;
                    ((i + 1 + p - t % p) % p, RecvMode::Store)
                };
                let chunks = vec![chunk_id(r, j)];
                programs[from.index()].steps[step].push(Instr::Send {
                    link,
                    via: Vec::new(),
                    to,
                    buffer: data,
                    chunks: chunks.clone(),
                });
                recvs.push((
                    to.index(),
                    Instr::Recv {
                        link,
                        from,
                        buffer: data,
                        chunks,
                        mode,
                    },
                ));
            }
        }
        for (node, instr) in recvs {
            programs[node].steps[step].push(instr);
        }
    }

    Some(Phase {
        name: spec.name.clone(),
        collective: spec.collective,
        op: spec.op,
        dtype: spec.dtype,
        elements: spec.elements,
        algorithm: algorithm.to_string(),
        chunks,
        buffers: vec![Buffer {
            name: "data".to_string(),
            kind: BufferKind::Data,
        }],
        steps: u32::try_from(steps).unwrap_or(u32::MAX),
        programs,
    })
}

/// Both directions of every ring, except where walking back would reuse a link direction
/// (a two-node ring over a single link).
pub fn both_directions(rings: &[Ring]) -> Vec<Ring> {
    let mut out = Vec::with_capacity(2 * rings.len());
    for ring in rings {
        out.push(ring.clone());
        if !ring.is_one_way_only() {
            out.push(ring.reversed());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_cover_the_vector_evenly() {
        assert_eq!(even_chunks(10, 4), vec![(0, 2), (2, 5), (5, 7), (7, 10)]);
        assert_eq!(even_chunks(2, 4), vec![(0, 0), (0, 1), (1, 1), (1, 2)]);
        assert_eq!(even_chunks(0, 3), vec![(0, 0), (0, 0), (0, 0)]);
    }
}
