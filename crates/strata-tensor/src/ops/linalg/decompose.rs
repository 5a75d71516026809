//! The factorizations: `cholesky`, `qr`, `eigh`, `eigvalsh`, `svd`,
//! `svdvals`.

use super::host::{self, finite, no_convergence, push, shape_of, tensor, Lin, Mats};
use super::{batch_of, check_float, check_matrix, check_square, real};
use crate::error::{Result, TensorError};
use crate::tensor::Tensor;
use faer::Mat;

/// `torch.linalg.cholesky(A, upper)`: the lower-triangular `L` with `A = L
/// Lᵀ` for each symmetric positive-definite matrix of the batch, read from
/// its lower triangle; with `upper`, the upper-triangular `U = Lᵀ` with `A
/// = Uᵀ U`, read from the upper triangle (LAPACK's `potrf` with `uplo`).
///
/// Errors: fewer than 2 dims, non-square ([`TensorError::Shape`]); dtypes
/// other than f32/f64 ([`TensorError::DType`]); a matrix that is not
/// positive-definite (or holds NaN) is [`TensorError::NotPositiveDefinite`]
/// naming the order of the first leading minor that is not, in PyTorch's
/// words.
///
/// ```
/// # use strata_tensor::DType;
/// use strata_tensor::{linalg, tensor, TensorError};
/// let a = tensor![[4.0f64, 2.0], [2.0, 5.0]]?.to_dtype(DType::F64)?;
/// let l = linalg::cholesky(&a, false)?;
/// assert!(l.allclose(&tensor![[2.0f64, 0.0], [1.0, 2.0]]?.to_dtype(DType::F64)?, 1e-12, 1e-12)?);
/// let err = linalg::cholesky(&tensor![[1.0f64, 2.0], [2.0, 1.0]]?.to_dtype(DType::F64)?, false).unwrap_err();
/// assert!(matches!(err, TensorError::NotPositiveDefinite { order: 2, .. }));
/// # Ok::<(), strata_tensor::TensorError>(())
/// ```
pub fn cholesky(a: &Tensor, upper: bool) -> Result<Tensor> {
    const OP: &str = "linalg.cholesky";
    check_matrix(OP, a)?;
    check_float(OP, a)?;
    check_square(OP, a)?;
    real!(a, |T| cholesky_imp::<T>(a, upper))
}

fn cholesky_imp<T: Lin>(a: &Tensor, upper: bool) -> Result<Tensor> {
    if let Some(l) = super::gpu::cholesky::<T>(a, upper)? {
        return Ok(l);
    }
    let mats = Mats::<T>::read(a)?;
    let mut out = Vec::with_capacity(mats.data.len());
    for k in 0..mats.count() {
        let l = host::cholesky(&mats.get(k), upper).map_err(|order| {
            TensorError::NotPositiveDefinite {
                op: "linalg.cholesky",
                batch: batch_of(a, k),
                order,
            }
        })?;
        if upper {
            push(&mut out, l.transpose());
        } else {
            push(&mut out, l.as_ref());
        }
    }
    tensor(out, a.shape(), a.device())
}

/// The `mode` of [`qr`] (PyTorch's `'reduced'`, `'complete'`, `'r'`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum QrMode {
    /// `Q` is `m x k`, `R` `k x n` (`k = min(m, n)`).
    #[default]
    Reduced,
    /// `Q` is `m x m`, `R` `m x n`.
    Complete,
    /// Only `R` (`k x n`); `Q` is an empty tensor of shape `[0]`, as
    /// PyTorch's.
    R,
}

/// `torch.linalg.qr(A, mode)`: `(Q, R)` with `A = Q R`, `Q` with
/// orthonormal columns and `R` upper triangular, for each matrix of the
/// batch (Householder QR). The signs of `Q`'s columns and `R`'s rows are
/// the factorization's own and may differ from LAPACK's (PyTorch's); `Q R`,
/// `QᵀQ` and `|R|` do not.
///
/// Errors: fewer than 2 dims ([`TensorError::Shape`]); dtypes other than
/// f32/f64 ([`TensorError::DType`]).
///
/// ```
/// # use strata_tensor::DType;
/// use strata_tensor::{linalg, tensor};
/// use strata_tensor::linalg::QrMode;
/// let a = tensor![[1.0f64, 2.0], [3.0, 4.0], [5.0, 6.0]]?.to_dtype(DType::F64)?;
/// let (q, r) = linalg::qr(&a, QrMode::Reduced)?;
/// assert_eq!((q.shape(), r.shape()), (&[3usize, 2][..], &[2usize, 2][..]));
/// assert!(q.matmul(&r)?.allclose(&a, 1e-12, 1e-12)?);
/// # Ok::<(), strata_tensor::TensorError>(())
/// ```
pub fn qr(a: &Tensor, mode: QrMode) -> Result<(Tensor, Tensor)> {
    const OP: &str = "linalg.qr";
    check_matrix(OP, a)?;
    check_float(OP, a)?;
    real!(a, |T| qr_imp::<T>(a, mode))
}

fn qr_imp<T: Lin>(a: &Tensor, mode: QrMode) -> Result<(Tensor, Tensor)> {
    if let Some(r) = super::gpu::qr::<T>(a, mode == QrMode::Complete, mode != QrMode::R)? {
        return Ok(r);
    }
    let mats = Mats::<T>::read(a)?;
    let (m, n) = (mats.m, mats.n);
    let k = m.min(n);
    let complete = mode == QrMode::Complete;
    let (qc, rr) = if complete { (m, m) } else { (k, k) };
    let (mut qs, mut rs) = (Vec::new(), Vec::new());
    for b in 0..mats.count() {
        let (q, r) = if m == 0 || n == 0 {
            (Mat::<T>::identity(m, qc), Mat::<T>::zeros(rr, n))
        } else {
            host::qr(&mats.get(b), complete)
        };
        push(&mut qs, q.as_ref());
        push(&mut rs, r.as_ref());
    }
    let r = tensor(rs, &shape_of(&mats.batch, &[rr, n]), a.device())?;
    let q = if mode == QrMode::R {
        Tensor::zeros(&[0], a.dtype(), a.device())?
    } else {
        tensor(qs, &shape_of(&mats.batch, &[m, qc]), a.device())?
    };
    Ok((q, r))
}

/// Which triangle of a symmetric matrix [`eigh`] and [`eigvalsh`] read
/// (PyTorch's `UPLO`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Uplo {
    /// `'L'`: the lower triangle (PyTorch's default).
    #[default]
    Lower,
    /// `'U'`: the upper triangle.
    Upper,
}

/// `torch.linalg.eigh(A, UPLO)`: `(eigenvalues, eigenvectors)` of each
/// symmetric matrix of the batch, described by the triangle `uplo` names;
/// the eigenvalues ascending (`[.., n]`), the eigenvectors the columns of
/// `[.., n, n]`. Each eigenvector's sign is the solver's own (LAPACK's may
/// differ); `V diag(L) Vᵀ` and `VᵀV` do not. An input holding NaN or
/// infinity gives NaN eigenvalues and eigenvectors (PyTorch's LAPACK
/// returns unspecified values there).
///
/// Errors: fewer than 2 dims, non-square ([`TensorError::Shape`]); dtypes
/// other than f32/f64 ([`TensorError::DType`]); a solver that does not
/// converge ([`TensorError::LinalgNoConvergence`]).
///
/// ```
/// # use strata_tensor::DType;
/// use strata_tensor::{linalg, tensor};
/// use strata_tensor::linalg::Uplo;
/// let a = tensor![[2.0f64, 1.0], [1.0, 2.0]]?.to_dtype(DType::F64)?;
/// let (l, v) = linalg::eigh(&a, Uplo::Lower)?;
/// assert!(l.allclose(&tensor![1.0f64, 3.0]?.to_dtype(DType::F64)?, 1e-12, 1e-12)?);
/// let back = v.matmul(&l.diag_embed(0, -2, -1)?)?.matmul(&v.t()?)?;
/// assert!(back.allclose(&a, 1e-12, 1e-12)?);
/// # Ok::<(), strata_tensor::TensorError>(())
/// ```
pub fn eigh(a: &Tensor, uplo: Uplo) -> Result<(Tensor, Tensor)> {
    const OP: &str = "linalg.eigh";
    check_matrix(OP, a)?;
    check_float(OP, a)?;
    check_square(OP, a)?;
    real!(a, |T| eigh_imp::<T>(a, uplo, true))
}

/// `torch.linalg.eigvalsh(A, UPLO)`: the eigenvalues of [`eigh`], ascending.
///
/// Errors: those of [`eigh`].
///
/// ```
/// # use strata_tensor::DType;
/// use strata_tensor::{linalg, tensor};
/// use strata_tensor::linalg::Uplo;
/// let l = linalg::eigvalsh(&tensor![[2.0f64, 1.0], [1.0, 2.0]]?.to_dtype(DType::F64)?, Uplo::Upper)?;
/// assert!(l.allclose(&tensor![1.0f64, 3.0]?.to_dtype(DType::F64)?, 1e-12, 1e-12)?);
/// # Ok::<(), strata_tensor::TensorError>(())
/// ```
pub fn eigvalsh(a: &Tensor, uplo: Uplo) -> Result<Tensor> {
    const OP: &str = "linalg.eigvalsh";
    check_matrix(OP, a)?;
    check_float(OP, a)?;
    check_square(OP, a)?;
    Ok(real!(a, |T| eigh_imp::<T>(a, uplo, false))?.0)
}

fn eigh_imp<T: Lin>(a: &Tensor, uplo: Uplo, vectors: bool) -> Result<(Tensor, Tensor)> {
    if let Some(r) = super::gpu::eigh::<T>(a, uplo, vectors)? {
        return Ok(r);
    }
    let op = if vectors {
        "linalg.eigh"
    } else {
        "linalg.eigvalsh"
    };
    let mats = Mats::<T>::read(a)?;
    let n = mats.n;
    let upper = uplo == Uplo::Upper;
    let (mut ls, mut vs) = (Vec::new(), Vec::new());
    for k in 0..mats.count() {
        let m = mats.get(k);
        // Only the named triangle is read (i <= j for the upper one, i >= j
        // for the lower), so only it must be finite.
        let read = |i: usize, j: usize| if upper { i <= j } else { i >= j };
        let tri_finite =
            (0..n).all(|i| (0..n).all(|j| !read(i, j) || m[(i, j)].to64().is_finite()));
        if !tri_finite {
            ls.extend(std::iter::repeat_n(T::of(f64::NAN), n));
            if vectors {
                vs.extend(std::iter::repeat_n(T::of(f64::NAN), n * n));
            }
            continue;
        }
        let fail = || no_convergence(op, batch_of(a, k), "The algorithm failed to converge.");
        if vectors {
            let (l, v) = host::eigh(&m, upper).ok_or_else(fail)?;
            ls.extend(l);
            push(&mut vs, v.as_ref());
        } else {
            ls.extend(host::eigvalsh(&m, upper).ok_or_else(fail)?);
        }
    }
    let l = tensor(ls, &shape_of(&mats.batch, &[n]), a.device())?;
    let v = if vectors {
        tensor(vs, a.shape(), a.device())?
    } else {
        Tensor::zeros(&[0], a.dtype(), a.device())?
    };
    Ok((l, v))
}

/// `torch.linalg.svd(A, full_matrices)`: `(U, S, Vh)` with `A = U diag(S)
/// Vh` for each matrix of the batch, `S` nonincreasing (`[.., k]`, `k =
/// min(m, n)`); with `full_matrices` `U` is `m x m` and `Vh` `n x n`,
/// without it `m x k` and `k x n`. Each singular pair's signs are the
/// solver's own (LAPACK's may differ); `U diag(S) Vh` does not.
///
/// Errors: fewer than 2 dims ([`TensorError::Shape`]); dtypes other than
/// f32/f64 ([`TensorError::DType`]); an input holding NaN or infinity, or a
/// solver that does not converge, is [`TensorError::LinalgNoConvergence`]
/// (PyTorch: `linalg.svd: The algorithm failed to converge because the
/// input matrix contained non-finite values.`).
///
/// ```
/// # use strata_tensor::DType;
/// use strata_tensor::{linalg, tensor};
/// let a = tensor![[3.0f64, 0.0], [0.0, -4.0], [0.0, 0.0]]?.to_dtype(DType::F64)?;
/// let (u, s, vh) = linalg::svd(&a, false)?;
/// assert!(s.allclose(&tensor![4.0f64, 3.0]?.to_dtype(DType::F64)?, 1e-12, 1e-12)?);
/// let back = u.mul(&s.unsqueeze(-2)?)?.matmul(&vh)?;
/// assert!(back.allclose(&a, 1e-12, 1e-12)?);
/// # Ok::<(), strata_tensor::TensorError>(())
/// ```
pub fn svd(a: &Tensor, full_matrices: bool) -> Result<(Tensor, Tensor, Tensor)> {
    const OP: &str = "linalg.svd";
    check_matrix(OP, a)?;
    check_float(OP, a)?;
    real!(a, |T| svd_imp::<T>(a, full_matrices))
}

fn svd_imp<T: Lin>(a: &Tensor, full: bool) -> Result<(Tensor, Tensor, Tensor)> {
    if let Some(r) = super::gpu::svd::<T>(a, true, full)? {
        return Ok(r);
    }
    let mats = Mats::<T>::read(a)?;
    let (m, n) = (mats.m, mats.n);
    let k = m.min(n);
    let (uc, vr) = if full { (m, n) } else { (k, k) };
    let (mut us, mut ss, mut vs) = (Vec::new(), Vec::new(), Vec::new());
    for b in 0..mats.count() {
        if k == 0 {
            push(&mut us, Mat::<T>::identity(m, uc).as_ref());
            push(&mut vs, Mat::<T>::identity(vr, n).as_ref());
            continue;
        }
        let x = mats.get(b);
        let fail = |msg: &str| no_convergence("linalg.svd", batch_of(a, b), msg);
        if !finite(&x) {
            return Err(fail(
                "The algorithm failed to converge because the input matrix contained non-finite values.",
            ));
        }
        let (u, s, v) =
            host::svd(&x, full).ok_or_else(|| fail("The algorithm failed to converge."))?;
        push(&mut us, u.as_ref());
        ss.extend(s);
        push(&mut vs, v.transpose());
    }
    let dev = a.device();
    Ok((
        tensor(us, &shape_of(&mats.batch, &[m, uc]), dev)?,
        tensor(ss, &shape_of(&mats.batch, &[k]), dev)?,
        tensor(vs, &shape_of(&mats.batch, &[vr, n]), dev)?,
    ))
}

/// `torch.linalg.svdvals(A)`: the singular values of each matrix,
/// nonincreasing (`[.., min(m, n)]`).
///
/// Errors: those of [`svd`] (a non-finite input reported as `linalg.svd`'s,
/// as PyTorch reports it).
///
/// ```
/// # use strata_tensor::DType;
/// use strata_tensor::{linalg, tensor};
/// let s = linalg::svdvals(&tensor![[0.0f64, 2.0], [1.0, 0.0]]?.to_dtype(DType::F64)?)?;
/// assert!(s.allclose(&tensor![2.0f64, 1.0]?.to_dtype(DType::F64)?, 1e-12, 1e-12)?);
/// # Ok::<(), strata_tensor::TensorError>(())
/// ```
pub fn svdvals(a: &Tensor) -> Result<Tensor> {
    const OP: &str = "linalg.svdvals";
    check_matrix(OP, a)?;
    check_float(OP, a)?;
    real!(a, |T| svdvals_imp::<T>(a))
}

pub(crate) fn svdvals_imp<T: Lin>(a: &Tensor) -> Result<Tensor> {
    if let Some((_, s, _)) = super::gpu::svd::<T>(a, false, false)? {
        return Ok(s);
    }
    let mats = Mats::<T>::read(a)?;
    let k = mats.m.min(mats.n);
    let mut ss = Vec::new();
    for b in 0..mats.count() {
        if k == 0 {
            continue;
        }
        let x = mats.get(b);
        let fail = |msg: &str| no_convergence("linalg.svd", batch_of(a, b), msg);
        if !finite(&x) {
            return Err(fail(
                "The algorithm failed to converge because the input matrix contained non-finite values.",
            ));
        }
        ss.extend(host::svdvals(&x).ok_or_else(|| fail("The algorithm failed to converge."))?);
    }
    tensor(ss, &shape_of(&mats.batch, &[k]), a.device())
}
