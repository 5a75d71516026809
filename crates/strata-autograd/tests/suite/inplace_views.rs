//! Recorded in-place ops on views (session 42): the base's history is
//! rebased onto a `CopySlices` node (PyTorch's), the view's becomes a view
//! of it (`AsStridedBackward`), and views of the base taken before the op
//! have their history regenerated from the base's new one.
//!
//! Every expected value is PyTorch 2.15's on the CPU in float64, printed by
//! `benches/anchors/gen_inplace_views_s42.py` (the case name is noted beside
//! each); then a property test against the same computation written out of
//! place (the region replaced with a mask and a scatter) on random shapes,
//! chains of views and ops.

use proptest::prelude::*;
use strata_autograd::{AutogradError, NoGradGuard, Var};
use strata_tensor::{DType, Device, Tensor};

const CPU: Device = Device::Cpu;

fn t64(v: &[f64], shape: &[usize]) -> Tensor {
    Tensor::from_slice(v, shape, CPU).unwrap()
}

/// A leaf requiring grad of f64 values.
fn p64(v: &[f64]) -> Var {
    Var::parameter(t64(v, &[v.len()])).unwrap()
}

/// A leaf not requiring grad.
fn c64(v: &[f64], shape: &[usize]) -> Var {
    Var::new(t64(v, shape))
}

fn vals(v: &Var) -> Vec<f64> {
    v.to_vec::<f64>().unwrap()
}

fn g64(v: &Var) -> Vec<f64> {
    v.grad().expect("a gradient").to_vec::<f64>().unwrap()
}

#[track_caller]
fn close(got: &[f64], want: &[f64]) {
    assert_eq!(got.len(), want.len(), "{got:?} vs {want:?}");
    for (g, w) in got.iter().zip(want) {
        assert!(
            (g - w).abs() <= 1e-6 * (1.0 + w.abs()),
            "{got:?} vs {want:?}"
        );
    }
}

fn sum(v: &Var) -> Var {
    v.sum(None, false).unwrap()
}

fn range(n: usize, f: impl Fn(f64) -> f64) -> Vec<f64> {
    (0..n).map(|i| f(i as f64)).collect()
}

#[test]
fn narrow_mul_scalar_gives_the_base_and_the_view_pytorchs_gradients() {
    // narrow_mul_scalar: y = x * 2; v = y.narrow(0, 1, 2); v.mul_(3)
    let x = p64(&[1.0, 2.0, 3.0, 4.0]);
    let y = x.mul(2.0).unwrap();
    let v = y.narrow(0, 1, 2).unwrap();
    v.mul_(3.0).unwrap();
    close(&vals(&y), &[2.0, 12.0, 18.0, 8.0]);
    assert_eq!(y.grad_fn_name(), Some("CopySlices"));
    assert_eq!(v.grad_fn_name(), Some("AsStridedBackward"));
    sum(&y)
        .backward_with(None, true)
        .expect("backward through CopySlices");
    close(&g64(&x), &[2.0, 6.0, 6.0, 2.0]);
    x.zero_grad(true).unwrap();
    sum(&v).backward().unwrap();
    close(&g64(&x), &[0.0, 6.0, 6.0, 0.0]);
}

#[test]
fn each_op_with_a_broadcast_var_operand_on_a_narrow_of_a_2d_base() {
    // narrow_{add,sub,mul,div}_var: x = 0.5 + 0.25 i; b = [1.5, -2, 2.5, 3];
    // y = (x * 1.5).reshape(3, 4); y.narrow(0, 1, 2).<op>(b);
    // ((y * y) * w).sum(), w = arange(1, 13).reshape(3, 4) / 4
    type Case = (&'static str, [f64; 12], [f64; 12], [f64; 4]);
    let cases: [Case; 4] = [
        (
            "add_",
            [
                0.75, 1.125, 1.5, 1.875, 3.75, 0.625, 5.5, 6.375, 5.25, 2.125, 7.0, 7.875,
            ],
            [
                0.5625, 1.6875, 3.375, 5.625, 14.0625, 2.8125, 28.875, 38.25, 35.4375, 15.9375,
                57.75, 70.875,
            ],
            [33.0, 12.5, 57.75, 72.75],
        ),
        (
            "sub_",
            [
                0.75, 1.125, 1.5, 1.875, 0.75, 4.625, 0.5, 0.375, 2.25, 6.125, 2.0, 1.875,
            ],
            [
                0.5625, 1.6875, 3.375, 5.625, 2.8125, 20.8125, 2.625, 2.25, 15.1875, 45.9375, 16.5,
                16.875,
            ],
            [-12.0, -44.5, -12.75, -12.75],
        ),
        (
            "mul_",
            [
                0.75, 1.125, 1.5, 1.875, 3.375, -5.25, 7.5, 10.125, 5.625, -8.25, 11.25, 14.625,
            ],
            [
                0.5625, 1.6875, 3.375, 5.625, 18.984375, 47.25, 98.4375, 182.25, 56.953125, 123.75,
                232.03125, 394.875,
            ],
            [113.90625, -211.5, 357.1875, 564.46875],
        ),
        (
            "div_",
            [
                0.75, 1.125, 1.5, 1.875, 1.5, -1.3125, 1.2, 1.125, 2.5, -2.0625, 1.8, 1.625,
            ],
            [
                0.5625, 1.6875, 3.375, 5.625, 3.75, 2.953125, 2.52, 2.25, 11.25, 7.734375, 5.94,
                4.875,
            ],
            [-22.5, 13.21875, -9.144, -6.96875],
        ),
    ];
    let w = c64(&range(12, |i| (i + 1.0) / 4.0), &[3, 4]);
    for (op, y_want, xg, bg) in cases {
        let x = p64(&range(12, |i| 0.5 + 0.25 * i));
        let b = p64(&[1.5, -2.0, 2.5, 3.0]);
        let y = x.mul(1.5).unwrap().reshape(&[3, 4]).unwrap();
        let v = y.narrow(0, 1, 2).unwrap();
        match op {
            "add_" => v.add_(&b),
            "sub_" => v.sub_(&b),
            "mul_" => v.mul_(&b),
            _ => v.div_(&b),
        }
        .unwrap();
        close(&vals(&y), &y_want);
        sum(&y.mul(&y).unwrap().mul(&w).unwrap())
            .backward()
            .unwrap();
        close(&g64(&x), &xg);
        close(&g64(&b), &bg);
    }
}

#[test]
fn scalar_ops_and_zero_on_a_transposed_view() {
    // transpose_{op}_scalar: y = x.reshape(2, 3).pow(2); y.t().<op>(c);
    // (y * w[:2, :3]).sum()
    let cases: [(&str, [f64; 6]); 5] = [
        ("add_", [0.5, 2.0, 4.5, 10.0, 15.0, 21.0]),
        ("sub_", [0.5, 2.0, 4.5, 10.0, 15.0, 21.0]),
        ("mul_", [-1.5, -6.0, -13.5, -30.0, -45.0, -63.0]),
        ("div_", [0.125, 0.5, 1.125, 2.5, 3.75, 5.25]),
        ("zero_", [0.0; 6]),
    ];
    let w = c64(&[0.25, 0.5, 0.75, 1.25, 1.5, 1.75], &[2, 3]);
    for (op, xg) in cases {
        let x = p64(&range(6, |i| 1.0 + i));
        let xr = x.reshape(&[2, 3]).unwrap();
        let y = xr.mul(&xr).unwrap();
        let v = y.t().unwrap();
        match op {
            "add_" => v.add_(2.0),
            "sub_" => v.sub_(0.5),
            "mul_" => v.mul_(-3.0),
            "div_" => v.div_(4.0),
            _ => v.zero_(),
        }
        .unwrap();
        assert_eq!(y.grad_fn_name(), Some("CopySlices"), "{op}");
        sum(&y.mul(&w).unwrap()).backward().unwrap();
        close(&g64(&x), &xg);
    }
}

#[test]
fn a_view_of_a_view_of_a_view_permute_narrow_squeeze() {
    // permute_narrow_squeeze_mul_var
    let x = p64(&range(24, |i| 0.1 * (i + 1.0)));
    let b = p64(&range(4, |i| 1.0 + 0.5 * i));
    let y = x.reshape(&[2, 3, 4]).unwrap().sin().unwrap();
    let vv = y
        .permute(&[2, 0, 1])
        .unwrap()
        .narrow(1, 1, 1)
        .unwrap()
        .squeeze_dims(&[1])
        .unwrap();
    assert_eq!(vv.shape(), &[4, 3]);
    vv.mul_(&b.unsqueeze(1).unwrap()).unwrap();
    assert_eq!(vv.grad_fn_name(), Some("AsStridedBackward"));
    sum(&y.mul(&y).unwrap()).backward().unwrap();
    close(
        &g64(&x),
        &[
            0.198669, 0.389418, 0.564642, 0.717356, 0.841471, 0.932039, 0.98545, 0.999574,
            0.973848, 0.909297, 0.808496, 0.675463, 0.515501, 0.753723, 0.56448, -0.364838,
            -0.255541, -0.995671, -2.447432, -4.730016, -0.871576, -2.141105, -3.974764, -6.226029,
        ],
    );
    close(&g64(&b), &[5.313948, 7.71947, 9.786225, 11.411099]);
}

#[test]
fn view_narrow_flatten_and_a_reshape_that_copies() {
    // view_narrow_flatten_add_var
    let x = p64(&range(8, |i| i));
    let b = p64(&range(4, |i| 10.0 * i));
    let y = x.mul(3.0).unwrap();
    // A reshape of a non-contiguous narrow is a copy (reshape_copy_is_view:
    // False): modifying it leaves y alone and records a plain node.
    let copy = y
        .view(&[2, 4])
        .unwrap()
        .narrow(1, 2, 2)
        .unwrap()
        .reshape(&[4])
        .unwrap();
    copy.add_(&b).unwrap();
    assert_eq!(copy.grad_fn_name(), Some("AddBackward_"));
    assert_eq!(y.grad_fn_name(), Some("MulBackward"));
    let v2 = y
        .view(&[2, 4])
        .unwrap()
        .narrow(0, 1, 1)
        .unwrap()
        .flatten(0, 1)
        .unwrap();
    v2.add_(&b).unwrap();
    close(&vals(&y), &[0.0, 3.0, 6.0, 9.0, 12.0, 25.0, 38.0, 51.0]);
    sum(&y.mul(&c64(&range(8, |i| i), &[8])).unwrap())
        .backward()
        .unwrap();
    close(&g64(&x), &[0.0, 3.0, 6.0, 9.0, 12.0, 15.0, 18.0, 21.0]);
    close(&g64(&b), &[4.0, 5.0, 6.0, 7.0]);
}

/// Element-wise results are laid out as PyTorch lays them out (session
/// 56), so `x.t() + 0` is transposed and its reshape copies; its
/// `contiguous()` is a row-major copy whose reshape is a view. PyTorch
/// 2.15:
///
/// ```python
/// x = torch.tensor([[1., 2., 3.], [4., 5., 6.]], requires_grad=True)
/// y = x.t() + 0            # strides (1, 3)
/// y.reshape(-1).mul_(0)    # a copy: y unchanged
/// c = y.contiguous()       # strides (2, 1), CloneBackward0
/// c.reshape(-1).mul_(2)    # a view: c doubled (CopySlices)
/// (c * torch.tensor([[1., 2.], [3., 4.], [5., 6.]])).sum().backward()
/// x.grad                   # [[2., 6., 10.], [4., 8., 12.]]
/// x.contiguous() is x      # True
/// ```
#[test]
fn contiguous_of_a_transposed_sum_is_a_copy_whose_reshape_is_a_view() {
    let x = Var::parameter(t64(&range(6, |i| i + 1.0), &[2, 3])).unwrap();
    let y = x.t().unwrap().add(0.0).unwrap();
    assert_eq!(y.data().strides(), &[1, 3]);
    let copy = y.reshape(&[-1]).unwrap();
    assert!(!copy.data().same_storage(y.data()));
    copy.mul_(0.0).unwrap();
    close(&vals(&y), &[1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
    let c = y.contiguous().unwrap();
    assert_eq!(c.data().strides(), &[2, 1]);
    assert_eq!(c.grad_fn_name(), Some("CloneBackward"));
    let v = c.reshape(&[-1]).unwrap();
    assert!(v.data().same_storage(c.data()));
    v.mul_(2.0).unwrap();
    close(&vals(&c), &[2.0, 8.0, 4.0, 10.0, 6.0, 12.0]);
    close(&vals(&y), &[1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
    let w = c64(&range(6, |i| i + 1.0), &[3, 2]);
    sum(&c.mul(&w).unwrap()).backward().unwrap();
    close(&g64(&x), &[2.0, 6.0, 10.0, 4.0, 8.0, 12.0]);
    // A row-major variable is its own contiguous(): no copy, no node.
    let z = x.contiguous().unwrap();
    assert!(z.data().same_storage(x.data()));
    assert!(z.is_leaf());
    assert_eq!(z.grad_fn_name(), None);
}

#[test]
fn a_view_of_a_variable_not_requiring_grad_rebases_it() {
    // untracked_base_add: z = zeros(3); z[0:2].add_(x[1:3]);
    // ((z * z) + x).sum()
    let x = p64(&[1.0, 2.0, 3.0]);
    let z = c64(&[0.0; 3], &[3]);
    z.narrow(0, 0, 2)
        .unwrap()
        .add_(&x.narrow(0, 1, 2).unwrap())
        .unwrap();
    assert_eq!(z.grad_fn_name(), Some("CopySlices"));
    assert!(z.requires_grad() && !z.is_leaf());
    sum(&z.mul(&z).unwrap().add(&x).unwrap())
        .backward()
        .unwrap();
    close(&g64(&x), &[1.0, 5.0, 7.0]);
}

#[test]
fn views_taken_before_the_op_have_their_history_regenerated() {
    // two_halves: a = y[0:2]; c = y[2:4]; a.mul_(2); c.mul_(3) (c's history
    // is out of date when it is modified); (y * y).sum()
    let x = p64(&[1.0, 2.0, 3.0, 4.0]);
    let y = x.mul(1.0).unwrap();
    let (a, c) = (y.narrow(0, 0, 2).unwrap(), y.narrow(0, 2, 2).unwrap());
    a.mul_(2.0).unwrap();
    c.mul_(3.0).unwrap();
    sum(&y.mul(&y).unwrap()).backward().unwrap();
    close(&g64(&x), &[8.0, 16.0, 54.0, 72.0]);

    // view_before_base_mul: v = y[0:2]; y.mul_(2); v.sum()
    let x = p64(&[1.0, 2.0, 3.0]);
    let y = x.mul(1.0).unwrap();
    let v = y.narrow(0, 0, 2).unwrap();
    y.mul_(2.0).unwrap();
    assert_eq!(v.grad_fn_name(), Some("AsStridedBackward"));
    sum(&v).backward().unwrap();
    close(&g64(&x), &[2.0, 2.0, 0.0]);

    // view_before_base_add_var: v = y.t(); y.add_(w); (v * v).sum()
    let x = p64(&[1.0, 2.0, 3.0]);
    let w = p64(&[10.0, 20.0, 30.0]);
    let y = x.mul(1.0).unwrap();
    let v = y.t().unwrap();
    y.add_(&w).unwrap();
    sum(&v.mul(&v).unwrap()).backward().unwrap();
    close(&g64(&x), &[22.0, 44.0, 66.0]);
    close(&g64(&w), &[22.0, 44.0, 66.0]);

    // view_of_view_before_base_zero: vv = y.view(2, 2).t(); y.zero_();
    // ((vv + 1) ** 2).sum()
    let x = p64(&[1.0, 2.0, 3.0, 4.0]);
    let y = x.mul(1.0).unwrap();
    let vv = y.view(&[2, 2]).unwrap().transpose(0, 1).unwrap();
    y.zero_().unwrap();
    let vv1 = vv.add(1.0).unwrap();
    sum(&vv1.mul(&vv1).unwrap()).backward().unwrap();
    close(&g64(&x), &[0.0; 4]);

    // sibling_view_regenerated: a = y[0:3]; c = y[2:4]; a.mul_(5); (c * c).sum()
    let x = p64(&[1.0, 2.0, 3.0, 4.0]);
    let y = x.mul(1.0).unwrap();
    let a = y.narrow(0, 0, 3).unwrap();
    let c = y.narrow(0, 2, 2).unwrap();
    a.mul_(5.0).unwrap();
    close(&vals(&c), &[15.0, 4.0]);
    sum(&c.mul(&c).unwrap()).backward().unwrap();
    close(&g64(&x), &[0.0, 0.0, 150.0, 8.0]);

    // expand_before_base_mul: e = y.unsqueeze(0).expand(2, 3);
    // y.mul_([2, 3, 4]); (e * [[1], [2]]).sum()
    let x = p64(&[1.0, 2.0, 3.0]);
    let y = x.mul(1.0).unwrap();
    let e = y.unsqueeze(0).unwrap().expand(&[2, 3]).unwrap();
    y.mul_(&c64(&[2.0, 3.0, 4.0], &[3])).unwrap();
    sum(&e.mul(&c64(&[1.0, 2.0], &[2, 1])).unwrap())
        .backward()
        .unwrap();
    close(&g64(&x), &[6.0, 9.0, 12.0]);
}

#[test]
fn a_view_of_an_untracked_variable_taken_before_it_gained_a_history() {
    // untracked_view_before_base_add: z = zeros(3); v = z[0:2]; vv = v[0:1];
    // z.add_(x); ((v * v).sum() + x.sum() + (vv * 3).sum())
    let x = p64(&[1.0, 2.0, 3.0]);
    let z = c64(&[0.0; 3], &[3]);
    let v = z.narrow(0, 0, 2).unwrap();
    let vv = v.narrow(0, 0, 1).unwrap();
    z.add_(&x).unwrap();
    assert!(v.requires_grad());
    assert_eq!(v.grad_fn_name(), Some("AsStridedBackward"));
    let loss = sum(&v.mul(&v).unwrap())
        .add(&sum(&x))
        .unwrap()
        .add(&sum(&vv.mul(3.0).unwrap()))
        .unwrap();
    loss.backward().unwrap();
    close(&g64(&x), &[6.0, 5.0, 1.0]);
}

#[test]
fn the_other_operand_a_view_of_the_same_base_or_the_view_itself() {
    // other_operand_same_base and view_times_itself. PyTorch saves the
    // operand (a view of y) and refuses the backward as y changed; strata
    // saves a copy of an operand sharing self's storage (as for
    // `y.mul_(&y)`), so these are PyTorch's values with `.clone()` of the
    // operand (same history, old value saved).
    let wts = c64(&[1.0, 2.0, 3.0, 4.0], &[4]);
    let x = p64(&[1.0, 2.0, 3.0, 4.0]);
    let y = x.mul(1.0).unwrap();
    y.narrow(0, 0, 2)
        .unwrap()
        .mul_(&y.narrow(0, 2, 2).unwrap())
        .unwrap();
    close(&vals(&y), &[3.0, 8.0, 3.0, 4.0]);
    sum(&y.mul(&wts).unwrap()).backward().unwrap();
    close(&g64(&x), &[3.0, 8.0, 4.0, 8.0]);

    let x = p64(&[1.0, 2.0, 3.0, 4.0]);
    let y = x.mul(1.0).unwrap();
    let v = y.narrow(0, 1, 2).unwrap();
    v.mul_(&v).unwrap();
    close(&vals(&y), &[1.0, 4.0, 9.0, 4.0]);
    sum(&y.mul(&wts).unwrap()).backward().unwrap();
    close(&g64(&x), &[1.0, 8.0, 18.0, 4.0]);
}

#[test]
fn two_in_place_ops_on_the_same_view_then_base_and_view_losses() {
    // two_ops_same_view: y = x.reshape(3, 2) * 1; v = y[1]; v.add_(b);
    // v.mul_(b); (y.sum() + (v * v).sum())
    let x = p64(&range(6, |i| i + 1.0));
    let b = p64(&[2.0, 3.0]);
    let y = x.reshape(&[3, 2]).unwrap().mul(1.0).unwrap();
    let v = y.narrow(0, 1, 1).unwrap().squeeze_dims(&[0]).unwrap();
    v.add_(&b).unwrap();
    v.mul_(&b).unwrap();
    close(&vals(&y), &[1.0, 2.0, 10.0, 21.0, 5.0, 6.0]);
    sum(&y)
        .add(&sum(&v.mul(&v).unwrap()))
        .unwrap()
        .backward()
        .unwrap();
    close(&g64(&x), &[1.0, 1.0, 42.0, 129.0, 1.0, 1.0]);
    close(&g64(&b), &[147.0, 430.0]);
}

#[test]
fn a_saved_tensor_of_the_base_modified_through_a_view_fails_at_backward() {
    // saved_base_modified: s = y * y; y[0:1].mul_(2); s.sum().backward()
    // is an error (modified by an inplace operation).
    let x = p64(&[1.0, 2.0, 3.0]);
    let y = x.mul(1.0).unwrap();
    let s = y.mul(&y).unwrap();
    y.narrow(0, 0, 1).unwrap().mul_(2.0).unwrap();
    let e = sum(&s).backward().unwrap_err();
    assert!(
        matches!(e, AutogradError::SavedTensorModified { .. }),
        "{e:?}"
    );
    assert!(x.grad().is_none());
    // A saved operand of the in-place op itself modified afterwards.
    let x = p64(&[1.0, 2.0, 3.0]);
    let b = p64(&[2.0, 2.0]);
    let y = x.mul(1.0).unwrap();
    y.narrow(0, 1, 2).unwrap().mul_(&b).unwrap();
    {
        let _g = NoGradGuard::new();
        b.data().add_(1.0).unwrap();
    }
    let e = sum(&y).backward().unwrap_err();
    assert!(
        matches!(
            e,
            AutogradError::SavedTensorModified {
                op: "CopySlices",
                ..
            }
        ),
        "{e:?}"
    );
}

#[test]
fn what_still_refuses() {
    // view_of_leaf: a view of a leaf that requires grad.
    let x = p64(&[1.0, 2.0, 3.0]);
    let v = x.narrow(0, 0, 2).unwrap();
    let e = v.mul_(2.0).unwrap_err();
    assert!(
        matches!(e, AutogradError::InPlaceOnLeaf { op: "mul_" }),
        "{e:?}"
    );
    let e = x.t().unwrap().zero_().unwrap_err();
    assert!(matches!(e, AutogradError::InPlaceOnLeaf { .. }), "{e:?}");
    assert_eq!(vals(&x), vec![1.0, 2.0, 3.0]);

    // chunk_output_inplace / view_of_split_output_inplace: outputs of a
    // function returning several views (and views of them).
    let y = x.mul(1.0).unwrap();
    let e = y.chunk(2, 0).unwrap()[0].mul_(2.0).unwrap_err();
    assert!(matches!(e, AutogradError::InPlaceOnView { .. }), "{e:?}");
    assert!(e.to_string().contains("narrow"), "{e}");
    let piece = y.split(2, 0).unwrap().pop().unwrap();
    let e = piece
        .transpose(0, 0)
        .unwrap()
        .add_(&x.narrow(0, 0, 1).unwrap())
        .unwrap_err();
    assert!(matches!(e, AutogradError::InPlaceOnView { .. }), "{e:?}");
    assert_eq!(vals(&y), vec![1.0, 2.0, 3.0]);

    // A view made in no_grad mode of a variable not requiring grad,
    // modified in place with grad mode on and an operand requiring grad
    // (PyTorch: "A view was created in no_grad mode ...").
    let z = c64(&[0.0; 3], &[3]);
    let v = {
        let _g = NoGradGuard::new();
        z.narrow(0, 0, 2).unwrap()
    };
    let e = v.add_(&x.narrow(0, 0, 2).unwrap()).unwrap_err();
    assert!(matches!(e, AutogradError::InPlaceOnView { .. }), "{e:?}");
    assert!(e.to_string().contains("no_grad"), "{e}");
    assert_eq!(vals(&z), vec![0.0; 3]);

    // A view made to require grad itself is a leaf: a view of it modified
    // in place is a view of a leaf requiring grad (PyTorch: "a view of a
    // leaf Variable that requires grad is being used in an in-place
    // operation").
    let u = z.narrow(0, 0, 2).unwrap();
    u.requires_grad_(true).unwrap();
    let e = u.narrow(0, 0, 1).unwrap().mul_(2.0).unwrap_err();
    assert!(matches!(e, AutogradError::InPlaceOnLeaf { .. }), "{e:?}");
    // Made not to require grad again, it no longer follows z: strata
    // refuses a recorded in-place op on it (PyTorch rebases z).
    u.requires_grad_(false).unwrap();
    let e = u.add_(&x.narrow(0, 0, 2).unwrap()).unwrap_err();
    assert!(matches!(e, AutogradError::InPlaceOnView { .. }), "{e:?}");

    // A base whose elements share memory (strata only: a variable made of
    // an expanded tensor) cannot have its gradient laid out as itself.
    let e3 = Var::new(t64(&[1.0, 2.0, 3.0], &[3]).expand(&[2, 3]).unwrap());
    let e = e3
        .narrow(0, 0, 1)
        .unwrap()
        .add_(&x.unsqueeze(0).unwrap())
        .unwrap_err();
    assert!(matches!(e, AutogradError::InPlaceOnView { .. }), "{e:?}");
    assert!(e.to_string().contains("clone the base"), "{e}");
    assert_eq!(vals(&e3), vec![1.0, 2.0, 3.0, 1.0, 2.0, 3.0]);
}

#[test]
fn in_no_grad_mode_nothing_is_recorded() {
    // no_grad_inplace_on_view: v = y[0:2]; with no_grad: v.mul_(10)
    let x = p64(&[1.0, 2.0, 3.0]);
    let y = x.mul(1.0).unwrap();
    let v = y.narrow(0, 0, 2).unwrap();
    {
        let _g = NoGradGuard::new();
        v.mul_(10.0).unwrap();
    }
    close(&vals(&y), &[10.0, 20.0, 3.0]);
    assert_eq!(y.grad_fn_name(), Some("MulBackward"));
    sum(&y).backward().unwrap();
    close(&g64(&x), &[1.0, 1.0, 1.0]);
    // In no_grad, a view of a leaf requiring grad may be modified (init).
    let p = p64(&[1.0, 2.0]);
    {
        let _g = NoGradGuard::new();
        p.narrow(0, 1, 1).unwrap().mul_(3.0).unwrap();
    }
    assert!(p.is_leaf());
    close(&vals(&p), &[1.0, 6.0]);
}

#[test]
fn a_retained_gradient_follows_the_views_new_history() {
    // retain_grad_view: v.retain_grad(); v.mul_(3); (y * y).sum(): v.grad is
    // None (the loss does not go through v's new history), x.grad = [2, 36, 54]
    let x = p64(&[1.0, 2.0, 3.0]);
    let y = x.mul(1.0).unwrap();
    let v = y.narrow(0, 1, 2).unwrap();
    v.retain_grad().unwrap();
    v.mul_(3.0).unwrap();
    sum(&y.mul(&y).unwrap()).backward().unwrap();
    assert!(v.grad().is_none());
    close(&g64(&x), &[2.0, 36.0, 54.0]);
    // Through v itself, its retained gradient is the new value's.
    let x = p64(&[1.0, 2.0, 3.0]);
    let y = x.mul(1.0).unwrap();
    let v = y.narrow(0, 1, 2).unwrap();
    v.retain_grad().unwrap();
    v.mul_(3.0).unwrap();
    sum(&v.mul(2.0).unwrap()).backward().unwrap();
    close(&g64(&v), &[2.0, 2.0]);
    close(&g64(&x), &[0.0, 6.0, 6.0]);
}

#[test]
fn a_retained_gradient_of_the_base_follows_its_new_history() {
    // retain_grad_base: y.retain_grad(); y[1:3].mul_(3); (y * y).sum()
    let x = p64(&[1.0, 2.0, 3.0]);
    let y = x.mul(1.0).unwrap();
    y.retain_grad().unwrap();
    y.narrow(0, 1, 2).unwrap().mul_(3.0).unwrap();
    assert_eq!(y.grad_fn_name(), Some("CopySlices"));
    sum(&y.mul(&y).unwrap()).backward().unwrap();
    close(&g64(&y), &[2.0, 12.0, 18.0]);
    close(&g64(&x), &[2.0, 36.0, 54.0]);
}

#[test]
fn a_non_contiguous_base_with_a_storage_offset() {
    // non_contiguous_base: the base is a leaf made of a transposed narrow
    // of a bigger tensor (a storage offset, strides with gaps); the region
    // is addressed relative to it.
    let big = t64(&range(12, |i| i), &[3, 4]);
    let z = Var::new(big.narrow(1, 1, 2).unwrap().transpose(0, 1).unwrap()); // [2, 3]
    let x = p64(&[1.0, 2.0]);
    let v = z.narrow(1, 1, 2).unwrap(); // [2, 2]
    v.mul_(&x.unsqueeze(1).unwrap()).unwrap();
    close(&vals(&z), &[1.0, 5.0, 9.0, 2.0, 12.0, 20.0]);
    let w = c64(&range(6, |i| i + 1.0), &[2, 3]);
    sum(&z.mul(&w).unwrap()).backward().unwrap();
    close(&g64(&x), &[37.0, 90.0]);
}

// ---------------------------------------------------------------------------
// Against the same computation out of place
// ---------------------------------------------------------------------------

/// One view op of a random chain, with what is needed to scatter back.
#[derive(Clone, Debug)]
enum Step {
    Narrow(i64, i64, i64, Vec<usize>),
    Transpose(i64, i64),
    Unsqueeze(i64),
    Squeeze(i64),
    Permute(Vec<i64>, Vec<i64>),
}

/// The chain of views `raw` describes for a base of `shape`.
fn chain(shape: &[usize], raw: &[(u8, u8, u8, u8)]) -> Vec<Step> {
    let mut shape = shape.to_vec();
    let mut steps = Vec::new();
    for &(k, a, b, c) in raw {
        let nd = shape.len();
        let step = match k % 5 {
            0 if nd > 0 => {
                let d = a as usize % nd;
                let len = 1 + b as usize % shape[d];
                let start = c as usize % (shape[d] - len + 1);
                Step::Narrow(d as i64, start as i64, len as i64, shape.clone())
            }
            1 if nd > 1 => Step::Transpose((a as usize % nd) as i64, (b as usize % nd) as i64),
            2 if nd < 4 => Step::Unsqueeze((a as usize % (nd + 1)) as i64),
            3 if shape.contains(&1) => {
                let ones: Vec<usize> = (0..nd).filter(|&d| shape[d] == 1).collect();
                Step::Squeeze(ones[a as usize % ones.len()] as i64)
            }
            4 if nd > 1 => {
                let mut p: Vec<i64> = (0..nd as i64).collect();
                p.rotate_left(a as usize % nd);
                if b % 2 == 1 {
                    p.swap(0, nd - 1);
                }
                let mut inv = vec![0i64; nd];
                for (i, &d) in p.iter().enumerate() {
                    inv[d as usize] = i as i64;
                }
                Step::Permute(p, inv)
            }
            _ => continue,
        };
        shape = match &step {
            Step::Narrow(d, _, len, _) => {
                let mut s = shape.clone();
                s[*d as usize] = *len as usize;
                s
            }
            Step::Transpose(a, b) => {
                let mut s = shape.clone();
                s.swap(*a as usize, *b as usize);
                s
            }
            Step::Unsqueeze(d) => {
                let mut s = shape.clone();
                s.insert(*d as usize, 1);
                s
            }
            Step::Squeeze(d) => {
                let mut s = shape.clone();
                s.remove(*d as usize);
                s
            }
            Step::Permute(p, _) => p.iter().map(|&d| shape[d as usize]).collect(),
        };
        steps.push(step);
    }
    steps
}

fn apply(v: &Var, steps: &[Step]) -> Var {
    let mut v = v.clone();
    for s in steps {
        v = match s {
            Step::Narrow(d, start, len, _) => v.narrow(*d, *start, *len),
            Step::Transpose(a, b) => v.transpose(*a, *b),
            Step::Unsqueeze(d) => v.unsqueeze(*d),
            Step::Squeeze(d) => v.squeeze_dims(&[*d]),
            Step::Permute(p, _) => v.permute(p),
        }
        .unwrap();
    }
    v
}

/// `u` (of the view's shape) placed in zeros of the base's shape, out of
/// place (differentiable: zeros concatenated around narrows).
fn scatter(u: &Var, steps: &[Step]) -> Var {
    let mut u = u.clone();
    for s in steps.iter().rev() {
        u = match s {
            Step::Narrow(d, start, len, shape) => {
                let d_ = *d as usize;
                let zeros = |n: usize| {
                    let mut s = shape.clone();
                    s[d_] = n;
                    Var::new(Tensor::zeros(&s, DType::F64, CPU).unwrap())
                };
                let before = zeros(*start as usize);
                let after = zeros(shape[d_] - (*start + *len) as usize);
                let mut parts = Vec::new();
                if *start > 0 {
                    parts.push(&before);
                }
                parts.push(&u);
                if shape[d_] > (*start + *len) as usize {
                    parts.push(&after);
                }
                Var::cat(&parts, *d)
            }
            Step::Transpose(a, b) => u.transpose(*a, *b),
            Step::Unsqueeze(d) => u.squeeze_dims(&[*d]),
            Step::Squeeze(d) => u.unsqueeze(*d),
            Step::Permute(_, inv) => u.permute(inv),
        }
        .unwrap();
    }
    u
}

/// The in-place op `kind` on `v` with operand `b` (or the scalar `c`), or
/// the same op out of place.
fn op(v: &Var, kind: u8, b: &Var, c: f64, in_place: bool) -> Var {
    match (kind % 9, in_place) {
        (0, true) => v.add_(b).cloned(),
        (1, true) => v.sub_(b).cloned(),
        (2, true) => v.mul_(b).cloned(),
        (3, true) => v.div_(b).cloned(),
        (4, true) => v.add_(c).cloned(),
        (5, true) => v.mul_(c).cloned(),
        (6, true) => v.div_(c).cloned(),
        (7, true) => v.sub_(c).cloned(),
        (_, true) => v.zero_().cloned(),
        (0, false) => v.add(b),
        (1, false) => v.sub(b),
        (2, false) => v.mul(b),
        (3, false) => v.div(b),
        (4, false) => v.add(c),
        (5, false) => v.mul(c),
        (6, false) => v.div(c),
        (7, false) => v.sub(c),
        (_, false) => v.mul(0.0),
    }
    .unwrap()
}

fn rand64(shape: &[usize], seed: u64, f: impl Fn(f64) -> f64) -> Tensor {
    let t = Tensor::rand(shape, DType::F64, seed, CPU).unwrap();
    let v: Vec<f64> = t.to_vec::<f64>().unwrap().into_iter().map(f).collect();
    t64(&v, shape)
}

/// `x`'s and `b`'s gradients of the loss through the base, through the
/// view, and through a view taken before the op (regenerated), with the op
/// in place (`true`) or out of place.
fn run(
    shape: &[usize],
    steps: &[Step],
    kind: u8,
    b_shape: &[usize],
    seed: u64,
    in_place: bool,
) -> Vec<Vec<f64>> {
    let x = Var::parameter(rand64(shape, seed, |u| u * 2.0 - 1.0)).unwrap();
    let b = Var::parameter(rand64(b_shape, seed ^ 1, |u| {
        (0.5 + u) * if u > 0.5 { 1.0 } else { -1.0 }
    }))
    .unwrap();
    let c = 1.75;
    let y = x.sin().unwrap();
    let (y_new, v_new, early) = if in_place {
        let early = apply(&y, steps);
        let v = apply(&y, steps);
        op(&v, kind, &b, c, true);
        (y.clone(), v, early)
    } else {
        let v_old = apply(&y, steps);
        let v_new = op(&v_old, kind, &b, c, false);
        let ones = Var::new(Tensor::ones(v_new.shape(), DType::F64, CPU).unwrap());
        let mask = scatter(&ones, steps);
        let keep = mask.mul(-1.0).unwrap().add(1.0).unwrap();
        let y_new = y.mul(&keep).unwrap().add(&scatter(&v_new, steps)).unwrap();
        let early = apply(&y_new, steps);
        (y_new, v_new, early)
    };
    let w = Var::new(rand64(shape, seed ^ 2, |u| u - 0.25));
    let wv = Var::new(rand64(v_new.shape(), seed ^ 3, |u| u + 0.5));
    let mut out = vec![
        y_new.to_vec::<f64>().unwrap(),
        v_new.to_vec::<f64>().unwrap(),
    ];
    let losses = [
        sum(&y_new.mul(&w).unwrap())
            .add(&sum(&y_new.mul(&y_new).unwrap()))
            .unwrap(),
        sum(&v_new.mul(&wv).unwrap()),
        sum(&early.mul(&early).unwrap().mul(&wv).unwrap()),
    ];
    for loss in losses {
        x.zero_grad(true).unwrap();
        b.zero_grad(true).unwrap();
        loss.backward_with(None, true).unwrap();
        let g = |v: &Var| {
            v.grad()
                .map_or_else(|| vec![0.0; v.numel()], |g| g.to_vec::<f64>().unwrap())
        };
        out.push(g(&x));
        out.push(g(&b));
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn rebased_gradients_match_the_out_of_place_computation(
        shape in prop::collection::vec(1usize..5, 1..4),
        raw in prop::collection::vec(any::<(u8, u8, u8, u8)>(), 0..5),
        kind in any::<u8>(),
        ones in any::<u8>(),
        seed in any::<u64>(),
    ) {
        let steps = chain(&shape, &raw);
        let v_shape = apply(&Var::new(Tensor::zeros(&shape, DType::F64, CPU).unwrap()), &steps)
            .shape()
            .to_vec();
        // The operand broadcasts: some of its dims are 1.
        let b_shape: Vec<usize> = v_shape
            .iter()
            .enumerate()
            .map(|(i, &s)| if ones >> (i % 8) & 1 == 1 { 1 } else { s })
            .collect();
        let got = run(&shape, &steps, kind, &b_shape, seed, true);
        let want = run(&shape, &steps, kind, &b_shape, seed, false);
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            prop_assert_eq!(g.len(), w.len());
            for (a, e) in g.iter().zip(w) {
                prop_assert!((a - e).abs() <= 1e-9 * (1.0 + e.abs()),
                    "output {} of {:?} {:?} kind {}: {:?} vs {:?}", i, shape, steps, kind % 9, g, w);
            }
        }
    }
}

/// Session 73: in-place ops on `select` and `slice` views rebase their base
/// as on `narrow` ones. PyTorch 2.15 (float64):
/// ```python
/// x = torch.arange(1., 7., dtype=torch.float64, requires_grad=True)
/// y = x.reshape(2, 3) * 1
/// y.select(1, -1).mul_(torch.tensor([2., 3.], dtype=torch.float64))
/// w = y[:, ::2]; w.add_(w * 1)
/// (y * torch.tensor([[1., 10., 100.], [1e3, 1e4, 1e5]], dtype=torch.float64)).sum().backward()
/// y.flatten()  # [2, 2, 12, 8, 5, 36]
/// x.grad       # [2, 10, 400, 2000, 1e4, 6e5]
/// ```
#[test]
fn select_and_slice_views_take_in_place_ops_as_pytorchs() {
    let x = p64(&range(6, |i| i + 1.0));
    let y = x.reshape(&[2, 3]).unwrap().mul(1.0).unwrap();
    let v = y.select(1, -1).unwrap();
    v.mul_(&c64(&[2.0, 3.0], &[2])).unwrap();
    let w = y.slice(1, None, None, 2).unwrap();
    w.add_(&w.mul(1.0).unwrap()).unwrap();
    close(&vals(&y), &[2.0, 2.0, 12.0, 8.0, 5.0, 36.0]);
    let weights = c64(&[1.0, 10.0, 100.0, 1e3, 1e4, 1e5], &[2, 3]);
    sum(&y.mul(&weights).unwrap()).backward().unwrap();
    close(&g64(&x), &[2.0, 10.0, 400.0, 2000.0, 1e4, 6e5]);
}
