//! [`PinnedAllocator`]: the cache of pinned blocks, their statistics and the
//! events that defer their reuse.

use super::buffer::PinnedBuffer;
use super::size_class::{size_class, MAX_REQUEST, PAGE, REUSE_SLACK};
use super::{PinnedBackend, PinnedError};
use crate::driver::{DriverError, EventHandle, StreamId};
use crate::history::Action;
use crate::stats::PinnedStats;
use parking_lot::Mutex;
use rustc_hash::FxHashSet;
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::Instant;

/// The number of a block's streams up to which a new stream is looked for
/// by a scan of the list; beyond it, in a set.
const STREAM_SCAN: usize = 16;

struct Block {
    size: u64,
    in_use: bool,
    /// Streams that used the block besides the allocating thread's copies,
    /// in the order first recorded.
    streams: Vec<StreamId>,
    /// The same streams as a set, once there are [`STREAM_SCAN`] of them:
    /// recording on thousands of distinct streams stays
    /// linear (PyTorch keeps a block's streams in a hash set).
    stream_set: Option<FxHashSet<StreamId>>,
    /// Events recorded at free time that have not completed.
    pending: u32,
    /// An event could be neither recorded nor waited for: the block may still be
    /// read by the device, so it is never reused nor freed.
    poisoned: bool,
}

#[derive(Default)]
struct State {
    /// Every block held from the backend, by address.
    blocks: BTreeMap<u64, Block>,
    /// Cached blocks ready for reuse: size → addresses, most recently freed last.
    free: BTreeMap<u64, Vec<u64>>,
    /// Events recorded on free, oldest first, with the block they guard.
    events: VecDeque<(EventHandle, u64)>,
    event_pool: Vec<EventHandle>,
    stats: PinnedStats,
    limits: PinnedLimits,
    /// The recorded history ([`PinnedAllocator::record_history`]).
    trace: Trace,
}

/// The pinned allocator's history: PyTorch's `CachingHostAllocator` trace
/// buffer (`_record_memory_history(record_pinned_host_memory=True)`).
#[derive(Default)]
struct Trace {
    /// Recording now.
    on: bool,
    /// The most entries kept (the newest).
    capacity: usize,
    entries: VecDeque<PinnedTraceEntry>,
    /// When recording first started (entries' `time_us` count from it).
    epoch: Option<Instant>,
}

impl Trace {
    /// Appends an entry while recording.
    #[inline]
    fn push(&mut self, action: Action, addr: u64, size: u64) {
        if !self.on {
            return;
        }
        let time_us = self.epoch.map_or(0, |t| {
            u64::try_from(t.elapsed().as_micros()).unwrap_or(u64::MAX)
        });
        if self.entries.len() >= self.capacity {
            self.entries.pop_front();
        }
        self.entries.push_back(PinnedTraceEntry {
            action,
            addr,
            size,
            time_us,
        });
    }
}

/// One event of the pinned allocator's history
/// ([`PinnedAllocator::record_history`]): PyTorch's host trace entries
/// (`host_traces` of `torch.cuda.memory._snapshot()`), whose device is -1
/// and stream null.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PinnedTraceEntry {
    /// What happened: [`Action::SegmentAlloc`] (a block pinned),
    /// [`Action::Alloc`] (a block handed out, new or cached),
    /// [`Action::FreeRequested`] (a buffer dropped), [`Action::FreeCompleted`]
    /// (the block back in the cache, once its streams' events completed),
    /// [`Action::SegmentFree`] (a block unpinned).
    pub action: Action,
    /// The block's address.
    pub addr: u64,
    /// The block's size (its size class, not the request).
    pub size: u64,
    /// Microseconds since recording first started.
    pub time_us: u64,
}

/// One pinned block as [`PinnedAllocator::segments`] reports it: PyTorch's
/// `HostSegmentInfo` (`host_segments` of `torch.cuda.memory._snapshot()`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PinnedSegment {
    /// The block's address.
    pub address: u64,
    /// Its size.
    pub size: u64,
    /// Handed out (a buffer holds it).
    pub allocated: bool,
    /// Handed out, or freed but waiting for its streams' events (or
    /// withheld for good after an event failure).
    pub active: bool,
}

/// PyTorch's `pinned_max_round_threshold_mb` and `pinned_max_cached_size_mb`
/// (2.12 on), in bytes; unlimited by default.
///
/// ```
/// use strata_alloc::pinned::PinnedLimits;
/// use strata_alloc::AllocatorConfig;
/// let c = AllocatorConfig::parse("pinned_max_cached_size_mb:32").unwrap();
/// let l = PinnedLimits::of(&c);
/// assert_eq!((l.max_round_threshold, l.max_cached_size), (u64::MAX, 32 << 20));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PinnedLimits {
    /// Requests above this size (or above `max_cached_size`) get a block of
    /// their own size in whole pages instead of their size class.
    pub max_round_threshold: u64,
    /// A block larger than this is given back to the system when it is
    /// freed (once its events completed) instead of being cached.
    pub max_cached_size: u64,
}

impl Default for PinnedLimits {
    fn default() -> PinnedLimits {
        PinnedLimits {
            max_round_threshold: u64::MAX,
            max_cached_size: u64::MAX,
        }
    }
}

impl PinnedLimits {
    /// The limits a configuration sets.
    pub fn of(config: &crate::AllocatorConfig) -> PinnedLimits {
        PinnedLimits {
            max_round_threshold: config.pinned_max_round_threshold,
            max_cached_size: config.pinned_max_cached_size,
        }
    }

    /// The block that serves a request of `size` bytes: its size class, or
    /// its own size in whole pages above either limit (PyTorch rounds to a
    /// power of two only at or below both).
    fn block_size(&self, size: u64) -> u64 {
        if size <= self.max_round_threshold && size <= self.max_cached_size {
            size_class(size)
        } else {
            size.div_ceil(PAGE) * PAGE
        }
    }
}

/// The caching pinned host allocator over a [`PinnedBackend`]. Thread-safe;
/// share it through `Arc`.
pub struct PinnedAllocator<B: PinnedBackend> {
    backend: B,
    state: Mutex<State>,
}

impl<B: PinnedBackend> PinnedAllocator<B> {
    /// An allocator over `backend`, with an empty cache.
    pub fn new(backend: B) -> Arc<PinnedAllocator<B>> {
        Arc::new(PinnedAllocator {
            backend,
            state: Mutex::new(State::default()),
        })
    }

    /// The backend.
    pub fn backend(&self) -> &B {
        &self.backend
    }

    /// Sets the rounding and caching limits (PyTorch's
    /// `pinned_max_round_threshold_mb` and `pinned_max_cached_size_mb`) for
    /// the blocks allocated and freed from now on. An allocator that
    /// follows the allocator settings ([`follow_allocator_settings`](Self::follow_allocator_settings),
    /// as the CUDA pinned allocators do) takes them again at each
    /// [`set_allocator_settings`](crate::set_allocator_settings).
    pub fn set_limits(&self, limits: PinnedLimits) {
        self.state.lock().limits = limits;
    }

    /// The rounding and caching limits in force.
    pub fn limits(&self) -> PinnedLimits {
        self.state.lock().limits
    }

    /// Allocates a pinned buffer of `size` bytes (a block of
    /// [`size_class`]`(size)` bytes, possibly a cached one up to 1/8 larger).
    /// A zero-byte request gets an empty buffer with a null pointer.
    pub fn allocate(self: &Arc<Self>, size: u64) -> Result<PinnedBuffer<B>, PinnedError> {
        let (ptr, capacity) = if size == 0 {
            (0, 0)
        } else {
            self.allocate_block(size)?
        };
        Ok(PinnedBuffer {
            allocator: Arc::clone(self),
            ptr,
            len: size,
            capacity,
        })
    }

    fn allocate_block(&self, size: u64) -> Result<(u64, u64), PinnedError> {
        let class = {
            let mut st = self.state.lock();
            let class = st.limits.block_size(size.min(MAX_REQUEST));
            if size >= MAX_REQUEST {
                drop(st);
                return Err(self.out_of_memory(size, class));
            }
            if !st.events.is_empty() {
                self.process_events(&mut st);
            }
            if let Some(found) = take_free(&mut st, class) {
                st.trace.push(Action::Alloc, found.0, found.1);
                return Ok(found);
            }
            class
        };
        // Miss: pin a new block without holding the lock.
        let ptr = match self.checked_backend_alloc(class) {
            Ok(p) => p,
            Err(DriverError::OutOfMemory) => {
                // Give the cached blocks back and try once more (a failure to free
                // one of them leaves it cached and shows as exhaustion below).
                let _ = self.empty_cache();
                match self.checked_backend_alloc(class) {
                    Ok(p) => p,
                    Err(DriverError::OutOfMemory) => return Err(self.out_of_memory(size, class)),
                    Err(e) => return Err(PinnedError::Backend(e)),
                }
            }
            Err(e) => return Err(PinnedError::Backend(e)),
        };
        Ok((ptr, class))
    }

    /// One timed backend allocation of a new block, held in use and counted
    /// when the backend's block can be used. A block the allocator cannot
    /// hold (a custom backend's bug: a null address, a range that wraps past
    /// 2^64, or one that overlaps a block already held) is reported as the
    /// backend's error, with the cache and the statistics as they were; the
    /// first two are given back to the backend, an overlapping one is not
    /// (freeing it could free the block the allocator holds there).
    fn checked_backend_alloc(&self, size: u64) -> Result<u64, DriverError> {
        let t = Instant::now();
        let ptr = self.backend.alloc(size)?;
        let us = t.elapsed().as_micros() as u64;
        let mut st = self.state.lock();
        if let Some((e, give_back)) = unusable_range(&st, ptr, size) {
            drop(st);
            if give_back {
                let _ = self.backend.free(ptr, size);
            }
            return Err(e);
        }
        st.stats.num_host_alloc += 1;
        st.stats.host_alloc_time.add(us);
        // Held from here, under the same lock as the check.
        st.blocks.insert(
            ptr,
            Block {
                size,
                in_use: true,
                streams: Vec::new(),
                stream_set: None,
                pending: 0,
                poisoned: false,
            },
        );
        st.stats.allocations.increase(1);
        st.stats.allocated_bytes.increase(size as i64);
        st.stats.active_requests.increase(1);
        st.stats.active_bytes.increase(size as i64);
        st.trace.push(Action::SegmentAlloc, ptr, size);
        st.trace.push(Action::Alloc, ptr, size);
        Ok(ptr)
    }

    fn out_of_memory(&self, requested: u64, block_size: u64) -> PinnedError {
        let st = self.state.lock();
        PinnedError::OutOfMemory {
            requested,
            block_size,
            held: st.stats.allocated_bytes.current as u64,
            active: st.stats.active_bytes.current as u64,
        }
    }

    /// Notes that the block holding `ptr` (any address inside it) is used by
    /// work queued on `stream`, typically an asynchronous copy: once the buffer is
    /// dropped, the block is reused only after that work has run. PyTorch's
    /// `CachingHostAllocator_recordEvent`.
    pub fn record_event(&self, ptr: u64, stream: StreamId) -> Result<(), PinnedError> {
        let mut st = self.state.lock();
        let b = st
            .blocks
            .range_mut(..=ptr)
            .next_back()
            .filter(|(&base, b)| ptr < base + b.size && b.in_use)
            .map(|(_, b)| b)
            .ok_or(PinnedError::InvalidPointer { ptr })?;
        let new = if b.streams.len() < STREAM_SCAN {
            !b.streams.contains(&stream)
        } else {
            let streams = &b.streams;
            b.stream_set
                .get_or_insert_with(|| streams.iter().copied().collect())
                .insert(stream)
        };
        if new {
            b.streams.push(stream);
        }
        Ok(())
    }

    /// Returns a block: straight to the cache when no stream used it, otherwise
    /// after one event per stream.
    pub(super) fn free(&self, ptr: u64) -> Result<(), PinnedError> {
        let mut guard = self.state.lock();
        let st = &mut *guard;
        let (streams, size) = match st.blocks.get_mut(&ptr) {
            Some(b) if b.in_use => {
                b.in_use = false;
                b.stream_set = None;
                (std::mem::take(&mut b.streams), b.size)
            }
            _ => return Err(PinnedError::InvalidPointer { ptr }),
        };
        st.trace.push(Action::FreeRequested, ptr, size);
        let mut first_error = None;
        let mut pending = 0;
        for s in streams {
            match self.record_on(st, s) {
                Ok(e) => {
                    st.events.push_back((e, ptr));
                    pending += 1;
                }
                // The event could not be recorded: wait for the stream instead.
                Err(e) => {
                    if self.backend.events().synchronize_stream(s).is_err() {
                        st.blocks.get_mut(&ptr).expect("block exists").poisoned = true;
                    }
                    first_error.get_or_insert(e);
                }
            }
        }
        let b = st.blocks.get_mut(&ptr).expect("block exists");
        b.pending = pending;
        if pending == 0 && !b.poisoned {
            self.make_free(st, ptr);
        }
        match first_error {
            Some(e) => Err(PinnedError::Backend(e)),
            None => Ok(()),
        }
    }

    /// A pooled (or new) event recorded on `stream`.
    fn record_on(&self, st: &mut State, stream: StreamId) -> Result<EventHandle, DriverError> {
        let e = match st.event_pool.pop() {
            Some(e) => e,
            None => self.backend.events().create_event()?,
        };
        match self.backend.events().record_event(e, stream) {
            Ok(()) => Ok(e),
            Err(err) => {
                st.event_pool.push(e);
                Err(err)
            }
        }
    }

    /// Returns blocks whose events have all completed to the cache, oldest event
    /// first, stopping at the first one still pending (as PyTorch does: the
    /// oldest event is the likeliest to be done, and the scan stays short).
    fn process_events(&self, st: &mut State) {
        while let Some(&(e, ptr)) = st.events.front() {
            let done = match self.backend.events().query_event(e) {
                Ok(done) => done,
                // A failed query: wait for the event; if even that fails, the
                // block can never be proven idle and is withheld for good.
                Err(_) => {
                    if self.backend.events().synchronize_event(e).is_err() {
                        if let Some(b) = st.blocks.get_mut(&ptr) {
                            b.poisoned = true;
                        }
                    }
                    true
                }
            };
            if !done {
                break;
            }
            st.events.pop_front();
            st.event_pool.push(e);
            let b = st
                .blocks
                .get_mut(&ptr)
                .expect("an event guards a live block");
            b.pending -= 1;
            if b.pending == 0 && !b.poisoned && !b.in_use {
                self.make_free(st, ptr);
            }
        }
    }

    /// Frees every cached block whose events have completed back to the backend
    /// (`torch._C._host_emptyCache()`). Blocks in use or still waiting for events
    /// stay. The first backend failure is returned; a block that failed to free
    /// stays cached.
    pub fn empty_cache(&self) -> Result<(), PinnedError> {
        let victims: Vec<(u64, u64)> = {
            let mut guard = self.state.lock();
            let st = &mut *guard;
            self.process_events(st);
            let free = std::mem::take(&mut st.free);
            let mut v = Vec::new();
            for (size, ptrs) in free {
                for p in ptrs {
                    forget_block(st, p, size);
                    v.push((p, size));
                }
            }
            v
        };
        let mut first_error = None;
        for (ptr, size) in victims {
            let t = Instant::now();
            let r = self.backend.free(ptr, size);
            let us = t.elapsed().as_micros() as u64;
            let mut guard = self.state.lock();
            let st = &mut *guard;
            match r {
                Ok(()) => {
                    st.stats.num_host_free += 1;
                    st.stats.host_free_time.add(us);
                    st.trace.push(Action::SegmentFree, ptr, size);
                }
                Err(e) => {
                    // Still pinned and still ours: keep it cached, with the
                    // statistics as they were before it was taken out (the
                    // totals count no free and no new allocation).
                    st.blocks.insert(
                        ptr,
                        Block {
                            size,
                            in_use: false,
                            streams: Vec::new(),
                            stream_set: None,
                            pending: 0,
                            poisoned: false,
                        },
                    );
                    st.free.entry(size).or_default().push(ptr);
                    st.stats.allocations.undo_decrease(1);
                    st.stats.allocated_bytes.undo_decrease(size as i64);
                    first_error.get_or_insert(e);
                }
            }
        }
        match first_error {
            Some(e) => Err(PinnedError::Backend(e)),
            None => Ok(()),
        }
    }

    /// Checks for completed events now (allocation does it too).
    pub fn process_pending_events(&self) {
        let mut st = self.state.lock();
        self.process_events(&mut st);
    }

    /// A copy of the statistics.
    pub fn stats(&self) -> PinnedStats {
        self.state.lock().stats.clone()
    }

    /// Resets the peaks to the current values, and the longest and shortest
    /// backend call times to 0 (`torch.cuda.reset_peak_host_memory_stats()`):
    /// the next call sets both again.
    pub fn reset_peak_stats(&self) {
        self.state.lock().stats.reset_peak();
    }

    /// Resets the accumulated counters: `allocated`, `freed`, the backend call
    /// counts and the total and count of the call times
    /// (`torch.cuda.reset_accumulated_host_memory_stats()`). The longest and
    /// shortest call times are peaks and stay, as in PyTorch.
    pub fn reset_accumulated_stats(&self) {
        self.state.lock().stats.reset_accumulated();
    }

    /// Bytes cached and ready for reuse.
    pub fn cached_bytes(&self) -> u64 {
        let st = self.state.lock();
        st.free.iter().map(|(s, v)| s * v.len() as u64).sum()
    }

    /// Records the allocator's events from now on, keeping the newest
    /// `max_entries` (at least one), or stops recording with `None`
    /// (PyTorch's `_record_memory_history(..., record_pinned_host_memory=True)`
    /// and the host allocator's `recordHistory`): a block pinned
    /// (`segment_alloc`), handed out (`alloc`, new or from the cache),
    /// dropped (`free_requested`), back in the cache (`free_completed`, at
    /// once when no stream used it, else when its events are seen complete,
    /// at the next allocation or [`process_pending_events`](Self::process_pending_events)),
    /// unpinned (`segment_free`: [`empty_cache`](Self::empty_cache), or a
    /// block above `max_cached_size` given back when freed), each with the
    /// block's address and size. Stopping keeps the entries recorded so far,
    /// as PyTorch's host allocator keeps its buffer (its device allocator
    /// clears its own); [`clear_history`](Self::clear_history) forgets them.
    /// A new bound keeps the newest entries that fit.
    ///
    /// ```
    /// use strata_alloc::history::Action;
    /// use strata_alloc::pinned::{PinnedAllocator, SimPinnedBackend};
    ///
    /// let pinned = PinnedAllocator::new(SimPinnedBackend::new(None));
    /// pinned.record_history(Some(100));
    /// let buf = pinned.allocate(1000).unwrap();
    /// let p = buf.ptr();
    /// drop(buf);
    /// let h: Vec<_> = pinned.history().iter().map(|e| (e.action, e.addr, e.size)).collect();
    /// assert_eq!(h, [
    ///     (Action::SegmentAlloc, p, 4096),
    ///     (Action::Alloc, p, 4096),
    ///     (Action::FreeRequested, p, 4096),
    ///     (Action::FreeCompleted, p, 4096),
    /// ]);
    /// ```
    pub fn record_history(&self, max_entries: Option<usize>) {
        let mut st = self.state.lock();
        let t = &mut st.trace;
        match max_entries {
            Some(n) => {
                t.on = true;
                t.capacity = n.max(1);
                t.epoch.get_or_insert_with(Instant::now);
                while t.entries.len() > t.capacity {
                    t.entries.pop_front();
                }
            }
            None => t.on = false,
        }
    }

    /// Forgets the recorded entries (PyTorch's `clear_history=True`);
    /// recording goes on if it was on.
    pub fn clear_history(&self) {
        self.state.lock().trace.entries.clear();
    }

    /// Whether history is being recorded.
    pub fn history_enabled(&self) -> bool {
        self.state.lock().trace.on
    }

    /// The recorded entries, oldest first.
    pub fn history(&self) -> Vec<PinnedTraceEntry> {
        self.state.lock().trace.entries.iter().copied().collect()
    }

    /// Every block held from the backend, by address, in use or not
    /// (PyTorch's host `getSegments`, `host_segments` of its snapshot: one
    /// segment per block, never split).
    pub fn segments(&self) -> Vec<PinnedSegment> {
        self.state
            .lock()
            .blocks
            .iter()
            .map(|(&address, b)| PinnedSegment {
                address,
                size: b.size,
                allocated: b.in_use,
                active: b.in_use || b.pending > 0 || b.poisoned,
            })
            .collect()
    }

    /// Events recorded on free that have not been seen complete yet.
    pub fn pending_events(&self) -> usize {
        self.state.lock().events.len()
    }

    /// Checks the internal invariants (statistics equal a recount, free lists
    /// agree with the blocks, no two blocks overlap); for tests.
    pub fn check_consistency(&self) -> Result<(), String> {
        let st = self.state.lock();
        let (mut n, mut bytes, mut an, mut abytes) = (0i64, 0i64, 0i64, 0i64);
        let mut end = 0u64;
        for (&p, b) in &st.blocks {
            if p < end {
                return Err(format!("block {p:#x} overlaps the previous one"));
            }
            end = p + b.size;
            n += 1;
            bytes += b.size as i64;
            let cached = st.free.get(&b.size).is_some_and(|v| v.contains(&p));
            let ready = !b.in_use && b.pending == 0 && !b.poisoned;
            if cached != ready {
                return Err(format!("block {p:#x}: cached {cached}, ready {ready}"));
            }
            if !ready {
                an += 1;
                abytes += b.size as i64;
            }
            let queued = st.events.iter().filter(|(_, q)| *q == p).count() as u32;
            if queued != b.pending {
                return Err(format!(
                    "block {p:#x}: {queued} queued events, {} pending",
                    b.pending
                ));
            }
        }
        let listed: usize = st.free.values().map(Vec::len).sum();
        let ready = st
            .blocks
            .values()
            .filter(|b| !b.in_use && b.pending == 0 && !b.poisoned)
            .count();
        if listed != ready {
            return Err(format!("{listed} listed free, {ready} ready"));
        }
        let s = &st.stats;
        let got = (
            s.allocations.current,
            s.allocated_bytes.current,
            s.active_requests.current,
            s.active_bytes.current,
        );
        if got != (n, bytes, an, abytes) {
            return Err(format!(
                "stats {got:?} != recount {:?}",
                (n, bytes, an, abytes)
            ));
        }
        Ok(())
    }
}

/// Why a block of `size` bytes at `ptr` from the backend cannot be held, if it
/// cannot, and whether it may be given back: a null address (a buffer at 0
/// reads as empty and would never be returned), a range past the end of the
/// 64-bit address space, or a range overlapping a block the allocator already
/// holds (not given back: the backend might free the held block).
fn unusable_range(st: &State, ptr: u64, size: u64) -> Option<(DriverError, bool)> {
    let (why, give_back) = if ptr == 0 {
        ("a null address".to_string(), true)
    } else if ptr.checked_add(size).is_none() {
        (
            "a range that wraps past the end of the 64-bit address space".to_string(),
            true,
        )
    } else {
        // The last block starting below the new range's end overlaps it
        // unless it ends at or before the range's start.
        let (&base, b) = st.blocks.range(..ptr + size).next_back()?;
        if base + b.size <= ptr {
            return None;
        }
        (
            format!(
                "a range overlapping the pinned block at {base:#x} ({} bytes) that the allocator holds",
                b.size
            ),
            false,
        )
    };
    Some((
        DriverError::Call {
            call: "alloc",
            message: format!("the pinned backend returned {ptr:#x} for {size} bytes, {why}"),
        },
        give_back,
    ))
}

/// Takes the smallest cached block of at least `class` bytes and at most 1/8
/// more, most recently freed first.
fn take_free(st: &mut State, class: u64) -> Option<(u64, u64)> {
    let limit = class + class / REUSE_SLACK;
    let (&size, _) = st
        .free
        .range(class..=limit)
        .find(|(_, ptrs)| !ptrs.is_empty())?;
    let list = st.free.get_mut(&size).expect("found above");
    let ptr = list.pop().expect("non-empty");
    if list.is_empty() {
        st.free.remove(&size);
    }
    let b = st.blocks.get_mut(&ptr).expect("a cached block exists");
    b.in_use = true;
    st.stats.active_requests.increase(1);
    st.stats.active_bytes.increase(size as i64);
    Some((ptr, size))
}

/// Takes a block given back to the backend out of the record.
fn forget_block(st: &mut State, ptr: u64, size: u64) {
    st.blocks.remove(&ptr);
    st.stats.allocations.decrease(1);
    st.stats.allocated_bytes.decrease(size as i64);
}

impl<B: PinnedBackend> PinnedAllocator<B> {
    /// Puts an idle block into the cache, or gives it back to the system at
    /// once when it is larger than [`PinnedLimits::max_cached_size`] (a
    /// block the system refuses to take back stays cached).
    fn make_free(&self, st: &mut State, ptr: u64) {
        let size = st.blocks[&ptr].size;
        st.stats.active_requests.decrease(1);
        st.stats.active_bytes.decrease(size as i64);
        // PyTorch's `maybe_cache_block` records the free as completed, then
        // `destroy_block` the unpinning of a block above the cache limit.
        st.trace.push(Action::FreeCompleted, ptr, size);
        if size > st.limits.max_cached_size {
            let t = Instant::now();
            if self.backend.free(ptr, size).is_ok() {
                st.stats.host_free_time.add(t.elapsed().as_micros() as u64);
                st.stats.num_host_free += 1;
                forget_block(st, ptr, size);
                st.trace.push(Action::SegmentFree, ptr, size);
                return;
            }
        }
        st.free.entry(size).or_default().push(ptr);
    }
}

impl<B: PinnedBackend> Drop for PinnedAllocator<B> {
    fn drop(&mut self) {
        // No buffer is alive (each holds an `Arc` to the allocator). Wait for the
        // outstanding events, then give everything back; a block whose event
        // cannot be waited for is leaked rather than freed under a running copy.
        let st = self.state.get_mut();
        while let Some((e, ptr)) = st.events.pop_front() {
            let ok = self.backend.events().synchronize_event(e).is_ok();
            let _ = self.backend.events().destroy_event(e);
            if let Some(b) = st.blocks.get_mut(&ptr) {
                b.pending = b.pending.saturating_sub(1);
                b.poisoned |= !ok;
            }
        }
        for e in st.event_pool.drain(..) {
            let _ = self.backend.events().destroy_event(e);
        }
        for (&ptr, b) in &st.blocks {
            if !b.poisoned && !b.in_use {
                let _ = self.backend.free(ptr, b.size);
            }
        }
    }
}
