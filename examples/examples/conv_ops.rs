//! GPU speed and memory of convolution and pooling at ResNet-50 shapes
//! (session 75), one JSON line per measurement: `{"bench": "conv_ops",
//! "impl": "strata", "op", "dtype", "pass": "fwd"|"fwd+bwd", "shape", "ms",
//! "host_ms", "peak_mib"}`. `benches/anchors/torch_conv_ops.py` prints PyTorch's lines
//! (cuDNN) for the same ops and shapes; run both in one device call.
//!
//! ```text
//! cargo run --release -p strata-examples --example conv_ops [-- --iters N]
//!     [--conv-tf32 on|off] [--conv-chunk-mib N|none] [--cudnn on|off]
//! ```
//!
//! * `conv3x3`: `[32, 64, 56, 56]` by a `[64, 64, 3, 3]` kernel, padding 1;
//! * `conv1x1`: `[32, 256, 56, 56]` by `[64, 256, 1, 1]`;
//! * `conv3x3_s2`: `[32, 128, 56, 56]` by `[128, 128, 3, 3]`, stride 2, padding 1;
//! * `conv_transpose2x2_s2`: `[32, 256, 28, 28]` by `[256, 128, 2, 2]`, stride 2
//!   (a UNet decoder's upsampling);
//! * `max_pool`: 3×3, stride 2, padding 1 over `[32, 64, 112, 112]`;
//! * `avg_pool`: 2×2 over `[32, 256, 56, 56]`;
//! * `adaptive_avg_pool`: to 1×1 over `[32, 2048, 7, 7]`.
//!
//! `fwd` times the op on tensors; `fwd+bwd` times the op on variables that
//! require grad and the backward of `(y * g).sum()`. Each figure is the
//! median of `--iters` CUDA-event-timed calls (default 10) after 3 warm-ups,
//! in f32 and bf16 (`host_ms`: the median time the host spent in those
//! calls; near `ms`, the GPU waited for the host); `peak_mib` is the allocator's peak allocated memory
//! during one call above what was allocated before it. `--conv-tf32` and
//! `--conv-chunk-mib` set [`strata_tensor::set_conv_allow_tf32`] (default
//! on, as PyTorch's `torch.backends.cudnn.allow_tf32`) and
//! [`strata_tensor::set_conv_chunk_bytes`] (default 64 MiB; `none` never
//! chunks); `--cudnn` sets [`strata_tensor::set_cudnn_enabled`] (default on,
//! as PyTorch's `torch.backends.cudnn.enabled`); every line names all three
//! and whether cuDNN was found (`cudnn_version`). Without a GPU the program
//! prints why and exits with 2.

use strata::Device;
use strata_autograd::Var;
use strata_examples::gpu_timing::{event_and_host_ms, iters_arg};
use strata_tensor::{cuda, ConvOptions, DType, PoolOptions, Tensor};

/// Any failure, with its message.
type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

const GPU: Device = Device::Cuda(0);

/// Milliseconds per call of `f` (CUDA events on the current stream), the
/// host's milliseconds in those calls, and the peak memory one call
/// allocates above what was allocated before it.
fn measure(iters: usize, mut f: impl FnMut() -> Result<()>) -> Result<(f64, f64, f64)> {
    let (ms, host) = event_and_host_ms(GPU, iters, &mut f)?;
    let before = strata::alloc::memory_allocated(GPU)? as f64;
    strata::alloc::reset_peak_memory_stats(GPU)?;
    f()?;
    cuda::synchronize(GPU)?;
    let peak = strata::alloc::max_memory_allocated(GPU)? as f64;
    Ok((ms, host, (peak - before) / (1 << 20) as f64))
}

fn line(op: &str, dtype: DType, pass: &str, shape: &[usize], (ms, host, peak): (f64, f64, f64)) {
    println!(
        "{}",
        serde_json::json!({
            "bench": "conv_ops", "impl": "strata", "op": op, "dtype": dtype.name(),
            "pass": pass, "shape": shape, "ms": ms, "host_ms": host, "peak_mib": peak,
            "conv_tf32": strata_tensor::conv_allow_tf32(),
            "conv_chunk_mib": match strata_tensor::conv_chunk_bytes() {
                usize::MAX => None,
                b => Some(b >> 20),
            },
            "cudnn": strata_tensor::cudnn_enabled(),
            "cudnn_version": cuda::cudnn_version(),
        })
    );
}

/// The upstream gradient's weighting: `(y * g).sum()` backward gives `g`.
/// The product `y * g` is dropped before the backward runs, as Python
/// drops the temporary in PyTorch's `(y * g).sum().backward()` (a Rust
/// temporary would live to the end of the statement, through the backward).
fn backward_of(y: &Var, g: &Tensor) -> Result<()> {
    let loss = y.mul(&Var::new(g.clone()))?.sum(None, false)?;
    Ok(loss.backward()?)
}

fn conv(
    name: &str,
    x_shape: [usize; 4],
    w_shape: [usize; 4],
    opts: ConvOptions,
    dtype: DType,
    iters: usize,
) -> Result<()> {
    // `conv_transpose*`: the weight is `[C_in, C_out, k, k]`.
    let transposed = name.starts_with("conv_transpose");
    let out_channels = if transposed { w_shape[1] } else { w_shape[0] };
    let x = Tensor::randn(&x_shape, dtype, 1, GPU)?;
    let w = Tensor::randn(&w_shape, dtype, 2, GPU)?;
    let b = Tensor::randn(&[out_channels], dtype, 3, GPU)?;
    let f = |x: &Tensor| match transposed {
        true => x.conv_transpose2d(&w, Some(&b), &opts),
        false => x.conv2d(&w, Some(&b), &opts),
    };
    let m = measure(iters, || {
        f(&x)?;
        Ok(())
    })?;
    line(name, dtype, "fwd", &x_shape, m);
    let g = Tensor::randn(f(&x)?.shape(), dtype, 4, GPU)?;
    let m = measure(iters, || {
        let xv = Var::parameter(x.clone())?;
        let wv = Var::parameter(w.clone())?;
        let bv = Var::parameter(b.clone())?;
        let y = match transposed {
            true => xv.conv_transpose2d(&wv, Some(&bv), &opts)?,
            false => xv.conv2d(&wv, Some(&bv), &opts)?,
        };
        backward_of(&y, &g)
    })?;
    line(name, dtype, "fwd+bwd", &x_shape, m);
    Ok(())
}

fn pool(
    name: &str,
    shape: [usize; 4],
    f: impl Fn(&Tensor) -> strata_tensor::Result<Tensor>,
    fv: impl Fn(&Var) -> strata_autograd::Result<Var>,
    dtype: DType,
    iters: usize,
) -> Result<()> {
    let x = Tensor::randn(&shape, dtype, 5, GPU)?;
    let m = measure(iters, || {
        f(&x)?;
        Ok(())
    })?;
    line(name, dtype, "fwd", &shape, m);
    let g = Tensor::randn(f(&x)?.shape(), dtype, 6, GPU)?;
    let m = measure(iters, || {
        let xv = Var::parameter(x.clone())?;
        backward_of(&fv(&xv)?, &g)
    })?;
    line(name, dtype, "fwd+bwd", &shape, m);
    Ok(())
}

fn run(dtype: DType, iters: usize) -> Result<()> {
    let pad1 = ConvOptions::new().padding(&[1]);
    conv(
        "conv3x3",
        [32, 64, 56, 56],
        [64, 64, 3, 3],
        pad1.clone(),
        dtype,
        iters,
    )?;
    conv(
        "conv1x1",
        [32, 256, 56, 56],
        [64, 256, 1, 1],
        ConvOptions::new(),
        dtype,
        iters,
    )?;
    conv(
        "conv3x3_s2",
        [32, 128, 56, 56],
        [128, 128, 3, 3],
        pad1.stride(&[2]),
        dtype,
        iters,
    )?;
    conv(
        "conv_transpose2x2_s2",
        [32, 256, 28, 28],
        [256, 128, 2, 2],
        ConvOptions::new().stride(&[2]),
        dtype,
        iters,
    )?;
    let mp = PoolOptions::new(&[3]).stride(&[2]).padding(&[1]);
    let mpv = mp.clone();
    pool(
        "max_pool",
        [32, 64, 112, 112],
        |x| x.max_pool2d(&mp),
        |x| x.max_pool2d(&mpv),
        dtype,
        iters,
    )?;
    let ap = PoolOptions::new(&[2]);
    let apv = ap.clone();
    pool(
        "avg_pool",
        [32, 256, 56, 56],
        |x| x.avg_pool2d(&ap),
        |x| x.avg_pool2d(&apv),
        dtype,
        iters,
    )?;
    pool(
        "adaptive_avg_pool",
        [32, 2048, 7, 7],
        |x| x.adaptive_avg_pool2d(&[1]),
        |x| x.adaptive_avg_pool2d(&[1]),
        dtype,
        iters,
    )
}

/// The value after `name` on the command line.
fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    let i = args.iter().position(|a| a == name)?;
    args.get(i + 1).cloned()
}

/// Applies `--conv-tf32`, `--conv-chunk-mib` and `--cudnn`.
fn conv_settings() -> Result<()> {
    match arg("--cudnn").as_deref() {
        None => {}
        Some("on") => strata_tensor::set_cudnn_enabled(true),
        Some("off") => strata_tensor::set_cudnn_enabled(false),
        Some(v) => return Err(format!("--cudnn takes on or off, not {v:?}").into()),
    }
    match arg("--conv-tf32").as_deref() {
        None => {}
        Some("on") => strata_tensor::set_conv_allow_tf32(true),
        Some("off") => strata_tensor::set_conv_allow_tf32(false),
        Some(v) => return Err(format!("--conv-tf32 takes on or off, not {v:?}").into()),
    }
    match arg("--conv-chunk-mib").as_deref() {
        None => {}
        Some("none") => strata_tensor::set_conv_chunk_bytes(usize::MAX),
        Some(v) => {
            let mib: usize = v.parse().map_err(|_| {
                format!("--conv-chunk-mib takes a number of MiB or none, not {v:?}")
            })?;
            strata_tensor::set_conv_chunk_bytes(mib.saturating_mul(1 << 20));
        }
    }
    Ok(())
}

fn main() {
    let iters = iters_arg(10, 3);
    if let Err(e) = conv_settings() {
        eprintln!("conv_ops: {e}");
        std::process::exit(2);
    }
    if !strata_tensor::has_backend(GPU) {
        eprintln!(
            "conv_ops needs a CUDA GPU: {}",
            cuda::unavailable_reason().unwrap_or_default()
        );
        std::process::exit(2);
    }
    for dtype in [DType::F32, DType::BF16] {
        if let Err(e) = run(dtype, iters) {
            eprintln!("conv_ops {dtype}: {e}");
            std::process::exit(1);
        }
    }
}
