//! Session 79: the gradients of `strata_autograd::linalg` against PyTorch
//! 2.15's CPU autograd (`benches/anchors/gen_linalg_s79.py`, 1,236 cases:
//! orders 1..8, batches, transposed (non-contiguous) inputs, f32 and f64,
//! rectangular matrices for QR/SVD/pinv/lstsq, singular matrices for
//! `det`). Each case is the gradient of `sum_i sum(W_i * f_i(outputs))`
//! for PyTorch's random `W_i`, with `f` invariant under the signs a
//! factorization may choose (LAPACK's and faer's differ): `Q D` and `D R`
//! (`D = sign(diag R)`, a constant) for QR, the eigenvalues and `V diag(c)
//! Vᵀ` for `eigh`, the singular values and `U diag(c) Vh` for `svd`.
//! Gradients agree within 1e-8 of the gradient's largest magnitude for f64
//! (2e-3 for f32). Central finite differences of f64 losses check the same
//! gradients independently of PyTorch.

use crate::pytorch_fixture::{fixture, gunzip, nums as values, ord_of, shape};
use serde_json::Value;
use std::sync::LazyLock;
use strata_autograd::linalg::{self, QrMode, Uplo};
use strata_autograd::{Result, Var};
use strata_tensor::{DType, Device, Tensor};

static FIXTURE: LazyLock<Value> =
    LazyLock::new(|| fixture(&gunzip(include_bytes!("../data/linalg_s79_grad.json.gz"))));

/// An input: its stored values seen through `transpose(-2, -1)` where `t`
/// says so.
pub fn inp(d: &Value, device: Device) -> Tensor {
    let dt = match d["dtype"].as_str().unwrap() {
        "f32" => DType::F32,
        _ => DType::F64,
    };
    let t = Tensor::from_vec(values(&d["values"]), &shape(&d["shape"]), device)
        .unwrap()
        .to_dtype(dt)
        .unwrap();
    if d["t"].as_bool().unwrap() {
        t.transpose(-2, -1).unwrap()
    } else {
        t
    }
}

fn konst(v: Vec<f64>, like: &Var) -> Var {
    let n = v.len();
    Var::new(
        Tensor::from_vec(v, &[n], like.data().device())
            .unwrap()
            .to_dtype(like.dtype())
            .unwrap(),
    )
}

/// The signs of R's diagonal (+1 where 0), `[.., k]`, as a constant.
fn diag_signs(r: &Var) -> Result<Var> {
    let d = r.data().diagonal(0, -2, -1)?;
    let s = d.sign()?;
    let s = Tensor::where_cond(&s.eq(0.0)?, 1.0, &s)?;
    Ok(Var::new(s))
}

/// The outputs `f` of case `c` on the variables `v`.
pub fn call(c: &Value, v: &[Var]) -> Result<Vec<Var>> {
    let a = &c["args"];
    let uplo = || {
        if a["uplo"].as_str() == Some("U") {
            Uplo::Upper
        } else {
            Uplo::Lower
        }
    };
    let one = |r: Result<Var>| r.map(|t| vec![t]);
    match c["op"].as_str().unwrap() {
        "det" => one(linalg::det(&v[0])),
        "slogdet" => one(linalg::slogdet(&v[0]).map(|(_, l)| l)),
        "logdet" => one(linalg::logdet(&v[0])),
        "inv" => one(linalg::inv(&v[0])),
        "solve" => one(linalg::solve(&v[0], &v[1])),
        "cholesky" => one(linalg::cholesky(&v[0], a["upper"].as_bool().unwrap())),
        "eigh" => {
            let (l, vec) = linalg::eigh(&v[0], uplo())?;
            let cc = konst(values(&a["c"]), &v[0]);
            Ok(vec![l, vec.mul(&cc)?.matmul(&vec.transpose(-2, -1)?)?])
        }
        "eigvalsh" => one(linalg::eigvalsh(&v[0], uplo())),
        "matrix_power" => one(linalg::matrix_power(&v[0], a["k"].as_i64().unwrap())),
        "pinv" => one(linalg::pinv(&v[0], None, None, false)),
        "cond" => one(linalg::cond(&v[0], ord_of(&a["p"]))),
        "matrix_norm" => one(linalg::matrix_norm(
            &v[0],
            ord_of(&a["p"]).unwrap(),
            [-2, -1],
            false,
        )),
        "qr" => {
            let (q, r) = linalg::qr(&v[0], QrMode::Reduced)?;
            let d = diag_signs(&r)?;
            Ok(vec![q.mul(&d.unsqueeze(-2)?)?, r.mul(&d.unsqueeze(-1)?)?])
        }
        "lstsq" => one(linalg::lstsq(&v[0], &v[1], None)),
        "svd" => {
            let (u, s, vh) = linalg::svd(&v[0], false)?;
            let cc = konst(values(&a["c"]), &v[0]);
            Ok(vec![s, u.mul(&cc)?.matmul(&vh)?])
        }
        "svdvals" => one(linalg::svdvals(&v[0])),
        "norm" => {
            let dims: Option<Vec<i64>> = a["dim"]
                .as_array()
                .map(|d| d.iter().map(|x| x.as_i64().unwrap()).collect());
            one(linalg::norm(&v[0], ord_of(&a["p"]), dims.as_deref(), false))
        }
        "cross" => one(linalg::cross(&v[0], &v[1], -1)),
        "vecdot" => one(linalg::vecdot(&v[0], &v[1], -1)),
        op => panic!("op {op}"),
    }
}

/// `sum_i sum(W_i * out_i)`.
pub fn loss(outs: &[Var], weights: &[Tensor]) -> Result<Var> {
    let mut total: Option<Var> = None;
    for (o, w) in outs.iter().zip(weights) {
        let term = o.mul(&Var::new(w.clone()))?.sum(None, false)?;
        total = Some(match total {
            Some(t) => t.add(&term)?,
            None => term,
        });
    }
    Ok(total.expect("at least one output"))
}

pub fn weights(c: &Value, device: Device, dt: DType) -> Vec<Tensor> {
    c["weights"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| {
            Tensor::from_vec(values(&w["data"]), &shape(&w["shape"]), device)
                .unwrap()
                .to_dtype(dt)
                .unwrap()
        })
        .collect()
}

fn difference(c: &Value, device: Device) -> Option<String> {
    let ins: Vec<Tensor> = c["inputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| inp(d, device))
        .collect();
    let dt = ins[0].dtype();
    let vars: Vec<Var> = ins
        .iter()
        .map(|t| Var::parameter(t.clone()).unwrap())
        .collect();
    let outs = match call(c, &vars) {
        Ok(o) => o,
        Err(e) => return Some(format!("strata failed: {e}")),
    };
    if let Err(e) = loss(&outs, &weights(c, device, dt)).and_then(|l| l.backward()) {
        return Some(format!("backward failed: {e}"));
    }
    let tol = if dt == DType::F64 { 1e-8 } else { 2e-3 };
    for (i, (v, want)) in vars.iter().zip(c["grads"].as_array().unwrap()).enumerate() {
        if want.is_null() {
            continue;
        }
        let Some(g) = v.grad() else {
            return Some(format!("input {i}: no gradient"));
        };
        if g.shape() != shape(&want["shape"]).as_slice() {
            return Some(format!("input {i}: gradient shape {:?}", g.shape()));
        }
        let got = g.to(Device::Cpu).unwrap().to_vec_as::<f64>().unwrap();
        let w = values(&want["data"]);
        let big = w.iter().fold(0.0f64, |m, x| m.max(x.abs()));
        for (j, (&x, &y)) in got.iter().zip(&w).enumerate() {
            // An absolute floor for gradients that are all rounding noise
            // (cond of a 1 x 1 matrix: PyTorch 1e-17, strata 0).
            let floor = if dt == DType::F64 { 1e-12 } else { 1e-5 };
            if !((x - y).abs() <= tol * (big + y.abs()) + floor || (x.is_nan() && y.is_nan())) {
                return Some(format!("input {i} element {j}: {x}, PyTorch {y}"));
            }
        }
    }
    None
}

fn all_agree_on(device: Device) {
    let cases = FIXTURE["cases"].as_array().unwrap();
    assert!(cases.len() >= 1_200, "{} cases", cases.len());
    let bad: Vec<String> = cases
        .iter()
        .filter_map(|c| {
            difference(c, device).map(|d| {
                let shapes: Vec<String> = c["inputs"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|i| {
                        format!(
                            "{}{}{}",
                            i["dtype"],
                            i["shape"],
                            if i["t"] == true { "ᵀ" } else { "" }
                        )
                    })
                    .collect();
                format!("{} {} {}: {d}", c["op"], c["args"], shapes.join(","))
            })
        })
        .collect();
    assert!(
        bad.is_empty(),
        "{} of {} cases differ: {:#?}",
        bad.len(),
        cases.len(),
        &bad[..bad.len().min(40)]
    );
}

#[test]
fn linalg_gradients_match_pytorch() {
    all_agree_on(Device::Cpu);
}

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn linalg_gradients_match_pytorch_on_a_gpu() {
    all_agree_on(crate::hostile_calls::gpu());
}

// ----- finite differences (f64), independent of PyTorch -----

fn rand(shape: &[usize], seed: u64) -> Tensor {
    Tensor::randn(shape, DType::F64, seed, Device::Cpu).unwrap()
}

/// Checks autograd's gradient of `f` (a scalar loss) at `x` against central
/// differences; `sym` perturbs `x_ij` and `x_ji` together (for ops that
/// read one triangle) and compares with `g_ij + g_ji`.
fn fd_check(x: &Tensor, sym: bool, f: impl Fn(&Var) -> Result<Var>) {
    let v = Var::parameter(x.clone()).unwrap();
    f(&v).unwrap().backward().unwrap();
    let g = v.grad().unwrap().to_vec::<f64>().unwrap();
    let base = x.contiguous().unwrap().to_vec::<f64>().unwrap();
    let shape = x.shape().to_vec();
    let n = *shape.last().unwrap();
    let h = 1e-6;
    let eval = |vals: Vec<f64>| -> f64 {
        let t = Tensor::from_vec(vals, &shape, Device::Cpu).unwrap();
        f(&Var::new(t)).unwrap().data().item::<f64>().unwrap()
    };
    let big = g.iter().fold(1.0f64, |m, v| m.max(v.abs()));
    for idx in 0..base.len() {
        let (i, j) = ((idx / n) % n.max(1), idx % n);
        let mirror = idx - i * n - j + j * n + i;
        if sym && i < j {
            continue;
        }
        let step = |s: f64| {
            let mut v = base.clone();
            v[idx] += s;
            if sym && i != j {
                v[mirror] += s;
            }
            eval(v)
        };
        let fd = (step(h) - step(-h)) / (2.0 * h);
        let want = if sym && i != j {
            g[idx] + g[mirror]
        } else {
            g[idx]
        };
        assert!(
            (fd - want).abs() <= 1e-5 * big,
            "element {idx}: autograd {want}, finite difference {fd}"
        );
    }
}

fn well(n: usize, b: usize, seed: u64) -> Tensor {
    rand(&[b, n, n], seed)
        .add(
            &Tensor::eye(n, None, DType::F64, Device::Cpu)
                .unwrap()
                .mul(n as f64)
                .unwrap(),
        )
        .unwrap()
}

fn wsum(y: &Var, seed: u64) -> Result<Var> {
    let w = Var::new(rand(y.shape(), seed));
    y.mul(&w)?.sum(None, false)
}

#[test]
fn gradients_match_finite_differences() {
    let a = well(4, 2, 1);
    fd_check(&a, false, |x| linalg::det(x)?.sum(None, false));
    fd_check(&a, false, |x| wsum(&linalg::inv(x)?, 2));
    fd_check(&a, false, |x| wsum(&linalg::slogdet(x)?.1, 3));
    fd_check(&a, false, |x| wsum(&linalg::matrix_power(x, -2)?, 4));
    fd_check(&a, false, |x| wsum(&linalg::pinv(x, None, None, false)?, 5));
    let b = rand(&[2, 4, 3], 6);
    fd_check(&a, false, |x| {
        wsum(&linalg::solve(x, &Var::new(b.clone()))?, 7)
    });
    fd_check(&b, false, |y| {
        wsum(&linalg::solve(&Var::new(a.clone()), y)?, 8)
    });
    let x = rand(&[4, 4], 9);
    let spd = x
        .matmul(&x.t().unwrap())
        .unwrap()
        .add(
            &Tensor::eye(4, None, DType::F64, Device::Cpu)
                .unwrap()
                .mul(4.0)
                .unwrap(),
        )
        .unwrap();
    for upper in [false, true] {
        fd_check(&spd, true, |x| wsum(&linalg::cholesky(x, upper)?, 10));
    }
    let h = x.add(&x.t().unwrap()).unwrap();
    fd_check(&h, true, |x| {
        let (l, v) = linalg::eigh(x, Uplo::Lower)?;
        let c = Var::new(rand(&[4], 11));
        wsum(&l, 12)?.add(&wsum(&v.mul(&c)?.matmul(&v.transpose(-2, -1)?)?, 13)?)
    });
    for (m, n) in [(5, 3), (3, 5), (4, 4)] {
        let r = rand(&[m, n], (m * 7 + n) as u64);
        fd_check(&r, false, |x| {
            let (u, s, vh) = linalg::svd(x, false)?;
            let c = Var::new(rand(&[m.min(n)], 14));
            wsum(&s, 15)?.add(&wsum(&u.mul(&c)?.matmul(&vh)?, 16)?)
        });
        fd_check(&r, false, |x| {
            let (q, rr) = linalg::qr(x, QrMode::Reduced)?;
            let d = diag_signs(&rr)?;
            wsum(&q.mul(&d.unsqueeze(-2)?)?, 17)?.add(&wsum(&rr.mul(&d.unsqueeze(-1)?)?, 18)?)
        });
        if m >= n {
            let bb = Var::new(rand(&[m, 2], 19));
            fd_check(&r, false, |x| wsum(&linalg::lstsq(x, &bb, None)?, 20));
        }
    }
}

/// The determinant's gradient is PyTorch 2.15's: 0 for an exactly singular
/// matrix (its first-order backward solves with a zero right-hand side),
/// the cofactors for a nearly singular one.
#[test]
fn det_gradient_of_singular_and_nearly_singular_matrices() {
    let grad_of = |d: f64| {
        let a = Var::parameter(
            Tensor::from_slice(&[1.0f64, 2.0, 2.0, 4.0 + d], &[2, 2], Device::Cpu).unwrap(),
        )
        .unwrap();
        linalg::det(&a).unwrap().backward().unwrap();
        a.grad().unwrap()
    };
    let zero = Tensor::zeros(&[2, 2], DType::F64, Device::Cpu).unwrap();
    assert!(grad_of(0.0).allclose(&zero, 0.0, 0.0).unwrap());
    // adj(A)ᵀ = [[d, -c], [-b, a]].
    let want =
        Tensor::from_slice(&[4.0f64 + 1e-10, -2.0, -2.0, 1.0], &[2, 2], Device::Cpu).unwrap();
    assert!(grad_of(1e-10).allclose(&want, 1e-5, 1e-5).unwrap());
}
