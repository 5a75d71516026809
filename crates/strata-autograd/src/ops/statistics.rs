//! Session 79 (helper 134): the recorded forms of strata-tensor's
//! `statistics` ops, each the same composition over recorded ops (so its
//! gradient is PyTorch's composite one): `quantile`/`nanquantile` through
//! `sort`, `gather` and `lerp` (the gradient goes to the order statistics
//! the result interpolates, by their weights); `cov` and `corrcoef` through
//! `mul`, `sum`, `div` and `mm` (weights are constants); `aminmax` as
//! `amin` and `amax` (ties share the gradient evenly); `trapezoid` and
//! `cumulative_trapezoid` (the sample points are constants); `renorm`
//! through `norm` and the scale factor (derivatives.yaml's
//! `renorm_backward` is this composition's gradient); `pdist` through
//! `cdist`'s.

use crate::error::Result;
use crate::var::Var;
use strata_tensor::statistics::{
    cov_norm, cov_weights, pdist_pairs, quantile_dim_first, quantile_plan, renorm_plan,
    trapezoid_dx, QuantileInterpolation, QuantileQ, Spacing,
};
use strata_tensor::Tensor;

fn wrap(dim: i64, ndim: usize) -> i64 {
    if dim < 0 {
        dim + ndim.max(1) as i64
    } else {
        dim
    }
}

impl Var {
    /// [`Tensor::quantile`] (gradient through the sort, the gathers and
    /// `lerp`).
    ///
    /// ```
    /// use strata_autograd::Var;
    /// use strata_tensor::{tensor, QuantileInterpolation};
    /// let x = Var::parameter(tensor![4., 1., 3., 2.]?)?;
    /// x.quantile(0.5, None, false, QuantileInterpolation::Linear)?.backward()?;
    /// assert_eq!(x.grad().unwrap().to_vec::<f32>()?, [0., 0., 0.5, 0.5]);
    /// # Ok::<(), strata_autograd::AutogradError>(())
    /// ```
    pub fn quantile<'a>(
        &self,
        q: impl Into<QuantileQ<'a>>,
        dim: Option<i64>,
        keepdim: bool,
        interpolation: QuantileInterpolation,
    ) -> Result<Var> {
        self.quantile_impl(q.into(), dim, keepdim, interpolation, false)
    }

    /// [`Tensor::nanquantile`] (gradient as [`Var::quantile`]'s).
    pub fn nanquantile<'a>(
        &self,
        q: impl Into<QuantileQ<'a>>,
        dim: Option<i64>,
        keepdim: bool,
        interpolation: QuantileInterpolation,
    ) -> Result<Var> {
        self.quantile_impl(q.into(), dim, keepdim, interpolation, true)
    }

    fn quantile_impl(
        &self,
        q: QuantileQ,
        dim: Option<i64>,
        keepdim: bool,
        interpolation: QuantileInterpolation,
        nan_aware: bool,
    ) -> Result<Var> {
        let plan = quantile_plan(self.data(), q, dim, keepdim, interpolation, nan_aware)?;
        let rows = match dim {
            Some(d) if self.ndim() > 0 => {
                let n = self.shape()[wrap(d, self.ndim()) as usize] as i64;
                self.movedim(&[d], &[-1])?.reshape(&[-1, n])?
            }
            _ => self.reshape(&[1, -1])?,
        };
        let sorted = rows.sort(-1, false, false)?.0;
        let mut v = sorted.gather(-1, &plan.below)?;
        if let (Some(above), Some(w)) = (&plan.above, &plan.weights) {
            v = v.lerp(&sorted.gather(-1, above)?, &Var::new(w.clone()))?;
        }
        let (kept, scalar_q) = plan.finish_shape();
        let v = v.reshape(&kept)?;
        if scalar_q || kept.len() == 1 {
            Ok(v)
        } else {
            v.permute(&quantile_dim_first(kept.len()))
        }
    }

    /// [`Tensor::cov`] (the weights are constants).
    ///
    /// ```
    /// use strata_autograd::Var;
    /// use strata_tensor::tensor;
    /// let x = Var::parameter(tensor![1., 2., 4.]?)?;
    /// x.cov(1, None, None)?.backward()?; // d var / dx = 2 (x - mean) / (n - 1)
    /// let g = x.grad().unwrap().to_vec::<f32>()?;
    /// assert!((g[0] + 4. / 3.).abs() < 1e-6 && (g[2] - 5. / 3.).abs() < 1e-6);
    /// # Ok::<(), strata_autograd::AutogradError>(())
    /// ```
    pub fn cov(
        &self,
        correction: i64,
        fweights: Option<&Tensor>,
        aweights: Option<&Tensor>,
    ) -> Result<Var> {
        let (input, w) = cov_weights(self.data(), fweights, aweights)?;
        let n = input.shape()[1];
        let (w_sum, norm) = cov_norm(n, w.as_ref(), aweights, correction, self.device())?;
        let x = if self.ndim() < 2 {
            self.view(&[1, -1])?
        } else {
            self.clone()
        };
        let weighted = |t: &Var| -> Result<Var> {
            match &w {
                Some(w) => t.mul(&Var::new(w.clone())),
                None => Ok(t.clone()),
            }
        };
        let avg = weighted(&x)?
            .sum(Some(&[1]), false)?
            .div(&Var::new(w_sum))?;
        let centred = x.sub(&avg.unsqueeze(1)?)?;
        let c = centred.mm(&weighted(&centred)?.t()?)?;
        let c = c.div(&Var::new(norm))?;
        let ones: Vec<i64> = (0..c.ndim() as i64)
            .filter(|&d| c.shape()[d as usize] == 1)
            .collect();
        c.squeeze_dims(&ones)
    }

    /// [`Tensor::corrcoef`] (through `cov`, `sqrt` and `clamp`).
    pub fn corrcoef(&self) -> Result<Var> {
        self.data().corrcoef()?;
        let c = self.cov(1, None, None)?;
        if c.ndim() == 0 {
            return c.div(&c);
        }
        let sd = c.diagonal(0, 0, 1)?.sqrt()?;
        let c = c.div(&sd.view(&[-1, 1])?)?.div(&sd.view(&[1, -1])?)?;
        c.clamp(Some(-1.0), Some(1.0))
    }

    /// [`Tensor::aminmax`]: `amin` and `amax` (ties share the gradient).
    pub fn aminmax(&self, dim: Option<i64>, keepdim: bool) -> Result<(Var, Var)> {
        self.data().aminmax(dim, keepdim)?;
        let dims = dim.map(|d| vec![d]);
        if self.ndim() == 0 {
            // amin/amax of a 0-d variable over its (absent) dim: itself.
            return Ok((self.reshape(&[])?, self.reshape(&[])?));
        }
        let dims = dims.as_deref();
        Ok((self.amin(dims, keepdim)?, self.amax(dims, keepdim)?))
    }

    /// [`Tensor::trapezoid`] (the sample points `x` are constants).
    ///
    /// ```
    /// use strata_autograd::Var;
    /// use strata_tensor::{tensor, Spacing};
    /// let y = Var::parameter(tensor![1., 2., 4.]?)?;
    /// y.trapezoid(Spacing::Dx(2.0), 0)?.backward()?;
    /// assert_eq!(y.grad().unwrap().to_vec::<f32>()?, [1., 2., 1.]);
    /// # Ok::<(), strata_autograd::AutogradError>(())
    /// ```
    pub fn trapezoid(&self, spacing: Spacing, dim: i64) -> Result<Var> {
        let out = self.data().trapezoid(spacing, dim)?;
        let di = wrap(dim, self.ndim());
        if self.shape()[di as usize] == 0 {
            return Ok(Var::new(out));
        }
        match spacing {
            Spacing::X(x) => {
                let dx = trapezoid_dx("trapezoid", self.data(), x, di as usize)?;
                let left = self.slice(di, Some(0), Some(-1), 1)?;
                let right = self.slice(di, Some(1), None, 1)?;
                left.add(&right)?
                    .mul(&Var::new(dx))?
                    .sum(Some(&[di]), false)?
                    .div(2.0)
            }
            Spacing::Dx(dx) => {
                let ends = self.select(di, 0)?.add(&self.select(di, -1)?)?.mul(0.5)?;
                self.sum(Some(&[di]), false)?.sub(&ends)?.mul(dx)
            }
        }
    }

    /// [`Tensor::cumulative_trapezoid`] (the sample points are constants).
    pub fn cumulative_trapezoid(&self, spacing: Spacing, dim: i64) -> Result<Var> {
        self.data().cumulative_trapezoid(spacing, dim)?;
        let di = wrap(dim, self.ndim());
        let left = self.slice(di, Some(0), Some(-1), 1)?;
        let right = self.slice(di, Some(1), None, 1)?;
        match spacing {
            Spacing::X(x) => {
                let dx = trapezoid_dx("cumulative_trapezoid", self.data(), x, di as usize)?;
                left.add(&right)?
                    .mul(&Var::new(dx))?
                    .cumsum(di, None)?
                    .div(2.0)
            }
            Spacing::Dx(dx) => left.add(&right)?.mul(dx / 2.0)?.cumsum(di, None),
        }
    }

    /// [`Tensor::renorm`] (gradient: derivatives.yaml's `renorm_backward`,
    /// which is this composition's).
    pub fn renorm(&self, p: f64, dim: i64, maxnorm: f64) -> Result<Var> {
        let (dims, acc) = renorm_plan(self.data(), p, dim, maxnorm)?;
        let norm = self.to_dtype(acc)?.norm(p, Some(&dims), true)?;
        let big = norm.data().gt(maxnorm)?;
        let top = Var::new(Tensor::full(norm.shape(), maxnorm, acc, self.device())?);
        let scaled = top.div(&norm.add(1e-7)?)?;
        let one = Var::new(Tensor::ones(norm.shape(), acc, self.device())?);
        let factor = Var::where_cond(&big, &scaled, &one)?;
        self.mul(&factor.to_dtype(self.dtype())?)
    }

    /// [`Tensor::pdist`] (gradient through `cdist`'s).
    pub fn pdist(&self, p: f64) -> Result<Var> {
        let pairs = pdist_pairs(self.data(), p)?;
        if pairs.numel() == 0 {
            return self.narrow(0, 0, 0)?.sum(Some(&[1]), false);
        }
        self.cdist(self, p)?.reshape(&[-1])?.index_select(0, &pairs)
    }
}
