//! Behaviour of the caching allocator on the simulated device: PyTorch's
//! semantics, streams and events, failures, threads, and random sequences
//! checked against a recount.

use proptest::prelude::*;
use std::sync::Arc;
use strata_alloc::driver::sim::SimDriver;
use strata_alloc::driver::Driver;
use strata_alloc::{AllocError, AllocatorConfig, CachingAllocator, RawAllocation, StreamId};

const MIB: u64 = 1 << 20;

fn sim_alloc(conf: &str, capacity: u64) -> (Arc<SimDriver>, Arc<CachingAllocator>) {
    let d = Arc::new(SimDriver::new(capacity, 2 * MIB));
    let a = CachingAllocator::new(d.clone(), AllocatorConfig::parse(conf).unwrap());
    (d, a)
}

const S0: StreamId = StreamId::DEFAULT;
const S1: StreamId = StreamId(11);

#[test]
fn rounding_follows_pytorch() {
    let (_, a) = sim_alloc("", 1 << 36);
    assert_eq!(a.round_size(1), 512);
    assert_eq!(a.round_size(512), 512);
    assert_eq!(a.round_size(513), 1024);
    assert_eq!(a.round_size(1200), 1536);
    let (_, a) = sim_alloc("roundup_power2_divisions:4", 1 << 36);
    assert_eq!(a.round_size(1200), 1536); // below 512 * 4: plain rounding
    assert_eq!(a.round_size(3000), 3072);
    assert_eq!(a.round_size(1 << 30), 1 << 30);
    assert_eq!(a.round_size((1 << 30) + 1), (1 << 30) + (1 << 28));
}

#[test]
fn segment_sizes_follow_pytorch_without_expandable_segments() {
    let (d, a) = sim_alloc("expandable_segments:False", 1 << 36);
    let small = a.allocate_raw(1000, S0).unwrap();
    assert_eq!(a.memory_reserved(), 2 * MIB);
    let mid = a.allocate_raw(3 * MIB, S0).unwrap();
    assert_eq!(a.memory_reserved(), 22 * MIB);
    // 18 MiB does not fit the 17 MiB left of the 20 MiB segment: a new segment
    // of the request rounded up to 2 MiB.
    let big = a.allocate_raw(17 * MIB + 5, S0).unwrap();
    assert_eq!(a.memory_reserved(), 40 * MIB);
    // A second small request is carved from the cached small segment.
    let small2 = a.allocate_raw(4096, S0).unwrap();
    assert_eq!(a.memory_reserved(), 40 * MIB);
    assert_eq!(d.call_count("malloc"), 3);
    let s = a.memory_stats();
    assert_eq!(s.segment.all().current, 3);
    assert_eq!(s.allocation.all().current, 4);
    assert_eq!(
        s.requested_bytes.all().current as u64,
        1000 + 3 * MIB + 17 * MIB + 5 + 4096
    );
    for r in [small, mid, big, small2] {
        a.free_raw(r).unwrap();
    }
    a.check_consistency().unwrap();
    a.empty_cache().unwrap();
    assert_eq!(a.memory_reserved(), 0);
    assert_eq!(d.used_bytes(), 0);
}

#[test]
fn freed_blocks_merge_and_are_reused_best_fit() {
    let (d, a) = sim_alloc("expandable_segments:False", 1 << 36);
    let x = a.allocate_raw(4 * MIB, S0).unwrap();
    let y = a.allocate_raw(4 * MIB, S0).unwrap();
    assert_eq!(y.ptr(), x.ptr() + 4 * MIB); // split from the same 20 MiB segment
    a.free_raw(x).unwrap();
    a.free_raw(y).unwrap();
    let s = a.memory_stats();
    assert_eq!(
        s.inactive_split.all().current,
        0,
        "merged back into one block"
    );
    let z = a.allocate_raw(8 * MIB, S0).unwrap();
    assert_eq!(z.ptr(), x.ptr());
    assert_eq!(d.call_count("malloc"), 1);
    a.free_raw(z).unwrap();
    a.check_consistency().unwrap();
}

#[test]
fn streams_do_not_share_cached_blocks() {
    let (d, a) = sim_alloc("expandable_segments:False", 1 << 36);
    let x = a.allocate_raw(4096, S0).unwrap();
    a.free_raw(x).unwrap();
    let y = a.allocate_raw(4096, S1).unwrap();
    assert_eq!(
        d.call_count("malloc"),
        2,
        "a block cached on stream 0 is not used on stream 1"
    );
    a.free_raw(y).unwrap();
    a.check_consistency().unwrap();
}

#[test]
fn record_stream_defers_reuse_until_the_event_completes() {
    for conf in ["expandable_segments:False", "expandable_segments:True"] {
        let (d, a) = sim_alloc(conf, 1 << 36);
        let x = a.allocate_raw(8192, S0).unwrap();
        a.record_stream(&x, S1).unwrap();
        a.free_raw(x).unwrap();
        let s = a.memory_stats();
        assert_eq!(s.allocated_bytes.all().current, 0);
        assert_eq!(
            s.active_bytes.all().current,
            8192,
            "{conf}: still active until the event"
        );
        let y = a.allocate_raw(8192, S0).unwrap();
        assert_ne!(
            y.ptr(),
            x.ptr(),
            "{conf}: not reused while stream 1 may use it"
        );
        a.free_raw(y).unwrap();
        d.complete_stream(S1);
        let z = a.allocate_raw(8192, S0).unwrap();
        assert_eq!(z.ptr(), x.ptr(), "{conf}: reused once the event completed");
        a.free_raw(z).unwrap();
        a.check_consistency().unwrap();
        a.empty_cache().unwrap();
        assert_eq!(a.memory_reserved(), 0);
    }
}

#[test]
fn max_split_size_keeps_large_blocks_whole() {
    let (_, a) = sim_alloc("expandable_segments:False,max_split_size_mb:40", 1 << 36);
    let big = a.allocate_raw(100 * MIB, S0).unwrap();
    a.free_raw(big).unwrap();
    // A normal request does not carve the cached oversize block.
    let small = a.allocate_raw(30 * MIB, S0).unwrap();
    assert_ne!(small.ptr(), big.ptr());
    let s = a.memory_stats();
    assert_eq!(s.oversize_segments.current, 1);
    assert_eq!(s.max_split_size, 40 << 20);
    a.free_raw(small).unwrap();
    // An oversize request within 20 MiB of the cached block reuses it whole.
    let again = a.allocate_raw(90 * MIB, S0).unwrap();
    assert_eq!(again.ptr(), big.ptr());
    assert_eq!(a.memory_stats().oversize_allocations.current, 1);
    a.free_raw(again).unwrap();
    a.check_consistency().unwrap();
}

#[test]
fn out_of_memory_is_typed_and_carries_the_figures() {
    for conf in ["expandable_segments:False", "expandable_segments:True"] {
        let (d, a) = sim_alloc(conf, 64 * MIB);
        let keep = a.allocate_raw(40 * MIB, S0).unwrap();
        let err = a.allocate_raw(30 * MIB, S0).unwrap_err();
        let oom = err.out_of_memory().expect("an out-of-memory error");
        assert_eq!(oom.requested, 30 * MIB);
        assert_eq!(oom.capacity, 64 * MIB);
        assert_eq!(oom.allocated, 40 * MIB);
        assert!(oom.free < 30 * MIB);
        let text = err.to_string();
        assert!(text.contains("Tried to allocate 30.00 MiB"), "{text}");
        let s = a.memory_stats();
        assert_eq!((s.num_ooms, s.num_alloc_retries), (1, 1));
        a.check_consistency().unwrap();
        // Still usable: free and retry.
        a.free_raw(keep).unwrap();
        let r = a.allocate_raw(30 * MIB, S0).unwrap();
        a.free_raw(r).unwrap();
        a.empty_cache().unwrap();
        assert_eq!(d.used_bytes(), 0, "{conf}");
    }
}

#[test]
fn full_cache_is_released_before_failing() {
    let (_, a) = sim_alloc("expandable_segments:False", 64 * MIB);
    // Fill the device with cached 16 MiB segments of another stream, then ask
    // for one big block.
    let xs: Vec<_> = (0..3)
        .map(|_| a.allocate_raw(15 * MIB, S1).unwrap())
        .collect();
    for x in xs {
        a.free_raw(x).unwrap();
    }
    assert_eq!(a.memory_reserved(), 48 * MIB);
    let big = a.allocate_raw(50 * MIB, S0).unwrap();
    assert_eq!(a.memory_stats().num_alloc_retries, 1);
    a.free_raw(big).unwrap();
    a.check_consistency().unwrap();
}

#[test]
fn memory_fraction_limits_reservations() {
    let (_, a) = sim_alloc(
        "expandable_segments:False,per_process_memory_fraction:0.25",
        400 * MIB,
    );
    let x = a.allocate_raw(90 * MIB, S0).unwrap();
    let err = a.allocate_raw(20 * MIB, S0).unwrap_err();
    let oom = err.out_of_memory().unwrap();
    assert_eq!(oom.allowed, Some(100 * MIB));
    assert!(
        oom.hint.contains("per_process_memory_fraction"),
        "{}",
        oom.hint
    );
    a.free_raw(x).unwrap();
}

#[test]
fn injected_driver_failures_leave_the_allocator_usable() {
    for conf in ["expandable_segments:False", "expandable_segments:True"] {
        let (d, a) = sim_alloc(conf, 1 << 34);
        let keep = a.allocate_raw(3 * MIB, S0).unwrap();
        d.inject_out_of_memory(10);
        let err = a.allocate_raw(64 * MIB, S0).unwrap_err();
        assert!(err.out_of_memory().is_some(), "{conf}: {err}");
        d.inject_out_of_memory(0);
        a.check_consistency().unwrap();
        if conf.ends_with("True") {
            d.inject_failure("map", 1);
            let err = a.allocate_raw(64 * MIB, S0).unwrap_err();
            assert!(matches!(err, AllocError::Driver { .. }), "{err}");
            a.check_consistency().unwrap();
            d.inject_failure("set_access", 1);
            assert!(a.allocate_raw(64 * MIB, S0).is_err());
            a.check_consistency().unwrap();
        }
        let r = a.allocate_raw(64 * MIB, S0).unwrap();
        a.free_raw(r).unwrap();
        a.free_raw(keep).unwrap();
        a.empty_cache().unwrap();
        assert_eq!(d.used_bytes(), 0, "{conf}");
        assert_eq!(d.live_objects(), (0, 0, 0, 0), "{conf}");
    }
}

#[test]
fn double_free_is_an_error_not_corruption() {
    let (_, a) = sim_alloc("", 1 << 34);
    let r = a.allocate_raw(1000, S0).unwrap();
    a.free_raw(r).unwrap();
    assert!(matches!(a.free_raw(r), Err(AllocError::InvalidFree { .. })));
    let r2 = a.allocate_raw(1000, S0).unwrap();
    assert_eq!(r2.ptr(), r.ptr());
    // The stale handle does not free the new allocation behind the same address.
    assert!(a.free_raw(r).is_err());
    a.free_raw(r2).unwrap();
    a.check_consistency().unwrap();
}

#[test]
fn stats_reset_like_pytorch() {
    let (_, a) = sim_alloc("", 1 << 34);
    let r = a.allocate_raw(10 * MIB, S0).unwrap();
    a.free_raw(r).unwrap();
    assert_eq!(a.max_memory_allocated(), 10 * MIB);
    a.reset_peak_memory_stats();
    assert_eq!(a.max_memory_allocated(), 0);
    a.reset_accumulated_memory_stats();
    let m = a.memory_stats().to_map();
    assert_eq!(m["allocated_bytes.all.allocated"], 0);
    assert_eq!(m["num_device_alloc"], 0);
    assert!(m["reserved_bytes.all.current"] > 0);
    let summary = a.memory_summary();
    assert!(summary.contains("Allocated memory"));
}

#[test]
fn expandable_segments_follow_allocated_memory() {
    // The device keeps up with the work (events complete at once), so freed
    // pages may be recycled as soon as the allocator looks.
    let d = Arc::new(SimDriver::new(1 << 36, 2 * MIB).with_auto_complete_events());
    let a = CachingAllocator::new(
        d.clone(),
        AllocatorConfig::parse("expandable_segments:True").unwrap(),
    );
    // Allocate growing blocks, freeing each before the next: the pages of the
    // freed blocks are recycled instead of accumulating.
    let mut prev: Option<RawAllocation> = None;
    for i in 1..60u64 {
        let r = a.allocate_raw(i * 3 * MIB + 4096, S0).unwrap();
        if let Some(p) = prev.take() {
            a.free_raw(p).unwrap();
        }
        prev = Some(r);
        a.check_consistency().unwrap();
    }
    let s = a.memory_stats();
    let peak_alloc = s.allocated_bytes.all().peak as f64;
    let peak_res = s.reserved_bytes.all().peak as f64;
    assert!(
        peak_res <= peak_alloc * 1.05 + (20 * MIB) as f64,
        "{peak_res} vs {peak_alloc}"
    );
    a.free_raw(prev.unwrap()).unwrap();
    a.empty_cache().unwrap();
    assert_eq!(d.live_objects(), (0, 0, 0, 0));
}

#[test]
fn threads_share_one_allocator() {
    let (d, a) = sim_alloc("", 1 << 36);
    let handles: Vec<_> = (0..4u64)
        .map(|t| {
            let a = Arc::clone(&a);
            std::thread::spawn(move || {
                let stream = StreamId(t % 2);
                let mut live = Vec::new();
                for i in 0..3000u64 {
                    let size = 256 + (i * 7919 + t * 104_729) % (3 * MIB);
                    live.push(a.allocate(size, stream).unwrap());
                    if live.len() > 16 {
                        live.swap_remove((i as usize * 31) % live.len());
                    }
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    a.check_consistency().unwrap();
    let s = a.memory_stats();
    assert_eq!(s.allocated_bytes.all().current, 0);
    assert_eq!(s.allocation.all().allocated, 12_000);
    assert_eq!(s.allocation.all().freed, 12_000);
    a.empty_cache().unwrap();
    assert_eq!(d.used_bytes(), 0);
}

#[derive(Clone, Debug)]
enum Op {
    Alloc { size: u64, stream: u8 },
    Free { which: usize },
    RecordStream { which: usize, stream: u8 },
    CompleteEvents,
    EmptyCache,
    FailNext,
    Reconfigure { which: usize },
}

/// Configurations a live allocator is switched between (`Op::Reconfigure`).
const RECONFIGURATIONS: [&str; 4] = [
    "expandable_segments:True",
    "expandable_segments:False",
    "expandable_segments:False,max_split_size_mb:24",
    "max_split_size_mb:40,max_non_split_rounding_mb:60,roundup_power2_divisions:2",
];

fn op() -> impl Strategy<Value = Op> {
    let size = prop_oneof![
        1u64..4096,
        4096u64..(1 << 20),
        (1u64 << 20)..(12 << 20),
        (12u64 << 20)..(200 << 20)
    ];
    prop_oneof![
        5 => (size, 0u8..3).prop_map(|(size, stream)| Op::Alloc { size, stream }),
        4 => any::<usize>().prop_map(|which| Op::Free { which }),
        1 => (any::<usize>(), 0u8..3).prop_map(|(which, stream)| Op::RecordStream { which, stream }),
        1 => Just(Op::CompleteEvents),
        1 => Just(Op::EmptyCache),
        1 => Just(Op::FailNext),
        1 => any::<usize>().prop_map(|which| Op::Reconfigure { which }),
    ]
}

fn run_ops(conf: &str, ops: &[Op]) -> Result<(), TestCaseError> {
    let (d, a) = sim_alloc(conf, 1 << 30);
    let streams = [StreamId(0), StreamId(7), StreamId(9)];
    let mut live: Vec<RawAllocation> = Vec::new();
    for op in ops {
        match op {
            Op::Alloc { size, stream } => match a.allocate_raw(*size, streams[*stream as usize]) {
                Ok(r) => live.push(r),
                Err(e) => prop_assert!(e.out_of_memory().is_some(), "unexpected error {e}"),
            },
            Op::Free { which } if !live.is_empty() => {
                let r = live.swap_remove(which % live.len());
                a.free_raw(r).unwrap();
            }
            Op::RecordStream { which, stream } if !live.is_empty() => {
                a.record_stream(&live[which % live.len()], streams[*stream as usize])
                    .unwrap();
            }
            Op::CompleteEvents => d.complete_all_events(),
            Op::EmptyCache => a.empty_cache().unwrap(),
            Op::FailNext => d.inject_out_of_memory(1),
            Op::Reconfigure { which } => a
                .set_allocator_settings(RECONFIGURATIONS[which % RECONFIGURATIONS.len()])
                .unwrap(),
            _ => {}
        }
        if let Err(e) = a.check_consistency() {
            return Err(TestCaseError::fail(format!("after {op:?}: {e}")));
        }
        // Live allocations never overlap.
        let mut spans: Vec<(u64, u64)> =
            live.iter().map(|r| (r.ptr(), r.ptr() + r.size())).collect();
        spans.sort_unstable();
        for w in spans.windows(2) {
            prop_assert!(w[0].1 <= w[1].0, "overlap {:x?}", w);
        }
        prop_assert_eq!(
            a.memory_stats().allocation.all().current as usize,
            live.len()
        );
    }
    d.inject_out_of_memory(0);
    for r in live.drain(..) {
        a.free_raw(r).unwrap();
    }
    a.empty_cache().unwrap();
    prop_assert_eq!(a.memory_reserved(), 0);
    prop_assert_eq!(d.used_bytes(), 0);
    prop_assert_eq!(d.live_objects(), (0, 0, 0, 0));
    a.check_consistency().map_err(TestCaseError::fail)?;
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(crate::common::cases(96)))]

    #[test]
    fn random_sequences_keep_invariants_expandable(ops in prop::collection::vec(op(), 1..120)) {
        run_ops("expandable_segments:True", &ops)?;
    }

    #[test]
    fn random_sequences_keep_invariants_segments(ops in prop::collection::vec(op(), 1..120)) {
        run_ops("expandable_segments:False", &ops)?;
    }

    #[test]
    fn random_sequences_keep_invariants_oversize(ops in prop::collection::vec(op(), 1..120)) {
        run_ops("expandable_segments:False,max_split_size_mb:24,roundup_power2_divisions:4", &ops)?;
    }
}

#[test]
fn a_request_beyond_the_device_says_so() {
    let (_, a) = sim_alloc("", 64 * MIB);
    let err = a.allocate_raw(100 * MIB, S0).unwrap_err();
    let oom = err.out_of_memory().unwrap();
    assert!(oom.hint.contains("larger than the device"), "{}", oom.hint);
}

#[test]
fn snapshots_account_for_every_reserved_byte() {
    use strata_alloc::snapshot::BlockState;
    for conf in ["expandable_segments:True", "expandable_segments:False"] {
        let (_, a) = sim_alloc(conf, 1 << 34);
        let x = a.allocate_raw(3000, S0).unwrap();
        let y = a.allocate_raw(5 * MIB, S0).unwrap();
        let z = a.allocate_raw(40 * MIB, S1).unwrap();
        a.record_stream(&z, S0).unwrap();
        a.free_raw(z).unwrap();
        let snap = a.snapshot();
        let total: u64 = snap.iter().map(|s| s.total_size).sum();
        assert_eq!(total, a.memory_reserved(), "{conf}");
        let allocated: u64 = snap.iter().map(|s| s.allocated_size).sum();
        assert_eq!(allocated, a.memory_allocated(), "{conf}");
        let states: Vec<BlockState> = snap
            .iter()
            .flat_map(|s| s.blocks.iter().map(|b| b.state))
            .collect();
        assert_eq!(
            states
                .iter()
                .filter(|s| **s == BlockState::ActiveAllocated)
                .count(),
            2
        );
        assert_eq!(
            states
                .iter()
                .filter(|s| **s == BlockState::ActivePendingFree)
                .count(),
            1
        );
        for s in &snap {
            let sum: u64 = s.blocks.iter().map(|b| b.size).sum();
            assert_eq!(sum, s.total_size);
        }
        a.free_raw(x).unwrap();
        a.free_raw(y).unwrap();
    }
}

/// With the addresses a recording device handed out (`with_malloc_addresses`),
/// a tie between two free blocks of the same size goes where PyTorch's went:
/// to the lower address, which here is the newer segment (CUDA's addresses
/// do not rise over a run, the simulator's own do).
#[test]
fn ties_between_equal_free_blocks_go_to_the_lower_recorded_address() {
    let (high, low) = (0x7fd0_0000_0000u64, 0x7fc0_0000_0000u64);
    let seg = 12 << 20;
    let drv = Arc::new(SimDriver::h100().with_malloc_addresses([(high, seg), (low, seg)]));
    let a = CachingAllocator::new(
        drv,
        AllocatorConfig::parse("expandable_segments:False").unwrap(),
    );
    let first = a.allocate_raw(seg, StreamId::DEFAULT).unwrap();
    let second = a.allocate_raw(seg, StreamId::DEFAULT).unwrap();
    assert_eq!((first.ptr(), second.ptr()), (high, low));
    a.free_raw(first).unwrap();
    a.free_raw(second).unwrap();
    let again = a.allocate_raw(seg, StreamId::DEFAULT).unwrap();
    assert_eq!(again.ptr(), low, "the lower of two equal free blocks");
    assert_eq!(a.memory_stats().num_device_alloc, 2);
    a.free_raw(again).unwrap();
}

/// A planned address that would overlap a live segment, or a call of another
/// size, gets an address of the simulator's own instead.
#[test]
fn a_planned_address_that_does_not_fit_is_not_used() {
    let at = 0x7fc0_0000_0000u64;
    let d =
        SimDriver::h100().with_malloc_addresses([(at, 4096), (at + 2048, 4096), (at + 8192, 512)]);
    assert_eq!(d.malloc(4096).unwrap(), at);
    let overlapping = d.malloc(4096).unwrap();
    assert!(
        overlapping >= at + 4096 || overlapping + 4096 <= at,
        "no overlap"
    );
    assert_ne!(d.malloc(1024).unwrap(), at + 8192, "another size");
}
