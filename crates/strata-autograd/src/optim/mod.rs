//! Optimizers: update leaf parameters in place from their `.grad`, outside
//! the graph (like PyTorch's optimizers under `no_grad`).

mod adam;
mod adam_lists;
mod adamw;
mod clip;
pub mod lr_scheduler;
mod sgd;
mod state;

pub use adam::Adam;
pub use adamw::AdamW;
pub use clip::{clip_grad_norm_, clip_grad_value_, ClipGradNorm};
pub use sgd::Sgd;
pub use state::StateDict;

use crate::error::{AutogradError, Result};
use crate::var::Var;
use strata_tensor::{DType, Scalar, Tensor, TensorError};

/// What every optimizer provides.
pub trait Optimizer {
    /// The parameters being optimized.
    fn params(&self) -> &[Var];

    /// One update from the current gradients (parameters without a gradient are skipped).
    fn step(&mut self) -> Result<()>;

    /// Whether [`GradScaler::step`](crate::GradScaler::step) hands this
    /// optimizer its scale ([`Optimizer::step_with_grad_scale`]) instead of
    /// unscaling the gradients before [`Optimizer::step`] (PyTorch's
    /// `_step_supports_amp_scaling`: its fused Adam and AdamW, strata's
    /// [`Adam::with_fused`] and [`AdamW::with_fused`]). False by default.
    fn takes_grad_scale(&self) -> bool {
        false
    }

    /// One update from gradients that still carry the GradScaler scale
    /// `scale` (a positive normal f32 value): by default each gradient is
    /// divided by it in place, then [`Optimizer::step`] runs; Adam and AdamW
    /// with `fused` divide inside their step (see [`Adam::with_fused`]).
    ///
    /// The scale and the gradients are checked (as [`Optimizer::check_step`]
    /// checks the step) before any gradient is divided: an error leaves them
    /// as they were.
    fn step_with_grad_scale(&mut self, scale: f32) -> Result<()> {
        check_scaled_grads("step_with_grad_scale", self.params(), scale)?;
        self.check_step()?;
        for g in self.params().iter().filter_map(Var::grad) {
            g.div_(f64::from(scale))?;
        }
        self.step()
    }

    /// Checks what [`Optimizer::step`] checks before it changes anything
    /// (the parameters, their gradients, the hyper-parameters against each
    /// parameter's dtype), so that a step that passes fails only on a
    /// device error. strata's optimizers check all of it at the start of
    /// every step; the default checks nothing.
    fn check_step(&self) -> Result<()> {
        Ok(())
    }

    /// The learning rate.
    fn lr(&self) -> f64;

    /// Sets the learning rate (`>= 0`; +inf accepted as by PyTorch, NaN
    /// refused). A refused rate leaves the rate as it was. A schedule
    /// ([`lr_scheduler`]) calls it between steps.
    fn set_lr(&mut self, lr: f64) -> Result<()>;

    /// The optimizer's state as named tensors, to save with a checkpoint
    /// (see [`StateDict`] for the names): its hyper-parameters and, for each
    /// parameter that has taken a step, its buffers. The tensors are copies.
    fn state_dict(&self) -> Result<StateDict>;

    /// Replaces the hyper-parameters and the state with those of `state`
    /// (from [`state_dict`](Optimizer::state_dict) of an optimizer of the
    /// same kind over parameters of the same shapes, in the same order),
    /// converting the buffers to each parameter's dtype and device. Checked
    /// whole before anything changes: an error leaves the optimizer as it
    /// was.
    fn load_state_dict(&mut self, state: &StateDict) -> Result<()>;

    /// Clears every parameter's gradient: drops it (`set_to_none`, memory
    /// returns to the allocator until the next backward) or zeroes it in place.
    fn zero_grad(&mut self, set_to_none: bool) -> Result<()> {
        for p in self.params() {
            p.zero_grad(set_to_none)?;
        }
        Ok(())
    }
}

/// Fails with [`AutogradError::Hyperparameter`] unless `ok` holds;
/// `expected` says what is accepted. `ok` is PyTorch's constructor check,
/// written so that NaN fails it (`0.0 <= lr` and `0.0 <= betas[0] < 1.0`
/// are false for NaN).
pub(crate) fn check(
    optimizer: &'static str,
    name: &'static str,
    value: f64,
    ok: bool,
    expected: &'static str,
) -> Result<()> {
    if ok {
        Ok(())
    } else {
        Err(AutogradError::Hyperparameter {
            optimizer,
            name,
            value,
            expected,
        })
    }
}

/// [`check`] for a hyper-parameter that must be `>= 0`: PyTorch's
/// `0.0 <= x`, so +inf is accepted (an lr of inf gives PyTorch's update,
/// `p - inf * g`: ±inf, NaN where g is 0) and NaN is not. (PyTorch's `SGD`
/// writes its checks `x < 0.0`, which lets NaN through; strata refuses NaN
/// there too.)
pub(crate) fn check_non_negative(
    optimizer: &'static str,
    name: &'static str,
    value: f64,
) -> Result<()> {
    check(
        optimizer,
        name,
        value,
        value >= 0.0,
        "a number >= 0 (+inf included), not NaN",
    )
}

/// The first pair of positions at which a parameter list names one
/// parameter twice (it would be updated twice per step, with two sets of
/// state; PyTorch refuses a parameter in two groups).
pub(crate) fn first_duplicate(params: &[Var]) -> Option<(usize, usize)> {
    let mut seen = std::collections::HashMap::with_capacity(params.len());
    params.iter().enumerate().find_map(|(i, p)| {
        seen.insert(std::sync::Arc::as_ptr(&p.inner), i)
            .map(|first| (first, i))
    })
}

/// The error for a parameter named twice, at `first` and `i`.
pub(crate) fn duplicate_error(
    optimizer: &'static str,
    (first, i): (usize, usize),
) -> AutogradError {
    AutogradError::Optimizer {
        optimizer,
        msg: format!("parameters {first} and {i} are the same parameter; pass each parameter once"),
    }
}

/// The error for a parameter that is not a leaf, or `None` (PyTorch:
/// "can't optimize a non-leaf Tensor"): a variable made by a recorded op
/// never gets a `.grad`, so every step would silently skip it.
pub(crate) fn non_leaf_error(optimizer: &'static str, params: &[Var]) -> Option<AutogradError> {
    let (i, p) = params.iter().enumerate().find(|(_, p)| !p.is_leaf())?;
    Some(AutogradError::Optimizer {
        optimizer,
        msg: format!(
            "can't optimize a non-leaf variable: parameter {i} was made by {}, so it never gets a gradient; pass the leaf it was made from (or a detached copy made a parameter)",
            p.grad_fn_name().unwrap_or("a recorded op")
        ),
    })
}

/// The error for an empty parameter list, or `None` (PyTorch: "optimizer
/// got an empty parameter list"): its steps would silently do nothing.
pub(crate) fn empty_error(optimizer: &'static str, params: &[Var]) -> Option<AutogradError> {
    params.is_empty().then(|| AutogradError::Optimizer {
        optimizer,
        msg: "optimizer got an empty parameter list; pass the parameters to update (a module's \
              parameters() is empty when it has none, or when it was given no layers)"
            .into(),
    })
}

/// Refuses an empty parameter list, and one with a variable that is not a
/// leaf or that names one parameter twice.
pub(crate) fn check_distinct(optimizer: &'static str, params: &[Var]) -> Result<()> {
    if let Some(e) = empty_error(optimizer, params) {
        return Err(e);
    }
    if let Some(e) = non_leaf_error(optimizer, params) {
        return Err(e);
    }
    match first_duplicate(params) {
        Some(d) => Err(duplicate_error(optimizer, d)),
        None => Ok(()),
    }
}

/// Checks, before a step updates anything, every parameter that has a
/// gradient: not made in inference mode unless the step runs in inference
/// mode (PyTorch: "Inplace update to inference tensor outside
/// InferenceMode is not allowed"), floating point, written in place
/// element by element (not an expanded tensor whose elements share
/// memory), and (for the fused Adam kernels, `fused`) not sharing memory
/// with its gradient. A step that failed at a later parameter would leave
/// the earlier ones updated and their state advanced. (The parameter list
/// itself was checked for duplicates when the optimizer was made.) Every
/// parameter must still be a leaf (an in-place op with an operand that
/// requires grad gives one that does not require grad a history), and not
/// replaced in its module by `Module::to` (see `VarInner::replaced_by_to`). An
/// empty parameter list is refused ([`AdamW::new`] cannot fail, so its
/// steps refuse it).
pub(crate) fn check_step(optimizer: &'static str, params: &[Var], fused: bool) -> Result<()> {
    if let Some(e) = empty_error(optimizer, params) {
        return Err(e);
    }
    if let Some(e) = non_leaf_error(optimizer, params) {
        return Err(e);
    }
    if let Some((i, p)) = params
        .iter()
        .enumerate()
        .find(|(_, p)| p.inner.replaced_by_to())
    {
        return Err(AutogradError::Optimizer {
            optimizer,
            msg: format!(
                "parameter {i} ({:?} {} on {:?}) was replaced in its module by a converted copy \
                 (Module::to to another device or dtype), so this step would update a tensor the \
                 model no longer uses; make the optimizer after Module::to (strata's to makes new \
                 parameters, where PyTorch converts them in place)",
                p.shape(),
                p.dtype(),
                p.device()
            ),
        });
    }
    for (i, p) in params.iter().enumerate() {
        let Some(g) = p.grad() else { continue };
        if p.refuses_inplace_as_inference() && !crate::inference_mode::is_inference_mode_enabled() {
            return Err(AutogradError::InferenceTensorInPlace { op: optimizer });
        }
        if !p.dtype().is_float() {
            return Err(AutogradError::Optimizer {
                optimizer,
                msg: format!(
                    "parameter {i} is a {} tensor; optimizers update floating-point parameters \
                     only (convert it with to_dtype, or leave it out of the optimizer)",
                    p.dtype()
                ),
            });
        }
        if p.data().layout().may_overlap() {
            return Err(AutogradError::Optimizer {
                optimizer,
                msg: format!(
                    "parameter {i} (shape {:?}, strides {:?}) has elements that share memory \
                     (an expanded tensor) and cannot be updated in place; make the parameter \
                     from a contiguous copy (deep_clone or contiguous)",
                    p.shape(),
                    p.data().strides()
                ),
            });
        }
        if fused && g.same_storage(p.data()) {
            return Err(AutogradError::Optimizer {
                optimizer,
                msg: format!(
                    "the gradient of parameter {i} shares the parameter's memory; \
                     set_grad a separate tensor (deep_clone it)"
                ),
            });
        }
    }
    Ok(())
}

/// A GradScaler scale handed to [`Optimizer::step_with_grad_scale`] must be a
/// positive normal f32 value (PyTorch's GradScaler never hands it another:
/// 0, a negative, NaN, an infinite or a subnormal scale would turn every
/// gradient into inf or NaN, or flip its sign).
pub(crate) fn check_grad_scale(op: &'static str, scale: f32) -> Result<()> {
    if scale.is_normal() && scale > 0.0 {
        return Ok(());
    }
    Err(AutogradError::Tensor(TensorError::Value {
        op,
        msg: format!(
            "the gradient scale is {scale}; it must be a positive normal f32 value (the \
             GradScaler's scale, as GradScaler::step hands it)"
        ),
    }))
}

/// Checks a step whose gradients carry the GradScaler scale `scale` and are
/// written back unscaled (the fused Adam and AdamW steps): the scale, and
/// the gradients as [`check_grads_in_place`] checks them (each on its own:
/// a step may span devices), before anything changes.
pub(crate) fn check_scaled_grads(op: &'static str, params: &[Var], scale: f32) -> Result<()> {
    check_grad_scale(op, scale)?;
    for g in params.iter().filter_map(Var::grad) {
        check_grads_in_place(op, std::slice::from_ref(&g))?;
    }
    Ok(())
}

/// PyTorch's conversion of a scalar argument to a tensor's dtype (`add_`'s
/// `alpha`, `clamp_`'s bounds): `value` beyond the dtype's range is refused
/// ("value cannot be converted to type ... without overflow"). Checked for
/// every tensor of a step before any is written.
pub(crate) fn check_scalar_fits(op: &'static str, value: f64, dtype: DType) -> Result<()> {
    if Scalar::Float(value).fits(dtype) {
        return Ok(());
    }
    Err(AutogradError::Tensor(TensorError::Value {
        op,
        msg: format!(
            "value {value} cannot be converted to type {} without overflow (a \
             hyper-parameter beyond the range of a parameter's or gradient's dtype)",
            dtype.torch_name()
        ),
    }))
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
