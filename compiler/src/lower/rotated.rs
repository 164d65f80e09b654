//! `rotated-hd`: halving-doubling on a hypercube with the dimensions rotated per part, so that
//! every link direction is busy in every step.
//!
//! On a hypercube of `d` dimensions and `n = 2^d` nodes (a `Hypercube`, or the `Cube` with
//! `a b d c e f h g` as nodes 0 … 7: bit 0 is `bcgf`'s side, bit 1 `dchg`'s, bit 2 `efgh`'s),
//! the vector is cut into `d` parts of `n` chunks each; chunk `j·n + c` is chunk `c` of part
//! `j`, and its owner is node `c`. Part `j` walks the dimensions in the rotated order
//! `j, j+1, …, j+d-1 (mod d)`:
//!
//! - **reduce-scatter** (`d` steps): in step `s`, part `j` uses dimension `k = (j + s) mod d`.
//!   Node `x` is still responsible for the chunks `c` of the part that agree with `x` on the
//!   `s` dimensions already used; it sends those among them that differ from `x` in bit `k`
//!   (half of them) to `x XOR 2^k`, which reduces them into its own. After `d` steps node `x`
//!   holds chunk `x` of every part, reduced over all nodes.
//! - **allgather** (`d` steps), the reverse: in step `t`, part `j` uses dimension
//!   `(j + d - 1 - t) mod d`, and node `x` sends every chunk of the part it holds complete to
//!   its neighbour, which stores them; the held set doubles each step.
//!
//! In every step the `d` parts use `d` different dimensions, so every node sends on all its
//! links and receives on all of them, each direction carrying one part's share. Per direction
//! the reduce-scatter moves `(q/d)(1 - 1/n)` bytes of a `q`-byte vector, and so does the
//! allgather: allreduce takes `2(q/d)(1 - 1/n)/b`, exactly the total-traffic bound `2(n-1)q /
//! (n·d·b)` — on the cube `7q/(12b)`, against `2q/(3b)` for `cube-planes`. Reduce-scatter and
//! allgather are the two halves alone.

use super::ring::{even_chunks, PhaseSpec};
use super::steps::{assemble, link_between, Transfer};
use crate::embed::EmbedError;
use crate::machine::{Machine, Shape};
use schedule_ir::{Chunk, ChunkId, Collective, NodeId, Phase, RecvMode};

/// The machine as a hypercube: `nodes[c]` is the node at coordinates `c` (bit `k` =
/// coordinate in dimension `k`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Coordinates {
    /// Dimensions.
    pub dims: u32,
    /// The node at each coordinate index.
    pub nodes: Vec<NodeId>,
}

/// The hypercube coordinates of `machine`, if it is an intact `Hypercube` or `Cube`.
pub fn coordinates(machine: &Machine) -> Result<Coordinates, EmbedError> {
    match &machine.shape {
        Shape::Hypercube { dims } => Ok(Coordinates {
            dims: *dims,
            nodes: (0..1usize << dims).map(NodeId::new).collect(),
        }),
        Shape::Cube(layout) => {
            // Faces 5, 3 and 1 are the far sides of the three pairs.
            let far = |f: usize, x: NodeId| {
                layout
                    .faces
                    .get(f)
                    .is_some_and(|face| face.cycle.contains(&x))
            };
            let mut nodes = vec![None; 8];
            for x in machine.compute_nodes() {
                let c = usize::from(far(5, x))
                    | usize::from(far(3, x)) << 1
                    | usize::from(far(1, x)) << 2;
                nodes[c] = Some(x);
            }
            let nodes: Option<Vec<NodeId>> = nodes.into_iter().collect();
            nodes
                .map(|nodes| Coordinates { dims: 3, nodes })
                .ok_or_else(|| {
                    EmbedError::NotApplicable(
                        "the cube's faces do not give every node coordinates".to_string(),
                    )
                })
        }
        _ => Err(EmbedError::NotApplicable(
            "`rotated-hd` runs on intact `Hypercube` and `Cube` machines only".to_string(),
        )),
    }
}

/// Lowers `spec` (allreduce, reduce-scatter or allgather) on `machine`.
pub fn lower(spec: &PhaseSpec, algorithm: &str, machine: &Machine) -> Result<Phase, EmbedError> {
    let (reduce_scatter, allgather) = match spec.collective {
        Collective::AllReduce => (true, true),
        Collective::ReduceScatter => (true, false),
        Collective::AllGather => (false, true),
        other => {
            return Err(EmbedError::NotApplicable(format!(
                "`rotated-hd` lowers allreduce, reduce-scatter and allgather, not {other}"
            )))
        }
    };
    let cube = coordinates(machine)?;
    let d = cube.dims as usize;
    let n = cube.nodes.len();
    let chunk = |j: usize, c: usize| ChunkId::new(j * n + c);
    // Whether chunk c agrees with node x on dimensions order(j)[0..s].
    let agrees = |j: usize, s: usize, x: usize, c: usize| {
        (0..s).all(|i| {
            let k = (j + i) % d;
            (x ^ c) & (1 << k) == 0
        })
    };
    let transfer = |x: usize, k: usize, chunks: Vec<ChunkId>, mode: RecvMode| {
        let (from, to) = (cube.nodes[x], cube.nodes[x ^ (1 << k)]);
        let link = link_between(machine, from, to).ok_or_else(|| {
            EmbedError::NotApplicable(format!("no link joins {from} and {to} along dimension {k}"))
        })?;
        Ok::<_, EmbedError>(Transfer {
            from,
            to,
            link,
            chunks,
            mode,
        })
    };
    let mut steps: Vec<Vec<Transfer>> = Vec::new();
    if reduce_scatter {
        for s in 0..d {
            let mut step = Vec::new();
            for x in 0..n {
                for j in 0..d {
                    let k = (j + s) % d;
                    let send: Vec<ChunkId> = (0..n)
                        .filter(|&c| agrees(j, s, x, c) && (x ^ c) & (1 << k) != 0)
                        .map(|c| chunk(j, c))
                        .collect();
                    step.push(transfer(x, k, send, RecvMode::Reduce)?);
                }
            }
            steps.push(step);
        }
    }
    if allgather {
        for t in 0..d {
            let mut step = Vec::new();
            for x in 0..n {
                for j in 0..d {
                    let k = (j + d - 1 - t) % d;
                    let send: Vec<ChunkId> = (0..n)
                        .filter(|&c| agrees(j, d - t, x, c))
                        .map(|c| chunk(j, c))
                        .collect();
                    step.push(transfer(x, k, send, RecvMode::Store)?);
                }
            }
            steps.push(step);
        }
    }
    let owners = !matches!(spec.collective, Collective::AllReduce);
    let chunks = even_chunks(spec.elements, d * n)
        .into_iter()
        .enumerate()
        .map(|(i, (start, end))| Chunk {
            start,
            end,
            owner: owners.then(|| cube.nodes[i % n]),
        })
        .collect();
    Ok(assemble(spec, algorithm, machine, chunks, &steps))
}
