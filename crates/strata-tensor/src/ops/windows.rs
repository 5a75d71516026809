//! What convolution and pooling share: the view ops their windows are taken
//! with ([`Composite`], implemented by [`Tensor`] here and by
//! strata-autograd's `Var`, so that one plan drives both forms), the rank
//! check of an input with or without a batch dim, and the int-or-tuple
//! option lists.

use crate::dtype::DType;
use crate::error::{Result, TensorError};
use crate::ops::shape_ops::PadMode;
use crate::scalar::Scalar;
use crate::tensor::Tensor;
use crate::Device;

/// The ops convolution and pooling are composed from, on [`Tensor`] here
/// and on strata-autograd's `Var` (which records each one, so the
/// compositions differentiate themselves): each composition is written
/// once, generically, in `ops::conv` and `ops::pool`.
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
    /// [`Tensor::slice`] from the start with `step`.
    fn every(&self, dim: i64, step: i64) -> std::result::Result<Self, Self::Error>;
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
    /// [`Tensor::to_dtype`].
    fn to_dtype(&self, dtype: DType) -> std::result::Result<Self, Self::Error>;
    /// [`Tensor::pad`] with a constant.
    fn pad_with(&self, pad: &[i64], value: Scalar) -> std::result::Result<Self, Self::Error>;
    /// [`Tensor::matmul`].
    fn matmul(&self, other: &Self) -> std::result::Result<Self, Self::Error>;
    /// [`Tensor::add`] of another operand.
    fn add(&self, other: &Self) -> std::result::Result<Self, Self::Error>;
    /// [`Tensor::div`] by a constant tensor.
    fn div_by(&self, divisor: &Tensor) -> std::result::Result<Self, Self::Error>;
    /// [`Tensor::sum`] over `dims`.
    fn sum(&self, dims: &[i64]) -> std::result::Result<Self, Self::Error>;
    /// [`Tensor::mean`] over `dims`.
    fn mean(&self, dims: &[i64], keepdim: bool) -> std::result::Result<Self, Self::Error>;
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
    fn values(&self) -> Tensor;
    /// A constant (a variable that requires no gradient).
    fn constant(t: Tensor) -> Self;
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
    fn every(&self, dim: i64, step: i64) -> Result<Tensor> {
        Tensor::slice(self, dim, None, None, step)
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
    fn div_by(&self, divisor: &Tensor) -> Result<Tensor> {
        Tensor::div(self, divisor)
    }
    fn sum(&self, dims: &[i64]) -> Result<Tensor> {
        Tensor::sum(self, Some(dims), false)
    }
    fn mean(&self, dims: &[i64], keepdim: bool) -> Result<Tensor> {
        Tensor::mean(self, Some(dims), keepdim)
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
    fn values(&self) -> Tensor {
        self.clone()
    }
    fn constant(t: Tensor) -> Tensor {
        t
    }
}

/// The windows of `x` (`[N, C, spatial...]`, already padded): per spatial
/// dim `(extent, stride, dilation)` in `windows`, the first `out[i]` windows
/// where `out` is given; `[N, C, O..., K...]`, a view.
pub fn take_windows<T: Composite>(
    x: &T,
    windows: &[(i64, i64, i64)],
    out: Option<&[usize]>,
) -> std::result::Result<T, T::Error> {
    let spatial = windows.len();
    let mut u = x.clone();
    for (i, &(extent, stride, _)) in windows.iter().enumerate() {
        let d = (2 + i) as i64;
        u = u.unfold(d, extent, stride)?;
        if let Some(out) = out {
            u = u.narrow(d, 0, out[i] as i64)?;
        }
    }
    for (i, &(_, _, dilation)) in windows.iter().enumerate() {
        if dilation > 1 {
            u = u.every((2 + spatial + i) as i64, dilation)?;
        }
    }
    Ok(u)
}

/// `x` with a batch dim (added where the input has none).
pub fn with_batch<T: Composite>(x: &T, batched: bool) -> std::result::Result<T, T::Error> {
    if batched {
        Ok(x.clone())
    } else {
        x.unsqueeze(0)
    }
}

/// A result without the batch dim [`with_batch`] added.
pub fn without_batch<T: Composite>(y: T, batched: bool) -> std::result::Result<T, T::Error> {
    if batched {
        Ok(y)
    } else {
        y.squeeze_dims(&[0])
    }
}

/// Whether an input of `shape` to an op over `spatial` dims has a batch dim
/// (`spatial + 2` dims) or not (`spatial + 1`); any other rank is an error.
pub(crate) fn is_batched(op: &'static str, shape: &[usize], spatial: usize) -> Result<bool> {
    if shape.len() != spatial + 1 && shape.len() != spatial + 2 {
        return Err(TensorError::shape(
            op,
            format!(
                "expected a {}-D (unbatched) or {}-D (batched) input, but got input of shape {shape:?}",
                spatial + 1,
                spatial + 2
            ),
        ));
    }
    Ok(shape.len() == spatial + 2)
}

/// One value per spatial dim from an int-or-tuple list (PyTorch's
/// `expand_param_if_needed`).
pub(crate) fn per_dim<V: Copy + std::fmt::Debug>(
    op: &'static str,
    name: &str,
    values: &[V],
    spatial: usize,
) -> Result<Vec<V>> {
    match values.len() {
        1 => Ok(vec![values[0]; spatial]),
        n if n == spatial => Ok(values.to_vec()),
        _ => Err(TensorError::shape(
            op,
            format!(
                "expected {name} to be a single value or a list of {spatial} values to match the \
                 {spatial} spatial dims, but got {name}={values:?}"
            ),
        )),
    }
}
