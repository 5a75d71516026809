//! Device-independent shape arithmetic: dims, broadcasting, contiguous strides,
//! and PyTorch's rule for when a view can reinterpret strided memory.
//!
//! # Size limits
//!
//! As in PyTorch, a tensor holds at most [`MAX_NUMEL`] (`i64::MAX`) elements,
//! and a shape that a contiguous tensor is created with must also have
//! contiguous strides that fit `i64::MAX` and a product of its sizes that
//! does not overflow on the way (see [`check_contiguous`]). Every size, stride, offset and extent
//! computed from user input is checked against these limits
//! ([`checked_numel`], [`check_contiguous`], [`checked_nbytes`]); a shape
//! beyond them is [`TensorError::SizeOverflow`] naming the shape, never a
//! wrapped size. A byte count within the limits that the device cannot hold is
//! the allocator's out-of-memory error.

use crate::error::{Result, TensorError};

/// The largest element count, stride, offset or storage extent a tensor may
/// have: `i64::MAX`, as in PyTorch.
pub const MAX_NUMEL: usize = i64::MAX as usize;

/// Number of elements of a shape (1 for a 0-d shape, 0 when a size is 0).
///
/// Never overflows: a product beyond `usize` saturates to `usize::MAX` (the
/// shapes of tensors never get there; see [`checked_numel`] for user input).
pub fn numel(shape: &[usize]) -> usize {
    if shape.contains(&0) {
        return 0;
    }
    shape.iter().fold(1usize, |a, &s| a.saturating_mul(s))
}

/// The element count of `shape`, or [`TensorError::SizeOverflow`] when it
/// exceeds [`MAX_NUMEL`].
///
/// ```
/// use strata_tensor::shape::checked_numel;
/// assert_eq!(checked_numel("zeros", &[2, 3]).unwrap(), 6);
/// assert_eq!(checked_numel("expand", &[1 << 40, 1 << 40, 0]).unwrap(), 0);
/// assert!(checked_numel("zeros", &[1 << 32, 1 << 32]).is_err());
/// ```
pub fn checked_numel(op: &'static str, shape: &[usize]) -> Result<usize> {
    if shape.contains(&0) {
        return Ok(0);
    }
    product_within(shape.iter().copied()).ok_or_else(|| {
        TensorError::overflow(
            op,
            format!(
                "shape {shape:?} has more than {MAX_NUMEL} elements (the product of its sizes overflows i64)"
            ),
        )
    })
}

/// Checks that a contiguous tensor of `shape` can exist, by PyTorch's two
/// rules: its row-major strides (for each dim but the first, the product of
/// the trailing sizes, each counted as at least 1) fit [`MAX_NUMEL`]
/// ("Stride calculation overflowed"), and the product of its sizes taken in
/// order does not overflow 64 bits on the way, nor exceed [`MAX_NUMEL`]
/// ("Storage size calculation overflowed"; a 0 after the overflow does not
/// save it). Returns the element count.
///
/// So an empty tensor may have other sizes whose product passes
/// `i64::MAX`: `[2^62, 2, 0]` exists (strides `[2, 1, 1]`), `[2^62, 4, 0]`
/// does not (2^62 * 4 overflows), nor does `[0, 2^62, 4]` (its first stride
/// would be 2^64).
///
/// ```
/// use strata_tensor::shape::check_contiguous;
/// assert_eq!(check_contiguous("zeros", &[4, 0, 5]).unwrap(), 0);
/// assert_eq!(check_contiguous("zeros", &[1 << 62, 2, 0]).unwrap(), 0);
/// assert!(check_contiguous("zeros", &[1 << 62, 4, 0]).is_err());
/// assert!(check_contiguous("zeros", &[0, 1 << 62, 4]).is_err());
/// assert!(check_contiguous("zeros", &[1 << 40, 1 << 40, 0]).is_err());
/// ```
pub fn check_contiguous(op: &'static str, shape: &[usize]) -> Result<usize> {
    // (A size itself is at most i64::MAX, as PyTorch's sizes are i64.)
    let strides_fit = shape.iter().all(|&s| s <= MAX_NUMEL)
        && product_within(shape.iter().skip(1).map(|&s| s.max(1))).is_some();
    let mut running = Some(1usize);
    for &s in shape {
        running = running.and_then(|p| p.checked_mul(s));
    }
    match running {
        Some(numel) if strides_fit && numel <= MAX_NUMEL => Ok(numel),
        _ => Err(TensorError::overflow(
            op,
            format!(
                "shape {shape:?} is too large: its contiguous strides or the product of its sizes exceed {MAX_NUMEL} (i64::MAX)"
            ),
        )),
    }
}

/// Bytes of `numel` elements of `elem_size` bytes, or
/// [`TensorError::SizeOverflow`] naming the shape when the count overflows.
pub fn checked_nbytes(
    op: &'static str,
    shape: &[usize],
    numel: usize,
    elem_size: usize,
) -> Result<usize> {
    numel
        .checked_mul(elem_size)
        .filter(|&b| b <= MAX_NUMEL)
        .ok_or_else(|| {
            TensorError::overflow(
                op,
                format!(
                    "storage size of shape {shape:?} with {elem_size}-byte elements overflows ({numel} elements)"
                ),
            )
        })
}

/// The product of `sizes` if it stays within [`MAX_NUMEL`].
fn product_within(sizes: impl Iterator<Item = usize>) -> Option<usize> {
    let mut acc = 1usize;
    for s in sizes {
        acc = acc.checked_mul(s).filter(|&p| p <= MAX_NUMEL)?;
    }
    Some(acc)
}

/// Row-major (C-order) strides of a shape, in elements.
///
/// ```
/// assert_eq!(strata_tensor::shape::contiguous_strides(&[2, 3, 4]), vec![12, 4, 1]);
/// ```
pub fn contiguous_strides(shape: &[usize]) -> Vec<usize> {
    let mut strides = vec![0; shape.len()];
    let mut acc = 1usize;
    for d in (0..shape.len()).rev() {
        strides[d] = acc;
        // Saturates only for shapes no tensor has (see `check_contiguous`).
        acc = acc.saturating_mul(shape[d].max(1));
    }
    strides
}

/// Normalises a possibly negative dim for a tensor of `ndim` dims; a 0-d tensor
/// accepts 0 and -1 (as PyTorch's reductions do).
pub fn normalize_dim(op: &'static str, dim: i64, ndim: usize) -> Result<usize> {
    // In i128: a rank past i64::MAX (only a caller's argument, never a
    // tensor's) neither wraps negative nor overflows `-n` and `n - 1`.
    let n = ndim.max(1) as i128;
    let d = i128::from(dim);
    if d < -n || d >= n {
        return Err(TensorError::dim(
            op,
            format!(
                "dimension {dim} out of range for a tensor of {ndim} dims (expected [{}, {}])",
                -n,
                n - 1
            ),
        ));
    }
    // In [0, n), so within usize.
    Ok(if d < 0 { d + n } else { d } as usize)
}

/// Normalises a dim for an op that requires the dim to exist (no 0-d leniency).
pub fn normalize_dim_strict(op: &'static str, dim: i64, ndim: usize) -> Result<usize> {
    if ndim == 0 {
        return Err(TensorError::dim(
            op,
            format!("dimension {dim} given for a 0-d tensor"),
        ));
    }
    normalize_dim(op, dim, ndim)
}

/// Normalises a list of dims, rejecting repeats.
pub fn normalize_dims(op: &'static str, dims: &[i64], ndim: usize) -> Result<Vec<usize>> {
    let mut out = Vec::with_capacity(dims.len());
    for &d in dims {
        let n = normalize_dim(op, d, ndim)?;
        if out.contains(&n) {
            return Err(TensorError::dim(
                op,
                format!("dimension {d} appears more than once in {dims:?}"),
            ));
        }
        out.push(n);
    }
    Ok(out)
}

/// A shape as the `i64` sizes `view`, `reshape` and `expand` take (every
/// size of a tensor fits: its element count does).
pub fn as_i64(shape: &[usize]) -> Vec<i64> {
    shape.iter().map(|&s| s as i64).collect()
}

/// The broadcast of two shapes (aligned from the right; a 1 stretches).
///
/// ```
/// use strata_tensor::shape::broadcast_shapes;
/// assert_eq!(broadcast_shapes("add", &[3, 1], &[4]).unwrap(), vec![3, 4]);
/// assert!(broadcast_shapes("add", &[3], &[4]).is_err());
/// ```
pub fn broadcast_shapes(op: &'static str, a: &[usize], b: &[usize]) -> Result<Vec<usize>> {
    let n = a.len().max(b.len());
    let mut out = vec![0; n];
    for i in 0..n {
        let da = if i < n - a.len() {
            1
        } else {
            a[i - (n - a.len())]
        };
        let db = if i < n - b.len() {
            1
        } else {
            b[i - (n - b.len())]
        };
        out[i] = if da == db || db == 1 {
            da
        } else if da == 1 {
            db
        } else {
            return Err(TensorError::Broadcast {
                op,
                lhs: a.to_vec(),
                rhs: b.to_vec(),
            });
        };
    }
    check_contiguous(op, &out)?;
    Ok(out)
}

/// Resolves a shape that may hold one -1 against an element count.
pub fn infer_shape(op: &'static str, shape: &[i64], numel: usize) -> Result<Vec<usize>> {
    let mut infer = None;
    let mut known = 1usize;
    for (i, &s) in shape.iter().enumerate() {
        if s == -1 {
            if infer.is_some() {
                return Err(TensorError::shape(
                    op,
                    format!("only one dimension can be -1 in {shape:?}"),
                ));
            }
            infer = Some(i);
        } else if s < 0 {
            return Err(TensorError::shape(
                op,
                format!("invalid size {s} in {shape:?}"),
            ));
        } else {
            // Past i64::MAX (PyTorch's element limit) counts as overflow
            // too, though a usize would hold it.
            known = match known.checked_mul(s as usize).filter(|&k| k <= MAX_NUMEL) {
                Some(k) => k,
                // A zero elsewhere would make the product 0; an overflow
                // before it still names a shape no tensor can have. Unless
                // both the input and the shape may hold no element, it is
                // PyTorch's shape error ("shape ... is invalid for input of
                // size n"): no such count is n.
                None if numel > 0 || !shape.contains(&0) => {
                    return Err(TensorError::shape(
                        op,
                        format!(
                            "shape {shape:?} has more elements than fit an i64, \
                             so it cannot hold the input's {numel}"
                        ),
                    ))
                }
                None => {
                    return Err(TensorError::overflow(
                        op,
                        format!("shape {shape:?} has more elements than fit an i64"),
                    ))
                }
            };
        }
    }
    let mut out: Vec<usize> = shape.iter().map(|&s| s.max(0) as usize).collect();
    match infer {
        Some(i) => {
            if known == 0 || !numel.is_multiple_of(known) {
                return Err(TensorError::shape(
                    op,
                    format!("shape {shape:?} is invalid for input of size {numel}"),
                ));
            }
            out[i] = numel / known;
        }
        None => {
            if known != numel {
                return Err(TensorError::shape(
                    op,
                    format!("shape {shape:?} is invalid for input of size {numel}"),
                ));
            }
        }
    }
    check_contiguous(op, &out)?;
    Ok(out)
}

/// Strides that let memory laid out as (`old_shape`, `old_strides`) be viewed
/// as `new_shape` without copying, or `None` (PyTorch's `computeStride`).
///
/// Also `None` for input no tensor has: strides not one per size, element
/// counts that differ, or sizes whose product passes `usize`.
pub fn view_strides(
    old_shape: &[usize],
    old_strides: &[usize],
    new_shape: &[usize],
) -> Option<Vec<usize>> {
    if old_shape.len() != old_strides.len()
        || checked_product(old_shape)? != checked_product(new_shape)?
    {
        return None;
    }
    let mut new_strides = vec![0usize; new_shape.len()];
    if old_shape.is_empty() {
        return Some(vec![1; new_shape.len()]);
    }
    let n = numel(old_shape);
    if n == 0 && old_shape == new_shape {
        return Some(old_strides.to_vec());
    }
    if n == 0 {
        return Some(contiguous_strides(new_shape));
    }
    let mut view_d = new_shape.len() as isize - 1;
    let mut chunk_base_stride = *old_strides.last().unwrap();
    let mut tensor_numel = 1usize;
    let mut view_numel = 1usize;
    for tensor_d in (0..old_shape.len()).rev() {
        tensor_numel = tensor_numel.checked_mul(old_shape[tensor_d])?;
        if tensor_d == 0
            || (old_shape[tensor_d - 1] != 1
                && Some(old_strides[tensor_d - 1]) != tensor_numel.checked_mul(chunk_base_stride))
        {
            while view_d >= 0 && (view_numel < tensor_numel || new_shape[view_d as usize] == 1) {
                // Overflows only for a huge stride on a size-1 dim; no view then.
                new_strides[view_d as usize] = view_numel.checked_mul(chunk_base_stride)?;
                view_numel = view_numel.checked_mul(new_shape[view_d as usize])?;
                view_d -= 1;
            }
            if view_numel != tensor_numel {
                return None;
            }
            if tensor_d > 0 {
                chunk_base_stride = old_strides[tensor_d - 1];
                tensor_numel = 1;
                view_numel = 1;
            }
        }
    }
    if view_d != -1 {
        return None;
    }
    Some(new_strides)
}

/// The element count of `shape` (0 when a size is 0), or `None` when the
/// product of its sizes passes `usize`.
fn checked_product(shape: &[usize]) -> Option<usize> {
    if shape.contains(&0) {
        return Some(0);
    }
    shape.iter().try_fold(1usize, |a, &s| a.checked_mul(s))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn view_of_transpose_is_impossible() {
        assert_eq!(view_strides(&[4, 3], &[1, 4], &[12]), None);
        assert_eq!(view_strides(&[3, 4], &[4, 1], &[2, 6]), Some(vec![6, 1]));
        assert_eq!(view_strides(&[3, 4], &[8, 2], &[12]), Some(vec![2]));
        assert_eq!(view_strides(&[3, 4], &[10, 2], &[12]), None);
        assert_eq!(
            view_strides(&[3, 4], &[8, 1], &[3, 2, 2]),
            Some(vec![8, 2, 1])
        );
    }

    #[test]
    fn infer() {
        assert_eq!(infer_shape("view", &[-1, 4], 12).unwrap(), vec![3, 4]);
        assert!(infer_shape("view", &[-1, -1], 12).is_err());
        assert!(infer_shape("view", &[5], 12).is_err());
        // A product past i64::MAX: PyTorch's shape error for a tensor with
        // elements, a size error for an empty one.
        let huge = [1i64 << 62, 1 << 62];
        assert!(matches!(
            infer_shape("view", &huge, 4),
            Err(TensorError::Shape { .. })
        ));
        assert!(matches!(
            infer_shape("view", &[i64::MAX, 4], 4),
            Err(TensorError::Shape { .. })
        ));
        assert!(matches!(
            infer_shape("view", &[1 << 62, 4, -1], 4),
            Err(TensorError::Shape { .. })
        ));
        assert!(matches!(
            infer_shape("view", &huge, 0),
            Err(TensorError::Shape { .. })
        ));
        assert!(matches!(
            infer_shape("view", &[1 << 62, 1 << 62, 0], 0),
            Err(TensorError::SizeOverflow { .. })
        ));
        // 2 * (2^63 - 1) fits a u64 but not PyTorch's i64 element count.
        assert!(matches!(
            infer_shape("view", &[i64::MAX, 2, -1], 0),
            Err(TensorError::Shape { .. })
        ));
    }
}
