//! Times a fixed chain of dependent integer operations: its time per step
//! follows the core's clock (a fixed number of cycles per step).
use std::time::Instant;
fn main() {
    let iters: u64 = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(20_000_000);
    let mut best = f64::MAX;
    let mut all = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        let mut x: u64 = std::hint::black_box(1);
        for i in 0..iters {
            x = x.wrapping_mul(0x9E37_79B9_7F4A_7C15).wrapping_add(i);
        }
        std::hint::black_box(x);
        let ns = t.elapsed().as_nanos() as f64 / iters as f64;
        best = best.min(ns);
        all.push(ns);
    }
    println!("clock_probe ns_per_step min {best:.4} all {:?}", all.iter().map(|v| (v * 1e4).round() / 1e4).collect::<Vec<_>>());
}
