//! The hot path: [`CachingAllocator::allocate_raw`] takes the lock, reclaims
//! blocks whose cross-stream events completed (only when some are pending),
//! rounds the size, takes the best-fitting free block of the stream's pool
//! and splits it; [`CachingAllocator::free_raw`] merges a freed block with its
//! free neighbours and puts it back in its pool. No driver call is made here:
//! a request no cached block fits goes to the slow path (`slow_path.rs`).

use super::sizes::{round_plain, round_size};
use super::*;

impl CachingAllocator {
    /// Allocates `size` bytes for use on `stream`, as an owned [`Allocation`].
    ///
    /// While history is on, the caller's location is recorded as the
    /// allocation's call site (`#[track_caller]`: callers that are themselves
    /// `#[track_caller]` pass their own caller's location on).
    #[track_caller]
    pub fn allocate(
        self: &Arc<Self>,
        size: u64,
        stream: StreamId,
    ) -> Result<Allocation, AllocError> {
        let raw = self.allocate_raw(size, stream)?;
        Ok(Allocation {
            allocator: Arc::clone(self),
            raw,
        })
    }

    /// Allocates `size` bytes for use on `stream`; give the handle back with
    /// [`free_raw`](Self::free_raw). The caller's location is the call site
    /// recorded while history is on (see [`allocate`](Self::allocate)).
    #[track_caller]
    pub fn allocate_raw(&self, size: u64, stream: StreamId) -> Result<RawAllocation, AllocError> {
        let site = std::panic::Location::caller();
        if size == 0 {
            return Ok(RawAllocation {
                ptr: 0,
                size: 0,
                block: NONE,
                generation: 0,
                owner: self.id,
            });
        }
        if size >= MAX_REQUEST {
            // No device can hold it: rejected before taking the lock, without
            // counting an out-of-memory error (as PyTorch does).
            return Err(AllocError::TooLarge {
                device: self.device,
                requested: size,
            });
        }
        // The plain guard on the hot path: the trackers' events are passed
        // on by hand below (`unlock_and_dispatch`), only while some exist.
        let mut guard = self.state.lock();
        let st = &mut *guard;
        if st.caching_disabled {
            return self.allocate_uncached(st, size);
        }
        let s = if st.pool_routes.is_empty() {
            stream_index(st, stream)
        } else {
            crate::mempool::routed_stream_index(st, stream)
        };
        if st.pending_events > 0 {
            self.process_events(st);
        }
        let rounded = if st.settings.plain_rounding {
            round_plain(size)
        } else {
            round_size(&st.settings.config, size)
        };
        st.recent_requests = crate::repeats::mix_request(st.recent_requests, rounded, s);
        let pool = PoolKind::of(rounded);
        let id = match self.get_free_block(st, s, pool, rounded) {
            Some(id) => id,
            None => {
                // The segment events of the slow path come from this call.
                st.history.cause = Some(site);
                let r = self.allocate_slow(st, s, pool, rounded, size);
                st.history.cause = None;
                match r {
                    Ok(id) => id,
                    Err(e) => {
                        self.unlock_and_dispatch(guard);
                        return Err(self.notify_oom(e));
                    }
                }
            }
        };
        let raw = self.alloc_found_block(st, id, rounded, size, site);
        if st.observed {
            self.unlock_and_dispatch(guard);
        }
        Ok(raw)
    }

    /// Releases the state's lock, then passes the events queued for the
    /// trace trackers to them (what [`StateGuard`] does on drop, for the
    /// paths that hold the plain guard).
    #[inline]
    pub(super) fn unlock_and_dispatch(&self, mut guard: parking_lot::MutexGuard<'_, State>) {
        if guard.tracked.is_empty() && guard.usage.is_empty() {
            return;
        }
        let events = std::mem::take(&mut guard.tracked);
        let usage = std::mem::take(&mut guard.usage);
        drop(guard);
        self.dispatch_tracked(events, usage);
    }

    /// Returns an allocation to the cache. Memory used by other streams
    /// (`record_stream`) is reused only after their events complete.
    pub fn free_raw(&self, raw: RawAllocation) -> Result<(), AllocError> {
        if raw.block == NONE {
            return Ok(());
        }
        if raw.block == UNCACHED {
            return self.free_uncached(raw);
        }
        let mut guard = self.state.lock();
        // Matched, not passed on: the common `Ok` is written afresh into the
        // return slot rather than copied out of a temporary (whose wide loads
        // waited for the narrower store of its tag).
        match self.free_locked(&mut guard, raw) {
            Ok(()) => {
                if guard.observed {
                    self.unlock_and_dispatch(guard);
                }
                Ok(())
            }
            Err(e) => {
                self.unlock_and_dispatch(guard);
                Err(e)
            }
        }
    }

    /// [`free_raw`](Self::free_raw) of a cached allocation, under the lock.
    #[inline]
    pub(super) fn free_locked(&self, st: &mut State, raw: RawAllocation) -> Result<(), AllocError> {
        self.check_live(st, &raw)?;
        let id = raw.block;
        let b = &mut st.blocks[id];
        b.allocated = false;
        let (size, pool, s) = (b.size, b.pool.stat(), b.stream);
        // Only while some allocation is counted as oversize can this one be.
        let oversize = st.stats.oversize_allocations.current > 0 && std::mem::take(&mut b.oversize);
        let used_elsewhere = !b.stream_uses.is_empty();
        // The loading phase ends with the first free of a block of a page or
        // more (the margin's floor, expandable/mod.rs): a smaller free is a
        // temporary that gives no page back.
        st.freed_a_page |= size >= self.page;
        st.stats.allocation.decrease_by(pool, 1);
        st.stats.allocated_bytes.decrease_by(pool, size);
        // PyTorch reports the free to its profiler with the block's size
        // before any merge and the figures after the free, whether or not
        // the block waits for other streams' events.
        st.report_usage(raw.ptr, -(size as i64), self.device);
        let (current, high) = (
            st.stats.allocated_bytes.all().current as u64,
            st.allocated_high.bytes,
        );
        st.repeats.observe_free(current, high, st.free_clock);
        st.streams[s as usize].allocated_shrank(size);
        if oversize {
            st.stats.oversize_allocations.decrease(1);
        }
        // Queued for the trace trackers only while some are attached.
        st.track_block(Action::FreeRequested, id);
        if !st.history.enabled() {
            // `free_block` records and tracks only while something observes
            // the allocator, and otherwise releases the block at once.
            return if !used_elsewhere {
                self.free_block(st, id);
                Ok(())
            } else {
                self.insert_events(st, id)
            };
        }
        if !used_elsewhere {
            // free_requested and free_completed at once: one clock read and
            // one look-up of the live allocation for both entries.
            let handle = st.streams[s as usize].handle;
            st.history.push_free_now(&mut st.blocks[id], handle);
            st.track_block(Action::FreeCompleted, id);
            self.release_block(st, id);
            Ok(())
        } else {
            st.record_free(Action::FreeRequested, id);
            self.insert_events(st, id)
        }
    }

    /// Checks that `raw` is a live allocation of this allocator (not freed, not
    /// a stale handle to a block that has since been reallocated, not a handle
    /// of another allocator whose block index, generation and address happen
    /// to match one here).
    #[inline]
    pub(super) fn check_live(&self, st: &State, raw: &RawAllocation) -> Result<(), AllocError> {
        let live = raw.owner == self.id
            && st
                .blocks
                .get_allocated(raw.block)
                .is_some_and(|b| b.generation == raw.generation && b.ptr == raw.ptr);
        if live {
            Ok(())
        } else {
            Err(AllocError::InvalidFree {
                device: self.device,
                ptr: raw.ptr,
            })
        }
    }

    /// Records that `raw` is used on `stream` (PyTorch's `record_stream`).
    ///
    /// A no-op for an allocation made while caching was off, as in PyTorch
    /// (its free goes straight to the driver, which waits for the device).
    pub fn record_stream(&self, raw: &RawAllocation, stream: StreamId) -> Result<(), AllocError> {
        if raw.block == NONE {
            return Ok(());
        }
        let mut guard = self.state.lock();
        let st = &mut *guard;
        if raw.block == UNCACHED {
            return self.check_uncached_live(st, raw);
        }
        self.check_live(st, raw)?;
        let s = stream_index(st, stream);
        // The allocation's own stream is ignored (PyTorch's `recordStream`
        // compares the streams themselves): a private pool's block belongs
        // to the pool's entry for its stream, not the default one that `s`
        // names, so the handles are compared.
        let own = st.streams[st.blocks[raw.block].stream as usize].handle;
        let b = &mut st.blocks[raw.block];
        if stream != own && !b.stream_uses.contains(&s) {
            b.stream_uses.push(s);
        }
        Ok(())
    }

    #[inline]
    pub(crate) fn get_free_block(
        &self,
        st: &mut State,
        s: u32,
        pool: PoolKind,
        size: u64,
    ) -> Option<u32> {
        // Garbage collection ages the blocks of the default pools by their
        // own searches only: PyTorch counts per `BlockPool`, and a private
        // pool's searches age none of the default pools' blocks.
        if st.settings.gc_threshold.is_some() && st.streams[s as usize].mempool == 0 {
            st.gc_counts[pool as usize] += 1;
        }
        if !st.settings.expandable && !st.streams[s as usize].expandable[pool as usize].is_empty() {
            return Self::get_free_ordinary_block(st, s, pool, size);
        }
        let config = &st.settings.config;
        let idx = &mut st.streams[s as usize].free[pool as usize];
        // The oversize rules may refuse the smallest block that fits.
        let e = idx.take_lower_bound(size, |e| Self::fits_oversize_rules(config, size, e.size))?;
        Some(e.block)
    }

    /// PyTorch's oversize rules: a request below `max_split_size` takes no
    /// oversize block, and an oversize request takes none more than
    /// `max_non_split_rounding` larger than itself.
    #[inline]
    pub(super) fn fits_oversize_rules(config: &AllocatorConfig, size: u64, block: u64) -> bool {
        match config.max_split_size {
            Some(max_split) => {
                !((size < max_split && block >= max_split)
                    || (size >= max_split
                        && block >= size.saturating_add(config.max_non_split_rounding)))
            }
            None => true,
        }
    }

    /// `get_free_block` once expandable segments have been turned off at run
    /// time while the stream still has some: like PyTorch, only blocks of
    /// ordinary segments are handed out (the smallest that fits), and the
    /// cached blocks of expandable segments wait until expandable segments
    /// are turned on again or `empty_cache` releases them.
    #[cold]
    pub(super) fn get_free_ordinary_block(
        st: &mut State,
        s: u32,
        pool: PoolKind,
        size: u64,
    ) -> Option<u32> {
        let e = st.streams[s as usize].free[pool as usize]
            .iter_from(size)
            .find(|e| !st.blocks[e.block].expandable)?;
        if !Self::fits_oversize_rules(&st.settings.config, size, e.size) {
            return None;
        }
        st.index_remove(e.block);
        Some(e.block)
    }

    /// PyTorch's `should_split`: a `no_split` pool never splits; a
    /// small-pool block, or any block while expandable segments are on (the
    /// setting, not the block's kind: an ordinary segment cached before the
    /// switch, or a private pool's, splits the same way), splits when at
    /// least 512 bytes would be left; otherwise a large-pool block splits
    /// when the request is not oversize and more than 1 MiB would be left.
    #[inline]
    pub(super) fn should_split(settings: &Settings, b: &Block, size: u64, no_split: bool) -> bool {
        let remaining = b.size - size;
        if no_split {
            false
        } else if b.pool == PoolKind::Small || b.expandable || settings.expandable {
            remaining >= MIN_BLOCK_SIZE
        } else {
            !settings.is_oversize(size) && remaining > SMALL_SIZE
        }
    }

    /// Hands out block `id` (already out of the free index), splitting off the
    /// unused back part.
    #[inline]
    pub(super) fn alloc_found_block(
        &self,
        st: &mut State,
        id: u32,
        rounded: u64,
        orig: u64,
        site: &'static std::panic::Location<'static>,
    ) -> RawAllocation {
        let State {
            blocks,
            streams,
            stats,
            settings,
            gc_counts,
            free_clock,
            ..
        } = st;
        let b = &blocks[id];
        let (kind, expandable, s, bsize, already_split) =
            (b.pool, b.expandable, b.stream, b.size, b.is_split());
        let pool = kind.stat();
        let stream = &mut streams[s as usize];
        if Self::should_split(settings, b, rounded, stream.no_split) {
            let rest = blocks.split(id, rounded);
            // `State::index_insert` of the back part, with its stream's
            // index at hand.
            let r = &mut blocks[rest];
            let gc = gc_counts[kind as usize];
            if gc != 0 {
                r.gc_base = gc;
            }
            *free_clock += 1;
            r.freed_at = *free_clock;
            let rest_size = bsize - rounded;
            stream.free[kind as usize].insert(Entry {
                size: rest_size,
                ptr: r.ptr,
                block: rest,
            });
            if !expandable {
                if already_split {
                    stats.inactive_split_bytes.decrease(pool, rounded as i64);
                } else {
                    stats.inactive_split.increase(pool, 1);
                    stats.inactive_split_bytes.increase(pool, rest_size as i64);
                }
            }
        } else if already_split && !expandable {
            stats.inactive_split.decrease(pool, 1);
            stats.inactive_split_bytes.decrease(pool, bsize as i64);
        }
        let b = &mut blocks[id];
        b.allocated = true;
        b.requested = orig;
        b.generation = b.generation.wrapping_add(1);
        let (size, ptr, generation) = (b.size, b.ptr, b.generation);
        // A free block is never marked oversize (the free clears the mark).
        let oversize = settings.is_oversize(size);
        if oversize {
            b.oversize = true;
        }
        stream.allocated_grew(size, *free_clock);
        stats.allocation.increase_by(pool, 1);
        stats.allocated_bytes.increase_by(pool, size);
        let now_allocated = stats.allocated_bytes.all().current as u64;
        stats.active.increase_by(pool, 1);
        stats.active_bytes.increase_by(pool, size);
        stats.requested_bytes.increase_by(pool, orig);
        if oversize {
            stats.oversize_allocations.increase(1);
        }
        st.allocated_high.observe(now_allocated, st.free_clock);
        if st.observed {
            let stream = st.streams[s as usize].handle;
            if st.history.enabled() {
                st.history.push_alloc(&mut st.blocks[id], stream, site);
            }
            st.track(Action::Alloc, ptr, orig, stream);
            st.report_usage(ptr, size as i64, self.device);
        }
        RawAllocation {
            ptr,
            size: orig,
            block: id,
            generation,
            owner: self.id,
        }
    }

    /// Returns a block to its pool, merging it with free neighbours.
    #[inline]
    pub(super) fn free_block(&self, st: &mut State, id: u32) {
        if st.observed {
            st.record_free(Action::FreeCompleted, id);
            st.track_block(Action::FreeCompleted, id);
        }
        self.release_block(st, id);
    }

    /// [`free_block`](Self::free_block) less its history entry.
    #[inline(always)]
    pub(super) fn release_block(&self, st: &mut State, id: u32) {
        let State {
            blocks,
            streams,
            stats,
            gc_counts,
            free_clock,
            ..
        } = st;
        let b = &blocks[id];
        let (orig_size, requested) = (b.size, b.requested);
        let (kind, expandable, prev, next) = (b.pool, b.expandable, b.prev, b.next);
        let pool = kind.stat();
        // The neighbours lie in the block's segment: the same stream and
        // pool (set when a block is made, kept by splits), so the same free
        // index, looked up once.
        let b_stream = b.stream;
        let idx = &mut streams[b_stream as usize].free[kind as usize];
        let mut net_blocks = 0i64;
        let mut net_bytes = 0i64;
        let mut id = id;
        if prev != NONE {
            if let Some(n) = take_free(idx, blocks, prev, (b_stream, kind)) {
                net_blocks -= 1;
                net_bytes -= n as i64;
                blocks.absorb_free_next(prev);
                id = prev;
            }
        }
        // After a merge with `prev`, `prev`'s next block is this one's.
        if next != NONE {
            if let Some(n) = take_free(idx, blocks, next, (b_stream, kind)) {
                net_blocks -= 1;
                net_bytes -= n as i64;
                blocks.absorb_free_next(id);
            }
        }
        // `State::index_insert`, with the index at hand.
        let b = &mut blocks[id];
        b.requested = 0;
        let gc = gc_counts[kind as usize];
        if gc != 0 {
            b.gc_base = gc;
        }
        *free_clock += 1;
        b.freed_at = *free_clock;
        idx.insert(Entry {
            size: b.size,
            ptr: b.ptr,
            block: id,
        });
        if !expandable {
            if b.is_split() {
                net_blocks += 1;
                net_bytes += b.size as i64;
            }
            apply_delta(&mut stats.inactive_split, pool, net_blocks);
            apply_delta(&mut stats.inactive_split_bytes, pool, net_bytes);
        }
        stats.active.decrease_by(pool, 1);
        stats.active_bytes.decrease_by(pool, orig_size);
        stats.requested_bytes.decrease_by(pool, requested);
    }
}

/// Takes block `j`, a neighbour of a block being freed, out of the free
/// index `idx` if it is free (it lies in the same segment: the same stream
/// and pool, so the same index), and returns its size. A function, not a
/// closure, so that it is inlined at both calls.
#[inline(always)]
fn take_free(
    idx: &mut crate::pool::FreeIndex,
    blocks: &crate::block::Blocks,
    j: u32,
    (stream, kind): (u32, PoolKind),
) -> Option<u64> {
    let n = &blocks[j];
    if !n.is_free() {
        return None;
    }
    debug_assert!(n.stream == stream && n.pool == kind);
    idx.remove(n.size, n.ptr);
    Some(n.size)
}

#[inline]
fn apply_delta(a: &mut crate::stats::StatArray, pool: StatType, d: i64) {
    if d > 0 {
        a.increase(pool, d);
    } else if d < 0 {
        a.decrease(pool, -d);
    }
}
