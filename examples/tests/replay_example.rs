//! The `replay` example reads a trace as `../shared/anchors/torch_bench.py`
//! reads it, so that both replay the same work: a 0-byte allocation is no
//! operation, a free of an address the trace never allocated is skipped, an
//! address allocated again while live leaves the earlier block live to the end
//! of the pass, and a trace without a workload name is named after its file.
//! An action the format does not name is skipped and reported. A file that is
//! not a trace is refused with a message, not a panic.

use std::path::PathBuf;
use std::process::Command;

fn replay() -> PathBuf {
    // target/<profile>/deps/<this test> -> target/<profile>/examples/replay
    let exe = std::env::current_exe().expect("test path");
    exe.parent()
        .and_then(|d| d.parent())
        .expect("target dir")
        .join("examples")
        .join("replay")
}

fn write(name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("strata-replay-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// Replays `trace` with `--json` (3 passes after one warm-up), which must
/// succeed: its stderr, and its one JSON object.
fn replay_json(trace: &std::path::Path) -> (String, serde_json::Value) {
    let out = Command::new(replay())
        .args(["--json", "--passes", "3", "--warmup", "1"])
        .arg(trace)
        .output()
        .expect("runs");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "replay failed: {stderr}");
    let v = serde_json::from_slice(&out.stdout).expect("one JSON object");
    (stderr, v)
}

#[test]
fn a_trace_with_lost_events_replays_the_work_pytorchs_anchor_replays() {
    // Two frees of addresses never allocated (one before anything, one a
    // second free of 2000), a 0-byte allocation, and 1000 allocated twice.
    let t = write(
        "lost_events.json",
        r#"{"events": [
            ["free_completed", 4096, 512, 0],
            ["alloc", 8192, 0, 0],
            ["alloc", 1000, 3000000, 0],
            ["alloc", 1000, 4000000, 0],
            ["alloc", 2000, 512, 7],
            ["free_completed", 1000, 4000000, 0],
            ["free_completed", 2000, 512, 7],
            ["free_completed", 2000, 512, 7]
        ]}"#,
    );
    let (stderr, v) = replay_json(&t);
    assert!(
        stderr.contains("2 frees of addresses the trace never allocated skipped")
            && stderr.contains("1 allocations of a live address"),
        "{stderr}"
    );
    // Three allocations (3000000, 4000000 and 512 bytes) and two frees.
    assert_eq!(v["ops"], 5);
    assert_eq!(v["trace"], "lost_events.json");
    // The first 1000 block stays live beside the second: both count.
    let peak = v["peak_allocated"].as_u64().unwrap();
    assert!(peak >= 7_000_512, "peak allocated {peak}");
    assert_eq!(v["warm_memory_calls_per_pass"], 0.0);
    // The fastest warm pass (torch_bench.py's statistic) is the least of the
    // warm passes' costs, and no more than their median.
    let passes: Vec<f64> = v["warm_pass_ns_per_op"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect();
    assert_eq!(passes.len(), 3);
    let fastest = v["ns_per_op_fastest_warm_pass"].as_f64().unwrap();
    assert_eq!(
        fastest,
        passes.iter().copied().fold(f64::INFINITY, f64::min)
    );
    assert!(fastest <= v["ns_per_op"].as_f64().unwrap());
    // The host clock probe, before and after the timed passes: a chain of
    // 2^21 steps takes well over a picosecond and well under a microsecond
    // a step on any host.
    let probe = v["clock_probe_ns_per_step"].as_array().unwrap();
    assert_eq!(probe.len(), 2);
    for p in probe {
        let p = p.as_f64().unwrap();
        assert!(p > 0.001 && p < 1000.0, "clock probe {p} ns per step");
    }
    // The host memory probe, after the first pass and after the timed
    // passes: a load that misses every cache takes more than a nanosecond
    // (a few cycles at least, where an L1 hit takes one) and far less than
    // a hundred microseconds.
    // The cache probe's loads hit a core's level-2 cache: at least a few
    // cycles each, and well under a memory load's microsecond.
    for (probe, low) in [
        ("memory_probe_ns_per_load", 1.0),
        ("cache_probe_ns_per_load", 0.1),
    ] {
        let probe = v[probe].as_array().unwrap();
        assert_eq!(probe.len(), 2);
        for p in probe {
            let p = p.as_f64().unwrap();
            assert!(p > low && p < 100_000.0, "{probe:?}: {p} ns per load");
        }
    }
}

#[test]
fn actions_the_format_does_not_name_are_reported_not_replayed() {
    // A misspelt free and an action of another format, beside the format's
    // own actions (none of which is reported).
    let t = write(
        "unknown_actions.json",
        r#"{"events": [
            ["segment_alloc", 0, 2097152, 0],
            ["alloc", 1000, 4096, 0],
            ["free_requested", 1000, 4096, 0],
            ["free", 1000, 4096, 0],
            ["oom", 0, 0, 0],
            ["free_completed", 1000, 4096, 0],
            ["segment_free", 0, 2097152, 0]
        ]}"#,
    );
    let (stderr, v) = replay_json(&t);
    assert!(
        stderr.contains("2 events with an action the trace format does not name skipped")
            && stderr.contains(r#"the first: "free""#),
        "{stderr}"
    );
    assert_eq!(v["ops"], 2);
}

#[test]
fn a_file_that_is_not_a_trace_is_refused_with_a_message() {
    for (name, text) in [
        ("garbage.json", "garbage"),
        ("no_events.json", r#"{"workload": "x"}"#),
        ("short_event.json", r#"{"events": [["alloc", 1, 2]]}"#),
    ] {
        let t = write(name, text);
        let out = Command::new(replay()).arg(&t).output().expect("runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{name}: {stderr}");
        assert!(
            stderr.contains(name) && stderr.contains("not a trace"),
            "{name}: {stderr}"
        );
    }
}

/// Session 57's hostile traces and arguments: each is refused with a message
/// and exit status 1, or replays (exit status 0); none panics. A trace
/// whose `segment_alloc` events name the simulator's own addresses, or a
/// range that wraps past 2^64, replays (the simulated device handed such a
/// range out twice, or wrapping, and the allocator refused it as a driver
/// bug); `--passes`/`--warmup` past a million are refused (`--passes
/// 100000000000000000` panicked reserving room for its timings).
#[test]
fn hostile_traces_and_arguments_are_refused_or_replayed_never_a_panic() {
    const SIM_BASE: u64 = 0x7f00_0000_0000;
    let refused: [(&str, String); 6] = [
        (
            "neg_size.json",
            r#"{"events": [["alloc", 1, -5, 0]]}"#.into(),
        ),
        (
            "float_size.json",
            r#"{"events": [["alloc", 1, 1.5, 0]]}"#.into(),
        ),
        ("truncated.json", r#"{"events": [["alloc", 1, 2"#.into()),
        ("empty.json", String::new()),
        (
            "neg_addr.json",
            r#"{"events": [["free_completed", -1, 5, 0]]}"#.into(),
        ),
        (
            "huge_addr.json",
            format!(r#"{{"events": [["alloc", {}0, 5, 0]]}}"#, u64::MAX),
        ),
    ];
    for (name, text) in &refused {
        let t = write(name, text);
        let out = Command::new(replay()).arg(&t).output().expect("runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{name}: {stderr}");
        assert!(stderr.contains("not a trace"), "{name}: {stderr}");
    }
    // A size no device holds: the allocator's out-of-memory error, named.
    let t = write(
        "huge_size.json",
        &format!(r#"{{"events": [["alloc", 1, {}, 0]]}}"#, u64::MAX),
    );
    let out = Command::new(replay()).arg(&t).output().expect("runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("out of memory"), "{stderr}");
    // A damaged gzip file.
    let t = write("bad.json.gz", "");
    std::fs::write(&t, b"\x1f\x8b\x08\x00garbage").unwrap();
    let out = Command::new(replay()).arg(&t).output().expect("runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("damaged gzip"), "{stderr}");

    let replayed = [
        (
            "seg_at_sim_base.json",
            format!(
                r#"{{"events": [["segment_alloc", {SIM_BASE}, 2097152, 0],
                    ["alloc", 1, 1048576, 0], ["alloc", 2, 1048576, 0],
                    ["alloc", 3, 3145728, 0], ["alloc", 4, 3145728, 0],
                    ["free_completed", 3, 3145728, 0]]}}"#
            ),
        ),
        (
            "seg_wraps.json",
            format!(
                r#"{{"events": [["segment_alloc", {}, 2097152, 0],
                    ["alloc", 1, 512, 0], ["alloc", 2, 3145728, 0]]}}"#,
                u64::MAX - 4095
            ),
        ),
        (
            "seg_null.json",
            r#"{"events": [["segment_alloc", 0, 2097152, 0], ["alloc", 1, 512, 0]]}"#.into(),
        ),
        (
            "unknown_free.json",
            r#"{"events": [["free_completed", 7, 512, 0], ["alloc", 1, 512, 0]]}"#.into(),
        ),
    ];
    for (name, text) in &replayed {
        let t = write(name, text);
        for conf in ["expandable_segments:False", "expandable_segments:True"] {
            let out = Command::new(replay())
                .args(["--passes", "3", "--conf", conf])
                .arg(&t)
                .output()
                .expect("runs");
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(0), "{name} {conf}: {stderr}");
        }
    }

    let t = write(
        "one_alloc.json",
        r#"{"events": [["alloc", 1, 512, 0], ["free_completed", 1, 512, 0]]}"#,
    );
    for args in [
        ["--passes", "100000000000000000"],
        ["--passes", "18446744073709551615"],
        ["--passes", "1000001"],
        ["--passes", "2"],
        ["--passes", "-3"],
        ["--warmup", "1000001"],
        ["--warmup", "-1"],
    ] {
        let out = Command::new(replay())
            .args(args)
            .arg(&t)
            .output()
            .expect("runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(
            stderr.contains(args[0]) && stderr.contains("1000000") && !stderr.contains("panic"),
            "{args:?}: {stderr}"
        );
    }
}
