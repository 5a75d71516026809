//! The f32 softmax and log-softmax along the last dim as PyTorch's CPU
//! kernels compute them (`aten/src/ATen/native/cpu/SoftMaxKernel.cpp`:
//! `_vec_softmax_lastdim`, `_vec_log_softmax_lastdim`), on a CPU where
//! PyTorch runs its AVX2 kernels (8 f32 lanes):
//!
//! - the row's maximum and the sum of `exp(x - max)` are `vec::reduce_all` /
//!   `vec::map_reduce_all` folds: 8 lanes over whole vectors, the last
//!   partial vector folded into its first lanes, then the lanes combined
//!   `lane ^ 4`, `lane ^ 2`, `lane ^ 1` (`vec_reduce_all`'s shuffles); a row
//!   shorter than 8 is folded left to right;
//! - `exp` is SLEEF's `Sleef_expf8_u10` (`xexpf`, fused multiply-adds) and
//!   log-softmax's `log` of the sum SLEEF's `Sleef_logf8_u10` (`xlogf_u1`),
//!   reproduced here element by element (their lanes are independent);
//! - softmax multiplies each exponential by `1 / sum`; log-softmax forms
//!   `x - max - log(sum)` in that order.
//!
//! Measured against PyTorch 2.15 on 6,000 random f32 rows of lengths
//! 1..200 (10 per length, scales 0.1 to 30, some with -inf): strata's
//! previous in-order fold with the C library's `expf`/`logf` (emulated)
//! differed on about 1,900 of each 2,000 rows in softmax and about 880 in
//! log-softmax; this module differs on none
//! (`tests/suite/softmax_erf_s53b.rs` keeps 104 of those rows' kind).
//!
//! The constants are SLEEF's, spelled as its C source spells them.
#![allow(clippy::excessive_precision, clippy::unreadable_literal)]

/// SLEEF's `xexpf` (the u10 single-precision exp) with fused multiply-adds,
/// as its AVX2 build computes each lane.
#[inline(always)]
pub(crate) fn expf_u10(d: f32) -> f32 {
    // SLEEF's R_LN2f, log2(e) rounded to f32.
    const R_LN2F: f32 = std::f32::consts::LOG2_E;
    const L2UF: f32 = 0.693_145_751_953_125;
    const L2LF: f32 = 1.428606765330187045e-06;
    let qf = (d * R_LN2F).round_ties_even();
    // `_mm256_cvtps_epi32`: NaN and out-of-range values give i32::MIN.
    let q: i32 = if qf.is_nan() || !(-2_147_483_648.0..2_147_483_648.0).contains(&qf) {
        i32::MIN
    } else {
        qf as i32
    };
    let qv = q as f32;
    let mut s = qv.mul_add(-L2UF, d);
    s = qv.mul_add(-L2LF, s);
    let mut u: f32 = 0.000198527617612853646278381;
    u = u.mul_add(s, 0.00139304355252534151077271);
    u = u.mul_add(s, 0.00833336077630519866943359);
    u = u.mul_add(s, 0.0416664853692054748535156);
    u = u.mul_add(s, 0.166666671633720397949219);
    u = u.mul_add(s, 0.5);
    u = 1.0 + (s * s).mul_add(u, s);
    // vldexp2: u * 2^(q >> 1) * 2^(q - (q >> 1)), the powers built from bits.
    let pow2i = |e: i32| f32::from_bits((e.wrapping_add(0x7f) as u32).wrapping_shl(23));
    let h = q >> 1;
    u = u * pow2i(h) * pow2i(q.wrapping_sub(h));
    if d < -104.0 {
        u = 0.0;
    }
    if 100.0 < d {
        u = f32::INFINITY;
    }
    u
}

/// SLEEF's `xlogf_u1` (the u10 single-precision log) with fused
/// multiply-adds, as its AVX2 build computes each lane.
#[inline(always)]
pub(crate) fn logf_u1(d0: f32) -> f32 {
    let o = d0 < f32::MIN_POSITIVE;
    let d = if o {
        d0 * (4_294_967_296.0f32 * 4_294_967_296.0f32)
    } else {
        d0
    };
    let ilogb2k = |v: f32| (((v.to_bits() >> 23) & 0xff) as i32) - 0x7f;
    let mut e = ilogb2k(d * (1.0f32 / 0.75f32));
    let m = f32::from_bits(
        (d.to_bits() as i32).wrapping_add((e.wrapping_neg()).wrapping_shl(23)) as u32,
    );
    if o {
        e -= 64;
    }
    // dfmul((ln2 hi, ln2 lo), e)
    let (chi, clo) = (0.69314718246459960938f32, -1.904654323148236017e-09f32);
    let ef = e as f32;
    let sx = chi * ef;
    let sy = clo.mul_add(ef, chi.mul_add(ef, -sx));
    // dfadd2 of two floats
    let add2 = |x: f32, y: f32| {
        let s = x + y;
        let v = s - x;
        (s, (x - (s - v)) + (y - v))
    };
    let nm = add2(-1.0, m);
    let dn = add2(1.0, m);
    // dfdiv(nm, dn)
    let t = 1.0 / dn.0;
    let s = nm.0 * t;
    let u = t.mul_add(nm.0, -s);
    let v = (-dn.1).mul_add(t, (-dn.0).mul_add(t, 1.0));
    let x = (s, s.mul_add(v, nm.1.mul_add(t, u)));
    let x2 = x.0 * x.0;
    let mut tt: f32 = 0.3027294874;
    tt = tt.mul_add(x2, 0.3996108174);
    tt = tt.mul_add(x2, 0.6666694880);
    // dfadd(s, dfscale(x, 2))
    let (yx, yy) = (x.0 * 2.0, x.1 * 2.0);
    let s1 = sx + yx;
    let s1y = (((sx - s1) + yx) + sy) + yy;
    // dfadd(s, x2 * x * t)
    let w = (x2 * x.0) * tt;
    let s2 = s1 + w;
    let s2y = ((s1 - s2) + w) + s1y;
    let mut r = s2 + s2y;
    if d == f32::INFINITY {
        r = f32::INFINITY;
    }
    if d < 0.0 || d.is_nan() {
        r = f32::NAN;
    }
    if d == 0.0 {
        r = f32::NEG_INFINITY;
    }
    r
}

/// `vec::reduce_all` of `v` (not empty) with `op`, over 8 f32 lanes.
#[inline]
fn reduce_all(v: &[f32], op: impl Fn(f32, f32) -> f32) -> f32 {
    const L: usize = 8;
    let n = v.len();
    if n < L {
        return v[1..].iter().fold(v[0], |a, &x| op(a, x));
    }
    let mut acc = [0f32; L];
    acc.copy_from_slice(&v[..L]);
    let whole = n - n % L;
    for c in v[L..whole].chunks_exact(L) {
        for (a, &x) in acc.iter_mut().zip(c) {
            *a = op(*a, x);
        }
    }
    for (a, &x) in acc.iter_mut().zip(&v[whole..]) {
        *a = op(*a, x);
    }
    let mut w = [0f32; L];
    for (l, o) in w.iter_mut().enumerate() {
        *o = op(acc[l], acc[l ^ 4]);
    }
    for (l, o) in acc.iter_mut().enumerate() {
        *o = op(w[l], w[l ^ 2]);
    }
    op(acc[0], acc[1])
}

/// `vec::maximum`: NaN if either is NaN, else `_mm256_max_ps(a, b)` (`b`
/// on a tie).
#[inline]
fn maximum(a: f32, b: f32) -> f32 {
    if a.is_nan() || b.is_nan() {
        f32::NAN
    } else if a > b {
        a
    } else {
        b
    }
}

crate::backend::cpu::fused!(["fma"]
    /// Softmax (log-softmax with `log`) of one contiguous f32 row `x` (not
    /// empty) into `y` (same length), as PyTorch's CPU kernels for the last dim.
    ///
    /// SLEEF's fused multiply-adds are `f32::mul_add`, which without the FMA
    /// instruction enabled at compile time is a call into the C library (3-6
    /// times slower over a whole softmax): where the CPU has FMA the row runs
    /// in a copy compiled with it. Both give the same bits (a fused
    /// multiply-add rounds once either way).
    pub(crate) fn softmax_lastdim_f32(x: &[f32], y: &mut [f32], log: bool) = softmax_lastdim_body;
);

/// The row's computation (see [`softmax_lastdim_f32`]).
#[inline(always)]
fn softmax_lastdim_body(x: &[f32], y: &mut [f32], log: bool) {
    if x.is_empty() {
        return;
    }
    if log {
        let (m, ls) = lastdim_log_stats(x);
        for (o, &v) in y.iter_mut().zip(x) {
            *o = v - m - ls;
        }
    } else {
        let m = reduce_all(x, maximum);
        for (o, &v) in y.iter_mut().zip(x) {
            *o = expf_u10(v - m);
        }
        let s = 1.0 / reduce_all(y, |a, b| a + b);
        for o in y.iter_mut() {
            *o *= s;
        }
    }
}

/// How PyTorch's CPU log-softmax forms a row's maximum and log-sum.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LogSumKind {
    /// Along the last dim (`_vec_log_softmax_lastdim`): the lane folds of
    /// [`softmax_lastdim_f32`].
    LastDim,
    /// Along another dim (`_vec_logsoftmax`, which walks the dim for 8
    /// positions of the dims after it at once): the maximum is `x > m ? x :
    /// m` from -inf (a NaN never wins; its exponential makes the sum NaN),
    /// the exponentials are added in order from +0.0, with SLEEF's `expf`
    /// for a position inside a whole vector of 8 and the C library's `expf`
    /// (`std::exp`) for the positions past the last whole vector
    /// (`Column { tail: true }`), and the log of the sum is SLEEF's.
    Column {
        /// The row is one of the positions past the last whole vector.
        tail: bool,
    },
}

crate::backend::cpu::fused!(["fma"]
    /// A row's maximum `m` and `ls = log Σ exp(x - m)` in f32 as PyTorch's CPU
    /// log-softmax forms them (`kind`); its outputs are then `x - m - ls`, in
    /// that order. An empty row gives `(-inf, 0)`. Run, like
    /// [`softmax_lastdim_f32`], in a copy compiled with FMA where the CPU has it.
    pub(crate) fn log_softmax_stats_f32(x: &[f32], kind: LogSumKind) -> (f32, f32) = log_softmax_stats_body;
);

#[inline(always)]
fn log_softmax_stats_body(x: &[f32], kind: LogSumKind) -> (f32, f32) {
    if x.is_empty() {
        return (f32::NEG_INFINITY, 0.0);
    }
    match kind {
        LogSumKind::LastDim => lastdim_log_stats(x),
        LogSumKind::Column { tail } => {
            let mut m = f32::NEG_INFINITY;
            for &v in x {
                if v > m {
                    m = v;
                }
            }
            let mut s = 0.0f32;
            if tail {
                for &v in x {
                    s += (v - m).exp();
                }
            } else {
                for &v in x {
                    s += expf_u10(v - m);
                }
            }
            (m, logf_u1(s))
        }
    }
}

crate::backend::cpu::fused!(["fma"]
    /// Log-softmax of one contiguous `n x inner` block of f32 along its `n` dim
    /// (`inner` > 0 positions of the dims after it, a dim other than the
    /// input's last) into `y`, as PyTorch's CPU kernel for such a dim
    /// (`_vec_logsoftmax`) computes it: per position the [`LogSumKind::Column`]
    /// maximum and log-sum (SLEEF's `expf` except in the last `inner % 8`
    /// positions, which take the C library's), then `x - m - ls`. Run in a copy
    /// compiled with FMA where the CPU has it.
    pub(crate) fn log_softmax_cols_f32(x: &[f32], y: &mut [f32], n: usize, inner: usize) = log_softmax_cols_body;
);

#[inline(always)]
fn log_softmax_cols_body(x: &[f32], y: &mut [f32], n: usize, inner: usize) {
    let whole = inner - inner % 8;
    let mut m = vec![f32::NEG_INFINITY; inner];
    for row in x.chunks_exact(inner).take(n) {
        for (mj, &v) in m.iter_mut().zip(row) {
            if v > *mj {
                *mj = v;
            }
        }
    }
    let mut s = vec![0.0f32; inner];
    for row in x.chunks_exact(inner).take(n) {
        for ((sj, &mj), &v) in s[..whole].iter_mut().zip(&m).zip(row) {
            *sj += expf_u10(v - mj);
        }
        for ((sj, &mj), &v) in s[whole..].iter_mut().zip(&m[whole..]).zip(&row[whole..]) {
            *sj += (v - mj).exp();
        }
    }
    for sj in s.iter_mut() {
        *sj = logf_u1(*sj);
    }
    for (yr, xr) in y.chunks_exact_mut(inner).zip(x.chunks_exact(inner)).take(n) {
        for (((o, &v), &mj), &sj) in yr.iter_mut().zip(xr).zip(&m).zip(&s) {
            *o = v - mj - sj;
        }
    }
}

/// The maximum `m` and `log Σ exp(x - m)` of a row (not empty) as PyTorch's
/// last-dim log-softmax forms them (its outputs are `x - m - ls`).
#[inline(always)]
fn lastdim_log_stats(x: &[f32]) -> (f32, f32) {
    let m = reduce_all(x, maximum);
    // map_reduce_all: the exponentials are summed without being stored.
    let mut e = [0f32; 256];
    let mut acc = [0f32; 8];
    let n = x.len();
    let s = if n < 8 {
        let mut s = expf_u10(x[0] - m);
        for &v in &x[1..] {
            s += expf_u10(v - m);
        }
        s
    } else {
        // Same fold as `reduce_all`, the exponentials formed on the way.
        let mut first = true;
        for c in x.chunks(256) {
            let k = c.len();
            for (o, &v) in e[..k].iter_mut().zip(c) {
                *o = expf_u10(v - m);
            }
            for (i, &ev) in e[..k].iter().enumerate() {
                if first && i < 8 {
                    acc[i] = ev;
                } else {
                    acc[i % 8] += ev;
                }
            }
            first = false;
        }
        let mut w = [0f32; 8];
        for (l, o) in w.iter_mut().enumerate() {
            *o = acc[l] + acc[l ^ 4];
        }
        for (l, o) in acc.iter_mut().enumerate() {
            *o = w[l] + w[l ^ 2];
        }
        acc[0] + acc[1]
    };
    (m, logf_u1(s))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exp_and_log_edges() {
        assert_eq!(expf_u10(0.0), 1.0);
        assert_eq!(expf_u10(f32::NEG_INFINITY), 0.0);
        assert!(expf_u10(f32::NAN).is_nan());
        assert_eq!(expf_u10(f32::INFINITY), f32::INFINITY);
        assert_eq!(logf_u1(1.0), 0.0);
        assert_eq!(logf_u1(0.0), f32::NEG_INFINITY);
        assert_eq!(logf_u1(f32::INFINITY), f32::INFINITY);
        assert!(logf_u1(-1.0).is_nan());
        assert!(logf_u1(f32::NAN).is_nan());
    }
}
