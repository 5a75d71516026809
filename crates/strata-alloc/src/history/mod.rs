//! Memory history: a bounded record of what the allocator did, in the format of
//! the allocation traces strata is measured on (`../shared/traces`), so a
//! recording of your own program can be inspected, or replayed through the
//! `replay` example under another configuration.
//!
//! Recording is off by default and costs one branch per operation when off.
//! When on, entries go into a ring buffer allocated up front (the oldest entry
//! is dropped once it is full), so the cache-hit path still allocates nothing.
//!
//! ```
//! use std::sync::Arc;
//! use strata_alloc::{AllocatorConfig, CachingAllocator, StreamId};
//! use strata_alloc::driver::sim::SimDriver;
//! use strata_alloc::history::Action;
//!
//! let a = CachingAllocator::new(Arc::new(SimDriver::h100()), AllocatorConfig::default());
//! a.record_history(Some(1000));
//! let x = a.allocate(4096, StreamId::DEFAULT).unwrap();
//! drop(x);
//! let h = a.history();
//! assert!(h.iter().any(|e| e.action == Action::Alloc && e.size == 4096));
//! assert!(h.iter().any(|e| e.action == Action::FreeCompleted));
//! let json = a.history_json("my_program");
//! assert!(json.contains("\"events\""));
//! ```

mod clock;
mod ring;

use crate::block::Block;
use crate::driver::StreamId;
use clock::Clock;
use ring::{Ring, Slot, FREE_NOW, META_TIME_SHIFT};
use rustc_hash::FxHashMap;
use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::hash::{BuildHasherDefault, Hasher};
use std::panic::Location;
use std::sync::Arc;

/// Where an allocation was asked for: the first caller outside strata's
/// `#[track_caller]` chain (a tensor constructor, an op, or
/// [`CachingAllocator::allocate`](crate::CachingAllocator::allocate) itself).
///
/// Recorded only while history is on; it is a pointer to a location the
/// compiler placed in the binary, so recording it costs a copy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CallSite {
    /// The source file.
    pub file: &'static str,
    /// The line (1-based).
    pub line: u32,
    /// The column (1-based).
    pub column: u32,
}

impl CallSite {
    /// The call site of a `#[track_caller]` location.
    pub fn from_location(l: &'static Location<'static>) -> CallSite {
        CallSite {
            file: l.file(),
            line: l.line(),
            column: l.column(),
        }
    }
}

impl fmt::Display for CallSite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.file, self.line, self.column)
    }
}

/// How much the history records about each allocation's origin.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum HistoryLevel {
    /// The call site (file, line, column) of each allocation: a few
    /// nanoseconds per allocation.
    #[default]
    CallSites,
    /// The call site and a full backtrace of each live allocation
    /// (`std::backtrace`): microseconds per allocation; for a short run that
    /// needs the whole stack.
    Backtraces,
}

/// Which records keep the call site (and, at [`HistoryLevel::Backtraces`],
/// the backtrace) of an allocation: PyTorch's `context` argument of
/// `_record_memory_history`. Each level keeps what the one before it keeps.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub enum HistoryContext {
    /// No call site anywhere (`context=None`): the history records what
    /// happened, not where.
    None,
    /// The call sites of the allocations still live, for snapshots,
    /// reports and [`allocation_origin`](crate::CachingAllocator::allocation_origin)
    /// (`"state"`); trace entries carry none.
    State,
    /// Also the call site on each `alloc` trace entry (`"alloc"`).
    Alloc,
    /// Also on the `free_requested` and `free_completed` entries (`"all"`,
    /// the default). strata's frees carry the call site of the allocation
    /// they free (PyTorch's carry the stack of the free: in Rust a free is
    /// a `Drop`, whose caller the compiler does not track).
    #[default]
    All,
}

/// How to record history: PyTorch's `_record_memory_history(enabled,
/// context, stacks, max_entries, skip_actions)`, for
/// [`CachingAllocator::record_history_opts`](crate::CachingAllocator::record_history_opts).
///
/// ```
/// use strata_alloc::history::{Action, HistoryContext, HistoryOptions};
/// // enabled="all", context="alloc", skip_actions=["free_requested"]
/// let o = HistoryOptions::new(10_000)
///     .context(HistoryContext::Alloc)
///     .skip(&[Action::FreeRequested]);
/// assert!(o.trace && o.skip_actions == [Action::FreeRequested]);
/// // enabled="state": the live allocations' call sites, a one-entry trace.
/// assert!(!HistoryOptions::new(1).state_only().trace);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HistoryOptions {
    /// The bound on trace entries kept (the oldest go first): PyTorch's
    /// `max_entries`. 0 keeps one entry, as PyTorch's
    /// `RingBuffer::setMaxEntries` does (`std::max(1, max_entries)`).
    pub max_entries: usize,
    /// Whether to keep a trace of the events (`enabled="all"`, the
    /// default) or mainly the state of the live allocations
    /// (`enabled="state"`), whose trace keeps only the latest event, as
    /// PyTorch's `_record_memory_history` sets `max_entries` to 1 unless
    /// `enabled="all"`.
    pub trace: bool,
    /// Which records keep call sites (`context`).
    pub context: HistoryContext,
    /// Call sites alone or full backtraces too (`stacks`).
    pub level: HistoryLevel,
    /// Actions left out of the trace (`skip_actions`).
    pub skip_actions: Vec<Action>,
}

impl HistoryOptions {
    /// Room for `max_entries` trace entries, every action traced, call
    /// sites everywhere ([`HistoryContext::All`], [`HistoryLevel::CallSites`]).
    pub fn new(max_entries: usize) -> HistoryOptions {
        HistoryOptions {
            max_entries,
            trace: true,
            context: HistoryContext::All,
            level: HistoryLevel::CallSites,
            skip_actions: Vec::new(),
        }
    }

    /// With `context`.
    pub fn context(mut self, context: HistoryContext) -> HistoryOptions {
        self.context = context;
        self
    }

    /// With `level`.
    pub fn level(mut self, level: HistoryLevel) -> HistoryOptions {
        self.level = level;
        self
    }

    /// Leaving `actions` out of the trace.
    pub fn skip(mut self, actions: &[Action]) -> HistoryOptions {
        self.skip_actions = actions.to_vec();
        self
    }

    /// Keeping the live allocations' call sites and, of the trace, only
    /// the latest event (`enabled="state"`: PyTorch keeps a one-entry trace
    /// then).
    pub fn state_only(mut self) -> HistoryOptions {
        self.trace = false;
        self
    }
}

/// What the history records, once turned on (from [`HistoryOptions`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Recording {
    pub level: HistoryLevel,
    pub context: HistoryContext,
    /// One bit per action code left out of the trace.
    pub skip: u16,
}

impl Recording {
    /// What `opts` asks for.
    pub fn of(opts: &HistoryOptions) -> Recording {
        let skip = opts
            .skip_actions
            .iter()
            .fold(0u16, |m, &a| m | (1 << a as u16));
        Recording {
            level: opts.level,
            context: opts.context,
            skip,
        }
    }

    /// Call sites and backtraces only at [`HistoryLevel::CallSites`].
    pub fn with_level(level: HistoryLevel) -> Recording {
        Recording {
            level,
            ..Recording::default()
        }
    }
}

/// One frame of a stack (PyTorch's `name`, `filename`, `line`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Frame {
    /// The function, when known.
    pub name: String,
    /// The source file.
    pub filename: String,
    /// The line.
    pub line: u32,
}

/// The frames of a captured backtrace (innermost first), from its printed form.
pub(crate) fn backtrace_frames(bt: &std::backtrace::Backtrace) -> Vec<Frame> {
    let text = bt.to_string();
    let mut out: Vec<Frame> = Vec::new();
    let mut name: Option<String> = None;
    for line in text.lines() {
        let t = line.trim();
        if let Some(at) = t.strip_prefix("at ") {
            // `at file:line:col`
            let mut parts = at.rsplitn(3, ':');
            let _col = parts.next();
            let line_no = parts.next().and_then(|l| l.parse().ok()).unwrap_or(0);
            let file = parts.next().unwrap_or(at).to_string();
            out.push(Frame {
                name: name.take().unwrap_or_default(),
                filename: file,
                line: line_no,
            });
        } else if let Some((_, n)) = t.split_once(": ") {
            if let Some(prev) = name.take() {
                out.push(Frame {
                    name: prev,
                    filename: "??".into(),
                    line: 0,
                });
            }
            name = Some(n.to_string());
        }
    }
    if let Some(prev) = name {
        out.push(Frame {
            name: prev,
            filename: "??".into(),
            line: 0,
        });
    }
    out
}

/// Where a live allocation was made, as the history recorded it
/// ([`CachingAllocator::allocation_origin`](crate::CachingAllocator::allocation_origin)).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AllocationOrigin {
    /// The call site of the allocation.
    pub site: Option<CallSite>,
    /// Its backtrace, innermost frame first, when recorded at
    /// [`HistoryLevel::Backtraces`] (empty otherwise).
    pub frames: Vec<Frame>,
    /// The size asked for, in bytes.
    pub size: u64,
}

/// What the history knows about a live allocation (built from the block and
/// the history when asked for: see [`crate::state::State::recorded_live`]).
#[derive(Clone, Debug)]
pub(crate) struct LiveAlloc {
    /// Where it was asked for (see [`LiveAlloc::site`]).
    pub location: Option<&'static Location<'static>>,
    pub size: u64,
    pub backtrace: Option<Arc<std::backtrace::Backtrace>>,
    /// Order of allocation (1, 2, …) since recording started.
    pub seq: u64,
}

impl LiveAlloc {
    /// The call site.
    pub fn site(&self) -> Option<CallSite> {
        self.location.map(CallSite::from_location)
    }
}

/// What happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// A block was handed out (`size` = the caller's size).
    Alloc,
    /// The caller freed a block (it may still wait for other streams).
    FreeRequested,
    /// The block went back to the cache.
    FreeCompleted,
    /// A segment was obtained with `malloc`.
    SegmentAlloc,
    /// A segment was returned with `free`.
    SegmentFree,
    /// Pages were mapped into an expandable segment.
    SegmentMap,
    /// Pages were unmapped from an expandable segment.
    SegmentUnmap,
    /// An allocation failed for lack of memory (`addr` = free device memory).
    Oom,
    /// A snapshot was taken (`size` = active bytes at that moment, as in
    /// PyTorch's trace).
    Snapshot,
    /// Metadata attached after the fact to a live allocation
    /// ([`CachingAllocator::annotate_memory`](crate::CachingAllocator::annotate_memory);
    /// PyTorch 2.15's `annotate`): `addr` = the allocation's address,
    /// `size` = the caller's size, `user_metadata` = the annotation.
    Annotate,
}

impl Action {
    /// Every action, by its code in the ring buffer.
    const ALL: [Action; 10] = [
        Action::Alloc,
        Action::FreeRequested,
        Action::FreeCompleted,
        Action::SegmentAlloc,
        Action::SegmentFree,
        Action::SegmentMap,
        Action::SegmentUnmap,
        Action::Oom,
        Action::Snapshot,
        Action::Annotate,
    ];

    /// The action a trace file's name stands for (PyTorch's names, as
    /// `skip_actions` takes them); `None` for any other string.
    ///
    /// ```
    /// use strata_alloc::history::Action;
    /// assert_eq!(Action::from_name("free_requested"), Some(Action::FreeRequested));
    /// assert_eq!(Action::from_name("user_defined"), None);
    /// ```
    pub fn from_name(name: &str) -> Option<Action> {
        Action::ALL.into_iter().find(|a| a.name() == name)
    }

    /// The name used in trace files (PyTorch's).
    pub fn name(self) -> &'static str {
        match self {
            Action::Alloc => "alloc",
            Action::FreeRequested => "free_requested",
            Action::FreeCompleted => "free_completed",
            Action::SegmentAlloc => "segment_alloc",
            Action::SegmentFree => "segment_free",
            Action::SegmentMap => "segment_map",
            Action::SegmentUnmap => "segment_unmap",
            Action::Oom => "oom",
            Action::Snapshot => "snapshot",
            Action::Annotate => "annotate",
        }
    }
}

/// One recorded event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceEntry {
    /// What happened.
    pub action: Action,
    /// The address concerned.
    pub addr: u64,
    /// The size concerned.
    pub size: u64,
    /// The stream.
    pub stream: StreamId,
    /// Microseconds since recording started.
    pub time_us: u64,
    /// Where the allocation was asked for (`Alloc` events, and the frees of
    /// allocations whose call site was recorded).
    pub site: Option<CallSite>,
    /// The user's metadata in force when the event was recorded
    /// ([`CachingAllocator::set_memory_metadata`](crate::CachingAllocator::set_memory_metadata);
    /// PyTorch's `user_metadata`), `None` when there was none.
    pub user_metadata: Option<Arc<str>>,
}

/// Hashes a device address for the backtrace map: one folded
/// multiplication instead of SipHash. Addresses are not chosen by an
/// adversary, and the multiplication spreads their low (alignment) bits and
/// high bits over the whole word, which hashbrown needs (it takes the bucket
/// from the low bits and the tag from the top seven).
#[derive(Default, Clone, Copy)]
pub(crate) struct AddrHasher(u64);

impl Hasher for AddrHasher {
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }

    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        // Only `write_u64` is used for addresses; other keys fold bytewise.
        for &b in bytes {
            self.write_u64(b as u64);
        }
    }

    #[inline]
    fn write_u64(&mut self, x: u64) {
        const K: u64 = 0x9E37_79B9_7F4A_7C15;
        let m = ((self.0 ^ x) as u128) * K as u128;
        self.0 = (m as u64) ^ ((m >> 64) as u64);
    }
}

/// Backtraces of live allocations by address.
pub(crate) type BacktraceMap =
    HashMap<u64, Arc<std::backtrace::Backtrace>, BuildHasherDefault<AddrHasher>>;

/// Streams the history's table indexes (a slot keeps a 16-bit index); the
/// streams of the entries beyond them are kept beside the ring.
const STREAM_TABLE: usize = u16::MAX as usize;

/// The index of a slot whose stream is not in the table.
const OVERFLOW: u16 = u16::MAX;

/// The ring buffer behind the allocator's lock.
pub(crate) struct History {
    ring: Ring,
    /// The streams of the entries, by the index their slots keep (at most
    /// [`STREAM_TABLE`] of them).
    streams: Vec<StreamId>,
    /// The index of each stream in `streams`.
    stream_index: FxHashMap<StreamId, u16>,
    /// The streams of the slots written once `streams` was full (their
    /// index is [`OVERFLOW`]), by slot number, oldest first; trimmed to the
    /// slots the ring still holds.
    overflow: VecDeque<(u64, StreamId)>,
    /// The stream looked up last and its index ([`OVERFLOW`] before any).
    last_stream: (StreamId, u16),
    /// The user's metadata in force from each slot number on, oldest first
    /// (one element while it has not changed since recording started);
    /// trimmed to the slots the ring still holds.
    metadata: VecDeque<(u64, Option<Arc<str>>)>,
    capacity: usize,
    /// What is recorded (level of detail, call sites, actions skipped).
    pub rec: Recording,
    clock: Clock,
    /// The backtraces of live (and pending-free) allocations by address,
    /// while recording at [`HistoryLevel::Backtraces`]. (Their call sites
    /// and order are kept in their blocks: `Block::hist_seq`.)
    pub backtraces: BacktraceMap,
    /// Allocations recorded so far (the last `LiveAlloc::seq`).
    pub seq: u64,
    /// The call that the segment events being recorded come from: the
    /// allocation whose slow path maps or releases memory, or the caller of
    /// `empty_cache` (see [`History::push`]).
    pub cause: Option<&'static Location<'static>>,
    /// The call site of the allocation that made each live ordinary
    /// segment, by base address, for segments made while recording with
    /// call sites ([`HistoryContext::State`] on): PyTorch's
    /// `context_when_segment_allocated`, a segment's `frames`.
    pub segment_sites: FxHashMap<u64, &'static Location<'static>>,
    /// The allocator this history belongs to (the key of its threads'
    /// metadata, [`thread_metadata`]).
    pub owner: u64,
    /// Some thread has set metadata for this allocator: each event looks
    /// its thread's up.
    pub metadata_seen: bool,
}

thread_local! {
    /// Each thread's metadata, per allocator id: PyTorch keeps
    /// `user_metadata` per thread (`thread_local std::string
    /// DeviceCachingAllocator::user_metadata`).
    static THREAD_METADATA: std::cell::RefCell<Vec<(u64, Arc<str>)>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// The calling thread's metadata for allocator `owner` (`None` when it set
/// none, or set it empty, and once the thread's metadata is destroyed as
/// the thread exits: an allocation made or freed by a thread-local
/// destructor, where `with` would panic and the panic abort the process).
pub(crate) fn thread_metadata(owner: u64) -> Option<Arc<str>> {
    THREAD_METADATA
        .try_with(|t| {
            t.borrow()
                .iter()
                .find(|(o, _)| *o == owner)
                .map(|(_, m)| Arc::clone(m))
        })
        .ok()
        .flatten()
}

/// Sets the calling thread's metadata for allocator `owner` (an empty
/// string removes it); does nothing once the thread's metadata is
/// destroyed (a thread-local destructor of an exiting thread), where it
/// reads as none.
pub(crate) fn set_thread_metadata(owner: u64, metadata: &str) {
    let _ = THREAD_METADATA.try_with(|t| {
        let mut t = t.borrow_mut();
        t.retain(|(o, _)| *o != owner);
        if !metadata.is_empty() {
            t.push((owner, Arc::from(metadata)));
        }
    });
}

impl Default for History {
    fn default() -> History {
        History {
            ring: Ring::default(),
            streams: Vec::new(),
            stream_index: FxHashMap::default(),
            overflow: VecDeque::new(),
            last_stream: (StreamId(u64::MAX), OVERFLOW),
            metadata: VecDeque::from([(0, None)]),
            capacity: 0,
            rec: Recording::default(),
            clock: Clock::new(),
            backtraces: BacktraceMap::default(),
            seq: 0,
            cause: None,
            segment_sites: FxHashMap::default(),
            owner: 0,
            metadata_seen: false,
        }
    }
}

impl History {
    pub fn enabled(&self) -> bool {
        self.capacity > 0
    }

    /// Turns recording on with room for `capacity` entries, or off with
    /// `None` (which forgets what was recorded). As in PyTorch, turning it
    /// on while it is on keeps what was recorded: the newest `capacity`
    /// entries stay, and the backtraces stay while the level stays
    /// [`HistoryLevel::Backtraces`]; the new context and skipped actions
    /// apply to what is recorded from then on. Returns whether the record
    /// was cleared; the caller then clears the blocks' records
    /// (`Block::hist_seq`, [`crate::state::State::set_history`]).
    pub fn set(&mut self, capacity: Option<usize>, rec: Recording) -> bool {
        match capacity {
            Some(n) if self.enabled() => {
                if n != self.capacity {
                    self.ring.resize(n);
                    self.capacity = n;
                }
                if rec.level != HistoryLevel::Backtraces {
                    self.backtraces.clear();
                }
                self.rec = rec;
                false
            }
            _ => {
                self.reset(capacity, rec);
                true
            }
        }
    }

    /// Forgets the recorded entries and goes on recording with the same
    /// bound and options, keeping what describes live memory: the
    /// backtraces of live allocations and the call sites of segments
    /// (PyTorch's `clear_history=True` clears its trace buffer only).
    pub fn clear_entries(&mut self) {
        let backtraces = std::mem::take(&mut self.backtraces);
        let segment_sites = std::mem::take(&mut self.segment_sites);
        self.reset(Some(self.capacity), self.rec);
        self.backtraces = backtraces;
        self.segment_sites = segment_sites;
    }

    /// Starts afresh: room for `capacity` entries (off with `None`), nothing
    /// recorded.
    pub fn reset(&mut self, capacity: Option<usize>, rec: Recording) {
        self.capacity = capacity.unwrap_or(0);
        self.rec = rec;
        self.ring = Ring::new(self.capacity);
        self.streams.clear();
        self.stream_index.clear();
        self.overflow.clear();
        self.last_stream = (StreamId(u64::MAX), OVERFLOW);
        self.metadata = VecDeque::from([(0, None)]);
        self.backtraces = BacktraceMap::default();
        self.segment_sites = FxHashMap::default();
        self.clock = Clock::new();
    }

    /// Makes the slot about to be written carry the calling thread's
    /// metadata: a new range starts where it differs from the last one's.
    #[cold]
    fn sync_metadata(&mut self) {
        let m = thread_metadata(self.owner);
        if self.metadata.back().is_some_and(|(_, last)| *last == m) {
            return;
        }
        let at = self.ring.written();
        match self.metadata.back_mut() {
            Some(last) if last.0 == at => last.1 = m,
            _ => self.metadata.push_back((at, m)),
        }
    }

    /// The metadata in force at slot number `seq`.
    fn metadata_at(&self, seq: u64) -> Option<Arc<str>> {
        let k = self.metadata.partition_point(|&(n, _)| n <= seq);
        self.metadata
            .get(k.checked_sub(1)?)
            .and_then(|(_, m)| m.clone())
    }

    /// Records an event that concerns no allocation of its own (segments,
    /// OOMs, snapshots). A segment or `oom` event carries the call site of
    /// its [`cause`](History::cause), as PyTorch's carry the stack of the
    /// call that made them: `segment_alloc`, `segment_map` and `oom` from
    /// [`HistoryContext::Alloc`] on, `segment_free` and `segment_unmap` with
    /// [`HistoryContext::All`].
    #[inline]
    pub fn push(&mut self, action: Action, addr: u64, size: u64, stream: StreamId) {
        let needs = match action {
            // An `oom` entry carries the failed malloc's context, as a
            // segment allocation does.
            Action::SegmentAlloc | Action::SegmentMap | Action::Oom => HistoryContext::Alloc,
            Action::SegmentFree | Action::SegmentUnmap => HistoryContext::All,
            _ => return self.push_entry(action, addr, size, stream, None),
        };
        let site = self.cause.filter(|_| self.rec.context >= needs);
        self.push_entry(action, addr, size, stream, site);
    }

    /// Records an `annotate` entry (PyTorch 2.15's `annotateMemory`): the
    /// allocation at `addr` of `size` requested bytes on `stream`, the
    /// annotation as the entry's metadata (in place of the thread's), and
    /// the call site of the annotation from [`HistoryContext::Alloc`] on,
    /// as PyTorch gathers the annotation's stack when its record context
    /// is `alloc` or `all`.
    pub fn push_annotate(
        &mut self,
        addr: u64,
        size: u64,
        stream: StreamId,
        site: &'static Location<'static>,
        annotation: Option<Arc<str>>,
    ) {
        if !self.traced(Action::Annotate) {
            return;
        }
        let site = (self.rec.context >= HistoryContext::Alloc).then_some(site);
        // The slot's metadata range holds the annotation; the next slot
        // goes back to the thread's metadata (`sync_metadata`, which runs
        // on every slot from now on).
        self.metadata_seen = true;
        let at = self.ring.written();
        match self.metadata.back_mut() {
            Some(last) if last.0 == at => last.1 = annotation,
            _ => self.metadata.push_back((at, annotation)),
        }
        self.push_raw(Action::Annotate as u64, addr, size, stream, site);
    }

    /// The call site of block `b`'s allocation, if it was recorded.
    #[inline]
    fn site_of(b: &Block) -> Option<&'static Location<'static>> {
        if b.hist_seq != 0 {
            b.hist_site
        } else {
            None
        }
    }

    /// Forgets block `b`'s allocation (its free completed), returning its
    /// call site.
    #[inline]
    fn forget(&mut self, b: &mut Block) -> Option<&'static Location<'static>> {
        let site = Self::site_of(b);
        b.hist_seq = 0;
        if self.rec.level == HistoryLevel::Backtraces {
            self.backtraces.remove(&b.ptr);
        }
        site
    }

    /// Whether `action` is traced.
    #[inline]
    fn traced(&self, action: Action) -> bool {
        self.rec.skip & (1 << action as u16) == 0
    }

    /// The call site a free's trace entries carry: the allocation's, with
    /// [`HistoryContext::All`].
    #[inline]
    fn free_site(
        &self,
        site: Option<&'static Location<'static>>,
    ) -> Option<&'static Location<'static>> {
        site.filter(|_| self.rec.context == HistoryContext::All)
    }

    /// Records a `free_requested` (the block waits for other streams) or a
    /// `free_completed` of block `b`, with its allocation's call site.
    #[inline]
    pub fn push_free(&mut self, action: Action, b: &mut Block, stream: StreamId) {
        let site = if action == Action::FreeCompleted {
            self.forget(b)
        } else {
            Self::site_of(b)
        };
        let site = self.free_site(site);
        self.push_entry(action, b.ptr, b.requested, stream, site);
    }

    /// Records the `free_requested` and `free_completed` entries of a free
    /// of block `b` that completes at once: one clock read, one slot.
    #[inline]
    pub fn push_free_now(&mut self, b: &mut Block, stream: StreamId) {
        let site = self.forget(b);
        let site = self.free_site(site);
        let code = match (
            self.traced(Action::FreeRequested),
            self.traced(Action::FreeCompleted),
        ) {
            (true, true) => FREE_NOW,
            (true, false) => Action::FreeRequested as u64,
            (false, true) => Action::FreeCompleted as u64,
            (false, false) => return,
        };
        self.push_slot(code, b.ptr, b.requested, stream, site);
    }

    /// Records the allocation of block `b` (its `requested` size set) and
    /// where it was asked for.
    #[inline]
    pub fn push_alloc(
        &mut self,
        b: &mut Block,
        stream: StreamId,
        site: &'static Location<'static>,
    ) {
        let context = self.rec.context;
        if self.rec.level == HistoryLevel::Backtraces && context != HistoryContext::None {
            let bt = Arc::new(std::backtrace::Backtrace::force_capture());
            self.backtraces.insert(b.ptr, bt);
        }
        self.seq += 1;
        b.hist_seq = self.seq;
        b.hist_site = (context != HistoryContext::None).then_some(site);
        let entry_site = (context >= HistoryContext::Alloc).then_some(site);
        self.push_entry(Action::Alloc, b.ptr, b.requested, stream, entry_site);
    }

    /// The index of `stream` in `streams`, adding it on first use;
    /// [`OVERFLOW`] once the table is full and `stream` is not in it.
    #[inline]
    fn stream_index(&mut self, stream: StreamId) -> u16 {
        // `OVERFLOW` (`u16::MAX`) is never cached, so it also marks "no
        // stream looked up yet" whatever the handle.
        let (last, i) = self.last_stream;
        if last == stream && i != OVERFLOW {
            return i;
        }
        let i = match self.stream_index.get(&stream) {
            Some(&i) => i,
            None if self.streams.len() < STREAM_TABLE => {
                let i = self.streams.len() as u16;
                self.streams.push(stream);
                self.stream_index.insert(stream, i);
                i
            }
            None => OVERFLOW,
        };
        self.last_stream = (stream, i);
        i
    }

    #[inline]
    fn push_entry(
        &mut self,
        action: Action,
        addr: u64,
        size: u64,
        stream: StreamId,
        site: Option<&'static Location<'static>>,
    ) {
        if self.traced(action) {
            self.push_slot(action as u64, addr, size, stream, site);
        }
    }

    /// Appends a slot (an action's code, or [`FREE_NOW`]).
    #[inline]
    fn push_slot(
        &mut self,
        code: u64,
        addr: u64,
        size: u64,
        stream: StreamId,
        site: Option<&'static Location<'static>>,
    ) {
        if self.metadata_seen {
            self.sync_metadata();
        }
        self.push_raw(code, addr, size, stream, site);
    }

    /// [`push_slot`](Self::push_slot) with the slot's metadata already in
    /// place.
    #[inline]
    fn push_raw(
        &mut self,
        code: u64,
        addr: u64,
        size: u64,
        stream: StreamId,
        site: Option<&'static Location<'static>>,
    ) {
        let ticks = self.clock.ticks(self.ring.written(), self.ring.oldest());
        let s = self.stream_index(stream);
        if s == OVERFLOW {
            self.overflow.push_back((self.ring.written(), stream));
        }
        self.ring.push(Slot {
            addr,
            size,
            meta: (ticks << META_TIME_SHIFT) | ((s as u64) << 4) | code,
            site,
        });
        if !self.overflow.is_empty() {
            let oldest = self.ring.oldest();
            while self.overflow.front().is_some_and(|&(n, _)| n < oldest) {
                self.overflow.pop_front();
            }
        }
        // A change of metadata whose successor's slots are all the ring
        // holds from now on is no longer needed.
        if self.metadata.len() > 1 && self.metadata[1].0 <= self.ring.oldest() {
            self.metadata.pop_front();
        }
    }

    /// The entry of slot number `seq`, `e`.
    fn entry(&self, e: &Slot, seq: u64, action: Action, time_us: u64) -> TraceEntry {
        let i = ((e.meta >> 4) & 0xffff) as u16;
        let stream = if i == OVERFLOW {
            // Every slot written with `OVERFLOW` has its stream here until
            // the ring lets the slot go.
            let k = self.overflow.partition_point(|&(n, _)| n < seq);
            debug_assert_eq!(self.overflow.get(k).map(|&(n, _)| n), Some(seq));
            self.overflow.get(k).map_or(StreamId(u64::MAX), |&(_, s)| s)
        } else {
            self.streams[i as usize]
        };
        TraceEntry {
            action,
            addr: e.addr,
            size: e.size,
            stream,
            time_us,
            site: e.site.map(CallSite::from_location),
            user_metadata: self.metadata_at(seq),
        }
    }

    /// The entries of a slot: one, or two for a [`FREE_NOW`] slot (its
    /// `free_completed` alone when `second_only`).
    fn slot_entries(
        &self,
        e: &Slot,
        seq: u64,
        second_only: bool,
        time_us: u64,
    ) -> impl Iterator<Item = TraceEntry> {
        let code = e.code();
        let (first, second) = if code != FREE_NOW {
            (Action::ALL[code as usize], None)
        } else if second_only {
            (Action::FreeCompleted, None)
        } else {
            (Action::FreeRequested, Some(Action::FreeCompleted))
        };
        std::iter::once(self.entry(e, seq, first, time_us))
            .chain(second.map(|a| self.entry(e, seq, a, time_us)))
    }

    /// The recorded entries, oldest first.
    pub fn iter(&self) -> impl Iterator<Item = TraceEntry> + '_ {
        let mut clock = self.clock.reader();
        self.ring.iter().flat_map(move |(e, second_only, seq)| {
            let time_us = clock.us(seq, e.meta >> META_TIME_SHIFT);
            self.slot_entries(e, seq, second_only, time_us)
        })
    }

    pub fn entries(&self) -> Vec<TraceEntry> {
        let mut v = Vec::with_capacity(self.ring.len());
        v.extend(self.iter());
        v
    }
}

/// A trace document in the format of `../shared/traces`.
pub(crate) fn to_json(
    workload: &str,
    mode: &str,
    entries: &[TraceEntry],
    stats: &crate::MemoryStats,
) -> String {
    let events: Vec<serde_json::Value> = entries
        .iter()
        .map(|e| serde_json::json!([e.action.name(), e.addr, e.size, e.stream.0]))
        .collect();
    let stats: serde_json::Map<String, serde_json::Value> = stats
        .to_map()
        .into_iter()
        .map(|(k, v)| (k, v.into()))
        .collect();
    serde_json::json!({
        "workload": workload,
        "mode": mode,
        "recorder": "strata",
        "stats": stats,
        "events": events,
    })
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The streams pushed, in order, as the history reads them back.
    fn streams_read(h: &History) -> Vec<u64> {
        h.entries().iter().map(|e| e.stream.0).collect()
    }

    /// Past the 65535 streams a slot's index can name, each entry still
    /// reads back its own stream (they shared the last index before).
    #[test]
    fn entries_keep_their_streams_past_the_index_table() {
        let n = 80_000;
        let mut h = History::default();
        h.reset(Some(200_000), Recording::default());
        let mut pushed = Vec::new();
        for i in 0..n {
            // A new stream each time, with an old one now and then.
            let s = if i % 7 == 6 { 1000 + i / 2 } else { 1000 + i };
            h.push(Action::SegmentMap, i, 1, StreamId(s));
            pushed.push(s);
        }
        assert_eq!(streams_read(&h), pushed);
        assert_eq!(h.streams.len(), STREAM_TABLE);

        // Once the ring wraps, the streams kept beside it follow.
        h.set(Some(1000), Recording::default());
        for i in 0..5000 {
            let s = 10_000_000 + i;
            h.push(Action::SegmentUnmap, i, 1, StreamId(s));
            pushed.push(s);
        }
        assert_eq!(streams_read(&h), pushed[pushed.len() - 1000..]);
        assert!(h.overflow.len() <= 1000, "{}", h.overflow.len());

        // Starting afresh forgets the table and the overflow.
        h.reset(Some(10), Recording::default());
        h.push(Action::Oom, 0, 1, StreamId(7));
        assert_eq!(streams_read(&h), vec![7]);
        assert!(h.overflow.is_empty());
    }
}
