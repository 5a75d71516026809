//! Memory over time, aggregated into a fixed number of time buckets so that a
//! history of a million events draws as a few hundred points.
//!
//! Live bytes are counted per call site in the callers' sizes, from `alloc` to
//! `free_completed`; reserved bytes from the segment events. Figures from
//! before the recorded window (allocations made before history was on, or
//! events the ring buffer dropped) are reconstructed backwards from the state
//! at the end, so the last sample equals the allocator's state now.

use crate::history::{Action, CallSite, TraceEntry};
use crate::state::State;
use std::collections::HashMap;

/// One series: a call site's live bytes at the end of each bucket.
pub(crate) struct Series {
    pub site: Option<CallSite>,
    pub values: Vec<u64>,
}

/// The aggregated timeline.
pub(crate) struct Timeline {
    /// The time (µs since recording started) at the end of each bucket.
    pub times: Vec<u64>,
    /// Live bytes by call site, the sites holding the most at their peak first;
    /// the rest merged into one series with `site: None` at the end.
    pub series: Vec<Series>,
    /// Reserved bytes at the end of each bucket.
    pub reserved: Vec<u64>,
    /// The highest live total within each bucket (peaks between samples).
    pub peak: Vec<u64>,
    /// Events aggregated.
    pub events: usize,
}

/// Aggregates the history into at most `buckets` buckets, keeping `top` call
/// sites apart. `reserved_now` is the allocator's reserved bytes now.
pub(crate) fn aggregate(st: &State, reserved_now: u64, buckets: usize, top: usize) -> Timeline {
    let entries: Vec<TraceEntry> = st.history.iter().collect();
    let n = entries.len();
    // Site indices, and each site's net change over the window.
    let mut index: HashMap<Option<CallSite>, usize> = HashMap::new();
    let mut sites: Vec<Option<CallSite>> = Vec::new();
    let mut net: Vec<i64> = Vec::new();
    let mut reserved_net: i64 = 0;
    let mut idx_of = |site: Option<CallSite>, sites: &mut Vec<Option<CallSite>>| -> usize {
        *index.entry(site).or_insert_with(|| {
            sites.push(site);
            sites.len() - 1
        })
    };
    let mut deltas: Vec<(usize, i64)> = Vec::with_capacity(n);
    // The call site of the last allocation at each address: a free recorded
    // without one (`HistoryContext::Alloc`) counts against it.
    let mut alloc_site: HashMap<u64, Option<CallSite>> = HashMap::new();
    for e in &entries {
        let d = match e.action {
            Action::Alloc => {
                alloc_site.insert(e.addr, e.site);
                (idx_of(e.site, &mut sites), e.size as i64)
            }
            Action::FreeCompleted => {
                let site = e
                    .site
                    .or_else(|| alloc_site.get(&e.addr).copied().flatten());
                (idx_of(site, &mut sites), -(e.size as i64))
            }
            Action::SegmentAlloc | Action::SegmentMap => (usize::MAX, e.size as i64),
            Action::SegmentFree | Action::SegmentUnmap => (usize::MAX, -(e.size as i64)),
            _ => (usize::MAX - 1, 0),
        };
        if d.0 == usize::MAX {
            reserved_net += d.1;
        } else if d.0 < usize::MAX - 1 {
            if net.len() <= d.0 {
                net.resize(d.0 + 1, 0);
            }
            net[d.0] += d.1;
        }
        deltas.push(d);
    }
    // Starting values: now minus the net change.
    let mut now: HashMap<Option<CallSite>, i64> = HashMap::new();
    for l in st.recorded_live() {
        *now.entry(l.site()).or_default() += l.size as i64;
    }
    for (site, _) in now.clone() {
        idx_of(site, &mut sites);
    }
    net.resize(sites.len(), 0);
    let mut cur: Vec<i64> = sites
        .iter()
        .zip(&net)
        .map(|(s, d)| (now.get(s).copied().unwrap_or(0) - d).max(0))
        .collect();
    let mut reserved = (reserved_now as i64 - reserved_net).max(0);

    let buckets = buckets.max(1).min(n.max(1));
    let (t0, t1) = match (entries.first(), entries.last()) {
        (Some(a), Some(b)) => (a.time_us, b.time_us.max(a.time_us + 1)),
        _ => (0, 1),
    };
    let span = t1 - t0;
    let mut times = Vec::with_capacity(buckets);
    let mut samples: Vec<Vec<u64>> = vec![Vec::with_capacity(buckets); sites.len()];
    let mut reserved_s = Vec::with_capacity(buckets);
    let mut peak = Vec::with_capacity(buckets);
    let mut total: i64 = cur.iter().sum();
    let mut i = 0;
    for b in 0..buckets {
        let end = t0 + span * (b as u64 + 1) / buckets as u64;
        let mut hi = total;
        while i < n && (entries[i].time_us <= end || b == buckets - 1) {
            let (s, d) = deltas[i];
            if s == usize::MAX {
                reserved += d;
            } else if s < usize::MAX - 1 {
                cur[s] += d;
                total += d;
                hi = hi.max(total);
            }
            i += 1;
        }
        times.push(end - t0);
        for (k, v) in cur.iter().enumerate() {
            samples[k].push((*v).max(0) as u64);
        }
        reserved_s.push(reserved.max(0) as u64);
        peak.push(hi.max(0) as u64);
    }
    // The top sites by their highest sample; the rest merged.
    let mut order: Vec<usize> = (0..sites.len()).collect();
    let maxes: Vec<u64> = samples
        .iter()
        .map(|v| v.iter().copied().max().unwrap_or(0))
        .collect();
    let max_of = |k: usize| maxes[k];
    order.sort_by_key(|&k| std::cmp::Reverse((max_of(k), sites[k])));
    let mut series: Vec<Series> = Vec::new();
    let mut other = vec![0u64; buckets];
    let mut has_other = false;
    for (rank, k) in order.into_iter().enumerate() {
        if max_of(k) == 0 {
            continue;
        }
        if rank < top && sites[k].is_some() {
            series.push(Series {
                site: sites[k],
                values: std::mem::take(&mut samples[k]),
            });
        } else {
            has_other = true;
            for (o, v) in other.iter_mut().zip(&samples[k]) {
                *o += v;
            }
        }
    }
    if has_other {
        series.push(Series {
            site: None,
            values: other,
        });
    }
    Timeline {
        times,
        series,
        reserved: reserved_s,
        peak,
        events: n,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::sim::SimDriver;
    use crate::history::{HistoryContext, HistoryOptions};
    use crate::{AllocatorConfig, CachingAllocator, StreamId};
    use std::sync::Arc;

    /// With `HistoryContext::Alloc` the frees carry no call site: they still
    /// count against their allocation's site, which ends at 0 bytes, and no
    /// series of unknown sites goes negative (clamped) or appears.
    #[test]
    fn frees_without_a_call_site_count_against_their_allocation() {
        for context in [HistoryContext::Alloc, HistoryContext::All] {
            let a = CachingAllocator::new(Arc::new(SimDriver::h100()), AllocatorConfig::default());
            a.record_history_opts(&HistoryOptions::new(1000).context(context));
            let mut kept = Vec::new();
            for i in 0..8u64 {
                let x = a.allocate((i + 1) << 20, StreamId::DEFAULT).unwrap();
                if i % 2 == 0 {
                    kept.push(x);
                }
            }
            let t = a.with_state(|st| aggregate(st, st.reserved(), 4, 8));
            assert_eq!(t.series.len(), 1, "{context:?}: one call site");
            let s = &t.series[0];
            assert_eq!(s.site.unwrap().file, file!());
            // Sizes 1, 3, 5 and 7 MiB are still live at the end.
            assert_eq!(*s.values.last().unwrap(), 16 << 20, "{context:?}");
            drop(kept);
        }
    }
}
