//! Session 74: `F.rms_norm` and `F.group_norm` on variables (session 75:
//! `F.batch_norm`, computed by strata-tensor's shared composition), recorded as
//! the compositions their `Tensor` forms compute (`Tensor::rms_norm`,
//! `Tensor::group_norm`): a cast to the computation type, the statistics,
//! the products, a cast back. PyTorch records `rms_norm` so too; its
//! `group_norm` has a fused backward, which this composition equals up to
//! rounding.

use crate::error::Result;
use crate::var::Var;
use strata_tensor::Tensor;

impl Var {
    /// `F.rms_norm` (see [`strata_tensor::Tensor::rms_norm`]); the weight
    /// is a variable too (its gradient `sum(g x / rms)` over the leading
    /// dims).
    pub fn rms_norm(
        &self,
        normalized_shape: &[usize],
        weight: Option<&Var>,
        eps: Option<f64>,
    ) -> Result<Var> {
        strata_tensor::rms_norm(self, normalized_shape, weight, eps)
    }

    /// `F.group_norm` (see [`strata_tensor::Tensor::group_norm`]); weight
    /// and bias are variables too.
    pub fn group_norm(
        &self,
        num_groups: usize,
        weight: Option<&Var>,
        bias: Option<&Var>,
        eps: f64,
    ) -> Result<Var> {
        strata_tensor::group_norm(self, num_groups, weight, bias, eps)
    }

    /// `F.batch_norm` (see [`strata_tensor::Tensor::batch_norm`]): the
    /// input, weight and bias are variables (in training the batch
    /// statistics are part of the graph, as PyTorch's); the running
    /// statistics are plain tensors, updated in place in training.
    ///
    /// ```
    /// use strata_autograd::Var;
    /// use strata_tensor::{Device, DType, Tensor};
    /// let x = Var::parameter(Tensor::from_slice(&[1.0f32, 3.0, 5.0, 8.0], &[4, 1], Device::Cpu)?)?;
    /// let y = x.batch_norm(None, None, None, None, true, 0.1, 1e-5)?;
    /// y.mul(&y)?.sum(None, false)?.backward()?; // constant: the normalised values' squares sum to N
    /// assert!(x.grad().unwrap().to_vec::<f32>()?.iter().all(|g| g.abs() < 1e-5));
    /// # Ok::<(), strata_autograd::AutogradError>(())
    /// ```
    #[allow(clippy::too_many_arguments)]
    pub fn batch_norm(
        &self,
        running_mean: Option<&Tensor>,
        running_var: Option<&Tensor>,
        weight: Option<&Var>,
        bias: Option<&Var>,
        training: bool,
        momentum: f64,
        eps: f64,
    ) -> Result<Var> {
        strata_tensor::batch_norm(
            self,
            running_mean,
            running_var,
            weight,
            bias,
            training,
            momentum,
            eps,
        )
    }
}
