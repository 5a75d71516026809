//! Exchange with other tools: model files and arrays.
//!
//! * [`safetensors`]: named tensors in Hugging Face's
//!   safetensors format ([`save_safetensors`], [`load_safetensors`] and the
//!   in-memory [`safetensors_to_bytes`], [`safetensors_from_bytes`]), read by
//!   PyTorch's `safetensors.torch.load_file`, and files written by it.
//! * [`npy`]: one tensor in NumPy's `.npy` format ([`save_npy`],
//!   [`load_npy`], [`npy_to_bytes`], [`npy_from_bytes`]), versions 1.0, 2.0
//!   and 3.0, C and Fortran order.
//! * With the `ndarray` feature, conversions between [`Tensor`] and
//!   `ndarray` arrays (`Tensor::from_ndarray`, `Tensor::to_ndarray`,
//!   `TryFrom` both ways). They copy (see the module's docs for why).
//! * [`Tensor::to_raw_bytes`] and [`Tensor::from_raw_bytes`]: a tensor's
//!   elements as little-endian bytes in row-major order, the layout both
//!   formats store.
//!
//! Every file is checked before anything is allocated: a corrupt or hostile
//! header, a shape whose element or byte count overflows, a byte count that
//! does not match the shape, or a dtype strata does not have is a typed error
//! ([`TensorError::Format`], [`TensorError::SizeOverflow`],
//! [`TensorError::DType`], [`TensorError::Io`]), never a panic.
//!
//! Tensors on a GPU are copied through the backend's host transfers (staged
//! through page-locked buffers by the CUDA backend); non-contiguous tensors
//! are written in row-major order.

pub mod npy;
pub mod safetensors;

#[cfg(feature = "ndarray")]
mod ndarray;

pub use self::npy::{load_npy, npy_from_bytes, npy_to_bytes, save_npy};
pub use self::safetensors::{
    load_safetensors, safetensors_from_bytes, safetensors_to_bytes, save_safetensors,
};

use crate::dtype::DType;
use crate::error::{Result, TensorError};
use crate::shape;
use crate::storage::AccessGuard;
use crate::tensor::Tensor;
use std::borrow::Cow;
use strata_alloc::Device;

impl Tensor {
    /// The elements as little-endian bytes in row-major order (a
    /// non-contiguous tensor is made contiguous first; bool is one byte,
    /// 0 or 1, per element). This is the layout safetensors and `.npy`
    /// store.
    ///
    /// ```
    /// use strata_tensor::{Device, Tensor};
    /// let t = Tensor::from_slice(&[1i32, 2, 3, 4], &[2, 2], Device::Cpu)?.t()?;
    /// assert_eq!(t.to_raw_bytes()?, [1, 0, 0, 0, 3, 0, 0, 0, 2, 0, 0, 0, 4, 0, 0, 0]);
    /// # Ok::<(), strata_tensor::TensorError>(())
    /// ```
    pub fn to_raw_bytes(&self) -> Result<Vec<u8>> {
        const OP: &str = "to_raw_bytes";
        let c = self.contiguous()?;
        let n = shape::checked_nbytes(OP, c.shape(), c.numel(), c.dtype().size())?;
        let mut out = host_buffer(OP, n)?;
        if n > 0 {
            let start = c
                .offset()
                .checked_mul(c.dtype().size())
                .ok_or_else(|| TensorError::overflow(OP, "storage offset in bytes overflows"))?;
            let be = c.backend()?;
            let _g = AccessGuard::lock(None, &[c.storage()]);
            be.read_to_host(c.storage().mem(), start, &mut out)?;
        }
        native_to_le(&mut out, c.dtype().size());
        Ok(out)
    }

    /// A contiguous tensor of `shape` and `dtype` on `device` from its
    /// elements as little-endian bytes in row-major order (the inverse of
    /// [`Tensor::to_raw_bytes`]).
    ///
    /// `bytes` must hold exactly `numel * dtype.size()` bytes, else
    /// [`TensorError::Shape`]; a shape whose size overflows is
    /// [`TensorError::SizeOverflow`]. Bool bytes other than 0 are read as
    /// `true` (as C and NumPy do).
    ///
    /// ```
    /// use strata_tensor::{DType, Device, Tensor};
    /// let t = Tensor::from_raw_bytes(&[0, 0, 128, 63, 0, 0, 0, 64], DType::F32, &[2], Device::Cpu)?;
    /// assert_eq!(t.to_vec::<f32>()?, vec![1.0, 2.0]);
    /// assert!(Tensor::from_raw_bytes(&[0; 7], DType::F32, &[2], Device::Cpu).is_err());
    /// # Ok::<(), strata_tensor::TensorError>(())
    /// ```
    #[track_caller]
    pub fn from_raw_bytes(
        bytes: &[u8],
        dtype: DType,
        shape: &[usize],
        device: Device,
    ) -> Result<Tensor> {
        const OP: &str = "from_raw_bytes";
        let numel = shape::check_contiguous(OP, shape)?;
        let nbytes = shape::checked_nbytes(OP, shape, numel, dtype.size())?;
        if bytes.len() != nbytes {
            return Err(TensorError::shape(
                OP,
                format!(
                    "{} bytes cannot hold a {dtype} tensor of shape {shape:?} ({numel} elements of {} bytes = {nbytes} bytes)",
                    bytes.len(),
                    dtype.size()
                ),
            ));
        }
        let mut data = Cow::Borrowed(bytes);
        if dtype == DType::Bool && data.iter().any(|&b| b > 1) {
            // Rust's `bool` must be 0 or 1: normalise (non-zero is true).
            data = Cow::Owned(data.iter().map(|&b| u8::from(b != 0)).collect());
        }
        if cfg!(target_endian = "big") && dtype.size() > 1 {
            let mut owned = data.into_owned();
            swap_bytes(&mut owned, dtype.size());
            data = Cow::Owned(owned);
        }
        let t = Tensor::uninit("from_raw_bytes", shape, dtype, device)?;
        if nbytes > 0 {
            t.backend()?.write_from_host(t.storage().mem(), &data)?;
            t.remember_host_range(&data);
        }
        Ok(t)
    }
}

/// A zeroed host buffer of `n` bytes, or a typed error when the host cannot
/// allocate it (instead of aborting the process).
pub(crate) fn host_buffer(op: &'static str, n: usize) -> Result<Vec<u8>> {
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| {
        TensorError::value(
            op,
            format!("cannot allocate a host buffer of {n} bytes for the copy"),
        )
    })?;
    v.resize(n, 0);
    Ok(v)
}

/// Reverses the bytes of every `size`-byte element.
pub(crate) fn swap_bytes(bytes: &mut [u8], size: usize) {
    if size > 1 {
        for e in bytes.chunks_exact_mut(size) {
            e.reverse();
        }
    }
}

/// Native-endian elements to little-endian (nothing to do on little-endian hosts).
fn native_to_le(bytes: &mut [u8], size: usize) {
    if cfg!(target_endian = "big") {
        swap_bytes(bytes, size);
    }
}

/// Reads a whole file, as a typed error naming the file on failure.
pub(crate) fn read_file(op: &'static str, path: &std::path::Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|source| TensorError::Io {
        op,
        path: path.to_path_buf(),
        source,
    })
}

/// Writes a whole file, as a typed error naming the file on failure.
pub(crate) fn write_file(op: &'static str, path: &std::path::Path, bytes: &[u8]) -> Result<()> {
    std::fs::write(path, bytes).map_err(|source| TensorError::Io {
        op,
        path: path.to_path_buf(),
        source,
    })
}

pub(crate) fn format_error(
    op: &'static str,
    format: &'static str,
    msg: impl Into<String>,
) -> TensorError {
    TensorError::Format {
        op,
        format,
        msg: msg.into(),
    }
}
