//! GPU speed of the transformer ops of issue 12 at GPT-2-small shapes, one
//! JSON line per measurement: `{"bench": "transformer_ops", "impl":
//! "strata", "op", "dtype", "pass": "fwd"|"bwd", "shape", "ms"}`.
//! `benches/anchors/torch_transformer_ops.py` prints PyTorch's lines for the
//! same ops and shapes (`"impl": "torch"`); run both in one device call.
//!
//! ```text
//! cargo run --release -p strata-examples --example transformer_ops [-- --iters N]
//! ```
//!
//! * layer norm over `[8·1024, 768]` (weight and bias; bwd = dx, dweight, dbias);
//! * cross-entropy over `[8·1024, 8192]` logits, mean reduction (bwd = dlogits);
//! * embedding of `[8, 1024]` indices into `[8192, 768]` (bwd = dweight);
//! * softmax over the last dim of `[8·12·1024, 1024]` attention scores (bwd =
//!   dx from the saved output);
//! * GELU (tanh approximation) over `[8·1024, 3072]` (bwd = dx from the
//!   saved input).
//!
//! Each figure is the median of `--iters` CUDA-event-timed calls (default
//! 20) after 3 warm-ups, in f32 and bf16. Backward passes call the same
//! tensor-level backward functions strata-autograd records, on saved values
//! from one forward. Without a GPU the program prints why and exits with 2.
//!
//! Each op is one entry of `BENCHES` (a name and a function timing it for a
//! dtype); the anchor script has the matching list.

use strata::Device;
use strata_examples::gpu_timing::{event_ms, iters_arg};
use strata_tensor::{cuda, CrossEntropyArgs, DType, GeluApprox, Result, Tensor};

const GPU: Device = Device::Cuda(0);

/// GPT-2 small: batch 8, sequence 1024, width 768, a 8192-token vocabulary.
const B: usize = 8;
const T: usize = 1024;
const D: usize = 768;
const V: usize = 8192;

/// Milliseconds per call of `f`, timed with CUDA events on the current stream.
fn time_ms(iters: usize, f: impl FnMut() -> Result<()>) -> Result<f64> {
    event_ms(GPU, iters, f)
}

fn line(op: &str, dtype: DType, pass: &str, shape: &[usize], ms: f64) {
    println!(
        "{}",
        serde_json::json!({
            "bench": "transformer_ops", "impl": "strata", "op": op, "dtype": dtype.name(),
            "pass": pass, "shape": shape, "ms": ms,
        })
    );
}

fn layer_norm(dtype: DType, iters: usize) -> Result<()> {
    let shape = [B * T, D];
    let x = Tensor::randn(&shape, dtype, 1, GPU)?;
    let w = Tensor::randn(&[D], dtype, 2, GPU)?;
    let b = Tensor::randn(&[D], dtype, 3, GPU)?;
    let fwd = time_ms(iters, || {
        x.layer_norm_forward(&[D], Some(&w), Some(&b), 1e-5)
            .map(drop)
    })?;
    line("layer_norm", dtype, "fwd", &shape, fwd);
    let (_, mean, rstd) = x.layer_norm_forward(&[D], Some(&w), Some(&b), 1e-5)?;
    let dy = Tensor::randn(&shape, dtype, 4, GPU)?;
    let bwd = time_ms(iters, || {
        Tensor::layer_norm_backward(&dy, &x, &mean, &rstd, Some(&w), &[D], [true; 3]).map(drop)
    })?;
    line("layer_norm", dtype, "bwd", &shape, bwd);
    Ok(())
}

fn cross_entropy(dtype: DType, iters: usize) -> Result<()> {
    let shape = [B * T, V];
    let x = Tensor::randn(&shape, dtype, 5, GPU)?;
    // randint, as the PyTorch anchor draws them (its range is known, so the
    // target check reads nothing back from the device).
    let t = Tensor::randint(0, V as i64, &[B * T], None, 6, GPU)?;
    let args = CrossEntropyArgs::default();
    let fwd = time_ms(iters, || x.cross_entropy_forward(&t, args).map(drop))?;
    line("cross_entropy", dtype, "fwd", &shape, fwd);
    let (loss, saved) = x.cross_entropy_forward(&t, args)?;
    let saved = saved.expect("class targets keep their logsumexp");
    let g = Tensor::ones(loss.shape(), loss.dtype(), GPU)?;
    let bwd = time_ms(iters, || {
        x.cross_entropy_backward(&g, &saved, args).map(drop)
    })?;
    line("cross_entropy", dtype, "bwd", &shape, bwd);
    Ok(())
}

fn embedding(dtype: DType, iters: usize) -> Result<()> {
    let w = Tensor::randn(&[V, D], dtype, 7, GPU)?;
    let idx = Tensor::randint(0, V as i64, &[B, T], None, 8, GPU)?;
    let fwd = time_ms(iters, || Tensor::embedding(&idx, &w, None).map(drop))?;
    line("embedding", dtype, "fwd", &[B, T, V, D], fwd);
    // The weight gradient: a scatter-add of the upstream rows into zeros.
    let g = Tensor::randn(&[B * T, D], dtype, 9, GPU)?;
    let flat = idx.reshape(&[-1, 1])?.expand(&[-1, D as i64])?;
    let bwd = time_ms(iters, || {
        Tensor::zeros(&[V, D], dtype, GPU)?
            .scatter_add(0, &flat, &g)
            .map(drop)
    })?;
    line("embedding", dtype, "bwd", &[B, T, V, D], bwd);
    Ok(())
}

/// Softmax over the last dim of attention-score rows; its backward from the
/// saved output (what `softmax`'s recorded backward computes).
fn softmax(dtype: DType, iters: usize) -> Result<()> {
    let shape = [B * 12 * T, T];
    let x = Tensor::randn(&shape, dtype, 10, GPU)?;
    let fwd = time_ms(iters, || x.softmax(-1, None).map(drop))?;
    line("softmax", dtype, "fwd", &shape, fwd);
    let y = x.softmax(-1, None)?;
    let dy = Tensor::randn(&shape, dtype, 12, GPU)?;
    let bwd = time_ms(iters, || y.softmax_backward(&dy, -1).map(drop))?;
    line("softmax", dtype, "bwd", &shape, bwd);
    Ok(())
}

/// GELU (tanh approximation, as GPT-2 uses it) over the MLP's activations;
/// its backward from the saved input.
fn gelu(dtype: DType, iters: usize) -> Result<()> {
    let shape = [B * T, 4 * D];
    let x = Tensor::randn(&shape, dtype, 11, GPU)?;
    let fwd = time_ms(iters, || x.gelu(GeluApprox::Tanh).map(drop))?;
    line("gelu_tanh", dtype, "fwd", &shape, fwd);
    let dy = Tensor::randn(&shape, dtype, 13, GPU)?;
    let bwd = time_ms(iters, || dy.gelu_backward(&x, GeluApprox::Tanh).map(drop))?;
    line("gelu_tanh", dtype, "bwd", &shape, bwd);
    Ok(())
}

/// The timed ops (one entry per op; the PyTorch anchor has the same list).
type Bench = fn(DType, usize) -> Result<()>;
const BENCHES: &[(&str, Bench)] = &[
    ("layer_norm", layer_norm),
    ("cross_entropy", cross_entropy),
    ("embedding", embedding),
    ("softmax", softmax),
    ("gelu", gelu),
];

fn main() {
    let iters = iters_arg(20, 5);
    if !strata_tensor::has_backend(GPU) {
        eprintln!(
            "transformer_ops needs a CUDA GPU: {}",
            cuda::unavailable_reason().unwrap_or_default()
        );
        std::process::exit(2);
    }
    for dtype in [DType::F32, DType::BF16] {
        for (name, bench) in BENCHES {
            if let Err(e) = bench(dtype, iters) {
                eprintln!("{name} {dtype}: {e}");
                std::process::exit(1);
            }
        }
    }
}
