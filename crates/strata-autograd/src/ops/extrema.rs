//! Clamping, the extreme-value reductions (`max`/`min` of every element,
//! `max_dim`/`min_dim` along a dim, `amax`/`amin` over dims) and vector
//! norms, with PyTorch's gradient conventions at the bounds, at ties and at
//! NaN:
//!
//! * `clamp`: the gradient passes where `min < x < max` strictly (PyTorch
//!   2.15: a value equal to a bound gets 0), 0 elsewhere and at a NaN `x`;
//!   the input is saved.
//! * `max`/`min` of every element: the gradient is split evenly among the
//!   elements equal to the result (among the NaNs when the result is NaN);
//!   the input and the result are saved.
//! * `max_dim`/`min_dim`: the gradient goes to the returned index only; the
//!   indices are saved.
//! * `amax`/`amin`: the gradient is split evenly among the elements equal to
//!   the result of their slice (`g / count * mask`: a slice whose result is
//!   NaN gets NaN everywhere); the input and the result are saved.
//! * `norm`: PyTorch's `norm_backward` (0 where the 2-norm is 0, the
//!   infinity norm splits like `amax` of `|x|`); the input and the result
//!   are saved.

use super::{expand_back, formula, kept};
use crate::error::Result;
use crate::var::{record, Var};
use strata_tensor::{shape, DType, Device, Tensor, TensorError};

/// The dims that a reduction over `dims` of a tensor of `ndim` dims reduces
/// (validated; `None` or empty: every dim; none for a 0-d tensor), sorted.
fn reduced_dims(op: &'static str, dims: Option<&[i64]>, ndim: usize) -> Result<Vec<usize>> {
    let mut d = match dims {
        Some(ds) if !ds.is_empty() => shape::normalize_dims(op, ds, ndim)?,
        _ => (0..ndim).collect(),
    };
    if ndim == 0 {
        d.clear();
    }
    d.sort_unstable();
    Ok(d)
}

/// An error unless `x` is floating point (a norm of an integer tensor).
fn float_only(op: &'static str, x: &Tensor) -> Result<()> {
    if x.dtype().is_float() {
        return Ok(());
    }
    Err(TensorError::DType {
        op,
        msg: format!(
            "expected a floating point tensor, got {}; convert it first (to_dtype(DType::F32))",
            x.dtype()
        ),
    }
    .into())
}

impl Var {
    /// `min(max(self, min), max)` (`torch.clamp`); at least one bound must
    /// be given. The input is saved; its gradient is PyTorch's (2.15,
    /// `ClampBackward1`): `g` where `min < x < max` strictly, 0 elsewhere:
    /// a value equal to a bound gets 0, and so does a NaN `x`, or every
    /// element for a NaN bound (no comparison holds). With `min > max`
    /// every result is `max` and every gradient 0.
    ///
    /// ```
    /// use strata_autograd::Var;
    /// use strata_tensor::{Device, Tensor};
    /// let x = Var::parameter(Tensor::from_slice(&[-2.0f32, -1.0, 0.5, 1.0, 3.0], &[5], Device::Cpu)?)?;
    /// let y = x.clamp(Some(-1.0), Some(1.0))?;
    /// assert_eq!(y.data().to_vec::<f32>()?, vec![-1.0, -1.0, 0.5, 1.0, 1.0]);
    /// y.sum(None, false)?.backward()?;
    /// // -1.0 and 1.0 are at a bound: no gradient.
    /// assert_eq!(x.grad().unwrap().to_vec::<f32>()?, vec![0.0, 0.0, 1.0, 0.0, 0.0]);
    /// # Ok::<(), strata_autograd::AutogradError>(())
    /// ```
    pub fn clamp(&self, min: Option<f64>, max: Option<f64>) -> Result<Var> {
        let out = self.data().clamp(min, max)?;
        let input = self.data().clone();
        let saved = move || vec![input];
        let f = formula(move |g, s, _n| {
            let x = &s[0];
            // Strict, positive masks: a value at a bound gets 0, and a NaN
            // x (or bound) passes neither comparison.
            let pass = match (min, max) {
                (Some(lo), Some(hi)) => Some(x.gt(lo)?.mul(&x.lt(hi)?)?),
                (Some(lo), None) => Some(x.gt(lo)?),
                (None, Some(hi)) => Some(x.lt(hi)?),
                (None, None) => None,
            };
            Ok(vec![Some(match pass {
                Some(m) => Tensor::where_cond(&m, g, 0.0)?,
                None => g.clone(),
            })])
        });
        record("ClampBackward", out, &[Some(self)], saved, f, false)
    }

    /// `max(self, min)` (`torch.clamp_min`): [`clamp`](Var::clamp) with a
    /// lower bound only (the gradient passes where `x > min`).
    pub fn clamp_min(&self, min: f64) -> Result<Var> {
        self.clamp(Some(min), None)
    }

    /// `min(self, max)` (`torch.clamp_max`): [`clamp`](Var::clamp) with an
    /// upper bound only (the gradient passes where `x < max`).
    pub fn clamp_max(&self, max: f64) -> Result<Var> {
        self.clamp(None, Some(max))
    }

    /// The largest element, as a 0-d variable (`torch.max(x)`; NaN when
    /// any element is NaN; an empty tensor is an error). The input and the
    /// result are saved; the gradient is split evenly among the elements
    /// equal to the result (among the NaNs when it is NaN), as PyTorch's
    /// `evenly_distribute_backward` on the tensor's device: on the CPU it is
    /// exactly 0 elsewhere (`zeros.masked_fill_(mask, g / count)`); on a
    /// GPU it is `mask * (g / count)`, PyTorch's CUDA branch, so there a NaN
    /// or infinite upstream gradient gives the other elements NaN too.
    ///
    /// ```
    /// use strata_autograd::Var;
    /// use strata_tensor::{Device, Tensor};
    /// let x = Var::parameter(Tensor::from_slice(&[3.0f32, 1.0, 3.0, 2.0], &[4], Device::Cpu)?)?;
    /// x.max()?.backward()?;
    /// assert_eq!(x.grad().unwrap().to_vec::<f32>()?, vec![0.5, 0.0, 0.5, 0.0]);
    /// # Ok::<(), strata_autograd::AutogradError>(())
    /// ```
    pub fn max(&self) -> Result<Var> {
        self.extreme_all(true)
    }

    /// The smallest element, as a 0-d variable (`torch.min(x)`); its
    /// gradient is split evenly among the minima as [`max`](Var::max)'s.
    pub fn min(&self) -> Result<Var> {
        self.extreme_all(false)
    }

    fn extreme_all(&self, max: bool) -> Result<Var> {
        let out = if max {
            self.data().max()?
        } else {
            self.data().min()?
        };
        let (input, result) = (self.data().clone(), out.clone());
        let saved = move || vec![input, result];
        let f = formula(move |g, s, _n| {
            let (x, r) = (&s[0], &s[1]);
            // The mask: isnan(x) when the result is NaN, x == result
            // otherwise (PyTorch's CPU `value.isnan() ? input.isnan() :
            // input == value` and its CUDA `(input == value) | (isnan(input)
            // & isnan(value))` are the same mask); chosen on the device,
            // without reading the result back.
            let mask = Tensor::where_cond(&r.ne(r)?, &x.ne(x)?, &x.eq(r)?)?;
            let share = g.div(&mask.sum(None, false)?)?;
            Ok(vec![Some(if x.device() == Device::Cpu {
                // PyTorch's CPU branch: `zeros.masked_fill_(mask, g / count)`,
                // exactly 0 off the mask whatever `g` is.
                Tensor::where_cond(&mask, &share, 0.0)?
            } else {
                // PyTorch's CUDA branch: `mask * (g / count)`, so a NaN or
                // infinite `g` (a share that is not finite) gives NaN off
                // the mask too (0 * inf).
                share.mul(&mask)?
            })])
        });
        let name = if max { "MaxBackward" } else { "MinBackward" };
        record(name, out, &[Some(self)], saved, f, false)
    }

    /// The largest values along `dim` and their indices (`torch.max(x,
    /// dim, keepdim)`: the first maximum, the first NaN where there is one;
    /// the indices are an i64 tensor without gradient). The indices are
    /// saved; the gradient goes to the returned index only (a scatter into
    /// zeros), as in PyTorch, whatever the ties.
    ///
    /// ```
    /// use strata_autograd::Var;
    /// use strata_tensor::{Device, Tensor};
    /// let x = Var::parameter(Tensor::from_slice(&[1.0f32, 5.0, 5.0, 2.0, 0.0, 2.0], &[2, 3], Device::Cpu)?)?;
    /// let (v, i) = x.max_dim(1, false)?;
    /// assert_eq!(v.data().to_vec::<f32>()?, vec![5.0, 2.0]);
    /// assert_eq!(i.to_vec::<i64>()?, vec![1, 0]);
    /// v.sum(None, false)?.backward()?;
    /// assert_eq!(x.grad().unwrap().to_vec::<f32>()?, vec![0.0, 1.0, 0.0, 1.0, 0.0, 0.0]);
    /// # Ok::<(), strata_autograd::AutogradError>(())
    /// ```
    pub fn max_dim(&self, dim: i64, keepdim: bool) -> Result<(Var, Tensor)> {
        self.extreme_dim(dim, keepdim, true)
    }

    /// The smallest values along `dim` and their indices (`torch.min(x,
    /// dim, keepdim)`); the gradient goes to the returned index only, as
    /// [`max_dim`](Var::max_dim)'s.
    pub fn min_dim(&self, dim: i64, keepdim: bool) -> Result<(Var, Tensor)> {
        self.extreme_dim(dim, keepdim, false)
    }

    fn extreme_dim(&self, dim: i64, keepdim: bool, max: bool) -> Result<(Var, Tensor)> {
        let (values, indices) = if max {
            self.data().max_dim(dim, keepdim)?
        } else {
            self.data().min_dim(dim, keepdim)?
        };
        // Valid: the tensor op accepted it.
        let shape = self.shape().to_vec();
        let dims = reduced_dims("max", Some(&[dim]), shape.len())?;
        let dtype = self.dtype();
        let idx = indices.clone();
        let saved = move || vec![idx];
        let f = formula(move |g, s, _n| {
            if shape.is_empty() {
                return Ok(vec![Some(g.clone())]);
            }
            let d = dims[0] as i64;
            let z = Tensor::zeros(&shape, dtype, g.device())?;
            // One index per slice: a scatter-add into zeros is a scatter.
            let gi = z.scatter_add(d, &kept(&s[0], &dims, keepdim)?, &kept(g, &dims, keepdim)?)?;
            Ok(vec![Some(gi)])
        });
        let name = if max { "MaxBackward1" } else { "MinBackward1" };
        let v = record(name, values, &[Some(self)], saved, f, false)?;
        Ok((v, indices))
    }

    /// The largest element of every slice over `dims` (`torch.amax(x,
    /// dims, keepdim)`; `None` or empty: over every element; NaN where the
    /// slice holds a NaN; a reduced dim of size 0 is an error). The input
    /// and the result are saved; the gradient is PyTorch's
    /// `g / count * mask`, `mask` the elements equal to their slice's
    /// result and `count` their number: split evenly among ties, and NaN
    /// over a whole slice whose result is NaN (no element equals it).
    ///
    /// ```
    /// use strata_autograd::Var;
    /// use strata_tensor::{Device, Tensor};
    /// let x = Var::parameter(Tensor::from_slice(&[1.0f32, 4.0, 4.0, 2.0, 0.0, 2.0], &[2, 3], Device::Cpu)?)?;
    /// x.amax(Some(&[1]), false)?.sum(None, false)?.backward()?;
    /// assert_eq!(x.grad().unwrap().to_vec::<f32>()?, vec![0.0, 0.5, 0.5, 0.5, 0.0, 0.5]);
    /// # Ok::<(), strata_autograd::AutogradError>(())
    /// ```
    pub fn amax(&self, dims: Option<&[i64]>, keepdim: bool) -> Result<Var> {
        self.extreme_over(dims, keepdim, true)
    }

    /// The smallest element of every slice over `dims` (`torch.amin`); the
    /// gradient is split evenly among ties as [`amax`](Var::amax)'s.
    pub fn amin(&self, dims: Option<&[i64]>, keepdim: bool) -> Result<Var> {
        self.extreme_over(dims, keepdim, false)
    }

    fn extreme_over(&self, dims_arg: Option<&[i64]>, keepdim: bool, max: bool) -> Result<Var> {
        let op = if max { "amax" } else { "amin" };
        let shape = self.shape().to_vec();
        let dims = reduced_dims(op, dims_arg, shape.len())?;
        if self.dtype() == DType::Bool {
            return Err(TensorError::DType {
                op,
                msg: "not defined for dtype bool; convert it first (to_dtype(DType::U8))".into(),
            }
            .into());
        }
        let out = if max {
            self.data().amax(dims_arg, keepdim)?
        } else {
            self.data().amin(dims_arg, keepdim)?
        };
        let (input, result) = (self.data().clone(), out.clone());
        let saved = move || vec![input, result];
        let f = formula(move |g, s, _n| {
            let mask = s[0].eq(&expand_back(&s[1], &shape, &dims, keepdim)?)?;
            Ok(vec![Some(split_among(g, &mask, &shape, &dims, keepdim)?)])
        });
        let name = if max { "AmaxBackward" } else { "AminBackward" };
        record(name, out, &[Some(self)], saved, f, false)
    }

    /// The vector `p`-norm over `dims` (`torch.linalg.vector_norm(x, p,
    /// dims, keepdim)`; `None` or empty: over every element): `(sum
    /// |x|^p)^(1/p)`, `max |x|` for `p = inf`, `min |x|` for `p = -inf`,
    /// the number of nonzero elements for `p = 0`. Floating-point inputs
    /// only (f16 and bf16 computed in f32, as PyTorch's; in a CUDA autocast
    /// region its inputs become f32, the `norm` entry of
    /// [`POLICIES`](crate::autocast::POLICIES), and in a CPU region they
    /// keep their dtype, as PyTorch's); a negative or infinite
    /// `p` over zero elements is an error (no identity; `TensorError::Empty`,
    /// the error of max/min over zero elements), as in PyTorch.
    /// Where every reduced dim has size 1 the result is `|x|` (`x != 0` for
    /// `p = 0`) for every `p`, as PyTorch's; a NaN `p` gives NaN over two or
    /// more elements and 0 over none (PyTorch's `(sum |x|^p)^(1/p)` with
    /// C's `pow`), and its gradient is the general formula below (NaN but
    /// where `|x| = 1` over a single element), as PyTorch's.
    ///
    /// The input and the result are saved; the gradient is PyTorch's
    /// `norm_backward`: `g x / norm` for `p = 2`, taken as 0 where the norm
    /// is 0 (not NaN); `g sign(x)` for `p = 1`; none for `p = 0` (the input's
    /// gradient is zero); for `p = +-inf` `g sign(x)` split evenly among the
    /// elements whose `|x|` equals the norm (or is NaN); otherwise
    /// `g sign(x) |x|^(p-1) / norm^(p-1)`, 0 where the norm is 0 for `p > 1`,
    /// and with `|x|^(p-1)` taken as 0 at `x = 0` for `p < 1`.
    ///
    /// ```
    /// use strata_autograd::Var;
    /// use strata_tensor::{Device, Tensor};
    /// let x = Var::parameter(Tensor::from_slice(&[3.0f32, -4.0, 0.0, 0.0], &[2, 2], Device::Cpu)?)?;
    /// let n = x.norm(2.0, Some(&[1]), false)?;
    /// assert_eq!(n.data().to_vec::<f32>()?, vec![5.0, 0.0]);
    /// n.sum(None, false)?.backward()?;
    /// // The row of zeros gets 0, not NaN.
    /// assert_eq!(x.grad().unwrap().to_vec::<f32>()?, vec![0.6, -0.8, 0.0, 0.0]);
    /// # Ok::<(), strata_autograd::AutogradError>(())
    /// ```
    pub fn norm(&self, p: f64, dims: Option<&[i64]>, keepdim: bool) -> Result<Var> {
        const OP: &str = "norm";
        if let Some(c) = crate::autocast::cast_inputs(OP, &[self])? {
            return c[0].norm(p, dims, keepdim);
        }
        float_only(OP, self.data())?;
        let shape = self.shape().to_vec();
        let dims = reduced_dims(OP, dims, shape.len())?;
        let count: usize = dims.iter().map(|&d| shape[d]).product();
        if count == 0 && (p < 0.0 || p.is_infinite()) {
            return Err(TensorError::Empty { op: OP, shape }.into());
        }
        let out = vector_norm(self.data(), p, &dims, keepdim)?;
        let (input, result) = (self.data().clone(), out.clone());
        let saved = move || vec![input, result];
        let f = formula(move |g, s, _n| {
            Ok(vec![norm_backward(
                g, &s[0], &s[1], p, &shape, &dims, keepdim,
            )?])
        });
        record("NormBackward", out, &[Some(self)], saved, f, false)
    }
}

/// `g / count * mask` broadcast to `shape` (PyTorch's `scale_grad_by_count`):
/// `count` the number of true elements of `mask` in each slice over `dims`.
fn split_among(
    g: &Tensor,
    mask: &Tensor,
    shape: &[usize],
    dims: &[usize],
    keepdim: bool,
) -> Result<Tensor> {
    let g = expand_back(g, shape, dims, keepdim)?;
    let d: Vec<i64> = dims.iter().map(|&d| d as i64).collect();
    // A 0-d input: no dim is reduced, the mask is its own count.
    let count = if d.is_empty() {
        mask.to_dtype_contiguous(DType::I64)?
    } else {
        mask.sum(Some(&d), true)?
    };
    Ok(g.div(&count)?.mul(mask)?)
}

/// The forward value of [`Var::norm`] (`dims` sorted and valid):
/// `torch.linalg.vector_norm(x, p, dims, keepdim)`, strata-tensor's
/// [`Tensor::vector_norm`], also the norms of
/// [`ClipGradNorm`](crate::ClipGradNorm). Over zero elements a finite
/// negative order gives `0^(1/p) = inf` here (what `ClipGradNorm` takes of an
/// empty gradient) where the tensor op refuses it; `Var::norm` refuses it
/// before calling.
pub(crate) fn vector_norm(x: &Tensor, p: f64, dims: &[usize], keepdim: bool) -> Result<Tensor> {
    let d: Vec<i64> = dims.iter().map(|&d| d as i64).collect();
    let count: usize = dims.iter().map(|&i| x.shape()[i]).product();
    if count == 0 && p < 0.0 && p.is_finite() {
        let zero = x.abs()?.sum(Some(&d), keepdim)?;
        return Ok(zero.pow(1.0 / p)?);
    }
    Ok(x.vector_norm(p, Some(&d), keepdim)?)
}

/// PyTorch's `norm_backward` (`x` the input, `n` the norm).
fn norm_backward(
    g: &Tensor,
    x: &Tensor,
    n: &Tensor,
    p: f64,
    shape: &[usize],
    dims: &[usize],
    keepdim: bool,
) -> Result<Option<Tensor>> {
    if p == 0.0 {
        return Ok(None);
    }
    let gk = kept(g, dims, keepdim)?;
    let nk = kept(n, dims, keepdim)?;
    let nz = nk.eq(0.0)?;
    let gi = if p == 1.0 {
        x.sign()?.mul(&gk)?
    } else if p == 2.0 {
        let r = Tensor::where_cond(&nz, 0.0, &x.div(&nk)?)?;
        gk.mul(&r)?
    } else if p.is_infinite() {
        let a = x.abs()?;
        // |x| == norm, or |x| NaN.
        let nan = a.ne(&a)?;
        let mask = Tensor::where_cond(&nan, &nan, &a.eq(&nk)?)?;
        x.sign()?
            .mul(&split_among(g, &mask, shape, dims, keepdim)?)?
    } else if p < 1.0 {
        let scaled = Tensor::where_cond(&x.eq(0.0)?, 0.0, &x.abs()?.pow(p - 1.0)?)?;
        x.sign()?.mul(&scaled)?.mul(&gk)?.mul(&nk.pow(1.0 - p)?)?
    } else {
        let scaled = if p < 2.0 {
            x.sign()?.mul(&x.abs()?.pow(p - 1.0)?)?
        } else {
            x.mul(&x.abs()?.pow(p - 2.0)?)?
        };
        let v = Tensor::where_cond(&nz, 0.0, &gk.div(&nk.pow(p - 1.0)?)?)?;
        scaled.mul(&v)?
    };
    Ok(Some(
        gi.broadcast_to(shape)?.to_dtype_contiguous(x.dtype())?,
    ))
}
