//! PyTorch's allocator tests, session 54.
//!
//! Read for this session: `test/test_cuda.py`'s memory tests
//! (`test_memory_stats`, `test_set_per_process_memory_fraction`,
//! `test_allocator_settings`, `test_memory_snapshot*`, `test_max_split_*`,
//! `test_garbage_collect*`, `test_pinned_memory*`, `test_cachingAllocator_
//! raw_alloc`, `test_mem_get_info`, `test_record_stream`), PyTorch 2.15's
//! `torch/cuda/memory.py` and the headers its wheel ships
//! (`c10/core/AllocatorConfig.h`, `c10/core/Allocator.h`'s `DurationStat` and
//! `format_size`, `ATen/core/CachingHostAllocator.h`), and
//! `c10/cuda/CUDACachingAllocator.cpp`'s `get_free_block`, `should_split`,
//! `alloc_found_block` and `cacheInfo`. Nearly every behaviour these stand on
//! is pinned by the earlier files (`pytorch_parity*.rs`,
//! `pytorch_tests_s32.rs` to `_s53.rs`, the PyTorch models of
//! `pytorch_parity_s31.rs` and `pytorch_tests_s36.rs`, `settings.rs`); this
//! file adds the exact edges left:
//!
//! * `get_free_block`'s bound on reusing a larger oversize block, `(*it)->
//!   size >= p.size() + max_non_split_rounding_size` refuses it: exactly at
//!   the bound the request gets a new segment, 512 bytes above it the cached
//!   block is handed out whole (`should_split` never splits a request at or
//!   over `max_split_size`), and `allocated_bytes` counts the block.
//! * The same request under the limit with expandable segments on and off:
//!   off, the 24 MiB segment of a 23 MiB request is not split (1 MiB left is
//!   not more than `kSmallSize`), so the block is oversize and a second such
//!   request may not reuse it; on, `should_split` splits anything of 512
//!   bytes or more, so nothing is oversize and the freed block is reused.
//!
//! * `cache_info` is PyTorch's `cacheInfo`: called with 0 (as cuDNN's
//!   workspace sizing calls it) it starts from the device's free memory
//!   (`cudaMemGetInfo`) and takes the larger of that and every cached block;
//!   `largest_free_block` stays the largest cached block (0 when none).
//!
//! Expected figures come from PyTorch's source, worked out in each test's
//! comments, never from strata's output.

use super::common::{sim_device, stat};
use strata_alloc::StreamId;

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
const S0: StreamId = StreamId::DEFAULT;

// ---------------------------------------------------------------------------
// max_non_split_rounding: the exact bound
// ---------------------------------------------------------------------------

/// `get_free_block` (`c10/cuda/CUDACachingAllocator.cpp`) with
/// `max_split_size_mb:20` and the default `max_non_split_rounding`
/// (`kLargeBuffer`, 20 MiB). A freed 100 MiB request leaves one cached
/// 100 MiB block (`get_allocation_size`: 10 MiB or more, rounded up to
/// 2 MiB). Then:
///
/// * 80 MiB (at or over the limit): `100 MiB >= 80 MiB + 20 MiB`, so the
///   block is refused and `alloc_block` makes an 80 MiB segment: 180 MiB
///   reserved, two segments, both oversize.
/// * 80 MiB + 512 (its own rounding, a multiple of 512): `100 MiB <
///   100 MiB + 512`, so the cached block is taken; `should_split` is false
///   for a request at or over `max_split_size`, so the 100 MiB block is
///   handed out whole: `allocated_bytes` 100 MiB, `requested_bytes` 80 MiB +
///   512, no inactive split piece, no new segment.
#[test]
fn max_non_split_rounding_refuses_a_block_exactly_at_the_bound() {
    let (d, a) = sim_device("expandable_segments:False,max_split_size_mb:20", 16 * GIB);
    let big = a.allocate_raw(100 * MIB, S0).unwrap();
    let big_ptr = big.ptr();
    a.free_raw(big).unwrap();
    assert_eq!(a.memory_reserved(), 100 * MIB);

    let at = a.allocate_raw(80 * MIB, S0).unwrap();
    assert_ne!(at.ptr(), big_ptr, "a block at the bound was reused");
    assert_eq!(a.memory_reserved(), 180 * MIB);
    assert_eq!(stat(&a, "segment.all.current"), 2);
    assert_eq!(stat(&a, "oversize_segments.current"), 2);
    assert_eq!(stat(&a, "allocated_bytes.all.current") as u64, 80 * MIB);
    assert_eq!(stat(&a, "oversize_allocations.current"), 1);
    a.free_raw(at).unwrap();

    // Both segments are cached now (100 MiB and 80 MiB). A request of 80 MiB
    // + 512 takes the smallest cached block at least its size: 80 MiB is too
    // small, 100 MiB is under the bound.
    let malloc_before = d.call_count("malloc");
    let above = a.allocate_raw(80 * MIB + 512, S0).unwrap();
    assert_eq!(above.ptr(), big_ptr);
    assert_eq!(d.call_count("malloc"), malloc_before, "no new segment");
    assert_eq!(a.memory_reserved(), 180 * MIB);
    let s = a.memory_stats();
    assert_eq!(s.allocated_bytes.all().current as u64, 100 * MIB);
    assert_eq!(s.active_bytes.all().current as u64, 100 * MIB);
    assert_eq!(s.requested_bytes.all().current as u64, 80 * MIB + 512);
    assert_eq!(s.inactive_split.all().current, 0);
    assert_eq!(s.inactive_split_bytes.all().current, 0);
    assert_eq!(s.oversize_allocations.current, 1);
    a.free_raw(above).unwrap();
    a.empty_cache().unwrap();
    assert_eq!((a.memory_reserved(), d.used_bytes()), (0, 0));
    a.check_consistency().unwrap();
}

/// The same bound raised by `max_non_split_rounding_mb:40`: a cached
/// 100 MiB block is refused to a 60 MiB request (`100 >= 60 + 40`) and
/// handed whole to one of 60 MiB + 512 (`100 < 60 + 40 + 512 bytes`).
#[test]
fn a_raised_max_non_split_rounding_moves_the_bound() {
    let (d, a) = sim_device(
        "expandable_segments:False,max_split_size_mb:20,max_non_split_rounding_mb:40",
        16 * GIB,
    );
    let big = a.allocate_raw(100 * MIB, S0).unwrap();
    let big_ptr = big.ptr();
    a.free_raw(big).unwrap();
    let at = a.allocate_raw(60 * MIB, S0).unwrap();
    assert_ne!(at.ptr(), big_ptr);
    assert_eq!(a.memory_reserved(), 160 * MIB);
    a.free_raw(at).unwrap();
    let malloc_before = d.call_count("malloc");
    let above = a.allocate_raw(60 * MIB + 512, S0).unwrap();
    assert_eq!(above.ptr(), big_ptr);
    assert_eq!(d.call_count("malloc"), malloc_before);
    assert_eq!(stat(&a, "allocated_bytes.all.current") as u64, 100 * MIB);
    a.free_raw(above).unwrap();
    a.check_consistency().unwrap();
}

// ---------------------------------------------------------------------------
// A request under the limit whose segment is at it
// ---------------------------------------------------------------------------

/// `max_split_size_mb:24` and a 23 MiB request.
///
/// Expandable segments off: `get_allocation_size` gives a 24 MiB segment
/// (10 MiB or more, rounded up to 2 MiB); `should_split` leaves it whole
/// (1 MiB left is not more than `kSmallSize`), so `alloc_found_block` counts
/// a 24 MiB block, which is at the limit: `oversize_allocations` and
/// `oversize_segments` 1. Freed and requested again, the cached 24 MiB block
/// is refused (a request under `max_split_size` never gets a block at or
/// over it): a second segment, 48 MiB reserved.
///
/// Expandable segments on: `should_split` is `remaining >= kMinBlockSize`
/// for an expandable segment, so the block is exactly 23 MiB, under the
/// limit, and nothing is oversize (`alloc_block` returns through
/// `try_allocate_expandable` before it counts `oversize_segments` or
/// `segment`); the freed block is reused by the second request, so nothing
/// more is reserved.
#[test]
fn a_request_under_the_limit_is_oversize_only_when_its_segment_is_not_split() {
    let req = 23 * MIB;
    let (_, a) = sim_device("expandable_segments:False,max_split_size_mb:24", 16 * GIB);
    let x = a.allocate(req, S0).unwrap();
    let x_ptr = x.ptr();
    assert_eq!(a.memory_reserved(), 24 * MIB);
    assert_eq!(stat(&a, "allocated_bytes.all.current") as u64, 24 * MIB);
    assert_eq!(stat(&a, "requested_bytes.all.current") as u64, req);
    assert_eq!(stat(&a, "oversize_allocations.current"), 1);
    assert_eq!(stat(&a, "oversize_segments.current"), 1);
    assert_eq!(stat(&a, "inactive_split.all.current"), 0);
    drop(x);
    let y = a.allocate(req, S0).unwrap();
    assert_ne!(y.ptr(), x_ptr);
    assert_eq!(a.memory_reserved(), 48 * MIB);
    assert_eq!(stat(&a, "segment.all.current"), 2);
    assert_eq!(stat(&a, "oversize_segments.current"), 2);
    assert_eq!(stat(&a, "oversize_allocations.current"), 1);
    assert_eq!(stat(&a, "oversize_allocations.allocated"), 2);
    drop(y);
    a.check_consistency().unwrap();

    let (_, a) = sim_device("expandable_segments:True,max_split_size_mb:24", 16 * GIB);
    let x = a.allocate(req, S0).unwrap();
    let x_ptr = x.ptr();
    assert_eq!(stat(&a, "allocated_bytes.all.current") as u64, req);
    assert_eq!(stat(&a, "oversize_allocations.current"), 0);
    assert_eq!(stat(&a, "oversize_segments.current"), 0);
    assert_eq!(stat(&a, "segment.all.current"), 0);
    let reserved = a.memory_reserved();
    drop(x);
    let y = a.allocate(req, S0).unwrap();
    assert_eq!(y.ptr(), x_ptr);
    assert_eq!(a.memory_reserved(), reserved);
    assert_eq!(stat(&a, "oversize_allocations.allocated"), 0);
    drop(y);
    a.check_consistency().unwrap();
}

// ---------------------------------------------------------------------------
// cacheInfo
// ---------------------------------------------------------------------------

/// PyTorch's `cacheInfo(size_t* largest)`
/// (`DeviceCachingAllocator::cacheInfo`): "if (*largest == 0) { // make an
/// initial guess if a zero *largest is passed in" it sets `*largest` from
/// `cudaMemGetInfo`'s free bytes, then `cache_info_aux` takes the larger of
/// that and each cached block (default pools and `graph_pools`). cuDNN's
/// workspace sizing calls it with `max_block_size = 0`, so the answer is the
/// larger of the device's free memory and the largest cached block: on an
/// idle 1 GiB device, the free 1 GiB; with a 30 MiB block cached, still the
/// device's free memory (994 MiB), which is larger.
///
/// strata's `largest_free_block` stays the largest cached block only (0
/// when nothing is cached: `pytorch_tests_s37.rs`,
/// `the_largest_free_block_is_a_mapped_cached_block`); `cache_info` is
/// PyTorch's call.
#[test]
fn cache_info_starts_from_the_free_device_memory_as_pytorch_does() {
    let (_, a) = sim_device("expandable_segments:False", GIB);
    let free = a.mem_get_info().unwrap().free;
    assert_eq!(free, GIB);
    assert_eq!(a.largest_free_block(), 0);
    assert_eq!(a.cache_info(0).unwrap(), GIB);
    drop(a.allocate(30 * MIB, S0).unwrap());
    let free = a.mem_get_info().unwrap().free;
    assert_eq!(free, GIB - 30 * MIB);
    assert_eq!(a.largest_free_block(), 30 * MIB);
    // A zero guess: the device's free memory, larger than the cached block.
    assert_eq!(a.cache_info(0).unwrap(), free);
    // A non-zero guess is kept when larger, replaced by the block when not.
    assert_eq!(a.cache_info(2 * GIB).unwrap(), 2 * GIB);
    assert_eq!(a.cache_info(MIB).unwrap(), 30 * MIB);
    a.check_consistency().unwrap();
}

// ---------------------------------------------------------------------------
// setMemoryFraction on any f64
// ---------------------------------------------------------------------------

/// `DeviceCachingAllocator::setMemoryFraction` after the binding's
/// `TORCH_CHECK(0 <= fraction && fraction <= 1, ...)`: any `f64` (NaN and
/// infinities, subnormals, -0.0, every bit pattern) is accepted exactly when
/// `0 <= f <= 1`, and then `allowed_memory_maximum` is `fraction ×
/// totalGlobalMem` rounded to the nearest byte (PyTorch 2.15's build rounds
/// it with `std::round`: `hostile_s59.rs`; this file first had it
/// truncated), which the
/// out-of-memory error of a request for the whole 1 GiB device reports
/// (`alloc_block`'s `total + size > allowed` with nothing reserved fails
/// for any `allowed` below 1 GiB). A refused fraction is a typed error that
/// changes nothing; a failed request changes only the out-of-memory
/// counters; the allocator keeps working either way.
fn check_fraction(f: f64) -> Result<(), proptest::test_runner::TestCaseError> {
    use super::common::{state, stats_but_ooms};
    use proptest::prelude::*;
    let (_, a) = sim_device("expandable_segments:False", GIB);
    a.set_memory_fraction(0.5).unwrap();
    let before = state(&a);
    let accepted = (0.0..=1.0).contains(&f);
    match a.set_memory_fraction(f) {
        Ok(()) => {
            prop_assert!(accepted, "{f:e} ({:#x}) accepted", f.to_bits());
            prop_assert_eq!(a.memory_fraction(), f);
            let allowed = (f * GIB as f64).round() as u64;
            if allowed < GIB {
                let stats = stats_but_ooms(&a);
                let e = a.allocate_raw(GIB, S0).unwrap_err();
                let oom = e.out_of_memory().expect("an out-of-memory error");
                prop_assert_eq!(oom.allowed, Some(allowed), "{:e}", f);
                prop_assert_eq!(stats_but_ooms(&a), stats);
                prop_assert_eq!(a.memory_reserved(), 0);
            }
        }
        Err(e) => {
            prop_assert!(!accepted, "{f:e} refused: {e}");
            prop_assert!(e.to_string().contains("per_process_memory_fraction"), "{e}");
            prop_assert_eq!(state(&a), before);
        }
    }
    // Still working: a fraction of 1 admits the whole device.
    a.set_memory_fraction(1.0).unwrap();
    let x = a.allocate_raw(GIB, S0).unwrap();
    a.free_raw(x).unwrap();
    a.check_consistency()
        .map_err(proptest::test_runner::TestCaseError::fail)?;
    Ok(())
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(super::common::cases(256)))]

    #[test]
    fn any_f64_fraction_is_taken_or_refused_as_pytorch_checks_it(
        f in proptest::prop_oneof![
            proptest::num::f64::ANY,
            0.0f64..=1.0,
            proptest::sample::select(vec![
                -0.0, 0.0, 1.0, f64::MIN_POSITIVE, 5e-324, 1.0 - f64::EPSILON / 2.0,
                1.0 + f64::EPSILON, -5e-324, f64::NAN, -f64::NAN, f64::INFINITY,
                f64::NEG_INFINITY, 1.0 / GIB as f64, (GIB - 1) as f64 / GIB as f64,
            ]),
        ]
    ) {
        check_fraction(f)?;
    }
}
