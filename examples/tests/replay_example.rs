//! The `replay` example reads a trace as `../shared/anchors/torch_bench.py`
//! reads it, so that both replay the same work: a 0-byte allocation is no
//! operation, a free of an address the trace never allocated is skipped, an
//! address allocated again while live leaves the earlier block live to the end
//! of the pass, and a trace without a workload name is named after its file.
//! A file that is not a trace is refused with a message, not a panic.

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
    let out = Command::new(replay())
        .args(["--json", "--passes", "3", "--warmup", "1"])
        .arg(&t)
        .output()
        .expect("runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "replay failed: {stderr}");
    assert!(
        stderr.contains("2 frees of addresses the trace never allocated skipped")
            && stderr.contains("1 allocations of a live address"),
        "{stderr}"
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
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
