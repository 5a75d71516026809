//! PyTorch's allocator tests, session 53.
//!
//! Read for this session: `test/test_cuda.py` (`TestCuda`'s memory tests,
//! `TestCudaMallocAsync`, `TestBlockStateAbsorption`, `TestMemPool`,
//! `TestCachingHostAllocatorCudaGraph`), `test/test_cuda_multigpu.py`'s
//! `_test_memory_stats_generator`, and the C++ tests
//! `aten/src/ATen/test/cuda_allocatorTraceTracker_test.cpp`,
//! `cuda_allocator_test.cpp` and `c10/cuda/test/impl/`. Nearly every
//! behaviour they check of the allocator is mirrored by the earlier files
//! (`pytorch_parity*.rs`, `pytorch_tests_s32.rs` to `_s52.rs`,
//! `pytorch_pinned_parity.rs`, `history*.rs`, `settings.rs`, `mempool.rs`);
//! this file adds what was left:
//!
//! * `AllocatorTraceTracker.TrackMallocFree`: two trackers attached, with
//!   history off, each sees the one `segment_alloc` of a 500 MiB request and
//!   the one `segment_free` of the `emptyCache` after it.
//! * `_record_memory_history(max_entries=0)`: PyTorch's
//!   `RingBuffer::setMaxEntries` keeps `std::max(1, size)`, so recording
//!   goes on with a one-entry trace. strata stopped recording then; it now
//!   follows PyTorch (the test is in `pytorch_tests_s52.rs`,
//!   `max_entries_zero_records_one_entry`; below, the one-entry ring with a
//!   free that completes at once).
//!
//! Two differences from PyTorch are pinned by ignored tests and left as they
//! are (docs/allocator.md, "Inspection"):
//!
//! * A new bound while recording. PyTorch's `setMaxEntries` changes the
//!   bound only: a smaller bound keeps every entry already held (more than
//!   the bound) and overwrites the first slots from then on, so the trace
//!   shows the newest entry before older ones; a larger bound after the ring
//!   wrapped appends new entries after the slot that was next to be
//!   overwritten, so `getEntries` returns them out of order. strata keeps
//!   the newest entries that fit, oldest first (`hostile_sweep_s50.rs`).
//!   Following PyTorch would reproduce its misordered traces. (Checked by
//!   compiling PyTorch 2.15's own `c10/core/RingBuffer.h` with `int`
//!   entries: bound 2 after 1, 2, 3 reads `2 3`, then bound 100 and 4 read
//!   `2 4 3`; bound 100 after 1, 2, 3 then bound 1 reads `1 2 3`, and 4
//!   gives `4 2 3`; bound 0 after 1, 2 reads `2`.)
//! * The call sites of live allocations once recording stops. PyTorch's
//!   `recordHistory(false)` clears the trace but not the blocks'
//!   `context_when_allocated`, which `snapshot` copies whatever the
//!   recording state, so `_snapshot()` still shows the frames of blocks
//!   allocated while recording. strata forgets them
//!   (`record_history(None)` "stops and forgets"): its free path leaves a
//!   block's recorded call site in place when history is off, and clearing
//!   it there would add work to the hot path, so the call sites are dropped
//!   when recording stops.
//!
//! * Reuse of pinned blocks above `pinned_max_round_threshold_mb`. PyTorch
//!   2.15's `CachingHostAllocatorImpl::get_free_block` (its header
//!   `ATen/core/CachingHostAllocator.h`) files blocks by
//!   `Log2_64_Ceil(size)` and, since requests above the threshold keep their
//!   size, scans the bucket for any cached block at least as large: a
//!   3 MiB request takes a cached 3.5 MiB block (both in the 4 MiB bucket),
//!   up to nearly twice its size. strata takes a cached block at most 1/8
//!   larger than the request's block size (docs/allocator.md, "Pinned host
//!   memory", "Size classes") and pins a new one otherwise.
//!
//! Expected figures come from PyTorch's source, worked out in each test's
//! comments, never from strata's output.

use super::common::sim_device;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use strata_alloc::history::{Action, HistoryOptions};
use strata_alloc::pinned::{PinnedAllocator, PinnedLimits, SimPinnedBackend};
use strata_alloc::{AllocatorConfig, StreamId};

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
const S0: StreamId = StreamId::DEFAULT;

// ---------------------------------------------------------------------------
// Trace trackers
// ---------------------------------------------------------------------------

/// Mirrors `AllocatorTraceTracker.TrackMallocFree`
/// (`aten/src/ATen/test/cuda_allocatorTraceTracker_test.cpp`): two
/// trackers, one counting `SEGMENT_ALLOC`, one `SEGMENT_FREE`, attached
/// with history off. The 500 MiB request misses and makes one segment (one
/// `segment_alloc`; `alloc_block` calls `record_trace`, which calls every
/// tracker whether or not history records); its free caches the block (no
/// `segment_free`); `emptyCache` releases it (one `segment_free`). Each
/// tracker sees every event, not only the kind it counts.
#[test]
fn two_trace_trackers_see_the_segment_alloc_and_free_with_history_off() {
    let (_, a) = sim_device("expandable_segments:False", 2 * GIB);
    let allocs = Arc::new(AtomicUsize::new(0));
    let frees = Arc::new(AtomicUsize::new(0));
    let seen = [Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0))];
    let (n, s) = (Arc::clone(&allocs), Arc::clone(&seen[0]));
    a.attach_trace_tracker(move |e| {
        s.fetch_add(1, Ordering::SeqCst);
        if e.action == Action::SegmentAlloc {
            n.fetch_add(1, Ordering::SeqCst);
        }
    });
    let (n, s) = (Arc::clone(&frees), Arc::clone(&seen[1]));
    a.attach_trace_tracker(move |e| {
        s.fetch_add(1, Ordering::SeqCst);
        if e.action == Action::SegmentFree {
            n.fetch_add(1, Ordering::SeqCst);
        }
    });
    drop(a.allocate(500 * MIB, S0).unwrap());
    assert_eq!(allocs.load(Ordering::SeqCst), 1);
    assert_eq!(frees.load(Ordering::SeqCst), 0);
    a.empty_cache().unwrap();
    assert_eq!(frees.load(Ordering::SeqCst), 1);
    assert_eq!(allocs.load(Ordering::SeqCst), 1);
    // segment_alloc, alloc, free_requested, free_completed, segment_free.
    assert_eq!(seen[0].load(Ordering::SeqCst), 5);
    assert_eq!(seen[1].load(Ordering::SeqCst), 5);
    assert!(!a.history_enabled());
    assert!(a.history().is_empty());
}

// ---------------------------------------------------------------------------
// max_entries 0: a one-entry trace
// ---------------------------------------------------------------------------

/// With `max_entries` 0 the ring holds one entry (`setMaxEntries` keeps
/// `std::max(1, size)`). A free that completes at once records
/// `free_requested` then `free_completed` (`free` calls `record_trace` for
/// the request, then `free_block` for the completion): with one slot the
/// trace holds the `free_completed` alone. `empty_cache` then records the
/// `segment_free`, which replaces it. Through both entry points
/// (`record_history(Some(0))` and `HistoryOptions::new(0)`), in either
/// segment mode (the release of an expandable segment's pages is
/// `segment_unmap`).
#[test]
fn a_one_entry_trace_keeps_the_latest_event() {
    for (conf, release) in [
        ("expandable_segments:False", Action::SegmentFree),
        ("expandable_segments:True", Action::SegmentUnmap),
    ] {
        for opts in [false, true] {
            let (_, a) = sim_device(conf, GIB);
            if opts {
                a.record_history_opts(&HistoryOptions::new(0));
            } else {
                a.record_history(Some(0));
            }
            let x = a.allocate(MIB, S0).unwrap();
            let p = x.ptr();
            assert_eq!(a.history().len(), 1, "{conf}");
            drop(x);
            let h = a.history();
            assert_eq!(h.len(), 1, "{conf}");
            assert_eq!(
                (h[0].action, h[0].addr),
                (Action::FreeCompleted, p),
                "{conf}"
            );
            a.empty_cache().unwrap();
            let h = a.history();
            assert_eq!(h.len(), 1, "{conf}");
            assert_eq!(h[0].action, release, "{conf}");
            a.check_consistency().unwrap();
        }
    }
}

// ---------------------------------------------------------------------------
// A new bound while recording (a documented difference)
// ---------------------------------------------------------------------------

/// Three 512-byte allocations that hit a cached small segment (warmed
/// before recording): one `alloc` entry each, no segment event.
fn warm_small(a: &Arc<strata_alloc::CachingAllocator>) {
    drop(a.allocate(512, S0).unwrap());
}

/// strata's rule, pinned beside the ignored tests below: the newest entries
/// that fit the new bound stay, oldest first, and later entries follow them.
#[test]
fn a_new_bound_keeps_the_newest_entries_in_order() {
    let (_, a) = sim_device("expandable_segments:False", GIB);
    warm_small(&a);
    a.record_history(Some(2));
    let p: Vec<_> = (0..3).map(|_| a.allocate(512, S0).unwrap()).collect();
    a.record_history(Some(100));
    let p4 = a.allocate(512, S0).unwrap();
    let addrs: Vec<u64> = a.history().iter().map(|e| e.addr).collect();
    assert_eq!(addrs, [p[1].ptr(), p[2].ptr(), p4.ptr()]);

    let (_, a) = sim_device("expandable_segments:False", GIB);
    warm_small(&a);
    a.record_history(Some(100));
    let p: Vec<_> = (0..3).map(|_| a.allocate(512, S0).unwrap()).collect();
    a.record_history(Some(1));
    let addrs: Vec<u64> = a.history().iter().map(|e| e.addr).collect();
    assert_eq!(addrs, [p[2].ptr()]);
    let p4 = a.allocate(512, S0).unwrap();
    let addrs: Vec<u64> = a.history().iter().map(|e| e.addr).collect();
    assert_eq!(addrs, [p4.ptr()]);
}

/// PyTorch, bound 2 then 100: `insertEntries` of p1, p2 fills the vector;
/// p3 overwrites slot 0 (`alloc_trace_next_` 1): `[p3, p2]`, read from slot
/// 1 as `p2, p3`. `setMaxEntries(100)` changes nothing else; p4 is appended
/// (size 2 < 100): `[p3, p2, p4]`, still read from slot 1: `p2, p4, p3`.
#[test]
#[ignore = "documented difference: PyTorch's ring misorders its entries when the bound grows after it wrapped; strata keeps them in order"]
fn a_larger_bound_after_the_ring_wrapped_reads_out_of_order() {
    let (_, a) = sim_device("expandable_segments:False", GIB);
    warm_small(&a);
    a.record_history(Some(2));
    let p: Vec<_> = (0..3).map(|_| a.allocate(512, S0).unwrap()).collect();
    a.record_history(Some(100));
    let p4 = a.allocate(512, S0).unwrap();
    let addrs: Vec<u64> = a.history().iter().map(|e| e.addr).collect();
    assert_eq!(addrs, [p[1].ptr(), p4.ptr(), p[2].ptr()]);
}

/// PyTorch, bound 100 then 1: `[p1, p2, p3]` stay (`setMaxEntries` trims
/// nothing), so the trace holds three entries under a bound of one; p4
/// overwrites slot 0 (size 3 ≥ 1) and `alloc_trace_next_` wraps to 0:
/// `[p4, p2, p3]`, read from slot 0 in that order.
#[test]
#[ignore = "documented difference: a smaller bound trims nothing in PyTorch (the trace then reads newest first); strata keeps the newest entries that fit"]
fn a_smaller_bound_keeps_every_entry_until_overwritten() {
    let (_, a) = sim_device("expandable_segments:False", GIB);
    warm_small(&a);
    a.record_history(Some(100));
    let p: Vec<_> = (0..3).map(|_| a.allocate(512, S0).unwrap()).collect();
    a.record_history(Some(1));
    let addrs: Vec<u64> = a.history().iter().map(|e| e.addr).collect();
    assert_eq!(addrs, [p[0].ptr(), p[1].ptr(), p[2].ptr()]);
    let p4 = a.allocate(512, S0).unwrap();
    let addrs: Vec<u64> = a.history().iter().map(|e| e.addr).collect();
    assert_eq!(addrs, [p4.ptr(), p[1].ptr(), p[2].ptr()]);
}

// ---------------------------------------------------------------------------
// Call sites once recording stops (a documented difference)
// ---------------------------------------------------------------------------

/// PyTorch: `_record_memory_history(None)` is `recordHistory(false, ...)`,
/// which clears the trace and stops recording but leaves each live block's
/// `context_when_allocated`; `snapshot()` copies it into `BlockInfo`
/// unconditionally, so `_snapshot()` still names where `x` was allocated.
#[test]
#[ignore = "documented difference: strata forgets live allocations' call sites when recording stops; PyTorch's snapshot keeps them"]
fn a_live_blocks_call_site_outlives_the_recording() {
    let (_, a) = sim_device("expandable_segments:False", GIB);
    a.record_history(Some(100));
    let x = a.allocate(MIB, S0).unwrap();
    a.record_history(None);
    assert!(a.history().is_empty());
    let site = a
        .snapshot()
        .iter()
        .flat_map(|s| s.blocks.iter())
        .find(|b| b.address == x.ptr())
        .and_then(|b| b.site);
    assert_eq!(site.map(|s| s.file), Some(file!()));
}

/// strata's rule, beside the ignored test: once recording stops, no block
/// names a call site, in the snapshot or through `allocation_origin`, and
/// recording again does not bring them back for allocations made before.
#[test]
fn recording_stopped_forgets_the_live_allocations_call_sites() {
    let (_, a) = sim_device("expandable_segments:False", GIB);
    a.record_history(Some(100));
    let x = a.allocate(MIB, S0).unwrap();
    assert!(a.allocation_origin(x.ptr()).is_some());
    a.record_history(None);
    assert!(a
        .snapshot()
        .iter()
        .all(|s| s.blocks.iter().all(|b| b.site.is_none())));
    a.record_history(Some(100));
    assert!(a.allocation_origin(x.ptr()).is_none());
    assert!(a
        .snapshot()
        .iter()
        .all(|s| s.blocks.iter().all(|b| b.site.is_none())));
    a.check_consistency().unwrap();
}

// ---------------------------------------------------------------------------
// Pinned blocks above the round threshold (a documented difference)
// ---------------------------------------------------------------------------

/// A pinned allocator with `pinned_max_round_threshold_mb:1`.
fn pinned_round_1() -> std::sync::Arc<PinnedAllocator<SimPinnedBackend>> {
    let p = PinnedAllocator::new(SimPinnedBackend::new(None));
    let c = AllocatorConfig::parse("pinned_max_round_threshold_mb:1").unwrap();
    p.set_limits(PinnedLimits::of(&c));
    p
}

/// PyTorch 2.15, `pinned_max_round_threshold_mb:1`: 3.5 MiB is above the
/// threshold, so `allocate` pins a block of exactly 3.5 MiB; freed with no
/// stream recorded, `maybe_cache_block` files it under
/// `size_index(3.5 MiB)` = `Log2_64_Ceil` = 22 (it is below the default
/// `pinned_max_cached_size`, unlimited). A 3 MiB request (unrounded, index
/// 22) scans that list from the newest block for one of at least 3 MiB and
/// takes the 3.5 MiB block: the same address, one block held, one
/// `num_host_alloc`.
#[test]
#[ignore = "documented difference: above pinned_max_round_threshold PyTorch 2.15 reuses any cached block of the request's power-of-two bucket; strata one at most 1/8 larger"]
fn a_pinned_request_above_the_round_threshold_takes_a_larger_cached_block() {
    let p = pinned_round_1();
    let first = p.allocate(7 * MIB / 2).unwrap();
    let ptr = first.ptr();
    drop(first);
    let second = p.allocate(3 * MIB).unwrap();
    assert_eq!((second.ptr(), second.capacity()), (ptr, 7 * MIB / 2));
    let s = p.stats();
    assert_eq!((s.allocations.current, s.num_host_alloc), (1, 1));
}

/// strata's rule, beside the ignored test: above the threshold a request's
/// block is its size in whole pages, and a cached block serves it when at
/// most 1/8 larger. 3 MiB (limit 3.375 MiB) pins a new block beside the
/// cached 3.5 MiB one; 3.25 MiB (limit 3.65625 MiB) takes the 3.5 MiB one.
#[test]
fn a_pinned_request_above_the_round_threshold_takes_a_block_at_most_an_eighth_larger() {
    let p = pinned_round_1();
    let first = p.allocate(7 * MIB / 2).unwrap();
    let ptr = first.ptr();
    drop(first);
    let second = p.allocate(3 * MIB).unwrap();
    assert_ne!(second.ptr(), ptr);
    assert_eq!(second.capacity(), 3 * MIB);
    let third = p.allocate(13 * MIB / 4).unwrap();
    assert_eq!((third.ptr(), third.capacity()), (ptr, 7 * MIB / 2));
    let s = p.stats();
    assert_eq!((s.allocations.current, s.num_host_alloc), (2, 2));
    drop((second, third));
    p.check_consistency().unwrap();
}
