//! The slow path: a request no cached block fits, in PyTorch's order (garbage
//! collection, a device allocation or a growth of an expandable segment,
//! releasing oversize cached blocks, releasing every cached block and
//! retrying), then a typed out-of-memory error.

use super::*;

impl CachingAllocator {
    /// No cached block fits: obtain memory from the device, releasing cached
    /// memory if the device has none, or fail with a typed out-of-memory error.
    pub(super) fn allocate_slow(
        &self,
        st: &mut State,
        s: u32,
        pool: PoolKind,
        rounded: u64,
        orig: u64,
    ) -> Result<u32, AllocError> {
        if st.settings.gc_threshold.is_some() {
            self.garbage_collect(st)?;
        }
        if let Some(id) = self.alloc_block(st, s, pool, rounded, orig)? {
            return Ok(id);
        }
        if let Some(id) = crate::mempool::free_block_on_oom(self, st, s, pool, rounded) {
            return Ok(id);
        }
        if st.settings.config.max_split_size.is_some()
            && self.release_available_cached_blocks(st, s, pool, rounded)?
        {
            if let Some(id) = self.alloc_block(st, s, pool, rounded, orig)? {
                return Ok(id);
            }
        }
        st.stats.num_alloc_retries += 1;
        self.release_cached_blocks(st)?;
        if let Some(id) = self.alloc_block(st, s, pool, rounded, orig)? {
            return Ok(id);
        }
        // A private pool's request needed an ordinary segment whatever the
        // setting.
        let device_request = if st.serves_expandable(s) {
            rounded.div_ceil(self.page) * self.page
        } else {
            Self::allocation_size(&st.settings.config, rounded)
        };
        Err(self.out_of_memory(st, s, orig, rounded, device_request))
    }

    /// `throw_on_cudamalloc_oom`: fails when the device allocation a request
    /// of `rounded` bytes needs (PyTorch's `get_allocation_size`, whichever
    /// segment kind will serve it) would take reserved memory past the
    /// configuration's fraction of the device ([`Settings::reject_limit`]),
    /// PyTorch 2.15's second check in `alloc_block`. The first, the memory
    /// fraction in force, comes before it: a request past that limit is not
    /// rejected here but goes the ordinary way (cached blocks released,
    /// retried, then `num_ooms` and the out-of-memory observers), as in
    /// PyTorch, where a fraction given in the configuration at start-up is
    /// both limits. Checked on every device allocation the slow path tries,
    /// the retries included, as PyTorch checks it in each `alloc_block`.
    ///
    /// [`Settings::reject_limit`]: crate::state::Settings::reject_limit
    pub(super) fn reject_beyond_fraction(
        &self,
        st: &mut State,
        rounded: u64,
        orig: u64,
    ) -> Result<(), AllocError> {
        let Some(limit) = st.settings.reject_limit else {
            return Ok(());
        };
        let device_request = Self::allocation_size(&st.settings.config, rounded);
        let reserved = st.reserved();
        if !st.fits_fraction(device_request) || reserved.saturating_add(device_request) <= limit {
            return Ok(());
        }
        st.stats.num_oom_rejections += 1;
        Err(AllocError::OomRejected {
            device: self.device,
            requested: orig,
            device_request,
            reserved,
            limit,
        })
    }

    /// Obtains new device memory for a request: a new segment, or pages mapped
    /// into the stream's expandable segment. `Ok(None)` when the device (or the
    /// memory fraction) has no room; `throw_on_cudamalloc_oom`'s rejection
    /// (of a request of `orig` bytes) as an error.
    pub(super) fn alloc_block(
        &self,
        st: &mut State,
        s: u32,
        pool: PoolKind,
        rounded: u64,
        orig: u64,
    ) -> Result<Option<u32>, AllocError> {
        self.reject_beyond_fraction(st, rounded, orig)?;
        if st.serves_expandable(s) {
            return self.expandable_space().grow(st, s, pool, rounded);
        }
        let size = Self::allocation_size(&st.settings.config, rounded);
        if !st.fits_fraction(size) {
            return Ok(None);
        }
        let ptr = match self.counted.malloc(size) {
            Ok(p) => p,
            Err(DriverError::OutOfMemory) => return Ok(None),
            Err(e) => return Err(self.driver_error(e)),
        };
        self.check_new_range(st, "malloc", ptr, size)?;
        let id = st
            .blocks
            .add(Block::whole_segment(ptr, size, s, pool, None));
        st.segments.insert(ptr, id);
        st.malloced.insert(ptr, size);
        let p = pool.stat();
        st.stats.segment.increase(p, 1);
        st.stats.reserved_bytes.increase(p, size as i64);
        if let Some(r) = st.private_pool_reserved(s) {
            r.increase(p, size as i64);
        }
        st.stats.num_device_alloc += 1;
        if st.settings.is_oversize(size) {
            st.blocks[id].oversize_segment = true;
            st.stats.oversize_segments.increase(1);
        }
        st.record(Action::SegmentAlloc, ptr, size, s);
        if st.history.enabled() && st.history.rec.context >= HistoryContext::State {
            if let Some(site) = st.history.cause {
                st.history.segment_sites.insert(ptr, site);
            }
        }
        Ok(Some(id))
    }

    /// Refuses a range the driver's `call` returned that the allocator
    /// cannot hold, a driver's bug, as the driver's error with nothing
    /// changed: one at address 0 (an allocation there would read as the
    /// empty handle of a zero-byte request; given back), one that wraps past
    /// 2^64 (every block in it would end below where it starts; given back),
    /// or one overlapping a range the allocator holds (not given back: the
    /// driver might free the held memory).
    pub(super) fn check_new_range(
        &self,
        st: &State,
        call: &'static str,
        ptr: DevicePtr,
        size: u64,
    ) -> Result<(), AllocError> {
        if ptr == 0 {
            let _ = self.counted.free(ptr, size);
            return Err(self.driver_error(null_range(call, size)));
        }
        if ptr.checked_add(size).is_none() {
            let _ = self.counted.free(ptr, size);
            return Err(self.driver_error(wrapping_range(call, ptr, size)));
        }
        match st.held_range_overlapping(ptr, size) {
            Some((base, held)) => Err(self.driver_error(DriverError::Call {
                call,
                message: format!(
                    "returned {ptr:#x} for {size} bytes, a range overlapping the {held} bytes at {base:#x} that the allocator already holds; the driver must not hand out memory twice"
                ),
            })),
            None => Ok(()),
        }
    }

    pub(super) fn driver_error(&self, source: DriverError) -> AllocError {
        AllocError::Driver {
            device: self.device,
            source,
        }
    }
}
