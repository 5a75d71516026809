//! Starting a backward pass: [`Var::backward`] and [`Var::backward_with`]
//! from one output, [`backward()`] from several, and [`grad()`] /
//! [`grad_with`] for the gradients of chosen variables without touching any
//! `.grad` (PyTorch's `torch.autograd.backward` and `torch.autograd.grad`).
//! The pass itself is `engine.rs`.
//!
//! Gradients are computed with grad mode off: they have no history, so
//! gradients of gradients (PyTorch's `create_graph = True`) are not
//! available.

use crate::engine::{self, Key, Sink};
use crate::error::{AutogradError, Result};
use crate::grad_mode::NoGradGuard;
use crate::node::Edge;
use crate::var::Var;
use strata_tensor::{Scalar, Tensor, TensorError};

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
    /// more than one element; of the output's shape and device, and
    /// converted to its dtype when it has another) and `retain_graph` (keep
    /// the saved tensors so the graph can be traversed again).
    pub fn backward_with(&self, grad: Option<&Tensor>, retain_graph: bool) -> Result<()> {
        if !self.requires_grad() {
            return Err(AutogradError::NoGradFn);
        }
        let root = root(self, grad)?;
        let _no_grad = NoGradGuard::new();
        engine::run(vec![root], retain_graph, Sink::ACCUMULATE)?;
        Ok(())
    }
}

/// The edge and gradient a pass starts from for `out`, after checking
/// that `out` (which requires grad) can start one and that `grad` fits it.
fn root(out: &Var, grad: Option<&Tensor>) -> Result<(Edge, Tensor)> {
    // A view that requires grad only through its base is a leaf with no
    // `.grad` of its own to fill (PyTorch refuses it as not requiring
    // grad; a stale one PyTorch back-propagates through its base).
    if let Some(e) = out.untracked_view_error() {
        return Err(e);
    }
    if let Some(n) = out.grad_fn().filter(|n| n.is_stale_view()) {
        return Err(AutogradError::ViewOfModifiedBase { op: n.name() });
    }
    let grad = match grad {
        Some(g) => {
            if g.shape() != out.shape() {
                return Err(AutogradError::GradShape {
                    expected: out.shape().to_vec(),
                    got: g.shape().to_vec(),
                });
            }
            if g.device() != out.device() {
                return Err(AutogradError::Tensor(TensorError::DeviceMismatch {
                    op: "backward",
                    lhs: out.device(),
                    rhs: g.device(),
                }));
            }
            // A gradient of another dtype is converted to the output's, as
            // PyTorch's engine converts it: the backward formulas expect it
            // (matmul's refused an f64 gradient of an f32 product, gelu's an
            // integer one).
            g.to_dtype_contiguous(out.dtype())?
        }
        None => {
            if out.numel() != 1 {
                return Err(AutogradError::NonScalarOutput {
                    shape: out.shape().to_vec(),
                });
            }
            Tensor::full(out.shape(), Scalar::Int(1), out.dtype(), out.device())?
        }
    };
    let edge = out
        .edge()
        .expect("a variable that requires grad has an edge");
    Ok((edge, grad))
}

/// The roots of a pass from several outputs (PyTorch's `tensors`) and
/// their gradients (`grad_outputs`: one per output, or none at all for
/// outputs of one element each).
fn roots(
    op: &'static str,
    outputs: &[&Var],
    grad_outputs: &[Option<&Tensor>],
) -> Result<Vec<(Edge, Tensor)>> {
    if outputs.is_empty() {
        return Err(AutogradError::Backward {
            op,
            msg: "no outputs given to differentiate".into(),
        });
    }
    if !grad_outputs.is_empty() && grad_outputs.len() != outputs.len() {
        return Err(AutogradError::Backward {
            op,
            msg: format!(
                "{} outputs but {} output gradients; give one per output (None for an output \
                 of one element), or none at all",
                outputs.len(),
                grad_outputs.len()
            ),
        });
    }
    outputs
        .iter()
        .enumerate()
        .map(|(i, out)| {
            if !out.requires_grad() {
                return Err(AutogradError::Backward {
                    op,
                    msg: format!("output {i} does not require grad and has no grad_fn"),
                });
            }
            root(out, grad_outputs.get(i).copied().flatten())
        })
        .collect()
}

/// Runs one backward pass from several outputs, adding the gradients into
/// the `.grad` of every leaf that requires grad (PyTorch's
/// `torch.autograd.backward(tensors, grad_tensors)`): the same as summing
/// the outputs' `backward_with`s, in one pass through the shared part of
/// the graph. `grad_outputs` holds one gradient per output (`None` for an
/// output of one element: a gradient of 1), or is empty when every output
/// has one element.
///
/// ```
/// use strata_autograd::{backward, Var};
/// use strata_tensor::{DType, Device, Tensor};
///
/// let x = Var::parameter(Tensor::ones(&[2], DType::F32, Device::Cpu)?)?;
/// let a = x.mul(2.0)?.sum(None, false)?;
/// let b = x.mul(&x)?;
/// let gb = Tensor::from_slice(&[1.0f32, 10.0], &[2], Device::Cpu)?;
/// backward(&[&a, &b], &[None, Some(&gb)], false)?;
/// assert_eq!(x.grad().unwrap().to_vec::<f32>()?, vec![4.0, 22.0]);
/// # Ok::<(), strata_autograd::AutogradError>(())
/// ```
pub fn backward(
    outputs: &[&Var],
    grad_outputs: &[Option<&Tensor>],
    retain_graph: bool,
) -> Result<()> {
    let roots = roots("backward", outputs, grad_outputs)?;
    let _no_grad = NoGradGuard::new();
    engine::run(roots, retain_graph, Sink::ACCUMULATE)?;
    Ok(())
}

/// Options of [`grad_with`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GradArgs {
    /// Keep the graph's saved tensors for another pass.
    pub retain_graph: bool,
    /// An input no gradient reaches gets `None` instead of an error.
    pub allow_unused: bool,
    /// An input no gradient reaches gets zeros (implies `allow_unused`).
    pub materialize_grads: bool,
}

/// The gradients of the one-element `outputs`' sum with respect to
/// `inputs`, without adding into any `.grad` (PyTorch's
/// `torch.autograd.grad(outputs, inputs)`); the graph is released. Every
/// input must require grad and be reached by a gradient; see [`grad_with`]
/// for the options. Only the part of the graph between the outputs and the
/// inputs runs.
///
/// ```
/// use strata_autograd::{grad, Var};
/// use strata_tensor::{DType, Device, Tensor};
///
/// let x = Var::parameter(Tensor::from_slice(&[1.0f32, 2.0], &[2], Device::Cpu)?)?;
/// let w = Var::parameter(Tensor::full(&[2], 3.0, DType::F32, Device::Cpu)?)?;
/// let y = x.mul(&x)?.mul(&w)?.sum(None, false)?;
/// let g = grad(&[&y], &[&x])?;
/// assert_eq!(g[0].to_vec::<f32>()?, vec![6.0, 12.0]);
/// assert!(x.grad().is_none() && w.grad().is_none());
/// # Ok::<(), strata_autograd::AutogradError>(())
/// ```
pub fn grad(outputs: &[&Var], inputs: &[&Var]) -> Result<Vec<Tensor>> {
    let grads = grad_with(outputs, &[], inputs, GradArgs::default())?;
    Ok(grads
        .into_iter()
        .map(|g| g.expect("without allow_unused every input has a gradient"))
        .collect())
}

/// [`grad()`] with output gradients (as for [`backward()`]: one per
/// output, `None` for an output of one element, or none at all) and
/// [`GradArgs`]. Inputs may be leaves or results of recorded ops (their
/// gradient is the one the node that made them receives); the tensor
/// hooks of inputs run on their gradients ([`Var::register_hook`]), and
/// variables that retain their gradient ([`Var::retain_grad`]) and are
/// reached on the way keep it, as in PyTorch.
///
/// Errors, before anything runs (the graph stays usable, e.g. for a
/// second call with `allow_unused`): no outputs or no inputs, an output or
/// input that does not require grad, a wrong number of output gradients
/// or one that does not fit its output, an input not in the graph of the
/// outputs unless `allow_unused` or `materialize_grads` (PyTorch checks it
/// after the pass, which has released the graph by then). An input in the
/// graph that no gradient reached after all is the same error, after the
/// pass.
pub fn grad_with(
    outputs: &[&Var],
    grad_outputs: &[Option<&Tensor>],
    inputs: &[&Var],
    args: GradArgs,
) -> Result<Vec<Option<Tensor>>> {
    const OP: &str = "grad";
    let roots = roots(OP, outputs, grad_outputs)?;
    if inputs.is_empty() {
        return Err(AutogradError::Backward {
            op: OP,
            msg: "no inputs given to differentiate with respect to".into(),
        });
    }
    let keys = inputs
        .iter()
        .enumerate()
        .map(|(i, v)| {
            if !v.requires_grad() {
                return Err(AutogradError::Backward {
                    op: OP,
                    msg: format!(
                        "input {i} does not require grad, so it has no gradient; make it require \
                         grad (requires_grad_(true)) before the ops that use it"
                    ),
                });
            }
            if let Some(e) = v.untracked_view_error() {
                return Err(e);
            }
            Ok(match v.grad_fn() {
                Some(n) if n.is_stale_view() => {
                    return Err(AutogradError::ViewOfModifiedBase { op: n.name() })
                }
                Some(n) => Key::node(&n),
                None => Key::leaf(v.inner()),
            })
        })
        .collect::<Result<Vec<Key>>>()?;
    let grads = {
        let _no_grad = NoGradGuard::new();
        engine::run(
            roots,
            args.retain_graph,
            Sink {
                accumulate: false,
                capture: &keys,
                require_all: !(args.allow_unused || args.materialize_grads),
            },
        )?
    };
    grads
        .into_iter()
        .zip(inputs)
        .enumerate()
        .map(|(i, (g, v))| match g {
            Some(g) => Ok(Some(g)),
            None if args.materialize_grads => {
                Ok(Some(Tensor::zeros(v.shape(), v.dtype(), v.device())?))
            }
            None if args.allow_unused => Ok(None),
            None => Err(unused_input(i)),
        })
        .collect()
}

/// The error of [`grad_with`] for input `i`, which no gradient reached.
pub(crate) fn unused_input(i: usize) -> AutogradError {
    AutogradError::Backward {
        op: "grad",
        msg: format!(
            "input {i} was not used in the graph of the outputs (no gradient reached it); set \
             allow_unused (or materialize_grads) in GradArgs if that is intended"
        ),
    }
}

/// The recomputation pass of a checkpoint (see `checkpoint.rs`): from
/// `out` with gradient `g`, adding into `.grad` when `accumulate` (the
/// pass that reached the checkpoint does) except for the `capture`d
/// leaves, whose gradients it returns. `out` requires grad.
pub(crate) fn recompute_pass(
    out: &Var,
    g: &Tensor,
    accumulate: bool,
    capture: &[Key],
) -> Result<Vec<Option<Tensor>>> {
    let root = root(out, Some(g))?;
    engine::run(
        vec![root],
        false,
        Sink {
            accumulate,
            capture,
            require_all: false,
        },
    )
}
