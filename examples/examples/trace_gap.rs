//! Where a trace's reserved memory peaks, replayed over the simulated GPU
//! (expandable segments, 2 MiB pages, as on the H200): the operation that
//! made reserved memory grow to its peak, allocated memory then, and the free
//! blocks cached at that moment (reserved but unused: what fragmentation
//! costs). For traces written by `gpt` with `STRATA_GPT_TRACE`.
//!
//! ```text
//! cargo run --release -p strata-examples --example trace_gap -- [--conf STRING] TRACE.json
//! ```
//!
//! A gzipped trace (`traces/*.json.gz`) is read as well. A bad command line
//! or file is refused with a message and exit status 2.

use serde::Deserialize;
use std::collections::HashMap;
use std::io::Read;
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

/// How to run it.
const USAGE: &str = "usage: trace_gap [--conf STRING] TRACE.json (or TRACE.json.gz)";

/// The configuration and the trace's path from the command line: one trace,
/// `--conf` with its string; anything else is refused with the usage.
fn args() -> Result<(AllocatorConfig, String), String> {
    let mut conf = AllocatorConfig::default();
    let mut path: Option<String> = None;
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--conf" => {
                let c = it.next().ok_or(format!(
                    "--conf needs a settings string, e.g. --conf expandable_segments:False; {USAGE}"
                ))?;
                conf = AllocatorConfig::parse(&c).map_err(|e| format!("--conf: {e}"))?;
            }
            "-h" | "--help" => return Err(USAGE.into()),
            o if o.starts_with("--") => return Err(format!("unknown option '{o}'; {USAGE}")),
            f => match &path {
                None => path = Some(f.to_string()),
                Some(p) => {
                    return Err(format!("one trace at a time: '{f}' follows '{p}'; {USAGE}"))
                }
            },
        }
    }
    Ok((conf, path.ok_or(USAGE)?))
}

/// The trace at `path`, plain JSON or gzipped (as `traces/*.json.gz`).
fn load(path: &str) -> Result<TraceFile, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{path}: {e}"))?;
    let text = if bytes.starts_with(&[0x1f, 0x8b]) {
        let mut text = String::new();
        flate2::read::GzDecoder::new(&bytes[..])
            .read_to_string(&mut text)
            .map_err(|e| format!("{path}: a damaged gzip file: {e}"))?;
        text
    } else {
        String::from_utf8(bytes).map_err(|_| {
            format!("{path}: neither gzip nor UTF-8 JSON; give a trace as the gpt example (STRATA_GPT_TRACE) or replay reads it")
        })?
    };
    serde_json::from_str(&text).map_err(|e| {
        format!("{path}: not a trace ({e}); a trace is a JSON object with \"events\": [[action, address, size, stream], ...]")
    })
}

fn run() -> Result<(), String> {
    let (conf, path) = args()?;
    let t = load(&path)?;
    if !t
        .events
        .iter()
        .any(|(a, _, size, _)| a == "alloc" && *size > 0)
    {
        return Err(format!(
            "{path}: the trace allocates nothing, so there is no peak to find"
        ));
    }
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
