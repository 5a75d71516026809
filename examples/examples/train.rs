//! A small MLP (8 -> 64 -> 64 -> 1) learns a synthetic regression task on the device named by
//! `STRATA_DEVICE`, printing the allocator's statistics per epoch.
//!
//! ```text
//! STRATA_DEVICE=cpu cargo run --release -p strata-examples --example train
//! ```
//!
//! It exits non-zero unless the loss fell below half its first value,
//! allocated memory is flat across epochs (same
//! `allocated_bytes.all.current` after every epoch), and an evaluation
//! forward pass under `no_grad` allocates less than the same pass with grad
//! (lower peak, and nothing held by the result afterwards).

use std::process::ExitCode;
use strata::alloc::format_size;
use strata::{max_memory_allocated, memory_allocated, memory_stats, reset_peak_memory_stats};
use strata_autograd::{no_grad, Adam, Optimizer, Var};
use strata_examples::autograd_demo::{mse, open_device, Mlp, Trend};
use strata_tensor::{DType, Device, Tensor};

const SAMPLES: usize = 512;
const BATCH: usize = 64;
const INPUTS: usize = 8;
const HIDDEN: usize = 64;
const EPOCHS: usize = 15;

type BoxResult<T> = Result<T, Box<dyn std::error::Error>>;

fn main() -> ExitCode {
    let device = match open_device() {
        Ok(d) => d,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    match run(device) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

/// Inputs and targets of `y = relu(x A + 0.5) c` (a teacher network).
fn dataset(device: Device) -> BoxResult<(Tensor, Tensor)> {
    let x = Tensor::randn(&[SAMPLES, INPUTS], DType::F32, 1, device)?;
    let a = Tensor::randn(&[INPUTS, 16], DType::F32, 2, device)?.mul(0.5)?;
    let c = Tensor::randn(&[16, 1], DType::F32, 3, device)?.mul(0.5)?;
    let y = x.matmul(&a)?.add(0.5)?.relu()?.matmul(&c)?;
    Ok((x, y))
}

fn run(device: Device) -> BoxResult<bool> {
    println!("device: {device}");
    let (x, y) = dataset(device)?;
    let model = Mlp::new(&[INPUTS, HIDDEN, HIDDEN, 1], 42, device)?;
    let mut opt = Adam::new(model.params(), 0.01)?;
    println!(
        "data and parameters: {} allocated",
        format_size(memory_allocated(device)?)
    );
    println!(
        "{:>5} {:>10} {:>14} {:>14} {:>14} {:>8}",
        "epoch", "loss", "alloc.current", "alloc.peak", "reserved", "blocks"
    );
    let mut losses = Vec::new();
    let mut allocated = Vec::new();
    for epoch in 0..EPOCHS {
        reset_peak_memory_stats(device)?;
        let mut total = 0.0f64;
        for b in 0..SAMPLES / BATCH {
            let xb = Var::new(x.narrow(0, (b * BATCH) as i64, BATCH as i64)?);
            let yb = Var::new(y.narrow(0, (b * BATCH) as i64, BATCH as i64)?);
            opt.zero_grad(true)?;
            let loss = mse(&model.forward(&xb)?, &yb)?;
            loss.backward()?;
            opt.step()?;
            total += loss.item::<f32>()? as f64; // a host number: no graph kept
        }
        let mean = total / (SAMPLES / BATCH) as f64;
        let s = memory_stats(device)?;
        println!(
            "{:>5} {:>10.5} {:>14} {:>14} {:>14} {:>8}",
            epoch,
            mean,
            s.allocated_bytes.all().current,
            s.allocated_bytes.all().peak,
            s.reserved_bytes.all().current,
            s.allocation.all().current
        );
        losses.push(mean);
        allocated.push(s.allocated_bytes.all().current as u64);
    }

    // The same forward pass over all samples, with and without grad.
    let xa = Var::new(x.clone());
    let ya = Var::new(y.clone());
    let measure = |grad: bool| -> BoxResult<(u64, u64, f32)> {
        let base = memory_allocated(device)?;
        reset_peak_memory_stats(device)?;
        let loss = if grad {
            mse(&model.forward(&xa)?, &ya)?
        } else {
            no_grad(|| mse(&model.forward(&xa)?, &ya))?
        };
        let held = memory_allocated(device)? - base; // kept alive by the loss
        let peak = max_memory_allocated(device)? - base;
        Ok((peak, held, loss.item::<f32>()?))
    };
    let (peak_grad, held_grad, eval_loss) = measure(true)?;
    let (peak_nograd, held_nograd, _) = measure(false)?;
    println!("evaluation over {SAMPLES} samples (loss {eval_loss:.5}):");
    println!(
        "  with grad: peak +{peak_grad} B, held by the loss afterwards {held_grad} B (its graph's saved tensors)"
    );
    println!("  no_grad:   peak +{peak_nograd} B, held by the loss afterwards {held_nograd} B");

    let mut ok = true;
    let (first, last) = (losses[0], losses[EPOCHS - 1]);
    if last < 0.5 * first {
        println!("loss fell from {first:.5} to {last:.5}");
    } else {
        println!("FAIL: loss did not fall enough: {first:.5} -> {last:.5}");
        ok = false;
    }
    match Trend::of(&allocated) {
        Trend::Flat => println!(
            "allocated memory flat across epochs: {} ({} B)",
            format_size(allocated[0]),
            allocated[0]
        ),
        t => {
            println!("FAIL: allocated memory across epochs is {t}: {allocated:?}");
            ok = false;
        }
    }
    if peak_nograd < peak_grad && held_nograd < held_grad {
        println!(
            "no_grad evaluation allocates less: peak {peak_nograd} B < {peak_grad} B, held {held_nograd} B < {held_grad} B"
        );
    } else {
        println!(
            "FAIL: no_grad evaluation did not allocate less (peak {peak_nograd} B vs {peak_grad} B, held {held_nograd} B vs {held_grad} B)"
        );
        ok = false;
    }
    Ok(ok)
}
