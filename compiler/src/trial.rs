//! Trial runs: execute a verified schedule in one process on random data, compare every node
//! with a plain reference reduction, and run again to check the result is bit-identical.
//!
//! This is what `topoc run` does, and what the example suite does for every file.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use runtime_lite::Buffers;
use schedule_ir::{DType, Phase, ReduceOp, VerifiedSchedule};
use serde::Serialize;

/// The most input data `run` will allocate for one phase (all nodes), in bytes. Each phase
/// holds a few copies of it (inputs, reference, two results).
const MAX_INPUT_BYTES: u128 = 2 << 30;

/// The outcome of running one phase.
#[derive(Clone, Debug, Serialize)]
pub struct PhaseRun {
    /// The phase's name.
    pub phase: String,
    /// The collective, in words.
    pub collective: String,
    /// The method that produced the phase.
    pub algorithm: String,
    /// The op.
    pub op: String,
    /// The element type run.
    pub dtype: String,
    /// The vector length run.
    pub elements: u64,
    /// Compute nodes.
    pub nodes: usize,
    /// BSP steps.
    pub steps: u32,
    /// Seed of the random inputs.
    pub seed: u64,
    /// `None` when every node matches the reference, else what differs.
    pub mismatch: Option<String>,
    /// Whether a second run gave bit-identical results on every node.
    pub reproducible: bool,
}

impl PhaseRun {
    /// Matches the reference and reproduces bit for bit.
    pub fn ok(&self) -> bool {
        self.mismatch.is_none() && self.reproducible
    }
}

/// Sets every phase's element type and/or length and verifies the result again.
pub fn adjust(
    verified: VerifiedSchedule,
    dtype: Option<DType>,
    elements: Option<u64>,
) -> Result<VerifiedSchedule, String> {
    if dtype.is_none() && elements.is_none() {
        return Ok(verified);
    }
    let mut schedule = verified.into_schedule();
    for phase in &mut schedule.phases {
        if let Some(n) = elements {
            *phase = phase.with_elements(n);
        }
        if let Some(d) = dtype {
            phase.dtype = d;
        }
    }
    schedule_ir::verify(schedule).map_err(|e| {
        let lines: Vec<String> = e.errors.iter().map(|e| format!("error: {e}")).collect();
        format!(
            "{}\nerror: the schedule is not valid for the requested size",
            lines.join("\n")
        )
    })
}

/// Runs one phase twice on random data seeded by `seed` and compares with the reference.
pub fn run_phase(
    verified: &VerifiedSchedule,
    phase: &Phase,
    seed: u64,
) -> Result<PhaseRun, String> {
    let machine = &verified.schedule().machine;
    let nodes = machine.compute_nodes().count();
    let bytes = u128::from(phase.elements) * nodes as u128 * u128::from(phase.dtype.size_bytes());
    if bytes > MAX_INPUT_BYTES {
        return Err(format!(
            "error: phase `{}` needs {} MiB of input data ({} elements × {} nodes); use --elements to run a smaller vector",
            phase.name,
            bytes >> 20,
            phase.elements,
            nodes
        ));
    }
    let len = usize::try_from(phase.elements)
        .map_err(|_| format!("error: phase `{}` is too long to run here", phase.name))?;
    let inputs = random_inputs(phase.dtype, phase.op, nodes, len, seed);
    let fail = |e: runtime_lite::Error| format!("error: running phase `{}`: {e}", phase.name);
    let first = runtime_lite::run_phase_any(verified, &phase.name, inputs.clone()).map_err(fail)?;
    let second =
        runtime_lite::run_phase_any(verified, &phase.name, inputs.clone()).map_err(fail)?;
    let expected = runtime_lite::reference_any(machine, phase, &inputs).map_err(fail)?;
    let mismatch = runtime_lite::compare_any(machine, phase, &inputs, &expected, &first)
        .err()
        .map(|e| e.to_string());
    Ok(PhaseRun {
        phase: phase.name.clone(),
        collective: phase.collective.describe(machine),
        algorithm: phase.algorithm.clone(),
        op: phase.op.to_string(),
        dtype: phase.dtype.to_string(),
        elements: phase.elements,
        nodes,
        steps: phase.steps,
        seed,
        mismatch,
        reproducible: bit_identical(&first, &second),
    })
}

/// Whether two results are equal bit for bit (NaNs included).
pub fn bit_identical(a: &Buffers, b: &Buffers) -> bool {
    fn same<T: Copy, U: PartialEq>(x: &[Vec<T>], y: &[Vec<T>], bits: impl Fn(T) -> U) -> bool {
        x.len() == y.len()
            && x.iter().zip(y).all(|(p, q)| {
                p.len() == q.len() && p.iter().zip(q).all(|(&s, &t)| bits(s) == bits(t))
            })
    }
    match (a, b) {
        (Buffers::F32(x), Buffers::F32(y)) => same(x, y, f32::to_bits),
        (Buffers::F64(x), Buffers::F64(y)) => same(x, y, f64::to_bits),
        (Buffers::I32(x), Buffers::I32(y)) => same(x, y, |v| v),
        (Buffers::I64(x), Buffers::I64(y)) => same(x, y, |v| v),
        _ => false,
    }
}

/// Random vectors for `nodes` nodes: values in a range where the op stays meaningful (products
/// near 1 so they neither overflow nor vanish; integer sums that also exercise wrapping).
pub fn random_inputs(dtype: DType, op: ReduceOp, nodes: usize, len: usize, seed: u64) -> Buffers {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut floats = |lo: f64, hi: f64| -> Vec<Vec<f64>> {
        (0..nodes)
            .map(|_| (0..len).map(|_| rng.random_range(lo..hi)).collect())
            .collect()
    };
    match dtype {
        DType::F32 | DType::F64 => {
            let (lo, hi) = match op {
                ReduceOp::Prod => (0.5, 1.5),
                ReduceOp::Sum | ReduceOp::Mean => (-1.0, 1.0),
                ReduceOp::Max | ReduceOp::Min => (-1000.0, 1000.0),
            };
            let v = floats(lo, hi);
            if dtype == DType::F32 {
                Buffers::F32(
                    v.into_iter()
                        .map(|n| n.into_iter().map(|x| x as f32).collect())
                        .collect(),
                )
            } else {
                Buffers::F64(v)
            }
        }
        DType::I32 | DType::I64 => {
            let mut ints = |lo: i64, hi: i64| -> Vec<Vec<i64>> {
                (0..nodes)
                    .map(|_| (0..len).map(|_| rng.random_range(lo..=hi)).collect())
                    .collect()
            };
            let wide = dtype == DType::I64;
            let v = match op {
                ReduceOp::Prod => ints(-3, 3),
                ReduceOp::Sum | ReduceOp::Mean if wide => ints(i64::MIN / 2, i64::MAX / 2),
                ReduceOp::Sum | ReduceOp::Mean => {
                    ints(i64::from(i32::MIN) / 2, i64::from(i32::MAX) / 2)
                }
                ReduceOp::Max | ReduceOp::Min if wide => ints(i64::MIN, i64::MAX),
                ReduceOp::Max | ReduceOp::Min => ints(i32::MIN.into(), i32::MAX.into()),
            };
            if wide {
                Buffers::I64(v)
            } else {
                Buffers::I32(
                    v.into_iter()
                        .map(|n| n.into_iter().map(|x| x as i32).collect())
                        .collect(),
                )
            }
        }
    }
}
