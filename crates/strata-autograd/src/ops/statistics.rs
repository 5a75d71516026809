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
    aminmax_of, corrcoef_of, cov_of, cumulative_trapezoid_of, dist_of, pdist_of, quantile_of,
    quantile_plan, renorm_of, trapezoid_of, QuantileInterpolation, QuantileQ, Spacing,
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
        // The plan's rows recorded: the quantile dim last, as `[B, n]`.
        let rows = match dim {
            Some(d) if self.ndim() > 0 => {
                let n = self.shape()[wrap(d, self.ndim()) as usize] as i64;
                self.movedim(&[d], &[-1])?.reshape(&[-1, n])?
            }
            _ => self.reshape(&[1, -1])?,
        };
        quantile_of(&rows, &plan)
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
        cov_of(self, correction, fweights, aweights)
    }

    /// [`Tensor::corrcoef`] (through `cov`, `sqrt` and `clamp`).
    pub fn corrcoef(&self) -> Result<Var> {
        corrcoef_of(self)
    }

    /// [`Tensor::aminmax`]: `amin` and `amax` (ties share the gradient).
    pub fn aminmax(&self, dim: Option<i64>, keepdim: bool) -> Result<(Var, Var)> {
        aminmax_of(self, dim, keepdim)
    }

    /// [`Tensor::dist`]: the norm of the difference (gradients to both).
    ///
    /// ```
    /// use strata_autograd::Var;
    /// use strata_tensor::tensor;
    /// let a = Var::parameter(tensor![3., 0.]?)?;
    /// let b = Var::parameter(tensor![0., 4.]?)?;
    /// a.dist(&b, 2.0)?.backward()?;
    /// assert_eq!(a.grad().unwrap().to_vec::<f32>()?, [0.6, -0.8]);
    /// assert_eq!(b.grad().unwrap().to_vec::<f32>()?, [-0.6, 0.8]);
    /// # Ok::<(), strata_autograd::AutogradError>(())
    /// ```
    pub fn dist(&self, other: &Var, p: f64) -> Result<Var> {
        dist_of(self, other, p)
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
        trapezoid_of(self, spacing, dim)
    }

    /// [`Tensor::cumulative_trapezoid`] (the sample points are constants).
    pub fn cumulative_trapezoid(&self, spacing: Spacing, dim: i64) -> Result<Var> {
        cumulative_trapezoid_of(self, spacing, dim)
    }

    /// [`Tensor::renorm`] (gradient: derivatives.yaml's `renorm_backward`,
    /// which is this composition's).
    pub fn renorm(&self, p: f64, dim: i64, maxnorm: f64) -> Result<Var> {
        renorm_of(self, p, dim, maxnorm)
    }

    /// [`Tensor::pdist`] (gradient through `cdist`'s).
    pub fn pdist(&self, p: f64) -> Result<Var> {
        // No pairs: the empty sum of an empty narrow, so the result stays
        // connected to the input.
        pdist_of(self, p, |x| x.narrow(0, 0, 0)?.sum(Some(&[1]), false))
    }
}
