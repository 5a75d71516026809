//! [`Var`]: a tensor that may take part in gradient computation.

use crate::error::{AutogradError, Result};
use crate::grad_mode::is_grad_enabled;
use crate::hooks::{GradHook, HookList, TensorHook};
use crate::node::{BackwardFn, Edge, Node};
use crate::ops::copy_slices::{view_node, ViewOf, ViewStep};
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use strata_tensor::{DType, Device, Element, Scalar, Tensor, TensorError};

/// A tensor plus its autograd metadata: whether it requires grad, the node
/// that produced it (none for leaves), and, for leaves, the accumulated
/// gradient.
///
/// Cloning a `Var` is cheap and yields another handle on the same variable
/// (same data, same `.grad`).
///
/// ```
/// use strata_autograd::Var;
/// use strata_tensor::{Tensor, Device};
/// let x = Var::new(Tensor::from_slice(&[1.0f64, 2.0, 3.0], &[3], Device::Cpu).unwrap());
/// x.requires_grad_(true).unwrap();
/// let y = x.mul(&x).unwrap().sum(None, false).unwrap();   // sum(x²)
/// y.backward().unwrap();
/// assert_eq!(x.grad().unwrap().to_vec::<f64>().unwrap(), vec![2.0, 4.0, 6.0]);
/// ```
#[derive(Clone)]
pub struct Var {
    pub(crate) inner: Arc<VarInner>,
}

/// Whether a variable is an inference variable (PyTorch's inference tensor).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Inference {
    /// A normal variable.
    No,
    /// Made in inference mode, or a view of an inference variable.
    Yes,
    /// Made by [`Var::detach`] of an inference variable: still one (not
    /// saved for backward, not made to require grad), but modified in place
    /// anywhere, as PyTorch allows `x.detach().add_(1)` of an inference
    /// tensor `x` outside inference mode (views of it refuse again).
    Detached,
}

pub(crate) struct VarInner {
    pub(crate) data: Tensor,
    /// The node that produced this variable; `None` for leaves.
    grad_fn: Mutex<Option<Arc<Node>>>,
    /// For leaves: the user's flag. Non-leaves require grad by construction.
    requires_grad: AtomicBool,
    /// The accumulated gradient and where a first one is written (leaves only).
    pub(crate) grad: Mutex<GradSlot>,
    /// Made by a view op.
    is_view: bool,
    /// For a view made by a recorded view op (with grad mode on or off,
    /// outside inference mode): its base and the view ops from there, so
    /// that a recorded in-place op on it rebases the base's history and a
    /// history out of date is regenerated (see `ops::copy_slices`). `None`
    /// for other variables, and for a view made to require grad itself
    /// (a leaf: in-place ops on it are refused, and its base's history
    /// may hold it, which a link back would make a cycle).
    view_of: Mutex<Option<Arc<ViewOf>>>,
    /// Made by a view op in no-grad or inference mode from a variable that
    /// requires grad (or from such a view): an in-place op on it with grad
    /// mode on is refused, as PyTorch refuses it
    /// (`CreationMeta::NO_GRAD_MODE`, `INFERENCE_MODE`).
    no_grad_view: bool,
    /// Stands, inside a checkpointed forward, for a leaf that requires grad
    /// (the function's detached copy of such an input, or a view of one):
    /// an in-place op on it is refused, as PyTorch refuses it on the leaf
    /// itself (its forward runs with grad mode on).
    stands_for_leaf: bool,
    /// Made in inference mode (PyTorch's inference tensor): the result of
    /// an op run there, or a view of such a variable made anywhere. Outside
    /// inference mode it is not modified in place
    /// ([`AutogradError::InferenceTensorInPlace`]), not saved for backward
    /// ([`AutogradError::InferenceTensorSaved`]) and not made to require grad.
    inference: Inference,
    /// Post-accumulate-grad hooks (leaves only), with the id of each; made
    /// at the first registration. Shared with the converted copy that
    /// `Module::to` makes of a parameter, so that its hooks (and their
    /// handles) carry over, as PyTorch's stay on the converted parameter.
    pub(crate) hooks: std::sync::OnceLock<Arc<HookList<GradHook>>>,
    /// Tensor hooks (leaves only; a non-leaf's live on the node that made
    /// it, see `hooks.rs`), shared like `hooks`.
    pub(crate) tensor_hooks: std::sync::OnceLock<Arc<HookList<TensorHook>>>,
    /// For a view made of a variable that did not require grad: that
    /// variable's [`ViewSource`], its rebase count then, and the view op's
    /// node name. Should the variable (or one it views, up such a chain)
    /// gain a history since, by a recorded in-place op, this view's values
    /// include that op but it has no history for it; should it be made to
    /// require grad, this view requires grad but has no history leading to
    /// it (see [`Var::untracked_view_state`]). Held strongly, so that it is
    /// known after the variable is dropped.
    untracked_view_of: Option<(ViewLink, &'static str)>,
    /// What views of this variable read about it (made when the first view
    /// is taken; see [`ViewSource`]).
    source: std::sync::OnceLock<Arc<ViewSource>>,
    /// Replaced in its module by a converted copy (`Module::to` to another
    /// device or dtype): an optimizer still holding it is refused.
    replaced_by_to: AtomicBool,
}

/// What the views of a variable need to know about it, shared by the
/// variable and its views (and the nodes of its views) so that it outlives
/// the variable: a view whose base was modified by a recorded in-place op,
/// or made to require grad, and then dropped is still caught (session 35;
/// before, views held the base weakly and missed both once it was gone).
/// It holds no tensor and no node, so it creates no reference cycle.
pub(crate) struct ViewSource {
    /// How many times the variable's history was replaced by an in-place op.
    rebases: AtomicU64,
    /// The variable's own `requires_grad` flag (leaves).
    requires_grad: AtomicBool,
    /// For a variable that is itself a view of one that did not require
    /// grad: that variable's link (see `VarInner::untracked_view_of`).
    parent: Option<ViewLink>,
    /// The state of the chain of links from `parent` up (see
    /// [`chain_state`]) as of a [`VIEW_EPOCH`]: `epoch << 2 | state`, 0
    /// before it is first known.
    above: AtomicU64,
}

/// Counts the changes of every [`ViewSource`] (a variable's history
/// replaced by an in-place op, its `requires_grad` flag set), each counted
/// after the change: a chain state cached at an older count is read
/// afresh. A chain of views of views is then walked once, not at every
/// use of every view in it (a chain of 100,000 views walked its whole
/// length at each new view: 27 s in a release build).
static VIEW_EPOCH: AtomicU64 = AtomicU64::new(1);

/// Notes a change of a [`ViewSource`] (after it is made).
fn view_source_changed() {
    VIEW_EPOCH.fetch_add(1, Ordering::AcqRel);
}

/// [`UntrackedView`] states as ordered numbers (the larger wins along a
/// chain: a modified variable anywhere up the chain makes the view stale).
const CHAIN_NONE: u64 = 0;
const CHAIN_REQUIRES_GRAD: u64 = 1;
const CHAIN_MODIFIED: u64 = 2;

/// The state of the chain of links from `link` up: [`CHAIN_MODIFIED`] if
/// a variable on it had its history replaced since its link was taken,
/// else [`CHAIN_REQUIRES_GRAD`] if one was made to require grad, else
/// [`CHAIN_NONE`]. Each source on the way caches the state above it, so a
/// chain is walked up to the first source whose cache is current.
fn chain_state(link: &ViewLink) -> u64 {
    let epoch = VIEW_EPOCH.load(Ordering::Acquire);
    let own = |l: &ViewLink| {
        if l.rebased() {
            CHAIN_MODIFIED
        } else if l.source.requires_grad.load(Ordering::Acquire) {
            CHAIN_REQUIRES_GRAD
        } else {
            CHAIN_NONE
        }
    };
    let cached = |l: &ViewLink| {
        let c = l.source.above.load(Ordering::Acquire);
        (c >> 2 == epoch).then_some(c & 3)
    };
    // The links up to the first with a current cache (or the top).
    let mut walked = vec![link];
    let mut above = loop {
        let l = walked[walked.len() - 1];
        if let Some(state) = cached(l) {
            break state;
        }
        match l.source.parent.as_ref() {
            Some(p) => walked.push(p),
            None => break CHAIN_NONE,
        }
    };
    for l in walked.into_iter().rev() {
        l.source.above.store(epoch << 2 | above, Ordering::Release);
        above = above.max(own(l));
    }
    above
}

impl Drop for ViewSource {
    /// Unlinks the chain of variables this one views iteratively: a chain
    /// of a hundred thousand views of views dropped recursively would
    /// overflow the stack.
    fn drop(&mut self) {
        let mut parent = self.parent.take();
        while let Some(link) = parent {
            parent = match Arc::try_unwrap(link.source) {
                // Dropped with no parent left to drop.
                Ok(mut source) => source.parent.take(),
                // Another view still holds the rest.
                Err(_) => None,
            };
        }
    }
}

/// A [`ViewSource`] and its rebase count when a view was taken.
#[derive(Clone)]
pub(crate) struct ViewLink {
    source: Arc<ViewSource>,
    rebases: u64,
}

impl ViewLink {
    /// Whether the variable has had its history replaced since the view.
    pub(crate) fn rebased(&self) -> bool {
        self.source.rebases.load(Ordering::Acquire) != self.rebases
    }
}

/// What an untracked view (see `VarInner::untracked_view_of`) has become.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum UntrackedView {
    /// A variable up its chain gained a history by a recorded in-place op.
    BaseModified,
    /// A variable up its chain was made to require grad.
    BaseRequiresGrad,
}

/// A leaf's `.grad`, and the storage a first gradient is copied into when
/// `.grad` is `None` (set by [`DistributedDataParallel`](crate::distributed::DistributedDataParallel)
/// for its bucket views; otherwise a first gradient gets fresh storage).
#[derive(Default)]
pub(crate) struct GradSlot {
    pub(crate) grad: Option<Tensor>,
    destination: Option<Tensor>,
}

/// PyTorch's gradient layout contract (`obeys_layout_contract` in
/// `torch/csrc/autograd/utils/grad_layout_contract.h`): a gradient obeys a
/// non-overlapping and dense parameter when it has the parameter's strides
/// on every dim of size other than 1 (and no stride 0 on a dim of size 1);
/// for any other parameter (overlapping, or with gaps) when it is
/// row-major contiguous. An empty parameter counts as non-overlapping and
/// dense whatever its strides (PyTorch's `is_non_overlapping_and_dense` is
/// true for every tensor of no element).
pub(crate) fn obeys_layout_contract(grad: &Tensor, param: &Tensor) -> bool {
    if dense_param(param) {
        grad.shape()
            .iter()
            .zip(grad.strides().iter().zip(param.strides()))
            .all(|(&size, (&gs, &ps))| if size == 1 { gs != 0 } else { gs == ps })
    } else {
        grad.is_contiguous()
    }
}

/// Whether PyTorch counts `param` non-overlapping and dense: a dense layout,
/// or no element at all (an empty leaf of strides `[0, 0]` gets a `.grad` of
/// strides `[0, 0]`, as in PyTorch; strata gave it row-major ones).
fn dense_param(param: &Tensor) -> bool {
    param.numel() == 0 || param.layout().is_dense()
}

/// A leaf's first gradient, in fresh storage of the leaf's dtype, laid out
/// as PyTorch's AccumulateGrad lays it out: `g`'s own strides when it obeys
/// the layout contract with `param` (PyTorch steals such a gradient), else
/// the parameter's strides when the parameter is non-overlapping and dense
/// (`clone_obey_contract`'s `empty_strided` like the parameter), else
/// row-major. A transposed parameter thus gets a transposed `.grad`, an
/// expanded one a contiguous `.grad`.
fn first_grad(param: &Tensor, g: &Tensor) -> Result<Tensor> {
    let dtype = param.dtype();
    let shape = param.shape();
    let strides = if obeys_layout_contract(g, param) {
        g.strides()
    } else if dense_param(param) {
        param.strides()
    } else {
        &[]
    };
    let row_major = strata_tensor::shape::contiguous_strides(shape);
    if strides.is_empty() || strides == row_major.as_slice() {
        if g.numel() == 0 {
            // Row-major, not `g`'s strides: a conversion of an empty tensor
            // keeps its strides (PyTorch's `.to` does), and an empty `g` may
            // be an expanded one (strides 0).
            return Ok(Tensor::empty(shape, dtype, g.device())?);
        }
        return Ok(if g.dtype() != dtype {
            g.to_dtype_contiguous(dtype)?
        } else {
            g.clone_contiguous()?
        });
    }
    // `empty_strided`: storage for one past the largest index the layout
    // reaches (the strides are a dense layout's, so this is the numel plus
    // nothing but what dims of size 1 add, which is nothing).
    let extent = if shape.contains(&0) {
        0
    } else {
        1 + shape
            .iter()
            .zip(strides)
            .map(|(&n, &st)| (n - 1) * st)
            .sum::<usize>()
    };
    let sizes: Vec<i64> = shape.iter().map(|&n| n as i64).collect();
    let strides: Vec<i64> = strides.iter().map(|&st| st as i64).collect();
    let out = Tensor::empty(&[extent], dtype, g.device())?.as_strided(&sizes, &strides, Some(0))?;
    out.copy_(g)?;
    Ok(out)
}

impl VarInner {
    /// Adds `g` into `.grad`. A gradient of another dtype is converted to
    /// the leaf's first (autocast's casts pass their gradient on unconverted,
    /// so that the conversion is fused with what happens here). The first
    /// gradient is copied into the destination set by
    /// [`VarInner::set_grad_destination`], or else into fresh storage
    /// (gradients flowing through the graph may alias each other or be
    /// broadcast views; a converted one is fresh already); later ones are
    /// added in place.
    ///
    /// The first gradient's strides follow PyTorch's layout contract (see
    /// [`first_grad`]); later ones are added in place, keeping whatever
    /// strides `.grad` has (PyTorch's in-place `variable_grad += new_grad`).
    pub(crate) fn accumulate(&self, g: Tensor) -> Result<()> {
        let dtype = self.data.dtype();
        let mut slot = self.grad.lock();
        if let Some(existing) = slot.grad.as_ref() {
            // `.grad` has the leaf's shape: `set_grad` refuses any other.
            let g = if g.dtype() != dtype {
                g.to_dtype_contiguous(dtype)?
            } else {
                g
            };
            existing.add_(&g)?;
            return Ok(());
        }
        let first = match &slot.destination {
            Some(d) => {
                d.copy_(&g)?;
                d.clone()
            }
            None => first_grad(&self.data, &g)?,
        };
        slot.grad = Some(first);
        Ok(())
    }

    /// Where a first gradient is written while `.grad` is `None` (a tensor
    /// of the leaf's shape, dtype and device, checked by the caller), or
    /// `None` for fresh storage.
    pub(crate) fn set_grad_destination(&self, destination: Option<Tensor>) {
        self.grad.lock().destination = destination;
    }

    /// The destination set by [`VarInner::set_grad_destination`].
    pub(crate) fn grad_destination(&self) -> Option<Tensor> {
        self.grad.lock().destination.clone()
    }

    /// The leaf's own `requires_grad` flag now.
    pub(crate) fn requires_grad_flag(&self) -> bool {
        self.requires_grad.load(Ordering::Acquire)
    }

    /// Marks this parameter as replaced in its module by a converted copy
    /// (see `replaced_by_to`).
    pub(crate) fn mark_replaced_by_to(&self) {
        self.replaced_by_to.store(true, Ordering::Release);
    }

    /// Whether [`VarInner::mark_replaced_by_to`] was called.
    pub(crate) fn replaced_by_to(&self) -> bool {
        self.replaced_by_to.load(Ordering::Acquire)
    }

    /// The data's version counter.
    pub(crate) fn version(&self) -> u64 {
        self.data.version()
    }

    /// A link to this variable's [`ViewSource`] as it is now, for a view
    /// being taken of it.
    pub(crate) fn view_link(&self) -> ViewLink {
        let source = self.source.get_or_init(|| {
            Arc::new(ViewSource {
                rebases: AtomicU64::new(0),
                requires_grad: AtomicBool::new(self.requires_grad_flag()),
                parent: self.untracked_view_of.as_ref().map(|(l, _)| l.clone()),
                above: AtomicU64::new(0),
            })
        });
        ViewLink {
            rebases: source.rebases.load(Ordering::Acquire),
            source: Arc::clone(source),
        }
    }
}

impl std::fmt::Debug for Var {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Var")
            .field("data", &self.inner.data)
            .field("requires_grad", &self.requires_grad())
            .field("grad_fn", &self.grad_fn_name())
            .finish()
    }
}

impl From<Tensor> for Var {
    fn from(t: Tensor) -> Var {
        Var::new(t)
    }
}

impl Var {
    pub(crate) fn make(
        data: Tensor,
        grad_fn: Option<Arc<Node>>,
        requires_grad: bool,
        is_view: bool,
    ) -> Var {
        Var::build(
            data,
            grad_fn,
            requires_grad,
            is_view,
            false,
            false,
            Inference::No,
        )
    }

    fn build(
        data: Tensor,
        grad_fn: Option<Arc<Node>>,
        requires_grad: bool,
        is_view: bool,
        no_grad_view: bool,
        stands_for_leaf: bool,
        inference: Inference,
    ) -> Var {
        Var {
            inner: Arc::new(VarInner {
                data,
                grad_fn: Mutex::new(grad_fn),
                requires_grad: AtomicBool::new(requires_grad),
                grad: Mutex::new(GradSlot::default()),
                is_view,
                view_of: Mutex::new(None),
                no_grad_view,
                stands_for_leaf,
                inference,
                hooks: std::sync::OnceLock::new(),
                tensor_hooks: std::sync::OnceLock::new(),
                untracked_view_of: None,
                source: std::sync::OnceLock::new(),
                replaced_by_to: AtomicBool::new(false),
            }),
        }
    }

    /// A leaf that does not require grad, made by a view op in no-grad mode
    /// from a variable that requires grad (see `VarInner::no_grad_view`).
    fn no_grad_view_of(data: Tensor) -> Var {
        Var::build(data, None, false, false, true, false, Inference::No)
    }

    /// A leaf that does not require grad, made in inference mode (see
    /// `VarInner::inference`); `no_grad_view` as for [`Var::no_grad_view_of`].
    fn inference_result(data: Tensor, no_grad_view: bool) -> Var {
        Var::build(
            data,
            None,
            false,
            false,
            no_grad_view,
            false,
            Inference::Yes,
        )
    }

    /// Whether this variable was made in inference mode (PyTorch's
    /// `is_inference()`): the result of an op run in inference mode, or a
    /// view of such a variable. Outside inference mode it cannot be
    /// modified in place ([`AutogradError::InferenceTensorInPlace`]) or
    /// saved for backward ([`AutogradError::InferenceTensorSaved`]); a copy
    /// of it (`v.mul(1.0)`, or `Var::new(v.data().deep_clone()?)`) can.
    /// [`Var::new`] makes variables that are not; [`Var::detach`] keeps the
    /// flag but allows in-place ops, as PyTorch's `detach()` does.
    pub fn is_inference(&self) -> bool {
        self.inner.inference != Inference::No
    }

    /// Whether an in-place op on this variable outside inference mode is
    /// refused because it is an inference variable (not one made by
    /// [`Var::detach`] of one; see `Inference::Detached`).
    pub(crate) fn refuses_inplace_as_inference(&self) -> bool {
        self.inner.inference == Inference::Yes
    }

    /// A leaf that does not require grad and refuses in-place ops: what a
    /// checkpointed function receives for an input that is a leaf
    /// requiring grad (see `VarInner::stands_for_leaf`).
    pub(crate) fn standing_for_leaf(data: Tensor) -> Var {
        Var::build(data, None, false, false, false, true, Inference::No)
    }

    /// Whether this variable stands for a leaf that requires grad inside a
    /// checkpointed forward (an in-place op on it is an error).
    pub(crate) fn stands_for_leaf(&self) -> bool {
        self.inner.stands_for_leaf
    }

    /// Whether this variable is a view made in no-grad mode of one that
    /// requires grad (an in-place op on it with grad mode on is an error).
    pub(crate) fn is_no_grad_view(&self) -> bool {
        self.inner.no_grad_view
    }

    /// A leaf that does not require grad.
    pub fn new(data: Tensor) -> Var {
        Var::make(data, None, false, false)
    }

    /// A leaf that requires grad (a parameter); float tensors only.
    pub fn parameter(data: Tensor) -> Result<Var> {
        let v = Var::new(data);
        v.requires_grad_(true)?;
        Ok(v)
    }

    /// PyTorch's `requires_grad_`: `true` only for float tensors (a no-op on
    /// a non-leaf, which requires grad already), `false` only on leaves.
    pub fn requires_grad_(&self, requires_grad: bool) -> Result<&Var> {
        if !self.is_leaf() {
            // A non-leaf requires grad already: asking for it again changes
            // nothing, as PyTorch's `requires_grad_(True)` on a non-leaf
            // (only turning it off is refused there).
            if requires_grad {
                return Ok(self);
            }
            return Err(AutogradError::RequiresGrad {
                msg: format!(
                    "you can only change requires_grad flags of leaf variables (this one was made by {})",
                    self.grad_fn_name().unwrap_or("?")
                ),
            });
        }
        if requires_grad
            && self.is_inference()
            && !crate::inference_mode::is_inference_mode_enabled()
        {
            return Err(AutogradError::RequiresGrad {
                msg: "setting requires_grad = true on a variable made in inference mode outside \
                      inference mode is not allowed; make a copy of it first (v.mul(1.0))"
                    .into(),
            });
        }
        if requires_grad && !self.dtype().is_float() {
            return Err(AutogradError::RequiresGrad {
                msg: format!(
                    "only tensors of floating point dtype can require gradients, not {}",
                    self.dtype()
                ),
            });
        }
        self.inner
            .requires_grad
            .store(requires_grad, Ordering::Release);
        if requires_grad {
            // A leaf now: it no longer follows its base (see `view_of`).
            self.inner.view_of.lock().take();
        }
        if let Some(source) = self.inner.source.get() {
            source.requires_grad.store(requires_grad, Ordering::Release);
            view_source_changed();
        }
        Ok(self)
    }

    /// Whether gradients flow to (or through) this variable.
    ///
    /// As in PyTorch, a view of a variable that did not require grad reads
    /// its base's flag: made to require grad after the view was taken, the
    /// base makes the view require grad too. Such a view has no history
    /// leading to its base, so using it in a recorded op is refused
    /// ([`AutogradError::ViewBeforeRequiresGrad`]); take the view again.
    pub fn requires_grad(&self) -> bool {
        self.grad_fn().is_some()
            || self.inner.requires_grad_flag()
            || self.untracked_view_state().is_some()
    }

    /// Whether this variable was not made by a recorded operation.
    pub fn is_leaf(&self) -> bool {
        self.grad_fn().is_none()
    }

    /// The node that produced this variable. For a view whose history is
    /// out of date (its base, or a variable up its chain of views, was
    /// modified by a recorded in-place op since the view was taken), the
    /// history is regenerated first as a view of the base's new one, as
    /// PyTorch regenerates a view's `grad_fn` (`AsStridedBackward`).
    pub(crate) fn grad_fn(&self) -> Option<Arc<Node>> {
        let current = self.inner.grad_fn.lock().clone();
        let stale = match &current {
            Some(n) => n.is_stale_view(),
            None => matches!(
                self.untracked_chain_state(),
                Some((UntrackedView::BaseModified, _))
            ),
        };
        if !stale {
            return current;
        }
        let Some(of) = self.view_of() else {
            return current;
        };
        match view_node(&of.base_var(), &of.steps) {
            Some(node) => {
                self.replace_history(Arc::clone(&node), false);
                Some(node)
            }
            None => current,
        }
    }

    /// Name of the backward node that produced this variable (`"MulBackward"`,
    /// ...), `None` for leaves.
    pub fn grad_fn_name(&self) -> Option<&'static str> {
        self.grad_fn().map(|n| n.name())
    }

    /// Bytes of the storages saved by the node that produced this variable
    /// (not by the nodes before it; see [`Var::graph_saved_bytes`]); 0 for
    /// leaves and once `backward` released them.
    pub fn saved_bytes(&self) -> usize {
        let storages = self
            .inner
            .grad_fn
            .lock()
            .as_ref()
            .map_or(Vec::new(), |n| n.saved_storages());
        unique_bytes(storages)
    }

    /// Bytes of the storages saved by every node of the graph behind this
    /// variable, each storage counted once even if several nodes saved it or
    /// views of it. It includes storages also held elsewhere (parameters saved
    /// by matmul, inputs the caller still holds), so it bounds from above what
    /// keeping this variable alone keeps alive.
    pub fn graph_saved_bytes(&self) -> usize {
        let Some(root) = self.grad_fn() else { return 0 };
        let mut seen = std::collections::HashSet::new();
        let mut stack = vec![root];
        let mut storages = Vec::new();
        seen.insert(Arc::as_ptr(&stack[0]) as usize);
        while let Some(n) = stack.pop() {
            storages.extend(n.saved_storages());
            for e in n.edges().iter().flatten() {
                if let Edge::Node(c) = e {
                    if seen.insert(Arc::as_ptr(c) as usize) {
                        stack.push(Arc::clone(c));
                    }
                }
            }
        }
        unique_bytes(storages)
    }

    /// The underlying tensor (PyTorch's `.data`): same storage, no autograd.
    /// In-place changes through it are not recorded but do bump the version
    /// counter that saved-tensor checks read.
    pub fn data(&self) -> &Tensor {
        &self.inner.data
    }

    /// The accumulated gradient (leaves only; `None` before any backward or
    /// after `zero_grad(true)`). A handle on the same storage.
    pub fn grad(&self) -> Option<Tensor> {
        self.inner.grad.lock().grad.clone()
    }

    /// Replaces the accumulated gradient (PyTorch's `x.grad = g`).
    ///
    /// As in PyTorch, a gradient must have the tensor's shape, dtype and
    /// device; anything else is an error (`Shape`, `DType` or
    /// `DeviceMismatch`, under [`AutogradError::Tensor`]) and the gradient
    /// stays as it was. Backward, the optimizers, clipping and gradient
    /// scaling all rely on it.
    ///
    /// ```
    /// use strata_autograd::Var;
    /// use strata_tensor::{DType, Device, Tensor};
    /// let w = Var::parameter(Tensor::zeros(&[2], DType::F32, Device::Cpu)?)?;
    /// w.set_grad(Some(Tensor::ones(&[2], DType::F32, Device::Cpu)?))?;
    /// assert!(w.set_grad(Some(Tensor::ones(&[3], DType::F32, Device::Cpu)?)).is_err());
    /// assert_eq!(w.grad().unwrap().to_vec::<f32>()?, vec![1.0, 1.0]);
    /// w.set_grad(None)?;
    /// assert!(w.grad().is_none());
    /// # Ok::<(), strata_autograd::AutogradError>(())
    /// ```
    pub fn set_grad(&self, grad: Option<Tensor>) -> Result<()> {
        const OP: &str = "set_grad";
        if let Some(g) = &grad {
            let d = &self.inner.data;
            if g.device() != d.device() {
                return Err(AutogradError::Tensor(TensorError::DeviceMismatch {
                    op: OP,
                    lhs: d.device(),
                    rhs: g.device(),
                }));
            }
            if g.dtype() != d.dtype() {
                return Err(AutogradError::Tensor(TensorError::DType {
                    op: OP,
                    msg: format!(
                        "assigned grad has data of a different type: {} for a {} tensor; \
                         convert it with to_dtype(DType::{:?})",
                        g.dtype(),
                        d.dtype(),
                        d.dtype()
                    ),
                }));
            }
            if g.shape() != d.shape() {
                return Err(AutogradError::Tensor(TensorError::Shape {
                    op: OP,
                    msg: format!(
                        "assigned grad has data of a different size: {:?} for a tensor of shape {:?}",
                        g.shape(),
                        d.shape()
                    ),
                }));
            }
        }
        self.inner.grad.lock().grad = grad;
        Ok(())
    }

    /// Clears `.grad`: drops it (`set_to_none`, its memory returns to the
    /// allocator) or fills it with zeros in place.
    pub fn zero_grad(&self, set_to_none: bool) -> Result<()> {
        let mut slot = self.inner.grad.lock();
        if set_to_none {
            slot.grad = None;
        } else if let Some(g) = slot.grad.as_ref() {
            g.zero_()?;
        }
        Ok(())
    }

    /// A new leaf on the same storage with no history and no grad
    /// (PyTorch's `detach()`): in-place changes to either are seen by both.
    ///
    /// The detached copy of an inference variable is one too
    /// ([`Var::is_inference`]: it is not saved for backward or made to
    /// require grad), but, as in PyTorch, it may be modified in place
    /// outside inference mode, unless it was detached inside inference mode.
    ///
    /// ```
    /// use strata_autograd::{inference_mode, Var};
    /// use strata_tensor::{DType, Device, Tensor};
    ///
    /// let ones = Tensor::ones(&[2], DType::F32, Device::Cpu).unwrap();
    /// let x = inference_mode(|| Var::new(ones).mul(1.0).unwrap());
    /// let d = x.detach();
    /// assert!(d.is_inference());
    /// d.add_(1.0).unwrap();
    /// assert_eq!(x.to_vec::<f32>().unwrap(), vec![2.0, 2.0]);
    /// assert!(x.add_(1.0).is_err());
    /// ```
    pub fn detach(&self) -> Var {
        // Detached inside inference mode, it is a full inference variable
        // again (PyTorch).
        let inference = match self.inner.inference {
            Inference::No => Inference::No,
            _ if crate::inference_mode::is_inference_mode_enabled() => Inference::Yes,
            Inference::Yes | Inference::Detached => Inference::Detached,
        };
        Var::build(
            self.inner.data.clone(),
            None,
            false,
            false,
            false,
            false,
            inference,
        )
    }

    /// The single element of a one-element variable, as a host value (no graph kept).
    pub fn item<T: Element>(&self) -> Result<T> {
        Ok(self.inner.data.item::<T>()?)
    }

    /// The elements in row-major order.
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        Ok(self.inner.data.to_vec::<T>()?)
    }

    /// Size of each dimension.
    pub fn shape(&self) -> &[usize] {
        self.inner.data.shape()
    }

    /// Number of dimensions.
    pub fn ndim(&self) -> usize {
        self.inner.data.ndim()
    }

    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.inner.data.numel()
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.inner.data.dtype()
    }

    /// The device of the data.
    pub fn device(&self) -> Device {
        self.inner.data.device()
    }

    /// The storage's version counter (bumped by in-place ops).
    pub fn version(&self) -> u64 {
        self.inner.data.version()
    }

    /// The edge a gradient for this variable flows along, if it requires grad.
    pub(crate) fn edge(&self) -> Option<Edge> {
        match self.grad_fn() {
            // A view whose base was modified in place since: its history is
            // stale, and a backward that reaches it must fail.
            Some(n) if n.is_stale_view() => Some(Edge::Node(Arc::new(Node::stale_view(n.name())))),
            Some(n) => Some(Edge::Node(n)),
            // The leaf's own flag: a view that requires grad only through
            // its base (see `Var::requires_grad`) is refused before this.
            None if self.inner.requires_grad_flag() => Some(Edge::Leaf(Arc::clone(&self.inner))),
            None => None,
        }
    }

    /// For a view made of a variable that did not require grad, what that
    /// variable (or one it views, up the chain; dropped or not) has become
    /// since, with the view op's name: `BaseModified` when it has a history
    /// now (`z.add_(&x)` after `v = z.narrow(..)`: the view's values include
    /// the in-place op but it has no history for it; PyTorch regenerates it
    /// from the base's), `BaseRequiresGrad` when it was made to require
    /// grad (PyTorch's view then requires grad but passes its gradient
    /// nowhere). Using such a view in a recorded op is refused
    /// ([`check_not_stale_view`]) instead of losing a gradient silently.
    pub(crate) fn untracked_view_state(&self) -> Option<(UntrackedView, &'static str)> {
        let state = self.untracked_chain_state()?;
        // A view that knows its base has its history regenerated instead.
        if state.0 == UntrackedView::BaseModified && self.grad_fn().is_some() {
            return None;
        }
        Some(state)
    }

    /// [`Var::untracked_view_state`] as the chain of views says, whether or
    /// not the view's history can be regenerated.
    fn untracked_chain_state(&self) -> Option<(UntrackedView, &'static str)> {
        let (link, op) = self.inner.untracked_view_of.as_ref()?;
        match chain_state(link) {
            CHAIN_MODIFIED => Some((UntrackedView::BaseModified, op)),
            CHAIN_REQUIRES_GRAD => Some((UntrackedView::BaseRequiresGrad, op)),
            _ => None,
        }
    }

    /// The error for using this variable in a recorded op (or starting a
    /// backward from it) when it is a view made of a variable that did not
    /// require grad and that variable has since gained a history
    /// ([`AutogradError::ViewOfModifiedBase`]) or been made to require
    /// grad ([`AutogradError::ViewBeforeRequiresGrad`]); see
    /// [`Var::untracked_view_state`].
    pub(crate) fn untracked_view_error(&self) -> Option<AutogradError> {
        Some(match self.untracked_view_state()? {
            (UntrackedView::BaseModified, op) => AutogradError::ViewOfModifiedBase { op },
            (UntrackedView::BaseRequiresGrad, op) => AutogradError::ViewBeforeRequiresGrad { op },
        })
    }

    pub(crate) fn inner(&self) -> &Arc<VarInner> {
        &self.inner
    }

    pub(crate) fn is_view(&self) -> bool {
        self.inner.is_view
    }

    /// For a view made by a recorded view op, its base and the view ops
    /// from there (see `VarInner::view_of`).
    pub(crate) fn view_of(&self) -> Option<Arc<ViewOf>> {
        self.inner.view_of.lock().clone()
    }

    /// Marks this view as one of several a function returned (`split`,
    /// `chunk`): a recorded in-place op on it, or on a view of it, is
    /// refused, as PyTorch refuses it.
    pub(crate) fn mark_multi_output_view(&self) {
        let mut of = self.inner.view_of.lock();
        if let Some(o) = of.as_ref() {
            *of = Some(Arc::new(o.multi_output()));
        }
    }

    /// Another handle on the variable `inner`.
    pub(crate) fn from_inner(inner: Arc<VarInner>) -> Var {
        Var { inner }
    }

    /// Replaces the history after an in-place op (PyTorch's `rebase_history`).
    pub(crate) fn set_grad_fn(&self, node: Arc<Node>) {
        self.replace_history(node, true);
    }

    /// Replaces the history by `node`, the retained gradient following it;
    /// `rebased` for a new value (an in-place op: views of this variable
    /// are out of date), not for a view's history regenerated.
    fn replace_history(&self, node: Arc<Node>, rebased: bool) {
        let old = self.inner.grad_fn.lock().replace(Arc::clone(&node));
        // A retained gradient is the current value's (PyTorch moves the
        // retains-grad hook to the new history).
        if let Some(hooks) = old.as_deref().and_then(Node::output_hooks) {
            let dtype = self.dtype();
            hooks.move_retains_to(&node, || crate::hooks::OutputHooks::new(dtype));
        }
        if !rebased {
            return;
        }
        if let Some(source) = self.inner.source.get() {
            source.rebases.fetch_add(1, Ordering::AcqRel);
            view_source_changed();
        }
        crate::node::note_rebase();
    }
}

fn unique_bytes(mut storages: Vec<(u64, usize)>) -> usize {
    storages.sort_unstable();
    storages.dedup_by_key(|s| s.0);
    storages.iter().map(|s| s.1).sum()
}

/// The second operand of a binary op on [`Var`]s: a variable or a scalar.
#[derive(Clone, Copy, Debug)]
pub enum VarOperand<'a> {
    /// A variable (broadcast against the first operand).
    Var(&'a Var),
    /// A scalar constant (no gradient).
    Scalar(Scalar),
}

impl<'a> From<&'a Var> for VarOperand<'a> {
    fn from(v: &'a Var) -> Self {
        VarOperand::Var(v)
    }
}

macro_rules! var_operand_from_scalar {
    ($($t:ty),*) => {$(
        impl From<$t> for VarOperand<'_> {
            fn from(x: $t) -> Self {
                VarOperand::Scalar(Scalar::from(x))
            }
        }
    )*};
}
var_operand_from_scalar!(Scalar, f32, f64, i32, i64);

impl<'a> VarOperand<'a> {
    /// The tensor-level operand.
    pub(crate) fn operand(&self) -> strata_tensor::Operand<'a> {
        match *self {
            VarOperand::Var(v) => strata_tensor::Operand::Tensor(v.data()),
            VarOperand::Scalar(s) => strata_tensor::Operand::Scalar(s),
        }
    }

    pub(crate) fn var(&self) -> Option<&'a Var> {
        match *self {
            VarOperand::Var(v) => Some(v),
            VarOperand::Scalar(_) => None,
        }
    }
}

/// Wraps `output` as the result of `name` on `inputs`: when grad mode is on
/// and some input requires grad, a node is recorded with the `saved` tensors
/// and the `backward` formula; otherwise nothing is saved and the result is a
/// leaf that does not require grad.
///
/// Fails with [`AutogradError::InferenceTensorSaved`] when a node would save
/// (a view of) an input made in inference mode, as PyTorch refuses it.
/// Inside a checkpointed forward the output's dependence on the variables
/// requiring grad is noted (see `checkpoint::note_output`).
pub(crate) fn record(
    name: &'static str,
    output: Tensor,
    inputs: &[Option<&Var>],
    saved: impl FnOnce() -> Vec<Tensor>,
    backward: BackwardFn,
    is_view: bool,
) -> Result<Var> {
    record_impl(name, output, inputs, saved, backward, is_view, None)
}

/// [`record`] for a view op: `output` is `input` seen through `step` (a
/// view where `is_view`, else a copy); the gradient is mapped back by
/// [`ViewStep::backward`]. A view remembers its base and the view ops from
/// there (see `VarInner::view_of`).
pub(crate) fn record_view(
    name: &'static str,
    output: Tensor,
    input: &Var,
    step: ViewStep,
    is_view: bool,
) -> Result<Var> {
    let s = step.clone();
    let f: BackwardFn = Box::new(move |g, _s, _n| Ok(vec![Some(s.backward(g)?)]));
    let step = is_view.then_some(step);
    record_impl(name, output, &[Some(input)], Vec::new, f, is_view, step)
}

fn record_impl(
    name: &'static str,
    output: Tensor,
    inputs: &[Option<&Var>],
    saved: impl FnOnce() -> Vec<Tensor>,
    backward: BackwardFn,
    is_view: bool,
    step: Option<ViewStep>,
) -> Result<Var> {
    let base = inputs.first().copied().flatten();
    // What a view made here (not a no-grad view of a variable requiring
    // grad, nor an inference one) knows of its base.
    let link = |v: &mut Var| {
        if let (Some(step), Some(base), Some(inner)) = (step, base, Arc::get_mut(&mut v.inner)) {
            *inner.view_of.get_mut() = ViewOf::of(base, step, !is_grad_enabled()).map(Arc::new);
        }
    };
    let view_of_inference = is_view && base.is_some_and(Var::is_inference);
    if crate::inference_mode::is_inference_mode_enabled() {
        // No bookkeeping: every result is an inference variable, except a
        // view of a variable that is not one (PyTorch: a view of a normal
        // tensor made in inference mode is a normal tensor). A view of a
        // variable that requires grad (or of such a view) is marked: modified
        // in place later with grad mode on, it would change that variable
        // behind autograd's back, which PyTorch forbids ("a view was created
        // in inference mode and is being modified inplace in normal mode"),
        // as for a no_grad view.
        let no_grad_view =
            is_view && base.is_some_and(|b| b.is_no_grad_view() || b.requires_grad());
        if !is_view || view_of_inference {
            return Ok(Var::inference_result(output, no_grad_view));
        }
        return Ok(if no_grad_view {
            Var::no_grad_view_of(output)
        } else {
            Var::new(output)
        });
    }
    if output.dtype().is_float() {
        check_not_stale_view(inputs)?;
    }
    crate::checkpoint::note_parameters(inputs);
    let edges: Vec<Option<Edge>> = inputs.iter().map(|v| v.and_then(Var::edge)).collect();
    // An integer or bool result is not differentiable: PyTorch records no
    // node for it and it does not require grad (`x.long()` cuts the
    // graph), so no gradient flows back through the rounding.
    let out = if !is_grad_enabled()
        || edges.iter().all(Option::is_none)
        || !output.dtype().is_float()
    {
        // A view made in no-grad mode of a variable that requires grad, or a
        // view of such a view, remembers it (PyTorch's creation meta).
        let no_grad_view = is_view
            && base
                .is_some_and(|b| b.is_no_grad_view() || (!is_grad_enabled() && b.requires_grad()));
        if view_of_inference {
            // A view of an inference variable is one (PyTorch).
            Var::inference_result(output, no_grad_view)
        } else if is_view && base.is_some_and(Var::stands_for_leaf) {
            Var::standing_for_leaf(output)
        } else if no_grad_view {
            Var::no_grad_view_of(output)
        } else {
            // A view of a variable that does not require grad is still a
            // view: a recorded in-place op on it (an operand requires grad)
            // rebases its base's history (see `ops::copy_slices`).
            let mut v = Var::make(output, None, false, is_view);
            if let (true, Some(base), Some(inner)) = (is_view, base, Arc::get_mut(&mut v.inner)) {
                inner.untracked_view_of = Some((base.inner().view_link(), name));
            }
            link(&mut v);
            v
        }
    } else {
        let saved = saved();
        check_not_inference(name, inputs.iter().copied().flatten(), &saved)?;
        let mut node = Node::new(name, edges, saved, backward);
        if is_view {
            if let Some(base) = base {
                node = node.viewing(base.inner());
            }
        }
        let mut v = Var::make(output, Some(Arc::new(node)), true, is_view);
        link(&mut v);
        v
    };
    crate::checkpoint::note_output(inputs, &out);
    Ok(out)
}

/// [`AutogradError::InferenceTensorSaved`] when one of `saved` is (a view
/// of) the data of one of `inputs` that was made in inference mode.
pub(crate) fn check_not_inference<'a>(
    op: &'static str,
    inputs: impl IntoIterator<Item = &'a Var>,
    saved: &[Tensor],
) -> Result<()> {
    for v in inputs.into_iter().filter(|v| v.is_inference()) {
        if saved.iter().any(|s| s.same_storage(v.data())) {
            return Err(AutogradError::InferenceTensorSaved { op });
        }
    }
    Ok(())
}

/// With grad mode on (outside inference mode), fails with
/// [`AutogradError::ViewOfModifiedBase`] when one of `inputs` is a view of
/// a variable that did not require grad and has gained a history since,
/// and with [`AutogradError::ViewBeforeRequiresGrad`] when that variable
/// was made to require grad since (see [`Var::untracked_view_state`]): in
/// PyTorch that view requires grad, and a float result of it would too.
pub(crate) fn check_not_stale_view(inputs: &[Option<&Var>]) -> Result<()> {
    if !is_grad_enabled() || crate::inference_mode::is_inference_mode_enabled() {
        return Ok(());
    }
    match inputs
        .iter()
        .flatten()
        .find_map(|v| v.untracked_view_error())
    {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// Whether an op on `inputs` would be recorded now.
pub(crate) fn would_record(inputs: &[Option<&Var>]) -> bool {
    !crate::inference_mode::is_inference_mode_enabled()
        && is_grad_enabled()
        && inputs.iter().flatten().any(|v| v.requires_grad())
}
