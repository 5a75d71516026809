//! The ops strata's compositions are written in, for a tensor-like type:
//! [`Tensor`] here, strata-autograd's `Var` there (which records each one, so
//! a composition differentiates itself). Each composition is written once,
//! generically over [`Composite`]: convolution and pooling (`ops::conv`,
//! `ops::pool`), the norms, the losses of `ops::margin_losses` and
//! `ops::likelihood_losses`, `ops::nn_more`, `ops::shape_join`,
//! `ops::statistics` and the contractions of `ops::contract` (`einsum`,
//! `tensordot`, ...). Each method is the `Tensor` method it names.

use crate::dtype::DType;
use crate::error::{Result, TensorError};
use crate::ops::conv::{ConvPlan, ConvTransposePlan};
use crate::ops::pool::PoolOptions;
use crate::ops::shape_ops::PadMode;
use crate::ops::windows::{AvgMode, Windows};
use crate::scalar::Scalar;
use crate::tensor::Tensor;
use crate::Device;

/// The ops strata's compositions are made of, on [`Tensor`] here and on
/// strata-autograd's `Var` (see the module's documentation). Not meant to be
/// implemented outside strata.
pub trait Composite: Clone + Sized {
    /// The error of these ops (a [`TensorError`] or one that wraps it).
    type Error: From<TensorError>;
    /// [`Tensor::shape`].
    fn shape(&self) -> &[usize];
    /// [`Tensor::dtype`].
    fn dtype(&self) -> DType;
    /// [`Tensor::device`].
    fn device(&self) -> Device;
    /// [`Tensor::unfold`].
    fn unfold(&self, dim: i64, size: i64, step: i64) -> std::result::Result<Self, Self::Error>;
    /// [`Tensor::narrow`].
    fn narrow(&self, dim: i64, start: i64, length: i64) -> std::result::Result<Self, Self::Error>;
    /// [`Tensor::unsqueeze`].
    fn unsqueeze(&self, dim: i64) -> std::result::Result<Self, Self::Error>;
    /// [`Tensor::squeeze_dims`].
    fn squeeze_dims(&self, dims: &[i64]) -> std::result::Result<Self, Self::Error>;
    /// [`Tensor::reshape`].
    fn reshape(&self, shape: &[i64]) -> std::result::Result<Self, Self::Error>;
    /// [`Tensor::permute`].
    fn permute(&self, dims: &[i64]) -> std::result::Result<Self, Self::Error>;
    /// [`Tensor::flip`].
    fn flip(&self, dims: &[i64]) -> std::result::Result<Self, Self::Error>;
    /// [`Tensor::view`].
    fn view(&self, shape: &[i64]) -> std::result::Result<Self, Self::Error>;
    /// [`Tensor::div`] by another operand.
    fn div(&self, other: &Self) -> std::result::Result<Self, Self::Error>;
    /// [`Tensor::mul`] by a scalar.
    fn mul_scalar(&self, value: f64) -> std::result::Result<Self, Self::Error>;
    /// [`Tensor::pow`] to a scalar exponent.
    fn pow_scalar(&self, exponent: f64) -> std::result::Result<Self, Self::Error>;
    /// [`Tensor::sign`].
    fn sign(&self) -> std::result::Result<Self, Self::Error>;
    /// [`Tensor::amax`].
    fn amax(&self, dims: Option<&[i64]>, keepdim: bool) -> std::result::Result<Self, Self::Error>;
    /// [`Tensor::amin`].
    fn amin(&self, dims: Option<&[i64]>, keepdim: bool) -> std::result::Result<Self, Self::Error>;
    /// [`Tensor::abs`].
    fn abs(&self) -> std::result::Result<Self, Self::Error>;
    /// [`Tensor::relu`].
    fn relu(&self) -> std::result::Result<Self, Self::Error>;
    /// [`Tensor::avg_pool1d`].
    fn avg_pool1d(&self, opts: &PoolOptions) -> std::result::Result<Self, Self::Error>;
    /// [`Tensor::avg_pool2d`].
    fn avg_pool2d(&self, opts: &PoolOptions) -> std::result::Result<Self, Self::Error>;
    /// [`Tensor::avg_pool3d`].
    fn avg_pool3d(&self, opts: &PoolOptions) -> std::result::Result<Self, Self::Error>;
    /// [`Tensor::div`] by a scalar.
    fn div_scalar(&self, value: f64) -> std::result::Result<Self, Self::Error>;
    /// [`Tensor::sqrt`].
    fn sqrt(&self) -> std::result::Result<Self, Self::Error>;
    /// [`Tensor::clamp`] to float bounds.
    fn clamp(&self, min: Option<f64>, max: Option<f64>) -> std::result::Result<Self, Self::Error>;
    /// [`Tensor::mm`].
    fn mm(&self, other: &Self) -> std::result::Result<Self, Self::Error>;
    /// [`Tensor::t`].
    fn t(&self) -> std::result::Result<Self, Self::Error>;
    /// [`Tensor::diagonal`].
    fn diagonal(&self, offset: i64, dim1: i64, dim2: i64)
        -> std::result::Result<Self, Self::Error>;
    /// [`Tensor::select`].
    fn select(&self, dim: i64, index: i64) -> std::result::Result<Self, Self::Error>;
    /// [`Tensor::cumprod`] in the operand's dtype.
    fn cumprod(&self, dim: i64) -> std::result::Result<Self, Self::Error>;
    /// [`Tensor::cumsum`] in the operand's dtype.
    fn cumsum(&self, dim: i64) -> std::result::Result<Self, Self::Error>;
    /// [`Tensor::vector_norm`] (strata-autograd's `Var::norm`).
    fn vector_norm(
        &self,
        p: f64,
        dims: &[i64],
        keepdim: bool,
    ) -> std::result::Result<Self, Self::Error>;
    /// [`Tensor::cdist`].
    fn cdist(&self, other: &Self, p: f64) -> std::result::Result<Self, Self::Error>;
    /// [`Tensor::where_cond`] of two operands.
    fn where_cond(cond: &Tensor, a: &Self, b: &Self) -> std::result::Result<Self, Self::Error>;
    /// [`Tensor::repeat`].
    fn repeat(&self, sizes: &[i64]) -> std::result::Result<Self, Self::Error>;
    /// [`Tensor::contiguous`].
    fn contiguous(&self) -> std::result::Result<Self, Self::Error>;
    /// [`Tensor::clone_contiguous`]: a fresh row-major copy, never a view
    /// (a variable records it as `CloneBackward`).
    fn clone_contiguous(&self) -> std::result::Result<Self, Self::Error>;
    /// [`Tensor::gather`].
    fn gather(&self, dim: i64, index: &Tensor) -> std::result::Result<Self, Self::Error>;
    /// [`Tensor::scatter`] of another operand.
    fn scatter(
        &self,
        dim: i64,
        index: &Tensor,
        src: &Self,
    ) -> std::result::Result<Self, Self::Error>;
    /// [`Tensor::expand`].
    fn expand(&self, shape: &[i64]) -> std::result::Result<Self, Self::Error>;
    /// [`Tensor::index_add`] of another operand.
    fn index_add(
        &self,
        dim: i64,
        index: &Tensor,
        source: &Self,
        alpha: Scalar,
    ) -> std::result::Result<Self, Self::Error>;
    /// [`Tensor::scatter_reduce`] of another operand.
    fn scatter_reduce(
        &self,
        dim: i64,
        index: &Tensor,
        src: &Self,
        reduce: crate::ops::ScatterReduce,
        include_self: bool,
    ) -> std::result::Result<Self, Self::Error>;
    /// The values of [`Tensor::sort`].
    fn sort_values(
        &self,
        dim: i64,
        descending: bool,
        stable: bool,
    ) -> std::result::Result<Self, Self::Error>;
    /// [`Tensor::lerp`] with an operand's weights.
    fn lerp(&self, end: &Self, weight: &Self) -> std::result::Result<Self, Self::Error>;
    /// [`Tensor::transpose`].
    fn transpose(&self, d0: i64, d1: i64) -> std::result::Result<Self, Self::Error>;
    /// [`Tensor::slice`].
    fn slice(
        &self,
        dim: i64,
        start: Option<i64>,
        end: Option<i64>,
        step: i64,
    ) -> std::result::Result<Self, Self::Error>;
    /// [`Tensor::to_dtype`].
    fn to_dtype(&self, dtype: DType) -> std::result::Result<Self, Self::Error>;
    /// [`Tensor::pad`] with a constant.
    fn pad_with(&self, pad: &[i64], value: Scalar) -> std::result::Result<Self, Self::Error>;
    /// [`Tensor::matmul`].
    fn matmul(&self, other: &Self) -> std::result::Result<Self, Self::Error>;
    /// [`Tensor::add`] of another operand.
    fn add(&self, other: &Self) -> std::result::Result<Self, Self::Error>;
    /// [`Tensor::sum`] over `dims` (all where `None`).
    fn sum(&self, dims: Option<&[i64]>, keepdim: bool) -> std::result::Result<Self, Self::Error>;
    /// [`Tensor::mean`] over `dims` (all where `None`).
    fn mean(&self, dims: Option<&[i64]>, keepdim: bool) -> std::result::Result<Self, Self::Error>;
    /// [`Tensor::index_select`].
    fn index_select(&self, dim: i64, index: &Tensor) -> std::result::Result<Self, Self::Error>;
    /// [`Tensor::cat`].
    fn cat(parts: &[Self], dim: i64) -> std::result::Result<Self, Self::Error>;
    /// [`Tensor::mul`] by another operand.
    fn mul(&self, other: &Self) -> std::result::Result<Self, Self::Error>;
    /// [`Tensor::sub`] of another operand.
    fn sub(&self, other: &Self) -> std::result::Result<Self, Self::Error>;
    /// [`Tensor::add`] of a scalar.
    fn add_scalar(&self, value: f64) -> std::result::Result<Self, Self::Error>;
    /// [`Tensor::neg`].
    fn neg(&self) -> std::result::Result<Self, Self::Error>;
    /// [`Tensor::rsqrt`].
    fn rsqrt(&self) -> std::result::Result<Self, Self::Error>;
    /// [`Tensor::var`] over `dims` with `correction`, keeping them.
    fn var_keepdim(&self, dims: &[i64], correction: f64) -> std::result::Result<Self, Self::Error>;
    /// The values (a variable's data, detached from its history).
    fn data(&self) -> &Tensor;
    /// A constant (a variable that requires no gradient).
    fn constant(t: Tensor) -> Self;
    /// [`Tensor::exp`].
    fn exp(&self) -> std::result::Result<Self, Self::Error>;
    /// [`Tensor::log`].
    fn log(&self) -> std::result::Result<Self, Self::Error>;
    /// [`Tensor::log1p`].
    fn log1p(&self) -> std::result::Result<Self, Self::Error>;
    /// The square (`pow(2)`).
    fn square(&self) -> std::result::Result<Self, Self::Error>;
    /// [`Tensor::logsigmoid`].
    fn logsigmoid(&self) -> std::result::Result<Self, Self::Error>;
    /// [`Tensor::clamp`] below at an integer 0 (the dtype kept, also an
    /// integer one).
    fn clamp_min_zero(&self) -> std::result::Result<Self, Self::Error>;
    /// [`Tensor::clamp`] below at `min`, its gradient passed through
    /// unchanged (a variable records it as a copy).
    fn clamp_min_no_grad(&self, min: f64) -> std::result::Result<Self, Self::Error>;
    /// [`Tensor::minimum`].
    fn minimum(&self, other: &Self) -> std::result::Result<Self, Self::Error>;
    /// [`Tensor::pairwise_distance`] without keeping the dim.
    fn pairwise_distance(
        &self,
        other: &Self,
        p: f64,
        eps: f64,
    ) -> std::result::Result<Self, Self::Error>;
    /// [`Tensor::bmm`] of two 3-D operands.
    fn bmm(&self, other: &Self) -> std::result::Result<Self, Self::Error>;
    /// [`ConvPlan::product`]: the convolution of this batched input by
    /// `weight` plus `bias` (operands in the plan's computation dtype).
    fn conv_product(
        &self,
        weight: &Self,
        bias: Option<&Self>,
        plan: &ConvPlan,
    ) -> std::result::Result<Self, Self::Error>;
    /// [`ConvTransposePlan::product`]: the transposed convolution of this
    /// batched input by `weight` plus `bias` (operands in the plan's
    /// computation dtype).
    fn conv_transpose_product(
        &self,
        weight: &Self,
        bias: Option<&Self>,
        plan: &ConvTransposePlan,
    ) -> std::result::Result<Self, Self::Error>;
    /// [`Tensor::window_means`] (average pooling).
    fn window_means(
        &self,
        windows: &Windows,
        mode: AvgMode,
    ) -> std::result::Result<Self, Self::Error>;
}

impl Composite for Tensor {
    type Error = TensorError;
    fn shape(&self) -> &[usize] {
        Tensor::shape(self)
    }
    fn dtype(&self) -> DType {
        Tensor::dtype(self)
    }
    fn device(&self) -> Device {
        Tensor::device(self)
    }
    fn unfold(&self, dim: i64, size: i64, step: i64) -> Result<Tensor> {
        Tensor::unfold(self, dim, size, step)
    }
    fn narrow(&self, dim: i64, start: i64, length: i64) -> Result<Tensor> {
        Tensor::narrow(self, dim, start, length)
    }
    fn unsqueeze(&self, dim: i64) -> Result<Tensor> {
        Tensor::unsqueeze(self, dim)
    }
    fn squeeze_dims(&self, dims: &[i64]) -> Result<Tensor> {
        Tensor::squeeze_dims(self, dims)
    }
    fn reshape(&self, shape: &[i64]) -> Result<Tensor> {
        Tensor::reshape(self, shape)
    }
    fn permute(&self, dims: &[i64]) -> Result<Tensor> {
        Tensor::permute(self, dims)
    }
    fn flip(&self, dims: &[i64]) -> Result<Tensor> {
        Tensor::flip(self, dims)
    }
    fn view(&self, shape: &[i64]) -> Result<Tensor> {
        Tensor::view(self, shape)
    }
    fn div(&self, other: &Tensor) -> Result<Tensor> {
        Tensor::div(self, other)
    }
    fn mul_scalar(&self, value: f64) -> Result<Tensor> {
        Tensor::mul(self, value)
    }
    fn pow_scalar(&self, exponent: f64) -> Result<Tensor> {
        Tensor::pow(self, exponent)
    }
    fn sign(&self) -> Result<Tensor> {
        Tensor::sign(self)
    }
    fn amax(&self, dims: Option<&[i64]>, keepdim: bool) -> Result<Tensor> {
        Tensor::amax(self, dims, keepdim)
    }
    fn amin(&self, dims: Option<&[i64]>, keepdim: bool) -> Result<Tensor> {
        Tensor::amin(self, dims, keepdim)
    }
    fn abs(&self) -> Result<Tensor> {
        Tensor::abs(self)
    }
    fn relu(&self) -> Result<Tensor> {
        Tensor::relu(self)
    }
    fn avg_pool1d(&self, opts: &PoolOptions) -> Result<Tensor> {
        Tensor::avg_pool1d(self, opts)
    }
    fn avg_pool2d(&self, opts: &PoolOptions) -> Result<Tensor> {
        Tensor::avg_pool2d(self, opts)
    }
    fn avg_pool3d(&self, opts: &PoolOptions) -> Result<Tensor> {
        Tensor::avg_pool3d(self, opts)
    }
    fn div_scalar(&self, value: f64) -> Result<Tensor> {
        Tensor::div(self, value)
    }
    fn sqrt(&self) -> Result<Tensor> {
        Tensor::sqrt(self)
    }
    fn clamp(&self, min: Option<f64>, max: Option<f64>) -> Result<Tensor> {
        Tensor::clamp(self, min, max)
    }
    fn mm(&self, other: &Tensor) -> Result<Tensor> {
        Tensor::mm(self, other)
    }
    fn t(&self) -> Result<Tensor> {
        Tensor::t(self)
    }
    fn diagonal(&self, offset: i64, dim1: i64, dim2: i64) -> Result<Tensor> {
        Tensor::diagonal(self, offset, dim1, dim2)
    }
    fn select(&self, dim: i64, index: i64) -> Result<Tensor> {
        Tensor::select(self, dim, index)
    }
    fn cumsum(&self, dim: i64) -> Result<Tensor> {
        Tensor::cumsum(self, dim, None)
    }
    fn vector_norm(&self, p: f64, dims: &[i64], keepdim: bool) -> Result<Tensor> {
        Tensor::vector_norm(self, p, Some(dims), keepdim)
    }
    fn cdist(&self, other: &Tensor, p: f64) -> Result<Tensor> {
        Tensor::cdist(self, other, p)
    }
    fn where_cond(cond: &Tensor, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        Tensor::where_cond(cond, a, b)
    }
    fn repeat(&self, sizes: &[i64]) -> Result<Tensor> {
        Tensor::repeat(self, sizes)
    }
    fn contiguous(&self) -> Result<Tensor> {
        Tensor::contiguous(self)
    }
    fn clone_contiguous(&self) -> Result<Tensor> {
        Tensor::clone_contiguous(self)
    }
    fn gather(&self, dim: i64, index: &Tensor) -> Result<Tensor> {
        Tensor::gather(self, dim, index)
    }
    fn scatter(&self, dim: i64, index: &Tensor, src: &Tensor) -> Result<Tensor> {
        Tensor::scatter(self, dim, index, src)
    }
    fn cumprod(&self, dim: i64) -> Result<Tensor> {
        Tensor::cumprod(self, dim, None)
    }
    fn expand(&self, shape: &[i64]) -> Result<Tensor> {
        Tensor::expand(self, shape)
    }
    fn index_add(
        &self,
        dim: i64,
        index: &Tensor,
        source: &Tensor,
        alpha: Scalar,
    ) -> Result<Tensor> {
        Tensor::index_add(self, dim, index, source, alpha)
    }
    fn scatter_reduce(
        &self,
        dim: i64,
        index: &Tensor,
        src: &Tensor,
        reduce: crate::ops::ScatterReduce,
        include_self: bool,
    ) -> Result<Tensor> {
        Tensor::scatter_reduce(self, dim, index, src, reduce, include_self)
    }
    fn sort_values(&self, dim: i64, descending: bool, stable: bool) -> Result<Tensor> {
        Ok(Tensor::sort(self, dim, descending, stable)?.0)
    }
    fn lerp(&self, end: &Tensor, weight: &Tensor) -> Result<Tensor> {
        Tensor::lerp(self, end, weight)
    }
    fn transpose(&self, d0: i64, d1: i64) -> Result<Tensor> {
        Tensor::transpose(self, d0, d1)
    }
    fn slice(&self, dim: i64, start: Option<i64>, end: Option<i64>, step: i64) -> Result<Tensor> {
        Tensor::slice(self, dim, start, end, step)
    }
    fn to_dtype(&self, dtype: DType) -> Result<Tensor> {
        Tensor::to_dtype(self, dtype)
    }
    fn pad_with(&self, pad: &[i64], value: Scalar) -> Result<Tensor> {
        Tensor::pad(self, pad, PadMode::Constant(value))
    }
    fn matmul(&self, other: &Tensor) -> Result<Tensor> {
        Tensor::matmul(self, other)
    }
    fn add(&self, other: &Tensor) -> Result<Tensor> {
        Tensor::add(self, other)
    }
    fn sum(&self, dims: Option<&[i64]>, keepdim: bool) -> Result<Tensor> {
        Tensor::sum(self, dims, keepdim)
    }
    fn mean(&self, dims: Option<&[i64]>, keepdim: bool) -> Result<Tensor> {
        Tensor::mean(self, dims, keepdim)
    }
    fn index_select(&self, dim: i64, index: &Tensor) -> Result<Tensor> {
        Tensor::index_select(self, dim, index)
    }
    fn cat(parts: &[Tensor], dim: i64) -> Result<Tensor> {
        Tensor::cat(&parts.iter().collect::<Vec<_>>(), dim)
    }
    fn mul(&self, other: &Tensor) -> Result<Tensor> {
        Tensor::mul(self, other)
    }
    fn sub(&self, other: &Tensor) -> Result<Tensor> {
        Tensor::sub(self, other)
    }
    fn add_scalar(&self, value: f64) -> Result<Tensor> {
        Tensor::add(self, value)
    }
    fn neg(&self) -> Result<Tensor> {
        Tensor::neg(self)
    }
    fn rsqrt(&self) -> Result<Tensor> {
        Tensor::rsqrt(self)
    }
    fn var_keepdim(&self, dims: &[i64], correction: f64) -> Result<Tensor> {
        Tensor::var(self, Some(dims), correction, true)
    }
    fn data(&self) -> &Tensor {
        self
    }
    fn constant(t: Tensor) -> Tensor {
        t
    }
    fn exp(&self) -> Result<Tensor> {
        Tensor::exp(self)
    }
    fn log(&self) -> Result<Tensor> {
        Tensor::log(self)
    }
    fn log1p(&self) -> Result<Tensor> {
        Tensor::log1p(self)
    }
    fn square(&self) -> Result<Tensor> {
        Tensor::pow(self, 2)
    }
    fn logsigmoid(&self) -> Result<Tensor> {
        Tensor::logsigmoid(self)
    }
    fn clamp_min_zero(&self) -> Result<Tensor> {
        Tensor::clamp(self, Some(Scalar::Int(0)), None::<Scalar>)
    }
    fn clamp_min_no_grad(&self, min: f64) -> Result<Tensor> {
        Tensor::clamp(self, Some(min), None::<f64>)
    }
    fn minimum(&self, other: &Tensor) -> Result<Tensor> {
        Tensor::minimum(self, other)
    }
    fn pairwise_distance(&self, other: &Tensor, p: f64, eps: f64) -> Result<Tensor> {
        Tensor::pairwise_distance(self, other, p, eps, false)
    }
    fn bmm(&self, other: &Tensor) -> Result<Tensor> {
        Tensor::bmm(self, other)
    }
    fn conv_product(
        &self,
        weight: &Tensor,
        bias: Option<&Tensor>,
        plan: &ConvPlan,
    ) -> Result<Tensor> {
        plan.product(self, weight, bias)
    }
    fn conv_transpose_product(
        &self,
        weight: &Tensor,
        bias: Option<&Tensor>,
        plan: &ConvTransposePlan,
    ) -> Result<Tensor> {
        plan.product(self, weight, bias)
    }
    fn window_means(&self, windows: &Windows, mode: AvgMode) -> Result<Tensor> {
        Tensor::window_means(self, windows, mode)
    }
}
