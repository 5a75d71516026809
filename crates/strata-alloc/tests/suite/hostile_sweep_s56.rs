//! Session 56's sweep of hostile inputs to strata-alloc's public API (after
//! `hostile_sweep_s55.rs`): stale handles of memory allocated while caching
//! was off, drivers and pinned backends that hand out a null address or
//! refuse to free, events that cannot be created, recorded, queried or
//! waited for (no earlier test made an event call fail), devices too small
//! for any page, and threads and callbacks re-entering the uncached path.
//!
//! Defects these tests found (fixed with them):
//!
//! * A copy of the handle of an allocation made while caching was off
//!   (`RawAllocation` is `Copy`), kept after its free, freed whatever the
//!   driver later put at the same address with the same size: the uncached
//!   allocations were looked up by address and size only. On the host
//!   driver (and CUDA) a freed address comes back at once, so a stale
//!   `free_raw` returned `Ok` and gave another live allocation back to the
//!   driver, whose owner's own free then failed with `InvalidFree` (and
//!   whose memory was free for anyone to take). Each uncached allocation now
//!   carries a serial number in its handle, as a cached one carries its
//!   block's generation; the stale handle is `InvalidFree` and changes
//!   nothing.
//! * A driver whose `malloc` (cached or uncached) or `reserve` returned
//!   address 0 had the range taken: a live allocation at address 0, which
//!   `RawAllocation::ptr` documents as the empty handle of a zero-byte
//!   request (and which `allocation_origin(0)` never finds). CUDA never hands
//!   out a null address (PyTorch asserts `ptr != nullptr` after its
//!   `cudaMalloc`), the pinned allocator already refused a null block, and
//!   the device allocator refused wrapping and overlapping ranges since
//!   sessions 37-38: a null range is now the driver's typed error, given
//!   back, with nothing changed.
//! * The pinned allocator's `empty_cache`, when the backend refused to free
//!   a block, kept the block cached but counted it as freed and allocated
//!   again: `allocations.allocated` and `allocations.freed` (and the bytes')
//!   each grew by the block, as if a free and a new pin had happened. The
//!   statistics are now restored exactly.
//!
//! Examined and found correct (pinned below): every event call failing on
//! the device allocator and the pinned allocator (a free whose event cannot
//! be made or recorded waits for its stream instead and is reused at once;
//! if that fails too the block is withheld, as documented, with a typed
//! error and the books balanced; a failed query defers the reuse to a later
//! allocation; a failed wait in `empty_cache` or in the release before an
//! out-of-memory error is a typed driver error that releases nothing and
//! counts only the attempt in `num_sync_all_streams`), devices of 0, 1 and
//! 512 bytes and granularities the expandable segments cannot use, and an
//! out-of-memory observer that turns caching off and allocates.
//!
//! Every refusal is checked for its typed error and for the allocator's
//! state (statistics, snapshot, configuration, fraction) and the device's
//! books staying as they were; the statistics equal a recount of the
//! snapshot after each step (`common::recount`).

use super::common::{recount, sim_device, stat, state, stats_but_ooms};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use strata_alloc::driver::host::HostDriver;
use strata_alloc::driver::sim::SimDriver;
use strata_alloc::pinned::{PinnedAllocator, PinnedError, SimPinnedBackend};
use strata_alloc::snapshot::BlockState;
use strata_alloc::{
    AllocError, AllocatorConfig, CachingAllocator, DriverError, MemoryStats, RawAllocation,
    StreamId,
};

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
const S0: StreamId = StreamId::DEFAULT;
const S7: StreamId = StreamId(7);

/// The blocks of every segment: address, size and state.
fn blocks(a: &CachingAllocator) -> Vec<(u64, u64, BlockState)> {
    a.snapshot()
        .iter()
        .flat_map(|s| s.blocks.iter().map(|b| (b.address, b.size, b.state)))
        .collect()
}

/// A refusal of a handle: `InvalidFree` naming its address.
fn invalid_free(what: &str, r: Result<(), AllocError>, ptr: u64) {
    match r {
        Err(AllocError::InvalidFree { ptr: p, .. }) => assert_eq!(p, ptr, "{what}"),
        other => panic!("{what}: expected InvalidFree, got {other:?}"),
    }
}

// ----- stale handles of uncached memory ---------------------------------------

/// Caching off, and a driver that puts two allocations of the same size at
/// the same address (the second after the first was freed), as the host
/// driver and CUDA do: the first handle, kept after its free, is refused
/// (`free_raw` and `record_stream`) and leaves the second allocation live;
/// its owner frees it once; then both handles are stale.
#[test]
fn a_stale_uncached_handle_never_frees_a_later_allocation_at_its_address() {
    const AT: u64 = 0x7100_0000_0000;
    for conf in ["expandable_segments:False", "expandable_segments:True"] {
        let d =
            Arc::new(SimDriver::new(GIB, 2 * MIB).with_malloc_addresses([(AT, 4096), (AT, 4096)]));
        let a = CachingAllocator::new(d.clone(), AllocatorConfig::parse(conf).unwrap());
        a.set_caching_enabled(false);
        let first = a.allocate_raw(4096, S0).unwrap();
        a.free_raw(first).unwrap();
        let second = a.allocate_raw(4096, S0).unwrap();
        assert_eq!(
            (first.ptr(), second.ptr()),
            (AT, AT),
            "{conf}: the same address"
        );
        assert_eq!(d.used_bytes(), 4096, "{conf}");

        let before = (state(&a), d.used_bytes(), d.live_objects());
        invalid_free(&format!("{conf}: stale free"), a.free_raw(first), AT);
        invalid_free(
            &format!("{conf}: stale record_stream"),
            a.record_stream(&first, S7),
            AT,
        );
        assert_eq!(
            (state(&a), d.used_bytes(), d.live_objects()),
            before,
            "{conf}: the refusals changed nothing"
        );
        recount(&a, conf);

        // The live allocation is its owner's to free, once.
        a.record_stream(&second, S7).unwrap();
        a.free_raw(second).unwrap();
        assert_eq!(d.used_bytes(), 0, "{conf}");
        invalid_free(&format!("{conf}: double free"), a.free_raw(second), AT);
        invalid_free(&format!("{conf}: first again"), a.free_raw(first), AT);
        // Turning caching back on leaves the stale handles stale.
        a.set_caching_enabled(true);
        let cached = a.allocate_raw(4096, S0).unwrap();
        invalid_free(&format!("{conf}: cached on"), a.free_raw(first), AT);
        a.free_raw(cached).unwrap();
        a.empty_cache().unwrap();
        recount(&a, conf);
        assert_eq!(
            (d.used_bytes(), d.live_objects()),
            (0, (0, 0, 0, 0)),
            "{conf}"
        );
    }
}

/// Threads allocating with caching off on the host driver (real memory,
/// whose freed addresses the system's allocator hands out again at once),
/// each keeping a copy of the handle it freed one round before and freeing
/// that copy again: every stale free is `InvalidFree`, and no thread's live
/// buffer is freed or overwritten by another's stale free (each fills its
/// buffer with its own byte and checks it after the others' attempts).
#[test]
fn threads_freeing_stale_uncached_handles_never_free_another_threads_memory() {
    const THREADS: usize = 4;
    const ROUNDS: usize = 300;
    const SIZE: u64 = 4096;
    let a = CachingAllocator::new(Arc::new(HostDriver::new(None)), AllocatorConfig::default());
    a.set_caching_enabled(false);
    let barrier = Arc::new(Barrier::new(THREADS));
    let stale_refused = Arc::new(AtomicU64::new(0));
    std::thread::scope(|scope| {
        for t in 0..THREADS {
            let (a, barrier, refused) = (&a, Arc::clone(&barrier), Arc::clone(&stale_refused));
            scope.spawn(move || {
                let byte = 0x10 + t as u8;
                let mut stale: Option<RawAllocation> = None;
                barrier.wait();
                for round in 0..ROUNDS {
                    let live = a.allocate_raw(SIZE, S0).unwrap();
                    let p = live.ptr() as usize as *mut u8;
                    // SAFETY: `live` is an allocation of SIZE bytes of host
                    // memory, made with caching off (its own `malloc`), that
                    // only this thread holds until its free below.
                    unsafe { std::ptr::write_bytes(p, byte, SIZE as usize) };
                    if let Some(old) = stale {
                        // Freed one round ago: its address may be `live`'s,
                        // or another thread's buffer now.
                        match a.free_raw(old) {
                            Err(AllocError::InvalidFree { .. }) => {
                                refused.fetch_add(1, Ordering::Relaxed);
                            }
                            r => panic!("thread {t} round {round}: stale free gave {r:?}"),
                        }
                    }
                    std::thread::yield_now();
                    // SAFETY: as above; `live` is still held by this thread.
                    let kept = unsafe { std::slice::from_raw_parts(p, SIZE as usize) };
                    assert!(
                        kept.iter().all(|&b| b == byte),
                        "thread {t} round {round}: another thread's stale free let its buffer go"
                    );
                    a.free_raw(live).unwrap();
                    stale = Some(live);
                }
            });
        }
    });
    assert_eq!(
        stale_refused.load(Ordering::Relaxed),
        (THREADS * (ROUNDS - 1)) as u64
    );
    recount(&a, "threads");
    assert_eq!(stat(&a, "allocation.all.current"), 0);
}

/// An out-of-memory observer that re-enters the allocator: it turns caching
/// off and allocates (the memory fraction does not apply to uncached
/// memory) and hands the handle out. The handle works once; its copy is
/// refused afterwards, also once caching is back on.
#[test]
fn an_oom_observer_may_allocate_uncached_memory() {
    let (d, a) = sim_device("expandable_segments:False", GIB);
    a.set_memory_fraction(0.125).unwrap();
    let got: Arc<Mutex<Vec<RawAllocation>>> = Arc::default();
    let (weak, g) = (Arc::downgrade(&a), Arc::clone(&got));
    a.on_oom(move |oom, _| {
        let a = weak.upgrade().unwrap();
        assert_eq!(oom.requested, 200 * MIB);
        a.set_caching_enabled(false);
        g.lock()
            .unwrap()
            .push(a.allocate_raw(200 * MIB, S0).unwrap());
        a.set_caching_enabled(true);
    });
    let e = a.allocate_raw(200 * MIB, S0).unwrap_err();
    assert!(matches!(e, AllocError::OutOfMemory(_)), "{e}");
    let r = got.lock().unwrap()[0];
    assert_eq!(
        d.used_bytes(),
        200 * MIB,
        "the observer's uncached allocation"
    );
    assert_eq!(a.memory_reserved(), 0, "outside the statistics");
    a.free_raw(r).unwrap();
    assert_eq!(d.used_bytes(), 0);
    invalid_free("the copy", a.free_raw(r), r.ptr());
    recount(&a, "observer");
}

// ----- drivers handing out a null address -------------------------------------

/// The history's entries but the `snapshot` ones (which reading the state
/// adds).
fn traced(a: &CachingAllocator) -> Vec<strata_alloc::history::TraceEntry> {
    a.history()
        .into_iter()
        .filter(|e| e.action != strata_alloc::history::Action::Snapshot)
        .collect()
}

mod shifted {
    use parking_lot::Mutex;
    use strata_alloc::driver::sim::SimDriver;
    use strata_alloc::driver::{EventHandle, PhysHandle, VirtualMemory};
    use strata_alloc::{Device, DevicePtr, Driver, DriverError, MemInfo, StreamEvents, StreamId};

    /// A simulated device whose addresses are moved down by the first
    /// address it hands out (from `malloc` or `reserve`), so that its first
    /// range starts at address 0: a driver's bug, as no CUDA call returns a
    /// null address.
    pub struct Shifted {
        pub sim: SimDriver,
        shift: Mutex<Option<u64>>,
    }

    impl Shifted {
        pub fn new(sim: SimDriver) -> Shifted {
            Shifted {
                sim,
                shift: Mutex::new(None),
            }
        }

        fn out(&self, p: u64) -> u64 {
            p - *self.shift.lock().get_or_insert(p)
        }

        fn inp(&self, p: u64) -> u64 {
            p + self.shift.lock().unwrap_or(0)
        }

        fn vm(&self) -> &dyn VirtualMemory {
            self.sim
                .virtual_memory()
                .expect("the simulator has virtual memory")
        }
    }

    impl StreamEvents for Shifted {
        fn create_event(&self) -> Result<EventHandle, DriverError> {
            self.sim.create_event()
        }
        fn destroy_event(&self, e: EventHandle) -> Result<(), DriverError> {
            self.sim.destroy_event(e)
        }
        fn record_event(&self, e: EventHandle, s: StreamId) -> Result<(), DriverError> {
            self.sim.record_event(e, s)
        }
        fn query_event(&self, e: EventHandle) -> Result<bool, DriverError> {
            self.sim.query_event(e)
        }
        fn synchronize_event(&self, e: EventHandle) -> Result<(), DriverError> {
            self.sim.synchronize_event(e)
        }
        fn synchronize_stream(&self, s: StreamId) -> Result<(), DriverError> {
            self.sim.synchronize_stream(s)
        }
    }

    impl VirtualMemory for Shifted {
        fn granularity(&self) -> u64 {
            self.vm().granularity()
        }
        fn reserve(&self, size: u64) -> Result<DevicePtr, DriverError> {
            let p = self.vm().reserve(size)?;
            Ok(self.out(p))
        }
        fn unreserve(&self, p: DevicePtr, size: u64) -> Result<(), DriverError> {
            self.vm().unreserve(self.inp(p), size)
        }
        fn create(&self, size: u64) -> Result<PhysHandle, DriverError> {
            self.vm().create(size)
        }
        fn release(&self, h: PhysHandle) -> Result<(), DriverError> {
            self.vm().release(h)
        }
        fn map(&self, p: DevicePtr, size: u64, h: PhysHandle) -> Result<(), DriverError> {
            self.vm().map(self.inp(p), size, h)
        }
        fn set_access(&self, p: DevicePtr, size: u64) -> Result<(), DriverError> {
            self.vm().set_access(self.inp(p), size)
        }
        fn unmap(&self, p: DevicePtr, size: u64) -> Result<(), DriverError> {
            self.vm().unmap(self.inp(p), size)
        }
    }

    impl Driver for Shifted {
        fn device(&self) -> Device {
            self.sim.device()
        }
        fn name(&self) -> String {
            self.sim.name()
        }
        fn total_memory(&self) -> u64 {
            self.sim.total_memory()
        }
        fn mem_get_info(&self) -> Result<MemInfo, DriverError> {
            self.sim.mem_get_info()
        }
        fn malloc(&self, size: u64) -> Result<DevicePtr, DriverError> {
            let p = self.sim.malloc(size)?;
            Ok(self.out(p))
        }
        fn free(&self, p: DevicePtr, size: u64) -> Result<(), DriverError> {
            self.sim.free(self.inp(p), size)
        }
        fn virtual_memory(&self) -> Option<&dyn VirtualMemory> {
            Some(self)
        }
    }
}

/// A driver whose first range (a segment, an expandable segment's
/// reservation, or an uncached allocation) is at address 0: the request
/// fails with the driver's typed error naming the call and the null
/// address, the range is given back, nothing is counted (no `num_ooms`, no
/// device allocation in the statistics), and the next request gets a range
/// of its own.
#[test]
fn a_null_address_from_the_driver_is_refused_and_given_back() {
    for (conf, caching, call) in [
        ("expandable_segments:False", true, "malloc"),
        ("expandable_segments:True", true, "reserve"),
        ("expandable_segments:False", false, "malloc"),
        ("expandable_segments:True", false, "malloc"),
    ] {
        let what = format!("{conf}, caching {caching}");
        let d = Arc::new(shifted::Shifted::new(SimDriver::new(GIB, 2 * MIB)));
        let a = CachingAllocator::new(d.clone(), AllocatorConfig::parse(conf).unwrap());
        a.set_caching_enabled(caching);
        a.record_history(Some(100));
        let before = (state(&a), traced(&a));
        let e = a.allocate_raw(1000, S0).unwrap_err();
        match &e {
            AllocError::Driver {
                source: DriverError::Call { call: c, message },
                ..
            } => {
                assert_eq!(*c, call, "{what}");
                assert!(message.contains("null address"), "{what}: {message}");
            }
            other => panic!("{what}: {other:?}"),
        }
        assert!(!e.is_out_of_memory(), "{what}");
        assert_eq!((state(&a), traced(&a)), before, "{what}: nothing changed");
        assert_eq!(d.sim.used_bytes(), 0, "{what}: given back");
        assert_eq!(d.sim.live_objects(), (0, 0, 0, 0), "{what}: given back");
        recount(&a, &what);

        // The next range is not at 0.
        let x = a.allocate_raw(1000, S0).unwrap();
        assert_ne!(x.ptr(), 0, "{what}");
        a.free_raw(x).unwrap();
        a.empty_cache().unwrap();
        recount(&a, &what);
        assert_eq!(d.sim.used_bytes(), 0, "{what}");
    }
}

// ----- event failures -----------------------------------------------------------

/// The statistics with the counter that a failed wait for every event
/// moves by design (PyTorch counts `num_sync_all_streams` on entry to
/// `synchronize_and_free_events`) zeroed.
fn stats_but_syncs(a: &CachingAllocator) -> MemoryStats {
    let mut s = a.memory_stats();
    s.num_sync_all_streams = 0;
    s
}

/// A block used on stream 7 and freed while its event cannot be made or
/// recorded: the allocator waits for stream 7 instead, and the block is
/// free at once (reused at the same address by the next request). When
/// waiting fails too, the free returns the driver's typed error and the
/// block is withheld (documented: it may still be in use on stream 7):
/// `allocation` and `allocated_bytes` dropped, the block still active and
/// `active_pending_free`, its handle refused from then on, `empty_cache`
/// leaving it, and the statistics equal to a recount throughout.
#[test]
fn a_free_whose_event_fails_waits_for_the_stream_or_withholds_the_block() {
    for conf in ["expandable_segments:False", "expandable_segments:True"] {
        let (d, a) = sim_device(conf, GIB);
        for failing in ["event_record", "event_create"] {
            let x = a.allocate_raw(MIB, S0).unwrap();
            a.record_stream(&x, S7).unwrap();
            d.take_synchronized();
            d.inject_failure(failing, 1);
            a.free_raw(x).unwrap();
            assert_eq!(d.take_synchronized(), [S7], "{conf}, {failing}");
            assert!(
                blocks(&a).iter().all(|b| b.2 == BlockState::Inactive),
                "{conf}, {failing}: free at once"
            );
            recount(&a, conf);
            let y = a.allocate_raw(MIB, S0).unwrap();
            assert_eq!(y.ptr(), x.ptr(), "{conf}, {failing}: reused");
            a.free_raw(y).unwrap();
        }

        let x = a.allocate_raw(MIB, S0).unwrap();
        a.record_stream(&x, S7).unwrap();
        let allocation = stat(&a, "allocation.all.current");
        d.inject_failure("event_record", 1);
        d.inject_failure("stream_synchronize", 1);
        match a.free_raw(x) {
            Err(AllocError::Driver {
                source: DriverError::Call { call, .. },
                ..
            }) => assert_eq!(call, "event_record", "{conf}"),
            other => panic!("{conf}: {other:?}"),
        }
        assert_eq!(stat(&a, "allocation.all.current"), allocation - 1, "{conf}");
        assert_eq!(stat(&a, "active.all.current"), 1, "{conf}: withheld");
        assert!(
            blocks(&a).contains(&(x.ptr(), MIB, BlockState::ActivePendingFree)),
            "{conf}: {:?}",
            blocks(&a)
        );
        recount(&a, conf);
        let before = state(&a);
        invalid_free(&format!("{conf}: freed again"), a.free_raw(x), x.ptr());
        assert_eq!(state(&a), before, "{conf}");
        a.empty_cache().unwrap();
        assert!(
            blocks(&a).contains(&(x.ptr(), MIB, BlockState::ActivePendingFree)),
            "{conf}: empty_cache keeps the withheld block"
        );
        recount(&a, conf);
        // The allocator goes on working around it.
        let y = a.allocate_raw(MIB, S0).unwrap();
        assert_ne!(y.ptr(), x.ptr(), "{conf}");
        a.free_raw(y).unwrap();
        recount(&a, conf);
    }
}

/// A free waiting on stream 7 whose event has completed: a query that fails
/// leaves it waiting (the allocation that made the query takes other
/// memory), and the next allocation's query reclaims it. A wait that fails
/// in `empty_cache` is the driver's typed error: nothing is released and
/// nothing changes but `num_sync_all_streams`; the next `empty_cache`
/// releases everything. A wait that fails in the release before an
/// out-of-memory error is the driver's error too, not an out-of-memory
/// error (no `num_ooms`, no observer).
#[test]
fn failed_event_queries_and_waits_release_nothing_and_say_so() {
    for conf in ["expandable_segments:False", "expandable_segments:True"] {
        let (d, a) = sim_device(conf, GIB);
        let oom_calls = Arc::new(AtomicU64::new(0));
        let c = Arc::clone(&oom_calls);
        a.on_oom(move |_, _| {
            c.fetch_add(1, Ordering::SeqCst);
        });
        let keep = a.allocate_raw(3 * MIB, S0).unwrap();
        let y = a.allocate_raw(3 * MIB, S0).unwrap();
        a.record_stream(&y, S7).unwrap();
        a.free_raw(y).unwrap();
        d.complete_all_events();
        d.inject_failure("event_query", 1);
        let z = a.allocate_raw(3 * MIB, S0).unwrap();
        assert_ne!(
            z.ptr(),
            y.ptr(),
            "{conf}: the query failed, the block waits"
        );
        assert!(
            blocks(&a).contains(&(y.ptr(), 3 * MIB, BlockState::ActivePendingFree)),
            "{conf}"
        );
        recount(&a, conf);
        let w = a.allocate_raw(512, S0).unwrap();
        assert!(
            blocks(&a)
                .iter()
                .all(|b| b.2 != BlockState::ActivePendingFree),
            "{conf}: reclaimed by the next allocation"
        );
        a.free_raw(w).unwrap();
        a.free_raw(z).unwrap();

        let v = a.allocate_raw(5 * MIB, S0).unwrap();
        a.record_stream(&v, S7).unwrap();
        a.free_raw(v).unwrap();
        let (config, stats, segments, fraction) = state(&a);
        let syncs = a.memory_stats().num_sync_all_streams;
        d.inject_failure("event_synchronize", 1);
        match a.empty_cache() {
            Err(AllocError::Driver {
                source: DriverError::Call { call, .. },
                ..
            }) => assert_eq!(call, "event_synchronize", "{conf}"),
            other => panic!("{conf}: {other:?}"),
        }
        let mut want = stats.clone();
        want.num_sync_all_streams = 0;
        assert_eq!(stats_but_syncs(&a), want, "{conf}");
        assert_eq!(a.memory_stats().num_sync_all_streams, syncs + 1, "{conf}");
        assert_eq!(
            (a.config(), a.snapshot(), a.memory_fraction()),
            (config, segments, fraction)
        );
        recount(&a, conf);
        a.empty_cache().unwrap();
        assert!(
            blocks(&a)
                .iter()
                .all(|b| b.2 != BlockState::ActivePendingFree),
            "{conf}: the pending free completed and was released"
        );
        recount(&a, conf);

        let u = a.allocate_raw(5 * MIB, S0).unwrap();
        a.record_stream(&u, S7).unwrap();
        a.free_raw(u).unwrap();
        let ooms = a.memory_stats().num_ooms;
        d.inject_failure("event_synchronize", 1);
        let e = a.allocate_raw(2 * GIB, S0).unwrap_err();
        assert!(matches!(e, AllocError::Driver { .. }), "{conf}: {e}");
        assert_eq!(a.memory_stats().num_ooms, ooms, "{conf}");
        assert_eq!(oom_calls.load(Ordering::SeqCst), 0, "{conf}");
        recount(&a, conf);
        a.free_raw(keep).unwrap();
        a.empty_cache().unwrap();
        recount(&a, conf);
        assert_eq!(
            (d.used_bytes(), d.live_objects()),
            (0, (0, 0, 0, 0)),
            "{conf}"
        );
    }
}

// ----- the pinned allocator -----------------------------------------------------

/// A pinned backend that refuses the next `fail_frees` frees.
struct FailingFree {
    sim: SimPinnedBackend,
    fail_frees: AtomicU64,
}

impl strata_alloc::pinned::PinnedBackend for FailingFree {
    fn alloc(&self, size: u64) -> Result<u64, DriverError> {
        self.sim.alloc(size)
    }
    fn free(&self, ptr: u64, size: u64) -> Result<(), DriverError> {
        if self
            .fail_frees
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
        {
            return Err(DriverError::Call {
                call: "free_host",
                message: "refused".into(),
            });
        }
        self.sim.free(ptr, size)
    }
    fn events(&self) -> &dyn strata_alloc::StreamEvents {
        self.sim.events()
    }
}

/// `empty_cache` of the pinned allocator with a backend that refuses to
/// free one of two cached blocks: the typed backend error, the other block
/// freed, the refused one still cached and reused, and its statistics as
/// they were (no free and no new pin counted for it); the next
/// `empty_cache` frees it.
#[test]
fn a_pinned_block_the_backend_refuses_to_free_stays_cached_and_counted_once() {
    let a = PinnedAllocator::new(FailingFree {
        sim: SimPinnedBackend::new(None),
        fail_frees: AtomicU64::new(0),
    });
    let small = a.allocate(4096).unwrap();
    let large = a.allocate(8192).unwrap();
    let small_ptr = small.ptr();
    drop((small, large));
    let before = a.stats();
    a.backend().fail_frees.store(1, Ordering::SeqCst);
    let e = a.empty_cache().unwrap_err();
    assert!(matches!(e, PinnedError::Backend(_)), "{e}");
    let after = a.stats();
    // Empty_cache takes the blocks in size order: the 4 KiB one is refused.
    assert_eq!(after.allocations.current, 1);
    assert_eq!(after.allocated_bytes.current, 4096);
    assert_eq!(
        (after.allocations.allocated, after.allocations.freed),
        (before.allocations.allocated, 1),
        "one block freed, none allocated again"
    );
    assert_eq!(
        (after.allocated_bytes.allocated, after.allocated_bytes.freed),
        (before.allocated_bytes.allocated, 8192)
    );
    assert_eq!(after.num_host_free, before.num_host_free + 1);
    assert_eq!(a.cached_bytes(), 4096);
    a.check_consistency().unwrap();
    let again = a.allocate(4096).unwrap();
    assert_eq!(again.ptr(), small_ptr, "the refused block is reused");
    assert_eq!(a.stats().num_host_alloc, before.num_host_alloc);
    drop(again);
    a.empty_cache().unwrap();
    assert_eq!(a.stats().allocations.current, 0);
    assert_eq!(a.backend().sim.live_blocks(), 0);
    a.check_consistency().unwrap();
}

/// Event failures on the pinned allocator: a buffer used on stream 5 whose
/// event cannot be recorded is cached at once when waiting for stream 5
/// works, and withheld (still active) when it fails too; a completed event
/// whose query fails is waited for, and the block withheld when that fails
/// too. The statistics equal a recount of the blocks throughout.
#[test]
fn pinned_event_failures_wait_or_withhold() {
    let a = PinnedAllocator::new(SimPinnedBackend::new(None));
    let d = a.backend().device();
    let s5 = StreamId(5);

    let x = a.allocate(4096).unwrap();
    x.record_stream(s5).unwrap();
    d.inject_failure("event_record", 1);
    drop(x);
    assert_eq!(a.stats().active_requests.current, 0, "cached at once");
    assert_eq!(a.cached_bytes(), 4096);
    a.check_consistency().unwrap();

    let x = a.allocate(4096).unwrap();
    x.record_stream(s5).unwrap();
    d.inject_failure("event_record", 1);
    d.inject_failure("stream_synchronize", 1);
    drop(x);
    assert_eq!(a.stats().active_requests.current, 1, "withheld");
    assert_eq!(a.cached_bytes(), 0);
    a.check_consistency().unwrap();

    let y = a.allocate(8192).unwrap();
    y.record_stream(s5).unwrap();
    drop(y);
    assert_eq!(a.pending_events(), 1);
    d.complete_all_events();
    d.inject_failure("event_query", 1);
    a.process_pending_events();
    assert_eq!(a.pending_events(), 0, "waited for instead");
    assert_eq!(a.cached_bytes(), 8192);
    a.check_consistency().unwrap();

    let y = a.allocate(8192).unwrap();
    y.record_stream(s5).unwrap();
    drop(y);
    d.inject_failure("event_query", 1);
    d.inject_failure("event_synchronize", 1);
    a.process_pending_events();
    assert_eq!(a.pending_events(), 0);
    assert_eq!(a.stats().active_requests.current, 2, "both withheld");
    a.check_consistency().unwrap();
    a.empty_cache().unwrap();
    assert_eq!(a.stats().allocations.current, 2, "the withheld blocks stay");
    a.check_consistency().unwrap();
}

// ----- devices too small for a page ------------------------------------------

/// Devices of 0, 1 and 512 bytes, and of one or one and a half pages:
/// `try_new` refuses a granularity the expandable segments cannot use
/// (`UnusableGranularity`: at most half the capacity), `new` falls back to
/// whole-allocation segments, and every request the device cannot hold is
/// a typed out-of-memory error with nothing changed but the counters of a
/// failed allocation; what fits is served; the summary and the pickled
/// snapshot are written.
#[test]
fn devices_too_small_for_a_page_give_typed_errors() {
    for (capacity, page, expandable) in [
        (0, 2 * MIB, false),
        (1, 2 * MIB, false),
        (512, 4096, false),
        (4096, 4096, false),
        (3 * MIB, 2 * MIB, false),
        (8192, 4096, true),
        (4 * MIB, 2 * MIB, true),
    ] {
        let what = format!("{capacity} bytes, {page}-byte pages");
        let d = Arc::new(SimDriver::new(capacity, page));
        match CachingAllocator::try_new(d.clone(), AllocatorConfig::default()) {
            Ok(a) => assert!(expandable && a.expandable_segments(), "{what}"),
            Err(AllocError::UnusableGranularity {
                granularity,
                capacity: c,
                ..
            }) => {
                assert!(!expandable, "{what}");
                assert_eq!((granularity, c), (page, capacity), "{what}");
            }
            Err(e) => panic!("{what}: {e}"),
        }
        let a = CachingAllocator::new(d.clone(), AllocatorConfig::default());
        assert_eq!(a.expandable_segments(), expandable, "{what}");
        for size in [1, 512, 4096, MIB, 2 * MIB, capacity + 1] {
            // Nothing cached, so that a failure has nothing to release.
            a.empty_cache().unwrap();
            let before = (stats_but_ooms(&a), a.snapshot());
            match a.allocate_raw(size, S0) {
                Ok(x) => {
                    assert!(size <= capacity, "{what}: {size}");
                    a.free_raw(x).unwrap();
                }
                Err(e) => {
                    assert!(
                        matches!(e, AllocError::OutOfMemory(_)),
                        "{what}: {size}: {e:?}"
                    );
                    assert_eq!((stats_but_ooms(&a), a.snapshot()), before, "{what}: {size}");
                }
            }
            recount(&a, &what);
        }
        a.empty_cache().unwrap();
        recount(&a, &what);
        assert!(a.memory_summary().contains("Allocated memory"), "{what}");
        assert!(!a.snapshot_pickle().unwrap().is_empty(), "{what}");
        assert_eq!(d.used_bytes(), 0, "{what}");
    }
}
