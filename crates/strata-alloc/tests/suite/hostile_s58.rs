//! Session 58's sweep of hostile inputs to strata-alloc's public statistics
//! types (after `hostile_s57.rs`).
//!
//! Defect these tests found (fixed with them): `Stat::increase` and
//! `Stat::decrease` added to `current` without a check (their `allocated`
//! and `freed` totals already saturated), so a caller's counter driven past
//! i64::MAX wrapped to a negative value in a release build and panicked in a
//! debug one; `StatArray`'s aggregate summed its two pools the same way,
//! and `DurationStat::add` summed its durations and its count unchecked.
//! They now saturate at the integer's limits, as the totals did.

use strata_alloc::pinned::DurationStat;
use strata_alloc::{MemoryStats, Stat, StatType};

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
fn the_aggregate_of_two_pools_saturates() {
    let mut m = MemoryStats::default();
    m.allocated_bytes.increase(StatType::SmallPool, i64::MAX);
    m.allocated_bytes.increase(StatType::LargePool, i64::MAX);
    let all = m.allocated_bytes.get(StatType::All);
    assert_eq!(all.current, i64::MAX);
    assert_eq!(all.peak, i64::MAX);
    assert_eq!(all.allocated, i64::MAX);
    assert_eq!(m.allocated_bytes.get(StatType::SmallPool).current, i64::MAX);
    assert_eq!(m.to_map()["allocated_bytes.all.current"], i64::MAX);
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
