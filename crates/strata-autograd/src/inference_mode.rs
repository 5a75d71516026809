//! Inference mode: [`no_grad`](crate::no_grad) plus no autograd bookkeeping
//! at all (PyTorch's `torch.inference_mode`).
//!
//! Under `no_grad` every op still looks at its inputs' autograd metadata
//! (each input's `grad_fn` lock, an edge list allocated per op) before
//! deciding not to record, and in-place ops still check the leaf and view
//! rules. Under inference mode an op goes straight from the tensor result to
//! an untracked [`Var`](crate::Var): no edge list is made, no view is
//! tracked and in-place ops skip their autograd checks. The one input
//! looked at is a view op's: a view of a variable that requires grad is
//! marked as a `no_grad` one is, so that an in-place op on it after the
//! region, with grad mode on, is refused
//! ([`AutogradError::InPlaceOnNoGradView`](crate::AutogradError), as
//! PyTorch forbids it) instead of changing that variable behind autograd's
//! back.
//! `tests/inference_mode.rs` counts the heap allocations of the same ops in
//! both modes. (The storage's version counter is strata-tensor's and is
//! still bumped by in-place ops: one atomic increment.)
//!
//! Results made in inference mode never require grad; grad mode cannot be
//! re-enabled inside it ([`enable_grad`](crate::enable_grad) has no effect
//! on recording there). They are *inference variables*
//! ([`Var::is_inference`](crate::Var::is_inference), PyTorch's inference
//! tensors), and so are views of them made anywhere: outside inference mode
//! an in-place op on one is refused
//! ([`AutogradError::InferenceTensorInPlace`](crate::AutogradError)), and so
//! is a recorded op that would save one for backward
//! ([`AutogradError::InferenceTensorSaved`](crate::AutogradError)); ops that
//! only read them (`x + r`) are fine, and a copy (`r.mul(1.0)`) is a normal
//! variable. A view made in inference mode of a normal variable is a normal
//! variable.

use crate::grad_mode::{end_grad_guard, end_guard, enter_grad_guard, enter_guard, GuardStack};
use std::cell::{Cell, RefCell};

thread_local! {
    static INFERENCE: Cell<bool> = const { Cell::new(false) };
    /// The live inference-mode guards, innermost last (see `end_guard`).
    static INFERENCE_GUARDS: GuardStack = const { RefCell::new(Vec::new()) };
}

/// Whether inference mode is on for this thread.
pub fn is_inference_mode_enabled() -> bool {
    INFERENCE.with(Cell::get)
}

/// Turns inference mode (and `no_grad`) on for this thread until dropped,
/// then restores both previous modes (guards nest).
///
/// ```
/// use strata_autograd::{InferenceModeGuard, Var, is_grad_enabled, is_inference_mode_enabled};
/// use strata_tensor::{Tensor, Device};
/// let w = Var::parameter(Tensor::ones(&[2], strata_tensor::DType::F32, Device::Cpu).unwrap()).unwrap();
/// {
///     let _g = InferenceModeGuard::new();
///     assert!(is_inference_mode_enabled() && !is_grad_enabled());
///     assert!(!w.mul(&w).unwrap().requires_grad());
/// }
/// assert!(is_grad_enabled() && !is_inference_mode_enabled());
/// ```
#[must_use = "inference mode ends as soon as the guard is dropped"]
pub struct InferenceModeGuard {
    inference_id: u64,
    grad_id: u64,
    _not_send: std::marker::PhantomData<*const ()>,
}

impl InferenceModeGuard {
    /// Turns inference mode on until the guard is dropped.
    pub fn new() -> InferenceModeGuard {
        InferenceModeGuard {
            inference_id: enter_guard(&INFERENCE_GUARDS, INFERENCE.with(|c| c.replace(true))),
            grad_id: enter_grad_guard(false),
            _not_send: std::marker::PhantomData,
        }
    }
}

impl Default for InferenceModeGuard {
    fn default() -> Self {
        InferenceModeGuard::new()
    }
}

impl Drop for InferenceModeGuard {
    fn drop(&mut self) {
        if let Some(prev) = end_guard(&INFERENCE_GUARDS, self.inference_id) {
            INFERENCE.with(|c| c.set(prev));
        }
        end_grad_guard(self.grad_id);
    }
}

/// Runs `f` in inference mode on this thread.
pub fn inference_mode<R>(f: impl FnOnce() -> R) -> R {
    let _g = InferenceModeGuard::new();
    f()
}
