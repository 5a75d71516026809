//! Session 78: the margin and embedding losses of `torch.nn.functional`:
//! `margin_ranking_loss`, `hinge_embedding_loss`, `soft_margin_loss`,
//! `cosine_embedding_loss`, `triplet_margin_loss` and
//! `multilabel_soft_margin_loss`. PyTorch 2.15 composes each of them from
//! element-wise ops and reductions (`aten/src/ATen/native/Loss.cpp`, and
//! `torch/nn/functional.py` for the multilabel form); each is written here
//! once, over [`Composite`], in PyTorch's steps, so the `Tensor` form has
//! its result dtypes and roundings and strata-autograd's `Var` form
//! records the steps PyTorch's autograd records. The checks come first,
//! with PyTorch's conditions.

use crate::error::TensorError;
use crate::ops::composite::Composite;
use crate::ops::loss_reduction::{reduce, rsub_scalar};
use crate::ops::nn::Reduction;
use crate::shape::broadcast_shapes;
use crate::tensor::Tensor;

type R<T> = std::result::Result<T, <T as Composite>::Error>;

/// Loss.cpp's `EPSILON` (cosine_embedding_loss's guard on the norms).
const EPSILON: f64 = 1e-12;

/// `F.margin_ranking_loss`: `max(0, -target (x1 - x2) + margin)`, reduced.
/// The three operands must have the same number of dims (they broadcast).
pub fn margin_ranking_loss<T: Composite>(
    x1: &T,
    x2: &T,
    target: &T,
    margin: f64,
    reduction: Reduction,
) -> R<T> {
    let (a, b, t) = (x1.data(), x2.data(), target.data());
    if a.ndim() != b.ndim() || a.ndim() != t.ndim() {
        return Err(TensorError::shape(
            "margin_ranking_loss",
            format!(
                "all input tensors should have the same number of dims but got sizes: input1: {:?}, input2: {:?}, target: {:?}",
                a.shape(),
                b.shape(),
                t.shape()
            ),
        )
        .into());
    }
    let out = target
        .neg()?
        .mul(&x1.sub(x2)?)?
        .add_scalar(margin)?
        .clamp_min_zero()?;
    reduce(out, reduction)
}

/// `F.hinge_embedding_loss`: `x` where the target is 1, `max(0, margin - x)`
/// where it is -1 (both where it is neither), reduced. The target takes no
/// gradient.
pub fn hinge_embedding_loss<T: Composite>(
    x: &T,
    target: &Tensor,
    margin: f64,
    reduction: Reduction,
) -> R<T> {
    let zeros = T::constant(x.data().zeros_like(None)?);
    let margin_clamp = rsub_scalar(x, margin)?.clamp_min_zero()?;
    let output_margin = T::where_cond(&target.ne(1)?, &margin_clamp, &zeros)?;
    let output_self = T::where_cond(&target.ne(-1)?, x, &zeros)?;
    reduce(output_margin.add(&output_self)?, reduction)
}

/// `F.soft_margin_loss`: `ln(1 + e^(-target x))`, reduced, in the input's
/// dtype (PyTorch computes it in place on `-x`): the input must be a float
/// tensor and the target broadcast to its shape. The target takes no
/// gradient.
pub fn soft_margin_loss<T: Composite>(x: &T, target: &Tensor, reduction: Reduction) -> R<T> {
    const OP: &str = "soft_margin_loss";
    let d = x.data().dtype();
    if !d.is_float() {
        return Err(TensorError::dtype(
            OP,
            format!("the input must be a float tensor, got {d} (convert it with to_dtype first)"),
        )
        .into());
    }
    let shape = broadcast_shapes(OP, x.data().shape(), target.shape())?;
    if shape != x.data().shape() {
        return Err(TensorError::shape(
            OP,
            format!(
                "the target's shape {:?} must broadcast to the input's {:?} (the loss is computed in place on the input's shape)",
                target.shape(),
                x.data().shape()
            ),
        )
        .into());
    }
    // `-x` then `mul_(target)`: written in the input's dtype.
    let prod = x.neg()?.mul(&T::constant(target.clone()))?.to_dtype(d)?;
    reduce(prod.exp()?.log1p()?, reduction)
}

/// `F.cosine_embedding_loss`: with `cos` the cosine similarity of `x1` and
/// `x2` along their last dim (PyTorch's own form:
/// `sum(x1 x2) / sqrt((sum(x1²) + 1e-12)(sum(x2²) + 1e-12))`), `1 - cos`
/// where the target is 1, `max(0, cos - margin)` where it is -1, 0 where it
/// is neither; reduced. A 1-D target (one per row) takes 2-D inputs, a 0-d
/// one 1-D inputs. The target takes no gradient.
pub fn cosine_embedding_loss<T: Composite>(
    x1: &T,
    x2: &T,
    target: &Tensor,
    margin: f64,
    reduction: Reduction,
) -> R<T> {
    const OP: &str = "cosine_embedding_loss";
    let (a, b) = (x1.data(), x2.data());
    let dim = target.ndim();
    if dim > 1 {
        return Err(TensorError::shape(
            OP,
            "0D or 1D target tensor expected, multi-target not supported",
        )
        .into());
    }
    let want = dim + 1;
    if a.ndim() != want || b.ndim() != want {
        return Err(TensorError::shape(
            OP,
            format!(
                "{dim}D target tensor expects {want}D input tensors, but found inputs with sizes {:?} and {:?}",
                a.shape(),
                b.shape()
            ),
        )
        .into());
    }
    let d = [dim as i64];
    let prod_sum = x1.mul(x2)?.sum(Some(&d), false)?;
    let mag1 = x1.mul(x1)?.sum(Some(&d), false)?.add_scalar(EPSILON)?;
    let mag2 = x2.mul(x2)?.sum(Some(&d), false)?.add_scalar(EPSILON)?;
    let denom = mag1.mul(&mag2)?.sqrt()?;
    let cos = prod_sum.div(&denom)?;
    let zeros = T::constant(cos.data().zeros_like(None)?);
    let pos = rsub_scalar(&cos, 1.0)?;
    let neg = cos.add_scalar(-margin)?.clamp_min_zero()?;
    let output_pos = T::where_cond(&target.eq(1)?, &pos, &zeros)?;
    let output_neg = T::where_cond(&target.eq(-1)?, &neg, &zeros)?;
    reduce(output_pos.add(&output_neg)?, reduction)
}

/// `F.triplet_margin_loss`: `max(0, margin + d(a, p) - d(a, n))` with `d`
/// the p-norm pairwise distance (`eps` added to the differences), and with
/// `swap` `d(a, n)` replaced by `min(d(a, n), d(p, n))`; reduced. The three
/// operands must have the same number of dims; `margin` must be positive.
#[allow(clippy::too_many_arguments)]
pub fn triplet_margin_loss<T: Composite>(
    anchor: &T,
    positive: &T,
    negative: &T,
    margin: f64,
    p: f64,
    eps: f64,
    swap: bool,
    reduction: Reduction,
) -> R<T> {
    const OP: &str = "triplet_margin_loss";
    if margin <= 0.0 {
        return Err(
            TensorError::value(OP, format!("margin must be greater than 0, got {margin}")).into(),
        );
    }
    let (a, p_, n) = (
        anchor.data().ndim(),
        positive.data().ndim(),
        negative.data().ndim(),
    );
    if a != p_ || p_ != n {
        return Err(TensorError::shape(
            OP,
            format!(
                "the anchor, positive, and negative tensors are expected to have the same number of dimensions, but got: anchor {a}D, positive {p_}D, and negative {n}D inputs"
            ),
        )
        .into());
    }
    let dist_pos = anchor.pairwise_distance(positive, p, eps)?;
    let mut dist_neg = anchor.pairwise_distance(negative, p, eps)?;
    if swap {
        let dist_swap = positive.pairwise_distance(negative, p, eps)?;
        dist_neg = dist_neg.minimum(&dist_swap)?;
    }
    let out = dist_pos
        .add_scalar(margin)?
        .sub(&dist_neg)?
        .clamp_min_zero()?;
    reduce(out, reduction)
}

/// `F.multilabel_soft_margin_loss`: `-(y log_sigmoid(x) + (1 - y)
/// log_sigmoid(-x))`, times the weight, averaged over the last (class) dim
/// of the input, then reduced.
pub fn multilabel_soft_margin_loss<T: Composite>(
    x: &T,
    target: &T,
    weight: Option<&Tensor>,
    reduction: Reduction,
) -> R<T> {
    const OP: &str = "multilabel_soft_margin_loss";
    let pos = target.mul(&x.logsigmoid()?)?;
    let neg = rsub_scalar(target, 1.0)?.mul(&x.neg()?.logsigmoid()?)?;
    let mut loss = pos.add(&neg)?.neg()?;
    if let Some(w) = weight {
        loss = loss.mul(&T::constant(w.clone()))?;
    }
    let ndim = x.data().ndim();
    if ndim == 0 {
        return Err(TensorError::dim(
            OP,
            "the input needs a class dim (its last): got a 0-d tensor",
        )
        .into());
    }
    let classes = x.data().shape()[ndim - 1];
    let loss = loss
        .sum(Some(&[ndim as i64 - 1]), false)?
        .div_scalar(classes as f64)?;
    reduce(loss, reduction)
}

macro_rules! tensor_forms {
    ($($(#[$doc:meta])* fn $name:ident($($arg:ident: $ty:ty),*) => $f:path;)*) => {
        impl Tensor {
            $(
                $(#[$doc])*
                #[allow(clippy::too_many_arguments)]
                pub fn $name(&self, $($arg: $ty),*) -> crate::error::Result<Tensor> {
                    $f(self, $($arg),*)
                }
            )*
        }
    };
}

tensor_forms! {
    /// `F.margin_ranking_loss(self, x2, target, margin, reduction)`:
    /// `max(0, -target (self - x2) + margin)` ([`margin_ranking_loss`]).
    ///
    /// ```
    /// use strata_tensor::{tensor, Reduction};
    /// let x1 = tensor![0.5f32, 2.0].unwrap();
    /// let x2 = tensor![1.0f32, 1.0].unwrap();
    /// let y = tensor![1.0f32, -1.0].unwrap();
    /// let l = x1.margin_ranking_loss(&x2, &y, 0.0, Reduction::None).unwrap();
    /// assert_eq!(l.to_vec::<f32>().unwrap(), vec![0.5, 1.0]);
    /// ```
    fn margin_ranking_loss(x2: &Tensor, target: &Tensor, margin: f64, reduction: Reduction) => margin_ranking_loss;
    /// `F.hinge_embedding_loss(self, target, margin, reduction)`
    /// ([`hinge_embedding_loss`]).
    ///
    /// ```
    /// use strata_tensor::{tensor, Reduction};
    /// let x = tensor![0.25f32, 0.25].unwrap();
    /// let y = tensor![1.0f32, -1.0].unwrap();
    /// let l = x.hinge_embedding_loss(&y, 1.0, Reduction::None).unwrap();
    /// assert_eq!(l.to_vec::<f32>().unwrap(), vec![0.25, 0.75]);
    /// ```
    fn hinge_embedding_loss(target: &Tensor, margin: f64, reduction: Reduction) => hinge_embedding_loss;
    /// `F.soft_margin_loss(self, target, reduction)`: `ln(1 + e^(-y x))`
    /// ([`soft_margin_loss`]).
    ///
    /// ```
    /// use strata_tensor::{tensor, Reduction};
    /// let x = tensor![0.0f64].unwrap().to_dtype(strata_tensor::DType::F64).unwrap();
    /// let l = x.soft_margin_loss(&tensor![1.0f64].unwrap().to_dtype(strata_tensor::DType::F64).unwrap(), Reduction::Sum).unwrap();
    /// assert!((l.item::<f64>().unwrap() - 2f64.ln()).abs() < 1e-15);
    /// ```
    fn soft_margin_loss(target: &Tensor, reduction: Reduction) => soft_margin_loss;
    /// `F.cosine_embedding_loss(self, x2, target, margin, reduction)`
    /// ([`cosine_embedding_loss`]).
    ///
    /// ```
    /// use strata_tensor::{tensor, Reduction};
    /// let a = tensor![[1.0f32, 0.0], [1.0, 0.0]].unwrap();
    /// let b = tensor![[1.0f32, 0.0], [0.0, 1.0]].unwrap();
    /// let y = tensor![1.0f32, -1.0].unwrap();
    /// let l = a.cosine_embedding_loss(&b, &y, 0.0, Reduction::None).unwrap();
    /// assert_eq!(l.to_vec::<f32>().unwrap(), vec![0.0, 0.0]);
    /// ```
    fn cosine_embedding_loss(x2: &Tensor, target: &Tensor, margin: f64, reduction: Reduction) => cosine_embedding_loss;
    /// `F.triplet_margin_loss(self, positive, negative, margin, p, eps,
    /// swap, reduction)` ([`triplet_margin_loss`]; PyTorch's defaults: 1, 2,
    /// 1e-6, false, mean).
    ///
    /// ```
    /// use strata_tensor::{tensor, Reduction};
    /// let a = tensor![[0.0f64, 0.0]].unwrap().to_dtype(strata_tensor::DType::F64).unwrap();
    /// let p = tensor![[3.0f64, 4.0]].unwrap().to_dtype(strata_tensor::DType::F64).unwrap();
    /// let n = tensor![[0.0f64, 1.0]].unwrap().to_dtype(strata_tensor::DType::F64).unwrap();
    /// let l = a.triplet_margin_loss(&p, &n, 1.0, 2.0, 0.0, false, Reduction::Sum).unwrap();
    /// assert_eq!(l.item::<f64>().unwrap(), 5.0);
    /// ```
    fn triplet_margin_loss(positive: &Tensor, negative: &Tensor, margin: f64, p: f64, eps: f64, swap: bool, reduction: Reduction) => triplet_margin_loss;
    /// `F.multilabel_soft_margin_loss(self, target, weight, reduction)`
    /// ([`multilabel_soft_margin_loss`]).
    ///
    /// ```
    /// use strata_tensor::{tensor, Reduction};
    /// let x = tensor![[0.0f64, 0.0]].unwrap().to_dtype(strata_tensor::DType::F64).unwrap();
    /// let y = tensor![[1.0f64, 0.0]].unwrap().to_dtype(strata_tensor::DType::F64).unwrap();
    /// let l = x.multilabel_soft_margin_loss(&y, None, Reduction::Mean).unwrap();
    /// assert!((l.item::<f64>().unwrap() - 2f64.ln()).abs() < 1e-15);
    /// ```
    fn multilabel_soft_margin_loss(target: &Tensor, weight: Option<&Tensor>, reduction: Reduction) => multilabel_soft_margin_loss;
}
