//! The scalar math of the element-wise ops of issue 12 (`sqrt`, `erf`,
//! `gelu`, `pow`, ...) as the CPU kernels compute it, one method per op on
//! every computation type (`Element::Acc`).
//!
//! Methods an integer or bool type does not define return a neutral value:
//! the op's dtype rule (in `ops::table`) rejects those dtypes or computes
//! them in f32 before any kernel runs, as `Arith::exp` does.
//!
//! `erf` is FreeBSD's `s_erf.c` (as ported by musl and the `libm` crate),
//! below one ulp in f64; f32 and f16/bf16 compute it in f64 and round once.

/// `2 / sqrt(pi)`.
#[allow(dead_code)]
const FRAC_2_SQRT_PI: f64 = std::f64::consts::FRAC_2_SQRT_PI;

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
    /// `x / 2 * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 x^3)))`.
    fn gelu_tanh_(self) -> Self;
    /// Sine.
    fn sin_(self) -> Self;
    /// Cosine.
    fn cos_(self) -> Self;
    /// The error function.
    fn erf_(self) -> Self;
    /// `ln(1 + x)`, accurate near 0.
    fn log1p_(self) -> Self;
    /// `e^x - 1`, accurate near 0.
    fn expm1_(self) -> Self;
}

macro_rules! float_math {
    ($t:ty, $erf:expr) => {
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
            fn gelu_tanh_(self) -> Self {
                let k = (2.0 * std::f64::consts::FRAC_1_PI).sqrt() as $t;
                let inner = k * (self + 0.044715 * self * self * self);
                0.5 * self * (1.0 + inner.tanh())
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
            fn log1p_(self) -> Self {
                self.ln_1p()
            }
            #[inline(always)]
            fn expm1_(self) -> Self {
                self.exp_m1()
            }
        }
    };
}
float_math!(f64, erf);
float_math!(f32, |x: f32| erf(f64::from(x)) as f32);

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
            int_math!(@neutral sqrt_ rsqrt_ recip_ tanh_ sigmoid_ silu_ gelu_ gelu_tanh_ sin_ cos_ erf_ log1p_ expm1_);
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
    int_math!(@neutral sqrt_ rsqrt_ recip_ tanh_ sigmoid_ silu_ gelu_ gelu_tanh_ sin_ cos_ erf_ log1p_ expm1_);
}

// ----- erf ------------------------------------------------------------------
//
// origin: FreeBSD /usr/src/lib/msun/src/s_erf.c
// ====================================================
// Copyright (C) 1993 by Sun Microsystems, Inc. All rights reserved.
//
// Developed at SunPro, a Sun Microsystems, Inc. business.
// Permission to use, copy, modify, and distribute this
// software is freely granted, provided that this notice
// is preserved.
// ====================================================
//
// erf(x) = x + x*R(x^2) for |x| < 0.84375; c + P1(s)/Q1(s) with s = |x| - 1
// for |x| < 1.25; 1 - erfc(x) with erfc(x) = exp(-x*x - 0.5625 + R/S) / x
// (R/S rational in 1/x^2) up to 6, where erf rounds to 1.

const ERX: f64 = 8.45062911510467529297e-01;
const EFX8: f64 = 1.02703333676410069053e+00;
const PP0: f64 = 1.28379167095512558561e-01;
const PP1: f64 = -3.25042107247001499370e-01;
const PP2: f64 = -2.84817495755985104766e-02;
const PP3: f64 = -5.77027029648944159157e-03;
const PP4: f64 = -2.37630166566501626084e-05;
const QQ1: f64 = 3.97917223959155352819e-01;
const QQ2: f64 = 6.50222499887672944485e-02;
const QQ3: f64 = 5.08130628187576562776e-03;
const QQ4: f64 = 1.32494738004321644526e-04;
const QQ5: f64 = -3.96022827877536812320e-06;
const PA0: f64 = -2.36211856075265944077e-03;
const PA1: f64 = 4.14856118683748331666e-01;
const PA2: f64 = -3.72207876035701323847e-01;
const PA3: f64 = 3.18346619901161753674e-01;
const PA4: f64 = -1.10894694282396677476e-01;
const PA5: f64 = 3.54783043256182359371e-02;
const PA6: f64 = -2.16637559486879084300e-03;
const QA1: f64 = 1.06420880400844228286e-01;
const QA2: f64 = 5.40397917702171048937e-01;
const QA3: f64 = 7.18286544141962662868e-02;
const QA4: f64 = 1.26171219808761642112e-01;
const QA5: f64 = 1.36370839120290507362e-02;
const QA6: f64 = 1.19844998467991074170e-02;
const RA0: f64 = -9.86494403484714822705e-03;
const RA1: f64 = -6.93858572707181764372e-01;
const RA2: f64 = -1.05586262253232909814e+01;
const RA3: f64 = -6.23753324503260060396e+01;
const RA4: f64 = -1.62396669462573470355e+02;
const RA5: f64 = -1.84605092906711035994e+02;
const RA6: f64 = -8.12874355063065934246e+01;
const RA7: f64 = -9.81432934416914548592e+00;
const SA1: f64 = 1.96512716674392571292e+01;
const SA2: f64 = 1.37657754143519042600e+02;
const SA3: f64 = 4.34565877475229228821e+02;
const SA4: f64 = 6.45387271733267880336e+02;
const SA5: f64 = 4.29008140027567833386e+02;
const SA6: f64 = 1.08635005541779435134e+02;
const SA7: f64 = 6.57024977031928170135e+00;
const SA8: f64 = -6.04244152148580987438e-02;
const RB0: f64 = -9.86494292470009928597e-03;
const RB1: f64 = -7.99283237680523006574e-01;
const RB2: f64 = -1.77579549177547519889e+01;
const RB3: f64 = -1.60636384855821916062e+02;
const RB4: f64 = -6.37566443368389627722e+02;
const RB5: f64 = -1.02509513161107724954e+03;
const RB6: f64 = -4.83519191608651397019e+02;
const SB1: f64 = 3.03380607434824582924e+01;
const SB2: f64 = 3.25792512996573918826e+02;
const SB3: f64 = 1.53672958608443695994e+03;
const SB4: f64 = 3.19985821950859553908e+03;
const SB5: f64 = 2.55305040643316442583e+03;
const SB6: f64 = 4.74528541206955367215e+02;
const SB7: f64 = -2.24409524465858183362e+01;

/// `erfc(|x|)` for `0.84375 <= |x| < 6` (`ix`: the high word of `|x|`).
fn erfc_mid(ix: u32, x: f64) -> f64 {
    let x = x.abs();
    if ix < 0x3ff4_0000 {
        // |x| < 1.25
        let s = x - 1.0;
        let p = PA0 + s * (PA1 + s * (PA2 + s * (PA3 + s * (PA4 + s * (PA5 + s * PA6)))));
        let q = 1.0 + s * (QA1 + s * (QA2 + s * (QA3 + s * (QA4 + s * (QA5 + s * QA6)))));
        return 1.0 - ERX - p / q;
    }
    let s = 1.0 / (x * x);
    let (r, big_s) = if ix < 0x4006_db6d {
        // |x| < 1/0.35
        (
            RA0 + s * (RA1 + s * (RA2 + s * (RA3 + s * (RA4 + s * (RA5 + s * (RA6 + s * RA7)))))),
            1.0 + s
                * (SA1
                    + s * (SA2
                        + s * (SA3 + s * (SA4 + s * (SA5 + s * (SA6 + s * (SA7 + s * SA8))))))),
        )
    } else {
        (
            RB0 + s * (RB1 + s * (RB2 + s * (RB3 + s * (RB4 + s * (RB5 + s * RB6))))),
            1.0 + s * (SB1 + s * (SB2 + s * (SB3 + s * (SB4 + s * (SB5 + s * (SB6 + s * SB7)))))),
        )
    };
    // z: x with the low word cleared, so that -z*z is exact.
    let z = f64::from_bits(x.to_bits() & 0xffff_ffff_0000_0000);
    (-z * z - 0.5625).exp() * ((z - x) * (z + x) + r / big_s).exp() / x
}

/// The error function in f64 (below one ulp; `erf(±inf) = ±1`, NaN stays NaN).
pub(crate) fn erf(x: f64) -> f64 {
    let hi = (x.to_bits() >> 32) as u32;
    let negative = hi >> 31 != 0;
    let ix = hi & 0x7fff_ffff;
    if ix >= 0x7ff0_0000 {
        // NaN or infinity.
        return if x.is_nan() {
            x
        } else if negative {
            -1.0
        } else {
            1.0
        };
    }
    if ix < 0x3feb_0000 {
        // |x| < 0.84375
        if ix < 0x3e30_0000 {
            // |x| < 2^-28: erf(x) = x * 2/sqrt(pi), without underflow.
            return 0.125 * (8.0 * x + EFX8 * x);
        }
        let z = x * x;
        let r = PP0 + z * (PP1 + z * (PP2 + z * (PP3 + z * PP4)));
        let s = 1.0 + z * (QQ1 + z * (QQ2 + z * (QQ3 + z * (QQ4 + z * QQ5))));
        return x + x * (r / s);
    }
    let y = if ix < 0x4018_0000 {
        // |x| < 6
        1.0 - erfc_mid(ix, x)
    } else {
        1.0 - f64::from_bits(0x0010_0000_0000_0000)
    };
    if negative {
        -y
    } else {
        y
    }
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
            FRAC_2_SQRT_PI * sum
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
            assert!(
                (got - want).abs() <= 4.0 * f64::EPSILON * want.abs().max(1e-300),
                "erf({x}) = {got}, want {want}"
            );
            x += 0.0137;
        }
        assert_eq!(erf(f64::INFINITY), 1.0);
        assert_eq!(erf(f64::NEG_INFINITY), -1.0);
        assert!(erf(f64::NAN).is_nan());
        assert_eq!(erf(-0.0).to_bits(), (-0.0f64).to_bits());
        assert_eq!(erf(1e-300), 1e-300 * FRAC_2_SQRT_PI);
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
