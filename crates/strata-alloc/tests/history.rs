//! Memory history: what the allocator records, and that a recording replays to
//! the same figures.

use std::collections::HashMap;
use std::sync::Arc;
use strata_alloc::driver::sim::SimDriver;
use strata_alloc::history::Action;
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
