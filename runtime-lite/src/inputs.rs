//! Deterministic test inputs from `(seed, node)`: the same vectors in every process, so a rank
//! of an MPI job and an in-process replay of the whole machine start from identical bits.
//!
//! # The generator
//!
//! Element `i` of compute node `n` (its position among the machine's compute nodes, which is
//! also its MPI rank) is drawn from 64 random bits
//! `bits(seed, n, i) = mix(base(seed, n) + (i + 1) · γ)`, with wrapping `u64` arithmetic, where
//! - `γ = 0x9E37_79B9_7F4A_7C15`;
//! - `mix(z)`: `z = (z ^ (z >> 30)) · 0xBF58_476D_1CE4_E5B9`;
//!   `z = (z ^ (z >> 27)) · 0x94D0_49BB_1331_11EB`; `z ^ (z >> 31)`;
//! - `base(seed, n) = mix(mix(seed) ^ (n + 1) · γ)`.
//!
//! That is the SplitMix64 stream started at `base(seed, n)`: element `i` does not depend on
//! the others, so any node can make its own vector without making anyone else's. The bits
//! become a value of the element type as follows (`u` is a uniform draw in `[0, 1)`):
//!
//! | dtype | `u` from | value for `Sum`, `Max`, `Min`, `Mean` | value for `Prod` |
//! |-------|----------|---------------------------------------|------------------|
//! | `f32` | `(bits >> 40) · 2⁻²⁴` | `-1000 + 2000·u` (in `f32`) | `0.5 + 1.5·u` (in `f32`) |
//! | `f64` | `(bits >> 11) · 2⁻⁵³` | `-1e6 + 2e6·u` (in `f64`) | `0.5 + 1.5·u` (in `f64`) |
//! | `i32` | — | the low 32 bits, as `i32` (full range: sums wrap) | the same |
//! | `i64` | — | the 64 bits, as `i64` | the same |
//! | `f16`, `bf16` | as `f32` | `-100 + 200·u` (in `f32`), rounded to the type | `0.75 + 0.5·u` (in `f32`), rounded |
//!
//! Float products are kept near 1 so that a product over many nodes stays a normal number; the
//! 16-bit types draw from narrower ranges, so that sums over thousands of nodes and products
//! over hundreds stay inside `f16`'s range (its largest finite value is 65504).

use crate::buffer::{AnyBuffer, Buffers};
use crate::element::Element;
use half::{bf16, f16};
use schedule_ir::{DType, ReduceOp};

const GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

/// SplitMix64's output function.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The 64 random bits of element `i` of node `node`'s vector for `seed`.
pub fn bits(seed: u64, node: usize, i: usize) -> u64 {
    let base = stream(seed, node);
    mix(base.wrapping_add((i as u64).wrapping_add(1).wrapping_mul(GAMMA)))
}

fn stream(seed: u64, node: usize) -> u64 {
    mix(mix(seed) ^ (node as u64).wrapping_add(1).wrapping_mul(GAMMA))
}

/// How one element type turns random bits into a value.
trait Draw: Sized {
    fn draw(bits: u64, op: ReduceOp) -> Self;
}

impl Draw for f32 {
    fn draw(bits: u64, op: ReduceOp) -> Self {
        let u = (bits >> 40) as f32 * (1.0 / (1u64 << 24) as f32);
        match op {
            ReduceOp::Prod => 0.5 + 1.5 * u,
            _ => -1000.0 + 2000.0 * u,
        }
    }
}

impl Draw for f64 {
    fn draw(bits: u64, op: ReduceOp) -> Self {
        let u = (bits >> 11) as f64 * (1.0 / (1u64 << 53) as f64);
        match op {
            ReduceOp::Prod => 0.5 + 1.5 * u,
            _ => -1.0e6 + 2.0e6 * u,
        }
    }
}

impl Draw for i32 {
    fn draw(bits: u64, _op: ReduceOp) -> Self {
        bits as u32 as i32
    }
}

impl Draw for i64 {
    fn draw(bits: u64, _op: ReduceOp) -> Self {
        bits as i64
    }
}

impl Draw for f16 {
    fn draw(bits: u64, op: ReduceOp) -> Self {
        f16::from_f32(draw_half(bits, op))
    }
}

impl Draw for bf16 {
    fn draw(bits: u64, op: ReduceOp) -> Self {
        bf16::from_f32(draw_half(bits, op))
    }
}

/// The `f32` value that a 16-bit float element rounds from.
fn draw_half(bits: u64, op: ReduceOp) -> f32 {
    let u = (bits >> 40) as f32 * (1.0 / (1u64 << 24) as f32);
    match op {
        ReduceOp::Prod => 0.75 + 0.5 * u,
        _ => -100.0 + 200.0 * u,
    }
}

fn draw_vec<T: Draw>(op: ReduceOp, seed: u64, node: usize, len: usize) -> Vec<T> {
    let base = stream(seed, node);
    (0..len as u64)
        .map(|i| {
            let b = mix(base.wrapping_add(i.wrapping_add(1).wrapping_mul(GAMMA)));
            T::draw(b, op)
        })
        .collect()
}

/// The input vector of compute node `node` (its position among the compute nodes) for a
/// phase of element type `dtype` and operation `op`: `len` elements from `seed`, as the
/// [module doc](self) defines them.
pub fn generate_any(dtype: DType, op: ReduceOp, seed: u64, node: usize, len: usize) -> AnyBuffer {
    match dtype {
        DType::F32 => AnyBuffer::F32(draw_vec(op, seed, node, len)),
        DType::F64 => AnyBuffer::F64(draw_vec(op, seed, node, len)),
        DType::I32 => AnyBuffer::I32(draw_vec(op, seed, node, len)),
        DType::I64 => AnyBuffer::I64(draw_vec(op, seed, node, len)),
        DType::F16 => AnyBuffer::F16(draw_vec(op, seed, node, len)),
        DType::BF16 => AnyBuffer::BF16(draw_vec(op, seed, node, len)),
    }
}

/// [`generate_any`] for a statically known element type.
pub fn generate<T: Element>(op: ReduceOp, seed: u64, node: usize, len: usize) -> Vec<T> {
    let buffers = match T::DTYPE {
        DType::F32 => Buffers::F32(vec![draw_vec(op, seed, node, len)]),
        DType::F64 => Buffers::F64(vec![draw_vec(op, seed, node, len)]),
        DType::I32 => Buffers::I32(vec![draw_vec(op, seed, node, len)]),
        DType::I64 => Buffers::I64(vec![draw_vec(op, seed, node, len)]),
        DType::F16 => Buffers::F16(vec![draw_vec(op, seed, node, len)]),
        DType::BF16 => Buffers::BF16(vec![draw_vec(op, seed, node, len)]),
    };
    // `T::DTYPE` names `T`'s own variant, so the conversion always succeeds.
    T::from_buffers(buffers)
        .ok()
        .and_then(|mut v| v.pop())
        .unwrap_or_default()
}

/// The inputs of every compute node, in node order: `generate(op, seed, n, len)` for
/// `n in 0..nodes`. What an in-process replay of an MPI job runs on.
pub fn generate_all<T: Element>(op: ReduceOp, seed: u64, nodes: usize, len: usize) -> Vec<Vec<T>> {
    (0..nodes).map(|n| generate(op, seed, n, len)).collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::panic)]
    use super::*;

    #[test]
    fn splitmix64_reference_values() {
        // SplitMix64 seeded with 0 starts 0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4.
        assert_eq!(mix(GAMMA), 0xE220_A839_7B1D_CDAF);
        assert_eq!(mix(GAMMA.wrapping_mul(2)), 0x6E78_9E6A_A1B9_65F4);
    }

    #[test]
    fn elements_are_independent_of_the_length() {
        let long: Vec<f32> = generate(ReduceOp::Sum, 7, 3, 100);
        let short: Vec<f32> = generate(ReduceOp::Sum, 7, 3, 10);
        assert_eq!(&long[..10], &short[..]);
        assert_eq!(
            long[5].to_bits(),
            f32::draw(bits(7, 3, 5), ReduceOp::Sum).to_bits()
        );
    }

    #[test]
    fn nodes_and_seeds_differ() {
        let a: Vec<i64> = generate(ReduceOp::Sum, 1, 0, 8);
        let b: Vec<i64> = generate(ReduceOp::Sum, 1, 1, 8);
        let c: Vec<i64> = generate(ReduceOp::Sum, 2, 0, 8);
        assert_ne!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn ranges() {
        let sums: Vec<f32> = generate(ReduceOp::Sum, 3, 0, 10_000);
        assert!(sums.iter().all(|x| (-1000.0..=1000.0).contains(x)));
        let prods: Vec<f64> = generate(ReduceOp::Prod, 3, 0, 10_000);
        assert!(prods.iter().all(|x| (0.5..2.0).contains(x)));
        let any = generate_any(DType::I32, ReduceOp::Max, 3, 2, 5);
        assert_eq!(any, AnyBuffer::I32(generate(ReduceOp::Max, 3, 2, 5)));
    }
}
