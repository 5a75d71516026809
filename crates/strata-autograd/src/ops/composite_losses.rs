//! Session 78: the margin, embedding and likelihood losses on variables.
//! Each is written once in strata-tensor (`margin_losses`,
//! `likelihood_losses`) over `Composite` (implemented for `Var` in
//! `ops::composite`), so
//! the recorded form is PyTorch's composition, step for step, and its
//! gradients are those of PyTorch's autograd through that composition.

use crate::error::Result;
use crate::var::Var;
use strata_tensor::{likelihood_losses, margin_losses, GaussianVar, Reduction, Tensor};

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
