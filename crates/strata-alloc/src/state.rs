//! What the allocator's lock guards: the blocks, the per-stream free indexes
//! and pending events, the expandable segments' page tables, the statistics and
//! the history. The allocator (`allocator/`), the expandable segments
//! (`expandable/`) and the snapshots (`snapshot.rs`) all operate on this
//! state; it depends on none of them.

use crate::block::{Blocks, PoolKind, NONE};
use crate::config::AllocatorConfig;
use crate::driver::{DevicePtr, EventHandle, PhysHandle, StreamId};
use crate::history::{Action, History, LiveAlloc, Recording};
use crate::pool::{Entry, FreeIndex};
use crate::repeats::Repeats;
use crate::stats::{MemoryStats, StatArray};
use std::collections::{BTreeMap, HashMap, VecDeque};

/// One reserved address range and the physical pages mapped into it.
pub(crate) struct ExpandableSegment {
    pub base: u64,
    pub size: u64,
    pub stream: u32,
    pub pool: PoolKind,
    /// The physical page behind each page of the range, if mapped.
    pub handles: Vec<Option<PhysHandle>>,
    /// The block at `base` (never merged away: it has no predecessor).
    pub head: u32,
    pub mapped_pages: u64,
    /// Stitched mappings kept in this range, by page index: the driver still
    /// maps a physical page there (with the stamp of the moment it was left),
    /// but the page is in use at another address, so the blocks see unmapped
    /// space. A page moving back here costs no driver call (see
    /// `expandable/`).
    pub stitched: BTreeMap<u32, (PhysHandle, u64)>,
}

/// The key that set a stream's expandable-segment reserve
/// ([`State::segment_reserve`]), as an out-of-memory message names it.
#[derive(Clone, Copy, Debug)]
pub(crate) enum ReserveKey<'a> {
    /// `expandable_segments_reserve_by_class`, for the stream's class.
    Class(&'a str),
    /// `expandable_segments_reserve`.
    Global,
}

impl std::fmt::Display for ReserveKey<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReserveKey::Class(k) => write!(
                f,
                "expandable_segments_reserve_by_class (stream reserve class '{k}')"
            ),
            ReserveKey::Global => f.write_str("expandable_segments_reserve"),
        }
    }
}

/// The configuration in force and what follows from it. Replaced as a whole by
/// `set_allocator_settings`; the memory fraction alone by `set_memory_fraction`.
pub(crate) struct Settings {
    pub config: AllocatorConfig,
    /// Whether new memory comes from expandable segments.
    pub expandable: bool,
    /// The per-process memory fraction in force (PyTorch's device-level
    /// `setMemoryFraction`): the configuration's when the allocator was
    /// built (or by `apply_config`), then `set_memory_fraction`'s. A settings
    /// string given at run time does not change it, as in PyTorch.
    pub fraction: Option<f64>,
    /// The fraction's limit in bytes, if below 1: PyTorch 2.15's
    /// `setMemoryFraction` rounds `fraction × capacity` to the nearest byte
    /// (halves away from zero).
    pub allowed_max: Option<u64>,
    /// `throw_on_cudamalloc_oom`'s limit in bytes, when the key is on: the
    /// configuration's `per_process_memory_fraction` (1 when unset) times
    /// the capacity, truncated, as PyTorch's `alloc_block` computes it from
    /// `CUDAAllocatorConfig` on each request; checked only once the request
    /// is within [`allowed_max`](Self::allowed_max).
    pub reject_limit: Option<u64>,
    /// The garbage-collection threshold, when a memory fraction makes it apply.
    pub gc_threshold: Option<f64>,
    /// No `roundup_power2_divisions` count above 1: every request rounds to
    /// a multiple of 512 bytes, without looking its count up.
    pub plain_rounding: bool,
}

impl Settings {
    /// The settings of `config` on a device of `capacity` bytes whose driver
    /// has (`has_vm`) or lacks virtual memory.
    ///
    /// `fraction` is the memory fraction in force ([`Settings::fraction`]),
    /// which need not be the configuration's.
    pub fn new(
        config: AllocatorConfig,
        has_vm: bool,
        capacity: u64,
        fraction: Option<f64>,
    ) -> Settings {
        let expandable = config.expandable_segments.unwrap_or(true) && has_vm;
        let allowed_max = fraction
            .filter(|f| *f < 1.0)
            .map(|f| (f * capacity as f64).round() as u64);
        let reject_limit = config
            .throw_on_cudamalloc_oom
            .then(|| (config.per_process_memory_fraction.unwrap_or(1.0) * capacity as f64) as u64);
        let gc_threshold = config
            .garbage_collection_threshold
            .filter(|_| allowed_max.is_some());
        let plain_rounding = config.roundup_power2_divisions.iter().all(|&d| d <= 1);
        Settings {
            config,
            expandable,
            fraction,
            allowed_max,
            reject_limit,
            gc_threshold,
            plain_rounding,
        }
    }

    /// Whether a block of `size` bytes is oversize (at least `max_split_size`).
    #[inline]
    pub fn is_oversize(&self, size: u64) -> bool {
        self.config.max_split_size.is_some_and(|m| size >= m)
    }
}

/// Per-stream state: the two free indexes, the events recorded on this stream
/// for blocks of other streams, and the stream's expandable segments.
pub(crate) struct StreamState {
    pub handle: StreamId,
    pub free: [FreeIndex; 2],
    pub events: VecDeque<(EventHandle, u32)>,
    pub expandable: [Vec<u32>; 2],
    /// How far this stream's queued work is known to have finished, for page
    /// recycling (see `expandable/`).
    pub fence: crate::expandable::Fence,
    /// Bytes allocated on this stream (blocks, as `allocated_bytes` counts
    /// them) and their high mark: the stream's own peak, for the hold-or-move
    /// rule (`repeats.rs`).
    pub allocated: u64,
    pub allocated_peak: HighMark,
    /// The class whose `expandable_segments_reserve_by_class` entry sizes
    /// this stream's new expandable segments.
    pub reserve_class: Option<String>,
    /// The private memory pool this entry belongs to (`mempool.rs`): 0 for
    /// the device's default pools. A private pool has one entry per stream
    /// it was used on, with the stream's `handle`; its blocks live in that
    /// entry's free indexes and never serve another pool.
    pub mempool: u64,
    /// The private pool's `no_split`: its blocks are handed out whole.
    pub no_split: bool,
}

impl StreamState {
    /// An entry for `handle` in pool `mempool` (0: the default pools).
    fn new(handle: StreamId, mempool: u64, no_split: bool) -> StreamState {
        StreamState {
            handle,
            free: [FreeIndex::default(), FreeIndex::default()],
            events: VecDeque::new(),
            expandable: [Vec::new(), Vec::new()],
            fence: Default::default(),
            allocated: 0,
            allocated_peak: HighMark::default(),
            reserve_class: None,
            mempool,
            no_split,
        }
    }
}

/// A private memory pool's books (`mempool.rs`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct PrivatePool {
    /// Its id, the second of PyTorch's `(0, n)`.
    pub id: u64,
    /// The `MemPool` handle (1 while it lives) plus one per thread routed to
    /// it now; at 0 the pool is freeable: `empty_cache` releases its free
    /// segments, and it is forgotten once it has none.
    pub use_count: usize,
    /// Its blocks are never split.
    pub no_split: bool,
    /// A request the default pools cannot serve may take one of its free
    /// blocks (while the pool is in use).
    pub use_on_oom: bool,
}

/// A thread's allocations going to a private pool (`MemPool::activate`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct PoolRoute {
    /// Identifies the route (its guard removes it).
    pub token: u64,
    pub pool: u64,
    pub thread: std::thread::ThreadId,
}

/// The highest figure a byte count ever reached (never reset, unlike the
/// statistics' peaks) and the free clock when it last rose to it: when a
/// peak was set, for the hold-or-move rule (`repeats.rs`).
#[derive(Clone, Copy, Default)]
pub(crate) struct HighMark {
    pub bytes: u64,
    pub at: u64,
}

impl HighMark {
    /// The count is `bytes` at free clock `clock`.
    #[inline]
    pub fn observe(&mut self, bytes: u64, clock: u64) {
        if bytes > self.bytes {
            *self = HighMark { bytes, at: clock };
        }
    }

    /// The mark as it would be if the count reached `bytes` at `now`.
    #[inline]
    pub fn with(self, bytes: u64, now: u64) -> HighMark {
        let mut m = self;
        m.observe(bytes, now);
        m
    }
}

impl StreamState {
    /// A block of `size` bytes was allocated on this stream at free clock
    /// `clock`: its allocated bytes and, when they rise above it, its peak.
    #[inline]
    pub fn allocated_grew(&mut self, size: u64, clock: u64) {
        self.allocated += size;
        self.allocated_peak.observe(self.allocated, clock);
    }

    /// A block of `size` bytes allocated on this stream was freed.
    #[inline]
    pub fn allocated_shrank(&mut self, size: u64) {
        self.allocated = self.allocated.saturating_sub(size);
    }
}

/// Everything behind the allocator's lock.
pub(crate) struct State {
    pub settings: Settings,
    pub blocks: Blocks,
    pub streams: Vec<StreamState>,
    /// The index in `streams` of each (stream, private pool) entry (0: the
    /// default pools), so that finding one does not scan them all
    /// ([`pool_stream_index`]).
    pub stream_entries: std::collections::HashMap<(StreamId, u64), u32>,
    /// The entries of forgotten private pools, taken again lowest first.
    pub vacant_entries: std::collections::BTreeSet<u32>,
    /// The stream looked up last and its dense index; the index is
    /// [`NONE`] until a stream is registered (every `StreamId` is a valid
    /// stream, so the handle alone cannot mark "none yet").
    pub last_stream: (StreamId, u32),
    /// Ordinary segments by base address: `(head block, size)`.
    pub segments: HashMap<DevicePtr, u32>,
    /// Every range held from the driver's `malloc` (ordinary segments, and
    /// allocations made while caching is off), by base address: its size.
    /// A new range from `malloc` overlapping one of these (or an expandable
    /// segment's reservation) is a driver's bug, refused.
    pub malloced: BTreeMap<DevicePtr, u64>,
    pub expandable: Vec<Option<ExpandableSegment>>,
    pub stats: MemoryStats,
    pub event_pool: Vec<EventHandle>,
    pub pending_events: usize,
    /// `get_free_block` calls on the default pools, per pool kind
    /// (garbage-collection ageing; private pools' searches are not counted).
    pub gc_counts: [u64; 2],
    /// Expandable segments: for each physical page with stitched mappings,
    /// where they are (segment index, page index).
    pub aliases: rustc_hash::FxHashMap<PhysHandle, Vec<(u32, u32)>>,
    /// Expandable segments: where each physical page is live (segment index,
    /// page index), the reverse of the segments' `handles`.
    pub live: rustc_hash::FxHashMap<PhysHandle, (u32, u32)>,
    /// Expandable segments: the stitched mappings (segment index, page index)
    /// that work queued on a stream may still use, with that stream and the
    /// free clock of the block the page left: a page moved to a block of the
    /// same stream without waiting for the stream's fence. Such a mapping is
    /// unmapped only once the stream's fence has passed that moment.
    pub busy_stitched: rustc_hash::FxHashMap<(u32, u32), (u32, u64)>,
    /// Physical pages of expandable segments already taken out of every
    /// block, whose `release` failed: retried by the next `empty_cache` (and
    /// the full release before an out-of-memory error) instead of leaking in
    /// the driver.
    pub unreleased: Vec<PhysHandle>,
    /// Mappings `(address, bytes)` the allocator took back from no block
    /// but could not unmap (an `unmap` that failed while undoing a growth
    /// whose `map` or `set_access` failed, or while dropping a stitched
    /// mapping); their pages wait in [`unreleased`](Self::unreleased), which
    /// cannot release a mapped page. Unmapped again before any growth maps
    /// over them and by the next release of the cache, which gives a
    /// segment's range back only once none lies in it: forgotten, they held
    /// the page for good and made every later `empty_cache` fail.
    pub stray_mappings: Vec<(DevicePtr, u64)>,
    /// Every stitched mapping by the stamp of the moment it was left, oldest
    /// first: the least recently used go first when the bound is exceeded.
    pub stitch_lru: BTreeMap<u64, (u32, u32)>,
    /// The clock behind the stamps of `stitch_lru`.
    pub stitch_clock: u64,
    /// A fingerprint of the last dozen requests (`repeats::mix_request`).
    pub recent_requests: u64,
    /// Expandable segments: the growth contexts seen at the current peak, to
    /// recognise a workload going round again (see `repeats.rs`).
    pub repeats: Repeats,
    /// Recorded events, when recording is on.
    pub history: History,
    pub free_clock: u64,
    /// The high mark of allocated bytes, device-wide: when the workload's
    /// peak was set.
    pub allocated_high: HighMark,
    /// Whether an allocation of at least one page (the expandable segments'
    /// granularity) has been freed yet (the margin of expandable segments
    /// keeps its full floor until then).
    pub freed_a_page: bool,
    /// The private memory pools that exist (in use, or freeable with
    /// segments left).
    pub mempools: Vec<PrivatePool>,
    /// Threads routed to private pools, most recent last (the last route of
    /// a thread wins, as PyTorch scans its list from the back).
    pub pool_routes: Vec<PoolRoute>,
    /// The last route token handed out.
    pub next_route_token: u64,
    /// Caching is off (PyTorch's `caching_allocator_enable(False)`): each
    /// request goes straight to the driver (`allocator/uncached.rs`).
    pub caching_disabled: bool,
    /// The live allocations made while caching was off: address, and its
    /// size and serial number (the handle's `generation`, so that a handle
    /// kept after its free does not match a later allocation the driver
    /// put at the same address).
    pub uncached: HashMap<DevicePtr, (u64, u32)>,
    /// The serial number of the last allocation made while caching was off.
    pub uncached_serial: u32,
    /// Trace trackers are attached: every trace event is queued in
    /// `tracked` for them (`CachingAllocator::attach_trace_tracker`).
    pub tracking: bool,
    /// History is recording or trackers are attached: the hot path's one
    /// check for whether events are wanted at all (`refresh_observed`).
    pub observed: bool,
    /// Events waiting to be passed to the trace trackers once the lock is
    /// released.
    pub tracked: Vec<crate::history::TraceEntry>,
    /// When the first trace tracker was attached (the events' `time_us`
    /// count from it).
    pub tracker_epoch: Option<std::time::Instant>,
    /// Memory-usage reporters are attached: every allocation, free and
    /// out-of-memory failure is queued in `usage` for them
    /// (`CachingAllocator::attach_memory_usage_reporter`).
    pub reporting: bool,
    /// Reports waiting to be passed to the memory-usage reporters once the
    /// lock is released.
    pub usage: Vec<crate::allocator::MemoryUsage>,
}

impl State {
    /// An empty state under `settings`.
    pub fn new(settings: Settings) -> State {
        let stats = MemoryStats {
            max_split_size: settings.config.max_split_size_stat(),
            ..MemoryStats::default()
        };
        State {
            settings,
            blocks: Blocks::default(),
            streams: Vec::new(),
            stream_entries: std::collections::HashMap::new(),
            vacant_entries: std::collections::BTreeSet::new(),
            last_stream: (StreamId(u64::MAX), NONE),
            segments: HashMap::new(),
            malloced: BTreeMap::new(),
            expandable: Vec::new(),
            stats,
            event_pool: Vec::new(),
            pending_events: 0,
            gc_counts: [0; 2],
            aliases: Default::default(),
            live: Default::default(),
            busy_stitched: Default::default(),
            unreleased: Vec::new(),
            stray_mappings: Vec::new(),
            stitch_lru: BTreeMap::new(),
            stitch_clock: 0,
            recent_requests: 0,
            repeats: Repeats::default(),
            history: History::default(),
            free_clock: 0,
            allocated_high: HighMark::default(),
            freed_a_page: false,
            mempools: Vec::new(),
            pool_routes: Vec::new(),
            next_route_token: 0,
            caching_disabled: false,
            uncached: HashMap::new(),
            uncached_serial: 0,
            tracking: false,
            observed: false,
            tracked: Vec::new(),
            tracker_epoch: None,
            reporting: false,
            usage: Vec::new(),
        }
    }

    /// The range the allocator holds (from `malloc`, or an expandable
    /// segment's reservation) that `[ptr, ptr + size)` overlaps, if any, as
    /// `(base, size)`. `ptr + size` must not wrap.
    pub fn held_range_overlapping(&self, ptr: DevicePtr, size: u64) -> Option<(DevicePtr, u64)> {
        let end = ptr + size;
        if let Some((&base, &held)) = self.malloced.range(..end).next_back() {
            if base + held > ptr {
                return Some((base, held));
            }
        }
        self.expandable
            .iter()
            .flatten()
            .find(|e| e.base < end && ptr < e.base + e.size)
            .map(|e| (e.base, e.size))
    }

    /// The books of private pool `id`, if it still exists.
    pub fn mempool(&self, id: u64) -> Option<&PrivatePool> {
        self.mempools.iter().find(|p| p.id == id)
    }

    /// The address range a new expandable segment of dense stream `s`
    /// reserves on a device of `capacity` bytes with pages of `page` bytes, in
    /// whole pages, and the key that set it: the stream's class in
    /// `expandable_segments_reserve_by_class`, else
    /// `expandable_segments_reserve`, each at most the default, which is the
    /// device's capacity and an eighth, as PyTorch reserves (`None`: the
    /// default).
    pub fn segment_reserve(
        &self,
        s: u32,
        capacity: u64,
        page: u64,
    ) -> (u64, Option<ReserveKey<'_>>) {
        // Saturating: a (simulated) capacity near 2^64 must not wrap.
        let full = capacity.saturating_add(capacity / 8);
        let full = full
            .div_ceil(page)
            .checked_mul(page)
            .unwrap_or(full / page * page);
        let c = &self.settings.config;
        let class = self.streams[s as usize].reserve_class.as_deref();
        let by_class = class.and_then(|k| {
            c.expandable_segments_reserve_by_class
                .iter()
                .find(|(name, _)| name == k)
        });
        let (r, key) = match (by_class, c.expandable_segments_reserve) {
            (Some((k, r)), _) => (*r, ReserveKey::Class(k)),
            (None, Some(r)) => (r, ReserveKey::Global),
            (None, None) => return (full, None),
        };
        let bytes = r.bytes(capacity).min(full).div_ceil(page).max(1) * page;
        (bytes, Some(key))
    }

    /// Whether `extra` more reserved bytes stay within the per-process memory
    /// fraction (saturating: an `extra` near `u64::MAX`, a segment size set
    /// near 2^64 bytes, never wraps back under the limit), and within
    /// [`MAX_RESERVED`], the most the statistics can count.
    #[inline]
    pub fn fits_fraction(&self, extra: u64) -> bool {
        let total = self.reserved().saturating_add(extra);
        total <= MAX_RESERVED && self.settings.allowed_max.is_none_or(|max| total <= max)
    }

    /// Whether a request on dense stream `s` is served by expandable
    /// segments: the setting is on and the stream is not routed to a private
    /// pool, whose segments are always ordinary (mempool.rs).
    #[inline]
    pub fn serves_expandable(&self, s: u32) -> bool {
        self.settings.expandable && self.streams[s as usize].mempool == 0
    }

    #[inline]
    pub fn reserved(&self) -> u64 {
        self.stats.reserved_bytes.all().current as u64
    }

    /// The reserved bytes of the private pool that dense stream `s` belongs
    /// to (`reserved_bytes_by_private_pools`); `None` for the default pools.
    pub fn private_pool_reserved(&mut self, s: u32) -> Option<&mut StatArray> {
        let mempool = self.streams[s as usize].mempool;
        (mempool != 0).then(|| {
            self.stats
                .reserved_bytes_by_private_pools
                .entry(crate::mempool::pool_id(mempool))
                .or_default()
        })
    }

    /// Records an event about block-sized memory of dense stream `s` (and
    /// queues it for the trace trackers).
    #[inline]
    pub fn record(&mut self, action: Action, addr: u64, size: u64, s: u32) {
        if self.history.enabled() {
            let stream = self.streams[s as usize].handle;
            self.history.push(action, addr, size, stream);
        }
        if self.tracking {
            let stream = self.streams[s as usize].handle;
            self.track(action, addr, size, stream);
        }
    }

    /// Queues an event for the trace trackers (when some are attached).
    #[inline]
    pub fn track(&mut self, action: Action, addr: u64, size: u64, stream: StreamId) {
        if self.tracking {
            self.track_now(action, addr, size, stream);
        }
    }

    #[cold]
    fn track_now(&mut self, action: Action, addr: u64, size: u64, stream: StreamId) {
        let time_us = self.tracker_epoch.map_or(0, |t| {
            u64::try_from(t.elapsed().as_micros()).unwrap_or(u64::MAX)
        });
        let user_metadata = if self.history.metadata_seen {
            crate::history::thread_metadata(self.history.owner)
        } else {
            None
        };
        self.tracked.push(crate::history::TraceEntry {
            action,
            addr,
            size,
            stream,
            time_us,
            site: None,
            user_metadata,
        });
    }

    /// Queues a free event of block `id` (its address, the caller's size,
    /// its stream) for the trace trackers.
    #[inline]
    pub fn track_block(&mut self, action: Action, id: u32) {
        if self.tracking {
            let b = &self.blocks[id];
            let (addr, size) = (b.ptr, b.requested);
            let stream = self.streams[b.stream as usize].handle;
            self.track_now(action, addr, size, stream);
        }
    }

    /// Records the `free_requested` or `free_completed` of block `id`.
    #[inline]
    pub fn record_free(&mut self, action: Action, id: u32) {
        if self.history.enabled() {
            let b = &mut self.blocks[id];
            let stream = self.streams[b.stream as usize].handle;
            self.history.push_free(action, b, stream);
        }
    }

    /// Turns history on or off (see [`History::set`]), forgetting the
    /// allocations recorded in the blocks when the record is cleared.
    pub fn set_history(&mut self, capacity: Option<usize>, rec: Recording) {
        if self.history.set(capacity, rec) {
            self.forget_recorded_blocks();
        }
        self.refresh_observed();
    }

    /// Recomputes `observed` after history, the trackers or the
    /// memory-usage reporters changed.
    pub fn refresh_observed(&mut self) {
        self.observed = self.history.enabled() || self.tracking || self.reporting;
    }

    /// Queues a memory-usage report of a block of `alloc_size` bytes at
    /// `ptr` handed out (`alloc_size > 0`) or given back (`< 0`), with the
    /// allocated and reserved bytes after it (when reporters are attached).
    #[inline]
    pub fn report_usage(&mut self, ptr: DevicePtr, alloc_size: i64, device: crate::driver::Device) {
        if self.reporting {
            let (total_allocated, total_reserved) = (
                self.stats.allocated_bytes.all().current as u64,
                self.reserved(),
            );
            self.usage.push(crate::allocator::MemoryUsage::Usage {
                ptr,
                alloc_size,
                total_allocated,
                total_reserved,
                device,
            });
        }
    }

    /// Forgets the recorded entries and goes on recording (PyTorch's
    /// `clear_history=True`, which clears its trace buffer only): the live
    /// allocations keep their records (call sites, order, backtraces), and
    /// segments the call sites of their first mapping, as PyTorch's blocks
    /// keep `context_when_allocated` and `context_when_segment_allocated`.
    pub fn clear_history(&mut self) {
        if self.history.enabled() {
            self.history.clear_entries();
        }
    }

    fn forget_recorded_blocks(&mut self) {
        for b in self.blocks.iter_mut() {
            b.hist_seq = 0;
            b.hist_site = None;
        }
    }

    /// The live (and pending-free) allocations recorded since history was
    /// turned on.
    pub fn recorded_live(&self) -> impl Iterator<Item = LiveAlloc> + '_ {
        self.blocks
            .iter()
            .filter(|(_, b)| b.hist_seq != 0)
            .map(|(_, b)| LiveAlloc {
                location: b.hist_site,
                size: b.requested,
                backtrace: self.history.backtraces.get(&b.ptr).cloned(),
                seq: b.hist_seq,
            })
    }

    /// Records an event on `stream`, reusing one from the pool when there is
    /// one. An event whose record fails is destroyed, not pooled.
    pub fn record_pooled_event(
        &mut self,
        events: &dyn crate::driver::StreamEvents,
        stream: StreamId,
    ) -> Result<EventHandle, crate::driver::DriverError> {
        let e = match self.event_pool.pop() {
            Some(e) => e,
            None => events.create_event()?,
        };
        events.record_event(e, stream).inspect_err(|_| {
            let _ = events.destroy_event(e);
        })?;
        Ok(e)
    }

    #[inline(always)]
    pub fn index_insert(&mut self, id: u32) {
        let b = &mut self.blocks[id];
        // The counts only grow, and only while garbage collection is on: at 0
        // every block of the pool has a base of 0 already (and the second
        // cache line of the block stays untouched, block.rs).
        let gc = self.gc_counts[b.pool as usize];
        if gc != 0 {
            b.gc_base = gc;
        }
        self.free_clock += 1;
        b.freed_at = self.free_clock;
        let (s, p, e) = (
            b.stream as usize,
            b.pool as usize,
            Entry {
                size: b.size,
                ptr: b.ptr,
                block: id,
            },
        );
        self.streams[s].free[p].insert(e);
    }

    #[inline(always)]
    pub fn index_remove(&mut self, id: u32) -> bool {
        let b = &self.blocks[id];
        self.streams[b.stream as usize].free[b.pool as usize].remove(b.size, b.ptr)
    }
}

/// The dense index of a stream, registering it on first use.
#[inline]
pub(crate) fn stream_index(st: &mut State, stream: StreamId) -> u32 {
    let (last, i) = st.last_stream;
    if last == stream && i != NONE {
        return i;
    }
    let i = pool_stream_index(st, stream, 0);
    st.last_stream = (stream, i);
    i
}

/// The dense index of `stream`'s entry in pool `mempool` (0: the default
/// pools), registering it on first use.
pub(crate) fn pool_stream_index(st: &mut State, stream: StreamId, mempool: u64) -> u32 {
    if let Some(&i) = st.stream_entries.get(&(stream, mempool)) {
        return i;
    }
    let no_split = st.mempool(mempool).is_some_and(|p| p.no_split);
    let fresh = StreamState::new(stream, mempool, no_split);
    // An entry of a forgotten private pool holds nothing any more (no block,
    // no event: events wait on default entries): it is taken again.
    let i = match st.vacant_entries.pop_first() {
        Some(i) => {
            let e = &mut st.streams[i as usize];
            debug_assert!(e.mempool == crate::mempool::VACANT);
            debug_assert!(e.free.iter().all(|f| f.len() == 0) && e.events.is_empty());
            let free = std::mem::take(&mut e.free);
            *e = StreamState { free, ..fresh };
            i
        }
        None => {
            st.streams.push(fresh);
            (st.streams.len() - 1) as u32
        }
    };
    st.stream_entries.insert((stream, mempool), i);
    i
}

/// The most bytes an allocator reserves at once: its statistics are
/// PyTorch's signed 64-bit figures (`memory_stats()`), and reserved bytes
/// past `i64::MAX` would read back negative. Only a driver reporting a device
/// of more than 8 EiB gets there; a request that would pass it is out of
/// memory.
pub(crate) const MAX_RESERVED: u64 = i64::MAX as u64;
