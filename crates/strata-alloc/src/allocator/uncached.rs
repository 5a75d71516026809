//! Allocation while caching is off (PyTorch's `caching_allocator_enable(False)`):
//! each request is its own device allocation, freed to the device at once.

use super::*;

impl CachingAllocator {
    /// Turns caching on or off, PyTorch's
    /// `torch.cuda.memory.caching_allocator_enable(value)`. While caching is
    /// off, each allocation is a device allocation of exactly the size asked
    /// for (PyTorch's `uncached_allocate`: no rounding, no cached block, no
    /// statistics, no history, no memory-fraction check) and its free returns
    /// the memory to the device at once (`uncached_delete`); the device's
    /// free memory ([`mem_get_info`](Self::mem_get_info)) shows it, the
    /// allocator's statistics and snapshots do not. As with PyTorch's
    /// deleters, what happens at a free is decided when the memory was
    /// allocated: memory allocated while caching was on goes back to the
    /// cache whenever it is freed, and memory allocated while it was off
    /// goes back to the device. Cached memory stays cached until
    /// [`empty_cache`](Self::empty_cache). For debugging (a memory checker
    /// sees each allocation as its own device allocation) or to measure what
    /// caching saves; every request then costs a device call.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use strata_alloc::driver::sim::SimDriver;
    /// use strata_alloc::{AllocatorConfig, CachingAllocator, StreamId};
    ///
    /// let a = CachingAllocator::new(Arc::new(SimDriver::h100()), AllocatorConfig::default());
    /// a.set_caching_enabled(false);
    /// assert!(!a.caching_enabled());
    /// let free = a.mem_get_info().unwrap().free;
    /// let x = a.allocate(1000, StreamId::DEFAULT).unwrap();
    /// assert_eq!(a.mem_get_info().unwrap().free, free - 1000); // exactly the request
    /// assert_eq!(a.memory_stats().requested_bytes.all().allocated, 0); // not counted
    /// drop(x);
    /// assert_eq!(a.mem_get_info().unwrap().free, free); // back to the device at once
    /// a.set_caching_enabled(true);
    /// ```
    pub fn set_caching_enabled(&self, enabled: bool) {
        self.state.lock().caching_disabled = !enabled;
    }

    /// Whether caching is on (see [`set_caching_enabled`](Self::set_caching_enabled)).
    pub fn caching_enabled(&self) -> bool {
        !self.state.lock().caching_disabled
    }

    /// A device allocation of exactly `size` bytes, outside the cache
    /// (caching is off).
    #[cold]
    pub(super) fn allocate_uncached(
        &self,
        st: &mut State,
        size: u64,
    ) -> Result<RawAllocation, AllocError> {
        let ptr = match self.counted.malloc(size) {
            Ok(p) => p,
            Err(DriverError::OutOfMemory) => {
                return Err(AllocError::UncachedOutOfMemory {
                    device: self.device,
                    requested: size,
                    free: self.counted.mem_get_info().map(|m| m.free).unwrap_or(0),
                })
            }
            Err(e) => return Err(self.driver_error(e)),
        };
        self.check_new_range(st, "malloc", ptr, size)?;
        // A serial number per allocation: the driver may hand the same
        // address out again once this one is freed, and a copy of this
        // handle kept after its free must not match that allocation.
        st.uncached_serial = st.uncached_serial.wrapping_add(1);
        let serial = st.uncached_serial;
        st.uncached.insert(ptr, (size, serial));
        st.malloced.insert(ptr, size);
        Ok(RawAllocation {
            ptr,
            size,
            block: UNCACHED,
            generation: serial,
            owner: self.id,
        })
    }

    /// Checks that `raw`, a handle of an allocation made while caching was
    /// off, is live here.
    pub(super) fn check_uncached_live(
        &self,
        st: &State,
        raw: &RawAllocation,
    ) -> Result<(), AllocError> {
        if raw.owner == self.id && st.uncached.get(&raw.ptr) == Some(&(raw.size, raw.generation)) {
            Ok(())
        } else {
            Err(AllocError::InvalidFree {
                device: self.device,
                ptr: raw.ptr,
            })
        }
    }

    /// Returns an allocation made while caching was off to the device. A
    /// driver failure leaves it live (it can be freed again).
    #[cold]
    pub(super) fn free_uncached(&self, raw: RawAllocation) -> Result<(), AllocError> {
        let mut st = self.state.lock();
        self.check_uncached_live(&st, &raw)?;
        self.counted
            .free(raw.ptr, raw.size)
            .map_err(|e| self.driver_error(e))?;
        st.uncached.remove(&raw.ptr);
        st.malloced.remove(&raw.ptr);
        Ok(())
    }
}
