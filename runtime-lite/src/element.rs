//! Element types the runtime computes on, and how each one combines under a [`ReduceOp`].
//!
//! # Semantics of the combining operations
//!
//! | op     | integers (`i32`, `i64`)   | floats (`f32`, `f64`, `f16`, `bf16`)                    |
//! |--------|---------------------------|--------------------------------------------------------|
//! | `Sum`  | wrapping addition         | IEEE 754 addition (round to nearest)                   |
//! | `Prod` | wrapping multiplication   | IEEE 754 multiplication                                 |
//! | `Max`  | larger value              | larger value; see below                                 |
//! | `Min`  | smaller value             | smaller value; see below                                |
//! | `Mean` | wrapping addition         | IEEE 754 addition                                       |
//!
//! `Mean` combines like `Sum`; the schedule's `Scale` instructions then divide each result
//! once by the number of compute nodes ([`Element::divide_into`]): IEEE 754 division by the
//! divisor converted to the type for floats, truncating division (toward zero) for integers.
//!
//! Integer arithmetic wraps, so a sum that overflows gives the same bits on every node and in
//! every run, and never panics.
//!
//! # The 16-bit floats
//!
//! `f16` (IEEE 754 binary16) and `bf16` (bfloat16) are held as [`half::f16`] and
//! [`half::bf16`], and every combination rounds to the element type: `a ⊕ b` is computed in
//! `f32` and rounded once, to nearest even, back to 16 bits. A sum over a schedule therefore
//! accumulates in the element type, one rounding per `Reduce`, as a half-precision allreduce
//! on GPUs does; it is not carried in a wider type between steps. For `+` and `×` this is the
//! correctly rounded 16-bit result (`f32` has more than twice the significand bits of either
//! type plus two, so rounding twice never differs from rounding once). A mean's division
//! (`Scale`) is likewise computed in `f32`, `x / (divisor as f32)`, and rounded once to 16
//! bits. Sums that leave the type's range give ±infinity, as in IEEE 754 (the largest finite
//! `f16` is 65504).
//!
//! Float `Max` and `Min` are defined so that the result over a set of inputs does not depend on
//! the order in which they are combined, down to the bit:
//! - a NaN operand is ignored: `max(NaN, x) = max(x, NaN) = x` (as [`f32::max`]);
//! - two NaN operands give the canonical quiet NaN ([`f32::NAN`]), whatever their payloads;
//! - `+0.0` counts as larger than `-0.0`, so `max(-0.0, +0.0) = +0.0` and
//!   `min(-0.0, +0.0) = -0.0` in either operand order.
//!
//! The combination is therefore commutative and associative, and a float max/min allreduce is
//! bit-exact against any reference. Float sums and products are commutative but not
//! associative: their bits depend on the order of combination, which a schedule fixes, so a
//! given schedule is still bit-reproducible run to run.

use crate::buffer::{AnyBuffer, Buffers};
use half::{bf16, f16};
use schedule_ir::{DType, ReduceOp};
use std::fmt;

mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for f64 {}
    impl Sealed for i32 {}
    impl Sealed for i64 {}
    impl Sealed for half::f16 {}
    impl Sealed for half::bf16 {}
}

/// A type the runtime can hold in buffers and combine: `f32`, `f64`, `i32`, `i64`, `f16` or
/// `bf16`.
///
/// The trait is sealed: each implementation corresponds to exactly one [`DType`].
pub trait Element:
    Copy + PartialEq + fmt::Debug + fmt::Display + Send + Sync + 'static + sealed::Sealed
{
    /// The schedule IR's name for this type.
    const DTYPE: DType;
    /// The value scratch buffers start with.
    const ZERO: Self;
    /// Whether the type is a float (compared with a tolerance, see [`crate::compare`]).
    const IS_FLOAT: bool;
    /// Machine epsilon for floats; 0 for integers.
    const EPSILON: f64;
    /// The smallest positive normal value for floats; 0 for integers.
    const MIN_POSITIVE: f64;

    /// `a ⊕ b` under `op`. The runtime always calls it as `combine(op, destination, incoming)`.
    fn combine(op: ReduceOp, a: Self, b: Self) -> Self;

    /// `dst[i] = combine(op, dst[i], src[i])` for every `i` below the shorter length.
    /// Dispatches on `op` once, so the inner loop is a plain vectorisable loop.
    fn combine_into(op: ReduceOp, dst: &mut [Self], src: &[Self]);

    /// `x = x / divisor` for every `x` in `values`: IEEE 754 division by `divisor` converted
    /// to the type (round to nearest) for floats, division truncating toward zero for integers
    /// (exact: an `i32` is divided in `i64`). A `divisor` of 0 leaves the values unchanged
    /// (plans refuse such a scale before anything runs).
    fn divide_into(values: &mut [Self], divisor: u32);

    /// The value as an `f64` (exact for every float type and `i32`; rounded for large `i64`).
    fn to_f64(self) -> f64;

    /// The value's bit pattern, zero-extended; equal bits mean identical values.
    fn to_bits_u64(self) -> u64;

    /// Appends the little-endian bytes of every element of `src` to `out`. For transports that
    /// move bytes (sockets, `MPI_BYTE`).
    fn write_le_bytes(src: &[Self], out: &mut Vec<u8>);

    /// Appends the elements encoded little-endian in `bytes` to `out`. Returns `false`, and
    /// appends nothing, if `bytes.len()` is not a multiple of the element size.
    fn read_le_bytes(bytes: &[u8], out: &mut Vec<Self>) -> bool;

    /// Wraps one node's vector as a dtype-erased [`AnyBuffer`].
    fn into_any(data: Vec<Self>) -> AnyBuffer;

    /// Borrows the vector inside `buffer` if it holds this type.
    fn slice_mut(buffer: &mut AnyBuffer) -> Option<&mut [Self]>;

    /// Wraps every node's vector as dtype-erased [`Buffers`].
    fn into_buffers(data: Vec<Vec<Self>>) -> Buffers;

    /// Unwraps `buffers` if they hold this type, or gives them back.
    fn from_buffers(buffers: Buffers) -> Result<Vec<Vec<Self>>, Buffers>;

    /// Borrows the vectors inside `buffers` if they hold this type.
    fn buffers_ref(buffers: &Buffers) -> Option<&[Vec<Self>]>;
}

/// Order-independent float max: NaN ignored, two NaNs give the canonical NaN, +0 > -0.
macro_rules! float_max {
    ($t:ty, $a:expr, $b:expr) => {{
        let (a, b): ($t, $t) = ($a, $b);
        if a.is_nan() {
            if b.is_nan() {
                <$t>::NAN
            } else {
                b
            }
        } else if b.is_nan() || a > b {
            a
        } else if b > a {
            b
        } else if a.is_sign_positive() {
            // Equal values: only ±0 can differ in bits.
            a
        } else {
            b
        }
    }};
}

/// Order-independent float min: NaN ignored, two NaNs give the canonical NaN, -0 < +0.
macro_rules! float_min {
    ($t:ty, $a:expr, $b:expr) => {{
        let (a, b): ($t, $t) = ($a, $b);
        if a.is_nan() {
            if b.is_nan() {
                <$t>::NAN
            } else {
                b
            }
        } else if b.is_nan() || a < b {
            a
        } else if b < a {
            b
        } else if a.is_sign_negative() {
            a
        } else {
            b
        }
    }};
}

macro_rules! common_impl {
    ($t:ty, $variant:ident) => {
        fn write_le_bytes(src: &[Self], out: &mut Vec<u8>) {
            out.reserve(std::mem::size_of_val(src));
            for x in src {
                out.extend_from_slice(&x.to_le_bytes());
            }
        }

        fn read_le_bytes(bytes: &[u8], out: &mut Vec<Self>) -> bool {
            const SIZE: usize = std::mem::size_of::<$t>();
            if bytes.len() % SIZE != 0 {
                return false;
            }
            out.reserve(bytes.len() / SIZE);
            for raw in bytes.chunks_exact(SIZE) {
                let mut le = [0u8; SIZE];
                le.copy_from_slice(raw);
                out.push(<$t>::from_le_bytes(le));
            }
            true
        }

        fn into_any(data: Vec<Self>) -> AnyBuffer {
            AnyBuffer::$variant(data)
        }

        fn slice_mut(buffer: &mut AnyBuffer) -> Option<&mut [Self]> {
            match buffer {
                AnyBuffer::$variant(v) => Some(v),
                _ => None,
            }
        }

        fn into_buffers(data: Vec<Vec<Self>>) -> Buffers {
            Buffers::$variant(data)
        }

        fn from_buffers(buffers: Buffers) -> Result<Vec<Vec<Self>>, Buffers> {
            match buffers {
                Buffers::$variant(v) => Ok(v),
                other => Err(other),
            }
        }

        fn buffers_ref(buffers: &Buffers) -> Option<&[Vec<Self>]> {
            match buffers {
                Buffers::$variant(v) => Some(v),
                _ => None,
            }
        }
    };
}

macro_rules! float_element {
    ($t:ty, $variant:ident) => {
        impl Element for $t {
            const DTYPE: DType = DType::$variant;
            const ZERO: Self = 0.0;
            const IS_FLOAT: bool = true;
            const EPSILON: f64 = <$t>::EPSILON as f64;
            const MIN_POSITIVE: f64 = <$t>::MIN_POSITIVE as f64;

            fn combine(op: ReduceOp, a: Self, b: Self) -> Self {
                match op {
                    ReduceOp::Sum | ReduceOp::Mean => a + b,
                    ReduceOp::Prod => a * b,
                    ReduceOp::Max => float_max!($t, a, b),
                    ReduceOp::Min => float_min!($t, a, b),
                }
            }

            fn combine_into(op: ReduceOp, dst: &mut [Self], src: &[Self]) {
                let pairs = dst.iter_mut().zip(src);
                match op {
                    ReduceOp::Sum | ReduceOp::Mean => pairs.for_each(|(d, s)| *d += *s),
                    ReduceOp::Prod => pairs.for_each(|(d, s)| *d *= *s),
                    ReduceOp::Max => pairs.for_each(|(d, s)| *d = float_max!($t, *d, *s)),
                    ReduceOp::Min => pairs.for_each(|(d, s)| *d = float_min!($t, *d, *s)),
                }
            }

            #[allow(clippy::cast_precision_loss, clippy::cast_possible_truncation)]
            fn divide_into(values: &mut [Self], divisor: u32) {
                if divisor == 0 {
                    return;
                }
                let d = divisor as $t;
                values.iter_mut().for_each(|x| *x /= d);
            }

            fn to_f64(self) -> f64 {
                f64::from(self)
            }

            fn to_bits_u64(self) -> u64 {
                u64::from(self.to_bits())
            }

            common_impl!($t, $variant);
        }
    };
}

macro_rules! int_element {
    ($t:ty, $variant:ident, $unsigned:ty) => {
        impl Element for $t {
            const DTYPE: DType = DType::$variant;
            const ZERO: Self = 0;
            const IS_FLOAT: bool = false;
            const EPSILON: f64 = 0.0;
            const MIN_POSITIVE: f64 = 0.0;

            fn combine(op: ReduceOp, a: Self, b: Self) -> Self {
                match op {
                    ReduceOp::Sum | ReduceOp::Mean => a.wrapping_add(b),
                    ReduceOp::Prod => a.wrapping_mul(b),
                    ReduceOp::Max => a.max(b),
                    ReduceOp::Min => a.min(b),
                }
            }

            fn combine_into(op: ReduceOp, dst: &mut [Self], src: &[Self]) {
                let pairs = dst.iter_mut().zip(src);
                match op {
                    ReduceOp::Sum | ReduceOp::Mean => {
                        pairs.for_each(|(d, s)| *d = d.wrapping_add(*s))
                    }
                    ReduceOp::Prod => pairs.for_each(|(d, s)| *d = d.wrapping_mul(*s)),
                    ReduceOp::Max => pairs.for_each(|(d, s)| *d = (*d).max(*s)),
                    ReduceOp::Min => pairs.for_each(|(d, s)| *d = (*d).min(*s)),
                }
            }

            #[allow(clippy::cast_possible_truncation)]
            fn divide_into(values: &mut [Self], divisor: u32) {
                if divisor == 0 {
                    return;
                }
                // In i64, where every divisor fits and the quotient of an i32 by a positive
                // divisor fits back; i64 / positive never overflows.
                let d = i64::from(divisor);
                values
                    .iter_mut()
                    .for_each(|x| *x = (i64::from(*x).wrapping_div(d)) as $t);
            }

            #[allow(clippy::cast_precision_loss)]
            fn to_f64(self) -> f64 {
                self as f64
            }

            fn to_bits_u64(self) -> u64 {
                // Reinterpret as unsigned of the same width, then zero-extend.
                u64::from(self as $unsigned)
            }

            common_impl!($t, $variant);
        }
    };
}

/// A 16-bit float: each operation computed in `f32` and rounded once to the type (see the
/// [module doc](self)).
macro_rules! half_element {
    ($t:ty, $variant:ident) => {
        impl Element for $t {
            const DTYPE: DType = DType::$variant;
            const ZERO: Self = <$t>::ZERO;
            const IS_FLOAT: bool = true;
            const EPSILON: f64 = <$t>::EPSILON.to_f64_const();
            const MIN_POSITIVE: f64 = <$t>::MIN_POSITIVE.to_f64_const();

            fn combine(op: ReduceOp, a: Self, b: Self) -> Self {
                match op {
                    ReduceOp::Sum | ReduceOp::Mean => <$t>::from_f32(a.to_f32() + b.to_f32()),
                    ReduceOp::Prod => <$t>::from_f32(a.to_f32() * b.to_f32()),
                    ReduceOp::Max => float_max!($t, a, b),
                    ReduceOp::Min => float_min!($t, a, b),
                }
            }

            fn combine_into(op: ReduceOp, dst: &mut [Self], src: &[Self]) {
                let pairs = dst.iter_mut().zip(src);
                let round = <$t>::from_f32;
                match op {
                    ReduceOp::Sum | ReduceOp::Mean => {
                        pairs.for_each(|(d, s)| *d = round(d.to_f32() + s.to_f32()))
                    }
                    ReduceOp::Prod => pairs.for_each(|(d, s)| *d = round(d.to_f32() * s.to_f32())),
                    ReduceOp::Max => pairs.for_each(|(d, s)| *d = float_max!($t, *d, *s)),
                    ReduceOp::Min => pairs.for_each(|(d, s)| *d = float_min!($t, *d, *s)),
                }
            }

            #[allow(clippy::cast_precision_loss)]
            fn divide_into(values: &mut [Self], divisor: u32) {
                if divisor == 0 {
                    return;
                }
                let d = divisor as f32;
                values
                    .iter_mut()
                    .for_each(|x| *x = <$t>::from_f32(x.to_f32() / d));
            }

            fn to_f64(self) -> f64 {
                f64::from(self.to_f32())
            }

            fn to_bits_u64(self) -> u64 {
                u64::from(self.to_bits())
            }

            common_impl!($t, $variant);
        }
    };
}

float_element!(f32, F32);
float_element!(f64, F64);
int_element!(i32, I32, u32);
int_element!(i64, I64, u64);
half_element!(f16, F16);
half_element!(bf16, BF16);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn float_max_min_are_order_independent() {
        let values = [
            f32::NAN,
            -f32::NAN,
            0.0,
            -0.0,
            1.5,
            -1.5,
            f32::INFINITY,
            f32::NEG_INFINITY,
        ];
        for op in [ReduceOp::Max, ReduceOp::Min] {
            for &a in &values {
                for &b in &values {
                    let ab = f32::combine(op, a, b);
                    let ba = f32::combine(op, b, a);
                    assert_eq!(ab.to_bits(), ba.to_bits(), "{op}({a}, {b})");
                    for &c in &values {
                        let left = f32::combine(op, f32::combine(op, a, b), c);
                        let right = f32::combine(op, a, f32::combine(op, b, c));
                        assert_eq!(left.to_bits(), right.to_bits(), "{op}({a}, {b}, {c})");
                    }
                }
            }
        }
        assert_eq!(
            f32::combine(ReduceOp::Max, -0.0, 0.0).to_bits(),
            0.0f32.to_bits()
        );
        assert_eq!(
            f32::combine(ReduceOp::Min, 0.0, -0.0).to_bits(),
            (-0.0f32).to_bits()
        );
        assert_eq!(f64::combine(ReduceOp::Max, f64::NAN, 2.0), 2.0);
        assert_eq!(f64::combine(ReduceOp::Min, 2.0, f64::NAN), 2.0);
    }

    #[test]
    fn combine_into_matches_combine() {
        let a = [1.0f64, -2.0, f64::NAN, 0.0];
        let b = [3.0f64, f64::NAN, 1.0, -0.0];
        for op in [
            ReduceOp::Sum,
            ReduceOp::Prod,
            ReduceOp::Max,
            ReduceOp::Min,
            ReduceOp::Mean,
        ] {
            let mut dst = a;
            f64::combine_into(op, &mut dst, &b);
            for i in 0..a.len() {
                assert_eq!(dst[i].to_bits(), f64::combine(op, a[i], b[i]).to_bits());
            }
        }
    }

    #[test]
    fn integers_wrap() {
        assert_eq!(i32::combine(ReduceOp::Sum, i32::MAX, 1), i32::MIN);
        assert_eq!(i64::combine(ReduceOp::Prod, i64::MAX, 2), -2);
        let mut dst = [i32::MAX, 7];
        i32::combine_into(ReduceOp::Sum, &mut dst, &[1, 1]);
        assert_eq!(dst, [i32::MIN, 8]);
    }

    #[test]
    fn mean_adds_and_divides() {
        assert_eq!(i32::combine(ReduceOp::Mean, i32::MAX, 1), i32::MIN);
        let mut ints = [7i32, -7, i32::MIN, 3];
        i32::divide_into(&mut ints, 2);
        assert_eq!(ints, [3, -3, i32::MIN / 2, 1]);
        let mut big = [i64::MIN, -9, 9];
        i64::divide_into(&mut big, u32::MAX);
        assert_eq!(big, [i64::MIN / i64::from(u32::MAX), 0, 0]);
        let mut floats = [1.0f32, -3.0, 0.1];
        f32::divide_into(&mut floats, 3);
        assert_eq!(
            floats.map(f32::to_bits),
            [1.0f32 / 3.0, -1.0, 0.1 / 3.0].map(f32::to_bits)
        );
        let mut same = [5i64];
        i64::divide_into(&mut same, 0);
        assert_eq!(same, [5]);
    }

    #[test]
    fn sixteen_bit_sums_round_to_the_type_at_every_step() {
        // 2048 + 1 is not an f16 (its spacing there is 2): the tie rounds to even, 2048.
        let big = f16::from_f32(2048.0);
        let one = f16::ONE;
        assert_eq!(f16::combine(ReduceOp::Sum, big, one), big);
        // So the order of a sum shows: (2048 + 1) + 1 = 2048, but 2048 + (1 + 1) = 2050.
        let left = f16::combine(ReduceOp::Sum, f16::combine(ReduceOp::Sum, big, one), one);
        let right = f16::combine(ReduceOp::Sum, big, f16::combine(ReduceOp::Sum, one, one));
        assert_eq!((left.to_f32(), right.to_f32()), (2048.0, 2050.0));
        // bf16 has 8 significand bits: 256 + 1 rounds to 256.
        let big = bf16::from_f32(256.0);
        assert_eq!(bf16::combine(ReduceOp::Sum, big, bf16::ONE), big);
        let mut dst = [big, bf16::from_f32(3.0)];
        bf16::combine_into(ReduceOp::Sum, &mut dst, &[bf16::ONE, bf16::ONE]);
        assert_eq!(dst.map(bf16::to_f32), [256.0, 4.0]);
        // Beyond the largest finite f16 (65504) a sum is infinite, as in IEEE 754.
        let max = f16::MAX;
        assert!(f16::combine(ReduceOp::Sum, max, max).is_infinite());
        assert_eq!(
            f16::combine(ReduceOp::Prod, f16::from_f32(3.0), f16::from_f32(0.5)),
            f16::from_f32(1.5)
        );
    }

    #[test]
    fn sixteen_bit_max_min_are_order_independent() {
        let values = [
            f16::NAN,
            -f16::NAN,
            f16::ZERO,
            f16::NEG_ZERO,
            f16::ONE,
            f16::INFINITY,
        ];
        for op in [ReduceOp::Max, ReduceOp::Min] {
            for &a in &values {
                for &b in &values {
                    let (ab, ba) = (f16::combine(op, a, b), f16::combine(op, b, a));
                    assert_eq!(ab.to_bits(), ba.to_bits(), "{op}({a}, {b})");
                }
            }
        }
        let (z, nz) = (bf16::ZERO, bf16::NEG_ZERO);
        assert_eq!(bf16::combine(ReduceOp::Max, nz, z).to_bits(), z.to_bits());
        assert_eq!(bf16::combine(ReduceOp::Min, z, nz).to_bits(), nz.to_bits());
        assert_eq!(
            bf16::combine(ReduceOp::Max, bf16::NAN, bf16::ONE),
            bf16::ONE
        );
    }

    #[test]
    fn sixteen_bit_mean_divides_in_f32_and_rounds_once() {
        let mut halves = [f16::from_f32(1.0), f16::from_f32(-3.0), f16::from_f32(0.1)];
        f16::divide_into(&mut halves, 3);
        let once = |x: f32| f16::from_f32(x / 3.0).to_bits();
        assert_eq!(
            halves.map(f16::to_bits),
            [once(1.0), once(-3.0), once(f16::from_f32(0.1).to_f32())]
        );
        assert_eq!(halves[1].to_f32(), -1.0);
        let mut b = [bf16::from_f32(10.0)];
        bf16::divide_into(&mut b, 4);
        assert_eq!(b[0].to_f32(), 2.5);
        bf16::divide_into(&mut b, 0);
        assert_eq!(b[0].to_f32(), 2.5);
        assert_eq!(<f16 as Element>::EPSILON, 1.0 / 1024.0);
        assert_eq!(<bf16 as Element>::EPSILON, 1.0 / 128.0);
    }

    #[test]
    fn bytes_round_trip() {
        let data = [1.25f32, -0.0, f32::INFINITY];
        let mut bytes = Vec::new();
        f32::write_le_bytes(&data, &mut bytes);
        assert_eq!(bytes.len(), 12);
        let mut back = Vec::new();
        assert!(f32::read_le_bytes(&bytes, &mut back));
        assert_eq!(
            back.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
            data.map(f32::to_bits)
        );
        assert!(!i64::read_le_bytes(&bytes[..5], &mut Vec::new()));
        let halves = [f16::from_f32(-1.5), f16::NAN, f16::from_f32(2.0)];
        let mut bytes = Vec::new();
        f16::write_le_bytes(&halves, &mut bytes);
        assert_eq!(bytes.len(), 6);
        let mut back = Vec::new();
        assert!(f16::read_le_bytes(&bytes, &mut back));
        assert_eq!(
            back.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
            halves.map(f16::to_bits)
        );
        assert!(!bf16::read_le_bytes(&bytes[..3], &mut Vec::new()));
        assert_eq!(bf16::from_f32(-1.0).to_bits_u64(), 0xbf80);
        assert_eq!((-1i32).to_bits_u64(), 0xffff_ffff);
    }
}
