//! Norms and products of vectors along a dim: `vector_norm`,
//! `matrix_norm`, `norm`, `vecdot`, `cross`.

use super::{check_float, check_matrix, same_device};
use crate::error::{Result, TensorError};
use crate::shape::{broadcast_shapes, normalize_dim};
use crate::tensor::Tensor;

/// The order of a matrix norm (PyTorch's `ord`: `'fro'`, `'nuc'` or a
/// number).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum NormOrd {
    /// Frobenius: the 2-norm of the elements.
    Fro,
    /// Nuclear: the sum of the singular values.
    Nuc,
    /// A number: for matrices ±1 (max/min column sum of `|a|`), ±2
    /// (largest/smallest singular value), ±inf (max/min row sum); for
    /// vectors any `p`.
    P(f64),
}

/// `torch.linalg.vector_norm(x, ord, dim, keepdim)`: [`Tensor::vector_norm`]
/// (all elements when `dims` is `None`).
///
/// ```
/// # use strata_tensor::DType;
/// use strata_tensor::{linalg, tensor};
/// let x = tensor![[3.0f64, 4.0], [0.0, 0.0]]?.to_dtype(DType::F64)?;
/// assert_eq!(linalg::vector_norm(&x, 2.0, Some(&[1]), false)?.to_vec::<f64>()?, vec![5.0, 0.0]);
/// # Ok::<(), strata_tensor::TensorError>(())
/// ```
pub fn vector_norm(x: &Tensor, ord: f64, dims: Option<&[i64]>, keepdim: bool) -> Result<Tensor> {
    x.vector_norm(ord, dims, keepdim)
}

/// `torch.linalg.matrix_norm(A, ord, dim, keepdim)`: the norm of the
/// matrices spanned by the two dims `dims` (PyTorch's default `(-2, -1)`):
/// [`NormOrd::Fro`] the 2-norm of the elements, [`NormOrd::Nuc`] the sum
/// of the singular values, `P(2.0)`/`P(-2.0)` the largest/smallest singular
/// value, `P(1.0)`/`P(-1.0)` the largest/smallest sum of `|a|` down a
/// column, `P(inf)`/`P(-inf)` along a row.
///
/// Errors: fewer than 2 dims, equal dims ([`TensorError::Shape`],
/// [`TensorError::Dim`]); dtypes other than f32/f64
/// ([`TensorError::DType`]); another order ([`TensorError::Value`],
/// `Order 3 not supported.`); those of [`svdvals`](super::svdvals) for ±2
/// and `Nuc`.
///
/// ```
/// # use strata_tensor::DType;
/// use strata_tensor::{linalg, tensor};
/// use strata_tensor::linalg::NormOrd;
/// let a = tensor![[1.0f64, -2.0], [3.0, 4.0]]?.to_dtype(DType::F64)?;
/// assert_eq!(linalg::matrix_norm(&a, NormOrd::P(1.0), [-2, -1], false)?.item::<f64>()?, 6.0);
/// assert_eq!(linalg::matrix_norm(&a, NormOrd::P(f64::INFINITY), [-2, -1], false)?.item::<f64>()?, 7.0);
/// assert!((linalg::matrix_norm(&a, NormOrd::Fro, [-2, -1], false)?.item::<f64>()? - 30f64.sqrt()).abs() < 1e-12);
/// # Ok::<(), strata_tensor::TensorError>(())
/// ```
pub fn matrix_norm(a: &Tensor, ord: NormOrd, dims: [i64; 2], keepdim: bool) -> Result<Tensor> {
    const OP: &str = "linalg.matrix_norm";
    check_matrix(OP, a)?;
    // f16 and bf16 are refused only by the SVD (nuclear and ±2 norms), as
    // in PyTorch; integers always.
    let svd_based = matches!(ord, NormOrd::Nuc) || matches!(ord, NormOrd::P(p) if p.abs() == 2.0);
    if svd_based || !a.dtype().is_float() {
        check_float(OP, a)?;
    }
    let nd = a.ndim();
    let d0 = normalize_dim(OP, dims[0], nd)?;
    let d1 = normalize_dim(OP, dims[1], nd)?;
    if d0 == d1 {
        return Err(TensorError::dim(
            OP,
            format!("dims must be different. Got ({}, {})", dims[0], dims[1]),
        ));
    }
    let (i0, i1) = (d0 as i64, d1 as i64);
    if let NormOrd::P(p) = ord {
        if !(p.abs() == 1.0 || p.abs() == 2.0 || p.is_infinite()) {
            return Err(TensorError::value(OP, format!("Order {p} not supported.")));
        }
    }
    if a.shape()[d0] == 0 || a.shape()[d1] == 0 {
        // The dim the extreme is taken over: -1's sums run down d0 and
        // their least is over d1, -inf's the other way round; -2 takes the
        // least of no singular values.
        let extreme_empty = match ord {
            NormOrd::P(p) if p.abs() == 1.0 => a.shape()[d1] == 0,
            NormOrd::P(p) if p.is_infinite() => a.shape()[d0] == 0,
            _ => true,
        };
        if extreme_empty && matches!(ord, NormOrd::P(p) if p < 0.0) {
            // PyTorch's `amin` over the empty dim refuses.
            return Err(TensorError::Empty {
                op: OP,
                shape: a.shape().to_vec(),
            });
        }
        // PyTorch's other norms of empty matrices are 0.
        let shape: Vec<usize> = (0..nd)
            .filter_map(|d| {
                if d == d0 || d == d1 {
                    keepdim.then_some(1)
                } else {
                    Some(a.shape()[d])
                }
            })
            .collect();
        return Tensor::zeros(&shape, a.dtype(), a.device());
    }
    match ord {
        NormOrd::Fro => a.vector_norm(2.0, Some(&[i0, i1]), keepdim),
        NormOrd::P(p) if p.abs() == 1.0 || p.is_infinite() => {
            // ±1: sum down the rows (dim 0), extreme over the columns; ±inf
            // the other way round.
            let (sum_dim, ext_dim) = if p.abs() == 1.0 { (d0, d1) } else { (d1, d0) };
            let sums = a.abs()?.sum(Some(&[sum_dim as i64]), true)?;
            let ext = if p > 0.0 {
                sums.max_dim(ext_dim as i64, true)?.0
            } else {
                sums.min_dim(ext_dim as i64, true)?.0
            };
            if keepdim {
                Ok(ext)
            } else {
                let mut both = [i0, i1];
                both.sort();
                ext.squeeze_dims(&both)
            }
        }
        NormOrd::Nuc | NormOrd::P(_) => {
            let moved = a.movedim(&[i0, i1], &[-2, -1])?;
            let s = super::svdvals(&moved)?;
            let r = match ord {
                NormOrd::Nuc => s.sum(Some(&[-1]), false)?,
                NormOrd::P(p) if p > 0.0 => s.max_dim(-1, false)?.0,
                _ => s.min_dim(-1, false)?.0,
            };
            if keepdim {
                let mut both = [d0, d1];
                both.sort();
                let mut r = r;
                for d in both {
                    r = r.unsqueeze(d as i64)?;
                }
                Ok(r)
            } else {
                Ok(r)
            }
        }
    }
}

/// `torch.linalg.norm(A, ord, dim, keepdim)`: a vector norm where `dims`
/// names one dim (or `dims` and `ord` are both `None`: the 2-norm of all
/// elements), a matrix norm where `dims` names two (or `dims` is `None`,
/// `ord` is given and `A` is 2-D); `ord` `None` is the 2-norm of a vector
/// or the Frobenius norm of a matrix.
///
/// Errors: those of [`vector_norm`] and [`matrix_norm`]; `ord` given
/// without `dims` for an input that is not 1-D or 2-D, `dims` of more than
/// two dims, `Fro`/`Nuc` for a vector ([`TensorError::Value`]).
///
/// ```
/// # use strata_tensor::DType;
/// use strata_tensor::{linalg, tensor};
/// let a = tensor![[3.0f64, 0.0], [4.0, 0.0]]?.to_dtype(DType::F64)?;
/// assert_eq!(linalg::norm(&a, None, None, false)?.item::<f64>()?, 5.0);
/// # Ok::<(), strata_tensor::TensorError>(())
/// ```
pub fn norm(
    a: &Tensor,
    ord: Option<NormOrd>,
    dims: Option<&[i64]>,
    keepdim: bool,
) -> Result<Tensor> {
    const OP: &str = "linalg.norm";
    let vector = |dims: Option<&[i64]>| -> Result<Tensor> {
        match ord {
            None => a.vector_norm(2.0, dims, keepdim),
            Some(NormOrd::P(p)) => a.vector_norm(p, dims, keepdim),
            Some(o) => Err(TensorError::value(
                OP,
                format!("{o:?} is not a vector norm order: a matrix norm needs two dims"),
            )),
        }
    };
    match dims {
        Some(d) if d.len() == 1 => vector(Some(d)),
        Some(d) if d.len() == 2 => matrix_norm(a, ord.unwrap_or(NormOrd::Fro), [d[0], d[1]], keepdim),
        Some(d) => Err(TensorError::value(
            OP,
            format!("If dim is specified, it must be of length 1 or 2. Got {d:?}"),
        )),
        None => match ord {
            None => {
                if a.ndim() == 0 {
                    return a.vector_norm(2.0, None, keepdim);
                }
                let all: Vec<i64> = (0..a.ndim() as i64).collect();
                a.vector_norm(2.0, Some(&all), keepdim)
            }
            Some(o) => match a.ndim() {
                1 => vector(Some(&[0])),
                2 => matrix_norm(a, o, [0, 1], keepdim),
                nd => Err(TensorError::value(
                    OP,
                    format!("If dim is not specified but ord is, the input must be 1D or 2D. Got {nd}D."),
                )),
            },
        },
    }
}

/// `torch.linalg.vecdot(x, y, dim)`: `sum(x * y, dim)` with `x` and `y`
/// broadcast (real dtypes: no conjugation).
///
/// Errors: an integer or bool operand, different dtypes
/// ([`TensorError::DType`]); shapes that do not broadcast; `dim` out of
/// range.
///
/// ```
/// # use strata_tensor::DType;
/// use strata_tensor::{linalg, tensor};
/// let x = tensor![[1.0f64, 2.0], [3.0, 4.0]]?.to_dtype(DType::F64)?;
/// let y = tensor![1.0f64, 1.0]?.to_dtype(DType::F64)?;
/// assert_eq!(linalg::vecdot(&x, &y, -1)?.to_vec::<f64>()?, vec![3.0, 7.0]);
/// # Ok::<(), strata_tensor::TensorError>(())
/// ```
pub fn vecdot(x: &Tensor, y: &Tensor, dim: i64) -> Result<Tensor> {
    const OP: &str = "linalg.vecdot";
    same_device(OP, x, y)?;
    // PyTorch's first check: a float operand (f16 and bf16 too; no
    // integers or bools).
    for t in [x, y] {
        if !t.dtype().is_float() {
            return Err(TensorError::dtype(
                OP,
                format!(
                    "Expected a floating point or complex tensor as input. Got {}",
                    t.dtype()
                ),
            ));
        }
    }
    if x.dtype() != y.dtype() {
        return Err(TensorError::dtype(
            OP,
            format!(
                "Expected x and y to have the same dtype, but found x of type {} and y of type {} instead",
                x.dtype(),
                y.dtype()
            ),
        ));
    }
    x.mul(y)?.sum(Some(&[dim]), false)
}

/// `torch.linalg.cross(x, y, dim)`: the cross product of the 3-vectors
/// along `dim` (PyTorch's default -1), `x` and `y` of the same number of
/// dims broadcast ([`Tensor::cross`] after broadcasting).
///
/// Errors: different numbers of dims, shapes that do not broadcast, 0-d
/// operands, `dim` out of range; a size other than 3 along `dim` ([`TensorError::Shape`], `linalg.cross: inputs
/// dimension -1 must have length 3. Got 2 and 2`).
///
/// ```
/// # use strata_tensor::DType;
/// use strata_tensor::{linalg, tensor};
/// let x = tensor![[1.0f64, 0.0, 0.0], [0.0, 1.0, 0.0]]?.to_dtype(DType::F64)?;
/// let y = tensor![[0.0f64, 1.0, 0.0]]?.to_dtype(DType::F64)?;
/// assert_eq!(linalg::cross(&x, &y, -1)?.to_vec::<f64>()?, vec![0.0, 0.0, 1.0, 0.0, 0.0, 0.0]);
/// # Ok::<(), strata_tensor::TensorError>(())
/// ```
pub fn cross(x: &Tensor, y: &Tensor, dim: i64) -> Result<Tensor> {
    const OP: &str = "linalg.cross";
    same_device(OP, x, y)?;
    if x.ndim() != y.ndim() {
        return Err(TensorError::shape(
            OP,
            "inputs must have the same number of dimensions.",
        ));
    }
    let shape = broadcast_shapes(OP, x.shape(), y.shape())?;
    if shape.is_empty() {
        // 0-d operands have no dim of length 3 (nor any to name).
        return Err(TensorError::shape(
            OP,
            format!("Dimension specified as {dim} but tensor has no dimensions"),
        ));
    }
    let d = normalize_dim(OP, dim, shape.len())?;
    let size = |t: &Tensor| {
        let off = shape.len() - t.ndim();
        if d < off {
            1
        } else {
            t.shape()[d - off]
        }
    };
    if size(x) != 3 || size(y) != 3 {
        return Err(TensorError::shape(
            OP,
            format!(
                "inputs dimension {dim} must have length 3. Got {} and {}",
                size(x),
                size(y)
            ),
        ));
    }
    let s: Vec<i64> = shape.iter().map(|&v| v as i64).collect();
    x.expand(&s)?.cross(&y.expand(&s)?, dim)
}
