//! Allocation traces (`../shared/traces/README.md`'s format: events
//! `[action, address, size, stream]`) turned into a replayable sequence of
//! operations on dense slots, read exactly as PyTorch's replay anchor
//! (`torch_bench.py`, `to_ops`) reads them, so that strata and PyTorch replay
//! the same work from any trace:
//!
//! * an `alloc` of 0 bytes is no operation;
//! * a `free_completed` of an address the trace never allocated (a recording
//!   that began after the process did) is skipped;
//! * an address allocated again while live (an event the recording lost)
//!   leaves the earlier block live to the end of the pass.
//!
//! The other actions of the format (`free_requested` and the segment events)
//! are not operations; `segment_alloc` events are kept (the addresses
//! PyTorch's device handed out), and so are the places where the recording
//! released cached memory ([`TraceOps::releases`]). An action the format does
//! not name is skipped and counted ([`TraceOps::unknown_actions`]), so that a
//! reader can say so rather than replay less than the file holds unnoticed.
//!
//! ```
//! use strata_alloc::trace::{TraceOp, TraceOps};
//! let t = TraceOps::from_events([
//!     ("free_completed", 64, 512, 0), // never allocated: skipped
//!     ("alloc", 128, 1000, 0),
//!     ("alloc", 256, 0, 0), // 0 bytes: no operation
//!     ("free_completed", 128, 1000, 0),
//! ]);
//! assert_eq!(t.ops, [TraceOp::Alloc { slot: 0, size: 1000, stream: 0 }, TraceOp::Free { slot: 0 }]);
//! assert_eq!(t.unknown_frees, 1);
//! assert_eq!(t.unknown_actions, 0);
//!
//! // The workload's `empty_cache()`, after its free: before operation 2.
//! let t = TraceOps::from_events([
//!     ("alloc", 128, 1000, 0),
//!     ("free_completed", 128, 1000, 0),
//!     ("segment_free", 128, 2 << 20, 0),
//!     ("alloc", 128, 1000, 0),
//! ]);
//! assert_eq!(t.releases, [2]);
//! ```

use std::collections::HashMap;

/// Every action of the format, in the README's order; an event with any
/// other is skipped and counted ([`TraceOps::unknown_actions`]).
pub const ACTIONS: [&str; 7] = [
    "alloc",
    "free_requested",
    "free_completed",
    "segment_alloc",
    "segment_free",
    "segment_map",
    "segment_unmap",
];

/// One replayed operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TraceOp {
    /// Allocate into a slot.
    Alloc {
        /// The slot that holds the allocation until its free.
        slot: u32,
        /// The bytes asked for (before rounding).
        size: u64,
        /// The trace's stream, as an index into [`TraceOps::streams`].
        stream: u32,
    },
    /// Free what a slot holds.
    Free {
        /// The slot.
        slot: u32,
    },
}

/// A trace's operations, on dense slots (a slot is reused once freed).
#[derive(Clone, Debug, Default)]
pub struct TraceOps {
    /// The operations, in order.
    pub ops: Vec<TraceOp>,
    /// How many slots the operations use.
    pub slots: usize,
    /// The trace's stream values, in order of first appearance (index = the
    /// `stream` of [`TraceOp::Alloc`]).
    pub streams: Vec<u64>,
    /// The `segment_alloc` events, `(address, size)`, in order.
    pub segments: Vec<(u64, u64)>,
    /// Where the recorded allocator gave cached memory back to the device:
    /// for each run of `segment_free` / `segment_unmap` events, the index in
    /// [`ops`](Self::ops) of the operation that came next (`ops.len()` at the
    /// end). A workload's `torch.cuda.empty_cache()` shows so, and so does
    /// PyTorch's release of its cache before retrying an allocation that
    /// failed. PyTorch's replay anchor leaves them out (it replays
    /// allocations and frees only); a replay that reproduces PyTorch's
    /// reserved memory calls `empty_cache` there.
    pub releases: Vec<usize>,
    /// Frees of addresses the trace never allocated (skipped).
    pub unknown_frees: u64,
    /// Allocations of an address that was still live (the earlier block
    /// stays live to the end of the pass).
    pub realloc_live: u64,
    /// Events whose action is none of the format's (skipped).
    pub unknown_actions: u64,
    /// The first action counted in [`unknown_actions`](Self::unknown_actions).
    pub first_unknown_action: Option<String>,
}

impl TraceOps {
    /// Reads `events` (`(action, address, size, stream)`) as the module
    /// describes.
    pub fn from_events<'a>(events: impl IntoIterator<Item = (&'a str, u64, u64, u64)>) -> Self {
        let mut t = TraceOps::default();
        let mut live: HashMap<u64, u32> = HashMap::new();
        let mut vacant: Vec<u32> = Vec::new();
        // A stream value's index in `t.streams`: a hash lookup, not a scan
        // of the streams seen, so that a trace of many distinct stream
        // values (a garbled field) is read in linear time.
        let mut stream_index: HashMap<u64, u32> = HashMap::new();
        for (action, addr, size, stream) in events {
            match action {
                "alloc" if size > 0 => {
                    let slot = vacant.pop().unwrap_or_else(|| {
                        t.slots += 1;
                        (t.slots - 1) as u32
                    });
                    if live.insert(addr, slot).is_some() {
                        t.realloc_live += 1;
                    }
                    let s = *stream_index.entry(stream).or_insert_with(|| {
                        t.streams.push(stream);
                        (t.streams.len() - 1) as u32
                    });
                    t.ops.push(TraceOp::Alloc {
                        slot,
                        size,
                        stream: s,
                    });
                }
                "free_completed" => match live.remove(&addr) {
                    Some(slot) => {
                        vacant.push(slot);
                        t.ops.push(TraceOp::Free { slot });
                    }
                    None => t.unknown_frees += 1,
                },
                "segment_alloc" => t.segments.push((addr, size)),
                // One release per run of such events.
                "segment_free" | "segment_unmap" => {
                    if t.releases.last() != Some(&t.ops.len()) {
                        t.releases.push(t.ops.len());
                    }
                }
                // An allocation of 0 bytes; the other events of the format.
                known if ACTIONS.contains(&known) => {}
                other => {
                    t.unknown_actions += 1;
                    if t.first_unknown_action.is_none() {
                        t.first_unknown_action = Some(other.to_string());
                    }
                }
            }
        }
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn actions_the_format_does_not_name_are_counted_and_skipped() {
        let t = TraceOps::from_events([
            ("alloc", 128, 1000, 0),
            ("free_requested", 128, 1000, 0),
            ("segment_map", 0, 2 << 20, 0),
            ("alloc", 512, 0, 0),
            ("free", 128, 1000, 0),
            ("Alloc", 256, 64, 0),
            ("free_completed", 128, 1000, 0),
        ]);
        assert_eq!(
            t.ops,
            [
                TraceOp::Alloc {
                    slot: 0,
                    size: 1000,
                    stream: 0
                },
                TraceOp::Free { slot: 0 }
            ]
        );
        assert_eq!(t.unknown_actions, 2);
        assert_eq!(t.first_unknown_action.as_deref(), Some("free"));
        assert_eq!(t.unknown_frees, 0);
    }

    #[test]
    fn the_formats_own_actions_are_not_unknown() {
        let t = TraceOps::from_events([
            ("segment_alloc", 0, 2 << 20, 0),
            ("alloc", 0, 512, 0),
            ("free_requested", 0, 512, 0),
            ("free_completed", 0, 512, 0),
            ("segment_map", 0, 2 << 20, 0),
            ("segment_unmap", 0, 2 << 20, 0),
            ("segment_free", 0, 2 << 20, 0),
        ]);
        assert_eq!(t.unknown_actions, 0);
        assert_eq!(t.first_unknown_action, None);
        assert_eq!(t.releases, [2]);
        assert_eq!(t.segments, [(0, 2 << 20)]);
    }
}
