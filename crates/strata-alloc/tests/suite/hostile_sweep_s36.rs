//! Session 36's sweep of hostile inputs to the allocator's public API (after
//! `hostile_sweep_s35.rs`).
//!
//! Defect this test found (fixed with it):
//!
//! * a driver whose mapping granularity equalled the device's capacity was
//!   taken for expandable segments. A page was then the whole device, and the
//!   small and the large pool each need pages of their own: after one small
//!   request (which took the whole device for its pool), every large request
//!   ran out of memory on a device holding a single 1000-byte block.
//!   `CachingAllocator::try_new` now refuses a granularity above half the
//!   capacity with `AllocError::UnusableGranularity`, and
//!   `CachingAllocator::new` serves such a device with whole-allocation
//!   segments.
//! * a growth that asked for a whole chunk (10 pages, while the growth margin
//!   allows it) with less than a chunk left on the device or under the
//!   per-process memory fraction ran out of memory, after emptying the cache,
//!   instead of mapping the request's own pages: 3 MiB was refused with 10
//!   MiB of a 64 MiB device free, and with 10 MiB left under a 64 MiB
//!   fraction. The growth now maps only the request's pages then.
//!
//! And one difference from PyTorch's snapshots (found by comparing with its
//! allocator's code): an expandable segment had no `frames`. PyTorch's
//! `map_block` gives the segment's first block the context of the allocation
//! that first maps memory at its base, kept for the segment's life; strata
//! now does the same.

use crate::common;

use common::{decode, int, key, list, string};
use std::sync::Arc;
use strata_alloc::driver::sim::SimDriver;
use strata_alloc::history::{HistoryContext, HistoryOptions};
use strata_alloc::{AllocError, AllocatorConfig, CachingAllocator, StreamId};

const MIB: u64 = 1 << 20;

#[test]
fn a_device_of_one_page_is_served_with_whole_allocation_segments() {
    let capacity = 64 * MIB;
    for g in [capacity, capacity / 2 + 4096, 64 * MIB - 4096] {
        let d = Arc::new(SimDriver::new(capacity, g));
        if g.is_power_of_two() {
            match CachingAllocator::try_new(d.clone(), AllocatorConfig::default()) {
                Err(AllocError::UnusableGranularity { granularity, .. }) => {
                    assert_eq!(granularity, g)
                }
                Err(e) => panic!("granularity {g}: unexpected error {e}"),
                Ok(_) => panic!("granularity {g}: try_new accepted a one-page device"),
            }
        }
        let a = CachingAllocator::new(d, AllocatorConfig::default());
        assert!(!a.expandable_segments(), "granularity {g}");
        // One small and one large request fit easily in 64 MiB (2 MiB and 20
        // MiB segments).
        let small = a.allocate(1000, StreamId::DEFAULT).expect("1000 bytes");
        let large = a.allocate(3 * MIB, StreamId::DEFAULT).expect("3 MiB");
        assert_eq!((small.size(), large.size()), (1000, 3 * MIB));
        a.check_consistency().unwrap();
    }
}

/// Half the capacity is still a usable page: each pool can map one.
#[test]
fn a_device_of_two_pages_keeps_expandable_segments() {
    let capacity = 64 * MIB;
    let d = Arc::new(SimDriver::new(capacity, capacity / 2));
    let a = CachingAllocator::try_new(d, AllocatorConfig::default()).expect("two pages");
    assert!(a.expandable_segments());
    let small = a.allocate(1000, StreamId::DEFAULT).expect("1000 bytes");
    let large = a.allocate(3 * MIB, StreamId::DEFAULT).expect("3 MiB");
    assert_eq!((small.size(), large.size()), (1000, 3 * MIB));
    assert_eq!(a.memory_reserved(), capacity);
    a.check_consistency().unwrap();
}

/// A growth maps a whole chunk (10 pages) for a large request while the
/// margin allows it, so that a run of similar requests does not map a few
/// pages each time; on a device with less than a chunk left, the request's own
/// pages must still be mapped. (It ran out of memory instead, after emptying
/// the cache: 3 MiB refused with 10 MiB of the device free.)
#[test]
fn a_growth_near_the_device_limit_maps_only_what_fits() {
    let d = Arc::new(SimDriver::new(64 * MIB, 2 * MIB));
    let a = CachingAllocator::try_new(d, AllocatorConfig::default()).unwrap();
    assert!(a.expandable_segments());
    let big = a.allocate(54 * MIB, StreamId::DEFAULT).expect("54 MiB");
    let reserved = a.memory_reserved();
    assert!(reserved <= 64 * MIB - 6 * MIB, "reserved {reserved}");
    let x = a
        .allocate(3 * MIB, StreamId::DEFAULT)
        .expect("3 MiB with 10 MiB free");
    assert_eq!(x.size(), 3 * MIB);
    assert_eq!(a.memory_stats().num_ooms, 0);
    a.check_consistency().unwrap();
    drop((big, x));
}

/// The same near the per-process memory fraction: a chunk that the fraction
/// leaves no room for gives way to the request's own pages.
#[test]
fn a_growth_near_the_memory_fraction_maps_only_what_fits() {
    let d = Arc::new(SimDriver::new(1024 * MIB, 2 * MIB));
    let a = CachingAllocator::try_new(d, AllocatorConfig::default()).unwrap();
    // 64 MiB of the 1 GiB device.
    a.set_memory_fraction(0.0625).unwrap();
    let big = a.allocate(54 * MIB, StreamId::DEFAULT).expect("54 MiB");
    assert!(a.memory_reserved() <= 58 * MIB, "{}", a.memory_reserved());
    let x = a
        .allocate(3 * MIB, StreamId::DEFAULT)
        .expect("3 MiB with 6 MiB or more left under the fraction");
    assert_eq!(x.size(), 3 * MIB);
    assert!(a.memory_reserved() <= 64 * MIB);
    assert_eq!(a.memory_stats().num_ooms, 0);
    a.check_consistency().unwrap();
    drop((big, x));
}

/// The range mapped at an expandable segment's base carries the call site of
/// the allocation that first mapped it (PyTorch's `map_block`: `if
/// (!to_map->prev && !to_map->context_when_segment_allocated)`); a later
/// growth that extends the range leaves it, a range elsewhere has none, and
/// the site goes with the segment when `empty_cache` gives it back.
#[test]
fn an_expandable_segment_carries_the_call_site_that_first_mapped_its_base() {
    let a = CachingAllocator::try_new(
        Arc::new(SimDriver::new(4096 * MIB, 2 * MIB)),
        AllocatorConfig::default(),
    )
    .unwrap();
    assert!(a.expandable_segments());
    a.record_history_opts(&HistoryOptions::new(100).context(HistoryContext::State));
    let line = line!() + 1;
    let x = a.allocate(3 * MIB, StreamId::DEFAULT).unwrap();
    let y = a.allocate(100 * MIB, StreamId::DEFAULT).unwrap(); // extends x's range
    let segs = a.snapshot();
    assert_eq!(segs.len(), 1, "one mapped range");
    assert!(segs[0].is_expandable);
    let site = segs[0].site.as_ref().expect("the base's call site");
    assert_eq!((site.file, site.line), (file!(), line));
    let doc = decode(&a.snapshot_pickle().unwrap());
    let seg = &list(key(&doc, "segments"))[0];
    let frames = list(key(seg, "frames"));
    assert_eq!(frames.len(), 1);
    assert!(string(key(&frames[0], "filename")).ends_with("hostile_sweep_s36.rs"));
    assert_eq!(int(key(&frames[0], "line")), line as u64);
    // A small request maps the small pool's own segment, at its own base.
    let small_line = line!() + 1;
    let z = a.allocate(1000, StreamId::DEFAULT).unwrap();
    let segs = a.snapshot();
    assert_eq!(segs.len(), 2);
    let small = segs.iter().find(|s| s.segment_type == "small").unwrap();
    assert_eq!(small.site.as_ref().map(|s| s.line), Some(small_line));
    drop((x, y, z));
    a.empty_cache().unwrap();
    assert!(a.snapshot().is_empty());
    // A new segment after the old ones were given back: the new call site.
    let line2 = line!() + 1;
    let w = a.allocate(3 * MIB, StreamId::DEFAULT).unwrap();
    let segs = a.snapshot();
    assert_eq!(segs[0].site.as_ref().map(|s| s.line), Some(line2));
    drop(w);
    // Without call sites: none.
    a.empty_cache().unwrap();
    a.record_history(None);
    a.record_history_opts(&HistoryOptions::new(100).context(HistoryContext::None));
    let v = a.allocate(3 * MIB, StreamId::DEFAULT).unwrap();
    assert!(a.snapshot()[0].site.is_none());
    drop(v);
}
