//! The GPT-2-style decoder of `shared/anchors/torch_gpt.py` and its synthetic
//! data, shared by the `gpt` and `ddp_gpt` examples (see `examples/gpt.rs` for the model's
//! description and what `--recompute` keeps).

use crate::training::{parse_checkpoint, Flags};
use std::sync::Arc;
use strata::tensor::generator::next_seed;
use strata_autograd::nn::{join, Embedding, LayerNorm, Linear, Module};
use strata_autograd::{
    checkpoint_blocks, AttentionArgs, AttentionSaving, AutocastGuard, DeviceType,
    Result as AgResult, Var,
};
use strata_tensor::torch_random::{TorchCpuGenerator, TorchCudaGenerator};
use strata_tensor::{CrossEntropyArgs, DType, Device, GeluApprox, Tensor};

/// The command line, named as torch_gpt.py's arguments.
#[derive(Clone, Debug)]
pub struct GptArgs {
    /// `--layers`.
    pub layers: usize,
    /// `--d-model`.
    pub d_model: usize,
    /// `--heads`.
    pub heads: usize,
    /// `--seq`.
    pub seq: usize,
    /// `--batch`.
    pub batch: usize,
    /// `--vocab`.
    pub vocab: usize,
    /// `--steps`.
    pub steps: usize,
    /// `--warmup`.
    pub warmup: usize,
    /// `--precision`.
    pub precision: String,
    /// `--checkpoint`.
    pub checkpoint: String,
    /// `--attn`.
    pub attn: String,
    /// `--recompute` (what the blocks recompute in backward; see [`Recompute`]).
    pub recompute: String,
    /// `--device`.
    pub device: String,
    /// `--seed`.
    pub seed: u64,
    /// `--rng`: `torch` draws the weights and the data as torch_gpt.py does
    /// at `--seed` (PyTorch's CPU and CUDA generators, reproduced by
    /// [`strata_tensor::torch_random`]); `strata` draws them from strata's
    /// own generator.
    pub rng: String,
}

impl GptArgs {
    /// The `config` object of the examples' JSON line (torch_gpt.py's
    /// `vars(args)`, plus `recompute`).
    pub fn config_json(&self) -> serde_json::Value {
        serde_json::json!({
            "layers": self.layers, "d_model": self.d_model, "heads": self.heads, "seq": self.seq,
            "batch": self.batch, "vocab": self.vocab, "steps": self.steps, "warmup": self.warmup,
            "precision": self.precision, "checkpoint": self.checkpoint, "attn": self.attn,
            "recompute": self.recompute,
            "device": self.device, "seed": self.seed, "rng": self.rng,
        })
    }
}

/// The flags of `gpt` (torch_gpt.py's arguments).
pub const GPT_FLAGS: &[&str] = &[
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
    "rng",
];

/// The checked arguments of `gpt` from parsed flags (defaults as torch_gpt.py's).
pub fn gpt_args(f: &Flags) -> Result<GptArgs, String> {
    let a = GptArgs {
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
        rng: f.str("rng", "torch"),
    };
    if !["torch", "strata"].contains(&a.rng.as_str()) {
        return Err(format!("--rng {:?}: expected torch or strata", a.rng));
    }
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
pub struct Recompute {
    attn: AttnMode,
    /// `fc2(gelu(h))` as `gelu_linear` (recomputes `gelu(h)`).
    mlp: bool,
}

impl Recompute {
    /// `none`, or a comma-separated list of `attn` / `attn-keep` and `mlp`.
    pub fn parse(s: &str) -> Result<Recompute, String> {
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

/// Where the N(0, 0.02) weights come from (`--rng`).
pub enum Weights {
    /// strata's seeded generator (`Tensor::randn`).
    Strata,
    /// torch_gpt.py's own draws, in the order the model takes them.
    Torch(std::collections::VecDeque<Vec<f32>>),
}

impl Weights {
    /// The weights of `a`'s model: torch_gpt.py's at `--seed` for `--rng
    /// torch` (drawn on the host now), else strata's generator's, drawn as
    /// each is taken.
    pub fn new(a: &GptArgs) -> strata_tensor::Result<Weights> {
        Ok(if a.rng == "torch" {
            Weights::Torch(torch_weights(a)?.into())
        } else {
            Weights::Strata
        })
    }

    /// The next N(0, 0.02) weight, of `shape`, in f32 on `dev`.
    pub fn normal(&mut self, shape: &[usize], dev: Device) -> AgResult<Tensor> {
        match self {
            Weights::Strata => {
                let t = Tensor::randn(shape, DType::F32, next_seed(), dev)?;
                t.mul_(0.02)?;
                Ok(t)
            }
            Weights::Torch(queue) => {
                let v = queue.pop_front().unwrap_or_default();
                Ok(Tensor::from_vec(v, shape, dev)?)
            }
        }
    }

    /// A linear layer initialised as torch_gpt.py does (bias 0).
    pub fn linear(&mut self, i: usize, o: usize, bias: bool, dev: Device) -> AgResult<Linear> {
        let b = if bias {
            Some(Tensor::zeros(&[o], DType::F32, dev)?)
        } else {
            None
        };
        Linear::from_tensors(self.normal(&[o, i], dev)?, b)
    }
}

/// torch_gpt.py's N(0, 0.02) weights at `--seed`, in the order of its
/// `modules()` loop (tok, pos, each block's qkv, proj, fc1, fc2, head): its
/// CPU generator after `torch.manual_seed(seed)`, first advanced past the
/// draws of the module constructors (`nn.Embedding`'s `normal_`,
/// `nn.Linear`'s `kaiming_uniform_` and bias `uniform_`, one 32-bit draw per
/// element), whose values the loop overwrites.
pub fn torch_weights(a: &GptArgs) -> strata_tensor::Result<Vec<Vec<f32>>> {
    let (d, v, t) = (a.d_model, a.vocab, a.seq);
    let mut g = TorchCpuGenerator::new(a.seed);
    g.normal(v * d, 0.0, 1.0)?;
    g.normal(t * d, 0.0, 1.0)?;
    // Each block's Linear layers: weight and bias, (out, in).
    let linears = [(3 * d, d), (d, d), (4 * d, d), (d, 4 * d)];
    for _ in 0..a.layers {
        for (o, i) in linears {
            g.discard((o * i + o) as u64)?;
        }
    }
    g.discard((v * d) as u64)?;
    let mut w = vec![g.normal(v * d, 0.0, 0.02)?, g.normal(t * d, 0.0, 0.02)?];
    for _ in 0..a.layers {
        for (o, i) in linears {
            w.push(g.normal(o * i, 0.0, 0.02)?);
        }
    }
    w.push(g.normal(v * d, 0.0, 0.02)?);
    Ok(w)
}

/// One decoder block.
pub struct Block {
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
    /// A block of width `d` with `heads` heads, recomputing what `recompute` says.
    pub fn new(
        w: &mut Weights,
        d: usize,
        heads: usize,
        recompute: Recompute,
        dev: Device,
    ) -> AgResult<Block> {
        Ok(Block {
            heads,
            recompute,
            ln1: LayerNorm::new(&[d], 1e-5, dev)?,
            ln2: LayerNorm::new(&[d], 1e-5, dev)?,
            qkv: w.linear(d, 3 * d, true, dev)?,
            proj: w.linear(d, d, true, dev)?,
            fc1: w.linear(d, 4 * d, true, dev)?,
            fc2: w.linear(4 * d, d, true, dev)?,
        })
    }

    /// Causal self-attention.
    pub fn attn(&self, x: &Var) -> AgResult<Var> {
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

    /// `x + attn(ln1(x))`, then `+ mlp(ln2(.))`.
    pub fn forward(&self, x: &Var) -> AgResult<Var> {
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

/// The checkpointed function of a block.
pub fn block_forward(b: &Block, x: &Var) -> AgResult<Var> {
    b.forward(x)
}

/// The model.
pub struct Gpt {
    tok: Embedding,
    pos: Embedding,
    blocks: Vec<Arc<Block>>,
    ln_f: LayerNorm,
    head: Linear,
    every: usize,
}

impl Gpt {
    /// A model as torch_gpt.py initialises it: with its own weights at
    /// `--seed` (`--rng torch`), or drawing from strata's seeded generator.
    pub fn new(a: &GptArgs, dev: Device) -> AgResult<Gpt> {
        let d = a.d_model;
        let recompute = Recompute::parse(&a.recompute)
            .map_err(|msg| strata_autograd::AutogradError::Module { module: "Gpt", msg })?;
        let mut w = Weights::new(a)?;
        Ok(Gpt {
            tok: Embedding::from_tensor(w.normal(&[a.vocab, d], dev)?)?,
            pos: Embedding::from_tensor(w.normal(&[a.seq, d], dev)?)?,
            blocks: (0..a.layers)
                .map(|_| Block::new(&mut w, d, a.heads, recompute, dev).map(Arc::new))
                .collect::<AgResult<_>>()?,
            ln_f: LayerNorm::new(&[d], 1e-5, dev)?,
            head: w.linear(d, a.vocab, false, dev)?,
            every: parse_checkpoint(&a.checkpoint).unwrap_or(0),
        })
    }

    /// Logits `[batch, seq, vocab]` of token ids `idx` `[batch, seq]`.
    pub fn forward(&self, idx: &Tensor) -> AgResult<Var> {
        let t = idx.shape()[1];
        let positions = Tensor::arange(0, t as i64, 1, Some(DType::I64), idx.device())?;
        let x = self.tok.forward(idx)?.add(&self.pos.forward(&positions)?)?;
        let x = checkpoint_blocks(&self.blocks, self.every, &x, block_forward)?;
        self.head.forward(&self.ln_f.forward(&x)?)
    }

    /// The mean cross-entropy of the logits of `idx` against `targets`, the
    /// forward under a bf16 autocast region with `autocast` (the logits cast
    /// to f32 for the loss, as torch_gpt.py's `logits.float()`; otherwise in
    /// the model's dtype).
    ///
    /// Only the loss is returned: the logits (`[batch, seq, vocab]`, 268 MB at
    /// 8 x 1024 tokens and vocabulary 8192 in f32) are dropped here, so the
    /// backward holds them only while the cross-entropy node does (a caller
    /// keeping a `logits` binding alive would hold them through the whole
    /// backward).
    pub fn loss(&self, idx: &Tensor, targets: &Tensor, autocast: bool) -> AgResult<Var> {
        let logits = if autocast {
            let _ac = AutocastGuard::new(DeviceType::of(idx.device()), DType::BF16)?;
            self.forward(idx)?
        } else {
            self.forward(idx)?
        };
        let vocab = logits.shape()[logits.ndim() - 1] as i64;
        let logits = if autocast {
            logits.to_dtype(DType::F32)?
        } else {
            logits
        };
        let logits = logits.reshape(&[-1, vocab])?;
        logits.cross_entropy(&targets.reshape(&[-1])?, CrossEntropyArgs::default())
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
    /// The next 64 random bits.
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n`.
    fn below(&mut self, n: usize) -> i64 {
        (self.next() % n as u64) as i64
    }

    /// Uniform in `[0, 1)`.
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Four (input, target) batches of torch_gpt.py's task: each sequence starts
/// at a random token and follows `succ` with probability 0.9. With `--rng
/// torch`, torch_gpt.py's own batches at `--seed` (as it draws them on a CUDA
/// device); else from a seeded host generator.
pub fn batches(a: &GptArgs, dev: Device) -> AgResult<Vec<(Tensor, Tensor)>> {
    if a.rng == "torch" {
        return torch_batches(a, dev);
    }
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

/// torch_gpt.py's four batches at `--seed`: its CUDA generator seeded with
/// `seed + 1` draws `succ = randint(0, vocab, (vocab,))`, then per batch the
/// first tokens `randint(0, vocab, (batch,))`, `keep = rand(batch, seq) < 0.9`
/// and `rnd = randint(0, vocab, (batch, seq))`; token `i + 1` of a row is
/// `succ[token i]` where `keep`, else `rnd`.
pub fn torch_batches(a: &GptArgs, dev: Device) -> AgResult<Vec<(Tensor, Tensor)>> {
    let (b, t, v) = (a.batch, a.seq, a.vocab as i64);
    let mut g = TorchCudaGenerator::new(a.seed.wrapping_add(1));
    let succ = g.randint(0, v, a.vocab)?;
    (0..4)
        .map(|_| {
            let first = g.randint(0, v, b)?;
            let keep = g.rand(b * t)?;
            let rnd = g.randint(0, v, b * t)?;
            let (mut x, mut y) = (Vec::with_capacity(b * t), Vec::with_capacity(b * t));
            for (r, &start) in first.iter().enumerate() {
                let mut tok = start;
                for i in r * t..(r + 1) * t {
                    let next = if keep[i] < 0.9f32 {
                        succ[tok as usize]
                    } else {
                        rnd[i]
                    };
                    x.push(tok);
                    y.push(next);
                    tok = next;
                }
            }
            Ok((
                Tensor::from_vec(x, &[b, t], dev)?,
                Tensor::from_vec(y, &[b, t], dev)?,
            ))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::training::Flags;

    fn tiny(seed: &str) -> GptArgs {
        let args = [
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
            "--device",
            "cpu",
            "--seed",
            seed,
        ];
        let f = Flags::parse(args.iter().map(|s| s.to_string()), GPT_FLAGS).unwrap();
        gpt_args(&f).unwrap()
    }

    /// torch_gpt.py's own state for the tiny configuration at seed 7, as
    /// `torch_gpt_state.py` saved it on the H200 with PyTorch 2.11 (session 8,
    /// call 2; `docs/bench-results/2026-11-26-h200-session8-gpt_oracle.py`):
    /// `--rng torch` draws the same batches and weights.
    #[test]
    fn rng_torch_starts_from_torch_gpts_own_state() {
        let a = tiny("7");
        let data = torch_batches(&a, Device::Cpu).unwrap();
        let x0: Vec<i64> = data[0].0.to_vec().unwrap();
        assert_eq!(x0[..8], [163, 55, 181, 202, 164, 176, 229, 81]);
        let y3: Vec<i64> = data[3].1.to_vec().unwrap();
        assert_eq!(y3[64 - 8..], [234, 170, 123, 165, 174, 166, 185, 86]);
        let x2: Vec<i64> = data[2].0.to_vec().unwrap();
        assert_eq!(x2.iter().sum::<i64>(), 8295);

        let w = torch_weights(&a).unwrap();
        // tok, pos, then qkv, proj, fc1, fc2 of each block, then head.
        let (tok, pos, qkv0, fc2_1, head) = (&w[0], &w[1], &w[2], &w[9], &w[10]);
        let close = |got: &[f32], want: [u32; 4]| {
            for (g, w) in got.iter().zip(want) {
                let w = f32::from_bits(w);
                assert!((g - w).abs() <= 1e-8, "{g} against PyTorch's {w}");
            }
        };
        close(&tok[..4], [3170080130, 3144248739, 3146162750, 3141121980]);
        close(
            &pos[31 * 64 + 60..32 * 64],
            [1010393194, 1023077368, 1014371087, 3172736105],
        );
        close(
            &qkv0[100 * 64..100 * 64 + 4],
            [3168011228, 1007850075, 1019283042, 996312477],
        );
        close(
            &fc2_1[fc2_1.len() - 4..],
            [1017190331, 1001415973, 3165613331, 1020851233],
        );
        close(
            &head[head.len() - 4..],
            [1028652583, 3116747847, 3158302831, 3175123279],
        );
    }

    #[test]
    fn the_two_generators_draw_different_starts() {
        let mut a = tiny("7");
        let torch = batches(&a, Device::Cpu).unwrap();
        a.rng = "strata".into();
        let own = batches(&a, Device::Cpu).unwrap();
        let (t, o): (Vec<i64>, Vec<i64>) =
            (torch[0].0.to_vec().unwrap(), own[0].0.to_vec().unwrap());
        assert_ne!(t, o);
    }
}
