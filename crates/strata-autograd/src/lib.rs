//! strata-autograd: reverse-mode automatic differentiation over strata
//! tensors, with PyTorch's memory behaviour.
//!
//! * [`Var`]: a tensor plus autograd metadata. Leaves made with
//!   [`Var::parameter`] (or `requires_grad_(true)`) accumulate gradients in
//!   [`Var::grad`]; results of recorded ops carry the node that made them.
//! * Recorded ops: `add`, `sub`, `mul`, `div` (broadcasting; gradients summed
//!   back to each input's shape), `neg`, `relu`, `exp`, `log`, `sum`, `mean`,
//!   `matmul`, and the views `transpose`, `reshape`, `view`, `narrow`,
//!   `expand`, `unsqueeze`, `squeeze_dims`, `flatten`, `permute`; in place:
//!   `add_`, `sub_`, `mul_`, `div_`, `zero_`.
//! * [`Var::backward`] runs the graph in topological order and releases each
//!   node's saved tensors as soon as its backward ran, so their memory goes
//!   back to the allocator during the pass; a second backward through the
//!   released graph fails with [`AutogradError::GraphReleased`] unless the first
//!   one passed `retain_graph`.
//! * [`no_grad`] / [`NoGradGuard`]: a thread-local switch under which nothing
//!   is recorded or saved. [`Var::detach`] shares storage without history.
//! * Saved tensors carry the version they had; an in-place change before
//!   backward gives [`AutogradError::SavedTensorModified`]. In-place ops on a
//!   leaf that requires grad give [`AutogradError::InPlaceOnLeaf`].
//! * [`optim::Sgd`] (momentum) and [`optim::Adam`], with `zero_grad(set_to_none)`.
//!
//! ```
//! use strata_autograd::{Var, no_grad};
//! use strata_tensor::{Tensor, DType, Device};
//! let w = Var::parameter(Tensor::full(&[2], 3.0, DType::F32, Device::Cpu).unwrap()).unwrap();
//! let x = Var::new(Tensor::from_slice(&[1.0f32, 2.0], &[2], Device::Cpu).unwrap());
//! let loss = w.mul(&x).unwrap().sum(None, false).unwrap();
//! loss.backward().unwrap();
//! assert_eq!(w.grad().unwrap().to_vec::<f32>().unwrap(), vec![1.0, 2.0]);
//! assert!(loss.backward().is_err());                     // graph already released
//! let y = no_grad(|| w.mul(&x)).unwrap();
//! assert!(!y.requires_grad());
//! ```

#![warn(missing_docs)]

mod backward;
mod display;
mod error;
mod grad_mode;
mod node;
mod ops;
pub mod optim;
mod var;

// Training-memory remedies (issue 13).
pub mod autocast;
pub mod checkpoint;
mod grad_scaler;
mod inference_mode;
pub mod nn;

// Data-parallel training (issue 17).
pub mod distributed;

pub use error::{AutogradError, Result};
pub use grad_mode::{
    enable_grad, is_grad_enabled, no_grad, set_grad_enabled, EnableGradGuard, NoGradGuard,
};
pub use optim::{Adam, Optimizer, Sgd};

pub use autocast::{autocast, AutocastGuard, CastPolicy, DeviceType};
pub use checkpoint::{checkpoint, checkpoint_blocks};
pub use grad_scaler::GradScaler;
pub use inference_mode::{inference_mode, is_inference_mode_enabled, InferenceModeGuard};
pub use ops::attention::{AttentionArgs, AttentionSaving};
pub use ops::nn::{generator_state, manual_seed};
pub use optim::{clip_grad_norm_, AdamW};
pub use var::{GradHook, HookHandle, Var, VarOperand};
