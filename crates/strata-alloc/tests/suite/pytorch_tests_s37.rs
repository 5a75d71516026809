//! PyTorch's allocator tests, session 37: behaviours of PyTorch's caching
//! allocator that the earlier files (`pytorch_parity*.rs`,
//! `pytorch_tests_s32.rs`, `_s33.rs`, `_s36.rs`, `pytorch_pinned_parity.rs`,
//! `settings.rs`, `mempool.rs`, `history*.rs`, `hostile_*.rs`) did not check
//! one by one: a memory fraction lowered below what is already reserved, a
//! private pool of one device's allocator met by another's requests, streams
//! the allocator has never seen, `empty_cache` while blocks wait on events of
//! such streams, double frees through a copied handle, the largest free
//! block with expandable segments, and the pinned allocator's `empty_cache`
//! while a block waits on an event.
//!
//! Defects these tests found (fixed with them):
//!
//! * on a device reporting more than 8 EiB (a user's driver, or the
//!   simulator at `u64::MAX`), ordinary segments could take the reserved
//!   bytes past `i64::MAX`: `reserved_bytes` and `allocated_bytes` (PyTorch's
//!   signed 64-bit statistics) read back negative, -2^63 after eight
//!   requests of just under 1 EiB. A request that would pass `i64::MAX`
//!   reserved bytes is now out of memory, with a hint naming the limit.
//! * the simulator's address bump (`SimDriver::malloc` and `reserve`) added
//!   unchecked: a reservation near 2^64 bytes (expandable segments at
//!   2^50-byte pages on a device of capacity `u64::MAX`), or segments of
//!   2^60 bytes made and released 16 times, wrapped past 2^64; the allocator
//!   took the wrapped range and panicked (an index out of bounds in the
//!   expandable segments' `grow`). The simulator now reports such a range as
//!   out of memory, and the allocator refuses a range that wraps from any
//!   driver (`malloc` or `reserve`) with the driver's error, giving it back.
//! * the accumulated figures (`allocated`, `freed` of every statistic) added
//!   unchecked: past 2^63 bytes in all (segments of 2^60 bytes made and
//!   released sixteen times; on a real device, a long enough run) they
//!   overflowed (a panic in the test profile, negative figures in a release
//!   build). They now saturate at `i64::MAX`.
//!
//! Each test names the PyTorch test or source function it follows
//! (`test/test_cuda.py`, `c10/cuda/CUDACachingAllocator.cpp`,
//! `aten/src/ATen/core/CachingHostAllocator.h`). Expected figures are worked
//! out in the comments from PyTorch's rules, never from strata's output.

use crate::common;

use common::{sim_device as sim, stat};
use std::sync::Arc;
use strata_alloc::pinned::{PinnedAllocator, SimPinnedBackend};
use strata_alloc::{AllocError, CachingAllocator, MemPoolOptions, StreamId};

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
const S0: StreamId = StreamId::DEFAULT;

/// PyTorch's default segments, and strata's default expandable segments.
const MODES: [&str; 2] = ["expandable_segments:False", "expandable_segments:True"];

/// The pool id of the segment holding `ptr`, from the snapshot.
fn pool_of(a: &CachingAllocator, ptr: u64) -> Option<(u64, u64)> {
    a.snapshot()
        .into_iter()
        .find(|s| s.blocks.iter().any(|b| b.address == ptr))
        .map(|s| s.pool_id)
}

// ----- a memory fraction below the reserved bytes ------------------------------

/// `torch.cuda.set_per_process_memory_fraction` only sets `allowed_memory_maximum`;
/// it releases nothing, and the limit is checked in `alloc_block` alone
/// (`total_allocated_memory + size > allowed_memory_maximum`), never when a
/// cached block is found. So with ordinary segments on a 1 GiB device:
///
/// * 100 MiB allocated and freed: one cached 100 MiB segment;
/// * the fraction set to 1/16 (64 MiB allowed), below the 100 MiB reserved;
/// * a 90 MiB request is a cache hit (`get_free_block` finds the 100 MiB
///   block, `should_split`: 10 MiB left > 1 MiB): no device call, no error,
///   90 MiB allocated with 100 MiB reserved, above the limit;
/// * freed, a 110 MiB request misses; `alloc_block` refuses it without
///   calling the device (100 + 110 > 64), `release_cached_blocks` frees the
///   100 MiB segment (`num_sync_all_streams` +1), the retry refuses again
///   (0 + 110 > 64, `num_alloc_retries` +1): out of memory, `num_ooms` +1,
///   and the release stands (0 reserved);
/// * a 60 MiB request then fits the limit and gets a 60 MiB segment.
///
/// (`test_set_per_process_memory_fraction` sets the fraction on an empty
/// cache only.)
#[test]
fn set_per_process_memory_fraction_below_the_reserved_bytes_releases_nothing() {
    let (d, a) = sim("expandable_segments:False", GIB);
    drop(a.allocate(100 * MIB, S0).unwrap());
    assert_eq!(a.memory_reserved(), 100 * MIB);
    a.set_memory_fraction(1.0 / 16.0).unwrap();
    assert_eq!(
        a.memory_reserved(),
        100 * MIB,
        "setting a fraction frees nothing"
    );
    let mallocs = d.call_count("malloc");

    let x = a.allocate(90 * MIB, S0).unwrap();
    assert_eq!(d.call_count("malloc"), mallocs, "a cache hit");
    assert_eq!(
        (a.memory_allocated(), a.memory_reserved()),
        (90 * MIB, 100 * MIB)
    );
    drop(x);

    let (syncs, retries, ooms) = (
        stat(&a, "num_sync_all_streams"),
        stat(&a, "num_alloc_retries"),
        stat(&a, "num_ooms"),
    );
    let e = a.allocate(110 * MIB, S0).unwrap_err();
    assert!(e.is_out_of_memory(), "{e}");
    assert_eq!(d.call_count("malloc"), mallocs, "refused before the device");
    assert_eq!(
        a.memory_reserved(),
        0,
        "the release before the retry stands"
    );
    assert_eq!(stat(&a, "num_sync_all_streams"), syncs + 1);
    assert_eq!(stat(&a, "num_alloc_retries"), retries + 1);
    assert_eq!(stat(&a, "num_ooms"), ooms + 1);

    let y = a.allocate(60 * MIB, S0).unwrap();
    assert_eq!(a.memory_reserved(), 60 * MIB);
    drop(y);
    a.check_consistency().unwrap();
}

// ----- private pools and other allocators ----------------------------------------

/// `torch.cuda.use_mem_pool(pool, device)` calls
/// `_cuda_beginAllocateCurrentThreadToPool(device_index, pool.id)`: only the
/// allocator of the pool's device routes the thread's requests to it
/// (`DeviceCachingAllocator::beginAllocateToPool` of that device). A request
/// to another device's allocator on the same thread is served from that
/// allocator's default pools, and the pool's snapshot does not see it
/// (`test_mempool_multithread`/`test_mempool_context` use one device).
#[test]
fn a_pool_routes_only_its_own_allocators_requests() {
    for conf in MODES {
        let (_, a) = sim(conf, GIB);
        let (_, b) = sim(conf, GIB);
        let pool = a.mem_pool(MemPoolOptions::default());
        let (on_a, on_b) = {
            let _route = pool.activate().unwrap();
            (
                a.allocate(3 * MIB, S0).unwrap(),
                b.allocate(3 * MIB, S0).unwrap(),
            )
        };
        assert_eq!(pool_of(&a, on_a.ptr()), Some(pool.id()), "{conf}");
        assert_eq!(pool_of(&b, on_b.ptr()), Some((0, 0)), "{conf}");
        assert_eq!(b.active_mem_pool(), None, "{conf}");
        // Nothing of b's is in a private pool (the two simulated devices
        // share a layout, so the addresses alone cannot tell).
        assert!(b.snapshot().iter().all(|s| s.pool_id == (0, 0)), "{conf}");
        assert_eq!(
            pool.snapshot()
                .iter()
                .map(|s| s.allocated_size)
                .sum::<u64>(),
            on_a.size().next_multiple_of(512),
            "{conf}: the pool holds a's block alone"
        );
        // Freed through b, the block goes back to b's default pool, not the
        // pool: a later request routed to the pool on a finds nothing of b's.
        drop(on_b);
        assert_eq!(b.memory_allocated(), 0);
        assert_eq!(
            b.memory_reserved(),
            stat(&b, "reserved_bytes.all.current") as u64
        );
        a.check_consistency().unwrap();
        b.check_consistency().unwrap();
    }
}

/// A block of one allocator freed or recorded through another is refused
/// with `InvalidFree` by both (PyTorch's `free` of a pointer not in the
/// device's `allocated_blocks` raises "invalid device pointer"), even when
/// the two allocators hand out the same address for the same request (two
/// simulated devices of the same size do) — and the refused call moves
/// nothing on either.
#[test]
fn a_handle_of_another_allocator_with_the_same_address_changes_nothing() {
    for conf in MODES {
        let (_, a) = sim(conf, GIB);
        let (_, b) = sim(conf, GIB);
        let x = a.allocate_raw(5 * MIB, S0).unwrap();
        let y = b.allocate_raw(5 * MIB, S0).unwrap();
        assert_eq!(x.ptr(), y.ptr(), "{conf}: same simulated layout");
        let before = (common::state(&a), common::state(&b));
        let err = b.record_stream(&x, StreamId(3)).unwrap_err();
        assert!(
            matches!(err, AllocError::InvalidFree { .. }),
            "{conf}: {err}"
        );
        let err = b.free_raw(x).unwrap_err();
        assert!(
            matches!(err, AllocError::InvalidFree { .. }),
            "{conf}: {err}"
        );
        assert!(err.to_string().contains("another allocator"), "{err}");
        assert!(before == (common::state(&a), common::state(&b)), "{conf}");
        a.free_raw(x).unwrap();
        b.free_raw(y).unwrap();
        assert_eq!((a.memory_allocated(), b.memory_allocated()), (0, 0));
    }
}

// ----- double frees through a copied handle --------------------------------------

/// PyTorch's `free` looks the pointer up in `allocated_blocks` and raises
/// "invalid device pointer" when it is not there: a second free of the same
/// pointer, and a free of a stale pointer after the block went to someone
/// else, are refused without touching the block. Here: an owned allocation
/// freed through a copy of its handle, then dropped (the second free is
/// refused and ignored by the drop), while a new allocation holds the same
/// block: the new allocation stays live and the figures count it once.
#[test]
fn a_free_through_a_copied_handle_then_the_drop_frees_once() {
    for conf in MODES {
        let (_, a) = sim(conf, GIB);
        let x = a.allocate(4 * MIB, S0).unwrap();
        let (p, n, copy) = (x.ptr(), x.size(), x.raw());
        a.free_raw(copy).unwrap();
        assert_eq!(a.memory_allocated(), 0, "{conf}");
        // The same block is the best fit again: same address.
        let y = a.allocate(4 * MIB, S0).unwrap();
        assert_eq!((y.ptr(), y.size()), (p, n), "{conf}");
        let before = common::state(&a);
        drop(x); // the stale handle: refused, nothing moves
        assert!(before == common::state(&a), "{conf}");
        assert_eq!(a.memory_allocated(), n, "{conf}");
        assert_eq!(stat(&a, "allocation.all.current"), 1, "{conf}");
        let err = a.free_raw(copy).unwrap_err();
        assert!(
            matches!(err, AllocError::InvalidFree { .. }),
            "{conf}: {err}"
        );
        assert!(before == common::state(&a), "{conf}");
        drop(y);
        assert_eq!(a.memory_allocated(), 0, "{conf}");
        assert_eq!(stat(&a, "allocation.all.freed"), 2, "{conf}");
        a.check_consistency().unwrap();
    }
}

// ----- streams never seen, and empty_cache while blocks wait --------------------

/// `get_free_block` searches the pool's set keyed by `(stream, size, addr)`
/// from `(stream, size)` and gives up at the first block of another stream:
/// a block freed on a stream is reused only by that stream, whatever the
/// stream's id (PyTorch's stream keys are opaque handles; a stream the
/// allocator has never seen is just another key). And `empty_cache`
/// (`release_cached_blocks`) first calls `synchronize_and_free_events`:
/// every block waiting on `record_stream` events — here events on a stream
/// the allocator meets for the first time in `record_stream` — is freed
/// (`num_sync_all_streams` +1), and the whole free segments are released.
///
/// With ordinary segments each 4 MiB request gets a 20 MiB segment
/// (`get_allocation_size`: below 10 MiB, `kLargeBuffer`): x's on stream
/// `u64::MAX - 1`, y's on the default stream; z (4 MiB on the default
/// stream, after x is freed) is split from y's segment (16 MiB left there),
/// not x's free block: 40 MiB reserved. z recorded on stream 12345 and
/// freed waits (`active_pending_free`); `empty_cache` frees it and releases
/// x's segment (whole and free), while y's stays: 20 MiB reserved. With
/// expandable segments only the reuse rule and the end state are checked
/// (strata's page recycling differs on purpose).
#[test]
fn empty_cache_frees_blocks_waiting_on_streams_never_seen_before() {
    let odd = StreamId(u64::MAX - 1);
    let late = StreamId(12345);
    for conf in MODES {
        let (d, a) = sim(conf, GIB);
        let ordinary = conf.ends_with("False");
        let x = a.allocate(4 * MIB, odd).unwrap();
        let xp = x.ptr();
        let y = a.allocate(4 * MIB, S0).unwrap();
        drop(x);
        let z = a.allocate(4 * MIB, S0).unwrap();
        assert_ne!(
            z.ptr(),
            xp,
            "{conf}: another stream's free block is not reused"
        );
        if ordinary {
            assert_eq!(a.memory_reserved(), 40 * MIB);
            assert_eq!(stat(&a, "segment.all.current"), 2);
        }
        z.record_stream(late).unwrap();
        let zp = z.ptr();
        drop(z);
        let state = |a: &CachingAllocator| {
            a.snapshot()
                .iter()
                .flat_map(|s| s.blocks.clone())
                .find(|b| b.address == zp)
                .map(|b| b.state)
        };
        assert_eq!(
            state(&a).map(|s| format!("{s:?}")),
            Some("ActivePendingFree".to_string()),
            "{conf}"
        );
        assert_eq!(
            stat(&a, "active_bytes.all.current"),
            8 * MIB as i64,
            "{conf}"
        );
        let syncs = stat(&a, "num_sync_all_streams");
        a.empty_cache().unwrap();
        assert_eq!(stat(&a, "num_sync_all_streams"), syncs + 1, "{conf}");
        assert_eq!(
            stat(&a, "active_bytes.all.current"),
            4 * MIB as i64,
            "{conf}"
        );
        assert!(
            state(&a).is_none_or(|s| format!("{s:?}") == "Inactive"),
            "{conf}"
        );
        if ordinary {
            assert_eq!(a.memory_reserved(), 20 * MIB);
            assert_eq!(stat(&a, "segment.all.current"), 1);
        }
        drop(y);
        a.empty_cache().unwrap();
        assert_eq!((a.memory_reserved(), d.used_bytes()), (0, 0), "{conf}");
        a.check_consistency().unwrap();
    }
}

// ----- the largest free block ------------------------------------------------------

/// PyTorch's `cacheInfo` (the largest cached block, which cuDNN's workspace
/// sizing asks for) walks the pools' free-block sets (`cache_info_aux` over
/// `large_blocks`, `small_blocks`); the unmapped address space of an
/// expandable segment lives in a pool's separate `unmapped` set and is not a
/// cached block. So the largest free block is at most the free *mapped*
/// bytes: with ordinary segments a freed 30 MiB request leaves one 30 MiB
/// block (`get_allocation_size`: 10 MiB or more, rounded up to 2 MiB); with
/// expandable segments, whatever was mapped for it and is now free — never
/// the segment's reserved address range (1.125 × the device here).
#[test]
fn the_largest_free_block_is_a_mapped_cached_block() {
    for conf in MODES {
        let (_, a) = sim(conf, GIB);
        assert_eq!(a.largest_free_block(), 0, "{conf}: nothing cached");
        let x = a.allocate(30 * MIB, S0).unwrap();
        assert!(
            a.largest_free_block() <= a.memory_reserved() - 30 * MIB,
            "{conf}"
        );
        drop(x);
        let largest = a.largest_free_block();
        if conf.ends_with("False") {
            assert_eq!(largest, 30 * MIB);
        } else {
            assert!(largest >= 30 * MIB, "{conf}: {largest}");
        }
        assert!(largest <= a.memory_reserved(), "{conf}: {largest}");
        a.empty_cache().unwrap();
        assert_eq!(a.largest_free_block(), 0, "{conf}: released");
    }
}

// ----- the pinned allocator's empty_cache while a block waits ---------------------

/// `CachingHostAllocatorImpl::empty_cache` calls `process_events()` (a query
/// of each event, no synchronisation), then frees every block of the free
/// lists. A block whose copy event has not completed is in no free list: it
/// stays pinned and counted (`allocations`, `allocated_bytes`), and a later
/// `empty_cache` after the event completes frees it (`num_host_free` +1).
/// The event here is recorded on a stream the allocator has never seen.
#[test]
fn pinned_empty_cache_keeps_a_block_whose_event_is_pending() {
    let b = Arc::new(SimPinnedBackend::new(None));
    let a = PinnedAllocator::new(Arc::clone(&b));
    let s = StreamId(u64::MAX - 7);
    let x = a.allocate(4 * MIB).unwrap();
    x.record_stream(s).unwrap();
    drop(x);
    a.empty_cache().unwrap();
    assert_eq!((b.live_blocks(), a.pending_events()), (1, 1));
    let st = a.stats();
    assert_eq!(st.allocations.current, 1);
    assert_eq!(st.allocated_bytes.current, 4 * MIB as i64);
    // Active until its event drains (`process_events` takes it off the
    // active figures when it returns the block to its free list), as
    // `test_host_memory_stats_active_after_event_drain` has it.
    assert_eq!(st.active_requests.current, 1);
    assert_eq!(st.active_bytes.current, 4 * MIB as i64);
    assert_eq!(st.num_host_free, 0);
    b.complete_stream(s);
    a.empty_cache().unwrap();
    assert_eq!(
        (b.live_blocks(), a.pending_events(), b.used_bytes()),
        (0, 0, 0)
    );
    let st = a.stats();
    assert_eq!((st.allocations.current, st.allocated_bytes.current), (0, 0));
    assert_eq!(
        (st.active_requests.current, st.active_bytes.current),
        (0, 0)
    );
    assert_eq!(st.num_host_free, 1);
    a.check_consistency().unwrap();
}

// ----- private pools: churn, and use_on_oom with pending frees --------------------

/// `MemPool()` takes the next id of a process-wide counter (`(0, n)`, never
/// reused), and `~MemPool` calls `releasePool` then `emptyCache(pool.id)`:
/// a pool whose blocks are all freed gives its segments back when it is
/// dropped. Two thousand pools made, used once on a stream the allocator
/// has never seen, and dropped leave nothing reserved and distinct ids; each
/// 1 MiB request (`kSmallSize`: the small pool) got a 2 MiB segment of its
/// own (`kSmallBuffer`; a private pool's segments are ordinary in strata
/// even with expandable segments on, docs/allocator.md), so
/// `segment.all.allocated` counts 2000 and `reserved_bytes.all.allocated`
/// 4000 MiB, all freed. Each drop's `emptyCache(id)` runs
/// `release_cached_blocks(context, id)`, which calls
/// `synchronize_and_free_events(context, pool)` for the (now freeable) pool:
/// `num_sync_all_streams` counts 2000.
#[test]
fn test_mempool_churn_gives_every_segment_back() {
    for conf in MODES {
        let (d, a) = sim(conf, GIB);
        let mut ids = std::collections::BTreeSet::new();
        for i in 0..2000u64 {
            let pool = a.mem_pool(MemPoolOptions::default());
            assert!(ids.insert(pool.id()), "{conf}: id {:?} reused", pool.id());
            let x = {
                let _route = pool.activate().unwrap();
                a.allocate(MIB, StreamId(1_000_000 + i)).unwrap()
            };
            assert_eq!(pool_of(&a, x.ptr()), Some(pool.id()), "{conf}");
            drop(x);
            drop(pool);
            assert_eq!(a.memory_reserved(), 0, "{conf}: pool {i} released on drop");
        }
        assert_eq!(stat(&a, "segment.all.allocated"), 2000, "{conf}");
        assert_eq!(stat(&a, "segment.all.freed"), 2000, "{conf}");
        assert_eq!(stat(&a, "num_sync_all_streams"), 2000, "{conf}");
        assert_eq!(
            stat(&a, "reserved_bytes.all.allocated"),
            4000 * MIB as i64,
            "{conf}"
        );
        assert_eq!(
            stat(&a, "reserved_bytes.small_pool.allocated"),
            4000 * MIB as i64
        );
        assert!(a.snapshot().is_empty(), "{conf}");
        assert_eq!(d.used_bytes(), 0, "{conf}");
        // The default pools still work as on a fresh allocator.
        let y = a.allocate(MIB, S0).unwrap();
        assert_eq!(pool_of(&a, y.ptr()), Some((0, 0)), "{conf}");
        drop(y);
        a.check_consistency().unwrap();
    }
}

/// `DeviceCachingAllocator::malloc` tries, in order: `get_free_block`,
/// `alloc_block`, `try_mempool_fallback` (`get_free_block` in each
/// `use_on_oom` pool: its *free* blocks only), `release_available_cached_blocks`,
/// then `release_cached_blocks` (which synchronises every outstanding event)
/// and one last `alloc_block` — the fallback is not tried again after the
/// flush. So a `use_on_oom` pool's block that waits on a `record_stream`
/// event when a default-pool request runs out of memory is not lent: the
/// flush frees it into the pool, the request still fails. The next request
/// finds it free and borrows it.
///
/// On a 100 MiB device: the pool's 60 MiB request gets a 60 MiB segment
/// (10 MiB or more: rounded to 2 MiB), recorded on stream 9 and freed
/// (pending); a 50 MiB default-pool request cannot get a device allocation
/// (40 MiB left): out of memory, with the pool's block now free (inactive)
/// and its segment kept (the pool is in use). Asked again, the 50 MiB
/// request is served from the pool's block (split: 10 MiB left, more than
/// `kSmallSize`), with no new device memory.
#[test]
fn a_use_on_oom_pools_pending_block_is_lent_only_after_the_flush() {
    let opts = MemPoolOptions {
        use_on_oom: true,
        no_split: false,
    };
    for conf in MODES {
        let (d, a) = sim(conf, 100 * MIB);
        let pool = a.mem_pool(opts);
        let x = {
            let _route = pool.activate().unwrap();
            a.allocate(60 * MIB, S0).unwrap()
        };
        let xp = x.ptr();
        x.record_stream(StreamId(9)).unwrap();
        drop(x);
        let used = d.used_bytes();
        let ooms = stat(&a, "num_ooms");
        let e = a.allocate(50 * MIB, S0).unwrap_err();
        assert!(e.is_out_of_memory(), "{conf}: {e}");
        assert_eq!(stat(&a, "num_ooms"), ooms + 1, "{conf}");
        let seg = pool.snapshot();
        assert_eq!(seg.len(), 1, "{conf}: the pool keeps its segment");
        assert_eq!(
            format!("{:?}", seg[0].blocks[0].state),
            "Inactive",
            "{conf}: the flush freed it"
        );
        let y = a.allocate(50 * MIB, S0).unwrap();
        assert_eq!(y.ptr(), xp, "{conf}: lent from the pool");
        assert_eq!(pool_of(&a, y.ptr()), Some(pool.id()), "{conf}");
        assert_eq!(d.used_bytes(), used, "{conf}: no new device memory");
        drop(y);
        drop(pool);
        a.empty_cache().unwrap();
        assert_eq!((a.memory_reserved(), d.used_bytes()), (0, 0), "{conf}");
        a.check_consistency().unwrap();
    }
}

// ----- near the device's capacity: the segment, not the request, must fit -------

/// PyTorch's `alloc_block` asks the device for `get_allocation_size(size)`,
/// not for the request: a request above `kSmallSize` (1 MiB) and below
/// `kMinLargeAlloc` (10 MiB) needs a whole `kLargeBuffer` (20 MiB), one of
/// 1 MiB or less a `kSmallBuffer` (2 MiB), and one of 10 MiB or more its size
/// rounded up to `kRoundLarge` (2 MiB). So with ordinary segments on a 30 MiB
/// device holding a 15 MiB tensor (a 16 MiB segment; the 1 MiB left is not
/// more than `kSmallSize`, so the block is handed out whole), 14 MiB is free
/// and yet a 3 MiB request runs out of memory (`test_out_of_memory`'s point:
/// the error comes from the device allocation), after the flush
/// (`num_alloc_retries` +1), with nothing changed but the counters; a 1 MiB
/// request then gets a 2 MiB segment and a 10 MiB one a 10 MiB segment
/// (30 - 16 - 2 = 12 MiB left); once that one is freed (cached), an 11 MiB
/// request (a 12 MiB segment) fits only after the flush.
#[test]
fn a_mid_sized_request_needs_room_for_a_whole_large_buffer() {
    let (d, a) = sim("expandable_segments:False", 30 * MIB);
    let x = a.allocate(15 * MIB, S0).unwrap();
    assert_eq!((x.size(), a.memory_allocated()), (15 * MIB, 16 * MIB));
    assert_eq!(a.memory_reserved(), 16 * MIB);
    let before = common::stats_but_ooms(&a);
    let retries = stat(&a, "num_alloc_retries");
    let e = a.allocate(3 * MIB, S0).unwrap_err();
    let oom = e.out_of_memory().expect("an out-of-memory error");
    assert_eq!(oom.requested, 3 * MIB, "{e}");
    // PyTorch's message says "Tried to allocate 20.00 MiB" here (it prints
    // `alloc_size`, the segment); strata names the caller's size there and
    // the segment after it, on purpose (error.rs).
    assert_eq!(oom.device_request, 20 * MIB, "{e}");
    assert!(
        e.to_string().contains("asked the device for 20.00 MiB"),
        "{e}"
    );
    assert_eq!(
        (oom.capacity, oom.free, oom.allowed),
        (30 * MIB, 14 * MIB, None)
    );
    assert_eq!(stat(&a, "num_alloc_retries"), retries + 1);
    assert!(
        before == common::stats_but_ooms(&a),
        "only the counters moved"
    );
    assert_eq!(d.used_bytes(), 16 * MIB);

    let small = a.allocate(MIB, S0).unwrap();
    assert_eq!(a.memory_reserved(), 18 * MIB, "a 2 MiB small segment");
    let ten = a.allocate(10 * MIB, S0).unwrap();
    assert_eq!(a.memory_reserved(), 28 * MIB, "a 10 MiB segment");
    drop(ten);
    // The cached 10 MiB block cannot serve 11 MiB, and its 12 MiB segment
    // does not fit next to 28 MiB; the flush frees the cached 10 MiB
    // segment, and the retry (counted in `num_alloc_retries` whether it
    // succeeds or not: `alloc_block(isRetry=true)`) fits exactly, 18 + 12.
    let eleven = a.allocate(11 * MIB, S0).unwrap();
    assert_eq!(a.memory_reserved(), 30 * MIB);
    assert_eq!(stat(&a, "num_alloc_retries"), retries + 2);
    assert_eq!(stat(&a, "segment.all.current"), 3);
    drop((x, small, eleven));
    a.empty_cache().unwrap();
    assert_eq!(d.used_bytes(), 0);
    a.check_consistency().unwrap();
}

// ----- the memory fraction counts private pools ---------------------------------

/// PyTorch's limit is checked against `total_allocated_memory`, which every
/// `cudaMalloc` of the device allocator adds to, a private pool's included
/// (`alloc_block` is the same for all pools). So on a 100 MiB device with a
/// fraction of one half (50 MiB allowed), a pool holding a 40 MiB segment
/// (10 MiB or more: rounded up to 2 MiB) leaves no room for a 20 MiB
/// default-pool request (40 + 20 > 50): out of memory although the device
/// has 60 MiB free. Once the pool's block is freed the segment
/// stays the pool's while the pool is in use (`release_cached_blocks` skips
/// pools with a use count), so the request still fails; dropping the pool
/// (`~MemPool`: `releasePool`, `emptyCache(id)`) gives the segment back and
/// the request succeeds.
#[test]
fn the_memory_fraction_counts_a_private_pools_segments() {
    for conf in MODES {
        let (d, a) = sim(conf, 100 * MIB);
        a.set_memory_fraction(0.5).unwrap();
        let pool = a.mem_pool(MemPoolOptions::default());
        let x = {
            let _route = pool.activate().unwrap();
            a.allocate(40 * MIB, S0).unwrap()
        };
        assert_eq!(a.memory_reserved(), 40 * MIB, "{conf}");
        let e = a.allocate(20 * MIB, S0).unwrap_err();
        assert!(e.is_out_of_memory(), "{conf}: {e}");
        assert_eq!(
            d.used_bytes(),
            40 * MIB,
            "{conf}: refused before the device"
        );
        drop(x);
        let e = a.allocate(20 * MIB, S0).unwrap_err();
        assert!(
            e.is_out_of_memory(),
            "{conf}: the pool keeps its segment: {e}"
        );
        assert_eq!(a.memory_reserved(), 40 * MIB, "{conf}");
        drop(pool);
        assert_eq!(a.memory_reserved(), 0, "{conf}");
        let y = a.allocate(20 * MIB, S0).unwrap();
        assert!(a.memory_reserved() <= 50 * MIB, "{conf}");
        drop(y);
        a.check_consistency().unwrap();
    }
}

// ----- resetting peaks while a free is pending -----------------------------------

/// `reset_peak_memory_stats` sets every peak to its current value. A block
/// freed after `record_stream` stops counting in `allocated_bytes` at the
/// free request but stays in `active_bytes` (and `requested_bytes`) until
/// its event completes (`free_block`). So: 4 MiB allocated, recorded on
/// stream 3, freed, then the peaks reset: `allocated_bytes` peak 0,
/// `active_bytes` peak 4 MiB, `requested_bytes` peak 4 MiB. Stream 3's work
/// done, the next `malloc` (512 bytes) first runs `process_events` (the
/// block is freed: active 0), then allocates: `active_bytes` current 512 with
/// its peak still 4 MiB, `allocated_bytes` peak 512.
#[test]
fn reset_peak_memory_stats_keeps_a_pending_free_in_the_active_peak() {
    for conf in MODES {
        let (d, a) = sim(conf, GIB);
        let x = a.allocate(4 * MIB, S0).unwrap();
        x.record_stream(StreamId(3)).unwrap();
        drop(x);
        a.reset_peak_memory_stats();
        let peak = |k: &str| stat(&a, &format!("{k}.all.peak"));
        let cur = |k: &str| stat(&a, &format!("{k}.all.current"));
        let m = 4 * MIB as i64;
        assert_eq!(
            (
                peak("allocated_bytes"),
                peak("active_bytes"),
                peak("requested_bytes")
            ),
            (0, m, m),
            "{conf}"
        );
        d.complete_stream(StreamId(3));
        let y = a.allocate(512, S0).unwrap();
        assert_eq!(
            (cur("active_bytes"), peak("active_bytes")),
            (512, m),
            "{conf}"
        );
        assert_eq!(
            (cur("requested_bytes"), peak("requested_bytes")),
            (512, m),
            "{conf}"
        );
        assert_eq!(peak("allocated_bytes"), 512, "{conf}");
        drop(y);
        a.check_consistency().unwrap();
    }
}

// ----- snapshot order ----------------------------------------------------------------

/// `DeviceCachingAllocator::snapshot` sorts the segments by address
/// (`std::sort(..., a.address < b.address)`) whichever pool or stream they
/// belong to, and `torch.cuda.memory._snapshot()` pickles them in that
/// order; a pool's snapshot (`MemPool.snapshot()`, `snapshot(mempool_id)`)
/// is the same list filtered to the pool's segments. The simulated device
/// here hands out each new ordinary segment *below* the one before
/// (`with_malloc_addresses`), so creation order is the reverse of address
/// order: segments of the small and large pools, of three streams (one never
/// seen before, `u64::MAX`) and of two private pools come back sorted all the
/// same, in the pickle too.
#[test]
fn memory_snapshot_segments_are_sorted_by_address() {
    // (size, stream, private pool 0/1/2) in creation order.
    let calls = [
        (30 * MIB, S0, 0),
        (1000, StreamId(u64::MAX), 1),
        (12 * MIB, StreamId(5), 0),
        (3 * MIB, StreamId(u64::MAX), 2),
        (700 * 1024, S0, 0),
        (100, StreamId(5), 2),
    ];
    // The segment of each call (`get_allocation_size`), pools' own: small
    // requests get 2 MiB, 3 MiB gets 20 MiB, 10 MiB or more its size in
    // 2 MiB steps.
    let segment = |size: u64| match size {
        s if s <= MIB => 2 * MIB,
        s if s < 10 * MIB => 20 * MIB,
        s => s.next_multiple_of(2 * MIB),
    };
    let top = 0x7000_0000_0000u64;
    for conf in MODES {
        let expandable = conf.ends_with("True");
        // The device allocations in order: with expandable segments only the
        // private pools' requests are whole allocations.
        let plan: Vec<(u64, u64)> = calls
            .iter()
            .filter(|c| !expandable || c.2 != 0)
            .enumerate()
            .map(|(k, c)| (top - k as u64 * GIB, segment(c.0)))
            .collect();
        let d = Arc::new(
            strata_alloc::driver::sim::SimDriver::new(GIB, 2 * MIB).with_malloc_addresses(plan),
        );
        let a = CachingAllocator::new(d, strata_alloc::AllocatorConfig::parse(conf).unwrap());
        let pools = [
            a.mem_pool(MemPoolOptions::default()),
            a.mem_pool(MemPoolOptions::default()),
        ];
        let mut keep = Vec::new();
        for (size, stream, pool) in calls {
            let _route = (pool > 0).then(|| pools[pool - 1].activate().unwrap());
            keep.push(a.allocate(size, stream).unwrap());
        }
        let made: Vec<u64> = keep.iter().map(|x| x.ptr()).collect();
        let pooled = made[1] > made[3];
        assert!(
            pooled,
            "{conf}: the second pool's segment lies below the first's"
        );
        let segs = a.snapshot();
        let addrs: Vec<u64> = segs.iter().map(|s| s.address).collect();
        assert!(addrs.is_sorted(), "{conf}: {addrs:x?}");
        for (p, n) in pools.iter().zip([1, 2]) {
            let own: Vec<u64> = p.snapshot().iter().map(|s| s.address).collect();
            let filtered: Vec<u64> = segs
                .iter()
                .filter(|s| s.pool_id == p.id())
                .map(|s| s.address)
                .collect();
            assert_eq!(own, filtered, "{conf}");
            assert_eq!(own.len(), n, "{conf}: one segment per request");
        }
        let v = common::decode(&a.snapshot_pickle().unwrap());
        let pickled: Vec<u64> = common::list(common::key(&v, "segments"))
            .iter()
            .map(|s| common::int(common::key(s, "address")))
            .collect();
        assert_eq!(pickled, addrs, "{conf}");
        drop(keep);
        a.check_consistency().unwrap();
    }
}

// ----- reserved bytes past what the statistics can count ----------------------

/// PyTorch's statistics are `int64_t` (`Stat::current`), and strata's
/// `memory_stats()` reads them as `i64`: a device that reports more than 8
/// EiB (a user's driver, or the simulator at `u64::MAX`) could let the
/// reserved bytes pass `i64::MAX`, where every figure read back negative
/// (eight requests of just under 1 EiB, each a segment of exactly 2^60
/// bytes, made `reserved_bytes` and `allocated_bytes` read -2^63, and 14
/// made them -2^60). Such a request is now out of memory, with a hint that
/// names the limit, and every figure stays right: seven requests are
/// served (7 × 2^60 reserved), the eighth would reach 2^63 and fails
/// without calling the device, and once everything is freed the device has
/// it all back. With expandable segments, the range to reserve (1.125 x
/// the device, saturated near 2^64) is out of memory: at 2 MiB pages its
/// page table cannot be allocated (`hostile_sweep_s27.rs`); at 2^50-byte
/// pages the simulator's reservation wrapped past 2^64 and the allocator
/// took a segment whose blocks ended below their start (an index out of
/// bounds in `grow`, a panic): the simulator now refuses a range that does
/// not fit below 2^64, and the allocator refuses such a range from any
/// driver (`a_driver_range_that_wraps_the_address_space_is_refused`).
#[test]
fn reserved_bytes_never_pass_what_the_statistics_can_count() {
    let request = (1u64 << 60) - 1;
    for (conf, page) in [
        (MODES[0], 2 * MIB),
        (MODES[1], 2 * MIB),
        (MODES[1], 1 << 50),
    ] {
        let d = Arc::new(strata_alloc::driver::sim::SimDriver::new(u64::MAX, page));
        let a = CachingAllocator::new(
            d.clone(),
            strata_alloc::AllocatorConfig::parse(conf).unwrap(),
        );
        let mut live = Vec::new();
        for i in 0..10 {
            match a.allocate_raw(request, S0) {
                Ok(r) => live.push(r),
                Err(e) => {
                    assert!(e.is_out_of_memory(), "{conf} {i}: {e}");
                    if live.len() == 7 {
                        assert!(e.to_string().contains("2^63 - 1 reserved bytes"), "{e}");
                    }
                }
            }
            let reserved = stat(&a, "reserved_bytes.all.current");
            assert!(reserved >= 0, "{conf} {i}: {reserved}");
            assert_eq!(reserved as u64, live.len() as u64 * (1 << 60), "{conf} {i}");
            assert_eq!(d.used_bytes(), reserved as u64, "{conf} {i}");
            assert!(stat(&a, "allocated_bytes.all.current") >= 0, "{conf} {i}");
            assert!(stat(&a, "reserved_bytes.all.peak") >= 0, "{conf} {i}");
        }
        // With expandable segments the range to reserve (1.125 x the device,
        // saturated) does not fit in the address space: out of memory.
        assert!(
            live.len() == 7 || (conf.ends_with("True") && live.is_empty()),
            "{conf}"
        );
        a.check_consistency().unwrap();
        for r in live {
            a.free_raw(r).unwrap();
        }
        a.empty_cache().unwrap();
        assert_eq!((a.memory_reserved(), d.used_bytes()), (0, 0), "{conf}");
    }
}

/// The simulator never reuses an address: a device of capacity near 2^64
/// on which segments of 2^60 bytes are made and released again and again
/// runs out of addresses after 15 of them. Each request then is out of
/// memory (the simulator's `malloc` refuses a range past 2^64 and gives the
/// bytes it counted back), never a segment that wraps, and the books stay
/// right.
#[test]
fn segments_made_and_released_past_the_address_space_are_out_of_memory() {
    let d = Arc::new(strata_alloc::driver::sim::SimDriver::new(u64::MAX, 0));
    let a = CachingAllocator::new(d.clone(), strata_alloc::AllocatorConfig::default());
    let (mut served, mut refused) = (0, 0);
    for i in 0..40 {
        match a.allocate_raw((1u64 << 60) - 1, S0) {
            Ok(r) => {
                assert!(r.ptr().checked_add(r.size()).is_some(), "{i}");
                served += 1;
                a.free_raw(r).unwrap();
            }
            Err(e) => {
                assert!(e.is_out_of_memory(), "{i}: {e}");
                refused += 1;
            }
        }
        a.empty_cache().unwrap();
        assert_eq!((a.memory_reserved(), d.used_bytes()), (0, 0), "{i}");
        a.check_consistency().unwrap();
    }
    assert!(
        served >= 14 && refused >= 20,
        "{served} served, {refused} refused"
    );
    // Small requests still find addresses below the end.
    let _ = a.allocate_raw(4096, S0).map(|r| a.free_raw(r).unwrap());
    a.check_consistency().unwrap();
}

/// A driver (a user's `Driver`) whose `malloc` hands out a range that wraps
/// past 2^64: the allocator gives it back and returns the driver's error,
/// naming the call and the range, and changes nothing else.
#[test]
fn a_driver_range_that_wraps_the_address_space_is_refused() {
    use strata_alloc::driver::EventHandle;
    use strata_alloc::{Device, DevicePtr, Driver, DriverError, MemInfo, StreamEvents};
    struct Wrapping(strata_alloc::driver::sim::SimDriver);
    impl StreamEvents for Wrapping {
        fn create_event(&self) -> Result<EventHandle, DriverError> {
            self.0.create_event()
        }
        fn destroy_event(&self, event: EventHandle) -> Result<(), DriverError> {
            self.0.destroy_event(event)
        }
        fn record_event(&self, event: EventHandle, stream: StreamId) -> Result<(), DriverError> {
            self.0.record_event(event, stream)
        }
        fn query_event(&self, event: EventHandle) -> Result<bool, DriverError> {
            self.0.query_event(event)
        }
        fn synchronize_event(&self, event: EventHandle) -> Result<(), DriverError> {
            self.0.synchronize_event(event)
        }
        fn synchronize_stream(&self, stream: StreamId) -> Result<(), DriverError> {
            self.0.synchronize_stream(stream)
        }
    }
    impl Driver for Wrapping {
        fn device(&self) -> Device {
            Device::Cuda(0)
        }
        fn name(&self) -> String {
            "wrapping".into()
        }
        fn total_memory(&self) -> u64 {
            self.0.total_memory()
        }
        fn mem_get_info(&self) -> Result<MemInfo, DriverError> {
            self.0.mem_get_info()
        }
        fn malloc(&self, size: u64) -> Result<DevicePtr, DriverError> {
            // The last 4 KiB of the address space, whatever the size.
            let _ = size;
            Ok(u64::MAX - 4095)
        }
        fn free(&self, _ptr: DevicePtr, _size: u64) -> Result<(), DriverError> {
            Ok(())
        }
        fn virtual_memory(&self) -> Option<&dyn strata_alloc::driver::VirtualMemory> {
            None
        }
    }
    let a = CachingAllocator::new(
        Arc::new(Wrapping(strata_alloc::driver::sim::SimDriver::new(GIB, 0))),
        strata_alloc::AllocatorConfig::default(),
    );
    let before = common::state(&a);
    let e = a.allocate_raw(MIB, S0).unwrap_err();
    assert!(matches!(e, AllocError::Driver { .. }), "{e}");
    let text = e.to_string();
    assert!(text.contains("malloc") && text.contains("wraps"), "{text}");
    assert!(before == common::state(&a), "nothing changed");
    assert!(a.snapshot().is_empty());
    a.check_consistency().unwrap();
}

/// Expandable segments with pages of 2^50 bytes on devices of 2^62 bytes
/// and more (a driver's granularity may be any power of two up to half the
/// device): requests of just under 1 EiB on two streams, then a small one,
/// are served or are typed out-of-memory errors — never a panic or a
/// wrapped range (each stream's reservation of 1.125 x the device stops
/// fitting in the 64-bit address space beyond 2^62 bytes: the simulator
/// says out of memory) — and the reserved bytes are always the device's
/// used bytes, a whole number of 2^60-byte requests. On the 2^62-byte
/// device, exactly four requests fit (the first four, on both streams),
/// and the next ones, the small one included, find the device full.
#[test]
fn expandable_segments_with_huge_pages_on_huge_devices_keep_the_books() {
    for cap in [1u64 << 62, (1u64 << 63) + (1 << 62), u64::MAX / 2] {
        let d = Arc::new(strata_alloc::driver::sim::SimDriver::new(cap, 1 << 50));
        let a = CachingAllocator::new(d.clone(), strata_alloc::AllocatorConfig::default());
        assert!(a.expandable_segments(), "{cap:#x}");
        let mut live = Vec::new();
        for i in 0..12u64 {
            match a.allocate_raw((1u64 << 60) - 1, StreamId(i % 2)) {
                Ok(r) => live.push(r),
                Err(e) => assert!(e.is_out_of_memory(), "{cap:#x} {i}: {e}"),
            }
            let reserved = stat(&a, "reserved_bytes.all.current");
            assert_eq!(
                reserved as u64,
                live.len() as u64 * (1 << 60),
                "{cap:#x} {i}"
            );
            assert_eq!(d.used_bytes(), reserved as u64, "{cap:#x} {i}");
            a.check_consistency().unwrap();
        }
        if cap == 1 << 62 {
            assert_eq!(live.len(), 4);
            let e = a.allocate_raw(1000, S0).unwrap_err();
            assert!(e.is_out_of_memory(), "{e}");
        } else {
            assert!(!live.is_empty(), "{cap:#x}");
            let _ = a.allocate_raw(1000, S0).map(|r| a.free_raw(r).unwrap());
        }
        for r in live {
            a.free_raw(r).unwrap();
        }
        a.empty_cache().unwrap();
        assert_eq!((a.memory_reserved(), d.used_bytes()), (0, 0), "{cap:#x}");
        a.check_consistency().unwrap();
    }
}
