//! Dtype-erased buffers, for callers that learn the element type at run time (the CLI), and
//! the allocation of the runtime's own buffers.

use crate::element::Element;
use crate::error::Error;
use crate::plan::PhaseInfo;
use half::{bf16, f16};
use schedule_ir::DType;

/// One node's vector, of any element type the runtime supports.
#[derive(Clone, Debug, PartialEq)]
pub enum AnyBuffer {
    /// 32-bit floats.
    F32(Vec<f32>),
    /// 64-bit floats.
    F64(Vec<f64>),
    /// 32-bit integers.
    I32(Vec<i32>),
    /// 64-bit integers.
    I64(Vec<i64>),
    /// 16-bit IEEE 754 floats.
    F16(Vec<f16>),
    /// 16-bit bfloat16 floats.
    BF16(Vec<bf16>),
}

/// One vector per compute node, all of the same element type.
#[derive(Clone, Debug, PartialEq)]
pub enum Buffers {
    /// 32-bit floats.
    F32(Vec<Vec<f32>>),
    /// 64-bit floats.
    F64(Vec<Vec<f64>>),
    /// 32-bit integers.
    I32(Vec<Vec<i32>>),
    /// 64-bit integers.
    I64(Vec<Vec<i64>>),
    /// 16-bit IEEE 754 floats.
    F16(Vec<Vec<f16>>),
    /// 16-bit bfloat16 floats.
    BF16(Vec<Vec<bf16>>),
}

impl AnyBuffer {
    /// The element type held.
    pub fn dtype(&self) -> DType {
        match self {
            AnyBuffer::F32(_) => DType::F32,
            AnyBuffer::F64(_) => DType::F64,
            AnyBuffer::I32(_) => DType::I32,
            AnyBuffer::I64(_) => DType::I64,
            AnyBuffer::F16(_) => DType::F16,
            AnyBuffer::BF16(_) => DType::BF16,
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        match self {
            AnyBuffer::F32(v) => v.len(),
            AnyBuffer::F64(v) => v.len(),
            AnyBuffer::I32(v) => v.len(),
            AnyBuffer::I64(v) => v.len(),
            AnyBuffer::F16(v) => v.len(),
            AnyBuffer::BF16(v) => v.len(),
        }
    }

    /// Whether the buffer holds no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A buffer of `len` zeros of type `dtype`.
    pub fn zeros(dtype: DType, len: usize) -> AnyBuffer {
        match dtype {
            DType::F32 => AnyBuffer::F32(vec![0.0; len]),
            DType::F64 => AnyBuffer::F64(vec![0.0; len]),
            DType::I32 => AnyBuffer::I32(vec![0; len]),
            DType::I64 => AnyBuffer::I64(vec![0; len]),
            DType::F16 => AnyBuffer::F16(vec![f16::ZERO; len]),
            DType::BF16 => AnyBuffer::BF16(vec![bf16::ZERO; len]),
        }
    }
}

impl Buffers {
    /// The element type held.
    pub fn dtype(&self) -> DType {
        match self {
            Buffers::F32(_) => DType::F32,
            Buffers::F64(_) => DType::F64,
            Buffers::I32(_) => DType::I32,
            Buffers::I64(_) => DType::I64,
            Buffers::F16(_) => DType::F16,
            Buffers::BF16(_) => DType::BF16,
        }
    }

    /// Number of vectors (one per compute node).
    pub fn len(&self) -> usize {
        match self {
            Buffers::F32(v) => v.len(),
            Buffers::F64(v) => v.len(),
            Buffers::I32(v) => v.len(),
            Buffers::I64(v) => v.len(),
            Buffers::F16(v) => v.len(),
            Buffers::BF16(v) => v.len(),
        }
    }

    /// Whether there are no vectors.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `count` vectors of `len` zeros of type `dtype`.
    pub fn zeros(dtype: DType, count: usize, len: usize) -> Buffers {
        match dtype {
            DType::F32 => Buffers::F32(vec![vec![0.0; len]; count]),
            DType::F64 => Buffers::F64(vec![vec![0.0; len]; count]),
            DType::I32 => Buffers::I32(vec![vec![0; len]; count]),
            DType::I64 => Buffers::I64(vec![vec![0; len]; count]),
            DType::F16 => Buffers::F16(vec![vec![f16::ZERO; len]; count]),
            DType::BF16 => Buffers::BF16(vec![vec![bf16::ZERO; len]; count]),
        }
    }
}

macro_rules! from_vec {
    ($t:ty, $variant:ident) => {
        impl From<Vec<$t>> for AnyBuffer {
            fn from(v: Vec<$t>) -> Self {
                AnyBuffer::$variant(v)
            }
        }

        impl From<Vec<Vec<$t>>> for Buffers {
            fn from(v: Vec<Vec<$t>>) -> Self {
                Buffers::$variant(v)
            }
        }
    };
}

from_vec!(f32, F32);
from_vec!(f64, F64);
from_vec!(i32, I32);
from_vec!(i64, I64);
from_vec!(f16, F16);
from_vec!(bf16, BF16);

/// `count` vectors of the phase's length, zeroed; an error rather than an abort if they
/// cannot be allocated.
pub(crate) fn zeroed_buffers<T: Element>(
    count: usize,
    info: &PhaseInfo,
) -> Result<Vec<Vec<T>>, Error> {
    let mut buffers = Vec::with_capacity(count);
    for _ in 0..count {
        let mut buffer = Vec::new();
        buffer
            .try_reserve_exact(info.elements)
            .map_err(|_| Error::TooLarge {
                phase: info.name.clone(),
                elements: info.elements as u64,
            })?;
        buffer.resize(info.elements, T::ZERO);
        buffers.push(buffer);
    }
    Ok(buffers)
}
