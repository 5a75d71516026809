//! Parity with PyTorch's allocator, session 31.
//!
//! Each test mirrors a behaviour of PyTorch's caching allocator exercised by
//! its test suite (`test/test_cuda.py`, which `test_cuda_expandable_segments.py`
//! runs again with expandable segments on; `test/test_cuda_multigpu.py`) or
//! fixed by its source (`c10/cuda/CUDACachingAllocator.cpp`), named in the
//! doc comment. The expected figures are worked out from PyTorch's semantics,
//! never taken from strata's output.

mod common;

use common::{sim_device as sim, stat};
use strata_alloc::{MemPoolOptions, StreamId};

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
const S0: StreamId = StreamId::DEFAULT;

// ----- should_split follows the expandable_segments setting ----------------------

/// PyTorch's `should_split(block, size)` asks the *setting*, not the block:
///
/// ```text
/// if (block->pool->is_small || CUDAAllocatorConfig::expandable_segments())
///   return remaining >= kMinBlockSize;
/// else
///   return (size < max_split_size) && (remaining > kSmallSize);
/// ```
///
/// So once `expandable_segments:True` is set (as `test_max_split_expandable`
/// and `test_garbage_collect_expandable` do on a live allocator), an ordinary
/// large-pool block cached from before is split whenever 512 bytes or more
/// would be left, not only when more than 1 MiB would be.
///
/// A 19 MiB request gets a 20 MiB segment (`get_allocation_size`: at least
/// 10 MiB, rounded up to 2 MiB). With expandable segments off, 1 MiB would be
/// left, not more than 1 MiB: the block is handed out whole, 20 MiB
/// allocated. Freed and asked for again after the switch, the same cached
/// block is the best fit, and now it is split: 19 MiB allocated, and the
/// 1 MiB left is a free piece of a split ordinary segment (`inactive_split`
/// 1, `inactive_split_bytes` 1 MiB; only expandable blocks are left out of
/// those statistics).
#[test]
fn a_cached_ordinary_block_splits_by_the_setting_once_expandable_segments_are_on() {
    let (_, a) = sim("expandable_segments:False", 16 * GIB);
    let x = a.allocate(19 * MIB, S0).unwrap();
    assert_eq!(stat(&a, "allocated_bytes.all.current") as u64, 20 * MIB);
    assert_eq!(stat(&a, "inactive_split.all.current"), 0);
    let ptr = x.ptr();
    drop(x);

    a.set_allocator_settings("expandable_segments:True")
        .unwrap();
    let y = a.allocate(19 * MIB, S0).unwrap();
    assert_eq!(y.ptr(), ptr, "the cached block is the best fit");
    assert_eq!(stat(&a, "allocated_bytes.all.current") as u64, 19 * MIB);
    assert_eq!(stat(&a, "active_bytes.all.current") as u64, 19 * MIB);
    assert_eq!(stat(&a, "inactive_split.all.current"), 1);
    assert_eq!(stat(&a, "inactive_split_bytes.all.current") as u64, MIB);
    assert_eq!(
        stat(&a, "inactive_split_bytes.large_pool.current") as u64,
        MIB
    );
    assert_eq!(stat(&a, "segment.all.current"), 1);
    assert_eq!(stat(&a, "reserved_bytes.all.current") as u64, 20 * MIB);
    drop(y);
    // Freed, the two pieces merge again: nothing is inactive-split.
    assert_eq!(stat(&a, "inactive_split.all.current"), 0);
    assert_eq!(stat(&a, "inactive_split_bytes.all.current"), 0);
    a.check_consistency().unwrap();
}

/// The same rule with `max_split_size_mb` set: with expandable segments on,
/// `should_split` never asks `max_split_size`, so an oversize request that
/// takes a larger cached ordinary block (within `max_non_split_rounding`,
/// 20 MiB) splits it.
///
/// `max_split_size_mb:40`, expandable segments off: 50 MiB gets a 50 MiB
/// segment (oversize). Freed; then, with expandable segments on and the same
/// limit, 45 MiB (oversize too) may take it (50 < 45 + 20): the block is
/// split, 45 MiB allocated, 5 MiB left as an inactive split piece. Both the
/// allocation (45 MiB) and the segment (50 MiB) are at least 40 MiB:
/// `oversize_allocations` and `oversize_segments` are 1.
#[test]
fn an_oversize_request_splits_a_cached_block_once_expandable_segments_are_on() {
    let (_, a) = sim("expandable_segments:False,max_split_size_mb:40", 16 * GIB);
    let x = a.allocate(50 * MIB, S0).unwrap();
    assert_eq!(stat(&a, "allocated_bytes.all.current") as u64, 50 * MIB);
    let ptr = x.ptr();
    drop(x);

    a.set_allocator_settings("expandable_segments:True,max_split_size_mb:40")
        .unwrap();
    let y = a.allocate(45 * MIB, S0).unwrap();
    assert_eq!(y.ptr(), ptr);
    assert_eq!(stat(&a, "allocated_bytes.all.current") as u64, 45 * MIB);
    assert_eq!(stat(&a, "inactive_split.all.current"), 1);
    assert_eq!(stat(&a, "inactive_split_bytes.all.current") as u64, 5 * MIB);
    assert_eq!(stat(&a, "oversize_allocations.current"), 1);
    assert_eq!(stat(&a, "oversize_segments.current"), 1);
    drop(y);
    assert_eq!(stat(&a, "inactive_split.all.current"), 0);
    assert_eq!(stat(&a, "oversize_allocations.current"), 0);
    a.check_consistency().unwrap();
}

/// A private pool's segments are ordinary segments (in strata always; in
/// PyTorch when the pool has its own allocator, as `test_mempool_expandable`
/// has it), and `should_split` still follows the setting: with expandable
/// segments on, a 19 MiB request in the pool takes a 20 MiB segment and is
/// split from it (19 MiB allocated, a 1 MiB free piece); with them off it is
/// handed out whole (20 MiB). A `no_split` pool never splits.
#[test]
fn a_private_pools_blocks_split_by_the_setting() {
    for (conf, allocated, inactive) in [
        ("expandable_segments:True", 19 * MIB, 1),
        ("expandable_segments:False", 20 * MIB, 0),
    ] {
        let (_, a) = sim(conf, 16 * GIB);
        let pool = a.mem_pool(MemPoolOptions::default());
        let x = {
            let _g = pool.activate();
            a.allocate(19 * MIB, S0).unwrap()
        };
        let segs = pool.snapshot();
        assert_eq!(segs.len(), 1, "{conf}");
        assert_eq!(segs[0].total_size, 20 * MIB, "{conf}");
        assert!(!segs[0].is_expandable, "{conf}");
        assert_eq!(
            stat(&a, "allocated_bytes.all.current") as u64,
            allocated,
            "{conf}"
        );
        assert_eq!(stat(&a, "inactive_split.all.current"), inactive, "{conf}");
        drop(x);

        let whole = a.mem_pool(MemPoolOptions {
            no_split: true,
            ..Default::default()
        });
        let y = {
            let _g = whole.activate();
            a.allocate(19 * MIB, S0).unwrap()
        };
        assert_eq!(
            stat(&a, "allocated_bytes.all.current") as u64,
            20 * MIB,
            "{conf}: no_split hands it out whole"
        );
        drop(y);
        a.check_consistency().unwrap();
    }
}
