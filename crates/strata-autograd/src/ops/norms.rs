//! Session 74: `F.rms_norm` and `F.group_norm` on variables, recorded as
//! the compositions their `Tensor` forms compute (`Tensor::rms_norm`,
//! `Tensor::group_norm`): a cast to the computation type, the statistics,
//! the products, a cast back. PyTorch records `rms_norm` so too; its
//! `group_norm` has a fused backward, which this composition equals up to
//! rounding.

use crate::error::Result;
use crate::var::Var;
use strata_tensor::{group_norm_plan, rms_norm_plan};

impl Var {
    /// `F.rms_norm` (see [`strata_tensor::Tensor::rms_norm`]); the weight
    /// is a variable too (its gradient `sum(g x / rms)` over the leading
    /// dims).
    pub fn rms_norm(
        &self,
        normalized_shape: &[usize],
        weight: Option<&Var>,
        eps: Option<f64>,
    ) -> Result<Var> {
        let plan = rms_norm_plan(
            self.shape(),
            self.dtype(),
            normalized_shape,
            weight.map(Var::shape),
            eps,
        )?;
        let c = plan.compute;
        let u = self.to_dtype(c)?;
        let r = u
            .mul(&u)?
            .mean(Some(&plan.dims), true)?
            .add(plan.eps)?
            .rsqrt()?;
        let y = u.mul(&r)?;
        let y = match weight {
            Some(w) => y.mul(&w.to_dtype(c)?)?,
            None => y,
        };
        y.to_dtype(self.dtype())
    }

    /// `F.group_norm` (see [`strata_tensor::Tensor::group_norm`]); weight
    /// and bias are variables too.
    pub fn group_norm(
        &self,
        num_groups: usize,
        weight: Option<&Var>,
        bias: Option<&Var>,
        eps: f64,
    ) -> Result<Var> {
        let plan = group_norm_plan(
            self.shape(),
            self.dtype(),
            num_groups,
            weight.map(Var::shape),
            bias.map(Var::shape),
        )?;
        let c = plan.compute;
        let x = self.to_dtype(c)?;
        let u = x.reshape(&plan.grouped)?;
        let mean = u.mean(Some(&[2]), true)?;
        let rstd = u.var(Some(&[2]), 0.0, true)?.add(eps)?.rsqrt()?;
        let scale = match weight {
            Some(w) => rstd.mul(&w.to_dtype(c)?.reshape(&plan.channels)?)?,
            None => rstd.expand(&plan.per_sample)?,
        };
        let shift = scale.mul(&mean)?.neg()?;
        let shift = match bias {
            Some(b) => shift.add(&b.to_dtype(c)?.reshape(&plan.channels)?)?,
            None => shift,
        };
        let y = x
            .mul(&scale.reshape(&plan.against_input)?)?
            .add(&shift.reshape(&plan.against_input)?)?;
        y.to_dtype(self.dtype())
    }
}
