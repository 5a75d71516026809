//! Session 78: GPU convolutions through cuDNN (`backend/cuda/cudnn.rs`).
//! Each pass (forward, input gradient, weight gradient) of random
//! convolutions and transposed convolutions — 1 to 3 spatial dims, strides,
//! dilations, groups, explicit, `same` and `valid` padding, output padding,
//! non-contiguous operands, f16, bf16, f32 and f64 — is compared with the same convolution computed in f64 on the CPU,
//! with cuDNN on and off (columns and cuBLAS), and the settings that steer
//! it are checked: `set_cudnn_enabled`, `set_conv_allow_tf32` (exact f32
//! with `CUDNN_FMA_MATH`), the memory a convolution takes, and batches
//! whose tensors pass cuDNN's 32-bit element count.

use crate::half_conv_s77::{exclusive_conv_settings, RestoreCudnn};
use strata_autograd::Var;
use strata_tensor::{ConvOptions, ConvPadding, DType, Device, Tensor};

/// A xorshift stream (the tests' own, so that cases are reproducible).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    /// Uniform in `lo..=hi`.
    fn int(&mut self, lo: usize, hi: usize) -> usize {
        lo + (self.next() % (hi - lo + 1) as u64) as usize
    }
    fn values(&mut self, n: usize) -> Vec<f64> {
        (0..n)
            .map(|_| (self.next() % 2001) as f64 / 1000.0 - 1.0)
            .collect()
    }
}

#[derive(Clone, Debug)]
struct Case {
    x: Vec<usize>,
    w: Vec<usize>,
    opts: ConvOptions,
    /// Whether the input is a transposed view (not contiguous).
    strided_input: bool,
    bias: bool,
    /// `F.conv_transpose*d` (weight `[C_in, C_out / groups, k...]`).
    transposed: bool,
}

/// A random convolution of `spatial` dims that has at least one output.
fn case(r: &mut Rng, spatial: usize) -> Case {
    let groups = r.int(1, 3);
    let c = groups * r.int(1, 3);
    let c_out = groups * r.int(1, 3);
    let kmax = if spatial == 3 { 2 } else { 3 };
    let kernel: Vec<usize> = (0..spatial).map(|_| r.int(1, kmax)).collect();
    let dilation: Vec<usize> = (0..spatial).map(|_| r.int(1, 2)).collect();
    let max_len = if spatial == 3 { 6 } else { 10 };
    let strided_input = r.int(0, 2) == 0;
    let bias = r.int(0, 1) == 1;
    if r.int(0, 3) == 0 {
        // Transposed: any explicit padding that leaves an output, an output
        // padding below the stride or the dilation.
        let stride: Vec<usize> = (0..spatial).map(|_| r.int(1, 3)).collect();
        let output_padding: Vec<usize> = (0..spatial)
            .map(|i| r.int(0, stride[i].max(dilation[i]) - 1))
            .collect();
        let lens: Vec<usize> = (0..spatial).map(|_| r.int(1, max_len)).collect();
        let padding: Vec<usize> = (0..spatial)
            .map(|i| {
                let full = (lens[i] - 1) * stride[i] + dilation[i] * (kernel[i] - 1) + 1;
                r.int(0, 2).min((full + output_padding[i] - 1) / 2)
            })
            .collect();
        let mut x = vec![r.int(1, 3), c];
        x.extend(&lens);
        let mut w = vec![c, c_out / groups];
        w.extend(&kernel);
        return Case {
            x,
            w,
            opts: ConvOptions::new()
                .stride(&stride)
                .dilation(&dilation)
                .groups(groups)
                .padding(&padding)
                .output_padding(&output_padding),
            strided_input,
            bias,
            transposed: true,
        };
    }
    let mode = r.int(0, 3);
    let stride: Vec<usize> = if mode == 0 {
        vec![1; spatial] // `same` needs stride 1
    } else {
        (0..spatial).map(|_| r.int(1, 3)).collect()
    };
    let padding = match mode {
        0 => ConvPadding::Same,
        1 => ConvPadding::Valid,
        _ => ConvPadding::Explicit((0..spatial).map(|_| r.int(0, 2)).collect()),
    };
    let pad_of = |i: usize| match &padding {
        ConvPadding::Explicit(p) => p[i],
        _ => 0,
    };
    let lens: Vec<usize> = (0..spatial)
        .map(|i| {
            let reach = dilation[i] * (kernel[i] - 1) + 1;
            let least = reach.saturating_sub(2 * pad_of(i)).max(1);
            r.int(least, least.max(max_len))
        })
        .collect();
    let mut x = vec![r.int(1, 3), c];
    x.extend(&lens);
    let mut w = vec![c_out, c / groups];
    w.extend(&kernel);
    Case {
        x,
        w,
        opts: ConvOptions::new()
            .stride(&stride)
            .dilation(&dilation)
            .groups(groups)
            .padding_mode(padding),
        strided_input,
        bias,
        transposed: false,
    }
}

/// The case's output and its gradients (x, w and, with a bias, b) for the
/// upstream gradient of seed 4, in f64 on the host, computed in `dtype` on
/// `device`.
fn run(case: &Case, dtype: DType, device: Device) -> Vec<Vec<f64>> {
    let make = |shape: &[usize], seed: u64| {
        let n: usize = shape.iter().product();
        let v = Rng(seed * 0x9e37_79b9 + 1).values(n);
        Tensor::from_vec(v, shape, Device::Cpu)
            .unwrap()
            .to_dtype(dtype)
            .unwrap()
            .to(device)
            .unwrap()
    };
    let x = if case.strided_input {
        let k = case.x.len();
        let mut swapped = case.x.clone();
        swapped.swap(k - 1, k - 2);
        make(&swapped, 1).transpose(-1, -2).unwrap()
    } else {
        make(&case.x, 1)
    };
    let x = Var::parameter(x).unwrap();
    let w = Var::parameter(make(&case.w, 2)).unwrap();
    let out_channels = match case.transposed {
        true => case.w[1] * case.opts.groups,
        false => case.w[0],
    };
    let b = Var::parameter(make(&[out_channels], 3)).unwrap();
    let bias = case.bias.then_some(&b);
    let y = match (case.x.len() - 2, case.transposed) {
        (1, false) => x.conv1d(&w, bias, &case.opts),
        (2, false) => x.conv2d(&w, bias, &case.opts),
        (_, false) => x.conv3d(&w, bias, &case.opts),
        (1, true) => x.conv_transpose1d(&w, bias, &case.opts),
        (2, true) => x.conv_transpose2d(&w, bias, &case.opts),
        (_, true) => x.conv_transpose3d(&w, bias, &case.opts),
    }
    .unwrap();
    assert_eq!(y.dtype(), dtype);
    let g = make(y.shape(), 4);
    y.mul(&Var::new(g))
        .unwrap()
        .sum(None, false)
        .unwrap()
        .backward()
        .unwrap();
    let host = |t: &Tensor| -> Vec<f64> {
        t.to_dtype(DType::F64)
            .unwrap()
            .to(Device::Cpu)
            .unwrap()
            .to_vec()
            .unwrap()
    };
    let mut out = vec![
        host(y.data()),
        host(&x.grad().unwrap()),
        host(&w.grad().unwrap()),
    ];
    if case.bias {
        out.push(host(&b.grad().unwrap()));
    }
    out
}

/// The largest error allowed against the f64 reference `want`, relative to
/// its largest magnitude (plus one): half precisions round every operand
/// and result, f32 sums differently ordered.
fn tolerance(dtype: DType) -> f64 {
    match dtype {
        DType::F64 => 1e-12,
        DType::F32 => 1e-5,
        DType::F16 => 4e-3,
        _ => 3e-2,
    }
}

/// Every pass of 40 random convolutions per spatial rank, in each float
/// dtype, with cuDNN on and off, within `tolerance` of the f64 result.
#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn cudnn_convolutions_match_f64_on_a_gpu() {
    let _settings = exclusive_conv_settings();
    let _restore = RestoreCudnn;
    let gpu = crate::hostile_calls::gpu();
    // Exact f32: TF32 has its own test below.
    strata_tensor::set_conv_allow_tf32(false);
    let mut r = Rng(0x5eed_0078);
    let mut failures = Vec::new();
    let mut checked = 0;
    for spatial in 1..=3 {
        for _ in 0..40 {
            let case = case(&mut r, spatial);
            let want = run(&case, DType::F64, Device::Cpu);
            for dtype in [DType::F64, DType::F32, DType::F16, DType::BF16] {
                for cudnn in [true, false] {
                    strata_tensor::set_cudnn_enabled(cudnn);
                    let got = run(&case, dtype, gpu);
                    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                        let scale = 1.0 + w.iter().fold(0f64, |m, v| m.max(v.abs()));
                        // NaN (which `max` would skip) counts as the worst.
                        let err = g.iter().zip(w).fold(0f64, |m, (a, b)| {
                            let d = (a - b).abs();
                            if d.is_nan() || d > m {
                                d
                            } else {
                                m
                            }
                        });
                        checked += 1;
                        if err.is_nan() || err > tolerance(dtype) * scale {
                            let name = ["output", "input grad", "weight grad", "bias grad"][i];
                            failures.push(format!(
                                "{dtype} cudnn={cudnn} {name}: error {err:.3e} (scale {scale:.2}) \
                                 for {case:?}"
                            ));
                        }
                    }
                }
            }
        }
    }
    strata_tensor::set_cudnn_enabled(true);
    strata_tensor::set_conv_allow_tf32(true);
    assert!(
        failures.is_empty(),
        "{} of {checked} results differ:\n{}",
        failures.len(),
        failures[..failures.len().min(12)].join("\n")
    );
}

/// The machine's cuDNN is found (PyTorch's wheels ship it, and strata
/// looks where they put it): the other tests here would pass through the
/// columns path alone without it.
#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn cudnn_is_found_on_a_gpu_machine() {
    crate::hostile_calls::gpu();
    let v = strata_tensor::cuda::cudnn_version();
    assert!(
        v.is_some_and(|v| v >= 8000),
        "no cuDNN: {}",
        strata_tensor::cuda::cudnn_unavailable_reason().unwrap_or_default()
    );
}

/// The peak memory of `f` above what was allocated before it, in bytes.
fn peak_of(gpu: Device, f: impl FnOnce()) -> u64 {
    strata_tensor::cuda::synchronize(gpu).unwrap();
    let before = strata_alloc::memory_allocated(gpu).unwrap();
    strata_alloc::reset_peak_memory_stats(gpu).unwrap();
    f();
    strata_tensor::cuda::synchronize(gpu).unwrap();
    strata_alloc::max_memory_allocated(gpu).unwrap() - before
}

/// A 3x3 convolution through cuDNN needs no columns: its forward and
/// backward peaks stay below those of columns and matrix products by at
/// least half the columns' bytes (9 times the input here, 72 MiB, formed in
/// chunks of at most 64 MiB), and the forward's holds little beyond the
/// output (8 MiB).
#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn a_cudnn_convolution_takes_no_columns_on_a_gpu() {
    let _settings = exclusive_conv_settings();
    let _restore = RestoreCudnn;
    let gpu = crate::hostile_calls::gpu();
    let x = Tensor::ones(&[8, 64, 64, 64], DType::F32, gpu).unwrap(); // 8 MiB
    let w = Tensor::ones(&[64, 64, 3, 3], DType::F32, gpu).unwrap();
    let opts = ConvOptions::new().padding(&[1]);
    let columns = (8 * 64 * 9 * 64 * 64 * 4) as u64;
    let mut peaks = Vec::new();
    for cudnn in [true, false] {
        strata_tensor::set_cudnn_enabled(cudnn);
        let fwd = peak_of(gpu, || {
            x.conv2d(&w, None, &opts).unwrap();
        });
        let xv = Var::parameter(x.clone()).unwrap();
        let wv = Var::parameter(w.clone()).unwrap();
        let bwd = peak_of(gpu, || {
            let loss = xv
                .conv2d(&wv, None, &opts)
                .unwrap()
                .sum(None, false)
                .unwrap();
            loss.backward().unwrap();
        });
        peaks.push((fwd, bwd));
    }
    strata_tensor::set_cudnn_enabled(true);
    let [(fwd, bwd), (fwd_cols, bwd_cols)] = [peaks[0], peaks[1]];
    let report = format!(
        "peaks (bytes): cuDNN forward {fwd}, backward {bwd}; columns forward {fwd_cols}, \
         backward {bwd_cols}; columns {columns}"
    );
    assert!(fwd + columns / 2 <= fwd_cols, "{report}");
    assert!(bwd + columns / 2 <= bwd_cols, "{report}");
    assert!(fwd < columns / 2, "{report}");
}

/// `set_conv_allow_tf32(false)` makes cuDNN's f32 convolutions exact
/// (`CUDNN_FMA_MATH`): inputs of 1 + 2^-12 need 12 mantissa bits, which
/// TF32 drops; with TF32 allowed the result stays within TF32's error.
#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn cudnn_f32_convolutions_follow_the_tf32_setting_on_a_gpu() {
    let _settings = exclusive_conv_settings();
    let gpu = crate::hostile_calls::gpu();
    let fine = 1.0 + 2f32.powi(-12);
    let x = Tensor::full(&[2, 64, 16, 16], fine, DType::F32, gpu).unwrap();
    let w = Tensor::full(&[64, 64, 3, 3], 1.0f32, DType::F32, gpu).unwrap();
    let conv = || -> Vec<f32> {
        x.conv2d(&w, None, &ConvOptions::new())
            .unwrap()
            .to(Device::Cpu)
            .unwrap()
            .to_vec()
            .unwrap()
    };
    let exact = 64.0 * 9.0 * fine;
    strata_tensor::set_conv_allow_tf32(false);
    let y = conv();
    strata_tensor::set_conv_allow_tf32(true);
    assert!(
        y.iter().all(|&v| v == exact),
        "an exact cuDNN convolution differs: {:?}",
        &y[..4]
    );
    let y = conv();
    assert!(
        y.iter().all(|&v| (v - exact).abs() <= exact * 2e-3),
        "TF32 is within 2^-9"
    );
}

/// A batch whose input has more than `i32::MAX` elements (cuDNN's
/// descriptors count in 32 bits) is convolved in chunks of samples: every
/// sample's output equals that sample convolved alone, and the weight's
/// gradient, accumulated over the chunks, equals the sum of the samples'.
#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn a_batch_past_32_bit_sizes_is_convolved_in_chunks_on_a_gpu() {
    let _settings = exclusive_conv_settings();
    let gpu = crate::hostile_calls::gpu();
    // 2050 samples of 1024 x 1024: 2.15e9 elements (4.3 GB in bf16).
    let n = 2050;
    let per = 1024 * 1024;
    // Sample i holds the value (i % 5 + 1) / 8 (exact in bf16), so each
    // sample's output is known and the sums stay exact.
    let values: Vec<f32> = (0..n).map(|i| ((i % 5) + 1) as f32 / 8.0).collect();
    let x = Tensor::from_vec(values, &[n, 1, 1, 1], Device::Cpu)
        .unwrap()
        .to_dtype(DType::BF16)
        .unwrap()
        .to(gpu)
        .unwrap()
        .expand(&[n as i64, 1, 1024, 1024])
        .unwrap()
        .contiguous()
        .unwrap();
    assert!(x.numel() > i32::MAX as usize && x.numel() == n * per);
    let w = Tensor::full(&[1, 1, 3, 3], 0.5f32, DType::BF16, gpu).unwrap();
    let xv = Var::parameter(x).unwrap();
    let wv = Var::parameter(w).unwrap();
    let y = xv
        .conv2d(&wv, None, &ConvOptions::new().padding(&[1]))
        .unwrap();
    assert_eq!(y.shape(), &[n, 1, 1024, 1024]);
    // Interior elements: 9 taps of value v times 0.5; corners 4 taps.
    for i in [0usize, 1, 1023, 1024, 2049] {
        let v = ((i % 5) + 1) as f32 / 8.0;
        let sample: Vec<f32> = y
            .data()
            .narrow(0, i as i64, 1)
            .unwrap()
            .to_dtype(DType::F32)
            .unwrap()
            .to(Device::Cpu)
            .unwrap()
            .to_vec()
            .unwrap();
        assert_eq!(sample[1024 + 1], 4.5 * v, "sample {i} interior");
        assert_eq!(sample[0], 2.0 * v, "sample {i} corner");
    }
    y.sum(None, false).unwrap().backward().unwrap();
    // The weight's gradient at the centre tap: every position of every
    // sample, sum over samples of v * 1024^2 (exact in f32: 2^20 times
    // multiples of 1/8 add to at most 2^31 / 8).
    let total: f64 = (0..n).map(|i| ((i % 5) + 1) as f64 / 8.0).sum::<f64>() * per as f64;
    let dw: Vec<f32> = wv
        .grad()
        .unwrap()
        .to_dtype(DType::F32)
        .unwrap()
        .to(Device::Cpu)
        .unwrap()
        .to_vec()
        .unwrap();
    // bf16 keeps 8 bits: the rounded total.
    let rounded = Tensor::from_vec(vec![total as f32], &[1], Device::Cpu)
        .unwrap()
        .to_dtype(DType::BF16)
        .unwrap()
        .to_dtype(DType::F32)
        .unwrap()
        .to_vec::<f32>()
        .unwrap()[0];
    assert!(
        (dw[4] - rounded).abs() <= rounded * 2f32.powi(-7),
        "centre tap {} against {rounded}",
        dw[4]
    );
}
