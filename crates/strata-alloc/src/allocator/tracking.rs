//! Trace trackers (PyTorch's `AllocatorTraceTracker`): closures called with
//! every traced event, outside the state's lock.

use super::*;

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

    /// Passes `events` to the trace trackers (outside the state's lock),
    /// unless this thread is already running them for this allocator.
    #[cold]
    pub(super) fn dispatch_tracked(&self, events: Vec<TraceEntry>) {
        // Also from a thread-local destructor (an allocation freed as its
        // thread exits), where `TRACKING` may be gone: reentry.rs.
        let Some(_entered) = crate::reentry::Entered::enter(&TRACKING, &TRACKING_LATE, self.id)
        else {
            return;
        };
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
}
