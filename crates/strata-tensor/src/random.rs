//! Seeded random numbers for `rand`/`randn` (rand's ChaCha-based `StdRng`).

use rand::{RngExt, SeedableRng};

/// `n` uniform samples in `[0, 1)`.
pub(crate) fn uniform(n: usize, seed: u64) -> Vec<f64> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    (0..n).map(|_| rng.random::<f64>()).collect()
}

/// `n` standard normal samples (Box–Muller on the uniform stream).
pub(crate) fn normal(n: usize, seed: u64) -> Vec<f64> {
    let u = uniform(n + n % 2, seed);
    let mut out = Vec::with_capacity(n + 1);
    for pair in u.chunks(2) {
        let r = (-2.0 * (1.0 - pair[0]).ln()).sqrt();
        let theta = std::f64::consts::TAU * pair[1];
        out.push(r * theta.cos());
        out.push(r * theta.sin());
    }
    out.truncate(n);
    out
}
