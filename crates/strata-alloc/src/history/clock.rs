//! The clock of the history's entries: a counter read per entry, converted to
//! microseconds when the history is read.
//!
//! Reading `Instant` (a vDSO `clock_gettime`) costs about as much as the rest
//! of an entry. On x86-64 processors with an invariant time-stamp counter an
//! entry keeps the counter's ticks since the current *anchor*: a reading of
//! the counter and of `Instant` together, with the rate (microseconds per
//! tick, calibrated against `Instant` from the start over at least a
//! millisecond) in force from it on. A new anchor is taken every
//! [`Clock::RECALIBRATE`] entries, and whenever the counter goes backwards or
//! runs [`Clock::LIMIT`] ticks past the anchor (a migration to a core whose
//! counter is offset, or a long pause). Elsewhere, and until the rate is
//! calibrated, the counter is `Instant`'s nanoseconds (anchored the same way,
//! at a rate of exactly 1/1000 µs per tick).
//!
//! The conversion is the one a write-time clock would do, `anchor + ticks ×
//! rate`, done when read: a reading is the same every time the history is
//! read, and the write costs the counter read and a subtraction. Readings
//! never go backwards (each is at least the one before it).

use std::collections::VecDeque;
use std::time::Instant;

/// A reading of the counter and of `Instant` together, and the rate from it
/// on.
#[derive(Clone, Copy, Debug)]
struct Anchor {
    /// The first slot (by the ring's write count) timed from this anchor.
    seq: u64,
    /// The counter.
    ticks: u64,
    /// Microseconds since the clock started.
    us: u64,
    /// Microseconds per tick as a fraction of 2^[`Clock::FRAC`].
    rate: u64,
}

pub(super) struct Clock {
    start: Instant,
    /// Whether the time-stamp counter is usable (invariant).
    tsc: bool,
    /// Whether the current anchor counts time-stamp-counter ticks (else
    /// `Instant`'s nanoseconds).
    on_tsc: bool,
    /// The counter at `start`.
    tsc0: u64,
    /// The anchors of the slots still held, oldest first.
    anchors: VecDeque<Anchor>,
    /// The counter at the last anchor.
    anchor_ticks: u64,
    /// Entries left before the next anchor.
    reads_left: u32,
}

impl Clock {
    /// Entries between two anchors.
    const RECALIBRATE: u32 = 1024;
    /// Ticks past an anchor after which a new one is taken: a bound on what
    /// a slot keeps (44 bits), and about a second at counter rates.
    pub const LIMIT: u64 = 1 << 32;
    /// Fractional bits of [`Anchor::rate`].
    const FRAC: u32 = 40;

    /// A clock that starts at 0 now.
    pub fn new() -> Clock {
        Self::with_counter(invariant_tsc())
    }

    /// A clock that reads the time-stamp counter (`tsc`, when the processor
    /// has an invariant one) or `Instant` only.
    fn with_counter(tsc: bool) -> Clock {
        // The counter read on both sides of `start`: its midpoint.
        let a = if tsc { read_tsc() } else { 0 };
        let start = Instant::now();
        let b = if tsc { read_tsc() } else { 0 };
        let tsc0 = a + b.wrapping_sub(a) / 2;
        Clock {
            start,
            tsc,
            on_tsc: false,
            tsc0,
            anchors: VecDeque::new(),
            anchor_ticks: 0,
            reads_left: 0,
        }
    }

    /// The reading of slot `seq` (the ring's write count): ticks since the
    /// current anchor, below [`Clock::LIMIT`]. `oldest` is the oldest slot
    /// still held (anchors before it are dropped).
    #[inline]
    pub fn ticks(&mut self, seq: u64, oldest: u64) -> u64 {
        if self.reads_left > 0 {
            self.reads_left -= 1;
            let now = if self.on_tsc {
                read_tsc()
            } else {
                self.start.elapsed().as_nanos() as u64
            };
            let t = now.wrapping_sub(self.anchor_ticks);
            // Backwards wraps to a huge value.
            if t < Self::LIMIT {
                return t;
            }
        }
        self.anchor(seq, oldest)
    }

    /// Takes a new anchor for slot `seq` and the slots after it (and reads 0
    /// ticks past it).
    #[cold]
    #[inline(never)]
    fn anchor(&mut self, seq: u64, oldest: u64) -> u64 {
        let (ns, t) = if self.tsc {
            paired(self.start)
        } else {
            (self.start.elapsed().as_nanos() as u64, 0)
        };
        let us = ns / 1000;
        // `Instant`'s nanoseconds, unless the counter can be calibrated.
        let mut a = Anchor {
            seq,
            ticks: ns,
            us,
            rate: (1 << Self::FRAC) / 1000,
        };
        self.on_tsc = false;
        if self.tsc {
            // Calibrate over at least a millisecond; a counter slower than
            // 16 MHz (none is) would leave too few ticks to convert.
            if us >= 1000 && t > self.tsc0 && (t - self.tsc0) / us >= 16 {
                a.ticks = t;
                a.rate = (((us as u128) << Self::FRAC) / (t - self.tsc0) as u128) as u64;
                self.on_tsc = true;
            }
        }
        self.anchor_ticks = a.ticks;
        self.reads_left = Self::RECALIBRATE;
        while self.anchors.len() >= 2 && self.anchors[1].seq <= oldest {
            self.anchors.pop_front();
        }
        self.anchors.push_back(a);
        0
    }

    /// Converts the readings of slots in order of their `seq`.
    pub fn reader(&self) -> Reader<'_> {
        Reader {
            anchors: &self.anchors,
            i: 0,
            last: 0,
        }
    }
}

/// Converts readings to microseconds, for slots taken in order.
pub(super) struct Reader<'a> {
    anchors: &'a VecDeque<Anchor>,
    i: usize,
    last: u64,
}

impl Reader<'_> {
    /// The time of slot `seq` that read `ticks`: microseconds since the
    /// clock started, at least the time of the slot before.
    pub fn us(&mut self, seq: u64, ticks: u64) -> u64 {
        while self.i + 1 < self.anchors.len() && self.anchors[self.i + 1].seq <= seq {
            self.i += 1;
        }
        let us = self.anchors.get(self.i).map_or(0, |a| {
            a.us + ((ticks as u128 * a.rate as u128) >> Clock::FRAC) as u64
        });
        self.last = self.last.max(us);
        self.last
    }
}

/// `Instant`'s nanoseconds since `start` and the counter at the same moment:
/// the counter read on both sides of `Instant`, the narrowest of three tries
/// (an interrupt between the two readings would offset every time converted
/// from them), its midpoint.
fn paired(start: Instant) -> (u64, u64) {
    let mut best = (u64::MAX, 0, 0);
    for _ in 0..3 {
        let a = read_tsc();
        let ns = start.elapsed().as_nanos() as u64;
        let b = read_tsc();
        let width = b.wrapping_sub(a);
        if width < best.0 {
            best = (width, ns, a + width / 2);
        }
    }
    (best.1, best.2)
}

#[cfg(target_arch = "x86_64")]
fn invariant_tsc() -> bool {
    use std::arch::x86_64::__cpuid;
    // Leaf 0x8000_0007 exists, and its EDX bit 8 says the counter runs at a
    // constant rate in every power state.
    __cpuid(0x8000_0000).eax >= 0x8000_0007 && (__cpuid(0x8000_0007).edx >> 8) & 1 == 1
}

#[cfg(not(target_arch = "x86_64"))]
fn invariant_tsc() -> bool {
    false
}

#[cfg(target_arch = "x86_64")]
#[inline]
fn read_tsc() -> u64 {
    // SAFETY: `rdtsc` exists on every x86-64 processor and only reads the
    // time-stamp counter; it touches no memory.
    unsafe { std::arch::x86_64::_rdtsc() }
}

#[cfg(not(target_arch = "x86_64"))]
#[inline]
fn read_tsc() -> u64 {
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Readings converted twice give the same times, in order, never going
    /// back, each within the `Instant` readings around it; anchors of slots
    /// no longer held are dropped. With the time-stamp counter where there is one, and with
    /// `Instant` alone.
    #[test]
    fn readings_convert_the_same_each_time_and_never_go_back() {
        readings_convert_with(Clock::new());
        readings_convert_with(Clock::with_counter(false));
    }

    fn readings_convert_with(mut c: Clock) {
        // (slot, ticks, `Instant` just before and just after the reading)
        let mut slots = Vec::new();
        let mut seq = 0u64;
        while c.start.elapsed().as_millis() < 5 {
            let oldest = seq.saturating_sub(100);
            let before = c.start.elapsed().as_micros() as u64;
            let t = c.ticks(seq, oldest);
            let after = c.start.elapsed().as_micros() as u64;
            slots.push((seq, t, before, after));
            seq += 1;
        }
        let held = &slots[slots.len() - 100..];
        let convert = || {
            let mut r = c.reader();
            held.iter()
                .map(|&(s, t, _, _)| r.us(s, t))
                .collect::<Vec<u64>>()
        };
        let a = convert();
        assert_eq!(a, convert());
        assert!(a.windows(2).all(|w| w[0] <= w[1]));
        // Each reading lies between the times taken around it (a few
        // microseconds of slack: rounding, the counter's measured rate, and
        // an interrupt while an anchor was taken).
        for (&us, &(_, _, before, after)) in a.iter().zip(held) {
            assert!(before <= us + 5 && us <= after + 5, "{before} {us} {after}");
        }
        // Anchors of slots no longer held are dropped.
        assert!(c.anchors.len() <= held.len() + 1, "{}", c.anchors.len());
    }
}
