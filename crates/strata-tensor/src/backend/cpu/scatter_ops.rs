//! CPU kernels of `ops/scatter_ops.rs`: the scans along one dim (`cumprod`,
//! `cummax`/`cummin`, `logcumsumexp`) and the scatters (`scatter`,
//! `scatter_reduce`, `index_add`/`index_copy`/`index_fill`, `index_put`).
//!
//! Scans run PyTorch's CPU loops: each line from its first element, the
//! running value kept in PyTorch's `acc_type<T, false>` (f64 for f32) and
//! rounded into each output. Scatters visit their positions one after the
//! other in row-major order and combine in the dtype, so that duplicate
//! indices accumulate exactly as PyTorch's CPU kernels do.

use super::nn::{base, dot, index_base, rd, rd_index, walk, Ptr};
use crate::backend::{Arg, DimShape};
use crate::dtype::{Arith, DType, Element};
use crate::error::Result;
use crate::ops::scatter_ops::{Combine, ScanOp, ScatterKernel};
use rayon::prelude::*;

/// Runs one kernel (operands checked by the tensor layer).
pub(crate) fn run(k: ScatterKernel<'_>) -> Result<()> {
    match k {
        ScatterKernel::Scan {
            op,
            out,
            indices,
            input,
            s,
        } => match op {
            ScanOp::Prod => match input.dtype {
                DType::F32 => {
                    scan_acc::<f32, f64>(out, input, s, 1.0, |a, x| a * f64::from(x), |a| a as f32)
                }
                d => crate::dispatch_dtype!(d, T => scan_acc::<T, <T as Element>::Acc>(
                    out,
                    input,
                    s,
                    <T as Element>::Acc::ONE,
                    |a, x| a.mul(x.to_acc()),
                    T::from_acc
                )),
            },
            ScanOp::LogSumExp => match input.dtype {
                DType::F32 => scan_acc::<f32, f64>(
                    out,
                    input,
                    s,
                    f64::NEG_INFINITY,
                    |a, x| f64::log_add_exp(f64::from(x), a),
                    |a| a as f32,
                ),
                DType::F64 => scan_acc::<f64, f64>(
                    out,
                    input,
                    s,
                    f64::NEG_INFINITY,
                    |a, x| f64::log_add_exp(x, a),
                    |a| a,
                ),
                DType::F16 => scan_acc::<half::f16, f32>(
                    out,
                    input,
                    s,
                    f32::NEG_INFINITY,
                    |a, x| f32::log_add_exp(x.to_f32(), a),
                    half::f16::from_f32,
                ),
                DType::BF16 => scan_acc::<half::bf16, f32>(
                    out,
                    input,
                    s,
                    f32::NEG_INFINITY,
                    |a, x| f32::log_add_exp(x.to_f32(), a),
                    half::bf16::from_f32,
                ),
                // The tensor layer sends float inputs only.
                _ => {}
            },
            ScanOp::Max | ScanOp::Min => {
                if let Some(idx) = indices {
                    let max = op == ScanOp::Max;
                    crate::dispatch_dtype!(input.dtype, T => scan_extremum::<T>(out, idx, input, s, max));
                }
            }
        },
        ScatterKernel::Scatter {
            combine,
            out,
            index,
            src,
            dim,
            bound,
        } => {
            crate::dispatch_dtype!(out.dtype, T => scatter::<T>(combine, out, index, src, dim, bound))
        }
    }
    Ok(())
}

/// `_log_add_exp_helper` of PyTorch: `log(exp(x) + exp(y))` as
/// `log1p(exp(min - max)) + max`, NaN propagating, and `x` itself where
/// both are the same infinity.
trait LogAddExp: Copy {
    fn log_add_exp(x: Self, y: Self) -> Self;
}

macro_rules! log_add_exp {
    ($($t:ty),*) => {$(
        impl LogAddExp for $t {
            fn log_add_exp(x: $t, y: $t) -> $t {
                // std::min / std::max: the first argument unless the second
                // compares strictly below / above it.
                let (lo, hi) = if y.is_nan() {
                    (y, y)
                } else {
                    (if y < x { y } else { x }, if x < y { y } else { x })
                };
                if lo != hi || lo.is_finite() {
                    (lo - hi).exp().ln_1p() + hi
                } else {
                    x
                }
            }
        }
    )*};
}
log_add_exp!(f32, f64);

/// Calls `f(o)` for every outer block `o` of `s`, in parallel.
fn per_outer(s: DimShape, f: impl Fn(usize) + Sync + Send) {
    (0..s.outer).into_par_iter().for_each(f);
}

/// The scan `acc = step(acc, x)` from `init` along each line, each output
/// `narrow(acc)`.
fn scan_acc<T: Element, A: Copy + Send + Sync>(
    out: &Arg,
    input: &Arg,
    s: DimShape,
    init: A,
    step: impl Fn(A, T) -> A + Sync + Send,
    narrow: impl Fn(A) -> T + Sync + Send,
) {
    let (n, inner) = (s.n, s.inner);
    let (px, py): (Ptr<T>, Ptr<T>) = (base(input), base(out));
    per_outer(s, |o| {
        let mut acc = vec![init; inner];
        for k in 0..n {
            let row = (o * n + k) * inner;
            for (i, a) in acc.iter_mut().enumerate() {
                // SAFETY: both operands are contiguous with outer * n * inner
                // elements; `row + i` is below that, and each task writes
                // only its own outer block.
                unsafe {
                    *a = step(*a, rd(px, (row + i) as isize));
                    *py.get().add(row + i) = narrow(*a);
                }
            }
        }
    });
}

/// `cummax` (`max`) / `cummin` along each line: PyTorch's
/// `cummax_cummin_helper` (the latest of equal values, NaN sticks at the
/// latest NaN).
fn scan_extremum<T: Element>(out: &Arg, indices: &Arg, input: &Arg, s: DimShape, max: bool) {
    let (n, inner) = (s.n, s.inner);
    let (px, py, pi): (Ptr<T>, Ptr<T>, Ptr<i64>) = (base(input), base(out), base(indices));
    #[allow(clippy::eq_op)]
    let is_nan = |v: T| v != v;
    per_outer(s, |o| {
        let mut best: Vec<(T, i64)> = Vec::with_capacity(inner);
        for k in 0..n {
            let row = (o * n + k) * inner;
            for i in 0..inner {
                // SAFETY: as in `scan_acc` (indices has the same shape).
                unsafe {
                    let x = rd(px, (row + i) as isize);
                    if k == 0 {
                        best.push((x, 0));
                    } else {
                        let (b, _) = best[i];
                        let take = is_nan(x) || (!is_nan(b) && if max { x >= b } else { x <= b });
                        if take {
                            best[i] = (x, k as i64);
                        }
                    }
                    *py.get().add(row + i) = best[i].0;
                    *pi.get().add(row + i) = best[i].1;
                }
            }
        }
    });
}

/// Sum and product in the dtype (bool: or / and; integers wrap).
trait Combinable: Element {
    fn sum(self, b: Self) -> Self;
    fn prod(self, b: Self) -> Self;
}
macro_rules! combinable {
    ($($t:ty),*) => {$(
        impl Combinable for $t {
            fn sum(self, b: Self) -> Self {
                Self::from_acc(self.to_acc().add(b.to_acc()))
            }
            fn prod(self, b: Self) -> Self {
                Self::from_acc(self.to_acc().mul(b.to_acc()))
            }
        }
    )*};
}
combinable!(f32, f64, half::f16, half::bf16, i32, i64, u8);
impl Combinable for bool {
    fn sum(self, b: Self) -> Self {
        self | b
    }
    fn prod(self, b: Self) -> Self {
        self & b
    }
}

/// `a` combined with the source element `b` (PyTorch's CPU scatter
/// reductions: `amax` is `isnan(b) ? b : std::max(a, b)`).
#[inline]
#[allow(clippy::eq_op)]
fn apply<T: Combinable>(c: Combine, a: T, b: T) -> T {
    match c {
        Combine::Assign => b,
        Combine::Sum => a.sum(b),
        Combine::Prod => a.prod(b),
        Combine::Max => {
            if b != b || a < b {
                b
            } else {
                a
            }
        }
        Combine::Min => {
            if b != b || b < a {
                b
            } else {
                a
            }
        }
    }
}

/// The scatter, sequentially in row-major order of index's shape.
fn scatter<T: Combinable>(c: Combine, out: &Arg, index: &Arg, src: &Arg, dim: usize, bound: usize) {
    let n = index.layout.numel();
    let shape = &index.layout.shape;
    let (po, ps): (Ptr<T>, Ptr<T>) = (base(out), base(src));
    let pi = index_base(index);
    let (so, ss, si) = (
        &out.layout.strides,
        &src.layout.strides,
        &index.layout.strides,
    );
    walk(shape, 0, n, |p| {
        // SAFETY: positions lie inside index's shape, which src's layout
        // covers and out's covers on every dim but `dim`; an index value
        // outside [0, bound) (out's extent along `dim`) is skipped.
        unsafe {
            let k = rd_index(index.dtype, pi, dot(p, si, usize::MAX));
            if !(0..bound as i64).contains(&k) {
                return;
            }
            let o = po
                .get()
                .offset(dot(p, so, dim) + (k as isize) * so[dim] as isize);
            *o = apply(c, *o, rd(ps, dot(p, ss, usize::MAX)));
        }
    });
}
