//! `F.cosine_similarity` and `F.pairwise_distance`, composed as PyTorch
//! 2.15 composes them (so their promotions, broadcasting and roundings are
//! PyTorch's).

use crate::dtype::DType;
use crate::error::{Result, TensorError};
use crate::ops::elementwise::{result_type, Operand};
use crate::tensor::Tensor;

/// `F.cosine_similarity`'s checks (shared with strata-autograd's form):
/// the operands' common dtype, which must be floating (integer operands are
/// converted to it), and their broadcast shape.
pub fn cosine_similarity_plan(a: &Tensor, b: &Tensor) -> Result<(DType, Vec<usize>)> {
    let common = result_type(&[Operand::Tensor(a), Operand::Tensor(b)]);
    if !common.is_float() {
        return Err(TensorError::dtype(
            "cosine_similarity",
            format!(
                "expected the operands' common dtype to be floating point, got {common:?} \
                 (from {:?} and {:?})",
                a.dtype(),
                b.dtype()
            ),
        ));
    }
    let shape = crate::shape::broadcast_shapes("cosine_similarity", a.shape(), b.shape())?;
    Ok((common, shape))
}

impl Tensor {
    /// `F.cosine_similarity(self, other, dim, eps)`: along `dim` (after
    /// broadcasting), `sum(x / max(||x||, eps) * y / max(||y||, eps))`,
    /// each operand divided by its own norm first (PyTorch's order, which
    /// keeps the result in [-1, 1]); integer operands are converted to the
    /// common floating dtype (PyTorch's defaults: dim 1, eps 1e-8).
    ///
    /// ```
    /// use strata_tensor::tensor;
    /// let a = tensor![[1.0, 0.0], [1.0, 1.0]]?;
    /// let b = tensor![[2.0, 0.0], [-1.0, -1.0]]?;
    /// let s = a.cosine_similarity(&b, 1, 1e-8)?.to_vec::<f32>()?;
    /// assert!((s[0] - 1.0).abs() < 1e-6 && (s[1] + 1.0).abs() < 1e-6);
    /// # Ok::<(), strata_tensor::TensorError>(())
    /// ```
    pub fn cosine_similarity(&self, other: &Tensor, dim: i64, eps: f64) -> Result<Tensor> {
        let (common, shape) = cosine_similarity_plan(self, other)?;
        let as_float = |t: &Tensor| {
            if t.dtype().is_float() {
                Ok(t.clone())
            } else {
                t.to_dtype(common)
            }
        };
        let (a, b) = (
            as_float(self)?.broadcast_to(&shape)?,
            as_float(other)?.broadcast_to(&shape)?,
        );
        let unit = |t: &Tensor| -> Result<Tensor> {
            let n = t
                .vector_norm(2.0, Some(&[dim]), true)?
                .clamp(Some(eps), None::<f64>)?;
            t.div(&n)
        };
        unit(&a)?.mul(&unit(&b)?)?.sum(Some(&[dim]), false)
    }

    /// `F.pairwise_distance(self, other, p, eps, keepdim)`: the p-norm of
    /// `self - other + eps` along the last dim of the broadcast operands
    /// (PyTorch's defaults: p 2, eps 1e-6).
    pub fn pairwise_distance(
        &self,
        other: &Tensor,
        p: f64,
        eps: f64,
        keepdim: bool,
    ) -> Result<Tensor> {
        let last = self.ndim().max(other.ndim()) as i64 - 1;
        self.sub(other)?
            .add(eps)?
            .vector_norm(p, Some(&[last]), keepdim)
    }
}
