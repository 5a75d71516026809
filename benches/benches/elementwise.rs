//! Element-wise throughput on f32 4096x4096: strata (all cores, strided
//! iteration plans) against ndarray (one thread) on the same operations.
//!
//! `cargo bench -p strata-benches --bench elementwise`

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use ndarray::{s, Array1, Array2};
use std::hint::black_box;
use strata_tensor::{DType, Device, Tensor};

const N: usize = 4096;

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("elementwise");
    g.sample_size(10);
    let elems = (N * N) as u64;
    let f = 4u64; // bytes per f32

    // strata operands
    let sa = Tensor::rand(&[N, N], DType::F32, 1, Device::Cpu).unwrap();
    let sb = Tensor::rand(&[N, N], DType::F32, 2, Device::Cpu).unwrap();
    let srow = Tensor::rand(&[N], DType::F32, 3, Device::Cpu).unwrap();
    let scol = Tensor::rand(&[N, 1], DType::F32, 4, Device::Cpu).unwrap();
    // ndarray operands with the same values
    let to_nd = |t: &Tensor, shape: (usize, usize)| {
        Array2::from_shape_vec(shape, t.to_vec::<f32>().unwrap()).unwrap()
    };
    let mut na = to_nd(&sa, (N, N));
    let nb = to_nd(&sb, (N, N));
    let nrow = Array1::from_vec(srow.to_vec::<f32>().unwrap());
    let ncol = to_nd(&scol, (N, 1));
    let mut nout = Array2::<f32>::zeros((N, N));

    let sbt = sb.t().unwrap();
    let sa2 = sa.slice(1, None, None, 2).unwrap();
    let sb2 = sb.slice(1, None, None, 2).unwrap();
    let sout = Tensor::zeros(&[N, N], DType::F32, Device::Cpu).unwrap();

    g.throughput(Throughput::Bytes(3 * elems * f));
    g.bench_function(BenchmarkId::new("strata", "contiguous"), |bch| {
        bch.iter(|| sa.add_(black_box(&sb)).unwrap())
    });
    g.bench_function(BenchmarkId::new("ndarray", "contiguous"), |bch| {
        bch.iter(|| na += black_box(&nb))
    });
    g.bench_function(BenchmarkId::new("strata", "transposed"), |bch| {
        bch.iter(|| sa.add_(black_box(&sbt)).unwrap())
    });
    g.bench_function(BenchmarkId::new("ndarray", "transposed"), |bch| {
        bch.iter(|| na += &black_box(&nb).t())
    });

    g.throughput(Throughput::Bytes(2 * elems * f + N as u64 * f));
    g.bench_function(BenchmarkId::new("strata", "broadcast_row"), |bch| {
        bch.iter(|| sa.add_(black_box(&srow)).unwrap())
    });
    g.bench_function(BenchmarkId::new("ndarray", "broadcast_row"), |bch| {
        bch.iter(|| na += black_box(&nrow))
    });
    g.bench_function(BenchmarkId::new("strata", "broadcast_col"), |bch| {
        bch.iter(|| sa.add_(black_box(&scol)).unwrap())
    });
    g.bench_function(BenchmarkId::new("ndarray", "broadcast_col"), |bch| {
        bch.iter(|| na += black_box(&ncol))
    });

    g.throughput(Throughput::Bytes(3 * (elems / 2) * f));
    g.bench_function(BenchmarkId::new("strata", "step2"), |bch| {
        bch.iter(|| sa2.add_(black_box(&sb2)).unwrap())
    });
    g.bench_function(BenchmarkId::new("ndarray", "step2"), |bch| {
        bch.iter(|| {
            let mut v = na.slice_mut(s![.., ..;2]);
            v += &black_box(&nb).slice(s![.., ..;2]);
        })
    });

    // A fused multiply-add per element (`addcmul`: x + 0.5·a·b, rounded
    // once; `lerp` is built on it): strata's AVX2 kernels are compiled with
    // FMA; `STRATA_CPU_SIMD=baseline` runs the copies that call the C
    // library's `fma`. ndarray: the same fused expression with `mul_add`.
    g.throughput(Throughput::Bytes(4 * elems * f));
    g.bench_function(BenchmarkId::new("strata", "addcmul"), |bch| {
        bch.iter(|| black_box(&sa).addcmul(&sb, &sb, 0.5).unwrap())
    });
    g.bench_function(BenchmarkId::new("ndarray", "addcmul"), |bch| {
        bch.iter(|| {
            ndarray::Zip::from(&mut nout)
                .and(black_box(&na))
                .and(&nb)
                .for_each(|o, &x, &b| *o = (0.5 * b).mul_add(b, x))
        })
    });

    g.throughput(Throughput::Bytes(2 * elems * f));
    // strata: `contiguous()` takes its output from the caching allocator;
    // ndarray gets a preallocated output (its most favourable form).
    g.bench_function(
        BenchmarkId::new("strata", "contiguous_of_transpose"),
        |bch| bch.iter(|| black_box(&sbt).contiguous().unwrap()),
    );
    g.bench_function(
        BenchmarkId::new("ndarray", "contiguous_of_transpose"),
        |bch| bch.iter(|| nout.assign(&black_box(&nb).t())),
    );
    g.bench_function(BenchmarkId::new("strata", "copy"), |bch| {
        bch.iter(|| sout.copy_(black_box(&sb)).unwrap())
    });
    g.bench_function(BenchmarkId::new("ndarray", "copy"), |bch| {
        bch.iter(|| nout.assign(black_box(&nb)))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
