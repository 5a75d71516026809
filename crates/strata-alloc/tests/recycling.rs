//! Page recycling of expandable segments never synchronises a stream while
//! allocating: pages freed on a stream move elsewhere only once an event
//! recorded on that stream has completed.

use std::sync::Arc;
use strata_alloc::driver::sim::SimDriver;
use strata_alloc::{AllocatorConfig, CachingAllocator, StreamId};

const MIB: u64 = 1 << 20;

#[test]
fn recycling_waits_for_a_completed_fence_instead_of_synchronising() {
    // Events stay pending until the test completes them.
    let d = Arc::new(SimDriver::new(1 << 34, 2 * MIB));
    let a = CachingAllocator::new(d.clone(), AllocatorConfig::default());
    let (s0, s1, s2) = (StreamId::DEFAULT, StreamId(11), StreamId(12));

    let x = a.allocate_raw(100 * MIB, s0).unwrap();
    a.free_raw(x).unwrap();
    assert_eq!(a.memory_reserved(), 100 * MIB);

    // Another stream needs 100 MiB: beyond the reserve margin, so recycling
    // would take stream 0's free pages, but work queued on stream 0 may still
    // use them. Without synchronising, new pages are created instead.
    let y = a.allocate_raw(100 * MIB, s1).unwrap();
    assert_eq!(a.memory_reserved(), 200 * MIB);
    assert_eq!(d.call_count("stream_synchronize"), 0);
    assert_eq!(d.call_count("event_synchronize"), 0);
    assert_eq!(d.call_count("unmap"), 0);
    a.free_raw(y).unwrap();

    // Once stream 0's fence has completed, its pages are recycled: a third
    // stream's request is served without new physical memory.
    d.complete_all_events();
    let creates = d.call_count("create");
    let z = a.allocate_raw(100 * MIB, s2).unwrap();
    assert_eq!(d.call_count("create"), creates);
    assert_eq!(d.call_count("unmap"), 50);
    assert_eq!(a.memory_reserved(), 200 * MIB);
    assert_eq!(d.call_count("stream_synchronize"), 0);
    assert_eq!(d.call_count("event_synchronize"), 0);
    a.check_consistency().unwrap();

    a.free_raw(z).unwrap();
    a.empty_cache().unwrap();
    assert_eq!(a.memory_reserved(), 0);
    assert_eq!(d.used_bytes(), 0);
    a.check_consistency().unwrap();
}
