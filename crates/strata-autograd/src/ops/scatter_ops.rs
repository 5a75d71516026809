//! Gradients of session 60's scans and index/scatter family
//! (`strata_tensor::ops::scatter_ops`), PyTorch 2.15's formulas
//! (`FunctionsManual.cpp`, first order):
//!
//! * `cumprod`: `reversed_cumsum(y * g) / x` without zeros in the input;
//!   with zeros, PyTorch's O(n) masks (positions before the first zero of
//!   a line as above, the first zero from the products around it, 0 after).
//! * `cummax`/`cummin`: the gradient scatter-added to the returned indices.
//! * `logcumsumexp`: PyTorch's split of the gradient into its positive and
//!   negative parts, each through a reversed logcumsumexp.
//! * `index_add`: self gets `g`, source `alpha * g.index_select(dim, index)`;
//!   `index_copy`: self gets `g` with the copied slices zeroed, source the
//!   selected slices; `index_fill`: `g` with the filled slices zeroed.
//! * `scatter`/`scatter_value`: self gets `g` zeroed where written, src
//!   `g.gather(dim, index)`; `scatter_reduce`: PyTorch's
//!   `scatter_reduce_backward` per reduction (including its `amax`/`amin`
//!   count, which also counts self's equal elements when `include_self` is
//!   false).
//! * `index_put`: self gets `g` (zeroed at the written positions unless
//!   accumulating), the values `g[indices]` summed to their shape;
//!   `index_tensors` (`self[indices]`) accumulates `g` back with
//!   `index_put`.

use super::{formula, sum_to};
use crate::error::Result;
use crate::var::{record, would_record, Var};
use strata_tensor::{DType, Scalar, ScatterReduce, Tensor};

/// `dim` of a tensor of `nd` dims, counted from the front (a 0-d tensor
/// takes 0 and -1).
fn wrap(dim: i64, nd: usize) -> i64 {
    if dim < 0 {
        dim + nd.max(1) as i64
    } else {
        dim
    }
}

/// `t` reversed along `d` (an index_select of n-1, ..., 0).
fn flip(t: &Tensor, d: i64) -> Result<Tensor> {
    let n = t.shape()[d as usize] as i64;
    let rev = Tensor::arange(n - 1, -1i64, -1i64, Some(DType::I64), t.device())?;
    Ok(t.index_select(d, &rev)?)
}

/// PyTorch's `reversed_cumsum(w, dim)`: `w.flip(dim).cumsum(dim).flip(dim)`
/// computed as `sum - cumsum + w`.
fn reversed_cumsum(w: &Tensor, d: i64) -> Result<Tensor> {
    let cs = w.cumsum(d, None)?;
    let n = w.shape()[d as usize] as i64;
    let total = cs.narrow(d, n - 1, 1)?;
    Ok(total.sub(&cs)?.add(w)?)
}

/// PyTorch's `cumprod_backward` (first order) for the float `x` and its
/// result `y`.
fn cumprod_backward(g: &Tensor, x: &Tensor, y: &Tensor, dim: i64) -> Result<Tensor> {
    if x.numel() <= 1 || x.ndim() == 0 {
        return Ok(g.clone());
    }
    let d = wrap(dim, x.ndim());
    if x.shape()[d as usize] == 1 {
        return Ok(g.clone());
    }
    let w = y.mul(g)?;
    let is_zero = x.eq(0)?;
    if !is_zero.any()?.item::<bool>()? {
        return Ok(reversed_cumsum(&w, d)?.div(x)?);
    }
    let zero = Tensor::zeros(&[], g.dtype(), g.device())?;
    let cs = is_zero.cumsum(d, None)?;
    // Before the first zero: the formula without zeros on those elements.
    let before = cs.eq(0)?;
    let part = reversed_cumsum(&w.masked_fill(&not(&before)?, 0)?, d)?.div(x)?;
    let grad = Tensor::where_cond(&before, &part, &zero)?;
    // The first zero: prod(x[..z1]) * (g[z1] + sum_{z1 < j < z2} g[j] *
    // prod(x[z1+1..=j])).
    let upto2 = cs.eq(1)?;
    let first = upto2.to_dtype(DType::U8)?.max_dim(d, true)?.1;
    let first_mask =
        Tensor::zeros(x.shape(), DType::Bool, x.device())?.scatter_value(d, &first, true)?;
    let first_mask = and(&first_mask, &upto2)?;
    let between = and(&upto2, &not(&first_mask)?)?;
    let prods = x.masked_fill(&not(&between)?, 1)?.cumprod(d, None)?;
    let inner = prods
        .mul(&g.masked_fill(&cs.ne(1)?, 0)?)?
        .sum(Some(&[d]), true)?;
    let before_first = y
        .gather(
            d,
            &first.sub(1)?.clamp(Some(Scalar::Int(0)), None::<Scalar>)?,
        )?
        .masked_fill(&first.eq(0)?, 1)?;
    let at_first = inner.mul(&before_first)?;
    Ok(Tensor::where_cond(&first_mask, &at_first, &grad)?)
}

/// PyTorch's `logcumsumexp_backward` for a real `x` and result `y`.
fn logcumsumexp_backward(g: &Tensor, x: &Tensor, y: &Tensor, dim: i64) -> Result<Tensor> {
    if g.ndim() == 0 || g.numel() == 0 {
        return Ok(g.clone());
    }
    let d = wrap(dim, x.ndim());
    let lowest = match g.dtype() {
        DType::F64 => f64::MIN,
        DType::F16 => -65504.0,
        DType::BF16 => -3.3895313892515355e38,
        _ => f32::MIN as f64,
    };
    let low = Tensor::scalar(lowest, g.dtype(), g.device())?;
    let log_abs = g.abs()?.log()?;
    let pos = Tensor::where_cond(&g.gt(0)?, &log_abs, &low)?;
    let neg = Tensor::where_cond(&g.lt(0)?, &log_abs, &low)?;
    let rev_lcse = |t: &Tensor| -> Result<Tensor> { flip(&flip(t, d)?.logcumsumexp(d)?, d) };
    let out_pos = rev_lcse(&pos.sub(y)?)?.add(x)?.exp()?;
    let out_neg = rev_lcse(&neg.sub(y)?)?.add(x)?.exp()?;
    Ok(out_pos.sub(&out_neg)?)
}

/// `part` (a gradient of `index`'s shape) placed into zeros of `shape`
/// (src positions beyond index's extent get none). An empty index, which
/// PyTorch does not hold to src's shape (it may be larger on a dim, or of
/// another rank), gives none at all.
pub(super) fn pad_to(part: &Tensor, shape: &[usize]) -> Result<Tensor> {
    if part.shape() == shape {
        return Ok(part.clone());
    }
    let z = Tensor::zeros(shape, part.dtype(), part.device())?;
    if part.numel() == 0 {
        return Ok(z);
    }
    let mut view = z.clone();
    for (d, &n) in part.shape().iter().enumerate() {
        view = view.narrow(d as i64, 0, n as i64)?;
    }
    view.copy_(part)?;
    Ok(z)
}

/// Logical not of a bool tensor.
fn not(m: &Tensor) -> Result<Tensor> {
    Ok(m.eq(0)?)
}

/// Logical and of two bool tensors.
fn and(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    let no = Tensor::scalar(false, DType::Bool, a.device())?;
    Ok(Tensor::where_cond(a, b, &no)?)
}

impl Var {
    /// `torch.cumprod(self, dim, dtype)` with PyTorch's gradient (zeros in
    /// the input included). An integer `dtype` is refused when the op would
    /// be recorded, as for [`cumsum`](Var::cumsum).
    ///
    /// ```
    /// use strata_autograd::Var;
    /// use strata_tensor::{Device, Tensor};
    /// let p = |v: &[f64]| Var::parameter(Tensor::from_slice(v, &[v.len()], Device::Cpu).unwrap()).unwrap();
    /// let i = |v: &[i64]| Tensor::from_slice(v, &[v.len()], Device::Cpu).unwrap();
    /// let g = |v: &Var| v.grad().unwrap().to_vec::<f64>().unwrap();
    /// let x = p(&[2.0, 3.0]);
    /// x.cumprod(0, None).unwrap().sum(None, false).unwrap().backward().unwrap();
    /// assert_eq!(g(&x), vec![4.0, 2.0]);
    /// ```
    pub fn cumprod(&self, dim: i64, dtype: Option<DType>) -> Result<Var> {
        if let Some(d) = dtype.filter(|d| !d.is_float() && would_record(&[Some(self)])) {
            return Err(strata_tensor::TensorError::DType {
                op: "cumprod",
                msg: format!(
                    "autograd does not support the {d} dtype of the result; pass a float dtype, \
                     or detach the variable (or use no_grad)"
                ),
            }
            .into());
        }
        let out = self.data().cumprod(dim, dtype)?;
        let x = self.data().clone();
        let y = out.clone();
        let in_dtype = self.dtype();
        let saved = move || vec![x, y];
        let f = formula(move |g, s, _n| {
            let x = s[0].to_dtype(g.dtype())?;
            let gi = cumprod_backward(g, &x, &s[1], dim)?;
            Ok(vec![Some(gi.to_dtype_contiguous(in_dtype)?)])
        });
        record("CumprodBackward", out, &[Some(self)], saved, f, false)
    }

    /// `torch.cummax(self, dim)`: the values (recorded) and the i64 indices;
    /// the gradient goes to the returned indices.
    ///
    /// ```
    /// use strata_autograd::Var;
    /// use strata_tensor::{Device, Tensor};
    /// let p = |v: &[f64]| Var::parameter(Tensor::from_slice(v, &[v.len()], Device::Cpu).unwrap()).unwrap();
    /// let i = |v: &[i64]| Tensor::from_slice(v, &[v.len()], Device::Cpu).unwrap();
    /// let g = |v: &Var| v.grad().unwrap().to_vec::<f64>().unwrap();
    /// let x = p(&[1.0, 3.0, 2.0]);
    /// x.cummax(0).unwrap().0.sum(None, false).unwrap().backward().unwrap();
    /// assert_eq!(g(&x), vec![1.0, 2.0, 0.0]);
    /// ```
    pub fn cummax(&self, dim: i64) -> Result<(Var, Tensor)> {
        self.cum_extremum(dim, true)
    }

    /// `torch.cummin(self, dim)`, as [`cummax`](Var::cummax).
    ///
    /// ```
    /// use strata_autograd::Var;
    /// use strata_tensor::{Device, Tensor};
    /// let p = |v: &[f64]| Var::parameter(Tensor::from_slice(v, &[v.len()], Device::Cpu).unwrap()).unwrap();
    /// let i = |v: &[i64]| Tensor::from_slice(v, &[v.len()], Device::Cpu).unwrap();
    /// let g = |v: &Var| v.grad().unwrap().to_vec::<f64>().unwrap();
    /// let x = p(&[3.0, 1.0, 2.0]);
    /// x.cummin(0).unwrap().0.sum(None, false).unwrap().backward().unwrap();
    /// assert_eq!(g(&x), vec![1.0, 2.0, 0.0]);
    /// ```
    pub fn cummin(&self, dim: i64) -> Result<(Var, Tensor)> {
        self.cum_extremum(dim, false)
    }

    fn cum_extremum(&self, dim: i64, max: bool) -> Result<(Var, Tensor)> {
        let (values, indices) = if max {
            self.data().cummax(dim)?
        } else {
            self.data().cummin(dim)?
        };
        let (shape, dtype) = (self.shape().to_vec(), self.dtype());
        let idx = indices.clone();
        let saved = move || vec![idx];
        let f = formula(move |g, s, _n| {
            let z = Tensor::zeros(&shape, dtype, g.device())?;
            if z.numel() == 0 {
                return Ok(vec![Some(z)]);
            }
            Ok(vec![Some(z.scatter_add(dim, &s[0], g)?)])
        });
        let name = if max {
            "CummaxBackward"
        } else {
            "CumminBackward"
        };
        Ok((
            record(name, values, &[Some(self)], saved, f, false)?,
            indices,
        ))
    }

    /// `torch.logcumsumexp(self, dim)` with PyTorch's gradient.
    ///
    /// ```
    /// use strata_autograd::Var;
    /// use strata_tensor::{Device, Tensor};
    /// let p = |v: &[f64]| Var::parameter(Tensor::from_slice(v, &[v.len()], Device::Cpu).unwrap()).unwrap();
    /// let i = |v: &[i64]| Tensor::from_slice(v, &[v.len()], Device::Cpu).unwrap();
    /// let g = |v: &Var| v.grad().unwrap().to_vec::<f64>().unwrap();
    /// let x = p(&[0.0, 0.0]);
    /// x.logcumsumexp(0).unwrap().sum(None, false).unwrap().backward().unwrap();
    /// let d = g(&x);
    /// assert!((d[0] - 1.5).abs() < 1e-12 && (d[1] - 0.5).abs() < 1e-12);
    /// ```
    pub fn logcumsumexp(&self, dim: i64) -> Result<Var> {
        let out = self.data().logcumsumexp(dim)?;
        let (x, y) = (self.data().clone(), out.clone());
        let saved = move || vec![x, y];
        let f =
            formula(move |g, s, _n| Ok(vec![Some(logcumsumexp_backward(g, &s[0], &s[1], dim)?)]));
        record("LogcumsumexpBackward", out, &[Some(self)], saved, f, false)
    }

    /// `torch.index_add(self, dim, index, source, alpha)`: self's gradient
    /// is the upstream gradient, source's `alpha * g.index_select(dim,
    /// index)`.
    ///
    /// ```
    /// use strata_autograd::Var;
    /// use strata_tensor::{Device, Tensor};
    /// let p = |v: &[f64]| Var::parameter(Tensor::from_slice(v, &[v.len()], Device::Cpu).unwrap()).unwrap();
    /// let i = |v: &[i64]| Tensor::from_slice(v, &[v.len()], Device::Cpu).unwrap();
    /// let g = |v: &Var| v.grad().unwrap().to_vec::<f64>().unwrap();
    /// let (x, s) = (p(&[0.0, 0.0, 0.0]), p(&[1.0, 2.0]));
    /// let y = x.index_add(0, &i(&[0, 0]), &s, 2.0).unwrap();
    /// y.sum(None, false).unwrap().backward().unwrap();
    /// assert_eq!((g(&x), g(&s)), (vec![1.0; 3], vec![2.0, 2.0]));
    /// ```
    pub fn index_add(
        &self,
        dim: i64,
        index: &Tensor,
        source: &Var,
        alpha: impl Into<Scalar>,
    ) -> Result<Var> {
        let alpha = alpha.into();
        let out = self.data().index_add(dim, index, source.data(), alpha)?;
        let src_shape = source.shape().to_vec();
        let idx = index.clone();
        let saved = move || vec![idx];
        let f = formula(move |g, s, needs| {
            let gs = if needs[1] {
                let d = wrap(dim, g.ndim());
                let sel = if g.ndim() == 0 {
                    g.clone()
                } else {
                    g.index_select(d, &s[0].reshape(&[-1])?)?
                };
                let sel = sel.reshape(&src_shape.iter().map(|&x| x as i64).collect::<Vec<_>>())?;
                let one = Scalar::Int(1).cast_to(g.dtype());
                Some(if alpha.cast_to(g.dtype()) == one {
                    sel
                } else {
                    sel.mul(&Tensor::scalar(alpha, g.dtype(), g.device())?)?
                })
            } else {
                None
            };
            Ok(vec![needs[0].then(|| g.clone()), gs])
        });
        record(
            "IndexAddBackward",
            out,
            &[Some(self), Some(source)],
            saved,
            f,
            false,
        )
    }

    /// `torch.index_copy(self, dim, index, source)`: self's gradient is the
    /// upstream gradient with the copied slices zeroed, source's the
    /// selected slices.
    ///
    /// ```
    /// use strata_autograd::Var;
    /// use strata_tensor::{Device, Tensor};
    /// let p = |v: &[f64]| Var::parameter(Tensor::from_slice(v, &[v.len()], Device::Cpu).unwrap()).unwrap();
    /// let i = |v: &[i64]| Tensor::from_slice(v, &[v.len()], Device::Cpu).unwrap();
    /// let g = |v: &Var| v.grad().unwrap().to_vec::<f64>().unwrap();
    /// let (x, s) = (p(&[0.0, 0.0, 0.0]), p(&[5.0]));
    /// let y = x.index_copy(0, &i(&[1]), &s).unwrap();
    /// y.sum(None, false).unwrap().backward().unwrap();
    /// assert_eq!((g(&x), g(&s)), (vec![1.0, 0.0, 1.0], vec![1.0]));
    /// ```
    pub fn index_copy(&self, dim: i64, index: &Tensor, source: &Var) -> Result<Var> {
        let out = self.data().index_copy(dim, index, source.data())?;
        let src_shape = source.shape().to_vec();
        let idx = index.clone();
        let saved = move || vec![idx];
        let f = formula(move |g, s, needs| {
            let gself = if needs[0] {
                Some(g.index_fill(dim, &s[0], 0)?)
            } else {
                None
            };
            let gs = if needs[1] {
                let sel = if g.ndim() == 0 {
                    g.clone()
                } else {
                    g.index_select(wrap(dim, g.ndim()), &s[0].reshape(&[-1])?)?
                };
                Some(sel.reshape(&src_shape.iter().map(|&x| x as i64).collect::<Vec<_>>())?)
            } else {
                None
            };
            Ok(vec![gself, gs])
        });
        record(
            "IndexCopyBackward",
            out,
            &[Some(self), Some(source)],
            saved,
            f,
            false,
        )
    }

    /// `torch.index_fill(self, dim, index, value)`: the gradient is zero
    /// on the filled slices.
    ///
    /// ```
    /// use strata_autograd::Var;
    /// use strata_tensor::{Device, Tensor};
    /// let p = |v: &[f64]| Var::parameter(Tensor::from_slice(v, &[v.len()], Device::Cpu).unwrap()).unwrap();
    /// let i = |v: &[i64]| Tensor::from_slice(v, &[v.len()], Device::Cpu).unwrap();
    /// let g = |v: &Var| v.grad().unwrap().to_vec::<f64>().unwrap();
    /// let x = p(&[1.0, 2.0, 3.0]);
    /// x.index_fill(0, &i(&[1]), 0.5).unwrap().sum(None, false).unwrap().backward().unwrap();
    /// assert_eq!(g(&x), vec![1.0, 0.0, 1.0]);
    /// ```
    pub fn index_fill(&self, dim: i64, index: &Tensor, value: impl Into<Scalar>) -> Result<Var> {
        let out = self.data().index_fill(dim, index, value)?;
        let idx = index.clone();
        let saved = move || vec![idx];
        let f = formula(move |g, s, _n| Ok(vec![Some(g.index_fill(dim, &s[0], 0)?)]));
        record("IndexFillBackward", out, &[Some(self)], saved, f, false)
    }

    /// `torch.scatter(self, dim, index, src)`: self's gradient is zero
    /// where written, src's `g.gather(dim, index)`.
    ///
    /// ```
    /// use strata_autograd::Var;
    /// use strata_tensor::{Device, Tensor};
    /// let p = |v: &[f64]| Var::parameter(Tensor::from_slice(v, &[v.len()], Device::Cpu).unwrap()).unwrap();
    /// let i = |v: &[i64]| Tensor::from_slice(v, &[v.len()], Device::Cpu).unwrap();
    /// let g = |v: &Var| v.grad().unwrap().to_vec::<f64>().unwrap();
    /// let (x, s) = (p(&[0.0, 0.0, 0.0]), p(&[4.0]));
    /// let y = x.scatter(0, &i(&[2]), &s).unwrap();
    /// y.sum(None, false).unwrap().backward().unwrap();
    /// assert_eq!((g(&x), g(&s)), (vec![1.0, 1.0, 0.0], vec![1.0]));
    /// ```
    pub fn scatter(&self, dim: i64, index: &Tensor, src: &Var) -> Result<Var> {
        let out = self.data().scatter(dim, index, src.data())?;
        let src_shape = src.shape().to_vec();
        let idx = index.clone();
        let saved = move || vec![idx];
        let f = formula(move |g, s, needs| {
            let gself = if needs[0] {
                Some(g.scatter_value(dim, &s[0], 0)?)
            } else {
                None
            };
            let gs = if needs[1] {
                Some(pad_to(&g.gather(dim, &s[0])?, &src_shape)?)
            } else {
                None
            };
            Ok(vec![gself, gs])
        });
        record(
            "ScatterBackward",
            out,
            &[Some(self), Some(src)],
            saved,
            f,
            false,
        )
    }

    /// `torch.scatter(self, dim, index, value)`: the gradient is zero where
    /// written.
    ///
    /// ```
    /// use strata_autograd::Var;
    /// use strata_tensor::{Device, Tensor};
    /// let p = |v: &[f64]| Var::parameter(Tensor::from_slice(v, &[v.len()], Device::Cpu).unwrap()).unwrap();
    /// let i = |v: &[i64]| Tensor::from_slice(v, &[v.len()], Device::Cpu).unwrap();
    /// let g = |v: &Var| v.grad().unwrap().to_vec::<f64>().unwrap();
    /// let x = p(&[1.0, 2.0, 3.0]);
    /// x.scatter_value(0, &i(&[2]), 0.0).unwrap().sum(None, false).unwrap().backward().unwrap();
    /// assert_eq!(g(&x), vec![1.0, 1.0, 0.0]);
    /// ```
    pub fn scatter_value(&self, dim: i64, index: &Tensor, value: impl Into<Scalar>) -> Result<Var> {
        let out = self.data().scatter_value(dim, index, value)?;
        let idx = index.clone();
        let saved = move || vec![idx];
        let f = formula(move |g, s, _n| Ok(vec![Some(g.scatter_value(dim, &s[0], 0)?)]));
        record("ScatterValueBackward", out, &[Some(self)], saved, f, false)
    }

    /// `torch.scatter_reduce(self, dim, index, src, reduce, include_self)`
    /// with PyTorch 2.15's `scatter_reduce_backward`.
    ///
    /// ```
    /// use strata_autograd::Var;
    /// use strata_tensor::{Device, Tensor};
    /// let p = |v: &[f64]| Var::parameter(Tensor::from_slice(v, &[v.len()], Device::Cpu).unwrap()).unwrap();
    /// let i = |v: &[i64]| Tensor::from_slice(v, &[v.len()], Device::Cpu).unwrap();
    /// let g = |v: &Var| v.grad().unwrap().to_vec::<f64>().unwrap();
    /// use strata_tensor::ScatterReduce;
    /// let (x, s) = (p(&[1.0, 1.0]), p(&[2.0, 3.0, 4.0]));
    /// let y = x.scatter_reduce(0, &i(&[0, 0, 1]), &s, ScatterReduce::Prod, true).unwrap();
    /// y.sum(None, false).unwrap().backward().unwrap();
    /// assert_eq!((g(&x), g(&s)), (vec![6.0, 4.0], vec![3.0, 2.0, 1.0]));
    /// ```
    pub fn scatter_reduce(
        &self,
        dim: i64,
        index: &Tensor,
        src: &Var,
        reduce: ScatterReduce,
        include_self: bool,
    ) -> Result<Var> {
        let out = self
            .data()
            .scatter_reduce(dim, index, src.data(), reduce, include_self)?;
        let saved_t = vec![
            index.clone(),
            self.data().clone(),
            src.data().clone(),
            out.clone(),
        ];
        let saved = move || saved_t;
        let f = formula(move |g, s, needs| {
            let (index, x, src, result) = (&s[0], &s[1], &s[2], &s[3]);
            let (gself, gsrc) =
                scatter_reduce_backward(g, x, dim, index, src, reduce, include_self, result)?;
            Ok(vec![
                needs[0].then_some(gself),
                if needs[1] {
                    Some(pad_to(&gsrc, src.shape())?)
                } else {
                    None
                },
            ])
        });
        record(
            "ScatterReduceBackward",
            out,
            &[Some(self), Some(src)],
            saved,
            f,
            false,
        )
    }

    /// `torch.index_put(self, indices, values, accumulate)`: self's gradient
    /// is the upstream gradient (zeroed at the written positions unless
    /// accumulating), the values' `g[indices]` summed to their shape.
    ///
    /// ```
    /// use strata_autograd::Var;
    /// use strata_tensor::{Device, Tensor};
    /// let p = |v: &[f64]| Var::parameter(Tensor::from_slice(v, &[v.len()], Device::Cpu).unwrap()).unwrap();
    /// let i = |v: &[i64]| Tensor::from_slice(v, &[v.len()], Device::Cpu).unwrap();
    /// let g = |v: &Var| v.grad().unwrap().to_vec::<f64>().unwrap();
    /// let (x, v) = (p(&[0.0, 0.0, 0.0]), p(&[1.0, 2.0]));
    /// let y = x.index_put(&[Some(&i(&[0, 0]))], &v, true).unwrap();
    /// y.sum(None, false).unwrap().backward().unwrap();
    /// assert_eq!((g(&x), g(&v)), (vec![1.0; 3], vec![1.0, 1.0]));
    /// ```
    pub fn index_put(
        &self,
        indices: &[Option<&Tensor>],
        values: &Var,
        accumulate: bool,
    ) -> Result<Var> {
        let out = self.data().index_put(indices, values.data(), accumulate)?;
        let idx: Vec<Option<Tensor>> = indices.iter().map(|i| i.cloned()).collect();
        let (vshape, vdtype) = (values.shape().to_vec(), values.dtype());
        let f = formula(move |g, _s, needs| {
            let refs: Vec<Option<&Tensor>> = idx.iter().map(|i| i.as_ref()).collect();
            let gself = if !needs[0] {
                None
            } else if accumulate {
                Some(g.clone())
            } else {
                let z = Tensor::zeros(&[], g.dtype(), g.device())?;
                Some(g.index_put(&refs, &z, false)?)
            };
            let gv = if needs[1] {
                Some(sum_to(&g.index_tensors(&refs)?, &vshape, vdtype)?)
            } else {
                None
            };
            Ok(vec![gself, gv])
        });
        record(
            "IndexPutBackward",
            out,
            &[Some(self), Some(values)],
            Vec::new,
            f,
            false,
        )
    }

    /// `self[indices]` with advanced indexing ([`Tensor::index_tensors`]);
    /// the gradient accumulates back with `index_put`.
    ///
    /// ```
    /// use strata_autograd::Var;
    /// use strata_tensor::{Device, Tensor};
    /// let p = |v: &[f64]| Var::parameter(Tensor::from_slice(v, &[v.len()], Device::Cpu).unwrap()).unwrap();
    /// let i = |v: &[i64]| Tensor::from_slice(v, &[v.len()], Device::Cpu).unwrap();
    /// let g = |v: &Var| v.grad().unwrap().to_vec::<f64>().unwrap();
    /// let x = p(&[1.0, 2.0, 3.0]);
    /// x.index_tensors(&[Some(&i(&[2, 2]))]).unwrap().sum(None, false).unwrap().backward().unwrap();
    /// assert_eq!(g(&x), vec![0.0, 0.0, 2.0]);
    /// ```
    pub fn index_tensors(&self, indices: &[Option<&Tensor>]) -> Result<Var> {
        let out = self.data().index_tensors(indices)?;
        let idx: Vec<Option<Tensor>> = indices.iter().map(|i| i.cloned()).collect();
        let (shape, dtype) = (self.shape().to_vec(), self.dtype());
        let f = formula(move |g, _s, _n| {
            let refs: Vec<Option<&Tensor>> = idx.iter().map(|i| i.as_ref()).collect();
            let z = Tensor::zeros(&shape, dtype, g.device())?;
            Ok(vec![Some(z.index_put(&refs, g, true)?)])
        });
        record("IndexBackward", out, &[Some(self)], Vec::new, f, false)
    }
}

/// PyTorch 2.15's `scatter_reduce_backward` (first order).
#[allow(clippy::too_many_arguments)]
fn scatter_reduce_backward(
    g: &Tensor,
    x: &Tensor,
    dim: i64,
    index: &Tensor,
    src: &Tensor,
    reduce: ScatterReduce,
    include_self: bool,
    result: &Tensor,
) -> Result<(Tensor, Tensor)> {
    let dt = g.dtype();
    let (mut gself, gsrc) = match reduce {
        ScatterReduce::Sum => (g.clone(), g.gather(dim, index)?),
        ScatterReduce::Prod => {
            // Self: g * result / self, with self's zeros replaced by 1 in
            // both (the result recomputed from that self).
            let masked_self = x.masked_fill(&x.eq(0)?, 1)?;
            let masked_result =
                masked_self.scatter_reduce(dim, index, src, ScatterReduce::Prod, include_self)?;
            let gself = g.mul(&masked_result)?.div(&masked_self)?;
            // Src: a single zero among those scattered to a position gets
            // the product of the others; two or more zeros give 0.
            let src_zero = src.eq(0)?;
            let zeros = Tensor::zeros(x.shape(), dt, x.device())?
                .scatter_add(dim, index, &src_zero.to_dtype(dt)?)?
                .gather(dim, index)?;
            let single = and(&src_zero, &zeros.eq(1)?)?;
            let masked_src = src.masked_fill(&single, 1)?;
            let masked_src_result =
                x.scatter_reduce(dim, index, &masked_src, ScatterReduce::Prod, include_self)?;
            let a = g.mul(&masked_src_result)?.gather(dim, index)?;
            let b = g
                .mul(result)?
                .gather(dim, index)?
                .div(&src.masked_fill(&src_zero, 1)?)?;
            (gself, Tensor::where_cond(&single, &a, &b)?)
        }
        ScatterReduce::Mean => {
            let n = if include_self {
                Tensor::ones(g.shape(), dt, g.device())?
            } else {
                Tensor::zeros(g.shape(), dt, g.device())?
            };
            let n = n.scatter_add(dim, index, &Tensor::ones(src.shape(), dt, src.device())?)?;
            let n = n.masked_fill(&n.eq(0)?, 1)?;
            let gself = g.div(&n)?;
            let gsrc = gself.gather(dim, index)?;
            (gself, gsrc)
        }
        ScatterReduce::Amax | ScatterReduce::Amin => {
            let value = result.gather(dim, index)?;
            let self_is = x.eq(result)?;
            let src_is = src.eq(&value)?;
            let n = self_is
                .to_dtype(dt)?
                .scatter_add(dim, index, &src_is.to_dtype(dt)?)?;
            let spread = g.div(&n)?;
            let gself = self_is.to_dtype(dt)?.mul(&spread)?;
            let gsrc = src_is.to_dtype(dt)?.mul(&spread.gather(dim, index)?)?;
            (gself, gsrc)
        }
    };
    if !include_self {
        gself = gself.scatter_value(dim, index, 0)?;
    }
    Ok((gself, gsrc))
}
