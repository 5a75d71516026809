//! The parameters of one Adam / AdamW step gathered into lists, each updated
//! by one fused [`Tensor::adam_step_list_`]: a list per (dtype, step), so
//! one list unless parameters joined training at different steps.
//!
//! A step that a GradScaler hands its scale ([`AdamLists::scaled`], as
//! PyTorch's GradScaler hands `grad_scale` to its fused Adam/AdamW) divides
//! each gradient by the scale in the kernel's compute type and steps with
//! the quotient: PyTorch's fused CPU kernel computes
//! `float(grad) / float(scale)` for f16/bf16 (f32 for f32, `grad /
//! double(scale)` for f64), updates with it unrounded, and stores it,
//! rounded, as the parameter's `.grad`. For f16/bf16 parameters the
//! kernel then runs in f32 on f32 copies of the parameter and its state
//! (exact conversions: the f32 kernel computes what the f16/bf16 kernel
//! computes in f32, with the f32 quotient instead of a rounded one), and
//! the results are rounded back once. Unscaling the f16/bf16 gradient in
//! its own dtype first, as strata did, moved weights an ulp away from
//! PyTorch's whenever the scale was not a power of two.

use crate::error::Result;
use strata_tensor::{AdamHyper, DType, Tensor};

/// One list: its key, the parameters', gradients', moments' and (AMSGrad)
/// maxima's tensors, and the optimizer's index of each parameter.
type List = ((DType, i32), [Vec<Tensor>; 5], Vec<usize>);

/// Lists under construction (see the module docs).
#[derive(Default)]
pub(crate) struct AdamLists {
    lists: Vec<List>,
    /// The GradScaler's scale that the gradients carry (see the module docs).
    grad_scale: Option<f32>,
    /// Written back after the lists ran: (destination, source): the f32
    /// copies of f16/bf16 parameters and state, and the unscaled gradients.
    back: Vec<(Tensor, Tensor)>,
}

impl AdamLists {
    /// Lists of a step whose gradients carry the GradScaler scale `scale`,
    /// or of a plain step (`None`).
    pub(crate) fn scaled(grad_scale: Option<f32>) -> AdamLists {
        AdamLists {
            grad_scale,
            ..AdamLists::default()
        }
    }

    /// Adds parameter `index` (`p` its data) taking step `step`, with its
    /// gradient (converted to the parameter's dtype), and its state: its
    /// moments and, with AMSGrad, its running maximum of `v` (every
    /// parameter of one optimizer has one, or none does).
    pub(crate) fn push(
        &mut self,
        index: usize,
        step: i32,
        p: &Tensor,
        grad: Tensor,
        (exp_avg, exp_avg_sq, max_exp_avg_sq): (Tensor, Tensor, Option<Tensor>),
    ) -> Result<()> {
        if let Some(scale) = self.grad_scale {
            let low = matches!(p.dtype(), DType::F16 | DType::BF16);
            let compute = if low { DType::F32 } else { p.dtype() };
            // `float(grad) / float(scale)` (the scale is an f32 value, exact
            // in f32 and f64), written back rounded as PyTorch's `.grad`.
            let unscaled = grad.to_dtype_contiguous(compute)?.div(f64::from(scale))?;
            self.back.push((grad, unscaled.clone()));
            if low {
                let f32_copy = |t: &Tensor| t.to_dtype_contiguous(DType::F32);
                let (p32, m32, v32) = (f32_copy(p)?, f32_copy(&exp_avg)?, f32_copy(&exp_avg_sq)?);
                let x32 = max_exp_avg_sq.as_ref().map(f32_copy).transpose()?;
                self.back.push((p.clone(), p32.clone()));
                self.back.push((exp_avg, m32.clone()));
                self.back.push((exp_avg_sq, v32.clone()));
                if let (Some(x), Some(x32)) = (max_exp_avg_sq, &x32) {
                    self.back.push((x, x32.clone()));
                }
                self.add(index, step, &p32, unscaled, (m32, v32, x32));
            } else {
                self.add(
                    index,
                    step,
                    p,
                    unscaled,
                    (exp_avg, exp_avg_sq, max_exp_avg_sq),
                );
            }
            return Ok(());
        }
        let grad = if grad.dtype() == p.dtype() {
            grad
        } else {
            grad.to_dtype_contiguous(p.dtype())?
        };
        self.add(index, step, p, grad, (exp_avg, exp_avg_sq, max_exp_avg_sq));
        Ok(())
    }

    /// Adds one item to the list of its (dtype, step).
    fn add(
        &mut self,
        index: usize,
        step: i32,
        p: &Tensor,
        grad: Tensor,
        (exp_avg, exp_avg_sq, max_exp_avg_sq): (Tensor, Tensor, Option<Tensor>),
    ) {
        let key = (p.dtype(), step);
        let at = match self.lists.iter().position(|l| l.0 == key) {
            Some(at) => at,
            None => {
                self.lists.push((key, Default::default(), Vec::new()));
                self.lists.len() - 1
            }
        };
        let (_, [ps, gs, ms, vs, xs], indices) = &mut self.lists[at];
        ps.push(p.clone());
        gs.push(grad);
        ms.push(exp_avg);
        vs.push(exp_avg_sq);
        xs.extend(max_exp_avg_sq);
        indices.push(index);
    }

    /// Updates each list with `hyper` at the list's own step (`hyper.step`
    /// is ignored) and `maximize`, then calls `done(index, step)` for each
    /// of its parameters.
    pub(crate) fn run(
        self,
        hyper: AdamHyper,
        maximize: bool,
        mut done: impl FnMut(usize, i32),
    ) -> Result<()> {
        for ((_, step), [ps, gs, ms, vs, xs], indices) in self.lists {
            let xs = (!xs.is_empty()).then_some(&xs[..]);
            let h = AdamHyper { step, ..hyper };
            Tensor::adam_step_list_with_(&ps, &gs, &ms, &vs, xs, h, maximize)?;
            for i in indices {
                done(i, step);
            }
        }
        for (dst, src) in self.back {
            dst.copy_(&src)?;
        }
        Ok(())
    }
}
