//! Session 74: `F.rms_norm` and `F.group_norm` on variables, recorded as
//! the compositions their `Tensor` forms compute (`Tensor::rms_norm`,
//! `Tensor::group_norm`): a cast to the computation type, the statistics,
//! the products, a cast back. PyTorch records `rms_norm` so too; its
//! `group_norm` has a fused backward, which this composition equals up to
//! rounding.

use crate::error::Result;
use crate::var::Var;
use strata_tensor::{group_norm_check, rms_norm_dims, DType};

fn opmath(d: DType) -> DType {
    if d == DType::F64 {
        DType::F64
    } else {
        DType::F32
    }
}

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
        let dims = rms_norm_dims(
            self.shape(),
            self.dtype(),
            normalized_shape,
            weight.map(Var::shape),
        )?;
        let c = opmath(self.dtype());
        let eps = eps.unwrap_or(if c == DType::F64 {
            f64::EPSILON
        } else {
            f64::from(f32::EPSILON)
        });
        let u = self.to_dtype(c)?;
        let r = u.mul(&u)?.mean(Some(&dims), true)?.add(eps)?.rsqrt()?;
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
        group_norm_check(
            self.shape(),
            self.dtype(),
            num_groups,
            weight.map(Var::shape),
            bias.map(Var::shape),
        )?;
        let c = opmath(self.dtype());
        let shape = self.shape().to_vec();
        // Sized explicitly: -1 is ambiguous for an empty batch.
        let per_group = shape[2..]
            .iter()
            .try_fold(shape[1] / num_groups, |a, &s| a.checked_mul(s))
            .ok_or_else(|| strata_tensor::TensorError::Shape {
                op: "group_norm",
                msg: format!("the group size of shape {shape:?} overflows"),
            })?;
        let grouped = [shape[0] as i64, num_groups as i64, per_group as i64];
        let u = self.to_dtype(c)?.reshape(&grouped)?;
        let mean = u.mean(Some(&[2]), true)?;
        let rstd = u.var(Some(&[2]), 0.0, true)?.add(eps)?.rsqrt()?;
        // PyTorch's CPU kernel's form: per sample and channel a scale
        // `rstd * weight` and a shift `bias - scale * mean`, then
        // `x * scale + shift` (its rounding shows where a group's values
        // are equal: `x - mean` would be exactly 0 there).
        let (n, g) = (shape[0] as i64, num_groups as i64);
        let cg = (shape[1] / num_groups) as i64;
        let per_channel = |t: &Var| t.reshape(&[1, g, cg]);
        let rstd = rstd.reshape(&[n, g, 1])?;
        let mean = mean.reshape(&[n, g, 1])?;
        let scale = match weight {
            Some(w) => rstd.mul(&per_channel(&w.to_dtype(c)?)?)?,
            None => rstd.expand(&[n, g, cg])?,
        };
        let shift = scale.mul(&mean)?.neg()?;
        let shift = match bias {
            Some(b) => shift.add(&per_channel(&b.to_dtype(c)?)?)?,
            None => shift,
        };
        // [N, G, C/G] -> [N, C, 1, ...] against the input's [N, C, *].
        let mut nc = vec![n, shape[1] as i64];
        nc.extend(std::iter::repeat_n(1, shape.len() - 2));
        let dims: Vec<i64> = shape.iter().map(|&s| s as i64).collect();
        let x = self.to_dtype(c)?;
        let y = x.mul(&scale.reshape(&nc)?)?.add(&shift.reshape(&nc)?)?;
        debug_assert_eq!(y.shape().len(), dims.len());
        y.to_dtype(self.dtype())
    }
}
