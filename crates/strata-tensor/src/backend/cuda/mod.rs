//! The CUDA backend: each opened GPU ([`CudaDevice`]) is a [`Backend`].
//! Kernels are generated per op and dtype, compiled at run time by NVRTC for
//! the device's own architecture (cached for the process) and launched on
//! strata's current stream; matrix products through cuBLAS; convolutions
//! through cuDNN where it is installed (`cudnn.rs`); host transfers
//! through pinned staging buffers. [`runtime`] is the rest of the device
//! boundary (streams, events, transfers, pinned memory).
//!
//! Everything here is behind the `cuda` feature. When CUDA or a GPU is absent,
//! [`super::backend_for`] returns [`crate::TensorError::BackendUnavailable`]
//! naming what is missing; no CUDA call is made that could panic (cudarc's
//! panics on a missing library are caught at this boundary).

pub(crate) mod blas;
pub(crate) mod context;
pub(crate) mod cudnn;
pub(crate) mod cusolver;
pub(crate) mod dimops;
pub(crate) mod kernel_cache;
pub(crate) mod kernels;
pub(crate) mod launch;
pub(crate) mod libraries;
pub(crate) mod nccl;
pub(crate) mod nn;
pub(crate) mod nvrtc;
pub(crate) mod optim;
pub(crate) mod random;
pub(crate) mod reduce;
pub(crate) mod runtime;
pub(crate) mod scatter_ops;
pub(crate) mod shape_ops;
pub(crate) mod softmax_backward;
pub(crate) mod sort;
pub(crate) mod transfer;
pub(crate) mod windows;

use crate::backend::{Arg, Backend, BinaryOp, DimShape, Mem, ReduceOp, SoftmaxMode, UnaryOp};
use crate::dispatch_dtype;
use crate::dtype::{DType, Element};
use crate::error::Result;
use crate::ops::table::ScalarRule;
use crate::scalar::Scalar;
use context::{failure, CudaDevice};
use kernels::ops;
use launch::{elementwise, Params};

/// Puts scalar `s` (already in the compute type of `d`) into slot `i`.
fn set_slot(p: &mut Params, i: usize, d: DType, s: Scalar) {
    let (f, n) = (s.to_f64(), s.to_i64());
    match (i, d.is_float()) {
        (0, true) => p.f0 = f,
        (0, false) => p.i0 = n,
        (_, true) => p.f1 = f,
        (_, false) => p.i1 = n,
    }
}

/// `s` converted to `T`'s computation type (PyTorch's rule for mul/div scalars).
fn to_acc<T: Element>(s: Scalar) -> Scalar
where
    T::Acc: Element,
{
    <T::Acc as Element>::from_scalar(s).to_scalar()
}

/// `s` rounded to `T` first, then widened (the rule for add/sub/comparisons).
fn via_elem<T: Element>(s: Scalar) -> Scalar
where
    T::Acc: Element,
{
    T::from_scalar(s).to_acc().to_scalar()
}

/// The stored bytes of `s` as `T`, in the low bytes of a u64.
fn bits<T: Element>(s: Scalar) -> u64 {
    let v = T::from_scalar(s);
    let mut b = 0u64;
    // SAFETY: `T: Element` is plain old data of at most 8 bytes; copying its
    // bytes into the low bytes of a u64 (little-endian, as the GPU) is sound.
    unsafe {
        std::ptr::copy_nonoverlapping(
            &v as *const T as *const u8,
            &mut b as *mut u64 as *mut u8,
            std::mem::size_of::<T>(),
        )
    };
    b
}

impl Backend for CudaDevice {
    fn scatter_ops(&self, k: crate::ops::scatter_ops::ScatterKernel<'_>) -> Result<()> {
        scatter_ops::run(self, k)
    }
    fn nn(&self, k: crate::backend::NnKernel<'_>) -> Result<()> {
        nn::run(self, k)
    }
    fn library_conv(&self, k: crate::backend::LibraryConv<'_>) -> Result<bool> {
        cudnn::run(self, &k)
    }

    fn generate(&self, out: &Arg, seq: crate::generate::Sequence) -> Result<()> {
        let compute = seq.compute_dtype();
        if compute == out.dtype {
            return random::generate(self, out, seq);
        }
        // Computed in its own type into scratch memory, then converted.
        let n = out.layout.numel();
        let scratch = self.scratch(n * compute.size())?;
        let tmp = Arg {
            mem: Mem {
                ptr: scratch.ptr(),
                nbytes: n * compute.size(),
                device: self.device(),
                life: std::marker::PhantomData,
            },
            layout: out.layout.clone(),
            dtype: compute,
        };
        random::generate(self, &tmp, seq)?;
        self.copy(out, &tmp)
    }

    fn fill(&self, out: &Arg, value: Scalar) -> Result<()> {
        let dev = self;
        let prm = Params {
            bits: dispatch_dtype!(out.dtype, T => bits::<T>(value)),
            ..Params::default()
        };
        elementwise(dev, "fill", ops::fill, out, &[], prm)
    }

    fn copy(&self, out: &Arg, src: &Arg) -> Result<()> {
        if out.mem.device != src.mem.device {
            return Err(failure(
                out.mem.device,
                "copy",
                format!(
                    "the source is on {}; use Tensor::to to move tensors between devices",
                    src.mem.device
                ),
            ));
        }
        let dev = self;
        let (s, d) = (src.dtype, out.dtype);
        elementwise(
            dev,
            "copy",
            || ops::cast(s, d),
            out,
            &[src],
            Params::default(),
        )
    }

    fn binary(&self, op: BinaryOp, out: &Arg, a: &Arg, b: &Arg) -> Result<()> {
        let dev = self;
        let d = a.dtype;
        elementwise(
            dev,
            format_args!("binary_{op:?}"),
            || ops::binary(op, d, false),
            out,
            &[a, b],
            Params::default(),
        )
    }

    fn binary_scalar(&self, op: BinaryOp, out: &Arg, a: &Arg, b: Scalar) -> Result<()> {
        let dev = self;
        let d = a.dtype;
        let s = match op.scalar_rule() {
            ScalarRule::Acc => dispatch_dtype!(d, T => to_acc::<T>(b)),
            ScalarRule::Elem => dispatch_dtype!(d, T => via_elem::<T>(b)),
        };
        let mut prm = Params::default();
        set_slot(&mut prm, 0, d, s);
        elementwise(
            dev,
            format_args!("scalar_{op:?}"),
            || ops::binary(op, d, true),
            out,
            &[a],
            prm,
        )
    }

    fn unary(&self, op: UnaryOp, out: &Arg, a: &Arg) -> Result<()> {
        let dev = self;
        let d = a.dtype;
        let mut prm = Params::default();
        if let UnaryOp::Clamp(lo, hi) = op {
            if let Some(lo) = lo {
                set_slot(&mut prm, 0, d, dispatch_dtype!(d, T => via_elem::<T>(lo)));
                prm.has0 = 1;
            }
            if let Some(hi) = hi {
                set_slot(&mut prm, 1, d, dispatch_dtype!(d, T => via_elem::<T>(hi)));
                prm.has1 = 1;
            }
        }
        let name = match op {
            UnaryOp::Clamp(..) => "clamp",
            UnaryOp::Map(f) => f.key(),
        };
        elementwise(dev, name, || ops::unary(op, d), out, &[a], prm)
    }

    fn addcmul(&self, out: &Arg, t1: &Arg, t2: &Arg, value: Scalar) -> Result<()> {
        let dev = self;
        let d = out.dtype;
        let mut prm = Params::default();
        set_slot(&mut prm, 0, d, dispatch_dtype!(d, T => to_acc::<T>(value)));
        let self_in = Arg {
            mem: out.mem,
            layout: out.layout.clone(),
            dtype: out.dtype,
        };
        elementwise(
            dev,
            "addcmul",
            || ops::addcmul(d),
            out,
            &[&self_in, t1, t2],
            prm,
        )
    }

    fn where_(&self, out: &Arg, cond: &Arg, a: &Arg, b: &Arg) -> Result<()> {
        let dev = self;
        elementwise(
            dev,
            "where",
            ops::where_,
            out,
            &[cond, a, b],
            Params::default(),
        )
    }

    fn reduce(
        &self,
        op: ReduceOp,
        values: Option<&Arg>,
        indices: Option<&Arg>,
        input: &Arg,
        dims: &[usize],
    ) -> Result<()> {
        let dev = self;
        reduce::reduce(dev, op, values, indices, input, dims)
    }

    fn matmul(&self, out: &Arg, a: &Arg, b: &Arg, accumulate: bool) -> Result<()> {
        let dev = self;
        blas::matmul(dev, out, a, b, accumulate)
    }

    fn write_from_host(&self, dst: Mem, bytes: &[u8]) -> Result<()> {
        transfer::host_to_device(self, dst.ptr, bytes, false, self.stream())
    }

    fn softmax(&self, out: &Arg, input: &Arg, s: DimShape, mode: SoftmaxMode) -> Result<()> {
        dimops::softmax(self, out, input, s, mode)
    }

    fn cumsum(&self, out: &Arg, input: &Arg, s: DimShape) -> Result<()> {
        dimops::cumsum(self, out, input, s)
    }

    fn softmax_backward(
        &self,
        out: &Arg,
        grad: &Arg,
        y: &Arg,
        s: DimShape,
        log: bool,
    ) -> Result<()> {
        softmax_backward::softmax_backward(self, out, grad, y, s, log)
    }

    fn sort(&self, k: crate::backend::SortKernel<'_>) -> Result<()> {
        sort::sort(self, &k)
    }

    fn adam_step(
        &self,
        item: &crate::ops::AdamItem<'_>,
        n: usize,
        s: &crate::ops::AdamStep,
    ) -> Result<()> {
        optim::adam_step(self, item, n, s)
    }

    fn adam_step_list(
        &self,
        items: &[crate::ops::AdamItem<'_>],
        s: &crate::ops::AdamStep,
    ) -> Result<()> {
        optim::adam_step_list(self, items, s)
    }

    fn read_to_host(&self, src: Mem, offset: usize, out: &mut [u8]) -> Result<()> {
        transfer::device_to_host(self, out, src.ptr + offset as u64, false, self.stream())
    }
}
