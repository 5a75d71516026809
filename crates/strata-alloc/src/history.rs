//! Memory history: a bounded record of what the allocator did, in the format of
//! the allocation traces strata is measured on (`../shared/traces`), so a
//! recording of your own program can be inspected, or replayed through the
//! `replay` example under another configuration.
//!
//! Recording is off by default and costs one branch per operation when off.
//! When on, entries go into a ring buffer allocated up front (the oldest entry
//! is dropped once it is full), so the cache-hit path still allocates nothing.
//!
//! ```
//! use std::sync::Arc;
//! use strata_alloc::{AllocatorConfig, CachingAllocator, StreamId};
//! use strata_alloc::driver::sim::SimDriver;
//! use strata_alloc::history::Action;
//!
//! let a = CachingAllocator::new(Arc::new(SimDriver::h100()), AllocatorConfig::default());
//! a.record_history(Some(1000));
//! let x = a.allocate(4096, StreamId::DEFAULT).unwrap();
//! drop(x);
//! let h = a.history();
//! assert!(h.iter().any(|e| e.action == Action::Alloc && e.size == 4096));
//! assert!(h.iter().any(|e| e.action == Action::FreeCompleted));
//! let json = a.history_json("my_program");
//! assert!(json.contains("\"events\""));
//! ```

use crate::driver::StreamId;
use std::collections::VecDeque;

/// What happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// A block was handed out (`size` = the caller's size).
    Alloc,
    /// The caller freed a block (it may still wait for other streams).
    FreeRequested,
    /// The block went back to the cache.
    FreeCompleted,
    /// A segment was obtained with `malloc`.
    SegmentAlloc,
    /// A segment was returned with `free`.
    SegmentFree,
    /// Pages were mapped into an expandable segment.
    SegmentMap,
    /// Pages were unmapped from an expandable segment.
    SegmentUnmap,
    /// An allocation failed for lack of memory (`addr` = free device memory).
    Oom,
    /// A snapshot was taken (`size` = active bytes at that moment, as in
    /// PyTorch's trace).
    Snapshot,
}

impl Action {
    /// The name used in trace files (PyTorch's).
    pub fn name(self) -> &'static str {
        match self {
            Action::Alloc => "alloc",
            Action::FreeRequested => "free_requested",
            Action::FreeCompleted => "free_completed",
            Action::SegmentAlloc => "segment_alloc",
            Action::SegmentFree => "segment_free",
            Action::SegmentMap => "segment_map",
            Action::SegmentUnmap => "segment_unmap",
            Action::Oom => "oom",
            Action::Snapshot => "snapshot",
        }
    }
}

/// One recorded event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TraceEntry {
    /// What happened.
    pub action: Action,
    /// The address concerned.
    pub addr: u64,
    /// The size concerned.
    pub size: u64,
    /// The stream.
    pub stream: StreamId,
}

/// The ring buffer behind the allocator's lock.
#[derive(Default)]
pub(crate) struct History {
    entries: VecDeque<TraceEntry>,
    capacity: usize,
}

impl History {
    pub fn enabled(&self) -> bool {
        self.capacity > 0
    }

    /// Turns recording on with room for `capacity` entries (clearing what was
    /// recorded), or off with `None`.
    pub fn set(&mut self, capacity: Option<usize>) {
        self.capacity = capacity.unwrap_or(0);
        self.entries = VecDeque::with_capacity(self.capacity);
    }

    #[inline]
    pub fn push(&mut self, action: Action, addr: u64, size: u64, stream: StreamId) {
        if self.entries.len() == self.capacity {
            self.entries.pop_front();
        }
        self.entries.push_back(TraceEntry {
            action,
            addr,
            size,
            stream,
        });
    }

    pub fn entries(&self) -> Vec<TraceEntry> {
        self.entries.iter().copied().collect()
    }
}

/// A trace document in the format of `../shared/traces`.
pub(crate) fn to_json(
    workload: &str,
    mode: &str,
    entries: &[TraceEntry],
    stats: &crate::MemoryStats,
) -> String {
    let events: Vec<serde_json::Value> = entries
        .iter()
        .map(|e| serde_json::json!([e.action.name(), e.addr, e.size, e.stream.0]))
        .collect();
    let stats: serde_json::Map<String, serde_json::Value> = stats
        .to_map()
        .into_iter()
        .map(|(k, v)| (k, v.into()))
        .collect();
    serde_json::json!({
        "workload": workload,
        "mode": mode,
        "recorder": "strata",
        "stats": stats,
        "events": events,
    })
    .to_string()
}
