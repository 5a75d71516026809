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
//!   suffice, or when a growth repeats the workload (`repeats.rs`): such a
//!   growth holds memory, creating its pages, so that the next round of the
//!   workload finds them in place and makes no driver call.
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
use crate::repeats::{growth_context, Repetition};
use crate::state::{ExpandableSegment, State};
use rustc_hash::FxHashSet;

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
    /// a margin of the highest allocated figure so far (the larger of 1/32 of
    /// it and a floor: [`GROWTH_CHUNK`] pages until a block of a page or more
    /// is freed, at most
    /// 1/[`FREED_FLOOR`] of it after); beyond that margin the pages are
    /// recycled from free space, unless the growth repeats the workload
    /// ([`crate::repeats`]): then it holds, creating the pages, up to
    /// [`HOLD_LIMIT`]; a weak repetition holds only when most of its pages
    /// move back to stitched mappings of theirs (all but [`WEAK_SLACK`]
    /// of those it needs mapped), and only up to the margin
    /// with the full [`GROWTH_CHUNK`] floor. A page that already has a stitched mapping
    /// at the address where it is needed moves there with no driver call. The
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
        let allocated = &st.stats.allocated_bytes.all();
        let peak = (allocated.peak as u64).max(allocated.current as u64 + rounded);
        let chunk = GROWTH_CHUNK * page;
        let floor = if st.freed_a_page {
            chunk.min(peak / FREED_FLOOR)
        } else {
            chunk
        };
        let target = peak + (peak / RESERVE_MARGIN).max(floor);
        let headroom = target.saturating_sub(st.reserved()) / page;
        // The hold-or-move rule (docs/allocator.md, "Holding memory or moving
        // pages"): a growth that repeats the workload holds memory instead of
        // moving pages.
        let context = growth_context(
            s,
            pool as u8,
            rounded,
            allocated.current as u64,
            st.recent_requests,
        );
        let now = st.free_clock;
        let ss = &st.streams[s as usize];
        // When the stream last raised its own peak, and when the workload's
        // peak was set (now, if this request raises them).
        let stream_peak_at = ss.allocated_peak.with(ss.allocated + rounded, now).at;
        let high = st
            .allocated_high
            .with(allocated.current as u64 + rounded, now);
        let repetition = st
            .repeats
            .recurs(context, high.bytes, high.at, now, stream_peak_at);
        let hold = repetition != Repetition::None;
        let weak = repetition == Repetition::Weak;
        // What holding may take reserved memory to: the hold limit for a
        // (strong) repetition; for a weak one, the margin with its full
        // 10-page floor.
        let hold_cap = if weak {
            peak + (peak / RESERVE_MARGIN).max(chunk)
        } else {
            target + peak / HOLD_LIMIT
        };
        let avail = self.available_pages(st, s, pool);
        let recyclable = if hold { 0 } else { avail.pages };
        // A placement overwrites the stitched mappings in its range (other
        // than those its pages move back to). One that queued work may still
        // use is unmapped only once its stream's fence has passed it; if the
        // chosen placement would need such a mapping, the choice is made again
        // among the placements that need none (without the chunk).
        let mut avoid_busy = false;
        let (p, n) = loop {
            let mut best: Option<(Cost, Placement)> = None;
            for &seg in &st.streams[s as usize].expandable[pool as usize] {
                let sg = st.expandable[seg as usize]
                    .as_ref()
                    .expect("listed segment");
                let mut id = sg.head;
                while id != NONE {
                    let b = &st.blocks[id];
                    if !b.mapped {
                        for (start, with_before) in candidate_starts(seg, sg, b, &avail, page) {
                            let Some(p) =
                                placement_at(st, id, seg, start, rounded, page, with_before)
                            else {
                                continue;
                            };
                            if avoid_busy
                                && !busy_overwritten(st, &p, p.pages, &avail, page, true).is_empty()
                            {
                                continue;
                            }
                            let cost = placement_cost(st, &p, &avail, headroom, recyclable, page);
                            if best.as_ref().is_none_or(|b| cost < b.0) {
                                best = Some((cost, p));
                            }
                        }
                    }
                    id = b.next;
                }
            }
            // A placement in fresh address space (every page mapped with a
            // driver call, no stitched mapping of its own there) is weighed
            // against one over a run of free blocks and unmapped ranges,
            // which keeps the layout where the workload has been instead of
            // moving it on to new addresses (docs/allocator.md).
            let fresh = best.as_ref().is_none_or(|b| in_fresh_space(&b.0));
            if !avoid_busy && fresh {
                if let Some((cost, span)) =
                    self.best_span(st, s, pool, rounded, &avail, headroom, recyclable)
                {
                    if best.as_ref().is_none_or(|b| cost < b.0) {
                        return self.fill_span(st, s, &span, hold, weak, hold_cap, target);
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
            // Within the margin, map a whole chunk for large requests so that a
            // run of similar requests does not map a few pages each time.
            let mut n = p.pages;
            if !avoid_busy && pool == PoolKind::Large && headroom > n {
                n = n.max(GROWTH_CHUNK.min(headroom)).min(p.room);
            }
            if avoid_busy {
                break (p, n as usize);
            }
            let busy = busy_overwritten(st, &p, n, &avail, page, false);
            let mut queried = Vec::new();
            let all_idle = busy
                .into_iter()
                .all(|idx| self.stitched_idle(st, p.segment, idx, &mut queried));
            if all_idle {
                break (p, n as usize);
            }
            avoid_busy = true;
        };
        let spare = FxHashSet::default();
        self.fill(st, &p, n, hold, weak, hold_cap, headroom, &avail, &spare)
    }

    /// The best placement over a run of free blocks and unmapped ranges that
    /// takes in at least two unmapped ranges (the others are the single
    /// placements of `grow`), ranked as those are. The free blocks' pages
    /// stay where they are and only the unmapped ranges are mapped. A run
    /// whose unmapped ranges hold a stitched mapping marked busy (queued
    /// work may still use it) is passed over, whatever its fence.
    #[allow(clippy::too_many_arguments)]
    fn best_span(
        &self,
        st: &State,
        s: u32,
        pool: PoolKind,
        rounded: u64,
        avail: &Available,
        headroom: u64,
        recyclable: u64,
    ) -> Option<(Cost, Span)> {
        let page = self.page;
        let mut best: Option<(Cost, Span)> = None;
        // Each start walks forward until the run holds the request: bounded
        // work per growth, so a segment of many small blocks does not make
        // the search quadratic.
        let mut budget = SPAN_SEARCH_BUDGET;
        for &seg in &st.streams[s as usize].expandable[pool as usize] {
            let sg = st.expandable[seg as usize]
                .as_ref()
                .expect("listed segment");
            let mut ids = Vec::new();
            let mut id = sg.head;
            while id != NONE {
                ids.push(id);
                id = st.blocks[id].next;
            }
            let usable = |b: &Block| !b.mapped || b.is_free();
            for i in 0..ids.len() {
                let b0 = &st.blocks[ids[i]];
                if !usable(b0) {
                    continue;
                }
                let start = b0.ptr;
                let mut holes: Vec<(u64, u64)> = Vec::new();
                let mut end = start;
                let mut last = None;
                for (k, &bid) in ids.iter().enumerate().skip(i) {
                    let b = &st.blocks[bid];
                    if !usable(b) || budget == 0 {
                        break;
                    }
                    budget -= 1;
                    if !b.mapped {
                        let need = (start + rounded).saturating_sub(b.ptr);
                        let np = need.div_ceil(page).min(b.size / page);
                        if np == 0 {
                            break;
                        }
                        holes.push((b.ptr, np));
                        end = b.ptr + np * page;
                        if end < b.end() && end < start + rounded {
                            break;
                        }
                    } else {
                        end = b.end();
                    }
                    if end >= start + rounded {
                        last = Some(k);
                        break;
                    }
                }
                let Some(k) = last else { continue };
                if holes.len() < 2 {
                    continue;
                }
                let (mut flips, mut stale, mut total) = (0u64, 0u64, 0u64);
                let mut seen: FxHashSet<PhysHandle> = FxHashSet::default();
                let mut busy = false;
                for &(hp, np) in &holes {
                    total += np;
                    budget = budget.saturating_sub(np as usize);
                    walk_stitched(
                        seg,
                        ((hp - sg.base) / page) as u32,
                        np,
                        avail,
                        |addr, _| !(start..end).contains(&addr),
                        &mut seen,
                        |_, _, _, _| flips += 1,
                        |idx| {
                            stale += 1;
                            busy |= st.busy_stitched.contains_key(&(seg, idx));
                        },
                    );
                }
                if busy {
                    continue;
                }
                let kept = whole_pages(
                    ids[i..=k]
                        .iter()
                        .map(|&x| &st.blocks[x])
                        .filter(|b| b.mapped),
                    page,
                );
                let rest = total - flips;
                let created = created_beyond(rest, headroom, recyclable, kept, flips);
                let cost = (created, rest, stale, total, start);
                if best.as_ref().is_none_or(|b| cost < b.0) {
                    best = Some((
                        cost,
                        Span {
                            segment: seg,
                            start,
                            end,
                            holes,
                        },
                    ));
                }
            }
        }
        best
    }

    /// Maps the unmapped ranges of `span` one after the other (each merges
    /// with the free blocks around it), none of the span's free pages
    /// recycled; returns the free block (out of the index) that results.
    #[allow(clippy::too_many_arguments)]
    fn fill_span(
        &self,
        st: &mut State,
        s: u32,
        span: &Span,
        hold: bool,
        weak: bool,
        hold_cap: u64,
        target: u64,
    ) -> Result<Option<u32>, AllocError> {
        let page = self.page;
        let mut merged: Option<u32> = None;
        let (pool, base) = {
            let sg = st.expandable[span.segment as usize]
                .as_ref()
                .expect("segment exists");
            (sg.pool, sg.base)
        };
        let inside = |st: &State, id: u32| {
            let b = &st.blocks[id];
            b.segment == span.segment && b.ptr < span.end && b.end() > span.start
        };
        // The pages each range moves back to stitched mappings of theirs, as
        // `best_span` counted them: an earlier range must not recycle a page
        // that a later one moves back, or the later range would overwrite
        // that mapping instead (which queued work may still use).
        let mut backs: Vec<FxHashSet<PhysHandle>> = Vec::with_capacity(span.holes.len());
        {
            let mut avail = self.available_pages(st, s, pool);
            avail.exclude(|id| inside(st, id), page);
            let mut seen = FxHashSet::default();
            for &(hp, np) in &span.holes {
                let mut v = FxHashSet::default();
                walk_stitched(
                    span.segment,
                    ((hp - base) / page) as u32,
                    np,
                    &avail,
                    |_, _| true,
                    &mut seen,
                    |_, h, _, _| {
                        v.insert(h);
                    },
                    |_| {},
                );
                backs.push(v);
            }
        }
        for (k, &(hp, np)) in span.holes.iter().enumerate() {
            let spare: FxHashSet<PhysHandle> = backs[k + 1..].iter().flatten().copied().collect();
            let mut avail = self.available_pages(st, s, pool);
            avail.exclude(|id| inside(st, id), page);
            let headroom = target.saturating_sub(st.reserved()) / page;
            let sg = st.expandable[span.segment as usize]
                .as_ref()
                .expect("segment exists");
            let mut u = sg.head;
            while st.blocks[u].ptr != hp {
                u = st.blocks[u].next;
            }
            let b = &st.blocks[u];
            debug_assert!(!b.mapped);
            // The free neighbours that the mapped range merges with are the
            // span's own: a free block just outside it is not part of the
            // placement, and its pages may move back to stitched mappings in
            // this range (as `best_span` counted them).
            let free = |x: u32| {
                if x != NONE && st.blocks[x].is_free() && inside(st, x) {
                    x
                } else {
                    NONE
                }
            };
            let p = Placement {
                map_at: hp,
                segment: span.segment,
                pages: np,
                room: b.size / page,
                keep: [free(b.prev), free(b.next)],
            };
            match self.fill(
                st,
                &p,
                np as usize,
                hold,
                weak,
                hold_cap,
                headroom,
                &avail,
                &spare,
            ) {
                Ok(Some(id)) => merged = Some(id),
                failed => {
                    // The ranges mapped so far stay mapped, as a free block
                    // back in the index; this range is left as it was.
                    if let Some(m) = merged {
                        st.index_insert(m);
                    }
                    return failed.map(|_| None);
                }
            }
        }
        Ok(merged)
    }

    /// Maps `n` pages of placement `p`: the pages that move back to a
    /// stitched mapping of theirs, then new pages within the margin
    /// (`headroom`), then recycled pages or, for a growth that holds, new
    /// ones (up to `hold_cap`), never one of `spare` (pages that a later
    /// range of the same span moves back). Returns the free block (out of
    /// the index) that results.
    #[allow(clippy::too_many_arguments)]
    fn fill(
        &self,
        st: &mut State,
        p: &Placement,
        n: usize,
        mut hold: bool,
        weak: bool,
        hold_cap: u64,
        headroom: u64,
        avail: &Available,
        spare: &FxHashSet<PhysHandle>,
    ) -> Result<Option<u32>, AllocError> {
        let page = self.page;
        // The pages that move back to a stitched mapping of theirs (no driver
        // call), then new pages within the margin, then recycled pages (least
        // recently freed first), then new pages beyond the margin.
        let seg_base = st.expandable[p.segment as usize]
            .as_ref()
            .expect("segment exists")
            .base;
        let first = ((p.map_at - seg_base) / page) as u32;
        let mut plan: Vec<Option<(PhysHandle, bool)>> = vec![None; n];
        let mut taken: FxHashSet<PhysHandle> = FxHashSet::default();
        let mut sources: Vec<(u32, u64)> = Vec::new();
        walk_stitched(
            p.segment,
            first,
            n as u64,
            avail,
            |_, blk| !p.keep.contains(&blk),
            &mut taken,
            |idx, h, addr, blk| {
                plan[(idx - first) as usize] = Some((h, true));
                sources.push((blk, addr));
            },
            |_| {},
        );
        let others = n - taken.len();
        let within = others.min(headroom as usize);
        // A repeating growth holds only within its limit, and only if the
        // memory fraction allows it; otherwise it moves pages like any other.
        // A weak repetition holds only when the growth finds at least as many
        // of its pages at stitched mappings of their own as it needs mapped,
        // less one (the layout it returns to is mostly there already; the
        // one page of slack lets a one-page growth, which either needs no
        // page mapped or has no page to move back, hold at all), and then
        // creates what fits under its cap, moving the rest.
        let beyond = (others - within) as u64 * page;
        let mut partial = 0;
        if hold && weak {
            let room = (hold_cap.saturating_sub(st.reserved()) / page) as usize;
            let need = others - within;
            if taken.len() + WEAK_SLACK < others {
                hold = false;
            } else if room < need {
                hold = false;
                if st.fits_fraction(room as u64 * page) {
                    partial = room;
                }
            }
        }
        if hold && (st.reserved() + beyond > hold_cap || !st.fits_fraction(beyond)) {
            hold = false;
        }
        let fresh = loop {
            let mut recycled: Vec<PhysHandle> = Vec::new();
            let mut moved: Vec<(u32, u64)> = Vec::new();
            if !hold {
                'blocks: for &(_, blk, p0, p1) in &avail.blocks {
                    if p.keep.contains(&blk) {
                        continue;
                    }
                    let mut at = p1;
                    while at > p0 {
                        if recycled.len() >= others - within - partial {
                            break 'blocks;
                        }
                        at -= page;
                        let h = handle_at(st, blk, at, page);
                        if !taken.contains(&h) && !spare.contains(&h) {
                            recycled.push(h);
                            moved.push((blk, at));
                        }
                    }
                }
            }
            let create = others - recycled.len();
            if !st.fits_fraction(create as u64 * page) {
                return Ok(None);
            }
            match self.create_pages(create) {
                Ok(created) => {
                    sources.extend(moved);
                    break recycled.into_iter().chain(created).collect::<Vec<_>>();
                }
                // Holding found the device full: move pages instead.
                Err(DriverError::OutOfMemory) if hold || partial > 0 => {
                    hold = false;
                    partial = 0;
                }
                Err(DriverError::OutOfMemory) => return Ok(None),
                Err(e) => return Err(self.driver_error(e)),
            }
        };
        // The pages taken from free blocks leave stitched mappings behind.
        self.detach_pages(st, sources);
        let mut fresh = fresh.into_iter();
        let plan: Vec<(PhysHandle, bool)> = plan
            .into_iter()
            .map(|x| x.unwrap_or_else(|| (fresh.next().expect("enough pages"), false)))
            .collect();
        let id = self.map_pages(st, p.segment, p.map_at, plan)?;
        self.evict_stitched(st)?;
        Ok(Some(id))
    }

    /// Creates `count` physical pages; on failure releases those created so far.
    fn create_pages(&self, count: usize) -> Result<Vec<PhysHandle>, DriverError> {
        let mut created = Vec::with_capacity(count);
        while created.len() < count {
            match self.vm.create(self.page) {
                Ok(h) => created.push(h),
                Err(e) => {
                    for h in created {
                        // A failed release leaks one page in the driver but
                        // leaves the allocator consistent.
                        let _ = self.vm.release(h);
                    }
                    return Err(e);
                }
            }
        }
        Ok(created)
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

    /// The pages that may move now: those lying wholly inside free blocks
    /// whose stream's [`Fence`] covers their free (each stream's fence is
    /// queried at most once, and recorded if none is pending).
    fn available_pages(&self, st: &mut State, s: u32, pool: PoolKind) -> Available {
        let page = self.page;
        // The free blocks of expandable segments with whole pages: every one
        // is in its stream's free index (only the non-empty bins are
        // visited, rather than every block of every segment).
        let mut blocks: Vec<(u64, u32, u64, u64)> = Vec::new();
        for ss in &st.streams {
            for e in ss.free.iter().flat_map(|idx| idx.all()) {
                let b = &st.blocks[e.block];
                if b.expandable && e.size >= page {
                    if let Some((p0, p1)) = interior_pages(b, page) {
                        blocks.push((b.freed_at, e.block, p0, p1));
                    }
                }
            }
        }
        // The growth's own stream may take its pages at once: the old
        // mapping stays (stitched) for the work still queued there, and the
        // new block's work comes after it in stream order. Other streams'
        // pages need their fence: one check per stream, for the latest free
        // among its blocks.
        let mut latest: Vec<u64> = vec![0; st.streams.len()];
        for &(freed_at, id, _, _) in &blocks {
            let bs = st.blocks[id].stream as usize;
            if bs != s as usize {
                latest[bs] = latest[bs].max(freed_at);
            }
        }
        for (bs, &l) in latest.iter().enumerate() {
            if l > 0 {
                self.stream_idle_since(st, bs as u32, l);
            }
        }
        blocks.retain(|&(freed_at, id, _, _)| {
            let bs = st.blocks[id].stream;
            bs == s || freed_at <= st.streams[bs as usize].fence.done
        });
        blocks.sort_unstable();
        let pages = Available::pages_in(&blocks, page);
        // Only a page with a stitched mapping somewhere can move back to it.
        // The stitched mappings of the segments a growth of (`s`, `pool`) may
        // use are listed with where each one's page lies if it may move back
        // (`holding`, over the blocks sorted by address): looked up once here,
        // as the placement search visits them many times.
        let mut by_address: Vec<(u64, u64, u32)> =
            blocks.iter().map(|&(_, id, p0, p1)| (p0, p1, id)).collect();
        by_address.sort_unstable();
        let stitched = st.streams[s as usize].expandable[pool as usize]
            .iter()
            .map(|&seg| {
                let sg = st.expandable[seg as usize]
                    .as_ref()
                    .expect("listed segment");
                let view = sg
                    .stitched
                    .iter()
                    .map(|(&idx, &(handle, _))| Stitch {
                        idx,
                        handle,
                        back: holding(st, &by_address, handle, page),
                    })
                    .collect();
                (seg, view)
            })
            .collect();
        Available {
            blocks,
            pages,
            stitched,
        }
    }

    /// Takes the pages at `sources` (block, page address; each page wholly
    /// inside that free block, whose fence has completed) out of their blocks
    /// without unmapping them: each leaves a stitched mapping behind, and the
    /// range becomes unmapped space for the blocks.
    fn detach_pages(&self, st: &mut State, mut sources: Vec<(u32, u64)>) {
        let page = self.page;
        // Highest address first within a block: carving the top of a block
        // keeps its index for the part below.
        sources.sort_unstable_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
        let mut i = 0;
        while i < sources.len() {
            let (id, top) = sources[i];
            let mut from = top;
            let mut j = i + 1;
            while j < sources.len() && sources[j].0 == id && sources[j].1 + page == from {
                from -= page;
                j += 1;
            }
            let to = top + page;
            let (seg_i, stream, pool, freed_at) = {
                let b = &st.blocks[id];
                (b.segment, b.stream, b.pool.stat(), b.freed_at)
            };
            let busy = freed_at > st.streams[stream as usize].fence.done;
            let mut at = from;
            while at < to {
                st.stitch_clock += 1;
                let stamp = st.stitch_clock;
                let seg = st.expandable[seg_i as usize]
                    .as_mut()
                    .expect("block's segment exists");
                let idx = ((at - seg.base) / page) as u32;
                let h = seg.handles[idx as usize]
                    .take()
                    .expect("a mapped page has a handle");
                seg.mapped_pages -= 1;
                seg.stitched.insert(idx, (h, stamp));
                st.live.remove(&h);
                if busy {
                    st.busy_stitched.insert((seg_i, idx), (stream, freed_at));
                }
                st.stitch_lru.insert(stamp, (seg_i, idx));
                st.aliases.entry(h).or_default().push((seg_i, idx));
                at += page;
            }
            st.record(Action::SegmentUnmap, from, to - from, stream);
            carve_unmapped(st, id, from, to);
            st.stats.reserved_bytes.decrease(pool, (to - from) as i64);
            i = j;
        }
    }

    /// Removes the stitched mapping at page `idx` of segment `seg` from the
    /// allocator's books (the caller unmaps it, or makes it live again).
    fn forget_stitched(st: &mut State, seg: u32, idx: u32) -> Option<PhysHandle> {
        let (h, stamp) = st.expandable[seg as usize]
            .as_mut()
            .expect("segment exists")
            .stitched
            .remove(&idx)?;
        st.stitch_lru.remove(&stamp);
        st.busy_stitched.remove(&(seg, idx));
        if let Some(v) = st.aliases.get_mut(&h) {
            v.retain(|&x| x != (seg, idx));
            if v.is_empty() {
                st.aliases.remove(&h);
            }
        }
        Some(h)
    }

    /// Unmaps the stitched mapping at page `idx` of segment `seg`.
    fn unmap_stitched(&self, st: &mut State, seg: u32, idx: u32) -> Result<(), DriverError> {
        let base = st.expandable[seg as usize]
            .as_ref()
            .expect("segment exists")
            .base;
        self.vm.unmap(base + idx as u64 * self.page, self.page)?;
        Self::forget_stitched(st, seg, idx);
        Ok(())
    }

    /// Keeps the stitched mappings within their bound ([`STITCHED_PER_PAGE`]
    /// per reserved page, plus [`STITCHED_MIN`]), unmapping the least recently
    /// used first.
    ///
    /// A mapping that work queued on its stream may still use
    /// (`State::busy_stitched`) is passed over until the stream's fence has
    /// passed it, so the bound can be exceeded for a while.
    fn evict_stitched(&self, st: &mut State) -> Result<(), AllocError> {
        let bound = STITCHED_PER_PAGE * (st.reserved() / self.page) + STITCHED_MIN;
        let excess = (st.stitch_lru.len() as u64).saturating_sub(bound) as usize;
        if excess == 0 {
            return Ok(());
        }
        // Oldest first, by stamp; `from` steps past the ones passed over.
        let (mut left, mut from, mut queried) = (excess, 0, Vec::new());
        while left > 0 {
            let Some((&stamp, &(seg, idx))) = st.stitch_lru.range(from..).next() else {
                break;
            };
            from = stamp + 1;
            if !self.stitched_idle(st, seg, idx, &mut queried) {
                continue;
            }
            self.unmap_stitched(st, seg, idx)
                .map_err(|e| self.driver_error(e))?;
            left -= 1;
        }
        Ok(())
    }

    /// Whether no queued work can still use the stitched mapping at page
    /// `idx` of segment `seg`, so that it may be unmapped. Its stream's fence
    /// is queried at most once per caller's operation (the streams queried
    /// are listed in `queried`); after that only what it has shown counts.
    fn stitched_idle(&self, st: &mut State, seg: u32, idx: u32, queried: &mut Vec<u32>) -> bool {
        match st.busy_stitched.get(&(seg, idx)).copied() {
            None => true,
            Some((s, freed_at)) => {
                let idle = freed_at <= st.streams[s as usize].fence.done
                    || (!queried.contains(&s) && {
                        queried.push(s);
                        self.stream_idle_since(st, s, freed_at)
                    });
                if idle {
                    st.busy_stitched.remove(&(seg, idx));
                }
                idle
            }
        }
    }

    /// Gives a physical page back to the driver after a failed growth: its
    /// stitched mappings are unmapped first. Failures leak the page in the
    /// driver but leave the allocator consistent.
    /// A stitched mapping that queued work may still use is unmapped after
    /// synchronising its stream (only on this failure path).
    fn drop_handle(&self, st: &mut State, h: PhysHandle) {
        for (seg, idx) in st.aliases.get(&h).cloned().unwrap_or_default() {
            if let Some(&(s, _)) = st.busy_stitched.get(&(seg, idx)) {
                let _ = self
                    .driver
                    .synchronize_stream(st.streams[s as usize].handle);
            }
            if self.unmap_stitched(st, seg, idx).is_err() {
                Self::forget_stitched(st, seg, idx);
            }
        }
        let _ = self.vm.release(h);
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
            seg.mapped_pages -= 1;
            st.live.remove(&h);
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

    /// Maps `plan` at `start` (page-aligned, inside an unmapped block of
    /// segment `seg`): each page's physical handle, and whether a stitched
    /// mapping of it is already there (then it costs no driver call). A
    /// stitched mapping of another page in the way is unmapped first. Returns
    /// the free block (merged with its free neighbours, out of the index) that
    /// results.
    fn map_pages(
        &self,
        st: &mut State,
        seg: u32,
        start: u64,
        plan: Vec<(PhysHandle, bool)>,
    ) -> Result<u32, AllocError> {
        let page = self.page;
        let len = plan.len() as u64 * page;
        let base = st.expandable[seg as usize]
            .as_ref()
            .expect("segment exists")
            .base;
        let first = ((start - base) / page) as u32;
        let mut mapped: Vec<u64> = Vec::new();
        let mut failure = None;
        for (i, &(h, stitched)) in plan.iter().enumerate() {
            if stitched {
                continue;
            }
            let at = start + i as u64 * page;
            let idx = first + i as u32;
            let in_the_way = st.expandable[seg as usize]
                .as_ref()
                .expect("segment exists")
                .stitched
                .contains_key(&idx);
            if in_the_way {
                // Placements are chosen so that this mapping is not one that
                // queued work may still use; should one be, its stream is
                // synchronised rather than the memory pulled from under that
                // work (the tests count synchronisations, so such a slip shows).
                let mut queried = Vec::new();
                if !self.stitched_idle(st, seg, idx, &mut queried) {
                    if let Some(&(bs, _)) = st.busy_stitched.get(&(seg, idx)) {
                        if let Err(e) = self
                            .driver
                            .synchronize_stream(st.streams[bs as usize].handle)
                        {
                            failure = Some(e);
                            break;
                        }
                    }
                }
                if let Err(e) = self.unmap_stitched(st, seg, idx) {
                    failure = Some(e);
                    break;
                }
            }
            if let Err(e) = self.vm.map(at, page, h) {
                failure = Some(e);
                break;
            }
            mapped.push(at);
        }
        if failure.is_none() {
            // One access grant per run of new mappings.
            let mut k = 0;
            while k < mapped.len() {
                let mut z = k + 1;
                while z < mapped.len() && mapped[z] == mapped[z - 1] + page {
                    z += 1;
                }
                if let Err(e) = self.vm.set_access(mapped[k], (z - k) as u64 * page) {
                    failure = Some(e);
                    break;
                }
                k = z;
            }
        }
        if let Some(e) = failure {
            // Undo: the range stays unmapped and every page of the plan goes
            // back to the driver (the recycled ones were already accounted as
            // unmapped), leaving the segment consistent.
            for &at in &mapped {
                let _ = self.vm.unmap(at, page);
            }
            for (h, _) in plan {
                self.drop_handle(st, h);
            }
            return Err(self.driver_error(e));
        }
        for (i, &(h, stitched)) in plan.iter().enumerate() {
            let idx = first + i as u32;
            if stitched {
                Self::forget_stitched(st, seg, idx);
            }
            let sg = st.expandable[seg as usize]
                .as_mut()
                .expect("segment exists");
            sg.handles[idx as usize] = Some(h);
            st.live.insert(h, (seg, idx));
        }
        st.expandable[seg as usize]
            .as_mut()
            .expect("segment exists")
            .mapped_pages += plan.len() as u64;
        // Detaching pages may have merged more unmapped space into the target
        // block: find the block that holds `start` now, and cut
        // `[start, start + len)` out of it.
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
        let pool = st.blocks[u].pool.stat();
        st.stats.reserved_bytes.increase(pool, len as i64);
        if !mapped.is_empty() {
            st.stats.num_device_alloc += 1;
        }
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

    /// Releases physical pages that have no mapping left.
    fn release_handles(&self, handles: Vec<PhysHandle>) {
        for h in handles {
            // A failed release leaks one page in the driver but leaves the
            // allocator consistent; there is nothing better to do with it.
            let _ = self.vm.release(h);
        }
    }

    /// `empty_cache` for expandable segments: unmap every stitched mapping
    /// (after synchronising the streams whose queued work may still use one:
    /// `State::busy_stitched`), unmap and release every page that lies wholly
    /// inside a free block (after synchronising each stream that owns some);
    /// give back ranges left with no pages.
    pub fn release_free_pages(&self, st: &mut State) -> Result<(), AllocError> {
        let page = self.page;
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
                self.release_handles(handles);
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

/// Where `rounded` bytes would go if mapped from page address `from` of
/// unmapped block `u`: either starting in the free block before it
/// (`with_before`, only when `from` is the block's start), or at `from`.
fn placement_at(
    st: &State,
    u: u32,
    segment: u32,
    from: u64,
    rounded: u64,
    page: u64,
    with_before: bool,
) -> Option<Placement> {
    let b = &st.blocks[u];
    let before = (b.prev != NONE && st.blocks[b.prev].is_free()).then_some(b.prev);
    if with_before && (before.is_none() || from != b.ptr) {
        return None;
    }
    let before = before.filter(|_| with_before);
    let after = (b.next != NONE && st.blocks[b.next].is_free()).then_some(b.next);
    let start = before.map_or(from, |p| st.blocks[p].ptr);
    let end = after.map_or(b.end(), |n| st.blocks[n].end());
    if end - start < rounded {
        return None;
    }
    let need_end = (start + rounded).min(b.end());
    let uses_after = start + rounded > b.end();
    Some(Placement {
        map_at: from,
        segment,
        pages: need_end.saturating_sub(from).div_ceil(page),
        room: (b.end() - from) / page,
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

/// A run of free blocks and unmapped ranges a request may take as a whole:
/// `[start, end)` of `segment`, and the page-aligned start of each unmapped
/// range with the pages to map there.
struct Span {
    segment: u32,
    start: u64,
    end: u64,
    holes: Vec<(u64, u64)>,
}

/// The pages that may move now (see [`ExpandableSpace::available_pages`]).
struct Available {
    /// `(freed_at, block, first page, end of last page)` of each free block
    /// with whole pages whose fence has completed, least recently freed first.
    blocks: Vec<(u64, u32, u64, u64)>,
    /// How many whole pages they hold.
    pages: u64,
    /// The stitched mappings of the growth's segments, by segment, each in
    /// page order.
    stitched: Vec<(u32, Vec<Stitch>)>,
}

/// A stitched mapping as a growth sees it: its page index in the segment,
/// its physical page, and, if that page may move back to it, where the page
/// lies (address and free block, [`holding`]).
#[derive(Clone, Copy)]
struct Stitch {
    idx: u32,
    handle: PhysHandle,
    back: Option<(u64, u32)>,
}

impl Available {
    /// The whole pages of `blocks`.
    fn pages_in(blocks: &[(u64, u32, u64, u64)], page: u64) -> u64 {
        blocks.iter().map(|&(_, _, p0, p1)| (p1 - p0) / page).sum()
    }

    /// Leaves out the blocks that `drop` names, and their pages.
    fn exclude(&mut self, drop: impl Fn(u32) -> bool, page: u64) {
        self.blocks.retain(|&(_, id, _, _)| !drop(id));
        self.pages = Self::pages_in(&self.blocks, page);
        for e in self.stitched.iter_mut().flat_map(|(_, v)| v.iter_mut()) {
            if e.back.is_some_and(|(_, id)| drop(id)) {
                e.back = None;
            }
        }
    }

    /// The stitched mappings at pages `first..end` of segment `seg`, in
    /// page order (none for a segment made after the look-up: it has none).
    fn stitched_in(&self, seg: u32, first: u32, end: u32) -> &[Stitch] {
        let Some((_, v)) = self.stitched.iter().find(|x| x.0 == seg) else {
            return &[];
        };
        let a = v.partition_point(|e| e.idx < first);
        let z = a + v[a..].partition_point(|e| e.idx < end);
        &v[a..z]
    }
}

/// Where physical page `h` lies, if it is live inside one of the blocks of
/// `by_address` (`(first page, end of last page, block)`, sorted): its
/// address and the block (a page with a stitched mapping elsewhere can then
/// move back to it).
fn holding(
    st: &State,
    by_address: &[(u64, u64, u32)],
    h: PhysHandle,
    page: u64,
) -> Option<(u64, u32)> {
    let &(seg, idx) = st.live.get(&h)?;
    let base = st.expandable[seg as usize].as_ref()?.base;
    let at = base + idx as u64 * page;
    let i = by_address.partition_point(|&(p0, _, _)| p0 <= at);
    let &(_, p1, id) = by_address.get(i.checked_sub(1)?)?;
    (at < p1).then_some((at, id))
}

/// How a placement ranks, lowest first: pages created beyond the margin,
/// pages that need a driver mapping (all but those moving back to a stitched
/// mapping of theirs), stitched mappings of other pages overwritten, pages,
/// address.
type Cost = (u64, u64, u64, u64, u64);

fn placement_cost(
    st: &State,
    p: &Placement,
    avail: &Available,
    headroom: u64,
    recyclable: u64,
    page: u64,
) -> Cost {
    let sg = st.expandable[p.segment as usize]
        .as_ref()
        .expect("segment exists");
    let first = ((p.map_at - sg.base) / page) as u32;
    let (mut flips, mut stale) = (0u64, 0u64);
    walk_stitched(
        p.segment,
        first,
        p.pages,
        avail,
        |_, blk| !p.keep.contains(&blk),
        &mut FxHashSet::default(),
        |_, _, _, _| flips += 1,
        |_| stale += 1,
    );
    let kept = whole_pages(
        p.keep
            .iter()
            .filter(|&&k| k != NONE)
            .map(|&k| &st.blocks[k]),
        page,
    );
    let rest = p.pages - flips;
    let created = created_beyond(rest, headroom, recyclable, kept, flips);
    (created, rest, stale, p.pages, p.map_at)
}

/// Where a placement in unmapped block `b` of segment `sg` may start: at the
/// block's start (with or without the free block before it), at the start of
/// each run of stitched mappings of pages that may move now, and just after
/// each run of stitched mappings (fresh address space, overwriting none).
fn candidate_starts(
    seg: u32,
    sg: &ExpandableSegment,
    b: &Block,
    avail: &Available,
    page: u64,
) -> Vec<(u64, bool)> {
    let mut v = vec![(b.ptr, true), (b.ptr, false)];
    let first = ((b.ptr - sg.base) / page) as u32;
    let last = ((b.end() - sg.base) / page) as u32;
    let addr = |pi: u32| sg.base + pi as u64 * page;
    let mut prev: Option<(u32, bool)> = None;
    for e in avail.stitched_in(seg, first, last) {
        let (pi, av) = (e.idx, e.back.is_some());
        let cont = prev.is_some_and(|(pp, _)| pp + 1 == pi);
        if let Some((pp, _)) = prev {
            if !cont {
                v.push((addr(pp + 1), false));
            }
        }
        let after_available = cont && prev.is_some_and(|(_, a)| a);
        if av && pi != first && !after_available {
            v.push((addr(pi), false));
        }
        prev = Some((pi, av));
    }
    if let Some((pp, _)) = prev {
        if pp + 1 < last {
            v.push((addr(pp + 1), false));
        }
    }
    v
}

/// The stitched mappings that placement `p`, mapping `n` pages, would
/// overwrite while queued work may still use them (`State::busy_stitched`):
/// all of them, or with `uncovered`, only those whose stream's fence has not
/// passed them yet (as far as it is known, without a query). A mapping that
/// its own page moves back to is not overwritten.
fn busy_overwritten(
    st: &State,
    p: &Placement,
    n: u64,
    avail: &Available,
    page: u64,
    uncovered: bool,
) -> Vec<u32> {
    if st.busy_stitched.is_empty() {
        return Vec::new();
    }
    let sg = st.expandable[p.segment as usize]
        .as_ref()
        .expect("segment exists");
    let first = ((p.map_at - sg.base) / page) as u32;
    // As the growth's plan does: a page moves back to the first of its
    // mappings in the range only.
    let mut busy = Vec::new();
    walk_stitched(
        p.segment,
        first,
        n,
        avail,
        |_, blk| !p.keep.contains(&blk),
        &mut FxHashSet::default(),
        |_, _, _, _| {},
        |idx| {
            let uncovered_busy =
                st.busy_stitched
                    .get(&(p.segment, idx))
                    .is_some_and(|&(bs, freed_at)| {
                        !uncovered || freed_at > st.streams[bs as usize].fence.done
                    });
            if uncovered_busy {
                busy.push(idx);
            }
        },
    );
    busy
}

/// Walks the stitched mappings at pages `first..first + n` of segment `seg` in
/// address order. A mapping whose page can move back to it (the page lies
/// in an available free block that `usable(address, block)` accepts, and no
/// earlier mapping took it: `back` holds the pages taken, across calls) goes
/// to `on_back(page index, handle, address, block)`; every other mapping is
/// overwritten by the placement: `on_over(page index)`.
#[allow(clippy::too_many_arguments)]
fn walk_stitched(
    seg: u32,
    first: u32,
    n: u64,
    avail: &Available,
    usable: impl Fn(u64, u32) -> bool,
    back: &mut FxHashSet<PhysHandle>,
    mut on_back: impl FnMut(u32, PhysHandle, u64, u32),
    mut on_over: impl FnMut(u32),
) {
    for e in avail.stitched_in(seg, first, first.saturating_add(n as u32)) {
        match e.back {
            Some((addr, blk)) if usable(addr, blk) && back.insert(e.handle) => {
                on_back(e.idx, e.handle, addr, blk)
            }
            _ => on_over(e.idx),
        }
    }
}

/// The whole pages of `blocks`.
fn whole_pages<'a>(blocks: impl Iterator<Item = &'a Block>, page: u64) -> u64 {
    blocks
        .filter_map(|b| interior_pages(b, page))
        .map(|(a, z)| (z - a) / page)
        .sum()
}

/// The pages a placement creates beyond the margin: of the `rest` it maps
/// with a driver call, those that neither the margin (`headroom` pages) nor
/// recycling supplies; recycling cannot take the pages the placement keeps
/// in place (`kept`) or moves back (`flips`).
fn created_beyond(rest: u64, headroom: u64, recyclable: u64, kept: u64, flips: u64) -> u64 {
    rest.saturating_sub(headroom + recyclable.saturating_sub(kept + flips))
}

/// Whether a placement lies in fresh address space: every page it maps
/// needs a driver call and it overwrites no stitched mapping.
fn in_fresh_space(c: &Cost) -> bool {
    let (_, rest, stale, pages, _) = *c;
    stale == 0 && rest == pages
}

/// The physical handle mapped at page address `at` of block `blk`'s segment.
fn handle_at(st: &State, blk: u32, at: u64, page: u64) -> PhysHandle {
    let seg = st.expandable[st.blocks[blk].segment as usize]
        .as_ref()
        .expect("block's segment exists");
    seg.handles[((at - seg.base) / page) as usize].expect("a mapped page has a handle")
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
