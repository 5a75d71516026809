//! Parity with PyTorch's allocator tests, session 29.
//!
//! Each test mirrors a behaviour of PyTorch's caching allocator exercised by
//! its test suite (`test/test_cuda.py`, `TestCudaMallocAsync`, `TestMemPool`)
//! or fixed by its source (`c10/cuda/CUDACachingAllocator.cpp`,
//! `torch/csrc/cuda/memory_snapshot.cpp`), named in the doc comment. The
//! expected figures are worked out from PyTorch's semantics, never taken from
//! strata's output.

use crate::common;

use common::{decode, int, key, list, sim_device as sim, stat, string, Lcg};
use serde_pickle::{HashableValue, Value};
use std::sync::Arc;
use strata_alloc::driver::sim::SimDriver;
use strata_alloc::history::{Action, HistoryContext, HistoryOptions};
use strata_alloc::{AllocatorConfig, CachingAllocator, StreamId};

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
const S0: StreamId = StreamId::DEFAULT;
const S1: StreamId = StreamId(21);

/// PyTorch's default segments, and strata's default expandable segments.
const MODES: [&str; 2] = ["expandable_segments:False", "expandable_segments:True"];

/// Whether a pickled dict has string key `k`.
fn has_key(v: &Value, k: &str) -> bool {
    match v {
        Value::Dict(d) => d.contains_key(&HashableValue::String(k.into())),
        _ => panic!("not a dict looking up {k}"),
    }
}

// ----- the `oom` trace entry -------------------------------------------------------

/// `DeviceCachingAllocator::malloc` records a failed request as
/// `record_trace(TraceEntry::OOM, device_free, params.size(), params.stream(),
/// ..., context)`: the entry's size is the *rounded* request
/// (`params.size()`, `round_size(orig)`), not the segment it tried to
/// allocate (`alloc_size`, which is what the message and the OOM observers
/// get); its stream is the request's stream; its address field holds the
/// free device memory; and, like `segment_alloc`, it carries the malloc's
/// context when recording with `context="alloc"` or `"all"`.
#[test]
fn the_oom_trace_entry_has_the_rounded_request_its_stream_and_its_call_site() {
    for mode in MODES {
        let (_, a) = sim(mode, GIB);
        a.record_history_opts(&HistoryOptions::new(100).context(HistoryContext::Alloc));
        let orig = 2 * GIB + 1000;
        let rounded = 2 * GIB + 1024; // a multiple of 512
        let free = a.mem_get_info().unwrap().free;
        let line = line!() + 1;
        let e = a.allocate(orig, S1).unwrap_err();
        let oom = e.out_of_memory().expect("an out-of-memory error");
        assert!(
            oom.device_request > rounded,
            "{mode}: the segment is larger"
        );
        let h = a.history();
        let entry = h.last().expect("an entry");
        assert_eq!(entry.action, Action::Oom, "{mode}");
        assert_eq!(entry.size, rounded, "{mode}");
        assert_eq!(entry.stream, S1, "{mode}");
        assert_eq!(entry.addr, free, "{mode}: device_free");
        let site = entry.site.as_ref().expect("the failing call's site");
        assert_eq!((site.file, site.line), (file!(), line), "{mode}");
        // context="state": no frames on trace entries.
        a.record_history(None);
        a.record_history_opts(&HistoryOptions::new(100).context(HistoryContext::State));
        a.allocate(orig, S1).unwrap_err();
        let h = a.history();
        let entry = h.last().unwrap();
        assert_eq!(entry.action, Action::Oom, "{mode}");
        assert!(entry.site.is_none(), "{mode}");
    }
}

/// `torch/csrc/cuda/memory_snapshot.cpp` writes each trace entry's address
/// under `addr`, except for `oom` entries, whose value (the free device
/// memory) goes under `device_free`
/// (`TraceEntry::OOM == te.action_ ? device_free_s : addr_s`).
#[test]
fn the_pickled_oom_entry_names_its_address_device_free() {
    let (_, a) = sim("expandable_segments:False", GIB);
    a.record_history(Some(100));
    let x = a.allocate(4 * MIB, S0).unwrap();
    let free = a.mem_get_info().unwrap().free;
    a.allocate(2 * GIB, S0).unwrap_err();
    let doc = decode(&a.snapshot_pickle().unwrap());
    let trace = list(&list(key(&doc, "device_traces"))[0]);
    let oom: Vec<&Value> = trace
        .iter()
        .filter(|e| string(key(e, "action")) == "oom")
        .collect();
    assert_eq!(oom.len(), 1);
    assert_eq!(int(key(oom[0], "device_free")), free);
    assert!(!has_key(oom[0], "addr"));
    assert_eq!(int(key(oom[0], "size")), 2 * GIB);
    // Every other entry keeps `addr`.
    let alloc = trace
        .iter()
        .find(|e| string(key(e, "action")) == "alloc")
        .unwrap();
    assert_eq!(int(key(alloc, "addr")), x.ptr());
    assert!(!has_key(alloc, "device_free"));
    drop(x);
    assert_eq!(stat(&a, "num_ooms"), 1);
}

// ----- garbage collection ----------------------------------------------------------

/// `get_free_block` ages the blocks of the pool it searches
/// (`++pool.get_free_blocks_call_count`, per `BlockPool`), and
/// `garbage_collect_cached_blocks` reads the ages of the default large pool
/// only. So requests served by a private pool (`use_mem_pool`) age no block
/// of the default pool: two default blocks cached around them have the same
/// age, the mean, and one collection frees both.
///
/// 200 MiB allowed (a fraction of 4 GiB), threshold 0.25: collection starts
/// above 50 MiB reserved. A and B (30 MiB segments each) and the pool's
/// 20 MiB segment make 80 MiB; A is freed, four requests are served by the
/// pool, B is freed; a 40 MiB request misses and collects toward a target
/// of 30 MiB: PyTorch frees A and B (ages equal), leaving 20 MiB, then
/// allocates 40 MiB: 60 MiB reserved.
#[test]
fn private_pool_requests_do_not_age_the_default_pools_blocks() {
    let (_, a) = sim(
        "expandable_segments:False,garbage_collection_threshold:0.25",
        4 * GIB,
    );
    a.set_memory_fraction(200.0 / 4096.0).unwrap();
    let x = a.allocate(30 * MIB, S0).unwrap();
    let y = a.allocate(30 * MIB, S0).unwrap();
    let pool = a.mem_pool(Default::default());
    {
        let _in_pool = pool.activate().unwrap();
        drop(a.allocate(2 * MIB, S0).unwrap());
    }
    assert_eq!(a.memory_reserved(), 80 * MIB);
    drop(x);
    {
        let _in_pool = pool.activate().unwrap();
        for _ in 0..4 {
            drop(a.allocate(2 * MIB, S0).unwrap());
        }
    }
    drop(y);
    let frees = stat(&a, "num_device_free");
    let z = a.allocate(40 * MIB, S0).unwrap();
    assert_eq!(stat(&a, "num_device_free") - frees, 2, "A and B collected");
    assert_eq!(a.memory_reserved(), 60 * MIB);
    assert_eq!(stat(&a, "num_alloc_retries"), 0);
    drop(z);
    a.check_consistency().unwrap();
}

// ----- caching_allocator_enable ------------------------------------------------------

/// Mirrors `TestCudaMallocAsync.test_cachingAllocator_raw_alloc`: with the
/// caching allocator deactivated (`torch.cuda.caching_allocator_enable(False)`)
/// a 1 MiB `raw_alloc` adds nothing to `requested_bytes.all.allocated`; once
/// reactivated, it adds 1 MiB. Behind it (`NativeCachingAllocator::raw_alloc`,
/// `uncached_allocate`, `uncached_delete`): each request is a `cudaMalloc` of
/// exactly its size, each delete a `cudaFree`, and the allocator's books
/// (statistics, segments) never see them.
#[test]
fn a_deactivated_caching_allocator_goes_straight_to_the_device() {
    for mode in MODES {
        let (_, a) = sim(mode, 4 * GIB);
        let requested = |a: &CachingAllocator| stat(a, "requested_bytes.all.allocated");
        a.reset_accumulated_memory_stats();
        assert!(a.caching_enabled());
        a.set_caching_enabled(false);
        assert!(!a.caching_enabled());
        let free = a.mem_get_info().unwrap().free;
        let calls = a.driver_calls();
        let start = requested(&a);
        let p = a.allocate_raw(MIB, S0).unwrap();
        assert_eq!(requested(&a) - start, 0, "{mode}");
        assert_eq!(a.mem_get_info().unwrap().free, free - MIB, "{mode}");
        assert_eq!(a.memory_reserved(), 0, "{mode}");
        assert!(a.snapshot().is_empty(), "{mode}");
        // A second request is a second device allocation: nothing is cached.
        let q = a.allocate_raw(1000, S0).unwrap();
        assert_eq!(a.mem_get_info().unwrap().free, free - MIB - 1000, "{mode}");
        assert_eq!(a.driver_calls().malloc - calls.malloc, 2, "{mode}");
        a.free_raw(p).unwrap();
        a.free_raw(q).unwrap();
        assert_eq!(a.driver_calls().free - calls.free, 2, "{mode}");
        assert_eq!(a.mem_get_info().unwrap().free, free, "{mode}");
        assert_eq!(a.memory_stats(), {
            let mut s = a.memory_stats();
            s.reset_accumulated();
            s
        });
        a.set_caching_enabled(true);
        let start = requested(&a);
        let p = a.allocate_raw(MIB, S0).unwrap();
        assert_eq!(requested(&a) - start, MIB as i64, "{mode}");
        a.free_raw(p).unwrap();
        a.check_consistency().unwrap();
    }
}

/// PyTorch picks an allocation's deleter when it allocates
/// (`NativeCachingAllocator::allocate`: `local_raw_delete` while caching is
/// on, `uncached_delete` while it is off), so switching caching off does not
/// send cached memory to the device, and switching it back on does not
/// cache memory that was allocated outside the cache.
#[test]
fn a_free_goes_where_the_allocation_came_from() {
    for mode in MODES {
        let (_, a) = sim(mode, 4 * GIB);
        let cached = a.allocate(3 * MIB, S0).unwrap();
        let cached_at = cached.ptr();
        let reserved = a.memory_reserved();
        assert!(reserved >= 3 * MIB);
        a.set_caching_enabled(false);
        let free = a.mem_get_info().unwrap().free;
        drop(cached);
        assert_eq!(a.memory_allocated(), 0, "{mode}");
        assert_eq!(a.memory_reserved(), reserved, "{mode}: still cached");
        assert_eq!(a.mem_get_info().unwrap().free, free, "{mode}");
        let outside = a.allocate(5 * MIB, S0).unwrap();
        assert_eq!(a.mem_get_info().unwrap().free, free - 5 * MIB, "{mode}");
        a.set_caching_enabled(true);
        drop(outside);
        assert_eq!(
            a.mem_get_info().unwrap().free,
            free,
            "{mode}: back on the device"
        );
        assert_eq!(a.memory_reserved(), reserved, "{mode}");
        // The block cached while caching was off is reused now.
        let again = a.allocate(3 * MIB, S0).unwrap();
        assert_eq!(again.ptr(), cached_at, "{mode}");
        assert_eq!(a.memory_reserved(), reserved, "{mode}");
        drop(again);
        a.check_consistency().unwrap();
    }
}

/// The handles of uncached allocations under hostile use: `record_stream`
/// is accepted and does nothing (PyTorch returns early for memory whose
/// deleter is not `local_raw_delete`); a second free, a forged or foreign
/// handle are typed errors that change nothing; a request the device cannot
/// supply is a typed out-of-memory error that names the switch, counts no
/// `num_ooms` and calls no observer (PyTorch's uncached `cudaMalloc` raises
/// a CUDA error, not `OutOfMemoryError`); a zero-byte request is the null
/// allocation.
#[test]
fn uncached_handles_refuse_misuse_and_change_nothing() {
    let (_, a) = sim("expandable_segments:False", GIB);
    let (_, other) = sim("expandable_segments:False", GIB);
    a.set_caching_enabled(false);
    other.set_caching_enabled(false);
    let observed = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let o = Arc::clone(&observed);
    a.on_oom(move |_, _| {
        o.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    });
    let x = a.allocate_raw(4096, S0).unwrap();
    a.record_stream(&x, S1).unwrap();
    let free = a.mem_get_info().unwrap().free;
    let stats = a.memory_stats();
    // A foreign handle with the same address: refused.
    let y = other.allocate_raw(4096, S0).unwrap();
    assert!(matches!(
        a.free_raw(y),
        Err(strata_alloc::AllocError::InvalidFree { .. })
    ));
    assert!(a.record_stream(&y, S1).is_err());
    other.free_raw(y).unwrap();
    a.free_raw(x).unwrap();
    // Twice: refused, nothing changes.
    let e = a.free_raw(x).unwrap_err();
    assert!(
        matches!(e, strata_alloc::AllocError::InvalidFree { .. }),
        "{e}"
    );
    assert!(a.record_stream(&x, S1).is_err());
    assert_eq!(a.mem_get_info().unwrap().free, free + 4096);
    // More than the device has.
    let e = a.allocate_raw(2 * GIB, S0).unwrap_err();
    assert!(e.is_out_of_memory(), "{e}");
    let text = e.to_string();
    assert!(text.contains("caching is off"), "{text}");
    assert!(text.contains("set_caching_enabled(true)"), "{text}");
    assert_eq!(observed.load(std::sync::atomic::Ordering::SeqCst), 0);
    assert_eq!(a.memory_stats(), stats);
    assert_eq!(stat(&a, "num_ooms"), 0);
    let z = a.allocate_raw(0, S0).unwrap();
    assert_eq!(z.ptr(), 0);
    a.free_raw(z).unwrap();
    a.set_caching_enabled(true);
    a.check_consistency().unwrap();
}

/// `torch.cuda.memory.caching_allocator_enable` is one switch for the
/// process: the registry's `caching_allocator_enable` turns every device's
/// allocator, existing or created later, on or off.
#[test]
fn caching_allocator_enable_switches_every_allocator() {
    let cpu = strata_alloc::allocator(strata_alloc::Device::Cpu).unwrap();
    strata_alloc::caching_allocator_enable(false);
    let off = cpu.caching_enabled();
    strata_alloc::caching_allocator_enable(true);
    assert!(!off);
    assert!(cpu.caching_enabled());
}

// ----- snapshots of a pool -------------------------------------------------------------

/// `DeviceCachingAllocator::snapshot(mempool_id)` walks only the pool's
/// blocks when given a private pool's id (`MemPool.snapshot()`), and
/// records its `snapshot` trace entry with `total_active` summed over the
/// segments it returns: the pool's active bytes, not the device's.
#[test]
fn a_pools_snapshot_event_counts_the_pools_active_bytes() {
    for mode in MODES {
        let (_, a) = sim(mode, 4 * GIB);
        a.record_history(Some(100));
        let outside = a.allocate(4 * MIB, S0).unwrap();
        let pool = a.mem_pool(Default::default());
        let inside = {
            let _in_pool = pool.activate().unwrap();
            a.allocate(MIB, S0).unwrap()
        };
        let segs = pool.snapshot();
        assert_eq!(segs.len(), 1, "{mode}");
        assert_eq!(segs[0].active_size, MIB, "{mode}");
        let h = a.history();
        let last = h.last().unwrap();
        assert_eq!(last.action, Action::Snapshot, "{mode}");
        assert_eq!(last.size, MIB, "{mode}");
        // The device-wide snapshot counts everything active.
        a.snapshot();
        let h = a.history();
        assert_eq!(h.last().unwrap().size, 5 * MIB, "{mode}");
        drop((outside, inside));
    }
}

// ----- the order of trace entries --------------------------------------------------------

/// The trace of one allocation recorded on a second stream, freed, then
/// released by `empty_cache`, in PyTorch's order: `malloc` records
/// `segment_alloc` (`alloc_block`; `segment_map` when an expandable segment
/// grows) before `alloc` (`alloc_found_block`); `free` records
/// `free_requested` at once and, the block waiting for the other stream's
/// event, nothing more; `empty_cache` first synchronises the events
/// (`free_completed`) and then returns the segment (`segment_free`, or
/// `segment_unmap` for expandable memory). Sizes: the segment's for segment
/// events, the caller's (`requested_size`) for the others.
#[test]
fn a_recorded_free_is_traced_in_pytorchs_order() {
    for (mode, seg_alloc, seg_free) in [
        (
            "expandable_segments:False",
            Action::SegmentAlloc,
            Action::SegmentFree,
        ),
        (
            "expandable_segments:True",
            Action::SegmentMap,
            Action::SegmentUnmap,
        ),
    ] {
        let (_, a) = sim(mode, 4 * GIB);
        a.record_history(Some(100));
        let x = a.allocate(3 * MIB + 100, S0).unwrap();
        let p = x.ptr();
        x.record_stream(S1).unwrap();
        drop(x);
        let before = a.history().len();
        a.empty_cache().unwrap();
        let h = a.history();
        let actions: Vec<Action> = h.iter().map(|e| e.action).collect();
        assert_eq!(
            actions,
            [
                seg_alloc,
                Action::Alloc,
                Action::FreeRequested,
                Action::FreeCompleted,
                seg_free
            ],
            "{mode}"
        );
        assert_eq!(before, 3, "{mode}: the free completes only at empty_cache");
        for e in &h[1..4] {
            assert_eq!((e.addr, e.size, e.stream), (p, 3 * MIB + 100, S0), "{mode}");
        }
        assert_eq!(h[0].addr, p, "{mode}");
        assert_eq!(h[4].addr, p, "{mode}");
        assert_eq!(h[0].size, h[4].size, "{mode}");
        assert!(h[0].size >= 3 * MIB + 512, "{mode}");
        assert_eq!(stat(&a, "num_sync_all_streams"), 1, "{mode}");
    }
}

// ----- the pickled allocator settings ----------------------------------------------------

/// `memory_snapshot.cpp` writes `allocator_settings` with
/// `PYTORCH_CUDA_ALLOC_CONF`, `max_split_size`, `garbage_collection_threshold`,
/// `expandable_segments`, `pinned_num_register_threads`,
/// `release_lock_on_cudamalloc`, `pinned_use_cuda_host_register`,
/// `graph_capture_record_stream_reuse` and `roundup_power2_divisions`, the
/// last one a dict from each interval's start in MiB (`roundup_key` 1, 2,
/// 4, … doubling over the 16 intervals) to its division count. With
/// `[64:8,>:2]`, the first key fills every interval up to 64 MiB with 8 and
/// `>` every interval above it with 2 (`AllocatorConfig` list syntax).
#[test]
fn the_pickled_allocator_settings_have_pytorchs_keys_and_types() {
    let (_, a) = sim(
        "roundup_power2_divisions:[64:8,>:2],pinned_num_register_threads:8,\
         release_lock_on_cudamalloc:True,pinned_use_cuda_host_register:True,\
         graph_capture_record_stream_reuse:True,max_split_size_mb:40,\
         expandable_segments:False",
        4 * GIB,
    );
    let doc = decode(&a.snapshot_pickle().unwrap());
    let s = key(&doc, "allocator_settings");
    assert_eq!(int(key(s, "pinned_num_register_threads")), 8);
    for k in [
        "release_lock_on_cudamalloc",
        "pinned_use_cuda_host_register",
        "graph_capture_record_stream_reuse",
    ] {
        assert_eq!(key(s, k), &Value::Bool(true), "{k}");
    }
    assert_eq!(key(s, "expandable_segments"), &Value::Bool(false));
    assert_eq!(int(key(s, "max_split_size")), 40 * MIB);
    let r = key(s, "roundup_power2_divisions");
    let Value::Dict(d) = r else {
        panic!("roundup_power2_divisions is not a dict: {r:?}")
    };
    assert_eq!(d.len(), 16);
    for i in 0..16u32 {
        let mib = 1u64 << i;
        let want = if mib <= 64 { 8 } else { 2 };
        assert_eq!(int(key(r, &mib.to_string())), want, "interval {mib} MiB");
    }
    // The defaults: no rounding anywhere, the flags off.
    let (_, b) = sim("", 4 * GIB);
    let doc = decode(&b.snapshot_pickle().unwrap());
    let s = key(&doc, "allocator_settings");
    assert_eq!(int(key(s, "pinned_num_register_threads")), 1);
    assert_eq!(key(s, "release_lock_on_cudamalloc"), &Value::Bool(false));
    assert_eq!(key(s, "max_split_size"), &Value::I64(-1));
    assert_eq!(int(key(key(s, "roundup_power2_divisions"), "32768")), 0);
}

// ----- deleting a pool waits for the pool's events only -------------------------------

/// `~MemPool` calls `emptyCache(pool id)`, whose
/// `release_cached_blocks(context, mempool_id)` calls
/// `synchronize_and_free_events(context, pool)`: "If there is an active
/// mempool, we sync only the events associated with the pool". A default-pool
/// block whose free waits on another stream's event stays pending (still
/// active, not reusable) when a pool is deleted, while the pool's own pending
/// block is freed and its segment released.
#[test]
fn deleting_a_pool_waits_only_for_the_pools_events() {
    for mode in MODES {
        let (_, a) = sim(mode, 4 * GIB);
        let x = a.allocate(MIB, S0).unwrap();
        let x_at = x.ptr();
        x.record_stream(S1).unwrap();
        drop(x);
        let pool = a.mem_pool(Default::default());
        {
            let _in_pool = pool.activate().unwrap();
            let y = a.allocate(MIB, S0).unwrap();
            y.record_stream(S1).unwrap();
        }
        assert_eq!(
            stat(&a, "active_bytes.all.current"),
            2 * MIB as i64,
            "{mode}"
        );
        let syncs = stat(&a, "num_sync_all_streams");
        drop(pool);
        assert_eq!(stat(&a, "num_sync_all_streams") - syncs, 1, "{mode}");
        // The pool's block was freed and its segment released; x still waits.
        assert_eq!(stat(&a, "active_bytes.all.current"), MIB as i64, "{mode}");
        let snap = a.snapshot();
        assert!(snap.iter().all(|s| s.pool_id == (0, 0)), "{mode}");
        let pending: Vec<_> = snap
            .iter()
            .flat_map(|s| &s.blocks)
            .filter(|b| b.state == strata_alloc::snapshot::BlockState::ActivePendingFree)
            .collect();
        assert_eq!(pending.len(), 1, "{mode}");
        assert_eq!(pending[0].address, x_at, "{mode}");
        let z = a.allocate(MIB, S0).unwrap();
        assert_ne!(z.ptr(), x_at, "{mode}: not reusable yet");
        drop(z);
        a.empty_cache().unwrap();
        assert_eq!(stat(&a, "active_bytes.all.current"), 0, "{mode}");
        a.check_consistency().unwrap();
    }
}

// ----- the order of segment releases -----------------------------------------------------

/// `release_cached_blocks` frees the default pools' whole free segments
/// large pool first, then small pool (`release_blocks(large_blocks)`,
/// `release_blocks(small_blocks)`), each pool in its set's order: stream,
/// then size, then address. The `segment_free` entries of `empty_cache`
/// follow that order, whatever the order the streams were first used in.
#[test]
fn empty_cache_releases_large_segments_then_small_ones_by_stream_and_size() {
    let (_, a) = sim("expandable_segments:False", 4 * GIB);
    a.record_history(Some(100));
    // S1 is used first; S0's segments still come first (stream 0 < 21).
    let blocks = vec![
        a.allocate(1024, S1).unwrap(),     // S1 small: 2 MiB
        a.allocate(30 * MIB, S0).unwrap(), // S0 large: 30 MiB
        a.allocate(1024, S0).unwrap(),     // S0 small: 2 MiB
        a.allocate(5 * MIB, S0).unwrap(),  // S0 large: 20 MiB
        a.allocate(12 * MIB, S1).unwrap(), // S1 large: 12 MiB
    ];
    drop(blocks);
    let before = a.history().len();
    a.empty_cache().unwrap();
    let freed: Vec<(StreamId, u64)> = a.history()[before..]
        .iter()
        .filter(|e| e.action == Action::SegmentFree)
        .map(|e| (e.stream, e.size))
        .collect();
    assert_eq!(
        freed,
        [
            (S0, 20 * MIB),
            (S0, 30 * MIB),
            (S1, 12 * MIB),
            (S0, 2 * MIB),
            (S1, 2 * MIB),
        ]
    );
    assert_eq!(a.memory_reserved(), 0);
}

// ----- a segment's frames -----------------------------------------------------------------

/// PyTorch keeps the context of the `malloc` that made a segment
/// (`alloc_block`: `context_when_segment_allocated = ctx`, gathered from
/// `context="state"` on) and `memory_snapshot.cpp` writes it as the
/// segment's `frames` (`test_memory_snapshot` checks every segment has the
/// key). A later allocation served from the segment leaves it unchanged;
/// with `context=None` there is none.
#[test]
fn a_segment_carries_the_call_site_of_the_allocation_that_made_it() {
    let (_, a) = sim("expandable_segments:False", 4 * GIB);
    a.record_history_opts(&HistoryOptions::new(100).context(HistoryContext::State));
    let line = line!() + 1;
    let x = a.allocate(3 * MIB, S0).unwrap();
    let y = a.allocate(3 * MIB, S0).unwrap(); // served from x's 20 MiB segment
    let segs = a.snapshot();
    assert_eq!(segs.len(), 1);
    let site = segs[0].site.as_ref().expect("the segment's call site");
    assert_eq!((site.file, site.line), (file!(), line));
    let doc = decode(&a.snapshot_pickle().unwrap());
    let seg = &list(key(&doc, "segments"))[0];
    let frames = list(key(seg, "frames"));
    assert_eq!(frames.len(), 1);
    assert!(string(key(&frames[0], "filename")).ends_with("pytorch_parity_s29.rs"));
    assert_eq!(int(key(&frames[0], "line")), line as u64);
    drop((x, y));
    a.empty_cache().unwrap();
    // No call sites recorded: no frames.
    a.record_history(None);
    a.record_history_opts(&HistoryOptions::new(100).context(HistoryContext::None));
    let z = a.allocate(3 * MIB, S0).unwrap();
    let segs = a.snapshot();
    assert!(segs[0].site.is_none());
    let doc = decode(&a.snapshot_pickle().unwrap());
    assert!(list(key(&list(key(&doc, "segments"))[0], "frames")).is_empty());
    drop(z);
}

// ----- PYTORCH_NO_CUDA_MEMORY_CACHING ----------------------------------------------------

/// The child half of
/// `the_no_caching_environment_variable_turns_caching_off_for_good`, run in
/// a process of its own with `STRATA_NO_MEMORY_CACHING` set (it checks
/// nothing when run without the parent's instructions).
#[test]
#[ignore = "run in a child process by the_no_caching_environment_variable_turns_caching_off_for_good"]
fn child_reads_the_no_caching_environment_variable() {
    let Ok(expect) = std::env::var("STRATA_S29_EXPECT") else {
        return;
    };
    let cpu = strata_alloc::allocator(strata_alloc::Device::Cpu);
    match expect.as_str() {
        "off" => {
            let cpu = cpu.unwrap();
            assert!(!cpu.caching_enabled());
            // PyTorch: forceUncachedAllocator() || !isEnabled().
            strata_alloc::caching_allocator_enable(true);
            assert!(!cpu.caching_enabled());
            let x = cpu.allocate(4096, S0).unwrap();
            assert_eq!(cpu.memory_allocated(), 0);
            drop(x);
        }
        "on" => assert!(cpu.unwrap().caching_enabled()),
        _ => {
            let Err(e) = cpu else {
                panic!("a bad value must be refused")
            };
            let text = e.to_string();
            assert!(text.contains("STRATA_NO_MEMORY_CACHING"), "{text}");
            assert!(text.contains("'yes'"), "{text}");
        }
    }
}

/// PyTorch's `PYTORCH_NO_CUDA_MEMORY_CACHING=1` (`forceUncachedAllocator`,
/// read through `check_env`, which takes `1` and `0`) makes every
/// allocation bypass the cache, whatever `caching_allocator_enable` says.
/// strata's `STRATA_NO_MEMORY_CACHING=1` does the same for the registry's
/// allocators; `0` leaves caching on; another value is a typed error naming
/// the variable (PyTorch warns and ignores it).
#[test]
fn the_no_caching_environment_variable_turns_caching_off_for_good() {
    let exe = std::env::current_exe().unwrap();
    // The child's name in this test binary: its module path without the
    // crate's name, then the function's.
    let path = module_path!();
    let module = path.split_once("::").map_or("", |(_, m)| m);
    let child = if module.is_empty() {
        "child_reads_the_no_caching_environment_variable".to_string()
    } else {
        format!("{module}::child_reads_the_no_caching_environment_variable")
    };
    for (value, expect) in [("1", "off"), ("0", "on"), ("yes", "error")] {
        let out = std::process::Command::new(&exe)
            .args(["--exact", child.as_str(), "--ignored", "--test-threads=1"])
            .env(strata_alloc::NO_CACHING_ENV_VAR, value)
            .env("STRATA_S29_EXPECT", expect)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains("1 passed"),
            "{value}: {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

// ----- enabled="state" keeps a one-entry trace --------------------------------------------

/// Mirrors the end of `TestCudaMallocAsync.test_memory_snapshot`, which
/// records with `_record_memory_history("state", stacks="python")`: after
/// the tensors are freed and the cache emptied,
/// `ss["device_traces"][0][-1]["action"]` is `segment_free` (or
/// `segment_unmap`). `_record_memory_history` keeps `max_entries` only for
/// `enabled="all"` and sets it to 1 otherwise, so the trace holds the
/// latest event; the snapshot's blocks keep their call sites.
#[test]
fn state_recording_keeps_the_latest_event_for_the_snapshot() {
    for (mode, release) in [
        ("expandable_segments:False", "segment_free"),
        ("expandable_segments:True", "segment_unmap"),
    ] {
        let (_, a) = sim(mode, 4 * GIB);
        a.record_history_opts(&HistoryOptions::new(100_000).state_only());
        let unused = a.allocate(310 * 410 * 4, S0).unwrap();
        let x = a.allocate(311 * 411 * 4, S0).unwrap();
        let doc = decode(&a.snapshot_pickle().unwrap());
        let found = list(key(&doc, "segments"))
            .iter()
            .flat_map(|s| list(key(s, "blocks")))
            .find(|b| int(key(b, "requested_size")) == 311 * 411 * 4)
            .expect("x in the snapshot");
        assert_eq!(int(key(found, "address")), x.ptr(), "{mode}");
        assert_eq!(list(key(found, "frames")).len(), 1, "{mode}");
        drop((unused, x));
        a.empty_cache().unwrap();
        let doc = decode(&a.snapshot_pickle().unwrap());
        let trace = list(&list(key(&doc, "device_traces"))[0]);
        assert_eq!(trace.len(), 1, "{mode}");
        assert_eq!(string(key(&trace[0], "action")), release, "{mode}");
    }
}

// ----- hostile inputs around the session's additions -------------------------------------

/// Driver failures on the uncached path are typed errors that leave the
/// books as they were: a failed device allocation hands nothing out and
/// records nothing; a failed device free leaves the allocation live (it can
/// be freed again) and the device's memory used; an injected lack of
/// memory is `UncachedOutOfMemory`. Toggling caching while allocations of
/// both kinds are live keeps every free going where it belongs.
#[test]
fn uncached_driver_failures_change_nothing() {
    let (d, a) = sim("expandable_segments:False", GIB);
    a.set_caching_enabled(false);
    let before = (a.memory_stats(), d.used_bytes());
    d.inject_failure("malloc", 1);
    let e = a.allocate_raw(4096, S0).unwrap_err();
    assert!(matches!(e, strata_alloc::AllocError::Driver { .. }), "{e}");
    assert_eq!((a.memory_stats(), d.used_bytes()), before);
    d.inject_out_of_memory(1);
    let e = a.allocate_raw(4096, S0).unwrap_err();
    assert!(
        matches!(
            e,
            strata_alloc::AllocError::UncachedOutOfMemory {
                requested: 4096,
                ..
            }
        ),
        "{e}"
    );
    assert_eq!((a.memory_stats(), d.used_bytes()), before);
    let x = a.allocate_raw(4096, S0).unwrap();
    d.inject_failure("free", 1);
    assert!(a.free_raw(x).is_err());
    assert_eq!(d.used_bytes(), before.1 + 4096, "still allocated");
    a.free_raw(x).unwrap();
    assert_eq!(d.used_bytes(), before.1);
    assert!(a.free_raw(x).is_err(), "now it is gone");
    // Interleaved toggles from several threads: every free goes back where
    // its allocation came from.
    let a2 = Arc::clone(&a);
    let workers: Vec<_> = (0..4)
        .map(|t| {
            let a = Arc::clone(&a2);
            std::thread::spawn(move || {
                for i in 0..200u64 {
                    if (i + t) % 7 == 0 {
                        a.set_caching_enabled(i % 2 == 0);
                    }
                    let x = a.allocate(512 * (1 + (i % 5)), S0).unwrap();
                    drop(x);
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    a.set_caching_enabled(true);
    a.empty_cache().unwrap();
    assert_eq!(a.memory_allocated(), 0);
    assert_eq!(a.memory_reserved(), 0);
    assert_eq!(d.used_bytes(), before.1);
    a.check_consistency().unwrap();
}

// ----- expandable segment reserves: c10/cuda/test/impl/CUDACachingAllocatorReserveTest.cpp ----

/// Mirrors `ExpandableSegmentReserveTest.StreamReserveClassTagRoundTrip`:
/// an untagged stream has the empty class; a tag reads back, a second one
/// overwrites it, and the empty class clears it.
#[test]
fn a_streams_reserve_class_reads_back() {
    let (_, a) = sim("", 4 * GIB);
    assert_eq!(a.stream_reserve_class(S1), "");
    a.set_stream_reserve_class(S1, "serving");
    assert_eq!(a.stream_reserve_class(S1), "serving");
    a.set_stream_reserve_class(S1, "lrm_sparse");
    assert_eq!(a.stream_reserve_class(S1), "lrm_sparse");
    a.set_stream_reserve_class(S1, "");
    assert_eq!(a.stream_reserve_class(S1), "");
    assert_eq!(a.stream_reserve_class(StreamId(99)), "");
}

/// Mirrors `ExpandableSegmentReserveTest.SetDefaultReserveFractionPrecedence`
/// (and `set_default_reserve_for_class`): an explicit per-class entry of the
/// configuration wins over a code-side default; once a global reserve is
/// configured, a code-side default is a no-op and an unseeded class falls
/// back to the global reserve; with neither, the class takes the code-side
/// fraction, which a later settings string naming only a global reserve
/// does not remove. On a 100 GiB device, seen through the largest single
/// allocation a tagged stream can take.
#[test]
fn a_code_side_default_reserve_yields_to_the_configuration() {
    let total = 100 * GIB;
    let fresh = |conf: &str| {
        let d = Arc::new(SimDriver::new(total, 2 * MIB));
        let a = CachingAllocator::new(d, AllocatorConfig::parse(conf).unwrap());
        a.set_stream_reserve_class(S1, "serving");
        a.set_stream_reserve_class(StreamId(22), "telemetry");
        a
    };
    // The reserve of `stream`: `bytes` fit in one allocation, 2 MiB more do not.
    let reserve_is = |a: &CachingAllocator, stream: StreamId, bytes: u64| {
        let x = a.allocate_raw(bytes, stream).unwrap();
        a.free_raw(x).unwrap();
        a.empty_cache().unwrap();
        let e = a.allocate_raw(bytes + 2 * MIB, stream).unwrap_err();
        assert!(e.to_string().contains("expandable-segment reserve"), "{e}");
    };
    // Explicit per-class entry wins.
    let a = fresh("expandable_segments_reserve_by_class:[serving:0.25]");
    a.set_default_reserve_fraction_for_class("serving", 0.9)
        .unwrap();
    reserve_is(&a, S1, total / 4);
    // A global reserve makes the code-side default a no-op.
    let a = fresh("expandable_segments_reserve:0.5");
    a.set_default_reserve_fraction_for_class("telemetry", 0.9)
        .unwrap();
    assert!(a.config().expandable_segments_reserve_by_class.is_empty());
    reserve_is(&a, StreamId(22), total / 2);
    // Neither: the class takes the code-side fraction, and keeps it when a
    // later string sets only a global reserve.
    let a = fresh("");
    a.set_default_reserve_fraction_for_class("telemetry", 0.125)
        .unwrap();
    reserve_is(&a, StreamId(22), total / 8);
    a.set_allocator_settings("expandable_segments_reserve:0.5")
        .unwrap();
    reserve_is(&a, StreamId(22), total / 8);
    reserve_is(&a, S1, total / 2);
    // Bad arguments: typed errors, nothing changes.
    let before = a.config();
    for (class, f) in [
        ("", 0.5),
        ("a b", 0.5),
        ("ok", 0.0),
        ("ok", -1.0),
        ("ok", f64::NAN),
        ("ok", f64::INFINITY),
    ] {
        let e = a
            .set_default_reserve_fraction_for_class(class, f)
            .unwrap_err();
        assert!(
            e.to_string()
                .contains("expandable_segments_reserve_by_class"),
            "{e}"
        );
    }
    assert_eq!(a.config(), before);
}

// ----- trace trackers: c10/cuda/test/CUDACachingAllocator_test.cpp ------------------------

/// Mirrors `AllocatorTraceTracker.TrackMallocFree`: two trackers attached
/// (one counting `SEGMENT_ALLOC`, one `SEGMENT_FREE`), history off; a
/// 500 MB buffer allocated and dropped makes one segment, and `emptyCache`
/// frees it.
#[test]
fn trace_trackers_see_segment_allocation_and_release() {
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    let (_, a) = sim("expandable_segments:False", 4 * GIB);
    let allocs = Arc::new(AtomicUsize::new(0));
    let frees = Arc::new(AtomicUsize::new(0));
    let (c1, c2) = (Arc::clone(&allocs), Arc::clone(&frees));
    a.attach_trace_tracker(move |e| {
        if e.action == Action::SegmentAlloc {
            c1.fetch_add(1, SeqCst);
        }
    });
    a.attach_trace_tracker(move |e| {
        if e.action == Action::SegmentFree {
            c2.fetch_add(1, SeqCst);
        }
    });
    assert!(!a.history_enabled());
    drop(a.allocate(500 * MIB, S0).unwrap());
    assert_eq!(allocs.load(SeqCst), 1);
    assert_eq!(frees.load(SeqCst), 0);
    a.empty_cache().unwrap();
    assert_eq!(frees.load(SeqCst), 1);
}

/// `record_trace` hands every entry it makes to the trackers, the same
/// entry the history's ring keeps: the trackers see exactly the recorded
/// events (action, address, size, stream), in order, through allocations,
/// a recorded free completed at `empty_cache`, an OOM and a snapshot.
#[test]
fn trace_trackers_see_what_history_records() {
    for mode in MODES {
        let (_, a) = sim(mode, GIB);
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let s = Arc::clone(&seen);
        a.attach_trace_tracker(move |e| {
            s.lock().unwrap().push((e.action, e.addr, e.size, e.stream));
        });
        a.record_history(Some(1000));
        let x = a.allocate(3 * MIB, S0).unwrap();
        let y = a.allocate(1000, S1).unwrap();
        y.record_stream(S0).unwrap();
        drop(y);
        a.allocate(2 * GIB, S1).unwrap_err();
        a.snapshot();
        drop(x);
        a.empty_cache().unwrap();
        let recorded: Vec<_> = a
            .history()
            .iter()
            .map(|e| (e.action, e.addr, e.size, e.stream))
            .collect();
        assert!(recorded.len() >= 9, "{mode}: {recorded:?}");
        assert_eq!(*seen.lock().unwrap(), recorded, "{mode}");
    }
}

/// A tracker runs outside the allocator's lock, so one that calls the
/// allocator (even allocating) neither deadlocks nor recurses: the events
/// its own calls cause are not passed back to it. A panicking tracker's
/// panic reaches the caller and leaves the allocator consistent.
#[test]
fn a_tracker_that_calls_the_allocator_or_panics_is_survived() {
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    let (_, a) = sim("expandable_segments:False", 4 * GIB);
    let calls = Arc::new(AtomicUsize::new(0));
    let c = Arc::clone(&calls);
    let weak = Arc::downgrade(&a);
    a.attach_trace_tracker(move |e| {
        c.fetch_add(1, SeqCst);
        if e.action == Action::Alloc {
            let a = weak.upgrade().unwrap();
            let _ = a.memory_stats();
            drop(a.allocate(4096, S1).unwrap());
        }
    });
    let x = a.allocate(4096, S0).unwrap();
    // segment_alloc, alloc; the tracker's own allocation and free are not
    // passed back.
    assert_eq!(calls.load(SeqCst), 2);
    drop(x);
    assert_eq!(calls.load(SeqCst), 4, "free_requested, free_completed");
    a.clear_trace_trackers();
    a.attach_trace_tracker(|e| {
        if e.action == Action::Alloc {
            panic!("tracker failure");
        }
    });
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        a.allocate(4096, S0).map(|x| x.ptr())
    }));
    assert!(r.is_err());
    a.clear_trace_trackers();
    a.check_consistency().unwrap();
    assert!(a.allocate(4096, S0).is_ok());
}

// ----- a randomised sweep of hostile calls ----------------------------------------------

/// Thousands of calls drawn at random from the allocator's public surface,
/// with arguments at and beyond their edges: sizes from 0 to `u64::MAX`,
/// streams up to `u64::MAX`, fractions from NaN to infinity, good and bad
/// settings strings, stale and foreign handles, caching switched on and
/// off, pools made, entered and dropped, history restarted with every
/// option, snapshots, trackers, reserve classes. No call may panic; a
/// refused call returns a typed error; after every call the books agree
/// with the blocks (`check_consistency`), and the device's used memory is
/// what the allocator holds (reserved plus uncached) once everything is
/// freed and the cache emptied.
#[test]
fn a_random_sweep_of_hostile_calls_keeps_the_books() {
    let cap = GIB;
    let sizes = [
        0,
        1,
        511,
        512,
        513,
        MIB - 1,
        MIB,
        MIB + 1,
        10 * MIB - 1,
        10 * MIB,
        20 * MIB + 1,
        100 * MIB,
        cap / 2,
        cap - 1,
        cap,
        cap + 1,
        u64::MAX / 2,
        (1 << 60) - 1,
        1 << 60,
        u64::MAX,
    ];
    let streams = [S0, S1, StreamId(u64::MAX), StreamId(1 << 40)];
    let fractions = [
        f64::NAN,
        -0.0,
        0.0,
        1e-300,
        0.25,
        0.5,
        1.0,
        1.0 + f64::EPSILON,
        f64::INFINITY,
        -1.0,
    ];
    let settings = [
        "",
        "max_split_size_mb:40",
        "max_split_size_mb:2",
        "garbage_collection_threshold:0.5",
        "garbage_collection_threshold:1.5",
        "roundup_power2_divisions:[64:8,>:2]",
        "roundup_power2_divisions:3",
        "expandable_segments:True",
        "expandable_segments:False",
        "expandable_segments:true",
        "expandable_segments_reserve:0.25",
        "expandable_segments_reserve:1e20G",
        "expandable_segments_reserve:-1",
        "expandable_segments_reserve_by_class:[c:0.1]",
        "throw_on_cudamalloc_oom:True",
        "throw_on_cudamalloc_oom:False",
        "max_split_size_mb:18446744073709551615",
        "no_such_key:1",
        ":,:,:",
        "large_segment_size_mb:11",
    ];
    let actions = [
        Action::Alloc,
        Action::FreeRequested,
        Action::FreeCompleted,
        Action::SegmentAlloc,
        Action::SegmentFree,
        Action::Oom,
        Action::Snapshot,
    ];
    for (seed, mode) in (0..12).map(|i| (i, MODES[i % 2])) {
        let (d, a) = sim(mode, cap);
        let (_, other) = sim(mode, cap);
        let foreign = other.allocate_raw(4096, S0).unwrap();
        let mut rng = Lcg(0x5eed + seed as u64);
        let mut live: Vec<strata_alloc::RawAllocation> = Vec::new();
        let mut dead: Vec<strata_alloc::RawAllocation> = Vec::new();
        let mut pools: Vec<strata_alloc::MemPool> = Vec::new();
        let events = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let (mut ok, mut errs) = (0, 0);
        for step in 0..3000 {
            match rng.next() % 16 {
                0..=4 => {
                    let size = if rng.next().is_multiple_of(4) {
                        rng.pick(&sizes)
                    } else {
                        1 + rng.next() % (30 * MIB)
                    };
                    let stream = rng.pick(&streams);
                    let r = match pools.len() {
                        n if n > 0 && rng.next().is_multiple_of(3) => {
                            let p = &pools[(rng.next() % n as u64) as usize];
                            let _in = p.activate().unwrap();
                            a.allocate_raw(size, stream)
                        }
                        _ => a.allocate_raw(size, stream),
                    };
                    match r {
                        Ok(x) => {
                            ok += 1;
                            live.push(x)
                        }
                        Err(e) => {
                            errs += 1;
                            assert!(
                                e.is_out_of_memory()
                                    || matches!(e, strata_alloc::AllocError::OomRejected { .. }),
                                "step {step}: {e}"
                            )
                        }
                    }
                }
                5 | 6 => {
                    if !live.is_empty() {
                        let i = (rng.next() % live.len() as u64) as usize;
                        let x = live.swap_remove(i);
                        a.free_raw(x).unwrap();
                        // The null allocation of 0 bytes may be freed any
                        // number of times (PyTorch's free of nullptr).
                        if x.ptr() != 0 {
                            dead.push(x);
                        }
                    }
                }
                7 => {
                    let bad = match rng.next() % 2 {
                        0 if !dead.is_empty() => dead[(rng.next() % dead.len() as u64) as usize],
                        _ => foreign,
                    };
                    // A stale handle may coincide with a live reallocation
                    // only if handles were reused; they carry a generation.
                    assert!(
                        a.free_raw(bad).is_err(),
                        "step {step}: {bad:?} caching {}",
                        a.caching_enabled()
                    );
                    assert!(a.record_stream(&bad, S1).is_err(), "step {step}");
                }
                8 => {
                    if !live.is_empty() {
                        let x = live[(rng.next() % live.len() as u64) as usize];
                        a.record_stream(&x, rng.pick(&streams)).unwrap();
                    }
                }
                9 => {
                    let f = rng.pick(&fractions);
                    let before = a.memory_fraction();
                    match a.set_memory_fraction(f) {
                        Ok(()) => assert_eq!(a.memory_fraction(), f),
                        Err(_) => assert_eq!(a.memory_fraction().to_bits(), before.to_bits()),
                    }
                }
                10 => {
                    let s = rng.pick(&settings);
                    let before = a.config();
                    if a.set_allocator_settings(s).is_err() {
                        assert_eq!(a.config(), before, "{s}");
                    }
                }
                11 => {
                    if rng.next().is_multiple_of(2) {
                        d.complete_all_events();
                    }
                    a.empty_cache().unwrap();
                }
                12 => match rng.next() % 4 {
                    0 => pools.push(a.mem_pool(strata_alloc::MemPoolOptions {
                        use_on_oom: rng.next().is_multiple_of(2),
                        no_split: rng.next().is_multiple_of(2),
                    })),
                    1 if !pools.is_empty() => {
                        let i = (rng.next() % pools.len() as u64) as usize;
                        drop(pools.swap_remove(i));
                    }
                    _ => a.set_caching_enabled(!rng.next().is_multiple_of(3)),
                },
                13 => {
                    let n = [0usize, 1, 7, 10_000, usize::MAX][(rng.next() % 5) as usize];
                    let mut o = HistoryOptions::new(n).context(rng.pick(&[
                        HistoryContext::None,
                        HistoryContext::State,
                        HistoryContext::Alloc,
                        HistoryContext::All,
                    ]));
                    if rng.next().is_multiple_of(3) {
                        o = o.state_only();
                    }
                    if rng.next().is_multiple_of(3) {
                        o = o.skip(&[rng.pick(&actions), rng.pick(&actions)]);
                    }
                    a.record_history_opts(&o);
                    if rng.next().is_multiple_of(5) {
                        a.clear_history();
                    }
                }
                14 => {
                    let _ = a.snapshot();
                    let _ = a.snapshot_pickle().unwrap();
                    let _ = a.memory_summary();
                    if rng.next().is_multiple_of(8) {
                        let e = Arc::clone(&events);
                        // A tracker that reads the allocator and makes
                        // (and frees) an allocation of its own.
                        let w = Arc::downgrade(&a);
                        a.attach_trace_tracker(move |t| {
                            e.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                            if let (Some(a), Action::Alloc) = (w.upgrade(), t.action) {
                                let _ = a.memory_stats();
                                let _ = a.allocate_raw(4096, S1).map(|x| a.free_raw(x));
                            }
                        });
                    }
                }
                _ => {
                    let class = rng.pick(&["", "c", "serving", "bad class", "x-y_z"]);
                    a.set_stream_reserve_class(rng.pick(&streams), class);
                    let f = rng.pick(&fractions);
                    let before = a.config();
                    if a.set_default_reserve_fraction_for_class(class, f).is_err() {
                        assert_eq!(a.config(), before);
                    }
                }
            }
            if let Err(e) = a.check_consistency() {
                panic!("{mode} step {step}: {e}");
            }
        }
        for x in live.drain(..) {
            a.free_raw(x).unwrap();
        }
        drop(pools);
        d.complete_all_events();
        a.set_caching_enabled(true);
        a.empty_cache().unwrap();
        a.check_consistency().unwrap();
        assert_eq!(a.memory_allocated(), 0, "{mode}");
        assert_eq!(d.used_bytes(), a.memory_reserved(), "{mode}");
        other.free_raw(foreign).unwrap();
        // The sweep did exercise both outcomes and the trackers.
        assert!(
            ok > 100 && errs > 100,
            "seed {seed}: {ok} allocations, {errs} refused"
        );
        assert!(
            events.load(std::sync::atomic::Ordering::Relaxed) > 0,
            "seed {seed}"
        );
    }
}

// ----- metadata is per thread ---------------------------------------------------------------

/// PyTorch keeps `_set_memory_metadata`'s string per thread
/// (`thread_local std::string DeviceCachingAllocator::user_metadata`, copied
/// into each `TraceEntry` by `record_trace`): the events a thread causes
/// carry its metadata, another thread's events carry that thread's (none
/// here), and `_get_memory_metadata` reads the calling thread's. Trace
/// trackers get the same metadata.
#[test]
fn memory_metadata_belongs_to_the_thread_that_set_it() {
    let (_, a) = sim("expandable_segments:False", 4 * GIB);
    a.record_history(Some(1000));
    let tracked = Arc::new(std::sync::Mutex::new(Vec::new()));
    let t = Arc::clone(&tracked);
    a.attach_trace_tracker(move |e| {
        if e.action == Action::Alloc {
            t.lock().unwrap().push((e.size, e.user_metadata.clone()));
        }
    });
    a.set_memory_metadata("main step");
    assert_eq!(a.memory_metadata(), "main step");
    let x = a.allocate(1000, S0).unwrap();
    let a2 = Arc::clone(&a);
    std::thread::spawn(move || {
        assert_eq!(
            a2.memory_metadata(),
            "",
            "another thread's metadata is its own"
        );
        drop(a2.allocate(2000, S0).unwrap());
        a2.set_memory_metadata("loader");
        drop(a2.allocate(3000, S0).unwrap());
    })
    .join()
    .unwrap();
    let y = a.allocate(4000, S0).unwrap();
    let meta_of = |size: u64| {
        a.history()
            .iter()
            .find(|e| e.action == Action::Alloc && e.size == size)
            .map(|e| e.user_metadata.as_deref().map(str::to_string))
            .unwrap()
    };
    assert_eq!(meta_of(1000).as_deref(), Some("main step"));
    assert_eq!(meta_of(2000), None);
    assert_eq!(meta_of(3000).as_deref(), Some("loader"));
    assert_eq!(meta_of(4000).as_deref(), Some("main step"));
    let seen = tracked.lock().unwrap().clone();
    let want: Vec<(u64, Option<&str>)> = vec![
        (1000, Some("main step")),
        (2000, None),
        (3000, Some("loader")),
        (4000, Some("main step")),
    ];
    assert_eq!(
        seen.iter()
            .map(|(s, m)| (*s, m.as_deref()))
            .collect::<Vec<_>>(),
        want
    );
    a.set_memory_metadata("");
    assert_eq!(a.memory_metadata(), "");
    drop((x, y));
}

// ----- TestMemPool, three more -----------------------------------------------------------------

/// Mirrors `TestMemPool.test_nested_mempool`: 20 MiB tensors (each its own
/// 20 MiB segment) allocated in pool1, then pool2, then pool3, back in
/// pool2, back in pool1: `memory_snapshot(pool.id)` finds 2, 2 and 1
/// segments. Then `test_mempool_empty_cache`: a default-pool tensor and a
/// pool tensor freed and the pool deleted leave the default pool's cached
/// segment in the snapshot (the pool's `emptyCache` touches only the pool).
/// Then `test_mempool_ctx_multithread`: while the main thread is inside
/// `use_mem_pool` (its pool tensor freed), another thread's 1 MiB tensor
/// goes to the default pool: two segments, 2 MiB active in the default pool
/// (its 1 MiB and the main thread's earlier 1 MiB), none in the pool.
#[test]
fn nested_pools_deleted_pools_and_other_threads_as_test_mempool_has_them() {
    for mode in MODES {
        let (_, a) = sim(mode, 8 * GIB);
        let (p1, p2, p3) = (
            a.mem_pool(Default::default()),
            a.mem_pool(Default::default()),
            a.mem_pool(Default::default()),
        );
        let mut data = Vec::new();
        {
            let _g1 = p1.activate().unwrap();
            data.push(a.allocate(20 * MIB, S0).unwrap());
            {
                let _g2 = p2.activate().unwrap();
                data.push(a.allocate(20 * MIB, S0).unwrap());
                {
                    let _g3 = p3.activate().unwrap();
                    data.push(a.allocate(20 * MIB, S0).unwrap());
                }
                data.push(a.allocate(20 * MIB, S0).unwrap());
            }
            data.push(a.allocate(20 * MIB, S0).unwrap());
        }
        let count = |p: &strata_alloc::MemPool| p.snapshot().len();
        assert_eq!((count(&p1), count(&p2), count(&p3)), (2, 2, 1), "{mode}");
        drop(data);
        drop((p1, p2, p3));
        a.empty_cache().unwrap();

        // test_mempool_empty_cache
        let pool = a.mem_pool(Default::default());
        let x = a.allocate(4 * MIB, S0).unwrap();
        let y = {
            let _g = pool.activate().unwrap();
            a.allocate(4 * MIB, S0).unwrap()
        };
        drop((y, x));
        drop(pool);
        let segs = a.snapshot();
        assert!(!segs.is_empty(), "{mode}");
        assert!(segs.iter().all(|s| s.pool_id == (0, 0)), "{mode}");
        a.empty_cache().unwrap();
        assert!(a.snapshot().is_empty(), "{mode}");

        // test_mempool_ctx_multithread (1 MiB tensors of int8)
        let pool = a.mem_pool(Default::default());
        let out1 = a.allocate(MIB, S0).unwrap();
        let segments = {
            let _g = pool.activate().unwrap();
            drop(a.allocate(MIB, S0).unwrap());
            let a2 = Arc::clone(&a);
            std::thread::spawn(move || {
                let out = a2.allocate(MIB, S0).unwrap();
                let s = a2.snapshot();
                drop(out);
                s
            })
            .join()
            .unwrap()
        };
        assert_eq!(segments.len(), 2, "{mode}: {segments:?}");
        for s in &segments {
            let want = if s.pool_id == (0, 0) { 2 * MIB } else { 0 };
            assert_eq!(s.active_size, want, "{mode}: {:?}", s.pool_id);
        }
        drop((out1, pool));
        a.check_consistency().unwrap();
    }
}
