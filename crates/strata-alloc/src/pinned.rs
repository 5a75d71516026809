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
//! never finer than a 4 KiB page ([`size_class`]):
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

use crate::driver::{DriverError, EventHandle, StreamId};
use crate::stats::{format_size, Stat};
use parking_lot::Mutex;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;
use std::time::Instant;

/// Pinned blocks are whole pages.
pub const PAGE: u64 = 4096;
/// Size classes per power of two.
pub const DIVISIONS: u64 = 8;
/// A cached block may serve a request whose class is at most this fraction
/// (1/`REUSE_SLACK`) smaller than the block.
pub const REUSE_SLACK: u64 = 8;
/// Requests of this size or more fail at once.
const MAX_REQUEST: u64 = 1 << 56;

/// The size of the block that serves a request of `size` bytes (see the module
/// documentation): one page up to 4 KiB, then eight classes per power of two,
/// never finer than a page.
///
/// ```
/// use strata_alloc::pinned::size_class;
/// const MIB: u64 = 1 << 20;
/// assert_eq!(size_class(1), 4096);
/// assert_eq!(size_class(5000), 8192);
/// assert_eq!(size_class(129 * MIB + MIB / 2), 144 * MIB); // PyTorch: 256 MiB
/// assert_eq!(size_class(128 * MIB), 128 * MIB);
/// ```
pub fn size_class(size: u64) -> u64 {
    if size <= PAGE {
        return PAGE;
    }
    let size = size.min(MAX_REQUEST);
    let k = 63 - (size - 1).leading_zeros();
    let step = ((1u64 << k) / DIVISIONS).max(PAGE);
    size.div_ceil(step) * step
}

/// Where pinned memory and the events guarding its reuse come from: CUDA
/// ([`CudaPinnedBackend`], feature `cuda`) or a simulation for tests
/// ([`SimPinnedBackend`]).
///
/// `alloc` must return `size` bytes of host memory, at least page-aligned,
/// readable and writable by the process and owned by the caller until `free`.
pub trait PinnedBackend: Send + Sync {
    /// Allocates `size` bytes of pinned host memory. Exhaustion is
    /// [`DriverError::OutOfMemory`].
    fn alloc(&self, size: u64) -> Result<u64, DriverError>;
    /// Frees a block from [`alloc`](Self::alloc) (same size).
    fn free(&self, ptr: u64, size: u64) -> Result<(), DriverError>;
    /// Creates an event (the allocator pools them).
    fn create_event(&self) -> Result<EventHandle, DriverError>;
    /// Destroys an event.
    fn destroy_event(&self, event: EventHandle) -> Result<(), DriverError>;
    /// Records `event` on `stream`: it completes once the work queued there so
    /// far has run.
    fn record_event(&self, event: EventHandle, stream: StreamId) -> Result<(), DriverError>;
    /// Whether a recorded event has completed (non-blocking).
    fn query_event(&self, event: EventHandle) -> Result<bool, DriverError>;
    /// Blocks until a recorded event has completed.
    fn synchronize_event(&self, event: EventHandle) -> Result<(), DriverError>;
    /// Blocks until the work queued on `stream` has run.
    fn synchronize_stream(&self, stream: StreamId) -> Result<(), DriverError>;
}

impl<T: PinnedBackend + ?Sized> PinnedBackend for Arc<T> {
    fn alloc(&self, size: u64) -> Result<u64, DriverError> {
        (**self).alloc(size)
    }
    fn free(&self, ptr: u64, size: u64) -> Result<(), DriverError> {
        (**self).free(ptr, size)
    }
    fn create_event(&self) -> Result<EventHandle, DriverError> {
        (**self).create_event()
    }
    fn destroy_event(&self, event: EventHandle) -> Result<(), DriverError> {
        (**self).destroy_event(event)
    }
    fn record_event(&self, event: EventHandle, stream: StreamId) -> Result<(), DriverError> {
        (**self).record_event(event, stream)
    }
    fn query_event(&self, event: EventHandle) -> Result<bool, DriverError> {
        (**self).query_event(event)
    }
    fn synchronize_event(&self, event: EventHandle) -> Result<(), DriverError> {
        (**self).synchronize_event(event)
    }
    fn synchronize_stream(&self, stream: StreamId) -> Result<(), DriverError> {
        (**self).synchronize_stream(stream)
    }
}

/// Times of backend calls, in microseconds (PyTorch's `host_alloc_time.*`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DurationStat {
    /// Sum of all durations.
    pub total_us: u64,
    /// Longest duration.
    pub max_us: u64,
    /// Shortest duration (0 before the first).
    pub min_us: u64,
    /// Number of durations.
    pub count: u64,
}

impl DurationStat {
    fn add(&mut self, us: u64) {
        self.min_us = if self.count == 0 {
            us
        } else {
            self.min_us.min(us)
        };
        self.max_us = self.max_us.max(us);
        self.total_us += us;
        self.count += 1;
    }

    /// Mean duration (0 before the first).
    pub fn avg_us(&self) -> u64 {
        self.total_us.checked_div(self.count).unwrap_or(0)
    }
}

/// Statistics of the pinned allocator, with the meanings of PyTorch's
/// `torch.cuda.host_memory_stats()`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PinnedStats {
    /// Blocks held from the backend, in use or cached (count).
    pub allocations: Stat,
    /// Bytes of those blocks (block sizes, i.e. rounded).
    pub allocated_bytes: Stat,
    /// Blocks handed out, or freed but still waiting for their streams' events.
    pub active_requests: Stat,
    /// Bytes of those blocks.
    pub active_bytes: Stat,
    /// Backend allocations (`cuMemHostAlloc`) made.
    pub num_host_alloc: u64,
    /// Backend frees (`cuMemFreeHost`) made.
    pub num_host_free: u64,
    /// Durations of backend allocations.
    pub host_alloc_time: DurationStat,
    /// Durations of backend frees.
    pub host_free_time: DurationStat,
}

impl PinnedStats {
    /// The statistics under PyTorch's keys (`allocations.current`,
    /// `active_bytes.peak`, `num_host_alloc`, `host_alloc_time.avg`, …).
    pub fn to_map(&self) -> BTreeMap<String, i64> {
        let mut m = BTreeMap::new();
        for (name, s) in [
            ("allocations", &self.allocations),
            ("allocated_bytes", &self.allocated_bytes),
            ("active_requests", &self.active_requests),
            ("active_bytes", &self.active_bytes),
        ] {
            m.insert(format!("{name}.current"), s.current);
            m.insert(format!("{name}.peak"), s.peak);
            m.insert(format!("{name}.allocated"), s.allocated);
            m.insert(format!("{name}.freed"), s.freed);
        }
        m.insert("num_host_alloc".into(), self.num_host_alloc as i64);
        m.insert("num_host_free".into(), self.num_host_free as i64);
        for (name, d) in [
            ("host_alloc_time", &self.host_alloc_time),
            ("host_free_time", &self.host_free_time),
        ] {
            m.insert(format!("{name}.total"), d.total_us as i64);
            m.insert(format!("{name}.max"), d.max_us as i64);
            m.insert(format!("{name}.min"), d.min_us as i64);
            m.insert(format!("{name}.count"), d.count as i64);
            m.insert(format!("{name}.avg"), d.avg_us() as i64);
        }
        m
    }

    fn for_each_stat(&mut self, f: impl Fn(&mut Stat)) {
        for s in [
            &mut self.allocations,
            &mut self.allocated_bytes,
            &mut self.active_requests,
            &mut self.active_bytes,
        ] {
            f(s);
        }
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

struct Block {
    size: u64,
    in_use: bool,
    /// Streams that used the block besides the allocating thread's copies.
    streams: Vec<StreamId>,
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
}

/// The caching pinned host allocator over a [`PinnedBackend`]. Thread-safe;
/// share it through `Arc`.
pub struct PinnedAllocator<B: PinnedBackend> {
    backend: B,
    state: Mutex<State>,
}

/// A pinned host buffer; returns its block to the cache when dropped (after the
/// events of the streams recorded with [`record_stream`](Self::record_stream)).
pub struct PinnedBuffer<B: PinnedBackend> {
    allocator: Arc<PinnedAllocator<B>>,
    ptr: u64,
    len: u64,
    capacity: u64,
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
        let class = size_class(size);
        if size >= MAX_REQUEST {
            return Err(self.out_of_memory(size, class));
        }
        {
            let mut st = self.state.lock();
            if !st.events.is_empty() {
                self.process_events(&mut st);
            }
            if let Some(found) = take_free(&mut st, class) {
                return Ok(found);
            }
        }
        // Miss: pin a new block without holding the lock.
        let ptr = match self.backend_alloc(class) {
            Ok(p) => p,
            Err(DriverError::OutOfMemory) => {
                // Give the cached blocks back and try once more (a failure to free
                // one of them leaves it cached and shows as exhaustion below).
                let _ = self.empty_cache();
                match self.backend_alloc(class) {
                    Ok(p) => p,
                    Err(DriverError::OutOfMemory) => return Err(self.out_of_memory(size, class)),
                    Err(e) => return Err(PinnedError::Backend(e)),
                }
            }
            Err(e) => return Err(PinnedError::Backend(e)),
        };
        let mut st = self.state.lock();
        st.blocks.insert(
            ptr,
            Block {
                size: class,
                in_use: true,
                streams: Vec::new(),
                pending: 0,
                poisoned: false,
            },
        );
        st.stats.allocations.increase(1);
        st.stats.allocated_bytes.increase(class as i64);
        st.stats.active_requests.increase(1);
        st.stats.active_bytes.increase(class as i64);
        Ok((ptr, class))
    }

    /// One timed backend allocation, counted.
    fn backend_alloc(&self, size: u64) -> Result<u64, DriverError> {
        let t = Instant::now();
        let r = self.backend.alloc(size);
        let us = t.elapsed().as_micros() as u64;
        if r.is_ok() {
            let mut st = self.state.lock();
            st.stats.num_host_alloc += 1;
            st.stats.host_alloc_time.add(us);
        }
        r
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
        if !b.streams.contains(&stream) {
            b.streams.push(stream);
        }
        Ok(())
    }

    /// Returns a block: straight to the cache when no stream used it, otherwise
    /// after one event per stream.
    fn free(&self, ptr: u64) -> Result<(), PinnedError> {
        let mut guard = self.state.lock();
        let st = &mut *guard;
        let streams = match st.blocks.get_mut(&ptr) {
            Some(b) if b.in_use => {
                b.in_use = false;
                std::mem::take(&mut b.streams)
            }
            _ => return Err(PinnedError::InvalidPointer { ptr }),
        };
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
                    if self.backend.synchronize_stream(s).is_err() {
                        st.blocks.get_mut(&ptr).expect("block exists").poisoned = true;
                    }
                    first_error.get_or_insert(e);
                }
            }
        }
        let b = st.blocks.get_mut(&ptr).expect("block exists");
        b.pending = pending;
        if pending == 0 && !b.poisoned {
            make_free(st, ptr);
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
            None => self.backend.create_event()?,
        };
        match self.backend.record_event(e, stream) {
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
            let done = match self.backend.query_event(e) {
                Ok(done) => done,
                // A failed query: wait for the event; if even that fails, the
                // block can never be proven idle and is withheld for good.
                Err(_) => {
                    if self.backend.synchronize_event(e).is_err() {
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
                make_free(st, ptr);
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
                    st.blocks.remove(&p);
                    st.stats.allocations.decrease(1);
                    st.stats.allocated_bytes.decrease(size as i64);
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
                }
                Err(e) => {
                    // Still pinned and still ours: keep it cached.
                    st.blocks.insert(
                        ptr,
                        Block {
                            size,
                            in_use: false,
                            streams: Vec::new(),
                            pending: 0,
                            poisoned: false,
                        },
                    );
                    st.free.entry(size).or_default().push(ptr);
                    st.stats.allocations.increase(1);
                    st.stats.allocated_bytes.increase(size as i64);
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

    /// Resets the peaks to the current values.
    pub fn reset_peak_stats(&self) {
        self.state
            .lock()
            .stats
            .for_each_stat(|s| s.peak = s.current);
    }

    /// Resets the accumulated counters (`allocated`, `freed`, call counts and
    /// times).
    pub fn reset_accumulated_stats(&self) {
        let mut st = self.state.lock();
        st.stats.for_each_stat(|s| {
            s.allocated = 0;
            s.freed = 0;
        });
        st.stats.num_host_alloc = 0;
        st.stats.num_host_free = 0;
        st.stats.host_alloc_time = DurationStat::default();
        st.stats.host_free_time = DurationStat::default();
    }

    /// Bytes cached and ready for reuse.
    pub fn cached_bytes(&self) -> u64 {
        let st = self.state.lock();
        st.free.iter().map(|(s, v)| s * v.len() as u64).sum()
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

/// Puts an idle block into the cache.
fn make_free(st: &mut State, ptr: u64) {
    let size = st.blocks[&ptr].size;
    st.free.entry(size).or_default().push(ptr);
    st.stats.active_requests.decrease(1);
    st.stats.active_bytes.decrease(size as i64);
}

impl<B: PinnedBackend> Drop for PinnedAllocator<B> {
    fn drop(&mut self) {
        // No buffer is alive (each holds an `Arc` to the allocator). Wait for the
        // outstanding events, then give everything back; a block whose event
        // cannot be waited for is leaked rather than freed under a running copy.
        let st = self.state.get_mut();
        while let Some((e, ptr)) = st.events.pop_front() {
            let ok = self.backend.synchronize_event(e).is_ok();
            let _ = self.backend.destroy_event(e);
            if let Some(b) = st.blocks.get_mut(&ptr) {
                b.pending = b.pending.saturating_sub(1);
                b.poisoned |= !ok;
            }
        }
        for e in st.event_pool.drain(..) {
            let _ = self.backend.destroy_event(e);
        }
        for (&ptr, b) in &st.blocks {
            if !b.poisoned && !b.in_use {
                let _ = self.backend.free(ptr, b.size);
            }
        }
    }
}

impl<B: PinnedBackend> PinnedBuffer<B> {
    /// The address (0 for an empty buffer).
    pub fn ptr(&self) -> u64 {
        self.ptr
    }

    /// The size asked for.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the buffer is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The size of the block behind the buffer (its size class or a little more).
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// The address as a host pointer.
    pub fn as_ptr(&self) -> *const u8 {
        self.ptr as usize as *const u8
    }

    /// The address as a mutable host pointer.
    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr as usize as *mut u8
    }

    /// The bytes of the buffer.
    ///
    /// # Safety
    /// No asynchronous copy may be writing the buffer while the slice lives
    /// (synchronise the stream first), and the backend must hand out real host
    /// memory (the CUDA backend and [`SimPinnedBackend`] do).
    pub unsafe fn as_slice(&self) -> &[u8] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: the block is `capacity >= len` bytes of host memory owned by this
        // buffer until it is dropped (the backend's contract); the caller rules out
        // concurrent device writes.
        unsafe { std::slice::from_raw_parts(self.as_ptr(), self.len as usize) }
    }

    /// The bytes of the buffer, mutably.
    ///
    /// # Safety
    /// No asynchronous copy may be reading or writing the buffer while the slice
    /// lives, and the backend must hand out real host memory.
    pub unsafe fn as_mut_slice(&mut self) -> &mut [u8] {
        if self.len == 0 {
            return &mut [];
        }
        // SAFETY: as for `as_slice`; `&mut self` makes the slice unique on the host.
        unsafe { std::slice::from_raw_parts_mut(self.as_mut_ptr(), self.len as usize) }
    }

    /// Marks the buffer as used by work queued on `stream` (an asynchronous copy):
    /// after the buffer is dropped, its block is reused only once that work has
    /// run.
    pub fn record_stream(&self, stream: StreamId) -> Result<(), PinnedError> {
        if self.ptr == 0 {
            return Ok(());
        }
        self.allocator.record_event(self.ptr, stream)
    }

    /// The allocator the buffer came from.
    pub fn allocator(&self) -> &Arc<PinnedAllocator<B>> {
        &self.allocator
    }
}

impl<B: PinnedBackend> Drop for PinnedBuffer<B> {
    fn drop(&mut self) {
        if self.ptr != 0 {
            // A failure to record an event has already been made safe inside
            // `free` (the stream was synchronised, or the block withheld).
            let _ = self.allocator.free(self.ptr);
        }
    }
}

impl<B: PinnedBackend> std::fmt::Debug for PinnedBuffer<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PinnedBuffer")
            .field("ptr", &format_args!("{:#x}", self.ptr))
            .field("len", &self.len)
            .field("capacity", &self.capacity)
            .finish()
    }
}

/// A simulated pinning backend: real page-aligned host memory from the system
/// allocator (so buffers can be read and written), events completed by the test,
/// counted calls, an optional capacity and injectable exhaustion.
pub struct SimPinnedBackend {
    capacity: Option<u64>,
    state: Mutex<SimState>,
}

#[derive(Default)]
struct SimState {
    live: HashMap<u64, u64>,
    used: u64,
    alloc_calls: u64,
    free_calls: u64,
    fail_allocs: u64,
    next_event: u64,
    /// event → (stream it was last recorded on, completed)
    events: HashMap<u64, (Option<StreamId>, bool)>,
}

impl SimPinnedBackend {
    /// A backend that pins at most `capacity` bytes (unlimited with `None`).
    pub fn new(capacity: Option<u64>) -> SimPinnedBackend {
        SimPinnedBackend {
            capacity,
            state: Mutex::new(SimState::default()),
        }
    }

    fn layout(size: u64) -> Result<std::alloc::Layout, DriverError> {
        let size = usize::try_from(size).map_err(|_| DriverError::OutOfMemory)?;
        std::alloc::Layout::from_size_align(size.max(1), PAGE as usize)
            .map_err(|_| DriverError::OutOfMemory)
    }

    /// The next `n` allocations fail with [`DriverError::OutOfMemory`].
    pub fn inject_out_of_memory(&self, n: u64) {
        self.state.lock().fail_allocs = n;
    }

    /// Completes the events recorded on `stream`.
    pub fn complete_stream(&self, stream: StreamId) {
        for e in self.state.lock().events.values_mut() {
            if e.0 == Some(stream) {
                e.1 = true;
            }
        }
    }

    /// Completes every recorded event.
    pub fn complete_all(&self) {
        for e in self.state.lock().events.values_mut() {
            e.1 = true;
        }
    }

    /// Whether `event` has been recorded and not completed.
    pub fn is_pending(&self, event: EventHandle) -> bool {
        self.state
            .lock()
            .events
            .get(&event.0)
            .is_some_and(|e| e.0.is_some() && !e.1)
    }

    /// Bytes currently pinned.
    pub fn used_bytes(&self) -> u64 {
        self.state.lock().used
    }

    /// Blocks currently pinned.
    pub fn live_blocks(&self) -> usize {
        self.state.lock().live.len()
    }

    /// `(alloc, free)` calls made.
    pub fn calls(&self) -> (u64, u64) {
        let s = self.state.lock();
        (s.alloc_calls, s.free_calls)
    }

    /// Events created and not destroyed.
    pub fn live_events(&self) -> usize {
        self.state.lock().events.len()
    }

    fn misuse(call: &'static str, message: impl Into<String>) -> DriverError {
        DriverError::Call {
            call,
            message: message.into(),
        }
    }
}

impl PinnedBackend for SimPinnedBackend {
    fn alloc(&self, size: u64) -> Result<u64, DriverError> {
        let layout = Self::layout(size)?;
        {
            let mut s = self.state.lock();
            s.alloc_calls += 1;
            if s.fail_allocs > 0 {
                s.fail_allocs -= 1;
                return Err(DriverError::OutOfMemory);
            }
            if self.capacity.is_some_and(|c| s.used + size > c) {
                return Err(DriverError::OutOfMemory);
            }
            s.used += size;
        }
        // SAFETY: `layout` has a non-zero size and a power-of-two alignment.
        let p = unsafe { std::alloc::alloc(layout) };
        let mut s = self.state.lock();
        if p.is_null() {
            s.used -= size;
            return Err(DriverError::OutOfMemory);
        }
        s.live.insert(p as usize as u64, size);
        Ok(p as usize as u64)
    }

    fn free(&self, ptr: u64, size: u64) -> Result<(), DriverError> {
        let layout = Self::layout(size)?;
        let mut s = self.state.lock();
        s.free_calls += 1;
        match s.live.get(&ptr) {
            Some(&sz) if sz == size => {
                s.live.remove(&ptr);
                s.used -= size;
            }
            Some(&sz) => {
                return Err(Self::misuse(
                    "free",
                    format!("size {size} != allocated {sz}"),
                ))
            }
            None => return Err(Self::misuse("free", format!("{ptr:#x} is not live"))),
        }
        drop(s);
        // SAFETY: `ptr` was returned by `alloc` with this size, hence this layout,
        // and was live until the line above removed it, so it is freed once.
        unsafe { std::alloc::dealloc(ptr as usize as *mut u8, layout) };
        Ok(())
    }

    fn create_event(&self) -> Result<EventHandle, DriverError> {
        let mut s = self.state.lock();
        s.next_event += 1;
        let id = s.next_event;
        s.events.insert(id, (None, true));
        Ok(EventHandle(id))
    }

    fn destroy_event(&self, event: EventHandle) -> Result<(), DriverError> {
        self.state
            .lock()
            .events
            .remove(&event.0)
            .map(|_| ())
            .ok_or_else(|| Self::misuse("destroy_event", "unknown event"))
    }

    fn record_event(&self, event: EventHandle, stream: StreamId) -> Result<(), DriverError> {
        let mut s = self.state.lock();
        let e = s
            .events
            .get_mut(&event.0)
            .ok_or_else(|| Self::misuse("record_event", "unknown event"))?;
        *e = (Some(stream), false);
        Ok(())
    }

    fn query_event(&self, event: EventHandle) -> Result<bool, DriverError> {
        self.state
            .lock()
            .events
            .get(&event.0)
            .map(|e| e.1)
            .ok_or_else(|| Self::misuse("query_event", "unknown event"))
    }

    fn synchronize_event(&self, event: EventHandle) -> Result<(), DriverError> {
        let mut s = self.state.lock();
        let e = s
            .events
            .get_mut(&event.0)
            .ok_or_else(|| Self::misuse("synchronize_event", "unknown event"))?;
        e.1 = true;
        Ok(())
    }

    fn synchronize_stream(&self, stream: StreamId) -> Result<(), DriverError> {
        self.complete_stream(stream);
        Ok(())
    }
}

impl Drop for SimPinnedBackend {
    fn drop(&mut self) {
        let s = self.state.get_mut();
        for (&p, &size) in &s.live {
            if let Ok(layout) = Self::layout(size) {
                // SAFETY: every live pointer came from `alloc` with this size and
                // has not been freed; the backend is going away, so nothing else
                // can use it.
                unsafe { std::alloc::dealloc(p as usize as *mut u8, layout) };
            }
        }
    }
}

/// The CUDA pinning backend: `cuMemHostAlloc` (flags 0: cached, not
/// write-combined) and `cuMemFreeHost`, events and streams of the device's
/// [`CudaDriver`](crate::driver::cuda::CudaDriver).
#[cfg(feature = "cuda")]
pub struct CudaPinnedBackend {
    driver: Arc<crate::driver::cuda::CudaDriver>,
}

#[cfg(feature = "cuda")]
impl CudaPinnedBackend {
    /// A backend over an open device. Pinned memory belongs to the process, but
    /// the events are the device's: record only streams of this device.
    pub fn new(driver: Arc<crate::driver::cuda::CudaDriver>) -> CudaPinnedBackend {
        CudaPinnedBackend { driver }
    }

    /// Opens device `ordinal` for pinning (a typed `Unavailable` error without
    /// CUDA).
    pub fn open(ordinal: usize) -> Result<CudaPinnedBackend, DriverError> {
        crate::driver::cuda::CudaDriver::new(ordinal).map(CudaPinnedBackend::new)
    }

    /// The device driver.
    pub fn driver(&self) -> &Arc<crate::driver::cuda::CudaDriver> {
        &self.driver
    }
}

#[cfg(feature = "cuda")]
impl PinnedBackend for CudaPinnedBackend {
    fn alloc(&self, size: u64) -> Result<u64, DriverError> {
        self.driver.host_alloc(size)
    }

    fn free(&self, ptr: u64, _size: u64) -> Result<(), DriverError> {
        self.driver.host_free(ptr)
    }

    fn create_event(&self) -> Result<EventHandle, DriverError> {
        crate::Driver::create_event(&*self.driver)
    }

    fn destroy_event(&self, event: EventHandle) -> Result<(), DriverError> {
        crate::Driver::destroy_event(&*self.driver, event)
    }

    fn record_event(&self, event: EventHandle, stream: StreamId) -> Result<(), DriverError> {
        crate::Driver::record_event(&*self.driver, event, stream)
    }

    fn query_event(&self, event: EventHandle) -> Result<bool, DriverError> {
        crate::Driver::query_event(&*self.driver, event)
    }

    fn synchronize_event(&self, event: EventHandle) -> Result<(), DriverError> {
        crate::Driver::synchronize_event(&*self.driver, event)
    }

    fn synchronize_stream(&self, stream: StreamId) -> Result<(), DriverError> {
        crate::Driver::synchronize_stream(&*self.driver, stream)
    }
}

/// The pinned allocator of a CUDA device.
#[cfg(feature = "cuda")]
pub type CudaPinnedAllocator = PinnedAllocator<CudaPinnedBackend>;

/// The process-wide pinned allocator whose events live on CUDA device
/// `ordinal`, created on first use (PyTorch keeps one host allocator per
/// process; strata keeps one per device, because events belong to a device).
/// Fails with [`DriverError::Unavailable`] without CUDA; never panics.
#[cfg(feature = "cuda")]
pub fn cuda_allocator(ordinal: usize) -> Result<Arc<CudaPinnedAllocator>, DriverError> {
    static REGISTRY: std::sync::OnceLock<Mutex<HashMap<usize, Arc<CudaPinnedAllocator>>>> =
        std::sync::OnceLock::new();
    let registry = REGISTRY.get_or_init(|| Mutex::new(HashMap::new()));
    if let Some(a) = registry.lock().get(&ordinal) {
        return Ok(Arc::clone(a));
    }
    // Open outside the lock: opening a device can take a while.
    let created = PinnedAllocator::new(CudaPinnedBackend::open(ordinal)?);
    Ok(Arc::clone(
        registry.lock().entry(ordinal).or_insert(created),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const KIB: u64 = 1 << 10;
    const MIB: u64 = 1 << 20;

    fn sim(
        capacity: Option<u64>,
    ) -> (
        Arc<SimPinnedBackend>,
        Arc<PinnedAllocator<Arc<SimPinnedBackend>>>,
    ) {
        let b = Arc::new(SimPinnedBackend::new(capacity));
        (Arc::clone(&b), PinnedAllocator::new(b))
    }

    #[test]
    fn size_classes_are_pages_then_eighths() {
        assert_eq!(size_class(1), PAGE);
        assert_eq!(size_class(PAGE), PAGE);
        assert_eq!(size_class(PAGE + 1), 2 * PAGE);
        assert_eq!(size_class(20 * KIB + 1), 24 * KIB); // page rounding below 32 KiB
        assert_eq!(size_class(33 * KIB), 36 * KIB); // 32 KiB / 8 = 4 KiB steps
        assert_eq!(size_class(65 * KIB), 72 * KIB); // 64 KiB / 8 = 8 KiB steps
        assert_eq!(size_class(129 * MIB + MIB / 2), 144 * MIB);
        assert_eq!(size_class(1 << 40), 1 << 40);
        assert_eq!(size_class((1 << 40) + 1), (1 << 40) + (1 << 37));
    }

    proptest! {
        #[test]
        fn size_class_bounds(size in 1u64..(1 << 45)) {
            let c = size_class(size);
            prop_assert!(c >= size);
            prop_assert_eq!(c % PAGE, 0);
            // Waste: under a page up to 32 KiB, under 1/8 of the request above.
            if size <= 32 * KIB {
                prop_assert!(c - size < PAGE);
            } else {
                prop_assert!((c - size) * 8 < size, "{} -> {}", size, c);
            }
            // Monotone, and a class is its own class.
            prop_assert!(size_class(size + 1) >= c);
            prop_assert_eq!(size_class(c), c);
        }
    }

    #[test]
    fn a_freed_block_is_reused_without_a_backend_call() {
        let (b, a) = sim(None);
        let x = a.allocate(100 * KIB).unwrap();
        let p = x.ptr();
        assert_eq!(x.capacity(), size_class(100 * KIB));
        drop(x);
        assert_eq!(a.cached_bytes(), size_class(100 * KIB));
        let y = a.allocate(100 * KIB - 5).unwrap();
        assert_eq!(y.ptr(), p);
        assert_eq!(b.calls(), (1, 0));
        let s = a.stats();
        assert_eq!(s.num_host_alloc, 1);
        assert_eq!(s.allocations.current, 1);
        assert_eq!(s.active_requests.current, 1);
        assert_eq!(s.active_requests.allocated, 2);
        assert_eq!(s.active_bytes.current, y.capacity() as i64);
        a.check_consistency().unwrap();
    }

    #[test]
    fn a_slightly_larger_cached_block_serves_but_a_much_larger_one_does_not() {
        let (_b, a) = sim(None);
        // class(40000) = 40 KiB; 44 KiB is within 1/8 above it, 48 KiB is not.
        let big = a.allocate(48 * KIB).unwrap();
        let mid = a.allocate(44 * KIB).unwrap();
        let (pb, pm) = (big.ptr(), mid.ptr());
        drop(big);
        drop(mid);
        let x = a.allocate(40_000).unwrap();
        assert_eq!((x.ptr(), x.capacity()), (pm, 44 * KIB));
        let y = a.allocate(40_000).unwrap();
        assert_ne!(y.ptr(), pb, "a 48 KiB block must not serve a 40 KiB class");
        assert_eq!(y.capacity(), 40 * KIB);
        a.check_consistency().unwrap();
    }

    #[test]
    fn recorded_streams_defer_reuse_until_every_event_completes() {
        let (b, a) = sim(None);
        let x = a.allocate(MIB).unwrap();
        let p = x.ptr();
        x.record_stream(StreamId(1)).unwrap();
        x.record_stream(StreamId(2)).unwrap();
        x.record_stream(StreamId(1)).unwrap(); // once per stream
        drop(x);
        assert_eq!(a.pending_events(), 2);
        assert_eq!(
            a.stats().active_requests.current,
            1,
            "pending blocks stay active"
        );
        let y = a.allocate(MIB).unwrap();
        assert_ne!(y.ptr(), p);
        b.complete_stream(StreamId(1));
        let z = a.allocate(MIB).unwrap();
        assert_ne!(z.ptr(), p, "stream 2 may still be copying");
        b.complete_stream(StreamId(2));
        let w = a.allocate(MIB).unwrap();
        assert_eq!(w.ptr(), p);
        assert_eq!(a.pending_events(), 0);
        a.check_consistency().unwrap();
        // Events are pooled: the two created are reused.
        drop(w);
        let v = a.allocate(MIB).unwrap();
        v.record_stream(StreamId(3)).unwrap();
        drop(v);
        assert_eq!(b.live_events(), 2);
    }

    #[test]
    fn record_event_accepts_interior_pointers_and_rejects_strangers() {
        let (_b, a) = sim(None);
        let x = a.allocate(10 * KIB).unwrap();
        a.record_event(x.ptr() + 100, StreamId(4)).unwrap();
        assert_eq!(
            a.record_event(x.ptr() + x.capacity(), StreamId(4)),
            Err(PinnedError::InvalidPointer {
                ptr: x.ptr() + x.capacity()
            })
        );
        assert!(a.record_event(8, StreamId(4)).is_err());
        let p = x.ptr();
        drop(x);
        assert_eq!(a.pending_events(), 1);
        // A cached (not live) block cannot be recorded either.
        assert!(a.record_event(p, StreamId(4)).is_err());
    }

    #[test]
    fn empty_cache_frees_ready_blocks_and_keeps_pending_ones() {
        let (b, a) = sim(None);
        let x = a.allocate(8 * KIB).unwrap();
        let y = a.allocate(MIB).unwrap();
        let keep = a.allocate(3 * MIB).unwrap();
        y.record_stream(StreamId(9)).unwrap();
        drop(x);
        drop(y);
        a.empty_cache().unwrap();
        assert_eq!(
            b.live_blocks(),
            2,
            "the pending block and the live one stay"
        );
        assert_eq!(a.stats().num_host_free, 1);
        b.complete_all();
        a.empty_cache().unwrap();
        assert_eq!(b.live_blocks(), 1);
        assert_eq!(b.used_bytes(), keep.capacity());
        let s = a.stats();
        assert_eq!(s.allocations.current, 1);
        assert_eq!(s.allocations.freed, 2);
        assert_eq!(s.allocated_bytes.peak, (8 * KIB + MIB + 3 * MIB) as i64);
        assert_eq!(s.host_free_time.count, 2);
        a.check_consistency().unwrap();
    }

    #[test]
    fn exhaustion_empties_the_cache_and_retries_then_fails_with_figures() {
        let (b, a) = sim(Some(4 * MIB));
        let x = a.allocate(2 * MIB).unwrap();
        drop(x); // cached: 2 MiB pinned, 0 in use
                 // 3 MiB does not fit next to the cached 2 MiB; the cache is emptied.
        let y = a.allocate(3 * MIB).unwrap();
        assert_eq!(b.used_bytes(), 3 * MIB);
        assert_eq!(a.stats().num_host_free, 1);
        match a.allocate(2 * MIB) {
            Err(PinnedError::OutOfMemory {
                requested,
                block_size,
                held,
                active,
            }) => {
                assert_eq!((requested, block_size), (2 * MIB, 2 * MIB));
                assert_eq!((held, active), (3 * MIB, 3 * MIB));
            }
            other => panic!("expected OutOfMemory, got {other:?}"),
        }
        let msg = a.allocate(2 * MIB).unwrap_err().to_string();
        assert!(msg.contains("out of pinned host memory"), "{msg}");
        drop(y);
        assert!(a.allocate(2 * MIB).is_ok());
        // Injected exhaustion on both tries is reported too; absurd sizes at once.
        b.inject_out_of_memory(2);
        assert!(matches!(
            a.allocate(64 * KIB),
            Err(PinnedError::OutOfMemory { .. })
        ));
        assert!(matches!(
            a.allocate(u64::MAX),
            Err(PinnedError::OutOfMemory { .. })
        ));
        a.check_consistency().unwrap();
    }

    #[test]
    fn handles_cross_threads() {
        fn send_sync<T: Send + Sync>() {}
        send_sync::<PinnedAllocator<SimPinnedBackend>>();
        send_sync::<PinnedBuffer<SimPinnedBackend>>();
        #[cfg(feature = "cuda")]
        send_sync::<PinnedBuffer<CudaPinnedBackend>>();
    }

    #[test]
    fn zero_bytes_is_an_empty_buffer() {
        let (b, a) = sim(None);
        let x = a.allocate(0).unwrap();
        assert!(x.is_empty());
        assert_eq!(x.ptr(), 0);
        x.record_stream(StreamId(1)).unwrap();
        drop(x);
        assert_eq!(b.calls(), (0, 0));
        assert_eq!(a.stats(), PinnedStats::default());
    }

    #[test]
    fn buffers_are_real_writable_memory() {
        let (_b, a) = sim(None);
        let mut x = a.allocate(5000).unwrap();
        // SAFETY: the sim backend hands out real host memory; no copy is in flight.
        unsafe {
            x.as_mut_slice().fill(0xab);
            assert!(x.as_slice().iter().all(|&v| v == 0xab));
            assert_eq!(x.as_slice().len(), 5000);
        }
        assert_eq!(x.ptr() % PAGE, 0);
    }

    #[test]
    fn dropping_the_allocator_returns_everything() {
        let b = Arc::new(SimPinnedBackend::new(None));
        {
            let a = PinnedAllocator::new(Arc::clone(&b));
            let x = a.allocate(MIB).unwrap();
            let y = a.allocate(KIB).unwrap();
            x.record_stream(StreamId(5)).unwrap();
            drop(x); // pending
            drop(y); // cached
            assert_eq!(b.live_blocks(), 2);
        }
        assert_eq!(b.live_blocks(), 0);
        assert_eq!(b.live_events(), 0);
    }

    #[test]
    fn stats_map_has_pytorch_keys_and_resets_work() {
        let (_b, a) = sim(None);
        let x = a.allocate(KIB).unwrap();
        drop(x);
        let m = a.stats().to_map();
        assert_eq!(m["allocations.current"], 1);
        assert_eq!(m["active_requests.peak"], 1);
        assert_eq!(m["num_host_alloc"], 1);
        assert_eq!(m["host_alloc_time.count"], 1);
        a.reset_peak_stats();
        assert_eq!(a.stats().active_requests.peak, 0);
        a.reset_accumulated_stats();
        let s = a.stats();
        assert_eq!((s.allocations.allocated, s.num_host_alloc), (0, 0));
        assert_eq!(s.allocations.current, 1);
    }

    #[test]
    fn concurrent_use_keeps_the_books_straight() {
        let (b, a) = sim(None);
        std::thread::scope(|sc| {
            for t in 0..4u64 {
                let a = &a;
                sc.spawn(move || {
                    for i in 0..200u64 {
                        let x = a.allocate(1 + (i * 7919 + t) % (256 * KIB)).unwrap();
                        if i % 3 == 0 {
                            x.record_stream(StreamId(t + 1)).unwrap();
                        }
                    }
                });
            }
        });
        b.complete_all();
        a.process_pending_events();
        a.check_consistency().unwrap();
        let s = a.stats();
        assert_eq!(s.active_requests.current, 0);
        assert_eq!(s.allocations.current as usize, b.live_blocks());
        a.empty_cache().unwrap();
        assert_eq!(b.live_blocks(), 0);
    }

    #[derive(Clone, Debug)]
    enum Op {
        Alloc(u64),
        Free(usize),
        Record(usize, u64),
        Complete(u64),
        EmptyCache,
        Settle,
    }

    fn op() -> impl Strategy<Value = Op> {
        let sizes = prop::sample::select(vec![
            1,
            4096,
            5000,
            40_000,
            44 * KIB,
            45_000,
            100_000,
            MIB,
            MIB + 1,
        ]);
        prop_oneof![
            4 => sizes.prop_map(Op::Alloc),
            3 => any::<usize>().prop_map(Op::Free),
            3 => (any::<usize>(), 1u64..4).prop_map(|(i, s)| Op::Record(i, s)),
            2 => (1u64..4).prop_map(Op::Complete),
            1 => Just(Op::EmptyCache),
            1 => Just(Op::Settle),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]
        #[test]
        fn random_sequences_keep_every_invariant(ops in prop::collection::vec(op(), 1..80)) {
            let (b, a) = sim(None);
            // Live buffers, and freed blocks whose streams the model has not seen
            // complete yet (address -> (size, streams)).
            let mut live: Vec<PinnedBuffer<Arc<SimPinnedBackend>>> = Vec::new();
            let mut guarded: Vec<(u64, u64, Vec<u64>)> = Vec::new();
            let mut recorded: HashMap<u64, Vec<u64>> = HashMap::new();
            for op in ops {
                match op {
                    Op::Alloc(size) => {
                        let x = a.allocate(size).unwrap();
                        let (p, c) = (x.ptr(), x.capacity());
                        prop_assert!(c >= size);
                        for y in &live {
                            prop_assert!(p + c <= y.ptr() || y.ptr() + y.capacity() <= p,
                                "{:#x}+{} overlaps live {:#x}+{}", p, c, y.ptr(), y.capacity());
                        }
                        for (q, qs, streams) in &guarded {
                            prop_assert!(p + c <= *q || q + qs <= p,
                                "{:#x} reused while streams {:?} may still use it", p, streams);
                        }
                        live.push(x);
                    }
                    Op::Free(i) if !live.is_empty() => {
                        let x = live.swap_remove(i % live.len());
                        let streams = recorded.remove(&x.ptr()).unwrap_or_default();
                        if !streams.is_empty() {
                            guarded.push((x.ptr(), x.capacity(), streams));
                        }
                        drop(x);
                    }
                    Op::Record(i, s) if !live.is_empty() => {
                        let x = &live[i % live.len()];
                        x.record_stream(StreamId(s)).unwrap();
                        let v = recorded.entry(x.ptr()).or_default();
                        if !v.contains(&s) {
                            v.push(s);
                        }
                    }
                    Op::Complete(s) => {
                        b.complete_stream(StreamId(s));
                        for g in &mut guarded {
                            g.2.retain(|&t| t != s);
                        }
                        guarded.retain(|g| !g.2.is_empty());
                    }
                    Op::EmptyCache => a.empty_cache().unwrap(),
                    Op::Settle => {
                        b.complete_all();
                        guarded.clear();
                        a.process_pending_events();
                        let s = a.stats();
                        prop_assert_eq!(s.active_requests.current, live.len() as i64);
                        prop_assert_eq!(
                            s.active_bytes.current,
                            live.iter().map(|x| x.capacity() as i64).sum::<i64>()
                        );
                        prop_assert_eq!(a.pending_events(), 0);
                    }
                    _ => {}
                }
                a.check_consistency().map_err(TestCaseError::fail)?;
                let s = a.stats();
                prop_assert_eq!(s.allocations.current as usize, b.live_blocks());
                prop_assert_eq!(s.allocated_bytes.current as u64, b.used_bytes());
                prop_assert_eq!(s.num_host_alloc - s.num_host_free, b.live_blocks() as u64);
                prop_assert!(s.active_requests.current >= live.len() as i64);
                prop_assert!(s.allocations.peak >= s.allocations.current);
            }
            drop(live);
            drop(a);
            prop_assert_eq!(b.live_blocks(), 0);
            prop_assert_eq!(b.live_events(), 0);
        }
    }
}
