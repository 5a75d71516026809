//! Session 78: the steps the losses of `ops::margin_losses`,
//! `ops::likelihood_losses` and `ops::nn_more` share, written once over
//! [`Composite`] (for `Tensor` and autograd's `Var`).

use crate::dtype::DType;
use crate::ops::composite::Composite;
use crate::ops::nn::Reduction;
use crate::scalar::Scalar;
use crate::tensor::Tensor;

/// PyTorch's `apply_loss_reduction`: the losses, their mean or their sum.
pub(crate) fn reduce<T: Composite>(loss: T, r: Reduction) -> std::result::Result<T, T::Error> {
    match r {
        Reduction::None => Ok(loss),
        Reduction::Mean => loss.mean(None, false),
        Reduction::Sum => loss.sum(None, false),
    }
}

/// `c - x` as C++'s `Scalar - Tensor` computes it: `x`'s dtype filled with
/// `c` (truncated into an integer dtype), minus `x`.
pub(crate) fn rsub_scalar<T: Composite>(x: &T, c: f64) -> std::result::Result<T, T::Error> {
    let d = x.data().dtype();
    let filled = match d {
        d if d.is_float() => Tensor::full(&[], c, d, x.data().device())?,
        DType::Bool => Tensor::full(&[], c != 0.0, d, x.data().device())?,
        d => {
            crate::ops::checks::check_fits("rsub", Scalar::Float(c), d)?;
            Tensor::full(&[], Scalar::Int(c as i64), d, x.data().device())?
        }
    };
    T::constant(filled).sub(x)
}
