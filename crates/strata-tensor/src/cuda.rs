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

use crate::backend::gpu;
use crate::error::Result;
use strata_alloc::{Device, StreamId};

/// Whether a GPU can run strata's kernels (the `cuda` feature, the driver and
/// at least one GPU).
pub fn is_available() -> bool {
    device_count() > 0
}

/// Number of visible GPUs (0 without the `cuda` feature or a driver).
pub fn device_count() -> usize {
    gpu::device_count()
}

/// Why no GPU can be used, or `None` when one can.
pub fn unavailable_reason() -> Option<String> {
    gpu::unavailable_reason()
}

/// cuDNN's version as `cudnnGetVersion` gives it (91002 for 9.10.2; PyTorch's
/// `torch.backends.cudnn.version()`), or `None` where it cannot be loaded
/// ([`cudnn_unavailable_reason`] says why). GPU convolutions use cuDNN where
/// it loads and [`crate::cudnn_enabled`] holds, else columns and matrix
/// products. The library is searched for in `$STRATA_CUDNN_LIBRARY` (a file
/// or a folder), `LD_LIBRARY_PATH`, the CUDA toolkit and the
/// `nvidia/cudnn/lib` folders of Python environments (PyTorch's wheels ship
/// it there), then on the loader path. It does not need a GPU.
///
/// ```
/// if strata_tensor::cuda::cudnn_version().is_none() {
///     assert!(strata_tensor::cuda::cudnn_unavailable_reason().is_some());
/// }
/// ```
pub fn cudnn_version() -> Option<usize> {
    gpu::cudnn_version().ok().map(|(v, _)| v)
}

/// Why cuDNN cannot be loaded (every place searched), or `None` when it can.
pub fn cudnn_unavailable_reason() -> Option<String> {
    gpu::cudnn_version().err()
}

/// cuSOLVER's version as `cusolverGetVersion` gives it (major * 1000 +
/// minor * 100 + patch: 11702 for 11.7.2), or `None` where it cannot be
/// loaded ([`cusolver_unavailable_reason`] says why). The factorizations of
/// [`crate::linalg`] use cuSOLVER for GPU tensors where it loads and
/// [`crate::linalg::cusolver_enabled`] holds (the default; `false` after
/// `set_cusolver_enabled(false)` or with `STRATA_CUSOLVER=0`), else they copy the matrices to the host and factor
/// them there. The library is searched for in
/// `$STRATA_CUSOLVER_LIBRARY` (a file or a folder), `LD_LIBRARY_PATH`, the
/// CUDA toolkit and the `nvidia/cu13/lib` and `nvidia/cusolver/lib` folders
/// of Python environments (PyTorch's wheels ship it there), then on the
/// loader path. It does not need a GPU.
///
/// ```
/// if strata_tensor::cuda::cusolver_version().is_none() {
///     assert!(strata_tensor::cuda::cusolver_unavailable_reason().is_some());
/// }
/// ```
pub fn cusolver_version() -> Option<i32> {
    cusolver_loaded().ok().map(|(v, _)| v)
}

/// Why cuSOLVER cannot be loaded (every place searched), or `None` when it can.
pub fn cusolver_unavailable_reason() -> Option<String> {
    cusolver_loaded().err()
}

/// cuSOLVER's version and file, or why it cannot be loaded (the stub
/// without the `cuda` feature; `cuda_stub.rs` has no cuSOLVER entry).
fn cusolver_loaded() -> std::result::Result<(i32, String), String> {
    #[cfg(feature = "cuda")]
    {
        crate::backend::cuda::cusolver::version()
    }
    #[cfg(not(feature = "cuda"))]
    {
        Err("strata was built without the `cuda` feature".into())
    }
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
        let id = gpu::create_stream(device)?;
        Ok(Stream { device, id })
    }

    /// A new stream at `priority` (PyTorch's `torch.cuda.Stream(priority=...)`):
    /// when kernels of several streams wait for free multiprocessors, those
    /// of the stream with the lower number are scheduled first (work already
    /// running is not preempted). A value outside
    /// [`priority_range`](Self::priority_range) is clamped to it, so
    /// `i32::MIN` asks for the highest priority there is.
    pub fn with_priority(device: Device, priority: i32) -> Result<Stream> {
        let id = gpu::create_stream_with_priority(device, priority)?;
        Ok(Stream { device, id })
    }

    /// `(least, greatest)` priority of `device`'s streams, as PyTorch's
    /// `torch.cuda.Stream.priority_range()`: the greatest is the lowest
    /// number (`(0, -5)` on Hopper), and 0 is a plain stream's.
    pub fn priority_range(device: Device) -> Result<(i32, i32)> {
        gpu::stream_priority_range(device)
    }

    /// The stream's priority (0 for [`Stream::new`] and the default stream).
    pub fn priority(&self) -> Result<i32> {
        gpu::stream_priority(self.device, self.id)
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
        gpu::synchronize_stream(self.device, self.id)
    }

    /// Makes later work on this stream wait for `event`.
    pub fn wait_event(&self, event: &Event) -> Result<()> {
        gpu::stream_wait_event(self.device, self.id, &event.raw)
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
    Ok(Stream {
        device,
        id: gpu::current_stream(device)?,
    })
}

/// Makes `stream` the current stream of its device on this thread; returns
/// the previous one.
pub fn set_current_stream(stream: &Stream) -> Result<Stream> {
    Ok(Stream {
        device: stream.device,
        id: gpu::set_current_stream(stream.device, stream.id)?,
    })
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
        Device::Cuda(_) => gpu::synchronize_device(device),
    }
}

/// A CUDA event: a marker in a stream that other streams or the host can wait
/// for, and (with timing) measure between.
#[derive(Debug)]
pub struct Event {
    device: Device,
    raw: gpu::RawEvent,
    timing: bool,
}

impl Event {
    /// A new event on `device`; `timing` enables [`Event::elapsed_ms`].
    pub fn new(device: Device, timing: bool) -> Result<Event> {
        Ok(Event {
            device,
            raw: gpu::create_event(device, timing)?,
            timing,
        })
    }

    /// Whether the event can time.
    pub fn timing(&self) -> bool {
        self.timing
    }

    /// Records the event on `stream` (it completes when the work queued so far has run).
    pub fn record(&self, stream: &Stream) -> Result<()> {
        gpu::record_event(self.device, &self.raw, stream.id)
    }

    /// Blocks until the event has completed.
    pub fn synchronize(&self) -> Result<()> {
        gpu::synchronize_event(self.device, &self.raw)
    }

    /// Whether the event has completed (non-blocking).
    pub fn query(&self) -> Result<bool> {
        gpu::query_event(self.device, &self.raw)
    }

    /// Milliseconds between this event and `end` (both recorded, completed and timing).
    pub fn elapsed_ms(&self, end: &Event) -> Result<f32> {
        gpu::elapsed_ms(self.device, &self.raw, &end.raw)
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        gpu::destroy_event(self.device, &self.raw);
    }
}

/// Statistics of the caching pinned host allocator that stages transfers of
/// GPU `ordinal` (PyTorch's host-allocator statistics), or `None` without a GPU.
pub fn host_memory_stats(ordinal: usize) -> Option<strata_alloc::pinned::PinnedStats> {
    gpu::host_memory_stats(ordinal)
}

/// Statistics of the caching allocator behind `pin_memory()` tensors, or
/// `None` without a GPU.
pub fn pinned_memory_stats() -> Option<strata_alloc::MemoryStats> {
    gpu::pinned_tensor_allocator()
        .ok()
        .map(|a| a.memory_stats())
}

/// Bytes per staging chunk and chunks in flight of pageable host transfers.
pub fn staging_geometry() -> (usize, usize) {
    gpu::staging_geometry()
}
