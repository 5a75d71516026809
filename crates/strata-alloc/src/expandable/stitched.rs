//! Stitched mappings, a bounded cache of page-table entries: forgetting,
//! unmapping and evicting them, and the per-stream fences that say when a
//! *busy* one (work queued on its stream may still use it) may go.

use super::*;

impl ExpandableSpace<'_> {
    /// Removes the stitched mapping at page `idx` of segment `seg` from the
    /// allocator's books (the caller unmaps it, or makes it live again).
    pub(super) fn forget_stitched(st: &mut State, seg: u32, idx: u32) -> Option<PhysHandle> {
        let (h, stamp) = st.expandable[seg as usize]
            .as_mut()
            .expect("segment exists")
            .stitched
            .remove(&idx)?;
        st.stitch_lru.remove(&stamp);
        st.busy_stitched.remove(&(seg, idx));
        if let Some(v) = st.aliases.get_mut(&h) {
            v.retain(|&x| x != (seg, idx));
            if v.is_empty() {
                st.aliases.remove(&h);
            }
        }
        Some(h)
    }

    /// Unmaps the stitched mapping at page `idx` of segment `seg`.
    pub(super) fn unmap_stitched(
        &self,
        st: &mut State,
        seg: u32,
        idx: u32,
    ) -> Result<(), DriverError> {
        let base = st.expandable[seg as usize]
            .as_ref()
            .expect("segment exists")
            .base;
        self.vm.unmap(base + idx as u64 * self.page, self.page)?;
        Self::forget_stitched(st, seg, idx);
        Ok(())
    }

    /// Keeps the stitched mappings within their bound ([`STITCHED_PER_PAGE`]
    /// per reserved page, plus [`STITCHED_MIN`]), unmapping the least recently
    /// used first.
    ///
    /// A mapping that work queued on its stream may still use
    /// (`State::busy_stitched`) is passed over until the stream's fence has
    /// passed it, so the bound can be exceeded for a while.
    pub(super) fn evict_stitched(&self, st: &mut State) -> Result<(), AllocError> {
        let bound = STITCHED_PER_PAGE * (st.reserved() / self.page) + STITCHED_MIN;
        let excess = (st.stitch_lru.len() as u64).saturating_sub(bound) as usize;
        if excess == 0 {
            return Ok(());
        }
        // Oldest first, by stamp; `from` steps past the ones passed over.
        let (mut left, mut from, mut queried) = (excess, 0, Vec::new());
        while left > 0 {
            let Some((&stamp, &(seg, idx))) = st.stitch_lru.range(from..).next() else {
                break;
            };
            from = stamp + 1;
            if !self.stitched_idle(st, seg, idx, &mut queried) {
                continue;
            }
            self.unmap_stitched(st, seg, idx)
                .map_err(|e| self.driver_error(e))?;
            left -= 1;
        }
        Ok(())
    }

    /// Whether no queued work can still use the stitched mapping at page
    /// `idx` of segment `seg`, so that it may be unmapped. Its stream's fence
    /// is queried at most once per caller's operation (the streams queried
    /// are listed in `queried`); after that only what it has shown counts.
    pub(super) fn stitched_idle(
        &self,
        st: &mut State,
        seg: u32,
        idx: u32,
        queried: &mut Vec<u32>,
    ) -> bool {
        match st.busy_stitched.get(&(seg, idx)).copied() {
            None => true,
            Some((s, freed_at)) => {
                let idle = freed_at <= st.streams[s as usize].fence.done
                    || (!queried.contains(&s) && {
                        queried.push(s);
                        self.stream_idle_since(st, s, freed_at)
                    });
                if idle {
                    st.busy_stitched.remove(&(seg, idx));
                }
                idle
            }
        }
    }

    /// Gives a physical page back to the driver after a failed growth: its
    /// stitched mappings are unmapped first. Failures leave the allocator
    /// consistent; a page whose release fails is kept in
    /// `State::unreleased` for the next release of the cache.
    /// A stitched mapping that queued work may still use is unmapped after
    /// synchronising its stream (only on this failure path).
    pub(super) fn drop_handle(&self, st: &mut State, h: PhysHandle) {
        for (seg, idx) in st.aliases.get(&h).cloned().unwrap_or_default() {
            if let Some(&(s, _)) = st.busy_stitched.get(&(seg, idx)) {
                let _ = self
                    .driver
                    .synchronize_stream(st.streams[s as usize].handle);
            }
            if self.unmap_stitched(st, seg, idx).is_err() {
                // Still mapped: kept in sight to be unmapped later (state.rs,
                // `stray_mappings`), or its page could never be released.
                let base = st.expandable[seg as usize]
                    .as_ref()
                    .expect("segment exists")
                    .base;
                st.stray_mappings
                    .push((base + idx as u64 * self.page, self.page));
                Self::forget_stitched(st, seg, idx);
            }
        }
        // A failed release is kept for the next release of the cache; the
        // growth's own error is the one reported.
        let _ = self.release_handles(st, [h]);
    }

    /// Whether the work queued on dense stream `s` has finished every use of
    /// blocks freed at or before `freed_at`, as far as its [`Fence`] can tell
    /// without waiting: queries the pending event, and records a new one when
    /// none covers `freed_at` yet. A driver failure counts as "not yet" (the
    /// pages are then simply not recycled).
    pub(super) fn stream_idle_since(&self, st: &mut State, s: u32, freed_at: u64) -> bool {
        if freed_at <= st.streams[s as usize].fence.done {
            return true;
        }
        let (ev, clock) = match st.streams[s as usize].fence.pending {
            Some(p) => p,
            None => {
                let handle = st.streams[s as usize].handle;
                let Ok(ev) = st.record_pooled_event(self.driver, handle) else {
                    return false;
                };
                let p = (ev, st.free_clock);
                st.streams[s as usize].fence.pending = Some(p);
                p
            }
        };
        if let Ok(true) = self.driver.query_event(ev) {
            let fence = &mut st.streams[s as usize].fence;
            fence.done = clock;
            fence.pending = None;
            st.event_pool.push(ev);
        }
        freed_at <= st.streams[s as usize].fence.done
    }
}
