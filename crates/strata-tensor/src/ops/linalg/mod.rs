//! `torch.linalg` (session 79): determinants, inverses and solves,
//! Cholesky, QR, symmetric eigendecompositions, SVD, least squares,
//! pseudo-inverses, ranks, condition numbers, matrix powers and norms, as
//! free functions named as PyTorch names them: `strata_tensor::linalg::inv(&a)`
//! is `torch.linalg.inv(a)`.
//!
//! Every function takes batches of matrices (any leading dims, empty
//! batches and 0 x 0 matrices as PyTorch treats them) of dtype f32 or f64,
//! with any strides. f16, bf16 and integer inputs are refused as PyTorch
//! refuses them ([`TensorError::DType`] naming the dtype). A singular matrix
//! where an inverse is needed is [`TensorError::Singular`] (the 1-based
//! zero diagonal element of U, LAPACK's `getrf` info, and the batch
//! element), a matrix that is not positive-definite for `cholesky`
//! [`TensorError::NotPositiveDefinite`] (the order of the leading minor);
//! both carry PyTorch's words.
//!
//! On the CPU the factorizations are `faer`'s (LU with partial pivoting,
//! Cholesky, Householder QR, the symmetric eigensolver, SVD), one matrix at
//! a time. A GPU tensor is factored by cuSOLVER (session 80, `gpu.rs`:
//! `getrf`/`getrs`, `potrf`, `geqrf`/`orgqr`, `syevd`, `gesvd`) where it
//! loads and [`cusolver_enabled`] holds; elsewhere, and for empty,
//! oversized or non-finite inputs, it is read to the host, factored there
//! and its results written back to the GPU (docs/cuda-backend.md). The
//! compositions (`matrix_power`, `cross`, `vecdot`, the elementwise norms)
//! run on the tensor's own device.
//!
//! Decompositions whose factors are unique only up to signs (QR, `eigh`'s
//! eigenvectors, SVD's singular vectors) may choose other signs than
//! LAPACK's: the products they reconstruct and the gauge-invariant values
//! (eigenvalues, singular values, `|Q|`-independent functions) are PyTorch's.
//!
//! ```
//! # use strata_tensor::DType;
//! use strata_tensor::{linalg, tensor};
//! let a = tensor![[4.0f64, 7.0], [2.0, 6.0]]?.to_dtype(DType::F64)?;
//! assert!((linalg::det(&a)?.item::<f64>()? - 10.0).abs() < 1e-12);
//! let x = linalg::solve(&a, &tensor![1.0f64, 2.0]?.to_dtype(DType::F64)?)?;
//! assert!(a.matmul(&x)?.allclose(&tensor![1.0f64, 2.0]?.to_dtype(DType::F64)?, 1e-12, 1e-12)?);
//! # Ok::<(), strata_tensor::TensorError>(())
//! ```

mod decompose;
mod derived;
mod gpu;
pub(crate) mod host;
mod lu;
mod norms;

pub use decompose::{cholesky, eigh, eigvalsh, qr, svd, svdvals, QrMode, Uplo};
pub use derived::{cond, lstsq, matrix_power, matrix_rank, pinv, Lstsq};
pub use gpu::{cusolver_enabled, set_cusolver_enabled, CUSOLVER_VAR};
pub use lu::{det, inv, logdet, slogdet, solve, solve_is_vector_rhs};
pub use norms::{cross, matrix_norm, norm, vecdot, vector_norm, NormOrd};

use crate::dtype::DType;
use crate::error::{Result, TensorError};
use crate::tensor::Tensor;

/// Calls `$body` with `$T` the Rust type of `$x`'s dtype (f32 or f64; the
/// caller has checked it).
macro_rules! real {
    ($x:expr, |$T:ident| $body:expr) => {
        match $x.dtype() {
            $crate::dtype::DType::F32 => {
                type $T = f32;
                $body
            }
            _ => {
                type $T = f64;
                $body
            }
        }
    };
}
pub(crate) use real;

/// PyTorch's dtype check of the linear-algebra ops: f32 and f64 (strata has
/// no complex dtypes); half precision and integers refused in its words.
pub(crate) fn check_float(op: &'static str, x: &Tensor) -> Result<()> {
    match x.dtype() {
        DType::F32 | DType::F64 => Ok(()),
        d @ (DType::F16 | DType::BF16) => Err(TensorError::dtype(
            op,
            format!("Low precision dtypes not supported. Got {d}"),
        )),
        d => Err(TensorError::dtype(
            op,
            format!("Expected a floating point or complex tensor as input. Got {d}"),
        )),
    }
}

/// At least 2-D (a matrix or a batch of them).
pub(crate) fn check_matrix(op: &'static str, x: &Tensor) -> Result<(usize, usize)> {
    let nd = x.ndim();
    if nd < 2 {
        return Err(TensorError::shape(
            op,
            "The input tensor A must have at least 2 dimensions.",
        ));
    }
    Ok((x.shape()[nd - 2], x.shape()[nd - 1]))
}

/// A batch of square matrices: their order.
pub(crate) fn check_square(op: &'static str, x: &Tensor) -> Result<usize> {
    let (m, n) = check_matrix(op, x)?;
    if m != n {
        return Err(TensorError::shape(
            op,
            format!("A must be batches of square matrices, but they are {m} by {n} matrices"),
        ));
    }
    Ok(n)
}

/// Both operands on one device.
pub(crate) fn same_device(op: &'static str, a: &Tensor, b: &Tensor) -> Result<()> {
    if a.device() != b.device() {
        return Err(TensorError::DeviceMismatch {
            op,
            lhs: a.device(),
            rhs: b.device(),
        });
    }
    Ok(())
}

/// The batch element a failure names: PyTorch names it only for batched
/// inputs.
pub(crate) fn batch_of(x: &Tensor, k: usize) -> Option<usize> {
    (x.ndim() > 2).then_some(k)
}
