//! Session 37's sweep, checked against PyTorch 2.15 (CPU, x86, one
//! thread):
//!
//! * class-target losses at their edges, replayed against PyTorch's answers
//!   in `tests/data/loss_edges_s37.json.gz` (written by
//!   `benches/anchors/gen_loss_edges_s37.py`): `cross_entropy` (forward and
//!   the logits' gradient) and `nll_loss` with no class or every target
//!   ignored, and at non-finite logits, zero total weights and zero losses;
//! * layer_norm's backward on ill-conditioned rows against PyTorch's f32 and
//!   f64 gradients in `tests/data/layer_norm_s37.json.gz`
//!   (`benches/anchors/gen_layer_norm_s37.py`);
//! * the sign of a zero matrix product.
//!
//! Defects these tests found (fixed with them):
//!
//! * With no class (C = 0) every target ignored was refused ("target 0 is
//!   out of bounds": ignored targets were checked as class 0), and
//!   `nll_loss`/`nll_weights` gathered column 0 of an empty input or
//!   weight. Now: mean NaN, sum 0, none zeros (NaN with label smoothing,
//!   whose ε / C is inf), a target that is not ignored an index error, and
//!   an (N, 0, d1) input of 3 or 5+ dims a shape error, as PyTorch (its
//!   view of such an input fails).
//! * cross_entropy's backward wrote 0 to ignored rows and formed `g w (p -
//!   onehot)` directly: PyTorch's chain (nll_loss's backward, then
//!   log_softmax's `gl - exp(lp) Σ gl`) gives NaN in every class of a row
//!   whose log-probabilities are NaN (ignored or not), NaN where a zero
//!   total weight meets a zero weight, and its own zeros' signs (an exp that
//!   underflows in f32 gives +0.0, not -tiny; one class along the last dim
//!   sums to the value itself). The CUDA kernel (`ce_bwd`) now follows the
//!   same chain.
//! * A loss of -log p = 0 under reduction "none" was +0.0: PyTorch negates
//!   the log-probability (-0.0), except for a (C) input, whose single loss
//!   comes from its summing loop (+0.0). Label smoothing's term is
//!   -Σ log p w as well.
//! * layer_norm_backward used the saved f32 mean and rstd in a formula that
//!   cancels (b x + c): rows whose spread is small against their mean lost
//!   digits, and 2-element rows with eps 0 (whose gradient is exactly 0)
//!   got 2^-24 rstd |dy| of noise where PyTorch gets 0.
//! * matmul: PyTorch's CPU sums of products start from +0.0 (a sum of -0.0
//!   products is +0.0) except lone products (k = 1) that its `mm` hands to
//!   BLAS, which keep their sign; strata (the `gemm` crate) kept -0.0 in
//!   a 1 x n product of k = 1 and in sums of k = 2 -0.0 products.

use crate::pytorch_fixture::{fixture, gunzip, nums, shape as dims};
use std::sync::LazyLock;
use strata_tensor::{CrossEntropyArgs, DType, Device, Reduction, Tensor, TensorError};

static FIXTURE: LazyLock<String> =
    LazyLock::new(|| gunzip(include_bytes!("../data/loss_edges_s37.json.gz")));

fn tensor(vals: &[f64], shape: &[usize], dt: DType) -> Tensor {
    Tensor::from_vec(vals.to_vec(), shape, Device::Cpu)
        .unwrap()
        .to_dtype(dt)
        .unwrap()
}

/// `got` agrees with PyTorch's `want`: both NaN, the same infinity, or
/// close (relative `rtol`, absolute `atol`); a zero answered with an exact
/// zero must have PyTorch's sign.
fn agrees(got: f64, want: f64, rtol: f64, atol: f64) -> bool {
    if want.is_nan() || got.is_nan() {
        return want.is_nan() && got.is_nan();
    }
    if want.is_infinite() || got.is_infinite() {
        return want == got;
    }
    if want == 0.0 && got == 0.0 {
        return want.is_sign_negative() == got.is_sign_negative();
    }
    (got - want).abs() <= atol + rtol * want.abs()
}

fn compare(name: &str, what: &str, got: &[f64], want: &[f64], dt: DType, fails: &mut Vec<String>) {
    let (rtol, atol) = if dt == DType::F64 {
        (1e-12, 1e-12)
    } else {
        (2e-5, 1e-6)
    };
    if got.len() != want.len() {
        fails.push(format!(
            "{name} {what}: {} values, PyTorch {}",
            got.len(),
            want.len()
        ));
        return;
    }
    if got
        .iter()
        .zip(want)
        .any(|(&g, &w)| !agrees(g, w, rtol, atol))
    {
        fails.push(format!("{name} {what}: strata {got:?}, PyTorch {want:?}"));
    }
}

fn reduction(s: &str) -> Reduction {
    match s {
        "none" => Reduction::None,
        "sum" => Reduction::Sum,
        _ => Reduction::Mean,
    }
}

/// Runs the fixture's cases of one grid; returns the disagreements.
fn replay(grid: &str) -> (usize, Vec<String>) {
    let root = fixture(&FIXTURE);
    let mut fails = Vec::new();
    let mut n = 0;
    for case in root["cases"].as_array().unwrap() {
        if case["grid"] != grid {
            continue;
        }
        n += 1;
        let name = case["name"].as_str().unwrap();
        let dt = if case["dtype"] == "f64" {
            DType::F64
        } else {
            DType::F32
        };
        let shape = dims(&case["shape"]);
        let x = tensor(&nums(&case["x"]), &shape, dt);
        let tshape = dims(&case["tshape"]);
        let tv: Vec<i64> = case["target"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_i64().unwrap())
            .collect();
        let t = Tensor::from_vec(tv, &tshape, Device::Cpu).unwrap();
        let w = (!case["weight"].is_null()).then(|| {
            let w = nums(&case["weight"]);
            tensor(&w, &[w.len()], dt)
        });
        let ignore_index = case["ignore_index"].as_i64().unwrap();
        let red = reduction(case["reduction"].as_str().unwrap());
        let args = CrossEntropyArgs {
            weight: w.as_ref(),
            ignore_index,
            reduction: red,
            label_smoothing: case["ls"].as_f64().unwrap(),
        };
        let ce = case["op"] == "cross_entropy";
        let res = if ce {
            x.cross_entropy_forward(&t, args)
        } else {
            x.nll_loss(&t, w.as_ref(), ignore_index, red)
                .map(|l| (l, None))
        };
        if let Some(class) = case.get("error") {
            // IndexError: a target out of range; RuntimeError: PyTorch's
            // view of a 3-d (N, 0, d1) input (a shape error).
            match (class.as_str(), res) {
                (Some("IndexError"), Err(TensorError::Index { .. }))
                | (Some("RuntimeError"), Err(TensorError::Shape { .. })) => {}
                (_, other) => fails.push(format!(
                    "{name}: PyTorch raises {class}, strata gives {other:?}"
                )),
            }
            continue;
        }
        let (loss, saved) = match res {
            Ok(r) => r,
            Err(e) => {
                fails.push(format!("{name}: strata refuses: {e}"));
                continue;
            }
        };
        if loss.shape() != dims(&case["out_shape"]).as_slice() || loss.dtype() != dt {
            fails.push(format!(
                "{name}: loss {:?} {}, PyTorch {}",
                loss.shape(),
                loss.dtype(),
                case["out_shape"]
            ));
            continue;
        }
        let got = loss.to_dtype(DType::F64).unwrap().to_vec::<f64>().unwrap();
        compare(name, "loss", &got, &nums(&case["out"]), dt, &mut fails);
        if let Some(saved) = saved {
            let g = tensor(&nums(&case["g"]), loss.shape(), dt);
            match x.cross_entropy_backward(&g, &saved, args) {
                Ok(dx) => {
                    let got = dx.to_dtype(DType::F64).unwrap().to_vec::<f64>().unwrap();
                    compare(name, "grad", &got, &nums(&case["grad"]), dt, &mut fails);
                }
                Err(e) => fails.push(format!("{name}: backward refuses: {e}")),
            }
        }
    }
    (n, fails)
}

fn check(grid: &str) {
    let (n, fails) = replay(grid);
    assert!(n > 0, "no {grid} case in the fixture");
    assert!(
        fails.is_empty(),
        "{} of {n} {grid} cases differ from PyTorch:\n{}",
        fails.len(),
        fails.join("\n")
    );
}

/// No class (C = 0) or every target ignore_index: mean NaN (0/0), sum 0,
/// none zeros of the batch shape, with and without weights and label
/// smoothing, as PyTorch; a C = 0 target that is not ignored is an index
/// error.
#[test]
fn no_class_or_every_target_ignored_matches_pytorch() {
    check("empty");
}

/// Logits with +-inf and NaN, all -inf rows, zero losses (-0.0 under
/// "none"), zero / negative / -0.0 / inf class weights, ignored rows:
/// forward and gradient as PyTorch's.
#[test]
fn non_finite_logits_and_zero_weights_match_pytorch() {
    check("nonfinite");
}

static LAYER_NORM: LazyLock<String> =
    LazyLock::new(|| gunzip(include_bytes!("../data/layer_norm_s37.json.gz")));

/// layer_norm's f32 backward on rows of 1, 2, 3, 5 and 16 elements whose
/// spread is tiny against their mean (variances far below 0.01), eps 0,
/// 1e-12 and 1e-5: strata's gradients are at least as close to the exact
/// ones (PyTorch in f64 on the same f32 inputs) as PyTorch's f32 gradients
/// are, up to the rounding of the result to f32, and NaN exactly where
/// PyTorch's are (a constant row with eps 0).
#[test]
fn layer_norm_backward_is_as_accurate_as_pytorchs_f32() {
    let root = fixture(&LAYER_NORM);
    let cases = root["cases"].as_array().unwrap();
    let mut fails = Vec::new();
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let shape = dims(&case["shape"]);
        let cols = shape[1];
        let x = tensor(&nums(&case["x"]), &shape, DType::F32);
        let dy = tensor(&nums(&case["dy"]), &shape, DType::F32);
        let w = (!case["weight"].is_null())
            .then(|| tensor(&nums(&case["weight"]), &[cols], DType::F32));
        let eps = case["eps"].as_f64().unwrap();
        let (_, mean, rstd) = x
            .layer_norm_forward(&[cols], w.as_ref(), None, eps)
            .unwrap();
        let needs = [true, w.is_some(), w.is_some()];
        let got =
            Tensor::layer_norm_backward(&dy, &x, &mean, &rstd, w.as_ref(), &[cols], needs).unwrap();
        for (i, key) in ["dx", "dw", "db"].into_iter().enumerate() {
            let Some(g) = &got[i] else { continue };
            let s = g.to_dtype(DType::F64).unwrap().to_vec::<f64>().unwrap();
            let t = nums(&case["torch32"][key]);
            let r = nums(&case["ref64"][key]);
            // dx is judged row by row, the parameters' gradients element
            // by element. The slack beyond PyTorch's own error is 4 f32
            // roundings of the result, and with eps > 0 of the terms of dx
            // (rstd |dy w|): the saved rstd is f32, as PyTorch's, and eps
            // cannot be told from its rounding (with eps 0 the row itself
            // gives rstd exactly).
            let group = if key == "dx" { cols } else { 1 };
            let xs = nums(&case["x"]);
            let dys = nums(&case["dy"]);
            let ws = (!case["weight"].is_null()).then(|| nums(&case["weight"]));
            for (j, ((s, t), r)) in s
                .chunks(group)
                .zip(t.chunks(group))
                .zip(r.chunks(group))
                .enumerate()
            {
                // NaN where the exact gradient is (a constant row with eps
                // 0); PyTorch's f32 also gives NaN where its f32 variance
                // of two neighbouring floats rounds to 0, strata's exact
                // one does not.
                if s.iter().zip(r).any(|(a, b)| b.is_nan() && !a.is_nan()) {
                    fails.push(format!(
                        "{name} {key}[{j}]: strata {s:?}, exact {r:?}, PyTorch f32 {t:?}"
                    ));
                    continue;
                }
                let err = |v: &[f64]| {
                    v.iter()
                        .zip(r)
                        .filter(|(_, b)| !b.is_nan())
                        .map(|(a, b)| if a == b { 0.0 } else { (a - b).abs() })
                        .fold(
                            0.0,
                            |m: f64, e| if e.is_nan() { f64::INFINITY } else { m.max(e) },
                        )
                };
                let mut scale = r
                    .iter()
                    .filter(|v| v.is_finite())
                    .fold(0.0f64, |a, v| a.max(v.abs()));
                // rstd |dy w|, the size of the terms of a row of dx.
                let mut term = 0.0;
                if key == "dx" {
                    let row = &xs[j * cols..(j + 1) * cols];
                    let mu = row.iter().sum::<f64>() / cols as f64;
                    let var = row.iter().map(|v| (v - mu).powi(2)).sum::<f64>() / cols as f64;
                    let a = 1.0 / (var + eps).sqrt();
                    let g = (0..cols)
                        .map(|c| (dys[j * cols + c] * ws.as_ref().map_or(1.0, |w| w[c])).abs())
                        .fold(0.0, f64::max);
                    if (a * g).is_finite() {
                        term = a * g;
                    }
                }
                if eps > 0.0 {
                    scale = scale.max(term);
                }
                // With eps 0, f64 roundings of the terms (2^-40 of them)
                // where the exact gradient is 0.
                let (es, et) = (err(s), err(t));
                if es > et + 4.0 * f64::from(f32::EPSILON) * scale + term * 2f64.powi(-40) + 1e-30 {
                    fails.push(format!(
                        "{name} {key}[{j}]: strata's error {es:e} > PyTorch f32's {et:e} \
                         (strata {s:?}, PyTorch {t:?}, exact {r:?})"
                    ));
                }
            }
        }
    }
    assert!(
        fails.is_empty(),
        "{} layer_norm gradients less accurate than PyTorch's f32 ({} cases):\n{}",
        fails.len(),
        cases.len(),
        fails.join("\n")
    );
}

/// PyTorch's CPU `mm` (f32/f64, BLAS gemm) writes each lone product of an
/// inner size of 1 as it is when the result has at least 2 rows and 2
/// columns, so -1 * 0 stays -0.0; its `bmm`, matrix-vector products and
/// 1 x n (or n x 1) results start from +0.0. PyTorch 2.15 CPU:
///
/// ```python
/// torch.signbit(torch.full((2, 1), -1.) @ torch.zeros(1, 3))        # all True
/// torch.signbit(torch.full((2, 3, 1), -1.) @ torch.zeros(1, 4))     # all True (folded into mm)
/// torch.signbit(torch.full((1, 1), -1.) @ torch.zeros(1, 3))        # all False
/// torch.signbit(torch.full((2, 1), -1.) @ torch.zeros(1, 1))        # all False
/// torch.signbit(torch.bmm(torch.full((1, 3, 1), -1.), torch.zeros(1, 1, 4)))  # all False
/// torch.signbit(torch.full((3, 1), -1.) @ torch.zeros(2, 1, 4))     # all False (bmm)
/// (torch.tensor([[-1.], [1.]]) @ torch.tensor([[0., -0.]])).tolist()  # [[-0.0, 0.0], [0.0, -0.0]]
/// ```
#[test]
fn matmul_keeps_the_sign_of_a_lone_zero_product_as_pytorchs_mm() {
    let signs = |t: Tensor| -> Vec<bool> {
        t.to_dtype(DType::F64)
            .unwrap()
            .to_vec::<f64>()
            .unwrap()
            .iter()
            .map(|v| {
                assert_eq!(*v, 0.0);
                v.is_sign_negative()
            })
            .collect()
    };
    for dt in [DType::F32, DType::F64] {
        let full = |shape: &[usize], v: f64| Tensor::full(shape, v, dt, Device::Cpu).unwrap();
        let zeros = |shape: &[usize]| Tensor::zeros(shape, dt, Device::Cpu).unwrap();
        assert_eq!(
            signs(full(&[2, 1], -1.0).matmul(&zeros(&[1, 3])).unwrap()),
            [true; 6]
        );
        assert_eq!(
            signs(full(&[2, 1], -1.0).mm(&zeros(&[1, 3])).unwrap()),
            [true; 6]
        );
        assert_eq!(
            signs(full(&[2, 3, 1], -1.0).matmul(&zeros(&[1, 4])).unwrap()),
            [true; 24]
        );
        assert_eq!(
            signs(full(&[2, 1, 1], -1.0).matmul(&zeros(&[1, 3])).unwrap()),
            [true; 6]
        );
        assert_eq!(
            signs(full(&[1, 1], -1.0).matmul(&zeros(&[1, 3])).unwrap()),
            [false; 3]
        );
        assert_eq!(
            signs(full(&[1, 1], -1.0).mm(&zeros(&[1, 1])).unwrap()),
            [false]
        );
        assert_eq!(
            signs(full(&[2, 1], -1.0).matmul(&zeros(&[1, 1])).unwrap()),
            [false; 2]
        );
        assert_eq!(
            signs(full(&[1, 3, 1], -1.0).bmm(&zeros(&[1, 1, 4])).unwrap()),
            [false; 12]
        );
        // bmm of one batch goes to gemm from m * n >= 400 on: the sign
        // stays; two batches: +0.0.
        let bmm = |a: &[usize], b: &[usize]| signs(full(a, -1.0).bmm(&zeros(b)).unwrap());
        assert_eq!(bmm(&[1, 20, 1], &[1, 1, 20]), [true; 400]);
        assert_eq!(bmm(&[1, 19, 1], &[1, 1, 21]), [false; 399]);
        assert_eq!(bmm(&[2, 20, 1], &[2, 1, 20]), [false; 800]);
        // A 1 x n product and vectors: +0.0.
        let mat = |a: &[usize], b: &[usize]| signs(full(a, -1.0).matmul(&zeros(b)).unwrap());
        assert_eq!(mat(&[1], &[1]), [false]);
        assert_eq!(mat(&[1], &[1, 4]), [false; 4]);
        assert_eq!(mat(&[4, 1], &[1]), [false; 4]);
        assert_eq!(mat(&[1, 1], &[1, 200]), [false; 200]);
        assert_eq!(
            signs(full(&[1, 3, 1], -1.0).matmul(&zeros(&[1, 1, 4])).unwrap()),
            [false; 12]
        );
        assert_eq!(
            signs(full(&[3, 1], -1.0).matmul(&zeros(&[2, 1, 4])).unwrap()),
            [false; 24]
        );
        // Two products (k = 2) start from +0.0 in PyTorch's mm as well.
        assert_eq!(
            signs(full(&[2, 2], -1.0).matmul(&zeros(&[2, 2])).unwrap()),
            [false; 4]
        );
        let a = Tensor::from_vec(vec![-1.0, 1.0], &[2, 1], Device::Cpu)
            .unwrap()
            .to_dtype(dt)
            .unwrap();
        let b = Tensor::from_vec(vec![0.0, -0.0], &[1, 2], Device::Cpu)
            .unwrap()
            .to_dtype(dt)
            .unwrap();
        assert_eq!(signs(a.matmul(&b).unwrap()), [true, false, false, true]);
        // Strided (a column of a wider matrix): the same.
        let wide = full(&[3, 2], -1.0).narrow(1, 0, 1).unwrap();
        assert_eq!(signs(wide.matmul(&zeros(&[1, 2])).unwrap()), [true; 6]);
        // Values other than zeros are the products themselves.
        let a = Tensor::from_vec(vec![3.0, -0.5], &[2, 1], Device::Cpu)
            .unwrap()
            .to_dtype(dt)
            .unwrap();
        let b = Tensor::from_vec(vec![2.0, 1e-3], &[1, 2], Device::Cpu)
            .unwrap()
            .to_dtype(dt)
            .unwrap();
        let p = a
            .matmul(&b)
            .unwrap()
            .to_dtype(DType::F64)
            .unwrap()
            .to_vec::<f64>()
            .unwrap();
        let e = |x: f64, y: f64| {
            if dt == DType::F32 {
                f64::from(x as f32 * y as f32)
            } else {
                x * y
            }
        };
        assert_eq!(p, [e(3.0, 2.0), e(3.0, 1e-3), e(-0.5, 2.0), e(-0.5, 1e-3)]);
    }
}
