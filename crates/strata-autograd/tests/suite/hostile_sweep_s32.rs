//! Session 32's sweep of hostile inputs to autograd (after
//! `hostile_sweep_s31.rs`). Each test asserts PyTorch's values (PyTorch
//! 2.15 on the CPU, noted beside them), or the typed error.
//!
//! Defects these tests found (fixed with them):
//!
//! * a conversion of a variable that requires grad to an integer or bool
//!   dtype (`x.to_dtype(I64)`) was recorded like a float conversion: the
//!   integer result required grad and passed the gradient back through
//!   the rounding, so `(x * x.long().float()).sum()` gave `x.grad =
//!   floor(x) + x` instead of PyTorch's `floor(x)`, and a loss computed
//!   only from the integer copy back-propagated a gradient of 1 where
//!   PyTorch has nothing to back-propagate. Integer and bool results are
//!   now never recorded (they do not require grad), as in PyTorch;
//! * `cumsum` with an integer `dtype` of a variable that requires grad was
//!   recorded the same way; PyTorch refuses it ("Autograd not support
//!   dtype: Long"), and so does strata now, with a typed dtype error
//!   (without grad mode, or of a variable that does not require grad, it
//!   still computes);
//! * `zero_` on a non-leaf passed no gradient to its old history (PyTorch's
//!   `ZeroBackward0` passes zeros): a parameter upstream was left with no
//!   `.grad` instead of zeros, so AdamW's weight decay skipped it, and a
//!   saved tensor that `zero_` itself modified (`x.exp().zero_()`) was never
//!   checked, so the backward succeeded where PyTorch refuses it;
//! * `x.pow(&y)` with a base of a lower-precision dtype than the exponent
//!   (f16 ^ f32) took the exponent gradient's `ln(x)` in the base's dtype
//!   (f16: y.grad 5.546875 for 2^3, PyTorch 5.545177); PyTorch converts the
//!   base to the promoted dtype first.

use strata_autograd::{no_grad, AutogradError, Var};
use strata_tensor::{DType, Device, Tensor, TensorError};

use crate::common;
use common::{grad, param};

const CPU: Device = Device::Cpu;

// ------------------------------------------------ integer and bool results

#[test]
fn integer_and_bool_conversions_cut_the_graph() {
    for dtype in [DType::I64, DType::I32, DType::U8, DType::Bool] {
        let x = param(&[1.5, 2.5]);
        // x.long().requires_grad is False, x.long().grad_fn is None.
        let y = x.to_dtype(dtype).unwrap();
        assert!(
            !y.requires_grad(),
            "{dtype}: an integer result requires grad"
        );
        assert_eq!(y.grad_fn_name(), None, "{dtype}");
        // x.long().float().sum().backward(): "element 0 of tensors does not
        // require grad and does not have a grad_fn".
        let loss = y.to_dtype(DType::F32).unwrap().sum(None, false).unwrap();
        assert!(
            matches!(loss.backward(), Err(AutogradError::NoGradFn)),
            "{dtype}: backward through an integer copy"
        );
        assert!(
            x.grad().is_none(),
            "{dtype}: a gradient through an integer copy"
        );
    }
    // (x * x.long().float()).sum().backward(): x.grad = x.long() = [1, 2].
    let x = param(&[1.5, 2.5]);
    let floor = x
        .to_dtype(DType::I64)
        .unwrap()
        .to_dtype(DType::F32)
        .unwrap();
    x.mul(&floor)
        .unwrap()
        .sum(None, false)
        .unwrap()
        .backward()
        .unwrap();
    assert_eq!(grad(&x), vec![1.0, 2.0]);
    // Float conversions still carry the gradient
    // (x.double().sum().backward(): [1, 1]).
    let x = param(&[1.5, 2.5]);
    let d = x.to_dtype(DType::F64).unwrap();
    assert!(d.requires_grad());
    d.sum(None, false).unwrap().backward().unwrap();
    assert_eq!(grad(&x), vec![1.0, 1.0]);
}

#[test]
fn cumsum_to_an_integer_dtype_of_a_variable_that_requires_grad_is_refused() {
    // x.cumsum(0, dtype=torch.int64) with x.requires_grad: RuntimeError
    // "Autograd not support dtype: Long".
    let x = param(&[1.5, 2.5]);
    for dtype in [DType::I64, DType::I32, DType::U8] {
        match x.cumsum(0, Some(dtype)) {
            Err(AutogradError::Tensor(e @ TensorError::DType { .. })) => {
                let msg = e.to_string();
                assert!(msg.contains("cumsum") && msg.contains("autograd"), "{msg}");
            }
            other => panic!("{dtype}: expected a dtype error, got {other:?}"),
        }
    }
    // Without grad mode, or of a variable that does not require grad, it
    // computes: torch.no_grad(): x.cumsum(0, dtype=torch.int64) = [1, 3].
    let c = no_grad(|| x.cumsum(0, Some(DType::I64))).unwrap();
    assert_eq!(c.data().to_vec::<i64>().unwrap(), vec![1, 3]);
    assert!(!c.requires_grad());
    let c = x.detach().cumsum(0, Some(DType::I64)).unwrap();
    assert_eq!(c.data().to_vec::<i64>().unwrap(), vec![1, 3]);
    // A float dtype still back-propagates
    // (x.cumsum(0, dtype=torch.float64).sum().backward(): [2, 1]).
    x.cumsum(0, Some(DType::F64))
        .unwrap()
        .sum(None, false)
        .unwrap()
        .backward()
        .unwrap();
    assert_eq!(grad(&x), vec![2.0, 1.0]);
}

// ------------------------------------------------------------------- zero_

#[test]
fn zero_on_a_non_leaf_passes_zeros_back_as_pytorch() {
    // y = x * 3; y.zero_(); y.sum().backward(): y.grad_fn is ZeroBackward0
    // and x.grad is tensor([0., 0.]) (fill_'s gradient is zeros), not None.
    let x = param(&[1.0, 2.0]);
    let y = x.mul(3.0).unwrap();
    y.zero_().unwrap();
    y.sum(None, false).unwrap().backward().unwrap();
    assert_eq!(grad(&x), vec![0.0, 0.0]);
    // The zero gradient matters: AdamW's decoupled weight decay applies to
    // a parameter with a zero gradient, not to one without any
    // (torch.optim.AdamW([w], lr=0.1, weight_decay=0.5) after the same
    // backward: w = [0.95, 1.9]).
    let w = param(&[1.0, 2.0]);
    let mut opt = strata_autograd::AdamW::new(vec![w.clone()])
        .with_lr(0.1)
        .unwrap()
        .with_weight_decay(0.5)
        .unwrap();
    let y = w.mul(3.0).unwrap();
    y.zero_().unwrap();
    y.sum(None, false).unwrap().backward().unwrap();
    strata_autograd::Optimizer::step(&mut opt).unwrap();
    let got = w.data().to_vec::<f32>().unwrap();
    assert!(
        (got[0] - 0.95).abs() < 1e-6 && (got[1] - 1.9).abs() < 1e-6,
        "{got:?}"
    );
}

#[test]
fn zero_on_a_saved_output_is_refused_at_backward_as_pytorch() {
    // y = x.exp(); y.zero_(); y.sum().backward(): ExpBackward saved y,
    // which zero_ modified: "one of the variables needed for gradient
    // computation has been modified by an inplace operation ... is at
    // version 1; expected version 0". No gradient is written.
    let x = param(&[1.0, 2.0]);
    let y = x.exp().unwrap();
    y.zero_().unwrap();
    assert!(matches!(
        y.sum(None, false).unwrap().backward(),
        Err(AutogradError::SavedTensorModified { .. })
    ));
    assert!(x.grad().is_none());
}

// --------------------------------------------------------------------- pow

#[test]
fn pow_exponent_gradient_takes_the_log_in_the_promoted_dtype() {
    // x f16 [2], y f32 [3]: x.pow(y) is f32 [8]; PyTorch's
    // pow_backward_exponent converts x to the promoted dtype before the log:
    // y.grad = 8 * ln(2) in f32 = 5.545177 (the log in f16, 0.6929, gave
    // 5.546875); x.grad = 3 * 2^2 = 12 in f16.
    for (xd, yd) in [(DType::F16, DType::F32), (DType::BF16, DType::F64)] {
        let x = Var::parameter(
            Tensor::from_slice(&[2.0f32], &[1], CPU)
                .unwrap()
                .to_dtype(xd)
                .unwrap(),
        )
        .unwrap();
        let y = Var::parameter(
            Tensor::from_slice(&[3.0f32], &[1], CPU)
                .unwrap()
                .to_dtype(yd)
                .unwrap(),
        )
        .unwrap();
        x.pow(&y)
            .unwrap()
            .sum(None, false)
            .unwrap()
            .backward()
            .unwrap();
        let gy = y
            .grad()
            .unwrap()
            .to_dtype(DType::F64)
            .unwrap()
            .to_vec::<f64>()
            .unwrap()[0];
        let want = 8.0 * 2f64.ln();
        let tol = if yd == DType::F32 { 1e-6 } else { 1e-12 };
        assert!(
            (gy - want).abs() <= tol * want,
            "{xd}^{yd}: y.grad {gy}, want {want}"
        );
        let gx = x.grad().unwrap();
        assert_eq!(gx.dtype(), xd);
        assert_eq!(
            gx.to_dtype(DType::F64).unwrap().to_vec::<f64>().unwrap(),
            vec![12.0]
        );
    }
}
