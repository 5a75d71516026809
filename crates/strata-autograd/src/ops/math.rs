//! The element-wise math of issue 12 (`sqrt`, `tanh`, `gelu`, `pow`,
//! `maximum`, ...) and the ops along a dim (`softmax`, `log_softmax`,
//! `cumsum`), with PyTorch's saved tensors: the output where the gradient is
//! a function of it (sqrt, rsqrt, tanh, sigmoid, expm1, reciprocal,
//! softmax, log_softmax), the input otherwise (abs, gelu, silu, sin, cos,
//! erf, log1p), nothing for sign and cumsum.

use super::{formula, sum_to};
use crate::error::Result;
use crate::var::{record, would_record, Var};
use strata_tensor::{DType, GeluApprox, Scalar, Tensor};

/// `2 / sqrt(pi)`.
const FRAC_2_SQRT_PI: f64 = std::f64::consts::FRAC_2_SQRT_PI;

/// What a unary op saves for its backward.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Save {
    Input,
    Output,
    Nothing,
}

impl Var {
    /// Records a unary op whose gradient `grad(g, saved)` uses the input or
    /// the output (`save`).
    pub(super) fn unary_op(
        &self,
        name: &'static str,
        out: Tensor,
        save: Save,
        grad: impl Fn(&Tensor, &Tensor) -> strata_tensor::Result<Tensor> + Send + Sync + 'static,
    ) -> Result<Var> {
        let input = self.data().clone();
        let kept = out.clone();
        let saved = move || match save {
            Save::Input => vec![input],
            Save::Output => vec![kept],
            Save::Nothing => Vec::new(),
        };
        let f = formula(move |g, s, _n| {
            let x = s.first().unwrap_or(g);
            Ok(vec![Some(grad(g, x)?)])
        });
        record(name, out, &[Some(self)], saved, f, false)
    }

    /// Square root; the result is saved (`g / (2 sqrt x)`).
    pub fn sqrt(&self) -> Result<Var> {
        let out = self.data().sqrt()?;
        self.unary_op("SqrtBackward", out, Save::Output, |g, y| {
            g.div(&y.mul(2.0)?)
        })
    }

    /// `1 / sqrt(self)`; the result is saved (`-g y^3 / 2`).
    pub fn rsqrt(&self) -> Result<Var> {
        let out = self.data().rsqrt()?;
        self.unary_op("RsqrtBackward", out, Save::Output, |g, y| {
            g.mul(&y.mul(y)?.mul(y)?)?.mul(-0.5)
        })
    }

    /// `|self|`; the input is saved (`g sign(x)`, 0 at 0).
    pub fn abs(&self) -> Result<Var> {
        let out = self.data().abs()?;
        self.unary_op("AbsBackward", out, Save::Input, |g, x| g.mul(&x.sign()?))
    }

    /// Hyperbolic tangent; the result is saved (`g (1 - y^2)`).
    pub fn tanh(&self) -> Result<Var> {
        let out = self.data().tanh()?;
        self.unary_op("TanhBackward", out, Save::Output, |g, y| {
            g.mul(&y.mul(y)?.neg()?.add(1.0)?)
        })
    }

    /// Sigmoid; the result is saved (`g y (1 - y)`).
    pub fn sigmoid(&self) -> Result<Var> {
        let out = self.data().sigmoid()?;
        self.unary_op("SigmoidBackward", out, Save::Output, |g, y| {
            g.mul(&y.mul(&y.neg()?.add(1.0)?)?)
        })
    }

    /// SiLU `x sigmoid(x)`; the input is saved (`g s (1 + x (1 - s))`).
    pub fn silu(&self) -> Result<Var> {
        let out = self.data().silu()?;
        self.unary_op("SiluBackward", out, Save::Input, |g, x| {
            let s = x.sigmoid()?;
            let inner = x.mul(&s.neg()?.add(1.0)?)?.add(1.0)?;
            g.mul(&s.mul(&inner)?)
        })
    }

    /// GELU (exact or the tanh approximation); the input is saved.
    pub fn gelu(&self, approximate: GeluApprox) -> Result<Var> {
        let out = self.data().gelu(approximate)?;
        self.unary_op("GeluBackward", out, Save::Input, move |g, x| {
            g.gelu_backward(x, approximate)
        })
    }

    /// Sine; the input is saved (`g cos x`).
    pub fn sin(&self) -> Result<Var> {
        let out = self.data().sin()?;
        self.unary_op("SinBackward", out, Save::Input, |g, x| g.mul(&x.cos()?))
    }

    /// Cosine; the input is saved (`-g sin x`).
    pub fn cos(&self) -> Result<Var> {
        let out = self.data().cos()?;
        self.unary_op("CosBackward", out, Save::Input, |g, x| {
            g.mul(&x.sin()?)?.neg()
        })
    }

    /// The error function; the input is saved (`g 2/sqrt(pi) e^(-x^2)`).
    pub fn erf(&self) -> Result<Var> {
        let out = self.data().erf()?;
        self.unary_op("ErfBackward", out, Save::Input, |g, x| {
            g.mul(&x.mul(x)?.neg()?.exp()?.mul(FRAC_2_SQRT_PI)?)
        })
    }

    /// `ln(1 + self)`; the input is saved (`g / (1 + x)`).
    pub fn log1p(&self) -> Result<Var> {
        let out = self.data().log1p()?;
        self.unary_op("Log1pBackward", out, Save::Input, |g, x| {
            g.div(&x.add(1.0)?)
        })
    }

    /// `e^self - 1`; the result is saved (`g (y + 1)`).
    pub fn expm1(&self) -> Result<Var> {
        let out = self.data().expm1()?;
        self.unary_op("Expm1Backward", out, Save::Output, |g, y| {
            g.mul(&y.add(1.0)?)
        })
    }

    /// `1 / self`; the result is saved (`-g y^2`).
    pub fn reciprocal(&self) -> Result<Var> {
        let out = self.data().reciprocal()?;
        self.unary_op("ReciprocalBackward", out, Save::Output, |g, y| {
            g.mul(&y.mul(y)?)?.neg()
        })
    }

    /// -1, 0 or 1; its gradient is zero (nothing is saved).
    pub fn sign(&self) -> Result<Var> {
        let out = self.data().sign()?;
        self.unary_op("SignBackward", out, Save::Nothing, |g, _| {
            g.zeros_like(None)
        })
    }

    /// `self ^ e` for a scalar exponent; the input is saved
    /// (`g e x^(e-1)`, 0 where `e` is 0).
    pub fn pow_scalar(&self, e: impl Into<Scalar>) -> Result<Var> {
        let e = e.into();
        let out = self.data().pow(e)?;
        let dtype = self.dtype();
        self.unary_op("PowBackward0", out, Save::Input, move |g, x| {
            let ef = e.to_f64();
            if ef == 0.0 {
                return g.zeros_like(None);
            }
            let d = x.pow(ef - 1.0)?.mul(ef)?;
            g.mul(&d)?.to_dtype_contiguous(dtype)
        })
    }

    /// `self ^ exponent` for a variable exponent, broadcasting; saves both
    /// operands and the result (as PyTorch's `PowBackward1`). The base's
    /// gradient `g y x^(y-1)` is 0 where `y == 0` (whatever `g`); the
    /// exponent's gradient `g x^y ln x` is `g * 0` where `x == 0` and `y >= 0`.
    pub fn pow(&self, exponent: &Var) -> Result<Var> {
        let (a, b) = (self.data().clone(), exponent.data().clone());
        let out = a.pow(&b)?;
        let (a_shape, a_dtype) = (self.shape().to_vec(), self.dtype());
        let (b_shape, b_dtype) = (exponent.shape().to_vec(), exponent.dtype());
        let o = out.clone();
        let saved = move || vec![a, b, o];
        let f = formula(move |g, s, needs| {
            let (x, y, r) = (&s[0], &s[1], &s[2]);
            let ga = if needs[0] {
                // g y x^(y-1), 0 where y == 0 even where g is NaN or
                // infinite (PyTorch's pow_backward_self masks the product
                // with g, not the derivative alone).
                let d = g.mul(&y.mul(&x.pow(&y.sub(1.0)?)?)?)?;
                let d = Tensor::where_cond(&y.eq(0.0)?, 0.0, &d)?;
                Some(sum_to(&d, &a_shape, a_dtype)?)
            } else {
                None
            };
            let gb = if needs[1] {
                // PyTorch's pow_backward_exponent takes the log of x
                // converted to the promoted dtype (an f16 base of an f32
                // power: the log in f32, not f16).
                let d = r.mul(&x.to_dtype_contiguous(r.dtype())?.log()?)?;
                let mask = x.eq(0.0)?.mul(&y.ge(0.0)?)?;
                let d = Tensor::where_cond(&mask, 0.0, &d)?;
                Some(sum_to(&g.mul(&d)?, &b_shape, b_dtype)?)
            } else {
                None
            };
            Ok(vec![ga, gb])
        });
        record(
            "PowBackward1",
            out,
            &[Some(self), Some(exponent)],
            saved,
            f,
            false,
        )
    }

    /// `base ^ exponent` for a scalar base (`torch.pow(2, t)`); the result
    /// is saved (`g base^y ln(base)`, 0 where `base == 0` and `y >= 0`).
    pub fn scalar_pow(base: impl Into<Scalar>, exponent: &Var) -> Result<Var> {
        let base = base.into();
        let out = Tensor::scalar_pow(base, exponent.data())?;
        let (shape, dtype) = (exponent.shape().to_vec(), exponent.dtype());
        let y = exponent.data().clone();
        let o = out.clone();
        let saved = move || vec![o, y];
        let f = formula(move |g, s, _n| {
            let lb = base.to_f64().ln();
            let d = s[0].mul(lb)?;
            let d = if base.to_f64() == 0.0 {
                Tensor::where_cond(&s[1].ge(0.0)?, 0.0, &d)?
            } else {
                d
            };
            Ok(vec![Some(sum_to(&g.mul(&d)?, &shape, dtype)?)])
        });
        record("PowBackward2", out, &[Some(exponent)], saved, f, false)
    }

    /// Element-wise maximum, broadcasting; saves both operands. Where they
    /// are equal the gradient is split in half (as in PyTorch).
    pub fn maximum(&self, other: &Var) -> Result<Var> {
        self.max_min(other, true)
    }

    /// Element-wise minimum, broadcasting; saves both operands.
    pub fn minimum(&self, other: &Var) -> Result<Var> {
        self.max_min(other, false)
    }

    fn max_min(&self, other: &Var, max: bool) -> Result<Var> {
        let (a, b) = (self.data().clone(), other.data().clone());
        let out = if max { a.maximum(&b)? } else { a.minimum(&b)? };
        let (a_shape, a_dtype) = (self.shape().to_vec(), self.dtype());
        let (b_shape, b_dtype) = (other.shape().to_vec(), other.dtype());
        let saved = move || vec![a, b];
        let f = formula(move |g, s, needs| {
            let (x, y) = (&s[0], &s[1]);
            // PyTorch's formula: g (g / 2 where x == y), 0 where the operand
            // loses (x < y for maximum's x). Where an operand is NaN nothing
            // compares true and both get g (they got 0).
            let base = Tensor::where_cond(&x.eq(y)?, &g.mul(0.5)?, g)?;
            let x_wins = if max { x.gt(y)? } else { x.lt(y)? };
            let y_wins = if max { x.lt(y)? } else { x.gt(y)? };
            let part = |loses: &Tensor| Tensor::where_cond(loses, 0.0, &base);
            let ga = if needs[0] {
                Some(sum_to(&part(&y_wins)?, &a_shape, a_dtype)?)
            } else {
                None
            };
            let gb = if needs[1] {
                Some(sum_to(&part(&x_wins)?, &b_shape, b_dtype)?)
            } else {
                None
            };
            Ok(vec![ga, gb])
        });
        let name = if max {
            "MaximumBackward"
        } else {
            "MinimumBackward"
        };
        record(name, out, &[Some(self), Some(other)], saved, f, false)
    }

    /// Softmax along `dim` (see [`Tensor::softmax`]); the result is saved
    /// (`y (g - sum(g y))`, the sum along `dim`, one fused pass:
    /// [`Tensor::softmax_backward`]).
    pub fn softmax(&self, dim: i64, dtype: Option<DType>) -> Result<Var> {
        if let Some(c) = crate::autocast::cast_inputs("softmax", &[self])? {
            return c[0].softmax(dim, dtype);
        }
        let out = self.data().softmax(dim, dtype)?;
        let in_dtype = self.dtype();
        self.unary_op("SoftmaxBackward", out, Save::Output, move |g, y| {
            y.softmax_backward(g, dim)?.to_dtype_contiguous(in_dtype)
        })
    }

    /// Log-softmax along `dim`; the result is saved
    /// (`g - e^y sum(g)`, the sum along `dim`, one fused pass:
    /// [`Tensor::log_softmax_backward`]).
    pub fn log_softmax(&self, dim: i64, dtype: Option<DType>) -> Result<Var> {
        if let Some(c) = crate::autocast::cast_inputs("log_softmax", &[self])? {
            return c[0].log_softmax(dim, dtype);
        }
        let out = self.data().log_softmax(dim, dtype)?;
        let in_dtype = self.dtype();
        self.unary_op("LogSoftmaxBackward", out, Save::Output, move |g, y| {
            y.log_softmax_backward(g, dim)?
                .to_dtype_contiguous(in_dtype)
        })
    }

    /// Cumulative sum along `dim`; nothing is saved (the gradient is the
    /// reversed cumulative sum of `g`, `flip(cumsum(flip(g)))`, as
    /// PyTorch's: the shortcut `sum(g) - cumsum(g) + g` gave NaN everywhere
    /// from one infinite element of `g`, and lost small elements next to
    /// large ones).
    ///
    /// An integer `dtype` is refused when the op would be recorded (as
    /// PyTorch: "Autograd not support dtype: Long"); detach the variable or
    /// use [`no_grad`](crate::no_grad) to sum without a gradient.
    pub fn cumsum(&self, dim: i64, dtype: Option<DType>) -> Result<Var> {
        if let Some(d) = dtype.filter(|d| !d.is_float() && would_record(&[Some(self)])) {
            return Err(strata_tensor::TensorError::DType {
                op: "cumsum",
                msg: format!(
                    "autograd does not support the {d} dtype of the result; pass a float dtype, \
                     or detach the variable (or use no_grad) for an integer cumulative sum \
                     without a gradient"
                ),
            }
            .into());
        }
        let out = self.data().cumsum(dim, dtype)?;
        let in_dtype = self.dtype();
        self.unary_op("CumsumBackward", out, Save::Nothing, move |g, _| {
            if g.ndim() == 0 {
                return g.to_dtype_contiguous(in_dtype);
            }
            let d = if dim < 0 { dim + g.ndim() as i64 } else { dim };
            let n = g.shape()[d as usize];
            // Nothing to reverse along a dim of at most one element, nor in
            // a gradient without elements (whose dim may be as long as
            // 2^62: an index of that many elements cannot be made).
            if n <= 1 || g.numel() == 0 {
                return g.to_dtype_contiguous(in_dtype);
            }
            // `flip` along `d`: an index_select of n-1, ..., 0.
            let rev = Tensor::arange(n as i64 - 1, -1i64, -1i64, Some(DType::I64), g.device())?;
            let r = g.index_select(d, &rev)?.cumsum(d, None)?;
            r.index_select(d, &rev)?.to_dtype_contiguous(in_dtype)
        })
    }
}
