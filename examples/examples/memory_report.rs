//! Where memory went in a small training loop: records the allocator's history
//! with call sites on the device named by `STRATA_DEVICE`, then writes
//!
//! * `snapshot.pickle`: PyTorch's snapshot format — open it with
//!   `python3 -m torch.cuda._memory_viz trace_plot snapshot.pickle -o trace.html`
//!   or on <https://pytorch.org/memory_viz>;
//! * `memory.html`: strata's self-contained report (memory over time by call
//!   site, the largest live allocations, the segment map);
//! * `memory_stats.json`: `memory_stats()` at the moment of the snapshot, for
//!   `examples/check_snapshot.py` to compare with the snapshot;
//!
//! into the working directory, and prints `memory_summary()`. Last, it times
//! writing a snapshot of 100 000 trace entries (simulated device).
//!
//! ```text
//! STRATA_DEVICE=cpu cargo run --release -p strata-examples --example memory_report
//! ```

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;
use strata::alloc::driver::sim::SimDriver;
use strata::alloc::{dump_snapshot, memory_report, record_memory_history};
use strata::{memory_stats, memory_summary, AllocatorConfig, CachingAllocator, StreamId};
use strata_autograd::{Adam, Optimizer, Var};
use strata_examples::autograd_demo::{mse, open_device, Mlp};
use strata_tensor::{DType, Device, Tensor};

type BoxResult<T> = Result<T, Box<dyn std::error::Error>>;

const STEPS: usize = 40;
const BATCH: usize = 128;
const WIDTHS: [usize; 4] = [32, 256, 256, 1];

fn main() -> ExitCode {
    let device = match open_device() {
        Ok(d) => d,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    match run(device) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

fn run(device: Device) -> BoxResult<()> {
    println!("device: {device}");
    record_memory_history(device, Some(1_000_000))?;
    let model = Mlp::new(&WIDTHS, 5, device)?;
    let mut opt = Adam::new(model.params(), 1e-3)?;
    // A deliberate leak for the report to show: every 8th loss is kept with
    // its graph.
    let mut kept: Vec<Var> = Vec::new();
    let mut last = 0.0f32;
    for step in 0..STEPS {
        let x = Var::new(Tensor::randn(
            &[BATCH, WIDTHS[0]],
            DType::F32,
            step as u64,
            device,
        )?);
        let y = Var::new(Tensor::randn(
            &[BATCH, 1],
            DType::F32,
            1 << 20 | step as u64,
            device,
        )?);
        opt.zero_grad(true)?;
        let loss = mse(&model.forward(&x)?, &y)?;
        loss.backward()?;
        opt.step()?;
        last = loss.item::<f32>()?;
        if step % 8 == 0 {
            kept.push(loss);
        }
    }
    println!(
        "trained {STEPS} steps, last loss {last:.5}; {} losses kept alive on purpose",
        kept.len()
    );

    let stats = memory_stats(device)?;
    let t = Instant::now();
    dump_snapshot(device, "snapshot.pickle")?;
    let snap_ms = t.elapsed().as_secs_f64() * 1e3;
    let map: serde_json::Map<String, serde_json::Value> = stats
        .to_map()
        .into_iter()
        .map(|(k, v)| (k, v.into()))
        .collect();
    std::fs::write(
        "memory_stats.json",
        serde_json::Value::Object(map).to_string(),
    )?;
    let t = Instant::now();
    memory_report(device, "memory.html")?;
    let html_ms = t.elapsed().as_secs_f64() * 1e3;
    let entries = strata::allocator(device)?.history().len();
    println!("wrote snapshot.pickle ({entries} trace entries, {snap_ms:.1} ms), memory.html ({html_ms:.1} ms), memory_stats.json");
    println!("{}", memory_summary(device)?);
    drop(kept);

    // Cost check: a snapshot of 100 000 trace entries.
    let sim = CachingAllocator::new(Arc::new(SimDriver::h100()), AllocatorConfig::default());
    sim.record_history(Some(100_000));
    let mut live = Vec::new();
    while sim.history().len() < 100_000 {
        for i in 0..100u64 {
            live.push(sim.allocate(512 * (i + 1), StreamId::DEFAULT)?);
        }
        live.truncate(50);
    }
    let path = std::env::temp_dir().join("strata_snapshot_100k.pickle");
    let t = Instant::now();
    sim.dump_snapshot(&path)?;
    let ms = t.elapsed().as_secs_f64() * 1e3;
    let bytes = std::fs::metadata(&path)?.len();
    let _ = std::fs::remove_file(&path);
    println!(
        "cost: a snapshot of {} trace entries written in {ms:.1} ms ({bytes} bytes)",
        sim.history().len()
    );
    Ok(())
}
