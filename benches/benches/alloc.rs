//! Allocator benchmarks: the cache-hit allocate+free pair and a mixed-size churn,
//! on the simulated device (pure allocator cost) and on the host allocator.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use std::hint::black_box;
use std::sync::Arc;
use strata_alloc::driver::sim::SimDriver;
use strata_alloc::{AllocatorConfig, CachingAllocator, StreamId};

fn sim(conf: &str) -> Arc<CachingAllocator> {
    CachingAllocator::new(
        Arc::new(SimDriver::h100()),
        AllocatorConfig::parse(conf).expect("valid configuration"),
    )
}

fn cache_hit_pair(c: &mut Criterion) {
    let mut g = c.benchmark_group("cache_hit_pair");
    g.throughput(Throughput::Elements(1));
    for (name, conf) in [("default", ""), ("segments", "expandable_segments:False")] {
        for size in [512u64, 1 << 20, 64 << 20] {
            let a = sim(conf);
            // Warm the cache so every timed allocation is a hit.
            let warm = a.allocate_raw(size, StreamId::DEFAULT).unwrap();
            a.free_raw(warm).unwrap();
            g.bench_with_input(BenchmarkId::new(name, size), &size, |b, &size| {
                b.iter(|| {
                    let r = a.allocate_raw(black_box(size), StreamId::DEFAULT).unwrap();
                    a.free_raw(r).unwrap();
                })
            });
        }
    }
    g.finish();
}

fn churn(c: &mut Criterion) {
    // A deterministic mix of sizes from 256 B to 48 MiB with 64 live slots,
    // replaced round-robin: splits, merges and occasional device allocations.
    let sizes: Vec<u64> = (0..4096u64)
        .map(|i| {
            let x = i.wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(17);
            256u64 << (x % 18)
        })
        .collect();
    let mut g = c.benchmark_group("churn");
    g.throughput(Throughput::Elements(sizes.len() as u64));
    for (name, conf) in [("default", ""), ("segments", "expandable_segments:False")] {
        let a = sim(conf);
        g.bench_function(name, |b| {
            b.iter(|| {
                let mut live: Vec<Option<strata_alloc::RawAllocation>> = vec![None; 64];
                for (i, &s) in sizes.iter().enumerate() {
                    if let Some(r) = live[i % 64].take() {
                        a.free_raw(r).unwrap();
                    }
                    live[i % 64] = Some(a.allocate_raw(s, StreamId::DEFAULT).unwrap());
                }
                for r in live.into_iter().flatten() {
                    a.free_raw(r).unwrap();
                }
            })
        });
    }
    g.finish();
}

criterion_group!(benches, cache_hit_pair, churn);
criterion_main!(benches);
