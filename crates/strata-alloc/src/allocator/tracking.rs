//! Trace trackers (PyTorch's `AllocatorTraceTracker`): closures called with
//! every traced event, outside the state's lock.

use super::*;

/// One report to a memory-usage reporter
/// ([`CachingAllocator::attach_memory_usage_reporter`]): the arguments of
/// PyTorch's `MemoryReportingInfoBase::reportMemoryUsage` and
/// `reportOutOfMemory`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemoryUsage {
    /// A block handed out (`alloc_size` its size, positive) or an
    /// allocation given back (`alloc_size` minus its block's size).
    Usage {
        /// The allocation's address.
        ptr: DevicePtr,
        /// The block's size, negative for a free.
        alloc_size: i64,
        /// The allocator's allocated bytes after it
        /// (`allocated_bytes.all.current`).
        total_allocated: u64,
        /// The allocator's reserved bytes after it
        /// (`reserved_bytes.all.current`).
        total_reserved: u64,
        /// The allocator's device.
        device: Device,
    },
    /// A request that failed for lack of memory.
    OutOfMemory {
        /// The request's rounded size.
        alloc_size: u64,
        /// The allocated bytes when it failed.
        total_allocated: u64,
        /// The reserved bytes when it failed, after the release steps.
        total_reserved: u64,
        /// The allocator's device.
        device: Device,
    },
}

thread_local! {
    /// The allocators (by id) whose trace trackers this thread is running
    /// now (see `CachingAllocator::dispatch_tracked`).
    static TRACKING: crate::reentry::Running = const { std::cell::RefCell::new(Vec::new()) };
    /// `TRACKING`'s stand-in once it is destroyed (reentry.rs).
    static TRACKING_LATE: crate::reentry::RunningLate = const { std::cell::Cell::new(false) };
}

impl CachingAllocator {
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

    /// Registers `reporter`, called with every block handed out, every
    /// allocation given back and every request that fails for lack of
    /// memory, with the allocator's allocated and reserved bytes after it:
    /// what PyTorch's caching allocator reports to its profiler
    /// (`reportMemoryUsageToProfiler`, `reportOutOfMemoryToProfiler`; the
    /// memory timeline of `torch.profiler.profile(profile_memory=True)`),
    /// which `DeviceCachingAllocator.check_reporter`
    /// (`aten/src/ATen/test/cuda_reportMemoryUsage_test.cpp`) checks.
    ///
    /// * An allocation reports [`MemoryUsage::Usage`] with its address and
    ///   the size of its block (the rounded size, or the whole block when the
    ///   block is not split), after the statistics count it.
    /// * A free reports the address and minus the block's size (its size
    ///   before any merge with free neighbours), after the statistics drop
    ///   it: at once, even when the block waits for other streams' events.
    /// * A request that fails for lack of memory reports
    ///   [`MemoryUsage::OutOfMemory`] with its rounded size and the figures
    ///   after the release steps, before the out-of-memory observers run.
    ///   A request refused before any allocator work (of 1 EiB or more) and
    ///   the allocations made while caching is off report nothing, as in
    ///   PyTorch; nor does a request refused by `throw_on_cudamalloc_oom`,
    ///   which calls no out-of-memory observer either.
    ///
    /// PyTorch reports to the profiler of the calling thread, or, in its
    /// newest builds, to the process-wide reporter of
    /// `setGlobalMemoryReportingInfo` when the thread has none; strata calls
    /// every reporter attached to the allocator, for every thread's calls.
    /// Reporters run as trace trackers do (see
    /// [`attach_trace_tracker`](Self::attach_trace_tracker)): after the
    /// allocator's lock is released, before the call that caused the
    /// reports returns; a reporter may call the allocator, and the reports
    /// of its own calls are not passed to the reporters again.
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use strata_alloc::{driver::sim::SimDriver, AllocatorConfig, CachingAllocator, MemoryUsage, StreamId};
    ///
    /// let a = CachingAllocator::new(Arc::new(SimDriver::h100()), AllocatorConfig::default());
    /// let seen = Arc::new(Mutex::new(Vec::new()));
    /// let s = Arc::clone(&seen);
    /// a.attach_memory_usage_reporter(move |u| {
    ///     if let MemoryUsage::Usage { alloc_size, total_allocated, .. } = *u {
    ///         s.lock().unwrap().push((alloc_size, total_allocated));
    ///     }
    /// });
    /// drop(a.allocate(1000, StreamId::DEFAULT).unwrap());
    /// assert_eq!(*seen.lock().unwrap(), [(1024, 1024), (-1024, 0)]);
    /// ```
    pub fn attach_memory_usage_reporter(
        &self,
        reporter: impl Fn(&MemoryUsage) + Send + Sync + 'static,
    ) {
        let mut reporters = self.usage_reporters.lock();
        reporters.push(Arc::new(reporter));
        let mut st = self.state.lock();
        st.reporting = true;
        st.refresh_observed();
    }

    /// Removes every reporter registered with
    /// [`attach_memory_usage_reporter`](Self::attach_memory_usage_reporter).
    pub fn clear_memory_usage_reporters(&self) {
        let mut reporters = self.usage_reporters.lock();
        reporters.clear();
        let mut st = self.state.lock();
        st.reporting = false;
        st.refresh_observed();
        st.usage.clear();
    }

    /// Passes `events` to the trace trackers and `usage` to the memory-usage
    /// reporters (outside the state's lock), unless this thread is already
    /// running them for this allocator.
    #[cold]
    pub(super) fn dispatch_tracked(&self, events: Vec<TraceEntry>, usage: Vec<MemoryUsage>) {
        // Also from a thread-local destructor (an allocation freed as its
        // thread exits), where `TRACKING` may be gone: reentry.rs.
        let Some(_entered) = crate::reentry::Entered::enter(&TRACKING, &TRACKING_LATE, self.id)
        else {
            return;
        };
        let trackers: Vec<TraceTracker> = if events.is_empty() {
            Vec::new()
        } else {
            self.trace_trackers.lock().clone()
        };
        let reporters: Vec<MemoryUsageReporter> = if usage.is_empty() {
            Vec::new()
        } else {
            self.usage_reporters.lock().clone()
        };
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
        for u in &usage {
            for r in &reporters {
                if unwinding {
                    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| r(u)));
                } else {
                    r(u);
                }
            }
        }
    }
}
