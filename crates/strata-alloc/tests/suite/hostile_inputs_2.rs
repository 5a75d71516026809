//! The second sweep of hostile inputs to the allocator's public API (after
//! `hostile_inputs.rs`): each input gets a typed error (or the documented
//! answer), and a refused call leaves settings, statistics and snapshot as
//! they were.
//!
//! Defects these tests found (fixed with them):
//!
//! * an out-of-memory observer that allocated again (retrying, or asking for
//!   a smaller fallback that also failed) was called again by its own
//!   failure, without end: the stack overflowed and the process aborted;
//! * `apply_config` installed any `AllocatorConfig` built field by field: a
//!   NaN memory fraction (which `memory_fraction()` then reported, while no
//!   limit applied), a garbage-collection threshold of 5, a split limit of 0,
//!   divisions of 3; it now checks the fields as the parser does
//!   (`AllocatorConfig::validate`), and `CachingAllocator::try_new` does the
//!   same for a new allocator;
//! * a `Watch` taken on one allocator and compared with another gave the
//!   other's call sites as growth; it is now `AllocError::ForeignWatch`;
//! * `dump_snapshot` to a path that cannot be written recorded a `snapshot`
//!   trace event before failing, so the refused call changed the history.
//!
//! The tests after those pin down inputs that were already handled.

use crate::common;

use common::{sim, sim_with, state, stats_but_ooms};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;
use strata_alloc::driver::sim::SimDriver;
use strata_alloc::history::Action;
use strata_alloc::pinned::{size_class, PinnedAllocator, PinnedError, SimPinnedBackend};
use strata_alloc::{AllocError, AllocatorConfig, CachingAllocator, ConfigError, StreamId};

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
const S0: StreamId = StreamId::DEFAULT;

/// Runs `f` on another thread and fails the test if it has not finished
/// within a few seconds (a deadlock would otherwise hang the suite).
fn within_seconds<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(20))
        .unwrap_or_else(|_| panic!("{what}: did not finish (deadlock?)"))
}

// ----- regressions -------------------------------------------------------------

/// An observer that allocates again when told of an out-of-memory error
/// (a retry, a smaller fallback that also fails) used to be called by its own
/// failure, again and again, until the stack overflowed (an abort). The
/// nested failure now returns its error to the observer without calling the
/// observers again.
#[test]
fn an_oom_observer_that_allocates_again_is_not_called_recursively() {
    for conf in ["expandable_segments:True", "expandable_segments:False"] {
        let a = sim_with(GIB, conf);
        let calls = Arc::new(AtomicUsize::new(0));
        let nested_ok = Arc::new(AtomicUsize::new(0));
        let weak = Arc::downgrade(&a);
        let (c, n) = (Arc::clone(&calls), Arc::clone(&nested_ok));
        a.on_oom(move |oom, _| {
            c.fetch_add(1, Ordering::SeqCst);
            let a = weak.upgrade().expect("allocator alive");
            // The same size again, then half of it: both too large.
            for size in [oom.requested, oom.requested / 2] {
                match a.allocate_raw(size, StreamId(7)) {
                    Err(e) if e.out_of_memory().is_some() => {
                        n.fetch_add(1, Ordering::SeqCst);
                    }
                    other => panic!("{size}: expected out of memory, got {other:?}"),
                }
            }
            // A size that fits works from inside the observer.
            let small = a.allocate_raw(4096, StreamId(7)).unwrap();
            a.free_raw(small).unwrap();
        });
        let keep = a.allocate_raw(100 * MIB, S0).unwrap();
        let before = a.snapshot();
        let e = a.allocate_raw(4 * GIB, S0).unwrap_err();
        assert_eq!(e.out_of_memory().expect("oom").requested, 4 * GIB);
        assert_eq!(calls.load(Ordering::SeqCst), 1, "{conf}");
        assert_eq!(nested_ok.load(Ordering::SeqCst), 2, "{conf}");
        // Three failures counted: the request and the two nested ones.
        assert_eq!(a.memory_stats().num_ooms, 3, "{conf}");
        assert_eq!(a.memory_allocated(), 100 * MIB, "{conf}");
        // The observer's small block was freed into the cache of stream 7.
        assert!(a.snapshot().len() >= before.len(), "{conf}");
        a.check_consistency().unwrap();
        // The next failure calls the observer again (once).
        assert!(a.allocate_raw(2 * GIB, S0).is_err());
        assert_eq!(calls.load(Ordering::SeqCst), 2, "{conf}");
        a.free_raw(keep).unwrap();
        a.check_consistency().unwrap();
    }
}

/// An observer of one allocator that allocates on another allocator whose
/// own observer allocates back on the first: each failure notifies each
/// allocator's observers once, and nothing recurses.
#[test]
fn oom_observers_of_two_allocators_calling_each_other_terminate() {
    let (a, b) = (sim_with(GIB, ""), sim_with(GIB, ""));
    let calls = Arc::new(AtomicUsize::new(0));
    for (me, other) in [(&a, &b), (&b, &a)] {
        let other = Arc::downgrade(other);
        let c = Arc::clone(&calls);
        me.on_oom(move |_, _| {
            c.fetch_add(1, Ordering::SeqCst);
            let o = other.upgrade().unwrap();
            assert!(o.allocate_raw(8 * GIB, S0).unwrap_err().is_out_of_memory());
        });
    }
    assert!(a.allocate_raw(8 * GIB, S0).is_err());
    // a's observer, b's observer (from a's), and a's nested failure inside
    // b's observer is not reported to a's observers again.
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    assert_eq!(a.memory_stats().num_ooms, 2);
    assert_eq!(b.memory_stats().num_ooms, 1);
    a.check_consistency().unwrap();
    b.check_consistency().unwrap();
}

/// A panicking observer: the panic reaches the caller of the failed
/// allocation, the allocator is as the failure left it and goes on working,
/// and later failures call the observers again (the marker that stops
/// recursion is cleared by the unwinding too).
#[test]
fn a_panicking_oom_observer_leaves_the_allocator_working() {
    let a = sim_with(GIB, "");
    let keep = a.allocate_raw(10 * MIB, S0).unwrap();
    // A failure releases the cache before giving up: one first, so that the
    // state compared below is the one a failure leaves.
    assert!(a.allocate_raw(2 * GIB, S0).is_err());
    a.on_oom(|_, _| panic!("observer failed"));
    let (config, stats, segments) = (a.config(), stats_but_ooms(&a), a.snapshot());
    let r = catch_unwind(AssertUnwindSafe(|| a.allocate_raw(2 * GIB, S0)));
    assert!(r.is_err(), "the observer's panic propagates");
    assert_eq!(a.config(), config);
    assert_eq!(stats_but_ooms(&a), stats);
    assert_eq!(a.snapshot(), segments);
    assert_eq!(a.memory_stats().num_ooms, 2);
    a.check_consistency().unwrap();
    // Working: allocate, free, and the observers run on the next failure.
    a.clear_oom_observers();
    let seen = Arc::new(AtomicUsize::new(0));
    let s = Arc::clone(&seen);
    a.on_oom(move |_, _| {
        s.fetch_add(1, Ordering::SeqCst);
    });
    let x = a.allocate_raw(64 * MIB, StreamId(3)).unwrap();
    assert!(a.allocate_raw(2 * GIB, S0).is_err());
    assert_eq!(seen.load(Ordering::SeqCst), 1);
    a.free_raw(x).unwrap();
    a.free_raw(keep).unwrap();
    a.empty_cache().unwrap();
    assert_eq!((a.memory_allocated(), a.memory_reserved()), (0, 0));
}

/// `apply_config` with fields out of the ranges their keys accept: a
/// `BadValue` naming the key, and nothing changed. (Before, each was
/// installed: a NaN fraction read back from `memory_fraction()` while no
/// limit applied, a negative one allowed nothing, a threshold of 5 ran the
/// garbage collection on every request.)
#[test]
fn apply_config_refuses_fields_out_of_range() {
    let a = sim("max_split_size_mb:64,per_process_memory_fraction:0.5");
    let keep = a.allocate_raw(30 * MIB, S0).unwrap();
    let before = state(&a);
    type Edit = fn(&mut AllocatorConfig);
    let cases: [(Edit, &str); 16] = [
        (
            |c| c.per_process_memory_fraction = Some(f64::NAN),
            "per_process_memory_fraction",
        ),
        (
            |c| c.per_process_memory_fraction = Some(-0.5),
            "per_process_memory_fraction",
        ),
        (
            |c| c.per_process_memory_fraction = Some(f64::INFINITY),
            "per_process_memory_fraction",
        ),
        (
            |c| c.per_process_memory_fraction = Some(1.5),
            "per_process_memory_fraction",
        ),
        (
            |c| c.garbage_collection_threshold = Some(5.0),
            "garbage_collection_threshold",
        ),
        (
            |c| c.garbage_collection_threshold = Some(f64::NAN),
            "garbage_collection_threshold",
        ),
        (
            |c| c.garbage_collection_threshold = Some(0.0),
            "garbage_collection_threshold",
        ),
        (|c| c.max_split_size = Some(0), "max_split_size_mb"),
        (
            |c| c.max_split_size = Some(20 * MIB - 1),
            "max_split_size_mb",
        ),
        (
            |c| c.roundup_power2_divisions[7] = 3,
            "roundup_power2_divisions",
        ),
        (
            |c| c.roundup_power2_divisions = [u64::MAX; 16],
            "roundup_power2_divisions",
        ),
        (
            |c| c.max_non_split_rounding = 0,
            "max_non_split_rounding_mb",
        ),
        (
            |c| c.pinned_num_register_threads = 0,
            "pinned_num_register_threads",
        ),
        (
            |c| c.pinned_num_register_threads = 256,
            "pinned_num_register_threads",
        ),
        (
            |c| c.pinned_reserve_segment_size = 4096,
            "pinned_reserve_segment_size_mb",
        ),
        (
            |c| c.pinned_num_register_threads = 3,
            "pinned_num_register_threads",
        ),
    ];
    for (edit, key) in cases {
        let mut c = a.config();
        edit(&mut c);
        match a.apply_config(c.clone()) {
            Err(AllocError::Config(ConfigError::BadValue { key: k, .. })) => {
                assert_eq!(k, key, "{c:?}")
            }
            other => panic!("{key}: expected BadValue, got {other:?}"),
        }
        assert_eq!(state(&a), before, "{key}");
        let e = CachingAllocator::try_new(Arc::new(SimDriver::new(GIB, 2 * MIB)), c)
            .err()
            .expect("try_new refuses it too");
        assert!(e.to_string().contains(key), "{e}");
    }
    // Valid configurations built by hand are installed whole.
    let mut c = AllocatorConfig {
        max_split_size: Some(20 * MIB),
        per_process_memory_fraction: Some(0.25),
        ..AllocatorConfig::default()
    };
    c.roundup_power2_divisions[3] = 8;
    a.apply_config(c.clone()).unwrap();
    assert_eq!(a.config(), c);
    assert_eq!(a.memory_fraction(), 0.25);
    assert!(CachingAllocator::try_new(Arc::new(SimDriver::h100()), c).is_ok());
    a.free_raw(keep).unwrap();
    a.check_consistency().unwrap();
}

/// A watch compared with another allocator than its own used to report the
/// other allocator's call sites as growth.
#[test]
fn a_watch_compared_with_another_allocator_is_refused() {
    let (a, b) = (sim(""), sim(""));
    a.record_history(Some(1000));
    b.record_history(Some(1000));
    let w = a.watch().unwrap();
    let _leak = b.allocate_raw(4096, S0).unwrap();
    match w.grown(&b) {
        Err(e @ AllocError::ForeignWatch { .. }) => {
            let msg = e.to_string();
            assert!(msg.contains("another allocator"), "{msg}");
            assert!(msg.contains("allocator.watch()"), "{msg}");
        }
        other => panic!("expected ForeignWatch, got {other:?}"),
    }
    assert!(matches!(
        w.grown_at_frame(&b, |_| true),
        Err(AllocError::ForeignWatch { .. })
    ));
    // Its own allocator still works with it.
    assert!(w.grown(&a).unwrap().is_empty());
}

/// `dump_snapshot` to a path that cannot be written: a `Write` error naming
/// the path, and the history as it was (it used to gain a `snapshot` event
/// for the snapshot taken before the write failed).
#[test]
fn diagnostics_to_unwritable_paths_are_write_errors_that_change_nothing() {
    let a = sim("");
    a.record_history(Some(1000));
    let _x = a.allocate_raw(4096, S0).unwrap();
    let dir = std::env::temp_dir();
    let missing = dir.join("strata_no_such_dir_hostile_2").join("x.pickle");
    let paths = [dir.clone(), missing, std::path::PathBuf::new()];
    // (Taking the snapshot records a `snapshot` event: it goes first.)
    let segments = a.snapshot();
    let (history, stats) = (a.history(), a.memory_stats());
    for p in &paths {
        for r in [a.dump_snapshot(p), a.memory_report(p)] {
            match r {
                Err(e @ AllocError::Write { .. }) => {
                    let msg = e.to_string();
                    assert!(msg.contains(&p.display().to_string()), "{msg}");
                    assert!(msg.contains("writable directory"), "{msg}");
                }
                other => panic!("{}: expected Write, got {other:?}", p.display()),
            }
        }
        assert_eq!(a.history(), history, "{}", p.display());
        assert_eq!(a.memory_stats(), stats, "{}", p.display());
    }
    assert_eq!(
        a.history()
            .iter()
            .filter(|e| e.action == Action::Snapshot)
            .count(),
        1
    );
    assert_eq!(a.snapshot(), segments);
    // A writable path works afterwards.
    let ok = dir.join(format!("strata_hostile_2_{}.pickle", std::process::id()));
    a.dump_snapshot(&ok).unwrap();
    assert!(std::fs::metadata(&ok).unwrap().len() > 0);
    let _ = std::fs::remove_file(&ok);
}

// ----- guards: inputs that were already handled ---------------------------------

/// Observers that call back into the allocator — statistics, snapshots,
/// `empty_cache`, registering and clearing observers — do not deadlock.
#[test]
fn oom_observers_that_reenter_the_allocator_do_not_deadlock() {
    within_seconds("re-entrant observer", || {
        let a = sim_with(GIB, "");
        let weak = Arc::downgrade(&a);
        let calls = Arc::new(AtomicUsize::new(0));
        let c = Arc::clone(&calls);
        a.on_oom(move |_, segs| {
            c.fetch_add(1, Ordering::SeqCst);
            let a = weak.upgrade().unwrap();
            let _ = (a.memory_stats(), a.snapshot(), a.memory_summary());
            assert_eq!(a.snapshot().len(), segs.len());
            a.empty_cache().unwrap();
            a.set_allocator_settings("max_split_size_mb:64").unwrap();
            a.clear_oom_observers();
            a.on_oom(|_, _| {});
            a.check_consistency().unwrap();
        });
        let x = a.allocate_raw(300 * MIB, S0).unwrap();
        a.free_raw(x).unwrap();
        assert!(a.allocate_raw(2 * GIB, S0).is_err());
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        // The observer emptied the cache and cleared itself.
        assert_eq!(a.memory_reserved(), 0);
        assert_eq!(a.config().max_split_size, Some(64 * MIB));
        assert!(a.allocate_raw(2 * GIB, S0).is_err());
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    });
}

/// Sizes around the device's capacity and the 1 EiB limit: out-of-memory
/// errors with the size asked for, and nothing changed but `num_ooms`.
#[test]
fn sizes_around_the_capacity_change_nothing_but_the_oom_count() {
    for conf in ["expandable_segments:True", "expandable_segments:False"] {
        let a = sim_with(GIB, conf);
        let keep = a.allocate_raw(1, S0).unwrap();
        assert_eq!(a.memory_allocated(), 512, "{conf}: size 1 takes 512 bytes");
        let (config, stats, segments) = (a.config(), stats_but_ooms(&a), a.snapshot());
        let mut ooms = 0;
        for size in [GIB + 1, GIB + 512, GIB + 2 * MIB, 2 * GIB, (1 << 60) - 1] {
            let e = a.allocate_raw(size, StreamId(11)).unwrap_err();
            let oom = e.out_of_memory().unwrap_or_else(|| panic!("{size}: {e}"));
            assert_eq!(oom.requested, size, "{conf}");
            assert!(!oom.hint.is_empty(), "{conf}: {e}");
            ooms += 1;
            assert_eq!(a.memory_stats().num_ooms, ooms, "{conf}: {size}");
            assert_eq!(stats_but_ooms(&a), stats, "{conf}: {size}");
            assert_eq!(a.snapshot(), segments, "{conf}: {size}");
        }
        for size in [isize::MAX as u64, 1 << 60, u64::MAX - 1, u64::MAX - 4096] {
            match a.allocate_raw(size, StreamId(11)) {
                Err(e @ AllocError::TooLarge { .. }) => {
                    assert!(e.to_string().contains("overflow"), "{e}");
                    assert!(e.is_out_of_memory());
                }
                other => panic!("{conf}: {size}: expected TooLarge, got {other:?}"),
            }
            assert_eq!(a.memory_stats().num_ooms, ooms, "TooLarge is not counted");
        }
        assert_eq!(a.config(), config);
        // Exactly the capacity (less what is held) still fits.
        let x = a.allocate_raw(GIB - 2 * MIB, S0).unwrap();
        a.free_raw(x).unwrap();
        a.free_raw(keep).unwrap();
        a.check_consistency().unwrap();
    }
}

/// Thousands of streams, each seen first by an allocation, with history on:
/// every block and every history entry keeps its own stream, frees go back
/// to their stream's cache, and everything is released at the end.
#[test]
fn thousands_of_streams() {
    const N: u64 = 3000;
    let a = sim("expandable_segments:False");
    a.record_history(Some(usize::MAX));
    let mut live = Vec::new();
    for s in 0..N {
        let stream = StreamId(0x1000 + s * 7919);
        live.push((stream, a.allocate_raw(512 * (s % 5 + 1), stream).unwrap()));
    }
    a.check_consistency().unwrap();
    let h = a.history();
    let allocs: Vec<_> = h.iter().filter(|e| e.action == Action::Alloc).collect();
    assert_eq!(allocs.len() as u64, N);
    for (e, (stream, raw)) in allocs.iter().zip(&live) {
        assert_eq!((e.stream, e.addr), (*stream, raw.ptr()));
    }
    for s in a.snapshot() {
        assert!(live.iter().any(|(st, _)| *st == s.stream));
    }
    // Every block freed on its stream is reused by that stream only.
    for (stream, raw) in live.drain(..) {
        a.free_raw(raw).unwrap();
        let again = a.allocate_raw(raw.size(), stream).unwrap();
        assert_eq!(again.ptr(), raw.ptr());
        a.free_raw(again).unwrap();
    }
    a.check_consistency().unwrap();
    a.empty_cache().unwrap();
    assert_eq!((a.memory_allocated(), a.memory_reserved()), (0, 0));
}

/// `record_stream` on the allocating stream is a no-op; repeated on one
/// foreign stream it records one use (one event at the free); on thousands
/// of foreign streams, the block waits for all of them.
#[test]
fn record_stream_on_own_repeated_and_many_streams() {
    let d = Arc::new(SimDriver::new(1 << 34, 2 * MIB));
    let a = CachingAllocator::new(d.clone(), AllocatorConfig::default());
    let x = a.allocate_raw(4096, StreamId(5)).unwrap();
    for _ in 0..100 {
        a.record_stream(&x, StreamId(5)).unwrap();
    }
    let events = a.driver_calls().event_record;
    a.free_raw(x).unwrap();
    assert_eq!(
        a.driver_calls().event_record,
        events,
        "no event for the own stream"
    );
    let y = a.allocate_raw(4096, StreamId(5)).unwrap();
    assert_eq!(y.ptr(), x.ptr(), "reusable at once");
    for _ in 0..1000 {
        a.record_stream(&y, StreamId(9)).unwrap();
    }
    a.free_raw(y).unwrap();
    assert_eq!(a.driver_calls().event_record, events + 1);
    d.complete_all_events();
    let z = a.allocate_raw(4096, StreamId(5)).unwrap();
    assert_eq!(z.ptr(), y.ptr(), "reused once its event completed");
    for s in 0..2000u64 {
        a.record_stream(&z, StreamId(100 + s)).unwrap();
    }
    a.free_raw(z).unwrap();
    assert_eq!(a.driver_calls().event_record, events + 2001);
    let w = a.allocate_raw(4096, StreamId(5)).unwrap();
    assert_ne!(w.ptr(), z.ptr(), "waits for 2000 streams");
    a.free_raw(w).unwrap();
    d.complete_all_events();
    a.empty_cache().unwrap();
    a.check_consistency().unwrap();
    assert_eq!(a.memory_reserved(), 0);
}

/// `watch()` with live allocations, then frees and `empty_cache`: the watch
/// stays usable and reports no growth; the live ones are kept.
#[test]
fn watch_then_empty_cache() {
    let a = sim("");
    a.record_history(Some(10_000));
    let kept = a.allocate_raw(8 * MIB, S0).unwrap();
    let temp = a.allocate_raw(4096, S0).unwrap();
    let w = a.watch().unwrap();
    a.free_raw(temp).unwrap();
    a.empty_cache().unwrap();
    assert!(w.grown(&a).unwrap().is_empty());
    assert!(w.grown_at_frame(&a, |_| true).unwrap().is_empty());
    let grown_line = line!() + 1;
    let more = a.allocate_raw(4096, S0).unwrap();
    a.empty_cache().unwrap();
    let g = w.grown(&a).unwrap();
    assert_eq!(g.len(), 1);
    assert_eq!(g[0].site.unwrap().line, grown_line);
    // History turned off: a typed error, not stale figures.
    a.record_history(None);
    assert!(matches!(w.grown(&a), Err(AllocError::HistoryOff { .. })));
    a.free_raw(more).unwrap();
    a.free_raw(kept).unwrap();
    a.check_consistency().unwrap();
}

/// Configuration strings the first sweep did not try: floats, hex and
/// exponents where integers are expected, separators inside lists, unicode,
/// lists of more than 64 entries, nested brackets. Each is refused with the
/// key named, and changes nothing.
#[test]
fn more_bad_configuration_strings_change_nothing() {
    let a = sim("max_split_size_mb:64");
    let before = state(&a);
    let all_pow2: Vec<String> = (0..64).map(|i| format!("{}:2", 1u64 << i)).collect();
    let over_64: Vec<String> = (0..65).map(|i| format!("{}:2", 1u128 << i)).collect();
    let bad_value = [
        ("max_split_size_mb:20.5", "max_split_size_mb"),
        ("max_split_size_mb:1e3", "max_split_size_mb"),
        ("max_split_size_mb:0x40", "max_split_size_mb"),
        ("max_split_size_mb:64MB", "max_split_size_mb"),
        ("max_split_size_mb:NaN", "max_split_size_mb"),
        ("max_split_size_mb:٦٤", "max_split_size_mb"),
        (
            "max_split_size_mb:99999999999999999999999",
            "max_split_size_mb",
        ),
        ("max_non_split_rounding_mb:-20", "max_non_split_rounding_mb"),
        (
            "pinned_num_register_threads:2.0",
            "pinned_num_register_threads",
        ),
        ("expandable_segments:Ｔrue", "expandable_segments"),
        ("expandable_segments:True🙂", "expandable_segments"),
        ("expandable_segments:TRUE", "expandable_segments"),
        (
            "per_process_memory_fraction:0x1p-1",
            "per_process_memory_fraction",
        ),
        (
            "garbage_collection_threshold:-0.5",
            "garbage_collection_threshold",
        ),
        (
            "roundup_power2_divisions:[1:2,,4:4]",
            "roundup_power2_divisions",
        ),
        (
            "roundup_power2_divisions:[1:[2:4]]",
            "roundup_power2_divisions",
        ),
        (
            "roundup_power2_divisions:[1:2][4:4]",
            "roundup_power2_divisions",
        ),
        (
            "roundup_power2_divisions:[1:2.0]",
            "roundup_power2_divisions",
        ),
        (
            "roundup_power2_divisions:[1.5:2]",
            "roundup_power2_divisions",
        ),
        (
            "roundup_power2_divisions:[-1:2]",
            "roundup_power2_divisions",
        ),
        (
            "roundup_power2_divisions:[1:-2]",
            "roundup_power2_divisions",
        ),
        ("roundup_power2_divisions:4.0", "roundup_power2_divisions"),
        ("backend:", "backend"),
    ];
    // Keys past 32768 MiB all land on the last interval, which PyTorch
    // allows (it clamps the index and checks no order): every interval 2.
    let c = AllocatorConfig::parse(&format!(
        "roundup_power2_divisions:[{}]",
        all_pow2.join(",")
    ))
    .unwrap();
    assert_eq!(c.roundup_power2_divisions, [2; 16]);
    // A key of 2^64 MiB is no `size_t`.
    let lists = [format!("roundup_power2_divisions:[{}]", over_64.join(","))];
    let all: Vec<(String, &str)> = bad_value
        .iter()
        .map(|(s, k)| (s.to_string(), *k))
        .chain(
            lists
                .iter()
                .map(|s| (s.clone(), "roundup_power2_divisions")),
        )
        .collect();
    for (s, key) in &all {
        match a.set_allocator_settings(s) {
            Err(AllocError::Config(ConfigError::BadValue { key: k, value, .. })) => {
                assert_eq!(k, *key, "{s}");
                assert!(s.contains(value.as_str()), "{s}: {value}");
            }
            // `backend:` has an empty value: malformed.
            Err(AllocError::Config(ConfigError::Malformed { .. })) if s == "backend:" => {}
            other => panic!("{s}: expected BadValue, got {other:?}"),
        }
        assert_eq!(state(&a), before, "{s}");
        let e = AllocatorConfig::parse(s).unwrap_err().to_string();
        assert!(e.contains(key), "{s}: {e}");
    }
    for s in ["max_split_size_mb::64", "max_split_size_mb:64:", "[1:2]:4"] {
        assert!(a.set_allocator_settings(s).is_err(), "{s}");
        assert_eq!(state(&a), before, "{s}");
    }
    // One trailing comma and whitespace anywhere are accepted, and a
    // repeated key takes its last value, as in PyTorch; two trailing commas
    // leave an empty entry, which PyTorch refuses ("Unrecognized key ','").
    let c = AllocatorConfig::parse(" max_split_size_mb : 64 , max_split_size_mb:128 ,").unwrap();
    assert_eq!(c.max_split_size, Some(128 * MIB));
    assert!(matches!(
        AllocatorConfig::parse(" max_split_size_mb : 64 , max_split_size_mb:128 ,,"),
        Err(ConfigError::Malformed { .. })
    ));
    // A huge string of separators is a typed error, quickly.
    let many = ",".repeat(1 << 20);
    assert!(matches!(
        AllocatorConfig::parse(&many),
        Err(ConfigError::Malformed { .. })
    ));
}

/// `set_memory_fraction` with subnormals, -0.0 and values a hair inside the
/// range: accepted with the meaning PyTorch gives them; the allowed bytes
/// never wrap.
#[test]
fn memory_fractions_at_the_edges_of_the_range() {
    let a = sim_with(GIB, "");
    for f in [f64::MIN_POSITIVE, 5e-324, -0.0, 0.0] {
        a.set_memory_fraction(f).unwrap();
        let e = a.allocate_raw(4096, S0).unwrap_err();
        assert_eq!(e.out_of_memory().unwrap().allowed, Some(0), "{f}");
    }
    a.set_memory_fraction(1.0 - f64::EPSILON).unwrap();
    let x = a.allocate_raw(GIB - 2 * MIB, S0).unwrap();
    a.free_raw(x).unwrap();
    a.set_memory_fraction(1.0).unwrap();
    assert_eq!(a.memory_fraction(), 1.0);
    a.check_consistency().unwrap();
}

/// The pinned allocator: sizes around its backend's capacity and the
/// 2^56 limit, size classes that never wrap, and a cache that keeps working.
#[test]
fn pinned_sizes_around_the_limits() {
    for size in [1, 4095, 4096, 4097, (1 << 56) - 1, 1 << 56, u64::MAX] {
        let c = size_class(size);
        assert!(c >= size.min(1 << 56), "{size}: {c}");
        assert_eq!(c % 4096, 0, "{size}");
    }
    let p = PinnedAllocator::new(SimPinnedBackend::new(Some(GIB)));
    let one = p.allocate(1).unwrap();
    assert_eq!((one.len(), one.capacity()), (1, 4096));
    for size in [
        GIB + 1,
        2 * GIB,
        isize::MAX as u64,
        u64::MAX - 1,
        u64::MAX - 4096,
    ] {
        let before = p.stats();
        match p.allocate(size) {
            Err(e @ PinnedError::OutOfMemory { .. }) => {
                assert!(e.to_string().contains("out of pinned host memory"), "{e}")
            }
            other => panic!("{size}: expected OutOfMemory, got {other:?}"),
        }
        assert_eq!(p.stats().allocated_bytes, before.allocated_bytes, "{size}");
        assert_eq!(p.stats().active_bytes, before.active_bytes, "{size}");
        p.check_consistency().unwrap();
    }
    // The whole capacity fits once the page is given back.
    drop(one);
    let big = p.allocate(GIB).unwrap();
    assert_eq!(big.capacity(), GIB);
    drop(big);
    p.empty_cache().unwrap();
    assert_eq!(p.cached_bytes(), 0);
    p.check_consistency().unwrap();
}

/// The keys newer than PyTorch 2.11 at their extremes: a segment size of
/// 2^40 MiB (a 5 MiB request then asks the device for 1 EiB: a typed
/// out-of-memory error, the state as it was), a size that overflows bytes
/// (clamped, as PyTorch clamps it; its segments refused typed), pinned limits of 0 (every pinned block its own size and given
/// back at once), and `throw_on_cudamalloc_oom` with a fraction of 0 given
/// at start-up (every cache miss fails, nothing reserved: the fraction in
/// force, 0 too, is checked first, so the failure is the ordinary one, as in
/// PyTorch 2.15 (`hostile_s59.rs`), where this test first expected a
/// rejection).
#[test]
fn the_newest_keys_at_their_extremes() {
    let a = sim("expandable_segments:False,large_segment_size_mb:1099511627776,max_split_size_mb:1099511627776");
    let before = state(&a);
    let r = catch_unwind(AssertUnwindSafe(|| a.allocate(5 << 20, StreamId::DEFAULT)));
    let e = r.expect("no panic").unwrap_err();
    assert!(e.is_out_of_memory(), "{e}");
    assert_eq!(stats_but_ooms(&a), before.1);
    a.check_consistency().unwrap();
    // A number of MiB whose bytes overflow clamps, as PyTorch's
    // parseLargeSegmentSize clamps it; such a segment is refused typed.
    let huge = AllocatorConfig::parse("large_segment_size_mb:17592186044416").unwrap();
    assert_eq!(huge.large_segment_size, (u64::MAX >> 20) << 20);
    let h = sim(&format!(
        "expandable_segments:False,large_segment_size_mb:{}",
        u64::MAX
    ));
    let before = state(&h);
    let r = catch_unwind(AssertUnwindSafe(|| h.allocate(5 << 20, StreamId::DEFAULT)));
    assert!(r.expect("no panic").is_err());
    assert_eq!(stats_but_ooms(&h), before.1);
    h.check_consistency().unwrap();
    assert!(AllocatorConfig::parse("large_segment_size_mb:18446744073709551616").is_err());
    // PyTorch 2.15 clamps the pinned keys' MiB as it clamps the split keys'
    // (`hostile_sweep_s52.rs`); beyond a `u64` its `stoull` throws.
    assert_eq!(
        AllocatorConfig::parse("pinned_max_cached_size_mb:17592186044416")
            .unwrap()
            .pinned_max_cached_size,
        (u64::MAX >> 20) << 20
    );
    assert!(AllocatorConfig::parse("pinned_max_cached_size_mb:18446744073709551616").is_err());

    let b = Arc::new(SimPinnedBackend::new(None));
    let p = PinnedAllocator::new(Arc::clone(&b));
    p.set_limits(strata_alloc::pinned::PinnedLimits::of(
        &AllocatorConfig::parse("pinned_max_round_threshold_mb:0,pinned_max_cached_size_mb:0")
            .unwrap(),
    ));
    for size in [0u64, 1, 4097, 3 << 20] {
        let t = p.allocate(size).unwrap();
        assert_eq!(t.capacity(), size.div_ceil(4096) * 4096, "{size}");
        drop(t);
        assert_eq!(p.stats().allocations.current, 0, "{size}: not cached");
    }
    p.check_consistency().unwrap();

    let a = sim("per_process_memory_fraction:0,throw_on_cudamalloc_oom:True");
    let e = a.allocate(512, StreamId::DEFAULT).unwrap_err();
    assert!(
        matches!(&e, AllocError::OutOfMemory(o) if o.allowed == Some(0)),
        "{e:?}"
    );
    assert_eq!(a.memory_stats().reserved_bytes.all().current, 0);
    assert_eq!(a.memory_stats().num_oom_rejections, 0);
    assert_eq!(a.memory_stats().num_ooms, 1);
    // Named at run time, the key's fraction of 0 rejects every cache miss
    // once no fraction is in force.
    a.set_memory_fraction(1.0).unwrap();
    let e = a.allocate(512, StreamId::DEFAULT).unwrap_err();
    assert!(
        matches!(e, AllocError::OomRejected { limit: 0, .. }),
        "{e:?}"
    );
    assert_eq!(a.memory_stats().reserved_bytes.all().current, 0);
    assert_eq!(a.memory_stats().num_oom_rejections, 1);
}
