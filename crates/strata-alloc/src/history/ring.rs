//! The history's ring buffer: slots of one entry, or two for a free that
//! completed at once, written over the oldest slot once full and trimmed to
//! the newest `capacity` entries when read.
//!
//! Writing never reads an old slot: the ring holds `capacity` slots, which
//! hold at least `capacity` entries once it is full, so the newest
//! `capacity` entries are always there and the count is settled when the
//! history is read. (Keeping the count on every write would read the oldest
//! slot, a line long gone from the caches, on every entry.)

use std::panic::Location;

/// One slot: 32 bytes, two to a cache line (a `TraceEntry` is 64), since the
/// ring is larger than the caches and every slot written is a line fetched.
#[derive(Clone, Copy)]
pub(super) struct Slot {
    pub addr: u64,
    pub size: u64,
    /// The clock's ticks since its anchor (top 44 bits; see
    /// `clock::Clock::ticks`), the stream's index
    /// in `History::streams` (16 bits) and the action's code (4 bits: an
    /// `Action`, or [`FREE_NOW`] for a slot of two entries).
    pub meta: u64,
    pub site: Option<&'static Location<'static>>,
}

/// Bits of [`Slot::meta`] below the time.
pub(super) const META_TIME_SHIFT: u32 = 20;

/// The action code of a slot that holds two entries: the `free_requested`
/// and `free_completed` of a free that completed at once (same address, size,
/// stream, time and call site), expanded when the history is read.
pub(super) const FREE_NOW: u64 = 0xf;

impl Slot {
    /// The action's code (an `Action` or [`FREE_NOW`]).
    #[inline]
    pub fn code(&self) -> u64 {
        self.meta & 0xf
    }

    /// The entries the slot holds.
    #[inline]
    fn entries(&self) -> usize {
        1 + (self.code() == FREE_NOW) as usize
    }
}

/// Slots reserved up front when the room for the whole bound cannot be
/// (see [`Ring::new`]).
pub(super) const FALLBACK_RESERVE: usize = 1 << 16;

/// An empty slot vector with room for `capacity` slots when the system
/// grants it, else for at most [`FALLBACK_RESERVE`] (and at least `keep`).
fn reserve(capacity: usize, keep: usize) -> Vec<Slot> {
    let mut slots = Vec::new();
    if slots.try_reserve_exact(capacity).is_err() {
        let _ = slots.try_reserve_exact(capacity.min(FALLBACK_RESERVE).max(keep));
    }
    slots
}

/// The slots, oldest first once `slots` is full from `next` on.
#[derive(Default)]
pub(super) struct Ring {
    slots: Vec<Slot>,
    /// Where the next slot goes once `slots` is full (the oldest slot).
    next: usize,
    capacity: usize,
    /// Slots written since the ring was made (the next slot's number).
    written: u64,
}

impl Ring {
    /// A ring for the newest `capacity` entries. The room is reserved up
    /// front (not touched) when the system grants it; a bound it refuses
    /// (`usize::MAX`, PyTorch's default `max_entries`, or more bytes than the
    /// address space) never fails: the ring then reserves at most
    /// [`FALLBACK_RESERVE`] slots and grows as entries arrive, like PyTorch's.
    pub fn new(capacity: usize) -> Ring {
        Ring {
            slots: reserve(capacity, 0),
            next: 0,
            capacity,
            written: 0,
        }
    }

    /// Changes the bound to `capacity` entries, keeping the newest entries
    /// that fit and their slots' numbers. Only the entries kept under the
    /// old bound can stay: the slots hold more entries than the bound once a
    /// slot of two is among them, and those past the old bound were let go
    /// (a larger bound must not bring them back). A slot of two whose first
    /// entry is let go keeps its `free_completed` alone.
    pub fn resize(&mut self, capacity: usize) {
        let kept: Vec<(Slot, usize)> = self
            .iter()
            .map(|(s, second_only, _)| (*s, if second_only { 1 } else { s.entries() }))
            .collect();
        let entries: usize = kept.iter().map(|&(_, n)| n).sum();
        let mut skip = entries - entries.min(capacity);
        let mut slots = reserve(capacity, kept.len().min(capacity));
        for (mut slot, n) in kept {
            if skip >= n {
                skip -= n;
                continue;
            }
            if n != slot.entries() || skip == 1 {
                // Only the second entry of the pair stays.
                slot.meta = (slot.meta & !0xf) | super::Action::FreeCompleted as u64;
            }
            skip = 0;
            slots.push(slot);
        }
        self.slots = slots;
        self.next = 0;
        self.capacity = capacity;
    }

    /// The number of the next slot written (slots are numbered from 0 in
    /// the order written).
    #[inline]
    pub fn written(&self) -> u64 {
        self.written
    }

    /// The number of the oldest slot held.
    #[inline]
    pub fn oldest(&self) -> u64 {
        self.written - self.slots.len() as u64
    }

    #[inline]
    pub fn push(&mut self, slot: Slot) {
        self.written += 1;
        if self.slots.len() < self.capacity {
            self.slots.push(slot);
        } else {
            self.slots[self.next] = slot;
            prefetch(self.slots.as_ptr().wrapping_add(self.next + 16));
            self.next += 1;
            if self.next == self.capacity {
                self.next = 0;
            }
        }
    }

    /// The slots, oldest first.
    fn ordered(&self) -> impl Iterator<Item = &Slot> {
        let (old, new) = self.slots.split_at(self.next);
        new.iter().chain(old)
    }

    /// The number of entries kept: at most `capacity`.
    pub fn len(&self) -> usize {
        let held: usize = self.ordered().map(Slot::entries).sum();
        held.min(self.capacity)
    }

    /// The newest `capacity` entries as slots, oldest first, each with
    /// whether only its second entry is kept (the oldest slot of two entries
    /// when just one of them fits) and its number.
    pub fn iter(&self) -> impl Iterator<Item = (&Slot, bool, u64)> {
        let held: usize = self.ordered().map(Slot::entries).sum();
        let mut skip = held - held.min(self.capacity);
        let oldest = self.oldest();
        self.ordered().zip(oldest..).filter_map(move |(s, seq)| {
            let n = s.entries();
            if skip >= n {
                skip -= n;
                None
            } else {
                let second_only = skip == 1;
                skip = 0;
                Some((s, second_only, seq))
            }
        })
    }
}

/// Asks for the line at `p` ahead of the write (a hint: never faults).
#[inline(always)]
fn prefetch(p: *const Slot) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        // SAFETY: `prefetch` is a hint that never faults, whatever the
        // address (this one may be past the end of the ring); SSE is part
        // of x86-64.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(p as *const i8) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slot(n: u64, two: bool) -> Slot {
        Slot {
            addr: n,
            size: 0,
            meta: if two { FREE_NOW } else { 0 },
            site: None,
        }
    }

    /// The entries a ring keeps, as (slot number, second of a pair).
    fn kept(r: &Ring) -> Vec<(u64, bool)> {
        r.iter()
            .map(|(s, second, seq)| {
                // Slots are numbered in the order written (slot n is n).
                assert_eq!(seq, s.addr - 1);
                (s.addr, second)
            })
            .collect()
    }

    #[test]
    fn keeps_the_newest_entries_splitting_the_oldest_pair() {
        let mut r = Ring::new(3);
        assert_eq!(r.len(), 0);
        r.push(slot(1, false));
        r.push(slot(2, true));
        // 1, 2a, 2b
        assert_eq!(kept(&r), [(1, false), (2, false)]);
        assert_eq!(r.len(), 3);
        r.push(slot(3, false));
        // (1), 2a, 2b, 3
        assert_eq!(kept(&r), [(2, false), (3, false)]);
        assert_eq!(r.len(), 3);
        r.push(slot(4, true));
        // (2a, 2b), 3, 4a, 4b: slot 1 overwritten
        assert_eq!(kept(&r), [(3, false), (4, false)]);
        r.push(slot(5, true));
        // (3), 4b, 5a, 5b: half of 4 is kept
        assert_eq!(kept(&r), [(4, true), (5, false)]);
        r.push(slot(6, false));
        assert_eq!(kept(&r), [(5, false), (6, false)]);
        assert_eq!(r.len(), 3);
    }

    /// A ring resized keeps the entries it kept, at most the new bound of
    /// them: a larger bound brings back no entry the old one let go.
    #[test]
    fn resizing_keeps_only_the_entries_kept() {
        let mut r = Ring::new(3);
        r.push(slot(1, false));
        r.push(slot(2, false));
        r.push(slot(3, true));
        // (1), 2, 3a, 3b
        r.resize(10);
        assert_eq!(kept(&r), [(2, false), (3, false)]);
        assert_eq!(r.len(), 3);
        r.resize(1);
        // 3b alone, now a slot of one entry
        assert_eq!(kept(&r), [(3, false)]);
        assert_eq!(r.len(), 1);
        r.resize(5);
        assert_eq!(r.len(), 1);
        r.push(slot(4, true));
        assert_eq!(kept(&r), [(3, false), (4, false)]);
        assert_eq!(r.len(), 3);
    }

    #[test]
    fn a_ring_of_one_keeps_the_second_entry_of_a_pair() {
        let mut r = Ring::new(1);
        r.push(slot(1, true));
        assert_eq!(kept(&r), [(1, true)]);
        r.push(slot(2, false));
        assert_eq!(kept(&r), [(2, false)]);
        assert_eq!(r.len(), 1);
    }
}
