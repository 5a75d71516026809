//! Session 79 (helper 134): the recorded forms of strata-tensor's
//! `nn_more` ops, each the same composition over recorded ops (so the
//! gradients are PyTorch's: `multi_margin_loss`'s goes to the classes whose
//! hinge is positive and back to the target's score, as its CPU backward;
//! `instance_norm`'s is batch norm's over the `[1, N * C, ...]` view;
//! `local_response_norm`, `lp_pool*d` and `bilinear` are PyTorch's own
//! compositions; `max_unpool*d`'s is the gather of the gradient at the
//! indices).

use crate::error::Result;
use crate::var::Var;
use strata_tensor::nn_more::{
    local_response_norm_of, lp_pool1d_of, lp_pool2d_of, max_unpool_of, multi_margin_loss_of,
};
use strata_tensor::{Reduction, Tensor};

impl Var {
    /// [`Tensor::multi_margin_loss`].
    ///
    /// ```
    /// use strata_autograd::Var;
    /// use strata_tensor::{tensor, Reduction};
    /// let x = Var::parameter(tensor![[0.1, 0.2, 0.4, 0.8]]?)?;
    /// x.multi_margin_loss(&tensor![3i64]?, 1, 1.0, None, Reduction::Sum)?.backward()?;
    /// assert_eq!(x.grad().unwrap().to_vec::<f32>()?, [0.25, 0.25, 0.25, -0.75]);
    /// # Ok::<(), strata_autograd::AutogradError>(())
    /// ```
    pub fn multi_margin_loss(
        &self,
        target: &Tensor,
        p: i64,
        margin: f64,
        weight: Option<&Tensor>,
        reduction: Reduction,
    ) -> Result<Var> {
        multi_margin_loss_of(self, target, p, margin, weight, reduction)
    }

    /// [`Tensor::instance_norm`] (batch norm of the `[1, N * C, ...]` view;
    /// the weight and bias are differentiable, the running statistics are
    /// updated in place).
    #[allow(clippy::too_many_arguments)]
    pub fn instance_norm(
        &self,
        running_mean: Option<&Tensor>,
        running_var: Option<&Tensor>,
        weight: Option<&Var>,
        bias: Option<&Var>,
        use_input_stats: bool,
        momentum: f64,
        eps: f64,
    ) -> Result<Var> {
        strata_tensor::nn_more::instance_norm_of(
            self,
            running_mean,
            running_var,
            weight,
            bias,
            use_input_stats,
            momentum,
            eps,
        )
    }

    /// [`Tensor::local_response_norm`] (PyTorch's composition).
    pub fn local_response_norm(&self, size: i64, alpha: f64, beta: f64, k: f64) -> Result<Var> {
        local_response_norm_of(self, size, alpha, beta, k)
    }

    /// [`Tensor::lp_pool1d`] (PyTorch's composition).
    pub fn lp_pool1d(
        &self,
        norm_type: f64,
        kernel: usize,
        stride: Option<usize>,
        ceil_mode: bool,
    ) -> Result<Var> {
        lp_pool1d_of(self, norm_type, kernel, stride, ceil_mode)
    }

    /// [`Tensor::lp_pool2d`] (PyTorch's composition).
    pub fn lp_pool2d(
        &self,
        norm_type: f64,
        kernel: &[usize],
        stride: Option<&[usize]>,
        ceil_mode: bool,
    ) -> Result<Var> {
        lp_pool2d_of(self, norm_type, kernel, stride, ceil_mode)
    }

    /// [`Tensor::max_unpool1d`] (the gradient is gathered at the indices).
    pub fn max_unpool1d(
        &self,
        indices: &Tensor,
        kernel: usize,
        stride: Option<usize>,
        padding: usize,
        output_size: Option<&[usize]>,
    ) -> Result<Var> {
        let stride = stride.map(|s| [s]);
        let stride = stride.as_ref().map(|s| &s[..]);
        max_unpool_of(self, indices, &[kernel], stride, &[padding], output_size, 1)
    }

    /// [`Tensor::max_unpool2d`] (the gradient is gathered at the indices).
    pub fn max_unpool2d(
        &self,
        indices: &Tensor,
        kernel: &[usize],
        stride: Option<&[usize]>,
        padding: &[usize],
        output_size: Option<&[usize]>,
    ) -> Result<Var> {
        max_unpool_of(self, indices, kernel, stride, padding, output_size, 2)
    }

    /// [`Tensor::bilinear`] (an `einsum`; every operand differentiable).
    pub fn bilinear(&self, x2: &Var, weight: &Var, bias: Option<&Var>) -> Result<Var> {
        strata_tensor::nn_more::bilinear_of(self, x2, weight, bias)
    }
}

impl Var {
    /// [`Tensor::adaptive_max_pool1d`]: the values (differentiable: the
    /// gradient goes to each window's maximum, as PyTorch's) and indices.
    pub fn adaptive_max_pool1d(&self, output_size: &[usize]) -> Result<(Var, Tensor)> {
        strata_tensor::nn_more::adaptive_max_pool_of(self, output_size, 1)
    }

    /// [`Tensor::adaptive_max_pool2d`] (gradient as
    /// [`Var::adaptive_max_pool1d`]'s).
    pub fn adaptive_max_pool2d(&self, output_size: &[usize]) -> Result<(Var, Tensor)> {
        strata_tensor::nn_more::adaptive_max_pool_of(self, output_size, 2)
    }
}

impl Var {
    /// [`Tensor::multilabel_margin_loss`] (the gradient goes to the pairs
    /// whose hinge is positive, as PyTorch's CPU backward).
    pub fn multilabel_margin_loss(&self, target: &Tensor, reduction: Reduction) -> Result<Var> {
        strata_tensor::nn_more::multilabel_margin_loss_of(self, target, reduction)
    }
}

impl Var {
    /// [`Tensor::embedding_bag`] with `self` the weight (its gradient: the
    /// upstream rows added back at the bags' entries, scaled by the
    /// per-sample weights or the bag sizes; for `Max` at each bag's
    /// maximum).
    pub fn embedding_bag(
        &self,
        indices: &Tensor,
        offsets: Option<&Tensor>,
        mode: strata_tensor::EmbeddingBagMode,
        per_sample_weights: Option<&Var>,
        include_last_offset: bool,
        padding_idx: Option<i64>,
    ) -> Result<Var> {
        strata_tensor::nn_more::embedding_bag_of(
            self,
            indices,
            offsets,
            mode,
            per_sample_weights,
            include_last_offset,
            padding_idx,
        )
    }
}
