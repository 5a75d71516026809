//! Helpers shared by the integration tests: reading pickled snapshots, and
//! allocators over the simulated device with what a refused call must keep.
// Each test file uses a subset of them.
#![allow(dead_code)]

use serde_pickle::{DeOptions, HashableValue, Value};
use std::sync::Arc;
use strata_alloc::driver::sim::SimDriver;
use strata_alloc::driver::{EventHandle, VirtualMemory};
use strata_alloc::snapshot::SegmentSnapshot;
use strata_alloc::{
    AllocatorConfig, CachingAllocator, Device, DevicePtr, Driver, DriverError, MemInfo,
    MemoryStats, StreamEvents, StreamId,
};

/// The value a pickle holds (panics when the bytes are no pickle).
pub fn decode(bytes: &[u8]) -> Value {
    serde_pickle::value_from_slice(bytes, DeOptions::new()).expect("a valid pickle")
}

/// The value under string key `k` of a pickled dict (panics, naming the key,
/// when it is missing or `v` is no dict).
pub fn key<'a>(v: &'a Value, k: &str) -> &'a Value {
    match v {
        Value::Dict(d) => d
            .get(&HashableValue::String(k.into()))
            .unwrap_or_else(|| panic!("missing key {k}")),
        _ => panic!("not a dict looking up {k}"),
    }
}

/// The elements of a pickled list.
pub fn list(v: &Value) -> &Vec<Value> {
    match v {
        Value::List(l) => l,
        _ => panic!("not a list: {v:?}"),
    }
}

/// A pickled string.
pub fn string(v: &Value) -> &str {
    match v {
        Value::String(s) => s,
        _ => panic!("not a string: {v:?}"),
    }
}

/// A pickled non-negative integer.
pub fn int(v: &Value) -> u64 {
    match v {
        Value::I64(i) => *i as u64,
        _ => panic!("not an int: {v:?}"),
    }
}

/// A simulated device of `capacity` bytes and 2 MiB pages, and an allocator
/// over it with settings `conf`.
pub fn sim_device(conf: &str, capacity: u64) -> (Arc<SimDriver>, Arc<CachingAllocator>) {
    let d = Arc::new(SimDriver::new(capacity, 2 << 20));
    let a = CachingAllocator::new(d.clone(), AllocatorConfig::parse(conf).unwrap());
    (d, a)
}

/// An allocator over a simulated device of `capacity` bytes and 2 MiB pages,
/// with settings `conf`.
pub fn sim_with(capacity: u64, conf: &str) -> Arc<CachingAllocator> {
    sim_device(conf, capacity).1
}

/// The statistic named `k` (PyTorch's key), panicking when there is none.
pub fn stat(a: &CachingAllocator, k: &str) -> i64 {
    a.memory_stats()
        .get(k)
        .unwrap_or_else(|| panic!("no stat {k}"))
}

/// [`sim_with`] a 16 GiB device.
pub fn sim(conf: &str) -> Arc<CachingAllocator> {
    sim_with(1 << 34, conf)
}

/// Everything a refused call must leave as it was.
pub fn state(a: &CachingAllocator) -> (AllocatorConfig, MemoryStats, Vec<SegmentSnapshot>, f64) {
    (
        a.config(),
        a.memory_stats(),
        a.snapshot(),
        a.memory_fraction(),
    )
}

/// The statistics without the counters that a failed allocation bumps by
/// design, as in PyTorch: `num_ooms`, and the retry after freeing the cache
/// (`num_alloc_retries`, `num_sync_all_streams`).
pub fn stats_but_ooms(a: &CachingAllocator) -> MemoryStats {
    let mut s = a.memory_stats();
    s.num_ooms = 0;
    s.num_alloc_retries = 0;
    s.num_sync_all_streams = 0;
    s
}

/// A small deterministic generator for random call sequences (Knuth's MMIX
/// LCG, high bits), so a failing seed replays exactly.
pub struct Lcg(pub u64);

impl Lcg {
    pub fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }

    /// A number in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// One of `xs`.
    pub fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[(self.next() % xs.len() as u64) as usize]
    }
}

/// A simulated device that reports itself as `cuda:n`, so that several can
/// be installed in the registry at once.
pub struct OnDevice(pub usize, pub SimDriver);

impl StreamEvents for OnDevice {
    fn create_event(&self) -> Result<EventHandle, DriverError> {
        self.1.create_event()
    }
    fn destroy_event(&self, event: EventHandle) -> Result<(), DriverError> {
        self.1.destroy_event(event)
    }
    fn record_event(&self, event: EventHandle, stream: StreamId) -> Result<(), DriverError> {
        self.1.record_event(event, stream)
    }
    fn query_event(&self, event: EventHandle) -> Result<bool, DriverError> {
        self.1.query_event(event)
    }
    fn synchronize_event(&self, event: EventHandle) -> Result<(), DriverError> {
        self.1.synchronize_event(event)
    }
    fn synchronize_stream(&self, stream: StreamId) -> Result<(), DriverError> {
        self.1.synchronize_stream(stream)
    }
}

impl Driver for OnDevice {
    fn device(&self) -> Device {
        Device::Cuda(self.0)
    }
    fn name(&self) -> String {
        self.1.name()
    }
    fn total_memory(&self) -> u64 {
        self.1.total_memory()
    }
    fn mem_get_info(&self) -> Result<MemInfo, DriverError> {
        self.1.mem_get_info()
    }
    fn malloc(&self, size: u64) -> Result<DevicePtr, DriverError> {
        self.1.malloc(size)
    }
    fn free(&self, ptr: DevicePtr, size: u64) -> Result<(), DriverError> {
        self.1.free(ptr, size)
    }
    fn virtual_memory(&self) -> Option<&dyn VirtualMemory> {
        None
    }
}

/// Cases per property test: `PROPTEST_CASES` when set (a longer run, e.g.
/// `PROPTEST_CASES=5000` in a debug build), else the file's `default`.
/// (`ProptestConfig::with_cases` ignores the variable, which only sets
/// `ProptestConfig::default()`'s count.)
pub fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// Serialises the tests that change the process-wide allocator settings
/// (`strata_alloc::set_allocator_settings`), which every allocator of the
/// registry and every pinned allocator that follows the settings take: one
/// such test must not see another's string between its own calls.
pub fn process_settings_lock() -> parking_lot::MutexGuard<'static, ()> {
    static LOCK: parking_lot::Mutex<()> = parking_lot::Mutex::new(());
    LOCK.lock()
}

/// The statistics agree with the allocator's structures and with a recount
/// of the snapshot.
pub fn recount(a: &CachingAllocator, what: &str) {
    a.check_consistency()
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    let segs = a.snapshot();
    let sum = |f: fn(&SegmentSnapshot) -> u64| -> i64 { segs.iter().map(f).sum::<u64>() as i64 };
    assert_eq!(
        sum(|s| s.total_size),
        stat(a, "reserved_bytes.all.current"),
        "{what}"
    );
    assert_eq!(
        sum(|s| s.allocated_size),
        stat(a, "allocated_bytes.all.current"),
        "{what}"
    );
    assert_eq!(
        sum(|s| s.active_size),
        stat(a, "active_bytes.all.current"),
        "{what}"
    );
    // `segment` counts ordinary segments only, as PyTorch's does
    // (docs/allocator.md, "Statistics").
    let ordinary = segs.iter().filter(|s| !s.is_expandable).count() as i64;
    assert_eq!(ordinary, stat(a, "segment.all.current"), "{what}");
    let allocated_blocks = segs
        .iter()
        .flat_map(|s| &s.blocks)
        .filter(|b| b.state == strata_alloc::snapshot::BlockState::ActiveAllocated)
        .count() as i64;
    assert_eq!(
        allocated_blocks,
        stat(a, "allocation.all.current"),
        "{what}"
    );
}
