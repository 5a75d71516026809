//! What was live when allocated memory peaked, from the allocator's recorded
//! history (`CachingAllocator::record_history`): the allocations alive at the
//! moment the sum of live allocation sizes was largest, grouped by the call
//! site that asked for them. `gpt` prints it with `STRATA_GPT_TRACE=PREFIX`.

use std::collections::HashMap;
use strata::alloc::history::{Action, TraceEntry};

/// One call site's share of the peak.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SiteShare {
    /// `file:line:column`, or `?` where no site was recorded.
    pub site: String,
    /// Bytes its live allocations asked for.
    pub bytes: u64,
    /// Its live allocations.
    pub count: usize,
    /// Sizes of its live allocations, largest first.
    pub sizes: Vec<u64>,
}

/// The peak of live requested bytes in `entries` and what made it up, the
/// largest share first. A block counts from its `alloc` to its
/// `free_requested` (or `free_completed`, whichever comes first); blocks
/// allocated before the recording started are not seen.
///
/// ```
/// use strata::alloc::history::{Action, TraceEntry};
/// use strata::alloc::StreamId;
/// use strata_examples::peak_live::live_at_peak;
/// let e = |action, addr, size| TraceEntry { action, addr, size, stream: StreamId::DEFAULT, time_us: 0, site: None, user_metadata: None };
/// let h = [e(Action::Alloc, 1, 10), e(Action::Alloc, 2, 5), e(Action::FreeRequested, 1, 10), e(Action::Alloc, 3, 7)];
/// let (peak, shares) = live_at_peak(&h);
/// assert_eq!(peak, 15);
/// assert_eq!(shares[0].sizes, vec![10, 5]);
/// ```
pub fn live_at_peak(entries: &[TraceEntry]) -> (u64, Vec<SiteShare>) {
    let mut live: HashMap<u64, usize> = HashMap::new();
    let (mut cur, mut peak, mut at) = (0u64, 0u64, None);
    for (i, e) in entries.iter().enumerate() {
        match e.action {
            Action::Alloc => {
                live.insert(e.addr, i);
                cur += e.size;
                if cur > peak {
                    (peak, at) = (cur, Some(i));
                }
            }
            Action::FreeRequested | Action::FreeCompleted => {
                if let Some(j) = live.remove(&e.addr) {
                    cur -= entries[j].size;
                }
            }
            _ => {}
        }
    }
    let Some(at) = at else {
        return (0, Vec::new());
    };
    // Replay up to the peak's allocation.
    live.clear();
    for (i, e) in entries[..=at].iter().enumerate() {
        match e.action {
            Action::Alloc => {
                live.insert(e.addr, i);
            }
            Action::FreeRequested | Action::FreeCompleted => {
                live.remove(&e.addr);
            }
            _ => {}
        }
    }
    let mut by_site: HashMap<String, SiteShare> = HashMap::new();
    for &i in live.values() {
        let e = &entries[i];
        let site = e.site.map_or_else(|| "?".to_string(), |s| s.to_string());
        let s = by_site.entry(site.clone()).or_insert(SiteShare {
            site,
            bytes: 0,
            count: 0,
            sizes: Vec::new(),
        });
        s.bytes += e.size;
        s.count += 1;
        s.sizes.push(e.size);
    }
    let mut shares: Vec<SiteShare> = by_site.into_values().collect();
    for s in &mut shares {
        s.sizes.sort_unstable_by(|a, b| b.cmp(a));
    }
    shares.sort_by(|a, b| b.bytes.cmp(&a.bytes).then_with(|| a.site.cmp(&b.site)));
    (peak, shares)
}
