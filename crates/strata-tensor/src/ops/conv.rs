//! Convolution, `F.conv1d`, `F.conv2d` and `F.conv3d`. [`conv_plan`] checks
//! the operands as PyTorch 2.15 does and holds the shapes; one op,
//! [`ConvPlan::product`] (and [`ConvPlan::product_backward`] for its
//! gradients), convolves, which a `Var` records as one node.
//!
//! On a GPU with cuDNN (and [`cudnn_enabled`]) each pass is one cuDNN call
//! (`backend/cuda/cudnn.rs`), as in PyTorch: implicit GEMM on tensor cores,
//! the workspace from strata's caching allocator; the bias is added after,
//! in the output's dtype, as PyTorch adds it.
//!
//! Elsewhere (the CPU, a GPU without cuDNN, a geometry cuDNN does not
//! take) as im2col and one batched matrix product: the input's windows laid
//! out once as `[N, groups, C/groups * K, P]` columns
//! ([`Tensor::window_columns`]) and multiplied by the weight viewed as
//! `[groups, C_out/groups, C/groups * K]`, a chunk of samples at a time
//! where the columns are large ([`conv_chunk_bytes`]). f16 and bf16 products
//! there accumulate in f32 and are rounded once (the bias added before
//! rounding): on a GPU the columns stay in the operands' dtype and cuBLAS
//! multiplies them on tensor cores into f32 ([`Tensor::matmul_wide`]); on
//! the CPU the operands are widened to f32 first. Integer convolutions
//! (PyTorch's CPU has them) wrap as its slow path does.

use crate::backend::{ConvPass, LibraryConv};
use crate::dtype::DType;
use crate::error::{Result, TensorError};
use crate::ops::composite::Composite;
use crate::ops::elementwise::launch;
use crate::ops::nn::acc_dtype;
use crate::ops::windows::{is_batched, per_dim, with_batch, without_batch, Windows};
use crate::shape;
use crate::tensor::Tensor;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// How a convolution pads its input (PyTorch's `padding` argument).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConvPadding {
    /// Zeros on both sides of each spatial dim: one value for every dim or
    /// one per dim (PyTorch's int or tuple).
    Explicit(Vec<usize>),
    /// `padding="same"`: the output as long as the input (stride 1 only);
    /// an odd total puts the extra zero after, as PyTorch does.
    Same,
    /// `padding="valid"`: no padding.
    Valid,
}

/// The options of `F.conv1d/2d/3d` after the operands: each list holds one
/// value for every spatial dim or one per dim, as PyTorch's int-or-tuple.
///
/// ```
/// use strata_tensor::ConvOptions;
/// let o = ConvOptions::new().stride(&[2]).padding(&[1, 0]).groups(2);
/// assert_eq!(o.groups, 2);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConvOptions {
    /// The step between windows (PyTorch's default 1).
    pub stride: Vec<usize>,
    /// The padding (PyTorch's default 0).
    pub padding: ConvPadding,
    /// The spacing of a window's elements (PyTorch's default 1).
    pub dilation: Vec<usize>,
    /// Blocked channel groups: input and output channels both divide into
    /// `groups` independent convolutions (PyTorch's default 1).
    pub groups: usize,
    /// Transposed convolutions only: size added to one side of the output
    /// (PyTorch's default 0; smaller than the stride or the dilation).
    pub output_padding: Vec<usize>,
}

impl Default for ConvOptions {
    fn default() -> Self {
        ConvOptions {
            stride: vec![1],
            padding: ConvPadding::Explicit(vec![0]),
            dilation: vec![1],
            groups: 1,
            output_padding: vec![0],
        }
    }
}

impl ConvOptions {
    /// PyTorch's defaults: stride 1, padding 0, dilation 1, one group.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the stride.
    pub fn stride(mut self, stride: &[usize]) -> Self {
        self.stride = stride.to_vec();
        self
    }

    /// Sets an explicit zero padding.
    pub fn padding(mut self, padding: &[usize]) -> Self {
        self.padding = ConvPadding::Explicit(padding.to_vec());
        self
    }

    /// Sets `padding="same"` or `padding="valid"` (or an explicit one).
    pub fn padding_mode(mut self, padding: ConvPadding) -> Self {
        self.padding = padding;
        self
    }

    /// Sets the dilation.
    pub fn dilation(mut self, dilation: &[usize]) -> Self {
        self.dilation = dilation.to_vec();
        self
    }

    /// Sets the number of groups.
    pub fn groups(mut self, groups: usize) -> Self {
        self.groups = groups;
        self
    }

    /// Sets the output padding (transposed convolutions only).
    pub fn output_padding(mut self, output_padding: &[usize]) -> Self {
        self.output_padding = output_padding.to_vec();
        self
    }
}

/// What a convolution computes with, from its checked operands (shared by
/// the `Tensor` forms here and strata-autograd's `Var` forms).
#[derive(Clone, Debug, PartialEq)]
pub struct ConvPlan {
    /// Whether the input has a batch dim (else one is added, then removed).
    pub batched: bool,
    /// The windows the columns are taken from (the padding implicit: zeros
    /// before the input and past its end).
    pub windows: Windows,
    /// `[N, G, C/G * prod(K), prod(O)]`: the columns.
    pub columns: [i64; 4],
    /// `[G, C_out/G, C/G * prod(K)]`: the weight against the columns.
    pub weight: [i64; 3],
    /// `[N, C_out, O...]`: the result.
    pub out: Vec<i64>,
    /// `[C_out, 1, ...]`: the bias against the result.
    pub bias: Vec<i64>,
    /// The computation dtype, which the operands are cast to: the
    /// input's, but f32 for f16/bf16 on the CPU ([`conv_plan`] plans for
    /// the CPU; [`convolution`] for the operands' device).
    pub compute: DType,
}

/// Checks a convolution's operands as PyTorch 2.15 does (the option
/// values, the ranks, the groups against the channels, the bias, the
/// dtypes, the kernel against the padded input) and plans it. `op` names
/// the calling function and `spatial` its spatial dims (1, 2 or 3).
pub fn conv_plan(
    op: &'static str,
    spatial: usize,
    input: (&[usize], DType),
    weight: (&[usize], DType),
    bias: Option<(&[usize], DType)>,
    opts: &ConvOptions,
) -> Result<ConvPlan> {
    let (x, xd) = input;
    let (w, wd) = weight;
    let batched = is_batched(op, x, spatial)?;
    if opts.output_padding.iter().any(|&p| p != 0) {
        return Err(TensorError::value(
            op,
            format!(
                "output_padding {:?} is an option of transposed convolutions only",
                opts.output_padding
            ),
        ));
    }
    let stride = per_dim(op, "stride", &opts.stride, spatial)?;
    let dilation = per_dim(op, "dilation", &opts.dilation, spatial)?;
    let padding = match &opts.padding {
        ConvPadding::Explicit(p) => {
            let p = per_dim(op, "padding", p, spatial)?;
            p.iter().map(|&p| (p, p)).collect::<Vec<_>>()
        }
        ConvPadding::Valid => vec![(0, 0); spatial],
        // Filled in once the kernel is known.
        ConvPadding::Same => Vec::new(),
    };
    if stride.contains(&0) {
        return Err(TensorError::value(
            op,
            format!("non-positive stride is not supported (stride {stride:?})"),
        ));
    }
    if dilation.contains(&0) {
        return Err(TensorError::value(
            op,
            format!("non-positive dilation is not supported (dilation {dilation:?})"),
        ));
    }
    let groups = opts.groups;
    if groups == 0 {
        return Err(TensorError::value(
            op,
            "non-positive groups is not supported (groups 0)",
        ));
    }
    if opts.padding == ConvPadding::Same && stride.iter().any(|&s| s != 1) {
        return Err(TensorError::value(
            op,
            format!(
                "padding=\"same\" is not supported for strided convolutions (stride {stride:?})"
            ),
        ));
    }
    // PyTorch compares the dtypes only where there is work to do.
    if !x.contains(&0) && (xd != wd || bias.is_some_and(|(_, bd)| bd != xd)) {
        return Err(TensorError::dtype(
            op,
            format!(
                "the input ({xd:?}), weight ({wd:?}) and bias ({:?}) must have one dtype",
                bias.map(|b| b.1)
            ),
        ));
    }
    if xd == DType::Bool {
        return Err(TensorError::unsupported(op, xd));
    }
    // The input with its batch dim.
    let mut xs = x.to_vec();
    if !batched {
        xs.insert(0, 1);
    }
    if w.len() != spatial + 2 {
        return Err(TensorError::shape(
            op,
            format!(
                "expected a {}-D weight [C_out, C_in / groups, kernel...], but got weight of shape {w:?}",
                spatial + 2
            ),
        ));
    }
    if w[0] < groups || w[0] % groups != 0 {
        return Err(TensorError::shape(
            op,
            format!(
                "given groups={groups}, expected the weight's dim 0 (output channels) to be a \
                 positive multiple of {groups}, but got weight of shape {w:?}"
            ),
        ));
    }
    if w[1].checked_mul(groups) != Some(xs[1]) {
        return Err(TensorError::shape(
            op,
            format!(
                "given groups={groups} and weight of shape {w:?}, expected the input (shape {x:?}) \
                 to have {} channels, but it has {}",
                w[1] as u128 * groups as u128,
                xs[1]
            ),
        ));
    }
    if let Some((b, _)) = bias {
        if b != [w[0]] {
            return Err(TensorError::shape(
                op,
                format!(
                    "given weight of shape {w:?}, expected the bias to be 1-D with {} elements, \
                     but got bias of shape {b:?}",
                    w[0]
                ),
            ));
        }
    }
    let kernel = &w[2..];
    if kernel.contains(&0) {
        return Err(TensorError::shape(
            op,
            format!("the kernel {kernel:?} (weight shape {w:?}) has an empty spatial dim"),
        ));
    }
    let extent: Vec<usize> = (0..spatial)
        .map(|i| {
            dilation[i]
                .checked_mul(kernel[i] - 1)
                .and_then(|e| e.checked_add(1))
                .filter(|&e| e <= shape::MAX_NUMEL)
                .ok_or_else(|| {
                    TensorError::overflow(
                        op,
                        format!(
                            "the kernel {kernel:?} dilated by {dilation:?} spans more than {} elements",
                            shape::MAX_NUMEL
                        ),
                    )
                })
        })
        .collect::<Result<_>>()?;
    let padding = if opts.padding == ConvPadding::Same {
        extent
            .iter()
            .map(|&e| ((e - 1) / 2, e - 1 - (e - 1) / 2))
            .collect()
    } else {
        padding
    };
    let spatial_in = &xs[2..];
    if spatial_in.contains(&0) && xs[0] > 0 && xs[1] > 0 {
        return Err(TensorError::shape(
            op,
            format!(
                "only zero batch or zero channel inputs may be empty, but got input of shape {x:?}"
            ),
        ));
    }
    let padded: Vec<usize> = (0..spatial)
        .map(|i| {
            spatial_in[i]
                .checked_add(padding[i].0)
                .and_then(|s| s.checked_add(padding[i].1))
                .filter(|&s| s <= shape::MAX_NUMEL)
                .ok_or_else(|| {
                    TensorError::overflow(
                        op,
                        format!(
                            "the input {x:?} padded by {padding:?} has a dim above {} elements",
                            shape::MAX_NUMEL
                        ),
                    )
                })
        })
        .collect::<Result<_>>()?;
    if (0..spatial).any(|i| padded[i] < extent[i]) {
        return Err(TensorError::shape(
            op,
            format!(
                "calculated padded input size per channel {padded:?} is smaller than the kernel \
                 {extent:?} (with dilation); the kernel can't be greater than the input"
            ),
        ));
    }
    let out_sp: Vec<usize> = (0..spatial)
        .map(|i| (padded[i] - extent[i]) / stride[i] + 1)
        .collect();
    let (n, c, c_out) = (xs[0] as i64, xs[1] as i64, w[0] as i64);
    let g = groups as i64;
    // The weight holds `C_in / groups * prod(kernel)` elements per output
    // channel, so that product fits; the output's sizes are checked here
    // (an empty batch lets the input's spatial dims be anything).
    let k_prod: usize = kernel.iter().product();
    let o_prod = shape::checked_numel(op, &out_sp)?;
    let mut out_full = vec![xs[0], w[0]];
    out_full.extend(&out_sp);
    shape::checked_numel(op, &out_full)?;
    let i64s = |v: &[usize]| v.iter().map(|&s| s as i64).collect::<Vec<i64>>();
    // An input without channels (so a weight without elements) has an
    // output without channels, as PyTorch's empty-input path gives it.
    let mut out = vec![n, if c == 0 { 0 } else { c_out }];
    out.extend(i64s(&out_sp));
    let mut bias_shape = vec![c_out];
    bias_shape.extend(std::iter::repeat_n(1, spatial));
    let before: Vec<usize> = padding.iter().map(|&(a, _)| a).collect();
    Ok(ConvPlan {
        batched,
        windows: Windows::new(spatial_in, &out_sp, kernel, &stride, &before, &dilation),
        columns: [n, g, (c / g) * k_prod as i64, o_prod as i64],
        weight: [g, c_out / g, (c / g) * k_prod as i64],
        out,
        bias: bias_shape,
        compute: if xd.is_float() { acc_dtype(xd) } else { xd },
    })
}

/// The default of [`conv_chunk_bytes`]: 64 MiB (16 Mi f32 elements a
/// chunk keep each matrix product large enough to fill a GPU).
pub const DEFAULT_CONV_CHUNK_BYTES: usize = 64 << 20;

static CONV_CHUNK_BYTES: AtomicUsize = AtomicUsize::new(DEFAULT_CONV_CHUNK_BYTES);

/// Sets the most bytes of columns (or of per-sample weight gradients) a
/// convolution forms at a time, for the whole process: a batch whose
/// columns take more is convolved a chunk of samples at a time (one sample
/// at least), forward and backward. Smaller chunks lower a convolution's
/// peak memory; larger ones give its matrix products more work per call.
/// `usize::MAX` never chunks. The results do not depend on it, except for
/// the order in which the weight gradient's batch sum is added.
///
/// ```
/// use strata_tensor::{conv_chunk_bytes, set_conv_chunk_bytes, DEFAULT_CONV_CHUNK_BYTES};
/// assert_eq!(conv_chunk_bytes(), DEFAULT_CONV_CHUNK_BYTES);
/// set_conv_chunk_bytes(256 << 20);
/// assert_eq!(conv_chunk_bytes(), 256 << 20);
/// set_conv_chunk_bytes(DEFAULT_CONV_CHUNK_BYTES);
/// ```
pub fn set_conv_chunk_bytes(bytes: usize) {
    CONV_CHUNK_BYTES.store(bytes, Ordering::Relaxed);
}

/// The current chunk bound of convolutions (see [`set_conv_chunk_bytes`]).
pub fn conv_chunk_bytes() -> usize {
    CONV_CHUNK_BYTES.load(Ordering::Relaxed)
}

static CONV_ALLOW_TF32: AtomicBool = AtomicBool::new(true);

/// Whether f32 convolutions on a GPU may round their operands to TF32 on
/// tensor cores (accumulating in f32), for the whole process: PyTorch's
/// `torch.backends.cudnn.allow_tf32`, which is `True` by default (PyTorch
/// 2.11: `torch.backends.cudnn.conv.fp32_precision == "tf32"`), and so is
/// this. It is separate from [`crate::set_float32_matmul_precision`], which
/// governs matrix products (exact f32 by default), as in PyTorch. A
/// relative error near 1e-3 against exact f32; set it to `false` to
/// convolve f32 exactly. The CPU, f16, bf16 and f64 are not affected.
///
/// ```
/// use strata_tensor::{conv_allow_tf32, set_conv_allow_tf32};
/// assert!(conv_allow_tf32());
/// set_conv_allow_tf32(false); // exact f32 convolutions on GPUs
/// assert!(!conv_allow_tf32());
/// set_conv_allow_tf32(true);
/// ```
pub fn set_conv_allow_tf32(allow: bool) {
    CONV_ALLOW_TF32.store(allow, Ordering::Relaxed);
}

/// Whether f32 convolutions on GPUs may use TF32 (see
/// [`set_conv_allow_tf32`]).
pub fn conv_allow_tf32() -> bool {
    CONV_ALLOW_TF32.load(Ordering::Relaxed)
}

static CUDNN_ENABLED: AtomicBool = AtomicBool::new(true);

/// Whether GPU convolutions may use cuDNN where it is installed, for the
/// whole process: PyTorch's `torch.backends.cudnn.enabled` (`true` by
/// default, as there). With `false`, or without cuDNN
/// ([`crate::cuda::cudnn_version`]), GPU convolutions run as im2col and
/// matrix products (more memory, more time, the same results up to
/// rounding). The CPU is not affected.
///
/// ```
/// use strata_tensor::{cudnn_enabled, set_cudnn_enabled};
/// assert!(cudnn_enabled());
/// set_cudnn_enabled(false); // columns and cuBLAS on GPUs
/// assert!(!cudnn_enabled());
/// set_cudnn_enabled(true);
/// ```
pub fn set_cudnn_enabled(enabled: bool) {
    CUDNN_ENABLED.store(enabled, Ordering::Relaxed);
}

/// Whether GPU convolutions may use cuDNN (see [`set_cudnn_enabled`]).
pub fn cudnn_enabled() -> bool {
    CUDNN_ENABLED.load(Ordering::Relaxed)
}

/// Runs `f` (a convolution's matrix products) at the convolutions' f32
/// precision ([`conv_allow_tf32`]).
fn at_conv_precision<R>(f: impl FnOnce() -> R) -> R {
    let p = if conv_allow_tf32() {
        crate::ops::Precision::High
    } else {
        crate::ops::Precision::Highest
    };
    crate::ops::with_f32_precision(p, f)
}

/// The dtype the products of `dtype` operands on `device` are summed in
/// ([`Tensor::matmul_wide`]): f32 for f16/bf16 on a GPU, else `dtype`
/// (f16/bf16 never reach the products on the CPU).
fn wide_dtype(dtype: DType, device: crate::Device) -> DType {
    match dtype {
        DType::F16 | DType::BF16 if device != crate::Device::Cpu => DType::F32,
        d => d,
    }
}

/// The dtype a convolution of `dtype` operands computes in on `device`:
/// f16 and bf16 stay in their dtype on a GPU (the products accumulate in f32
/// on its tensor cores; the columns take half the memory and a recorded
/// convolution saves its operands as they are), and widen to f32 on the
/// CPU.
fn compute_dtype(dtype: DType, device: crate::Device) -> DType {
    match dtype {
        DType::F16 | DType::BF16 if device != crate::Device::Cpu => dtype,
        d if d.is_float() => acc_dtype(d),
        d => d,
    }
}

impl ConvPlan {
    /// The convolution of `x` by `weight` and `bias` (the operands this
    /// plan checked; `Tensor`s or `Var`s), in the computation dtype, the
    /// result rounded to `dtype`: the operands cast, then one
    /// [`ConvPlan::product`] ([`Composite::conv_product`], which a `Var`
    /// records as one op).
    pub fn convolve<T: Composite>(
        &self,
        x: &T,
        weight: &T,
        bias: Option<&T>,
        dtype: DType,
    ) -> std::result::Result<T, T::Error> {
        let x = with_batch(x, self.batched)?.to_dtype(self.compute)?;
        let w = weight.to_dtype(self.compute)?;
        let b = bias.map(|b| b.to_dtype(self.compute)).transpose()?;
        let y = x.conv_product(&w, b.as_ref(), self)?;
        without_batch(y.to_dtype(dtype)?, self.batched)
    }

    /// The columns `[n, G, C/G * prod(K), prod(O)]` of the batched input
    /// `x` of `n` samples (one fused pass; a unit kernel with stride 1 and
    /// no padding is `x` itself).
    fn columns_of(&self, x: &Tensor) -> Result<Tensor> {
        let [_, g, ck, o] = self.columns;
        let shape = [x.shape()[0] as i64, g, ck, o];
        if self.windows.is_identity() {
            x.reshape(&shape)
        } else {
            x.window_columns(&self.windows)?.reshape(&shape)
        }
    }

    /// The bytes of one sample's columns in `dtype`: none for a unit kernel
    /// with stride 1 and no padding, whose columns are the input itself (a
    /// view), so that such a batch is never split into chunks (each chunk's
    /// result would be one more output-sized tensor, copied into the whole).
    fn column_bytes(&self, dtype: DType) -> usize {
        if self.windows.is_identity() {
            return 0;
        }
        let [_, g, ck, o] = self.columns;
        (g as usize)
            .saturating_mul(ck as usize)
            .saturating_mul(o as usize)
            .saturating_mul(dtype.size())
    }

    /// The batch in chunks `(first sample, samples)` whose `per_sample`
    /// bytes add up to at most [`conv_chunk_bytes`] (one sample at least); one
    /// chunk, the whole batch, where it fits (an empty batch included).
    fn chunks(&self, per_sample: usize) -> impl Iterator<Item = (i64, i64)> {
        let n = self.columns[0];
        let step = (conv_chunk_bytes() / per_sample.max(1)).clamp(1, n.max(1) as usize) as i64;
        let count = if n == 0 { 1 } else { (n + step - 1) / step };
        (0..count).map(move |i| (i * step, step.min(n - i * step)))
    }

    /// `f(first, samples)` for each chunk of the batch ([`ConvPlan::chunks`])
    /// written into one result: its parts' shape with the whole batch.
    fn by_chunks(
        &self,
        per_sample: usize,
        f: impl Fn(i64, i64) -> Result<Tensor>,
    ) -> Result<Tensor> {
        let mut chunks = self.chunks(per_sample);
        let (s, len) = chunks.next().unwrap_or((0, self.columns[0]));
        let first = f(s, len)?;
        if len == self.columns[0] {
            return Ok(first);
        }
        let mut shape = first.shape().to_vec();
        shape[0] = self.columns[0] as usize;
        let out = Tensor::uninit("convolution", &shape, first.dtype(), first.device())?;
        out.narrow(0, s, len)?.copy_(&first)?;
        for (s, len) in chunks {
            out.narrow(0, s, len)?.copy_(&f(s, len)?)?;
        }
        Ok(out)
    }

    /// The convolution proper, on tensors in the computation dtype: the
    /// batched `x`'s columns, one (batched) matrix product with `weight`,
    /// `bias` added; `[N, C_out, O...]`. A batch whose columns take more
    /// than [`conv_chunk_bytes`] is convolved a chunk of samples at a time.
    pub fn product(&self, x: &Tensor, weight: &Tensor, bias: Option<&Tensor>) -> Result<Tensor> {
        at_conv_precision(|| self.product_at(x, weight, bias))
    }

    fn product_at(&self, x: &Tensor, weight: &Tensor, bias: Option<&Tensor>) -> Result<Tensor> {
        if self.out.contains(&0) {
            // An empty batch, or an input without channels.
            let out: Vec<usize> = self.out.iter().map(|&s| s as usize).collect();
            return Tensor::zeros(&out, x.dtype(), x.device());
        }
        let out: Vec<usize> = self.out.iter().map(|&s| s as usize).collect();
        if let Some(y) = self.by_library(ConvPass::Forward, [x, weight], &out)? {
            if let Some(b) = bias {
                y.add_(&b.reshape(&self.bias)?)?;
            }
            return Ok(y);
        }
        let w = weight.reshape(&self.weight)?;
        // f16/bf16 (on a GPU): the products in f32, the bias added there,
        // rounded once.
        let y = self
            .by_chunks(self.column_bytes(x.dtype()), |s, len| {
                w.matmul_wide(&self.columns_of(&x.narrow(0, s, len)?)?)
            })?
            .reshape(&self.out)?;
        if let Some(b) = bias {
            y.add_(&b.reshape(&self.bias)?)?;
        }
        y.to_dtype(x.dtype())
    }

    /// One pass of the convolution through the device's library (cuDNN),
    /// into a fresh contiguous tensor of `shape`: the forward pass from `[x,
    /// weight]`, the input's gradient from `[g, weight]`, the weight's from
    /// `[x, g]`; a unit kernel with stride 1 and no padding through cuBLAS
    /// instead ([`ConvPlan::by_unit_product`]). `None` on the CPU, where
    /// cuDNN is disabled or absent, for a dtype the plan widens, or where the
    /// library does not take this convolution (padding that differs before
    /// and after, say).
    fn by_library(
        &self,
        pass: ConvPass,
        operands: [&Tensor; 2],
        shape: &[usize],
    ) -> Result<Option<Tensor>> {
        let a = operands[0];
        if a.device() == crate::Device::Cpu
            || !cudnn_enabled()
            || !matches!(
                a.dtype(),
                DType::F16 | DType::BF16 | DType::F32 | DType::F64
            )
        {
            return Ok(None);
        }
        if self.windows.is_identity() {
            return self.by_unit_product(pass, operands, shape);
        }
        let [a, b] = [a.contiguous()?, operands[1].contiguous()?];
        let out = Tensor::uninit("convolution", shape, a.dtype(), a.device())?;
        let (x, w, y) = match pass {
            ConvPass::Forward => (&a, &b, &out),
            ConvPass::InputGrad => (&out, &b, &a),
            ConvPass::WeightGrad => (&a, &out, &b),
        };
        let mut done = false;
        launch(&out, &[&a, &b], |be| {
            done = be.library_conv(LibraryConv {
                pass,
                x: &x.arg(),
                w: &w.arg(),
                y: &y.arg(),
                windows: &self.windows,
                groups: self.columns[1] as usize,
                allow_tf32: conv_allow_tf32(),
            })?;
            Ok(())
        })?;
        Ok(done.then_some(out))
    }

    /// [`ConvPlan::by_library`] for a unit kernel with stride 1 and no
    /// padding: the forward pass and the input's gradient are one matrix
    /// product of the input (or of `g`) itself, no columns, through cuBLAS,
    /// which beats cuDNN's heuristic choice there in time and workspace.
    /// Written in the operands' dtype (f16/bf16 accumulated in f32 and
    /// rounded once), as cuDNN writes them, so that PyTorch's bias is then
    /// added in that dtype and no f32 output-sized tensor is made. The
    /// weight's gradient (`None`) sums per-sample products over the batch
    /// in f32 on the columns path.
    fn by_unit_product(
        &self,
        pass: ConvPass,
        operands: [&Tensor; 2],
        shape: &[usize],
    ) -> Result<Option<Tensor>> {
        let [n, groups, _, o] = self.columns;
        let y = match pass {
            ConvPass::Forward => {
                let w = operands[1].reshape(&self.weight)?;
                w.matmul(&self.columns_of(operands[0])?)?
            }
            ConvPass::InputGrad => {
                let w = operands[1].reshape(&self.weight)?;
                let g = operands[0].reshape(&[n, groups, self.weight[1], o])?;
                w.transpose(-1, -2)?.matmul(&g)?
            }
            // (operands `[x, g]`)
            ConvPass::WeightGrad => return Ok(None),
        };
        let shape: Vec<i64> = shape.iter().map(|&d| d as i64).collect();
        Ok(Some(y.reshape(&shape)?))
    }

    /// The gradients of [`ConvPlan::product`] for the upstream `g`
    /// (`[N, C_out, O...]`), each where `needs` asks for it (input,
    /// weight, bias): the input's and the weight's through cuDNN on a GPU
    /// that has it, else by columns (see `input_grad_at` and
    /// `weight_grad_at`: the columns are recomputed from `x`, so a recorded
    /// convolution keeps its input, not its columns); the bias's is `g`
    /// summed over the batch and the spatial dims.
    pub fn product_backward(
        &self,
        g: &Tensor,
        x: &Tensor,
        weight: &Tensor,
        needs: [bool; 3],
    ) -> Result<[Option<Tensor>; 3]> {
        at_conv_precision(|| self.product_backward_at(g, x, weight, needs))
    }

    fn product_backward_at(
        &self,
        g: &Tensor,
        x: &Tensor,
        weight: &Tensor,
        needs: [bool; 3],
    ) -> Result<[Option<Tensor>; 3]> {
        if self.out.contains(&0) {
            // No output element: every gradient is zero.
            let bias: Vec<usize> = vec![self.weight[0] as usize * self.weight[1] as usize];
            let zeros = |need: bool, shape: &[usize], dtype: DType| {
                need.then(|| Tensor::zeros(shape, dtype, x.device()))
                    .transpose()
            };
            return Ok([
                zeros(needs[0], x.shape(), x.dtype())?,
                zeros(needs[1], weight.shape(), weight.dtype())?,
                zeros(needs[2], &bias, g.dtype())?,
            ]);
        }
        // Once for both passes (an upstream of a sum is an expanded one).
        let g = &g.contiguous()?;
        let dx = match needs[0] {
            true => Some(self.input_grad_at(g, weight, x.shape(), x.dtype())?),
            false => None,
        };
        let dw = match needs[1] {
            true => Some(self.weight_grad_at(g, x, weight.shape())?),
            false => None,
        };
        let db = needs[2].then(|| bias_grad(g)).transpose()?;
        Ok([dx, dw, db])
    }

    /// The input's gradient, of `shape` (`[N, C, L...]`), for the upstream
    /// `g` (`[N, C_out, O...]`, the output not empty): the columns' gradient
    /// (the weight's transpose times `g`) added back where each column was
    /// read ([`Tensor::window_columns_sum`]), a chunk of samples at a time
    /// where the columns take more than [`conv_chunk_bytes`]; or one cuDNN
    /// call, in `g`'s dtype. The columns path rounds to `dtype`: `g`'s, or
    /// f32 for f16/bf16 `g` on a GPU (so that a caller adding to it rounds
    /// once).
    fn input_grad_at(
        &self,
        g: &Tensor,
        weight: &Tensor,
        shape: &[usize],
        dtype: DType,
    ) -> Result<Tensor> {
        if let Some(dx) = self.by_library(ConvPass::InputGrad, [g, weight], shape)? {
            return Ok(dx);
        }
        let [n, groups, cols_per_group, o] = self.columns;
        let g4 = g.reshape(&[n, groups, self.weight[1], o])?;
        // f16/bf16 (on a GPU): summed in f32 and rounded once.
        let wide = wide_dtype(g.dtype(), g.device());
        let wt = weight.reshape(&self.weight)?.transpose(-1, -2)?;
        self.by_chunks(self.column_bytes(wide), |s, len| {
            let dcols = wt.matmul_wide(&g4.narrow(0, s, len)?)?;
            let part = if self.windows.is_identity() {
                let mut shape: Vec<i64> = shape.iter().map(|&d| d as i64).collect();
                shape[0] = len;
                dcols.reshape(&shape)?
            } else {
                dcols
                    .reshape(&[len, groups * cols_per_group, o])?
                    .window_columns_sum(&self.windows)?
            };
            part.to_dtype(dtype)
        })
    }

    /// The weight's gradient, of `shape`, for the upstream `g` and the
    /// batched input `x` (the output not empty): `g` times the columns,
    /// recomputed from `x` (so a recorded convolution keeps its input, not
    /// its columns), summed over the batch, a chunk of samples at a time
    /// where the columns (or the per-sample weight gradients) take more
    /// than [`conv_chunk_bytes`]; or one cuDNN call. In `x`'s dtype.
    fn weight_grad_at(&self, g: &Tensor, x: &Tensor, shape: &[usize]) -> Result<Tensor> {
        if let Some(dw) = self.by_library(ConvPass::WeightGrad, [x, g], shape)? {
            return Ok(dw);
        }
        let [n, groups, _, o] = self.columns;
        let g4 = g.reshape(&[n, groups, self.weight[1], o])?;
        // f16/bf16 (on a GPU): summed in f32 and rounded once.
        let wide = wide_dtype(x.dtype(), x.device());
        let numel: usize = shape.iter().product();
        let per_sample = self
            .column_bytes(x.dtype())
            .max(numel.saturating_mul(wide.size()));
        let mut sum: Option<Tensor> = None;
        for (s, len) in self.chunks(per_sample) {
            let cols = self.columns_of(&x.narrow(0, s, len)?)?;
            let part = g4
                .narrow(0, s, len)?
                .matmul_wide(&cols.transpose(-1, -2)?)?
                .sum(Some(&[0]), false)?;
            sum = Some(match sum {
                None => part,
                Some(acc) => acc.add(&part)?,
            });
        }
        let shape: Vec<i64> = shape.iter().map(|&s| s as i64).collect();
        // (`chunks` yields at least one chunk.)
        let dw = sum.ok_or_else(|| TensorError::value("convolution", "no batch chunk"))?;
        dw.reshape(&shape)?.to_dtype(x.dtype())
    }
}

/// The bias's gradient of either kind of convolution: the upstream `g`
/// (`[N, C_out, ...]`) summed over the batch and the spatial dims.
fn bias_grad(g: &Tensor) -> Result<Tensor> {
    let dims: Vec<i64> = std::iter::once(0).chain(2..g.ndim() as i64).collect();
    g.sum(Some(&dims), false)
}

/// A plain or a transposed convolution.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConvKind {
    /// `F.conv*d`.
    Plain,
    /// `F.conv_transpose*d`.
    Transposed,
}

/// A checked convolution of either kind, on operands of one device.
#[derive(Clone, Debug, PartialEq)]
pub enum Convolution {
    /// `F.conv*d`.
    Plain(ConvPlan),
    /// `F.conv_transpose*d`.
    Transposed(ConvTransposePlan),
}

/// Checks a convolution of `kind` over `spatial` dims (the plan's checks,
/// then the operands' devices, as PyTorch's order) of `x`, `weight` and
/// `bias` (`Tensor`s or `Var`s) and plans it.
pub fn convolution<T: Composite>(
    op: &'static str,
    kind: ConvKind,
    spatial: usize,
    x: &T,
    weight: &T,
    bias: Option<&T>,
    opts: &ConvOptions,
) -> Result<Convolution> {
    let operands = (
        (x.shape(), x.dtype()),
        (weight.shape(), weight.dtype()),
        bias.map(|b| (b.shape(), b.dtype())),
    );
    let compute = compute_dtype(x.dtype(), x.device());
    let plan = match kind {
        ConvKind::Plain => Convolution::Plain(ConvPlan {
            compute,
            ..conv_plan(op, spatial, operands.0, operands.1, operands.2, opts)?
        }),
        ConvKind::Transposed => {
            let p = conv_transpose_plan(op, spatial, operands.0, operands.1, operands.2, opts)?;
            Convolution::Transposed(ConvTransposePlan {
                compute,
                conv: ConvPlan { compute, ..p.conv },
                ..p
            })
        }
    };
    for other in [Some(weight), bias].into_iter().flatten() {
        if other.device() != x.device() {
            return Err(TensorError::DeviceMismatch {
                op,
                lhs: x.device(),
                rhs: other.device(),
            });
        }
    }
    Ok(plan)
}

impl Convolution {
    /// The convolution of the operands this plan checked, rounded to `x`'s
    /// dtype.
    pub fn convolve<T: Composite>(
        &self,
        x: &T,
        weight: &T,
        bias: Option<&T>,
    ) -> std::result::Result<T, T::Error> {
        match self {
            Convolution::Plain(p) => p.convolve(x, weight, bias, x.dtype()),
            Convolution::Transposed(p) => p.convolve(x, weight, bias, x.dtype()),
        }
    }
}

impl Tensor {
    fn convolution_nd(
        &self,
        op: &'static str,
        kind: ConvKind,
        spatial: usize,
        weight: &Tensor,
        bias: Option<&Tensor>,
        opts: &ConvOptions,
    ) -> Result<Tensor> {
        // (An empty output, whatever the input's spatial dims, is zeros:
        // `ConvPlan::product`.)
        convolution(op, kind, spatial, self, weight, bias, opts)?.convolve(self, weight, bias)
    }
}

/// A transposed convolution as the adjoint of a convolution: `F.conv_transpose*d(x, w)`
/// is the input gradient of the convolution [`ConvTransposePlan::conv`]
/// (from this one's output shape `[N, C_out, Y...]` to its input's `[N,
/// C_in, X...]`, by `w` `[C_in, C_out / G, k...]` with the same stride,
/// padding, dilation and groups) for the upstream `x`, plus the bias. Its
/// gradients are that convolution of the upstream (the input's) and that
/// convolution's weight gradient (the weight's), so no zeros are spread
/// between the input's elements: cuDNN's backward-data pass on a GPU (as
/// PyTorch), col2im elsewhere.
#[derive(Clone, Debug, PartialEq)]
pub struct ConvTransposePlan {
    /// Whether the input has a batch dim.
    pub batched: bool,
    /// The convolution this one is the adjoint of (batched).
    pub conv: ConvPlan,
    /// `[N, C_out, Y...]`: the result.
    pub out: Vec<i64>,
    /// `[C_out, 1, ...]`: the bias against the result.
    pub bias: Vec<i64>,
    /// The computation dtype (the convolution's).
    pub compute: DType,
}

/// Checks a transposed convolution's operands as PyTorch 2.15 does and
/// plans it as a convolution.
pub fn conv_transpose_plan(
    op: &'static str,
    spatial: usize,
    input: (&[usize], DType),
    weight: (&[usize], DType),
    bias: Option<(&[usize], DType)>,
    opts: &ConvOptions,
) -> Result<ConvTransposePlan> {
    let (x, xd) = input;
    let (w, wd) = weight;
    let batched = is_batched(op, x, spatial)?;
    let padding = match &opts.padding {
        ConvPadding::Explicit(p) => per_dim(op, "padding", p, spatial)?,
        other => {
            return Err(TensorError::value(
                op,
                format!("transposed convolutions take an explicit padding, not {other:?}"),
            ))
        }
    };
    let stride = per_dim(op, "stride", &opts.stride, spatial)?;
    let dilation = per_dim(op, "dilation", &opts.dilation, spatial)?;
    let output_padding = per_dim(op, "output_padding", &opts.output_padding, spatial)?;
    if stride.contains(&0) || dilation.contains(&0) || opts.groups == 0 {
        return Err(TensorError::value(
            op,
            format!(
                "stride {stride:?}, dilation {dilation:?} and groups {} must be positive",
                opts.groups
            ),
        ));
    }
    // (Checked only where there is work to do, as PyTorch's.)
    if let Some(i) = (0..spatial).find(|&i| {
        !x.contains(&0) && output_padding[i] >= stride[i] && output_padding[i] >= dilation[i]
    }) {
        return Err(TensorError::value(
            op,
            format!(
                "output padding must be smaller than either stride or dilation, but got \
                 output_padding {}, stride {}, dilation {}",
                output_padding[i], stride[i], dilation[i]
            ),
        ));
    }
    // PyTorch compares the dtypes only where there is work to do.
    if !x.contains(&0) && (xd != wd || bias.is_some_and(|(_, bd)| bd != xd)) {
        return Err(TensorError::dtype(
            op,
            format!(
                "the input ({xd:?}), weight ({wd:?}) and bias ({:?}) must have one dtype",
                bias.map(|b| b.1)
            ),
        ));
    }
    // PyTorch's transposed convolutions take floats and i64 only.
    if !(xd.is_float() || xd == DType::I64) {
        return Err(TensorError::unsupported(op, xd));
    }
    let groups = opts.groups;
    if w.len() != spatial + 2 {
        return Err(TensorError::shape(
            op,
            format!(
                "expected a {}-D weight [C_in, C_out / groups, kernel...], but got weight of shape {w:?}",
                spatial + 2
            ),
        ));
    }
    let c_in = x[usize::from(batched)];
    if w[0] < groups {
        return Err(TensorError::shape(
            op,
            format!(
                "given groups={groups}, expected the weight's dim 0 (input channels) to be at \
                 least {groups}, but got weight of shape {w:?}"
            ),
        ));
    }
    if w[0] != c_in || w[0] % groups != 0 {
        return Err(TensorError::shape(
            op,
            format!(
                "given groups={groups}, expected the weight's dim 0 to be the input's {c_in} \
                 channels and a multiple of {groups}, but got weight of shape {w:?}"
            ),
        ));
    }
    let c_out = w[1].checked_mul(groups).ok_or_else(|| {
        TensorError::overflow(op, format!("weight {w:?} with groups={groups} overflows"))
    })?;
    if let Some((b, _)) = bias {
        if b != [c_out] {
            return Err(TensorError::shape(
                op,
                format!("expected the bias to be 1-D with {c_out} elements, but got shape {b:?}"),
            ));
        }
    }
    let kernel = &w[2..];
    if kernel.contains(&0) {
        return Err(TensorError::shape(
            op,
            format!("the kernel {kernel:?} (weight shape {w:?}) has an empty spatial dim"),
        ));
    }
    let spatial_in = &x[x.len() - spatial..];
    let mut out_sp = Vec::with_capacity(spatial);
    for i in 0..spatial {
        // In i128: no size or option wraps.
        let reach = dilation[i] as i128 * (kernel[i] as i128 - 1);
        let out = (spatial_in[i] as i128 - 1) * stride[i] as i128 - 2 * padding[i] as i128
            + reach
            + output_padding[i] as i128
            + 1;
        // (An output size of 0 is an empty result on PyTorch's oneDNN path,
        // which strata follows; its slow path refuses it.)
        if out < 0 || (out == 0 && spatial_in[i] == 0) {
            return Err(TensorError::shape(
                op,
                format!(
                    "the output size would be {out} along spatial dim {i} (input {spatial_in:?}, \
                     kernel {kernel:?}, stride {stride:?}, padding {padding:?}, dilation \
                     {dilation:?}, output_padding {output_padding:?})"
                ),
            ));
        }
        match usize::try_from(out)
            .ok()
            .filter(|&v| v <= shape::MAX_NUMEL && padding[i] <= shape::MAX_NUMEL)
        {
            Some(v) => out_sp.push(v),
            None => {
                return Err(TensorError::overflow(
                    op,
                    format!(
                        "the options {opts:?} give sizes beyond {}",
                        shape::MAX_NUMEL
                    ),
                ))
            }
        }
    }
    let n = if batched { x[0] } else { 1 };
    let mut out_full = vec![n, c_out];
    out_full.extend(&out_sp);
    shape::checked_numel(op, &out_full)?;
    let i64s = |v: &[usize]| v.iter().map(|&s| s as i64).collect::<Vec<i64>>();
    let k_prod: usize = kernel.iter().product();
    let x_prod: usize = spatial_in.iter().product();
    let g = groups as i64;
    let compute = if xd.is_float() { acc_dtype(xd) } else { xd };
    let mut bias_shape = vec![c_out as i64];
    bias_shape.extend(std::iter::repeat_n(1, spatial));
    let mut conv_out = vec![n as i64, c_in as i64];
    conv_out.extend(i64s(spatial_in));
    let mut conv_bias = vec![c_in as i64];
    conv_bias.extend(std::iter::repeat_n(1, spatial));
    // The sizes were checked: the input's by its tensor, the output's
    // above, the columns' are the input's times the kernel's per channel.
    let cols_per_group = (c_out / groups)
        .checked_mul(k_prod)
        .filter(|&v| v <= shape::MAX_NUMEL)
        .ok_or_else(|| TensorError::overflow(op, format!("weight {w:?} overflows")))?;
    Ok(ConvTransposePlan {
        batched,
        conv: ConvPlan {
            batched: true,
            windows: Windows::new(&out_sp, spatial_in, kernel, &stride, &padding, &dilation),
            columns: [n as i64, g, cols_per_group as i64, x_prod as i64],
            weight: [g, (c_in / groups) as i64, cols_per_group as i64],
            out: conv_out,
            bias: conv_bias,
            compute,
        },
        out: i64s(&out_full),
        bias: bias_shape,
        compute,
    })
}

impl ConvTransposePlan {
    /// The transposed convolution of `x` by `weight` and `bias` (the
    /// operands this plan checked; `Tensor`s or `Var`s), in the computation
    /// dtype, the result rounded to `dtype`: the operands cast, then one
    /// [`ConvTransposePlan::product`] ([`Composite::conv_transpose_product`],
    /// which a `Var` records as one op).
    pub fn convolve<T: Composite>(
        &self,
        x: &T,
        weight: &T,
        bias: Option<&T>,
        dtype: DType,
    ) -> std::result::Result<T, T::Error> {
        let x = with_batch(x, self.batched)?.to_dtype(self.compute)?;
        let w = weight.to_dtype(self.compute)?;
        let b = bias.map(|b| b.to_dtype(self.compute)).transpose()?;
        let y = x.conv_transpose_product(&w, b.as_ref(), self)?;
        without_batch(y.to_dtype(dtype)?, self.batched)
    }

    /// The transposed convolution proper, on tensors in the computation
    /// dtype: the input gradient of [`ConvTransposePlan::conv`] for the
    /// upstream `x` (the batched input), `bias` added; `[N, C_out, Y...]`.
    /// f16/bf16 on a GPU's columns path add the bias in f32 and round once;
    /// through cuDNN the bias is added to the rounded result, as PyTorch.
    pub fn product(&self, x: &Tensor, weight: &Tensor, bias: Option<&Tensor>) -> Result<Tensor> {
        at_conv_precision(|| {
            let out: Vec<usize> = self.out.iter().map(|&s| s as usize).collect();
            let y = if self.conv.out.contains(&0) || out.contains(&0) {
                Tensor::zeros(&out, x.dtype(), x.device())?
            } else {
                let wide = wide_dtype(x.dtype(), x.device());
                self.conv.input_grad_at(x, weight, &out, wide)?
            };
            if let Some(b) = bias {
                y.add_(&b.reshape(&self.bias)?)?;
            }
            y.to_dtype(x.dtype())
        })
    }

    /// The gradients of [`ConvTransposePlan::product`] for the upstream `g`
    /// (`[N, C_out, Y...]`), each where `needs` asks for it (input,
    /// weight, bias): the convolution [`ConvTransposePlan::conv`] of `g`,
    /// that convolution's weight gradient for the upstream `x` and the input
    /// `g`, and `g` summed over the batch and the spatial dims.
    pub fn product_backward(
        &self,
        g: &Tensor,
        x: &Tensor,
        weight: &Tensor,
        needs: [bool; 3],
    ) -> Result<[Option<Tensor>; 3]> {
        at_conv_precision(|| {
            // Once for both passes (an upstream of a sum is an expanded one).
            let g = &g.contiguous()?;
            let empty = self.conv.out.contains(&0) || self.out.contains(&0);
            let dx = match (needs[0], empty) {
                (false, _) => None,
                (true, true) => Some(Tensor::zeros(x.shape(), x.dtype(), x.device())?),
                (true, false) => Some(self.conv.product_at(g, weight, None)?),
            };
            let dw = match (needs[1], empty) {
                (false, _) => None,
                (true, true) => Some(Tensor::zeros(weight.shape(), weight.dtype(), x.device())?),
                (true, false) => Some(self.conv.weight_grad_at(x, g, weight.shape())?),
            };
            let db = needs[2].then(|| bias_grad(g)).transpose()?;
            Ok([dx, dw, db])
        })
    }
}

/// Declares the public convolutions, each a call of `convolution_nd`.
macro_rules! conv_forms {
    ($($(#[$doc:meta])* $name:ident: $kind:ident, $d:literal;)*) => {
        impl Tensor {
            $(
                $(#[$doc])*
                pub fn $name(&self, weight: &Tensor, bias: Option<&Tensor>, opts: &ConvOptions) -> Result<Tensor> {
                    self.convolution_nd(stringify!($name), ConvKind::$kind, $d, weight, bias, opts)
                }
            )*
        }
    };
}

conv_forms! {
    /// `F.conv1d(input, weight, bias, stride, padding, dilation, groups)`:
    /// input `[N, C_in, L]` or `[C_in, L]`, weight `[C_out, C_in / groups,
    /// k]`, bias `[C_out]` (see the module docs for how it computes).
    conv1d: Plain, 1;
    /// `F.conv2d(input, weight, bias, stride, padding, dilation, groups)`:
    /// input `[N, C_in, H, W]` or `[C_in, H, W]`, weight `[C_out, C_in /
    /// groups, kH, kW]`, bias `[C_out]`.
    ///
    /// ```
    /// use strata_tensor::{ConvOptions, Device, Tensor};
    /// let x = Tensor::arange(0.0, 16.0, 1.0, None, Device::Cpu)?.reshape(&[1, 1, 4, 4])?;
    /// let w = Tensor::ones(&[1, 1, 2, 2], strata_tensor::DType::F32, Device::Cpu)?;
    /// let y = x.conv2d(&w, None, &ConvOptions::new().stride(&[2]))?;
    /// assert_eq!(y.shape(), &[1, 1, 2, 2]);
    /// assert_eq!(y.to_vec::<f32>()?, [10., 18., 42., 50.]);
    /// # Ok::<(), strata_tensor::TensorError>(())
    /// ```
    conv2d: Plain, 2;
    /// `F.conv3d(input, weight, bias, stride, padding, dilation, groups)`:
    /// input `[N, C_in, D, H, W]` or `[C_in, D, H, W]`, weight `[C_out,
    /// C_in / groups, kD, kH, kW]`, bias `[C_out]`.
    conv3d: Plain, 3;
    /// `F.conv_transpose1d(input, weight, bias, stride, padding,
    /// output_padding, groups, dilation)`: weight `[C_in, C_out / groups,
    /// k]` (see [`ConvTransposePlan`] for how it computes).
    conv_transpose1d: Transposed, 1;
    /// `F.conv_transpose2d`: weight `[C_in, C_out / groups, kH, kW]`; the
    /// output is `(H - 1) * stride - 2 * padding + dilation * (k - 1) +
    /// output_padding + 1` high (and so wide).
    ///
    /// ```
    /// use strata_tensor::{ConvOptions, DType, Device, Tensor};
    /// let x = Tensor::ones(&[1, 1, 2, 2], DType::F32, Device::Cpu)?;
    /// let w = Tensor::ones(&[1, 1, 2, 2], DType::F32, Device::Cpu)?;
    /// let y = x.conv_transpose2d(&w, None, &ConvOptions::new().stride(&[2]))?;
    /// assert_eq!(y.shape(), &[1, 1, 4, 4]); // each input element spreads over its own 2 x 2
    /// assert_eq!(y.sum(None, false)?.item::<f32>()?, 16.0);
    /// # Ok::<(), strata_tensor::TensorError>(())
    /// ```
    conv_transpose2d: Transposed, 2;
    /// `F.conv_transpose3d`: weight `[C_in, C_out / groups, kD, kH, kW]`.
    conv_transpose3d: Transposed, 3;
}
