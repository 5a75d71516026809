//! The parameters of one Adam / AdamW step gathered into lists, each updated
//! by one fused [`Tensor::adam_step_list_`]: a list per (dtype, step), so
//! one list unless parameters joined training at different steps.

use crate::error::Result;
use strata_tensor::{AdamHyper, DType, Tensor};

/// One list: its key, the parameters', gradients', moments' and (AMSGrad)
/// maxima's tensors, and the optimizer's index of each parameter.
type List = ((DType, i32), [Vec<Tensor>; 5], Vec<usize>);

/// Lists under construction (see the module docs).
#[derive(Default)]
pub(crate) struct AdamLists {
    lists: Vec<List>,
}

impl AdamLists {
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
        let grad = if grad.dtype() == p.dtype() {
            grad
        } else {
            grad.to_dtype(p.dtype())?
        };
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
        Ok(())
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
        Ok(())
    }
}
