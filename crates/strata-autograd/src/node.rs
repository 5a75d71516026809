//! Graph nodes: one per recorded operation, holding the tensors its backward
//! needs ("saved tensors", with the version each had when saved), the edges to
//! the inputs' nodes or leaves, and the backward formula.

use crate::error::{AutogradError, Result};
use crate::var::VarInner;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
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

/// Hands out [`Node::sequence_nr`]s: process-wide, increasing with creation.
static NEXT_SEQUENCE_NR: AtomicU64 = AtomicU64::new(0);

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
}

impl Node {
    pub(crate) fn new(
        name: &'static str,
        edges: Vec<Option<Edge>>,
        saved: Vec<Tensor>,
        backward: BackwardFn,
    ) -> Node {
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
        }
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

    /// Runs the backward formula on `grad`, after checking that the saved
    /// tensors are still there and unmodified.
    pub(crate) fn apply(&self, grad: &Tensor) -> Result<Vec<Option<Tensor>>> {
        let saved: Vec<Tensor> = {
            let guard = self.saved.lock();
            let saved = guard
                .as_ref()
                .ok_or(AutogradError::GraphReleased { op: self.name })?;
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
            saved.iter().map(|s| s.tensor.clone()).collect()
        };
        let needs: Vec<bool> = self.edges.iter().map(Option::is_some).collect();
        (self.backward)(grad, &saved, &needs)
    }

    /// Drops the saved tensors (their memory goes back to the allocator unless
    /// something else holds them); a later `apply` fails with `GraphReleased`.
    pub(crate) fn release(&self) {
        *self.saved.lock() = None;
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
