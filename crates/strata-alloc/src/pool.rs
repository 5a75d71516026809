//! The free-block index of one pool on one stream: exact best fit without a tree.
//!
//! PyTorch keeps free blocks in an ordered set keyed by `(stream, size, address)`
//! and takes the lower bound of `(stream, request, 0)`: the smallest block that
//! fits, the lowest address among equals. strata gives the same answer with
//! segregated bins: sizes are mapped to bins two-level style (exact bins for small
//! sizes, 32 bins per power of two above), and a bitmap finds the next non-empty
//! bin. A bin holds its smallest entry inline (most bins hold none or one, so
//! an insert or a removal touches one cache line) and the others, if any, in a
//! short vector kept in descending order, so that the next smallest comes off its
//! end. A lookup is a few bit operations and, in the rare bin of several
//! entries, a search in one short vector; nothing is allocated once the bins
//! have grown to their working size.

/// Second-level bits: 2^5 = 32 bins per power of two.
const SL_BITS: u32 = 5;
/// Sizes (in 512-byte units) below this have one bin each.
const EXACT_UNITS: u64 = 1 << (SL_BITS + 1);
/// Enough bins for sizes up to 2^63 bytes.
const NUM_BINS: usize = EXACT_UNITS as usize + (64 - 9 - (SL_BITS as usize + 1)) * (1 << SL_BITS);
const WORDS: usize = NUM_BINS.div_ceil(64);

/// Bins of at most this many further entries are scanned rather than
/// searched: the scan's steps have no branch to mispredict.
const SHORT_BIN: usize = 16;

/// How many entries of `v` (sorted) satisfy `before`, a predicate true for
/// a prefix: a short vector is scanned (no branch to mispredict per step), a
/// long one binary-searched.
#[inline]
fn rank(v: &[Entry], before: impl Fn(&Entry) -> bool) -> usize {
    if v.len() <= SHORT_BIN {
        v.iter().filter(|x| before(x)).count()
    } else {
        v.partition_point(before)
    }
}

/// One free block as the index sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Entry {
    pub size: u64,
    pub ptr: u64,
    pub block: u32,
}

impl Entry {
    /// The index's order: by size, then by address.
    #[inline]
    fn key(&self) -> (u64, u64) {
        (self.size, self.ptr)
    }
}

/// The `block` of an empty bin's `head` (never a block's index).
const EMPTY: u32 = u32::MAX;

/// The bin holding blocks of `size` bytes (a multiple of 512): in units
/// of 512 bytes `u`, bin `u` for `u` below [`EXACT_UNITS`], above it bin
/// `EXACT_UNITS + (fl - SL_BITS - 1) * 2^SL_BITS + sl`, with `fl` the
/// position of `u`'s top bit and `sl` the `SL_BITS` bits below it.
///
/// Branch-free: with `sh = fl - SL_BITS` (0 below `EXACT_UNITS`, where
/// `fl <= SL_BITS`), `u >> sh` is `u` itself below `EXACT_UNITS` and
/// `2^SL_BITS + sl` above, so both cases are `(sh << SL_BITS) + (u >> sh)`.
#[inline]
fn bin_of(size: u64) -> usize {
    let u = size >> 9;
    // `| 1`: a size below 512 (never asked for) maps to bin 0, and the top
    // bit's position needs no test for zero.
    let fl = 63 - (u | 1).leading_zeros();
    let sh = fl.saturating_sub(SL_BITS);
    ((sh as usize) << SL_BITS) + (u >> sh) as usize
}

/// The entries of one bin, in `(size, address)` order: the head (the
/// smallest, held inline field by field) first, then `rest` from its end to
/// its start. Two bins share a cache line.
#[derive(Clone)]
#[repr(align(32))]
struct Bin {
    /// The head's size.
    size: u64,
    /// The head's address.
    ptr: u64,
    /// The head's block; [`EMPTY`] when the bin is empty.
    block: u32,
    /// How many entries `rest` holds: its length, kept beside the head so
    /// that a bin of one entry (most bins that hold any) is searched and
    /// emptied without reading the vector's header on the heap, a cache
    /// line of its own.
    more: u32,
    /// The bin's other entries, largest first (the next smallest last, to be
    /// popped when the head goes); allocated when the bin first holds two
    /// entries, and kept, so that a busy bin allocates nothing more.
    #[allow(clippy::box_collection)] // one word where a `Vec` takes three
    rest: Option<Box<Vec<Entry>>>,
}

impl Bin {
    const EMPTY: Bin = Bin {
        size: 0,
        ptr: 0,
        block: EMPTY,
        more: 0,
        rest: None,
    };

    #[inline]
    fn is_empty(&self) -> bool {
        self.block == EMPTY
    }

    /// The smallest entry (the bin must be non-empty).
    #[inline]
    fn head(&self) -> Entry {
        Entry {
            size: self.size,
            ptr: self.ptr,
            block: self.block,
        }
    }

    #[inline]
    fn set_head(&mut self, e: Entry) {
        self.size = e.size;
        self.ptr = e.ptr;
        self.block = e.block;
    }

    /// The entries after the head, largest first.
    #[inline]
    fn rest(&self) -> &[Entry] {
        if self.more == 0 {
            return &[];
        }
        self.rest.as_deref().map_or(&[], |v| v.as_slice())
    }

    /// Entry `pos` in `(size, address)` order (0: the head).
    #[inline]
    fn get(&self, pos: usize) -> Option<Entry> {
        if pos == 0 {
            (!self.is_empty()).then(|| self.head())
        } else {
            let rest = self.rest();
            rest.len().checked_sub(pos).map(|i| rest[i])
        }
    }

    /// Adds `e` (the bin must be non-empty).
    #[inline]
    fn insert_behind_head(&mut self, e: Entry) {
        let e = if e.key() < (self.size, self.ptr) {
            let head = self.head();
            self.set_head(e);
            head
        } else {
            e
        };
        let rest = self.rest.get_or_insert_with(Default::default);
        // Descending: `e` goes after every larger entry.
        let at = rank(rest, |x| x.key() > e.key());
        rest.insert(at, e);
        self.more += 1;
    }

    /// Entry `pos` in `(size, address)` order (`pos` must be in the bin).
    #[inline(always)]
    fn at(&self, pos: usize) -> Entry {
        if pos == 0 {
            self.head()
        } else {
            self.behind_head(pos)
        }
    }

    /// [`at`](Self::at) behind the head.
    #[inline(never)]
    fn behind_head(&self, pos: usize) -> Entry {
        let rest = self.rest();
        rest[rest.len() - pos]
    }

    /// Takes out entry `pos` in `(size, address)` order; returns whether the
    /// bin is empty now. A bin of one entry is emptied in place; the
    /// vector is touched out of line.
    #[inline(always)]
    fn remove(&mut self, pos: usize) -> bool {
        if self.more == 0 {
            debug_assert_eq!(pos, 0);
            self.block = EMPTY;
            return true;
        }
        self.remove_with_rest(pos);
        false
    }

    /// [`remove`](Self::remove) from a bin of several entries.
    #[inline(never)]
    fn remove_with_rest(&mut self, pos: usize) {
        self.more -= 1;
        let rest = self.rest.as_deref_mut().expect("entries behind the head");
        if pos == 0 {
            let next = rest.pop().expect("an entry behind the head");
            self.set_head(next);
        } else {
            let i = rest.len() - pos;
            rest.remove(i);
        }
    }
}

/// Free blocks of one (stream, pool), ordered by size then address.
pub(crate) struct FreeIndex {
    /// Empty until the first insert: a stream that never frees a block
    /// into this pool costs no bins (about 50 KiB of them), so an
    /// allocator used on many streams does not pay for each. Of a fixed
    /// length, so that a bin's index is checked against a constant, and the
    /// bitmap's word of a bin in range needs no check of its own.
    bins: Option<Box<[Bin; NUM_BINS]>>,
    words: [u64; WORDS],
    summary: u64,
    len: usize,
}

impl Default for FreeIndex {
    fn default() -> Self {
        FreeIndex {
            bins: None,
            words: [0; WORDS],
            summary: 0,
            len: 0,
        }
    }
}

impl FreeIndex {
    /// Number of free blocks.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Total bytes of free blocks.
    #[cfg(test)]
    pub fn bytes(&self) -> u64 {
        self.all().map(|e| e.size).sum()
    }

    #[inline]
    fn mark(words: &mut [u64; WORDS], summary: &mut u64, bin: usize) {
        words[bin / 64] |= 1 << (bin % 64);
        *summary |= 1 << (bin / 64);
    }

    #[inline]
    fn unmark(words: &mut [u64; WORDS], summary: &mut u64, bin: usize) {
        words[bin / 64] &= !(1 << (bin % 64));
        if words[bin / 64] == 0 {
            *summary &= !(1 << (bin / 64));
        }
    }

    /// The bins, at the first insert (see the field).
    #[cold]
    #[inline(never)]
    fn make_bins() -> Box<[Bin; NUM_BINS]> {
        let bins = vec![Bin::EMPTY; NUM_BINS].into_boxed_slice();
        bins.try_into()
            .unwrap_or_else(|_| unreachable!("NUM_BINS bins"))
    }

    /// Adds a free block.
    #[inline(always)]
    pub fn insert(&mut self, e: Entry) {
        let bins = self.bins.get_or_insert_with(Self::make_bins);
        let b = bin_of(e.size);
        let bin = &mut bins[b];
        if bin.is_empty() {
            bin.set_head(e);
            Self::mark(&mut self.words, &mut self.summary, b);
        } else {
            bin.insert_behind_head(e);
        }
        self.len += 1;
    }

    /// Removes a free block; returns whether it was present.
    #[inline(always)]
    pub fn remove(&mut self, size: u64, ptr: u64) -> bool {
        let b = bin_of(size);
        // No bins yet: nothing was ever inserted.
        let Some(bin) = self.bins.as_deref().and_then(|bins| bins.get(b)) else {
            return false;
        };
        let pos = if bin.ptr == ptr && !bin.is_empty() {
            0
        } else {
            // A block's address identifies it: a short vector is scanned for
            // it, stopping there.
            let rest = bin.rest();
            let i = if rest.len() <= SHORT_BIN {
                rest.iter().position(|x| x.ptr == ptr)
            } else {
                Some(rank(rest, |x| x.key() > (size, ptr))).filter(|&i| i < rest.len())
            };
            match i {
                Some(i) if rest[i].ptr == ptr => rest.len() - i,
                _ => return false,
            }
        };
        let found = bin.at(pos).size == size;
        if found {
            self.remove_at(b, pos);
        }
        found
    }

    /// Takes out entry `pos` (in order) of bin `b`.
    #[inline(always)]
    fn remove_at(&mut self, b: usize, pos: usize) {
        let Some(bins) = self.bins.as_deref_mut() else {
            unreachable!("an entry in bin {b}");
        };
        if bins[b].remove(pos) {
            Self::unmark(&mut self.words, &mut self.summary, b);
        }
        self.len -= 1;
    }

    /// Where the smallest block of at least `size` bytes is: its bin and its
    /// place in it (0: the head).
    #[inline]
    fn first_at_least(&self, size: u64) -> Option<(usize, usize)> {
        let first = bin_of(size);
        // No bins yet: nothing was ever inserted.
        let fb = self.bins.as_deref()?.get(first)?;
        if !fb.is_empty() {
            if fb.size >= size {
                return Some((first, 0));
            }
            // Descending: the blocks that fit come first, the smallest of
            // them last.
            let rest = fb.rest();
            let fit = rank(rest, |x| x.size >= size);
            if fit > 0 {
                return Some((first, rest.len() - fit + 1));
            }
        }
        Some((self.next_bin(first + 1)?, 0))
    }

    /// The first non-empty bin at or after `from`.
    #[inline]
    fn next_bin(&self, from: usize) -> Option<usize> {
        if from >= NUM_BINS {
            return None;
        }
        let w = from / 64;
        let m = self.words[w] & (!0u64 << (from % 64));
        if m != 0 {
            return Some(w * 64 + m.trailing_zeros() as usize);
        }
        let rest = if w + 1 >= 64 {
            0
        } else {
            self.summary & (!0u64 << (w + 1))
        };
        if rest == 0 {
            return None;
        }
        let w2 = rest.trailing_zeros() as usize;
        Some(w2 * 64 + self.words[w2].trailing_zeros() as usize)
    }

    /// The smallest block of at least `size` bytes, lowest address among equals.
    #[inline]
    pub fn lower_bound(&self, size: u64) -> Option<Entry> {
        self.iter_from(size).next()
    }

    /// Takes out the block [`lower_bound`](Self::lower_bound) would return,
    /// if `accept` takes it (one search for both).
    #[inline]
    pub fn take_lower_bound(
        &mut self,
        size: u64,
        accept: impl FnOnce(&Entry) -> bool,
    ) -> Option<Entry> {
        let (b, pos) = self.first_at_least(size)?;
        let e = self.bins.as_deref()?[b].at(pos);
        if !accept(&e) {
            return None;
        }
        self.remove_at(b, pos);
        Some(e)
    }

    /// Blocks of at least `size` bytes in `(size, address)` order.
    pub fn iter_from(&self, size: u64) -> impl Iterator<Item = Entry> + '_ {
        self.walk(self.first_at_least(size))
    }

    /// Every block, largest first (used by the release paths, never on the hot path).
    pub fn descending(&self) -> Vec<Entry> {
        let mut v: Vec<Entry> = self.all().collect();
        v.reverse();
        v
    }

    /// Every block in `(size, address)` order, visiting only the non-empty
    /// bins.
    pub fn all(&self) -> impl Iterator<Item = Entry> + '_ {
        self.walk(self.next_bin(0).map(|b| (b, 0)))
    }

    /// The blocks in `(size, address)` order from entry `pos` of bin `b`
    /// (`start`), through the non-empty bins after it.
    fn walk(&self, start: Option<(usize, usize)>) -> impl Iterator<Item = Entry> + '_ {
        let mut bin = start.map(|(b, _)| b);
        let mut pos = start.map_or(0, |(_, at)| at);
        std::iter::from_fn(move || loop {
            let b = bin?;
            if let Some(e) = self.bins.as_deref()?[b].get(pos) {
                pos += 1;
                return Some(e);
            }
            bin = self.next_bin(b + 1);
            pos = 0;
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    #[test]
    fn two_bins_fill_a_cache_line() {
        assert_eq!(std::mem::size_of::<Bin>(), 32);
        assert_eq!(std::mem::align_of::<Bin>(), 32);
    }

    /// The bins of the two-level formula, as it reads.
    fn bin_by_levels(size: u64) -> usize {
        let u = size >> 9;
        if u < EXACT_UNITS {
            u as usize
        } else {
            let fl = 63 - u.leading_zeros();
            let sl = (u >> (fl - SL_BITS)) & ((1 << SL_BITS) - 1);
            EXACT_UNITS as usize + ((fl - SL_BITS - 1) as usize) * (1 << SL_BITS) + sl as usize
        }
    }

    #[test]
    fn branch_free_bins_match_the_two_levels() {
        for u in 0..200_000u64 {
            assert_eq!(bin_of(u * 512), bin_by_levels(u * 512), "{u}");
        }
        for shift in 9..64 {
            for d in [0u64, 1, 511, 512, 513] {
                let size = ((1u64 << shift) + d.wrapping_mul(512)) & !511;
                let size = size.max(512);
                assert_eq!(bin_of(size), bin_by_levels(size), "{size}");
                let below = ((1u64 << shift) - 512).max(512);
                assert_eq!(bin_of(below), bin_by_levels(below), "{below}");
            }
        }
        assert_eq!(bin_of(!511u64), bin_by_levels(!511u64));
    }

    #[test]
    fn bins_are_monotonic() {
        let mut last = 0;
        for u in 1..200_000u64 {
            let b = bin_of(u * 512);
            assert!(b >= last);
            last = b;
        }
        assert!(bin_of(!511u64) < NUM_BINS);
    }

    proptest! {
        /// The index answers exactly as an ordered set of (size, ptr) does.
        #[test]
        fn matches_ordered_set(ops in prop::collection::vec((0u8..3, 1u64..40_000, 0u64..64), 1..400)) {
            let mut idx = FreeIndex::default();
            let mut set = BTreeSet::new();
            for (op, units, slot) in ops {
                // Sizes: a mix of small exact-bin sizes and large ranged ones.
                let size = if units % 3 == 0 { units * 512 * 97 } else { (units % 200 + 1) * 512 };
                let ptr = slot * (1 << 40) + size;
                match op {
                    0 => {
                        if set.insert((size, ptr)) {
                            idx.insert(Entry { size, ptr, block: slot as u32 });
                        }
                    }
                    1 => {
                        prop_assert_eq!(idx.remove(size, ptr), set.remove(&(size, ptr)));
                    }
                    _ => {
                        let want = set.range((size, 0)..).next().copied();
                        let got = idx.lower_bound(size).map(|e| (e.size, e.ptr));
                        prop_assert_eq!(got, want);
                    }
                }
                prop_assert_eq!(idx.len(), set.len());
                prop_assert_eq!(idx.bytes(), set.iter().map(|x| x.0).sum::<u64>());
            }
            let all: Vec<_> = idx.iter_from(512).map(|e| (e.size, e.ptr)).collect();
            let want: Vec<_> = set.iter().copied().collect();
            prop_assert_eq!(&all, &want);
            let every: Vec<_> = idx.all().map(|e| (e.size, e.ptr)).collect();
            prop_assert_eq!(&every, &want);
            let down: Vec<_> = idx.descending().iter().map(|e| (e.size, e.ptr)).collect();
            prop_assert_eq!(down, want.iter().rev().copied().collect::<Vec<_>>());
        }

        /// The same with few sizes, so that bins grow past the short-bin scan
        /// and shrink back below it.
        #[test]
        fn matches_ordered_set_with_long_bins(ops in prop::collection::vec((0u8..3, 0usize..4, 0u64..64), 1..600)) {
            let sizes = [512u64, 1024, 512 * 97 * 3, 512 * 97 * 3 + 512];
            let mut idx = FreeIndex::default();
            let mut set = BTreeSet::new();
            for (op, k, slot) in ops {
                let size = sizes[k];
                let ptr = slot * (1 << 40) + size;
                match op {
                    0 => {
                        if set.insert((size, ptr)) {
                            idx.insert(Entry { size, ptr, block: slot as u32 });
                        }
                    }
                    1 => prop_assert_eq!(idx.remove(size, ptr), set.remove(&(size, ptr))),
                    2 if slot % 2 == 0 => {
                        let want = set.range((size, 0)..).next().copied();
                        let got = idx.take_lower_bound(size, |_| true).map(|e| (e.size, e.ptr));
                        prop_assert_eq!(got, want);
                        if let Some(w) = want {
                            set.remove(&w);
                        }
                    }
                    _ => {
                        let want: Vec<_> = set.range((size, 0)..).copied().collect();
                        let got: Vec<_> = idx.iter_from(size).map(|e| (e.size, e.ptr)).collect();
                        prop_assert_eq!(got, want);
                    }
                }
                prop_assert_eq!(idx.len(), set.len());
            }
        }
    }
}
