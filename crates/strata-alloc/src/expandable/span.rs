//! Runs of free blocks and unmapped ranges: a request whose best single
//! placement lies in fresh address space may take a run as a whole instead,
//! mapping only its unmapped ranges (docs/allocator.md, "Runs of free blocks
//! and holes before fresh address space").

use super::*;

/// A run of free blocks and unmapped ranges a request may take as a whole:
/// `[start, end)` of `segment`, and the page-aligned start of each unmapped
/// range with the pages to map there.
pub(super) struct Span {
    pub(super) segment: u32,
    pub(super) start: u64,
    pub(super) end: u64,
    pub(super) holes: Vec<(u64, u64)>,
}

impl ExpandableSpace<'_> {
    /// The best placement over a run of free blocks and unmapped ranges that
    /// takes in at least two unmapped ranges (the others are the single
    /// placements of `grow`), ranked as those are. The free blocks' pages
    /// stay where they are and only the unmapped ranges are mapped. A run
    /// whose unmapped ranges hold a stitched mapping marked busy (queued
    /// work may still use it) is passed over, whatever its fence.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn best_span(
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
    pub(super) fn fill_span(
        &self,
        st: &mut State,
        s: u32,
        span: &Span,
        hold: Hold,
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
            match self.fill(st, &p, np as usize, hold, headroom, &avail, &spare) {
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
}
