//! Session 30's sweep of hostile inputs to autograd (after
//! `hostile_sweep_s29.rs`). Each test asserts PyTorch's values (from
//! PyTorch 2.15 on the CPU, or worked out by hand), or the typed error and
//! the state left behind.
//!
//! Defects these tests found (fixed with them):
//!
//! * `Var::dropout` advanced the dropout generator before the tensor op
//!   refused an integer input; a failed call, and one that needs no mask
//!   (p = 1, no element), now draws nothing;
//! * `cross_entropy` with probability targets converted them to the
//!   logits' dtype: f32 logits with f64 targets gave an f32 loss (PyTorch:
//!   f64); the composition is now PyTorch's op by op;
//! * results made in inference mode could be modified in place after the
//!   region and saved for backward; they are now inference variables
//!   (`InferenceTensorInPlace`, `InferenceTensorSaved`, as PyTorch);
//! * a parameter captured by a checkpointed function and modified after
//!   its first use (inside the function through `.data()`, or by a step
//!   before the backward) was silently recomputed from its new value; the
//!   backward now refuses it (`SavedTensorModified`, before the pass
//!   changes any gradient), and an in-place op on it inside the function
//!   is `InPlaceOnLeaf`;
//! * `var`/`std` gradients with `correction >= N` divided by
//!   `max(0, N - correction)`; they are now PyTorch's.
//!
//! Session 45 added (fixed with them): a `checkpoint` (or
//! `checkpoint_blocks`) whose function drew from the generator and then
//! failed, by an error or a panic, left the generator advanced by those
//! draws; a failed call now leaves it as it was.
//!
//! Checked and left (fixed in session 31): `layer_norm` with `eps = inf`
//! gave -0.0 where PyTorch's CPU kernel gives 0.0 (its `+ beta`); see the
//! test.

use std::sync::Mutex;
use strata_autograd::{
    checkpoint, generator_state, inference_mode, manual_seed, no_grad, AutogradError, Var,
};
use strata_tensor::{CrossEntropyArgs, DType, Device, Reduction, Tensor, TensorError};

mod common;
use common::param;

const CPU: Device = Device::Cpu;

/// Serialises the tests that use the process-wide dropout generator (dropout
/// draws from it; checkpoint saves and restores it, and a restore racing
/// a draw on another thread undid the draw).
static GENERATOR: Mutex<()> = Mutex::new(());

fn grad_f32(v: &Var) -> Vec<f32> {
    v.grad().expect("a gradient").to_vec::<f32>().unwrap()
}

fn close(got: &[f32], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len(), "{got:?} vs {want:?}");
    for (a, b) in got.iter().zip(want) {
        assert!(
            (*a as f64 - b).abs() <= tol * b.abs().max(1.0),
            "{got:?} vs {want:?}"
        );
    }
}

// ---------------------------------------------------------------- dropout

#[test]
fn dropout_that_fails_draws_nothing_from_the_generator() {
    let _g = GENERATOR.lock().unwrap_or_else(|e| e.into_inner());
    manual_seed(7);
    let before = generator_state();
    // PyTorch: F.dropout(torch.tensor([1, 2, 3]), 0.5, True) raises
    // "result type Float can't be cast to the desired output type Long"
    // (after drawing its noise; strata checks first and draws nothing).
    let x = Var::new(Tensor::from_slice(&[1i64, 2, 3], &[3], CPU).unwrap());
    let err = x.dropout(0.5, true).unwrap_err();
    assert!(
        matches!(err, AutogradError::Tensor(TensorError::DType { .. })),
        "{err}"
    );
    assert_eq!(generator_state(), before);
    // A bad p draws nothing either.
    let f = param(&[1.0, 2.0]);
    for p in [-0.1, 1.5, f64::NAN] {
        assert!(f.dropout(p, true).is_err(), "{p}");
        assert_eq!(generator_state(), before, "{p}");
    }
    // Nor does a dropout that needs no mask (PyTorch's `_dropout` returns
    // the input for p = 0 or no element, zeros for p = 1, before drawing):
    // integer inputs pass through there.
    assert_eq!(
        x.dropout(1.0, true).unwrap().to_vec::<i64>().unwrap(),
        vec![0; 3]
    );
    assert_eq!(
        x.dropout(0.0, true).unwrap().to_vec::<i64>().unwrap(),
        vec![1, 2, 3]
    );
    let e = Var::parameter(Tensor::zeros(&[0, 3], DType::F32, CPU).unwrap()).unwrap();
    assert_eq!(e.dropout(0.5, true).unwrap().shape(), &[0, 3]);
    let y = f.dropout(1.0, true).unwrap();
    assert_eq!(generator_state(), before);
    // p = 1: zeros, and a zero gradient.
    assert_eq!(y.to_vec::<f32>().unwrap(), vec![0.0, 0.0]);
    y.sum(None, false).unwrap().backward().unwrap();
    assert_eq!(grad_f32(&f), vec![0.0, 0.0]);
    // A dropout that draws a mask advances the offset by one.
    f.dropout(0.5, true).unwrap();
    assert_eq!(generator_state(), (before.0, before.1 + 1));
}

// ---------------------------------------------------------- cross_entropy

#[test]
fn cross_entropy_with_probability_targets_promotes_as_pytorch() {
    // PyTorch: F.cross_entropy(x f32, t f64) is an f64 loss (the product
    // log_softmax(x) * t promotes); x.grad stays f32.
    let x = Var::parameter(
        Tensor::from_slice(&[1.0f32, 2.0, 0.5, 0.0, -1.0, 3.0], &[2, 3], CPU).unwrap(),
    )
    .unwrap();
    let t = Tensor::from_slice(&[0.25f64, 0.5, 0.25, 0.1, 0.2, 0.7], &[2, 3], CPU).unwrap();
    let args = |reduction| CrossEntropyArgs {
        reduction,
        ..CrossEntropyArgs::default()
    };
    let g_sum = [
        -0.018776118755340576,
        0.12853169441223145,
        -0.10975562036037445,
        -0.05338737741112709,
        -0.18285217881202698,
        0.23623955249786377,
    ];
    let g_mean: Vec<f64> = g_sum.iter().map(|g| g / 2.0).collect();
    let cases: [(Reduction, Vec<f64>, &[f64]); 3] = [
        (Reduction::Mean, vec![1.1276263769716024], &g_mean),
        (Reduction::Sum, vec![2.255252753943205], &g_sum),
        (
            Reduction::None,
            vec![1.0893688052892685, 1.1658839486539365],
            &g_sum,
        ),
    ];
    for (reduction, loss, grad) in cases {
        x.zero_grad(true).unwrap();
        let l = x.cross_entropy(&t, args(reduction)).unwrap();
        assert_eq!(l.dtype(), DType::F64, "{reduction:?}");
        let got = l.to_vec::<f64>().unwrap();
        for (a, b) in got.iter().zip(&loss) {
            assert!(
                (a - b).abs() < 1e-6 * b.abs(),
                "{reduction:?}: {got:?} vs {loss:?}"
            );
        }
        l.sum(None, false).unwrap().backward().unwrap();
        assert_eq!(x.grad().unwrap().dtype(), DType::F32);
        close(&grad_f32(&x), grad, 1e-6);
    }
    // With a class weight and label smoothing: 1.6078352394886315 (f64).
    x.zero_grad(true).unwrap();
    let w = Tensor::from_slice(&[1.0f32, 2.0, 0.5], &[3], CPU).unwrap();
    let a = CrossEntropyArgs {
        weight: Some(&w),
        label_smoothing: 0.1,
        ..CrossEntropyArgs::default()
    };
    let l = x.cross_entropy(&t, a).unwrap();
    assert_eq!(l.dtype(), DType::F64);
    assert!((l.item::<f64>().unwrap() - 1.6078352394886315).abs() < 1e-6);
    l.backward().unwrap();
    close(
        &grad_f32(&x),
        &[
            0.027391154319047928,
            -0.05776503309607506,
            0.030373789370059967,
            -0.04111826792359352,
            -0.20577400922775269,
            0.24689225852489471,
        ],
        1e-6,
    );
    // f16 targets on f32 logits: an f32 loss, 1.1274961233139038.
    x.zero_grad(true).unwrap();
    let l = x
        .cross_entropy(&t.to_dtype(DType::F16).unwrap(), args(Reduction::Mean))
        .unwrap();
    assert_eq!(l.dtype(), DType::F32);
    assert!((l.item::<f32>().unwrap() - 1.1274961).abs() < 1e-6);
}

// --------------------------------------------------------- inference mode

#[test]
fn results_made_in_inference_mode_are_not_modified_in_place_after_it() {
    // PyTorch: r = w * 2 (or a view of r) made in inference mode;
    // afterwards r.add_(1) raises "Inplace update to inference tensor
    // outside InferenceMode is not allowed", with or without grad mode,
    // and r is unchanged. Inside inference mode it runs.
    let w = param(&[1.0, 1.0, 1.0]);
    let d = Var::new(Tensor::ones(&[3], DType::F32, CPU).unwrap());
    let (r, rv) = inference_mode(|| {
        let r = w.mul(2.0).unwrap();
        let rv = r.narrow(0, 0, 2).unwrap();
        (r, rv)
    });
    let inference_error =
        |e: &AutogradError| matches!(e, AutogradError::InferenceTensorInPlace { .. });
    let e = r.add_(1.0).unwrap_err();
    assert!(inference_error(&e), "{e}");
    let e = no_grad(|| r.mul_(2.0).map(|_| ())).unwrap_err();
    assert!(inference_error(&e), "{e}");
    let e = r.zero_().unwrap_err();
    assert!(inference_error(&e), "{e}");
    let e = rv.sub_(&d.narrow(0, 0, 2).unwrap()).unwrap_err();
    assert!(inference_error(&e), "{e}");
    // A view of it taken afterwards is an inference tensor too.
    let e = r.narrow(0, 1, 2).unwrap().div_(2.0).unwrap_err();
    assert!(inference_error(&e), "{e}");
    assert_eq!(r.to_vec::<f32>().unwrap(), vec![2.0; 3]);
    let v0 = r.version();
    inference_mode(|| r.add_(1.0).map(|_| ())).unwrap();
    assert_eq!(r.to_vec::<f32>().unwrap(), vec![3.0; 3]);
    assert_eq!(r.version(), v0 + 1);
    // A view made in inference mode of a normal variable is a normal
    // variable (PyTorch: is_inference() is False), and so is an op's
    // result on an inference tensor outside the region; detach() gives
    // a fresh variable, which PyTorch also lets one modify in place.
    inference_mode(|| d.narrow(0, 0, 2))
        .unwrap()
        .mul_(2.0)
        .unwrap();
    assert_eq!(d.to_vec::<f32>().unwrap(), vec![2.0, 2.0, 1.0]);
    r.mul(1.0).unwrap().add_(1.0).unwrap();
    r.detach().add_(1.0).unwrap();
    // requires_grad_ outside the region is refused as in PyTorch
    // ("Setting requires_grad=True on inference tensor outside
    // InferenceMode is not allowed"); inside it is allowed.
    let e = r.requires_grad_(true).unwrap_err();
    assert!(matches!(e, AutogradError::RequiresGrad { .. }), "{e}");
    assert!(!r.requires_grad());
    r.requires_grad_(false).unwrap();
}

#[test]
fn inference_tensors_are_not_saved_for_backward() {
    // checkpoint saves and restores the process-wide generator.
    let _g = GENERATOR.lock().unwrap_or_else(|e| e.into_inner());
    // PyTorch: y made in inference mode; x * y, y * x, x @ y (x requires
    // grad) raise "Inference tensors cannot be saved for backward"; x + y
    // saves nothing and back-propagates; z.mul_(y) on a non-leaf z is
    // refused and leaves z unchanged; under no_grad x * y is fine.
    let w = param(&[1.0, 1.0, 1.0]);
    let y = inference_mode(|| w.mul(2.0)).unwrap();
    let x = param(&[1.0, 2.0, 3.0]);
    let saved_error = |e: &AutogradError| matches!(e, AutogradError::InferenceTensorSaved { .. });
    let e = x.mul(&y).unwrap_err();
    assert!(saved_error(&e), "{e}");
    let e = y.mul(&x).unwrap_err();
    assert!(saved_error(&e), "{e}");
    let e = x
        .reshape(&[1, 3])
        .unwrap()
        .matmul(&y.reshape(&[3, 1]).unwrap())
        .unwrap_err();
    assert!(saved_error(&e), "{e}");
    // Through a view of it taken afterwards too.
    let e = x
        .narrow(0, 0, 2)
        .unwrap()
        .mul(&y.narrow(0, 1, 2).unwrap())
        .unwrap_err();
    assert!(saved_error(&e), "{e}");
    let z = x.mul(1.0).unwrap();
    let e = z.mul_(&y).unwrap_err();
    assert!(saved_error(&e), "{e}");
    assert_eq!(z.to_vec::<f32>().unwrap(), vec![1.0, 2.0, 3.0]);
    assert_eq!(z.grad_fn_name(), Some("MulBackward"));
    // What saves nothing of it runs.
    x.add(&y)
        .unwrap()
        .sum(None, false)
        .unwrap()
        .backward()
        .unwrap();
    assert_eq!(grad_f32(&x), vec![1.0; 3]);
    z.add_(&y).unwrap();
    assert_eq!(z.to_vec::<f32>().unwrap(), vec![3.0, 4.0, 5.0]);
    assert!(no_grad(|| x.mul(&y)).is_ok());
    assert!(!y.mul(&y).unwrap().requires_grad());
    // A clone is a normal tensor (PyTorch's advice).
    let c = y.mul(1.0).unwrap();
    x.zero_grad(true).unwrap();
    x.mul(&c)
        .unwrap()
        .sum(None, false)
        .unwrap()
        .backward()
        .unwrap();
    assert_eq!(grad_f32(&x), vec![2.0; 3]);
    // A checkpoint saves its inputs: an inference input is refused.
    let e = checkpoint(|xs| xs[0].mul(&xs[1]), &[x.clone(), y.clone()]).unwrap_err();
    assert!(saved_error(&e), "{e}");
}

// ------------------------------------------------------------ checkpoint

#[test]
fn a_captured_parameter_modified_after_its_use_is_detected_at_backward() {
    // checkpoint saves and restores the process-wide generator.
    let _g = GENERATOR.lock().unwrap_or_else(|e| e.into_inner());
    // y = checkpoint(lambda x: (x * w).exp(), x) with w captured. PyTorch
    // 2.15's non-reentrant checkpoint recomputes with the modified w and
    // returns gradients of a function that was never run forward (x.grad
    // 2 e^4 = 109.19 after w *= 2); without checkpoint its MulBackward
    // would refuse ("one of the variables needed for gradient computation
    // has been modified by an inplace operation"). strata refuses in both.
    let x = param(&[2.0, 2.0, 2.0]);
    for case in ["after_step", "inside_via_data", "inside_in_place"] {
        let w = param(&[1.0, 1.0, 1.0]);
        let w2 = w.clone();
        let r = checkpoint(
            move |xs| {
                let y = xs[0].mul(&w2)?.exp();
                match case {
                    "inside_via_data" => {
                        w2.data().mul_(2.0)?;
                    }
                    "inside_in_place" => {
                        // PyTorch's forward runs with grad mode on: "a leaf
                        // Variable that requires grad is being used in an
                        // in-place operation", before changing w.
                        w2.mul_(2.0)?;
                    }
                    _ => {}
                }
                y
            },
            std::slice::from_ref(&x),
        );
        if case == "inside_in_place" {
            let e = r.unwrap_err();
            assert!(matches!(e, AutogradError::InPlaceOnLeaf { .. }), "{e}");
            assert_eq!(w.to_vec::<f32>().unwrap(), vec![1.0; 3]);
            continue;
        }
        let out = r.unwrap();
        if case == "after_step" {
            no_grad(|| w.mul_(2.0).map(|_| ())).unwrap();
        }
        let e = out.sum(None, false).unwrap().backward().unwrap_err();
        assert!(
            matches!(
                e,
                AutogradError::SavedTensorModified {
                    op: "CheckpointBackward",
                    index: 1,
                    ..
                }
            ),
            "{case}: {e}"
        );
        assert!(x.grad().is_none() && w.grad().is_none(), "{case}");
    }
    // The check runs before the pass changes any gradient: z's branch,
    // recorded last and so run first, adds nothing; an input modified
    // inside the function (index 0) likewise.
    let z = param(&[1.0, 1.0]);
    let sum = |v: &Var| v.sum(None, false).unwrap();
    for case in ["parameter", "input"] {
        let w = param(&[1.0, 1.0, 1.0]);
        let w2 = w.clone();
        let y = x.mul(1.0).unwrap();
        let out = checkpoint(
            move |xs| {
                let r = xs[0].mul(&w2)?.exp();
                if case == "input" {
                    xs[0].data().add_(1.0)?;
                }
                r
            },
            std::slice::from_ref(&y),
        )
        .unwrap();
        let l = sum(&out).add(&sum(&z.mul(&z).unwrap())).unwrap();
        if case == "parameter" {
            no_grad(|| w.sub_(0.5).map(|_| ())).unwrap();
        }
        let e = l.backward().unwrap_err();
        let index = if case == "input" { 0 } else { 1 };
        assert!(
            matches!(e, AutogradError::SavedTensorModified { op: "CheckpointBackward", index: i, .. } if i == index),
            "{case}: {e}"
        );
        assert!(
            z.grad().is_none() && x.grad().is_none() && w.grad().is_none(),
            "{case}"
        );
    }
    // Unmodified: x.grad = w e^(xw) = e^2, w.grad = x e^(xw) = 2 e^2.
    let w = param(&[1.0, 1.0, 1.0]);
    let w2 = w.clone();
    let out = checkpoint(move |xs| xs[0].mul(&w2)?.exp(), std::slice::from_ref(&x)).unwrap();
    out.sum(None, false).unwrap().backward().unwrap();
    let e2 = 2f64.exp();
    close(&grad_f32(&x), &[e2; 3], 1e-6);
    close(&grad_f32(&w), &[2.0 * e2; 3], 1e-6);
}

// ---------------------------------------------------------------- var/std

/// Equal as PyTorch prints them: NaN where NaN, the sign of zero included.
fn same_f32(got: &[f32], want: &[f32]) {
    let ok = got.len() == want.len()
        && got.iter().zip(want).all(|(a, b)| {
            (a.is_nan() && b.is_nan()) || (a == b && a.is_sign_negative() == b.is_sign_negative())
        });
    assert!(ok, "{got:?} vs {want:?}");
}

#[test]
fn var_and_std_gradients_without_degrees_of_freedom_are_pytorchs() {
    const INF: f32 = f32::INFINITY;
    const NAN: f32 = f32::NAN;
    // Over every element, PyTorch's var_backward for N - correction <= 0
    // is grad * where(x == mean, NaN, inf), whatever the sign of x - mean;
    // std's is NaN everywhere (grad / (2 * inf) = 0, times inf).
    for c in [3.0, 4.0, 5.5] {
        let x = param(&[1.0, 2.0, 4.0]);
        let v = x.var(None, c, false).unwrap();
        assert_eq!(v.item::<f32>().unwrap(), INF);
        v.backward_with(
            Some(&Tensor::full(&[], -2.0, DType::F32, CPU).unwrap()),
            false,
        )
        .unwrap();
        same_f32(&grad_f32(&x), &[-INF; 3]);
        let x = param(&[1.0, 2.0, 4.0]);
        x.std(None, c, false).unwrap().backward().unwrap();
        same_f32(&grad_f32(&x), &[NAN; 3]);
    }
    let x = param(&[1.0, 2.0, 3.0]);
    x.var(None, 3.0, false).unwrap().backward().unwrap();
    same_f32(&grad_f32(&x), &[INF, NAN, INF]);
    // Over given dims PyTorch takes (2 / (N - correction)) grad (x - mean)
    // as it is: inf for N = correction, negative beyond.
    let cases: [(&str, f64, [f32; 6]); 4] = [
        ("var", 3.0, [INF, NAN, -INF, NAN, NAN, NAN]),
        ("var", 4.0, [-2.0, 0.0, 2.0, -0.0, -0.0, -0.0]),
        ("std", 3.0, [NAN; 6]),
        ("std", 4.0, [-0.0, 0.0, 0.0, NAN, NAN, NAN]),
    ];
    for (op, c, want) in cases {
        for keepdim in [true, false] {
            let x = Var::parameter(
                Tensor::from_slice(&[1.0f32, 2.0, 3.0, 5.0, 5.0, 5.0], &[2, 3], CPU).unwrap(),
            )
            .unwrap();
            let v = if op == "var" {
                x.var(Some(&[1]), c, keepdim)
            } else {
                x.std(Some(&[1]), c, keepdim)
            }
            .unwrap();
            let g = Tensor::from_slice(&[-1.0f32, 2.0], v.shape(), CPU).unwrap();
            v.backward_with(Some(&g), false).unwrap();
            same_f32(&grad_f32(&x), &want);
        }
    }
    // With degrees of freedom left, the usual (2 / (N - c)) g (x - mean).
    let x = param(&[1.0, 2.0, 4.0]);
    x.var(None, 1.5, false).unwrap().backward().unwrap();
    close(&grad_f32(&x), &[-16.0 / 9.0, -4.0 / 9.0, 20.0 / 9.0], 1e-6);
}

// ------------------------------------------------------------- layer_norm

#[test]
fn layer_norm_with_an_infinite_eps_is_pytorchs() {
    // PyTorch: rstd = 1 / sqrt(var + inf) = 0, so every normalised value is
    // a zero: y = b where there is a bias, x, w and b's gradients are 0, 0
    // and the summed upstream gradient. PyTorch's CPU kernel writes
    // (x - mean) * rstd * gamma + beta (gamma 1 and beta 0 when absent),
    // whose `+ beta` turns every -0.0 into 0.0, and its backward
    // rstd * g + b * x + c with c = +0.0 here: every zero below is +0.0
    // (PyTorch 2.15 on the CPU), which `same_f32` checks bit for bit.
    let x =
        Var::parameter(Tensor::from_slice(&[1.0f32, 2., 4., 0., -1., 3.], &[2, 3], CPU).unwrap())
            .unwrap();
    let w = param(&[1.0, -2.0, 0.5]);
    let b = param(&[0.0, 1.0, -0.0]);
    let y = x
        .layer_norm(&[3], Some(&w), Some(&b), f64::INFINITY)
        .unwrap();
    same_f32(&y.to_vec::<f32>().unwrap(), &[0.0, 1.0, 0.0, 0.0, 1.0, 0.0]);
    y.backward_with(
        Some(&Tensor::ones(&[2, 3], DType::F32, CPU).unwrap()),
        false,
    )
    .unwrap();
    same_f32(&grad_f32(&x), &[0.0; 6]);
    same_f32(&grad_f32(&w), &[0.0; 3]);
    same_f32(&grad_f32(&b), &[2.0; 3]);
    let y = x
        .detach()
        .layer_norm(&[3], None, None, f64::INFINITY)
        .unwrap();
    same_f32(&y.to_vec::<f32>().unwrap(), &[0.0; 6]);
}

// ------------------------------------------ session 45: failed checkpoints

/// A dropout of `x` (p = 0.5) that draws its mask from the generator.
fn masked(x: &Var) -> strata_autograd::Result<Var> {
    x.dropout(0.5, true)
}

/// A checkpointed block that draws a dropout mask, then fails.
fn masked_then_failing(xs: &[Var]) -> strata_autograd::Result<Var> {
    masked(&xs[0])?;
    Err(AutogradError::Checkpoint {
        msg: "the block failed".into(),
    })
}

/// Session 45: a checkpoint whose function drew from the generator and then
/// failed (an error, a panic) left the generator advanced by those draws:
/// a caller that handled the error and ran the step again drew other
/// dropout masks than a run without the failure (the checkpoint's own
/// refusals after `f`, a captured non-leaf, already rewound it). Every
/// failed call now leaves the generator as it was, grad mode on, and a
/// retry draws the masks of a run that never failed.
#[test]
fn a_failed_checkpoint_leaves_the_generator_as_it_was() {
    let _g = GENERATOR.lock().unwrap_or_else(|e| e.into_inner());
    let x = param(&[1.0; 16]);
    // The masks a run without the failure draws.
    manual_seed(11);
    let want = checkpoint(|xs| masked(&xs[0]), std::slice::from_ref(&x))
        .unwrap()
        .to_vec::<f32>()
        .unwrap();
    let after = generator_state();

    // An error from `f` after its dropout drew a mask.
    manual_seed(11);
    let before = generator_state();
    let e = checkpoint(masked_then_failing, std::slice::from_ref(&x)).unwrap_err();
    assert!(matches!(e, AutogradError::Checkpoint { .. }), "{e}");
    assert_eq!(generator_state(), before, "an error from f");
    // The retry draws what the run without the failure drew.
    let got = checkpoint(|xs| masked(&xs[0]), std::slice::from_ref(&x)).unwrap();
    assert_eq!(got.to_vec::<f32>().unwrap(), want);
    assert_eq!(generator_state(), after);

    // A panic in `f` after a draw.
    manual_seed(11);
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        checkpoint(
            |xs| {
                masked(&xs[0])?;
                panic!("the block panicked")
            },
            std::slice::from_ref(&x),
        )
    }));
    assert!(r.is_err());
    assert_eq!(generator_state(), before, "a panic in f");
    assert!(strata_autograd::is_grad_enabled());

    // A typed error from f's own op (an index out of range) after a draw:
    // nothing recorded, the generator back.
    manual_seed(11);
    let e = checkpoint(
        |xs| {
            let h = masked(&xs[0])?;
            h.index_select(0, &Tensor::from_slice(&[16i64], &[1], CPU).unwrap())
        },
        std::slice::from_ref(&x),
    )
    .unwrap_err();
    assert!(
        matches!(e, AutogradError::Tensor(TensorError::Index { .. })),
        "{e}"
    );
    assert_eq!(generator_state(), before, "an op's error in f");

    // The checkpoint's own refusal after `f` (a captured non-leaf): as before.
    manual_seed(11);
    let made = x.mul(2.0).unwrap();
    let e = checkpoint(
        move |xs| masked(&xs[0])?.mul(&made),
        std::slice::from_ref(&x),
    )
    .unwrap_err();
    assert!(matches!(e, AutogradError::Checkpoint { .. }), "{e}");
    assert_eq!(generator_state(), before, "a captured non-leaf");

    // Without grad mode the checkpoint is `f` itself: the same rule.
    manual_seed(11);
    let e = no_grad(|| checkpoint(masked_then_failing, std::slice::from_ref(&x))).unwrap_err();
    assert!(matches!(e, AutogradError::Checkpoint { .. }), "{e}");
    assert_eq!(generator_state(), before, "an error from f under no_grad");
    assert!(x.grad().is_none());
}

/// Session 45: `checkpoint_blocks` whose third block fails leaves the
/// generator as it was before the call, the draws of the two blocks that
/// ran included (before: advanced by them), so that a retry draws the
/// masks of a run that never failed.
#[test]
fn a_failed_checkpoint_blocks_leaves_the_generator_as_it_was() {
    let _g = GENERATOR.lock().unwrap_or_else(|e| e.into_inner());
    use std::sync::Arc;
    // A block: dropout, then a failure when its number is 2.
    fn forward(n: &usize, h: &Var) -> strata_autograd::Result<Var> {
        let h = masked(h)?;
        if *n == 2 {
            return Err(AutogradError::Checkpoint {
                msg: "block 2 failed".into(),
            });
        }
        Ok(h)
    }
    let x = param(&[1.0; 16]);
    for every in [0, 1, 2] {
        manual_seed(5);
        let before = generator_state();
        let blocks: Vec<Arc<usize>> = (0..4).map(Arc::new).collect();
        let e = strata_autograd::checkpoint_blocks(&blocks, every, &x, forward).unwrap_err();
        assert!(matches!(e, AutogradError::Checkpoint { .. }), "{e}");
        assert_eq!(generator_state(), before, "every {every}");
        // Blocks that do not fail: the generator moves on by one draw each.
        let ok: Vec<Arc<usize>> = [0, 1, 3].into_iter().map(Arc::new).collect();
        strata_autograd::checkpoint_blocks(&ok, every, &x, forward).unwrap();
        assert_eq!(generator_state().1, before.1 + 3, "every {every}");
    }
}
