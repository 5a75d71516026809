//! The caching allocator of one device.
//!
//! The hot path is [`CachingAllocator::allocate_raw`]: take the lock, reclaim
//! blocks whose cross-stream events completed (only when some are pending),
//! round the size, look up the best-fitting free block of the stream's pool,
//! split it, update the statistics. Everything that talks to the driver lives in
//! [`CachingAllocator::allocate_slow`] and below, in the order PyTorch uses:
//! garbage collection, a device allocation, releasing oversize cached blocks,
//! releasing every cached block and retrying, and finally a typed out-of-memory
//! error.

use crate::block::{Block, PoolKind, NONE, SMALL_SIZE};
use crate::config::{AllocatorConfig, ConfigError};
use crate::driver::counting::CountingDriver;
use crate::driver::{
    Device, DevicePtr, Driver, DriverCalls, DriverError, EventHandle, MemInfo, StreamEvents,
    StreamId,
};
use crate::error::{AllocError, OutOfMemory};
use crate::expandable::ExpandableSpace;
use crate::history::{
    Action, AllocationOrigin, HistoryContext, HistoryLevel, HistoryOptions, Recording, TraceEntry,
};
use crate::pool::Entry;
use crate::snapshot::SegmentSnapshot;
use crate::state::{stream_index, Settings, State, StreamState};
use crate::stats::{MemoryStats, StatType};
use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Every request is rounded up to a multiple of this.
pub const MIN_BLOCK_SIZE: u64 = 512;
/// Segment size for small-pool requests.
pub const SMALL_BUFFER: u64 = 2 << 20;
/// Large requests below this get a [`LARGE_BUFFER`] segment.
pub const MIN_LARGE_ALLOC: u64 = 10 << 20;
/// Segment size for requests between 1 and 10 MiB.
pub const LARGE_BUFFER: u64 = 20 << 20;
/// Larger segments are rounded up to a multiple of this.
pub const ROUND_LARGE: u64 = 2 << 20;
/// Requests of this size or more fail at once.
const MAX_REQUEST: u64 = 1 << 60;
/// The block index of an allocation made while caching was off (it has no
/// block: `State::uncached` holds it).
const UNCACHED: u32 = NONE - 1;

/// A live allocation as a plain value: the address, the caller's size and the
/// identity of the block behind it (and of the allocator that handed it out,
/// so that another allocator refuses it even where its addresses coincide).
/// Give it back with [`CachingAllocator::free_raw`]; [`Allocation`] does that
/// on drop.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RawAllocation {
    ptr: DevicePtr,
    size: u64,
    block: u32,
    generation: u32,
    owner: u64,
}

/// The identity of the next allocator created (unique in the process).
static NEXT_ALLOCATOR_ID: AtomicU64 = AtomicU64::new(1);

impl RawAllocation {
    /// The device address (0 for a zero-byte allocation).
    #[inline]
    pub fn ptr(&self) -> DevicePtr {
        self.ptr
    }

    /// The size the caller asked for.
    #[inline]
    pub fn size(&self) -> u64 {
        self.size
    }
}

/// An owned allocation that returns its block to the cache when dropped.
pub struct Allocation {
    allocator: Arc<CachingAllocator>,
    raw: RawAllocation,
}

impl Allocation {
    /// The device address (for the host allocator, a host address).
    #[inline]
    pub fn ptr(&self) -> DevicePtr {
        self.raw.ptr
    }

    /// The address as a host pointer; meaningful for the host allocator only.
    #[inline]
    pub fn as_mut_ptr(&self) -> *mut u8 {
        self.raw.ptr as usize as *mut u8
    }

    /// The size asked for.
    #[inline]
    pub fn size(&self) -> u64 {
        self.raw.size
    }

    /// The allocator this allocation came from.
    pub fn allocator(&self) -> &Arc<CachingAllocator> {
        &self.allocator
    }

    /// The plain handle.
    pub fn raw(&self) -> RawAllocation {
        self.raw
    }

    /// Marks the memory as used by `stream`: after the allocation is dropped,
    /// it is reused only once the work queued on `stream` by then has finished.
    pub fn record_stream(&self, stream: StreamId) -> Result<(), AllocError> {
        self.allocator.record_stream(&self.raw, stream)
    }
}

impl Drop for Allocation {
    fn drop(&mut self) {
        // The handle is valid by construction; a driver failure while recording
        // events has already been made safe inside `free_raw` (the block is
        // withheld from reuse), and a destructor has no caller to tell.
        let _ = self.allocator.free_raw(self.raw);
    }
}

impl std::fmt::Debug for Allocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Allocation")
            .field("device", &self.allocator.device())
            .field("ptr", &format_args!("{:#x}", self.raw.ptr))
            .field("size", &self.raw.size)
            .finish()
    }
}

/// The caching allocator of one device. Thread-safe; share it through `Arc`.
///
/// ```
/// use std::sync::Arc;
/// use strata_alloc::{AllocatorConfig, CachingAllocator, StreamId};
/// use strata_alloc::driver::sim::SimDriver;
///
/// let alloc = CachingAllocator::new(Arc::new(SimDriver::h100()), AllocatorConfig::default());
/// let a = alloc.allocate(1000, StreamId::DEFAULT).unwrap();
/// assert_eq!(alloc.memory_allocated(), 1024); // rounded to 512 bytes
/// drop(a);
/// assert_eq!(alloc.memory_allocated(), 0);
/// assert!(alloc.memory_reserved() > 0); // cached for the next request
/// alloc.empty_cache().unwrap();
/// assert_eq!(alloc.memory_reserved(), 0);
/// ```
pub struct CachingAllocator {
    /// This allocator's identity, carried by its [`RawAllocation`]s.
    id: u64,
    driver: Arc<dyn Driver>,
    /// The same driver, counting the calls the allocator makes through it.
    counted: CountingDriver<dyn Driver>,
    device: Device,
    /// Whether the driver has virtual memory (expandable segments possible).
    has_vm: bool,
    page: u64,
    capacity: u64,
    state: Mutex<State>,
    /// Closures called with a snapshot when an allocation fails for lack of
    /// memory (outside the state's lock).
    oom_observers: Mutex<Vec<OomObserver>>,
    /// Closures called with every trace event (outside the state's lock).
    trace_trackers: Mutex<Vec<TraceTracker>>,
}

/// A closure called with every event the allocator traces (PyTorch's
/// `AllocatorTraceTracker`): see [`CachingAllocator::attach_trace_tracker`].
pub type TraceTracker = Arc<dyn Fn(&TraceEntry) + Send + Sync>;

/// The state's lock, held by an allocator call that may trace events:
/// dropping it releases the lock, then passes the events queued for the
/// trace trackers to them (outside the lock, so that a tracker may call the
/// allocator).
struct StateGuard<'a> {
    guard: Option<parking_lot::MutexGuard<'a, State>>,
    allocator: &'a CachingAllocator,
}

impl std::ops::Deref for StateGuard<'_> {
    type Target = State;
    #[inline]
    fn deref(&self) -> &State {
        self.guard.as_ref().expect("held until dropped")
    }
}

impl std::ops::DerefMut for StateGuard<'_> {
    #[inline]
    fn deref_mut(&mut self) -> &mut State {
        self.guard.as_mut().expect("held until dropped")
    }
}

impl Drop for StateGuard<'_> {
    #[inline]
    fn drop(&mut self) {
        let Some(mut g) = self.guard.take() else {
            return;
        };
        if g.tracked.is_empty() {
            return;
        }
        let events = std::mem::take(&mut g.tracked);
        drop(g);
        self.allocator.dispatch_tracked(events);
    }
}

thread_local! {
    /// The allocators (by id) whose trace trackers this thread is running
    /// now (see `CachingAllocator::dispatch_tracked`).
    static TRACKING: std::cell::RefCell<Vec<u64>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// A closure called when an allocation fails for lack of memory, with the
/// error and the allocator's segments at that moment.
pub type OomObserver = Arc<dyn Fn(&OutOfMemory, &[SegmentSnapshot]) + Send + Sync>;

thread_local! {
    /// The allocators (by id) whose out-of-memory observers this thread is
    /// running now (see `CachingAllocator::notify_oom`).
    static NOTIFYING: std::cell::RefCell<Vec<u64>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Marks this thread as running the observers of one allocator until
/// dropped (also when an observer panics).
struct NotifyingGuard(u64);

impl NotifyingGuard {
    /// `None` when this thread is already running that allocator's observers.
    fn enter(id: u64) -> Option<NotifyingGuard> {
        NOTIFYING.with(|n| {
            let mut n = n.borrow_mut();
            if n.contains(&id) {
                None
            } else {
                n.push(id);
                Some(NotifyingGuard(id))
            }
        })
    }
}

impl Drop for NotifyingGuard {
    fn drop(&mut self) {
        NOTIFYING.with(|n| n.borrow_mut().retain(|&i| i != self.0));
    }
}

/// The smallest mapping granularity expandable segments take as their page.
const MIN_PAGE: u64 = 4096;

/// Whether a driver's mapping granularity `g` can be the page of expandable
/// segments on a device of `capacity` bytes: a power of two (pages are
/// aligned by masking), at least [`MIN_PAGE`] (a smaller one would mean
/// millions of mappings for an ordinary tensor) and at most half the capacity:
/// the small and the large pool each map pages of their own, so a device that
/// holds one page could serve only one of them (its first small request would
/// take the whole device, and every large request after it would run out of
/// memory on a device holding a single small block).
fn usable_page(g: u64, capacity: u64) -> bool {
    g.is_power_of_two() && g >= MIN_PAGE && g <= capacity / 2
}

/// The page of expandable segments over `driver`: its mapping granularity
/// (`Ok(None)` without virtual memory), or `Err` with a granularity that
/// cannot be a page ([`usable_page`]).
fn vm_page(driver: &dyn Driver) -> Result<Option<u64>, u64> {
    match driver.virtual_memory().map(|v| v.granularity()) {
        Some(g) if !usable_page(g, driver.total_memory()) => Err(g),
        page => Ok(page),
    }
}

impl CachingAllocator {
    /// An allocator over `driver`. Expandable segments are used when the
    /// configuration asks for them (or leaves them to the default) and the driver
    /// supports virtual memory with a usable granularity (a power of two of
    /// at least 4 KiB and at most half the device's capacity; with any other, the
    /// allocator uses whole-allocation segments, as over a driver without
    /// virtual memory, and [`try_new`](Self::try_new) refuses the driver).
    /// The configuration is taken as it is: one built field by field rather
    /// than parsed should go through [`try_new`](Self::try_new), which checks
    /// it.
    pub fn new(driver: Arc<dyn Driver>, config: AllocatorConfig) -> Arc<CachingAllocator> {
        let capacity = driver.total_memory();
        let vm_page = vm_page(&*driver).unwrap_or(None);
        let settings = Settings::new(config, vm_page.is_some(), capacity);
        let id = NEXT_ALLOCATOR_ID.fetch_add(1, Ordering::Relaxed);
        let mut state = State::new(settings);
        state.history.owner = id;
        Arc::new(CachingAllocator {
            id,
            device: driver.device(),
            counted: CountingDriver::new(Arc::clone(&driver)),
            driver,
            has_vm: vm_page.is_some(),
            page: vm_page.unwrap_or(SMALL_BUFFER),
            capacity,
            state: Mutex::new(state),
            oom_observers: Mutex::new(Vec::new()),
            trace_trackers: Mutex::new(Vec::new()),
        })
    }

    /// [`new`](Self::new) with a configuration checked first
    /// ([`AllocatorConfig::validate`]): for configurations built field by
    /// field rather than parsed, whose values no parser has checked.
    pub fn try_new(
        driver: Arc<dyn Driver>,
        config: AllocatorConfig,
    ) -> Result<Arc<CachingAllocator>, AllocError> {
        config.validate()?;
        if let Err(granularity) = vm_page(&*driver) {
            return Err(AllocError::UnusableGranularity {
                device: driver.device(),
                granularity,
                capacity: driver.total_memory(),
            });
        }
        Ok(CachingAllocator::new(driver, config))
    }

    /// This allocator's identity (distinct for every allocator made).
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// The device served.
    pub fn device(&self) -> Device {
        self.device
    }

    /// The driver underneath.
    pub fn driver(&self) -> &Arc<dyn Driver> {
        &self.driver
    }

    /// The configuration in force (a copy: it can change at run time through
    /// [`set_allocator_settings`](Self::set_allocator_settings) and
    /// [`set_memory_fraction`](Self::set_memory_fraction)).
    pub fn config(&self) -> AllocatorConfig {
        self.state.lock().settings.config.clone()
    }

    /// Whether new memory comes from expandable segments.
    pub fn expandable_segments(&self) -> bool {
        self.state.lock().settings.expandable
    }

    /// Reconfigures this live allocator with `settings`, with PyTorch's
    /// semantics for `torch.cuda.memory._set_allocator_settings` (see
    /// [`AllocatorConfig::reparse`]): `max_split_size_mb`,
    /// `roundup_power2_divisions` and `garbage_collection_threshold` go back to
    /// their defaults unless the string names them, `max_non_split_rounding_mb`
    /// to the large segment size; every other key, and the memory fraction,
    /// keeps its value unless named. A bad string is a typed
    /// error and changes nothing.
    ///
    /// Existing memory stays where it is: the new settings govern the requests
    /// and releases that follow (turning expandable segments off, for example,
    /// leaves the expandable segments already mapped in use until they are
    /// released, while new memory comes from ordinary segments).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use strata_alloc::{AllocatorConfig, CachingAllocator};
    /// use strata_alloc::driver::sim::SimDriver;
    ///
    /// let conf = AllocatorConfig::parse("max_split_size_mb:64,expandable_segments:False").unwrap();
    /// let a = CachingAllocator::new(Arc::new(SimDriver::h100()), conf);
    /// a.set_memory_fraction(0.5).unwrap();
    /// a.set_allocator_settings("roundup_power2_divisions:4").unwrap();
    /// assert_eq!(a.config().max_split_size, None); // not named: back to the default
    /// assert!(!a.expandable_segments()); // not named: kept
    /// assert_eq!(a.memory_fraction(), 0.5); // kept
    /// assert!(a.set_allocator_settings("no_such_key:1").is_err());
    /// assert_eq!(a.config().roundup_power2_divisions, [4; 16]); // unchanged by the error
    /// ```
    pub fn set_allocator_settings(&self, settings: &str) -> Result<(), AllocError> {
        let mut st = self.state.lock();
        let config = st.settings.config.reparse(settings)?;
        self.install_config(&mut st, config);
        Ok(())
    }

    /// Installs `config` as the configuration in force, all of it (unlike
    /// [`set_allocator_settings`](Self::set_allocator_settings), which keeps
    /// what its string does not reset). A configuration whose fields are out
    /// of the ranges its string form accepts ([`AllocatorConfig::validate`]:
    /// a NaN memory fraction, a split limit below 20 MiB, divisions that are
    /// not powers of two, …) is a typed error and changes nothing.
    pub fn apply_config(&self, config: AllocatorConfig) -> Result<(), AllocError> {
        config.validate()?;
        let mut st = self.state.lock();
        self.install_config(&mut st, config);
        Ok(())
    }

    /// Makes `config` the configuration in force under the held lock.
    fn install_config(&self, st: &mut State, config: AllocatorConfig) {
        st.stats.max_split_size = config.max_split_size_stat();
        st.settings = Settings::new(config, self.has_vm, self.capacity);
    }

    /// Limits the memory this process may reserve on the device to `fraction`
    /// of its capacity (PyTorch's `set_per_process_memory_fraction`); 1 removes
    /// the limit. Memory already reserved beyond a new, lower limit stays
    /// reserved; requests that would need more fail with an out-of-memory error
    /// naming the fraction. A fraction outside [0, 1] (or NaN) is a typed error
    /// and changes nothing.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use strata_alloc::{AllocatorConfig, CachingAllocator, StreamId};
    /// use strata_alloc::driver::sim::SimDriver;
    ///
    /// let a = CachingAllocator::new(Arc::new(SimDriver::new(1 << 30, 2 << 20)), AllocatorConfig::default());
    /// assert_eq!(a.memory_fraction(), 1.0);
    /// a.set_memory_fraction(0.25).unwrap();
    /// assert_eq!(a.memory_fraction(), 0.25);
    /// assert!(a.allocate(512 << 20, StreamId::DEFAULT).is_err()); // over 256 MiB
    /// assert!(a.set_memory_fraction(1.5).is_err());
    /// assert_eq!(a.memory_fraction(), 0.25);
    /// ```
    pub fn set_memory_fraction(&self, fraction: f64) -> Result<(), AllocError> {
        if !(0.0..=1.0).contains(&fraction) {
            return Err(ConfigError::BadValue {
                key: "per_process_memory_fraction",
                value: fraction.to_string(),
                // PyTorch's words for this refusal, which its
                // `test_set_per_process_memory_fraction` looks for.
                accepted: "a number between 0 and 1, e.g. 0.5 (Invalid fraction value: the allowed range is 0~1)",
            }
            .into());
        }
        let mut st = self.state.lock();
        let mut config = st.settings.config.clone();
        config.per_process_memory_fraction = Some(fraction);
        st.settings = Settings::new(config, self.has_vm, self.capacity);
        Ok(())
    }

    /// The fraction of the device's memory this process may reserve (1 when
    /// unlimited; PyTorch's `get_per_process_memory_fraction`).
    pub fn memory_fraction(&self) -> f64 {
        self.state
            .lock()
            .settings
            .config
            .per_process_memory_fraction
            .unwrap_or(1.0)
    }

    /// Free and total memory of the device, as the driver reports them now
    /// (`cudaMemGetInfo`; memory used by other processes counts as used). Not
    /// counted in [`driver_calls`](Self::driver_calls).
    pub fn mem_get_info(&self) -> Result<MemInfo, AllocError> {
        self.driver.mem_get_info().map_err(|e| self.driver_error(e))
    }

    /// Allocates `size` bytes for use on `stream`, as an owned [`Allocation`].
    ///
    /// While history is on, the caller's location is recorded as the
    /// allocation's call site (`#[track_caller]`: callers that are themselves
    /// `#[track_caller]` pass their own caller's location on).
    #[track_caller]
    pub fn allocate(
        self: &Arc<Self>,
        size: u64,
        stream: StreamId,
    ) -> Result<Allocation, AllocError> {
        let raw = self.allocate_raw(size, stream)?;
        Ok(Allocation {
            allocator: Arc::clone(self),
            raw,
        })
    }

    /// Allocates `size` bytes for use on `stream`; give the handle back with
    /// [`free_raw`](Self::free_raw). The caller's location is the call site
    /// recorded while history is on (see [`allocate`](Self::allocate)).
    #[track_caller]
    pub fn allocate_raw(&self, size: u64, stream: StreamId) -> Result<RawAllocation, AllocError> {
        let site = std::panic::Location::caller();
        if size == 0 {
            return Ok(RawAllocation {
                ptr: 0,
                size: 0,
                block: NONE,
                generation: 0,
                owner: self.id,
            });
        }
        if size >= MAX_REQUEST {
            // No device can hold it: rejected before taking the lock, without
            // counting an out-of-memory error (as PyTorch does).
            return Err(AllocError::TooLarge {
                device: self.device,
                requested: size,
            });
        }
        // The plain guard on the hot path: the trackers' events are passed
        // on by hand below (`unlock_and_dispatch`), only while some exist.
        let mut guard = self.state.lock();
        let st = &mut *guard;
        if st.caching_disabled {
            return self.allocate_uncached(st, size);
        }
        let s = if st.pool_routes.is_empty() {
            stream_index(st, stream)
        } else {
            crate::mempool::routed_stream_index(st, stream)
        };
        if st.pending_events > 0 {
            self.process_events(st);
        }
        let rounded = if st.settings.plain_rounding {
            round_plain(size)
        } else {
            round_size(&st.settings.config, size)
        };
        st.recent_requests = crate::repeats::mix_request(st.recent_requests, rounded, s);
        let pool = PoolKind::of(rounded);
        let id = match self.get_free_block(st, s, pool, rounded) {
            Some(id) => id,
            None => {
                // The segment events of the slow path come from this call.
                st.history.cause = Some(site);
                let r = self.allocate_slow(st, s, pool, rounded, size);
                st.history.cause = None;
                match r {
                    Ok(id) => id,
                    Err(e) => {
                        self.unlock_and_dispatch(guard);
                        return Err(self.notify_oom(e));
                    }
                }
            }
        };
        let raw = self.alloc_found_block(st, id, rounded, size, site);
        if st.observed {
            self.unlock_and_dispatch(guard);
        }
        Ok(raw)
    }

    /// Releases the state's lock, then passes the events queued for the
    /// trace trackers to them (what [`StateGuard`] does on drop, for the
    /// paths that hold the plain guard).
    #[inline]
    fn unlock_and_dispatch(&self, mut guard: parking_lot::MutexGuard<'_, State>) {
        if guard.tracked.is_empty() {
            return;
        }
        let events = std::mem::take(&mut guard.tracked);
        drop(guard);
        self.dispatch_tracked(events);
    }

    /// Returns an allocation to the cache. Memory used by other streams
    /// (`record_stream`) is reused only after their events complete.
    pub fn free_raw(&self, raw: RawAllocation) -> Result<(), AllocError> {
        if raw.block == NONE {
            return Ok(());
        }
        if raw.block == UNCACHED {
            return self.free_uncached(raw);
        }
        let mut guard = self.state.lock();
        // Matched, not passed on: the common `Ok` is written afresh into the
        // return slot rather than copied out of a temporary (whose wide loads
        // waited for the narrower store of its tag).
        match self.free_locked(&mut guard, raw) {
            Ok(()) => {
                if guard.observed {
                    self.unlock_and_dispatch(guard);
                }
                Ok(())
            }
            Err(e) => {
                self.unlock_and_dispatch(guard);
                Err(e)
            }
        }
    }

    /// [`free_raw`](Self::free_raw) of a cached allocation, under the lock.
    #[inline]
    fn free_locked(&self, st: &mut State, raw: RawAllocation) -> Result<(), AllocError> {
        self.check_live(st, &raw)?;
        let id = raw.block;
        let b = &mut st.blocks[id];
        b.allocated = false;
        let (size, pool, s) = (b.size, b.pool.stat(), b.stream);
        // Only while some allocation is counted as oversize can this one be.
        let oversize = st.stats.oversize_allocations.current > 0 && std::mem::take(&mut b.oversize);
        let used_elsewhere = !b.stream_uses.is_empty();
        // The loading phase ends with the first free of a block of a page or
        // more (the margin's floor, expandable/mod.rs): a smaller free is a
        // temporary that gives no page back.
        st.freed_a_page |= size >= self.page;
        st.stats.allocation.decrease_by(pool, 1);
        st.stats.allocated_bytes.decrease_by(pool, size);
        let (current, high) = (
            st.stats.allocated_bytes.all().current as u64,
            st.allocated_high.bytes,
        );
        st.repeats.observe_free(current, high, st.free_clock);
        st.streams[s as usize].allocated_shrank(size);
        if oversize {
            st.stats.oversize_allocations.decrease(1);
        }
        // Queued for the trace trackers only while some are attached.
        st.track_block(Action::FreeRequested, id);
        if !st.history.enabled() {
            // `free_block` records and tracks only while something observes
            // the allocator, and otherwise releases the block at once.
            return if !used_elsewhere {
                self.free_block(st, id);
                Ok(())
            } else {
                self.insert_events(st, id)
            };
        }
        if !used_elsewhere {
            // free_requested and free_completed at once: one clock read and
            // one look-up of the live allocation for both entries.
            let handle = st.streams[s as usize].handle;
            st.history.push_free_now(&mut st.blocks[id], handle);
            st.track_block(Action::FreeCompleted, id);
            self.release_block(st, id);
            Ok(())
        } else {
            st.record_free(Action::FreeRequested, id);
            self.insert_events(st, id)
        }
    }

    /// Checks that `raw` is a live allocation of this allocator (not freed, not
    /// a stale handle to a block that has since been reallocated, not a handle
    /// of another allocator whose block index, generation and address happen
    /// to match one here).
    #[inline]
    fn check_live(&self, st: &State, raw: &RawAllocation) -> Result<(), AllocError> {
        let live = raw.owner == self.id
            && st
                .blocks
                .get_allocated(raw.block)
                .is_some_and(|b| b.generation == raw.generation && b.ptr == raw.ptr);
        if live {
            Ok(())
        } else {
            Err(AllocError::InvalidFree {
                device: self.device,
                ptr: raw.ptr,
            })
        }
    }

    /// Records that `raw` is used on `stream` (PyTorch's `record_stream`).
    ///
    /// A no-op for an allocation made while caching was off, as in PyTorch
    /// (its free goes straight to the driver, which waits for the device).
    pub fn record_stream(&self, raw: &RawAllocation, stream: StreamId) -> Result<(), AllocError> {
        if raw.block == NONE {
            return Ok(());
        }
        let mut guard = self.state.lock();
        let st = &mut *guard;
        if raw.block == UNCACHED {
            return self.check_uncached_live(st, raw);
        }
        self.check_live(st, raw)?;
        let s = stream_index(st, stream);
        // The allocation's own stream is ignored (PyTorch's `recordStream`
        // compares the streams themselves): a private pool's block belongs
        // to the pool's entry for its stream, not the default one that `s`
        // names, so the handles are compared.
        let own = st.streams[st.blocks[raw.block].stream as usize].handle;
        let b = &mut st.blocks[raw.block];
        if stream != own && !b.stream_uses.contains(&s) {
            b.stream_uses.push(s);
        }
        Ok(())
    }

    /// Turns caching on or off, PyTorch's
    /// `torch.cuda.memory.caching_allocator_enable(value)`. While caching is
    /// off, each allocation is a device allocation of exactly the size asked
    /// for (PyTorch's `uncached_allocate`: no rounding, no cached block, no
    /// statistics, no history, no memory-fraction check) and its free returns
    /// the memory to the device at once (`uncached_delete`); the device's
    /// free memory ([`mem_get_info`](Self::mem_get_info)) shows it, the
    /// allocator's statistics and snapshots do not. As with PyTorch's
    /// deleters, what happens at a free is decided when the memory was
    /// allocated: memory allocated while caching was on goes back to the
    /// cache whenever it is freed, and memory allocated while it was off
    /// goes back to the device. Cached memory stays cached until
    /// [`empty_cache`](Self::empty_cache). For debugging (a memory checker
    /// sees each allocation as its own device allocation) or to measure what
    /// caching saves; every request then costs a device call.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use strata_alloc::driver::sim::SimDriver;
    /// use strata_alloc::{AllocatorConfig, CachingAllocator, StreamId};
    ///
    /// let a = CachingAllocator::new(Arc::new(SimDriver::h100()), AllocatorConfig::default());
    /// a.set_caching_enabled(false);
    /// assert!(!a.caching_enabled());
    /// let free = a.mem_get_info().unwrap().free;
    /// let x = a.allocate(1000, StreamId::DEFAULT).unwrap();
    /// assert_eq!(a.mem_get_info().unwrap().free, free - 1000); // exactly the request
    /// assert_eq!(a.memory_stats().requested_bytes.all().allocated, 0); // not counted
    /// drop(x);
    /// assert_eq!(a.mem_get_info().unwrap().free, free); // back to the device at once
    /// a.set_caching_enabled(true);
    /// ```
    pub fn set_caching_enabled(&self, enabled: bool) {
        self.state.lock().caching_disabled = !enabled;
    }

    /// Whether caching is on (see [`set_caching_enabled`](Self::set_caching_enabled)).
    pub fn caching_enabled(&self) -> bool {
        !self.state.lock().caching_disabled
    }

    /// A device allocation of exactly `size` bytes, outside the cache
    /// (caching is off).
    #[cold]
    fn allocate_uncached(&self, st: &mut State, size: u64) -> Result<RawAllocation, AllocError> {
        let ptr = match self.counted.malloc(size) {
            Ok(p) => p,
            Err(DriverError::OutOfMemory) => {
                return Err(AllocError::UncachedOutOfMemory {
                    device: self.device,
                    requested: size,
                    free: self.counted.mem_get_info().map(|m| m.free).unwrap_or(0),
                })
            }
            Err(e) => return Err(self.driver_error(e)),
        };
        self.check_new_range(st, "malloc", ptr, size)?;
        st.uncached.insert(ptr, size);
        st.malloced.insert(ptr, size);
        Ok(RawAllocation {
            ptr,
            size,
            block: UNCACHED,
            generation: 0,
            owner: self.id,
        })
    }

    /// Checks that `raw`, a handle of an allocation made while caching was
    /// off, is live here.
    fn check_uncached_live(&self, st: &State, raw: &RawAllocation) -> Result<(), AllocError> {
        if raw.owner == self.id && st.uncached.get(&raw.ptr) == Some(&raw.size) {
            Ok(())
        } else {
            Err(AllocError::InvalidFree {
                device: self.device,
                ptr: raw.ptr,
            })
        }
    }

    /// Returns an allocation made while caching was off to the device. A
    /// driver failure leaves it live (it can be freed again).
    #[cold]
    fn free_uncached(&self, raw: RawAllocation) -> Result<(), AllocError> {
        let mut st = self.state.lock();
        self.check_uncached_live(&st, &raw)?;
        self.counted
            .free(raw.ptr, raw.size)
            .map_err(|e| self.driver_error(e))?;
        st.uncached.remove(&raw.ptr);
        st.malloced.remove(&raw.ptr);
        Ok(())
    }

    /// Releases every cached block that can be released: whole free segments are
    /// returned to the driver and free pages of expandable segments unmapped.
    /// Outstanding cross-stream events are waited for first.
    #[track_caller]
    pub fn empty_cache(&self) -> Result<(), AllocError> {
        let mut guard = self.lock();
        // The segment events of the release come from the caller.
        guard.history.cause = Some(std::panic::Location::caller());
        let r = self.release_cached_blocks(&mut guard);
        guard.history.cause = None;
        r
    }

    /// A copy of the statistics.
    pub fn memory_stats(&self) -> MemoryStats {
        self.state.lock().stats.clone()
    }

    /// Bytes held by live allocations (`allocated_bytes.all.current`).
    pub fn memory_allocated(&self) -> u64 {
        self.state.lock().stats.allocated_bytes.all().current as u64
    }

    /// Bytes reserved from the device (`reserved_bytes.all.current`).
    pub fn memory_reserved(&self) -> u64 {
        self.state.lock().reserved()
    }

    /// Peak of [`memory_allocated`](Self::memory_allocated).
    pub fn max_memory_allocated(&self) -> u64 {
        self.state.lock().stats.allocated_bytes.all().peak as u64
    }

    /// Peak of [`memory_reserved`](Self::memory_reserved).
    pub fn max_memory_reserved(&self) -> u64 {
        self.state.lock().stats.reserved_bytes.all().peak as u64
    }

    /// Sets every peak to the current value.
    pub fn reset_peak_memory_stats(&self) {
        self.state.lock().stats.reset_peak();
    }

    /// Zeroes the accumulated totals and event counters.
    pub fn reset_accumulated_memory_stats(&self) {
        self.state.lock().stats.reset_accumulated();
    }

    /// Starts recording the allocator's events into a ring buffer of
    /// `max_entries`, or stops with `None`, which forgets what was recorded
    /// (PyTorch's `_record_memory_history`). Called while recording, it keeps
    /// what was recorded (the newest `max_entries` entries, and the live
    /// allocations' call sites), as PyTorch does unless asked to clear
    /// ([`clear_history`](Self::clear_history)).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use strata_alloc::driver::sim::SimDriver;
    /// use strata_alloc::{AllocatorConfig, CachingAllocator, StreamId};
    ///
    /// let a = CachingAllocator::new(
    ///     Arc::new(SimDriver::new(1 << 30, 2 << 20)),
    ///     AllocatorConfig::default(),
    /// );
    /// a.record_history(Some(1000));
    /// let x = a.allocate(4096, StreamId::DEFAULT).unwrap(); // a segment, an alloc
    /// let recorded = a.history();
    /// a.record_history(Some(10)); // still recording: the record is kept
    /// assert_eq!(a.history(), recorded);
    /// a.clear_history();
    /// assert!(a.history().is_empty() && a.history_enabled());
    /// drop(x);
    /// a.record_history(None); // stops and forgets
    /// assert!(a.history().is_empty());
    /// ```
    pub fn record_history(&self, max_entries: Option<usize>) {
        self.record_history_with(max_entries, HistoryLevel::CallSites);
    }

    /// [`record_history`](Self::record_history) at a chosen level of detail:
    /// call sites (the default, a few nanoseconds per allocation) or full
    /// backtraces of live allocations (microseconds per allocation).
    pub fn record_history_with(&self, max_entries: Option<usize>, level: HistoryLevel) {
        self.state
            .lock()
            .set_history(max_entries.filter(|&n| n > 0), Recording::with_level(level));
    }

    /// [`record_history`](Self::record_history) with all of PyTorch's
    /// `_record_memory_history` options ([`HistoryOptions`]): a trace of
    /// the events or only the live allocations' state (`enabled`), which
    /// records keep call sites (`context`), call sites or backtraces
    /// (`stacks`), and actions left out of the trace (`skip_actions`).
    /// As with `record_history`, calling it while recording keeps what was
    /// recorded, and the new options apply from then on; `max_entries` 0
    /// stops and forgets. With `enabled="state"`
    /// ([`HistoryOptions::state_only`]) the trace holds one entry, the
    /// latest event, whatever `max_entries` (above 0) says, as in PyTorch.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use strata_alloc::history::{Action, HistoryContext, HistoryOptions};
    /// use strata_alloc::{driver::sim::SimDriver, AllocatorConfig, CachingAllocator, StreamId};
    ///
    /// let a = CachingAllocator::new(Arc::new(SimDriver::h100()), AllocatorConfig::default());
    /// a.record_history_opts(
    ///     &HistoryOptions::new(1000)
    ///         .context(HistoryContext::Alloc)
    ///         .skip(&[Action::FreeRequested]),
    /// );
    /// drop(a.allocate(4096, StreamId::DEFAULT).unwrap());
    /// let h = a.history();
    /// assert!(h.iter().all(|e| e.action != Action::FreeRequested));
    /// let alloc = h.iter().find(|e| e.action == Action::Alloc).unwrap();
    /// let free = h.iter().find(|e| e.action == Action::FreeCompleted).unwrap();
    /// assert!(alloc.site.is_some() && free.site.is_none());
    /// ```
    pub fn record_history_opts(&self, opts: &HistoryOptions) {
        let capacity =
            Some(if opts.trace { opts.max_entries } else { 1 }).filter(|_| opts.max_entries > 0);
        self.state.lock().set_history(capacity, Recording::of(opts));
    }

    /// Attaches `metadata` to every history event the calling thread causes
    /// from now on (an empty string attaches none): PyTorch's
    /// `torch.cuda.memory._set_memory_metadata`, whose metadata is the
    /// thread's own (events of other threads carry theirs). The events carry it as
    /// [`TraceEntry::user_metadata`], and snapshots written by
    /// [`dump_snapshot`](Self::dump_snapshot) as `user_metadata`.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use strata_alloc::{driver::sim::SimDriver, AllocatorConfig, CachingAllocator, StreamId};
    ///
    /// let a = CachingAllocator::new(Arc::new(SimDriver::h100()), AllocatorConfig::default());
    /// a.record_history(Some(100));
    /// a.set_memory_metadata("step 1");
    /// drop(a.allocate(4096, StreamId::DEFAULT).unwrap());
    /// a.set_memory_metadata("");
    /// assert_eq!(a.memory_metadata(), "");
    /// let h = a.history();
    /// assert!(h.iter().all(|e| e.user_metadata.as_deref() == Some("step 1")));
    /// ```
    pub fn set_memory_metadata(&self, metadata: &str) {
        crate::history::set_thread_metadata(self.id, metadata);
        if !metadata.is_empty() {
            self.state.lock().history.metadata_seen = true;
        }
    }

    /// The metadata [`set_memory_metadata`](Self::set_memory_metadata) set
    /// on the calling thread (PyTorch's `_get_memory_metadata`); empty when
    /// none.
    pub fn memory_metadata(&self) -> String {
        crate::history::thread_metadata(self.id).map_or_else(String::new, |m| m.to_string())
    }

    /// Tags `stream` with a reserve class: its new expandable segments reserve
    /// the address range that class has in `expandable_segments_reserve_by_class`
    /// (PyTorch's `setExpandableSegmentReserveClassForStream`); an empty
    /// `class` removes the tag. A class the configuration does not list
    /// leaves the stream with `expandable_segments_reserve`, or the default.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use strata_alloc::{driver::sim::SimDriver, AllocatorConfig, CachingAllocator, StreamId};
    ///
    /// let d = Arc::new(SimDriver::new(8 << 30, 2 << 20));
    /// let conf = AllocatorConfig::parse("expandable_segments_reserve_by_class:[tiny:0.125]").unwrap();
    /// let a = CachingAllocator::new(d, conf);
    /// let s = StreamId(3);
    /// a.set_stream_reserve_class(s, "tiny");
    /// let e = a.allocate(2 << 30, s).unwrap_err(); // more than 1 GiB: no segment can hold it
    /// assert!(e.to_string().contains("expandable-segment reserve"));
    /// assert!(a.allocate(512 << 20, s).is_ok());
    /// ```
    pub fn set_stream_reserve_class(&self, stream: StreamId, class: &str) {
        let mut st = self.state.lock();
        let s = crate::state::stream_index(&mut st, stream);
        st.streams[s as usize].reserve_class = (!class.is_empty()).then(|| class.to_string());
    }

    /// The reserve class `stream` is tagged with
    /// ([`set_stream_reserve_class`](Self::set_stream_reserve_class)); empty
    /// when untagged (PyTorch's `getExpandableSegmentReserveClassForStream`).
    pub fn stream_reserve_class(&self, stream: StreamId) -> String {
        let st = self.state.lock();
        st.streams
            .iter()
            .find(|e| e.handle == stream && e.mempool == 0)
            .and_then(|e| e.reserve_class.clone())
            .unwrap_or_default()
    }

    /// Seeds a code-side default reserve for the streams of reserve class
    /// `class`: `fraction` of the device (PyTorch's
    /// `setDefaultExpandableSegmentReserveFractionForClass`, which lets a
    /// serving layer downsize its streams' reserve by default). As in
    /// PyTorch, the configuration wins: this does nothing when
    /// `expandable_segments_reserve` is set, or when
    /// `expandable_segments_reserve_by_class` already names `class`;
    /// otherwise the class joins `expandable_segments_reserve_by_class` (a
    /// later settings string that does not name that key keeps it). A class
    /// name other than letters, digits, `_` and `-`, or a fraction that is
    /// not positive and finite, is a typed error and changes nothing.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use strata_alloc::{driver::sim::SimDriver, AllocatorConfig, CachingAllocator, Reserve};
    ///
    /// let a = CachingAllocator::new(Arc::new(SimDriver::h100()), AllocatorConfig::default());
    /// a.set_default_reserve_fraction_for_class("serving", 0.25).unwrap();
    /// let c = a.config();
    /// assert_eq!(c.expandable_segments_reserve_by_class, [("serving".to_string(), Reserve::Fraction(0.25))]);
    /// assert!(a.set_default_reserve_fraction_for_class("bad class", 0.5).is_err());
    /// assert!(a.set_default_reserve_fraction_for_class("x", f64::NAN).is_err());
    /// ```
    pub fn set_default_reserve_fraction_for_class(
        &self,
        class: &str,
        fraction: f64,
    ) -> Result<(), AllocError> {
        if !crate::config::reserve_class_ok(class) {
            return Err(ConfigError::BadValue {
                key: "expandable_segments_reserve_by_class",
                value: class.to_string(),
                accepted: "a class name of letters, digits, '_' and '-', e.g. serving",
            }
            .into());
        }
        if !crate::config::reserve_ok(fraction) {
            return Err(ConfigError::BadValue {
                key: "expandable_segments_reserve_by_class",
                value: fraction.to_string(),
                accepted: "a positive, finite fraction of the device's memory, e.g. 0.25",
            }
            .into());
        }
        let mut st = self.state.lock();
        let c = &st.settings.config;
        if c.expandable_segments_reserve.is_some()
            || c.expandable_segments_reserve_by_class
                .iter()
                .any(|(name, _)| name == class)
        {
            return Ok(());
        }
        let mut config = c.clone();
        config.expandable_segments_reserve_by_class.push((
            class.to_string(),
            crate::config::Reserve::Fraction(fraction),
        ));
        self.install_config(&mut st, config);
        Ok(())
    }

    /// Where the live allocation at `ptr` was made, if history was recording
    /// it with call sites ([`HistoryContext::State`](crate::history::HistoryContext)
    /// or more): PyTorch's `torch.cuda.memory._allocation_traceback(ptr)`.
    /// `None` for an address that is not the start of a live allocation
    /// (freed, or inside one), or one made while history was off or kept no
    /// call site.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use strata_alloc::{driver::sim::SimDriver, AllocatorConfig, CachingAllocator, StreamId};
    ///
    /// let a = CachingAllocator::new(Arc::new(SimDriver::h100()), AllocatorConfig::default());
    /// let before = a.allocate(512, StreamId::DEFAULT).unwrap();
    /// a.record_history(Some(100));
    /// let x = a.allocate(1 << 20, StreamId::DEFAULT).unwrap();
    /// let origin = a.allocation_origin(x.ptr()).unwrap();
    /// assert_eq!(origin.site.unwrap().file, file!());
    /// assert_eq!(origin.size, 1 << 20);
    /// assert!(a.allocation_origin(before.ptr()).is_none(), "made before recording");
    /// let p = x.ptr();
    /// drop(x);
    /// assert!(a.allocation_origin(p).is_none(), "freed");
    /// ```
    pub fn allocation_origin(&self, ptr: u64) -> Option<AllocationOrigin> {
        let st = self.state.lock();
        if !st.history.enabled() || ptr == 0 {
            return None;
        }
        let (_, b) = st
            .blocks
            .iter()
            .find(|(_, b)| b.ptr == ptr && b.allocated && b.hist_seq != 0)?;
        let location = b.hist_site?;
        let frames = st
            .history
            .backtraces
            .get(&b.ptr)
            .map(|bt| crate::history::backtrace_frames(bt))
            .unwrap_or_default();
        Some(AllocationOrigin {
            site: Some(crate::history::CallSite::from_location(location)),
            frames,
            size: b.requested,
        })
    }

    /// Forgets the recorded events and the live allocations' records and
    /// goes on recording (PyTorch's `_record_memory_history(...,
    /// clear_history=True)`). Nothing happens while history is off.
    pub fn clear_history(&self) {
        self.state.lock().clear_history();
    }

    /// Whether history is being recorded.
    pub fn history_enabled(&self) -> bool {
        self.state.lock().history.enabled()
    }

    /// The recorded events, oldest first.
    pub fn history(&self) -> Vec<TraceEntry> {
        self.state.lock().history.entries()
    }

    /// The recorded events and the current statistics as a trace document in
    /// the format of strata's allocation traces (readable by the `replay`
    /// example).
    pub fn history_json(&self, workload: &str) -> String {
        let st = self.state.lock();
        let mode = if st.settings.expandable {
            "expandable"
        } else {
            "default"
        };
        crate::history::to_json(workload, mode, &st.history.entries(), &st.stats)
    }

    /// Driver calls made so far, by kind.
    pub fn driver_calls(&self) -> DriverCalls {
        self.counted.calls()
    }

    /// The segments and their blocks, sorted by address (PyTorch's
    /// `memory_snapshot()`). Each mapped range of an expandable segment is
    /// reported as its own segment.
    ///
    /// When history recording is on, taking a snapshot records a
    /// [`Action::Snapshot`] event whose size is the active bytes at that
    /// moment, as PyTorch's trace does.
    pub fn snapshot(&self) -> Vec<SegmentSnapshot> {
        let mut st = self.lock();
        let out = crate::snapshot::segments(&st);
        let active = st.stats.active_bytes.all().current as u64;
        if st.history.enabled() {
            st.history
                .push(Action::Snapshot, 0, active, StreamId::DEFAULT);
        }
        st.track(Action::Snapshot, 0, active, StreamId::DEFAULT);
        out
    }

    // ----- sizes -------------------------------------------------------------

    /// PyTorch's `round_size`: 512-byte multiples, or power-of-two divisions.
    /// Never wraps: a size whose rounding does not fit a `u64` (1 EiB or
    /// more, which [`allocate`](Self::allocate) refuses with
    /// [`AllocError::TooLarge`]) gives `u64::MAX`.
    pub fn round_size(&self, size: u64) -> u64 {
        round_size(&self.state.lock().settings.config, size)
    }

    /// Segment size for a rounded request (ordinary segments).
    fn allocation_size(config: &AllocatorConfig, rounded: u64) -> u64 {
        if rounded <= SMALL_SIZE {
            SMALL_BUFFER
        } else if rounded < MIN_LARGE_ALLOC {
            config.large_segment_size
        } else {
            rounded.div_ceil(ROUND_LARGE) * ROUND_LARGE
        }
    }

    // ----- the hot path --------------------------------------------------------

    #[inline]
    pub(crate) fn get_free_block(
        &self,
        st: &mut State,
        s: u32,
        pool: PoolKind,
        size: u64,
    ) -> Option<u32> {
        // Garbage collection ages the blocks of the default pools by their
        // own searches only: PyTorch counts per `BlockPool`, and a private
        // pool's searches age none of the default pools' blocks.
        if st.settings.gc_threshold.is_some() && st.streams[s as usize].mempool == 0 {
            st.gc_counts[pool as usize] += 1;
        }
        if !st.settings.expandable && !st.streams[s as usize].expandable[pool as usize].is_empty() {
            return Self::get_free_ordinary_block(st, s, pool, size);
        }
        let config = &st.settings.config;
        let idx = &mut st.streams[s as usize].free[pool as usize];
        // The oversize rules may refuse the smallest block that fits.
        let e = idx.take_lower_bound(size, |e| Self::fits_oversize_rules(config, size, e.size))?;
        Some(e.block)
    }

    /// PyTorch's oversize rules: a request below `max_split_size` takes no
    /// oversize block, and an oversize request takes none more than
    /// `max_non_split_rounding` larger than itself.
    #[inline]
    fn fits_oversize_rules(config: &AllocatorConfig, size: u64, block: u64) -> bool {
        match config.max_split_size {
            Some(max_split) => {
                !((size < max_split && block >= max_split)
                    || (size >= max_split
                        && block >= size.saturating_add(config.max_non_split_rounding)))
            }
            None => true,
        }
    }

    /// `get_free_block` once expandable segments have been turned off at run
    /// time while the stream still has some: like PyTorch, only blocks of
    /// ordinary segments are handed out (the smallest that fits), and the
    /// cached blocks of expandable segments wait until expandable segments
    /// are turned on again or `empty_cache` releases them.
    #[cold]
    fn get_free_ordinary_block(st: &mut State, s: u32, pool: PoolKind, size: u64) -> Option<u32> {
        let e = st.streams[s as usize].free[pool as usize]
            .iter_from(size)
            .find(|e| !st.blocks[e.block].expandable)?;
        if !Self::fits_oversize_rules(&st.settings.config, size, e.size) {
            return None;
        }
        st.index_remove(e.block);
        Some(e.block)
    }

    /// PyTorch's `should_split`: a `no_split` pool never splits; a
    /// small-pool block, or any block while expandable segments are on (the
    /// setting, not the block's kind: an ordinary segment cached before the
    /// switch, or a private pool's, splits the same way), splits when at
    /// least 512 bytes would be left; otherwise a large-pool block splits
    /// when the request is not oversize and more than 1 MiB would be left.
    #[inline]
    fn should_split(settings: &Settings, b: &Block, size: u64, no_split: bool) -> bool {
        let remaining = b.size - size;
        if no_split {
            false
        } else if b.pool == PoolKind::Small || b.expandable || settings.expandable {
            remaining >= MIN_BLOCK_SIZE
        } else {
            !settings.is_oversize(size) && remaining > SMALL_SIZE
        }
    }

    /// Hands out block `id` (already out of the free index), splitting off the
    /// unused back part.
    #[inline]
    fn alloc_found_block(
        &self,
        st: &mut State,
        id: u32,
        rounded: u64,
        orig: u64,
        site: &'static std::panic::Location<'static>,
    ) -> RawAllocation {
        let State {
            blocks,
            streams,
            stats,
            settings,
            gc_counts,
            free_clock,
            ..
        } = st;
        let b = &blocks[id];
        let (kind, expandable, s, bsize, already_split) =
            (b.pool, b.expandable, b.stream, b.size, b.is_split());
        let pool = kind.stat();
        let stream = &mut streams[s as usize];
        if Self::should_split(settings, b, rounded, stream.no_split) {
            let rest = blocks.split(id, rounded);
            // `State::index_insert` of the back part, with its stream's
            // index at hand.
            let r = &mut blocks[rest];
            let gc = gc_counts[kind as usize];
            if gc != 0 {
                r.gc_base = gc;
            }
            *free_clock += 1;
            r.freed_at = *free_clock;
            let rest_size = bsize - rounded;
            stream.free[kind as usize].insert(Entry {
                size: rest_size,
                ptr: r.ptr,
                block: rest,
            });
            if !expandable {
                if already_split {
                    stats.inactive_split_bytes.decrease(pool, rounded as i64);
                } else {
                    stats.inactive_split.increase(pool, 1);
                    stats.inactive_split_bytes.increase(pool, rest_size as i64);
                }
            }
        } else if already_split && !expandable {
            stats.inactive_split.decrease(pool, 1);
            stats.inactive_split_bytes.decrease(pool, bsize as i64);
        }
        let b = &mut blocks[id];
        b.allocated = true;
        b.requested = orig;
        b.generation = b.generation.wrapping_add(1);
        let (size, ptr, generation) = (b.size, b.ptr, b.generation);
        // A free block is never marked oversize (the free clears the mark).
        let oversize = settings.is_oversize(size);
        if oversize {
            b.oversize = true;
        }
        stream.allocated_grew(size, *free_clock);
        stats.allocation.increase_by(pool, 1);
        stats.allocated_bytes.increase_by(pool, size);
        let now_allocated = stats.allocated_bytes.all().current as u64;
        stats.active.increase_by(pool, 1);
        stats.active_bytes.increase_by(pool, size);
        stats.requested_bytes.increase_by(pool, orig);
        if oversize {
            stats.oversize_allocations.increase(1);
        }
        st.allocated_high.observe(now_allocated, st.free_clock);
        if st.observed {
            let stream = st.streams[s as usize].handle;
            if st.history.enabled() {
                st.history.push_alloc(&mut st.blocks[id], stream, site);
            }
            st.track(Action::Alloc, ptr, orig, stream);
        }
        RawAllocation {
            ptr,
            size: orig,
            block: id,
            generation,
            owner: self.id,
        }
    }

    /// A [`MemPool`](crate::MemPool) was dropped: the pool is freeable once
    /// no guard uses it (none can: guards borrow the pool), and its free
    /// segments go back to the driver now. A driver error leaves them
    /// cached, for a later `empty_cache`.
    pub(crate) fn release_mem_pool(&self, id: u64) {
        let mut guard = self.lock();
        let st = &mut *guard;
        let Some(p) = st.mempools.iter_mut().find(|p| p.id == id) else {
            return;
        };
        p.use_count = p.use_count.saturating_sub(1);
        if p.use_count > 0 {
            return;
        }
        // PyTorch's `emptyCache(mempool_id)`: only the events of the pool's
        // blocks are waited for.
        if self.synchronize_and_free_pool_events(st, id).is_ok() {
            let _ = self.release_free_segments(st, |_, e| e.mempool == id);
        }
        crate::mempool::forget_empty_pools(st);
    }

    /// Returns a block to its pool, merging it with free neighbours.
    #[inline]
    fn free_block(&self, st: &mut State, id: u32) {
        if st.observed {
            st.record_free(Action::FreeCompleted, id);
            st.track_block(Action::FreeCompleted, id);
        }
        self.release_block(st, id);
    }

    /// [`free_block`](Self::free_block) less its history entry.
    #[inline(always)]
    fn release_block(&self, st: &mut State, id: u32) {
        let State {
            blocks,
            streams,
            stats,
            gc_counts,
            free_clock,
            ..
        } = st;
        let b = &blocks[id];
        let (orig_size, requested) = (b.size, b.requested);
        let (kind, expandable, prev, next) = (b.pool, b.expandable, b.prev, b.next);
        let pool = kind.stat();
        // The neighbours lie in the block's segment: the same stream and
        // pool (set when a block is made, kept by splits), so the same free
        // index, looked up once.
        let idx = &mut streams[b.stream as usize].free[kind as usize];
        let mut net_blocks = 0i64;
        let mut net_bytes = 0i64;
        let mut id = id;
        // A free neighbour leaves the index (and the inactive split counts).
        let stream = b.stream;
        let mut take_free = |blocks: &crate::block::Blocks, j: u32| {
            let n = &blocks[j];
            if !n.is_free() {
                return false;
            }
            debug_assert!(n.stream == stream && n.pool == kind);
            idx.remove(n.size, n.ptr);
            net_blocks -= 1;
            net_bytes -= n.size as i64;
            true
        };
        if prev != NONE && take_free(blocks, prev) {
            blocks.absorb_free_next(prev);
            id = prev;
        }
        // After a merge with `prev`, `prev`'s next block is this one's.
        if next != NONE && take_free(blocks, next) {
            blocks.absorb_free_next(id);
        }
        // `State::index_insert`, with the index at hand.
        let b = &mut blocks[id];
        b.requested = 0;
        let gc = gc_counts[kind as usize];
        if gc != 0 {
            b.gc_base = gc;
        }
        *free_clock += 1;
        b.freed_at = *free_clock;
        idx.insert(Entry {
            size: b.size,
            ptr: b.ptr,
            block: id,
        });
        if !expandable {
            if b.is_split() {
                net_blocks += 1;
                net_bytes += b.size as i64;
            }
            apply_delta(&mut stats.inactive_split, pool, net_blocks);
            apply_delta(&mut stats.inactive_split_bytes, pool, net_bytes);
        }
        stats.active.decrease_by(pool, 1);
        stats.active_bytes.decrease_by(pool, orig_size);
        stats.requested_bytes.decrease_by(pool, requested);
    }

    // ----- events ----------------------------------------------------------------

    fn insert_events(&self, st: &mut State, id: u32) -> Result<(), AllocError> {
        let uses = st.blocks[id].stream_uses.take();
        let mut failure = None;
        for u in uses {
            let handle = st.streams[u as usize].handle;
            match st.record_pooled_event(&self.counted, handle) {
                Ok(e) => {
                    st.blocks[id].event_count += 1;
                    st.streams[u as usize].events.push_back((e, id));
                    st.pending_events += 1;
                }
                Err(err) => {
                    // Without an event, wait for the stream instead; if even that
                    // fails the block is withheld (never reused) rather than risk
                    // handing out memory another stream may still be using.
                    if self.counted.synchronize_stream(handle).is_err() {
                        st.blocks[id].event_count += 1;
                        failure = Some(err);
                    }
                }
            }
        }
        if st.blocks[id].event_count == 0 {
            self.free_block(st, id);
        }
        match failure {
            None => Ok(()),
            Some(source) => Err(AllocError::Driver {
                device: self.device,
                source,
            }),
        }
    }

    /// Frees blocks whose events have completed, stream by stream, stopping at
    /// the first pending event of each stream.
    fn process_events(&self, st: &mut State) {
        for s in 0..st.streams.len() {
            while let Some(&(ev, id)) = st.streams[s].events.front() {
                match self.counted.query_event(ev) {
                    Ok(true) => {
                        st.streams[s].events.pop_front();
                        self.event_done(st, ev, id);
                    }
                    _ => break,
                }
            }
        }
    }

    fn event_done(&self, st: &mut State, ev: EventHandle, id: u32) {
        st.event_pool.push(ev);
        st.pending_events -= 1;
        let b = &mut st.blocks[id];
        b.event_count -= 1;
        if b.event_count == 0 {
            self.free_block(st, id);
        }
    }

    /// Waits for the outstanding events of private pool `pool`'s blocks and
    /// frees those blocks (PyTorch's `synchronize_and_free_events(context,
    /// pool)`): the other events stay pending, in their order. Counted in
    /// `num_sync_all_streams`, as PyTorch counts it.
    fn synchronize_and_free_pool_events(
        &self,
        st: &mut State,
        pool: u64,
    ) -> Result<(), AllocError> {
        st.stats.num_sync_all_streams += 1;
        for s in 0..st.streams.len() {
            let mut i = 0;
            while i < st.streams[s].events.len() {
                let (ev, id) = st.streams[s].events[i];
                let owner = st.blocks[id].stream as usize;
                if st.streams[owner].mempool != pool {
                    i += 1;
                    continue;
                }
                self.counted
                    .synchronize_event(ev)
                    .map_err(|e| self.driver_error(e))?;
                st.streams[s].events.remove(i);
                self.event_done(st, ev, id);
            }
        }
        Ok(())
    }

    /// Waits for every outstanding event and frees their blocks.
    fn synchronize_and_free_events(&self, st: &mut State) -> Result<(), AllocError> {
        st.stats.num_sync_all_streams += 1;
        for s in 0..st.streams.len() {
            while let Some(&(ev, id)) = st.streams[s].events.front() {
                self.counted
                    .synchronize_event(ev)
                    .map_err(|e| self.driver_error(e))?;
                st.streams[s].events.pop_front();
                self.event_done(st, ev, id);
            }
        }
        Ok(())
    }

    // ----- the slow path -----------------------------------------------------------

    /// No cached block fits: obtain memory from the device, releasing cached
    /// memory if the device has none, or fail with a typed out-of-memory error.
    fn allocate_slow(
        &self,
        st: &mut State,
        s: u32,
        pool: PoolKind,
        rounded: u64,
        orig: u64,
    ) -> Result<u32, AllocError> {
        if st.settings.gc_threshold.is_some() {
            self.garbage_collect(st)?;
        }
        if st.settings.config.throw_on_cudamalloc_oom {
            self.reject_beyond_fraction(st, rounded, orig)?;
        }
        if let Some(id) = self.alloc_block(st, s, pool, rounded)? {
            return Ok(id);
        }
        if let Some(id) = crate::mempool::free_block_on_oom(self, st, s, pool, rounded) {
            return Ok(id);
        }
        if st.settings.config.max_split_size.is_some()
            && self.release_available_cached_blocks(st, s, pool, rounded)?
        {
            if let Some(id) = self.alloc_block(st, s, pool, rounded)? {
                return Ok(id);
            }
        }
        st.stats.num_alloc_retries += 1;
        self.release_cached_blocks(st)?;
        if let Some(id) = self.alloc_block(st, s, pool, rounded)? {
            return Ok(id);
        }
        // A private pool's request needed an ordinary segment whatever the
        // setting.
        let device_request = if st.serves_expandable(s) {
            rounded.div_ceil(self.page) * self.page
        } else {
            Self::allocation_size(&st.settings.config, rounded)
        };
        Err(self.out_of_memory(st, s, orig, rounded, device_request))
    }

    /// `throw_on_cudamalloc_oom`: fails at once when the device allocation a
    /// request of `rounded` bytes needs (PyTorch's `get_allocation_size`,
    /// whichever segment kind will serve it) would take reserved memory past
    /// the memory fraction's limit (the whole device at fraction 1), before
    /// any cached block is released: PyTorch's check in `alloc_block`.
    fn reject_beyond_fraction(
        &self,
        st: &mut State,
        rounded: u64,
        orig: u64,
    ) -> Result<(), AllocError> {
        let limit = st.settings.allowed_max.unwrap_or(self.capacity);
        let device_request = Self::allocation_size(&st.settings.config, rounded);
        let reserved = st.reserved();
        if reserved.saturating_add(device_request) <= limit {
            return Ok(());
        }
        st.stats.num_oom_rejections += 1;
        Err(AllocError::OomRejected {
            device: self.device,
            requested: orig,
            device_request,
            reserved,
            limit,
        })
    }

    /// Obtains new device memory for a request: a new segment, or pages mapped
    /// into the stream's expandable segment. `Ok(None)` when the device (or the
    /// memory fraction) has no room.
    fn alloc_block(
        &self,
        st: &mut State,
        s: u32,
        pool: PoolKind,
        rounded: u64,
    ) -> Result<Option<u32>, AllocError> {
        if st.serves_expandable(s) {
            return self.expandable_space().grow(st, s, pool, rounded);
        }
        let size = Self::allocation_size(&st.settings.config, rounded);
        if !st.fits_fraction(size) {
            return Ok(None);
        }
        let ptr = match self.counted.malloc(size) {
            Ok(p) => p,
            Err(DriverError::OutOfMemory) => return Ok(None),
            Err(e) => return Err(self.driver_error(e)),
        };
        self.check_new_range(st, "malloc", ptr, size)?;
        let id = st
            .blocks
            .add(Block::whole_segment(ptr, size, s, pool, None));
        st.segments.insert(ptr, id);
        st.malloced.insert(ptr, size);
        let p = pool.stat();
        st.stats.segment.increase(p, 1);
        st.stats.reserved_bytes.increase(p, size as i64);
        if let Some(r) = st.private_pool_reserved(s) {
            r.increase(p, size as i64);
        }
        st.stats.num_device_alloc += 1;
        if st.settings.is_oversize(size) {
            st.blocks[id].oversize_segment = true;
            st.stats.oversize_segments.increase(1);
        }
        st.record(Action::SegmentAlloc, ptr, size, s);
        if st.history.enabled() && st.history.rec.context >= HistoryContext::State {
            if let Some(site) = st.history.cause {
                st.history.segment_sites.insert(ptr, site);
            }
        }
        Ok(Some(id))
    }

    /// Returns one whole free segment to the driver.
    fn release_segment(&self, st: &mut State, id: u32) -> Result<(), AllocError> {
        let (ptr, size, pool, oversize) = {
            let b = &st.blocks[id];
            debug_assert!(!b.is_split() && !b.expandable && b.is_free());
            (b.ptr, b.size, b.pool.stat(), b.oversize_segment)
        };
        self.counted
            .free(ptr, size)
            .map_err(|e| self.driver_error(e))?;
        let s = st.blocks[id].stream;
        st.record(Action::SegmentFree, ptr, size, s);
        st.history.segment_sites.remove(&ptr);
        st.index_remove(id);
        st.segments.remove(&ptr);
        st.malloced.remove(&ptr);
        st.blocks.remove(id);
        st.stats.segment.decrease(pool, 1);
        st.stats.reserved_bytes.decrease(pool, size as i64);
        if let Some(r) = st.private_pool_reserved(s) {
            r.decrease(pool, size as i64);
        }
        st.stats.num_device_free += 1;
        if oversize {
            st.stats.oversize_segments.decrease(1);
        }
        Ok(())
    }

    /// With a finite `max_split_size`: free one cached oversize segment big enough
    /// for the request, or several, largest first, until enough is freed.
    fn release_available_cached_blocks(
        &self,
        st: &mut State,
        s: u32,
        pool: PoolKind,
        rounded: u64,
    ) -> Result<bool, AllocError> {
        let Some(max_split) = st.settings.config.max_split_size else {
            return Ok(false);
        };
        let key = rounded.max(max_split);
        let whole = |st: &State, e: &Entry| {
            let b = &st.blocks[e.block];
            !b.expandable && !b.is_split()
        };
        let idx = &st.streams[s as usize].free[pool as usize];
        if let Some(e) = idx.lower_bound(key).filter(|e| whole(st, e)) {
            self.release_segment(st, e.block)?;
            return Ok(true);
        }
        let mut released = 0;
        for e in idx.descending() {
            if released >= key || e.size < max_split {
                break;
            }
            if whole(st, &e) {
                self.release_segment(st, e.block)?;
                released += e.size;
            }
        }
        Ok(released >= key)
    }

    /// Empties the cache: waits for every event, frees every whole free
    /// segment and unmaps every free page of expandable segments.
    fn release_cached_blocks(&self, st: &mut State) -> Result<(), AllocError> {
        self.synchronize_and_free_events(st)?;
        // A private pool's segments go only once the pool is freeable.
        self.release_free_segments(st, |st, e| {
            e.mempool == 0 || st.mempool(e.mempool).is_none_or(|p| p.use_count == 0)
        })?;
        if st.expandable.iter().any(Option::is_some) || !st.unreleased.is_empty() {
            self.expandable_space().release_free_pages(st)?;
        }
        crate::mempool::forget_empty_pools(st);
        Ok(())
    }

    /// Returns to the driver every ordinary segment that is entirely free
    /// and cached in an entry of `st.streams` that `of` selects.
    ///
    /// In PyTorch's order (`release_cached_blocks`, whose `segment_free`
    /// trace entries follow it): the default pools first, large pool then
    /// small pool, then each private pool by id, small pool then large
    /// pool; within a pool by stream, size and address (the order of
    /// PyTorch's `BlockPool`).
    fn release_free_segments(
        &self,
        st: &mut State,
        of: impl Fn(&State, &StreamState) -> bool,
    ) -> Result<(), AllocError> {
        let mut whole = Vec::new();
        for stream in st.streams.iter().filter(|e| of(st, e)) {
            for (kind, idx) in stream.free.iter().enumerate() {
                // Default pools: large (1) first; private pools: small (0).
                let kind_order = if stream.mempool == 0 { 1 - kind } else { kind };
                whole.extend(
                    idx.all()
                        .filter(|e| {
                            let b = &st.blocks[e.block];
                            !b.expandable && !b.is_split()
                        })
                        .map(|e| {
                            (
                                (stream.mempool, kind_order, stream.handle.0, e.size, e.ptr),
                                e.block,
                            )
                        }),
                );
            }
        }
        whole.sort_unstable_by_key(|&(k, _)| k);
        for (_, id) in whole {
            self.release_segment(st, id)?;
        }
        Ok(())
    }

    /// PyTorch's garbage collection: once reserved memory passes the threshold
    /// of the allowed memory, free the oldest cached whole large segments.
    fn garbage_collect(&self, st: &mut State) -> Result<(), AllocError> {
        let (Some(threshold), Some(max)) = (st.settings.gc_threshold, st.settings.allowed_max)
        else {
            return Ok(());
        };
        let limit = (threshold * max as f64) as u64;
        let reserved = st.reserved();
        if reserved <= limit {
            return Ok(());
        }
        let target = reserved - limit;
        let mut freed = 0;
        loop {
            // In the order of PyTorch's `large_blocks` set, which its pass
            // walks (and so its `segment_free` trace entries follow): by
            // stream, size and address, as `empty_cache` releases them.
            // (stream, size, address, age, block)
            let mut cands: Vec<[u64; 5]> = Vec::new();
            for stream in st.streams.iter().filter(|s| s.mempool == 0) {
                for e in stream.free[PoolKind::Large as usize].all() {
                    let b = &st.blocks[e.block];
                    if !b.expandable && !b.is_split() {
                        let age = st.gc_counts[PoolKind::Large as usize] - b.gc_base;
                        cands.push([stream.handle.0, e.size, e.ptr, age, u64::from(e.block)]);
                    }
                }
            }
            if cands.is_empty() {
                break;
            }
            cands.sort_unstable();
            let mean = cands.iter().map(|c| c[3] as f64).sum::<f64>() / cands.len() as f64;
            let mut any = false;
            for [_, size, _, age, id] in cands {
                let id = id as u32;
                if age as f64 >= mean {
                    self.release_segment(st, id)?;
                    freed += size;
                    any = true;
                }
            }
            if freed >= target || !any {
                break;
            }
        }
        Ok(())
    }

    // ----- errors --------------------------------------------------------------------

    /// Refuses a range the driver's `call` returned that the allocator
    /// cannot hold, a driver's bug, as the driver's error with nothing
    /// changed: one that wraps past 2^64 (every block in it would end below
    /// where it starts; given back), or one overlapping a range the
    /// allocator holds (not given back: the driver might free the held
    /// memory).
    fn check_new_range(
        &self,
        st: &State,
        call: &'static str,
        ptr: DevicePtr,
        size: u64,
    ) -> Result<(), AllocError> {
        if ptr.checked_add(size).is_none() {
            let _ = self.counted.free(ptr, size);
            return Err(self.driver_error(wrapping_range(call, ptr, size)));
        }
        match st.held_range_overlapping(ptr, size) {
            Some((base, held)) => Err(self.driver_error(DriverError::Call {
                call,
                message: format!(
                    "returned {ptr:#x} for {size} bytes, a range overlapping the {held} bytes at {base:#x} that the allocator already holds; the driver must not hand out memory twice"
                ),
            })),
            None => Ok(()),
        }
    }

    fn driver_error(&self, source: DriverError) -> AllocError {
        AllocError::Driver {
            device: self.device,
            source,
        }
    }

    /// The out-of-memory error of a request of `requested` bytes on dense
    /// stream `s`, rounded to `rounded`, for which the device could not
    /// supply `device_request` bytes. Counted in `num_ooms`, and traced as
    /// PyTorch's `record_trace(OOM, device_free, params.size(),
    /// params.stream(), ...)`: the free device memory, the rounded request
    /// (not the device request) and the request's stream, with the call
    /// site under `context` `alloc` or `all`.
    fn out_of_memory(
        &self,
        st: &mut State,
        s: u32,
        requested: u64,
        rounded: u64,
        device_request: u64,
    ) -> AllocError {
        st.stats.num_ooms += 1;
        let free = self.counted.mem_get_info().map(|m| m.free).unwrap_or(0);
        if st.history.enabled() {
            let stream = st.streams[s as usize].handle;
            st.history.push(Action::Oom, free, rounded, stream);
        }
        let stream = st.streams[s as usize].handle;
        st.track(Action::Oom, free, rounded, stream);
        let allocated = st.stats.allocated_bytes.all().current as u64;
        let reserved = st.reserved();
        let unallocated = reserved.saturating_sub(allocated);
        let free_blocks = free_by_pool(st);
        let largest_free = free_blocks.iter().map(|p| p.largest).max().unwrap_or(0);
        let top_sites = crate::watch::usage_by_site(st, 5);
        let config = &st.settings.config;
        // Whether the request would have been served by expandable segments:
        // never in a private pool, whose segments are ordinary, so neither
        // the expandable-segment reserve nor turning expandable segments on
        // bears on its failure.
        let pooled = st.streams[s as usize].mempool != 0;
        let expandable = st.serves_expandable(s);
        let reserve = match st.segment_reserve(s, self.capacity, self.page) {
            (r, Some(what)) if expandable && device_request > r => Some((r, what)),
            _ => None,
        };
        let hint = if let Some((r, what)) = reserve {
            format!("A single allocation of {} exceeds the per-stream expandable-segment reserve of {} set by {what}; an allocation cannot span expandable segments: raise the reserve for this stream (or unset it).", crate::stats::format_size(device_request), crate::stats::format_size(r))
        } else if requested > self.capacity {
            "The request alone is larger than the device's total capacity: split the work into smaller pieces (a smaller batch, chunked computation).".to_string()
        } else if st
            .settings
            .allowed_max
            .is_some_and(|max| reserved.saturating_add(device_request) > max)
        {
            "The per-process memory fraction is the limit: raise per_process_memory_fraction in STRATA_ALLOC_CONF (or with set_memory_fraction), or use less memory.".to_string()
        } else if device_request <= self.capacity
            && reserved.saturating_add(device_request) > crate::state::MAX_RESERVED
        {
            "The allocator's statistics (PyTorch's signed 64-bit figures) count at most 2^63 - 1 reserved bytes, and this request would take the reserved bytes past that: free memory (or call empty_cache()) before asking for more.".to_string()
        } else if unallocated > device_request
            && unallocated * 4 > reserved.max(1)
            && largest_free < device_request
        {
            // Fragmentation: enough free cached memory in total, no block big
            // enough. Suggest only what is not already on.
            if !st.settings.expandable && self.has_vm && !pooled {
                format!("Reserved but unallocated memory is fragmented ({} free in cached blocks, the largest {}): set STRATA_ALLOC_CONF=expandable_segments:True so segments can grow and shrink.", crate::stats::format_size(unallocated), crate::stats::format_size(largest_free))
            } else if !expandable && config.max_split_size.is_none() {
                format!("Reserved but unallocated memory is fragmented ({} free in cached blocks, the largest {}): set STRATA_ALLOC_CONF=max_split_size_mb:<n> to stop large blocks being split.", crate::stats::format_size(unallocated), crate::stats::format_size(largest_free))
            } else {
                format!("Reserved but unallocated memory is fragmented ({} free in cached blocks, the largest {}) although the allocator settings already limit fragmentation: call empty_cache() between phases of different sizes, or free tensors kept alive longer than needed.", crate::stats::format_size(unallocated), crate::stats::format_size(largest_free))
            }
        } else if unallocated > device_request && unallocated * 4 > reserved.max(1) {
            "Much reserved memory is unallocated in blocks of other streams or pools: free tensors kept alive longer than needed, or call empty_cache() between phases.".to_string()
        } else if free < device_request && reserved < self.capacity / 2 {
            "Most device memory is used outside this allocator (other processes or libraries); check what else runs on the device.".to_string()
        } else if let Some(top) = top_sites.first().filter(|t| t.site.is_some()) {
            format!("Live allocations hold the memory; the most is asked for at {top}: free tensors that are no longer needed there (drop them, or call detach()/item() instead of keeping graphs), or reduce the batch size.")
        } else if !st.history.enabled() {
            "Free tensors that are no longer needed (drop them, or call detach()/item() instead of keeping graphs), or reduce the batch size. To see which lines of your code hold the memory, turn on record_history before the failing step.".to_string()
        } else {
            "Free tensors that are no longer needed (drop them, or call detach()/item() instead of keeping graphs), or reduce the batch size.".to_string()
        };
        AllocError::OutOfMemory(Box::new(OutOfMemory {
            device: self.device,
            requested,
            device_request,
            capacity: self.capacity,
            free,
            allocated,
            reserved_unallocated: unallocated,
            allowed: st.settings.allowed_max,
            free_blocks,
            top_sites,
            settings: config.to_string(),
            expandable,
            private_pool: pooled,
            hint,
        }))
    }

    /// Registers `observer`, called with the error and a snapshot of the
    /// segments each time an allocation fails for lack of memory, before the
    /// error is returned. It runs outside the allocator's lock, so it may call
    /// the allocator (take statistics, dump a snapshot, write a report,
    /// register or clear observers, allocate). An allocation of this
    /// allocator that fails for lack of memory inside an observer returns its
    /// error without calling the observers again (no recursion). A panic in
    /// an observer propagates to the caller of the failed allocation; the
    /// allocator is left as the failure left it and goes on working. On a
    /// thread already unwinding from another panic (an allocation made by a
    /// destructor), where a second panic would abort the process, an
    /// observer's panic is caught and dropped, and the allocation returns its
    /// error.
    ///
    /// ```
    /// use std::sync::{Arc, atomic::{AtomicUsize, Ordering}};
    /// use strata_alloc::{AllocatorConfig, CachingAllocator, StreamId};
    /// use strata_alloc::driver::sim::SimDriver;
    ///
    /// let a = CachingAllocator::new(Arc::new(SimDriver::new(64 << 20, 2 << 20)), AllocatorConfig::default());
    /// let seen = Arc::new(AtomicUsize::new(0));
    /// let s = Arc::clone(&seen);
    /// a.on_oom(move |oom, segments| {
    ///     assert_eq!(oom.requested, 1 << 30);
    ///     s.store(segments.len() + 1, Ordering::SeqCst);
    /// });
    /// assert!(a.allocate(1 << 30, StreamId::DEFAULT).is_err());
    /// assert_eq!(seen.load(Ordering::SeqCst), 1); // called, with no segments
    /// ```
    pub fn on_oom(
        &self,
        observer: impl Fn(&OutOfMemory, &[SegmentSnapshot]) + Send + Sync + 'static,
    ) {
        self.oom_observers.lock().push(Arc::new(observer));
    }

    /// Takes a [`Watch`](crate::watch::Watch): the live allocations by call
    /// site now. Needs history on (an [`AllocError::HistoryOff`] error
    /// otherwise), since call sites are recorded only then.
    pub fn watch(&self) -> Result<crate::watch::Watch, AllocError> {
        crate::watch::take(self)
    }

    /// The `n` call sites holding the most live bytes now, largest first.
    /// Needs history on.
    pub fn live_by_site(&self, n: usize) -> Result<Vec<crate::error::SiteUsage>, AllocError> {
        crate::watch::live_by_site(self, n)
    }

    /// The snapshot as the bytes of PyTorch's pickle (what
    /// [`dump_snapshot`](Self::dump_snapshot) writes). Taking it records a
    /// `snapshot` trace event while history is on, as PyTorch does, after its
    /// trace was copied: the event shows in the next snapshot's trace. A
    /// device numbered above `cuda:127`, which PyTorch's format cannot hold
    /// (its device index is an 8-bit integer), is an
    /// [`AllocError::DeviceOrdinalTooLarge`] that records nothing.
    pub fn snapshot_pickle(&self) -> Result<Vec<u8>, AllocError> {
        crate::diagnostics::snapshot_pickle(self)
    }

    /// Writes the snapshot to `path` in the format of PyTorch's
    /// `torch.cuda.memory._dump_snapshot`: open it with
    /// `python -m torch.cuda._memory_viz trace_plot <path> -o trace.html` or
    /// on <https://pytorch.org/memory_viz>. Its segments and blocks are always
    /// there; the trace and the blocks' frames (call sites) only when history
    /// is on. A device numbered above `cuda:127` is refused as
    /// [`snapshot_pickle`](Self::snapshot_pickle) refuses it, before `path`
    /// is created.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use strata_alloc::{AllocatorConfig, CachingAllocator, StreamId};
    /// use strata_alloc::driver::sim::SimDriver;
    ///
    /// let a = CachingAllocator::new(Arc::new(SimDriver::h100()), AllocatorConfig::default());
    /// a.record_history(Some(1000));
    /// let _x = a.allocate(4096, StreamId::DEFAULT).unwrap();
    /// let path = std::env::temp_dir().join("strata_doc_snapshot.pickle");
    /// a.dump_snapshot(&path).unwrap();
    /// assert!(std::fs::metadata(&path).unwrap().len() > 0);
    /// assert!(a.dump_snapshot("/no/such/dir/x.pickle").is_err());
    /// ```
    pub fn dump_snapshot(&self, path: impl AsRef<std::path::Path>) -> Result<(), AllocError> {
        crate::diagnostics::dump_snapshot_of(self, path.as_ref())
    }

    /// Writes a self-contained HTML report of this allocator to `path` (see
    /// [`report`](crate::report)).
    pub fn memory_report(&self, path: impl AsRef<std::path::Path>) -> Result<(), AllocError> {
        crate::diagnostics::memory_report_of(self, path.as_ref())
    }

    /// The HTML report as a string.
    pub fn memory_report_html(&self) -> String {
        crate::diagnostics::memory_report_html(self)
    }

    /// Runs `f` on the state while history is on, or fails with
    /// [`AllocError::HistoryOff`].
    pub(crate) fn with_history<T>(
        &self,
        what: &'static str,
        f: impl FnOnce(&State) -> T,
    ) -> Result<T, AllocError> {
        let st = self.state.lock();
        if !st.history.enabled() {
            return Err(AllocError::HistoryOff {
                device: self.device,
                what,
            });
        }
        Ok(f(&st))
    }

    /// Runs `f` on the state under the lock (diagnostics that read much).
    pub(crate) fn with_state<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        f(&mut self.lock())
    }

    /// The state's lock, for calls that may trace events (see
    /// [`StateGuard`]).
    #[inline]
    fn lock(&self) -> StateGuard<'_> {
        StateGuard {
            guard: Some(self.state.lock()),
            allocator: self,
        }
    }

    /// Registers `tracker`, called with every event the allocator traces:
    /// `alloc`, `free_requested`, `free_completed`, `segment_alloc`,
    /// `segment_free`, `segment_map`, `segment_unmap`, `oom` and `snapshot`,
    /// with the address, size and stream PyTorch's trace entries have,
    /// whether history is recording or not (PyTorch's
    /// `attachAllocatorTraceTracker`, which its NCCL process group uses to
    /// register each segment with the communication library). The entries
    /// carry the metadata of the thread that caused them
    /// ([`set_memory_metadata`](Self::set_memory_metadata)) but no call
    /// site; their `time_us` counts from the first tracker's attachment. Trackers run after the allocator's lock is
    /// released, before the call that caused the events returns (PyTorch
    /// runs them under its lock and forbids them to call it): a tracker may
    /// call the allocator, but the events its own calls cause are not passed
    /// to the trackers again (no recursion). A panic in a tracker propagates
    /// to the caller (an allocation whose event panicked is not handed out
    /// and stays allocated); the allocator goes on working. On a thread
    /// already unwinding from another panic (allocations dropped during
    /// it), where a second panic would abort the process, a tracker's panic
    /// is caught and dropped, and the other trackers still see the event.
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use strata_alloc::history::Action;
    /// use strata_alloc::{driver::sim::SimDriver, AllocatorConfig, CachingAllocator, StreamId};
    ///
    /// let conf = AllocatorConfig::parse("expandable_segments:False").unwrap();
    /// let a = CachingAllocator::new(Arc::new(SimDriver::h100()), conf);
    /// let segments = Arc::new(Mutex::new(Vec::new()));
    /// let seen = Arc::clone(&segments);
    /// a.attach_trace_tracker(move |e| {
    ///     if matches!(e.action, Action::SegmentAlloc | Action::SegmentFree) {
    ///         seen.lock().unwrap().push((e.action, e.size));
    ///     }
    /// });
    /// drop(a.allocate(500 << 20, StreamId::DEFAULT).unwrap());
    /// a.empty_cache().unwrap();
    /// assert_eq!(
    ///     *segments.lock().unwrap(),
    ///     [(Action::SegmentAlloc, 500 << 20), (Action::SegmentFree, 500 << 20)]
    /// );
    /// ```
    pub fn attach_trace_tracker(&self, tracker: impl Fn(&TraceEntry) + Send + Sync + 'static) {
        let mut trackers = self.trace_trackers.lock();
        trackers.push(Arc::new(tracker));
        let mut st = self.state.lock();
        st.tracking = true;
        st.refresh_observed();
        st.tracker_epoch.get_or_insert_with(std::time::Instant::now);
    }

    /// Removes every tracker registered with
    /// [`attach_trace_tracker`](Self::attach_trace_tracker).
    pub fn clear_trace_trackers(&self) {
        let mut trackers = self.trace_trackers.lock();
        trackers.clear();
        let mut st = self.state.lock();
        st.tracking = false;
        st.refresh_observed();
        st.tracked.clear();
    }

    /// Passes `events` to the trace trackers (outside the state's lock),
    /// unless this thread is already running them for this allocator.
    #[cold]
    fn dispatch_tracked(&self, events: Vec<TraceEntry>) {
        let entered = TRACKING.with(|t| {
            let mut t = t.borrow_mut();
            if t.contains(&self.id) {
                false
            } else {
                t.push(self.id);
                true
            }
        });
        if !entered {
            return;
        }
        struct Leave(u64);
        impl Drop for Leave {
            fn drop(&mut self) {
                TRACKING.with(|t| t.borrow_mut().retain(|&i| i != self.0));
            }
        }
        let _leave = Leave(self.id);
        let trackers: Vec<TraceTracker> = self.trace_trackers.lock().clone();
        // On a thread already unwinding from a panic (an allocation dropped
        // during it), a tracker's panic cannot propagate: leaving a
        // destructor, it would abort the process. It is caught and dropped
        // there, and the other trackers still see every event.
        let unwinding = std::thread::panicking();
        for e in &events {
            for t in &trackers {
                if unwinding {
                    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| t(e)));
                } else {
                    t(e);
                }
            }
        }
    }

    /// Removes every observer registered with [`on_oom`](Self::on_oom).
    pub fn clear_oom_observers(&self) {
        self.oom_observers.lock().clear();
    }

    /// Calls the out-of-memory observers (outside the state's lock) when `e`
    /// is an out-of-memory error; returns `e`.
    ///
    /// An out-of-memory error raised while this thread runs this allocator's
    /// observers (an observer that allocates again, directly or through
    /// tensor code) is returned to that observer without calling the
    /// observers again: calling them would recurse until the stack overflows.
    #[cold]
    fn notify_oom(&self, e: AllocError) -> AllocError {
        if let AllocError::OutOfMemory(oom) = &e {
            let Some(_notifying) = NotifyingGuard::enter(self.id) else {
                return e;
            };
            let observers: Vec<OomObserver> = self.oom_observers.lock().clone();
            if !observers.is_empty() {
                let segments = crate::snapshot::segments(&self.state.lock());
                // As with the trace trackers: on a thread already unwinding
                // from a panic (an allocation made by a destructor), an
                // observer's panic would abort the process; it is caught and
                // dropped there, and the other observers are still called.
                let unwinding = std::thread::panicking();
                for o in observers {
                    if unwinding {
                        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                            o(oom, &segments)
                        }));
                    } else {
                        o(oom, &segments);
                    }
                }
            }
        }
        e
    }

    // ----- checks used by tests ---------------------------------------------------------

    /// Recounts every statistic from the blocks and compares it with the running
    /// figures; also checks that the blocks of each segment tile it and that the
    /// free indexes hold exactly the free blocks. Returns a description of the
    /// first inconsistency.
    pub fn check_consistency(&self) -> Result<(), String> {
        let st = self.state.lock();
        crate::snapshot::check(&st, self.page)
    }

    /// The expandable segments, over the counting driver's virtual memory.
    fn expandable_space(&self) -> ExpandableSpace<'_> {
        ExpandableSpace {
            driver: &self.counted,
            vm: self
                .counted
                .virtual_memory()
                .expect("expandable segments are only enabled when the driver has virtual memory"),
            page: self.page,
            capacity: self.capacity,
            device: self.device,
        }
    }

    /// A summary of the statistics in PyTorch's `memory_summary()` layout:
    /// each metric for all pools, then the large pool, then the small pool.
    pub fn memory_summary(&self) -> String {
        crate::snapshot::summary(self.device, &self.memory_stats(), false)
    }

    /// [`memory_summary`](Self::memory_summary) without the per-pool rows
    /// (PyTorch's `memory_summary(abbreviated=True)`).
    pub fn memory_summary_abbreviated(&self) -> String {
        crate::snapshot::summary(self.device, &self.memory_stats(), true)
    }

    /// The largest free cached block, in bytes.
    pub fn largest_free_block(&self) -> u64 {
        let st = self.state.lock();
        st.streams
            .iter()
            .flat_map(|s| s.free.iter())
            .flat_map(|i| i.all())
            .map(|e| e.size)
            .max()
            .unwrap_or(0)
    }
}

/// Cached free memory per stream and pool: total and largest block.
fn free_by_pool(st: &State) -> Vec<crate::error::PoolFree> {
    let mut out = Vec::new();
    for stream in &st.streams {
        for (i, idx) in stream.free.iter().enumerate() {
            let (mut free, mut largest) = (0, 0);
            for e in idx.all() {
                if st.blocks[e.block].mapped {
                    free += e.size;
                    largest = largest.max(e.size);
                }
            }
            if free > 0 {
                out.push(crate::error::PoolFree {
                    stream: stream.handle,
                    pool: if i == PoolKind::Small as usize {
                        "small"
                    } else {
                        "large"
                    },
                    free,
                    largest,
                });
            }
        }
    }
    out
}

#[inline]
fn apply_delta(a: &mut crate::stats::StatArray, pool: StatType, d: i64) {
    if d > 0 {
        a.increase(pool, d);
    } else if d < 0 {
        a.decrease(pool, -d);
    }
}

/// [`round_size`] under a configuration without a division count above 1:
/// a multiple of [`MIN_BLOCK_SIZE`], at least one.
#[inline]
fn round_plain(size: u64) -> u64 {
    size.max(1)
        .div_ceil(MIN_BLOCK_SIZE)
        .saturating_mul(MIN_BLOCK_SIZE)
}

/// PyTorch's `round_size` under `config`. The arithmetic saturates where
/// PyTorch's wraps: a division count of 2^55 or more (512·d past `u64::MAX`)
/// never applies, and a size whose rounding does not fit a `u64` (only sizes
/// of 1 EiB or more, which `allocate_raw` refuses first) gives `u64::MAX`.
#[inline]
fn round_size(config: &AllocatorConfig, size: u64) -> u64 {
    if size < MIN_BLOCK_SIZE {
        return MIN_BLOCK_SIZE;
    }
    let d = config.divisions_for(size);
    if d > 1 && size > MIN_BLOCK_SIZE.saturating_mul(d) {
        if size.is_power_of_two() {
            return size;
        }
        let p = 1u64 << (63 - size.leading_zeros());
        let step = p >> d.trailing_zeros();
        if step == 0 {
            return p.saturating_mul(2);
        }
        return size.div_ceil(step).saturating_mul(step);
    }
    size.div_ceil(MIN_BLOCK_SIZE).saturating_mul(MIN_BLOCK_SIZE)
}

/// The error for a driver that handed out `size` bytes at `ptr`, a range
/// that wraps past the end of the 64-bit address space.
pub(crate) fn wrapping_range(call: &'static str, ptr: DevicePtr, size: u64) -> DriverError {
    DriverError::Call {
        call,
        message: format!(
            "returned {ptr:#x} for {size} bytes, a range that wraps past the end of the 64-bit address space; the driver must return a range that fits below 2^64 (or report out of memory)"
        ),
    }
}

#[cfg(test)]
mod rounding_tests {
    use super::*;

    /// The hot path's rounding without division counts is `round_size`'s.
    #[test]
    fn plain_rounding_is_round_size_without_divisions() {
        let ones = AllocatorConfig {
            roundup_power2_divisions: [1; crate::config::ROUNDUP_INTERVALS],
            ..AllocatorConfig::default()
        };
        for config in &[AllocatorConfig::default(), ones] {
            let mut sizes: Vec<u64> = (0..5000).collect();
            for shift in 9..64 {
                let p = 1u64 << shift;
                sizes.extend([p - 1, p, p + 1, p + 511, p + 512, p + 513]);
            }
            sizes.extend([u64::MAX - 511, u64::MAX - 1, u64::MAX]);
            for size in sizes {
                assert_eq!(round_plain(size), round_size(config, size), "{size}");
            }
        }
    }
}
