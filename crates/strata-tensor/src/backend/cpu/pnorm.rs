//! The vector norm of order 1 and of a general order `p` (not 0, 2 or ±inf)
//! in the order and arithmetic of PyTorch's CPU kernel, so that the results agree
//! bit for bit: `aten/src/ATen/native/cpu/ReduceOpsKernel.cpp`
//! (`norm_kernel_tensor_iterator_impl` → `norm_kernel_cpu_impl`) runs
//! `binary_kernel_reduce` (`cpu/Reduce.h`) with `NormOps`
//! (`SharedReduceOps.h`): in the accumulate type (`opmath_type`: f32 for
//! f32, f16 and bf16, f64 for f64), `acc = acc + pow(|x|, p)` one element
//! at a time from 0, with `p` rounded to the accumulate type and `pow` the C
//! library's (`std::pow`), then `pow(acc, 1 / p)` with `1 / p` formed in the
//! accumulate type; order 1 runs `NormOneOps` the same way: `acc + |x|`,
//! no root. The elements of each output are visited in the order of
//! the TensorIterator that PyTorch builds for the reduction
//! ([`reduced_order`]).
//!
//! PyTorch splits a single output of at least 32768 (`GRAIN_SIZE`)
//! elements among its threads when it has several; this kernel follows its
//! one-thread order there (what `torch.set_num_threads(1)` gives).

use crate::backend::cpu::elementwise::base;
use crate::backend::Arg;
use crate::dtype::Element;
use rayon::prelude::*;

/// The accumulate types.
pub(crate) trait NormAcc: Copy + Send + Sync {
    fn from_f64(v: f64) -> Self;
    fn add(self, o: Self) -> Self;
    fn pow(self, p: Self) -> Self;
    fn abs(self) -> Self;
    fn recip(self) -> Self;
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
        }
    };
}
norm_acc!(f32);
norm_acc!(f64);

/// The reduced dims (of size above 1) from the fastest-varying to the
/// slowest in PyTorch's TensorIterator for this reduction: its
/// `reorder_dimensions` (an insertion sort from the innermost dim out, with
/// `should_swap` comparing first the output's strides, 0 along reduced dims,
/// then the input's, equal strides ordered by size) on an output laid out
/// contiguously over the kept dims. Dims of size 1 are left out: they add
/// nothing to the order.
fn reduced_order(shape: &[usize], strides: &[usize], dims: &[usize], keepdim: bool) -> Vec<usize> {
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
    let should_swap = |d0: usize, d1: usize| -> i32 {
        for (operand_strides, is_output) in [(&out_strides, true), (&strides.to_vec(), false)] {
            let (s0, s1) = (operand_strides[d0], operand_strides[d1]);
            if is_output && ((s0 == 0) != (s1 == 0)) {
                return if s1 == 0 { 1 } else { -1 };
            }
            if s0 == 0 || s1 == 0 {
                continue;
            } else if s0 < s1 {
                return -1;
            } else if s0 > s1 {
                return 1;
            }
            if shape[d0] > shape[d1] {
                return 1;
            }
        }
        0
    };
    // perm[0] is the innermost dim.
    let mut perm: Vec<usize> = (0..n).rev().collect();
    for i in 1..n {
        let mut dim1 = i;
        for dim0 in (0..i).rev() {
            let c = should_swap(perm[dim0], perm[dim1]);
            if c > 0 {
                perm.swap(dim0, dim1);
                dim1 = dim0;
            } else if c < 0 {
                break;
            }
        }
    }
    perm.into_iter()
        .filter(|&d| dims.contains(&d) && shape[d] > 1)
        .collect()
}

/// `out` (contiguous over the kept dims, row-major, of the input's dtype)
/// receives the `p` norm of `input` over `dims` (each output's count at
/// least 1; `T::Acc` f32 or f64); `keepdim` as the caller asked (it changes
/// PyTorch's order beside broadcast dims).
pub(crate) fn pnorm<T: Element>(out: &Arg, input: &Arg, dims: &[usize], keepdim: bool, p: f64)
where
    T::Acc: NormAcc,
{
    if p == 1.0 {
        norm_in_order::<T, true>(out, input, dims, keepdim, p)
    } else {
        norm_in_order::<T, false>(out, input, dims, keepdim, p)
    }
}

/// [`pnorm`]; `ONE`: order 1 (`NormOneOps`).
fn norm_in_order<T: Element, const ONE: bool>(
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
    let order = reduced_order(shape, strides, dims, keepdim);
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
    let one = |o: usize| {
        let mut rem = o;
        let mut start = 0usize;
        for &d in kept.iter().rev() {
            start += (rem % shape[d]) * strides[d];
            rem /= shape[d];
        }
        let src = src as *const T;
        let mut acc = <T::Acc as NormAcc>::from_f64(0.0);
        let mut idx = vec![0usize; rsize.len()];
        let mut pos = start;
        for _ in 0..count {
            // SAFETY: `start` plus the reduced offsets are storage indices of
            // the input's own layout (the backend's contract).
            let x = unsafe { *src.add(pos) }.to_acc();
            acc = acc.add(if ONE { x.abs() } else { x.abs().pow(pa) });
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
        let v = if ONE { acc } else { acc.pow(inv) };
        // SAFETY: `out` is contiguous with one element per output.
        unsafe { *(dst as *mut T).add(o) = T::from_acc(v) };
    };
    if outputs > 1 && outputs.saturating_mul(count) >= super::PARALLEL_THRESHOLD {
        (0..outputs).into_par_iter().for_each(one);
    } else {
        (0..outputs).for_each(one);
    }
}
