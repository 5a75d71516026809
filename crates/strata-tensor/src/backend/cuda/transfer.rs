//! Copies between host and device, and between devices.
//!
//! * Pinned host memory (a `pin_memory()` tensor, a staging buffer) is copied
//!   directly with `cuMemcpy{HtoD,DtoH}Async` on the current stream.
//! * Pageable host memory goes through a ring of [`RING`] pinned staging
//!   chunks of [`CHUNK`] bytes from strata-alloc's caching pinned allocator:
//!   the host copy of one chunk (spread over the thread pool) overlaps the DMA
//!   of the others, instead of the driver's slow pageable path. Each chunk is
//!   reused only after the event recorded behind its DMA has completed, and is
//!   handed back to the pinned cache with `record_stream`, so an H2D copy can
//!   return while its last DMAs are still running.
//! * Device to device: `cuMemcpyDtoDAsync` on one device, `cuMemcpyPeerAsync`
//!   between two.
//! * `pin_memory()` tensors are CPU tensors whose storage comes from a caching
//!   allocator over page-locked memory (`cuMemHostAlloc`), so `record_stream`
//!   on them defers reuse until the copies using them have run.

use super::context::{cu, cu_stream, failure, guarded, CudaDevice};
use crate::error::Result;
use cudarc::driver::sys;
use rayon::prelude::*;
use std::ffi::c_void;
use std::sync::Arc;
use strata_alloc::driver::{Driver, EventHandle, MemInfo, StreamEvents, VirtualMemory};
use strata_alloc::pinned::{CudaPinnedAllocator, CudaPinnedBackend, PinnedAllocator};
use strata_alloc::{CachingAllocator, Device, DevicePtr, DriverError, StreamId};

/// Bytes per staging chunk.
pub const CHUNK: usize = 8 << 20;
/// Staging chunks in flight per copy.
pub const RING: usize = 4;
/// Below this size pageable copies use the driver's own staging.
const SMALL: usize = 1 << 20;

impl CudaDevice {
    /// The caching pinned allocator staging this device's pageable transfers
    /// (created on first use).
    pub(crate) fn staging(&self) -> &Arc<CudaPinnedAllocator> {
        self.staging
            .get_or_init(|| PinnedAllocator::new(CudaPinnedBackend::new(Arc::clone(&self.driver))))
    }
}

/// Host memory copy over the thread pool (pieces of 1 MiB).
fn par_copy(dst: &mut [u8], src: &[u8]) {
    const PIECE: usize = 1 << 20;
    if src.len() <= PIECE {
        dst.copy_from_slice(src);
        return;
    }
    dst.par_chunks_mut(PIECE)
        .zip(src.par_chunks(PIECE))
        .for_each(|(d, s)| d.copy_from_slice(s));
}

/// Events for the staging ring.
struct Ring {
    events: Vec<EventHandle>,
    recorded: Vec<bool>,
}

impl Ring {
    fn new(dev: &CudaDevice) -> Result<Ring> {
        let events = (0..RING)
            .map(|_| {
                dev.driver
                    .create_event()
                    .map_err(|e| failure(dev.device(), "cuEventCreate", e.to_string()))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Ring {
            events,
            recorded: vec![false; RING],
        })
    }

    fn wait(&mut self, dev: &CudaDevice, slot: usize) -> Result<()> {
        if self.recorded[slot] {
            dev.driver
                .synchronize_event(self.events[slot])
                .map_err(|e| failure(dev.device(), "cuEventSynchronize", e.to_string()))?;
            self.recorded[slot] = false;
        }
        Ok(())
    }

    fn record(&mut self, dev: &CudaDevice, slot: usize, stream: StreamId) -> Result<()> {
        dev.driver
            .record_event(self.events[slot], stream)
            .map_err(|e| failure(dev.device(), "cuEventRecord", e.to_string()))?;
        self.recorded[slot] = true;
        Ok(())
    }

    fn destroy(self, dev: &CudaDevice) {
        for e in self.events {
            // Destroying a recorded event is allowed; its resources go at completion.
            let _ = dev.driver.destroy_event(e);
        }
    }
}

/// Asynchronous H2D of `len` bytes from host `src` (pinned, or pageable for
/// the driver's own staging) to `dst`.
///
/// # Safety
/// `src` must be readable for `len` bytes until the copy has consumed it, and
/// `dst..dst + len` must be device memory of `dev` that nothing else uses.
unsafe fn htod_async(
    dev: &CudaDevice,
    dst: DevicePtr,
    src: *const u8,
    len: usize,
    stream: StreamId,
) -> Result<()> {
    let device = dev.device();
    guarded(device, "cuMemcpyHtoDAsync_v2", || {
        // SAFETY: guaranteed by the caller.
        cu(device, "cuMemcpyHtoDAsync_v2", unsafe {
            sys::cuMemcpyHtoDAsync_v2(dst, src as *const c_void, len, cu_stream(stream))
        })
    })
}

/// Asynchronous D2H of `len` bytes.
///
/// # Safety
/// `dst` must be writable for `len` bytes and unused by the host until the
/// copy has completed; `src..src + len` must be device memory of `dev`.
unsafe fn dtoh_async(
    dev: &CudaDevice,
    dst: *mut u8,
    src: DevicePtr,
    len: usize,
    stream: StreamId,
) -> Result<()> {
    let device = dev.device();
    guarded(device, "cuMemcpyDtoHAsync_v2", || {
        // SAFETY: guaranteed by the caller.
        cu(device, "cuMemcpyDtoHAsync_v2", unsafe {
            sys::cuMemcpyDtoHAsync_v2(dst as *mut c_void, src, len, cu_stream(stream))
        })
    })
}

/// Blocks until `stream`'s work has run.
pub(crate) fn sync_stream(dev: &CudaDevice, stream: StreamId) -> Result<()> {
    dev.driver
        .synchronize_stream(stream)
        .map_err(|e| failure(dev.device(), "cuStreamSynchronize", e.to_string()))
}

/// Copies `src` to device address `dst` on `stream`. When this returns, `src`
/// may be reused (pinned sources are waited for; pageable ones were staged).
/// `pinned` says whether `src` is page-locked, as known from its allocator:
/// the driver is never asked about arbitrary host pointers (it answers an
/// unknown one with an API error, which compute-sanitizer reports).
pub(crate) fn host_to_device(
    dev: &CudaDevice,
    dst: DevicePtr,
    src: &[u8],
    pinned: bool,
    stream: StreamId,
) -> Result<()> {
    if src.is_empty() {
        return Ok(());
    }
    dev.bind()?;
    if pinned {
        // SAFETY: `src` is borrowed until the stream sync below; the caller
        // owns `dst` for `src.len()` bytes.
        unsafe { htod_async(dev, dst, src.as_ptr(), src.len(), stream)? };
        return sync_stream(dev, stream);
    }
    if src.len() <= SMALL {
        // The driver stages pageable memory itself and returns once `src` is read.
        // SAFETY: as above.
        return unsafe { htod_async(dev, dst, src.as_ptr(), src.len(), stream) };
    }
    staged_htod(dev, dst, src, stream)
}

/// H2D from pageable memory through the pinned staging ring.
pub(crate) fn staged_htod(
    dev: &CudaDevice,
    dst: DevicePtr,
    src: &[u8],
    stream: StreamId,
) -> Result<()> {
    let device = dev.device();
    let alloc = dev.staging();
    let nchunks = src.len().div_ceil(CHUNK);
    let slots = RING.min(nchunks);
    let mut bufs = (0..slots)
        .map(|_| {
            alloc
                .allocate(CHUNK as u64)
                .map_err(|e| failure(device, "pinned staging buffer", e.to_string()))
        })
        .collect::<Result<Vec<_>>>()?;
    let mut ring = Ring::new(dev)?;
    let mut result = Ok(());
    for (i, piece) in src.chunks(CHUNK).enumerate() {
        let slot = i % slots;
        if let Err(e) = ring.wait(dev, slot) {
            result = Err(e);
            break;
        }
        // SAFETY: the slot's previous DMA has completed (waited above), so no
        // copy reads the buffer while the host writes it.
        let staging = unsafe { bufs[slot].as_mut_slice() };
        par_copy(&mut staging[..piece.len()], piece);
        // SAFETY: the staging buffer stays allocated until its event (recorded
        // below, and via record_stream) completes; `dst + offset` lies in the
        // caller's device range.
        let r = unsafe {
            htod_async(
                dev,
                dst + (i * CHUNK) as u64,
                bufs[slot].as_ptr(),
                piece.len(),
                stream,
            )
        }
        .and_then(|_| ring.record(dev, slot, stream));
        if let Err(e) = r {
            result = Err(e);
            break;
        }
    }
    for b in &bufs {
        // Reuse of each staging block waits for the DMAs queued on `stream`.
        if let Err(e) = b.record_stream(stream) {
            let _ = sync_stream(dev, stream);
            result = result.and(Err(failure(device, "pinned record_stream", e.to_string())));
        }
    }
    if result.is_err() {
        let _ = sync_stream(dev, stream);
    }
    ring.destroy(dev);
    drop(bufs);
    result
}

/// Copies device address `src` to `out` on `stream`, waiting for the copy;
/// `pinned` says whether `out` is page-locked.
pub(crate) fn device_to_host(
    dev: &CudaDevice,
    out: &mut [u8],
    src: DevicePtr,
    pinned: bool,
    stream: StreamId,
) -> Result<()> {
    if out.is_empty() {
        return Ok(());
    }
    dev.bind()?;
    if out.len() <= SMALL || pinned {
        // SAFETY: `out` is borrowed mutably until the stream sync below.
        unsafe { dtoh_async(dev, out.as_mut_ptr(), src, out.len(), stream)? };
        return sync_stream(dev, stream);
    }
    staged_dtoh(dev, out, src, stream)
}

/// D2H into pageable memory through the pinned staging ring.
pub(crate) fn staged_dtoh(
    dev: &CudaDevice,
    out: &mut [u8],
    src: DevicePtr,
    stream: StreamId,
) -> Result<()> {
    let device = dev.device();
    let alloc = dev.staging();
    let len = out.len();
    let nchunks = len.div_ceil(CHUNK);
    let slots = RING.min(nchunks);
    let mut bufs = (0..slots)
        .map(|_| {
            alloc
                .allocate(CHUNK as u64)
                .map_err(|e| failure(device, "pinned staging buffer", e.to_string()))
        })
        .collect::<Result<Vec<_>>>()?;
    let mut ring = Ring::new(dev)?;
    let piece_len = |i: usize| CHUNK.min(len - i * CHUNK);
    let issue = |i: usize,
                 bufs: &mut Vec<strata_alloc::pinned::PinnedBuffer<CudaPinnedBackend>>,
                 ring: &mut Ring|
     -> Result<()> {
        let slot = i % slots;
        // SAFETY: the slot's buffer is not read by the host until its event
        // (recorded next) has been waited for.
        unsafe {
            dtoh_async(
                dev,
                bufs[slot].as_mut_ptr(),
                src + (i * CHUNK) as u64,
                piece_len(i),
                stream,
            )?
        };
        ring.record(dev, slot, stream)
    };
    let mut result = Ok(());
    for i in 0..slots {
        if let Err(e) = issue(i, &mut bufs, &mut ring) {
            result = Err(e);
        }
    }
    if result.is_ok() {
        for (i, piece) in out.chunks_mut(CHUNK).enumerate() {
            let slot = i % slots;
            if let Err(e) = ring.wait(dev, slot) {
                result = Err(e);
                break;
            }
            // SAFETY: the DMA into this buffer has completed (waited above).
            let staged = unsafe { bufs[slot].as_slice() };
            par_copy(piece, &staged[..piece.len()]);
            if i + slots < nchunks {
                if let Err(e) = issue(i + slots, &mut bufs, &mut ring) {
                    result = Err(e);
                    break;
                }
            }
        }
    }
    if result.is_err() {
        let _ = sync_stream(dev, stream);
    }
    ring.destroy(dev);
    drop(bufs);
    result
}

/// Asynchronous device-to-device copy of `len` bytes on `dev`'s `stream`;
/// across devices a peer copy.
pub(crate) fn device_to_device(
    dst_dev: &CudaDevice,
    dst: DevicePtr,
    src_dev: &CudaDevice,
    src: DevicePtr,
    len: usize,
    stream: StreamId,
) -> Result<()> {
    if len == 0 {
        return Ok(());
    }
    let device = dst_dev.device();
    dst_dev.bind()?;
    guarded(device, "cuMemcpy", || {
        if dst_dev.ordinal == src_dev.ordinal {
            // SAFETY: both ranges are device memory of this device owned by the
            // caller for `len` bytes; the copy is ordered on `stream`.
            cu(device, "cuMemcpyDtoDAsync_v2", unsafe {
                sys::cuMemcpyDtoDAsync_v2(dst, src, len, cu_stream(stream))
            })
        } else {
            // SAFETY: as above, on two devices; both primary contexts are
            // retained for the life of the process.
            cu(device, "cuMemcpyPeerAsync", unsafe {
                sys::cuMemcpyPeerAsync(
                    dst,
                    dst_dev.driver.cu_context(),
                    src,
                    src_dev.driver.cu_context(),
                    len,
                    cu_stream(stream),
                )
            })
        }
    })
}

/// Page-locked host memory from the CUDA driver, served as segments to a
/// caching allocator for `pin_memory()` tensors (device `Cpu`: the CPU
/// backend computes on them; CUDA copies them directly).
pub(crate) struct PinnedHostDriver {
    dev: &'static CudaDevice,
}

impl StreamEvents for PinnedHostDriver {
    fn create_event(&self) -> std::result::Result<EventHandle, DriverError> {
        self.dev.driver.create_event()
    }

    fn destroy_event(&self, event: EventHandle) -> std::result::Result<(), DriverError> {
        self.dev.driver.destroy_event(event)
    }

    fn record_event(
        &self,
        event: EventHandle,
        stream: StreamId,
    ) -> std::result::Result<(), DriverError> {
        self.dev.driver.record_event(event, stream)
    }

    fn query_event(&self, event: EventHandle) -> std::result::Result<bool, DriverError> {
        self.dev.driver.query_event(event)
    }

    fn synchronize_event(&self, event: EventHandle) -> std::result::Result<(), DriverError> {
        self.dev.driver.synchronize_event(event)
    }

    fn synchronize_stream(&self, stream: StreamId) -> std::result::Result<(), DriverError> {
        self.dev.driver.synchronize_stream(stream)
    }
}

impl Driver for PinnedHostDriver {
    fn device(&self) -> Device {
        Device::Cpu
    }

    fn name(&self) -> String {
        format!("pinned host memory (cuda:{})", self.dev.ordinal)
    }

    fn total_memory(&self) -> u64 {
        u64::MAX / 2
    }

    fn mem_get_info(&self) -> std::result::Result<MemInfo, DriverError> {
        Ok(MemInfo {
            free: u64::MAX / 2,
            total: u64::MAX / 2,
        })
    }

    fn malloc(&self, size: u64) -> std::result::Result<DevicePtr, DriverError> {
        self.dev.driver.host_alloc(size)
    }

    fn free(&self, ptr: DevicePtr, _size: u64) -> std::result::Result<(), DriverError> {
        self.dev.driver.host_free(ptr)
    }

    fn virtual_memory(&self) -> Option<&dyn VirtualMemory> {
        None
    }
}

/// The caching allocator of `pin_memory()` tensors (page-locked host memory,
/// events of GPU 0, held by that device), created on first use.
pub(crate) fn pinned_tensor_allocator() -> Result<Arc<CachingAllocator>> {
    let dev = CudaDevice::get(0)?;
    let a = dev.pinned_tensors.get_or_init(|| {
        CachingAllocator::new(
            Arc::new(PinnedHostDriver { dev }),
            strata_alloc::AllocatorConfig::default(),
        )
    });
    Ok(Arc::clone(a))
}

/// The allocator of `pin_memory()` tensors if it has been created.
pub(crate) fn pinned_tensor_allocator_if_open() -> Option<Arc<CachingAllocator>> {
    CudaDevice::get_if_open(0)?.pinned_tensors.get().cloned()
}

/// Queues an H2D copy from pinned `src` on `stream` and returns at once; the
/// caller keeps `src`'s memory from reuse until the copy has run
/// (`record_stream` on its pinned allocation).
pub(crate) fn htod_pinned_async(
    dev: &CudaDevice,
    dst: DevicePtr,
    src: &[u8],
    stream: StreamId,
) -> Result<()> {
    if src.is_empty() {
        return Ok(());
    }
    dev.bind()?;
    // SAFETY: `src` is pinned memory whose reuse the caller defers until the
    // stream has run the copy; `dst` is the caller's device range.
    unsafe { htod_async(dev, dst, src.as_ptr(), src.len(), stream) }
}

/// Queues a D2H copy into pinned `dst` on `stream` and returns at once; `dst`
/// is complete once the stream has been synchronised.
pub(crate) fn dtoh_pinned_async(
    dev: &CudaDevice,
    dst: &mut [u8],
    src: DevicePtr,
    stream: StreamId,
) -> Result<()> {
    if dst.is_empty() {
        return Ok(());
    }
    dev.bind()?;
    // SAFETY: `dst` is pinned memory of a fresh tensor whose reuse the caller
    // defers with record_stream; `src` is the caller's device range.
    unsafe { dtoh_async(dev, dst.as_mut_ptr(), src, dst.len(), stream) }
}
