//! Mapping a placement's pages: which pages move back, are created or are
//! recycled (`fill`), taking recycled pages out of their free blocks while
//! their old mappings stay (`detach_pages`), mapping them (`map_pages`), and
//! unmapping a free block's pages for good (`unmap_range`).

use super::*;

/// Up to `count` pages of free blocks that a growth at placement `p` may
/// recycle: the blocks of `avail` in its order (least recently freed first),
/// pages from the top end of each block, none of a block the placement
/// keeps and none of `skip` (the pages moving back to stitched mappings in
/// the placement, and those a later range of the same span moves back).
/// Each page comes with the block and the address it leaves.
fn pages_to_recycle(
    st: &State,
    p: &Placement,
    avail: &Available,
    count: usize,
    (taken, spare): (&FxHashSet<PhysHandle>, &FxHashSet<PhysHandle>),
    page: u64,
) -> (Vec<PhysHandle>, Vec<(u32, u64)>) {
    let mut recycled: Vec<PhysHandle> = Vec::new();
    let mut moved: Vec<(u32, u64)> = Vec::new();
    'blocks: for &(_, blk, p0, p1) in &avail.blocks {
        if p.keep.contains(&blk) {
            continue;
        }
        let mut at = p1;
        while at > p0 {
            if recycled.len() >= count {
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
    (recycled, moved)
}

impl ExpandableSpace<'_> {
    /// Maps `n` pages of placement `p`: the pages that move back to a
    /// stitched mapping of theirs, then new pages within the margin
    /// (`headroom`), then recycled pages or, for a growth that holds, new
    /// ones (up to the cap of `rule`), never one of `spare` (pages that a later
    /// range of the same span moves back). Returns the free block (out of
    /// the index) that results.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn fill(
        &self,
        st: &mut State,
        p: &Placement,
        n: usize,
        rule: Hold,
        headroom: u64,
        avail: &Available,
        spare: &FxHashSet<PhysHandle>,
    ) -> Result<Option<u32>, AllocError> {
        let page = self.page;
        let Hold {
            on: hold,
            weak,
            cap: hold_cap,
            ..
        } = rule;
        // The pages that move back to a stitched mapping of theirs (no driver
        // call), then new pages within the margin, then recycled pages (least
        // recently freed first), then new pages beyond the margin.
        let first = p.first_page(st, page);
        let mut plan: Vec<Option<(PhysHandle, bool)>> = vec![None; n];
        let mut sources: Vec<(u32, u64)> = Vec::new();
        let mut taken = p.walk_stitched(
            st,
            n as u64,
            avail,
            page,
            |idx, h, addr, blk| {
                plan[(idx - first) as usize] = Some((h, true));
                sources.push((blk, addr));
            },
            |_| {},
        );
        let mut others = n - taken.len();
        let mut within = others.min(headroom as usize);
        let (mut hold, mut partial) =
            holds(st, hold, weak, hold_cap, taken.len(), others, within, page);
        // After a run at the peak, a strong repetition that holds creates
        // every page it maps rather than move pages back (`creates_every_page`).
        if hold
            && !weak
            && !taken.is_empty()
            && self.creates_every_page(st, p, n, hold_cap, headroom, &plan)
        {
            taken.clear();
            sources.clear();
            plan.fill(None);
            (others, within, partial) = (n, n.min(headroom as usize), 0);
        }
        let fresh = loop {
            let (mut recycled, mut moved) = if hold {
                (Vec::new(), Vec::new())
            } else {
                pages_to_recycle(
                    st,
                    p,
                    avail,
                    others - within - partial,
                    (&taken, spare),
                    page,
                )
            };
            // Past a run at the peak a growth recycles only its own pool's
            // pages (`available_pages`); the pages it would create past the
            // hold limit come from the other pool's free blocks instead, so
            // that the pools' separation never takes reserved memory past
            // the hold bound (docs/allocator.md, "What it guarantees").
            let short = others - within - partial - recycled.len();
            if !hold && short > 0 && !weak && st.repeats.ended_at_peak() {
                let past = (st.reserved() + (others - recycled.len()) as u64 * page)
                    .saturating_sub(hold_cap)
                    .div_ceil(page) as usize;
                if past > 0 {
                    let (s, pool) = st.expandable[p.segment as usize]
                        .as_ref()
                        .map(|sg| (sg.stream, sg.pool))
                        .expect("segment exists");
                    let other = self.other_pool_pages(st, s, pool);
                    let (r, m) =
                        pages_to_recycle(st, p, &other, past.min(short), (&taken, spare), page);
                    recycled.extend(r);
                    moved.extend(m);
                }
            }
            let create = others - recycled.len();
            let created = if st.fits_fraction(create as u64 * page) {
                match self.create_pages(st, create) {
                    Ok(created) => Some(created),
                    // Holding found the device full: move pages instead.
                    Err(DriverError::OutOfMemory) if hold || partial > 0 => {
                        hold = false;
                        partial = 0;
                        continue;
                    }
                    Err(DriverError::OutOfMemory) => None,
                    Err(e) => return Err(self.driver_error(e)),
                }
            } else {
                None
            };
            match created {
                Some(created) => {
                    sources.extend(moved);
                    break recycled.into_iter().chain(created).collect::<Vec<_>>();
                }
                // No room under the memory fraction or on the device. A
                // growth that asked for a whole chunk (more pages than the
                // request needs, `grow`) maps only the request's own pages;
                // nothing has changed yet (pages created for the attempt went
                // back to the driver).
                None if n > p.pages as usize => {
                    return self.fill(
                        st,
                        p,
                        p.pages as usize,
                        Hold { on: hold, ..rule },
                        headroom,
                        avail,
                        spare,
                    );
                }
                None => return Ok(None),
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

    /// Whether a strong repetition that holds, mapping `n` pages at `p`
    /// (`plan`: the pages that would move back to stitched mappings of
    /// theirs there), creates every page instead. After a run at the peak it
    /// does, if the hold limit allows them all: a page moved back from a free
    /// block empties that block, which the next round uses at this moment, so
    /// the next round grows there (a double buffer of prefetch_training/148
    /// moved 4 pages back in its third pass and grew 21 in its fourth;
    /// docs/allocator.md, "After a run at the peak"). The new pages are then
    /// mapped over the stitched mappings those pages would have moved back
    /// to, which the placement was chosen not to overwrite: only if queued
    /// work can no longer use any of them (their stream's fence is queried,
    /// never waited on). Otherwise the pages move back, and nothing is
    /// synchronised (the random recycling test found one on CI in session 54).
    fn creates_every_page(
        &self,
        st: &mut State,
        p: &Placement,
        n: usize,
        hold_cap: u64,
        headroom: u64,
        plan: &[Option<(PhysHandle, bool)>],
    ) -> bool {
        if !st.repeats.ended_at_peak() || st.repeats.first_run(st.free_clock) {
            return false;
        }
        if !may_create_all(st, hold_cap, n, headroom, self.page) {
            return false;
        }
        let first = p.first_page(st, self.page);
        let mut queried = Vec::new();
        (first..)
            .zip(plan)
            .filter(|(_, x)| x.is_some())
            .all(|(idx, _)| self.stitched_idle(st, p.segment, idx, &mut queried))
    }

    /// Takes the pages at `sources` (block, page address; each page wholly
    /// inside that free block, whose fence has completed) out of their blocks
    /// without unmapping them: each leaves a stitched mapping behind, and the
    /// range becomes unmapped space for the blocks.
    pub(super) fn detach_pages(&self, st: &mut State, mut sources: Vec<(u32, u64)>) {
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

    /// Unmaps the pages of `[from, to)`, inside free block `id`, keeping the
    /// handles in `out`. The caller has made sure that no queued work still
    /// uses the pages (a completed fence, or a synchronised stream).
    pub(super) fn unmap_range(
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
    pub(super) fn map_pages(
        &self,
        st: &mut State,
        seg: u32,
        start: u64,
        plan: Vec<(PhysHandle, bool)>,
    ) -> Result<u32, AllocError> {
        let page = self.page;
        let len = plan.len() as u64 * page;
        // A mapping an earlier undo could not unmap in the way: unmapped now
        // (its page released later), or the growth fails as the driver does,
        // its pages given back as after any failed mapping.
        if !st.stray_mappings.is_empty() {
            if let Err(e) = self.unmap_strays(st, |at, n| at < start + len && start < at + n) {
                for (h, _) in plan {
                    self.drop_handle(st, h);
                }
                return Err(e);
            }
        }
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
                // A mapping that stays is kept in sight: its page cannot
                // be released while mapped (state.rs, `stray_mappings`).
                if self.vm.unmap(at, page).is_err() {
                    st.stray_mappings.push((at, page));
                }
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
        // PyTorch's `map_block` gives the segment's first block the context
        // of the allocation that first maps it (`context_when_segment_allocated`,
        // kept for the segment's life): the frames of the mapped range at the
        // segment's base in a snapshot.
        if start == base
            && st.history.enabled()
            && st.history.rec.context >= crate::history::HistoryContext::State
        {
            if let Some(site) = st.history.cause {
                st.history.segment_sites.entry(base).or_insert(site);
            }
        }
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
}

/// Turns `[a, z)` (page-aligned, inside free block `id`, which is in the index)
/// into unmapped space, merged with unmapped neighbours; free remainders on
/// either side go back to the index.
pub(super) fn carve_unmapped(st: &mut State, id: u32, a: u64, z: u64) {
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

/// Whether a strong repetition that holds may create all `n` pages it maps
/// (`headroom` of them within the margin): the hold limit `hold_cap` and the
/// memory fraction allow them. Then `fill` creates every page rather than
/// move pages back after a run at the peak (`creates_every_page`), which
/// `needs_room_for_chunk` has to foresee.
pub(super) fn may_create_all(
    st: &State,
    hold_cap: u64,
    n: usize,
    headroom: u64,
    page: u64,
) -> bool {
    holds(
        st,
        true,
        false,
        hold_cap,
        0,
        n,
        n.min(headroom as usize),
        page,
    )
    .0
}

/// Whether a growth that repeats the workload (`hold`; `weak` for a weak
/// repetition) still holds once its placement is known, and how many pages a
/// weak one that may not hold fully creates all the same (`partial`): of the
/// `taken + others` pages it maps, `taken` move back to stitched mappings of
/// their own and `within` of the others come from the margin.
///
/// A repeating growth holds only within its limit (`hold_cap`), and only if
/// the memory fraction allows it; otherwise it moves pages like any other. A
/// weak repetition holds only when the growth finds at least as many of its
/// pages at stitched mappings of their own as it needs mapped, less one (the
/// layout it returns to is mostly there already; the one page of slack lets
/// a one-page growth, which either needs no page mapped or has no page to
/// move back, hold at all), and then creates what fits under its cap, moving
/// the rest.
#[allow(clippy::too_many_arguments)]
pub(super) fn holds(
    st: &State,
    hold: bool,
    weak: bool,
    hold_cap: u64,
    taken: usize,
    others: usize,
    within: usize,
    page: u64,
) -> (bool, usize) {
    if !hold {
        return (false, 0);
    }
    let beyond = (others - within) as u64 * page;
    if weak {
        let room = (hold_cap.saturating_sub(st.reserved()) / page) as usize;
        let need = others - within;
        if taken + WEAK_SLACK < others {
            return (false, 0);
        }
        if room < need {
            let partial = if st.fits_fraction(room as u64 * page) {
                room
            } else {
                0
            };
            return (false, partial);
        }
    }
    if st.reserved() + beyond > hold_cap || !st.fits_fraction(beyond) {
        return (false, 0);
    }
    (true, 0)
}
