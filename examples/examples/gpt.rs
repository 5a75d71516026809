//! The GPT-2-style decoder of `shared/anchors/torch_gpt.py`, trained on the
//! same synthetic task with the same step, printing the same JSON line
//! (`impl: "strata"`, plus `phases`: the median host and device time of each
//! phase of a step, `training::Phases`); run both in one device call and
//! compare.
//!
//! ```text
//! cargo run --release -p strata-examples --example gpt -- [--layers 12] [--d-model 768]
//!     [--heads 12] [--seq 1024] [--batch 8] [--vocab 8192] [--steps 10] [--warmup 3]
//!     [--precision f32|bf16|autocast-bf16] [--checkpoint none|every|every:K]
//!     [--attn naive] [--recompute attn,mlp|attn|attn-keep|mlp|none] [--device cuda|cpu] [--seed 0]
//!     [--rng torch|strata]
//! ```
//!
//! The model (torch_gpt.py's docstring): token and position embeddings; per
//! block `x += proj(attn(ln1(x)))`, `x += fc2(gelu_tanh(fc1(ln2(x))))` with
//! naive causal attention; `logits = head(ln_f(x))`; cross-entropy over every
//! position. Linear and embedding weights N(0, 0.02), biases 0, LayerNorm 1/0;
//! AdamW(lr 3e-4, betas (0.9, 0.95), eps 1e-8, weight decay 0.1).
//!
//! Same seed, same start (`--rng torch`, the default): the weights and the
//! four batches are the ones torch_gpt.py draws at `--seed`, reproduced on the
//! host by [`strata_tensor::torch_random`] (PyTorch's CPU generator for the
//! initialisation, its CUDA generator for the data, as on a GPU), so both
//! programs start from the same state and their losses can be compared step
//! for step. `--rng strata` draws them from strata's own generator instead
//! (weights with `Tensor::randn` on the device, data from a host splitmix64).
//! Only `--attn naive` exists.
//!
//! Memory: strata computes the same math as PyTorch eager but, by default
//! (`--recompute attn,mlp`), keeps less of it for backward:
//! * `attn`: the naive attention (`softmax(masked_fill(q kᵀ / sqrt(hd),
//!   future, -inf)) v`) runs as one recorded op,
//!   [`Var::attention`](strata_autograd::Var::attention), that saves only q,
//!   k and v and **recomputes the probabilities in backward** (one more
//!   batched GEMM and one fused softmax per layer), while PyTorch eager
//!   saves them (`[batch, heads, seq, seq]`, about half of all
//!   activations); the scale and the causal mask are fused into the softmax
//!   pass. `attn-keep` runs the same fused op but keeps the probabilities
//!   (PyTorch's memory).
//! * `mlp`: `fc2(gelu(h))` runs as
//!   [`Var::gelu_linear`](strata_autograd::Var::gelu_linear), which keeps
//!   `h` (as the GELU does anyway) and recomputes `gelu(h)` in backward,
//!   where PyTorch keeps both.
//!
//! `--recompute none` records the op-by-op graph PyTorch eager records
//! (matmul, div, masked_fill, softmax, matmul; gelu, linear), so both
//! figures can be shown.
//!
//! `STRATA_GPT_INIT=PREFIX` starts from a saved state instead of the seeded
//! one: the parameters (PyTorch's names) and the four batches (`data.K.x`,
//! `data.K.y`) of `PREFIX_init.safetensors`. `benches/anchors/torch_gpt_state.py`
//! writes torch_gpt.py's own state at a seed in that format, so that strata
//! trains from PyTorch's weights and batches and the losses can be compared
//! step for step (`STRATA_GPT_DUMP=PREFIX` writes strata's state the same way
//! for `benches/anchors/gpt_same_init.py`).
//!
//! `STRATA_GPT_TRACE=PREFIX` records the allocator's history for the run,
//! writes it as a trace (`PREFIX.json`, which the `replay` example replays,
//! for instance over the simulated GPU with expandable segments) and prints
//! to stderr what was live when allocated memory peaked, by call site
//! (`strata_examples::peak_live`).

use std::process::ExitCode;
use std::time::Instant;
use strata::tensor::generator::manual_seed;
use strata::{reset_accumulated_memory_stats, reset_peak_memory_stats};
use strata_autograd::nn::Module;
use strata_autograd::{AdamW, Optimizer, Var};
use strata_examples::gpt_model::{batches, gpt_args, Gpt, GptArgs, GPT_FLAGS};
use strata_examples::peak_live::live_at_peak;
use strata_examples::training::{median, peaks, round, Flags, Phases};
use strata_tensor::{cuda, load_safetensors, save_safetensors, DType, Device, Tensor};

type BoxResult<T> = Result<T, Box<dyn std::error::Error>>;

fn run(a: &GptArgs) -> BoxResult<serde_json::Value> {
    let dev = Device::parse(&a.device).map_err(|e| format!("--device {:?}: {e}", a.device))?;
    Tensor::zeros(&[1], DType::F32, dev)
        .map_err(|e| format!("device {dev} cannot be used: {e}"))?;
    strata::empty_cache(dev)?;
    reset_peak_memory_stats(dev)?;
    reset_accumulated_memory_stats(dev)?;
    let trace = std::env::var("STRATA_GPT_TRACE").ok();
    if trace.is_some() {
        strata::allocator(dev)?.record_history(Some(TRACE_ENTRIES));
    }
    manual_seed(a.seed);
    let mut model = Gpt::new(a, dev)?;
    if a.precision == "bf16" {
        model.to(dev, Some(DType::BF16))?;
    }
    let params = model.parameters();
    let n_params: usize = params.iter().map(Var::numel).sum();
    let mut opt = AdamW::new(params)
        .with_lr(3e-4)?
        .with_betas(0.9, 0.95)?
        .with_eps(1e-8)?
        .with_weight_decay(0.1)?;
    let data = match std::env::var("STRATA_GPT_INIT") {
        Ok(prefix) => load_init(&prefix, &model, a, dev)?,
        Err(_) => batches(a, dev)?,
    };
    let dump = std::env::var("STRATA_GPT_DUMP").ok();
    if let Some(prefix) = &dump {
        dump_init(prefix, &model, &data)?;
    }
    let autocast = a.precision == "autocast-bf16";
    let mut losses = Vec::new();
    let mut times = Vec::new();
    let mut allocated_after_step = Vec::new();
    let mut phases = Phases::new(dev, &["zero_grad", "forward", "backward", "optimizer"])?;
    for i in 0..a.warmup + a.steps {
        let (x, y) = &data[i % data.len()];
        cuda::synchronize(dev)?;
        let t0 = Instant::now();
        phases.start()?;
        opt.zero_grad(true)?;
        phases.mark()?;
        let loss = model.loss(x, y, autocast)?;
        phases.mark()?;
        loss.backward()?;
        phases.mark()?;
        if i == 0 {
            if let Some(prefix) = &dump {
                dump_grads(prefix, &model)?;
            }
        }
        opt.step()?;
        phases.mark()?;
        cuda::synchronize(dev)?;
        if i >= a.warmup {
            times.push(t0.elapsed().as_secs_f64());
        }
        phases.end(i >= a.warmup)?;
        losses.push(loss.item::<f32>()? as f64);
        drop(loss);
        allocated_after_step.push(strata::memory_allocated(dev)?);
    }
    let (peak_allocated, peak_reserved, num_device_alloc) = peaks(dev)?;
    if let Some(prefix) = &trace {
        write_trace(prefix, dev)?;
    }
    let step = median(times);
    Ok(serde_json::json!({
        "bench": "gpt",
        "impl": "strata",
        "config": a.config_json(),
        "params": n_params,
        "step_ms": round(step * 1e3, 2),
        "tokens_per_s": (a.batch * a.seq) as f64 / step,
        "phases": phases.json(),
        "loss_first": round(losses[0], 4),
        "loss_last": round(losses[losses.len() - 1], 4),
        "losses": losses.iter().map(|&l| round(l, 4)).collect::<Vec<_>>(),
        "peak_allocated": peak_allocated,
        "peak_reserved": peak_reserved,
        "num_device_alloc": num_device_alloc,
        "allocated_after_step": allocated_after_step,
    }))
}

/// The history kept with `STRATA_GPT_TRACE` (entries; the oldest are dropped
/// beyond it).
const TRACE_ENTRIES: usize = 4_000_000;

/// `STRATA_GPT_TRACE=PREFIX`: writes the allocator's history of the run as a
/// trace (`PREFIX.json`, replayable by the `replay` example, e.g. on the
/// simulated GPU with expandable segments) and prints to stderr what was live
/// when allocated memory peaked, by call site.
fn write_trace(prefix: &str, dev: Device) -> BoxResult<()> {
    let al = strata::allocator(dev)?;
    std::fs::write(format!("{prefix}.json"), al.history_json("gpt"))?;
    let (peak, shares) = live_at_peak(&al.history());
    let mb = |b: u64| b as f64 / 1e6;
    eprintln!("live at the peak of requested bytes: {:.2} MB", mb(peak));
    for s in shares {
        let sizes: Vec<String> = s
            .sizes
            .iter()
            .take(8)
            .map(|&b| format!("{:.2}", mb(b)))
            .collect();
        eprintln!(
            "{:>9.2} MB {:>4}x  {}  [{}{}]",
            mb(s.bytes),
            s.count,
            s.site,
            sizes.join(" "),
            if s.count > 8 { " ..." } else { "" }
        );
    }
    Ok(())
}

/// `STRATA_GPT_DUMP=PREFIX`: writes the initial parameters and the four
/// batches (`PREFIX_init.safetensors`, names as PyTorch's `named_parameters`
/// plus `data.K.x` / `data.K.y`) so that another implementation can start
/// from the same state (`benches/anchors/gpt_same_init.py` does).
fn dump_init(prefix: &str, model: &Gpt, data: &[(Tensor, Tensor)]) -> BoxResult<()> {
    let mut named: Vec<(String, Tensor)> = model
        .named_parameters()
        .into_iter()
        .map(|(n, p)| (n, p.data().clone()))
        .collect();
    for (k, (x, y)) in data.iter().enumerate() {
        named.push((format!("data.{k}.x"), x.clone()));
        named.push((format!("data.{k}.y"), y.clone()));
    }
    save_safetensors(format!("{prefix}_init.safetensors"), named)?;
    Ok(())
}

/// `STRATA_GPT_INIT=PREFIX`: copies the parameters of
/// `PREFIX_init.safetensors` into the model (each by its PyTorch name, cast
/// to the parameter's dtype) and returns its four batches. A missing name, a
/// shape that differs or batches of another shape than `--batch`×`--seq`
/// are errors that say which.
fn load_init(
    prefix: &str,
    model: &Gpt,
    a: &GptArgs,
    dev: Device,
) -> BoxResult<Vec<(Tensor, Tensor)>> {
    let path = format!("{prefix}_init.safetensors");
    let mut state = load_safetensors(&path, dev)?;
    let mut take = |name: &str, shape: &[usize]| -> BoxResult<Tensor> {
        let t = state
            .remove(name)
            .ok_or_else(|| format!("{path} has no tensor {name:?}"))?;
        if t.shape() != shape {
            return Err(format!(
                "{path}: {name:?} has shape {:?}, the model needs {shape:?}",
                t.shape()
            )
            .into());
        }
        Ok(t)
    };
    for (name, p) in model.named_parameters() {
        let t = take(&name, p.shape())?;
        p.data().copy_(&t.to_dtype(p.dtype())?)?;
    }
    (0..4)
        .map(|k| {
            let shape = [a.batch, a.seq];
            let x = take(&format!("data.{k}.x"), &shape)?.to_dtype(DType::I64)?;
            let y = take(&format!("data.{k}.y"), &shape)?.to_dtype(DType::I64)?;
            Ok((x, y))
        })
        .collect()
}

/// With `STRATA_GPT_DUMP=PREFIX`, the gradients of the first step
/// (`PREFIX_grads.safetensors`), before the optimizer's update.
fn dump_grads(prefix: &str, model: &Gpt) -> BoxResult<()> {
    let named: Vec<(String, Tensor)> = model
        .named_parameters()
        .into_iter()
        .filter_map(|(n, p)| p.grad().map(|g| (n, g)))
        .collect();
    save_safetensors(format!("{prefix}_grads.safetensors"), named)?;
    Ok(())
}

fn main() -> ExitCode {
    let a = match Flags::parse(std::env::args().skip(1), GPT_FLAGS).and_then(|f| gpt_args(&f)) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    match run(&a) {
        Ok(v) => {
            println!("{v}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}
