//! Optimizers: update leaf parameters in place from their `.grad`, outside
//! the graph (like PyTorch's optimizers under `no_grad`).

mod adam;
mod adamw;
mod clip;
mod sgd;

pub use adam::Adam;
pub use adamw::AdamW;
pub use clip::clip_grad_norm_;
pub use sgd::Sgd;

use crate::error::{AutogradError, Result};
use crate::var::Var;
use strata_tensor::{Tensor, TensorError};

/// What every optimizer provides.
pub trait Optimizer {
    /// The parameters being optimized.
    fn params(&self) -> &[Var];

    /// One update from the current gradients (parameters without a gradient are skipped).
    fn step(&mut self) -> Result<()>;

    /// Clears every parameter's gradient: drops it (`set_to_none`, memory
    /// returns to the allocator until the next backward) or zeroes it in place.
    fn zero_grad(&mut self, set_to_none: bool) -> Result<()> {
        for p in self.params() {
            p.zero_grad(set_to_none)?;
        }
        Ok(())
    }
}

pub(crate) fn check(
    optimizer: &'static str,
    name: &'static str,
    value: f64,
    ok: bool,
) -> Result<()> {
    if ok && value.is_finite() {
        Ok(())
    } else {
        Err(AutogradError::Hyperparameter {
            optimizer,
            name,
            value,
        })
    }
}

/// Checks gradients that are about to be scaled in place, all of them
/// before any is written (so that an error leaves every gradient as it
/// was): each must be a float tensor (an integer gradient set by
/// [`Var::set_grad`] would truncate the scale, to 0 for a factor below 1)
/// whose elements do not share memory (an expanded tensor), and all must be
/// on one device. (Their shapes are their parameters': `Var::set_grad`
/// refuses any other.)
pub(crate) fn check_grads_in_place(op: &'static str, grads: &[Tensor]) -> Result<()> {
    let Some(first) = grads.first() else {
        return Ok(());
    };
    for g in grads {
        if g.device() != first.device() {
            return Err(AutogradError::Tensor(TensorError::DeviceMismatch {
                op,
                lhs: first.device(),
                rhs: g.device(),
            }));
        }
        if !g.dtype().is_float() {
            return Err(AutogradError::Tensor(TensorError::DType {
                op,
                msg: format!(
                    "a gradient is a {} tensor; gradients must be floating point \
                     (set_grad a tensor of the parameter's dtype)",
                    g.dtype()
                ),
            }));
        }
        if g.layout().may_overlap() {
            return Err(AutogradError::Tensor(TensorError::Overlap {
                op,
                msg: format!(
                    "a gradient (shape {:?}, strides {:?}) has elements that share memory and \
                     cannot be scaled in place; set_grad a contiguous tensor",
                    g.shape(),
                    g.strides()
                ),
            }));
        }
    }
    Ok(())
}
