//! Session 78: `F.glu`, the gated linear unit: the input halved along a dim,
//! the first half times the sigmoid of the second, as PyTorch 2.15's CPU
//! kernel computes it (`a * (1 / (1 + e^-b))`, f16/bf16 in f32 rounded
//! once). `glu_halves` holds its checks and is shared with
//! strata-autograd's recorded form.

use crate::dtype::DType;
use crate::error::{Result, TensorError};
use crate::shape::normalize_dim;
use crate::tensor::Tensor;

/// PyTorch's checks of `glu(x, dim)` (a dim of even size; float tensors),
/// and the two halves of `x` along it (views).
pub fn glu_halves(x: &Tensor, dim: i64) -> Result<(Tensor, Tensor, usize)> {
    const OP: &str = "glu";
    if x.ndim() == 0 {
        return Err(TensorError::dim(
            OP,
            "glu does not support scalars because halving size must be even",
        ));
    }
    let d = normalize_dim(OP, dim, x.ndim())?;
    let n = x.shape()[d];
    if !n.is_multiple_of(2) {
        return Err(TensorError::shape(
            OP,
            format!("Halving dimension must be even, but dimension {d} is size {n}"),
        ));
    }
    crate::ops::shrink::check_float(OP, x)?;
    let h = (n / 2) as i64;
    Ok((x.narrow(d as i64, 0, h)?, x.narrow(d as i64, h, h)?, d))
}

impl Tensor {
    /// `F.glu(self, dim)`: `a * sigmoid(b)` where `a` and `b` are the first
    /// and second halves of self along `dim` (PyTorch's default -1), whose
    /// size must be even; float tensors only.
    ///
    /// ```
    /// use strata_tensor::tensor;
    /// let x = tensor![[2.0f32, 0.0]].unwrap();
    /// assert_eq!(x.glu(-1).unwrap().to_vec::<f32>().unwrap(), vec![1.0]);
    /// ```
    pub fn glu(&self, dim: i64) -> Result<Tensor> {
        let (a, b, _) = glu_halves(self, dim)?;
        let wide = |t: &Tensor| match t.dtype() {
            DType::F16 | DType::BF16 => t.to_dtype(DType::F32),
            _ => Ok(t.clone()),
        };
        let (a, b) = (wide(&a)?, wide(&b)?);
        let gate = b.neg()?.exp()?.add(1.0)?.reciprocal()?;
        a.mul(&gate)?.to_dtype(self.dtype())
    }
}
