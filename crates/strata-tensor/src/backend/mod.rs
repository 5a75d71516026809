//! The boundary between device-independent tensor logic and devices.
//!
//! Tensor ops validate arguments, promote types, broadcast layouts and allocate
//! outputs (all device-independent), then hand [`Arg`]s to the [`Backend`] that
//! their storage carries (found once, when the storage is allocated). The CPU
//! backend lives in [`cpu`]; with the `cuda` feature each opened GPU is a
//! backend of its own (`cuda::context::CudaDevice`).
//!
//! Everything else a device does — streams, events, transfers, pinned host
//! memory — goes through [`gpu`]: `cuda::runtime` with the `cuda` feature,
//! `cuda_stub` (the same functions answering "unavailable") without it. This
//! module and the crate root are the only places that name the feature.

pub(crate) mod cpu;
#[cfg(feature = "cuda")]
pub(crate) mod cuda;
#[cfg(not(feature = "cuda"))]
pub(crate) mod cuda_stub;

/// Streams, events, transfers and pinned memory of GPUs (or their stub).
#[cfg(feature = "cuda")]
pub(crate) use cuda::runtime as gpu;
/// Streams, events, transfers and pinned memory of GPUs (or their stub).
#[cfg(not(feature = "cuda"))]
pub(crate) use cuda_stub as gpu;

use crate::dtype::DType;
use crate::error::Result;
use crate::layout::Layout;
use crate::scalar::Scalar;
use std::marker::PhantomData;
use strata_alloc::Device;

/// A storage's memory as kernels see it: its address (a host pointer on the
/// CPU, a device address on a GPU), its size and its device, borrowed from
/// the storage for `'a`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Mem<'a> {
    pub ptr: u64,
    pub nbytes: usize,
    /// Read by the CUDA backend (copies check both ends are one device).
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub device: Device,
    pub life: PhantomData<&'a ()>,
}

impl Mem<'_> {
    /// The address as a host pointer (meaningful on the CPU only).
    pub(crate) fn host_ptr(&self) -> *mut u8 {
        self.ptr as usize as *mut u8
    }
}

/// An operand as kernels see it: where the storage is, how the elements are
/// laid out in it (strides already broadcast to the op's shape), and their type.
pub(crate) struct Arg<'a> {
    pub mem: Mem<'a>,
    pub layout: Layout,
    pub dtype: DType,
}

pub(crate) use crate::ops::table::{BinaryOp, UnaryFn};

mod nn_kernel;
pub(crate) use nn_kernel::{NnKernel, WindowKernel, MASK_CHUNK};

/// Element-wise unary ops (output dtype = input dtype): an op of the table in
/// `ops::table`, or clamp with its bounds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum UnaryOp {
    Map(UnaryFn),
    Clamp(Option<Scalar>, Option<Scalar>),
}

/// Reductions over a set of dims.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ReduceOp {
    Sum,
    Mean,
    Max,
    Min,
}

/// What a device must provide. Every method receives operands whose dtypes and
/// shapes the caller has already checked; the caller also holds the storages'
/// access locks. Methods fail only for device reasons (a launch or copy the
/// driver refuses), never for argument errors.
pub(crate) trait Backend: Sync {
    /// out = value (converted to out's dtype).
    fn fill(&self, out: &Arg, value: Scalar) -> Result<()>;
    /// out = src converted to out's dtype (src broadcast to out's shape).
    fn copy(&self, out: &Arg, src: &Arg) -> Result<()>;
    /// out = a op b; a and b share a dtype.
    fn binary(&self, op: BinaryOp, out: &Arg, a: &Arg, b: &Arg) -> Result<()>;
    /// out = a op scalar.
    fn binary_scalar(&self, op: BinaryOp, out: &Arg, a: &Arg, b: Scalar) -> Result<()>;
    /// out = op(a).
    fn unary(&self, op: UnaryOp, out: &Arg, a: &Arg) -> Result<()>;
    /// out += value * t1 * t2, all of one dtype.
    fn addcmul(&self, out: &Arg, t1: &Arg, t2: &Arg, value: Scalar) -> Result<()>;
    /// out = cond ? a : b.
    fn where_(&self, out: &Arg, cond: &Arg, a: &Arg, b: &Arg) -> Result<()>;
    /// Reduces `input` over `dims` into the contiguous `values` (kept dims only)
    /// and/or the i64 `indices` (positions along the reduced dims, row-major).
    fn reduce(
        &self,
        op: ReduceOp,
        values: Option<&Arg>,
        indices: Option<&Arg>,
        input: &Arg,
        dims: &[usize],
    ) -> Result<()>;
    /// The `p` norm (`p` not 0 or ±inf) of the float `input` over
    /// `dims` (at least one element per output) into the contiguous `out` of
    /// the input's dtype, in the order and arithmetic of PyTorch's CPU
    /// kernel. False where the device has no such kernel: the caller then
    /// composes the norm from element-wise ops and a sum. `keepdim` is the
    /// caller's (PyTorch's order depends on it beside broadcast dims).
    fn pnorm(
        &self,
        _out: &Arg,
        _input: &Arg,
        _dims: &[usize],
        _keepdim: bool,
        _p: f64,
    ) -> Result<bool> {
        Ok(false)
    }
    /// Batched matrix product of 3-D operands of one dtype into a fresh
    /// contiguous 3-D out. With `accumulate` (float dtypes only) `out` holds
    /// a value on entry and receives `out + a @ b`, the sum formed in the
    /// product's accumulator and rounded once (PyTorch's `addmm` with
    /// `beta = 1`).
    fn matmul(&self, out: &Arg, a: &Arg, b: &Arg, accumulate: bool) -> Result<()>;
    /// [`Backend::matmul`] with `accumulate`, for a product that PyTorch's
    /// CPU `addmm` hands to a dot-product kernel, which sums the products
    /// from +0.0 and adds `out` after: a zero result is then +0.0 even where
    /// `out` and every product are -0.0. The default accumulates from `out`
    /// (the sign of such a zero is the kernel's choice there).
    fn matmul_add_after(&self, out: &Arg, a: &Arg, b: &Arg) -> Result<()> {
        self.matmul(out, a, b, true)
    }
    /// [`Backend::matmul`] for an f32/f64 product whose every result element
    /// PyTorch's CPU forms as one sequential sum over `k` in order, each
    /// product rounded (`order.fma == false`) or fused into the sum
    /// (`order.fma`): its own loop for small `bmm`s and MKL's kernels for
    /// small matrix products (see `ops/matmul.rs`, [`SeqOrder`]). The
    /// default (devices with no such kernel) is [`Backend::matmul`].
    fn matmul_sequential(&self, out: &Arg, a: &Arg, b: &Arg, order: SeqOrder) -> Result<()> {
        match order.add_out {
            AddOut::No => self.matmul(out, a, b, false),
            AddOut::First => self.matmul(out, a, b, true),
            AddOut::Last => self.matmul_add_after(out, a, b),
        }
    }
    /// Writes `seq` into the fresh contiguous `out` (element `i` at position `i`).
    fn generate(&self, out: &Arg, seq: crate::generate::Sequence) -> Result<()>;
    /// Copies bytes from the host into the start of a storage.
    fn write_from_host(&self, dst: Mem, bytes: &[u8]) -> Result<()>;
    /// Copies `out.len()` bytes from byte `offset` of a storage to the host.
    fn read_to_host(&self, src: Mem, offset: usize, out: &mut [u8]) -> Result<()>;

    // ---- nn and indexing kernels (issue 12; see `nn_kernel.rs`) ----
    /// Runs one of the fused normalisation / loss kernels or an index kernel.
    fn nn(&self, k: NnKernel<'_>) -> Result<()>;
    /// A convolution pass through the device's vendor library (cuDNN on a
    /// GPU, `backend/cuda/cudnn.rs`): `Ok(false)` where the device has none,
    /// or the library does not take this convolution, and the caller
    /// convolves by columns and matrix products instead. The CPU has none.
    fn library_conv(&self, _k: LibraryConv<'_>) -> Result<bool> {
        Ok(false)
    }
    /// The scans and scatters of `ops/scatter_ops.rs` (session 60).
    fn scatter_ops(&self, k: crate::ops::scatter_ops::ScatterKernel<'_>) -> Result<()>;

    // ----- issue 12: ops along one dim (softmax, log_softmax, cumsum) -----
    /// Softmax (log-softmax with `mode.log`) along the `n` dim of `s`, of
    /// the input times `mode.scale` with `mode`'s causal mask: `input` and
    /// the fresh `out` are contiguous, of one float dtype; f16/bf16 compute
    /// in f32. A scale other than 1 or a mask only with `s.inner == 1`.
    fn softmax(&self, out: &Arg, input: &Arg, s: DimShape, mode: SoftmaxMode) -> Result<()>;
    /// Inclusive cumulative sum along the `n` dim of `s`: contiguous operands
    /// of one dtype (integers wrap; f16/bf16 accumulate in f32).
    fn cumsum(&self, out: &Arg, input: &Arg, s: DimShape) -> Result<()>;
    /// The gradient of softmax (log-softmax with `log`) along the `n` dim of
    /// `s` into `out`: `y (g - sum(g y))` or `g - exp(y) sum(g)`, from the
    /// output gradient `grad` and the forward's output `y`; three contiguous
    /// operands of one float dtype, f16/bf16 computed in f32. `out` is fresh,
    /// or is `grad` itself (the same elements): every row (column set) of
    /// `grad` is then read in full before any of its outputs is written.
    fn softmax_backward(
        &self,
        out: &Arg,
        grad: &Arg,
        y: &Arg,
        s: DimShape,
        log: bool,
    ) -> Result<()>;

    /// Sorts rows (`sort`, `topk`, `kthvalue`, `median`; see [`SortKernel`]).
    fn sort(&self, k: SortKernel<'_>) -> Result<()>;

    // ----- fused optimizer steps -----
    /// One Adam / AdamW step over `n` elements of the contiguous parameter
    /// `item.p`, gradient `item.g` and moments `item.m`, `item.v` (and, for
    /// AMSGrad, the running maximum `item.max`; one float dtype, distinct
    /// storages), updating all but the gradient in place; f16/bf16 computed
    /// in f32. `s.amsgrad` holds exactly when `item.max` is present.
    fn adam_step(
        &self,
        item: &crate::ops::AdamItem<'_>,
        n: usize,
        s: &crate::ops::AdamStep,
    ) -> Result<()>;

    /// [`Backend::adam_step`] on each item (contiguous, one float dtype,
    /// written tensors disjoint from every other operand), with the same
    /// step. By default one `adam_step` per item.
    fn adam_step_list(
        &self,
        items: &[crate::ops::AdamItem<'_>],
        s: &crate::ops::AdamStep,
    ) -> Result<()> {
        for item in items {
            self.adam_step(item, item.p.layout.numel(), s)?;
        }
        Ok(())
    }
}

/// Which of a convolution's three tensors [`LibraryConv`] writes, from the
/// other two.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum ConvPass {
    /// `y` from `x` and `w`.
    Forward,
    /// `x` (the input's gradient) from `w` and `y` (the output's gradient).
    InputGrad,
    /// `w` (the weight's gradient) from `x` and `y` (the output's gradient).
    WeightGrad,
}

/// One pass of the convolution `y = x (*) w` ([`Backend::library_conv`]):
/// contiguous operands of one float dtype, `x` `[N, C, L...]`, `w` `[C_out,
/// C / groups, K...]`, `y` `[N, C_out, O...]`, the geometry (padding before
/// each dim, stride, dilation) in `windows`. The tensor written is fresh.
pub(crate) struct LibraryConv<'a> {
    pub pass: ConvPass,
    pub x: &'a Arg<'a>,
    pub w: &'a Arg<'a>,
    pub y: &'a Arg<'a>,
    pub windows: &'a crate::ops::Windows,
    pub groups: usize,
    /// Whether f32 may be computed on TF32 tensor cores.
    pub allow_tf32: bool,
}

/// The `outer x n x inner` view of a contiguous operand along one dim.
pub(crate) use cpu::{DimShape, SoftmaxMode};
pub(crate) use cpu::{SortKernel, SortPick};

/// Where `out`'s value on entry goes in [`Backend::matmul_sequential`]'s sum.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AddOut {
    /// Nowhere: the sum starts from +0.0 (`out` is fresh).
    No,
    /// First: the sum starts from it (MKL's column-update kernels).
    First,
    /// Last: the products are summed from +0.0 and it is added after
    /// (MKL's dot-product kernels).
    Last,
}

/// The order of [`Backend::matmul_sequential`]: each result element is
/// `((0 + p0) + p1) + ...` over `k` in order (`out` added as `add_out`
/// says), each product `p` rounded, or fused into the sum with `fma`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SeqOrder {
    /// Products fused into the sum (one rounding per step) instead of
    /// rounded first.
    pub fma: bool,
    /// Where `out`'s value on entry is added.
    pub add_out: AddOut,
}

/// The backend for `device`, or a typed error where this build or this
/// machine has none (no `cuda` feature, no CUDA driver, no such GPU).
pub(crate) fn backend_for(device: Device) -> Result<&'static dyn Backend> {
    match device {
        Device::Cpu => Ok(&cpu::CpuBackend),
        Device::Cuda(n) => gpu::backend(n),
    }
}

/// The stream new memory for `device` is allocated on: the current stream
/// of a GPU (as in PyTorch), the default stream elsewhere.
pub(crate) fn alloc_stream(device: Device) -> strata_alloc::StreamId {
    match device {
        Device::Cuda(n) => gpu::alloc_stream(n),
        Device::Cpu => strata_alloc::StreamId::DEFAULT,
    }
}

/// Whether tensors on `device` can be computed on by this build.
pub fn has_backend(device: Device) -> bool {
    backend_for(device).is_ok()
}
