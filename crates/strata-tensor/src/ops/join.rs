//! Joining and splitting (issue 12): `cat` and `stack` copy into one fresh
//! tensor (each input through a `narrow` view of the output and `copy_`,
//! which converts to the promoted dtype); `split` and `chunk` return `narrow`
//! views of their operand, as PyTorch does.

use super::elementwise::same_device;
use crate::error::{Result, TensorError};
use crate::shape::{normalize_dim, normalize_dim_strict};
use crate::tensor::Tensor;

/// `split`'s size argument: one size for every piece (the last may be
/// shorter), or the size of each piece.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SplitSize {
    /// Pieces of this size along the dim, the last one shorter.
    Size(i64),
    /// One piece per entry, of that size; they must sum to the dim's size.
    Sections(Vec<i64>),
}

impl From<i64> for SplitSize {
    fn from(s: i64) -> Self {
        SplitSize::Size(s)
    }
}

impl From<Vec<i64>> for SplitSize {
    fn from(s: Vec<i64>) -> Self {
        SplitSize::Sections(s)
    }
}

impl From<&[i64]> for SplitSize {
    fn from(s: &[i64]) -> Self {
        SplitSize::Sections(s.to_vec())
    }
}

/// The most pieces `split` and `chunk` return. Each piece is a tensor
/// handle (a view) on the host; more than this many would take gigabytes of
/// host memory, so the count is an error (PyTorch has no limit and runs out
/// of memory instead).
pub const MAX_PIECES: i64 = 1 << 26;

/// Checks that `count` pieces can be returned (see [`MAX_PIECES`]).
pub(crate) fn check_pieces(op: &'static str, count: i64) -> Result<()> {
    if count > MAX_PIECES {
        return Err(TensorError::value(
            op,
            format!(
                "the call would return {count} pieces, more than the {MAX_PIECES} strata returns (each piece is a tensor handle in host memory)"
            ),
        ));
    }
    Ok(())
}

impl Tensor {
    /// `torch.cat(tensors, dim)`: a fresh tensor joining `tensors` (same
    /// rank, at least 1-D, equal sizes except along `dim`) along `dim`; the
    /// dtypes promote together. 1-D tensors of size 0 are skipped whatever
    /// the other shapes (PyTorch's legacy rule), but their dtype promotes.
    pub fn cat(tensors: &[&Tensor], dim: i64) -> Result<Tensor> {
        const OP: &str = "cat";
        let first = tensors
            .first()
            .ok_or_else(|| TensorError::value(OP, "expected a non-empty list of tensors"))?;
        for t in tensors {
            same_device(OP, first, t)?;
            if t.ndim() == 0 {
                return Err(TensorError::shape(
                    OP,
                    "zero-dimensional tensors cannot be concatenated; unsqueeze them or use stack",
                ));
            }
        }
        let dtype = tensors
            .iter()
            .map(|t| t.dtype())
            .reduce(|a, b| a.promote(b))
            .unwrap_or(first.dtype());
        let skipped = |t: &Tensor| t.ndim() == 1 && t.numel() == 0;
        let kept: Vec<&Tensor> = tensors.iter().copied().filter(|t| !skipped(t)).collect();
        let Some(reference) = kept.first() else {
            // Every input is an empty 1-D tensor: PyTorch's legacy wrap
            // leaves the dim unchecked (any dim gives the empty result).
            return Tensor::uninit("cat", &[0], dtype, first.device());
        };
        let d = normalize_dim_strict(OP, dim, reference.ndim())?;
        let mut shape = reference.shape().to_vec();
        shape[d] = 0;
        for t in &kept {
            let fits = t.ndim() == reference.ndim()
                && (0..t.ndim()).all(|k| k == d || t.shape()[k] == reference.shape()[k]);
            if !fits {
                return Err(TensorError::shape(
                    OP,
                    format!(
                        "sizes must match except in dimension {d}: {:?} and {:?}",
                        reference.shape(),
                        t.shape()
                    ),
                ));
            }
            shape[d] = shape[d]
                .checked_add(t.shape()[d])
                .filter(|&n| n <= crate::shape::MAX_NUMEL)
                .ok_or_else(|| {
                    TensorError::overflow(
                        OP,
                        format!(
                            "the sizes along dimension {d} sum to more than {} (i64::MAX)",
                            crate::shape::MAX_NUMEL
                        ),
                    )
                })?;
        }
        // PyTorch's output memory format: channels-last (4-D) or
        // channels-last-3d (5-D) when every input (the skipped ones
        // included) suggests it, else row-major.
        let out = Tensor::uninit_channels_last_if(
            "cat",
            &shape,
            tensors
                .iter()
                .all(|t| t.layout().is_strides_like_channels_last()),
            dtype,
            first.device(),
        )?;
        let mut at = 0i64;
        for t in &kept {
            let len = t.shape()[d] as i64;
            // A piece with no elements has nothing to copy, and its view of
            // the output is not taken: an empty output's contiguous strides
            // may be huge (`[3, 0, 2^62]` has strides `[2^62, 2^62, 1]`), and
            // the view of its third piece would start beyond i64::MAX, an
            // error PyTorch's stack and cat do not raise.
            if len > 0 && t.numel() > 0 {
                out.narrow(d as i64, at, len)?.copy_(t)?;
            }
            at += len;
        }
        Ok(out)
    }

    /// `torch.stack(tensors, dim)`: tensors of one shape joined along a new
    /// dim in `[-ndim-1, ndim]`; dtypes promote.
    pub fn stack(tensors: &[&Tensor], dim: i64) -> Result<Tensor> {
        const OP: &str = "stack";
        let first = tensors
            .first()
            .ok_or_else(|| TensorError::value(OP, "expected a non-empty list of tensors"))?;
        // PyTorch's order: the dim (against the first tensor's rank), then
        // the shapes.
        let d = normalize_dim(OP, dim, first.ndim() + 1)?;
        for t in tensors {
            if t.shape() != first.shape() {
                return Err(TensorError::shape(
                    OP,
                    format!(
                        "stack expects each tensor to be equal size, got {:?} and {:?}",
                        first.shape(),
                        t.shape()
                    ),
                ));
            }
        }
        // As PyTorch: inside the rank, the inputs joined along `d` and that
        // dim split by a view (so the result is laid out as `cat` lays
        // out its own: channels-last inputs give a split channels-last
        // result); at the end, a `cat` of the inputs unsqueezed there.
        if d < first.ndim() && first.ndim() > 0 {
            let mut sizes: Vec<i64> = first.shape().iter().map(|&n| n as i64).collect();
            sizes.insert(d, tensors.len() as i64);
            return Tensor::cat(tensors, d as i64)?.view(&sizes);
        }
        let parts: Vec<Tensor> = tensors
            .iter()
            .map(|t| t.unsqueeze(d as i64))
            .collect::<Result<_>>()?;
        let refs: Vec<&Tensor> = parts.iter().collect();
        Tensor::cat(&refs, d as i64)
    }

    /// `torch.split(self, size, dim)`: views of self along `dim`, of one size
    /// (the last shorter; at least one piece) or of the listed sizes. At
    /// most [`MAX_PIECES`] pieces (a [`TensorError::Value`] beyond).
    pub fn split(&self, size: impl Into<SplitSize>, dim: i64) -> Result<Vec<Tensor>> {
        const OP: &str = "split";
        if self.ndim() == 0 {
            return Err(TensorError::shape(
                OP,
                "split expects at least a 1-D tensor",
            ));
        }
        let size = size.into();
        // PyTorch's order: the rank, a negative size, then the dim.
        if let SplitSize::Size(s @ ..=-1) = size {
            return Err(TensorError::value(
                OP,
                format!("split expects a non-negative split size, got {s}"),
            ));
        }
        let d = normalize_dim(OP, dim, self.ndim())?;
        let n = self.shape()[d] as i64;
        let sizes: Vec<i64> = match size {
            SplitSize::Size(s) => {
                if s == 0 && n > 0 {
                    return Err(TensorError::value(
                        OP,
                        format!("split size {s} must be positive for a dim of size {n}"),
                    ));
                }
                if n == 0 {
                    vec![0]
                } else {
                    // ceil(n / s) without the overflow of `n + s - 1`.
                    let k = (n - 1) / s + 1;
                    check_pieces(OP, k)?;
                    (0..k).map(|i| s.min(n - i * s)).collect()
                }
            }
            SplitSize::Sections(v) => {
                // The pieces' count first: 2^26 + 1 zero sizes for an empty
                // dim made as many views (gigabytes of handles).
                check_pieces(OP, i64::try_from(v.len()).unwrap_or(i64::MAX))?;
                if let Some(bad) = v.iter().find(|&&s| s < 0) {
                    return Err(TensorError::value(
                        OP,
                        format!("split sizes must be non-negative, got {bad} in {v:?}"),
                    ));
                }
                let total = v.iter().try_fold(0i64, |a, &s| a.checked_add(s));
                if total != Some(n) {
                    return Err(TensorError::shape(
                        OP,
                        format!("split sizes {v:?} must sum to the dim's size {n}"),
                    ));
                }
                v
            }
        };
        let mut at = 0;
        sizes
            .iter()
            .map(|&len| {
                let piece = self.narrow(d as i64, at, len);
                // The sizes are non-negative and sum to n: no overflow.
                at += len;
                piece
            })
            .collect()
    }

    /// `torch.chunk(self, chunks, dim)`: views of ceil(n / chunks) elements
    /// along `dim` (possibly fewer than `chunks` pieces); a size-0 dim gives
    /// `chunks` empty pieces (at most [`MAX_PIECES`]).
    pub fn chunk(&self, chunks: i64, dim: i64) -> Result<Vec<Tensor>> {
        const OP: &str = "chunk";
        // PyTorch's order: the rank, then the count, then the dim.
        if self.ndim() == 0 {
            return Err(TensorError::shape(
                OP,
                "chunk expects at least a 1-D tensor",
            ));
        }
        if chunks <= 0 {
            return Err(TensorError::value(
                OP,
                format!("chunk expects a positive number of chunks, got {chunks}"),
            ));
        }
        let d = normalize_dim(OP, dim, self.ndim())?;
        let n = self.shape()[d] as i64;
        if n == 0 {
            check_pieces(OP, chunks)?;
            return self.split(SplitSize::Sections(vec![0; chunks as usize]), d as i64);
        }
        // ceil(n / chunks) without the overflow of `n + chunks - 1`.
        self.split((n - 1) / chunks + 1, d as i64)
    }
}
