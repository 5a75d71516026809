//! Session 34's sweep of hostile inputs to the allocator's public API (after
//! `hostile_inputs.rs`, `hostile_inputs_2.rs`, `hostile_sweep_s27.rs` and
//! `hostile_sweep_s32.rs`): each input gets a typed error (or the documented
//! answer), never a panic, an abort or a wrapped size, and a refused call
//! leaves the allocator as it was.
//!
//! Defects these tests found (fixed with them):
//!
//! * `HostDriver::malloc` with a capacity added the request to the bytes in
//!   use unchecked: a segment of almost 2^64 bytes (`large_segment_size_mb`
//!   clamped to the largest value, as PyTorch's parser clamps it) asked for
//!   while memory was held overflowed (a panic in the test profile; in a
//!   release build the sum wrapped back under the capacity and only the
//!   layout check saved it).
//! * the out-of-memory error's hint added the device request to the reserved
//!   bytes unchecked when a memory fraction was set: a request for a segment
//!   of almost 2^64 bytes under a fraction panicked (in the test profile)
//!   while the error was being built, instead of returning it
//!   (`hostile_sweep_s27.rs`'s test of that segment size had been failing
//!   since).
//! * `snapshot_pickle` and `dump_snapshot` of an allocator whose driver
//!   reports a large device ordinal gathered an empty trace for every lower
//!   ordinal first: `cuda:18446744073709551615` panicked ("capacity
//!   overflow"), and an ordinal of a few billion would have aborted the
//!   process asking for the memory. PyTorch's device index is an int8, so
//!   its format holds ordinals up to 127: beyond that the call is now
//!   `AllocError::DeviceOrdinalTooLarge`, before any file is created or any
//!   `snapshot` event recorded.
//! * a trace tracker that panicked on a thread already unwinding from
//!   another panic (an allocation dropped during it; say, a tracker that
//!   `unwrap`s a mutex the panicking code held, now poisoned) aborted the
//!   process ("panic in a destructor during cleanup"): the free's events were
//!   passed on from inside `Allocation`'s drop. Such a panic is now caught
//!   and dropped, and the other trackers still see every event (the paths
//!   that passed nothing on while unwinding now pass the events on too).
//! * the same for an out-of-memory observer that panicked when an
//!   allocation made by a destructor during unwinding failed: the process
//!   aborted; the panic is now caught there, the other observers are still
//!   called, and the allocation returns its error to the destructor.
//! * the out-of-memory error of a request routed to a private pool, whose
//!   segments are ordinary whatever the setting, was built as if expandable
//!   segments served it: with `expandable_segments_reserve` set, a pool's
//!   request refused by the memory fraction blamed the reserve ("exceeds the
//!   per-stream expandable-segment reserve ... raise the reserve"), which
//!   does not bound a pool at all, and its device request was the size
//!   rounded to pages instead of the ordinary segment it needed.

use crate::common;

use common::{sim, OnDevice};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use strata_alloc::driver::host::HostDriver;
use strata_alloc::driver::sim::SimDriver;
use strata_alloc::history::Action;
use strata_alloc::{
    AllocError, AllocatorConfig, CachingAllocator, Device, Driver, DriverError, MemPoolOptions,
    StreamId,
};

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
const S0: StreamId = StreamId::DEFAULT;

/// A host device of 1 GiB holding 8 KiB: a request near `u64::MAX` bytes
/// is out of memory (PyTorch's `cudaMalloc` of a size no device holds
/// fails with `cudaErrorMemoryAllocation`), and the bytes in use stay 8 KiB.
/// Through the allocator: with `large_segment_size_mb` at the largest value
/// (clamped to a segment of almost 2^64 bytes), a 5 MiB request needs such a
/// segment while a small one is live: an out-of-memory error, nothing else
/// reserved.
#[test]
fn host_driver_sizes_near_u64_max_are_out_of_memory() {
    let d = HostDriver::new(Some(1 << 30));
    let p = d.malloc(8192).unwrap();
    for size in [u64::MAX, u64::MAX - 8191, u64::MAX - (1 << 30)] {
        assert_eq!(d.malloc(size), Err(DriverError::OutOfMemory), "{size}");
        assert_eq!(d.used_bytes(), 8192, "{size}");
    }
    d.free(p, 8192).unwrap();
    assert_eq!(d.used_bytes(), 0);

    let conf = AllocatorConfig::parse(
        "expandable_segments:False,large_segment_size_mb:18446744073709551615",
    )
    .unwrap();
    let d = Arc::new(HostDriver::new(Some(1 << 30)));
    let a = CachingAllocator::new(d.clone(), conf);
    let x = a.allocate(1024, S0).unwrap();
    let reserved = a.memory_reserved();
    assert_eq!(reserved, 2 * MIB, "one small segment");
    let e = a.allocate(5 * MIB, S0).unwrap_err();
    assert!(matches!(e, AllocError::OutOfMemory(_)), "{e}");
    assert_eq!(a.memory_reserved(), reserved);
    assert_eq!(d.used_bytes(), reserved);
    drop(x);
    a.empty_cache().unwrap();
    assert_eq!(d.used_bytes(), 0);
    a.check_consistency().unwrap();
}

/// A request that needs a segment of almost 2^64 bytes
/// (`large_segment_size_mb` clamped to the largest value) under a memory
/// fraction of 0.5 on a 16 GiB device (8 GiB allowed), from a private pool
/// (whose segments are ordinary) and from the default pools: an
/// out-of-memory error that names the 8 GiB allowed, as PyTorch's message
/// does ("8.00 GiB allowed"), with the fraction as the hint; the observer is
/// called once per failure with that error, and nothing but the
/// out-of-memory counter changes.
#[test]
fn an_oom_under_a_fraction_for_a_segment_near_u64_max_is_reported() {
    let a = sim("expandable_segments:False,large_segment_size_mb:18446744073709551615,per_process_memory_fraction:0.5");
    let huge = a.config().large_segment_size;
    assert!(
        huge > u64::MAX - GIB,
        "clamped to the largest value: {huge}"
    );
    let seen = Arc::new(AtomicUsize::new(0));
    let hints = Arc::new(Mutex::new(Vec::new()));
    let (s, h) = (seen.clone(), hints.clone());
    a.on_oom(move |oom, _| {
        s.fetch_add(1, SeqCst);
        h.lock().unwrap().push((oom.device_request, oom.allowed));
    });
    let pool = a.mem_pool(MemPoolOptions::default());
    let small = a.allocate(1024, S0).unwrap();
    let reserved = a.memory_reserved();
    for routed in [true, false] {
        let before = a.memory_stats().num_ooms;
        let e = {
            let _route = routed.then(|| pool.activate().unwrap());
            a.allocate(5 * MIB, S0).unwrap_err()
        };
        let oom = e.out_of_memory().unwrap_or_else(|| panic!("{e}"));
        assert_eq!(oom.allowed, Some(8 * GIB));
        assert_eq!(oom.device_request, huge);
        assert!(e.to_string().contains("8.00 GiB allowed"), "{e}");
        assert!(oom.hint.contains("per_process_memory_fraction"), "{e}");
        assert_eq!(a.memory_stats().num_ooms, before + 1);
        assert_eq!(a.memory_reserved(), reserved);
    }
    assert_eq!(seen.load(SeqCst), 2);
    assert_eq!(
        *hints.lock().unwrap(),
        [(huge, Some(8 * GIB)), (huge, Some(8 * GIB))]
    );
    drop(small);
    drop(pool);
    a.empty_cache().unwrap();
    assert_eq!(a.memory_reserved(), 0);
    a.check_consistency().unwrap();
}

fn on_device(n: usize) -> Arc<CachingAllocator> {
    let d = OnDevice(n, SimDriver::new(1 << 30, 0));
    CachingAllocator::new(Arc::new(d), AllocatorConfig::default())
}

/// PyTorch's snapshot holds a trace per device index, an int8 (at most
/// 127), in `device_traces`: `cuda:127`'s trace is the 128th list, after
/// 127 empty ones. Beyond 127 (`cuda:128`, and `cuda:18446744073709551615`,
/// which used to panic gathering that many empty traces) the pickle is a
/// `DeviceOrdinalTooLarge` error naming the device: no `snapshot` event is
/// recorded, and `dump_snapshot` leaves an existing file as it was. The
/// snapshot itself and the HTML report still work there.
#[test]
fn snapshots_of_device_ordinals_beyond_pytorchs_int8_are_refused() {
    let a = on_device(127);
    a.record_history(Some(100));
    let x = a.allocate(4096, S0).unwrap();
    let doc = common::decode(&a.snapshot_pickle().unwrap());
    let traces = common::list(common::key(&doc, "device_traces"));
    assert_eq!(traces.len(), 128);
    assert!(traces[..127].iter().all(|t| common::list(t).is_empty()));
    let last = common::list(&traces[127]);
    assert!(!last.is_empty());
    drop(x);

    let dir = std::env::temp_dir().join(format!("strata_s34_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for n in [128, 1 << 40, usize::MAX] {
        let a = on_device(n);
        a.record_history(Some(100));
        let x = a.allocate(4096, S0).unwrap();
        let history = a.history();
        let e = a.snapshot_pickle().unwrap_err();
        assert!(
            matches!(e, AllocError::DeviceOrdinalTooLarge { device: Device::Cuda(m), .. } if m == n),
            "{e:?}"
        );
        let text = e.to_string();
        assert!(
            text.contains(&format!("cuda:{n}")) && text.contains("127"),
            "{text}"
        );
        assert_eq!(a.history(), history, "cuda:{n}: nothing recorded");

        let path = dir.join(format!("cuda{n}.pickle"));
        std::fs::write(&path, b"an earlier snapshot").unwrap();
        let e = a.dump_snapshot(&path).unwrap_err();
        assert!(
            matches!(e, AllocError::DeviceOrdinalTooLarge { .. }),
            "{e:?}"
        );
        assert_eq!(std::fs::read(&path).unwrap(), b"an earlier snapshot");
        assert_eq!(a.history(), history, "cuda:{n}: nothing recorded");

        // What does not need PyTorch's format still works.
        assert_eq!(a.snapshot().len(), 1);
        assert!(a
            .history()
            .last()
            .is_some_and(|e| e.action == Action::Snapshot));
        assert!(a.memory_report_html().contains(&format!("cuda:{n}")));
        drop(x);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A tracker that records into a mutex with `lock().unwrap()` (as the
/// documentation's example does), and code that panics while holding that
/// mutex with an allocation alive: the allocation is dropped while the
/// thread unwinds, its free's events reach the tracker, whose `unwrap` of
/// the now poisoned mutex panics. That second panic used to abort the
/// process; it is caught, the outer panic reaches `catch_unwind`, a second
/// tracker saw the free's two events (after the allocation's own: the
/// default pools' first small segment, then the block), and the allocator
/// goes on working. Dropping a private pool during the unwinding (its free
/// 2 MiB small segment released) passes its `segment_free` on as well.
#[test]
fn a_tracker_that_panics_while_the_thread_unwinds_does_not_abort() {
    let a = sim("expandable_segments:False");
    let log: Arc<Mutex<Vec<Action>>> = Arc::new(Mutex::new(Vec::new()));
    let l = log.clone();
    a.attach_trace_tracker(move |e| l.lock().unwrap().push(e.action));
    let seen: Arc<Mutex<Vec<(Action, u64)>>> = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    a.attach_trace_tracker(move |e| s.lock().unwrap().push((e.action, e.size)));
    let pool = a.mem_pool(MemPoolOptions::default());
    let in_pool = {
        let _route = pool.activate().unwrap();
        a.allocate(4096, S0).unwrap()
    };
    drop(in_pool);
    seen.lock().unwrap().clear();
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _pool = pool;
        let _x = a.allocate(1000, S0).unwrap();
        let _held = log.lock().unwrap();
        panic!("the caller's own failure");
    }));
    let e = r.unwrap_err();
    assert_eq!(e.downcast_ref::<&str>(), Some(&"the caller's own failure"));
    assert!(log.is_poisoned());
    let seen = seen.lock().unwrap().clone();
    assert_eq!(
        seen,
        [
            (Action::SegmentAlloc, 2 * MIB),
            (Action::Alloc, 1000),
            (Action::FreeRequested, 1000),
            (Action::FreeCompleted, 1000),
            (Action::SegmentFree, 2 * MIB),
        ]
    );
    a.clear_trace_trackers();
    a.check_consistency().unwrap();
    assert_eq!(a.memory_allocated(), 0);
    drop(a.allocate(4096, S0).unwrap());
}

/// A destructor that runs while its thread unwinds and asks for more
/// memory than the device has (a staging copy made on the way out, say):
/// the out-of-memory observers are called, the first of which panics (it
/// `unwrap`s a mutex the panicking code held). That second panic used to
/// abort the process; it is caught, the second observer is still called
/// with the request, the destructor gets the out-of-memory error, and the
/// outer panic reaches `catch_unwind`.
#[test]
fn an_oom_observer_that_panics_while_the_thread_unwinds_does_not_abort() {
    struct StagesOnDrop(Arc<CachingAllocator>, Arc<Mutex<Option<AllocError>>>);
    impl Drop for StagesOnDrop {
        fn drop(&mut self) {
            let r = self.0.allocate(64 * GIB, S0);
            *self.1.lock().unwrap() = r.err();
        }
    }
    let a = sim("");
    let log: Arc<Mutex<Vec<u64>>> = Arc::new(Mutex::new(Vec::new()));
    let l = log.clone();
    a.on_oom(move |oom, _| l.lock().unwrap().push(oom.requested));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    a.on_oom(move |oom, _| s.lock().unwrap().push(oom.requested));
    let result = Arc::new(Mutex::new(None));
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _stage = StagesOnDrop(a.clone(), result.clone());
        let _held = log.lock().unwrap();
        panic!("the caller's own failure");
    }));
    let e = r.unwrap_err();
    assert_eq!(e.downcast_ref::<&str>(), Some(&"the caller's own failure"));
    assert_eq!(*seen.lock().unwrap(), [64 * GIB]);
    let err = result
        .lock()
        .unwrap()
        .take()
        .expect("the destructor's error");
    assert_eq!(err.out_of_memory().map(|o| o.requested), Some(64 * GIB));
    assert_eq!(a.memory_stats().num_ooms, 1);
    a.check_consistency().unwrap();
}

/// A private pool's segments are ordinary even with expandable segments on
/// (docs/allocator.md, "Private memory pools"), so the expandable-segment
/// reserve does not bound them: with `expandable_segments_reserve:0.01`
/// (164 MiB of a 16 GiB device) a 1 GiB request in the pool succeeds. When
/// the memory fraction (0.5: 8 GiB allowed) refuses a 9 GiB request in the
/// pool, the error names the fraction as the cause, not the reserve. With
/// the fraction at 0, a 5 MiB request in the pool needed PyTorch's segment
/// for it, `kLargeBuffer` (20 MiB, `get_allocation_size`), which is the
/// device request reported, not 6 MiB of pages (the request goes to a
/// second pool, with nothing cached). Outside the pool, where the
/// reserve does bound the request, the error still names the reserve.
#[test]
fn a_private_pools_oom_never_blames_expandable_segments() {
    let a = sim("expandable_segments_reserve:0.01,per_process_memory_fraction:0.5");
    assert!(a.expandable_segments());
    let pool = a.mem_pool(MemPoolOptions::default());
    let in_pool = |size: u64| {
        let _route = pool.activate().unwrap();
        a.allocate(size, S0)
    };
    let x = in_pool(GIB).unwrap();
    let e = in_pool(9 * GIB).unwrap_err();
    let oom = e.out_of_memory().unwrap_or_else(|| panic!("{e}"));
    assert_eq!(oom.device_request, 9 * GIB);
    assert_eq!(oom.allowed, Some(8 * GIB));
    assert!(oom.hint.contains("per_process_memory_fraction"), "{e}");
    assert!(!e.to_string().contains("expandable-segment reserve"), "{e}");

    let e = a.allocate(9 * GIB, S0).unwrap_err();
    assert!(
        e.out_of_memory()
            .unwrap()
            .hint
            .contains("expandable-segment reserve"),
        "{e}"
    );

    drop(x);
    a.set_memory_fraction(0.0).unwrap();
    // A pool with nothing cached (the first keeps its free 1 GiB segment).
    let fresh = a.mem_pool(MemPoolOptions::default());
    let e = {
        let _route = fresh.activate().unwrap();
        a.allocate(5 * MIB, S0).unwrap_err()
    };
    let oom = e.out_of_memory().unwrap_or_else(|| panic!("{e}"));
    assert_eq!(oom.device_request, 20 * MIB);
    assert!(oom.hint.contains("per_process_memory_fraction"), "{e}");
    a.check_consistency().unwrap();
}
