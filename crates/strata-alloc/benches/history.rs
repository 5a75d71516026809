//! The cost of allocation history on the cache-hit path (issue 15: with call
//! sites recorded, at most twice the cost with history off): an allocate+free
//! pair of a cached block on the simulated device, history off and on.
//!
//! ```text
//! cargo bench -p strata-alloc --bench history
//! ```

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use std::hint::black_box;
use std::sync::Arc;
use strata_alloc::driver::sim::SimDriver;
use strata_alloc::{AllocatorConfig, CachingAllocator, StreamId};

fn history_cache_hit_pair(c: &mut Criterion) {
    let mut g = c.benchmark_group("history_cache_hit_pair");
    g.throughput(Throughput::Elements(1));
    for (name, history) in [("off", false), ("call_sites", true)] {
        for size in [512u64, 1 << 20, 64 << 20] {
            let a = CachingAllocator::new(Arc::new(SimDriver::h100()), AllocatorConfig::default());
            if history {
                a.record_history(Some(100_000));
            }
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

criterion_group!(benches, history_cache_hit_pair);
criterion_main!(benches);
