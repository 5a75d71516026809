//! The training examples on the CPU at tiny sizes (CI-cheap): `gpt` learns,
//! keeps allocated memory flat across steps, has PyTorch's parameter count,
//! checkpointing lowers its peak, and autocast bf16 runs; `memory_hungry`
//! runs each of its modes. The example binaries are the ones `cargo test`
//! builds next to this test.

use std::path::PathBuf;
use std::process::Command;

fn example(name: &str) -> PathBuf {
    // target/<profile>/deps/<this test> -> target/<profile>/examples/<name>
    let exe = std::env::current_exe().expect("test path");
    exe.parent()
        .and_then(|d| d.parent())
        .expect("target dir")
        .join("examples")
        .join(name)
}

fn run(name: &str, args: &[&str]) -> serde_json::Value {
    let out = Command::new(example(name))
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {name}: {e}"));
    assert!(
        out.status.success(),
        "{name} {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = String::from_utf8(out.stdout).expect("utf-8");
    serde_json::from_str(line.trim()).unwrap_or_else(|e| panic!("bad JSON {line:?}: {e}"))
}

const TINY: &[&str] = &[
    "--device",
    "cpu",
    "--layers",
    "2",
    "--d-model",
    "64",
    "--heads",
    "4",
    "--seq",
    "32",
    "--batch",
    "2",
    "--vocab",
    "256",
    "--warmup",
    "0",
];

fn gpt(extra: &[&str]) -> serde_json::Value {
    let mut args = TINY.to_vec();
    args.extend_from_slice(extra);
    run("gpt", &args)
}

#[test]
fn gpt_tiny_learns_with_flat_memory_and_pytorchs_parameter_count() {
    let r = gpt(&["--steps", "30"]);
    assert_eq!(
        r["params"], 134912,
        "torch_gpt.py's count for this configuration"
    );
    assert_eq!(r["impl"], "strata");
    let (first, last) = (
        r["loss_first"].as_f64().unwrap(),
        r["loss_last"].as_f64().unwrap(),
    );
    assert!(
        (first - (256f64).ln()).abs() < 0.5,
        "starts near ln(vocab): {first}"
    );
    assert!(last < first - 0.3, "the loss falls: {first} -> {last}");
    let alloc: Vec<u64> = r["allocated_after_step"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    // From the second step on (AdamW's moments exist) allocated memory is the same.
    assert!(alloc[1..].iter().all(|&a| a == alloc[1]), "{alloc:?}");
    for k in [
        "peak_allocated",
        "peak_reserved",
        "num_device_alloc",
        "step_ms",
        "tokens_per_s",
    ] {
        assert!(r[k].as_f64().unwrap() > 0.0, "{k}");
    }
}

#[test]
fn gpt_tiny_checkpointing_lowers_peak_and_autocast_bf16_runs() {
    // Longer sequences and more blocks than the tiny model, so that the
    // activations (what checkpointing drops), not the optimizer state, set
    // the peak; later flags override the tiny configuration's.
    let big = [
        "--steps", "2", "--layers", "4", "--seq", "128", "--batch", "8",
    ];
    let plain = gpt(&big);
    let ckpt = gpt(&[&big[..], &["--checkpoint", "every"]].concat());
    let p0 = plain["peak_allocated"].as_i64().unwrap();
    let p1 = ckpt["peak_allocated"].as_i64().unwrap();
    assert!(p1 < p0, "checkpointing: {p1} vs plain {p0}");
    // Same model, same data: the same losses (recomputation is exact).
    assert!(
        (plain["loss_last"].as_f64().unwrap() - ckpt["loss_last"].as_f64().unwrap()).abs() < 1e-3
    );
    let ac = gpt(&["--steps", "2", "--precision", "autocast-bf16"]);
    assert!(
        (ac["loss_first"].as_f64().unwrap() - plain["loss_first"].as_f64().unwrap()).abs() < 0.05
    );
    let bf = gpt(&["--steps", "2", "--precision", "bf16"]);
    assert!(bf["loss_first"].as_f64().unwrap().is_finite());
}

#[test]
fn memory_hungry_runs_every_mode_on_the_cpu() {
    let base = ["--device", "cpu", "--layers", "2", "--batch", "8"];
    let mut peaks = Vec::new();
    for extra in [
        &[][..],
        &["--checkpoint", "every"][..],
        &["--checkpoint", "every:2"][..],
        &["--autocast", "bf16"][..],
        &["--dtype", "bf16"][..],
    ] {
        let mut args = base.to_vec();
        args.extend_from_slice(extra);
        let r = run("memory_hungry", &args);
        assert_eq!(r["bench"], "mlp48");
        assert_eq!(r["layers"], 2);
        assert!(
            r["loss_last"].as_f64().unwrap() < r["loss_first"].as_f64().unwrap(),
            "{r}"
        );
        peaks.push(r["peak_allocated"].as_i64().unwrap());
    }
    // bf16 parameters: about half the f32 run's peak.
    assert!(peaks[4] * 10 < peaks[0] * 6, "{peaks:?}");
}
