//! Fused optimizer updates: one pass over a parameter, its gradient and its
//! state, instead of a dozen element-wise ops each reading and writing whole
//! tensors (what an optimizer composed from tensor ops costs).

use crate::backend::{Arg, Backend};
use crate::error::{Result, TensorError};
use crate::storage::WriteGuard;
use crate::tensor::Tensor;

/// The hyper-parameters of one fused Adam / AdamW step ([`Tensor::adam_step_`]),
/// with PyTorch's meanings.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdamHyper {
    /// Learning rate (`>= 0`; +inf is accepted, as PyTorch).
    pub lr: f64,
    /// Decay of the first moment, in `[0, 1)`.
    pub beta1: f64,
    /// Decay of the second moment, in `[0, 1)`.
    pub beta2: f64,
    /// Added to the denominator (`>= 0`, +inf included).
    pub eps: f64,
    /// Decoupled weight decay (AdamW: `p *= 1 - lr * weight_decay` before the
    /// update; `0` for Adam), `>= 0` (+inf included).
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
        // PyTorch's checks (`0.0 <= lr`, `0.0 <= eps`, `0.0 <= weight_decay`):
        // NaN fails them, +inf passes (an lr of inf moves each weight to
        // ±inf, or NaN where its update is 0, as PyTorch's step does).
        if self.lr.is_nan() || self.lr < 0.0 {
            return bad("lr", self.lr, ">= 0 (+inf included), not NaN");
        }
        if !(0.0..1.0).contains(&self.beta1) {
            return bad("beta1", self.beta1, "in [0, 1)");
        }
        if !(0.0..1.0).contains(&self.beta2) {
            return bad("beta2", self.beta2, "in [0, 1)");
        }
        if self.eps.is_nan() || self.eps < 0.0 {
            return bad("eps", self.eps, ">= 0 (+inf included), not NaN");
        }
        if self.weight_decay.is_nan() || self.weight_decay < 0.0 {
            return bad(
                "weight_decay",
                self.weight_decay,
                ">= 0 (+inf included), not NaN",
            );
        }
        if self.step < 1 {
            return bad("step", f64::from(self.step), ">= 1");
        }
        Ok(())
    }

    /// `(1 - lr * weight_decay, lr / (1 - beta1^t), sqrt(1 - beta2^t))`.
    pub(crate) fn factors(&self) -> (f64, f64, f64) {
        // `powf`, C's `pow` as PyTorch's `std::pow(beta1, step)` (`powi`
        // multiplies and can differ from it in the last place).
        let c1 = 1.0 - self.beta1.powf(f64::from(self.step));
        let c2 = 1.0 - self.beta2.powf(f64::from(self.step));
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
    /// kernel; others take the same kernel on contiguous copies (made before
    /// anything is written), copied back: the result does not depend on the
    /// layout.
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
        h.check()?;
        self.adam_check(grad, exp_avg, exp_avg_sq)?;
        self.adam_apply(grad, exp_avg, exp_avg_sq, &h)
    }

    /// Every check of [`Tensor::adam_step_`] on one parameter's operands.
    fn adam_check(&self, grad: &Tensor, exp_avg: &Tensor, exp_avg_sq: &Tensor) -> Result<()> {
        const OP: &str = "adam_step_";
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
        Ok(())
    }

    /// One Adam / AdamW step on each of `params`, with the same
    /// hyper-parameters: the same result as [`Tensor::adam_step_`] on
    /// `(params[i], grads[i], exp_avgs[i], exp_avg_sqs[i])` for every `i` in
    /// order (PyTorch's fused `_fused_adam_` over tensor lists). Every item is
    /// checked as `adam_step_` checks it before anything is written, so an
    /// error leaves every parameter and moment unchanged.
    ///
    /// On a GPU, contiguous items of one dtype whose written tensors overlap
    /// no other item's tensors are updated by a few launches of one kernel
    /// (up to 64 tensors each) instead of one launch per parameter: a model's
    /// many small parameters (biases, norms) then cost no launch of their own.
    /// The gradients may share storage (views into a bucket, for instance).
    /// Anything else is updated item by item.
    ///
    /// ```
    /// use strata_tensor::{AdamHyper, DType, Device, Tensor};
    /// let ones = |n| Tensor::ones(&[n], DType::F32, Device::Cpu);
    /// let p = [ones(3)?, ones(2)?];
    /// let g = [p[0].mul(0.5)?, p[1].mul(-0.5)?];
    /// let m = [p[0].zeros_like(None)?, p[1].zeros_like(None)?];
    /// let v = [p[0].zeros_like(None)?, p[1].zeros_like(None)?];
    /// let h = AdamHyper { lr: 0.1, beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: 0.0, step: 1 };
    /// Tensor::adam_step_list_(&p, &g, &m, &v, h)?;
    /// // The first step moves each weight by lr against its gradient's sign.
    /// assert!((p[0].to_vec::<f32>()?[0] - 0.9).abs() < 1e-6);
    /// assert!((p[1].to_vec::<f32>()?[1] - 1.1).abs() < 1e-6);
    /// # Ok::<(), strata_tensor::TensorError>(())
    /// ```
    pub fn adam_step_list_(
        params: &[Tensor],
        grads: &[Tensor],
        exp_avgs: &[Tensor],
        exp_avg_sqs: &[Tensor],
        h: AdamHyper,
    ) -> Result<()> {
        const OP: &str = "adam_step_list_";
        let n = params.len();
        if grads.len() != n || exp_avgs.len() != n || exp_avg_sqs.len() != n {
            return Err(TensorError::value(
                OP,
                format!(
                    "the lists must have one length: {n} parameters, {} gradients, {} exp_avgs, {} exp_avg_sqs",
                    grads.len(),
                    exp_avgs.len(),
                    exp_avg_sqs.len()
                ),
            ));
        }
        h.check()?;
        for i in 0..n {
            params[i].adam_check(&grads[i], &exp_avgs[i], &exp_avg_sqs[i])?;
        }
        let live: Vec<usize> = (0..n).filter(|&i| params[i].numel() > 0).collect();
        let Some(&first) = live.first() else {
            return Ok(());
        };
        let (dtype, device) = (params[first].dtype(), params[first].device());
        let fused = live.len() > 1
            && live.iter().all(|&i| {
                let p = &params[i];
                p.dtype() == dtype
                    && p.device() == device
                    && [p, &grads[i], &exp_avgs[i], &exp_avg_sqs[i]]
                        .iter()
                        .all(|t| t.is_contiguous())
            })
            && !items_overlap(&live, params, grads, exp_avgs, exp_avg_sqs);
        if !fused {
            for i in 0..n {
                params[i].adam_apply(&grads[i], &exp_avgs[i], &exp_avg_sqs[i], &h)?;
            }
            return Ok(());
        }
        let be: &dyn Backend = params[first].backend()?;
        {
            let mut writes = Vec::with_capacity(3 * live.len());
            let mut reads = Vec::with_capacity(live.len());
            for &i in &live {
                writes.extend([
                    params[i].storage(),
                    exp_avgs[i].storage(),
                    exp_avg_sqs[i].storage(),
                ]);
                reads.push(grads[i].storage());
            }
            let _g = WriteGuard::lock(&writes, &reads);
            let items: Vec<[Arg<'_>; 4]> = live
                .iter()
                .map(|&i| {
                    [
                        params[i].arg(),
                        grads[i].arg(),
                        exp_avgs[i].arg(),
                        exp_avg_sqs[i].arg(),
                    ]
                })
                .collect();
            be.adam_step_list(&items, &h)?;
        }
        for &i in &live {
            for t in [&params[i], &exp_avgs[i], &exp_avg_sqs[i]] {
                t.bump_version();
            }
        }
        Ok(())
    }

    /// The update of [`Tensor::adam_step_`], its operands checked.
    fn adam_apply(
        &self,
        grad: &Tensor,
        exp_avg: &Tensor,
        exp_avg_sq: &Tensor,
        h: &AdamHyper,
    ) -> Result<()> {
        let h = *h;
        let all = [self, grad, exp_avg, exp_avg_sq];
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
        // Strided operands: the fused kernel on contiguous copies, written
        // back. The same arithmetic as for contiguous operands (f16/bf16 in
        // f32, rounded once; the kernel's own formula for the moments), so
        // the result does not depend on the layout; op by op, an f16
        // parameter came out up to an ulp off in about half its elements,
        // and f32 moments in the last bit. Every copy is made before
        // anything is written: an allocation failure changes nothing.
        let (p, g, m, v) = (
            self.contiguous()?,
            grad.contiguous()?,
            exp_avg.contiguous()?,
            exp_avg_sq.contiguous()?,
        );
        p.adam_apply(&g, &m, &v, &h)?;
        for (dst, src) in [(self, &p), (exp_avg, &m), (exp_avg_sq, &v)] {
            if !dst.is_contiguous() {
                dst.copy_(src)?;
            }
        }
        Ok(())
    }
}

/// Whether a tensor that one item writes (its parameter or moments) shares
/// memory with any tensor of another item (all contiguous: each is one byte
/// range of its storage). Within one item the four storages are distinct
/// ([`Tensor::adam_step_`]'s check); gradients only read, so two gradients
/// may overlap.
fn items_overlap(
    live: &[usize],
    params: &[Tensor],
    grads: &[Tensor],
    exp_avgs: &[Tensor],
    exp_avg_sqs: &[Tensor],
) -> bool {
    // (storage, first byte, end byte, item, written)
    let mut ranges: Vec<(usize, usize, usize, usize, bool)> = Vec::with_capacity(4 * live.len());
    for &i in live {
        let ops = [
            (&params[i], true),
            (&grads[i], false),
            (&exp_avgs[i], true),
            (&exp_avg_sqs[i], true),
        ];
        for (t, written) in ops {
            let size = t.dtype().size();
            let start = t.offset() * size;
            ranges.push((
                t.storage() as *const _ as usize,
                start,
                start + t.numel() * size,
                i,
                written,
            ));
        }
    }
    ranges.sort_unstable();
    // Sweep each storage's ranges by start, keeping those still open.
    let mut open: Vec<(usize, usize, usize, usize, bool)> = Vec::new();
    for r in ranges {
        open.retain(|o| o.0 == r.0 && o.2 > r.1);
        if open.iter().any(|o| o.3 != r.3 && (o.4 || r.4)) {
            return true;
        }
        open.push(r);
    }
    false
}
