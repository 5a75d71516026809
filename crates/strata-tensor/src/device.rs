//! Choosing the device: `STRATA_DEVICE` (`cpu`, `cuda`, `cuda:N`), else a GPU
//! when one is present and this build can compute on it, else the CPU.

use crate::backend::has_backend;
use crate::error::Result;
use strata_alloc::Device;

/// The device examples and tools should use.
///
/// `STRATA_DEVICE` wins when set (a malformed value is an error). Otherwise
/// `cuda:0` when a GPU is present and a tensor backend for it is built in,
/// else the CPU.
///
/// ```
/// let d = strata_tensor::default_device().unwrap();
/// println!("running on {d}");
/// ```
pub fn default_device() -> Result<Device> {
    if let Ok(s) = std::env::var("STRATA_DEVICE") {
        if !s.trim().is_empty() {
            return Ok(Device::parse(&s)?);
        }
    }
    let gpu = Device::Cuda(0);
    if has_backend(gpu) && strata_alloc::allocator(gpu).is_ok() {
        return Ok(gpu);
    }
    Ok(Device::Cpu)
}
