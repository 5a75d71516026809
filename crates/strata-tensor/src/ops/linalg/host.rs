//! The matrices of a batch on the host and the `faer` factorizations run on
//! them, one matrix at a time: the CPU kernels of `ops/linalg` (and those of
//! a GPU tensor that cuSOLVER does not take, `gpu.rs`: see
//! docs/cuda-backend.md).

use crate::dtype::Element;
use crate::error::{Result, TensorError};
use crate::tensor::Tensor;
use faer::linalg::solvers::{DenseSolveCore, Solve};
use faer::{Mat, MatRef, Side};
use strata_alloc::Device;

/// The real dtypes the factorizations take (f32 and f64, as PyTorch's).
pub(crate) trait Lin: faer::traits::RealField + Element + Copy {
    /// The value as f64.
    fn to64(self) -> f64;
    /// `v` rounded to this type.
    fn of(v: f64) -> Self;
    /// The machine epsilon of the type (PyTorch's `finfo.eps`).
    const EPS: f64;
}

impl Lin for f32 {
    fn to64(self) -> f64 {
        self as f64
    }
    fn of(v: f64) -> Self {
        v as f32
    }
    const EPS: f64 = f32::EPSILON as f64;
}

impl Lin for f64 {
    fn to64(self) -> f64 {
        self
    }
    fn of(v: f64) -> Self {
        v
    }
    const EPS: f64 = f64::EPSILON;
}

/// A batch of `m x n` matrices read to the host in row-major order.
pub(crate) struct Mats<T> {
    pub data: Vec<T>,
    pub batch: Vec<usize>,
    pub m: usize,
    pub n: usize,
}

impl<T: Lin> Mats<T> {
    /// The matrices of `x` (at least 2-D, of dtype `T`), whatever its strides.
    pub fn read(x: &Tensor) -> Result<Self> {
        let nd = x.ndim();
        let (m, n) = (x.shape()[nd - 2], x.shape()[nd - 1]);
        let data = x.to_vec::<T>()?;
        Ok(Mats {
            data,
            batch: x.shape()[..nd - 2].to_vec(),
            m,
            n,
        })
    }

    /// How many matrices.
    pub fn count(&self) -> usize {
        self.batch.iter().product()
    }

    /// Matrix `k` as a faer matrix.
    pub fn get(&self, k: usize) -> Mat<T> {
        let (m, n) = (self.m, self.n);
        let base = k * m * n;
        Mat::from_fn(m, n, |i, j| self.data[base + i * n + j])
    }
}

/// Appends `a` in row-major order.
pub(crate) fn push<T: Lin>(out: &mut Vec<T>, a: MatRef<'_, T>) {
    for i in 0..a.nrows() {
        for j in 0..a.ncols() {
            out.push(a[(i, j)]);
        }
    }
}

/// `batch` followed by `tail`.
pub(crate) fn shape_of(batch: &[usize], tail: &[usize]) -> Vec<usize> {
    batch.iter().chain(tail).copied().collect()
}

/// A tensor of `data` (row-major) on `device`.
pub(crate) fn tensor<T: Element>(data: Vec<T>, shape: &[usize], device: Device) -> Result<Tensor> {
    Tensor::from_vec(data, shape, device)
}

/// `x * 2^e`, exactly (in steps that cannot overflow or underflow on the
/// way; only the result may round, to a subnormal, 0 or inf).
pub(crate) fn ldexp(mut x: f64, mut e: i32) -> f64 {
    while e > 1000 {
        x *= 2f64.powi(1000);
        e -= 1000;
    }
    while e < -1000 {
        x *= 2f64.powi(-1000);
        e += 1000;
    }
    x * 2f64.powi(e)
}

/// The power-of-two exponent `e` that brings the largest magnitude of `a`
/// into [0.5, 1), where that magnitude lies outside [2^-500, 2^500] (f32:
/// [2^-60, 2^60]): faer's factorizations square, invert or sum squares of
/// such values and overflow or underflow (the SVD of 3e38 I in f32 does
/// not converge; QR and eigh of f64::MAX I give inf; an LU of subnormals
/// divides by them into NaN), where LAPACK's scale. Otherwise (and for a
/// zero or non-finite matrix) 0: a matrix of ordinary magnitude is factored
/// as it is, bit for bit (scaling by a power of two is exact anyway).
pub(crate) fn scale_exp<T: Lin>(a: &Mat<T>) -> i32 {
    let mut m = 0.0f64;
    for j in 0..a.ncols() {
        for i in 0..a.nrows() {
            let v = a[(i, j)].to64().abs();
            if !v.is_finite() {
                return 0;
            }
            m = m.max(v);
        }
    }
    if m == 0.0 {
        return 0;
    }
    let lim = if T::EPS > 1e-10 { 60 } else { 500 };
    let e = m.log2().floor() as i32 + 1;
    if e.abs() <= lim {
        0
    } else {
        e
    }
}

/// `a * 2^-e`.
pub(crate) fn scaled<T: Lin>(a: &Mat<T>, e: i32) -> Mat<T> {
    Mat::from_fn(a.nrows(), a.ncols(), |i, j| {
        T::of(ldexp(a[(i, j)].to64(), -e))
    })
}

/// `v * 2^e` in `T`.
fn unscale<T: Lin>(v: T, e: i32) -> T {
    if e == 0 {
        v
    } else {
        T::of(ldexp(v.to64(), e))
    }
}

/// An LU factorization with partial pivoting (LAPACK's `getrf`): the
/// determinant's sign and factors, and LAPACK's `info` (the 1-based position
/// of the first exactly zero diagonal element of U, 0 if none).
pub(crate) struct Lu<T: Lin> {
    pub lu: faer::linalg::solvers::PartialPivLu<T>,
    pub info: usize,
    /// `(-1)^transpositions`.
    pub perm_sign: f64,
    /// The factors are those of `A * 2^-scale` ([`scale_exp`]).
    scale: i32,
}

pub(crate) fn lu<T: Lin>(a: &Mat<T>) -> Lu<T> {
    let scale = scale_exp(a);
    let lu = if scale != 0 {
        scaled(a, scale).partial_piv_lu()
    } else {
        a.partial_piv_lu()
    };
    let u = lu.U();
    let n = u.nrows().min(u.ncols());
    let info = (0..n)
        .find(|&i| u[(i, i)].to64() == 0.0)
        .map_or(0, |i| i + 1);
    // The parity of the row permutation: n minus its number of cycles.
    let (fwd, _) = lu.P().arrays();
    let mut seen = vec![false; fwd.len()];
    let mut swaps = 0usize;
    for s in 0..fwd.len() {
        let mut i = s;
        let mut len = 0usize;
        while !seen[i] {
            seen[i] = true;
            i = fwd[i];
            len += 1;
        }
        swaps += len.saturating_sub(1);
    }
    Lu {
        lu,
        info,
        perm_sign: if swaps.is_multiple_of(2) { 1.0 } else { -1.0 },
        scale,
    }
}

impl<T: Lin> Lu<T> {
    /// `(sign, log|det|)`; a zero pivot gives `(0, -inf)`. The log is the
    /// sum of the logs of |U_ii|, as PyTorch's (so no overflow for large n).
    pub fn slogdet(&self) -> (T, T) {
        if self.info != 0 {
            return (T::of(0.0), T::of(f64::NEG_INFINITY));
        }
        let u = self.lu.U();
        let mut sign = self.perm_sign;
        // The logs of |U_ii| in the dtype, summed in it (PyTorch's
        // `diag(U).abs().log().sum(-1)`).
        let mut log = T::of(0.0);
        for i in 0..u.nrows() {
            let d = u[(i, i)].to64();
            if d.is_nan() {
                // PyTorch's sign is the product of `sign` of the pivots,
                // and `sign(NaN)` is 0.
                return (T::of(0.0), T::of(f64::NAN));
            }
            if d < 0.0 {
                sign = -sign;
            }
            // ln |U_ii| of the unscaled pivot: ln |d| + scale ln 2.
            let ln = T::of(d.abs()).to64().ln() + self.scale as f64 * std::f64::consts::LN_2;
            log = log + T::of(ln);
        }
        (T::of(sign), log)
    }

    /// The determinant: the product of U's diagonal in the dtype, signed by
    /// the permutation (LAPACK's and PyTorch's way); 0 for a zero pivot.
    pub fn det(&self) -> T {
        if self.info != 0 {
            return T::of(0.0);
        }
        let u = self.lu.U();
        let mut d = T::of(self.perm_sign);
        for i in 0..u.nrows() {
            d = d * unscale(u[(i, i)], self.scale);
        }
        d
    }

    /// `A⁻¹ = 2^-scale (A 2^-scale)⁻¹`.
    pub fn inverse(&self) -> Mat<T> {
        let inv = self.lu.inverse();
        if self.scale == 0 {
            return inv;
        }
        Mat::from_fn(inv.nrows(), inv.ncols(), |i, j| {
            unscale(inv[(i, j)], -self.scale)
        })
    }

    /// `A⁻¹ B = 2^-scale (A 2^-scale)⁻¹ B`.
    pub fn solve(&self, b: &Mat<T>) -> Mat<T> {
        let x = self.lu.solve(b);
        if self.scale == 0 {
            return x;
        }
        Mat::from_fn(x.nrows(), x.ncols(), |i, j| unscale(x[(i, j)], -self.scale))
    }
}

/// Cholesky: the lower factor of the triangle `side` names, or LAPACK's
/// `potrf` info (the order of the first leading minor that is not positive
/// definite).
pub(crate) fn cholesky<T: Lin>(a: &Mat<T>, upper: bool) -> std::result::Result<Mat<T>, usize> {
    let n = a.nrows();
    // potrf stops at a pivot that is not positive or is NaN.
    let side = if upper { Side::Upper } else { Side::Lower };
    match a.llt(side) {
        Ok(l) => {
            let l = l.L().to_owned();
            for i in 0..n {
                let d = l[(i, i)].to64();
                if d.is_nan() || d <= 0.0 {
                    return Err(i + 1);
                }
            }
            Ok(l)
        }
        Err(faer::linalg::cholesky::llt::factor::LltError::NonPositivePivot { index }) => {
            Err(index + 1)
        }
    }
}

/// An error naming a matrix of a batch whose algorithm did not converge.
pub(crate) fn no_convergence(op: &'static str, batch: Option<usize>, msg: &str) -> TensorError {
    TensorError::LinalgNoConvergence {
        op,
        batch,
        msg: msg.to_string(),
    }
}

/// `true` when every element of `a` is finite.
pub(crate) fn finite<T: Lin>(a: &Mat<T>) -> bool {
    (0..a.nrows()).all(|i| (0..a.ncols()).all(|j| a[(i, j)].to64().is_finite()))
}

/// `(U, S, V)` of `a`: full (`U` m x m, `V` n x n) or thin (k columns).
pub(crate) fn svd<T: Lin>(a: &Mat<T>, full: bool) -> Option<(Mat<T>, Vec<T>, Mat<T>)> {
    let e = scale_exp(a);
    let owned;
    let a = if e != 0 {
        owned = scaled(a, e);
        &owned
    } else {
        a
    };
    let s = if full { a.svd() } else { a.thin_svd() }.ok()?;
    let k = a.nrows().min(a.ncols());
    let sv: Vec<T> = (0..k).map(|i| unscale(s.S()[i], e)).collect();
    Some((s.U().to_owned(), sv, s.V().to_owned()))
}

/// The singular values of `a`, nonincreasing.
pub(crate) fn svdvals<T: Lin>(a: &Mat<T>) -> Option<Vec<T>> {
    let e = scale_exp(a);
    if e == 0 {
        return a.singular_values().ok();
    }
    let s = scaled(a, e).singular_values().ok()?;
    Some(s.into_iter().map(|v| unscale(v, e)).collect())
}

/// `(eigenvalues ascending, eigenvectors as columns)` of the symmetric
/// matrix that the triangle `side` of `a` describes.
pub(crate) fn eigh<T: Lin>(a: &Mat<T>, upper: bool) -> Option<(Vec<T>, Mat<T>)> {
    if a.nrows() == 0 {
        return Some((Vec::new(), Mat::zeros(0, 0)));
    }
    let side = if upper { Side::Upper } else { Side::Lower };
    let sc = scale_exp(a);
    let e = if sc != 0 {
        scaled(a, sc).self_adjoint_eigen(side)
    } else {
        a.self_adjoint_eigen(side)
    }
    .ok()?;
    let n = a.nrows();
    let vals: Vec<T> = (0..n).map(|i| unscale(e.S()[i], sc)).collect();
    Some((vals, e.U().to_owned()))
}

/// The eigenvalues of the symmetric matrix that the triangle `side` of `a`
/// describes, ascending.
pub(crate) fn eigvalsh<T: Lin>(a: &Mat<T>, upper: bool) -> Option<Vec<T>> {
    if a.nrows() == 0 {
        return Some(Vec::new());
    }
    let side = if upper { Side::Upper } else { Side::Lower };
    let sc = scale_exp(a);
    if sc == 0 {
        return a.self_adjoint_eigenvalues(side).ok();
    }
    let v = scaled(a, sc).self_adjoint_eigenvalues(side).ok()?;
    Some(v.into_iter().map(|x| unscale(x, sc)).collect())
}

/// Householder QR: `(Q, R)`, thin (`Q` m x k, `R` k x n) or complete (`Q`
/// m x m, `R` m x n).
pub(crate) fn qr<T: Lin>(a: &Mat<T>, complete: bool) -> (Mat<T>, Mat<T>) {
    let e = scale_exp(a);
    let owned;
    let a = if e != 0 {
        owned = scaled(a, e);
        &owned
    } else {
        a
    };
    let f = a.qr();
    let r = f.thin_R();
    // R of A is 2^e R of the scaled A (Q is the same); faer keeps R's
    // first min(m, n) rows, a complete one's others are zeros.
    let rows = if complete { a.nrows() } else { r.nrows() };
    let rr = Mat::from_fn(rows, a.ncols(), |i, j| {
        if i < r.nrows() {
            unscale(r[(i, j)], e)
        } else {
            T::of(0.0)
        }
    });
    if complete {
        (f.compute_Q(), rr)
    } else {
        (f.compute_thin_Q(), rr)
    }
}
