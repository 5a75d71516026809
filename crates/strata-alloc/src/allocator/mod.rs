//! The caching allocator of one device: [`CachingAllocator`], its
//! construction and settings here, the rest by concern:
//!
//! * `hot_path.rs`: [`CachingAllocator::allocate_raw`] and
//!   [`CachingAllocator::free_raw`]: take the lock, reclaim blocks whose
//!   cross-stream events completed (only when some are pending), round the
//!   size (`sizes.rs`), take the best-fitting free block of the stream's pool
//!   and split it, update the statistics; a free merges the block with its
//!   free neighbours. No driver call is made there.
//! * `slow_path.rs`: a request no cached block fits, in the order PyTorch
//!   uses: garbage collection, a device allocation (or a growth of an
//!   expandable segment, `crate::expandable`), releasing oversize cached
//!   blocks, releasing every cached block and retrying; `release.rs` gives
//!   memory back to the driver; `oom.rs` builds the typed out-of-memory error
//!   and calls its observers.
//! * `events.rs`: blocks used on other streams wait for their events before
//!   reuse; `uncached.rs`: allocation while caching is off.
//! * `introspection.rs`: statistics, history, snapshots and reports;
//!   `tracking.rs`: the trace trackers called with every traced event, and
//!   the memory-usage reporters called with every allocation and free.

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
    /// Closures called when `throw_on_cudamalloc_oom` rejects a request
    /// (outside the state's lock).
    oom_rejection_observers: Mutex<Vec<OomRejectionObserver>>,
    /// Closures called with every trace event (outside the state's lock).
    trace_trackers: Mutex<Vec<TraceTracker>>,
    /// Closures called with every allocation, free and out-of-memory
    /// failure (outside the state's lock).
    usage_reporters: Mutex<Vec<MemoryUsageReporter>>,
}

/// A closure called with every event the allocator traces (PyTorch's
/// `AllocatorTraceTracker`): see [`CachingAllocator::attach_trace_tracker`].
pub type TraceTracker = Arc<dyn Fn(&TraceEntry) + Send + Sync>;

/// A closure called with every allocation, free and out-of-memory failure
/// (PyTorch's memory-usage reporting to its profiler): see
/// [`CachingAllocator::attach_memory_usage_reporter`].
pub type MemoryUsageReporter = Arc<dyn Fn(&MemoryUsage) + Send + Sync>;

pub use tracking::MemoryUsage;

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
        if g.tracked.is_empty() && g.usage.is_empty() {
            return;
        }
        let events = std::mem::take(&mut g.tracked);
        let usage = std::mem::take(&mut g.usage);
        drop(g);
        self.allocator.dispatch_tracked(events, usage);
    }
}

/// A closure called when an allocation fails for lack of memory, with the
/// error and the allocator's segments at that moment.
pub type OomObserver = Arc<dyn Fn(&OutOfMemory, &[SegmentSnapshot]) + Send + Sync>;

/// A closure called when `throw_on_cudamalloc_oom` rejects a request
/// (PyTorch's `OomRejectionObserver`): see
/// [`CachingAllocator::on_oom_rejection`].
pub type OomRejectionObserver = Arc<dyn Fn(&OomRejection) + Send + Sync>;

/// What an [`OomRejectionObserver`] is told: the arguments of PyTorch's
/// `OomRejectionObserver(device, alloc_size, total_allocated,
/// device_total)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OomRejection {
    /// The allocator's device.
    pub device: Device,
    /// The device allocation the request needed (PyTorch's
    /// `AllocParams::alloc_size`: `get_allocation_size` of the rounded
    /// request, whatever the segment kind), not the request itself.
    pub alloc_size: u64,
    /// The memory the allocator held from the device before the request
    /// (PyTorch's `total_allocated_memory`: the reserved bytes).
    pub total_allocated: u64,
    /// The device's total memory.
    pub device_total: u64,
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

mod events;
mod hot_path;
mod introspection;
mod oom;
mod release;
mod sizes;
mod slow_path;
mod tracking;
mod uncached;

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
        let fraction = config.per_process_memory_fraction;
        let settings = Settings::new(config, vm_page.is_some(), capacity, fraction);
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
            oom_rejection_observers: Mutex::new(Vec::new()),
            trace_trackers: Mutex::new(Vec::new()),
            usage_reporters: Mutex::new(Vec::new()),
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
    /// to the large segment size; every other key keeps its value unless
    /// named. A bad string is a typed error and changes nothing.
    ///
    /// As in PyTorch, `per_process_memory_fraction` in the string changes the
    /// configuration's fraction, which `throw_on_cudamalloc_oom` measures
    /// against and allocators created later start with, but not the memory
    /// fraction in force here ([`memory_fraction`](Self::memory_fraction)),
    /// which only [`set_memory_fraction`](Self::set_memory_fraction) (and
    /// [`apply_config`](Self::apply_config)) change.
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
        let fraction = st.settings.fraction;
        self.install_config(&mut st, config, fraction);
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
        let fraction = config.per_process_memory_fraction;
        self.install_config(&mut st, config, fraction);
        Ok(())
    }

    /// Makes `config` the configuration in force under the held lock.
    /// The memory fraction in force is `fraction`.
    fn install_config(&self, st: &mut State, config: AllocatorConfig, fraction: Option<f64>) {
        st.stats.max_split_size = config.max_split_size_stat();
        st.settings = Settings::new(config, self.has_vm, self.capacity, fraction);
    }

    /// Limits the memory this process may reserve on the device to `fraction`
    /// of its capacity (PyTorch's `set_per_process_memory_fraction`); 1 removes
    /// the limit. Memory already reserved beyond a new, lower limit stays
    /// reserved; requests that would need more fail with an out-of-memory error
    /// naming the fraction. A fraction outside [0, 1] (or NaN) is a typed error
    /// and changes nothing. The limit is `fraction × capacity` rounded to the
    /// nearest byte, as PyTorch 2.15 computes it. The configuration's
    /// `per_process_memory_fraction` ([`config`](Self::config)) is left as it
    /// is, as PyTorch leaves `CUDAAllocatorConfig`'s.
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
        let config = st.settings.config.clone();
        st.settings = Settings::new(config, self.has_vm, self.capacity, Some(fraction));
        Ok(())
    }

    /// The fraction of the device's memory this process may reserve (1 when
    /// unlimited; PyTorch's `get_per_process_memory_fraction`): the one in
    /// force, from the configuration the allocator was built with or
    /// [`set_memory_fraction`](Self::set_memory_fraction), not from a later
    /// settings string.
    pub fn memory_fraction(&self) -> f64 {
        self.state.lock().settings.fraction.unwrap_or(1.0)
    }

    /// Free and total memory of the device, as the driver reports them now
    /// (`cudaMemGetInfo`; memory used by other processes counts as used). Not
    /// counted in [`driver_calls`](Self::driver_calls).
    pub fn mem_get_info(&self) -> Result<MemInfo, AllocError> {
        self.driver.mem_get_info().map_err(|e| self.driver_error(e))
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
        // A look-up, not a scan of every stream seen: a caller asking about
        // each of thousands of streams stays linear.
        st.stream_entries
            .get(&(stream, 0))
            .and_then(|&i| st.streams[i as usize].reserve_class.clone())
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
    /// name that a settings string could not hold (empty, or with `,`, `:`,
    /// `[`, `]` or whitespace), or a fraction that is not positive and
    /// finite, is a typed error and changes nothing.
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
                accepted: "a class name without ',', ':', '[', ']' or spaces (which a settings string could not hold), e.g. serving",
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
        let fraction = st.settings.fraction;
        self.install_config(&mut st, config, fraction);
        Ok(())
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
}

/// The error for a driver that handed out `size` bytes at address 0: no
/// CUDA call hands out a null address, and an allocation there would read as
/// the empty handle of a zero-byte request (address 0).
pub(crate) fn null_range(call: &'static str, size: u64) -> DriverError {
    DriverError::Call {
        call,
        message: format!(
            "returned a null address (0x0) for {size} bytes; the driver must return a non-null address (or report out of memory)"
        ),
    }
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
