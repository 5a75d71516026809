//! Choosing the device: `STRATA_DEVICE` (`cpu`, `cuda`, `cuda:N`), else a GPU
//! when one is present and this build can compute on it, else the CPU.

use crate::backend::{backend_for, has_backend};
use crate::error::{Result, TensorError};
use strata_alloc::Device;

/// The device examples and tools should use.
///
/// `STRATA_DEVICE` wins when set: a malformed value is an error, and so is a
/// device that cannot be used here ([`TensorError::BackendUnavailable`] for
/// `cuda` without a GPU, a CUDA driver or the `cuda` feature, or an ordinal
/// past the last GPU), so a bad setting fails here rather than at the first
/// tensor. Otherwise `cuda:0` when a GPU is present and a tensor backend for
/// it is built in, else the CPU.
///
/// ```
/// let d = strata_tensor::default_device().unwrap();
/// println!("running on {d}");
/// ```
pub fn default_device() -> Result<Device> {
    // Read as bytes: a value that is not UTF-8 is refused as malformed
    // (its replacement characters name no device), not taken for an unset
    // variable as `std::env::var`'s error would be.
    if let Some(v) = std::env::var_os("STRATA_DEVICE") {
        let s = v.to_string_lossy();
        if !s.trim().is_empty() {
            let d = Device::parse(&s)?;
            check_usable(d)?;
            return Ok(d);
        }
    }
    let gpu = Device::Cuda(0);
    if has_backend(gpu) && strata_alloc::allocator(gpu).is_ok() {
        return Ok(gpu);
    }
    Ok(Device::Cpu)
}

/// Whether tensors can be created on `d`: a backend for it and its allocator.
fn check_usable(d: Device) -> Result<()> {
    backend_for(d)?;
    strata_alloc::allocator(d).map_err(|e| TensorError::BackendUnavailable {
        device: d,
        reason: format!("STRATA_DEVICE names {d}, whose allocator is unavailable: {e}"),
    })?;
    Ok(())
}
