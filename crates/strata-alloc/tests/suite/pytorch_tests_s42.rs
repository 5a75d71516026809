//! PyTorch's allocator tests, session 42: the tests of `test/test_cuda.py`
//! that no earlier file mirrors and that strata can express.
//!
//! Most of them are CUDA-graph tests. strata has no graph capture (see
//! `docs/allocator.md`, "Not implemented from PyTorch"), but what these tests
//! check of the allocator is the private pool a capture allocates from, and
//! a capture's pool is the same `PrivatePool` of PyTorch's caching allocator
//! that a `torch.cuda.MemPool` is: `capture_begin(pool)` is
//! `beginAllocateToPool(pool)` with a stream filter, `del graph` is
//! `releasePool`. So each graph test is replayed here with a [`MemPool`]
//! standing for the capture's pool: the allocations the captured code makes
//! are made with the pool active, deleting the graph is dropping the pool,
//! and sharing a pool between graphs (`capture_begin(g0.pool())`,
//! `graph_pool_handle()`) is activating one `MemPool` for both. What the
//! graph adds on top (the replay, its RNG seed and offset holders, which are
//! allocated outside the pool) is left out and said so at each test.
//!
//! The other tests: `TestMemPool.test_mempool_id` (pool ids come from one
//! process-wide counter, fixed this session), `TestBlockStateAbsorption.
//! test_check_pool_live_allocations` and `TestCuda.test_device_memory_used`.
//!
//! Expected figures are PyTorch's, from the tests themselves or worked out
//! in the comments from `c10/cuda/CUDACachingAllocator.cpp`'s rules
//! (`get_allocation_size`, `should_split`, best fit), never read off strata.
//! All run with `expandable_segments:False`, PyTorch's default; a private
//! pool's segments are ordinary in strata in either mode.

use super::common::{sim_device, stat};
use std::collections::BTreeSet;
use std::sync::Arc;
use strata_alloc::history::Action;
use strata_alloc::snapshot::BlockState;
use strata_alloc::{AllocError, Allocation, CachingAllocator, MemPool, MemPoolOptions, StreamId};

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
const S: StreamId = StreamId(5);
const NOT_EXPANDABLE: &str = "expandable_segments:False";

// PyTorch's constants (`CUDACachingAllocator.cpp`, and the test's own).
const K_SMALL_SIZE: u64 = 1_048_576;
const K_SMALL_BUFFER: u64 = 2_097_152;
const K_LARGE_BUFFER: u64 = 20_971_520;
const K_MIN_LARGE_ALLOC: u64 = 10_485_760;
const K_ROUND_LARGE: u64 = 2_097_152;

fn fresh() -> Arc<CachingAllocator> {
    sim_device(NOT_EXPANDABLE, 16 * GIB).1
}

fn new_pool(a: &Arc<CachingAllocator>) -> MemPool {
    a.mem_pool(MemPoolOptions::default())
}

/// The four statistics `test_graph_memory_stats_and_use_result_after_destroy_graph`
/// compares, for one pool kind (`small_pool` or `large_pool`).
fn four(a: &CachingAllocator, pool: &str) -> [i64; 4] {
    ["segment.", "reserved_bytes.", "active.", "active_bytes."]
        .map(|s| stat(a, &format!("{s}{pool}.current")))
}

fn delta(after: [i64; 4], before: [i64; 4]) -> [i64; 4] {
    [0, 1, 2, 3].map(|i| after[i] - before[i])
}

/// Mirrors `TestCuda.test_graph_memory_stats_and_use_result_after_destroy_graph`
/// (non-expandable expectations), the capture's private pool being a
/// `MemPool`. The captured code is `b = a.clone(); for _ in range(5): b =
/// b.clone() + 1`: each step allocates the clone and the sum, then frees the
/// clone, then the old `b`. The table is PyTorch's: segments made, their
/// bytes, and the bytes still reserved once the graph is gone and only `b`
/// is left, for each size. PyTorch's small-pool cases also count the
/// graph's two 512-byte RNG holders as active blocks; those are allocated
/// outside the pool and are not part of the pool's behaviour, so the active
/// figures here are `b` alone (PyTorch's figures after the graph is deleted).
#[test]
fn test_graph_memory_stats_and_use_result_after_destroy_graph() {
    let round_large = |n: u64| K_ROUND_LARGE * n.div_ceil(K_ROUND_LARGE);
    // (bytes of each tensor, segments made, their bytes, bytes left after
    // the pool is gone, pool)
    let cases: [(u64, i64, u64, u64, &str); 5] = [
        (512, 1, K_SMALL_BUFFER, K_SMALL_BUFFER, "small_pool"),
        (
            K_SMALL_SIZE,
            2,
            2 * K_SMALL_BUFFER,
            K_SMALL_BUFFER,
            "small_pool",
        ),
        (
            K_SMALL_SIZE + 512,
            1,
            K_LARGE_BUFFER,
            K_LARGE_BUFFER,
            "large_pool",
        ),
        (
            K_MIN_LARGE_ALLOC - 512,
            2,
            2 * K_LARGE_BUFFER,
            K_LARGE_BUFFER,
            "large_pool",
        ),
        (
            K_MIN_LARGE_ALLOC + 512,
            3,
            3 * round_large(K_MIN_LARGE_ALLOC + 512),
            round_large(K_MIN_LARGE_ALLOC + 512),
            "large_pool",
        ),
    ];
    let a = fresh();
    for (bytes, mallocs, malloc_bytes, left_after, pool_kind) in cases {
        let src = a.allocate(bytes, S).unwrap();
        let pre = four(&a, pool_kind);
        let pool = new_pool(&a);
        let b = {
            let _capture = pool.activate().unwrap();
            let mut b = a.allocate(bytes, S).unwrap(); // a.clone()
            for _ in 0..5 {
                let tmp = a.allocate(bytes, S).unwrap(); // b.clone()
                let sum = a.allocate(bytes, S).unwrap(); // ... + 1
                drop(tmp);
                b = sum; // the old b is freed
            }
            b
        };
        let expected = [mallocs, malloc_bytes as i64, 1, bytes as i64];
        // Checked before and after an empty_cache: the pool is alive, so
        // its free segments stay.
        for i in 0..2 {
            assert_eq!(
                delta(four(&a, pool_kind), pre),
                expected,
                "bytes {bytes}, pass {i}"
            );
            if i == 0 {
                a.empty_cache().unwrap();
            }
        }
        // del g; empty_cache(): b's segment is all that is left of the pool.
        drop(pool);
        a.empty_cache().unwrap();
        assert_eq!(
            delta(four(&a, pool_kind), pre),
            [1, left_after as i64, 1, bytes as i64],
            "bytes {bytes} after the pool is gone"
        );
        drop((src, b));
        a.empty_cache().unwrap();
        assert_eq!(a.memory_reserved(), 0, "bytes {bytes}");
        a.check_consistency().unwrap();
    }
}

/// `func_with_temps` of `test_graph_two_successive`: `x = t.clone() + val;
/// y = t.clone() + val; return x + y`, on tensors of `bytes` bytes.
fn func_with_temps(a: &Arc<CachingAllocator>, t: Allocation, bytes: u64) -> Allocation {
    let add_to_clone = || {
        let clone = a.allocate(bytes, S).unwrap();
        let sum = a.allocate(bytes, S).unwrap();
        drop(clone);
        sum
    };
    let x = add_to_clone();
    let y = add_to_clone();
    let r = a.allocate(bytes, S).unwrap();
    drop((x, y, t));
    r
}

/// How `test_graph_two_successive`, `test_graph_concurrent_replay` and
/// `test_graph_three_successive` give
/// the second (and third) capture a pool.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Pools {
    /// Each graph its own pool.
    OnePerGraph,
    /// `capture_begin(g0.pool())`.
    ViaPool,
    /// `capture_begin(torch.cuda.graph_pool_handle())` for both.
    ViaGraphPoolHandle,
}

const POOLINGS: [Pools; 3] = [
    Pools::OnePerGraph,
    Pools::ViaPool,
    Pools::ViaGraphPoolHandle,
];

/// Mirrors `TestCuda.test_graph_two_successive`'s statistics: two captures
/// of `func_with_temps` chains on 1000 floats (4000 bytes, small pool) need
/// one small segment each when each has its own pool, one in all when they
/// share it: the reserved bytes with sharing are `kSmallBuffer` fewer.
#[test]
fn test_graph_two_successive() {
    let bytes = 1000 * 4;
    let a = fresh();
    let mut reserved_no_sharing = None;
    for pools in POOLINGS {
        let input = a.allocate(bytes, S).unwrap(); // a = torch.ones(size)
        let g0 = new_pool(&a);
        let g1_own = new_pool(&a);
        let b = {
            let _capture = g0.activate().unwrap();
            let mut b = a.allocate(bytes, S).unwrap(); // a.clone()
            for _ in 0..5 {
                b = func_with_temps(&a, b, bytes);
            }
            b
        };
        let g1 = if pools == Pools::OnePerGraph {
            &g1_own
        } else {
            &g0
        };
        let b = {
            let _capture = g1.activate().unwrap();
            let mut b = b;
            for _ in 0..5 {
                b = func_with_temps(&a, b, bytes);
            }
            b
        };
        // Eager work outside the graphs, the same in every round.
        let mut c = a.allocate(bytes, S).unwrap(); // a.clone()
        for _ in 0..6 {
            c = func_with_temps(&a, c, bytes);
        }
        let reserved = stat(&a, "reserved_bytes.all.current");
        match reserved_no_sharing {
            None => {
                assert_eq!(pools, Pools::OnePerGraph);
                reserved_no_sharing = Some(reserved);
            }
            Some(r) => assert_eq!(r - reserved, K_SMALL_BUFFER as i64, "{pools:?}"),
        }
        drop((input, b, c, g0, g1_own));
        a.empty_cache().unwrap();
        assert_eq!(a.memory_reserved(), 0, "{pools:?}");
    }
}

/// Mirrors `TestCuda.test_graph_concurrent_replay`'s allocator part: g0
/// captures `b = a.clone()` and five `func_with_temps(b, 1)`, g1 `c =
/// a.clone()` and five `func_with_temps(c, 2)`, on 1,000,000 floats. When
/// the graphs share a pool, g1's capture takes memory g0's temporaries left
/// (which is why the test expects the two replays, run concurrently, to
/// corrupt each other's results); with a pool each, no address of g1 is one
/// of g0's.
#[test]
fn test_graph_concurrent_replay() {
    let bytes = 1_000_000 * 4;
    let a = fresh();
    for pools in POOLINGS {
        let input = a.allocate(bytes, S).unwrap();
        let g0 = new_pool(&a);
        let g1_own = new_pool(&a);
        let g1 = if pools == Pools::OnePerGraph {
            &g1_own
        } else {
            &g0
        };
        // Every address a capture's allocations get, through history.
        let captured = |pool: &MemPool| {
            let _capture = pool.activate().unwrap();
            a.record_history(Some(10_000));
            let mut x = a.allocate(bytes, S).unwrap(); // a.clone()
            for _ in 0..5 {
                x = func_with_temps(&a, x, bytes);
            }
            let addrs: BTreeSet<u64> = a
                .history()
                .iter()
                .filter(|e| e.action == Action::Alloc)
                .map(|e| e.addr)
                .collect();
            a.record_history(None);
            (x, addrs)
        };
        let (b, g0_addrs) = captured(&g0);
        let (c, g1_addrs) = captured(g1);
        assert!(!g1_addrs.contains(&b.ptr()), "{pools:?}: b is live");
        let overlap = g0_addrs.intersection(&g1_addrs).count();
        assert_eq!(overlap > 0, pools != Pools::OnePerGraph, "{pools:?}");
        drop((input, b, c, g0, g1_own));
        a.empty_cache().unwrap();
        assert_eq!(a.memory_reserved(), 0, "{pools:?}");
    }
}

/// Mirrors `TestCuda.test_graph_three_successive`'s allocator part: g0
/// makes `b`, `c = b + 1`, `d = b + 2`; g1 makes `e = c + 3` and frees `c`;
/// g2 makes `f = d + 4`. With a shared pool g2's `f` takes the block `c`
/// left (the test's "g2's capture should have reused c's memory for f",
/// whence the corruption it expects when replaying out of order); with a
/// pool per graph it cannot.
#[test]
fn test_graph_three_successive() {
    let bytes = 1000 * 4;
    let a = fresh();
    for pools in POOLINGS {
        let input = a.allocate(bytes, S).unwrap();
        let g0 = new_pool(&a);
        let (g1_own, g2_own) = (new_pool(&a), new_pool(&a));
        let (g1, g2) = match pools {
            Pools::OnePerGraph => (&g1_own, &g2_own),
            _ => (&g0, &g0),
        };
        let (b, c, d) = {
            let _capture = g0.activate().unwrap();
            let b = a.allocate(bytes, S).unwrap();
            let c = a.allocate(bytes, S).unwrap();
            let d = a.allocate(bytes, S).unwrap();
            (b, c, d)
        };
        let c_ptr = c.ptr();
        let e = {
            let _capture = g1.activate().unwrap();
            let e = a.allocate(bytes, S).unwrap();
            drop(c);
            e
        };
        let f = {
            let _capture = g2.activate().unwrap();
            a.allocate(bytes, S).unwrap()
        };
        let expect_corruption = pools != Pools::OnePerGraph;
        assert_eq!(f.ptr() == c_ptr, expect_corruption, "{pools:?}");
        drop((input, b, d, e, f, g0, g1_own, g2_own));
        a.empty_cache().unwrap();
        assert_eq!(a.memory_reserved(), 0, "{pools:?}");
        a.check_consistency().unwrap();
    }
}

/// Mirrors `TestCuda.test_cuda_graph_allocator_propagates_stream`: during
/// one capture, `z = x + y` on stream s0 and `z + y` on stream s1 (10,240,000
/// floats each) make two new segments, one per stream (a block is never
/// handed to another stream), and both belong to the capture's pool.
#[test]
fn test_cuda_graph_allocator_propagates_stream() {
    let (s0, s1) = (StreamId(11), StreamId(12));
    let bytes = 10_240_000 * 4;
    let a = fresh();
    let x = a.allocate(bytes, StreamId::DEFAULT).unwrap();
    let y = a.allocate(bytes, StreamId::DEFAULT).unwrap();
    let existing: BTreeSet<(u64, u64)> = a.snapshot().iter().map(|s| s.pool_id).collect();
    let g = new_pool(&a);
    let z = {
        let _capture = g.activate().unwrap();
        let z = a.allocate(bytes, s0).unwrap();
        drop(a.allocate(bytes, s1).unwrap()); // z + y, result unused
        z
    };
    let new: Vec<(u64, u64)> = a
        .snapshot()
        .iter()
        .map(|s| s.pool_id)
        .filter(|p| !existing.contains(p))
        .collect();
    assert_eq!(new.len(), 2, "{new:?}");
    assert_eq!(new[0], new[1]);
    assert_eq!(new[0], g.id());
    drop((x, y, z));
}

/// Mirrors `TestCuda.test_graph_capture_oom`: a request no device can hold
/// (`torch.zeros(2**40)` floats, 4 TiB) while allocating to a capture's pool
/// raises PyTorch's out-of-memory error, and the pool is left empty.
#[test]
fn test_graph_capture_oom() {
    let a = fresh();
    let g = new_pool(&a);
    let err = {
        let _capture = g.activate().unwrap();
        a.allocate((1 << 40) * 4, S).unwrap_err()
    };
    assert!(matches!(err, AllocError::OutOfMemory(_)), "{err:?}");
    assert!(err.to_string().contains("out of memory"), "{err}");
    assert!(g.snapshot().is_empty());
    assert_eq!(stat(&a, "num_ooms"), 1);
    // The pool still works after the error.
    let x = {
        let _capture = g.activate().unwrap();
        a.allocate(MIB, S).unwrap()
    };
    assert_eq!(g.snapshot().len(), 1);
    drop(x);
    a.check_consistency().unwrap();
}

/// `torch._C._cuda_checkPoolLiveAllocations(device, pool, live_dps)`: true
/// when the pool's allocated blocks are exactly the addresses given.
fn check_pool_live_allocations(pool: &MemPool, live: &BTreeSet<u64>) -> bool {
    let allocated: BTreeSet<u64> = pool
        .snapshot()
        .iter()
        .flat_map(|s| s.blocks.iter())
        .filter(|b| b.state == BlockState::ActiveAllocated)
        .map(|b| b.address)
        .collect();
    &allocated == live
}

/// Mirrors `TestBlockStateAbsorption.test_check_pool_live_allocations`: a
/// pool's snapshot lists as allocated exactly the block handed out in it
/// (`torch.ones([4])`, 16 bytes) and, once that is freed, none.
#[test]
fn test_check_pool_live_allocations() {
    let a = fresh();
    let pool = new_pool(&a);
    let outside = a.allocate(16, S).unwrap();
    let out = {
        let _capture = pool.activate().unwrap();
        a.allocate(16, S).unwrap()
    };
    let set = |v: &[u64]| v.iter().copied().collect::<BTreeSet<u64>>();
    assert!(check_pool_live_allocations(&pool, &set(&[out.ptr()])));
    assert!(!check_pool_live_allocations(&pool, &set(&[out.ptr(), 0])));
    assert!(!check_pool_live_allocations(&pool, &set(&[])));
    assert!(!check_pool_live_allocations(
        &pool,
        &set(&[out.ptr(), outside.ptr()])
    ));
    drop(out);
    assert!(check_pool_live_allocations(&pool, &set(&[])));
    drop(outside);
}

/// Mirrors `TestMemPool.test_mempool_id` (and the uniqueness part of
/// `test_mempool_multithread`): a user-made pool's id is `(0, n)`, and each
/// new pool's `n` is larger than the last, across every allocator of the
/// process (PyTorch's `MemPool::uid_` is one static counter starting at 1,
/// shared by all devices): pools of two devices never share an id.
#[test]
fn test_mempool_id() {
    let dev0 = fresh();
    let dev1 = fresh();
    let p1 = new_pool(&dev0);
    let p2 = new_pool(&dev1);
    let p3 = new_pool(&dev0);
    for p in [&p1, &p2, &p3] {
        assert_eq!(p.id().0, 0, "first value of a user-created pool's id");
        assert!(p.id().1 >= 1, "0 is the default pools");
    }
    assert!(p2.id().1 > p1.id().1);
    assert!(p3.id().1 > p2.id().1);
    // Made on four threads at once, over two allocators: all distinct.
    let ids: Vec<(u64, u64)> = std::thread::scope(|scope| {
        let hs: Vec<_> = (0..4)
            .map(|i| {
                let a = if i % 2 == 0 { &dev0 } else { &dev1 };
                scope.spawn(move || new_pool(a).id())
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let distinct: BTreeSet<(u64, u64)> = ids
        .iter()
        .copied()
        .chain([p1.id(), p2.id(), p3.id()])
        .collect();
    assert_eq!(distinct.len(), 7, "{ids:?}");
    // Each pool's segments carry its own id in its allocator's snapshot.
    let x = {
        let _g = p2.activate().unwrap();
        dev1.allocate(MIB, S).unwrap()
    };
    let segs = dev1.snapshot();
    assert_eq!(segs.len(), 1);
    assert_eq!(segs[0].pool_id, p2.id());
    assert_ne!(segs[0].pool_id, p1.id());
    drop(x);
}

/// Mirrors `TestCuda.test_device_memory_used`: after `empty_cache`, the
/// memory the device reports used (total minus free, NVML's figure) has
/// grown by about the 512 MiB still held (the test's order-of-magnitude
/// bounds, 1/32 to 32 times); the cached rest went back to the device.
#[test]
fn test_device_memory_used() {
    let (_, a) = sim_device(NOT_EXPANDABLE, 16 * GIB);
    let used = |a: &CachingAllocator| {
        let m = a.mem_get_info().unwrap();
        m.total - m.free
    };
    drop(a.allocate(3 * GIB, S).unwrap()); // cached, then released below
    a.empty_cache().unwrap();
    let before = used(&a);
    let num_bytes = 512 * MIB;
    let held = a.allocate(num_bytes, S).unwrap();
    drop(a.allocate(GIB, S).unwrap());
    a.empty_cache().unwrap();
    let grown = used(&a) - before;
    assert!(
        num_bytes / 32 <= grown && grown <= num_bytes * 32,
        "{grown}"
    );
    drop(held);
}
