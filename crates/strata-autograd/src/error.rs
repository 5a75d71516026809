//! Typed errors of autograd: every failure on user input is one of these.

use strata_tensor::TensorError;
use thiserror::Error;

/// Result alias for autograd operations.
pub type Result<T, E = AutogradError> = std::result::Result<T, E>;

/// Why an autograd operation failed.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum AutogradError {
    /// The underlying tensor operation failed (shapes, dtypes, devices, memory...).
    #[error(transparent)]
    Tensor(#[from] TensorError),
    /// `backward` through a part of the graph whose saved tensors were already
    /// released by an earlier `backward` without `retain_graph`.
    #[error(
        "trying to backward through the graph a second time: the saved tensors of {op} were \
         released by the previous backward; pass retain_graph = true to the first backward \
         if you need to backward twice"
    )]
    GraphReleased {
        /// The backward node whose saved tensors are gone.
        op: &'static str,
    },
    /// A tensor saved for backward was modified in place after it was saved.
    #[error(
        "one of the tensors needed for gradient computation ({op}, saved tensor {index}) has \
         been modified by an in-place operation: it was at version {saved}, it is now at \
         version {current}"
    )]
    SavedTensorModified {
        /// The backward node that saved the tensor.
        op: &'static str,
        /// Which of the node's saved tensors.
        index: usize,
        /// Version counter when saved.
        saved: u64,
        /// Version counter at backward.
        current: u64,
    },
    /// An in-place operation on a leaf that requires grad (while grad mode is on).
    #[error("a leaf tensor that requires grad is being used in an in-place operation ({op}); wrap the update in no_grad or operate on .data()")]
    InPlaceOnLeaf {
        /// The in-place op.
        op: &'static str,
    },
    /// An in-place operation, with grad mode on, on a view made in no-grad
    /// (or inference) mode of a variable that requires grad.
    #[error("{op}: this view was made in no_grad (or inference) mode of a variable that requires grad and is being modified in place with grad mode on, which PyTorch forbids as ambiguous; make the view and the in-place op both inside no_grad (not tracked) or both outside it (tracked)")]
    InPlaceOnNoGradView {
        /// The in-place op.
        op: &'static str,
    },
    /// An in-place operation, outside inference mode, on a variable made in
    /// inference mode (see [`Var::is_inference`](crate::Var::is_inference)).
    #[error(
        "{op}: in-place update to a variable made in inference mode (an inference tensor) outside \
         inference mode is not allowed; make a copy first (v.mul(1.0), or \
         Var::new(v.data().deep_clone()?)), or do the update inside inference mode"
    )]
    InferenceTensorInPlace {
        /// The in-place op (or the optimizer whose step would have written
        /// such a parameter: nothing was written).
        op: &'static str,
    },
    /// A recorded op would save for backward a variable made in inference
    /// mode (see [`Var::is_inference`](crate::Var::is_inference)).
    #[error(
        "{op}: a variable made in inference mode (an inference tensor) cannot be saved for \
         backward; use a copy of it (v.mul(1.0), or Var::new(v.data().deep_clone()?)) in \
         computation that autograd records, or make it under no_grad instead of inference mode"
    )]
    InferenceTensorSaved {
        /// The backward node that would have saved it.
        op: &'static str,
    },
    /// A recorded in-place operation on a view whose base's history cannot
    /// be rebased (PyTorch's `CopySlices`): a view made in no_grad mode (as
    /// PyTorch refuses), one whose base has elements sharing memory, or one
    /// made to require grad itself. (A view of a leaf that requires grad is
    /// [`AutogradError::InPlaceOnLeaf`].)
    #[error(
        "{op}: in-place operation recorded for backward on a view that cannot be rebased: {reason}"
    )]
    InPlaceOnView {
        /// The in-place op.
        op: &'static str,
        /// Why, and what to do instead.
        reason: &'static str,
    },
    /// A backward reached a view taken before its base (or a variable it
    /// views through other views) was modified by a recorded in-place op,
    /// and the view's history cannot be regenerated from the base's new one
    /// as PyTorch's is (the view no longer follows its base: it was made to
    /// require grad itself): the view's values include the in-place op but
    /// its history does not. Views made by recorded view ops have their
    /// history regenerated instead.
    #[error(
        "a view made by {op} was used after the variable it views was modified by a recorded \
         in-place op; its gradient would leave out that op. Take the view after the in-place \
         op, or clone the variable before modifying it in place"
    )]
    ViewOfModifiedBase {
        /// The view op (`NarrowBackward`, `TransposeBackward`, ...).
        op: &'static str,
    },
    /// A view of a variable that did not require grad, taken before that
    /// variable (or one it views, up a chain of such views) was made to
    /// require grad with `requires_grad_(true)`, used in a recorded op.
    /// As in PyTorch the view then requires grad, but it has no history
    /// leading to its base: PyTorch passes its gradient to neither the view
    /// nor the base (`z.grad` stays `None`); strata refuses instead.
    #[error(
        "a view made by {op} was taken before the variable it views was made to require grad \
         (requires_grad_(true)), so it has no history leading to that variable and its gradient \
         would be lost; take the view again after requires_grad_(true), or use it under no_grad"
    )]
    ViewBeforeRequiresGrad {
        /// The view op (`NarrowBackward`, `TransposeBackward`, ...).
        op: &'static str,
    },
    /// A gradient hook ([`Var::register_hook`](crate::Var::register_hook))
    /// returned a gradient of another shape, dtype or device.
    #[error("{msg}")]
    Hook {
        /// What the hook changed and what to return instead.
        msg: String,
    },
    /// [`backward`](crate::backward()) or [`grad`](crate::grad()) was given
    /// unusable outputs, inputs or output gradients, or (`grad`) an input
    /// no gradient reached.
    #[error("{op}: {msg}")]
    Backward {
        /// `backward` or `grad`.
        op: &'static str,
        /// What was wrong and what to do.
        msg: String,
    },
    /// `backward` on a tensor that does not require grad.
    #[error("element 0 of tensors does not require grad and does not have a grad_fn")]
    NoGradFn,
    /// `backward` without an explicit gradient on a tensor with more than one element.
    #[error("grad can be implicitly created only for scalar outputs (got shape {shape:?}); pass a gradient to backward_with")]
    NonScalarOutput {
        /// The output's shape.
        shape: Vec<usize>,
    },
    /// A gradient of the wrong shape was passed to `backward_with`.
    #[error("gradient of shape {got:?} passed for an output of shape {expected:?}")]
    GradShape {
        /// The output's shape.
        expected: Vec<usize>,
        /// The gradient's shape.
        got: Vec<usize>,
    },
    /// `requires_grad_` on a tensor that is not a leaf, or on a non-float tensor.
    #[error("requires_grad_: {msg}")]
    RequiresGrad {
        /// What was wrong.
        msg: String,
    },
    /// An optimizer hyper-parameter is out of range.
    #[error("invalid {name} for {optimizer}: {value}; expected {expected}")]
    Hyperparameter {
        /// The optimizer.
        optimizer: &'static str,
        /// The parameter.
        name: &'static str,
        /// The value given.
        value: f64,
        /// The values accepted.
        expected: &'static str,
    },
    /// An optimizer was given parameters it cannot update: the same
    /// parameter twice, a parameter that is not floating point, a gradient
    /// that shares the parameter's memory. Nothing was updated.
    #[error("{optimizer}: {msg}")]
    Optimizer {
        /// The optimizer.
        optimizer: &'static str,
        /// What was wrong and what to do.
        msg: String,
    },
    /// Options of an optimizer that do not go together (PyTorch's
    /// `ValueError` from the constructor), e.g. `SGD`'s Nesterov momentum
    /// without momentum or with dampening. The optimizer was not changed.
    #[error("{optimizer}: {msg}")]
    OptimizerOptions {
        /// The optimizer.
        optimizer: &'static str,
        /// What does not go together and what to do.
        msg: String,
    },
    /// `clip_grad_norm_` with `error_if_nonfinite`: the total norm of the
    /// gradients is NaN or infinite (PyTorch's `RuntimeError`). No gradient
    /// was changed.
    #[error(
        "clip_grad_norm_: the total norm of order {norm_type} of the gradients is non-finite \
         ({total}), so it cannot be clipped; find the NaN or infinite gradient (an overflow, \
         a division by zero in the loss), or set error_if_nonfinite to false to scale the \
         gradients by the non-finite norm anyway"
    )]
    NonFiniteNorm {
        /// The order of the norm.
        norm_type: f64,
        /// The total norm (NaN, +inf or -inf).
        total: f64,
    },
    /// An autocast region was asked for with an unsupported dtype.
    #[error("autocast: {msg}")]
    Autocast {
        /// What was wrong.
        msg: String,
    },
    /// A checkpointed function failed or was called with unusable inputs.
    #[error("checkpoint: {msg}")]
    Checkpoint {
        /// What was wrong.
        msg: String,
    },
    /// The gradient scaler was used out of order.
    #[error("GradScaler: {msg}")]
    GradScaler {
        /// What was wrong.
        msg: String,
    },
    /// A module was given unusable arguments (sizes, shapes).
    #[error("{module}: {msg}")]
    Module {
        /// The module.
        module: &'static str,
        /// What was wrong and what to do.
        msg: String,
    },
    /// Data-parallel training went wrong (a parameter on the wrong device,
    /// a gradient that left its bucket, ranks that disagree, ...).
    #[error("distributed: {msg}")]
    Distributed {
        /// What was wrong.
        msg: String,
    },
}
