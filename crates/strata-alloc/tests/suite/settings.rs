//! PyTorch parity of a live allocator: reconfiguration at run time, the keys
//! PyTorch accepts, requests no device can hold, snapshots that agree with the
//! statistics, snapshot events in the history, the memory fraction and
//! `mem_get_info`.

use std::sync::Arc;
use strata_alloc::driver::sim::SimDriver;
use strata_alloc::history::Action;
use strata_alloc::snapshot::BlockState;
use strata_alloc::{AllocError, AllocatorConfig, CachingAllocator, Device, StreamId};

const MIB: u64 = 1 << 20;
const S0: StreamId = StreamId::DEFAULT;
const S1: StreamId = StreamId(21);

fn sim_alloc(conf: &str, capacity: u64) -> (Arc<SimDriver>, Arc<CachingAllocator>) {
    let d = Arc::new(SimDriver::new(capacity, 2 * MIB));
    let a = CachingAllocator::new(d.clone(), AllocatorConfig::parse(conf).unwrap());
    (d, a)
}

/// PyTorch's rule for a re-parse: the split limit, the divisions and the
/// garbage-collection threshold go back to their defaults unless named; every
/// other key (expandable segments, the memory fraction, ...) keeps its value.
#[test]
fn set_allocator_settings_resets_pytorchs_three_keys_not_named() {
    let (_, a) = sim_alloc(
        "expandable_segments:False,max_split_size_mb:64,garbage_collection_threshold:0.5,per_process_memory_fraction:0.5,max_non_split_rounding_mb:40",
        1 << 34,
    );
    assert_eq!(a.memory_stats().max_split_size, 64 << 20);
    a.set_allocator_settings("roundup_power2_divisions:8")
        .unwrap();
    let c = a.config();
    assert_eq!(c.max_split_size, None);
    assert_eq!(c.garbage_collection_threshold, None);
    assert_eq!(c.per_process_memory_fraction, Some(0.5));
    assert_eq!(c.expandable_segments, Some(false));
    // Back to the large segment size (PyTorch's newest parseArgs).
    assert_eq!(c.max_non_split_rounding, 20 << 20);
    assert_eq!(c.roundup_power2_divisions, [8; 16]);
    assert_eq!(a.memory_stats().max_split_size, -1);
    assert_eq!(a.memory_fraction(), 0.5);
    assert!(!a.expandable_segments(), "kept off");
    // Named keys change; the divisions, not named now, are reset. A named
    // fraction is the configuration's; the one in force, applied when the
    // allocator was created, stays (PyTorch 2.15: `hostile_s59.rs`).
    a.set_allocator_settings("expandable_segments:True,per_process_memory_fraction:1")
        .unwrap();
    assert!(a.expandable_segments());
    assert_eq!(a.config().per_process_memory_fraction, Some(1.0));
    assert_eq!(a.memory_fraction(), 0.5);
    assert_eq!(a.config().roundup_power2_divisions, [0; 16]);
    a.set_allocator_settings("roundup_power2_divisions:8")
        .unwrap();
    // The new rounding applies at once: 8 divisions of [4, 8) MiB are 512 KiB.
    assert_eq!(a.round_size(5 * MIB + 1), 5 * MIB + 512 * 1024);
}

#[test]
fn a_rejected_setting_changes_nothing() {
    let (_, a) = sim_alloc("max_split_size_mb:64", 1 << 34);
    let before = a.config();
    for bad in [
        "no_such_key:1",
        "max_split_size_mb:64,max_non_split_rounding_mb:3",
        "expandable_segments:maybe",
        "backend:cudaMallocAsync",
    ] {
        let e = a.set_allocator_settings(bad).unwrap_err();
        assert!(matches!(e, AllocError::Config(_)), "{bad}: {e}");
        assert_eq!(a.config(), before, "{bad}");
    }
}

#[test]
fn switching_segment_kinds_live_keeps_everything_consistent() {
    let (d, a) = sim_alloc("expandable_segments:True", 1 << 34);
    let x = a.allocate_raw(30 * MIB, S0).unwrap();
    assert_eq!(
        a.memory_stats().segment.all().current,
        0,
        "expandable: no segments"
    );
    a.set_allocator_settings("expandable_segments:False,max_split_size_mb:20")
        .unwrap();
    assert!(!a.expandable_segments());
    // A request that fits no free block now gets an ordinary segment; it is
    // oversize under the new threshold.
    let y = a.allocate_raw(200 * MIB, S0).unwrap();
    let s = a.memory_stats();
    assert_eq!(s.segment.all().current, 1);
    assert_eq!(s.oversize_allocations.current, 1);
    assert_eq!(s.oversize_segments.current, 1);
    a.check_consistency().unwrap();
    // The threshold goes away while the oversize block is live: freeing it
    // must still undo exactly what was counted.
    a.set_allocator_settings("expandable_segments:True")
        .unwrap();
    a.free_raw(y).unwrap();
    a.free_raw(x).unwrap();
    a.check_consistency().unwrap();
    let s = a.memory_stats();
    assert_eq!(s.oversize_allocations.current, 0);
    a.empty_cache().unwrap();
    let s = a.memory_stats();
    assert_eq!(s.oversize_segments.current, 0);
    assert_eq!(a.memory_reserved(), 0);
    assert_eq!(d.used_bytes(), 0);
    assert_eq!(d.live_objects(), (0, 0, 0, 0));
}

#[test]
fn max_non_split_rounding_bounds_the_reuse_of_larger_oversize_blocks() {
    // Oversize is >= 20 MiB here. A cached 100 MiB block serves an oversize
    // request only if it is less than `max_non_split_rounding` larger.
    for (conf, request, reused) in [
        ("", 85 * MIB, true),                              // 100 < 85 + 20
        ("", 75 * MIB, false),                             // 100 >= 75 + 20
        ("max_non_split_rounding_mb:40", 75 * MIB, true),  // 100 < 75 + 40
        ("max_non_split_rounding_mb:40", 55 * MIB, false), // 100 >= 55 + 40
    ] {
        let conf = format!("expandable_segments:False,max_split_size_mb:20,{conf}");
        let (_, a) = sim_alloc(conf.trim_end_matches(','), 1 << 34);
        let big = a.allocate_raw(100 * MIB, S0).unwrap();
        a.free_raw(big).unwrap();
        let before = a.driver_calls().malloc;
        let r = a.allocate_raw(request, S0).unwrap();
        let hit = a.driver_calls().malloc == before;
        assert_eq!(hit, reused, "{conf}, {} MiB", request / MIB);
        if hit {
            assert_eq!(r.ptr(), big.ptr());
        }
        a.free_raw(r).unwrap();
        a.check_consistency().unwrap();
    }
}

#[test]
fn a_request_no_device_can_hold_is_rejected_before_any_work() {
    let (d, a) = sim_alloc("", 1 << 34);
    a.record_history(Some(100));
    let calls = a.driver_calls();
    let sim_calls: u64 = ["mem_get_info", "malloc", "reserve", "create"]
        .iter()
        .map(|c| d.call_count(c))
        .sum();
    for size in [1u64 << 60, u64::MAX] {
        let e = a.allocate_raw(size, StreamId(99)).unwrap_err();
        assert_eq!(
            e,
            AllocError::TooLarge {
                device: a.device(),
                requested: size
            }
        );
        assert!(e.is_out_of_memory());
        assert!(e.to_string().contains("1 EiB"), "{e}");
    }
    assert_eq!(a.memory_stats().num_ooms, 0);
    assert_eq!(a.driver_calls(), calls);
    let after: u64 = ["mem_get_info", "malloc", "reserve", "create"]
        .iter()
        .map(|c| d.call_count(c))
        .sum();
    assert_eq!(after, sim_calls);
    assert!(a.history().is_empty());
    // Just below the limit it is an ordinary out-of-memory error, counted.
    let e = a.allocate_raw((1 << 60) - 1, S0).unwrap_err();
    assert!(e.out_of_memory().is_some() && e.is_out_of_memory());
    assert_eq!(a.memory_stats().num_ooms, 1);
}

#[test]
fn blocks_waiting_for_events_keep_their_requested_size_in_the_snapshot() {
    for conf in ["expandable_segments:True", "expandable_segments:False"] {
        let (d, a) = sim_alloc(conf, 1 << 34);
        let keep = a.allocate_raw(1000, S0).unwrap();
        let x = a.allocate_raw(3 * MIB + 5, S0).unwrap();
        a.record_stream(&x, S1).unwrap();
        a.free_raw(x).unwrap();
        let snap = a.snapshot();
        let pending: Vec<_> = snap
            .iter()
            .flat_map(|s| s.blocks.iter())
            .filter(|b| b.state == BlockState::ActivePendingFree)
            .collect();
        assert_eq!(pending.len(), 1, "{conf}");
        assert_eq!(pending[0].requested_size, 3 * MIB + 5, "{conf}");
        let requested: u64 = snap.iter().map(|s| s.requested_size).sum();
        let stats = a.memory_stats();
        assert_eq!(requested, 3 * MIB + 5 + 1000, "{conf}");
        assert_eq!(
            requested as i64,
            stats.requested_bytes.all().current,
            "{conf}"
        );
        let active: u64 = snap.iter().map(|s| s.active_size).sum();
        assert_eq!(active as i64, stats.active_bytes.all().current, "{conf}");
        a.check_consistency().unwrap();
        // Once the event completes (seen at the next allocation) the block is
        // inactive and its request no longer counts, in both views.
        d.complete_stream(S1);
        let y = a.allocate_raw(512, S0).unwrap();
        let snap = a.snapshot();
        let requested: u64 = snap.iter().map(|s| s.requested_size).sum();
        assert_eq!(requested, 1000 + 512, "{conf}");
        assert_eq!(
            requested as i64,
            a.memory_stats().requested_bytes.all().current
        );
        a.check_consistency().unwrap();
        a.free_raw(y).unwrap();
        a.free_raw(keep).unwrap();
    }
}

#[test]
fn taking_a_snapshot_is_recorded_in_the_history() {
    let (_, a) = sim_alloc("", 1 << 34);
    let x = a.allocate_raw(4096, S0).unwrap();
    let _ = a.snapshot(); // not recording yet: nothing recorded
    a.record_history(Some(10));
    let _ = a.snapshot();
    let h = a.history();
    assert_eq!(h.len(), 1);
    assert_eq!(h[0].action, Action::Snapshot);
    assert_eq!(h[0].size, 4096, "the active bytes at that moment");
    assert!(a.history_json("t").contains("\"snapshot\""));
    a.free_raw(x).unwrap();
}

#[test]
fn memory_fraction_is_settable_and_readable_at_run_time() {
    let (_, a) = sim_alloc("expandable_segments:False", 1 << 30);
    assert_eq!(a.memory_fraction(), 1.0);
    let x = a.allocate_raw(300 * MIB, S0).unwrap();
    a.set_memory_fraction(0.5).unwrap();
    assert_eq!(a.memory_fraction(), 0.5);
    // As PyTorch's `set_per_process_memory_fraction`, the configuration's
    // fraction (`throw_on_cudamalloc_oom`'s) is left alone (hostile_s59.rs).
    assert_eq!(a.config().per_process_memory_fraction, None);
    // 300 MiB reserved; 300 more would pass 512 MiB.
    let e = a.allocate_raw(300 * MIB, S0).unwrap_err();
    let oom = e.out_of_memory().expect("an out-of-memory error");
    assert_eq!(oom.allowed, Some(512 * MIB));
    assert!(
        oom.hint.contains("per_process_memory_fraction"),
        "{}",
        oom.hint
    );
    assert!(a.allocate_raw(100 * MIB, S0).is_ok());
    for bad in [1.5, -0.1, f64::NAN] {
        assert!(matches!(
            a.set_memory_fraction(bad),
            Err(AllocError::Config(_))
        ));
        assert_eq!(a.memory_fraction(), 0.5);
    }
    a.set_memory_fraction(1.0).unwrap();
    assert!(a.allocate_raw(300 * MIB, S0).is_ok());
    a.free_raw(x).unwrap();
    a.check_consistency().unwrap();
}

#[test]
fn mem_get_info_reports_the_device_figures() {
    let (d, a) = sim_alloc("expandable_segments:False", 1 << 30);
    let x = a.allocate_raw(100 * MIB, S0).unwrap();
    let m = a.mem_get_info().unwrap();
    assert_eq!(m.total, 1 << 30);
    assert_eq!(m.free, (1 << 30) - d.used_bytes());
    assert_eq!(a.driver_calls().mem_get_info, 0, "not an allocator call");
    a.free_raw(x).unwrap();
    let cpu = strata_alloc::mem_get_info(Device::Cpu).unwrap();
    assert!(cpu.total > 0 && cpu.free <= cpu.total);
}

#[test]
fn an_installed_allocator_makes_its_device_valid() {
    // The only test of this binary that installs an allocator in the registry.
    // The simulated device serves cuda:0, with or without a GPU.
    let a = CachingAllocator::new(Arc::new(SimDriver::h100()), AllocatorConfig::default());
    strata_alloc::set_allocator(Arc::clone(&a));
    let x = a.allocate(4096, StreamId::DEFAULT).unwrap();
    assert_eq!(
        strata_alloc::memory_allocated(Device::Cuda(0)).unwrap(),
        4096
    );
    assert_eq!(
        strata_alloc::memory_stats(Device::Cuda(0))
            .unwrap()
            .allocation
            .all()
            .current,
        1
    );
    drop(x);
    strata_alloc::empty_cache(Device::Cuda(0)).unwrap();
    assert_eq!(strata_alloc::memory_reserved(Device::Cuda(0)).unwrap(), 0);
}
