//! Recorded in-place ops on views (PyTorch's `CopySlices`), and the history
//! of a view regenerated from its base's.
//!
//! A view made by a recorded view op (`narrow`, `select`, `slice`, `i`,
//! `transpose`, `permute`,
//! `t`, `view`/`reshape`/`flatten` when they view, `squeeze`, `unsqueeze`,
//! `expand`, and views of views) remembers the variable at the root of its
//! chain of views (its *base*) and the view ops from there
//! ([`ViewOf`]). A recorded in-place op on the view then replaces the
//! base's history by a `CopySlices` node: its gradient for the base's old
//! history is the incoming gradient with the view's region replaced by the
//! in-place op's gradient for the view's old value there, and the other
//! operand's gradient is the op's, from that region. The region is
//! addressed by the view's sizes, strides and storage offset relative to
//! the base's ([`Tensor::as_strided`] on a buffer laid out as the base).
//!
//! The view's own history (and that of any other view of the base whose
//! history is out of date since) becomes a view of the base's new one: an
//! `AsStridedBackward` node that maps the view's gradient back to the
//! base's shape through the recorded view ops' backward formulas.

use super::sum_to;
use crate::error::{AutogradError, Result};
use crate::node::{BackwardFn, Edge, Node};
use crate::var::{Var, VarInner};
use std::sync::Arc;
use strata_tensor::{DType, SliceItem, Tensor};

/// The name of the node an in-place op on a view gives its base.
pub(crate) const COPY_SLICES: &str = "CopySlices";

/// The name of a view's history regenerated from its base's.
pub(crate) const AS_STRIDED_BACKWARD: &str = "AsStridedBackward";

/// One recorded view op, enough to map a gradient of its output back to
/// its input.
#[derive(Clone, Debug)]
pub(crate) enum ViewStep {
    /// `transpose(d0, d1)`: transposed back.
    Transpose(i64, i64),
    /// `t()` of a 0-d or 1-D variable: unchanged.
    Identity,
    /// `view`, `reshape`, `flatten`, `squeeze`, `unsqueeze`: reshaped back
    /// to the input's shape.
    Reshape(Vec<i64>),
    /// `narrow(dim, start, length)` of an input of `shape`: scattered into
    /// zeros.
    Narrow {
        dim: i64,
        start: i64,
        length: i64,
        shape: Vec<usize>,
        dtype: DType,
    },
    /// `expand` of an input of `shape`: summed over the expanded dims.
    Expand { shape: Vec<usize>, dtype: DType },
    /// `permute`: permuted by the inverse permutation.
    Permute(Vec<i64>),
    /// `select`, `slice` or `i` (a [`Window`]) of an input of `shape`:
    /// written into the same window of zeros.
    Window {
        window: Window,
        shape: Vec<usize>,
        dtype: DType,
    },
    /// `diagonal(offset, dim1, dim2)` of an input of `shape`: written on
    /// that diagonal of zeros.
    Diagonal {
        offset: i64,
        dim1: i64,
        dim2: i64,
        shape: Vec<usize>,
        dtype: DType,
    },
    /// `unfold(dim, size, step)` of an input of `shape`: each window added
    /// back where it was taken (windows may overlap).
    Unfold {
        dim: i64,
        size: i64,
        step: i64,
        shape: Vec<usize>,
        dtype: DType,
    },
}

/// A window of a tensor that [`Tensor::select`], [`Tensor::slice`] or
/// [`Tensor::i`] views.
#[derive(Clone, Debug)]
pub(crate) enum Window {
    /// `select(dim, index)`.
    Select(i64, i64),
    /// `slice(dim, start, end, step)`.
    Slice(i64, Option<i64>, Option<i64>, i64),
    /// `i(items)`.
    Items(Vec<SliceItem>),
}

impl Window {
    /// The window of `t` (a view).
    pub(crate) fn of(&self, t: &Tensor) -> Result<Tensor> {
        Ok(match self {
            Window::Select(dim, index) => t.select(*dim, *index)?,
            Window::Slice(dim, start, end, step) => t.slice(*dim, *start, *end, *step)?,
            Window::Items(items) => t.i(items)?,
        })
    }
}

impl ViewStep {
    /// The gradient of the view op's input from `g`, its output's.
    pub(crate) fn backward(&self, g: &Tensor) -> Result<Tensor> {
        Ok(match self {
            ViewStep::Transpose(d0, d1) => g.transpose(*d0, *d1)?,
            ViewStep::Identity => g.clone(),
            ViewStep::Reshape(shape) => g.reshape(shape)?,
            ViewStep::Narrow {
                dim,
                start,
                length,
                shape,
                dtype,
            } => {
                let full = Tensor::zeros(shape, *dtype, g.device())?;
                full.narrow(*dim, *start, *length)?.copy_(g)?;
                full
            }
            ViewStep::Window {
                window,
                shape,
                dtype,
            } => {
                let full = Tensor::zeros(shape, *dtype, g.device())?;
                window.of(&full)?.copy_(g)?;
                full
            }
            ViewStep::Expand { shape, dtype } => sum_to(g, shape, *dtype)?,
            ViewStep::Permute(inverse) => g.permute(inverse)?,
            ViewStep::Diagonal {
                offset,
                dim1,
                dim2,
                shape,
                dtype,
            } => super::contract::diagonal_backward(g, *offset, *dim1, *dim2, shape, *dtype)?,
            ViewStep::Unfold {
                dim,
                size,
                step,
                shape,
                dtype,
            } => super::view::unfold_backward(g, *dim, *size, *step, shape, *dtype)?,
        })
    }
}

/// The view ops from a view's base, as a list that the views of a view
/// share: a view of a view adds one link to its input's list. (Each view
/// copied its input's steps, so a chain of `n` views of views took time
/// and memory quadratic in `n`: 100,000 took minutes where PyTorch takes
/// half a second.)
#[derive(Clone, Default)]
pub(crate) struct ViewSteps(Option<Arc<StepLink>>);

/// One view op of a [`ViewSteps`] list and the ops before it.
struct StepLink {
    step: ViewStep,
    before: Option<Arc<StepLink>>,
}

impl ViewSteps {
    /// The list with `step` after these.
    fn then(&self, step: ViewStep) -> ViewSteps {
        ViewSteps(Some(Arc::new(StepLink {
            step,
            before: self.0.clone(),
        })))
    }

    /// The view ops, the last one first (the order their backward
    /// formulas map a gradient of the view back to the base).
    fn last_first(&self) -> impl Iterator<Item = &ViewStep> {
        std::iter::successors(self.0.as_deref(), |l| l.before.as_deref()).map(|l| &l.step)
    }
}

impl Drop for StepLink {
    /// Unlinks the ops before this one iteratively: a chain of a hundred
    /// thousand views dropped recursively would overflow the stack.
    fn drop(&mut self) {
        let mut before = self.before.take();
        while let Some(link) = before {
            before = match Arc::try_unwrap(link) {
                // Dropped with nothing before it left to drop.
                Ok(mut l) => l.before.take(),
                // Another list still holds the rest.
                Err(_) => None,
            };
        }
    }
}

/// What a view made by a recorded view op knows of its base: the variable
/// at the root of its chain of views, and the view ops from there. Held
/// strongly, as PyTorch's view holds its `_base`.
pub(crate) struct ViewOf {
    pub(crate) base: Arc<VarInner>,
    pub(crate) steps: ViewSteps,
    pub(crate) creation: Creation,
}

/// How a view was made, where that forbids a recorded in-place op on it
/// (PyTorch's `CreationMeta`); a view of such a view inherits it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Creation {
    /// By a view op with grad mode on.
    Default,
    /// With grad mode off (`NO_GRAD_MODE`).
    NoGrad,
    /// As one of several views a function returns, `split` or `chunk`
    /// (`MULTI_OUTPUT_NODE`).
    MultiOutput,
}

impl ViewOf {
    /// The link of a view made by `step` of `input` (with grad mode on or
    /// off, per `no_grad`).
    pub(crate) fn of(input: &Var, step: ViewStep, no_grad: bool) -> Option<ViewOf> {
        let own = if no_grad {
            Creation::NoGrad
        } else {
            Creation::Default
        };
        match input.view_of() {
            Some(parent) => Some(ViewOf {
                base: Arc::clone(&parent.base),
                steps: parent.steps.then(step),
                creation: match parent.creation {
                    Creation::Default => own,
                    inherited => inherited,
                },
            }),
            // A variable that follows no base is the root (a view made to
            // require grad itself is a leaf of its own).
            None => Some(ViewOf {
                base: Arc::clone(input.inner()),
                steps: ViewSteps::default().then(step),
                creation: own,
            }),
        }
    }

    /// The same link for one of several views a function returns (see
    /// [`Creation::MultiOutput`]); one made with grad mode off stays so.
    pub(crate) fn multi_output(&self) -> ViewOf {
        ViewOf {
            base: Arc::clone(&self.base),
            steps: self.steps.clone(),
            creation: match self.creation {
                Creation::Default => Creation::MultiOutput,
                other => other,
            },
        }
    }

    /// The base as a variable (another handle on it).
    pub(crate) fn base_var(&self) -> Var {
        Var::from_inner(Arc::clone(&self.base))
    }
}

/// Where a recorded in-place op on a view writes in its base, checked
/// before anything changes (see [`check_rebase`]).
pub(crate) struct Rebase {
    base: Var,
    steps: ViewSteps,
    geometry: RegionGeometry,
}

/// Why a recorded in-place op `op` on `view` cannot rebase its base's
/// history: `InPlaceOnLeaf` for a view of a leaf that requires grad (as
/// PyTorch), `InPlaceOnView` for a view made with grad mode off (as
/// PyTorch), or one whose base has elements sharing memory or that starts
/// before its base; else where it writes in its base.
pub(crate) fn check_rebase(op: &'static str, view: &Var, of: &ViewOf) -> Result<Rebase> {
    // PyTorch's order: how the view was made, then a leaf base.
    match of.creation {
        Creation::Default => {}
        Creation::NoGrad => {
            return Err(AutogradError::InPlaceOnView {
                op,
                reason:
                    "the view was made in no_grad mode and is being modified in place with \
                         grad mode on, which PyTorch forbids as ambiguous; make the view and the \
                         in-place op both inside no_grad (not tracked) or both outside it (tracked)",
            })
        }
        Creation::MultiOutput => {
            return Err(AutogradError::InPlaceOnView {
                op,
                reason: "the view is one of several a function returned (split, chunk), which \
                         PyTorch forbids to modify in place; use the out-of-place op, or take the \
                         view with narrow",
            })
        }
    }
    let base = of.base_var();
    if base.is_leaf() && base.requires_grad() {
        return Err(AutogradError::InPlaceOnLeaf { op });
    }
    let (b, v) = (base.data(), view.data());
    if b.layout().may_overlap() {
        return Err(AutogradError::InPlaceOnView {
            op,
            reason: "the view's base has elements sharing memory (an expanded tensor), so its \
                     gradient cannot be laid out as the base; clone the base first",
        });
    }
    let offset = match v.offset().checked_sub(b.offset()) {
        Some(o) if v.same_storage(b) => o,
        _ => {
            return Err(AutogradError::InPlaceOnView {
                op,
                reason: "the view does not lie in its base's memory; clone the view first",
            })
        }
    };
    let ints = |v: &[usize]| v.iter().map(|&x| x as i64).collect::<Vec<_>>();
    let extent = b.layout().storage_extent().saturating_sub(b.offset());
    // The view's region must be addressable in a buffer laid out as the base.
    strata_tensor::Layout::as_strided(
        &ints(v.shape()),
        &ints(v.strides()),
        offset as i64,
        extent.max(1),
    )?;
    let geometry = RegionGeometry {
        base_shape: ints(b.shape()),
        base_strides: ints(b.strides()),
        extent,
        view_shape: ints(v.shape()),
        view_strides: ints(v.strides()),
        offset: offset as i64,
    };
    Ok(Rebase {
        steps: of.steps.clone(),
        geometry,
        base,
    })
}

/// A copy of `g` (of the base's shape) laid out as the base: same strides,
/// storage offset 0 (the base has no elements sharing memory).
fn laid_out_as(r: &RegionGeometry, g: &Tensor) -> Result<Tensor> {
    let buffer = Tensor::zeros(&[r.extent.max(1)], g.dtype(), g.device())?;
    let out = buffer.as_strided(&r.base_shape, &r.base_strides, Some(0))?;
    out.copy_(g)?;
    Ok(out)
}

/// The geometry a `CopySlices` node addresses its region with: the base's
/// sizes and strides, the elements of a buffer laid out as the base, and
/// the view's sizes, strides and storage offset relative to the base's.
struct RegionGeometry {
    base_shape: Vec<i64>,
    base_strides: Vec<i64>,
    extent: usize,
    view_shape: Vec<i64>,
    view_strides: Vec<i64>,
    offset: i64,
}

/// After a recorded in-place op on the view `view` (checked by
/// [`check_rebase`]): gives the base a `CopySlices` node around the op's
/// backward formula `inner` (whose input 0 is the view's old value, the
/// others the other operands, reached by `other_edges`), saving `saved`,
/// and makes the view's history a view of it. The node refuses a second
/// backward after its graph was released whatever the op saved, as
/// PyTorch's `CopySlices` does (its `release_variables` drops the wrapped
/// op, and `apply` then fails "Trying to backward through the graph a
/// second time"; `v.add_(1.0)` saves nothing, but a second backward
/// through the base's `CopySlices` is refused).
pub(crate) fn rebase(
    view: &Var,
    r: Rebase,
    other_edges: Vec<Option<Edge>>,
    saved: Vec<Tensor>,
    inner: BackwardFn,
) {
    let Rebase {
        base,
        steps,
        geometry,
    } = r;
    let n = 1 + other_edges.len();
    let f: BackwardFn = Box::new(move |g, s, needs| {
        if !needs.iter().any(|&n| n) {
            return Ok(vec![None; n]);
        }
        let r = &geometry;
        let result = laid_out_as(r, g)?;
        let slice = result.as_strided(&r.view_shape, &r.view_strides, Some(r.offset))?;
        // The op's formula gets its own copy of the region (its gradients
        // may be handles on its input).
        let mut res = inner(&slice.clone_contiguous()?, s, needs)?.into_iter();
        let first = res.next().flatten();
        let mut out = Vec::with_capacity(n);
        if needs[0] {
            match first {
                Some(g0) => slice.copy_(&g0)?,
                None => slice.zero_()?,
            };
            out.push(Some(result));
        } else {
            out.push(None);
        }
        out.extend(res);
        out.resize(n, None);
        Ok(out)
    });
    let mut edges = vec![base.edge()];
    edges.extend(other_edges);
    let node = Node::new(COPY_SLICES, edges, saved, f);
    node.mark_saves();
    base.set_grad_fn(Arc::new(node));
    // The view's history: a view of the base's new one.
    if let Some(node) = view_node(&base, &steps) {
        view.set_grad_fn(node);
    }
}

/// The history of a view of `base` made by `steps`, as a view of the
/// base's history now (`None` where the base has none).
///
/// `steps` are the view ops from the base.
pub(crate) fn view_node(base: &Var, steps: &ViewSteps) -> Option<Arc<Node>> {
    let edge = base.edge()?;
    let steps = steps.clone();
    let f: BackwardFn = Box::new(move |g, _s, _n| {
        let mut g = g.clone();
        for step in steps.last_first() {
            g = step.backward(&g)?;
        }
        Ok(vec![Some(g)])
    });
    Some(Arc::new(
        Node::new(AS_STRIDED_BACKWARD, vec![Some(edge)], Vec::new(), f).viewing(base.inner()),
    ))
}
