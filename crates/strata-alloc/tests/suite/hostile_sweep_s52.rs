//! Session 52's sweep of hostile inputs to strata-alloc's public API (after
//! `hostile_sweep_s50.rs`).
//!
//! **Settings strings against PyTorch 2.15 itself.** A small C++ program
//! linked against the `libc10.so` and `libc10_cuda.so` of a PyTorch 2.15
//! wheel (no GPU needed) called `c10::CachingAllocator::setAllocatorSettings`
//! (what `torch._C._accelerator_setAllocatorSettings` calls: the generic
//! `AcceleratorAllocatorConfig::parseArgs`, then the CUDA hook
//! `CUDAAllocatorConfig::parseArgs`) on 35,000 random and edge-case strings
//! and pairs of strings (a second `setAllocatorSettings` after the first), in
//! a fresh process each, and printed every value the two configurations hold
//! (their static getters, the reserve through
//! `expandable_segments_reserve_decision`). strata's `parse`/`reparse` were
//! compared value by value. Differences found and fixed with these tests
//! (`src/config.rs`):
//!
//! * `pinned_max_round_threshold_mb` and `pinned_max_cached_size_mb` with a
//!   number of MiB whose bytes overflow 64 bits (`17592186044416` up to
//!   `18446744073709551615`) were refused; PyTorch 2.15 clamps them to
//!   `SIZE_MAX / kMB` MiB (18446744073708503040 bytes), as it clamps
//!   `max_split_size_mb`.
//! * `pinned_reserve_segment_size_mb` above 17592186044415 was refused;
//!   PyTorch keeps the number of MiB as written (any `u64` from 1). strata
//!   keeps bytes, so it clamps (the key has no effect in strata).
//! * `garbage_collection_threshold` and `per_process_memory_fraction` took
//!   subnormal numbers (`5e-324`) and, for the fraction, numbers that
//!   underflow to 0 (`1e-400`, read as a fraction of 0). PyTorch reads them
//!   with `std::stod`, which throws `out_of_range` on the range error
//!   (message "stod"). `0e-400` is an exact 0 and accepted by both.
//! * `roundup_power2_divisions` named twice in one string: the second list
//!   started from zeros. PyTorch's `parseRoundUpPower2Divisions` fills the
//!   one array `parseArgs` cleared at its start, so
//!   `roundup_power2_divisions:8,roundup_power2_divisions:[2:4]` keeps 8 from
//!   4 MiB up (a second string starts from zeros again, in both).
//! * `expandable_segments_reserve_by_class` skipped every empty entry
//!   (`[,]`, `[,a:0.5]`, `[a:0.5,,b:2G]`); PyTorch accepts `[]` and one
//!   trailing comma only, and fails an internal assertion ("Index out of
//!   bounds in ConfigTokenizer") on the others.
//!
//! Differences left (documented in docs/allocator.md, "Keys"): PyTorch
//! accepts malformed numbers `stoull`/`stod` read a prefix of (`20.5`,
//! `1e3`, `-1`, `0x14`, `20abc`), warns and keeps the old value for a bad
//! `expandable_segments_reserve(_by_class)`, and, in 2.15, never checks the
//! `:` after a key or the `,` after a value (`ConfigTokenizer::checkToken`
//! returns a bool its callers drop), so it accepts `max_split_size_mb,64`,
//! `max_split_size_mb[64]` and `release_lock_on_cudamalloc:True:`; strata
//! refuses all of these with a typed error. strata also accepts
//! `release_lock_on_device_malloc`, `pinned_use_host_register` and
//! `pinned_use_device_host_register` (from PyTorch's generic config test),
//! which a PyTorch 2.15 CUDA build refuses as unknown keys; and where
//! PyTorch keeps the keys of a refused string that came before the bad one,
//! strata changes nothing.
//!
//! **Misuse of the allocator.** Frees of freed, stale and foreign handles,
//! `record_stream` on them and on streams never used, blocks of a private
//! pool dropped while they live, sizes at the top of `u64`, settings and
//! fractions refused while blocks live, `empty_cache` with frees pending,
//! and several threads at once: each refusal is a typed error that says
//! what to do and changes nothing (statistics, snapshot, settings,
//! fraction, history), and the statistics always equal a recount of the
//! snapshot. PyTorch refuses a free of a pointer it did not hand out with
//! "invalid device pointer" (`CUDACachingAllocator.cpp`, `free`), and its
//! `emptyCache` first waits for the events of pending frees
//! (`synchronize_and_free_events`) and then releases every cached segment.

use super::common::{recount, sim, sim_device, stat, state, stats_but_ooms, Lcg};
use std::sync::{Arc, Barrier};
use strata_alloc::history::Action;
use strata_alloc::{AllocError, AllocatorConfig, CachingAllocator, MemPoolOptions, StreamId};

const MIB: u64 = 1 << 20;
const S0: StreamId = StreamId::DEFAULT;

/// PyTorch's clamp of a number of MiB whose bytes overflow:
/// `std::numeric_limits<size_t>::max() / kMB * kMB`.
const CLAMPED: u64 = 18_446_744_073_708_503_040;

// ----- settings against PyTorch 2.15 ---------------------------------------

/// Strings PyTorch 2.15 refuses (`setAllocatorSettings` throws; the message
/// in the comment).
const REFUSED: &[&str] = &[
    "pinned_max_cached_size_mb:18446744073709551616", // stoull
    "pinned_max_round_threshold_mb:18446744073709551616", // stoull
    "pinned_reserve_segment_size_mb:18446744073709551616", // stoull
    "pinned_reserve_segment_size_mb:0",               // "has to be greater than 0"
    "per_process_memory_fraction:5e-324",             // stod (underflow)
    "per_process_memory_fraction:1e-400",             // stod (underflow)
    "per_process_memory_fraction:1e309",              // stod (overflow)
    "garbage_collection_threshold:1e-320",            // stod (underflow)
    "garbage_collection_threshold:5e-324",            // stod (underflow)
    "garbage_collection_threshold:1e309",             // stod (overflow)
    // "Index out of bounds in ConfigTokenizer":
    "expandable_segments_reserve_by_class:[,]",
    "expandable_segments_reserve_by_class:[,,]",
    "expandable_segments_reserve_by_class:[a:1.5,,]",
    "expandable_segments_reserve_by_class:[,a:1.5]",
    "expandable_segments_reserve_by_class:[a:1.5,,b:2G]",
];

#[test]
fn strings_pytorch_refuses_are_refused_naming_the_key() {
    let a = sim("expandable_segments:False,max_split_size_mb:64");
    let _live = a.allocate_raw(3 * MIB, S0).unwrap();
    let before = state(&a);
    for s in REFUSED {
        let key = s.split(':').next().unwrap();
        match AllocatorConfig::parse(s) {
            Err(strata_alloc::ConfigError::BadValue { key: k, .. }) => assert_eq!(k, key, "{s}"),
            other => panic!("{s}: expected BadValue naming {key}, got {other:?}"),
        }
        let e = a.set_allocator_settings(s).unwrap_err();
        assert!(e.to_string().contains(key), "{s}: {e}");
        assert_eq!(
            state(&a),
            before,
            "{s}: a refused string changed the allocator"
        );
    }
}

/// Numbers of MiB whose bytes overflow: clamped as PyTorch 2.15 clamps
/// them (its `pinned_max_cached_size()` / `pinned_max_round_threshold()`
/// read 18446744073708503040 after these strings).
#[test]
fn overflowing_pinned_sizes_are_clamped_as_pytorch_clamps_them() {
    for (s, round, cached) in [
        (
            "pinned_max_cached_size_mb:17592186044416",
            u64::MAX,
            CLAMPED,
        ),
        (
            "pinned_max_cached_size_mb:18446744073709551615",
            u64::MAX,
            CLAMPED,
        ),
        (
            "pinned_max_round_threshold_mb:18446744073709551615",
            CLAMPED,
            u64::MAX,
        ),
        // 2^44 - 1 MiB fits: the same figure, not clamped.
        (
            "pinned_max_round_threshold_mb:17592186044415",
            CLAMPED,
            u64::MAX,
        ),
    ] {
        let c = AllocatorConfig::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"));
        assert_eq!(
            (c.pinned_max_round_threshold, c.pinned_max_cached_size),
            (round, cached),
            "{s}"
        );
        assert_eq!(AllocatorConfig::parse(&c.to_string()).unwrap(), c, "{s}");
        let limits = strata_alloc::pinned::PinnedLimits::of(&c);
        assert_eq!(
            (limits.max_round_threshold, limits.max_cached_size),
            (round, cached)
        );
    }
    // PyTorch keeps 18446744073709551615 MiB; strata keeps bytes, clamped.
    for n in ["18446744073709551615", "17592186044416", "9007199254740993"] {
        let c = AllocatorConfig::parse(&format!("pinned_reserve_segment_size_mb:{n}")).unwrap();
        assert_eq!(c.pinned_reserve_segment_size, CLAMPED, "{n}");
        c.validate().unwrap();
    }
}

/// Numbers `stod` reads without a range error are taken; what underflows
/// is refused (above). PyTorch 2.15: `0e-400` and `0.0e999` give a
/// fraction of 0, the least normal double is kept, `-0` is accepted.
#[test]
fn fractions_at_the_edges_of_stod() {
    for (s, want) in [
        ("per_process_memory_fraction:0e-400", 0.0),
        ("per_process_memory_fraction:0.0e999", 0.0),
        (
            "per_process_memory_fraction:2.2250738585072014e-308",
            f64::MIN_POSITIVE,
        ),
        ("per_process_memory_fraction:-0", 0.0),
    ] {
        let c = AllocatorConfig::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"));
        assert_eq!(c.per_process_memory_fraction, Some(want), "{s}");
    }
    let c = AllocatorConfig::parse("garbage_collection_threshold:1e-300").unwrap();
    assert_eq!(c.garbage_collection_threshold, Some(1e-300));
}

/// `roundup_power2_divisions` named twice in one string, and in two
/// strings, with the divisions PyTorch 2.15's
/// `AcceleratorAllocatorConfig::roundup_power2_divisions()` holds after
/// each (index 0: below 2 MiB, index i: [2^i, 2^(i+1)) MiB).
#[test]
fn divisions_named_twice_layer_as_in_pytorch() {
    let fill = |parts: &[(usize, u64)]| {
        let mut out = [0u64; 16];
        let mut at = 0;
        for &(n, v) in parts {
            out[at..at + n].fill(v);
            at += n;
        }
        out
    };
    for (s, want) in [
        (
            "roundup_power2_divisions:8,roundup_power2_divisions:[2:4]",
            fill(&[(2, 4), (14, 8)]),
        ),
        (
            "roundup_power2_divisions:[256:4],roundup_power2_divisions:[>:8]",
            fill(&[(1, 4), (15, 8)]),
        ),
        (
            "roundup_power2_divisions:[256:4],roundup_power2_divisions:[]",
            fill(&[(9, 4), (7, 0)]),
        ),
        (
            "roundup_power2_divisions:2,roundup_power2_divisions:[1024:0,>:1]",
            fill(&[(11, 0), (5, 1)]),
        ),
        (
            "roundup_power2_divisions:[256:4],roundup_power2_divisions:[1024:2]",
            fill(&[(11, 2), (5, 0)]),
        ),
        (
            "roundup_power2_divisions:[256:4],roundup_power2_divisions:16",
            [16; 16],
        ),
    ] {
        let c = AllocatorConfig::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"));
        assert_eq!(c.roundup_power2_divisions, want, "{s}");
        // The same string on a live allocator, and its rounding.
        let a = sim("expandable_segments:False");
        a.set_allocator_settings(s).unwrap();
        assert_eq!(a.config().roundup_power2_divisions, want, "{s}");
    }
    // A second string starts from zeros: `[256:4]`, then `[>:8]` alone.
    let a = sim("roundup_power2_divisions:[256:4]");
    a.set_allocator_settings("roundup_power2_divisions:[>:8]")
        .unwrap();
    assert_eq!(
        a.config().roundup_power2_divisions,
        fill(&[(1, 0), (15, 8)])
    );
    // With 8 divisions of [4, 8) MiB, 5 MiB + 1 rounds up to 5.5 MiB; with
    // the 4 of [2:4] alone it would be 6 MiB.
    let a = sim("roundup_power2_divisions:8,roundup_power2_divisions:[2:4]");
    assert_eq!(a.round_size(5 * MIB + 1), 5 * MIB + MIB / 2);
}

/// `[]` and one trailing comma are accepted, as PyTorch 2.15 accepts them;
/// a list named again replaces the classes (PyTorch: only `b` is known
/// after the second).
#[test]
fn reserve_class_lists_take_pytorchs_separators() {
    let c = AllocatorConfig::parse("expandable_segments_reserve_by_class:[]").unwrap();
    assert!(c.expandable_segments_reserve_by_class.is_empty());
    let c = AllocatorConfig::parse("expandable_segments_reserve_by_class:[a:1.5,]").unwrap();
    assert_eq!(
        c.expandable_segments_reserve_by_class,
        vec![("a".to_string(), strata_alloc::Reserve::Fraction(1.5))]
    );
    let c = AllocatorConfig::parse(
        "expandable_segments_reserve_by_class:[a:0.5],expandable_segments_reserve_by_class:[b:0.25]",
    )
    .unwrap();
    assert_eq!(
        c.expandable_segments_reserve_by_class,
        vec![("b".to_string(), strata_alloc::Reserve::Fraction(0.25))]
    );
}

// ----- misuse of the allocator ----------------------------------------------

/// The history without its `snapshot` entries (taking a snapshot records
/// one, as in PyTorch, and comparing states takes snapshots).
fn events(a: &CachingAllocator) -> Vec<(Action, u64, u64, u64)> {
    a.history()
        .iter()
        .filter(|e| e.action != Action::Snapshot)
        .map(|e| (e.action, e.addr, e.size, e.stream.0))
        .collect()
}

/// A refused call: an `InvalidFree` whose text says what to do, and
/// nothing changed (the history included).
fn refused_invalid(what: &str, r: Result<(), AllocError>) {
    let e = r.expect_err(what);
    assert!(matches!(e, AllocError::InvalidFree { .. }), "{what}: {e:?}");
    let text = e.to_string();
    assert!(
        text.contains("free each allocation once") && text.contains("record_stream"),
        "{what}: the error does not say what to do: {text}"
    );
}

#[test]
fn misuse_of_handles_is_refused_and_changes_nothing() {
    for conf in ["expandable_segments:False", "expandable_segments:True"] {
        let (driver, a) = sim_device(conf, 1 << 34);
        let (_, other) = sim_device(conf, 1 << 34);
        a.record_history(Some(1000));
        let s7 = StreamId(7);
        let keep = a.allocate_raw(3 * MIB, S0).unwrap();
        let freed = a.allocate_raw(512, S0).unwrap();
        a.free_raw(freed).unwrap();
        // A block freed while used on stream 7: pending until its event.
        let pending = a.allocate_raw(25 * MIB, S0).unwrap();
        a.record_stream(&pending, s7).unwrap();
        a.free_raw(pending).unwrap();
        let foreign = other.allocate_raw(3 * MIB, S0).unwrap();
        // A handle kept after its free whose block was handed out again.
        let stale = a.allocate_raw(4096, S0).unwrap();
        a.free_raw(stale).unwrap();
        let reused = a.allocate_raw(4096, S0).unwrap();
        assert_eq!(reused.ptr(), stale.ptr(), "{conf}: the block is reused");

        let before = (state(&a), events(&a));
        let check = |what: &str, r: Result<(), AllocError>| {
            refused_invalid(&format!("{conf}: {what}"), r);
            assert_eq!((state(&a), events(&a)), before, "{conf}: {what}");
        };
        check("double free", a.free_raw(freed));
        check("free of a pending block", a.free_raw(pending));
        check("free of a stale handle", a.free_raw(stale));
        check("foreign free", a.free_raw(foreign));
        check(
            "record_stream of a freed block",
            a.record_stream(&freed, s7),
        );
        check(
            "record_stream of a freed block on a stream never used",
            a.record_stream(&freed, StreamId(u64::MAX)),
        );
        check(
            "record_stream of a pending block",
            a.record_stream(&pending, s7),
        );
        check(
            "record_stream of a stale handle",
            a.record_stream(&stale, s7),
        );
        check(
            "record_stream of a foreign handle",
            a.record_stream(&foreign, StreamId(u64::MAX - 1)),
        );
        // Snapshots and the history are readable in the middle of it.
        a.snapshot_pickle().unwrap();
        serde_json::from_str::<serde_json::Value>(&a.history_json("s52")).unwrap();
        assert_eq!((state(&a), events(&a)), before, "{conf}");
        recount(&a, conf);

        // The live handles still work, and the foreign one at its owner.
        a.record_stream(&keep, StreamId(u64::MAX)).unwrap();
        other.free_raw(foreign).unwrap();
        a.free_raw(keep).unwrap();
        a.free_raw(reused).unwrap();
        // empty_cache with a free pending on stream 7 (its event not
        // complete): PyTorch waits for the event, then releases everything.
        a.empty_cache().unwrap();
        assert_eq!(stat(&a, "reserved_bytes.all.current"), 0, "{conf}");
        assert!(a.snapshot().is_empty(), "{conf}");
        assert_eq!(driver.used_bytes(), 0, "{conf}");
        recount(&a, conf);
    }
}

/// A private pool dropped while its blocks live: the blocks stay valid
/// (PyTorch frees a pool's blocks as they are freed, and releases its
/// segments once empty), their free works once and then is refused.
#[test]
fn blocks_outliving_their_pool_free_once() {
    let a = sim("expandable_segments:False");
    let pool = a.mem_pool(MemPoolOptions::default());
    let r = {
        let _g = pool.activate().unwrap();
        a.allocate_raw(5 * MIB, S0).unwrap()
    };
    drop(pool);
    recount(&a, "pool dropped, block live");
    a.record_stream(&r, StreamId(3)).unwrap();
    a.free_raw(r).unwrap();
    let before = state(&a);
    refused_invalid("second free", a.free_raw(r));
    assert_eq!(state(&a), before);
    a.empty_cache().unwrap();
    recount(&a, "emptied");
    assert_eq!(stat(&a, "reserved_bytes.all.current"), 0);
}

/// Sizes at the top of `u64` and a page either side of the device's
/// capacity: a block or a typed out-of-memory error, with nothing changed
/// but the out-of-memory counters; settings and fractions refused while
/// blocks live change nothing.
#[test]
fn huge_sizes_and_refused_settings_while_blocks_live() {
    const CAP: u64 = 1 << 30;
    for conf in ["expandable_segments:False", "expandable_segments:True"] {
        let (_, a) = sim_device(conf, CAP);
        let live = a.allocate_raw(100 * MIB, S0).unwrap();
        let before = state(&a);
        for size in [
            u64::MAX,
            u64::MAX - 511,
            1 << 63,
            1 << 60,
            (1 << 60) - 1,
            CAP + 1,
            CAP + (2 << 20),
            CAP - (100 * MIB) + 1,
        ] {
            let e = a
                .allocate_raw(size, S0)
                .expect_err(&format!("{conf}: {size}"));
            assert!(e.is_out_of_memory(), "{conf}: {size}: {e}");
            assert_eq!(stats_but_ooms(&a), before.1, "{conf}: {size}");
            assert_eq!(a.snapshot(), before.2, "{conf}: {size}");
        }
        for s in [
            "max_split_size_mb:19",
            "per_process_memory_fraction:5e-324",
            "x:1",
        ] {
            assert!(a.set_allocator_settings(s).is_err(), "{s}");
        }
        for f in [f64::NAN, -0.5, 1.5, f64::INFINITY] {
            assert!(a.set_memory_fraction(f).is_err(), "{f}");
        }
        assert_eq!(stats_but_ooms(&a), before.1, "{conf}");
        assert_eq!(
            (a.config(), a.memory_fraction()),
            (before.0.clone(), before.3)
        );
        // Valid settings while the block lives leave it where it is.
        a.set_allocator_settings("expandable_segments:False,max_split_size_mb:20")
            .unwrap();
        recount(&a, conf);
        a.free_raw(live).unwrap();
        a.empty_cache().unwrap();
        recount(&a, conf);
        assert_eq!(stat(&a, "reserved_bytes.all.current"), 0, "{conf}");
    }
}

/// Four threads allocating, freeing, recording streams (their own, others',
/// streams never used), freeing twice and freeing foreign handles, while
/// one also changes settings, empties the cache and completes events: at
/// each pause the statistics equal a recount of the snapshot, every misuse
/// was refused, and at the end everything goes back to the device.
#[test]
fn several_threads_misusing_the_allocator_keep_the_counts() {
    const THREADS: usize = 4;
    const ROUNDS: usize = 6;
    let (driver, a) = sim_device("expandable_segments:True", 8 << 30);
    let (_, other) = sim_device("expandable_segments:False", 1 << 30);
    let barrier = Arc::new(Barrier::new(THREADS + 1));
    let sizes = [
        0,
        1,
        511,
        512,
        MIB - 1,
        MIB + 1,
        2 * MIB,
        10 * MIB + 1,
        30 * MIB,
    ];
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let (a, other, barrier, driver) = (
                Arc::clone(&a),
                Arc::clone(&other),
                Arc::clone(&barrier),
                Arc::clone(&driver),
            );
            std::thread::spawn(move || {
                let mut rng = Lcg(52 + t as u64);
                let mine = StreamId(t as u64 + 1);
                let mut live = Vec::new();
                let mut refused = 0u64;
                for _ in 0..ROUNDS {
                    for _ in 0..400 {
                        match rng.below(12) {
                            0..=4 => {
                                let stream = if rng.below(4) == 0 { S0 } else { mine };
                                match a.allocate_raw(rng.pick(&sizes), stream) {
                                    Ok(r) => live.push(r),
                                    Err(e) => assert!(e.is_out_of_memory(), "{e}"),
                                }
                            }
                            5..=7 if !live.is_empty() => {
                                let i = rng.below(live.len() as u64) as usize;
                                let r = live.swap_remove(i);
                                a.free_raw(r).unwrap();
                                if rng.below(3) == 0 && r.size() != 0 {
                                    assert!(matches!(
                                        a.free_raw(r),
                                        Err(AllocError::InvalidFree { .. })
                                    ));
                                    assert!(a.record_stream(&r, mine).is_err());
                                    refused += 2;
                                }
                            }
                            8 if !live.is_empty() => {
                                let r = live[rng.below(live.len() as u64) as usize];
                                let s = StreamId(rng.pick(&[0, 1, 2, 3, 4, 99, u64::MAX]));
                                a.record_stream(&r, s).unwrap();
                            }
                            9 => {
                                let f = other.allocate_raw(4096, S0).unwrap();
                                assert!(a.free_raw(f).is_err());
                                assert!(a.record_stream(&f, mine).is_err());
                                other.free_raw(f).unwrap();
                                refused += 2;
                            }
                            10 if t == 0 => match rng.below(4) {
                                0 => a.empty_cache().unwrap(),
                                1 => driver.complete_all_events(),
                                2 => a
                                    .set_allocator_settings(rng.pick(&[
                                        "expandable_segments:False",
                                        "expandable_segments:True,max_split_size_mb:40",
                                        "roundup_power2_divisions:[2:4,>:2]",
                                    ]))
                                    .unwrap(),
                                _ => assert!(a
                                    .set_allocator_settings("max_split_size_mb:1")
                                    .is_err()),
                            },
                            _ => {
                                let _ = a.snapshot();
                                let _ = a.memory_stats();
                            }
                        }
                    }
                    barrier.wait(); // the main thread recounts
                    barrier.wait();
                }
                for r in live {
                    a.free_raw(r).unwrap();
                }
                refused
            })
        })
        .collect();
    for round in 0..ROUNDS {
        barrier.wait();
        recount(&a, &format!("round {round}"));
        barrier.wait();
    }
    let refused: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
    assert!(refused > 0);
    assert_eq!(stat(&a, "allocated_bytes.all.current"), 0);
    driver.complete_all_events();
    a.empty_cache().unwrap();
    recount(&a, "end");
    assert_eq!(stat(&a, "reserved_bytes.all.current"), 0);
    assert_eq!(driver.used_bytes(), 0);
}
