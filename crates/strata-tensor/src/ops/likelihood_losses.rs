//! Session 78: the negative log-likelihood losses of distributions,
//! `F.poisson_nll_loss` and `F.gaussian_nll_loss`, composed as PyTorch 2.15
//! composes them (`Loss.cpp`'s `poisson_nll_loss`, `functional.py`'s
//! `gaussian_nll_loss` with its variance checks), once over
//! [`Composite`] for `Tensor` and strata-autograd's `Var`.

use crate::error::TensorError;
use crate::ops::composite::Composite;
use crate::ops::loss_reduction::reduce;
use crate::ops::nn::Reduction;
use crate::tensor::Tensor;

type R<T> = std::result::Result<T, <T as Composite>::Error>;

/// `F.poisson_nll_loss`: with `log_input`, `e^x - y x`, else
/// `x - y ln(x + eps)`; with `full`, plus Stirling's term
/// `y ln y - y + ln(2 pi y) / 2` where the target exceeds 1; reduced.
pub fn poisson_nll_loss<T: Composite>(
    x: &T,
    target: &T,
    log_input: bool,
    full: bool,
    eps: f64,
    reduction: Reduction,
) -> R<T> {
    let mut loss = if log_input {
        x.exp()?.sub(&target.mul(x)?)?
    } else {
        x.sub(&target.mul(&x.add_scalar(eps)?.log()?)?)?
    };
    if full {
        let t = target;
        let half_log = t
            .mul_scalar(2.0 * std::f64::consts::PI)?
            .log()?
            .mul_scalar(0.5)?;
        let stirling = t.mul(&t.log()?)?.sub(t)?.add(&half_log)?;
        let zeros = T::constant(stirling.data().zeros_like(None)?);
        let masked = T::where_cond(&t.data().le(1)?, &zeros, &stirling)?;
        // `loss += ...`: in the loss's dtype.
        let d = loss.data().dtype();
        loss = loss.add(&masked)?.to_dtype(d)?;
    }
    reduce(loss, reduction)
}

/// The variance of [`gaussian_nll_loss`]: a tensor (heteroscedastic, or
/// one dim short of the input, or of size 1 in one mismatched dim) or one
/// number for every element.
#[derive(Clone, Copy, Debug)]
pub enum GaussianVar<'a, T> {
    /// A variance per element (broadcast as PyTorch allows).
    Tensor(&'a T),
    /// One variance.
    Scalar(f64),
}

/// `F.gaussian_nll_loss`: `(ln v + (x - y)² / v) / 2` with `v` the variance
/// clamped below at `eps` (the clamp passes the gradient unchanged, as
/// PyTorch's `no_grad` clamp of a clone), plus `ln(2 pi) / 2` with `full`;
/// reduced. A negative variance is an error (a NaN one is not), and so is
/// a variance tensor whose size is neither the input's, nor the input's
/// without its last dim, nor of the input's rank with mismatched sizes
/// summing to 1.
pub fn gaussian_nll_loss<T: Composite>(
    x: &T,
    target: &T,
    var: GaussianVar<'_, T>,
    full: bool,
    eps: f64,
    reduction: Reduction,
) -> R<T> {
    const OP: &str = "gaussian_nll_loss";
    let negative = || TensorError::value(OP, "var has negative entry/entries");
    let mut var = match var {
        GaussianVar::Scalar(v) => {
            if v < 0.0 {
                return Err(negative().into());
            }
            let ones = x.data().ones_like(None)?;
            T::constant(ones.mul(v)?)
        }
        GaussianVar::Tensor(v) => {
            if v.data().lt(0)?.any()?.item::<bool>()? {
                return Err(negative().into());
            }
            v.clone()
        }
    };
    let (xs, vs) = (x.data().shape().to_vec(), var.data().shape().to_vec());
    if vs != xs {
        if !xs.is_empty() && xs[..xs.len() - 1] == vs[..] || xs.is_empty() && vs.is_empty() {
            var = var.unsqueeze(-1)?;
        } else if xs.len() == vs.len()
            && xs
                .iter()
                .zip(&vs)
                .filter(|(a, b)| a != b)
                .map(|(_, &b)| b as u128)
                .sum::<u128>()
                == 1
        {
        } else {
            return Err(TensorError::shape(
                OP,
                format!("var is of incorrect size: {vs:?} for an input of {xs:?}"),
            )
            .into());
        }
    }
    if !var.data().dtype().is_float() {
        return Err(TensorError::dtype(
            OP,
            format!(
                "var must be a float tensor (it is clamped in place at eps), got {}",
                var.data().dtype()
            ),
        )
        .into());
    }
    let var = var.clamp_min_no_grad(eps)?;
    let sq = x.sub(target)?.square()?;
    let mut loss = var.log()?.add(&sq.div(&var)?)?.mul_scalar(0.5)?;
    if full {
        loss = loss.add_scalar(0.5 * (2.0 * std::f64::consts::PI).ln())?;
    }
    reduce(loss, reduction)
}

impl Tensor {
    /// `F.poisson_nll_loss(self, target, log_input, full, eps, reduction)`
    /// ([`poisson_nll_loss`]; PyTorch's defaults: true, false, 1e-8, mean).
    ///
    /// ```
    /// use strata_tensor::{tensor, Reduction};
    /// let x = tensor![0.0f64, 1.0].unwrap().to_dtype(strata_tensor::DType::F64).unwrap();
    /// let y = tensor![1.0f64, 2.0].unwrap().to_dtype(strata_tensor::DType::F64).unwrap();
    /// let l = x.poisson_nll_loss(&y, true, false, 1e-8, Reduction::None).unwrap();
    /// assert_eq!(l.to_vec::<f64>().unwrap(), vec![1.0, 1f64.exp() - 2.0]);
    /// ```
    pub fn poisson_nll_loss(
        &self,
        target: &Tensor,
        log_input: bool,
        full: bool,
        eps: f64,
        reduction: Reduction,
    ) -> crate::error::Result<Tensor> {
        poisson_nll_loss(self, target, log_input, full, eps, reduction)
    }

    /// `F.gaussian_nll_loss(self, target, var, full, eps, reduction)`
    /// ([`gaussian_nll_loss`]; PyTorch's defaults: false, 1e-6, mean).
    ///
    /// ```
    /// use strata_tensor::{tensor, GaussianVar, Reduction};
    /// let x = tensor![1.0f64, 3.0].unwrap().to_dtype(strata_tensor::DType::F64).unwrap();
    /// let y = tensor![1.0f64, 1.0].unwrap().to_dtype(strata_tensor::DType::F64).unwrap();
    /// let v = tensor![1.0f64, 2.0].unwrap().to_dtype(strata_tensor::DType::F64).unwrap();
    /// let l = x.gaussian_nll_loss(&y, GaussianVar::Tensor(&v), false, 1e-6, Reduction::None).unwrap();
    /// assert_eq!(l.to_vec::<f64>().unwrap(), vec![0.0, 0.5 * (2f64.ln() + 2.0)]);
    /// ```
    pub fn gaussian_nll_loss(
        &self,
        target: &Tensor,
        var: GaussianVar<'_, Tensor>,
        full: bool,
        eps: f64,
        reduction: Reduction,
    ) -> crate::error::Result<Tensor> {
        gaussian_nll_loss(self, target, var, full, eps, reduction)
    }
}
