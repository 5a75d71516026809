//! Session 78: `torch.logaddexp` and `torch.logaddexp2`, `ln(e^a + e^b)` and
//! `log2(2^a + 2^b)` without overflow, as PyTorch 2.15's CPU kernels compute
//! them: `a` where both are the same infinity, else
//! `max(a, b) + log1p(e^-|a - b|)` (base 2: `log1p(2^-|a - b|) / ln 2`).
//! The operands promote; the result must be a float dtype (f16/bf16
//! computed in f32 and rounded once).

use super::elementwise::{result_type, Operand};
use crate::dtype::DType;
use crate::error::{Result, TensorError};
use crate::shape::broadcast_shapes;
use crate::tensor::Tensor;

/// The promoted dtype of `logaddexp(a, b)` (float only) and the operands
/// in the dtype it computes in.
fn operands(op: &'static str, a: &Tensor, b: &Tensor) -> Result<(DType, Tensor, Tensor)> {
    let d = result_type(&[Operand::Tensor(a), Operand::Tensor(b)]);
    if !d.is_float() {
        return Err(TensorError::dtype(
            op,
            format!("not defined for dtype {d} (float tensors only; convert with to_dtype first)"),
        ));
    }
    broadcast_shapes(op, a.shape(), b.shape())?;
    let c = match d {
        DType::F16 | DType::BF16 => DType::F32,
        d => d,
    };
    Ok((d, a.to_dtype(c)?, b.to_dtype(c)?))
}

fn log_add(op: &'static str, a: &Tensor, b: &Tensor, base2: bool) -> Result<Tensor> {
    let (d, x, y) = operands(op, a, b)?;
    let diff = x.sub(&y)?.abs()?.neg()?;
    let tail = if base2 {
        diff.exp2()?.log1p()?.mul(1.0 / std::f64::consts::LN_2)?
    } else {
        diff.exp()?.log1p()?
    };
    let general = x.maximum(&y)?.add(&tail)?;
    let same_inf = x.isinf()?.logical_and(&x.eq(&y)?)?;
    Tensor::where_cond(&same_inf, &x, &general)?.to_dtype(d)
}

impl Tensor {
    /// `torch.logaddexp(self, other)`: `ln(e^self + e^other)`, broadcasting.
    ///
    /// ```
    /// use strata_tensor::tensor;
    /// let a = tensor![0.0f64, 1000.0].unwrap().to_dtype(strata_tensor::DType::F64).unwrap();
    /// let b = tensor![0.0f64, 1000.0].unwrap().to_dtype(strata_tensor::DType::F64).unwrap();
    /// let y = a.logaddexp(&b).unwrap().to_vec::<f64>().unwrap();
    /// assert_eq!(y, vec![2f64.ln(), 1000.0 + 2f64.ln()]);
    /// ```
    pub fn logaddexp(&self, other: &Tensor) -> Result<Tensor> {
        log_add("logaddexp", self, other, false)
    }

    /// `torch.logaddexp2(self, other)`: `log2(2^self + 2^other)`,
    /// broadcasting.
    ///
    /// ```
    /// use strata_tensor::tensor;
    /// let a = tensor![3.0f64].unwrap().to_dtype(strata_tensor::DType::F64).unwrap();
    /// assert_eq!(a.logaddexp2(&a).unwrap().to_vec::<f64>().unwrap(), vec![4.0]);
    /// ```
    pub fn logaddexp2(&self, other: &Tensor) -> Result<Tensor> {
        log_add("logaddexp2", self, other, true)
    }
}
