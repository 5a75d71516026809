//! Session 55's sweep of hostile inputs to strata-alloc's public API (after
//! `hostile_sweep_s53.rs`): allocations made and freed by thread-local
//! destructors, configurations built in code, thousands of streams on the
//! pinned allocator and in the reserve-class look-up, and threads sharing
//! private pools, trace trackers and reconfiguration.
//!
//! Defects these tests found (fixed with them):
//!
//! * An allocation freed (or made) by the destructor of a thread local, as
//!   a per-thread cache of buffers is dropped when its thread exits,
//!   aborted the process ("fatal runtime error: thread local panicked on
//!   drop") when a trace tracker was attached, when the thread had set
//!   memory metadata, or when the allocation failed for lack of memory; so
//!   did `strata_alloc::allocator(device)` called from such a destructor.
//!   The allocator's own thread locals (the trackers' and observers'
//!   re-entry markers, the thread's metadata, the registry's per-thread
//!   cache) had been destroyed first, and reading them with `with` panics.
//!   They are now read with `try_with`: the re-entry markers fall back to
//!   a flag without a destructor (src/reentry.rs), the metadata reads as
//!   none, the registry answers without its cache.
//! * `apply_config` accepted a configuration listing a class twice in
//!   `expandable_segments_reserve_by_class`. A stream of that class then
//!   reserved by the first entry, while the configuration's string form
//!   (its `Display`, also the snapshot's and the out-of-memory error's
//!   settings) parses back to the last, as PyTorch's map keeps it. Such a
//!   configuration is now a `BadValue` naming the class, and changes
//!   nothing.
//! * `PinnedAllocator::record_event` looked for the stream in a list of
//!   the block's streams: quadratic in the number of distinct streams
//!   (50,000 streams on one buffer took 0.7 s, 200,000 about 11 s). Past
//!   16 streams the block now keeps a set (PyTorch keeps a hash set).
//! * `CachingAllocator::stream_reserve_class` scanned every stream entry
//!   (20,000 streams set and read back: 0.37 s; 100,000: about 9 s); it is
//!   now a look-up.

use super::common::{recount, sim_device, stat, Lcg};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use strata_alloc::history::Action;
use strata_alloc::pinned::{PinnedAllocator, SimPinnedBackend};
use strata_alloc::{
    AllocError, AllocatorConfig, CachingAllocator, ConfigError, MemPoolOptions, RawAllocation,
    Reserve, StreamId,
};

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
const S0: StreamId = StreamId::DEFAULT;

// ----- thread-local destructors ---------------------------------------------

/// The name of `name`, a test of this module, in this test binary.
fn test_path(name: &str) -> String {
    let path = module_path!();
    match path.split_once("::") {
        Some((_, m)) => format!("{m}::{name}"),
        None => name.to_string(),
    }
}

/// Allocations a thread keeps until it exits (freed by the thread local's
/// destructor).
struct Kept(Vec<strata_alloc::Allocation>);

/// Allocators that a thread local's destructor allocates from as its thread
/// exits: a request too large for the device (an out-of-memory error) and
/// a small one, freed at once; then a registry look-up.
struct AllocatesOnExit(Vec<Arc<CachingAllocator>>, Arc<Mutex<Vec<String>>>);

impl Drop for AllocatesOnExit {
    fn drop(&mut self) {
        for a in &self.0 {
            let e = a.allocate(1 << 40, S0).unwrap_err();
            self.1
                .lock()
                .unwrap()
                .push(format!("oom: {}", e.is_out_of_memory()));
            let x = a.allocate(1000, S0).unwrap();
            self.1
                .lock()
                .unwrap()
                .push(format!("allocated {}", x.size()));
        }
        if !self.0.is_empty() {
            let cpu = strata_alloc::allocator(strata_alloc::Device::Cpu);
            self.1
                .lock()
                .unwrap()
                .push(format!("registry: {}", cpu.is_ok()));
        }
    }
}

thread_local! {
    static KEPT: std::cell::RefCell<Kept> = const { std::cell::RefCell::new(Kept(Vec::new())) };
    static ON_EXIT: std::cell::RefCell<Option<AllocatesOnExit>> = const { std::cell::RefCell::new(None) };
}

/// One case of [`a_thread_local_destructor_may_allocate_and_free`], in this
/// process: a thread keeps an allocation in a thread local and registers a
/// destructor that allocates; then it uses the allocator the way `case`
/// says (which creates the allocator's own thread locals after the
/// caller's, so that they are destroyed first) and exits.
fn thread_local_case(case: &str) {
    let (driver, a) = sim_device("", GIB);
    let seen = Arc::new(AtomicU64::new(0));
    let s = Arc::clone(&seen);
    if case == "tracker" {
        a.attach_trace_tracker(move |e| {
            if e.action == Action::FreeCompleted {
                s.fetch_add(1, Ordering::SeqCst);
            }
        });
    }
    if case == "oom" {
        a.on_oom(|_, _| {});
    }
    a.record_history(Some(1000));
    let pool = a.mem_pool(MemPoolOptions::default());
    // A route of another thread: the exiting thread looks its own up.
    let _route = (case == "pool").then(|| pool.activate().unwrap());
    let log = Arc::new(Mutex::new(Vec::new()));
    let (a2, log2, case2) = (Arc::clone(&a), Arc::clone(&log), case.to_string());
    std::thread::spawn(move || {
        KEPT.with(|k| k.borrow_mut().0.push(a2.allocate(4096, S0).unwrap()));
        ON_EXIT.with(|o| *o.borrow_mut() = Some(AllocatesOnExit(vec![Arc::clone(&a2)], log2)));
        match case2.as_str() {
            "metadata" => a2.set_memory_metadata("exiting"),
            "oom" => assert!(a2.allocate(1 << 40, S0).is_err()),
            "registry" => drop(strata_alloc::allocator(strata_alloc::Device::Cpu).unwrap()),
            _ => {}
        }
        drop(a2.allocate(4096, S0).unwrap());
    })
    .join()
    .unwrap();
    assert_eq!(
        *log.lock().unwrap(),
        ["oom: true", "allocated 1000", "registry: true"],
        "{case}"
    );
    assert_eq!(a.memory_allocated(), 0, "{case}: everything was freed");
    let frees = a
        .history()
        .iter()
        .filter(|e| e.action == Action::FreeCompleted)
        .count();
    assert_eq!(frees, 3, "{case}: the history has every free");
    if case == "tracker" {
        assert_eq!(seen.load(Ordering::SeqCst), 3, "the tracker saw every free");
    }
    recount(&a, case);
    a.empty_cache().unwrap();
    assert_eq!(driver.used_bytes(), 0, "{case}");
}

#[test]
#[ignore = "run in a child process by a_thread_local_destructor_may_allocate_and_free"]
fn child_thread_local_case() {
    if let Ok(case) = std::env::var("STRATA_S55_CASE") {
        thread_local_case(&case);
    }
}

/// An allocation kept in a thread local is freed, and another made and
/// freed, by destructors that run as the thread exits, after the
/// allocator's own thread locals were destroyed: with a trace tracker
/// attached, with the thread's memory metadata set, after an out-of-memory
/// error with an observer, with a private pool routed on another thread,
/// and with a registry look-up. Each used to abort the process; each case
/// runs in a process of its own.
#[cfg(unix)]
#[test]
fn a_thread_local_destructor_may_allocate_and_free() {
    for case in ["plain", "tracker", "metadata", "oom", "pool", "registry"] {
        let exe = std::env::current_exe().unwrap();
        let name = test_path("child_thread_local_case");
        let out = std::process::Command::new(exe)
            .args([name.as_str(), "--exact", "--ignored", "--test-threads=1"])
            .env("STRATA_S55_CASE", case)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains("1 passed"),
            "{case}: {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

// ----- configurations built in code -----------------------------------------

/// A reserve class listed twice in a configuration applied in code: a
/// `BadValue` naming the class, and nothing changed. The string form of a
/// list naming a class twice keeps the last reserve (in the place of the
/// first), as PyTorch's map does, and a parsed configuration applies.
#[test]
fn a_reserve_class_listed_twice_in_code_is_refused() {
    let (_d, a) = sim_device("expandable_segments:True", 16 * GIB);
    let x = a.allocate(3 * MIB, S0).unwrap();
    let before = (a.config(), a.memory_stats(), a.snapshot());
    let mut c = a.config();
    c.expandable_segments_reserve_by_class = vec![
        ("serving".into(), Reserve::Fraction(0.125)),
        ("batch".into(), Reserve::Gib(2.0)),
        ("serving".into(), Reserve::Fraction(0.5)),
    ];
    let e = a.apply_config(c.clone()).unwrap_err();
    match &e {
        AllocError::Config(ConfigError::BadValue { key, value, .. }) => {
            assert_eq!(*key, "expandable_segments_reserve_by_class");
            assert!(value.contains("serving"), "{value}");
        }
        e => panic!("{e:?}"),
    }
    assert!(e.to_string().contains("listed once"), "{e}");
    assert!(c.validate().is_err());
    assert_eq!((a.config(), a.memory_stats(), a.snapshot()), before);

    let parsed = AllocatorConfig::parse(
        "expandable_segments:True,expandable_segments_reserve_by_class:[serving:0.125,batch:2G,serving:0.5]",
    )
    .unwrap();
    assert_eq!(
        parsed.expandable_segments_reserve_by_class,
        [
            ("serving".to_string(), Reserve::Fraction(0.5)),
            ("batch".to_string(), Reserve::Gib(2.0))
        ]
    );
    a.apply_config(parsed.clone()).unwrap();
    assert_eq!(a.config(), parsed);
    // The string form parses back to what is in force.
    assert_eq!(
        AllocatorConfig::parse(&a.config().to_string()).unwrap(),
        parsed
    );
    drop(x);
    recount(&a, "after");
}

/// Reserve classes at their extremes: a class name of a megabyte or of
/// Unicode on a stream (any string tags it; a name no list names just
/// never matches), a code-side default of 1e300 (clamped to the default
/// reserve, the device and an eighth), and of the least positive double (one
/// page). Allocations on those streams are served, and everything goes
/// back.
#[test]
fn reserve_classes_at_their_extremes() {
    let (driver, a) = sim_device("expandable_segments:True", 16 * GIB);
    let long = "é".repeat(1 << 19);
    a.set_stream_reserve_class(StreamId(1), &long);
    assert_eq!(a.stream_reserve_class(StreamId(1)), long);
    a.set_stream_reserve_class(StreamId(2), "huge");
    a.set_stream_reserve_class(StreamId(3), "tiny");
    a.set_stream_reserve_class(StreamId(u64::MAX), "tiny");
    // A name with a space no settings string can hold (a megabyte of `é`
    // alone is a name, as PyTorch 2.15's tokenizer reads one: hostile_s59.rs).
    assert!(a
        .set_default_reserve_fraction_for_class(&format!("{long} x"), 0.5)
        .is_err());
    a.set_default_reserve_fraction_for_class("huge", 1e300)
        .unwrap();
    a.set_default_reserve_fraction_for_class("tiny", f64::from_bits(1))
        .unwrap();
    // The string form parses back.
    assert_eq!(
        AllocatorConfig::parse(&a.config().to_string()).unwrap(),
        a.config()
    );
    let mut live = Vec::new();
    for s in [1, 2, 3, u64::MAX] {
        live.push(a.allocate(MIB, StreamId(s)).unwrap());
        live.push(a.allocate(2 * MIB, StreamId(s)).unwrap());
    }
    // The tiny reserve holds one page: more than a page is refused naming it.
    let e = a.allocate(3 * MIB, StreamId(3)).unwrap_err();
    assert!(e.to_string().contains("tiny"), "{e}");
    live.push(a.allocate(3 * GIB, StreamId(2)).unwrap());
    recount(&a, "extremes");
    // An empty class removes the tag.
    a.set_stream_reserve_class(StreamId(1), "");
    assert_eq!(a.stream_reserve_class(StreamId(1)), "");
    drop(live);
    a.empty_cache().unwrap();
    assert_eq!(a.memory_reserved(), 0);
    assert_eq!(driver.used_bytes(), 0);
}

/// The reserve class of each of 100,000 distinct streams reads back as
/// tagged (a look-up: the read-back used to scan every stream, quadratic
/// over all of them; the time is not asserted, benchmarks measure speed).
#[test]
fn reserve_classes_of_many_streams_are_looked_up() {
    let (_d, a) = sim_device("expandable_segments:True", 16 * GIB);
    let n = 100_000u64;
    for s in 0..n {
        a.set_stream_reserve_class(StreamId(s * 7 + 1), if s % 2 == 0 { "a" } else { "b" });
    }
    for s in 0..n {
        let want = if s % 2 == 0 { "a" } else { "b" };
        assert_eq!(a.stream_reserve_class(StreamId(s * 7 + 1)), want);
        assert_eq!(a.stream_reserve_class(StreamId(s * 7 + 2)), "");
    }
}

// ----- the pinned allocator ---------------------------------------------------

/// One pinned buffer used on 200,000 distinct streams (and on the first
/// thousand again): one event per distinct stream at the free, and the
/// block reused once they complete. (The streams were kept in a list
/// searched at each record, quadratic; they are now also kept in a set past
/// a few. The time is not asserted: benchmarks measure speed.)
#[test]
fn a_pinned_buffer_used_on_many_streams_records_each_once() {
    let p = PinnedAllocator::new(SimPinnedBackend::new(None));
    let b = p.allocate(4096).unwrap();
    let ptr = b.ptr();
    let n = 200_000u64;
    for s in 0..n {
        b.record_stream(StreamId(s.wrapping_mul(0x9e37_79b9_7f4a_7c15)))
            .unwrap();
    }
    for s in 0..1000u64 {
        b.record_stream(StreamId(s.wrapping_mul(0x9e37_79b9_7f4a_7c15)))
            .unwrap();
        p.record_event(ptr + 4095, StreamId(s.wrapping_mul(0x9e37_79b9_7f4a_7c15)))
            .unwrap();
    }
    drop(b);
    assert_eq!(p.pending_events(), n as usize);
    p.check_consistency().unwrap();
    // Not reused while the events are pending.
    let other = p.allocate(4096).unwrap();
    assert_ne!(other.ptr(), ptr);
    drop(other);
    p.backend().complete_all();
    p.process_pending_events();
    assert_eq!(p.pending_events(), 0);
    let again = p.allocate(4096).unwrap();
    // The block is clean again: a free with no stream use caches it at once.
    drop(again);
    assert_eq!(p.pending_events(), 0);
    p.check_consistency().unwrap();
    p.empty_cache().unwrap();
    assert_eq!(p.backend().used_bytes(), 0);
}

// ----- snapshots while frees are pending --------------------------------------

/// Snapshots, the pickle, the history's JSON and the report taken while
/// frees wait for events (on streams never used otherwise, in a private
/// pool dropped with its blocks pending): each readable, and the snapshot's
/// sums equal the statistics. The pickle of an empty history and of one
/// bounded to a single entry decode too.
#[test]
fn snapshots_while_frees_are_pending() {
    use super::common::{decode, key, list};
    for conf in ["expandable_segments:False", "expandable_segments:True"] {
        let (driver, a) = sim_device(conf, 4 * GIB);
        a.record_history(Some(1));
        decode(&a.snapshot_pickle().unwrap());
        let pool = a.mem_pool(MemPoolOptions::default());
        let pooled = {
            let _g = pool.activate().unwrap();
            a.allocate_raw(5 * MIB, S0).unwrap()
        };
        let plain = a.allocate_raw(30 * MIB, S0).unwrap();
        let small = a.allocate_raw(1000, StreamId(9)).unwrap();
        for (r, s) in [(pooled, u64::MAX), (plain, 12345), (small, 0)] {
            a.record_stream(&r, StreamId(s)).unwrap();
        }
        a.record_history(Some(100_000));
        for r in [pooled, plain, small] {
            a.free_raw(r).unwrap();
        }
        drop(pool);
        recount(&a, conf);
        assert!(stat(&a, "active_bytes.all.current") > 0, "{conf}: pending");
        let snap = decode(&a.snapshot_pickle().unwrap());
        let segs = list(key(&snap, "segments"));
        assert_eq!(segs.len(), a.snapshot().len(), "{conf}");
        serde_json::from_str::<serde_json::Value>(&a.history_json("pending")).unwrap();
        assert!(a.memory_report_html().contains("<svg id=\"segments\""));
        // empty_cache waits for the events, then gives everything back.
        a.empty_cache().unwrap();
        recount(&a, conf);
        assert_eq!(a.memory_reserved(), 0, "{conf}");
        assert_eq!(driver.used_bytes(), 0, "{conf}");
        decode(&a.snapshot_pickle().unwrap());
    }
}

// ----- several threads --------------------------------------------------------

/// Four threads on one allocator, each with private pools of its own that
/// it routes to and drops (while another thread may still hold blocks from
/// them), handing allocations to the others to free; trace trackers
/// attached and cleared, reserve classes tagged, memory fractions and
/// settings changed (expandable segments on and off, split limits), the
/// history bound changed, snapshots, pickles and `cache_info` taken, all
/// at once. At each pause the statistics equal a recount; at the end
/// everything goes back to the device.
#[test]
fn threads_sharing_pools_trackers_and_reconfiguration_keep_the_books() {
    const THREADS: usize = 4;
    const ROUNDS: usize = 5;
    let (driver, a) = sim_device("expandable_segments:True", 4 * GIB);
    let shared: Arc<Mutex<Vec<RawAllocation>>> = Arc::new(Mutex::new(Vec::new()));
    let barrier = Arc::new(Barrier::new(THREADS + 1));
    let events = Arc::new(AtomicU64::new(0));
    let sizes = [
        0,
        1,
        512,
        MIB - 1,
        2 * MIB + 1,
        11 * MIB,
        25 * MIB,
        70 * MIB,
    ];
    std::thread::scope(|scope| {
        for t in 0..THREADS {
            let (a, driver, shared, barrier, events) = (&a, &driver, &shared, &barrier, &events);
            scope.spawn(move || {
                let mut rng = Lcg(55 + t as u64);
                let mine = StreamId(t as u64 + 1);
                let mut pools = Vec::new();
                for _ in 0..ROUNDS {
                    for _ in 0..300 {
                        match rng.below(16) {
                            0..=4 => {
                                let guard = match pools.last() {
                                    Some(p) if rng.below(2) == 0 => {
                                        Some(strata_alloc::MemPool::activate(p).unwrap())
                                    }
                                    _ => None,
                                };
                                let stream = StreamId(rng.pick(&[0, mine.0, 77, u64::MAX]));
                                match a.allocate_raw(rng.pick(&sizes), stream) {
                                    Ok(r) => shared.lock().unwrap().push(r),
                                    Err(e) => assert!(e.is_out_of_memory(), "{e}"),
                                }
                                drop(guard);
                            }
                            5..=7 => {
                                let r = {
                                    let mut v = shared.lock().unwrap();
                                    if v.is_empty() {
                                        continue;
                                    }
                                    let i = rng.below(v.len() as u64) as usize;
                                    v.swap_remove(i)
                                };
                                if rng.below(3) == 0 {
                                    a.record_stream(&r, StreamId(rng.below(6))).unwrap();
                                }
                                a.free_raw(r).unwrap();
                                assert!(a.free_raw(r).is_err() || r.size() == 0);
                            }
                            8 => pools.push(a.mem_pool(MemPoolOptions {
                                use_on_oom: rng.below(2) == 0,
                                no_split: rng.below(2) == 0,
                            })),
                            9 if !pools.is_empty() => {
                                pools.swap_remove(rng.below(pools.len() as u64) as usize);
                            }
                            10 => match rng.below(3) {
                                0 => {
                                    let ev = Arc::clone(events);
                                    a.attach_trace_tracker(move |_| {
                                        ev.fetch_add(1, Ordering::Relaxed);
                                    });
                                }
                                1 => a.clear_trace_trackers(),
                                _ => a.set_stream_reserve_class(
                                    mine,
                                    rng.pick(&["", "small", "nowhere"]),
                                ),
                            },
                            11 => match rng.below(6) {
                                0 => a
                                    .set_memory_fraction(rng.pick(&[0.0, 0.05, 0.5, 1.0]))
                                    .unwrap(),
                                1 => a
                                    .set_allocator_settings(rng.pick(&[
                                        "expandable_segments:False",
                                        "expandable_segments:True,expandable_segments_reserve_by_class:[small:0.01]",
                                        "max_split_size_mb:30,expandable_segments:False",
                                        "roundup_power2_divisions:4,garbage_collection_threshold:0.5",
                                    ]))
                                    .unwrap(),
                                2 => assert!(a.set_memory_fraction(f64::NAN).is_err()),
                                3 => a.record_history(rng.pick(&[None, Some(0), Some(3), Some(10_000)])),
                                4 => {
                                    let _ = a.empty_cache();
                                }
                                _ => driver.complete_all_events(),
                            },
                            12 => {
                                let _ = a.snapshot_pickle();
                            }
                            13 => {
                                let _ = a.cache_info(rng.pick(&[0, 1, u64::MAX]));
                                let _ = a.largest_free_block();
                            }
                            _ => {
                                let _ = a.memory_stats();
                                let _ = a.snapshot();
                            }
                        }
                    }
                    drop(pools.drain(..rng.below(pools.len() as u64 + 1) as usize));
                    barrier.wait(); // the main thread recounts
                    barrier.wait();
                }
            });
        }
        for round in 0..ROUNDS {
            barrier.wait();
            recount(&a, &format!("round {round}"));
            barrier.wait();
        }
    });
    for r in shared.lock().unwrap().drain(..) {
        a.free_raw(r).unwrap();
    }
    assert_eq!(stat(&a, "allocated_bytes.all.current"), 0);
    driver.complete_all_events();
    a.empty_cache().unwrap();
    recount(&a, "end");
    assert_eq!(a.memory_reserved(), 0);
    assert_eq!(driver.used_bytes(), 0);
}

// ----- configurations applied at random to a live allocator -------------------

mod random_configs {
    use super::*;
    use proptest::prelude::*;

    /// A configuration with each field drawn from in-range values and
    /// hostile ones (NaN, infinities, negatives, 0, `u64::MAX`, divisions
    /// that are not powers of two, reserve classes named twice or badly).
    fn config() -> impl Strategy<Value = AllocatorConfig> {
        let mib = |m: u64| m << 20;
        let fractions = prop::sample::select(vec![
            None,
            Some(0.0),
            Some(-0.0),
            Some(0.02),
            Some(0.5),
            Some(1.0),
            Some(1.000_001),
            Some(-1.0),
            Some(f64::NAN),
            Some(f64::INFINITY),
        ]);
        let thresholds = prop::sample::select(vec![
            None,
            Some(0.5),
            Some(0.0),
            Some(1.0),
            Some(f64::NAN),
            Some(f64::NEG_INFINITY),
            Some(1e-300),
        ]);
        let reserves = prop::sample::select(vec![
            None,
            Some(Reserve::Fraction(0.01)),
            Some(Reserve::Gib(0.5)),
            Some(Reserve::Fraction(1e300)),
            Some(Reserve::Fraction(f64::NAN)),
            Some(Reserve::Gib(f64::INFINITY)),
            Some(Reserve::Fraction(-1.0)),
        ]);
        let classes = prop::sample::select(vec![
            vec![],
            vec![("small".to_string(), Reserve::Fraction(0.01))],
            vec![
                ("small".to_string(), Reserve::Fraction(0.01)),
                ("big".to_string(), Reserve::Gib(1e6)),
            ],
            vec![
                ("small".to_string(), Reserve::Fraction(0.5)),
                ("small".to_string(), Reserve::Fraction(0.01)),
            ],
            vec![("a b".to_string(), Reserve::Fraction(0.5))],
            vec![(String::new(), Reserve::Fraction(0.5))],
        ]);
        let divisions = prop::sample::select(vec![
            [0u64; 16],
            [4; 16],
            [1 << 63; 16],
            [3; 16],
            [u64::MAX; 16],
        ]);
        (
            (
                prop::sample::select(vec![None, Some(true), Some(false)]),
                prop::sample::select(vec![
                    None,
                    Some(0),
                    Some(mib(20)),
                    Some(mib(20) + 1),
                    Some(mib(64)),
                    Some(u64::MAX),
                ]),
                divisions,
                thresholds,
                fractions,
            ),
            (
                prop::sample::select(vec![mib(10), mib(10) + 1, mib(20), mib(64), u64::MAX]),
                prop::sample::select(vec![0, mib(20), mib(64), u64::MAX]),
                any::<bool>(),
                reserves,
                classes,
            ),
        )
            .prop_map(
                |((expandable, split, div, gc, fraction), (large, non_split, throw, r, cl))| {
                    AllocatorConfig {
                        expandable_segments: expandable,
                        max_split_size: split,
                        roundup_power2_divisions: div,
                        garbage_collection_threshold: gc,
                        per_process_memory_fraction: fraction,
                        large_segment_size: large,
                        max_non_split_rounding: non_split,
                        throw_on_cudamalloc_oom: throw,
                        expandable_segments_reserve: r,
                        expandable_segments_reserve_by_class: cl,
                        ..AllocatorConfig::default()
                    }
                },
            )
    }

    #[derive(Clone, Debug)]
    enum Op {
        Apply(Box<AllocatorConfig>),
        Alloc(u64, u64),
        Free(usize),
        RecordStream(usize, u64),
        Tag(u64, &'static str),
        ClassDefault(&'static str, f64),
        EmptyCache,
        Complete,
        CacheInfo(u64),
    }

    fn op() -> impl Strategy<Value = Op> {
        let streams = prop::sample::select(vec![0u64, 1, 2, u64::MAX]);
        prop_oneof![
            2 => config().prop_map(|c| Op::Apply(Box::new(c))),
            4 => (
                prop::sample::select(vec![0, 1, 512, MIB + 1, 3 * MIB, 15 * MIB, 25 * MIB, 300 * MIB, u64::MAX]),
                streams.clone()
            )
                .prop_map(|(s, t)| Op::Alloc(s, t)),
            3 => any::<usize>().prop_map(Op::Free),
            1 => (any::<usize>(), streams.clone()).prop_map(|(i, s)| Op::RecordStream(i, s)),
            1 => (streams, prop::sample::select(vec!["", "small", "big", "é"]))
                .prop_map(|(s, c)| Op::Tag(s, c)),
            1 => (
                prop::sample::select(vec!["small", "big", "bad class", ""]),
                prop::sample::select(vec![0.02, 1e300, 0.0, f64::NAN, -1.0])
            )
                .prop_map(|(c, f)| Op::ClassDefault(c, f)),
            1 => Just(Op::EmptyCache),
            1 => Just(Op::Complete),
            1 => prop::sample::select(vec![0, 1, u64::MAX]).prop_map(Op::CacheInfo),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(super::super::common::cases(96)))]

        /// Random configurations applied in code between allocations, frees,
        /// stream uses, reserve-class tags and defaults on a 1 GiB device: a
        /// configuration is installed whole exactly when it validates (else
        /// a typed error that changes nothing), refused class defaults
        /// change nothing, allocations are blocks or typed errors, the
        /// statistics equal a recount after every step, and at the end
        /// everything goes back to the device.
        #[test]
        fn configurations_applied_in_code_keep_the_books(ops in prop::collection::vec(op(), 1..60)) {
            let (driver, a) = sim_device("", GIB);
            let mut live: Vec<RawAllocation> = Vec::new();
            for (step, op) in ops.iter().enumerate() {
                let what = format!("step {step}: {op:?}");
                match op {
                    Op::Apply(c) => {
                        let before = (a.config(), a.memory_stats(), a.snapshot(), a.memory_fraction());
                        match a.apply_config((**c).clone()) {
                            Ok(()) => {
                                prop_assert!(c.validate().is_ok(), "{}", what);
                                prop_assert_eq!(&a.config(), &**c, "{}", what);
                            }
                            Err(e) => {
                                prop_assert!(matches!(e, AllocError::Config(ConfigError::BadValue { .. })), "{}: {:?}", what, e);
                                prop_assert!(c.validate().is_err(), "{}", what);
                                let after = (a.config(), a.memory_stats(), a.snapshot(), a.memory_fraction());
                                prop_assert!(after == before, "{}: a refusal changed the allocator", what);
                            }
                        }
                    }
                    Op::Alloc(size, s) => match a.allocate_raw(*size, StreamId(*s)) {
                        Ok(r) => live.push(r),
                        Err(e) => prop_assert!(
                            e.is_out_of_memory() || e.to_string().contains("throw_on_cudamalloc_oom"),
                            "{}: {}", what, e
                        ),
                    },
                    Op::Free(i) if !live.is_empty() => {
                        let r = live.swap_remove(i % live.len());
                        a.free_raw(r).unwrap();
                    }
                    Op::RecordStream(i, s) if !live.is_empty() => {
                        a.record_stream(&live[i % live.len()], StreamId(*s)).unwrap();
                    }
                    Op::Tag(s, c) => a.set_stream_reserve_class(StreamId(*s), c),
                    Op::ClassDefault(c, f) => {
                        let before = a.config();
                        if a.set_default_reserve_fraction_for_class(c, *f).is_err() {
                            prop_assert_eq!(a.config(), before, "{}", what);
                        } else {
                            prop_assert!(a.config().validate().is_ok(), "{}", what);
                        }
                    }
                    Op::EmptyCache => a.empty_cache().unwrap(),
                    Op::Complete => driver.complete_all_events(),
                    Op::CacheInfo(g) => {
                        let got = a.cache_info(*g).unwrap();
                        prop_assert!(got >= a.largest_free_block(), "{}", what);
                    }
                    _ => {}
                }
                recount(&a, &what);
            }
            for r in live {
                a.free_raw(r).unwrap();
            }
            driver.complete_all_events();
            a.empty_cache().unwrap();
            recount(&a, "end");
            prop_assert_eq!(a.memory_reserved(), 0);
            prop_assert_eq!(driver.used_bytes(), 0);
        }
    }
}
