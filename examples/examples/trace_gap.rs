//! Where a trace's reserved memory peaks, replayed over the simulated GPU
//! (expandable segments, 2 MiB pages, as on the H200): the operation that
//! made reserved memory grow to its peak, allocated memory then, and the free
//! blocks cached at that moment (reserved but unused: what fragmentation
//! costs). For traces written by `gpt` with `STRATA_GPT_TRACE`.
//!
//! ```text
//! cargo run --release -p strata-examples --example trace_gap -- [--conf STRING] TRACE.json
//! ```

use serde::Deserialize;
use std::collections::HashMap;
use std::process::ExitCode;
use std::sync::Arc;
use strata::alloc::driver::sim::SimDriver;
use strata::alloc::{AllocatorConfig, CachingAllocator, StreamId};

#[derive(Deserialize)]
struct TraceFile {
    events: Vec<(String, u64, u64, u64)>,
}

fn mib(b: i64) -> f64 {
    b as f64 / (1u64 << 20) as f64
}

fn run() -> Result<(), String> {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let conf = match args.iter().position(|a| a == "--conf") {
        Some(i) if i + 1 < args.len() => {
            let c = args.remove(i + 1);
            args.remove(i);
            AllocatorConfig::parse(&c).map_err(|e| e.to_string())?
        }
        _ => AllocatorConfig::default(),
    };
    let path = args
        .first()
        .ok_or("usage: trace_gap [--conf STRING] TRACE.json")?;
    let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
    let t: TraceFile = serde_json::from_str(&text).map_err(|e| format!("{path}: {e}"))?;
    let conf2 = conf.clone();
    let a = CachingAllocator::new(
        Arc::new(SimDriver::h100().with_auto_complete_events()),
        conf,
    );
    let mut live = HashMap::new();
    let (mut best, mut at, mut alloc_at, mut size_at) = (0i64, 0usize, 0i64, 0u64);
    let mut peak_alloc = 0i64;
    for (i, (action, addr, size, _)) in t.events.iter().enumerate() {
        match action.as_str() {
            "alloc" => {
                let r = a
                    .allocate_raw(*size, StreamId::DEFAULT)
                    .map_err(|e| e.to_string())?;
                live.insert(*addr, r);
                let st = a.memory_stats();
                let (res, al) = (
                    st.reserved_bytes.all().current,
                    st.allocated_bytes.all().current,
                );
                peak_alloc = peak_alloc.max(al);
                if res > best {
                    (best, at, alloc_at, size_at) = (res, i, al, *size);
                }
            }
            "free_completed" => {
                if let Some(r) = live.remove(addr) {
                    a.free_raw(r).map_err(|e| e.to_string())?;
                }
            }
            _ => {}
        }
    }
    println!(
        "peak allocated {:.1} MiB; reserved peaks at {:.1} MiB at event {at} of {} (an allocation of {:.2} MiB), allocated then {:.1} MiB",
        mib(peak_alloc),
        mib(best),
        t.events.len(),
        mib(size_at as i64),
        mib(alloc_at)
    );
    // Replay again up to that event and list the free blocks just before it.
    let b = CachingAllocator::new(
        Arc::new(SimDriver::h100().with_auto_complete_events()),
        conf2,
    );
    let mut live = HashMap::new();
    for (action, addr, size, _) in &t.events[..at] {
        match action.as_str() {
            "alloc" => {
                live.insert(
                    *addr,
                    b.allocate_raw(*size, StreamId::DEFAULT)
                        .map_err(|e| e.to_string())?,
                );
            }
            "free_completed" => {
                if let Some(r) = live.remove(addr) {
                    b.free_raw(r).map_err(|e| e.to_string())?;
                }
            }
            _ => {}
        }
    }
    let mut free: Vec<u64> = Vec::new();
    let mut used: Vec<u64> = Vec::new();
    for s in b.snapshot() {
        for blk in &s.blocks {
            if blk.state.name() == "inactive" {
                free.push(blk.size);
            } else {
                used.push(blk.size);
            }
        }
    }
    free.sort_unstable_by(|x, y| y.cmp(x));
    let st = b.memory_stats();
    println!(
        "just before it: reserved {:.1} MiB, allocated {:.1} MiB; free blocks (MiB): {}",
        mib(st.reserved_bytes.all().current),
        mib(st.allocated_bytes.all().current),
        free.iter()
            .take(20)
            .map(|&f| format!("{:.2}", mib(f as i64)))
            .collect::<Vec<_>>()
            .join(" ")
    );
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}
