//! The cost of history recording on the cache-hit path, as a ratio that holds
//! up on a loaded machine: allocators with history off and on (call sites)
//! are timed in alternation, many rounds, and the median of the per-round
//! ratios is printed with the median costs, then the fastest round of each
//! (the least disturbed by other work on a shared machine; the criterion bench
//! `benches/history.rs` gives the absolute figures).
//!
//! ```text
//! cargo run --release -p strata-alloc --example history_cost [ROUNDS [PAIRS]]
//! ```

use std::hint::black_box;
use std::sync::Arc;
use std::time::Instant;
use strata_alloc::driver::sim::SimDriver;
use strata_alloc::{AllocatorConfig, CachingAllocator, StreamId};

fn pair_ns(a: &CachingAllocator, size: u64, pairs: u32) -> f64 {
    let t = Instant::now();
    for _ in 0..pairs {
        let r = a.allocate_raw(black_box(size), StreamId::DEFAULT).unwrap();
        a.free_raw(r).unwrap();
    }
    t.elapsed().as_nanos() as f64 / pairs as f64
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn min(v: &[f64]) -> f64 {
    v.iter().copied().fold(f64::INFINITY, f64::min)
}

fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(31);
    let pairs: u32 = std::env::args()
        .nth(2)
        .and_then(|n| n.parse().ok())
        .unwrap_or(100_000);
    for size in [512u64, 1 << 20, 64 << 20] {
        let off = CachingAllocator::new(Arc::new(SimDriver::h100()), AllocatorConfig::default());
        let on = CachingAllocator::new(Arc::new(SimDriver::h100()), AllocatorConfig::default());
        on.record_history(Some(100_000));
        let (mut t_off, mut t_on, mut ratio) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..rounds {
            let x = pair_ns(&off, size, pairs);
            let y = pair_ns(&on, size, pairs);
            t_off.push(x);
            t_on.push(y);
            ratio.push(y / x);
        }
        println!(
            "size {size:>9}: history off {:6.1} ns, call sites {:6.1} ns per allocate+free pair; ratio {:.2} (median of {rounds} alternating rounds of {pairs} pairs)",
            median(&mut t_off),
            median(&mut t_on),
            median(&mut ratio)
        );
        // The fastest round of each: the cost with the least interference
        // from other work on a shared machine.
        println!(
            "                 fastest rounds: off {:6.1} ns, call sites {:6.1} ns; ratio {:.2}",
            min(&t_off),
            min(&t_on),
            min(&t_on) / min(&t_off)
        );
    }
}
