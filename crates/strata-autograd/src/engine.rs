//! The backward pass: gradients flow from the roots through the graph in
//! topological order; each node's saved tensors are released as soon as its
//! backward ran (unless `retain_graph`), so the graph's memory returns to the
//! allocator while the pass goes on.
//!
//! A pass either adds the gradients that reach leaves into their `.grad`
//! ([`Var::backward`](crate::Var::backward), [`backward`](crate::backward()))
//! or captures the gradients of chosen variables and leaves every `.grad`
//! alone ([`grad`](crate::grad())); a capturing pass runs only the nodes
//! whose gradients lead to a chosen variable, and computes only the
//! gradients that do (PyTorch's engine prunes the same way).

use crate::error::Result;
use crate::node::{Edge, Node};
use crate::var::VarInner;
use std::cell::Cell;
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::sync::Arc;
use strata_tensor::Tensor;

/// A node or a leaf of the graph, by address.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub(crate) struct Key(usize);

impl Key {
    pub(crate) fn node(n: &Arc<Node>) -> Key {
        Key(Arc::as_ptr(n) as usize)
    }

    pub(crate) fn leaf(v: &Arc<VarInner>) -> Key {
        Key(Arc::as_ptr(v) as usize)
    }

    /// The key of the leaf `v` points to (the same as [`Key::leaf`]'s).
    pub(crate) fn weak_leaf(v: &std::sync::Weak<VarInner>) -> Key {
        Key(v.as_ptr() as usize)
    }
}

/// What a pass does with gradients.
#[derive(Clone, Copy)]
pub(crate) struct Sink<'a> {
    /// Add those reaching leaves (other than captured ones) into their
    /// `.grad`, running the leaves' hooks. Otherwise nothing but what is
    /// captured is computed, and no `.grad` changes.
    pub(crate) accumulate: bool,
    /// The variables (nodes or leaves) whose gradients the pass returns,
    /// in this order; a captured leaf's gradient goes through its tensor
    /// hooks but not into its `.grad`.
    pub(crate) capture: &'a [Key],
    /// Every captured variable must be reachable from the roots: one that
    /// is not fails the pass before anything runs, with
    /// [`unused_input`](crate::backward::unused_input) for its index
    /// (`grad` without `allow_unused`; the graph is left as it was, where
    /// the check after the pass had released it).
    pub(crate) require_all: bool,
}

impl Sink<'static> {
    /// `.grad` for every leaf reached, nothing captured.
    pub(crate) const ACCUMULATE: Sink<'static> = Sink {
        accumulate: true,
        capture: &[],
        require_all: false,
    };
}

thread_local! {
    /// Whether the innermost pass running on this thread accumulates
    /// (`None`: no pass runs).
    static ACCUMULATING: Cell<Option<bool>> = const { Cell::new(None) };
    /// How many passes run on this thread, one inside another (a hook or a
    /// checkpoint's recomputation starting a pass inside a pass).
    static DEPTH: Cell<usize> = const { Cell::new(0) };
}

/// The most passes that may run on one thread one inside another. A hook
/// that starts a backward pass through its own graph starts itself again
/// without end; each level takes stack (about 10 KiB in a debug build), so
/// without a bound the thread overflowed its stack and the process aborted
/// (PyTorch 2.15, which moves reentrant passes deeper than 60 to new
/// threads, does not return from the same program). 128 levels
/// (checkpoints nested 128 deep) fit the 2 MiB stack of a spawned thread in
/// a debug build.
pub(crate) const MAX_NESTED_PASSES: usize = 128;

/// Whether the innermost backward pass running on this thread adds into
/// `.grad` (a checkpoint's recomputation does what the pass that reached
/// it does; see `checkpoint.rs`).
pub(crate) fn pass_accumulates() -> bool {
    ACCUMULATING.with(Cell::get).unwrap_or(true)
}

/// Marks a pass as the innermost running until dropped.
struct PassGuard(Option<bool>);

impl PassGuard {
    /// Enters a pass, unless [`MAX_NESTED_PASSES`] already run on this
    /// thread (an error then, before the pass does anything).
    fn enter(accumulate: bool) -> Result<PassGuard> {
        let depth = DEPTH.with(Cell::get);
        if depth >= MAX_NESTED_PASSES {
            return Err(crate::error::AutogradError::Backward {
                op: "backward",
                msg: format!(
                    "{depth} backward passes already run one inside another on this thread (a \
                     gradient hook or checkpointed function that starts a backward pass through \
                     a graph that runs it again, without end?); start the inner pass outside \
                     the hook, or remove the hook before its own backward"
                ),
            });
        }
        DEPTH.with(|d| d.set(depth + 1));
        Ok(PassGuard(
            ACCUMULATING.with(|a| a.replace(Some(accumulate))),
        ))
    }
}

impl Drop for PassGuard {
    fn drop(&mut self) {
        ACCUMULATING.with(|a| a.set(self.0));
        DEPTH.with(|d| d.set(d.get() - 1));
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

/// Adds `g` into the gradient buffered under `k` (out of place: an earlier
/// gradient may be shared with another input).
fn add_into(buffers: &mut HashMap<Key, Tensor>, k: Key, g: Tensor) -> Result<()> {
    let sum = match buffers.remove(&k) {
        Some(prev) => prev.add(&g)?,
        None => g,
    };
    buffers.insert(k, sum);
    Ok(())
}

/// `g` in leaf `v`'s dtype. Autocast's casts pass a gradient into a leaf
/// unconverted, for its accumulation into `.grad` to convert; a gradient
/// summed over the pass first (a leaf with tensor hooks) or returned (a
/// captured leaf) is converted before it is summed, as PyTorch's
/// `ToCopyBackward` converts each: two bf16 gradients of an f32 leaf summed
/// in bf16 lost the low bits of the smaller, and `grad` returned the f32
/// leaf's gradient in bf16.
fn in_leaf_dtype(v: &VarInner, g: Tensor) -> Result<Tensor> {
    Ok(g.to_dtype_contiguous(v.data.dtype())?)
}

/// The nodes reachable from `roots`; oldest first when `sorted` (an
/// input's node is always older than the nodes that use it).
fn reachable(roots: &[(Edge, Tensor)], sorted: bool) -> Vec<Arc<Node>> {
    let mut seen: HashSet<Key> = HashSet::new();
    let mut stack: Vec<Arc<Node>> = Vec::new();
    for (e, _) in roots {
        if let Edge::Node(n) = e {
            if seen.insert(Key::node(n)) {
                stack.push(Arc::clone(n));
            }
        }
    }
    let mut nodes = Vec::new();
    while let Some(n) = stack.pop() {
        for e in n.edges().iter().flatten() {
            if let Edge::Node(c) = e {
                if seen.insert(Key::node(c)) {
                    stack.push(Arc::clone(c));
                }
            }
        }
        nodes.push(n);
    }
    if sorted {
        nodes.sort_unstable_by_key(|n| n.sequence_nr());
    }
    nodes
}

/// The part of the graph a capturing pass runs (see [`run`]): the nodes a
/// gradient must reach, and those of them whose backward formula runs. A
/// pass that adds into `.grad` has none: it reaches and runs every node.
struct Pruned {
    needed: HashSet<Key>,
    runs: HashSet<Key>,
}

impl Pruned {
    /// From `nodes`, oldest first: a node must be reached when it is
    /// captured or leads to one that is, and runs when it has an edge to
    /// one that must be reached or to a captured leaf.
    fn new(nodes: &[Arc<Node>], targets: &HashSet<Key>) -> Pruned {
        let mut p = Pruned {
            needed: HashSet::new(),
            runs: HashSet::new(),
        };
        for n in nodes {
            let k = Key::node(n);
            let leads = n.edges().iter().flatten().any(|e| match e {
                Edge::Node(c) => p.needed.contains(&Key::node(c)),
                Edge::Leaf(v) => targets.contains(&Key::leaf(v)),
            });
            if leads {
                p.runs.insert(k);
            }
            if leads || targets.contains(&k) {
                p.needed.insert(k);
            }
        }
        p
    }
}

/// Runs a backward pass from `roots` (each an output's edge and its
/// gradient); returns the gradient of each variable of `sink.capture`, in
/// its order (`None` where none reached it).
///
/// Kahn's algorithm, running the most recently recorded ready node first,
/// as PyTorch's engine does: a layer's parameter gradients are finished
/// right after its backward, before the layers below it. (Under autocast a
/// parameter's gradient passes through the node of its cast to bf16;
/// taking the most recently *readied* node first instead left the cast
/// nodes of some biases, readied before the activations' chain, until
/// every other node had run, so DDP's in-order bucket all-reduces all
/// started at the end of backward.) A leaf's post-accumulate-grad hooks
/// run when the last edge into it has been processed: its gradient for
/// this pass is then final.
pub(crate) fn run(
    roots: Vec<(Edge, Tensor)>,
    retain_graph: bool,
    sink: Sink<'_>,
) -> Result<Vec<Option<Tensor>>> {
    let _pass = PassGuard::enter(sink.accumulate)?;
    let targets: HashSet<Key> = sink.capture.iter().copied().collect();
    let capturing = !sink.accumulate;
    let nodes = reachable(&roots, capturing);
    let pruned = capturing.then(|| Pruned::new(&nodes, &targets));
    let needed = |k: &Key| pruned.as_ref().is_none_or(|p| p.needed.contains(k));
    let runs = |k: &Key| pruned.as_ref().is_none_or(|p| p.runs.contains(k));
    let captured_here = |k: &Key| !targets.is_empty() && targets.contains(k);
    let leads_on = |e: &Edge| match e {
        Edge::Node(c) => needed(&Key::node(c)),
        Edge::Leaf(v) => !capturing || captured_here(&Key::leaf(v)),
    };
    // Number of edges into each needed node from the nodes that run, and
    // into each leaf.
    let mut deps: HashMap<Key, usize> = HashMap::new();
    let mut leaf_edges: HashMap<Key, usize> = HashMap::new();
    for n in nodes.iter().filter(|n| runs(&Key::node(n))) {
        for e in n.edges().iter().flatten().filter(|e| leads_on(e)) {
            match e {
                Edge::Node(c) => *deps.entry(Key::node(c)).or_insert(0) += 1,
                Edge::Leaf(v) => *leaf_edges.entry(Key::leaf(v)).or_insert(0) += 1,
            }
        }
    }
    for (e, _) in &roots {
        if let Edge::Leaf(v) = e {
            *leaf_edges.entry(Key::leaf(v)).or_insert(0) += 1;
        }
    }
    if sink.require_all {
        let reached = |k: &Key| needed(k) || leaf_edges.contains_key(k);
        if let Some(i) = sink.capture.iter().position(|k| !reached(k)) {
            return Err(crate::backward::unused_input(i));
        }
    }
    // Every node that will run is checked before any runs: a saved tensor
    // modified in place, or a node released by an earlier backward, failed
    // the pass only when reached, after the nodes before it had added into
    // leaves' `.grad` (half a backward) and released their saved tensors.
    for n in nodes.iter().filter(|n| runs(&Key::node(n))) {
        n.check_saved()?;
    }
    drop(nodes);

    // Gradients waiting for their node (by the node's key) or, for a leaf
    // with tensor hooks or one being captured, the pass's sum so far.
    let mut buffers: HashMap<Key, Tensor> = HashMap::new();
    let mut ready = BinaryHeap::new();
    let mut leaves: Vec<(Arc<VarInner>, Option<Tensor>)> = Vec::new();
    for (e, g) in roots {
        match e {
            Edge::Node(n) => {
                let k = Key::node(&n);
                if !needed(&k) {
                    continue;
                }
                let first = !buffers.contains_key(&k);
                add_into(&mut buffers, k, g)?;
                if first && !deps.contains_key(&k) {
                    ready.push(Ready(n));
                }
            }
            Edge::Leaf(v) => leaves.push((v, Some(g))),
        }
    }
    let mut captured: HashMap<Key, Tensor> = HashMap::new();
    let mut leaf = |v: Arc<VarInner>,
                    g: Option<Tensor>,
                    buffers: &mut HashMap<Key, Tensor>,
                    captured: &mut HashMap<Key, Tensor>|
     -> Result<()> {
        let k = Key::leaf(&v);
        let left = leaf_edges.get_mut(&k).expect("every leaf edge was counted");
        *left -= 1;
        let last = *left == 0;
        if captured_here(&k) {
            if let Some(g) = g {
                add_into(buffers, k, in_leaf_dtype(&v, g)?)?;
            }
            if last {
                if let Some(g) = buffers.remove(&k) {
                    // A checkpoint's recomputation hands a parameter's
                    // gradient to the outer pass, which runs its hooks.
                    let g = if crate::checkpoint::in_recompute() {
                        g
                    } else {
                        v.run_tensor_hooks(g)?
                    };
                    captured.insert(k, g);
                }
            }
            return Ok(());
        }
        if capturing {
            return Ok(());
        }
        // A leaf made not to require grad since the graph was recorded
        // (frozen after its forward) gets no gradient, as PyTorch's
        // AccumulateGrad skips it; its hooks still run, as PyTorch's do.
        // The pass's gradients for a leaf are summed first and added to
        // `.grad` once, when its last edge is processed, as PyTorch's
        // AccumulateGrad adds its input buffer: adding each edge's gradient
        // to an existing `.grad` in turn rounds differently (a parameter
        // used twice, accumulated over two backward passes). A leaf with
        // one edge, and the last edge of one whose earlier edges brought no
        // gradient, goes straight to `.grad`.
        if let Some(g) = g.filter(|_| v.requires_grad_flag()) {
            if v.has_tensor_hooks() || !last || buffers.contains_key(&k) {
                add_into(buffers, k, in_leaf_dtype(&v, g)?)?;
            } else {
                v.accumulate(g)?;
            }
        }
        if last {
            if let Some(g) = buffers.remove(&k) {
                v.accumulate(v.run_tensor_hooks(g)?)?;
            }
            // Inside a checkpoint's recomputation the outer pass runs the
            // post-accumulate-grad hooks (see `checkpoint::in_recompute`).
            if !crate::checkpoint::in_recompute() {
                v.run_grad_hooks()?;
            }
        }
        Ok(())
    };
    for (v, g) in leaves {
        leaf(v, g, &mut buffers, &mut captured)?;
    }
    while let Some(Ready(node)) = ready.pop() {
        let k = Key::node(&node);
        let grad = match (buffers.remove(&k), node.output_hooks()) {
            (Some(g), Some(hooks)) => Some(hooks.apply(g)?),
            (grad, _) => grad,
        };
        if captured_here(&k) {
            if let Some(g) = &grad {
                captured.insert(k, g.clone());
            }
        }
        if !runs(&k) {
            continue;
        }
        let needs: Vec<bool> = node
            .edges()
            .iter()
            .map(|e| e.as_ref().is_some_and(&leads_on))
            .collect();
        let grads = match grad {
            Some(g) => node.apply(&g, &needs)?,
            None => vec![None; needs.len()],
        };
        if !retain_graph {
            node.release();
        }
        for ((edge, g), need) in node.edges().iter().zip(grads).zip(needs) {
            match edge {
                Some(Edge::Leaf(v)) if need => leaf(Arc::clone(v), g, &mut buffers, &mut captured)?,
                Some(Edge::Node(c)) if need => {
                    let ck = Key::node(c);
                    if let Some(g) = g {
                        add_into(&mut buffers, ck, g)?;
                    }
                    let d = deps.get_mut(&ck).expect("every child was counted");
                    *d -= 1;
                    if *d == 0 {
                        ready.push(Ready(Arc::clone(c)));
                    }
                }
                _ => {}
            }
        }
    }
    Ok(sink
        .capture
        .iter()
        .map(|k| captured.get(k).cloned())
        .collect())
}
