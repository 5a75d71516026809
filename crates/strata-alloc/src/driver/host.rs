//! Host memory: real, page-aligned allocations from the system allocator, with an
//! optional capacity. CPU tensors take their storage from a caching allocator over
//! this driver, so they get the same statistics as device tensors.
//!
//! Work on the host is synchronous, so every event is complete as soon as it is
//! recorded and stream synchronisation is a no-op.

use super::{
    Device, DevicePtr, Driver, DriverError, EventHandle, MemInfo, StreamEvents, StreamId,
    VirtualMemory,
};
use std::alloc::{alloc, dealloc, Layout};
use std::sync::atomic::{AtomicU64, Ordering};

/// Alignment of every host segment: one page.
pub const PAGE: usize = 4096;

/// Segments of at least this size are aligned to it and, on Linux, advised
/// to be backed by transparent huge pages (`madvise(MADV_HUGEPAGE)`, honoured
/// where the system's THP mode is `madvise` or `always`): large tensors then
/// need 512 times fewer TLB entries, which speeds up strided kernels that
/// touch many rows at once (see docs/benchmarks.md). Where THP is off the
/// advice is ignored.
pub const HUGE_PAGE: usize = 2 << 20;

/// The host driver.
///
/// ```
/// use strata_alloc::driver::{host::HostDriver, Driver};
/// let d = HostDriver::new(Some(1 << 20));
/// let p = d.malloc(8192).unwrap();
/// assert_eq!(p % 4096, 0);
/// assert!(d.malloc(1 << 21).is_err()); // over the capacity
/// d.free(p, 8192).unwrap();
/// ```
pub struct HostDriver {
    capacity: Option<u64>,
    used: AtomicU64,
    next_event: AtomicU64,
}

impl HostDriver {
    /// A host driver that refuses to hold more than `capacity` bytes (unlimited
    /// with `None`, in which case the machine's memory is the limit).
    pub fn new(capacity: Option<u64>) -> HostDriver {
        HostDriver {
            capacity,
            used: AtomicU64::new(0),
            next_event: AtomicU64::new(1),
        }
    }

    /// Bytes currently held from the system allocator.
    pub fn used_bytes(&self) -> u64 {
        self.used.load(Ordering::Relaxed)
    }

    fn physical_memory() -> u64 {
        // Pages times page size from /proc/meminfo's MemTotal; a generous default
        // where it cannot be read.
        std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("MemTotal:"))
                    .and_then(|l| l.split_whitespace().nth(1))
                    .and_then(|kb| kb.parse::<u64>().ok())
            })
            .map(|kb| kb * 1024)
            .unwrap_or(u64::MAX / 2)
    }

    fn layout(size: u64) -> Result<Layout, DriverError> {
        let size = usize::try_from(size).map_err(|_| DriverError::OutOfMemory)?;
        let align = if size >= HUGE_PAGE { HUGE_PAGE } else { PAGE };
        Layout::from_size_align(size.max(1), align).map_err(|_| DriverError::OutOfMemory)
    }
}

impl StreamEvents for HostDriver {
    fn create_event(&self) -> Result<EventHandle, DriverError> {
        Ok(EventHandle(self.next_event.fetch_add(1, Ordering::Relaxed)))
    }

    fn destroy_event(&self, _event: EventHandle) -> Result<(), DriverError> {
        Ok(())
    }

    fn record_event(&self, _event: EventHandle, _stream: StreamId) -> Result<(), DriverError> {
        Ok(())
    }

    fn query_event(&self, _event: EventHandle) -> Result<bool, DriverError> {
        Ok(true)
    }

    fn synchronize_event(&self, _event: EventHandle) -> Result<(), DriverError> {
        Ok(())
    }

    fn synchronize_stream(&self, _stream: StreamId) -> Result<(), DriverError> {
        Ok(())
    }
}

impl Driver for HostDriver {
    fn device(&self) -> Device {
        Device::Cpu
    }

    fn name(&self) -> String {
        "host memory".into()
    }

    fn total_memory(&self) -> u64 {
        self.capacity.unwrap_or_else(Self::physical_memory)
    }

    fn mem_get_info(&self) -> Result<MemInfo, DriverError> {
        let total = self.total_memory();
        Ok(MemInfo {
            free: total.saturating_sub(self.used_bytes()),
            total,
        })
    }

    fn malloc(&self, size: u64) -> Result<DevicePtr, DriverError> {
        // Reserve the bytes first so that concurrent callers cannot overshoot
        // the capacity. Checked: a size near `u64::MAX` (a segment size set
        // near 2^64 bytes) must not wrap `used + size` back under it.
        let cap = self.capacity.unwrap_or(u64::MAX);
        self.used
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |used| {
                used.checked_add(size).filter(|&total| total <= cap)
            })
            .map_err(|_| DriverError::OutOfMemory)?;
        let layout = match Self::layout(size) {
            Ok(l) => l,
            Err(e) => {
                self.used.fetch_sub(size, Ordering::Relaxed);
                return Err(e);
            }
        };
        // SAFETY: `layout` has a non-zero size (at least 1 byte) and a valid
        // power-of-two alignment, which is all `alloc` requires.
        let p = unsafe { alloc(layout) };
        if p.is_null() {
            self.used.fetch_sub(size, Ordering::Relaxed);
            return Err(DriverError::OutOfMemory);
        }
        #[cfg(target_os = "linux")]
        if layout.size() >= HUGE_PAGE {
            // SAFETY: `p .. p + size` is memory this driver was just given and
            // owns; MADV_HUGEPAGE only changes how the kernel backs it, never
            // its contents. A failure (THP not available) leaves the pages as
            // they are, so the result is ignored.
            unsafe { libc::madvise(p as *mut libc::c_void, layout.size(), libc::MADV_HUGEPAGE) };
        }
        Ok(p as usize as u64)
    }

    fn free(&self, ptr: DevicePtr, size: u64) -> Result<(), DriverError> {
        let layout = Self::layout(size)?;
        // SAFETY: the allocator only frees segments this driver returned from
        // `malloc` with the same size, hence the same layout, exactly once.
        unsafe { dealloc(ptr as usize as *mut u8, layout) };
        self.used.fetch_sub(size, Ordering::Relaxed);
        Ok(())
    }

    fn virtual_memory(&self) -> Option<&dyn VirtualMemory> {
        None
    }
}
