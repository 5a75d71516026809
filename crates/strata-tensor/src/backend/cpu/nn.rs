//! CPU kernels of [`NnKernel`]: index gathers and scatters over strided
//! operands, and the row kernels of layer norm and cross-entropy, parallel
//! over rows (rayon). Layer norm's forward and backward follow PyTorch's
//! CPU kernel operation by operation ([`super::layer_norm`]) and give its
//! output, mean and rstd, and its gradients (the weight's and bias's as its
//! kernel run on one thread), bit for bit. Elsewhere statistics are computed
//! in f64 whatever the dtype and stored in the Acc dtype (f32 for
//! f16/bf16/f32), which is at least as precise as PyTorch's f32
//! accumulation; except f32
//! cross-entropy, whose forward follows PyTorch's f32 arithmetic step by
//! step ([`cross_entropy_f32`]) and gives its losses bit for bit.

use crate::backend::{Arg, NnKernel, MASK_CHUNK};
use crate::dispatch_dtype;
use crate::dtype::{DType, Element};
use rayon::prelude::*;

/// Positions per parallel task of the index kernels.
const CHUNK: usize = 1 << 14;

/// The float element types, read and written through f64.
trait Real: Element {
    fn f(self) -> f64;
    fn of(v: f64) -> Self;
    /// `v` rounded to PyTorch's computation type for this dtype (f64 for
    /// f64, f32 for the others).
    fn acc(v: f64) -> f64 {
        v as f32 as f64
    }
}

impl Real for f32 {
    fn f(self) -> f64 {
        f64::from(self)
    }
    fn of(v: f64) -> Self {
        v as f32
    }
}
impl Real for f64 {
    fn f(self) -> f64 {
        self
    }
    fn of(v: f64) -> Self {
        v
    }
    fn acc(v: f64) -> f64 {
        v
    }
}
impl Real for half::f16 {
    fn f(self) -> f64 {
        self.to_f64()
    }
    fn of(v: f64) -> Self {
        // Through f32, as PyTorch rounds its f32 accumulators.
        half::f16::from_f32(v as f32)
    }
}
impl Real for half::bf16 {
    fn f(self) -> f64 {
        self.to_f64()
    }
    fn of(v: f64) -> Self {
        half::bf16::from_f32(v as f32)
    }
}

/// A raw base pointer that may cross threads (the kernels' callers hold the
/// storages' locks, and parallel tasks write disjoint elements).
#[derive(Clone, Copy)]
pub(super) struct Ptr<T>(pub(super) *mut T);
// SAFETY: only used for memory whose access the caller synchronises (the
// storage locks are held for the whole kernel; tasks touch disjoint elements).
unsafe impl<T> Send for Ptr<T> {}
// SAFETY: as above.
unsafe impl<T> Sync for Ptr<T> {}

impl<T> Ptr<T> {
    /// The pointer (a method, so closures capture the whole `Ptr`).
    pub(super) fn get(self) -> *mut T {
        self.0
    }
}

pub(super) fn base<T>(a: &Arg) -> Ptr<T> {
    // SAFETY: the offset lies inside the storage (layouts are checked when
    // views are made), so the pointer stays within the allocation.
    Ptr(unsafe { (a.mem.host_ptr() as *mut T).add(a.layout.offset) })
}

/// Reads element `i` (in elements from the operand's first element).
///
/// # Safety
/// `i` must address an element of the operand's storage.
pub(super) unsafe fn rd<T: Copy>(p: Ptr<T>, i: isize) -> T {
    // SAFETY: guaranteed by the caller.
    unsafe { *p.get().offset(i) }
}

/// Reads an index element (i64 or i32) as i64.
///
/// # Safety
/// As [`rd`].
pub(super) unsafe fn rd_index(dtype: DType, p: *mut u8, i: isize) -> i64 {
    // SAFETY: guaranteed by the caller; the dtype names the element type.
    unsafe {
        match dtype {
            DType::I32 => i64::from(*(p as *mut i32).offset(i)),
            _ => *(p as *mut i64).offset(i),
        }
    }
}

pub(super) fn index_base(a: &Arg) -> *mut u8 {
    // SAFETY: as in `base`.
    unsafe { a.mem.host_ptr().add(a.layout.offset * a.dtype.size()) }
}

/// Calls `f(position, coords)` for positions `start..end` of `shape`
/// (row-major), updating the coordinates incrementally.
pub(super) fn walk(shape: &[usize], start: usize, end: usize, mut f: impl FnMut(&[usize])) {
    let nd = shape.len();
    let mut c = vec![0usize; nd];
    let mut r = start;
    for d in (0..nd).rev() {
        c[d] = r % shape[d];
        r /= shape[d];
    }
    for _ in start..end {
        f(&c);
        for d in (0..nd).rev() {
            c[d] += 1;
            if c[d] < shape[d] {
                break;
            }
            c[d] = 0;
        }
    }
}

pub(super) fn dot(c: &[usize], st: &[usize], skip: usize) -> isize {
    c.iter()
        .zip(st)
        .enumerate()
        .filter(|(d, _)| *d != skip)
        .map(|(_, (&c, &s))| (c * s) as isize)
        .sum()
}

fn gather<T: Element>(out: &Arg, src: &Arg, index: &Arg, dim: usize, bound: usize) {
    let n = out.layout.numel();
    let shape = &out.layout.shape;
    let (po, ps) = (base::<T>(out), base::<T>(src));
    let pi = Ptr(index_base(index));
    let (so, ss, si) = (
        &out.layout.strides,
        &src.layout.strides,
        &index.layout.strides,
    );
    let idt = index.dtype;
    let starts: Vec<usize> = (0..n).step_by(CHUNK).collect();
    starts.par_iter().for_each(|&s| {
        walk(shape, s, (s + CHUNK).min(n), |c| {
            // SAFETY: every coordinate is inside out's shape, which index
            // broadcasts to and src covers on every dim but `dim`; the looked
            // up coordinate is read only inside [0, bound), src's size there.
            unsafe {
                let k = rd_index(idt, pi.get(), dot(c, si, usize::MAX));
                let v = if (0..bound as i64).contains(&k) {
                    rd(ps, dot(c, ss, dim) + (k as isize) * ss[dim] as isize)
                } else {
                    T::from_scalar(crate::scalar::Scalar::Int(0))
                };
                *po.get().offset(dot(c, so, usize::MAX)) = v;
            }
        });
    });
}

/// Element addition in the dtype for scatter_add (bool ors, integers wrap).
trait AddElem: Element {
    fn add_elem(self, b: Self) -> Self;
}
macro_rules! add_elem {
    ($($t:ty),*) => {$(
        impl AddElem for $t {
            fn add_elem(self, b: Self) -> Self {
                use crate::dtype::Arith;
                Self::from_acc(self.to_acc().add(b.to_acc()))
            }
        }
    )*};
}
add_elem!(f32, f64, half::f16, half::bf16, i32, i64, u8);
impl AddElem for bool {
    fn add_elem(self, b: Self) -> Self {
        self | b
    }
}

fn scatter_add<T: AddElem>(out: &Arg, index: &Arg, src: &Arg, dim: usize, bound: usize) {
    let n = index.layout.numel();
    let shape = &index.layout.shape;
    let (po, ps) = (base::<T>(out), base::<T>(src));
    let pi = index_base(index);
    let (so, ss, si) = (
        &out.layout.strides,
        &src.layout.strides,
        &index.layout.strides,
    );
    // Sequential: repeated indices accumulate in PyTorch's (row-major) order.
    walk(shape, 0, n, |c| {
        // SAFETY: coordinates are inside index's shape, which src covers and
        // out covers on every dim but `dim`; an index value outside [0,
        // bound), out's size along `dim`, is skipped.
        unsafe {
            let k = rd_index(index.dtype, pi, dot(c, si, usize::MAX));
            if !(0..bound as i64).contains(&k) {
                return;
            }
            let o =
                po.0.offset(dot(c, so, dim) + (k as isize) * so[dim] as isize);
            *o = (*o).add_elem(rd(ps, dot(c, ss, usize::MAX)));
        }
    });
}

/// The count pass of a stream compaction: set elements per chunk.
fn mask_count(counts: &Arg, mask: &Arg, n: usize) {
    let (pc, pm) = (base::<i64>(counts), base::<u8>(mask));
    (0..n.div_ceil(MASK_CHUNK)).into_par_iter().for_each(|b| {
        let (s, e) = (b * MASK_CHUNK, ((b + 1) * MASK_CHUNK).min(n));
        // SAFETY: the contiguous mask holds n elements and counts one per
        // chunk; each task writes its own count.
        unsafe {
            let set = std::slice::from_raw_parts(pm.get().add(s), e - s)
                .iter()
                .filter(|&&m| m != 0)
                .count();
            *pc.get().add(b) = set as i64;
        }
    });
}

/// The scatter pass of a stream compaction (see [`NnKernel::MaskCompact`]).
fn mask_compact<T: Element>(
    out: &Arg,
    src: &Arg,
    mask: &Arg,
    offsets: &Arg,
    n: usize,
    expand: bool,
) {
    let (po, ps) = (base::<T>(out), base::<T>(src));
    let (pm, pf) = (base::<u8>(mask), base::<i64>(offsets));
    (0..n.div_ceil(MASK_CHUNK)).into_par_iter().for_each(|b| {
        let (s, e) = (b * MASK_CHUNK, ((b + 1) * MASK_CHUNK).min(n));
        // SAFETY: offsets (one per chunk) are the inclusive sums of the
        // chunks' set counts, so chunk b owns the compacted positions
        // [offsets[b - 1], offsets[b]): tasks write disjoint elements, all
        // inside the operands (out or src holds the count, the other n).
        unsafe {
            let mut k = if b == 0 {
                0
            } else {
                *pf.get().add(b - 1) as usize
            };
            for i in s..e {
                if *pm.get().add(i) != 0 {
                    if expand {
                        *po.get().add(i) = *ps.get().add(k);
                    } else {
                        *po.get().add(k) = *ps.get().add(i);
                    }
                    k += 1;
                }
            }
        }
    });
}

/// Reads a float operand (of dtype `d`, contiguous) at `i` as f64.
///
/// # Safety
/// `i` must address an element of the contiguous operand.
unsafe fn rdf(a: &Arg, i: usize) -> f64 {
    let p = index_base(a);
    // SAFETY: guaranteed by the caller.
    unsafe {
        match a.dtype {
            DType::F32 => f64::from(*(p as *const f32).add(i)),
            DType::F64 => *(p as *const f64).add(i),
            DType::F16 => (*(p as *const half::f16).add(i)).to_f64(),
            DType::BF16 => (*(p as *const half::bf16).add(i)).to_f64(),
            DType::I64 => *(p as *const i64).add(i) as f64,
            DType::I32 => f64::from(*(p as *const i32).add(i)),
            _ => f64::from(*p.add(i)),
        }
    }
}

/// Writes `v` rounded to the (float) dtype of the contiguous operand at `i`.
///
/// # Safety
/// As [`rdf`]; the caller holds the write lock and no task writes `i` twice.
unsafe fn wrf(a: &Arg, i: usize, v: f64) {
    let p = index_base(a);
    // SAFETY: guaranteed by the caller.
    unsafe {
        match a.dtype {
            DType::F32 => *(p as *mut f32).add(i) = v as f32,
            DType::F64 => *(p as *mut f64).add(i) = v,
            DType::F16 => *(p as *mut half::f16).add(i) = half::f16::from_f32(v as f32),
            _ => *(p as *mut half::bf16).add(i) = half::bf16::from_f32(v as f32),
        }
    }
}

/// Runs `f(row)` for every row in parallel.
fn rows_par(rows: usize, f: impl Fn(usize) + Sync + Send) {
    (0..rows).into_par_iter().for_each(f);
}

/// One row of layer norm's forward: `(x, weight, bias, eps, y)` to the
/// row's `(mean, rstd)`.
type LayerNormRow<F> = fn(&[F], Option<&[F]>, Option<&[F]>, F, &mut [F]) -> (F, F);

/// Layer norm's forward as PyTorch's CPU kernel computes it, bit for bit
/// (the row arithmetic in [`super::layer_norm`]): f32 and f64 in their own
/// type, f16/bf16 widened to f32, their output rounded from f32 and their
/// mean and rstd kept in f32. PyTorch passes eps in the computation type:
/// beyond f32's range it is inf for f32/f16/bf16 (rstd 0).
fn layer_norm(k: &NnKernel) {
    use super::layer_norm as ln;
    let NnKernel::LayerNorm { x, eps, .. } = *k else {
        return;
    };
    match x.dtype {
        DType::F32 => layer_norm_native::<f32>(k, ln::row_f32, eps as f32),
        DType::F64 => layer_norm_native::<f64>(k, ln::row_f64, eps),
        DType::F16 => layer_norm_half(k, ln::row_f16, |v, _| half::f16::from_f32(v)),
        // PyTorch's AVX2 conversion of whole 16-element vectors writes
        // every NaN as 0xffff, its scalar one (the last `cols % 16`) as
        // 0x7fc0; the other values both round to nearest even.
        _ => layer_norm_half(k, ln::row_bf16, |v, vector| match (v.is_nan(), vector) {
            (true, true) => half::bf16::from_bits(0xffff),
            (true, false) => half::bf16::from_bits(0x7fc0),
            _ => half::bf16::from_f32(v),
        }),
    }
}

/// [`layer_norm`] of f32 or f64 input (`F`, also the parameters' dtype).
fn layer_norm_native<F: Real>(k: &NnKernel, row: LayerNormRow<F>, eps: F) {
    let NnKernel::LayerNorm {
        out,
        mean,
        rstd,
        x,
        weight,
        bias,
        rows,
        cols,
        ..
    } = *k
    else {
        return;
    };
    let (px, po) = (base::<F>(x), base::<F>(out));
    let param = |a: Option<&Arg>| {
        // SAFETY: the parameters are contiguous `[cols]` of x's dtype
        // (checked by the op), read only.
        a.map(|a| unsafe { std::slice::from_raw_parts(base::<F>(a).get() as *const F, cols) })
    };
    let (w, b) = (param(weight), param(bias));
    rows_par(rows, |r| {
        // SAFETY: row `r` is elements `r * cols..(r + 1) * cols` of the
        // contiguous `[rows, cols]` input and output; out is a fresh tensor
        // (no overlap with x) and each task writes its own row, mean and
        // rstd.
        unsafe {
            let xr = std::slice::from_raw_parts(px.get().add(r * cols) as *const F, cols);
            let yr = std::slice::from_raw_parts_mut(po.get().add(r * cols), cols);
            let (m, s) = row(xr, w, b, eps, yr);
            wrf(mean, r, m.f());
            wrf(rstd, r, s.f());
        }
    });
}

/// [`layer_norm`] of f16/bf16 input `T` (parameters of T or f32); `round`
/// takes an f32 output to T, told whether it lies in the row's whole
/// 16-element vectors.
fn layer_norm_half<T: Real>(k: &NnKernel, row: LayerNormRow<f32>, round: fn(f32, bool) -> T) {
    let NnKernel::LayerNorm {
        out,
        mean,
        rstd,
        x,
        weight,
        bias,
        rows,
        cols,
        eps,
    } = *k
    else {
        return;
    };
    let (px, po) = (base::<T>(x), base::<T>(out));
    // PyTorch reads the parameters as f32 (exact for f16/bf16 values).
    // SAFETY: the parameters are contiguous `[cols]` floats.
    let param = |a: Option<&Arg>| {
        a.map(|a| {
            (0..cols)
                .map(|j| unsafe { rdf(a, j) } as f32)
                .collect::<Vec<_>>()
        })
    };
    let (w, b) = (param(weight), param(bias));
    let (w, b) = (w.as_deref(), b.as_deref());
    rows_par(rows, |r| {
        // SAFETY: as in `layer_norm_native`.
        unsafe {
            let xr: Vec<f32> = (0..cols)
                .map(|j| rd(px, (r * cols + j) as isize).f() as f32)
                .collect();
            let mut y = vec![0f32; cols];
            let (m, s) = row(&xr, w, b, eps as f32, &mut y);
            let whole = cols - cols % 16;
            for (j, &v) in y.iter().enumerate() {
                *po.get().add(r * cols + j) = round(v, j < whole);
            }
            wrf(mean, r, f64::from(m));
            wrf(rstd, r, f64::from(s));
        }
    });
}

/// log Σ exp over a row, with PyTorch's special values.
/// A row's logsumexp as `(m, s)`, `m + s` the value: m the maximum, s =
/// log(sum(exp(x - m))) (NaN if any element is NaN or m is +inf; m = -inf
/// and s = 0 for an all -inf row). `x - lse` as `(x - m) - s` keeps what
/// `m + s` rounds away when |m| is large (a row [-1e30, -1e30] has
/// log-probabilities -log 2, not 0).
fn max_and_log_sum(row: impl Iterator<Item = f64> + Clone) -> (f64, f64) {
    let mut m = f64::NEG_INFINITY;
    for v in row.clone() {
        if v.is_nan() {
            return (f64::NAN, f64::NAN);
        }
        m = m.max(v);
    }
    if m == f64::INFINITY {
        return (f64::NAN, f64::NAN);
    }
    if m == f64::NEG_INFINITY {
        return (m, 0.0);
    }
    (m, row.map(|v| (v - m).exp()).sum::<f64>().ln())
}

fn cross_entropy<T: Real>(k: &NnKernel) {
    if T::DTYPE == DType::F32 {
        return cross_entropy_f32(k);
    }
    let NnKernel::CrossEntropy {
        lse,
        nll,
        smooth,
        wt,
        logits,
        target,
        weight,
        ignore_index,
        rows,
        classes,
        ..
    } = *k
    else {
        return;
    };
    let px = base::<T>(logits);
    rows_par(rows, |r| {
        // SAFETY: as in `layer_norm`; the targets were checked to lie in
        // [0, classes) or equal ignore_index.
        unsafe {
            let x = |c: usize| rd(px, (r * classes + c) as isize).f();
            let (m, ls) = max_and_log_sum((0..classes).map(x));
            wrf(lse, 2 * r, m);
            wrf(lse, 2 * r + 1, ls);
            // log p_c = (x(c) - m) - ls, PyTorch's log_softmax, computed
            // without cancelling m (NaN for a row whose m is not finite).
            let lp = |c: usize| (x(c) - m) - ls;
            if let Some(t) = target {
                let ti = rd_index(DType::I64, index_base(t), r as isize);
                let w = |c: usize| weight.map_or(1.0, |w| rdf(w, c));
                let (n, s, wv) = if ti == ignore_index {
                    (0.0, 0.0, 0.0)
                } else {
                    let tu = ti as usize;
                    // PyTorch's smoothing term -Σ_c log p_c w_c (its
                    // `-(input * weight).sum(class_dim)`, a sum from +0.0)
                    // and NLL term -log p_t * w_t, negated as PyTorch
                    // negates: a log probability of +0.0 gives a loss of
                    // -0.0.
                    let s = if smooth.is_some() {
                        -(0..classes).fold(0.0, |a, c| a + lp(c) * w(c))
                    } else {
                        0.0
                    };
                    (-lp(tu) * w(tu), s, w(tu))
                };
                if let Some(a) = nll {
                    wrf(a, r, n);
                }
                if let Some(a) = smooth {
                    wrf(a, r, s);
                }
                if let Some(a) = wt {
                    wrf(a, r, wv);
                }
            }
        }
    });
}

/// [`cross_entropy`] of f32 logits, bit for bit as PyTorch's CPU
/// `nll_loss_nd(log_softmax(x, class_dim))` and its smoothing term form each
/// row's values: the log-probabilities `x - m - ls` in f32, with `m` and `ls`
/// as PyTorch's log-softmax kernel for the class dim forms them
/// ([`sleef::log_softmax_stats_f32`]); the NLL term `-lp[t] * w[t]`; the
/// smoothing term `-Σ_c lp[c] * w[c]` (`-Σ_c lp[c]` without a weight), the
/// products rounded to f32 and added in the order of PyTorch's sum along
/// the class dim: a contiguous run where the class dim is the last one or
/// only dims of size 1 follow it ([`reduce::sum_run`]), else a strided run
/// as PyTorch's outer reduction adds it (see `outer_grouped` below). The saved logsumexp keeps the kernel's
/// contract (NaN in both parts for a row holding NaN or +inf, `(-inf, 0)`
/// for an all -inf row).
fn cross_entropy_f32(k: &NnKernel) {
    use super::reduce::{cascade_row_sum, level_cascade, sum_run};
    use super::sleef::{log_softmax_stats_f32, LogSumKind};
    let NnKernel::CrossEntropy {
        lse,
        nll,
        smooth,
        wt,
        logits,
        target,
        weight,
        ignore_index,
        rows,
        classes,
        class_last,
        inner,
    } = *k
    else {
        return;
    };
    let px = base::<f32>(logits);
    let pw = weight.map(base::<f32>);
    let inner = inner.max(1);
    let contiguous_sum = class_last || inner == 1;
    // PyTorch's sum over the class dim of (N, C, inner) walks the `inner`
    // positions in groups: with at least one vector of them (8) in groups
    // of four vectors, else in groups of four, each group's columns summed
    // by `multi_row_sum` ([`reduce::level_cascade`]); the positions past the
    // last whole group each by `row_sum` ([`reduce::cascade_row_sum`]).
    let outer_grouped = if inner >= 8 {
        inner / 32 * 32
    } else {
        inner / 4 * 4
    };
    (0..rows).into_par_iter().for_each_init(
        || Vec::<f32>::with_capacity(if smooth.is_some() { classes } else { 0 }),
        |buf, r| {
            // SAFETY: as in `layer_norm`: the logits are a contiguous f32
            // [rows, classes] operand (row `r` is read only), the weight a
            // contiguous f32 [classes] one, and the targets were checked to
            // lie in [0, classes) or equal ignore_index; row `r` writes only
            // its own elements of the outputs. With no class (every target
            // ignored) nothing is read: the operands of no element may have
            // no storage, so no slice is made from their pointers.
            unsafe {
                let x: &[f32] = if classes == 0 {
                    &[]
                } else {
                    std::slice::from_raw_parts(px.get().add(r * classes), classes)
                };
                let w: Option<&[f32]> = pw.map(|p| {
                    if classes == 0 {
                        &[][..]
                    } else {
                        std::slice::from_raw_parts(p.get(), classes)
                    }
                });
                let kind = if class_last {
                    LogSumKind::LastDim
                } else {
                    // PyTorch walks 8 positions of the dims after the class
                    // dim at once; the last `inner % 8` are its scalar tail.
                    let p = r % inner;
                    LogSumKind::Column {
                        tail: p >= inner - inner % 8,
                    }
                };
                let (m, ls) = log_softmax_stats_f32(x, kind);
                let (sm, sls) = if m == f32::NEG_INFINITY {
                    (m, 0.0)
                } else if m.is_nan() || m == f32::INFINITY || ls.is_nan() {
                    (f32::NAN, f32::NAN)
                } else {
                    (m, ls)
                };
                wrf(lse, 2 * r, f64::from(sm));
                wrf(lse, 2 * r + 1, f64::from(sls));
                let Some(t) = target else {
                    return;
                };
                let lp = |c: usize| x[c] - m - ls;
                let wc = |c: usize| w.map_or(1.0, |w| w[c]);
                let ti = rd_index(DType::I64, index_base(t), r as isize);
                let (n, s, wv) = if ti == ignore_index {
                    (0.0f32, 0.0f32, 0.0f32)
                } else {
                    let tu = ti as usize;
                    let s = if smooth.is_some() {
                        buf.clear();
                        match w {
                            Some(w) => {
                                buf.extend(x.iter().zip(w).map(|(&v, &wv)| (v - m - ls) * wv))
                            }
                            None => buf.extend(x.iter().map(|&v| v - m - ls)),
                        }
                        let sum = if contiguous_sum {
                            sum_run::<f32>(buf, false)
                        } else if r % inner < outer_grouped {
                            level_cascade::<f32>(classes, |c| buf[c])
                        } else {
                            cascade_row_sum::<f32>(classes, |c| buf[c])
                        };
                        -sum
                    } else {
                        0.0
                    };
                    (-lp(tu) * wc(tu), s, wc(tu))
                };
                if let Some(a) = nll {
                    wrf(a, r, f64::from(n));
                }
                if let Some(a) = smooth {
                    wrf(a, r, f64::from(s));
                }
                if let Some(a) = wt {
                    wrf(a, r, f64::from(wv));
                }
            }
        },
    );
}

fn cross_entropy_backward<T: Real>(k: &NnKernel) {
    let NnKernel::CrossEntropyBackward {
        dx,
        logits,
        lse,
        target,
        weight,
        coef,
        ignore_index,
        smoothing,
        weight_sum: _,
        rows,
        classes,
        class_last,
    } = *k
    else {
        return;
    };
    let (px, pdx) = (base::<T>(logits), base::<T>(dx));
    rows_par(rows, |r| {
        // SAFETY: as in `cross_entropy`.
        unsafe {
            let ti = rd_index(DType::I64, index_base(target), r as isize);
            let (m, ls, g) = (rdf(lse, 2 * r), rdf(lse, 2 * r + 1), rdf(coef, r));
            let w = |c: usize| weight.map_or(1.0, |w| rdf(w, c));
            let kept = ti != ignore_index;
            // PyTorch's chain, step by step (so that its NaNs, infinities
            // and zeros' signs come out): the gradient of the log
            // probabilities `gl` is nll_loss's backward, -w[t] g(1 - ε) at
            // the target (0 elsewhere, and in an ignored row), plus with
            // smoothing the smoothing term's (-g ε / C) w[c] (0 where
            // ignored: its masked_fill); then log_softmax's backward
            // gl - exp(log p) Σ gl, which is NaN in every class of a row
            // whose log-probabilities are NaN, ignored or not.
            let gn = if kept {
                w(ti as usize) * -((1.0 - smoothing) * g)
            } else {
                0.0
            };
            let gs = if kept {
                g * (smoothing / classes as f64)
            } else {
                0.0
            };
            let gl = |c: usize| {
                let v = if kept && c as i64 == ti { gn } else { 0.0 };
                if smoothing != 0.0 {
                    v + -gs * w(c)
                } else {
                    v
                }
            };
            // PyTorch's sums start from +0.0, but along the last dim its
            // sum of one class is that value itself (-0.0 stays -0.0).
            let sum = if class_last && classes == 1 {
                gl(0)
            } else {
                (0..classes).fold(0.0, |a, c| a + gl(c))
            };
            for c in 0..classes {
                // The log-probability, its exp and the product rounded to
                // PyTorch's computation type: an exp that underflows there
                // gives gl - 0 (+0.0 where gl is), not gl minus a tiny.
                let lp = T::acc((rd(px, (r * classes + c) as isize).f() - m) - ls);
                let p = T::acc(lp.exp());
                *pdx.get().add(r * classes + c) = T::of(gl(c) - T::acc(p * sum));
            }
        }
    });
}

/// Runs `k` on host memory.
pub(crate) fn run(k: NnKernel) {
    macro_rules! float {
        ($d:expr, $f:ident) => {
            match $d {
                DType::F32 => $f::<f32>(&k),
                DType::F64 => $f::<f64>(&k),
                DType::F16 => $f::<half::f16>(&k),
                _ => $f::<half::bf16>(&k),
            }
        };
    }
    match k {
        NnKernel::MapCopy {
            out,
            src,
            maps,
            fill,
        } => super::shape_ops::map_copy(out, src, maps, fill),
        NnKernel::Gather {
            out,
            src,
            index,
            dim,
            bound,
        } => dispatch_dtype!(out.dtype, T => gather::<T>(out, src, index, dim, bound)),
        NnKernel::ScatterAdd {
            out,
            index,
            src,
            dim,
            bound,
        } => dispatch_dtype!(out.dtype, T => scatter_add::<T>(out, index, src, dim, bound)),
        NnKernel::LayerNorm { .. } => layer_norm(&k),
        NnKernel::LayerNormBackward { .. } => super::layer_norm::backward(&k),
        NnKernel::LayerNormParamsBackward { .. } => super::layer_norm::param_grads(&k),
        NnKernel::CrossEntropy { logits, .. } => float!(logits.dtype, cross_entropy),
        NnKernel::CrossEntropyBackward { logits, .. } => {
            float!(logits.dtype, cross_entropy_backward)
        }
        NnKernel::Window { windows, op } => super::windows::run(windows, op),
        NnKernel::MaskCount { counts, mask, n } => mask_count(counts, mask, n),
        NnKernel::MaskCompact {
            out,
            src,
            mask,
            offsets,
            n,
            expand,
        } => {
            dispatch_dtype!(out.dtype, T => mask_compact::<T>(out, src, mask, offsets, n, expand))
        }
    }
}
