//! Session 39: disagreements with PyTorch found in a hostile sweep. Every
//! expected value is PyTorch 2.15's (CPU), with the Python beside each test.

use strata_autograd::{inference_mode, AutogradError, Var};
use strata_tensor::{DType, Device, Tensor};

fn ones(n: usize) -> Var {
    Var::new(Tensor::ones(&[n], DType::F32, Device::Cpu).unwrap())
}

fn values(v: &Var) -> Vec<f32> {
    v.data().to_vec::<f32>().unwrap()
}

/// `detach()` of an inference tensor is still one: it is not saved for
/// backward and cannot be made to require grad, yet in-place ops on it
/// outside inference mode are allowed; a view of it refuses them again,
/// and one detached inside inference mode refuses them too.
///
/// ```python
/// with torch.inference_mode(): x = torch.ones(2)
/// d = x.detach(); d.is_inference()          # True
/// d.add_(1); x                              # [2., 2.]
/// d.requires_grad_()                        # RuntimeError: Setting requires_grad=True on inference tensor ...
/// a = torch.ones(2, requires_grad=True)
/// a * d                                     # RuntimeError: Inference tensors cannot be saved for backward
/// (a + d).sum().backward(); a.grad          # [1., 1.]
/// d.view(2).add_(1)                         # RuntimeError: Inplace update to inference tensor outside InferenceMode
/// x.view(2).detach().add_(1)                # fine
/// with torch.inference_mode(): d2 = x.detach()
/// d2.add_(1)                                # RuntimeError: Inplace update to inference tensor outside InferenceMode
/// (d * 2).is_inference()                    # False
/// n = torch.ones(2)
/// with torch.inference_mode(): w = n.detach()
/// w.is_inference()                          # False
/// ```
#[test]
fn detach_of_an_inference_variable_is_one_that_allows_in_place_ops() {
    let x = inference_mode(|| ones(2).mul(1.0)).unwrap();
    assert!(x.is_inference());
    let d = x.detach();
    assert!(d.is_inference());
    d.add_(1.0).unwrap();
    assert_eq!(values(&x), vec![2.0, 2.0]);
    assert!(matches!(
        x.add_(1.0).unwrap_err(),
        AutogradError::InferenceTensorInPlace { .. }
    ));
    assert!(matches!(
        d.requires_grad_(true).unwrap_err(),
        AutogradError::RequiresGrad { .. }
    ));
    let a = Var::parameter(Tensor::ones(&[2], DType::F32, Device::Cpu).unwrap()).unwrap();
    assert!(matches!(
        a.mul(&d).unwrap_err(),
        AutogradError::InferenceTensorSaved { .. }
    ));
    a.add(&d)
        .unwrap()
        .sum(None, false)
        .unwrap()
        .backward()
        .unwrap();
    assert_eq!(a.grad().unwrap().to_vec::<f32>().unwrap(), vec![1.0, 1.0]);

    let v = d.view(&[2]).unwrap();
    assert!(v.is_inference());
    assert!(matches!(
        v.add_(1.0).unwrap_err(),
        AutogradError::InferenceTensorInPlace { .. }
    ));
    x.view(&[2]).unwrap().detach().add_(1.0).unwrap();
    assert_eq!(values(&x), vec![3.0, 3.0]);

    let d2 = inference_mode(|| x.detach());
    assert!(d2.is_inference());
    assert!(matches!(
        d2.add_(1.0).unwrap_err(),
        AutogradError::InferenceTensorInPlace { .. }
    ));
    assert!(!d.mul(2.0).unwrap().is_inference());
    assert!(!inference_mode(|| ones(2).detach()).is_inference());
    assert_eq!(values(&x), vec![3.0, 3.0]);
}
