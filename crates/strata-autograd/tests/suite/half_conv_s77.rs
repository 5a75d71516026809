//! Session 77: f16 and bf16 convolutions on a GPU compute in their own dtype
//! (columns in half precision, products accumulated in f32 by cuBLAS on
//! tensor cores, each result rounded once); on the CPU their operands are
//! widened to f32. The inputs here are small multiples of 1/8, so every
//! product and every partial sum is exact in f32 whatever the order of
//! additions: both paths must then give the same bits, the exact sums
//! rounded once. A result rounded before the bias is added, or a gradient
//! rounded before its batch sum, differs. (Session 78: GPU convolutions go
//! through cuDNN by default, which adds the bias after rounding, as PyTorch;
//! the GPU tests here turn it off to test the columns path, and
//! `cudnn_s78.rs` tests cuDNN's.)

use parking_lot::{Mutex, MutexGuard};
use strata_autograd::Var;
use strata_tensor::{ConvOptions, DType, Device, Tensor};

/// Held by the tests that change (or depend on) the process-wide
/// convolution settings, so that they never see each other's.
pub(crate) fn exclusive_conv_settings() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock()
}

/// A tensor of `shape` whose elements are multiples of 1/8 in [-2, 2],
/// exact in f16 and bf16 (and every f32 sum of a few hundred products of
/// two of them is exact).
fn eighths(shape: &[usize], seed: u64, dtype: DType, device: Device) -> Tensor {
    let n: usize = shape.iter().product();
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let v: Vec<f32> = (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s % 33) as f32 - 16.0) / 8.0
        })
        .collect();
    Tensor::from_vec(v, shape, Device::Cpu)
        .unwrap()
        .to_dtype(dtype)
        .unwrap()
        .to(device)
        .unwrap()
}

#[derive(Clone, Copy, Debug)]
enum Form {
    Conv1,
    Conv2,
    Conv3,
    Transposed2,
}

struct Case {
    form: Form,
    x: Vec<usize>,
    w: Vec<usize>,
    opts: ConvOptions,
    bias: bool,
}

fn cases() -> Vec<Case> {
    let c = |form, x: &[usize], w: &[usize], opts, bias| Case {
        form,
        x: x.to_vec(),
        w: w.to_vec(),
        opts,
        bias,
    };
    vec![
        c(
            Form::Conv2,
            &[2, 3, 9, 8],
            &[5, 3, 3, 3],
            ConvOptions::new().padding(&[1]),
            true,
        ),
        c(
            Form::Conv2,
            &[3, 4, 11, 7],
            &[6, 2, 3, 2],
            ConvOptions::new().stride(&[2]).groups(2),
            true,
        ),
        c(
            Form::Conv2,
            &[2, 4, 10, 10],
            &[4, 4, 3, 3],
            ConvOptions::new().dilation(&[2]).padding(&[2]),
            false,
        ),
        c(
            Form::Conv2,
            &[2, 8, 6, 5],
            &[3, 8, 1, 1],
            ConvOptions::new(),
            true,
        ),
        c(
            Form::Conv2,
            &[4, 7, 7],
            &[2, 4, 2, 2],
            ConvOptions::new().padding(&[1]),
            true,
        ),
        c(
            Form::Conv1,
            &[3, 4, 17],
            &[6, 4, 5],
            ConvOptions::new().stride(&[3]).padding(&[2]),
            true,
        ),
        c(
            Form::Conv3,
            &[2, 2, 5, 4, 6],
            &[3, 2, 2, 3, 2],
            ConvOptions::new().padding(&[1]),
            true,
        ),
        c(
            Form::Transposed2,
            &[2, 4, 5, 6],
            &[4, 3, 3, 3],
            ConvOptions::new().stride(&[2]).padding(&[1]),
            true,
        ),
    ]
}

/// The case's output and the gradients of `(y * g).sum()` for x, w and b,
/// each as f32 bits read back to the host.
fn run(case: &Case, dtype: DType, device: Device) -> Vec<Vec<u32>> {
    let x = Var::parameter(eighths(&case.x, 1, dtype, device)).unwrap();
    let w = Var::parameter(eighths(&case.w, 2, dtype, device)).unwrap();
    let out_ch = match case.form {
        Form::Transposed2 => case.w[1] * case.opts.groups,
        _ => case.w[0],
    };
    let b = Var::parameter(eighths(&[out_ch], 3, dtype, device)).unwrap();
    let bias = case.bias.then_some(&b);
    let y = match case.form {
        Form::Conv1 => x.conv1d(&w, bias, &case.opts),
        Form::Conv2 => x.conv2d(&w, bias, &case.opts),
        Form::Conv3 => x.conv3d(&w, bias, &case.opts),
        Form::Transposed2 => x.conv_transpose2d(&w, bias, &case.opts),
    }
    .unwrap();
    assert_eq!(y.dtype(), dtype, "{case:?}", case = case.form);
    let g = eighths(y.shape(), 4, dtype, device);
    y.mul(&Var::new(g))
        .unwrap()
        .sum(None, false)
        .unwrap()
        .backward()
        .unwrap();
    let bits = |t: &Tensor| {
        assert_eq!(t.dtype(), dtype);
        f32_bits(t)
    };
    let mut out = vec![
        bits(y.data()),
        bits(&x.grad().unwrap()),
        bits(&w.grad().unwrap()),
    ];
    if case.bias {
        out.push(bits(&b.grad().unwrap()));
    }
    out
}

/// The elements of `t` widened to f32, as bit patterns, on the host.
fn f32_bits(t: &Tensor) -> Vec<u32> {
    t.to_dtype(DType::F32)
        .unwrap()
        .to(Device::Cpu)
        .unwrap()
        .to_vec::<f32>()
        .unwrap()
        .iter()
        .map(|v| v.to_bits())
        .collect()
}

/// The case computed in f32 (exact for these inputs) and rounded once to
/// `dtype`, on the CPU.
fn rounded_f32(case: &Case, dtype: DType) -> Vec<Vec<u32>> {
    run(case, DType::F32, Device::Cpu)
        .into_iter()
        .map(|v| {
            let t = Tensor::from_vec(
                v.iter().map(|&b| f32::from_bits(b)).collect::<Vec<f32>>(),
                &[v.len()],
                Device::Cpu,
            )
            .unwrap();
            f32_bits(&t.to_dtype(dtype).unwrap())
        })
        .collect()
}

fn all_round_once_on(device: Device) {
    for dtype in [DType::BF16, DType::F16] {
        for case in cases() {
            let want = rounded_f32(&case, dtype);
            let got = run(&case, dtype, device);
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                let name = ["output", "input grad", "weight grad", "bias grad"][i];
                let bad = g.iter().zip(w).filter(|(a, b)| a != b).count();
                assert_eq!(
                    bad,
                    0,
                    "{dtype} {:?} {:?}: {bad} of {} elements of the {name} differ from the exact \
                     value rounded once",
                    case.form,
                    case.x,
                    g.len()
                );
            }
        }
    }
}

#[test]
fn half_precision_convolutions_round_once() {
    all_round_once_on(Device::Cpu);
}

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn half_precision_convolutions_round_once_on_a_gpu() {
    let _settings = exclusive_conv_settings();
    strata_tensor::set_cudnn_enabled(false);
    let _restore = RestoreCudnn;
    all_round_once_on(crate::hostile_calls::gpu());
}

/// On a GPU a recorded bf16 convolution keeps its input and weight in
/// bf16 (two bytes an element), not widened copies.
#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn a_half_precision_convolution_on_a_gpu_saves_half_precision_operands() {
    let device = crate::hostile_calls::gpu();
    for dtype in [DType::BF16, DType::F16] {
        let x = Var::parameter(eighths(&[2, 3, 8, 8], 1, dtype, device)).unwrap();
        let w = Var::parameter(eighths(&[4, 3, 3, 3], 2, dtype, device)).unwrap();
        let y = x
            .conv2d(&w, None, &ConvOptions::new().padding(&[1]))
            .unwrap();
        assert_eq!(
            y.graph_saved_bytes(),
            (x.numel() + w.numel()) * 2,
            "{dtype}"
        );
    }
}

/// A batch whose columns take more than `conv_chunk_bytes()` (set to 64 MiB; 26 MB a sample
/// here: 16 channels x 25 offsets x 128 x 128 positions in f32) is
/// convolved a chunk of samples at a time, forward and backward: each
/// sample's output and input gradient equal those of the sample convolved
/// alone, and the weight and bias gradients their sums.
#[test]
fn a_large_batch_is_convolved_in_chunks() {
    let cpu = Device::Cpu;
    let _settings = exclusive_conv_settings();
    let per_sample = 16 * 25 * 128 * 128 * 4;
    strata_tensor::set_conv_chunk_bytes(64 << 20);
    assert!(3 * per_sample > strata_tensor::conv_chunk_bytes());
    assert!(per_sample < strata_tensor::conv_chunk_bytes());
    let opts = ConvOptions::new().padding(&[2]);
    let xs = eighths(&[3, 16, 128, 128], 5, DType::F32, cpu);
    let ws = eighths(&[4, 16, 5, 5], 6, DType::F32, cpu);
    let bs = eighths(&[4], 7, DType::F32, cpu);
    let gs = eighths(&[3, 4, 128, 128], 8, DType::F32, cpu);
    let grads = |lo: i64, len: i64| {
        let x = Var::parameter(xs.narrow(0, lo, len).unwrap().contiguous().unwrap()).unwrap();
        let (w, b) = (
            Var::parameter(ws.clone()).unwrap(),
            Var::parameter(bs.clone()).unwrap(),
        );
        let y = x.conv2d(&w, Some(&b), &opts).unwrap();
        let g = Var::new(gs.narrow(0, lo, len).unwrap());
        y.mul(&g)
            .unwrap()
            .sum(None, false)
            .unwrap()
            .backward()
            .unwrap();
        let f = |t: Tensor| t.to_vec::<f32>().unwrap();
        [
            f(y.data().clone()),
            f(x.grad().unwrap()),
            f(w.grad().unwrap()),
            f(b.grad().unwrap()),
        ]
    };
    let whole = grads(0, 3);
    let singles: Vec<_> = (0..3).map(|i| grads(i, 1)).collect();
    for (i, name) in ["output", "input gradient"].iter().enumerate() {
        let cat: Vec<f32> = singles.iter().flat_map(|s| s[i].clone()).collect();
        assert_eq!(whole[i], cat, "{name}");
    }
    // Every product and partial sum of these eighths is exact in f32, so
    // the batch sums do not depend on their order.
    for (i, name) in [(2, "weight gradient"), (3, "bias gradient")] {
        let sum: Vec<f32> = (0..whole[i].len())
            .map(|j| singles.iter().map(|s| s[i][j]).sum())
            .collect();
        assert_eq!(whole[i], sum, "{name}");
    }
    strata_tensor::set_conv_chunk_bytes(strata_tensor::DEFAULT_CONV_CHUNK_BYTES);
}

/// f32 convolutions on a GPU follow `set_conv_allow_tf32` (on by default,
/// as PyTorch's `torch.backends.cudnn.allow_tf32`), not the matrix
/// products' precision, and neither setting leaks into the other. Inputs of
/// 1 + 2^-12 need 12 mantissa bits: TF32 keeps 10, so a product on TF32
/// tensor cores loses them, and an exact one keeps them.
#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn f32_convolutions_on_a_gpu_follow_their_own_tf32_setting() {
    use strata_tensor::{set_conv_allow_tf32, set_float32_matmul_precision, Precision};
    let _settings = exclusive_conv_settings();
    // The columns path (cuBLAS), whose TF32 use is certain; cuDNN's own
    // choice is tested in cudnn_s78.rs.
    strata_tensor::set_cudnn_enabled(false);
    let _restore = RestoreCudnn;
    let gpu = crate::hostile_calls::gpu();
    let fine = 1.0 + 2f32.powi(-12);
    let x = Tensor::full(&[2, 64, 32, 32], fine, DType::F32, gpu).unwrap();
    let w = Tensor::full(&[64, 64, 1, 1], 1.0f32, DType::F32, gpu).unwrap();
    let exact = 64.0 * fine;
    let conv = || -> Vec<f32> {
        x.conv2d(&w, None, &ConvOptions::new())
            .unwrap()
            .to(Device::Cpu)
            .unwrap()
            .to_vec()
            .unwrap()
    };
    let product = || -> Vec<f32> {
        let a = x.reshape(&[128, 1024]).unwrap();
        let b = Tensor::full(&[1024, 64], 1.0f32, DType::F32, gpu).unwrap();
        a.matmul(&b)
            .unwrap()
            .to(Device::Cpu)
            .unwrap()
            .to_vec()
            .unwrap()
    };
    let exact_product = 1024.0 * fine;
    // Defaults: TF32 convolutions, exact products.
    assert!(strata_tensor::conv_allow_tf32());
    let y = conv();
    assert!(
        y.iter().all(|&v| (v - exact).abs() <= exact * 2e-3),
        "TF32 is within 2^-9"
    );
    assert!(
        y.iter().any(|&v| v != exact),
        "the default convolution did not use TF32"
    );
    assert!(
        product().iter().all(|&v| v == exact_product),
        "a product after a TF32 convolution is not exact"
    );
    // TF32 products, exact convolutions.
    set_conv_allow_tf32(false);
    set_float32_matmul_precision(Precision::High);
    let y = conv();
    set_float32_matmul_precision(Precision::Highest);
    set_conv_allow_tf32(true);
    assert!(
        y.iter().all(|&v| v == exact),
        "an exact convolution differs"
    );
}

/// Turns cuDNN back on when dropped (a test that turned it off and fails
/// must not leave it off for the next).
pub(crate) struct RestoreCudnn;

impl Drop for RestoreCudnn {
    fn drop(&mut self) {
        strata_tensor::set_cudnn_enabled(true);
    }
}

/// A recorded convolution with no output element (an input without
/// channels, whose output has none either as in PyTorch, or an empty
/// batch) still differentiates: every gradient is zeros of its operand's
/// shape, as PyTorch's.
#[test]
fn an_empty_recorded_convolution_has_zero_gradients() {
    let cpu = Device::Cpu;
    for (xs, ws, ys) in [
        (vec![2, 0, 4], vec![3, 0, 2], vec![2, 0, 3]),
        (vec![0, 2, 4], vec![3, 2, 2], vec![0, 3, 3]),
    ] {
        let x = Var::parameter(Tensor::zeros(&xs, DType::F32, cpu).unwrap()).unwrap();
        let w = Var::parameter(Tensor::ones(&ws, DType::F32, cpu).unwrap()).unwrap();
        let b = Var::parameter(Tensor::ones(&[3], DType::F32, cpu).unwrap()).unwrap();
        let y = x.conv1d(&w, Some(&b), &ConvOptions::new()).unwrap();
        assert_eq!(y.shape(), &ys[..]);
        y.sum(None, false).unwrap().backward().unwrap();
        for (v, shape) in [(&x, &xs), (&w, &ws), (&b, &vec![3])] {
            let g = v.grad().unwrap();
            assert_eq!(g.shape(), &shape[..]);
            assert!(g.to_vec::<f32>().unwrap().iter().all(|&e| e == 0.0));
        }
    }
}
