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

/// What a backend's fused Adam step computes: the hyper-parameters, and
/// the options beyond them (PyTorch's `maximize` and `amsgrad`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct AdamStep {
    pub(crate) h: AdamHyper,
    /// Ascend the gradient: the step uses `-g` (negated exactly, before
    /// anything else, as PyTorch's kernels do).
    pub(crate) maximize: bool,
    /// Keep the running maximum of the second moment (`max_exp_avg_sq`,
    /// the fifth operand) and divide by its root instead of `v`'s.
    pub(crate) amsgrad: bool,
}

/// One item of a backend's fused Adam list: parameter, gradient, moments
/// and (for AMSGrad only) the running maximum of the second moment.
pub(crate) struct AdamItem<'a> {
    pub(crate) p: crate::backend::Arg<'a>,
    pub(crate) g: crate::backend::Arg<'a>,
    pub(crate) m: crate::backend::Arg<'a>,
    pub(crate) v: crate::backend::Arg<'a>,
    pub(crate) max: Option<crate::backend::Arg<'a>>,
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
    /// layout. [`Tensor::adam_step_with_`] adds PyTorch's `maximize` and
    /// `amsgrad`.
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
        self.adam_step_with_(grad, exp_avg, exp_avg_sq, None, h, false)
    }

    /// [`Tensor::adam_step_`] with PyTorch's `maximize` and `amsgrad`
    /// options, as its fused CPU kernel (`_fused_adam_`) computes them:
    ///
    /// * `maximize`: the step ascends the gradient (uses `-g`, negated
    ///   exactly, before anything else);
    /// * `max_exp_avg_sq` (AMSGrad, PyTorch's `amsgrad=True`): a fifth
    ///   tensor of the parameter's shape, dtype and device, in its own
    ///   storage, holding the running maximum of the second moment: each
    ///   step sets it to `max(max_exp_avg_sq, v)` (NaN if either is NaN) and
    ///   divides by `sqrt(max_exp_avg_sq) / sqrt(1 - beta2^t) + eps` instead
    ///   of `v`'s root. For f16/bf16 the maximum is taken in f32 with the
    ///   unrounded new `v` and used unrounded; only the stored copy is
    ///   rounded (as PyTorch's kernel). Start it at zero, as PyTorch does.
    ///
    /// Checked as `adam_step_` checks its operands (the fifth too) before
    /// anything is written.
    ///
    /// ```
    /// use strata_tensor::{AdamHyper, Device, Tensor};
    /// let p = Tensor::from_vec(vec![1.0f32, -2.0], &[2], Device::Cpu)?;
    /// let g = Tensor::from_vec(vec![0.5f32, 0.5], &[2], Device::Cpu)?;
    /// let (m, v, vmax) = (p.zeros_like(None)?, p.zeros_like(None)?, p.zeros_like(None)?);
    /// let h = AdamHyper { lr: 0.1, beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: 0.0, step: 1 };
    /// p.adam_step_with_(&g, &m, &v, Some(&vmax), h, true)?;
    /// // maximize: the first step moves each weight by lr along its gradient's sign.
    /// let out = p.to_vec::<f32>()?;
    /// assert!((out[0] - 1.1).abs() < 1e-6 && (out[1] + 1.9).abs() < 1e-6);
    /// assert_eq!(vmax.to_vec::<f32>()?, v.to_vec::<f32>()?);
    /// # Ok::<(), strata_tensor::TensorError>(())
    /// ```
    pub fn adam_step_with_(
        &self,
        grad: &Tensor,
        exp_avg: &Tensor,
        exp_avg_sq: &Tensor,
        max_exp_avg_sq: Option<&Tensor>,
        h: AdamHyper,
        maximize: bool,
    ) -> Result<()> {
        h.check()?;
        self.adam_check(grad, exp_avg, exp_avg_sq, max_exp_avg_sq)?;
        let step = AdamStep {
            h,
            maximize,
            amsgrad: max_exp_avg_sq.is_some(),
        };
        self.adam_apply(grad, exp_avg, exp_avg_sq, max_exp_avg_sq, &step)
    }

    /// Every check of [`Tensor::adam_step_with_`] on one parameter's operands.
    fn adam_check(
        &self,
        grad: &Tensor,
        exp_avg: &Tensor,
        exp_avg_sq: &Tensor,
        max_exp_avg_sq: Option<&Tensor>,
    ) -> Result<()> {
        const OP: &str = "adam_step_";
        let d = self.dtype();
        if !d.is_float() {
            return Err(TensorError::dtype(
                OP,
                format!("the parameter must be a float tensor, not {d}"),
            ));
        }
        let mut named = vec![
            ("grad", grad),
            ("exp_avg", exp_avg),
            ("exp_avg_sq", exp_avg_sq),
        ];
        named.extend(max_exp_avg_sq.map(|x| ("max_exp_avg_sq", x)));
        for &(name, t) in &named {
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
        let mut all = vec![self, grad, exp_avg, exp_avg_sq];
        all.extend(max_exp_avg_sq);
        for i in 0..all.len() {
            for j in i + 1..all.len() {
                if all[i].same_storage(all[j]) {
                    return Err(TensorError::overlap(
                        OP,
                        if all.len() == 4 {
                            "the parameter, gradient and moments must be four distinct storages"
                        } else {
                            "the parameter, gradient, moments and max_exp_avg_sq must be five \
                             distinct storages"
                        },
                    ));
                }
            }
        }
        // The outputs are written element by element: one whose elements
        // share memory (an expanded tensor) cannot hold the update. Checked
        // before anything is written, so that an error leaves the parameter
        // and its state unchanged.
        let mut outputs = vec![
            ("the parameter", self),
            ("exp_avg", exp_avg),
            ("exp_avg_sq", exp_avg_sq),
        ];
        outputs.extend(max_exp_avg_sq.map(|x| ("max_exp_avg_sq", x)));
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
    /// Anything else is updated item by item. [`Tensor::adam_step_list_with_`]
    /// adds PyTorch's `maximize` and `amsgrad`.
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
        Tensor::adam_step_list_with_(params, grads, exp_avgs, exp_avg_sqs, None, h, false)
    }

    /// [`Tensor::adam_step_list_`] with PyTorch's `maximize` and `amsgrad`
    /// (`max_exp_avg_sqs`, one per parameter), each item computed as
    /// [`Tensor::adam_step_with_`] computes it. The same checks, the fifth
    /// list included, before anything is written.
    pub fn adam_step_list_with_(
        params: &[Tensor],
        grads: &[Tensor],
        exp_avgs: &[Tensor],
        exp_avg_sqs: &[Tensor],
        max_exp_avg_sqs: Option<&[Tensor]>,
        h: AdamHyper,
        maximize: bool,
    ) -> Result<()> {
        const OP: &str = "adam_step_list_";
        let n = params.len();
        let maxes_len = max_exp_avg_sqs.map_or(n, <[Tensor]>::len);
        if grads.len() != n || exp_avgs.len() != n || exp_avg_sqs.len() != n || maxes_len != n {
            return Err(TensorError::value(
                OP,
                format!(
                    "the lists must have one length: {n} parameters, {} gradients, {} exp_avgs, {} exp_avg_sqs{}",
                    grads.len(),
                    exp_avgs.len(),
                    exp_avg_sqs.len(),
                    match max_exp_avg_sqs {
                        Some(x) => format!(", {} max_exp_avg_sqs", x.len()),
                        None => String::new(),
                    }
                ),
            ));
        }
        h.check()?;
        let max_of = |i: usize| max_exp_avg_sqs.map(|x| &x[i]);
        for i in 0..n {
            params[i].adam_check(&grads[i], &exp_avgs[i], &exp_avg_sqs[i], max_of(i))?;
        }
        let step = AdamStep {
            h,
            maximize,
            amsgrad: max_exp_avg_sqs.is_some(),
        };
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
                        .into_iter()
                        .chain(max_of(i))
                        .all(|t| t.is_contiguous())
            })
            && !items_overlap(&live, params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs);
        if !fused {
            for i in 0..n {
                params[i].adam_apply(&grads[i], &exp_avgs[i], &exp_avg_sqs[i], max_of(i), &step)?;
            }
            return Ok(());
        }
        let be: &dyn Backend = params[first].backend()?;
        {
            let mut writes = Vec::with_capacity(4 * live.len());
            let mut reads = Vec::with_capacity(live.len());
            for &i in &live {
                writes.extend([
                    params[i].storage(),
                    exp_avgs[i].storage(),
                    exp_avg_sqs[i].storage(),
                ]);
                writes.extend(max_of(i).map(Tensor::storage));
                reads.push(grads[i].storage());
            }
            let _g = WriteGuard::lock(&writes, &reads);
            let items: Vec<AdamItem<'_>> = live
                .iter()
                .map(|&i| AdamItem {
                    p: params[i].arg(),
                    g: grads[i].arg(),
                    m: exp_avgs[i].arg(),
                    v: exp_avg_sqs[i].arg(),
                    max: max_of(i).map(Tensor::arg),
                })
                .collect();
            be.adam_step_list(&items, &step)?;
        }
        for &i in &live {
            for t in [&params[i], &exp_avgs[i], &exp_avg_sqs[i]]
                .into_iter()
                .chain(max_of(i))
            {
                t.bump_version();
            }
        }
        Ok(())
    }

    /// The update of [`Tensor::adam_step_with_`], its operands checked.
    fn adam_apply(
        &self,
        grad: &Tensor,
        exp_avg: &Tensor,
        exp_avg_sq: &Tensor,
        max_exp_avg_sq: Option<&Tensor>,
        step: &AdamStep,
    ) -> Result<()> {
        if self.numel() == 0 {
            return Ok(());
        }
        let contiguous = [self, grad, exp_avg, exp_avg_sq]
            .into_iter()
            .chain(max_exp_avg_sq)
            .all(|t| t.is_contiguous());
        if contiguous {
            let be: &dyn Backend = self.backend()?;
            {
                let mut writes = vec![self.storage(), exp_avg.storage(), exp_avg_sq.storage()];
                writes.extend(max_exp_avg_sq.map(Tensor::storage));
                let _g = WriteGuard::lock(&writes, &[grad.storage()]);
                let item = AdamItem {
                    p: self.arg(),
                    g: grad.arg(),
                    m: exp_avg.arg(),
                    v: exp_avg_sq.arg(),
                    max: max_exp_avg_sq.map(Tensor::arg),
                };
                be.adam_step(&item, self.numel(), step)?;
            }
            for t in [self, exp_avg, exp_avg_sq]
                .into_iter()
                .chain(max_exp_avg_sq)
            {
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
        let x = max_exp_avg_sq.map(Tensor::contiguous).transpose()?;
        p.adam_apply(&g, &m, &v, x.as_ref(), step)?;
        let mut back = vec![(self, &p), (exp_avg, &m), (exp_avg_sq, &v)];
        if let (Some(dst), Some(src)) = (max_exp_avg_sq, x.as_ref()) {
            back.push((dst, src));
        }
        for (dst, src) in back {
            if !dst.is_contiguous() {
                dst.copy_(src)?;
            }
        }
        Ok(())
    }
}

/// Whether a tensor that one item writes (its parameter, moments and
/// running maximum) shares memory with any tensor of another item (all
/// contiguous: each is one byte range of its storage). Within one item the
/// storages are distinct ([`Tensor::adam_step_with_`]'s check); gradients
/// only read, so two gradients may overlap.
fn items_overlap(
    live: &[usize],
    params: &[Tensor],
    grads: &[Tensor],
    exp_avgs: &[Tensor],
    exp_avg_sqs: &[Tensor],
    max_exp_avg_sqs: Option<&[Tensor]>,
) -> bool {
    // (storage, first byte, end byte, item, written)
    let mut ranges: Vec<(usize, usize, usize, usize, bool)> = Vec::with_capacity(5 * live.len());
    for &i in live {
        let mut ops = vec![
            (&params[i], true),
            (&grads[i], false),
            (&exp_avgs[i], true),
            (&exp_avg_sqs[i], true),
        ];
        ops.extend(max_exp_avg_sqs.map(|x| (&x[i], true)));
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
