//! Session 58's sweep of hostile inputs to strata-alloc's public statistics
//! types (after `hostile_s57.rs`).
//!
//! Defect these tests found (fixed with them): `Stat::increase` and
//! `Stat::decrease` added to `current` without a check (their `allocated`
//! and `freed` totals already saturated), so a caller's counter driven past
//! i64::MAX wrapped to a negative value in a release build and panicked in a
//! debug one; `StatArray`'s aggregate summed its two pools the same way
//! (a unit test of `stats.rs` now; its `increase`/`decrease` are the
//! allocator's own since session 58, as a change to `StatType::All`, which
//! has no stat of its own, panicked in a debug build and changed the large
//! pool in a release one), and `DurationStat::add` summed its durations and
//! its count unchecked. They now saturate at the integer's limits, as the
//! totals did.

use strata_alloc::pinned::DurationStat;
use strata_alloc::Stat;

#[test]
fn a_stat_saturates_instead_of_wrapping() {
    let mut s = Stat::default();
    s.increase(i64::MAX);
    s.increase(i64::MAX);
    assert_eq!(s.current, i64::MAX, "current saturates, not wraps negative");
    assert_eq!(s.peak, i64::MAX);
    assert_eq!(s.allocated, i64::MAX);
    s.decrease(i64::MAX);
    assert_eq!(s.current, 0);
    s.decrease(i64::MAX);
    s.decrease(i64::MAX);
    assert_eq!(s.current, i64::MIN, "saturates at the bottom too");
    assert_eq!(s.freed, i64::MAX);
    assert_eq!(s.peak, i64::MAX, "the peak stays");
    // Ordinary amounts add as before.
    let mut t = Stat::default();
    t.increase(10);
    t.decrease(4);
    assert_eq!((t.current, t.peak, t.allocated, t.freed), (6, 10, 10, 4));
}

#[test]
fn a_duration_stat_saturates_instead_of_wrapping() {
    let mut d = DurationStat::default();
    d.add(u64::MAX);
    d.add(u64::MAX);
    d.add(3);
    assert_eq!(d.total_us, u64::MAX);
    assert_eq!(d.count, 3);
    assert_eq!((d.min_us, d.max_us), (3, u64::MAX));
    let mut e = DurationStat {
        count: u64::MAX,
        ..DurationStat::default()
    };
    e.add(5);
    assert_eq!((e.count, e.total_us), (u64::MAX, 5));
}
