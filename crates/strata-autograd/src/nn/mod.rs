//! Building blocks for models (PyTorch's `torch.nn`): the [`Module`] trait
//! (parameters by name, moving to a device and dtype, train/eval) and layers
//! ([`Linear`], [`LayerNorm`], [`Embedding`], [`Conv1d`], [`Conv2d`], [`Conv3d`],
//! [`ConvTranspose1d`], [`ConvTranspose2d`], [`ConvTranspose3d`], [`BatchNorm1d`],
//! [`BatchNorm2d`], [`BatchNorm3d`]).
//!
//! A module owns its parameters as [`Var`] leaves; a model is a struct of
//! modules whose [`Module::visit`] calls each child with a dotted prefix, so
//! [`Module::named_parameters`] gives PyTorch's names (`blocks.0.fc1.weight`).
//! Layers draw their initial values from the default generator
//! ([`strata_tensor::generator`]), so `manual_seed` makes a model reproducible.

mod batch_norm;
mod conv;
mod embedding;
mod layer_norm;
mod linear;

pub use batch_norm::{BatchNorm1d, BatchNorm2d, BatchNorm3d};
pub use conv::{Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d};
pub use embedding::Embedding;
pub use layer_norm::LayerNorm;
pub use linear::Linear;

use crate::error::{AutogradError, Result};
use crate::var::{Var, VarInner};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use strata_tensor::{DType, Device, Tensor};

/// The dotted name of `name` under `prefix` (`prefix.name`, or `name` at the top).
pub fn join(prefix: &str, name: &str) -> String {
    if prefix.is_empty() {
        name.to_string()
    } else {
        format!("{prefix}.{name}")
    }
}

/// Calls `f` with a layer's `weight` and, if it has one, its `bias` (the
/// parameters of [`Linear`] and the convolutions), named under `prefix`.
pub(crate) fn visit_weight_bias(
    prefix: &str,
    weight: &Var,
    bias: Option<&Var>,
    f: &mut dyn FnMut(String, &Var),
) {
    f(join(prefix, "weight"), weight);
    if let Some(b) = bias {
        f(join(prefix, "bias"), b);
    }
}

/// [`visit_weight_bias`] with mutable access.
pub(crate) fn visit_weight_bias_mut(
    prefix: &str,
    weight: &mut Var,
    bias: Option<&mut Var>,
    f: &mut dyn FnMut(String, &mut Var) -> Result<()>,
) -> Result<()> {
    f(join(prefix, "weight"), weight)?;
    if let Some(b) = bias {
        f(join(prefix, "bias"), b)?;
    }
    Ok(())
}

/// What every layer and model provides.
pub trait Module {
    /// Calls `f` with the dotted name (under `prefix`) and the variable of
    /// every parameter, children included, in a fixed order.
    fn visit(&self, prefix: &str, f: &mut dyn FnMut(String, &Var));

    /// Like [`Module::visit`], with mutable access (to replace parameters).
    fn visit_mut(
        &mut self,
        prefix: &str,
        f: &mut dyn FnMut(String, &mut Var) -> Result<()>,
    ) -> Result<()>;

    /// Calls `f` with the dotted name (under `prefix`) and the tensor of
    /// every buffer: state that is not a parameter (batch norm's running
    /// statistics), children included, as PyTorch's `named_buffers()`. A
    /// module without buffers keeps this default (none); a model whose
    /// children have buffers forwards the call to them.
    fn visit_buffers(&self, prefix: &str, f: &mut dyn FnMut(String, &Tensor)) {
        let _ = (prefix, f);
    }

    /// Like [`Module::visit_buffers`], with mutable access (to replace
    /// buffers, as [`Module::to`] does).
    fn visit_buffers_mut(
        &mut self,
        prefix: &str,
        f: &mut dyn FnMut(String, &mut Tensor) -> Result<()>,
    ) -> Result<()> {
        let _ = (prefix, f);
        Ok(())
    }

    /// Every buffer with its dotted name (handles on the same storage).
    fn named_buffers(&self) -> Vec<(String, Tensor)> {
        let mut out = Vec::new();
        self.visit_buffers("", &mut |name, t| out.push((name, t.clone())));
        out
    }

    /// Sets training mode here and in every child.
    fn set_training(&mut self, training: bool);

    /// Whether the module is in training mode.
    fn is_training(&self) -> bool;

    /// Every parameter with its dotted name. A parameter shared by several
    /// modules (tied weights) is listed once, under its first name, as
    /// PyTorch's `named_parameters()`.
    fn named_parameters(&self) -> Vec<(String, Var)> {
        let mut seen = HashSet::new();
        let mut out = Vec::new();
        self.visit("", &mut |name, v| {
            if seen.insert(Arc::as_ptr(&v.inner)) {
                out.push((name, v.clone()));
            }
        });
        out
    }

    /// Every parameter (handles on the same variables), for an optimizer;
    /// a shared one once, as PyTorch's `parameters()`.
    fn parameters(&self) -> Vec<Var> {
        self.named_parameters()
            .into_iter()
            .map(|(_, v)| v)
            .collect()
    }

    /// Total number of parameter elements (a shared parameter counted once).
    fn num_parameters(&self) -> usize {
        self.parameters().iter().map(Var::numel).sum()
    }

    /// Training mode (PyTorch's `train()`).
    fn train(&mut self) {
        self.set_training(true);
    }

    /// Evaluation mode (PyTorch's `eval()`).
    fn eval(&mut self) {
        self.set_training(false);
    }

    /// Clears every parameter's gradient (`set_to_none` drops it).
    fn zero_grad(&self, set_to_none: bool) -> Result<()> {
        let mut result = Ok(());
        self.visit("", &mut |_, v| {
            if result.is_ok() {
                result = v.zero_grad(set_to_none);
            }
        });
        result
    }

    /// Moves every parameter to `device` and, when given, converts it to
    /// `dtype` (a float dtype), as PyTorch's `module.to(device, dtype)`. A
    /// parameter that is already on `device` in `dtype` is left as it is (the
    /// same variable, with its gradient and hooks, as in PyTorch: an
    /// optimizer made before still updates it); the others become new
    /// leaves with their gradients converted too and their
    /// post-accumulate-grad hooks kept (as PyTorch's). PyTorch converts the
    /// same parameter in place; a strata [`Var`]'s data cannot change device
    /// or dtype, so an optimizer made before holds the old parameters: its
    /// steps are refused with an [`AutogradError::Optimizer`] error (make the
    /// optimizer after `to`). Buffers ([`Module::visit_buffers`]) move too,
    /// the floating ones converted to `dtype` (an integer counter keeps its
    /// dtype), as PyTorch's.
    /// On error nothing changes.
    fn to(&mut self, device: Device, dtype: Option<DType>) -> Result<()> {
        if let Some(d) = dtype {
            if !d.is_float() {
                return Err(AutogradError::Module {
                    module: "Module::to",
                    msg: format!("parameters must stay floating point; {d} is not"),
                });
            }
        }
        // Convert everything first, then swap, so a failure changes nothing.
        // A parameter shared by several modules (tied weights) is listed
        // once by `named_parameters`, so it is converted once and stays
        // shared (PyTorch's `module.to` keeps it one tensor). The listed
        // handles keep every old parameter alive, so its address identifies
        // it until the swap is done.
        // The buffers first (floating ones take the dtype, as PyTorch's
        // `module.to(dtype)`), kept aside until the parameters convert too.
        let mut buffers = Vec::new();
        for (_, t) in self.named_buffers() {
            let t = t.to(device)?;
            buffers.push(match dtype {
                Some(d) if t.dtype().is_float() && d != t.dtype() => t.to_dtype_contiguous(d)?,
                _ => t,
            });
        }
        let params = self.named_parameters();
        let mut converted: HashMap<*const VarInner, Var> = HashMap::new();
        for (_, v) in &params {
            if v.device() == device && dtype.is_none_or(|d| d == v.dtype()) {
                continue;
            }
            let t = v.data().to(device).and_then(|t| match dtype {
                Some(d) if d != t.dtype() => t.to_dtype_contiguous(d),
                _ => Ok(t),
            })?;
            let nv = Var::new(t);
            nv.requires_grad_(v.requires_grad())?;
            // PyTorch's `_apply` converts `.grad` with the parameter.
            if let Some(g) = v.grad() {
                let g = g.to(device).and_then(|g| match dtype {
                    Some(d) if d != g.dtype() => g.to_dtype_contiguous(d),
                    _ => Ok(g),
                })?;
                nv.set_grad(Some(g))?;
            }
            // And its post-accumulate-grad hooks stay (the same parameter
            // in PyTorch); their handles still remove them.
            nv.inner.share_hooks_of(&v.inner);
            converted.insert(Arc::as_ptr(&v.inner), nv);
        }
        let mut next = buffers.into_iter();
        self.visit_buffers_mut("", &mut |_, t| {
            if let Some(b) = next.next() {
                *t = b;
            }
            Ok(())
        })?;
        if converted.is_empty() {
            return Ok(());
        }
        self.visit_mut("", &mut |_, v| {
            if let Some(nv) = converted.get(&Arc::as_ptr(&v.inner)) {
                *v = nv.clone();
            }
            Ok(())
        })?;
        // An optimizer made before still holds the old parameters: its
        // steps are refused (see `optim::check_step`).
        for (_, v) in &params {
            if converted.contains_key(&Arc::as_ptr(&v.inner)) {
                v.inner.mark_replaced_by_to();
            }
        }
        Ok(())
    }
}
