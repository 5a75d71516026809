//! strata-alloc: a caching device-memory allocator with PyTorch's semantics.
//!
//! * [`CachingAllocator`]: one per device; best-fit reuse of cached blocks per
//!   stream, splitting and merging, PyTorch's size classes, `record_stream`,
//!   `empty_cache`, statistics with PyTorch's key names, and expandable segments
//!   that map physical pages where they are needed and recycle pages from free
//!   space, so reserved memory follows allocated memory.
//! * [`driver`]: where memory comes from — CUDA (feature `cuda`), host memory,
//!   or a simulated device for tests and trace replays.
//! * [`pinned`]: a caching allocator for page-locked host memory (the staging
//!   buffers of asynchronous copies), with finer size classes than PyTorch's.
//! * [`MemPool`]: private memory pools (PyTorch's `MemPool` and
//!   `use_mem_pool`): a thread's allocations served from segments of their own.
//! * [`AllocatorConfig`]: PyTorch's `key:value` configuration, from
//!   `STRATA_ALLOC_CONF` or code.
//! * Per-device functions ([`memory_stats`], [`empty_cache`], …) reach the
//!   allocator of any device from anywhere.
//!
//! ```
//! use strata_alloc::{Device, StreamId};
//! let cpu = strata_alloc::allocator(Device::Cpu).unwrap();
//! let block = cpu.allocate(1 << 20, StreamId::DEFAULT).unwrap();
//! assert!(strata_alloc::memory_allocated(Device::Cpu).unwrap() >= 1 << 20);
//! drop(block);
//! ```

#![warn(missing_docs)]

mod allocator;
mod block;
pub mod config;
mod diagnostics;
pub mod driver;
mod error;
mod expandable;
pub mod history;
mod mempool;
pub mod pinned;
mod pool;
mod reentry;
mod registry;
mod repeats;
pub mod report;
pub mod snapshot;
mod snapshot_pickle;
mod state;
pub mod stats;
pub mod trace;
pub mod watch;

pub use allocator::{
    Allocation, CachingAllocator, RawAllocation, LARGE_BUFFER, MIN_BLOCK_SIZE, MIN_LARGE_ALLOC,
    ROUND_LARGE, SMALL_BUFFER,
};
pub use allocator::{
    MemoryUsage, MemoryUsageReporter, OomObserver, OomRejection, OomRejectionObserver, TraceTracker,
};
pub use config::{AllocatorConfig, ConfigError, Reserve};
pub use diagnostics::{
    dump_snapshot, memory_report, record_memory_history, record_memory_history_opts,
    set_oom_observer,
};
pub use driver::{
    Device, DevicePtr, Driver, DriverCalls, DriverError, MemInfo, StreamEvents, StreamId,
};
pub use error::{AllocError, OutOfMemory, PoolFree, SiteUsage};
pub use history::{
    AllocationOrigin, CallSite, Frame, HistoryContext, HistoryLevel, HistoryOptions,
};
pub use mempool::{MemPool, MemPoolGuard, MemPoolOptions};
pub use registry::{
    allocator, caching_allocator_enable, empty_cache, existing_allocator, get_allocator_backend,
    max_memory_allocated, max_memory_reserved, mem_get_info, mem_pool, memory_allocated,
    memory_reserved, memory_stats, memory_summary, reset_accumulated_memory_stats,
    reset_peak_memory_stats, set_allocator, set_allocator_settings, NO_CACHING_ENV_VAR,
};
pub use stats::{format_size, MemoryStats, PinnedStats, Stat, StatArray, StatType};
pub use watch::{FrameGrowth, Growth, Watch};
