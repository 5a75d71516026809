//! Private memory pools (`MemPool`): PyTorch's `TestMemPool` behaviours
//! (`test/test_cuda.py`: ids, use counts, routing by thread, snapshots,
//! `empty_cache`, deleting a pool, `no_split`, `use_on_oom`), and a property
//! test of the separation between pools on random sequences.

use proptest::prelude::*;
use std::sync::Arc;
use strata_alloc::driver::sim::SimDriver;
use strata_alloc::snapshot::SegmentSnapshot;
use strata_alloc::{
    AllocError, Allocation, AllocatorConfig, CachingAllocator, MemPoolOptions, StreamId,
};

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
const S0: StreamId = StreamId::DEFAULT;
const MODES: [&str; 2] = ["expandable_segments:False", "expandable_segments:True"];

fn sim(conf: &str, capacity: u64) -> Arc<CachingAllocator> {
    let d = Arc::new(SimDriver::new(capacity, 2 * MIB).with_auto_complete_events());
    CachingAllocator::new(d, AllocatorConfig::parse(conf).unwrap())
}

/// The pool id of the segment holding `ptr`.
fn pool_of(a: &CachingAllocator, ptr: u64) -> Option<(u64, u64)> {
    a.snapshot()
        .into_iter()
        .find(|s| s.blocks.iter().any(|b| b.address == ptr))
        .map(|s| s.pool_id)
}

/// `MemPoolOptions` with `use_on_oom` set.
const USE_ON_OOM: MemPoolOptions = MemPoolOptions {
    use_on_oom: true,
    no_split: false,
};

/// Leaves a free block of `size` bytes cached in `pool` (allocated there,
/// then freed).
fn cache_in(a: &Arc<CachingAllocator>, pool: &strata_alloc::MemPool, size: u64) {
    let _g = pool.activate().unwrap();
    drop(a.allocate(size, S0).unwrap());
}

fn holds(segs: &[SegmentSnapshot], ptr: u64) -> bool {
    segs.iter()
        .any(|s| s.blocks.iter().any(|b| b.address == ptr))
}

#[test]
fn pools_have_distinct_ids_and_the_default_pool_is_zero() {
    let a = sim("", 8 * GIB);
    let p1 = a.mem_pool(MemPoolOptions::default());
    let p2 = a.mem_pool(MemPoolOptions::default());
    // PyTorch's ids are `(0, n)`, n from one process-wide counter starting
    // at 1 (other tests make pools meanwhile, so only the order is known).
    assert_eq!(p1.id().0, 0);
    assert_eq!(p2.id().0, 0);
    assert!(p1.id().1 >= 1);
    assert!(p2.id().1 > p1.id().1);
    let x = a.allocate(MIB, S0).unwrap();
    assert_eq!(pool_of(&a, x.ptr()), Some((0, 0)));
}

#[test]
fn use_count_is_one_plus_the_active_guards() {
    let a = sim("", 8 * GIB);
    let p = a.mem_pool(MemPoolOptions::default());
    assert_eq!(p.use_count(), 1);
    let q = a.mem_pool(MemPoolOptions::default());
    {
        let _g = p.activate().unwrap();
        assert_eq!(p.use_count(), 2);
        {
            // Another pool nests; the same pool again is refused (PyTorch's
            // "already recording to mempool_id") and counts no use.
            let _h = q.activate().unwrap();
            assert_eq!((p.use_count(), q.use_count()), (2, 2));
            assert!(matches!(
                p.activate(),
                Err(strata_alloc::AllocError::PoolAlreadyActive { .. })
            ));
            assert_eq!(p.use_count(), 2);
        }
        assert_eq!((p.use_count(), q.use_count()), (2, 1));
    }
    assert_eq!(p.use_count(), 1);
}

#[test]
fn allocations_inside_the_guard_come_from_the_pool() {
    for conf in MODES {
        let a = sim(conf, 8 * GIB);
        let p = a.mem_pool(MemPoolOptions::default());
        let (small, large) = {
            let _g = p.activate().unwrap();
            (
                a.allocate(4096, S0).unwrap(),
                a.allocate(30 * MIB, S0).unwrap(),
            )
        };
        let outside = a.allocate(30 * MIB, S0).unwrap();
        let segs = p.snapshot();
        assert!(
            holds(&segs, small.ptr()) && holds(&segs, large.ptr()),
            "{conf}"
        );
        assert!(!holds(&segs, outside.ptr()), "{conf}");
        assert!(
            segs.iter().all(|s| s.pool_id == p.id() && !s.is_expandable),
            "{conf}"
        );
        assert_eq!(pool_of(&a, outside.ptr()), Some((0, 0)), "{conf}");
        // The pool's segments are counted with everything else.
        let reserved: u64 = a.snapshot().iter().map(|s| s.total_size).sum();
        assert_eq!(reserved, a.memory_reserved(), "{conf}");
        assert_eq!(a.memory_allocated(), 4096 + 60 * MIB, "{conf}");
        a.check_consistency().unwrap();
    }
}

#[test]
fn nested_guards_route_to_the_latest_pool() {
    let a = sim("", 8 * GIB);
    let p1 = a.mem_pool(MemPoolOptions::default());
    let p2 = a.mem_pool(MemPoolOptions::default());
    assert_eq!(a.active_mem_pool(), None);
    let _g1 = p1.activate().unwrap();
    assert_eq!(a.active_mem_pool(), Some(p1.id()));
    let x = a.allocate(MIB, S0).unwrap();
    let y = {
        let _g2 = p2.activate().unwrap();
        assert_eq!(a.active_mem_pool(), Some(p2.id()));
        a.allocate(MIB, S0).unwrap()
    };
    assert_eq!(a.active_mem_pool(), Some(p1.id()));
    let z = a.allocate(MIB, S0).unwrap();
    assert_eq!(pool_of(&a, x.ptr()), Some(p1.id()));
    assert_eq!(pool_of(&a, y.ptr()), Some(p2.id()));
    assert_eq!(pool_of(&a, z.ptr()), Some(p1.id()));
}

#[test]
fn a_guard_routes_only_its_own_thread() {
    let a = sim("", 8 * GIB);
    let p = a.mem_pool(MemPoolOptions::default());
    let _g = p.activate().unwrap();
    let mine = a.allocate(MIB, S0).unwrap();
    let a2 = Arc::clone(&a);
    let theirs = std::thread::spawn(move || a2.allocate(MIB, S0).unwrap())
        .join()
        .unwrap();
    assert_eq!(pool_of(&a, mine.ptr()), Some(p.id()));
    assert_eq!(pool_of(&a, theirs.ptr()), Some((0, 0)));
    drop(theirs);
    // Another thread's pool is its own: routing there leaves this one alone.
    let q = a.mem_pool(MemPoolOptions::default());
    let a3 = Arc::clone(&a);
    std::thread::scope(|sc| {
        sc.spawn(|| {
            assert_eq!(a3.active_mem_pool(), None, "routes are per thread");
            let _h = q.activate().unwrap();
            let t = a3.allocate(MIB, S0).unwrap();
            assert_eq!(pool_of(&a3, t.ptr()), Some(q.id()));
        });
    });
    let again = a.allocate(MIB, S0).unwrap();
    assert_eq!(pool_of(&a, again.ptr()), Some(p.id()));
}

#[test]
fn freed_blocks_go_back_to_their_pool_whoever_frees_them() {
    for conf in MODES {
        let a = sim(conf, 8 * GIB);
        let p = a.mem_pool(MemPoolOptions::default());
        let x = {
            let _g = p.activate().unwrap();
            a.allocate(30 * MIB, S0).unwrap()
        };
        let ptr = x.ptr();
        // Freed on another thread, outside any guard.
        std::thread::spawn(move || drop(x)).join().unwrap();
        let reserved = a.memory_reserved();
        // The default pools do not take it ...
        let d = a.allocate(30 * MIB, S0).unwrap();
        assert_ne!(d.ptr(), ptr, "{conf}");
        assert!(a.memory_reserved() > reserved, "{conf}");
        // ... the pool does.
        let r = {
            let _g = p.activate().unwrap();
            a.allocate(30 * MIB, S0).unwrap()
        };
        assert_eq!(r.ptr(), ptr, "{conf}");
        a.check_consistency().unwrap();
    }
}

#[test]
fn the_pool_does_not_take_the_default_pools_free_blocks() {
    for conf in MODES {
        let a = sim(conf, 8 * GIB);
        drop(a.allocate(30 * MIB, S0).unwrap());
        let cached = a.memory_reserved();
        let p = a.mem_pool(MemPoolOptions::default());
        let _g = p.activate().unwrap();
        let x = a.allocate(30 * MIB, S0).unwrap();
        assert_eq!(pool_of(&a, x.ptr()), Some(p.id()), "{conf}");
        assert_eq!(a.memory_reserved(), cached + 30 * MIB, "{conf}");
    }
}

#[test]
fn empty_cache_keeps_a_live_pools_segments_and_dropping_the_pool_releases_them() {
    for conf in MODES {
        let a = sim(conf, 8 * GIB);
        let p = a.mem_pool(MemPoolOptions::default());
        {
            let _g = p.activate().unwrap();
            drop(a.allocate(30 * MIB, S0).unwrap());
            drop(a.allocate(4096, S0).unwrap());
        }
        let x = a.allocate(30 * MIB, S0).unwrap();
        drop(x);
        a.empty_cache().unwrap();
        let segs = p.snapshot();
        assert_eq!(segs.len(), 2, "{conf}: the pool's free segments stay");
        assert_eq!(a.memory_reserved(), 30 * MIB + 2 * MIB, "{conf}");
        drop(p);
        assert_eq!(a.memory_reserved(), 0, "{conf}");
        assert!(a.snapshot().is_empty(), "{conf}");
        a.check_consistency().unwrap();
    }
}

#[test]
fn a_dropped_pools_live_blocks_keep_their_segments_until_freed_and_emptied() {
    let a = sim("", 8 * GIB);
    let p = a.mem_pool(MemPoolOptions::default());
    let id = p.id();
    let x = {
        let _g = p.activate().unwrap();
        a.allocate(30 * MIB, S0).unwrap()
    };
    drop(p);
    assert_eq!(pool_of(&a, x.ptr()), Some(id));
    assert_eq!(a.memory_reserved(), 30 * MIB);
    drop(x);
    // Still cached in the (freeable) pool until the cache is emptied.
    assert_eq!(a.memory_reserved(), 30 * MIB);
    let d = a.allocate(30 * MIB, S0).unwrap();
    assert_eq!(pool_of(&a, d.ptr()), Some((0, 0)));
    drop(d);
    a.empty_cache().unwrap();
    assert_eq!(a.memory_reserved(), 0);
    // A new pool reuses nothing of the old one but works as usual.
    let q = a.mem_pool(MemPoolOptions::default());
    assert_eq!(q.id().0, 0);
    assert!(
        q.id().1 > id.1,
        "a new pool never takes a dropped pool's id"
    );
    let y = {
        let _g = q.activate().unwrap();
        a.allocate(MIB, S0).unwrap()
    };
    assert_eq!(pool_of(&a, y.ptr()), Some(q.id()));
    a.check_consistency().unwrap();
}

#[test]
fn no_split_hands_blocks_out_whole() {
    let a = sim("", 8 * GIB);
    let whole = a.mem_pool(MemPoolOptions {
        no_split: true,
        ..Default::default()
    });
    let split = a.mem_pool(MemPoolOptions::default());
    let take = |p: &strata_alloc::MemPool| {
        let _g = p.activate().unwrap();
        let v: Vec<Allocation> = (0..2).map(|_| a.allocate(4096, S0).unwrap()).collect();
        v
    };
    let w = take(&whole);
    let s = take(&split);
    // Each small request of the no_split pool takes a whole 2 MiB segment
    // (and counts as 2 MiB allocated); the other pool splits one.
    assert_eq!(whole.snapshot().len(), 2);
    assert_eq!(split.snapshot().len(), 1);
    assert!(whole
        .snapshot()
        .iter()
        .all(|g| g.blocks.len() == 1 && g.allocated_size == 2 * MIB));
    drop((w, s));
}

#[test]
fn use_on_oom_lends_a_pools_free_block_to_the_default_pools() {
    for conf in MODES {
        let a = sim(conf, 256 * MIB);
        let lender = a.mem_pool(USE_ON_OOM);
        cache_in(&a, &lender, 100 * MIB);
        // The default pools fill what is left of the device.
        let hog = a.allocate(150 * MIB, S0).unwrap();
        let x = a.allocate(100 * MIB, S0).unwrap();
        assert_eq!(pool_of(&a, x.ptr()), Some(lender.id()), "{conf}");
        drop(x);
        drop(hog);
        a.check_consistency().unwrap();
    }
}

#[test]
fn a_pool_without_use_on_oom_or_dropped_is_not_used_on_oom() {
    for conf in MODES {
        let a = sim(conf, 256 * MIB);
        let keeper = a.mem_pool(MemPoolOptions::default());
        cache_in(&a, &keeper, 100 * MIB);
        let hog = a.allocate(150 * MIB, S0).unwrap();
        let e = a.allocate(100 * MIB, S0).unwrap_err();
        assert!(matches!(e, AllocError::OutOfMemory(_)), "{conf}: {e}");
        assert_eq!(
            keeper.snapshot().len(),
            1,
            "{conf}: the pool kept its segment"
        );
        drop(hog);
        // A dropped use_on_oom pool lends nothing (its memory went back).
        let lender = a.mem_pool(USE_ON_OOM);
        {
            let _g = lender.activate().unwrap();
            let _y = a.allocate(50 * MIB, S0).unwrap();
        }
        drop(lender);
        let big = a.allocate(150 * MIB, S0).unwrap();
        assert_eq!(pool_of(&a, big.ptr()), Some((0, 0)), "{conf}");
        a.check_consistency().unwrap();
    }
}

#[derive(Clone, Debug)]
enum Op {
    /// Allocate `size` bytes on the thread's current route (`None`: the
    /// default pools; `Some(i)`: pool `i`).
    Alloc { size: u64, route: Option<usize> },
    /// Free the `k`-th live allocation (modulo their number).
    Free { k: usize },
    /// Empty the cache.
    Empty,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (prop_oneof![1u64..4096, 4096u64..(2 << 20), (1u64 << 20)..(40 << 20)],
              prop_oneof![Just(None), (0usize..2).prop_map(Some)])
            .prop_map(|(size, route)| Op::Alloc { size, route }),
        4 => any::<usize>().prop_map(|k| Op::Free { k }),
        1 => Just(Op::Empty),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: crate::common::cases(64), ..ProptestConfig::default() })]

    /// On random sequences over two private pools and the default pools,
    /// in both segment modes: every block lies in a segment of the pool
    /// that was active when it was allocated; the statistics agree with the
    /// books; and once everything is freed and the pools dropped, an
    /// `empty_cache` returns every byte to the driver.
    #[test]
    fn blocks_stay_in_the_pool_they_were_allocated_from(
        ops in proptest::collection::vec(op(), 1..120),
        expandable in any::<bool>(),
        no_split in any::<bool>(),
    ) {
        let conf = MODES[expandable as usize];
        let a = sim(conf, 4 * GIB);
        let pools = [
            a.mem_pool(MemPoolOptions { no_split, ..Default::default() }),
            a.mem_pool(MemPoolOptions::default()),
        ];
        let mut live: Vec<(Allocation, (u64, u64))> = Vec::new();
        for op in ops {
            match op {
                Op::Alloc { size, route } => {
                    let _g = route.map(|i| pools[i].activate().unwrap());
                    let want = route.map_or((0, 0), |i| pools[i].id());
                    let x = a.allocate(size, S0).unwrap();
                    live.push((x, want));
                }
                Op::Free { k } => {
                    if !live.is_empty() {
                        let i = k % live.len();
                        live.swap_remove(i);
                    }
                }
                Op::Empty => a.empty_cache().unwrap(),
            }
            for (x, want) in &live {
                prop_assert_eq!(pool_of(&a, x.ptr()), Some(*want));
            }
            a.check_consistency().map_err(TestCaseError::fail)?;
            let allocated: u64 = a.snapshot().iter().map(|s| s.allocated_size).sum();
            prop_assert_eq!(allocated, a.memory_allocated());
        }
        live.clear();
        drop(pools);
        a.empty_cache().unwrap();
        prop_assert_eq!(a.memory_reserved(), 0);
        prop_assert!(a.snapshot().is_empty());
    }
}

/// PyTorch's `test_mempool_with_allocator` sequence without the user
/// allocator: three 1 MiB requests in a pool pack two to a 2 MiB
/// small-pool segment (1, 1, then 2 segments); the use count is 2 inside
/// the guard and 1 after; dropping the pool returns its memory.
#[test]
fn one_mib_requests_pack_two_to_a_small_segment_of_the_pool() {
    for conf in MODES {
        let a = sim(conf, 8 * GIB);
        let pool = a.mem_pool(MemPoolOptions::default());
        let out0 = {
            let _g = pool.activate().unwrap();
            assert_eq!(pool.use_count(), 2);
            a.allocate(MIB, S0).unwrap()
        };
        assert_eq!(pool.use_count(), 1);
        let _g = pool.activate().unwrap();
        assert_eq!(pool.snapshot().len(), 1, "{conf}");
        let out1 = a.allocate(MIB, S0).unwrap();
        assert_eq!(pool.snapshot().len(), 1, "{conf}");
        let out2 = a.allocate(MIB, S0).unwrap();
        assert_eq!(pool.snapshot().len(), 2, "{conf}");
        assert!(pool.snapshot().iter().all(|s| s.segment_type == "small"));
        drop(_g);
        drop((out0, out1, out2));
        drop(pool);
        assert_eq!(a.memory_reserved(), 0, "{conf}");
    }
}

/// An allocator whose memory fraction allows `mib` MiB on a 1 GiB device.
fn limited(conf: &str, mib: u64) -> Arc<CachingAllocator> {
    let a = sim(conf, GIB);
    a.set_memory_fraction(mib as f64 / 1024.0).unwrap();
    a
}

/// PyTorch's `test_mempool_limited_memory_with_allocator` (without the
/// user allocator): with 88 MiB allowed, a `use_on_oom` pool serves a
/// request the default pools cannot, a plain pool never does, and the
/// lent block comes back to its pool.
#[test]
fn a_use_on_oom_pool_absorbs_what_the_default_pools_cannot_serve() {
    for conf in MODES {
        let a = limited(conf, 88);
        let keep = a.mem_pool(MemPoolOptions::default());
        let lend = a.mem_pool(USE_ON_OOM);
        let x = {
            let _g = keep.activate().unwrap();
            a.allocate(40 * MIB, S0).unwrap()
        };
        let y = {
            let _g = lend.activate().unwrap();
            a.allocate(40 * MIB, S0).unwrap()
        };
        let y_ptr = y.ptr();
        let e = a.allocate(40 * MIB, S0).unwrap_err();
        assert!(matches!(e, AllocError::OutOfMemory(_)), "{conf}: {e}");
        drop((x, y));
        let c = a.allocate(30 * MIB, S0).unwrap();
        assert_eq!(c.ptr(), y_ptr, "{conf}: the lending pool served it");
        let e = a.allocate(30 * MIB, S0).unwrap_err();
        assert!(matches!(e, AllocError::OutOfMemory(_)), "{conf}: {e}");
        let c_ptr = c.ptr();
        drop(c);
        let z = {
            let _g = lend.activate().unwrap();
            a.allocate(20 * MIB, S0).unwrap()
        };
        assert_eq!(
            z.ptr(),
            c_ptr,
            "{conf}: the lent block went back to its pool"
        );
        drop(z);
        drop((lend, keep));
        assert_eq!(a.memory_reserved(), 0, "{conf}");
        a.check_consistency().unwrap();
    }
}

/// PyTorch's `test_deleted_mempool_not_used_on_oom`: ten `use_on_oom`
/// pools made, used and dropped, then one live one: the fallback uses the
/// live pool only, twice.
#[test]
fn only_live_use_on_oom_pools_serve_the_fallback() {
    for conf in MODES {
        let a = limited(conf, 48);
        for _ in 0..10 {
            cache_in(&a, &a.mem_pool(USE_ON_OOM), 40 * MIB);
        }
        assert_eq!(
            a.memory_reserved(),
            0,
            "{conf}: dropped pools gave their memory back"
        );
        let live = a.mem_pool(USE_ON_OOM);
        cache_in(&a, &live, 40 * MIB);
        let b = a.allocate(20 * MIB, S0).unwrap();
        let c = a.allocate(20 * MIB, S0).unwrap();
        assert_eq!(pool_of(&a, b.ptr()), Some(live.id()), "{conf}");
        assert_eq!(pool_of(&a, c.ptr()), Some(live.id()), "{conf}");
        drop((b, c, live));
        assert_eq!(a.memory_reserved(), 0, "{conf}");
    }
}

/// PyTorch's `test_mempool_no_split`: two 4 MiB requests in each pool; the
/// `no_split` pool has more segments, one block each, and fewer blocks.
#[test]
fn a_no_split_pool_opens_a_segment_per_block() {
    let a = sim("", 8 * GIB);
    let split = a.mem_pool(MemPoolOptions::default());
    let whole = a.mem_pool(MemPoolOptions {
        no_split: true,
        ..Default::default()
    });
    let mut keep = Vec::new();
    for _ in 0..2 {
        for p in [&split, &whole] {
            let _g = p.activate().unwrap();
            keep.push(a.allocate(4 * MIB, S0).unwrap());
        }
    }
    let (s, w) = (split.snapshot(), whole.snapshot());
    assert!(w.len() > s.len(), "{} against {}", w.len(), s.len());
    assert!(w.iter().all(|g| g.blocks.len() == 1));
    let blocks = |v: &[SegmentSnapshot]| v.iter().map(|g| g.blocks.len()).sum::<usize>();
    assert!(blocks(&w) < blocks(&s));
}

/// PyTorch's `test_mempool_ctx_multithread`: while the main thread is inside
/// a pool (whose freed 1 MiB block is cached there), another thread's
/// 1 MiB request is served by the default pools' segment, next to the main
/// thread's earlier block: two segments in all.
#[test]
fn another_thread_does_not_take_a_routed_threads_pool_block() {
    let a = sim("", 8 * GIB);
    let pool = a.mem_pool(MemPoolOptions::default());
    let out1 = a.allocate(MIB, S0).unwrap();
    let _g = pool.activate().unwrap();
    drop(a.allocate(MIB, S0).unwrap());
    let a2 = Arc::clone(&a);
    let (segments, theirs) = std::thread::spawn(move || {
        let x = a2.allocate(MIB, S0).unwrap();
        (a2.snapshot().len(), x)
    })
    .join()
    .unwrap();
    assert_eq!(segments, 2);
    assert_eq!(pool_of(&a, theirs.ptr()), pool_of(&a, out1.ptr()));
    assert_eq!(pool_of(&a, theirs.ptr()), Some((0, 0)));
}
