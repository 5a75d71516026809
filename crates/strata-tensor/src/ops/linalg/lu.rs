//! Through an LU factorization with partial pivoting (LAPACK's `getrf`):
//! `det`, `slogdet`, `logdet`, `inv`, `solve`.

use super::host::{lu, push, shape_of, tensor, Lin, Mats};
use super::{batch_of, check_float, check_matrix, check_square, real, same_device};
use crate::error::{Result, TensorError};
use crate::shape::broadcast_shapes;
use crate::tensor::Tensor;

fn square_float(op: &'static str, a: &Tensor) -> Result<usize> {
    check_matrix(op, a)?;
    check_float(op, a)?;
    check_square(op, a)
}

/// `torch.linalg.det(A)`: the determinant of each matrix of the batch
/// (`[.., n, n]` → `[..]`), from its LU factors: the product of U's
/// diagonal signed by the row permutation, so a singular matrix (an exactly
/// zero pivot) gives 0. A 0 x 0 matrix has determinant 1.
///
/// Errors: fewer than 2 dims, non-square matrices ([`TensorError::Shape`]);
/// dtypes other than f32/f64 ([`TensorError::DType`]).
///
/// ```
/// # use strata_tensor::DType;
/// use strata_tensor::{linalg, tensor};
/// let a = tensor![[1.0f64, 2.0], [3.0, 4.0]]?.to_dtype(DType::F64)?;
/// assert!((linalg::det(&a)?.item::<f64>()? + 2.0).abs() < 1e-12);
/// // Singular: exactly 0.
/// assert_eq!(linalg::det(&tensor![[1.0f64, 2.0], [2.0, 4.0]]?.to_dtype(DType::F64)?)?.item::<f64>()?, 0.0);
/// # Ok::<(), strata_tensor::TensorError>(())
/// ```
pub fn det(a: &Tensor) -> Result<Tensor> {
    square_float("linalg.det", a)?;
    real!(a, |T| det_imp::<T>(a))
}

fn det_imp<T: Lin>(a: &Tensor) -> Result<Tensor> {
    if let Some(d) = super::gpu::det::<T>(a)? {
        return Ok(d);
    }
    let mats = Mats::<T>::read(a)?;
    let out: Vec<T> = (0..mats.count()).map(|k| lu(&mats.get(k)).det()).collect();
    tensor(out, &mats.batch, a.device())
}

/// `torch.linalg.slogdet(A)`: `(sign, logabsdet)` of each matrix, the
/// sign of the determinant (-1, 0 or 1) and the log of its absolute value
/// (summed over U's diagonal, so it does not overflow where `det` would);
/// a singular matrix gives `(0, -inf)`.
///
/// Errors: those of [`det`].
///
/// ```
/// # use strata_tensor::DType;
/// use strata_tensor::{linalg, tensor};
/// let (sign, logabs) = linalg::slogdet(&tensor![[0.0f64, 2.0], [3.0, 0.0]]?.to_dtype(DType::F64)?)?;
/// assert_eq!(sign.item::<f64>()?, -1.0);
/// assert!((logabs.item::<f64>()? - 6f64.ln()).abs() < 1e-12);
/// # Ok::<(), strata_tensor::TensorError>(())
/// ```
pub fn slogdet(a: &Tensor) -> Result<(Tensor, Tensor)> {
    square_float("linalg.slogdet", a)?;
    real!(a, |T| slogdet_imp::<T>(a))
}

fn slogdet_imp<T: Lin>(a: &Tensor) -> Result<(Tensor, Tensor)> {
    if let Some(r) = super::gpu::slogdet::<T>(a)? {
        return Ok(r);
    }
    let mats = Mats::<T>::read(a)?;
    let (mut signs, mut logs) = (Vec::new(), Vec::new());
    for k in 0..mats.count() {
        let (s, l) = lu(&mats.get(k)).slogdet();
        signs.push(s);
        logs.push(l);
    }
    Ok((
        tensor(signs, &mats.batch, a.device())?,
        tensor(logs, &mats.batch, a.device())?,
    ))
}

/// `torch.logdet(A)`: `log(det(A))` as PyTorch computes it from
/// [`slogdet`]: NaN where the determinant is negative, `-inf` where it is
/// zero.
///
/// Errors: those of [`det`] (named `logdet`).
///
/// ```
/// # use strata_tensor::DType;
/// use strata_tensor::{linalg, tensor};
/// let l = linalg::logdet(&tensor![[2.0f64, 0.0], [0.0, 3.0]]?.to_dtype(DType::F64)?)?;
/// assert!((l.item::<f64>()? - 6f64.ln()).abs() < 1e-12);
/// assert!(linalg::logdet(&tensor![[0.0f64, 1.0], [1.0, 0.0]]?.to_dtype(DType::F64)?)?.item::<f64>()?.is_nan());
/// # Ok::<(), strata_tensor::TensorError>(())
/// ```
pub fn logdet(a: &Tensor) -> Result<Tensor> {
    square_float("logdet", a)?;
    let (sign, logabs) = real!(a, |T| slogdet_imp::<T>(a))?;
    Tensor::where_cond(&sign.lt(0.0)?, f64::NAN, &logabs)
}

/// `torch.linalg.inv(A)`: the inverse of each matrix of the batch, through
/// its LU factors.
///
/// Errors: those of [`det`]; a singular matrix (an exactly zero pivot of
/// U) is [`TensorError::Singular`] with PyTorch's words: `linalg.inv: The
/// diagonal element 2 is zero, the inversion could not be completed because
/// the input matrix is singular.` (prefixed by `(Batch element k): ` for
/// batched inputs).
///
/// ```
/// # use strata_tensor::DType;
/// use strata_tensor::{linalg, tensor, TensorError};
/// let a = tensor![[4.0f64, 7.0], [2.0, 6.0]]?.to_dtype(DType::F64)?;
/// let i = linalg::inv(&a)?;
/// // (the expected values are f32 literals widened: within 1e-7)
/// assert!(i.allclose(&tensor![[0.6f64, -0.7], [-0.2, 0.4]]?.to_dtype(DType::F64)?, 1e-6, 1e-6)?);
/// let err = linalg::inv(&tensor![[1.0f64, 2.0], [2.0, 4.0]]?.to_dtype(DType::F64)?).unwrap_err();
/// assert!(matches!(err, TensorError::Singular { index: 2, .. }));
/// # Ok::<(), strata_tensor::TensorError>(())
/// ```
pub fn inv(a: &Tensor) -> Result<Tensor> {
    square_float("linalg.inv", a)?;
    real!(a, |T| inv_imp::<T>(a))
}

fn inv_imp<T: Lin>(a: &Tensor) -> Result<Tensor> {
    if let Some(i) = super::gpu::inv::<T>(a)? {
        return Ok(i);
    }
    let mats = Mats::<T>::read(a)?;
    let mut out = Vec::with_capacity(mats.data.len());
    for k in 0..mats.count() {
        let f = lu(&mats.get(k));
        if f.info != 0 {
            return Err(TensorError::Singular {
                op: "linalg.inv",
                batch: batch_of(a, k),
                index: f.info,
            });
        }
        push(&mut out, f.inverse().as_ref());
    }
    tensor(out, a.shape(), a.device())
}

/// PyTorch's rule for whether `B` of `solve(A, B)` (and `lstsq`) is a
/// vector: 1-D, or of `A`'s shape without its last dim.
pub fn solve_is_vector_rhs(a_shape: &[usize], b_shape: &[usize]) -> bool {
    b_shape.len() == 1
        || (b_shape.len() + 1 == a_shape.len() && b_shape == &a_shape[..a_shape.len() - 1])
}

/// `torch.linalg.solve(A, B)` (`left = True`): `X` with `A X = B` for each
/// matrix of the batch. `B` is a vector (`[.., n]`, as
/// [`solve_is_vector_rhs`] decides, as PyTorch decides) or a matrix (`[..,
/// n, k]`); the batch dims of `A` and `B` broadcast.
///
/// Errors: those of [`det`] for `A`; `B`'s dtype other than `A`'s
/// ([`TensorError::DType`]), rows other than `n` ([`TensorError::Shape`]),
/// batch dims that do not broadcast ([`TensorError::Broadcast`]); a singular
/// `A` is [`TensorError::Singular`] (`torch.linalg.solve: The solver failed
/// because the input matrix is singular.`).
///
/// ```
/// # use strata_tensor::DType;
/// use strata_tensor::{linalg, tensor};
/// let a = tensor![[3.0f64, 1.0], [1.0, 2.0]]?.to_dtype(DType::F64)?;
/// let x = linalg::solve(&a, &tensor![9.0f64, 8.0]?.to_dtype(DType::F64)?)?;
/// assert!(x.allclose(&tensor![2.0f64, 3.0]?.to_dtype(DType::F64)?, 1e-12, 1e-12)?);
/// # Ok::<(), strata_tensor::TensorError>(())
/// ```
pub fn solve(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    const OP: &str = "linalg.solve";
    let n = square_float(OP, a)?;
    same_device(OP, a, b)?;
    if a.dtype() != b.dtype() {
        return Err(TensorError::dtype(
            OP,
            format!(
                "Expected A and B to have the same dtype, but found A of type {} and B of type {} instead",
                a.dtype(),
                b.dtype()
            ),
        ));
    }
    let vector = solve_is_vector_rhs(a.shape(), b.shape());
    let b2 = if vector { b.unsqueeze(-1)? } else { b.clone() };
    if b2.ndim() < 2 {
        return Err(TensorError::shape(
            OP,
            "The input tensor B must have at least 2 dimensions.",
        ));
    }
    let (br, bc) = (b2.shape()[b2.ndim() - 2], b2.shape()[b2.ndim() - 1]);
    if br != n {
        return Err(TensorError::shape(
            OP,
            format!(
                "Incompatible shapes of A and B for the equation AX = B ({n}x{n} and {br}x{bc})"
            ),
        ));
    }
    let batch = broadcast_shapes(OP, &a.shape()[..a.ndim() - 2], &b2.shape()[..b2.ndim() - 2])?;
    let ext = |tail: [usize; 2]| -> Vec<i64> {
        shape_of(&batch, &tail).iter().map(|&s| s as i64).collect()
    };
    let ae = a.expand(&ext([n, n]))?;
    let be = b2.expand(&ext([n, bc]))?;
    let x = real!(a, |T| solve_imp::<T>(&ae, &be, !batch.is_empty()))?;
    if vector {
        x.squeeze_dims(&[-1])
    } else {
        Ok(x)
    }
}

fn solve_imp<T: Lin>(a: &Tensor, b: &Tensor, batched: bool) -> Result<Tensor> {
    if let Some(x) = super::gpu::solve::<T>(a, b, batched)? {
        return Ok(x);
    }
    let am = Mats::<T>::read(a)?;
    let bm = Mats::<T>::read(b)?;
    let mut out = Vec::with_capacity(bm.data.len());
    for k in 0..am.count() {
        let f = lu(&am.get(k));
        if f.info != 0 {
            return Err(TensorError::Singular {
                op: "torch.linalg.solve",
                batch: batched.then_some(k),
                index: f.info,
            });
        }
        push(&mut out, f.solve(&bm.get(k)).as_ref());
    }
    tensor(out, b.shape(), b.device())
}
