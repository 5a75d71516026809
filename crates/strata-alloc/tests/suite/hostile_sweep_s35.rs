//! Session 35's sweep of hostile inputs to the allocator's public API (after
//! `hostile_sweep_s34.rs`): each input gets a typed error (or the documented
//! answer), never a panic, an abort or a misleading error.
//!
//! Defects these tests found (fixed with them):
//!
//! * a driver (a user's `Driver` implementation) whose `VirtualMemory`
//!   reported a granularity that cannot be a page was taken as it was: a
//!   granularity of `u64::MAX` panicked on the first allocation (an index out
//!   of bounds in the segment bookkeeping); 1 or 3 bytes, or one above the
//!   device's capacity, made every allocation an out-of-memory error on an
//!   empty device, whose hint blamed the caller's tensors or other
//!   processes. `CachingAllocator::try_new` now refuses such a driver with
//!   `AllocError::UnusableGranularity`; `CachingAllocator::new` (which takes
//!   its input as it is and cannot fail) uses whole-allocation segments
//!   over it, as over a driver without virtual memory.
//! * the out-of-memory error of a request routed to a private pool
//!   (`MemPool`) reported `expandable: true` whenever the setting was on,
//!   though a private pool's segments are whole allocations; its message's
//!   last line said "(expandable segments on)". `OutOfMemory.expandable` now
//!   says where the request's memory came from, the new
//!   `OutOfMemory.private_pool` says the request was for a private pool, and
//!   the message names it.

use std::sync::Arc;
use strata_alloc::driver::sim::SimDriver;
use strata_alloc::{AllocError, AllocatorConfig, CachingAllocator, StreamId};

const GIB: u64 = 1 << 30;

#[test]
fn a_granularity_that_cannot_be_a_page_is_refused_or_set_aside() {
    let capacity = 16 * GIB;
    for g in [1u64, 3, 1000, 4095, 3 << 20, 32 * GIB, 1 << 62, u64::MAX] {
        let d = Arc::new(SimDriver::new(capacity, g));
        match CachingAllocator::try_new(d.clone(), AllocatorConfig::default()) {
            Err(AllocError::UnusableGranularity {
                granularity,
                capacity: c,
                ..
            }) => {
                assert_eq!((granularity, c), (g, capacity));
            }
            Err(e) => panic!("granularity {g}: unexpected error {e}"),
            Ok(_) => panic!("granularity {g}: try_new accepted it"),
        }
        let e = CachingAllocator::try_new(d.clone(), AllocatorConfig::default())
            .err()
            .expect("refused")
            .to_string();
        assert!(
            e.contains("power of two") && e.contains(&g.to_string()),
            "{e}"
        );
        // `new` serves the device with whole-allocation segments.
        let a = CachingAllocator::new(d, AllocatorConfig::default());
        assert!(!a.expandable_segments(), "granularity {g}");
        let x = a.allocate(3 << 20, StreamId::DEFAULT).expect("3 MiB");
        let y = a.allocate(1000, StreamId::DEFAULT).expect("1000 bytes");
        assert_eq!((x.size(), y.size()), (3 << 20, 1000));
        a.check_consistency().unwrap();
        drop((x, y));
        a.empty_cache().unwrap();
        assert_eq!(a.memory_reserved(), 0, "granularity {g}");
    }
}

#[test]
fn usable_granularities_still_give_expandable_segments() {
    for g in [4096u64, 64 << 10, 2 << 20, GIB] {
        let d = Arc::new(SimDriver::new(16 * GIB, g));
        let a = CachingAllocator::try_new(d, AllocatorConfig::default()).expect("usable");
        assert!(a.expandable_segments(), "granularity {g}");
        let x = a.allocate(3 << 20, StreamId::DEFAULT).expect("3 MiB");
        a.check_consistency().unwrap();
        drop(x);
        a.empty_cache().unwrap();
        assert_eq!(a.memory_reserved(), 0);
    }
}

/// An out-of-memory error for a request routed to a private pool says that
/// its memory would have come from whole-allocation segments (a private
/// pool's), not from the expandable segments the setting turns on for the
/// default pools.
#[test]
fn a_private_pools_out_of_memory_error_names_the_pools_segment_kind() {
    let d = Arc::new(SimDriver::new(GIB, 2 << 20));
    let a = CachingAllocator::try_new(d, AllocatorConfig::default()).unwrap();
    assert!(a.expandable_segments());
    let pool = a.mem_pool(strata_alloc::MemPoolOptions::default());
    let e = {
        let _in_pool = pool.activate().unwrap();
        a.allocate(2 * GIB, StreamId::DEFAULT).unwrap_err()
    };
    let AllocError::OutOfMemory(oom) = &e else {
        panic!("not an OOM: {e}");
    };
    assert!(!oom.expandable && oom.private_pool, "{oom:?}");
    assert!(e.to_string().contains("private pool"), "{e}");
    // The same request outside the pool: expandable segments.
    let e = a.allocate(2 * GIB, StreamId::DEFAULT).unwrap_err();
    let AllocError::OutOfMemory(oom) = &e else {
        panic!("not an OOM: {e}");
    };
    assert!(oom.expandable && !oom.private_pool, "{oom:?}");
    assert!(e.to_string().contains("(expandable segments on)"), "{e}");
}
