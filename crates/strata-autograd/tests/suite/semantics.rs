//! Autograd semantics: leaves, accumulation, detach, no_grad, errors as in
//! PyTorch, and the optimizers' updates.

use strata_autograd::{no_grad, Adam, AutogradError, NoGradGuard, Optimizer, Sgd, Var};
use strata_tensor::{DType, Device, Tensor};

fn var(v: &[f64]) -> Var {
    Var::new(Tensor::from_slice(v, &[v.len()], Device::Cpu).unwrap())
}

fn param(v: &[f64]) -> Var {
    let p = var(v);
    p.requires_grad_(true).unwrap();
    p
}

fn grad(v: &Var) -> Vec<f64> {
    v.grad().expect("a gradient").to_vec::<f64>().unwrap()
}

#[test]
fn leaves_and_requires_grad() {
    let x = param(&[1.0, 2.0]);
    let c = var(&[3.0, 4.0]);
    assert!(x.is_leaf() && x.requires_grad() && x.grad_fn_name().is_none());
    assert!(c.is_leaf() && !c.requires_grad());
    let y = x.mul(&c).unwrap();
    assert!(!y.is_leaf() && y.requires_grad());
    assert_eq!(y.grad_fn_name(), Some("MulBackward"));
    let z = c.mul(&c).unwrap();
    assert!(
        z.is_leaf() && !z.requires_grad(),
        "no input requires grad: nothing recorded"
    );
    assert!(matches!(
        y.requires_grad_(false),
        Err(AutogradError::RequiresGrad { .. })
    ));
    let ints = Var::new(Tensor::from_slice(&[1i64, 2], &[2], Device::Cpu).unwrap());
    assert!(matches!(
        ints.requires_grad_(true),
        Err(AutogradError::RequiresGrad { .. })
    ));
    // Gradients only reach leaves that require grad.
    y.sum(None, false).unwrap().backward().unwrap();
    assert_eq!(grad(&x), vec![3.0, 4.0]);
    assert!(c.grad().is_none() && y.grad().is_none());
}

#[test]
fn gradients_accumulate_across_backward_calls() {
    let x = param(&[1.0, -2.0]);
    for step in 1..=3 {
        x.mul(&x)
            .unwrap()
            .sum(None, false)
            .unwrap()
            .backward()
            .unwrap();
        let expect: Vec<f64> = [2.0, -4.0].iter().map(|g| g * step as f64).collect();
        assert_eq!(grad(&x), expect);
    }
    x.zero_grad(false).unwrap();
    assert_eq!(grad(&x), vec![0.0, 0.0]);
    x.zero_grad(true).unwrap();
    assert!(x.grad().is_none());
}

#[test]
fn first_gradient_does_not_alias_others() {
    // add passes the same gradient tensor to both inputs; the leaves' .grad
    // must not share storage, or accumulating into one would change the other.
    let (a, b) = (param(&[1.0]), param(&[2.0]));
    let s = a.add(&b).unwrap().sum(None, false).unwrap();
    s.backward().unwrap();
    assert!(!a.grad().unwrap().same_storage(&b.grad().unwrap()));
    a.mul(5.0)
        .unwrap()
        .sum(None, false)
        .unwrap()
        .backward()
        .unwrap();
    assert_eq!((grad(&a), grad(&b)), (vec![6.0], vec![1.0]));
}

#[test]
fn backward_errors() {
    let c = var(&[1.0, 2.0]);
    assert!(matches!(
        c.sum(None, false).unwrap().backward(),
        Err(AutogradError::NoGradFn)
    ));
    let x = param(&[1.0, 2.0]);
    let y = x.mul(2.0).unwrap();
    assert!(matches!(
        y.backward(),
        Err(AutogradError::NonScalarOutput { .. })
    ));
    let wrong = Tensor::ones(&[3], DType::F64, Device::Cpu).unwrap();
    assert!(matches!(
        y.backward_with(Some(&wrong), false),
        Err(AutogradError::GradShape { .. })
    ));
    let g = Tensor::from_slice(&[1.0f64, 10.0], &[2], Device::Cpu).unwrap();
    y.backward_with(Some(&g), false).unwrap();
    assert_eq!(grad(&x), vec![2.0, 20.0]);
    let err = y.backward_with(Some(&g), false).unwrap_err();
    assert!(matches!(
        err,
        AutogradError::GraphReleased { op: "MulBackward" }
    ));
    assert!(err.to_string().contains("retain_graph"));
}

#[test]
fn detach_shares_storage_without_history() {
    let x = param(&[1.0, 2.0]);
    let y = x.exp().unwrap();
    let d = y.detach();
    assert!(d.data().same_storage(y.data()));
    assert!(d.is_leaf() && !d.requires_grad());
    // No gradient flows through the detached branch.
    let loss = x.mul(&d).unwrap().sum(None, false).unwrap();
    loss.backward().unwrap();
    let e: Vec<f64> = [1.0f64, 2.0].iter().map(|v| v.exp()).collect();
    assert_eq!(grad(&x), e);
}

#[test]
fn no_grad_records_nothing() {
    let x = param(&[1.0, 2.0]);
    let y = no_grad(|| x.exp().unwrap().mul(&x).unwrap());
    assert!(!y.requires_grad() && y.is_leaf() && y.saved_bytes() == 0);
    {
        let _g = NoGradGuard::new();
        let z = x.relu().unwrap();
        assert!(!z.requires_grad());
        // In-place updates of a leaf that requires grad are allowed here.
        x.sub_(0.5).unwrap();
    }
    assert_eq!(x.to_vec::<f64>().unwrap(), vec![0.5, 1.5]);
    assert!(x.relu().unwrap().requires_grad());
}

#[test]
fn inplace_on_leaf_that_requires_grad_is_an_error() {
    let x = param(&[1.0, 2.0]);
    let v0 = x.version();
    assert!(matches!(
        x.add_(1.0),
        Err(AutogradError::InPlaceOnLeaf { op: "add_" })
    ));
    assert!(matches!(
        x.zero_(),
        Err(AutogradError::InPlaceOnLeaf { .. })
    ));
    assert_eq!(x.to_vec::<f64>().unwrap(), vec![1.0, 2.0]);
    assert_eq!(x.version(), v0, "a refused op changes nothing");
    // So does a view of it (PyTorch: "a view of a leaf Variable that
    // requires grad is being used in an in-place operation").
    let v = x.reshape(&[2, 1]).unwrap();
    assert!(matches!(
        v.mul_(2.0),
        Err(AutogradError::InPlaceOnLeaf { op: "mul_" })
    ));
    assert_eq!(x.to_vec::<f64>().unwrap(), vec![1.0, 2.0]);
}

#[test]
fn modifying_a_saved_tensor_is_caught_at_backward() {
    // A saved input that does not require grad, changed through another handle.
    let x = param(&[1.0, 2.0]);
    let w = var(&[3.0, 4.0]);
    let loss = x.mul(&w).unwrap().sum(None, false).unwrap();
    w.mul_(2.0).unwrap();
    let err = loss.backward().unwrap_err();
    assert!(
        matches!(
            err,
            AutogradError::SavedTensorModified {
                op: "MulBackward",
                saved: 0,
                current: 1,
                ..
            }
        ),
        "{err}"
    );
    // A saved output changed by an in-place op on the non-leaf itself.
    let y = x.exp().unwrap();
    y.add_(1.0).unwrap();
    assert_eq!(y.grad_fn_name(), Some("AddBackward_"));
    let err = y.sum(None, false).unwrap().backward().unwrap_err();
    assert!(
        matches!(
            err,
            AutogradError::SavedTensorModified {
                op: "ExpBackward",
                ..
            }
        ),
        "{err}"
    );
    // Through .data() (not recorded) as well.
    let z = x.relu().unwrap();
    let loss = z.sum(None, false).unwrap();
    z.data().fill_(0.0).unwrap();
    assert!(matches!(
        loss.backward(),
        Err(AutogradError::SavedTensorModified { .. })
    ));
}

#[test]
fn inplace_on_non_leaf_rebases_history() {
    let x = param(&[1.0, 2.0]);
    let y = x.mul(2.0).unwrap();
    y.add_(&x).unwrap().mul_(3.0).unwrap();
    assert_eq!(y.to_vec::<f64>().unwrap(), vec![9.0, 18.0]);
    y.sum(None, false).unwrap().backward().unwrap();
    assert_eq!(grad(&x), vec![9.0, 9.0]);
    // A leaf that does not require grad becomes part of the graph.
    let acc = var(&[0.0, 0.0]);
    let p = param(&[1.0, 1.0]);
    acc.add_(&p).unwrap();
    assert!(acc.requires_grad() && !acc.is_leaf());
    acc.mul(&acc)
        .unwrap()
        .sum(None, false)
        .unwrap()
        .backward()
        .unwrap();
    assert_eq!(grad(&p), vec![2.0, 2.0]);
}

#[test]
fn item_and_errors_from_tensors() {
    let x = param(&[1.5, 2.5]);
    let m = x.mean(None, false).unwrap();
    assert_eq!(m.item::<f64>().unwrap(), 2.0);
    assert!(x.item::<f64>().is_err());
    let bad = param(&[1.0, 2.0, 3.0]);
    assert!(matches!(x.add(&bad), Err(AutogradError::Tensor(_))));
    assert!(x.matmul(&param(&[1.0])).is_err());
}

#[test]
fn sgd_with_momentum_matches_the_formula() {
    // loss = sum(p): g = 1 every step. buf1 = 1, p = 1 - 0.1; buf2 = 0.9 + 1, p -= 0.19.
    let p = param(&[1.0]);
    let mut opt = Sgd::new(vec![p.clone()], 0.1, 0.9).unwrap();
    let mut values = vec![];
    for _ in 0..2 {
        opt.zero_grad(true).unwrap();
        p.sum(None, false).unwrap().backward().unwrap();
        opt.step().unwrap();
        values.push(p.item::<f64>().unwrap());
    }
    assert!(
        (values[0] - 0.9).abs() < 1e-12 && (values[1] - 0.71).abs() < 1e-12,
        "{values:?}"
    );
    assert!(opt.state_bytes() > 0);
    assert!(matches!(
        Sgd::new(vec![], -1.0, 0.0),
        Err(AutogradError::Hyperparameter { .. })
    ));
}

#[test]
fn adam_first_step_is_lr_times_sign_and_converges() {
    let p = param(&[1.0, -2.0, 0.5]);
    let mut opt = Adam::new(vec![p.clone()], 0.1).unwrap();
    p.mul(&p)
        .unwrap()
        .sum(None, false)
        .unwrap()
        .backward()
        .unwrap();
    opt.step().unwrap();
    let v = p.to_vec::<f64>().unwrap();
    for (a, b) in v.iter().zip([0.9, -1.9, 0.4]) {
        assert!((a - b).abs() < 1e-6, "{v:?}");
    }
    for _ in 0..300 {
        opt.zero_grad(false).unwrap();
        p.mul(&p)
            .unwrap()
            .sum(None, false)
            .unwrap()
            .backward()
            .unwrap();
        opt.step().unwrap();
    }
    assert!(p.to_vec::<f64>().unwrap().iter().all(|v| v.abs() < 0.05));
    assert!(Adam::new(vec![p.clone()], 0.1)
        .unwrap()
        .with_betas(1.0, 0.9)
        .is_err());
}

#[test]
fn long_chains_drop_without_overflowing_the_stack() {
    let x = param(&[1.0]);
    let mut h = x.clone();
    for _ in 0..100_000 {
        h = h.add(0.0).unwrap();
    }
    drop(h);
}

#[test]
fn reductions_of_0d_variables() {
    let x = Var::parameter(Tensor::scalar(3.0, DType::F64, Device::Cpu).unwrap()).unwrap();
    let s = x
        .sum(Some(&[0]), false)
        .unwrap()
        .mean(Some(&[-1]), true)
        .unwrap();
    assert_eq!(s.shape(), &[] as &[usize]);
    s.mul(&x).unwrap().backward().unwrap();
    assert_eq!(x.grad().unwrap().item::<f64>().unwrap(), 6.0);
}

#[test]
fn vars_are_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<Var>();
    check::<Sgd>();
    check::<Adam>();
    // A variable built on one thread, differentiated on another.
    let x = param(&[2.0]);
    let y = x.mul(&x).unwrap().sum(None, false).unwrap();
    std::thread::spawn(move || y.backward().unwrap())
        .join()
        .unwrap();
    assert_eq!(grad(&x), vec![4.0]);
}

#[test]
fn gradients_keep_the_dtype_of_their_input() {
    // f32 * f64 promotes to f64; the f32 leaf still gets an f32 gradient.
    let a = Var::parameter(Tensor::from_slice(&[1.0f32, 2.0], &[2], Device::Cpu).unwrap()).unwrap();
    let b = param(&[3.0, 4.0]);
    let y = a.mul(&b).unwrap();
    assert_eq!(y.dtype(), DType::F64);
    y.sum(None, false).unwrap().backward().unwrap();
    assert_eq!(a.grad().unwrap().dtype(), DType::F32);
    assert_eq!(a.grad().unwrap().to_vec::<f32>().unwrap(), vec![3.0, 4.0]);
    assert_eq!(grad(&b), vec![1.0, 2.0]);
}

#[test]
fn zero_on_a_non_leaf_stops_the_gradient() {
    let x = param(&[1.0, 2.0]);
    let y = x.mul(3.0).unwrap();
    let z = y.mul(&x).unwrap(); // uses y's value before zeroing
    y.zero_().unwrap();
    assert_eq!(y.grad_fn_name(), Some("ZeroBackward_"));
    // MulBackward saved y, which zero_ modified in place.
    assert!(matches!(
        z.sum(None, false).unwrap().backward(),
        Err(AutogradError::SavedTensorModified { .. })
    ));
    y.add(&x)
        .unwrap()
        .sum(None, false)
        .unwrap()
        .backward()
        .unwrap();
    assert_eq!(
        grad(&x),
        vec![1.0, 1.0],
        "only the direct path carries gradient"
    );
}

/// PyTorch 2.15 on the CPU: `matmul` folds the batch into one `mm`/`mv`
/// when the operand with fewer dims requires a gradient, and `mm` checks the
/// dtypes even for an empty product; otherwise an empty batched product of
/// mixed dtypes is an empty tensor of the second operand's dtype.
#[test]
fn matmul_of_empty_mixed_dtypes_folds_as_pytorch_does_with_gradients() {
    let z = |shape: &[usize], d: DType| Tensor::zeros(shape, d, Device::Cpu).unwrap();
    let leaf = |t: Tensor, grad: bool| {
        let v = Var::new(t);
        v.requires_grad_(grad).unwrap();
        v
    };
    let dtype_error = |r: strata_autograd::Result<Var>| {
        matches!(
            r,
            Err(AutogradError::Tensor(
                strata_tensor::TensorError::DType { .. }
            ))
        )
    };
    // A batch that does not collapse: bmm without gradients.
    let a = || z(&[3, 2, 4], DType::F32).permute(&[1, 0, 2]).unwrap();
    let b = || z(&[4, 0], DType::F16);
    let r = leaf(a(), false).matmul(&leaf(b(), false)).unwrap();
    assert_eq!((r.shape().to_vec(), r.dtype()), (vec![2, 3, 0], DType::F16));
    let r = leaf(a(), true).matmul(&leaf(b(), false)).unwrap();
    assert_eq!(r.dtype(), DType::F16);
    assert!(dtype_error(leaf(a(), false).matmul(&leaf(b(), true))));
    // The matrix on the left: folded when it requires a gradient.
    let (m, t) = (|| z(&[0, 3], DType::F32), || z(&[2, 3, 4], DType::F16));
    assert!(dtype_error(leaf(m(), true).matmul(&leaf(t(), false))));
    let r = leaf(m(), false).matmul(&leaf(t(), true)).unwrap();
    assert_eq!((r.shape().to_vec(), r.dtype()), (vec![2, 0, 4], DType::F16));
}

/// A leaf's gradient through a cast comes back in the leaf's dtype, equal to
/// the same cast applied to a non-leaf (whose node converts it), whether it
/// is the first gradient of `.grad`, one added to it, or one added to a
/// gradient of the leaf's own dtype from another use in the same pass.
#[test]
fn gradients_through_casts_reach_leaves_in_their_dtype() {
    // The first four are bf16 values (the expected gradient is exact); 0.1
    // is not (the two paths must still agree).
    let v = [0.125, -1.75, 3.5, 250.0, 0.1];
    let w = param(&v);
    let u = param(&v);
    let loss = |x: &Var, through_node: bool| -> Var {
        let x = if through_node {
            x.mul(1.0).unwrap()
        } else {
            x.clone()
        };
        let h = x.to_dtype(DType::BF16).unwrap();
        let cast = h.mul(&h).unwrap().to_dtype(DType::F64).unwrap();
        cast.sum(None, false)
            .unwrap()
            .add(&x.mul(0.5).unwrap().sum(None, false).unwrap())
            .unwrap()
    };
    for round in 1..=2 {
        loss(&w, false).backward().unwrap();
        loss(&u, true).backward().unwrap();
        let (gw, gu) = (w.grad().unwrap(), u.grad().unwrap());
        assert_eq!(gw.dtype(), DType::F64);
        assert_eq!(gw.to_vec::<f64>().unwrap(), gu.to_vec::<f64>().unwrap());
        // d/dx (x² + x / 2) = 2x + 1/2, exact for bf16 values, per round.
        let expect: Vec<f64> = v[..4]
            .iter()
            .map(|&x| round as f64 * (2.0 * x + 0.5))
            .collect();
        assert_eq!(grad(&w)[..4], expect, "round {round}");
    }
}
