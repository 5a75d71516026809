//! Fused optimizer updates: one pass over a parameter, its gradient and its
//! state, instead of a dozen element-wise ops each reading and writing whole
//! tensors (what an optimizer composed from tensor ops costs).

use crate::backend::Backend;
use crate::error::{Result, TensorError};
use crate::storage::WriteGuard;
use crate::tensor::Tensor;

/// The hyper-parameters of one fused Adam / AdamW step ([`Tensor::adam_step_`]),
/// with PyTorch's meanings.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdamHyper {
    /// Learning rate (`>= 0`).
    pub lr: f64,
    /// Decay of the first moment, in `[0, 1)`.
    pub beta1: f64,
    /// Decay of the second moment, in `[0, 1)`.
    pub beta2: f64,
    /// Added to the denominator (`>= 0`).
    pub eps: f64,
    /// Decoupled weight decay (AdamW: `p *= 1 - lr * weight_decay` before the
    /// update; `0` for Adam), `>= 0`.
    pub weight_decay: f64,
    /// The step being taken, `>= 1` (the bias corrections are `1 - beta^step`).
    pub step: i32,
}

impl AdamHyper {
    /// Checks every field, naming the first one out of range.
    fn check(&self) -> Result<()> {
        let bad = |what: &str, v: f64, rule: &str| {
            Err(TensorError::value(
                "adam_step_",
                format!("{what} = {v} is out of range: it must be {rule}"),
            ))
        };
        if !(self.lr >= 0.0 && self.lr.is_finite()) {
            return bad("lr", self.lr, "finite and >= 0");
        }
        if !(0.0..1.0).contains(&self.beta1) {
            return bad("beta1", self.beta1, "in [0, 1)");
        }
        if !(0.0..1.0).contains(&self.beta2) {
            return bad("beta2", self.beta2, "in [0, 1)");
        }
        if !(self.eps >= 0.0 && self.eps.is_finite()) {
            return bad("eps", self.eps, "finite and >= 0");
        }
        if !(self.weight_decay >= 0.0 && self.weight_decay.is_finite()) {
            return bad("weight_decay", self.weight_decay, "finite and >= 0");
        }
        if self.step < 1 {
            return bad("step", f64::from(self.step), ">= 1");
        }
        Ok(())
    }

    /// `(1 - lr * weight_decay, lr / (1 - beta1^t), sqrt(1 - beta2^t))`.
    pub(crate) fn factors(&self) -> (f64, f64, f64) {
        let c1 = 1.0 - self.beta1.powi(self.step);
        let c2 = 1.0 - self.beta2.powi(self.step);
        (1.0 - self.lr * self.weight_decay, self.lr / c1, c2.sqrt())
    }
}

impl Tensor {
    /// One Adam / AdamW step on the parameter `self`, in place and fused: with
    /// the gradient `grad` and the moment estimates `exp_avg`, `exp_avg_sq`
    /// (updated in place), as PyTorch's `Adam` / `AdamW` compute it:
    ///
    /// ```text
    /// p  *= 1 - lr * weight_decay              (AdamW's decoupled decay)
    /// m   = m + (1 - beta1) (g - m)
    /// v   = beta2 v + (1 - beta2) g²
    /// p  -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
    /// ```
    ///
    /// All four tensors have one shape and one device; `self` and the moments
    /// one float dtype, `grad` the same; four distinct storages. f16 and bf16
    /// are computed in f32 and rounded once. Contiguous operands take one
    /// kernel; others are updated by the same formula op by op.
    ///
    /// ```
    /// use strata_tensor::{AdamHyper, Device, Tensor};
    /// let p = Tensor::from_vec(vec![1.0f32, -2.0], &[2], Device::Cpu).unwrap();
    /// let g = Tensor::from_vec(vec![0.5f32, 0.5], &[2], Device::Cpu).unwrap();
    /// let m = p.zeros_like(None).unwrap();
    /// let v = p.zeros_like(None).unwrap();
    /// let h = AdamHyper { lr: 0.1, beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: 0.0, step: 1 };
    /// p.adam_step_(&g, &m, &v, h).unwrap();
    /// // The first step moves each weight by lr against its gradient's sign.
    /// let out = p.to_vec::<f32>().unwrap();
    /// assert!((out[0] - 0.9).abs() < 1e-6 && (out[1] + 2.1).abs() < 1e-6);
    /// ```
    pub fn adam_step_(
        &self,
        grad: &Tensor,
        exp_avg: &Tensor,
        exp_avg_sq: &Tensor,
        h: AdamHyper,
    ) -> Result<()> {
        const OP: &str = "adam_step_";
        h.check()?;
        let d = self.dtype();
        if !d.is_float() {
            return Err(TensorError::dtype(
                OP,
                format!("the parameter must be a float tensor, not {d}"),
            ));
        }
        let named = [
            ("grad", grad),
            ("exp_avg", exp_avg),
            ("exp_avg_sq", exp_avg_sq),
        ];
        for (name, t) in named {
            if t.dtype() != d {
                return Err(TensorError::dtype(
                    OP,
                    format!(
                        "{name} is {} but the parameter is {d}: convert it first",
                        t.dtype()
                    ),
                ));
            }
            if t.shape() != self.shape() {
                return Err(TensorError::shape(
                    OP,
                    format!(
                        "{name} has shape {:?} but the parameter has {:?}",
                        t.shape(),
                        self.shape()
                    ),
                ));
            }
            crate::ops::elementwise::same_device(OP, self, t)?;
        }
        let all = [self, grad, exp_avg, exp_avg_sq];
        for i in 0..all.len() {
            for j in i + 1..all.len() {
                if all[i].same_storage(all[j]) {
                    return Err(TensorError::overlap(
                        OP,
                        "the parameter, gradient and moments must be four distinct storages",
                    ));
                }
            }
        }
        // The three outputs are written element by element: one whose
        // elements share memory (an expanded tensor) cannot hold the update.
        // Checked before anything is written, so that an error leaves the
        // parameter and both moments unchanged.
        let outputs = [
            ("the parameter", self),
            ("exp_avg", exp_avg),
            ("exp_avg_sq", exp_avg_sq),
        ];
        for (name, t) in outputs {
            if t.layout().may_overlap() {
                return Err(TensorError::overlap(
                    OP,
                    format!(
                        "{name} (shape {:?}, strides {:?}) has elements that share memory; clone it first",
                        t.shape(),
                        t.strides()
                    ),
                ));
            }
        }
        if self.numel() == 0 {
            return Ok(());
        }
        if all.iter().all(|t| t.is_contiguous()) {
            let be: &dyn Backend = self.backend()?;
            {
                let _g = WriteGuard::lock(
                    &[self.storage(), exp_avg.storage(), exp_avg_sq.storage()],
                    &[grad.storage()],
                );
                be.adam_step(
                    &self.arg(),
                    &grad.arg(),
                    &exp_avg.arg(),
                    &exp_avg_sq.arg(),
                    self.numel(),
                    &h,
                )?;
            }
            for t in [self, exp_avg, exp_avg_sq] {
                t.bump_version();
            }
            return Ok(());
        }
        // Strided operands: the same formula, op by op.
        let (decay, step_size, c2_sqrt) = h.factors();
        if h.weight_decay != 0.0 {
            self.mul_(decay)?;
        }
        exp_avg.mul_(h.beta1)?.add_(&grad.mul(1.0 - h.beta1)?)?;
        exp_avg_sq
            .mul_(h.beta2)?
            .addcmul_(grad, grad, 1.0 - h.beta2)?;
        let denom = exp_avg_sq.sqrt()?.div_(c2_sqrt)?.add_(h.eps)?;
        self.sub_(&exp_avg.div(&denom)?.mul_(step_size)?)?;
        Ok(())
    }
}
