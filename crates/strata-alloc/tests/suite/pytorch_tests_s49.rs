//! PyTorch's allocator tests, session 49.
//!
//! Mirrors behaviours of PyTorch's allocator tests (`test/test_cuda.py`,
//! `test/test_cuda_expandable_segments.py`, which reruns `test_cuda.py` with
//! `expandable_segments:True`) and the rules of
//! `c10/cuda/CUDACachingAllocator.cpp` they stand on, that the earlier files
//! do not pin: the event counters of `memory_stats` (`num_sync_all_streams`,
//! `num_device_alloc`, `num_device_free`), the statistics and trace entries
//! of expandable segments (`segment_map`/`segment_unmap`, no `segment.*`, no
//! `inactive_split.*`), page-wise unmapping in `empty_cache`, and the
//! segment counts of `TestMemPool`'s limited-memory test (its nested test
//! is mirrored in `pytorch_parity_s29.rs`).
//!
//! Expected figures come from PyTorch's source, worked out in each test's
//! comments, never from strata's output.
//!
//! Three tests are ignored as differences from PyTorch, all three deliberate
//! and documented choices of strata (docs/allocator.md, the pinned module):
//! large-pool expandable pages of the driver's granularity (2 MiB) instead
//! of 20 MiB, private pools that never use expandable segments, and pinned
//! size classes of an eighth of a power of two instead of powers of two.
//! They pin what PyTorch's own tests would observe.

use super::common::{sim_device, stat};
use strata_alloc::history::{Action, TraceEntry};
use strata_alloc::snapshot::BlockState;
use strata_alloc::{MemPoolOptions, StreamId};

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
const S0: StreamId = StreamId::DEFAULT;
const S1: StreamId = StreamId(7);

fn actions(h: &[TraceEntry]) -> Vec<Action> {
    h.iter().map(|e| e.action).collect()
}

// ---------------------------------------------------------------------------
// memory_stats event counters
// ---------------------------------------------------------------------------

/// `test_cuda.py::test_memory_stats` resets and reads the scalar counters of
/// `memory_stats`. PyTorch's `release_cached_blocks` (what `empty_cache`
/// runs) begins with `synchronize_and_free_events`, whose first statement is
/// `stats.num_sync_all_streams++` — unconditionally, even with no event
/// outstanding and nothing cached. So every `empty_cache` adds exactly 1.
#[test]
fn every_empty_cache_counts_one_sync_of_all_streams() {
    let (_, a) = sim_device("expandable_segments:False", 16 * GIB);
    assert_eq!(stat(&a, "num_sync_all_streams"), 0);
    a.empty_cache().unwrap();
    assert_eq!(stat(&a, "num_sync_all_streams"), 1);
    let x = a.allocate(KIB, S0).unwrap();
    a.empty_cache().unwrap();
    assert_eq!(stat(&a, "num_sync_all_streams"), 2);
    drop(x);
    a.empty_cache().unwrap();
    assert_eq!(stat(&a, "num_sync_all_streams"), 3);
    a.reset_accumulated_memory_stats();
    assert_eq!(stat(&a, "num_sync_all_streams"), 0);
}

/// `num_device_alloc`/`num_device_free` (`test_memory_stats`' counters):
/// PyTorch's `alloc_block` adds 1 per successful `cudaMalloc`,
/// `release_block` 1 per `cudaFree`. A 1 KiB request (a 2 MiB small
/// segment), a 3 MiB one (a 20 MiB large segment), a cache hit (no call),
/// then `empty_cache` releasing both: 2 and 2.
#[test]
fn device_alloc_and_free_count_cuda_malloc_and_cuda_free() {
    let (_, a) = sim_device("expandable_segments:False", 16 * GIB);
    let x = a.allocate(KIB, S0).unwrap();
    let y = a.allocate(3 * MIB, S0).unwrap();
    assert_eq!(stat(&a, "num_device_alloc"), 2);
    drop(y);
    let y = a.allocate(3 * MIB, S0).unwrap();
    assert_eq!(stat(&a, "num_device_alloc"), 2, "a cache hit calls nothing");
    drop((x, y));
    assert_eq!(stat(&a, "num_device_free"), 0);
    a.empty_cache().unwrap();
    assert_eq!(stat(&a, "num_device_free"), 2);
    assert_eq!(stat(&a, "segment.all.current"), 0);
    assert_eq!(stat(&a, "segment.all.allocated"), 2);
    assert_eq!(stat(&a, "segment.all.freed"), 2);
}

/// An OOM (`test_cuda.py::test_out_of_memory_retry`, `test_raises_oom`):
/// PyTorch's `malloc` falls through to `release_cached_blocks` (one
/// `num_sync_all_streams`) and `alloc_block(retry=true)` (one
/// `num_alloc_retries`) before raising (one `num_ooms`); a failed
/// `cudaMalloc` adds no `num_device_alloc`. The cached free segment is given
/// back on the way (one `num_device_free`).
#[test]
fn an_oom_syncs_once_retries_once_and_counts_no_device_alloc() {
    let (_, a) = sim_device("expandable_segments:False", 8 * GIB);
    let keep = a.allocate(5 * GIB, S0).unwrap();
    drop(a.allocate(KIB, S0).unwrap());
    let before_alloc = stat(&a, "num_device_alloc");
    assert_eq!(before_alloc, 2);
    let e = a.allocate(5 * GIB, S0).unwrap_err();
    assert!(e.is_out_of_memory(), "{e}");
    assert_eq!(stat(&a, "num_ooms"), 1);
    assert_eq!(stat(&a, "num_alloc_retries"), 1);
    assert_eq!(stat(&a, "num_sync_all_streams"), 1);
    assert_eq!(stat(&a, "num_device_alloc"), before_alloc);
    assert_eq!(stat(&a, "num_device_free"), 1, "the cached 2 MiB segment");
    drop(keep);
    // test_out_of_memory_retry: after the free the same request succeeds.
    let b = a.allocate(5 * GIB, S0).unwrap();
    drop(b);
}

// ---------------------------------------------------------------------------
// expandable segments (test_cuda_expandable_segments.py reruns test_cuda.py)
// ---------------------------------------------------------------------------

/// `map_block` adds the mapped bytes to `reserved_bytes` and 1 to
/// `num_device_alloc`, but nothing to `segment.*` (only `alloc_block`'s
/// cudaMalloc path does). A 3 MiB request maps one 20 MiB page
/// (`large_segment_size`); a 1 KiB request one 2 MiB small page.
#[test]
fn expandable_maps_count_reserved_bytes_and_device_allocs_not_segments() {
    let (_, a) = sim_device("expandable_segments:True", 16 * GIB);
    let x = a.allocate(3 * MIB, S0).unwrap();
    assert_eq!(
        stat(&a, "reserved_bytes.large_pool.current") as u64,
        20 * MIB
    );
    assert_eq!(stat(&a, "segment.all.current"), 0);
    assert_eq!(stat(&a, "segment.all.allocated"), 0);
    assert_eq!(stat(&a, "num_device_alloc"), 1);
    let y = a.allocate(KIB, S0).unwrap();
    assert_eq!(
        stat(&a, "reserved_bytes.small_pool.current") as u64,
        2 * MIB
    );
    assert_eq!(stat(&a, "num_device_alloc"), 2);
    assert_eq!(stat(&a, "segment.all.current"), 0);
    assert_eq!(stat(&a, "oversize_segments.current"), 0);
    drop((x, y));
    a.empty_cache().unwrap();
    assert_eq!(stat(&a, "reserved_bytes.all.current"), 0);
    assert_eq!(stat(&a, "num_device_free"), 2, "one unmap per pool");
    assert_eq!(stat(&a, "segment.all.freed"), 0);
}

/// `free_block` and `alloc_found_block` leave `inactive_split*` alone for
/// blocks of expandable segments ("we simply just exclude expandable
/// segments from inactive_split"). Two 4 MiB blocks in one 20 MiB page, the
/// first freed: a free piece between two blocks, yet no inactive split.
#[test]
fn expandable_blocks_never_count_as_inactive_split() {
    let (_, a) = sim_device("expandable_segments:True", 16 * GIB);
    let x = a.allocate(4 * MIB, S0).unwrap();
    let y = a.allocate(4 * MIB, S0).unwrap();
    assert_eq!(stat(&a, "reserved_bytes.all.current") as u64, 20 * MIB);
    assert_eq!(stat(&a, "inactive_split.all.current"), 0);
    assert_eq!(stat(&a, "inactive_split_bytes.all.current"), 0);
    drop(x);
    assert_eq!(stat(&a, "inactive_split.all.current"), 0);
    assert_eq!(stat(&a, "inactive_split_bytes.all.current"), 0);
    assert_eq!(stat(&a, "inactive_split.all.allocated"), 0);
    let small: Vec<_> = (0..4).map(|_| a.allocate(600 * KIB, S0).unwrap()).collect();
    drop(small);
    assert_eq!(stat(&a, "inactive_split_bytes.all.allocated"), 0);
    drop(y);
}

/// `test_memory_snapshot` under expandable segments
/// (`test_cuda_expandable_segments.py`): the trace of the first allocation
/// in a fresh expandable segment is `segment_map` then `alloc` (PyTorch's
/// `map_block` records `SEGMENT_MAP`; no `SEGMENT_ALLOC` is ever recorded
/// for an expandable segment), and after the free and `empty_cache` the last
/// action is `segment_unmap` (the test accepts `segment_free` or
/// `segment_unmap`; with expandable segments only the latter occurs).
#[test]
fn expandable_trace_maps_then_allocates_and_ends_with_an_unmap() {
    let (_, a) = sim_device("expandable_segments:True", 16 * GIB);
    a.record_history(Some(100_000));
    let x = a.allocate(311 * 411 * 4, S0).unwrap();
    let h = a.history();
    assert_eq!(actions(&h), vec![Action::SegmentMap, Action::Alloc]);
    assert_eq!(h[0].size, 2 * MIB, "one small page");
    assert_eq!(h[1].size, 311 * 411 * 4);
    assert_eq!(h[1].addr, x.ptr());
    drop(x);
    a.empty_cache().unwrap();
    let h = a.history();
    assert!(!actions(&h).contains(&Action::SegmentAlloc));
    assert!(!actions(&h).contains(&Action::SegmentFree));
    let last = h.last().unwrap();
    assert_eq!(last.action, Action::SegmentUnmap);
    assert_eq!(last.size, 2 * MIB);
}

/// `release_cached_blocks` on an expandable segment unmaps only the pages
/// wholly inside free blocks (`unmap_block` rounds the free block's start up
/// and its end down to the page size). A 30 MiB block maps pages 0 and 1
/// (40 MiB); a 5 MiB block follows it in page 1. With the 30 MiB one freed,
/// `empty_cache` unmaps page 0 (one call: `num_device_free` +1) and keeps
/// page 1, whose snapshot segment then holds the free 10 MiB, the 5 MiB
/// block and the free 5 MiB tail.
///
/// strata maps pages of the driver's granularity (2 MiB) in the large pool
/// too (docs/allocator.md, "Pages are the driver's granularity in both
/// pools"): the 30 MiB block maps 30 MiB, the 5 MiB one grows the segment
/// again (by a 20 MiB chunk: 50 MiB reserved), and `empty_cache` keeps 6 MiB.
#[test]
#[ignore = "differs from PyTorch by design (docs/allocator.md, \"Pages are the driver's granularity in both pools\"): large-pool expandable pages are 2 MiB, not PyTorch's 20 MiB (kLargeBuffer / large_segment_size): a 30 MiB request maps 30 MiB, not 40 MiB; empty_cache unmaps at 2 MiB granularity"]
fn empty_cache_unmaps_only_whole_free_pages_of_an_expandable_segment() {
    let (_, a) = sim_device("expandable_segments:True", 16 * GIB);
    let x = a.allocate(30 * MIB, S0).unwrap();
    let y = a.allocate(5 * MIB, S0).unwrap();
    let base = x.ptr();
    assert_eq!(y.ptr(), base + 30 * MIB);
    assert_eq!(a.memory_reserved(), 40 * MIB);
    drop(x);
    a.empty_cache().unwrap();
    assert_eq!(a.memory_reserved(), 20 * MIB);
    assert_eq!(stat(&a, "num_device_free"), 1);
    let segs = a.snapshot();
    assert_eq!(segs.len(), 1, "{segs:?}");
    assert!(segs[0].is_expandable);
    assert_eq!(segs[0].address, base + 20 * MIB);
    assert_eq!(segs[0].total_size, 20 * MIB);
    let blocks: Vec<_> = segs[0]
        .blocks
        .iter()
        .map(|b| (b.address - base, b.size, b.state))
        .collect();
    assert_eq!(
        blocks,
        vec![
            (20 * MIB, 10 * MIB, BlockState::Inactive),
            (30 * MIB, 5 * MIB, BlockState::ActiveAllocated),
            (35 * MIB, 5 * MIB, BlockState::Inactive),
        ]
    );
    // The lowest-address run of free and unmapped space that fits comes
    // first (`find_expandable_block`): a 25 MiB request maps page 0 back and
    // starts at the segment's base, merging with the free 10 MiB after it.
    let z = a.allocate(25 * MIB, S0).unwrap();
    assert_eq!(z.ptr(), base);
    assert_eq!(a.memory_reserved(), 40 * MIB);
    drop((y, z));
}

/// Expandable segments are per stream (`get_expandable_segment` keys them
/// by stream): a request on another stream opens a segment of its own,
/// reported as a separate `is_expandable` segment with its stream, and
/// each `segment_map` trace entry carries its segment's stream.
#[test]
fn each_stream_gets_an_expandable_segment_of_its_own() {
    let (_, a) = sim_device("expandable_segments:True", 16 * GIB);
    a.record_history(Some(100_000));
    let x = a.allocate(4 * MIB, S0).unwrap();
    let y = a.allocate(4 * MIB, S1).unwrap();
    let maps: Vec<_> = a
        .history()
        .iter()
        .filter(|e| e.action == Action::SegmentMap)
        .map(|e| e.stream)
        .collect();
    assert_eq!(
        maps,
        vec![S0, S1],
        "SEGMENT_MAP carries the segment's stream"
    );
    let segs = a.snapshot();
    assert_eq!(segs.len(), 2, "{segs:?}");
    assert!(segs.iter().all(|s| s.is_expandable));
    let mut streams: Vec<_> = segs.iter().map(|s| s.stream).collect();
    streams.sort_by_key(|s| s.0);
    assert_eq!(streams, vec![S0, S1]);
    // A free block of one stream's segment is not handed to another stream
    // (`get_free_block` looks up `(stream, size)`).
    let xp = x.ptr();
    drop(x);
    let z = a.allocate(4 * MIB, S1).unwrap();
    assert_ne!(z.ptr(), xp);
    let w = a.allocate(4 * MIB, S0).unwrap();
    assert_eq!(w.ptr(), xp, "the same stream takes it back");
    drop((y, z, w));
}

/// `test_allocate_in_thread_to_pool` expects 2 segments in the graph pool
/// with expandable segments and 4 without: with them, the pool's
/// `LARGE_BUFFER` (20 MiB) requests of one stream all land in the pool's one
/// expandable segment, mapped as one contiguous range. Here: a pool with two
/// live 20 MiB blocks and one more made and freed is one snapshot segment
/// with expandable segments on, three without.
///
/// strata gives private pools ordinary segments even with expandable
/// segments on (docs/allocator.md, "a private pool's segments are ordinary
/// segments"), so the pool holds three 20 MiB segments in both modes. PyTorch
/// uses expandable segments in every pool without a user allocator
/// (`alloc_block`: `expandable_segments() && !owner_PrivatePool->allocator()`),
/// which is also why `test_mempool_expandable` needs a pool *with* a dummy
/// allocator to see one non-expandable segment.
#[test]
#[ignore = "differs from PyTorch by design (docs/allocator.md, \"a private pool's segments are ordinary segments\"): a private pool never uses expandable segments; PyTorch's does (test_allocate_in_thread_to_pool expects 2 segments with expandable segments, 4 without)"]
fn a_pools_large_buffers_share_one_expandable_segment() {
    for (conf, want) in [
        ("expandable_segments:True", 1),
        ("expandable_segments:False", 3),
    ] {
        let (_, a) = sim_device(conf, 16 * GIB);
        let pool = a.mem_pool(MemPoolOptions::default());
        let (p, q) = {
            let _g = pool.activate().unwrap();
            let p = a.allocate(20 * MIB, S0).unwrap();
            let q = a.allocate(20 * MIB, S0).unwrap();
            let r = a.allocate(20 * MIB, S0).unwrap();
            drop(r);
            (p, q)
        };
        let segs = pool.snapshot();
        assert_eq!(segs.len(), want, "{conf}: {segs:?}");
        let expandable = conf.ends_with("True");
        assert!(segs.iter().all(|s| s.is_expandable == expandable), "{conf}");
        drop((p, q));
    }
}

// ---------------------------------------------------------------------------
// TestMemPool
// ---------------------------------------------------------------------------

/// `TestMemPool::test_mempool_limited_memory_with_allocator`: 80 MiB
/// allowed; 40 MiB in a plain pool (`a`) and 40 MiB in a `use_on_oom` pool
/// (`b`); a 40 MiB default request fails; with both freed a 30 MiB default
/// request takes `b`'s block (`try_mempool_fallback`), a second one fails
/// (the plain pool is never borrowed), `c` lands at `b`'s address, and a
/// later 20 MiB request inside the `use_on_oom` pool lands there too.
#[test]
fn test_mempool_limited_memory_with_allocator() {
    let (_, a) = sim_device("expandable_segments:False", 8 * GIB);
    let plain = a.mem_pool(MemPoolOptions::default());
    let on_oom = a.mem_pool(MemPoolOptions {
        use_on_oom: true,
        no_split: false,
    });
    a.set_memory_fraction((80 * MIB) as f64 / (8 * GIB) as f64)
        .unwrap();
    let x = {
        let _g = plain.activate().unwrap();
        a.allocate(40 * MIB, S0).unwrap()
    };
    let y = {
        let _g = on_oom.activate().unwrap();
        a.allocate(40 * MIB, S0).unwrap()
    };
    let b_ptr = y.ptr();
    assert!(a.allocate(40 * MIB, S0).unwrap_err().is_out_of_memory());
    drop((x, y));
    let c = a.allocate(30 * MIB, S0).unwrap();
    assert_eq!(c.ptr(), b_ptr);
    assert!(a.allocate(30 * MIB, S0).unwrap_err().is_out_of_memory());
    drop(c);
    let e = {
        let _g = on_oom.activate().unwrap();
        a.allocate(20 * MIB, S0).unwrap()
    };
    assert_eq!(e.ptr(), b_ptr);
    drop(e);
}

// ---------------------------------------------------------------------------
// test_cuda.py tests rerun with expandable segments
// (test_cuda_expandable_segments.py)
// ---------------------------------------------------------------------------

/// `test_cuda.py::test_memory_stats` with `expandable_segments:True`: a
/// 1 KiB tensor (`torch.randn(256)`) adds 1024 to `active_bytes.all.current`
/// and nothing to `.freed`; after the free and `empty_cache` (which unmaps
/// the small page) the current value is back and `.freed` is 1024; after
/// `reset_peak_memory_stats` the peaks equal the values read at the start.
#[test]
fn test_memory_stats_with_expandable_segments() {
    let (_, a) = sim_device("expandable_segments:True", 16 * GIB);
    a.empty_cache().unwrap();
    a.reset_peak_memory_stats();
    a.reset_accumulated_memory_stats();
    let prev_allocated = a.memory_allocated();
    let prev_reserved = a.memory_reserved();
    let prev_max_allocated = a.max_memory_allocated();
    let prev_max_reserved = a.max_memory_reserved();
    assert_eq!(prev_allocated, prev_max_allocated);
    assert_eq!(prev_reserved, prev_max_reserved);
    let prev_active = stat(&a, "active_bytes.all.current");
    let tmp = a.allocate(1024, S0).unwrap();
    assert_eq!(stat(&a, "active_bytes.all.current"), 1024 + prev_active);
    assert_eq!(stat(&a, "active_bytes.all.freed"), 0);
    drop(tmp);
    a.empty_cache().unwrap();
    assert_eq!(stat(&a, "active_bytes.all.current"), prev_active);
    assert_eq!(stat(&a, "active_bytes.all.freed"), 1024);
    assert_eq!(a.memory_reserved(), 0, "the small page is unmapped");
    a.reset_peak_memory_stats();
    assert_eq!(a.max_memory_allocated(), prev_max_allocated);
    assert_eq!(a.max_memory_reserved(), prev_max_reserved);
}

/// `test_cuda.py::test_set_per_process_memory_fraction` with expandable
/// segments: with a fraction of 0.5, `int(total * 0.499) -
/// max_memory_reserved()` bytes can be allocated (PyTorch maps
/// ceil(8174 MiB / 20 MiB) pages = 8180 MiB, plus the small 2 MiB page,
/// under the 8 GiB allowed), and `int(total * 0.5)` bytes raise an error
/// matching "out of memory"; the tensor made before still works.
#[test]
fn test_set_per_process_memory_fraction_with_expandable_segments() {
    let total = 16 * GIB;
    let (_, a) = sim_device("expandable_segments:True", total);
    let tensor = a.allocate(4096, S0).unwrap();
    a.empty_cache().unwrap();
    a.set_memory_fraction(0.5).unwrap();
    let application = (total as f64 * 0.499) as u64 - a.max_memory_reserved();
    let tmp = a.allocate(application, S0).unwrap();
    drop(tmp);
    a.empty_cache().unwrap();
    let e = a.allocate(total / 2, S0).unwrap_err();
    assert!(e.is_out_of_memory(), "{e}");
    assert!(e.to_string().contains("out of memory"), "{e}");
    assert_eq!(a.memory_allocated(), tensor.size());
    drop(tensor);
}

/// `test_cuda.py::test_allocator_settings` with expandable segments: block
/// sizes follow `round_size` whatever the segment kind (an expandable block
/// splits at 512 bytes, so `active_bytes.all.allocated` grows by the
/// rounded size). 84 MiB: plain 84 MiB; `roundup_power2_divisions:4` 96 MiB
/// (64 + 2 * 16); a re-parse without the key resets it; the list
/// `[64:8,128:2,256:2,512:2,1024:1,>:1]` gives 88 MiB (64 + 3 * 8) and, for
/// 400 MiB, 512 MiB (2 divisions of [256, 512)). `requested_bytes` counts the
/// caller's 84 MiB. The bad strings of the test are refused.
#[test]
fn test_allocator_settings_with_expandable_segments() {
    fn power2_div(size: u64, div: u64) -> u64 {
        let mut pow2 = 1;
        while pow2 < size {
            pow2 *= 2;
        }
        if pow2 == size {
            return pow2;
        }
        let step = pow2 / 2 / div;
        let mut ret = pow2 / 2;
        while ret < size {
            ret += step;
        }
        ret
    }
    let key = "active_bytes.all.allocated";
    let nbytes = 4 * 21 * MIB;
    let nbytes_big = 4 * 100 * MIB;
    let (_, a) = sim_device("expandable_segments:True", 16 * GIB);
    a.set_allocator_settings("expandable_segments:True")
        .unwrap();
    let start = stat(&a, key);
    let _x = a.allocate(nbytes, S0).unwrap();
    let reg = stat(&a, key);
    let start_requested = stat(&a, "requested_bytes.all.allocated");
    a.set_allocator_settings("expandable_segments:True,roundup_power2_divisions:4")
        .unwrap();
    let _y = a.allocate(nbytes, S0).unwrap();
    let pow2_div4 = stat(&a, key);
    let cur_requested = stat(&a, "requested_bytes.all.allocated");
    assert_eq!((reg - start) as u64, nbytes);
    assert_eq!((pow2_div4 - reg) as u64, power2_div(nbytes, 4));
    assert_eq!(power2_div(nbytes, 4), 96 * MIB);
    assert_eq!((cur_requested - start_requested) as u64, nbytes);

    a.set_allocator_settings("expandable_segments:True,garbage_collection_threshold:0.5")
        .unwrap();
    a.set_allocator_settings(
        "expandable_segments:True,garbage_collection_threshold:0.5,max_split_size_mb:40",
    )
    .unwrap();
    a.empty_cache().unwrap();
    let start = stat(&a, key);
    let _z = a.allocate(nbytes, S0).unwrap();
    assert_eq!(
        (stat(&a, key) - start) as u64,
        nbytes,
        "divisions were reset"
    );

    a.empty_cache().unwrap();
    a.set_allocator_settings(
        "expandable_segments:True,garbage_collection_threshold:0.5,\
         roundup_power2_divisions:[64:8,128:2,256:2,512:2,1024:1,>:1]",
    )
    .unwrap();
    let start = stat(&a, key);
    let _w = a.allocate(nbytes, S0).unwrap();
    assert_eq!((stat(&a, key) - start) as u64, power2_div(nbytes, 8));
    assert_eq!(power2_div(nbytes, 8), 88 * MIB);
    a.empty_cache().unwrap();
    let start = stat(&a, key);
    let _v = a.allocate(nbytes_big, S0).unwrap();
    assert_eq!((stat(&a, key) - start) as u64, power2_div(nbytes_big, 2));
    assert_eq!(power2_div(nbytes_big, 2), 512 * MIB);

    a.empty_cache().unwrap();
    a.set_allocator_settings("expandable_segments:True,release_lock_on_cudamalloc:True")
        .unwrap();
    let start = stat(&a, key);
    let _u = a.allocate(nbytes, S0).unwrap();
    assert_eq!((stat(&a, key) - start) as u64, nbytes);

    for bad in [
        "foo:1,bar:2",
        "garbage_collection_threshold:1.2",
        "max_split_size_mb:2",
        "release_lock_on_cudamalloc:none",
        "pinned_use_cuda_host_register:none",
        "pinned_num_register_threads:none",
        "pinned_num_register_threads:1024",
    ] {
        assert!(a.set_allocator_settings(bad).is_err(), "{bad}");
    }
    a.check_consistency().unwrap();
}

/// `test_cuda.py::TestCudaMallocAsync::test_memory_snapshot` with expandable
/// segments: the 2 * 311 * 411 * 4-byte temporary maps a 2 MiB small page
/// and is freed; `unused` (310 * 410 * 4, rounded to 508 416) takes the
/// start of the page and `x` (311 * 411 * 4) is the second block, right
/// after it (best fit in the page's free remainder); the snapshot's block of requested size 311 * 411 * 4 is at
/// `x`'s address; a thousand 512-byte tensors freed in random order tile
/// into the same page and merge back; after the frees and `empty_cache`
/// the last trace action is `segment_unmap`.
#[test]
fn test_memory_snapshot_with_expandable_segments() {
    let (_, a) = sim_device("expandable_segments:True", 16 * GIB);
    a.empty_cache().unwrap();
    a.record_history(Some(100_000));
    drop(a.allocate(2 * 311 * 411 * 4, S0).unwrap());
    let unused = a.allocate(310 * 410 * 4, S0).unwrap();
    let x = a.allocate(311 * 411 * 4, S0).unwrap();
    assert_eq!(x.ptr(), unused.ptr() + 508_416);
    let mut tensors: Vec<_> = (0..1000).map(|_| a.allocate(512, S0).unwrap()).collect();
    let mut seed = 123u64;
    while !tensors.is_empty() {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let i = (seed >> 33) as usize % tensors.len();
        drop(tensors.swap_remove(i));
    }
    drop(a.allocate(128 * 5 * 4, S0).unwrap());
    let segs = a.snapshot();
    let found: Vec<_> = segs
        .iter()
        .flat_map(|s| s.blocks.iter())
        .filter(|b| b.requested_size == 311 * 411 * 4)
        .collect();
    assert_eq!(found.len(), 1, "{segs:?}");
    assert_eq!(found[0].address, x.ptr());
    assert_eq!(segs.len(), 1, "one small page: {segs:?}");
    assert_eq!(segs[0].segment_type, "small");
    assert_eq!(segs[0].total_size, 2 * MIB);
    drop((unused, x));
    a.empty_cache().unwrap();
    // PyTorch's `_snapshot()` reads the trace before the segments (whose
    // reading records the `snapshot` entry), so read the history first.
    let h = a.history();
    assert_eq!(h.last().unwrap().action, Action::SegmentUnmap);
    assert!(a.snapshot().is_empty());
}

/// `test_out_of_memory_retry` / `test_raises_oom` with expandable segments:
/// a 5 GiB block is live on an 8 GiB device and a 1 KiB block's small page
/// is cached. Another 5 GiB request cannot be mapped; PyTorch's `malloc`
/// then runs `release_cached_blocks` (one `num_sync_all_streams`, the free
/// small page unmapped: one `num_device_free`, one `segment_unmap` trace
/// entry), retries (one `num_alloc_retries`) and raises (one `num_ooms`,
/// one `oom` entry); the failed map counts no `num_device_alloc`. What stays reserved is
/// the live block's pages, 5 GiB, with no `segment.*`. Once the first block
/// is freed the request succeeds.
#[test]
fn an_oom_with_expandable_segments_unmaps_the_free_pages_first() {
    let (_, a) = sim_device("expandable_segments:True", 8 * GIB);
    let keep = a.allocate(5 * GIB, S0).unwrap();
    drop(a.allocate(KIB, S0).unwrap());
    a.reset_accumulated_memory_stats();
    a.record_history(Some(100_000));
    let e = a.allocate(5 * GIB, S0).unwrap_err();
    assert!(e.is_out_of_memory(), "{e}");
    assert_eq!(stat(&a, "num_ooms"), 1);
    assert_eq!(stat(&a, "num_alloc_retries"), 1);
    assert_eq!(stat(&a, "num_sync_all_streams"), 1);
    // A failed map adds nothing (`map_block` counts only what it mapped);
    // the one unmap is the small page's.
    assert_eq!(stat(&a, "num_device_alloc"), 0);
    assert_eq!(stat(&a, "num_device_free"), 1);
    // Trace: the release's SEGMENT_UNMAP, then the OOM entry.
    let h = a.history();
    assert_eq!(actions(&h), vec![Action::SegmentUnmap, Action::Oom]);
    assert_eq!(h[0].size, 2 * MIB);
    assert_eq!(stat(&a, "reserved_bytes.small_pool.current"), 0);
    assert_eq!(a.memory_reserved(), 5 * GIB);
    assert_eq!(stat(&a, "segment.all.current"), 0);
    drop(keep);
    let b = a.allocate(5 * GIB, S0).unwrap();
    drop(b);
    a.check_consistency().unwrap();
}

/// `test_cuda.py::test_cachingAllocator_raw_alloc` with expandable
/// segments: a 1 MiB `caching_allocator_alloc` adds exactly 1 MiB to
/// `requested_bytes.all.allocated`.
#[test]
fn test_caching_allocator_raw_alloc_with_expandable_segments() {
    let (_, a) = sim_device("expandable_segments:True", 16 * GIB);
    a.reset_accumulated_memory_stats();
    let start = stat(&a, "requested_bytes.all.allocated");
    let raw = a.allocate_raw(MIB, S0).unwrap();
    let finish = stat(&a, "requested_bytes.all.allocated");
    a.free_raw(raw).unwrap();
    assert_eq!((finish - start) as u64, MIB);
    assert_eq!(stat(&a, "requested_bytes.all.current"), 0);
}

/// `empty_cache` with a `record_stream` free pending, expandable segments
/// on (`test_cuda.py::test_record_stream` rerun by
/// `test_cuda_expandable_segments.py`, and `release_cached_blocks`):
/// `synchronize_and_free_events` completes the pending free first, so the
/// block's pages are free and unmapped in the same call; nothing stays
/// reserved and `active_bytes` is back to 0. The trace has the events in
/// that order.
#[test]
fn empty_cache_completes_a_pending_free_then_unmaps_its_pages() {
    let (_, a) = sim_device("expandable_segments:True", 16 * GIB);
    a.record_history(Some(100_000));
    let x = a.allocate(4 * MIB, S0).unwrap();
    x.record_stream(S1).unwrap();
    drop(x);
    assert_eq!(stat(&a, "active_bytes.all.current") as u64, 4 * MIB);
    assert_eq!(stat(&a, "allocated_bytes.all.current"), 0);
    a.empty_cache().unwrap();
    assert_eq!(stat(&a, "active_bytes.all.current"), 0);
    assert_eq!(stat(&a, "requested_bytes.all.current"), 0);
    assert_eq!(a.memory_reserved(), 0);
    assert_eq!(stat(&a, "num_sync_all_streams"), 1);
    // malloc: SEGMENT_MAP, ALLOC; free: FREE_REQUESTED; empty_cache:
    // FREE_COMPLETED (synchronize_and_free_events), then SEGMENT_UNMAP
    // (release_blocks).
    assert_eq!(
        actions(&a.history()),
        vec![
            Action::SegmentMap,
            Action::Alloc,
            Action::FreeRequested,
            Action::FreeCompleted,
            Action::SegmentUnmap
        ]
    );
    assert!(a.snapshot().is_empty());
}

/// `TestMemPool::test_mempool_ctx_multithread` with expandable segments: one
/// thread allocates 1 MiB in the default pools, then 1 MiB (freed at once)
/// inside `use_mem_pool(pool)`; while it is still inside, another thread
/// allocates 1 MiB. That one goes to the default pools (the context is the
/// first thread's), so the snapshot has 2 segments: the default small one
/// with 2 MiB active (both 1 MiB blocks share its 2 MiB page) and the pool's
/// with nothing active.
#[test]
fn test_mempool_ctx_multithread_with_expandable_segments() {
    use std::sync::mpsc;
    let (_, a) = sim_device("expandable_segments:True", 16 * GIB);
    a.empty_cache().unwrap();
    assert!(a.snapshot().is_empty());
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let (done_tx, done_rx) = mpsc::channel::<Vec<strata_alloc::snapshot::SegmentSnapshot>>();
    let segments = std::thread::scope(|sc| {
        let a1 = a.clone();
        let main = sc.spawn(move || {
            let pool = a1.mem_pool(MemPoolOptions::default());
            let out1 = a1.allocate(MIB, S0).unwrap();
            let g = pool.activate().unwrap();
            drop(a1.allocate(MIB, S0).unwrap());
            go_tx.send(()).unwrap();
            let segs = done_rx.recv().unwrap();
            drop(g);
            drop(out1);
            (segs, pool.id())
        });
        let a2 = a.clone();
        sc.spawn(move || {
            go_rx.recv().unwrap();
            let out = a2.allocate(MIB, S0).unwrap();
            done_tx.send(a2.snapshot()).unwrap();
            drop(out);
        });
        main.join().unwrap()
    });
    let (segs, pool_id) = segments;
    assert_eq!(segs.len(), 2, "{segs:?}");
    let mut active = std::collections::BTreeMap::new();
    for s in &segs {
        *active.entry(s.pool_id).or_insert(0u64) += s.active_size;
    }
    assert_eq!(active.get(&(0, 0)), Some(&(2 * MIB)));
    assert_eq!(active.get(&pool_id), Some(&0));
}

/// `test_cuda.py::test_host_memory_stats` asserts PyTorch's pinned block
/// sizes: `torch.ones(10 * 1024, pin_memory=True)` (40 KiB) counts
/// `alloc1_aligned * 1024 * 4` = 64 KiB in `allocated_bytes` and
/// `active_bytes`, the 80 KiB tensor 128 KiB (`CachingHostAllocator`
/// rounds every request up to a power of two, `c10::llvm::PowerOf2Ceil`).
///
/// strata's pinned size classes are eight per power of two
/// (`pinned::size_class`, documented in the pinned module): 40 KiB and
/// 80 KiB blocks. `pytorch_pinned_parity.rs::host_memory_stats_track_two_live_tensors`
/// pins strata's figures; this test keeps PyTorch's.
#[test]
#[ignore = "differs from PyTorch by design (pinned::size_class, pinned at strata's figures by pytorch_pinned_parity.rs): pinned blocks are rounded to eighths of a power of two (40 KiB, 80 KiB), not to the next power of two (64 KiB, 128 KiB) as test_host_memory_stats expects"]
fn test_host_memory_stats_counts_power_of_two_blocks() {
    use std::sync::Arc;
    use strata_alloc::pinned::{PinnedAllocator, SimPinnedBackend};
    let b = Arc::new(SimPinnedBackend::new(None));
    let a = PinnedAllocator::new(Arc::clone(&b));
    let t1 = a.allocate(10 * KIB * 4).unwrap();
    let m = a.stats().to_map();
    assert_eq!(m["allocated_bytes.current"] as u64, 64 * KIB);
    assert_eq!(m["active_bytes.current"] as u64, 64 * KIB);
    let t2 = a.allocate(20 * KIB * 4).unwrap();
    let m = a.stats().to_map();
    assert_eq!(m["allocated_bytes.current"] as u64, 192 * KIB);
    assert_eq!(m["active_bytes.peak"] as u64, 192 * KIB);
    drop((t1, t2));
}

/// `test_cpp_memory_snapshot_pickle` / `_dump_snapshot` with expandable
/// segments: the pickled segment of a 1 KiB tensor's small page says
/// `is_expandable: True`, `segment_type: "small"`, `total_size` 2 MiB; the
/// next snapshot's trace names the actions as PyTorch's pickler does
/// (`segment_map`, `alloc`, `snapshot` — the first snapshot, recorded after
/// its own trace was copied — `free_requested`, `free_completed`,
/// `segment_unmap`), and no segment is left.
#[test]
fn the_pickled_trace_of_expandable_segments_names_map_and_unmap() {
    use super::common::{decode, int, key, list, string};
    let (_, a) = sim_device("expandable_segments:True", 16 * GIB);
    a.record_history(Some(100_000));
    let x = a.allocate(KIB, S0).unwrap();
    let doc = decode(&a.snapshot_pickle().unwrap());
    let segs = list(key(&doc, "segments"));
    assert_eq!(segs.len(), 1);
    assert_eq!(
        key(&segs[0], "is_expandable"),
        &serde_pickle::Value::Bool(true)
    );
    assert_eq!(string(key(&segs[0], "segment_type")), "small");
    assert_eq!(int(key(&segs[0], "total_size")), 2 * MIB);
    drop(x);
    a.empty_cache().unwrap();
    let doc = decode(&a.snapshot_pickle().unwrap());
    let traces = list(key(&doc, "device_traces"));
    let acts: Vec<&str> = list(&traces[0])
        .iter()
        .map(|e| string(key(e, "action")))
        .collect();
    assert_eq!(
        acts,
        [
            "segment_map",
            "alloc",
            "snapshot",
            "free_requested",
            "free_completed",
            "segment_unmap"
        ]
    );
    assert!(list(key(&doc, "segments")).is_empty());
}

/// `TestCudaMallocAsync::test_memory_plots_metadata` with expandable
/// segments: with `_set_memory_metadata("metadata test")` in force, every
/// event of the trace — here `segment_map`, `alloc`, `free_requested`,
/// `free_completed` and `empty_cache`'s `segment_unmap` — has
/// `user_metadata == "metadata test"` (PyTorch's `record_trace` stamps every
/// entry with the thread's metadata), for each context.
#[test]
fn test_memory_plots_metadata_with_expandable_segments() {
    use strata_alloc::{HistoryContext, HistoryOptions};
    for context in [
        HistoryContext::State,
        HistoryContext::Alloc,
        HistoryContext::All,
    ] {
        let (_, a) = sim_device("expandable_segments:True", 16 * GIB);
        a.set_memory_metadata("metadata test");
        a.record_history_opts(&HistoryOptions::new(1000).context(context));
        drop(a.allocate(3 * 4 * 4, S0).unwrap());
        a.empty_cache().unwrap();
        a.set_memory_metadata("");
        let h = a.history();
        assert_eq!(
            actions(&h),
            vec![
                Action::SegmentMap,
                Action::Alloc,
                Action::FreeRequested,
                Action::FreeCompleted,
                Action::SegmentUnmap
            ],
            "{context:?}"
        );
        for e in &h {
            assert_eq!(
                e.user_metadata.as_deref(),
                Some("metadata test"),
                "{context:?}: {e:?}"
            );
        }
    }
}
