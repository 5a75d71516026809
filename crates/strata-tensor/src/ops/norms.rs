//! `F.rms_norm`, `F.group_norm` and `F.batch_norm`, composed from the element-wise ops and
//! the reductions as PyTorch 2.15's CPU computes them: the statistics in
//! the computation type (f32 for f16/bf16 inputs, as PyTorch's `opmath`),
//! the result rounded to the input's dtype once. (`layer_norm` has its own
//! fused kernels, in `ops::nn`.)

use crate::dtype::DType;
use crate::error::{Result, TensorError};
use crate::ops::composite::Composite;
use crate::ops::nn::acc_dtype;
use crate::shape;
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
        rms_norm(self, normalized_shape, weight, eps)
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
        group_norm(self, num_groups, weight, bias, eps)
    }
}

/// `F.rms_norm` of `x` (a `Tensor` or a `Var`; see [`Tensor::rms_norm`]):
/// checked by [`rms_norm_plan`], `x * rsqrt(mean(x^2) + eps) * weight` in
/// the computation dtype, rounded to `x`'s dtype once.
pub fn rms_norm<T: Composite>(
    x: &T,
    normalized_shape: &[usize],
    weight: Option<&T>,
    eps: Option<f64>,
) -> std::result::Result<T, T::Error> {
    let plan = rms_norm_plan(
        x.shape(),
        x.dtype(),
        normalized_shape,
        weight.map(T::shape),
        eps,
    )?;
    let c = plan.compute;
    let u = x.to_dtype(c)?;
    let r = u
        .mul(&u)?
        .mean(Some(&plan.dims), true)?
        .add_scalar(plan.eps)?
        .rsqrt()?;
    let y = u.mul(&r)?;
    let y = match weight {
        Some(w) => y.mul(&w.to_dtype(c)?)?,
        None => y,
    };
    y.to_dtype(x.dtype())
}

/// `F.group_norm` of `x` (a `Tensor` or a `Var`; see
/// [`Tensor::group_norm`]): checked by [`group_norm_plan`], each group's
/// statistics in the computation dtype, the result rounded once.
pub fn group_norm<T: Composite>(
    x: &T,
    num_groups: usize,
    weight: Option<&T>,
    bias: Option<&T>,
    eps: f64,
) -> std::result::Result<T, T::Error> {
    let plan = group_norm_plan(
        x.shape(),
        x.dtype(),
        num_groups,
        weight.map(T::shape),
        bias.map(T::shape),
    )?;
    let c = plan.compute;
    let xc = x.to_dtype(c)?;
    let u = xc.reshape(&plan.grouped)?;
    let mean = u.mean(Some(&[2]), true)?;
    let rstd = u.var_keepdim(&[2], 0.0)?.add_scalar(eps)?.rsqrt()?;
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
    let y = xc
        .mul(&scale.reshape(&plan.against_input)?)?
        .add(&shift.reshape(&plan.against_input)?)?;
    y.to_dtype(x.dtype())
}

/// What `F.batch_norm` computes with, from its checked operands.
#[derive(Clone, Debug, PartialEq)]
pub struct BatchNormPlan {
    /// The dims the statistics reduce (all but the channels, dim 1).
    pub dims: Vec<i64>,
    /// `[1, C, 1, ...]`: a per-channel value against the input.
    pub channels: Vec<i64>,
    /// The values per channel (`N * prod(*)`).
    pub count: usize,
    /// The statistics' dtype: f64 for f32/f64 inputs, f32 for f16/bf16
    /// (PyTorch's CPU `acc_type`).
    pub stats: DType,
    /// The normalisation's dtype (f32 for f16/bf16, else the input's).
    pub compute: DType,
    /// Where training keeps the batch statistics before normalising: the
    /// input's dtype for an f16/bf16 input whose parameters are not f32
    /// (PyTorch's `param_t`), else `None` (the computation dtype).
    pub stats_dtype: Option<DType>,
    /// An empty input: the result is PyTorch's `input.clone() *
    /// weight[0] + bias[0]` (promoted as that product promotes), and no
    /// other check applies.
    pub empty: bool,
}

/// `F.batch_norm`'s own check of `eps`: non-negative, and positive in
/// training (where the batch variance may be 0). NaN passes it (and gives
/// NaN), as in PyTorch. `F.instance_norm` does not check it.
fn check_eps(training: bool, eps: f64) -> Result<()> {
    if eps < 0.0 || (training && eps == 0.0) {
        return Err(TensorError::value(
            "batch_norm",
            format!(
                "eps must be non-negative (and positive in training, where the batch variance \
                 may be 0), got {eps}"
            ),
        ));
    }
    Ok(())
}

/// Checks `F.batch_norm`'s operands as PyTorch 2.15's CPU does (an input
/// `[N, C, *]` of floats; running statistics, weight and bias `[C]`, all of
/// one dtype: the input's, or f32 for an f16/bf16 input; both running
/// statistics or neither, and both in evaluation mode; `eps` non-negative,
/// and positive in training; more than one value per channel in training)
/// and plans it. Each operand is its shape and dtype.
pub fn batch_norm_plan(
    input: (&[usize], DType),
    running: [Option<(&[usize], DType)>; 2],
    params: [Option<(&[usize], DType)>; 2],
    training: bool,
    eps: f64,
) -> Result<BatchNormPlan> {
    check_eps(training, eps)?;
    batch_norm_operands(input, running, params, training)
}

/// [`batch_norm_plan`] but for `eps`, which `F.instance_norm` does not check.
fn batch_norm_operands(
    input: (&[usize], DType),
    running: [Option<(&[usize], DType)>; 2],
    params: [Option<(&[usize], DType)>; 2],
    training: bool,
) -> Result<BatchNormPlan> {
    const OP: &str = "batch_norm";
    let (shape, dtype) = input;
    // F.batch_norm's `_verify_batch_size` (saturating: an empty input may
    // have huge sizes beside its 0).
    let count = shape.first().map_or(1, |&n| {
        n.saturating_mul(
            shape
                .iter()
                .skip(2)
                .fold(1usize, |a, &s| a.saturating_mul(s)),
        )
    });
    if training && count == 1 {
        return Err(TensorError::value(
            OP,
            format!(
                "expected more than 1 value per channel when training, got input shape {shape:?}"
            ),
        ));
    }
    if shape.contains(&0) {
        // PyTorch returns `input.clone() * weight[0] + bias[0]` before its
        // other checks.
        for (name, p) in [("weight", params[0]), ("bias", params[1])] {
            if p.is_some_and(|(s, _)| s.is_empty() || s.contains(&0)) {
                return Err(TensorError::index(
                    OP,
                    format!("the {name} has no element 0, which an empty input takes"),
                ));
            }
        }
        return Ok(BatchNormPlan {
            dims: Vec::new(),
            channels: Vec::new(),
            count: 0,
            stats: dtype,
            compute: dtype,
            stats_dtype: None,
            empty: true,
        });
    }
    if shape.len() < 2 {
        return Err(TensorError::shape(
            OP,
            format!("the input must be [N, C, *] with at least 2 dims, got {shape:?}"),
        ));
    }
    if !dtype.is_float() {
        return Err(TensorError::unsupported(OP, dtype));
    }
    let c = shape[1];
    if running[0].is_some() != running[1].is_some() {
        return Err(TensorError::value(
            OP,
            "running_mean and running_var must either both be given or both be None",
        ));
    }
    if !training && running.iter().any(Option::is_none) {
        return Err(TensorError::value(
            OP,
            "running_mean and running_var must be given in evaluation mode (training = false)",
        ));
    }
    let names = ["running_mean", "running_var", "weight", "bias"];
    let given: Vec<(&str, (&[usize], DType))> = names
        .iter()
        .zip(running.iter().chain(params.iter()))
        .filter_map(|(n, o)| o.map(|o| (*n, o)))
        .collect();
    for (name, (s, _)) in &given {
        if shape::numel(s) != c {
            return Err(TensorError::shape(
                OP,
                format!("{name} should contain {c} elements (one per channel), not {s:?}"),
            ));
        }
    }
    // PyTorch's CPU kernel reads (and writes) the running statistics
    // through 1-D accessors.
    for (name, (s, _)) in given.iter().take_while(|(n, _)| n.starts_with("running")) {
        if s.len() != 1 {
            return Err(TensorError::shape(
                OP,
                format!("{name} must be 1-D ([{c}]), got shape {s:?}"),
            ));
        }
    }
    if let Some((_, (_, first))) = given.first() {
        let half = matches!(dtype, DType::F16 | DType::BF16);
        let ok = given.iter().all(|(_, (_, d))| d == first)
            && (*first == dtype || (half && *first == DType::F32));
        if !ok {
            return Err(TensorError::dtype(
                OP,
                format!(
                    "the running statistics, weight and bias must all be {dtype:?} (or all f32 for an \
                     f16/bf16 input), got {:?}",
                    given.iter().map(|(n, (_, d))| format!("{n} {d:?}")).collect::<Vec<_>>()
                ),
            ));
        }
    }
    let mut channels = vec![1i64, c as i64];
    channels.extend(std::iter::repeat_n(1, shape.len() - 2));
    let mut dims = vec![0i64];
    dims.extend((2..shape.len()).map(|d| d as i64));
    let compute = acc_dtype(dtype);
    Ok(BatchNormPlan {
        dims,
        channels,
        count,
        stats: if compute == DType::F32 && dtype == DType::F32 {
            DType::F64
        } else {
            compute
        },
        compute,
        stats_dtype: (matches!(dtype, DType::F16 | DType::BF16)
            && given.first().is_none_or(|(_, (_, d))| *d != DType::F32))
        .then_some(dtype),
        empty: false,
    })
}

impl BatchNormPlan {
    /// `F.batch_norm` of `x` (a `Tensor` or a `Var`) that this plan
    /// checked: in training, normalised by the batch's mean and biased
    /// variance (computed in [`BatchNormPlan::stats`]), the running
    /// statistics updated in place to `(1 - momentum) * running +
    /// momentum * batch` (the variance unbiased); in evaluation, by the running
    /// statistics. Then PyTorch's CPU form `x * scale + shift` with `scale =
    /// weight / sqrt(var + eps)` and `shift = bias - mean * scale`, rounded
    /// to the input's dtype once.
    #[allow(clippy::too_many_arguments)]
    pub fn normalize<T: Composite>(
        &self,
        x: &T,
        running_mean: Option<&Tensor>,
        running_var: Option<&Tensor>,
        weight: Option<&T>,
        bias: Option<&T>,
        training: bool,
        momentum: f64,
        eps: f64,
        dtype: DType,
    ) -> std::result::Result<T, T::Error> {
        if self.empty {
            let first = |p: &T| p.reshape(&[-1])?.narrow(0, 0, 1)?.reshape(&[]);
            let mut y = x.clone();
            if let Some(w) = weight {
                y = y.mul(&first(w)?)?;
            }
            if let Some(b) = bias {
                y = y.add(&first(b)?)?;
            }
            return Ok(y);
        }
        let c = self.compute;
        // (mean, 1 / sqrt(var + eps)) per channel, in the computation dtype.
        let (mean, invstd) = match (training, running_mean, running_var) {
            (true, ..) => {
                let xs = x.to_dtype(self.stats)?;
                let mean = xs.mean(Some(&self.dims), true)?;
                let var = xs.var_keepdim(&self.dims, 0.0)?;
                if self.count > 0 {
                    let unbiased = self.count as f64 / (self.count as f64 - 1.0).max(1.0);
                    // Both statistics checked writable (on the input's
                    // device, no elements sharing memory) before either is
                    // written: a failure leaves them as they were. The
                    // variance's update reads the mean's where they are one
                    // tensor, as PyTorch's per-channel loop does.
                    for r in [running_mean, running_var].into_iter().flatten() {
                        if r.device() != x.device() {
                            return Err(TensorError::DeviceMismatch {
                                op: "batch_norm",
                                lhs: x.device(),
                                rhs: r.device(),
                            }
                            .into());
                        }
                        if r.layout().may_overlap() {
                            return Err(TensorError::overlap(
                                "batch_norm",
                                format!(
                                    "a running statistic (shape {:?}, strides {:?}) has elements \
                                     that share memory; clone it first",
                                    r.shape(),
                                    r.strides()
                                ),
                            )
                            .into());
                        }
                    }
                    for (running, batch) in [
                        (running_mean, mean.data().clone()),
                        (running_var, var.data().mul(unbiased)?),
                    ] {
                        if let Some(r) = running {
                            let old = r.reshape(&[-1])?.to_dtype(self.stats)?;
                            let new = batch
                                .reshape(&[-1])?
                                .mul(momentum)?
                                .add(&old.mul(1.0 - momentum)?)?;
                            r.reshape(&[-1])?.copy_(&new)?;
                        }
                    }
                }
                let invstd = var.add_scalar(eps)?.rsqrt()?;
                // PyTorch keeps the batch statistics in the parameters'
                // dtype (f16/bf16 unless they are f32).
                let kept = self.stats_dtype.unwrap_or(c);
                (
                    mean.to_dtype(kept)?.to_dtype(c)?,
                    invstd.to_dtype(kept)?.to_dtype(c)?,
                )
            }
            (false, Some(rm), Some(rv)) => (
                T::constant(rm.to_dtype(c)?.reshape(&self.channels)?),
                T::constant(rv.to_dtype(c)?.reshape(&self.channels)?)
                    .add_scalar(eps)?
                    .rsqrt()?,
            ),
            _ => {
                return Err(TensorError::value(
                    "batch_norm",
                    "running_mean and running_var must be given in evaluation mode",
                )
                .into())
            }
        };
        let scale = match weight {
            Some(w) => invstd.mul(&w.to_dtype(c)?.reshape(&self.channels)?)?,
            None => invstd,
        };
        let shift = match bias {
            Some(b) => b
                .to_dtype(c)?
                .reshape(&self.channels)?
                .sub(&mean.mul(&scale)?)?,
            None => mean.mul(&scale)?.neg()?,
        };
        x.to_dtype(c)?.mul(&scale)?.add(&shift)?.to_dtype(dtype)
    }
}

/// An operand's shape and dtype, as the plans take it.
fn operand<T: Composite>(t: &T) -> (&[usize], DType) {
    (t.shape(), t.dtype())
}

/// `F.batch_norm` of `x` (a `Tensor` or a `Var`): checked by
/// [`batch_norm_plan`], computed by [`BatchNormPlan::normalize`] (the
/// running statistics, plain tensors, updated in place in training).
#[allow(clippy::too_many_arguments)]
pub fn batch_norm<T: Composite>(
    x: &T,
    running_mean: Option<&Tensor>,
    running_var: Option<&Tensor>,
    weight: Option<&T>,
    bias: Option<&T>,
    training: bool,
    momentum: f64,
    eps: f64,
) -> std::result::Result<T, T::Error> {
    check_eps(training, eps)?;
    batch_norm_any_eps(
        x,
        running_mean,
        running_var,
        weight,
        bias,
        training,
        momentum,
        eps,
    )
}

/// [`batch_norm`] with any `eps` (`F.instance_norm`'s, which PyTorch does not
/// check: a negative one gives NaN where it exceeds the variance).
#[allow(clippy::too_many_arguments)]
pub(crate) fn batch_norm_any_eps<T: Composite>(
    x: &T,
    running_mean: Option<&Tensor>,
    running_var: Option<&Tensor>,
    weight: Option<&T>,
    bias: Option<&T>,
    training: bool,
    momentum: f64,
    eps: f64,
) -> std::result::Result<T, T::Error> {
    let plan = batch_norm_operands(
        (x.shape(), x.dtype()),
        [running_mean.map(operand), running_var.map(operand)],
        [weight.map(operand), bias.map(operand)],
        training,
    )?;
    plan.normalize(
        x,
        running_mean,
        running_var,
        weight,
        bias,
        training,
        momentum,
        eps,
        x.dtype(),
    )
}

impl Tensor {
    /// `F.batch_norm(self, running_mean, running_var, weight, bias,
    /// training, momentum, eps)` of an `[N, C, *]` input (see
    /// [`BatchNormPlan::normalize`]); in training the running statistics,
    /// where given, are updated in place.
    ///
    /// ```
    /// use strata_tensor::{Device, DType, Tensor};
    /// let x = Tensor::from_slice(&[1.0f32, 3.0, 5.0, 7.0], &[2, 2], Device::Cpu)?;
    /// let (rm, rv) = (Tensor::zeros(&[2], DType::F32, Device::Cpu)?, Tensor::ones(&[2], DType::F32, Device::Cpu)?);
    /// let y = x.batch_norm(Some(&rm), Some(&rv), None, None, true, 0.1, 1e-5)?.to_vec::<f32>()?;
    /// // Each channel's values are its mean ± 2, its biased variance 4.
    /// assert!(y.iter().zip([-1., -1., 1., 1.]).all(|(a, b)| (a - b).abs() < 1e-5));
    /// assert_eq!(rm.to_vec::<f32>()?, [0.3, 0.5]); // 0.1 * the batch means 3 and 5
    /// # Ok::<(), strata_tensor::TensorError>(())
    /// ```
    #[allow(clippy::too_many_arguments)]
    pub fn batch_norm(
        &self,
        running_mean: Option<&Tensor>,
        running_var: Option<&Tensor>,
        weight: Option<&Tensor>,
        bias: Option<&Tensor>,
        training: bool,
        momentum: f64,
        eps: f64,
    ) -> Result<Tensor> {
        batch_norm(
            self,
            running_mean,
            running_var,
            weight,
            bias,
            training,
            momentum,
            eps,
        )
    }
}
