//! The activation functions of `torch.nn.functional` beyond relu, gelu,
//! silu, sigmoid and tanh (which are rows of `ops::table`): leaky_relu, elu,
//! selu, celu, softplus, hardtanh, relu6, hardsigmoid, hardswish, mish,
//! logsigmoid, softsign and threshold. Each is a composition of the
//! element-wise table's ops, in the order of operations of PyTorch's CPU
//! kernel; f16 and bf16 inputs are computed in f32 and rounded once, as
//! PyTorch's kernels compute them.

use crate::dtype::DType;
use crate::error::{Result, TensorError};
use crate::ops::checks::check_fits;
use crate::scalar::Scalar;
use crate::tensor::Tensor;

/// SELU's `alpha` (`torch.nn.SELU`).
pub const SELU_ALPHA: f64 = 1.673_263_242_354_377_3;
/// SELU's `scale`.
pub const SELU_SCALE: f64 = 1.050_700_987_355_480_5;

impl Tensor {
    /// Refuses a non-float tensor (PyTorch's kernels are defined for the
    /// float dtypes only), then runs `f` on `self`, in f32 for f16/bf16
    /// (rounded back once at the end).
    fn float_activation(
        &self,
        op: &'static str,
        f: impl FnOnce(&Tensor) -> Result<Tensor>,
    ) -> Result<Tensor> {
        match self.dtype() {
            DType::F16 | DType::BF16 => f(&self.to_dtype(DType::F32)?)?.to_dtype(self.dtype()),
            DType::F32 | DType::F64 => f(self),
            d => Err(TensorError::dtype(
                op,
                format!(
                    "not defined for dtype {d} (float tensors only; convert with to_dtype first)"
                ),
            )),
        }
    }

    /// `self` where it is positive, `negative_slope * self` elsewhere
    /// (`F.leaky_relu`; PyTorch's default slope is 0.01).
    ///
    /// ```
    /// use strata_tensor::{Tensor, Device};
    /// let x = Tensor::from_slice(&[2.0f32, -2.0], &[2], Device::Cpu).unwrap();
    /// assert_eq!(x.leaky_relu(0.1).unwrap().to_vec::<f32>().unwrap(), vec![2.0, -0.2]);
    /// ```
    pub fn leaky_relu(&self, negative_slope: f64) -> Result<Tensor> {
        self.float_activation("leaky_relu", |x| {
            Tensor::where_cond(&x.gt(0)?, x, &x.mul(negative_slope)?)
        })
    }

    /// ELU (`F.elu`, and PyTorch's `torch.ops.aten.elu` with its `scale` and
    /// `input_scale`): `scale * self` where it is positive or zero, else
    /// `alpha * scale * (e^(input_scale * self) - 1)`. `F.elu(x, alpha)` is
    /// `elu(alpha, 1.0, 1.0)`.
    pub fn elu(&self, alpha: f64, scale: f64, input_scale: f64) -> Result<Tensor> {
        self.float_activation("elu", |x| {
            // PyTorch 2.15's CPU kernel takes the positive branch at ±0 too
            // (`elu(-0.0)` is -0.0 whatever alpha, even infinite or NaN).
            let neg = x.mul(input_scale)?.expm1()?.mul(alpha * scale)?;
            Tensor::where_cond(&x.ge(0)?, &x.mul(scale)?, &neg)
        })
    }

    /// SELU (`F.selu`): [`Tensor::elu`] with [`SELU_ALPHA`] and [`SELU_SCALE`].
    pub fn selu(&self) -> Result<Tensor> {
        self.elu(SELU_ALPHA, SELU_SCALE, 1.0)
    }

    /// CELU (`F.celu`): `max(0, x) + min(0, alpha (e^(x / alpha) - 1))`, that
    /// is [`Tensor::elu`] with `input_scale = 1 / alpha`. An `alpha` of 0 is
    /// an error, as in PyTorch.
    pub fn celu(&self, alpha: f64) -> Result<Tensor> {
        if alpha == 0.0 {
            return Err(TensorError::value("celu", "alpha cannot be 0 for CELU"));
        }
        self.elu(alpha, 1.0, 1.0 / alpha)
    }

    /// Softplus (`F.softplus`): `ln(1 + e^(beta x)) / beta`, and `x` itself
    /// where `beta x > threshold` (PyTorch's defaults: 1 and 20).
    pub fn softplus(&self, beta: f64, threshold: f64) -> Result<Tensor> {
        self.float_activation("softplus", |x| {
            let bx = x.mul(beta)?;
            let soft = bx.exp()?.log1p()?.div(beta)?;
            Tensor::where_cond(&bx.gt(threshold)?, x, &soft)
        })
    }

    /// `self` clamped to `[min_val, max_val]` (`F.hardtanh`; PyTorch's
    /// defaults: -1 and 1). Integer tensors keep their dtype: the bounds are
    /// truncated to integers first, as PyTorch's `hardtanh` does; bool is an
    /// error, and so is `min_val > max_val`.
    pub fn hardtanh(&self, min_val: f64, max_val: f64) -> Result<Tensor> {
        if min_val > max_val {
            return Err(TensorError::value(
                "hardtanh",
                format!("min_val ({min_val}) cannot be greater than max_val ({max_val})"),
            ));
        }
        match self.dtype() {
            DType::Bool => Err(TensorError::unsupported("hardtanh", DType::Bool)),
            d if d.is_float() => self.clamp(Some(min_val), Some(max_val)),
            _ => {
                // PyTorch converts the bounds with `toLong`, checked.
                for v in [min_val, max_val] {
                    check_fits("hardtanh", Scalar::Float(v), DType::I64)?;
                }
                self.clamp(
                    Some(Scalar::Int(min_val as i64)),
                    Some(Scalar::Int(max_val as i64)),
                )
            }
        }
    }

    /// `hardtanh(self, 0, 6)` (`F.relu6`).
    pub fn relu6(&self) -> Result<Tensor> {
        self.hardtanh(0.0, 6.0)
    }

    /// `min(max(x + 3, 0), 6) / 6` (`F.hardsigmoid`).
    pub fn hardsigmoid(&self) -> Result<Tensor> {
        self.float_activation("hardsigmoid", |x| {
            x.add(3.0)?.clamp(Some(0.0), Some(6.0))?.div(6.0)
        })
    }

    /// `x * min(max(x + 3, 0), 6) / 6` (`F.hardswish`).
    pub fn hardswish(&self) -> Result<Tensor> {
        self.float_activation("hardswish", |x| {
            x.mul(&x.add(3.0)?.clamp(Some(0.0), Some(6.0))?)?.div(6.0)
        })
    }

    /// `x * tanh(ln(1 + e^x))` (`F.mish`).
    pub fn mish(&self) -> Result<Tensor> {
        self.float_activation("mish", |x| x.mul(&x.exp()?.log1p()?.tanh()?))
    }

    /// `ln(sigmoid(x))`, computed as `min(x, 0) - ln(1 + e^-|x|)`, which
    /// neither overflows nor loses small values (`F.logsigmoid`).
    pub fn logsigmoid(&self) -> Result<Tensor> {
        self.float_activation("logsigmoid", |x| {
            let z = x.abs()?.neg()?.exp()?;
            x.clamp(None::<f64>, Some(0.0))?.sub(&z.log1p()?)
        })
    }

    /// `x / (1 + |x|)` (`F.softsign`, which is this composition in PyTorch
    /// too: integer inputs give f32, bool is an error).
    pub fn softsign(&self) -> Result<Tensor> {
        self.div(&self.abs()?.add(1)?)
    }

    /// `self` where it is greater than `threshold`, else `value`
    /// (`F.threshold`; every dtype but bool, the result in self's dtype; a
    /// NaN element is kept). As in PyTorch's kernel, `value` is converted to
    /// self's dtype (out of its range: an error), and so is `threshold` for
    /// an integer tensor (truncated; out of range: an error), while a float
    /// tensor compares with it in its computation type (f32 for f16/bf16).
    pub fn threshold(
        &self,
        threshold: impl Into<Scalar>,
        value: impl Into<Scalar>,
    ) -> Result<Tensor> {
        let d = self.dtype();
        if d == DType::Bool {
            return Err(TensorError::unsupported("threshold", DType::Bool));
        }
        let (threshold, value) = (threshold.into(), value.into());
        let checked = |s: Scalar| check_fits("threshold", s, d).map(|()| s.cast_to(d));
        let value = checked(value)?;
        let threshold = if d.is_float() {
            threshold
        } else {
            checked(threshold)?
        };
        let wide = match d {
            DType::F16 | DType::BF16 => self.to_dtype(DType::F32)?,
            _ => self.clone(),
        };
        let below = wide.le(threshold)?;
        let value = Tensor::full(&[], value, d, self.device())?;
        Tensor::where_cond(&below, &value, self)
    }
}
