//! The device runtime of builds without the `cuda` feature: the functions of
//! `backend::cuda::runtime` with the same signatures, each answering that
//! GPUs are unavailable (a typed error, `None`, `0` or `false`), so the
//! public `cuda` module and `Tensor::to` compile and behave the same way on
//! every build.

use crate::error::{Result, TensorError};
use std::sync::Arc;
use strata_alloc::{CachingAllocator, Device, DevicePtr, StreamId};

/// Why nothing here works.
const REASON: &str = "strata-tensor was built without the `cuda` feature";

fn unavailable<T>(device: Device) -> Result<T> {
    Err(TensorError::BackendUnavailable {
        device,
        reason: REASON.into(),
    })
}

/// No GPU can compute in this build.
pub(crate) fn backend(ordinal: usize) -> Result<&'static dyn super::Backend> {
    unavailable(Device::Cuda(ordinal))
}

/// No GPUs in this build.
pub(crate) fn device_count() -> usize {
    0
}

/// Always the missing feature.
pub(crate) fn unavailable_reason() -> Option<String> {
    Some(REASON.into())
}

/// No cuDNN in this build.
pub(crate) fn cudnn_version() -> std::result::Result<(usize, String), String> {
    Err(REASON.into())
}

/// The default stream (there is no other).
pub(crate) fn alloc_stream(_ordinal: usize) -> StreamId {
    StreamId::DEFAULT
}

/// Unavailable.
pub(crate) fn create_stream(device: Device) -> Result<StreamId> {
    unavailable(device)
}

/// Unavailable.
pub(crate) fn create_stream_with_priority(device: Device, _priority: i32) -> Result<StreamId> {
    unavailable(device)
}

/// Unavailable.
pub(crate) fn stream_priority_range(device: Device) -> Result<(i32, i32)> {
    unavailable(device)
}

/// Unavailable.
pub(crate) fn stream_priority(device: Device, _s: StreamId) -> Result<i32> {
    unavailable(device)
}

/// Unavailable.
pub(crate) fn current_stream(device: Device) -> Result<StreamId> {
    unavailable(device)
}

/// Unavailable.
pub(crate) fn set_current_stream(device: Device, _s: StreamId) -> Result<StreamId> {
    unavailable(device)
}

/// Unavailable.
pub(crate) fn synchronize_stream(device: Device, _s: StreamId) -> Result<()> {
    unavailable(device)
}

/// Unavailable.
pub(crate) fn synchronize_device(device: Device) -> Result<()> {
    unavailable(device)
}

/// No event can exist in this build.
#[derive(Debug)]
pub(crate) enum RawEvent {}

/// Unavailable.
pub(crate) fn create_event(device: Device, _timing: bool) -> Result<RawEvent> {
    unavailable(device)
}

/// Unreachable: no event exists.
pub(crate) fn record_event(_device: Device, e: &RawEvent, _s: StreamId) -> Result<()> {
    match *e {}
}

/// Unreachable: no event exists.
pub(crate) fn stream_wait_event(_device: Device, _s: StreamId, e: &RawEvent) -> Result<()> {
    match *e {}
}

/// Unreachable: no event exists.
pub(crate) fn synchronize_event(_device: Device, e: &RawEvent) -> Result<()> {
    match *e {}
}

/// Unreachable: no event exists.
pub(crate) fn query_event(_device: Device, e: &RawEvent) -> Result<bool> {
    match *e {}
}

/// Unreachable: no event exists.
pub(crate) fn elapsed_ms(_device: Device, start: &RawEvent, _end: &RawEvent) -> Result<f32> {
    match *start {}
}

/// Unreachable: no event exists.
pub(crate) fn destroy_event(_device: Device, e: &RawEvent) {
    match *e {}
}

/// Unavailable.
pub(crate) fn host_to_device(
    device: Device,
    _dst: DevicePtr,
    _bytes: &[u8],
    _pinned: bool,
    _s: StreamId,
) -> Result<()> {
    unavailable(device)
}

/// Unavailable.
pub(crate) fn htod_pinned_async(
    device: Device,
    _dst: DevicePtr,
    _bytes: &[u8],
    _s: StreamId,
) -> Result<()> {
    unavailable(device)
}

/// Unavailable.
pub(crate) fn device_to_host(
    device: Device,
    _out: &mut [u8],
    _src: DevicePtr,
    _s: StreamId,
) -> Result<()> {
    unavailable(device)
}

/// Unavailable.
pub(crate) fn dtoh_pinned_async(
    device: Device,
    _out: &mut [u8],
    _src: DevicePtr,
    _s: StreamId,
) -> Result<()> {
    unavailable(device)
}

/// Unavailable.
pub(crate) fn device_to_device(
    dst_device: Device,
    _dst: DevicePtr,
    _src_device: Device,
    _src: DevicePtr,
    _len: usize,
    _s: StreamId,
) -> Result<()> {
    unavailable(dst_device)
}

/// Pinned memory needs a GPU driver.
pub(crate) fn pinned_tensor_allocator() -> Result<Arc<CachingAllocator>> {
    Err(TensorError::BackendUnavailable {
        device: Device::Cuda(0),
        reason: "pinned memory needs the `cuda` feature".into(),
    })
}

/// Never opened.
pub(crate) fn pinned_tensor_allocator_if_open() -> Option<Arc<CachingAllocator>> {
    None
}

/// No staging allocator.
pub(crate) fn host_memory_stats(_ordinal: usize) -> Option<strata_alloc::pinned::PinnedStats> {
    None
}

/// No staging.
pub(crate) fn staging_geometry() -> (usize, usize) {
    (0, 0)
}

// ----- NCCL (`crate::distributed`) -----

/// NCCL needs the `cuda` feature.
const NCCL_REASON: &str =
    "strata-tensor was built without the `cuda` feature, so NCCL collectives are unavailable";

fn nccl_unavailable<T>() -> Result<T> {
    Err(TensorError::BackendUnavailable {
        device: Device::Cuda(0),
        reason: NCCL_REASON.into(),
    })
}

/// No communicator can exist in this build.
#[derive(Debug)]
pub(crate) enum RawComm {}

/// Always the missing feature.
pub(crate) fn nccl_unavailable_reason() -> Option<String> {
    Some(NCCL_REASON.into())
}

/// Never loaded.
pub(crate) fn nccl_library_path() -> Option<String> {
    None
}

/// Unavailable.
pub(crate) fn nccl_version() -> Result<i32> {
    nccl_unavailable()
}

/// Unavailable.
pub(crate) fn nccl_unique_id() -> Result<[u8; 128]> {
    nccl_unavailable()
}

/// Unavailable.
pub(crate) fn nccl_init_all(_ordinals: &[usize]) -> Result<Vec<RawComm>> {
    nccl_unavailable()
}

/// Unavailable.
pub(crate) fn nccl_init_rank(
    _ordinal: usize,
    _world: usize,
    _rank: usize,
    _id: &[u8; 128],
) -> Result<RawComm> {
    nccl_unavailable()
}

/// Unreachable: no communicator exists.
pub(crate) fn nccl_destroy(_device: Device, comm: &RawComm) {
    match *comm {}
}

/// Unavailable.
pub(crate) fn nccl_group_start() -> Result<()> {
    nccl_unavailable()
}

/// Unavailable.
pub(crate) fn nccl_group_end() -> Result<()> {
    nccl_unavailable()
}

/// Unreachable: no communicator exists.
pub(crate) fn nccl_collective(
    _device: Device,
    comm: &RawComm,
    _call: &crate::distributed::CollectiveCall,
    _s: StreamId,
) -> Result<()> {
    match *comm {}
}
