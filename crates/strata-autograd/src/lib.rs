//! strata-autograd: reverse-mode automatic differentiation over strata
//! tensors, with PyTorch's semantics and memory behaviour (re-exported as
//! `strata::autograd`; the guide is `docs/autograd.md`).
//!
//! # The crate at a glance
//!
//! * **Variables and the graph.** [`Var`] is a tensor plus autograd
//!   metadata. Leaves made with [`Var::parameter`] (or `requires_grad_(true)`)
//!   accumulate gradients in [`Var::grad`] ([`Var::set_grad`],
//!   [`Var::zero_grad`]); results of recorded ops carry the node that made
//!   them. [`Var::backward`] / [`Var::backward_with`] run the graph and
//!   release each node's saved tensors as soon as it ran (a second backward
//!   needs `retain_graph`, else [`AutogradError::GraphReleased`]).
//!   [`Var::register_post_accumulate_grad_hook`] runs a hook once a leaf's
//!   gradient for the pass is final ([`HookHandle`] removes it; an error
//!   from a hook ends the pass); [`Var::register_hook`] sees (and may
//!   replace) a variable's gradient, and [`Var::retain_grad`] keeps a
//!   non-leaf's. [`backward()`] runs one pass from several outputs;
//!   [`grad()`] / [`grad_with`] return the gradients of chosen variables
//!   without touching any `.grad` (PyTorch's `torch.autograd.grad`).
//! * **Recorded ops** (`ops/`, methods of [`Var`]): arithmetic with
//!   broadcasting (`add`, `sub`, `mul`, `div`, `rsub`, operators on `&Var`,
//!   scalars through [`VarOperand`]), element-wise math (`exp`, `log`,
//!   `relu`, `gelu`, `silu`, `tanh`, `sigmoid`, `pow`, `maximum`, `clamp`,
//!   ...), reductions (`sum`, `mean`, `var`, `std`, `logsumexp`, `max`/`min`
//!   of every element, `max_dim`/`min_dim`, `amax`/`amin`, the vector
//!   `norm`), `softmax`,
//!   `log_softmax`, `cumsum`, `matmul`/`mm`/`addmm`/`linear`, views
//!   (`transpose`, `reshape`, `view`, `narrow`, `expand`, `permute`, ...),
//!   indexing (`index_select`, `gather`, `scatter_add`, `embedding`,
//!   `masked_fill`, `masked_select`, `where_cond`, `triu`, `tril`), joining
//!   (`cat`, `stack`, `split`, `chunk`), losses and normalisation
//!   (`layer_norm`, `cross_entropy`, `nll_loss`, `mse_loss`), `dropout`
//!   (its masks from the generator set by [`manual_seed`], see
//!   [`generator_state`]), `to_dtype`, and [`Var::attention`]
//!   ([`AttentionArgs`], [`AttentionSaving`]: scaled dot-product attention
//!   whose probabilities can be recomputed in backward). In place: `add_`,
//!   `sub_`, `mul_`, `div_`, `zero_`.
//! * **Grad modes.** [`no_grad`] / [`NoGradGuard`], [`enable_grad`] /
//!   [`EnableGradGuard`], [`set_grad_enabled`], and inference mode
//!   ([`inference_mode()`], [`InferenceModeGuard`]): no bookkeeping at all;
//!   its results are inference variables ([`Var::is_inference`]) that cannot
//!   be modified in place or saved for backward after the region.
//! * **Memory remedies.** [`mod@checkpoint`]: [`checkpoint()`] and
//!   [`checkpoint_blocks`] recompute a function's activations in backward
//!   (PyTorch's non-reentrant checkpoint, captured parameters included);
//!   [`mod@autocast`]: [`autocast()`] / [`AutocastGuard`] run ops in f16 or
//!   bf16 by PyTorch's cast policies ([`CastPolicy`], [`DeviceType`]) with
//!   a per-region cache of parameter copies; [`GradScaler`] scales the loss
//!   and skips steps with non-finite gradients.
//! * **Models and training.** [`nn`]: the [`nn::Module`] trait (PyTorch's
//!   parameter names, `to`, `train`/`eval`) and the layers [`nn::Linear`],
//!   [`nn::LayerNorm`], [`nn::Embedding`]. [`optim`]: the [`Optimizer`]
//!   trait, [`Sgd`] (momentum, dampening, Nesterov, weight decay, maximize),
//!   [`Adam`] and [`AdamW`] (fused steps over lists of parameters, AMSGrad,
//!   maximize), [`clip_grad_norm_`] and [`ClipGradNorm`] (any norm type,
//!   `error_if_nonfinite`), [`clip_grad_value_`]; every optimizer
//!   reads and sets its learning rate and saves and loads its state as
//!   named tensors ([`Optimizer::state_dict`], PyTorch's names, for
//!   resuming training from a safetensors checkpoint), and
//!   [`optim::lr_scheduler`] holds PyTorch's schedules (step, multi-step,
//!   exponential, cosine, linear warm-up, lambda, sequential).
//! * **Data parallelism.** [`distributed`]:
//!   [`distributed::DistributedDataParallel`] averages gradients across
//!   ranks in buckets launched from post-accumulate-grad hooks during
//!   backward, over NCCL ([`distributed::NcclRank`]) or an in-process group
//!   ([`distributed::LocalGroup`]).
//!
//! # Errors
//!
//! Every failure on user input is a typed [`AutogradError`] (tensor errors
//! under [`AutogradError::Tensor`]), never a panic, and a call that fails
//! leaves the state it was given as it was (gradients, optimizer moments,
//! the dropout generator, version counters). PyTorch's rules are followed:
//! saved tensors carry their version ([`AutogradError::SavedTensorModified`]
//! when modified in place before backward, checked before the pass changes
//! any gradient), in-place ops on leaves that require grad and on views of
//! them ([`AutogradError::InPlaceOnLeaf`]) are refused, as are those on views
//! made in no-grad mode or returned by `split`/`chunk`
//! ([`AutogradError::InPlaceOnView`], [`AutogradError::InPlaceOnNoGradView`]),
//! optimizer hyper-parameters are checked
//! ([`AutogradError::Hyperparameter`]).
//!
//! A recorded in-place op on any other view rebases its base's history, as
//! PyTorch's `CopySlices`: the base's gradient is the incoming one with the
//! view's region replaced by the op's gradient there, and views of the base
//! whose history is out of date have it regenerated from the base's new one.
//!
//! ```
//! use strata_autograd::Var;
//! use strata_tensor::{Device, Tensor};
//! let x = Var::parameter(Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[4], Device::Cpu)?)?;
//! let y = x.mul(2.0)?;
//! let v = y.narrow(0, 1, 2)?;
//! v.mul_(3.0)?;
//! assert_eq!(y.grad_fn_name(), Some("CopySlices"));
//! y.sum(None, false)?.backward()?;
//! assert_eq!(x.grad().unwrap().to_vec::<f32>()?, vec![2.0, 6.0, 6.0, 2.0]);
//! # Ok::<(), strata_autograd::AutogradError>(())
//! ```
//!
//! # Example
//!
//! A few steps of training a linear classifier:
//!
//! ```
//! use strata_autograd::nn::{Linear, Module};
//! use strata_autograd::{clip_grad_norm_, manual_seed, no_grad, AdamW, Optimizer, Var};
//! use strata_tensor::{CrossEntropyArgs, DType, Device, Tensor};
//!
//! manual_seed(0);
//! let fc = Linear::new(4, 3, true, Device::Cpu)?;
//! let mut opt = AdamW::new(fc.parameters()).with_lr(0.05)?;
//! let x = Var::new(Tensor::randn(&[8, 4], DType::F32, 1, Device::Cpu)?);
//! let y = Tensor::from_slice(&[0i64, 1, 2, 0, 1, 2, 0, 1], &[8], Device::Cpu)?;
//! let loss = |fc: &Linear| fc.forward(&x)?.cross_entropy(&y, CrossEntropyArgs::default());
//! let first = loss(&fc)?.item::<f32>()?;
//! for _ in 0..20 {
//!     opt.zero_grad(true)?;
//!     loss(&fc)?.backward()?;
//!     clip_grad_norm_(opt.params(), 1.0)?;
//!     opt.step()?;
//! }
//! let last = no_grad(|| loss(&fc))?;
//! assert!(!last.requires_grad());
//! assert!(last.item::<f32>()? < first);
//! // A graph is released by its backward.
//! let l = loss(&fc)?;
//! l.backward()?;
//! assert!(l.backward().is_err());
//! # Ok::<(), strata_autograd::AutogradError>(())
//! ```

#![warn(missing_docs)]

mod backward;
mod display;
mod engine;
mod error;
mod grad_mode;
mod hooks;
mod node;
mod ops;
pub mod optim;
mod var;
mod weak;

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
pub use backward::{backward, grad, grad_with, GradArgs};
pub use checkpoint::{checkpoint, checkpoint_blocks};
pub use grad_scaler::GradScaler;
pub use hooks::{GradHook, HookHandle, TensorHook};
pub use inference_mode::{inference_mode, is_inference_mode_enabled, InferenceModeGuard};
pub use ops::attention::{AttentionArgs, AttentionSaving};
pub use ops::cdist::CdistMode;
pub use ops::nn::{generator_state, manual_seed};
pub use optim::{clip_grad_norm_, clip_grad_value_, AdamW, ClipGradNorm};
pub use var::{Var, VarOperand};
pub use weak::WeakVar;
// session 79 (helper 132): torch.linalg on variables, `strata_autograd::linalg::inv(&a)`
pub use ops::linalg;
