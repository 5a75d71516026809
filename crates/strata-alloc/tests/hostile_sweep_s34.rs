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

mod common;

use std::sync::Arc;
use strata_alloc::driver::host::HostDriver;
use strata_alloc::{AllocError, AllocatorConfig, CachingAllocator, Driver, DriverError, StreamId};

const MIB: u64 = 1 << 20;
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
