//! The free-block index of one pool on one stream: exact best fit without a tree.
//!
//! PyTorch keeps free blocks in an ordered set keyed by `(stream, size, address)`
//! and takes the lower bound of `(stream, request, 0)`: the smallest block that
//! fits, the lowest address among equals. strata gives the same answer with
//! segregated bins: sizes are mapped to bins two-level style (exact bins for small
//! sizes, 32 bins per power of two above), each bin keeps its few entries sorted
//! by `(size, address)`, and a bitmap finds the next non-empty bin. A lookup is a
//! binary search in one short vector plus a few bit operations; inserts and
//! removals move a handful of entries and allocate nothing once the bins have
//! grown to their working size.

/// Second-level bits: 2^5 = 32 bins per power of two.
const SL_BITS: u32 = 5;
/// Sizes (in 512-byte units) below this have one bin each.
const EXACT_UNITS: u64 = 1 << (SL_BITS + 1);
/// Enough bins for sizes up to 2^63 bytes.
const NUM_BINS: usize = EXACT_UNITS as usize + (64 - 9 - (SL_BITS as usize + 1)) * (1 << SL_BITS);
const WORDS: usize = NUM_BINS.div_ceil(64);

/// Bins of at most this many blocks are scanned rather than searched: the
/// scan's steps have no branch to mispredict.
const SHORT_BIN: usize = 16;

/// How many entries of `bin` (sorted) satisfy `below`, a predicate true for
/// a prefix: a short bin is scanned (no branch to mispredict per step), a
/// long one binary-searched.
#[inline]
fn rank(bin: &[Entry], below: impl Fn(&Entry) -> bool) -> usize {
    if bin.len() <= SHORT_BIN {
        bin.iter().filter(|x| below(x)).count()
    } else {
        bin.partition_point(below)
    }
}

/// One free block as the index sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Entry {
    pub size: u64,
    pub ptr: u64,
    pub block: u32,
}

/// The bin holding blocks of `size` bytes (a multiple of 512).
#[inline]
fn bin_of(size: u64) -> usize {
    let u = size >> 9;
    if u < EXACT_UNITS {
        u as usize
    } else {
        let fl = 63 - u.leading_zeros();
        let sl = (u >> (fl - SL_BITS)) & ((1 << SL_BITS) - 1);
        EXACT_UNITS as usize + ((fl - SL_BITS - 1) as usize) * (1 << SL_BITS) + sl as usize
    }
}

/// Free blocks of one (stream, pool), ordered by size then address.
pub(crate) struct FreeIndex {
    bins: Vec<Vec<Entry>>,
    words: [u64; WORDS],
    summary: u64,
    len: usize,
}

impl Default for FreeIndex {
    fn default() -> Self {
        FreeIndex {
            bins: (0..NUM_BINS).map(|_| Vec::new()).collect(),
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
    fn mark(&mut self, bin: usize) {
        self.words[bin / 64] |= 1 << (bin % 64);
        self.summary |= 1 << (bin / 64);
    }

    #[inline]
    fn unmark(&mut self, bin: usize) {
        self.words[bin / 64] &= !(1 << (bin % 64));
        if self.words[bin / 64] == 0 {
            self.summary &= !(1 << (bin / 64));
        }
    }

    /// Adds a free block.
    #[inline]
    pub fn insert(&mut self, e: Entry) {
        let b = bin_of(e.size);
        let bin = &mut self.bins[b];
        let at = rank(bin, |x| (x.size, x.ptr) < (e.size, e.ptr));
        bin.insert(at, e);
        if bin.len() == 1 {
            self.mark(b);
        }
        self.len += 1;
    }

    /// Removes a free block; returns whether it was present.
    #[inline]
    pub fn remove(&mut self, size: u64, ptr: u64) -> bool {
        let b = bin_of(size);
        let bin = &self.bins[b];
        // A block's address identifies it: a short bin is scanned for it,
        // stopping there.
        let at = if bin.len() <= SHORT_BIN {
            bin.iter().position(|x| x.ptr == ptr).unwrap_or(bin.len())
        } else {
            rank(bin, |x| (x.size, x.ptr) < (size, ptr))
        };
        let found = bin.get(at).is_some_and(|x| x.ptr == ptr && x.size == size);
        if found {
            self.remove_at(b, at);
        }
        found
    }

    /// Takes out entry `at` of bin `b`.
    #[inline]
    fn remove_at(&mut self, b: usize, at: usize) -> Entry {
        let e = self.bins[b].remove(at);
        if self.bins[b].is_empty() {
            self.unmark(b);
        }
        self.len -= 1;
        e
    }

    /// Where the smallest block of at least `size` bytes is: its bin and its
    /// place in it.
    #[inline]
    fn first_at_least(&self, size: u64) -> Option<(usize, usize)> {
        let first = bin_of(size);
        let fb = &self.bins[first];
        let at = rank(fb, |x| x.size < size);
        if at < fb.len() {
            Some((first, at))
        } else {
            Some((self.next_bin(first + 1)?, 0))
        }
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
        let (b, at) = self.first_at_least(size)?;
        if !accept(&self.bins[b][at]) {
            return None;
        }
        Some(self.remove_at(b, at))
    }

    /// Blocks of at least `size` bytes in `(size, address)` order.
    pub fn iter_from(&self, size: u64) -> impl Iterator<Item = Entry> + '_ {
        self.walk(self.first_at_least(size))
    }

    /// Every block, largest first (used by the release paths, never on the hot path).
    pub fn descending(&self) -> Vec<Entry> {
        let mut v: Vec<Entry> = self.bins.iter().flatten().copied().collect();
        v.sort_unstable_by(|a, b| b.cmp(a));
        v
    }

    /// Every block in `(size, address)` order, visiting only the non-empty
    /// bins.
    pub fn all(&self) -> impl Iterator<Item = Entry> + '_ {
        self.walk(self.next_bin(0).map(|b| (b, 0)))
    }

    /// The blocks in `(size, address)` order from entry `at` of bin `b`
    /// (`start`), through the non-empty bins after it.
    fn walk(&self, start: Option<(usize, usize)>) -> impl Iterator<Item = Entry> + '_ {
        let mut bin = start.map(|(b, _)| b);
        let mut pos = start.map_or(0, |(_, at)| at);
        std::iter::from_fn(move || loop {
            let b = bin?;
            if let Some(e) = self.bins[b].get(pos) {
                pos += 1;
                return Some(*e);
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
            prop_assert_eq!(every, want);
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
