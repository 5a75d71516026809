//! PyTorch's allocator tests, session 56.
//!
//! Read for this session: `test/test_cuda.py` (`TestCuda`'s memory tests,
//! `test_allocator_settings`, `test_allocator_backend`,
//! `test_cachingAllocator_raw_alloc`, `test_raises_oom`, `test_notifies_oom`,
//! `test_allocator_fuzz`, `TestMemPool`, `TestBlockStateAbsorption`),
//! `c10/cuda/CUDACachingAllocator.cpp` (`malloc`, `alloc_found_block`,
//! `free`, `free_block`, `alloc_block`, `release_available_cached_blocks`,
//! `release_cached_blocks`, `snapshot`, `setMemoryFraction`,
//! `getMemoryFraction`, `getStats` and the `DeviceCachingAllocator`
//! constructor), `torch/csrc/cuda/memory_snapshot.cpp`
//! (`_memory_snapshot_pickled`, `_record_memory_history`) and
//! `torch/csrc/cuda/Module.cpp`'s `_cuda_memoryStats`. The behaviours these
//! stand on are pinned by the earlier files (`pytorch_parity*.rs`,
//! `pytorch_tests_s32.rs` to `_s55.rs`, `pytorch_pinned_parity.rs`,
//! `settings.rs`, `mempool.rs`, `history*.rs`); this file adds:
//!
//! * `torch.cuda.get_allocator_backend()`, which strata lacked
//!   (`strata_alloc::get_allocator_backend`, added this session): always
//!   `"native"`, as PyTorch's default, since `backend:cudaMallocAsync` (what
//!   `test_allocator_backend` sets) is refused by strata's configuration.
//!
//! Four differences from PyTorch, found this session and kept: the tests pin
//! strata's figure and state PyTorch's (worked out from its source) in
//! their messages:
//!
//! * **Requested size of an inactive block in a snapshot.** PyTorch's
//!   `snapshot()` copies every block's `requested_size`, and `free_block`
//!   never clears it, so a freed block shows the size last asked for it
//!   (merged with its free neighbours, it keeps its own). strata reports 0
//!   for an inactive block (`BlockSnapshot::requested_size`), so that the
//!   blocks' requested sizes add up to `requested_bytes` at every moment.
//! * **The `max_split_size` statistic after a new settings string.**
//!   PyTorch sets `stats.max_split_size` once, in the
//!   `DeviceCachingAllocator` constructor, and `getStats` returns it as it
//!   is: `_set_allocator_settings("max_split_size_mb:40")` after the device
//!   is initialised changes the rule (a 50 MiB block is oversize) but not
//!   `memory_stats()["max_split_size"]`. strata's figure is the limit in
//!   force (`pytorch_parity.rs`, `allocator_settings_are_reparsed_in_place`,
//!   pins it).
//! * **`get_per_process_memory_fraction` reads the limit back.** PyTorch's
//!   `getMemoryFraction` returns `allowed_memory_maximum / totalGlobalMem`,
//!   the limit in whole bytes divided by the capacity: 0.1 of 1 GiB reads
//!   back as 107374182 / 2^30, just under 0.1. strata returns the fraction
//!   as set (`test_get_per_process_memory_fraction` compares with a
//!   tolerance, so both pass it).
//! * **Private pools in the out-of-memory message.** PyTorch's message adds
//!   the free cached blocks of private pools to the memory "allocated by
//!   PyTorch" ("with P allocated in private pools (e.g., CUDA Graphs)") and
//!   takes them out of the "reserved but unallocated" figure. strata's
//!   figures are the allocated bytes and the rest of the reserved bytes
//!   (`OutOfMemory::allocated`, `reserved_unallocated`); its free-block lines
//!   name the pool of each cached block.
//!
//! Expected figures come from PyTorch's source, worked out in each test's
//! comments, never from strata's output.

use super::common::{decode, int, key, list, sim_device, stat, string};
use strata_alloc::{AllocError, AllocatorConfig, ConfigError, MemPoolOptions, StreamId};

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
const S0: StreamId = StreamId::DEFAULT;

// ---------------------------------------------------------------------------
// get_allocator_backend
// ---------------------------------------------------------------------------

/// `torch.cuda.get_allocator_backend()` returns the `backend` the allocator
/// settings chose, `"native"` by default. `test_allocator_backend` starts a
/// process with `backend:cudaMallocAsync` and expects `"cudaMallocAsync"`;
/// strata has only the native allocator, so that string is refused (a typed
/// `BadValue` naming the key, on a live allocator too, which keeps its
/// configuration) and the backend stays `"native"`. `backend:native` is
/// accepted, as PyTorch accepts it.
#[test]
fn test_allocator_backend_is_native_and_cuda_malloc_async_is_refused() {
    assert_eq!(strata_alloc::get_allocator_backend(), "native");
    assert!(AllocatorConfig::parse("backend:native").is_ok());
    let (_, a) = sim_device("backend:native,max_split_size_mb:20", GIB);
    let before = a.config();
    for s in [
        "backend:cudaMallocAsync",
        "max_split_size_mb:20,backend:cudaMallocAsync",
    ] {
        match AllocatorConfig::parse(s) {
            Err(ConfigError::BadValue { key, value, .. }) => {
                assert_eq!((key, value.as_str()), ("backend", "cudaMallocAsync"), "{s}")
            }
            other => panic!("{s}: {other:?}"),
        }
        let e = a.set_allocator_settings(s).unwrap_err();
        assert!(matches!(e, AllocError::Config(_)), "{s}: {e:?}");
        assert_eq!(a.config(), before, "{s}");
    }
    assert_eq!(strata_alloc::get_allocator_backend(), "native");
}

// ---------------------------------------------------------------------------
// Differences kept (strata's figure pinned, PyTorch's in the message)
// ---------------------------------------------------------------------------

/// PyTorch, one 1000-byte request freed: `round_size` 1024, a small-pool
/// miss, `alloc_block` makes a 2 MiB segment whose `Block` has
/// `requested_size` 0; `alloc_found_block` splits it (2 MiB − 1024 left,
/// at least 512), the new front block gets `requested_size = 1000` and the
/// original `Block` becomes the remainder. `free` → `free_block` merges the
/// remainder into the freed block (`try_merge_blocks(block, next)`: the
/// freed block is the one kept), which keeps `requested_size` 1000. So
/// `memory_snapshot()` has one segment (`requested_size` 0: only active
/// blocks count there) with one inactive 2 MiB block whose
/// `requested_size` is 1000, in the segment list and in the pickle.
///
/// strata differs on purpose (`BlockSnapshot::requested_size`): an inactive
/// block reports 0, so that the blocks' requested sizes add up to
/// `requested_bytes` at every moment; this test pins strata's figure and the
/// rest of PyTorch's picture.
#[test]
fn an_inactive_block_reports_no_requested_size_unlike_pytorchs_1000() {
    let (_, a) = sim_device("expandable_segments:False", GIB);
    drop(a.allocate(1000, S0).unwrap());
    let segs = a.snapshot();
    assert_eq!(segs.len(), 1);
    assert_eq!((segs[0].total_size, segs[0].requested_size), (2 * MIB, 0));
    assert_eq!(segs[0].blocks.len(), 1);
    assert_eq!(segs[0].blocks[0].size, 2 * MIB);
    assert_eq!(segs[0].blocks[0].requested_size, 0, "PyTorch: 1000");
    let doc = decode(&a.snapshot_pickle().unwrap());
    let seg = &list(key(&doc, "segments"))[0];
    let block = &list(key(seg, "blocks"))[0];
    assert_eq!(string(key(block, "state")), "inactive");
    assert_eq!(int(key(block, "requested_size")), 0, "PyTorch: 1000");
}

/// PyTorch's `DeviceCachingAllocator` constructor sets
/// `stats.max_split_size` from the configuration of that moment, and
/// nothing else writes it (`getStats` copies `stats`; `_cuda_memoryStats`
/// reports `stats.max_split_size`). An allocator made with the defaults
/// reports -1 (`SIZE_MAX` cast to `int64_t`); after
/// `_set_allocator_settings("max_split_size_mb:40")` the rule applies (a
/// 50 MiB request gets a 50 MiB segment, ≥ 40 MiB: one oversize allocation
/// and one oversize segment) but the statistic still reads -1. The other
/// way round, an allocator made with 40 MiB keeps reporting 40 MiB after
/// the limit is taken away by `_set_allocator_settings("")`.
///
/// strata differs on purpose: its statistic is the limit in force (PyTorch's
/// figures in the messages), which is what a reader of the statistics asks.
#[test]
fn the_max_split_size_statistic_follows_the_limit_in_force_unlike_pytorch() {
    let (_, a) = sim_device("expandable_segments:False", GIB);
    assert_eq!(stat(&a, "max_split_size"), -1);
    a.set_allocator_settings("max_split_size_mb:40").unwrap();
    let x = a.allocate(50 * MIB, S0).unwrap();
    assert_eq!(stat(&a, "oversize_allocations.current"), 1);
    assert_eq!(stat(&a, "oversize_segments.current"), 1);
    assert_eq!(stat(&a, "max_split_size"), (40 * MIB) as i64, "PyTorch: -1");
    drop(x);

    let (_, a) = sim_device("expandable_segments:False,max_split_size_mb:40", GIB);
    assert_eq!(stat(&a, "max_split_size"), (40 * MIB) as i64);
    a.set_allocator_settings("").unwrap();
    assert_eq!(stat(&a, "max_split_size"), -1, "PyTorch: 40 MiB");
}

/// PyTorch's `setMemoryFraction(0.1)` on a 1 GiB device keeps
/// `allowed_memory_maximum = static_cast<size_t>(0.1 * 2^30)` =
/// 107374182 (the product is 107374182.4, so rounding it, as
/// pytorch/pytorch#179444 proposes, gives the same); `getMemoryFraction`
/// returns `107374182.0 / 1073741824.0`, just under 0.1. A fraction of 1
/// clears the limit and reads back as 1.0; 0 keeps a limit of 0 bytes and
/// reads back as 0.0.
///
/// strata differs on purpose: `memory_fraction()` returns the fraction as
/// set; the byte limit is PyTorch's, 107374182 bytes: a 102 MiB segment
/// fits under it, a 104 MiB one (what any larger request rounds to) does
/// not.
#[test]
fn the_memory_fraction_reads_back_as_set_with_pytorchs_byte_limit() {
    let (_, a) = sim_device("expandable_segments:False", GIB);
    a.set_memory_fraction(0.1).unwrap();
    assert_eq!(a.memory_fraction(), 0.1, "PyTorch: 107374182 / 2^30");
    assert!(a.allocate(102 * MIB + 1, S0).is_err());
    drop(a.allocate(102 * MIB, S0).unwrap());
    a.set_memory_fraction(1.0).unwrap();
    assert_eq!(a.memory_fraction(), 1.0);
    a.set_memory_fraction(0.0).unwrap();
    assert_eq!(a.memory_fraction(), 0.0);
}

/// PyTorch's out-of-memory message on a 1 GiB device: a private pool (alive)
/// with a freed 100 MiB block cached in its own 100 MiB segment, 200 MiB
/// allocated in the default pool, and a 900 MiB request. The request misses,
/// `alloc_block` fails (300 + 900 MiB > 1 GiB), the full release frees
/// nothing (the pool is in use, the default pool caches nothing) and the
/// retry fails. `allocated_in_private_pools` sums the pool's free cached
/// blocks, 100 MiB, and the message reads "Of the allocated memory 300.00
/// MiB is allocated by PyTorch, with 100.00 MiB allocated in private pools
/// (e.g., CUDA Graphs), and 0 bytes is reserved by PyTorch but
/// unallocated." (allocated 200 MiB + 100 MiB; reserved 300 MiB − 200 MiB −
/// 100 MiB; `format_size(0)` is "0 bytes").
///
/// strata differs on purpose: its figures are the allocated bytes (200 MiB)
/// and the rest of the reserved bytes (100 MiB, a private pool's free blocks
/// being memory reserved and not allocated).
#[test]
fn the_oom_message_counts_a_private_pools_cached_blocks_as_reserved_unlike_pytorch() {
    let (_, a) = sim_device("expandable_segments:False", GIB);
    let pool = a.mem_pool(MemPoolOptions::default());
    {
        let _route = pool.activate().unwrap();
        drop(a.allocate(100 * MIB, S0).unwrap());
    }
    let live = a.allocate(200 * MIB, S0).unwrap();
    assert_eq!(a.memory_reserved(), 300 * MIB);
    let e = a.allocate(900 * MIB, S0).unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains("200.00 MiB is allocated by strata and 100.00 MiB is reserved by strata but unallocated"),
        "PyTorch: 300.00 MiB allocated, 100.00 MiB of it in private pools, 0 bytes reserved but unallocated; strata: {text}"
    );
    drop((live, pool));
}
