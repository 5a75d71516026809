//! Expandable segments: one reserved address range per (stream, pool), backed by
//! physical pages only where memory is in use.
//!
//! PyTorch maps new pages whenever no free block fits and gives pages back only
//! in `empty_cache` or before an out-of-memory error, so reserved memory keeps the
//! high-water mark of every hole the workload ever left. strata goes further:
//!
//! * **Placement by fewest new pages.** A request that fits no free block goes
//!   where it needs the fewest pages mapped: after a free block that borders
//!   unmapped space, lowest address among equals.
//! * **Page recycling.** The pages needed are first taken from free space
//!   elsewhere: pages lying wholly inside free blocks (of any stream or pool of
//!   the device) are unmapped and their physical handles mapped where they are
//!   needed, with no `create`/`release` round trip. New physical memory is
//!   created only for the rest. Reserved memory therefore follows allocated
//!   memory: it only grows when the pages partly used by live blocks no longer
//!   suffice.
//! * **No stream synchronisation while allocating.** Work queued on a block's
//!   stream may still use its pages after the block was freed, so a page is
//!   recycled only once its stream's [`Fence`] — an event recorded on the stream
//!   after the block was freed — has completed. The fence is *queried*, never
//!   waited on: pages whose stream has not caught up stay where they are and the
//!   request takes other pages, or new ones. Only `empty_cache` (which waits for
//!   every stream anyway) synchronises.
//! * Pages are the driver's granularity (2 MiB on an H100) in both pools, so a
//!   large-pool growth never overshoots by more than one page.
//!
//! Blocks of an expandable segment tile its whole address range; unmapped space
//! is a block with `mapped == false`. Each page is mapped by its own `map` call
//! (so any page can be unmapped on its own), and one `set_access` covers each
//! contiguous growth.

use crate::block::{Block, PoolKind, NONE};
use crate::driver::{Device, Driver, DriverError, EventHandle, PhysHandle, VirtualMemory};
use crate::error::AllocError;
use crate::history::Action;
use crate::state::{ExpandableSegment, State};

/// Reserved memory may exceed the peak of allocated memory by 1/`RESERVE_MARGIN`
/// (or [`GROWTH_CHUNK`] pages, whichever is more) before growth recycles free
/// pages instead of creating new ones.
const RESERVE_MARGIN: u64 = 32;

/// Pages mapped at least per large-pool growth while within the margin: 20 MiB
/// with 2 MiB pages, PyTorch's large-pool page size.
const GROWTH_CHUNK: u64 = 10;

/// How far the work queued on one stream is known to have finished, in the
/// allocator's free clock (`Block::freed_at`): every block of the stream freed
/// at or before `done` is no longer touched by the device, so its pages may be
/// unmapped and mapped elsewhere.
///
/// A fence advances through one event at a time: when recycling wants pages
/// freed after `done`, an event is recorded on the stream (remembering the
/// clock at that moment) and queried then and at later attempts; once it has
/// completed, `done` moves up to the recorded clock. Nothing ever waits on it.
#[derive(Default)]
pub(crate) struct Fence {
    done: u64,
    pending: Option<(EventHandle, u64)>,
}

/// Where a request will go: the page-aligned address where mapping starts (at
/// the start of an unmapped block), how many pages must be mapped there, and
/// the free blocks on either side that the allocation will use (and that must
/// therefore not be recycled).
#[derive(Clone, Copy)]
struct Placement {
    map_at: u64,
    segment: u32,
    pages: u64,
    room: u64,
    keep: [u32; 2],
}

/// The expandable segments of one device: placement, growth, page recycling
/// and release, operating on the allocator's [`State`] it is handed. The
/// allocator makes one for each operation that needs it, over its (counting)
/// driver.
pub(crate) struct ExpandableSpace<'a> {
    /// The driver (for stream synchronisation).
    pub driver: &'a dyn Driver,
    /// Its virtual-memory calls.
    pub vm: &'a dyn VirtualMemory,
    /// The mapping granularity.
    pub page: u64,
    /// The device's capacity.
    pub capacity: u64,
    /// The device, for errors.
    pub device: Device,
}

impl ExpandableSpace<'_> {
    fn driver_error(&self, source: DriverError) -> AllocError {
        AllocError::Driver {
            device: self.device,
            source,
        }
    }

    /// Maps memory for a request of `rounded` bytes on stream `s` and returns a
    /// free block (out of the index) that holds it. `Ok(None)` when the device
    /// or the memory fraction has no room.
    ///
    /// New physical pages are created only while reserved memory stays within
    /// a margin of the highest allocated figure so far (the larger of 1/32 of it
    /// and [`GROWTH_CHUNK`] pages, plus one page per repeated page move);
    /// beyond that margin the pages are recycled
    /// from free space. The placement is the one that needs the fewest *new*
    /// pages given what can be recycled, then the fewest mappings, then the
    /// lowest address.
    pub fn grow(
        &self,
        st: &mut State,
        s: u32,
        pool: PoolKind,
        rounded: u64,
    ) -> Result<Option<u32>, AllocError> {
        let page = self.page;
        let allocated = &st.stats.allocated_bytes.all();
        let peak = (allocated.peak as u64).max(allocated.current as u64 + rounded);
        let target =
            peak + (peak / RESERVE_MARGIN).max(GROWTH_CHUNK * page) + st.extra_margin_pages * page;
        let headroom = target.saturating_sub(st.reserved()) / page;
        let recyclable = recyclable_pages(st, page);
        let mut best: Option<(u64, u64, u64, Placement)> = None;
        for &seg in &st.streams[s as usize].expandable[pool as usize] {
            let mut id = st.expandable[seg as usize]
                .as_ref()
                .expect("listed segment")
                .head;
            while id != NONE {
                let b = &st.blocks[id];
                if !b.mapped {
                    for with_before in [true, false] {
                        let Some(p) = placement_at(st, id, seg, rounded, page, with_before) else {
                            continue;
                        };
                        let kept: u64 = p
                            .keep
                            .iter()
                            .filter(|&&k| k != NONE)
                            .filter_map(|&k| interior_pages(&st.blocks[k], page))
                            .map(|(a, z)| (z - a) / page)
                            .sum();
                        let created = p.pages.saturating_sub(headroom + recyclable - kept);
                        let key = (created, p.pages, p.map_at);
                        if best.as_ref().is_none_or(|b| key < (b.0, b.1, b.2)) {
                            best = Some((key.0, key.1, key.2, p));
                        }
                    }
                }
                id = b.next;
            }
        }
        let p = match best {
            Some(b) => b.3,
            None => match self.new_segment(st, s, pool, rounded)? {
                Some((u, seg)) => placement_at(st, u, seg, rounded, page, false)
                    .expect("a new segment fits any request it was made for"),
                None => return Ok(None),
            },
        };
        if p.pages == 0 {
            // The free block before the unmapped range suffices on its own (the
            // oversize filters passed it over).
            st.index_remove(p.keep[0]);
            return Ok(Some(p.keep[0]));
        }
        // Within the margin, map a whole chunk for large requests so that a run
        // of similar requests does not map a few pages each time.
        let mut n = p.pages;
        if pool == PoolKind::Large && headroom > n {
            n = n.max(GROWTH_CHUNK.min(headroom)).min(p.room);
        }
        let recycle = n.saturating_sub(headroom) as usize;
        let mut handles = self.reclaim_pages(st, recycle, p.keep)?;
        // The hold-or-move rule (docs/allocator.md, "Holding memory or moving
        // pages"): a page moved back to the address it held before its last
        // move shows a pattern that needs it in two places by turns; hold one
        // more page per such move, so that a repeating workload pays for its
        // moves once.
        let repeats = handles
            .iter()
            .enumerate()
            .filter(|(i, h)| {
                st.moved_pages
                    .get(h)
                    .is_some_and(|a| a[0] == p.map_at + *i as u64 * page)
            })
            .count() as u64;
        st.extra_margin_pages += repeats;
        let n = n as usize;
        let missing = (n - handles.len()) as u64 * page;
        if !st.fits_fraction(missing) {
            self.release_handles(st, handles);
            return Ok(None);
        }
        while handles.len() < n {
            match self.vm.create(page) {
                Ok(h) => handles.push(h),
                Err(e) => {
                    self.release_handles(st, handles);
                    return match e {
                        DriverError::OutOfMemory => Ok(None),
                        e => Err(self.driver_error(e)),
                    };
                }
            }
        }
        self.map_pages(st, p.segment, p.map_at, handles).map(Some)
    }

    /// Reserves a new address range for (stream, pool): 1.125 times the device's
    /// capacity, like PyTorch, so it can never run out before the device does.
    fn new_segment(
        &self,
        st: &mut State,
        s: u32,
        pool: PoolKind,
        rounded: u64,
    ) -> Result<Option<(u32, u32)>, AllocError> {
        let page = self.page;
        let size = (self.capacity + self.capacity / 8).div_ceil(page) * page;
        if rounded > size {
            return Ok(None);
        }
        let base = match self.vm.reserve(size) {
            Ok(b) => b,
            Err(DriverError::OutOfMemory) => return Ok(None),
            Err(e) => return Err(self.driver_error(e)),
        };
        let seg_index = st
            .expandable
            .iter()
            .position(Option::is_none)
            .unwrap_or(st.expandable.len()) as u32;
        let head = st
            .blocks
            .add(Block::whole_segment(base, size, s, pool, Some(seg_index)));
        let seg = ExpandableSegment {
            base,
            size,
            stream: s,
            pool,
            handles: vec![None; (size / page) as usize],
            head,
            mapped_pages: 0,
        };
        if (seg_index as usize) < st.expandable.len() {
            st.expandable[seg_index as usize] = Some(seg);
        } else {
            st.expandable.push(Some(seg));
        }
        st.streams[s as usize].expandable[pool as usize].push(seg_index);
        Ok(Some((head, seg_index)))
    }

    /// Unmaps up to `n` pages that lie wholly inside free blocks (other than the
    /// `keep` blocks) and returns their handles. The least recently freed
    /// blocks go first, as a cache evicts its least recently used lines: memory
    /// freed long ago is the least likely to fit what the workload asks for
    /// next, so taking it avoids recycling pages back and forth (measured on the
    /// traces: it removed the steady-state churn of resnet18_prefetch, which
    /// taking the smallest fragments first did not).
    fn reclaim_pages(
        &self,
        st: &mut State,
        n: usize,
        keep: [u32; 2],
    ) -> Result<Vec<PhysHandle>, AllocError> {
        let page = self.page;
        let mut cands: Vec<(u64, u32)> = Vec::new();
        for seg in st.expandable.iter().flatten() {
            let mut id = seg.head;
            while id != NONE {
                let b = &st.blocks[id];
                if b.is_free() && !keep.contains(&id) && interior_pages(b, page).is_some() {
                    cands.push((b.freed_at, id));
                }
                id = b.next;
            }
        }
        cands.sort_unstable();
        let mut handles = Vec::with_capacity(n);
        for (_, id) in cands {
            if handles.len() >= n {
                break;
            }
            let (stream, freed_at) = (st.blocks[id].stream, st.blocks[id].freed_at);
            if !self.stream_idle_since(st, stream, freed_at) {
                continue;
            }
            let (p0, p1) = interior_pages(&st.blocks[id], page).expect("checked above");
            let k = ((p1 - p0) / page).min((n - handles.len()) as u64);
            let from = p1 - k * page;
            self.unmap_range(st, id, from, p1, &mut handles)?;
        }
        Ok(handles)
    }

    /// Whether the work queued on dense stream `s` has finished every use of
    /// blocks freed at or before `freed_at`, as far as its [`Fence`] can tell
    /// without waiting: queries the pending event, and records a new one when
    /// none covers `freed_at` yet. A driver failure counts as "not yet" (the
    /// pages are then simply not recycled).
    fn stream_idle_since(&self, st: &mut State, s: u32, freed_at: u64) -> bool {
        if freed_at <= st.streams[s as usize].fence.done {
            return true;
        }
        let (ev, clock) = match st.streams[s as usize].fence.pending {
            Some(p) => p,
            None => {
                let handle = st.streams[s as usize].handle;
                let Ok(ev) = st.record_pooled_event(self.driver, handle) else {
                    return false;
                };
                let p = (ev, st.free_clock);
                st.streams[s as usize].fence.pending = Some(p);
                p
            }
        };
        if let Ok(true) = self.driver.query_event(ev) {
            let fence = &mut st.streams[s as usize].fence;
            fence.done = clock;
            fence.pending = None;
            st.event_pool.push(ev);
        }
        freed_at <= st.streams[s as usize].fence.done
    }

    /// Unmaps the pages of `[from, to)`, inside free block `id`, keeping the
    /// handles in `out`. The caller has made sure that no queued work still
    /// uses the pages (a completed fence, or a synchronised stream).
    fn unmap_range(
        &self,
        st: &mut State,
        id: u32,
        from: u64,
        to: u64,
        out: &mut Vec<PhysHandle>,
    ) -> Result<(), AllocError> {
        let page = self.page;
        let stream = st.blocks[id].stream;
        let seg_i = st.blocks[id].segment as usize;
        let pool = st.blocks[id].pool.stat();
        let mut done = from;
        let mut failure = None;
        while done < to {
            if let Err(e) = self.vm.unmap(done, page) {
                failure = Some(e);
                break;
            }
            let seg = st.expandable[seg_i]
                .as_mut()
                .expect("block's segment exists");
            let h = seg.handles[((done - seg.base) / page) as usize]
                .take()
                .expect("a mapped page has a handle");
            let at = st.moved_pages.entry(h).or_insert([0; 2]);
            *at = [at[1], done];
            seg.mapped_pages -= 1;
            out.push(h);
            done += page;
        }
        if done > from {
            st.record(Action::SegmentUnmap, from, done - from, stream);
            carve_unmapped(st, id, from, done);
            st.stats.reserved_bytes.decrease(pool, (done - from) as i64);
            st.stats.num_device_free += 1;
        }
        match failure {
            None => Ok(()),
            Some(e) => Err(self.driver_error(e)),
        }
    }

    /// Maps `handles` at `start` (page-aligned, inside an unmapped block of
    /// segment `seg`) and returns the free block (merged with its free
    /// neighbours, out of the index) that results.
    fn map_pages(
        &self,
        st: &mut State,
        seg: u32,
        start: u64,
        handles: Vec<PhysHandle>,
    ) -> Result<u32, AllocError> {
        let page = self.page;
        let len = handles.len() as u64 * page;
        // Recycling may have merged more unmapped space into the target block:
        // find the block that holds `start` now, and cut `[start, start + len)`
        // out of it.
        let mut u = st.expandable[seg as usize]
            .as_ref()
            .expect("segment exists")
            .head;
        while st.blocks[u].end() <= start {
            u = st.blocks[u].next;
        }
        debug_assert!(!st.blocks[u].mapped && st.blocks[u].end() >= start + len);
        if st.blocks[u].ptr < start {
            u = st.blocks.split(u, start - st.blocks[u].ptr);
        }
        let mut mapped = 0;
        let mut failure = None;
        for (i, h) in handles.iter().enumerate() {
            if let Err(e) = self.vm.map(start + i as u64 * page, page, *h) {
                failure = Some(e);
                break;
            }
            mapped += 1;
        }
        if failure.is_none() {
            if let Err(e) = self.vm.set_access(start, len) {
                failure = Some(e);
            }
        }
        if let Some(e) = failure {
            // Undo: the range goes back to unmapped and the pages to the driver,
            // leaving the segment exactly as it was (minus the recycled pages,
            // which were already accounted as unmapped).
            for i in 0..mapped {
                let _ = self.vm.unmap(start + i as u64 * page, page);
            }
            self.release_handles(st, handles);
            return Err(self.driver_error(e));
        }
        let pool = st.blocks[u].pool.stat();
        {
            let seg = st.expandable[seg as usize]
                .as_mut()
                .expect("block's segment exists");
            let first = ((start - seg.base) / page) as usize;
            for (i, h) in handles.into_iter().enumerate() {
                seg.handles[first + i] = Some(h);
            }
            seg.mapped_pages += mapped as u64;
        }
        st.stats.reserved_bytes.increase(pool, len as i64);
        st.stats.num_device_alloc += 1;
        let s = st.blocks[u].stream;
        st.record(Action::SegmentMap, start, len, s);
        if len < st.blocks[u].size {
            st.blocks.split(u, len);
        }
        st.blocks[u].mapped = true;
        let mut id = u;
        let prev = st.blocks[id].prev;
        if prev != NONE && st.blocks[prev].is_free() {
            st.index_remove(prev);
            st.blocks.absorb_next(prev);
            id = prev;
        }
        let next = st.blocks[id].next;
        if next != NONE && st.blocks[next].is_free() {
            st.index_remove(next);
            st.blocks.absorb_next(id);
        }
        Ok(id)
    }

    fn release_handles(&self, st: &mut State, handles: Vec<PhysHandle>) {
        for h in handles {
            st.moved_pages.remove(&h);
            // A failed release leaks one page in the driver but leaves the
            // allocator consistent; there is nothing better to do with it.
            let _ = self.vm.release(h);
        }
    }

    /// `empty_cache` for expandable segments: unmap and release every page that
    /// lies wholly inside a free block (after synchronising each stream that
    /// owns some); give back ranges left with no pages.
    pub fn release_free_pages(&self, st: &mut State) -> Result<(), AllocError> {
        let page = self.page;
        let mut synced = Vec::new();
        for seg_i in 0..st.expandable.len() {
            let Some(seg) = st.expandable[seg_i].as_ref() else {
                continue;
            };
            let mut ranges = Vec::new();
            let mut id = seg.head;
            while id != NONE {
                let b = &st.blocks[id];
                if b.is_free() {
                    if let Some((p0, p1)) = interior_pages(b, page) {
                        ranges.push((id, p0, p1));
                    }
                }
                id = b.next;
            }
            for (id, p0, p1) in ranges {
                let stream = st.blocks[id].stream;
                if !synced.contains(&stream) {
                    self.driver
                        .synchronize_stream(st.streams[stream as usize].handle)
                        .map_err(|e| self.driver_error(e))?;
                    synced.push(stream);
                }
                let mut handles = Vec::new();
                let r = self.unmap_range(st, id, p0, p1, &mut handles);
                self.release_handles(st, handles);
                r?;
            }
            let seg = st.expandable[seg_i].as_ref().expect("still there");
            if seg.mapped_pages == 0 {
                let (base, size, head, s, pool) =
                    (seg.base, seg.size, seg.head, seg.stream, seg.pool);
                debug_assert!(st.blocks[head].next == NONE && !st.blocks[head].mapped);
                self.vm
                    .unreserve(base, size)
                    .map_err(|e| self.driver_error(e))?;
                st.blocks.remove(head);
                st.expandable[seg_i] = None;
                st.streams[s as usize].expandable[pool as usize].retain(|&x| x != seg_i as u32);
            }
        }
        Ok(())
    }
}

/// The page-aligned part `[p0, p1)` of a block, if it holds at least one page.
fn interior_pages(b: &Block, page: u64) -> Option<(u64, u64)> {
    let p0 = b.ptr.div_ceil(page) * page;
    let p1 = b.end() / page * page;
    (p1 > p0).then_some((p0, p1))
}

/// Where `rounded` bytes would go if mapped from unmapped block `u`: either
/// starting in the free block before it (`with_before`), or at its own start.
fn placement_at(
    st: &State,
    u: u32,
    segment: u32,
    rounded: u64,
    page: u64,
    with_before: bool,
) -> Option<Placement> {
    let b = &st.blocks[u];
    let before = (b.prev != NONE && st.blocks[b.prev].is_free()).then_some(b.prev);
    if with_before && before.is_none() {
        return None;
    }
    let before = before.filter(|_| with_before);
    let after = (b.next != NONE && st.blocks[b.next].is_free()).then_some(b.next);
    let start = before.map_or(b.ptr, |p| st.blocks[p].ptr);
    let end = after.map_or(b.end(), |n| st.blocks[n].end());
    if end - start < rounded {
        return None;
    }
    let need_end = (start + rounded).min(b.end());
    let uses_after = start + rounded > b.end();
    Some(Placement {
        map_at: b.ptr,
        segment,
        pages: need_end.saturating_sub(b.ptr).div_ceil(page),
        room: b.size / page,
        keep: [
            before.unwrap_or(NONE),
            if uses_after {
                after.unwrap_or(NONE)
            } else {
                NONE
            },
        ],
    })
}

/// Pages lying wholly inside free blocks, over every expandable segment.
fn recyclable_pages(st: &State, page: u64) -> u64 {
    let mut n = 0;
    for seg in st.expandable.iter().flatten() {
        let mut id = seg.head;
        while id != NONE {
            let b = &st.blocks[id];
            if b.is_free() {
                if let Some((a, z)) = interior_pages(b, page) {
                    n += (z - a) / page;
                }
            }
            id = b.next;
        }
    }
    n
}

/// Turns `[a, z)` (page-aligned, inside free block `id`, which is in the index)
/// into unmapped space, merged with unmapped neighbours; free remainders on
/// either side go back to the index.
fn carve_unmapped(st: &mut State, id: u32, a: u64, z: u64) {
    st.index_remove(id);
    let mut mid = id;
    if a > st.blocks[id].ptr {
        mid = st.blocks.split(id, a - st.blocks[id].ptr);
        st.index_insert(id);
    }
    if z < st.blocks[mid].end() {
        let tail = st.blocks.split(mid, z - st.blocks[mid].ptr);
        st.index_insert(tail);
    }
    st.blocks[mid].mapped = false;
    let next = st.blocks[mid].next;
    if next != NONE && !st.blocks[next].mapped {
        st.blocks.absorb_next(mid);
    }
    let prev = st.blocks[mid].prev;
    if prev != NONE && !st.blocks[prev].mapped {
        st.blocks.absorb_next(prev);
    }
}
