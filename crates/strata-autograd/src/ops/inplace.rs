//! In-place ops on variables (`add_`, `sub_`, `mul_`, `div_`, `zero_`), with
//! PyTorch's rules: refused on a leaf that requires grad while grad mode is
//! on (and on a view of one); on a non-leaf the history is rebased onto a
//! new node; on a view, the base's history is rebased onto a `CopySlices`
//! node and the view's becomes a view of it (see `copy_slices`); the version
//! counter is bumped, so a graph that saved the old value fails at backward.

use super::copy_slices::{check_rebase, rebase, Rebase};
use super::{formula, sum_to};
use crate::error::{AutogradError, Result};
use crate::grad_mode::is_grad_enabled;
use crate::node::Node;
use crate::var::{would_record, Var, VarOperand};
use std::sync::Arc;
use strata_tensor::Tensor;

/// What an in-place op records.
enum Recording {
    /// Nothing (grad mode off, or no operand requires grad).
    No,
    /// A node replacing the variable's history.
    Node,
    /// A `CopySlices` node replacing the history of the view's base.
    View(Rebase),
}

impl Recording {
    fn is_recording(&self) -> bool {
        !matches!(self, Recording::No)
    }
}

#[derive(Clone, Copy)]
enum Kind {
    Add,
    Sub,
    Mul,
    Div,
}

impl Var {
    fn check_inplace(&self, op: &'static str, other: Option<&Var>) -> Result<Recording> {
        if crate::inference_mode::is_inference_mode_enabled() {
            return Ok(Recording::No);
        }
        if self.refuses_inplace_as_inference() {
            return Err(AutogradError::InferenceTensorInPlace { op });
        }
        // Inside a checkpointed forward grad mode is off, but PyTorch runs
        // that forward with it on: a captured leaf that requires grad is
        // refused there too (its recomputation would start from the
        // changed value).
        // A view of a variable made to require grad after the view was
        // taken counts as one (PyTorch: "a view of a leaf Variable that
        // requires grad is being used in an in-place operation"); a view
        // whose base gained a history has its history regenerated (it is
        // no leaf then).
        let leaf_requiring_grad = self.is_leaf()
            && self.requires_grad()
            && !matches!(
                self.untracked_view_state(),
                Some((crate::var::UntrackedView::BaseModified, _))
            );
        if (leaf_requiring_grad && (is_grad_enabled() || crate::checkpoint::in_forward()))
            || self.stands_for_leaf()
        {
            return Err(AutogradError::InPlaceOnLeaf { op });
        }
        if is_grad_enabled() && self.is_no_grad_view() {
            return Err(AutogradError::InPlaceOnNoGradView { op });
        }
        crate::var::check_not_stale_view(&[Some(self), other])?;
        if !would_record(&[Some(self), other]) {
            return Ok(Recording::No);
        }
        if !self.is_view() {
            return Ok(Recording::Node);
        }
        match self.view_of() {
            Some(of) => Ok(Recording::View(check_rebase(op, self, &of)?)),
            None => Err(AutogradError::InPlaceOnView {
                op,
                reason: "the view was made to require grad itself, then not (it no longer \
                         follows its base); clone it, or take the view again",
            }),
        }
    }

    /// Records the in-place op's node `name` (backward formula `f` with
    /// `saved`, the other operand reached by `other`): as the variable's
    /// new history, or for a view as its base's (`CopySlices`).
    fn record_inplace(
        &self,
        recording: Recording,
        name: &'static str,
        other: Option<Option<crate::node::Edge>>,
        saved: Vec<Tensor>,
        f: crate::node::BackwardFn,
        saves_scalar: bool,
    ) {
        match recording {
            Recording::No => {}
            Recording::Node => {
                let mut edges = vec![self.edge()];
                edges.extend(other);
                let node = Node::new(name, edges, saved, f);
                if saves_scalar {
                    // PyTorch saves the scalar (a wrapped tensor): a second
                    // backward through the node is refused.
                    node.mark_saves();
                }
                self.set_grad_fn(Arc::new(node));
            }
            Recording::View(r) => {
                rebase(self, r, other.into_iter().collect(), saved, f);
            }
        }
    }

    fn binary_(&self, kind: Kind, other: VarOperand) -> Result<&Var> {
        let name = ["add_", "sub_", "mul_", "div_"][kind as usize];
        let names = [
            "AddBackward_",
            "SubBackward_",
            "MulBackward_",
            "DivBackward_",
        ];
        let ov = other.var();
        let recording = self.check_inplace(name, ov)?;
        let recorded = recording.is_recording();
        let (a_req, b_req) = (self.requires_grad(), ov.is_some_and(Var::requires_grad));
        // What the backward needs, taken before the op (the old value of self
        // is copied where a gradient needs it, as PyTorch does).
        let mut saved: Vec<Tensor> = Vec::new();
        if recorded {
            if let Some(b) = ov {
                // `other` sharing self's storage (`y.mul_(&y)`) is overwritten too.
                let b_value = if b.data().same_storage(self.data()) {
                    b.data().clone_contiguous()?
                } else {
                    b.data().clone()
                };
                match kind {
                    Kind::Mul => {
                        if a_req {
                            saved.push(b_value);
                        }
                        if b_req {
                            saved.push(self.data().clone_contiguous()?);
                        }
                    }
                    Kind::Div => {
                        saved.push(b_value);
                        if b_req {
                            saved.push(self.data().clone_contiguous()?);
                        }
                    }
                    Kind::Add | Kind::Sub => {}
                }
                // Refused before self changes.
                crate::var::check_not_inference(names[kind as usize], [b], &saved)?;
            }
        }
        // Inside a checkpointed forward, an operand that requires grad (a
        // parameter `f` captures) becomes an edge of the checkpoint's node,
        // as every recorded op's operands do: used only by an in-place op
        // it was missed, so `grad` with respect to it found it unused and
        // its post-accumulate-grad hooks never ran.
        crate::checkpoint::note_parameters(&[ov]);
        let a = self.data();
        let b = other.operand();
        match kind {
            Kind::Add => a.add_(b)?,
            Kind::Sub => a.sub_(b)?,
            Kind::Mul => a.mul_(b)?,
            Kind::Div => a.div_(b)?,
        };
        crate::checkpoint::note_in_place(self, ov);
        if !recorded {
            return Ok(self);
        }
        let (a_shape, a_dtype) = (self.shape().to_vec(), self.dtype());
        let (b_shape, b_dtype) = ov.map_or((vec![], a_dtype), |b| (b.shape().to_vec(), b.dtype()));
        let scalar = match other {
            VarOperand::Scalar(s) => Some(s),
            VarOperand::Var(_) => None,
        };
        let f = formula(move |g, s, needs| {
            let ga = if needs[0] {
                let ga = match (kind, scalar) {
                    (Kind::Add | Kind::Sub, _) => g.clone(),
                    (Kind::Mul, Some(c)) => g.mul(c)?,
                    (Kind::Div, Some(c)) => g.div(c)?,
                    (Kind::Mul, None) => g.mul(&s[0])?,
                    (Kind::Div, None) => g.div(&s[0])?,
                };
                Some(sum_to(&ga, &a_shape, a_dtype)?)
            } else {
                None
            };
            let gb = if needs[1] {
                let gb = match kind {
                    Kind::Add => g.clone(),
                    Kind::Sub => g.neg()?,
                    // The other operand was saved first when self requires
                    // grad, whether or not this pass needs self's gradient.
                    Kind::Mul => g.mul(&s[a_req as usize])?,
                    Kind::Div => super::binary::div_other_grad(g, &s[1], &s[0])?,
                };
                Some(sum_to(&gb, &b_shape, b_dtype)?)
            } else {
                None
            };
            Ok(vec![ga, gb])
        });
        let saves_scalar = scalar.is_some() && matches!(kind, Kind::Mul | Kind::Div);
        let other = Some(ov.and_then(Var::edge));
        self.record_inplace(
            recording,
            names[kind as usize],
            other,
            saved,
            f,
            saves_scalar,
        );
        Ok(self)
    }

    /// In place `self += other` (other broadcasts to self's shape).
    pub fn add_<'a>(&self, other: impl Into<VarOperand<'a>>) -> Result<&Var> {
        self.binary_(Kind::Add, other.into())
    }

    /// In place `self -= other`.
    pub fn sub_<'a>(&self, other: impl Into<VarOperand<'a>>) -> Result<&Var> {
        self.binary_(Kind::Sub, other.into())
    }

    /// In place `self *= other`.
    pub fn mul_<'a>(&self, other: impl Into<VarOperand<'a>>) -> Result<&Var> {
        self.binary_(Kind::Mul, other.into())
    }

    /// In place `self /= other`.
    pub fn div_<'a>(&self, other: impl Into<VarOperand<'a>>) -> Result<&Var> {
        self.binary_(Kind::Div, other.into())
    }

    /// Sets every element to zero in place. As PyTorch's `ZeroBackward0`,
    /// the old value's gradient is zeros (not none): the history below still
    /// runs (and is checked for modified saved tensors), and leaves get a
    /// zero `.grad`.
    pub fn zero_(&self) -> Result<&Var> {
        let recording = self.check_inplace("zero_", None)?;
        self.data().zero_()?;
        let f = formula(|g, _s, _n| Ok(vec![Some(g.zeros_like(None)?)]));
        self.record_inplace(
            recording,
            crate::node::ZERO_BACKWARD,
            None,
            Vec::new(),
            f,
            false,
        );
        Ok(self)
    }
}
