//! Session 77: a hostile-input sweep of the ops sessions 75-76 added
//! (pooling, the fused window kernels, `im2col`/`col2im`, pixel
//! (un)shuffle, `interpolate`, batch/group/RMS norm, `one_hot`,
//! `linspace`/`logspace`, `embedding`, and the convolutions), each case
//! compared with PyTorch 2.15's CPU (the expected values below are its
//! answers). Where PyTorch returns a value strata must return the same,
//! where it raises strata must return an error, and a failed in-place
//! update must leave its operands as they were.

use strata_tensor::{
    ConvOptions, DType, Device, InterpolateMode, InterpolateOptions, Tensor, TensorError,
};

const CPU: Device = Device::Cpu;

fn f32s(t: &Tensor) -> Vec<f32> {
    t.to_dtype(DType::F32).unwrap().to_vec::<f32>().unwrap()
}

/// `[0, 10, 20, 30, 40]` shaped `shape`.
fn tens(shape: &[i64]) -> Tensor {
    Tensor::from_slice(&[0.0f32, 10., 20., 30., 40.], &[5], CPU)
        .unwrap()
        .reshape(shape)
        .unwrap()
}

fn scale(s: &[f64]) -> InterpolateOptions {
    InterpolateOptions::scale(s)
}

/// PyTorch's 1-D and 3-D nearest kernels compute every index from the
/// scale factor; only its 2-D kernels copy a dim whose size is unchanged
/// and halve the index of a doubled one without it. strata took those
/// shortcuts in every rank: `F.interpolate(x, scale_factor=1.1)` of five
/// elements is `[x0, x0, x1, x2, x3]` in PyTorch, strata copied `x`.
#[test]
fn nearest_1d_and_3d_use_the_scale_factor_where_the_size_is_kept_or_doubled() {
    let near1 = |s: f64| f32s(&tens(&[1, 1, 5]).interpolate(&scale(&[s])).unwrap());
    assert_eq!(near1(1.1), [0., 0., 10., 20., 30.]);
    assert_eq!(near1(2.1), [0., 0., 0., 10., 10., 20., 20., 30., 30., 40.]);
    let near3 = |shape: &[i64], s: &[f64]| f32s(&tens(shape).interpolate(&scale(s)).unwrap());
    assert_eq!(
        near3(&[1, 1, 1, 1, 5], &[1.0, 1.0, 1.1]),
        [0., 0., 10., 20., 30.]
    );
    assert_eq!(
        near3(&[1, 1, 5, 1, 1], &[2.1, 1.0, 1.0]),
        [0., 0., 0., 10., 10., 20., 20., 30., 30., 40.]
    );
    // The 2-D kernels keep their shortcuts (PyTorch's `nearest_idx`).
    assert_eq!(near3(&[1, 1, 1, 5], &[1.0, 1.1]), [0., 10., 20., 30., 40.]);
    assert_eq!(
        near3(&[1, 1, 5, 1], &[2.1, 1.0]),
        [0., 0., 10., 10., 20., 20., 30., 30., 40., 40.]
    );
}

/// PyTorch's linear kernels copy a dim whose size a scale factor keeps
/// (`compute_source_index_and_lambda`: `output_size == input_size`),
/// whatever the factor; strata blended neighbours by `1 / scale`
/// (`[0, 8.64, 17.7, 26.8, 35.9]` for a factor of 1.1).
#[test]
fn linear_modes_copy_a_dim_whose_size_is_kept() {
    let opts = |s: &[f64], m: InterpolateMode| scale(s).mode(m);
    let x = tens(&[1, 1, 5]);
    for s in [1.1, 1.19] {
        let y = x.interpolate(&opts(&[s], InterpolateMode::Linear)).unwrap();
        assert_eq!(f32s(&y), [0., 10., 20., 30., 40.], "scale {s}");
        let y = x
            .interpolate(&opts(&[s], InterpolateMode::Linear).align_corners(true))
            .unwrap();
        assert_eq!(
            f32s(&y),
            [0., 10., 20., 30., 40.],
            "scale {s}, align_corners"
        );
    }
    let h = x.to_dtype(DType::F16).unwrap();
    let y = h
        .interpolate(&opts(&[1.1], InterpolateMode::Linear))
        .unwrap();
    assert_eq!(f32s(&y), [0., 10., 20., 30., 40.]);
    // Height 2 resized by 1.3 (to 2: copied too), width 5 by 1.1.
    let x2 = tens(&[1, 1, 1, 5]).expand(&[1, 1, 2, 5]).unwrap();
    let y = x2
        .interpolate(&opts(&[1.3, 1.1], InterpolateMode::Bilinear))
        .unwrap();
    assert_eq!(f32s(&y), [0., 10., 20., 30., 40., 0., 10., 20., 30., 40.]);
    let x3 = tens(&[1, 1, 1, 1, 5]).expand(&[1, 1, 2, 1, 5]).unwrap();
    let y = x3
        .interpolate(&opts(&[1.3, 1.0, 1.1], InterpolateMode::Trilinear))
        .unwrap();
    assert_eq!(f32s(&y), [0., 10., 20., 30., 40., 0., 10., 20., 30., 40.]);
}

/// PyTorch stores an f16/bf16 input's linear weights in its dtype
/// (`lambda1` rounded, `lambda0 = 1 - lambda1` of the rounded one) and sums
/// in f32: its answers, bit for bit (strata's f32 weights were an ulp off).
#[test]
fn half_linear_weights_are_rounded_to_the_input_dtype() {
    let x = Tensor::from_slice(&[-5.0f32, 2., -2., 5., 1.], &[1, 1, 5], CPU).unwrap();
    // (As f64: the half values exactly.)
    let lin = |d: DType, o: InterpolateOptions| {
        x.to_dtype(d)
            .unwrap()
            .interpolate(&o.mode(InterpolateMode::Linear))
            .unwrap()
            .to_dtype(DType::F64)
            .unwrap()
            .to_vec::<f64>()
            .unwrap()
    };
    assert_eq!(
        lin(DType::F16, InterpolateOptions::size(&[7])),
        [-5.0, -1.0009765625, 0.857421875, -2.0, 3.0, 3.28515625, 1.0]
    );
    assert_eq!(
        lin(DType::BF16, scale(&[1.3])),
        [-5.0, -0.43359375, 0.30859375, -0.65625, 4.71875, 2.078125]
    );
}

/// PyTorch's upsampling takes an empty batch but not an empty channel dim
/// ("Non-empty 3D data tensor expected"); strata returned an empty result.
#[test]
fn interpolate_refuses_an_empty_channel_dim() {
    let modes = [
        (vec![1, 0, 4], InterpolateMode::Nearest),
        (vec![1, 0, 4], InterpolateMode::Linear),
        (vec![1, 0, 2, 2], InterpolateMode::NearestExact),
        (vec![1, 0, 2, 2, 2], InterpolateMode::Trilinear),
    ];
    for (shape, mode) in modes {
        let x = Tensor::zeros(&shape, DType::F32, CPU).unwrap();
        let r = x.interpolate(&InterpolateOptions::size(&[3]).mode(mode));
        assert!(
            matches!(r, Err(TensorError::Shape { .. })),
            "{shape:?} {mode:?}: {r:?}"
        );
    }
    // An empty batch is resized (its shape), and `area` is adaptive
    // pooling, which takes empty channels.
    let x = Tensor::zeros(&[0, 2, 4], DType::F32, CPU).unwrap();
    let y = x.interpolate(&InterpolateOptions::size(&[3])).unwrap();
    assert_eq!(y.shape(), [0, 2, 3]);
    let x = Tensor::zeros(&[1, 0, 4], DType::F32, CPU).unwrap();
    let y = x
        .interpolate(&InterpolateOptions::size(&[2]).mode(InterpolateMode::Area))
        .unwrap();
    assert_eq!(y.shape(), [1, 0, 2]);
}

/// An empty input pooled to any output size is an empty result of that
/// shape in PyTorch (up to sizes whose strides overflow). strata built an
/// index of the output's length for it: 8 TiB for 2^40, a typed
/// out-of-memory error where PyTorch answers at once.
#[test]
fn adaptive_pooling_of_an_empty_input_allocates_nothing() {
    let zeros = |s: &[usize]| Tensor::zeros(s, DType::F32, CPU).unwrap();
    let big = 1usize << 40;
    let y = zeros(&[0, 4]).adaptive_avg_pool1d(&[big]).unwrap();
    assert_eq!(y.shape(), [0, big]);
    let y = zeros(&[1, 0, 4]).adaptive_avg_pool1d(&[big]).unwrap();
    assert_eq!(y.shape(), [1, 0, big]);
    let y = zeros(&[2, 0, 4])
        .adaptive_avg_pool1d(&[i64::MAX as usize])
        .unwrap();
    assert_eq!(y.shape(), [2, 0, i64::MAX as usize]);
    let y = zeros(&[0, 1, 4, 4])
        .adaptive_avg_pool2d(&[1 << 20])
        .unwrap();
    assert_eq!(y.shape(), [0, 1, 1 << 20, 1 << 20]);
    let y = zeros(&[1, 2, 4, 4]).adaptive_avg_pool2d(&[0, big]).unwrap();
    assert_eq!(y.shape(), [1, 2, 0, big]);
    let y = zeros(&[0, 1, 2, 2, 2])
        .adaptive_avg_pool3d(&[1 << 10])
        .unwrap();
    assert_eq!(y.shape(), [0, 1, 1 << 10, 1 << 10, 1 << 10]);
    let y = zeros(&[0, 1, 4])
        .interpolate(&InterpolateOptions::size(&[big]).mode(InterpolateMode::Area))
        .unwrap();
    assert_eq!(y.shape(), [0, 1, big]);
    // Strides past i64::MAX: PyTorch's "Stride calculation overflowed".
    let r = zeros(&[0, 1, 4, 4]).adaptive_avg_pool2d(&[big]);
    assert!(matches!(r, Err(TensorError::SizeOverflow { .. })), "{r:?}");
    // A non-empty input pooled to nothing.
    let y = zeros(&[1, 2, 5]).adaptive_avg_pool1d(&[0]).unwrap();
    assert_eq!(y.shape(), [1, 2, 0]);
}

fn running(c: usize) -> (Tensor, Tensor) {
    let rm: Vec<f32> = (0..c).map(|i| i as f32 * 0.1).collect();
    let rv: Vec<f32> = (0..c).map(|i| 1.0 + i as f32 * 0.2).collect();
    (
        Tensor::from_vec(rm, &[c], CPU).unwrap(),
        Tensor::from_vec(rv, &[c], CPU).unwrap(),
    )
}

fn bn_input(shape: &[usize]) -> Tensor {
    let n: usize = shape.iter().product();
    let v: Vec<f32> = (0..n).map(|i| ((i * 7) % 11) as f32 - 5.0).collect();
    Tensor::from_vec(v, shape, CPU).unwrap()
}

/// PyTorch's CPU batch norm reads and writes the running statistics as 1-D
/// tensors ("TensorAccessor expected 1 dims"), in training and in
/// evaluation. strata took any shape of C elements, and a non-contiguous
/// one (a transposed `[2, 2]`) was updated through a reshaped copy: the
/// update was lost without an error.
#[test]
fn batch_norm_running_statistics_must_be_1d() {
    let x = bn_input(&[3, 4, 2]);
    for training in [true, false] {
        let (rm, rv) = running(4);
        let (rm2, rv2) = (rm.reshape(&[2, 2]).unwrap(), rv.reshape(&[2, 2]).unwrap());
        let r = x.batch_norm(Some(&rm2), Some(&rv2), None, None, training, 0.1, 1e-5);
        assert!(matches!(r, Err(TensorError::Shape { .. })), "{r:?}");
        let rvt = rv2.t().unwrap();
        let r = x.batch_norm(Some(&rm), Some(&rvt), None, None, training, 0.1, 1e-5);
        assert!(matches!(r, Err(TensorError::Shape { .. })), "{r:?}");
        assert_eq!(f32s(&rm), f32s(&running(4).0));
        assert_eq!(f32s(&rvt), [1.0, 1.4, 1.2, 1.6]);
        // 0-d statistics of one channel.
        let x1 = bn_input(&[3, 1, 2]);
        let (m0, v0) = (
            Tensor::zeros(&[], DType::F32, CPU).unwrap(),
            Tensor::ones(&[], DType::F32, CPU).unwrap(),
        );
        let r = x1.batch_norm(Some(&m0), Some(&v0), None, None, training, 0.1, 1e-5);
        assert!(matches!(r, Err(TensorError::Shape { .. })), "{r:?}");
        // The weight and bias may have any shape of C elements, as in
        // PyTorch; an empty input takes any running statistics.
        let w = Tensor::ones(&[2, 2], DType::F32, CPU).unwrap();
        assert!(x
            .batch_norm(Some(&rm), Some(&rv), Some(&w), None, training, 0.1, 1e-5)
            .is_ok());
        let e = Tensor::zeros(&[0, 4, 2], DType::F32, CPU).unwrap();
        let y = e
            .batch_norm(Some(&rm2), Some(&rv2), None, None, training, 0.1, 1e-5)
            .unwrap();
        assert_eq!(y.shape(), [0, 4, 2]);
    }
}

/// A running variance whose elements share memory (expanded) cannot take
/// the update (strata refuses such in-place outputs): the error must come
/// before anything is written. strata wrote the running mean first, then
/// failed on the variance, leaving the mean updated.
#[test]
fn batch_norm_failed_update_leaves_both_running_statistics() {
    let x = bn_input(&[3, 4, 2]);
    let rm = Tensor::zeros(&[4], DType::F32, CPU).unwrap();
    let rv = Tensor::ones(&[1], DType::F32, CPU)
        .unwrap()
        .expand(&[4])
        .unwrap();
    let r = x.batch_norm(Some(&rm), Some(&rv), None, None, true, 0.1, 1e-5);
    assert!(matches!(r, Err(TensorError::Overlap { .. })), "{r:?}");
    assert_eq!(f32s(&rm), [0.0; 4]);
    assert_eq!(f32s(&rv), [1.0; 4]);
    // The same tensor as both statistics is updated as PyTorch updates it
    // (the mean first, then the variance from the new mean).
    let same = Tensor::ones(&[4], DType::F32, CPU).unwrap();
    x.batch_norm(Some(&same), Some(&same), None, None, true, 0.1, 1e-5)
        .unwrap();
    let want = [2.315f32, 1.9616667, 1.37, 2.1716666];
    let got = f32s(&same);
    assert!(
        got.iter().zip(want).all(|(a, b)| (a - b).abs() < 1e-5),
        "{got:?}"
    );
}

/// `F.batch_norm`'s eps checks (`eps < 0`, `eps <= 0` in training) let NaN
/// through, and the result is NaN; strata refused it.
#[test]
fn batch_norm_takes_a_nan_eps_as_pytorch() {
    let x = bn_input(&[3, 2, 4]);
    for training in [false, true] {
        let (rm, rv) = running(2);
        let y = x
            .batch_norm(Some(&rm), Some(&rv), None, None, training, 0.1, f64::NAN)
            .unwrap();
        assert!(f32s(&y).iter().all(|v| v.is_nan()), "training {training}");
    }
    let (rm, rv) = running(2);
    for eps in [-1.0, -0.0 - 1e-300] {
        assert!(x
            .batch_norm(Some(&rm), Some(&rv), None, None, false, 0.1, eps)
            .is_err());
    }
    assert!(x
        .batch_norm(Some(&rm), Some(&rv), None, None, true, 0.1, 0.0)
        .is_err());
}

/// A convolution of an input with no channels (reported by this sweep,
/// fixed in conv.rs): PyTorch 2.15 returns `[N, 0, L_out]` for `conv1d`
/// (its empty-input path gives the output the input's 0 channels) and
/// refuses a transposed convolution whose weight has no input channels
/// ("expected weight to be at least 1 at dimension 0"); strata returned
/// zeros of `[N, C_out, L_out]` for both.
#[test]
fn convolution_of_an_input_without_channels_is_pytorchs() {
    let x = Tensor::zeros(&[1, 0, 4], DType::F32, CPU).unwrap();
    let w = Tensor::zeros(&[2, 0, 2], DType::F32, CPU).unwrap();
    let y = x.conv1d(&w, None, &ConvOptions::new()).unwrap();
    assert_eq!(y.shape(), [1, 0, 3]);
    let wt = Tensor::zeros(&[0, 3, 3], DType::F32, CPU).unwrap();
    assert!(x.conv_transpose1d(&wt, None, &ConvOptions::new()).is_err());
}
