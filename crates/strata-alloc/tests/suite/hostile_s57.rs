//! Session 57's sweep of hostile inputs to strata-alloc (after
//! `hostile_sweep_s56.rs`): the addresses a trace's `segment_alloc` events
//! plan for the simulated device (`SimDriver::with_malloc_addresses`, which
//! the `replay` tool and `tests/traces.rs` feed from a trace file), read as
//! hostile input: ranges at the simulator's own addresses, near the top of
//! the address space, and at address 0.
//!
//! Defects these tests found (fixed with them):
//!
//! * The simulator's own addresses (counted up from its base) did not step
//!   over a live segment placed at a planned address: a trace whose
//!   `segment_alloc` named an address the simulator counts through had that
//!   range handed out twice, and the allocator refused the second `malloc`
//!   as a driver bug ("a range overlapping ... the driver must not hand out
//!   memory twice"), so the replay of an ordinary trace failed.
//! * A planned range that wraps past 2^64 was handed out; the allocator
//!   refused it as a driver bug ("a range that wraps past the end of the
//!   64-bit address space"), failing the replay, and the simulator's own
//!   overlap check computed `base + size` of such a segment unchecked (an
//!   overflow panic in a debug build). Such a range now gets an address of
//!   the simulator's own, as a planned range that overlaps a live one did.
//!
//! Each replay below ends with the allocator's statistics equal to a recount
//! of its snapshot, and no two live device ranges overlapping.

use super::common::recount;
use std::sync::Arc;
use strata_alloc::driver::sim::SimDriver;
use strata_alloc::driver::{Driver, VirtualMemory};
use strata_alloc::trace::{TraceOp, TraceOps};
use strata_alloc::{AllocatorConfig, CachingAllocator, RawAllocation, StreamId};

const MIB: u64 = 1 << 20;
/// The simulator's first address (`sim.rs`'s `ADDRESS_BASE`).
const SIM_BASE: u64 = 0x7f00_0000_0000;

/// No two of `ranges` (`(base, size)`) overlap, and none wraps.
fn assert_disjoint(what: &str, ranges: &[(u64, u64)]) {
    let mut r = ranges.to_vec();
    r.sort();
    for &(b, l) in &r {
        assert!(b.checked_add(l).is_some(), "{what}: {b:#x}+{l} wraps");
    }
    for w in r.windows(2) {
        assert!(
            w[0].0 + w[0].1 <= w[1].0,
            "{what}: {:#x}+{} overlaps {:#x}",
            w[0].0,
            w[0].1,
            w[1].0
        );
    }
}

/// Replays `events` twice (as the `replay` tool does: the simulated device
/// planned with the trace's `segment_alloc` addresses, each block freed at
/// its `free_completed`, the rest at the end of the pass, then the cache
/// emptied), checking after each allocation that the live blocks never
/// overlap. Returns the live blocks' addresses of the first pass, in order.
fn replay(what: &str, conf: &str, events: &[(&str, u64, u64, u64)]) -> Vec<u64> {
    let t = TraceOps::from_events(events.iter().copied());
    let d = Arc::new(
        SimDriver::like("NVIDIA H100", 0)
            .with_auto_complete_events()
            .with_malloc_addresses(t.segments.iter().copied()),
    );
    let a = CachingAllocator::new(d.clone(), AllocatorConfig::parse(conf).unwrap());
    let mut live: Vec<Option<RawAllocation>> = vec![None; t.slots];
    let mut first = Vec::new();
    for pass in 0..2 {
        for op in &t.ops {
            match *op {
                TraceOp::Alloc { slot, size, .. } => {
                    let r = a
                        .allocate_raw(size, StreamId::DEFAULT)
                        .unwrap_or_else(|e| panic!("{what}: pass {pass}: {e}"));
                    if pass == 0 {
                        first.push(r.ptr());
                    }
                    live[slot as usize] = Some(r);
                    let ranges: Vec<(u64, u64)> =
                        live.iter().flatten().map(|r| (r.ptr(), r.size())).collect();
                    assert_disjoint(what, &ranges);
                }
                TraceOp::Free { slot } => {
                    a.free_raw(live[slot as usize].take().unwrap()).unwrap();
                }
            }
        }
        for r in live.iter_mut().filter_map(Option::take) {
            a.free_raw(r).unwrap();
        }
        recount(&a, what);
        a.empty_cache().unwrap();
        assert_eq!(
            d.used_bytes(),
            0,
            "{what}: pass {pass} gave everything back"
        );
    }
    first
}

/// A trace whose first segment was recorded at the simulator's base address:
/// the segments the simulator picks itself come after it, not on it, and
/// the replay runs (it failed with the allocator's "overlapping" driver
/// error), for segments made by `malloc` (expandable segments off) and by
/// `reserve` (on).
#[test]
fn a_planned_segment_at_the_simulators_own_addresses_is_stepped_over() {
    let events = [
        ("segment_alloc", SIM_BASE, 2 * MIB, 0),
        ("alloc", 1, MIB, 0),
        ("alloc", 2, MIB, 0),
        // Large-pool requests: a 20 MiB segment of the simulator's own.
        ("alloc", 3, 3 * MIB, 0),
        ("alloc", 4, 3 * MIB, 0),
        // A third small segment, then everything freed.
        ("alloc", 5, MIB, 0),
        ("free_completed", 1, MIB, 0),
        ("free_completed", 3, 3 * MIB, 0),
    ];
    for conf in ["expandable_segments:False", "expandable_segments:True"] {
        let ptrs = replay(conf, conf, &events);
        if conf == "expandable_segments:False" {
            // The two small blocks share the planned segment.
            assert_eq!(&ptrs[..2], &[SIM_BASE, SIM_BASE + MIB], "{conf}");
            assert!(ptrs[2] >= SIM_BASE + 2 * MIB, "{conf}: {:#x}", ptrs[2]);
        }
    }
}

/// The simulator's own addresses step over every live planned segment,
/// however many lie in their way, and a freed planned segment's range is
/// the simulator's again only once it was freed.
#[test]
fn the_simulators_addresses_step_over_several_planned_segments() {
    let plan = [
        (SIM_BASE + 2 * MIB, 2 * MIB),
        (SIM_BASE + 4 * MIB, 2 * MIB),
        (SIM_BASE, 2 * MIB),
    ];
    let d = SimDriver::new(1 << 30, 2 * MIB).with_malloc_addresses(plan);
    let mut live: Vec<(u64, u64)> = Vec::new();
    for &(at, size) in &plan {
        assert_eq!(d.malloc(size).unwrap(), at);
        live.push((at, size));
    }
    // Three 6 MiB ranges of the simulator's own: each after the planned ones.
    for _ in 0..3 {
        let p = d.malloc(6 * MIB).unwrap();
        live.push((p, 6 * MIB));
        assert_disjoint("own after planned", &live);
    }
    assert!(live[3..].iter().all(|&(p, _)| p >= SIM_BASE + 6 * MIB));
    for &(p, size) in &live {
        d.free(p, size).unwrap();
    }
    assert_eq!(d.used_bytes(), 0);
    assert_eq!(d.live_objects(), (0, 0, 0, 0));
}

/// Planned ranges the simulator cannot hand out: one that wraps past 2^64
/// (it was handed out, and the allocator refused it), one that ends exactly
/// at 2^64 (its end is not an address), one at address 0, and one that
/// overlaps a live segment. Each gets an address of the simulator's own.
#[test]
fn planned_ranges_that_wrap_or_start_at_zero_get_the_simulators_own_addresses() {
    for (what, at) in [
        ("wraps", u64::MAX - 4095),
        ("ends at 2^64", u64::MAX - 2 * MIB + 1),
        ("null", 0),
    ] {
        let d = SimDriver::new(1 << 30, 2 * MIB).with_malloc_addresses([(at, 2 * MIB)]);
        let p = d.malloc(2 * MIB).unwrap();
        assert_eq!(p, SIM_BASE, "{what}");
        // The segment frees normally and the device's books balance.
        d.free(p, 2 * MIB).unwrap();
        assert_eq!(d.used_bytes(), 0, "{what}");
    }
    // The largest planned range that fits below 2^64 is handed out.
    let top = u64::MAX - 2 * MIB;
    let d = SimDriver::new(1 << 30, 2 * MIB).with_malloc_addresses([(top, 2 * MIB)]);
    assert_eq!(d.malloc(2 * MIB).unwrap(), top);
    d.free(top, 2 * MIB).unwrap();
    // A trace naming a wrapping segment replays, with or without expandable
    // segments (it failed with the allocator's "wraps" driver error).
    let events = [
        ("segment_alloc", u64::MAX - 4095, 2 * MIB, 0),
        ("alloc", 1, 512, 0),
        ("alloc", 2, 512, 0),
        ("alloc", 3, 3 * MIB, 0),
    ];
    for conf in ["expandable_segments:False", "expandable_segments:True"] {
        replay(conf, conf, &events);
    }
    // A planned range overlapping a live segment of the simulator's own.
    let d = SimDriver::new(1 << 30, 2 * MIB).with_malloc_addresses([(SIM_BASE + MIB, 2 * MIB)]);
    let own = d.malloc(4 * MIB).unwrap();
    assert_eq!(own, SIM_BASE);
    let p = d.malloc(2 * MIB).unwrap();
    assert_disjoint("overlapping plan", &[(own, 4 * MIB), (p, 2 * MIB)]);
}

/// A trace of many `segment_alloc` events scattered over the simulator's
/// own range, sizes matching and not, replays with no two live ranges
/// overlapping (random plans, fixed seed).
#[test]
fn random_plans_over_the_simulators_range_never_overlap() {
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for round in 0..20 {
        let mut events: Vec<(&str, u64, u64, u64)> = Vec::new();
        for _ in 0..8 {
            let at = SIM_BASE + (next() % 64) * 2 * MIB;
            let size = [2 * MIB, 20 * MIB, 4 * MIB][(next() % 3) as usize];
            events.push(("segment_alloc", at, size, 0));
        }
        let mut addr = 1;
        let mut held = Vec::new();
        for _ in 0..40 {
            if next() % 3 == 0 && !held.is_empty() {
                let (a, s) = held.swap_remove((next() % held.len() as u64) as usize);
                events.push(("free_completed", a, s, 0));
            } else {
                let size = [512, MIB, 3 * MIB, 12 * MIB][(next() % 4) as usize];
                events.push(("alloc", addr, size, 0));
                held.push((addr, size));
                addr += 1;
            }
        }
        let what = format!("round {round}");
        replay(&what, "expandable_segments:False", &events);
        replay(&what, "expandable_segments:True", &events);
    }
}

/// The simulated device's reservations (expandable segments) step over a
/// live planned segment too.
#[test]
fn reservations_step_over_planned_segments() {
    let d = SimDriver::new(1 << 30, 2 * MIB).with_malloc_addresses([(SIM_BASE, 2 * MIB)]);
    assert_eq!(d.malloc(2 * MIB).unwrap(), SIM_BASE);
    let r = d.reserve(8 * MIB).unwrap();
    assert!(r >= SIM_BASE + 2 * MIB, "{r:#x}");
    d.unreserve(r, 8 * MIB).unwrap();
    d.free(SIM_BASE, 2 * MIB).unwrap();
}
