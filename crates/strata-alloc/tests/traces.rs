//! Replays the shared allocation traces of real PyTorch workloads
//! (`../shared/traces`, or the folder named by `STRATA_TRACES`) on the simulated
//! device and checks issue 14's goals against the figures PyTorch recorded in
//! each trace:
//!
//! * default configuration: after at most two warm-up passes, no memory driver
//!   call and no stream synchronisation per pass; the first pass's peak reserved
//!   at most 1.05 × its peak allocated and never above PyTorch's expandable
//!   figure; device allocations at most twice PyTorch's;
//! * `expandable_segments:False`: PyTorch's peak reserved and device
//!   allocations exactly (the single-stream traces; the two-stream trace's
//!   stream events are not replayed, see docs/benchmarks.md).
//!
//! The traces are not part of the repository: when the folder is missing the
//! tests print so and pass. The same replay runs synthetic traces in
//! `recycling.rs`.

use serde_json::Value;
use std::collections::HashMap;
use std::io::Read;
use std::path::PathBuf;
use std::sync::Arc;
use strata_alloc::driver::sim::SimDriver;
use strata_alloc::driver::StreamEvents;
use strata_alloc::trace::{TraceOp, TraceOps};
use strata_alloc::{AllocatorConfig, CachingAllocator, RawAllocation, StreamId};

/// One replayed operation, on dense slots.
enum Op {
    Alloc {
        slot: usize,
        size: u64,
        stream: usize,
    },
    Free {
        slot: usize,
    },
    /// The recorded allocator gave its cached memory back here (the
    /// workload's `empty_cache`, `TraceOps::releases`); replayed only where
    /// PyTorch's reserved memory is to be reproduced.
    EmptyCache,
}

struct Trace {
    ops: Vec<Op>,
    slots: usize,
    streams: usize,
    stats: HashMap<String, i64>,
    /// PyTorch's `segment_alloc` events (address, size), in order: the
    /// addresses its device handed out.
    segments: Vec<(u64, u64)>,
    /// The device it was recorded on (the file's `device`).
    device: String,
}

fn traces_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("STRATA_TRACES")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/traces")
        });
    let dir = if dir.is_dir() {
        dir
    } else {
        PathBuf::from("/work/shared/traces")
    };
    dir.is_dir().then_some(dir)
}

fn load(path: &std::path::Path) -> Trace {
    let bytes = std::fs::read(path).expect("readable trace");
    let mut text = String::new();
    flate2::read::GzDecoder::new(&bytes[..])
        .read_to_string(&mut text)
        .expect("gzip");
    let v: Value = serde_json::from_str(&text).expect("json");
    let events = v["events"].as_array().expect("events").iter().map(|e| {
        (
            e[0].as_str().unwrap(),
            e[1].as_u64().unwrap(),
            e[2].as_u64().unwrap(),
            e[3].as_u64().unwrap(),
        )
    });
    // Read as PyTorch's replay anchor reads a trace (strata_alloc::trace).
    let t = TraceOps::from_events(events);
    let mut releases = t.releases.iter().peekable();
    let mut ops = Vec::with_capacity(t.ops.len() + t.releases.len());
    for (i, op) in t.ops.iter().enumerate() {
        while releases.next_if(|&&r| r == i).is_some() {
            ops.push(Op::EmptyCache);
        }
        ops.push(match *op {
            TraceOp::Alloc { slot, size, stream } => Op::Alloc {
                slot: slot as usize,
                size,
                stream: stream as usize,
            },
            TraceOp::Free { slot } => Op::Free {
                slot: slot as usize,
            },
        });
    }
    ops.extend(releases.map(|_| Op::EmptyCache));
    let stats = v["stats"]
        .as_object()
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| v.as_i64().map(|x| (k.clone(), x)))
                .collect()
        })
        .unwrap_or_default();
    Trace {
        ops,
        slots: t.slots,
        streams: t.streams.len(),
        stats,
        segments: t.segments,
        device: v["device"].as_str().unwrap_or_default().to_string(),
    }
}

/// What a replay of several passes shows.
struct Replay {
    peak_allocated: i64,
    peak_reserved: i64,
    device_allocs: i64,
    /// Memory driver calls and stream synchronisations of each pass.
    per_pass: Vec<(u64, u64)>,
    /// Peak reserved bytes over all passes.
    peak_reserved_all_passes: i64,
}

impl Replay {
    /// Whether any pass from the `from`-th (counted from 0) made a memory
    /// driver call or a stream synchronisation.
    fn pays_from(&self, from: usize) -> bool {
        self.per_pass[from..].iter().any(|&(c, s)| c > 0 || s > 0)
    }
}

/// The bound the hold-or-move rule keeps reserved memory under once a
/// workload repeats (docs/allocator.md): peak allocated, plus the margin (the
/// larger of 1/32 of it and 10 pages of 2 MiB), plus half of it.
fn hold_bound(peak_allocated: i64) -> i64 {
    peak_allocated + (peak_allocated / 32).max(10 << 21) + peak_allocated / 2
}

fn replay(t: &Trace, conf: &str, passes: usize) -> Replay {
    replay_keeping(t, conf, passes, 0, false)
}

/// [`replay`], with an allocation of `kept` bytes (none if 0) made before the
/// first pass and kept across all of them: a workload whose allocated memory
/// never falls back to nothing between runs.
/// With `releases`, the allocator's cache is emptied where the recording
/// released it (`Op::EmptyCache`, the workload's `empty_cache`), as a replay
/// that reproduces PyTorch's reserved memory must; otherwise, as PyTorch's
/// replay anchor, allocations and frees only.
fn replay_keeping(t: &Trace, conf: &str, passes: usize, kept: u64, releases: bool) -> Replay {
    // The device hands out the addresses PyTorch's device did (the order of
    // equal free blocks depends on them); they only matter to ordinary
    // segments.
    let drv = Arc::new(
        SimDriver::like(
            &t.device,
            t.stats
                .get("reserved_bytes.all.peak")
                .map_or(0, |&b| b.max(0) as u64),
        )
        .with_auto_complete_events()
        .with_malloc_addresses(t.segments.iter().copied()),
    );
    let streams: Vec<StreamId> = (0..t.streams)
        .map(|i| {
            if i == 0 {
                StreamId::DEFAULT
            } else {
                drv.create_stream().unwrap()
            }
        })
        .collect();
    let a = CachingAllocator::new(drv, AllocatorConfig::parse(conf).unwrap());
    let mut live: Vec<Option<RawAllocation>> = vec![None; t.slots];
    let kept = (kept > 0).then(|| a.allocate_raw(kept, streams[0]).unwrap());
    let mut per_pass = Vec::new();
    let mut first = None;
    let mut prev = (0, 0);
    for _ in 0..passes {
        for op in &t.ops {
            match *op {
                Op::Alloc { slot, size, stream } => {
                    live[slot] = Some(a.allocate_raw(size, streams[stream]).unwrap())
                }
                Op::Free { slot } => a.free_raw(live[slot].take().unwrap()).unwrap(),
                Op::EmptyCache if releases => a.empty_cache().unwrap(),
                Op::EmptyCache => {}
            }
        }
        for r in live.iter_mut().filter_map(Option::take) {
            a.free_raw(r).unwrap();
        }
        let c = a.driver_calls();
        let now = (c.memory_calls(), c.stream_synchronizations());
        per_pass.push((now.0 - prev.0, now.1 - prev.1));
        prev = now;
        if first.is_none() {
            let s = a.memory_stats();
            first = Some((
                s.allocated_bytes.all().peak,
                s.reserved_bytes.all().peak,
                s.num_device_alloc,
            ));
        }
        a.check_consistency().unwrap();
    }
    let (peak_allocated, peak_reserved, device_allocs) = first.unwrap();
    let r = Replay {
        peak_allocated,
        peak_reserved,
        device_allocs,
        per_pass,
        peak_reserved_all_passes: a.memory_stats().reserved_bytes.all().peak,
    };
    if let Some(k) = kept {
        a.free_raw(k).unwrap();
    }
    r
}

/// One replayable sequence of a shared trace.
struct Workload {
    /// `NAME.MODE`, e.g. `bert_serving.expandable`.
    name: String,
    /// The alloc/free sequence of this file.
    trace: Trace,
    /// PyTorch's final statistics in its default mode (`NAME.default`).
    default_stats: HashMap<String, i64>,
    /// PyTorch's final statistics with expandable segments
    /// (`NAME.expandable`); empty when that file is missing.
    expandable_stats: HashMap<String, i64>,
    /// Whether this is the `*.default.json.gz` sequence.
    is_default: bool,
}

/// The shared traces: both the `*.default.json.gz` and the
/// `*.expandable.json.gz` sequence of every workload (they hold the same
/// allocations, but frees completed on other streams may come in another
/// order), each with PyTorch's figures in both modes, read from the files.
fn workloads() -> Vec<Workload> {
    let Some(dir) = traces_dir() else {
        eprintln!("no shared traces found (set STRATA_TRACES): skipped");
        return Vec::new();
    };
    workloads_in(&dir)
}

/// The project's own traces (`traces/` at the repository root: PyTorch 2.11
/// on the H200, recorded by `benches/anchors/record_trace.py`; see its
/// README), in the shared traces' format.
fn project_workloads() -> Vec<Workload> {
    workloads_in(&PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../traces"))
}

/// Every workload of `dir` (`NAME.default.json.gz`, with its
/// `NAME.expandable.json.gz` when present).
fn workloads_in(dir: &std::path::Path) -> Vec<Workload> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| {
            let n = e.ok()?.file_name().into_string().ok()?;
            n.strip_suffix(".default.json.gz").map(str::to_string)
        })
        .collect();
    names.sort();
    if let Ok(only) = std::env::var("STRATA_TRACE") {
        names.retain(|n| *n == only);
    }
    let mut v = Vec::new();
    for n in names {
        let default = load(&dir.join(format!("{n}.default.json.gz")));
        let exp_path = dir.join(format!("{n}.expandable.json.gz"));
        let expandable = exp_path.is_file().then(|| load(&exp_path));
        let default_stats = default.stats.clone();
        let expandable_stats = expandable
            .as_ref()
            .map(|t| t.stats.clone())
            .unwrap_or_default();
        v.push(Workload {
            name: format!("{n}.default"),
            trace: default,
            default_stats: default_stats.clone(),
            expandable_stats: expandable_stats.clone(),
            is_default: true,
        });
        if let Some(t) = expandable {
            v.push(Workload {
                name: format!("{n}.expandable"),
                trace: t,
                default_stats,
                expandable_stats,
                is_default: false,
            });
        }
    }
    v
}

/// A first run that ends below the workload's peak (its first pass still
/// climbing) holds the pages a request needs but no hold chunk until a run at
/// the peak has ended (session 70). mae_pretrain_varmask of
/// `traces/held_out5/` ends its first run inside its first pass; with a
/// 30-page chunk there that pass reserved 6272 MiB, above the 6256 MiB that
/// PyTorch's expandable segments reserved (read from its `*.expandable`
/// trace). Both sequences' first passes must stay within PyTorch's figure.
#[test]
fn a_first_run_that_ends_below_the_peak_holds_no_chunk_in_the_first_pass() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../traces/held_out5");
    let expandable = load(&dir.join("mae_pretrain_varmask.expandable.json.gz"));
    let torch = expandable.stats["reserved_bytes.all.peak"];
    let default = load(&dir.join("mae_pretrain_varmask.default.json.gz"));
    for (mode, t) in [("default", &default), ("expandable", &expandable)] {
        let r = replay(t, "", 1);
        assert!(
            r.peak_reserved <= torch,
            "mae_pretrain_varmask.{mode}: first pass reserved {} MiB, PyTorch's expandable segments {} MiB",
            r.peak_reserved >> 20,
            torch >> 20
        );
    }
}

/// Issue 14's goals in full, on both sequences of every shared trace: after
/// at most two warm-up passes no driver call and no stream synchronisation;
/// the first pass within 1.05 x its peak allocated, below PyTorch's
/// expandable peak, with at most twice its device allocations; and over all
/// passes reserved memory within the hold-or-move rule's bound.
#[test]
fn default_config_meets_the_steady_state_and_first_pass_goals() {
    let failures: Vec<String> = workloads().iter().flat_map(goal_failures).collect();
    assert!(failures.is_empty(), "{failures:#?}");
}

/// The same goals on the project's own traces (`traces/`), real PyTorch
/// workloads recorded on the H200 that the rule was not designed on. Not met
/// yet (docs/benchmarks.md, issue 14, "Session 8: traces the rule was not
/// designed on"); run with `--ignored`.
#[test]
#[ignore = "the project's own traces are not all within the goals yet (docs/benchmarks.md, issue 14, session 8)"]
fn default_config_meets_the_goals_on_the_projects_traces() {
    let w = project_workloads();
    assert!(!w.is_empty(), "traces/ holds no traces");
    let failures: Vec<String> = w.iter().flat_map(goal_failures).collect();
    assert!(failures.is_empty(), "{failures:#?}");
}

/// The steady-state part of issue 14's goals on the project's own traces:
/// after at most two warm-up passes no driver call and no stream
/// synchronisation, and over all passes reserved memory within the
/// hold-or-move rule's bound (the first-pass goals are in the ignored test
/// above).
#[test]
fn default_config_stops_paying_after_two_warm_up_passes_on_the_projects_traces() {
    assert_steady_state(&project_workloads(), "traces/");
}

/// Asserts the steady-state goals (no driver call after two warm-up passes,
/// reserved memory within the hold bound) on the workloads of a folder.
fn assert_steady_state(w: &[Workload], folder: &str) {
    assert!(!w.is_empty(), "{folder} holds no traces");
    let failures: Vec<String> = w
        .iter()
        .flat_map(goal_failures)
        .filter(|f| f.ends_with("after two warm-up passes") || f.ends_with("the hold bound"))
        .collect();
    assert!(failures.is_empty(), "{failures:#?}");
}

/// The same steady-state goals on the real traces of `traces/held_out/`.
/// They were written after the hold-or-move rule (sessions 20-23) and kept
/// out of its design until session 47, whose rule for the runs after a run
/// at the peak (docs/allocator.md, "After a run at the peak") was chosen
/// with them in view: before it, gpt_sampling paid 3 memory calls in its
/// fifth pass and gru_seq2seq 30 and 557 in its fourth and fifth.
#[test]
fn default_config_stops_paying_after_two_warm_up_passes_on_the_held_out_traces() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../traces/held_out");
    assert_steady_state(&workloads_in(&dir), "traces/held_out/");
}

/// A workload that never ends (a training loop that keeps its parameters)
/// is taken for its first run, which holds no more than its first-run bound,
/// only for a while (`repeats.rs`, "The first run"): replayed with an
/// allocation of 1/16 of its peak kept across 24 passes, so that allocated
/// memory never falls back to nothing, every trace of `traces/` settles, with
/// no driver call and no stream synchronisation in its last four passes.
#[test]
fn a_workload_that_never_ends_still_settles_on_the_projects_traces() {
    let w = project_workloads();
    assert!(!w.is_empty(), "traces/ holds no traces");
    let mut failures = Vec::new();
    for w in &w {
        let peak = w.default_stats["allocated_bytes.all.peak"] as u64;
        let r = replay_keeping(&w.trace, "", 24, peak / 16, false);
        eprintln!("{}: calls and syncs by pass {:?}", w.name, r.per_pass);
        if r.pays_from(20) {
            failures.push(format!("{}: driver calls in passes 21-24", w.name));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// Issue 14's goals on one workload, as failure messages: after at most two
/// warm-up passes no driver call and no stream synchronisation; the first
/// pass within 1.05 x its peak allocated, below PyTorch's expandable peak,
/// with at most twice its device allocations; and over all passes reserved
/// memory within the hold-or-move rule's bound.
fn goal_failures(w: &Workload) -> Vec<String> {
    let mut failures = Vec::new();
    let name = &w.name;
    let r = replay(&w.trace, "", 6);
    let ratio = r.peak_reserved as f64 / r.peak_allocated as f64;
    eprintln!(
        "{name}: first pass {:.1} / {:.1} MiB ({ratio:.3}; PyTorch expandable {:?} MiB), {} device allocs (PyTorch {:?}), calls and syncs by pass {:?}, all passes {:.3} x",
        r.peak_reserved as f64 / 1048576.0,
        r.peak_allocated as f64 / 1048576.0,
        w.expandable_stats
            .get("reserved_bytes.all.peak")
            .map(|&e| e as f64 / 1048576.0),
        r.device_allocs,
        w.default_stats.get("num_device_alloc"),
        r.per_pass,
        r.peak_reserved_all_passes as f64 / r.peak_allocated as f64
    );
    if r.peak_reserved_all_passes > hold_bound(r.peak_allocated) {
        failures.push(format!("{name}: reserved above the hold bound"));
    }
    if r.pays_from(3) {
        failures.push(format!("{name}: driver calls after two warm-up passes"));
    }
    if ratio > 1.05 {
        failures.push(format!(
            "{name}: first pass reserves {ratio:.3} x allocated"
        ));
    }
    if let Some(&e) = w.expandable_stats.get("reserved_bytes.all.peak") {
        if r.peak_reserved > e {
            failures.push(format!("{name}: above PyTorch's expandable peak"));
        }
    }
    if let Some(&d) = w.default_stats.get("num_device_alloc") {
        if r.device_allocs > 2 * d {
            failures.push(format!("{name}: more than twice PyTorch's device allocs"));
        }
    }
    failures
}

/// `expandable_segments:False` reproduces PyTorch's peak reserved and device
/// allocations on the project's own traces too.
#[test]
fn fixed_segments_reproduce_pytorch_exactly_on_the_projects_traces() {
    let w = project_workloads();
    assert!(!w.is_empty(), "traces/ holds no traces");
    fixed_segments_match(&w);
}

/// On every shared trace file, `*.default` and `*.expandable` sequences
/// alike, the first pass never reserves more than PyTorch's expandable
/// segments did on that workload (its `reserved_bytes.all.peak`, read from the
/// `*.expandable.json.gz` file), with at most twice PyTorch's device
/// allocations, and no pass synchronises a stream. (resnet18_prefetch's
/// `*.expandable` sequence reserved 3186 MiB against PyTorch's 3174 MiB before
/// the hold-or-move rule took each stream's own peak into account.)
#[test]
fn first_pass_never_above_pytorchs_expandable_figure_on_any_trace_file() {
    let mut failures = Vec::new();
    for w in workloads() {
        let name = &w.name;
        let r = replay(&w.trace, "", 3);
        if r.per_pass.iter().any(|&(_, s)| s > 0) {
            failures.push(format!("{name}: stream synchronisations {:?}", r.per_pass));
        }
        match w.expandable_stats.get("reserved_bytes.all.peak") {
            Some(&e) if r.peak_reserved <= e => {}
            Some(&e) => failures.push(format!(
                "{name}: first pass reserves {} MiB, PyTorch's expandable {} MiB",
                r.peak_reserved >> 20,
                e >> 20
            )),
            // Both modes are part of every shared workload.
            None => failures.push(format!("{name}: no PyTorch expandable figure")),
        }
        match w.default_stats.get("num_device_alloc") {
            Some(&d) if r.device_allocs <= 2 * d => {}
            d => failures.push(format!(
                "{name}: {} device allocs, PyTorch {d:?}",
                r.device_allocs
            )),
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test]
fn fixed_segments_reproduce_pytorch_exactly() {
    fixed_segments_match(&workloads());
}

/// PyTorch's default-mode peak reserved and device allocations, reproduced
/// with `expandable_segments:False` on every single-stream `*.default`
/// sequence of `workloads`.
fn fixed_segments_match(workloads: &[Workload]) {
    for w in workloads {
        if !w.is_default || w.trace.streams > 1 {
            continue;
        }
        // The workload's own `empty_cache` calls included: PyTorch's
        // figures count what they gave back and allocated again.
        let r = replay_keeping(&w.trace, "expandable_segments:False", 1, 0, true);
        assert_eq!(
            Some(&r.peak_reserved),
            w.default_stats.get("reserved_bytes.all.peak"),
            "{}",
            w.name
        );
        assert_eq!(
            Some(&r.device_allocs),
            w.default_stats.get("num_device_alloc"),
            "{}",
            w.name
        );
    }
}

/// Deterministic pseudo-random numbers for the synthetic traces.
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

/// Builds a trace from a script of allocations and frees by name.
#[derive(Default)]
struct Builder {
    ops: Vec<Op>,
    vacant: Vec<usize>,
    slots: usize,
    streams: usize,
}

impl Builder {
    fn alloc(&mut self, size: u64, stream: usize) -> usize {
        let slot = self.vacant.pop().unwrap_or_else(|| {
            self.slots += 1;
            self.slots - 1
        });
        self.streams = self.streams.max(stream + 1);
        self.ops.push(Op::Alloc { slot, size, stream });
        slot
    }

    fn free(&mut self, slot: usize) {
        self.vacant.push(slot);
        self.ops.push(Op::Free { slot });
    }

    fn trace(self) -> Trace {
        Trace {
            ops: self.ops,
            slots: self.slots,
            streams: self.streams,
            stats: HashMap::new(),
            segments: Vec::new(),
            // The synthetic workloads run on an H100's memory.
            device: String::new(),
        }
    }
}

/// Training with batch sizes that change from step to step (some growing):
/// parameters, activations kept for the backward pass, gradients and
/// temporaries, over 16 layers of varying width.
fn varying_batch_training(seed: u64) -> Trace {
    let mut r = Lcg(seed);
    let mut b = Builder::default();
    let widths: Vec<u64> = (0..16).map(|_| 256 << r.below(4)).collect();
    let params: Vec<usize> = widths
        .iter()
        .map(|&w| b.alloc(w * w * 4 + 1000, 0))
        .collect();
    for step in 0..12u64 {
        let batch = 8 + 8 * ((step * 3 + r.below(5)) % 9);
        let mut acts = Vec::new();
        for &w in &widths {
            let t = b.alloc(batch * w * 4 * 64, 0);
            acts.push(b.alloc(batch * w * 4 * 64 + r.below(4096), 0));
            b.free(t);
        }
        for (i, &w) in widths.iter().enumerate().rev() {
            let g = b.alloc(w * w * 4, 0);
            let gi = b.alloc(batch * w * 4 * 64, 0);
            b.free(acts[i]);
            b.free(gi);
            b.free(g);
        }
    }
    for p in params {
        b.free(p);
    }
    b.trace()
}

/// Double-buffered input on a side stream: the next batch's buffer is
/// allocated on stream 1 while stream 0 computes on the current one, whose
/// buffer is freed after the step.
fn prefetch_training(seed: u64) -> Trace {
    let mut r = Lcg(seed);
    let mut b = Builder::default();
    let input = |r: &mut Lcg| (32 + r.below(4) * 16) * 3 * 224 * 224 * 4;
    let mut next = b.alloc(input(&mut r), 1);
    for _ in 0..10 {
        let cur = next;
        next = b.alloc(input(&mut r), 1);
        let mut acts = Vec::new();
        for l in 0..12u64 {
            acts.push(b.alloc((64 << (l % 4)) * 56 * 56 * 4 * 8, 0));
        }
        b.free(cur);
        while let Some(a) = acts.pop() {
            let g = b.alloc(3 << 20, 0);
            b.free(a);
            b.free(g);
        }
    }
    b.free(next);
    b.trace()
}

/// Transformer serving: requests of random batch and sequence length, each
/// through 12 layers whose attention scores grow with the square of the
/// length.
fn variable_length_serving(seed: u64) -> Trace {
    let mut r = Lcg(seed);
    let mut b = Builder::default();
    let weights: Vec<usize> = (0..12).map(|_| b.alloc(7 << 20, 0)).collect();
    for _ in 0..30 {
        let (batch, len) = (1 + r.below(32), 16 + r.below(497));
        let hidden = batch * len * 768 * 4;
        let mut x = b.alloc(hidden, 0);
        for _ in 0..12 {
            let qkv = b.alloc(3 * hidden, 0);
            let scores = b.alloc(batch * 12 * len * len * 4, 0);
            let probs = b.alloc(batch * 12 * len * len * 4, 0);
            b.free(scores);
            let ctx = b.alloc(hidden, 0);
            b.free(probs);
            b.free(qkv);
            let ff = b.alloc(4 * hidden, 0);
            let y = b.alloc(hidden, 0);
            b.free(ff);
            b.free(ctx);
            b.free(x);
            x = y;
        }
        b.free(x);
    }
    for w in weights {
        b.free(w);
    }
    b.trace()
}

/// The synthetic workloads, three seeds each.
fn synthetic() -> Vec<(String, Trace)> {
    synthetic_seeds(1..=3)
}

/// The synthetic workloads for each of `seeds`.
fn synthetic_seeds(seeds: impl IntoIterator<Item = u64>) -> Vec<(String, Trace)> {
    let mut v = Vec::new();
    for seed in seeds {
        v.push((
            format!("varying_batch_training/{seed}"),
            varying_batch_training(seed),
        ));
        v.push((format!("prefetch_training/{seed}"), prefetch_training(seed)));
        v.push((
            format!("variable_length_serving/{seed}"),
            variable_length_serving(seed),
        ));
    }
    if let Ok(only) = std::env::var("STRATA_TRACE") {
        v.retain(|(n, _)| *n == only);
    }
    v
}

/// The synthetic workloads never synchronise a stream, make no driver call
/// after two warm-up passes, keep reserved memory within the hold-or-move
/// rule's bound, and leave the allocator consistent after every pass.
#[test]
fn synthetic_workloads_stop_paying_after_two_warm_up_passes() {
    assert_synthetic_steady_state(synthetic(), 6);
}

/// Replays each workload for `passes` passes and asserts the steady-state
/// goals: no stream synchronisation, and [`warm_failures`] none.
fn assert_synthetic_steady_state(workloads: Vec<(String, Trace)>, passes: usize) {
    let mut failures = Vec::new();
    for (name, t) in workloads {
        let r = replay_synthetic(&name, &t, passes);
        if r.per_pass.iter().any(|&(_, s)| s > 0) {
            failures.push(format!("{name}: stream synchronisations"));
        }
        failures.extend(warm_failures(&name, &r));
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// Replays a synthetic workload for `passes` passes and prints its figures.
fn replay_synthetic(name: &str, t: &Trace, passes: usize) -> Replay {
    let r = replay(t, "", passes);
    eprintln!(
        "{name}: first pass {:.3} x allocated, {} device allocs, calls and syncs by pass {:?}, all passes {:.3} x",
        r.peak_reserved as f64 / r.peak_allocated as f64,
        r.device_allocs,
        r.per_pass,
        r.peak_reserved_all_passes as f64 / r.peak_allocated as f64
    );
    r
}

/// The steady-state goals: no driver call or stream synchronisation after
/// two warm-up passes, and reserved memory within the hold bound.
fn warm_failures(name: &str, r: &Replay) -> Vec<String> {
    let mut failures = Vec::new();
    if r.pays_from(3) {
        failures.push(format!("{name}: driver calls after two warm-up passes"));
    }
    if r.peak_reserved_all_passes > hold_bound(r.peak_allocated) {
        failures.push(format!("{name}: reserved above the hold bound"));
    }
    failures
}

/// Issue 14's goals on seeds of the synthetic generators that no rule was
/// tuned on (4 to 23; the rules were designed on seeds 1 to 3 and on the
/// traces): the first pass within 1.05 x, no driver call or stream
/// synchronisation from the fourth of eight passes on, reserved memory
/// within the hold bound. Not met yet (session 12: 14 of the 60 workloads
/// fail, docs/benchmarks.md "Session 12"; session 15: 13), so ignored; it
/// measures how far the rules carry beyond the workloads they were designed
/// on. (Session 15's re-ranking of a placement whose hold is given up was
/// found by reading variable_length_serving/13's growths, so that seed is no
/// longer strictly held out.)
#[test]
#[ignore = "issue 14: not met on every held-out seed yet (docs/benchmarks.md, Session 12)"]
fn synthetic_workloads_meet_the_goals_on_held_out_seeds() {
    let torch = torch_synthetic();
    let mut failures = Vec::new();
    for (name, t) in synthetic_seeds(held_out_seeds()) {
        let r = replay_synthetic(&name, &t, 8);
        let ratio = r.peak_reserved as f64 / r.peak_allocated as f64;
        if ratio > 1.05 {
            failures.push(format!("{name}: first pass {ratio:.3} x allocated"));
        }
        failures.extend(warm_failures(&name, &r));
        failures.extend(against_pytorch(&name, &r, &torch));
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// PyTorch's first pass of one synthetic workload.
struct TorchFigures {
    /// `num_device_alloc` under its default configuration.
    device_allocs: i64,
    /// Peak reserved bytes under `expandable_segments:True`.
    expandable_reserved: i64,
    /// Peak allocated bytes under `expandable_segments:True`.
    expandable_allocated: i64,
}

/// PyTorch 2.11's figures for the first pass of the synthetic workloads of
/// seeds 1-143 on an H200 (`torch_synthetic.json`, recorded by
/// `benches/anchors/torch_synthetic_replay.py`, docs/benchmarks.md
/// "Session 20"): `num_device_alloc` under its default configuration, peak
/// reserved and peak allocated under `expandable_segments:True`.
fn torch_synthetic() -> HashMap<String, TorchFigures> {
    let text = include_str!("torch_synthetic.json");
    let v: Value = serde_json::from_str(text).expect("json");
    v["workloads"]
        .as_object()
        .expect("workloads")
        .iter()
        .map(|(k, w)| {
            let n = |f: &str| w[f].as_i64().expect("a figure");
            let figures = TorchFigures {
                device_allocs: n("default_device_allocs"),
                expandable_reserved: n("expandable_peak_reserved"),
                expandable_allocated: n("expandable_peak_allocated"),
            };
            (k.clone(), figures)
        })
        .collect()
}

/// Issue 14's goals that compare with PyTorch, for a synthetic workload
/// PyTorch's figures exist for: a first pass never above PyTorch's
/// expandable segments', at most twice PyTorch's device allocations.
fn against_pytorch(name: &str, r: &Replay, torch: &HashMap<String, TorchFigures>) -> Vec<String> {
    let mut failures = Vec::new();
    if let Some(t) = torch.get(name) {
        if r.peak_reserved > t.expandable_reserved {
            failures.push(format!("{name}: above PyTorch's expandable peak"));
        }
        if r.device_allocs > 2 * t.device_allocs {
            failures.push(format!("{name}: more than twice PyTorch's device allocs"));
        }
    }
    failures
}

/// The generators of `benches/anchors/torch_synthetic_replay.py` are ports
/// of this file's: PyTorch's expandable run (which splits every block as
/// strata does) peaked at the same allocated bytes as strata's replay on
/// every workload it recorded.
#[test]
fn pytorchs_synthetic_figures_are_of_these_workloads() {
    let torch = torch_synthetic();
    assert_eq!(torch.len(), 3 * 143);
    for (name, t) in synthetic_seeds([1, 2, 24, 77, 143]) {
        let r = replay(&t, "", 1);
        let torch_allocated = torch.get(&name).map(|t| t.expandable_allocated);
        assert_eq!(Some(r.peak_allocated), torch_allocated, "{name}");
    }
}

/// The seeds named by the environment variable `var` (`FROM-TO`), or
/// `default` when it is unset or not of that form.
fn seeds_from_env(
    var: &str,
    default: std::ops::RangeInclusive<u64>,
) -> std::ops::RangeInclusive<u64> {
    let parse = |v: String| -> Option<(u64, u64)> {
        let (a, b) = v.split_once('-')?;
        Some((a.trim().parse().ok()?, b.trim().parse().ok()?))
    };
    match std::env::var(var).ok().and_then(parse) {
        Some((a, b)) => a..=b,
        None => default,
    }
}

/// The held-out seeds: 4 to 23, or `STRATA_HELD_OUT_SEEDS=FROM-TO` (seeds
/// 24 to 143 were first drawn in session 20, docs/benchmarks.md).
fn held_out_seeds() -> std::ops::RangeInclusive<u64> {
    seeds_from_env("STRATA_HELD_OUT_SEEDS", 4..=23)
}

/// Every held-out synthetic workload settles: no driver call or stream
/// synchronisation from its eighth pass to its twelfth. Not yet the goal
/// (none after two warm-up passes), but a workload that keeps paying in
/// every pass is the worst case, and before the settling rule
/// (repeats.rs, "Settling") varying_batch_training seeds 5, 13 and 19 were
/// such workloads.
#[test]
fn synthetic_workloads_settle_on_held_out_seeds() {
    let mut failures = Vec::new();
    for (name, t) in synthetic_seeds(held_out_seeds()) {
        let r = replay(&t, "", 12);
        if r.pays_from(7) {
            failures.push(format!("{name}: {:?}", r.per_pass));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// The steady-state goals on the held-out synthetic workloads (seeds 4 to
/// 23 unless `STRATA_HELD_OUT_SEEDS` says otherwise): no driver call or
/// stream synchronisation after two warm-up passes, reserved memory within
/// the hold bound. Met on seeds 4 to 23 since session 47's rule for the runs
/// after a run at the peak (nine of the sixty paid in their fourth pass
/// or later before it); over seeds 4 to 1150, 8 of 3,441 workloads still pay
/// after their second pass (705 before that rule, 35 before session 48's
/// holding growths that create every page), so wider ranges are expected to
/// fail.
#[test]
fn synthetic_workloads_stop_paying_after_two_warm_up_passes_on_held_out_seeds() {
    assert_synthetic_steady_state(synthetic_seeds(held_out_seeds()), 8);
}

/// A workload whose repeating growths each recur twice a round (so each is
/// only a weak repetition, and no round is ever measured) settles all the
/// same once a run has ended: prefetch_training of seed 1001 (a seed no rule
/// was designed on) moved 5 pages twice in every pass, 22 memory calls a pass
/// to its fortieth, until a weak repetition whose earliest occurrence came
/// before a run ended counted as strong (repeats.rs, session 33); now none
/// from its fourth pass.
#[test]
fn a_workload_of_weak_repetitions_settles_once_a_run_has_ended() {
    assert_prefetch_training_settles(1001, 12, 3);
}

/// Replays prefetch_training of `seed` for `passes` passes and asserts that
/// it makes no driver call from its pass `from` (counted from 0) and stays
/// within the hold bound.
fn assert_prefetch_training_settles(seed: u64, passes: usize, from: usize) {
    let name = format!("prefetch_training/{seed}");
    let (_, t) = synthetic_seeds([seed])
        .into_iter()
        .find(|(n, _)| *n == name)
        .expect("a prefetch_training workload of every seed");
    let r = replay(&t, "", passes);
    assert!(!r.pays_from(from), "{name}: {:?}", r.per_pass);
    assert!(r.peak_reserved_all_passes <= hold_bound(r.peak_allocated));
}

/// After a run at the peak, a growth that holds creates its pages rather
/// than moving pages back from a free block to stitched mappings of theirs:
/// prefetch_training of seed 148 (a seed no rule was designed on) moved 4
/// pages back in its third pass, emptying the block its fourth pass needed
/// there, and grew 21 pages (43 memory calls) in that fourth pass; now none
/// after its second (docs/allocator.md, "After a run at the peak").
#[test]
fn a_holding_growth_after_a_run_at_the_peak_leaves_free_blocks_in_place() {
    assert_prefetch_training_settles(148, 8, 2);
}

/// The first-pass goal on the synthetic workloads: peak reserved at most 1.05
/// x peak allocated. On the smallest ones (peak allocated 336-366 MiB) the
/// margin's 10-page floor (20 MiB) alone was 5.5-6% of peak allocated
/// (varying_batch_training/1 reserved 1.058 x, prefetch_training/3 1.0503 x);
/// once a block of a page or more has been freed the floor is now at most
/// 1/22 of peak allocated (docs/allocator.md).
#[test]
fn synthetic_workloads_meet_the_first_pass_goal() {
    let mut failures = Vec::new();
    for (name, t) in synthetic() {
        let r = replay(&t, "", 1);
        let ratio = r.peak_reserved as f64 / r.peak_allocated as f64;
        if ratio > 1.05 {
            failures.push(format!("{name}: first pass {ratio:.4}"));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// A randomly drawn training loop (not one of the generators the rules were
/// designed on, session 66): 3-26 layers of random weight sizes (1 KiB to
/// 256 MiB) and widths, 2-7 steps of random batch sizes, activations kept for
/// the backward pass, 0-2 temporaries per layer, weight gradients freed or
/// accumulated over the steps, an optimizer's temporaries, and for a third of
/// the seeds the next batch copied in on a side stream.
fn random_training(seed: u64) -> Trace {
    let mut r = Lcg(seed.wrapping_mul(7919) + 17);
    let mut b = Builder::default();
    const KIB: u64 = 1024;
    let layers = 3 + r.below(24) as usize;
    let wsize: Vec<u64> = (0..layers)
        .map(|_| (1 + r.below(8)) * (KIB << r.below(15)))
        .collect();
    let width: Vec<u64> = (0..layers).map(|_| 64 * (1 + r.below(64))).collect();
    let weights: Vec<usize> = wsize.iter().map(|&w| b.alloc(w, 0)).collect();
    let steps = 2 + r.below(6);
    let batches: Vec<u64> = (0..steps).map(|_| 1 + r.below(64)).collect();
    let prefetch = r.below(3) == 0;
    let accumulate = r.below(2) == 0;
    let temps = r.below(3);
    let act = |batch: u64, w: u64| batch * w * 64;
    let mut grads: Vec<Option<usize>> = vec![None; layers];
    let mut next_in = prefetch.then(|| b.alloc(act(batches[0], width[0]), 1));
    for (si, &batch) in batches.iter().enumerate() {
        let input = next_in
            .take()
            .unwrap_or_else(|| b.alloc(act(batch, width[0]), 0));
        if prefetch && si + 1 < batches.len() {
            next_in = Some(b.alloc(act(batches[si + 1], width[0]), 1));
        }
        let mut acts = Vec::new();
        for &w in &width {
            let a = b.alloc(act(batch, w), 0);
            for _ in 0..temps {
                let t = b.alloc(batch * w * 32 * (1 + r.below(4)), 0);
                b.free(t);
            }
            acts.push(a);
        }
        let loss = b.alloc(4, 0);
        b.free(loss);
        for l in (0..layers).rev() {
            let grad_in = b.alloc(act(batch, width[l]), 0);
            let grad_w = b.alloc(wsize[l], 0);
            match grads[l] {
                None if accumulate => grads[l] = Some(grad_w),
                _ => b.free(grad_w),
            }
            b.free(acts.pop().unwrap());
            b.free(grad_in);
        }
        b.free(input);
        if !accumulate || si + 1 == batches.len() {
            for (l, g) in grads.iter_mut().enumerate() {
                let t = b.alloc(wsize[l], 0);
                b.free(t);
                if let Some(g) = g.take() {
                    b.free(g);
                }
            }
        }
    }
    for w in weights {
        b.free(w);
    }
    b.trace()
}

/// Random training loops that paid memory calls in their fourth pass before
/// session 66 (seed 584, for one: 566, 7, 7 and 61 calls in passes 1-4): a
/// side stream's growth held only the pages of its request in a gap between
/// mapped ranges, overwriting stitched mappings the next round needed, and
/// paid again each round until it landed where a hold chunk fits. A holding
/// growth past a run at the peak now looks for room for its chunk first
/// (`needs_room_for_chunk` in `expandable/mod.rs`): each settles by its
/// third pass.
#[test]
fn random_training_loops_that_paid_late_settle_by_their_third_pass() {
    let seeds = [453, 584, 1150, 1172, 1340, 1488, 1746, 1821, 2948, 2955];
    assert_random_settle("random_training", random_training, &seeds, 6, 3);
}

/// Replays `generate(seed)` for `passes` passes for each of `seeds` and
/// asserts that none makes a memory driver call or stream synchronisation
/// from its pass `from` (counted from 0).
fn assert_random_settle(
    name: &str,
    generate: fn(u64) -> Trace,
    seeds: &[u64],
    passes: usize,
    from: usize,
) {
    for &seed in seeds {
        let r = replay(&generate(seed), "", passes);
        assert!(
            !r.pays_from(from),
            "{name}/{seed}: calls and syncs by pass {:?}",
            r.per_pass
        );
    }
}

/// A random training loop whose side stream's small-pool growth, after a
/// run at the peak, created a page (it held) while the default stream's
/// small-pool growth later in the round moved that page to itself (it did
/// not: only large-pool growths held whatever their context), so the side
/// stream grew again in the next round: random_training/6018 (drawn after
/// the rules, session 67) paid 6 and 4 memory calls in its third and
/// fourth passes. Every growth after a run at the peak now holds: none
/// from its third pass.
#[test]
fn a_small_pool_growth_after_a_run_at_the_peak_holds() {
    assert_random_settle("random_training", random_training, &[6018], 6, 2);
}

/// Serving workloads whose large pool held up to the hold limit after a run
/// at the peak, after which a small-pool growth created a page (it recycles
/// only its own pool's pages there, and the small pool had none free):
/// variable_length_serving/421, /3125, /5131 and /5680 (421 among the seeds
/// 4-1150 of the held-out test, the other three found in session 68 over
/// seeds 2301-5750) reserved up to 1.533 × peak allocated, past the hold
/// bound. Such a page now comes from the other pool's free blocks: within
/// the bound, and none of them pays from its third pass.
#[test]
fn the_pools_separation_never_takes_reserved_memory_past_the_hold_bound() {
    // Named one by one, not through `synthetic_seeds`, which `STRATA_TRACE`
    // can narrow to nothing.
    let workloads = [421, 3125, 5131, 5680]
        .map(|seed| {
            (
                format!("variable_length_serving/{seed}"),
                variable_length_serving(seed),
            )
        })
        .into();
    assert_synthetic_steady_state(workloads, 8);
}

/// How far the rules carry on random training loops (session 66; ignored, a
/// measurement): over seeds 1-3000 (`STRATA_RANDOM_SEEDS=FROM-TO`), how many
/// workloads pay memory calls after their third pass and how many first
/// passes exceed 1.05 × peak allocated (small workloads, whose margin floor
/// is a large share of their memory, docs/allocator.md).
#[test]
#[ignore = "a measurement over 3000 random workloads; run with --ignored --nocapture"]
fn random_training_loops_settle() {
    measure_settling("random_training", random_training, 1..=3000);
}

/// Replays `generate(seed)` for 8 passes for each seed of
/// `STRATA_RANDOM_SEEDS=FROM-TO` (`default` otherwise), and prints how many
/// pay memory calls after their third pass (each listed), how many first
/// passes exceed 1.05 × peak allocated, and which workloads reserve more than
/// the hold bound over the 8 passes. `replay` checks the allocator's books
/// after every pass.
fn measure_settling(
    name: &str,
    generate: fn(u64) -> Trace,
    default: std::ops::RangeInclusive<u64>,
) {
    let seeds = seeds_from_env("STRATA_RANDOM_SEEDS", default);
    let (mut late, mut over, mut above) = (Vec::new(), 0, Vec::new());
    for seed in seeds.clone() {
        let r = replay(&generate(seed), "", 8);
        let ratio = r.peak_reserved as f64 / r.peak_allocated.max(1) as f64;
        if r.pays_from(3) {
            late.push(format!("{name}/{seed}: {:?}", r.per_pass));
        }
        over += usize::from(ratio > 1.05);
        if r.peak_reserved_all_passes > hold_bound(r.peak_allocated) {
            above.push(format!("{name}/{seed}"));
        }
    }
    println!(
        "seeds {}-{}: {} pay after their third pass, {over} above 1.05 x in their first, {} above the hold bound\n{late:#?}\n{above:?}",
        seeds.start(),
        seeds.end(),
        late.len(),
        above.len()
    );
}

/// A randomly drawn serving workload (session 66): 2-25 layers of one width
/// (64-2048), 5-44 requests of random batch (1-32) and length (1-512), each
/// layer allocating its projections and an attention matrix, and, for half
/// the seeds, keeping a per-layer cache until the request ends.
fn random_serving(seed: u64) -> Trace {
    let mut r = Lcg(seed.wrapping_mul(104729) + 3);
    let mut b = Builder::default();
    let layers = 2 + r.below(24);
    let hidden = 64 * (1 + r.below(32));
    let weights: Vec<usize> = (0..layers)
        .map(|_| b.alloc(hidden * hidden * 4 * (1 + r.below(4)), 0))
        .collect();
    let cache = r.below(2) == 0;
    for _ in 0..(5 + r.below(40)) {
        let (batch, len) = (1 + r.below(32), 1 + r.below(512));
        let h = batch * len * hidden * 4;
        let mut kept = Vec::new();
        let mut x = b.alloc(h, 0);
        for _ in 0..layers {
            let qkv = b.alloc(3 * h, 0);
            let scores = b.alloc(batch * 8 * len * len * 2, 0);
            let ctx = b.alloc(h, 0);
            b.free(scores);
            if cache {
                kept.push(qkv);
            } else {
                b.free(qkv);
            }
            let y = b.alloc(h, 0);
            b.free(ctx);
            b.free(x);
            x = y;
        }
        b.free(x);
        for k in kept {
            b.free(k);
        }
    }
    for w in weights {
        b.free(w);
    }
    b.trace()
}

/// Random serving workloads that paid memory calls after their third pass
/// before session 67, some in every one of their eight (seed 831: 152
/// memory calls in its second pass, then 91 in each): a holding growth
/// after a run at the peak (nearly) filled the gap after a mapped range, so
/// at the next round's start the free block there was larger, best fit
/// placed that round's earlier requests differently, and the same point of
/// the workload, or another, found its layout moved on and filled the next
/// gap. A growth that grows again since that run ended (at the same point,
/// or in a later round than one that grew) now takes a placement that
/// leaves a chunk of unmapped space after it (`needs_room_for_chunk` in
/// `expandable/mod.rs`): each settles by its third pass.
#[test]
fn random_serving_workloads_that_kept_paying_settle_by_their_third_pass() {
    let seeds = [
        310, 333, 435, 504, 519, 688, 759, 820, 831, 899, 969, 1040, 1058, 1080, 1195,
    ];
    assert_random_settle("random_serving", random_serving, &seeds, 8, 3);
}

/// Random serving workloads that still paid memory calls after their third
/// pass in session 68 (seed 393: 160 and 61 calls in its third and fourth
/// passes): the first large growth of a round after a run at the peak
/// filled a gap between mapped ranges (a 110 MiB request, 22 pages created
/// in a gap of 22), so the next round found its layout moved on and grew
/// again, and only then, growing again, looked for room past the mapped
/// ranges. A growth for a request larger than a hold chunk now looks for
/// that room the first time, unless the request would need more than 1.5
/// times the pages there (`needs_room_for_chunk`, third case, in
/// `expandable/mod.rs`): each settles by its third pass. Seeds 393-1479
/// are of `random_serving_settles`' default range, the others of the
/// ranges 1501-4500 and 4501-7500 (docs/allocator.md, "After a run at the
/// peak").
#[test]
fn random_serving_workloads_whose_first_growth_filled_a_gap_settle_by_their_third_pass() {
    let seeds = [
        393, 645, 1479, 2283, 3046, 3406, 4604, 5026, 5482, 6079, 6646, 6749, 6853,
    ];
    assert_random_settle("random_serving", random_serving, &seeds, 8, 3);
}

/// Workloads whose growth that grew again after a run at the peak stayed in
/// a gap just its size because its pages could all move back to stitched
/// mappings of theirs, and then created them instead, as a growth that
/// holds within the hold limit does (`creates_every_page`), so that the next
/// round grew by a chunk: prefetch_training/4834 (drawn in session 68; 7
/// and 45 memory calls in its third and fourth passes) and random serving
/// workloads that paid in their fourth pass. Such a growth now looks for
/// room for a chunk beyond its pages (`needs_room_for_chunk`): none pays
/// from its fourth pass.
#[test]
fn a_growth_that_will_create_its_pages_looks_for_room_for_a_chunk() {
    assert_synthetic_steady_state(
        vec![("prefetch_training/4834".into(), prefetch_training(4834))],
        8,
    );
    assert_random_settle(
        "random_serving",
        random_serving,
        &[1669, 2204, 3980, 3987, 6788],
        8,
        3,
    );
}

/// How far the rules carry on random serving workloads (session 66; ignored,
/// a measurement): over seeds 1-1500 (`STRATA_RANDOM_SEEDS=FROM-TO`), how
/// many pay memory calls after their third pass and how many first passes
/// exceed 1.05 × peak allocated. 40 paid late when written (39 before that
/// session's rule for room for the hold chunk), most of them holding a
/// 30-page chunk for a request of more than 30 pages in a gap between mapped
/// ranges round after round; 6 since session 67's rule for a growth that
/// grows again (seeds 1501-4500: 68 before it, 12 after, 9 since session
/// 68's room for a growth that will create its pages; seeds 4501-7500,
/// drawn after it was chosen: 54 and 13); 3 since session 69's room for a
/// first large growth (1501-4500: 7; 4501-7500: 6).
#[test]
#[ignore = "a measurement over 1500 random workloads; run with --ignored --nocapture"]
fn random_serving_settles() {
    measure_settling("random_serving", random_serving, 1..=1500);
}
