//! What the allocator can tell about its memory: statistics, the history of
//! allocation events, snapshots, reports and summaries.

use super::*;

impl CachingAllocator {
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
    /// (PyTorch's `_record_memory_history`). `Some(0)` records with a
    /// one-entry ring, as PyTorch's `RingBuffer::setMaxEntries` keeps
    /// `std::max(1, max_entries)`. Called while recording, it keeps
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
            .set_history(max_entries.map(|n| n.max(1)), Recording::with_level(level));
    }

    /// [`record_history`](Self::record_history) with all of PyTorch's
    /// `_record_memory_history` options ([`HistoryOptions`]): a trace of
    /// the events or only the live allocations' state (`enabled`), which
    /// records keep call sites (`context`), call sites or backtraces
    /// (`stacks`), and actions left out of the trace (`skip_actions`).
    /// As with `record_history`, calling it while recording keeps what was
    /// recorded, and the new options apply from then on; `max_entries` 0
    /// records with a one-entry trace (PyTorch's `setMaxEntries` keeps at
    /// least one). With `enabled="state"`
    /// ([`HistoryOptions::state_only`]) the trace holds one entry, the
    /// latest event, whatever `max_entries` says, as in PyTorch.
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
        // `RingBuffer::setMaxEntries`: `std::max(size_t(1), size)`.
        let capacity = if opts.trace {
            opts.max_entries.max(1)
        } else {
            1
        };
        self.state
            .lock()
            .set_history(Some(capacity), Recording::of(opts));
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

    /// Attaches `metadata` after the fact to the live allocation at `ptr`
    /// (PyTorch 2.15's `torch.cuda.memory._annotate_memory`, which
    /// `_annotate_tensor` calls with the base of a tensor's storage): while
    /// history is recording, an [`Action::Annotate`] entry is added with the
    /// allocation's address, the size asked for it and its stream, the
    /// annotation as its `user_metadata` (in place of the thread's metadata,
    /// which entries before and after it keep) and, with
    /// [`HistoryContext::Alloc`](crate::history::HistoryContext) or
    /// [`All`](crate::history::HistoryContext), the caller's location as
    /// its call site. Metadata recorded with the allocation is left as it
    /// is; annotations accumulate as entries of their own (`skip_actions`
    /// name them `annotate`). Trace trackers see the entry whether history
    /// records or not; with history off and no tracker, nothing is
    /// recorded. An empty annotation is recorded with no metadata, as
    /// PyTorch's empty string.
    ///
    /// `ptr` must be the address a live allocation was handed out at (not
    /// one inside it, not one whose free was asked for, even if the free
    /// waits for other streams, not an allocation made while caching was
    /// off): anything else is [`AllocError::NotAllocated`], with or without
    /// history, as PyTorch raises "annotateMemory: no live allocation found
    /// at pointer".
    ///
    /// ```
    /// use std::sync::Arc;
    /// use strata_alloc::history::Action;
    /// use strata_alloc::{driver::sim::SimDriver, AllocatorConfig, CachingAllocator, StreamId};
    ///
    /// let a = CachingAllocator::new(Arc::new(SimDriver::h100()), AllocatorConfig::default());
    /// a.record_history(Some(100));
    /// let x = a.allocate(1000, StreamId::DEFAULT).unwrap();
    /// a.annotate_memory(x.ptr(), "packed by autograd").unwrap();
    /// let e = a.history().pop().unwrap();
    /// assert_eq!((e.action, e.addr, e.size), (Action::Annotate, x.ptr(), 1000));
    /// assert_eq!(e.user_metadata.as_deref(), Some("packed by autograd"));
    /// assert!(a.annotate_memory(x.ptr() + 512, "inside").is_err());
    /// ```
    #[track_caller]
    pub fn annotate_memory(&self, ptr: DevicePtr, metadata: &str) -> Result<(), AllocError> {
        let site = std::panic::Location::caller();
        let mut guard = self.state.lock();
        let st = &mut *guard;
        let found = (ptr != 0)
            .then(|| st.blocks.iter().find(|(_, b)| b.ptr == ptr && b.allocated))
            .flatten()
            .map(|(_, b)| (b.requested, b.stream));
        let Some((size, s)) = found else {
            return Err(AllocError::NotAllocated {
                what: "annotate_memory",
                device: self.device,
                ptr,
            });
        };
        let stream = st.streams[s as usize].handle;
        let annotation: Option<Arc<str>> = (!metadata.is_empty()).then(|| Arc::from(metadata));
        if st.history.enabled() {
            st.history
                .push_annotate(ptr, size, stream, site, annotation.clone());
        }
        if st.tracking {
            let time_us = st.tracker_epoch.map_or(0, |t| {
                u64::try_from(t.elapsed().as_micros()).unwrap_or(u64::MAX)
            });
            st.tracked.push(TraceEntry {
                action: Action::Annotate,
                addr: ptr,
                size,
                stream,
                time_us,
                site: None,
                user_metadata: annotation,
            });
        }
        self.unlock_and_dispatch(guard);
        Ok(())
    }

    /// The metadata [`set_memory_metadata`](Self::set_memory_metadata) set
    /// on the calling thread (PyTorch's `_get_memory_metadata`); empty when
    /// none.
    pub fn memory_metadata(&self) -> String {
        crate::history::thread_metadata(self.id).map_or_else(String::new, |m| m.to_string())
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

    /// Forgets the recorded events and goes on recording (PyTorch's
    /// `_record_memory_history(..., clear_history=True)`, which clears its
    /// trace buffer only). Allocations still live keep their call sites
    /// (in snapshots, [`allocation_origin`](Self::allocation_origin), the
    /// reports by site, and the entries of their frees), as PyTorch's blocks
    /// keep the context of their allocation. Nothing happens while history
    /// is off.
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
    /// is created. A snapshot that is not written (`path` cannot be created,
    /// or refuses the bytes: a full disk) is an [`AllocError::Write`] and
    /// records no `snapshot` event; one written records it after the write.
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

    /// Recounts every statistic from the blocks and compares it with the running
    /// figures; also checks that the blocks of each segment tile it and that the
    /// free indexes hold exactly the free blocks. Returns a description of the
    /// first inconsistency.
    pub fn check_consistency(&self) -> Result<(), String> {
        let st = self.state.lock();
        crate::snapshot::check(&st, self.page)
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

    /// The largest free cached block, in bytes (0 when nothing is cached).
    /// PyTorch's answer to the same question, which starts from the device's
    /// free memory, is [`cache_info`](Self::cache_info).
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

    /// PyTorch's `cacheInfo(device, &largest)`, which cuDNN uses to size its
    /// workspace: the larger of `largest` and every free cached block, where
    /// a `largest` of 0 is first replaced by the device's free memory
    /// (`mem_get_info`, PyTorch's "initial guess" from `cudaMemGetInfo`).
    /// So with nothing passed in, the answer is the most a request could get
    /// without freeing anything: a cached block, or new device memory.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use strata_alloc::{driver::sim::SimDriver, AllocatorConfig, CachingAllocator, StreamId};
    ///
    /// let d = Arc::new(SimDriver::new(1 << 30, 2 << 20));
    /// let a = CachingAllocator::new(d, AllocatorConfig::default());
    /// assert_eq!(a.cache_info(0).unwrap(), 1 << 30); // an idle device: all of it
    /// assert_eq!(a.cache_info(4 << 30).unwrap(), 4 << 30); // a larger guess stays
    /// drop(a.allocate(30 << 20, StreamId::DEFAULT).unwrap()); // cached once freed
    /// assert_eq!(a.largest_free_block(), 30 << 20);
    /// assert_eq!(a.cache_info(1).unwrap(), 30 << 20);
    /// ```
    pub fn cache_info(&self, largest: u64) -> Result<u64, AllocError> {
        let guess = if largest == 0 {
            self.mem_get_info()?.free
        } else {
            largest
        };
        Ok(guess.max(self.largest_free_block()))
    }
}
