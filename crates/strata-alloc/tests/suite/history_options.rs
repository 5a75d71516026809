//! PyTorch's options of `_record_memory_history` (`enabled`, `context`,
//! `stacks`, `skip_actions`) and `_allocation_traceback`, as strata's
//! [`HistoryOptions`] and [`CachingAllocator::allocation_origin`]: each test
//! mirrors one test of PyTorch's `test/test_cuda.py`, named in its doc
//! comment, on the simulated device. Where strata differs on purpose (a
//! free's entries carry the allocation's call site, docs/diagnosing-memory.md,
//! "Recording what the allocator did"), the test says so.

use std::sync::Arc;
use strata_alloc::driver::sim::SimDriver;
use strata_alloc::history::{Action, TraceEntry};
use strata_alloc::{
    Allocation, AllocatorConfig, CachingAllocator, HistoryContext, HistoryLevel, HistoryOptions,
    StreamId,
};

const S0: StreamId = StreamId::DEFAULT;

fn sim(conf: &str) -> Arc<CachingAllocator> {
    let d = Arc::new(SimDriver::new(1 << 34, 2 << 20));
    CachingAllocator::new(d, AllocatorConfig::parse(conf).unwrap())
}

/// The allocation `test_memory_plots_free_stack` makes in `thealloc`.
#[inline(never)]
fn thealloc(a: &Arc<CachingAllocator>) -> Allocation {
    a.allocate(3 * 4 * 4, S0).unwrap()
}

fn entries(h: &[TraceEntry], action: Action) -> Vec<TraceEntry> {
    h.iter().filter(|e| e.action == action).cloned().collect()
}

/// Mirrors `TestCudaAllocator.test_memory_snapshot_skip_actions`: for each
/// list of actions to skip, a 64 KiB allocation made and freed (after
/// `empty_cache`, so that its segment is made and released too) leaves a
/// trace that is not empty, holds none of the skipped actions, and, when
/// something was skipped, still holds another action.
#[test]
fn memory_snapshot_skip_actions() {
    let lists: [&[&str]; 6] = [
        &["free_requested"],
        &["free_requested", "free_completed"],
        &["alloc"],
        &["segment_alloc", "segment_free"],
        &["segment_map", "segment_unmap"],
        &[],
    ];
    for conf in ["expandable_segments:False", "expandable_segments:True"] {
        for names in lists {
            let a = sim(conf);
            let skip: Vec<Action> = names
                .iter()
                .map(|n| Action::from_name(n).unwrap())
                .collect();
            a.record_history_opts(&HistoryOptions::new(100_000).skip(&skip));
            a.empty_cache().unwrap();
            drop(a.allocate(128 * 128 * 4, S0).unwrap());
            a.empty_cache().unwrap();
            let h = a.history();
            assert!(!h.is_empty(), "{conf} {names:?}");
            for e in &h {
                assert!(!skip.contains(&e.action), "{conf} {names:?}: {e:?}");
            }
            if !skip.is_empty() {
                assert!(h.iter().any(|e| !skip.contains(&e.action)));
            } else {
                // Nothing skipped: the alloc and both halves of its free.
                for act in [Action::Alloc, Action::FreeRequested, Action::FreeCompleted] {
                    assert_eq!(entries(&h, act).len(), 1, "{conf} {act:?}");
                }
            }
        }
    }
    // `user_defined` is a PyTorch action strata has no counterpart for.
    assert_eq!(Action::from_name("user_defined"), None);
    assert_eq!(Action::from_name("segment_map"), Some(Action::SegmentMap));
}

/// A free whose halves are skipped separately: skipping only
/// `free_requested` keeps `free_completed` for a free that completes at once
/// (one slot in strata's ring for the two), and the reverse.
#[test]
fn skipping_one_half_of_a_free_keeps_the_other() {
    for (skip, kept) in [
        (Action::FreeRequested, Action::FreeCompleted),
        (Action::FreeCompleted, Action::FreeRequested),
    ] {
        let a = sim("");
        a.record_history_opts(&HistoryOptions::new(100).skip(&[skip]));
        let x = a.allocate(4096, S0).unwrap();
        let p = x.ptr();
        drop(x);
        let h = a.history();
        assert!(entries(&h, skip).is_empty());
        let k = entries(&h, kept);
        assert_eq!(k.len(), 1);
        assert_eq!((k[0].addr, k[0].size), (p, 4096));
    }
}

/// Mirrors `TestCudaAllocator.test_memory_plots_free_stack`: `rand(3, 4)`
/// allocated in `thealloc` and freed, recorded with each context. With
/// "state" no trace entry names `thealloc` (the tensor is gone, and only
/// live allocations keep call sites); with "alloc" the `alloc` entry does
/// but the frees carry nothing; with "all" the frees carry a call site too —
/// in PyTorch the free's own stack (`thefree`), in strata the allocation's
/// (a free is a `Drop`, whose caller is not tracked).
#[test]
fn memory_plots_free_stack() {
    for (context, alloc_site, free_site) in [
        (HistoryContext::State, false, false),
        (HistoryContext::Alloc, true, false),
        (HistoryContext::All, true, true),
    ] {
        let a = sim("");
        a.record_history_opts(&HistoryOptions::new(1000).context(context));
        let line = line!() + 1;
        let x = thealloc(&a);
        drop(x);
        let h = a.history();
        let alloc = entries(&h, Action::Alloc);
        assert_eq!(alloc.len(), 1);
        let site = alloc[0].site;
        assert_eq!(site.is_some(), alloc_site, "{context:?}");
        if let Some(s) = site {
            // `thealloc` is the first caller outside strata's tracked chain.
            assert_eq!(s.file, file!());
            assert!(s.line < line, "the site is inside thealloc: {s}");
        }
        for act in [Action::FreeRequested, Action::FreeCompleted] {
            let f = entries(&h, act);
            assert_eq!(f.len(), 1);
            assert_eq!(f[0].site.is_some(), free_site, "{context:?} {act:?}");
            assert_eq!(f[0].site, if free_site { site } else { None });
        }
    }
}

/// Mirrors `TestCudaAllocator.test_memory_plots_history_context`: recording
/// with context "all", an allocation in `should_capture1`; the context
/// turned off (`context=None`) while recording goes on, an allocation in
/// `should_not_capture` that also frees the first one; "all" again, an
/// allocation in `should_capture2`. Turning the context back on keeps the
/// history; the first and third allocations keep their call sites, the
/// second has none, in the trace and for `allocation_origin` alike.
#[test]
fn memory_plots_history_context() {
    let a = sim("");
    let all = HistoryOptions::new(1000);
    a.record_history_opts(&all);
    let x1 = a.allocate(4 * 4 * 4, S0).unwrap(); // should_capture1
    let p1 = x1.ptr();
    a.record_history_opts(&all.clone().context(HistoryContext::None));
    let x2 = a.allocate(3 * 4 * 4, S0).unwrap(); // should_not_capture
    drop(x1);
    a.record_history_opts(&all);
    let x3 = a.allocate(4 * 4 * 4, S0).unwrap(); // should_capture2
    let h = a.history();
    let alloc = entries(&h, Action::Alloc);
    assert_eq!(alloc.len(), 3, "the history is kept across the changes");
    assert_eq!(
        alloc.iter().map(|e| e.site.is_some()).collect::<Vec<_>>(),
        [true, false, true]
    );
    assert_eq!(alloc[0].addr, p1);
    assert!(a.allocation_origin(x2.ptr()).is_none());
    assert!(a.allocation_origin(x3.ptr()).is_some());
    // x1's free was recorded while the context was off: its entries carry
    // nothing, although its allocation had a call site.
    assert!(entries(&h, Action::FreeCompleted)
        .iter()
        .all(|e| e.addr != p1 || e.site.is_none()));
}

/// Mirrors `TestCudaAllocator.test_allocation_traceback`: recording with
/// stacks, an allocation made in `this_is_a_funky_allocator` has an origin
/// (its call site there, and a backtrace); once freed and the cache emptied,
/// the address has none.
#[test]
fn allocation_traceback() {
    #[inline(never)]
    fn this_is_a_funky_allocator(a: &Arc<CachingAllocator>) -> Allocation {
        a.allocate(311 * 411 * 4, S0).unwrap()
    }
    for conf in ["expandable_segments:False", "expandable_segments:True"] {
        let a = sim(conf);
        a.empty_cache().unwrap();
        a.record_history_opts(&HistoryOptions::new(1000).level(HistoryLevel::Backtraces));
        let line = line!() + 1;
        let x = this_is_a_funky_allocator(&a);
        let o = a.allocation_origin(x.ptr()).expect("recorded");
        let site = o.site.unwrap();
        assert_eq!(site.file, file!());
        assert!(site.line < line, "inside the function: {site}");
        assert_eq!(o.size, 311 * 411 * 4);
        assert!(
            !o.frames.is_empty(),
            "a backtrace at HistoryLevel::Backtraces"
        );
        // Not the start of an allocation: none.
        assert!(a.allocation_origin(x.ptr() + 512).is_none());
        let p = x.ptr();
        drop(x);
        a.empty_cache().unwrap();
        assert!(a.allocation_origin(p).is_none(), "{conf}");
        a.record_history(None);
    }
}

/// Mirrors `TestCudaAllocator.test_allocation_traceback_no_recording`: an
/// allocation made while history is off has no origin, and neither has one
/// made with recording on but no call sites kept (`context=None`).
#[test]
fn allocation_traceback_no_recording() {
    let a = sim("");
    let x = a.allocate(64 * 4, S0).unwrap();
    assert!(a.allocation_origin(x.ptr()).is_none());
    a.record_history(Some(10));
    assert!(
        a.allocation_origin(x.ptr()).is_none(),
        "made before recording"
    );
    a.record_history_opts(&HistoryOptions::new(10).context(HistoryContext::None));
    let y = a.allocate(64 * 4, S0).unwrap();
    assert!(a.allocation_origin(y.ptr()).is_none());
    // y's allocation is traced (it fits x's segment), without a call site.
    let h = a.history();
    let alloc = entries(&h, Action::Alloc);
    assert_eq!(alloc.len(), 1);
    assert_eq!((alloc[0].addr, alloc[0].site), (y.ptr(), None));
}

/// `enabled="state"`: the live allocations keep their call sites (for
/// snapshots and `allocation_origin`), and the trace only the latest event
/// (PyTorch's `_record_memory_history` sets `max_entries` to 1 unless
/// `enabled="all"`; `test_memory_snapshot` reads that entry).
#[test]
fn state_only_recording_keeps_only_the_latest_event() {
    for conf in ["expandable_segments:False", "expandable_segments:True"] {
        let a = sim(conf);
        a.record_history_opts(&HistoryOptions::new(1000).state_only());
        let x = a.allocate(1 << 20, S0).unwrap();
        drop(a.allocate(4096, S0).unwrap());
        a.snapshot();
        // Nothing to release: x shares its segment (its page) with the
        // freed block. The snapshot's event is the latest.
        a.empty_cache().unwrap();
        let h = a.history();
        assert_eq!(h.len(), 1, "{conf}");
        assert_eq!(
            (h[0].action, h[0].size),
            (Action::Snapshot, 1 << 20),
            "{conf}"
        );
        assert!(a.history_enabled());
        let o = a.allocation_origin(x.ptr()).unwrap();
        assert_eq!(o.site.unwrap().file, file!());
        // The snapshot's active block names the allocation's call site too.
        let frames: Vec<_> = a
            .snapshot()
            .iter()
            .flat_map(|s| s.blocks.iter())
            .filter_map(|b| b.site)
            .collect();
        assert_eq!(frames.len(), 1);
        assert_eq!(frames[0].file, file!());
    }
}

/// `max_entries` 0 while recording keeps recording with a one-entry trace
/// (PyTorch's `RingBuffer::setMaxEntries` keeps `std::max(1, size)`): the
/// newest entry stays, the live allocations keep their call sites (the
/// options change, nothing is forgotten), and only `record_history(None)`
/// stops and forgets.
#[test]
fn zero_entries_keep_one_entry() {
    let a = sim("");
    a.record_history_opts(&HistoryOptions::new(100));
    let x = a.allocate(4096, S0).unwrap();
    let before = a.history();
    assert!(before.len() > 1);
    a.record_history_opts(&HistoryOptions::new(0));
    assert!(a.history_enabled());
    assert_eq!(a.history(), before[before.len() - 1..]);
    assert!(a.allocation_origin(x.ptr()).is_some());
    a.record_history(None);
    assert!(!a.history_enabled());
    assert!(a.history().is_empty());
    assert!(a.allocation_origin(x.ptr()).is_none());
}

/// Mirrors `TestCudaAllocator.test_memory_plots_metadata`: with metadata set
/// before recording starts (for each context), every event of the
/// allocation, its free and the release of its segment carries it, in the
/// history and in the pickled snapshot's `device_traces`; clearing it with
/// an empty string leaves later events without any.
#[test]
fn memory_plots_metadata() {
    for context in [
        HistoryContext::State,
        HistoryContext::Alloc,
        HistoryContext::All,
    ] {
        let a = sim("expandable_segments:False");
        a.set_memory_metadata("metadata test");
        assert_eq!(a.memory_metadata(), "metadata test");
        a.record_history_opts(&HistoryOptions::new(1000).context(context));
        drop(a.allocate(3 * 4 * 4, S0).unwrap());
        a.empty_cache().unwrap();
        let h = a.history();
        assert!(
            h.len() >= 4,
            "segment_alloc, alloc, free x2, segment_free: {h:?}"
        );
        for e in &h {
            assert_eq!(e.user_metadata.as_deref(), Some("metadata test"), "{e:?}");
        }
        let pickle = a.snapshot_pickle().unwrap();
        let text = String::from_utf8_lossy(&pickle);
        assert_eq!(
            text.matches("metadata test").count(),
            h.len(),
            "one user_metadata per event in device_traces"
        );
        a.set_memory_metadata("");
        assert_eq!(a.memory_metadata(), "");
        drop(a.allocate(4096, S0).unwrap());
        // Taking the snapshot was itself an event, with the metadata.
        let h2 = a.history();
        assert_eq!(h2[h.len()].action, Action::Snapshot);
        assert!(h2[..=h.len()].iter().all(|e| e.user_metadata.is_some()));
        assert!(h2[h.len() + 1..].iter().all(|e| e.user_metadata.is_none()));
        assert_eq!(
            h2.len(),
            h.len() + 5,
            "snapshot, segment_alloc, alloc, free x2"
        );
    }
}

/// Metadata changed many times while the ring wraps: each kept event
/// carries the metadata in force when it was recorded.
#[test]
fn metadata_follows_the_ring_as_it_wraps() {
    let a = sim("");
    a.record_history_opts(&HistoryOptions::new(16).skip(&[Action::FreeRequested]));
    for step in 0..100 {
        a.set_memory_metadata(&format!("step {step}"));
        // One alloc and one free_completed per step (segments come once).
        drop(a.allocate(4096, S0).unwrap());
    }
    let h = a.history();
    assert_eq!(h.len(), 16);
    for (i, e) in h.iter().enumerate() {
        let step = 100 - 8 + i / 2;
        assert_eq!(
            e.user_metadata.as_deref(),
            Some(format!("step {step}").as_str())
        );
    }
}

/// Mirrors `TestCudaAllocator.test_memory_plots_free_segment_stack`: a
/// tensor allocated, freed and its segment released by `empty_cache`,
/// recorded with each context. The segment's release carries the call site
/// of `empty_cache` only with context "all" (PyTorch: the JSON holds
/// "empty_cache" only then); the segment's allocation carries the call site
/// of the allocation that made it from "alloc" on. Both segment modes: the
/// expandable one maps and unmaps pages instead.
#[test]
fn memory_plots_free_segment_stack() {
    for conf in ["expandable_segments:False", "expandable_segments:True"] {
        let (made, released) = if conf.ends_with("False") {
            (Action::SegmentAlloc, Action::SegmentFree)
        } else {
            (Action::SegmentMap, Action::SegmentUnmap)
        };
        for (context, alloc_site, free_site) in [
            (HistoryContext::State, false, false),
            (HistoryContext::Alloc, true, false),
            (HistoryContext::All, true, true),
        ] {
            let a = sim(conf);
            a.record_history_opts(&HistoryOptions::new(1000).context(context));
            let alloc_line = line!() + 1;
            drop(a.allocate(3 * 4 * 4, S0).unwrap());
            let release_line = line!() + 1;
            a.empty_cache().unwrap();
            let h = a.history();
            let m = entries(&h, made);
            let r = entries(&h, released);
            assert_eq!((m.len(), r.len()), (1, 1), "{conf} {context:?}: {h:?}");
            let line = |e: &TraceEntry| e.site.map(|s| (s.file, s.line));
            assert_eq!(
                line(&m[0]),
                alloc_site.then_some((file!(), alloc_line)),
                "{conf} {context:?}"
            );
            assert_eq!(
                line(&r[0]),
                free_site.then_some((file!(), release_line)),
                "{conf} {context:?}"
            );
        }
    }
}
