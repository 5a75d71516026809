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
