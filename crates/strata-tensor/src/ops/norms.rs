//! `F.rms_norm` and `F.group_norm`, composed from the element-wise ops and
//! the reductions as PyTorch 2.15's CPU computes them: the statistics in
//! the computation type (f32 for f16/bf16 inputs, as PyTorch's `opmath`),
//! the result rounded to the input's dtype once. (`layer_norm` has its own
//! fused kernels, in `ops::nn`.)

use crate::dtype::DType;
use crate::error::{Result, TensorError};
use crate::tensor::Tensor;

/// The dtype PyTorch's normalisations compute their statistics in.
pub(crate) fn opmath(d: DType) -> DType {
    if d == DType::F64 {
        DType::F64
    } else {
        DType::F32
    }
}

/// Checks `F.rms_norm`'s operands; returns the dims it reduces.
pub fn rms_norm_dims(
    shape: &[usize],
    dtype: DType,
    normalized_shape: &[usize],
    weight: Option<&[usize]>,
) -> Result<Vec<i64>> {
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
    Ok((shape.len() - k..shape.len()).map(|d| d as i64).collect())
}

/// Checks `F.group_norm`'s operands (input `[N, C, *]` with more than one
/// value per group, C divisible by `num_groups`, weight and bias `[C]`).
pub fn group_norm_check(
    shape: &[usize],
    dtype: DType,
    num_groups: usize,
    weight: Option<&[usize]>,
    bias: Option<&[usize]>,
) -> Result<()> {
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
    Ok(())
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
        let dims = rms_norm_dims(
            self.shape(),
            self.dtype(),
            normalized_shape,
            weight.map(Tensor::shape),
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
        group_norm_check(
            self.shape(),
            self.dtype(),
            num_groups,
            weight.map(Tensor::shape),
            bias.map(Tensor::shape),
        )?;
        let c = opmath(self.dtype());
        let shape = self.shape().to_vec();
        // Sized explicitly: -1 is ambiguous for an empty batch.
        let per_group = shape[2..]
            .iter()
            .try_fold(shape[1] / num_groups, |a, &s| a.checked_mul(s))
            .ok_or_else(|| {
                TensorError::shape(
                    "group_norm",
                    format!("the group size of shape {shape:?} overflows"),
                )
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
        let per_channel = |t: &Tensor| t.reshape(&[1, g, cg]);
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
