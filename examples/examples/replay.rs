//! Replays allocation traces of real PyTorch workloads through strata's caching
//! allocator and compares with PyTorch's own figures recorded in each trace.
//!
//! ```text
//! cargo run --release -p strata-examples --example replay -- \
//!     [--device sim|cuda] [--conf STRING] [--json] [--passes N] [--warmup N] TRACE.json[.gz]...
//! ```
//!
//! Each trace's `alloc` / `free_completed` events are replayed in order (a block
//! goes back at its `free_completed`), each on its own stream, read as
//! `../shared/anchors/torch_bench.py` reads them: a 0-byte allocation is no
//! operation, a free of an address the trace never allocated is skipped, and
//! an address allocated again while live leaves the earlier block live to the
//! end of the pass (both counted on stderr). By default the
//! allocator runs over the simulated device with 2 MiB granularity and the
//! memory of the device the trace was recorded on (the file's `device`: an
//! H200's for an H200, an H100's otherwise, and at least what PyTorch
//! reserved in the recording); `--device cuda` uses the real GPU. Per trace it prints the number
//! of operations, peak allocated and reserved bytes, device allocations (counted
//! as PyTorch counts `num_device_alloc`), driver calls by kind, the cost per
//! operation (median of warm passes), the memory driver calls and stream
//! synchronisations (`synchronize_stream` and `synchronize_event` calls the
//! allocator made) per warm pass, and PyTorch's `reserved_bytes.all.peak` from
//! the file with the ratio. `--warmup N` runs N passes after the first that
//! count neither in the timings nor in the warm figures (0 by default); the
//! memory driver calls of every pass are printed too. `--json` adds the warm
//! passes' driver calls of every kind (`warm_driver_calls`, totals) and each
//! warm pass's cost per operation in order (`warm_pass_ns_per_op`), and the
//! fastest warm pass's (`ns_per_op_fastest_warm_pass`): `torch_bench.py
//! replay` reports PyTorch's as the minimum over its warm passes, strata's
//! headline `ns_per_op` is the median.

use serde::Deserialize;
use std::collections::{BTreeMap, HashMap};
use std::io::Read;
use std::sync::Arc;
use std::time::Instant;
use strata::alloc::driver::{sim::SimDriver, Driver};
use strata::alloc::trace::{TraceOp, TraceOps, ACTIONS};
use strata::alloc::{AllocatorConfig, CachingAllocator, RawAllocation, StreamId};

#[derive(Deserialize)]
struct TraceFile {
    #[serde(default)]
    workload: String,
    #[serde(default)]
    mode: String,
    /// The device the trace was recorded on, as PyTorch names it.
    #[serde(default)]
    device: String,
    #[serde(default)]
    stats: HashMap<String, serde_json::Value>,
    events: Vec<(String, u64, u64, u64)>,
}

struct Trace {
    name: String,
    mode: String,
    /// The device the trace was recorded on (empty if the file does not say).
    recorded_on: String,
    ops: Vec<TraceOp>,
    slots: usize,
    streams: Vec<u64>,
    torch_peak_reserved: Option<i64>,
    torch_device_allocs: Option<i64>,
    /// The addresses PyTorch's device gave its segments (`segment_alloc`), in
    /// order, with their sizes.
    segments: Vec<(u64, u64)>,
}

fn load(path: &str) -> Result<Trace, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{path}: {e}"))?;
    let mut text = String::new();
    if bytes.starts_with(&[0x1f, 0x8b]) {
        flate2::read::GzDecoder::new(&bytes[..])
            .read_to_string(&mut text)
            .map_err(|e| format!("{path}: a damaged gzip file: {e}"))?;
    } else {
        text =
            String::from_utf8(bytes).map_err(|_| format!("{path}: neither gzip nor UTF-8 JSON"))?;
    }
    let t: TraceFile =
        serde_json::from_str(&text).map_err(|e| format!("{path}: not a trace: {e}"))?;
    // Dense slots so the replay loop does no hashing, read as PyTorch's
    // anchor reads a trace (strata_alloc::trace).
    let TraceOps {
        ops,
        slots,
        streams,
        segments,
        unknown_frees,
        realloc_live,
        releases,
        unknown_actions,
        first_unknown_action,
    } = TraceOps::from_events(
        t.events
            .iter()
            .map(|(a, addr, size, s)| (a.as_str(), *addr, *size, *s)),
    );
    if !releases.is_empty() {
        eprintln!(
            "{path}: the recording released cached memory {} times (the workload's empty_cache); \
             replayed as PyTorch's anchor replays it, allocations and frees only",
            releases.len()
        );
    }
    if unknown_actions > 0 {
        eprintln!(
            "{path}: {unknown_actions} events with an action the trace format does not name skipped \
             (the first: {:?}; the format's are {})",
            first_unknown_action.unwrap_or_default(),
            ACTIONS.join(", ")
        );
    }
    if unknown_frees + realloc_live > 0 {
        eprintln!(
            "{path}: {unknown_frees} frees of addresses the trace never allocated skipped, \
             {realloc_live} allocations of a live address (the earlier block stays live to the end of the pass)"
        );
    }
    let stat = |k: &str| t.stats.get(k).and_then(|v| v.as_i64());
    Ok(Trace {
        // A trace without a workload name is named after its file.
        name: if t.workload.is_empty() {
            std::path::Path::new(path)
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or_else(|| path.to_string())
        } else {
            t.workload.clone()
        },
        mode: t.mode.clone(),
        recorded_on: t.device.clone(),
        torch_peak_reserved: stat("reserved_bytes.all.peak"),
        torch_device_allocs: stat("num_device_alloc"),
        ops,
        slots,
        streams,
        segments,
    })
}

/// Nanoseconds per step of a fixed chain of dependent integer steps, the
/// fastest of three runs of 2^21 steps (under a millisecond each). Its time
/// follows the core's clock, not the allocator: two hosts, or one busy host
/// at two moments, whose `ns_per_op` differ are told apart by it (a busy
/// H100 host ran it 1.5-1.7 times slower than a quiet one;
/// docs/benchmarks.md, session 62).
fn clock_probe() -> f64 {
    const STEPS: u64 = 1 << 21;
    fastest_of_three(STEPS, || {
        let mut x = std::hint::black_box(1u64);
        for i in 0..STEPS {
            x = x.wrapping_mul(0x9E37_79B9_7F4A_7C15).wrapping_add(i);
        }
        std::hint::black_box(x);
    })
}

/// Nanoseconds per step of `run`, which takes `steps` steps: the fastest of
/// three runs (the others met an interrupt or a cold cache).
fn fastest_of_three(steps: u64, mut run: impl FnMut()) -> f64 {
    (0..3)
        .map(|_| {
            let start = Instant::now();
            run();
            start.elapsed().as_nanos() as f64 / steps as f64
        })
        .fold(f64::INFINITY, f64::min)
}

/// One random cycle through `entries` slots (Sattolo's shuffle, a fixed
/// xorshift seed): following it from any slot visits every slot once.
fn chase_cycle(entries: usize) -> Vec<u64> {
    let mut next: Vec<u64> = (0..entries as u64).collect();
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    for i in (1..entries).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let j = (x % i as u64) as usize;
        next.swap(i, j);
    }
    next
}

/// Nanoseconds per load of 2^18 dependent loads along `cycle`, the fastest
/// of three runs.
fn chase(cycle: &[u64]) -> f64 {
    const LOADS: u64 = 1 << 18;
    fastest_of_three(LOADS, || {
        let mut at = std::hint::black_box(0usize);
        for _ in 0..LOADS {
            at = cycle[at] as usize;
        }
        std::hint::black_box(at);
    })
}

/// Nanoseconds per load of a chain of dependent loads at random places in
/// 256 KiB, which a core's own level-2 cache holds on any server (1-2 MiB)
/// and its level-1 cache does not: it rises where the core's clock is low
/// or something else shares the core's caches (a busy sibling hyperthread).
/// On session 64's H100 a trace's cost followed it where [`clock_probe`]
/// moved far less (docs/benchmarks.md). Taken beside [`memory_probe`];
/// about 1 ms.
fn cache_probe() -> f64 {
    static CYCLE: std::sync::OnceLock<Vec<u64>> = std::sync::OnceLock::new();
    chase(CYCLE.get_or_init(|| chase_cycle(1 << 15)))
}

/// Nanoseconds per load of a chain of dependent loads at random places in
/// 64 MiB (more than any host's last-level cache, so each load goes to
/// memory), the fastest of three runs of 2^18 loads (about 15 ms at 60 ns a
/// load), taken after the first pass (before the warm-up passes, which bring
/// the allocator's books back into the caches it evicts) and after the timed
/// passes. Where [`clock_probe`] stays put and this one rises, the host's
/// memory (other tenants' traffic in the shared cache and memory, or pages on
/// a distant NUMA node) is what slowed the allocator, not its clock. Compare
/// readings of one process: whether the kernel backs the 64 MiB with huge
/// pages (fewer TLB misses) differs from process to process.
fn memory_probe() -> f64 {
    static CYCLE: std::sync::OnceLock<Vec<u64>> = std::sync::OnceLock::new();
    chase(CYCLE.get_or_init(|| chase_cycle(1 << 23)))
}

/// One pass over the trace; frees whatever is still live at the end (untimed).
fn pass(
    a: &CachingAllocator,
    t: &Trace,
    streams: &[StreamId],
    live: &mut [Option<RawAllocation>],
) -> Result<f64, String> {
    let start = Instant::now();
    for op in &t.ops {
        match *op {
            TraceOp::Alloc { slot, size, stream } => {
                let r = a
                    .allocate_raw(size, streams[stream as usize])
                    .map_err(|e| e.to_string())?;
                live[slot as usize] = Some(r);
            }
            TraceOp::Free { slot } => {
                let r = live[slot as usize].take().expect("trace frees a live slot");
                a.free_raw(r).map_err(|e| e.to_string())?;
            }
        }
    }
    let ns = start.elapsed().as_nanos() as f64 / t.ops.len().max(1) as f64;
    for r in live.iter_mut().filter_map(Option::take) {
        a.free_raw(r).map_err(|e| e.to_string())?;
    }
    Ok(ns)
}

struct Args {
    device: String,
    conf: Option<String>,
    json: bool,
    passes: usize,
    warmup: usize,
    files: Vec<String>,
}

/// The most passes `--passes` and `--warmup` take: a million passes of the
/// largest shared trace already take days, and a number beyond it (a typo, a
/// negative number read by a script as unsigned) would run for ever, or, for
/// `--passes`, panic reserving room for its timings (`10^17` did).
const MAX_PASSES: usize = 1_000_000;

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        device: "sim".into(),
        conf: None,
        json: false,
        passes: 5,
        warmup: 0,
        files: Vec::new(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(x) = it.next() {
        match x.as_str() {
            "--device" => a.device = it.next().ok_or("--device needs sim or cuda")?,
            "--conf" => a.conf = Some(it.next().ok_or("--conf needs a string")?),
            "--json" => a.json = true,
            "--passes" => {
                a.passes = it
                    .next()
                    .and_then(|n| n.parse().ok())
                    .filter(|n| (3..=MAX_PASSES).contains(n))
                    .ok_or(format!("--passes needs a number from 3 to {MAX_PASSES}"))?
            }
            "--warmup" => {
                a.warmup = it
                    .next()
                    .and_then(|n| n.parse().ok())
                    .filter(|&n| n <= MAX_PASSES)
                    .ok_or(format!(
                        "--warmup needs a number of passes from 0 to {MAX_PASSES}"
                    ))?
            }
            "-h" | "--help" => {
                return Err("usage: replay [--device sim|cuda] [--conf STRING] [--json] [--passes N] [--warmup N] TRACE.json.gz...".into())
            }
            f => a.files.push(f.to_string()),
        }
    }
    if a.files.is_empty() {
        return Err("no trace given; usage: replay [--device sim|cuda] [--conf STRING] [--json] [--passes N] [--warmup N] TRACE.json.gz...".into());
    }
    Ok(a)
}

fn driver(device: &str, t: &Trace) -> Result<Arc<dyn Driver>, String> {
    match device {
        // The trace's frees already come after the device finished with each
        // block, so the simulated device completes every event at once; it
        // hands out the addresses PyTorch's device gave its segments, which
        // decide ties between equal free blocks (the lowest address wins).
        // It has the memory of the device the trace was recorded on (an
        // H100's unless the file names an H200), at least what PyTorch
        // reserved there.
        "sim" => Ok(Arc::new(
            SimDriver::like(
                &t.recorded_on,
                t.torch_peak_reserved.unwrap_or(0).max(0) as u64,
            )
            .with_auto_complete_events()
            .with_malloc_addresses(t.segments.iter().copied()),
        )),
        "cuda" => open_cuda(),
        other => Err(format!("unknown --device '{other}': use sim or cuda")),
    }
}

#[cfg(feature = "cuda")]
fn open_cuda() -> Result<Arc<dyn Driver>, String> {
    strata::alloc::driver::cuda::open(0).map_err(|e| format!("--device cuda: {e}"))
}

#[cfg(not(feature = "cuda"))]
fn open_cuda() -> Result<Arc<dyn Driver>, String> {
    Err("--device cuda: built without the cuda feature".into())
}

fn run() -> Result<(), String> {
    let args = parse_args()?;
    let config = match &args.conf {
        Some(c) => AllocatorConfig::parse(c).map_err(|e| e.to_string())?,
        None => AllocatorConfig::from_env().map_err(|e| e.to_string())?,
    };
    for path in &args.files {
        let t = load(path)?;
        let drv = driver(&args.device, &t)?;
        let streams: Vec<StreamId> = t
            .streams
            .iter()
            .map(|&s| {
                if s == 0 {
                    Ok(StreamId::DEFAULT)
                } else {
                    drv.create_stream().map_err(|e| e.to_string())
                }
            })
            .collect::<Result<_, _>>()?;
        let a = CachingAllocator::new(Arc::clone(&drv), config.clone());
        let mut live = vec![None; t.slots];
        pass(&a, &t, &streams, &mut live)?;
        let stats = a.memory_stats();
        let calls = a.driver_calls();
        // Memory driver calls and stream synchronisations of every pass,
        // the first (cold) one included.
        let mut per_pass = vec![(calls.memory_calls(), calls.stream_synchronizations())];
        let mut prev = calls;
        // Before the warm-up passes, which bring the allocator's books back
        // into the caches that the probe's loads evicted.
        let memory_before = memory_probe();
        let cache_before = cache_probe();
        for _ in 0..args.warmup {
            pass(&a, &t, &streams, &mut live)?;
            let now = a.driver_calls();
            per_pass.push((
                now.memory_calls() - prev.memory_calls(),
                now.stream_synchronizations() - prev.stream_synchronizations(),
            ));
            prev = now;
        }
        let calls = prev;
        let clock_before = clock_probe();
        let mut times = Vec::with_capacity(args.passes);
        for _ in 0..args.passes {
            times.push(pass(&a, &t, &streams, &mut live)?);
            let now = a.driver_calls();
            per_pass.push((
                now.memory_calls() - prev.memory_calls(),
                now.stream_synchronizations() - prev.stream_synchronizations(),
            ));
            prev = now;
        }
        let clock_after = clock_probe();
        let memory_after = memory_probe();
        let cache_after = cache_probe();
        let after = a.driver_calls();
        let warm_calls = (after.memory_calls() - calls.memory_calls()) as f64 / args.passes as f64;
        let warm_syncs = (after.stream_synchronizations() - calls.stream_synchronizations()) as f64
            / args.passes as f64;
        let warm_peak_reserved = a.memory_stats().reserved_bytes.all().peak;
        // Every driver call of the warm passes by kind (event records and
        // queries of the stream fences included), and each pass's cost in
        // order, before the median is taken.
        let warm_by_kind: Vec<(&str, u64)> = after
            .entries()
            .into_iter()
            .zip(calls.entries())
            .map(|((k, v), (_, v0))| (k, v - v0))
            .collect();
        let pass_ns: Vec<f64> = times.iter().map(|t| (t * 10.0).round() / 10.0).collect();
        times.sort_by(f64::total_cmp);
        let ns = times[times.len() / 2];
        // The fastest warm pass: the figure `torch_bench.py replay` reports
        // for PyTorch (`ns_per_op_warm`, the minimum over its passes 2-5).
        let ns_min = times[0];
        a.empty_cache().map_err(|e| e.to_string())?;
        let peak_alloc = stats.allocated_bytes.all().peak;
        let peak_res = stats.reserved_bytes.all().peak;
        let conf = config.to_string();
        if args.json {
            let mut dc = serde_json::Map::new();
            for (k, v) in calls.entries() {
                dc.insert(k.into(), v.into());
            }
            let obj = serde_json::json!({
                "trace": t.name,
                "mode": t.mode,
                "conf": conf,
                "device": args.device,
                "expandable": a.expandable_segments(),
                "ops": t.ops.len(),
                "peak_allocated": peak_alloc,
                "peak_reserved": peak_res,
                "device_allocs": stats.num_device_alloc,
                "device_frees": stats.num_device_free,
                "driver_calls": dc,
                "ns_per_op": (ns * 10.0).round() / 10.0,
                "ns_per_op_fastest_warm_pass": (ns_min * 10.0).round() / 10.0,
                "warm_memory_calls_per_pass": warm_calls,
                "warm_stream_synchronizations_per_pass": warm_syncs,
                "warmup_passes": args.warmup,
                "memory_calls_by_pass": per_pass.iter().map(|p| p.0).collect::<Vec<_>>(),
                "stream_synchronizations_by_pass": per_pass.iter().map(|p| p.1).collect::<Vec<_>>(),
                "warm_peak_reserved": warm_peak_reserved,
                "warm_driver_calls": warm_by_kind
                    .iter()
                    .map(|&(k, v)| (k.to_string(), serde_json::Value::from(v)))
                    .collect::<serde_json::Map<_, _>>(),
                "warm_pass_ns_per_op": pass_ns,
                "clock_probe_ns_per_step": [
                    (clock_before * 1e4).round() / 1e4,
                    (clock_after * 1e4).round() / 1e4
                ],
                "cache_probe_ns_per_load": [
                    (cache_before * 100.0).round() / 100.0,
                    (cache_after * 100.0).round() / 100.0
                ],
                "memory_probe_ns_per_load": [
                    (memory_before * 10.0).round() / 10.0,
                    (memory_after * 10.0).round() / 10.0
                ],
                "torch_peak_reserved": t.torch_peak_reserved,
                "torch_device_allocs": t.torch_device_allocs,
            });
            println!("{obj}");
        } else {
            let mib = |b: i64| b as f64 / (1 << 20) as f64;
            println!(
                "{} ({} trace, {} streams) conf={conf} device={}",
                t.name,
                t.mode,
                t.streams.len(),
                args.device
            );
            if let Ok(info) = drv.mem_get_info() {
                println!(
                    "  device memory     {:.2} GiB{}",
                    info.total as f64 / (1u64 << 30) as f64,
                    if t.recorded_on.is_empty() {
                        String::new()
                    } else {
                        format!(" (recorded on {})", t.recorded_on)
                    }
                );
            }
            println!("  operations        {}", t.ops.len());
            println!("  peak allocated    {:.1} MiB", mib(peak_alloc));
            println!(
                "  peak reserved     {:.1} MiB  (ratio to allocated {:.3})",
                mib(peak_res),
                peak_res as f64 / peak_alloc.max(1) as f64
            );
            if let Some(tp) = t.torch_peak_reserved {
                println!(
                    "  PyTorch reserved  {:.1} MiB  (strata / PyTorch {:.3})",
                    mib(tp),
                    peak_res as f64 / tp.max(1) as f64
                );
            }
            println!(
                "  device allocs     {}  (PyTorch {})",
                stats.num_device_alloc,
                t.torch_device_allocs.map_or("?".into(), |v| v.to_string())
            );
            let by_kind: BTreeMap<_, _> = calls
                .entries()
                .into_iter()
                .filter(|(_, v)| *v > 0)
                .collect();
            println!("  driver calls      {by_kind:?}");
            println!(
                "  ns per operation  {ns:.1} (median of {} warm passes; fastest {ns_min:.1}, the statistic torch_bench.py reports)",
                args.passes
            );
            println!(
                "  warm passes       {warm_calls:.1} memory driver calls and {warm_syncs:.1} stream synchronisations per pass (after {} warm-up passes), peak reserved {:.1} MiB",
                args.warmup,
                mib(warm_peak_reserved)
            );
            let by_pass: Vec<u64> = per_pass.iter().map(|p| p.0).collect();
            println!("  memory calls by pass {by_pass:?} (first pass first)");
            println!(
                "  host clock probe  {clock_before:.4} / {clock_after:.4} ns per step before / after the timed passes"
            );
            println!(
                "  host memory probe {memory_before:.1} / {memory_after:.1} ns per dependent load in 64 MiB before / after"
            );
            println!(
                "  host cache probe  {cache_before:.2} / {cache_after:.2} ns per dependent load in 256 KiB before / after"
            );
        }
    }
    Ok(())
}

fn main() {
    if let Err(e) = run() {
        eprintln!("replay: {e}");
        std::process::exit(1);
    }
}
