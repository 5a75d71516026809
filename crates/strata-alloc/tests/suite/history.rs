//! Memory history: what the allocator records, and that a recording replays to
//! the same figures.

use std::collections::HashMap;
use std::sync::Arc;
use strata_alloc::driver::sim::SimDriver;
use strata_alloc::history::{Action, HistoryLevel};
use strata_alloc::{AllocatorConfig, CachingAllocator, RawAllocation, StreamId};

fn allocator(conf: &str) -> Arc<CachingAllocator> {
    CachingAllocator::new(
        Arc::new(SimDriver::new(1 << 34, 2 << 20)),
        AllocatorConfig::parse(conf).unwrap(),
    )
}

/// A deterministic workload with varying sizes and two streams.
fn workload(a: &CachingAllocator) {
    let mut live: Vec<RawAllocation> = Vec::new();
    for i in 0..600u64 {
        let size = 1 + (i * 2_654_435_761) % (48 << 20) / (1 + i % 7);
        let stream = StreamId(if i % 5 == 0 { 77 } else { 0 });
        live.push(a.allocate_raw(size, stream).unwrap());
        if live.len() > 24 {
            let r = live.swap_remove((i as usize * 13) % live.len());
            a.free_raw(r).unwrap();
        }
    }
    for r in live {
        a.free_raw(r).unwrap();
    }
}

#[test]
fn recording_covers_every_kind_of_event() {
    for conf in ["expandable_segments:True", "expandable_segments:False"] {
        let a = allocator(conf);
        a.record_history(Some(100_000));
        workload(&a);
        a.empty_cache().unwrap();
        let h = a.history();
        let count = |act| h.iter().filter(|e| e.action == act).count();
        assert_eq!(count(Action::Alloc), 600, "{conf}");
        assert_eq!(count(Action::FreeRequested), 600, "{conf}");
        assert_eq!(count(Action::FreeCompleted), 600, "{conf}");
        if conf.ends_with("True") {
            assert!(count(Action::SegmentMap) > 0);
            assert!(count(Action::SegmentUnmap) > 0, "empty_cache unmaps");
        } else {
            assert!(count(Action::SegmentAlloc) > 0);
            assert_eq!(count(Action::SegmentAlloc), count(Action::SegmentFree));
        }
    }
}

#[test]
fn the_ring_buffer_keeps_the_newest_entries() {
    let a = allocator("");
    a.record_history(Some(10));
    workload(&a);
    let h = a.history();
    assert_eq!(h.len(), 10);
    assert_eq!(h.last().unwrap().action, Action::FreeCompleted);
    a.record_history(None);
    let r = a.allocate_raw(512, StreamId::DEFAULT).unwrap();
    a.free_raw(r).unwrap();
    assert!(a.history().is_empty());
}

/// A workload of immediate frees (their `free_requested` and
/// `free_completed` share one slot of the ring), frees that wait for another
/// stream (the two entries apart), and segment events; `d` completes the
/// other stream's events.
fn mixed_workload(d: &SimDriver, a: &CachingAllocator) {
    for i in 0..40u64 {
        let r = a
            .allocate_raw(512 * (1 + i % 5), StreamId::DEFAULT)
            .unwrap();
        if i % 3 == 0 {
            a.record_stream(&r, StreamId(9)).unwrap();
        }
        a.free_raw(r).unwrap();
        if i % 7 == 0 {
            d.complete_stream(StreamId(9));
            let big = a.allocate_raw(30 << 20, StreamId::DEFAULT).unwrap();
            a.free_raw(big).unwrap();
            a.empty_cache().unwrap();
        }
    }
    d.complete_stream(StreamId(9));
    a.empty_cache().unwrap();
}

/// Every ring size keeps exactly the newest entries of the same recording
/// made with room for all of it, including where the oldest entry kept is the
/// second half of a free recorded in one slot.
#[test]
fn every_ring_size_keeps_exactly_the_newest_entries() {
    let run = |capacity: usize| {
        let d = Arc::new(SimDriver::new(1 << 34, 2 << 20));
        let conf = AllocatorConfig::parse("expandable_segments:False").unwrap();
        let a = CachingAllocator::new(d.clone(), conf);
        a.record_history(Some(capacity));
        mixed_workload(&d, &a);
        a.history()
            .into_iter()
            .map(|e| (e.action, e.addr, e.size, e.stream, e.site))
            .collect::<Vec<_>>()
    };
    let all = run(100_000);
    let kinds = |v: &[(Action, u64, u64, StreamId, _)]| {
        let mut k: Vec<&str> = v.iter().map(|e| e.0.name()).collect();
        k.sort();
        k.dedup();
        k
    };
    assert_eq!(
        kinds(&all),
        [
            "alloc",
            "free_completed",
            "free_requested",
            "segment_alloc",
            "segment_free"
        ]
    );
    // Each free requested once and completed once, in that order.
    let mut open: HashMap<u64, usize> = HashMap::new();
    for e in &all {
        match e.0 {
            Action::FreeRequested => *open.entry(e.1).or_default() += 1,
            Action::FreeCompleted => {
                let n = open.get_mut(&e.1).expect("completed before requested");
                assert_eq!(*n, 1);
                *n = 0;
            }
            _ => {}
        }
    }
    assert!(open.values().all(|&n| n == 0));
    for capacity in 1..=40 {
        let kept = run(capacity);
        assert_eq!(kept.len(), capacity.min(all.len()), "capacity {capacity}");
        assert_eq!(
            kept[..],
            all[all.len() - kept.len()..],
            "capacity {capacity}"
        );
    }
}

/// Clearing the history (PyTorch's `clear_history=True`) clears the trace
/// buffer only: an allocation made before keeps its call site, as PyTorch's
/// block keeps `context_when_allocated` (in a snapshot, the reports by site
/// and the entries of its free, which carry the allocation's context when
/// the free's own is not recorded); those made after have theirs, also
/// while their free waits for another stream.
#[test]
fn clearing_history_keeps_the_call_sites_of_live_allocations() {
    let d = Arc::new(SimDriver::new(1 << 34, 2 << 20));
    let a = CachingAllocator::new(d.clone(), AllocatorConfig::parse("").unwrap());
    a.record_history(Some(1000));
    let line_before = line!() + 1;
    let before = a.allocate_raw(4096, StreamId::DEFAULT).unwrap();
    a.clear_history();
    assert!(a.history().is_empty() && a.history_enabled());
    let line = line!() + 1;
    let after = a.allocate_raw(8192, StreamId::DEFAULT).unwrap();
    let sites = a.live_by_site(10).unwrap();
    let lines: Vec<_> = sites
        .iter()
        .map(|s| (s.site.unwrap().line, s.count, s.bytes))
        .collect();
    assert_eq!(lines, vec![(line, 1, 8192), (line_before, 1, 4096)]);
    let snapshot_site = |ptr: u64| {
        a.snapshot()
            .iter()
            .flat_map(|s| s.blocks.clone())
            .find(|b| b.address == ptr)
            .and_then(|b| b.site)
            .map(|s| s.line)
    };
    assert_eq!(snapshot_site(before.ptr()), Some(line_before));
    assert_eq!(
        a.allocation_origin(before.ptr())
            .and_then(|o| o.site)
            .map(|s| s.line),
        Some(line_before)
    );
    // Waiting for stream 9: still live, still at its line.
    a.record_stream(&after, StreamId(9)).unwrap();
    let after_ptr = after.ptr();
    a.free_raw(after).unwrap();
    assert_eq!(a.live_by_site(10).unwrap(), sites);
    let before_ptr = before.ptr();
    a.free_raw(before).unwrap();
    d.complete_stream(StreamId(9));
    let r = a.allocate_raw(512, StreamId::DEFAULT).unwrap(); // processes the event
    a.free_raw(r).unwrap();
    assert!(a.live_by_site(10).unwrap().is_empty());
    let h = a.history();
    let site_of = |action: Action, ptr: u64| {
        h.iter()
            .find(|e| e.action == action && e.addr == ptr)
            .map(|e| e.site.map(|s| s.line))
    };
    assert_eq!(site_of(Action::FreeRequested, after_ptr), Some(Some(line)));
    assert_eq!(site_of(Action::FreeCompleted, after_ptr), Some(Some(line)));
    assert_eq!(
        site_of(Action::FreeCompleted, before_ptr),
        Some(Some(line_before))
    );
    // Stopping forgets them: a new recording starts with no live record.
    let kept = a.allocate_raw(4096, StreamId::DEFAULT).unwrap();
    a.record_history(None);
    a.record_history(Some(1000));
    assert!(a.live_by_site(10).unwrap().is_empty());
    a.free_raw(kept).unwrap();
}

/// PyTorch's `_record_memory_history` called while recording keeps the
/// record (unless `clear_history`): the entries (the newest of them when the
/// bound shrinks), the live allocations' call sites, the backtraces while
/// the level stays; stopping (`None`) forgets everything.
#[test]
fn restarting_history_while_recording_keeps_the_record() {
    let a = allocator("");
    a.record_history_with(Some(1000), HistoryLevel::Backtraces);
    let sizes = [512u64, 1024, 2048, 4096, 8192];
    let line = line!() + 1;
    let grab = |n: u64| a.allocate_raw(n, StreamId::DEFAULT).unwrap();
    let live: Vec<_> = sizes.iter().map(|&n| grab(n)).collect();
    let h = a.history();
    assert_eq!(h.iter().filter(|e| e.action == Action::Alloc).count(), 5);
    let n = h.len();

    // Same level, same bound: nothing lost, and recording goes on.
    a.record_history_with(Some(1000), HistoryLevel::Backtraces);
    assert_eq!(a.history(), h);
    let sites = a.live_by_site(10).unwrap();
    assert_eq!(sites.len(), 1, "{sites:?}");
    assert_eq!(
        (sites[0].count, sites[0].bytes),
        (5, sizes.iter().sum::<u64>())
    );
    assert_eq!(sites[0].site.unwrap().line, line);

    // A smaller bound keeps the newest entries, in order.
    a.record_history_with(Some(3), HistoryLevel::Backtraces);
    assert!(n > 3);
    assert_eq!(a.history()[..], h[n - 3..]);
    // A larger one keeps them and has room for more.
    a.record_history(Some(100));
    assert_eq!(a.history()[..], h[n - 3..]);
    let extra = a.allocate_raw(300, StreamId::DEFAULT).unwrap();
    let h2 = a.history();
    assert_eq!(h2.len(), 4);
    assert_eq!(h2[..3], h[n - 3..]);
    assert_eq!((h2[3].action, h2[3].size), (Action::Alloc, 300));
    // The live allocations are still the recorded ones.
    assert_eq!(
        a.live_by_site(10)
            .unwrap()
            .iter()
            .map(|s| s.count)
            .sum::<u64>(),
        6
    );

    // Stopping forgets; starting again begins empty, with the earlier
    // allocations unrecorded.
    a.record_history(None);
    assert!(!a.history_enabled() && a.history().is_empty());
    a.record_history(Some(100));
    assert!(a.history().is_empty());
    assert!(a.live_by_site(10).unwrap().is_empty());
    for r in live.into_iter().chain([extra]) {
        a.free_raw(r).unwrap();
    }
}

#[test]
fn a_recording_replays_to_the_same_figures() {
    for conf in ["expandable_segments:True", "expandable_segments:False"] {
        let a = allocator(conf);
        a.record_history(Some(1 << 20));
        workload(&a);
        let doc: serde_json::Value = serde_json::from_str(&a.history_json("workload")).unwrap();
        assert_eq!(doc["workload"], "workload");
        let recorded_peak = doc["stats"]["reserved_bytes.all.peak"].as_i64().unwrap();
        // Replay the alloc / free_completed events through a fresh allocator.
        let b = allocator(conf);
        let mut live: HashMap<u64, RawAllocation> = HashMap::new();
        for e in doc["events"].as_array().unwrap() {
            let (act, addr, size, stream) = (
                e[0].as_str().unwrap(),
                e[1].as_u64().unwrap(),
                e[2].as_u64().unwrap(),
                e[3].as_u64().unwrap(),
            );
            match act {
                "alloc" => {
                    live.insert(addr, b.allocate_raw(size, StreamId(stream)).unwrap());
                }
                "free_completed" => b.free_raw(live.remove(&addr).unwrap()).unwrap(),
                _ => {}
            }
        }
        assert!(live.is_empty());
        assert_eq!(b.max_memory_reserved() as i64, recorded_peak, "{conf}");
        assert_eq!(b.max_memory_allocated(), a.max_memory_allocated(), "{conf}");
    }
}

/// Entry times follow the wall clock (checked against `Instant`, which the
/// history's time-stamp-counter clock is calibrated with but does not read
/// per entry): never backwards, and each sleep between two allocations shows
/// up as at least that many microseconds and not much more than the time
/// that really passed.
#[test]
fn entry_times_follow_the_clock_and_never_go_back() {
    let a = allocator("");
    a.record_history(Some(100_000));
    let start = std::time::Instant::now();
    let mut marks = Vec::new();
    for round in 0..6u64 {
        // Enough entries between the sleeps to pass several calibrations.
        for i in 0..3000u64 {
            let r = a
                .allocate_raw(512 + (i % 7) * 512, StreamId::DEFAULT)
                .unwrap();
            a.free_raw(r).unwrap();
        }
        let before = start.elapsed();
        std::thread::sleep(std::time::Duration::from_millis(3 + round));
        let r = a.allocate_raw(4096, StreamId::DEFAULT).unwrap();
        let after = start.elapsed();
        a.free_raw(r).unwrap();
        marks.push((before, after));
    }
    let h = a.history();
    assert!(h.windows(2).all(|w| w[0].time_us <= w[1].time_us));
    // The 4096-byte allocations are the marks, in order.
    let at: Vec<u64> = h
        .iter()
        .filter(|e| e.action == Action::Alloc && e.size == 4096)
        .map(|e| e.time_us)
        .collect();
    assert_eq!(at.len(), marks.len());
    for k in 1..marks.len() {
        let slept = 3000 + 1000 * k as u64;
        let gap = at[k] - at[k - 1];
        // At least the sleep; at most the real time between the marks, with
        // a millisecond of slack for the conversion.
        let real = (marks[k].1 - marks[k - 1].0).as_micros() as u64;
        assert!(gap + 50 >= slept, "gap {gap} us < sleep {slept} us");
        assert!(gap <= real + 1000, "gap {gap} us > real {real} us");
    }
}
