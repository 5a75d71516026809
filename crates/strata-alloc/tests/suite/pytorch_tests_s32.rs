//! PyTorch's allocator tests, session 32: the behaviours of PyTorch's own
//! tests that the earlier parity files (`pytorch_parity.rs`, `_s29.rs`,
//! `_s31.rs`, `pytorch_pinned_parity.rs`, `settings.rs`, `mempool.rs`,
//! `history_options.rs`) left unchecked: `TestMemPool`'s threaded tests,
//! the limiting cases of the per-process memory fraction, `test_accelerator.py`'s
//! memory tests, `memory_summary`'s row order, and the parsing of
//! `PYTORCH_ALLOC_CONF` as c10's `AcceleratorAllocatorConfig::parseArgs` and
//! `CUDAAllocatorConfig::parseArgs` (newest, with `large_segment_size_mb`) do
//! it, which `test_allocator_settings` and `AllocatorConfigTest` exercise.
//!
//! Each test names the PyTorch test it mirrors (`test/test_cuda.py` unless
//! said otherwise) and runs on the simulated device. Expected figures follow
//! from PyTorch's semantics (segment sizes, which pool a block belongs to,
//! when its `set_fraction` flag is on), worked out in the comments, never
//! from strata's output. Where strata differs on purpose (a private pool's
//! segments are ordinary even with expandable segments on: docs/allocator.md,
//! "Private memory pools"), the test says so.

use crate::common;

use common::{decode, key, list, sim_device as sim, stat};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Barrier};
use strata_alloc::{
    AllocError, AllocatorConfig, CachingAllocator, ConfigError, MemPoolOptions, StreamId,
};

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
const S0: StreamId = StreamId::DEFAULT;

/// PyTorch's default segments, and strata's default expandable segments.
const MODES: [&str; 2] = ["expandable_segments:False", "expandable_segments:True"];

/// The pool id of every segment of a snapshot, with its segment count.
fn segments_by_pool(a: &CachingAllocator) -> BTreeMap<(u64, u64), usize> {
    let mut out = BTreeMap::new();
    for s in a.snapshot() {
        *out.entry(s.pool_id).or_default() += 1;
    }
    out
}

// ----- TestMemPool -------------------------------------------------------------------

/// Mirrors `TestMemPool.test_mempool_multithread`: four threads each create
/// a pool at the same moment; pool ids are handed out atomically, so the four
/// ids are distinct, none is the default pools' `(0, 0)`, and each has 0 as
/// its first element (a user-created pool's id is `(0, n)`).
#[test]
fn test_mempool_multithread() {
    let (_, a) = sim("", 8 * GIB);
    let barrier = Arc::new(Barrier::new(4));
    let ids: Vec<(u64, u64)> = (0..4)
        .map(|_| {
            let (a, barrier) = (Arc::clone(&a), Arc::clone(&barrier));
            std::thread::spawn(move || {
                barrier.wait();
                a.mem_pool(MemPoolOptions::default()).id()
            })
        })
        .collect::<Vec<_>>()
        .into_iter()
        .map(|t| t.join().unwrap())
        .collect();
    let distinct: BTreeSet<_> = ids.iter().copied().collect();
    assert_eq!(distinct.len(), 4, "{ids:?}");
    assert!(
        ids.iter().all(|&(first, n)| first == 0 && n != 0),
        "{ids:?}"
    );
}

/// Mirrors `TestMemPool.test_mempool_emptycache_multithread`: four threads,
/// each inside its own pool, allocate four floats, free them and call
/// `empty_cache`. A pool in use keeps its cached segments through
/// `empty_cache` (PyTorch releases a private pool's blocks only once the pool
/// is no longer in use), so each pool still has exactly one segment: the
/// 2 MiB small segment its 16-byte block came from, now free.
#[test]
fn test_mempool_emptycache_multithread() {
    for mode in MODES {
        let (_, a) = sim(mode, 8 * GIB);
        let pools: Vec<_> = (0..4)
            .map(|_| a.mem_pool(MemPoolOptions::default()))
            .collect();
        std::thread::scope(|sc| {
            for p in &pools {
                let a = &a;
                sc.spawn(move || {
                    let _g = p.activate().unwrap();
                    let x = a.allocate(4 * 4, S0).unwrap();
                    drop(x);
                    a.empty_cache().unwrap();
                });
            }
        });
        for p in &pools {
            let segs = p.snapshot();
            assert_eq!(segs.len(), 1, "{mode}: a single segment");
            assert_eq!(segs[0].total_size, 2 * MIB, "{mode}");
            assert_eq!(segs[0].active_size, 0, "{mode}");
        }
        // The default pools hold nothing: only the pools' segments exist.
        assert_eq!(a.memory_reserved(), 4 * 2 * MIB, "{mode}");
        drop(pools);
        assert_eq!(a.memory_reserved(), 0, "{mode}: dropped pools release");
        a.check_consistency().unwrap();
    }
}

/// Mirrors `TestMemPool.test_mempool_ctx_multithread`: the main thread holds
/// 1 MiB in the default pools (a 2 MiB small segment, half used), then inside
/// a pool allocates and frees 1 MiB (the pool's own 2 MiB segment) and waits;
/// meanwhile another thread, not routed to the pool, allocates 1 MiB. That
/// request goes to the default pools, into the free half of their segment,
/// not to the pool's free block: two segments, 2 MiB active in the default
/// pools' and none in the pool's.
#[test]
fn test_mempool_ctx_multithread() {
    for mode in MODES {
        let (_, a) = sim(mode, 8 * GIB);
        a.empty_cache().unwrap();
        assert!(a.snapshot().is_empty(), "{mode}: empty at the start");
        let nelem = MIB; // int8
        let (to_side, side_rx) = std::sync::mpsc::channel::<()>();
        let (to_main, main_rx) = std::sync::mpsc::channel::<()>();
        let a2 = Arc::clone(&a);
        let side = std::thread::spawn(move || {
            side_rx.recv().unwrap();
            let out = a2.allocate(nelem, S0).unwrap();
            let segs = a2.snapshot();
            to_main.send(()).unwrap();
            (segs, out)
        });
        let pool = a.mem_pool(MemPoolOptions::default());
        let out1 = a.allocate(nelem, S0).unwrap();
        {
            let _g = pool.activate().unwrap();
            let out = a.allocate(nelem, S0).unwrap();
            drop(out);
            to_side.send(()).unwrap();
            main_rx.recv().unwrap();
        }
        let (segs, out) = side.join().unwrap();
        assert_eq!(segs.len(), 2, "{mode}: two segments");
        let mut active: BTreeMap<(u64, u64), u64> = BTreeMap::new();
        for s in &segs {
            *active.entry(s.pool_id).or_default() += s.active_size;
        }
        assert_eq!(active[&(0, 0)], 2 * MIB, "{mode}: the default pools'");
        assert_eq!(active[&pool.id()], 0, "{mode}: the pool's");
        drop((out, out1));
    }
}

/// Mirrors `TestBlockStateAbsorption.test_allocate_in_thread_to_pool`: a pool
/// holding one small segment (a 4-float tensor) is used by one thread for ten
/// rounds of `alloc_three` (two 20 MiB tensors and their 20 MiB sum, freed at
/// the end of each round), then one more round outside the pool, while
/// another thread allocates pairs of 20 MiB tensors in the default pools. The
/// pool ends with four segments: the small one and three 20 MiB large ones
/// (each 20 MiB request gets a segment of exactly 20 MiB: at least 10 MiB,
/// rounded to 2 MiB), reused round after round; the other thread's segments
/// are not the pool's. PyTorch expects 2 when expandable segments are on (one
/// small, one growing large expandable segment); strata's private pools use
/// ordinary segments in both modes (docs/allocator.md), so 4 in both. Once
/// the pool is dropped and the cache emptied, it has no segment left.
#[test]
fn test_allocate_in_thread_to_pool() {
    const LARGE_BUFFER: u64 = 20 * MIB;
    for mode in MODES {
        let (_, a) = sim(mode, 16 * GIB);
        let pool = a.mem_pool(MemPoolOptions::default());
        let pool_id = pool.id();
        let output = {
            let _g = pool.activate().unwrap();
            a.allocate(4 * 4, S0).unwrap()
        };
        drop(output);
        assert_eq!(pool.snapshot().len(), 1, "{mode}");
        let alloc_three = |a: &Arc<CachingAllocator>| {
            let x = a.allocate(LARGE_BUFFER, S0).unwrap();
            let y = a.allocate(LARGE_BUFFER, S0).unwrap();
            let z = a.allocate(LARGE_BUFFER, S0).unwrap();
            drop((x, y, z));
        };
        std::thread::scope(|sc| {
            sc.spawn(|| {
                {
                    let _g = pool.activate().unwrap();
                    for _ in 0..10 {
                        alloc_three(&a);
                    }
                }
                alloc_three(&a);
            });
            sc.spawn(|| {
                for _ in 0..10 {
                    let x = a.allocate(LARGE_BUFFER, S0).unwrap();
                    let y = a.allocate(LARGE_BUFFER, S0).unwrap();
                    drop((x, y));
                }
            });
        });
        let segs = pool.snapshot();
        assert_eq!(segs.len(), 4, "{mode}: one small and three large");
        let mut sizes: Vec<u64> = segs.iter().map(|s| s.total_size).collect();
        sizes.sort_unstable();
        assert_eq!(
            sizes,
            [2 * MIB, LARGE_BUFFER, LARGE_BUFFER, LARGE_BUFFER],
            "{mode}"
        );
        drop(pool);
        a.empty_cache().unwrap();
        assert!(
            !segments_by_pool(&a).contains_key(&pool_id),
            "{mode}: the pool has no segment left"
        );
        a.check_consistency().unwrap();
    }
}

/// Mirrors `TestMemPool.test_mempool_empty_cache`: a 4 MiB tensor in the
/// default pools and another in a pool; both freed and the pool dropped. The
/// snapshot is not empty: the default pools' segment stays cached (nothing
/// emptied the cache), while the dropped pool's free segment went back to the
/// driver (`~MemPool` releases the pool and empties its cache). With ordinary
/// segments that cached segment is the 20 MiB one of a 4 MiB request.
#[test]
fn test_mempool_empty_cache() {
    for mode in MODES {
        let (_, a) = sim(mode, 8 * GIB);
        a.empty_cache().unwrap();
        let pool = a.mem_pool(MemPoolOptions::default());
        let x = a.allocate(1024 * 1024 * 4, S0).unwrap();
        let y = {
            let _g = pool.activate().unwrap();
            a.allocate(1024 * 1024 * 4, S0).unwrap()
        };
        drop(y);
        drop(x);
        drop(pool);
        let by_pool = segments_by_pool(&a);
        assert!(
            !by_pool.is_empty(),
            "{mode}: expected more than one segment"
        );
        assert_eq!(
            by_pool.keys().copied().collect::<Vec<_>>(),
            [(0, 0)],
            "{mode}: only the default pools' segment is left"
        );
        if mode == MODES[0] {
            assert_eq!(a.memory_reserved(), 20 * MIB);
        }
        assert_eq!(a.memory_allocated(), 0, "{mode}");
    }
}

/// Mirrors `TestMemPool.test_mempool_expandable`: with
/// `expandable_segments:True`, a 1 MiB tensor allocated in a private pool
/// lives in an ordinary segment and one allocated outside it in an expandable
/// segment: two segments, exactly one expandable. (PyTorch's test gives the
/// pool a user allocator, which has no expandable segments; strata's private
/// pools never use expandable segments, so the same holds without one.)
#[test]
fn test_mempool_expandable() {
    let (_, a) = sim("expandable_segments:True", 8 * GIB);
    assert!(a.expandable_segments());
    let pool = a.mem_pool(MemPoolOptions::default());
    let nelem = 1024 * 1024 / 4;
    let mut data = Vec::new();
    {
        let _g = pool.activate().unwrap();
        data.push(a.allocate(nelem * 4, S0).unwrap());
    }
    data.push(a.allocate(nelem * 4, S0).unwrap());
    let segments = a.snapshot();
    assert_eq!(segments.len(), 2, "expected to have 2 segments");
    let expandable = segments.iter().filter(|s| s.is_expandable).count();
    assert_eq!(expandable, 1, "expected to have 1 expandable segment only");
    let pool_seg = segments.iter().find(|s| s.pool_id == pool.id()).unwrap();
    assert!(!pool_seg.is_expandable);
}

// ----- the per-process memory fraction ---------------------------------------------

/// Mirrors the limiting case 0 of `test_get_per_process_memory_fraction`: a
/// fraction of 0 reads back as 0.0, and then (PyTorch's
/// `allowed_memory_maximum` is 0) no request can obtain device memory: a new
/// segment fails with an out-of-memory error that names the 0 bytes allowed,
/// while a request a cached block can serve still succeeds. Setting 1 lifts
/// the limit again.
#[test]
fn test_get_per_process_memory_fraction_zero() {
    for mode in MODES {
        let (_, a) = sim(mode, GIB);
        drop(a.allocate(4 * MIB, S0).unwrap());
        let cached = a.memory_reserved();
        assert!(cached >= 4 * MIB);
        a.set_memory_fraction(0.0).unwrap();
        assert_eq!(a.memory_fraction(), 0.0);
        // A cached block serves this one: no device memory needed.
        let hit = a.allocate(4 * MIB, S0).unwrap();
        assert_eq!(a.memory_reserved(), cached, "{mode}");
        // Anything that needs more device memory fails.
        let e = a.allocate(64 * MIB, S0).unwrap_err();
        let oom = e.out_of_memory().expect("an out-of-memory error");
        assert_eq!(oom.allowed, Some(0), "{mode}");
        assert!(e.to_string().contains("out of memory"), "{mode}: {e}");
        drop(hit);
        a.set_memory_fraction(1.0).unwrap();
        assert_eq!(a.memory_fraction(), 1.0);
        drop(a.allocate(64 * MIB, S0).unwrap());
        a.check_consistency().unwrap();
    }
}

/// Mirrors the refusals of `test_set_per_process_memory_fraction` (negative,
/// above 1) for the values Rust can pass that Python's type check would stop
/// earlier or that fail PyTorch's `0 <= fraction <= 1` check: NaN and the
/// infinities are refused with a typed error and change nothing; -0.0 passes
/// that check (it compares equal to 0) and limits like 0.
#[test]
fn test_set_per_process_memory_fraction_non_finite() {
    let (_, a) = sim("expandable_segments:False", GIB);
    a.set_memory_fraction(0.25).unwrap();
    for bad in [
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        1.0 + f64::EPSILON,
    ] {
        assert!(
            matches!(a.set_memory_fraction(bad), Err(AllocError::Config(_))),
            "{bad}"
        );
        assert_eq!(a.memory_fraction(), 0.25, "{bad}: unchanged");
    }
    a.set_memory_fraction(-0.0).unwrap();
    assert_eq!(a.memory_fraction(), 0.0);
    let e = a.allocate(MIB, S0).unwrap_err();
    assert_eq!(e.out_of_memory().unwrap().allowed, Some(0));
}

/// Garbage collection needs a memory fraction below 1. In PyTorch's newest
/// allocator `setMemoryFraction` records an allowed maximum only for a
/// fraction below 1 (1 clears it), and `malloc` collects only when an allowed
/// maximum exists and `garbage_collection_threshold` is above 0 (older
/// versions set a `set_fraction` flag for any fraction, 1 included; strata
/// follows the newest). `test_garbage_collect_expandable` sets the threshold
/// 0.5 with a fraction below 1.
///
/// On a 1 GiB device with ordinary segments: two 300 MiB tensors freed leave
/// 600 MiB cached. A 400 MiB request misses the cache (no block that large).
/// At fraction 1 nothing is collected and the request gets a new segment:
/// 1000 MiB reserved, no segment freed. At fraction 0.999 the threshold is
/// half of 0.999 GiB, about 511.5 MiB, which 600 MiB passes: the two cached
/// blocks are equally old (no search between their frees), so the pass frees
/// both (each is at least as old as the mean) before the new 400 MiB segment
/// is made: 400 MiB reserved, two segments freed, no out-of-memory retry.
#[test]
fn test_garbage_collect_needs_a_fraction_below_one() {
    for (fraction, reserved, freed) in [(1.0, 1000 * MIB, 0), (0.999, 400 * MIB, 2)] {
        let (_, a) = sim(
            "expandable_segments:False,garbage_collection_threshold:0.5",
            GIB,
        );
        a.set_memory_fraction(fraction).unwrap();
        assert_eq!(a.memory_fraction(), fraction);
        let x = a.allocate(300 * MIB, S0).unwrap();
        let y = a.allocate(300 * MIB, S0).unwrap();
        drop((x, y));
        assert_eq!(a.memory_reserved(), 600 * MIB);
        let z = a.allocate(400 * MIB, S0).unwrap();
        assert_eq!(a.memory_reserved(), reserved, "fraction {fraction}");
        assert_eq!(stat(&a, "num_device_free"), freed, "fraction {fraction}");
        assert_eq!(stat(&a, "num_alloc_retries"), 0, "no out-of-memory retry");
        drop(z);
        a.check_consistency().unwrap();
    }
}

// ----- TestCudaMallocAsync.test_memory_snapshot -------------------------------------

/// Mirrors the first check of `test_memory_snapshot`: every segment of the
/// snapshot carries a `frames` entry (PyTorch's `self.assertTrue("frames" in
/// seg)`), and so does every block, in both segment kinds, history on or
/// off, for the segments of the default pools and of a private pool.
#[test]
fn test_memory_snapshot_every_segment_has_frames() {
    for mode in MODES {
        for history in [false, true] {
            let (_, a) = sim(mode, 8 * GIB);
            if history {
                a.record_history(Some(1000));
            }
            let pool = a.mem_pool(MemPoolOptions::default());
            let keep = vec![
                a.allocate(2 * 311 * 411 * 4, S0).unwrap(),
                a.allocate(310 * 410 * 4, S0).unwrap(),
                a.allocate(30 * MIB, S0).unwrap(),
            ];
            let in_pool = {
                let _g = pool.activate().unwrap();
                a.allocate(MIB, S0).unwrap()
            };
            let doc = decode(&a.snapshot_pickle().unwrap());
            let segs = list(key(&doc, "segments"));
            assert!(segs.len() >= 3, "{mode}");
            for s in segs {
                list(key(s, "frames"));
                for b in list(key(s, "blocks")) {
                    list(key(b, "frames"));
                }
            }
            drop((keep, in_pool));
        }
    }
}

// ----- PYTORCH_ALLOC_CONF parsing (c10/core/AllocatorConfig.cpp, CUDAAllocatorConfig.cpp)

/// Mirrors the parsing of `max_split_size_mb` and `max_non_split_rounding_mb`
/// in c10's `AcceleratorAllocatorConfig` (`parseMaxSplitSize`,
/// `parseMaxNonSplitRoundingSize`, exercised by `test_allocator_settings` and
/// `AllocatorConfigTest`): the value is read as a `size_t`, must be at least
/// `kLargeBuffer / kMB` (20), and is then clamped to
/// `numeric_limits<size_t>::max() / kMB` before being multiplied by 1 MiB.
/// So a number of MiB whose byte count overflows 64 bits is accepted and
/// means the largest whole number of MiB that fits, (2^64 - 1) >> 20 MiB;
/// only a number that is no `size_t` at all (2^64) is refused.
#[test]
fn allocator_config_clamps_huge_split_sizes() {
    let top = (u64::MAX >> 20) << 20;
    for mb in [u64::MAX >> 20, (u64::MAX >> 20) + 1, 1 << 50, u64::MAX] {
        let c = AllocatorConfig::parse(&format!(
            "max_split_size_mb:{mb},max_non_split_rounding_mb:{mb}"
        ))
        .unwrap_or_else(|e| panic!("{mb}: {e}"));
        assert_eq!(c.max_split_size, Some(top), "{mb}");
        assert_eq!(c.max_non_split_rounding, top, "{mb}");
        assert_eq!(AllocatorConfig::parse(&c.to_string()).unwrap(), c);
    }
    // Below the clamp, the figure is exact.
    let c = AllocatorConfig::parse("max_split_size_mb:8796093022208").unwrap();
    assert_eq!(c.max_split_size, Some(1 << 63));
    for bad in ["18446744073709551616", "19", "-1"] {
        for key in ["max_split_size_mb", "max_non_split_rounding_mb"] {
            assert!(
                matches!(
                    AllocatorConfig::parse(&format!("{key}:{bad}")),
                    Err(ConfigError::BadValue { .. })
                ),
                "{key}:{bad}"
            );
        }
    }
    // A live allocator takes it: nothing is oversize in practice.
    let (_, a) = sim(
        &format!("expandable_segments:False,max_split_size_mb:{}", u64::MAX),
        GIB,
    );
    let x = a.allocate(100 * MIB, S0).unwrap();
    assert_eq!(stat(&a, "oversize_allocations.current"), 0);
    drop(x);
}

/// Mirrors `AcceleratorAllocatorConfig::parseRoundUpPower2Divisions` (the
/// list form that `test_allocator_settings` and `AllocatorConfigTest` use):
/// the loop keeps a `last_index` starting at 0; `K:v` sets the interval of
/// `K` MiB (log2 K, clamped to 15), and the first such entry also fills every
/// interval below it; `>:v` fills every interval after `last_index`, so with
/// no key before it the first interval (below 2 MiB) keeps 0; keys need not
/// increase (no check), a key named twice takes its last value; after an
/// entry the next token must be `,` unless it is `]`, so one trailing comma
/// is fine, and `[]` sets nothing. Still refused: a division that is not a
/// power of two or 0, a key that is not a power of two, empty entries, an
/// unclosed list.
#[test]
fn roundup_power2_divisions_lists_parse_as_pytorch_parses_them() {
    let divs = |s: &str| -> Vec<u64> {
        let c = AllocatorConfig::parse(&format!("roundup_power2_divisions:{s}"))
            .unwrap_or_else(|e| panic!("{s}: {e}"));
        if c != AllocatorConfig::default() {
            // (The defaults print as the word "default".)
            assert_eq!(AllocatorConfig::parse(&c.to_string()).unwrap(), c, "{s}");
        }
        (0..16)
            .map(|i| c.divisions_for((1u64 << i) << 20))
            .collect()
    };
    let mut want = vec![4u64; 16];
    want[0] = 0;
    assert_eq!(divs("[>:4]"), want, "`>` fills after last_index 0");
    let mut want = vec![0u64; 16];
    want[1..].fill(2);
    assert_eq!(divs("[>:4,>:2]"), want);
    assert_eq!(divs("[]"), vec![0; 16], "an empty list sets nothing");
    assert_eq!(divs("[64:4,>:2,]"), divs("[64:4,>:2]"), "a trailing comma");
    // [64:4,32:2]: 64 MiB is interval 6, filled below with 4; then 32 MiB
    // (interval 5) is set to 2; nothing above 6.
    assert_eq!(
        divs("[64:4,32:2]"),
        [4, 4, 4, 4, 4, 2, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0]
    );
    assert_eq!(
        divs("[64:4,64:2]"),
        [4, 4, 4, 4, 4, 4, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0]
    );
    // `>` after 64 fills 7.., then 128 (interval 7) is set to 8.
    assert_eq!(
        divs("[64:4,>:2,128:8]"),
        [4, 4, 4, 4, 4, 4, 4, 8, 2, 2, 2, 2, 2, 2, 2, 2]
    );
    // The earlier documented forms are unchanged.
    assert_eq!(
        divs("[256:1,512:2,>:8]"),
        [1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 8, 8, 8, 8, 8, 8]
    );
    for bad in [
        "[64:3]",
        "[0:4]",
        "[3:4]",
        "[,64:4]",
        "[64:4,,128:2]",
        "[64:4,,]",
        "[,]",
        "[64:4",
        "[64]",
        "[x:4]",
        "[64:4:5]",
        "[>:3]",
    ] {
        assert!(
            matches!(
                AllocatorConfig::parse(&format!("roundup_power2_divisions:{bad}")),
                Err(ConfigError::BadValue { .. } | ConfigError::Malformed { .. })
            ),
            "{bad}"
        );
    }
}

/// PyTorch's top-level loop (`CUDAAllocatorConfig::parseArgs` and c10's
/// `parseArgs`) reads a key, its value, then exactly one `,` when more
/// tokens follow; the next token is the next key. So a single trailing comma
/// is accepted, but an empty entry (a leading comma, two commas in a row, a
/// lone comma) makes `,` a key: "Unrecognized key ',' in CUDA allocator
/// config". strata refuses those strings with a typed `Malformed` error and
/// changes nothing; the empty string (no tokens) is the defaults.
#[test]
fn empty_entries_are_refused_as_pytorch_refuses_them() {
    for bad in [
        ",",
        ",,",
        ",max_split_size_mb:40",
        "max_split_size_mb:40,,expandable_segments:True",
        "max_split_size_mb:40,,",
        " , max_split_size_mb:40",
    ] {
        match AllocatorConfig::parse(bad) {
            Err(ConfigError::Malformed { .. }) => {}
            other => panic!("{bad:?}: expected Malformed, got {other:?}"),
        }
        let (_, a) = sim("max_split_size_mb:64", GIB);
        let before = a.config();
        assert!(a.set_allocator_settings(bad).is_err(), "{bad:?}");
        assert_eq!(a.config(), before, "{bad:?}");
    }
    for ok in [
        "",
        "   ",
        "max_split_size_mb:40,",
        "max_split_size_mb:40 , ",
    ] {
        AllocatorConfig::parse(ok).unwrap_or_else(|e| panic!("{ok:?}: {e}"));
    }
}

/// `torch/csrc/cuda/memory_snapshot.cpp` writes
/// `allocator_settings["PYTORCH_CUDA_ALLOC_CONF"]` from
/// `getAllocatorSettings()`, the last settings string, which is empty when
/// nothing was set (`test_memory_snapshot` and the viewer read this dict).
/// strata writes its configuration in its canonical form; for the defaults
/// that must be the empty string too, not a word no parser accepts, and any
/// other configuration's string must parse back to it.
#[test]
fn the_pickled_settings_string_of_the_defaults_is_empty() {
    let conf_of = |a: &CachingAllocator| -> String {
        let doc = decode(&a.snapshot_pickle().unwrap());
        common::string(key(
            key(&doc, "allocator_settings"),
            "PYTORCH_CUDA_ALLOC_CONF",
        ))
        .to_string()
    };
    let (_, a) = sim("", GIB);
    assert_eq!(conf_of(&a), "");
    let (_, b) = sim("expandable_segments:False,max_split_size_mb:40", GIB);
    let s = conf_of(&b);
    assert_eq!(AllocatorConfig::parse(&s).unwrap(), b.config(), "{s}");
}

/// Mirrors `CUDAAllocatorConfig::parseExpandableSegmentsReserveByClass`
/// (exercised by `ExpandableSegmentReserveTest.PerClassOverrideAndFallback`):
/// each entry is stored with `parsed[name] = spec`, so a class named twice
/// takes its last reserve. On a 100 GiB device, `[serving:0.5,serving:0.25]`
/// gives the class a quarter of the device: 25 GiB fits one allocation, 25 GiB
/// and 2 MiB does not.
#[test]
fn a_reserve_class_named_twice_takes_its_last_value() {
    let c = AllocatorConfig::parse(
        "expandable_segments_reserve_by_class:[serving:0.5,other:8G,serving:0.25]",
    )
    .unwrap();
    let serving: Vec<_> = c
        .expandable_segments_reserve_by_class
        .iter()
        .filter(|(k, _)| k == "serving")
        .collect();
    assert_eq!(serving.len(), 1);
    assert_eq!(serving[0].1.bytes(100 * GIB), 25 * GIB);
    let total = 100 * GIB;
    let fresh = || {
        let (_, a) = sim(
            "expandable_segments:True,expandable_segments_reserve_by_class:[serving:0.5,serving:0.25]",
            total,
        );
        a.set_stream_reserve_class(StreamId(21), "serving");
        a
    };
    assert!(fresh().allocate(25 * GIB, StreamId(21)).is_ok());
    assert!(fresh().allocate(25 * GIB + 2 * MIB, StreamId(21)).is_err());
}

// ----- torch.cuda.memory_summary ----------------------------------------------------

/// PyTorch's `memory_summary(device, abbreviated=False)`
/// (`torch/cuda/memory.py`) prints, for each metric, the "all" row and then,
/// unless abbreviated, "from large pool" before "from small pool"
/// (`submetrics.append(("large_pool", ...))` comes first); the two oversize
/// rows follow. With one 4 KiB tensor (small pool) and one 30 MiB tensor
/// (large pool) alive, the allocated-memory rows read 30.00 MiB + 4.00 KiB,
/// 30.00 MiB, then 4.00 KiB. The abbreviated summary has the "all" rows only.
#[test]
fn memory_summary_lists_the_large_pool_before_the_small_one() {
    let (_, a) = sim("expandable_segments:False", GIB);
    let _small = a.allocate(4096, S0).unwrap();
    let _large = a.allocate(30 * MIB, S0).unwrap();
    let s = a.memory_summary();
    let lines: Vec<&str> = s.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.starts_with("| Allocated memory"))
        .expect("an allocated-memory row");
    assert!(lines[at].contains("30.00 MiB"), "{}", lines[at]);
    assert!(
        lines[at + 1].contains("from large pool") && lines[at + 1].contains("30.00 MiB"),
        "{s}"
    );
    assert!(
        lines[at + 2].contains("from small pool") && lines[at + 2].contains("4.00 KiB"),
        "{s}"
    );
    for (i, l) in lines.iter().enumerate() {
        if l.contains("from large pool") {
            assert!(lines[i + 1].contains("from small pool"), "{s}");
        }
    }
    let short = a.memory_summary_abbreviated();
    assert!(!short.contains("from large pool") && !short.contains("from small pool"));
    for label in [
        "Allocated memory",
        "Active memory",
        "Requested memory",
        "Non-releasable allocs",
        "Oversize allocations",
        "Oversize segments",
    ] {
        assert!(short.contains(label), "{label}:\n{short}");
    }
    // Same rows otherwise: the full summary minus the pool rows.
    let full_minus: Vec<&str> = s
        .lines()
        .filter(|l| !l.contains("from large pool") && !l.contains("from small pool"))
        .collect();
    assert_eq!(full_minus, short.lines().collect::<Vec<_>>());
}

// ----- test/test_accelerator.py -------------------------------------------------------

/// Mirrors `TestAccelerator.test_memory_stats`: after a 100-float tensor is
/// made, freed and the cache emptied, `memory_stats()` has every
/// `{allocated,reserved,active,requested}_bytes.{all,small_pool,large_pool}
/// .{peak,current,allocated,freed}` key; the peaks survive `empty_cache`
/// (above 0); a 256-float tensor raises allocated memory and not reserved
/// memory below where it was; once it is freed, the cache emptied and the
/// peaks reset, allocated and reserved memory are back where they were.
#[test]
fn test_accelerator_memory_stats() {
    for mode in MODES {
        let (_, a) = sim(mode, GIB);
        drop(a.allocate(100 * 4, S0).unwrap());
        a.empty_cache().unwrap();
        let stats = a.memory_stats().to_map();
        let mut missing = Vec::new();
        for st in [
            "allocated_bytes",
            "reserved_bytes",
            "active_bytes",
            "requested_bytes",
        ] {
            for pt in ["all", "small_pool", "large_pool"] {
                for mt in ["peak", "current", "allocated", "freed"] {
                    let k = format!("{st}.{pt}.{mt}");
                    if !stats.contains_key(&k) {
                        missing.push(k);
                    }
                }
            }
        }
        assert!(missing.is_empty(), "{mode}: missing {missing:?}");
        let (prev_allocated, prev_reserved) = (a.memory_allocated(), a.memory_reserved());
        assert!(a.max_memory_allocated() > 0, "{mode}");
        assert!(a.max_memory_reserved() > 0, "{mode}");
        let tmp = a.allocate(256 * 4, S0).unwrap();
        assert!(a.memory_allocated() > prev_allocated, "{mode}");
        assert!(a.memory_reserved() >= prev_reserved, "{mode}");
        drop(tmp);
        a.empty_cache().unwrap();
        a.reset_peak_memory_stats();
        assert_eq!(a.memory_allocated(), prev_allocated, "{mode}");
        assert_eq!(a.memory_reserved(), prev_reserved, "{mode}");
        assert_eq!(a.max_memory_allocated(), prev_allocated, "{mode}");
        assert_eq!(a.max_memory_reserved(), prev_reserved, "{mode}");
    }
}

/// Mirrors `TestAccelerator.test_empty_host_cache`: emptying the host
/// (pinned) cache before anything was ever allocated does nothing and does
/// not fail; the statistics stay at zero.
#[test]
fn test_empty_host_cache() {
    let b = Arc::new(strata_alloc::pinned::SimPinnedBackend::new(None));
    let p = strata_alloc::pinned::PinnedAllocator::new(b);
    p.empty_cache().unwrap();
    let m = p.stats().to_map();
    assert!(m.values().all(|&v| v == 0), "{m:?}");
}

/// c10's newest `AcceleratorAllocatorConfig::parseArgs` (the one with
/// `large_segment_size_mb`) reads `large_segment_size_mb` first and then sets
/// `max_non_split_rounding_size_ = large_segment_size_` before the other
/// keys: every settings string (`_set_allocator_settings`,
/// `setAllocatorSettings`) that does not name `max_non_split_rounding_mb`
/// puts it back to the large segment size in force (20 MiB unless set), as
/// it puts back `max_split_size_mb`, `roundup_power2_divisions` and
/// `garbage_collection_threshold`; `large_segment_size_mb` itself is kept.
/// `parseLargeSegmentSize` clamps as `parseMaxSplitSize` does.
#[test]
fn max_non_split_rounding_returns_to_the_large_segment_size_on_a_reparse() {
    let (_, a) = sim(
        "expandable_segments:False,max_split_size_mb:64,max_non_split_rounding_mb:40",
        GIB,
    );
    assert_eq!(a.config().max_non_split_rounding, 40 * MIB);
    a.set_allocator_settings("roundup_power2_divisions:8")
        .unwrap();
    assert_eq!(a.config().max_non_split_rounding, 20 * MIB, "reset");
    a.set_allocator_settings("large_segment_size_mb:30,max_non_split_rounding_mb:50")
        .unwrap();
    assert_eq!(a.config().max_non_split_rounding, 50 * MIB);
    a.set_allocator_settings("garbage_collection_threshold:0.5")
        .unwrap();
    let c = a.config();
    assert_eq!(c.large_segment_size, 30 * MIB, "kept");
    assert_eq!(
        c.max_non_split_rounding,
        30 * MIB,
        "back to the large segment size"
    );
    // The same on a configuration.
    let c = AllocatorConfig::parse("max_non_split_rounding_mb:40").unwrap();
    assert_eq!(c.reparse("").unwrap().max_non_split_rounding, 20 * MIB);
    // A huge large segment size clamps.
    let c = AllocatorConfig::parse(&format!("large_segment_size_mb:{}", u64::MAX)).unwrap();
    assert_eq!(c.large_segment_size, (u64::MAX >> 20) << 20);
}

// ----- round_size ------------------------------------------------------------------

/// PyTorch's `round_size` and `roundup_power2_next_division`
/// (`CUDACachingAllocator.cpp`), written out from their definitions: below
/// 512 bytes, 512; with `d` divisions for the size's interval, `d > 1` and
/// the size above `512 * d`, a power of two is kept and anything else goes up
/// to the next multiple of `floor_pow2(size) >> log2(d)`; otherwise up to a
/// multiple of 512. (Division counts of 2^55 and more, where PyTorch's
/// `kMinBlockSize * divisions` wraps around, are left out.)
fn pytorch_round_size(divisions: &[u64; 16], size: u64) -> u64 {
    if size < 512 {
        return 512;
    }
    let log = 63 - size.leading_zeros() as u64;
    let idx = log.saturating_sub(20).min(15) as usize;
    let d = divisions[idx];
    if d > 1 && size > 512 * d {
        if size.is_power_of_two() {
            return size;
        }
        let floor = 1u64 << log;
        let step = floor >> (63 - d.leading_zeros());
        if step == 0 {
            return floor << 1;
        }
        let down = size & !(step - 1);
        return if down == size { size } else { down + step };
    }
    size.div_ceil(512) * 512
}

/// Mirrors the rounding `test_allocator_settings` checks with its
/// `power2_div` helper, over random sizes from 1 byte to 256 GiB and random
/// division settings (single values and lists with `>`), each division count
/// a power of two up to 2^20 or 0: strata's `round_size` agrees with
/// PyTorch's everywhere.
#[test]
fn round_size_agrees_with_pytorchs_on_random_sizes_and_divisions() {
    let mut rng = common::Lcg(32);
    for case in 0..300 {
        let pick_div = |rng: &mut common::Lcg| -> u64 {
            match rng.below(4) {
                0 => 0,
                _ => 1 << rng.below(21),
            }
        };
        let conf = if case % 3 == 0 {
            format!("roundup_power2_divisions:{}", 1u64 << rng.below(21))
        } else {
            let mut keys: Vec<u64> = (0..1 + rng.below(5)).map(|_| 1 << rng.below(17)).collect();
            keys.sort_unstable();
            keys.dedup();
            let mut items: Vec<String> = keys
                .iter()
                .map(|k| format!("{k}:{}", pick_div(&mut rng)))
                .collect();
            if rng.below(2) == 0 {
                items.push(format!(">:{}", pick_div(&mut rng)));
            }
            format!("roundup_power2_divisions:[{}]", items.join(","))
        };
        let c = AllocatorConfig::parse(&conf).unwrap_or_else(|e| panic!("{conf}: {e}"));
        let (_, a) = sim(&conf, GIB);
        for _ in 0..200 {
            let size = match rng.below(3) {
                0 => 1 + rng.below(4 << 20),
                1 => 1 + rng.below(1 << 30),
                _ => 1 + (rng.next() << 7) % (256 * GIB),
            };
            assert_eq!(
                a.round_size(size),
                pytorch_round_size(&c.roundup_power2_divisions, size),
                "{conf}: {size}"
            );
        }
    }
}
