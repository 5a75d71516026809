//! Pooling: `F.max_pool1d/2d/3d` (with or without indices),
//! `F.avg_pool1d/2d/3d` and `F.adaptive_avg_pool1d/2d/3d`, on every
//! backend and differentiated by strata-autograd. [`pool_plan`] checks the
//! options and the input as PyTorch 2.15's CPU does (its limits on padding, the output size with
//! `ceil_mode`, the dtypes it has kernels for) and holds the shapes.
//!
//! - Max and average pooling are one fused pass each over the windows of
//!   `PoolPlan::windows` ([`Tensor::window_max`], [`Tensor::window_means`]):
//!   max pooling finds each window's index as PyTorch's loop does (the first
//!   maximum, the last NaN, padding never chosen), and the `Var` form is one
//!   recorded node whose gradient goes to the element each window's index
//!   names ([`Tensor::window_max_backward`]); average pooling sums a window's input
//!   elements in scan order in the computation type (f32 for f16/bf16,
//!   wrapping i64) and divides by PyTorch's divisor (the window clipped to
//!   the padded input, or to the input with `count_include_pad=false`, or
//!   `divisor_override`; i64 truncates); its gradient is the fused adjoint
//!   ([`Tensor::window_means_backward`]).
//! - Adaptive average pooling averages the windows `[floor(i L / O),
//!   ceil((i + 1) L / O))` of each spatial dim in turn (a window's mean is
//!   the mean of its rows' means), one mean per window joined by `cat`; an
//!   output of 1 in every dim is the mean of the spatial dims, as PyTorch
//!   takes it (before its checks: empty dims give NaN).

use crate::dtype::DType;
use crate::error::{Result, TensorError};
use crate::ops::composite::Composite;
use crate::ops::nn::acc_dtype;
use crate::ops::windows::{is_batched, per_dim, with_batch, without_batch, AvgMode, Windows};
use crate::shape;
use crate::tensor::Tensor;

/// The options of `F.max_pool*d` and `F.avg_pool*d`: each list holds one
/// value for every spatial dim or one per dim (PyTorch's int-or-tuple).
///
/// ```
/// use strata_tensor::{Device, PoolOptions, Tensor};
/// let x = Tensor::arange(0.0, 16.0, 1.0, None, Device::Cpu)?.reshape(&[1, 1, 4, 4])?;
/// let opts = PoolOptions::new(&[2]);
/// assert_eq!(x.max_pool2d(&opts)?.to_vec::<f32>()?, [5., 7., 13., 15.]);
/// assert_eq!(x.avg_pool2d(&opts)?.to_vec::<f32>()?, [2.5, 4.5, 10.5, 12.5]);
/// # Ok::<(), strata_tensor::TensorError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PoolOptions {
    /// The window's size.
    pub kernel_size: Vec<usize>,
    /// The step between windows; `None` (PyTorch's default) is the kernel
    /// size.
    pub stride: Option<Vec<usize>>,
    /// Implicit padding on both sides (at most half the kernel): -inf for
    /// max pooling, zeros for average pooling.
    pub padding: Vec<usize>,
    /// The spacing of a window's elements (max pooling only).
    pub dilation: Vec<usize>,
    /// Whether the output size rounds up (a last window may hang over the
    /// end, but must start inside the input or its left padding).
    pub ceil_mode: bool,
    /// Whether average pooling counts padded zeros in a window's size.
    pub count_include_pad: bool,
    /// A divisor average pooling uses instead of the window's size.
    pub divisor_override: Option<i64>,
}

impl PoolOptions {
    /// Windows of `kernel_size`, with PyTorch's defaults otherwise (stride
    /// the kernel size, padding 0, dilation 1, floor mode, padding counted).
    pub fn new(kernel_size: &[usize]) -> Self {
        PoolOptions {
            kernel_size: kernel_size.to_vec(),
            stride: None,
            padding: vec![0],
            dilation: vec![1],
            ceil_mode: false,
            count_include_pad: true,
            divisor_override: None,
        }
    }

    /// Sets the stride.
    pub fn stride(mut self, stride: &[usize]) -> Self {
        self.stride = Some(stride.to_vec());
        self
    }

    /// Sets the padding.
    pub fn padding(mut self, padding: &[usize]) -> Self {
        self.padding = padding.to_vec();
        self
    }

    /// Sets the dilation (max pooling only).
    pub fn dilation(mut self, dilation: &[usize]) -> Self {
        self.dilation = dilation.to_vec();
        self
    }

    /// Sets `ceil_mode`.
    pub fn ceil_mode(mut self, ceil_mode: bool) -> Self {
        self.ceil_mode = ceil_mode;
        self
    }

    /// Sets `count_include_pad` (average pooling only).
    pub fn count_include_pad(mut self, count_include_pad: bool) -> Self {
        self.count_include_pad = count_include_pad;
        self
    }

    /// Sets `divisor_override` (average pooling only; not 0).
    pub fn divisor_override(mut self, divisor: i64) -> Self {
        self.divisor_override = Some(divisor);
        self
    }
}

/// Which pooling a [`PoolPlan`] is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PoolKind {
    /// `max_pool*d`.
    Max,
    /// `avg_pool*d`.
    Avg,
}

/// What a max or average pooling computes with, from its checked options
/// and input (shared by the `Tensor` forms here and strata-autograd's).
#[derive(Clone, Debug, PartialEq)]
pub struct PoolPlan {
    /// Whether the input has a batch dim (else one is added, then removed).
    pub batched: bool,
    /// The windows it pools over.
    pub windows: Windows,
}

/// Checks a pooling's options and input as PyTorch 2.15's CPU does and
/// plans it. `op` names the calling function and `spatial` its spatial
/// dims (1, 2 or 3).
pub fn pool_plan(
    op: &'static str,
    kind: PoolKind,
    spatial: usize,
    shape: &[usize],
    dtype: DType,
    opts: &PoolOptions,
) -> Result<PoolPlan> {
    let kernel = per_dim(op, "kernel_size", &opts.kernel_size, spatial)?;
    let stride = match &opts.stride {
        Some(s) if !s.is_empty() => per_dim(op, "stride", s, spatial)?,
        _ => kernel.clone(),
    };
    let padding = per_dim(op, "padding", &opts.padding, spatial)?;
    let dilation = per_dim(op, "dilation", &opts.dilation, spatial)?;
    if kind == PoolKind::Avg {
        if dilation.iter().any(|&d| d != 1) {
            return Err(TensorError::value(
                op,
                format!("average pooling has no dilation, but got dilation {dilation:?}"),
            ));
        }
        if opts.divisor_override == Some(0) {
            return Err(TensorError::value(op, "divisor must be not zero"));
        }
    } else if opts.divisor_override.is_some() || !opts.count_include_pad {
        return Err(TensorError::value(
            op,
            "divisor_override and count_include_pad are options of average pooling, not of max pooling",
        ));
    }
    let supported = match kind {
        PoolKind::Max => dtype.is_float() || dtype == DType::I64,
        PoolKind::Avg => dtype.is_float() || dtype == DType::I64,
    };
    if !supported {
        return Err(TensorError::unsupported(op, dtype));
    }
    if kernel.contains(&0) {
        return Err(TensorError::value(
            op,
            format!("kernel size should be greater than zero, but got kernel_size {kernel:?}"),
        ));
    }
    if stride.contains(&0) {
        return Err(TensorError::value(
            op,
            format!("stride should not be zero (stride {stride:?})"),
        ));
    }
    if dilation.contains(&0) {
        return Err(TensorError::value(
            op,
            format!("dilation should be greater than zero, but got dilation {dilation:?}"),
        ));
    }
    let batched = is_batched(op, shape, spatial)?;
    let first = usize::from(batched);
    if shape[first..].contains(&0) {
        return Err(TensorError::shape(
            op,
            format!(
                "expected an input whose dims other than the batch are not empty, but got input \
                 of shape {shape:?}"
            ),
        ));
    }
    if let Some(i) = (0..spatial).find(|&i| padding[i] > kernel[i] / 2) {
        return Err(TensorError::value(
            op,
            format!(
                "pad should be at most half of effective kernel size, but got pad={}, kernel_size={} \
                 and dilation={}",
                padding[i], kernel[i], dilation[i]
            ),
        ));
    }
    let input = shape[shape.len() - spatial..].to_vec();
    if kind == PoolKind::Avg && spatial == 3 && (0..3).any(|i| input[i] < kernel[i]) {
        // PyTorch's avg_pool3d alone compares the unpadded input.
        return Err(TensorError::shape(
            op,
            format!("input image {input:?} smaller than kernel size {kernel:?}"),
        ));
    }
    let overflow = || TensorError::overflow(op, format!("the options {opts:?} overflow"));
    let mut extent = Vec::with_capacity(spatial);
    let mut out = Vec::with_capacity(spatial);
    for i in 0..spatial {
        let e = dilation[i]
            .checked_mul(kernel[i] - 1)
            .and_then(|e| e.checked_add(1))
            .filter(|&e| e <= shape::MAX_NUMEL)
            .ok_or_else(overflow)?;
        // PyTorch's `pooling_output_shape`, in i128 (no wrap on any usize).
        let (l, p, s) = (input[i] as i128, padding[i] as i128, stride[i] as i128);
        let span = l + 2 * p - e as i128 + if opts.ceil_mode { s - 1 } else { 0 };
        let mut o = span.div_euclid(s) + 1;
        if opts.ceil_mode && (o - 1) * s >= l + p {
            o -= 1;
        }
        extent.push(e);
        out.push(o);
    }
    if out.iter().any(|&o| o < 1) {
        return Err(TensorError::shape(
            op,
            format!(
                "given input of spatial size {input:?}, the calculated output size {out:?} is too small"
            ),
        ));
    }
    let out: Vec<usize> = out.iter().map(|&o| o as usize).collect();
    // The padded input and the output fit a tensor (an empty batch lets
    // the spatial dims be anything).
    shape::checked_numel(op, &input)?;
    let mut out_full = shape[..shape.len() - spatial].to_vec();
    out_full.extend(&out);
    shape::checked_numel(op, &out_full)?;
    if (0..spatial).any(|i| {
        input[i] as u128 + 2 * padding[i] as u128 + extent[i] as u128 > shape::MAX_NUMEL as u128
    }) {
        return Err(overflow());
    }
    Ok(PoolPlan {
        batched,
        windows: Windows::new(&input, &out, &kernel, &stride, &padding, &dilation),
    })
}

impl PoolPlan {
    /// Average pooling of `x` (the input this plan checked; a `Tensor` or
    /// a `Var`): one fused pass ([`Tensor::window_means`]).
    pub fn average<T: Composite>(
        &self,
        x: &T,
        opts: &PoolOptions,
    ) -> std::result::Result<T, T::Error> {
        let mode = AvgMode {
            count_include_pad: opts.count_include_pad,
            divisor_override: opts.divisor_override,
        };
        let y = with_batch(x, self.batched)?.window_means(&self.windows, mode)?;
        without_batch(y, self.batched)
    }
}

/// One spatial dim of an adaptive average pooling, as few ops: its windows
/// grouped by length (at most three lengths), each group's starts as an
/// index for the dim's `unfold(len, 1)`, and the order that puts the
/// groups' means back in window order (`None` where they already are).
pub struct AdaptiveDim {
    /// (window length, the starts of the windows of that length).
    pub groups: Vec<(i64, Tensor)>,
    /// Window `i`'s position among the groups' means, joined.
    pub order: Option<Tensor>,
}

impl AdaptiveDim {
    /// Plans a dim of `len` elements pooled to `out` windows.
    pub fn new(op: &'static str, len: usize, out: usize, device: crate::Device) -> Result<Self> {
        let windows = adaptive_windows(op, len, out)?;
        let mut lengths: Vec<i64> = windows.iter().map(|w| w.1).collect();
        lengths.sort_unstable();
        lengths.dedup();
        let mut groups = Vec::with_capacity(lengths.len());
        let mut order = vec![0i64; 0];
        try_reserve(op, &mut order, windows.len())?;
        order.resize(windows.len(), 0);
        let mut next = 0i64;
        for &l in &lengths {
            let mut starts = Vec::new();
            try_reserve(op, &mut starts, windows.len())?;
            for (i, w) in windows.iter().enumerate() {
                if w.1 == l {
                    starts.push(w.0);
                    order[i] = next;
                    next += 1;
                }
            }
            let n = starts.len();
            groups.push((l, Tensor::from_vec(starts, &[n], device)?));
        }
        let sorted = order.iter().enumerate().all(|(i, &o)| o == i as i64);
        let order = if sorted {
            None
        } else {
            Some(Tensor::from_vec(order, &[windows.len()], device)?)
        };
        Ok(AdaptiveDim { groups, order })
    }
}

fn try_reserve<T>(op: &'static str, v: &mut Vec<T>, n: usize) -> Result<()> {
    v.try_reserve_exact(n)
        .map_err(|_| TensorError::overflow(op, format!("{n} windows do not fit in host memory")))
}

/// `F.adaptive_avg_pool{spatial}d(x, output_size)` of `x` (a `Tensor` or
/// a `Var`): PyTorch's global-mean shortcut for an output of 1, its checks
/// ([`adaptive_pool_plan`]), an empty result for an empty input or output,
/// else [`adaptive_average`].
pub fn adaptive_pool<T: Composite>(
    op: &'static str,
    spatial: usize,
    x: &T,
    output_size: &[usize],
) -> std::result::Result<T, T::Error> {
    let shape = x.shape();
    if let Some(dims) = global_mean_dims(op, spatial, shape.len(), output_size)? {
        return x.mean(Some(&dims), true);
    }
    let (batched, out) = adaptive_pool_plan(op, spatial, shape, x.dtype(), output_size)?;
    if shape.contains(&0) || out.contains(&0) {
        // Nothing to average: the empty result, still a function of `x`
        // (the spatial dims pooled to 0 narrowed away, then the empty
        // view reshaped; nothing of the output's size is allocated, so an
        // empty batch takes any output size, as in PyTorch).
        let mut y = x.clone();
        for (i, &o) in out.iter().enumerate() {
            if o == 0 {
                y = y.narrow((shape.len() - spatial + i) as i64, 0, 0)?;
            }
        }
        let mut full = shape[..shape.len() - spatial].to_vec();
        full.extend(&out);
        // Sizes and strides that fit an i64, as PyTorch's empty result
        // must have ("Stride calculation overflowed").
        shape::check_contiguous(op, &full)?;
        let full: Vec<i64> = full.iter().map(|&s| s as i64).collect();
        return y.reshape(&full);
    }
    adaptive_average(op, x, batched, &out, x.dtype())
}

/// Adaptive average pooling of a float input `x` (a `Tensor` or a `Var`)
/// that [`adaptive_pool_plan`] checked to `out` per spatial dim, in the
/// computation dtype, rounded to `dtype`: each dim in turn, its windows'
/// means by length group ([`AdaptiveDim`]).
pub fn adaptive_average<T: Composite>(
    op: &'static str,
    x: &T,
    batched: bool,
    out: &[usize],
    dtype: DType,
) -> std::result::Result<T, T::Error> {
    let spatial = out.len();
    let shape = x.shape();
    let mut out_shape = shape[..shape.len() - spatial].to_vec();
    out_shape.extend(out);
    // The result must be allocatable before its windows are planned on the
    // host (an absurd output size is the allocator's typed error).
    drop(Tensor::empty(&out_shape, dtype, x.device())?);
    let compute = acc_dtype(dtype);
    let mut y = with_batch(x, batched)?.to_dtype(compute)?;
    for (i, &o) in out.iter().enumerate() {
        let d = (2 + i) as i64;
        let plan = AdaptiveDim::new(op, y.shape()[2 + i], o, y.device())?;
        let means = plan
            .groups
            .iter()
            .map(|(len, starts)| {
                y.unfold(d, *len, 1)?
                    .index_select(d, starts)?
                    .mean(Some(&[-1]), false)
            })
            .collect::<std::result::Result<Vec<_>, _>>()?;
        let joined = T::cat(&means, d)?;
        y = match &plan.order {
            Some(order) => joined.index_select(d, order)?,
            None => joined,
        };
    }
    without_batch(y.to_dtype(dtype)?, batched)
}

/// Adaptive pooling's windows of a dim of `len` elements pooled to `out`:
/// window `i` starts at `floor(i L / O)` and ends before `ceil((i + 1) L /
/// O)`; (start, length) each.
pub fn adaptive_windows(op: &'static str, len: usize, out: usize) -> Result<Vec<(i64, i64)>> {
    let mut w = Vec::new();
    try_reserve(op, &mut w, out)?;
    // In u128: `i * len` does not wrap for any sizes.
    let (l, o) = (len as u128, out as u128);
    w.extend((0..o).map(|i| {
        let start = i * l / o;
        let end = ((i + 1) * l).div_ceil(o);
        (start as i64, (end - start) as i64)
    }));
    Ok(w)
}

/// Checks an adaptive average pooling's input and output size as PyTorch
/// does; returns whether the input is batched and the output size per
/// spatial dim.
pub fn adaptive_pool_plan(
    op: &'static str,
    spatial: usize,
    shape: &[usize],
    dtype: DType,
    output_size: &[usize],
) -> Result<(bool, Vec<usize>)> {
    let out = per_dim(op, "output_size", output_size, spatial)?;
    // PyTorch dispatches on the dtype only where there is work to do (its
    // 3-D form always).
    if !dtype.is_float() && (spatial == 3 || !(shape.contains(&0) || out.contains(&0))) {
        return Err(TensorError::unsupported(op, dtype));
    }
    let batched = is_batched(op, shape, spatial)?;
    if let Some(d) = (shape.len() - spatial..shape.len()).find(|&d| shape[d] == 0) {
        return Err(TensorError::shape(
            op,
            format!(
                "expected input to have non-zero size for non-batch dimensions, but input has \
                 shape {shape:?} with dimension {d} being empty"
            ),
        ));
    }
    Ok((batched, out))
}

/// Where adaptive average pooling's output is 1 in every spatial dim,
/// PyTorch takes the mean of the last `spatial` dims (keeping them) before
/// any of its checks, so empty dims give NaN: those dims (`None` otherwise).
/// The 1-D form checks the rank first.
pub fn global_mean_dims(
    op: &'static str,
    spatial: usize,
    ndim: usize,
    output_size: &[usize],
) -> Result<Option<Vec<i64>>> {
    let out = per_dim(op, "output_size", output_size, spatial)?;
    if out.iter().any(|&o| o != 1) || (spatial == 1 && ndim != 2 && ndim != 3) {
        return Ok(None);
    }
    Ok(Some((1..=spatial as i64).map(|d| -d).collect()))
}

impl Tensor {
    /// Max pooling's values and indices (each an index into the flattened
    /// spatial dims of the input, as PyTorch's `return_indices=True`).
    fn max_pool_nd(
        &self,
        op: &'static str,
        spatial: usize,
        opts: &PoolOptions,
    ) -> Result<(Tensor, Tensor)> {
        let plan = pool_plan(op, PoolKind::Max, spatial, self.shape(), self.dtype(), opts)?;
        let x = with_batch(self, plan.batched)?;
        let (values, indices) = x.window_max(&plan.windows)?;
        Ok((
            without_batch(values, plan.batched)?,
            without_batch(indices, plan.batched)?,
        ))
    }

    fn avg_pool_nd(&self, op: &'static str, spatial: usize, opts: &PoolOptions) -> Result<Tensor> {
        let plan = pool_plan(op, PoolKind::Avg, spatial, self.shape(), self.dtype(), opts)?;
        plan.average(self, opts)
    }

    fn adaptive_avg_pool_nd(
        &self,
        op: &'static str,
        spatial: usize,
        output_size: &[usize],
    ) -> Result<Tensor> {
        adaptive_pool(op, spatial, self, output_size)
    }
}

/// Declares the 1-, 2- and 3-D forms of each pooling.
macro_rules! pooling_forms {
    ($($d:literal: $max:ident, $max_idx:ident, $avg:ident, $adaptive:ident;)*) => {
        impl Tensor {
            $(
                #[doc = concat!("`F.", stringify!($max), "`: the maximum of each window of a `[N, C, ...]` or `[C, ...]` input with ", stringify!($d), " spatial dims (see [`PoolOptions`]); NaN wins, as in PyTorch. f16, bf16, f32, f64 and i64, as PyTorch's CPU.")]
                pub fn $max(&self, opts: &PoolOptions) -> Result<Tensor> {
                    Ok(self.max_pool_nd(stringify!($max), $d, opts)?.0)
                }

                #[doc = concat!("`F.", stringify!($max), "(..., return_indices=True)`: the values and, for each, its index in the input's flattened spatial dims (i64).")]
                pub fn $max_idx(&self, opts: &PoolOptions) -> Result<(Tensor, Tensor)> {
                    self.max_pool_nd(stringify!($max), $d, opts)
                }

                #[doc = concat!("`F.", stringify!($avg), "`: the mean of each window of a `[N, C, ...]` or `[C, ...]` input with ", stringify!($d), " spatial dims (see [`PoolOptions`]); i64 inputs divide with truncation, as PyTorch's CPU.")]
                pub fn $avg(&self, opts: &PoolOptions) -> Result<Tensor> {
                    self.avg_pool_nd(stringify!($avg), $d, opts)
                }

                #[doc = concat!("`F.", stringify!($adaptive), "(input, output_size)`: ", stringify!($d), " spatial dims averaged down to `output_size` (one value for every dim or one per dim), window `i` of a dim of `L` spanning `[floor(i L / O), ceil((i + 1) L / O))`.")]
                pub fn $adaptive(&self, output_size: &[usize]) -> Result<Tensor> {
                    self.adaptive_avg_pool_nd(stringify!($adaptive), $d, output_size)
                }
            )*
        }
    };
}

pooling_forms! {
    1: max_pool1d, max_pool1d_with_indices, avg_pool1d, adaptive_avg_pool1d;
    2: max_pool2d, max_pool2d_with_indices, avg_pool2d, adaptive_avg_pool2d;
    3: max_pool3d, max_pool3d_with_indices, avg_pool3d, adaptive_avg_pool3d;
}
