//! Session 78: `F.prelu`, the leaky ReLU with a learned slope per channel
//! (dim 1) or one for every element, with PyTorch 2.15's checks
//! (`prelu_weight`, shared with strata-autograd's recorded form) and its
//! kernel's `x > 0 ? x : w x`.

use crate::error::{Result, TensorError};
use crate::tensor::Tensor;

/// PyTorch's checks of `prelu(x, weight)` and the weight reshaped to
/// broadcast over `x` (its elements along dim 1).
pub fn prelu_weight(x: &Tensor, weight: &Tensor) -> Result<Tensor> {
    const OP: &str = "prelu";
    if x.dtype() != weight.dtype() {
        return Err(TensorError::dtype(
            OP,
            format!(
                "Type promoting not supported. Got {} and {} (convert the weight to the input's dtype)",
                x.dtype(),
                weight.dtype()
            ),
        ));
    }
    let nd = x.ndim();
    if weight.numel() != 1 {
        if nd == 0 {
            return Err(TensorError::shape(
                OP,
                "Not allow zero-dim input tensor (with a weight of more than one element)",
            ));
        }
        let channels = if nd > 1 { x.shape()[1] } else { 1 };
        if channels != weight.numel() {
            return Err(TensorError::shape(
                OP,
                format!(
                    "Mismatch of parameter numbers and input channel size. Found parameter numbers = {} and channel size = {channels}.",
                    weight.numel()
                ),
            ));
        }
    }
    if weight.ndim() > 1 {
        return Err(TensorError::shape(
            OP,
            format!(
                "Expected `weight` to be a scalar or 1D tensor, but got: ndim = {}",
                weight.ndim()
            ),
        ));
    }
    crate::ops::shrink::check_float(OP, x)?;
    if nd == weight.ndim() {
        return Ok(weight.clone());
    }
    let mut shape = vec![1i64; nd];
    if nd > 1 {
        shape[1] = weight.numel() as i64;
    }
    weight.reshape(&shape)
}

impl Tensor {
    /// `F.prelu(self, weight)`: `x` where positive, `weight * x` elsewhere,
    /// the weight (one element, or one per channel of dim 1) of self's
    /// float dtype.
    ///
    /// ```
    /// use strata_tensor::tensor;
    /// let x = tensor![[-2.0f32, 3.0], [-4.0, -1.0]].unwrap();
    /// let w = tensor![0.5f32, 0.25].unwrap();
    /// assert_eq!(x.prelu(&w).unwrap().to_vec::<f32>().unwrap(), vec![-1.0, 3.0, -2.0, -0.25]);
    /// ```
    pub fn prelu(&self, weight: &Tensor) -> Result<Tensor> {
        let w = prelu_weight(self, weight)?;
        Tensor::where_cond(&self.gt(0)?, self, &w.mul(self)?)
    }
}
