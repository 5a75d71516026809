//! Session 73: a class weight of C elements in any shape for an input of
//! more than two dims, which PyTorch's `nll_loss2d` path takes (it checks
//! only the element count; 2-d and 1-d inputs want `[C]`): strata's losses
//! and their gradients use it as `[C]`.

use crate::pytorch_fixture::{close, host, tensor_of};
use strata_autograd::{AutogradError, Var};
use strata_tensor::{CrossEntropyArgs, DType, Reduction, TensorError};

/// A leaf of `dtype` that requires grad, of `shape`.
fn leaf(v: &[f64], shape: &[usize], dtype: DType) -> Var {
    Var::parameter(tensor_of(v, shape, dtype)).unwrap()
}

/// PyTorch 2.15:
/// ```python
/// x = torch.tensor([[[.5, -1.], [2., 0.], [-.5, 1.5]],
///                   [[1., 1.], [0., -2.], [.5, .5]]], requires_grad=True)
/// t = torch.tensor([[0, 2], [1, 1]]); w = torch.tensor([[1.], [2.], [.5]])
/// l = F.nll_loss(x, t, weight=w); l  # 0.5
/// l.backward(); x.grad.flatten()
/// # [-0.18181818723678589, 0, 0, 0, 0, -0.09090909361839294,
/// #  0, 0, -0.3636363744735718, -0.3636363744735718, 0, 0]
/// x.grad = None; l = F.cross_entropy(x, t, weight=w, reduction="sum")
/// l  # 12.269285202026367
/// l.backward(); x.grad.flatten()
/// # [-0.8290472030639648, 0.031445007771253586, 0.7661571502685547,
/// #  0.08547639101743698, 0.06289001554250717, -0.11692139506340027,
/// #  1.0129607915878296, 1.2074978351593018, -1.6273525953292847,
/// #  -1.9398822784423828, 0.6143917441368103, 0.7323843836784363]
/// F.nll_loss(x[:, :, 0], t[:, 0], weight=w)  # RuntimeError: weight tensor
/// # should be defined either for all 3 classes or no classes
/// ```
#[test]
fn an_nd_input_takes_a_class_weight_of_any_shape_with_c_elements() {
    let xs = [
        0.5, -1.0, 2.0, 0.0, -0.5, 1.5, 1.0, 1.0, 0.0, -2.0, 0.5, 0.5,
    ];
    let t = tensor_of(&[0.0, 2.0, 1.0, 1.0], &[2, 2], DType::I64);
    let w = tensor_of(&[1.0, 2.0, 0.5], &[3, 1], DType::F32);

    let x = leaf(&xs, &[2, 3, 2], DType::F32);
    let l = x.nll_loss(&t, Some(&w), -100, Reduction::Mean).unwrap();
    close(&host(l.data()), &[0.5], 1e-7, "nll_loss");
    l.backward().unwrap();
    let want = [
        -0.181_818_187_236_785_9,
        0.0,
        0.0,
        0.0,
        0.0,
        -0.09090909361839294,
        0.0,
        0.0,
        -0.3636363744735718,
        -0.3636363744735718,
        0.0,
        0.0,
    ];
    close(&host(&x.grad().unwrap()), &want, 1e-7, "nll_loss x.grad");

    let x = leaf(&xs, &[2, 3, 2], DType::F32);
    let args = CrossEntropyArgs {
        weight: Some(&w),
        reduction: Reduction::Sum,
        ..Default::default()
    };
    let l = x.cross_entropy(&t, args).unwrap();
    close(
        &host(l.data()),
        &[12.269285202026367],
        1e-6,
        "cross_entropy",
    );
    l.backward().unwrap();
    let want = [
        -0.8290472030639648,
        0.031445007771253586,
        0.7661571502685547,
        0.08547639101743698,
        0.06289001554250717,
        -0.11692139506340027,
        1.0129607915878296,
        1.2074978351593018,
        -1.6273525953292847,
        -1.9398822784423828,
        0.6143917441368103,
        0.7323843836784363,
    ];
    close(
        &host(&x.grad().unwrap()),
        &want,
        1e-6,
        "cross_entropy x.grad",
    );

    // A 2-d input wants [C].
    let x2 = leaf(&[0.5, 2.0, -0.5, 1.0, 0.0, 0.5], &[2, 3], DType::F32);
    let t2 = tensor_of(&[0.0, 1.0], &[2], DType::I64);
    match x2.nll_loss(&t2, Some(&w), -100, Reduction::Mean) {
        Err(AutogradError::Tensor(TensorError::Shape { .. })) => {}
        other => panic!(
            "a [3, 1] weight of a 2-d input: {:?}",
            other.map(|l| host(l.data()))
        ),
    }
}
