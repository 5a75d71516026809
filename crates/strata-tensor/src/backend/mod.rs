//! The boundary between device-independent tensor logic and device kernels.
//!
//! Tensor ops validate arguments, promote types, broadcast layouts and allocate
//! outputs (all device-independent), then hand [`Arg`]s to the [`Backend`] of
//! the tensors' device. The CPU backend lives in [`cpu`]; a CUDA backend
//! implements the same trait (module `cuda`, feature `cuda`) and is returned by
//! [`backend_for`] when a GPU is present.

pub(crate) mod cpu;
#[cfg(feature = "cuda")]
pub(crate) mod cuda;

use crate::dtype::DType;
use crate::error::Result;
#[cfg(not(feature = "cuda"))]
use crate::error::TensorError;
use crate::layout::Layout;
use crate::scalar::Scalar;
use crate::storage::Storage;
use strata_alloc::Device;

/// An operand as kernels see it: where the storage is, how the elements are
/// laid out in it (strides already broadcast to the op's shape), and their type.
pub(crate) struct Arg<'a> {
    pub storage: &'a Storage,
    pub layout: Layout,
    pub dtype: DType,
}

pub(crate) use crate::ops::table::{BinaryOp, UnaryFn};

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
    /// Batched matrix product of 3-D operands of one dtype into a fresh 3-D out.
    fn matmul(&self, out: &Arg, a: &Arg, b: &Arg) -> Result<()>;
    /// Copies bytes from the host into the start of a storage.
    fn write_from_host(&self, dst: &Storage, bytes: &[u8]) -> Result<()>;
    /// Copies `out.len()` bytes from byte `offset` of a storage to the host.
    fn read_to_host(&self, src: &Storage, offset: usize, out: &mut [u8]) -> Result<()>;
}

/// The backend for `device`, or a typed error where this build or this
/// machine has none (no `cuda` feature, no CUDA driver, no such GPU).
pub(crate) fn backend_for(device: Device) -> Result<&'static dyn Backend> {
    match device {
        Device::Cpu => Ok(&cpu::CpuBackend),
        #[cfg(feature = "cuda")]
        Device::Cuda(n) => {
            cuda::probe(n)?;
            Ok(&cuda::CUDA)
        }
        #[cfg(not(feature = "cuda"))]
        Device::Cuda(_) => Err(TensorError::BackendUnavailable {
            device,
            reason: "strata-tensor was built without the `cuda` feature".into(),
        }),
    }
}

/// The stream new memory for `device` is allocated on: the current stream
/// of a GPU (as in PyTorch), the default stream elsewhere.
pub(crate) fn alloc_stream(device: Device) -> strata_alloc::StreamId {
    match device {
        #[cfg(feature = "cuda")]
        Device::Cuda(n) => cuda::context::current_stream_id(n),
        _ => strata_alloc::StreamId::DEFAULT,
    }
}

/// Whether tensors on `device` can be computed on by this build.
pub fn has_backend(device: Device) -> bool {
    backend_for(device).is_ok()
}
