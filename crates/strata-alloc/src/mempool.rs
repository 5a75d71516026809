//! Private memory pools: PyTorch's `torch.cuda.MemPool` and
//! `torch.cuda.use_mem_pool`.
//!
//! A [`MemPool`] is a set of segments of its own. While a thread holds the
//! guard of [`MemPool::activate`], every allocation that thread makes on the
//! device is served from the pool (its free blocks, or new segments made for
//! it), on whatever stream; frees go back to the pool the block came from,
//! whichever thread frees it. The default pools never hand out a private
//! pool's memory and the pool never takes theirs, so what is allocated in a
//! pool stays within its segments (PyTorch uses this for CUDA-graph memory,
//! for memory registered with a communication library, and to keep one
//! component's memory apart).
//!
//! As in PyTorch:
//!
//! * ids are `(0, n)` with `n` counting up from 1 across the process (one
//!   counter for every allocator and device, PyTorch's static
//!   `MemPool::uid_`), so no two pools share an id; the default pools are
//!   `(0, 0)` ([`SegmentSnapshot::pool_id`]);
//! * [`use_count`](MemPool::use_count) is 1 for the pool itself plus 1 for
//!   each active guard;
//! * routes nest per thread, the latest one winning, and are private to the
//!   thread that made them; a pool is active in one place at a time (a
//!   second [`activate`](MemPool::activate) while a guard of the pool is
//!   alive, on any thread, is [`AllocError::PoolAlreadyActive`], PyTorch's
//!   `already recording to mempool_id`);
//! * a pool's free segments are not released by
//!   [`empty_cache`](CachingAllocator::empty_cache) while the pool is in
//!   use; dropping the `MemPool` releases them, and the segments of blocks
//!   still allocated then go back to the driver at an `empty_cache` after
//!   their last block is freed;
//! * `no_split` hands the pool's blocks out whole; `use_on_oom` lets a
//!   request the default pools cannot serve (no cached block, no room for a
//!   new segment) take a free block of the pool while the pool is in use;
//! * statistics count the pools' blocks and segments with everything else.
//!
//! One difference: a private pool's segments are ordinary segments even when
//! `expandable_segments` is on (PyTorch maps expandable segments for private
//! pools too). Expandable segments move free pages between blocks of every
//! pool, which would break the separation a private pool exists for.

use crate::allocator::CachingAllocator;
use crate::block::PoolKind;
use crate::snapshot::SegmentSnapshot;
use crate::state::{pool_stream_index, stream_index, PoolRoute, PrivatePool, State};
use crate::{AllocError, StreamId};
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::ThreadId;

/// A private pool id that no entry of `State::streams` uses any more (the
/// entry is vacant, ready for the next pool's stream).
pub(crate) const VACANT: u64 = u64::MAX;

/// The next private pool number, shared by every allocator of the process:
/// PyTorch's `MemPool::uid_` is one static counter starting at 1 (0 is the
/// default pools), so pools of different devices never share an id.
static NEXT_POOL_ID: AtomicU64 = AtomicU64::new(1);

/// Options of a [`MemPool`] (PyTorch's `MemPool(use_on_oom=..., no_split=...)`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemPoolOptions {
    /// A request that the default pools cannot serve may take one of this
    /// pool's free blocks (while the pool is in use).
    pub use_on_oom: bool,
    /// The pool's blocks are handed out whole, never split.
    pub no_split: bool,
}

/// A private memory pool of one device's allocator (see the module docs).
///
/// ```
/// use std::sync::Arc;
/// use strata_alloc::driver::sim::SimDriver;
/// use strata_alloc::{AllocatorConfig, CachingAllocator, MemPoolOptions, StreamId};
///
/// let a = CachingAllocator::new(Arc::new(SimDriver::h100()), AllocatorConfig::default());
/// let pool = a.mem_pool(MemPoolOptions::default());
/// let inside = {
///     let _route = pool.activate().unwrap();
///     a.allocate(4 << 20, StreamId::DEFAULT).unwrap()
/// };
/// let outside = a.allocate(4 << 20, StreamId::DEFAULT).unwrap();
/// let segs = pool.snapshot();
/// assert_eq!(segs.len(), 1);
/// assert!(segs[0].blocks.iter().any(|b| b.address == inside.ptr()));
/// assert!(!segs[0].blocks.iter().any(|b| b.address == outside.ptr()));
/// assert_eq!(segs[0].pool_id, pool.id());
/// ```
pub struct MemPool {
    allocator: Arc<CachingAllocator>,
    id: u64,
}

/// While alive, the allocations of the thread that made it go to a
/// [`MemPool`] (PyTorch's `with torch.cuda.use_mem_pool(pool):`). Bound to
/// that thread (not `Send`).
pub struct MemPoolGuard<'a> {
    pool: &'a MemPool,
    token: u64,
    _thread_bound: PhantomData<*const ()>,
}

impl CachingAllocator {
    /// The id of the pool the calling thread's allocations go to now, if it
    /// is routed to one (PyTorch's `MemPoolContext.active_pool()`); `None`
    /// for the default pools.
    pub fn active_mem_pool(&self) -> Option<(u64, u64)> {
        self.with_state(|st| route_of_this_thread(st).map(pool_id))
    }

    /// Creates a private memory pool (PyTorch's `torch.cuda.MemPool()`).
    pub fn mem_pool(self: &Arc<Self>, options: MemPoolOptions) -> MemPool {
        let id = self.with_state(|st| {
            // Taken under the allocator's lock so that this allocator's pools
            // are listed in the order of their ids.
            let id = NEXT_POOL_ID.fetch_add(1, Ordering::Relaxed);
            st.mempools.push(PrivatePool {
                id,
                use_count: 1,
                no_split: options.no_split,
                use_on_oom: options.use_on_oom,
            });
            id
        });
        MemPool {
            allocator: Arc::clone(self),
            id,
        }
    }
}

impl MemPool {
    /// The pool's id, PyTorch's `MemPool.id`: `(0, n)`.
    pub fn id(&self) -> (u64, u64) {
        pool_id(self.id)
    }

    /// The allocator the pool belongs to.
    pub fn allocator(&self) -> &Arc<CachingAllocator> {
        &self.allocator
    }

    /// 1 for the pool, plus 1 for each active [`MemPoolGuard`] (PyTorch's
    /// `MemPool.use_count()`).
    pub fn use_count(&self) -> usize {
        self.allocator
            .with_state(|st| st.mempool(self.id).map_or(0, |p| p.use_count))
    }

    /// Routes the calling thread's allocations to this pool until the guard
    /// is dropped (PyTorch's `torch.cuda.use_mem_pool(pool)`). Guards of
    /// different pools nest: the latest one of a thread decides.
    ///
    /// A pool is active in one place at a time: while a guard of this pool
    /// is alive (on this thread, nested, or on another thread), activating
    /// it again is [`AllocError::PoolAlreadyActive`] and changes nothing, as
    /// PyTorch's `use_mem_pool` raises `beginAllocateToPool: already
    /// recording to mempool_id` then.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use strata_alloc::driver::sim::SimDriver;
    /// use strata_alloc::{AllocError, AllocatorConfig, CachingAllocator, MemPoolOptions};
    ///
    /// let a = CachingAllocator::new(Arc::new(SimDriver::h100()), AllocatorConfig::default());
    /// let pool = a.mem_pool(MemPoolOptions::default());
    /// let guard = pool.activate().unwrap();
    /// let again = pool.activate();
    /// assert!(matches!(again, Err(AllocError::PoolAlreadyActive { .. })));
    /// assert_eq!(pool.use_count(), 2); // the pool and the one guard
    /// drop(guard);
    /// let _guard = pool.activate().unwrap(); // active again once the guard is gone
    /// ```
    ///
    /// A pool cannot be released while a guard of it is alive (PyTorch's
    /// context holds a reference to the pool): the guard borrows it.
    ///
    /// ```compile_fail
    /// use std::sync::Arc;
    /// use strata_alloc::driver::sim::SimDriver;
    /// use strata_alloc::{AllocatorConfig, CachingAllocator, MemPoolOptions};
    ///
    /// let a = CachingAllocator::new(Arc::new(SimDriver::h100()), AllocatorConfig::default());
    /// let pool = a.mem_pool(MemPoolOptions::default());
    /// let guard = pool.activate().unwrap();
    /// drop(pool); // error: `pool` is borrowed by `guard`
    /// drop(guard);
    /// ```
    pub fn activate(&self) -> Result<MemPoolGuard<'_>, AllocError> {
        let token = self.allocator.with_state(|st| {
            if st.pool_routes.iter().any(|r| r.pool == self.id) {
                return Err(AllocError::PoolAlreadyActive {
                    device: self.allocator.device(),
                    pool: pool_id(self.id),
                });
            }
            st.next_route_token += 1;
            let token = st.next_route_token;
            st.pool_routes.push(PoolRoute {
                token,
                pool: self.id,
                thread: current_thread(),
            });
            if let Some(p) = st.mempools.iter_mut().find(|p| p.id == self.id) {
                p.use_count += 1;
            }
            Ok(token)
        })?;
        Ok(MemPoolGuard {
            pool: self,
            token,
            _thread_bound: PhantomData,
        })
    }

    /// The pool's segments (PyTorch's `MemPool.snapshot()`, that is
    /// `memory_snapshot(mempool_id)`). While history is on, taking it records
    /// a `snapshot` event whose size is the active bytes of the pool's
    /// segments, as PyTorch's `snapshot(mempool_id)` counts only the
    /// segments it returns.
    pub fn snapshot(&self) -> Vec<SegmentSnapshot> {
        let id = self.id();
        self.allocator.with_state(|st| {
            let out: Vec<SegmentSnapshot> = crate::snapshot::segments(st)
                .into_iter()
                .filter(|s| s.pool_id == id)
                .collect();
            let active = out.iter().map(|s| s.active_size).sum();
            if st.history.enabled() {
                st.history.push(
                    crate::history::Action::Snapshot,
                    0,
                    active,
                    StreamId::DEFAULT,
                );
            }
            st.track(
                crate::history::Action::Snapshot,
                0,
                active,
                StreamId::DEFAULT,
            );
            out
        })
    }
}

impl std::fmt::Debug for MemPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemPool")
            .field("id", &self.id())
            .field("device", &self.allocator.device())
            .finish()
    }
}

impl Drop for MemPoolGuard<'_> {
    fn drop(&mut self) {
        let (id, token) = (self.pool.id, self.token);
        self.pool.allocator.with_state(|st| {
            st.pool_routes.retain(|r| r.token != token);
            if let Some(p) = st.mempools.iter_mut().find(|p| p.id == id) {
                p.use_count = p.use_count.saturating_sub(1);
            }
        });
    }
}

impl Drop for MemPool {
    /// The pool is no longer in use: its free segments go back to the
    /// driver now (PyTorch's `~MemPool`: `releasePool`, then `emptyCache`
    /// of the pool), the rest at an `empty_cache` once their blocks are
    /// freed.
    fn drop(&mut self) {
        let id = self.id;
        self.allocator.release_mem_pool(id);
    }
}

/// The calling thread's id (cached per thread: looked up only while some
/// thread is routed to a private pool).
fn current_thread() -> ThreadId {
    thread_local! {
        static ID: ThreadId = std::thread::current().id();
    }
    ID.with(|id| *id)
}

/// The dense index that serves a request on `stream` from the calling
/// thread: its latest route's pool, or the default pools.
/// PyTorch's `MemPool.id` of the pool numbered `n` in the allocator's
/// state: `(0, n)`, `(0, 0)` being the default pools (as PyTorch's
/// `segment_pool_id` gives them).
pub(crate) fn pool_id(n: u64) -> (u64, u64) {
    (0, n)
}

pub(crate) fn routed_stream_index(st: &mut State, stream: StreamId) -> u32 {
    match route_of_this_thread(st) {
        Some(pool) => pool_stream_index(st, stream, pool),
        None => stream_index(st, stream),
    }
}

/// The pool of the calling thread's latest route, if it has one.
fn route_of_this_thread(st: &State) -> Option<u64> {
    if st.pool_routes.is_empty() {
        return None;
    }
    let me = current_thread();
    st.pool_routes
        .iter()
        .rev()
        .find(|r| r.thread == me)
        .map(|r| r.pool)
}

/// A free block of a `use_on_oom` pool in use, for a request of the
/// default pools on entry `s` that found nothing else (PyTorch's
/// `try_mempool_fallback`), out of its free index.
pub(crate) fn free_block_on_oom(
    a: &CachingAllocator,
    st: &mut State,
    s: u32,
    pool: PoolKind,
    rounded: u64,
) -> Option<u32> {
    if st.streams[s as usize].mempool != 0 {
        return None;
    }
    let handle = st.streams[s as usize].handle;
    let pools: Vec<u64> = st
        .mempools
        .iter()
        .filter(|p| p.use_on_oom && p.use_count > 0)
        .map(|p| p.id)
        .collect();
    for id in pools {
        let Some(e) = st
            .streams
            .iter()
            .position(|x| x.handle == handle && x.mempool == id)
        else {
            continue;
        };
        if let Some(b) = a.get_free_block(st, e as u32, pool, rounded) {
            return Some(b);
        }
    }
    None
}

/// Forgets every freeable pool (use count 0) that has no segment left, and
/// marks its entries vacant for later pools.
pub(crate) fn forget_empty_pools(st: &mut State) {
    if st.mempools.iter().all(|p| p.use_count > 0) {
        return;
    }
    let mut with_segments: Vec<u64> = st
        .segments
        .values()
        .map(|&head| st.streams[st.blocks[head].stream as usize].mempool)
        .filter(|&m| m != 0)
        .collect();
    with_segments.sort_unstable();
    with_segments.dedup();
    let gone: Vec<u64> = st
        .mempools
        .iter()
        .filter(|p| p.use_count == 0 && with_segments.binary_search(&p.id).is_err())
        .map(|p| p.id)
        .collect();
    if gone.is_empty() {
        return;
    }
    st.mempools.retain(|p| !gone.contains(&p.id));
    for &id in &gone {
        st.stats
            .reserved_bytes_by_private_pools
            .remove(&pool_id(id));
    }
    for (i, e) in st.streams.iter_mut().enumerate() {
        if gone.contains(&e.mempool) {
            st.stream_entries.remove(&(e.handle, e.mempool));
            st.vacant_entries.insert(i as u32);
            e.mempool = VACANT;
            e.no_split = false;
        }
    }
}
