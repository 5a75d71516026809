//! Seed 003's exercise 2, the `mlp48` section of `shared/anchors/torch_mission.py`:
//! 48 x Linear(4096, 4096) (weights N(0, 1/4096), biases 0), MSE loss against a
//! random target, Adam(lr = 1e-4), 8 steps; the step time is the median of
//! steps 2..8. Prints one JSON line with torch_mission's keys (`impl: "strata"`).
//!
//! ```text
//! cargo run --release -p strata-examples --example memory_hungry -- \
//!     [--dtype f32|bf16] [--checkpoint none|every|every:K] [--autocast none|bf16] \
//!     [--layers 48] [--batch 1024] [--device cuda|cpu]
//! ```
//!
//! `--checkpoint every` recomputes every layer in backward (torch_mission's
//! `ckpt_all`), `every:4` every 4th (`ckpt_4`); `--autocast bf16` runs the
//! forward under autocast with the loss in f32 (`autocast_bf16`). The peaks are
//! strata's allocator's over the whole run, model creation included.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;
use strata::tensor::generator::{manual_seed, next_seed};
use strata::{memory_allocated, reset_accumulated_memory_stats, reset_peak_memory_stats};
use strata_autograd::nn::Linear;
use strata_autograd::{checkpoint_blocks, Adam, AutocastGuard, DeviceType, Optimizer, Var};
use strata_examples::training::{median, parse_checkpoint, peaks, round, Flags};
use strata_tensor::{cuda, DType, Device, Tensor};

type BoxResult<T> = Result<T, Box<dyn std::error::Error>>;

const WIDTH: usize = 4096;
const STEPS: usize = 8;

struct Config {
    layers: usize,
    batch: usize,
    dtype: DType,
    every: usize,
    autocast: bool,
    device: Device,
}

fn config() -> Result<Config, String> {
    let f = Flags::parse(
        std::env::args().skip(1),
        &[
            "dtype",
            "checkpoint",
            "autocast",
            "layers",
            "batch",
            "device",
        ],
    )?;
    let dtype = match f.str("dtype", "f32").as_str() {
        "f32" => DType::F32,
        "bf16" => DType::BF16,
        d => return Err(format!("--dtype {d:?}: expected f32 or bf16")),
    };
    let autocast = match f.str("autocast", "none").as_str() {
        "none" => false,
        "bf16" => true,
        a => return Err(format!("--autocast {a:?}: expected none or bf16")),
    };
    let layers: usize = f.num("layers", 48)?;
    let batch: usize = f.num("batch", 1024)?;
    if layers == 0 || batch == 0 {
        return Err("--layers and --batch must be > 0".into());
    }
    Ok(Config {
        layers,
        batch,
        dtype,
        every: parse_checkpoint(&f.str("checkpoint", "none"))?,
        autocast,
        device: f.device("cuda")?,
    })
}

fn layer(l: &Linear, h: &Var) -> strata_autograd::Result<Var> {
    l.forward(h)
}

fn mode(c: &Config) -> String {
    let ckpt = match c.every {
        0 => None,
        1 => Some("ckpt_all".to_string()),
        k => Some(format!("ckpt_{k}")),
    };
    match (c.autocast, ckpt) {
        (false, None) => "plain".into(),
        (false, Some(k)) => k,
        (true, None) => "autocast_bf16".into(),
        (true, Some(k)) => format!("autocast_bf16+{k}"),
    }
}

fn run(c: &Config) -> BoxResult<serde_json::Value> {
    let dev = c.device;
    Tensor::zeros(&[1], DType::F32, dev)
        .map_err(|e| format!("device {dev} cannot be used: {e}"))?;
    strata::empty_cache(dev)?;
    reset_peak_memory_stats(dev)?;
    reset_accumulated_memory_stats(dev)?;
    manual_seed(0);
    let std = (1.0 / WIDTH as f64).sqrt();
    let layers: Vec<Arc<Linear>> = (0..c.layers)
        .map(|_| -> BoxResult<Arc<Linear>> {
            let w = Tensor::randn(&[WIDTH, WIDTH], c.dtype, next_seed(), dev)?;
            w.mul_(std)?;
            let b = Tensor::zeros(&[WIDTH], c.dtype, dev)?;
            Ok(Arc::new(Linear::from_tensors(w, Some(b))?))
        })
        .collect::<BoxResult<_>>()?;
    let x = Var::new(Tensor::randn(&[c.batch, WIDTH], c.dtype, next_seed(), dev)?);
    let y = Var::new(Tensor::randn(&[c.batch, WIDTH], c.dtype, next_seed(), dev)?);
    let params: Vec<Var> = layers
        .iter()
        .flat_map(|l| [l.weight.clone(), l.bias.clone().expect("bias")])
        .collect();
    let mut opt = Adam::new(params, 1e-4)?;
    let after_init = memory_allocated(dev)?;

    let mut losses = Vec::new();
    let mut times = Vec::new();
    for i in 0..STEPS {
        let t0 = Instant::now();
        opt.zero_grad(true)?;
        let loss = if c.autocast {
            let _ac = AutocastGuard::new(DeviceType::of(dev), DType::BF16)?;
            let h = checkpoint_blocks(&layers, c.every, &x, layer)?;
            let d = h.to_dtype(DType::F32)?.sub(&y)?;
            d.mul(&d)?.mean(None, false)?
        } else {
            let d = checkpoint_blocks(&layers, c.every, &x, layer)?.sub(&y)?;
            d.mul(&d)?.mean(None, false)?
        };
        loss.backward()?;
        opt.step()?;
        losses.push(loss.item::<f32>()? as f64);
        drop(loss);
        cuda::synchronize(dev)?;
        if i >= 2 {
            times.push(t0.elapsed().as_secs_f64());
        }
    }
    let (peak_allocated, peak_reserved, num_device_alloc) = peaks(dev)?;
    Ok(serde_json::json!({
        "bench": "mlp48",
        "impl": "strata",
        "mode": mode(c),
        "layers": c.layers,
        "batch": c.batch,
        "dtype": if c.dtype == DType::BF16 { "bfloat16" } else { "float32" },
        "step_ms": round(median(times) * 1e3, 2),
        "after_init": after_init,
        "peak_allocated": peak_allocated,
        "peak_reserved": peak_reserved,
        "num_device_alloc": num_device_alloc,
        "loss_first": losses[0],
        "loss_last": losses[losses.len() - 1],
        "alloc_conf": std::env::var("STRATA_ALLOC_CONF").unwrap_or_default(),
        "device": dev.to_string(),
    }))
}

fn main() -> ExitCode {
    let c = match config() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    match run(&c) {
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
