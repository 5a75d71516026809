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
//!
//! A context can also recur *twice or more in each round* (a prefetch buffer
//! of one size requested at two points of a pass): then every gap between
//! consecutive occurrences is shorter than the steady time, and the doubling
//! condition never holds for the latest occurrence, although the context's
//! *earliest* occurrence since the peak came a whole round before. Such a
//! recurrence is only a [`Repetition::Weak`] one: the same test also accepts
//! the identical layers of one long request recurring a few operations apart
//! (their earliest occurrence soon after the peak), which no timing can tell
//! from a round. What a weak repetition may hold is therefore bounded more
//! tightly (`expandable/mod.rs`). Once a strong repetition at the peak has
//! shown that the workload goes round, there is nothing left to tell apart,
//! and such a recurrence counts as strong. So does one whose earliest
//! occurrence came before a run ended (see "The first run" below): no
//! request's layers straddle the end of a run. Without that, a workload
//! whose every repeating growth recurs twice a round never measured a round,
//! and moved pages in every pass for good (prefetch_training of seed 1001 in
//! `tests/traces.rs`: 22 memory calls a pass, to its fortieth).
//!
//! A growth belongs to a stream, and a stream's own demand can still be
//! rising after the device-wide peak was set: a side stream whose prefetch
//! buffers reach their largest pair only a few steps later. A context first
//! seen before its stream's peak of allocated memory was set is therefore not
//! yet taken as a repetition when it recurs within the round (a training
//! step recurring two steps later, inside the first pass of resnet18_prefetch
//! `*.expandable`); only a recurrence at least [`LONG_GAP`] times as long
//! after it as the device-wide peak had then been steady counts (the second
//! pass of a workload whose first occurrence came right after its peak).
//!
//! # Settling
//!
//! Recognising rounds by their contexts can fail for good: a workload whose
//! layout differs from round to round grows at different points each time,
//! and a context that recurs within a round (a batch size that two steps of
//! one pass share) is only a weak repetition, which holds little. Such a
//! workload can move pages in every round and never settle (seeds 5, 13 and
//! 19 of `varying_batch_training` in `tests/traces.rs` paid memory calls in
//! every pass). So once the workload has repeated strongly at its peak, the
//! gap of that first strong repetition is taken as its round, and a growth
//! that comes [`SETTLE_ROUNDS`] rounds or more after it holds whatever its
//! context, as a strong repetition does (within the same hold limit): the
//! workload has had the time to settle and still grows, so it holds memory
//! until it stops growing. A new peak forgets the round.
//!
//! # The first run
//!
//! A workload's first run cannot know whether it will be run again, and
//! its repetitions (the steps of one training run, the requests of one
//! batch) settle as well in a later run as in this one. So until the
//! workload has *ended* once, holding stays within the first-run bound
//! (`expandable/mod.rs`): the run keeps reserved memory near its allocated
//! memory and pays for its moves. A run has ended when allocated memory
//! falls to 1/[`RUN_ENDED_FRACTION`] of its highest figure or less, that
//! figure being at least half the present peak (a small warm-up allocation
//! freed before the real work does not end the run that follows). When the
//! workload starts again, its growths hold as described above, and its
//! second and third runs settle.
//!
//! A workload that never ends (a training loop that keeps its parameters)
//! is still taken for its first run until [`FIRST_RUN_PATIENCE`] times as
//! long has passed since its peak was set as the peak took to be reached;
//! then it holds and settles (a ski-rental rule: it pays for its moves for
//! a time proportional to what it has run, then buys the memory).

use rustc_hash::{FxHashMap, FxHashSet};

/// A run has ended when allocated memory falls to 1/`RUN_ENDED_FRACTION`
/// of its highest figure or less.
const RUN_ENDED_FRACTION: u64 = 128;

/// A workload that has not ended is past its first run once
/// `FIRST_RUN_PATIENCE` times as long has passed since its peak was set as
/// the peak took to be reached (on the free clock).
const FIRST_RUN_PATIENCE: u64 = 16;

/// Contexts remembered per steady peak, at most; past this the record starts
/// afresh (a long run of contexts that never recur is not a repeating
/// workload).
const MAX_CONTEXTS: usize = 1 << 16;

/// A context first seen before its stream's peak counts as a repetition only
/// when it recurs at least this many times as long after its first
/// occurrence as the device-wide peak had then been steady.
const LONG_GAP: u64 = 16;

/// A workload that still grows [`SETTLE_ROUNDS`] rounds after its first
/// strong repetition holds on every growth (see [`Repeats::unsettled`]).
const SETTLE_ROUNDS: u64 = 2;

/// The doubling condition allows a recurrence to come up to 1/`GAP_SLACK`
/// of the steady time short of it: the free clock counts insertions into the
/// free index, and how many a round of the workload makes depends a little
/// on the layout it leaves, so an exactly repeating workload's round can
/// measure a few ticks shorter than the time from the peak to its first
/// occurrence (t5_varlen in `traces/`: 55043 against 55347).
const GAP_SLACK: u64 = 128;

/// The slack of a context whose earliest occurrence since the peak is the
/// growth that set the peak (or came before it). Such an occurrence never
/// counts, so the context's only chance is its next round: every later
/// occurrence falls further short of a steady time that grows by a round each
/// time, and the earliest-occurrence path that rescues other contexts a round
/// later (a weak repetition) is closed to it. A round measured a little short
/// by layout noise then loses it for good: the checkpointed llama of
/// `traces/held_out/` (`llama_ckpt_train.expandable`, its 500-MiB logits the
/// growth that set the peak) measured 1924 ticks against 1947 (1.2% short),
/// was never recognised, and paid about 2,000 memory calls in every pass.
const PEAK_GAP_SLACK: u64 = 32;

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

/// What [`Repeats::recurs`] makes of a growth.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Repetition {
    /// Not a repetition of the workload.
    None,
    /// The context's earliest occurrence since the peak satisfies the
    /// doubling condition, its latest one does not, and no strong
    /// repetition has been seen at this peak yet.
    Weak,
    /// Its latest occurrence satisfies the doubling condition.
    Strong,
}

/// The growth contexts seen since peak allocated memory last rose, with the
/// allocator's free clock when each was first and last seen. The peak is the highest
/// ever passed in, so a reset of the peak statistics (which some training
/// loops do every step) does not make the record start afresh.
#[derive(Default)]
pub(crate) struct Repeats {
    peak: u64,
    since: u64,
    seen: FxHashMap<u64, (u64, u64)>,
    /// The first strong repetition since the peak: when, and the round it
    /// measured.
    first_strong: Option<(u64, u64)>,
    /// The highest figure of allocated memory of a run that has ended (see
    /// "The first run"); 0 while none has.
    ended_at: u64,
    /// The free clock when allocated memory last fell to
    /// 1/[`RUN_ENDED_FRACTION`] of its highest figure or less (a run
    /// ended); 0 while it never has.
    last_end: u64,
    /// The contexts of the large-pool growths made since a run at the
    /// present peak ended ([`Repeats::grew_again`]).
    grown_after_peak: FxHashSet<u64>,
    /// The free clock of the latest of those growths; 0 while none.
    last_growth_after_peak: u64,
}

impl Repeats {
    /// Notes allocated memory after a free at free clock `now`: `current`
    /// bytes, its highest figure ever being `high`. A compare on the free
    /// path.
    #[inline]
    pub fn observe_free(&mut self, current: u64, high: u64, now: u64) {
        if current <= high / RUN_ENDED_FRACTION {
            self.last_end = now;
            if high > self.ended_at {
                self.ended_at = high;
            }
        }
    }

    /// Whether a growth at free clock `now` (after [`Repeats::recurs`] has
    /// seen it) belongs to the workload's first run: no run whose peak was
    /// at least half the present one has ended, and less than
    /// [`FIRST_RUN_PATIENCE`] times as long has passed since the peak was
    /// set as it took to reach it.
    pub fn first_run(&self, now: u64) -> bool {
        self.ended_at.saturating_mul(2) < self.peak
            && now.saturating_sub(self.since) < FIRST_RUN_PATIENCE.saturating_mul(self.since.max(1))
    }

    /// Whether a run that reached the present peak of allocated memory has
    /// ended (see "The first run"): the workload has gone through its whole
    /// demand at least once and started again. From then on its growths
    /// all hold, and each pool recycles only its own pages
    /// (docs/allocator.md, "After a run at the peak").
    pub fn ended_at_peak(&self) -> bool {
        self.peak > 0 && self.ended_at >= self.peak
    }

    /// Records a large-pool growth of context `key` at free clock `now`,
    /// made after a run at the present peak ended ([`Repeats::ended_at_peak`]),
    /// and says whether it grows again where the workload has grown before
    /// since then: a growth of the same context was made since that run
    /// ended (the workload came round to the same point), or a growth was
    /// made in an earlier run than this one (a run has ended since the
    /// latest growth: the workload went round once more and still grows).
    /// Forgotten when the peak rises (the contexts also past
    /// [`MAX_CONTEXTS`], as `seen`).
    pub fn grew_again(&mut self, key: u64, now: u64) -> bool {
        let earlier_run =
            self.last_growth_after_peak > 0 && self.last_growth_after_peak < self.last_end;
        self.last_growth_after_peak = now.max(1);
        if self.grown_after_peak.len() >= MAX_CONTEXTS {
            self.grown_after_peak.clear();
        }
        let same_point = !self.grown_after_peak.insert(key);
        same_point || earlier_run
    }

    /// Whether a growth at free clock `now` comes [`SETTLE_ROUNDS`] rounds
    /// or more after the first strong repetition at this peak (a round being
    /// the gap that repetition measured): the workload goes round, and has
    /// had the time to settle, but still grows.
    fn unsettled(&self, now: u64) -> bool {
        self.first_strong.is_some_and(|(t, round)| {
            round > 0 && now >= t.saturating_add(round.saturating_mul(SETTLE_ROUNDS))
        })
    }

    /// Records a growth of context `key` at peak allocated bytes `peak`
    /// (reached at free clock `peak_at`) and free clock `now`.
    /// [`Repetition::Strong`] when the workload repeats: the same context was
    /// last seen since the peak last rose, strictly after it rose, and at
    /// least as long ago as the peak had been steady then (less
    /// 1/[`GAP_SLACK`] of it, or 1/[`PEAK_GAP_SLACK`] for a context whose
    /// earliest occurrence set the peak).
    /// [`Repetition::Weak`] when only its earliest occurrence since the peak
    /// meets that condition ([`Repetition::Strong`] once a strong repetition
    /// has been seen at this peak). Any growth of a workload that is
    /// [unsettled](Self::unsettled) is [`Repetition::Strong`] (see
    /// "Settling" above).
    ///
    /// `stream_peak_at` is the free clock when the growth's stream last raised
    /// its own peak of allocated memory (`now` when this growth's request
    /// raises it): an earlier occurrence at or before that moment counts only
    /// if the recurrence comes at least [`LONG_GAP`] times as long after it as
    /// the peak had then been steady.
    pub fn recurs(
        &mut self,
        key: u64,
        peak: u64,
        peak_at: u64,
        now: u64,
        stream_peak_at: u64,
    ) -> Repetition {
        if peak > self.peak {
            self.peak = peak;
            self.since = peak_at;
            self.seen.clear();
            self.first_strong = None;
            self.grown_after_peak.clear();
            self.last_growth_after_peak = 0;
        }
        if self.seen.len() >= MAX_CONTEXTS {
            self.seen.clear();
        }
        let since = self.since;
        let counts = |t1: u64, slack: u64| {
            let steady = t1 - since;
            let gap = now - t1;
            t1 > since
                && gap + steady / slack >= steady
                && (t1 > stream_peak_at || gap >= LONG_GAP * steady)
        };
        let repetition = match self.seen.get_mut(&key) {
            Some(seen) => {
                let (first, last) = *seen;
                seen.1 = now;
                let slack = if first <= since {
                    PEAK_GAP_SLACK
                } else {
                    GAP_SLACK
                };
                if counts(last, slack) {
                    self.first_strong.get_or_insert((now, now - last));
                    Repetition::Strong
                } else if counts(first, GAP_SLACK) {
                    // Once the workload has gone round at this peak, a
                    // context recurring a round after its earliest
                    // occurrence is that round coming back, not identical
                    // layers of one long request.
                    //
                    // So is one whose earliest occurrence came before a run
                    // ended: no request's layers straddle the end of a run.
                    if self.first_strong.is_some() || first < self.last_end {
                        Repetition::Strong
                    } else {
                        Repetition::Weak
                    }
                } else {
                    Repetition::None
                }
            }
            None => {
                self.seen.insert(key, (now, now));
                Repetition::None
            }
        };
        if self.unsettled(now) {
            Repetition::Strong
        } else {
            repetition
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
        assert_eq!(r.recurs(7, 1000, 100, 100, 0), Repetition::None);
        assert_eq!(r.recurs(1, 1000, 150, 150, 0), Repetition::None);
        assert_eq!(r.recurs(1, 1000, 250, 250, 0), Repetition::Strong);
    }

    #[test]
    fn a_workload_still_growing_two_rounds_after_it_repeated_is_unsettled() {
        let mut r = Repeats::default();
        assert_eq!(r.recurs(7, 1000, 100, 100, 0), Repetition::None);
        assert!(!r.unsettled(100_000), "no strong repetition yet");
        assert_eq!(r.recurs(1, 1000, 150, 150, 0), Repetition::None);
        // A strong repetition at 250, of a round of 100.
        assert_eq!(r.recurs(1, 1000, 250, 250, 0), Repetition::Strong);
        assert!(!r.unsettled(449));
        assert!(r.unsettled(450));
        // A later strong repetition does not move the first one.
        assert_eq!(r.recurs(1, 1000, 400, 400, 0), Repetition::Strong);
        assert!(r.unsettled(450));
        // A new peak forgets it.
        assert_eq!(r.recurs(2, 2000, 500, 500, 0), Repetition::None);
        assert!(!r.unsettled(100_000));
    }

    #[test]
    fn a_quick_recurrence_long_after_the_peak_is_not() {
        let mut r = Repeats::default();
        assert_eq!(r.recurs(7, 1000, 100, 100, 0), Repetition::None);
        assert_eq!(r.recurs(1, 1000, 900, 900, 0), Repetition::None);
        // 20 later, but the peak had been steady for 800 when it was first seen.
        assert_eq!(r.recurs(1, 1000, 920, 920, 0), Repetition::None);
        // A round later (from 920, steady for 820 then) it is.
        assert_eq!(r.recurs(1, 1000, 1800, 1800, 0), Repetition::Strong);
    }

    #[test]
    fn the_growth_that_set_the_peak_does_not_count_and_a_new_peak_forgets() {
        let mut r = Repeats::default();
        assert_eq!(r.recurs(1, 1000, 100, 100, 0), Repetition::None);
        // Seen when the peak was set, not after: not yet a repetition.
        assert_eq!(r.recurs(1, 1000, 400, 400, 0), Repetition::None);
        assert_eq!(r.recurs(1, 1000, 800, 800, 0), Repetition::Strong);
        // A higher peak starts afresh.
        assert_eq!(r.recurs(1, 2000, 900, 900, 0), Repetition::None);
        assert_eq!(r.recurs(1, 2000, 5000, 5000, 0), Repetition::None);
        // A lower peak (the statistics were reset) does not: the record
        // continues under the highest peak.
        assert_eq!(r.recurs(2, 1500, 6000, 6000, 0), Repetition::None);
        assert_eq!(r.recurs(2, 1500, 11200, 11200, 0), Repetition::Strong);
    }

    #[test]
    fn a_growth_made_again_after_a_run_at_the_peak_is_told_until_a_new_peak() {
        let mut r = Repeats::default();
        assert_eq!(r.recurs(1, 1000, 100, 100, 0), Repetition::None);
        // A run at the peak ends (allocated falls to nothing).
        r.observe_free(0, 1000, 200);
        assert!(r.ended_at_peak());
        // The next run grows at two points, one of them twice.
        assert!(!r.grew_again(5, 300), "the context's first growth since");
        assert!(!r.grew_again(6, 310));
        assert!(r.grew_again(5, 320), "the same point of the workload again");
        // That run ends; the next one grows at a point it has not grown at.
        r.observe_free(0, 1000, 400);
        assert!(r.grew_again(7, 500), "a run after one that grew");
        assert!(!r.grew_again(8, 510), "within that run, a new point");
        // A higher peak forgets them: the workload has not come round at it.
        r.recurs(9, 2000, 600, 600, 0);
        assert!(!r.ended_at_peak());
        assert!(!r.grew_again(5, 610));
        assert!(r.grew_again(5, 620));
    }

    #[test]
    fn a_context_seen_before_its_streams_peak_needs_a_long_gap() {
        let mut r = Repeats::default();
        // The device-wide peak is set at 100; the context is first seen at
        // 150, but its stream reaches its own peak only at 200.
        assert_eq!(r.recurs(7, 1000, 100, 100, 0), Repetition::None);
        assert_eq!(r.recurs(1, 1000, 150, 150, 200), Repetition::None);
        // 100 later: a repetition by the doubling condition, but the first
        // occurrence came before the stream's peak.
        assert_eq!(r.recurs(1, 1000, 250, 250, 200), Repetition::None);
        // Seen at 250 (after the stream's peak), it counts 150 later.
        assert_eq!(r.recurs(1, 1000, 400, 400, 200), Repetition::Strong);
        // A context first seen at 110 (steady for 10) counts before the
        // stream's peak only from LONG_GAP * 10 later.
        assert_eq!(r.recurs(2, 1000, 110, 110, 200), Repetition::None);
        assert_eq!(
            r.recurs(
                2,
                1000,
                110 + LONG_GAP * 10 - 1,
                110 + LONG_GAP * 10 - 1,
                200
            ),
            Repetition::None
        );
        let mut r = Repeats::default();
        assert_eq!(r.recurs(7, 1000, 100, 100, 0), Repetition::None);
        assert_eq!(r.recurs(2, 1000, 110, 110, 200), Repetition::None);
        assert_eq!(
            r.recurs(2, 1000, 110 + LONG_GAP * 10, 110 + LONG_GAP * 10, 200),
            Repetition::Strong
        );
    }

    #[test]
    fn a_context_recurring_twice_a_round_is_a_weak_repetition() {
        let mut r = Repeats::default();
        // The peak is set at 100; the context recurs every 250, twice a round
        // of 500, first seen 500 after the peak.
        assert_eq!(r.recurs(7, 1000, 100, 100, 0), Repetition::None);
        assert_eq!(r.recurs(1, 1000, 600, 600, 0), Repetition::None);
        // 250 after its occurrence at 600, when the peak had been steady for
        // 500: too soon.
        assert_eq!(r.recurs(1, 1000, 850, 850, 0), Repetition::None);
        // 500 after the earliest occurrence (a round later), but only 250
        // after the latest: weak.
        assert_eq!(r.recurs(1, 1000, 1100, 1100, 0), Repetition::Weak);
        assert_eq!(r.recurs(1, 1000, 1350, 1350, 0), Repetition::Weak);
        // A higher peak forgets the earliest occurrence.
        assert_eq!(r.recurs(1, 2000, 1400, 1400, 0), Repetition::None);
        assert_eq!(r.recurs(1, 2000, 1500, 1500, 0), Repetition::None);
        // The earliest occurrence before the stream's own peak needs the long
        // gap, as the latest does.
        let mut r = Repeats::default();
        assert_eq!(r.recurs(7, 1000, 100, 100, 0), Repetition::None);
        assert_eq!(r.recurs(1, 1000, 600, 600, 700), Repetition::None);
        assert_eq!(r.recurs(1, 1000, 850, 850, 700), Repetition::None);
        assert_eq!(r.recurs(1, 1000, 1100, 1100, 700), Repetition::None);
    }

    #[test]
    fn a_weak_recurrence_after_a_run_ended_is_strong() {
        // As in the weak case: the peak of 128,000 bytes is set at 100, and
        // context 1, first seen at 600, recurs every 250.
        let peak = 1000 * RUN_ENDED_FRACTION;
        let mut r = Repeats::default();
        assert_eq!(r.recurs(7, peak, 100, 100, 0), Repetition::None);
        assert_eq!(r.recurs(1, peak, 600, 600, 0), Repetition::None);
        assert_eq!(r.recurs(1, peak, 850, 850, 0), Repetition::None);
        // Allocated memory falls to 1/64 of its highest figure at 900: the
        // run goes on, and a round after its earliest occurrence the context
        // is still a weak repetition.
        r.observe_free(peak / 64, peak, 900);
        assert_eq!(r.recurs(1, peak, 1100, 1100, 0), Repetition::Weak);
        // It falls to 1/128 at 1200: the run ended. The context's earliest
        // occurrence came before that, so its next recurrence is the next
        // run coming round: strong.
        r.observe_free(peak / RUN_ENDED_FRACTION, peak, 1200);
        assert_eq!(r.recurs(1, peak, 1350, 1350, 0), Repetition::Strong);
        // A context first seen after the run ended gains nothing from it.
        assert_eq!(r.recurs(3, peak, 1360, 1360, 0), Repetition::None);
        assert_eq!(r.recurs(3, peak, 1370, 1370, 0), Repetition::None);
        // A run that ended before the peak was set counts for nothing: a
        // higher peak at 1400, then context 1 twice a round again.
        assert_eq!(r.recurs(8, 2 * peak, 1400, 1400, 0), Repetition::None);
        assert_eq!(r.recurs(1, 2 * peak, 1900, 1900, 0), Repetition::None);
        assert_eq!(r.recurs(1, 2 * peak, 2150, 2150, 0), Repetition::None);
        assert_eq!(r.recurs(1, 2 * peak, 2400, 2400, 0), Repetition::Weak);
    }

    #[test]
    fn a_weak_recurrence_after_the_workload_went_round_is_strong() {
        let mut r = Repeats::default();
        // The peak is set at 100. Context 1 recurs every 250 (twice a round
        // of 500); context 2, seen once at 200, comes back a round later.
        assert_eq!(r.recurs(7, 1000, 100, 100, 0), Repetition::None);
        assert_eq!(r.recurs(1, 1000, 600, 600, 0), Repetition::None);
        assert_eq!(r.recurs(1, 1000, 850, 850, 0), Repetition::None);
        assert_eq!(r.recurs(1, 1000, 1100, 1100, 0), Repetition::Weak);
        assert_eq!(r.recurs(2, 1000, 200, 200, 0), Repetition::None);
        assert_eq!(r.recurs(2, 1000, 700, 700, 0), Repetition::Strong);
        // The workload has gone round: context 1's next recurrence, a round
        // after its earliest occurrence but only 250 after its latest, is a
        // repetition of the round.
        assert_eq!(r.recurs(1, 1000, 1350, 1350, 0), Repetition::Strong);
        // One that meets neither condition is still none.
        assert_eq!(r.recurs(3, 1000, 1360, 1360, 0), Repetition::None);
        assert_eq!(r.recurs(3, 1000, 1370, 1370, 0), Repetition::None);
    }

    #[test]
    fn the_steady_time_counts_from_when_the_peak_was_set() {
        // The peak is reached at 100 by an allocation that needed no growth;
        // the first growth to see it comes at 500. A context first seen there
        // recurs a round later (400): a repetition, since the peak had been
        // steady for 400 when it was first seen. Counted from the growth that
        // noticed the peak (500), its first occurrence would not count, and
        // its next round (gap 400 against a steady time of 400 + 400) would
        // miss the doubling condition by a few ticks of layout noise.
        let mut r = Repeats::default();
        assert_eq!(r.recurs(1, 1000, 100, 500, 0), Repetition::None);
        assert_eq!(r.recurs(1, 1000, 100, 900, 0), Repetition::Strong);
        // The growth whose own request raised the peak still does not count.
        let mut r = Repeats::default();
        assert_eq!(r.recurs(2, 1000, 500, 500, 0), Repetition::None);
        assert_eq!(r.recurs(2, 1000, 500, 900, 0), Repetition::None);
        assert_eq!(r.recurs(2, 1000, 500, 1300, 0), Repetition::Strong);
    }

    #[test]
    fn a_round_a_few_ticks_short_of_the_steady_time_still_counts() {
        // Steady for 1000 when first seen; a round of 995 free-clock ticks
        // (layout noise of 0.5%) counts, one of 990 (more than 1/128 short)
        // does not.
        let mut r = Repeats::default();
        assert_eq!(r.recurs(7, 1000, 100, 100, 0), Repetition::None);
        assert_eq!(r.recurs(1, 1000, 100, 1100, 0), Repetition::None);
        assert_eq!(r.recurs(1, 1000, 100, 2095, 0), Repetition::Strong);
        let mut r = Repeats::default();
        assert_eq!(r.recurs(7, 1000, 100, 100, 0), Repetition::None);
        assert_eq!(r.recurs(1, 1000, 100, 1100, 0), Repetition::None);
        assert_eq!(r.recurs(1, 1000, 100, 2090, 0), Repetition::None);
    }

    #[test]
    fn a_round_of_the_growth_that_set_the_peak_has_a_wider_slack() {
        // llama_ckpt_train.expandable (`traces/held_out/`): the step's logits
        // set the peak at tick 2573 and grow again every step; the occurrence
        // at 4520 is followed by one 1924 ticks later, 1.2% short of the 1947
        // ticks the peak had then been steady. It counts (within 1/32)...
        let mut r = Repeats::default();
        assert_eq!(r.recurs(1, 3000, 2573, 2573, 0), Repetition::None);
        assert_eq!(r.recurs(1, 3000, 2573, 4520, 0), Repetition::None);
        assert_eq!(r.recurs(1, 3000, 2573, 6444, 0), Repetition::Strong);
        // ... but not 4% short.
        let mut r = Repeats::default();
        assert_eq!(r.recurs(1, 3000, 2573, 2573, 0), Repetition::None);
        assert_eq!(r.recurs(1, 3000, 2573, 4520, 0), Repetition::None);
        assert_eq!(r.recurs(1, 3000, 2573, 6390, 0), Repetition::None);
        // A context first seen after the peak keeps the 1/128 slack: its
        // earliest occurrence can still make it a repetition a round later.
        let mut r = Repeats::default();
        assert_eq!(r.recurs(9, 3000, 2573, 2573, 0), Repetition::None);
        assert_eq!(r.recurs(1, 3000, 2573, 4520, 0), Repetition::None);
        assert_eq!(r.recurs(1, 3000, 2573, 6444, 0), Repetition::None);
        assert_eq!(r.recurs(1, 3000, 2573, 8344, 0), Repetition::Weak);
    }

    #[test]
    fn a_run_ends_when_allocated_memory_falls_to_nothing_after_its_peak() {
        let mut r = Repeats::default();
        // The peak of 1 GiB is set at free clock 100.
        assert_eq!(r.recurs(1, 1 << 30, 100, 100, 0), Repetition::None);
        assert!(r.first_run(150));
        // Down to 1/64 of the peak: the run goes on.
        r.observe_free((1 << 30) / 64, 1 << 30, 120);
        assert!(r.first_run(150));
        // Down to 1/128 of it: the run has ended.
        r.observe_free((1 << 30) / 128, 1 << 30, 130);
        assert!(!r.first_run(150));
        // A peak more than twice the ended run's is a new first run ...
        assert_eq!(r.recurs(2, (2 << 30) + 1, 200, 200, 0), Repetition::None);
        assert!(r.first_run(250));
        // ... but one at most twice it is not.
        let mut r = Repeats::default();
        r.observe_free(0, 1 << 30, 50);
        assert_eq!(r.recurs(1, 2 << 30, 100, 100, 0), Repetition::None);
        assert!(!r.first_run(150));
    }

    #[test]
    fn a_run_has_ended_at_the_peak_only_when_it_reached_the_present_peak() {
        let mut r = Repeats::default();
        assert!(!r.ended_at_peak(), "no growth, no peak");
        assert_eq!(r.recurs(1, 1 << 30, 100, 100, 0), Repetition::None);
        assert!(!r.ended_at_peak());
        // A run whose highest figure was the present peak ends.
        r.observe_free(0, 1 << 30, 130);
        assert!(r.ended_at_peak());
        // A higher peak: the run that ended stopped below it (though it
        // still ends the first run, being more than half of it).
        assert_eq!(
            r.recurs(2, (1 << 30) + (1 << 20), 200, 200, 0),
            Repetition::None
        );
        assert!(!r.ended_at_peak());
        assert!(!r.first_run(250));
        // Until a run at the new peak ends.
        r.observe_free(1 << 20, (1 << 30) + (1 << 20), 300);
        assert!(r.ended_at_peak());
    }

    #[test]
    fn a_small_allocation_freed_before_the_work_does_not_end_its_run() {
        let mut r = Repeats::default();
        // 512 bytes allocated and freed before a workload of 1 GiB.
        r.observe_free(0, 512, 50);
        assert_eq!(r.recurs(1, 1 << 30, 100, 100, 0), Repetition::None);
        assert!(r.first_run(150));
    }

    #[test]
    fn a_workload_that_never_ends_leaves_its_first_run_after_sixteen_times_its_ramp() {
        let mut r = Repeats::default();
        // The peak was reached at free clock 100: the first run lasts until
        // 100 + 16 * 100.
        assert_eq!(r.recurs(1, 1 << 30, 100, 100, 0), Repetition::None);
        assert!(r.first_run(100 + FIRST_RUN_PATIENCE * 100 - 1));
        assert!(!r.first_run(100 + FIRST_RUN_PATIENCE * 100));
        // A new peak at 2000 starts the count again from there.
        assert_eq!(r.recurs(2, 2 << 30, 2000, 2000, 0), Repetition::None);
        assert!(r.first_run(2000 + FIRST_RUN_PATIENCE * 2000 - 1));
        assert!(!r.first_run(2000 + FIRST_RUN_PATIENCE * 2000));
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
