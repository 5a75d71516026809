//! The losses of `torch.nn.functional` that are an element-wise formula
//! and a reduction: `l1_loss`, `smooth_l1_loss`, `huber_loss`,
//! `binary_cross_entropy` and `binary_cross_entropy_with_logits` (`mse_loss`
//! is in `ops::nn`). Each composes the element-wise ops as PyTorch 2.15's
//! CPU implementation does, so its checks, result dtype and rounding are
//! PyTorch's: `l1_loss` is `(x - y).abs()` reduced; smooth L1 and Huber
//! compute in the promoted dtype (Huber writes self's dtype); binary cross
//! entropy takes one dtype and values in [0, 1]; its logits form is
//! `(1 - y) x - w_pos log_sigmoid(x)` in the target's dtype.

use crate::error::{Result, TensorError};
use crate::ops::nn::Reduction;
use crate::shape::broadcast_shapes;
use crate::tensor::Tensor;

/// PyTorch's `apply_loss_reduction`: the losses, their mean or their sum.
fn reduce(loss: Tensor, reduction: Reduction) -> Result<Tensor> {
    match reduction {
        Reduction::None => Ok(loss),
        Reduction::Mean => loss.mean(None, false),
        Reduction::Sum => loss.sum(None, false),
    }
}

fn same_shape(op: &'static str, x: &Tensor, y: &Tensor, what: &str) -> Result<()> {
    if x.shape() == y.shape() {
        Ok(())
    } else {
        Err(TensorError::shape(
            op,
            format!(
                "the target's shape {:?} must be the input's {:?} ({what}); reshape or expand the target first",
                y.shape(),
                x.shape()
            ),
        ))
    }
}

impl Tensor {
    /// `F.l1_loss(self, target, reduction)`: `|x - y|`, broadcasting (and
    /// promoting as broadcast operands, a 0-d one as any other), then reduced
    /// (the mean of integer losses is an error, as in PyTorch).
    pub fn l1_loss(&self, target: &Tensor, reduction: Reduction) -> Result<Tensor> {
        // F.l1_loss broadcasts the operands first, so a 0-d one promotes as
        // a dimensioned one (f16 [5] with an f32 0-d target: f32).
        let shape = broadcast_shapes("l1_loss", self.shape(), target.shape())?;
        let (x, y) = (self.broadcast_to(&shape)?, target.broadcast_to(&shape)?);
        reduce(x.sub(&y)?.abs()?, reduction)
    }

    /// `F.smooth_l1_loss(self, target, reduction, beta)`: with `z = |x - y|`,
    /// `0.5 z² / beta` where `z < beta`, else `z - 0.5 beta`; broadcasting,
    /// in the promoted dtype, each step rounded to it as PyTorch's kernel
    /// rounds it (f16 too; two integer operands are an error). A `beta`
    /// of 0 is [`Tensor::l1_loss`]; a negative one is an error.
    pub fn smooth_l1_loss(
        &self,
        target: &Tensor,
        reduction: Reduction,
        beta: f64,
    ) -> Result<Tensor> {
        const OP: &str = "smooth_l1_loss";
        // A NaN beta is refused too, as PyTorch's `beta >= 0` check refuses it.
        if beta.is_nan() || beta < 0.0 {
            return Err(TensorError::value(
                OP,
                format!("beta must not be negative, got {beta}"),
            ));
        }
        if beta == 0.0 {
            return self.l1_loss(target, reduction);
        }
        let d = self.dtype().promote(target.dtype());
        if !d.is_float() {
            return Err(TensorError::unsupported(OP, d));
        }
        broadcast_shapes(OP, self.shape(), target.shape())?;
        // In the promoted dtype, f16/bf16 included, in PyTorch's order
        // (`0.5 * z * z / beta`: 0.5 z first, which overflows f16 later).
        let z = self.to_dtype(d)?.sub(&target.to_dtype(d)?)?.abs()?;
        let small = z.mul(0.5)?.mul(&z)?.div(beta)?;
        let large = z.sub(0.5 * beta)?;
        reduce(Tensor::where_cond(&z.lt(beta)?, &small, &large)?, reduction)
    }

    /// `F.huber_loss(self, target, reduction, delta)`: with `z = |x - y|`,
    /// `0.5 z²` where `z < delta`, else `delta (z - 0.5 delta)`;
    /// broadcasting, computed in the promoted dtype and written in self's
    /// (an integer self with a float target is an error, as in PyTorch). A
    /// `delta` that is not positive is an error.
    pub fn huber_loss(&self, target: &Tensor, reduction: Reduction, delta: f64) -> Result<Tensor> {
        const OP: &str = "huber_loss";
        if delta.is_nan() || delta <= 0.0 {
            return Err(TensorError::value(
                OP,
                format!("delta must be positive, got {delta}"),
            ));
        }
        let d = self.dtype().promote(target.dtype());
        if !d.is_float() {
            return Err(TensorError::unsupported(OP, d));
        }
        if !d.can_cast_to(self.dtype()) {
            return Err(TensorError::dtype(
                OP,
                format!(
                    "the loss, computed in {d}, cannot be written in the input's dtype {}",
                    self.dtype()
                ),
            ));
        }
        broadcast_shapes(OP, self.shape(), target.shape())?;
        let z = self.to_dtype(d)?.sub(&target.to_dtype(d)?)?.abs()?;
        let small = z.mul(0.5)?.mul(&z)?;
        let large = z.sub(0.5 * delta)?.mul(delta)?;
        let loss = Tensor::where_cond(&z.lt(delta)?, &small, &large)?.to_dtype(self.dtype())?;
        reduce(loss, reduction)
    }

    /// `F.binary_cross_entropy(self, target, weight, reduction)`:
    /// `-w (y ln x + (1 - y) ln(1 - x))`, each log clamped at -100, for
    /// probabilities `self`. The target must have self's shape and both one
    /// float dtype; every element of self and of the target must lie in
    /// [0, 1] (NaN does not);
    /// the weight broadcasts to the target's shape.
    pub fn binary_cross_entropy(
        &self,
        target: &Tensor,
        weight: Option<&Tensor>,
        reduction: Reduction,
    ) -> Result<Tensor> {
        const OP: &str = "binary_cross_entropy";
        same_shape(OP, self, target, "binary_cross_entropy does not broadcast")?;
        let weight = weight.map(|w| w.broadcast_to(target.shape())).transpose()?;
        if target.dtype() != self.dtype() {
            return Err(TensorError::dtype(
                OP,
                format!(
                    "the target's dtype {} must be the input's {}",
                    target.dtype(),
                    self.dtype()
                ),
            ));
        }
        if !self.dtype().is_float() {
            return Err(TensorError::unsupported(OP, self.dtype()));
        }
        let outside = self.ge(0)?.logical_and(&self.le(1)?)?.logical_not()?;
        if outside.any()?.to_vec::<bool>()?[0] {
            return Err(TensorError::value(
                OP,
                "all elements of input should be between 0 and 1",
            ));
        }
        let outside = target.ge(0)?.logical_and(&target.le(1)?)?.logical_not()?;
        if outside.any()?.to_vec::<bool>()?[0] {
            return Err(TensorError::value(
                OP,
                "all elements of target should be between 0 and 1",
            ));
        }
        let log_x = self.log()?.clamp(Some(-100.0), None::<f64>)?;
        let log_1mx = self.neg()?.log1p()?.clamp(Some(-100.0), None::<f64>)?;
        let loss = target.sub(1)?.mul(&log_1mx)?.sub(&target.mul(&log_x)?)?;
        // In place, as PyTorch's `loss.mul_(weight)`: the loss keeps its dtype.
        let loss = match weight {
            Some(w) => loss.mul_(&w)?,
            None => loss,
        };
        reduce(loss, reduction)
    }

    /// `F.binary_cross_entropy_with_logits(self, target, weight, pos_weight,
    /// reduction)`: `(1 - y) x - p log_sigmoid(x)` with
    /// `p = 1 + (pos_weight - 1) y` (1 without a pos_weight), times the
    /// weight, for logits `self`.
    /// The target must have self's shape; the loss has the target's dtype
    /// (PyTorch computes it in place on `1 - target`), so an integer target
    /// is an error; weight and pos_weight broadcast.
    pub fn binary_cross_entropy_with_logits(
        &self,
        target: &Tensor,
        weight: Option<&Tensor>,
        pos_weight: Option<&Tensor>,
        reduction: Reduction,
    ) -> Result<Tensor> {
        const OP: &str = "binary_cross_entropy_with_logits";
        same_shape(OP, self, target, "the logits and the target must match")?;
        let mut log_sig = self.logsigmoid()?;
        if let Some(pw) = pos_weight {
            let log_weight = pw.sub(1)?.mul(target)?.add(1)?;
            log_sig = log_sig.mul_(&log_weight)?;
        }
        // `1 - target`, then in place: an integer target cannot take the
        // float product (an error, as in PyTorch), a bool one no subtraction.
        let mut loss = target.neg()?.add(1)?;
        loss = loss.mul_(self)?.sub_(&log_sig)?;
        if let Some(w) = weight {
            loss = loss.mul_(w)?;
        }
        reduce(loss, reduction)
    }

    /// `F.kl_div(self, target, reduction, log_target)` for log-probabilities
    /// `self`: `target (ln target - self)` (`xlogy(t, t) - t x`, 0 where the
    /// target is 0), or with `log_target` `e^target (target - self)`, then
    /// reduced; [`Reduction::Mean`] is the mean over every element, as
    /// PyTorch's `"mean"` (its `"batchmean"` is the sum divided by the batch
    /// size: [`Tensor::kl_div_batchmean`]).
    pub fn kl_div(
        &self,
        target: &Tensor,
        reduction: Reduction,
        log_target: bool,
    ) -> Result<Tensor> {
        let loss = if log_target {
            target.exp()?.mul(&target.sub(self)?)?
        } else {
            let xlogy = Tensor::where_cond(&target.eq(0)?, 0.0, &target.mul(&target.log()?)?)?;
            xlogy.sub(&target.mul(self)?)?
        };
        reduce(loss, reduction)
    }

    /// `F.kl_div(self, target, reduction="batchmean", log_target)`: the
    /// summed loss divided by the size of self's first dim (of a 0-d self:
    /// the sum itself, as PyTorch divides by 1 there).
    pub fn kl_div_batchmean(&self, target: &Tensor, log_target: bool) -> Result<Tensor> {
        let sum = self.kl_div(target, Reduction::Sum, log_target)?;
        match self.shape().first() {
            Some(&n) => sum.div(n as f64),
            None => Ok(sum),
        }
    }

    /// `F.normalize(self, p, dim, eps)`: `self / max(||self||_p, eps)`, the
    /// p-norm taken along `dim` (PyTorch's defaults: 2, 1 and 1e-12).
    pub fn normalize(&self, p: f64, dim: i64, eps: f64) -> Result<Tensor> {
        let denom = self
            .vector_norm(p, Some(&[dim]), true)?
            .clamp(Some(eps), None::<f64>)?;
        self.div(&denom)
    }
}
