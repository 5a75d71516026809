//! The GPT of `gpt.rs` trained data-parallel: one thread per rank, each
//! taking `batch / gpus` rows of gpt's global batch, gradients averaged in
//! buckets whose all-reduce starts during backward
//! (`strata_autograd::distributed::DistributedDataParallel`).
//!
//! ```text
//! cargo run --release -p strata-examples --example ddp_gpt -- --gpus N [gpt's flags]
//! ```
//!
//! With `--device cuda` the ranks are GPUs `0..N` joined by NCCL (one
//! communicator per GPU, created together); with `--device cpu` they are
//! `N` threads on the host joined by an in-process group
//! (`LocalGroup`). Every rank builds the model from the same seed (and rank
//! 0's parameters are broadcast anyway), so `--gpus 1` trains exactly as
//! `gpt` does on the same flags and prints the same losses.
//!
//! The JSON line has gpt's keys (`bench` is `"ddp_gpt"`; `losses` are the
//! mean over ranks of each rank's loss, i.e. the loss of the global batch;
//! `tokens_per_s` counts the global batch; `peak_*` are rank 0's) plus
//! `gpus` and `per_rank`: each rank's device, `phases` (as gpt's, with DDP's
//! `finish` between backward and the optimizer), allocator peaks, the bytes
//! and count of its gradient buckets (allocated from strata's allocator,
//! so inside `peak_allocated`), how many buckets started during backward in
//! the last step, and `nccl_init_bytes`: how much free device memory
//! `ncclCommInitAll` took (the drop of `cuMemGetInfo`'s free bytes across it:
//! NCCL's own buffers and whatever else the driver set aside then; NCCL does
//! not allocate from strata's allocator, so it is not in `memory_stats`);
//! `null` on the CPU.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;
use strata::tensor::generator::manual_seed;
use strata::{reset_accumulated_memory_stats, reset_peak_memory_stats};
use strata_autograd::distributed::{
    Collective, DdpConfig, DistributedDataParallel, LocalGroup, NcclRank,
};
use strata_autograd::nn::Module;
use strata_autograd::{AdamW, Optimizer, Var};
use strata_examples::gpt_model::{batches, gpt_args, Gpt, GptArgs, GPT_FLAGS};
use strata_examples::training::{median, peaks, round, Flags, Phases};
use strata_tensor::distributed::Communicator;
use strata_tensor::{cuda, DType, Device, Tensor};

type BoxResult<T> = Result<T, Box<dyn std::error::Error>>;

/// What one rank measured.
struct RankResult {
    losses: Vec<f64>,
    times: Vec<f64>,
    allocated_after_step: Vec<u64>,
    bucket_bytes: usize,
    buckets: usize,
    launched_in_backward: usize,
    phases: serde_json::Value,
}

/// One rank's training loop: gpt's step with DDP's zero_grad and finish.
fn train_rank(
    a: &GptArgs,
    dev: Device,
    model: Gpt,
    comm: Arc<dyn Collective>,
    data: Vec<(Tensor, Tensor)>,
) -> Result<RankResult, String> {
    let inner = || -> BoxResult<RankResult> {
        let params = model.parameters();
        let ddp = DistributedDataParallel::new(&params, comm, DdpConfig::default())?;
        let mut opt = AdamW::new(params)
            .with_lr(3e-4)?
            .with_betas(0.9, 0.95)?
            .with_eps(1e-8)?
            .with_weight_decay(0.1)?;
        let autocast = a.precision == "autocast-bf16";
        let mut r = RankResult {
            losses: Vec::new(),
            times: Vec::new(),
            allocated_after_step: Vec::new(),
            bucket_bytes: ddp.bucket_bytes(),
            buckets: ddp.bucket_params().len(),
            launched_in_backward: 0,
            phases: serde_json::Value::Null,
        };
        let mut phases = Phases::new(
            dev,
            &["zero_grad", "forward", "backward", "finish", "optimizer"],
        )?;
        for i in 0..a.warmup + a.steps {
            let (x, y) = &data[i % data.len()];
            cuda::synchronize(dev)?;
            let t0 = Instant::now();
            phases.start()?;
            ddp.zero_grad()?;
            phases.mark()?;
            let loss = model.loss(x, y, autocast)?;
            phases.mark()?;
            loss.backward()?;
            phases.mark()?;
            let stats = ddp.finish()?;
            phases.mark()?;
            r.launched_in_backward = stats.launched_in_backward;
            opt.step()?;
            phases.mark()?;
            cuda::synchronize(dev)?;
            if i >= a.warmup {
                r.times.push(t0.elapsed().as_secs_f64());
            }
            phases.end(i >= a.warmup)?;
            r.losses.push(loss.item::<f32>()? as f64);
            drop(loss);
            r.allocated_after_step.push(strata::memory_allocated(dev)?);
        }
        r.phases = phases.json();
        Ok(r)
    };
    inner().map_err(|e| format!("rank on {dev}: {e}"))
}

fn run(a: &GptArgs, gpus: usize) -> BoxResult<serde_json::Value> {
    let base = Device::parse(&a.device).map_err(|e| format!("--device {:?}: {e}", a.device))?;
    if gpus == 0 || !a.batch.is_multiple_of(gpus) {
        return Err(format!("--gpus {gpus}: must be > 0 and divide --batch {}", a.batch).into());
    }
    let devices: Vec<Device> = match base {
        Device::Cpu => vec![Device::Cpu; gpus],
        Device::Cuda(first) => (first..first + gpus).map(Device::Cuda).collect(),
    };
    if let Device::Cuda(_) = base {
        let visible = cuda::device_count();
        if devices
            .iter()
            .any(|d| matches!(d, Device::Cuda(n) if *n >= visible))
        {
            return Err(
                format!("--gpus {gpus} from {base}: only {visible} GPU(s) are visible").into(),
            );
        }
    }
    for &d in &devices {
        Tensor::zeros(&[1], DType::F32, d)
            .map_err(|e| format!("device {d} cannot be used: {e}"))?;
        strata::empty_cache(d)?;
        reset_peak_memory_stats(d)?;
        reset_accumulated_memory_stats(d)?;
    }
    // The ranks' collectives, and what NCCL's initialisation took per GPU.
    let (comms, nccl_init): (Vec<Arc<dyn Collective>>, Vec<Option<i64>>) = match base {
        Device::Cpu => {
            let (_group, ranks) = LocalGroup::new(gpus, Device::Cpu)?;
            let comms = ranks
                .into_iter()
                .map(|r| Arc::new(r) as Arc<dyn Collective>)
                .collect();
            (comms, vec![None; gpus])
        }
        Device::Cuda(_) => {
            let free = || -> BoxResult<Vec<i64>> {
                devices
                    .iter()
                    .map(|&d| Ok(strata::alloc::mem_get_info(d)?.free as i64))
                    .collect()
            };
            let before = free()?;
            let comms = Communicator::for_devices(&devices)?;
            let after = free()?;
            (
                comms
                    .into_iter()
                    .map(|c| Arc::new(NcclRank::new(c)) as Arc<dyn Collective>)
                    .collect(),
                before
                    .iter()
                    .zip(&after)
                    .map(|(b, a)| Some(b - a))
                    .collect(),
            )
        }
    };
    // gpt's global batches, on the host; rank r takes rows [r*b, (r+1)*b).
    let global = batches(a, Device::Cpu)?;
    let per = a.batch / gpus;
    let mut ranks = Vec::with_capacity(gpus);
    for (r, &d) in devices.iter().enumerate() {
        // Every rank starts from the same draws, as gpt does.
        manual_seed(a.seed);
        let mut model = Gpt::new(a, d)?;
        if a.precision == "bf16" {
            model.to(d, Some(DType::BF16))?;
        }
        let data = global
            .iter()
            .map(|(x, y)| -> BoxResult<(Tensor, Tensor)> {
                let rows = |t: &Tensor| -> BoxResult<Tensor> {
                    Ok(t.narrow(0, (r * per) as i64, per as i64)?
                        .contiguous()?
                        .to_device(d, false)?)
                };
                Ok((rows(x)?, rows(y)?))
            })
            .collect::<BoxResult<Vec<_>>>()?;
        ranks.push((d, model, data));
    }
    let n_params: usize = ranks[0].1.parameters().iter().map(Var::numel).sum();
    let results: Vec<Result<RankResult, String>> = std::thread::scope(|s| {
        let handles: Vec<_> = ranks
            .into_iter()
            .zip(comms)
            .map(|((d, model, data), comm)| s.spawn(move || train_rank(a, d, model, comm, data)))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err("a rank panicked".into())))
            .collect()
    });
    let results: Vec<RankResult> = results.into_iter().collect::<Result<_, String>>()?;
    let steps = results[0].losses.len();
    let losses: Vec<f64> = (0..steps)
        .map(|i| results.iter().map(|r| r.losses[i]).sum::<f64>() / gpus as f64)
        .collect();
    let step = median(results[0].times.clone());
    let mut per_rank = Vec::new();
    for (rank, (r, &d)) in results.iter().zip(&devices).enumerate() {
        let (pa, pr, nd) = peaks(d)?;
        per_rank.push(serde_json::json!({
            "rank": rank,
            "device": d.to_string(),
            "peak_allocated": pa,
            "peak_reserved": pr,
            "num_device_alloc": nd,
            "bucket_bytes": r.bucket_bytes,
            "buckets": r.buckets,
            "buckets_launched_in_backward": r.launched_in_backward,
            "nccl_init_bytes": nccl_init[rank],
            "step_ms": round(median(r.times.clone()) * 1e3, 2),
            "phases": r.phases,
        }));
    }
    let (peak_allocated, peak_reserved, num_device_alloc) = peaks(devices[0])?;
    Ok(serde_json::json!({
        "bench": "ddp_gpt",
        "impl": "strata",
        "config": a.config_json(),
        "gpus": gpus,
        "params": n_params,
        "step_ms": round(step * 1e3, 2),
        "tokens_per_s": (a.batch * a.seq) as f64 / step,
        "loss_first": round(losses[0], 4),
        "loss_last": round(losses[losses.len() - 1], 4),
        "losses": losses.iter().map(|&l| round(l, 4)).collect::<Vec<_>>(),
        "peak_allocated": peak_allocated,
        "peak_reserved": peak_reserved,
        "num_device_alloc": num_device_alloc,
        "allocated_after_step": results[0].allocated_after_step,
        "per_rank": per_rank,
    }))
}

fn main() -> ExitCode {
    let mut known: Vec<&str> = GPT_FLAGS.to_vec();
    known.push("gpus");
    let parsed = Flags::parse(std::env::args().skip(1), &known)
        .and_then(|f| Ok((gpt_args(&f)?, f.num("gpus", 1usize)?)));
    let (a, gpus) = match parsed {
        Ok(p) => p,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    match run(&a, gpus) {
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
