//! Defects found by session 44's families of the gradient oracle
//! (`benches/anchors/fuzz_grad.py`, seeds >= 181), each test with PyTorch
//! 2.15's answer (CPU) noted beside it.

use strata_autograd::{AutogradError, Var};
use strata_tensor::{Device, Tensor};

fn leaf(v: &[f32]) -> Var {
    Var::parameter(Tensor::from_slice(v, &[v.len()], Device::Cpu).unwrap()).unwrap()
}

fn grad(v: &Var) -> Vec<f32> {
    v.grad().unwrap().to_vec::<f32>().unwrap()
}

/// A second backward through a base's `CopySlices` node after a first
/// without `retain_graph` is refused, even where the in-place op saved
/// nothing (`add_` of a scalar): PyTorch's `CopySlices` drops the op it
/// wraps when its graph is released. strata ran the second pass (the
/// oracle's two-pass programs, seed 182: 1 of 4000).
///
/// ```python
/// x = torch.ones(3, requires_grad=True)
/// b = x + 0
/// b.narrow(0, 0, 2).add_(1.0)
/// b.sum().backward()
/// b.sum().backward()  # RuntimeError: Trying to backward through the graph a second time
/// x.grad              # tensor([1., 1., 1.])
/// ```
#[test]
fn a_second_backward_through_copy_slices_is_refused_after_release() {
    let x = leaf(&[1.0, 1.0, 1.0]);
    let b = x.add(0.0).unwrap();
    b.narrow(0, 0, 2).unwrap().add_(1.0).unwrap();
    assert_eq!(b.grad_fn_name(), Some("CopySlices"));
    b.sum(None, false).unwrap().backward().unwrap();
    let second = b.sum(None, false).unwrap().backward();
    assert!(
        matches!(second, Err(AutogradError::GraphReleased { .. })),
        "{second:?}"
    );
    assert_eq!(grad(&x), vec![1.0, 1.0, 1.0]);

    // From the view (whose history is a view of the CopySlices node): the
    // same (PyTorch refuses `v.sum().backward()` twice too).
    let x = leaf(&[1.0, 1.0, 1.0]);
    let b = x.add(0.0).unwrap();
    let v = b.narrow(0, 0, 2).unwrap();
    v.add_(1.0).unwrap();
    v.sum(None, false).unwrap().backward().unwrap();
    let second = v.sum(None, false).unwrap().backward();
    assert!(
        matches!(second, Err(AutogradError::GraphReleased { .. })),
        "{second:?}"
    );
    assert_eq!(grad(&x), vec![1.0, 1.0, 0.0]);
}

/// With `retain_graph` the second pass runs and the gradients add up; an
/// in-place op of a scalar on a non-view saves nothing and may be
/// back-propagated twice without it (`AddBackward`), as in PyTorch:
///
/// ```python
/// b = x + 0; b.narrow(0, 0, 2).add_(1.0)
/// b.sum().backward(retain_graph=True); b.sum().backward()  # x.grad: [2., 2., 2.]
/// b = x + 0; b.add_(1.0)
/// b.sum().backward(); b.sum().backward()                    # x.grad: [2., 2., 2.]
/// ```
#[test]
fn copy_slices_runs_twice_with_retain_graph_and_plain_add_without() {
    let x = leaf(&[1.0, 1.0, 1.0]);
    let b = x.add(0.0).unwrap();
    b.narrow(0, 0, 2).unwrap().add_(1.0).unwrap();
    let s = b.sum(None, false).unwrap();
    s.backward_with(None, true).unwrap();
    b.sum(None, false).unwrap().backward().unwrap();
    assert_eq!(grad(&x), vec![2.0, 2.0, 2.0]);

    let x = leaf(&[1.0, 1.0, 1.0]);
    let b = x.add(0.0).unwrap();
    b.add_(1.0).unwrap();
    b.sum(None, false).unwrap().backward().unwrap();
    b.sum(None, false).unwrap().backward().unwrap();
    assert_eq!(grad(&x), vec![2.0, 2.0, 2.0]);
}

/// Dropout in training with p > 0 refuses a second backward after its
/// graph was released: PyTorch's dropout is `input * mask` there
/// (`MulBackward0`, saving the mask, or zeros for p = 1), where strata's
/// node keeps only the mask's seed and ran again (the oracle's two-pass
/// programs, seed 186: `dropout(p=1.0, train=true)`).
///
/// ```python
/// x = torch.ones(3, requires_grad=True)
/// y = F.dropout(x + 0, 1.0, True)   # and 0.5
/// y.sum().backward()
/// y.sum().backward()  # RuntimeError: Trying to backward through the graph a second time
/// ```
#[test]
fn dropout_in_training_refuses_a_second_backward_after_release() {
    for p in [1.0, 0.5] {
        let x = leaf(&[1.0, 1.0, 1.0]);
        // (x + 0: an input whose own node saves nothing)
        let y = x.add(0.0).unwrap().dropout(p, true).unwrap();
        y.sum(None, false).unwrap().backward().unwrap();
        let second = y.sum(None, false).unwrap().backward();
        assert!(
            matches!(second, Err(AutogradError::GraphReleased { .. })),
            "p = {p}: {second:?}"
        );
        if p == 1.0 {
            assert_eq!(grad(&x), vec![0.0, 0.0, 0.0]);
        }
    }
    // Not training, or p = 0: the input itself, nothing recorded.
    let x = leaf(&[1.0, 1.0, 1.0]);
    let y = x.add(1.0).unwrap().dropout(0.0, true).unwrap();
    y.sum(None, false).unwrap().backward().unwrap();
    y.sum(None, false).unwrap().backward().unwrap();
    assert_eq!(grad(&x), vec![2.0, 2.0, 2.0]);
}
