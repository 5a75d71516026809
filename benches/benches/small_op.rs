//! Host cost of one small op: `t.add_(&u)` and `&t + &u` on 256 f32
//! elements, the figure `shared/anchors/torch_mission.py small_op` reports
//! for PyTorch (4.5 µs from C++, 5.3 µs from Python on an H200).
//!
//! `STRATA_DEVICE` picks the device (`cpu`, `cuda`, `cuda:N`; by default a GPU
//! when one is usable, else the CPU, which the bench then says). On a GPU the
//! time is what the calling thread spends per op (argument checks, locks,
//! kernel lookup, allocation, the driver's launch): ops are issued in bursts
//! of 256, timed, and the device is synchronised between bursts outside the
//! timing, so the launch queue never fills and the kernels' own run time is
//! not what is measured.
//!
//! `STRATA_DEVICE=cuda cargo bench -p strata-benches --bench small_op`

use criterion::{criterion_group, criterion_main, Criterion};
use std::hint::black_box;
use std::time::{Duration, Instant};
use strata_tensor::{cuda, default_device, DType, Device, Tensor};

/// Ops issued between two synchronisations.
const BURST: u64 = 256;

/// Elements of the operands.
const N: usize = 256;

/// Host time of `iters` calls of `op`, in bursts of [`BURST`] with the device
/// synchronised (untimed) after each burst.
fn host_time(device: Device, iters: u64, mut op: impl FnMut()) -> Duration {
    let mut total = Duration::ZERO;
    let mut left = iters;
    while left > 0 {
        let burst = left.min(BURST);
        let t0 = Instant::now();
        for _ in 0..burst {
            op();
        }
        total += t0.elapsed();
        cuda::synchronize(device).expect("synchronize");
        left -= burst;
    }
    total
}

fn bench(c: &mut Criterion) {
    let device = match default_device() {
        Ok(d) => d,
        Err(e) => {
            eprintln!("small_op: {e}");
            return;
        }
    };
    if device == Device::Cpu {
        eprintln!(
            "small_op: measuring the CPU backend ({}); set STRATA_DEVICE=cuda on a GPU machine",
            cuda::unavailable_reason().unwrap_or_else(|| "STRATA_DEVICE=cpu".into())
        );
    }
    let t = Tensor::zeros(&[N], DType::F32, device).expect("zeros");
    let u = Tensor::ones(&[N], DType::F32, device).expect("ones");
    // Compile and cache the kernels, warm the allocator's cache.
    for _ in 0..100 {
        t.add_(&u).expect("add_");
        drop(t.add(&u).expect("add"));
    }
    cuda::synchronize(device).expect("synchronize");

    let mut g = c.benchmark_group(format!("small_op_{device}"));
    g.bench_function("add_inplace_f32_256", |b| {
        b.iter_custom(|iters| {
            host_time(device, iters, || {
                black_box(t.add_(black_box(&u)).expect("add_"));
            })
        })
    });
    g.bench_function("add_out_f32_256", |b| {
        b.iter_custom(|iters| {
            host_time(device, iters, || {
                black_box(t.add(black_box(&u)).expect("add"));
            })
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
