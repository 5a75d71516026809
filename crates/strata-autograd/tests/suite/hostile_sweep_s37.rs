//! Session 37: class-target losses with no class, or with every target
//! ignored, through backward. Expected values are PyTorch 2.15's (CPU):
//!
//! ```python
//! x = torch.zeros(3, 0, requires_grad=True); t = torch.full((3,), -100)
//! F.cross_entropy(x, t, reduction=r)  # mean: nan, sum: 0., none: [0., 0., 0.]
//! F.nll_loss(x, t, reduction=r)       # the same
//! # backward (of l, or l.sum() for none): x.grad has shape (3, 0)
//! x = torch.zeros(3, 4, requires_grad=True)
//! F.cross_entropy(x, t)               # nan; x.grad: zeros (3, 4)
//! ```

use strata_autograd::Var;
use strata_tensor::{CrossEntropyArgs, DType, Device, Reduction, Tensor};

const CPU: Device = Device::Cpu;

fn ignored_targets() -> Tensor {
    Tensor::from_slice(&[-100i64, -100, -100], &[3], CPU).unwrap()
}

/// The loss's values and the input's gradient after backward (of the sum
/// for `none`).
fn run(classes: usize, reduction: Reduction, nll: bool) -> (Vec<f32>, Vec<usize>, Vec<f32>) {
    let x = Var::parameter(Tensor::zeros(&[3, classes], DType::F32, CPU).unwrap()).unwrap();
    let t = ignored_targets();
    let l = if nll {
        x.nll_loss(&t, None, -100, reduction).unwrap()
    } else {
        let args = CrossEntropyArgs {
            reduction,
            ..CrossEntropyArgs::default()
        };
        x.cross_entropy(&t, args).unwrap()
    };
    let values = l.data().to_vec::<f32>().unwrap();
    let root = if reduction == Reduction::None {
        l.sum(None, false).unwrap()
    } else {
        l
    };
    root.backward().unwrap();
    let g = x.grad().expect("a gradient");
    (values, g.shape().to_vec(), g.to_vec::<f32>().unwrap())
}

#[test]
fn class_target_losses_with_no_class_and_every_target_ignored_go_through_backward() {
    for nll in [false, true] {
        let (v, shape, g) = run(0, Reduction::Mean, nll);
        assert!(v.len() == 1 && v[0].is_nan(), "nll {nll}: {v:?}");
        assert_eq!((shape, g), (vec![3, 0], vec![]), "nll {nll}");
        let (v, shape, g) = run(0, Reduction::Sum, nll);
        assert_eq!(v, vec![0.0], "nll {nll}");
        assert_eq!((shape, g), (vec![3, 0], vec![]), "nll {nll}");
        let (v, shape, g) = run(0, Reduction::None, nll);
        assert_eq!(v, vec![0.0; 3], "nll {nll}");
        assert_eq!((shape, g), (vec![3, 0], vec![]), "nll {nll}");
    }
}

#[test]
fn every_target_ignored_gives_a_nan_mean_and_a_zero_gradient() {
    for nll in [false, true] {
        let (v, shape, g) = run(4, Reduction::Mean, nll);
        assert!(v.len() == 1 && v[0].is_nan(), "nll {nll}: {v:?}");
        assert_eq!(shape, vec![3, 4]);
        assert!(g.iter().all(|&x| x == 0.0), "nll {nll}: {g:?}");
    }
}
