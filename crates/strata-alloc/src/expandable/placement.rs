//! Where a growth maps its pages: the candidate starts in each unmapped
//! range of the stream's segments, and how each candidate ranks (pages created
//! beyond the margin, pages that need a driver mapping, stitched mappings of
//! other pages overwritten, pages, address).

use super::*;

/// Where a request will go: the page-aligned address where mapping starts (at
/// the start of an unmapped block), how many pages must be mapped there, and
/// the free blocks on either side that the allocation will use (and that must
/// therefore not be recycled).
#[derive(Clone, Copy)]
pub(super) struct Placement {
    pub(super) map_at: u64,
    pub(super) segment: u32,
    pub(super) pages: u64,
    pub(super) room: u64,
    pub(super) keep: [u32; 2],
}

impl Placement {
    /// The page index in its segment where mapping starts.
    pub(super) fn first_page(&self, st: &State, page: u64) -> u32 {
        let base = st.expandable[self.segment as usize]
            .as_ref()
            .expect("segment exists")
            .base;
        ((self.map_at - base) / page) as u32
    }

    /// [`walk_stitched`] over the first `n` pages this placement maps: a page
    /// moves back only from a free block the placement does not keep, and to
    /// the first of its mappings in the range only. Returns the pages that
    /// move back.
    pub(super) fn walk_stitched(
        &self,
        st: &State,
        n: u64,
        avail: &Available,
        page: u64,
        on_back: impl FnMut(u32, PhysHandle, u64, u32),
        on_over: impl FnMut(u32),
    ) -> FxHashSet<PhysHandle> {
        let mut back = FxHashSet::default();
        walk_stitched(
            self.segment,
            self.first_page(st, page),
            n,
            avail,
            |_, blk| !self.keep.contains(&blk),
            &mut back,
            on_back,
            on_over,
        );
        back
    }
}

/// Where `rounded` bytes would go if mapped from page address `from` of
/// unmapped block `u`: either starting in the free block before it
/// (`with_before`, only when `from` is the block's start), or at `from`.
pub(super) fn placement_at(
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

/// How a placement ranks, lowest first: pages created beyond the margin,
/// pages that need a driver mapping (all but those moving back to a stitched
/// mapping of theirs), stitched mappings of other pages overwritten, pages,
/// address.
pub(super) type Cost = (u64, u64, u64, u64, u64);

pub(super) fn placement_cost(
    st: &State,
    p: &Placement,
    avail: &Available,
    headroom: u64,
    recyclable: u64,
    page: u64,
) -> Cost {
    let (mut flips, mut stale) = (0u64, 0u64);
    p.walk_stitched(
        st,
        p.pages,
        avail,
        page,
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
pub(super) fn candidate_starts(
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
pub(super) fn busy_overwritten(
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
    // As the growth's plan does.
    let mut busy = Vec::new();
    p.walk_stitched(
        st,
        n,
        avail,
        page,
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

/// The whole pages of `blocks`.
pub(super) fn whole_pages<'a>(blocks: impl Iterator<Item = &'a Block>, page: u64) -> u64 {
    blocks
        .filter_map(|b| interior_pages(b, page))
        .map(|(a, z)| (z - a) / page)
        .sum()
}

/// The pages a placement creates beyond the margin: of the `rest` it maps
/// with a driver call, those that neither the margin (`headroom` pages) nor
/// recycling supplies; recycling cannot take the pages the placement keeps
/// in place (`kept`) or moves back (`flips`).
pub(super) fn created_beyond(
    rest: u64,
    headroom: u64,
    recyclable: u64,
    kept: u64,
    flips: u64,
) -> u64 {
    rest.saturating_sub(headroom + recyclable.saturating_sub(kept + flips))
}

/// Whether a placement lies in fresh address space: every page it maps
/// needs a driver call and it overwrites no stitched mapping.
pub(super) fn in_fresh_space(c: &Cost) -> bool {
    let (_, rest, stale, pages, _) = *c;
    stale == 0 && rest == pages
}
