//! Parity with PyTorch's allocator, session 31.
//!
//! Each test mirrors a behaviour of PyTorch's caching allocator exercised by
//! its test suite (`test/test_cuda.py`, which `test_cuda_expandable_segments.py`
//! runs again with expandable segments on; `test/test_cuda_multigpu.py`) or
//! fixed by its source (`c10/cuda/CUDACachingAllocator.cpp`), named in the
//! doc comment. The expected figures are worked out from PyTorch's semantics,
//! never taken from strata's output.

use crate::common;

use common::{sim_device as sim, stat, Lcg};
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
            let _g = pool.activate().unwrap();
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
            let _g = whole.activate().unwrap();
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

// ----- record_stream on a private pool's block ---------------------------------------

/// PyTorch's `recordStream` ignores the allocation's own stream ("ignore
/// uses on the allocation stream, since those don't require any special
/// synchronization"), whichever pool the block came from. A block allocated
/// in a `MemPool` on stream S1, recorded on S1 and freed, is free at once:
/// no longer active, its requested bytes gone, and the pool's next request
/// on S1 gets it back without any event completing.
#[test]
fn record_stream_on_its_own_stream_is_ignored_for_a_pools_block() {
    const S1: StreamId = StreamId(21);
    for mode in ["expandable_segments:False", "expandable_segments:True"] {
        let (_, a) = sim(mode, GIB);
        let pool = a.mem_pool(MemPoolOptions::default());
        let x = {
            let _g = pool.activate().unwrap();
            a.allocate_raw(4 * MIB, S1).unwrap()
        };
        a.record_stream(&x, S1).unwrap();
        let ptr = x.ptr();
        a.free_raw(x).unwrap();
        assert_eq!(stat(&a, "active.all.current"), 0, "{mode}");
        assert_eq!(stat(&a, "requested_bytes.all.current"), 0, "{mode}");
        assert!(
            pool.snapshot()
                .iter()
                .flat_map(|g| &g.blocks)
                .all(|b| b.state == strata_alloc::snapshot::BlockState::Inactive),
            "{mode}"
        );
        let y = {
            let _g = pool.activate().unwrap();
            a.allocate_raw(4 * MIB, S1).unwrap()
        };
        assert_eq!(y.ptr(), ptr, "{mode}: reused at once");
        a.free_raw(y).unwrap();
        a.check_consistency().unwrap();
    }
}

// ----- the out-of-memory message ---------------------------------------------------

/// `test_out_of_memory` matches PyTorch's message with the pattern
/// `f"Tried to allocate 800000000.00 GiB. GPU {tensor.device.index} has a
/// total capacity of"`, `test_set_per_process_memory_fraction` with
/// `"out of memory"` and `test_out_of_memory_retry` with `"Tried to
/// allocate"`. strata's message matches all three, on either segment kind;
/// the memory an earlier tensor holds is unharmed.
#[test]
fn the_out_of_memory_message_matches_pytorchs_test_patterns() {
    for mode in ["expandable_segments:False", "expandable_segments:True"] {
        let (_, a) = sim(mode, GIB);
        let tensor = a.allocate(1024 * 4, S0).unwrap();
        let e = a.allocate(800_000_000 * GIB, S0).unwrap_err();
        let text = e.to_string();
        for pattern in [
            "Tried to allocate 800000000.00 GiB. GPU 0 has a total capacity of",
            "out of memory",
            "Tried to allocate",
        ] {
            assert!(text.contains(pattern), "{mode}: {pattern:?} not in {text}");
        }
        // The figures PyTorch's sentence goes on with: the capacity, then
        // the free memory (1 GiB less the 2 MiB segment of the tensor).
        assert!(
            text.contains("has a total capacity of 1024.00 MiB of which 1022.00 MiB is free."),
            "{mode}: {text}"
        );
        assert!(e.out_of_memory().is_some());
        drop(tensor);
        a.check_consistency().unwrap();
    }
}

/// `test_out_of_memory`'s second request, 8000000000 GiB, is beyond 1 EiB:
/// PyTorch refuses it before any allocator work with a message its test
/// matches with `"Tried to allocate more than 1EB memory"`, and the
/// earlier tensor is unharmed. Not counted in `num_ooms`.
#[test]
fn a_request_beyond_1_eib_says_so_in_pytorchs_words() {
    for mode in ["expandable_segments:False", "expandable_segments:True"] {
        let (_, a) = sim(mode, GIB);
        let tensor = a.allocate(1024 * 4, S0).unwrap();
        let e = a.allocate(8_000_000_000 * GIB, S0).unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains("Tried to allocate more than 1EB memory"),
            "{mode}: {text}"
        );
        assert!(e.is_out_of_memory(), "{mode}");
        assert_eq!(a.memory_stats().num_ooms, 0, "{mode}");
        assert_eq!(a.memory_allocated(), 4096, "{mode}");
        drop(tensor);
        a.check_consistency().unwrap();
    }
}

// ----- per_process_memory_fraction in the settings ----------------------------------

/// `test_allocator_memory_fraction_setting` starts processes with
/// `per_process_memory_fraction:<f>` in the allocator settings: 0.0, 0.5 and
/// 1.0 read back as the device's fraction, and -0.1 and 1.1 fail with an
/// error containing "per_process_memory_fraction is invalid".
#[test]
fn per_process_memory_fraction_in_the_settings_as_pytorchs_test_has_it() {
    use strata_alloc::{AllocError, AllocatorConfig, ConfigError};
    for f in ["0.0", "0.5", "1.0"] {
        let (_, a) = sim(&format!("per_process_memory_fraction:{f}"), GIB);
        assert_eq!(a.memory_fraction(), f.parse::<f64>().unwrap(), "{f}");
    }
    for f in ["-0.1", "1.1"] {
        let s = format!("per_process_memory_fraction:{f}");
        let e = AllocatorConfig::parse(&s).unwrap_err();
        assert!(
            matches!(
                e,
                ConfigError::BadValue {
                    key: "per_process_memory_fraction",
                    ..
                }
            ),
            "{e:?}"
        );
        assert!(
            e.to_string()
                .contains("per_process_memory_fraction is invalid"),
            "{e}"
        );
        // The same through a live allocator, which keeps its settings.
        let (_, a) = sim("", GIB);
        let before = a.config();
        let e = a.set_allocator_settings(&s).unwrap_err();
        assert!(matches!(e, AllocError::Config(_)), "{e:?}");
        assert!(
            e.to_string()
                .contains("per_process_memory_fraction is invalid"),
            "{e}"
        );
        assert_eq!(a.config(), before);
        assert_eq!(a.memory_fraction(), 1.0);
    }
}

/// `test_set_per_process_memory_fraction` expects
/// `set_per_process_memory_fraction(-0.1)` and `(2.0)` to raise with
/// "Invalid fraction value"; the fraction in force stays as it was.
#[test]
fn an_invalid_fraction_is_refused_in_pytorchs_words() {
    let (_, a) = sim("", GIB);
    a.set_memory_fraction(0.5).unwrap();
    for bad in [-0.1, 2.0, f64::NAN] {
        let e = a.set_memory_fraction(bad).unwrap_err();
        assert!(
            e.to_string().contains("Invalid fraction value"),
            "{bad}: {e}"
        );
        assert!(e.to_string().contains("per_process_memory_fraction"), "{e}");
        assert_eq!(a.memory_fraction(), 0.5);
    }
}

// ----- roundup_power2_divisions: the single value is a power of two ---------------

/// PyTorch's `parseRoundUpPower2Divisions` (`c10/core/AllocatorConfig.cpp`)
/// checks the single-value form ("Keep this for backwards compatibility")
/// with `TORCH_CHECK(llvm::isPowerOf2_64(val1), "For roundups, the divisons
/// has to be power of 2 ")`: 0 is refused there, while a list entry may be 0
/// (`val2 == 0 || isPowerOf2_64(val2)`, "0 to disable roundup"). 1 is a
/// power of two and accepted (it rounds to 512 bytes, as off does).
#[test]
fn a_single_division_count_of_zero_is_refused_as_pytorch_refuses_it() {
    use strata_alloc::{AllocError, AllocatorConfig, ConfigError};
    match AllocatorConfig::parse("roundup_power2_divisions:0") {
        Err(ConfigError::BadValue { key, value, .. }) => {
            assert_eq!(key, "roundup_power2_divisions");
            assert_eq!(value, "0");
        }
        other => panic!("expected BadValue, got {other:?}"),
    }
    // On a live allocator: refused, and nothing changes.
    let (_, a) = sim("roundup_power2_divisions:4", 16 * GIB);
    let before = a.config();
    match a.set_allocator_settings("roundup_power2_divisions:0") {
        Err(AllocError::Config(ConfigError::BadValue { key, .. })) => {
            assert_eq!(key, "roundup_power2_divisions")
        }
        other => panic!("expected BadValue, got {other:?}"),
    }
    assert_eq!(a.config(), before);
    assert_eq!(
        a.round_size(5 * MIB + 1),
        5 * MIB + MIB,
        "still 4 divisions"
    );
    // A list entry of 0, and a single 1, are accepted.
    let c = AllocatorConfig::parse("roundup_power2_divisions:[64:0,>:4]").unwrap();
    assert_eq!(c.divisions_for(64 * MIB), 0);
    assert_eq!(c.divisions_for(128 * MIB), 4);
    let c = AllocatorConfig::parse("roundup_power2_divisions:1").unwrap();
    assert_eq!(c.roundup_power2_divisions, [1; 16]);
}

// ----- garbage collection frees in the order of PyTorch's block set -----------------

/// PyTorch's `garbage_collect_cached_blocks` walks `large_blocks`, a set
/// ordered by (stream, size, address), releasing each whole block at least
/// as old as the mean, so its `segment_free` trace entries come in that
/// order, as `empty_cache`'s do. Under a 128 MiB limit and a threshold of 0.5
/// (64 MiB): 30 MiB on stream 9, 26 MiB on stream 0 and 12 MiB on stream 9
/// (stream 9 used first), all freed together (the same age); a 10 MiB
/// request on stream 2 misses with 68 MiB reserved and the collection frees
/// all three: stream 0's 26 MiB, then stream 9's 12 and 30 MiB.
#[test]
fn garbage_collection_frees_in_the_order_of_pytorchs_block_set() {
    use std::sync::Arc;
    use strata_alloc::driver::sim::SimDriver;
    use strata_alloc::history::Action;
    use strata_alloc::{AllocatorConfig, CachingAllocator};
    let s9 = StreamId(9);
    let d = Arc::new(SimDriver::new(GIB, 0));
    let a = CachingAllocator::new(
        d,
        AllocatorConfig::parse("garbage_collection_threshold:0.5").unwrap(),
    );
    a.set_memory_fraction(128.0 / 1024.0).unwrap();
    let x = a.allocate(30 * MIB, s9).unwrap();
    let y = a.allocate(26 * MIB, S0).unwrap();
    let z = a.allocate(12 * MIB, s9).unwrap();
    let (px, py, pz) = (x.ptr(), y.ptr(), z.ptr());
    drop((x, y, z));
    a.record_history(Some(100));
    let w = a.allocate(10 * MIB, StreamId(2)).unwrap();
    let freed: Vec<(u64, u64, StreamId)> = a
        .history()
        .iter()
        .filter(|e| e.action == Action::SegmentFree)
        .map(|e| (e.addr, e.size, e.stream))
        .collect();
    assert_eq!(
        freed,
        [(py, 26 * MIB, S0), (pz, 12 * MIB, s9), (px, 30 * MIB, s9)]
    );
    assert_eq!(a.memory_reserved(), 10 * MIB);
    drop(w);
    a.check_consistency().unwrap();
}

// ----- a reference model of PyTorch's allocator, step by step ----------------------

/// A model of PyTorch's `DeviceCachingAllocator` with ordinary segments
/// (`expandable_segments:False`), written from
/// `c10/cuda/CUDACachingAllocator.cpp`: `malloc` (process_events, round_size,
/// get_free_block with its oversize filters, garbage collection,
/// alloc_block, release_available_cached_blocks, release_cached_blocks and
/// the retry, `try_mempool_fallback`), `should_split`, `alloc_found_block`,
/// `free` (events for the streams of `recordStream`), `free_block` with its
/// merges, `emptyCache`, private pools (`MemPool`: routing, `no_split`,
/// `use_on_oom`, `releasePool` and `emptyCache(id)`), `snapshot()`, every
/// statistic each of them updates and every `record_trace` entry. The
/// allocator under test runs the same calls; after each one, every statistic
/// and every address must agree with the model's, and at the end every
/// history entry.
mod model {
    use std::collections::{BTreeMap, BTreeSet, VecDeque};
    use strata_alloc::history::Action;

    const MIB: u64 = 1 << 20;
    const K_MIN_BLOCK: u64 = 512;
    const K_SMALL_SIZE: u64 = MIB;
    const K_SMALL_BUFFER: u64 = 2 * MIB;
    const K_LARGE_BUFFER: u64 = 20 * MIB;
    const K_MIN_LARGE_ALLOC: u64 = 10 * MIB;
    const K_ROUND_LARGE: u64 = 2 * MIB;

    #[derive(Clone, Copy, Default, Debug)]
    struct Stat {
        current: i64,
        peak: i64,
        allocated: i64,
        freed: i64,
    }

    impl Stat {
        fn inc(&mut self, n: u64) {
            self.current += n as i64;
            self.peak = self.peak.max(self.current);
            self.allocated += n as i64;
        }
        fn dec(&mut self, n: u64) {
            self.current -= n as i64;
            self.freed += n as i64;
        }
    }

    /// Stat arrays: [all, small_pool, large_pool].
    #[derive(Clone, Default)]
    struct Stats {
        arrays: BTreeMap<&'static str, [Stat; 3]>,
        oversize_allocations: Stat,
        oversize_segments: Stat,
        num_alloc_retries: i64,
        num_ooms: i64,
        num_sync_all_streams: i64,
        num_device_alloc: i64,
        num_device_free: i64,
    }

    const ARRAYS: [&str; 9] = [
        "allocation",
        "segment",
        "active",
        "inactive_split",
        "allocated_bytes",
        "reserved_bytes",
        "active_bytes",
        "inactive_split_bytes",
        "requested_bytes",
    ];

    impl Stats {
        fn inc(&mut self, name: &'static str, small: bool, n: u64) {
            let a = self.arrays.entry(name).or_default();
            a[0].inc(n);
            a[if small { 1 } else { 2 }].inc(n);
        }
        fn dec(&mut self, name: &'static str, small: bool, n: u64) {
            let a = self.arrays.entry(name).or_default();
            a[0].dec(n);
            a[if small { 1 } else { 2 }].dec(n);
        }
    }

    #[derive(Clone, Debug)]
    struct Block {
        stream: u64,
        size: u64,
        requested: u64,
        small: bool,
        ptr: u64,
        allocated: bool,
        prev: Option<usize>,
        next: Option<usize>,
        event_count: u32,
        stream_uses: BTreeSet<u64>,
        gc_base: i64,
        live: bool,
        /// The pool set it belongs to: 0 for the default pools, else a
        /// private pool (`MemPool`).
        set: usize,
    }

    impl Block {
        fn is_split(&self) -> bool {
            self.prev.is_some() || self.next.is_some()
        }
    }

    #[derive(Clone, Default)]
    struct Pool {
        /// (stream, size, ptr) -> block, PyTorch's `BlockComparatorSize`.
        blocks: BTreeSet<(u64, u64, u64, usize)>,
        calls: i64,
    }

    /// A private pool's `PrivatePool` fields.
    #[derive(Clone, Default)]
    struct PoolMeta {
        use_count: u32,
        use_on_oom: bool,
        /// `cudaMalloc_count`: its segments still allocated.
        mallocs: u64,
        no_split: bool,
        /// Erased from `graph_pools` (its MemPool gone and every segment
        /// released).
        erased: bool,
    }

    #[derive(Clone)]
    pub struct Model {
        blocks: Vec<Block>,
        /// Per pool set ([small, large]): 0 the default pools, then one
        /// entry per `MemPool` made, in order.
        pools: Vec<[Pool; 2]>,
        meta: Vec<PoolMeta>,
        events: BTreeMap<u64, VecDeque<(usize, bool)>>,
        /// Streams in the order the allocator first saw them: the order in
        /// which pending frees are completed. PyTorch walks a hash map of
        /// streams there (`cuda_events`), an order it leaves unspecified; it
        /// shows only in the peaks of `inactive_split*` when two frees that
        /// complete in one call touch the same segment.
        order: Vec<u64>,
        stats: Stats,
        capacity: u64,
        used: u64,
        allowed: Option<u64>,
        gc_threshold: Option<f64>,
        max_split: u64,
        divisions: u64,
        /// `large_segment_size` (PyTorch's `kLargeBuffer` unless
        /// `large_segment_size_mb` sets it) and `max_non_split_rounding`
        /// (the large segment size unless `max_non_split_rounding_mb` sets it).
        large_segment: u64,
        non_split_rounding: u64,
        /// Segments freed by garbage collection and by
        /// `release_available_cached_blocks`: what a run exercised.
        pub gc_released: u64,
        pub oversize_released: u64,
        /// PyTorch's trace entries (`record_trace`): action, address, size,
        /// stream.
        pub trace: Vec<(Action, u64, u64, u64)>,
    }

    pub struct Oom;

    impl Model {
        pub fn new(
            capacity: u64,
            fraction: Option<f64>,
            gc_threshold: Option<f64>,
            max_split_mb: Option<u64>,
            divisions: u64,
            large_segment_mb: Option<u64>,
            non_split_rounding_mb: Option<u64>,
        ) -> Model {
            let large_segment = large_segment_mb.map_or(K_LARGE_BUFFER, |m| m * MIB);
            let allowed = fraction.map(|f| (f * capacity as f64) as u64);
            let mut stats = Stats::default();
            for n in ARRAYS {
                stats.arrays.insert(n, Default::default());
            }
            Model {
                blocks: Vec::new(),
                pools: vec![Default::default()],
                meta: vec![PoolMeta::default()],
                events: BTreeMap::new(),
                order: Vec::new(),
                stats,
                capacity,
                used: 0,
                allowed,
                gc_threshold: gc_threshold.filter(|_| allowed.is_some()),
                max_split: max_split_mb.map_or(u64::MAX, |m| m * MIB),
                divisions,
                large_segment,
                non_split_rounding: non_split_rounding_mb.map_or(large_segment, |m| m * MIB),
                gc_released: 0,
                oversize_released: 0,
                trace: Vec::new(),
            }
        }

        /// PyTorch's `memory_stats()` keys this model keeps.
        pub fn stats(&self) -> BTreeMap<String, i64> {
            let mut m = BTreeMap::new();
            for (name, a) in &self.stats.arrays {
                for (i, pool) in ["all", "small_pool", "large_pool"].iter().enumerate() {
                    let s = a[i];
                    m.insert(format!("{name}.{pool}.current"), s.current);
                    m.insert(format!("{name}.{pool}.peak"), s.peak);
                    m.insert(format!("{name}.{pool}.allocated"), s.allocated);
                    m.insert(format!("{name}.{pool}.freed"), s.freed);
                }
            }
            for (name, s) in [
                ("oversize_allocations", self.stats.oversize_allocations),
                ("oversize_segments", self.stats.oversize_segments),
            ] {
                m.insert(format!("{name}.current"), s.current);
                m.insert(format!("{name}.peak"), s.peak);
                m.insert(format!("{name}.allocated"), s.allocated);
                m.insert(format!("{name}.freed"), s.freed);
            }
            m.insert("num_alloc_retries".into(), self.stats.num_alloc_retries);
            m.insert("num_ooms".into(), self.stats.num_ooms);
            m.insert(
                "num_sync_all_streams".into(),
                self.stats.num_sync_all_streams,
            );
            m.insert("num_device_alloc".into(), self.stats.num_device_alloc);
            m.insert("num_device_free".into(), self.stats.num_device_free);
            m
        }

        fn round_size(&self, size: u64) -> u64 {
            if size < K_MIN_BLOCK {
                return K_MIN_BLOCK;
            }
            let d = self.divisions;
            if d > 1 && size > K_MIN_BLOCK * d {
                if size.is_power_of_two() {
                    return size;
                }
                let floor = 1u64 << (63 - size.leading_zeros());
                let step = floor >> d.trailing_zeros();
                if step == 0 {
                    return floor << 1;
                }
                return size.div_ceil(step) * step;
            }
            size.div_ceil(K_MIN_BLOCK) * K_MIN_BLOCK
        }

        fn allocation_size(&self, size: u64) -> u64 {
            if size <= K_SMALL_SIZE {
                K_SMALL_BUFFER
            } else if size < K_MIN_LARGE_ALLOC {
                self.large_segment
            } else {
                size.div_ceil(K_ROUND_LARGE) * K_ROUND_LARGE
            }
        }

        fn pool_ix(small: bool) -> usize {
            usize::from(!small)
        }

        fn key(&self, id: usize) -> (u64, u64, u64, usize) {
            let b = &self.blocks[id];
            (b.stream, b.size, b.ptr, id)
        }

        fn insert_into_blocks(&mut self, id: usize) {
            let (p, set) = (Self::pool_ix(self.blocks[id].small), self.blocks[id].set);
            self.blocks[id].gc_base = self.pools[set][p].calls;
            let k = self.key(id);
            assert!(self.pools[set][p].blocks.insert(k));
        }

        fn remove_from_blocks(&mut self, id: usize) {
            let (p, set) = (Self::pool_ix(self.blocks[id].small), self.blocks[id].set);
            let k = self.key(id);
            assert!(self.pools[set][p].blocks.remove(&k));
        }

        fn note(&mut self, stream: u64) {
            if !self.order.contains(&stream) {
                self.order.push(stream);
            }
        }

        fn process_events(&mut self) {
            for s in self.order.clone() {
                loop {
                    let front = self.events.get(&s).and_then(|q| q.front().copied());
                    match front {
                        Some((id, true)) => {
                            self.events.get_mut(&s).unwrap().pop_front();
                            self.blocks[id].event_count -= 1;
                            if self.blocks[id].event_count == 0 {
                                self.free_block(id);
                            }
                        }
                        _ => break,
                    }
                }
            }
            self.events.retain(|_, q| !q.is_empty());
        }

        /// The events recorded on `stream` so far have completed.
        pub fn complete_stream(&mut self, stream: u64) {
            if let Some(q) = self.events.get_mut(&stream) {
                for e in q.iter_mut() {
                    e.1 = true;
                }
            }
        }

        fn get_free_block(
            &mut self,
            set: usize,
            stream: u64,
            size: u64,
            small: bool,
        ) -> Option<usize> {
            let p = Self::pool_ix(small);
            if self.gc_threshold.is_some() {
                self.pools[set][p].calls += 1;
            }
            let &(s, bsize, _, id) = self.pools[set][p]
                .blocks
                .range((stream, size, 0, 0)..)
                .next()?;
            if s != stream {
                return None;
            }
            if size < self.max_split && bsize >= self.max_split {
                return None;
            }
            if size >= self.max_split && bsize >= size.saturating_add(self.non_split_rounding) {
                return None;
            }
            self.remove_from_blocks(id);
            Some(id)
        }

        fn gc_count(&self, id: usize) -> i64 {
            let (p, set) = (Self::pool_ix(self.blocks[id].small), self.blocks[id].set);
            self.pools[set][p].calls - self.blocks[id].gc_base
        }

        fn garbage_collect(&mut self) {
            let (Some(t), Some(allowed)) = (self.gc_threshold, self.allowed) else {
                return;
            };
            let threshold = (t * allowed as f64) as u64;
            if self.used <= threshold {
                return;
            }
            let target = self.used - threshold;
            let mut reclaimed = 0;
            let mut total_age = 0i64;
            let mut count = 0i64;
            for &(_, _, _, id) in &self.pools[0][1].blocks {
                if !self.blocks[id].is_split() {
                    total_age += self.gc_count(id);
                    count += 1;
                }
            }
            if count == 0 {
                return;
            }
            let mut freed_one = true;
            while reclaimed < target && freed_one && count > 0 {
                let age_threshold = total_age as f64 / count as f64;
                freed_one = false;
                let ids: Vec<usize> = self.pools[0][1].blocks.iter().map(|k| k.3).collect();
                for id in ids {
                    if !self.blocks[id].is_split() && self.gc_count(id) as f64 >= age_threshold {
                        freed_one = true;
                        reclaimed += self.blocks[id].size;
                        total_age -= self.gc_count(id);
                        count -= 1;
                        self.release_block(id);
                        self.gc_released += 1;
                    }
                }
            }
        }

        fn alloc_block(
            &mut self,
            set: usize,
            stream: u64,
            small: bool,
            alloc_size: u64,
            retry: bool,
            new_base: u64,
        ) -> Option<usize> {
            if retry {
                self.stats.num_alloc_retries += 1;
            }
            if let Some(allowed) = self.allowed {
                if self.used + alloc_size > allowed {
                    return None;
                }
            }
            if self.used + alloc_size > self.capacity {
                return None;
            }
            self.used += alloc_size;
            self.blocks.push(Block {
                stream,
                size: alloc_size,
                requested: 0,
                small,
                ptr: new_base,
                allocated: false,
                prev: None,
                next: None,
                event_count: 0,
                stream_uses: BTreeSet::new(),
                gc_base: 0,
                live: true,
                set,
            });
            self.meta[set].mallocs += 1;
            self.stats.inc("segment", small, 1);
            self.stats.inc("reserved_bytes", small, alloc_size);
            if alloc_size >= self.max_split {
                self.stats.oversize_segments.inc(1);
            }
            self.stats.num_device_alloc += 1;
            self.trace
                .push((Action::SegmentAlloc, new_base, alloc_size, stream));
            Some(self.blocks.len() - 1)
        }

        fn release_block(&mut self, id: usize) {
            self.stats.num_device_free += 1;
            let b = &self.blocks[id];
            self.trace
                .push((Action::SegmentFree, b.ptr, b.size, b.stream));
            let set = self.blocks[id].set;
            self.meta[set].mallocs -= 1;
            let (size, small) = (self.blocks[id].size, self.blocks[id].small);
            self.used -= size;
            self.stats.dec("segment", small, 1);
            self.stats.dec("reserved_bytes", small, size);
            if size >= self.max_split {
                self.stats.oversize_segments.dec(1);
            }
            self.remove_from_blocks(id);
            self.blocks[id].live = false;
        }

        fn release_available_cached_blocks(
            &mut self,
            set: usize,
            stream: u64,
            size: u64,
            small: bool,
        ) -> bool {
            if self.max_split == u64::MAX {
                return false;
            }
            let p = Self::pool_ix(small);
            let key = size.max(self.max_split);
            let all: Vec<(u64, u64, u64, usize)> =
                self.pools[set][p].blocks.iter().copied().collect();
            let pos = all.partition_point(|k| (k.0, k.1) < (stream, key));
            if pos == all.len() || all[pos].0 != stream {
                if pos == 0 {
                    return false;
                }
                let mut released = 0;
                let mut i = pos - 1;
                while released < key && all[i].1 >= self.max_split && all[i].0 == stream {
                    self.release_block(all[i].3);
                    self.oversize_released += 1;
                    released += all[i].1;
                    if i == 0 {
                        break;
                    }
                    i -= 1;
                }
                released >= key
            } else {
                self.release_block(all[pos].3);
                self.oversize_released += 1;
                true
            }
        }

        /// Waits for the events of every block, or only of the blocks of
        /// pool set `only`, and frees those blocks.
        fn synchronize_and_free_events(&mut self, only: Option<usize>) {
            self.stats.num_sync_all_streams += 1;
            for s in self.order.clone() {
                let q = self.events.remove(&s).unwrap_or_default();
                let mut kept = VecDeque::new();
                for (id, done) in q {
                    if only.is_some_and(|set| self.blocks[id].set != set) {
                        kept.push_back((id, done));
                        continue;
                    }
                    self.blocks[id].event_count -= 1;
                    if self.blocks[id].event_count == 0 {
                        self.free_block(id);
                    }
                }
                if !kept.is_empty() {
                    self.events.insert(s, kept);
                }
            }
        }

        /// `release_blocks`: every whole free block of these pools.
        fn release_blocks(&mut self, set: usize, order: [usize; 2]) {
            for p in order {
                let ids: Vec<usize> = self.pools[set][p].blocks.iter().map(|k| k.3).collect();
                for id in ids {
                    if !self.blocks[id].is_split() {
                        self.release_block(id);
                    }
                }
            }
        }

        /// `release_cached_blocks(context, mempool_id)`: `None` is `{0, 0}`
        /// (the default pools, then every freeable private pool), `Some(set)`
        /// a private pool's id (that pool only, if freeable).
        fn release_cached_blocks(&mut self, pool: Option<usize>) {
            if pool.is_none() {
                self.synchronize_and_free_events(None);
                self.release_blocks(0, [1, 0]);
            }
            for set in 1..self.meta.len() {
                let m = &self.meta[set];
                if m.use_count > 0 || m.erased || pool.is_some_and(|p| p != set) {
                    continue;
                }
                if pool.is_some() {
                    self.synchronize_and_free_events(Some(set));
                }
                self.release_blocks(set, [0, 1]);
                if self.meta[set].mallocs == 0 {
                    self.meta[set].erased = true;
                }
            }
        }

        pub fn empty_cache(&mut self) {
            self.release_cached_blocks(None);
        }

        /// `MemPool()`: a new private pool, in use by its `MemPool`.
        pub fn new_pool(&mut self, no_split: bool, use_on_oom: bool) -> usize {
            self.pools.push(Default::default());
            self.meta.push(PoolMeta {
                use_count: 1,
                no_split,
                use_on_oom,
                ..Default::default()
            });
            self.meta.len() - 1
        }

        /// `~MemPool()`: `releasePool`, then `emptyCache(id)`.
        pub fn drop_pool(&mut self, set: usize) {
            self.meta[set].use_count -= 1;
            self.release_cached_blocks(Some(set));
        }

        /// Whether frees wait for events (a `malloc` inside a pool's
        /// context does not process them in PyTorch, as a capture is
        /// underway: the caller avoids the case).
        /// PyTorch's `snapshot()`: for each segment (by address) its
        /// address, total, allocated, active and requested sizes, stream,
        /// pool kind, and its blocks' address, size and state (0 inactive,
        /// 1 active_allocated, 2 active_pending_free); records the
        /// `SNAPSHOT` trace entry (the total active size).
        #[allow(clippy::type_complexity)]
        pub fn snapshot(
            &mut self,
        ) -> Vec<(u64, u64, u64, u64, u64, u64, bool, Vec<(u64, u64, u8)>)> {
            let mut out = Vec::new();
            let mut total_active = 0;
            for head in 0..self.blocks.len() {
                let h = &self.blocks[head];
                if !h.live || h.prev.is_some() {
                    continue;
                }
                let (mut total, mut allocated, mut active, mut requested) = (0, 0, 0, 0);
                let mut blocks = Vec::new();
                let mut at = Some(head);
                while let Some(i) = at {
                    let b = &self.blocks[i];
                    let is_active = b.allocated || b.event_count > 0 || !b.stream_uses.is_empty();
                    total += b.size;
                    if b.allocated {
                        allocated += b.size;
                    }
                    if is_active {
                        active += b.size;
                        requested += b.requested;
                    }
                    let state = if b.allocated {
                        1
                    } else if is_active {
                        2
                    } else {
                        0
                    };
                    blocks.push((b.ptr, b.size, state));
                    at = b.next;
                }
                total_active += active;
                out.push((
                    h.ptr, total, allocated, active, requested, h.stream, h.small, blocks,
                ));
            }
            out.sort_by_key(|g| g.0);
            self.trace.push((Action::Snapshot, 0, total_active, 0));
            out
        }

        /// The pool set a block belongs to.
        pub fn set_of(&self, id: usize) -> usize {
            self.blocks[id].set
        }

        pub fn events_pending(&self) -> bool {
            !self.events.is_empty()
        }

        /// PyTorch's `malloc`. `new_base` is where the device put a segment
        /// if one was made (the address of the allocation under test: a new
        /// segment's first block is handed out from its start).
        pub fn malloc(
            &mut self,
            orig: u64,
            stream: u64,
            new_base: u64,
        ) -> Result<(usize, u64), Oom> {
            self.malloc_in(0, orig, stream, new_base)
        }

        /// `malloc` with pool set `set` routed (0: no context, the default
        /// pools).
        pub fn malloc_in(
            &mut self,
            set: usize,
            orig: u64,
            stream: u64,
            new_base: u64,
        ) -> Result<(usize, u64), Oom> {
            self.note(stream);
            if set == 0 {
                self.process_events();
            } else {
                self.meta[set].use_count += 1;
            }
            let r = self.malloc_inner(set, orig, stream, new_base);
            if set != 0 {
                self.meta[set].use_count -= 1;
            }
            r
        }

        fn malloc_inner(
            &mut self,
            set: usize,
            orig: u64,
            stream: u64,
            new_base: u64,
        ) -> Result<(usize, u64), Oom> {
            let size = self.round_size(orig);
            let small = size <= K_SMALL_SIZE;
            let alloc_size = self.allocation_size(size);
            let mut found = self.get_free_block(set, stream, size, small);
            if found.is_none() {
                if self.gc_threshold.is_some() {
                    self.garbage_collect();
                }
                found = self.alloc_block(set, stream, small, alloc_size, false, new_base);
                // `try_mempool_fallback`: a default-pool request may take a
                // free block of a `use_on_oom` pool still in use.
                if found.is_none() && set == 0 {
                    for p in 1..self.meta.len() {
                        let m = &self.meta[p];
                        if m.use_on_oom && m.use_count > 0 && !m.erased {
                            found = self.get_free_block(p, stream, size, small);
                            if found.is_some() {
                                break;
                            }
                        }
                    }
                }
                if found.is_none() && self.release_available_cached_blocks(set, stream, size, small)
                {
                    found = self.alloc_block(set, stream, small, alloc_size, false, new_base);
                }
                if found.is_none() {
                    // PyTorch skips this step while a capture (a pool's
                    // context) is underway in some versions and not in
                    // others: the caller keeps pool requests from needing it
                    // (it tries them on a copy of the model first).
                    if set != 0 {
                        return Err(Oom);
                    }
                    self.release_cached_blocks(None);
                    found = self.alloc_block(set, stream, small, alloc_size, true, new_base);
                }
            }
            let Some(id) = found else {
                let free = self.capacity - self.used;
                self.trace.push((Action::Oom, free, size, stream));
                self.stats.num_ooms += 1;
                return Err(Oom);
            };
            let remaining = self.blocks[id].size - size;
            let split = if self.meta[self.blocks[id].set].no_split {
                false
            } else if small {
                remaining >= K_MIN_BLOCK
            } else {
                size < self.max_split && remaining > K_SMALL_SIZE
            };
            let already_split = self.blocks[id].is_split();
            let block = if split {
                let mut b = self.blocks[id].clone();
                b.size = size;
                b.next = Some(id);
                self.blocks.push(b);
                let nb = self.blocks.len() - 1;
                if let Some(prev) = self.blocks[id].prev {
                    self.blocks[prev].next = Some(nb);
                }
                self.blocks[id].prev = Some(nb);
                self.blocks[id].ptr += size;
                self.blocks[id].size -= size;
                self.insert_into_blocks(id);
                if already_split {
                    self.stats.dec("inactive_split_bytes", small, size);
                } else {
                    let rest = self.blocks[id].size;
                    self.stats.inc("inactive_split_bytes", small, rest);
                    self.stats.inc("inactive_split", small, 1);
                }
                nb
            } else {
                if already_split {
                    let bsize = self.blocks[id].size;
                    self.stats.dec("inactive_split_bytes", small, bsize);
                    self.stats.dec("inactive_split", small, 1);
                }
                id
            };
            let b = &mut self.blocks[block];
            b.allocated = true;
            b.requested = orig;
            let (bsize, ptr) = (b.size, b.ptr);
            self.trace.push((Action::Alloc, ptr, orig, stream));
            self.stats.inc("allocation", small, 1);
            self.stats.inc("allocated_bytes", small, bsize);
            self.stats.inc("active", small, 1);
            self.stats.inc("active_bytes", small, bsize);
            self.stats.inc("requested_bytes", small, orig);
            if bsize >= self.max_split {
                self.stats.oversize_allocations.inc(1);
            }
            Ok((block, ptr))
        }

        pub fn record_stream(&mut self, id: usize, stream: u64) {
            self.note(stream);
            if stream != self.blocks[id].stream {
                self.blocks[id].stream_uses.insert(stream);
            }
        }

        pub fn free(&mut self, id: usize) {
            let b = &mut self.blocks[id];
            b.allocated = false;
            self.trace
                .push((Action::FreeRequested, b.ptr, b.requested, b.stream));
            let (small, size) = (b.small, b.size);
            self.stats.dec("allocation", small, 1);
            self.stats.dec("allocated_bytes", small, size);
            if size >= self.max_split {
                self.stats.oversize_allocations.dec(1);
            }
            let uses = std::mem::take(&mut self.blocks[id].stream_uses);
            if uses.is_empty() {
                self.free_block(id);
            } else {
                for s in uses {
                    self.blocks[id].event_count += 1;
                    self.events.entry(s).or_default().push_back((id, false));
                }
            }
        }

        fn mergeable(&self, other: Option<usize>) -> Option<usize> {
            let o = other?;
            let b = &self.blocks[o];
            (!b.allocated && b.event_count == 0 && b.stream_uses.is_empty()).then_some(o)
        }

        fn free_block(&mut self, id: usize) {
            let (small, orig_size, requested) = {
                let b = &self.blocks[id];
                (b.small, b.size, b.requested)
            };
            let b = &self.blocks[id];
            self.trace
                .push((Action::FreeCompleted, b.ptr, b.requested, b.stream));
            let mut net_blocks = 0i64;
            let mut net_bytes = 0i64;
            if let Some(p) = self.mergeable(self.blocks[id].prev) {
                self.remove_from_blocks(p);
                let (pptr, psize, pprev) =
                    (self.blocks[p].ptr, self.blocks[p].size, self.blocks[p].prev);
                self.blocks[id].ptr = pptr;
                self.blocks[id].size += psize;
                self.blocks[id].prev = pprev;
                if let Some(pp) = pprev {
                    self.blocks[pp].next = Some(id);
                }
                self.blocks[p].live = false;
                net_blocks -= 1;
                net_bytes -= psize as i64;
            }
            if let Some(n) = self.mergeable(self.blocks[id].next) {
                self.remove_from_blocks(n);
                let (nsize, nnext) = (self.blocks[n].size, self.blocks[n].next);
                self.blocks[id].size += nsize;
                self.blocks[id].next = nnext;
                if let Some(nn) = nnext {
                    self.blocks[nn].prev = Some(id);
                }
                self.blocks[n].live = false;
                net_blocks -= 1;
                net_bytes -= nsize as i64;
            }
            self.insert_into_blocks(id);
            if self.blocks[id].is_split() {
                net_blocks += 1;
                net_bytes += self.blocks[id].size as i64;
            }
            for (name, net) in [
                ("inactive_split", net_blocks),
                ("inactive_split_bytes", net_bytes),
            ] {
                if net > 0 {
                    self.stats.inc(name, small, net as u64);
                } else if net < 0 {
                    self.stats.dec(name, small, (-net) as u64);
                }
            }
            self.stats.dec("active", small, 1);
            self.stats.dec("active_bytes", small, orig_size);
            self.stats.dec("requested_bytes", small, requested);
        }
    }
}

/// strata's history against the model's trace: the same entries, action,
/// address, size and stream, in the same order (PyTorch's `record_trace`
/// calls of `malloc`, `free`, `free_block`, `alloc_block`, `release_block`
/// and the `OOM` entry).
fn compare_traces(a: &strata_alloc::CachingAllocator, m: &model::Model, what: &str) {
    use strata_alloc::history::Action;
    let ours: Vec<(Action, u64, u64, u64)> = a
        .history()
        .iter()
        .map(|e| (e.action, e.addr, e.size, e.stream.0))
        .collect();
    let n = ours.len().min(m.trace.len());
    if let Some(i) = (0..n).find(|&i| ours[i] != m.trace[i]) {
        let from = i.saturating_sub(4);
        panic!(
            "{what}: trace entry {i} differs\nstrata:  {:?}\nPyTorch: {:?}",
            &ours[from..(i + 3).min(ours.len())],
            &m.trace[from..(i + 3).min(m.trace.len())]
        );
    }
    assert_eq!(ours.len(), m.trace.len(), "{what}: trace lengths");
}

/// strata's snapshot against the model's (PyTorch's `snapshot()`).
fn compare_snapshots(a: &strata_alloc::CachingAllocator, m: &mut model::Model, what: &str) {
    use strata_alloc::snapshot::BlockState;
    let ours: Vec<_> = a
        .snapshot()
        .iter()
        .map(|g| {
            let blocks: Vec<(u64, u64, u8)> = g
                .blocks
                .iter()
                .map(|b| {
                    let state = match b.state {
                        BlockState::Inactive => 0,
                        BlockState::ActiveAllocated => 1,
                        BlockState::ActivePendingFree => 2,
                    };
                    (b.address, b.size, state)
                })
                .collect();
            (
                g.address,
                g.total_size,
                g.allocated_size,
                g.active_size,
                g.requested_size,
                g.stream.0,
                g.segment_type == "small",
                blocks,
            )
        })
        .collect();
    let want = m.snapshot();
    assert_eq!(ours.len(), want.len(), "{what}: segments");
    for (o, w) in ours.iter().zip(&want) {
        assert_eq!(o, w, "{what}: segment {:#x}", w.0);
    }
}

/// The reference model and strata run the same random calls (allocations of
/// every size class on three streams, frees, `record_stream` and the
/// completion of streams' work, `empty_cache`, requests beyond the device),
/// under PyTorch's default settings, `max_split_size_mb` (20, the least, and
/// 40), garbage collection under a memory fraction, `roundup_power2_divisions`,
/// `max_non_split_rounding_mb` and `large_segment_size_mb`. After every call
/// each statistic of `memory_stats()` and the address of every allocation
/// agree with the model of PyTorch's allocator; now and then the snapshot
/// does too; at the end, the history.
#[test]
fn random_calls_agree_with_a_model_of_pytorchs_allocator() {
    use model::Model;
    use std::sync::Arc;
    use strata_alloc::driver::sim::SimDriver;
    use strata_alloc::{AllocatorConfig, CachingAllocator, RawAllocation};

    let capacity = 256 * MIB;
    /// Settings, memory fraction, and what the model makes of them: the
    /// garbage-collection threshold, `max_split_size_mb`, the divisions.
    type Case = (&'static str, Option<f64>, Option<f64>, Option<u64>, u64);
    let cases: [Case; 8] = [
        ("", None, None, None, 0),
        ("max_split_size_mb:40", None, None, Some(40), 0),
        ("max_split_size_mb:20", None, None, Some(20), 0),
        (
            "garbage_collection_threshold:0.5",
            Some(0.75),
            Some(0.5),
            None,
            0,
        ),
        (
            "garbage_collection_threshold:0.4,max_split_size_mb:40",
            Some(0.75),
            Some(0.4),
            Some(40),
            0,
        ),
        ("roundup_power2_divisions:4", None, None, None, 4),
        (
            "max_split_size_mb:40,max_non_split_rounding_mb:30",
            None,
            None,
            Some(40),
            0,
        ),
        ("large_segment_size_mb:32", None, None, None, 0),
    ];
    let (mut total_gc_released, mut total_oversize_released) = (0, 0);
    for (case, &(conf, fraction, gc, max_split, divisions)) in cases.iter().enumerate() {
        let (mut ooms, mut retries, mut gc_released, mut oversize_released) = (0, 0, 0, 0);
        for seed in 0..4u64 {
            // Odd seeds on a device with virtual memory, expandable
            // segments turned off: the same ordinary segments.
            let (d, settings) = if seed % 2 == 0 {
                (Arc::new(SimDriver::new(capacity, 0)), conf.to_string())
            } else {
                (
                    Arc::new(SimDriver::new(capacity, 2 * MIB)),
                    format!("expandable_segments:False,{conf}"),
                )
            };
            let a = CachingAllocator::new(d.clone(), AllocatorConfig::parse(&settings).unwrap());
            assert!(!a.expandable_segments());
            a.record_history(Some(1 << 22));
            if let Some(f) = fraction {
                a.set_memory_fraction(f).unwrap();
            }
            let mb = |key: &str| {
                conf.split(',')
                    .find_map(|kv| kv.strip_prefix(key))
                    .map(|v| v.parse::<u64>().unwrap())
            };
            let mut m = Model::new(
                capacity,
                fraction,
                gc,
                max_split,
                divisions,
                mb("large_segment_size_mb:"),
                mb("max_non_split_rounding_mb:"),
            );
            let mut rng = Lcg(seed * 1000 + case as u64 + 1);
            let streams = [0u64, 7, 9];
            let mut live: Vec<(RawAllocation, usize)> = Vec::new();
            for step in 0..1500 {
                let what = format!("{conf} seed {seed} step {step}");
                let op = rng.below(100);
                if op < 45 || live.is_empty() {
                    let size = match rng.below(10) {
                        0..=3 => 1 + rng.below(MIB + 4096),
                        4..=6 => MIB + rng.below(9 * MIB),
                        7 | 8 => 10 * MIB + rng.below(50 * MIB),
                        _ => {
                            if rng.below(4) == 0 {
                                capacity + rng.below(capacity)
                            } else {
                                rng.below(120 * MIB) + 1
                            }
                        }
                    };
                    let s = streams[rng.below(3) as usize];
                    match a.allocate_raw(size, StreamId(s)) {
                        Ok(r) => {
                            let (id, ptr) = m.malloc(size, s, r.ptr()).unwrap_or_else(|_| {
                                panic!(
                                    "{what}: PyTorch runs out of memory for {size} on stream {s}"
                                )
                            });
                            assert_eq!(r.ptr(), ptr, "{what}: the address of {size} on stream {s}");
                            live.push((r, id));
                        }
                        Err(e) => {
                            assert!(e.out_of_memory().is_some(), "{what}: {e}");
                            assert!(
                                m.malloc(size, s, 0).is_err(),
                                "{what}: PyTorch serves {size} on stream {s}, strata: {e}"
                            );
                        }
                    }
                } else if op < 80 {
                    let (r, id) = live.swap_remove(rng.below(live.len() as u64) as usize);
                    a.free_raw(r).unwrap();
                    m.free(id);
                } else if op < 88 {
                    let (r, id) = live[rng.below(live.len() as u64) as usize];
                    let s = streams[rng.below(3) as usize];
                    a.record_stream(&r, StreamId(s)).unwrap();
                    m.record_stream(id, s);
                } else if op < 96 {
                    let s = streams[rng.below(3) as usize];
                    d.complete_stream(StreamId(s));
                    m.complete_stream(s);
                } else if op < 98 {
                    a.empty_cache().unwrap();
                    m.empty_cache();
                } else {
                    compare_snapshots(&a, &mut m, &what);
                }
                let ours = a.memory_stats().to_map();
                for (k, v) in m.stats() {
                    assert_eq!(ours.get(&k), Some(&v), "{what}: {k}");
                }
            }
            compare_traces(&a, &m, &format!("{conf} seed {seed}"));
            a.check_consistency().unwrap();
            let st = a.memory_stats();
            ooms += st.num_ooms;
            retries += st.num_alloc_retries;
            gc_released += m.gc_released;
            oversize_released += m.oversize_released;
        }
        // Each run went through the slow paths its settings enable.
        assert!(
            ooms > 0 && retries > ooms,
            "{conf}: {ooms} ooms, {retries} retries"
        );
        if gc.is_none() {
            assert_eq!(gc_released, 0, "{conf}");
        }
        total_gc_released += gc_released;
        if max_split.is_none() {
            assert_eq!(oversize_released, 0, "{conf}");
        }
        total_oversize_released += oversize_released;
    }
    assert!(total_gc_released > 0, "no garbage collection ran");
    assert!(
        total_oversize_released > 0,
        "no oversize block was released"
    );
}

// ----- statistics against the snapshot, on every kind of segment -------------------

/// PyTorch's `_check_memory_stat_consistency` (`test/test_cuda_multigpu.py`):
/// from `memory_snapshot()` alone, the current value of `segment` (ordinary
/// segments only), `allocated_bytes`, `reserved_bytes`, `active_bytes`,
/// `requested_bytes`, `allocation`, `active` and `inactive_split*` (the
/// inactive blocks of split ordinary segments), for `all` and each pool;
/// each segment's requested size is the sum over its active blocks.
fn stat_consistency(a: &strata_alloc::CachingAllocator, what: &str) {
    use std::collections::BTreeMap;
    use strata_alloc::snapshot::BlockState;
    let mut want: BTreeMap<String, i64> = BTreeMap::new();
    for name in [
        "segment",
        "allocated_bytes",
        "reserved_bytes",
        "active_bytes",
        "requested_bytes",
        "allocation",
        "active",
        "inactive_split",
        "inactive_split_bytes",
    ] {
        for p in ["all", "small_pool", "large_pool"] {
            want.insert(format!("{name}.{p}.current"), 0);
        }
    }
    for seg in a.snapshot() {
        let pool = format!("{}_pool", seg.segment_type);
        let mut add = |k: &str, v: u64| {
            for p in ["all", pool.as_str()] {
                *want.get_mut(&format!("{k}.{p}.current")).unwrap() += v as i64;
            }
        };
        if !seg.is_expandable {
            add("segment", 1);
        }
        add("allocated_bytes", seg.allocated_size);
        add("reserved_bytes", seg.total_size);
        add("active_bytes", seg.active_size);
        add("requested_bytes", seg.requested_size);
        let split = seg.blocks.len() > 1;
        let mut requested = 0;
        for b in &seg.blocks {
            if b.state == BlockState::ActiveAllocated {
                add("allocation", 1);
            }
            if b.state != BlockState::Inactive {
                requested += b.requested_size;
                add("active", 1);
            }
            if b.state == BlockState::Inactive && split && !seg.is_expandable {
                add("inactive_split", 1);
                add("inactive_split_bytes", b.size);
            }
        }
        assert_eq!(
            requested, seg.requested_size,
            "{what}: segment {:#x}",
            seg.address
        );
    }
    let have = a.memory_stats().to_map();
    for (k, v) in want {
        assert_eq!(have[&k], v, "{what}: {k}");
    }
}

/// The consistency check of `test_memory_stats` after every call of a random
/// run on three streams with `record_stream`, completion of streams' work,
/// `empty_cache`, private pools, requests beyond the device and, in one
/// run, expandable segments switched on and off (as
/// `test_max_split_expandable` does), under PyTorch's default segments and
/// strata's expandable ones.
#[test]
fn statistics_agree_with_the_snapshot_through_random_calls() {
    use std::sync::Arc;
    use strata_alloc::driver::sim::SimDriver;
    use strata_alloc::{AllocatorConfig, CachingAllocator, RawAllocation};

    let capacity = 256 * MIB;
    for (run, conf) in [
        "expandable_segments:False",
        "expandable_segments:True",
        "expandable_segments:True,max_split_size_mb:40",
        "toggle",
    ]
    .into_iter()
    .enumerate()
    {
        for seed in 0..3u64 {
            let d = Arc::new(SimDriver::new(capacity, 2 * MIB));
            let start = if conf == "toggle" { "" } else { conf };
            let a = CachingAllocator::new(d.clone(), AllocatorConfig::parse(start).unwrap());
            let pool = a.mem_pool(MemPoolOptions::default());
            let mut rng = Lcg(seed * 31 + run as u64 + 5);
            let streams = [0u64, 3, 8];
            let mut live: Vec<RawAllocation> = Vec::new();
            for step in 0..1200 {
                let what = format!("{conf} seed {seed} step {step}");
                let op = rng.below(100);
                if op < 45 || live.is_empty() {
                    let size = match rng.below(10) {
                        0..=3 => 1 + rng.below(MIB + 4096),
                        4..=6 => MIB + rng.below(9 * MIB),
                        7 | 8 => 10 * MIB + rng.below(50 * MIB),
                        _ => capacity / 2 + rng.below(capacity),
                    };
                    let s = StreamId(streams[rng.below(3) as usize]);
                    let r = if rng.below(6) == 0 {
                        let _g = pool.activate().unwrap();
                        a.allocate_raw(size, s)
                    } else {
                        a.allocate_raw(size, s)
                    };
                    match r {
                        Ok(r) => live.push(r),
                        Err(e) => assert!(e.out_of_memory().is_some(), "{what}: {e}"),
                    }
                } else if op < 78 {
                    let r = live.swap_remove(rng.below(live.len() as u64) as usize);
                    a.free_raw(r).unwrap();
                } else if op < 86 {
                    let r = live[rng.below(live.len() as u64) as usize];
                    a.record_stream(&r, StreamId(streams[rng.below(3) as usize]))
                        .unwrap();
                } else if op < 94 {
                    d.complete_stream(StreamId(streams[rng.below(3) as usize]));
                } else if op < 97 || conf != "toggle" {
                    a.empty_cache().unwrap();
                } else {
                    let on = rng.below(2) == 0;
                    a.set_allocator_settings(&format!(
                        "expandable_segments:{}",
                        if on { "True" } else { "False" }
                    ))
                    .unwrap();
                }
                stat_consistency(&a, &what);
            }
            for r in live {
                a.free_raw(r).unwrap();
            }
            d.complete_all_events();
            drop(pool);
            a.empty_cache().unwrap();
            stat_consistency(&a, &format!("{conf} seed {seed}: the end"));
            assert_eq!(a.memory_reserved(), 0, "{conf} seed {seed}");
            a.check_consistency().unwrap();
        }
    }
}

/// The model of PyTorch's allocator with private pools (`MemPool`,
/// `use_mem_pool`): requests routed to a pool take its free blocks or new
/// segments of its own (a `no_split` pool hands its blocks out whole), frees
/// go back to the block's pool, `empty_cache` releases the default pools
/// and the pools no longer in use, and dropping a pool (`releasePool`, then
/// `emptyCache(id)`) waits for its own blocks' events and releases its free
/// segments, the rest once their blocks are freed. Random calls on three
/// streams, with pools made and dropped along the way; every statistic and
/// address agree after each call. (A request routed to a pool is made only
/// while no free waits for events, and on a device large enough that it
/// never runs out: there PyTorch skips `process_events` and, in some
/// versions, the full release, while a pool's context counts as a capture.)
#[test]
fn random_calls_with_private_pools_agree_with_the_model() {
    use model::Model;
    use std::sync::Arc;
    use strata_alloc::driver::sim::SimDriver;
    use strata_alloc::{AllocatorConfig, CachingAllocator, MemPool, RawAllocation};

    let capacity = 512 * MIB;
    let (mut dropped_with_live, mut lent, mut ooms, mut collected) = (0, 0, 0, 0);
    for (case, (conf, max_split, gc)) in [
        ("", None, None),
        ("max_split_size_mb:40", Some(40), None),
        ("garbage_collection_threshold:0.5", None, Some(0.5)),
    ]
    .into_iter()
    .enumerate()
    {
        for seed in 0..4u64 {
            let d = Arc::new(SimDriver::new(capacity, 0));
            let a = CachingAllocator::new(d.clone(), AllocatorConfig::parse(conf).unwrap());
            a.set_memory_fraction(0.5).unwrap();
            a.record_history(Some(1 << 22));
            let mut m = Model::new(capacity, Some(0.5), gc, max_split, 0, None, None);
            let mut rng = Lcg(seed * 77 + case as u64 + 3);
            let mut pools: Vec<(MemPool, usize)> = Vec::new();
            let make_pool = |m: &mut Model, no_split: bool, use_on_oom: bool| {
                let p = a.mem_pool(MemPoolOptions {
                    no_split,
                    use_on_oom,
                });
                (p, m.new_pool(no_split, use_on_oom))
            };
            // One `use_on_oom` pool for the whole run (the order in which
            // PyTorch tries several is a set's), and pools made and dropped.
            let (lender, lender_set) = make_pool(&mut m, false, true);
            pools.push(make_pool(&mut m, false, false));
            pools.push(make_pool(&mut m, true, false));
            let streams = [0u64, 5, 6];
            let mut live: Vec<(RawAllocation, usize, usize)> = Vec::new();
            let size_of = |rng: &mut Lcg| match rng.below(10) {
                0..=3 => 1 + rng.below(MIB + 4096),
                4..=6 => MIB + rng.below(9 * MIB),
                _ => 10 * MIB + rng.below(50 * MIB),
            };
            for step in 0..1500 {
                let what = format!("{conf} seed {seed} step {step}");
                let op = rng.below(100);
                let s = streams[rng.below(3) as usize];
                if op < 40 || live.is_empty() {
                    let size = if rng.below(40) == 0 {
                        capacity + rng.below(capacity)
                    } else {
                        size_of(&mut rng)
                    };
                    match a.allocate_raw(size, StreamId(s)) {
                        Ok(r) => {
                            let (id, ptr) = m
                                .malloc(size, s, r.ptr())
                                .unwrap_or_else(|_| panic!("{what}: PyTorch fails {size}"));
                            assert_eq!(r.ptr(), ptr, "{what}: the address of {size}");
                            let set = m.set_of(id);
                            if set == lender_set {
                                lent += 1;
                            }
                            live.push((r, id, set));
                        }
                        Err(e) => {
                            assert!(e.out_of_memory().is_some(), "{what}: {e}");
                            assert!(
                                m.malloc(size, s, 0).is_err(),
                                "{what}: PyTorch serves {size}"
                            );
                            ooms += 1;
                        }
                    }
                } else if op < 52 {
                    if m.events_pending() || pools.is_empty() {
                        continue;
                    }
                    let size = size_of(&mut rng);
                    let k = rng.below(pools.len() as u64 + 1) as usize;
                    let (pool, set) = if k == pools.len() {
                        (&lender, lender_set)
                    } else {
                        (&pools[k].0, pools[k].1)
                    };
                    if m.clone().malloc_in(set, size, s, 0).is_err() {
                        // It would need the release PyTorch skips in a
                        // pool's context in some versions.
                        continue;
                    }
                    let r = {
                        let _in_pool = pool.activate().unwrap();
                        a.allocate_raw(size, StreamId(s)).unwrap()
                    };
                    let (id, ptr) = m
                        .malloc_in(set, size, s, r.ptr())
                        .unwrap_or_else(|_| panic!("{what}: PyTorch fails {size} in pool {set}"));
                    assert_eq!(r.ptr(), ptr, "{what}: the address of {size} in pool {set}");
                    live.push((r, id, set));
                } else if op < 80 {
                    let (r, id, _) = live.swap_remove(rng.below(live.len() as u64) as usize);
                    a.free_raw(r).unwrap();
                    m.free(id);
                } else if op < 86 {
                    let (r, id, _) = live[rng.below(live.len() as u64) as usize];
                    a.record_stream(&r, StreamId(s)).unwrap();
                    m.record_stream(id, s);
                } else if op < 93 {
                    d.complete_stream(StreamId(s));
                    m.complete_stream(s);
                } else if op < 95 {
                    a.empty_cache().unwrap();
                    m.empty_cache();
                } else if op < 97 {
                    compare_snapshots(&a, &mut m, &what);
                } else if !pools.is_empty() {
                    let (pool, set) = pools.swap_remove(rng.below(pools.len() as u64) as usize);
                    if live.iter().any(|l| l.2 == set) {
                        dropped_with_live += 1;
                    }
                    drop(pool);
                    m.drop_pool(set);
                    let no_split = rng.below(2) == 0;
                    pools.push(make_pool(&mut m, no_split, false));
                }
                let ours = a.memory_stats().to_map();
                for (k, v) in m.stats() {
                    assert_eq!(ours.get(&k), Some(&v), "{what}: {k}");
                }
            }
            for (r, id, _) in live {
                a.free_raw(r).unwrap();
                m.free(id);
            }
            collected += m.gc_released;
            pools.push((lender, lender_set));
            for (pool, set) in pools {
                drop(pool);
                m.drop_pool(set);
            }
            a.empty_cache().unwrap();
            m.empty_cache();
            let ours = a.memory_stats().to_map();
            for (k, v) in m.stats() {
                assert_eq!(ours.get(&k), Some(&v), "{conf} seed {seed} at the end: {k}");
            }
            compare_traces(&a, &m, &format!("{conf} seed {seed}"));
            a.check_consistency().unwrap();
        }
    }
    assert!(
        dropped_with_live > 0,
        "no pool was dropped with live blocks"
    );
    assert!(collected > 0, "no garbage collection ran");
    assert!(
        lent > 0 && ooms > 0,
        "{lent} blocks lent, {ooms} out-of-memory errors"
    );
}
