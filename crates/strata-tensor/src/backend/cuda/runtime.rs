//! The CUDA side of the device runtime behind the public `cuda` module and
//! `Tensor::to`: device queries, streams, events, transfers and pinned host
//! memory. `backend::stub` has the same functions for builds without the
//! `cuda` feature; the rest of the crate calls them as `backend::gpu::*`.

use super::context::{self, cu, cu_stream, failure, guarded, CudaDevice};
use super::transfer;
use crate::error::{Result, TensorError};
use cudarc::driver::sys;
use std::sync::Arc;
use strata_alloc::driver::cuda::CudaDriver;
use strata_alloc::driver::DriverError;
use strata_alloc::{CachingAllocator, Device, DevicePtr, StreamId};

// NCCL communicators and collectives (`crate::distributed`).
pub(crate) use super::nccl::{
    nccl_collective, nccl_destroy, nccl_group_end, nccl_group_start, nccl_init_all, nccl_init_rank,
    nccl_library_path, nccl_unavailable_reason, nccl_unique_id, nccl_version, RawComm,
};

/// The opened GPU `device`, or a typed error for a device that is not a GPU.
fn gpu(device: Device) -> Result<&'static CudaDevice> {
    match device {
        Device::Cuda(n) => CudaDevice::get(n),
        d => Err(TensorError::value(
            "cuda",
            format!("{d} is not a CUDA device"),
        )),
    }
}

/// A call of GPU `device`'s driver (`f`), its error as a device failure
/// naming the CUDA call.
fn driver_call<T>(
    device: Device,
    call: &str,
    f: impl FnOnce(&CudaDriver) -> std::result::Result<T, DriverError>,
) -> Result<T> {
    f(&gpu(device)?.driver).map_err(|e| failure(device, call, e.to_string()))
}

/// The backend of GPU `ordinal` (its opened device).
pub(crate) fn backend(ordinal: usize) -> Result<&'static dyn crate::backend::Backend> {
    Ok(CudaDevice::get(ordinal)?)
}

/// Number of visible GPUs (0 without a driver).
pub(crate) fn device_count() -> usize {
    strata_alloc::driver::cuda::device_count()
}

/// Why no GPU can be used, or `None` when one can.
pub(crate) fn unavailable_reason() -> Option<String> {
    match CudaDevice::get(0) {
        Ok(_) => None,
        Err(e) => Some(e.to_string()),
    }
}

/// cuDNN's version and the file it was loaded from, or why it cannot be
/// loaded (`cudnn.rs`).
pub(crate) fn cudnn_version() -> std::result::Result<(usize, String), String> {
    super::cudnn::version()
}

/// The stream new memory for GPU `ordinal` is allocated on (its current stream).
pub(crate) fn alloc_stream(ordinal: usize) -> StreamId {
    context::current_stream_id(ordinal)
}

/// A new stream on `device` that does not synchronise with the legacy default stream.
pub(crate) fn create_stream(device: Device) -> Result<StreamId> {
    driver_call(device, "cuStreamCreate", |d| d.create_stream())
}

/// [`create_stream`] at `priority` (clamped by the driver to the device's range).
pub(crate) fn create_stream_with_priority(device: Device, priority: i32) -> Result<StreamId> {
    driver_call(device, "cuStreamCreateWithPriority", |d| {
        d.create_stream_with_priority(priority)
    })
}

/// `(least, greatest)` stream priority of `device`.
pub(crate) fn stream_priority_range(device: Device) -> Result<(i32, i32)> {
    driver_call(device, "cuCtxGetStreamPriorityRange", |d| {
        d.stream_priority_range()
    })
}

/// The priority of stream `s` of `device`.
pub(crate) fn stream_priority(device: Device, s: StreamId) -> Result<i32> {
    driver_call(device, "cuStreamGetPriority", |d| d.stream_priority(s))
}

/// The current stream of `device` on this thread.
pub(crate) fn current_stream(device: Device) -> Result<StreamId> {
    Ok(gpu(device)?.stream())
}

/// Makes `s` the current stream of `device` on this thread; returns the previous one.
pub(crate) fn set_current_stream(device: Device, s: StreamId) -> Result<StreamId> {
    let d = gpu(device)?;
    Ok(context::set_current_stream_id(d.ordinal, s))
}

/// Blocks until the work queued on `s` has run.
pub(crate) fn synchronize_stream(device: Device, s: StreamId) -> Result<()> {
    transfer::sync_stream(gpu(device)?, s)
}

/// Blocks until all work on `device` has run.
pub(crate) fn synchronize_device(device: Device) -> Result<()> {
    driver_call(device, "cuCtxSynchronize", |d| d.synchronize_device())
}

/// A CUDA event handle (owned by `crate::cuda::Event`, which destroys it).
#[derive(Debug)]
pub(crate) struct RawEvent(sys::CUevent);

// SAFETY: a CUevent is a handle that the driver allows to use from any
// thread; its owner destroys it once, on drop.
unsafe impl Send for RawEvent {}
// SAFETY: it is only passed to thread-safe driver calls.
unsafe impl Sync for RawEvent {}

/// A new event on `device`; `timing` enables [`elapsed_ms`].
pub(crate) fn create_event(device: Device, timing: bool) -> Result<RawEvent> {
    let d = gpu(device)?;
    d.bind()?;
    let flags = if timing {
        sys::CUevent_flags::CU_EVENT_DEFAULT as u32
    } else {
        sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32
    };
    guarded(device, "cuEventCreate", || {
        let mut e: sys::CUevent = std::ptr::null_mut();
        // SAFETY: `e` is a valid out-pointer; the flags are valid.
        cu(device, "cuEventCreate", unsafe {
            sys::cuEventCreate(&mut e, flags)
        })?;
        Ok(RawEvent(e))
    })
}

/// Records `e` on stream `s` of `device`.
pub(crate) fn record_event(device: Device, e: &RawEvent, s: StreamId) -> Result<()> {
    gpu(device)?.bind()?;
    guarded(device, "cuEventRecord", || {
        // SAFETY: the event is live; the stream belongs to this device.
        cu(device, "cuEventRecord", unsafe {
            sys::cuEventRecord(e.0, cu_stream(s))
        })
    })
}

/// Makes later work on stream `s` wait for `e`.
pub(crate) fn stream_wait_event(device: Device, s: StreamId, e: &RawEvent) -> Result<()> {
    gpu(device)?.bind()?;
    guarded(device, "cuStreamWaitEvent", || {
        // SAFETY: the stream is the default stream or a live stream of this
        // device; the event is live (owned by the caller's `Event`).
        cu(device, "cuStreamWaitEvent", unsafe {
            sys::cuStreamWaitEvent(cu_stream(s), e.0, 0)
        })
    })
}

/// Blocks until `e` has completed.
pub(crate) fn synchronize_event(device: Device, e: &RawEvent) -> Result<()> {
    gpu(device)?.bind()?;
    guarded(device, "cuEventSynchronize", || {
        // SAFETY: the event is live.
        cu(device, "cuEventSynchronize", unsafe {
            sys::cuEventSynchronize(e.0)
        })
    })
}

/// Whether `e` has completed (non-blocking).
pub(crate) fn query_event(device: Device, e: &RawEvent) -> Result<bool> {
    gpu(device)?.bind()?;
    guarded(device, "cuEventQuery", || {
        // SAFETY: the event is live.
        match unsafe { sys::cuEventQuery(e.0) } {
            sys::CUresult::CUDA_ERROR_NOT_READY => Ok(false),
            r => cu(device, "cuEventQuery", r).map(|_| true),
        }
    })
}

/// Milliseconds between `start` and `end`.
pub(crate) fn elapsed_ms(device: Device, start: &RawEvent, end: &RawEvent) -> Result<f32> {
    gpu(device)?.bind()?;
    guarded(device, "cuEventElapsedTime_v2", || {
        let mut ms = 0f32;
        // SAFETY: both events are live; `ms` is a valid out-pointer.
        cu(device, "cuEventElapsedTime_v2", unsafe {
            sys::cuEventElapsedTime_v2(&mut ms, start.0, end.0)
        })?;
        Ok(ms)
    })
}

/// Destroys `e` (called once, by its owner's drop).
pub(crate) fn destroy_event(device: Device, e: &RawEvent) {
    let raw = e.0;
    let _ = guarded(device, "cuEventDestroy_v2", || {
        // SAFETY: the event is owned by the caller and destroyed once;
        // destroying a pending event is allowed.
        cu(device, "cuEventDestroy_v2", unsafe {
            sys::cuEventDestroy_v2(raw)
        })
    });
}

/// Copies `bytes` from the host to `dst` on `device`, on stream `s`; returns
/// once `bytes` may be reused (pageable memory is staged).
pub(crate) fn host_to_device(
    device: Device,
    dst: DevicePtr,
    bytes: &[u8],
    pinned: bool,
    s: StreamId,
) -> Result<()> {
    transfer::host_to_device(gpu(device)?, dst, bytes, pinned, s)
}

/// Queues the copy of pinned `bytes` to `dst` on stream `s` and returns at once.
pub(crate) fn htod_pinned_async(
    device: Device,
    dst: DevicePtr,
    bytes: &[u8],
    s: StreamId,
) -> Result<()> {
    transfer::htod_pinned_async(gpu(device)?, dst, bytes, s)
}

/// Copies `out.len()` bytes from `src` on `device` to pageable host memory, on
/// stream `s`; returns when they have arrived.
pub(crate) fn device_to_host(
    device: Device,
    out: &mut [u8],
    src: DevicePtr,
    s: StreamId,
) -> Result<()> {
    transfer::device_to_host(gpu(device)?, out, src, false, s)
}

/// Queues the copy from `src` into pinned `out` on stream `s` and returns at once.
pub(crate) fn dtoh_pinned_async(
    device: Device,
    out: &mut [u8],
    src: DevicePtr,
    s: StreamId,
) -> Result<()> {
    transfer::dtoh_pinned_async(gpu(device)?, out, src, s)
}

/// Copies `len` bytes from `src` on `src_device` to `dst` on `dst_device`,
/// queued on stream `s` of the destination (one device: `cuMemcpyDtoDAsync`,
/// two: `cuMemcpyPeerAsync`).
pub(crate) fn device_to_device(
    dst_device: Device,
    dst: DevicePtr,
    src_device: Device,
    src: DevicePtr,
    len: usize,
    s: StreamId,
) -> Result<()> {
    let (sdev, ddev) = (gpu(src_device)?, gpu(dst_device)?);
    transfer::device_to_device(ddev, dst, sdev, src, len, s)
}

/// The caching allocator behind `pin_memory()` tensors (opened on first use).
pub(crate) fn pinned_tensor_allocator() -> Result<Arc<CachingAllocator>> {
    transfer::pinned_tensor_allocator()
}

/// The allocator behind `pin_memory()` tensors, if it has been opened.
pub(crate) fn pinned_tensor_allocator_if_open() -> Option<Arc<CachingAllocator>> {
    transfer::pinned_tensor_allocator_if_open()
}

/// Statistics of the pinned allocator staging the transfers of GPU `ordinal`.
pub(crate) fn host_memory_stats(ordinal: usize) -> Option<strata_alloc::pinned::PinnedStats> {
    let d = CudaDevice::get(ordinal).ok()?;
    Some(d.staging().stats())
}

/// Bytes per staging chunk and chunks in flight of pageable host transfers.
pub(crate) fn staging_geometry() -> (usize, usize) {
    (transfer::CHUNK, transfer::RING)
}
