//! PyTorch's allocator tests, session 58.
//!
//! Read for this session: `test/test_cuda.py` (`TestCuda`'s memory tests,
//! `TestCudaMallocAsync`, `TestBlockStateAbsorption`, `TestMemPool`,
//! `TestCachingHostAllocatorCudaGraph`), `test/test_cuda_multigpu.py`
//! (`_test_memory_stats_generator`, `_check_memory_stat_consistency`,
//! `test_cuda_device_memory_allocated`), the C++ tests of `c10/cuda/test/impl/`
//! (`CUDACachingAllocatorReserveTest`, `...ReserveDeviceTest`,
//! `...IpcReserveTest`, `CUDAGraphMemoryTest`, `CUDATest`) and
//! `aten/src/ATen/test/cuda_reportMemoryUsage_test.cpp`, and
//! `c10/cuda/CUDACachingAllocator.cpp`'s `malloc`, `alloc_found_block` and
//! `free`. Every behaviour of the Python tests and of the reserve tests is
//! pinned by the earlier files (`pytorch_parity*.rs`, `pytorch_tests_s32.rs`
//! to `_s56.rs`, `pytorch_pinned_parity.rs`, `settings.rs`, `mempool.rs`,
//! `history*.rs`). What no earlier file checks:
//!
//! * `DeviceCachingAllocator.check_reporter`: PyTorch's caching allocator
//!   reports every block it hands out, every free and every out-of-memory
//!   failure to the memory profiler (`reportMemoryUsageToProfiler`,
//!   `reportOutOfMemoryToProfiler`), with its allocated and reserved bytes
//!   after each. strata had no such report; it has one now
//!   (`CachingAllocator::attach_memory_usage_reporter`, `MemoryUsage`),
//!   and the tests below pin it.
//! * `test_cuda_device_memory_allocated` (two devices' allocators keep
//!   their own figures).
//!
//! Expected figures come from PyTorch's source (which size is reported,
//! after which statistics update), worked out in each test's comments,
//! never from strata's output.

use super::common::{decode, int, key, list, sim_device, stat, string};
use std::sync::{Arc, Mutex};
use strata_alloc::driver::host::HostDriver;
use strata_alloc::driver::sim::SimDriver;
use strata_alloc::history::{Action, HistoryContext, HistoryOptions};
use strata_alloc::pinned::{PinnedAllocator, PinnedLimits, SimPinnedBackend};
use strata_alloc::{
    AllocError, AllocatorConfig, CachingAllocator, Device, MemoryUsage, OomRejection, StreamId,
};

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
const S0: StreamId = StreamId::DEFAULT;
const S1: StreamId = StreamId(11);

/// PyTorch's default segments, and strata's default expandable segments.
const CONFIGS: [&str; 2] = ["expandable_segments:False", ""];

/// Attaches a reporter that keeps every report, and returns them.
fn recorder(a: &CachingAllocator) -> Arc<Mutex<Vec<MemoryUsage>>> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = Arc::clone(&seen);
    a.attach_memory_usage_reporter(move |u| s.lock().unwrap().push(*u));
    seen
}

/// The reports kept so far, taken.
fn take<T>(seen: &Mutex<Vec<T>>) -> Vec<T> {
    std::mem::take(&mut *seen.lock().unwrap())
}

/// A `Usage` report's fields, `(ptr, alloc_size, total_allocated,
/// total_reserved)`.
fn usage(u: &MemoryUsage) -> (u64, i64, u64, u64) {
    match *u {
        MemoryUsage::Usage {
            ptr,
            alloc_size,
            total_allocated,
            total_reserved,
            ..
        } => (ptr, alloc_size, total_allocated, total_reserved),
        MemoryUsage::OutOfMemory { .. } => panic!("an out-of-memory report: {u:?}"),
    }
}

/// Mirrors `DeviceCachingAllocator.check_reporter`
/// (`aten/src/ATen/test/cuda_reportMemoryUsage_test.cpp`): 200 KiB, then
/// 500 MiB, then both freed, each reported once with the block's address,
/// its size (negative for a free) and the allocated and reserved bytes
/// after it.
///
/// PyTorch's figures (`alloc_found_block` reports `block->size` after the
/// statistics count the block; `free` reports `-orig_block_size` after
/// `free_block`):
///
/// * 200 KiB = 204800 B, a multiple of 512: a small-pool block of 204800 B
///   split from a new 2 MiB segment: `(ptr, 204800, 204800, 2 MiB)`. The
///   test's bounds (`200kb <= alloc_size`, `total_allocated < 400kb`,
///   `total_reserved < 500mb`) hold.
/// * 500 MiB (at least 10 MiB): a segment of 500 MiB rounded to 2 MiB,
///   500 MiB, handed out whole: `(ptr, 500 MiB, 500 MiB + 200 KiB,
///   502 MiB)`.
/// * freeing the 200 KiB: `(ptr1, -204800, 500 MiB, 502 MiB)`; the test's
///   `total_allocated == alloc2's size` and `reserved <= max`.
/// * freeing the 500 MiB: `(ptr2, -500 MiB, 0, 502 MiB)` (a free releases
///   nothing).
///
/// With expandable segments the block sizes and allocated bytes are the
/// same (200 KiB is split off a 2 MiB small page; 500 MiB maps whole pages
/// of the large pool, PyTorch's 20 MiB ones or strata's 2 MiB ones, both
/// exactly 500 MiB); the reserved bytes are whatever the allocator
/// reserves (strata may map ahead, docs/allocator.md), so there the report
/// is checked against `reserved_bytes.all.current` at that moment and
/// against the test's bounds.
#[test]
fn check_reporter_reports_each_block_with_the_totals_after_it() {
    for conf in CONFIGS {
        let (_, a) = sim_device(conf, 80 * GIB);
        let ordinary = !a.expandable_segments();
        let seen = recorder(&a);
        let reserved_now = || stat(&a, "reserved_bytes.all.current") as u64;

        let x = a.allocate(200 * KIB, S0).unwrap();
        let r = take(&seen);
        assert_eq!(r.len(), 1, "{conf}: {r:?}");
        let (p, size, allocated, reserved) = usage(&r[0]);
        assert_eq!((p, size, allocated), (x.ptr(), 204800, 204800), "{conf}");
        assert_eq!(reserved, reserved_now(), "{conf}");
        if ordinary {
            assert_eq!(reserved, 2 * MIB, "{conf}");
        }
        assert!(allocated < 2 * 204800 && reserved < 500 * MIB, "{conf}");
        assert!(matches!(r[0], MemoryUsage::Usage { device, .. } if device == a.device()));

        let y = a.allocate(500 * MIB, S0).unwrap();
        let r = take(&seen);
        assert_eq!(r.len(), 1, "{conf}: {r:?}");
        let (p, size, allocated, reserved) = usage(&r[0]);
        assert_eq!(
            (p, size, allocated),
            (y.ptr(), 500 * MIB as i64, 500 * MIB + 204800),
            "{conf}"
        );
        assert_eq!(reserved, reserved_now(), "{conf}");
        if ordinary {
            assert_eq!(reserved, 502 * MIB, "{conf}");
        }
        assert!(reserved >= 500 * MIB + 204800, "{conf}");
        let max_reserved = reserved;

        let (xp, yp) = (x.ptr(), y.ptr());
        drop(x);
        let r = take(&seen);
        assert_eq!(r.len(), 1, "{conf}: {r:?}");
        let (p, size, allocated, reserved) = usage(&r[0]);
        assert_eq!((p, size, allocated), (xp, -204800, 500 * MIB), "{conf}");
        assert_eq!(reserved, max_reserved, "{conf}: a free releases nothing");

        drop(y);
        let r = take(&seen);
        assert_eq!(r.len(), 1, "{conf}: {r:?}");
        let (p, size, allocated, reserved) = usage(&r[0]);
        assert_eq!((p, size, allocated), (yp, -(500 * MIB as i64), 0), "{conf}");
        assert_eq!(reserved, max_reserved, "{conf}");

        // empty_cache releases segments but reports nothing: PyTorch reports
        // allocations and frees of blocks only.
        a.empty_cache().unwrap();
        assert!(take(&seen).is_empty(), "{conf}");
    }
}

/// The reported size is the block's, not the request's: `alloc_found_block`
/// reports `block->size`. With `expandable_segments:False`, 19.5 MiB
/// (already a multiple of 512) gets a 20 MiB segment (at least 10 MiB,
/// rounded to 2 MiB), and the 0.5 MiB left is not more than 1 MiB, so
/// `should_split` keeps the block whole: 20 MiB reported and counted. With
/// expandable segments `should_split` splits whenever 512 bytes would be
/// left, so the block is the rounded request, 19.5 MiB. The free reports
/// the same size back.
#[test]
fn the_reported_size_is_the_blocks_not_the_requests() {
    for (conf, block) in [
        ("expandable_segments:False", 20 * MIB),
        ("expandable_segments:True", 19 * MIB + 512 * KIB),
    ] {
        let (_, a) = sim_device(conf, 80 * GIB);
        let seen = recorder(&a);
        let x = a.allocate(19 * MIB + 512 * KIB, S0).unwrap();
        let p = x.ptr();
        drop(x);
        let r: Vec<_> = take(&seen).iter().map(usage).collect();
        assert_eq!(r.len(), 2, "{conf}: {r:?}");
        assert_eq!((r[0].0, r[0].1, r[0].2), (p, block as i64, block), "{conf}");
        assert_eq!((r[1].0, r[1].1, r[1].2), (p, -(block as i64), 0), "{conf}");
    }
}

/// A free reports the size the block had when it was freed
/// (`orig_block_size`, taken before `free_block` merges it): two 1024-byte
/// blocks `a`, `b` cut from one small segment; `b` freed first merges with
/// the free rest of the segment behind it, then `a` merges with that, but
/// each free reports -1024, and the allocated bytes after each (1024, then
/// 0).
#[test]
fn a_free_reports_the_blocks_size_before_merging() {
    for conf in CONFIGS {
        let (_, a) = sim_device(conf, 80 * GIB);
        let x = a.allocate(1000, S0).unwrap();
        let y = a.allocate(1000, S0).unwrap();
        assert_eq!(y.ptr(), x.ptr() + 1024, "{conf}: adjacent");
        let seen = recorder(&a);
        let (xp, yp) = (x.ptr(), y.ptr());
        drop(y);
        drop(x);
        let r: Vec<_> = take(&seen).iter().map(usage).collect();
        assert_eq!(
            r.iter().map(|u| (u.0, u.1, u.2)).collect::<Vec<_>>(),
            [(yp, -1024, 1024), (xp, -1024, 0)],
            "{conf}"
        );
    }
}

/// A block used on another stream (`record_stream`) is reported freed at
/// once: PyTorch's `free` drops it from `allocated_bytes` and reports
/// before `insert_events`, although the block returns to the pool only
/// when the event completes (its `active_bytes` stay until then). When the
/// event completes (at the next allocation's `process_events`), nothing
/// more is reported.
#[test]
fn a_free_waiting_for_another_stream_is_reported_at_once() {
    for conf in CONFIGS {
        let d = Arc::new(SimDriver::new(80 * GIB, 2 << 20));
        let a = CachingAllocator::new(d.clone(), AllocatorConfig::parse(conf).unwrap());
        let x = a.allocate(MIB, S0).unwrap();
        x.record_stream(S1).unwrap();
        let seen = recorder(&a);
        let p = x.ptr();
        drop(x);
        let r: Vec<_> = take(&seen).iter().map(usage).collect();
        assert_eq!(r.len(), 1, "{conf}: {r:?}");
        assert_eq!((r[0].0, r[0].1, r[0].2), (p, -(MIB as i64), 0), "{conf}");
        assert_eq!(stat(&a, "active_bytes.all.current"), MIB as i64, "{conf}");
        d.complete_all_events();
        let z = a.allocate(MIB, S0).unwrap();
        let r: Vec<_> = take(&seen).iter().map(usage).collect();
        // Only z's allocation: the completed free is not reported again.
        assert_eq!(r.len(), 1, "{conf}: {r:?}");
        assert_eq!(
            (r[0].0, r[0].1, r[0].2),
            (z.ptr(), MIB as i64, MIB),
            "{conf}"
        );
        assert_eq!(z.ptr(), p, "{conf}: the block came back to its pool");
    }
}

/// A request that fails for lack of memory is reported by PyTorch's
/// `malloc` with `reportOutOfMemoryToProfiler(size, allocated, reserved)`:
/// the rounded request (`size = round_size(orig_size)`), after the release
/// steps (the full release frees every cached segment), and before the
/// out-of-memory observers run. On an 8 GiB device, 1000 bytes are held (a
/// 1024-byte block of a 2 MiB small segment) and a 1 GiB block is cached;
/// a request of 16 GiB - 100 bytes rounds to 16 GiB and fails. The cached
/// 1 GiB segment is released first, so the report says 16 GiB, 1024
/// allocated, 2 MiB reserved (ordinary segments; with expandable segments
/// the reserved bytes are checked against the statistic).
#[test]
fn an_out_of_memory_failure_is_reported_before_the_observers() {
    for conf in CONFIGS {
        let (_, a) = sim_device(conf, 8 * GIB);
        let ordinary = !a.expandable_segments();
        let order = Arc::new(Mutex::new(Vec::<String>::new()));
        let o = Arc::clone(&order);
        a.attach_memory_usage_reporter(move |u| o.lock().unwrap().push(format!("{u:?}")));
        let o = Arc::clone(&order);
        a.on_oom(move |_, _| o.lock().unwrap().push("observer".into()));
        let x = a.allocate(1000, S0).unwrap();
        drop(a.allocate(GIB, S0).unwrap());
        order.lock().unwrap().clear();
        let e = a.allocate(16 * GIB - 100, S0).unwrap_err();
        assert!(matches!(e, AllocError::OutOfMemory(_)), "{conf}: {e}");
        let seen = std::mem::take(&mut *order.lock().unwrap());
        assert_eq!(seen.len(), 2, "{conf}: {seen:?}");
        assert_eq!(seen[1], "observer", "{conf}");
        let reserved = stat(&a, "reserved_bytes.all.current") as u64;
        if ordinary {
            assert_eq!(reserved, 2 * MIB, "{conf}: the cached 1 GiB was released");
        }
        let expected = MemoryUsage::OutOfMemory {
            alloc_size: 16 * GIB,
            total_allocated: 1024,
            total_reserved: reserved,
            device: a.device(),
        };
        assert_eq!(seen[0], format!("{expected:?}"), "{conf}");
        drop(x);
    }
}

/// What PyTorch never reports: a zero-byte allocation (`allocate(0)`
/// returns a null pointer before the device allocator), a request of
/// 1 EiB or more (refused by `NativeCachingAllocator::malloc` before the
/// device allocator, with "Tried to allocate more than 1EB memory"), and
/// allocations made while caching is off (`caching_allocator_enable(False)`:
/// plain `cudaMalloc`/`cudaFree`, no statistics, no report). Clearing the
/// reporters stops the reports.
#[test]
fn nothing_is_reported_for_empty_refused_or_uncached_allocations() {
    let (_, a) = sim_device("expandable_segments:False", 80 * GIB);
    let seen = recorder(&a);
    drop(a.allocate(0, S0).unwrap());
    assert!(matches!(
        a.allocate(1 << 60, S0),
        Err(AllocError::TooLarge { .. })
    ));
    a.set_caching_enabled(false);
    let u = a.allocate(MIB, S0).unwrap();
    drop(u);
    a.set_caching_enabled(true);
    assert!(take(&seen).is_empty());
    a.clear_memory_usage_reporters();
    drop(a.allocate(MIB, S0).unwrap());
    assert!(take(&seen).is_empty());
}

/// A reporter may call the allocator (it runs after the lock is released,
/// as trace trackers do); the reports its own calls cause are not passed
/// to the reporters again, so a reporter that allocates does not recurse.
#[test]
fn a_reporter_may_call_the_allocator_without_recursing() {
    let (_, a) = sim_device("", 80 * GIB);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (s, weak) = (Arc::clone(&seen), Arc::downgrade(&a));
    a.attach_memory_usage_reporter(move |u| {
        let a = weak.upgrade().unwrap();
        // Allocates and frees inside the reporter: not reported.
        drop(a.allocate(4096, S0).unwrap());
        s.lock().unwrap().push((*u, a.memory_allocated()));
    });
    let x = a.allocate(1000, S0).unwrap();
    let r = take(&seen);
    assert_eq!(r.len(), 1, "{r:?}");
    assert_eq!(usage(&r[0].0).2, 1024);
    assert_eq!(r[0].1, 1024, "the reporter's own block is freed again");
    drop(x);
    assert_eq!(take(&seen).len(), 1);
}

/// Mirrors `test_cuda_device_memory_allocated` (`test/test_cuda_multigpu.py`):
/// allocating 10 floats on device 0 raises `memory_allocated(0)` and leaves
/// every other device's figure as it was. Each device has its own
/// allocator: here a simulated GPU (`cuda:0`) and the host, whose reports
/// name their own device and count their own bytes (40 bytes round to one
/// 512-byte block).
#[test]
fn each_devices_allocator_counts_only_its_own_memory() {
    let (_, gpu) = sim_device("", 8 * GIB);
    let host = CachingAllocator::new(
        Arc::new(HostDriver::new(Some(GIB))),
        AllocatorConfig::default(),
    );
    let (seen_gpu, seen_host) = (recorder(&gpu), recorder(&host));
    let before = (gpu.memory_allocated(), host.memory_allocated());
    let x = gpu.allocate(40, S0).unwrap();
    assert_eq!(gpu.memory_allocated(), before.0 + 512);
    assert_eq!(host.memory_allocated(), before.1);
    let r = take(&seen_gpu);
    assert!(
        matches!(
            r[..],
            [MemoryUsage::Usage {
                device: Device::Cuda(0),
                alloc_size: 512,
                total_allocated: 512,
                ..
            }]
        ),
        "{r:?}"
    );
    assert!(take(&seen_host).is_empty());
    let y = host.allocate(40, S0).unwrap();
    assert_eq!(gpu.memory_allocated(), 512);
    let r = take(&seen_host);
    assert!(
        matches!(
            r[..],
            [MemoryUsage::Usage {
                device: Device::Cpu,
                alloc_size: 512,
                total_allocated: 512,
                ..
            }]
        ),
        "{r:?}"
    );
    assert!(take(&seen_gpu).is_empty());
    drop((x, y));
}

// ---------------------------------------------------------------------------
// PyTorch 2.15's post-facto annotations (`_annotate_memory`, `_annotate_tensor`)
// ---------------------------------------------------------------------------

/// PyTorch 2.15's `torch.cuda.memory._annotate_memory(ptr, metadata)`
/// (`_annotate_tensor` passes the base of a tensor's storage), added by
/// pytorch/pytorch#190575: `NativeCachingAllocator::annotateMemory` finds
/// the live block at `ptr` and records `TraceEntry::ANNOTATE` with the
/// block's address, its `requested_size` (the field its `record_trace`
/// call reads in the 2.15 build: the one its `free_requested` entries
/// read, not the `size` its `segment_free` ones read), its stream and the
/// annotation as the entry's `user_metadata`. The thread's metadata stays
/// on the entries around it, and the `alloc` entry keeps the metadata it
/// was recorded with ("alloc-time user_metadata is never clobbered");
/// annotations accumulate as entries of their own.
#[test]
fn annotate_memory_adds_an_entry_with_the_annotation_as_metadata() {
    for conf in CONFIGS {
        let (_, a) = sim_device(conf, 80 * GIB);
        a.record_history(Some(100));
        a.set_memory_metadata("step 1");
        let x = a.allocate(1000, S1).unwrap();
        let line = line!() + 1;
        a.annotate_memory(x.ptr(), "retained by autograd").unwrap();
        a.annotate_memory(x.ptr(), "second").unwrap();
        let y = a.allocate(3000, S0).unwrap();
        a.set_memory_metadata("");
        let h: Vec<_> = a
            .history()
            .into_iter()
            .filter(|e| !matches!(e.action, Action::SegmentAlloc | Action::SegmentMap))
            .collect();
        let got: Vec<_> = h
            .iter()
            .map(|e| {
                (
                    e.action,
                    e.addr,
                    e.size,
                    e.stream,
                    e.user_metadata.as_deref(),
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                (Action::Alloc, x.ptr(), 1000, S1, Some("step 1")),
                (
                    Action::Annotate,
                    x.ptr(),
                    1000,
                    S1,
                    Some("retained by autograd")
                ),
                (Action::Annotate, x.ptr(), 1000, S1, Some("second")),
                (Action::Alloc, y.ptr(), 3000, S0, Some("step 1")),
            ],
            "{conf}"
        );
        // The default context ("all") keeps the annotation's call site.
        let site = h[1].site.expect("a call site");
        assert_eq!((site.file, site.line), (file!(), line), "{conf}");
        assert_eq!(Action::from_name("annotate"), Some(Action::Annotate));
        assert_eq!(Action::Annotate.name(), "annotate");
    }
}

/// The annotation's stack is gathered as PyTorch gathers it
/// (`annotateMemory` calls the context recorder when `record_context_ >
/// STATE`): from `context="alloc"` on; `"state"` and `None` record the
/// entry without one. `skip_actions=["annotate"]` leaves the entries out.
#[test]
fn an_annotations_call_site_follows_the_context_and_skip_actions_hide_it() {
    for (context, with_site) in [
        (HistoryContext::None, false),
        (HistoryContext::State, false),
        (HistoryContext::Alloc, true),
        (HistoryContext::All, true),
    ] {
        let (_, a) = sim_device("", 80 * GIB);
        a.record_history_opts(&HistoryOptions::new(100).context(context));
        let x = a.allocate(1000, S0).unwrap();
        a.annotate_memory(x.ptr(), "note").unwrap();
        let h = a.history();
        let e = h.last().unwrap();
        assert_eq!(e.action, Action::Annotate, "{context:?}");
        assert_eq!(e.site.is_some(), with_site, "{context:?}");
    }
    let (_, a) = sim_device("", 80 * GIB);
    a.record_history_opts(&HistoryOptions::new(100).skip(&[Action::Annotate]));
    let x = a.allocate(1000, S0).unwrap();
    a.annotate_memory(x.ptr(), "note").unwrap();
    assert!(a.history().iter().all(|e| e.action != Action::Annotate));
}

/// PyTorch raises "annotateMemory: no live allocation found at pointer"
/// for any address `get_allocated_block` does not find, history on or
/// off: the null address, an address inside an allocation, a freed one
/// (also while its free waits for another stream's event: `free` takes it
/// out of the allocated blocks at once), and an allocation made while
/// caching was off (never in the allocated blocks). strata refuses them
/// with `AllocError::NotAllocated`, recording nothing.
#[test]
fn annotating_an_address_that_is_not_a_live_allocation_is_refused() {
    for history in [false, true] {
        let d = Arc::new(SimDriver::new(80 * GIB, 2 << 20));
        let a = CachingAllocator::new(d.clone(), AllocatorConfig::default());
        if history {
            a.record_history(Some(100));
        }
        let x = a.allocate(4096, S0).unwrap();
        let y = a.allocate(4096, S0).unwrap();
        y.record_stream(S1).unwrap();
        let (freed, pending) = (
            {
                let z = a.allocate(4096, S0).unwrap();
                z.ptr()
            },
            y.ptr(),
        );
        drop(y);
        a.set_caching_enabled(false);
        let u = a.allocate(4096, S0).unwrap();
        a.set_caching_enabled(true);
        let before = a.history();
        for ptr in [0, x.ptr() + 512, freed, pending, u.ptr()] {
            match a.annotate_memory(ptr, "note") {
                Err(e @ AllocError::NotAllocated { .. }) => {
                    assert!(
                        e.to_string()
                            .contains("no live allocation found at pointer"),
                        "{e}"
                    );
                }
                r => panic!("history {history}, {ptr:#x}: {r:?}"),
            }
        }
        assert_eq!(a.history(), before, "history {history}: nothing recorded");
        // The live allocation itself is accepted, history on or off.
        a.annotate_memory(x.ptr(), "note").unwrap();
        assert_eq!(
            a.history().len(),
            before.len() + usize::from(history),
            "history {history}"
        );
        drop((x, u));
        d.complete_all_events();
    }
}

/// PyTorch's `record_trace` passes every entry to the trace trackers,
/// history on or off: a tracker sees the annotation (address, caller's
/// size, stream, the annotation as metadata) with history off, when
/// nothing is recorded.
#[test]
fn trace_trackers_see_annotations_with_history_off() {
    let (_, a) = sim_device("", 80 * GIB);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = Arc::clone(&seen);
    a.attach_trace_tracker(move |e| {
        if e.action == Action::Annotate {
            s.lock()
                .unwrap()
                .push((e.addr, e.size, e.stream, e.user_metadata.clone()));
        }
    });
    let x = a.allocate(1000, S1).unwrap();
    a.annotate_memory(x.ptr(), "note").unwrap();
    a.annotate_memory(x.ptr(), "").unwrap();
    assert_eq!(
        *seen.lock().unwrap(),
        [
            (x.ptr(), 1000, S1, Some(Arc::from("note"))),
            (x.ptr(), 1000, S1, None),
        ]
    );
    assert!(a.history().is_empty());
}

/// The pickled snapshot (`torch.cuda.memory._snapshot()`'s layout) carries
/// the annotation as PyTorch's `device_traces` entries do: action
/// `annotate`, the allocation's address and size, the annotation as
/// `user_metadata`, and the thread's metadata back on the next entry.
#[test]
fn a_pickled_snapshot_carries_annotate_entries() {
    let (_, a) = sim_device("expandable_segments:False", 80 * GIB);
    a.record_history(Some(100));
    let x = a.allocate(1000, S0).unwrap();
    a.annotate_memory(x.ptr(), "retained").unwrap();
    let y = a.allocate(2000, S0).unwrap();
    let doc = decode(&a.snapshot_pickle().unwrap());
    let traces = list(key(&doc, "device_traces"));
    let entries: Vec<_> = list(&traces[0])
        .iter()
        .map(|e| {
            (
                string(key(e, "action")).to_string(),
                int(key(e, "addr")),
                int(key(e, "size")),
                string(key(e, "user_metadata")).to_string(),
            )
        })
        .filter(|e| e.0 != "segment_alloc")
        .collect();
    assert_eq!(
        entries,
        [
            ("alloc".to_string(), x.ptr(), 1000, String::new()),
            (
                "annotate".to_string(),
                x.ptr(),
                1000,
                "retained".to_string()
            ),
            ("alloc".to_string(), y.ptr(), 2000, String::new()),
        ]
    );
}

// ---------------------------------------------------------------------------
// attachOomRejectionObserver (throw_on_cudamalloc_oom)
// ---------------------------------------------------------------------------

/// PyTorch 2.15's `attachOomRejectionObserver`: when `alloc_block` rejects
/// a request under `throw_on_cudamalloc_oom` (pytorch/pytorch#179473:
/// "Observers are notified for monitoring/metrics"), `malloc` calls each
/// observer with `(device, alloc_size, total_allocated, device_total)`:
/// the request's `AllocParams::alloc_size` (`get_allocation_size` of the
/// rounded request), `total_allocated_memory` (what the allocator holds
/// from the device) and the device's total memory, then returns without
/// the out-of-memory path (no `num_ooms`, no out-of-memory observer).
/// On a 1 GiB device, 600 MiB held (a 600 MiB segment), a request of
/// 500 MiB - 100 bytes (rounded to 500 MiB, a 500 MiB segment): 1100 MiB
/// would exceed the device, so `(500 MiB, 600 MiB, 1 GiB)`. An ordinary
/// out-of-memory failure (the option off) calls no rejection observer.
#[test]
fn oom_rejection_observers_get_pytorchs_four_figures() {
    for (conf, rejected) in [
        (
            "expandable_segments:False,throw_on_cudamalloc_oom:True",
            true,
        ),
        ("expandable_segments:False", false),
    ] {
        let (_, a) = sim_device(conf, GIB);
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s = Arc::clone(&seen);
        a.on_oom_rejection(move |r| s.lock().unwrap().push(*r));
        let ooms = Arc::new(Mutex::new(0));
        let o = Arc::clone(&ooms);
        a.on_oom(move |_, _| *o.lock().unwrap() += 1);
        let x = a.allocate(600 * MIB, S0).unwrap();
        let e = a.allocate(500 * MIB - 100, S0).unwrap_err();
        let seen = seen.lock().unwrap().clone();
        if rejected {
            assert!(matches!(e, AllocError::OomRejected { .. }), "{e}");
            assert_eq!(
                seen,
                [OomRejection {
                    device: a.device(),
                    alloc_size: 500 * MIB,
                    total_allocated: 600 * MIB,
                    device_total: GIB,
                }]
            );
            assert_eq!(*ooms.lock().unwrap(), 0, "no out-of-memory observer");
            assert_eq!(stat(&a, "num_oom_rejections"), 1);
            assert_eq!(stat(&a, "num_ooms"), 0);
        } else {
            assert!(matches!(e, AllocError::OutOfMemory(_)), "{e}");
            assert!(seen.is_empty(), "{conf}");
            assert_eq!(*ooms.lock().unwrap(), 1);
        }
        a.clear_oom_rejection_observers();
        drop(x);
    }
}

/// A rejection observer may call the allocator (it runs after the lock is
/// released); a rejection inside it does not call the observers again.
#[test]
fn an_oom_rejection_observer_may_allocate_without_recursing() {
    let (_, a) = sim_device("throw_on_cudamalloc_oom:True", GIB);
    let calls = Arc::new(Mutex::new(0));
    let (c, weak) = (Arc::clone(&calls), Arc::downgrade(&a));
    a.on_oom_rejection(move |_| {
        *c.lock().unwrap() += 1;
        let a = weak.upgrade().unwrap();
        // Rejected again, inside the observer: not observed.
        assert!(matches!(
            a.allocate(2 * GIB, S0),
            Err(AllocError::OomRejected { .. })
        ));
        drop(a.allocate(4096, S0).unwrap());
    });
    assert!(a.allocate(2 * GIB, S0).is_err());
    assert_eq!(*calls.lock().unwrap(), 1);
    assert_eq!(stat(&a, "num_oom_rejections"), 2);
}

// ---------------------------------------------------------------------------
// allocator_settings of a pickled snapshot (PyTorch 2.15)
// ---------------------------------------------------------------------------

/// PyTorch 2.15's `_memory_snapshot_pickled` writes the pinned host
/// allocator's two byte limits into `allocator_settings` as
/// `max_round_threshold` and `max_cached_size` (integers: its build inserts
/// `AcceleratorAllocatorConfig::pinned_max_round_threshold()` and
/// `pinned_max_cached_size()`, `size_t`s whose unlimited default,
/// `SIZE_MAX`, reads -1), between `graph_capture_record_stream_reuse` and
/// `roundup_power2_divisions`. The set of keys is PyTorch's:
/// `PYTORCH_CUDA_ALLOC_CONF`, `max_split_size`,
/// `garbage_collection_threshold`, `expandable_segments`,
/// `pinned_num_register_threads`, `release_lock_on_cudamalloc`,
/// `pinned_use_cuda_host_register`, `graph_capture_record_stream_reuse`,
/// `max_round_threshold`, `max_cached_size`, `roundup_power2_divisions`.
#[test]
fn a_pickled_snapshot_names_the_pinned_limits_as_pytorch_2_15_does() {
    for (conf, round, cached) in [
        ("", -1, -1),
        (
            "pinned_max_round_threshold_mb:64,pinned_max_cached_size_mb:0",
            64 * MIB as i64,
            0,
        ),
    ] {
        let (_, a) = sim_device(conf, 80 * GIB);
        let doc = decode(&a.snapshot_pickle().unwrap());
        let s = key(&doc, "allocator_settings");
        let signed = |k: &str| match key(s, k) {
            serde_pickle::Value::I64(i) => *i,
            v => panic!("{k}: not an int: {v:?}"),
        };
        assert_eq!(signed("max_round_threshold"), round, "{conf}");
        assert_eq!(signed("max_cached_size"), cached, "{conf}");
        assert_eq!(signed("max_split_size"), -1, "{conf}");
        let serde_pickle::Value::Dict(d) = s else {
            panic!("allocator_settings is no dict")
        };
        let mut keys: Vec<String> = d
            .keys()
            .map(|k| match k {
                serde_pickle::HashableValue::String(k) => k.clone(),
                k => panic!("a key that is no string: {k:?}"),
            })
            .collect();
        keys.sort();
        let mut expected = [
            "PYTORCH_CUDA_ALLOC_CONF",
            "max_split_size",
            "garbage_collection_threshold",
            "expandable_segments",
            "pinned_num_register_threads",
            "release_lock_on_cudamalloc",
            "pinned_use_cuda_host_register",
            "graph_capture_record_stream_reuse",
            "max_round_threshold",
            "max_cached_size",
            "roundup_power2_divisions",
        ];
        expected.sort();
        assert_eq!(keys, expected, "{conf}");
    }
}

// ---------------------------------------------------------------------------
// History of the pinned host allocator (PyTorch 2.15,
// `_record_memory_history(record_pinned_host_memory=True)`)
// ---------------------------------------------------------------------------

type PinnedSim = Arc<SimPinnedBackend>;

fn pinned() -> (PinnedSim, Arc<PinnedAllocator<PinnedSim>>) {
    let b = Arc::new(SimPinnedBackend::new(None));
    (Arc::clone(&b), PinnedAllocator::new(b))
}

fn pinned_trace(a: &PinnedAllocator<PinnedSim>) -> Vec<(Action, u64, u64)> {
    a.history()
        .iter()
        .map(|e| (e.action, e.addr, e.size))
        .collect()
}

/// PyTorch 2.15's `CachingHostAllocator` records (header
/// `ATen/core/CachingHostAllocator.h`, shipped with the wheel): on a miss,
/// `SEGMENT_ALLOC(ptr, roundSize)` then `ALLOC(ptr, block size)`; on a
/// cache hit `ALLOC` alone; `free` records `FREE_REQUESTED` at once;
/// `maybe_cache_block` records `FREE_COMPLETED` when the block goes back to
/// its free list (at once when no stream used it); `destroy_block`
/// (`empty_cache`) records `SEGMENT_FREE`. Sizes are the block's (strata's
/// size class of 4 KiB for 1000 bytes, where PyTorch's power of two would
/// be 1024: the documented size-class difference; the events are the
/// same). Nothing is recorded while history is off.
#[test]
fn the_pinned_history_records_pytorchs_host_events() {
    let (_, a) = pinned();
    drop(a.allocate(1000).unwrap());
    assert!(a.history().is_empty(), "history off: nothing recorded");
    a.empty_cache().unwrap();
    a.record_history(Some(100));
    assert!(a.history_enabled());
    let x = a.allocate(1000).unwrap();
    let p = x.ptr();
    drop(x);
    let y = a.allocate(1000).unwrap(); // the cached block again
    assert_eq!(y.ptr(), p);
    drop(y);
    a.empty_cache().unwrap();
    let page = 4096;
    assert_eq!(
        pinned_trace(&a),
        [
            (Action::SegmentAlloc, p, page),
            (Action::Alloc, p, page),
            (Action::FreeRequested, p, page),
            (Action::FreeCompleted, p, page),
            (Action::Alloc, p, page),
            (Action::FreeRequested, p, page),
            (Action::FreeCompleted, p, page),
            (Action::SegmentFree, p, page),
        ]
    );
    let times: Vec<u64> = a.history().iter().map(|e| e.time_us).collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
}

/// A buffer used on a stream: `free` records `FREE_REQUESTED` at once and
/// the events; `FREE_COMPLETED` comes only when `process_events` finds them
/// complete (strata: at the next allocation or `process_pending_events`).
/// Meanwhile `getSegments` reports the block as not allocated but active
/// (`event_count_ > 0`); in use it is both, cached it is neither.
#[test]
fn a_pinned_free_waiting_for_a_stream_completes_in_the_history_later() {
    let (b, a) = pinned();
    a.record_history(Some(100));
    let x = a.allocate(64 * KIB).unwrap();
    let p = x.ptr();
    let seg = |a: &PinnedAllocator<PinnedSim>| {
        let s = a.segments();
        assert_eq!(s.len(), 1);
        assert_eq!((s[0].address, s[0].size), (p, 64 * KIB));
        (s[0].allocated, s[0].active)
    };
    assert_eq!(seg(&a), (true, true));
    x.record_stream(S1).unwrap();
    drop(x);
    assert_eq!(seg(&a), (false, true));
    assert_eq!(
        pinned_trace(&a).last(),
        Some(&(Action::FreeRequested, p, 64 * KIB))
    );
    a.process_pending_events();
    assert!(
        pinned_trace(&a)
            .iter()
            .all(|e| e.0 != Action::FreeCompleted),
        "the stream has not run yet"
    );
    b.complete_stream(S1);
    a.process_pending_events();
    assert_eq!(
        pinned_trace(&a).last(),
        Some(&(Action::FreeCompleted, p, 64 * KIB))
    );
    assert_eq!(seg(&a), (false, false));
}

/// A block above `pinned_max_cached_size_mb` is unpinned when freed:
/// `maybe_cache_block` records `FREE_COMPLETED`, then `destroy_block`
/// `SEGMENT_FREE`. A request above the limit gets a block of its own size
/// (PyTorch: no power-of-two rounding above either limit; strata: whole
/// pages), here 2 MiB exactly.
#[test]
fn a_pinned_block_above_the_cache_limit_is_recorded_unpinned_when_freed() {
    let (_, a) = pinned();
    a.set_limits(PinnedLimits {
        max_round_threshold: u64::MAX,
        max_cached_size: MIB,
    });
    a.record_history(Some(100));
    let x = a.allocate(2 * MIB).unwrap();
    let p = x.ptr();
    drop(x);
    assert_eq!(
        pinned_trace(&a),
        [
            (Action::SegmentAlloc, p, 2 * MIB),
            (Action::Alloc, p, 2 * MIB),
            (Action::FreeRequested, p, 2 * MIB),
            (Action::FreeCompleted, p, 2 * MIB),
            (Action::SegmentFree, p, 2 * MIB),
        ]
    );
    assert!(a.segments().is_empty());
}

/// The host allocator's `recordHistory`: enabling sets the ring's bound
/// (the newest entries kept), disabling stops recording but keeps the
/// buffer (unlike the device allocator, which clears it), and
/// `clear_history` empties it.
#[test]
fn the_pinned_history_is_bounded_kept_when_stopped_and_cleared_on_request() {
    let (_, a) = pinned();
    a.record_history(Some(3));
    let x = a.allocate(1000).unwrap();
    let p = x.ptr();
    drop(x);
    // segment_alloc, alloc, free_requested, free_completed: the newest 3.
    assert_eq!(
        pinned_trace(&a),
        [
            (Action::Alloc, p, 4096),
            (Action::FreeRequested, p, 4096),
            (Action::FreeCompleted, p, 4096),
        ]
    );
    a.record_history(None);
    assert!(!a.history_enabled());
    drop(a.allocate(1000).unwrap());
    assert_eq!(a.history().len(), 3, "stopped: kept, nothing added");
    a.record_history(Some(1));
    assert_eq!(
        pinned_trace(&a),
        [(Action::FreeCompleted, p, 4096)],
        "a smaller bound keeps the newest"
    );
    a.clear_history();
    assert!(a.history().is_empty());
    assert!(a.history_enabled());
}
