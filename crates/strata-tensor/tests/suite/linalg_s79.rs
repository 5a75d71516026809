//! Session 79: `strata_tensor::linalg` against PyTorch 2.15's CPU
//! (`torch.linalg`): `benches/anchors/gen_linalg_s79.py` drew 5,534 calls
//! (orders 0..8 and 32/64, batches including empty ones, transposed
//! inputs, f32 and f64, singular and near-singular matrices, matrices that
//! are not positive-definite, rectangular ones, non-finite input to the
//! SVD, and the calls PyTorch refuses). Each must give PyTorch's shapes and
//! values, or fail where PyTorch raised — with PyTorch's words for a
//! singular matrix and a matrix that is not positive-definite.
//!
//! The factorizations are `faer`'s, not LAPACK's, so values agree to a
//! tolerance scaled by the result's largest magnitude (f64: 1e-9, f32:
//! 2e-4), not bit for bit. Where the factors are unique only up to signs
//! both sides are normalized the same way before they are compared (the
//! generator's `norm_cols`/`qr_norm`/`svd_norm`): QR as `Q D`, `D R` with `D
//! = sign(diag R)` (only `Q`'s first `k` columns for a complete QR of a tall
//! matrix, the others not being unique); eigenvectors and the left singular
//! vectors with the largest-magnitude component of each column positive
//! (the right ones flipped with them). The tests also check what holds
//! whatever the signs: `Q R = A`, `QᵀQ = I`, `V diag(L) Vᵀ = A`, `U diag(S)
//! Vh = A`.

use crate::pytorch_fixture::{fixture, gunzip, num, opt_ints, opt_num, ord_of, shape};
use serde_json::Value;
use std::sync::LazyLock;
use strata_tensor::linalg::{self, QrMode, Uplo};
use strata_tensor::{DType, Device, Result, Tensor, TensorError};

static TEXT: LazyLock<String> =
    LazyLock::new(|| gunzip(include_bytes!("../data/linalg_s79.json.gz")));

/// The input a record describes: its stored row-major values, seen through
/// `transpose(-2, -1)` (a non-contiguous view) where `t` says so.
pub fn inp(d: &Value, device: Device) -> Tensor {
    let sh = shape(&d["shape"]);
    let vals = d["values"].as_array().unwrap();
    let base = match d["dtype"].as_str().unwrap() {
        name @ ("i64" | "i32") => {
            let v: Vec<i64> = vals.iter().map(|x| x.as_i64().unwrap()).collect();
            let t = Tensor::from_slice(&v, &sh, device).unwrap();
            if name == "i32" {
                t.to_dtype(DType::I32).unwrap()
            } else {
                t
            }
        }
        name => {
            let v: Vec<f64> = vals.iter().map(num).collect();
            let dt = crate::pytorch_fixture::dtype(name);
            Tensor::from_slice(&v, &sh, device)
                .unwrap()
                .to_dtype(dt)
                .unwrap()
        }
    };
    if d["t"].as_bool().unwrap() {
        base.transpose(-2, -1).unwrap()
    } else {
        base
    }
}

/// Row-major values and shape of `t` as f64 on the host.
fn host(t: &Tensor) -> (Vec<f64>, Vec<usize>) {
    let t = t.to(Device::Cpu).unwrap();
    (t.to_vec_as::<f64>().unwrap(), t.shape().to_vec())
}

fn from_host(v: Vec<f64>, shape: &[usize], like: &Tensor) -> Tensor {
    Tensor::from_vec(v, shape, Device::Cpu)
        .unwrap()
        .to_dtype(like.dtype())
        .unwrap()
}

/// Per matrix of `v` (`[.., m, c]`), the sign (+1 where 0) of the
/// largest-magnitude component of each column of `reference` (the first
/// one of equal magnitudes, as `argmax`).
fn col_signs(reference: &[f64], shape: &[usize]) -> Vec<f64> {
    let nd = shape.len();
    let (m, c) = (shape[nd - 2], shape[nd - 1]);
    let count: usize = shape[..nd - 2].iter().product();
    let mut out = Vec::with_capacity(count * c);
    for b in 0..count {
        for j in 0..c {
            let (mut best, mut at) = (-1.0f64, 0);
            for i in 0..m {
                let x = reference[b * m * c + i * c + j].abs();
                if x > best {
                    best = x;
                    at = i;
                }
            }
            let s = if m == 0 {
                1.0
            } else {
                reference[b * m * c + at * c + j].signum()
            };
            out.push(if s == 0.0 { 1.0 } else { s });
        }
    }
    out
}

/// `x` (`[.., r, c]`) with column `j` of matrix `b` times `s[b * c + j]`
/// (`by_col`) or row `i` times `s[b * r + i]`.
fn scale(x: &[f64], shape: &[usize], s: &[f64], by_col: bool) -> Vec<f64> {
    let nd = shape.len();
    let (r, c) = (shape[nd - 2], shape[nd - 1]);
    x.iter()
        .enumerate()
        .map(|(idx, &v)| {
            let b = idx / (r * c).max(1);
            let (i, j) = ((idx / c.max(1)) % r.max(1), idx % c.max(1));
            v * if by_col { s[b * c + j] } else { s[b * r + i] }
        })
        .collect()
}

/// The first `k` columns of each `[.., r, c]` matrix.
fn first_cols(x: &[f64], shape: &[usize], k: usize) -> (Vec<f64>, Vec<usize>) {
    let nd = shape.len();
    let (r, c) = (shape[nd - 2], shape[nd - 1]);
    let count: usize = shape[..nd - 2].iter().product();
    let mut out = Vec::new();
    for b in 0..count {
        for i in 0..r {
            out.extend_from_slice(&x[b * r * c + i * c..b * r * c + i * c + k]);
        }
    }
    let mut sh = shape.to_vec();
    sh[nd - 1] = k;
    (out, sh)
}

/// `(Q D, D R)` with `D = sign(diag R)` (+1 where 0), `Q` cut to `k`
/// columns where a complete factorization has more (not unique).
fn qr_norm(q: &Tensor, r: &Tensor, mode: QrMode, a: &Tensor) -> Result<Vec<Tensor>> {
    let nd = a.ndim();
    let (m, n) = (a.shape()[nd - 2], a.shape()[nd - 1]);
    let k = m.min(n);
    let (rv, rs) = host(r);
    let count: usize = rs[..rs.len() - 2].iter().product();
    let rrows = rs[rs.len() - 2];
    if k == 0 {
        // The generator leaves empty factorizations as they are.
        return Ok(vec![q.clone(), r.clone()]);
    }
    // D per matrix, over R's rows (only the first k have a diagonal).
    let mut d_rows = Vec::new();
    let mut d_cols = Vec::new();
    for b in 0..count {
        for i in 0..rrows {
            let s = if i < k {
                let v = rv[b * rrows * n + i * n + i].signum();
                if v == 0.0 {
                    1.0
                } else {
                    v
                }
            } else {
                1.0
            };
            d_rows.push(s);
        }
    }
    let rn = from_host(scale(&rv, &rs, &d_rows, false), &rs, r);
    if mode == QrMode::R {
        return Ok(vec![rn]);
    }
    let (qv, qs) = host(q);
    let qc = qs[qs.len() - 1];
    for b in 0..count {
        for j in 0..qc {
            d_cols.push(if j < k { d_rows[b * rrows + j] } else { 1.0 });
        }
    }
    let qn = scale(&qv, &qs, &d_cols, true);
    let (qn, qsh) = if mode == QrMode::Complete && m > k {
        first_cols(&qn, &qs, k)
    } else {
        (qn, qs)
    };
    Ok(vec![from_host(qn, &qsh, q), rn])
}

/// strata's answer to case `c` on `device`, normalized as the generator
/// normalized PyTorch's.
pub fn call(c: &Value, device: Device) -> Result<Vec<Tensor>> {
    let t: Vec<Tensor> = c["inputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| inp(r, device))
        .collect();
    let a = &c["args"];
    let int = |k: &str| a[k].as_i64().unwrap();
    let flag = |k: &str| a[k].as_bool().unwrap_or(false);
    let uplo = || {
        if a["uplo"].as_str() == Some("U") {
            Uplo::Upper
        } else {
            Uplo::Lower
        }
    };
    let dim_list = || opt_ints(&a["dim"]);
    let one = |r: Result<Tensor>| r.map(|t| vec![t]);
    match c["op"].as_str().unwrap() {
        "det" => one(linalg::det(&t[0])),
        "slogdet" => linalg::slogdet(&t[0]).map(|(s, l)| vec![s, l]),
        "logdet" => one(linalg::logdet(&t[0])),
        "inv" => one(linalg::inv(&t[0])),
        "solve" => one(linalg::solve(&t[0], &t[1])),
        "cholesky" => one(linalg::cholesky(&t[0], flag("upper"))),
        "eigh" => {
            let (l, v) = linalg::eigh(&t[0], uplo())?;
            let (vv, vs) = host(&v);
            let s = col_signs(&vv, &vs);
            Ok(vec![l, from_host(scale(&vv, &vs, &s, true), &vs, &v)])
        }
        "eigvalsh" => one(linalg::eigvalsh(&t[0], uplo())),
        "matrix_power" => one(linalg::matrix_power(&t[0], int("k"))),
        "cond" => one(linalg::cond(&t[0], ord_of(&a["p"]))),
        "matrix_norm" => {
            let d = dim_list().unwrap_or(vec![-2, -1]);
            one(linalg::matrix_norm(
                &t[0],
                ord_of(&a["p"]).unwrap(),
                [d[0], d[1]],
                flag("keepdim"),
            ))
        }
        "qr" => {
            let mode = match a["mode"].as_str().unwrap() {
                "reduced" => QrMode::Reduced,
                "complete" => QrMode::Complete,
                _ => QrMode::R,
            };
            let (q, r) = linalg::qr(&t[0], mode)?;
            qr_norm(&q, &r, mode, &t[0])
        }
        "svd" => {
            let (u, s, vh) = linalg::svd(&t[0], flag("full_matrices"))?;
            let k = *s.shape().last().unwrap();
            let (uv, us) = host(&u);
            let (vv, vs) = host(&vh);
            let (uk, uks) = first_cols(&uv, &us, k);
            // Vh's first k rows.
            let nd = vs.len();
            let (vr, vc) = (vs[nd - 2], vs[nd - 1]);
            let count: usize = vs[..nd - 2].iter().product();
            let mut vk = Vec::new();
            for b in 0..count {
                vk.extend_from_slice(&vv[b * vr * vc..b * vr * vc + k * vc]);
            }
            let mut vks = vs.clone();
            vks[nd - 2] = k;
            if k == 0 {
                return Ok(vec![from_host(uk, &uks, &u), s, from_host(vk, &vks, &vh)]);
            }
            let sg = col_signs(&uk, &uks);
            Ok(vec![
                from_host(scale(&uk, &uks, &sg, true), &uks, &u),
                s,
                from_host(scale(&vk, &vks, &sg, false), &vks, &vh),
            ])
        }
        "svdvals" => one(linalg::svdvals(&t[0])),
        "pinv" => one(linalg::pinv(
            &t[0],
            opt_num(&a["atol"]),
            opt_num(&a["rtol"]),
            flag("hermitian"),
        )),
        "matrix_rank" => one(linalg::matrix_rank(
            &t[0],
            opt_num(&a["atol"]),
            opt_num(&a["rtol"]),
            flag("hermitian"),
        )),
        "lstsq" => linalg::lstsq(&t[0], &t[1], None).map(|r| vec![r.solution, r.rank]),
        "cross" => one(linalg::cross(&t[0], &t[1], int("dim"))),
        "vecdot" => one(linalg::vecdot(&t[0], &t[1], int("dim"))),
        "vector_norm" => {
            let d = dim_list();
            one(linalg::vector_norm(
                &t[0],
                num(&a["p"]),
                d.as_deref(),
                false,
            ))
        }
        "norm" => {
            let d = dim_list();
            one(linalg::norm(&t[0], ord_of(&a["p"]), d.as_deref(), false))
        }
        op => panic!("op {op}"),
    }
}

/// The tolerance of a result of `dt`: relative to each value and to the
/// result's largest magnitude.
fn tol(dt: DType) -> f64 {
    if dt == DType::F64 {
        1e-9
    } else {
        2e-4
    }
}

/// What differs between strata's answer and PyTorch's for case `c`.
fn differs(c: &Value, got: Result<Vec<Tensor>>) -> Option<String> {
    let want = &c["results"];
    let got = match (got, want.as_array()) {
        (Err(e), None) => {
            let msg = c["error"].as_str().unwrap();
            let exact = msg.contains("singular") || msg.contains("positive-definite");
            return (exact && e.to_string() != msg)
                .then(|| format!("error {e} where PyTorch said {msg}"));
        }
        (Err(e), Some(_)) => return Some(format!("strata failed: {e}")),
        (Ok(_), None) => return Some(format!("PyTorch raised {}", c["error"])),
        (Ok(g), Some(_)) => g,
    };
    let want = want.as_array().unwrap();
    if got.len() != want.len() {
        return Some(format!("{} results, PyTorch {}", got.len(), want.len()));
    }
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let ws = shape(&w["shape"]);
        if g.shape() != ws.as_slice() {
            return Some(format!("result {i}: shape {:?}, PyTorch {ws:?}", g.shape()));
        }
        let (gv, _) = host(g);
        let wv: Vec<f64> = w["data"].as_array().unwrap().iter().map(num).collect();
        let big = wv
            .iter()
            .filter(|v| v.is_finite())
            .fold(0.0f64, |m, v| m.max(v.abs()));
        // f32 singular vectors and eigenvectors of the larger matrices are
        // as sensitive as the gaps between their values are small.
        let vectors = matches!(
            (c["op"].as_str().unwrap(), i),
            ("svd", 0) | ("svd", 2) | ("eigh", 1)
        );
        let t = match g.dtype() {
            DType::F32 if vectors => 5e-3,
            d if d.is_float() => tol(d),
            _ => 0.0,
        };
        for (j, (&x, &y)) in gv.iter().zip(&wv).enumerate() {
            let ok = x == y
                || (x.is_nan() && y.is_nan())
                || (x.is_finite() && y.is_finite() && (x - y).abs() <= t * (y.abs() + big));
            if !ok {
                return Some(format!("result {i} element {j}: {x}, PyTorch {y}"));
            }
        }
    }
    None
}

fn check(text: &str, device: Device) -> (usize, Vec<String>) {
    let f = fixture(text);
    let cases = f["cases"].as_array().unwrap();
    let mut bad = Vec::new();
    for c in cases {
        if let Some(d) = differs(c, call(c, device)) {
            bad.push(format!("{} {} {}: {d}", c["op"], c["args"], shape_str(c)));
        }
    }
    (cases.len(), bad)
}

fn shape_str(c: &Value) -> String {
    c["inputs"]
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
        .collect::<Vec<_>>()
        .join(",")
}

fn assert_all(device: Device) {
    let (n, bad) = check(&TEXT, device);
    assert!(n >= 5_500, "{n} cases");
    assert!(
        bad.is_empty(),
        "{} of {n} cases differ: {:#?}",
        bad.len(),
        &bad[..bad.len().min(40)]
    );
}

#[test]
fn linalg_matches_pytorch() {
    assert_all(Device::Cpu);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn linalg_matches_pytorch_on_a_gpu() {
    assert_all(crate::hostile_calls::gpu());
}

// ----- what holds whatever signs the factorizations choose -----

fn close(a: &Tensor, b: &Tensor, t: f64) -> bool {
    a.allclose(b, t, t).unwrap()
}

fn rand(shape: &[usize], seed: u64) -> Tensor {
    Tensor::randn(shape, DType::F64, seed, Device::Cpu).unwrap()
}

#[test]
fn factors_reconstruct_their_matrix_and_are_orthonormal() -> Result<()> {
    for (m, n) in [(5, 3), (3, 5), (4, 4), (7, 1)] {
        let a = rand(&[2, m, n], (m * 10 + n) as u64);
        let (q, r) = linalg::qr(&a, QrMode::Reduced)?;
        assert!(close(&q.matmul(&r)?, &a, 1e-12));
        let k = m.min(n);
        let eye = Tensor::eye(k, None, DType::F64, Device::Cpu)?;
        assert!(close(&q.transpose(-2, -1)?.matmul(&q)?, &eye, 1e-12));
        // R upper triangular.
        assert!(r.tril(-1)?.abs()?.max()?.item::<f64>()? == 0.0);
        let (qc, rc) = linalg::qr(&a, QrMode::Complete)?;
        assert!(close(&qc.matmul(&rc)?, &a, 1e-12));
        let em = Tensor::eye(m, None, DType::F64, Device::Cpu)?;
        assert!(close(&qc.transpose(-2, -1)?.matmul(&qc)?, &em, 1e-12));
        for full in [false, true] {
            let (u, s, vh) = linalg::svd(&a, full)?;
            let uk = u.narrow(-1, 0, k as i64)?;
            let vk = vh.narrow(-2, 0, k as i64)?;
            assert!(close(&uk.mul(&s.unsqueeze(-2)?)?.matmul(&vk)?, &a, 1e-12));
            let eu = Tensor::eye(u.shape()[2], None, DType::F64, Device::Cpu)?;
            assert!(close(&u.transpose(-2, -1)?.matmul(&u)?, &eu, 1e-12));
        }
    }
    let x = rand(&[3, 6, 6], 7);
    let h = x.add(&x.transpose(-2, -1)?)?;
    for uplo in [Uplo::Lower, Uplo::Upper] {
        let (l, v) = linalg::eigh(&h, uplo)?;
        let back = v.mul(&l.unsqueeze(-2)?)?.matmul(&v.transpose(-2, -1)?)?;
        assert!(close(&back, &h, 1e-12));
    }
    Ok(())
}

#[test]
fn eigh_and_cholesky_read_only_their_triangle() -> Result<()> {
    let x = rand(&[4, 4], 3);
    let spd = x
        .matmul(&x.t()?)?
        .add(&Tensor::eye(4, None, DType::F64, Device::Cpu)?.mul(4.0)?)?;
    // Garbage in the other triangle is not read.
    let lower_only = spd.tril(0)?.add(&spd.triu(1)?.mul(1e3)?)?;
    let upper_only = spd.triu(0)?.add(&spd.tril(-1)?.mul(-7.0)?)?;
    assert!(close(
        &linalg::cholesky(&lower_only, false)?,
        &linalg::cholesky(&spd, false)?,
        1e-12
    ));
    assert!(close(
        &linalg::cholesky(&upper_only, true)?,
        &linalg::cholesky(&spd, true)?,
        1e-12
    ));
    assert!(close(
        &linalg::eigvalsh(&upper_only, Uplo::Upper)?,
        &linalg::eigvalsh(&spd, Uplo::Lower)?,
        1e-12
    ));
    Ok(())
}

#[test]
fn singular_errors_carry_pytorch_facts() {
    let s = Tensor::from_slice(&[1.0f64, 2.0, 2.0, 4.0], &[2, 2], Device::Cpu).unwrap();
    let batch = Tensor::stack(
        &[&Tensor::eye(2, None, DType::F64, Device::Cpu).unwrap(), &s],
        0,
    )
    .unwrap();
    match linalg::inv(&batch).unwrap_err() {
        TensorError::Singular { op, batch, index } => {
            assert_eq!((op, batch, index), ("linalg.inv", Some(1), 2))
        }
        e => panic!("{e}"),
    }
    match linalg::cholesky(&s, false).unwrap_err() {
        TensorError::NotPositiveDefinite { batch, order, .. } => {
            assert_eq!((batch, order), (None, 2))
        }
        e => panic!("{e}"),
    }
    assert_eq!(linalg::det(&s).unwrap().item::<f64>().unwrap(), 0.0);
}

mod props {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// solve(A, A X) recovers X for well-conditioned A (a random matrix
        /// plus n I), any batch and right-hand sides.
        #[test]
        fn solve_recovers_what_a_product_made(
            n in 1usize..9, k in 1usize..4, b in 0usize..3, seed in 0u64..1_000_000,
        ) {
            let a = rand(&[b, n, n], seed)
                .add(&Tensor::eye(n, None, DType::F64, Device::Cpu).unwrap().mul(n as f64 + 1.0).unwrap())
                .unwrap();
            let x = rand(&[b, n, k], seed + 1);
            let got = linalg::solve(&a, &a.matmul(&x).unwrap()).unwrap();
            prop_assert!(close(&got, &x, 1e-10));
            let f = a.to_dtype(DType::F32).unwrap();
            let xf = x.to_dtype(DType::F32).unwrap();
            let got = linalg::solve(&f, &f.matmul(&xf).unwrap()).unwrap();
            prop_assert!(got.allclose(&xf, 1e-3, 1e-3).unwrap());
        }
    }
}
