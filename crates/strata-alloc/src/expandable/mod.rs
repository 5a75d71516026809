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
//!   elsewhere: pages lying wholly inside free blocks (of any stream of the
//!   device, and of either pool until a run at the peak has ended) are
//!   unmapped and their physical handles mapped where they are needed, with
//!   no `create`/`release` round trip. New physical memory is
//!   created only for the rest. Reserved memory therefore follows allocated
//!   memory: it only grows when the pages partly used by live blocks no longer
//!   suffice, or when a growth repeats the workload (`repeats.rs`): such a
//!   growth holds memory, creating its pages, so that the next round of the
//!   workload finds them in place and makes no driver call. During the
//!   workload's first run, holding stays within a tighter bound
//!   ([`FIRST_RUN_MARGIN`]; `repeats.rs`, "The first run"), and a large-pool
//!   growth takes the large pool's free pages before the small pool's. Once
//!   a run that reached the present peak has ended, every growth holds (a
//!   large-pool one at least a [`HOLD_CHUNK`], creating every page it maps
//!   rather than moving pages back from free blocks; for a request of at
//!   most a chunk in a range with room for one, and, where the workload
//!   grows again, where it fills no gap between mapped ranges) and each
//!   pool recycles only its own pages, as PyTorch's pools never share
//!   memory (docs/allocator.md, "After a run at the peak").
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
//!
//! Where things are: this file holds the rules' constants, the stream
//! [`Fence`], [`ExpandableSpace::grow`] (which placement a growth takes and
//! how many pages it maps), the margin within which it creates pages
//! ([`Margin`]) and whether it holds beyond it ([`Hold`]), new segments and
//! [`ExpandableSpace::release_free_pages`]. `placement.rs` lists the candidate
//! placements in unmapped ranges and ranks them; `span.rs` weighs runs of free
//! blocks and holes taken as a whole; `available.rs` says which pages a growth
//! may take now; `pages.rs` maps a placement's pages (moving back, creating or
//! recycling them); `stitched.rs` keeps the bounded cache of stitched mappings
//! and the fences that say when a busy one may go.

use crate::block::{Block, PoolKind, NONE};
use crate::driver::{
    Device, DevicePtr, Driver, DriverError, EventHandle, PhysHandle, VirtualMemory,
};
use crate::error::AllocError;
use crate::history::Action;
use crate::repeats::{growth_context, Repetition};
use crate::state::{ExpandableSegment, State};
use rustc_hash::FxHashSet;

mod available;
mod pages;
mod placement;
mod span;
mod stitched;

use available::*;
use pages::holds;
use placement::*;

/// Stitched mappings kept, at most, per reserved page ...
const STITCHED_PER_PAGE: u64 = 4;

/// ... plus this many.
const STITCHED_MIN: u64 = 64;

/// Reserved memory may exceed the peak of allocated memory by 1/`RESERVE_MARGIN`
/// (or the margin's floor, [`GROWTH_CHUNK`] pages or less, see
/// [`FREED_FLOOR`], whichever is more) before growth recycles free pages
/// instead of creating new ones.
const RESERVE_MARGIN: u64 = 32;

/// Pages mapped at least per large-pool growth while within the margin: 20 MiB
/// with 2 MiB pages, PyTorch's large-pool page size.
const GROWTH_CHUNK: u64 = 10;

/// Once a block of a page or more has been freed, the margin's floor of
/// [`GROWTH_CHUNK`] pages is at most 1/`FREED_FLOOR` of peak allocated
/// memory; while a workload only loads (nothing of a page or more freed yet:
/// the temporaries of its initialisation may come and go) it is the whole
/// chunk.
const FREED_FLOOR: u64 = 22;

/// A growth that repeats the workload holds memory (creates pages) only while
/// reserved memory stays within the margin plus 1/`HOLD_LIMIT` of peak
/// allocated memory; beyond that it moves pages again.
const HOLD_LIMIT: u64 = 2;

/// During a workload's first run ([`crate::repeats`], "The first run"),
/// holding takes reserved memory no further than peak allocated memory plus
/// 1/`FIRST_RUN_MARGIN` of it: the first pass stays within 1.05 × its
/// allocated memory, and its repetitions settle in the runs that follow.
const FIRST_RUN_MARGIN: u64 = 22;

/// Once a run that reached the present peak has ended
/// (`Repeats::ended_at_peak`), a large-pool growth that holds maps at least
/// this many pages (60 MiB with 2 MiB pages) ...
const HOLD_CHUNK: u64 = 30;

/// ... or 1/`HOLD_CHUNK_DIVISOR` of peak allocated memory if that is less,
/// as far as the hold limit, the memory fraction and the unmapped range
/// allow: a workload whose layout still drifts from round to round then
/// grows a few times by a chunk rather than in every round by the pages of
/// one request.
const HOLD_CHUNK_DIVISOR: u64 = 8;

/// Blocks and pages a growth's search for runs of free blocks and holes may
/// visit (`ExpandableSpace::best_span`), all starts together.
const SPAN_SEARCH_BUDGET: usize = 1 << 14;

/// A weak repetition holds only when the pages it needs mapped are at most
/// this many more than those that move back to stitched mappings of theirs.
const WEAK_SLACK: usize = 1;

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
    /// a margin of the highest allocated figure so far ([`Margin`]); beyond
    /// that margin the pages are recycled from free space, unless the growth
    /// repeats the workload ([`crate::repeats`]): then it holds, creating the
    /// pages ([`Hold`]). A page that already has a stitched mapping at the
    /// address where it is needed moves there with no driver call. The
    /// placement is the one that needs the fewest *new* pages given what can be
    /// recycled, then the fewest pages that need a driver mapping, then the
    /// fewest stitched mappings overwritten, then the fewest pages, then the
    /// lowest address.
    pub fn grow(
        &self,
        st: &mut State,
        s: u32,
        pool: PoolKind,
        rounded: u64,
    ) -> Result<Option<u32>, AllocError> {
        let page = self.page;
        let margin = Margin::of(st, rounded, page);
        let mut hold = Hold::of(st, s, pool, rounded, &margin, page);
        let avail = self.available_pages(st, s, pool);
        let mut recyclable = if hold.on { 0 } else { avail.pages };
        // A placement overwrites the stitched mappings in its range (other
        // than those its pages move back to). One that queued work may still
        // use is unmapped only once its stream's fence has passed it; if the
        // chosen placement would need such a mapping, the choice is made again
        // among the placements that need none (without the chunk).
        let mut avoid_busy = false;
        // Past a run at the peak, a holding growth whose placement has no
        // room for its hold chunk looks again among the placements that have
        // (`needs_room_for_chunk`); if the placement found would need more
        // pages mapped than that allows (`max_pages`), the growth stays
        // where it was (`stays`).
        let mut min_room = 0;
        let mut max_pages = None;
        let mut stays = false;
        let (p, n) = loop {
            let ranked = (margin.headroom, recyclable);
            let best = (min_room > 0)
                .then(|| {
                    self.best_placement(st, s, pool, rounded, &avail, ranked, avoid_busy, min_room)
                })
                .flatten()
                .or_else(|| {
                    self.best_placement(st, s, pool, rounded, &avail, ranked, avoid_busy, 0)
                });
            // A placement in fresh address space (every page mapped with a
            // driver call, no stitched mapping of its own there) is weighed
            // against one over a run of free blocks and unmapped ranges,
            // which keeps the layout where the workload has been instead of
            // moving it on to new addresses (docs/allocator.md).
            if !avoid_busy && best.as_ref().is_none_or(|b| in_fresh_space(&b.0)) {
                if let Some((cost, span)) =
                    self.best_span(st, s, pool, rounded, &avail, margin.headroom, recyclable)
                {
                    if best.as_ref().is_none_or(|b| cost < b.0) {
                        return self.fill_span(st, s, &span, hold, margin.target);
                    }
                }
            }
            let p = match best {
                Some(b) => b.1,
                None => match self.new_segment(st, s, pool, rounded)? {
                    Some((u, seg)) => {
                        let start = st.blocks[u].ptr;
                        placement_at(st, u, seg, start, rounded, page, false)
                            .expect("a new segment fits any request it was made for")
                    }
                    None => return Ok(None),
                },
            };
            if p.pages == 0 {
                // The free block before the unmapped range suffices on its own
                // (the oversize filters passed it over).
                st.index_remove(p.keep[0]);
                return Ok(Some(p.keep[0]));
            }
            if max_pages.is_some_and(|m| p.pages > m) {
                // The placement with room would map too many pages anew
                // (`MOVE_ON_PAGES`): the growth stays in its gap.
                (min_room, max_pages, stays) = (0, None, true);
                continue;
            }
            let n = if avoid_busy {
                p.pages
            } else {
                pages_to_map(st, &p, pool, hold, &margin, page)
            };
            if min_room == 0 && !avoid_busy && !stays {
                if let Some(room) =
                    needs_room_for_chunk(st, &p, n, pool, rounded, hold, &margin, &avail, page)
                {
                    (min_room, max_pages) = (room.pages, room.max_pages);
                    continue;
                }
            }
            if !avoid_busy && !self.overwrites_only_idle(st, &p, n, &avail) {
                avoid_busy = true;
                continue;
            }
            // The placements were ranked for a growth that holds (nothing
            // recycled). If this one gives the hold up entirely (a weak
            // repetition with too few pages to move back, or the hold limit
            // or the memory fraction reached), the growth moves pages: rank
            // them again for that, or the placement chosen may keep the very
            // free blocks recycling would take pages from, and create pages
            // beyond the margin instead.
            if hold.on && gives_up_holding(st, &p, n as usize, &avail, hold, margin.headroom, page)
            {
                hold.on = false;
                recyclable = avail.pages;
                avoid_busy = false;
                continue;
            }
            break (p, n as usize);
        };
        let spare = FxHashSet::default();
        self.fill(st, &p, n, hold, margin.headroom, &avail, &spare)
    }

    /// The best single placement in the unmapped ranges of stream `s`'s
    /// segments of `pool` for `rounded` bytes, ranked by [`placement_cost`]
    /// given the pages the margin allows (`headroom`) and those recycling may
    /// supply (`recyclable`); with `avoid_busy`, only placements that
    /// overwrite no stitched mapping that queued work may still use; only
    /// placements whose unmapped range has room for `min_room` pages.
    #[allow(clippy::too_many_arguments)]
    fn best_placement(
        &self,
        st: &State,
        s: u32,
        pool: PoolKind,
        rounded: u64,
        avail: &Available,
        (headroom, recyclable): (u64, u64),
        avoid_busy: bool,
        min_room: u64,
    ) -> Option<(Cost, Placement)> {
        let page = self.page;
        let mut best: Option<(Cost, Placement)> = None;
        for &seg in &st.streams[s as usize].expandable[pool as usize] {
            let sg = st.expandable[seg as usize]
                .as_ref()
                .expect("listed segment");
            let mut id = sg.head;
            while id != NONE {
                let b = &st.blocks[id];
                if !b.mapped {
                    for (start, with_before) in candidate_starts(seg, sg, b, avail, page) {
                        let Some(p) = placement_at(st, id, seg, start, rounded, page, with_before)
                            .filter(|p| p.room >= min_room)
                        else {
                            continue;
                        };
                        if avoid_busy
                            && !busy_overwritten(st, &p, p.pages, avail, page, true).is_empty()
                        {
                            continue;
                        }
                        let cost = placement_cost(st, &p, avail, headroom, recyclable, page);
                        if best.as_ref().is_none_or(|b| cost < b.0) {
                            best = Some((cost, p));
                        }
                    }
                }
                id = b.next;
            }
        }
        best
    }

    /// Whether mapping `n` pages at placement `p` overwrites no stitched
    /// mapping that queued work may still use (each such mapping's stream
    /// fence queried, never waited on).
    fn overwrites_only_idle(
        &self,
        st: &mut State,
        p: &Placement,
        n: u64,
        avail: &Available,
    ) -> bool {
        let busy = busy_overwritten(st, p, n, avail, self.page, false);
        let mut queried = Vec::new();
        busy.into_iter()
            .all(|idx| self.stitched_idle(st, p.segment, idx, &mut queried))
    }

    /// Creates `count` physical pages; on failure releases those created so far.
    fn create_pages(&self, st: &mut State, count: usize) -> Result<Vec<PhysHandle>, DriverError> {
        let mut created = Vec::with_capacity(count);
        while created.len() < count {
            match self.vm.create(self.page) {
                Ok(h) => created.push(h),
                Err(e) => {
                    // The creation's error is the one reported; a page
                    // whose release fails is kept for the next release of
                    // the cache.
                    let _ = self.release_handles(st, created);
                    return Err(e);
                }
            }
        }
        Ok(created)
    }

    /// Reserves a new address range for (stream, pool): 1.125 times the device's
    /// capacity, like PyTorch, so it can never run out before the device does;
    /// or the stream's `expandable_segments_reserve(_by_class)`, at most that,
    /// in whole pages.
    fn new_segment(
        &self,
        st: &mut State,
        s: u32,
        pool: PoolKind,
        rounded: u64,
    ) -> Result<Option<(u32, u32)>, AllocError> {
        let page = self.page;
        let (size, _) = st.segment_reserve(s, self.capacity, page);
        if rounded > size {
            return Ok(None);
        }
        // The page table of the range, one entry per page: a host allocation
        // that a huge (simulated) capacity could make fail, which is then an
        // out-of-memory error rather than an abort.
        let mut handles = Vec::new();
        if handles.try_reserve_exact((size / page) as usize).is_err() {
            return Ok(None);
        }
        handles.resize((size / page) as usize, None);
        let base = match self.vm.reserve(size) {
            Ok(b) => b,
            Err(DriverError::OutOfMemory) => return Ok(None),
            Err(e) => return Err(self.driver_error(e)),
        };
        if base == 0 {
            // A driver's bug: the segment's first block would read as the
            // empty handle of a zero-byte request. Given back, and reported
            // as the driver's.
            let _ = self.vm.unreserve(base, size);
            return Err(self.driver_error(crate::allocator::null_range("reserve", size)));
        }
        if base.checked_add(size).is_none() {
            // A driver's bug: the range's blocks would end below where
            // they start. Given back, and reported as the driver's.
            let _ = self.vm.unreserve(base, size);
            return Err(self.driver_error(crate::allocator::wrapping_range("reserve", base, size)));
        }
        if let Some((held, held_size)) = st.held_range_overlapping(base, size) {
            // A driver's bug too: a second segment there would hand out the
            // same addresses twice. Not given back (unreserving it could
            // release the range the allocator holds).
            return Err(self.driver_error(DriverError::Call {
                call: "reserve",
                message: format!(
                    "returned {base:#x} for {size} bytes, a range overlapping the {held_size} bytes at {held:#x} that the allocator already holds; the driver must not hand out an address range twice"
                ),
            }));
        }
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
            handles,
            head,
            mapped_pages: 0,
            stitched: Default::default(),
        };
        if (seg_index as usize) < st.expandable.len() {
            st.expandable[seg_index as usize] = Some(seg);
        } else {
            st.expandable.push(Some(seg));
        }
        st.streams[s as usize].expandable[pool as usize].push(seg_index);
        Ok(Some((head, seg_index)))
    }

    /// Unmaps the mappings of `State::stray_mappings` that `which` picks;
    /// those that fail again stay, and the first failure is returned.
    pub(super) fn unmap_strays(
        &self,
        st: &mut State,
        which: impl Fn(DevicePtr, u64) -> bool,
    ) -> Result<(), AllocError> {
        let mut first = None;
        st.stray_mappings.retain(|&(at, n)| {
            if !which(at, n) {
                return true;
            }
            match self.vm.unmap(at, n) {
                Ok(()) => false,
                Err(e) => {
                    first.get_or_insert(e);
                    true
                }
            }
        });
        match first {
            None => Ok(()),
            Some(e) => Err(self.driver_error(e)),
        }
    }

    /// Releases `handles` (pages no block holds any more); those whose
    /// release fails are kept in `State::unreleased`, to be retried by the
    /// next release of the cache, and the first failure is returned.
    fn release_handles(
        &self,
        st: &mut State,
        handles: impl IntoIterator<Item = PhysHandle>,
    ) -> Result<(), AllocError> {
        let mut first = None;
        for h in handles {
            if let Err(e) = self.vm.release(h) {
                st.unreleased.push(h);
                first.get_or_insert(e);
            }
        }
        match first {
            None => Ok(()),
            Some(e) => Err(self.driver_error(e)),
        }
    }

    /// `empty_cache` for expandable segments: unmap every stitched mapping
    /// (after synchronising the streams whose queued work may still use one:
    /// `State::busy_stitched`), unmap and release every page that lies wholly
    /// inside a free block (after synchronising each stream that owns some);
    /// give back ranges left with no pages.
    pub fn release_free_pages(&self, st: &mut State) -> Result<(), AllocError> {
        let page = self.page;
        // Pages whose release failed before: retried first; a failure again
        // keeps them for the next time and is reported once the rest of
        // the cache has been released.
        // Mappings an undo could not unmap come first: their pages cannot be
        // released while mapped.
        let mut failed = self.unmap_strays(st, |_, _| true).err();
        let retry = std::mem::take(&mut st.unreleased);
        if let Err(e) = self.release_handles(st, retry) {
            failed.get_or_insert(e);
        }
        let mut synced: Vec<u32> = st.busy_stitched.values().map(|&(s, _)| s).collect();
        synced.sort_unstable();
        synced.dedup();
        for &s in &synced {
            self.driver
                .synchronize_stream(st.streams[s as usize].handle)
                .map_err(|e| self.driver_error(e))?;
        }
        st.busy_stitched.clear();
        while let Some((_, &(seg, idx))) = st.stitch_lru.iter().next() {
            self.unmap_stitched(st, seg, idx)
                .map_err(|e| self.driver_error(e))?;
        }
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
                if let Err(e) = self.release_handles(st, handles) {
                    failed.get_or_insert(e);
                }
                r?;
            }
            let seg = st.expandable[seg_i].as_ref().expect("still there");
            let stray_inside = st
                .stray_mappings
                .iter()
                .any(|&(at, _)| at >= seg.base && at - seg.base < seg.size);
            if seg.mapped_pages == 0 && !stray_inside {
                let (base, size, head, s, pool) =
                    (seg.base, seg.size, seg.head, seg.stream, seg.pool);
                debug_assert!(st.blocks[head].next == NONE && !st.blocks[head].mapped);
                self.vm
                    .unreserve(base, size)
                    .map_err(|e| self.driver_error(e))?;
                st.blocks.remove(head);
                st.history.segment_sites.remove(&base);
                st.expandable[seg_i] = None;
                st.streams[s as usize].expandable[pool as usize].retain(|&x| x != seg_i as u32);
            }
        }
        failed.map_or(Ok(()), Err)
    }
}

/// How far a growth may create pages without holding: reserved memory may
/// exceed the peak of allocated memory by 1/[`RESERVE_MARGIN`] of it or the
/// margin's floor, whichever is more ([`GROWTH_CHUNK`] pages until a block
/// of a page or more is freed, at most 1/[`FREED_FLOOR`] of the peak after).
struct Margin {
    /// The peak of allocated memory the margin is measured against: the
    /// recorded peak, or the current figure plus this request if more.
    peak: u64,
    /// Reserved memory the margin allows.
    target: u64,
    /// The pages that may still be created within it.
    headroom: u64,
}

impl Margin {
    fn of(st: &State, rounded: u64, page: u64) -> Margin {
        let allocated = st.stats.allocated_bytes.all();
        let peak = (allocated.peak as u64).max(allocated.current as u64 + rounded);
        let chunk = GROWTH_CHUNK * page;
        let floor = if st.freed_a_page {
            chunk.min(peak / FREED_FLOOR)
        } else {
            chunk
        };
        let target = peak + (peak / RESERVE_MARGIN).max(floor);
        Margin {
            peak,
            target,
            headroom: target.saturating_sub(st.reserved()) / page,
        }
    }
}

/// Whether a growth holds memory (creates pages beyond the margin) instead
/// of moving pages, and how far: the hold-or-move rule of docs/allocator.md,
/// "Holding memory or moving pages".
#[derive(Clone, Copy)]
struct Hold {
    /// The growth repeats the workload and holds.
    on: bool,
    /// Only a weak repetition: it holds only when most of its pages move
    /// back to stitched mappings of theirs (all but [`WEAK_SLACK`] of those
    /// it needs mapped).
    weak: bool,
    /// Reserved memory holding may reach: the hold limit ([`HOLD_LIMIT`])
    /// for a strong repetition, the margin with its full [`GROWTH_CHUNK`]
    /// floor for a weak one, never more than the first run's bound
    /// ([`FIRST_RUN_MARGIN`]) while the workload's first run lasts.
    cap: u64,
    /// A run that reached the present peak has ended
    /// (`Repeats::ended_at_peak`, which also ends the first run): the growth
    /// is a strong repetition and takes a hold chunk (`Hold::takes_chunk`).
    after_peak: bool,
    /// A large-pool growth after a run at the peak that grows again
    /// (`Repeats::grew_again`): one of the same context, or one in an
    /// earlier run, was already made since that run ended
    /// (`needs_room_for_chunk`).
    again: bool,
}

impl Hold {
    /// What a growth of `rounded` bytes on stream `s` in `pool` may hold,
    /// recording its context in the workload's repetitions.
    fn of(
        st: &mut State,
        s: u32,
        pool: PoolKind,
        rounded: u64,
        margin: &Margin,
        page: u64,
    ) -> Hold {
        let current = st.stats.allocated_bytes.all().current as u64;
        let context = growth_context(s, pool as u8, rounded, current, st.recent_requests);
        let now = st.free_clock;
        let ss = &st.streams[s as usize];
        // When the stream last raised its own peak, and when the workload's
        // peak was set (now, if this request raises them).
        let stream_peak_at = ss.allocated_peak.with(ss.allocated + rounded, now).at;
        let high = st.allocated_high.with(current + rounded, now);
        let repetition = st
            .repeats
            .recurs(context, high.bytes, high.at, now, stream_peak_at);
        // After a run at the peak (docs/allocator.md): once a run that
        // reached the present peak has ended, every growth is the workload
        // going round again, whatever its context (a small-pool one too:
        // moving another stream's free page made that stream grow in the
        // next round, session 67).
        let ended_at_peak = st.repeats.ended_at_peak();
        let repetition = if ended_at_peak {
            Repetition::Strong
        } else {
            repetition
        };
        let again = pool == PoolKind::Large && ended_at_peak && st.repeats.grew_again(context, now);
        let weak = repetition == Repetition::Weak;
        let peak = margin.peak;
        let cap = if weak {
            peak + (peak / RESERVE_MARGIN).max(GROWTH_CHUNK * page)
        } else {
            margin.target + peak / HOLD_LIMIT
        };
        Hold {
            on: repetition != Repetition::None,
            weak,
            cap: if st.repeats.first_run(now) {
                cap.min(peak + peak / FIRST_RUN_MARGIN)
            } else {
                cap
            },
            after_peak: ended_at_peak,
            again,
        }
    }

    /// Whether a growth that holds maps a hold chunk ([`HOLD_CHUNK`]): only
    /// once a run at the present peak has ended, not as soon as a first run
    /// that ended below the peak is over, or the chunk lands in a first pass
    /// still climbing (session 70: mae_pretrain_varmask of
    /// `traces/held_out5/` reserved a 30-page chunk there, 16 MiB above
    /// PyTorch's expandable segments).
    fn takes_chunk(self) -> bool {
        self.on && self.after_peak
    }
}

/// The hold chunk a growth that holds would map, as far as the hold limit
/// allows: [`HOLD_CHUNK`] pages, or 1/[`HOLD_CHUNK_DIVISOR`] of peak
/// allocated memory if that is less.
fn hold_chunk(st: &State, hold: Hold, margin: &Margin, page: u64) -> u64 {
    let room = hold.cap.saturating_sub(st.reserved()) / page;
    HOLD_CHUNK
        .min(margin.peak / HOLD_CHUNK_DIVISOR / page)
        .min(room)
}

/// The unmapped room a growth looks for instead of its placement
/// (`needs_room_for_chunk`).
struct RoomNeeded {
    /// The room, in pages.
    pages: u64,
    /// The most pages the request may need mapped at a placement with that
    /// room (the first of a round's large growths: [`MOVE_ON_PAGES`]); a
    /// placement that needs more leaves the growth where it was.
    max_pages: Option<u64>,
}

/// A large-pool growth past a run at the peak that fills its gap the first
/// time in a round moves on to a placement with room only if the request
/// needs at most `MOVE_ON_PAGES.0 / MOVE_ON_PAGES.1` times the pages there
/// that it maps in the gap (`needs_room_for_chunk`, third case).
const MOVE_ON_PAGES: (u64, u64) = (3, 2);

/// Whether a large-pool growth of `rounded` bytes that holds after a run at
/// the peak (docs/allocator.md, "After a run at the peak") should look for
/// another placement than `p`, where it would map `n` pages, and how much
/// unmapped room that placement needs. Three cases:
///
/// * Its request is no larger than [`HOLD_CHUNK`] pages, and `p`'s unmapped
///   range has no room for the hold chunk (which is smaller for a small
///   workload). Mapping just the request's pages in such a gap between
///   mapped ranges overwrites the stitched mappings there, which the next
///   round then needs again, and a workload can pay for a few pages in
///   round after round before its growth lands where a chunk fits; placed
///   in a range with room for the chunk, it holds the chunk at once. The
///   room looked for is the chunk.
/// * The workload grows again since that run ended (a growth of the same
///   context, or one in an earlier run, was already made since:
///   [`Hold`]'s `again`), and `p` would leave less than a chunk of its
///   unmapped range unmapped, with pages that need a driver call: the
///   growth (nearly) fills a gap between mapped ranges, so the free block
///   there at the next round's start is larger (or joined with the next
///   range's). Best fit then places that round's earlier requests
///   differently, the same point of the workload (or another) finds its
///   layout moved on and fills the next gap, and so round after round
///   (random serving workloads in `tests/traces.rs` paid to their eighth
///   pass). The room looked for holds the request's pages (at least a
///   chunk) and a chunk beyond them, which in practice is past the mapped
///   ranges, where new pages join no two free blocks. A growth whose pages
///   all move back to stitched mappings of theirs costs nothing and stays,
///   unless the hold limit allows creating them all, which `fill` then
///   does (session 68).
/// * A request larger than [`HOLD_CHUNK`] pages that does not grow again
///   yet, where `p` is as in the second case: the same room, so that the
///   round after does not find its layout moved on and grow again there
///   (random serving workloads paid in their third and fourth passes, the
///   second case catching them a round late), as long as the request needs
///   at most [`MOVE_ON_PAGES`] times `n` pages mapped at the placement with
///   that room (a large request placed past the mapped ranges maps most of
///   its pages anew, where the gap's free neighbours held them: more memory
///   held for good).
///
/// `None` when `p` stands (or no placement with that room exists: the
/// caller then keeps `p`).
#[allow(clippy::too_many_arguments)]
fn needs_room_for_chunk(
    st: &State,
    p: &Placement,
    n: u64,
    pool: PoolKind,
    rounded: u64,
    hold: Hold,
    margin: &Margin,
    avail: &Available,
    page: u64,
) -> Option<RoomNeeded> {
    if pool != PoolKind::Large || !hold.takes_chunk() {
        return None;
    }
    let chunk = hold_chunk(st, hold, margin, page);
    let large = rounded > HOLD_CHUNK * page;
    if hold.again || large {
        // Less than a chunk of unmapped space would be left after its
        // pages (for a large request, from its first growth past the run;
        // otherwise once it grows again), some of which need a driver call:
        // look for room for the whole request and a chunk beyond. Pages
        // that all move back to stitched mappings of theirs cost nothing,
        // and a round that moves them again settles; but where the hold
        // limit allows them all, `fill` creates them instead
        // (`creates_every_page`), and the gap they fill is the next round's
        // growth (prefetch_training/4834 of `tests/traces.rs` created 2
        // pages in a 2-page gap in its third pass and grew by a chunk in its
        // fourth).
        if p.room >= n + chunk {
            return None;
        }
        let costs_calls = pages::may_create_all(st, hold.cap, n as usize, margin.headroom, page)
            || p.walk_stitched(st, n, avail, page, |_, _, _, _| {}, |_| {})
                .len()
                < n as usize;
        let max_pages = (!hold.again).then(|| n * MOVE_ON_PAGES.0 / MOVE_ON_PAGES.1);
        return costs_calls.then_some(RoomNeeded {
            pages: rounded.div_ceil(page).max(chunk) + chunk,
            max_pages,
        });
    }
    (n < chunk && p.room < chunk).then_some(RoomNeeded {
        pages: chunk,
        max_pages: None,
    })
}

/// How many pages a growth maps at placement `p`: the pages the request
/// needs, or, for a large-pool growth, a whole chunk where the margin
/// allows (so that a run of similar requests does not map a few pages each
/// time) and, once a run at the peak has ended, a hold chunk for a growth
/// that holds, as far as holding may take reserved memory ([`HOLD_CHUNK`]).
fn pages_to_map(
    st: &State,
    p: &Placement,
    pool: PoolKind,
    hold: Hold,
    margin: &Margin,
    page: u64,
) -> u64 {
    let mut n = p.pages;
    if pool != PoolKind::Large {
        return n;
    }
    if margin.headroom > n {
        n = n.max(GROWTH_CHUNK.min(margin.headroom)).min(p.room);
    }
    if hold.takes_chunk() {
        let chunk = hold_chunk(st, hold, margin, page);
        if chunk > n && st.fits_fraction(chunk * page) {
            n = chunk.min(p.room);
        }
    }
    n
}

/// Whether a growth that would hold gives the hold up entirely with
/// placement `p` mapping `n` pages (as `fill` will decide; a weak repetition
/// that may still create some of its pages does not).
fn gives_up_holding(
    st: &State,
    p: &Placement,
    n: usize,
    avail: &Available,
    hold: Hold,
    headroom: u64,
    page: u64,
) -> bool {
    let taken = p.walk_stitched(st, n as u64, avail, page, |_, _, _, _| {}, |_| {});
    let others = n - taken.len();
    let within = others.min(headroom as usize);
    let (hold, partial) = holds(
        st,
        true,
        hold.weak,
        hold.cap,
        taken.len(),
        others,
        within,
        page,
    );
    !hold && partial == 0
}
