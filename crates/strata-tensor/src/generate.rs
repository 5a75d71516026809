//! Creation ops that compute their elements (`arange`, `rand`, `randn`) fill
//! a freshly allocated tensor in place, on its own device: the allocator is
//! asked first (a size it cannot hold is its typed out-of-memory error) and no
//! host buffer of the tensor's size is ever built.
//!
//! On the CPU the elements are written straight into the storage, in parallel
//! chunks. On a GPU a kernel computes the same sequence (in f64, or i64 for
//! integer `arange`) and the backend's conversion copy rounds it to the dtype.

use crate::backend::Arg;
use crate::dtype::{DType, Element};
use crate::error::Result;
use crate::random::{sample, Dist};
use crate::scalar::Scalar;
use crate::storage::AccessGuard;
use crate::tensor::Tensor;
use rayon::prelude::*;
use strata_alloc::Device;

/// A sequence to write into a contiguous tensor, element `i` at position `i`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Sequence {
    /// `start + i * step` in i64 (wrapping), converted to the dtype.
    IntRange { start: i64, step: i64 },
    /// `start + i * step` in f64 (PyTorch's accumulate type of f32 and
    /// f64), converted to the dtype, rounded as PyTorch's CPU kernel rounds
    /// it (see [`Sequence::at`]); `len` elements, `f32` for an f32 tensor.
    FloatRange {
        start: f64,
        step: f64,
        len: u64,
        f32: bool,
    },
    /// `start + i * step` in f32 (PyTorch's accumulate type of f16/bf16),
    /// rounded as PyTorch's CPU kernel rounds it; `len` elements, `bf16`
    /// for a bf16 tensor (else f16).
    Float32Range {
        start: f32,
        step: f32,
        len: u64,
        bf16: bool,
    },
    /// Seeded random values (see [`crate::random`]).
    Random { dist: Dist, seed: u64 },
    /// Seeded random integers `low + (x mod range)`, `x` 64 random bits
    /// (see [`crate::random::randint`]), in i64.
    RandInt { low: i64, range: u64, seed: u64 },
}

impl Sequence {
    /// The operation that writes this sequence (for errors).
    pub(crate) fn op(&self) -> &'static str {
        match self {
            Sequence::IntRange { .. }
            | Sequence::FloatRange { .. }
            | Sequence::Float32Range { .. } => "arange",
            Sequence::Random {
                dist: crate::random::Dist::Normal,
                ..
            } => "randn",
            Sequence::Random { .. } => "rand",
            Sequence::RandInt { .. } => "randint",
        }
    }

    /// Element `i` as a scalar of the sequence's computation type.
    pub(crate) fn at(self, i: u64) -> Scalar {
        match self {
            Sequence::IntRange { start, step } => {
                Scalar::Int(start.wrapping_add((i as i64).wrapping_mul(step)))
            }
            Sequence::FloatRange {
                start,
                step,
                len,
                f32,
            } => {
                // Lanes of PyTorch's AVX2 vectors: 4 f64 or 8 f32.
                let lanes = if f32 { 8 } else { 4 };
                let v = match vector_lane(i, len, lanes) {
                    Some((first, 0)) => step.mul_add(first as f64, start),
                    Some((first, k)) => {
                        let mut base = step.mul_add(first as f64, start);
                        if f32 {
                            // The vector's base is an f32.
                            base = base as f32 as f64;
                        }
                        (k as f64).mul_add(step, base)
                    }
                    None => step.mul_add(i as f64, start),
                };
                Scalar::Float(v)
            }
            Sequence::Float32Range {
                start,
                step,
                len,
                bf16,
            } => {
                let v = match vector_lane(i, len, 16) {
                    Some((first, 0)) => step.mul_add(first as f32, start),
                    Some((first, k)) => {
                        // The vector's base is a 16-bit float.
                        let b = step.mul_add(first as f32, start);
                        if bf16 {
                            // PyTorch's bf16 vector adds the rounded product.
                            half::bf16::from_f32(b).to_f32() + k as f32 * step
                        } else {
                            (k as f32).mul_add(step, half::f16::from_f32(b).to_f32())
                        }
                    }
                    None => step.mul_add(i as f32, start),
                };
                Scalar::Float(f64::from(v))
            }
            Sequence::Random { dist, seed } => Scalar::Float(sample(dist, seed, i)),
            Sequence::RandInt { low, range, seed } => {
                Scalar::Int(crate::random::randint(seed, i, low, range))
            }
        }
    }

    /// The dtype a device kernel computes the sequence in.
    #[allow(dead_code)] // read by the CUDA backend only
    pub(crate) fn compute_dtype(self) -> DType {
        match self {
            Sequence::IntRange { .. } | Sequence::RandInt { .. } => DType::I64,
            Sequence::Float32Range { .. } => DType::F32,
            _ => DType::F64,
        }
    }
}

/// Where PyTorch's CPU `arange` kernel (one thread, AVX2) computes element
/// `i` of `len`: its vectorised loop fills blocks of `2 * lanes` elements, a
/// vector of `lanes` at a time, element `first + k` as `base + k * step` with
/// `base = start + first * step` converted to the tensor's dtype; the
/// elements after the last whole block are `start + i * step` (`None`
/// here). Its compiler fuses each `a + b * c` into one rounding (an FMA),
/// except the bf16 vector's `base + k * step`. (PyTorch's values, e.g.
/// `arange(-1, 1, 0.3, dtype=f64)[3]` is `-0.10000000000000003`, not the
/// `-1 + 3 * 0.3 = -0.10000000000000009` of two roundings.)
fn vector_lane(i: u64, len: u64, lanes: u64) -> Option<(u64, u64)> {
    if i < len - len % (2 * lanes) {
        let k = i % lanes;
        Some((i - k, k))
    } else {
        None
    }
}

/// Elements per parallel chunk on the CPU.
const CHUNK: usize = 1 << 16;

impl Tensor {
    /// A new contiguous tensor of `shape` and `dtype` on `device` holding `seq`.
    pub(crate) fn generated(
        shape: &[usize],
        dtype: DType,
        device: Device,
        seq: Sequence,
    ) -> Result<Tensor> {
        let out = Tensor::uninit(seq.op(), shape, dtype, device)?;
        if out.numel() == 0 {
            return Ok(out);
        }
        {
            let _g = AccessGuard::lock(Some(out.storage()), &[]);
            out.backend()?.generate(&out.arg(), seq)?;
        }
        Ok(out)
    }
}

/// Writes `seq` into the fresh, contiguous host operand `out` (its storage
/// locked for writing by the caller): the CPU backend's `generate`.
pub(crate) fn fill_host<T: Element>(out: &Arg, seq: Sequence) {
    let n = out.layout.numel();
    // SAFETY: `out` is a fresh contiguous CPU tensor of `n` elements of `T`
    // at offset 0, whose storage holds exactly `n * size_of::<T>()` bytes
    // (suitably aligned by the allocator); the caller holds its write lock and
    // nothing else references the memory while the slice lives.
    let data = unsafe { std::slice::from_raw_parts_mut(out.mem.host_ptr() as *mut T, n) };
    data.par_chunks_mut(CHUNK)
        .enumerate()
        .for_each(|(c, chunk)| {
            let base = (c * CHUNK) as u64;
            for (k, x) in chunk.iter_mut().enumerate() {
                *x = T::from_scalar(seq.at(base + k as u64));
            }
        });
}
