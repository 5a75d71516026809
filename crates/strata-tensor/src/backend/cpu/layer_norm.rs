//! The row arithmetic of layer norm's CPU forward, as PyTorch's CPU kernel
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
//! The fused multiply-adds are `mul_add`; where the CPU has FMA the rows run
//! in copies compiled with it (a single instruction, same bits), elsewhere
//! `mul_add` is the C library's exact `fma` (slower, same bits).

use crate::dtype::DType;
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

/// Whether the FMA copies may run.
#[cfg(target_arch = "x86_64")]
#[inline]
fn fma() -> bool {
    std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
}

macro_rules! with_fma {
    ($(#[$doc:meta])* $name:ident, $fast:ident, $body:ident $(::<$c:literal>)?, $t:ty) => {
        $(#[$doc])*
        /// Returns the row's mean and rstd.
        pub(crate) fn $name(
            x: &[$t],
            w: Option<&[$t]>,
            b: Option<&[$t]>,
            eps: $t,
            y: &mut [$t],
        ) -> ($t, $t) {
            #[cfg(target_arch = "x86_64")]
            if fma() {
                // SAFETY: the CPU has the FMA instructions this copy is
                // compiled with (checked just above).
                return unsafe { $fast(x, w, b, eps, y) };
            }
            $body $(::<$c>)? (x, w, b, eps, y)
        }

        /// The copy compiled with FMA.
        ///
        /// # Safety
        /// The CPU must support FMA.
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = "avx2,fma")]
        unsafe fn $fast(
            x: &[$t],
            w: Option<&[$t]>,
            b: Option<&[$t]>,
            eps: $t,
            y: &mut [$t],
        ) -> ($t, $t) {
            $body $(::<$c>)? (x, w, b, eps, y)
        }
    };
}

with_fma!(
    /// One f32 row: `y` from `x` (equal lengths; `w`, `b` as long).
    row_f32, row_f32_fma, f32_row, f32
);
with_fma!(
    /// One f64 row, as [`row_f32`].
    row_f64, row_f64_fma, f64_row, f64
);
with_fma!(
    /// One f16 row widened to f32 (`y` in f32, to round to f16).
    row_f16, row_f16_fma, half_row::<true>, f32
);
with_fma!(
    /// One bf16 row widened to f32 (`y` in f32, to round to bf16).
    row_bf16, row_bf16_fma, half_row::<false>, f32
);

/// The biased variance PyTorch's forward computes for a row of `dtype`
/// whose values are `x` (exact in f64): f64 for f64, else the f32 one. The
/// backward uses it to tell eps from the saved rstd (`1 / rstd^2 - var`),
/// both carrying the same rounding of the variance.
pub(crate) fn forward_variance(x: &[f64], dtype: DType) -> f64 {
    #[cfg(target_arch = "x86_64")]
    if fma() {
        // SAFETY: the CPU has the FMA instructions this copy is compiled
        // with (checked just above).
        return unsafe { forward_variance_fma(x, dtype) };
    }
    forward_variance_body(x, dtype)
}

/// [`forward_variance`] compiled with FMA.
///
/// # Safety
/// The CPU must support FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn forward_variance_fma(x: &[f64], dtype: DType) -> f64 {
    forward_variance_body(x, dtype)
}

#[inline(always)]
fn forward_variance_body(x: &[f64], dtype: DType) -> f64 {
    if dtype == DType::F64 {
        return moments::<f64, 4, 1, false>(x).1;
    }
    let v: Vec<f32> = x.iter().map(|&v| v as f32).collect();
    f64::from(match dtype {
        DType::F32 => moments::<f32, 8, 1, false>(&v).1,
        DType::F16 => moments::<f32, 8, 2, true>(&v).1,
        _ => moments::<f32, 8, 2, false>(&v).1,
    })
}

#[cfg(test)]
mod tests {
    use super::ceil_log2;

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
}
