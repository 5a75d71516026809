//! Session 77: the hostile-input sweep of the ops sessions 75-76 added, on
//! variables: the `Var` forms share strata-tensor's plans and
//! compositions, so the cases strata-tensor's `hostile_sweep_s77` found
//! wrong were wrong here too (expected values are PyTorch 2.15's CPU
//! answers, gradients included).

use strata_autograd::Var;
use strata_tensor::{DType, Device, InterpolateMode, InterpolateOptions, Tensor};

const CPU: Device = Device::Cpu;

fn f32s(t: &Tensor) -> Vec<f32> {
    t.to_dtype(DType::F32).unwrap().to_vec::<f32>().unwrap()
}

/// A linear resize that keeps a dim's size copies it (PyTorch's
/// `compute_source_index_and_lambda`), so the input's gradient is the
/// output's; strata blended neighbours by `1 / scale_factor`, in the
/// values and in the gradient.
#[test]
fn linear_resize_that_keeps_the_size_passes_the_gradient_through() {
    let x =
        Var::parameter(Tensor::from_slice(&[0.0f32, 10., 20., 30., 40.], &[1, 1, 5], CPU).unwrap())
            .unwrap();
    let opts = InterpolateOptions::scale(&[1.1]).mode(InterpolateMode::Linear);
    let y = x.interpolate(&opts).unwrap();
    assert_eq!(f32s(y.data()), [0., 10., 20., 30., 40.]);
    let g = Tensor::from_slice(&[1.0f32, 2., 3., 4., 5.], &[1, 1, 5], CPU).unwrap();
    y.backward_with(Some(&g), false).unwrap();
    assert_eq!(f32s(&x.grad().unwrap()), [1., 2., 3., 4., 5.]);
}

/// 1-D nearest resizing by a scale factor reads the elements the factor
/// names (PyTorch: `[x0, x0, x1, x2, x3]` for 1.1 on five elements), and
/// the gradient goes back to them.
#[test]
fn nearest_1d_resize_by_a_scale_factor_reads_and_differentiates_as_pytorch() {
    let x =
        Var::parameter(Tensor::from_slice(&[0.0f32, 10., 20., 30., 40.], &[1, 1, 5], CPU).unwrap())
            .unwrap();
    let y = x.interpolate(&InterpolateOptions::scale(&[1.1])).unwrap();
    assert_eq!(f32s(y.data()), [0., 0., 10., 20., 30.]);
    y.sum(None, false).unwrap().backward().unwrap();
    assert_eq!(f32s(&x.grad().unwrap()), [2., 1., 1., 1., 0.]);
}

/// Adaptive pooling of an empty input to a huge output size is an empty
/// result (PyTorch's answer), recorded so that backward gives the input's
/// empty gradient; strata asked the allocator for an index of 2^40
/// elements and failed.
#[test]
fn adaptive_pooling_of_an_empty_variable_to_a_huge_size() {
    let x = Var::parameter(Tensor::zeros(&[1, 0, 4], DType::F32, CPU).unwrap()).unwrap();
    let y = x.adaptive_avg_pool1d(&[1 << 40]).unwrap();
    assert_eq!(y.shape(), [1, 0, 1 << 40]);
    y.sum(None, false).unwrap().backward().unwrap();
    assert_eq!(x.grad().unwrap().shape(), [1, 0, 4]);
    // A non-empty input pooled to nothing has a zero gradient.
    let x = Var::parameter(Tensor::ones(&[1, 2, 3], DType::F32, CPU).unwrap()).unwrap();
    let y = x.adaptive_avg_pool1d(&[0]).unwrap();
    assert_eq!(y.shape(), [1, 2, 0]);
    y.sum(None, false).unwrap().backward().unwrap();
    assert_eq!(f32s(&x.grad().unwrap()), [0.0; 6]);
}

/// Batch norm on variables updates plain running statistics: an update
/// that cannot be written (an expanded running variance) must fail before
/// the running mean is written, and 2-D statistics are refused as in
/// PyTorch.
#[test]
fn batch_norm_of_a_variable_keeps_the_running_statistics_on_failure() {
    let v: Vec<f32> = (0..24).map(|i| ((i * 7) % 11) as f32 - 5.0).collect();
    let x = Var::parameter(Tensor::from_vec(v, &[3, 4, 2], CPU).unwrap()).unwrap();
    let rm = Tensor::zeros(&[4], DType::F32, CPU).unwrap();
    let rv = Tensor::ones(&[1], DType::F32, CPU)
        .unwrap()
        .expand(&[4])
        .unwrap();
    assert!(x
        .batch_norm(Some(&rm), Some(&rv), None, None, true, 0.1, 1e-5)
        .is_err());
    assert_eq!(f32s(&rm), [0.0; 4]);
    let rv2 = Tensor::ones(&[2, 2], DType::F32, CPU).unwrap().t().unwrap();
    assert!(x
        .batch_norm(Some(&rm), Some(&rv2), None, None, true, 0.1, 1e-5)
        .is_err());
    assert_eq!(f32s(&rm), [0.0; 4]);
}
