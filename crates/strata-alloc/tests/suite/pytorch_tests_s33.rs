//! PyTorch's allocator tests, session 33: behaviours of PyTorch's own tests
//! and documented semantics that the earlier files (`pytorch_parity.rs`,
//! `_s29.rs`, `_s31.rs`, `pytorch_pinned_parity.rs`, `pytorch_tests_s32.rs`,
//! `settings.rs`, `mempool.rs`, `history_options.rs`, `diagnostics.rs`,
//! `history.rs`) left unchecked: the per-pool reserved bytes of
//! `torch.cuda.memory_stats()` (`reserved_bytes_by_private_pools`), a block's
//! set of recorded streams (device and pinned), the per-stream processing and
//! the pooling of `record_stream` events, the exact edges of the oversize
//! rules, the fraction in the out-of-memory text, the counters of an
//! out-of-memory error, private pools on the out-of-memory path (the full
//! release, `use_on_oom`) and with caching off, and what `skip_actions`
//! hides from the history but not from trace trackers.
//!
//! Each test names the PyTorch test it mirrors (`test/test_cuda.py` unless
//! said otherwise), or the documented semantics it checks
//! (`torch/cuda/memory.py`'s docstrings, `c10/cuda/CUDACachingAllocator.cpp`),
//! and runs on the simulated device. Expected figures follow from PyTorch's
//! semantics (segment sizes, which pool a block belongs to, when a statistic
//! changes), worked out in the comments, never from strata's output. Where
//! strata differs on purpose (a private pool's segments are ordinary even
//! with expandable segments on: docs/allocator.md, "Private memory pools"),
//! the test says so.

use crate::common;

use common::{sim_device as sim, stat};
use strata_alloc::{format_size, MemPoolOptions, StreamId};

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
const S0: StreamId = StreamId::DEFAULT;
const S1: StreamId = StreamId(31);
const S2: StreamId = StreamId(32);

/// PyTorch's default segments, and strata's default expandable segments.
const MODES: [&str; 2] = ["expandable_segments:False", "expandable_segments:True"];

/// `reserved_bytes_by_private_pools.<a>_<b>.<pool>.<metric>` of `a`, or
/// `None` when the statistics have no such key.
fn by_pool(a: &strata_alloc::CachingAllocator, id: (u64, u64), rest: &str) -> Option<i64> {
    a.memory_stats().get(&format!(
        "reserved_bytes_by_private_pools.{}_{}.{rest}",
        id.0, id.1
    ))
}

// ----- reserved_bytes_by_private_pools --------------------------------------------

/// `torch.cuda.memory_stats()`'s docstring: `reserved_bytes_by_private_pools`
/// is keyed by `MemPool.id`, flattened as `"0_1"`, and has the structure of
/// `reserved_bytes` (`{all,large_pool,small_pool}.{current,peak,allocated,
/// freed}`) scoped to one private pool; the default pools have no entry.
///
/// Pool 1 holds a 4 KiB block (a 2 MiB small segment) and a 30 MiB block (a
/// 30 MiB large segment: at least 10 MiB, rounded to 2 MiB); pool 2 a 1 KiB
/// block (a 2 MiB small segment); the default pools a 4 KiB block (2 MiB).
/// So pool 1: 32 MiB (2 small, 30 large), pool 2: 2 MiB, and in all
/// `reserved_bytes` 36 MiB. The pools' segments are ordinary in strata
/// whatever the setting (on purpose), so the figures are the same with
/// expandable segments on.
#[test]
fn memory_stats_reserved_bytes_by_private_pools() {
    for mode in MODES {
        let (_, a) = sim(mode, 8 * GIB);
        let p1 = a.mem_pool(MemPoolOptions::default());
        let p2 = a.mem_pool(MemPoolOptions::default());
        let x0 = a.allocate(4096, S0).unwrap();
        let (x1, y1) = {
            let _g = p1.activate().unwrap();
            (
                a.allocate(4096, S0).unwrap(),
                a.allocate(30 * MIB, S0).unwrap(),
            )
        };
        let x2 = {
            let _g = p2.activate().unwrap();
            a.allocate(1024, S0).unwrap()
        };
        let m = a.memory_stats().to_map();
        let (i1, i2) = (p1.id(), p2.id());
        let key = |id: (u64, u64), rest: &str| {
            let k = format!("reserved_bytes_by_private_pools.{}_{}.{rest}", id.0, id.1);
            *m.get(&k).unwrap_or_else(|| panic!("{mode}: no key {k}"))
        };
        assert_eq!(key(i1, "all.current") as u64, 32 * MIB, "{mode}");
        assert_eq!(key(i1, "small_pool.current") as u64, 2 * MIB, "{mode}");
        assert_eq!(key(i1, "large_pool.current") as u64, 30 * MIB, "{mode}");
        assert_eq!(key(i1, "all.peak") as u64, 32 * MIB, "{mode}");
        assert_eq!(key(i1, "all.allocated") as u64, 32 * MIB, "{mode}");
        assert_eq!(key(i1, "all.freed"), 0, "{mode}");
        assert_eq!(key(i2, "all.current") as u64, 2 * MIB, "{mode}");
        assert_eq!(key(i2, "large_pool.current"), 0, "{mode}");
        assert!(
            !m.keys()
                .any(|k| k.starts_with("reserved_bytes_by_private_pools.0_0.")),
            "{mode}: the default pools have no entry"
        );
        // 9 arrays x 3 pools x 4 metrics + 8 oversize + 7 scalars, and 12
        // per private pool.
        assert_eq!(m.len(), 9 * 3 * 4 + 8 + 7 + 2 * 12, "{mode}");
        assert_eq!(stat(&a, "reserved_bytes.all.current") as u64, 36 * MIB);

        // The pool's free 30 MiB segment is released once the pool is
        // dropped (its live 4 KiB block keeps the small one).
        drop(y1);
        a.empty_cache().unwrap();
        assert_eq!(by_pool(&a, i1, "all.current"), Some((32 * MIB) as i64));
        drop(p1);
        assert_eq!(by_pool(&a, i1, "all.current"), Some((2 * MIB) as i64));
        assert_eq!(by_pool(&a, i1, "large_pool.freed"), Some((30 * MIB) as i64));
        assert_eq!(by_pool(&a, i1, "all.peak"), Some((32 * MIB) as i64));

        // The resets reach the pools' figures too.
        a.reset_peak_memory_stats();
        assert_eq!(by_pool(&a, i1, "all.peak"), Some((2 * MIB) as i64));
        a.reset_accumulated_memory_stats();
        assert_eq!(by_pool(&a, i1, "all.allocated"), Some(0));
        assert_eq!(by_pool(&a, i1, "all.freed"), Some(0));
        assert_eq!(by_pool(&a, i1, "all.current"), Some((2 * MIB) as i64));

        // Its last block freed, the dropped pool's last segment goes back at
        // the next empty_cache and the pool is forgotten; strata then drops
        // its entry (docs/allocator.md, "Statistics").
        drop(x1);
        a.empty_cache().unwrap();
        assert_eq!(by_pool(&a, i1, "all.current"), None, "{mode}");
        assert_eq!(by_pool(&a, i2, "all.current"), Some((2 * MIB) as i64));
        drop((x0, x2));
        a.check_consistency().unwrap();
    }
}

/// `test_mempool_empty_cache`'s pool kept through `empty_cache`, with
/// `use_on_oom` (`TestMemPool`): a request the default pools cannot serve
/// borrows the pool's free block, but the segment stays the pool's, so its
/// reserved bytes stay in the pool's entry and the default pools' share of
/// `reserved_bytes` does not grow.
///
/// 256 MiB device, fraction 1/4 (64 MiB allowed): the pool caches a free
/// 40 MiB block (one 40 MiB segment); the default pools then want 30 MiB,
/// which needs a new 30 MiB segment (70 MiB > 64 MiB: refused), so
/// PyTorch's `try_mempool_fallback`, which comes before the full release,
/// lends the pool's block.
#[test]
fn a_lent_block_stays_in_its_pools_reserved_bytes() {
    let (_, a) = sim("expandable_segments:False", 256 * MIB);
    a.set_memory_fraction(0.25).unwrap();
    let p = a.mem_pool(MemPoolOptions {
        use_on_oom: true,
        ..MemPoolOptions::default()
    });
    {
        let _g = p.activate().unwrap();
        drop(a.allocate(40 * MIB, S0).unwrap());
    }
    assert_eq!(
        by_pool(&a, p.id(), "large_pool.current"),
        Some((40 * MIB) as i64)
    );
    let lent = a.allocate(30 * MIB, S0).unwrap();
    assert_eq!(stat(&a, "reserved_bytes.all.current") as u64, 40 * MIB);
    assert_eq!(by_pool(&a, p.id(), "all.current"), Some((40 * MIB) as i64));
    assert_eq!(
        by_pool(&a, p.id(), "all.allocated"),
        Some((40 * MIB) as i64)
    );
    // Split as any large block is (10 MiB spare is over 1 MiB), and found
    // before the full release: no retry.
    assert_eq!(stat(&a, "allocated_bytes.all.current") as u64, 30 * MIB);
    assert_eq!(stat(&a, "num_alloc_retries"), 0);
    drop(lent);
    a.check_consistency().unwrap();
}

// ----- record_stream ----------------------------------------------------------------

/// Mirrors `test_record_stream` with the stream recorded twice: PyTorch keeps
/// a block's recorded streams in a set (`stream_uses`) and ignores the
/// allocation stream, so recording S1 twice and S0 (the block's own) once
/// leaves one stream to wait for: freeing the block records exactly one
/// event, and completing S1 alone makes the block reusable on S0.
#[test]
fn recording_a_stream_twice_records_one_event() {
    for mode in MODES {
        let (d, a) = sim(mode, 4 * GIB);
        let keep = a.allocate(4096, S0).unwrap(); // keeps the segment split
        let tmp = a.allocate(4096, S0).unwrap();
        let ptr = tmp.ptr();
        tmp.record_stream(S1).unwrap();
        tmp.record_stream(S1).unwrap();
        tmp.record_stream(S0).unwrap();
        let events = d.call_count("event_record");
        drop(tmp);
        assert_eq!(d.call_count("event_record") - events, 1, "{mode}");
        assert_eq!(stat(&a, "active.all.current"), 2, "{mode}");
        d.complete_stream(S1);
        let again = a.allocate(4096, S0).unwrap();
        assert_eq!(again.ptr(), ptr, "{mode}: one event, completed");
        assert_eq!(stat(&a, "active.all.current"), 2, "{mode}");
        drop((keep, again));
        a.check_consistency().unwrap();
    }
}

/// Mirrors `test_record_stream` with two recorded streams, one per block:
/// PyTorch queues a free's events per recorded stream (`cuda_events[stream]`)
/// and `process_events` stops only at the first pending event *of each
/// stream*, so a block whose stream is done is reclaimed even though an
/// older free, waiting on another stream, is still pending.
///
/// `x` (4 KiB, recorded on S1) is freed before `y` (8 KiB, recorded on S2);
/// only S2 completes. The next 8 KiB request on S0 gets `y`'s address back;
/// `x` stays active: 2 active blocks (`x`, the new one), 4 KiB + 8 KiB.
#[test]
fn a_pending_event_on_one_stream_does_not_hold_back_another_streams() {
    for mode in MODES {
        let (d, a) = sim(mode, 4 * GIB);
        let keep = a.allocate(4096, S0).unwrap();
        let x = a.allocate(4096, S0).unwrap();
        let y = a.allocate(8192, S0).unwrap();
        let tail = a.allocate(4096, S0).unwrap(); // y's other neighbour
        let y_ptr = y.ptr();
        x.record_stream(S1).unwrap();
        y.record_stream(S2).unwrap();
        drop(x);
        drop(y);
        assert_eq!(stat(&a, "active.all.current"), 4, "{mode}");
        d.complete_stream(S2);
        let z = a.allocate(8192, S0).unwrap();
        assert_eq!(z.ptr(), y_ptr, "{mode}: y reclaimed past x's pending event");
        assert_eq!(stat(&a, "active.all.current"), 4, "{mode}");
        assert_eq!(
            stat(&a, "active_bytes.all.current"),
            4096 + 4096 + 8192 + 4096,
            "{mode}"
        );
        assert_eq!(stat(&a, "allocation.all.current"), 3, "{mode}");
        d.complete_stream(S1);
        drop(a.allocate(512, S0).unwrap()); // processes x's event
        assert_eq!(stat(&a, "active.all.current"), 3, "{mode}");
        drop((keep, z, tail));
        a.check_consistency().unwrap();
    }
}

// ----- oversize edges ---------------------------------------------------------------

/// The edges of PyTorch's oversize rules (`max_split_size_mb`, as
/// `test_allocator_settings` sets it), with ordinary segments: what is
/// compared with `max_split_size` is the *block*, not the request.
///
/// With a 20 MiB limit, 19.5 MiB (under the limit) gets a 20 MiB segment
/// (at least 10 MiB: rounded up to 2 MiB). `should_split` leaves it whole
/// (only 0.5 MiB spare, not over 1 MiB), so the allocation is the 20 MiB
/// block: `allocated_bytes` 20 MiB, `requested_bytes` 19.5 MiB, and both the
/// allocation and the segment count as oversize (20 MiB >= 20 MiB). Once
/// freed, another 19.5 MiB request may not take that cached block (a request
/// under the limit never gets a block at or over it): a second segment.
/// A 20 MiB request (at the limit) may take it (20 < 20 + 20, the default
/// `max_non_split_rounding`).
#[test]
fn the_oversize_limit_applies_to_the_block_not_the_request() {
    let (_, a) = sim("expandable_segments:False,max_split_size_mb:20", 16 * GIB);
    let req = 19 * MIB + MIB / 2;
    let x = a.allocate(req, S0).unwrap();
    let x_ptr = x.ptr();
    assert_eq!(stat(&a, "reserved_bytes.all.current") as u64, 20 * MIB);
    assert_eq!(stat(&a, "allocated_bytes.all.current") as u64, 20 * MIB);
    assert_eq!(stat(&a, "requested_bytes.all.current") as u64, req);
    assert_eq!(stat(&a, "inactive_split.all.current"), 0);
    assert_eq!(stat(&a, "oversize_allocations.current"), 1);
    assert_eq!(stat(&a, "oversize_segments.current"), 1);
    drop(x);
    assert_eq!(stat(&a, "oversize_allocations.current"), 0);
    assert_eq!(stat(&a, "oversize_allocations.freed"), 1);

    let y = a.allocate(req, S0).unwrap();
    assert_ne!(
        y.ptr(),
        x_ptr,
        "a request under the limit took an oversize block"
    );
    assert_eq!(stat(&a, "segment.all.current"), 2);
    assert_eq!(stat(&a, "oversize_segments.current"), 2);
    let z = a.allocate(20 * MIB, S0).unwrap();
    assert_eq!(z.ptr(), x_ptr);
    assert_eq!(stat(&a, "segment.all.current"), 2);
    assert_eq!(stat(&a, "oversize_allocations.current"), 2);
    drop((y, z));
    a.check_consistency().unwrap();
}

/// Just under the edge of the same rules: with a 20 MiB limit, an 18 MiB
/// request gets an 18 MiB segment (under the limit: not oversize), and a
/// 17 MiB request takes that cached block whole (17 MiB is under the limit
/// and so is the block; 1 MiB spare is not over 1 MiB: no split), so
/// `allocated_bytes` is 18 MiB for a 17 MiB request and nothing is oversize.
#[test]
fn a_block_under_the_limit_serves_smaller_requests_whole() {
    let (_, a) = sim("expandable_segments:False,max_split_size_mb:20", 16 * GIB);
    let x = a.allocate(18 * MIB, S0).unwrap();
    let ptr = x.ptr();
    assert_eq!(stat(&a, "oversize_segments.current"), 0);
    drop(x);
    let y = a.allocate(17 * MIB, S0).unwrap();
    assert_eq!(y.ptr(), ptr);
    assert_eq!(stat(&a, "allocated_bytes.all.current") as u64, 18 * MIB);
    assert_eq!(stat(&a, "requested_bytes.all.current") as u64, 17 * MIB);
    assert_eq!(stat(&a, "inactive_split.all.current"), 0);
    assert_eq!(stat(&a, "oversize_allocations.allocated"), 0);
    assert_eq!(stat(&a, "segment.all.current"), 1);
    drop(y);
    a.check_consistency().unwrap();
}

// ----- out of memory ----------------------------------------------------------------

/// Mirrors `test_set_per_process_memory_fraction` ("out of memory" once a
/// request exceeds half the device), with the fraction in the message as
/// PyTorch writes it ("<L> allowed;", `format_size` of the limit).
///
/// 1 GiB device, fraction 0.5: 512 MiB allowed. A 600 MiB request needs a
/// 600 MiB segment: refused.
#[test]
fn the_out_of_memory_message_names_the_allowed_memory() {
    for mode in MODES {
        let (_, a) = sim(mode, GIB);
        a.set_memory_fraction(0.5).unwrap();
        let e = a.allocate(600 * MIB, S0).unwrap_err();
        let text = e.to_string();
        assert!(text.contains("out of memory"), "{mode}: {text}");
        assert!(
            text.contains("Tried to allocate 600.00 MiB"),
            "{mode}: {text}"
        );
        let allowed = format!("{} allowed", format_size(512 * MIB));
        assert!(text.contains(&allowed), "{mode}: {text}");
        // Without a fraction there is no such clause.
        a.set_memory_fraction(1.0).unwrap();
        let e = a.allocate(2 * GIB, S0).unwrap_err();
        assert!(!e.to_string().contains(" allowed"), "{mode}: {e}");
        a.check_consistency().unwrap();
    }
}

/// The counters of one out-of-memory error under a fraction, as PyTorch's
/// malloc path moves them (the part of `_test_memory_stats_generator` and
/// `test_out_of_memory_retry` that reads them): the first `alloc_block` is
/// refused by the fraction without calling the driver; `release_cached_blocks`
/// synchronises every event (`num_sync_all_streams` + 1) and the second,
/// retrying `alloc_block` counts `num_alloc_retries` + 1 and is refused too;
/// then `num_ooms` + 1. No device allocation happens (`num_device_alloc`
/// unchanged), and the cached 4 MiB block's segment is released on the way
/// (`num_device_free` + 1).
#[test]
fn one_out_of_memory_error_moves_each_counter_once() {
    let (_, a) = sim("expandable_segments:False", GIB);
    a.set_memory_fraction(0.25).unwrap(); // 256 MiB
    drop(a.allocate(4 * MIB, S0).unwrap()); // a cached 20 MiB segment
    let before = a.memory_stats();
    assert!(a.allocate(300 * MIB, S0).is_err());
    let after = a.memory_stats();
    assert_eq!(after.num_ooms - before.num_ooms, 1);
    assert_eq!(after.num_alloc_retries - before.num_alloc_retries, 1);
    assert_eq!(after.num_sync_all_streams - before.num_sync_all_streams, 1);
    assert_eq!(after.num_device_alloc, before.num_device_alloc);
    assert_eq!(after.num_device_free - before.num_device_free, 1);
    assert_eq!(after.reserved_bytes.all().current, 0);
    a.check_consistency().unwrap();
}

/// `test_mempool_empty_cache`'s rule (a pool in use keeps its free segments
/// through `empty_cache`) on the out-of-memory path, which empties the
/// cache the same way (`release_cached_blocks`): a request routed to a pool
/// in use gets the default pools' free memory released for it, never the
/// pool's own free segments.
///
/// 64 MiB allowed (a quarter of 256 MiB). The pool caches a free 20 MiB
/// block (its 20 MiB segment); the default pools a free 40 MiB block (a
/// 40 MiB segment, or two 20 MiB pages of an expandable segment). In the
/// pool, 40 MiB misses (20 MiB is too small), a new 40 MiB segment would
/// make 100 MiB: refused; the full release (`num_alloc_retries` + 1) frees
/// the default pools' 40 MiB, then 20 + 40 = 60 MiB fits. Then 30 MiB in
/// the pool misses again and would make 90 MiB; the full release finds
/// nothing it may free (the pool is in use): out of memory, the pool's
/// 20 MiB still cached. A snapshot's segments of the pool add up to its
/// `reserved_bytes_by_private_pools` figure throughout. (This is the newest
/// `malloc`, which skips the full release only during a CUDA graph capture,
/// `is_capture_context()`: "user mempools should be able to reclaim cached
/// memory". Earlier builds skipped it while any thread was routed to a pool,
/// `captures_underway` not empty, and failed the first request at once.)
#[test]
fn the_release_before_an_oom_spares_the_requesting_pools_free_segments() {
    for mode in MODES {
        let (_, a) = sim(mode, 256 * MIB);
        a.set_memory_fraction(0.25).unwrap();
        let p = a.mem_pool(MemPoolOptions::default());
        let in_pool = |size: u64| {
            let _g = p.activate().unwrap();
            a.allocate(size, S0)
        };
        let pool_reserved = |a: &strata_alloc::CachingAllocator| {
            let from_snapshot: u64 = a
                .snapshot()
                .iter()
                .filter(|s| s.pool_id == p.id())
                .map(|s| s.total_size)
                .sum();
            let stat = by_pool(a, p.id(), "all.current").unwrap_or(0) as u64;
            assert_eq!(stat, from_snapshot, "{mode}");
            stat
        };
        drop(in_pool(20 * MIB).unwrap());
        drop(a.allocate(40 * MIB, S0).unwrap());
        assert_eq!(a.memory_reserved(), 60 * MIB, "{mode}");
        assert_eq!(pool_reserved(&a), 20 * MIB, "{mode}");

        let x = in_pool(40 * MIB).unwrap();
        assert_eq!(stat(&a, "num_alloc_retries"), 1, "{mode}");
        assert_eq!(a.memory_reserved(), 60 * MIB, "{mode}");
        assert_eq!(pool_reserved(&a), 60 * MIB, "{mode}: all of it the pool's");

        let e = in_pool(30 * MIB).unwrap_err();
        assert!(e.is_out_of_memory(), "{mode}: {e}");
        assert_eq!(stat(&a, "num_alloc_retries"), 2, "{mode}");
        assert_eq!(stat(&a, "num_ooms"), 1, "{mode}");
        assert_eq!(pool_reserved(&a), 60 * MIB, "{mode}: the free 20 MiB kept");
        drop(x);
        a.check_consistency().unwrap();
    }
}

// ----- pinned host memory -----------------------------------------------------------

/// Mirrors `test_caching_pinned_memory` with the copy's stream recorded
/// twice: PyTorch's `CachingHostAllocator::record_event` adds the stream to
/// the block's stream set, and `free` records one event per stream of the
/// set, so two copies on one stream leave one event to wait for, and two
/// streams two. The block comes back (the same address) once every
/// recorded stream is done, not before.
#[test]
fn a_pinned_block_records_one_event_per_distinct_stream() {
    use strata_alloc::pinned::{PinnedAllocator, SimPinnedBackend};
    let b = std::sync::Arc::new(SimPinnedBackend::new(None));
    let a = PinnedAllocator::new(std::sync::Arc::clone(&b));
    let t = a.allocate(4096).unwrap();
    let p = t.ptr();
    t.record_stream(S1).unwrap();
    t.record_stream(S1).unwrap();
    drop(t);
    assert_eq!(a.pending_events(), 1, "one stream, one event");
    b.complete_stream(S1);
    let t = a.allocate(4096).unwrap();
    assert_eq!(t.ptr(), p);

    t.record_stream(S1).unwrap();
    t.record_stream(S2).unwrap();
    t.record_stream(S1).unwrap();
    drop(t);
    assert_eq!(a.pending_events(), 2, "two streams, two events");
    b.complete_stream(S1);
    let other = a.allocate(4096).unwrap();
    assert_ne!(other.ptr(), p, "S2 is not done yet");
    b.complete_stream(S2);
    let again = a.allocate(4096).unwrap();
    assert_eq!(again.ptr(), p);
    assert_eq!(a.stats().active_requests.current, 2);
    drop((other, again));
    a.check_consistency().unwrap();
}

/// `test_record_stream` in a loop, as a training step repeats it: PyTorch
/// takes a free's events from a per-device `EventPool` and gives each back
/// once `process_events` has seen it complete, so a loop that records two
/// streams per step creates two events in all, however many steps run (each
/// step records two). Each step's block waits for both streams: with only S1
/// done the next step's request gets a new address; with S2 done too, the
/// block comes back.
#[test]
fn record_stream_events_are_pooled_across_steps() {
    for mode in MODES {
        let (d, a) = sim(mode, 4 * GIB);
        let keep = a.allocate(4096, S0).unwrap();
        let (creates, records) = (d.call_count("event_create"), d.call_count("event_record"));
        let first = a.allocate(64 * 1024, S0).unwrap();
        let ptr = first.ptr();
        let mut x = first;
        for step in 0..10 {
            x.record_stream(S1).unwrap();
            x.record_stream(S2).unwrap();
            drop(x);
            d.complete_stream(S1);
            let early = a.allocate(64 * 1024, S0).unwrap();
            assert_ne!(early.ptr(), ptr, "{mode} step {step}: S2 still running");
            drop(early);
            d.complete_stream(S2);
            x = a.allocate(64 * 1024, S0).unwrap();
            assert_eq!(x.ptr(), ptr, "{mode} step {step}");
        }
        assert_eq!(d.call_count("event_record") - records, 20, "{mode}");
        assert_eq!(d.call_count("event_create") - creates, 2, "{mode}");
        drop((x, keep));
        a.check_consistency().unwrap();
    }
}

/// `use_on_oom` (`TestMemPool`'s `test_mempool_limited_memory_with_allocator`
/// and `test_deleted_mempool_not_used_on_oom` set it up) serves only the
/// default pools: PyTorch's `try_mempool_fallback` returns at once when the
/// failing request is itself routed to a private pool ("if already trying
/// to use a mempool, then just oom"). So a request in pool A does not borrow
/// the free block of `use_on_oom` pool B, and B, in use, keeps its free
/// segment through the full release: out of memory. The same request on the
/// default pools borrows B's block.
///
/// 64 MiB allowed (a quarter of 256 MiB): B caches a free 40 MiB block;
/// 30 MiB more would make 70 MiB.
#[test]
fn a_request_routed_to_a_pool_does_not_borrow_from_use_on_oom_pools() {
    for mode in MODES {
        let (_, a) = sim(mode, 256 * MIB);
        a.set_memory_fraction(0.25).unwrap();
        let pa = a.mem_pool(MemPoolOptions::default());
        let pb = a.mem_pool(MemPoolOptions {
            use_on_oom: true,
            ..MemPoolOptions::default()
        });
        let b_ptr = {
            let _g = pb.activate().unwrap();
            let x = a.allocate(40 * MIB, S0).unwrap();
            x.ptr()
        };
        let e = {
            let _g = pa.activate().unwrap();
            a.allocate(30 * MIB, S0).unwrap_err()
        };
        assert!(e.is_out_of_memory(), "{mode}: {e}");
        assert_eq!(stat(&a, "num_ooms"), 1, "{mode}");
        assert_eq!(by_pool(&a, pb.id(), "all.current"), Some((40 * MIB) as i64));
        assert_eq!(
            by_pool(&a, pa.id(), "all.current"),
            None,
            "{mode}: A got nothing"
        );
        let lent = a.allocate(30 * MIB, S0).unwrap();
        assert_eq!(lent.ptr(), b_ptr, "{mode}");
        drop(lent);
        a.check_consistency().unwrap();
    }
}

/// `TestCudaMallocAsync.test_cachingAllocator_raw_alloc`'s deactivated
/// allocator inside `use_mem_pool`: with caching off, PyTorch's front end
/// (`NativeCachingAllocator::allocate`, `uncached_allocate`) sends each
/// request straight to the device before any pool is looked at, so a thread
/// routed to a private pool gets uncached memory that no pool owns: the
/// pool has no segment and no `reserved_bytes_by_private_pools` entry, and
/// nothing is reserved. Once caching is back on, the same request lands in
/// the pool (a 20 MiB segment for 4 MiB).
#[test]
fn uncached_memory_belongs_to_no_private_pool() {
    for mode in MODES {
        let (_, a) = sim(mode, 4 * GIB);
        let p = a.mem_pool(MemPoolOptions::default());
        a.set_caching_enabled(false);
        let x = {
            let _g = p.activate().unwrap();
            a.allocate(4 * MIB, S0).unwrap()
        };
        assert!(p.snapshot().is_empty(), "{mode}");
        assert_eq!(by_pool(&a, p.id(), "all.current"), None, "{mode}");
        assert_eq!(a.memory_reserved(), 0, "{mode}");
        drop(x);
        a.set_caching_enabled(true);
        let y = {
            let _g = p.activate().unwrap();
            a.allocate(4 * MIB, S0).unwrap()
        };
        assert_eq!(
            by_pool(&a, p.id(), "large_pool.current"),
            Some((20 * MIB) as i64)
        );
        assert_eq!(p.snapshot().len(), 1, "{mode}");
        drop(y);
        a.check_consistency().unwrap();
    }
}

// ----- history ----------------------------------------------------------------------

/// `test_memory_snapshot_skip_actions` with a trace tracker attached:
/// PyTorch's `record_trace` hands each entry to the trackers before it
/// consults `skip_actions`, which only keeps entries out of the history's
/// ring. So with `alloc` and `free_completed` skipped, the history lacks
/// them while a tracker still sees every event: for one 4 MiB tensor
/// allocated and freed, the tracker's events are the history's plus the
/// `alloc` and the `free_completed`, in order.
#[test]
fn skip_actions_leave_out_history_entries_not_tracker_events() {
    use std::sync::{Arc, Mutex};
    use strata_alloc::history::{Action, HistoryOptions};
    for mode in MODES {
        let (_, a) = sim(mode, GIB);
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s = Arc::clone(&seen);
        a.attach_trace_tracker(move |e| s.lock().unwrap().push(e.action));
        a.record_history_opts(
            &HistoryOptions::new(100).skip(&[Action::Alloc, Action::FreeCompleted]),
        );
        drop(a.allocate(4 * MIB, S0).unwrap());
        let history: Vec<Action> = a.history().iter().map(|e| e.action).collect();
        let tracked = seen.lock().unwrap().clone();
        assert!(!history.contains(&Action::Alloc), "{mode}: {history:?}");
        assert!(
            !history.contains(&Action::FreeCompleted),
            "{mode}: {history:?}"
        );
        let kept: Vec<Action> = tracked
            .iter()
            .copied()
            .filter(|&x| x != Action::Alloc && x != Action::FreeCompleted)
            .collect();
        assert_eq!(kept, history, "{mode}");
        let pos = |x: Action| tracked.iter().position(|&y| y == x);
        let (alloc, req, done) = (
            pos(Action::Alloc).expect("the tracker saw the alloc"),
            pos(Action::FreeRequested).unwrap(),
            pos(Action::FreeCompleted).expect("the tracker saw the free"),
        );
        assert!(alloc < req && req < done, "{mode}: {tracked:?}");
    }
}
