//! Built on the factorizations: `matrix_power`, `pinv`, `matrix_rank`,
//! `cond`, `lstsq`.

use super::decompose::svdvals_imp;
use super::host::{self, finite, no_convergence, push, shape_of, tensor, Lin, Mats};
use super::norms::{matrix_norm, NormOrd};
use super::{batch_of, check_float, check_matrix, check_square, inv, real, same_device};
use crate::error::{Result, TensorError};
use crate::tensor::Tensor;
use faer::Mat;

/// `torch.linalg.matrix_power(A, k)`: `A` multiplied by itself `k` times
/// for each square matrix of the batch, by PyTorch's binary decomposition of
/// `k` (so its products and roundings); `k = 0` gives identities and a
/// negative `k` the power `-k` of [`inv`]`(A)`. Integer matrices are taken
/// for `k >= 0`, as PyTorch takes them. The products run on the tensor's
/// device.
///
/// Errors: fewer than 2 dims, non-square ([`TensorError::Shape`]); for a
/// negative `k`, those of [`inv`] (a singular matrix is
/// [`TensorError::Singular`]).
///
/// ```
/// # use strata_tensor::DType;
/// use strata_tensor::{linalg, tensor};
/// let a = tensor![[1.0f64, 1.0], [0.0, 1.0]]?.to_dtype(DType::F64)?;
/// assert!(linalg::matrix_power(&a, 3)?.allclose(&tensor![[1.0f64, 3.0], [0.0, 1.0]]?.to_dtype(DType::F64)?, 0.0, 0.0)?);
/// assert!(linalg::matrix_power(&a, -2)?.allclose(&tensor![[1.0f64, -2.0], [0.0, 1.0]]?.to_dtype(DType::F64)?, 1e-12, 1e-12)?);
/// # Ok::<(), strata_tensor::TensorError>(())
/// ```
pub fn matrix_power(a: &Tensor, k: i64) -> Result<Tensor> {
    const OP: &str = "linalg.matrix_power";
    let n = check_square(OP, a)?;
    if k == 0 {
        let shape: Vec<i64> = a.shape().iter().map(|&s| s as i64).collect();
        return Tensor::eye(n, None, a.dtype(), a.device())?
            .expand(&shape)?
            .contiguous();
    }
    let base = if k < 0 { inv(a)? } else { a.clone() };
    let mut e = k.unsigned_abs();
    match e {
        1 => return base.contiguous(),
        2 => return base.matmul(&base),
        3 => return base.matmul(&base)?.matmul(&base),
        _ => {}
    }
    let (mut z, mut result): (Option<Tensor>, Option<Tensor>) = (None, None);
    while e > 0 {
        let bit = e % 2;
        e /= 2;
        let zz = match &z {
            Some(z) => z.matmul(z)?,
            None => base.clone(),
        };
        if bit == 1 {
            result = Some(match &result {
                Some(r) => r.matmul(&zz)?,
                None => zz.clone(),
            });
        }
        z = Some(zz);
    }
    Ok(result.expect("k != 0 has a set bit"))
}

/// PyTorch's default tolerances of `pinv` and `matrix_rank`: `atol` 0
/// unless given; `rtol` `eps * max(m, n)` unless given, or 0 when only a
/// positive `atol` is given.
fn tolerances<T: Lin>(m: usize, n: usize, atol: Option<f64>, rtol: Option<f64>) -> (f64, f64) {
    let default_rtol = T::EPS * m.max(n) as f64;
    let rtol = match (rtol, atol) {
        (Some(r), _) => r,
        (None, Some(a)) if a > 0.0 => 0.0,
        _ => default_rtol,
    };
    (atol.unwrap_or(0.0), rtol)
}

/// `torch.linalg.pinv(A, atol, rtol, hermitian)`: the Moore-Penrose
/// pseudo-inverse of each matrix (`[.., m, n]` → `[.., n, m]`), from its
/// SVD (from [`eigh`](super::eigh) with `hermitian`, reading the lower
/// triangle): singular values at most `max(atol, rtol * σ_max)` are treated
/// as zero. The tolerances default as PyTorch's: `atol = 0`, `rtol = eps *
/// max(m, n)` (0 when only a positive `atol` is given).
///
/// Errors: fewer than 2 dims ([`TensorError::Shape`]); dtypes other than
/// f32/f64 ([`TensorError::DType`]); those of [`svd`](super::svd) and
/// [`eigh`](super::eigh) (non-square with `hermitian`).
///
/// ```
/// # use strata_tensor::DType;
/// use strata_tensor::{linalg, tensor};
/// let a = tensor![[1.0f64, 0.0], [0.0, 2.0], [0.0, 0.0]]?.to_dtype(DType::F64)?;
/// let p = linalg::pinv(&a, None, None, false)?;
/// assert!(p.allclose(&tensor![[1.0f64, 0.0, 0.0], [0.0, 0.5, 0.0]]?.to_dtype(DType::F64)?, 1e-12, 1e-12)?);
/// # Ok::<(), strata_tensor::TensorError>(())
/// ```
pub fn pinv(a: &Tensor, atol: Option<f64>, rtol: Option<f64>, hermitian: bool) -> Result<Tensor> {
    const OP: &str = "linalg.pinv";
    check_matrix(OP, a)?;
    check_float(OP, a)?;
    if hermitian {
        check_square("linalg.eigh", a)?;
    }
    real!(a, |T| pinv_imp::<T>(a, atol, rtol, hermitian))
}

/// `max(a, b)` as PyTorch's `torch.max` of the tolerances takes it: NaN
/// where either is NaN (so that no singular value passes a NaN tolerance:
/// rank 0, a zero pseudo-inverse), not `f64::max`'s other operand.
fn nan_max(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.max(b)
    }
}

fn pinv_imp<T: Lin>(
    a: &Tensor,
    atol: Option<f64>,
    rtol: Option<f64>,
    hermitian: bool,
) -> Result<Tensor> {
    let nd = a.ndim();
    let tol = tolerances::<T>(a.shape()[nd - 2], a.shape()[nd - 1], atol, rtol);
    if let Some(p) = super::gpu::pinv::<T>(a, tol, hermitian)? {
        return Ok(p);
    }
    let mats = Mats::<T>::read(a)?;
    let (m, n) = (mats.m, mats.n);
    let (atol, rtol) = tol;
    let mut out = Vec::with_capacity(mats.data.len());
    for b in 0..mats.count() {
        if m == 0 || n == 0 {
            continue;
        }
        let x = mats.get(b);
        let fail = |msg: &str| no_convergence("linalg.pinv", batch_of(a, b), msg);
        let p: Mat<T> = if hermitian {
            let (l, u) =
                host::eigh(&x, false).ok_or_else(|| fail("The algorithm failed to converge."))?;
            let max = l.iter().map(|v| v.to64().abs()).fold(0.0, f64::max);
            let tol = nan_max(atol, rtol * max);
            let inv: Vec<T> = l
                .iter()
                .map(|&v| {
                    if v.to64().abs() > tol {
                        T::of(1.0) / v
                    } else {
                        T::of(0.0)
                    }
                })
                .collect();
            let scaled = Mat::from_fn(n, n, |i, j| u[(i, j)] * inv[j]);
            &scaled * u.transpose()
        } else {
            if !finite(&x) {
                return Err(fail(
                    "The algorithm failed to converge because the input matrix contained non-finite values.",
                ));
            }
            let (u, s, v) =
                host::svd(&x, false).ok_or_else(|| fail("The algorithm failed to converge."))?;
            let tol = nan_max(atol, rtol * s[0].to64());
            let inv: Vec<T> = s
                .iter()
                .map(|&v| {
                    if v.to64() > tol {
                        T::of(1.0) / v
                    } else {
                        T::of(0.0)
                    }
                })
                .collect();
            let scaled = Mat::from_fn(n, s.len(), |i, j| v[(i, j)] * inv[j]);
            &scaled * u.transpose()
        };
        push(&mut out, p.as_ref());
    }
    if m == 0 || n == 0 {
        return Tensor::zeros(&shape_of(&mats.batch, &[n, m]), a.dtype(), a.device());
    }
    tensor(out, &shape_of(&mats.batch, &[n, m]), a.device())
}

/// `torch.linalg.matrix_rank(A, atol, rtol, hermitian)`: the number of
/// singular values (absolute eigenvalues with `hermitian`) above `max(atol,
/// rtol * σ_max)`, as i64 (`[..]`); the tolerances default as [`pinv`]'s.
///
/// Errors: those of [`pinv`].
///
/// ```
/// # use strata_tensor::DType;
/// use strata_tensor::{linalg, tensor};
/// let a = tensor![[1.0f64, 2.0], [2.0, 4.0]]?.to_dtype(DType::F64)?;
/// assert_eq!(linalg::matrix_rank(&a, None, None, false)?.item::<i64>()?, 1);
/// # Ok::<(), strata_tensor::TensorError>(())
/// ```
pub fn matrix_rank(
    a: &Tensor,
    atol: Option<f64>,
    rtol: Option<f64>,
    hermitian: bool,
) -> Result<Tensor> {
    const OP: &str = "linalg.matrix_rank";
    check_matrix(OP, a)?;
    check_float(OP, a)?;
    if hermitian {
        check_square("linalg.eigh", a)?;
    }
    real!(a, |T| rank_imp::<T>(a, atol, rtol, hermitian))
}

fn rank_imp<T: Lin>(
    a: &Tensor,
    atol: Option<f64>,
    rtol: Option<f64>,
    hermitian: bool,
) -> Result<Tensor> {
    let nd = a.ndim();
    let (m, n) = (a.shape()[nd - 2], a.shape()[nd - 1]);
    let (atol, rtol) = tolerances::<T>(m, n, atol, rtol);
    let s = if hermitian {
        super::eigvalsh(a, super::Uplo::Lower)?.abs()?
    } else {
        svdvals_imp::<T>(a)?
    };
    let k = *s.shape().last().unwrap_or(&0);
    let vals = s.to_vec::<T>()?;
    let count = vals.len().checked_div(k).unwrap_or(0);
    let batch: Vec<usize> = a.shape()[..nd - 2].to_vec();
    let count = if k == 0 {
        batch.iter().product()
    } else {
        count
    };
    let mut out = Vec::with_capacity(count);
    for b in 0..count {
        let row = &vals[b * k..(b + 1) * k];
        let max = row.iter().map(|v| v.to64()).fold(0.0, f64::max);
        let tol = nan_max(atol, rtol * max);
        out.push(row.iter().filter(|v| v.to64() > tol).count() as i64);
    }
    tensor(out, &batch, a.device())
}

/// `torch.linalg.cond(A, p)`: the condition number of each matrix in the
/// norm `p`: `None` or `P(2.0)` is `σ_max / σ_min` (from the singular
/// values, any shape), `P(-2.0)` its reciprocal; the other norms
/// ([`NormOrd::Fro`], [`NormOrd::Nuc`], `P(±1)`, `P(±inf)`) are
/// `‖A‖ ‖A⁻¹‖` for square matrices, infinite where `A` is singular (as
/// PyTorch, which computes them through `inv_ex`). An empty input gives
/// zeros.
///
/// Errors: fewer than 2 dims; non-square for the norms other than ±2
/// ([`TensorError::Shape`]); dtypes other than f32/f64
/// ([`TensorError::DType`]); an order that no matrix norm has
/// ([`TensorError::Value`]).
///
/// ```
/// # use strata_tensor::DType;
/// use strata_tensor::{linalg, tensor};
/// use strata_tensor::linalg::NormOrd;
/// let a = tensor![[2.0f64, 0.0], [0.0, 0.5]]?.to_dtype(DType::F64)?;
/// assert!((linalg::cond(&a, None)?.item::<f64>()? - 4.0).abs() < 1e-12);
/// assert!((linalg::cond(&a, Some(NormOrd::P(1.0)))?.item::<f64>()? - 4.0).abs() < 1e-12);
/// # Ok::<(), strata_tensor::TensorError>(())
/// ```
pub fn cond(a: &Tensor, p: Option<NormOrd>) -> Result<Tensor> {
    const OP: &str = "linalg.cond";
    check_matrix(OP, a)?;
    check_float(OP, a)?;
    let p = p.unwrap_or(NormOrd::P(2.0));
    let nd = a.ndim();
    let batch = a.shape()[..nd - 2].to_vec();
    match p {
        NormOrd::P(v) if v == 2.0 || v == -2.0 => {
            if a.numel() == 0 {
                return Tensor::zeros(&batch, a.dtype(), a.device());
            }
            let s = super::svdvals(a)?;
            let k = s.shape()[s.ndim() - 1] as i64;
            let (hi, lo) = (s.narrow(-1, 0, 1)?, s.narrow(-1, k - 1, 1)?);
            let r = if v > 0.0 { hi.div(&lo)? } else { lo.div(&hi)? };
            r.squeeze_dims(&[-1])
        }
        NormOrd::P(v) if !(v.abs() == 1.0 || v.is_infinite()) => {
            Err(TensorError::value(OP, format!("Order {v} not supported.")))
        }
        _ => {
            let what = match p {
                NormOrd::Fro => "fro".to_string(),
                NormOrd::Nuc => "nuc".to_string(),
                NormOrd::P(v) => format!("{v}"),
            };
            let n = a.shape()[nd - 1];
            if a.shape()[nd - 2] != n {
                return Err(TensorError::shape(
                    "linalg.cond",
                    format!(
                        "(ord={what}): A must be batches of square matrices, but they are {} by {n} matrices",
                        a.shape()[nd - 2]
                    ),
                ));
            }
            if a.numel() == 0 {
                return Tensor::zeros(&batch, a.dtype(), a.device());
            }
            let (inverse, singular) = real!(a, |T| inv_ex::<T>(a))?;
            let c = matrix_norm(a, p, [-2, -1], false)?.mul(&matrix_norm(
                &inverse,
                p,
                [-2, -1],
                false,
            )?)?;
            let mask = Tensor::from_vec(singular, &batch, a.device())?;
            let c = Tensor::where_cond(&mask, f64::INFINITY, &c)?;
            // PyTorch 2.15 answers inf where the product is NaN (NaN in
            // the matrix, or a norm that overflows times one that
            // underflows: 1e200 I's inf * 0).
            Tensor::where_cond(&c.isnan()?, f64::INFINITY, &c)
        }
    }
}

/// The inverses of a batch (zeros for a singular matrix) and which were
/// singular (PyTorch's `inv_ex`).
fn inv_ex<T: Lin>(a: &Tensor) -> Result<(Tensor, Vec<bool>)> {
    if let Some(r) = super::gpu::inv_ex::<T>(a)? {
        return Ok(r);
    }
    let mats = Mats::<T>::read(a)?;
    let mut out = Vec::with_capacity(mats.data.len());
    let mut singular = Vec::new();
    let n = mats.n;
    for k in 0..mats.count() {
        let f = host::lu(&mats.get(k));
        singular.push(f.info != 0);
        if f.info != 0 {
            out.extend(std::iter::repeat_n(T::of(0.0), n * n));
        } else {
            push(&mut out, f.inverse().as_ref());
        }
    }
    Ok((tensor(out, a.shape(), a.device())?, singular))
}

/// The result of [`lstsq`] (PyTorch's `torch.return_types.linalg_lstsq`).
#[derive(Debug, Clone)]
pub struct Lstsq {
    /// The least-squares solution (minimum norm where `A` is wide), `[..,
    /// n, k]` (`[.., n]` for a vector `B`).
    pub solution: Tensor,
    /// Empty (`[0]`): PyTorch's CPU default driver `gelsy` computes no
    /// residuals.
    pub residuals: Tensor,
    /// The effective rank of each matrix (i64, `[..]`), as `gelsy` returns it.
    pub rank: Tensor,
    /// Empty (`[0]`): `gelsy` returns no singular values.
    pub singular_values: Tensor,
}

/// `torch.linalg.lstsq(A, B, rcond)` with the CPU's default driver
/// `gelsy`: `X` minimizing `‖A X - B‖` for each matrix of the batch (the
/// minimum-norm one where `A` has more columns than rows), `B` a matrix
/// `[.., m, k]` or, with one dim fewer than `A`, a vector (`[.., m]`, PyTorch's
/// rule for lstsq, not `solve`'s); batch dims broadcast. For a full-rank `A` the solution is unique and is
/// `gelsy`'s; strata computes it from the SVD, treating singular values at
/// most `rcond * σ_max` as zero (`rcond` defaults to `eps * max(m, n)`, as
/// PyTorch's), where `gelsy` decides the rank from a pivoted QR's
/// incremental condition estimate: for a rank-deficient `A` the two can
/// differ. `residuals` and `singular_values` are empty, as `gelsy`'s.
///
/// Errors: fewer than 2 dims, `B` with more dims than `A` or two fewer,
/// `B` rows other than `A`'s ([`TensorError::Shape`]); dtypes other than f32/f64 or not equal
/// ([`TensorError::DType`]); batch dims that do not broadcast.
///
/// ```
/// # use strata_tensor::DType;
/// use strata_tensor::{linalg, tensor};
/// // The line through (0, 1), (1, 3), (2, 5): y = 2x + 1.
/// let a = tensor![[0.0f64, 1.0], [1.0, 1.0], [2.0, 1.0]]?.to_dtype(DType::F64)?;
/// let r = linalg::lstsq(&a, &tensor![1.0f64, 3.0, 5.0]?.to_dtype(DType::F64)?, None)?;
/// assert!(r.solution.allclose(&tensor![2.0f64, 1.0]?.to_dtype(DType::F64)?, 1e-12, 1e-12)?);
/// # Ok::<(), strata_tensor::TensorError>(())
/// ```
pub fn lstsq(a: &Tensor, b: &Tensor, rcond: Option<f64>) -> Result<Lstsq> {
    const OP: &str = "torch.linalg.lstsq";
    check_matrix(OP, a)?;
    check_float(OP, a)?;
    same_device(OP, a, b)?;
    if a.dtype() != b.dtype() {
        return Err(TensorError::dtype(
            OP,
            format!(
                "Expected input and other to have the same dtype, but got input's dtype {} and other's dtype {}",
                a.dtype(),
                b.dtype()
            ),
        ));
    }
    let nd = a.ndim();
    let (m, n) = (a.shape()[nd - 2], a.shape()[nd - 1]);
    // PyTorch's lstsq: B has A's dims or one fewer (then it is a vector);
    // not `solve`'s rule.
    if b.ndim() > nd || nd - b.ndim() > 1 {
        return Err(TensorError::shape(
            OP,
            "input.dim() must be greater or equal to other.dim() and (input.dim() - other.dim()) <= 1",
        ));
    }
    // PyTorch checks B's rows by `solve`'s vector rule, then computes with
    // a B of one dim fewer as a vector (so a B it took for a matrix may then
    // fail to broadcast).
    let rows = if super::lu::solve_is_vector_rhs(a.shape(), b.shape()) {
        b.shape().last().copied()
    } else {
        b.ndim().checked_sub(2).map(|d| b.shape()[d])
    };
    let vector = b.ndim() + 1 == nd;
    let b2 = if vector { b.unsqueeze(-1)? } else { b.clone() };
    if rows != Some(m) {
        return Err(TensorError::shape(
            OP,
            "input.size(-2) should match other.size(-2)",
        ));
    }
    let k = b2.shape()[b2.ndim() - 1];
    let batch =
        crate::shape::broadcast_shapes(OP, &a.shape()[..nd - 2], &b2.shape()[..b2.ndim() - 2])?;
    let ext = |tail: [usize; 2]| -> Vec<i64> {
        shape_of(&batch, &tail).iter().map(|&s| s as i64).collect()
    };
    let ae = a.expand(&ext([m, n]))?;
    let be = b2.expand(&ext([m, k]))?;
    let (x, rank) = real!(a, |T| lstsq_imp::<T>(&ae, &be, rcond))?;
    let solution = if vector { x.squeeze_dims(&[-1])? } else { x };
    let empty = || Tensor::zeros(&[0], a.dtype(), a.device());
    Ok(Lstsq {
        solution,
        residuals: empty()?,
        rank: Tensor::from_vec(rank, &batch, a.device())?,
        singular_values: empty()?,
    })
}

fn lstsq_imp<T: Lin>(a: &Tensor, b: &Tensor, rcond: Option<f64>) -> Result<(Tensor, Vec<i64>)> {
    let nd = a.ndim();
    let default = T::EPS * a.shape()[nd - 2].max(a.shape()[nd - 1]) as f64;
    if let Some(r) = super::gpu::lstsq::<T>(a, b, rcond.unwrap_or(default))? {
        return Ok(r);
    }
    let am = Mats::<T>::read(a)?;
    let bm = Mats::<T>::read(b)?;
    let (m, n, k) = (am.m, am.n, bm.n);
    let rcond = rcond.unwrap_or(T::EPS * m.max(n) as f64);
    let mut out = Vec::with_capacity(am.count() * n * k);
    let mut ranks = Vec::with_capacity(am.count());
    for i in 0..am.count() {
        if m == 0 || n == 0 {
            out.extend(std::iter::repeat_n(T::of(0.0), n * k));
            ranks.push(0);
            continue;
        }
        let x = am.get(i);
        let fail = |msg: &str| no_convergence("torch.linalg.lstsq", batch_of(a, i), msg);
        let (u, s, v) =
            host::svd(&x, false).ok_or_else(|| fail("The algorithm failed to converge."))?;
        let tol = rcond * s[0].to64();
        let inv: Vec<T> = s
            .iter()
            .map(|&v| {
                if v.to64() > tol {
                    T::of(1.0) / v
                } else {
                    T::of(0.0)
                }
            })
            .collect();
        ranks.push(s.iter().filter(|v| v.to64() > tol).count() as i64);
        // X = V diag(1/s) Uᵀ B.
        let utb = u.transpose() * bm.get(i);
        // A subnormal singular value's reciprocal overflows (inf, and inf *
        // 0 is NaN in V's product): divide by it instead.
        let scaled = Mat::from_fn(utb.nrows(), k, |r, c| {
            if inv[r].to64().is_infinite() {
                utb[(r, c)] / s[r]
            } else {
                utb[(r, c)] * inv[r]
            }
        });
        push(&mut out, (&v * &scaled).as_ref());
    }
    Ok((
        tensor(out, &shape_of(&am.batch, &[n, k]), a.device())?,
        ranks,
    ))
}
