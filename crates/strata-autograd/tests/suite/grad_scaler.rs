//! `GradScaler` behaviours checked against PyTorch's `torch.amp.GradScaler`.

use strata_autograd::optim::{Adam, Sgd};
use strata_autograd::{AutogradError, GradScaler, Var};
use strata_tensor::{DType, Device, Tensor};

const CPU: Device = Device::Cpu;

/// ```python
/// w = torch.tensor([1., 2.], dtype=torch.float16, requires_grad=True)
/// opt = torch.optim.Adam([w], lr=0.1, fused=True); s = torch.amp.GradScaler("cpu", init_scale=4.)
/// s.scale((w * 2).sum()).backward()      # w.grad [8., 8.]
/// s.unscale_(opt)   # ValueError: Attempting to unscale FP16 gradients.
/// s.step(opt)       # runs: a fused optimizer unscales inside its step
/// w                 # [0.8999, 1.9004] (f16)
/// ```
/// With `fused=False` (PyTorch's default), `s.step(opt)` calls `unscale_`
/// and raises the same error. The refused calls change nothing: the
/// gradient stays scaled, the weight and the scale as they were.
#[test]
fn an_explicit_unscale_refuses_f16_gradients_as_in_pytorch() {
    let w16 = Var::parameter(
        Tensor::from_slice(&[1.0f32, 2.0], &[2], CPU)
            .unwrap()
            .to_dtype(DType::F16)
            .unwrap(),
    )
    .unwrap();
    let mut plain = Adam::new(vec![w16.clone()], 0.1).unwrap();
    let mut opt = Adam::new(vec![w16.clone()], 0.1).unwrap().with_fused(true);
    let mut scaler = GradScaler::with_settings(4.0, 2.0, 0.5, 2000).unwrap();
    let loss = w16.mul(2.0).unwrap().sum(None, false).unwrap();
    scaler.scale(&loss).unwrap().backward().unwrap();
    assert_eq!(
        w16.grad().unwrap().to_vec_as::<f32>().unwrap(),
        vec![8.0; 2]
    );
    let err = scaler.unscale_(&opt).unwrap_err();
    assert!(matches!(err, AutogradError::GradScaler { .. }), "{err}");
    assert!(err.to_string().contains("f16"), "{err}");
    assert_eq!(
        w16.grad().unwrap().to_vec_as::<f32>().unwrap(),
        vec![8.0; 2]
    );
    assert_eq!(w16.data().to_vec_as::<f32>().unwrap(), vec![1.0, 2.0]);
    assert_eq!(scaler.get_scale(), 4.0);

    // A step of a non-fused optimizer unscales first, and refuses them too.
    let err = scaler.step(&mut plain).unwrap_err();
    assert!(err.to_string().contains("f16"), "{err}");
    assert_eq!(
        w16.grad().unwrap().to_vec_as::<f32>().unwrap(),
        vec![8.0; 2]
    );
    assert_eq!(w16.data().to_vec_as::<f32>().unwrap(), vec![1.0, 2.0]);

    // A fused Adam takes them: the step unscales them itself.
    assert!(scaler.step(&mut opt).unwrap());
    let want = [0.89990234375f64, 1.900390625];
    assert_eq!(w16.data().to_vec_as::<f64>().unwrap(), want);
    scaler.update();

    // bf16 gradients are unscaled by an explicit call (PyTorch refuses only
    // f16).
    let wb = Var::parameter(
        Tensor::from_slice(&[1.0f32, 2.0], &[2], CPU)
            .unwrap()
            .to_dtype(DType::BF16)
            .unwrap(),
    )
    .unwrap();
    let opt_b = Sgd::new(vec![wb.clone()], 0.1, 0.0).unwrap();
    let loss = wb.mul(2.0).unwrap().sum(None, false).unwrap();
    scaler.scale(&loss).unwrap().backward().unwrap();
    scaler.unscale_(&opt_b).unwrap();
    assert_eq!(wb.grad().unwrap().to_vec_as::<f32>().unwrap(), vec![2.0; 2]);
}
