//! The GPT-2-style decoder of `shared/anchors/torch_gpt.py`, trained on the
//! same synthetic task with the same step, printing the same JSON line
//! (`impl: "strata"`); run both in one device call and compare.
//!
//! ```text
//! cargo run --release -p strata-examples --example gpt -- [--layers 12] [--d-model 768]
//!     [--heads 12] [--seq 1024] [--batch 8] [--vocab 8192] [--steps 10] [--warmup 3]
//!     [--precision f32|bf16|autocast-bf16] [--checkpoint none|every|every:K]
//!     [--attn naive] [--recompute attn,mlp|attn|attn-keep|mlp|none] [--device cuda|cpu] [--seed 0]
//! ```
//!
//! The model (torch_gpt.py's docstring): token and position embeddings; per
//! block `x += proj(attn(ln1(x)))`, `x += fc2(gelu_tanh(fc1(ln2(x))))` with
//! naive causal attention; `logits = head(ln_f(x))`; cross-entropy over every
//! position. Linear and embedding weights N(0, 0.02), biases 0, LayerNorm 1/0;
//! AdamW(lr 3e-4, betas (0.9, 0.95), eps 1e-8, weight decay 0.1).
//! Differences: the data (the successor table and the batches) comes from a
//! seeded host generator, not PyTorch's, so losses match in distribution, not
//! bit for bit; only `--attn naive` exists.
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

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;
use strata::tensor::generator::{manual_seed, next_seed};
use strata::{reset_accumulated_memory_stats, reset_peak_memory_stats};
use strata_autograd::nn::{join, Embedding, LayerNorm, Linear, Module};
use strata_autograd::{
    checkpoint_blocks, AdamW, AttentionArgs, AttentionSaving, AutocastGuard, DeviceType, Optimizer,
    Result as AgResult, Var,
};
use strata_examples::training::{median, parse_checkpoint, peaks, round, Flags};
use strata_tensor::{cuda, save_safetensors, CrossEntropyArgs, DType, Device, GeluApprox, Tensor};

type BoxResult<T> = Result<T, Box<dyn std::error::Error>>;

/// The command line, named as torch_gpt.py's arguments.
#[derive(Clone, Debug)]
struct Args {
    layers: usize,
    d_model: usize,
    heads: usize,
    seq: usize,
    batch: usize,
    vocab: usize,
    steps: usize,
    warmup: usize,
    precision: String,
    checkpoint: String,
    attn: String,
    recompute: String,
    device: String,
    seed: u64,
}

fn args() -> Result<Args, String> {
    let f = Flags::parse(
        std::env::args().skip(1),
        &[
            "layers",
            "d-model",
            "heads",
            "seq",
            "batch",
            "vocab",
            "steps",
            "warmup",
            "precision",
            "checkpoint",
            "attn",
            "recompute",
            "device",
            "seed",
        ],
    )?;
    let a = Args {
        layers: f.num("layers", 12)?,
        d_model: f.num("d-model", 768)?,
        heads: f.num("heads", 12)?,
        seq: f.num("seq", 1024)?,
        batch: f.num("batch", 8)?,
        vocab: f.num("vocab", 8192)?,
        steps: f.num("steps", 10)?,
        warmup: f.num("warmup", 3)?,
        precision: f.str("precision", "f32"),
        checkpoint: f.str("checkpoint", "none"),
        attn: f.str("attn", "naive"),
        recompute: f.str("recompute", "attn,mlp"),
        device: f.str("device", "cuda"),
        seed: f.num("seed", 0)?,
    };
    if !["f32", "bf16", "autocast-bf16"].contains(&a.precision.as_str()) {
        return Err(format!(
            "--precision {:?}: expected f32, bf16 or autocast-bf16",
            a.precision
        ));
    }
    if a.attn != "naive" {
        return Err(format!(
            "--attn {:?}: only naive attention is implemented",
            a.attn
        ));
    }
    let sizes = [
        a.layers, a.d_model, a.heads, a.seq, a.batch, a.vocab, a.steps,
    ];
    if sizes.contains(&0) || !a.d_model.is_multiple_of(a.heads) {
        return Err("sizes must be > 0 and --d-model a multiple of --heads".into());
    }
    parse_checkpoint(&a.checkpoint)?;
    Recompute::parse(&a.recompute)?;
    Ok(a)
}

/// What the blocks recompute in backward instead of keeping (`--recompute`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Recompute {
    attn: AttnMode,
    /// `fc2(gelu(h))` as `gelu_linear` (recomputes `gelu(h)`).
    mlp: bool,
}

impl Recompute {
    /// `none`, or a comma-separated list of `attn` / `attn-keep` and `mlp`.
    fn parse(s: &str) -> Result<Recompute, String> {
        let mut r = Recompute {
            attn: AttnMode::Composed,
            mlp: false,
        };
        if s == "none" {
            return Ok(r);
        }
        for part in s.split(',') {
            match part {
                "mlp" => r.mlp = true,
                _ => r.attn = AttnMode::parse(part)?,
            }
        }
        Ok(r)
    }
}

/// How a block's attention core is recorded (`--recompute`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum AttnMode {
    /// `none`: op by op (matmul, div, masked_fill, softmax, matmul), as
    /// PyTorch eager records it.
    Composed,
    /// `attn` / `attn-keep`: the fused op, recomputing / keeping the
    /// probabilities.
    Fused(AttentionSaving),
}

impl AttnMode {
    fn parse(s: &str) -> Result<AttnMode, String> {
        match s {
            "attn" => Ok(AttnMode::Fused(AttentionSaving::Recompute)),
            "attn-keep" => Ok(AttnMode::Fused(AttentionSaving::SaveProbs)),
            _ => Err(format!(
                "--recompute: {s:?} is not one of attn, attn-keep, mlp (comma-separated), or none"
            )),
        }
    }
}

/// N(0, 0.02) in f32.
fn normal(shape: &[usize], dev: Device) -> AgResult<Tensor> {
    let t = Tensor::randn(shape, DType::F32, next_seed(), dev)?;
    t.mul_(0.02)?;
    Ok(t)
}

fn linear(i: usize, o: usize, bias: bool, dev: Device) -> AgResult<Linear> {
    let b = if bias {
        Some(Tensor::zeros(&[o], DType::F32, dev)?)
    } else {
        None
    };
    Linear::from_tensors(normal(&[o, i], dev)?, b)
}

struct Block {
    heads: usize,
    recompute: Recompute,
    ln1: LayerNorm,
    ln2: LayerNorm,
    qkv: Linear,
    proj: Linear,
    fc1: Linear,
    fc2: Linear,
}

impl Block {
    fn new(d: usize, heads: usize, recompute: Recompute, dev: Device) -> AgResult<Block> {
        Ok(Block {
            heads,
            recompute,
            ln1: LayerNorm::new(&[d], 1e-5, dev)?,
            ln2: LayerNorm::new(&[d], 1e-5, dev)?,
            qkv: linear(d, 3 * d, true, dev)?,
            proj: linear(d, d, true, dev)?,
            fc1: linear(d, 4 * d, true, dev)?,
            fc2: linear(4 * d, d, true, dev)?,
        })
    }

    fn attn(&self, x: &Var) -> AgResult<Var> {
        let (b, t, d) = (x.shape()[0], x.shape()[1], x.shape()[2]);
        let (h, hd) = (self.heads, d / self.heads);
        let qkv = self.qkv.forward(x)?.split(d as i64, 2)?;
        let heads = |z: &Var| -> AgResult<Var> {
            z.reshape(&[b as i64, t as i64, h as i64, hd as i64])?
                .transpose(1, 2)
        };
        let (q, k, v) = (heads(&qkv[0])?, heads(&qkv[1])?, heads(&qkv[2])?);
        drop(qkv);
        let y = match self.recompute.attn {
            AttnMode::Fused(saving) => q.attention(
                &k,
                &v,
                AttentionArgs {
                    scale: Some(1.0 / (hd as f64).sqrt()),
                    causal: true,
                    saving,
                },
            )?,
            AttnMode::Composed => {
                let s = q.matmul(&k.transpose(-2, -1)?)?.div((hd as f64).sqrt())?;
                // mask[i][j] = j > i: the future positions.
                let dev = x.device();
                let pos = Tensor::arange(0, t as i64, 1, Some(DType::I64), dev)?;
                let mask = pos.unsqueeze(0)?.gt(&pos.unsqueeze(1)?)?;
                s.masked_fill(&mask, f64::NEG_INFINITY)?
                    .softmax(-1, None)?
                    .matmul(&v)?
            }
        };
        let y = y
            .transpose(1, 2)?
            .reshape(&[b as i64, t as i64, d as i64])?;
        self.proj.forward(&y)
    }

    fn forward(&self, x: &Var) -> AgResult<Var> {
        let x = x.add(&self.attn(&self.ln1.forward(x)?)?)?;
        let h = self.fc1.forward(&self.ln2.forward(&x)?)?;
        let out = if self.recompute.mlp {
            h.gelu_linear(GeluApprox::Tanh, &self.fc2.weight, self.fc2.bias.as_ref())?
        } else {
            self.fc2.forward(&h.gelu(GeluApprox::Tanh)?)?
        };
        x.add(&out)
    }

    fn parts(&self) -> [(&'static str, &dyn Module); 6] {
        [
            ("ln1", &self.ln1),
            ("ln2", &self.ln2),
            ("qkv", &self.qkv),
            ("proj", &self.proj),
            ("fc1", &self.fc1),
            ("fc2", &self.fc2),
        ]
    }
}

impl Module for Block {
    fn visit(&self, prefix: &str, f: &mut dyn FnMut(String, &Var)) {
        for (name, m) in self.parts() {
            m.visit(&join(prefix, name), f);
        }
    }

    fn visit_mut(
        &mut self,
        prefix: &str,
        f: &mut dyn FnMut(String, &mut Var) -> AgResult<()>,
    ) -> AgResult<()> {
        self.ln1.visit_mut(&join(prefix, "ln1"), f)?;
        self.ln2.visit_mut(&join(prefix, "ln2"), f)?;
        self.qkv.visit_mut(&join(prefix, "qkv"), f)?;
        self.proj.visit_mut(&join(prefix, "proj"), f)?;
        self.fc1.visit_mut(&join(prefix, "fc1"), f)?;
        self.fc2.visit_mut(&join(prefix, "fc2"), f)
    }

    fn set_training(&mut self, _training: bool) {}

    fn is_training(&self) -> bool {
        true
    }
}

fn block_forward(b: &Block, x: &Var) -> AgResult<Var> {
    b.forward(x)
}

struct Gpt {
    tok: Embedding,
    pos: Embedding,
    blocks: Vec<Arc<Block>>,
    ln_f: LayerNorm,
    head: Linear,
    every: usize,
}

impl Gpt {
    fn new(a: &Args, dev: Device) -> AgResult<Gpt> {
        let d = a.d_model;
        let recompute = Recompute::parse(&a.recompute)
            .map_err(|msg| strata_autograd::AutogradError::Module { module: "Gpt", msg })?;
        Ok(Gpt {
            tok: Embedding::from_tensor(normal(&[a.vocab, d], dev)?)?,
            pos: Embedding::from_tensor(normal(&[a.seq, d], dev)?)?,
            blocks: (0..a.layers)
                .map(|_| Block::new(d, a.heads, recompute, dev).map(Arc::new))
                .collect::<AgResult<_>>()?,
            ln_f: LayerNorm::new(&[d], 1e-5, dev)?,
            head: linear(d, a.vocab, false, dev)?,
            every: parse_checkpoint(&a.checkpoint).unwrap_or(0),
        })
    }

    /// Logits `[batch, seq, vocab]` of token ids `idx` `[batch, seq]`.
    fn forward(&self, idx: &Tensor) -> AgResult<Var> {
        let t = idx.shape()[1];
        let positions = Tensor::arange(0, t as i64, 1, Some(DType::I64), idx.device())?;
        let x = self.tok.forward(idx)?.add(&self.pos.forward(&positions)?)?;
        let x = checkpoint_blocks(&self.blocks, self.every, &x, block_forward)?;
        self.head.forward(&self.ln_f.forward(&x)?)
    }
}

impl Module for Gpt {
    fn visit(&self, prefix: &str, f: &mut dyn FnMut(String, &Var)) {
        self.tok.visit(&join(prefix, "tok"), f);
        self.pos.visit(&join(prefix, "pos"), f);
        for (i, b) in self.blocks.iter().enumerate() {
            b.visit(&join(prefix, &format!("blocks.{i}")), f);
        }
        self.ln_f.visit(&join(prefix, "ln_f"), f);
        self.head.visit(&join(prefix, "head"), f);
    }

    fn visit_mut(
        &mut self,
        prefix: &str,
        f: &mut dyn FnMut(String, &mut Var) -> AgResult<()>,
    ) -> AgResult<()> {
        self.tok.visit_mut(&join(prefix, "tok"), f)?;
        self.pos.visit_mut(&join(prefix, "pos"), f)?;
        for (i, b) in self.blocks.iter_mut().enumerate() {
            let b = Arc::get_mut(b).ok_or_else(|| strata_autograd::AutogradError::Module {
                module: "Gpt",
                msg: "a block is shared (checkpoint closures alive); move the model first".into(),
            })?;
            b.visit_mut(&join(prefix, &format!("blocks.{i}")), f)?;
        }
        self.ln_f.visit_mut(&join(prefix, "ln_f"), f)?;
        self.head.visit_mut(&join(prefix, "head"), f)
    }

    fn set_training(&mut self, _training: bool) {}

    fn is_training(&self) -> bool {
        true
    }
}

/// splitmix64: the host generator of the synthetic data.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> i64 {
        (self.next() % n as u64) as i64
    }

    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Four (input, target) batches of torch_gpt.py's task: each sequence starts
/// at a random token and follows `succ` with probability 0.9.
fn batches(a: &Args, dev: Device) -> AgResult<Vec<(Tensor, Tensor)>> {
    let mut rng = SplitMix(a.seed.wrapping_add(1));
    let succ: Vec<i64> = (0..a.vocab).map(|_| rng.below(a.vocab)).collect();
    (0..4)
        .map(|_| {
            let mut x = Vec::with_capacity(a.batch * a.seq);
            let mut y = Vec::with_capacity(a.batch * a.seq);
            for _ in 0..a.batch {
                let mut tok = rng.below(a.vocab);
                for _ in 0..a.seq {
                    let next = if rng.unit() < 0.9 {
                        succ[tok as usize]
                    } else {
                        rng.below(a.vocab)
                    };
                    x.push(tok);
                    y.push(next);
                    tok = next;
                }
            }
            Ok((
                Tensor::from_vec(x, &[a.batch, a.seq], dev)?,
                Tensor::from_vec(y, &[a.batch, a.seq], dev)?,
            ))
        })
        .collect()
}

fn run(a: &Args) -> BoxResult<serde_json::Value> {
    let dev = Device::parse(&a.device).map_err(|e| format!("--device {:?}: {e}", a.device))?;
    Tensor::zeros(&[1], DType::F32, dev)
        .map_err(|e| format!("device {dev} cannot be used: {e}"))?;
    strata::empty_cache(dev)?;
    reset_peak_memory_stats(dev)?;
    reset_accumulated_memory_stats(dev)?;
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
    let data = batches(a, dev)?;
    let dump = std::env::var("STRATA_GPT_DUMP").ok();
    if let Some(prefix) = &dump {
        dump_init(prefix, &model, &data)?;
    }
    let autocast = a.precision == "autocast-bf16";
    let mut losses = Vec::new();
    let mut times = Vec::new();
    let mut allocated_after_step = Vec::new();
    for i in 0..a.warmup + a.steps {
        let (x, y) = &data[i % data.len()];
        cuda::synchronize(dev)?;
        let t0 = Instant::now();
        opt.zero_grad(true)?;
        let logits = if autocast {
            let _ac = AutocastGuard::new(DeviceType::of(dev), DType::BF16)?;
            model.forward(x)?
        } else {
            model.forward(x)?
        };
        let logits = logits
            .to_dtype(if autocast { DType::F32 } else { logits.dtype() })?
            .reshape(&[-1, a.vocab as i64])?;
        let loss = logits.cross_entropy(&y.reshape(&[-1])?, CrossEntropyArgs::default())?;
        drop(logits);
        loss.backward()?;
        if i == 0 {
            if let Some(prefix) = &dump {
                dump_grads(prefix, &model)?;
            }
        }
        opt.step()?;
        cuda::synchronize(dev)?;
        if i >= a.warmup {
            times.push(t0.elapsed().as_secs_f64());
        }
        losses.push(loss.item::<f32>()? as f64);
        drop(loss);
        allocated_after_step.push(strata::memory_allocated(dev)?);
    }
    let (peak_allocated, peak_reserved, num_device_alloc) = peaks(dev)?;
    let step = median(times);
    Ok(serde_json::json!({
        "bench": "gpt",
        "impl": "strata",
        "config": {
            "layers": a.layers, "d_model": a.d_model, "heads": a.heads, "seq": a.seq,
            "batch": a.batch, "vocab": a.vocab, "steps": a.steps, "warmup": a.warmup,
            "precision": a.precision, "checkpoint": a.checkpoint, "attn": a.attn,
            "recompute": a.recompute,
            "device": a.device, "seed": a.seed,
        },
        "params": n_params,
        "step_ms": round(step * 1e3, 2),
        "tokens_per_s": (a.batch * a.seq) as f64 / step,
        "loss_first": round(losses[0], 4),
        "loss_last": round(losses[losses.len() - 1], 4),
        "losses": losses.iter().map(|&l| round(l, 4)).collect::<Vec<_>>(),
        "peak_allocated": peak_allocated,
        "peak_reserved": peak_reserved,
        "num_device_alloc": num_device_alloc,
        "allocated_after_step": allocated_after_step,
    }))
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
    let a = match args() {
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
