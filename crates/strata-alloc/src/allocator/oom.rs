//! Out of memory: the typed error with what the allocator holds, and the
//! observers called with it (outside the lock).

use super::*;

thread_local! {
    /// The allocators (by id) whose out-of-memory observers this thread is
    /// running now (see `CachingAllocator::notify_oom`).
    static NOTIFYING: crate::reentry::Running = const { std::cell::RefCell::new(Vec::new()) };
    /// `NOTIFYING`'s stand-in once it is destroyed (reentry.rs).
    static NOTIFYING_LATE: crate::reentry::RunningLate = const { std::cell::Cell::new(false) };
}

impl CachingAllocator {
    /// The out-of-memory error of a request of `requested` bytes on dense
    /// stream `s`, rounded to `rounded`, for which the device could not
    /// supply `device_request` bytes. Counted in `num_ooms`, and traced as
    /// PyTorch's `record_trace(OOM, device_free, params.size(),
    /// params.stream(), ...)`: the free device memory, the rounded request
    /// (not the device request) and the request's stream, with the call
    /// site under `context` `alloc` or `all`.
    pub(super) fn out_of_memory(
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
        if st.reporting {
            // PyTorch's `reportOutOfMemoryToProfiler(size, ...)`: the
            // rounded request and the figures after the release steps.
            st.usage.push(MemoryUsage::OutOfMemory {
                alloc_size: rounded,
                total_allocated: allocated,
                total_reserved: reserved,
                device: self.device,
            });
        }
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

    /// Removes every observer registered with [`on_oom`](Self::on_oom).
    pub fn clear_oom_observers(&self) {
        self.oom_observers.lock().clear();
    }

    /// Registers `observer`, called each time `throw_on_cudamalloc_oom`
    /// rejects a request ([`AllocError::OomRejected`], counted in
    /// `num_oom_rejections`), before the error is returned: PyTorch's
    /// `attachOomRejectionObserver`, whose observers get the device, the
    /// device allocation the request needed, the memory held from the
    /// device before it and the device's total memory ([`OomRejection`]).
    /// A rejection calls no [`on_oom`](Self::on_oom) observer, and an
    /// ordinary out-of-memory failure no rejection observer, as in PyTorch.
    /// Observers run as out-of-memory observers do: outside the allocator's
    /// lock (they may call the allocator; a rejection inside one does not
    /// call the observers again), a panic reaching the caller except on a
    /// thread already unwinding.
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use strata_alloc::{driver::sim::SimDriver, AllocatorConfig, CachingAllocator, StreamId};
    ///
    /// let conf = AllocatorConfig::parse("throw_on_cudamalloc_oom:True").unwrap();
    /// let a = CachingAllocator::new(Arc::new(SimDriver::new(1 << 30, 2 << 20)), conf);
    /// let seen = Arc::new(Mutex::new(Vec::new()));
    /// let s = Arc::clone(&seen);
    /// a.on_oom_rejection(move |r| s.lock().unwrap().push((r.alloc_size, r.device_total)));
    /// assert!(a.allocate(2 << 30, StreamId::DEFAULT).is_err());
    /// assert_eq!(*seen.lock().unwrap(), [(2 << 30, 1 << 30)]);
    /// ```
    pub fn on_oom_rejection(&self, observer: impl Fn(&OomRejection) + Send + Sync + 'static) {
        self.oom_rejection_observers.lock().push(Arc::new(observer));
    }

    /// Removes every observer registered with
    /// [`on_oom_rejection`](Self::on_oom_rejection).
    pub fn clear_oom_rejection_observers(&self) {
        self.oom_rejection_observers.lock().clear();
    }

    /// Calls the out-of-memory observers (outside the state's lock) when `e`
    /// is an out-of-memory error; returns `e`.
    ///
    /// An out-of-memory error raised while this thread runs this allocator's
    /// observers (an observer that allocates again, directly or through
    /// tensor code) is returned to that observer without calling the
    /// observers again: calling them would recurse until the stack overflows.
    #[cold]
    pub(super) fn notify_oom(&self, e: AllocError) -> AllocError {
        if let AllocError::OomRejected {
            device,
            device_request,
            reserved,
            ..
        } = e
        {
            let Some(_notifying) =
                crate::reentry::Entered::enter(&NOTIFYING, &NOTIFYING_LATE, self.id)
            else {
                return e;
            };
            let observers: Vec<OomRejectionObserver> = self.oom_rejection_observers.lock().clone();
            let r = OomRejection {
                device,
                alloc_size: device_request,
                total_allocated: reserved,
                device_total: self.capacity,
            };
            let unwinding = std::thread::panicking();
            for o in observers {
                if unwinding {
                    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| o(&r)));
                } else {
                    o(&r);
                }
            }
            return e;
        }
        if let AllocError::OutOfMemory(oom) = &e {
            let Some(_notifying) =
                crate::reentry::Entered::enter(&NOTIFYING, &NOTIFYING_LATE, self.id)
            else {
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
