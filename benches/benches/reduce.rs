//! Reduction throughput on f32 4096x4096: strata (all cores, vectorised
//! folds) against ndarray (one thread) on the same values, and a plain copy
//! as the memory-speed yardstick.
//!
//! `cargo bench -p strata-benches --bench reduce`
//!
//! Cases (throughput = bytes read, plus bytes written for `copy`):
//! `sum_all` (every element), `sum_dim0` (over rows: one sum per column),
//! `sum_dim1` (over columns: one sum per row), `max_all`, `copy`.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use ndarray::{Array2, Axis};
use std::hint::black_box;
use strata_tensor::{DType, Device, Tensor};

const N: usize = 4096;

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("reduce");
    g.sample_size(10);
    let bytes = (N * N * 4) as u64;

    let sa = Tensor::rand(&[N, N], DType::F32, 1, Device::Cpu).unwrap();
    let sout = Tensor::zeros(&[N, N], DType::F32, Device::Cpu).unwrap();
    let na = Array2::from_shape_vec((N, N), sa.to_vec::<f32>().unwrap()).unwrap();
    let mut nout = Array2::<f32>::zeros((N, N));

    g.throughput(Throughput::Bytes(bytes));
    g.bench_function(BenchmarkId::new("strata", "sum_all"), |b| {
        b.iter(|| black_box(&sa).sum(None, false).unwrap())
    });
    g.bench_function(BenchmarkId::new("ndarray", "sum_all"), |b| {
        b.iter(|| black_box(&na).sum())
    });
    g.bench_function(BenchmarkId::new("strata", "sum_dim0"), |b| {
        b.iter(|| black_box(&sa).sum(Some(&[0]), false).unwrap())
    });
    g.bench_function(BenchmarkId::new("ndarray", "sum_dim0"), |b| {
        b.iter(|| black_box(&na).sum_axis(Axis(0)))
    });
    g.bench_function(BenchmarkId::new("strata", "sum_dim1"), |b| {
        b.iter(|| black_box(&sa).sum(Some(&[1]), false).unwrap())
    });
    g.bench_function(BenchmarkId::new("ndarray", "sum_dim1"), |b| {
        b.iter(|| black_box(&na).sum_axis(Axis(1)))
    });
    g.bench_function(BenchmarkId::new("strata", "max_all"), |b| {
        b.iter(|| black_box(&sa).max().unwrap())
    });
    // ndarray has no NaN-propagating max: a fold with the same rule.
    g.bench_function(BenchmarkId::new("ndarray", "max_all"), |b| {
        b.iter(|| {
            black_box(&na).fold(f32::NEG_INFINITY, |m, &x| {
                if x.is_nan() || m.is_nan() {
                    f32::NAN
                } else if x > m {
                    x
                } else {
                    m
                }
            })
        })
    });

    g.throughput(Throughput::Bytes(2 * bytes));
    g.bench_function(BenchmarkId::new("strata", "copy"), |b| {
        b.iter(|| sout.copy_(black_box(&sa)).unwrap())
    });
    g.bench_function(BenchmarkId::new("ndarray", "copy"), |b| {
        b.iter(|| nout.assign(black_box(&na)))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
