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
use crate::history::{backtrace_frames, CallSite, Frame, History, TraceEntry};
use crate::snapshot::{segments, BlockState};
use crate::state::State;
use serde_pickle::{HashableValue, Value};
use std::collections::BTreeMap;

fn s(v: &str) -> Value {
    Value::String(v.to_string())
}

fn int(v: u64) -> Value {
    Value::I64(v as i64)
}

struct Dict(BTreeMap<HashableValue, Value>);

impl Dict {
    fn new() -> Dict {
        Dict(BTreeMap::new())
    }
    fn set(mut self, k: &str, v: Value) -> Dict {
        self.0.insert(HashableValue::String(k.to_string()), v);
        self
    }
    fn done(self) -> Value {
        Value::Dict(self.0)
    }
}

fn frame(f: &Frame) -> Value {
    Dict::new()
        .set("name", s(&f.name))
        .set("filename", s(&f.filename))
        .set("line", int(f.line as u64))
        .done()
}

fn site_frames(site: Option<CallSite>) -> Value {
    Value::List(
        site.map(|c| {
            frame(&Frame {
                name: format!("column {}", c.column),
                filename: c.file.to_string(),
                line: c.line,
            })
        })
        .into_iter()
        .collect(),
    )
}

/// The frames of the live allocation at `addr`: its backtrace when one was
/// captured, else its call site.
fn block_frames(h: &History, addr: u64, site: Option<CallSite>) -> Value {
    if let Some(bt) = h.live.get(&addr).and_then(|l| l.backtrace.as_ref()) {
        let mut frames: Vec<Value> = backtrace_frames(bt).iter().map(frame).collect();
        if frames.is_empty() {
            return site_frames(site);
        }
        // PyTorch lists the innermost frame first, as a backtrace prints.
        frames.truncate(64);
        return Value::List(frames);
    }
    site_frames(site)
}

fn trace_event(e: &TraceEntry) -> Value {
    Dict::new()
        .set("action", s(e.action.name()))
        .set("addr", int(e.addr))
        .set("size", int(e.size))
        .set("stream", int(e.stream.0))
        .set("time_us", int(e.time_us))
        .set("frames", site_frames(e.site))
        .set("compile_context", s("N/A"))
        .set("user_metadata", s(""))
        .done()
}

/// The device's ordinal in `device_traces` (the CPU's traces go in slot 0).
fn ordinal(device: Device) -> usize {
    match device {
        Device::Cuda(n) => n,
        _ => 0,
    }
}

/// The snapshot document of an allocator's state.
pub(crate) fn document(st: &State, device: Device) -> Value {
    let dev = ordinal(device);
    let h = &st.history;
    let segs: Vec<Value> = segments(st)
        .iter()
        .map(|g| {
            let blocks: Vec<Value> = g
                .blocks
                .iter()
                .map(|b| {
                    let frames = if b.state == BlockState::Inactive {
                        Value::List(Vec::new())
                    } else {
                        block_frames(h, b.address, b.site)
                    };
                    Dict::new()
                        .set("address", int(b.address))
                        .set("size", int(b.size))
                        .set("requested_size", int(b.requested_size))
                        .set("state", s(b.state.name()))
                        .set("frames", frames)
                        .done()
                })
                .collect();
            Dict::new()
                .set("device", int(dev as u64))
                .set("address", int(g.address))
                .set("total_size", int(g.total_size))
                .set("allocated_size", int(g.allocated_size))
                .set("active_size", int(g.active_size))
                .set("requested_size", int(g.requested_size))
                .set("stream", int(g.stream.0))
                .set("segment_type", s(g.segment_type))
                .set(
                    "segment_pool_id",
                    Value::Tuple(vec![Value::I64(0), Value::I64(0)]),
                )
                .set("is_expandable", Value::Bool(g.is_expandable))
                .set("frames", Value::List(Vec::new()))
                .set("blocks", Value::List(blocks))
                .done()
        })
        .collect();
    let mut traces: Vec<Value> = (0..dev).map(|_| Value::List(Vec::new())).collect();
    traces.push(Value::List(h.iter().map(trace_event).collect()));
    let c = &st.settings.config;
    let settings = Dict::new()
        .set("PYTORCH_CUDA_ALLOC_CONF", s(&c.to_string()))
        .set(
            "max_split_size",
            Value::I64(c.max_split_size.map(|m| m as i64).unwrap_or(-1)),
        )
        .set(
            "garbage_collection_threshold",
            Value::F64(c.garbage_collection_threshold.unwrap_or(0.0)),
        )
        .set("expandable_segments", Value::Bool(st.settings.expandable))
        .set(
            "roundup_power2_divisions",
            Value::List(
                c.roundup_power2_divisions
                    .iter()
                    .map(|&d| Value::I64(d as i64))
                    .collect(),
            ),
        )
        .done();
    Dict::new()
        .set("segments", Value::List(segs))
        .set("device_traces", Value::List(traces))
        .set("allocator_settings", settings)
        .set("external_annotations", Value::List(Vec::new()))
        .done()
}

/// The document encoded as a pickle (protocol 3, as PyTorch's files).
pub(crate) fn encode(doc: &Value) -> Result<Vec<u8>, serde_pickle::Error> {
    serde_pickle::value_to_vec(doc, serde_pickle::SerOptions::new())
}
