//! The pages a growth may take now: free blocks' whole pages whose stream's
//! fence allows it (or of the growth's own stream), and the stitched mappings
//! of the growth's segments with where each one's page lies, if it may move
//! back to it.

use super::*;

/// The pages that may move now (see [`ExpandableSpace::available_pages`]).
pub(super) struct Available {
    /// `(freed_at, block, first page, end of last page)` of each free block
    /// with whole pages whose fence has completed, least recently freed first.
    pub(super) blocks: Vec<(u64, u32, u64, u64)>,
    /// How many whole pages they hold.
    pub(super) pages: u64,
    /// The stitched mappings of the growth's segments, by segment, each in
    /// page order.
    pub(super) stitched: Vec<(u32, Vec<Stitch>)>,
}

/// A stitched mapping as a growth sees it: its page index in the segment,
/// its physical page, and, if that page may move back to it, where the page
/// lies (address and free block, [`holding`]).
#[derive(Clone, Copy)]
pub(super) struct Stitch {
    pub(super) idx: u32,
    pub(super) handle: PhysHandle,
    pub(super) back: Option<(u64, u32)>,
}

impl Available {
    /// The whole pages of `blocks`.
    pub(super) fn pages_in(blocks: &[(u64, u32, u64, u64)], page: u64) -> u64 {
        blocks.iter().map(|&(_, _, p0, p1)| (p1 - p0) / page).sum()
    }

    /// Leaves out the blocks that `drop` names, and their pages.
    pub(super) fn exclude(&mut self, drop: impl Fn(u32) -> bool, page: u64) {
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
    pub(super) fn stitched_in(&self, seg: u32, first: u32, end: u32) -> &[Stitch] {
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
pub(super) fn holding(
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

/// Walks the stitched mappings at pages `first..first + n` of segment `seg` in
/// address order. A mapping whose page can move back to it (the page lies
/// in an available free block that `usable(address, block)` accepts, and no
/// earlier mapping took it: `back` holds the pages taken, across calls) goes
/// to `on_back(page index, handle, address, block)`; every other mapping is
/// overwritten by the placement: `on_over(page index)`.
#[allow(clippy::too_many_arguments)]
pub(super) fn walk_stitched(
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

/// The physical handle mapped at page address `at` of block `blk`'s segment.
pub(super) fn handle_at(st: &State, blk: u32, at: u64, page: u64) -> PhysHandle {
    let seg = st.expandable[st.blocks[blk].segment as usize]
        .as_ref()
        .expect("block's segment exists");
    seg.handles[((at - seg.base) / page) as usize].expect("a mapped page has a handle")
}

/// The page-aligned part `[p0, p1)` of a block, if it holds at least one page.
pub(super) fn interior_pages(b: &Block, page: u64) -> Option<(u64, u64)> {
    let p0 = b.ptr.div_ceil(page) * page;
    let p1 = b.end() / page * page;
    (p1 > p0).then_some((p0, p1))
}

impl ExpandableSpace<'_> {
    /// The pages that may move now: those lying wholly inside free blocks
    /// whose stream's [`Fence`] covers their free (each stream's fence is
    /// queried at most once, and recorded if none is pending).
    pub(super) fn available_pages(&self, st: &mut State, s: u32, pool: PoolKind) -> Available {
        let page = self.page;
        // Once a run at the peak has ended, each pool recycles only its own
        // pages, as PyTorch's pools never share memory: a page one pool took
        // from the other made the other grow again in the next round, and
        // the two pools handed pages back and forth round after round
        // (docs/allocator.md, "After a run at the peak").
        let own_pool_only = st.repeats.ended_at_peak();
        let mut blocks = self.free_pages(st, s, |b| !own_pool_only || b == pool);
        if pool == PoolKind::Large && st.repeats.first_run(st.free_clock) {
            // In the first run the large pool takes its own pages first
            // (least recently freed first among them), the small pool's
            // only after: each page it takes from the small pool is a
            // small-pool growth, and a device allocation, later in the run.
            blocks.sort_by_key(|&(freed_at, id, _, _)| (st.blocks[id].pool != pool, freed_at, id));
        }
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

    /// The pages of the pool other than `pool` that a growth on stream `s`
    /// may take now (as [`Self::available_pages`] finds them, least recently
    /// freed first; no stitched mapping listed): what a growth past a run at
    /// the peak recycles rather than take reserved memory past the hold
    /// limit (`ExpandableSpace::fill`).
    pub(super) fn other_pool_pages(&self, st: &mut State, s: u32, pool: PoolKind) -> Available {
        let blocks = self.free_pages(st, s, |b| b != pool);
        Available {
            pages: Available::pages_in(&blocks, self.page),
            blocks,
            stitched: Vec::new(),
        }
    }

    /// `(freed_at, block, first page, end of last page)` of the free blocks
    /// of expandable segments of the pools `pools` accepts with whole pages
    /// that a growth on stream `s` may take now, least recently freed first.
    fn free_pages(
        &self,
        st: &mut State,
        s: u32,
        pools: impl Fn(PoolKind) -> bool,
    ) -> Vec<(u64, u32, u64, u64)> {
        let page = self.page;
        // The free blocks of expandable segments with whole pages: every one
        // is in its stream's free index (only the non-empty bins are
        // visited, rather than every block of every segment).
        let mut blocks: Vec<(u64, u32, u64, u64)> = Vec::new();
        for ss in &st.streams {
            for e in ss.free.iter().flat_map(|idx| idx.all()) {
                let b = &st.blocks[e.block];
                if b.expandable && e.size >= page && pools(b.pool) {
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
        blocks
    }
}
