//! Unit tests only: the cuSOLVER calls of `gpu.rs` emulated on CPU tensors
//! with LAPACK's column-major semantics (`getrf`'s sequential row swaps and
//! packed factors, `getrs` with `'N'`/`'T'`, `potrf` of one triangle
//! written in place, `geqrf`'s R over the buffer, `orgqr`'s Q columns,
//! `syevd`'s eigenvectors as columns, `gesvd`'s column-major U and Vᵀ), so
//! that `gpu.rs`'s transposes, `uplo` flips, reshapes and reads are checked
//! against the host path on a machine without a GPU. The arithmetic is
//! f64 (LU and Cholesky written out as LAPACK's unblocked `getf2`/`potf2`;
//! the QR, eigen- and singular-value factors `faer`'s via `host.rs`).

use super::{Gesvd, Solver};
use crate::error::Result;
use crate::ops::linalg::host;
use crate::tensor::Tensor;
use faer::{Mat, MatRef};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use strata_alloc::Device;

thread_local! {
    static ON: Cell<bool> = const { Cell::new(false) };
    static CALLS: Cell<usize> = const { Cell::new(0) };
    /// `geqrf`'s complete Q per (tau's address, matrix), for `orgqr`.
    static QS: RefCell<HashMap<(u64, usize), Mat<f64>>> = RefCell::new(HashMap::new());
}

/// Whether this thread's CPU tensors go through the emulation.
pub(super) fn on() -> bool {
    ON.with(Cell::get)
}

/// Turns the emulation on or off for this thread.
pub(super) fn set(v: bool) {
    ON.with(|c| c.set(v));
}

/// How many emulated calls this thread has made.
pub(super) fn calls() -> usize {
    CALLS.with(Cell::get)
}

fn count_call() {
    CALLS.with(|c| c.set(c.get() + 1));
}

/// The emulated solver.
pub(super) struct Host;

fn read(t: &Tensor) -> Result<Vec<f64>> {
    t.to_vec_as::<f64>()
}

/// Writes `v` (row-major over `t`'s shape) into the contiguous `t`.
fn write(t: &Tensor, v: Vec<f64>) -> Result<()> {
    let src = Tensor::from_vec(v, t.shape(), Device::Cpu)?.to_dtype(t.dtype())?;
    t.copy_(&src)?;
    Ok(())
}

fn ints(v: Vec<i32>, shape: &[usize]) -> Result<Tensor> {
    Tensor::from_vec(v, shape, Device::Cpu)
}

fn reals(v: Vec<f64>, shape: &[usize], like: &Tensor) -> Result<Tensor> {
    Tensor::from_vec(v, shape, Device::Cpu)?.to_dtype(like.dtype())
}

/// The column-major `r x c` matrix at `off` (lda = r).
fn cm(d: &[f64], off: usize, r: usize, c: usize) -> Mat<f64> {
    Mat::from_fn(r, c, |i, j| d[off + j * r + i])
}

/// Stores `m` column-major at `off` (lda = its rows).
fn put(d: &mut [f64], off: usize, m: MatRef<'_, f64>) {
    let r = m.nrows();
    for j in 0..m.ncols() {
        for i in 0..r {
            d[off + j * r + i] = m[(i, j)];
        }
    }
}

impl Solver for Host {
    fn getrf(&self, a: &Tensor, count: usize, n: usize) -> Result<(Tensor, Tensor)> {
        count_call();
        let mut d = read(a)?;
        let (mut piv, mut info) = (Vec::new(), Vec::new());
        for k in 0..count {
            let off = k * n * n;
            let at = |i: usize, j: usize| off + j * n + i;
            let mut first_zero = 0;
            for j in 0..n {
                let mut p = j;
                for i in j + 1..n {
                    if d[at(i, j)].abs() > d[at(p, j)].abs() {
                        p = i;
                    }
                }
                piv.push(p as i32 + 1);
                if d[at(p, j)] != 0.0 {
                    if p != j {
                        for c in 0..n {
                            d.swap(at(j, c), at(p, c));
                        }
                    }
                    let pivot = d[at(j, j)];
                    for i in j + 1..n {
                        d[at(i, j)] /= pivot;
                    }
                } else if first_zero == 0 {
                    first_zero = j as i32 + 1;
                }
                for c in j + 1..n {
                    let u = d[at(j, c)];
                    for i in j + 1..n {
                        d[at(i, c)] -= d[at(i, j)] * u;
                    }
                }
            }
            info.push(first_zero);
        }
        write(a, d)?;
        Ok((ints(piv, &[count, n])?, ints(info, &[count])?))
    }

    fn getrs(
        &self,
        lu: &Tensor,
        ipiv: &Tensor,
        b: &Tensor,
        count: usize,
        n: usize,
        nrhs: usize,
        trans: bool,
    ) -> Result<()> {
        count_call();
        let f = read(lu)?;
        let piv = ipiv.to_vec::<i32>()?;
        let mut x = read(b)?;
        for k in 0..count {
            let l = |i: usize, j: usize| f[k * n * n + j * n + i];
            let p = &piv[k * n..(k + 1) * n];
            for c in 0..nrhs {
                let off = k * n * nrhs + c * n;
                let col = &mut x[off..off + n];
                if !trans {
                    for (i, &pi) in p.iter().enumerate() {
                        col.swap(i, pi as usize - 1);
                    }
                    for i in 0..n {
                        for j in 0..i {
                            col[i] -= l(i, j) * col[j];
                        }
                    }
                    for i in (0..n).rev() {
                        for j in i + 1..n {
                            col[i] -= l(i, j) * col[j];
                        }
                        col[i] /= l(i, i);
                    }
                } else {
                    // Uᵀ y = b, then Lᵀ z = y, then the swaps in reverse.
                    for i in 0..n {
                        for j in 0..i {
                            col[i] -= l(j, i) * col[j];
                        }
                        col[i] /= l(i, i);
                    }
                    for i in (0..n).rev() {
                        for j in i + 1..n {
                            col[i] -= l(j, i) * col[j];
                        }
                    }
                    for (i, &pi) in p.iter().enumerate().rev() {
                        col.swap(i, pi as usize - 1);
                    }
                }
            }
        }
        write(b, x)
    }

    fn potrf(&self, a: &Tensor, count: usize, n: usize, upper: bool) -> Result<Tensor> {
        count_call();
        let mut d = read(a)?;
        let mut info = Vec::new();
        for k in 0..count {
            let off = k * n * n;
            // Element (i, j) of the factor's triangle (L lower, U = Lᵀ upper).
            let at = |i: usize, j: usize| {
                if upper {
                    off + i * n + j
                } else {
                    off + j * n + i
                }
            };
            let mut failed = 0;
            'cols: for j in 0..n {
                let mut djj = d[at(j, j)];
                for c in 0..j {
                    djj -= d[at(j, c)] * d[at(j, c)];
                }
                if djj.is_nan() || djj <= 0.0 {
                    d[at(j, j)] = djj;
                    failed = j as i32 + 1;
                    break 'cols;
                }
                let ljj = djj.sqrt();
                d[at(j, j)] = ljj;
                for i in j + 1..n {
                    let mut v = d[at(i, j)];
                    for c in 0..j {
                        v -= d[at(i, c)] * d[at(j, c)];
                    }
                    d[at(i, j)] = v / ljj;
                }
            }
            info.push(failed);
        }
        write(a, d)?;
        ints(info, &[count])
    }

    fn geqrf(&self, a: &Tensor, count: usize, m: usize, n: usize) -> Result<Tensor> {
        count_call();
        let mut d = read(a)?;
        let k = m.min(n);
        let tau = reals(vec![0.0; count * k], &[count, k], a)?;
        for j in 0..count {
            let off = j * m * n;
            let (q, r) = host::qr(&cm(&d, off, m, n), true);
            // R over the buffer's upper triangle; below it, junk (LAPACK's
            // reflectors, which only `orgqr` reads).
            for c in 0..n {
                for i in 0..m {
                    d[off + c * m + i] = if i <= c { r[(i, c)] } else { 7.0 };
                }
            }
            QS.with(|s| s.borrow_mut().insert((tau.data_ptr(), j), q));
        }
        write(a, d)?;
        Ok(tau)
    }

    fn orgqr(
        &self,
        a: &Tensor,
        per: usize,
        tau: &Tensor,
        count: usize,
        _m: usize,
        cols: usize,
        _k: usize,
    ) -> Result<()> {
        count_call();
        let mut d = read(a)?;
        for j in 0..count {
            let q = QS
                .with(|s| s.borrow().get(&(tau.data_ptr(), j)).cloned())
                .expect("orgqr after geqrf");
            put(&mut d, j * per, q.as_ref().subcols(0, cols));
        }
        write(a, d)
    }

    fn syevd(
        &self,
        a: &Tensor,
        count: usize,
        n: usize,
        upper: bool,
        vectors: bool,
    ) -> Result<(Tensor, Tensor)> {
        count_call();
        let mut d = read(a)?;
        let mut w = Vec::new();
        for k in 0..count {
            let off = k * n * n;
            let (vals, v) = host::eigh(&cm(&d, off, n, n), upper).expect("converges");
            w.extend(vals);
            if vectors {
                put(&mut d, off, v.as_ref());
            }
        }
        write(a, d)?;
        Ok((reals(w, &[count, n], a)?, ints(vec![0; count], &[count])?))
    }

    fn gesvd(
        &self,
        a: &Tensor,
        count: usize,
        m: usize,
        n: usize,
        vectors: bool,
        full: bool,
    ) -> Result<Gesvd> {
        count_call();
        assert!(m >= n, "gesvd needs m >= n");
        let d = read(a)?;
        let uc = if full { m } else { n };
        let (mut s, mut u, mut vt) = (
            Vec::new(),
            vec![0.0; count * uc * m],
            vec![0.0; count * n * n],
        );
        for k in 0..count {
            let (um, sv, v) = host::svd(&cm(&d, k * m * n, m, n), full).expect("converges");
            s.extend(sv);
            put(&mut u, k * uc * m, um.as_ref());
            put(&mut vt, k * n * n, v.transpose());
        }
        let (u, vt) = if vectors {
            (
                Some(reals(u, &[count, uc, m], a)?),
                Some(reals(vt, &[count, n, n], a)?),
            )
        } else {
            (None, None)
        };
        Ok(Gesvd {
            s: reals(s, &[count, n], a)?,
            u,
            vt,
            info: ints(vec![0; count], &[count])?,
        })
    }
}

#[cfg(test)]
mod tests {
    //! `gpu.rs` through the emulation against the host path, on the CPU.
    use super::{calls, set};
    use crate::linalg::{self, NormOrd, QrMode, Uplo};
    use crate::{DType, Device, Result, Tensor};

    /// `f` through the host path, then through `gpu.rs` and the emulation:
    /// `(host, emulated)`; the emulation must have been called.
    fn both<R>(what: &str, f: impl Fn() -> R) -> (R, R) {
        set(false);
        let host = f();
        let before = calls();
        set(true);
        let emulated = f();
        set(false);
        assert!(calls() > before, "{what}: gpu.rs did not take it");
        (host, emulated)
    }

    fn vals(t: &Tensor) -> Vec<f64> {
        t.to_vec_as::<f64>().unwrap()
    }

    fn agree(what: &str, h: &Tensor, g: &Tensor, tol: f64) {
        assert_eq!(h.shape(), g.shape(), "{what}: shapes");
        assert_eq!(h.dtype(), g.dtype(), "{what}: dtypes");
        let (x, y) = (vals(h), vals(g));
        let big = x.iter().fold(1.0f64, |m, v| m.max(v.abs()));
        for (i, (a, b)) in x.iter().zip(&y).enumerate() {
            assert!(
                a == b || (a - b).abs() <= tol * big,
                "{what}: element {i}: host {a}, emulated {b}"
            );
        }
    }

    fn tol(dt: DType) -> f64 {
        if dt == DType::F64 {
            1e-9
        } else {
            1e-3
        }
    }

    fn randn(shape: &[usize], dt: DType, seed: u64) -> Tensor {
        Tensor::randn(shape, dt, seed, Device::Cpu).unwrap()
    }

    fn square(batch: &[usize], n: usize, dt: DType, seed: u64) -> Tensor {
        let mut shape = batch.to_vec();
        shape.extend([n, n]);
        let eye = Tensor::eye(n, None, dt, Device::Cpu).unwrap();
        randn(&shape, dt, seed)
            .add(&eye.mul(n as f64).unwrap())
            .unwrap()
    }

    /// Per matrix, the signs (+1 for 0) of `r`'s first `k` diagonal entries.
    fn diag_signs(r: &Tensor, k: usize) -> Tensor {
        r.narrow(-2, 0, k as i64)
            .unwrap()
            .diagonal(0, -2, -1)
            .unwrap()
            .ge(0.0)
            .unwrap()
            .to_dtype(r.dtype())
            .unwrap()
            .mul(2.0)
            .unwrap()
            .sub(1.0)
            .unwrap()
    }

    /// Per matrix, the sign of each column's largest-magnitude component.
    fn col_signs(v: &Tensor) -> Tensor {
        let nd = v.ndim();
        let (m, c) = (v.shape()[nd - 2], v.shape()[nd - 1]);
        let x = vals(&v.contiguous().unwrap());
        let count = x.len().checked_div(m * c).unwrap_or(0);
        let mut out = Vec::new();
        for b in 0..count {
            for j in 0..c {
                let (mut best, mut s) = (-1.0f64, 1.0);
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

    fn by_cols(x: &Tensor, s: &Tensor) -> Tensor {
        x.mul(&s.unsqueeze(-2).unwrap()).unwrap()
    }

    fn by_rows(x: &Tensor, s: &Tensor) -> Tensor {
        x.mul(&s.unsqueeze(-1).unwrap()).unwrap()
    }

    fn same_error<T: std::fmt::Debug>(what: &str, h: Result<T>, g: Result<T>) {
        match (h, g) {
            (Err(h), Err(g)) => assert_eq!(format!("{h:?}"), format!("{g:?}"), "{what}"),
            (h, g) => panic!("{what}: host {h:?}, emulated {g:?}"),
        }
    }

    #[test]
    fn lu_family_through_the_emulation() {
        for dt in [DType::F32, DType::F64] {
            for batch in [&[][..], &[3], &[2, 2]] {
                for n in [1, 2, 3, 5] {
                    let a = square(batch, n, dt, 11 + n as u64);
                    let t = tol(dt);
                    let w = format!("{dt} {batch:?} {n}");
                    let (h, g) = both("det", || linalg::det(&a).unwrap());
                    agree(&format!("det {w}"), &h, &g, t);
                    let (h, g) = both("slogdet", || linalg::slogdet(&a).unwrap());
                    agree(&format!("slogdet {w}"), &h.0, &g.0, t);
                    agree(&format!("slogdet {w}"), &h.1, &g.1, t);
                    let (h, g) = both("inv", || linalg::inv(&a).unwrap());
                    agree(&format!("inv {w}"), &h, &g, t);
                    let at = a.transpose(-2, -1).unwrap();
                    let (h, g) = both("inv T", || linalg::inv(&at).unwrap());
                    agree(&format!("inv transposed {w}"), &h, &g, t);
                    let mut bs = batch.to_vec();
                    bs.extend([n, 3]);
                    let b = randn(&bs, dt, 5);
                    let (h, g) = both("solve", || linalg::solve(&a, &b).unwrap());
                    agree(&format!("solve {w}"), &h, &g, t);
                    let (h, g) = both("solve vector", || {
                        linalg::solve(
                            &a,
                            &b.narrow(-1, 0, 1).unwrap().squeeze_dims(&[-1]).unwrap(),
                        )
                        .unwrap()
                    });
                    agree(&format!("solve vector {w}"), &h, &g, t);
                    let (h, g) = both("cond", || linalg::cond(&a, Some(NormOrd::P(1.0))).unwrap());
                    agree(&format!("cond {w}"), &h, &g, t);
                }
            }
        }
        // Singular: element 1's zero pivot is at 2 in A (at 1 in Aᵀ).
        let mut v = vals(&square(&[3], 3, DType::F64, 3));
        v[9..18].copy_from_slice(&[0.0, 0.0, 0.0, 1.0, 1.0, 2.0, 2.0, 2.0, 1.0]);
        let s = Tensor::from_vec(v, &[3, 3, 3], Device::Cpu).unwrap();
        let (h, g) = both("inv singular", || linalg::inv(&s));
        same_error("inv singular", h, g);
        let b = randn(&[3, 3], DType::F64, 4);
        let (h, g) = both("solve singular", || linalg::solve(&s, &b));
        same_error("solve singular", h, g);
        let (h, g) = both("det singular", || linalg::det(&s).unwrap());
        agree("det singular", &h, &g, 1e-9);
        let (h, g) = both("cond singular", || {
            linalg::cond(&s, Some(NormOrd::Fro)).unwrap()
        });
        agree("cond singular", &h, &g, 1e-9);
    }

    /// Matrices that the host path scales first (largest magnitude beyond
    /// 2^±500, f32 2^±60) and non-finite ones are left to it: no emulated
    /// call, the host's answers.
    #[test]
    fn extreme_and_non_finite_batches_stay_on_the_host() {
        for (dt, big) in [
            (DType::F64, 1e-310),
            (DType::F64, 1e300),
            (DType::F32, 1e-20),
        ] {
            let a = square(&[2], 3, dt, 8).mul(big).unwrap();
            set(true);
            let before = calls();
            let g = linalg::det(&a).unwrap();
            let s = linalg::svdvals(&a).unwrap();
            assert_eq!(calls(), before, "{dt} {big}: went to the emulation");
            set(false);
            assert_eq!(vals(&g), vals(&linalg::det(&a).unwrap()));
            assert_eq!(vals(&s), vals(&linalg::svdvals(&a).unwrap()));
        }
        let mut v = vals(&square(&[2], 3, DType::F64, 9));
        v[4] = f64::NAN;
        let a = Tensor::from_vec(v, &[2, 3, 3], Device::Cpu).unwrap();
        set(true);
        let before = calls();
        let _ = linalg::eigvalsh(&a, Uplo::Lower).unwrap();
        assert_eq!(calls(), before, "NaN: went to the emulation");
        set(false);
        // Ordinary magnitudes do go through it.
        let a = square(&[2], 3, DType::F64, 10).mul(1e100).unwrap();
        let (h, g) = both("det 1e100", || linalg::det(&a).unwrap());
        agree("det 1e100", &h, &g, 1e-9);
    }

    #[test]
    fn cholesky_through_the_emulation() {
        for dt in [DType::F32, DType::F64] {
            for n in [1, 2, 4, 7] {
                let x = randn(&[2, n, n], dt, 21 + n as u64);
                let eye = Tensor::eye(n, None, dt, Device::Cpu).unwrap();
                let a = x
                    .matmul(&x.transpose(-2, -1).unwrap())
                    .unwrap()
                    .add(&eye.mul(n as f64).unwrap())
                    .unwrap();
                let junk = randn(&[2, n, n], dt, 99);
                for upper in [false, true] {
                    let j = if upper { junk.tril(-1) } else { junk.triu(1) }.unwrap();
                    let a = a.add(&j).unwrap();
                    let (h, g) = both("cholesky", || linalg::cholesky(&a, upper).unwrap());
                    agree(&format!("cholesky {dt} {n} {upper}"), &h, &g, tol(dt));
                }
            }
        }
        let x = randn(&[3, 4, 4], DType::F64, 5);
        let mut v = vals(
            &x.matmul(&x.transpose(-2, -1).unwrap())
                .unwrap()
                .add(1.0)
                .unwrap(),
        );
        v[16 + 10] = -50.0;
        v[32] = -1.0;
        let bad = Tensor::from_vec(v, &[3, 4, 4], Device::Cpu).unwrap();
        for upper in [false, true] {
            let (h, g) = both("cholesky bad", || linalg::cholesky(&bad, upper));
            same_error(&format!("cholesky not PD {upper}"), h, g);
        }
    }

    #[test]
    fn qr_through_the_emulation() {
        for dt in [DType::F32, DType::F64] {
            for (m, n) in [(5, 3), (3, 5), (4, 4), (6, 1), (1, 6)] {
                let a = randn(&[2, m, n], dt, (m * 7 + n) as u64);
                let k = m.min(n);
                for mode in [QrMode::Reduced, QrMode::Complete, QrMode::R] {
                    let w = format!("{dt} {m}x{n} {mode:?}");
                    let (h, g) = both("qr", || linalg::qr(&a, mode).unwrap());
                    assert_eq!(h.0.shape(), g.0.shape(), "{w}");
                    assert_eq!(h.1.shape(), g.1.shape(), "{w}");
                    let (dh, dg) = (diag_signs(&h.1, k), diag_signs(&g.1, k));
                    let rk = |r: &Tensor| r.narrow(-2, 0, k as i64).unwrap();
                    agree(
                        &format!("R {w}"),
                        &by_rows(&rk(&h.1), &dh),
                        &by_rows(&rk(&g.1), &dg),
                        tol(dt),
                    );
                    // R's rows below k are zeros on both.
                    agree(
                        &format!("R all {w}"),
                        &h.1.abs().unwrap(),
                        &g.1.abs().unwrap(),
                        tol(dt),
                    );
                    if mode != QrMode::R {
                        let qk = |q: &Tensor| q.narrow(-1, 0, k as i64).unwrap();
                        agree(
                            &format!("Q {w}"),
                            &by_cols(&qk(&h.0), &dh),
                            &by_cols(&qk(&g.0), &dg),
                            tol(dt),
                        );
                        let qr = g.0.matmul(&g.1).unwrap();
                        agree(&format!("QR {w}"), &a, &qr, tol(dt));
                    }
                }
            }
        }
    }

    #[test]
    fn eigh_through_the_emulation() {
        for dt in [DType::F32, DType::F64] {
            for n in [1, 2, 3, 6] {
                // Unsymmetric: a flipped triangle shows.
                let a = randn(&[2, n, n], dt, 31 + n as u64);
                for uplo in [Uplo::Lower, Uplo::Upper] {
                    let w = format!("{dt} {n} {uplo:?}");
                    let (h, g) = both("eigh", || linalg::eigh(&a, uplo).unwrap());
                    agree(&format!("L {w}"), &h.0, &g.0, tol(dt));
                    let (sh, sg) = (col_signs(&h.1), col_signs(&g.1));
                    agree(
                        &format!("V {w}"),
                        &by_cols(&h.1, &sh),
                        &by_cols(&g.1, &sg),
                        tol(dt),
                    );
                    let (h, g) = both("eigvalsh", || linalg::eigvalsh(&a, uplo).unwrap());
                    agree(&format!("eigvalsh {w}"), &h, &g, tol(dt));
                }
                let s = a.add(&a.transpose(-2, -1).unwrap()).unwrap();
                let (h, g) = both("pinv h", || linalg::pinv(&s, None, None, true).unwrap());
                agree(&format!("pinv hermitian {dt} {n}"), &h, &g, tol(dt));
                let (h, g) = both("rank h", || {
                    linalg::matrix_rank(&s, None, None, true).unwrap()
                });
                agree(&format!("rank hermitian {dt} {n}"), &h, &g, 0.0);
            }
        }
    }

    #[test]
    fn svd_through_the_emulation() {
        for dt in [DType::F32, DType::F64] {
            for (m, n) in [(5, 3), (3, 5), (4, 4), (6, 1), (1, 6)] {
                let a = randn(&[2, m, n], dt, (m * 11 + n) as u64);
                let k = m.min(n) as i64;
                for full in [false, true] {
                    let w = format!("{dt} {m}x{n} full={full}");
                    let (h, g) = both("svd", || linalg::svd(&a, full).unwrap());
                    assert_eq!(h.0.shape(), g.0.shape(), "U {w}");
                    assert_eq!(h.2.shape(), g.2.shape(), "Vh {w}");
                    agree(&format!("S {w}"), &h.1, &g.1, tol(dt));
                    let uk = |u: &Tensor| u.narrow(-1, 0, k).unwrap();
                    let vk = |v: &Tensor| v.narrow(-2, 0, k).unwrap();
                    let (sh, sg) = (col_signs(&uk(&h.0)), col_signs(&uk(&g.0)));
                    agree(
                        &format!("U {w}"),
                        &by_cols(&uk(&h.0), &sh),
                        &by_cols(&uk(&g.0), &sg),
                        tol(dt),
                    );
                    agree(
                        &format!("Vh {w}"),
                        &by_rows(&vk(&h.2), &sh),
                        &by_rows(&vk(&g.2), &sg),
                        tol(dt),
                    );
                    let back = uk(&g.0)
                        .mul(&g.1.unsqueeze(-2).unwrap())
                        .unwrap()
                        .matmul(&vk(&g.2))
                        .unwrap();
                    agree(&format!("USVh {w}"), &a, &back, tol(dt));
                }
                let w = format!("{dt} {m}x{n}");
                let (h, g) = both("svdvals", || linalg::svdvals(&a).unwrap());
                agree(&format!("svdvals {w}"), &h, &g, tol(dt));
                let (h, g) = both("norm", || {
                    linalg::matrix_norm(&a, NormOrd::Nuc, [-2, -1], false).unwrap()
                });
                agree(&format!("nuc {w}"), &h, &g, tol(dt));
                let (h, g) = both("pinv", || linalg::pinv(&a, None, None, false).unwrap());
                agree(&format!("pinv {w}"), &h, &g, tol(dt));
                let b = randn(&[2, m, 2], dt, 77);
                let (h, g) = both("lstsq", || linalg::lstsq(&a, &b, None).unwrap());
                agree(&format!("lstsq {w}"), &h.solution, &g.solution, tol(dt));
                agree(&format!("lstsq rank {w}"), &h.rank, &g.rank, 0.0);
            }
        }
    }
}
