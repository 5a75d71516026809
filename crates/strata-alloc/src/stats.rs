//! Memory statistics with PyTorch's names and meanings.
//!
//! [`MemoryStats::to_map`] flattens a device allocator's statistics into the
//! keys of `torch.cuda.memory_stats()` (`allocated_bytes.all.current`,
//! `num_ooms`, …); [`PinnedStats::to_map`] does the same for the pinned host
//! allocator with the keys of `torch.cuda.host_memory_stats()`.

use std::collections::BTreeMap;

/// One counter: its current value, its peak, and the totals added and removed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stat {
    /// The value now.
    pub current: i64,
    /// The highest value since the last peak reset.
    pub peak: i64,
    /// Everything ever added (since the last accumulated reset).
    pub allocated: i64,
    /// Everything ever removed (since the last accumulated reset).
    pub freed: i64,
}

impl Stat {
    /// Adds `n`. The accumulated `allocated` saturates at `i64::MAX`
    /// instead of wrapping negative (a long run can pass 2^63 bytes in all),
    /// and so does `current` (the allocator's never gets there: the reserved
    /// bytes stay below it; a caller's own counter may).
    #[inline]
    pub fn increase(&mut self, n: i64) {
        self.current = self.current.saturating_add(n);
        self.allocated = self.allocated.saturating_add(n);
        if self.current > self.peak {
            self.peak = self.current;
        }
    }

    /// Removes `n`; the accumulated `freed` and `current` saturate as in
    /// [`increase`](Self::increase).
    #[inline]
    pub fn decrease(&mut self, n: i64) {
        self.current = self.current.saturating_sub(n);
        self.freed = self.freed.saturating_add(n);
    }

    /// [`increase`](Self::increase) by an amount that is never negative (a
    /// count, or a size: sizes stay below 2^63, as the reserved bytes do),
    /// whose saturation needs no test of its sign.
    #[inline]
    pub(crate) fn increase_by(&mut self, n: u64) {
        debug_assert!(n <= i64::MAX as u64);
        let n = n as i64;
        self.current += n;
        self.allocated = self.allocated.checked_add(n).unwrap_or(i64::MAX);
        if self.current > self.peak {
            self.peak = self.current;
        }
    }

    /// [`decrease`](Self::decrease) by an amount that is never negative.
    #[inline]
    pub(crate) fn decrease_by(&mut self, n: u64) {
        debug_assert!(n <= i64::MAX as u64);
        let n = n as i64;
        self.current -= n;
        self.freed = self.freed.checked_add(n).unwrap_or(i64::MAX);
    }

    /// Takes back a [`decrease`](Self::decrease) by `n` whose removal did
    /// not happen after all (a backend refused to free what was counted as
    /// freed): `current` and `freed` as they were, so the totals count
    /// nothing twice. The peak is raised if a reset came in between.
    pub(crate) fn undo_decrease(&mut self, n: i64) {
        self.current += n;
        self.freed = (self.freed - n).max(0);
        self.peak = self.peak.max(self.current);
    }

    fn reset_peak(&mut self) {
        self.peak = self.current;
    }

    fn reset_accumulated(&mut self) {
        self.allocated = 0;
        self.freed = 0;
    }
}

/// Which pool a statistic is about; `All` is the sum of the other two.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StatType {
    /// Both pools together.
    All = 0,
    /// Blocks of at most 1 MiB.
    SmallPool = 1,
    /// Blocks above 1 MiB.
    LargePool = 2,
}

impl StatType {
    /// The three types in PyTorch's order.
    pub const ALL: [StatType; 3] = [StatType::All, StatType::SmallPool, StatType::LargePool];

    /// The name used in keys.
    pub fn name(self) -> &'static str {
        match self {
            StatType::All => "all",
            StatType::SmallPool => "small_pool",
            StatType::LargePool => "large_pool",
        }
    }
}

/// A stat kept for all / small_pool / large_pool.
///
/// Only the two pools' stats are kept, and the aggregate's peak: the
/// aggregate's current value and totals are the pools' sums (PyTorch adds
/// every change to both), formed when read, so an update touches one pool's
/// stat and, on an increase, the aggregate's peak.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StatArray {
    /// Small pool, large pool.
    pools: [Stat; 2],
    /// The aggregate's highest value since the last peak reset.
    all_peak: i64,
}

impl StatArray {
    /// A pool's slot; the aggregate has none.
    #[inline]
    fn slot(pool: StatType) -> usize {
        debug_assert!(pool != StatType::All, "a change is made to one pool");
        (pool as usize).wrapping_sub(1) & 1
    }

    /// The aggregate's value now.
    #[inline]
    fn all_current(&self) -> i64 {
        self.pools[0].current.saturating_add(self.pools[1].current)
    }

    /// Adds `n` to `pool`'s stat (and so to the aggregate). Only the
    /// allocator changes its statistics (a caller reads them): `pool` is
    /// one of the two pools, never [`StatType::All`].
    #[inline]
    pub(crate) fn increase(&mut self, pool: StatType, n: i64) {
        self.pools[Self::slot(pool)].increase(n);
        self.all_peak = self.all_peak.max(self.all_current());
    }

    /// Removes `n` from `pool`'s stat (and so from the aggregate); `pool` as
    /// in [`increase`](Self::increase).
    #[inline]
    pub(crate) fn decrease(&mut self, pool: StatType, n: i64) {
        self.pools[Self::slot(pool)].decrease(n);
    }

    /// [`increase`](Self::increase) by an amount that is never negative
    /// ([`Stat::increase_by`]).
    #[inline]
    pub(crate) fn increase_by(&mut self, pool: StatType, n: u64) {
        self.pools[Self::slot(pool)].increase_by(n);
        self.all_peak = self.all_peak.max(self.all_current());
    }

    /// [`decrease`](Self::decrease) by an amount that is never negative.
    #[inline]
    pub(crate) fn decrease_by(&mut self, pool: StatType, n: u64) {
        self.pools[Self::slot(pool)].decrease_by(n);
    }

    /// The stat for one pool type (the aggregate for [`StatType::All`]).
    #[inline]
    pub fn get(&self, t: StatType) -> Stat {
        match t {
            StatType::All => self.all(),
            _ => self.pools[Self::slot(t)],
        }
    }

    /// The aggregate: the pools' sums, with its own peak. The totals
    /// saturate at `i64::MAX` as each pool's do.
    #[inline]
    pub fn all(&self) -> Stat {
        let [a, b] = &self.pools;
        Stat {
            current: a.current.saturating_add(b.current),
            peak: self.all_peak,
            allocated: a.allocated.saturating_add(b.allocated),
            freed: a.freed.saturating_add(b.freed),
        }
    }

    fn reset_peak(&mut self) {
        self.pools.iter_mut().for_each(Stat::reset_peak);
        self.all_peak = self.all_current();
    }

    fn reset_accumulated(&mut self) {
        self.pools.iter_mut().for_each(Stat::reset_accumulated);
    }
}

/// All statistics of one device's allocator.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MemoryStats {
    /// Live allocations (count).
    pub allocation: StatArray,
    /// Segments obtained with `malloc` (expandable segments are not counted, as in PyTorch).
    pub segment: StatArray,
    /// Allocated blocks plus freed blocks still waiting for other streams' events.
    pub active: StatArray,
    /// Free pieces of split, non-expandable segments (memory `empty_cache` cannot return).
    pub inactive_split: StatArray,
    /// Bytes of live allocations (rounded block sizes).
    pub allocated_bytes: StatArray,
    /// Bytes obtained from the device: segments plus mapped expandable pages.
    pub reserved_bytes: StatArray,
    /// Bytes of active blocks.
    pub active_bytes: StatArray,
    /// Bytes of inactive split pieces.
    pub inactive_split_bytes: StatArray,
    /// Bytes the callers asked for (before rounding).
    pub requested_bytes: StatArray,
    /// Allocations of at least `max_split_size`.
    pub oversize_allocations: Stat,
    /// Segments of at least `max_split_size`.
    pub oversize_segments: Stat,
    /// Times a device allocation failed and the cache was flushed before retrying.
    pub num_alloc_retries: i64,
    /// Out-of-memory errors returned.
    pub num_ooms: i64,
    /// Requests rejected at once by `throw_on_cudamalloc_oom` (not counted
    /// in `num_ooms`).
    pub num_oom_rejections: i64,
    /// Times every outstanding event was synchronised (empty_cache, OOM retry).
    pub num_sync_all_streams: i64,
    /// Device allocations: one per `malloc`, one per map operation (however many pages).
    pub num_device_alloc: i64,
    /// Device frees: one per `free`, one per unmap operation.
    pub num_device_free: i64,
    /// The configured `max_split_size` in bytes, -1 when unlimited (`i64::MAX`
    /// for a limit beyond it: see
    /// [`AllocatorConfig::max_split_size_stat`](crate::AllocatorConfig::max_split_size_stat)).
    pub max_split_size: i64,
    /// `reserved_bytes` of each private memory pool's segments, by pool id
    /// ([`MemPool::id`](crate::MemPool::id)); the default pools have no
    /// entry, and a pool's entry goes when the pool is forgotten.
    pub reserved_bytes_by_private_pools: BTreeMap<(u64, u64), StatArray>,
}

impl MemoryStats {
    /// Peak := current for every stat.
    pub fn reset_peak(&mut self) {
        for a in self.arrays_mut() {
            a.reset_peak();
        }
        self.oversize_allocations.reset_peak();
        self.oversize_segments.reset_peak();
        for a in self.reserved_bytes_by_private_pools.values_mut() {
            a.reset_peak();
        }
    }

    /// Zeroes the accumulated totals and the event counters.
    pub fn reset_accumulated(&mut self) {
        for a in self.arrays_mut() {
            a.reset_accumulated();
        }
        self.oversize_allocations.reset_accumulated();
        self.oversize_segments.reset_accumulated();
        for a in self.reserved_bytes_by_private_pools.values_mut() {
            a.reset_accumulated();
        }
        self.num_alloc_retries = 0;
        self.num_ooms = 0;
        self.num_oom_rejections = 0;
        self.num_sync_all_streams = 0;
        self.num_device_alloc = 0;
        self.num_device_free = 0;
    }

    fn arrays(&self) -> [(&'static str, &StatArray); 9] {
        [
            ("allocation", &self.allocation),
            ("segment", &self.segment),
            ("active", &self.active),
            ("inactive_split", &self.inactive_split),
            ("allocated_bytes", &self.allocated_bytes),
            ("reserved_bytes", &self.reserved_bytes),
            ("active_bytes", &self.active_bytes),
            ("inactive_split_bytes", &self.inactive_split_bytes),
            ("requested_bytes", &self.requested_bytes),
        ]
    }

    fn arrays_mut(&mut self) -> [&mut StatArray; 9] {
        [
            &mut self.allocation,
            &mut self.segment,
            &mut self.active,
            &mut self.inactive_split,
            &mut self.allocated_bytes,
            &mut self.reserved_bytes,
            &mut self.active_bytes,
            &mut self.inactive_split_bytes,
            &mut self.requested_bytes,
        ]
    }

    /// The flat, sorted `key -> value` map of `torch.cuda.memory_stats()`.
    /// A private pool's reserved bytes are under
    /// `reserved_bytes_by_private_pools.<a>_<b>.<pool>.<metric>`, its id
    /// `(a, b)` joined with `_` as PyTorch flattens it.
    ///
    /// ```
    /// let s = strata_alloc::MemoryStats::default();
    /// let m = s.to_map();
    /// assert_eq!(m["allocated_bytes.all.current"], 0);
    /// assert!(m.contains_key("num_device_alloc"));
    /// assert!(m.contains_key("requested_bytes.large_pool.freed"));
    /// ```
    pub fn to_map(&self) -> BTreeMap<String, i64> {
        let mut m = BTreeMap::new();
        let pools = self
            .reserved_bytes_by_private_pools
            .iter()
            .map(|(&(a, b), arr)| (format!("reserved_bytes_by_private_pools.{a}_{b}"), arr));
        let arrays = self
            .arrays()
            .into_iter()
            .map(|(n, arr)| (n.to_string(), arr));
        for (name, arr) in arrays.chain(pools) {
            for t in StatType::ALL {
                let s = arr.get(t);
                for (metric, v) in [
                    ("current", s.current),
                    ("peak", s.peak),
                    ("allocated", s.allocated),
                    ("freed", s.freed),
                ] {
                    m.insert(format!("{name}.{}.{metric}", t.name()), v);
                }
            }
        }
        for (name, s) in [
            ("oversize_allocations", self.oversize_allocations),
            ("oversize_segments", self.oversize_segments),
        ] {
            m.insert(format!("{name}.current"), s.current);
            m.insert(format!("{name}.peak"), s.peak);
            m.insert(format!("{name}.allocated"), s.allocated);
            m.insert(format!("{name}.freed"), s.freed);
        }
        for (name, v) in [
            ("num_alloc_retries", self.num_alloc_retries),
            ("num_ooms", self.num_ooms),
            ("num_oom_rejections", self.num_oom_rejections),
            ("num_sync_all_streams", self.num_sync_all_streams),
            ("num_device_alloc", self.num_device_alloc),
            ("num_device_free", self.num_device_free),
            ("max_split_size", self.max_split_size),
        ] {
            m.insert(name.to_string(), v);
        }
        m
    }

    /// One value by its PyTorch key, e.g. `"reserved_bytes.all.peak"`.
    pub fn get(&self, key: &str) -> Option<i64> {
        self.to_map().get(key).copied()
    }
}

/// Times of backend calls, in microseconds (PyTorch's `host_alloc_time.*`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DurationStat {
    /// Sum of all durations.
    pub total_us: u64,
    /// Longest duration.
    pub max_us: u64,
    /// Shortest duration (0 before the first, and after a peak reset until
    /// the next).
    pub min_us: u64,
    /// Number of durations.
    pub count: u64,
}

impl DurationStat {
    /// Adds one duration of `us` microseconds. As in PyTorch's
    /// `DurationStat`, a shortest time of 0 means "none yet" (since the
    /// start or the last peak reset), so the next duration becomes the
    /// shortest.
    pub fn add(&mut self, us: u64) {
        self.min_us = if self.min_us == 0 {
            us
        } else {
            self.min_us.min(us)
        };
        self.max_us = self.max_us.max(us);
        // Saturating: a caller's durations may sum past u64.
        self.total_us = self.total_us.saturating_add(us);
        self.count = self.count.saturating_add(1);
    }

    /// Mean duration (0 before the first).
    pub fn avg_us(&self) -> u64 {
        self.total_us.checked_div(self.count).unwrap_or(0)
    }

    /// Clears the peak part, the longest and shortest durations (PyTorch's
    /// `reset_peak_host_memory_stats`).
    pub fn reset_peak(&mut self) {
        self.max_us = 0;
        self.min_us = 0;
    }

    /// Clears the accumulated part, the total and the count; the longest and
    /// shortest durations are peaks and stay (PyTorch's
    /// `reset_accumulated_host_memory_stats`).
    pub fn reset_accumulated(&mut self) {
        self.total_us = 0;
        self.count = 0;
    }
}

/// Statistics of the pinned host allocator ([`crate::pinned`]), with the meanings of PyTorch's
/// `torch.cuda.host_memory_stats()`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PinnedStats {
    /// Blocks held from the backend, in use or cached (count).
    pub allocations: Stat,
    /// Bytes of those blocks (block sizes, i.e. rounded).
    pub allocated_bytes: Stat,
    /// Blocks handed out, or freed but still waiting for their streams' events.
    pub active_requests: Stat,
    /// Bytes of those blocks.
    pub active_bytes: Stat,
    /// Backend allocations (`cuMemHostAlloc`) made.
    pub num_host_alloc: u64,
    /// Backend frees (`cuMemFreeHost`) made.
    pub num_host_free: u64,
    /// Durations of backend allocations.
    pub host_alloc_time: DurationStat,
    /// Durations of backend frees.
    pub host_free_time: DurationStat,
}

impl PinnedStats {
    /// The statistics under PyTorch's keys (`allocations.current`,
    /// `active_bytes.peak`, `num_host_alloc`, `host_alloc_time.avg`, …).
    pub fn to_map(&self) -> BTreeMap<String, i64> {
        let mut m = BTreeMap::new();
        for (name, s) in [
            ("allocations", &self.allocations),
            ("allocated_bytes", &self.allocated_bytes),
            ("active_requests", &self.active_requests),
            ("active_bytes", &self.active_bytes),
        ] {
            m.insert(format!("{name}.current"), s.current);
            m.insert(format!("{name}.peak"), s.peak);
            m.insert(format!("{name}.allocated"), s.allocated);
            m.insert(format!("{name}.freed"), s.freed);
        }
        m.insert("num_host_alloc".into(), self.num_host_alloc as i64);
        m.insert("num_host_free".into(), self.num_host_free as i64);
        for (name, d) in [
            ("host_alloc_time", &self.host_alloc_time),
            ("host_free_time", &self.host_free_time),
        ] {
            m.insert(format!("{name}.total"), d.total_us as i64);
            m.insert(format!("{name}.max"), d.max_us as i64);
            m.insert(format!("{name}.min"), d.min_us as i64);
            m.insert(format!("{name}.count"), d.count as i64);
            m.insert(format!("{name}.avg"), d.avg_us() as i64);
        }
        m
    }

    /// Sets every peak to the current value, and clears the longest and
    /// shortest call times (the next call sets both again).
    pub fn reset_peak(&mut self) {
        for s in self.stats_mut() {
            s.reset_peak();
        }
        self.host_alloc_time.reset_peak();
        self.host_free_time.reset_peak();
    }

    /// Zeroes the accumulated totals, the call counts and the call times'
    /// totals and counts (their longest and shortest stay, as in PyTorch).
    pub fn reset_accumulated(&mut self) {
        for s in self.stats_mut() {
            s.reset_accumulated();
        }
        self.num_host_alloc = 0;
        self.num_host_free = 0;
        self.host_alloc_time.reset_accumulated();
        self.host_free_time.reset_accumulated();
    }

    fn stats_mut(&mut self) -> [&mut Stat; 4] {
        [
            &mut self.allocations,
            &mut self.allocated_bytes,
            &mut self.active_requests,
            &mut self.active_bytes,
        ]
    }
}

/// Formats a byte count as PyTorch's `format_size` does (`"2.00 MiB"`).
pub fn format_size(bytes: u64) -> String {
    const KIB: f64 = 1024.0;
    let b = bytes as f64;
    if bytes <= 1024 {
        format!("{bytes} bytes")
    } else if b <= KIB * KIB {
        format!("{:.2} KiB", b / KIB)
    } else if b <= KIB * KIB * KIB {
        format!("{:.2} MiB", b / (KIB * KIB))
    } else {
        format!("{:.2} GiB", b / (KIB * KIB * KIB))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_tracks_peak_and_totals() {
        let mut s = Stat::default();
        s.increase(10);
        s.increase(5);
        s.decrease(12);
        assert_eq!((s.current, s.peak, s.allocated, s.freed), (3, 15, 15, 12));
        s.reset_peak();
        assert_eq!(s.peak, 3);
        s.reset_accumulated();
        assert_eq!((s.allocated, s.freed, s.current), (0, 0, 3));
    }

    #[test]
    fn map_has_pytorch_keys() {
        let mut st = MemoryStats::default();
        st.allocated_bytes.increase(StatType::SmallPool, 512);
        let m = st.to_map();
        assert_eq!(m["allocated_bytes.all.current"], 512);
        assert_eq!(m["allocated_bytes.small_pool.peak"], 512);
        assert_eq!(m["allocated_bytes.large_pool.current"], 0);
        // 9 arrays x 3 pools x 4 metrics + 2 x 4 oversize + 7 scalars (PyTorch
        // 2.12 added num_oom_rejections to 2.11's six)
        assert_eq!(m.len(), 9 * 3 * 4 + 8 + 7);
        assert_eq!(m["num_oom_rejections"], 0);
    }

    #[test]
    fn the_aggregate_of_two_pools_saturates() {
        // Session 58's hostile sweep: the aggregate summed its two pools
        // unchecked (wrapped negative in a release build).
        let mut m = MemoryStats::default();
        m.allocated_bytes.increase(StatType::SmallPool, i64::MAX);
        m.allocated_bytes.increase(StatType::LargePool, i64::MAX);
        let all = m.allocated_bytes.get(StatType::All);
        assert_eq!(
            (all.current, all.peak, all.allocated),
            (i64::MAX, i64::MAX, i64::MAX)
        );
        assert_eq!(m.allocated_bytes.get(StatType::SmallPool).current, i64::MAX);
        assert_eq!(m.to_map()["allocated_bytes.all.current"], i64::MAX);
    }

    #[test]
    fn sizes_format_like_pytorch() {
        assert_eq!(format_size(300), "300 bytes");
        assert_eq!(format_size(2 << 20), "2.00 MiB");
        assert_eq!(format_size(3 << 30), "3.00 GiB");
    }
}
