//! Blocks: contiguous ranges of a segment, linked in address order.
//!
//! Every segment (one `malloc`, or the whole address range of an expandable
//! segment) is a doubly linked list of blocks that tile it exactly. A block is
//! allocated, free (and then in its pool's free index), waiting for other
//! streams' events, or — in expandable segments only — unmapped address space.
//! Blocks live in a slab and refer to each other by index, so splitting and
//! merging never touch the heap once the slab has grown to its working size.

use crate::stats::StatType;

/// "No block" in `prev`/`next` links.
pub(crate) const NONE: u32 = u32::MAX;

/// Blocks of at most this size go to the small pool.
pub(crate) const SMALL_SIZE: u64 = 1 << 20;

/// The two pools of a stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub(crate) enum PoolKind {
    Small = 0,
    Large = 1,
}

impl PoolKind {
    #[inline]
    pub fn of(rounded_size: u64) -> PoolKind {
        if rounded_size <= SMALL_SIZE {
            PoolKind::Small
        } else {
            PoolKind::Large
        }
    }

    #[inline]
    pub fn stat(self) -> StatType {
        match self {
            PoolKind::Small => StatType::SmallPool,
            PoolKind::Large => StatType::LargePool,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            PoolKind::Small => "small",
            PoolKind::Large => "large",
        }
    }
}

/// The streams other than its own that used a block (`record_stream`): none
/// for almost every block, so an empty set costs one word and no allocation.
#[derive(Clone, Debug, Default)]
// One word in the block's first cache line, where a `Vec` would take three.
#[allow(clippy::box_collection)]
pub(crate) struct StreamUses(Option<Box<Vec<u32>>>);

impl StreamUses {
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.0.is_none()
    }

    pub fn contains(&self, s: &u32) -> bool {
        self.0.as_ref().is_some_and(|v| v.contains(s))
    }

    pub fn push(&mut self, s: u32) {
        self.0.get_or_insert_with(Default::default).push(s);
    }

    /// Takes the streams out, leaving the set empty.
    pub fn take(&mut self) -> Vec<u32> {
        self.0.take().map(|v| *v).unwrap_or_default()
    }
}

/// One block.
///
/// The fields that the allocation and free paths read on a block and on its
/// neighbours (address, size, links, state) come first, in one 64-byte cache
/// line (the block is aligned to it); those of expandable segments, garbage
/// collection, oversize accounting and history follow in the second line.
#[derive(Clone, Debug)]
#[repr(C, align(64))]
pub(crate) struct Block {
    pub ptr: u64,
    pub size: u64,
    /// The caller's size while allocated.
    pub requested: u64,
    /// When the block last became free (a counter of frees).
    pub freed_at: u64,
    /// Streams other than `stream` that used the block (`record_stream`).
    pub stream_uses: StreamUses,
    /// Dense index of the stream the block belongs to.
    pub stream: u32,
    pub prev: u32,
    pub next: u32,
    /// Bumped at every allocation so stale handles are detected.
    pub generation: u32,
    /// Outstanding events of other streams that must complete before reuse.
    pub event_count: u32,
    pub allocated: bool,
    /// False only for unmapped address space of an expandable segment.
    pub mapped: bool,
    /// Whether the block lives in an expandable segment.
    pub expandable: bool,
    pub pool: PoolKind,
    // ----- second cache line -----
    /// Whether the slot holds a block at all.
    pub live: bool,
    /// Counted in `oversize_allocations` while allocated (the threshold may
    /// change while it is, through `set_allocator_settings`).
    pub oversize: bool,
    /// On the head block of an ordinary segment: counted in
    /// `oversize_segments`.
    pub oversize_segment: bool,
    /// Index of the expandable segment (unused for ordinary segments).
    pub segment: u32,
    /// The pool's lookup count when the block became free (garbage collection age).
    pub gc_base: u64,
    /// While history is on, an allocated (or pending-free) block allocated
    /// since recording started: the allocation's order (`History::seq`,
    /// from 1); 0 otherwise. The live-allocation table of the history is the
    /// set of blocks with a non-zero `hist_seq`: the block is at hand on
    /// every allocation and free, a separate table would be a hash insert and
    /// remove per pair.
    pub hist_seq: u64,
    /// The allocation's call site, valid while `hist_seq` is non-zero.
    pub hist_site: Option<&'static std::panic::Location<'static>>,
}

impl Block {
    /// The single free block that covers a new segment (`mapped`) or the whole
    /// address range of a new expandable segment (unmapped).
    pub fn whole_segment(
        ptr: u64,
        size: u64,
        stream: u32,
        pool: PoolKind,
        expandable: Option<u32>,
    ) -> Block {
        Block {
            ptr,
            size,
            requested: 0,
            stream,
            pool,
            prev: NONE,
            next: NONE,
            allocated: false,
            mapped: expandable.is_none(),
            expandable: expandable.is_some(),
            segment: expandable.unwrap_or(0),
            event_count: 0,
            stream_uses: StreamUses::default(),
            generation: 0,
            gc_base: 0,
            freed_at: 0,
            live: true,
            oversize: false,
            oversize_segment: false,
            hist_seq: 0,
            hist_site: None,
        }
    }

    /// Makes this vacant slot hold `b`, keeping the slot's generation (the
    /// handles of its earlier blocks stay stale). Field by field: a vacant
    /// slot holds no stream set to drop ([`Blocks::remove`] emptied it), so
    /// the slot is only written, never read first.
    #[inline(always)]
    fn refill(&mut self, b: Block) {
        let Block {
            ptr,
            size,
            requested,
            freed_at,
            stream_uses,
            stream,
            prev,
            next,
            generation: _,
            event_count,
            allocated,
            mapped,
            expandable,
            pool,
            live,
            oversize,
            oversize_segment,
            segment,
            gc_base,
            hist_seq,
            hist_site,
        } = b;
        debug_assert!(!self.live && self.stream_uses.is_empty());
        self.ptr = ptr;
        self.size = size;
        self.requested = requested;
        self.freed_at = freed_at;
        if !stream_uses.is_empty() {
            self.stream_uses = stream_uses;
        }
        self.stream = stream;
        self.prev = prev;
        self.next = next;
        self.event_count = event_count;
        self.allocated = allocated;
        self.mapped = mapped;
        self.expandable = expandable;
        self.pool = pool;
        self.live = live;
        self.oversize = oversize;
        self.oversize_segment = oversize_segment;
        self.segment = segment;
        self.gc_base = gc_base;
        self.hist_seq = hist_seq;
        self.hist_site = hist_site;
    }

    #[inline]
    pub fn end(&self) -> u64 {
        self.ptr + self.size
    }

    #[inline]
    pub fn is_split(&self) -> bool {
        self.prev != NONE || self.next != NONE
    }

    /// Free, mapped and not waiting for events: it belongs in the free index.
    #[inline]
    pub fn is_free(&self) -> bool {
        !self.allocated && self.mapped && self.event_count == 0 && self.stream_uses.is_empty()
    }
}

/// The slab of blocks.
#[derive(Default)]
pub(crate) struct Blocks {
    slots: Vec<Block>,
    vacant: Vec<u32>,
}

impl Blocks {
    /// Stores a block and returns its index.
    #[inline(always)]
    pub fn add(&mut self, b: Block) -> u32 {
        if let Some(i) = self.vacant.pop() {
            self.slots[i as usize].refill(b);
            i
        } else {
            self.slots.push(b);
            (self.slots.len() - 1) as u32
        }
    }

    /// Frees a slot.
    #[inline]
    pub fn remove(&mut self, i: u32) {
        let b = &mut self.slots[i as usize];
        b.live = false;
        b.allocated = false;
        b.stream_uses = StreamUses::default();
        self.vacant.push(i);
    }

    /// A block by index, if the slot is live.
    #[inline]
    pub fn get(&self, i: u32) -> Option<&Block> {
        self.slots.get(i as usize).filter(|b| b.live)
    }

    /// An allocated block by index: a vacant slot is never allocated
    /// ([`remove`](Self::remove) clears the flag), so this reads the first
    /// cache line only.
    #[inline]
    pub fn get_allocated(&self, i: u32) -> Option<&Block> {
        self.slots.get(i as usize).filter(|b| b.allocated)
    }

    /// Splits block `i` at byte offset `at`: `i` keeps the front, the returned
    /// new block takes the back (same stream, pool, segment and state).
    #[inline(always)]
    pub fn split(&mut self, i: u32, at: u64) -> u32 {
        let b = &self.slots[i as usize];
        debug_assert!(at > 0 && at < b.size);
        // Every field spelled out (no `..b.clone()`): the new block is built
        // straight into its slot, without a copy of `b`'s stream set to
        // clone and drop.
        let back = Block {
            ptr: b.ptr + at,
            size: b.size - at,
            requested: 0,
            freed_at: b.freed_at,
            stream_uses: StreamUses::default(),
            stream: b.stream,
            prev: i,
            next: b.next,
            generation: b.generation,
            event_count: 0,
            allocated: false,
            mapped: b.mapped,
            expandable: b.expandable,
            pool: b.pool,
            live: b.live,
            oversize: false,
            oversize_segment: false,
            segment: b.segment,
            gc_base: b.gc_base,
            hist_seq: 0,
            hist_site: None,
        };
        let next = b.next;
        let j = self.add(back);
        if next != NONE {
            self[next].prev = j;
        }
        let b = &mut self[i];
        b.size = at;
        b.next = j;
        j
    }

    /// Merges the block after `i` into `i` and frees its slot.
    #[inline(always)]
    pub fn absorb_next(&mut self, i: u32) {
        let j = self.unlink_next(i);
        self.remove(j);
    }

    /// Grows `i` over the block after it and takes that block out of the
    /// chain; returns its slot, still to be freed.
    #[inline(always)]
    fn unlink_next(&mut self, i: u32) -> u32 {
        let j = self[i].next;
        let (size, next) = (self[j].size, self[j].next);
        self[i].size += size;
        self[i].next = next;
        if next != NONE {
            self[next].prev = i;
        }
        j
    }

    /// [`absorb_next`](Self::absorb_next) where the block after `i` is free
    /// ([`Block::is_free`]): it holds no stream set, so its slot is freed
    /// without one to drop.
    #[inline(always)]
    pub fn absorb_free_next(&mut self, i: u32) {
        let j = self.unlink_next(i);
        let b = &mut self.slots[j as usize];
        debug_assert!(b.is_free());
        b.live = false;
        b.allocated = false;
        self.vacant.push(j);
    }

    /// Every live block, mutably.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = &mut Block> {
        self.slots.iter_mut().filter(|b| b.live)
    }

    /// Every live block with its index.
    pub fn iter(&self) -> impl Iterator<Item = (u32, &Block)> {
        self.slots
            .iter()
            .enumerate()
            .filter(|(_, b)| b.live)
            .map(|(i, b)| (i as u32, b))
    }
}

impl std::ops::Index<u32> for Blocks {
    type Output = Block;
    #[inline]
    fn index(&self, i: u32) -> &Block {
        &self.slots[i as usize]
    }
}

impl std::ops::IndexMut<u32> for Blocks {
    #[inline]
    fn index_mut(&mut self, i: u32) -> &mut Block {
        &mut self.slots[i as usize]
    }
}

#[cfg(test)]
mod layout_tests {
    use super::*;

    #[test]
    fn the_hot_fields_fill_the_first_cache_line() {
        assert_eq!(std::mem::size_of::<Block>(), 128);
        assert_eq!(std::mem::align_of::<Block>(), 64);
        assert!(std::mem::offset_of!(Block, pool) < 64);
        assert!(std::mem::offset_of!(Block, live) >= 64);
    }
}
