//! Session 30's sweep of hostile inputs to autograd (after
//! `hostile_sweep_s29.rs`). Each test asserts PyTorch's values (from
//! PyTorch 2.15 on the CPU, or worked out by hand), or the typed error and
//! the state left behind.

use std::sync::Mutex;
use strata_autograd::{generator_state, manual_seed, AutogradError, Var};
use strata_tensor::{CrossEntropyArgs, DType, Device, Reduction, Tensor, TensorError};

const CPU: Device = Device::Cpu;

/// Serialises the tests that use the process-wide dropout generator.
static GENERATOR: Mutex<()> = Mutex::new(());

fn grad_f32(v: &Var) -> Vec<f32> {
    v.grad().expect("a gradient").to_vec::<f32>().unwrap()
}

fn param(v: &[f32]) -> Var {
    Var::parameter(Tensor::from_slice(v, &[v.len()], CPU).unwrap()).unwrap()
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
