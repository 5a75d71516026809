//! The leak finder: live allocations grouped by call site, taken at one point
//! ([`CachingAllocator::watch`]) and compared at another
//! ([`Watch::grown`]), so a loop that keeps memory alive names the line that
//! allocates it.
//!
//! ```
//! use std::sync::Arc;
//! use strata_alloc::{AllocatorConfig, CachingAllocator, StreamId};
//! use strata_alloc::driver::sim::SimDriver;
//!
//! let a = CachingAllocator::new(Arc::new(SimDriver::h100()), AllocatorConfig::default());
//! a.record_history(Some(10_000));
//! let watch = a.watch().unwrap();
//! let (mut kept, mut leak_line) = (Vec::new(), 0);
//! for _ in 0..3 {
//!     let temp = a.allocate(4096, StreamId::DEFAULT).unwrap(); // freed each step
//!     leak_line = line!() + 1;
//!     kept.push(a.allocate(1000, StreamId::DEFAULT).unwrap()); // the leak
//!     drop(temp);
//! }
//! let grown = watch.grown(&a).unwrap();
//! assert_eq!(grown.len(), 1);
//! assert_eq!((grown[0].count, grown[0].bytes), (3, 3000));
//! assert_eq!(grown[0].site.unwrap().line, leak_line); // the `kept.push` line
//! ```

use crate::allocator::CachingAllocator;
use crate::error::{AllocError, SiteUsage};
use crate::history::{backtrace_frames, CallSite, Frame};
use crate::state::State;
use std::backtrace::Backtrace;
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::Arc;

/// Live allocations by call site: `(count, bytes)`.
pub(crate) fn by_site(st: &State) -> HashMap<Option<CallSite>, (u64, u64)> {
    let mut m: HashMap<Option<CallSite>, (u64, u64)> = HashMap::new();
    for l in st.recorded_live() {
        let e = m.entry(l.site()).or_default();
        e.0 += 1;
        e.1 += l.size;
    }
    m
}

/// The `n` call sites holding the most live bytes, largest first (empty when
/// history is off).
pub(crate) fn usage_by_site(st: &State, n: usize) -> Vec<SiteUsage> {
    if !st.history.enabled() {
        return Vec::new();
    }
    let mut v: Vec<SiteUsage> = by_site(st)
        .into_iter()
        .map(|(site, (count, bytes))| SiteUsage { site, count, bytes })
        .collect();
    sort_largest_first(&mut v, |u| (u.bytes, u.count, u.site));
    v.truncate(n);
    v
}

fn sort_largest_first<T, K: Ord>(v: &mut [T], key: impl Fn(&T) -> K) {
    v.sort_by_key(|x| std::cmp::Reverse(key(x)));
}

/// Live allocations by call site at one moment (see the module's example).
#[derive(Clone, Debug)]
pub struct Watch {
    device: crate::Device,
    /// The id of the allocator the watch was taken on.
    owner: u64,
    sites: HashMap<Option<CallSite>, (u64, u64)>,
    /// The live allocations at the watch: sequence number, size, backtrace.
    live: Vec<(u64, u64, Option<Arc<Backtrace>>)>,
    /// The last allocation's sequence number at the watch.
    seq: u64,
}

/// Live bytes that grew, grouped by a frame of the allocations' backtraces
/// (see [`Watch::grown_at_frame`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FrameGrowth {
    /// The first frame the filter picked (`None`: no backtrace, or no frame
    /// picked).
    pub frame: Option<Frame>,
    /// How many more live allocations than at the watch.
    pub count: i64,
    /// How many more live bytes (the callers' sizes) than at the watch.
    pub bytes: i64,
}

/// A call site whose live allocations grew between a [`Watch`] and now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Growth {
    /// The call site (`None`: allocations made before history was on).
    pub site: Option<CallSite>,
    /// How many more live allocations than at the watch.
    pub count: i64,
    /// How many more live bytes (the callers' sizes) than at the watch.
    pub bytes: i64,
    /// Live allocations of the site now.
    pub live_count: u64,
    /// Live bytes of the site now.
    pub live_bytes: u64,
}

impl fmt::Display for Growth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.site {
            Some(s) => write!(f, "{s}")?,
            None => write!(f, "(before history was on)")?,
        }
        write!(
            f,
            ": +{} B in +{} allocation{} (now {} B in {})",
            self.bytes,
            self.count,
            if self.count == 1 { "" } else { "s" },
            self.live_bytes,
            self.live_count
        )
    }
}

/// Takes a [`Watch`] of `allocator` (see [`CachingAllocator::watch`]).
pub(crate) fn take(allocator: &CachingAllocator) -> Result<Watch, AllocError> {
    let (sites, live, seq) = allocator.with_history("watch", |st| {
        let live = st
            .recorded_live()
            .map(|l| (l.seq, l.size, l.backtrace))
            .collect();
        (by_site(st), live, st.history.seq)
    })?;
    Ok(Watch {
        device: allocator.device(),
        owner: allocator.id(),
        sites,
        live,
        seq,
    })
}

/// The `n` call sites of `allocator` holding the most live bytes (see
/// [`CachingAllocator::live_by_site`]).
pub(crate) fn live_by_site(
    allocator: &CachingAllocator,
    n: usize,
) -> Result<Vec<SiteUsage>, AllocError> {
    allocator.with_history("live_by_site", |h| usage_by_site(h, n))
}

impl Watch {
    /// Fails unless `allocator` is the one the watch was taken on: another
    /// allocator's call sites and sequence numbers compare as nonsense.
    fn check_owner(
        &self,
        allocator: &CachingAllocator,
        what: &'static str,
    ) -> Result<(), AllocError> {
        if allocator.id() == self.owner {
            Ok(())
        } else {
            Err(AllocError::ForeignWatch {
                what,
                watched: self.device,
                given: allocator.device(),
            })
        }
    }

    /// The device watched.
    pub fn device(&self) -> crate::Device {
        self.device
    }

    /// The call sites whose live bytes grew since the watch was taken, with
    /// the growth in count and bytes, largest growth first. Needs history
    /// still on (turning it off and on again forgets the call sites of earlier
    /// allocations).
    /// A watch compared with another allocator than the one it was taken
    /// on is an [`AllocError::ForeignWatch`].
    pub fn grown(&self, allocator: &CachingAllocator) -> Result<Vec<Growth>, AllocError> {
        self.check_owner(allocator, "Watch::grown")?;
        let now = allocator.with_history("Watch::grown", by_site)?;
        let mut out: Vec<Growth> = now
            .into_iter()
            .filter_map(|(site, (count, bytes))| {
                let (c0, b0) = self.sites.get(&site).copied().unwrap_or((0, 0));
                let g = Growth {
                    site,
                    count: count as i64 - c0 as i64,
                    bytes: bytes as i64 - b0 as i64,
                    live_count: count,
                    live_bytes: bytes,
                };
                (g.bytes > 0).then_some(g)
            })
            .collect();
        sort_largest_first(&mut out, |g| (g.bytes, g.count, g.site));
        Ok(out)
    }

    /// Like [`grown`](Self::grown), grouped by the first frame of each
    /// allocation's backtrace that `pick` accepts — e.g. the first frame in
    /// your own source file, however deep inside strata the allocation was
    /// made. Needs history recorded with
    /// [`HistoryLevel::Backtraces`](crate::HistoryLevel) since before the
    /// watch (allocations without a backtrace group under `None`).
    /// Backtraces are resolved here, not when recorded.
    pub fn grown_at_frame(
        &self,
        allocator: &CachingAllocator,
        pick: impl Fn(&Frame) -> bool,
    ) -> Result<Vec<FrameGrowth>, AllocError> {
        self.check_owner(allocator, "Watch::grown_at_frame")?;
        let now: Vec<(u64, u64, Option<Arc<Backtrace>>)> =
            allocator.with_history("Watch::grown_at_frame", |st| {
                st.recorded_live()
                    .map(|l| (l.seq, l.size, l.backtrace))
                    .collect()
            })?;
        let live_now: HashSet<u64> = now.iter().map(|a| a.0).collect();
        let mut resolved: HashMap<*const Backtrace, Option<Frame>> = HashMap::new();
        let mut frame_of = |bt: &Option<Arc<Backtrace>>| -> Option<Frame> {
            let bt = bt.as_ref()?;
            resolved
                .entry(Arc::as_ptr(bt))
                .or_insert_with(|| backtrace_frames(bt).into_iter().find(|f| pick(f)))
                .clone()
        };
        let mut groups: HashMap<Option<Frame>, (i64, i64)> = HashMap::new();
        // Allocated since the watch and still live: growth.
        for (seq, size, bt) in &now {
            if *seq > self.seq {
                let g = groups.entry(frame_of(bt)).or_default();
                g.0 += 1;
                g.1 += *size as i64;
            }
        }
        // Live at the watch and freed since: shrinkage.
        for (seq, size, bt) in &self.live {
            if !live_now.contains(seq) {
                let g = groups.entry(frame_of(bt)).or_default();
                g.0 -= 1;
                g.1 -= *size as i64;
            }
        }
        let mut out: Vec<FrameGrowth> = groups
            .into_iter()
            .filter(|(_, (_, bytes))| *bytes > 0)
            .map(|(frame, (count, bytes))| FrameGrowth {
                frame,
                count,
                bytes,
            })
            .collect();
        out.sort_by(|a, b| {
            (
                b.bytes,
                b.count,
                &b.frame.as_ref().map(|f| (&f.filename, f.line)),
            )
                .cmp(&(
                    a.bytes,
                    a.count,
                    &a.frame.as_ref().map(|f| (&f.filename, f.line)),
                ))
        });
        Ok(out)
    }
}
