//! Session 78: the operations the compositions of `ops::margin_losses` and
//! `ops::likelihood_losses` are made of, for a tensor-like type: [`Tensor`]
//! here, autograd's `Var` in strata-autograd, so that each loss is written
//! once and its recorded form differentiates the same steps PyTorch's
//! composite implementation records.

use crate::dtype::DType;
use crate::error::{Result, TensorError};
use crate::ops::nn::Reduction;
use crate::scalar::Scalar;
use crate::tensor::Tensor;

/// The ops a loss composition needs (each as the `Tensor` method of the
/// same name without `l_`). Not meant to be implemented outside strata.
#[doc(hidden)]
pub trait LossOperand: Clone + Sized {
    /// The error type of the operations (`TensorError` converts into it).
    type Error: From<TensorError>;
    /// The values (a variable's data).
    fn l_data(&self) -> &Tensor;
    /// A constant (a variable that requires no gradient).
    fn l_constant(t: Tensor) -> Self;
    /// `self + other`.
    fn l_add(&self, other: &Self) -> std::result::Result<Self, Self::Error>;
    /// `self - other`.
    fn l_sub(&self, other: &Self) -> std::result::Result<Self, Self::Error>;
    /// `self * other`.
    fn l_mul(&self, other: &Self) -> std::result::Result<Self, Self::Error>;
    /// `self / other`.
    fn l_div(&self, other: &Self) -> std::result::Result<Self, Self::Error>;
    /// `self + v` (a Python scalar).
    fn l_add_scalar(&self, v: f64) -> std::result::Result<Self, Self::Error>;
    /// `self * v` (a Python scalar).
    fn l_mul_scalar(&self, v: f64) -> std::result::Result<Self, Self::Error>;
    /// `self / v` (a Python scalar).
    fn l_div_scalar(&self, v: f64) -> std::result::Result<Self, Self::Error>;
    /// `-self`.
    fn l_neg(&self) -> std::result::Result<Self, Self::Error>;
    /// `e^self`.
    fn l_exp(&self) -> std::result::Result<Self, Self::Error>;
    /// `ln self`.
    fn l_log(&self) -> std::result::Result<Self, Self::Error>;
    /// `ln(1 + self)`.
    fn l_log1p(&self) -> std::result::Result<Self, Self::Error>;
    /// `sqrt self`.
    fn l_sqrt(&self) -> std::result::Result<Self, Self::Error>;
    /// `self^2` (`pow(2)`).
    fn l_square(&self) -> std::result::Result<Self, Self::Error>;
    /// `F.logsigmoid`.
    fn l_logsigmoid(&self) -> std::result::Result<Self, Self::Error>;
    /// `clamp_min(0)` with PyTorch's integer 0 (the dtype is kept).
    fn l_clamp_min_zero(&self) -> std::result::Result<Self, Self::Error>;
    /// `minimum(self, other)`.
    fn l_minimum(&self, other: &Self) -> std::result::Result<Self, Self::Error>;
    /// `where(cond, a, b)`.
    fn l_where(cond: &Tensor, a: &Self, b: &Self) -> std::result::Result<Self, Self::Error>;
    /// The sum over `dims` (all with `None`).
    fn l_sum(&self, dims: Option<&[i64]>, keepdim: bool) -> std::result::Result<Self, Self::Error>;
    /// The mean over `dims` (all with `None`).
    fn l_mean(&self, dims: Option<&[i64]>, keepdim: bool)
        -> std::result::Result<Self, Self::Error>;
    /// `F.pairwise_distance(self, other, p, eps)`.
    fn l_pairwise_distance(
        &self,
        other: &Self,
        p: f64,
        eps: f64,
    ) -> std::result::Result<Self, Self::Error>;
    /// `to_dtype(dtype)` (itself when it has that dtype).
    fn l_to_dtype(&self, dtype: DType) -> std::result::Result<Self, Self::Error>;
    /// `unsqueeze(dim)`.
    fn l_unsqueeze(&self, dim: i64) -> std::result::Result<Self, Self::Error>;
    /// [`Tensor::reshape`].
    fn l_reshape(&self, shape: &[i64]) -> std::result::Result<Self, Self::Error>;
    /// [`Tensor::gather`].
    fn l_gather(&self, dim: i64, index: &Tensor) -> std::result::Result<Self, Self::Error>;
    /// `clamp_min(min)` whose gradient passes unchanged (PyTorch's
    /// `with torch.no_grad(): var.clamp_(min=eps)` on a clone).
    fn l_clamp_min_no_grad(&self, min: f64) -> std::result::Result<Self, Self::Error>;
}

/// PyTorch's `apply_loss_reduction`: the losses, their mean or their sum.
pub(crate) fn reduce<T: LossOperand>(loss: T, r: Reduction) -> std::result::Result<T, T::Error> {
    match r {
        Reduction::None => Ok(loss),
        Reduction::Mean => loss.l_mean(None, false),
        Reduction::Sum => loss.l_sum(None, false),
    }
}

/// `c - x` as C++'s `Scalar - Tensor` computes it: `x`'s dtype filled with
/// `c` (truncated into an integer dtype), minus `x`.
pub(crate) fn rsub_scalar<T: LossOperand>(x: &T, c: f64) -> std::result::Result<T, T::Error> {
    let d = x.l_data().dtype();
    let filled = match d {
        d if d.is_float() => Tensor::full(&[], c, d, x.l_data().device())?,
        DType::Bool => Tensor::full(&[], c != 0.0, d, x.l_data().device())?,
        d => {
            crate::ops::checks::check_fits("rsub", Scalar::Float(c), d)?;
            Tensor::full(&[], Scalar::Int(c as i64), d, x.l_data().device())?
        }
    };
    T::l_constant(filled).l_sub(x)
}

impl LossOperand for Tensor {
    type Error = TensorError;
    fn l_data(&self) -> &Tensor {
        self
    }
    fn l_constant(t: Tensor) -> Self {
        t
    }
    fn l_add(&self, other: &Self) -> Result<Self> {
        self.add(other)
    }
    fn l_sub(&self, other: &Self) -> Result<Self> {
        self.sub(other)
    }
    fn l_mul(&self, other: &Self) -> Result<Self> {
        self.mul(other)
    }
    fn l_div(&self, other: &Self) -> Result<Self> {
        self.div(other)
    }
    fn l_add_scalar(&self, v: f64) -> Result<Self> {
        self.add(v)
    }
    fn l_mul_scalar(&self, v: f64) -> Result<Self> {
        self.mul(v)
    }
    fn l_div_scalar(&self, v: f64) -> Result<Self> {
        self.div(v)
    }
    fn l_neg(&self) -> Result<Self> {
        self.neg()
    }
    fn l_exp(&self) -> Result<Self> {
        self.exp()
    }
    fn l_log(&self) -> Result<Self> {
        self.log()
    }
    fn l_log1p(&self) -> Result<Self> {
        self.log1p()
    }
    fn l_sqrt(&self) -> Result<Self> {
        self.sqrt()
    }
    fn l_square(&self) -> Result<Self> {
        self.pow(2)
    }
    fn l_logsigmoid(&self) -> Result<Self> {
        self.logsigmoid()
    }
    fn l_clamp_min_zero(&self) -> Result<Self> {
        self.clamp(Some(Scalar::Int(0)), None::<Scalar>)
    }
    fn l_minimum(&self, other: &Self) -> Result<Self> {
        self.minimum(other)
    }
    fn l_where(cond: &Tensor, a: &Self, b: &Self) -> Result<Self> {
        Tensor::where_cond(cond, a, b)
    }
    fn l_sum(&self, dims: Option<&[i64]>, keepdim: bool) -> Result<Self> {
        self.sum(dims, keepdim)
    }
    fn l_mean(&self, dims: Option<&[i64]>, keepdim: bool) -> Result<Self> {
        self.mean(dims, keepdim)
    }
    fn l_pairwise_distance(&self, other: &Self, p: f64, eps: f64) -> Result<Self> {
        self.pairwise_distance(other, p, eps, false)
    }
    fn l_to_dtype(&self, dtype: DType) -> Result<Self> {
        if self.dtype() == dtype {
            Ok(self.clone())
        } else {
            self.to_dtype(dtype)
        }
    }
    fn l_unsqueeze(&self, dim: i64) -> Result<Self> {
        self.unsqueeze(dim)
    }
    fn l_reshape(&self, shape: &[i64]) -> Result<Self> {
        self.reshape(shape)
    }
    fn l_gather(&self, dim: i64, index: &Tensor) -> Result<Self> {
        self.gather(dim, index)
    }
    fn l_clamp_min_no_grad(&self, min: f64) -> Result<Self> {
        self.clamp(Some(min), None::<f64>)
    }
}
