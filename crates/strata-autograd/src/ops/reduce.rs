//! Reductions: sum, mean, var, std and logsumexp over dims (all when `None`),
//! with `keepdim`; prod along a dim (composed from cumprod).
//! Their backward broadcasts the gradient back over the reduced dims.

use super::{expand_back, formula};
use crate::error::Result;
use crate::var::{record, Var};
use strata_tensor::Tensor;

/// The reduced dims (normalised, sorted) of a reduction of `ndim` dims.
fn reduced(dims: Option<&[i64]>, ndim: usize) -> Vec<usize> {
    match dims {
        // A 0-d tensor accepts dim 0 / -1 but has no dim to reduce.
        _ if ndim == 0 => Vec::new(),
        Some(ds) if !ds.is_empty() => {
            let mut v: Vec<usize> = ds
                .iter()
                .map(|&d| if d < 0 { d + ndim as i64 } else { d } as usize)
                .collect();
            v.sort_unstable();
            v.dedup();
            v
        }
        _ => (0..ndim).collect(),
    }
}

impl Var {
    /// `torch.prod` along `dim` (all elements when `None`), as
    /// [`Tensor::prod`], with PyTorch's `prod_backward`: where the input
    /// holds no zero at all, `g * prod / x`; else, along a dim, `g` times
    /// the product of the other elements of each slice (exclusive running
    /// products from both ends), and over all elements that with one zero
    /// and zeros with more. So an infinite element gives NaN where PyTorch
    /// gives NaN.
    ///
    /// ```
    /// use strata_autograd::Var;
    /// use strata_tensor::tensor;
    /// let x = Var::parameter(tensor![[2., 3.], [0., 5.]]?)?;
    /// x.prod(Some(1), false)?.sum(None, false)?.backward()?;
    /// assert_eq!(x.grad().unwrap().to_vec::<f32>()?, [3., 2., 5., 0.]);
    /// # Ok::<(), strata_autograd::AutogradError>(())
    /// ```
    pub fn prod(&self, dim: Option<i64>, keepdim: bool) -> Result<Var> {
        let out = self.data().prod(dim, keepdim)?;
        let (x, r) = (self.data().clone(), out.clone());
        let saved = move || vec![x, r];
        let f = formula(move |g, s, _n| {
            let (x, r) = (&s[0], &s[1]);
            Ok(vec![Some(prod_backward(g, x, r, dim, keepdim)?)])
        });
        record("ProdBackward", out, &[Some(self)], saved, f, false)
    }

    /// Sum over `dims` (all when `None` or empty).
    pub fn sum(&self, dims: Option<&[i64]>, keepdim: bool) -> Result<Var> {
        if let Some(c) = crate::autocast::cast_inputs("sum", &[self])? {
            return c[0].sum(dims, keepdim);
        }
        // The tensor op validates the dims; by then they are in range.
        let out = self.data().sum(dims, keepdim)?;
        let shape = self.shape().to_vec();
        let dims = reduced(dims, shape.len());
        let f = formula(move |g, _s, _n| Ok(vec![Some(expand_back(g, &shape, &dims, keepdim)?)]));
        record("SumBackward", out, &[Some(self)], Vec::new, f, false)
    }

    /// Mean over `dims` (all when `None` or empty).
    pub fn mean(&self, dims: Option<&[i64]>, keepdim: bool) -> Result<Var> {
        if let Some(c) = crate::autocast::cast_inputs("mean", &[self])? {
            return c[0].mean(dims, keepdim);
        }
        let out = self.data().mean(dims, keepdim)?;
        let shape = self.shape().to_vec();
        let dims = reduced(dims, shape.len());
        let count: usize = dims.iter().map(|&d| shape[d]).product();
        let f = formula(move |g, _s, _n| {
            let g = g.div(count as f64)?;
            Ok(vec![Some(expand_back(&g, &shape, &dims, keepdim)?)])
        });
        record("MeanBackward", out, &[Some(self)], Vec::new, f, false)
    }
}

// ---------------------------------------------------------------------------
// var/std and logsumexp (issue 12).
// ---------------------------------------------------------------------------

/// `x - mean(x)` over `dims`, kept dims of size 1 (the deviations that the
/// gradients of var and std are proportional to).
fn deviations(x: &Tensor, dims: &[usize]) -> Result<Tensor> {
    Ok(x.sub(&kept_mean(x, dims)?)?)
}

/// `mean(x)` over `dims`, kept dims of size 1.
fn kept_mean(x: &Tensor, dims: &[usize]) -> Result<Tensor> {
    let d: Vec<i64> = dims.iter().map(|&d| d as i64).collect();
    Ok(x.mean((!d.is_empty()).then_some(d.as_slice()), true)?)
}

/// PyTorch's `var_backward`: the gradient of the variance over `dims`
/// (every element when `all`) with `correction`, for the upstream gradient
/// `g` already broadcast back to the input's shape.
///
/// Over every element, with no degree of freedom left (`N - correction <=
/// 0`), it is `g * where(x == mean, NaN, inf)` (NaN also where an infinite
/// `x` equals an infinite mean): the limit of `2 / (N - c)`
/// from above whatever the sign of `x - mean`. Over given dims PyTorch takes
/// `(2 / (N - correction)) g (x - mean)` as it is (inf at `N = correction`,
/// negative beyond), and so does strata. (PyTorch's backward over `dim=[]`
/// counts one element where its forward reduces every element; strata
/// treats an empty `dims` as every element in both.)
fn var_backward(
    g: &Tensor,
    x: &Tensor,
    dims: &[usize],
    all: bool,
    correction: f64,
) -> Result<Tensor> {
    let n: usize = dims.iter().map(|&d| x.shape()[d]).product();
    let dof = n as f64 - correction;
    if all && dof <= 0.0 {
        // `x == mean`, as PyTorch compares (not `x - mean == 0`: an infinite
        // x equal to an infinite mean is NaN there, `inf - inf` is not 0).
        let at_mean = x.eq(&kept_mean(x, dims)?)?;
        return Ok(g.mul(
            &Tensor::where_cond(&at_mean, f64::NAN, f64::INFINITY)?
                .to_dtype_contiguous(g.dtype())?,
        )?);
    }
    Ok(g.mul(2.0 / dof)?.mul(&deviations(x, dims)?)?)
}

impl Var {
    /// Variance over `dims` (all when `None` or empty) with `correction`
    /// (see [`Tensor::var`]). The input is saved, as in PyTorch; its
    /// gradient is `g * 2 (x - mean) / (N - correction)` (PyTorch's, also
    /// where `N - correction <= 0`).
    pub fn var(&self, dims: Option<&[i64]>, correction: f64, keepdim: bool) -> Result<Var> {
        let out = self.data().var(dims, correction, keepdim)?;
        let shape = self.shape().to_vec();
        let all = dims.is_none_or(<[i64]>::is_empty) || shape.is_empty();
        let dims = reduced(dims, shape.len());
        let input = self.data().clone();
        let saved = || vec![input];
        let f = formula(move |g, s, _n| {
            let g = expand_back(g, &shape, &dims, keepdim)?;
            Ok(vec![Some(var_backward(&g, &s[0], &dims, all, correction)?)])
        });
        record("VarBackward", out, &[Some(self)], saved, f, false)
    }

    /// Standard deviation over `dims` (see [`Tensor::std`]). The input and
    /// the result are saved, as in PyTorch; the input's gradient is
    /// PyTorch's `std_backward`: the variance's gradient for the upstream
    /// gradient `g / (2 std)`, taken as 0 where the std is 0 (constant rows
    /// got NaN, 0 / 0).
    pub fn std(&self, dims: Option<&[i64]>, correction: f64, keepdim: bool) -> Result<Var> {
        let out = self.data().std(dims, correction, keepdim)?;
        let shape = self.shape().to_vec();
        let all = dims.is_none_or(<[i64]>::is_empty) || shape.is_empty();
        let dims = reduced(dims, shape.len());
        let (input, result) = (self.data().clone(), out.clone());
        let saved = || vec![input, result];
        let f = formula(move |g, s, _n| {
            let g = Tensor::where_cond(&s[1].eq(0.0)?, 0.0, &g.div(&s[1].mul(2.0)?)?)?;
            let g = expand_back(&g, &shape, &dims, keepdim)?;
            Ok(vec![Some(var_backward(&g, &s[0], &dims, all, correction)?)])
        });
        record("StdBackward", out, &[Some(self)], saved, f, false)
    }

    /// `log(sum(exp(x)))` over `dims` (see [`Tensor::logsumexp`]). The input
    /// and the result are saved, as in PyTorch; the input's gradient is
    /// `g * exp(x - result)` (the softmax of `x` over `dims`).
    pub fn logsumexp(&self, dims: &[i64], keepdim: bool) -> Result<Var> {
        let out = self.data().logsumexp(dims, keepdim)?;
        let shape = self.shape().to_vec();
        let dims = reduced(Some(dims), shape.len());
        let (input, result) = (self.data().clone(), out.clone());
        let saved = || vec![input, result];
        let f = formula(move |g, s, _n| {
            let r = expand_back(&s[1], &shape, &dims, keepdim)?;
            let p = s[0].sub(&r)?.exp()?;
            let g = expand_back(g, &shape, &dims, keepdim)?;
            Ok(vec![Some(g.mul(&p)?)])
        });
        record("LogsumexpBackward", out, &[Some(self)], saved, f, false)
    }
}

/// PyTorch's `prod_backward` (see [`Var::prod`]) for the gradient `g` of
/// `r = x.prod(dim, keepdim)`.
fn prod_backward(
    g: &Tensor,
    x: &Tensor,
    r: &Tensor,
    dim: Option<i64>,
    keepdim: bool,
) -> Result<Tensor> {
    if x.ndim() == 0 {
        return Ok(g.reshape(&[])?);
    }
    let zeros = x.eq(0.0)?.count_nonzero(None)?.item::<i64>()?;
    let Some(dim) = dim else {
        let shape: Vec<i64> = x.shape().iter().map(|&s| s as i64).collect();
        return Ok(match zeros {
            0 => g.mul(&r.div(x)?)?,
            1 => safe_zeros_backward(&g.reshape(&[1])?, &x.reshape(&[-1])?, 0)?.reshape(&shape)?,
            _ => Tensor::zeros(x.shape(), x.dtype(), x.device())?,
        });
    };
    let d = if dim < 0 { dim + x.ndim() as i64 } else { dim };
    let (g, r) = if keepdim {
        (g.clone(), r.clone())
    } else {
        (g.unsqueeze(d)?, r.unsqueeze(d)?)
    };
    Ok(if zeros == 0 {
        g.mul(&r.div(x)?)?
    } else {
        safe_zeros_backward(&g, x, d)?
    })
}

/// PyTorch's `prod_safe_zeros_backward`: `g` times each element's
/// exclusive running products from the start and from the end of its slice
/// along `d` (`g` keeps `d` as a dim of 1).
fn safe_zeros_backward(g: &Tensor, x: &Tensor, d: i64) -> Result<Tensor> {
    if x.numel() == 0 {
        return Ok(g
            .expand(&x.shape().iter().map(|&s| s as i64).collect::<Vec<_>>())?
            .contiguous()?);
    }
    let n = x.shape()[d as usize] as i64;
    let mut ones_shape = x.shape().to_vec();
    ones_shape[d as usize] = 1;
    let ones = Tensor::ones(&ones_shape, x.dtype(), x.device())?;
    let before = Tensor::cat(&[&ones, &x.narrow(d, 0, n - 1)?], d)?.cumprod(d, None)?;
    let after = Tensor::cat(&[&ones, &x.narrow(d, 1, n - 1)?.flip(&[d])?], d)?
        .cumprod(d, None)?
        .flip(&[d])?;
    Ok(g.mul(&before.mul(&after)?)?)
}
