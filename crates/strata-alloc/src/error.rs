//! Errors of the allocator.

use crate::driver::{Device, DriverError, StreamId};
use crate::history::CallSite;
use crate::stats::format_size;
use std::fmt;

/// Cached free memory of one pool of one stream at the moment of an
/// out-of-memory error: the total and the largest single block. A largest
/// block much smaller than the total is fragmentation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PoolFree {
    /// The stream.
    pub stream: StreamId,
    /// `"small"` or `"large"`.
    pub pool: &'static str,
    /// Bytes of free cached blocks.
    pub free: u64,
    /// The largest free cached block.
    pub largest: u64,
}

/// Live allocations asked for at one call site.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SiteUsage {
    /// The call site (`None`: allocated before history was turned on).
    pub site: Option<CallSite>,
    /// Live allocations.
    pub count: u64,
    /// Bytes the callers asked for.
    pub bytes: u64,
}

impl fmt::Display for SiteUsage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.site {
            Some(s) => write!(f, "{s}")?,
            None => write!(f, "(before history was on)")?,
        }
        write!(
            f,
            ": {} in {} allocation{}",
            format_size(self.bytes),
            self.count,
            if self.count == 1 { "" } else { "s" }
        )
    }
}

/// Everything a user needs to understand an out-of-memory failure.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutOfMemory {
    /// The device.
    pub device: Device,
    /// The size the caller asked for.
    pub requested: u64,
    /// What the allocator tried to obtain from the device for it (a segment, or
    /// pages of an expandable segment).
    pub device_request: u64,
    /// The device's capacity.
    pub capacity: u64,
    /// Free device memory according to the driver.
    pub free: u64,
    /// Memory held by live allocations of this allocator.
    pub allocated: u64,
    /// Memory this allocator reserved from the device but has not handed out.
    pub reserved_unallocated: u64,
    /// The limit set by `per_process_memory_fraction`, if any.
    pub allowed: Option<u64>,
    /// Cached free memory per stream and pool (only pools with free blocks).
    pub free_blocks: Vec<PoolFree>,
    /// The top live allocations by call site, largest first (empty when
    /// history is off).
    pub top_sites: Vec<SiteUsage>,
    /// The allocator settings in force (`STRATA_ALLOC_CONF` syntax, as
    /// [`AllocatorConfig`](crate::AllocatorConfig)'s `Display` writes it: the
    /// word `default` for the defaults).
    pub settings: String,
    /// Whether the request's new memory came from expandable segments:
    /// false for a request routed to a private pool (`MemPool`), which gets
    /// whole-allocation segments whatever the setting.
    pub expandable: bool,
    /// Whether the request was routed to a private pool (`MemPool`).
    pub private_pool: bool,
    /// What to try, chosen from the state above.
    pub hint: String,
}

impl OutOfMemory {
    /// The largest free cached block over every stream and pool.
    pub fn largest_free_block(&self) -> u64 {
        self.free_blocks
            .iter()
            .map(|p| p.largest)
            .max()
            .unwrap_or(0)
    }
}

impl fmt::Display for OutOfMemory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // PyTorch's first two sentences, word for word ("Tried to allocate X.
        // GPU n has a total capacity of T of which F is free."), so that a
        // pattern written for PyTorch's message matches this one; strata's X
        // is the caller's size, and the device request follows on its own.
        write!(
            f,
            "{} out of memory. Tried to allocate {}. ",
            self.device,
            format_size(self.requested)
        )?;
        match self.device {
            Device::Cuda(n) => write!(f, "GPU {n}")?,
            Device::Cpu => write!(f, "Host memory")?,
        }
        write!(
            f,
            " has a total capacity of {} of which {} is free. The allocator asked the device for {}. ",
            format_size(self.capacity),
            format_size(self.free),
            format_size(self.device_request),
        )?;
        if let Some(a) = self.allowed {
            write!(
                f,
                "{} allowed by per_process_memory_fraction; ",
                format_size(a)
            )?;
        }
        write!(
            f,
            "{} is allocated by strata and {} is reserved by strata but unallocated",
            format_size(self.allocated),
            format_size(self.reserved_unallocated),
        )?;
        if self.reserved_unallocated > 0 {
            write!(
                f,
                " (largest free block {})",
                format_size(self.largest_free_block())
            )?;
        }
        write!(f, ". {}", self.hint)?;
        let free: Vec<&PoolFree> = self.free_blocks.iter().filter(|p| p.free > 0).collect();
        if !free.is_empty() {
            write!(f, "\nFree cached memory (total / largest block):")?;
            for p in free {
                write!(
                    f,
                    "\n  stream {:#x}, {} pool: {} / {}",
                    p.stream.0,
                    p.pool,
                    format_size(p.free),
                    format_size(p.largest)
                )?;
            }
        }
        if !self.top_sites.is_empty() {
            write!(f, "\nLargest live allocations by call site:")?;
            for s in &self.top_sites {
                write!(f, "\n  {s}")?;
            }
        }
        write!(
            f,
            "\nAllocator settings: {}{}",
            if self.settings.is_empty() {
                "defaults"
            } else {
                &self.settings
            },
            if self.private_pool {
                " (the request was for a private pool, whose segments are whole allocations)"
            } else if self.expandable {
                " (expandable segments on)"
            } else {
                " (expandable segments off)"
            }
        )
    }
}

/// An allocator error.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AllocError {
    /// The device could not supply the memory, even after the cache was emptied.
    #[error("{0}")]
    OutOfMemory(Box<OutOfMemory>),
    /// A request of 1 EiB or more: no device can hold it, so it is rejected
    /// before any allocator work (and not counted in `num_ooms`), as PyTorch
    /// does; the text has PyTorch's "Tried to allocate more than 1EB
    /// memory".
    #[error("{device} out of memory. Tried to allocate more than 1EB memory: {requested} bytes, more than 1 EiB, which no device can hold; check the size computation (an overflow, a negative size cast to unsigned)")]
    TooLarge {
        /// The device.
        device: Device,
        /// The size asked for.
        requested: u64,
    },
    /// Rejected at once by `throw_on_cudamalloc_oom`: the request's device
    /// allocation would take reserved memory past the per-process memory
    /// fraction's limit (PyTorch's "preemptively rejected" error). No cached
    /// block was released and nothing retried; counted in
    /// `num_oom_rejections`, not in `num_ooms`.
    #[error("{device} out of memory. Allocation was preemptively rejected because it would exceed per_process_memory_fraction limit. Requested size: {requested} bytes ({device_request} to allocate on the device, {reserved} already reserved, a limit of {limit} bytes). Set throw_on_cudamalloc_oom:False to free cached memory and retry instead, or raise per_process_memory_fraction.")]
    OomRejected {
        /// The device.
        device: Device,
        /// The size asked for.
        requested: u64,
        /// The device allocation it needed.
        device_request: u64,
        /// Reserved bytes then.
        reserved: u64,
        /// The limit: the memory fraction of the device's capacity.
        limit: u64,
    },
    /// While caching was off ([`set_caching_enabled(false)`](crate::CachingAllocator::set_caching_enabled)),
    /// the device could not supply an allocation (PyTorch's uncached
    /// `cudaMalloc` failing: a CUDA error, not counted in `num_ooms`, no
    /// out-of-memory observer called, nothing cached to release).
    #[error("{device} out of memory: caching is off, and the device could not supply {requested} bytes for an uncached allocation ({free} bytes free); free device memory (drop allocations made while caching was off), or turn caching back on with set_caching_enabled(true)")]
    UncachedOutOfMemory {
        /// The device.
        device: Device,
        /// The size asked for.
        requested: u64,
        /// Free device memory according to the driver.
        free: u64,
    },
    /// The driver failed for a reason other than lack of memory.
    #[error("driver error on {device}: {source}")]
    Driver {
        /// The device.
        device: Device,
        /// The driver's error.
        source: DriverError,
    },
    /// A handle that is not a live allocation of this allocator was freed
    /// or given to `record_stream`.
    #[error("invalid free: {ptr:#x} is not a live allocation of the {device} allocator (double free, a handle kept after its free, or a handle from another allocator); free each allocation once, through the allocator that made it, and call record_stream only before its free")]
    InvalidFree {
        /// The device.
        device: Device,
        /// The address in the handle.
        ptr: u64,
    },
    /// An address that is not the start of a live allocation of this
    /// allocator, given where one is needed
    /// ([`CachingAllocator::annotate_memory`](crate::CachingAllocator::annotate_memory)).
    #[error("{what}: no live allocation found at pointer {ptr:#x} on {device} (freed, never allocated here, or an address inside an allocation); pass the address the allocation was handed out at, while it is live")]
    NotAllocated {
        /// The call refused.
        what: &'static str,
        /// The allocator's device.
        device: Device,
        /// The address given.
        ptr: u64,
    },
    /// A device string that is not `cpu`, `cuda` or `cuda:N`.
    #[error("invalid device '{given}': expected cpu, cuda or cuda:N")]
    InvalidDevice {
        /// What was given.
        given: String,
    },
    /// The device's driver is not available here (no CUDA library, no GPU, …).
    #[error("device {device} is not available: {reason}")]
    Unavailable {
        /// The device asked for.
        device: Device,
        /// Why it cannot be used.
        reason: String,
    },
    /// The configuration string was rejected.
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    /// A diagnostic that needs the allocation history was asked for while
    /// history recording is off.
    #[error("{what} on {device} needs the allocation history: call record_history(Some(n)) (or strata::record_memory_history) before the allocations to watch")]
    HistoryOff {
        /// The device.
        device: Device,
        /// What was asked for.
        what: &'static str,
    },
    /// A [`Watch`](crate::watch::Watch) was compared with another allocator
    /// than the one it was taken on.
    #[error("{what}: the watch was taken on another allocator (of {watched}) than the one given (of {given}); pass the allocator the watch was taken on, or take a new watch with allocator.watch()")]
    ForeignWatch {
        /// What was asked for.
        what: &'static str,
        /// The device of the allocator the watch was taken on.
        watched: Device,
        /// The device of the allocator given.
        given: Device,
    },
    /// A snapshot in PyTorch's format was asked of a device whose ordinal
    /// that format cannot hold: PyTorch's device index is an 8-bit integer
    /// (at most 127), and its readers find a device's trace at that index of
    /// `device_traces` (one list per ordinal up to it).
    #[error("{what}: {device} has an ordinal above 127, the largest device index of PyTorch's snapshot format (torch.device's index is an int8, and memory_viz finds a device's trace at that index of device_traces); number the device cuda:0 to cuda:127 in its driver, or use snapshot() or memory_report() instead")]
    DeviceOrdinalTooLarge {
        /// What was asked for.
        what: &'static str,
        /// The device.
        device: Device,
    },
    /// A driver reports a virtual-memory granularity that cannot be the page
    /// of expandable segments: not a power of two, below 4 KiB, or above half
    /// the device's capacity (each of the two pools needs a page of its own).
    #[error("the driver of {device} reports a mapping granularity of {granularity} bytes, which cannot be the page of expandable segments: it must be a power of two of at least 4096 bytes and at most half the device's capacity ({capacity} bytes), so that the small and the large pool can each map a page; fix the driver's VirtualMemory::granularity, or return None from Driver::virtual_memory to use whole-allocation segments")]
    UnusableGranularity {
        /// The device.
        device: Device,
        /// The granularity the driver reported.
        granularity: u64,
        /// The device's capacity.
        capacity: u64,
    },
    /// A private pool was made active ([`MemPool::activate`](crate::MemPool::activate))
    /// while a guard of it, on this thread or another, is still alive.
    /// PyTorch's `use_mem_pool` raises then too (`beginAllocateToPool:
    /// already recording to mempool_id`): a pool is recorded to by one
    /// context at a time. Nothing changed (PyTorch has already counted a use
    /// of the pool when it raises, one that is never given back; strata
    /// counts none).
    #[error("beginAllocateToPool: already recording to mempool_id ({}, {}) on {device}: the pool is already active (a guard of MemPool::activate on this or another thread is alive), and a pool is used by one context at a time, as in PyTorch; drop that guard first, or use another MemPool", .pool.0, .pool.1)]
    PoolAlreadyActive {
        /// The device.
        device: Device,
        /// The pool's id.
        pool: (u64, u64),
    },
    /// Writing a diagnostic file failed.
    #[error("could not write {path}: {reason}; pass the path of a file in an existing, writable directory")]
    Write {
        /// The file.
        path: String,
        /// The operating system's or encoder's message.
        reason: String,
    },
}

impl AllocError {
    /// Whether this is an out-of-memory error: the device could not supply the
    /// memory ([`AllocError::OutOfMemory`]), no device could
    /// ([`AllocError::TooLarge`]), `throw_on_cudamalloc_oom` rejected it
    /// ([`AllocError::OomRejected`]), or the device could not supply an
    /// uncached allocation ([`AllocError::UncachedOutOfMemory`]).
    pub fn is_out_of_memory(&self) -> bool {
        matches!(
            self,
            AllocError::OutOfMemory(_)
                | AllocError::TooLarge { .. }
                | AllocError::OomRejected { .. }
                | AllocError::UncachedOutOfMemory { .. }
        )
    }

    /// The out-of-memory details, when this is an out-of-memory error.
    pub fn out_of_memory(&self) -> Option<&OutOfMemory> {
        match self {
            AllocError::OutOfMemory(o) => Some(o),
            _ => None,
        }
    }
}
