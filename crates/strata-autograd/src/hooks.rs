//! Gradient hooks, PyTorch's three kinds:
//!
//! * [`Var::register_hook`]: a function that sees a variable's gradient
//!   during backward, before it flows on (into the node that made the
//!   variable, or into a leaf's `.grad`), and may replace it;
//! * [`Var::retain_grad`]: a non-leaf keeps its gradient in `.grad`;
//! * [`Var::register_post_accumulate_grad_hook`]: a function run once a
//!   leaf's gradient for the pass is final.
//!
//! A leaf keeps its hooks itself. A non-leaf's tensor hooks and its
//! retained gradient live on the node that made it ([`OutputHooks`]), where
//! the backward pass meets its gradient: the tensor hooks stay with that
//! node when an in-place op gives the variable a new history (they see the
//! gradient of the value they were registered on), while `retain_grad`
//! moves to the new node (`.grad` is the gradient of the current value), as
//! in PyTorch.

use crate::error::{AutogradError, Result};
use crate::node::Node;
use crate::var::{Var, VarInner};
use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use strata_tensor::{DType, Tensor};

/// A hook run once per backward pass after a leaf's gradient for that pass
/// is final (see [`Var::register_post_accumulate_grad_hook`]).
pub type GradHook = Arc<dyn Fn(&Var) -> Result<()> + Send + Sync>;

/// A hook on a variable's gradient (see [`Var::register_hook`]): given the
/// gradient, it returns `None` to let it flow on unchanged, or a
/// replacement of the same shape, dtype and device.
pub type TensorHook = Arc<dyn Fn(&Tensor) -> Result<Option<Tensor>> + Send + Sync>;

/// Hooks of one kind on one variable, with the id of each, in
/// registration order.
pub(crate) type HookList<H> = Mutex<Vec<(u64, H)>>;

/// What a [`HookHandle`] removes its hook from.
trait Unregister: Send + Sync {
    fn unregister(&self, id: u64);
}

impl<H: Send> Unregister for HookList<H> {
    fn unregister(&self, id: u64) {
        self.lock().retain(|(i, _)| *i != id);
    }
}

/// Removes a hook registered with [`Var::register_hook`] or
/// [`Var::register_post_accumulate_grad_hook`].
pub struct HookHandle {
    id: u64,
    list: Weak<dyn Unregister>,
}

impl std::fmt::Debug for HookHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HookHandle").field("id", &self.id).finish()
    }
}

impl HookHandle {
    /// A handle that removes nothing: the handle of a hook registered in a
    /// checkpointed forward, which the recomputation registers again.
    fn inert() -> HookHandle {
        let none: Weak<HookList<TensorHook>> = Weak::new();
        HookHandle { id: 0, list: none }
    }

    /// Unregisters the hook (a no-op if the variable is gone).
    pub fn remove(self) {
        if let Some(list) = self.list.upgrade() {
            list.unregister(self.id);
        }
    }
}

/// The hooks of `list` now, to run outside its lock (a hook may register or
/// remove hooks).
fn snapshot<H: Clone>(list: &HookList<H>) -> Vec<H> {
    list.lock().iter().map(|(_, h)| h.clone()).collect()
}

/// Appends `hook` to `list`, returning the handle that removes it.
fn push<H: Send + 'static>(list: &Arc<HookList<H>>, hook: H) -> HookHandle {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let id = NEXT.fetch_add(1, Ordering::Relaxed);
    list.lock().push((id, hook));
    let list: Arc<dyn Unregister> = Arc::clone(list) as Arc<dyn Unregister>;
    HookHandle {
        id,
        list: Arc::downgrade(&list),
    }
}

/// Runs the tensor hooks of `list` on `grad` in registration order, each
/// on what the one before returned, converting `grad` to `dtype` first
/// (autocast's casts pass their gradient on in the dtype they cast to; a
/// hook sees the variable's own). A replacement must match the gradient's
/// shape, dtype and device, as PyTorch checks it.
pub(crate) fn run_tensor_hooks(
    list: &HookList<TensorHook>,
    grad: Tensor,
    dtype: DType,
) -> Result<Tensor> {
    let hooks = snapshot(list);
    if hooks.is_empty() {
        return Ok(grad);
    }
    let mut grad = grad.to_dtype_contiguous(dtype)?;
    for hook in hooks {
        if let Some(new) = hook(&grad)? {
            let changed = if new.shape() != grad.shape() {
                Some(format!(
                    "size (was {:?}, got {:?})",
                    grad.shape(),
                    new.shape()
                ))
            } else if new.dtype() != grad.dtype() {
                Some(format!("dtype (was {}, got {})", grad.dtype(), new.dtype()))
            } else if new.device() != grad.device() {
                Some(format!(
                    "device (was {}, got {})",
                    grad.device(),
                    new.device()
                ))
            } else {
                None
            };
            if let Some(what) = changed {
                return Err(AutogradError::Hook {
                    msg: format!(
                        "a gradient hook returned a gradient of another {what}; return None to \
                         keep the gradient, or a tensor of its shape, dtype and device"
                    ),
                });
            }
            grad = new;
        }
    }
    Ok(grad)
}

/// The gradient hooks of the variable a node made (see the module docs).
pub(crate) struct OutputHooks {
    /// The variable's dtype: what its hooks and `.grad` see.
    dtype: DType,
    /// Its tensor hooks registered while this node was its history.
    tensor: Arc<HookList<TensorHook>>,
    /// The variable keeping its gradient in `.grad`, while this node is its
    /// history.
    retains: Mutex<Option<Weak<VarInner>>>,
}

impl OutputHooks {
    pub(crate) fn new(dtype: DType) -> OutputHooks {
        OutputHooks {
            dtype,
            tensor: Arc::default(),
            retains: Mutex::new(None),
        }
    }

    /// What flows on from a gradient `grad` reaching the node: `grad` after
    /// the tensor hooks, which the retaining variable (if any) adds into its
    /// `.grad` (out of place, as PyTorch's retains-grad hook does), after
    /// converting it to its dtype.
    pub(crate) fn apply(&self, grad: Tensor) -> Result<Tensor> {
        let grad = run_tensor_hooks(&self.tensor, grad, self.dtype)?;
        let retains = self.retains.lock().as_ref().and_then(Weak::upgrade);
        if let Some(v) = retains {
            v.retain(grad.to_dtype_contiguous(self.dtype)?)?;
        }
        Ok(grad)
    }

    /// Moves the variable retaining its gradient, if any, to the hooks of
    /// `to` (made by `init` if need be): the variable's new history after an
    /// in-place op.
    pub(crate) fn move_retains_to(&self, to: &Node, init: impl FnOnce() -> OutputHooks) {
        if let Some(v) = self.retains.lock().take() {
            *to.output_hooks_or_init(init).retains.lock() = Some(v);
        }
    }

    /// Whether `v` is the variable retaining its gradient here.
    fn retained_by(&self, v: &Arc<VarInner>) -> bool {
        self.retains
            .lock()
            .as_ref()
            .is_some_and(|w| std::ptr::eq(w.as_ptr(), Arc::as_ptr(v)))
    }
}

impl Var {
    /// Registers `hook`, called with this variable's gradient every time a
    /// backward pass (or [`grad`](crate::grad())) computes it, before it
    /// flows on; it returns `None` to keep the gradient or `Some`
    /// replacement of the same shape, dtype and device (anything else ends
    /// the pass with [`AutogradError::Hook`]). PyTorch's `register_hook`.
    ///
    /// Hooks run in registration order, each on what the one before
    /// returned, with grad mode off. On a leaf they see the sum of the
    /// pass's gradients for it, before it is added into `.grad`; on a
    /// non-leaf, the gradient the node that made it receives (a hook
    /// registered before an in-place op on the variable sees the gradient
    /// of the value before that op, as in PyTorch). An error from a hook
    /// ends the pass with that error.
    ///
    /// Only variables that require grad have gradients: anything else is
    /// an [`AutogradError::RequiresGrad`] error. Inside a function run by
    /// [`checkpoint`](crate::checkpoint()), the values that depend on its
    /// inputs or captured parameters requiring grad are accepted (they
    /// would require grad in PyTorch): the registration does nothing, its
    /// handle removes nothing, and the recomputation during backward
    /// registers the hook again on the value it remakes, where it sees the
    /// gradient (see the `checkpoint` module docs).
    ///
    /// A hook that holds the variable it is registered on (or, on a
    /// non-leaf, anything holding the graph behind it) makes a reference
    /// cycle: neither is freed until the hook is removed
    /// ([`HookHandle::remove`]). A hook that needs the variable holds a
    /// [`WeakVar`](crate::WeakVar) of it ([`Var::downgrade`]) instead.
    ///
    /// ```
    /// use strata_autograd::Var;
    /// use strata_tensor::{DType, Device, Tensor};
    ///
    /// let x = Var::parameter(Tensor::ones(&[2], DType::F32, Device::Cpu)?)?;
    /// let y = x.mul(3.0)?;
    /// // Doubles the gradient flowing back through y.
    /// y.register_hook(|g| Ok(Some(g.mul(2.0)?)))?;
    /// y.sum(None, false)?.backward()?;
    /// assert_eq!(x.grad().unwrap().to_vec::<f32>()?, vec![6.0, 6.0]);
    /// # Ok::<(), strata_autograd::AutogradError>(())
    /// ```
    pub fn register_hook(
        &self,
        hook: impl Fn(&Tensor) -> Result<Option<Tensor>> + Send + Sync + 'static,
    ) -> Result<HookHandle> {
        if !self.requires_grad() {
            if crate::checkpoint::defers_hook(self) {
                return Ok(HookHandle::inert());
            }
            return Err(AutogradError::RequiresGrad {
                msg: "cannot register a hook on a variable that does not require grad".into(),
            });
        }
        let hook: TensorHook = Arc::new(hook);
        Ok(match self.grad_fn() {
            Some(node) => push(&self.output_hooks(&node).tensor, hook),
            None => push(self.inner.tensor_hooks.get_or_init(Default::default), hook),
        })
    }

    /// Makes this non-leaf keep its gradient in [`Var::grad`] during
    /// backward (added up over passes, like a leaf's, until
    /// [`Var::zero_grad`] or [`Var::set_grad`]); a no-op on a leaf, whose
    /// gradient is kept anyway. PyTorch's `retain_grad`: after an in-place
    /// op on the variable, `.grad` is the gradient of its new value.
    ///
    /// A variable that does not require grad is an
    /// [`AutogradError::RequiresGrad`] error; inside a function run by
    /// [`checkpoint`](crate::checkpoint()), one that would require grad in
    /// PyTorch is an [`AutogradError::Checkpoint`] error (the recomputation
    /// remakes it, and the variable `f` holds would never get a `.grad`).
    ///
    /// ```
    /// use strata_autograd::Var;
    /// use strata_tensor::{DType, Device, Tensor};
    ///
    /// let x = Var::parameter(Tensor::ones(&[2], DType::F32, Device::Cpu)?)?;
    /// let y = x.mul(3.0)?;
    /// y.retain_grad()?;
    /// y.mul(&y)?.sum(None, false)?.backward()?;
    /// assert_eq!(y.grad().unwrap().to_vec::<f32>()?, vec![6.0, 6.0]);
    /// # Ok::<(), strata_autograd::AutogradError>(())
    /// ```
    pub fn retain_grad(&self) -> Result<()> {
        if !self.requires_grad() {
            if crate::checkpoint::forward_depends(self) {
                return Err(AutogradError::Checkpoint {
                    msg: "retain_grad inside a checkpointed function: backward recomputes the \
                          variable, so the one the function holds would never get a .grad; \
                          register_hook a function that keeps the gradient, or retain_grad \
                          on a value outside the checkpoint"
                        .into(),
                });
            }
            return Err(AutogradError::RequiresGrad {
                msg: "cannot retain the gradient of a variable that does not require grad".into(),
            });
        }
        let Some(node) = self.grad_fn() else {
            return Ok(());
        };
        *self.output_hooks(&node).retains.lock() = Some(Arc::downgrade(&self.inner));
        Ok(())
    }

    /// Whether this non-leaf keeps its gradient ([`Var::retain_grad`]).
    pub fn retains_grad(&self) -> bool {
        self.grad_fn()
            .is_some_and(|n| n.output_hooks().is_some_and(|h| h.retained_by(&self.inner)))
    }

    /// Registers `hook`, run by every backward pass that reaches this leaf
    /// once the leaf's gradient for that pass is final: after the last of
    /// the pass's gradients for it was added into `.grad` (PyTorch's
    /// `register_post_accumulate_grad_hook`). It runs once per pass even
    /// when the leaf is used several times, and also when no gradient
    /// flowed along the edges that reach it (then `.grad` is unchanged). An
    /// error from a hook ends the backward pass with that error.
    ///
    /// Only leaves that require grad have gradients: anything else is an
    /// [`AutogradError::RequiresGrad`] error.
    pub fn register_post_accumulate_grad_hook(
        &self,
        hook: impl Fn(&Var) -> Result<()> + Send + Sync + 'static,
    ) -> Result<HookHandle> {
        if !self.is_leaf() || !self.inner.requires_grad_flag() {
            return Err(AutogradError::RequiresGrad {
                msg:
                    "post-accumulate-grad hooks can only be registered on leaves that require grad"
                        .into(),
            });
        }
        let list = self.inner.hooks.get_or_init(Default::default);
        Ok(push(list, Arc::new(hook) as GradHook))
    }

    /// The hooks of the variable that `node` (its history) holds.
    fn output_hooks<'n>(&self, node: &'n Arc<Node>) -> &'n OutputHooks {
        node.output_hooks_or_init(|| OutputHooks::new(self.dtype()))
    }
}

impl VarInner {
    /// Adds `g` (of this variable's dtype) into a non-leaf's retained
    /// `.grad`, out of place.
    fn retain(&self, g: Tensor) -> Result<()> {
        let mut slot = self.grad.lock();
        let sum = match &slot.grad {
            Some(prev) => prev.add(&g)?,
            None => g.clone_contiguous()?,
        };
        slot.grad = Some(sum);
        Ok(())
    }

    /// Whether this leaf has tensor hooks ([`Var::register_hook`]): its
    /// gradients for a pass are then summed before they are added into
    /// `.grad`, so that the hooks see the pass's whole gradient.
    pub(crate) fn has_tensor_hooks(&self) -> bool {
        self.tensor_hooks
            .get()
            .is_some_and(|l| !l.lock().is_empty())
    }

    /// Runs this leaf's tensor hooks on the pass's gradient for it.
    pub(crate) fn run_tensor_hooks(&self, grad: Tensor) -> Result<Tensor> {
        match self.tensor_hooks.get() {
            Some(list) => run_tensor_hooks(list, grad, self.data.dtype()),
            None => Ok(grad),
        }
    }

    /// Makes `self` (a new leaf) run `other`'s hooks, and those registered
    /// on either later: the lists are shared, and the hooks' handles remove
    /// them from both (`Module::to`'s converted copy of a parameter). A
    /// no-op for a kind of hook `self` has a list of already.
    pub(crate) fn share_hooks_of(&self, other: &VarInner) {
        if let Some(h) = other.hooks.get() {
            let _ = self.hooks.set(Arc::clone(h));
        }
        if let Some(h) = other.tensor_hooks.get() {
            let _ = self.tensor_hooks.set(Arc::clone(h));
        }
    }

    /// Runs the post-accumulate-grad hooks.
    pub(crate) fn run_grad_hooks(self: &Arc<Self>) -> Result<()> {
        let Some(list) = self.hooks.get() else {
            return Ok(());
        };
        let hooks = snapshot(list);
        if hooks.is_empty() {
            return Ok(());
        }
        let var = Var {
            inner: Arc::clone(self),
        };
        for h in hooks {
            h(&var)?;
        }
        Ok(())
    }
}
