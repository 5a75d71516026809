//! PyTorch's allocator tests, session 52.
//!
//! Behaviours of PyTorch's caching allocator that its tests
//! (`test/test_cuda.py`: `test_record_stream`, `test_memory_stats`,
//! `test_set_per_process_memory_fraction`, `test_memory_snapshot`,
//! `TestMemPool`) stand on and that the earlier files (`pytorch_parity*.rs`,
//! `pytorch_tests_s32.rs` to `_s51.rs`, `pytorch_pinned_parity.rs`,
//! `settings.rs`, `mempool.rs`, `history*.rs`, `hostile_*.rs`) check only in
//! passing or not at all:
//!
//! * when each statistic of a freed block moves while its free waits for
//!   another stream (`free` versus `free_block` in
//!   `c10/cuda/CUDACachingAllocator.cpp`), oversize blocks included;
//! * that reading the statistics or taking a snapshot never completes a
//!   pending free (only `malloc`'s `process_events`, or `empty_cache`'s
//!   `synchronize_and_free_events`, do), and that an allocation on any stream
//!   completes every stream's finished frees, traced before its own events;
//! * `setMemoryFraction`'s limit, `static_cast<size_t>(fraction *
//!   totalGlobalMem)` (rounded down), and `alloc_block`'s test `total +
//!   size > allowed` (a reservation exactly at the limit is allowed);
//! * `empty_cache` with caching turned off (`emptyCache` does not look at the
//!   switch), and `empty_cache` while a private pool in use has a free
//!   waiting for another stream (the wait is for every event, the pool's
//!   segment stays);
//! * garbage collection run by a miss in a private pool, which collects the
//!   default large pool's aged blocks (`garbage_collect_cached_blocks`).
//!
//! `max_entries` 0 follows PyTorch since session 53: its
//! `RingBuffer::setMaxEntries` clamps it to 1, so
//! `_record_memory_history(max_entries=0)` records with a one-entry trace
//! (until then strata stopped recording and forgot, as `record_history(None)`).
//!
//! Expected figures come from PyTorch's source, worked out in each test's
//! comments, never from strata's output. All run with
//! `expandable_segments:False`, PyTorch's default.

use super::common::{sim_device, stat};
use strata_alloc::history::{Action, HistoryOptions};
use strata_alloc::snapshot::BlockState;
use strata_alloc::{AllocError, MemPoolOptions, StreamId};

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
const S0: StreamId = StreamId::DEFAULT;
const S1: StreamId = StreamId(7);
const S2: StreamId = StreamId(9);

/// `(current, peak, allocated, freed)` of the `all` figure of statistic `k`.
fn all(a: &strata_alloc::CachingAllocator, k: &str) -> [i64; 4] {
    ["current", "peak", "allocated", "freed"].map(|m| stat(a, &format!("{k}.all.{m}")))
}

/// The states of every block, segment by segment.
fn states(a: &strata_alloc::CachingAllocator) -> Vec<Vec<BlockState>> {
    a.snapshot()
        .iter()
        .map(|s| s.blocks.iter().map(|b| b.state).collect())
        .collect()
}

// ---------------------------------------------------------------------------
// A free that waits for another stream
// ---------------------------------------------------------------------------

/// `DeviceCachingAllocator::free` (the free request) decreases `allocation`,
/// `allocated_bytes` and, for a block of at least `max_split_size`,
/// `oversize_allocations` at once, then, with `stream_uses` recorded,
/// `insert_events` instead of `free_block`; `free_block` (once the events
/// completed, at the next `malloc`'s `process_events`) decreases `active`,
/// `active_bytes` and `requested_bytes`. `oversize_segments` follows the
/// segment (`alloc_block` / `release_block`), so it stays while the segment
/// is cached. This is what `test_record_stream` relies on, with an oversize
/// block.
///
/// `max_split_size_mb:20` (the least PyTorch accepts). `x` asks for 40 MiB:
/// `round_size` keeps 40 MiB (a multiple of 512), the large pool,
/// `get_allocation_size` ≥ 10 MiB rounds to 2 MiB: a 40 MiB segment, which is
/// oversize (≥ 20 MiB), as is the block (`should_split`: no split of an
/// oversize request). `x` records `S1`, then is freed:
///
/// - at once: `allocation` 1 → 0, `allocated_bytes` 40 MiB → 0 (freed 40
///   MiB), `oversize_allocations` 1 → 0; `active` stays 1, `active_bytes` and
///   `requested_bytes` stay 40 MiB, nothing freed; the snapshot shows the
///   block `active_pending_free`;
/// - the stream's work completes: nothing moves (no call of the allocator);
/// - a 512-byte request on `S0`: `process_events` completes the free
///   (`active_bytes` freed 40 MiB, `requested_bytes` freed 40 MiB), then a new
///   small segment (2 MiB) serves it: `active_bytes` current 512,
///   `requested_bytes` current 512; `oversize_segments` still 1 (the 40 MiB
///   segment is cached), `oversize_allocations` 0.
#[test]
fn a_pending_free_drops_allocated_and_oversize_figures_at_the_request() {
    let (d, a) = sim_device("expandable_segments:False,max_split_size_mb:20", 16 * GIB);
    let x = a.allocate(40 * MIB, S0).unwrap();
    assert_eq!(stat(&a, "oversize_allocations.current"), 1);
    assert_eq!(stat(&a, "oversize_segments.current"), 1);
    x.record_stream(S1).unwrap();
    drop(x);
    let m = 40 * MIB as i64;
    assert_eq!(all(&a, "allocation"), [0, 1, 1, 1]);
    assert_eq!(all(&a, "allocated_bytes"), [0, m, m, m]);
    assert_eq!(stat(&a, "oversize_allocations.current"), 0);
    assert_eq!(stat(&a, "oversize_allocations.freed"), 1);
    assert_eq!(all(&a, "active"), [1, 1, 1, 0]);
    assert_eq!(all(&a, "active_bytes"), [m, m, m, 0]);
    assert_eq!(all(&a, "requested_bytes"), [m, m, m, 0]);
    assert_eq!(states(&a), vec![vec![BlockState::ActivePendingFree]]);

    d.complete_all_events();
    assert_eq!(all(&a, "active_bytes"), [m, m, m, 0]);
    assert_eq!(all(&a, "requested_bytes"), [m, m, m, 0]);

    let y = a.allocate(512, S0).unwrap();
    assert_eq!(all(&a, "active"), [1, 1, 2, 1]);
    assert_eq!(all(&a, "active_bytes"), [512, m, m + 512, m]);
    assert_eq!(all(&a, "requested_bytes"), [512, m, m + 512, m]);
    assert_eq!(stat(&a, "oversize_allocations.current"), 0);
    assert_eq!(stat(&a, "oversize_segments.current"), 1);
    assert_eq!(a.memory_reserved(), 42 * MIB);
    drop(y);
    a.check_consistency().unwrap();
}

/// PyTorch calls `process_events` only at the start of `malloc` (and waits
/// for every event in `empty_cache`'s `synchronize_and_free_events`):
/// `getDeviceStats` copies the statistics and `snapshot` reads the blocks,
/// neither touches the events. So after the recorded stream's work has
/// completed, `memory_stats()` and `memory_snapshot()` still show the block
/// active (`active_pending_free`), and no `free_completed` is traced.
///
/// `process_events` walks the event queues of *every* stream, so the next
/// allocation on any stream (here a third one, `S2`) completes the free: its
/// `free_completed` is traced first (in `process_events`), then the miss in
/// `S2`'s pool makes a segment (`segment_alloc`: a 4 MiB request is large,
/// below 10 MiB, so a 20 MiB segment) and the allocation (`alloc`). The
/// `snapshot` entries are those of the two `snapshot()` calls, each counting
/// the pending block's 1 MiB (`total_active` sums `active_size`, which counts
/// a block with events).
#[test]
fn reading_the_statistics_or_a_snapshot_completes_no_pending_free() {
    let (d, a) = sim_device("expandable_segments:False", GIB);
    a.record_history(Some(100));
    let x = a.allocate(MIB, S0).unwrap();
    let at = x.ptr();
    x.record_stream(S1).unwrap();
    drop(x);
    d.complete_all_events();
    for _ in 0..2 {
        assert_eq!(stat(&a, "active_bytes.all.current"), MIB as i64);
        assert_eq!(
            states(&a),
            vec![vec![BlockState::ActivePendingFree, BlockState::Inactive]]
        );
    }
    let y = a.allocate(4 * MIB, S2).unwrap();
    assert_eq!(stat(&a, "active_bytes.all.current"), 4 * MIB as i64);
    let h: Vec<(Action, u64, u64, StreamId)> = a
        .history()
        .iter()
        .map(|e| (e.action, e.addr, e.size, e.stream))
        .collect();
    assert_eq!(
        h,
        vec![
            (Action::SegmentAlloc, at, 2 * MIB, S0),
            (Action::Alloc, at, MIB, S0),
            (Action::FreeRequested, at, MIB, S0),
            (Action::Snapshot, 0, MIB, S0),
            (Action::Snapshot, 0, MIB, S0),
            (Action::FreeCompleted, at, MIB, S0),
            (Action::SegmentAlloc, y.ptr(), 20 * MIB, S2),
            (Action::Alloc, y.ptr(), 4 * MIB, S2),
        ]
    );
}

// ---------------------------------------------------------------------------
// The per-process memory fraction
// ---------------------------------------------------------------------------

/// `DeviceCachingAllocator::setMemoryFraction`: `allowed_memory_maximum =
/// fraction × totalGlobalMem` rounded to the nearest byte (halves away from
/// zero) in PyTorch 2.15's build (`hostile_s59.rs`; this test first had the
/// conversion drop the fraction of a byte, from an older source); `alloc_block` refuses a
/// segment when `total_allocated_memory + size > allowed_memory_maximum`, so
/// a reservation exactly at the limit is allowed
/// (`test_set_per_process_memory_fraction` allocates up to `0.499 ×` the
/// device under a fraction of 0.5).
///
/// A device of 256 MiB − 3 bytes at 0.5: the product is 128 MiB − 1.5 bytes
/// (exact in a double), so the limit is 128 MiB − 1 byte (half a byte
/// rounds away from zero). A 128 MiB request
/// (a segment of 128 MiB: ≥ 10 MiB, a multiple of 2 MiB) is 1 byte over it:
/// out of memory, counted once in `num_ooms`. 126 MiB fits. Then, on a
/// device of 256 MiB at 0.5 (a limit of exactly 128 MiB), 126 MiB and a
/// small request (a 2 MiB segment) reach 128 MiB exactly, and succeed; one
/// more small segment (two 1 MiB requests fill the first) is over.
#[test]
fn the_memory_fraction_limit_rounds_down_and_admits_exactly_the_limit() {
    let (_, a) = sim_device("expandable_segments:False", 256 * MIB - 3);
    a.set_memory_fraction(0.5).unwrap();
    let e = a.allocate(128 * MIB, S0).unwrap_err();
    assert!(matches!(e, AllocError::OutOfMemory(_)), "{e}");
    assert_eq!(stat(&a, "num_ooms"), 1);
    assert_eq!(a.memory_reserved(), 0);
    let x = a.allocate(126 * MIB, S0).unwrap();
    assert_eq!(a.memory_reserved(), 126 * MIB);
    drop(x);

    let (_, a) = sim_device("expandable_segments:False", 256 * MIB);
    a.set_memory_fraction(0.5).unwrap();
    let x = a.allocate(126 * MIB, S0).unwrap();
    let y = a.allocate(MIB, S0).unwrap();
    let z = a.allocate(MIB, S0).unwrap();
    assert_eq!(a.memory_reserved(), 128 * MIB);
    assert_eq!(stat(&a, "num_ooms"), 0);
    let e = a.allocate(512, S0).unwrap_err();
    assert!(matches!(e, AllocError::OutOfMemory(_)), "{e}");
    assert_eq!(stat(&a, "num_ooms"), 1);
    assert_eq!(a.memory_reserved(), 128 * MIB);
    drop((x, y, z));
}

/// The same limit for a fraction whose product is not a whole number:
/// 0.1 of 1 GiB is 107374182.4 bytes, so the limit is 107374182. A 100 MiB
/// segment (104857600) and a small one (2 MiB: 106954752 in all) fit; a
/// 20 MiB segment for a 1 MiB + 1 byte request (large pool, below 10 MiB)
/// does not (127926272), and neither does a second small segment
/// (109051904).
#[test]
fn the_memory_fraction_limit_of_a_fractional_product() {
    let (_, a) = sim_device("expandable_segments:False", GIB);
    a.set_memory_fraction(0.1).unwrap();
    let x = a.allocate(100 * MIB, S0).unwrap();
    assert!(a.allocate(MIB + 1, S0).is_err());
    let y = a.allocate(MIB, S0).unwrap();
    let z = a.allocate(MIB, S0).unwrap();
    assert_eq!(a.memory_reserved(), 106_954_752);
    assert!(a.allocate(512, S0).is_err());
    assert_eq!(stat(&a, "num_ooms"), 2);
    drop((x, y, z));
}

// ---------------------------------------------------------------------------
// empty_cache
// ---------------------------------------------------------------------------

/// `NativeCachingAllocator::emptyCache` goes to each device's
/// `release_cached_blocks` without looking at `isEnabled()`: turning caching
/// off (`torch.cuda.memory.caching_allocator_enable(False)`) changes where
/// new requests go, not what `empty_cache()` releases. A 1 MiB block cached
/// in a 2 MiB small segment is released by `empty_cache` after caching is
/// turned off (`segment` 1 → 0, `num_device_free` 1).
#[test]
fn empty_cache_releases_the_cache_with_caching_turned_off() {
    let (_, a) = sim_device("expandable_segments:False", GIB);
    drop(a.allocate(MIB, S0).unwrap());
    assert_eq!(a.memory_reserved(), 2 * MIB);
    a.set_caching_enabled(false);
    a.empty_cache().unwrap();
    assert_eq!(a.memory_reserved(), 0);
    assert_eq!(stat(&a, "segment.all.current"), 0);
    assert_eq!(stat(&a, "num_device_free"), 1);
    a.set_caching_enabled(true);
    a.check_consistency().unwrap();
}

/// `release_cached_blocks` (`mempool_id` (0, 0), what `empty_cache()` passes)
/// first runs `synchronize_and_free_events` over *every* outstanding event,
/// a private pool's blocks' included, then releases the default pools' whole
/// free segments and the segments of pools no longer in use
/// (`graph_pools_freeable`). So a pool block freed with a recorded stream
/// while the pool is in use is completed by `empty_cache` (its `active_bytes`
/// leave the statistics: `num_sync_all_streams` 1), but its segment stays,
/// as the pool is still in use: `reserved_bytes_by_private_pools` keeps the
/// pool's 2 MiB small segment; the default pools' cached 20 MiB segment (a
/// 4 MiB request) goes. Once the pool is dropped (`~MemPool`:
/// `releasePool`, then `emptyCache(id)`), its segment goes too.
#[test]
fn empty_cache_completes_a_pools_pending_free_but_keeps_its_segment() {
    let (_, a) = sim_device("expandable_segments:False", GIB);
    let pool = a.mem_pool(MemPoolOptions::default());
    let id = pool.id();
    let key = format!(
        "reserved_bytes_by_private_pools.{}_{}.all.current",
        id.0, id.1
    );
    let x = {
        let _g = pool.activate().unwrap();
        a.allocate(MIB, S0).unwrap()
    };
    drop(a.allocate(4 * MIB, S0).unwrap());
    x.record_stream(S1).unwrap();
    drop(x);
    assert_eq!(stat(&a, "active_bytes.all.current"), MIB as i64);
    assert_eq!(a.memory_reserved(), 22 * MIB);
    a.empty_cache().unwrap();
    assert_eq!(stat(&a, "num_sync_all_streams"), 1);
    assert_eq!(stat(&a, "active_bytes.all.current"), 0);
    assert_eq!(stat(&a, "requested_bytes.all.current"), 0);
    assert_eq!(a.memory_reserved(), 2 * MIB);
    assert_eq!(stat(&a, &key), 2 * MIB as i64);
    assert_eq!(states(&a), vec![vec![BlockState::Inactive]]);
    drop(pool);
    assert_eq!(a.memory_reserved(), 0);
    a.check_consistency().unwrap();
}

// ---------------------------------------------------------------------------
// History: max_entries 0
// ---------------------------------------------------------------------------

/// `_record_memory_history(enabled="all", max_entries=0)` passes 0 to
/// `recordHistory`, whose `alloc_buffer.setMaxEntries(0)` keeps
/// `std::max(size_t(1), size)` (`RingBuffer` in
/// `c10/cuda/CUDACachingAllocator.cpp`): recording goes on with a one-entry
/// trace, the latest event. The 1 MiB request makes a 2 MiB segment
/// (`segment_alloc`, then `alloc`): the `alloc` is the one kept. Through
/// `record_history(Some(0))` too (the same PyTorch call).
#[test]
fn max_entries_zero_records_one_entry() {
    let (_, a) = sim_device("expandable_segments:False", GIB);
    a.record_history_opts(&HistoryOptions::new(0));
    assert!(a.history_enabled());
    let x = a.allocate(MIB, S0).unwrap();
    let h = a.history();
    assert_eq!(h.len(), 1);
    assert_eq!((h[0].action, h[0].addr), (Action::Alloc, x.ptr()));
    drop(x);
    let (_, b) = sim_device("expandable_segments:False", GIB);
    b.record_history(Some(0));
    assert!(b.history_enabled());
    let y = b.allocate(MIB, S0).unwrap();
    let h = b.history();
    assert_eq!(h.len(), 1);
    assert_eq!((h[0].action, h[0].addr), (Action::Alloc, y.ptr()));
}

// ---------------------------------------------------------------------------
// Garbage collection on a private pool's miss
// ---------------------------------------------------------------------------

/// In `DeviceCachingAllocator::malloc`, a request that no cached block fits
/// runs `garbage_collect_cached_blocks` (with a memory fraction below 1 and
/// `garbage_collection_threshold` set) whatever pool it was routed to, and
/// the collection reads the default large pool (`large_blocks`) only. So a
/// miss in a private pool (`use_mem_pool`) collects the default pool's aged
/// blocks.
///
/// 1 GiB at 0.5: 512 MiB allowed, threshold 0.5: collection starts above
/// 256 MiB reserved. Three 100 MiB requests miss (the default large pool's
/// `get_free_blocks_call_count` goes 1, 2, 3) and make three 100 MiB
/// segments; freed, each is inserted with `gc_count_base` 3: age 0. A 30 MiB
/// request routed to a pool misses in the pool (the pool's own counter
/// moves; the default blocks' ages stay 0) and collects: 300 MiB reserved is
/// above 256 MiB (target 44 MiB), the mean age is 0, and every unsplit block
/// of age ≥ 0 goes in the first pass (the pass does not stop at the target):
/// the three segments (`num_device_free` 3, three `segment_free` entries, by
/// (size, address) as `large_blocks` orders them). The pool's 30 MiB segment
/// is then made: 30 MiB reserved.
#[test]
fn a_private_pools_miss_collects_the_default_pools_aged_blocks() {
    let (_, a) = sim_device(
        "expandable_segments:False,garbage_collection_threshold:0.5",
        GIB,
    );
    a.set_memory_fraction(0.5).unwrap();
    let xs: Vec<_> = (0..3).map(|_| a.allocate(100 * MIB, S0).unwrap()).collect();
    let mut addrs: Vec<u64> = xs.iter().map(|x| x.ptr()).collect();
    addrs.sort_unstable();
    drop(xs);
    assert_eq!(a.memory_reserved(), 300 * MIB);
    a.record_history(Some(100));
    let pool = a.mem_pool(MemPoolOptions::default());
    let y = {
        let _g = pool.activate().unwrap();
        a.allocate(30 * MIB, S0).unwrap()
    };
    assert_eq!(a.memory_reserved(), 30 * MIB);
    assert_eq!(stat(&a, "num_device_free"), 3);
    assert_eq!(stat(&a, "num_alloc_retries"), 0);
    let freed: Vec<u64> = a
        .history()
        .iter()
        .filter(|e| e.action == Action::SegmentFree)
        .map(|e| e.addr)
        .collect();
    assert_eq!(freed, addrs);
    let id = pool.id();
    assert_eq!(
        stat(
            &a,
            &format!(
                "reserved_bytes_by_private_pools.{}_{}.all.current",
                id.0, id.1
            )
        ),
        30 * MIB as i64
    );
    drop(y);
}
