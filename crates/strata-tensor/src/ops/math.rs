//! The scalar math of the element-wise ops of issue 12 (`sqrt`, `erf`,
//! `gelu`, `pow`, ...) as the CPU kernels compute it, one method per op on
//! every computation type (`Element::Acc`).
//!
//! Methods an integer or bool type does not define return a neutral value:
//! the op's dtype rule (in `ops::table`) rejects those dtypes or computes
//! them in f32 before any kernel runs, as `Arith::exp` does.
//!
//! `erf` comes from the `libm` crate (below one ulp in f64); f32 and
//! f16/bf16 compute it in f64 and round once.

/// The math of the element-wise ops on one computation type.
pub(crate) trait Math: Copy {
    /// `|x|` (`abs(-0.0) = +0.0`; integers wrap at their minimum).
    fn abs_(self) -> Self;
    /// -1, 0 or 1 (NaN and -0.0 give +0.0; bool is itself).
    fn sign_(self) -> Self;
    /// `self ^ e` with PyTorch's rules (C `pow` for floats; wrapping
    /// exponentiation for integers, a negative exponent truncating `1 / x^n`).
    fn pow_(self, e: Self) -> Self;
    /// `max(a, b)`, NaN propagating.
    fn maximum_(self, b: Self) -> Self;
    /// `min(a, b)`, NaN propagating.
    fn minimum_(self, b: Self) -> Self;
    /// Correctly rounded square root.
    fn sqrt_(self) -> Self;
    /// `1 / sqrt(x)`.
    fn rsqrt_(self) -> Self;
    /// `1 / x`.
    fn recip_(self) -> Self;
    /// Hyperbolic tangent.
    fn tanh_(self) -> Self;
    /// `1 / (1 + e^-x)`.
    fn sigmoid_(self) -> Self;
    /// `x * sigmoid(x)`.
    fn silu_(self) -> Self;
    /// `x / 2 * (1 + erf(x / sqrt 2))`.
    fn gelu_(self) -> Self;
    /// [`Math::gelu_`] with [`Math::erf_vec_`]'s erf: PyTorch's CPU GELU of
    /// f16/bf16 tensors, computed in f32 by its vectorised kernel
    /// (`GeluKernelImpl`: `x * 0.5 * (1 + erf(x * M_SQRT1_2))` with
    /// `Vectorized<float>::erf`). With a correctly rounded erf 217 of the
    /// 65,536 f16 values and 3 bf16 ones differed from PyTorch 2.15; with
    /// this, none (`tests/suite/gelu_half_s54a.rs`). PyTorch's scalar loop
    /// (the last elements of each inner row past a multiple of 32, and
    /// every element of a row the input is not contiguous along) takes
    /// `std::erf` instead, which differs from this on 217 f16 values and 3
    /// bf16 ones: `Tensor::gelu` computes those elements with the f32
    /// [`Math::gelu_`] (`layout::pytorch_scalar_loop_mask`,
    /// `tests/suite/gelu_half_s54d.rs`).
    fn gelu_vec_(self) -> Self;
    /// [`Math::gelu_`] as PyTorch's CPU scalar functor computes it
    /// (`GeluKernelImpl`: `x * 0.5 * (1 + std::erf(x * M_SQRT1_2))`): for
    /// f32 with the C library's `erff` ([`erff_libc`]), which differs from
    /// an erf computed in f64 and rounded on 18,711 of the 4,020,016 values
    /// of `tests/suite/fuzz_s56.rs`' GELU check; other types: [`Math::gelu_`].
    fn gelu_scalar_(self) -> Self;
    /// f32 exact GELU as oneDNN's AVX2 `eltwise_gelu_erf` kernel computes
    /// it, which PyTorch's CPU `gelu` calls for a contiguous f32 tensor of
    /// two elements or more ([`gelu_onednn_f32`]); other types:
    /// [`Math::gelu_`].
    fn gelu_onednn_(self) -> Self;
    /// `x / 2 * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 x^3)))`.
    fn gelu_tanh_(self) -> Self;
    /// The derivative of exact GELU: `Phi(x) + x phi(x)`.
    fn gelu_grad_(self) -> Self;
    /// The derivative of GELU's tanh approximation (PyTorch's formula).
    fn gelu_tanh_grad_(self) -> Self;
    /// Sine.
    fn sin_(self) -> Self;
    /// Cosine.
    fn cos_(self) -> Self;
    /// The error function.
    fn erf_(self) -> Self;
    /// The error function as PyTorch's CPU `erf` of f16/bf16 tensors computes
    /// it in f32: `Vectorized<float>::erf` (Abramowitz and Stegun 7.1.26
    /// with fused multiply-adds and SLEEF's `expf`), on every element,
    /// contiguous or strided (PyTorch 2.15 agrees on all 65,536 f16 and all
    /// 65,536 bf16 values; a correctly rounded erf differs on 6,584 and
    /// 28,690 of them, `erf(6e-8)` is 0 there). Other types: [`Math::erf_`].
    fn erf_vec_(self) -> Self;
    /// `ln(1 + x)`, accurate near 0.
    fn log1p_(self) -> Self;
    /// `e^x - 1`, accurate near 0.
    fn expm1_(self) -> Self;
    // ----- session 74: the rest of PyTorch's element-wise math -----
    /// Tangent.
    fn tan_(self) -> Self;
    /// Arcsine.
    fn asin_(self) -> Self;
    /// Arccosine.
    fn acos_(self) -> Self;
    /// Arctangent.
    fn atan_(self) -> Self;
    /// Hyperbolic sine.
    fn sinh_(self) -> Self;
    /// Hyperbolic cosine.
    fn cosh_(self) -> Self;
    /// Inverse hyperbolic sine.
    fn asinh_(self) -> Self;
    /// Inverse hyperbolic cosine.
    fn acosh_(self) -> Self;
    /// Inverse hyperbolic tangent.
    fn atanh_(self) -> Self;
    /// Base-2 logarithm.
    fn log2_(self) -> Self;
    /// Base-10 logarithm.
    fn log10_(self) -> Self;
    /// `2^x`.
    fn exp2_(self) -> Self;
    /// The complementary error function `1 - erf(x)`, accurate where
    /// `erf(x)` is near 1.
    fn erfc_(self) -> Self;
    /// The largest integer not above `x` (integers: themselves).
    fn floor_(self) -> Self;
    /// The smallest integer not below `x` (integers: themselves).
    fn ceil_(self) -> Self;
    /// The nearest integer, halves to even (integers: themselves).
    fn round_(self) -> Self;
    /// `x` rounded toward zero (integers: themselves).
    fn trunc_(self) -> Self;
    /// `x - trunc(x)`.
    fn frac_(self) -> Self;
    /// Python's `a % b` (`torch.remainder`): the remainder of floor
    /// division, with the sign of `b`. An integer `b` of 0 gives 0 (the op
    /// refuses such a divisor before any kernel runs).
    fn rem_(self, b: Self) -> Self;
    /// C's `fmod` (`torch.fmod`): the remainder of truncating division, with
    /// the sign of `a`. An integer `b` of 0 gives 0 (refused before).
    fn fmod_(self, b: Self) -> Self;
    /// `atan2(a, b)`: the angle of the point `(b, a)`.
    fn atan2_(self, b: Self) -> Self;
}

macro_rules! float_math {
    ($t:ty, $erf:expr, $erfc:expr, $erf_vec:expr, $gelu_scalar:expr, $gelu_onednn:expr) => {
        impl Math for $t {
            #[inline(always)]
            fn abs_(self) -> Self {
                self.abs()
            }
            #[inline(always)]
            fn sign_(self) -> Self {
                if self > 0.0 {
                    1.0
                } else if self < 0.0 {
                    -1.0
                } else {
                    0.0
                }
            }
            #[inline(always)]
            fn pow_(self, e: Self) -> Self {
                self.powf(e)
            }
            #[inline(always)]
            fn maximum_(self, b: Self) -> Self {
                if self.is_nan() || b.is_nan() {
                    Self::NAN
                } else if b > self {
                    b
                } else {
                    self
                }
            }
            #[inline(always)]
            fn minimum_(self, b: Self) -> Self {
                if self.is_nan() || b.is_nan() {
                    Self::NAN
                } else if b < self {
                    b
                } else {
                    self
                }
            }
            #[inline(always)]
            fn sqrt_(self) -> Self {
                self.sqrt()
            }
            #[inline(always)]
            fn rsqrt_(self) -> Self {
                1.0 / self.sqrt()
            }
            #[inline(always)]
            fn recip_(self) -> Self {
                1.0 / self
            }
            #[inline(always)]
            fn tanh_(self) -> Self {
                self.tanh()
            }
            #[inline(always)]
            fn sigmoid_(self) -> Self {
                1.0 / (1.0 + (-self).exp())
            }
            #[inline(always)]
            fn silu_(self) -> Self {
                self / (1.0 + (-self).exp())
            }
            #[inline(always)]
            fn gelu_(self) -> Self {
                let erf: fn($t) -> $t = $erf;
                0.5 * self * (1.0 + erf(self * std::f64::consts::FRAC_1_SQRT_2 as $t))
            }
            #[inline(always)]
            fn gelu_vec_(self) -> Self {
                let erf_vec: fn($t) -> $t = $erf_vec;
                self * 0.5 * (1.0 + erf_vec(self * std::f64::consts::FRAC_1_SQRT_2 as $t))
            }
            #[inline(always)]
            fn gelu_scalar_(self) -> Self {
                let gelu_scalar: fn($t) -> $t = $gelu_scalar;
                gelu_scalar(self)
            }
            #[inline(always)]
            fn gelu_onednn_(self) -> Self {
                let gelu_onednn: fn($t) -> $t = $gelu_onednn;
                gelu_onednn(self)
            }
            #[inline(always)]
            fn gelu_tanh_(self) -> Self {
                let k = (2.0 * std::f64::consts::FRAC_1_PI).sqrt() as $t;
                let inner = k * (self + 0.044715 * self * self * self);
                0.5 * self * (1.0 + inner.tanh())
            }
            #[inline(always)]
            fn gelu_grad_(self) -> Self {
                let erf: fn($t) -> $t = $erf;
                let cdf = 0.5 * (1.0 + erf(self * std::f64::consts::FRAC_1_SQRT_2 as $t));
                let inv_sqrt_2pi = (0.5
                    * std::f64::consts::FRAC_2_SQRT_PI
                    * std::f64::consts::FRAC_1_SQRT_2) as $t;
                cdf + self * inv_sqrt_2pi * (-0.5 * self * self).exp()
            }
            #[inline(always)]
            fn gelu_tanh_grad_(self) -> Self {
                let k = (2.0 * std::f64::consts::FRAC_1_PI).sqrt() as $t;
                let c: $t = 0.044715;
                let t = (k * (self + c * self * self * self)).tanh();
                let inner_d = k * (1.0 + 3.0 * c * self * self);
                0.5 * (1.0 + t) + 0.5 * self * (1.0 - t * t) * inner_d
            }
            #[inline(always)]
            fn sin_(self) -> Self {
                self.sin()
            }
            #[inline(always)]
            fn cos_(self) -> Self {
                self.cos()
            }
            #[inline(always)]
            fn erf_(self) -> Self {
                let erf: fn($t) -> $t = $erf;
                erf(self)
            }
            #[inline(always)]
            fn erf_vec_(self) -> Self {
                let erf_vec: fn($t) -> $t = $erf_vec;
                erf_vec(self)
            }
            #[inline(always)]
            fn log1p_(self) -> Self {
                self.ln_1p()
            }
            #[inline(always)]
            fn expm1_(self) -> Self {
                self.exp_m1()
            }
            float_math!(@std tan_ tan, asin_ asin, acos_ acos, atan_ atan, sinh_ sinh,
                cosh_ cosh, asinh_ asinh, acosh_ acosh, atanh_ atanh, log2_ log2,
                log10_ log10, exp2_ exp2, floor_ floor, ceil_ ceil,
                round_ round_ties_even, trunc_ trunc);
            #[inline(always)]
            fn erfc_(self) -> Self {
                let erfc: fn($t) -> $t = $erfc;
                erfc(self)
            }
            #[inline(always)]
            fn frac_(self) -> Self {
                self - self.trunc()
            }
            #[inline(always)]
            fn rem_(self, b: Self) -> Self {
                // PyTorch's CPU kernel: fmod, then b added where the signs differ.
                let m = self % b;
                if m != 0.0 && ((b < 0.0) != (m < 0.0)) {
                    m + b
                } else {
                    m
                }
            }
            #[inline(always)]
            fn fmod_(self, b: Self) -> Self {
                self % b
            }
            #[inline(always)]
            fn atan2_(self, b: Self) -> Self {
                self.atan2(b)
            }
        }
    };
    (@std $($f:ident $g:ident),* $(,)?) => {
        $(
            #[inline(always)]
            fn $f(self) -> Self {
                self.$g()
            }
        )*
    };
}
float_math!(f64, erf, libm::erfc, erf, |x: f64| x.gelu_(), |x: f64| x
    .gelu_());
float_math!(
    f32,
    |x: f32| erf(f64::from(x)) as f32,
    |x: f32| libm::erfc(f64::from(x)) as f32,
    erf_vec_f32,
    |x: f32| x * 0.5 * (1.0 + erff_libc(x * std::f32::consts::FRAC_1_SQRT_2)),
    gelu_onednn_f32
);

/// Integer exponentiation with wrapping; a negative exponent gives the
/// truncated `1 / x^n` (PyTorch's quirk: 0 unless `x` is 1 or -1, `0^-n = 0`).
macro_rules! int_pow {
    ($t:ty, $signed:expr) => {{
        |base: $t, e: $t| -> $t {
            #[allow(unused_comparisons)]
            let negative = $signed && e < 0;
            if negative {
                #[allow(unused_comparisons)]
                return if base == 1 {
                    1
                } else if $signed && base == (0 as $t).wrapping_sub(1) {
                    if e & 1 == 0 {
                        1
                    } else {
                        base
                    }
                } else {
                    0
                };
            }
            let (mut b, mut e, mut r): ($t, $t, $t) = (base, e, 1);
            while e != 0 {
                if e & 1 == 1 {
                    r = r.wrapping_mul(b);
                }
                b = b.wrapping_mul(b);
                e >>= 1;
            }
            r
        }
    }};
}

macro_rules! int_math {
    ($t:ty, $signed:expr) => {
        impl Math for $t {
            #[inline(always)]
            fn abs_(self) -> Self {
                #[allow(unused_comparisons)]
                if self < 0 {
                    (0 as $t).wrapping_sub(self)
                } else {
                    self
                }
            }
            #[inline(always)]
            fn sign_(self) -> Self {
                #[allow(unused_comparisons)]
                if self > 0 {
                    1
                } else if self < 0 {
                    (0 as $t).wrapping_sub(1)
                } else {
                    0
                }
            }
            #[inline]
            fn pow_(self, e: Self) -> Self {
                int_pow!($t, $signed)(self, e)
            }
            #[inline(always)]
            fn maximum_(self, b: Self) -> Self {
                if b > self {
                    b
                } else {
                    self
                }
            }
            #[inline(always)]
            fn minimum_(self, b: Self) -> Self {
                if b < self {
                    b
                } else {
                    self
                }
            }
            int_math!(@neutral sqrt_ rsqrt_ recip_ tanh_ sigmoid_ silu_ gelu_ gelu_vec_ gelu_scalar_ gelu_onednn_ gelu_tanh_ gelu_grad_ gelu_tanh_grad_ sin_ cos_ erf_ erf_vec_ log1p_ expm1_);
            int_math!(@neutral tan_ asin_ acos_ atan_ sinh_ cosh_ asinh_ acosh_ atanh_ log2_ log10_ exp2_ erfc_ floor_ ceil_ round_ trunc_ frac_);
            #[inline]
            fn rem_(self, b: Self) -> Self {
                if b == 0 {
                    return 0;
                }
                // MIN % -1 is 0 (it would overflow as a division).
                let m = self.wrapping_rem(b);
                #[allow(unused_comparisons)]
                if m != 0 && ((b < 0) != (m < 0)) {
                    m.wrapping_add(b)
                } else {
                    m
                }
            }
            #[inline]
            fn fmod_(self, b: Self) -> Self {
                if b == 0 {
                    0
                } else {
                    self.wrapping_rem(b)
                }
            }
            #[inline(always)]
            fn atan2_(self, _b: Self) -> Self {
                self
            }
        }
    };
    (@neutral $($f:ident)*) => {
        $(
            #[inline(always)]
            fn $f(self) -> Self {
                self
            }
        )*
    };
}
int_math!(i32, true);
int_math!(i64, true);
int_math!(u8, false);

impl Math for bool {
    fn abs_(self) -> Self {
        self
    }
    fn sign_(self) -> Self {
        self
    }
    fn pow_(self, e: Self) -> Self {
        self | !e
    }
    fn maximum_(self, b: Self) -> Self {
        self | b
    }
    fn minimum_(self, b: Self) -> Self {
        self & b
    }
    int_math!(@neutral sqrt_ rsqrt_ recip_ tanh_ sigmoid_ silu_ gelu_ gelu_vec_ gelu_scalar_ gelu_onednn_ gelu_tanh_ gelu_grad_ gelu_tanh_grad_ sin_ cos_ erf_ erf_vec_ log1p_ expm1_);
    int_math!(@neutral tan_ asin_ acos_ atan_ sinh_ cosh_ asinh_ acosh_ atanh_ log2_ log10_ exp2_ erfc_ floor_ ceil_ round_ trunc_ frac_);
    fn rem_(self, _b: Self) -> Self {
        self
    }
    fn fmod_(self, _b: Self) -> Self {
        self
    }
    fn atan2_(self, _b: Self) -> Self {
        self
    }
}

// ----- erf ------------------------------------------------------------------

crate::backend::cpu::fused!(["fma"]
    /// PyTorch's `Vectorized<float>::erf` (AVX2): `sign(x) * (1 - r(t) t
    /// exp(-x^2))` with `t = 1 / (1 + p |x|)`, every step an f32 operation as
    /// its intrinsics order them (`_mm256_fmadd_ps` where it fuses), `exp`
    /// SLEEF's `Sleef_expf8_u10`.
    ///
    /// Its fused multiply-adds are `f32::mul_add`, a call into the C library
    /// without the FMA instruction enabled at compile time: where the CPU has
    /// FMA the value is computed by a copy compiled with it (same bits; an f16
    /// GELU of 4M elements takes 33 ms so, 109 ms through the C library's
    /// `fmaf`, and took 63 ms with the f64 `erf` it used before).
    pub(crate) fn erf_vec_f32(x: f32) -> f32 = erf_vec_f32_body;
);

#[inline(always)]
#[allow(clippy::excessive_precision)]
fn erf_vec_f32_body(x: f32) -> f32 {
    use crate::backend::cpu::sleef::expf_u10;
    let sign = x.to_bits() & 0x8000_0000;
    let a = f32::from_bits(x.to_bits() ^ sign);
    let t = 1.0 / 0.3275911f32.mul_add(a, 1.0);
    let r = 1.061405429f32.mul_add(t, -1.453152027);
    let r = r.mul_add(t, 1.421413741);
    let r = r.mul_add(t, -0.284496736);
    let r = r.mul_add(t, 0.254829592);
    let e = expf_u10(-(x * x));
    let v = (-e * t).mul_add(r, 1.0);
    f32::from_bits(v.to_bits() ^ sign)
}

/// The C library's `erff` (glibc's on Linux), which PyTorch's CPU kernels
/// call through `std::erf(float)` in their scalar functors: glibc 2.36's
/// differs from an erf computed in f64 and rounded on about 3 % of all
/// f32 bit patterns, and from the `libm` crate's `erff` on about 0.04 %.
/// Where no C library is linked, the `libm` crate's.
pub(crate) fn erff_libc(x: f32) -> f32 {
    #[cfg(any(unix, windows))]
    {
        extern "C" {
            fn erff(x: f32) -> f32;
        }
        // SAFETY: C99's `erff` takes a float by value and returns one; it
        // reads and writes no memory of ours and has no preconditions (any
        // bit pattern, NaN and the infinities included, is a valid input).
        unsafe { erff(x) }
    }
    #[cfg(not(any(unix, windows)))]
    {
        libm::erff(x)
    }
}

crate::backend::cpu::fused!(["fma"]
    /// oneDNN's AVX2 `eltwise_gelu_erf` (`gelu_erf_compute_vector_fwd` of
    /// `jit_uni_eltwise_injector`, the Abramowitz and Stegun 7.1.26 form),
    /// which PyTorch 2.15's CPU `gelu` calls (`use_mkldnn`) for a contiguous
    /// f32 tensor of two elements or more: `s/2 + s/2 * erf(s / sqrt 2)` with
    /// `erf(x) = sign(x) (1 - r(t) t exp(-x^2))`, `t = 1 / (p |x| + 1)`, and
    /// oneDNN's own `exp` (a degree-5 polynomial times `2 * 2^(n-1)`), every
    /// step an f32 operation in the kernel's order, `vfmadd` fused. Its results
    /// are PyTorch's bit for bit, NaNs included, on the 4,020,016 values of
    /// `tests/suite/fuzz_s56.rs`' check (an AVX-512 CPU takes another oneDNN
    /// kernel, a minimax polynomial, and gives other bits).
    pub(crate) fn gelu_onednn_f32(x: f32) -> f32 = gelu_onednn_f32_body;
);

/// x86's `minps`/`maxps`: the second operand when either is NaN.
#[inline(always)]
fn x86_min(a: f32, b: f32) -> f32 {
    if a < b {
        a
    } else {
        b
    }
}

#[inline(always)]
fn x86_max(a: f32, b: f32) -> f32 {
    if a > b {
        a
    } else {
        b
    }
}

/// oneDNN's `exp_compute_vector_fwd`: `x` clamped to `[ln FLT_MIN, ln
/// FLT_MAX]` (a NaN becomes the upper bound), `n = floor(x log2 e + 1/2)`,
/// `r = x - n ln 2` (fused), `p(r)` of degree 5 by fused multiply-adds,
/// times `2^(n-1)` (0 below `ln FLT_MIN`) times 2.
#[inline(always)]
fn exp_onednn_f32(x: f32) -> f32 {
    let ln_flt_min = f32::from_bits(0xc2ae_ac50);
    let below = x < ln_flt_min;
    let x = x86_max(x86_min(x, f32::from_bits(0x42b1_7218)), ln_flt_min);
    let fx = (x * f32::from_bits(0x3fb8_aa3b) + 0.5).floor();
    let r = (-fx).mul_add(f32::from_bits(0x3f31_7218), x);
    // `fx - 1` is an integer in [-127, 127] here: exact as an i32.
    let n1 = (fx - 1.0) as i32;
    let pow2 = if below {
        0.0
    } else {
        f32::from_bits(((n1 + 127) as u32) << 23)
    };
    let mut y = f32::from_bits(0x3c07_cfce);
    for c in [0x3d2b_9d0d, 0x3e2a_ad40, 0x3eff_fee3, 0x3f7f_fffb] {
        y = y.mul_add(r, f32::from_bits(c));
    }
    y = y.mul_add(r, 1.0);
    y * pow2 * 2.0
}

#[inline(always)]
fn gelu_onednn_f32_body(s: f32) -> f32 {
    const SIGN: u32 = 0x8000_0000;
    let x = s * f32::from_bits(0x3f35_04f3);
    let ax = f32::from_bits(x.to_bits() & !SIGN);
    let t = 1.0 / f32::from_bits(0x3ea7_ba05).mul_add(ax, 1.0);
    let e = exp_onednn_f32(f32::from_bits((x * x).to_bits() ^ SIGN));
    let net = f32::from_bits(e.to_bits() ^ SIGN) * t;
    let mut r = f32::from_bits(0x3f87_dc22);
    for c in [0xbfba_00e3, 0x3fb5_f0e3, 0xbe91_a98e, 0x3e82_7906] {
        r = r.mul_add(t, f32::from_bits(c));
    }
    let erf = f32::from_bits(net.mul_add(r, 1.0).to_bits() ^ (s.to_bits() & SIGN));
    let half = s * 0.5;
    erf.mul_add(half, half)
}

/// The error function in f64, from the `libm` crate (below one ulp).
pub(crate) fn erf(x: f64) -> f64 {
    libm::erf(x)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// erf by its Maclaurin series (for |x| <= 2, in f64 with ~50 terms) and
    /// by the continued fraction of erfc (for larger |x|): an independent check.
    fn erf_reference(x: f64) -> f64 {
        if x.abs() <= 2.5 {
            let mut sum = 0.0f64;
            let mut term = x; // x^(2n+1) (-1)^n / n!
            for n in 0..200 {
                let add = term / (2 * n + 1) as f64;
                sum += add;
                term *= -x * x / (n + 1) as f64;
                if add.abs() < 1e-18 * sum.abs() {
                    break;
                }
            }
            std::f64::consts::FRAC_2_SQRT_PI * sum
        } else {
            // erfc(x) = exp(-x^2)/sqrt(pi) * 1/(x + 1/2/(x + 1/(x + 3/2/(x + ...))))
            let a = x.abs();
            let mut f = a;
            for k in (1..200).rev() {
                f = a + (k as f64 / 2.0) / f;
            }
            let erfc = (-a * a).exp() / std::f64::consts::PI.sqrt() / f;
            (1.0 - erfc).copysign(x)
        }
    }

    #[test]
    fn erf_agrees_with_an_independent_series() {
        let mut x = -7.0f64;
        while x < 7.0 {
            let (got, want) = (erf(x), erf_reference(x));
            // The series' own rounding grows with the sum of its terms'
            // magnitudes (about |x|·exp(x²)): cancellation near |x| = 2.5.
            let series = if x.abs() <= 2.5 {
                x.abs() * (x * x).exp()
            } else {
                0.0
            };
            assert!(
                (got - want).abs() <= 4.0 * f64::EPSILON * (want.abs().max(1e-300) + series),
                "erf({x}) = {got}, want {want}"
            );
            x += 0.0137;
        }
        assert_eq!(erf(f64::INFINITY), 1.0);
        assert_eq!(erf(f64::NEG_INFINITY), -1.0);
        assert!(erf(f64::NAN).is_nan());
        assert_eq!(erf(-0.0).to_bits(), (-0.0f64).to_bits());
        assert_eq!(erf(1e-300), 1e-300 * std::f64::consts::FRAC_2_SQRT_PI);
    }

    #[test]
    fn integer_pow_follows_torch() {
        assert_eq!(2i32.pow_(31), i32::MIN);
        assert_eq!(3i32.pow_(31), 1_264_544_299);
        assert_eq!(2i64.pow_(63), i64::MIN);
        assert_eq!(2i64.pow_(64), 0);
        assert_eq!(255u8.pow_(6), 1);
        assert_eq!(3u8.pow_(6), 217);
        assert_eq!(2i32.pow_(-1), 0);
        assert_eq!(0i32.pow_(-1), 0);
        assert_eq!(1i32.pow_(-2), 1);
        assert_eq!((-1i32).pow_(-3), -1);
        assert_eq!((-1i64).pow_(-2), 1);
        assert_eq!(5i32.pow_(0), 1);
    }

    #[test]
    fn float_quirks() {
        assert_eq!(f32::NAN.sign_(), 0.0);
        assert!((-0.0f64).sign_().is_sign_positive());
        assert!(f32::NEG_INFINITY.gelu_().is_nan());
        assert!(f32::NEG_INFINITY.silu_().is_nan());
        assert_eq!(f32::NEG_INFINITY.sigmoid_(), 0.0);
        assert!((-0.0f32).abs_().is_sign_positive());
        assert!(1.0f64.maximum_(f64::NAN).is_nan());
        assert_eq!(f64::NAN.pow_(0.0), 1.0);
        assert_eq!(1.0f32.pow_(f32::NAN), 1.0);
    }
}
