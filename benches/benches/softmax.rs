//! Softmax and log-softmax along the last dim on the CPU, f32 2048x1024
//! (rows of a transformer's attention scores): strata (rows spread over all
//! cores; f32 rows in PyTorch's AVX2 order with SLEEF's `exp`/`log`, run in
//! an FMA-compiled copy where the CPU has FMA) against a plain per-row
//! reference on ndarray (one thread: max, `exp` of the C library, sum,
//! divide) on the same values.
//!
//! `cargo bench -p strata-benches --bench softmax`

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use ndarray::{Array2, Axis};
use std::hint::black_box;
use strata_tensor::{DType, Device, Tensor};

const ROWS: usize = 2048;
const COLS: usize = 1024;

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("softmax");
    g.sample_size(10);
    g.throughput(Throughput::Bytes((ROWS * COLS * 4 * 2) as u64));

    let s = Tensor::rand(&[ROWS, COLS], DType::F32, 1, Device::Cpu).unwrap();
    let mut n = Array2::from_shape_vec((ROWS, COLS), s.to_vec::<f32>().unwrap()).unwrap();

    g.bench_function(BenchmarkId::new("strata", "softmax"), |b| {
        b.iter(|| black_box(&s).softmax(-1, None).unwrap())
    });
    g.bench_function(BenchmarkId::new("strata", "log_softmax"), |b| {
        b.iter(|| black_box(&s).log_softmax(-1, None).unwrap())
    });
    g.bench_function(BenchmarkId::new("ndarray", "softmax"), |b| {
        b.iter(|| {
            for mut row in black_box(&mut n).axis_iter_mut(Axis(0)) {
                let m = row.fold(f32::NEG_INFINITY, |m, &x| m.max(x));
                row.mapv_inplace(|x| (x - m).exp());
                let sum = row.sum();
                row.mapv_inplace(|x| x / sum);
            }
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
