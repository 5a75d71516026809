//! Session 38: disagreements with PyTorch found by the gradient oracle's new
//! ops and a hostile sweep of the autograd API. Every expected value is
//! PyTorch 2.15's (CPU), computed in PyTorch, with the Python beside each
//! test.

use strata_autograd::{checkpoint, inference_mode, no_grad, AutogradError, Var};
use strata_tensor::{DType, Device, Tensor};

const CPU: Device = Device::Cpu;
const NAN: f32 = f32::NAN;
const INF: f32 = f32::INFINITY;

fn t(v: &[f32], shape: &[usize]) -> Tensor {
    Tensor::from_slice(v, shape, CPU).unwrap()
}

fn param(v: &[f32], shape: &[usize]) -> Var {
    Var::parameter(t(v, shape)).unwrap()
}

fn values(v: &Var) -> Vec<f32> {
    v.data().to_vec::<f32>().unwrap()
}

fn grad(v: &Var) -> Vec<f32> {
    v.grad().expect("a gradient").to_vec::<f32>().unwrap()
}

/// Element-wise equality with NaN == NaN (and -0.0 == 0.0).
fn same(got: &[f32], want: &[f32], what: &str) {
    let ok = got.len() == want.len()
        && got
            .iter()
            .zip(want)
            .all(|(a, b)| (a.is_nan() && b.is_nan()) || a == b);
    assert!(ok, "{what}: strata {got:?}, PyTorch {want:?}");
}

/// `norm` with a NaN order: PyTorch computes it (strata refused it with a
/// typed error). Over a single element (every reduced dim of size 1, or a
/// 0-d input) `linalg_vector_norm` returns `|x|` for every order; over none,
/// 0; otherwise `(sum |x|^nan)^(1/nan)`, NaN. The gradient is
/// `norm_backward`'s last branch, `x |x|^(p-2) * (g / n^(p-1))` with 0 where
/// the norm is 0: 1 only where `|x| = 1` over one element.
///
/// ```python
/// nan = float('nan')
/// def run(v, **kw):
///     x = torch.tensor(v, requires_grad=True)
///     n = torch.linalg.vector_norm(x, ord=nan, **kw); n.sum().backward()
///     return n, x.grad
/// run([3., -4., 0., 0.])         # nan, [nan, nan, nan, nan]
/// run([1., -1.])                 # nan, [nan, nan]
/// run([1.])                      # 1., [1.]
/// run([0.])                      # 0., [nan]
/// run([2.])                      # 2., [nan]
/// run([])                        # 0., []
/// run(1.)                        # 1., 1.
/// run([[2.], [-3.]], dim=1)      # [2., 3.], [[nan], [nan]]
/// run([[1., -1.], [3., 0.]], dim=1)  # [nan, nan], [[nan, nan], [nan, nan]]
/// torch.linalg.vector_norm(torch.zeros(2, 0), ord=nan, dim=1)  # [0., 0.]
/// torch.norm(torch.tensor([[2.], [-3.]]), p=nan, dim=1)        # [2., 3.]
/// ```
#[test]
fn norm_of_a_nan_order_is_pytorchs() {
    let run = |v: &[f32], shape: &[usize], dims: Option<&[i64]>| {
        let x = param(v, shape);
        let n = x.norm(f64::NAN, dims, false).unwrap();
        n.sum(None, false).unwrap().backward().unwrap();
        (values(&n), grad(&x))
    };
    /// Input, shape, dims, PyTorch's norm, PyTorch's gradient.
    type Case<'a> = (
        &'a [f32],
        &'a [usize],
        Option<&'a [i64]>,
        &'a [f32],
        &'a [f32],
    );
    let cases: [Case; 9] = [
        (&[3.0, -4.0, 0.0, 0.0], &[4], None, &[NAN], &[NAN; 4]),
        (&[1.0, -1.0], &[2], None, &[NAN], &[NAN; 2]),
        (&[1.0], &[1], None, &[1.0], &[1.0]),
        (&[0.0], &[1], None, &[0.0], &[NAN]),
        (&[2.0], &[1], None, &[2.0], &[NAN]),
        (&[], &[0], None, &[0.0], &[]),
        (&[1.0], &[], None, &[1.0], &[1.0]),
        (&[2.0, -3.0], &[2, 1], Some(&[1]), &[2.0, 3.0], &[NAN, NAN]),
        (
            &[1.0, -1.0, 3.0, 0.0],
            &[2, 2],
            Some(&[1]),
            &[NAN, NAN],
            &[NAN; 4],
        ),
    ];
    for (v, shape, dims, want_n, want_g) in cases {
        let (n, g) = run(v, shape, dims);
        let what = format!("{v:?} {shape:?} dims {dims:?}");
        same(&n, want_n, &format!("{what}: norm"));
        same(&g, want_g, &format!("{what}: grad"));
    }
    let empty_rows = Var::new(Tensor::zeros(&[2, 0], DType::F32, CPU).unwrap());
    let n = empty_rows.norm(f64::NAN, Some(&[1]), false).unwrap();
    assert_eq!(values(&n), vec![0.0, 0.0]);
    let kept = param(&[2.0, -3.0], &[2, 1])
        .norm(f64::NAN, Some(&[1]), true)
        .unwrap();
    assert_eq!(
        (kept.shape().to_vec(), values(&kept)),
        (vec![2, 1], vec![2.0, 3.0])
    );
}

/// Over a single element PyTorch's `linalg_vector_norm` returns `|x|`
/// exactly for every order (no `pow` round trip): strata computed
/// `(|x|^p)^(1/p)`, an ulp off for some values.
///
/// ```python
/// x = torch.tensor([[1.1], [2.3], [-0.7], [3.3]])
/// for p in (3., 0.5, 1.5, -1., 7.):
///     assert torch.equal(torch.linalg.vector_norm(x, ord=p, dim=1), x.abs().squeeze(1))
/// ```
#[test]
fn norm_over_one_element_is_the_absolute_value_for_every_order() {
    let v = [1.1f32, 2.3, -0.7, 3.3];
    let x = Var::new(t(&v, &[4, 1]));
    let abs: Vec<f32> = v.iter().map(|a| a.abs()).collect();
    for p in [3.0, 0.5, 1.5, -1.0, 7.0] {
        let n = x.norm(p, Some(&[1]), false).unwrap();
        assert_eq!(values(&n), abs, "p = {p}");
    }
}

/// `max()`/`min()` of every element on the CPU keep PyTorch's CPU branch of
/// `evenly_distribute_backward` (`zeros.masked_fill_(mask, g / count)`): 0
/// off the mask even for a NaN or infinite upstream gradient (the GPU
/// follows PyTorch's CUDA branch instead: `tests/cuda.rs`). `amax` has one
/// formula on every device, `g / count * mask`: NaN everywhere here.
///
/// ```python
/// def g(v, mx, up):
///     x = torch.tensor(v, requires_grad=True)
///     ((x.max() if mx else x.min()) * up).backward(); return x.grad
/// g([3., 1., 3., 2.], True, nan)    # [nan, 0., nan, 0.]
/// g([3., 1., 3., 2.], True, inf)    # [inf, 0., inf, 0.]
/// g([3., 1., 3., 2.], False, -inf)  # [0., -inf, 0., 0.]
/// g([1., nan, 4., nan], False, inf) # [0., inf, 0., inf]
/// x = torch.tensor([3., 1., 3., 2.], requires_grad=True)
/// (x.amax() * nan).backward()       # x.grad: [nan, nan, nan, nan]
/// ```
#[test]
fn max_min_of_every_element_on_the_cpu_keep_pytorchs_cpu_formula() {
    let g = |v: &[f32], max: bool, up: f32| {
        let x = param(v, &[v.len()]);
        let r = if max { x.max() } else { x.min() }.unwrap();
        r.mul(up).unwrap().backward().unwrap();
        grad(&x)
    };
    let x = [3.0, 1.0, 3.0, 2.0];
    same(&g(&x, true, NAN), &[NAN, 0.0, NAN, 0.0], "max * nan");
    same(&g(&x, true, INF), &[INF, 0.0, INF, 0.0], "max * inf");
    same(&g(&x, false, -INF), &[0.0, -INF, 0.0, 0.0], "min * -inf");
    same(
        &g(&[1.0, NAN, 4.0, NAN], false, INF),
        &[0.0, INF, 0.0, INF],
        "min of NaNs",
    );
    let a = param(&x, &[4]);
    a.amax(None, false)
        .unwrap()
        .mul(NAN)
        .unwrap()
        .backward()
        .unwrap();
    same(&grad(&a), &[NAN; 4], "amax * nan");
}

/// A second backward without `retain_graph` fails in PyTorch only where a
/// node reached needs what it saved (released by the first): a graph of
/// `add`, `sum` and views saves nothing and back-propagates again
/// (accumulating), while `x * 2` saves the scalar 2 (a wrapped tensor) and
/// `exp` its result. strata refused every second backward.
///
/// ```python
/// x = torch.ones(3, requires_grad=True); y = (x + 1).sum()
/// y.backward(); y.backward(); x.grad        # [2., 2., 2.]
/// x = torch.ones(2, 3, requires_grad=True); y = x.reshape(-1).sum()
/// y.backward(); y.backward(); x.grad        # 2s
/// x = torch.ones(3, requires_grad=True); y = (x * 2).sum()
/// y.backward(); y.backward()                # RuntimeError: Trying to backward through the graph a second time
/// x = torch.ones(3, requires_grad=True); y = x.exp().sum()
/// y.backward(); y.backward()                # RuntimeError (the same)
/// y = torch.ones(3, requires_grad=True) * 1; z = y.clone(); ...
/// ```
#[test]
fn a_second_backward_fails_only_where_a_node_needs_what_it_saved() {
    let x = param(&[1.0; 3], &[3]);
    let y = x.add(1.0).unwrap().sum(None, false).unwrap();
    y.backward().unwrap();
    y.backward().unwrap();
    assert_eq!(grad(&x), vec![2.0; 3]);

    let x = param(&[1.0; 6], &[2, 3]);
    let y = x.reshape(&[-1]).unwrap().sum(None, false).unwrap();
    y.backward().unwrap();
    y.backward().unwrap();
    assert_eq!(grad(&x), vec![2.0; 6]);

    let x = param(&[1.0; 3], &[3]);
    let w = param(&[1.0; 3], &[3]);
    let y = x
        .add(&w)
        .unwrap()
        .sub(&w)
        .unwrap()
        .sum(None, false)
        .unwrap();
    y.backward().unwrap();
    y.backward().unwrap();
    assert_eq!((grad(&x), grad(&w)), (vec![2.0; 3], vec![0.0; 3]));

    for (name, make) in [
        ("mul by a scalar", (|x: &Var| x.mul(2.0)) as fn(&Var) -> _),
        ("div by a scalar", |x: &Var| x.div(2.0)),
        ("exp", |x: &Var| x.exp()),
    ] {
        let x = param(&[1.0; 3], &[3]);
        let y = make(&x).unwrap().sum(None, false).unwrap();
        y.backward().unwrap();
        let err = y.backward().unwrap_err();
        assert!(
            matches!(err, AutogradError::GraphReleased { .. }),
            "{name}: {err:?}"
        );
    }
    // In place by a scalar saves it too (MulBackward0).
    let x = param(&[1.0; 3], &[3]);
    let y = x.add(0.0).unwrap();
    y.mul_(3.0).unwrap();
    let s = y.sum(None, false).unwrap();
    s.backward().unwrap();
    assert!(matches!(
        s.backward(),
        Err(AutogradError::GraphReleased { .. })
    ));
}

/// `backward()` without a gradient: PyTorch accepts any output of one
/// element (`numel() == 1`, not only 0-d) and refuses an empty one.
///
/// ```python
/// x = torch.ones(1, 1, requires_grad=True); (x * 3).backward(); x.grad  # [[3.]]
/// x = torch.ones(0, requires_grad=True); (x * 3).backward()  # RuntimeError: grad can be implicitly created only for scalar outputs
/// ```
#[test]
fn an_implicit_gradient_needs_exactly_one_element() {
    let x = param(&[1.0], &[1, 1]);
    x.mul(3.0).unwrap().backward().unwrap();
    assert_eq!(grad(&x), vec![3.0]);
    let e = param(&[], &[0]);
    assert!(matches!(
        e.mul(3.0).unwrap().backward(),
        Err(AutogradError::NonScalarOutput { .. })
    ));
}

/// Only floating-point variables can require grad (an integer or bool one
/// is a typed error; turning it off is fine); gradients of another dtype
/// (integer, bool, f64) are converted to the output's, as PyTorch's engine
/// does, and a gradient of another shape is refused, even one that would
/// broadcast or has the same single element.
///
/// ```python
/// torch.tensor([1, 2]).requires_grad_(True)      # RuntimeError: only Tensors of floating point dtype can require gradients
/// torch.tensor([True]).requires_grad_(True)      # the same
/// torch.tensor([1, 2]).requires_grad_(False)     # fine
/// x = torch.ones(2, requires_grad=True); (x * 3).backward(torch.tensor([2, 3]))   # x.grad [6., 9.]
/// x = torch.ones(2, requires_grad=True); (x * 3).backward(torch.tensor([True, False]))  # [3., 0.]
/// x = torch.ones((), requires_grad=True); (x * 3).backward(torch.tensor([2.]))  # RuntimeError: Mismatch in shape
/// x = torch.ones(2, requires_grad=True); (x * 3).backward(torch.tensor([2.]))   # RuntimeError: Mismatch in shape
/// ```
#[test]
fn requires_grad_and_gradient_dtypes_and_shapes_are_pytorchs() {
    let i = Var::new(Tensor::from_slice(&[1i64, 2], &[2], CPU).unwrap());
    assert!(matches!(
        i.requires_grad_(true),
        Err(AutogradError::RequiresGrad { .. })
    ));
    assert!(i.requires_grad_(false).is_ok());
    let b = Var::new(Tensor::from_slice(&[true], &[1], CPU).unwrap());
    assert!(matches!(
        b.requires_grad_(true),
        Err(AutogradError::RequiresGrad { .. })
    ));
    assert!(Var::parameter(Tensor::from_slice(&[1i32], &[1], CPU).unwrap()).is_err());

    let x = param(&[1.0, 1.0], &[2]);
    let g = Tensor::from_slice(&[2i64, 3], &[2], CPU).unwrap();
    x.mul(3.0).unwrap().backward_with(Some(&g), false).unwrap();
    assert_eq!(grad(&x), vec![6.0, 9.0]);
    let x = param(&[1.0, 1.0], &[2]);
    let g = Tensor::from_slice(&[true, false], &[2], CPU).unwrap();
    x.mul(3.0).unwrap().backward_with(Some(&g), false).unwrap();
    assert_eq!(grad(&x), vec![3.0, 0.0]);

    let s = param(&[1.0], &[]);
    let r = s
        .mul(3.0)
        .unwrap()
        .backward_with(Some(&t(&[2.0], &[1])), false);
    assert!(matches!(r, Err(AutogradError::GradShape { .. })), "{r:?}");
    let x = param(&[1.0, 1.0], &[2]);
    let r = x
        .mul(3.0)
        .unwrap()
        .backward_with(Some(&t(&[2.0], &[1])), false);
    assert!(matches!(r, Err(AutogradError::GradShape { .. })), "{r:?}");
}

/// `checkpoint(f, x)` where `f` returns its input unchanged: PyTorch's
/// non-reentrant checkpoint returns that very tensor (`y is x`): a leaf
/// stays a leaf (an in-place op on it is refused) with no `grad_fn`, and an
/// input that does not require grad comes back as it is. strata recorded a
/// `CheckpointBackward` node over the input's storage, so `y` was a
/// non-leaf whose in-place ops silently changed the leaf `x`.
///
/// ```python
/// from torch.utils.checkpoint import checkpoint
/// x = torch.tensor([1., 2.], requires_grad=True)
/// y = checkpoint(lambda t: t, x, use_reentrant=False)
/// y is x, y.is_leaf, y.grad_fn          # True, True, None
/// y.add_(1)                             # RuntimeError: a leaf Variable that requires grad is being used in an in-place operation.
/// y.sum().backward(); x.grad            # [1., 1.]
/// b = torch.tensor([1., 2.], requires_grad=True) * 3
/// checkpoint(lambda t: t, b, use_reentrant=False) is b   # True
/// c = torch.tensor([1., 2.])
/// checkpoint(lambda t: t, c, use_reentrant=False) is c   # True (requires_grad False)
/// ```
#[test]
fn checkpoint_of_the_identity_returns_its_input() {
    let x = param(&[1.0, 2.0], &[2]);
    let y = checkpoint(|ts: &[Var]| Ok(ts[0].clone()), std::slice::from_ref(&x)).unwrap();
    assert!(y.is_leaf() && y.requires_grad());
    assert_eq!(y.grad_fn_name(), None);
    assert!(matches!(
        y.add_(1.0),
        Err(AutogradError::InPlaceOnLeaf { .. })
    ));
    assert_eq!(values(&x), vec![1.0, 2.0]);
    y.sum(None, false).unwrap().backward().unwrap();
    assert_eq!(grad(&x), vec![1.0, 1.0]);

    let a = param(&[1.0, 2.0], &[2]);
    let b = a.mul(3.0).unwrap();
    let y = checkpoint(|ts: &[Var]| Ok(ts[0].clone()), std::slice::from_ref(&b)).unwrap();
    assert_eq!(y.grad_fn_name(), b.grad_fn_name());
    y.sum(None, false).unwrap().backward().unwrap();
    assert_eq!(grad(&a), vec![3.0, 3.0]);

    let c = Var::new(t(&[1.0, 2.0], &[2]));
    let y = checkpoint(|ts: &[Var]| Ok(ts[0].clone()), std::slice::from_ref(&c)).unwrap();
    assert!(y.is_leaf() && !y.requires_grad());
    // The second of two inputs.
    let (p, q) = (param(&[1.0], &[1]), param(&[5.0], &[1]));
    let y = checkpoint(|ts: &[Var]| Ok(ts[1].clone()), &[p.clone(), q.clone()]).unwrap();
    assert!(y.is_leaf());
    y.sum(None, false).unwrap().backward().unwrap();
    assert!(p.grad().is_none());
    assert_eq!(grad(&q), vec![1.0]);
}

/// Grad-mode mixing, as PyTorch: a result made in `no_grad` does not
/// require grad; a result made in inference mode cannot be saved for
/// backward (`x * y`) but may be used where nothing is saved (`x + y`); its
/// `detach()` may be modified in place outside inference mode (changing
/// it); a saved output modified through a `detach()`ed alias is refused at
/// backward.
///
/// ```python
/// x = torch.ones(2, requires_grad=True)
/// with torch.no_grad(): y = x * 2
/// y.requires_grad, y.is_leaf            # False, True
/// with torch.inference_mode(): y = x * 2
/// (x * y).sum().backward()              # RuntimeError: Inference tensors cannot be saved for backward
/// (x + y).sum().backward(); x.grad      # [1., 1.]
/// y.detach().add_(1); y                 # fine: [3., 3.]
/// y = x.exp(); y.detach().mul_(2); y.sum().backward()  # RuntimeError: ... modified by an inplace operation
/// ```
#[test]
fn no_grad_inference_mode_and_detach_mix_as_pytorch() {
    let x = param(&[1.0, 1.0], &[2]);
    let y = no_grad(|| x.mul(2.0)).unwrap();
    assert!(!y.requires_grad() && y.is_leaf());
    let y = inference_mode(|| x.mul(2.0)).unwrap();
    assert!(matches!(
        x.mul(&y).unwrap_err(),
        AutogradError::InferenceTensorSaved { .. }
    ));
    x.add(&y)
        .unwrap()
        .sum(None, false)
        .unwrap()
        .backward()
        .unwrap();
    assert_eq!(grad(&x), vec![1.0, 1.0]);
    y.detach().add_(1.0).unwrap();
    assert_eq!(values(&y), vec![3.0, 3.0]);

    let x = param(&[1.0, 1.0], &[2]);
    let y = x.exp().unwrap();
    y.detach().mul_(2.0).unwrap();
    assert!(matches!(
        y.sum(None, false).unwrap().backward(),
        Err(AutogradError::SavedTensorModified { .. })
    ));
}

/// One optimizer step with a NaN or infinite gradient element and a zero
/// or positive learning rate: PyTorch's arithmetic, where `lr = 0` still
/// multiplies (`p - 0 * nan` is NaN, and `0 * inf` too), and the other
/// elements are updated normally.
///
/// ```python
/// def run(cls, g, lr, **kw):
///     p = torch.nn.Parameter(torch.tensor([1., -2., 3.]))
///     o = cls([p], lr=lr, **kw); p.grad = torch.tensor(g); o.step(); return p
/// # g1 = [nan, 1., 0.], g2 = [inf, -inf, 1.]
/// run(SGD, g1, 0.)  # [nan, -2., 3.]      run(SGD, g2, 0.)  # [nan, nan, 3.]
/// run(SGD, g1, .1)  # [nan, -2.1, 3.]     run(SGD, g2, .1)  # [-inf, inf, 2.9]
/// # SGD with momentum=0.9: the same four
/// run(Adam, g1, 0.) # [nan, -2., 3.]      run(Adam, g2, 0.) # [nan, nan, 3.]
/// run(Adam, g1, .1) # [nan, -2.1, 3.]     run(Adam, g2, .1) # [nan, nan, 2.9]
/// # AdamW(weight_decay=0.01):
/// run(AdamW, g1, 0.) # [nan, -2., 3.]     run(AdamW, g2, 0.) # [nan, nan, 3.]
/// run(AdamW, g1, .1) # [nan, -2.098, 2.997]  run(AdamW, g2, .1) # [nan, nan, 2.897]
/// ```
#[test]
fn optimizer_steps_with_non_finite_gradients_and_a_zero_learning_rate_are_pytorchs() {
    use strata_autograd::{Adam, AdamW, Optimizer, Sgd};
    let g1 = [NAN, 1.0, 0.0];
    let g2 = [INF, -INF, 1.0];
    type Make = fn(Vec<Var>, f64) -> Box<dyn Optimizer>;
    let cases: [(&str, Make, [[f32; 3]; 4]); 4] = [
        (
            "SGD",
            |p, lr| Box::new(Sgd::new(p, lr, 0.0).unwrap()),
            [
                [NAN, -2.0, 3.0],
                [NAN, NAN, 3.0],
                [NAN, -2.1, 3.0],
                [-INF, INF, 2.9],
            ],
        ),
        (
            "SGD momentum",
            |p, lr| Box::new(Sgd::new(p, lr, 0.9).unwrap()),
            [
                [NAN, -2.0, 3.0],
                [NAN, NAN, 3.0],
                [NAN, -2.1, 3.0],
                [-INF, INF, 2.9],
            ],
        ),
        (
            "Adam",
            |p, lr| Box::new(Adam::new(p, lr).unwrap()),
            [
                [NAN, -2.0, 3.0],
                [NAN, NAN, 3.0],
                [NAN, -2.1, 3.0],
                [NAN, NAN, 2.9],
            ],
        ),
        (
            "AdamW",
            |p, lr| {
                Box::new(
                    AdamW::new(p)
                        .with_lr(lr)
                        .unwrap()
                        .with_weight_decay(0.01)
                        .unwrap(),
                )
            },
            [
                [NAN, -2.0, 3.0],
                [NAN, NAN, 3.0],
                [NAN, -2.098, 2.997],
                [NAN, NAN, 2.897],
            ],
        ),
    ];
    for (name, make, want) in cases {
        let mut k = 0;
        for lr in [0.0, 0.1] {
            for g in [g1, g2] {
                let p = param(&[1.0, -2.0, 3.0], &[3]);
                p.set_grad(Some(t(&g, &[3]))).unwrap();
                let mut o = make(vec![p.clone()], lr);
                o.step().unwrap();
                let got = values(&p);
                let ok = got.iter().zip(&want[k]).all(|(a, b)| {
                    (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= 1e-6 * b.abs()
                });
                assert!(
                    ok,
                    "{name} lr {lr} grad {g:?}: strata {got:?}, PyTorch {:?}",
                    want[k]
                );
                k += 1;
            }
        }
    }
}

/// Found by the oracle's new ops: `dropout(p = 1)` in training is PyTorch's
/// `input * zeros`: NaN and infinities give NaN and a negative value -0.0
/// (strata-tensor's `dropout` wrote +0.0 everywhere); the gradient is
/// `g * 0` (NaN where `g` is).
///
/// ```python
/// x = torch.tensor([1., -2., inf, nan], requires_grad=True)
/// y = F.dropout(x, 1.0, True)     # [0., -0., nan, nan]
/// (y * torch.tensor([1., nan, 2., 3.])).sum().backward(); x.grad  # [0., nan, 0., 0.]
/// ```
#[test]
fn dropout_of_everything_multiplies_by_zero_as_pytorch() {
    let x = param(&[1.0, -2.0, INF, NAN], &[4]);
    let y = x.dropout(1.0, true).unwrap();
    let v = values(&y);
    same(&v, &[0.0, 0.0, NAN, NAN], "forward");
    assert!(v[1].is_sign_negative() && v[0].is_sign_positive(), "{v:?}");
    let c = Var::new(t(&[1.0, NAN, 2.0, 3.0], &[4]));
    y.mul(&c)
        .unwrap()
        .sum(None, false)
        .unwrap()
        .backward()
        .unwrap();
    same(&grad(&x), &[0.0, NAN, 0.0, 0.0], "grad");
}

/// Found by the oracle's new ops: causal attention with an infinite
/// upstream gradient. PyTorch's `masked_fill` backward makes the masked
/// scores' gradient exactly 0, so the keys a query does not see get no
/// NaN from it; strata formed it as `p (dp - sum(dp p))` with `p = 0`, which
/// is NaN for an infinite `dp`, and `ds^T q` gave those keys NaN.
///
/// ```python
/// q = torch.tensor([[[0.25, -0.25]]], requires_grad=True)
/// k = torch.tensor([[[0.5, -1.0], [2.0, 1.5]]], requires_grad=True)
/// v = torch.tensor([[[-1.0, 0.5], [1.0, -0.5]]], requires_grad=True)
/// s = (q @ k.transpose(-2, -1) / 2 ** 0.5).masked_fill(torch.ones(1, 2, dtype=torch.bool).triu(1), -inf)
/// y = torch.softmax(s, -1) @ v        # [[[-1.0, 0.5]]]
/// y.backward(torch.tensor([[[1.0, inf]]]))
/// q.grad  # [[[nan, nan]]]
/// k.grad  # [[[nan, nan], [0., 0.]]]
/// v.grad  # [[[1., inf], [0., nan]]]
/// ```
#[test]
fn causal_attention_gives_masked_keys_no_gradient_even_for_an_infinite_upstream() {
    use strata_autograd::AttentionArgs;
    let q = param(&[0.25, -0.25], &[1, 1, 2]);
    let k = param(&[0.5, -1.0, 2.0, 1.5], &[1, 2, 2]);
    let v = param(&[-1.0, 0.5, 1.0, -0.5], &[1, 2, 2]);
    let args = AttentionArgs {
        causal: true,
        ..AttentionArgs::default()
    };
    let y = q.attention(&k, &v, args).unwrap();
    same(&values(&y), &[-1.0, 0.5], "forward");
    y.backward_with(Some(&t(&[1.0, INF], &[1, 1, 2])), false)
        .unwrap();
    same(&grad(&q), &[NAN, NAN], "q");
    same(&grad(&k), &[NAN, NAN, 0.0, 0.0], "k");
    same(&grad(&v), &[1.0, INF, 0.0, NAN], "v");
}
