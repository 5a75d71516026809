//! CUDA streams, events and synchronisation, PyTorch style.
//!
//! Every GPU has a *current stream* per thread (the legacy default stream
//! until set): kernels and copies of tensors on that GPU are queued on it, and
//! new memory is allocated for it. Memory used on another stream must be
//! marked with [`Tensor::record_stream`](crate::Tensor::record_stream) so
//! that the caching allocator reuses it only after that stream's work has run.
//!
//! Without the `cuda` feature, or on a machine without a GPU, every function
//! here returns [`TensorError::BackendUnavailable`](crate::TensorError) (or
//! `false`/`0`), never panics.
//!
//! ```no_run
//! use strata_tensor::{cuda, Device, DType, Tensor};
//! let gpu = Device::Cuda(0);
//! let side = cuda::Stream::new(gpu)?;
//! let a = Tensor::ones(&[1024], DType::F32, gpu)?;
//! {
//!     let _g = cuda::StreamGuard::new(&side)?;   // work below goes to `side`
//!     a.add_(1.0)?;
//! }
//! a.record_stream(&side)?;
//! side.synchronize()?;
//! # Ok::<(), strata_tensor::TensorError>(())
//! ```

use crate::error::{Result, TensorError};
use strata_alloc::{Device, StreamId};

#[cfg(feature = "cuda")]
use crate::backend::cuda::context::{self, cu, cu_stream, guarded, CudaDevice};

/// Whether a GPU can run strata's kernels (the `cuda` feature, the driver and
/// at least one GPU).
pub fn is_available() -> bool {
    device_count() > 0
}

/// Number of visible GPUs (0 without the `cuda` feature or a driver).
pub fn device_count() -> usize {
    #[cfg(feature = "cuda")]
    {
        strata_alloc::driver::cuda::device_count()
    }
    #[cfg(not(feature = "cuda"))]
    {
        0
    }
}

/// Why no GPU can be used, or `None` when one can.
pub fn unavailable_reason() -> Option<String> {
    #[cfg(feature = "cuda")]
    {
        match CudaDevice::get(0) {
            Ok(_) => None,
            Err(e) => Some(e.to_string()),
        }
    }
    #[cfg(not(feature = "cuda"))]
    {
        Some("strata-tensor was built without the `cuda` feature".into())
    }
}

#[cfg(feature = "cuda")]
fn gpu(device: Device) -> Result<&'static CudaDevice> {
    match device {
        Device::Cuda(n) => CudaDevice::get(n),
        d => Err(TensorError::value(
            "cuda",
            format!("{d} is not a CUDA device"),
        )),
    }
}

#[cfg(not(feature = "cuda"))]
fn no_cuda<T>(device: Device) -> Result<T> {
    Err(TensorError::BackendUnavailable {
        device,
        reason: "strata-tensor was built without the `cuda` feature".into(),
    })
}

/// A CUDA stream of one device. Streams made by [`Stream::new`] live for
/// the rest of the process (like PyTorch's pooled streams), so a `Stream` is
/// a cheap, copyable handle.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Stream {
    device: Device,
    id: StreamId,
}

impl Stream {
    /// A new stream on `device` that does not synchronise with the legacy
    /// default stream.
    pub fn new(device: Device) -> Result<Stream> {
        #[cfg(feature = "cuda")]
        {
            let d = gpu(device)?;
            let id = d
                .driver
                .create_stream()
                .map_err(|e| context::failure(device, "cuStreamCreate", e.to_string()))?;
            Ok(Stream { device, id })
        }
        #[cfg(not(feature = "cuda"))]
        {
            no_cuda(device)
        }
    }

    /// The legacy default stream of `device`.
    pub fn default_stream(device: Device) -> Stream {
        Stream {
            device,
            id: StreamId::DEFAULT,
        }
    }

    /// The device.
    pub fn device(&self) -> Device {
        self.device
    }

    /// The allocator's stream id (the raw `CUstream`, 0 for the default stream).
    pub fn id(&self) -> StreamId {
        self.id
    }

    /// Blocks until the work queued on the stream has run.
    pub fn synchronize(&self) -> Result<()> {
        #[cfg(feature = "cuda")]
        {
            let d = gpu(self.device)?;
            crate::backend::cuda::transfer::sync_stream(d, self.id)
        }
        #[cfg(not(feature = "cuda"))]
        {
            no_cuda(self.device)
        }
    }

    /// Makes later work on this stream wait for `event`.
    pub fn wait_event(&self, event: &Event) -> Result<()> {
        #[cfg(feature = "cuda")]
        {
            let d = gpu(self.device)?;
            d.bind()?;
            guarded(self.device, "cuStreamWaitEvent", || {
                // SAFETY: the stream is the default stream or a live stream of
                // this device; the event is live (owned by `event`).
                cu(self.device, "cuStreamWaitEvent", unsafe {
                    cudarc::driver::sys::cuStreamWaitEvent(cu_stream(self.id), event.raw, 0)
                })
            })
        }
        #[cfg(not(feature = "cuda"))]
        {
            let _ = event;
            no_cuda(self.device)
        }
    }

    /// Makes later work on this stream wait for the work queued on `other` so far.
    pub fn wait_stream(&self, other: &Stream) -> Result<()> {
        let e = Event::new(other.device, false)?;
        e.record(other)?;
        self.wait_event(&e)
    }
}

/// The current stream of `device` on this thread.
pub fn current_stream(device: Device) -> Result<Stream> {
    #[cfg(feature = "cuda")]
    {
        let d = gpu(device)?;
        Ok(Stream {
            device,
            id: d.stream(),
        })
    }
    #[cfg(not(feature = "cuda"))]
    {
        no_cuda(device)
    }
}

/// Makes `stream` the current stream of its device on this thread; returns
/// the previous one.
pub fn set_current_stream(stream: &Stream) -> Result<Stream> {
    #[cfg(feature = "cuda")]
    {
        let d = gpu(stream.device)?;
        let prev = context::set_current_stream_id(d.ordinal, stream.id);
        Ok(Stream {
            device: stream.device,
            id: prev,
        })
    }
    #[cfg(not(feature = "cuda"))]
    {
        no_cuda(stream.device)
    }
}

/// Sets the current stream for a scope and restores the previous one on drop.
#[derive(Debug)]
pub struct StreamGuard {
    previous: Stream,
}

impl StreamGuard {
    /// Makes `stream` current until the guard is dropped.
    pub fn new(stream: &Stream) -> Result<StreamGuard> {
        Ok(StreamGuard {
            previous: set_current_stream(stream)?,
        })
    }
}

impl Drop for StreamGuard {
    fn drop(&mut self) {
        let _ = set_current_stream(&self.previous);
    }
}

/// Blocks until all work on `device` has run (`cuCtxSynchronize`); a no-op on the CPU.
pub fn synchronize(device: Device) -> Result<()> {
    match device {
        Device::Cpu => Ok(()),
        #[cfg(feature = "cuda")]
        Device::Cuda(_) => {
            let d = gpu(device)?;
            d.driver
                .synchronize_device()
                .map_err(|e| context::failure(device, "cuCtxSynchronize", e.to_string()))
        }
        #[cfg(not(feature = "cuda"))]
        Device::Cuda(_) => no_cuda(device),
    }
}

/// A CUDA event: a marker in a stream that other streams or the host can wait
/// for, and (with timing) measure between.
#[derive(Debug)]
pub struct Event {
    device: Device,
    #[cfg(feature = "cuda")]
    raw: cudarc::driver::sys::CUevent,
    timing: bool,
}

// SAFETY: a CUevent is a handle that the driver allows to use from any
// thread; the value owns it and destroys it once, on drop.
unsafe impl Send for Event {}
// SAFETY: every method only passes the handle to thread-safe driver calls.
unsafe impl Sync for Event {}

impl Event {
    /// A new event on `device`; `timing` enables [`Event::elapsed_ms`].
    pub fn new(device: Device, timing: bool) -> Result<Event> {
        #[cfg(feature = "cuda")]
        {
            use cudarc::driver::sys;
            let d = gpu(device)?;
            d.bind()?;
            let flags = if timing {
                sys::CUevent_flags::CU_EVENT_DEFAULT as u32
            } else {
                sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32
            };
            let raw = guarded(device, "cuEventCreate", || {
                let mut e: sys::CUevent = std::ptr::null_mut();
                // SAFETY: `e` is a valid out-pointer; the flags are valid.
                cu(device, "cuEventCreate", unsafe {
                    sys::cuEventCreate(&mut e, flags)
                })?;
                Ok(e)
            })?;
            Ok(Event {
                device,
                raw,
                timing,
            })
        }
        #[cfg(not(feature = "cuda"))]
        {
            let _ = timing;
            no_cuda(device)
        }
    }

    /// Whether the event can time.
    pub fn timing(&self) -> bool {
        self.timing
    }

    /// Records the event on `stream` (it completes when the work queued so far has run).
    pub fn record(&self, stream: &Stream) -> Result<()> {
        #[cfg(feature = "cuda")]
        {
            let d = gpu(self.device)?;
            d.bind()?;
            guarded(self.device, "cuEventRecord", || {
                // SAFETY: the event is live; the stream belongs to this device.
                cu(self.device, "cuEventRecord", unsafe {
                    cudarc::driver::sys::cuEventRecord(self.raw, cu_stream(stream.id))
                })
            })
        }
        #[cfg(not(feature = "cuda"))]
        {
            let _ = stream;
            no_cuda(self.device)
        }
    }

    /// Blocks until the event has completed.
    pub fn synchronize(&self) -> Result<()> {
        #[cfg(feature = "cuda")]
        {
            let d = gpu(self.device)?;
            d.bind()?;
            guarded(self.device, "cuEventSynchronize", || {
                // SAFETY: the event is live.
                cu(self.device, "cuEventSynchronize", unsafe {
                    cudarc::driver::sys::cuEventSynchronize(self.raw)
                })
            })
        }
        #[cfg(not(feature = "cuda"))]
        {
            no_cuda(self.device)
        }
    }

    /// Whether the event has completed (non-blocking).
    pub fn query(&self) -> Result<bool> {
        #[cfg(feature = "cuda")]
        {
            use cudarc::driver::sys;
            let d = gpu(self.device)?;
            d.bind()?;
            guarded(self.device, "cuEventQuery", || {
                // SAFETY: the event is live.
                match unsafe { sys::cuEventQuery(self.raw) } {
                    sys::CUresult::CUDA_ERROR_NOT_READY => Ok(false),
                    r => cu(self.device, "cuEventQuery", r).map(|_| true),
                }
            })
        }
        #[cfg(not(feature = "cuda"))]
        {
            no_cuda(self.device)
        }
    }

    /// Milliseconds between this event and `end` (both recorded, completed and timing).
    pub fn elapsed_ms(&self, end: &Event) -> Result<f32> {
        #[cfg(feature = "cuda")]
        {
            let d = gpu(self.device)?;
            d.bind()?;
            guarded(self.device, "cuEventElapsedTime_v2", || {
                let mut ms = 0f32;
                // SAFETY: both events are live; `ms` is a valid out-pointer.
                cu(self.device, "cuEventElapsedTime_v2", unsafe {
                    cudarc::driver::sys::cuEventElapsedTime_v2(&mut ms, self.raw, end.raw)
                })?;
                Ok(ms)
            })
        }
        #[cfg(not(feature = "cuda"))]
        {
            let _ = end;
            no_cuda(self.device)
        }
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        #[cfg(feature = "cuda")]
        {
            let raw = self.raw;
            let _ = guarded(self.device, "cuEventDestroy_v2", || {
                // SAFETY: the event is owned by this value and destroyed once;
                // destroying a pending event is allowed.
                cu(self.device, "cuEventDestroy_v2", unsafe {
                    cudarc::driver::sys::cuEventDestroy_v2(raw)
                })
            });
        }
    }
}

/// Statistics of the caching pinned host allocator that stages transfers of
/// GPU `ordinal` (PyTorch's host-allocator statistics), or `None` without a GPU.
pub fn host_memory_stats(ordinal: usize) -> Option<strata_alloc::pinned::PinnedStats> {
    #[cfg(feature = "cuda")]
    {
        let d = CudaDevice::get(ordinal).ok()?;
        Some(crate::backend::cuda::transfer::staging_allocator(d).stats())
    }
    #[cfg(not(feature = "cuda"))]
    {
        let _ = ordinal;
        None
    }
}

/// Statistics of the caching allocator behind `pin_memory()` tensors, or
/// `None` without a GPU.
pub fn pinned_memory_stats() -> Option<strata_alloc::MemoryStats> {
    #[cfg(feature = "cuda")]
    {
        crate::backend::cuda::transfer::pinned_tensor_allocator()
            .ok()
            .map(|a| a.memory_stats())
    }
    #[cfg(not(feature = "cuda"))]
    {
        None
    }
}

/// Bytes per staging chunk and chunks in flight of pageable host transfers.
pub fn staging_geometry() -> (usize, usize) {
    #[cfg(feature = "cuda")]
    {
        (
            crate::backend::cuda::transfer::CHUNK,
            crate::backend::cuda::transfer::RING,
        )
    }
    #[cfg(not(feature = "cuda"))]
    {
        (0, 0)
    }
}
