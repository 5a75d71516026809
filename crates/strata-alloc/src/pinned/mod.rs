//! A caching allocator for page-locked ("pinned") host memory, the staging
//! buffers of asynchronous host↔device copies (PyTorch's `CachingHostAllocator`,
//! `torch.empty(..., pin_memory=True)`).
//!
//! Pinning memory is slow (`cuMemHostAlloc` pins every page, milliseconds for
//! large buffers) and so is unpinning, so freed buffers are cached and handed out
//! again. A buffer used by an asynchronous copy must not be reused before the copy
//! has run: [`PinnedBuffer::record_stream`] (PyTorch's `record_event`) notes the
//! stream; when the buffer is dropped, one event is recorded on each such stream
//! and the block returns to the cache only once all of them have completed.
//!
//! # Size classes: why not powers of two
//!
//! PyTorch rounds every pinned request up to the next power of two and reuses a
//! cached block only of exactly that size, so a 129.5 MiB buffer pins 256 MiB
//! (pytorch#150517, #95823): up to half of the pinned memory, which is scarce and
//! unswappable, is waste. strata uses **eight size classes per power of two**,
//! never finer than a 4 KiB page ([`size_class()`]):
//!
//! * up to 4 KiB: one page (the operating system pins whole pages anyway);
//! * above: for a size in (2^k, 2^(k+1)], a multiple of max(2^k / 8, 4 KiB).
//!   Up to 32 KiB that is plain page rounding; above, the waste is below 12.5%
//!   (129.5 MiB → 144 MiB instead of 256 MiB).
//!
//! Eight classes per doubling keep the number of distinct block sizes small, which
//! is what makes a cache hit likely for the recurring sizes of a training loop
//! (the same batch shapes again and again); page rounding everywhere would make
//! every slightly different size a miss. To keep hits likely across neighbouring
//! classes, a request may also take a cached block up to 1/8 larger than its class
//! (at most the next one or two classes), the smallest such block first; blocks
//! are never split, because a pinned allocation is one `cuMemHostAlloc` and must
//! be freed whole.
//!
//! # Modules
//!
//! * [`size_class`](mod@size_class): the size classes above;
//! * `cache`: [`PinnedAllocator`], the cache and its event bookkeeping;
//! * `buffer`: [`PinnedBuffer`], the handle a caller holds;
//! * `sim`: [`SimPinnedBackend`], real host memory with the simulated
//!   device's events ([`SimDriver`](crate::driver::sim::SimDriver)), for tests;
//! * `cuda` (feature `cuda`): [`CudaPinnedBackend`] and the per-device
//!   allocators of [`cuda_allocator`].
//! * `follow`: allocators that take the pinned limits of each
//!   [`set_allocator_settings`](crate::set_allocator_settings)
//!   ([`PinnedAllocator::follow_allocator_settings`]).
//!
//! The statistics ([`PinnedStats`]) live with the others in [`crate::stats`].
//!
//! # Concurrency
//!
//! One `parking_lot` mutex guards the state. It is never held across the slow
//! backend calls (`alloc`, `free`); event calls (`cuEventRecord`, `cuEventQuery`,
//! microseconds) are made under it.
//!
//! ```
//! use strata_alloc::pinned::{PinnedAllocator, SimPinnedBackend};
//! use strata_alloc::StreamId;
//!
//! let pinned = PinnedAllocator::new(SimPinnedBackend::new(None));
//! let buf = pinned.allocate(1000).unwrap();
//! assert_eq!(buf.capacity(), 4096); // one page
//! buf.record_stream(StreamId(7)).unwrap(); // an async copy on stream 7 reads it
//! let p = buf.ptr();
//! drop(buf);
//! // The copy may still be running: the block is not reused yet.
//! let other = pinned.allocate(1000).unwrap();
//! assert_ne!(other.ptr(), p);
//! pinned.backend().complete_stream(StreamId(7));
//! drop(other);
//! assert_eq!(pinned.allocate(1000).unwrap().ptr(), p); // now it is
//! ```

mod buffer;
mod cache;
#[cfg(feature = "cuda")]
mod cuda;
pub(crate) mod follow;
mod sim;
pub mod size_class;
#[cfg(test)]
mod tests;

pub use crate::stats::{DurationStat, PinnedStats};
pub use buffer::PinnedBuffer;
pub use cache::{PinnedAllocator, PinnedLimits, PinnedSegment, PinnedTraceEntry};
#[cfg(feature = "cuda")]
pub use cuda::{cuda_allocator, CudaPinnedAllocator, CudaPinnedBackend};
pub use sim::SimPinnedBackend;
pub use size_class::{size_class, DIVISIONS, PAGE, REUSE_SLACK};

use crate::driver::{DriverError, StreamEvents};
use crate::stats::format_size;
use std::sync::Arc;

/// Where pinned memory comes from, and the events and streams that guard its
/// reuse: CUDA ([`CudaPinnedBackend`], feature `cuda`) or a simulation for
/// tests ([`SimPinnedBackend`]).
///
/// `alloc` must return `size` bytes of host memory, at least page-aligned,
/// readable and writable by the process and owned by the caller until `free`.
pub trait PinnedBackend: Send + Sync {
    /// Allocates `size` bytes of pinned host memory. Exhaustion is
    /// [`DriverError::OutOfMemory`].
    fn alloc(&self, size: u64) -> Result<u64, DriverError>;
    /// Frees a block from [`alloc`](Self::alloc) (same size).
    fn free(&self, ptr: u64, size: u64) -> Result<(), DriverError>;
    /// The device's events and streams: the allocator records an event on each
    /// stream that used a block when the block is freed (the events are pooled).
    fn events(&self) -> &dyn StreamEvents;
}

impl<T: PinnedBackend + ?Sized> PinnedBackend for Arc<T> {
    fn alloc(&self, size: u64) -> Result<u64, DriverError> {
        (**self).alloc(size)
    }

    fn free(&self, ptr: u64, size: u64) -> Result<(), DriverError> {
        (**self).free(ptr, size)
    }

    fn events(&self) -> &dyn StreamEvents {
        (**self).events()
    }
}

/// An error of the pinned allocator.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PinnedError {
    /// The backend could not pin more memory, even after the cache was emptied.
    #[error(
        "out of pinned host memory: tried to allocate {} (a block of {}); {} of pinned memory is held by strata, {} of it in use",
        format_size(*requested), format_size(*block_size), format_size(*held), format_size(*active)
    )]
    OutOfMemory {
        /// The size asked for.
        requested: u64,
        /// The block size it was rounded to.
        block_size: u64,
        /// Pinned bytes held from the backend after the cache was emptied.
        held: u64,
        /// Pinned bytes in use or waiting for events.
        active: u64,
    },
    /// The backend failed for another reason.
    #[error("pinned host allocator: {0}")]
    Backend(DriverError),
    /// A pointer that is not inside a live block of this allocator.
    #[error("{ptr:#x} is not inside a live pinned block of this allocator")]
    InvalidPointer {
        /// The pointer given.
        ptr: u64,
    },
}
