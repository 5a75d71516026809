//! The row arithmetic of layer norm's CPU forward and backward, as PyTorch's CPU kernel
//! (`aten/src/ATen/native/cpu/layer_norm_kernel.cpp` with `RowwiseMoments`
//! of `moments_utils.h`, the AVX2 build PyTorch dispatches to on x86-64
//! CPUs with AVX2) computes it, operation by operation, so that the output,
//! the mean and the rstd come out bit for bit as PyTorch's (checked against
//! PyTorch 2.15 by `tests/suite/layer_norm_s55.rs`).
//!
//! The statistics are a cascaded Welford over vector lanes
//! ([`moments`]): the row is cut into vectors of `W * H` elements (8 f32,
//! 4 f64, or 16 f16/bf16 widened to two f32 halves of 8), each lane runs
//! Welford's update over chunks of 16 vectors (`m1 = fma(1/(j+1), d, m1)`,
//! `m2 = fma(d, x - m1, m2)`), the chunks merge pairwise up a stack
//! (binary-counter order), the stack folds into its bottom level, the
//! trailing `N % (W * H)` elements run a scalar Welford, and the lanes then
//! merge into that one by one. `rstd = 1 / sqrt(var + eps)` (var biased,
//! eps in the computation type). The output is `(x - mean) * rstd * weight
//! + bias` with PyTorch's fused multiply-adds (see [`second_pass`] and
//! [`half_row`]).
//!
//! The backward ([`backward`], [`param_grads`]; the section "backward"
//! below) is PyTorch's `LayerNormBackwardKernelImplInternal` run on one
//! thread: dx from vectorised row reductions, the weight's and bias's
//! gradients accumulated row after row in a buffer of the input's dtype
//! (checked against PyTorch 2.15's bits by the unit tests here and, end to
//! end, by strata-autograd's `tests/suite/layer_norm_bw_s56.rs`).
//!
//! The fused multiply-adds are `mul_add`; where the CPU has FMA the rows run
//! in copies compiled with it (a single instruction, same bits), elsewhere
//! `mul_add` is the C library's exact `fma` (slower, same bits).

use super::nn::Ptr;
use crate::backend::{Arg, NnKernel};
use crate::dtype::DType;
use rayon::prelude::*;
use std::ops::{Add, Div, Mul, Neg, Sub};

/// The computation types (f32 for f32/f16/bf16 input, f64 for f64).
pub(crate) trait Math:
    Copy
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Div<Output = Self>
    + Neg<Output = Self>
{
    const ZERO: Self;
    const ONE: Self;
    /// `self * b + c` rounded once.
    fn fma(self, b: Self, c: Self) -> Self;
    /// `static_cast<T>(n)` of a count.
    fn count(n: usize) -> Self;
}

impl Math for f32 {
    const ZERO: f32 = 0.0;
    const ONE: f32 = 1.0;
    #[inline(always)]
    fn fma(self, b: f32, c: f32) -> f32 {
        self.mul_add(b, c)
    }
    #[inline(always)]
    fn count(n: usize) -> f32 {
        n as f32
    }
}

impl Math for f64 {
    const ZERO: f64 = 0.0;
    const ONE: f64 = 1.0;
    #[inline(always)]
    fn fma(self, b: f64, c: f64) -> f64 {
        self.mul_add(b, c)
    }
    #[inline(always)]
    fn count(n: usize) -> f64 {
        n as f64
    }
}

/// Vectors per Welford chunk (`kChunkSize`).
const CHUNK: usize = 16;
/// Levels of the merge stack: `ceil(log2(chunks))` stays below this.
const MAX_DEPTH: usize = 64;

/// PyTorch's `utils::CeilLog2`: 1 for 0, 1 and 2.
fn ceil_log2(x: usize) -> usize {
    if x <= 2 {
        1
    } else {
        (usize::BITS - (x - 1).leading_zeros()) as usize
    }
}

/// Scalar `AddMoments`: merges `(m0_add, m1_add, m2_add)` into `(m0, m1,
/// m2)`. PyTorch's compiler contracts `m1 += c * delta` and the inner
/// `m2_add + (delta * delta * c) * m0` into fused multiply-adds.
#[inline(always)]
fn add_moments<F: Math>(
    m0_add: usize,
    m1_add: F,
    m2_add: F,
    m0: &mut usize,
    m1: &mut F,
    m2: &mut F,
) {
    let n = *m0 + m0_add;
    let c = if n == 0 {
        F::ZERO
    } else {
        F::count(m0_add) / F::count(n)
    };
    let delta = m1_add - *m1;
    *m1 = c.fma(delta, *m1);
    *m2 = *m2 + (delta * delta * c).fma(F::count(*m0), m2_add);
    *m0 = n;
}

/// `AddMomentsVec`, lane by lane: `m1 + c*delta` (the product rounded),
/// `fma(delta * m0, c * delta, m2 + m2_add)`.
#[inline(always)]
fn add_moments_vec<F: Math, const W: usize>(
    m0_add: usize,
    m1_add: &[F; W],
    m2_add: &[F; W],
    m0: &mut usize,
    m1: &mut [F; W],
    m2: &mut [F; W],
) {
    let n = *m0 + m0_add;
    let c = if n == 0 {
        F::ZERO
    } else {
        F::count(m0_add) / F::count(n)
    };
    let fm0 = F::count(*m0);
    for l in 0..W {
        let delta = m1_add[l] - m1[l];
        let m2_tmp = m2[l] + m2_add[l];
        let cd = c * delta;
        let m0d = delta * fm0;
        m1[l] = m1[l] + cd;
        m2[l] = m0d.fma(cd, m2_tmp);
    }
    *m0 = n;
}

/// `RowwiseMoments` (ddof 0): the row's mean and biased variance, `W` lanes
/// of the computation type, `H` of them per input vector (2 for f16/bf16,
/// whose 16-element vectors widen to two f32 vectors). `TAIL_FMA`: whether
/// the scalar Welford over the trailing elements fuses `m2 += delta * (x -
/// m1)` (PyTorch's f16 build does, its f32, f64 and bf16 ones do not).
#[inline(always)]
fn moments<F: Math, const W: usize, const H: usize, const TAIL_FMA: bool>(x: &[F]) -> (F, F) {
    let vs = W * H;
    let len = x.len();
    let n = len / vs;
    let chunks = n.div_ceil(CHUNK);
    let depth = ceil_log2(chunks);
    let mut inv = [F::ZERO; CHUNK];
    for (i, c) in inv.iter_mut().enumerate() {
        *c = F::ONE / F::count(i + 1);
    }
    let mut m0s = [0usize; MAX_DEPTH];
    let mut m1s = [[F::ZERO; W]; MAX_DEPTH];
    let mut m2s = [[F::ZERO; W]; MAX_DEPTH];
    for i in 0..chunks {
        let cnt = CHUNK.min(n - i * CHUNK);
        let chunk = &x[i * CHUNK * vs..][..cnt * vs];
        for h in 0..H {
            let mut m1 = [F::ZERO; W];
            let mut m2 = [F::ZERO; W];
            for (j, v) in chunk.chunks_exact(vs).enumerate() {
                let c = inv[j];
                let v = &v[h * W..][..W];
                for l in 0..W {
                    let d = v[l] - m1[l];
                    m1[l] = c.fma(d, m1[l]);
                    m2[l] = d.fma(v[l] - m1[l], m2[l]);
                }
            }
            add_moments_vec(cnt, &m1, &m2, &mut m0s[0], &mut m1s[0], &mut m2s[0]);
        }
        let mut mask = i + 1;
        let mut j = 1;
        while j < depth && mask & 1 == 0 {
            let (lo, hi) = (j - 1, j);
            let (a0, a1, a2) = (m0s[lo], m1s[lo], m2s[lo]);
            let (mut b0, mut b1, mut b2) = (m0s[hi], m1s[hi], m2s[hi]);
            add_moments_vec(a0, &a1, &a2, &mut b0, &mut b1, &mut b2);
            (m0s[hi], m1s[hi], m2s[hi]) = (b0, b1, b2);
            (m0s[lo], m1s[lo], m2s[lo]) = (0, [F::ZERO; W], [F::ZERO; W]);
            mask >>= 1;
            j += 1;
        }
    }
    for i in 1..depth {
        let (a0, a1, a2) = (m0s[i], m1s[i], m2s[i]);
        let (mut b0, mut b1, mut b2) = (m0s[0], m1s[0], m2s[0]);
        add_moments_vec(a0, &a1, &a2, &mut b0, &mut b1, &mut b2);
        (m0s[0], m1s[0], m2s[0]) = (b0, b1, b2);
    }
    let (mut m0, mut m1, mut m2) = (0usize, F::ZERO, F::ZERO);
    for &v in &x[n * vs..] {
        let delta = v - m1;
        m0 += 1;
        m1 = m1 + delta / F::count(m0);
        m2 = if TAIL_FMA {
            delta.fma(v - m1, m2)
        } else {
            m2 + delta * (v - m1)
        };
    }
    for l in 0..W {
        add_moments(n * H, m1s[0][l], m2s[0][l], &mut m0, &mut m1, &mut m2);
    }
    (m1, m2 / F::count(len))
}

/// `LayerNormSecondPass` (f32, f64): `(x + (-mean)) * rstd * weight + bias`
/// where PyTorch's compiler fuses the last multiply-add (a missing bias adds
/// +0.0), and with no weight, whose `* 1` it drops, fuses `* rstd + bias`.
#[inline(always)]
fn second_pass<F: Math>(x: &[F], w: Option<&[F]>, b: Option<&[F]>, mean: F, rstd: F, y: &mut [F]) {
    let bias = -mean;
    match (w, b) {
        (Some(w), Some(b)) => {
            for (((y, &x), &g), &be) in y.iter_mut().zip(x).zip(w).zip(b) {
                *y = ((x + bias) * rstd).fma(g, be);
            }
        }
        (Some(w), None) => {
            for ((y, &x), &g) in y.iter_mut().zip(x).zip(w) {
                *y = ((x + bias) * rstd).fma(g, F::ZERO);
            }
        }
        (None, Some(b)) => {
            for ((y, &x), &be) in y.iter_mut().zip(x).zip(b) {
                *y = (x + bias).fma(rstd, be);
            }
        }
        (None, None) => {
            for (y, &x) in y.iter_mut().zip(x) {
                *y = (x + bias).fma(rstd, F::ZERO);
            }
        }
    }
}

#[inline(always)]
fn f32_row(x: &[f32], w: Option<&[f32]>, b: Option<&[f32]>, eps: f32, y: &mut [f32]) -> (f32, f32) {
    let (mean, var) = moments::<f32, 8, 1, false>(x);
    let rstd = 1.0 / (var + eps).sqrt();
    second_pass(x, w, b, mean, rstd, y);
    (mean, rstd)
}

#[inline(always)]
fn f64_row(x: &[f64], w: Option<&[f64]>, b: Option<&[f64]>, eps: f64, y: &mut [f64]) -> (f64, f64) {
    let (mean, var) = moments::<f64, 4, 1, false>(x);
    let rstd = 1.0 / (var + eps).sqrt();
    second_pass(x, w, b, mean, rstd, y);
    (mean, rstd)
}

/// `layer_norm_kernel_mixed_type` (f16/bf16, `x` widened to f32, `y` still
/// to be rounded): `fma(fma(x, rstd, -rstd * mean), weight, bias)`, weight
/// 1 and bias 0 where absent.
#[inline(always)]
fn half_row<const TAIL_FMA: bool>(
    x: &[f32],
    w: Option<&[f32]>,
    b: Option<&[f32]>,
    eps: f32,
    y: &mut [f32],
) -> (f32, f32) {
    let (mean, var) = moments::<f32, 8, 2, TAIL_FMA>(x);
    let rstd = 1.0 / (var + eps).sqrt();
    let bias = -rstd * mean;
    for (j, (y, &x)) in y.iter_mut().zip(x).enumerate() {
        let g = w.map_or(1.0, |w| w[j]);
        let be = b.map_or(0.0, |b| b[j]);
        *y = x.fma(rstd, bias).fma(g, be);
    }
    (mean, rstd)
}

super::fused!(["avx2", "fma"]
    /// One f32 row: `y` from `x` (equal lengths; `w`, `b` as long).
    /// Returns the row's mean and rstd.
    pub(crate) fn row_f32(
        x: &[f32],
        w: Option<&[f32]>,
        b: Option<&[f32]>,
        eps: f32,
        y: &mut [f32],
    ) -> (f32, f32) = f32_row;
);
super::fused!(["avx2", "fma"]
    /// One f64 row, as [`row_f32`].
    /// Returns the row's mean and rstd.
    pub(crate) fn row_f64(
        x: &[f64],
        w: Option<&[f64]>,
        b: Option<&[f64]>,
        eps: f64,
        y: &mut [f64],
    ) -> (f64, f64) = f64_row;
);
super::fused!(["avx2", "fma"]
    /// One f16 row widened to f32 (`y` in f32, to round to f16).
    /// Returns the row's mean and rstd.
    pub(crate) fn row_f16(
        x: &[f32],
        w: Option<&[f32]>,
        b: Option<&[f32]>,
        eps: f32,
        y: &mut [f32],
    ) -> (f32, f32) = half_row::<true>;
);
super::fused!(["avx2", "fma"]
    /// One bf16 row widened to f32 (`y` in f32, to round to bf16).
    /// Returns the row's mean and rstd.
    pub(crate) fn row_bf16(
        x: &[f32],
        w: Option<&[f32]>,
        b: Option<&[f32]>,
        eps: f32,
        y: &mut [f32],
    ) -> (f32, f32) = half_row::<false>;
);

// ------------------------------------------------------------------ backward
//
// `LayerNormBackwardKernelImplInternal` of the same file of PyTorch, one
// thread: for each row, `ds = Σ dy γ x` and `db = Σ dy γ` with
// `vec::map*_reduce_all` (or the explicit loops of `layer_norm_backward_frame`
// for f16/bf16 input with f32 parameters), then `b = (db mean - ds) rstd³ /
// N`, `c = -b mean - db rstd / N` and `dx = rstd dy γ + b x + c`; the
// weight's and bias's gradients accumulate row after row into a buffer of the
// input's dtype, `buf += dy (rstd x - rstd mean)` and `buf += dy`. Which
// multiply-adds PyTorch's compiler fuses was found against PyTorch 2.15's
// bits (AVX2 build): the f32/f64 reductions' main loops are not fused (GCC
// avoids multiply-add chains carried across a loop) but their tails are; the
// f16/bf16 reductions, the scalars b and c, dx and the buffers are.

/// The lanes of an accumulator folded as PyTorch's `vec_reduce_all`: f32's
/// AVX2 shuffles (lane l with l ^ 4, then l ^ 2, then l ^ 1), f64's lanes
/// one by one.
trait Lanes: Math {
    const W: usize;
    fn fold(v: &[Self]) -> Self;
}

impl Lanes for f32 {
    const W: usize = 8;
    #[inline(always)]
    fn fold(v: &[f32]) -> f32 {
        tree8(v)
    }
}

impl Lanes for f64 {
    const W: usize = 4;
    #[inline(always)]
    fn fold(v: &[f64]) -> f64 {
        seq_sum(&v[..4])
    }
}

/// `VecReduceAllSIMD<float>` on AVX2: `(v0 + v4) + (v2 + v6)` and so on.
#[inline(always)]
fn tree8(v: &[f32]) -> f32 {
    let a: [f32; 8] = std::array::from_fn(|l| v[l] + v[l ^ 4]);
    let b: [f32; 4] = std::array::from_fn(|l| a[l] + a[l ^ 2]);
    b[0] + b[1]
}

/// The generic `vec_reduce_all(f, v, size)`: lane 0 plus each next lane.
#[inline(always)]
fn seq_sum<F: Math>(v: &[F]) -> F {
    v[1..].iter().fold(v[0], |s, &x| s + x)
}

/// `map*_reduce_all` of f32/f64 with `red = +` of the products `p(i) * q(i)`
/// (`PRODUCT` false: of `p(i)` alone, `reduce_all`), over `n >= 1` elements.
#[inline(always)]
fn reduce_native<F: Lanes, const PRODUCT: bool>(n: usize, pq: impl Fn(usize) -> (F, F)) -> F {
    let term = |i: usize| {
        let (p, q) = pq(i);
        if PRODUCT {
            p * q
        } else {
            p
        }
    };
    let w = F::W;
    if n < w {
        let v: Vec<F> = (0..n).map(term).collect();
        return seq_sum(&v);
    }
    let mut acc: [F; 8] = std::array::from_fn(|l| if l < w { term(l) } else { F::ZERO });
    let whole = n - n % w;
    for d in (w..whole).step_by(w) {
        for (l, a) in acc[..w].iter_mut().enumerate() {
            *a = *a + term(d + l);
        }
    }
    for (l, a) in acc[..n - whole].iter_mut().enumerate() {
        let (p, q) = pq(whole + l);
        *a = if PRODUCT { p.fma(q, *a) } else { *a + p };
    }
    F::fold(&acc[..w])
}

/// The reduced-type `map*_reduce_all` / `reduce_all` (f16/bf16 data widened
/// to f32): 16-element vectors in two f32 halves with an accumulator each,
/// the products fused into them.
#[inline(always)]
fn reduce_half<const PRODUCT: bool>(n: usize, pq: impl Fn(usize) -> (f32, f32)) -> f32 {
    let term = |i: usize| {
        let (p, q) = pq(i);
        if PRODUCT {
            p * q
        } else {
            p
        }
    };
    let add = |a: f32, i: usize| {
        let (p, q) = pq(i);
        if PRODUCT {
            p.fma(q, a)
        } else {
            a + p
        }
    };
    if n < 16 {
        let mut v: [f32; 8] = std::array::from_fn(|l| if l < n { term(l) } else { 0.0 });
        if n > 8 {
            for (l, a) in v[..n - 8].iter_mut().enumerate() {
                *a = add(*a, 8 + l);
            }
            return seq_sum(&v);
        }
        return seq_sum(&v[..n]);
    }
    let mut a0: [f32; 8] = std::array::from_fn(term);
    let mut a1: [f32; 8] = std::array::from_fn(|l| term(8 + l));
    let whole = n - n % 16;
    for d in (16..whole).step_by(16) {
        for l in 0..8 {
            a0[l] = add(a0[l], d + l);
            a1[l] = add(a1[l], d + 8 + l);
        }
    }
    let r = n - whole;
    for (l, a) in a0[..r.min(8)].iter_mut().enumerate() {
        *a = add(*a, whole + l);
    }
    for (l, a) in a1[..r.saturating_sub(8)].iter_mut().enumerate() {
        *a = add(*a, whole + 8 + l);
    }
    tree8(&std::array::from_fn::<f32, 8, _>(|l| a0[l] + a1[l]))
}

/// `ds` and `db` of `layer_norm_backward_frame` for f16/bf16 input with an
/// f32 weight (its explicit loops: `db = dy γ`, `ds = x db`, `ds` fused
/// into its accumulator, `db` added).
#[inline(always)]
fn mixed_ds_db(dy: &[f32], x: &[f32], g: &[f32]) -> (f32, f32) {
    let n = dy.len();
    let at = |v: &[f32], i: usize| if i < n { v[i] } else { 0.0 };
    if n < 16 {
        let db0: [f32; 8] = std::array::from_fn(|l| at(dy, l) * at(g, l));
        let mut ds0: [f32; 8] = std::array::from_fn(|l| at(x, l) * db0[l]);
        if n > 8 {
            let mut db = db0;
            for l in 0..n - 8 {
                let db1 = dy[8 + l] * g[8 + l];
                ds0[l] = x[8 + l].fma(db1, ds0[l]);
                db[l] = db0[l] + db1;
            }
            return (tree8(&ds0), tree8(&db));
        }
        return (seq_sum(&ds0[..n]), seq_sum(&db0[..n]));
    }
    let db_at = |i: usize| dy[i] * g[i];
    let mut adb: [f32; 16] = std::array::from_fn(db_at);
    let mut ads: [f32; 16] = std::array::from_fn(|l| x[l] * adb[l]);
    let mut step = |l: usize, i: usize| {
        let db = db_at(i);
        ads[l] = x[i].fma(db, ads[l]);
        adb[l] += db;
    };
    let whole = n - n % 16;
    for d in (16..whole).step_by(16) {
        for l in 0..16 {
            step(l, d + l);
        }
    }
    for l in 0..n - whole {
        step(l, whole + l);
    }
    (
        tree8(&std::array::from_fn::<f32, 8, _>(|l| ads[l] + ads[8 + l])),
        tree8(&std::array::from_fn::<f32, 8, _>(|l| adb[l] + adb[8 + l])),
    )
}

/// The row's `(b, c)` from `ds`, `db` and the saved statistics.
#[inline(always)]
fn coefficients<F: Math>(ds: F, db: F, mean: F, rstd: F, scale: F) -> (F, F) {
    let a = rstd;
    let b = db.fma(mean, -ds) * a * a * a * scale;
    let c = (-b).fma(mean, -(db * a * scale));
    (b, c)
}

/// `dx = fma(b, x, rstd dy γ) + c` (γ = 1 when absent, its product dropped).
#[inline(always)]
fn input_grad<F: Math>(dy: &[F], x: &[F], w: Option<&[F]>, rstd: F, b: F, c: F, dx: &mut [F]) {
    match w {
        Some(w) => {
            for (((o, &d), &x), &g) in dx.iter_mut().zip(dy).zip(x).zip(w) {
                *o = b.fma(x, rstd * d * g) + c;
            }
        }
        None => {
            for ((o, &d), &x) in dx.iter_mut().zip(dy).zip(x) {
                *o = b.fma(x, rstd * d) + c;
            }
        }
    }
}

#[inline(always)]
fn native_dx_row<F: Lanes>(dy: &[F], x: &[F], w: Option<&[F]>, mean: F, rstd: F, dx: &mut [F]) {
    let n = dy.len();
    let scale = F::ONE / F::count(n);
    let (ds, db) = match w {
        None => (
            reduce_native::<F, true>(n, |i| (dy[i], x[i])),
            reduce_native::<F, false>(n, |i| (dy[i], F::ZERO)),
        ),
        Some(g) => (
            reduce_native::<F, true>(n, |i| (dy[i] * x[i], g[i])),
            reduce_native::<F, true>(n, |i| (dy[i], g[i])),
        ),
    };
    let (b, c) = coefficients(ds, db, mean, rstd, scale);
    input_grad(dy, x, w, rstd, b, c, dx);
}

/// One f16/bf16 row widened to f32 (`dx` still to be rounded); `mixed`:
/// the weight is f32 (PyTorch's mixed-type frame).
#[inline(always)]
fn half_dx_row(
    dy: &[f32],
    x: &[f32],
    w: Option<&[f32]>,
    mixed: bool,
    mean: f32,
    rstd: f32,
    dx: &mut [f32],
) {
    let n = dy.len();
    let scale = 1.0 / n as f32;
    let (ds, db) = match w {
        None => (
            reduce_half::<true>(n, |i| (dy[i], x[i])),
            reduce_half::<false>(n, |i| (dy[i], 0.0)),
        ),
        Some(g) if mixed => mixed_ds_db(dy, x, g),
        Some(g) => (
            reduce_half::<true>(n, |i| (dy[i] * x[i], g[i])),
            reduce_half::<true>(n, |i| (dy[i], g[i])),
        ),
    };
    let (b, c) = coefficients(ds, db, mean, rstd, scale);
    input_grad(dy, x, w, rstd, b, c, dx);
}

/// Adds one row to the weight's and bias's gradient buffers:
/// `gw = round(fma(dy, fma(rstd, x, -rstd mean), gw))`, `gb = round(gb +
/// dy)`, `round` to the buffer's dtype (the input's).
#[inline(always)]
fn param_row<F: Math>(
    dy: &[F],
    x: &[F],
    mean: F,
    rstd: F,
    gw: Option<&mut [F]>,
    gb: Option<&mut [F]>,
    round: impl Fn(F) -> F,
) {
    let shift = -rstd * mean;
    if let Some(gw) = gw {
        for ((o, &d), &x) in gw.iter_mut().zip(dy).zip(x) {
            *o = round(d.fma(rstd.fma(x, shift), *o));
        }
    }
    if let Some(gb) = gb {
        for (o, &d) in gb.iter_mut().zip(dy) {
            *o = round(*o + d);
        }
    }
}

super::fused!(["avx2", "fma"]
    /// One f32 row of dx.
    fn dx_row_f32(dy: &[f32], x: &[f32], w: Option<&[f32]>, mean: f32, rstd: f32, dx: &mut [f32]) =
        native_dx_row;
);
super::fused!(["avx2", "fma"]
    /// One f64 row of dx.
    fn dx_row_f64(dy: &[f64], x: &[f64], w: Option<&[f64]>, mean: f64, rstd: f64, dx: &mut [f64]) =
        native_dx_row;
);
super::fused!(["avx2", "fma"]
    /// One f16/bf16 row of dx, widened to f32.
    fn dx_row_half(
        dy: &[f32],
        x: &[f32],
        w: Option<&[f32]>,
        mixed: bool,
        mean: f32,
        rstd: f32,
        dx: &mut [f32],
    ) = half_dx_row;
);

/// The address of an operand's first element.
fn first(a: &Arg) -> *mut u8 {
    // SAFETY: the offset lies inside the storage (layouts are checked when
    // views are made), so the pointer stays within the allocation.
    unsafe { a.mem.host_ptr().add(a.layout.offset * a.dtype.size()) }
}

/// The operand's first element, to be read as `T` (its dtype's type, or
/// `u8` to be cast to it), as a pointer parallel tasks share.
fn shared<T>(a: &Arg) -> Ptr<T> {
    Ptr(first(a) as *mut T)
}

/// Writes elements `start..start + out.len()` of a contiguous operand of
/// f16/bf16 (or f32) values to `out`, widened to f32.
///
/// # Safety
/// The operand must hold those elements, of dtype `dtype`.
unsafe fn widen(p: Ptr<u8>, dtype: DType, start: usize, out: &mut [f32]) {
    let len = out.len();
    // SAFETY: guaranteed by the caller.
    unsafe {
        match dtype {
            DType::F32 => out.copy_from_slice(std::slice::from_raw_parts(
                (p.get() as *const f32).add(start),
                len,
            )),
            DType::F16 => {
                let src = std::slice::from_raw_parts((p.get() as *const half::f16).add(start), len);
                for (o, v) in out.iter_mut().zip(src) {
                    *o = v.to_f32();
                }
            }
            _ => {
                let src =
                    std::slice::from_raw_parts((p.get() as *const half::bf16).add(start), len);
                for (o, v) in out.iter_mut().zip(src) {
                    *o = v.to_f32();
                }
            }
        }
    }
}

/// f32 `v` rounded to bf16 as PyTorch's AVX2 vector conversion does
/// (nearest even; every NaN 0xffff).
fn bf16_vector(v: f32) -> half::bf16 {
    if v.is_nan() {
        half::bf16::from_bits(0xffff)
    } else {
        half::bf16::from_f32(v)
    }
}

/// f32 `v` rounded to `dtype` (f16 or bf16) and widened back.
fn round_half(dtype: DType, v: f32) -> f32 {
    match dtype {
        DType::F16 => half::f16::from_f32(v).to_f32(),
        _ => bf16_vector(v).to_f32(),
    }
}

/// [`NnKernel::LayerNormBackward`] on the CPU: dx as PyTorch's CPU kernel
/// computes it, bit for bit (f32, f64, and f16/bf16 with parameters of
/// their own dtype or f32). The saved mean and rstd are read as they are:
/// for f16/bf16 input with parameters of its own dtype (or none) PyTorch
/// saves them rounded to that dtype, which the caller reproduces.
pub(crate) fn backward(k: &NnKernel) {
    let NnKernel::LayerNormBackward {
        dx,
        dy,
        x,
        mean,
        rstd,
        weight,
        rows,
        cols,
    } = *k
    else {
        return;
    };
    let (pdx, pdy, px) = (shared::<u8>(dx), shared::<u8>(dy), shared::<u8>(x));
    let pw = weight.map(shared::<u8>);
    match x.dtype {
        DType::F32 | DType::F64 => {
            macro_rules! native {
                ($t:ty, $row:ident) => {{
                    let (pm, ps) = (shared::<$t>(mean), shared::<$t>(rstd));
                    (0..rows).into_par_iter().for_each(|r| {
                        // SAFETY: dy, x and dx are contiguous `[rows, cols]`
                        // of this dtype (dx a fresh tensor, so no overlap),
                        // mean and rstd `[rows]`, the weight `[cols]` (the
                        // op checked them); each task writes its own row.
                        unsafe {
                            let at = |p: Ptr<u8>| (p.get() as *mut $t).add(r * cols);
                            let dyr = std::slice::from_raw_parts(at(pdy), cols);
                            let xr = std::slice::from_raw_parts(at(px), cols);
                            let wr =
                                pw.map(|p| std::slice::from_raw_parts(p.get() as *const $t, cols));
                            let out = std::slice::from_raw_parts_mut(at(pdx), cols);
                            $row(dyr, xr, wr, *pm.get().add(r), *ps.get().add(r), out);
                        }
                    });
                }};
            }
            if x.dtype == DType::F32 {
                native!(f32, dx_row_f32)
            } else {
                native!(f64, dx_row_f64)
            }
        }
        dtype => {
            let mixed = weight.is_some_and(|w| w.dtype == DType::F32);
            let w = weight.map(|w| {
                let mut v = vec![0f32; cols];
                // SAFETY: the weight is contiguous `[cols]`, f32 or x's dtype.
                unsafe { widen(shared(w), w.dtype, 0, &mut v) };
                v
            });
            let (pm, ps) = (shared::<f32>(mean), shared::<f32>(rstd));
            (0..rows).into_par_iter().for_each(|r| {
                // SAFETY: as for f32; mean and rstd are f32.
                unsafe {
                    let (mut dyr, mut xr) = (vec![0f32; cols], vec![0f32; cols]);
                    widen(pdy, dtype, r * cols, &mut dyr);
                    widen(px, dtype, r * cols, &mut xr);
                    let mut out = vec![0f32; cols];
                    let (m, s) = (*pm.get().add(r), *ps.get().add(r));
                    dx_row_half(&dyr, &xr, w.as_deref(), mixed, m, s, &mut out);
                    if dtype == DType::F16 {
                        let o = (pdx.get() as *mut half::f16).add(r * cols);
                        for (j, v) in out.into_iter().enumerate() {
                            *o.add(j) = half::f16::from_f32(v);
                        }
                    } else {
                        let o = (pdx.get() as *mut half::bf16).add(r * cols);
                        for (j, v) in out.into_iter().enumerate() {
                            *o.add(j) = bf16_vector(v);
                        }
                    }
                }
            });
        }
    }
}

/// Columns per task of [`param_grads`].
const PARAM_COLS: usize = 64;

/// [`NnKernel::LayerNormParamsBackward`] on the CPU: the weight's and bias's
/// gradients as PyTorch's CPU kernel run on one thread computes them, bit
/// for bit (its buffer holds one partial sum per thread; with one thread,
/// every row is added in order into a buffer of the input's dtype). The
/// whole sums go to part 0 of `dw`/`db` (f64, `[parts, cols]`, zeroed by the
/// caller; exact), the other parts stay 0, so the caller's sum over parts
/// gives them unchanged. Tasks take blocks of columns.
pub(crate) fn param_grads(k: &NnKernel) {
    let NnKernel::LayerNormParamsBackward {
        dw,
        db,
        dy,
        x,
        mean,
        rstd,
        rows,
        cols,
        ..
    } = *k
    else {
        return;
    };
    let (pdy, px) = (shared::<u8>(dy), shared::<u8>(x));
    let (pdw, pdb) = (dw.map(shared::<f64>), db.map(shared::<f64>));
    let dtype = x.dtype;
    let blocks = cols.div_ceil(PARAM_COLS);
    (0..blocks).into_par_iter().for_each(|blk| {
        let j0 = blk * PARAM_COLS;
        let len = PARAM_COLS.min(cols - j0);
        // SAFETY: dy and x are contiguous `[rows, cols]` of x's dtype, mean
        // and rstd `[rows]` of its statistics type, dw and db `[parts,
        // cols]` f64 with parts >= 1; this task writes columns `j0..j0 +
        // len` of their row 0 only.
        unsafe {
            let write = |p: Option<Ptr<f64>>, v: &[f64]| {
                if let Some(p) = p {
                    for (j, &v) in v.iter().enumerate() {
                        // PyTorch's second pass: 0 + the buffer.
                        *p.get().add(j0 + j) = 0.0 + v;
                    }
                }
            };
            if dtype == DType::F64 {
                let (pm, ps) = (shared::<f64>(mean), shared::<f64>(rstd));
                let (mut gw, mut gb) = (vec![0f64; len], vec![0f64; len]);
                for r in 0..rows {
                    let at = |p: Ptr<u8>| {
                        std::slice::from_raw_parts((p.get() as *const f64).add(r * cols + j0), len)
                    };
                    param_row_f64(
                        at(pdy),
                        at(px),
                        *pm.get().add(r),
                        *ps.get().add(r),
                        pdw.map(|_| &mut gw[..]),
                        pdb.map(|_| &mut gb[..]),
                    );
                }
                write(pdw, &gw);
                write(pdb, &gb);
            } else {
                let (pm, ps) = (shared::<f32>(mean), shared::<f32>(rstd));
                let (mut gw, mut gb) = (vec![0f32; len], vec![0f32; len]);
                let (mut dyr, mut xr) = (vec![0f32; len], vec![0f32; len]);
                for r in 0..rows {
                    widen(pdy, dtype, r * cols + j0, &mut dyr);
                    widen(px, dtype, r * cols + j0, &mut xr);
                    param_row_f32(
                        &dyr,
                        &xr,
                        *pm.get().add(r),
                        *ps.get().add(r),
                        pdw.map(|_| &mut gw[..]),
                        pdb.map(|_| &mut gb[..]),
                        dtype,
                    );
                }
                let wide = |v: &[f32]| v.iter().map(|&v| f64::from(v)).collect::<Vec<_>>();
                write(pdw, &wide(&gw));
                write(pdb, &wide(&gb));
            }
        }
    });
}

#[inline(always)]
fn param_row_f64_body(
    dy: &[f64],
    x: &[f64],
    mean: f64,
    rstd: f64,
    gw: Option<&mut [f64]>,
    gb: Option<&mut [f64]>,
) {
    param_row(dy, x, mean, rstd, gw, gb, |v| v);
}

/// f32, f16 or bf16 data (widened to f32): the buffers round to `dtype`.
#[inline(always)]
fn param_row_f32_body(
    dy: &[f32],
    x: &[f32],
    mean: f32,
    rstd: f32,
    gw: Option<&mut [f32]>,
    gb: Option<&mut [f32]>,
    dtype: DType,
) {
    if dtype == DType::F32 {
        param_row(dy, x, mean, rstd, gw, gb, |v| v);
    } else {
        param_row(dy, x, mean, rstd, gw, gb, |v| round_half(dtype, v));
    }
}

super::fused!(["avx2", "fma"]
    /// One row into the f64 buffers.
    fn param_row_f64(
        dy: &[f64],
        x: &[f64],
        mean: f64,
        rstd: f64,
        gw: Option<&mut [f64]>,
        gb: Option<&mut [f64]>,
    ) = param_row_f64_body;
);
super::fused!(["avx2", "fma"]
    /// One row into the f32 buffers (rounded to `dtype`).
    fn param_row_f32(
        dy: &[f32],
        x: &[f32],
        mean: f32,
        rstd: f32,
        gw: Option<&mut [f32]>,
        gb: Option<&mut [f32]>,
        dtype: DType,
    ) = param_row_f32_body;
);

#[cfg(test)]
mod tests {
    use super::{ceil_log2, dx_row_f32, dx_row_f64, dx_row_half, param_row_f32, param_row_f64};
    use crate::dtype::DType;

    #[test]
    fn ceil_log2_as_pytorch() {
        let want = [
            (0, 1),
            (1, 1),
            (2, 1),
            (3, 2),
            (4, 2),
            (5, 3),
            (8, 3),
            (9, 4),
            (257, 9),
        ];
        for (x, l) in want {
            assert_eq!(ceil_log2(x), l, "{x}");
        }
    }

    // PyTorch 2.15's answers (CPU, AVX2, one thread) for three rows of each
    // case, printed by `benches/anchors/gen_layer_norm_bw_s56.py --unit`:
    // its saved mean and rstd, and the bits of dx, dw and db. The inputs are
    // `x[r][j] = 2 + ((37 j + 11 r) % 61 - 30) / 16`, `dy[r][j] = ((23 j +
    // 5 r + 5) % 41 - 20) / 16` and `w[j] = ((13 j + 3) % 29 - 14) / 8`,
    // exact in every dtype. The end-to-end check (autograd, every dtype and
    // size) is strata-autograd's `tests/suite/layer_norm_bw_s56.rs`.
    // F32_W: f32 x, f32 weight, [3, 19]
    const F32_W_MEAN: [u32; 3] = [0x3ff00000, 0x3fe1435f, 0x3fec35e5];
    const F32_W_RSTD: [u32; 3] = [0x3f620493, 0x3f6aa039, 0x3f6bce34];
    const F32_W_DX: [u32; 57] = [
        0x3f452eca, 0xbe0bbde3, 0x3f23ec7c, 0xbe9683d6, 0xbf325812, 0xbf5ba0fa, 0xbe760d59,
        0x3f0ce0b0, 0x3c1614e0, 0x3f1ed36c, 0xbe17627f, 0x3ef79a2b, 0xbe9fde36, 0xbeeba2de,
        0xbf2efea9, 0xbe575119, 0x3edeb303, 0x3d0435a8, 0x3eff1069, 0x3ed85145, 0xbe366c0e,
        0x3e0ba572, 0xbefd0efe, 0xbebaa6ee, 0x3e1a0fd6, 0xbd2c4568, 0x3e92d513, 0x3d83a840,
        0x3e554e46, 0xbd2f6f28, 0xbdae07a8, 0xbebac0f5, 0xbe376a8c, 0xbcaa3310, 0x3e0b7cf2,
        0x3dddfdd8, 0x3e726e3e, 0x3caf69c0, 0x3d32adf0, 0xbdba6764, 0xbeb3ef52, 0xbe649da0,
        0x3da60884, 0x3cb56df0, 0x3e96a7d0, 0x3d539f30, 0x3e9707f6, 0xbe09ef78, 0x3da37dbc,
        0xbf0a5791, 0xbeb3d1be, 0x3e9ac5f8, 0xbde76d1e, 0x3f02ffc6, 0xbdc0c258, 0x3f01583a,
        0xbe934b70,
    ];
    const F32_W_DW: [u32; 19] = [
        0x4005cbe2, 0x4053692c, 0x3f0e522c, 0x3ebdf69a, 0x3ece3e6d, 0xbf19e541, 0xbf104ab1,
        0x3f0aaa38, 0xbf9e15a7, 0xbf1c42f8, 0xbfc4b3c3, 0xbf51e606, 0xbf8c80e2, 0xbf3e3f71,
        0xbfd72709, 0xbeb8ba5a, 0xbfb547df, 0x3f459e39, 0xbf1761f4,
    ];
    const F32_W_DB: [u32; 19] = [
        0xbff00000, 0x401c0000, 0xbf700000, 0x3f500000, 0x00000000, 0xbf500000, 0x3f700000,
        0xc01c0000, 0x3ff00000, 0xbfc00000, 0x40340000, 0xbf100000, 0x3f980000, 0x3ec00000,
        0xbee00000, 0x3fa80000, 0xc0040000, 0x40100000, 0xbf900000,
    ];
    // F32_5: f32 x, no weight, [3, 5]
    const F32_5_MEAN: [u32; 3] = [0x3fd9999a, 0x3fd00000, 0x40140000];
    const F32_5_RSTD: [u32; 3] = [0x3f697b34, 0x3f6d461e, 0x3f6d461e];
    const F32_5_DX: [u32; 15] = [
        0x3dcc1780, 0x3e23762c, 0xbd60e080, 0x3ba64900, 0xbe567c08, 0xbf427506, 0x3f0ef10e,
        0xbef334ac, 0x3f5dddf3, 0xbe42fe99, 0x3e59d778, 0x3dec0430, 0x00000000, 0xbdec0430,
        0xbe59d778,
    ];
    const F32_5_DB: [u32; 5] = [0xbff00000, 0x401c0000, 0xbf700000, 0x3f500000, 0x00000000];
    // F64_W: f64 x, f64 weight, [3, 7]
    const F64_W_MEAN: [u64; 3] = [0x3ff9db6db6db6db7, 0x3ffc249249249249, 0x3ffe6db6db6db6dc];
    const F64_W_RSTD: [u64; 3] = [0x3fec86f084e10aa2, 0x3fec86f084e10aa2, 0x3feae95afccaed7a];
    const F64_W_DX: [u64; 21] = [
        0x3fe567d1e214274a,
        0x3fbabb2df397e958,
        0x3fe527885d3288d2,
        0x3fb19725ab52b2e0,
        0xbfe2193dfd5ac232,
        0xbfee987aebca51d7,
        0x3f930286c0220c80,
        0x3fdbaa49de45f6f3,
        0xbfb41a444b0e56f8,
        0x3fc702911ef9be0a,
        0xbfdecd2de052d226,
        0xbfd206f97d95b5e6,
        0x3fc5f7d2bd9a670a,
        0x3fad99e520e0a258,
        0x3fa97abc59af61c0,
        0x3fa397ec8f6362b0,
        0xbfd164c3b0710474,
        0xbfcd0f405b0679be,
        0x3fc4c4e124495b2a,
        0x3fa28638f3002588,
        0x3fcb2dae209a6cfa,
    ];
    const F64_W_DW: [u64; 7] = [
        0x3ffe10bb2b9dbb21,
        0x40094e8ef9819a69,
        0x3fda95c0b742dd0c,
        0x3fe269a2b0cae9bc,
        0x3fd22fadb6b60460,
        0xbfd6dab063fe37eb,
        0xbfe097b0f7f3589f,
    ];
    const F64_W_DB: [u64; 7] = [
        0xbffe000000000000,
        0x4003800000000000,
        0xbfee000000000000,
        0x3fea000000000000,
        0x0000000000000000,
        0xbfea000000000000,
        0x3fee000000000000,
    ];
    // F16_W: f16 x, f16 weight, [3, 21]
    const F16_W_MEAN: [u16; 3] = [0x3f4f, 0x3f28, 0x3fba];
    const F16_W_RSTD: [u16; 3] = [0x3b32, 0x3b7f, 0x3b55];
    const F16_W_DX: [u16; 63] = [
        0x3a1a, 0xb0ab, 0x3916, 0xb4d1, 0xb9c5, 0xbb29, 0xb403, 0x385c, 0x205c, 0x38f9, 0xb177,
        0x37cc, 0xb554, 0xb780, 0xb9a6, 0xb379, 0x3705, 0x24ce, 0x3811, 0x2bb8, 0x3075, 0x3734,
        0xb20d, 0x30c3, 0xb7ac, 0xb5f4, 0x3177, 0xaa92, 0x34d2, 0x2dc5, 0x32ca, 0xa73a, 0xae2e,
        0xb5dc, 0xb11f, 0xa600, 0x30e9, 0x2e62, 0x33ea, 0x2994, 0x2fc9, 0xb45c, 0x2e03, 0x2e03,
        0xb408, 0xb2c4, 0x3336, 0x2d1c, 0x3438, 0x3100, 0x34fc, 0x2494, 0x309f, 0xb87a, 0xb398,
        0x3537, 0x29fb, 0x38a7, 0xaeee, 0x38fa, 0xb410, 0xb9d0, 0xb8ea,
    ];
    const F16_W_DW: [u16; 21] = [
        0x4043, 0x4276, 0x3862, 0x3708, 0x35d1, 0xb785, 0xb8db, 0x3893, 0xbd48, 0xb8fd, 0xbea7,
        0xbade, 0xbc12, 0xba5f, 0xbe3a, 0xb6f4, 0xbdd0, 0x3974, 0xb8ed, 0xb7cc, 0x372f,
    ];
    const F16_W_DB: [u16; 21] = [
        0xbf80, 0x40e0, 0xbb80, 0x3a80, 0x0000, 0xba80, 0x3b80, 0xc0e0, 0x3f80, 0xbe00, 0x41a0,
        0xb880, 0x3cc0, 0x3600, 0xb700, 0x3d40, 0xc020, 0x4080, 0xbc80, 0x3900, 0xb200,
    ];
    // BF16_MIXED: bf16 x, f32 weight, [3, 13]
    const BF16_MIXED_MEAN: [u32; 3] = [0x3fd76277, 0x3fe44ec6, 0x3ff13b15];
    const BF16_MIXED_RSTD: [u32; 3] = [0x3f6d9d25, 0x3f6fa90e, 0x3f65ec28];
    const BF16_MIXED_DX: [u16; 39] = [
        0x3f35, 0xbe10, 0x3f1c, 0xbe8a, 0xbf43, 0xbf7f, 0xbe7b, 0x3f05, 0x3d5d, 0x3f21, 0xbe7b,
        0x3f06, 0xbec4, 0x3edd, 0xbdff, 0x3e23, 0xbf06, 0xbeaa, 0x3e20, 0x3c8f, 0x3ea2, 0x3d52,
        0x3e83, 0xbd1b, 0xbcbf, 0xbeb1, 0x3dc6, 0x3c37, 0xbe8b, 0xbe35, 0x3e29, 0x3da0, 0x3ea1,
        0x3dfc, 0x3ea9, 0xbd2e, 0x3e0c, 0xbeff, 0xbe89,
    ];
    const BF16_MIXED_DW: [u32; 13] = [
        0x40020000, 0x40540000, 0x3ef50000, 0x3f040000, 0x3ea80000, 0xbed30000, 0xbf0f0000,
        0x3edb0000, 0xbf9a0000, 0xbf3e0000, 0xbfc50000, 0xbf6e0000, 0xbf6f0000,
    ];
    const BF16_MIXED_DB: [u32; 13] = [
        0xbff00000, 0x401c0000, 0xbf700000, 0x3f500000, 0x00000000, 0xbf500000, 0x3f700000,
        0xc01c0000, 0x3ff00000, 0xbfc00000, 0x40340000, 0xbf100000, 0x3f980000,
    ];
    // BF16_40: bf16 x, no weight, [3, 40]
    const BF16_40_MEAN: [u16; 3] = [0x3ff9, 0x3ffc, 0x3ffe];
    const BF16_40_RSTD: [u16; 3] = [0x3f66, 0x3f67, 0x3f65];
    const BF16_40_DX: [u16; 120] = [
        0xbf6b, 0x3ef3, 0xbf1a, 0x3f4a, 0xbe92, 0x3f71, 0x3cfc, 0xbf86, 0x3eb1, 0xbf3b, 0x3eff,
        0xbed3, 0x3f50, 0xbdc7, 0x3f91, 0x3d5e, 0xbf5b, 0x3ebd, 0xbf0b, 0x3f30, 0xbec7, 0x3f80,
        0xbd97, 0xbf7c, 0x3e78, 0xbf55, 0x3f0f, 0xbf05, 0x3f60, 0xbe4f, 0x3f83, 0x3de9, 0xbf76,
        0x3e88, 0xbf25, 0x3f15, 0xbea9, 0x3f66, 0xbe37, 0xbf8b, 0xbf25, 0x3f56, 0xbe99, 0x3f61,
        0x3d48, 0xbf8b, 0x3ecb, 0xbf3d, 0x3ee0, 0xbec9, 0x3f49, 0xbd38, 0x3f91, 0xbb83, 0xbf55,
        0x3eb0, 0xbef9, 0x3f31, 0xbee4, 0x3f85, 0xbdc8, 0xbf6d, 0x3e7f, 0xbf63, 0x3f19, 0xbf0a,
        0x3f72, 0xbe44, 0x3f7c, 0x3e1f, 0xbf7b, 0x3f01, 0xbf22, 0x3f0b, 0xbe92, 0x3f64, 0xbe7b,
        0xbf89, 0x3dd2, 0xbf3a, 0xbe8b, 0x3f88, 0x3ccc, 0xbf82, 0x3ea4, 0xbf37, 0x3f0a, 0xbed7,
        0x3f56, 0xbdfd, 0x3f91, 0x3dc1, 0xbf5d, 0x3ec8, 0xbf11, 0x3f30, 0xbeb3, 0x3f7c, 0xbd5e,
        0xbf82, 0x3e78, 0xbf4c, 0x3f0a, 0xbeff, 0x3f56, 0xbe4f, 0x3f87, 0x3dc0, 0xbf72, 0x3ec8,
        0xbf26, 0x3f1c, 0xbeb4, 0x3f67, 0xbd60, 0xbf8c, 0x3e27, 0xbf4c, 0x3eeb, 0xbf14,
    ];
    const BF16_40_DB: [u16; 40] = [
        0xbff0, 0x401c, 0xbf70, 0x3f50, 0x0000, 0xbf50, 0x3f70, 0xc01c, 0x3ff0, 0xbfc0, 0x4034,
        0xbf10, 0x3f98, 0x3ec0, 0xbee0, 0x3fa8, 0xc004, 0x4010, 0xbf90, 0x3f20, 0xbe40, 0xbf80,
        0x3f40, 0xc028, 0x3fd8, 0xbfd8, 0x4028, 0xbf40, 0x3f80, 0x3e40, 0xbf20, 0x3f90, 0xc010,
        0x4004, 0xbfa8, 0x3ee0, 0xbec0, 0xbf98, 0x3f10, 0xc034,
    ];

    const ROWS: usize = 3;

    fn xs(n: usize) -> Vec<f64> {
        (0..ROWS * n)
            .map(|i| 2.0 + ((37 * (i % n) + 11 * (i / n)) % 61) as f64 / 16.0 - 30.0 / 16.0)
            .collect()
    }

    fn dys(n: usize) -> Vec<f64> {
        (0..ROWS * n)
            .map(|i| ((23 * (i % n) + 5 * (i / n) + 5) % 41) as f64 / 16.0 - 20.0 / 16.0)
            .collect()
    }

    fn ws(n: usize) -> Vec<f64> {
        (0..n)
            .map(|j| ((13 * j + 3) % 29) as f64 / 8.0 - 14.0 / 8.0)
            .collect()
    }

    fn f32s(v: &[f64]) -> Vec<f32> {
        v.iter().map(|&v| v as f32).collect()
    }

    /// dx, dw and db of an f32 case, as bits.
    fn run_f32(n: usize, weight: bool, mean: &[u32], rstd: &[u32]) -> [Vec<u32>; 3] {
        let (x, dy, w) = (f32s(&xs(n)), f32s(&dys(n)), f32s(&ws(n)));
        let w = weight.then_some(&w[..]);
        let (mut dx, mut gw, mut gb) = (vec![0f32; ROWS * n], vec![0f32; n], vec![0f32; n]);
        for r in 0..ROWS {
            let (m, s) = (f32::from_bits(mean[r]), f32::from_bits(rstd[r]));
            let (xr, dyr) = (&x[r * n..][..n], &dy[r * n..][..n]);
            dx_row_f32(dyr, xr, w, m, s, &mut dx[r * n..][..n]);
            param_row_f32(dyr, xr, m, s, Some(&mut gw), Some(&mut gb), DType::F32);
        }
        let bits = |v: &[f32]| v.iter().map(|v| (0.0 + v).to_bits()).collect();
        [bits(&dx), bits(&gw), bits(&gb)]
    }

    #[test]
    fn f32_rows_are_pytorchs_bits() {
        let [dx, dw, db] = run_f32(19, true, &F32_W_MEAN, &F32_W_RSTD);
        assert_eq!(dx, F32_W_DX);
        assert_eq!(dw, F32_W_DW);
        assert_eq!(db, F32_W_DB);
        let [dx, _, db] = run_f32(5, false, &F32_5_MEAN, &F32_5_RSTD);
        assert_eq!(dx, F32_5_DX);
        assert_eq!(db, F32_5_DB);
    }

    #[test]
    fn f64_rows_are_pytorchs_bits() {
        let n = 7;
        let (x, dy, w) = (xs(n), dys(n), ws(n));
        let (mut dx, mut gw, mut gb) = (vec![0f64; ROWS * n], vec![0f64; n], vec![0f64; n]);
        for r in 0..ROWS {
            let (m, s) = (f64::from_bits(F64_W_MEAN[r]), f64::from_bits(F64_W_RSTD[r]));
            let (xr, dyr) = (&x[r * n..][..n], &dy[r * n..][..n]);
            dx_row_f64(dyr, xr, Some(&w), m, s, &mut dx[r * n..][..n]);
            param_row_f64(dyr, xr, m, s, Some(&mut gw), Some(&mut gb));
        }
        let bits = |v: &[f64]| v.iter().map(|v| (0.0 + v).to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&dx), F64_W_DX);
        assert_eq!(bits(&gw), F64_W_DW);
        assert_eq!(bits(&gb), F64_W_DB);
    }

    /// dx, dw and db of an f16/bf16 case: `stat` reads a saved statistic
    /// (of the input's dtype, or f32 for f32 parameters), `bits` gives an
    /// output's bits (dw and db of a mixed case are f32).
    fn run_half(
        n: usize,
        dtype: DType,
        weight: Option<bool>,
        stat: impl Fn(usize) -> (f32, f32),
    ) -> [Vec<f32>; 3] {
        let (x, dy, w) = (f32s(&xs(n)), f32s(&dys(n)), f32s(&ws(n)));
        let mixed = weight == Some(true);
        let w = weight.is_some().then_some(&w[..]);
        let (mut dx, mut gw, mut gb) = (vec![0f32; ROWS * n], vec![0f32; n], vec![0f32; n]);
        for r in 0..ROWS {
            let (m, s) = stat(r);
            let (xr, dyr) = (&x[r * n..][..n], &dy[r * n..][..n]);
            dx_row_half(dyr, xr, w, mixed, m, s, &mut dx[r * n..][..n]);
            param_row_f32(dyr, xr, m, s, Some(&mut gw), Some(&mut gb), dtype);
        }
        [dx, gw, gb]
    }

    #[test]
    fn f16_and_bf16_rows_are_pytorchs_bits() {
        let h16 = |v: &[f32]| {
            v.iter()
                .map(|&v| half::f16::from_f32(v).to_bits())
                .collect::<Vec<_>>()
        };
        let b16 = |v: &[f32]| {
            v.iter()
                .map(|&v| super::bf16_vector(v).to_bits())
                .collect::<Vec<_>>()
        };
        let f16v = |b: u16| half::f16::from_bits(b).to_f32();
        let bf16v = |b: u16| half::bf16::from_bits(b).to_f32();

        let [dx, dw, db] = run_half(21, DType::F16, Some(false), |r| {
            (f16v(F16_W_MEAN[r]), f16v(F16_W_RSTD[r]))
        });
        assert_eq!(h16(&dx), F16_W_DX);
        assert_eq!(h16(&dw), F16_W_DW);
        assert_eq!(h16(&db), F16_W_DB);

        // f32 weight: f32 statistics, and dw/db f32 holding bf16 values.
        let [dx, dw, db] = run_half(13, DType::BF16, Some(true), |r| {
            (
                f32::from_bits(BF16_MIXED_MEAN[r]),
                f32::from_bits(BF16_MIXED_RSTD[r]),
            )
        });
        assert_eq!(b16(&dx), BF16_MIXED_DX);
        let f32bits = |v: &[f32]| v.iter().map(|v| (0.0 + v).to_bits()).collect::<Vec<_>>();
        assert_eq!(f32bits(&dw), BF16_MIXED_DW);
        assert_eq!(f32bits(&db), BF16_MIXED_DB);

        let [dx, _, db] = run_half(40, DType::BF16, None, |r| {
            (bf16v(BF16_40_MEAN[r]), bf16v(BF16_40_RSTD[r]))
        });
        assert_eq!(b16(&dx), BF16_40_DX);
        assert_eq!(b16(&db), BF16_40_DB);
    }
}
