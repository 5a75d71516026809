//! All-reduce bus bandwidth with strata's NCCL communicators, measured as
//! `benches/anchors/torch_allreduce.py` measures PyTorch's; run both in one
//! device call and compare the `busbw_gbps` fields.
//!
//! ```text
//! cargo run --release -p strata-examples --example allreduce_bench -- --gpus N
//!     [--size-mib 1024] [--iters 20] [--warmup 5] [--dtype f32|bf16|f16|f64]
//! ```
//!
//! One process, one thread per GPU (GPU `r` is rank `r`; communicators made
//! together by `Communicator::for_devices`). Each rank all-reduces (sum) one
//! contiguous tensor of `--size-mib` MiB: `warmup` untimed calls, a barrier,
//! then each of `iters` calls between two events on the rank's current
//! stream (the current stream waits for the collective, as after PyTorch's
//! synchronous `dist.all_reduce`). Rank 0 prints one JSON line with the
//! median time, `algbw = bytes / time` and, as nccl-tests defines it,
//! `busbw = algbw * 2 (n - 1) / n` (GB/s, 1e9 bytes; 0 for one GPU, where
//! nothing crosses a link).

use std::process::ExitCode;
use std::sync::{Arc, Barrier};
use strata_examples::training::{median, round, Flags};
use strata_tensor::distributed::{nccl_library_path, nccl_version, Communicator, ReduceOp};
use strata_tensor::{cuda, DType, Device, Tensor};

type BoxResult<T> = Result<T, Box<dyn std::error::Error>>;

struct Args {
    gpus: usize,
    size_mib: usize,
    iters: usize,
    warmup: usize,
    dtype: DType,
}

fn args() -> Result<Args, String> {
    let f = Flags::parse(
        std::env::args().skip(1),
        &["gpus", "size-mib", "iters", "warmup", "dtype"],
    )?;
    let dtype = match f.str("dtype", "f32").as_str() {
        "f32" => DType::F32,
        "bf16" => DType::BF16,
        "f16" => DType::F16,
        "f64" => DType::F64,
        other => return Err(format!("--dtype {other:?}: expected f32, bf16, f16 or f64")),
    };
    let a = Args {
        gpus: f.num("gpus", 2)?,
        size_mib: f.num("size-mib", 1024)?,
        iters: f.num("iters", 20)?,
        warmup: f.num("warmup", 5)?,
        dtype,
    };
    if a.gpus == 0 || a.size_mib == 0 || a.iters == 0 {
        return Err("--gpus, --size-mib and --iters must be > 0".into());
    }
    Ok(a)
}

/// One rank: the median seconds per all-reduce.
fn rank_loop(a: &Args, comm: &Communicator, barrier: &Barrier) -> Result<f64, String> {
    let inner = || -> BoxResult<f64> {
        let dev = comm.device();
        let n = a.size_mib * (1 << 20) / a.dtype.size();
        let x = Tensor::ones(&[n], a.dtype, dev)?;
        for _ in 0..a.warmup {
            comm.all_reduce(&x, ReduceOp::Sum)?.wait()?;
        }
        cuda::synchronize(dev)?;
        barrier.wait();
        let stream = cuda::current_stream(dev)?;
        let mut times = Vec::with_capacity(a.iters);
        for _ in 0..a.iters {
            let (start, end) = (cuda::Event::new(dev, true)?, cuda::Event::new(dev, true)?);
            start.record(&stream)?;
            comm.all_reduce(&x, ReduceOp::Sum)?.wait()?;
            end.record(&stream)?;
            end.synchronize()?;
            times.push(start.elapsed_ms(&end)? as f64 / 1e3);
        }
        Ok(median(times))
    };
    inner().map_err(|e| format!("rank {}: {e}", comm.rank()))
}

fn run(a: &Args) -> BoxResult<serde_json::Value> {
    let visible = cuda::device_count();
    if a.gpus > visible {
        return Err(format!("--gpus {}: only {visible} GPU(s) are visible", a.gpus).into());
    }
    let devices: Vec<Device> = (0..a.gpus).map(Device::Cuda).collect();
    let comms = Communicator::for_devices(&devices)?;
    let barrier = Arc::new(Barrier::new(a.gpus));
    let times: Vec<Result<f64, String>> = std::thread::scope(|s| {
        let hs: Vec<_> = comms
            .iter()
            .map(|c| {
                let b = Arc::clone(&barrier);
                s.spawn(move || rank_loop(a, c, &b))
            })
            .collect();
        hs.into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err("a rank panicked".into())))
            .collect()
    });
    let times: Vec<f64> = times.into_iter().collect::<Result<_, String>>()?;
    let t = times[0];
    let n = a.size_mib * (1 << 20) / a.dtype.size();
    let bytes = n * a.dtype.size();
    let algbw = bytes as f64 / t / 1e9;
    let w = a.gpus as f64;
    let (maj, min, patch) = nccl_version()?;
    Ok(serde_json::json!({
        "bench": "allreduce",
        "impl": "strata",
        "gpus": a.gpus,
        "dtype": a.dtype.to_string(),
        "bytes": bytes,
        "iters": a.iters,
        "time_us": round(t * 1e6, 1),
        "algbw_gbps": round(algbw, 2),
        "busbw_gbps": round(algbw * 2.0 * (w - 1.0) / w, 2),
        "nccl": format!("{maj}.{min}.{patch}"),
        "nccl_library": nccl_library_path(),
    }))
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
