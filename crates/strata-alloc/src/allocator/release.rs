//! Giving memory back to the driver: `empty_cache`, released segments, a
//! dropped private pool, garbage collection of old cached blocks.

use super::*;

impl CachingAllocator {
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

    /// Returns one whole free segment to the driver.
    pub(super) fn release_segment(&self, st: &mut State, id: u32) -> Result<(), AllocError> {
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
    pub(super) fn release_available_cached_blocks(
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
    pub(super) fn release_cached_blocks(&self, st: &mut State) -> Result<(), AllocError> {
        self.synchronize_and_free_events(st)?;
        // A private pool's segments go only once the pool is freeable.
        self.release_free_segments(st, |st, e| {
            e.mempool == 0 || st.mempool(e.mempool).is_none_or(|p| p.use_count == 0)
        })?;
        if st.expandable.iter().any(Option::is_some)
            || !st.unreleased.is_empty()
            || !st.stray_mappings.is_empty()
        {
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
    pub(super) fn release_free_segments(
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
    pub(super) fn garbage_collect(&self, st: &mut State) -> Result<(), AllocError> {
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
}
