//! Recognising a workload that repeats itself, for the hold-or-move rule of
//! expandable segments (docs/allocator.md, "Holding memory or moving pages").
//!
//! Each growth of an expandable segment has a *context*: its stream, pool and
//! rounded size, the bytes allocated at that moment, and a fingerprint of the
//! last dozen requests. A context that comes back at the same peak of allocated
//! memory, after at least as long as the peak had been steady when it was
//! first seen, is taken as the workload going round again (a training step, a
//! replayed batch of requests): the growth then holds memory (creates pages)
//! instead of moving pages, so that the next round finds them in place.
//!
//! The doubling condition keeps repetitions *inside* the first round from
//! counting: identical layers of one request recur within a few operations of
//! each other, long after the peak was set, so the gap is shorter than the
//! steady time before the first occurrence. A workload that goes round with
//! period `T` after setting its peak sees every context of the first round
//! again `T` later, and `T` is at least the time from the peak to any moment
//! of that round.

use std::collections::HashMap;

/// Contexts remembered per steady peak, at most; past this the record starts
/// afresh (a long run of contexts that never recur is not a repeating
/// workload).
const MAX_CONTEXTS: usize = 1 << 16;

/// Mixes one request into the fingerprint of the recent requests: each request
/// contributes 24 bits, shifted out after 12 further requests.
#[inline]
pub(crate) fn mix_request(recent: u64, rounded: u64, stream: u32) -> u64 {
    (recent << 5) ^ (rounded.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40) ^ stream as u64
}

/// The context of a growth, as one hash.
pub(crate) fn growth_context(
    stream: u32,
    pool: u8,
    rounded: u64,
    allocated: u64,
    recent: u64,
) -> u64 {
    let mut h = 0xCBF2_9CE4_8422_2325u64;
    for x in [stream as u64, pool as u64, rounded, allocated, recent] {
        h = (h ^ x).wrapping_mul(0x0000_0100_0000_01B3);
        h ^= h >> 29;
    }
    h
}

/// The growth contexts seen since peak allocated memory last rose, with the
/// allocator's free clock when each was last seen. The peak is the highest
/// ever passed in, so a reset of the peak statistics (which some training
/// loops do every step) does not make the record start afresh.
#[derive(Default)]
pub(crate) struct Repeats {
    peak: u64,
    since: u64,
    seen: HashMap<u64, u64>,
}

impl Repeats {
    /// Records a growth of context `key` at peak allocated bytes `peak` and
    /// free clock `now`; true when it is a repetition of the workload: the
    /// same context was seen since the peak last rose, strictly after it rose,
    /// and at least as long ago as the peak had been steady then.
    pub fn recurs(&mut self, key: u64, peak: u64, now: u64) -> bool {
        if peak > self.peak {
            self.peak = peak;
            self.since = now;
            self.seen.clear();
        }
        if self.seen.len() >= MAX_CONTEXTS {
            self.seen.clear();
        }
        match self.seen.insert(key, now) {
            Some(t1) => t1 > self.since && now - t1 >= t1 - self.since,
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_context_recurring_a_round_later_is_a_repetition() {
        let mut r = Repeats::default();
        // The peak is set at time 100; a context seen at 150 comes back at 250
        // (100 later, more than the 50 the peak had been steady at 150).
        assert!(!r.recurs(7, 1000, 100));
        assert!(!r.recurs(1, 1000, 150));
        assert!(r.recurs(1, 1000, 250));
    }

    #[test]
    fn a_quick_recurrence_long_after_the_peak_is_not() {
        let mut r = Repeats::default();
        assert!(!r.recurs(7, 1000, 100));
        assert!(!r.recurs(1, 1000, 900));
        // 20 later, but the peak had been steady for 800 when it was first seen.
        assert!(!r.recurs(1, 1000, 920));
        // A round later (from 920, steady for 820 then) it is.
        assert!(r.recurs(1, 1000, 1800));
    }

    #[test]
    fn the_growth_that_set_the_peak_does_not_count_and_a_new_peak_forgets() {
        let mut r = Repeats::default();
        assert!(!r.recurs(1, 1000, 100));
        // Seen when the peak was set, not after: not yet a repetition.
        assert!(!r.recurs(1, 1000, 400));
        assert!(r.recurs(1, 1000, 800));
        // A higher peak starts afresh.
        assert!(!r.recurs(1, 2000, 900));
        assert!(!r.recurs(1, 2000, 5000));
        // A lower peak (the statistics were reset) does not: the record
        // continues under the highest peak.
        assert!(!r.recurs(2, 1500, 6000));
        assert!(r.recurs(2, 1500, 11200));
    }

    #[test]
    fn the_fingerprint_forgets_old_requests() {
        let a = (0..20u64).fold(0, |f, i| mix_request(f, 512 * (i + 1), 0));
        let b = (0..20u64).fold(99, |f, i| mix_request(f, 512 * (i + 1), 0));
        assert_eq!(a, b, "only the last requests count");
        let c = (0..20u64).fold(0, |f, i| mix_request(f, 512 * (i + 2), 0));
        assert_ne!(a, c);
        assert_ne!(
            growth_context(0, 1, 512, 0, a),
            growth_context(1, 1, 512, 0, a)
        );
    }
}
