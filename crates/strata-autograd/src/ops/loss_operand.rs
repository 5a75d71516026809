//! Session 78: the margin, embedding and likelihood losses on variables.
//! Each is written once in strata-tensor (`margin_losses`,
//! `likelihood_losses`) over `LossOperand`, implemented here for `Var`, so
//! the recorded form is PyTorch's composition, step for step, and its
//! gradients are those of PyTorch's autograd through that composition.

use crate::error::{AutogradError, Result};
use crate::var::{record, Var};
use strata_tensor::{
    likelihood_losses, margin_losses, DType, GaussianVar, LossOperand, Reduction, Tensor,
};

impl LossOperand for Var {
    type Error = AutogradError;
    fn l_data(&self) -> &Tensor {
        self.data()
    }
    fn l_constant(t: Tensor) -> Self {
        Var::new(t)
    }
    fn l_add(&self, other: &Self) -> Result<Self> {
        self.add(other)
    }
    fn l_sub(&self, other: &Self) -> Result<Self> {
        self.sub(other)
    }
    fn l_mul(&self, other: &Self) -> Result<Self> {
        self.mul(other)
    }
    fn l_div(&self, other: &Self) -> Result<Self> {
        self.div(other)
    }
    fn l_add_scalar(&self, v: f64) -> Result<Self> {
        self.add(v)
    }
    fn l_mul_scalar(&self, v: f64) -> Result<Self> {
        self.mul(v)
    }
    fn l_div_scalar(&self, v: f64) -> Result<Self> {
        self.div(v)
    }
    fn l_neg(&self) -> Result<Self> {
        self.neg()
    }
    fn l_exp(&self) -> Result<Self> {
        self.exp()
    }
    fn l_log(&self) -> Result<Self> {
        self.log()
    }
    fn l_log1p(&self) -> Result<Self> {
        self.log1p()
    }
    fn l_sqrt(&self) -> Result<Self> {
        self.sqrt()
    }
    fn l_square(&self) -> Result<Self> {
        self.pow_scalar(2)
    }
    fn l_logsigmoid(&self) -> Result<Self> {
        self.logsigmoid()
    }
    fn l_clamp_min_zero(&self) -> Result<Self> {
        self.clamp_min(0.0)
    }
    fn l_minimum(&self, other: &Self) -> Result<Self> {
        self.minimum(other)
    }
    fn l_where(cond: &Tensor, a: &Self, b: &Self) -> Result<Self> {
        Var::where_cond(cond, a, b)
    }
    fn l_sum(&self, dims: Option<&[i64]>, keepdim: bool) -> Result<Self> {
        self.sum(dims, keepdim)
    }
    fn l_mean(&self, dims: Option<&[i64]>, keepdim: bool) -> Result<Self> {
        self.mean(dims, keepdim)
    }
    fn l_pairwise_distance(&self, other: &Self, p: f64, eps: f64) -> Result<Self> {
        self.pairwise_distance(other, p, eps, false)
    }
    fn l_to_dtype(&self, dtype: DType) -> Result<Self> {
        if self.dtype() == dtype {
            Ok(self.clone())
        } else {
            self.to_dtype(dtype)
        }
    }
    fn l_unsqueeze(&self, dim: i64) -> Result<Self> {
        self.unsqueeze(dim)
    }
    fn l_reshape(&self, shape: &[i64]) -> Result<Self> {
        self.reshape(shape)
    }
    fn l_gather(&self, dim: i64, index: &Tensor) -> Result<Self> {
        self.gather(dim, index)
    }
    fn l_clamp_min_no_grad(&self, min: f64) -> Result<Self> {
        let out = self.data().clamp(Some(min), None::<f64>)?;
        let f = super::formula(|g, _s, _n| Ok(vec![Some(g.clone())]));
        record("CloneBackward", out, &[Some(self)], Vec::new, f, false)
    }
}

impl Var {
    /// `F.margin_ranking_loss` ([`Tensor::margin_ranking_loss`]), recorded
    /// as PyTorch's composition (every operand differentiable).
    pub fn margin_ranking_loss(
        &self,
        x2: &Var,
        target: &Var,
        margin: f64,
        reduction: Reduction,
    ) -> Result<Var> {
        margin_losses::margin_ranking_loss(self, x2, target, margin, reduction)
    }

    /// `F.hinge_embedding_loss` ([`Tensor::hinge_embedding_loss`]).
    pub fn hinge_embedding_loss(
        &self,
        target: &Tensor,
        margin: f64,
        reduction: Reduction,
    ) -> Result<Var> {
        margin_losses::hinge_embedding_loss(self, target, margin, reduction)
    }

    /// `F.soft_margin_loss` ([`Tensor::soft_margin_loss`]); the target
    /// takes no gradient, as in PyTorch.
    pub fn soft_margin_loss(&self, target: &Tensor, reduction: Reduction) -> Result<Var> {
        margin_losses::soft_margin_loss(self, target, reduction)
    }

    /// `F.cosine_embedding_loss` ([`Tensor::cosine_embedding_loss`]).
    pub fn cosine_embedding_loss(
        &self,
        x2: &Var,
        target: &Tensor,
        margin: f64,
        reduction: Reduction,
    ) -> Result<Var> {
        margin_losses::cosine_embedding_loss(self, x2, target, margin, reduction)
    }

    /// `F.triplet_margin_loss` ([`Tensor::triplet_margin_loss`]).
    #[allow(clippy::too_many_arguments)]
    pub fn triplet_margin_loss(
        &self,
        positive: &Var,
        negative: &Var,
        margin: f64,
        p: f64,
        eps: f64,
        swap: bool,
        reduction: Reduction,
    ) -> Result<Var> {
        margin_losses::triplet_margin_loss(
            self, positive, negative, margin, p, eps, swap, reduction,
        )
    }

    /// `F.multilabel_soft_margin_loss`
    /// ([`Tensor::multilabel_soft_margin_loss`]); the weight takes no
    /// gradient.
    pub fn multilabel_soft_margin_loss(
        &self,
        target: &Var,
        weight: Option<&Tensor>,
        reduction: Reduction,
    ) -> Result<Var> {
        margin_losses::multilabel_soft_margin_loss(self, target, weight, reduction)
    }

    /// `F.poisson_nll_loss` ([`Tensor::poisson_nll_loss`]).
    pub fn poisson_nll_loss(
        &self,
        target: &Var,
        log_input: bool,
        full: bool,
        eps: f64,
        reduction: Reduction,
    ) -> Result<Var> {
        likelihood_losses::poisson_nll_loss(self, target, log_input, full, eps, reduction)
    }

    /// `F.gaussian_nll_loss` ([`Tensor::gaussian_nll_loss`]); the variance's
    /// clamp at `eps` passes its gradient unchanged, as PyTorch's `no_grad`
    /// clamp does.
    pub fn gaussian_nll_loss(
        &self,
        target: &Var,
        var: GaussianVar<'_, Var>,
        full: bool,
        eps: f64,
        reduction: Reduction,
    ) -> Result<Var> {
        likelihood_losses::gaussian_nll_loss(self, target, var, full, eps, reduction)
    }
}
