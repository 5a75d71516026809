//! PyTorch's allocator tests, session 55.
//!
//! Read for this session: `test/test_cuda.py` (`test_memory_stats`,
//! `test_record_stream`, `test_record_stream_on_shifted_view`,
//! `test_caching_allocator_record_stream_oom`, `test_allocator_settings`,
//! `test_garbage_collect_expandable`, `test_max_split_expandable`,
//! `test_memory_snapshot`, `test_notifies_oom`, `test_raises_oom`) and
//! `c10/cuda/CUDACachingAllocator.cpp` (`malloc`, `free`, `free_block`,
//! `try_merge_blocks`, `get_free_block`, `garbage_collect_cached_blocks`,
//! `snapshot`, `resetAccumulatedStats`, `resetPeakStats`). Almost every behaviour these stand on is pinned
//! by the earlier files (`pytorch_parity*.rs`, `pytorch_tests_s32.rs` to
//! `_s54.rs`, `settings.rs`, the hostile sweeps); this file adds the edges
//! left:
//!
//! * Garbage collection runs on a miss of *either* pool (`malloc` calls
//!   `garbage_collect_cached_blocks` whatever pool the request is for), but
//!   only ever frees whole cached blocks of the default *large* pool, and a
//!   small-pool lookup does not age them (`get_free_block` bumps the
//!   searched pool's `get_free_blocks_call_count` only).
//! * A block whose free waits on two recorded streams stays
//!   `active_pending_free` until *both* are done, and while it waits its
//!   free neighbours do not merge with it (`try_merge_blocks` refuses a
//!   block with `event_count > 0`); once the events complete, the next
//!   `malloc`'s `process_events` frees it and the three pieces merge back
//!   into one unsplit segment, `inactive_split` going back to zero.
//!
//! Expected figures come from PyTorch's source, worked out in each test's
//! comments, never from strata's output.

use super::common::{sim_device, stat};
use std::sync::Arc;
use strata_alloc::driver::sim::SimDriver;
use strata_alloc::history::Action;
use strata_alloc::snapshot::BlockState;
use strata_alloc::{AllocatorConfig, CachingAllocator, StreamId};

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
const S0: StreamId = StreamId::DEFAULT;
const S1: StreamId = StreamId(11);
const S2: StreamId = StreamId(12);

/// An allocator over a simulated device of `capacity` bytes with no virtual
/// memory support (ordinary segments only), settings `conf`.
fn sim_no_vm(conf: &str, capacity: u64) -> Arc<CachingAllocator> {
    let d = Arc::new(SimDriver::new(capacity, 0));
    CachingAllocator::new(d, AllocatorConfig::parse(conf).unwrap())
}

// ---------------------------------------------------------------------------
// garbage_collection_threshold: which pool triggers it, which pool it frees
// ---------------------------------------------------------------------------

/// `malloc` in `c10/cuda/CUDACachingAllocator.cpp`: when `get_free_block`
/// misses, `garbage_collect_cached_blocks` runs if a fraction is set and the
/// threshold is above 0, *whatever pool the request is for*; it walks only
/// `large_blocks` (the default large pool), and a block's age
/// (`gc_count()`) is `large_blocks.get_free_blocks_call_count` minus the
/// count when it was cached. `get_free_block` bumps the count of the pool it
/// searches, so small-pool lookups never age large blocks.
///
/// 1 GiB device, ordinary segments, fraction 1/8 (128 MiB allowed),
/// threshold 0.5 (64 MiB):
///
/// * `x` (1 KiB, S0): small-pool miss; 0 reserved, no collection; a 2 MiB
///   small segment. `x` is freed: the small segment is cached whole.
/// * three 30 MiB requests on S0 (large lookups 1, 2, 3; before each,
///   2, 32 and 62 MiB reserved, none above 64 MiB): three 30 MiB segments,
///   92 MiB reserved. All three freed after the third lookup: each cached
///   with base 3.
/// * 1 KiB on S1: the small pool has nothing for S1, a miss. Reserved
///   92 MiB > 64 MiB, target 28 MiB. Candidates: the three unsplit large
///   blocks, each of age 3 - 3 = 0 (the S1 small lookup did not count),
///   mean 0, so all three are at least as old as the mean and all are
///   freed in one pass (90 MiB). The cached small segment is not a
///   candidate and stays. Then a 2 MiB small segment for S1: 4 MiB reserved,
///   two segments, three device frees.
///
/// Without the threshold the same calls leave 94 MiB reserved.
#[test]
fn a_small_pool_miss_collects_the_large_pools_cached_blocks_only() {
    for (conf, reserved, frees) in [
        (
            "expandable_segments:False,garbage_collection_threshold:0.5",
            4 * MIB,
            3,
        ),
        ("expandable_segments:False", 94 * MIB, 0),
    ] {
        let a = sim_no_vm(conf, GIB);
        a.set_memory_fraction(0.125).unwrap();
        let x = a.allocate(1024, S0).unwrap();
        drop(x);
        let big: Vec<_> = (0..3).map(|_| a.allocate(30 * MIB, S0).unwrap()).collect();
        assert_eq!(a.memory_reserved(), 92 * MIB, "{conf}");
        drop(big);
        let y = a.allocate(1024, S1).unwrap();
        assert_eq!(a.memory_reserved(), reserved, "{conf}");
        let s = a.memory_stats();
        assert_eq!(s.num_device_free, frees, "{conf}");
        assert_eq!(s.num_alloc_retries, 0, "{conf}: no full release");
        assert_eq!(s.num_sync_all_streams, 0, "{conf}");
        // The small pool's cached segment (S0's) is still there either way.
        let small: Vec<_> = a
            .snapshot()
            .into_iter()
            .filter(|g| g.segment_type == "small")
            .collect();
        assert_eq!(small.len(), 2, "{conf}");
        assert!(small
            .iter()
            .any(|g| g.stream == S0 && g.allocated_size == 0 && g.total_size == 2 * MIB));
        drop(y);
        a.check_consistency().unwrap();
    }
}

/// The same, with the small pool's own cached segments: however far past
/// the threshold reserved memory is, `garbage_collect_cached_blocks` frees
/// nothing of the small pool (it walks `large_blocks` only, and returns at
/// once when no large block is a candidate). 1 GiB device, 8 MiB allowed
/// (fraction 1/128), threshold 0.5 (4 MiB):
///
/// * 1 KiB on S0, S1 and S2 (small misses, 0, 2 and 4 MiB reserved before
///   each: none above 4 MiB): three 2 MiB small segments, 6 MiB reserved;
///   all three freed and cached whole.
/// * 1 KiB on stream 13: a small miss with 6 MiB > 4 MiB reserved, but no
///   large block cached: nothing is collected, and the new 2 MiB segment
///   fits the 8 MiB limit: 8 MiB reserved, no device free.
/// * 1 KiB on stream 14: a miss, 8 MiB reserved, still nothing collected;
///   `alloc_block` fails the fraction check, so the full release
///   (`release_cached_blocks`, one retry) frees the three cached small
///   segments (stream 13's holds a live block): three device frees, then a
///   new segment: 4 MiB reserved.
#[test]
fn garbage_collection_never_frees_small_segments() {
    let a = sim_no_vm(
        "expandable_segments:False,garbage_collection_threshold:0.5",
        GIB,
    );
    a.set_memory_fraction(1.0 / 128.0).unwrap();
    for s in [S0, S1, S2] {
        drop(a.allocate(1024, s).unwrap());
    }
    assert_eq!(a.memory_reserved(), 6 * MIB);
    let live = a.allocate(1024, StreamId(13)).unwrap();
    let s = a.memory_stats();
    assert_eq!(a.memory_reserved(), 8 * MIB);
    assert_eq!(s.num_device_free, 0, "the small pool is not collected");
    assert_eq!(s.num_alloc_retries, 0);
    let other = a.allocate(1024, StreamId(14)).unwrap();
    let s = a.memory_stats();
    assert_eq!(s.num_alloc_retries, 1, "only the full release frees them");
    assert_eq!(s.num_device_free, 3);
    assert_eq!(a.memory_reserved(), 4 * MIB);
    drop((live, other));
    a.check_consistency().unwrap();
}

/// `malloc` calls `garbage_collect_cached_blocks` only when no cached block
/// fits (`if (!block_found)`): a request served from the cache collects
/// nothing, however far past the threshold reserved memory is. 1 GiB
/// device, ordinary segments, 128 MiB allowed, threshold 0.5 (64 MiB):
///
/// * `a`, `b`, `c` of 30 MiB (large lookups 1 to 3, 0, 30 and 60 MiB
///   reserved before each: none above 64 MiB): 90 MiB reserved. `a` and `b`
///   are freed (cached with base 3), `c` stays.
/// * 10 MiB (lookup 4): `a`'s block fits (best fit, lower address first),
///   a hit, so no collection with 90 MiB reserved; `should_split` (20 MiB
///   left, more than 1 MiB) splits it.
/// * 40 MiB (lookup 5): a miss. Reserved 90 > 64 MiB, target 26 MiB. The
///   only unsplit cached large block is `b` (age 5 - 3 = 2, the mean), so
///   it is freed (30 MiB, enough); then a 40 MiB segment: 100 MiB reserved,
///   one device free, no retry.
///
/// Without the threshold the 40 MiB request finds 90 + 40 MiB past the
/// limit, and the full release (one retry) frees `b`: 100 MiB reserved too.
#[test]
fn garbage_collection_waits_for_a_miss() {
    for (conf, retries) in [
        (
            "expandable_segments:False,garbage_collection_threshold:0.5",
            0,
        ),
        ("expandable_segments:False", 1),
    ] {
        let a = sim_no_vm(conf, GIB);
        a.set_memory_fraction(0.125).unwrap();
        let x = a.allocate(30 * MIB, S0).unwrap();
        let y = a.allocate(30 * MIB, S0).unwrap();
        let z = a.allocate(30 * MIB, S0).unwrap();
        let px = x.ptr();
        drop((x, y));
        let hit = a.allocate(10 * MIB, S0).unwrap();
        assert_eq!(hit.ptr(), px, "{conf}");
        assert_eq!(
            a.memory_reserved(),
            90 * MIB,
            "{conf}: a hit collects nothing"
        );
        assert_eq!(a.memory_stats().num_device_free, 0, "{conf}");
        let miss = a.allocate(40 * MIB, S0).unwrap();
        let s = a.memory_stats();
        assert_eq!(a.memory_reserved(), 100 * MIB, "{conf}");
        assert_eq!(s.num_device_free, 1, "{conf}");
        assert_eq!(s.num_alloc_retries, retries, "{conf}");
        assert_eq!(s.num_sync_all_streams, retries, "{conf}");
        drop((hit, miss, z));
        a.check_consistency().unwrap();
    }
}

// ---------------------------------------------------------------------------
// record_stream on two streams, and merging around a pending free
// ---------------------------------------------------------------------------

/// `free` and `free_block` in `c10/cuda/CUDACachingAllocator.cpp`, as
/// `test_record_stream` uses them with two side streams: a block recorded
/// on S1 and S2 gets one event per stream (`insert_events`), and
/// `free_block` runs only when its `event_count` falls to 0, so it stays
/// active (`active_pending_free` in the snapshot, `active` and
/// `active_bytes` counted, `allocation` and `allocated_bytes` not) until
/// both streams are done. `try_merge_blocks` refuses a neighbour with
/// `event_count > 0`, so its free neighbours stay apart meanwhile.
///
/// Ordinary segments, small pool, S0. `x` (512 B) and `y` (512 B) are
/// carved from the front of one 2 MiB segment (`alloc_found_block`: the
/// first split makes one inactive split piece of 2 MiB - 512; the second
/// shrinks it by 512). `y` is recorded on S1 and S2 and freed, then `x` is
/// freed: `x` cannot merge with the pending `y`, so there are two inactive
/// split pieces, `x` (512) and the tail (2 MiB - 1 KiB): 2 MiB - 512 bytes.
/// The snapshot reads inactive 512, active_pending_free 512, inactive tail.
///
/// S1 completes: a 4 MiB request (large pool: it leaves the small segment
/// alone) runs `process_events`; `y` still waits on S2, nothing changes, and
/// a 512 B request on S0 gets `x`'s address (the best fit of the two free
/// pieces), not `y`'s. S2 completes: the next request frees `y`, which
/// merges with both free neighbours (`x` was given back first) into one
/// unsplit 2 MiB block: the small pool's `inactive_split` 0, its `active`
/// 0, and the trace has `y`'s `free_completed` after its
/// `free_requested`.
#[test]
fn a_block_recorded_on_two_streams_waits_for_both_and_keeps_its_neighbours_apart() {
    let (d, a) = sim_device("expandable_segments:False", GIB);
    a.record_history(Some(1000));
    let x = a.allocate(512, S0).unwrap();
    let y = a.allocate(512, S0).unwrap();
    let (px, py) = (x.ptr(), y.ptr());
    assert_eq!(py, px + 512, "front splits");
    assert_eq!(stat(&a, "inactive_split.small_pool.current"), 1);
    assert_eq!(
        stat(&a, "inactive_split_bytes.small_pool.current") as u64,
        2 * MIB - 1024
    );
    y.record_stream(S1).unwrap();
    y.record_stream(S2).unwrap();
    drop(y);
    drop(x);
    assert_eq!(stat(&a, "allocation.all.current"), 0);
    assert_eq!(stat(&a, "active.all.current"), 1, "y waits");
    assert_eq!(stat(&a, "active_bytes.all.current"), 512);
    assert_eq!(stat(&a, "requested_bytes.all.current"), 512);
    assert_eq!(stat(&a, "inactive_split.small_pool.current"), 2);
    assert_eq!(
        stat(&a, "inactive_split_bytes.small_pool.current") as u64,
        2 * MIB - 512
    );
    let states = |a: &CachingAllocator| -> Vec<(u64, BlockState)> {
        let segs = a.snapshot();
        let seg = segs.iter().find(|g| g.segment_type == "small").unwrap();
        seg.blocks.iter().map(|b| (b.size, b.state)).collect()
    };
    assert_eq!(
        states(&a),
        vec![
            (512, BlockState::Inactive),
            (512, BlockState::ActivePendingFree),
            (2 * MIB - 1024, BlockState::Inactive),
        ]
    );

    d.complete_stream(S1);
    let big = a.allocate(4 * MIB, S0).unwrap(); // process_events: S2 pending
    assert_eq!(states(&a)[1], (512, BlockState::ActivePendingFree));
    let z = a.allocate(512, S0).unwrap();
    assert_eq!(z.ptr(), px, "x's piece, not the pending y");
    drop(z);

    d.complete_stream(S2);
    let big2 = a.allocate(4 * MIB, S0).unwrap(); // process_events frees y
    assert_eq!(states(&a), vec![(2 * MIB, BlockState::Inactive)]);
    assert_eq!(stat(&a, "inactive_split.small_pool.current"), 0);
    assert_eq!(stat(&a, "inactive_split_bytes.small_pool.current"), 0);
    // The large pool's one: the 20 MiB segment the two 4 MiB requests share.
    assert_eq!(stat(&a, "inactive_split.large_pool.current"), 1);
    assert_eq!(stat(&a, "active.small_pool.current"), 0);
    assert_eq!(stat(&a, "requested_bytes.small_pool.current"), 0);
    let h = a.history();
    let requested = h
        .iter()
        .position(|e| e.action == Action::FreeRequested && e.addr == py)
        .unwrap();
    let completed = h
        .iter()
        .position(|e| e.action == Action::FreeCompleted && e.addr == py)
        .unwrap();
    assert!(requested < completed);
    // The completion came with the second 4 MiB allocation, after the first.
    let second_big = h
        .iter()
        .rposition(|e| e.action == Action::Alloc && e.size == 4 * MIB)
        .unwrap();
    assert!(completed < second_big);
    drop((big, big2));
    a.empty_cache().unwrap();
    assert_eq!(a.memory_reserved(), 0);
    a.check_consistency().unwrap();
}
