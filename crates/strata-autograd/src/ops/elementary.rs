//! Session 74: the rest of PyTorch's element-wise math on variables (tan
//! and the inverse and hyperbolic functions, log2, log10, exp2, erfc, the
//! roundings, frac, square, nan_to_num, atan2, remainder, fmod), each with
//! the gradient formula of PyTorch's `derivatives.yaml`, in its order of
//! operations, and its saved tensors.

use super::math::Save;
use super::{formula, sum_to};
use crate::error::Result;
use crate::var::{record, Var, VarOperand};
use strata_tensor::{RoundingMode, Tensor};

/// `2 / sqrt(pi)`.
const FRAC_2_SQRT_PI: f64 = std::f64::consts::FRAC_2_SQRT_PI;

impl Var {
    /// Tangent; the result is saved (`g (1 + y^2)`).
    pub fn tan(&self) -> Result<Var> {
        let out = self.data().tan()?;
        self.unary_op("TanBackward", out, Save::Output, |g, y| {
            g.mul(&y.mul(y)?.add(1.0)?)
        })
    }

    /// Arcsine; the input is saved (`g / sqrt(1 - x^2)`).
    pub fn asin(&self) -> Result<Var> {
        let out = self.data().asin()?;
        self.unary_op("AsinBackward", out, Save::Input, |g, x| {
            g.mul(&x.neg()?.mul(x)?.add(1.0)?.rsqrt()?)
        })
    }

    /// Arccosine; the input is saved (`-g / sqrt(1 - x^2)`).
    pub fn acos(&self) -> Result<Var> {
        let out = self.data().acos()?;
        self.unary_op("AcosBackward", out, Save::Input, |g, x| {
            g.mul(&x.neg()?.mul(x)?.add(1.0)?.rsqrt()?.neg()?)
        })
    }

    /// Arctangent; the input is saved (`g / (1 + x^2)`).
    pub fn atan(&self) -> Result<Var> {
        let out = self.data().atan()?;
        self.unary_op("AtanBackward", out, Save::Input, |g, x| {
            g.div(&x.mul(x)?.add(1.0)?)
        })
    }

    /// Hyperbolic sine; the input is saved (`g cosh x`).
    pub fn sinh(&self) -> Result<Var> {
        let out = self.data().sinh()?;
        self.unary_op("SinhBackward", out, Save::Input, |g, x| g.mul(&x.cosh()?))
    }

    /// Hyperbolic cosine; the input is saved (`g sinh x`).
    pub fn cosh(&self) -> Result<Var> {
        let out = self.data().cosh()?;
        self.unary_op("CoshBackward", out, Save::Input, |g, x| g.mul(&x.sinh()?))
    }

    /// Inverse hyperbolic sine; the input is saved (`g / sqrt(x^2 + 1)`).
    pub fn asinh(&self) -> Result<Var> {
        let out = self.data().asinh()?;
        self.unary_op("AsinhBackward", out, Save::Input, |g, x| {
            g.mul(&x.mul(x)?.add(1.0)?.rsqrt()?)
        })
    }

    /// Inverse hyperbolic cosine; the input is saved (`g / sqrt(x^2 - 1)`).
    pub fn acosh(&self) -> Result<Var> {
        let out = self.data().acosh()?;
        self.unary_op("AcoshBackward", out, Save::Input, |g, x| {
            g.mul(&x.mul(x)?.sub(1.0)?.rsqrt()?)
        })
    }

    /// Inverse hyperbolic tangent; the input is saved (`g / (1 - x^2)`).
    pub fn atanh(&self) -> Result<Var> {
        let out = self.data().atanh()?;
        self.unary_op("AtanhBackward", out, Save::Input, |g, x| {
            g.div(&x.mul(x)?.neg()?.add(1.0)?)
        })
    }

    /// Base-2 logarithm; the input is saved (`g / (x ln 2)`).
    pub fn log2(&self) -> Result<Var> {
        let out = self.data().log2()?;
        self.unary_op("Log2Backward", out, Save::Input, |g, x| {
            g.div(&x.mul(std::f64::consts::LN_2)?)
        })
    }

    /// Base-10 logarithm; the input is saved (`g / (x ln 10)`).
    pub fn log10(&self) -> Result<Var> {
        let out = self.data().log10()?;
        self.unary_op("Log10Backward", out, Save::Input, |g, x| {
            g.div(&x.mul(std::f64::consts::LN_10)?)
        })
    }

    /// `2^self`; the result is saved (`g y ln 2`).
    pub fn exp2(&self) -> Result<Var> {
        let out = self.data().exp2()?;
        self.unary_op("Exp2Backward", out, Save::Output, |g, y| {
            g.mul(y)?.mul(std::f64::consts::LN_2)
        })
    }

    /// The complementary error function; the input is saved
    /// (`-2/sqrt(pi) e^(-x^2) g`).
    pub fn erfc(&self) -> Result<Var> {
        let out = self.data().erfc()?;
        self.unary_op("ErfcBackward", out, Save::Input, |g, x| {
            x.mul(x)?.neg()?.exp()?.mul(-FRAC_2_SQRT_PI)?.mul(g)
        })
    }

    /// `floor`; its gradient is zero (nothing is saved).
    pub fn floor(&self) -> Result<Var> {
        let out = self.data().floor()?;
        self.unary_op("FloorBackward", out, Save::Nothing, |g, _| {
            g.zeros_like(None)
        })
    }

    /// `ceil`; its gradient is zero.
    pub fn ceil(&self) -> Result<Var> {
        let out = self.data().ceil()?;
        self.unary_op("CeilBackward", out, Save::Nothing, |g, _| {
            g.zeros_like(None)
        })
    }

    /// `round` (halves to even); its gradient is zero.
    pub fn round(&self) -> Result<Var> {
        let out = self.data().round()?;
        self.unary_op("RoundBackward", out, Save::Nothing, |g, _| {
            g.zeros_like(None)
        })
    }

    /// `trunc`; its gradient is zero.
    pub fn trunc(&self) -> Result<Var> {
        let out = self.data().trunc()?;
        self.unary_op("TruncBackward", out, Save::Nothing, |g, _| {
            g.zeros_like(None)
        })
    }

    /// `self - trunc(self)`; the gradient passes unchanged.
    pub fn frac(&self) -> Result<Var> {
        let out = self.data().frac()?;
        self.unary_op("FracBackward", out, Save::Nothing, |g, _| Ok(g.clone()))
    }

    /// `self * self` (`torch.square`, recorded as PyTorch records it: a
    /// power of 2, gradient `g 2 x`).
    pub fn square(&self) -> Result<Var> {
        self.pow_scalar(2)
    }

    /// NaN, +inf and -inf replaced (see [`Tensor::nan_to_num`]); the input
    /// is saved, and the gradient passes where it is finite (0 elsewhere).
    pub fn nan_to_num(
        &self,
        nan: Option<f64>,
        posinf: Option<f64>,
        neginf: Option<f64>,
    ) -> Result<Var> {
        let out = self.data().nan_to_num(nan, posinf, neginf)?;
        self.unary_op("NanToNumBackward", out, Save::Input, |g, x| {
            g.mul(&x.isfinite()?)
        })
    }

    /// `atan2(self, other)`, broadcasting; both operands are saved
    /// (`g other / r`, `-g self / r` with `r = self^2 + other^2`).
    pub fn atan2(&self, other: &Var) -> Result<Var> {
        let (a, b) = (self.data().clone(), other.data().clone());
        let out = a.atan2(&b)?;
        let (a_shape, a_dtype) = (self.shape().to_vec(), self.dtype());
        let (b_shape, b_dtype) = (other.shape().to_vec(), other.dtype());
        let saved = move || vec![a, b];
        let f = formula(move |g, s, needs| {
            let (x, y) = (&s[0], &s[1]);
            let recip = x.mul(x)?.add(&y.mul(y)?)?.reciprocal()?;
            let ga = if needs[0] {
                Some(sum_to(&g.mul(y)?.mul(&recip)?, &a_shape, a_dtype)?)
            } else {
                None
            };
            let gb = if needs[1] {
                Some(sum_to(&g.mul(&x.neg()?)?.mul(&recip)?, &b_shape, b_dtype)?)
            } else {
                None
            };
            Ok(vec![ga, gb])
        });
        record(
            "Atan2Backward",
            out,
            &[Some(self), Some(other)],
            saved,
            f,
            false,
        )
    }

    /// Python's `self % other` (see [`Tensor::remainder`]), broadcasting;
    /// the gradient is `g` for self and `-g floor(self / other)` for a
    /// variable `other` (both operands are saved then).
    pub fn remainder<'a>(&self, other: impl Into<VarOperand<'a>>) -> Result<Var> {
        self.remainder_like(other.into(), RoundingMode::Floor)
    }

    /// C's `fmod(self, other)` (see [`Tensor::fmod`]), broadcasting; the
    /// gradient is `g` for self and `-g trunc(self / other)` for a variable
    /// `other`.
    pub fn fmod<'a>(&self, other: impl Into<VarOperand<'a>>) -> Result<Var> {
        self.remainder_like(other.into(), RoundingMode::Trunc)
    }

    fn remainder_like(&self, other: VarOperand<'_>, mode: RoundingMode) -> Result<Var> {
        let a = self.data().clone();
        let out = match mode {
            RoundingMode::Floor => a.remainder(other.operand())?,
            _ => a.fmod(other.operand())?,
        };
        let name = match mode {
            RoundingMode::Floor => "RemainderBackward",
            _ => "FmodBackward",
        };
        let (a_shape, a_dtype) = (self.shape().to_vec(), self.dtype());
        let b = match other {
            VarOperand::Var(v) => v.data().clone(),
            VarOperand::Scalar(_) => {
                let f =
                    formula(move |g, _s, _n| Ok(vec![Some(sum_to(g, &a_shape, a_dtype)?), None]));
                return record(name, out, &[Some(self), other.var()], Vec::new, f, false);
            }
        };
        let (b_shape, b_dtype) = (b.shape().to_vec(), b.dtype());
        let saved = move || vec![a, b];
        let f = formula(move |g, s, needs| {
            let ga = if needs[0] {
                Some(sum_to(g, &a_shape, a_dtype)?)
            } else {
                None
            };
            let gb = if needs[1] {
                let q: Tensor = s[0].div_mode(&s[1], mode)?;
                Some(sum_to(&g.neg()?.mul(&q)?, &b_shape, b_dtype)?)
            } else {
                None
            };
            Ok(vec![ga, gb])
        });
        record(name, out, &[Some(self), other.var()], saved, f, false)
    }
}
