//! A property: a call that fails leaves the allocator as it was, except for
//! what the documented rules (docs/allocator.md, "The allocation path" and
//! "Streams and `record_stream`"; PyTorch's `malloc`, described in
//! shared/reference/pytorch-allocator.md) let that kind of failure change.
//!
//! Random sequences on a 1 GiB simulated device, with expandable segments on
//! (the default) or off and one or two streams, mix valid calls (allocations
//! from 1 byte to 400 MiB, frees, `record_stream` onto the other stream,
//! events completing, `empty_cache`, valid memory fractions and settings
//! strings, `throw_on_cudamalloc_oom` and `garbage_collection_threshold`
//! among them) with calls that must fail. Before each failing call the test
//! captures the statistics, the snapshot, the configuration, the memory
//! fraction, the driver-call counters and the simulated device's live
//! objects and used bytes; after the error it compares them by the error's
//! kind:
//!
//! * a double free (a copy of a freed handle), a free or `record_stream` of
//!   another allocator's handle, a request of 2^60 bytes or more, a memory
//!   fraction that is NaN, infinite, negative or above 1, and a settings
//!   string that does not parse change nothing at all: every captured value
//!   is equal, the driver-call counters included;
//! * an allocation that fails with `OutOfMemory` (the device full, or the
//!   driver made to report out of memory on `malloc`/`create`) or with
//!   `Driver` (an injected failure of `malloc`, `reserve`, `create`, `map`,
//!   `set_access`) may, before failing, process completed events (step 1),
//!   collect garbage (step 3), release oversize or all cached blocks and
//!   retry (steps 5 and 6, `num_alloc_retries`, `num_sync_all_streams`), and
//!   recycle free pages of expandable segments; it counts `num_ooms` exactly
//!   once for `OutOfMemory` and not at all for `Driver` (PyTorch raises a CUDA
//!   error then, uncounted). Everything the caller holds is unchanged: the
//!   live allocations in the snapshot (address, size, requested size),
//!   `allocation`, `allocated_bytes`, the configuration and the fraction; the
//!   device's used bytes, segments, handles and mappings do not grow, nor
//!   does `reserved_bytes`;
//! * `OomRejected` (`throw_on_cudamalloc_oom`) counts one
//!   `num_oom_rejections` and no `num_ooms`. Rejected at the first device
//!   allocation it retries nothing and releases nothing (reserved bytes and
//!   the device unchanged) unless a garbage-collection threshold is set
//!   (PyTorch collects before its check); rejected at the retry after the
//!   cache was released (the first try past the memory fraction in force,
//!   the retry within it but past the configuration's fraction, as PyTorch
//!   2.15 checks both in every `alloc_block`: hostile_s59.rs) it counts one
//!   retry and may have released cached memory, as an out-of-memory failure
//!   may, the device not growing;
//! * `empty_cache` with a failing `unmap`, `release`, `free` or `unreserve`
//!   may have released part of the cache; the live allocations and
//!   `allocated_bytes` are unchanged and the device does not grow.
//!
//! After every call, valid or not, `check_consistency` must pass; every
//! injected failure is cleared after its call. At the end every allocation
//! is freed, the events complete, the cache is emptied, and the device must
//! hold no segment, handle, mapping, reserved range or used byte.
//!
//! Defect it found (fixed with it): a physical page of an expandable
//! segment whose `release` failed (in `empty_cache`, in a failed growth's
//! rollback, or while creating pages) was dropped by the allocator and leaked
//! in the driver for good, and `empty_cache` returned `Ok` all the same:
//! one 1-byte allocation freed, then `empty_cache` with one failing
//! `release`, left a 2 MiB handle on the device that no later `empty_cache`
//! gave back. Such pages are now kept (`State::unreleased`) and released
//! again by the next `empty_cache` (or full release before an out-of-memory
//! error), and `empty_cache` returns `AllocError::Driver` for the failure.

use proptest::prelude::*;
use std::sync::Arc;
use strata_alloc::driver::sim::SimDriver;
use strata_alloc::snapshot::{BlockState, SegmentSnapshot};
use strata_alloc::{
    AllocError, AllocatorConfig, CachingAllocator, DriverCalls, MemoryStats, RawAllocation,
    StreamId,
};

const MIB: u64 = 1 << 20;
const CAPACITY: u64 = 1 << 30;

/// One step of a sequence. Indices pick modulo the current list.
#[derive(Clone, Debug)]
enum Op {
    /// A valid allocation of `size` on stream `stream % streams`.
    Alloc(u64, usize),
    /// Frees live allocation `i`.
    Free(usize),
    /// Records live allocation `i` on the other stream.
    Record(usize),
    /// The device catches up: every recorded event completes.
    Complete,
    EmptyCache,
    Fraction(f64),
    Settings(&'static str),
    /// Frees again a copy of a freed handle.
    DoubleFree(usize),
    /// `record_stream` of a freed handle.
    RecordFreed(usize),
    /// Frees (or, with `true`, records) a handle of another allocator.
    Foreign(usize, bool),
    /// A request of 2^60 bytes or more.
    TooLarge(u64),
    /// An allocation while the driver's next `n` calls named `call` fail.
    Injected(&'static str, u64, u64, usize),
    /// An allocation while the next `n` memory creations report out of memory.
    InjectedOom(u64, u64, usize),
    /// `empty_cache` while the next `n` calls named `call` fail.
    EmptyCacheInjected(&'static str, u64),
    BadFraction(f64),
    BadSettings(&'static str),
}

fn size() -> impl Strategy<Value = u64> {
    prop_oneof![
        3 => 1..=512u64,
        3 => 513..=MIB,
        2 => MIB + 1..=20 * MIB,
        1 => 20 * MIB + 1..=400 * MIB,
    ]
}

fn op() -> impl Strategy<Value = Op> {
    let idx = 0..64usize;
    prop_oneof![
        12 => (size(), 0..2usize).prop_map(|(s, t)| Op::Alloc(s, t)),
        8 => idx.clone().prop_map(Op::Free),
        3 => idx.clone().prop_map(Op::Record),
        2 => Just(Op::Complete),
        1 => Just(Op::EmptyCache),
        1 => prop_oneof![Just(1.0), Just(0.5), Just(0.25), Just(0.0)].prop_map(Op::Fraction),
        1 => prop::sample::select(vec![
            "max_split_size_mb:40",
            "garbage_collection_threshold:0.6",
            "throw_on_cudamalloc_oom:True",
            "throw_on_cudamalloc_oom:False",
            "roundup_power2_divisions:4",
            "",
        ])
        .prop_map(Op::Settings),
        2 => idx.clone().prop_map(Op::DoubleFree),
        1 => idx.clone().prop_map(Op::RecordFreed),
        1 => (idx.clone(), any::<bool>()).prop_map(|(i, r)| Op::Foreign(i, r)),
        1 => (1u64 << 60..=u64::MAX).prop_map(Op::TooLarge),
        3 => (
            prop::sample::select(vec!["malloc", "reserve", "create", "map", "set_access"]),
            1..4u64,
            size(),
            0..2usize
        )
            .prop_map(|(c, n, s, t)| Op::Injected(c, n, s, t)),
        2 => (1..4u64, size(), 0..2usize).prop_map(|(n, s, t)| Op::InjectedOom(n, s, t)),
        1 => (
            prop::sample::select(vec!["unmap", "release", "free", "unreserve"]),
            1..3u64
        )
            .prop_map(|(c, n)| Op::EmptyCacheInjected(c, n)),
        1 => prop::sample::select(vec![f64::NAN, -0.5, 1.5, f64::INFINITY, f64::NEG_INFINITY, -0.0001])
            .prop_map(Op::BadFraction),
        1 => prop::sample::select(vec![
            "no_such_key:1",
            "max_split_size_mb:abc",
            "garbage_collection_threshold:1.5",
            "roundup_power2_divisions:3",
            "expandable_segments:maybe",
            "max_split_size_mb",
            ",",
            "per_process_memory_fraction:2",
        ])
        .prop_map(Op::BadSettings),
    ]
}

/// What a call's caller can observe.
#[derive(Clone, Debug, PartialEq)]
struct Observed {
    stats: MemoryStats,
    snapshot: Vec<SegmentSnapshot>,
    config: AllocatorConfig,
    fraction_bits: u64,
    reserved: u64,
    allocated: u64,
    calls: DriverCalls,
    used: u64,
    live: (usize, usize, usize, usize),
}

fn observe(a: &CachingAllocator, d: &SimDriver) -> Observed {
    Observed {
        stats: a.memory_stats(),
        snapshot: a.snapshot(),
        config: a.config(),
        fraction_bits: a.memory_fraction().to_bits(),
        reserved: a.memory_reserved(),
        allocated: a.memory_allocated(),
        calls: a.driver_calls(),
        used: d.used_bytes(),
        live: d.live_objects(),
    }
}

/// The live allocations a snapshot shows: (address, size, requested size).
fn live_blocks(snap: &[SegmentSnapshot]) -> Vec<(u64, u64, u64)> {
    let mut v: Vec<_> = snap
        .iter()
        .flat_map(|s| s.blocks.iter())
        .filter(|b| b.state == BlockState::ActiveAllocated)
        .map(|b| (b.address, b.size, b.requested_size))
        .collect();
    v.sort_unstable();
    v
}

/// Nothing observable changed.
fn unchanged(what: &str, before: &Observed, after: &Observed) -> Result<(), TestCaseError> {
    prop_assert_eq!(before, after, "{} changed state", what);
    Ok(())
}

/// What a failed call may never change: the caller's allocations, the
/// configuration, and the device may not grow.
fn caller_state_kept(what: &str, b: &Observed, a: &Observed) -> Result<(), TestCaseError> {
    prop_assert_eq!(
        live_blocks(&b.snapshot),
        live_blocks(&a.snapshot),
        "{}: live allocations changed",
        what
    );
    prop_assert_eq!(b.allocated, a.allocated, "{}: memory_allocated", what);
    prop_assert_eq!(
        b.stats.allocation,
        a.stats.allocation,
        "{}: allocation",
        what
    );
    prop_assert_eq!(
        b.stats.allocated_bytes.all().current,
        a.stats.allocated_bytes.all().current,
        "{}: allocated_bytes",
        what
    );
    prop_assert_eq!(&b.config, &a.config, "{}: config", what);
    prop_assert_eq!(b.fraction_bits, a.fraction_bits, "{}: fraction", what);
    prop_assert!(
        a.used <= b.used,
        "{}: device grew {} -> {}",
        what,
        b.used,
        a.used
    );
    prop_assert!(
        a.live.0 <= b.live.0 && a.live.1 <= b.live.1 && a.live.2 <= b.live.2,
        "{}: device objects grew {:?} -> {:?}",
        what,
        b.live,
        a.live
    );
    prop_assert!(
        a.reserved <= b.reserved,
        "{}: reserved grew {} -> {}",
        what,
        b.reserved,
        a.reserved
    );
    prop_assert_eq!(
        a.stats.num_oom_rejections,
        b.stats.num_oom_rejections,
        "{}: num_oom_rejections",
        what
    );
    Ok(())
}

/// Checks a failed allocation against the rules for its error.
fn check_failed_alloc(
    what: &str,
    err: &AllocError,
    b: &Observed,
    a: &Observed,
) -> Result<(), TestCaseError> {
    match err {
        AllocError::OutOfMemory(_) => {
            let mut ka = a.clone();
            ka.stats.num_oom_rejections = b.stats.num_oom_rejections;
            caller_state_kept(what, b, &ka)?;
            prop_assert_eq!(a.stats.num_ooms, b.stats.num_ooms + 1, "{}: num_ooms", what);
            prop_assert!(a.stats.num_alloc_retries <= b.stats.num_alloc_retries + 1);
        }
        AllocError::Driver { .. } => {
            caller_state_kept(what, b, a)?;
            prop_assert_eq!(a.stats.num_ooms, b.stats.num_ooms, "{}: num_ooms", what);
            prop_assert!(a.stats.num_alloc_retries <= b.stats.num_alloc_retries + 1);
        }
        AllocError::OomRejected { .. } => {
            let mut ka = a.clone();
            ka.stats.num_oom_rejections -= 1;
            caller_state_kept(what, b, &ka)?;
            prop_assert_eq!(
                a.stats.num_oom_rejections,
                b.stats.num_oom_rejections + 1,
                "{}: num_oom_rejections",
                what
            );
            prop_assert_eq!(a.stats.num_ooms, b.stats.num_ooms, "{}: num_ooms", what);
            let retried = a.stats.num_alloc_retries != b.stats.num_alloc_retries;
            prop_assert!(
                a.stats.num_alloc_retries <= b.stats.num_alloc_retries + 1,
                "{}: retried more than once",
                what
            );
            if retried {
                prop_assert!(a.reserved <= b.reserved, "{}: reserved grew", what);
                prop_assert!(a.used <= b.used, "{}: the device grew", what);
            } else if b.config.garbage_collection_threshold.is_none() {
                prop_assert_eq!(a.reserved, b.reserved, "{}: released memory", what);
                prop_assert_eq!(a.used, b.used, "{}: released memory", what);
                prop_assert_eq!(a.live, b.live, "{}: released memory", what);
            }
        }
        other => prop_assert!(false, "{}: unexpected error {:?}", what, other),
    }
    Ok(())
}

struct Run {
    d: Arc<SimDriver>,
    a: Arc<CachingAllocator>,
    streams: Vec<StreamId>,
    live: Vec<RawAllocation>,
    freed: Vec<RawAllocation>,
    foreign: Vec<RawAllocation>,
}

impl Run {
    fn consistent(&self, what: &str) -> Result<(), TestCaseError> {
        if let Err(e) = self.a.check_consistency() {
            prop_assert!(false, "{}: inconsistent: {}", what, e);
        }
        Ok(())
    }

    /// An allocation that may succeed or fail; a failure is checked.
    fn alloc(&mut self, what: &str, size: u64, t: usize) -> Result<(), TestCaseError> {
        let stream = self.streams[t % self.streams.len()];
        let before = observe(&self.a, &self.d);
        match self.a.allocate_raw(size, stream) {
            Ok(r) => {
                prop_assert_eq!(r.size(), size);
                self.live.push(r);
            }
            Err(e) => {
                self.clear_injections();
                check_failed_alloc(what, &e, &before, &observe(&self.a, &self.d))?;
            }
        }
        Ok(())
    }

    fn clear_injections(&self) {
        self.d.inject_out_of_memory(0);
        for c in [
            "malloc",
            "reserve",
            "create",
            "map",
            "set_access",
            "unmap",
            "release",
            "free",
            "unreserve",
        ] {
            self.d.inject_failure(c, 0);
        }
    }

    fn step(&mut self, op: &Op) -> Result<(), TestCaseError> {
        let what = format!("{op:?}");
        let what = what.as_str();
        match *op {
            Op::Alloc(size, t) => self.alloc(what, size, t)?,
            Op::Free(i) if !self.live.is_empty() => {
                let r = self.live.swap_remove(i % self.live.len());
                if let Err(e) = self.a.free_raw(r) {
                    prop_assert!(false, "{}: a valid free failed: {}", what, e);
                }
                self.freed.push(r);
            }
            Op::Record(i) if !self.live.is_empty() && self.streams.len() > 1 => {
                let r = self.live[i % self.live.len()];
                let other = self.streams[1];
                if let Err(e) = self.a.record_stream(&r, other) {
                    prop_assert!(false, "{}: a valid record_stream failed: {}", what, e);
                }
            }
            Op::Complete => self.d.complete_all_events(),
            Op::EmptyCache => {
                if let Err(e) = self.a.empty_cache() {
                    prop_assert!(false, "{}: failed: {}", what, e);
                }
            }
            Op::Fraction(f) => {
                if let Err(e) = self.a.set_memory_fraction(f) {
                    prop_assert!(false, "{}: failed: {}", what, e);
                }
            }
            Op::Settings(s) => {
                if let Err(e) = self.a.set_allocator_settings(s) {
                    prop_assert!(false, "{}: failed: {}", what, e);
                }
            }
            Op::DoubleFree(i) if !self.freed.is_empty() => {
                let r = self.freed[i % self.freed.len()];
                let before = observe(&self.a, &self.d);
                let e = self.a.free_raw(r);
                prop_assert!(
                    matches!(e, Err(AllocError::InvalidFree { .. })),
                    "{}: {:?}",
                    what,
                    e
                );
                unchanged(what, &before, &observe(&self.a, &self.d))?;
            }
            Op::RecordFreed(i) if !self.freed.is_empty() => {
                let r = self.freed[i % self.freed.len()];
                let before = observe(&self.a, &self.d);
                let e = self.a.record_stream(&r, StreamId(99));
                prop_assert!(
                    matches!(e, Err(AllocError::InvalidFree { .. })),
                    "{}: {:?}",
                    what,
                    e
                );
                unchanged(what, &before, &observe(&self.a, &self.d))?;
            }
            Op::Foreign(i, record) => {
                let r = self.foreign[i % self.foreign.len()];
                let before = observe(&self.a, &self.d);
                let e = if record {
                    self.a.record_stream(&r, StreamId(99))
                } else {
                    self.a.free_raw(r)
                };
                prop_assert!(
                    matches!(e, Err(AllocError::InvalidFree { .. })),
                    "{}: {:?}",
                    what,
                    e
                );
                unchanged(what, &before, &observe(&self.a, &self.d))?;
            }
            Op::TooLarge(size) => {
                let before = observe(&self.a, &self.d);
                let e = self.a.allocate_raw(size, self.streams[0]);
                prop_assert!(
                    matches!(e, Err(AllocError::TooLarge { requested, .. }) if requested == size),
                    "{}: {:?}",
                    what,
                    e
                );
                unchanged(what, &before, &observe(&self.a, &self.d))?;
            }
            Op::Injected(call, n, size, t) => {
                self.d.inject_failure(call, n);
                self.alloc(what, size, t)?;
                self.clear_injections();
            }
            Op::InjectedOom(n, size, t) => {
                self.d.inject_out_of_memory(n);
                self.alloc(what, size, t)?;
                self.clear_injections();
            }
            Op::EmptyCacheInjected(call, n) => {
                self.d.inject_failure(call, n);
                let before = observe(&self.a, &self.d);
                let r = self.a.empty_cache();
                self.clear_injections();
                if let Err(e) = r {
                    prop_assert!(matches!(e, AllocError::Driver { .. }), "{}: {:?}", what, e);
                    let after = observe(&self.a, &self.d);
                    prop_assert_eq!(
                        live_blocks(&before.snapshot),
                        live_blocks(&after.snapshot),
                        "{}: live allocations changed",
                        what
                    );
                    prop_assert_eq!(before.allocated, after.allocated, "{}", what);
                    prop_assert_eq!(&before.config, &after.config, "{}", what);
                    prop_assert!(after.used <= before.used, "{}: device grew", what);
                    prop_assert_eq!(after.stats.num_ooms, before.stats.num_ooms);
                }
            }
            Op::BadFraction(f) => {
                let before = observe(&self.a, &self.d);
                let e = self.a.set_memory_fraction(f);
                prop_assert!(matches!(e, Err(AllocError::Config(_))), "{}: {:?}", what, e);
                unchanged(what, &before, &observe(&self.a, &self.d))?;
            }
            Op::BadSettings(s) => {
                let before = observe(&self.a, &self.d);
                let e = self.a.set_allocator_settings(s);
                prop_assert!(matches!(e, Err(AllocError::Config(_))), "{}: {:?}", what, e);
                unchanged(what, &before, &observe(&self.a, &self.d))?;
            }
            _ => {}
        }
        self.consistent(what)
    }

    /// Frees everything and empties the cache: the device holds nothing.
    fn finish(mut self) -> Result<(), TestCaseError> {
        // The limits set on the way no longer matter.
        self.a.set_memory_fraction(1.0).unwrap();
        for r in std::mem::take(&mut self.live) {
            if let Err(e) = self.a.free_raw(r) {
                prop_assert!(false, "final free failed: {}", e);
            }
        }
        self.d.complete_all_events();
        if let Err(e) = self.a.empty_cache() {
            prop_assert!(false, "final empty_cache failed: {}", e);
        }
        self.consistent("final empty_cache")?;
        prop_assert_eq!(self.a.memory_allocated(), 0);
        prop_assert_eq!(self.a.memory_reserved(), 0);
        prop_assert_eq!(self.d.used_bytes(), 0, "device memory leaked");
        prop_assert_eq!(self.d.live_objects(), (0, 0, 0, 0), "device objects leaked");
        Ok(())
    }
}

fn run(expandable: bool, two_streams: bool, ops: &[Op]) -> Result<(), TestCaseError> {
    let conf = if expandable {
        "expandable_segments:True"
    } else {
        "expandable_segments:False"
    };
    let d = Arc::new(SimDriver::new(CAPACITY, 2 * MIB));
    let a = CachingAllocator::new(d.clone(), AllocatorConfig::parse(conf).unwrap());
    prop_assert_eq!(a.expandable_segments(), expandable);
    // Another allocator on another device, whose handles this one must
    // refuse (their block indices, generations and even addresses may
    // coincide with live ones here: both simulated devices start at the
    // same address).
    let other = CachingAllocator::new(
        Arc::new(SimDriver::new(CAPACITY, 2 * MIB)),
        AllocatorConfig::parse(conf).unwrap(),
    );
    let foreign: Vec<RawAllocation> = [1000, 4 * MIB, 30 * MIB]
        .into_iter()
        .map(|s| other.allocate_raw(s, StreamId::DEFAULT).unwrap())
        .collect();
    let streams = if two_streams {
        vec![StreamId::DEFAULT, StreamId(7)]
    } else {
        vec![StreamId::DEFAULT]
    };
    let mut r = Run {
        d,
        a,
        streams,
        live: Vec::new(),
        freed: Vec::new(),
        foreign,
    };
    for op in ops {
        r.step(op)?;
    }
    r.finish()
}

#[test]
fn a_page_whose_release_failed_is_released_by_the_next_empty_cache() {
    let d = Arc::new(SimDriver::new(CAPACITY, 2 * MIB));
    let a = CachingAllocator::new(d.clone(), AllocatorConfig::default());
    let x = a.allocate_raw(1, StreamId::DEFAULT).unwrap();
    a.free_raw(x).unwrap();
    d.inject_failure("release", 1);
    assert!(matches!(a.empty_cache(), Err(AllocError::Driver { .. })));
    a.check_consistency().unwrap();
    a.empty_cache().unwrap();
    assert_eq!(d.used_bytes(), 0);
    assert_eq!(d.live_objects(), (0, 0, 0, 0));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(crate::common::cases(64)))]

    /// Random sequences of valid and failing calls: every failure leaves
    /// the allocator as the rules for its kind require, and everything
    /// freed and emptied leaves the device empty.
    #[test]
    fn failed_calls_change_nothing_they_may_not(
        expandable in any::<bool>(),
        two_streams in any::<bool>(),
        ops in prop::collection::vec(op(), 1..120),
    ) {
        run(expandable, two_streams, &ops)?;
    }
}
