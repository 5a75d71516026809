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

mod common;

use common::sim;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use strata_alloc::driver::host::HostDriver;
use strata_alloc::{
    AllocError, AllocatorConfig, CachingAllocator, Driver, DriverError, MemPoolOptions, StreamId,
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
            let _route = routed.then(|| pool.activate());
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
