//! Session 35's sweep of hostile inputs to autograd (after
//! `hostile_sweep_s34.rs`). Each test asserts PyTorch's values (PyTorch
//! 2.15 on the CPU, noted beside them), or the state left behind.
//!
//! Defects these tests found (fixed with them):
//!
//! * a view of a variable that did not require grad, taken before that
//!   variable was made to require grad (`v = z.narrow(..)`, then
//!   `z.requires_grad_(true)`), did not require grad: `v * v` silently
//!   built no graph. In PyTorch 2.15 `v.requires_grad` is then True, but
//!   `v` is a leaf with no history leading to `z`, and a backward through
//!   it leaves both `z.grad` and `v.grad` None (the gradient is lost).
//!   Strata's `v.requires_grad()` now reads its base's flag as PyTorch's
//!   does; using `v` in a recorded op is `ViewBeforeRequiresGrad` (take
//!   the view again), in place with grad mode on `InPlaceOnLeaf` (PyTorch:
//!   "a view of a leaf Variable that requires grad is being used in an
//!   in-place operation").
//! * a stale view whose base was dropped was not caught: views held their
//!   base weakly, so once the base variable was gone a view taken before a
//!   recorded in-place op on it (session 34's `ViewOfModifiedBase`) was
//!   taken as current: an untracked view silently had no history
//!   (`x.grad` [1, 1, 1] where PyTorch gives [3, 5, 1]) and a tracked one
//!   back-propagated through the base's old history, leaving out the
//!   in-place op (`x.grad` [2, 4, 0] where PyTorch gives [8, 16, 0]).
//!   A base now shares a small `ViewSource` (its rebase count and
//!   requires-grad flag; no tensor, no node) with its views, which outlives
//!   it. (Since session 42 a view holds its base, as PyTorch's, and such a
//!   view's history is regenerated from the base's: PyTorch's values.)
//!   (Reading the base's flag made `v.backward_with(..)` on such a view
//!   fill `v`'s own `.grad`, where PyTorch refuses it, "element 0 of
//!   tensors does not require grad", or for a stale view passes the
//!   gradient to the base's history; caught before the session ended and
//!   refused with the same two errors.)
//! * the optimizers accepted an empty parameter list, and their steps did
//!   nothing; PyTorch refuses it ("optimizer got an empty parameter
//!   list"). `Sgd::new` and `Adam::new` now do (after the hyper-parameter
//!   checks, PyTorch's order), and `AdamW`'s steps (its constructor cannot
//!   fail).
//! * `Module::to` to another dtype or device dropped the parameters'
//!   gradients (PyTorch converts them with the parameters), and an
//!   optimizer made before kept stepping the old parameters, which the
//!   model no longer used, silently. PyTorch converts the same parameter
//!   in place, so its optimizer keeps working; a strata `Var`'s data cannot
//!   change dtype or device in place, so the gradients are now converted
//!   onto the new parameters and a stale optimizer's step is refused with
//!   an `Optimizer` error naming `Module::to`, before anything is updated.
//! * `Module::to` to another dtype or device also dropped the parameters'
//!   post-accumulate-grad hooks (PyTorch's stay on the converted
//!   parameter): a hook, such as a `DistributedDataParallel`'s, silently
//!   stopped running. The hook list is now shared with the converted
//!   parameter, and a `HookHandle` still removes the hook.
//! * a leaf made not to require grad between its forward and the backward
//!   (`x.requires_grad_(false)`, freezing a layer) still had the gradient
//!   added into its `.grad`, so an optimizer step then updated the frozen
//!   layer. PyTorch's AccumulateGrad skips a leaf that no longer requires
//!   grad (`x.grad` stays None; its post-accumulate-grad hooks still run);
//!   strata's backward now does the same.

use strata_autograd::{AutogradError, Var};
use strata_tensor::{DType, Device, Tensor};

use crate::common;
use common::{constant, grad, param};

const CPU: Device = Device::Cpu;

fn values(v: &Var) -> Vec<f32> {
    v.to_vec::<f32>().unwrap()
}

#[test]
fn a_view_taken_before_its_base_was_made_to_require_grad() {
    // z = torch.zeros(3); v = z[0:2]; vv = v[0:1]; z.requires_grad_()
    // PyTorch 2.15: v.requires_grad and vv.requires_grad are True (a
    // view's flag reads its base's), v.is_leaf, v.grad_fn None; but
    // (v * v + v).sum().backward() leaves z.grad None and v.grad None: the
    // gradient is lost. Strata's v did not require grad, and v * v
    // silently built no graph. Strata now reports the flag as PyTorch
    // does and refuses to use such a view in a recorded op.
    let z = constant(&[1.0, 2.0, 3.0]);
    let v = z.narrow(0, 0, 2).unwrap();
    let vv = v.narrow(0, 0, 1).unwrap();
    assert!(!v.requires_grad());
    z.requires_grad_(true).unwrap();
    assert!(v.requires_grad() && vv.requires_grad());
    assert!(v.is_leaf() && v.grad_fn_name().is_none());
    let refused = |r: strata_autograd::Result<Var>, what: &str| match r {
        Err(e @ AutogradError::ViewBeforeRequiresGrad { .. }) => {
            assert!(e.to_string().contains("take the view again"), "{what}: {e}")
        }
        other => panic!("{what}: {other:?}"),
    };
    refused(v.mul(&v), "v * v");
    refused(vv.exp(), "vv.exp()");
    refused(constant(&[1.0, 1.0]).add(&v), "c + v");
    // In place with grad mode on: PyTorch raises "a view of a leaf
    // Variable that requires grad is being used in an in-place operation"
    // (even v.add_(1)); z is unchanged.
    assert!(matches!(
        v.add_(1.0).unwrap_err(),
        AutogradError::InPlaceOnLeaf { op: "add_" }
    ));
    assert_eq!(values(&z), vec![1.0, 2.0, 3.0]);
    // Under no_grad it is a plain tensor (PyTorch: no graph either).
    {
        let _g = strata_autograd::NoGradGuard::new();
        assert_eq!(values(&v.mul(&v).unwrap()), vec![1.0, 4.0]);
    }
    // A view taken after requires_grad_ back-propagates: z.grad == [2, 4, 0].
    let v2 = z.narrow(0, 0, 2).unwrap();
    v2.mul(&v2)
        .unwrap()
        .sum(None, false)
        .unwrap()
        .backward()
        .unwrap();
    assert_eq!(grad(&z), vec![2.0, 4.0, 0.0]);
    // z.requires_grad_(False) again: v.requires_grad is False in PyTorch,
    // and v is a plain tensor once more.
    z.requires_grad_(false).unwrap();
    assert!(!v.requires_grad());
    assert!(!v.mul(&v).unwrap().requires_grad());
    // The base dropped after requires_grad_: PyTorch's v.requires_grad
    // stays True; strata still refuses.
    let z = constant(&[1.0, 2.0, 3.0]);
    let v = z.narrow(0, 0, 2).unwrap();
    z.requires_grad_(true).unwrap();
    drop(z);
    assert!(v.requires_grad());
    refused(v.mul(2.0), "v * 2 after the base was dropped");
}

#[test]
fn a_stale_view_whose_base_was_dropped_is_regenerated() {
    // An untracked base: z = torch.zeros(3); v = z[0:2]; z.add_(x); del z
    // ((v * v).sum() + x.sum()).backward(): x.grad == [3, 5, 1] in PyTorch
    // 2.15 (v.grad_fn AsStridedBackward0). Session 34 refused v while z
    // lived (ViewOfModifiedBase); with z dropped strata's v had no history
    // and x silently got [1, 1, 1]. Since session 42 a view holds its base
    // and its history is regenerated, with the base dropped or not
    // (benches/anchors/gen_inplace_views_s42.py: s35_*).
    let x = param(&[1.0, 2.0, 3.0]);
    let z = constant(&[0.0, 0.0, 0.0]);
    let v = z.narrow(0, 0, 2).unwrap();
    let vv = v.narrow(0, 1, 1).unwrap();
    z.add_(&x).unwrap();
    drop(z);
    assert_eq!(values(&v), vec![1.0, 2.0]);
    v.mul(&v)
        .unwrap()
        .sum(None, false)
        .unwrap()
        .add(&x.sum(None, false).unwrap())
        .unwrap()
        .backward()
        .unwrap();
    assert_eq!(grad(&x), vec![3.0, 5.0, 1.0]);
    // The intermediate view dropped too: vv still follows z's history
    // (vv.exp().sum(): x.grad == [0, e^2, 0]).
    x.zero_grad(true).unwrap();
    drop(v);
    vv.exp()
        .unwrap()
        .sum(None, false)
        .unwrap()
        .backward()
        .unwrap();
    let g = grad(&x);
    assert!(
        g[0] == 0.0 && (g[1] - 7.389_056).abs() < 1e-5 && g[2] == 0.0,
        "{g:?}"
    );

    // A tracked base: y = x * 1; v = y[0:2]; y.mul_(2); del y
    // (v * v).sum().backward(): x.grad == [8, 16, 0] in PyTorch 2.15 (as
    // with y kept). Strata refused it with y kept (sessions 27 to 41); with
    // y dropped the old history was used and x silently got [2, 4, 0].
    for keep_base in [true, false] {
        let x = param(&[1.0, 2.0, 3.0]);
        let y = x.mul(1.0).unwrap();
        let v = y.narrow(0, 0, 2).unwrap();
        let vt = v.unsqueeze(0).unwrap(); // a view of the view
        y.mul_(2.0).unwrap();
        let kept = keep_base.then_some(y);
        for (what, w) in [("v", &v), ("vt", &vt)] {
            x.zero_grad(true).unwrap();
            w.mul(w)
                .unwrap()
                .sum(None, false)
                .unwrap()
                .backward_with(None, true)
                .unwrap();
            assert_eq!(
                grad(&x),
                vec![8.0, 16.0, 0.0],
                "{what}, base kept {keep_base}"
            );
        }
        drop(kept);
    }
    // Views used before the in-place op still back-propagate with the base
    // dropped: w = v * 3 before y.mul_(2), del y, v; w.sum().backward()
    // gives x.grad == [3, 3, 0] in PyTorch 2.15.
    let x = param(&[1.0, 2.0, 3.0]);
    let y = x.mul(1.0).unwrap();
    let v = y.narrow(0, 0, 2).unwrap();
    let w = v.mul(3.0).unwrap();
    y.mul_(2.0).unwrap();
    drop(y);
    drop(v);
    w.sum(None, false).unwrap().backward().unwrap();
    assert_eq!(grad(&x), vec![3.0, 3.0, 0.0]);
}

fn empty_refused<T>(r: strata_autograd::Result<T>, what: &str) {
    match r {
        Err(AutogradError::Optimizer { msg, .. }) => {
            assert!(msg.contains("empty parameter list"), "{what}: {msg}")
        }
        Err(e) => panic!("{what}: {e:?}"),
        Ok(_) => panic!("{what}: accepted"),
    }
}

#[test]
fn optimizers_refuse_an_empty_parameter_list() {
    use strata_autograd::{Adam, AdamW, Optimizer, Sgd};
    // torch.optim.SGD([], lr=0.1), Adam([]), AdamW([]) each raise
    // ValueError("optimizer got an empty parameter list") (PyTorch 2.15);
    // strata made an optimizer whose steps did nothing.
    empty_refused(Sgd::new(Vec::new(), 0.1, 0.0), "SGD");
    empty_refused(Adam::new(Vec::new(), 0.1), "Adam");
    // AdamW::new cannot fail: every step refuses.
    let mut opt = AdamW::new(Vec::new());
    empty_refused(opt.step(), "AdamW step");
    empty_refused(opt.step(), "AdamW second step");
    // PyTorch's lr check comes first: SGD([], lr=-1) is "Invalid learning
    // rate: -1".
    assert!(matches!(
        Sgd::new(Vec::new(), -1.0, 0.0),
        Err(AutogradError::Hyperparameter { .. })
    ));
    assert!(matches!(
        Adam::new(Vec::new(), f64::NAN),
        Err(AutogradError::Hyperparameter { .. })
    ));
}

type MakeOptimizer = fn(Vec<Var>) -> Box<dyn strata_autograd::Optimizer>;

#[test]
fn module_to_with_a_real_conversion_converts_the_gradients_and_stale_optimizers_refuse_to_step() {
    use strata_autograd::nn::{Linear, Module};
    use strata_autograd::{Adam, AdamW, Optimizer, Sgd};
    // m = nn.Linear(2, 1); opt = SGD(m.parameters(), lr=0.5)
    // m(torch.ones(1, 2)).sum().backward(); m.to(torch.float64)
    // PyTorch 2.15: m.weight is the same Parameter (converted in place,
    // param.data = ...), its grad converted to float64 too, and opt.step()
    // updates it. Strata's Var cannot change its data's dtype or device in
    // place: Module::to makes new parameters. Before session 35 it also
    // dropped their gradients, and an optimizer made before kept updating
    // the old, dead tensors, silently.
    let make = || {
        Linear::from_tensors(
            Tensor::from_slice(&[0.5f32, -0.5], &[1, 2], CPU).unwrap(),
            Some(Tensor::from_slice(&[0.25f32], &[1], CPU).unwrap()),
        )
        .unwrap()
    };
    let x = Var::new(Tensor::ones(&[1, 2], DType::F32, CPU).unwrap());
    let optimizers: [(&str, MakeOptimizer); 3] = [
        ("SGD", |p| Box::new(Sgd::new(p, 0.5, 0.0).unwrap())),
        ("Adam", |p| Box::new(Adam::new(p, 0.5).unwrap())),
        ("AdamW", |p| Box::new(AdamW::new(p))),
    ];
    for (name, make_opt) in optimizers {
        let mut m = make();
        let mut opt = make_opt(m.parameters());
        m.forward(&x)
            .unwrap()
            .sum(None, false)
            .unwrap()
            .backward()
            .unwrap();
        m.to(CPU, Some(DType::F64)).unwrap();
        // m.weight.grad: tensor([[1., 1.]], dtype=torch.float64)
        let g = m
            .weight
            .grad()
            .expect("the gradient is converted, not dropped");
        assert_eq!(g.dtype(), DType::F64);
        assert_eq!(g.to_vec::<f64>().unwrap(), vec![1.0, 1.0]);
        assert_eq!(
            m.bias
                .as_ref()
                .unwrap()
                .grad()
                .unwrap()
                .to_vec::<f64>()
                .unwrap(),
            vec![1.0]
        );
        assert!(m.weight.is_leaf() && m.weight.requires_grad());
        // The optimizer made before holds the old parameters: its step is
        // refused, updating nothing, and says what to do.
        match opt.step() {
            Err(AutogradError::Optimizer { msg, .. }) => {
                assert!(msg.contains("Module::to"), "{name}: {msg}");
                assert!(msg.contains("make the optimizer after"), "{name}: {msg}");
            }
            other => panic!("{name}: {other:?}"),
        }
        assert_eq!(
            m.weight.data().to_vec::<f64>().unwrap(),
            vec![0.5, -0.5],
            "{name}"
        );
        for p in opt.params() {
            assert_eq!(p.dtype(), DType::F32, "{name}: the old parameter");
        }
        // An optimizer made after the conversion updates the model:
        // w - 0.5 * 1 with SGD.
        if name == "SGD" {
            let mut opt = Sgd::new(m.parameters(), 0.5, 0.0).unwrap();
            opt.step().unwrap();
            assert_eq!(m.weight.data().to_vec::<f64>().unwrap(), vec![0.0, -1.0]);
            assert_eq!(
                m.bias.as_ref().unwrap().data().to_vec::<f64>().unwrap(),
                vec![-0.25]
            );
        }
    }
    // A conversion that changes nothing keeps the parameters (session 34),
    // so an optimizer made before still steps.
    let mut m = make();
    let mut opt = Sgd::new(m.parameters(), 0.5, 0.0).unwrap();
    m.to(CPU, Some(DType::F32)).unwrap();
    m.forward(&x)
        .unwrap()
        .sum(None, false)
        .unwrap()
        .backward()
        .unwrap();
    opt.step().unwrap();
    assert_eq!(values(&m.weight), vec![0.0, -1.0]);
}

#[test]
fn module_to_with_a_real_conversion_keeps_the_parameters_hooks() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use strata_autograd::nn::{Linear, Module};
    // m = nn.Linear(2, 1); calls = []
    // h = m.weight.register_post_accumulate_grad_hook(
    //         lambda p: calls.append(p.grad.dtype))
    // m.to(torch.float64); m(ones(1, 2, float64)).sum().backward()
    // calls == [torch.float64] (PyTorch 2.15: the same parameter, its hook
    // kept); after h.remove() another backward adds nothing. Strata's new
    // parameter had no hooks: the hook was lost silently (a
    // DistributedDataParallel's bucket hooks among them).
    let mut m = Linear::from_tensors(
        Tensor::from_slice(&[0.5f32, -0.5], &[1, 2], CPU).unwrap(),
        None,
    )
    .unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let c = Arc::clone(&calls);
    let h = m
        .weight
        .register_post_accumulate_grad_hook(move |p| {
            assert_eq!(p.grad().unwrap().dtype(), DType::F64);
            c.fetch_add(1, Ordering::SeqCst);
            Ok(())
        })
        .unwrap();
    m.to(CPU, Some(DType::F64)).unwrap();
    let x = Var::new(Tensor::ones(&[1, 2], DType::F64, CPU).unwrap());
    let backward = |m: &Linear| {
        m.forward(&x)
            .unwrap()
            .sum(None, false)
            .unwrap()
            .backward()
            .unwrap()
    };
    backward(&m);
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    // The handle still removes it.
    h.remove();
    backward(&m);
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(grad_f64(&m.weight), vec![2.0, 2.0]);
}

fn grad_f64(v: &Var) -> Vec<f64> {
    v.grad().unwrap().to_vec::<f64>().unwrap()
}

#[test]
fn backward_from_a_view_that_requires_grad_only_through_its_base_is_refused() {
    // z = torch.zeros(3); v = z[0:2]; z.requires_grad_()
    // v.backward(torch.ones(2)) raises "element 0 of tensors does not
    // require grad and does not have a grad_fn" (PyTorch 2.15), though
    // v.requires_grad is True. Once v.requires_grad() read its base's flag
    // (this session), strata's backward took v for a leaf and put the
    // gradient in v's .grad.
    let ones = Tensor::ones(&[2], strata_tensor::DType::F32, CPU).unwrap();
    let z = constant(&[0.0, 0.0, 0.0]);
    let v = z.narrow(0, 0, 2).unwrap();
    z.requires_grad_(true).unwrap();
    assert!(matches!(
        v.backward_with(Some(&ones), false).unwrap_err(),
        AutogradError::ViewBeforeRequiresGrad { .. }
    ));
    assert!(v.grad().is_none() && z.grad().is_none());
    // x = tensor([1., 2., 3.], requires_grad=True); z = torch.zeros(3)
    // v = z[0:2]; z.add_(x); v.backward(torch.ones(2)): x.grad ==
    // [1, 1, 0] in PyTorch (v's history regenerated from z's; v is not a
    // leaf). Strata refused it (sessions 35 to 41) rather than fill v's
    // .grad and give x nothing; since session 42 it regenerates v's history
    // as PyTorch (gen_inplace_views_s42.py: s35_untracked_view_root).
    let x = param(&[1.0, 2.0, 3.0]);
    let z = constant(&[0.0, 0.0, 0.0]);
    let v = z.narrow(0, 0, 2).unwrap();
    z.add_(&x).unwrap();
    v.backward_with(Some(&ones), false).unwrap();
    assert!(!v.is_leaf() && v.grad().is_none());
    assert_eq!(grad(&x), vec![1.0, 1.0, 0.0]);
}

#[test]
fn a_leaf_frozen_between_forward_and_backward_gets_no_gradient() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use strata_autograd::{Optimizer, Sgd};
    // x = ones(3, requires_grad=True); w = ones(3, requires_grad=True)
    // x.register_post_accumulate_grad_hook(lambda p: calls.append(1))
    // y = (x * w).sum(); x.requires_grad_(False); y.backward()
    // PyTorch 2.15: x.grad None, w.grad [1, 1, 1], the hook called once.
    // Strata added the gradient into x's .grad: a layer frozen after its
    // forward was then updated by the optimizer's step.
    let x = param(&[1.0, 1.0, 1.0]);
    let w = param(&[1.0, 1.0, 1.0]);
    let calls = Arc::new(AtomicUsize::new(0));
    let c = Arc::clone(&calls);
    x.register_post_accumulate_grad_hook(move |_| {
        c.fetch_add(1, Ordering::SeqCst);
        Ok(())
    })
    .unwrap();
    let mut opt = Sgd::new(vec![x.clone(), w.clone()], 0.5, 0.0).unwrap();
    let y = x.mul(&w).unwrap().sum(None, false).unwrap();
    x.requires_grad_(false).unwrap();
    y.backward().unwrap();
    assert!(x.grad().is_none());
    assert_eq!(grad(&w), vec![1.0; 3]);
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    opt.step().unwrap();
    assert_eq!(values(&x), vec![1.0; 3]);
    assert_eq!(values(&w), vec![0.5; 3]);
    // Made to require grad again before the backward, it gets its gradient:
    // PyTorch's x.grad == [2, 2, 2].
    let x = param(&[1.0, 1.0, 1.0]);
    let y = x.mul(2.0).unwrap().sum(None, false).unwrap();
    x.requires_grad_(false).unwrap();
    x.requires_grad_(true).unwrap();
    y.backward().unwrap();
    assert_eq!(grad(&x), vec![2.0; 3]);
}
