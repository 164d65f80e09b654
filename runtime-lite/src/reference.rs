//! The reference reduction (what every node must hold, by a plain loop) and the comparison of a
//! run's results against it.
//!
//! Inputs are indexed like the in-process driver's buffers: one vector per compute node, in
//! [`NodeId`] order. The reference combines inputs in that order, left to right:
//! `x0 ⊕ x1 ⊕ … ⊕ x(p-1)`; for a mean, that plain sum divided once by `p` (truncating for
//! integers, so an integer mean is bit-exact whatever order a schedule adds in).

use crate::buffer::Buffers;
use crate::element::Element;
use crate::error::Error;
use crate::exec::check_dtype;
use schedule_ir::{Chunk, Collective, Machine, NodeId, Phase, ReduceOp};
use std::ops::Range;

/// What each compute node must hold at the end of `phase`, given the phase's `inputs`:
/// - allreduce: every node holds the elementwise fold of all inputs, in node order (for a
///   mean, the fold divided by the number of inputs; likewise below);
/// - reduce-scatter: each chunk's owner holds that chunk folded over all inputs; every other
///   element keeps its input value (the collective promises nothing about it);
/// - allgather: every node holds each chunk as its owner's input has it;
/// - broadcast: every node holds the root's input;
/// - reduce: the root holds the fold of all inputs; the others keep their inputs.
///
/// Fails if the inputs do not fit the phase (count, length, element type), or if the phase
/// names a root or owner that is not a compute node, or a chunk outside the vector.
pub fn reference<T: Element>(
    machine: &Machine,
    phase: &Phase,
    inputs: &[Vec<T>],
) -> Result<Vec<Vec<T>>, Error> {
    let layout = Layout::new(machine, phase)?;
    check_dtype::<T>(&phase.name, phase.dtype)?;
    layout.check_shape(inputs)?;
    let op = phase.op;
    let all = 0..layout.elements;
    Ok(match phase.collective {
        Collective::AllReduce => {
            let folded = fold(op, inputs, all);
            vec![folded; inputs.len()]
        }
        Collective::ReduceScatter => {
            let mut out = inputs.to_vec();
            for (c, chunk) in phase.chunks.iter().enumerate() {
                let owner = layout.owner(c, chunk)?;
                let range = layout.range(c, chunk)?;
                let folded = fold(op, inputs, range.clone());
                if let Some(dst) = out.get_mut(owner).and_then(|v| v.get_mut(range)) {
                    dst.copy_from_slice(&folded);
                }
            }
            out
        }
        Collective::AllGather => {
            let mut out = inputs.to_vec();
            for (c, chunk) in phase.chunks.iter().enumerate() {
                let owner = layout.owner(c, chunk)?;
                let range = layout.range(c, chunk)?;
                let Some(src) = inputs.get(owner).and_then(|v| v.get(range.clone())) else {
                    continue;
                };
                for v in &mut out {
                    if let Some(dst) = v.get_mut(range.clone()) {
                        dst.copy_from_slice(src);
                    }
                }
            }
            out
        }
        Collective::Broadcast { root } => {
            let r = layout.position(root, "the broadcast root")?;
            let src = inputs.get(r).cloned().unwrap_or_default();
            vec![src; inputs.len()]
        }
        Collective::Reduce { root } => {
            let r = layout.position(root, "the reduce root")?;
            let mut out = inputs.to_vec();
            if let Some(dst) = out.get_mut(r) {
                *dst = fold(op, inputs, all);
            }
            out
        }
    })
}

/// Checks a run's results `actual` against the reference `expected` (from [`reference()`] on the
/// same `inputs`), on the elements the collective promises: all of them for allreduce,
/// allgather and broadcast; the owner's chunks for reduce-scatter; the root's vector for
/// reduce.
///
/// Integers must match exactly; so must floats moved without arithmetic (allgather,
/// broadcast) and float max/min (which do not depend on the order of combination). Float sums
/// and products depend on that order, so they may differ from the reference by rounding:
/// - sum: `|actual - expected| <= 2·p·ε·Σ|inputs|` at that element,
/// - mean: `|actual - expected| <= 2·ε·Σ|inputs| + 2·ε·max(|actual|, |expected|)` (the sum's
///   bound divided by `p`, plus the division's rounding),
/// - product: `|actual - expected| <= 2·p·ε·max(|actual|, |expected|)` plus `p` times the
///   smallest normal number,
///
/// with `p` the number of inputs and `ε` the type's machine epsilon. Two NaNs match. The error
/// names the first differing node (in node order) and element.
pub fn compare<T: Element>(
    machine: &Machine,
    phase: &Phase,
    inputs: &[Vec<T>],
    expected: &[Vec<T>],
    actual: &[Vec<T>],
) -> Result<(), Error> {
    let layout = Layout::new(machine, phase)?;
    check_dtype::<T>(&phase.name, phase.dtype)?;
    layout.check_shape(inputs)?;
    layout.check_shape(expected)?;
    layout.check_shape(actual)?;
    let rounding = T::IS_FLOAT
        && matches!(phase.op, ReduceOp::Sum | ReduceOp::Prod | ReduceOp::Mean)
        && matches!(
            phase.collective,
            Collective::AllReduce | Collective::ReduceScatter | Collective::Reduce { .. }
        );
    let p = inputs.len() as f64;
    // Σ|inputs| per element, for the sum and mean tolerances: computed once, in one pass over
    // each input, the first time an element differs (not per node and element, which costs
    // p² reads per element, strided across the inputs).
    let mut magnitudes: Option<Vec<f64>> = None;
    // The last node checked, with its promised ranges: a node whose reference and result are
    // bit for bit those of the last node checked (every node of an allreduce, as a rule)
    // passes as it did, at the cost of a comparison instead of p tolerance computations.
    let mut last: Option<(usize, Vec<Range<usize>>)> = None;
    for (i, (want, got)) in expected.iter().zip(actual).enumerate() {
        let promised = layout.promised(i)?;
        if let Some((k, ranges)) = &last {
            let same = |mine: &[T], theirs: Option<&Vec<T>>| {
                theirs.is_some_and(|theirs| same_bits(mine, theirs))
            };
            if *ranges == promised && same(want, expected.get(*k)) && same(got, actual.get(*k)) {
                continue;
            }
        }
        for range in promised.iter().cloned() {
            for j in range {
                let (Some(&e), Some(&a)) = (want.get(j), got.get(j)) else {
                    continue;
                };
                if e.to_bits_u64() == a.to_bits_u64() {
                    continue;
                }
                let (ef, af) = (e.to_f64(), a.to_f64());
                if T::IS_FLOAT && ef.is_nan() && af.is_nan() {
                    continue;
                }
                let allowed = if !rounding {
                    None
                } else if phase.op != ReduceOp::Prod {
                    let magnitude = magnitudes
                        .get_or_insert_with(|| sum_of_magnitudes(inputs, layout.elements))
                        .get(j)
                        .copied()
                        .unwrap_or(0.0);
                    let sum = 2.0 * p * T::EPSILON * magnitude;
                    Some(if phase.op == ReduceOp::Mean {
                        // The sum's rounding divided by p, and the division's own.
                        sum / p + 2.0 * T::EPSILON * ef.abs().max(af.abs())
                    } else {
                        sum
                    })
                } else {
                    Some(2.0 * p * T::EPSILON * ef.abs().max(af.abs()) + p * T::MIN_POSITIVE)
                };
                let diff = (af - ef).abs();
                if allowed.is_some_and(|allowed| diff.is_finite() && diff <= allowed) {
                    continue;
                }
                return Err(Error::Mismatch {
                    phase: phase.name.clone(),
                    node: machine.node_name(layout.nodes.get(i).copied().unwrap_or(NodeId(0))),
                    element: j as u64,
                    expected: e.to_string(),
                    actual: a.to_string(),
                    tolerance: allowed,
                });
            }
        }
        last = Some((i, promised));
    }
    Ok(())
}

/// Whether two slices hold the same bits. Compares in blocks without early exit inside a
/// block, so that the compiler can vectorise it.
fn same_bits<T: Element>(a: &[T], b: &[T]) -> bool {
    a.len() == b.len()
        && a.chunks(64).zip(b.chunks(64)).all(|(x, y)| {
            x.iter().zip(y).fold(true, |all, (u, v)| {
                all & (u.to_bits_u64() == v.to_bits_u64())
            })
        })
}

/// [`reference()`] on dtype-erased buffers.
pub fn reference_any(machine: &Machine, phase: &Phase, inputs: &Buffers) -> Result<Buffers, Error> {
    Ok(match inputs {
        Buffers::F32(v) => Buffers::F32(reference(machine, phase, v)?),
        Buffers::F64(v) => Buffers::F64(reference(machine, phase, v)?),
        Buffers::I32(v) => Buffers::I32(reference(machine, phase, v)?),
        Buffers::I64(v) => Buffers::I64(reference(machine, phase, v)?),
        Buffers::F16(v) => Buffers::F16(reference(machine, phase, v)?),
        Buffers::BF16(v) => Buffers::BF16(reference(machine, phase, v)?),
    })
}

/// [`compare`] on dtype-erased buffers; all three must hold the phase's element type.
pub fn compare_any(
    machine: &Machine,
    phase: &Phase,
    inputs: &Buffers,
    expected: &Buffers,
    actual: &Buffers,
) -> Result<(), Error> {
    fn typed<T: Element>(
        machine: &Machine,
        phase: &Phase,
        inputs: &Buffers,
        expected: &Buffers,
        actual: &Buffers,
    ) -> Result<(), Error> {
        fn get<'b, T: Element>(phase: &Phase, b: &'b Buffers) -> Result<&'b [Vec<T>], Error> {
            T::buffers_ref(b).ok_or_else(|| Error::WrongDType {
                phase: phase.name.clone(),
                expected: phase.dtype,
                found: b.dtype(),
            })
        }
        compare::<T>(
            machine,
            phase,
            get(phase, inputs)?,
            get(phase, expected)?,
            get(phase, actual)?,
        )
    }
    match inputs {
        Buffers::F32(_) => typed::<f32>(machine, phase, inputs, expected, actual),
        Buffers::F64(_) => typed::<f64>(machine, phase, inputs, expected, actual),
        Buffers::I32(_) => typed::<i32>(machine, phase, inputs, expected, actual),
        Buffers::I64(_) => typed::<i64>(machine, phase, inputs, expected, actual),
        Buffers::F16(_) => typed::<half::f16>(machine, phase, inputs, expected, actual),
        Buffers::BF16(_) => typed::<half::bf16>(machine, phase, inputs, expected, actual),
    }
}

/// `|inputs[0][j]| + |inputs[1][j]| + …` for every element `j`, added in node order.
fn sum_of_magnitudes<T: Element>(inputs: &[Vec<T>], elements: usize) -> Vec<f64> {
    let mut sum = vec![0.0; elements];
    for input in inputs {
        for (s, x) in sum.iter_mut().zip(input) {
            *s += x.to_f64().abs();
        }
    }
    sum
}

/// `inputs[0] ⊕ inputs[1] ⊕ …` over `range`, left to right; for a mean, divided by the number
/// of inputs at the end.
fn fold<T: Element>(op: ReduceOp, inputs: &[Vec<T>], range: Range<usize>) -> Vec<T> {
    let mut iter = inputs.iter().filter_map(|v| v.get(range.clone()));
    let mut acc = iter.next().map(<[T]>::to_vec).unwrap_or_default();
    for x in iter {
        T::combine_into(op, &mut acc, x);
    }
    if op == ReduceOp::Mean {
        T::divide_into(&mut acc, u32::try_from(inputs.len()).unwrap_or(u32::MAX));
    }
    acc
}

/// The phase's compute nodes and vector length, checked.
struct Layout<'a> {
    machine: &'a Machine,
    phase: &'a Phase,
    nodes: Vec<NodeId>,
    elements: usize,
}

impl<'a> Layout<'a> {
    fn new(machine: &'a Machine, phase: &'a Phase) -> Result<Self, Error> {
        let elements = usize::try_from(phase.elements).map_err(|_| Error::TooLarge {
            phase: phase.name.clone(),
            elements: phase.elements,
        })?;
        Ok(Layout {
            machine,
            phase,
            nodes: machine.compute_nodes().collect(),
            elements,
        })
    }

    fn malformed(&self, location: String, detail: String) -> Error {
        Error::Malformed {
            phase: self.phase.name.clone(),
            location,
            detail,
        }
    }

    fn check_shape<T>(&self, buffers: &[Vec<T>]) -> Result<(), Error> {
        if buffers.len() != self.nodes.len() {
            return Err(Error::WrongBufferCount {
                phase: self.phase.name.clone(),
                expected: self.nodes.len(),
                found: buffers.len(),
            });
        }
        for (node, buffer) in self.nodes.iter().zip(buffers) {
            if buffer.len() != self.elements {
                return Err(Error::WrongLength {
                    phase: self.phase.name.clone(),
                    node: self.machine.node_name(*node),
                    expected: self.phase.elements,
                    found: buffer.len() as u64,
                });
            }
        }
        Ok(())
    }

    /// The position among the compute nodes of `node`, which the phase uses as `what`.
    fn position(&self, node: NodeId, what: &str) -> Result<usize, Error> {
        self.nodes.iter().position(|&n| n == node).ok_or_else(|| {
            self.malformed(
                "its collective".into(),
                format!(
                    "{what} {} is not a compute node",
                    self.machine.node_name(node)
                ),
            )
        })
    }

    fn owner(&self, c: usize, chunk: &Chunk) -> Result<usize, Error> {
        match chunk.owner {
            Some(owner) => self.position(owner, &format!("the owner of chunk {c}")),
            None => Err(self.malformed(
                format!("chunk {c}"),
                format!(
                    "a {} needs every chunk to have an owner",
                    self.phase.collective
                ),
            )),
        }
    }

    fn range(&self, c: usize, chunk: &Chunk) -> Result<Range<usize>, Error> {
        match (usize::try_from(chunk.start), usize::try_from(chunk.end)) {
            (Ok(s), Ok(e)) if s <= e && e <= self.elements => Ok(s..e),
            _ => Err(self.malformed(
                format!("chunk {c}"),
                format!(
                    "elements {}..{} are not a range inside the vector of {} elements",
                    chunk.start, chunk.end, self.elements
                ),
            )),
        }
    }

    /// The element ranges the collective promises about the `i`-th compute node.
    fn promised(&self, i: usize) -> Result<Vec<Range<usize>>, Error> {
        let all = std::iter::once(0..self.elements).collect();
        Ok(match self.phase.collective {
            Collective::AllReduce | Collective::AllGather | Collective::Broadcast { .. } => all,
            Collective::Reduce { root } => {
                if self.position(root, "the reduce root")? == i {
                    all
                } else {
                    Vec::new()
                }
            }
            Collective::ReduceScatter => {
                let mut owned = Vec::new();
                for (c, chunk) in self.phase.chunks.iter().enumerate() {
                    if self.owner(c, chunk)? == i {
                        owned.push(self.range(c, chunk)?);
                    }
                }
                owned
            }
        })
    }
}
