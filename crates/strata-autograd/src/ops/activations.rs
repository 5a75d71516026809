//! Session 74: the activation functions of `torch.nn.functional` beyond
//! relu, gelu, silu, sigmoid and tanh, on variables (see
//! `Tensor::leaky_relu` and the others for the forward), each with its
//! backward as PyTorch's `derivatives.yaml` writes it. They save their
//! input; f16 and bf16 gradients are computed in f32, as PyTorch's
//! backward kernels compute them.

use super::math::Save;
use crate::error::Result;
use crate::var::Var;
use strata_tensor::{DType, Tensor, SELU_ALPHA, SELU_SCALE};

/// Runs a backward formula on f16/bf16 `g` and `x` in f32 and rounds the
/// result back to `g`'s dtype once.
fn in_opmath(
    g: &Tensor,
    x: &Tensor,
    f: impl FnOnce(&Tensor, &Tensor) -> strata_tensor::Result<Tensor>,
) -> strata_tensor::Result<Tensor> {
    match g.dtype() {
        DType::F16 | DType::BF16 => {
            f(&g.to_dtype(DType::F32)?, &x.to_dtype(DType::F32)?)?.to_dtype(g.dtype())
        }
        _ => f(g, x),
    }
}

impl Var {
    /// `F.leaky_relu`; the gradient is `g` where the input is positive,
    /// `negative_slope * g` elsewhere.
    pub fn leaky_relu(&self, negative_slope: f64) -> Result<Var> {
        let out = self.data().leaky_relu(negative_slope)?;
        self.unary_op("LeakyReluBackward", out, Save::Input, move |g, x| {
            in_opmath(g, x, |g, x| {
                Tensor::where_cond(&x.gt(0)?, g, &g.mul(negative_slope)?)
            })
        })
    }

    /// ELU with PyTorch's `alpha`, `scale` and `input_scale`
    /// ([`Tensor::elu`]); the gradient is `g * input_scale * alpha * scale *
    /// e^(input_scale * x)` where the input is at most 0, else `g * scale`
    /// (a NaN input takes that branch, as in PyTorch's `elu_backward`).
    pub fn elu(&self, alpha: f64, scale: f64, input_scale: f64) -> Result<Var> {
        let out = self.data().elu(alpha, scale, input_scale)?;
        self.record_elu(out, alpha, scale, input_scale)
    }

    fn record_elu(&self, out: Tensor, alpha: f64, scale: f64, input_scale: f64) -> Result<Var> {
        self.unary_op("EluBackward", out, Save::Input, move |g, x| {
            in_opmath(g, x, |g, x| {
                let neg = g
                    .mul(input_scale)?
                    .mul(alpha * scale)?
                    .mul(&x.mul(input_scale)?.exp()?)?;
                Tensor::where_cond(&x.le(0)?, &neg, &g.mul(scale)?)
            })
        })
    }

    /// `F.selu` (recorded as [`Var::elu`] with SELU's constants, as PyTorch
    /// records it).
    pub fn selu(&self) -> Result<Var> {
        self.elu(SELU_ALPHA, SELU_SCALE, 1.0)
    }

    /// `F.celu`, `elu(alpha, 1, 1 / alpha)`. Its gradient is ELU's with
    /// `input_scale = 1 / f32(alpha)`: PyTorch's `derivatives.yaml` writes
    /// `1.0 / alpha.toFloat()` there, while its forward divides in f64.
    pub fn celu(&self, alpha: f64) -> Result<Var> {
        let out = self.data().celu(alpha)?;
        self.record_elu(out, alpha, 1.0, 1.0 / f64::from(alpha as f32))
    }

    /// `F.softplus`; the gradient is `g * z / (z + 1)` with
    /// `z = e^(beta x)`, and `g` where `beta x > threshold`.
    pub fn softplus(&self, beta: f64, threshold: f64) -> Result<Var> {
        let out = self.data().softplus(beta, threshold)?;
        self.unary_op("SoftplusBackward", out, Save::Input, move |g, x| {
            in_opmath(g, x, |g, x| {
                let bx = x.mul(beta)?;
                let z = bx.exp()?;
                let soft = g.mul(&z)?.div(&z.add(1.0)?)?;
                Tensor::where_cond(&bx.gt(threshold)?, g, &soft)
            })
        })
    }

    /// `F.hardtanh`; the gradient passes strictly inside the bounds, 0 on
    /// and outside them and at a NaN input. (PyTorch's CPU kernel gives 0
    /// at NaN in its vectorised loop, the gradient in its scalar loop, which
    /// takes the last elements of a row past a multiple of 8 (f64) or 16
    /// (f32), and rows that are not contiguous; strata gives 0 everywhere,
    /// as `clamp`'s gradient does.)
    pub fn hardtanh(&self, min_val: f64, max_val: f64) -> Result<Var> {
        let out = self.data().hardtanh(min_val, max_val)?;
        self.unary_op("HardtanhBackward", out, Save::Input, move |g, x| {
            let inside = x.gt(min_val)?.logical_and(&x.lt(max_val)?)?;
            Tensor::where_cond(&inside, g, 0.0)
        })
    }

    /// `F.relu6` (recorded as [`Var::hardtanh`] between 0 and 6).
    pub fn relu6(&self) -> Result<Var> {
        self.hardtanh(0.0, 6.0)
    }

    /// `F.hardsigmoid`; the gradient is `g / 6` strictly between -3 and 3,
    /// 0 elsewhere.
    pub fn hardsigmoid(&self) -> Result<Var> {
        let out = self.data().hardsigmoid()?;
        self.unary_op("HardsigmoidBackward", out, Save::Input, |g, x| {
            in_opmath(g, x, |g, x| {
                // PyTorch's kernel multiplies by the f32 constant 1.0f / 6.0f,
                // for f64 too.
                let inside = x.gt(-3.0)?.logical_and(&x.lt(3.0)?)?;
                Tensor::where_cond(&inside, &g.mul(f64::from(1.0f32 / 6.0))?, 0.0)
            })
        })
    }

    /// `F.hardswish`; the gradient is 0 up to -3, `g (x / 3 + 1/2)` strictly
    /// between -3 and 3, `g` from 3 on (and at NaN).
    pub fn hardswish(&self) -> Result<Var> {
        let out = self.data().hardswish()?;
        self.unary_op("HardswishBackward", out, Save::Input, |g, x| {
            in_opmath(g, x, |g, x| {
                let mid = g.mul(&x.div(3.0)?.add(0.5)?)?;
                let upper = Tensor::where_cond(&x.lt(3.0)?, &mid, g)?;
                Tensor::where_cond(&x.le(-3.0)?, 0.0, &upper)
            })
        })
    }

    /// `F.mish`; the gradient is `g (t + x sigmoid(x) (1 - t^2))` with
    /// `t = tanh(softplus(x))`.
    pub fn mish(&self) -> Result<Var> {
        let out = self.data().mish()?;
        self.unary_op("MishBackward", out, Save::Input, |g, x| {
            in_opmath(g, x, |g, x| {
                let s = x.sigmoid()?;
                let t = x.exp()?.log1p()?.tanh()?;
                let d = t.add(&x.mul(&s)?.mul(&t.mul(&t)?.neg()?.add(1.0)?)?)?;
                g.mul(&d)
            })
        })
    }

    /// `F.logsigmoid`; the gradient is `g (m - s z / (1 + z))` with
    /// `z = e^-|x|`, `m` 1 and `s` 1 where `x < 0`, else 0 and -1 (that
    /// is `g sigmoid(-x)`, without overflow).
    pub fn logsigmoid(&self) -> Result<Var> {
        let out = self.data().logsigmoid()?;
        self.unary_op("LogSigmoidBackward", out, Save::Input, |g, x| {
            in_opmath(g, x, |g, x| {
                let z = x.abs()?.neg()?.exp()?;
                let q = z.div(&z.add(1.0)?)?;
                let negative = x.lt(0)?;
                // x < 0: 1 - q; else: 0 + q.
                let d = Tensor::where_cond(&negative, &q.neg()?.add(1.0)?, &q)?;
                g.mul(&d)
            })
        })
    }

    /// `F.softsign`, `x / (1 + |x|)`: recorded as those ops, as PyTorch
    /// records it.
    pub fn softsign(&self) -> Result<Var> {
        self.div(&self.abs()?.add(1.0)?)
    }

    /// `F.threshold`; the gradient passes where the input is above
    /// `threshold` (a NaN input passes it too), 0 elsewhere.
    pub fn threshold(&self, threshold: f64, value: f64) -> Result<Var> {
        let out = self.data().threshold(threshold, value)?;
        self.unary_op("ThresholdBackward", out, Save::Input, move |g, x| {
            Tensor::where_cond(&x.le(threshold)?, 0.0, g)
        })
    }
}
