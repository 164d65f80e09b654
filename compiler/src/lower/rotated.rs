//! `rotated-hd`: halving-doubling on a hypercube (or a torus) with the dimensions rotated per
//! part, so that every link direction is busy in every step.
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
//!
//! **Tori.** A `Torus` whose `d` dimensions all have size `k` is the same with rings for
//! halving: each part is split in two halves, one per ring direction, and where a hypercube
//! halves along a dimension in one step, a torus part runs a `k`-node ring reduce-scatter along
//! its dimension (`k - 1` steps; node `x` ends with the chunks whose coordinate there is `x`'s)
//! — forward for one half, backward for the other — and the allgather mirrors it. Every step
//! still uses `d` dimensions × 2 directions: every link direction, busy in every step, and the
//! allreduce again meets the total-traffic bound `(q/d)(1 - 1/n)/b`, in `2d(k - 1)` steps.
//! Dimensions of different sizes are refused: the parts' phases would not line up.

use super::floor::Floor;
use super::plan::{self, Move, Packing, Plan};
use super::{link_between, vector_chunks, Job, Lowered, Lowering, PhaseSpec};
use crate::embed::EmbedError;
use crate::limits::Estimate;
use crate::machine::{Machine, Shape};
use schedule_ir::{
    ChunkId, ChunkIds, ChunkRun, Collective, Instr, NodeId, Phase, Program, RecvMode,
};

/// `rotated-hd`: halving-doubling along the dimensions of a hypercube, the cube or an
/// equal-sided torus, the dimension order rotated per part so every link carries data in
/// every step.
pub struct RotatedHd;

impl Lowering for RotatedHd {
    fn supports(&self, collective: Collective) -> bool {
        // An allreduce and either of its halves.
        super::halves(collective).is_some()
    }
    fn estimate(&self, job: &Job<'_>) -> Result<Estimate, EmbedError> {
        on_ring(job.machine)?;
        explicit_estimate(job.spec, job.machine)
    }
    /// Each half runs `d(k - 1)` steps, in every one of which every node sends.
    fn floor(&self, job: &Job<'_>, base: &Floor) -> f64 {
        let (machine, spec) = (job.machine, job.spec);
        match coordinates(machine) {
            Ok(grid) => {
                let halves: u64 = match spec.collective {
                    Collective::AllReduce => 2,
                    _ => 1,
                };
                let ring = (grid.size as u64).saturating_sub(1);
                base.in_steps(halves * u64::from(grid.dims) * ring)
            }
            Err(_) => base.seconds(),
        }
    }
    fn lower(&self, job: &Job<'_>) -> Result<Lowered, EmbedError> {
        let (machine, spec) = (job.machine, job.spec);
        on_ring(machine)?;
        Ok(Lowered::phase(lower(spec, job.name, machine)?))
    }
}

/// On a `Ring` machine `rotated-hd`'s schedule is the ring's own, walked both ways, which
/// `ring` lowers: so the explicit method leaves rings to it and `auto` names the schedule by
/// what it is. Rings too large for the explicit form are written as a pattern by `rotated-hd`
/// ([`crate::compile::pattern`]).
fn on_ring(machine: &Machine) -> Result<(), EmbedError> {
    match machine.shape {
        Shape::Ring => Err(EmbedError::NotApplicable(
            "on a `Ring` machine `ring` runs this schedule; `rotated-hd` writes it only in the \
             pattern form, for rings too large for the explicit form"
                .to_string(),
        )),
        _ => Ok(()),
    }
}

/// The size of the explicit schedule `rotated-hd` lowers for `spec` on `machine`: exact.
pub fn explicit_estimate(spec: &PhaseSpec, machine: &Machine) -> Result<Estimate, EmbedError> {
    let grid = coordinates(machine)?;
    Ok(estimate(
        spec.collective,
        grid.dims as usize,
        grid.size,
        grid.nodes.len(),
    ))
}

/// The size of [`lower`]'s schedule on `d` dimensions of size `k` (`n` nodes), counted as it
/// builds it: each half runs `d(k - 1)` steps in which every node sends on `d·h` links (`h`
/// ring directions), and a transfer in the `s`-th dimension of a part's walk carries the
/// `n / k^(s+1)` chunks of its group, held as at most `n / k^(s+2)` runs (one per digit of
/// every free dimension but the fastest; see [`Coordinates::selected_ids`]).
fn estimate(collective: Collective, d: usize, k: usize, n: usize) -> Estimate {
    let halves: u128 = match collective {
        Collective::AllReduce => 2,
        Collective::ReduceScatter | Collective::AllGather => 1,
        _ => 0,
    };
    let h: u128 = if k == 2 { 1 } else { 2 };
    let (d, k, n) = (d as u128, k as u128, n as u128);
    let per_walk = k.saturating_sub(1) * n * d * h;
    let mut carried: u128 = 0;
    let mut runs: u128 = 0;
    let mut group = n;
    for _ in 0..d {
        group /= k.max(2);
        carried = carried.saturating_add(per_walk.saturating_mul(group));
        runs = runs.saturating_add(per_walk.saturating_mul((group / k.max(2)).max(1)));
    }
    let clamp = |x: u128| u64::try_from(x).unwrap_or(u64::MAX);
    Estimate::transfers(
        clamp(halves * d * per_walk),
        clamp(halves * carried),
        clamp(d * h * n),
        1,
    )
    .in_runs(clamp(halves * runs))
    .on(usize::try_from(n).unwrap_or(usize::MAX))
    .in_steps(clamp(halves * d * k.saturating_sub(1)))
}

/// The machine as a grid: `nodes[c]` is the node at coordinate index `c`, whose digit in
/// dimension `k` is `(c / k^k') mod k` — dimension 0 the fastest, every dimension of size `k`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Coordinates {
    /// Dimensions.
    pub dims: u32,
    /// The size of every dimension (2 for hypercubes and the cube).
    pub size: usize,
    /// The node at each coordinate index.
    pub nodes: Vec<NodeId>,
}

impl Coordinates {
    /// Coordinate `k` of index `c`.
    fn digit(&self, c: usize, k: usize) -> usize {
        (c / self.size.pow(k as u32)) % self.size
    }

    /// The indices `c`, in increasing order, that agree with index `x` on the first `m`
    /// dimensions of part `j`'s order `j, j+1, … (mod dims)` and whose digit in the next one,
    /// `(j + m) mod dims`, is `group` (`m < dims`): the chunks of a part that node `x` sends in
    /// a step. Enumerated directly, in time linear in their number.
    #[cfg(test)]
    fn selected(&self, j: usize, m: usize, x: usize, group: usize) -> impl Iterator<Item = usize> {
        let (base, free) = self.selection(j, m, x, group);
        let size = self.size;
        let count = size.pow(free.len() as u32);
        (0..count).map(move |mut i| {
            let mut c = base;
            for &s in &free {
                c += (i % size) * s;
                i /= size;
            }
            c
        })
    }

    /// The chunk ids `offset + c` for the indices `c` of [`Coordinates::selected`], built as
    /// runs: the fastest free dimension gives runs of `size` ids spaced by its stride, one per
    /// combination of the other free digits, so no id is enumerated.
    fn selected_ids(&self, j: usize, m: usize, x: usize, group: usize, offset: usize) -> ChunkIds {
        let (base, free) = self.selection(j, m, x, group);
        let size = self.size;
        let mut ids = ChunkIds::new();
        let Some((&fastest, slower)) = free.split_first() else {
            ids.push(ChunkId::new(offset + base));
            return ids;
        };
        let (len, stride) = (u32::try_from(size), u32::try_from(fastest));
        let (Ok(len), Ok(stride)) = (len, stride) else {
            return ids;
        };
        for mut i in 0..size.pow(slower.len() as u32) {
            let mut c = base;
            for &s in slower {
                c += (i % size) * s;
                i /= size;
            }
            ids.push_run(ChunkRun {
                start: ChunkId::new(offset + c).0,
                len,
                stride: if len > 1 { stride } else { 1 },
            });
        }
        ids
    }

    /// The selection of [`Coordinates::selected`] as the index of its first member and the
    /// strides of its free dimensions, fastest first.
    fn selection(&self, j: usize, m: usize, x: usize, group: usize) -> (usize, Vec<usize>) {
        let d = self.dims as usize;
        let stride = |k: usize| self.size.pow(k as u32);
        let mut fixed = vec![false; d];
        let mut base = 0;
        for i in 0..m {
            let k = (j + i) % d;
            fixed[k] = true;
            base += self.digit(x, k) * stride(k);
        }
        let next = (j + m) % d;
        fixed[next] = true;
        base += group * stride(next);
        // The free dimensions, slowest last: counting through their digits with the first one
        // fastest gives the indices in increasing order.
        let free: Vec<usize> = (0..d).filter(|&k| !fixed[k]).map(stride).collect();
        (base, free)
    }

    /// Index `c` moved by `step` (±1) along dimension `k`, wrapping around.
    fn moved(&self, c: usize, k: usize, forward: bool) -> usize {
        let stride = self.size.pow(k as u32);
        let a = self.digit(c, k);
        let b = if forward {
            (a + 1) % self.size
        } else {
            (a + self.size - 1) % self.size
        };
        c - a * stride + b * stride
    }
}

/// The grid coordinates of `machine`, if it is an intact `Hypercube`, `Cube`, or `Torus` whose
/// dimensions all have one size.
pub fn coordinates(machine: &Machine) -> Result<Coordinates, EmbedError> {
    match &machine.shape {
        Shape::Hypercube { dims } => Ok(Coordinates {
            dims: *dims,
            size: 2,
            nodes: (0..1usize << dims).map(NodeId::new).collect(),
        }),
        Shape::Torus { dims } => {
            let size = dims.first().copied().unwrap_or(0);
            if dims.iter().any(|&k| k != size) {
                return Err(EmbedError::NotApplicable(format!(
                    "`rotated-hd` needs a torus whose dimensions have one size, so that the \
                     parts' rotated phases line up; this one has sizes {dims:?}"
                )));
            }
            let d = dims.len();
            let nodes = (0..dims.iter().product::<usize>())
                .map(|c| {
                    // Our dimension 0 is the fastest digit; the torus's is the slowest.
                    let coords: Vec<usize> =
                        (0..d).map(|k| (c / size.pow(k as u32)) % size).collect();
                    NodeId::new(crate::machine::torus::index(dims, &coords))
                })
                .collect();
            Ok(Coordinates {
                dims: u32::try_from(d).unwrap_or(u32::MAX),
                size,
                nodes,
            })
        }
        // A ring is a torus of one dimension (link `i` joins `Ni` and `Ni+1`). Two nodes are
        // joined by two links, which no translation tells apart.
        Shape::Ring if machine.compute_nodes().len() >= 3 => {
            let n = machine.compute_nodes().len();
            Ok(Coordinates {
                dims: 1,
                size: n,
                nodes: (0..n).map(NodeId::new).collect(),
            })
        }
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
                .map(|nodes| Coordinates {
                    dims: 3,
                    size: 2,
                    nodes,
                })
                .ok_or_else(|| {
                    EmbedError::NotApplicable(
                        "the cube's faces do not give every node coordinates".to_string(),
                    )
                })
        }
        _ => {
            let broke = machine.failed.broke(|s| {
                matches!(
                    s,
                    Shape::Hypercube { .. } | Shape::Cube(_) | Shape::Ring | Shape::Torus { .. }
                )
            });
            Err(EmbedError::NotApplicable(format!(
                "`rotated-hd` runs on intact `Hypercube`, `Cube`, `Ring` and equal-sided `Torus` \
                 machines only{broke}"
            )))
        }
    }
}

/// Lowers `spec` (allreduce, reduce-scatter or allgather) on `machine`.
pub fn lower(spec: &PhaseSpec, algorithm: &str, machine: &Machine) -> Result<Phase, EmbedError> {
    let grid = coordinates(machine)?;
    let senders: Vec<usize> = (0..grid.nodes.len()).collect();
    let mut steps: Vec<Vec<Move>> = Vec::new();
    walk(spec, machine, &grid, &senders, |step, m| {
        if steps.len() <= step {
            steps.resize_with(step + 1, Vec::new);
        }
        steps[step].push(m);
    })?;
    let plan = Plan::data(chunks(spec, &grid), steps, Packing::AsGiven);
    Ok(plan::assemble(spec, algorithm, machine, plan))
}

/// The same schedule in the pattern form ([`schedule_ir::Pattern`]): the grid, and a phase
/// holding the origin's program alone — its sends, then its receives, each in the order
/// [`lower`] gives them, so it is node 0's program of [`lower`]'s schedule exactly. Every
/// node's program is the origin's translated, since a node's transfers depend on its
/// coordinates only through their differences.
pub fn pattern(
    spec: &PhaseSpec,
    algorithm: &str,
    machine: &Machine,
) -> Result<(schedule_ir::Grid, Phase), EmbedError> {
    let grid = coordinates(machine)?;
    let (d, k) = (grid.dims as usize, grid.size);
    // The origin and its neighbours, in index order: the senders of what the origin receives.
    let mut senders = vec![0];
    for dim in 0..d {
        for forward in [true, false] {
            senders.push(grid.moved(0, dim, forward));
        }
    }
    senders.sort_unstable();
    senders.dedup();
    let origin = grid.nodes.first().copied();
    let mut sends: Vec<Vec<Instr>> = Vec::new();
    let mut recvs: Vec<Vec<Instr>> = Vec::new();
    walk(spec, machine, &grid, &senders, |step, m| {
        if sends.len() <= step {
            sends.resize_with(step + 1, Vec::new);
            recvs.resize_with(step + 1, Vec::new);
        }
        let link = m.route[0];
        if Some(m.from) == origin {
            sends[step].push(Instr::Send {
                link,
                via: Vec::new(),
                to: m.to,
                buffer: m.src,
                chunks: m.chunks.clone(),
            });
        }
        if Some(m.to) == origin {
            recvs[step].push(Instr::Recv {
                link,
                from: m.from,
                buffer: m.dst,
                chunks: m.chunks,
                mode: m.mode,
            });
        }
    })?;
    let steps: Vec<Vec<Instr>> = sends
        .into_iter()
        .zip(recvs)
        .map(|(mut s, r)| {
            s.extend(r);
            s
        })
        .collect();
    let phase = Phase {
        name: spec.name.clone(),
        collective: spec.collective,
        op: spec.op,
        dtype: spec.dtype,
        elements: spec.elements,
        algorithm: algorithm.to_string(),
        chunks: chunks(spec, &grid),
        buffers: super::data_buffer(),
        links: schedule_ir::LinkUse::Exclusive,
        steps: u32::try_from(steps.len()).unwrap_or(u32::MAX),
        programs: vec![Program { steps }],
    };
    let sizes = vec![u32::try_from(k).unwrap_or(u32::MAX); d];
    Ok((
        schedule_ir::Grid {
            sizes,
            nodes: grid.nodes,
        },
        phase,
    ))
}

/// The chunks of [`lower`]: `d·h` parts of `n`, chunk `j·n + c` owned by the node at index
/// `c` where the collective has owners.
fn chunks(spec: &PhaseSpec, grid: &Coordinates) -> Vec<schedule_ir::Chunk> {
    let (d, k, n) = (grid.dims as usize, grid.size, grid.nodes.len());
    let h_count = if k == 2 { 1 } else { 2 };
    let owners = !matches!(spec.collective, Collective::AllReduce);
    vector_chunks(spec.elements, d * h_count * n, |i| {
        owners.then(|| grid.nodes[i % n])
    })
}

/// Every transfer of the schedule sent by the nodes at the indices `senders`, with its step,
/// in the order the schedule lists them: step by step, then by sender in the order given, then
/// by part and ring direction.
fn walk(
    spec: &PhaseSpec,
    machine: &Machine,
    grid: &Coordinates,
    senders: &[usize],
    mut emit: impl FnMut(usize, Move),
) -> Result<(), EmbedError> {
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
    let (d, k, n) = (grid.dims as usize, grid.size, grid.nodes.len());
    // Sub-parts: one per ring direction; a size-2 dimension has one link per pair.
    let h_count = if k == 2 { 1 } else { 2 };
    // Chunk `c` of sub-part `h` of part `j` is id `(j·h_count + h)·n + c`.
    let part = |j: usize, h: usize| (j * h_count + h) * n;
    let transfer = |x: usize, dim: usize, forward: bool, chunks: ChunkIds, mode| {
        let (from, to) = (grid.nodes[x], grid.nodes[grid.moved(x, dim, forward)]);
        let link = link_between(machine, from, to).ok_or_else(|| {
            EmbedError::NotApplicable(format!(
                "no link joins {from} and {to} along dimension {dim}"
            ))
        })?;
        Ok::<_, EmbedError>(Move::data(from, to, vec![link], chunks, mode))
    };
    let mut step = 0;
    if reduce_scatter {
        for s in 0..d {
            for r in 0..k - 1 {
                for &x in senders {
                    for j in 0..d {
                        let dim = (j + s) % d;
                        let a = grid.digit(x, dim);
                        for h in 0..h_count {
                            // Forward ring (h = 0) sends group a - r - 1, backward a + r + 1:
                            // each node ends with the group of its own coordinate.
                            let group = if h == 0 {
                                (a + k * k - r - 1) % k
                            } else {
                                (a + r + 1) % k
                            };
                            let send = grid.selected_ids(j, s, x, group, part(j, h));
                            emit(step, transfer(x, dim, h == 0, send, RecvMode::Reduce)?);
                        }
                    }
                }
                step += 1;
            }
        }
    }
    if allgather {
        for t in 0..d {
            for r in 0..k - 1 {
                for &x in senders {
                    for j in 0..d {
                        let dim = (j + d - 1 - t) % d;
                        let a = grid.digit(x, dim);
                        for h in 0..h_count {
                            let group = if h == 0 {
                                (a + k * k - r) % k
                            } else {
                                (a + r) % k
                            };
                            let send = grid.selected_ids(j, d - 1 - t, x, group, part(j, h));
                            emit(step, transfer(x, dim, h == 0, send, RecvMode::Store)?);
                        }
                    }
                }
                step += 1;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selected_is_the_filter_over_every_index() {
        for (dims, size) in [(1u32, 5usize), (2, 2), (3, 2), (2, 4), (3, 3), (4, 2)] {
            let n = size.pow(dims);
            let grid = Coordinates {
                dims,
                size,
                nodes: (0..n).map(NodeId::new).collect(),
            };
            let d = dims as usize;
            for j in 0..d {
                for m in 0..d {
                    for x in 0..n {
                        for group in 0..size {
                            let next = (j + m) % d;
                            let expected: Vec<usize> = (0..n)
                                .filter(|&c| {
                                    (0..m).all(|i| {
                                        let k = (j + i) % d;
                                        grid.digit(x, k) == grid.digit(c, k)
                                    }) && grid.digit(c, next) == group
                                })
                                .collect();
                            let got: Vec<usize> = grid.selected(j, m, x, group).collect();
                            assert_eq!(got, expected, "dims {dims} size {size} j {j} m {m}");
                            let ids: Vec<usize> = grid
                                .selected_ids(j, m, x, group, 7)
                                .iter()
                                .map(|c| c.index() - 7)
                                .collect();
                            assert_eq!(ids, expected, "dims {dims} size {size} j {j} m {m}");
                        }
                    }
                }
            }
        }
    }
}
