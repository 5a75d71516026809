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
    f: impl FnMut() -> Result<(), E>,
) -> Result<f64, E> {
    Ok(event_and_host_ms(device, iters, f)?.0)
}

/// [`event_ms`] and, from the same calls, the median milliseconds the host
/// spent in `f` (from its call to its return, queueing the work). Where the
/// host's time is near the events', the GPU waited for the host: the op's
/// cost is its host path, not its kernels.
pub fn event_and_host_ms<E: From<TensorError>>(
    device: Device,
    iters: usize,
    mut f: impl FnMut() -> Result<(), E>,
) -> Result<(f64, f64), E> {
    for _ in 0..3 {
        f()?;
    }
    cuda::synchronize(device)?;
    let stream = cuda::current_stream(device)?;
    let (mut ts, mut hs) = (Vec::with_capacity(iters), Vec::with_capacity(iters));
    for _ in 0..iters {
        let (s, e) = (
            cuda::Event::new(device, true)?,
            cuda::Event::new(device, true)?,
        );
        s.record(&stream)?;
        let t0 = std::time::Instant::now();
        f()?;
        hs.push(t0.elapsed().as_secs_f64() * 1e3);
        e.record(&stream)?;
        e.synchronize()?;
        ts.push(f64::from(s.elapsed_ms(&e)?));
    }
    Ok((median(ts), median(hs)))
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
