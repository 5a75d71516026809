//! Gradient checkpointing with PyTorch's non-reentrant semantics
//! (`torch.utils.checkpoint.checkpoint(f, *inputs, use_reentrant=False)`).
//!
//! [`checkpoint`] runs `f` without recording: none of `f`'s intermediates is
//! saved, only its inputs are (version-checked like any saved tensor), and
//! the output gets one `CheckpointBackward` node. When backward reaches that
//! node it recomputes `f` with grad enabled, under the autocast state and
//! from the random-generator state the forward ran with (so dropout masks
//! match), back-propagates the output's gradient through the recomputed
//! graph, and passes the inputs' gradients on. The recomputed graph lives
//! only during that node's backward, so the peak memory of a network of `n`
//! checkpointed blocks is the block outputs plus one block's activations.
//!
//! Parameters that `f` uses but does not receive as inputs (the weights a
//! closure captures) are found while the forward runs: every op reports its
//! inputs to the innermost active checkpoint, and the leaves that require
//! grad become edges of the node, so the node is recorded even when no input
//! requires grad. Their gradients are accumulated into their `.grad` by the
//! recomputation's backward, as each node of it runs, except for a
//! parameter with tensor hooks ([`Var::register_hook`]) and in a
//! [`grad`](crate::grad()) pass: the recomputation then returns its
//! gradient to the outer pass, so that the hooks see the pass's whole
//! gradient once and `grad` leaves every `.grad` alone. A captured variable that is *not* a leaf (made
//! by a recorded op outside `f`) must be passed as an input instead:
//! [`checkpoint`] returns [`AutogradError::Checkpoint`] for it.
//!
//! The output requires grad only when it depends on an input or captured
//! variable requiring grad, as PyTorch's (whose forward runs with grad mode
//! on): while `f` runs, every op's output and every in-place op's target is
//! noted as dependent when one of its operands is. An output that is not (a
//! constant, a `.detach()`ed value, one made only of inputs that do not
//! require grad) is returned as `f` made it, with no node.
//!
//! Checkpoints nest (an inner checkpoint in a recomputed forward checkpoints
//! again), compose with autocast, and accept views as inputs.
//!
//! `f` must be deterministic (its randomness drawn from the default
//! generator, which is replayed): a recomputed output of another shape,
//! dtype or device than the forward's makes the backward fail with
//! [`AutogradError::Checkpoint`], as PyTorch's `CheckpointError`.
//!
//! `f` may register gradient hooks ([`Var::register_hook`]) on its inputs
//! and on the values it computes from them, as in PyTorch (whose forward
//! runs with grad mode on, so that they require grad): the forward's
//! registration does nothing (its handle removes nothing), and the
//! recomputation registers the hook again on the value it remakes, so the
//! hook sees that value's gradient once per backward pass that reaches the
//! checkpoint (or [`grad`](crate::grad()) pass that needs it). `retain_grad`
//! there is refused: the recomputed value's `.grad` is not the forward's.
//!
//! In-place ops on the inputs follow PyTorch: on an input that is a leaf
//! requiring grad (or a view of one) `f` gets [`AutogradError::InPlaceOnLeaf`]
//! and the leaf is unchanged; an input that `f` modified in place makes the
//! backward fail with [`AutogradError::SavedTensorModified`] (the
//! recomputation would start from the modified value). Captured parameters
//! are watched too: an in-place op on one inside `f` is
//! [`AutogradError::InPlaceOnLeaf`] (PyTorch's forward runs with grad mode
//! on and refuses it), and one modified after `f` first read it (through
//! `.data()` inside `f`, or by an optimizer step before the backward) makes
//! the backward fail with [`AutogradError::SavedTensorModified`], whose
//! `index` counts the inputs first, then the captured parameters in the
//! order `f` first read them. (PyTorch 2.15's non-reentrant checkpoint
//! recomputes from the modified parameter instead, returning gradients of
//! a forward that never ran; without a checkpoint it refuses, as strata
//! does.) These checks run before the backward pass changes any gradient.
//! [`checkpoint_blocks`] applies one to every `k`-th block of a sequence.

use crate::autocast::{autocast_state, AutocastGuard};
use crate::backward::recompute_pass;
use crate::engine::Key;
use crate::error::{AutogradError, Result};
use crate::grad_mode::{is_grad_enabled, EnableGradGuard, NoGradGuard};
use crate::inference_mode::is_inference_mode_enabled;
use crate::ops::formula;
use crate::var::{record, Var, VarInner};
use std::cell::{Cell, RefCell};
use std::collections::HashSet;
use std::sync::Arc;
use strata_tensor::generator::{rng_state, set_rng_state, RngState};

thread_local! {
    /// One frame per active checkpointed forward (see [`Frame`]).
    static TRACERS: RefCell<Vec<Frame>> = const { RefCell::new(Vec::new()) };
    /// How many recomputations' backward passes are running on this thread.
    static RECOMPUTING: Cell<usize> = const { Cell::new(0) };
    /// How many recomputations are running their function on this thread.
    static REMAKING: Cell<usize> = const { Cell::new(0) };
}

/// Counts itself in one of the counters above until dropped (a
/// recomputation running its function, or back-propagating).
struct Counted(&'static std::thread::LocalKey<Cell<usize>>);

impl Counted {
    fn enter(counter: &'static std::thread::LocalKey<Cell<usize>>) -> Counted {
        counter.with(|c| c.set(c.get() + 1));
        Counted(counter)
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.with(|c| c.set(c.get() - 1));
    }
}

/// Whether [`Var::register_hook`] on `v`, which does not require grad,
/// registers nothing instead of failing: inside a checkpointed forward, `v`
/// depends on an input or captured variable requiring grad (it would
/// require grad in PyTorch, whose forward runs with grad mode on; the
/// recomputation registers the hook again on the value it remakes); inside
/// a recomputation, `v` depends only on inputs that this backward pass
/// does not need (the forward accepted the hook, and no gradient reaches
/// `v` in this pass).
pub(crate) fn defers_hook(v: &Var) -> bool {
    REMAKING.with(Cell::get) > 0 || forward_depends(v)
}

/// Whether a checkpoint's recomputation is back-propagating on this thread.
/// Its backward adds the captured parameters' gradients into their `.grad`,
/// but their gradient for the pass is final only when the outer pass has
/// processed its edges into them (the checkpoint node has one per captured
/// parameter): their post-accumulate-grad hooks run then, once, and not
/// inside the recomputation (where they ran a second time, with a gradient
/// still missing the contributions of ops outside the checkpoint; a
/// `DistributedDataParallel` then launched a bucket early and refused the
/// second call).
pub(crate) fn in_recompute() -> bool {
    RECOMPUTING.with(Cell::get) > 0
}

/// What one active checkpointed forward has seen.
#[derive(Default)]
struct Frame {
    /// The variables requiring grad that its ops read (captured from
    /// outside, since nothing inside requires grad), each with its version
    /// when read.
    captured: Vec<(Var, u64)>,
    /// The float variables (by address) made by its ops from a value that
    /// depends on an input or captured variable requiring grad: those that
    /// would require grad had the forward run with grad mode on, as
    /// PyTorch's does (a `.detach()`ed one is a new variable, not listed).
    dependent: HashSet<usize>,
    /// The storages (`Tensor::storage_ptr`) that an in-place op wrote a
    /// dependent value into: every variable viewing one depends on it (a
    /// view's in-place op changes its base, as in PyTorch).
    written: HashSet<u64>,
}

impl Frame {
    fn depends(&self, v: &Var) -> bool {
        v.requires_grad()
            || self.dependent.contains(&(Arc::as_ptr(v.inner()) as usize))
            || self.written.contains(&v.data().storage_ptr())
    }
}

// An address freed and reused during the forward, or a storage written and
// then viewed by a `.detach()`ed variable, only makes a value look
// dependent (its output recorded, as before this tracking existed), never
// the reverse.

/// Called by every recorded op with its inputs: inside a checkpointed
/// forward, remembers those that require grad.
pub(crate) fn note_parameters(inputs: &[Option<&Var>]) {
    TRACERS.with(|t| {
        let mut t = t.borrow_mut();
        if let Some(top) = t.last_mut() {
            for v in inputs.iter().flatten() {
                if v.requires_grad() {
                    top.captured.push(((*v).clone(), v.version()));
                }
            }
        }
    });
}

/// Called by every recorded op with its inputs and output: inside a
/// checkpointed forward, lists the output as dependent when it is float and
/// one of the inputs is.
pub(crate) fn note_output(inputs: &[Option<&Var>], output: &Var) {
    TRACERS.with(|t| {
        let mut t = t.borrow_mut();
        if let Some(top) = t.last_mut() {
            if output.dtype().is_float() && inputs.iter().flatten().any(|v| top.depends(v)) {
                top.dependent.insert(Arc::as_ptr(output.inner()) as usize);
            }
        }
    });
}

/// Called by every in-place op on a variable (`target op= other`) inside a
/// checkpointed forward: the target's storage becomes dependent when
/// `other` is (`torch.zeros(3).add_(x)` requires grad in PyTorch).
pub(crate) fn note_in_place(target: &Var, other: Option<&Var>) {
    TRACERS.with(|t| {
        let mut t = t.borrow_mut();
        if let Some(top) = t.last_mut() {
            if other.is_some_and(|o| top.depends(o)) && target.dtype().is_float() {
                top.written.insert(target.data().storage_ptr());
            }
        }
    });
}

/// Whether `v` is a float variable that depends on an input or captured
/// variable requiring grad, inside a checkpointed forward: one that would
/// require grad had the forward run with grad mode on, as PyTorch's does.
pub(crate) fn forward_depends(v: &Var) -> bool {
    TRACERS.with(|t| {
        t.borrow()
            .last()
            .is_some_and(|top| v.dtype().is_float() && top.depends(v))
    })
}

/// Whether a checkpointed forward is running on this thread (its function
/// runs without grad mode, where PyTorch's runs with it).
pub(crate) fn in_forward() -> bool {
    TRACERS.with(|t| !t.borrow().is_empty())
}

/// Pops the tracer even when `f` fails or panics.
struct TracerGuard;

impl TracerGuard {
    /// Pushes a frame in which `dependent` (the copies of the inputs
    /// requiring grad) are dependent.
    fn push(dependent: &[&Var]) -> TracerGuard {
        let frame = Frame {
            dependent: dependent
                .iter()
                .map(|v| Arc::as_ptr(v.inner()) as usize)
                .collect(),
            ..Frame::default()
        };
        TRACERS.with(|t| t.borrow_mut().push(frame));
        TracerGuard
    }

    /// The captured variables, and whether `out` depends on an input or a
    /// captured variable requiring grad.
    fn take(&self, out: Option<&Var>) -> (Vec<(Var, u64)>, bool) {
        TRACERS.with(|t| {
            let mut t = t.borrow_mut();
            let Some(top) = t.last_mut() else {
                return (Vec::new(), true);
            };
            let depends = out.is_some_and(|o| top.depends(o));
            (std::mem::take(&mut top.captured), depends)
        })
    }
}

impl Drop for TracerGuard {
    fn drop(&mut self) {
        TRACERS.with(|t| t.borrow_mut().pop());
    }
}

/// Restores the random generator's state when dropped, unless disarmed.
struct RngRestore(Option<RngState>);

impl RngRestore {
    fn new(state: RngState) -> RngRestore {
        RngRestore(Some(state))
    }

    fn disarm(mut self) {
        self.0 = None;
    }
}

impl Drop for RngRestore {
    fn drop(&mut self) {
        if let Some(state) = self.0 {
            set_rng_state(state);
        }
    }
}

/// Runs `f` with the generator's state at the call; if `f` fails (an error
/// return, or a panic while it unwinds) the generator is set back to that
/// state.
fn rewinding_rng_on_failure<T>(f: impl FnOnce(RngState) -> Result<T>) -> Result<T> {
    let rng = rng_state();
    let restore = RngRestore::new(rng);
    let out = f(rng);
    if out.is_ok() {
        restore.disarm();
    }
    out
}

/// Runs `f(inputs)` without saving its intermediates; backward recomputes it
/// (see the module documentation). Without grad mode (or in inference mode)
/// this is just `f(inputs)`.
///
/// ```
/// use strata_autograd::{checkpoint, Var};
/// use strata_tensor::{DType, Device, Tensor};
/// let w = Var::parameter(Tensor::full(&[3], 2.0, DType::F32, Device::Cpu).unwrap()).unwrap();
/// let x = Var::parameter(Tensor::ones(&[3], DType::F32, Device::Cpu).unwrap()).unwrap();
/// let w2 = w.clone();
/// let y = checkpoint(move |xs| xs[0].mul(&w2)?.exp(), &[x.clone()]).unwrap();
/// assert_eq!(y.saved_bytes(), 12);            // only the input, not exp's result
/// y.sum(None, false).unwrap().backward().unwrap();
/// let e2 = 2f32.exp();
/// assert!((x.grad().unwrap().to_vec::<f32>().unwrap()[0] - 2.0 * e2).abs() < 1e-4);
/// assert!((w.grad().unwrap().to_vec::<f32>().unwrap()[0] - e2).abs() < 1e-4);
/// ```
///
/// A call that fails (an error from `f` or from the checks below, or a
/// panic in `f`) leaves the random generator as it was before the call,
/// so that a caller that handles the error and retries draws the same
/// dropout masks (PyTorch leaves the draws `f` made before raising).
pub fn checkpoint<F>(f: F, inputs: &[Var]) -> Result<Var>
where
    F: Fn(&[Var]) -> Result<Var> + Send + Sync + 'static,
{
    rewinding_rng_on_failure(|rng| checkpoint_run(f, inputs, rng))
}

/// [`checkpoint`]'s work; `rng` is the generator's state at the call.
fn checkpoint_run<F>(f: F, inputs: &[Var], rng: RngState) -> Result<Var>
where
    F: Fn(&[Var]) -> Result<Var> + Send + Sync + 'static,
{
    if !is_grad_enabled() || is_inference_mode_enabled() {
        return f(inputs);
    }
    let autocast = autocast_state();
    // Leaves that require grad are handed to `f` as copies that refuse
    // in-place ops (PyTorch's forward runs with grad mode on and refuses
    // them; here `f` runs without it and changed the leaf silently).
    let detached: Vec<Var> = inputs
        .iter()
        .map(|v| {
            if v.is_leaf() && v.requires_grad() {
                Var::standing_for_leaf(v.data().clone())
            } else {
                v.detach()
            }
        })
        .collect();
    // The inputs' versions before `f`: one that `f` modified in place is
    // refused at backward, as PyTorch refuses it (the recomputation would
    // start from the modified value).
    let versions: Vec<u64> = inputs.iter().map(Var::version).collect();
    let requiring: Vec<&Var> = inputs
        .iter()
        .zip(&detached)
        .filter_map(|(v, d)| v.requires_grad().then_some(d))
        .collect();
    let (out, captured, depends) = {
        let tracer = TracerGuard::push(&requiring);
        let _no_grad = NoGradGuard::new();
        let out = f(&detached);
        let (captured, depends) = tracer.take(out.as_ref().ok());
        (out, captured, depends)
    };
    let out = out?;
    // `f` returned one of its inputs itself (the identity, `to_dtype` to
    // the same dtype ...): PyTorch's non-reentrant checkpoint returns that
    // input tensor (`y is x`), with its own history or none (a leaf stays a
    // leaf, refusing in-place ops), and records nothing.
    if let Some(k) = detached
        .iter()
        .position(|d| Arc::ptr_eq(d.inner(), out.inner()))
    {
        return Ok(inputs[k].clone());
    }
    drop(detached);
    // An output that depends on no input or captured variable requiring
    // grad (a constant, `.detach()`ed, or made of inputs that do not require
    // grad) does not require grad, as PyTorch's (its forward records no
    // graph to it), and nothing is recomputed for it.
    if !depends {
        return Ok(out);
    }
    // Captured variables, each once, with the version they had when first
    // read: one modified after that (in `f` through `.data()`, or by an
    // optimizer step before the backward) is refused at backward, as
    // PyTorch refuses a parameter modified after an op saved it (its
    // non-reentrant checkpoint, 2.15, recomputes from the new value
    // instead, giving gradients of a forward that never ran).
    let mut params: Vec<Var> = Vec::new();
    let mut param_versions: Vec<u64> = Vec::new();
    let mut seen = HashSet::new();
    for (v, version) in captured {
        if !v.is_leaf() {
            return Err(AutogradError::Checkpoint {
                msg: format!(
                    "the checkpointed function reads a variable made by {} outside it; pass \
                     that variable in `inputs` instead of capturing it",
                    v.grad_fn_name().unwrap_or("a recorded op")
                ),
            });
        }
        if seen.insert(Arc::as_ptr(v.inner())) {
            params.push(v);
            param_versions.push(version);
        }
    }
    let n_in = inputs.len();
    let f = Arc::new(f);
    // Held weakly (the node's edges hold them): a parameter's gradient is
    // returned to the outer pass instead of added into `.grad` when that
    // pass does not accumulate, or when its tensor hooks must see the
    // pass's whole gradient.
    let weak_params: Vec<std::sync::Weak<VarInner>> =
        params.iter().map(|p| Arc::downgrade(p.inner())).collect();
    // The output's metadata, which the recomputation must reproduce.
    let (out_shape, out_dtype, out_device) = (out.shape().to_vec(), out.dtype(), out.device());
    // The node's check before a backward pass (`Node::expect_versions`)
    // compares the inputs with their versions before `f` and the captured
    // parameters with theirs at first use.
    let backward = formula(move |g, saved, needs| {
        let _grad = EnableGradGuard::new();
        let _rng = RngRestore::new(rng_state());
        set_rng_state(rng);
        let leaves: Vec<Var> = saved
            .iter()
            .zip(needs)
            .map(|(t, &need)| {
                let v = Var::new(t.clone());
                if need {
                    v.requires_grad_(true)?;
                }
                Ok(v)
            })
            .collect::<Result<_>>()?;
        let out = {
            let _autocast = AutocastGuard::enter(autocast);
            let _remaking = Counted::enter(&REMAKING);
            f(&leaves)?
        };
        // A function that is not deterministic (it made another shape or
        // dtype the second time) is refused, as PyTorch's checkpoint refuses
        // recomputed values whose metadata differ from the forward's
        // (`CheckpointError`); strata back-propagated through the
        // recomputed f64 output of an f32 forward.
        if out.shape() != out_shape.as_slice()
            || out.dtype() != out_dtype
            || out.device() != out_device
        {
            return Err(AutogradError::Checkpoint {
                msg: format!(
                    "the recomputed output is {} {:?} on {}, the forward's was {} {:?} on {}: \
                     the checkpointed function must compute the same thing each time it runs \
                     (its randomness from the default generator, which checkpoint replays)",
                    out.dtype(),
                    out.shape(),
                    out.device(),
                    out_dtype,
                    out_shape,
                    out_device
                ),
            });
        }
        let mut grads: Vec<Option<Tensor>> = vec![None; needs.len()];
        if out.requires_grad() {
            // The recomputation does what the pass that reached it does:
            // add into the parameters' `.grad` (their post-accumulate-grad
            // hooks run in the outer pass, see `in_recompute`), or only
            // capture gradients (`grad`).
            let accumulate = crate::engine::pass_accumulates();
            let mut capture: Vec<Key> = leaves.iter().map(|v| Key::leaf(v.inner())).collect();
            let mut slots: Vec<usize> = (0..n_in).collect();
            for (j, p) in weak_params.iter().enumerate() {
                let hooked = p.upgrade().is_some_and(|p| p.has_tensor_hooks());
                if needs[n_in + j] && (!accumulate || hooked) {
                    capture.push(Key::weak_leaf(p));
                    slots.push(n_in + j);
                }
            }
            let _recomputing = Counted::enter(&RECOMPUTING);
            let captured = recompute_pass(&out, g, accumulate, &capture)?;
            for (slot, g) in slots.into_iter().zip(captured) {
                if needs[slot] {
                    // Hooks `f` registered on an input (see
                    // `Var::register_hook`) are on its stand-in: the
                    // recomputation hands captured leaves' gradients on
                    // without running their hooks, so they run here.
                    grads[slot] = match (g, leaves.get(slot)) {
                        (Some(g), Some(leaf)) => Some(leaf.inner().run_tensor_hooks(g)?),
                        (g, _) => g,
                    };
                }
            }
        }
        Ok(grads)
    });
    let mut edges: Vec<Option<&Var>> = inputs.iter().map(Some).collect();
    edges.extend(params.iter().map(Some));
    let saved: Vec<Tensor> = inputs.iter().map(|v| v.data().clone()).collect();
    debug_assert_eq!(saved.len(), n_in);
    let out = record(
        "CheckpointBackward",
        out.data().clone(),
        &edges,
        move || saved,
        backward,
        false,
    )?;
    if let Some(node) = out.grad_fn() {
        let leaves = param_versions
            .into_iter()
            .enumerate()
            .map(|(k, version)| (n_in + k, version))
            .collect();
        node.expect_versions(&versions, leaves);
    }
    Ok(out)
}

use strata_tensor::Tensor;

/// Runs `blocks` in sequence on `x` (`x = forward(block, x)`), checkpointing
/// block `i` when `every > 0` and `i % every == 0` (`every = 1`: every block;
/// `0`: none), as `torch_gpt.py`'s `--checkpoint every:K` does. As
/// [`checkpoint`], a call that fails leaves the random generator as it was
/// before it (the draws of the blocks that ran before the failing one
/// included).
pub fn checkpoint_blocks<B>(
    blocks: &[Arc<B>],
    every: usize,
    x: &Var,
    forward: fn(&B, &Var) -> Result<Var>,
) -> Result<Var>
where
    B: Send + Sync + 'static,
{
    rewinding_rng_on_failure(|_| run_blocks(blocks, every, x, forward))
}

/// [`checkpoint_blocks`]'s work.
fn run_blocks<B>(
    blocks: &[Arc<B>],
    every: usize,
    x: &Var,
    forward: fn(&B, &Var) -> Result<Var>,
) -> Result<Var>
where
    B: Send + Sync + 'static,
{
    let mut h = x.clone();
    for (i, block) in blocks.iter().enumerate() {
        h = if every > 0 && i % every == 0 {
            let block = Arc::clone(block);
            checkpoint(move |xs| forward(&block, &xs[0]), &[h])?
        } else {
            forward(block, &h)?
        };
    }
    Ok(h)
}
