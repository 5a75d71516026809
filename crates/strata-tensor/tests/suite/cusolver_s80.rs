//! Session 80: `strata_tensor::linalg` on a GPU through cuSOLVER
//! (`backend/cuda/cusolver.rs`, `ops/linalg/gpu.rs`) against the host path
//! (`faer`, the same calls with `linalg::set_cusolver_enabled(false)`):
//! random batches of every routine in f32 and f64, singular and
//! non-positive-definite matrices giving the same typed errors (the same
//! batch element and index), empty batches, non-contiguous and expanded
//! inputs, non-finite inputs. Values agree to a tolerance scaled by the
//! result's largest magnitude (f64: 1e-9, f32: 2e-4, as `linalg_s79`);
//! factors unique only up to signs (QR, eigenvectors, singular vectors)
//! are normalised on both sides first, as `linalg_s79` normalises them.
//!
//! The GPU tests are ignored without a GPU. The toggle is process-wide, so
//! the tests here that flip it take one lock (other suites' GPU linalg tests
//! get the same answers either way).

use std::sync::Mutex;
use strata_tensor::linalg::{self, NormOrd, QrMode, Uplo};
use strata_tensor::{cuda, DType, Device, Result, Tensor, TensorError};

static TOGGLE: Mutex<()> = Mutex::new(());

/// The GPU, with cuSOLVER loaded (so that nothing below compares the host
/// path with itself).
fn gpu() -> Device {
    let d = crate::hostile_calls::gpu();
    assert!(
        cuda::cusolver_version().is_some(),
        "cuSOLVER does not load: {}",
        cuda::cusolver_unavailable_reason().unwrap_or_default()
    );
    d
}

/// `f` through the host path and through cuSOLVER: `(host, gpu)`.
fn both<R>(f: impl Fn() -> R) -> (R, R) {
    let _g = TOGGLE.lock().unwrap_or_else(|e| e.into_inner());
    let before = linalg::cusolver_enabled();
    linalg::set_cusolver_enabled(false);
    let host = f();
    linalg::set_cusolver_enabled(true);
    let dev = f();
    linalg::set_cusolver_enabled(before);
    (host, dev)
}

fn tol(dt: DType) -> f64 {
    if dt == DType::F64 {
        1e-9
    } else {
        2e-4
    }
}

fn vals(t: &Tensor) -> Vec<f64> {
    t.to(Device::Cpu).unwrap().to_vec_as::<f64>().unwrap()
}

/// `host` and `got` of one shape and dtype, `got` on `dev`, equal to the
/// dtype's tolerance scaled by the largest magnitude (NaN where the other
/// is NaN, infinities equal).
fn agree(what: &str, host: &Tensor, got: &Tensor, dev: Device) {
    agree_within(what, host, got, dev, 1.0);
}

/// [`agree`] with the tolerance times `scale`.
fn agree_within(what: &str, host: &Tensor, got: &Tensor, dev: Device, scale: f64) {
    assert_eq!(host.shape(), got.shape(), "{what}: shapes");
    assert_eq!(host.dtype(), got.dtype(), "{what}: dtypes");
    assert_eq!(got.device(), dev, "{what}: device");
    let (h, g) = (vals(host), vals(got));
    let big = h
        .iter()
        .filter(|v| v.is_finite())
        .fold(1.0f64, |m, v| m.max(v.abs()));
    let t = tol(host.dtype()) * scale;
    for (i, (x, y)) in h.iter().zip(&g).enumerate() {
        let ok = (x.is_nan() && y.is_nan())
            || x == y
            || (x.is_finite() && y.is_finite() && (x - y).abs() <= t * big);
        assert!(ok, "{what}: element {i}: host {x}, cuSOLVER {y}");
    }
}

/// The same error (variant, batch element, index, words).
fn same_error<T: std::fmt::Debug>(what: &str, host: Result<T>, got: Result<T>) {
    match (host, got) {
        (Err(h), Err(g)) => assert_eq!(format!("{h:?}"), format!("{g:?}"), "{what}"),
        (h, g) => panic!("{what}: expected errors, got host {h:?} and cuSOLVER {g:?}"),
    }
}

fn randn(shape: &[usize], dt: DType, seed: u64, dev: Device) -> Tensor {
    Tensor::randn(shape, dt, seed, dev).unwrap()
}

/// Well-conditioned square matrices: random plus `n` on the diagonal.
fn square(batch: &[usize], n: usize, dt: DType, seed: u64, dev: Device) -> Tensor {
    let mut shape = batch.to_vec();
    shape.extend([n, n]);
    let eye = Tensor::eye(n, None, dt, dev).unwrap();
    randn(&shape, dt, seed, dev)
        .add(&eye.mul(n as f64).unwrap())
        .unwrap()
}

/// Symmetric positive-definite matrices: `X Xᵀ + n I`.
fn spd(batch: &[usize], n: usize, dt: DType, seed: u64, dev: Device) -> Tensor {
    let mut shape = batch.to_vec();
    shape.extend([n, n]);
    let x = randn(&shape, dt, seed, dev);
    let eye = Tensor::eye(n, None, dt, dev).unwrap();
    x.matmul(&x.transpose(-2, -1).unwrap())
        .unwrap()
        .add(&eye.mul(n as f64).unwrap())
        .unwrap()
}

const BATCHES: [&[usize]; 3] = [&[], &[3], &[2, 3]];
const DTYPES: [DType; 2] = [DType::F32, DType::F64];

/// Per matrix, `+1`/`-1` (`+1` for 0) of `r`'s diagonal entries (`[.., k,
/// n]` → `[.., k]`), as a tensor on the host.
fn diag_signs(r: &Tensor, k: usize) -> Tensor {
    let d = r
        .to(Device::Cpu)
        .unwrap()
        .narrow(-2, 0, k as i64)
        .unwrap()
        .diagonal(0, -2, -1)
        .unwrap()
        .contiguous()
        .unwrap();
    let s: Vec<f64> = d
        .to_vec_as::<f64>()
        .unwrap()
        .into_iter()
        .map(|v| if v < 0.0 { -1.0 } else { 1.0 })
        .collect();
    Tensor::from_vec(s, d.shape(), Device::Cpu)
        .unwrap()
        .to_dtype(r.dtype())
        .unwrap()
}

/// Per matrix, the sign of each column's largest-magnitude component of
/// `v` (`[.., m, c]` → `[.., c]`; the first of equal magnitudes).
fn col_signs(v: &Tensor) -> Tensor {
    let v = v.to(Device::Cpu).unwrap().contiguous().unwrap();
    let nd = v.ndim();
    let (m, c) = (v.shape()[nd - 2], v.shape()[nd - 1]);
    let x = v.to_vec_as::<f64>().unwrap();
    let count = x.len().checked_div(m * c).unwrap_or(0);
    let mut out = Vec::new();
    for b in 0..count {
        for j in 0..c {
            let (mut best, mut s) = (-1.0f64, 1.0f64);
            for i in 0..m {
                let e = x[b * m * c + i * c + j];
                if e.abs() > best {
                    best = e.abs();
                    s = if e < 0.0 { -1.0 } else { 1.0 };
                }
            }
            out.push(s);
        }
    }
    let mut shape = v.shape()[..nd - 2].to_vec();
    shape.push(c);
    Tensor::from_vec(out, &shape, Device::Cpu)
        .unwrap()
        .to_dtype(v.dtype())
        .unwrap()
}

/// `x` on the host with column `j` times `s[.., j]`.
fn by_cols(x: &Tensor, s: &Tensor) -> Tensor {
    x.to(Device::Cpu)
        .unwrap()
        .mul(&s.unsqueeze(-2).unwrap())
        .unwrap()
}

/// `x` on the host with row `i` times `s[.., i]`.
fn by_rows(x: &Tensor, s: &Tensor) -> Tensor {
    x.to(Device::Cpu)
        .unwrap()
        .mul(&s.unsqueeze(-1).unwrap())
        .unwrap()
}

/// `agree` for host-side normalised factors (both moved to the host), at
/// ten times the tolerance: eigenvectors and singular vectors are only as
/// accurate as the gaps between their values allow.
fn agree_host(what: &str, host: &Tensor, got: &Tensor) {
    agree_within(what, host, got, Device::Cpu, 10.0);
}

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn cusolver_loads_on_a_gpu() {
    let _ = gpu();
    let _g = TOGGLE.lock().unwrap_or_else(|e| e.into_inner());
    assert!(cuda::cusolver_unavailable_reason().is_none());
    // On by default (session 81), unless the process was started with
    // the variable saying no.
    let off = std::env::var(linalg::CUSOLVER_VAR).is_ok_and(|v| {
        ["0", "false", "off", "no"].contains(&v.trim().to_ascii_lowercase().as_str())
    });
    assert_eq!(linalg::cusolver_enabled(), !off);
}

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn lu_family_matches_the_host_on_a_gpu() {
    let dev = gpu();
    let mut seed = 1;
    for dt in DTYPES {
        for batch in BATCHES {
            for n in [1, 2, 3, 5, 16] {
                seed += 1;
                let a = square(batch, n, dt, seed, dev);
                let w = format!("{dt} {batch:?} n={n}");
                let (h, g) = both(|| linalg::det(&a).unwrap());
                agree(&format!("det {w}"), &h, &g, dev);
                let (h, g) = both(|| linalg::slogdet(&a).unwrap());
                agree(&format!("slogdet sign {w}"), &h.0, &g.0, dev);
                agree(&format!("slogdet log {w}"), &h.1, &g.1, dev);
                let (h, g) = both(|| linalg::logdet(&a).unwrap());
                agree(&format!("logdet {w}"), &h, &g, dev);
                let (h, g) = both(|| linalg::inv(&a).unwrap());
                agree(&format!("inv {w}"), &h, &g, dev);
                // A vector and a matrix right-hand side.
                let mut vs = batch.to_vec();
                vs.push(n);
                let bv = randn(&vs, dt, seed + 100, dev);
                let (h, g) = both(|| linalg::solve(&a, &bv).unwrap());
                agree(&format!("solve vector {w}"), &h, &g, dev);
                let mut ms = batch.to_vec();
                ms.extend([n, 4]);
                let bm = randn(&ms, dt, seed + 200, dev);
                let (h, g) = both(|| linalg::solve(&a, &bm).unwrap());
                agree(&format!("solve matrix {w}"), &h, &g, dev);
                for p in [NormOrd::P(1.0), NormOrd::Fro, NormOrd::P(f64::INFINITY)] {
                    let (h, g) = both(|| linalg::cond(&a, Some(p)).unwrap());
                    agree(&format!("cond {p:?} {w}"), &h, &g, dev);
                }
                let (h, g) = both(|| linalg::matrix_power(&a, -3).unwrap());
                agree(&format!("matrix_power -3 {w}"), &h, &g, dev);
            }
        }
    }
}

/// A batch of 4 whose elements 1 and 3 are singular: element 1 is `[[0,
/// 0, 0], [1, 1, 2], [2, 2, 1]]`, whose LU has its zero pivot at 2 where
/// its transpose's would be at 1 (so a transposed factorization shows).
/// Every multiplier and update is exact (halves of small integers), so no
/// implementation's rounding or fused multiply-adds can leave a tiny
/// nonzero pivot (with a `3` in place of the `2`s, faer's fused `1 - (1/3)
/// 3` does, and its zero pivot moves to 3).
fn singular_batch(dt: DType, dev: Device) -> Tensor {
    let good = square(&[4], 3, dt, 5, dev).to(Device::Cpu).unwrap();
    let mut v = good.to_vec_as::<f64>().unwrap();
    v[9..18].copy_from_slice(&[0.0, 0.0, 0.0, 1.0, 1.0, 2.0, 2.0, 2.0, 1.0]);
    v[27..36].copy_from_slice(&[1.0, 2.0, 3.0, 2.0, 4.0, 6.0, 1.0, 0.0, 1.0]);
    Tensor::from_vec(v, &[4, 3, 3], Device::Cpu)
        .unwrap()
        .to_dtype(dt)
        .unwrap()
        .to(dev)
        .unwrap()
}

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn singular_matrices_give_the_hosts_errors_on_a_gpu() {
    let dev = gpu();
    for dt in DTYPES {
        let a = singular_batch(dt, dev);
        let (h, g) = both(|| linalg::inv(&a));
        if let Err(TensorError::Singular { batch, index, .. }) = &h {
            assert_eq!((*batch, *index), (Some(1), 2), "{h:?}");
        }
        same_error(&format!("inv {dt}"), h, g);
        let b = randn(&[4, 3], dt, 9, dev);
        let (h, g) = both(|| linalg::solve(&a, &b));
        same_error(&format!("solve {dt}"), h, g);
        // One matrix, unbatched: no batch element named.
        let one = a.narrow(0, 3, 1).unwrap().squeeze_dims(&[0]).unwrap();
        let (h, g) = both(|| linalg::inv(&one));
        same_error(&format!("inv one {dt}"), h, g);
        // det and slogdet are 0 and (0, -inf) there, cond infinite.
        let (h, g) = both(|| linalg::det(&a).unwrap());
        agree(&format!("det {dt}"), &h, &g, dev);
        let (h, g) = both(|| linalg::slogdet(&a).unwrap());
        agree(&format!("slogdet {dt}"), &h.0, &g.0, dev);
        agree(&format!("slogdet {dt}"), &h.1, &g.1, dev);
        let (h, g) = both(|| linalg::cond(&a, Some(NormOrd::P(1.0))).unwrap());
        agree(&format!("cond {dt}"), &h, &g, dev);
    }
}

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn cholesky_matches_the_host_on_a_gpu() {
    let dev = gpu();
    let mut seed = 300;
    for dt in DTYPES {
        for batch in BATCHES {
            for n in [1, 2, 3, 6, 17] {
                seed += 1;
                // Different values in the triangle not read: it must not matter.
                let a = spd(batch, n, dt, seed, dev);
                let noise = randn(a.shape(), dt, seed + 1, dev);
                for upper in [false, true] {
                    let junk = if upper {
                        noise.tril(-1).unwrap()
                    } else {
                        noise.triu(1).unwrap()
                    };
                    let x = a.add(&junk).unwrap();
                    let (h, g) = both(|| linalg::cholesky(&x, upper).unwrap());
                    agree(&format!("cholesky {dt} {batch:?} {n} {upper}"), &h, &g, dev);
                }
            }
        }
        // Not positive-definite: element 1 at order 3, element 2 at order 1.
        let a = spd(&[3], 4, dt, 7, dev).to(Device::Cpu).unwrap();
        let mut v = a.to_vec_as::<f64>().unwrap();
        v[16 + 2 * 4 + 2] = -50.0;
        v[32] = -1.0;
        let bad = Tensor::from_vec(v, &[3, 4, 4], Device::Cpu)
            .unwrap()
            .to_dtype(dt)
            .unwrap()
            .to(dev)
            .unwrap();
        for upper in [false, true] {
            let (h, g) = both(|| linalg::cholesky(&bad, upper));
            if let Err(TensorError::NotPositiveDefinite { batch, order, .. }) = &h {
                assert_eq!((*batch, *order), (Some(1), 3), "{h:?}");
            }
            same_error(&format!("cholesky not PD {dt} {upper}"), h, g);
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn qr_matches_the_host_on_a_gpu() {
    let dev = gpu();
    let mut seed = 500;
    for dt in DTYPES {
        for batch in BATCHES {
            for (m, n) in [(5, 3), (3, 5), (4, 4), (7, 1), (1, 7), (1, 1)] {
                seed += 1;
                let mut shape = batch.to_vec();
                shape.extend([m, n]);
                let a = randn(&shape, dt, seed, dev);
                let k = m.min(n);
                let w = format!("{dt} {batch:?} {m}x{n}");
                for mode in [QrMode::Reduced, QrMode::Complete, QrMode::R] {
                    let (h, g) = both(|| linalg::qr(&a, mode).unwrap());
                    assert_eq!(h.0.shape(), g.0.shape(), "Q {mode:?} {w}");
                    assert_eq!(h.1.shape(), g.1.shape(), "R {mode:?} {w}");
                    assert_eq!(g.1.device(), dev);
                    // D R and Q D with D = sign(diag R); Q's first k columns.
                    let (dh, dg) = (diag_signs(&h.1, k), diag_signs(&g.1, k));
                    let rows =
                        |r: &Tensor, d: &Tensor| by_rows(&r.narrow(-2, 0, k as i64).unwrap(), d);
                    agree_host(
                        &format!("R {mode:?} {w}"),
                        &rows(&h.1, &dh),
                        &rows(&g.1, &dg),
                    );
                    if mode != QrMode::R {
                        let qk = |q: &Tensor| q.narrow(-1, 0, k as i64).unwrap();
                        agree_host(
                            &format!("Q {mode:?} {w}"),
                            &by_cols(&qk(&h.0), &dh),
                            &by_cols(&qk(&g.0), &dg),
                        );
                        // What holds whatever the signs.
                        let qr = g.0.matmul(&g.1).unwrap();
                        agree(&format!("QR {mode:?} {w}"), &a, &qr, dev);
                        let c = g.0.shape()[g.0.ndim() - 1];
                        let eye = Tensor::eye(c, None, dt, dev).unwrap();
                        let qtq = g.0.transpose(-2, -1).unwrap().matmul(&g.0).unwrap();
                        agree(
                            &format!("QtQ {mode:?} {w}"),
                            &eye.expand(&qtq.shape().iter().map(|&s| s as i64).collect::<Vec<_>>())
                                .unwrap()
                                .contiguous()
                                .unwrap(),
                            &qtq,
                            dev,
                        );
                    } else {
                        assert_eq!(g.0.shape(), &[0]);
                    }
                }
            }
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn eigh_matches_the_host_on_a_gpu() {
    let dev = gpu();
    let mut seed = 700;
    for dt in DTYPES {
        for batch in BATCHES {
            for n in [1, 2, 3, 6, 20] {
                seed += 1;
                let mut shape = batch.to_vec();
                shape.extend([n, n]);
                // Not symmetric: each triangle describes another matrix, so
                // a flipped `uplo` shows.
                let a = randn(&shape, dt, seed, dev);
                for uplo in [Uplo::Lower, Uplo::Upper] {
                    let w = format!("{dt} {batch:?} n={n} {uplo:?}");
                    let (h, g) = both(|| linalg::eigh(&a, uplo).unwrap());
                    agree(&format!("eigenvalues {w}"), &h.0, &g.0, dev);
                    assert_eq!(g.1.device(), dev);
                    let (sh, sg) = (col_signs(&h.1), col_signs(&g.1));
                    agree_host(
                        &format!("eigenvectors {w}"),
                        &by_cols(&h.1, &sh),
                        &by_cols(&g.1, &sg),
                    );
                    let (h, g) = both(|| linalg::eigvalsh(&a, uplo).unwrap());
                    agree(&format!("eigvalsh {w}"), &h, &g, dev);
                }
                let s = a.add(&a.transpose(-2, -1).unwrap()).unwrap();
                for herm in [false, true] {
                    let (h, g) = both(|| linalg::matrix_rank(&s, None, None, herm).unwrap());
                    agree(
                        &format!("matrix_rank {herm} {dt} {batch:?} {n}"),
                        &h,
                        &g,
                        dev,
                    );
                }
                let (h, g) = both(|| linalg::pinv(&s, None, None, true).unwrap());
                agree(&format!("pinv hermitian {dt} {batch:?} {n}"), &h, &g, dev);
            }
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn svd_matches_the_host_on_a_gpu() {
    let dev = gpu();
    let mut seed = 900;
    for dt in DTYPES {
        for batch in BATCHES {
            for (m, n) in [(5, 3), (3, 5), (4, 4), (7, 1), (1, 7), (1, 1), (12, 9)] {
                seed += 1;
                let mut shape = batch.to_vec();
                shape.extend([m, n]);
                let a = randn(&shape, dt, seed, dev);
                let k = m.min(n) as i64;
                for full in [false, true] {
                    let w = format!("{dt} {batch:?} {m}x{n} full={full}");
                    let (h, g) = both(|| linalg::svd(&a, full).unwrap());
                    for (x, y) in [(&h.0, &g.0), (&h.2, &g.2)] {
                        assert_eq!(x.shape(), y.shape(), "{w}");
                        assert_eq!(y.device(), dev, "{w}");
                    }
                    agree(&format!("S {w}"), &h.1, &g.1, dev);
                    // The first k singular pairs, signed by U's columns.
                    let uk = |u: &Tensor| u.narrow(-1, 0, k).unwrap();
                    let vk = |v: &Tensor| v.narrow(-2, 0, k).unwrap();
                    let (sh, sg) = (col_signs(&uk(&h.0)), col_signs(&uk(&g.0)));
                    agree_host(
                        &format!("U {w}"),
                        &by_cols(&uk(&h.0), &sh),
                        &by_cols(&uk(&g.0), &sg),
                    );
                    agree_host(
                        &format!("Vh {w}"),
                        &by_rows(&vk(&h.2), &sh),
                        &by_rows(&vk(&g.2), &sg),
                    );
                    let back = uk(&g.0)
                        .mul(&g.1.unsqueeze(-2).unwrap())
                        .unwrap()
                        .matmul(&vk(&g.2))
                        .unwrap();
                    agree(&format!("U S Vh {w}"), &a, &back, dev);
                }
                let w = format!("{dt} {batch:?} {m}x{n}");
                let (h, g) = both(|| linalg::svdvals(&a).unwrap());
                agree(&format!("svdvals {w}"), &h, &g, dev);
                let (h, g) = both(|| linalg::cond(&a, None).unwrap());
                agree(&format!("cond {w}"), &h, &g, dev);
                for p in [NormOrd::P(2.0), NormOrd::P(-2.0), NormOrd::Nuc] {
                    let (h, g) = both(|| linalg::matrix_norm(&a, p, [-2, -1], false).unwrap());
                    agree(&format!("matrix_norm {p:?} {w}"), &h, &g, dev);
                }
                let (h, g) = both(|| linalg::matrix_rank(&a, None, None, false).unwrap());
                agree(&format!("matrix_rank {w}"), &h, &g, dev);
                let (h, g) = both(|| linalg::pinv(&a, None, None, false).unwrap());
                agree(&format!("pinv {w}"), &h, &g, dev);
                let mut bs = batch.to_vec();
                bs.extend([m, 2]);
                let b = randn(&bs, dt, seed + 50, dev);
                let (h, g) = both(|| linalg::lstsq(&a, &b, None).unwrap());
                agree(&format!("lstsq {w}"), &h.solution, &g.solution, dev);
                agree(&format!("lstsq rank {w}"), &h.rank, &g.rank, dev);
            }
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn non_contiguous_and_expanded_inputs_on_a_gpu() {
    let dev = gpu();
    for dt in DTYPES {
        let base = square(&[3], 6, dt, 41, dev);
        let views = [
            ("transposed", base.transpose(-2, -1).unwrap()),
            (
                "stepped",
                // The lower-right block (on the shifted diagonal).
                square(&[3], 12, dt, 42, dev)
                    .narrow(-1, 6, 6)
                    .unwrap()
                    .narrow(-2, 6, 6)
                    .unwrap(),
            ),
            (
                "expanded",
                square(&[], 6, dt, 43, dev)
                    .unsqueeze(0)
                    .unwrap()
                    .expand(&[4, 6, 6])
                    .unwrap(),
            ),
        ];
        for (name, a) in &views {
            let w = format!("{dt} {name}");
            let (h, g) = both(|| linalg::det(a).unwrap());
            agree(&format!("det {w}"), &h, &g, dev);
            let (h, g) = both(|| linalg::inv(a).unwrap());
            agree(&format!("inv {w}"), &h, &g, dev);
            // A non-contiguous right-hand side too.
            let b = randn(&[2, 6], dt, 44, dev).transpose(0, 1).unwrap();
            let (h, g) = both(|| linalg::solve(a, &b).unwrap());
            agree(&format!("solve {w}"), &h, &g, dev);
            let s = a.matmul(&a.transpose(-2, -1).unwrap()).unwrap();
            let (h, g) = both(|| linalg::cholesky(&s, false).unwrap());
            agree(&format!("cholesky {w}"), &h, &g, dev);
            let (h, g) = both(|| linalg::eigvalsh(a, Uplo::Upper).unwrap());
            agree(&format!("eigvalsh {w}"), &h, &g, dev);
            let (h, g) = both(|| linalg::svdvals(a).unwrap());
            agree(&format!("svdvals {w}"), &h, &g, dev);
            let (h, g) = both(|| linalg::qr(a, QrMode::Reduced).unwrap());
            let (dh, dg) = (diag_signs(&h.1, 6), diag_signs(&g.1, 6));
            agree_host(
                &format!("qr R {w}"),
                &by_rows(&h.1, &dh),
                &by_rows(&g.1, &dg),
            );
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn empty_inputs_on_a_gpu() {
    let dev = gpu();
    for dt in DTYPES {
        for shape in [[0usize, 3, 3], [2, 0, 0], [0, 0, 0]] {
            let a = Tensor::zeros(&shape, dt, dev).unwrap();
            let w = format!("{dt} {shape:?}");
            let (h, g) = both(|| linalg::det(&a).unwrap());
            agree(&format!("det {w}"), &h, &g, dev);
            let (h, g) = both(|| linalg::inv(&a).unwrap());
            agree(&format!("inv {w}"), &h, &g, dev);
            let (h, g) = both(|| linalg::cholesky(&a, false).unwrap());
            agree(&format!("cholesky {w}"), &h, &g, dev);
            let (h, g) = both(|| linalg::eigh(&a, Uplo::Lower).unwrap());
            agree(&format!("eigh L {w}"), &h.0, &g.0, dev);
            agree(&format!("eigh V {w}"), &h.1, &g.1, dev);
        }
        for shape in [[0usize, 4, 2], [2, 0, 3], [2, 3, 0]] {
            let a = Tensor::zeros(&shape, dt, dev).unwrap();
            let w = format!("{dt} {shape:?}");
            for mode in [QrMode::Reduced, QrMode::Complete, QrMode::R] {
                let (h, g) = both(|| linalg::qr(&a, mode).unwrap());
                agree(&format!("qr Q {mode:?} {w}"), &h.0, &g.0, dev);
                agree(&format!("qr R {mode:?} {w}"), &h.1, &g.1, dev);
            }
            for full in [false, true] {
                let (h, g) = both(|| linalg::svd(&a, full).unwrap());
                agree(&format!("svd U {w}"), &h.0, &g.0, dev);
                agree(&format!("svd S {w}"), &h.1, &g.1, dev);
                agree(&format!("svd Vh {w}"), &h.2, &g.2, dev);
            }
        }
        // A nonempty A with an empty B: A is still checked for singularity.
        let a = singular_batch(dt, dev);
        let b = Tensor::zeros(&[4, 3, 0], dt, dev).unwrap();
        let (h, g) = both(|| linalg::solve(&a, &b));
        same_error(&format!("solve empty B {dt}"), h, g);
    }
}

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn non_finite_inputs_give_the_hosts_answers_on_a_gpu() {
    let dev = gpu();
    for dt in DTYPES {
        let a = square(&[3], 4, dt, 61, dev).to(Device::Cpu).unwrap();
        let mut v = a.to_vec_as::<f64>().unwrap();
        v[16 + 5] = f64::NAN;
        v[32 + 15] = f64::INFINITY;
        let bad = Tensor::from_vec(v, &[3, 4, 4], Device::Cpu)
            .unwrap()
            .to_dtype(dt)
            .unwrap()
            .to(dev)
            .unwrap();
        let (h, g) = both(|| linalg::svd(&bad, false));
        same_error(&format!("svd {dt}"), h, g);
        let (h, g) = both(|| linalg::svdvals(&bad));
        same_error(&format!("svdvals {dt}"), h, g);
        let (h, g) = both(|| linalg::eigvalsh(&bad, Uplo::Lower).unwrap());
        agree(&format!("eigvalsh {dt}"), &h, &g, dev);
        let (h, g) = both(|| linalg::det(&bad).unwrap());
        agree(&format!("det {dt}"), &h, &g, dev);
    }
}

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn factorizations_run_on_the_current_stream_on_a_gpu() {
    let dev = gpu();
    let side = cuda::Stream::new(dev).unwrap();
    let _on_side = cuda::StreamGuard::new(&side).unwrap();
    for dt in DTYPES {
        // Made on the side stream, factored there, read there.
        let a = square(&[4], 24, dt, 81, dev);
        let (h, g) = both(|| linalg::inv(&a).unwrap());
        agree(&format!("inv {dt}"), &h, &g, dev);
        let s = spd(&[4], 24, dt, 82, dev);
        let (h, g) = both(|| linalg::cholesky(&s, true).unwrap());
        agree(&format!("cholesky {dt}"), &h, &g, dev);
        let (h, g) = both(|| linalg::eigvalsh(&s, Uplo::Lower).unwrap());
        agree(&format!("eigvalsh {dt}"), &h, &g, dev);
        let r = randn(&[4, 30, 20], dt, 83, dev);
        let (h, g) = both(|| linalg::svdvals(&r).unwrap());
        agree(&format!("svdvals {dt}"), &h, &g, dev);
    }
    side.synchronize().unwrap();
}

/// On any machine: where cuSOLVER cannot be loaded (on this CPU-only
/// machine, or with no library in any searched place) the answer is a
/// reason naming where it was searched, not a panic, and the CPU's linalg
/// does not depend on it or on the toggle.
#[test]
fn a_missing_cusolver_is_a_reason_not_a_panic() {
    match (
        cuda::cusolver_version(),
        cuda::cusolver_unavailable_reason(),
    ) {
        (Some(v), None) => assert!(v > 0),
        (None, Some(reason)) => {
            assert!(
                reason.contains("STRATA_CUSOLVER_LIBRARY") || reason.contains("`cuda` feature"),
                "{reason}"
            );
        }
        other => panic!("version and reason disagree: {other:?}"),
    }
    let a = Tensor::from_slice(&[4.0f64, 7.0, 2.0, 6.0], &[2, 2], Device::Cpu).unwrap();
    let (h, g) = both(|| linalg::inv(&a).unwrap());
    agree("inv on the CPU", &h, &g, Device::Cpu);
}

/// Run by [`a_missing_library_named_by_the_variable_is_reported`] in a
/// child process whose `$STRATA_CUSOLVER_LIBRARY` names a file that does
/// not exist: the reason names it (or, where a real cuSOLVER is found in
/// the other places searched, it loads).
#[test]
#[ignore = "run in a child process by a_missing_library_named_by_the_variable_is_reported"]
fn cusolver_reason_probe() {
    let var = std::env::var("STRATA_CUSOLVER_LIBRARY").unwrap_or_default();
    if !var.contains("strata-no-such-dir") {
        // Run directly (`--include-ignored`): nothing to check here.
        return;
    }
    match cuda::cusolver_unavailable_reason() {
        Some(reason) => assert!(reason.contains(&var), "{reason}"),
        None => assert!(cuda::cusolver_version().is_some()),
    }
}

/// On any machine: `$STRATA_CUSOLVER_LIBRARY` pointing at a missing file is
/// a reason naming it (searched first), not a panic; checked in a child
/// process, as the library is looked for once per process.
#[test]
fn a_missing_library_named_by_the_variable_is_reported() {
    let exe = std::env::current_exe().unwrap();
    let out = std::process::Command::new(exe)
        .args([
            "cusolver_s80::cusolver_reason_probe",
            "--exact",
            "--ignored",
            "--test-threads=1",
        ])
        .env(
            "STRATA_CUSOLVER_LIBRARY",
            "/strata-no-such-dir/libcusolver.so.12",
        )
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("1 passed"),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
