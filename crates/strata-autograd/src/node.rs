//! Graph nodes: one per recorded operation, holding the tensors its backward
//! needs ("saved tensors", with the version each had when saved), the edges to
//! the inputs' nodes or leaves, and the backward formula.

use crate::error::{AutogradError, Result};
use crate::hooks::OutputHooks;
use crate::var::{VarInner, ViewLink};
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use strata_tensor::Tensor;

/// The backward formula of a node: from the gradient of the output, the saved
/// tensors and which inputs need a gradient, the gradient of each input
/// (`None` where none is needed). It captures no tensor: everything it reads
/// comes through `saved`, so releasing the saved tensors frees all of the node's
/// memory.
pub(crate) type BackwardFn =
    Box<dyn Fn(&Tensor, &[Tensor], &[bool]) -> Result<Vec<Option<Tensor>>> + Send + Sync>;

/// Where an input's gradient goes.
pub(crate) enum Edge {
    /// Into the node that produced the input.
    Node(Arc<Node>),
    /// Into the `.grad` of a leaf that requires grad.
    Leaf(Arc<VarInner>),
}

impl Clone for Edge {
    fn clone(&self) -> Self {
        match self {
            Edge::Node(n) => Edge::Node(Arc::clone(n)),
            Edge::Leaf(v) => Edge::Leaf(Arc::clone(v)),
        }
    }
}

struct Saved {
    tensor: Tensor,
    version: u64,
}

/// The name of `zero_`'s node (its gradient is zeros).
pub(crate) const ZERO_BACKWARD: &str = "ZeroBackward_";

/// Hands out [`Node::sequence_nr`]s: process-wide, increasing with creation.
static NEXT_SEQUENCE_NR: AtomicU64 = AtomicU64::new(0);

/// Counts in-place ops that replaced a variable's history (process-wide):
/// while it is unchanged, no view can have become stale.
static REBASES: AtomicU64 = AtomicU64::new(0);

/// Notes that a variable's history was replaced by an in-place op.
pub(crate) fn note_rebase() {
    REBASES.fetch_add(1, Ordering::AcqRel);
}

/// The variable a view node's output is a view of (its [`ViewSource`]
/// and rebase count when the view was taken: known after the variable is
/// dropped), and the value of [`REBASES`] when the view was last found
/// current.
///
/// [`ViewSource`]: crate::var::ViewSource
struct ViewBase {
    base: ViewLink,
    checked: AtomicU64,
}

/// A recorded operation.
pub(crate) struct Node {
    name: &'static str,
    /// When it was recorded, relative to other nodes (PyTorch's
    /// `sequence_nr`): backward runs the most recent ready node first.
    sequence_nr: u64,
    edges: Vec<Option<Edge>>,
    backward: BackwardFn,
    /// `None` once released by a backward without `retain_graph`.
    saved: Mutex<Option<Vec<Saved>>>,
    /// For a view op: the variable viewed (its input), whose history the
    /// node's edge was taken from.
    view: Option<ViewBase>,
    /// Never released (see [`Node::never_release`]).
    reusable: AtomicBool,
    /// Whether PyTorch's node for the op saves something for backward: a
    /// tensor here, or a scalar operand (PyTorch saves `x * 2`'s 2 as a
    /// wrapped tensor; [`Node::mark_saves`]). Only such a node refuses a
    /// second backward after its graph was released: PyTorch's `AddBackward`,
    /// `SumBackward`, views ... save nothing and run again (`(x + 1).sum()`
    /// can be back-propagated twice without `retain_graph`).
    saves: AtomicBool,
    /// Leaves this node's edges reach whose data must still be at the given
    /// version when the node runs: `(edge index, version)` (a checkpoint's
    /// captured parameters, which its recomputation reads).
    /// Set once, after the node is made; read without a lock by every check.
    leaf_versions: OnceLock<Vec<(usize, u64)>>,
    /// The gradient hooks of the variable this node made (made at the
    /// first [`Var::register_hook`](crate::Var::register_hook) or
    /// [`Var::retain_grad`](crate::Var::retain_grad) on it).
    output_hooks: OnceLock<OutputHooks>,
}

impl Node {
    pub(crate) fn new(
        name: &'static str,
        edges: Vec<Option<Edge>>,
        saved: Vec<Tensor>,
        backward: BackwardFn,
    ) -> Node {
        let saves = AtomicBool::new(!saved.is_empty());
        let saved = saved
            .into_iter()
            .map(|tensor| Saved {
                version: tensor.version(),
                tensor,
            })
            .collect();
        Node {
            name,
            sequence_nr: NEXT_SEQUENCE_NR.fetch_add(1, Ordering::Relaxed),
            edges,
            backward,
            saved: Mutex::new(Some(saved)),
            view: None,
            reusable: AtomicBool::new(false),
            saves,
            leaf_versions: OnceLock::new(),
            output_hooks: OnceLock::new(),
        }
    }

    /// Marks this node as saving something for backward although it keeps
    /// no tensor (a scalar operand PyTorch saves): after a release, running
    /// it again is [`AutogradError::GraphReleased`], as in PyTorch.
    pub(crate) fn mark_saves(&self) {
        self.saves.store(true, Ordering::Release);
    }

    /// Marks this node as a view op's whose output views `base` (its input).
    pub(crate) fn viewing(mut self, base: &Arc<VarInner>) -> Node {
        self.view = Some(ViewBase {
            base: base.view_link(),
            checked: AtomicU64::new(REBASES.load(Ordering::Acquire)),
        });
        self
    }

    /// A node standing for a view whose base was modified in place (by a
    /// recorded op) after the view was taken: reaching it in backward is an
    /// [`AutogradError::ViewOfModifiedBase`]. A view that knows its base
    /// has its history regenerated instead, as PyTorch's (see
    /// `Var::grad_fn`); this is for one that does not (made to require grad
    /// itself), rather than passing the gradient through the base's old
    /// history, which would silently leave out the in-place op.
    pub(crate) fn stale_view(view_op: &'static str) -> Node {
        let f: BackwardFn =
            Box::new(move |_g, _s, _n| Err(AutogradError::ViewOfModifiedBase { op: view_op }));
        Node::new(view_op, Vec::new(), Vec::new(), f)
    }

    /// Whether this is a view op's node whose output no longer matches its
    /// history: the viewed variable (or, for a view of a view, one further
    /// up) had its history replaced by an in-place op since the view was
    /// taken. Walks the chain of views only after some in-place op replaced
    /// a history since the last check.
    pub(crate) fn is_stale_view(&self) -> bool {
        let Some(view) = &self.view else {
            return false;
        };
        let epoch = REBASES.load(Ordering::Acquire);
        if view.checked.load(Ordering::Acquire) == epoch {
            return false;
        }
        // The viewed variable's history is the one this node's edge was
        // taken from while it was not rebased (dropped or not); then the
        // same holds one view further up.
        let mut node: Option<Arc<Node>> = None;
        loop {
            let n: &Node = node.as_deref().unwrap_or(self);
            let Some(v) = &n.view else { break };
            if v.base.rebased() {
                return true;
            }
            match n.edges.first() {
                Some(Some(Edge::Node(old))) => node = Some(Arc::clone(old)),
                _ => break,
            }
        }
        view.checked.store(epoch, Ordering::Release);
        false
    }

    /// The node's place in recording order (see the field).
    pub(crate) fn sequence_nr(&self) -> u64 {
        self.sequence_nr
    }

    /// The backward op's name (`"MulBackward"`, ...).
    pub(crate) fn name(&self) -> &'static str {
        self.name
    }

    pub(crate) fn edges(&self) -> &[Option<Edge>] {
        &self.edges
    }

    /// Runs the backward formula on `grad` for the inputs `needs` marks
    /// (`None` for the others), after checking that the saved tensors are
    /// still there and unmodified.
    pub(crate) fn apply(&self, grad: &Tensor, needs: &[bool]) -> Result<Vec<Option<Tensor>>> {
        let saved: Vec<Tensor> = {
            let guard = self.saved.lock();
            let saved = self.checked(guard.as_ref())?;
            saved.iter().map(|s| s.tensor.clone()).collect()
        };
        (self.backward)(grad, &saved, needs)
    }

    /// The gradient hooks of the variable this node made, if any.
    pub(crate) fn output_hooks(&self) -> Option<&OutputHooks> {
        self.output_hooks.get()
    }

    /// The gradient hooks of the variable this node made, made by `init`
    /// at the first call.
    pub(crate) fn output_hooks_or_init(&self, init: impl FnOnce() -> OutputHooks) -> &OutputHooks {
        self.output_hooks.get_or_init(init)
    }

    /// The saved tensors, unless released or modified since they were saved
    /// (or since the versions given to [`Node::expect_versions`]).
    fn checked<'a>(&self, saved: Option<&'a Vec<Saved>>) -> Result<&'a Vec<Saved>> {
        /// What a released node that saved nothing runs with.
        static NOTHING: Vec<Saved> = Vec::new();
        let saved = match saved {
            Some(saved) => saved,
            None if !self.saves.load(Ordering::Acquire) => &NOTHING,
            None => return Err(AutogradError::GraphReleased { op: self.name }),
        };
        for (index, s) in saved.iter().enumerate() {
            let current = s.tensor.version();
            if current != s.version {
                return Err(AutogradError::SavedTensorModified {
                    op: self.name,
                    index,
                    saved: s.version,
                    current,
                });
            }
        }
        for &(index, version) in self.leaf_versions.get().into_iter().flatten() {
            if let Some(Some(Edge::Leaf(leaf))) = self.edges.get(index) {
                let current = leaf.version();
                if current != version {
                    return Err(AutogradError::SavedTensorModified {
                        op: self.name,
                        index,
                        saved: version,
                        current,
                    });
                }
            }
        }
        Ok(saved)
    }

    /// Makes the check before this node runs expect the saved tensors at
    /// `saved` (one version each, in order; from before they could have
    /// been modified) and the leaves of the edges `leaves` (`(edge index,
    /// version)`) at their versions, so that a change since is reported
    /// before a backward pass runs anything (a checkpoint's inputs and
    /// captured parameters, which its recomputation reads).
    pub(crate) fn expect_versions(&self, saved: &[u64], leaves: Vec<(usize, u64)>) {
        if let Some(v) = self.saved.lock().as_mut() {
            for (s, &version) in v.iter_mut().zip(saved) {
                s.version = version;
            }
        }
        let first = self.leaf_versions.set(leaves).is_ok();
        debug_assert!(
            first,
            "expect_versions is called once, on the node just recorded"
        );
    }

    /// The error [`Node::apply`] would give for the saved tensors (released,
    /// or modified in place), checked before a backward pass runs anything.
    pub(crate) fn check_saved(&self) -> Result<()> {
        self.checked(self.saved.lock().as_ref()).map(|_| ())
    }

    /// Drops the saved tensors (their memory goes back to the allocator unless
    /// something else holds them); a later `apply` fails with `GraphReleased`.
    /// A node marked with [`Node::never_release`] keeps them.
    pub(crate) fn release(&self) {
        if self.reusable.load(Ordering::Acquire) {
            return;
        }
        *self.saved.lock() = None;
    }

    /// Exempts this node from [`Node::release`], so that any number of
    /// backward passes may go through it. For nodes that save nothing and
    /// that several graphs share without the user knowing: autocast's cached
    /// low-precision copy of a parameter is used by every forward of the
    /// region, and releasing its cast node in the first backward made the
    /// next iteration's backward fail with `GraphReleased` (PyTorch trains
    /// any number of iterations inside one autocast region).
    pub(crate) fn never_release(&self) {
        debug_assert!(self.saved_storages().is_empty());
        self.reusable.store(true, Ordering::Release);
    }

    /// The storages of the saved tensors as (identity, bytes); empty once released.
    pub(crate) fn saved_storages(&self) -> Vec<(u64, usize)> {
        self.saved.lock().as_ref().map_or(Vec::new(), |v| {
            v.iter()
                .map(|s| {
                    let t = &s.tensor;
                    (t.storage_ptr(), t.storage_len() * t.dtype().size())
                })
                .collect()
        })
    }
}

impl Drop for Node {
    /// Drops long chains of nodes iteratively (an RNN's graph can be thousands
    /// of nodes deep; recursive drops would overflow the stack).
    fn drop(&mut self) {
        let mut stack: Vec<Arc<Node>> = Vec::new();
        let take = |edges: &mut Vec<Option<Edge>>, stack: &mut Vec<Arc<Node>>| {
            for e in edges.drain(..) {
                if let Some(Edge::Node(n)) = e {
                    stack.push(n);
                }
            }
        };
        take(&mut self.edges, &mut stack);
        while let Some(n) = stack.pop() {
            if let Some(mut node) = Arc::into_inner(n) {
                take(&mut node.edges, &mut stack);
            }
        }
    }
}
