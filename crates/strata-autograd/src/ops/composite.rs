//! [`Composite`] for [`Var`]: each op of strata-tensor's compositions
//! (convolution, pooling, the norms, losses, statistics, contractions, ...)
//! recorded as the `Var` op it names, so that one composition, written once
//! in strata-tensor, computes a `Tensor` and differentiates a `Var`.

use super::conv::record_convolution;
use super::formula;
use crate::error::{AutogradError, Result};
use crate::var::{record, Var};
use strata_tensor::{
    AvgMode, Composite, ConvPlan, ConvTransposePlan, DType, Device, PadMode, PoolOptions, Scalar,
    Tensor, Windows,
};

impl Composite for Var {
    type Error = AutogradError;
    fn shape(&self) -> &[usize] {
        Var::shape(self)
    }
    fn dtype(&self) -> DType {
        Var::dtype(self)
    }
    fn device(&self) -> Device {
        Var::device(self)
    }
    fn unfold(&self, dim: i64, size: i64, step: i64) -> Result<Var> {
        Var::unfold(self, dim, size, step)
    }
    fn narrow(&self, dim: i64, start: i64, length: i64) -> Result<Var> {
        Var::narrow(self, dim, start, length)
    }
    fn unsqueeze(&self, dim: i64) -> Result<Var> {
        Var::unsqueeze(self, dim)
    }
    fn squeeze_dims(&self, dims: &[i64]) -> Result<Var> {
        Var::squeeze_dims(self, dims)
    }
    fn reshape(&self, shape: &[i64]) -> Result<Var> {
        Var::reshape(self, shape)
    }
    fn permute(&self, dims: &[i64]) -> Result<Var> {
        Var::permute(self, dims)
    }
    fn flip(&self, dims: &[i64]) -> Result<Var> {
        Var::flip(self, dims)
    }
    fn view(&self, shape: &[i64]) -> Result<Var> {
        Var::view(self, shape)
    }
    fn div(&self, other: &Var) -> Result<Var> {
        Var::div(self, other)
    }
    fn mul_scalar(&self, value: f64) -> Result<Var> {
        Var::mul(self, value)
    }
    fn pow_scalar(&self, exponent: f64) -> Result<Var> {
        Var::pow_scalar(self, exponent)
    }
    fn sign(&self) -> Result<Var> {
        Var::sign(self)
    }
    fn amax(&self, dims: Option<&[i64]>, keepdim: bool) -> Result<Var> {
        Var::amax(self, dims, keepdim)
    }
    fn amin(&self, dims: Option<&[i64]>, keepdim: bool) -> Result<Var> {
        Var::amin(self, dims, keepdim)
    }
    fn abs(&self) -> Result<Var> {
        Var::abs(self)
    }
    fn relu(&self) -> Result<Var> {
        Var::relu(self)
    }
    fn avg_pool1d(&self, opts: &PoolOptions) -> Result<Var> {
        Var::avg_pool1d(self, opts)
    }
    fn avg_pool2d(&self, opts: &PoolOptions) -> Result<Var> {
        Var::avg_pool2d(self, opts)
    }
    fn avg_pool3d(&self, opts: &PoolOptions) -> Result<Var> {
        Var::avg_pool3d(self, opts)
    }
    fn div_scalar(&self, value: f64) -> Result<Var> {
        Var::div(self, value)
    }
    fn sqrt(&self) -> Result<Var> {
        Var::sqrt(self)
    }
    fn clamp(&self, min: Option<f64>, max: Option<f64>) -> Result<Var> {
        Var::clamp(self, min, max)
    }
    fn mm(&self, other: &Var) -> Result<Var> {
        Var::mm(self, other)
    }
    fn t(&self) -> Result<Var> {
        Var::t(self)
    }
    fn diagonal(&self, offset: i64, dim1: i64, dim2: i64) -> Result<Var> {
        Var::diagonal(self, offset, dim1, dim2)
    }
    fn select(&self, dim: i64, index: i64) -> Result<Var> {
        Var::select(self, dim, index)
    }
    fn cumsum(&self, dim: i64) -> Result<Var> {
        Var::cumsum(self, dim, None)
    }
    fn vector_norm(&self, p: f64, dims: &[i64], keepdim: bool) -> Result<Var> {
        Var::norm(self, p, Some(dims), keepdim)
    }
    fn cdist(&self, other: &Var, p: f64) -> Result<Var> {
        Var::cdist(self, other, p)
    }
    fn where_cond(cond: &Tensor, a: &Var, b: &Var) -> Result<Var> {
        Var::where_cond(cond, a, b)
    }
    fn repeat(&self, sizes: &[i64]) -> Result<Var> {
        Var::repeat(self, sizes)
    }
    fn contiguous(&self) -> Result<Var> {
        Var::contiguous(self)
    }
    fn clone_contiguous(&self) -> Result<Var> {
        Var::clone_contiguous(self)
    }
    fn gather(&self, dim: i64, index: &Tensor) -> Result<Var> {
        Var::gather(self, dim, index)
    }
    fn scatter(&self, dim: i64, index: &Tensor, src: &Var) -> Result<Var> {
        Var::scatter(self, dim, index, src)
    }
    fn cumprod(&self, dim: i64) -> Result<Var> {
        Var::cumprod(self, dim, None)
    }
    fn expand(&self, shape: &[i64]) -> Result<Var> {
        Var::expand(self, shape)
    }
    fn index_add(&self, dim: i64, index: &Tensor, source: &Var, alpha: Scalar) -> Result<Var> {
        Var::index_add(self, dim, index, source, alpha)
    }
    fn scatter_reduce(
        &self,
        dim: i64,
        index: &Tensor,
        src: &Var,
        reduce: strata_tensor::ScatterReduce,
        include_self: bool,
    ) -> Result<Var> {
        Var::scatter_reduce(self, dim, index, src, reduce, include_self)
    }
    fn sort_values(&self, dim: i64, descending: bool, stable: bool) -> Result<Var> {
        Ok(Var::sort(self, dim, descending, stable)?.0)
    }
    fn lerp(&self, end: &Var, weight: &Var) -> Result<Var> {
        Var::lerp(self, end, weight)
    }
    fn transpose(&self, d0: i64, d1: i64) -> Result<Var> {
        Var::transpose(self, d0, d1)
    }
    fn slice(&self, dim: i64, start: Option<i64>, end: Option<i64>, step: i64) -> Result<Var> {
        Var::slice(self, dim, start, end, step)
    }
    fn to_dtype(&self, dtype: DType) -> Result<Var> {
        Var::to_dtype(self, dtype)
    }
    fn pad_with(&self, pad: &[i64], value: Scalar) -> Result<Var> {
        Var::pad(self, pad, PadMode::Constant(value))
    }
    fn matmul(&self, other: &Var) -> Result<Var> {
        Var::matmul(self, other)
    }
    fn add(&self, other: &Var) -> Result<Var> {
        Var::add(self, other)
    }
    fn sum(&self, dims: Option<&[i64]>, keepdim: bool) -> Result<Var> {
        Var::sum(self, dims, keepdim)
    }
    fn mean(&self, dims: Option<&[i64]>, keepdim: bool) -> Result<Var> {
        Var::mean(self, dims, keepdim)
    }
    fn index_select(&self, dim: i64, index: &Tensor) -> Result<Var> {
        Var::index_select(self, dim, index)
    }
    fn cat(parts: &[Var], dim: i64) -> Result<Var> {
        Var::cat(&parts.iter().collect::<Vec<_>>(), dim)
    }
    fn mul(&self, other: &Var) -> Result<Var> {
        Var::mul(self, other)
    }
    fn sub(&self, other: &Var) -> Result<Var> {
        Var::sub(self, other)
    }
    fn add_scalar(&self, value: f64) -> Result<Var> {
        Var::add(self, value)
    }
    fn neg(&self) -> Result<Var> {
        Var::neg(self)
    }
    fn rsqrt(&self) -> Result<Var> {
        Var::rsqrt(self)
    }
    fn var_keepdim(&self, dims: &[i64], correction: f64) -> Result<Var> {
        Var::var(self, Some(dims), correction, true)
    }
    fn data(&self) -> &Tensor {
        Var::data(self)
    }
    fn constant(t: Tensor) -> Var {
        Var::new(t)
    }
    fn exp(&self) -> Result<Var> {
        Var::exp(self)
    }
    fn log(&self) -> Result<Var> {
        Var::log(self)
    }
    fn log1p(&self) -> Result<Var> {
        Var::log1p(self)
    }
    fn square(&self) -> Result<Var> {
        Var::pow_scalar(self, 2)
    }
    fn logsigmoid(&self) -> Result<Var> {
        Var::logsigmoid(self)
    }
    fn clamp_min_zero(&self) -> Result<Var> {
        Var::clamp_min(self, 0.0)
    }
    fn clamp_min_no_grad(&self, min: f64) -> Result<Var> {
        let out = self.data().clamp(Some(min), None::<f64>)?;
        let f = formula(|g, _s, _n| Ok(vec![Some(g.clone())]));
        record("CloneBackward", out, &[Some(self)], Vec::new, f, false)
    }
    fn minimum(&self, other: &Var) -> Result<Var> {
        Var::minimum(self, other)
    }
    fn pairwise_distance(&self, other: &Var, p: f64, eps: f64) -> Result<Var> {
        Var::pairwise_distance(self, other, p, eps, false)
    }
    fn bmm(&self, other: &Var) -> Result<Var> {
        // einsum's aligned 3-D operands of equal batches: `matmul` is `bmm`
        // there, except for mixed or bool dtypes, where `bmm`'s own answer
        // (its typed error; nothing is computed for an empty product) comes
        // first.
        if self.dtype() != other.dtype() || self.dtype() == DType::Bool {
            self.data().bmm(other.data())?;
        }
        Var::matmul(self, other)
    }
    fn conv_product(&self, weight: &Var, bias: Option<&Var>, plan: &ConvPlan) -> Result<Var> {
        let out = plan.product(self.data(), weight.data(), bias.map(Var::data))?;
        let plan = plan.clone();
        record_convolution(out, self, weight, bias, move |g, x, w, needs| {
            plan.product_backward(g, x, w, needs)
        })
    }
    fn conv_transpose_product(
        &self,
        weight: &Var,
        bias: Option<&Var>,
        plan: &ConvTransposePlan,
    ) -> Result<Var> {
        let out = plan.product(self.data(), weight.data(), bias.map(Var::data))?;
        let plan = plan.clone();
        record_convolution(out, self, weight, bias, move |g, x, w, needs| {
            plan.product_backward(g, x, w, needs)
        })
    }
    fn window_means(&self, windows: &Windows, mode: AvgMode) -> Result<Var> {
        let out = self.data().window_means(windows, mode)?;
        let w = *windows;
        let f = formula(move |g, _s, _n| Ok(vec![Some(g.window_means_backward(&w, mode)?)]));
        record("AvgPoolBackward", out, &[Some(self)], Vec::new, f, false)
    }
}
