//! PyTorch's allocator tests, session 38: behaviours of PyTorch's caching
//! allocators that the earlier files (`pytorch_parity*.rs`,
//! `pytorch_tests_s32.rs` to `_s37.rs`, `pytorch_pinned_parity.rs`,
//! `settings.rs`, `mempool.rs`, `hostile_*.rs`) did not check: a private
//! pool made active while it already is (nested, or on another thread),
//! configuration strings with whitespace C's `isspace` does not know, and
//! custom backends handing out ranges the allocators cannot hold.
//!
//! Defects these tests found (fixed with them):
//!
//! * `MemPool::activate` of a pool that was already active (a nested
//!   `use_mem_pool` of the same pool, or the pool in use on another thread)
//!   pushed a second route and counted a second use; PyTorch's
//!   `beginAllocateToPool` raises `already recording to mempool_id` then.
//!   `activate` now returns `Result` and refuses with
//!   `AllocError::PoolAlreadyActive`, changing nothing.
//! * a custom pinned backend returning a range that wraps past 2^64 (or a
//!   null address, or a range overlapping a block the allocator holds) was
//!   taken as a block: the wrapped range made `record_stream` and
//!   `check_consistency` overflow (a panic with overflow checks, a block
//!   that matched no address in release), a null one read as an empty buffer
//!   that was never returned, an overlapping one replaced the block held at
//!   that address in the books. Each is now the backend's typed error
//!   (`PinnedError::Backend`), the statistics untouched; the first two are
//!   given back to the backend.
//! * a custom device driver whose `malloc` returned a range overlapping a
//!   segment the allocator holds (the same address twice) had it taken as a
//!   second segment: two live allocations at one address, the first
//!   segment's entry overwritten in the books. It is now the driver's typed
//!   error with nothing changed (and not given back, which could free the
//!   held segment), on the cached and the uncached path; the uncached path
//!   refuses a wrapping range too, as the cached one did since session 37.
//! * configuration strings: strata skipped every Unicode space (a no-break
//!   space, U+3000) where PyTorch's tokenizer skips only C's `isspace`
//!   bytes, so a key or value holding one was accepted where PyTorch
//!   refuses it (an unknown key, an invalid number).
//!
//! Each test names the PyTorch test or source function it follows
//! (`test/test_cuda.py`, `c10/cuda/CUDACachingAllocator.cpp`,
//! `c10/core/AllocatorConfig.h`, `aten/src/ATen/core/CachingHostAllocator.h`).
//! Expected figures come from PyTorch's rules, never from strata's output.

use crate::common;

use common::{sim_device as sim, stat, state};
use parking_lot::Mutex;
use std::sync::Arc;
use strata_alloc::driver::{DriverError, StreamEvents};
use strata_alloc::pinned::{PinnedAllocator, PinnedBackend, PinnedError, SimPinnedBackend};
use strata_alloc::{AllocError, AllocatorConfig, ConfigError, MemPoolOptions, StreamId};

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
const S0: StreamId = StreamId::DEFAULT;

/// PyTorch's default segments, and strata's default expandable segments.
const MODES: [&str; 2] = ["expandable_segments:False", "expandable_segments:True"];

/// The pool id of the segment holding `ptr`, from the snapshot.
fn pool_of(a: &strata_alloc::CachingAllocator, ptr: u64) -> Option<(u64, u64)> {
    a.snapshot()
        .into_iter()
        .find(|s| s.blocks.iter().any(|b| b.address == ptr))
        .map(|s| s.pool_id)
}

// ----- a private pool entered twice ---------------------------------------------------

/// `torch.cuda.use_mem_pool(pool)` calls `beginAllocateToPool(pool.id,
/// filter)`, which scans `captures_underway` (every context recording to a
/// pool, whatever its thread) and raises `beginAllocateToPool: already
/// recording to mempool_id` when the pool is already there. So a nested
/// `with use_mem_pool(pool):` of the pool the thread is in raises, before
/// its `try` (no `endAllocateToPool`, no `releasePool`): the outer context
/// goes on routing to the pool. strata: `AllocError::PoolAlreadyActive`,
/// the route and use count as they were (PyTorch has counted one more use
/// of the pool when it raises, never given back; strata counts none), the
/// pool usable again once the outer guard is gone.
#[test]
fn use_mem_pool_of_the_pool_already_in_use_raises() {
    for mode in MODES {
        let (_, a) = sim(mode, 8 * GIB);
        let pool = a.mem_pool(MemPoolOptions::default());
        let outer = pool.activate().unwrap();
        let x = a.allocate(MIB, S0).unwrap();
        let before = state(&a);
        match pool.activate() {
            Err(AllocError::PoolAlreadyActive { pool: id, .. }) => assert_eq!(id, pool.id()),
            Err(e) => panic!("{mode}: {e}"),
            Ok(_) => panic!("{mode}: the pool was entered twice"),
        }
        let text = pool.activate().err().unwrap().to_string();
        assert!(
            text.contains("already recording to mempool_id"),
            "{mode}: {text}"
        );
        assert!(before == state(&a), "{mode}: nothing changed");
        assert_eq!(pool.use_count(), 2, "{mode}: the pool and one context");
        assert_eq!(a.active_mem_pool(), Some(pool.id()), "{mode}");
        // The outer context still routes to the pool.
        let y = a.allocate(MIB, S0).unwrap();
        assert_eq!(pool_of(&a, y.ptr()), Some(pool.id()), "{mode}");
        drop(outer);
        assert_eq!((pool.use_count(), a.active_mem_pool()), (1, None), "{mode}");
        // Usable again: the next context routes to it.
        {
            let _again = pool.activate().unwrap();
            let z = a.allocate(MIB, S0).unwrap();
            assert_eq!(pool_of(&a, z.ptr()), Some(pool.id()), "{mode}");
            assert_eq!(pool.use_count(), 2, "{mode}");
        }
        drop((x, y));
        assert_eq!(pool.use_count(), 1, "{mode}");
        a.check_consistency().unwrap();
    }
}

/// `captures_underway` is one list for the device's allocator, not one
/// per thread: while one thread is inside `use_mem_pool(pool)`, another
/// thread entering the same pool raises too, and its allocations go on to
/// the default pools. Once the first thread has left, the other may enter.
#[test]
fn use_mem_pool_of_a_pool_another_thread_is_in_raises() {
    let (_, a) = sim("", 8 * GIB);
    let pool = a.mem_pool(MemPoolOptions::default());
    let guard = pool.activate().unwrap();
    std::thread::scope(|sc| {
        sc.spawn(|| {
            assert!(matches!(
                pool.activate(),
                Err(AllocError::PoolAlreadyActive { .. })
            ));
            assert_eq!(a.active_mem_pool(), None, "this thread routes nowhere");
            let t = a.allocate(MIB, S0).unwrap();
            assert_eq!(pool_of(&a, t.ptr()), Some((0, 0)));
        });
    });
    assert_eq!(pool.use_count(), 2);
    drop(guard);
    std::thread::scope(|sc| {
        sc.spawn(|| {
            let _g = pool.activate().unwrap();
            let t = a.allocate(MIB, S0).unwrap();
            assert_eq!(pool_of(&a, t.ptr()), Some(pool.id()));
        });
    });
    assert_eq!(pool.use_count(), 1);
    a.check_consistency().unwrap();
}

/// Nested contexts of different pools are fine (`test_nested_mempool`),
/// but entering an outer pool again from inside an inner one raises (the
/// outer pool is still in `captures_underway`); the inner context stays
/// the one routing, and leaving it routes to the outer pool again.
#[test]
fn reentering_an_outer_pool_from_a_nested_context_raises() {
    let (_, a) = sim("", 8 * GIB);
    let (p1, p2) = (
        a.mem_pool(MemPoolOptions::default()),
        a.mem_pool(MemPoolOptions::default()),
    );
    let g1 = p1.activate().unwrap();
    {
        let _g2 = p2.activate().unwrap();
        assert!(matches!(
            p1.activate(),
            Err(AllocError::PoolAlreadyActive { .. })
        ));
        assert_eq!(a.active_mem_pool(), Some(p2.id()));
        let x = a.allocate(MIB, S0).unwrap();
        assert_eq!(pool_of(&a, x.ptr()), Some(p2.id()));
        assert_eq!((p1.use_count(), p2.use_count()), (2, 2));
    }
    assert_eq!(a.active_mem_pool(), Some(p1.id()));
    let y = a.allocate(MIB, S0).unwrap();
    assert_eq!(pool_of(&a, y.ptr()), Some(p1.id()));
    drop(g1);
    assert_eq!((p1.use_count(), p2.use_count()), (1, 1));
    drop(y);
    a.check_consistency().unwrap();
}

// ----- configuration strings: what counts as whitespace ------------------------------

/// PyTorch's `ConfigTokenizer` drops the bytes for which C's `isspace` is
/// true (space, `\t`, `\n`, `\v`, `\f`, `\r`) anywhere in the string, and
/// keeps every other byte in its token. So those six are ignored even
/// inside a key or a number, and a Unicode space (a no-break space, U+3000
/// ideographic space, U+2028 line separator: bytes above 0x7f) stays in the
/// token: in a key it is an unknown key, in a number `stoull` fails. Each
/// refused string changes nothing.
#[test]
fn allocator_settings_ignore_c_whitespace_only() {
    let c = AllocatorConfig::parse(
        "\t max_split_\x0bsize_mb\n:\r 4\x0c0 ,\n expandable_segments : False \r\n",
    )
    .unwrap();
    assert_eq!(c.max_split_size, Some(40 * MIB));
    assert_eq!(c.expandable_segments, Some(false));

    let (_, a) = sim("max_split_size_mb:64", 8 * GIB);
    let keep = a.allocate_raw(30 * MIB, S0).unwrap();
    let before = state(&a);
    for space in ['\u{a0}', '\u{3000}', '\u{2028}', '\u{85}', '\u{feff}'] {
        let key_first = format!("{space}max_split_size_mb:128");
        let key_inside = format!("max_split{space}_size_mb:128");
        for s in [&key_first, &key_inside] {
            match a.set_allocator_settings(s) {
                Err(AllocError::Config(ConfigError::UnknownKey { .. })) => {}
                other => panic!("{s:?}: expected UnknownKey, got {other:?}"),
            }
            assert!(before == state(&a), "{s:?}");
        }
        let value = format!("max_split_size_mb:{space}128");
        match a.set_allocator_settings(&value) {
            Err(AllocError::Config(ConfigError::BadValue { key, .. })) => {
                assert_eq!(key, "max_split_size_mb", "{value:?}")
            }
            other => panic!("{value:?}: expected BadValue, got {other:?}"),
        }
        assert!(before == state(&a), "{value:?}");
    }
    a.free_raw(keep).unwrap();
    a.check_consistency().unwrap();
}

// ----- custom pinned backends handing out ranges that cannot be held --------------------

/// What the backend below returns from its next `alloc`.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Hand {
    /// A block of the simulated backend (real memory).
    Real,
    /// The last page of the address space, whatever the size.
    Wrapping,
    /// Address 0.
    Null,
    /// The address the previous real block got.
    Duplicate,
}

/// A pinned backend over the simulated one that can be told to return an
/// unusable address; it records the blocks given back to it.
struct Hostile {
    sim: SimPinnedBackend,
    hand: Mutex<Hand>,
    last_real: Mutex<u64>,
    given_back: Mutex<Vec<(u64, u64)>>,
}

impl PinnedBackend for Hostile {
    fn alloc(&self, size: u64) -> Result<u64, DriverError> {
        match *self.hand.lock() {
            Hand::Real => {
                let p = self.sim.alloc(size)?;
                *self.last_real.lock() = p;
                Ok(p)
            }
            Hand::Wrapping => Ok(u64::MAX - 4095),
            Hand::Null => Ok(0),
            Hand::Duplicate => Ok(*self.last_real.lock()),
        }
    }

    fn free(&self, ptr: u64, size: u64) -> Result<(), DriverError> {
        self.given_back.lock().push((ptr, size));
        if ptr == 0 || ptr == u64::MAX - 4095 {
            Ok(())
        } else {
            self.sim.free(ptr, size)
        }
    }

    fn events(&self) -> &dyn StreamEvents {
        self.sim.events()
    }
}

/// PyTorch's `CachingHostAllocator` takes what `cudaHostAlloc` returns;
/// a custom backend (strata's `PinnedBackend`, PyTorch's
/// `HostAllocator` implementations) may return a range the allocator cannot
/// keep books for. Each such block is the backend's typed error, with the
/// statistics, the cached bytes and the blocks held as they were; a
/// wrapping or null block is given back to the backend, a duplicate one is
/// not (giving it back would free the block the allocator holds there).
/// Afterwards the allocator serves and caches as before.
#[test]
fn a_pinned_backend_range_the_allocator_cannot_hold_is_refused() {
    let backend = Arc::new(Hostile {
        sim: SimPinnedBackend::new(None),
        hand: Mutex::new(Hand::Real),
        last_real: Mutex::new(0),
        given_back: Mutex::new(Vec::new()),
    });
    let a = PinnedAllocator::new(Arc::clone(&backend));
    let held = a.allocate(64 << 10).unwrap();
    held.record_stream(StreamId(3)).unwrap();
    let cached = a.allocate(8192).unwrap();
    drop(cached);
    let (stats, bytes) = (a.stats(), a.cached_bytes());
    for hand in [Hand::Wrapping, Hand::Null, Hand::Duplicate] {
        *backend.hand.lock() = hand;
        backend.given_back.lock().clear();
        // 64 KiB: a class with no cached block, so the backend is asked.
        let e = a.allocate(64 << 10).unwrap_err();
        match &e {
            PinnedError::Backend(DriverError::Call { call, .. }) => assert_eq!(*call, "alloc"),
            other => panic!("{hand:?}: {other:?}"),
        }
        assert_eq!(a.stats(), stats, "{hand:?}: statistics unchanged");
        assert_eq!(a.cached_bytes(), bytes, "{hand:?}");
        a.check_consistency().unwrap();
        let back = backend.given_back.lock().clone();
        match hand {
            Hand::Wrapping => assert_eq!(back, [(u64::MAX - 4095, 64 << 10)]),
            Hand::Null => assert_eq!(back, [(0, 64 << 10)]),
            _ => assert!(back.is_empty(), "{back:?}"),
        }
    }
    // The held block is intact: recorded, freed behind its event, reused.
    *backend.hand.lock() = Hand::Real;
    let p = held.ptr();
    drop(held);
    assert_eq!(a.pending_events(), 1);
    backend.sim.complete_all();
    a.process_pending_events();
    assert_eq!(a.allocate(64 << 10).unwrap().ptr(), p);
    a.check_consistency().unwrap();
    a.empty_cache().unwrap();
    assert_eq!(backend.sim.live_blocks(), 0);
}

// ----- statistics after every refused call ------------------------------------------------

/// A sweep of refused calls on a busy allocator (a private pool in use, a
/// block waiting on a stream never seen, a cached block, history on):
/// bad settings, bad fractions, a pool entered twice, a freed handle freed
/// again or recorded on a stream, a foreign handle. Each is a typed error
/// and leaves the statistics, settings and segments as they were; the books
/// stay consistent (statistics equal a recount) after each.
#[test]
fn refused_calls_on_a_busy_allocator_change_nothing() {
    for mode in MODES {
        let (d, a) = sim(mode, 4 * GIB);
        a.record_history(Some(1000));
        let pool = a.mem_pool(MemPoolOptions::default());
        let _route = pool.activate().unwrap();
        let in_pool = a.allocate_raw(3 * MIB, S0).unwrap();
        drop(_route);
        let waiting = a.allocate_raw(5 * MIB, S0).unwrap();
        a.record_stream(&waiting, StreamId(0xdead_beef)).unwrap();
        a.free_raw(waiting).unwrap();
        let freed = a.allocate_raw(700, StreamId(2)).unwrap();
        a.free_raw(freed).unwrap();
        let (_, other) = sim(mode, GIB);
        let foreign = other.allocate_raw(700, S0).unwrap();
        let guard = pool.activate().unwrap();
        let before = (state(&a), d.used_bytes(), a.history().len());
        let refusals: Vec<(&str, Result<(), AllocError>)> = vec![
            (
                "settings",
                a.set_allocator_settings("max_split_size_mb:\u{a0}64"),
            ),
            ("fraction NaN", a.set_memory_fraction(f64::NAN)),
            ("fraction -0.5", a.set_memory_fraction(-0.5)),
            ("fraction 1.5", a.set_memory_fraction(1.5)),
            ("pool twice", pool.activate().map(drop)),
            ("double free", a.free_raw(freed)),
            ("record freed", a.record_stream(&freed, StreamId(9))),
            ("foreign free", a.free_raw(foreign)),
        ];
        for (what, r) in refusals {
            assert!(r.is_err(), "{mode}: {what} was accepted");
            assert!(before.0 == state(&a), "{mode}: {what} changed the state");
            a.check_consistency()
                .unwrap_or_else(|e| panic!("{mode}: {what}: {e}"));
        }
        assert_eq!(d.used_bytes(), before.1, "{mode}");
        drop(guard);
        // The block waiting on the unseen stream is reclaimed by empty_cache
        // (PyTorch's synchronize_and_free_events), the pool's segment stays
        // while the pool holds a live block.
        a.empty_cache().unwrap();
        assert_eq!(stat(&a, "active_bytes.all.current"), 3 * MIB as i64);
        a.free_raw(in_pool).unwrap();
        drop(pool);
        a.empty_cache().unwrap();
        assert_eq!((a.memory_reserved(), d.used_bytes()), (0, 0), "{mode}");
        a.check_consistency().unwrap();
        other.free_raw(foreign).unwrap();
    }
}

// ----- a custom device driver handing out a range already in use -------------------------

/// A driver over the simulator whose `malloc` (and, with a simulator of
/// virtual memory, `reserve`) can be told to return the previous range's
/// address again (a custom driver's bug).
struct Repeating {
    sim: strata_alloc::driver::sim::SimDriver,
    repeat: Mutex<bool>,
    last: Mutex<u64>,
    frees: Mutex<Vec<(u64, u64)>>,
    unreserved: Mutex<Vec<(u64, u64)>>,
}

impl Repeating {
    fn new(sim: strata_alloc::driver::sim::SimDriver) -> Repeating {
        Repeating {
            sim,
            repeat: Mutex::new(false),
            last: Mutex::new(0),
            frees: Mutex::new(Vec::new()),
            unreserved: Mutex::new(Vec::new()),
        }
    }

    fn vm(&self) -> &dyn strata_alloc::driver::VirtualMemory {
        strata_alloc::Driver::virtual_memory(&self.sim).expect("the simulator has virtual memory")
    }
}

impl StreamEvents for Repeating {
    fn create_event(&self) -> Result<strata_alloc::driver::EventHandle, DriverError> {
        self.sim.create_event()
    }
    fn destroy_event(&self, e: strata_alloc::driver::EventHandle) -> Result<(), DriverError> {
        self.sim.destroy_event(e)
    }
    fn record_event(
        &self,
        e: strata_alloc::driver::EventHandle,
        s: StreamId,
    ) -> Result<(), DriverError> {
        self.sim.record_event(e, s)
    }
    fn query_event(&self, e: strata_alloc::driver::EventHandle) -> Result<bool, DriverError> {
        self.sim.query_event(e)
    }
    fn synchronize_event(&self, e: strata_alloc::driver::EventHandle) -> Result<(), DriverError> {
        self.sim.synchronize_event(e)
    }
    fn synchronize_stream(&self, s: StreamId) -> Result<(), DriverError> {
        self.sim.synchronize_stream(s)
    }
}

impl strata_alloc::Driver for Repeating {
    fn device(&self) -> strata_alloc::Device {
        strata_alloc::Device::Cuda(0)
    }
    fn name(&self) -> String {
        "repeating".into()
    }
    fn total_memory(&self) -> u64 {
        self.sim.total_memory()
    }
    fn mem_get_info(&self) -> Result<strata_alloc::MemInfo, DriverError> {
        self.sim.mem_get_info()
    }
    fn malloc(&self, size: u64) -> Result<u64, DriverError> {
        if *self.repeat.lock() {
            return Ok(*self.last.lock());
        }
        let p = self.sim.malloc(size)?;
        *self.last.lock() = p;
        Ok(p)
    }
    fn free(&self, ptr: u64, size: u64) -> Result<(), DriverError> {
        self.frees.lock().push((ptr, size));
        self.sim.free(ptr, size)
    }
    fn virtual_memory(&self) -> Option<&dyn strata_alloc::driver::VirtualMemory> {
        strata_alloc::Driver::virtual_memory(&self.sim)?;
        Some(self)
    }
}

/// PyTorch takes what `cudaMalloc` returns; a custom driver (strata's
/// `Driver`) that returns the address of a segment the allocator already
/// holds gets a typed driver error, as a wrapping range does
/// (`a_driver_range_that_wraps_the_address_space_is_refused`, session 37):
/// nothing changes, nothing is given back (freeing it would free the held
/// segment), and the held segment's block is intact.
#[test]
fn a_driver_range_overlapping_a_held_segment_is_refused() {
    let d = Arc::new(Repeating::new(strata_alloc::driver::sim::SimDriver::new(
        GIB, 0,
    )));
    let a = strata_alloc::CachingAllocator::new(d.clone(), AllocatorConfig::default());
    let held = a.allocate_raw(30 * MIB, S0).unwrap();
    *d.repeat.lock() = true;
    let before = state(&a);
    for size in [30 * MIB, 4096, 5 * MIB] {
        let e = a.allocate_raw(size, S0).unwrap_err();
        assert!(matches!(e, AllocError::Driver { .. }), "{size}: {e}");
        assert!(before == state(&a), "{size}: nothing changed");
        assert!(d.frees.lock().is_empty(), "{size}: nothing given back");
        a.check_consistency().unwrap();
    }
    *d.repeat.lock() = false;
    a.free_raw(held).unwrap();
    a.empty_cache().unwrap();
    assert_eq!(a.memory_reserved(), 0);
    a.check_consistency().unwrap();

    // With caching off (PyTorch's PYTORCH_NO_CUDA_MEMORY_CACHING), each
    // allocation is its own malloc: the same address twice is refused too,
    // and the first allocation stays live and freeable once.
    a.set_caching_enabled(false);
    d.frees.lock().clear();
    let first = a.allocate_raw(MIB, S0).unwrap();
    *d.repeat.lock() = true;
    let e = a.allocate_raw(MIB, S0).unwrap_err();
    assert!(matches!(e, AllocError::Driver { .. }), "{e}");
    assert!(d.frees.lock().is_empty(), "nothing given back");
    *d.repeat.lock() = false;
    a.check_consistency().unwrap();
    a.free_raw(first).unwrap();
    assert!(matches!(
        a.free_raw(first),
        Err(AllocError::InvalidFree { .. })
    ));
    assert_eq!(d.sim.used_bytes(), 0);
    a.check_consistency().unwrap();
}

impl strata_alloc::driver::VirtualMemory for Repeating {
    fn granularity(&self) -> u64 {
        self.vm().granularity()
    }
    fn reserve(&self, size: u64) -> Result<u64, DriverError> {
        if *self.repeat.lock() {
            return Ok(*self.last.lock());
        }
        let p = self.vm().reserve(size)?;
        *self.last.lock() = p;
        Ok(p)
    }
    fn unreserve(&self, p: u64, size: u64) -> Result<(), DriverError> {
        self.unreserved.lock().push((p, size));
        self.vm().unreserve(p, size)
    }
    fn create(&self, size: u64) -> Result<strata_alloc::driver::PhysHandle, DriverError> {
        self.vm().create(size)
    }
    fn release(&self, h: strata_alloc::driver::PhysHandle) -> Result<(), DriverError> {
        self.vm().release(h)
    }
    fn map(
        &self,
        p: u64,
        size: u64,
        h: strata_alloc::driver::PhysHandle,
    ) -> Result<(), DriverError> {
        self.vm().map(p, size, h)
    }
    fn set_access(&self, p: u64, size: u64) -> Result<(), DriverError> {
        self.vm().set_access(p, size)
    }
    fn unmap(&self, p: u64, size: u64) -> Result<(), DriverError> {
        self.vm().unmap(p, size)
    }
}

/// The expandable-segment counterpart of the test above: a `reserve` that
/// returns a range the allocator already holds as another stream's segment
/// is refused as the driver's error, with nothing changed and the range not
/// unreserved (that would release the held segment's addresses); the held
/// segment's allocation stays usable and `empty_cache` gives everything back.
/// (Before: a second segment over the same addresses, whose failed map left
/// it in the books, and `empty_cache` then failed with "not a reservation".)
#[test]
fn a_reserve_range_overlapping_a_held_reservation_is_refused() {
    let d = Arc::new(Repeating::new(strata_alloc::driver::sim::SimDriver::new(
        GIB,
        2 * MIB,
    )));
    let a = strata_alloc::CachingAllocator::new(d.clone(), AllocatorConfig::default());
    assert!(a.expandable_segments());
    let held = a.allocate_raw(30 * MIB, S0).unwrap();
    *d.repeat.lock() = true;
    let before = state(&a);
    let e = a.allocate_raw(30 * MIB, StreamId(1)).unwrap_err();
    assert!(matches!(e, AllocError::Driver { .. }), "{e}");
    assert!(e.to_string().contains("already holds"), "{e}");
    assert!(before == state(&a), "nothing changed");
    assert!(d.unreserved.lock().is_empty(), "nothing unreserved");
    a.check_consistency().unwrap();
    *d.repeat.lock() = false;
    let other = a.allocate_raw(30 * MIB, StreamId(1)).unwrap();
    assert!(
        other.ptr() >= held.ptr() + held.size() || held.ptr() >= other.ptr() + other.size(),
        "two live allocations overlap"
    );
    a.free_raw(held).unwrap();
    a.free_raw(other).unwrap();
    a.empty_cache().unwrap();
    assert_eq!(a.memory_reserved(), 0);
    assert_eq!(d.sim.used_bytes(), 0);
    a.check_consistency().unwrap();
}

// ----- a random walk over the public API, refused calls included ---------------------------

/// In the manner of `test_allocator_fuzz` (random allocations and frees,
/// the statistics checked against the live set after each step), but over
/// the whole public surface and with refused calls mixed in: allocations on
/// a few streams and one never seen before, frees, frees of freed handles,
/// `record_stream` on live and freed handles, events completing, private
/// pools entered (nested, and entered twice, which PyTorch refuses),
/// `empty_cache`, memory fractions (valid, NaN, negative, above 1),
/// settings strings (valid and invalid), statistic resets. After every step
/// the books are consistent (statistics equal a recount, segments tile,
/// free indexes agree) and the device's used bytes are the reserved bytes;
/// after every refused call nothing changed. (Run locally with 80 seeds and
/// devices of 2 GiB, 512 MiB and 96 MiB: all pass.)
#[test]
fn a_random_walk_over_the_api_keeps_the_books() {
    let settings_ok = [
        "max_split_size_mb:40",
        "roundup_power2_divisions:4",
        "garbage_collection_threshold:0.6,per_process_memory_fraction:0.9",
        "",
    ];
    let settings_bad = [
        "max_split_size_mb:\u{a0}40",
        "max_split_size_mb:19",
        "no_such_key:1",
        "roundup_power2_divisions:[1:3]",
        "garbage_collection_threshold:1",
    ];
    let streams = [S0, StreamId(1), StreamId(2), StreamId(u64::MAX - 7)];
    for mode in MODES {
        for seed in 0..8u64 {
            // Even seeds: a roomy device; odd ones: a device of 96 MiB (out
            // of memory often, the release-and-retry path taken) with a
            // short history ring recording.
            let (d, a) = sim(mode, if seed % 2 == 0 { 2 * GIB } else { 96 * MIB });
            if seed % 2 == 1 {
                a.record_history(Some(50));
            }
            let mut rng = common::Lcg(seed * 7919 + 1);
            let mut live: Vec<strata_alloc::RawAllocation> = Vec::new();
            let mut freed: Vec<strata_alloc::RawAllocation> = Vec::new();
            for epoch in 0..4 {
                let pools: Vec<strata_alloc::MemPool> = (0..3)
                    .map(|i| {
                        a.mem_pool(MemPoolOptions {
                            use_on_oom: i == 0,
                            no_split: i == 1,
                        })
                    })
                    .collect();
                let mut guards: Vec<(usize, strata_alloc::MemPoolGuard<'_>)> = Vec::new();
                for step in 0..250 {
                    let at = format!("{mode} seed {seed} epoch {epoch} step {step}");
                    let op = rng.below(100);
                    let before = state(&a);
                    let refused: Option<Result<(), AllocError>> = match op {
                        0..=34 => {
                            let size = match rng.below(4) {
                                0 => 1 + rng.below(4096),
                                1 => 1 + rng.below(MIB),
                                2 => MIB + rng.below(20 * MIB),
                                _ => 20 * MIB + rng.below(200 * MIB),
                            };
                            match a.allocate_raw(size, rng.pick(&streams)) {
                                Ok(r) => live.push(r),
                                Err(e) => assert!(e.is_out_of_memory(), "{at}: {e}"),
                            }
                            None
                        }
                        35..=59 if !live.is_empty() => {
                            let r = live.swap_remove(rng.below(live.len() as u64) as usize);
                            a.free_raw(r).unwrap();
                            freed.push(r);
                            None
                        }
                        60..=63 if !freed.is_empty() => {
                            let r = freed[rng.below(freed.len() as u64) as usize];
                            // A freed handle whose block was handed out again
                            // is stale too (its generation moved on).
                            if rng.below(2) == 0 {
                                Some(a.free_raw(r))
                            } else {
                                Some(a.record_stream(&r, rng.pick(&streams)))
                            }
                        }
                        64..=71 if !live.is_empty() => {
                            let r = live[rng.below(live.len() as u64) as usize];
                            a.record_stream(&r, rng.pick(&streams)).unwrap();
                            None
                        }
                        72..=76 => {
                            if rng.below(3) == 0 {
                                d.complete_all_events();
                            } else {
                                d.complete_stream(rng.pick(&streams));
                            }
                            None
                        }
                        77..=81 => {
                            let k = rng.below(3) as usize;
                            if guards.iter().any(|(p, _)| *p == k) {
                                Some(pools[k].activate().map(drop))
                            } else {
                                guards.push((k, pools[k].activate().unwrap()));
                                None
                            }
                        }
                        82..=85 => {
                            guards.pop();
                            None
                        }
                        86..=88 => {
                            a.empty_cache().unwrap();
                            None
                        }
                        89..=91 => {
                            let f = [0.5, 1.0, f64::NAN, -0.25, 1.5, f64::INFINITY]
                                [rng.below(6) as usize];
                            match a.set_memory_fraction(f) {
                                Ok(()) => None,
                                Err(e) => Some(Err(e)),
                            }
                        }
                        92..=95 => {
                            if rng.below(2) == 0 {
                                a.set_allocator_settings(rng.pick(&settings_ok))
                                    .unwrap_or_else(|e| panic!("{at}: {e}"));
                                None
                            } else {
                                Some(a.set_allocator_settings(rng.pick(&settings_bad)))
                            }
                        }
                        96..=97 => {
                            a.reset_peak_memory_stats();
                            None
                        }
                        98 => {
                            a.reset_accumulated_memory_stats();
                            None
                        }
                        _ => {
                            let _ = a.snapshot();
                            None
                        }
                    };
                    if let Some(r) = refused {
                        assert!(r.is_err(), "{at}: op {op} was accepted");
                        assert!(before == state(&a), "{at}: op {op} changed the state");
                    }
                    a.check_consistency()
                        .unwrap_or_else(|e| panic!("{at}: op {op}: {e}"));
                    assert_eq!(d.used_bytes(), a.memory_reserved(), "{at}: op {op}");
                }
                drop(guards);
                drop(pools);
                a.check_consistency().unwrap();
            }
            for r in live.drain(..) {
                a.free_raw(r).unwrap();
            }
            d.complete_all_events();
            a.empty_cache().unwrap();
            assert_eq!(
                (a.memory_reserved(), d.used_bytes()),
                (0, 0),
                "{mode} {seed}"
            );
            assert_eq!(stat(&a, "active_bytes.all.current"), 0, "{mode} {seed}");
            a.check_consistency().unwrap();
        }
    }
}
