//! Timing GPU work for the speed examples (`gpu_bench`, `transformer_ops`,
//! `conv_ops`): medians of CUDA-event-timed calls after warm-ups, and the
//! `--iters N` flag.

use strata::Device;
use strata_tensor::{cuda, TensorError};

/// The median of `v` (the upper one of an even count); NaN sorts last.
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    v[v.len() / 2]
}

/// Milliseconds per call of `f` on `device`: the median of `iters` calls,
/// each between two CUDA events on the current stream, after 3 warm-ups.
pub fn event_ms<E: From<TensorError>>(
    device: Device,
    iters: usize,
    mut f: impl FnMut() -> Result<(), E>,
) -> Result<f64, E> {
    for _ in 0..3 {
        f()?;
    }
    cuda::synchronize(device)?;
    let stream = cuda::current_stream(device)?;
    let mut ts = Vec::with_capacity(iters);
    for _ in 0..iters {
        let (s, e) = (
            cuda::Event::new(device, true)?,
            cuda::Event::new(device, true)?,
        );
        s.record(&stream)?;
        f()?;
        e.record(&stream)?;
        e.synchronize()?;
        ts.push(f64::from(s.elapsed_ms(&e)?));
    }
    Ok(median(ts))
}

/// The `--iters N` flag of the command line (`default` without it), at
/// least `min`.
pub fn iters_arg(default: usize, min: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == "--iters")
        .and_then(|i| args.get(i + 1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
        .max(min)
}
