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

// ----- issue 17: ddp_gpt on the CPU (in-process ranks) -----

fn ddp_gpt(extra: &[&str]) -> serde_json::Value {
    let mut args = TINY.to_vec();
    args.extend_from_slice(extra);
    run("ddp_gpt", &args)
}

fn losses(v: &serde_json::Value) -> Vec<f64> {
    v["losses"]
        .as_array()
        .expect("losses")
        .iter()
        .map(|l| l.as_f64().unwrap())
        .collect()
}

#[test]
fn ddp_gpt_one_rank_matches_gpt_and_two_ranks_match_the_global_batch() {
    let steps = ["--steps", "4", "--batch", "4"];
    let single = gpt(&steps);
    let one = ddp_gpt(&[&steps[..], &["--gpus", "1"]].concat());
    assert_eq!(one["gpus"], 1);
    assert_eq!(one["params"], single["params"]);
    assert_eq!(
        losses(&one),
        losses(&single),
        "one rank trains exactly as gpt"
    );
    // Two ranks of two rows each: the mean of their losses is the loss of
    // the four-row batch, and the averaged gradients are its gradients, so
    // the run follows gpt's up to rounding.
    let two = ddp_gpt(&[&steps[..], &["--gpus", "2"]].concat());
    assert_eq!(two["gpus"], 2);
    for (a, b) in losses(&two).iter().zip(losses(&single)) {
        assert!((a - b).abs() <= 2e-3 * b.abs(), "{a} vs {b}");
    }
    let params = two["params"].as_u64().unwrap();
    for r in two["per_rank"].as_array().unwrap() {
        // f32 gradients of every parameter live in the buckets, allocated
        // from the device's allocator (inside its peak).
        assert_eq!(r["bucket_bytes"].as_u64().unwrap(), params * 4);
        assert!(r["peak_allocated"].as_u64().unwrap() >= params * 4);
        // The tiny model fits one 25 MiB bucket, started from backward.
        assert_eq!(r["buckets"], 1);
        assert_eq!(r["buckets_launched_in_backward"], 1);
        assert!(r["nccl_init_bytes"].is_null());
    }
}

fn run_fails(name: &str, args: &[&str]) -> String {
    let out = Command::new(example(name))
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {name}: {e}"));
    assert_eq!(out.status.code(), Some(2), "{name} {args:?} should fail");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn ddp_gpt_bad_rank_counts_and_missing_gpus_are_errors() {
    let mut args = TINY.to_vec();
    args.extend_from_slice(&["--steps", "1", "--gpus", "3"]);
    let e = run_fails("ddp_gpt", &args);
    assert!(e.contains("divide --batch 2"), "{e}");
    let more = (strata_tensor::cuda::device_count() + 1).to_string();
    let e = run_fails(
        "ddp_gpt",
        &[
            "--device", "cuda", "--gpus", &more, "--batch", "8", "--steps", "1",
        ],
    );
    assert!(e.contains("GPU(s) are visible"), "{e}");
    let e = run_fails("allreduce_bench", &["--gpus", &more]);
    assert!(e.contains("GPU(s) are visible"), "{e}");
}
