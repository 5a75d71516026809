//! Session 74: `l1_loss`, `smooth_l1_loss`, `huber_loss`,
//! `binary_cross_entropy` and `binary_cross_entropy_with_logits` on
//! variables (the forward is `Tensor`'s), with the gradients of PyTorch's
//! backward kernels for the input and the target: `l1_loss` is recorded as
//! `(x - y).abs()` and its reduction, as PyTorch records it; the others save
//! both operands (and the weights) and compute both gradients in one node.

use super::{formula, sum_to};
use crate::error::Result;
use crate::var::{record, Var};
use strata_tensor::{Reduction, Tensor};

/// `1 / n` for a mean over `n` elements, else 1 (the `norm` of PyTorch's
/// smooth L1 and Huber backward kernels).
fn norm(reduction: Reduction, n: usize) -> f64 {
    if reduction == Reduction::Mean {
        1.0 / n as f64
    } else {
        1.0
    }
}

/// The gradient after PyTorch's last step for a mean: divided by the
/// number of elements.
fn mean_div(g: Tensor, reduction: Reduction) -> strata_tensor::Result<Tensor> {
    if reduction == Reduction::Mean {
        let n = g.numel() as f64;
        g.div(n)
    } else {
        Ok(g)
    }
}

/// Which of the two-operand formulas a node runs.
#[derive(Clone, Copy)]
enum Loss {
    SmoothL1(f64),
    Huber(f64),
    Bce,
    BceWithLogits,
}

impl Var {
    /// `F.l1_loss` (recorded as `(self - target).abs()` and its reduction).
    pub fn l1_loss(&self, target: &Var, reduction: Reduction) -> Result<Var> {
        self.data().l1_loss(target.data(), reduction)?;
        let per = self.sub(target)?.abs()?;
        match reduction {
            Reduction::None => Ok(per),
            Reduction::Mean => per.mean(None, false),
            Reduction::Sum => per.sum(None, false),
        }
    }

    /// `F.smooth_l1_loss` ([`Tensor::smooth_l1_loss`]); the input's gradient
    /// is `-n g` where `x - y <= -beta`, `n g` where it is `>= beta`, else
    /// `n (x - y) g / beta` (`n` is `1 / numel` for a mean), the target's
    /// its negation. A `beta` of 0 is [`Var::l1_loss`].
    pub fn smooth_l1_loss(&self, target: &Var, reduction: Reduction, beta: f64) -> Result<Var> {
        if beta == 0.0 {
            return self.l1_loss(target, reduction);
        }
        let out = self.data().smooth_l1_loss(target.data(), reduction, beta)?;
        self.record_loss(
            "SmoothL1LossBackward",
            out,
            target,
            Loss::SmoothL1(beta),
            reduction,
            [None, None],
        )
    }

    /// `F.huber_loss` ([`Tensor::huber_loss`]); the input's gradient is
    /// `-n g delta` where `x - y <= -delta`, `n g delta` where it is
    /// `>= delta`, else `n (x - y) g`, the target's its negation.
    pub fn huber_loss(&self, target: &Var, reduction: Reduction, delta: f64) -> Result<Var> {
        let out = self.data().huber_loss(target.data(), reduction, delta)?;
        self.record_loss(
            "HuberLossBackward",
            out,
            target,
            Loss::Huber(delta),
            reduction,
            [None, None],
        )
    }

    /// `F.binary_cross_entropy` ([`Tensor::binary_cross_entropy`]); the
    /// input's gradient is `g (x - y) / max((1 - x) x, 1e-12)`, the target's
    /// `-logit(x) g`, each times the weight and divided by `numel` for a
    /// mean (PyTorch's kernels). The weight gets no gradient.
    pub fn binary_cross_entropy(
        &self,
        target: &Var,
        weight: Option<&Tensor>,
        reduction: Reduction,
    ) -> Result<Var> {
        let out = self
            .data()
            .binary_cross_entropy(target.data(), weight, reduction)?;
        let weight = weight.map(|w| w.broadcast_to(target.shape())).transpose()?;
        self.record_loss(
            "BinaryCrossEntropyBackward",
            out,
            target,
            Loss::Bce,
            reduction,
            [weight, None],
        )
    }

    /// `F.binary_cross_entropy_with_logits`
    /// ([`Tensor::binary_cross_entropy_with_logits`]); the input's gradient
    /// is `(sigmoid(x) - y) g` (with a pos_weight `p`: `((p y + 1 - y)
    /// sigmoid(x) - p y) g`), the target's `-x g` (with `p`:
    /// `(log_sigmoid(-x) - p log_sigmoid(x)) g`), each times the weight and
    /// divided by `numel` for a mean. The weights get no gradient.
    pub fn binary_cross_entropy_with_logits(
        &self,
        target: &Var,
        weight: Option<&Tensor>,
        pos_weight: Option<&Tensor>,
        reduction: Reduction,
    ) -> Result<Var> {
        let out = self.data().binary_cross_entropy_with_logits(
            target.data(),
            weight,
            pos_weight,
            reduction,
        )?;
        self.record_loss(
            "BinaryCrossEntropyWithLogitsBackward",
            out,
            target,
            Loss::BceWithLogits,
            reduction,
            [weight.cloned(), pos_weight.cloned()],
        )
    }

    /// Records a two-operand loss node; `weights` are the weight and the
    /// pos_weight where the loss takes them (saved after the operands, each
    /// only when given).
    fn record_loss(
        &self,
        name: &'static str,
        out: Tensor,
        target: &Var,
        loss: Loss,
        reduction: Reduction,
        weights: [Option<Tensor>; 2],
    ) -> Result<Var> {
        let (x, y) = (self.data().clone(), target.data().clone());
        let (xs, xd) = (self.shape().to_vec(), self.dtype());
        let (ys, yd) = (target.shape().to_vec(), target.dtype());
        let has_w = weights[0].is_some();
        let has_pw = weights[1].is_some();
        let saved = move || {
            let mut v = vec![x, y];
            v.extend(weights.into_iter().flatten());
            v
        };
        let f = formula(move |g, s, needs| {
            let (x, y) = (&s[0], &s[1]);
            let w = has_w.then(|| &s[2]);
            let pw = has_pw.then(|| &s[2 + usize::from(has_w)]);
            let shape = strata_tensor::shape::broadcast_shapes(name, x.shape(), y.shape())?;
            let g = g.broadcast_to(&shape)?;
            let (gx, gy) = match loss {
                Loss::SmoothL1(beta) | Loss::Huber(beta) => {
                    let n = norm(reduction, g.numel());
                    let d = x.sub(y)?;
                    let ng = g.mul(n)?;
                    let (lo, hi, mid) = match loss {
                        Loss::SmoothL1(_) => {
                            (g.mul(-n)?, ng.clone(), d.mul(n)?.mul(&g)?.div(beta)?)
                        }
                        _ => (g.mul(-n)?.mul(beta)?, ng.mul(beta)?, d.mul(n)?.mul(&g)?),
                    };
                    let upper = Tensor::where_cond(&d.ge(beta)?, &hi, &mid)?;
                    let gx = Tensor::where_cond(&d.le(-beta)?, &lo, &upper)?;
                    let gy = gx.neg()?;
                    (gx, gy)
                }
                Loss::Bce => {
                    // PyTorch's EPSILON is the f32 1e-12, for f64 too.
                    let eps = f64::from(1e-12f32);
                    let denom = x.neg()?.add(1.0)?.mul(x)?.clamp(Some(eps), None::<f64>)?;
                    let mut gx = g.mul(&x.sub(y)?)?.div(&denom)?;
                    let logit = x.div(&x.neg()?.add(1.0)?)?.log()?;
                    let mut gy = logit.neg()?.mul(&g)?;
                    if let Some(w) = w {
                        gx = gx.mul(w)?;
                        gy = gy.mul(w)?;
                    }
                    (mean_div(gx, reduction)?, mean_div(gy, reduction)?)
                }
                Loss::BceWithLogits => {
                    let (mut gx, mut gy) = match pw {
                        Some(p) => {
                            let t = p.mul(y)?;
                            let gx = t.add(1.0)?.sub(y)?.mul(&x.sigmoid()?)?.sub(&t)?;
                            let gy = x.neg()?.logsigmoid()?.sub(&x.logsigmoid()?.mul(p)?)?;
                            (gx, gy)
                        }
                        None => (x.sigmoid()?.sub(y)?, x.neg()?),
                    };
                    gx = gx.mul(&g)?;
                    gy = gy.mul(&g)?;
                    if let Some(w) = w {
                        gx = gx.mul(w)?;
                        gy = gy.mul(w)?;
                    }
                    (mean_div(gx, reduction)?, mean_div(gy, reduction)?)
                }
            };
            let gx = if needs[0] {
                Some(sum_to(&gx, &xs, xd)?)
            } else {
                None
            };
            let gy = if needs[1] {
                Some(sum_to(&gy, &ys, yd)?)
            } else {
                None
            };
            Ok(vec![gx, gy])
        });
        record(name, out, &[Some(self), Some(target)], saved, f, false)
    }
}

impl Var {
    /// `F.kl_div` ([`Tensor::kl_div`]), recorded as its composition (as
    /// PyTorch records it): the gradient of `self` is `-target / n`, or
    /// `-e^target / n` with `log_target` (`n`: the mean's count, else 1).
    pub fn kl_div(&self, target: &Var, reduction: Reduction, log_target: bool) -> Result<Var> {
        let loss = if log_target {
            target.exp()?.mul(&target.sub(self)?)?
        } else {
            let t = target.data();
            let zero = t.eq(0)?;
            let tlogt = target.mul(&target.log()?)?;
            Var::where_cond(&zero, &Var::new(t.zeros_like(None)?), &tlogt)?
                .sub(&target.mul(self)?)?
        };
        match reduction {
            Reduction::None => Ok(loss),
            Reduction::Mean => loss.mean(None, false),
            Reduction::Sum => loss.sum(None, false),
        }
    }

    /// `F.kl_div(..., reduction="batchmean")` ([`Tensor::kl_div_batchmean`]).
    pub fn kl_div_batchmean(&self, target: &Var, log_target: bool) -> Result<Var> {
        let sum = self.kl_div(target, Reduction::Sum, log_target)?;
        match self.shape().first() {
            Some(&n) => sum.div(n as f64),
            None => Ok(sum),
        }
    }

    /// `F.normalize(self, p, dim, eps)`: `self / max(||self||_p, eps)`
    /// along `dim`, recorded as the norm, its clamp and the division (the
    /// gradient through the norm stops where it was clamped).
    pub fn normalize(&self, p: f64, dim: i64, eps: f64) -> Result<Var> {
        let denom = self.norm(p, Some(&[dim]), true)?.clamp_min(eps)?;
        self.div(&denom)
    }
}
