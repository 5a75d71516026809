//! Session 34's sweep of hostile inputs to autograd (after
//! `hostile_sweep_s33.rs`). Each test asserts PyTorch's values (PyTorch
//! 2.15 on the CPU, noted beside them), or the state left behind.
//!
//! Defects these tests found (fixed with them):
//!
//! * `checkpoint` of a function whose output does not depend on any input
//!   or captured variable requiring grad (a constant, a `.detach()`ed
//!   value, or one made only of inputs that do not require grad) returned
//!   a variable that required grad, with a `CheckpointBackward` node whose
//!   backward passed no gradient. PyTorch's non-reentrant checkpoint runs
//!   the forward with grad mode on, so such an output does not require
//!   grad (and `out.sum().backward()` is refused). Strata now tracks,
//!   inside the checkpointed forward, which values depend on an input or
//!   parameter requiring grad (through ops and in-place ops), and records
//!   the node only for an output that does.
//! * an in-place op with an operand requiring grad on a view of a variable
//!   that does not require grad (`z.narrow(0, 0, 2)?.add_(&x)`) recorded
//!   its history on the view alone: `z` kept none, so a loss through `z`
//!   silently gave `x` no gradient for the op (PyTorch rebases `z`'s
//!   history, `CopySlices`). Such a view was then refused with
//!   `InPlaceOnView`, as a view of a variable requiring grad already was,
//!   before anything changes; since session 42 the base's history is
//!   rebased as PyTorch's.
//! * a view of a variable that does not require grad, taken before a
//!   recorded in-place op gave that variable a history (`v = z.narrow(..)`,
//!   then `z.add_(&x)`), had no history: `v * v` did not require grad and
//!   `x` silently got no gradient through it (PyTorch regenerates `v`'s
//!   history from `z`'s). Using such a view in a recorded op, or in place,
//!   with grad mode on was then `ViewOfModifiedBase`; since session 42 its
//!   history is regenerated as PyTorch's.
//! * `Module::to(device, dtype)` replaced every parameter with a new leaf
//!   even when it was already on `device` in `dtype`: its gradient (and
//!   hooks) were dropped, and an optimizer made before the call held the
//!   old parameters, so its steps silently no longer reached the model.
//!   PyTorch's `module.to` keeps the same parameters (and their
//!   gradients); strata now leaves such parameters as they are.
//! * the optimizers took a parameter that is not a leaf (`x.mul(2.0)`),
//!   which never gets a `.grad`, so every step silently skipped it.
//!   PyTorch refuses it ("can't optimize a non-leaf Tensor"); `Sgd::new`
//!   and `Adam::new` now do, and every `step` does before updating
//!   anything (`AdamW::new` cannot fail; PyTorch also lets its steps skip
//!   a parameter that became a non-leaf after the optimizer was made,
//!   where strata refuses).
//! * autocast's cache of a parameter's low-precision copy ignored in-place
//!   changes: in a training loop inside one region, every forward after an
//!   optimizer step used the first iteration's weights (PyTorch 2.15's
//!   cache does the same; strata now casts a parameter again once its
//!   version changed, a deliberate difference).

use strata_autograd::{checkpoint, AutogradError, Var};
use strata_tensor::{DType, Device, Tensor};

use crate::common;
use common::{constant, grad, param};

const CPU: Device = Device::Cpu;

#[test]
fn checkpoint_of_an_output_independent_of_the_inputs_does_not_require_grad() {
    let x = param(&[1.0, 2.0, 3.0]);
    // checkpoint(lambda a: torch.ones(3), x, use_reentrant=False)
    //   .requires_grad == False, grad_fn None; .sum().backward() raises.
    let out = checkpoint(
        |_| Ok(Var::new(Tensor::ones(&[3], DType::F32, CPU)?)),
        std::slice::from_ref(&x),
    )
    .unwrap();
    assert!(!out.requires_grad());
    assert!(out.grad_fn_name().is_none());
    assert!(out.sum(None, false).unwrap().backward().is_err());
    assert!(x.grad().is_none());
    assert_eq!(out.to_vec::<f32>().unwrap(), vec![1.0; 3]);

    // lambda a, b: b * 2 with b not requiring grad: False.
    let y = constant(&[4.0, 5.0, 6.0]);
    let out = checkpoint(|xs| xs[1].mul(2.0), &[x.clone(), y.clone()]).unwrap();
    assert!(!out.requires_grad());
    assert_eq!(out.to_vec::<f32>().unwrap(), vec![8.0, 10.0, 12.0]);

    // lambda a: (a * 2).detach(): False.
    let out = checkpoint(|xs| Ok(xs[0].mul(2.0)?.detach()), std::slice::from_ref(&x)).unwrap();
    assert!(!out.requires_grad());

    // lambda a: (a * 2).long().float() * a.detach(): False.
    let out = checkpoint(
        |xs| {
            xs[0]
                .mul(2.0)?
                .to_dtype(DType::I64)?
                .to_dtype(DType::F32)?
                .mul(&xs[0].detach())
        },
        std::slice::from_ref(&x),
    )
    .unwrap();
    assert!(!out.requires_grad());
}

#[test]
fn checkpoint_of_an_output_that_depends_on_the_inputs_still_back_propagates() {
    let x = param(&[1.0, 2.0, 3.0]);
    // lambda a: a * 2: True, x.grad == [2, 2, 2].
    let out = checkpoint(|xs| xs[0].mul(2.0), std::slice::from_ref(&x)).unwrap();
    assert!(out.requires_grad());
    out.sum(None, false).unwrap().backward().unwrap();
    assert_eq!(grad(&x), vec![2.0; 3]);

    // lambda a: torch.zeros(3).add_(a): True, x.grad == [1, 1, 1].
    let x = param(&[1.0, 2.0, 3.0]);
    let out = checkpoint(
        |xs| {
            let z = Var::new(Tensor::zeros(&[3], DType::F32, CPU)?);
            z.add_(&xs[0])?;
            Ok(z)
        },
        std::slice::from_ref(&x),
    )
    .unwrap();
    assert!(out.requires_grad());
    out.sum(None, false).unwrap().backward().unwrap();
    assert_eq!(grad(&x), vec![1.0; 3]);

    // A captured parameter and an input that does not require grad:
    // lambda b: b * w: True, w.grad == b.
    let w = param(&[1.0, 1.0, 1.0]);
    let y = constant(&[4.0, 5.0, 6.0]);
    let w2 = w.clone();
    let out = checkpoint(move |xs| xs[0].mul(&w2), &[y]).unwrap();
    assert!(out.requires_grad());
    out.sum(None, false).unwrap().backward().unwrap();
    assert_eq!(grad(&w), vec![4.0, 5.0, 6.0]);
}

fn values(v: &Var) -> Vec<f32> {
    v.to_vec::<f32>().unwrap()
}

#[test]
fn a_recorded_in_place_op_on_a_view_of_an_untracked_variable_rebases_it() {
    // z = torch.zeros(3); z[0:2].add_(x[1:3]); ((z * z) + x).sum().backward()
    // gives x.grad == [1, 5, 7] in PyTorch (CopySlices rebases z's
    // history). Strata recorded the op's history on the view alone and x
    // got [1, 1, 1], silently; sessions 34 to 41 refused it
    // (`InPlaceOnView`); since session 42 z's history is rebased as
    // PyTorch's (benches/anchors/gen_inplace_views_s42.py: s34_*).
    let x = param(&[1.0, 2.0, 3.0]);
    let z = constant(&[0.0, 0.0, 0.0]);
    let view = z.narrow(0, 0, 2).unwrap();
    view.add_(&x.narrow(0, 1, 2).unwrap()).unwrap();
    assert_eq!(values(&z), vec![2.0, 3.0, 0.0]);
    assert!(view.requires_grad() && z.requires_grad());
    assert_eq!(z.grad_fn_name(), Some("CopySlices"));
    z.mul(&z)
        .unwrap()
        .add(&x)
        .unwrap()
        .sum(None, false)
        .unwrap()
        .backward()
        .unwrap();
    assert_eq!(grad(&x), vec![1.0, 5.0, 7.0]);
    // Each of the other recorded in-place ops: z = [1, 2, 4];
    // z[1:3].<op>(x[0:2]); ((z * z) + x).sum()
    for (op, z_want, x_want) in [
        ("add_", [1.0, 3.0, 6.0], [7.0, 13.0, 1.0]),
        ("sub_", [1.0, 1.0, 2.0], [-1.0, -3.0, 1.0]),
        ("mul_", [1.0, 2.0, 8.0], [9.0, 65.0, 1.0]),
        ("div_", [1.0, 2.0, 2.0], [-7.0, -3.0, 1.0]),
    ] {
        let x = param(&[1.0, 2.0, 3.0]);
        let z = constant(&[1.0, 2.0, 4.0]);
        let view = z.narrow(0, 1, 2).unwrap();
        let other = x.narrow(0, 0, 2).unwrap();
        match op {
            "add_" => view.add_(&other),
            "sub_" => view.sub_(&other),
            "mul_" => view.mul_(&other),
            _ => view.div_(&other),
        }
        .unwrap();
        assert_eq!(values(&z), z_want, "{op}");
        z.mul(&z)
            .unwrap()
            .add(&x)
            .unwrap()
            .sum(None, false)
            .unwrap()
            .backward()
            .unwrap();
        assert_eq!(grad(&x), x_want, "{op}");
    }
    // A view made without grad mode is still refused, as PyTorch refuses
    // it ("A view was created in no_grad mode and is being modified
    // inplace with grad mode enabled"), before z changes.
    let z = constant(&[0.0, 0.0, 0.0]);
    let view = {
        let _g = strata_autograd::NoGradGuard::new();
        z.narrow(0, 0, 2).unwrap()
    };
    let err = view.add_(&x.narrow(0, 0, 2).unwrap()).unwrap_err();
    assert!(
        matches!(err, AutogradError::InPlaceOnView { op: "add_", .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("no_grad"), "{err}");
    assert_eq!(values(&z), vec![0.0; 3]);
    // Not recording (no operand requires grad), the op is allowed, as in
    // PyTorch: z[0:2].add_(1.0).
    z.narrow(0, 0, 2).unwrap().add_(1.0).unwrap();
    assert_eq!(values(&z), vec![1.0, 1.0, 0.0]);
    assert!(!z.requires_grad());
    // In place on the base itself records (PyTorch: z.add_(x) makes z
    // require grad, x.grad == 2 * z).
    let x = param(&[1.0, 2.0, 3.0]);
    let z = constant(&[0.0, 0.0, 0.0]);
    z.add_(&x).unwrap();
    z.mul(&z)
        .unwrap()
        .sum(None, false)
        .unwrap()
        .backward()
        .unwrap();
    assert_eq!(grad(&x), vec![2.0, 4.0, 6.0]);
}

#[test]
fn a_view_of_an_untracked_variable_modified_in_place_afterwards_is_regenerated() {
    // z = torch.zeros(3); v = z[0:2]; z.add_(x)
    // ((v * v).sum() + x.sum()).backward() gives x.grad == [3, 5, 1] in
    // PyTorch (v's history is regenerated from z's: v.grad_fn is
    // AsStridedBackward0). Strata's v had no history at all: v * v did not
    // require grad and x got [1, 1, 1], silently; sessions 34 to 41
    // refused v (`ViewOfModifiedBase`); since session 42 its history is
    // regenerated as PyTorch's.
    let x = param(&[1.0, 2.0, 3.0]);
    let z = constant(&[0.0, 0.0, 0.0]);
    let v = z.narrow(0, 0, 2).unwrap();
    let vv = v.narrow(0, 0, 1).unwrap(); // a view of that view
    z.add_(&x).unwrap();
    assert_eq!(values(&v), vec![1.0, 2.0]);
    assert!(v.requires_grad() && vv.requires_grad());
    assert_eq!(v.grad_fn_name(), Some("AsStridedBackward"));
    v.mul(&v)
        .unwrap()
        .sum(None, false)
        .unwrap()
        .add(&x.sum(None, false).unwrap())
        .unwrap()
        .backward()
        .unwrap();
    assert_eq!(grad(&x), vec![3.0, 5.0, 1.0]);
    // s34_untracked_then_base_add.vv: (vv * 2).sum() gives [2, 0, 0].
    x.zero_grad(true).unwrap();
    vv.mul(2.0)
        .unwrap()
        .sum(None, false)
        .unwrap()
        .backward()
        .unwrap();
    assert_eq!(grad(&x), vec![2.0, 0.0, 0.0]);
    // s34_untracked_then_view_mul: then v.mul_(2); (z * z).sum() gives
    // z == [2, 4, 3], x.grad == [8, 16, 6].
    x.zero_grad(true).unwrap();
    v.mul_(2.0).unwrap();
    assert_eq!(values(&z), vec![2.0, 4.0, 3.0]);
    z.mul(&z)
        .unwrap()
        .sum(None, false)
        .unwrap()
        .backward()
        .unwrap();
    assert_eq!(grad(&x), vec![8.0, 16.0, 6.0]);
    // Without grad mode it is just a tensor (PyTorch: no graph either).
    {
        let _g = strata_autograd::NoGradGuard::new();
        assert_eq!(values(&v.mul(&v).unwrap()), vec![4.0, 16.0]);
    }
    // A view taken after the in-place op is current (PyTorch's values).
    let x = param(&[1.0, 2.0, 3.0]);
    let z = constant(&[0.0, 0.0, 0.0]);
    z.add_(&x).unwrap();
    let v = z.narrow(0, 0, 2).unwrap();
    v.mul(&v)
        .unwrap()
        .sum(None, false)
        .unwrap()
        .add(&x.sum(None, false).unwrap())
        .unwrap()
        .backward()
        .unwrap();
    assert_eq!(grad(&x), vec![3.0, 5.0, 1.0]);
    // A view whose base was modified without recording stays usable.
    let z = constant(&[0.0, 0.0, 0.0]);
    let v = z.narrow(0, 0, 2).unwrap();
    z.add_(1.0).unwrap();
    assert!(!v.mul(&v).unwrap().requires_grad());
    assert_eq!(
        values(&v.mul(&x.narrow(0, 0, 2).unwrap()).unwrap()),
        vec![1.0, 2.0]
    );
}

#[test]
fn module_to_where_nothing_changes_keeps_the_parameters() {
    use strata_autograd::nn::{Linear, Module};
    use strata_autograd::{Optimizer, Sgd};
    // m = nn.Linear(2, 1); m(torch.ones(1, 2)).sum().backward()
    // m.to("cpu"): m.weight is the same tensor, its grad [[1, 1]] kept.
    let mut m = Linear::from_tensors(
        Tensor::from_slice(&[0.5f32, -0.5], &[1, 2], CPU).unwrap(),
        Some(Tensor::from_slice(&[0.25f32], &[1], CPU).unwrap()),
    )
    .unwrap();
    let mut opt = Sgd::new(m.parameters(), 0.5, 0.0).unwrap();
    let x = Var::new(Tensor::ones(&[1, 2], DType::F32, CPU).unwrap());
    m.forward(&x)
        .unwrap()
        .sum(None, false)
        .unwrap()
        .backward()
        .unwrap();
    m.to(CPU, None).unwrap();
    m.to(CPU, Some(DType::F32)).unwrap();
    assert_eq!(grad(&m.weight), vec![1.0, 1.0]);
    assert_eq!(grad(m.bias.as_ref().unwrap()), vec![1.0]);
    // The optimizer made before still updates the model's parameters:
    // w -= 0.5 * 1.
    opt.step().unwrap();
    assert_eq!(values(&m.weight), vec![0.0, -1.0]);
    assert_eq!(values(m.bias.as_ref().unwrap()), vec![-0.25]);
    // A real conversion still converts (and fails changing nothing).
    assert!(m.to(CPU, Some(DType::I64)).is_err());
    m.to(CPU, Some(DType::F64)).unwrap();
    assert_eq!(m.weight.dtype(), DType::F64);
    assert_eq!(m.bias.as_ref().unwrap().dtype(), DType::F64);
    assert!(m.weight.requires_grad() && m.weight.is_leaf());
}

fn non_leaf_refused<T>(r: strata_autograd::Result<T>, what: &str) {
    match r {
        Err(AutogradError::Optimizer { msg, .. }) => {
            assert!(msg.contains("non-leaf"), "{what}: {msg}")
        }
        Err(e) => panic!("{what}: {e:?}"),
        Ok(_) => panic!("{what}: accepted"),
    }
}

#[test]
fn optimizers_refuse_a_parameter_that_is_not_a_leaf() {
    use strata_autograd::{Adam, AdamW, Optimizer, Sgd};
    // x = torch.ones(3, requires_grad=True); y = x * 2
    // torch.optim.SGD([y], lr=0.1), Adam([y], lr=0.1), AdamW([y]) each
    // raise ValueError("can't optimize a non-leaf Tensor"). Strata took y
    // and every step silently skipped it (a non-leaf never gets a .grad).
    let x = param(&[1.0, 1.0, 1.0]);
    let y = x.mul(2.0).unwrap();
    non_leaf_refused(Sgd::new(vec![x.clone(), y.clone()], 0.1, 0.0), "SGD");
    non_leaf_refused(Adam::new(vec![y.clone()], 0.1), "Adam");
    // AdamW::new cannot fail: its first step refuses, updating nothing.
    let mut opt = AdamW::new(vec![x.clone(), y.clone()]);
    x.set_grad(Some(Tensor::ones(&[3], DType::F32, CPU).unwrap()))
        .unwrap();
    non_leaf_refused(opt.step(), "AdamW step");
    assert_eq!(values(&x), vec![1.0; 3]);
    // PyTorch's lr check comes first: SGD([y], lr=-1) is "Invalid
    // learning rate".
    assert!(matches!(
        Sgd::new(vec![y.clone()], -1.0, 0.0),
        Err(AutogradError::Hyperparameter { .. })
    ));
    // A parameter that stopped being a leaf after the optimizer was made
    // (an in-place op gave a variable not requiring grad a history) is
    // refused at the step too, before any update.
    let z = constant(&[0.0, 0.0, 0.0]);
    let mut opt = Sgd::new(vec![x.clone(), z.clone()], 0.5, 0.0).unwrap();
    z.add_(&x).unwrap();
    non_leaf_refused(opt.step(), "SGD step");
    assert_eq!(values(&x), vec![1.0; 3]);
}

#[test]
fn an_optimizer_step_inside_an_autocast_region_reaches_the_next_forward() {
    use strata_autograd::{AutocastGuard, DeviceType, Optimizer, Sgd};
    // w = ones(2, 2); x = ones(1, 2); SGD lr 0.5; each iteration
    // y = x @ w, y.float().sum().backward(), step. With a region per
    // iteration PyTorch gives y = [[2, 2]], [[1, 1]], [[0, 0]]. With one
    // region around the loop PyTorch 2.15's autocast cache hands out the
    // bf16 copy of the first w every time (y = [[2, 2]] thrice, while w
    // goes to -0.5): strata's did too. It now casts a parameter again
    // once it was modified in place.
    let w = Var::parameter(Tensor::ones(&[2, 2], DType::F32, CPU).unwrap()).unwrap();
    let x = Var::new(Tensor::ones(&[1, 2], DType::F32, CPU).unwrap());
    let mut opt = Sgd::new(vec![w.clone()], 0.5, 0.0).unwrap();
    let _region = AutocastGuard::new(DeviceType::Cpu, DType::BF16).unwrap();
    for expected in [2.0f32, 1.0, 0.0] {
        let y = x.matmul(&w).unwrap();
        assert_eq!(y.dtype(), DType::BF16);
        assert_eq!(
            y.to_dtype(DType::F32).unwrap().to_vec::<f32>().unwrap(),
            vec![expected; 2]
        );
        opt.zero_grad(true).unwrap();
        y.to_dtype(DType::F32)
            .unwrap()
            .sum(None, false)
            .unwrap()
            .backward()
            .unwrap();
        assert_eq!(grad(&w), vec![1.0; 4]);
        opt.step().unwrap();
    }
    assert_eq!(values(&w), vec![-0.5; 4]);
    // The stale copy was replaced, not added to.
    assert_eq!(strata_autograd::autocast::autocast_cache_len(), 1);
}
