//! The backward pass: gradients flow from the root through the graph in
//! topological order; each node's saved tensors are released as soon as its
//! backward ran (unless `retain_graph`), so the graph's memory returns to the
//! allocator while the pass goes on.

use crate::error::{AutogradError, Result};
use crate::grad_mode::NoGradGuard;
use crate::node::{Edge, Node};
use crate::var::Var;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use strata_tensor::{Scalar, Tensor};

fn key(n: &Arc<Node>) -> usize {
    Arc::as_ptr(n) as usize
}

impl Var {
    /// Computes the gradient of this one-element variable with respect to
    /// every leaf that requires grad, adding it into their `.grad`, and
    /// releases the graph's saved tensors (PyTorch's `loss.backward()`).
    ///
    /// A second `backward` through the same graph then fails with
    /// [`AutogradError::GraphReleased`]; see [`Var::backward_with`].
    pub fn backward(&self) -> Result<()> {
        self.backward_with(None, false)
    }

    /// `backward` with an explicit output gradient (needed for outputs with
    /// more than one element; of the output's shape, and converted to its
    /// dtype when it has another) and `retain_graph` (keep the saved tensors
    /// so the graph can be traversed again).
    pub fn backward_with(&self, grad: Option<&Tensor>, retain_graph: bool) -> Result<()> {
        if !self.requires_grad() {
            return Err(AutogradError::NoGradFn);
        }
        // A view that requires grad only through its base is a leaf with no
        // `.grad` of its own to fill (PyTorch refuses it as not requiring
        // grad; a stale one PyTorch back-propagates through its base).
        if let Some(e) = self.untracked_view_error() {
            return Err(e);
        }
        let grad = match grad {
            Some(g) => {
                if g.shape() != self.shape() {
                    return Err(AutogradError::GradShape {
                        expected: self.shape().to_vec(),
                        got: g.shape().to_vec(),
                    });
                }
                // A gradient of another dtype is converted to the output's,
                // as PyTorch's engine converts it: the backward formulas
                // expect it (matmul's refused an f64 gradient of an f32
                // product, gelu's an integer one).
                if g.dtype() != self.dtype() {
                    g.to_dtype(self.dtype())?
                } else {
                    g.clone()
                }
            }
            None => {
                if self.numel() != 1 {
                    return Err(AutogradError::NonScalarOutput {
                        shape: self.shape().to_vec(),
                    });
                }
                Tensor::full(self.shape(), Scalar::Int(1), self.dtype(), self.device())?
            }
        };
        // Backward formulas run on plain tensors; nothing they do is recorded.
        let _no_grad = NoGradGuard::new();
        match self.grad_fn() {
            None => {
                self.inner().accumulate(grad)?;
                if crate::checkpoint::in_recompute() {
                    return Ok(());
                }
                self.inner().run_grad_hooks()
            }
            Some(root) if root.is_stale_view() => {
                Err(AutogradError::ViewOfModifiedBase { op: root.name() })
            }
            Some(root) => run(root, grad, retain_graph),
        }
    }
}

/// A node whose every incoming gradient has arrived, ordered by
/// [`Node::sequence_nr`].
struct Ready(Arc<Node>);

impl PartialEq for Ready {
    fn eq(&self, other: &Self) -> bool {
        self.0.sequence_nr() == other.0.sequence_nr()
    }
}

impl Eq for Ready {}

impl PartialOrd for Ready {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Ready {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.sequence_nr().cmp(&other.0.sequence_nr())
    }
}

/// Kahn's algorithm over the nodes reachable from `root`, running the most
/// recently recorded ready node first, as PyTorch's engine does: a layer's
/// parameter gradients are finished right after its backward, before the
/// layers below it. (Under autocast a parameter's gradient passes through
/// the node of its cast to bf16; taking the most recently *readied* node
/// first instead left the cast nodes of some biases, readied before the
/// activations' chain, until every other node had run, so DDP's in-order
/// bucket all-reduces all started at the end of backward.) A leaf's
/// post-accumulate-grad hooks run when the last edge into it has been
/// processed: its gradient for this pass is then final.
fn run(root: Arc<Node>, grad: Tensor, retain_graph: bool) -> Result<()> {
    // Number of edges into each node from nodes reachable from the root.
    let mut deps: HashMap<usize, usize> = HashMap::new();
    // Number of edges into each leaf from those nodes.
    let mut leaf_edges: HashMap<usize, usize> = HashMap::new();
    let mut seen: HashSet<usize> = HashSet::new();
    let mut stack = vec![Arc::clone(&root)];
    seen.insert(key(&root));
    while let Some(n) = stack.pop() {
        for e in n.edges().iter().flatten() {
            match e {
                Edge::Node(c) => {
                    *deps.entry(key(c)).or_insert(0) += 1;
                    if seen.insert(key(c)) {
                        stack.push(Arc::clone(c));
                    }
                }
                Edge::Leaf(v) => *leaf_edges.entry(Arc::as_ptr(v) as usize).or_insert(0) += 1,
            }
        }
    }
    drop(seen);
    // Every node that will receive a gradient is checked before any runs:
    // a saved tensor modified in place, or a node released by an earlier
    // backward, failed the pass only when reached, after the nodes before
    // it had added into leaves' `.grad` (half a backward) and released
    // their saved tensors.
    let mut checked: HashSet<usize> = HashSet::new();
    let mut stack = vec![Arc::clone(&root)];
    checked.insert(key(&root));
    while let Some(n) = stack.pop() {
        n.check_saved()?;
        for e in n.edges().iter().flatten() {
            if let Edge::Node(c) = e {
                if checked.insert(key(c)) {
                    stack.push(Arc::clone(c));
                }
            }
        }
    }
    drop(checked);

    let mut buffers: HashMap<usize, Tensor> = HashMap::new();
    buffers.insert(key(&root), grad);
    let mut ready = std::collections::BinaryHeap::from([Ready(root)]);
    while let Some(Ready(node)) = ready.pop() {
        let grads = match buffers.remove(&key(&node)) {
            Some(g) => node.apply(&g)?,
            None => vec![None; node.edges().len()],
        };
        if !retain_graph {
            node.release();
        }
        for (edge, g) in node.edges().iter().zip(grads) {
            match edge {
                None => {}
                Some(Edge::Leaf(v)) => {
                    // A leaf made not to require grad since the graph was
                    // recorded (frozen after its forward) gets no gradient,
                    // as PyTorch's AccumulateGrad skips it; its hooks still
                    // run, as PyTorch's do.
                    if let Some(g) = g.filter(|_| v.requires_grad_flag()) {
                        v.accumulate(g)?;
                    }
                    let left = leaf_edges
                        .get_mut(&(Arc::as_ptr(v) as usize))
                        .expect("every leaf edge was counted");
                    *left -= 1;
                    // Inside a checkpoint's recomputation the outer pass runs
                    // the hooks (see `checkpoint::in_recompute`).
                    if *left == 0 && !crate::checkpoint::in_recompute() {
                        v.run_grad_hooks()?;
                    }
                }
                Some(Edge::Node(c)) => {
                    let k = key(c);
                    if let Some(g) = g {
                        // Out of place: an earlier gradient may be shared with another input.
                        let sum = match buffers.remove(&k) {
                            Some(prev) => prev.add(&g)?,
                            None => g,
                        };
                        buffers.insert(k, sum);
                    }
                    let d = deps.get_mut(&k).expect("every child was counted");
                    *d -= 1;
                    if *d == 0 {
                        ready.push(Ready(Arc::clone(c)));
                    }
                }
            }
        }
    }
    Ok(())
}
