//! `F.rms_norm` and `F.group_norm`, composed from the element-wise ops and
//! the reductions as PyTorch 2.15's CPU computes them: the statistics in
//! the computation type (f32 for f16/bf16 inputs, as PyTorch's `opmath`),
//! the result rounded to the input's dtype once. (`layer_norm` has its own
//! fused kernels, in `ops::nn`.)

use crate::dtype::DType;
use crate::error::{Result, TensorError};
use crate::ops::nn::acc_dtype;
use crate::tensor::Tensor;

/// What `F.rms_norm` computes with, from its checked operands (shared by
/// `Tensor::rms_norm` and strata-autograd's `Var::rms_norm`).
#[derive(Clone, Debug, PartialEq)]
pub struct RmsNormPlan {
    /// The dims it reduces (the last `normalized_shape.len()`).
    pub dims: Vec<i64>,
    /// The computation dtype (f32, or f64 for f64).
    pub compute: DType,
    /// `eps`, defaulting to the computation dtype's machine epsilon.
    pub eps: f64,
}

/// Checks `F.rms_norm`'s operands and plans it.
pub fn rms_norm_plan(
    shape: &[usize],
    dtype: DType,
    normalized_shape: &[usize],
    weight: Option<&[usize]>,
    eps: Option<f64>,
) -> Result<RmsNormPlan> {
    const OP: &str = "rms_norm";
    if !dtype.is_float() {
        return Err(TensorError::unsupported(OP, dtype));
    }
    let k = normalized_shape.len();
    if k == 0 || k > shape.len() || shape[shape.len() - k..] != *normalized_shape {
        return Err(TensorError::shape(
            OP,
            format!(
                "normalized_shape {normalized_shape:?} must be the input's last dims (input shape {shape:?})"
            ),
        ));
    }
    if let Some(w) = weight {
        if w != normalized_shape {
            return Err(TensorError::shape(
                OP,
                format!("the weight's shape {w:?} must be normalized_shape {normalized_shape:?}"),
            ));
        }
    }
    let compute = acc_dtype(dtype);
    let machine_eps = if compute == DType::F64 {
        f64::EPSILON
    } else {
        f64::from(f32::EPSILON)
    };
    Ok(RmsNormPlan {
        dims: (shape.len() - k..shape.len()).map(|d| d as i64).collect(),
        compute,
        eps: eps.unwrap_or(machine_eps),
    })
}

/// The shapes `F.group_norm` computes with, from its checked operands
/// (shared by `Tensor::group_norm` and strata-autograd's `Var::group_norm`).
#[derive(Clone, Debug, PartialEq)]
pub struct GroupNormPlan {
    /// `[N, G, C / G * prod(*)]`: one row per sample and group (sized
    /// explicitly: -1 is ambiguous for an empty batch).
    pub grouped: [i64; 3],
    /// `[1, G, C / G]`: a per-channel parameter against the groups.
    pub channels: [i64; 3],
    /// `[N, G, C / G]`: a per-sample, per-channel scale or shift.
    pub per_sample: [i64; 3],
    /// `[N, C, 1, ...]`: that scale or shift against the input.
    pub against_input: Vec<i64>,
    /// The computation dtype (f32, or f64 for f64).
    pub compute: DType,
}

/// Checks `F.group_norm`'s operands (input `[N, C, *]` with more than one
/// value per group, C divisible by `num_groups`, weight and bias `[C]`) and
/// plans it.
pub fn group_norm_plan(
    shape: &[usize],
    dtype: DType,
    num_groups: usize,
    weight: Option<&[usize]>,
    bias: Option<&[usize]>,
) -> Result<GroupNormPlan> {
    const OP: &str = "group_norm";
    // PyTorch returns an empty batch without parameters before its kernel
    // checks the dtype (an empty i64 input gives an empty i64 result).
    let empty_without_params =
        shape.iter().product::<usize>() == 0 && weight.is_none() && bias.is_none();
    if !dtype.is_float() && !empty_without_params {
        return Err(TensorError::unsupported(OP, dtype));
    }
    if shape.len() < 2 {
        return Err(TensorError::shape(
            OP,
            format!("the input must be [N, C, *] with at least 2 dims, got {shape:?}"),
        ));
    }
    let c = shape[1];
    // F.group_norm's `_verify_batch_size`: a single value per group in
    // training mode is refused (before the divisibility check, with the
    // floor of C / num_groups).
    // (Saturating: an empty input may have huge sizes beside its 0.)
    if let Some(per_group) = shape[0].saturating_mul(c).checked_div(num_groups) {
        let rest = shape[2..].iter().fold(1usize, |a, &s| a.saturating_mul(s));
        if per_group.saturating_mul(rest) == 1 {
            return Err(TensorError::value(
                OP,
                format!("expected more than 1 value per group, got input shape {shape:?} with {num_groups} groups"),
            ));
        }
    }
    if num_groups == 0 || !c.is_multiple_of(num_groups) {
        return Err(TensorError::value(
            OP,
            format!("the {c} channels must be divisible by num_groups ({num_groups})"),
        ));
    }
    for (name, s) in [("weight", weight), ("bias", bias)] {
        if let Some(s) = s {
            if s != [c] {
                return Err(TensorError::shape(
                    OP,
                    format!("the {name} must have shape [{c}] (one per channel), got {s:?}"),
                ));
            }
        }
    }
    let per_group = shape[2..]
        .iter()
        .try_fold(c / num_groups, |a, &s| a.checked_mul(s))
        .ok_or_else(|| {
            TensorError::shape(OP, format!("the group size of shape {shape:?} overflows"))
        })?;
    let (n, g, cg) = (shape[0] as i64, num_groups as i64, (c / num_groups) as i64);
    let mut against_input = vec![n, c as i64];
    against_input.extend(std::iter::repeat_n(1, shape.len() - 2));
    Ok(GroupNormPlan {
        grouped: [n, g, per_group as i64],
        channels: [1, g, cg],
        per_sample: [n, g, cg],
        against_input,
        compute: acc_dtype(dtype),
    })
}

impl Tensor {
    /// `F.rms_norm(self, normalized_shape, weight, eps)`:
    /// `x / sqrt(mean(x²) + eps) * weight` over the last
    /// `normalized_shape.len()` dims, in f32
    /// for f16/bf16 (f64 for f64), rounded to self's dtype once. `eps`
    /// defaults to the computation type's machine epsilon, as in PyTorch.
    ///
    /// ```
    /// use strata_tensor::{Tensor, Device};
    /// let x = Tensor::from_slice(&[3.0f32, 4.0], &[1, 2], Device::Cpu).unwrap();
    /// let y = x.rms_norm(&[2], None, Some(0.0)).unwrap().to_vec::<f32>().unwrap();
    /// let r = (12.5f32).sqrt();
    /// assert_eq!(y, vec![3.0 * (1.0 / r), 4.0 * (1.0 / r)]);
    /// ```
    pub fn rms_norm(
        &self,
        normalized_shape: &[usize],
        weight: Option<&Tensor>,
        eps: Option<f64>,
    ) -> Result<Tensor> {
        let plan = rms_norm_plan(
            self.shape(),
            self.dtype(),
            normalized_shape,
            weight.map(Tensor::shape),
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

    /// `F.group_norm(self, num_groups, weight, bias, eps)` of an `[N, C, *]`
    /// input: each sample's channels in `num_groups` groups, each group
    /// normalised by its mean and biased variance (`(x - mean) /
    /// sqrt(var + eps)`), then scaled and shifted per channel. Statistics in
    /// f32 for f16/bf16, the result rounded to self's dtype once.
    pub fn group_norm(
        &self,
        num_groups: usize,
        weight: Option<&Tensor>,
        bias: Option<&Tensor>,
        eps: f64,
    ) -> Result<Tensor> {
        let plan = group_norm_plan(
            self.shape(),
            self.dtype(),
            num_groups,
            weight.map(Tensor::shape),
            bias.map(Tensor::shape),
        )?;
        let c = plan.compute;
        let x = self.to_dtype(c)?;
        let u = x.reshape(&plan.grouped)?;
        let mean = u.mean(Some(&[2]), true)?;
        let rstd = u.var(Some(&[2]), 0.0, true)?.add(eps)?.rsqrt()?;
        // PyTorch's CPU kernel's form: per sample and channel a scale
        // `rstd * weight` and a shift `bias - scale * mean`, then
        // `x * scale + shift` (its rounding shows where a group's values
        // are equal: `x - mean` would be exactly 0 there).
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
