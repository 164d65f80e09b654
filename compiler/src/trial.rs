//! Trial runs: execute a verified schedule in one process on random data, compare every node
//! with a plain reference reduction, and run again to check the result is bit-identical.
//!
//! This is what `topoc run` does, and what the example suite does for every file.

use rand::distr::uniform::SampleUniform;
use rand::distr::Uniform;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use runtime_lite::{Buffers, Element, Limits, Needs};
use schedule_ir::{DType, Phase, ReduceOp, VerifiedSchedule};
use serde::Serialize;

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

/// Runs one phase twice on random data seeded by `seed` and compares with the reference,
/// within the runtime's default [`Limits`].
pub fn run_phase(
    verified: &VerifiedSchedule,
    phase: &Phase,
    seed: u64,
) -> Result<PhaseRun, String> {
    run_phase_within(verified, phase, seed, &Limits::default())
}

/// [`run_phase`] within `limits`. The memory counted is the run's (see [`Needs`]) plus the
/// two vectors per node held beside it: the inputs and the reference. Refused, before any
/// input is made, past the budget.
///
/// Order, to hold at most three vectors per node besides the runtime's own buffers: make the
/// inputs, compute the reference, run on a copy of the inputs and compare, drop the
/// reference, then run again in place on the inputs and compare the two runs bit for bit.
pub fn run_phase_within(
    verified: &VerifiedSchedule,
    phase: &Phase,
    seed: u64,
    limits: &Limits,
) -> Result<PhaseRun, String> {
    let machine = &verified.schedule().machine;
    let nodes = machine.compute_nodes().count();
    let fail = |e: runtime_lite::Error| format!("error: running phase `{}`: {e}", phase.name);
    let needs = Needs::in_process(machine, phase);
    needs
        .check(&phase.name, limits, needs.data_bytes.saturating_mul(2))
        .map_err(fail)?;
    let len = usize::try_from(phase.elements)
        .map_err(|_| format!("error: phase `{}` is too long to run here", phase.name))?;
    let inputs = random_inputs(phase.dtype, phase.op, nodes, len, seed);
    let expected = runtime_lite::reference_any(machine, phase, &inputs).map_err(fail)?;
    let first = runtime_lite::run_phase_any_within(verified, &phase.name, inputs.clone(), limits)
        .map_err(fail)?;
    let mismatch = runtime_lite::compare_any(machine, phase, &inputs, &expected, &first)
        .err()
        .map(|e| e.to_string());
    drop(expected);
    let second =
        runtime_lite::run_phase_any_within(verified, &phase.name, inputs, limits).map_err(fail)?;
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
    fn same<T: Element>(x: &[Vec<T>], b: &Buffers) -> bool {
        T::buffers_ref(b).is_some_and(|y| {
            x.len() == y.len()
                && x.iter().zip(y).all(|(p, q)| {
                    p.len() == q.len()
                        && p.iter()
                            .zip(q)
                            .all(|(s, t)| s.to_bits_u64() == t.to_bits_u64())
                })
        })
    }
    match a {
        Buffers::F32(x) => same(x, b),
        Buffers::F64(x) => same(x, b),
        Buffers::I32(x) => same(x, b),
        Buffers::I64(x) => same(x, b),
        Buffers::F16(x) => same(x, b),
        Buffers::BF16(x) => same(x, b),
    }
}

/// Random vectors for `nodes` nodes: values in a range where the op stays meaningful (products
/// near 1 so they neither overflow nor vanish; integer sums that also exercise wrapping).
/// 16-bit floats are drawn as `f32` and rounded to the type, products from `[0.75, 1.25)` so
/// that a product over a hundred nodes stays inside `f16`'s range.
///
/// Each element is drawn from a uniform distribution of its own type, set up once, and
/// written straight into its vector: no per-element set-up and no temporary copy.
pub fn random_inputs(dtype: DType, op: ReduceOp, nodes: usize, len: usize, seed: u64) -> Buffers {
    fn vectors<T: SampleUniform + Copy>(
        seed: u64,
        nodes: usize,
        len: usize,
        low: T,
        high: T,
        inclusive: bool,
    ) -> Vec<Vec<T>> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let dist = if inclusive {
            Uniform::new_inclusive(low, high)
        } else {
            Uniform::new(low, high)
        };
        match dist {
            Ok(dist) => (0..nodes)
                .map(|_| (&mut rng).sample_iter(&dist).take(len).collect())
                .collect(),
            // Unreachable for the fixed, non-empty ranges below.
            Err(_) => vec![vec![low; len]; nodes],
        }
    }
    let (lo, hi) = match op {
        ReduceOp::Prod => (0.5, 1.5),
        ReduceOp::Sum | ReduceOp::Mean => (-1.0, 1.0),
        ReduceOp::Max | ReduceOp::Min => (-1000.0, 1000.0),
    };
    let (low, high) = match (op, dtype == DType::I64) {
        (ReduceOp::Prod, _) => (-3, 3),
        (ReduceOp::Sum | ReduceOp::Mean, true) => (i64::MIN / 2, i64::MAX / 2),
        (ReduceOp::Sum | ReduceOp::Mean, false) => {
            (i64::from(i32::MIN) / 2, i64::from(i32::MAX) / 2)
        }
        (ReduceOp::Max | ReduceOp::Min, true) => (i64::MIN, i64::MAX),
        (ReduceOp::Max | ReduceOp::Min, false) => (i64::from(i32::MIN), i64::from(i32::MAX)),
    };
    let (s, n) = (seed, nodes);
    fn rounded<T>(drawn: Vec<Vec<f32>>, round: fn(f32) -> T) -> Vec<Vec<T>> {
        drawn
            .into_iter()
            .map(|v| v.into_iter().map(round).collect())
            .collect()
    }
    let halves = || {
        let (lo, hi) = if op == ReduceOp::Prod {
            (0.75, 1.25)
        } else {
            (lo as f32, hi as f32)
        };
        vectors(s, n, len, lo, hi, false)
    };
    match dtype {
        DType::F32 => Buffers::F32(vectors(s, n, len, lo as f32, hi as f32, false)),
        DType::F64 => Buffers::F64(vectors(s, n, len, lo, hi, false)),
        DType::I32 => Buffers::I32(vectors(s, n, len, low as i32, high as i32, true)),
        DType::I64 => Buffers::I64(vectors(s, n, len, low, high, true)),
        DType::F16 => Buffers::F16(rounded(halves(), half::f16::from_f32)),
        DType::BF16 => Buffers::BF16(rounded(halves(), half::bf16::from_f32)),
    }
}
