//! Hostile inputs to the public API: each one gets a typed error (or the
//! documented answer), never a panic, an abort or a wrapped size, and a
//! rejected call leaves the allocator exactly as it was (settings, statistics,
//! snapshot).
//!
//! The first tests are regressions of defects found by a sweep of the API;
//! the guards after them pin down inputs that were already handled.

use crate::common;

use common::{decode, key, sim, state};
use serde_pickle::Value;
use std::sync::Arc;
use strata_alloc::driver::sim::SimDriver;
use strata_alloc::history::Action;
use strata_alloc::pinned::{PinnedAllocator, PinnedError, SimPinnedBackend};
use strata_alloc::{AllocError, AllocatorConfig, CachingAllocator, ConfigError, StreamId};

const MIB: u64 = 1 << 20;
const S0: StreamId = StreamId::DEFAULT;
/// A valid stream handle that the allocator once used as its "no stream
/// looked up yet" marker.
const SMAX: StreamId = StreamId(u64::MAX);

// ----- regressions -------------------------------------------------------------

/// `StreamId(u64::MAX)` was the allocator's "no stream yet" marker: as the
/// first stream of an allocator it matched the marker, got the dense index 0
/// of a stream table that was still empty, and the allocation panicked
/// (index out of bounds).
#[test]
fn a_stream_id_of_u64_max_is_an_ordinary_stream() {
    for conf in ["expandable_segments:True", "expandable_segments:False"] {
        let a = sim(conf);
        let x = a.allocate_raw(4096, SMAX).unwrap();
        let y = a.allocate_raw(8 * MIB, SMAX).unwrap();
        a.check_consistency().unwrap();
        assert!(a.snapshot().iter().all(|s| s.stream == SMAX), "{conf}");
        // The default stream is another stream: it does not share the cache.
        let z = a.allocate_raw(4096, S0).unwrap();
        a.free_raw(x).unwrap();
        a.free_raw(y).unwrap();
        a.free_raw(z).unwrap();
        a.check_consistency().unwrap();
        assert_eq!(a.memory_allocated(), 0, "{conf}");
        let streams: Vec<StreamId> = a.snapshot().iter().map(|s| s.stream).collect();
        assert!(streams.contains(&SMAX) && streams.contains(&S0), "{conf}");
    }
}

/// The history had the same marker (stream `u64::MAX`, index `u16::MAX`):
/// after `record_history`, an entry on stream `u64::MAX` was stored with the
/// index 65535 and reading the history panicked.
#[test]
fn history_of_a_stream_id_of_u64_max_reads_back() {
    let a = sim("");
    let _warm = a.allocate_raw(4096, SMAX).unwrap();
    a.record_history(Some(100));
    let x = a.allocate_raw(4096, SMAX).unwrap();
    a.free_raw(x).unwrap();
    let h = a.history();
    assert_eq!(h.len(), 3, "{h:?}");
    assert!(h.iter().all(|e| e.stream == SMAX), "{h:?}");
    assert_eq!(h[0].action, Action::Alloc);
    assert!(a.history_json("x").contains("18446744073709551615"));
    assert!(a.snapshot_pickle().is_ok());
    assert!(!a.memory_report_html().is_empty());
}

/// `record_history(Some(usize::MAX))` (PyTorch's default `max_entries` is
/// `sys.maxsize`) reserved room for the whole bound up front: "capacity
/// overflow" panic; a bound just small enough not to overflow the byte count
/// aborted the process (the allocation failed).
#[test]
fn history_bounds_beyond_memory_are_accepted() {
    for bound in [
        usize::MAX,
        isize::MAX as usize / 32 + 1,
        isize::MAX as usize,
    ] {
        let a = sim("");
        let before = a.memory_stats();
        a.record_history(Some(bound));
        assert!(a.history_enabled(), "{bound}");
        assert_eq!(a.memory_stats(), before, "{bound}");
        let mut live = Vec::new();
        for i in 0..1000u64 {
            live.push(a.allocate_raw(512 * (i % 7 + 1), S0).unwrap());
        }
        for r in live {
            a.free_raw(r).unwrap();
        }
        // Nothing is dropped under such a bound: 1000 allocations, 1000
        // frees (requested and completed), the segment.
        let h = a.history();
        assert!(h.len() >= 3000, "{bound}: {}", h.len());
        assert_eq!(h.iter().filter(|e| e.action == Action::Alloc).count(), 1000);
        a.check_consistency().unwrap();
        a.record_history(None);
        assert!(!a.history_enabled());
    }
}

/// Two allocators over drivers that hand out the same addresses (two
/// simulated devices; or, on CUDA, an allocator installed with
/// `set_allocator` after the one it replaced gave its memory back) produce
/// equal handles for their first blocks. `free_raw` of the other allocator's
/// handle freed this allocator's live block: `Ok(())`, its caller's memory
/// back in the cache while still in use.
#[test]
fn a_handle_from_another_allocator_is_refused() {
    let (a, b) = (sim(""), sim(""));
    let xa = a.allocate_raw(4096, S0).unwrap();
    let xb = b.allocate_raw(4096, S0).unwrap();
    assert_eq!((xa.ptr(), xa.size()), (xb.ptr(), xb.size()));
    let before = state(&b);
    match b.free_raw(xa) {
        Err(AllocError::InvalidFree { ptr, .. }) => assert_eq!(ptr, xa.ptr()),
        other => panic!("expected InvalidFree, got {other:?}"),
    }
    assert!(matches!(
        b.record_stream(&xa, StreamId(5)),
        Err(AllocError::InvalidFree { .. })
    ));
    assert_eq!(state(&b), before);
    b.check_consistency().unwrap();
    // Each handle still works with its own allocator, once.
    b.free_raw(xb).unwrap();
    a.free_raw(xa).unwrap();
    assert!(matches!(
        a.free_raw(xa),
        Err(AllocError::InvalidFree { .. })
    ));
    assert_eq!((a.memory_allocated(), b.memory_allocated()), (0, 0));
    // An owned allocation dropped after its allocator was replaced returns
    // to its own allocator only.
    let old = sim("");
    let kept = old.allocate(4096, S0).unwrap();
    let new = sim("");
    let live = new.allocate_raw(4096, S0).unwrap();
    assert_eq!(kept.ptr(), live.ptr());
    drop(kept);
    assert_eq!(new.memory_allocated(), 4096);
    assert_eq!(old.memory_allocated(), 0);
    new.free_raw(live).unwrap();
}

/// `round_size(u64::MAX)` wrapped to 0 (`div_ceil(512) * 512` past
/// `u64::MAX`), and with divisions set to `u64::MAX - 100` as well.
#[test]
fn round_size_saturates_instead_of_wrapping() {
    for conf in [
        "",
        "roundup_power2_divisions:4",
        "roundup_power2_divisions:[>:0]",
    ] {
        let a = sim(conf);
        for size in [u64::MAX, u64::MAX - 100, u64::MAX - 510] {
            assert_eq!(a.round_size(size), u64::MAX, "{conf}: {size}");
        }
        assert_eq!(a.round_size((1 << 60) - 1), 1 << 60, "{conf}");
        if !conf.ends_with(":4") {
            // The last multiple of 512 that fits is still reached.
            assert_eq!(a.round_size(u64::MAX - 1022), u64::MAX - 511, "{conf}");
        }
        // The allocator refuses such sizes before rounding, changing nothing.
        let before = state(&a);
        for size in [u64::MAX - 100, 1 << 60] {
            match a.allocate_raw(size, S0) {
                Err(AllocError::TooLarge { requested, .. }) => assert_eq!(requested, size),
                other => panic!("{conf}: {size}: expected TooLarge, got {other:?}"),
            }
        }
        assert_eq!(state(&a), before, "{conf}");
    }
}

/// `roundup_power2_divisions:9223372036854775808` (a power of two, accepted
/// as PyTorch accepts it) overflowed `512 * divisions`: a panic in a debug
/// build, and in a release build every size rounded up to the next power of
/// two (1500 bytes took 2048) instead of to a multiple of 512.
#[test]
fn huge_division_counts_never_overflow_the_rounding() {
    for d in [1u64 << 55, 1 << 60, 1 << 63] {
        let a = sim(&format!("roundup_power2_divisions:{d}"));
        assert_eq!(a.config().roundup_power2_divisions, [d; 16]);
        assert_eq!(a.round_size(1500), 1536, "{d}");
        assert_eq!(a.round_size(5 * MIB + 1), 5 * MIB + 512, "{d}");
        let x = a.allocate_raw(1500, S0).unwrap();
        assert_eq!(a.memory_allocated(), 1536, "{d}");
        a.free_raw(x).unwrap();
        a.check_consistency().unwrap();
    }
    // Below 2^55 the divisions apply as before.
    let a = sim("roundup_power2_divisions:[1:4,>:4]");
    assert_eq!(a.round_size(5 * MIB + 1), 6 * MIB);
}

/// `max_split_size_mb` up to 17592186044415 (the largest whose byte count
/// fits a `u64`) is accepted, but above 8 EiB the byte count does not fit the
/// statistic's `i64`: `memory_stats().max_split_size` (and the snapshot's
/// `allocator_settings`) read -1048576, a wrapped figure next to PyTorch's -1
/// for "unlimited".
#[test]
fn a_split_limit_beyond_i64_reads_as_i64_max_not_negative() {
    let huge = "max_split_size_mb:17592186044415";
    let a = sim(huge);
    assert_eq!(a.config().max_split_size, Some(17592186044415 << 20));
    assert_eq!(a.memory_stats().max_split_size, i64::MAX);
    let doc = decode(&a.snapshot_pickle().unwrap());
    assert_eq!(
        key(key(&doc, "allocator_settings"), "max_split_size"),
        &Value::I64(i64::MAX)
    );
    // Set at run time, and back.
    let b = sim("");
    assert_eq!(b.memory_stats().max_split_size, -1);
    b.set_allocator_settings(huge).unwrap();
    assert_eq!(b.memory_stats().max_split_size, i64::MAX);
    b.set_allocator_settings("max_split_size_mb:8796093022207")
        .unwrap();
    assert_eq!(b.memory_stats().max_split_size, 8796093022207 << 20);
    b.set_allocator_settings("").unwrap();
    assert_eq!(b.memory_stats().max_split_size, -1);
}

// ----- guards: inputs that were already handled ---------------------------------

/// Bad configuration strings: a typed error naming what is wrong, and a live
/// allocator whose settings, statistics and snapshot do not change.
#[test]
fn bad_configuration_strings_change_nothing() {
    let a = sim("max_split_size_mb:64,per_process_memory_fraction:0.5");
    let keep = a.allocate_raw(30 * MIB, S0).unwrap();
    let before = state(&a);
    let bad_value = [
        // Beyond a `u64`. (A `u64` number of MiB whose bytes overflow is
        // clamped, as PyTorch clamps it: pytorch_tests_s32.rs.)
        (
            "max_split_size_mb:18446744073709551616",
            "max_split_size_mb",
        ),
        ("max_split_size_mb:-1", "max_split_size_mb"),
        ("max_split_size_mb:19", "max_split_size_mb"),
        ("max_split_size_mb:２０", "max_split_size_mb"),
        (
            "max_non_split_rounding_mb:18446744073709551616",
            "max_non_split_rounding_mb",
        ),
        // Beyond a `u64`: PyTorch's `stoull` throws (a `u64` of MiB is
        // accepted and clamped: `hostile_sweep_s52.rs`).
        (
            "pinned_reserve_segment_size_mb:18446744073709551616",
            "pinned_reserve_segment_size_mb",
        ),
        (
            "garbage_collection_threshold:NaN",
            "garbage_collection_threshold",
        ),
        (
            "garbage_collection_threshold:inf",
            "garbage_collection_threshold",
        ),
        (
            "garbage_collection_threshold:1e309",
            "garbage_collection_threshold",
        ),
        (
            "garbage_collection_threshold:0",
            "garbage_collection_threshold",
        ),
        (
            "garbage_collection_threshold:1",
            "garbage_collection_threshold",
        ),
        (
            "per_process_memory_fraction:NaN",
            "per_process_memory_fraction",
        ),
        (
            "per_process_memory_fraction:-inf",
            "per_process_memory_fraction",
        ),
        (
            "per_process_memory_fraction:1.0000001",
            "per_process_memory_fraction",
        ),
        (
            "per_process_memory_fraction:-1e-300",
            "per_process_memory_fraction",
        ),
        ("roundup_power2_divisions:[:]", "roundup_power2_divisions"),
        ("roundup_power2_divisions:[1:>]", "roundup_power2_divisions"),
        ("roundup_power2_divisions:[3:2]", "roundup_power2_divisions"),
        ("roundup_power2_divisions:[0:2]", "roundup_power2_divisions"),
        ("roundup_power2_divisions:[1:3]", "roundup_power2_divisions"),
        // (`[]`, `[2:2,1:4]` and `[1:2,]` parse, as PyTorch parses them:
        // pytorch_tests_s32.rs.)
        (
            "roundup_power2_divisions:[1:2,,]",
            "roundup_power2_divisions",
        ),
        (
            "roundup_power2_divisions:[[1:2]]",
            "roundup_power2_divisions",
        ),
        ("roundup_power2_divisions:6", "roundup_power2_divisions"),
        ("expandable_segments:yes", "expandable_segments"),
        (
            "pinned_num_register_threads:0",
            "pinned_num_register_threads",
        ),
    ];
    for (s, key) in bad_value {
        match a.set_allocator_settings(s) {
            Err(AllocError::Config(ConfigError::BadValue { key: k, .. })) => {
                assert_eq!(k, key, "{s}")
            }
            other => panic!("{s}: expected BadValue, got {other:?}"),
        }
        assert_eq!(state(&a), before, "{s}");
    }
    let malformed: (&[&str], fn(&ConfigError) -> bool) = (
        &[
            "max_split_size_mb:",
            ":",
            ":1",
            "expandable_segments",
            "roundup_power2_divisions:[",
            "roundup_power2_divisions:]",
            "roundup_power2_divisions:[1:2]]",
            "max_split_size_mb:64,garbage",
        ],
        |e| matches!(e, ConfigError::Malformed { .. }),
    );
    let unknown_key: (&[&str], fn(&ConfigError) -> bool) = (
        &[
            "ｍax_split_size_mb:20",
            "a:b:c",
            "max_split_size_mb:64,no_such_key:1",
        ],
        |e| matches!(e, ConfigError::UnknownKey { .. }),
    );
    for (strings, expected) in [malformed, unknown_key] {
        for &s in strings {
            match a.set_allocator_settings(s) {
                Err(AllocError::Config(e)) => assert!(expected(&e), "{s}: {e:?}"),
                other => panic!("{s}: expected a configuration error, got {other:?}"),
            }
            assert_eq!(state(&a), before, "{s}");
        }
    }
    a.free_raw(keep).unwrap();
    a.check_consistency().unwrap();
}

/// Empty strings mean the defaults; an empty entry is malformed (PyTorch
/// takes the `,` for a key: "Unrecognized key ','"); a repeated key takes its
/// last value, as in PyTorch.
#[test]
fn empty_and_repeated_keys() {
    for s in ["", " "] {
        assert_eq!(
            AllocatorConfig::parse(s).unwrap(),
            AllocatorConfig::default()
        );
    }
    for s in [",", ",,,", " , "] {
        assert!(
            matches!(
                AllocatorConfig::parse(s),
                Err(ConfigError::Malformed { .. })
            ),
            "{s:?}"
        );
    }
    let c = AllocatorConfig::parse("expandable_segments:True, expandable_segments:False").unwrap();
    assert_eq!(c.expandable_segments, Some(false));
}

/// `set_memory_fraction` outside [0, 1] is a `BadValue` and changes nothing;
/// a tiny fraction allows nothing, and requests fail with the fraction hint.
#[test]
fn bad_memory_fractions_change_nothing() {
    let a = sim("");
    a.set_memory_fraction(0.5).unwrap();
    let keep = a.allocate_raw(30 * MIB, S0).unwrap();
    let before = state(&a);
    for f in [
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        -1.0,
        1.0 + f64::EPSILON,
        2.0,
    ] {
        assert!(
            matches!(
                a.set_memory_fraction(f),
                Err(AllocError::Config(ConfigError::BadValue {
                    key: "per_process_memory_fraction",
                    ..
                }))
            ),
            "{f}"
        );
        assert_eq!(state(&a), before, "{f}");
    }
    // A subnormal fraction is a valid one: it allows no more memory.
    a.set_memory_fraction(1e-320).unwrap();
    let e = a.allocate_raw(64 * MIB, StreamId(3)).unwrap_err();
    let oom = e.out_of_memory().expect("out of memory");
    assert_eq!(oom.allowed, Some(0));
    assert!(oom.hint.contains("per_process_memory_fraction"), "{e}");
    a.set_memory_fraction(1.0).unwrap();
    a.free_raw(keep).unwrap();
    a.check_consistency().unwrap();
}

/// Near the fraction's limit: what fits is granted, one page more is an
/// out-of-memory error that leaves the live blocks alone.
#[test]
fn allocations_at_the_fraction_limit() {
    for conf in ["expandable_segments:True", "expandable_segments:False"] {
        let d = Arc::new(SimDriver::new(1 << 30, 2 * MIB));
        let a = CachingAllocator::new(d, AllocatorConfig::parse(conf).unwrap());
        a.set_memory_fraction(0.25).unwrap(); // 256 MiB
        let x = a.allocate_raw(256 * MIB, S0).unwrap();
        assert!(a.memory_reserved() <= 256 * MIB, "{conf}");
        let e = a.allocate_raw(2 * MIB, S0).unwrap_err();
        assert!(e.is_out_of_memory(), "{conf}: {e}");
        assert_eq!(a.memory_allocated(), 256 * MIB, "{conf}");
        a.check_consistency().unwrap();
        a.free_raw(x).unwrap();
        let y = a.allocate_raw(2 * MIB, S0).unwrap();
        a.free_raw(y).unwrap();
        a.check_consistency().unwrap();
    }
}

/// Stale handles: a double free, a free of a handle whose block was handed
/// out again, `record_stream` on either: `InvalidFree`, nothing changed.
#[test]
fn stale_handles_change_nothing() {
    let a = sim("");
    let x = a.allocate_raw(4096, S0).unwrap();
    a.free_raw(x).unwrap();
    let before = state(&a);
    assert!(matches!(a.free_raw(x), Err(AllocError::InvalidFree { .. })));
    assert!(matches!(
        a.record_stream(&x, StreamId(9)),
        Err(AllocError::InvalidFree { .. })
    ));
    assert_eq!(state(&a), before);
    let y = a.allocate_raw(4096, S0).unwrap();
    assert_eq!(y.ptr(), x.ptr());
    let before = state(&a);
    assert!(matches!(a.free_raw(x), Err(AllocError::InvalidFree { .. })));
    assert_eq!(state(&a), before);
    // `record_stream` on a stream the allocator has not seen registers it
    // and defers reuse until its event completes.
    a.record_stream(&y, StreamId(12345)).unwrap();
    a.free_raw(y).unwrap();
    let z = a.allocate_raw(4096, S0).unwrap();
    assert_ne!(z.ptr(), y.ptr());
    a.free_raw(z).unwrap();
    a.check_consistency().unwrap();
    // A zero-byte handle is a no-op everywhere.
    let e = a.allocate_raw(0, S0).unwrap();
    a.free_raw(e).unwrap();
    a.free_raw(e).unwrap();
    a.record_stream(&e, StreamId(1)).unwrap();
}

/// Statistics resets while blocks are live keep the recount consistent, and
/// history can be switched on and off any number of times.
#[test]
fn resets_and_history_toggles_with_live_blocks() {
    let a = sim("");
    let x = a.allocate_raw(4096, S0).unwrap();
    let y = a.allocate_raw(8 * MIB, StreamId(5)).unwrap();
    a.record_stream(&y, StreamId(77)).unwrap();
    for i in 0..50 {
        a.record_history(if i % 3 == 0 { None } else { Some(i) });
    }
    // `Some(0)` records with one entry, as PyTorch's `setMaxEntries`.
    a.record_history(Some(0));
    assert!(a.history_enabled());
    a.record_history(None);
    assert!(!a.history_enabled());
    assert!(matches!(a.watch(), Err(AllocError::HistoryOff { .. })));
    a.record_history(Some(1));
    a.free_raw(y).unwrap();
    assert_eq!(a.history().len(), 1);
    assert!(a.live_by_site(usize::MAX).is_ok());
    a.reset_peak_memory_stats();
    a.reset_accumulated_memory_stats();
    a.check_consistency().unwrap();
    a.free_raw(x).unwrap();
    a.empty_cache().unwrap();
    a.check_consistency().unwrap();
    assert_eq!(a.memory_allocated(), 0);
    // Diagnostics of an allocator that never allocated.
    let e = sim("");
    assert!(!e.snapshot_pickle().unwrap().is_empty());
    assert!(!e.memory_report_html().is_empty());
    assert!(!e.memory_summary().is_empty());
    e.record_history(Some(10));
    assert!(!e.snapshot_pickle().unwrap().is_empty());
}

/// The pinned host allocator: zero, huge and foreign inputs.
#[test]
fn pinned_hostile_inputs() {
    let p = PinnedAllocator::new(SimPinnedBackend::new(Some(1 << 30)));
    let empty = p.allocate(0).unwrap();
    assert_eq!((empty.ptr(), empty.capacity()), (0, 0));
    empty.record_stream(StreamId(1)).unwrap();
    drop(empty);
    for size in [(1 << 30) + 1, (1 << 56) - 1, 1 << 56, u64::MAX] {
        let before = p.stats();
        assert!(
            matches!(p.allocate(size), Err(PinnedError::OutOfMemory { requested, .. }) if requested == size),
            "{size}"
        );
        assert_eq!(p.stats().allocated_bytes, before.allocated_bytes, "{size}");
        p.check_consistency().unwrap();
    }
    let b = p.allocate(10_000).unwrap();
    for ptr in [0, 1, u64::MAX, b.ptr() + b.capacity(), b.ptr() - 1] {
        assert_eq!(
            p.record_event(ptr, StreamId(1)),
            Err(PinnedError::InvalidPointer { ptr }),
            "{ptr:#x}"
        );
    }
    p.record_event(b.ptr() + 9_999, StreamId(1)).unwrap();
    let other = PinnedAllocator::new(SimPinnedBackend::new(None));
    assert!(matches!(
        other.record_event(b.ptr(), StreamId(1)),
        Err(PinnedError::InvalidPointer { .. })
    ));
    drop(b);
    p.check_consistency().unwrap();
}
