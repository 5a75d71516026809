//! Snapshots in PyTorch's format: the pickle `torch.cuda.memory._dump_snapshot`
//! writes, so `python -m torch.cuda._memory_viz` and PyTorch's memory_viz page
//! open strata's snapshots.
//!
//! The document is a dict with `segments` (each with its `blocks` and their
//! `frames`), `device_traces` (one list of trace events per device ordinal),
//! `allocator_settings` and `external_annotations`, with the keys PyTorch 2.11
//! writes. A frame is the call site recorded for an allocation (file, line;
//! the column in its name), or the frames of its backtrace when history was
//! recorded with [`HistoryLevel::Backtraces`](crate::HistoryLevel).

use crate::driver::Device;
use crate::history::{backtrace_frames, Action, CallSite, History, TraceEntry};
use crate::snapshot::{segments, BlockState};
use crate::state::State;
use serde::Serialize;

/// A frame (PyTorch's keys).
#[derive(Serialize)]
struct FrameOut {
    name: String,
    filename: String,
    line: u32,
}

#[derive(Serialize)]
struct BlockOut {
    address: u64,
    size: u64,
    requested_size: u64,
    state: &'static str,
    frames: Vec<FrameOut>,
}

#[derive(Serialize)]
struct SegmentOut {
    device: u64,
    address: u64,
    total_size: u64,
    allocated_size: u64,
    active_size: u64,
    requested_size: u64,
    stream: u64,
    segment_type: &'static str,
    segment_pool_id: (u64, u64),
    is_expandable: bool,
    frames: Vec<FrameOut>,
    blocks: Vec<BlockOut>,
}

/// A trace event (PyTorch's keys). As in PyTorch's
/// `memory_snapshot.cpp`, an `oom` event's address field (the free device
/// memory) is named `device_free`, every other event's `addr`.
#[derive(Serialize)]
struct EventOut {
    action: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    addr: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    device_free: Option<u64>,
    size: u64,
    stream: u64,
    time_us: u64,
    frames: SiteFrames,
    compile_context: &'static str,
    user_metadata: String,
}

/// Zero or one frame made from a call site (whose file name is static).
struct SiteFrames(Option<CallSite>);

#[derive(Serialize)]
struct SiteFrame<'a> {
    name: &'static str,
    filename: &'a str,
    line: u32,
}

impl Serialize for SiteFrames {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        let mut seq = s.serialize_seq(Some(self.0.is_some() as usize))?;
        if let Some(c) = &self.0 {
            seq.serialize_element(&SiteFrame {
                name: "",
                filename: c.file,
                line: c.line,
            })?;
        }
        seq.end()
    }
}

/// A device's trace, serialised straight from the history's ring buffer
/// (an empty list for devices without one).
struct TraceOut<'a>(Option<&'a History>);

impl Serialize for TraceOut<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.into_iter().flat_map(|h| h.iter()).map(|e| event(&e)))
    }
}

/// `device_traces`: an empty trace for each ordinal below the device's,
/// then the device's own (written as they are serialised, not gathered).
struct TracesOut<'a> {
    ordinal: usize,
    history: &'a History,
}

impl Serialize for TracesOut<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let others = (0..self.ordinal).map(|_| TraceOut(None));
        s.collect_seq(others.chain([TraceOut(Some(self.history))]))
    }
}

/// The largest device ordinal PyTorch's snapshot format holds: its device
/// index (`c10::DeviceIndex`) is an `int8_t`.
pub(crate) const MAX_ORDINAL: usize = i8::MAX as usize;

/// Fails unless `device`'s ordinal fits PyTorch's snapshot format
/// ([`MAX_ORDINAL`]); `what` names the call refused.
pub(crate) fn check_ordinal(device: Device, what: &'static str) -> Result<(), crate::AllocError> {
    if ordinal(device) > MAX_ORDINAL {
        return Err(crate::AllocError::DeviceOrdinalTooLarge { what, device });
    }
    Ok(())
}

/// The allocator settings, with the keys and value types of PyTorch's
/// `memory_snapshot.cpp`: `roundup_power2_divisions` is a dict from each
/// interval's start in MiB (`"1"`, `"2"`, `"4"`, … `"32768"`) to its
/// division count.
#[derive(Serialize)]
struct SettingsOut {
    #[serde(rename = "PYTORCH_CUDA_ALLOC_CONF")]
    conf: String,
    max_split_size: i64,
    garbage_collection_threshold: f64,
    expandable_segments: bool,
    pinned_num_register_threads: i64,
    release_lock_on_cudamalloc: bool,
    pinned_use_cuda_host_register: bool,
    graph_capture_record_stream_reuse: bool,
    /// `pinned_max_round_threshold_mb` in bytes, -1 when unlimited
    /// (PyTorch 2.15 writes `AcceleratorAllocatorConfig`'s `size_t`, whose
    /// unlimited `SIZE_MAX` reads -1).
    max_round_threshold: i64,
    /// `pinned_max_cached_size_mb` in bytes, -1 when unlimited.
    max_cached_size: i64,
    roundup_power2_divisions: std::collections::BTreeMap<String, i64>,
}

/// The snapshot document (PyTorch's top-level keys).
#[derive(Serialize)]
pub(crate) struct Document<'a> {
    segments: Vec<SegmentOut>,
    device_traces: TracesOut<'a>,
    allocator_settings: SettingsOut,
    external_annotations: Vec<u8>,
}

/// A byte limit as PyTorch's snapshot writes its `size_t` settings: -1
/// for unlimited (`SIZE_MAX`), the bytes otherwise, and `i64::MAX` rather
/// than a wrapped negative figure for a limit beyond it.
fn size_setting(bytes: u64) -> i64 {
    if bytes == u64::MAX {
        -1
    } else {
        i64::try_from(bytes).unwrap_or(i64::MAX)
    }
}

fn site_frames(site: Option<CallSite>) -> Vec<FrameOut> {
    site.map(|c| FrameOut {
        name: String::new(),
        filename: c.file.to_string(),
        line: c.line,
    })
    .into_iter()
    .collect()
}

/// The frames of the live allocation at `addr`: its backtrace (innermost
/// first, at most 64 frames) when one was captured, else its call site.
fn block_frames(h: &History, addr: u64, site: Option<CallSite>) -> Vec<FrameOut> {
    if let Some(bt) = h.backtraces.get(&addr) {
        let frames: Vec<FrameOut> = backtrace_frames(bt)
            .into_iter()
            .take(64)
            .map(|f| FrameOut {
                name: f.name,
                filename: f.filename,
                line: f.line,
            })
            .collect();
        if !frames.is_empty() {
            return frames;
        }
    }
    site_frames(site)
}

fn event(e: &TraceEntry) -> EventOut {
    EventOut {
        action: e.action.name(),
        addr: (e.action != Action::Oom).then_some(e.addr),
        device_free: (e.action == Action::Oom).then_some(e.addr),
        size: e.size,
        stream: e.stream.0,
        time_us: e.time_us,
        frames: SiteFrames(e.site),
        compile_context: "N/A",
        user_metadata: e.user_metadata.as_deref().unwrap_or("").to_string(),
    }
}

/// The device's ordinal in `device_traces` (the CPU's traces go in slot 0).
fn ordinal(device: Device) -> usize {
    match device {
        Device::Cuda(n) => n,
        _ => 0,
    }
}

/// The snapshot document of an allocator's state.
pub(crate) fn document(st: &State, device: Device) -> Document<'_> {
    let dev = ordinal(device);
    let h = &st.history;
    let segs: Vec<SegmentOut> = segments(st)
        .into_iter()
        .map(|g| {
            let blocks = g
                .blocks
                .iter()
                .map(|b| BlockOut {
                    address: b.address,
                    size: b.size,
                    requested_size: b.requested_size,
                    state: b.state.name(),
                    frames: if b.state == BlockState::Inactive {
                        Vec::new()
                    } else {
                        block_frames(h, b.address, b.site)
                    },
                })
                .collect();
            SegmentOut {
                device: dev as u64,
                address: g.address,
                total_size: g.total_size,
                allocated_size: g.allocated_size,
                active_size: g.active_size,
                requested_size: g.requested_size,
                stream: g.stream.0,
                segment_type: g.segment_type,
                segment_pool_id: g.pool_id,
                is_expandable: g.is_expandable,
                frames: site_frames(g.site),
                blocks,
            }
        })
        .collect();
    // One trace per device ordinal up to this one; the others are empty.
    let traces = TracesOut {
        ordinal: dev,
        history: h,
    };
    let c = &st.settings.config;
    Document {
        segments: segs,
        device_traces: traces,
        allocator_settings: SettingsOut {
            // PyTorch writes the last settings string, empty when none was
            // set; strata's canonical form of the defaults is empty too (its
            // `Display` word "default" is no configuration string).
            conf: if *c == crate::AllocatorConfig::default() {
                String::new()
            } else {
                c.to_string()
            },
            max_split_size: c.max_split_size_stat(),
            garbage_collection_threshold: c.garbage_collection_threshold.unwrap_or(0.0),
            expandable_segments: st.settings.expandable,
            pinned_num_register_threads: i64::try_from(c.pinned_num_register_threads)
                .unwrap_or(i64::MAX),
            release_lock_on_cudamalloc: c.release_lock_on_cudamalloc,
            pinned_use_cuda_host_register: c.pinned_use_cuda_host_register,
            graph_capture_record_stream_reuse: c.graph_capture_record_stream_reuse,
            max_round_threshold: size_setting(c.pinned_max_round_threshold),
            max_cached_size: size_setting(c.pinned_max_cached_size),
            roundup_power2_divisions: c
                .roundup_power2_divisions
                .iter()
                .enumerate()
                .map(|(i, &d)| {
                    (
                        (1u64 << i).to_string(),
                        i64::try_from(d).unwrap_or(i64::MAX),
                    )
                })
                .collect(),
        },
        external_annotations: Vec::new(),
    }
}

/// The document encoded as a pickle (protocol 3, as PyTorch's files).
pub(crate) fn encode(doc: &Document<'_>) -> Result<Vec<u8>, serde_pickle::Error> {
    serde_pickle::to_vec(doc, serde_pickle::SerOptions::new())
}
