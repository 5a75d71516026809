//! PyTorch's allocator tests, session 40: the exact edges of rules of
//! PyTorch's caching allocator that the earlier files (`pytorch_parity*.rs`,
//! `pytorch_tests_s32.rs` to `_s38.rs`, `pytorch_pinned_parity.rs`,
//! `settings.rs`, `mempool.rs`, `history*.rs`, `hostile_*.rs`) check only
//! away from the edge: where `should_split` starts to split a block (more
//! than 1 MiB left in the large pool, at least 512 bytes in the small one),
//! where `get_allocation_size` moves from a 2 MiB to a 20 MiB to an exact
//! segment, the pool a request rounded by `roundup_power2_divisions` lands
//! in, and garbage collection with reserved memory exactly at its threshold.
//!
//! The PyTorch tests these rules stand under, read for this session
//! (`test/test_cuda.py`: `test_memory_stats`, `test_memory_snapshot`,
//! `test_allocator_settings`, `test_garbage_collect_expandable`,
//! `test_max_split_expandable`, `TestMemPool`; `test/test_cuda_expandable_
//! segments.py`; `c10/test/core/AllocatorConfig_test.cpp`; `c10/cuda/test/
//! impl/CUDACachingAllocatorReserveTest.cpp`), are all mirrored by earlier
//! files; no disagreement with PyTorch was found this session.
//!
//! Each test names the PyTorch source function it follows
//! (`c10/cuda/CUDACachingAllocator.cpp`, `c10/core/AllocatorConfig.cpp`).
//! Expected figures come from PyTorch's rules, worked out in the comments,
//! never from strata's output. All run with `expandable_segments:False`,
//! PyTorch's default, where these rules apply.

use super::common::sim_device;
use strata_alloc::snapshot::BlockState;
use strata_alloc::{CachingAllocator, StatType, StreamId};

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
const S0: StreamId = StreamId::DEFAULT;
const S1: StreamId = StreamId(7);

/// The block sizes of the one segment in the snapshot, in address order,
/// each with whether it is handed out.
fn blocks(a: &CachingAllocator) -> Vec<(u64, bool)> {
    let segs = a.snapshot();
    assert_eq!(segs.len(), 1, "one segment: {segs:?}");
    segs[0]
        .blocks
        .iter()
        .map(|b| (b.size, b.state == BlockState::ActiveAllocated))
        .collect()
}

/// `should_split` for a large-pool block with expandable segments off:
/// `remaining > kSmallSize` (strictly more than 1 MiB left). A 20 MiB
/// segment (the `kLargeBuffer` of a 3 MiB request, freed and merged back
/// whole) serves:
/// - 19 MiB: 1 MiB would be left, not more than 1 MiB, so the block is handed
///   out whole: `allocated_bytes` is the block's 20 MiB (PyTorch's
///   `alloc_found_block` counts `block->size`), `requested_bytes` the
///   caller's 19 MiB, and there is no inactive split piece;
/// - 19 MiB - 512: 1 MiB + 512 would be left, more than 1 MiB, so it splits:
///   `allocated_bytes` 19 MiB - 512, one inactive split piece of 1 MiB + 512.
#[test]
fn a_large_block_splits_only_with_more_than_1_mib_left() {
    let (_, a) = sim_device("expandable_segments:False", 16 * GIB);
    drop(a.allocate(3 * MIB, S0).unwrap());
    assert_eq!(blocks(&a), vec![(20 * MIB, false)]);

    let x = a.allocate(19 * MIB, S0).unwrap();
    let s = a.memory_stats();
    assert_eq!(a.memory_reserved(), 20 * MIB, "no new segment");
    assert_eq!(s.allocated_bytes.all().current as u64, 20 * MIB);
    assert_eq!(
        s.allocated_bytes.get(StatType::LargePool).current as u64,
        20 * MIB
    );
    assert_eq!(s.requested_bytes.all().current as u64, 19 * MIB);
    assert_eq!(s.active_bytes.all().current as u64, 20 * MIB);
    assert_eq!(s.inactive_split.all().current, 0);
    assert_eq!(s.inactive_split_bytes.all().current, 0);
    assert_eq!(blocks(&a), vec![(20 * MIB, true)]);
    drop(x);

    let y = a.allocate(19 * MIB - 512, S0).unwrap();
    let s = a.memory_stats();
    assert_eq!(a.memory_reserved(), 20 * MIB);
    assert_eq!(s.allocated_bytes.all().current as u64, 19 * MIB - 512);
    assert_eq!(s.requested_bytes.all().current as u64, 19 * MIB - 512);
    assert_eq!(s.inactive_split.get(StatType::LargePool).current, 1);
    assert_eq!(s.inactive_split_bytes.all().current as u64, MIB + 512);
    assert_eq!(blocks(&a), vec![(19 * MIB - 512, true), (MIB + 512, false)]);
    drop(y);
    assert_eq!(blocks(&a), vec![(20 * MIB, false)], "merged back");
    assert_eq!(a.memory_stats().inactive_split.all().current, 0);
    a.check_consistency().unwrap();
}

/// `should_split` for a small-pool block: `remaining >= kMinBlockSize` (512
/// bytes or more left). One 2 MiB small segment serves, in turn, 1 MiB (the
/// largest small request: 1 MiB left, split), 1 MiB - 512 (512 bytes left:
/// exactly `kMinBlockSize`, still split) and 512 bytes (nothing left: the
/// last piece whole). Three live blocks tile the segment, no inactive piece,
/// one device allocation.
#[test]
fn a_small_block_splits_with_512_bytes_left() {
    let (d, a) = sim_device("expandable_segments:False", 16 * GIB);
    let x = a.allocate(MIB, S0).unwrap();
    assert_eq!(a.memory_reserved(), 2 * MIB, "1 MiB is a small request");
    let y = a.allocate(MIB - 512, S0).unwrap();
    assert_eq!(
        blocks(&a),
        vec![(MIB, true), (MIB - 512, true), (512, false)]
    );
    let s = a.memory_stats();
    assert_eq!(s.inactive_split.get(StatType::SmallPool).current, 1);
    assert_eq!(s.inactive_split_bytes.all().current, 512);
    let z = a.allocate(1, S0).unwrap();
    assert_eq!(z.ptr(), y.ptr() + MIB - 512, "the last 512 bytes");
    assert_eq!(
        blocks(&a),
        vec![(MIB, true), (MIB - 512, true), (512, true)]
    );
    let s = a.memory_stats();
    assert_eq!(s.inactive_split.all().current, 0);
    assert_eq!(s.inactive_split_bytes.all().current, 0);
    assert_eq!(
        s.allocated_bytes.get(StatType::SmallPool).current as u64,
        2 * MIB
    );
    assert_eq!(s.requested_bytes.all().current as u64, 2 * MIB - 512 + 1);
    assert_eq!(d.call_count("malloc"), 1);
    drop((x, y, z));
    assert_eq!(blocks(&a), vec![(2 * MIB, false)]);
    a.check_consistency().unwrap();
}

/// `get_allocation_size(size)` at its edges, on the rounded size: at most
/// `kSmallSize` (1 MiB) a 2 MiB segment; below `kMinLargeAlloc` (10 MiB) a
/// `kLargeBuffer` (20 MiB) one; from 10 MiB the size rounded up to 2 MiB
/// (`kRoundLarge`). And `round_size` decides the pool: 1 MiB + 1 byte rounds
/// to 1 MiB + 512, a large request.
#[test]
fn segment_sizes_at_the_edges_of_get_allocation_size() {
    for (request, segment) in [
        (MIB, 2 * MIB),
        (MIB + 1, 20 * MIB),
        (10 * MIB - 512, 20 * MIB),
        (10 * MIB - 511, 10 * MIB),
        (10 * MIB, 10 * MIB),
        (10 * MIB + 1, 12 * MIB),
        (12 * MIB, 12 * MIB),
    ] {
        let (_, a) = sim_device("expandable_segments:False", 16 * GIB);
        let x = a.allocate(request, S0).unwrap();
        assert_eq!(a.memory_reserved(), segment, "request {request}");
        let s = a.memory_stats();
        let pool = if request <= MIB {
            StatType::SmallPool
        } else {
            StatType::LargePool
        };
        assert_eq!(
            s.reserved_bytes.get(pool).current as u64,
            segment,
            "{request}"
        );
        assert_eq!(s.segment.get(pool).current, 1, "{request}");
        drop(x);
        a.check_consistency().unwrap();
    }
}

/// `round_size` applies `roundup_power2_divisions` before the pool is
/// chosen (`get_pool(size, stream)` takes the rounded size), and the
/// division count of a size below 2 MiB is interval 0's
/// (`AllocatorConfig::roundup_power2_divisions`: index `log2(size) - 20`
/// clamped at 0). With 4 divisions:
/// - 1 MiB - 1000 bytes: above 512 x 4, between the powers of two 512 KiB
///   and 1 MiB, steps of 128 KiB: 1 MiB, a small request (2 MiB segment);
/// - 1 MiB + 1 byte: steps of 256 KiB above 1 MiB: 1.25 MiB, a large
///   request (20 MiB segment), 1.25 MiB allocated;
/// - 2000 bytes: not above 512 x 4, so plain 512-byte rounding: 2048.
///
/// With `[1:1,2:4]` (interval 0 without rounding, interval 1 from 2 MiB with
/// 4), 1 MiB + 1 byte is plain-rounded to 1 MiB + 512 (still large), and
/// 3 MiB + 1 byte rounds to 3.5 MiB.
#[test]
fn power2_divisions_choose_the_pool_from_the_rounded_size() {
    let (_, a) = sim_device(
        "expandable_segments:False,roundup_power2_divisions:4",
        16 * GIB,
    );
    let small = a.allocate(MIB - 1000, S0).unwrap();
    let s = a.memory_stats();
    assert_eq!(
        s.allocated_bytes.get(StatType::SmallPool).current as u64,
        MIB
    );
    assert_eq!(
        s.reserved_bytes.get(StatType::SmallPool).current as u64,
        2 * MIB
    );
    let large = a.allocate(MIB + 1, S0).unwrap();
    let s = a.memory_stats();
    assert_eq!(
        s.allocated_bytes.get(StatType::LargePool).current as u64,
        MIB + MIB / 4
    );
    assert_eq!(
        s.reserved_bytes.get(StatType::LargePool).current as u64,
        20 * MIB
    );
    let tiny = a.allocate(2000, S0).unwrap();
    assert_eq!(
        a.memory_stats()
            .allocated_bytes
            .get(StatType::SmallPool)
            .current as u64,
        MIB + 2048
    );
    assert_eq!(
        a.memory_stats().requested_bytes.all().current as u64,
        2 * MIB + 1 - 1000 + 2000
    );
    drop((small, large, tiny));
    a.check_consistency().unwrap();

    let (_, a) = sim_device(
        "expandable_segments:False,roundup_power2_divisions:[1:1,2:4]",
        16 * GIB,
    );
    let x = a.allocate(MIB + 1, S0).unwrap();
    assert_eq!(a.memory_allocated(), MIB + 512);
    let y = a.allocate(3 * MIB + 1, S0).unwrap();
    assert_eq!(a.memory_allocated(), MIB + 512 + 3 * MIB + MIB / 2);
    assert_eq!(
        a.memory_reserved(),
        20 * MIB,
        "both from one 20 MiB segment"
    );
    drop((x, y));
    a.check_consistency().unwrap();
}

/// `garbage_collect_cached_blocks` returns at once when
/// `total_allocated_memory <= gc_threshold` (threshold x allowed memory):
/// reserved memory exactly at the threshold collects nothing. Under a
/// 100 MiB limit (fraction 100/1024 of 1 GiB, exact in binary) and
/// `garbage_collection_threshold:0.5` (50 MiB):
/// - 30 and 20 MiB segments cached on one stream (50 MiB reserved, exactly
///   the threshold); a 12 MiB request of another stream misses, collects
///   nothing (50 <= 50), and takes a new 12 MiB segment: 62 MiB reserved;
/// - a 14 MiB request of that stream misses again; now 62 > 50, the target
///   is 12 MiB, the two cached segments have the same age (their frees came
///   between the same lookups), the mean, so both go (a full pass, not
///   stopping at the target): 12 MiB left, then 26 MiB with the new segment.
#[test]
fn garbage_collection_spares_reserved_memory_exactly_at_the_threshold() {
    let (d, a) = sim_device(
        "expandable_segments:False,garbage_collection_threshold:0.5",
        GIB,
    );
    a.set_memory_fraction(100.0 / 1024.0).unwrap();
    drop((
        a.allocate(30 * MIB, S0).unwrap(),
        a.allocate(20 * MIB, S0).unwrap(),
    ));
    assert_eq!(a.memory_reserved(), 50 * MIB);

    let x = a.allocate(12 * MIB, S1).unwrap();
    assert_eq!(a.memory_reserved(), 62 * MIB, "nothing collected at 50 MiB");
    assert_eq!(a.memory_stats().num_device_free, 0);
    assert_eq!(d.call_count("free"), 0);

    let y = a.allocate(14 * MIB, S1).unwrap();
    let s = a.memory_stats();
    assert_eq!(s.num_device_free, 2, "both cached segments collected");
    assert_eq!(s.num_alloc_retries, 0, "collection, not the full release");
    assert_eq!(a.memory_reserved(), 26 * MIB);
    assert_eq!(s.segment.all().current, 2);
    drop((x, y));
    a.check_consistency().unwrap();
}
