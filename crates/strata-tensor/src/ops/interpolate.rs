//! `F.interpolate`: resizing the spatial dims of a `[N, C, ...]` input by
//! `nearest`, `nearest-exact`, `linear`/`bilinear`/`trilinear` or `area`,
//! with PyTorch 2.15's output sizes, source indices and weights
//! (`UpSample.h`: the scale `1 / scale_factor` where one is given, else
//! `in / out`, in f32 for f32/f16/bf16 and f64 for f64). Each spatial dim
//! is resized in turn (the last first): gathers of the source rows
//! (`index_select`) and, for the linear modes, their weighted sum, so that
//! one composition computes the `Tensor` form and records the `Var` form
//! ([`Composite`]); `area` is adaptive average pooling
//! ([`crate::adaptive_pool`], with its checks). A `u8` input is resized by
//! the nearest modes only: PyTorch's `u8` bilinear kernel works in fixed
//! point, which strata does not reproduce (a typed error).

use crate::dtype::DType;
use crate::error::{Result, TensorError};
use crate::ops::composite::Composite;
use crate::ops::nn::acc_dtype;
use crate::ops::pool::adaptive_pool;
use crate::ops::windows::per_dim;
use crate::tensor::Tensor;

/// How `F.interpolate` resizes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InterpolateMode {
    /// `"nearest"`: the source element `floor(i * scale)`.
    Nearest,
    /// `"nearest-exact"`: the source element `floor((i + 0.5) * scale)`.
    NearestExact,
    /// `"linear"` (3-D inputs).
    Linear,
    /// `"bilinear"` (4-D inputs).
    Bilinear,
    /// `"trilinear"` (5-D inputs).
    Trilinear,
    /// `"area"`: adaptive average pooling to the output size (its checks and
    /// dtypes).
    Area,
}

/// `F.interpolate`'s options: an output `size` or a `scale_factor` (one
/// value for every spatial dim or one per dim), the mode, and the linear
/// modes' `align_corners`.
///
/// ```
/// use strata_tensor::{Device, InterpolateMode, InterpolateOptions, Tensor};
/// let x = Tensor::arange(0.0, 4.0, 1.0, None, Device::Cpu)?.reshape(&[1, 1, 4])?;
/// let y = x.interpolate(&InterpolateOptions::scale(&[2.0]).mode(InterpolateMode::Linear))?;
/// assert_eq!(y.to_vec::<f32>()?, [0.0, 0.25, 0.75, 1.25, 1.75, 2.25, 2.75, 3.0]);
/// # Ok::<(), strata_tensor::TensorError>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct InterpolateOptions {
    /// The output's spatial size.
    pub size: Option<Vec<usize>>,
    /// The factor the spatial dims are scaled by.
    pub scale_factor: Option<Vec<f64>>,
    /// The mode (PyTorch's default `nearest`).
    pub mode: InterpolateMode,
    /// The linear modes only: whether the corner elements' centres align.
    pub align_corners: Option<bool>,
    /// With a `scale_factor`: whether the indices use the scale the output
    /// size gives instead of the factor.
    pub recompute_scale_factor: bool,
}

impl InterpolateOptions {
    /// Resizing to `size`.
    pub fn size(size: &[usize]) -> Self {
        InterpolateOptions {
            size: Some(size.to_vec()),
            scale_factor: None,
            mode: InterpolateMode::Nearest,
            align_corners: None,
            recompute_scale_factor: false,
        }
    }

    /// Scaling by `scale_factor`.
    pub fn scale(scale_factor: &[f64]) -> Self {
        InterpolateOptions {
            size: None,
            scale_factor: Some(scale_factor.to_vec()),
            mode: InterpolateMode::Nearest,
            align_corners: None,
            recompute_scale_factor: false,
        }
    }

    /// Sets the mode.
    pub fn mode(mut self, mode: InterpolateMode) -> Self {
        self.mode = mode;
        self
    }

    /// Sets `align_corners` (linear modes only).
    pub fn align_corners(mut self, align_corners: bool) -> Self {
        self.align_corners = Some(align_corners);
        self
    }

    /// Sets `recompute_scale_factor`.
    pub fn recompute_scale_factor(mut self, recompute: bool) -> Self {
        self.recompute_scale_factor = recompute;
        self
    }
}

/// How one spatial dim is resized.
#[derive(Clone, Debug)]
enum Axis {
    /// Output element `i` is input element `index[i]`.
    Gather(Vec<i64>),
    /// Output element `i` is `w0[i] * x[i0[i]] + w1[i] * x[i1[i]]`.
    Blend {
        i0: Vec<i64>,
        i1: Vec<i64>,
        w0: Vec<f64>,
        w1: Vec<f64>,
    },
}

/// A checked `F.interpolate`: the output size and each dim's resizing.
#[derive(Clone, Debug)]
pub struct InterpolatePlan {
    out: Vec<usize>,
    axes: Vec<Axis>,
    area: bool,
    compute: DType,
}

/// Checks `F.interpolate`'s input and options as PyTorch 2.15 does and
/// plans it.
pub fn interpolate_plan(
    shape: &[usize],
    dtype: DType,
    opts: &InterpolateOptions,
) -> Result<InterpolatePlan> {
    const OP: &str = "interpolate";
    if !(3..=5).contains(&shape.len()) {
        return Err(TensorError::shape(
            OP,
            format!("only 3-D, 4-D and 5-D inputs [N, C, ...] are supported, got shape {shape:?}"),
        ));
    }
    let spatial = shape.len() - 2;
    let input = &shape[2..];
    let linear = matches!(
        opts.mode,
        InterpolateMode::Linear | InterpolateMode::Bilinear | InterpolateMode::Trilinear
    );
    if opts.align_corners.is_some() && !linear {
        return Err(TensorError::value(
            OP,
            "align_corners can only be set with the interpolating modes: linear | bilinear | trilinear",
        ));
    }
    let needs = match opts.mode {
        InterpolateMode::Linear => Some(1),
        InterpolateMode::Bilinear => Some(2),
        InterpolateMode::Trilinear => Some(3),
        _ => None,
    };
    if let Some(n) = needs.filter(|&n| n != spatial) {
        return Err(TensorError::shape(
            OP,
            format!(
                "got a {}-D input, but {:?} mode needs a {}-D input",
                shape.len(),
                opts.mode,
                n + 2
            ),
        ));
    }
    // Output sizes, and the scales the kernels are given.
    let (out, scales): (Vec<i128>, Vec<Option<f64>>) = match (&opts.size, &opts.scale_factor) {
        (Some(_), Some(_)) => {
            return Err(TensorError::value(
                OP,
                "only one of size or scale_factor should be defined",
            ))
        }
        (None, None) => {
            return Err(TensorError::value(
                OP,
                "either size or scale_factor should be defined",
            ))
        }
        (Some(size), None) => {
            let size = per_dim(OP, "size", size, spatial)?;
            (
                size.iter().map(|&s| s as i128).collect(),
                vec![None; spatial],
            )
        }
        (None, Some(f)) => {
            let f = per_dim(OP, "scale_factor", f, spatial)?;
            let out: Vec<i128> = (0..spatial)
                .map(|i| {
                    let o = (input[i] as f64 * f[i]).floor();
                    if o.is_finite() && o.abs() < 1e30 {
                        o as i128
                    } else {
                        -1
                    }
                })
                .collect();
            let scales = if opts.recompute_scale_factor {
                vec![None; spatial]
            } else {
                f.iter().map(|&s| Some(s)).collect()
            };
            (out, scales)
        }
    };
    let area = opts.mode == InterpolateMode::Area;
    // `area` is adaptive average pooling, with its own checks (an output of
    // 0 is an empty result there).
    if let Some(i) = (0..spatial).find(|&i| out[i] < 0 || (!area && (input[i] == 0 || out[i] == 0)))
    {
        return Err(TensorError::value(
            OP,
            format!(
                "input and output sizes should be greater than 0, but got input {input:?} and output size {} in spatial dim {i}",
                out[i]
            ),
        ));
    }
    if !area && shape[1] == 0 {
        // PyTorch's upsample kernels take an empty batch, not an empty
        // channel dim (`upsample_*d_common_check`).
        return Err(TensorError::shape(
            OP,
            format!(
                "Non-empty {}D data tensor expected but got a tensor with sizes {shape:?}",
                shape.len()
            ),
        ));
    }
    let out: Vec<usize> = out
        .iter()
        .map(|&o| {
            usize::try_from(o)
                .ok()
                .filter(|&o| o <= crate::shape::MAX_NUMEL)
        })
        .collect::<Option<_>>()
        .ok_or_else(|| {
            TensorError::overflow(OP, format!("the output size {out:?} is too large"))
        })?;
    let mut full = shape[..2].to_vec();
    full.extend(&out);
    crate::shape::checked_numel(OP, &full)?;
    let float_ok = dtype.is_float();
    let supported = match opts.mode {
        InterpolateMode::Nearest | InterpolateMode::NearestExact => float_ok || dtype == DType::U8,
        InterpolateMode::Area => true,
        _ => float_ok,
    };
    if !supported {
        return Err(TensorError::unsupported(OP, dtype));
    }
    let f64_math = dtype == DType::F64;
    // PyTorch's `compute_scales_value` and `area_pixel_compute_scale`, in f32
    // (f64 for f64 inputs).
    let round = |v: f64| if f64_math { v } else { f64::from(v as f32) };
    let weight = |v: f64| match dtype {
        DType::F16 => half::f16::from_f64(round(v)).to_f64(),
        DType::BF16 => half::bf16::from_f64(round(v)).to_f64(),
        _ => round(v),
    };
    let scale_of = |i: usize| -> f64 {
        match scales[i] {
            Some(s) if s > 0.0 => round(1.0 / s),
            _ => round(input[i] as f64 / out[i] as f64),
        }
    };
    let axes = if opts.mode == InterpolateMode::Area {
        Vec::new()
    } else {
        (0..spatial)
            .map(|i| {
                let (l, o) = (input[i], out[i]);
                let mut idx: Vec<i64> = Vec::new();
                idx.try_reserve_exact(o)
                    .map_err(|_| TensorError::overflow(OP, format!("{o} output elements")))?;
                match opts.mode {
                    InterpolateMode::Nearest | InterpolateMode::NearestExact => {
                        let exact = opts.mode == InterpolateMode::NearestExact;
                        let scale = scale_of(i) as f32;
                        // PyTorch's `nearest_idx` copies (`o == l`) or halves
                        // (`o == 2 l`) without the scale in its 2-D kernels
                        // only; its 1-D and 3-D kernels use the scale there
                        // too (a scale_factor of 1.1 on 5 elements reads
                        // 0, 0, 1, 2, 3).
                        let special = !exact && spatial == 2;
                        for d in 0..o {
                            let s = if special && o == l {
                                d as i64
                            } else if special && o == 2 * l {
                                (d >> 1) as i64
                            } else {
                                let at = if exact {
                                    (d as f32 + 0.5) * scale
                                } else {
                                    d as f32 * scale
                                };
                                (at.floor() as i64).min(l as i64 - 1)
                            };
                            idx.push(s);
                        }
                        Ok(Axis::Gather(idx))
                    }
                    _ => {
                        let align = opts.align_corners.unwrap_or(false);
                        let scale = if align {
                            if o > 1 {
                                round((l as f64 - 1.0) / (o as f64 - 1.0))
                            } else {
                                0.0
                            }
                        } else {
                            scale_of(i)
                        };
                        let (mut i1, mut w0, mut w1) = (Vec::new(), Vec::new(), Vec::new());
                        for d in 0..o {
                            if o == l {
                                // PyTorch's `compute_source_index_and_lambda`
                                // copies an unresized dim, whatever the scale.
                                idx.push(d as i64);
                                i1.push(d as i64);
                                w0.push(1.0);
                                w1.push(0.0);
                                continue;
                            }
                            let src = if align {
                                round(scale * d as f64)
                            } else {
                                let s = round(round(scale * round(d as f64 + 0.5)) - 0.5);
                                s.max(0.0)
                            };
                            let h0 = (src as i64).min(l as i64 - 1);
                            let h1 = h0 + i64::from(h0 < l as i64 - 1);
                            // The weights are stored in the input's dtype
                            // (f16/bf16 rounded), `1 - lambda1` of the
                            // stored one, as PyTorch's.
                            let lambda1 = weight(round(src - h0 as f64).clamp(0.0, 1.0));
                            idx.push(h0);
                            i1.push(h1);
                            w1.push(lambda1);
                            w0.push(weight(1.0 - lambda1));
                        }
                        Ok(Axis::Blend {
                            i0: idx,
                            i1,
                            w0,
                            w1,
                        })
                    }
                }
            })
            .collect::<Result<Vec<_>>>()?
    };
    Ok(InterpolatePlan {
        out,
        axes,
        area: opts.mode == InterpolateMode::Area,
        compute: if dtype.is_float() {
            acc_dtype(dtype)
        } else {
            dtype
        },
    })
}

impl InterpolatePlan {
    /// The resized `x` (a `Tensor` or a `Var`; the input this plan checked).
    pub fn resize<T: Composite>(&self, x: &T) -> std::result::Result<T, T::Error> {
        let dtype = x.dtype();
        if self.area {
            let spatial = self.out.len();
            return adaptive_pool("interpolate", spatial, x, &self.out);
        }
        let device = x.device();
        let spatial = self.out.len();
        let mut y = x.to_dtype(self.compute)?;
        for i in (0..spatial).rev() {
            let d = (2 + i) as i64;
            let along = |v: &[f64]| -> Result<Tensor> {
                let mut shape = vec![v.len()];
                shape.extend(std::iter::repeat_n(1, spatial - 1 - i));
                Tensor::from_slice(v, &shape, device)?.to_dtype(self.compute)
            };
            let index = |v: &[i64]| Tensor::from_slice(v, &[v.len()], device);
            y = match &self.axes[i] {
                Axis::Gather(idx) => y.index_select(d, &index(idx)?)?,
                Axis::Blend { i0, i1, w0, w1 } => {
                    let a = y
                        .index_select(d, &index(i0)?)?
                        .mul(&T::constant(along(w0)?))?;
                    let b = y
                        .index_select(d, &index(i1)?)?
                        .mul(&T::constant(along(w1)?))?;
                    a.add(&b)?
                }
            };
        }
        y.to_dtype(dtype)
    }
}

impl Tensor {
    /// `F.interpolate(self, size, scale_factor, mode, align_corners,
    /// recompute_scale_factor)` of a `[N, C, ...]` input with 1 to 3
    /// spatial dims (see [`InterpolateOptions`] and the module docs).
    pub fn interpolate(&self, opts: &InterpolateOptions) -> Result<Tensor> {
        let plan = interpolate_plan(self.shape(), self.dtype(), opts)?;
        plan.resize(self)
    }
}
