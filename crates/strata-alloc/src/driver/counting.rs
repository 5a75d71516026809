//! A driver adaptor that counts calls by kind.
//!
//! [`CountingDriver`] wraps any [`Driver`] (and its [`VirtualMemory`], when it
//! has one), forwards every call unchanged and counts it in a [`DriverCalls`].
//! The caching allocator talks to its device through one, so
//! [`CachingAllocator::driver_calls`](crate::CachingAllocator::driver_calls)
//! reports exactly the calls the allocator made, failed ones included.
//!
//! ```
//! use std::sync::Arc;
//! use strata_alloc::driver::{counting::CountingDriver, sim::SimDriver, Driver};
//!
//! let d = CountingDriver::new(Arc::new(SimDriver::new(1 << 30, 2 << 20)));
//! let p = d.malloc(4096).unwrap();
//! d.free(p, 4096).unwrap();
//! let vm = d.virtual_memory().unwrap();
//! let h = vm.create(2 << 20).unwrap();
//! vm.release(h).unwrap();
//! let calls = d.calls();
//! assert_eq!((calls.malloc, calls.free, calls.create, calls.release), (1, 1, 1, 1));
//! assert_eq!(calls.memory_calls(), 4);
//! ```

use super::{
    Device, DevicePtr, Driver, DriverCalls, DriverError, EventHandle, MemInfo, PhysHandle,
    StreamEvents, StreamId, VirtualMemory,
};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The kinds of call counted, one per field of [`DriverCalls`].
#[derive(Clone, Copy)]
enum Kind {
    Malloc,
    Free,
    Reserve,
    Unreserve,
    Create,
    Release,
    Map,
    SetAccess,
    Unmap,
    EventRecord,
    EventQuery,
    EventSynchronize,
    StreamSynchronize,
    MemGetInfo,
}

const KINDS: usize = Kind::MemGetInfo as usize + 1;

/// A [`Driver`] that forwards to `D` and counts each call by kind (see the
/// module documentation). Event creation and destruction, stream creation and
/// the informational calls (`device`, `name`, `total_memory`) are not counted:
/// [`DriverCalls`] has no field for them.
pub struct CountingDriver<D: ?Sized> {
    inner: Arc<D>,
    counts: [AtomicU64; KINDS],
}

impl<D: Driver + ?Sized> CountingDriver<D> {
    /// Wraps `inner`, with every count at zero.
    pub fn new(inner: Arc<D>) -> CountingDriver<D> {
        CountingDriver {
            inner,
            counts: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }

    /// The wrapped driver (calls made through it directly are not counted).
    pub fn inner(&self) -> &Arc<D> {
        &self.inner
    }

    /// The calls made so far, by kind.
    pub fn calls(&self) -> DriverCalls {
        let n = |k: Kind| self.counts[k as usize].load(Ordering::Relaxed);
        DriverCalls {
            malloc: n(Kind::Malloc),
            free: n(Kind::Free),
            reserve: n(Kind::Reserve),
            unreserve: n(Kind::Unreserve),
            create: n(Kind::Create),
            release: n(Kind::Release),
            map: n(Kind::Map),
            set_access: n(Kind::SetAccess),
            unmap: n(Kind::Unmap),
            event_record: n(Kind::EventRecord),
            event_query: n(Kind::EventQuery),
            event_synchronize: n(Kind::EventSynchronize),
            stream_synchronize: n(Kind::StreamSynchronize),
            mem_get_info: n(Kind::MemGetInfo),
        }
    }

    #[inline]
    fn count(&self, kind: Kind) {
        self.counts[kind as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// The wrapped driver's virtual memory; only reached through
    /// [`Driver::virtual_memory`], which checks that it exists.
    fn vm(&self) -> &dyn VirtualMemory {
        self.inner
            .virtual_memory()
            .expect("CountingDriver hands out its VirtualMemory only when the inner driver has one")
    }
}

impl<D: Driver + ?Sized> StreamEvents for CountingDriver<D> {
    fn create_event(&self) -> Result<EventHandle, DriverError> {
        self.inner.create_event()
    }

    fn destroy_event(&self, event: EventHandle) -> Result<(), DriverError> {
        self.inner.destroy_event(event)
    }

    fn record_event(&self, event: EventHandle, stream: StreamId) -> Result<(), DriverError> {
        self.count(Kind::EventRecord);
        self.inner.record_event(event, stream)
    }

    fn query_event(&self, event: EventHandle) -> Result<bool, DriverError> {
        self.count(Kind::EventQuery);
        self.inner.query_event(event)
    }

    fn synchronize_event(&self, event: EventHandle) -> Result<(), DriverError> {
        self.count(Kind::EventSynchronize);
        self.inner.synchronize_event(event)
    }

    fn synchronize_stream(&self, stream: StreamId) -> Result<(), DriverError> {
        self.count(Kind::StreamSynchronize);
        self.inner.synchronize_stream(stream)
    }

    fn create_stream(&self) -> Result<StreamId, DriverError> {
        self.inner.create_stream()
    }
}

impl<D: Driver + ?Sized> Driver for CountingDriver<D> {
    fn device(&self) -> Device {
        self.inner.device()
    }

    fn name(&self) -> String {
        self.inner.name()
    }

    fn total_memory(&self) -> u64 {
        self.inner.total_memory()
    }

    fn mem_get_info(&self) -> Result<MemInfo, DriverError> {
        self.count(Kind::MemGetInfo);
        self.inner.mem_get_info()
    }

    fn malloc(&self, size: u64) -> Result<DevicePtr, DriverError> {
        self.count(Kind::Malloc);
        self.inner.malloc(size)
    }

    fn free(&self, ptr: DevicePtr, size: u64) -> Result<(), DriverError> {
        self.count(Kind::Free);
        self.inner.free(ptr, size)
    }

    fn virtual_memory(&self) -> Option<&dyn VirtualMemory> {
        self.inner
            .virtual_memory()
            .map(|_| self as &dyn VirtualMemory)
    }
}

impl<D: Driver + ?Sized> VirtualMemory for CountingDriver<D> {
    fn granularity(&self) -> u64 {
        self.vm().granularity()
    }

    fn reserve(&self, size: u64) -> Result<DevicePtr, DriverError> {
        self.count(Kind::Reserve);
        self.vm().reserve(size)
    }

    fn unreserve(&self, ptr: DevicePtr, size: u64) -> Result<(), DriverError> {
        self.count(Kind::Unreserve);
        self.vm().unreserve(ptr, size)
    }

    fn create(&self, size: u64) -> Result<PhysHandle, DriverError> {
        self.count(Kind::Create);
        self.vm().create(size)
    }

    fn release(&self, handle: PhysHandle) -> Result<(), DriverError> {
        self.count(Kind::Release);
        self.vm().release(handle)
    }

    fn map(&self, ptr: DevicePtr, size: u64, handle: PhysHandle) -> Result<(), DriverError> {
        self.count(Kind::Map);
        self.vm().map(ptr, size, handle)
    }

    fn set_access(&self, ptr: DevicePtr, size: u64) -> Result<(), DriverError> {
        self.count(Kind::SetAccess);
        self.vm().set_access(ptr, size)
    }

    fn unmap(&self, ptr: DevicePtr, size: u64) -> Result<(), DriverError> {
        self.count(Kind::Unmap);
        self.vm().unmap(ptr, size)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::sim::SimDriver;

    #[test]
    fn every_kind_is_counted_once_per_call_failed_or_not() {
        let sim = Arc::new(SimDriver::new(8 << 20, 2 << 20));
        let d = CountingDriver::new(Arc::clone(&sim));
        sim.inject_failure("map", 1);
        let vm = d.virtual_memory().unwrap();
        let base = vm.reserve(4 << 20).unwrap();
        let h = vm.create(2 << 20).unwrap();
        assert!(vm.map(base, 2 << 20, h).is_err()); // injected failure, still counted
        vm.map(base, 2 << 20, h).unwrap();
        vm.set_access(base, 2 << 20).unwrap();
        vm.unmap(base, 2 << 20).unwrap();
        vm.release(h).unwrap();
        vm.unreserve(base, 4 << 20).unwrap();
        let p = d.malloc(512).unwrap();
        d.free(p, 512).unwrap();
        d.mem_get_info().unwrap();
        let e = d.create_event().unwrap();
        d.record_event(e, StreamId(3)).unwrap();
        assert!(!d.query_event(e).unwrap());
        d.synchronize_event(e).unwrap();
        d.synchronize_stream(StreamId(3)).unwrap();
        d.destroy_event(e).unwrap();
        let c = d.calls();
        assert_eq!(
            c,
            DriverCalls {
                malloc: 1,
                free: 1,
                reserve: 1,
                unreserve: 1,
                create: 1,
                release: 1,
                map: 2,
                set_access: 1,
                unmap: 1,
                event_record: 1,
                event_query: 1,
                event_synchronize: 1,
                stream_synchronize: 1,
                mem_get_info: 1,
            }
        );
        // The calls reached the simulated device as made.
        assert_eq!(sim.call_count("map"), 2);
        assert_eq!(sim.call_count("event_create"), 1);
    }

    #[test]
    fn a_driver_without_virtual_memory_stays_without() {
        let d = CountingDriver::new(Arc::new(SimDriver::new(1 << 20, 0)));
        assert!(d.virtual_memory().is_none());
        assert_eq!(d.calls(), DriverCalls::default());
    }
}
