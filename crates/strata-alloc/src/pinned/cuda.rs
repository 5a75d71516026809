//! The CUDA pinning backend and the per-device pinned allocators.

use super::cache::PinnedAllocator;
use super::PinnedBackend;
use crate::driver::cuda::CudaDriver;
use crate::driver::{DriverError, StreamEvents};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;

/// The CUDA pinning backend: `cuMemHostAlloc` (flags 0: cached, not
/// write-combined) and `cuMemFreeHost`, events and streams of the device's
/// [`CudaDriver`].
pub struct CudaPinnedBackend {
    driver: Arc<CudaDriver>,
}

impl CudaPinnedBackend {
    /// A backend over an open device. Pinned memory belongs to the process, but
    /// the events are the device's: record only streams of this device.
    pub fn new(driver: Arc<CudaDriver>) -> CudaPinnedBackend {
        CudaPinnedBackend { driver }
    }

    /// Device `ordinal`'s shared handle ([`CudaDriver::shared`]) for pinning
    /// (a typed `Unavailable` error without CUDA).
    pub fn open(ordinal: usize) -> Result<CudaPinnedBackend, DriverError> {
        CudaDriver::shared(ordinal).map(CudaPinnedBackend::new)
    }

    /// The device driver.
    pub fn driver(&self) -> &Arc<CudaDriver> {
        &self.driver
    }
}

impl PinnedBackend for CudaPinnedBackend {
    fn alloc(&self, size: u64) -> Result<u64, DriverError> {
        self.driver.host_alloc(size)
    }

    fn free(&self, ptr: u64, _size: u64) -> Result<(), DriverError> {
        self.driver.host_free(ptr)
    }

    fn events(&self) -> &dyn StreamEvents {
        &*self.driver
    }
}

/// The pinned allocator of a CUDA device.
pub type CudaPinnedAllocator = PinnedAllocator<CudaPinnedBackend>;

/// The process-wide pinned allocator whose events live on CUDA device
/// `ordinal`, created on first use (PyTorch keeps one host allocator per
/// process; strata keeps one per device, because events belong to a device).
/// Fails with [`DriverError::Unavailable`] without CUDA; never panics.
pub fn cuda_allocator(ordinal: usize) -> Result<Arc<CudaPinnedAllocator>, DriverError> {
    static REGISTRY: std::sync::OnceLock<Mutex<HashMap<usize, Arc<CudaPinnedAllocator>>>> =
        std::sync::OnceLock::new();
    let registry = REGISTRY.get_or_init(|| Mutex::new(HashMap::new()));
    if let Some(a) = registry.lock().get(&ordinal) {
        return Ok(Arc::clone(a));
    }
    // Open outside the lock: opening a device can take a while.
    let created = PinnedAllocator::new(CudaPinnedBackend::open(ordinal)?);
    // The settings in force and those set later, as PyTorch's host
    // allocator reads them where it uses them (one that loses the race
    // below is dropped and forgotten by the settings).
    created.follow_allocator_settings();
    Ok(Arc::clone(
        registry.lock().entry(ordinal).or_insert(created),
    ))
}
