//! GPU bandwidth benchmark of strata's CUDA backend, one JSON line per
//! measurement, named like `shared/anchors/torch_bench.py`'s figures so the
//! two can be compared side by side (run both in the same device call).
//!
//! ```text
//! cargo run --release -p strata-examples --example gpu_bench [-- --iters N] [--only NAME,...]
//! ```
//!
//! Matrix products print `{"bench", "impl", "dtype", "tflops"}` lines with the
//! keys of `torch_mission.py`'s `matmul8192` lines (`--only matmul8192,bmm_attn`,
//! or one dtype alone: `--only matmul8192_tf32`;
//! PyTorch's f16 and batched figures come from
//! `benches/anchors/torch_matmul_extra.py`). The small-op line
//! (`--only small_op`) is the host cost of a 256-element `add_`.
//!
//! Kernels are timed with CUDA events on the current stream, transfers with
//! the wall clock around the copy and a stream synchronisation; each figure is
//! the median of `--iters` runs (default 20, at least 10) after 3 warm-ups.
//! Bandwidth counts bytes read plus bytes written. Without a GPU the program
//! prints why and exits with status 2.

use std::time::Instant;
use strata::Device;
use strata_tensor::{cuda, DType, Result, Tensor};

const GPU: Device = Device::Cuda(0);

struct Opts {
    iters: usize,
    only: Option<Vec<String>>,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    v[v.len() / 2]
}

/// Seconds per call of `f`, timed with CUDA events.
fn time_kernel(iters: usize, mut f: impl FnMut() -> Result<()>) -> Result<f64> {
    for _ in 0..3 {
        f()?;
    }
    cuda::synchronize(GPU)?;
    let stream = cuda::current_stream(GPU)?;
    let mut ts = Vec::with_capacity(iters);
    for _ in 0..iters {
        let (s, e) = (cuda::Event::new(GPU, true)?, cuda::Event::new(GPU, true)?);
        s.record(&stream)?;
        f()?;
        e.record(&stream)?;
        e.synchronize()?;
        ts.push(s.elapsed_ms(&e)? as f64 / 1e3);
    }
    Ok(median(ts))
}

/// Seconds per call of `f`, wall clock, the stream synchronised after each call.
fn time_wall(iters: usize, mut f: impl FnMut() -> Result<()>) -> Result<f64> {
    let stream = cuda::current_stream(GPU)?;
    for _ in 0..3 {
        f()?;
        stream.synchronize()?;
    }
    let mut ts = Vec::with_capacity(iters);
    for _ in 0..iters {
        let t0 = Instant::now();
        f()?;
        stream.synchronize()?;
        ts.push(t0.elapsed().as_secs_f64());
    }
    Ok(median(ts))
}

fn report(name: &str, bytes: f64, secs: f64) {
    println!(
        "{{\"bench\":\"{name}\",\"GBps\":{:.1},\"ms\":{:.4},\"bytes\":{bytes}}}",
        bytes / secs / 1e9,
        secs * 1e3
    );
}

/// Whether `--only` asks for `name`: an entry that is a prefix of `name`
/// (`copy` selects `copy_f32`), or that `name` is a prefix of (a group's
/// gate: `matmul8192` is entered for `matmul8192_tf32`).
fn want(o: &Opts, name: &str) -> bool {
    o.only.as_ref().is_none_or(|v| {
        v.iter()
            .any(|s| name.starts_with(s.as_str()) || s.starts_with(name))
    })
}

fn run(o: &Opts) -> Result<()> {
    let it = o.iters;
    let n: usize = 1 << 28;
    if ["copy", "add", "relu", "mul", "sum"]
        .iter()
        .any(|s| want(o, s))
    {
        let a = Tensor::randn(&[1 << 20], DType::F32, 1, GPU)?
            .expand(&[256, 1 << 20])?
            .contiguous()?
            .view(&[n as i64])?;
        let b = a.mul(0.5)?;
        let nb = n as f64;
        if want(o, "copy_f32") {
            report(
                "copy_f32",
                8.0 * nb,
                time_kernel(it, || a.copy_(&b).map(drop))?,
            );
        }
        if want(o, "add_inplace_f32") {
            report(
                "add_inplace_f32",
                12.0 * nb,
                time_kernel(it, || a.add_(&b).map(drop))?,
            );
        }
        if want(o, "add_out_f32") {
            report(
                "add_out_f32",
                12.0 * nb,
                time_kernel(it, || a.add(&b).map(drop))?,
            );
        }
        if want(o, "relu_inplace_f32") {
            report(
                "relu_inplace_f32",
                8.0 * nb,
                time_kernel(it, || a.relu_().map(drop))?,
            );
        }
        if want(o, "sum_f32") {
            report(
                "sum_f32",
                4.0 * nb,
                time_kernel(it, || a.sum(None, false).map(drop))?,
            );
        }
        if want(o, "mul_scalar_inplace_f32") {
            report(
                "mul_scalar_inplace_f32",
                8.0 * nb,
                time_kernel(it, || a.mul_(1.0001).map(drop))?,
            );
        }
    }
    // Reductions, named like `shared/anchors/torch_mission.py`'s `sums()`:
    // a full sum of 2^28 f32 and sums over each dim of a 16384^2 f32 matrix
    // (bytes read).
    if want(o, "sum_full_f32") {
        let a = Tensor::randn(&[n], DType::F32, 11, GPU)?;
        report(
            "sum_full_f32",
            4.0 * n as f64,
            time_kernel(it, || a.sum(None, false).map(drop))?,
        );
    }
    if want(o, "sum_dim1_f32") || want(o, "sum_dim0_f32") {
        let m: usize = 1 << 14;
        let b = Tensor::randn(&[m, m], DType::F32, 12, GPU)?;
        for (name, d) in [("sum_dim1_f32", 1i64), ("sum_dim0_f32", 0)] {
            if want(o, name) {
                report(
                    name,
                    4.0 * (m * m) as f64,
                    time_kernel(it, || b.sum(Some(&[d]), false).map(drop))?,
                );
            }
        }
    }
    let m: usize = 1 << 14;
    let mm = (m * m) as f64;
    if [
        "add_inplace_transposed",
        "add_inplace_broadcast",
        "contiguous_of",
        "add_inplace_slice",
    ]
    .iter()
    .any(|s| want(o, s))
    {
        let a = Tensor::randn(&[m], DType::F32, 2, GPU)?
            .expand(&[m as i64, m as i64])?
            .contiguous()?;
        let b = a.t()?.contiguous()?;
        let row = Tensor::randn(&[m], DType::F32, 3, GPU)?;
        let col = row.unsqueeze(1)?;
        if want(o, "add_inplace_transposed_f32") {
            let bt = b.t()?;
            report(
                "add_inplace_transposed_f32",
                12.0 * mm,
                time_kernel(it, || a.add_(&bt).map(drop))?,
            );
        }
        if want(o, "add_inplace_broadcast_row_f32") {
            report(
                "add_inplace_broadcast_row_f32",
                8.0 * mm,
                time_kernel(it, || a.add_(&row).map(drop))?,
            );
        }
        if want(o, "add_inplace_broadcast_col_f32") {
            report(
                "add_inplace_broadcast_col_f32",
                8.0 * mm,
                time_kernel(it, || a.add_(&col).map(drop))?,
            );
        }
        if want(o, "contiguous_of_transpose_f32") {
            let bt = b.t()?;
            report(
                "contiguous_of_transpose_f32",
                8.0 * mm,
                time_kernel(it, || bt.contiguous().map(drop))?,
            );
        }
        if want(o, "add_inplace_slice_step2_f32") {
            let sa = a.slice(1, None, None, 2)?;
            let sb = b.slice(1, None, None, 2)?;
            report(
                "add_inplace_slice_step2_f32",
                12.0 * mm / 2.0,
                time_kernel(it, || sa.add_(&sb).map(drop))?,
            );
        }
    }
    for (dt, name) in [
        (DType::F16, "add_inplace_float16"),
        (DType::BF16, "add_inplace_bfloat16"),
    ] {
        if want(o, name) {
            let a = Tensor::zeros(&[n], dt, GPU)?;
            let b = Tensor::ones(&[n], dt, GPU)?;
            report(
                name,
                6.0 * n as f64,
                time_kernel(it, || a.add_(&b).map(drop))?,
            );
        }
    }
    if want(o, "h2d") || want(o, "d2h") {
        let count = (256usize << 20) / 4;
        let bytes = (256usize << 20) as f64;
        let pageable = Tensor::randn(&[count], DType::F32, 4, Device::Cpu)?;
        let pinned = pageable.pin_memory()?;
        let g = pageable.to(GPU)?;
        let it = it.max(10);
        if want(o, "h2d_pinned_nonblocking") {
            report(
                "h2d_pinned_nonblocking",
                bytes,
                time_wall(it, || pinned.to_device(GPU, true).map(drop))?,
            );
        }
        if want(o, "h2d_pageable") {
            report(
                "h2d_pageable",
                bytes,
                time_wall(it, || pageable.to(GPU).map(drop))?,
            );
        }
        if want(o, "d2h_pinned_nonblocking") {
            report(
                "d2h_pinned_nonblocking",
                bytes,
                time_wall(it, || g.to_device(Device::Cpu, true).map(drop))?,
            );
        }
        if want(o, "d2h_pageable") {
            report(
                "d2h_pageable",
                bytes,
                time_wall(it, || g.to(Device::Cpu).map(drop))?,
            );
        }
        if let Some(s) = cuda::host_memory_stats(0) {
            let m: serde_json::Map<String, serde_json::Value> =
                s.to_map().into_iter().map(|(k, v)| (k, v.into())).collect();
            println!(
                "{{\"bench\":\"host_memory_stats\",\"stats\":{}}}",
                serde_json::Value::Object(m)
            );
        }
    }
    if want(o, "matmul8192") || want(o, "bmm_attn") {
        matmul(o)?;
    }
    if want(o, "small_op") {
        // Host cost of one small op (launch included), kernels queued back to back.
        let t = Tensor::zeros(&[256], DType::F32, GPU)?;
        let u = Tensor::ones(&[256], DType::F32, GPU)?;
        for _ in 0..100 {
            t.add_(&u)?;
        }
        cuda::synchronize(GPU)?;
        let iters = 20_000;
        let t0 = Instant::now();
        for _ in 0..iters {
            t.add_(&u)?;
        }
        let host = t0.elapsed().as_secs_f64();
        cuda::synchronize(GPU)?;
        let total = t0.elapsed().as_secs_f64();
        // The same ops in bursts of BURST after a synchronisation: the queue
        // never fills, so the host never waits for the GPU to run earlier
        // kernels (20 000 ops back to back measure whichever of the host and
        // the GPU's kernel-after-kernel rate is slower).
        const BURST: usize = 256;
        let mut bursts = Vec::with_capacity(40);
        for _ in 0..40 {
            cuda::synchronize(GPU)?;
            let t0 = Instant::now();
            for _ in 0..BURST {
                t.add_(&u)?;
            }
            bursts.push(t0.elapsed().as_secs_f64() / BURST as f64);
        }
        cuda::synchronize(GPU)?;
        println!(
            "{{\"bench\":\"small_op_add_\",\"host_us_per_op\":{:.2},\"us_per_op_with_sync\":{:.2},\"host_us_per_op_burst{BURST}\":{:.2}}}",
            host / iters as f64 * 1e6,
            total / iters as f64 * 1e6,
            median(bursts) * 1e6
        );
    }
    if want(o, "alloc_pair") {
        let alloc = strata::allocator(GPU).map_err(strata_tensor::TensorError::from)?;
        for size in [512u64, 1 << 20, 20 << 20] {
            let iters = 200_000;
            let warm = alloc.allocate(size, strata::StreamId::DEFAULT)?;
            drop(warm);
            let t0 = Instant::now();
            for _ in 0..iters {
                let b = alloc.allocate(size, strata::StreamId::DEFAULT)?;
                drop(b);
            }
            let ns = t0.elapsed().as_nanos() as f64 / iters as f64;
            println!("{{\"bench\":\"alloc_pair_cache_hit\",\"size\":{size},\"ns\":{ns:.1}}}");
        }
    }
    Ok(())
}

/// Seconds per call of `f`, timed with CUDA events around `reps` calls
/// queued back to back (so that short products are not measured as their
/// launch latency), median of `iters` such runs.
fn time_reps(iters: usize, reps: usize, mut f: impl FnMut() -> Result<()>) -> Result<f64> {
    let t = time_kernel(iters, || {
        for _ in 0..reps {
            f()?;
        }
        Ok(())
    })?;
    Ok(t / reps as f64)
}

fn report_tflops(bench: &str, dtype: &str, flops: f64, secs: f64) {
    println!(
        "{{\"bench\":\"{bench}\",\"impl\":\"strata\",\"dtype\":\"{dtype}\",\"tflops\":{:.1},\"ms\":{:.4}}}",
        flops / secs / 1e12,
        secs * 1e3
    );
}

/// Matrix products, keys as `torch_mission.py`'s `matmul8192` lines and
/// `benches/anchors/torch_matmul_extra.py`: 8192³ in f32 (exact), tf32 (opted
/// in with `set_float32_matmul_precision(High)`), bf16 and f16; and the
/// attention-shaped batched products `[96, 1024, 64] @ [96, 64, 1024]`
/// (`bmm_attn_qk`) and `[96, 1024, 1024] @ [96, 1024, 64]` (`bmm_attn_pv`)
/// in bf16, f16 and f32.
fn matmul(o: &Opts) -> Result<()> {
    use strata_tensor::{set_float32_matmul_precision, Precision};
    let it = o.iters;
    if want(o, "matmul8192") {
        let n = 8192usize;
        let flops = 2.0 * (n as f64).powi(3);
        for (name, dt, tf32) in [
            ("f32", DType::F32, false),
            ("tf32", DType::F32, true),
            ("bf16", DType::BF16, false),
            ("f16", DType::F16, false),
        ] {
            if !want(o, &format!("matmul8192_{name}")) {
                continue;
            }
            let a = Tensor::randn(&[n, n], dt, 11, GPU)?;
            let b = Tensor::randn(&[n, n], dt, 12, GPU)?;
            set_float32_matmul_precision(if tf32 {
                Precision::High
            } else {
                Precision::Highest
            });
            let secs = time_kernel(it, || a.matmul(&b).map(drop));
            set_float32_matmul_precision(Precision::Highest);
            report_tflops("matmul8192", name, flops, secs?);
        }
    }
    if want(o, "bmm_attn") {
        let (bs, l, d) = (96usize, 1024usize, 64usize);
        let flops = 2.0 * (bs * l * l * d) as f64;
        for (name, dt) in [
            ("bf16", DType::BF16),
            ("f16", DType::F16),
            ("f32", DType::F32),
        ] {
            let q = Tensor::randn(&[bs, l, d], dt, 21, GPU)?;
            let kt = Tensor::randn(&[bs, d, l], dt, 22, GPU)?;
            let p = Tensor::randn(&[bs, l, l], dt, 23, GPU)?;
            let v = Tensor::randn(&[bs, l, d], dt, 24, GPU)?;
            if want(o, "bmm_attn_qk") {
                let secs = time_reps(it, 10, || q.matmul(&kt).map(drop))?;
                report_tflops("bmm_attn_qk", name, flops, secs);
            }
            if want(o, "bmm_attn_pv") {
                let secs = time_reps(it, 10, || p.matmul(&v).map(drop))?;
                report_tflops("bmm_attn_pv", name, flops, secs);
            }
        }
    }
    Ok(())
}

fn main() {
    let mut o = Opts {
        iters: 20,
        only: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--iters" => {
                o.iters = args
                    .next()
                    .and_then(|s| s.parse().ok())
                    .unwrap_or(20)
                    .max(10)
            }
            "--only" => {
                o.only = args
                    .next()
                    .map(|s| s.split(',').map(String::from).collect())
            }
            _ => {
                eprintln!("usage: gpu_bench [--iters N] [--only NAME,...]");
                std::process::exit(2);
            }
        }
    }
    if !strata_tensor::has_backend(GPU) {
        eprintln!(
            "gpu_bench: no GPU to measure: {}",
            cuda::unavailable_reason().unwrap_or_else(|| "no CUDA backend".into())
        );
        std::process::exit(2);
    }
    if let Err(e) = run(&o) {
        eprintln!("gpu_bench: {e}");
        std::process::exit(1);
    }
}
