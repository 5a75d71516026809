//! Contiguous against strided element-wise ops on the device `STRATA_DEVICE`
//! names (`cpu`, `cuda`, `cuda:N`; by default a GPU when one is usable, else
//! the CPU). Each iteration ends with a device synchronisation, so GPU timings
//! cover the kernels, not just their launches. Throughput counts bytes read
//! plus bytes written.
//!
//! `STRATA_DEVICE=cuda cargo bench -p strata-benches --bench elementwise_device`

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use std::hint::black_box;
use strata_tensor::{cuda, default_device, DType, Tensor};

fn bench(c: &mut Criterion) {
    let device = match default_device() {
        Ok(d) => d,
        Err(e) => {
            eprintln!("elementwise_device: {e}");
            return;
        }
    };
    if !strata_tensor::has_backend(device) {
        eprintln!(
            "elementwise_device: skipped: no backend for {device}: {}",
            cuda::unavailable_reason().unwrap_or_default()
        );
        return;
    }
    let n: usize = if device == strata_tensor::Device::Cpu {
        1 << 12
    } else {
        1 << 14
    };
    let elems = (n * n) as u64;
    let f = 4u64;
    let sync = || cuda::synchronize(device).unwrap();
    let a = Tensor::rand(&[n, n], DType::F32, 1, device).unwrap();
    let b = Tensor::rand(&[n, n], DType::F32, 2, device).unwrap();
    let row = Tensor::rand(&[n], DType::F32, 3, device).unwrap();
    let col = Tensor::rand(&[n, 1], DType::F32, 4, device).unwrap();
    let bt = b.t().unwrap();
    let a2 = a.slice(1, None, None, 2).unwrap();
    let b2 = b.slice(1, None, None, 2).unwrap();
    let out = Tensor::zeros(&[n, n], DType::F32, device).unwrap();

    let mut g = c.benchmark_group(format!("elementwise_{device}"));
    g.sample_size(20);
    g.throughput(Throughput::Bytes(3 * elems * f));
    g.bench_function(BenchmarkId::new("add_", "contiguous"), |x| {
        x.iter(|| {
            a.add_(black_box(&b)).unwrap();
            sync()
        })
    });
    g.bench_function(BenchmarkId::new("add_", "transposed"), |x| {
        x.iter(|| {
            a.add_(black_box(&bt)).unwrap();
            sync()
        })
    });
    g.throughput(Throughput::Bytes(2 * elems * f));
    g.bench_function(BenchmarkId::new("add_", "broadcast_row"), |x| {
        x.iter(|| {
            a.add_(black_box(&row)).unwrap();
            sync()
        })
    });
    g.bench_function(BenchmarkId::new("add_", "broadcast_col"), |x| {
        x.iter(|| {
            a.add_(black_box(&col)).unwrap();
            sync()
        })
    });
    g.bench_function(BenchmarkId::new("contiguous", "transposed"), |x| {
        x.iter(|| {
            black_box(bt.contiguous().unwrap());
            sync()
        })
    });
    g.bench_function(BenchmarkId::new("copy_", "contiguous"), |x| {
        x.iter(|| {
            out.copy_(black_box(&b)).unwrap();
            sync()
        })
    });
    g.throughput(Throughput::Bytes(3 * elems * f / 2));
    g.bench_function(BenchmarkId::new("add_", "step2_slice"), |x| {
        x.iter(|| {
            a2.add_(black_box(&b2)).unwrap();
            sync()
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
