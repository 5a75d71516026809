//! The cache-hit path allocates nothing on the heap: a counting global
//! allocator watches the thread while it allocates and frees cached blocks.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::Arc;
use strata_alloc::driver::sim::SimDriver;
use strata_alloc::{AllocatorConfig, CachingAllocator, StreamId};

struct Counting;

thread_local! {
    static HEAP_CALLS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: every call is forwarded unchanged to the system allocator, which
// upholds GlobalAlloc's contract; the counter is a const-initialised
// thread-local Cell, which needs no allocation and cannot recurse.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        HEAP_CALLS.with(|c| c.set(c.get() + 1));
        // SAFETY: same layout contract as our caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        HEAP_CALLS.with(|c| c.set(c.get() + 1));
        // SAFETY: `ptr` came from `System.alloc` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        HEAP_CALLS.with(|c| c.set(c.get() + 1));
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn heap_calls() -> u64 {
    HEAP_CALLS.with(|c| c.get())
}

#[test]
fn cache_hits_do_not_touch_the_heap() {
    for conf in ["expandable_segments:True", "expandable_segments:False"] {
        let driver = Arc::new(SimDriver::h100());
        let a = CachingAllocator::new(driver.clone(), AllocatorConfig::parse(conf).unwrap());
        let sizes = [512u64, 3000, 1 << 20, (1 << 20) + 1, 7 << 20, 64 << 20];
        let round = |a: &CachingAllocator| {
            for (i, &s) in sizes.iter().enumerate() {
                let r = a.allocate_raw(s, StreamId::DEFAULT).unwrap();
                let r2 = a.allocate_raw(s / 2 + 1, StreamId::DEFAULT).unwrap();
                let r3 = a
                    .allocate_raw(sizes[(i + 3) % sizes.len()], StreamId::DEFAULT)
                    .unwrap();
                a.free_raw(r).unwrap();
                a.free_raw(r3).unwrap();
                a.free_raw(r2).unwrap();
            }
        };
        // Warm up with the same pattern: the cache then holds the blocks, and
        // the slab and free-block bins have their working capacity.
        for _ in 0..100 {
            round(&a);
        }
        let device_calls = driver.call_count("malloc") + driver.call_count("map");
        let before = heap_calls();
        for _ in 0..2_000 {
            round(&a);
        }
        assert_eq!(
            heap_calls() - before,
            0,
            "{conf}: heap touched on the cache-hit path"
        );
        assert_eq!(
            driver.call_count("malloc") + driver.call_count("map"),
            device_calls,
            "{conf}: the device was asked for memory on cache hits"
        );
    }
}
