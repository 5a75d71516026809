//! The vector norm of orders 1, 2 and of a general order `p` (not 0 or ±inf)
//! in the order and arithmetic of PyTorch's CPU kernel, so that the results agree
//! bit for bit: `aten/src/ATen/native/cpu/ReduceOpsKernel.cpp`
//! (`norm_kernel_tensor_iterator_impl` → `norm_kernel_cpu_impl`) runs
//! `binary_kernel_reduce` (`cpu/Reduce.h`) with `NormOps`
//! (`SharedReduceOps.h`): in the accumulate type (`opmath_type`: f32 for
//! f32, f16 and bf16, f64 for f64), `acc = acc + pow(|x|, p)` one element
//! at a time from 0, with `p` rounded to the accumulate type and `pow` the C
//! library's (`std::pow`), then `pow(acc, 1 / p)` with `1 / p` formed in the
//! accumulate type; order 1 runs `NormOneOps` the same way: `acc + |x|`,
//! no root; order 2 `NormTwoOps`: `acc + x * x` (separately rounded), then
//! `sqrt(acc)`. The elements of each output are visited in the order of
//! the TensorIterator that PyTorch builds for the reduction
//! ([`iter_order`]).
//!
//! Order 2 of an f32, f64 or bf16 input has a second, vectorised kernel in
//! PyTorch (`norm_kernel_tensor_iterator_impl`'s `binary_kernel_reduce_lastdim`
//! branch), taken when the reduced dims coalesce into one contiguous run
//! that the iterator walks innermost (`is_reduce_lastdim`): see
//! [`two_lastdim`] for its order, measured against PyTorch 2.15's AVX2
//! build (the CPU capability PyTorch picks on the machines this project
//! runs on; an AVX-512 build has twice the lanes and would differ).
//!
//! PyTorch splits a single output of at least 32768 (`GRAIN_SIZE`)
//! elements among its threads when it has several; this kernel follows its
//! one-thread order there (what `torch.set_num_threads(1)` gives).

use crate::backend::cpu::elementwise::base;
use crate::backend::Arg;
use crate::dtype::{DType, Element};
use rayon::prelude::*;

/// The accumulate types.
pub(crate) trait NormAcc: Copy + Send + Sync {
    fn from_f64(v: f64) -> Self;
    fn add(self, o: Self) -> Self;
    fn pow(self, p: Self) -> Self;
    fn abs(self) -> Self;
    fn recip(self) -> Self;
    fn mul(self, o: Self) -> Self;
    fn sqrt(self) -> Self;
}

macro_rules! norm_acc {
    ($t:ty) => {
        impl NormAcc for $t {
            #[inline(always)]
            fn from_f64(v: f64) -> $t {
                v as $t
            }
            #[inline(always)]
            fn add(self, o: $t) -> $t {
                self + o
            }
            #[inline(always)]
            fn pow(self, p: $t) -> $t {
                self.powf(p)
            }
            #[inline(always)]
            fn abs(self) -> $t {
                self.abs()
            }
            #[inline(always)]
            fn recip(self) -> $t {
                1.0 / self
            }
            #[inline(always)]
            fn mul(self, o: $t) -> $t {
                self * o
            }
            #[inline(always)]
            fn sqrt(self) -> $t {
                self.sqrt()
            }
        }
    };
}
norm_acc!(f32);
norm_acc!(f64);

/// The dims (of size above 1) from the fastest-varying to the slowest in
/// PyTorch's TensorIterator for this reduction: its
/// `reorder_dimensions` (an insertion sort from the innermost dim out, with
/// `should_swap` comparing first the output's strides, 0 along reduced dims,
/// then the input's, equal strides ordered by size) on an output laid out
/// contiguously over the kept dims. Dims of size 1 are left out: they add
/// nothing to the order.
fn iter_order(shape: &[usize], strides: &[usize], dims: &[usize], keepdim: bool) -> Vec<usize> {
    let n = shape.len();
    // The output's strides: contiguous over the kept dims, 0 along reduced
    // dims, except that with `keepdim` PyTorch hands the iterator the output
    // as it is (`review_reduce_result`), whose reduced dims of size 1 keep
    // their contiguous strides (only a dim broadcast from 1 gets stride 0).
    let mut out_strides = vec![0usize; n];
    let mut s = 1usize;
    for d in (0..n).rev() {
        let reduced = dims.contains(&d);
        if !reduced || (keepdim && shape[d] == 1) {
            out_strides[d] = s;
        }
        if !reduced {
            s = s.saturating_mul(shape[d].max(1));
        }
    }
    crate::layout::reorder_dims(shape, Some(&out_strides), &[strides])
        .into_iter()
        .filter(|&d| shape[d] > 1)
        .collect()
}

/// Whether PyTorch's `is_reduce_lastdim` holds for this reduction: after
/// the iterator's coalescing, one reduced dim, the innermost, whose input
/// stride is one element. `order` is [`iter_order`]'s; `reduced` its
/// reduced dims in that order.
fn is_reduce_lastdim(
    order: &[usize],
    reduced: &[usize],
    shape: &[usize],
    strides: &[usize],
) -> bool {
    let Some(&first) = reduced.first() else {
        return false;
    };
    // The reduced dims first in the order (a kept dim between two of them
    // would keep them apart), each continuing the one inside it.
    order.len() >= reduced.len()
        && order[..reduced.len()] == *reduced
        && strides[first] == 1
        && reduced
            .windows(2)
            .all(|w| strides[w[1]] == strides[w[0]] * shape[w[0]])
}

/// The kinds of [`norm_in_order`]: `NormOps`, `NormOneOps`, `NormTwoOps`.
const GENERAL: u8 = 0;
const ONE: u8 = 1;
const TWO: u8 = 2;

/// `out` (contiguous over the kept dims, row-major, of the input's dtype)
/// receives the `p` norm of `input` over `dims` (p not 0 or ±inf; each
/// output's count at least 1; `T::Acc` f32 or f64); `keepdim` as the caller
/// asked (it changes PyTorch's order beside broadcast dims).
pub(crate) fn pnorm<T: Element>(out: &Arg, input: &Arg, dims: &[usize], keepdim: bool, p: f64)
where
    T::Acc: NormAcc,
{
    if p == 1.0 {
        norm_in_order::<T, ONE>(out, input, dims, keepdim, p)
    } else if p == 2.0 {
        norm_in_order::<T, TWO>(out, input, dims, keepdim, p)
    } else {
        norm_in_order::<T, GENERAL>(out, input, dims, keepdim, p)
    }
}

/// The 2-norm of `n` contiguous elements at `x` as PyTorch's vectorised
/// last-dim kernel computes it (AVX2: `Vectorized<float>` of 8 lanes,
/// `Vectorized<double>` of 4, `Vectorized<BFloat16>` of 16 widened to two
/// float vectors): each lane accumulates `lane + v * v` (product and sum
/// rounded separately) over whole vectors; the lanes are then added
/// left to right into lane 0, which takes the remaining elements one at a
/// time. In that scalar tail GCC contracts `acc + x * x` into a fused
/// multiply-add, except that for f32 a first group of 4 remaining elements
/// is squared in a 4-lane vector and added separately rounded (the tail
/// loop's partial vectorisation): measured against PyTorch 2.15 on
/// thousands of rows of every remainder, and for bf16 the squares are exact
/// in f32 so the distinction vanishes. The root is `sqrt` in the
/// accumulate type.
///
/// # Safety
/// `x` points to `n` readable elements of `T`.
unsafe fn two_lastdim<T: Element>(x: *const T, n: usize) -> f64 {
    match T::DTYPE {
        DType::F32 => {
            // SAFETY: T is f32 (its DTYPE), `n` elements readable (caller).
            let x = unsafe { std::slice::from_raw_parts(x as *const f32, n) };
            let mut lanes = [0f32; 8];
            let whole = n - n % 8;
            for c in x[..whole].chunks_exact(8) {
                for (l, &v) in lanes.iter_mut().zip(c) {
                    *l += v * v;
                }
            }
            let mut acc = lanes[0];
            for &l in &lanes[1..] {
                acc += l;
            }
            let mut tail = &x[whole..];
            if tail.len() >= 4 {
                for &v in &tail[..4] {
                    acc += v * v;
                }
                tail = &tail[4..];
            }
            for &v in tail {
                acc = v.mul_add(v, acc);
            }
            f64::from(acc.sqrt())
        }
        DType::F64 => {
            // SAFETY: T is f64 (its DTYPE), `n` elements readable (caller).
            let x = unsafe { std::slice::from_raw_parts(x as *const f64, n) };
            let mut lanes = [0f64; 4];
            let whole = n - n % 4;
            for c in x[..whole].chunks_exact(4) {
                for (l, &v) in lanes.iter_mut().zip(c) {
                    *l += v * v;
                }
            }
            let mut acc = lanes[0];
            for &l in &lanes[1..] {
                acc += l;
            }
            for &v in &x[whole..] {
                acc = v.mul_add(v, acc);
            }
            acc.sqrt()
        }
        DType::BF16 => {
            // SAFETY: T is bf16 (its DTYPE), `n` elements readable (caller).
            let x = unsafe { std::slice::from_raw_parts(x as *const ::half::bf16, n) };
            let mut lanes = [0f32; 8];
            let whole = n - n % 16;
            for c in x[..whole].chunks_exact(16) {
                // The low 8 widened, then the high 8, into the same lanes.
                for half in c.chunks_exact(8) {
                    for (l, &v) in lanes.iter_mut().zip(half) {
                        let v = v.to_f32();
                        *l += v * v;
                    }
                }
            }
            let mut acc = lanes[0];
            for &l in &lanes[1..] {
                acc += l;
            }
            for &v in &x[whole..] {
                let v = v.to_f32();
                acc += v * v;
            }
            f64::from(acc.sqrt())
        }
        d => unreachable!("PyTorch's vectorised 2-norm has no {d} kernel"),
    }
}

/// [`pnorm`]; `KIND`: [`GENERAL`] (`NormOps`), [`ONE`] or [`TWO`].
fn norm_in_order<T: Element, const KIND: u8>(
    out: &Arg,
    input: &Arg,
    dims: &[usize],
    keepdim: bool,
    p: f64,
) where
    T::Acc: NormAcc,
{
    let l = &input.layout;
    let (shape, strides) = (&l.shape, &l.strides);
    let full = iter_order(shape, strides, dims, keepdim);
    let order: Vec<usize> = full.iter().copied().filter(|d| dims.contains(d)).collect();
    let lastdim = KIND == TWO
        && matches!(T::DTYPE, DType::F32 | DType::F64 | DType::BF16)
        && is_reduce_lastdim(&full, &order, shape, strides);
    let rsize: Vec<usize> = order.iter().map(|&d| shape[d]).collect();
    let rstride: Vec<usize> = order.iter().map(|&d| strides[d]).collect();
    let count: usize = rsize.iter().product();
    // Outputs in row-major order of the kept dims, each at its storage offset.
    let kept: Vec<usize> = (0..shape.len()).filter(|d| !dims.contains(d)).collect();
    let outputs: usize = kept.iter().map(|&d| shape[d]).product();
    let pa = <T::Acc as NormAcc>::from_f64(p);
    let inv = pa.recip();
    let src = base(input) as usize;
    let dst = base(out) as usize;
    // Where the fastest kept dim steps by one element in the input (a
    // reduction over outer dims), neighbouring outputs read neighbouring
    // elements at each reduced position: up to `BLOCK` of them are folded
    // together, a row at a time, each in its own order as before (the same
    // sums, read contiguously instead of one strided walk per output).
    const BLOCK: usize = 64;
    let ncols = match kept.last() {
        Some(&d) if !lastdim && strides[d] == 1 && shape[d] > 1 => shape[d],
        _ => 1,
    };
    let per_row = ncols.div_ceil(BLOCK);
    let tasks = (outputs / ncols) * per_row;
    let task = |t: usize| {
        let o0 = (t / per_row) * ncols + (t % per_row) * BLOCK;
        let b = BLOCK.min(ncols - (t % per_row) * BLOCK);
        let mut rem = o0;
        let mut start = 0usize;
        for &d in kept.iter().rev() {
            start += (rem % shape[d]) * strides[d];
            rem /= shape[d];
        }
        let src = src as *const T;
        if lastdim {
            // SAFETY: the reduced elements of this output (b is 1) are the
            // `count` contiguous ones from `start` (`is_reduce_lastdim`),
            // within the input's storage; `out` is contiguous with one
            // element per output.
            unsafe {
                let v = two_lastdim::<T>(src.add(start), count);
                *(dst as *mut T).add(o0) = T::from_acc(<T::Acc as NormAcc>::from_f64(v));
            }
            return;
        }
        let mut acc = [<T::Acc as NormAcc>::from_f64(0.0); BLOCK];
        let mut idx = vec![0usize; rsize.len()];
        let mut pos = start;
        for _ in 0..count {
            for (j, a) in acc[..b].iter_mut().enumerate() {
                // SAFETY: `start` plus the reduced offsets, plus j < b along
                // the fastest kept dim (stride 1 when b > 1), are storage
                // indices of the input's own layout (the backend's contract).
                let x = unsafe { *src.add(pos + j) }.to_acc();
                *a = a.add(match KIND {
                    ONE => x.abs(),
                    TWO => x.mul(x),
                    _ => x.abs().pow(pa),
                });
            }
            // Next index, innermost (fastest) dim first.
            for k in 0..rsize.len() {
                idx[k] += 1;
                pos += rstride[k];
                if idx[k] < rsize[k] {
                    break;
                }
                pos -= rstride[k] * rsize[k];
                idx[k] = 0;
            }
        }
        for (j, &a) in acc[..b].iter().enumerate() {
            let v = match KIND {
                ONE => a,
                TWO => a.sqrt(),
                _ => a.pow(inv),
            };
            // SAFETY: `out` is contiguous with one element per output; the
            // block's outputs are o0 .. o0 + b.
            unsafe { *(dst as *mut T).add(o0 + j) = T::from_acc(v) };
        }
    };
    if tasks > 1 && outputs.saturating_mul(count) >= super::PARALLEL_THRESHOLD {
        (0..tasks).into_par_iter().for_each(task);
    } else {
        (0..tasks).for_each(task);
    }
}
