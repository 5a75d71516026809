//! `GradScaler` behaviours checked against PyTorch's `torch.amp.GradScaler`.

use strata_autograd::optim::Sgd;
use strata_autograd::{AutogradError, GradScaler, Var};
use strata_tensor::{DType, Device, Tensor};

const CPU: Device = Device::Cpu;

/// ```python
/// w = torch.tensor([1., 2.], dtype=torch.float16, requires_grad=True)
/// opt = torch.optim.SGD([w], lr=0.1); s = torch.amp.GradScaler("cpu")
/// s.scale((w * 2).sum()).backward()
/// s.unscale_(opt)   # ValueError: Attempting to unscale FP16 gradients.
/// s.step(opt)       # the same ValueError (step unscales first)
/// ```
/// A refused call changes nothing: the gradient stays scaled, the weight and
/// the scale as they were, and the scaler works on once the parameter is f32.
#[test]
fn unscaling_f16_gradients_is_refused_as_in_pytorch() {
    let w = Var::parameter(Tensor::from_slice(&[1.0f32, 2.0], &[2], CPU).unwrap()).unwrap();
    let w16 = Var::parameter(w.data().to_dtype(DType::F16).unwrap()).unwrap();
    let mut opt = Sgd::new(vec![w16.clone()], 0.1, 0.0).unwrap();
    let mut scaler = GradScaler::new();
    let loss = w16.mul(2.0).unwrap().sum(None, false).unwrap();
    scaler.scale(&loss).unwrap().backward().unwrap();
    let before = w16.grad().unwrap().to_vec_as::<f32>().unwrap();
    // 2 * 65536 overflows f16, as in PyTorch.
    assert_eq!(before, vec![f32::INFINITY; 2]);
    let err = scaler.unscale_(&opt).unwrap_err();
    assert!(matches!(err, AutogradError::GradScaler { .. }), "{err}");
    assert!(err.to_string().contains("f16"), "{err}");
    let err = scaler.step(&mut opt).unwrap_err();
    assert!(matches!(err, AutogradError::GradScaler { .. }), "{err}");
    assert_eq!(w16.grad().unwrap().to_vec_as::<f32>().unwrap(), before);
    assert_eq!(w16.data().to_vec_as::<f32>().unwrap(), vec![1.0, 2.0]);
    assert_eq!(scaler.get_scale(), 65536.0);

    // bf16 gradients are unscaled (PyTorch refuses only f16).
    let wb = Var::parameter(w.data().to_dtype(DType::BF16).unwrap()).unwrap();
    let opt_b = Sgd::new(vec![wb.clone()], 0.1, 0.0).unwrap();
    let loss = wb.mul(2.0).unwrap().sum(None, false).unwrap();
    scaler.scale(&loss).unwrap().backward().unwrap();
    scaler.unscale_(&opt_b).unwrap();
    assert_eq!(wb.grad().unwrap().to_vec_as::<f32>().unwrap(), vec![2.0; 2]);
    scaler.update();

    // The f32 parameter of the same loss steps through the same scaler.
    let mut opt = Sgd::new(vec![w.clone()], 0.1, 0.0).unwrap();
    let loss = w.mul(2.0).unwrap().sum(None, false).unwrap();
    scaler.scale(&loss).unwrap().backward().unwrap();
    assert!(scaler.step(&mut opt).unwrap());
    let got = w.data().to_vec::<f32>().unwrap();
    assert_eq!(got, vec![1.0 - 0.1 * 2.0, 2.0 - 0.1 * 2.0]);
}
