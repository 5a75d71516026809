//! Indexing ops (issue 12): `index_select`, `gather`, `scatter_add(_)`,
//! `embedding`, `masked_fill(_)`, `masked_select`, `masked_scatter(_)`,
//! `triu`/`tril(_)`.
//!
//! Shapes, dtypes and every index value are checked here, before any kernel
//! runs, so an out-of-range index is a typed [`TensorError::Index`] on every
//! device (on a GPU the check reads the index tensor's minimum and maximum
//! back to the host: one small synchronisation, where PyTorch would trap the
//! whole process with a device-side assert; no read at all when the index's
//! value range is known, see `value_range.rs`). Kernels: [`NnKernel::Gather`]
//! and [`NnKernel::ScatterAdd`]; masked_fill and triu/tril are `where`;
//! masked_select and masked_scatter are a stream compaction (a count pass
//! [`NnKernel::MaskCount`] per chunk, a cumsum of the counts, one read of the
//! total to size the result, and a scatter pass [`NnKernel::MaskCompact`]).

use super::elementwise::{
    check_inplace, check_inplace_early, check_no_overlap, check_no_partial_overlap, launch,
    same_device, Operand,
};
use crate::backend::{Arg, NnKernel, MASK_CHUNK};
use crate::dtype::DType;
use crate::error::{Result, TensorError};
use crate::layout::Layout;
use crate::scalar::Scalar;
use crate::shape::{broadcast_shapes, normalize_dim};
use crate::tensor::Tensor;
use strata_alloc::Device;

/// `t`'s memory seen through `layout` (same storage, same dtype).
pub(crate) fn arg_with(t: &Tensor, layout: Layout) -> Arg<'_> {
    Arg {
        mem: t.storage().mem(),
        layout,
        dtype: t.dtype(),
    }
}

/// An index tensor must be i64 or i32.
fn check_index_dtype(op: &'static str, index: &Tensor) -> Result<()> {
    if matches!(index.dtype(), DType::I64 | DType::I32) {
        Ok(())
    } else {
        Err(TensorError::dtype(
            op,
            format!(
                "the index must be int64 or int32, not {}; convert it with to_dtype(DType::I64)",
                index.dtype()
            ),
        ))
    }
}

/// gather's and scatter_add's index must be int64 or int32 unless it is
/// empty (PyTorch 2.15 accepts an empty index of any dtype there).
fn check_gather_index(op: &'static str, index: &Tensor) -> Result<()> {
    if index.numel() == 0 {
        Ok(())
    } else {
        check_index_dtype(op, index)
    }
}

/// Every value of `index` must lie in `[0, size)` (negative ones do not wrap).
pub(crate) fn check_index_range(op: &'static str, index: &Tensor, size: usize) -> Result<()> {
    if index.numel() == 0 {
        return Ok(());
    }
    if let Some((lo, hi)) = index.known_value_range() {
        // The cached range bounds every value (value_range.rs): no read.
        if lo >= 0 && hi < size as i64 {
            return Ok(());
        }
    }
    let (lo, hi) = read_extremes(index)?;
    if lo < 0 || hi >= size as i64 {
        let bad = if lo < 0 { lo } else { hi };
        return Err(TensorError::index(
            op,
            format!("index {bad} is out of bounds for a dimension of size {size}"),
        ));
    }
    Ok(())
}

/// Every value of an integer `index` in [-size, size) (negative ones count
/// from the end, as `index_put`'s and `index_fill`'s), else PyTorch's error
/// naming dim `dim`.
pub(crate) fn check_signed_index_range(
    op: &'static str,
    index: &Tensor,
    dim: usize,
    size: usize,
) -> Result<()> {
    if index.numel() == 0 {
        return Ok(());
    }
    let (lo, hi) = match index.known_value_range() {
        Some(r) => r,
        None => read_extremes(index)?,
    };
    let n = size as i64;
    if lo < -n || hi >= n {
        let bad = if lo < -n { lo } else { hi };
        return Err(TensorError::index(
            op,
            format!(
                "index {bad} is out of bounds for dimension {dim} with size {size}; an index must lie in [-{size}, {size})"
            ),
        ));
    }
    Ok(())
}

/// The minimum and maximum of a non-empty integer tensor, read back together
/// (one synchronisation on a GPU).
pub(crate) fn read_extremes(t: &Tensor) -> Result<(i64, i64)> {
    let ends = Tensor::stack(&[&t.min()?, &t.max()?], 0)?.to_scalars()?;
    Ok((ends[0].to_i64(), ends[1].to_i64()))
}

/// PyTorch's `ensure_nonempty_dim`: gather and scatter treat a 0-d tensor
/// as a 1-D tensor of one element when they compare ranks and sizes.
fn nonempty_dim(t: &Tensor) -> usize {
    t.ndim().max(1)
}

/// PyTorch's `ensure_nonempty_size`: size `d` of `t`, 1 for a 0-d tensor.
pub(super) fn nonempty_size(t: &Tensor, d: usize) -> usize {
    if t.ndim() == 0 {
        1
    } else {
        t.shape()[d]
    }
}

/// `t` as at least 1-D (a 0-d tensor is viewed as `[1]`).
pub(super) fn at_least_1d(t: &Tensor) -> Result<Tensor> {
    if t.ndim() == 0 {
        t.reshape(&[1])
    } else {
        Ok(t.clone())
    }
}

/// The index and `what` must have the same rank, a 0-d tensor counting as
/// 1-D (PyTorch: a 1-D input takes a 0-d index and the other way round).
fn same_rank(op: &'static str, what: &str, a: &Tensor, b: &Tensor) -> Result<()> {
    if nonempty_dim(a) != nonempty_dim(b) {
        return Err(TensorError::shape(
            op,
            format!(
                "the index has {} dims but {what} has {} (shapes {:?} and {:?}); they must have the same rank (a 0-d tensor counts as 1-D)",
                b.ndim(),
                a.ndim(),
                b.shape(),
                a.shape()
            ),
        ));
    }
    Ok(())
}

impl Tensor {
    /// `torch.index_select(self, dim, index)`: the positions `index` (1-D or
    /// 0-d, i64 or i32, each in `[0, size)`) along `dim`, as a new tensor.
    pub fn index_select(&self, dim: i64, index: &Tensor) -> Result<Tensor> {
        const OP: &str = "index_select";
        same_device(OP, self, index)?;
        // PyTorch's order: the dim, the index's rank, its count for a 0-d
        // input, then its dtype.
        let d = normalize_dim(OP, dim, self.ndim())?;
        if index.ndim() > 1 {
            return Err(TensorError::shape(
                OP,
                format!(
                    "the index must be 1-D or 0-d, got shape {:?}",
                    index.shape()
                ),
            ));
        }
        if self.ndim() == 0 && index.numel() != 1 {
            // PyTorch's check: the result of a 0-d input is 0-d.
            return Err(TensorError::index(
                OP,
                format!(
                    "index_select(): Index to scalar can have only 1 value, got {} value(s)",
                    index.numel()
                ),
            ));
        }
        check_index_dtype(OP, index)?;
        let x = if self.ndim() == 0 {
            self.reshape(&[1])?
        } else {
            self.clone()
        };
        let idx = index.reshape(&[-1])?;
        check_index_range(OP, &idx, x.shape()[d])?;
        let mut shape = x.shape().to_vec();
        shape[d] = idx.numel();
        let out = Tensor::uninit("index_select", &shape, x.dtype(), x.device())?;
        if out.numel() > 0 {
            let mut st = vec![0; shape.len()];
            st[d] = idx.strides()[0];
            let il = Layout {
                shape: shape.clone(),
                strides: st,
                offset: idx.offset(),
            };
            let xl = Layout {
                shape: shape.clone(),
                strides: x.strides().to_vec(),
                offset: x.offset(),
            };
            launch(&out, &[&x, &idx], |be| {
                be.nn(NnKernel::Gather {
                    out: &out.arg(),
                    src: &arg_with(&x, xl),
                    index: &arg_with(&idx, il),
                    dim: d,
                    bound: x.shape()[d],
                })
            })?;
        }
        if self.ndim() == 0 {
            return out.reshape(&[]);
        }
        Ok(out)
    }

    /// `torch.gather(self, dim, index)`: `out[i][j] = self[i][index[i][j]]`
    /// (for dim 1), with index's shape. index (int64 or int32, as in
    /// PyTorch 2.15) has self's rank and is no larger than self on the other
    /// dims; as in PyTorch a 0-d tensor counts as 1-D (a 1-D input and a 0-d
    /// index give a 0-d result), and an empty index is not checked against
    /// self (the result is empty).
    pub fn gather(&self, dim: i64, index: &Tensor) -> Result<Tensor> {
        const OP: &str = "gather";
        same_device(OP, self, index)?;
        // PyTorch's order: the dim, then the index's dtype.
        let d = normalize_dim(OP, dim, self.ndim())?;
        check_gather_index(OP, index)?;
        if index.numel() == 0 {
            // PyTorch checks nothing more for an empty index: the result is
            // empty, of the index's shape, whatever the ranks and sizes.
            return Tensor::uninit("gather", index.shape(), self.dtype(), self.device());
        }
        // As in PyTorch, a 0-d input or index counts as 1-D of one element
        // (a 1-D input gathers a 0-d index into a 0-d result).
        same_rank(OP, "the input", self, index)?;
        // The kernel reads int64 indices.
        let (x, idx) = (
            at_least_1d(self)?,
            at_least_1d(&index.to_dtype_contiguous(DType::I64)?)?,
        );
        for k in 0..x.ndim() {
            if k != d && idx.shape()[k] > x.shape()[k] {
                return Err(TensorError::shape(
                    OP,
                    format!(
                        "index {:?} is larger than the input {:?} at dim {k}",
                        index.shape(),
                        self.shape()
                    ),
                ));
            }
        }
        check_index_range(OP, &idx, x.shape()[d])?;
        let out = Tensor::uninit("gather", idx.shape(), x.dtype(), x.device())?;
        let xl = Layout {
            shape: idx.shape().to_vec(),
            strides: x.strides().to_vec(),
            offset: x.offset(),
        };
        launch(&out, &[&x, &idx], |be| {
            be.nn(NnKernel::Gather {
                out: &out.arg(),
                src: &arg_with(&x, xl),
                index: &idx.arg(),
                dim: d,
                bound: x.shape()[d],
            })
        })?;
        out.reshape(&index.shape().iter().map(|&s| s as i64).collect::<Vec<_>>())
    }

    /// `torch.scatter_add(self, dim, index, src)`: a copy of self to which
    /// `src[i][j]` is added at `[i][index[i][j]]` (dim 1) for every position
    /// of index (int64 or int32, as in PyTorch 2.15). Repeated indices
    /// accumulate. index has the rank of self and of src and is no larger
    /// than src on any dim and than self on the others; as in PyTorch a 0-d
    /// tensor counts as 1-D, and an empty index is not checked (nothing is
    /// added).
    pub fn scatter_add(&self, dim: i64, index: &Tensor, src: &Tensor) -> Result<Tensor> {
        self.scatter_add_checks("scatter_add", dim, index, src)?;
        self.scatter_add_index_range("scatter_add", dim, index)?;
        let out = self.clone_contiguous()?;
        out.scatter_add_impl("scatter_add", dim, index, src)?;
        Ok(out)
    }

    /// In-place [`Tensor::scatter_add`]; self must not alias itself, and
    /// neither `index` nor `src` may share memory with self (PyTorch refuses
    /// both with "some elements of the input tensor and the written-to tensor
    /// refer to a single memory location"): a typed
    /// [`TensorError::Overlap`].
    pub fn scatter_add_(&self, dim: i64, index: &Tensor, src: &Tensor) -> Result<Tensor> {
        self.scatter_add_checks("scatter_add_", dim, index, src)?;
        // PyTorch's order: the checks above, then the memory of self (a
        // stride-0 dim), of index and of src, and last (in its kernel) the
        // range of the indices (fuzz_ops s3400_index_edge_0024: an index
        // of 2^31 - 1 into an expanded self is an overlap error).
        check_inplace_early("scatter_add_", self, &[])?;
        check_no_overlap("scatter_add_", self, &[index, src])?;
        self.scatter_add_index_range("scatter_add_", dim, index)?;
        self.scatter_add_impl("scatter_add_", dim, index, src)?;
        self.bump_version();
        Ok(self.clone())
    }

    fn scatter_add_checks(
        &self,
        op: &'static str,
        dim: i64,
        index: &Tensor,
        src: &Tensor,
    ) -> Result<()> {
        same_device(op, self, index)?;
        same_device(op, self, src)?;
        // PyTorch's order: the dim, then the dtypes, then the shapes.
        let d = normalize_dim(op, dim, self.ndim())?;
        check_gather_index(op, index)?;
        if src.dtype() != self.dtype() {
            return Err(TensorError::dtype(
                op,
                format!(
                    "src is {} but self is {}; they must have the same dtype",
                    src.dtype(),
                    self.dtype()
                ),
            ));
        }
        if index.numel() == 0 {
            // PyTorch checks no rank or size against an empty index.
            return Ok(());
        }
        // As in PyTorch, a 0-d self, index or src counts as 1-D of one
        // element in the ranks and the sizes.
        // PyTorch's scatter_shape_check: self's rank, the sizes against
        // self's, then (when those fit) against src's, dim by dim, reading
        // `src.size(k)` of a src of fewer dims (a dim error once k passes
        // them), and only then src's rank.
        same_rank(op, "self", self, index)?;
        let dims = nonempty_dim(self);
        let mut too_big =
            (0..dims).any(|k| k != d && nonempty_size(index, k) > nonempty_size(self, k));
        if !too_big {
            for k in 0..dims {
                if src.ndim() > 0 && k >= src.ndim() {
                    return Err(TensorError::dim(
                        op,
                        format!(
                            "src {:?} has no dim {k} to compare with the index {:?}",
                            src.shape(),
                            index.shape()
                        ),
                    ));
                }
                if nonempty_size(index, k) > nonempty_size(src, k) {
                    too_big = true;
                    break;
                }
            }
        }
        same_rank(op, "src", src, index)?;
        if too_big {
            return Err(TensorError::shape(
                op,
                format!(
                    "index {:?} must be no larger than src {:?} on every dim and than self {:?} on dims other than {d}",
                    index.shape(),
                    src.shape(),
                    self.shape()
                ),
            ));
        }
        Ok(())
    }

    /// The indices of a checked `scatter_add` are in `[0, size)` along dim.
    fn scatter_add_index_range(&self, op: &'static str, dim: i64, index: &Tensor) -> Result<()> {
        if index.numel() == 0 {
            return Ok(());
        }
        let d = normalize_dim(op, dim, self.ndim())?;
        check_index_range(op, &index.reshape(&[-1])?, nonempty_size(self, d))
    }

    /// The scatter itself (arguments checked).
    fn scatter_add_impl(
        &self,
        op: &'static str,
        dim: i64,
        index: &Tensor,
        src: &Tensor,
    ) -> Result<()> {
        let d = normalize_dim(op, dim, self.ndim())?;
        // `scatter_add_` has refused inputs that share memory with self
        // (`check_no_overlap`), and `scatter_add` writes a fresh copy; what
        // is left is a layout too complex to compare, which `check_inplace`
        // replaces with a copy.
        let mut inputs = [src.clone(), index.clone()];
        check_inplace(op, self, &mut inputs)?;
        let [src, index] = inputs;
        // The kernel reads int64 indices (an int32 index is a fresh copy).
        let index = index.to_dtype_contiguous(DType::I64)?;
        if index.numel() == 0 {
            return Ok(());
        }
        let (this, index, src) = (at_least_1d(self)?, at_least_1d(&index)?, at_least_1d(&src)?);
        // GPUs add with atomics, which exist for f32, f64, i32 and i64:
        // narrower dtypes accumulate in a wider copy there (wrapping and
        // or-ing come back with the narrowing conversion).
        // f16/bf16 accumulate in f32 on every device and round once per
        // element, as PyTorch's CPU kernel does (2048 + 1 + 1 is 2050 in
        // f16, not 2048).
        let wide = match (this.device(), this.dtype()) {
            (_, DType::F16 | DType::BF16) => Some(DType::F32),
            (Device::Cuda(_), DType::U8 | DType::Bool) => Some(DType::I32),
            _ => None,
        };
        let (target, src) = match wide {
            Some(w) => (this.to_dtype_contiguous(w)?, src.to_dtype_contiguous(w)?),
            None => (this.clone(), src),
        };
        let sl = Layout {
            shape: index.shape().to_vec(),
            strides: src.strides().to_vec(),
            offset: src.offset(),
        };
        launch(&target, &[&src, &index], |be| {
            be.nn(NnKernel::ScatterAdd {
                out: &target.arg(),
                index: &index.arg(),
                src: &arg_with(&src, sl),
                dim: d,
                bound: target.shape()[d],
            })
        })?;
        if wide.is_some() {
            this.copy_(&target)?;
        }
        Ok(())
    }

    /// `F.embedding(indices, weight, padding_idx)`: the rows of the 2-D
    /// `weight` (V, D) selected by `indices` (i64 or i32, any shape, each in
    /// `[0, V)`), shaped `indices.shape + [D]`. `padding_idx` must lie in
    /// `[-V, V)` or be 0 (which PyTorch takes even with no row); it only
    /// changes gradients (see strata-autograd).
    pub fn embedding(
        indices: &Tensor,
        weight: &Tensor,
        padding_idx: Option<i64>,
    ) -> Result<Tensor> {
        const OP: &str = "embedding";
        // F.embedding checks padding_idx (against weight.size(0), read only
        // for a nonzero padding_idx) before torch.embedding checks the
        // weight's rank and the indices' dtype: a bad padding_idx is the
        // error, whatever else is wrong.
        if let Some(p) = padding_idx.filter(|&p| p != 0) {
            let Some(&v) = weight.shape().first() else {
                return Err(TensorError::dim(
                    OP,
                    format!("padding_idx {p} reads the size of dim 0 of a 0-d weight"),
                ));
            };
            let v = v as i64;
            // PyTorch checks a positive padding_idx against V and a negative
            // one against -V; 0 is taken as it is, even with no row.
            if (p > 0 && p >= v) || p < -v {
                return Err(TensorError::index(
                    OP,
                    format!("padding_idx {p} must lie in [-{v}, {v})"),
                ));
            }
        }
        if weight.ndim() != 2 {
            return Err(TensorError::shape(
                OP,
                format!(
                    "the weight must be 2-D (V, D), got shape {:?}",
                    weight.shape()
                ),
            ));
        }
        if !matches!(indices.dtype(), DType::I64 | DType::I32) {
            return Err(TensorError::dtype(
                OP,
                format!(
                    "the indices must be int64 or int32, not {}",
                    indices.dtype()
                ),
            ));
        }
        let v = weight.shape()[0] as i64;
        // An index out of range is the caller's embedding error, not an
        // error of the index_select it is computed with.
        let rows = weight
            .index_select(0, &indices.reshape(&[-1])?)
            .map_err(|e| match e {
                TensorError::Index { msg, .. } => TensorError::Index {
                    op: OP,
                    msg: format!("{msg} (the weight has {v} rows)"),
                },
                e => e,
            })?;
        let mut shape: Vec<i64> = indices.shape().iter().map(|&s| s as i64).collect();
        shape.push(weight.shape()[1] as i64);
        rows.reshape(&shape)
    }

    /// The fill value of masked_fill: a scalar, or a 0-d tensor's element,
    /// converted to self's dtype (a value error when out of range).
    fn masked_value(&self, op: &'static str, value: Operand) -> Result<Tensor> {
        check_masked_value_dims(op, &value)?;
        let s = match value {
            Operand::Scalar(s) => s,
            Operand::Tensor(t) => t.to_scalars()?[0],
        };
        crate::ops::checks::check_fits(op, s, self.dtype())?;
        Tensor::scalar(s, self.dtype(), self.device())
    }

    /// `torch.masked_fill(self, mask, value)`: `value` where the bool `mask`
    /// is true, self elsewhere; self and mask broadcast. The value (a scalar
    /// or a 0-d tensor) is converted to self's dtype without promotion.
    pub fn masked_fill<'a>(&self, mask: &Tensor, value: impl Into<Operand<'a>>) -> Result<Tensor> {
        const OP: &str = "masked_fill";
        let value = value.into();
        same_device(OP, self, mask)?;
        // PyTorch 2.15's order (`masked_fill` broadcasts self and the mask,
        // then fills a copy with `masked_fill_`): the broadcast, the value's
        // dims, the mask's dtype, the value's range.
        broadcast_shapes(OP, self.shape(), mask.shape())?;
        check_masked_value_dims(OP, &value)?;
        check_mask(OP, self, mask)?;
        let v = self.masked_value(OP, value)?;
        // Row-major, as PyTorch's (a contiguous clone of the broadcast self,
        // filled in place).
        Tensor::where_impl(mask, Operand::Tensor(&v), Operand::Tensor(self), true)
    }

    /// In-place [`Tensor::masked_fill`]: the mask broadcasts to self's shape.
    /// Allowed on a self whose elements share memory, an expanded one or an
    /// `as_strided` view with small strides (a storage element is filled
    /// when any element addressing it is masked, as in PyTorch). A mask that shares part of self's
    /// memory (not all of it) is a [`TensorError::Overlap`], as in PyTorch.
    pub fn masked_fill_<'a>(&self, mask: &Tensor, value: impl Into<Operand<'a>>) -> Result<Tensor> {
        const OP: &str = "masked_fill_";
        let value = value.into();
        // PyTorch 2.15's order: the value's dims, the mask's dtype, the
        // mask's overlap with self, the broadcast, the value's range.
        check_masked_value_dims(OP, &value)?;
        check_mask(OP, self, mask)?;
        // PyTorch 2.15 refuses a mask that shares part of self's memory
        // ("some elements of the input tensor and the written-to tensor
        // refer to a single memory location"); the mask being self itself
        // (a bool tensor filling where it is true) is fine.
        check_no_partial_overlap(OP, self, mask)?;
        let shape = broadcast_shapes(OP, self.shape(), mask.shape())?;
        if shape != self.shape() {
            return Err(TensorError::InPlaceBroadcast {
                op: OP,
                out: self.shape().to_vec(),
                result: shape,
            });
        }
        let v = self.masked_value(OP, value)?;
        if self.layout().may_overlap() && !self.layout().has_internal_overlap() {
            return self.masked_fill_overlapping(mask, &v);
        }
        // Stride-0 dims alias one element: fill it where any alias is masked.
        let aliased: Vec<i64> = (0..self.ndim())
            .filter(|&d| self.strides()[d] == 0 && self.shape()[d] > 1)
            .map(|d| d as i64)
            .collect();
        let (target, mask) = if aliased.is_empty() {
            (self.clone(), mask.clone())
        } else {
            let m = mask
                .broadcast_to(self.shape())?
                .sum(Some(&aliased), true)?
                .gt(0)?;
            let mut t = self.clone();
            for &d in &aliased {
                t = t.narrow(d, 0, 1)?;
            }
            (t, m)
        };
        let filled = Tensor::where_cond(&mask, &v, &target)?;
        target.copy_(&filled)?;
        if !aliased.is_empty() {
            self.bump_version();
        }
        Ok(self.clone())
    }

    /// `masked_fill_` of a self whose elements share memory other than
    /// through stride-0 dims (an `as_strided` view with strides smaller than
    /// the sizes they skip): PyTorch 2.15 accepts it (it can tell only a
    /// stride 0 from a dense layout) and writes the value through every
    /// masked element, leaving the others untouched, so a storage element is
    /// filled when any element addressing it is masked, whatever the order.
    /// Done on the storage range self covers, which has no aliases: each
    /// element's storage position (an `arange` viewed with self's layout)
    /// is counted where the mask is true.
    fn masked_fill_overlapping(&self, mask: &Tensor, v: &Tensor) -> Result<Tensor> {
        let extent = self.layout().storage_extent();
        let n = i64::try_from(extent).map_err(|_| {
            TensorError::value(
                "masked_fill_",
                format!("storage extent {extent} of the output does not fit an i64"),
            )
        })?;
        let positions = Tensor::arange(0i64, n, 1i64, Some(DType::I64), self.device())?;
        let sizes: Vec<i64> = self.shape().iter().map(|&s| s as i64).collect();
        let strides: Vec<i64> = self.strides().iter().map(|&s| s as i64).collect();
        let at = positions.as_strided(&sizes, &strides, Some(self.offset() as i64))?;
        let mask = mask
            .broadcast_to(self.shape())?
            .to_dtype_contiguous(DType::I64)?;
        let hits = Tensor::zeros(&[extent], DType::I64, self.device())?.scatter_add(
            0,
            &at.reshape(&[-1])?,
            &mask.reshape(&[-1])?,
        )?;
        let flat = self.as_strided(&[n], &[1], Some(0))?;
        let filled = Tensor::where_cond(&hits.gt(0)?, v, &flat)?;
        flat.copy_(&filled)?;
        self.bump_version();
        Ok(self.clone())
    }

    /// `torch.masked_select(self, mask)`: the elements of self where the bool
    /// `mask` is true, as a new 1-D tensor in row-major order. self and mask
    /// broadcast to a common shape first (an element of an expanded self
    /// appears once per selected alias). On a GPU the result's size costs
    /// one read of the count back to the host, as in PyTorch.
    ///
    /// ```
    /// use strata_tensor::{Tensor, Device};
    /// let x = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[2, 2], Device::Cpu).unwrap();
    /// let m = Tensor::from_slice(&[true, false], &[2], Device::Cpu).unwrap();
    /// let y = x.masked_select(&m).unwrap();
    /// assert_eq!(y.to_vec::<f32>().unwrap(), vec![1.0, 3.0]);
    /// ```
    pub fn masked_select(&self, mask: &Tensor) -> Result<Tensor> {
        const OP: &str = "masked_select";
        check_mask(OP, self, mask)?;
        let shape = broadcast_shapes(OP, self.shape(), mask.shape())?;
        let x = self.broadcast_to(&shape)?.contiguous()?;
        let m = mask.broadcast_to(&shape)?.contiguous()?;
        let (count, offsets) = mask_offsets(&m)?;
        let out = Tensor::uninit("masked_select", &[count], x.dtype(), x.device())?;
        if count > 0 {
            launch(&out, &[&x, &m, &offsets], |be| {
                be.nn(NnKernel::MaskCompact {
                    out: &out.arg(),
                    src: &x.arg(),
                    mask: &m.arg(),
                    offsets: &offsets.arg(),
                    n: m.numel(),
                    expand: false,
                })
            })?;
        }
        Ok(out)
    }

    /// `torch.masked_scatter(self, mask, source)`: a copy of self (broadcast
    /// with the bool `mask`) whose positions where the mask is true take
    /// `source`'s elements in row-major order, one after the other. `source`
    /// (any shape, self's dtype) needs at least as many elements as the mask
    /// has set positions.
    ///
    /// ```
    /// use strata_tensor::{Tensor, Device};
    /// let x = Tensor::zeros(&[4], strata_tensor::DType::F32, Device::Cpu).unwrap();
    /// let m = Tensor::from_slice(&[false, true, false, true], &[4], Device::Cpu).unwrap();
    /// let s = Tensor::from_slice(&[5.0f32, 6.0, 7.0], &[3], Device::Cpu).unwrap();
    /// let y = x.masked_scatter(&m, &s).unwrap();
    /// assert_eq!(y.to_vec::<f32>().unwrap(), vec![0.0, 5.0, 0.0, 6.0]);
    /// ```
    pub fn masked_scatter(&self, mask: &Tensor, source: &Tensor) -> Result<Tensor> {
        const OP: &str = "masked_scatter";
        same_device(OP, self, mask)?;
        same_device(OP, self, source)?;
        // PyTorch 2.15's order (`masked_scatter` broadcasts self and the
        // mask, then runs `masked_scatter_` on the copy): the broadcast,
        // then the source's dtype, then the mask's (a non-bool mask that
        // does not broadcast is a broadcast error there).
        let shape = broadcast_shapes(OP, self.shape(), mask.shape())?;
        check_source_dtype(OP, self, source)?;
        check_mask(OP, self, mask)?;
        let out = self.broadcast_to(&shape)?.clone_contiguous()?;
        let m = mask.broadcast_to(&shape)?.contiguous()?;
        let (count, offsets) = mask_offsets(&m)?;
        if count > source.numel() {
            return Err(TensorError::shape(
                OP,
                format!(
                    "the mask selects {count} elements but source {:?} has only {}",
                    source.shape(),
                    source.numel()
                ),
            ));
        }
        if count > 0 {
            let src = source.reshape(&[-1])?.contiguous()?;
            launch(&out, &[&src, &m, &offsets], |be| {
                be.nn(NnKernel::MaskCompact {
                    out: &out.arg(),
                    src: &src.arg(),
                    mask: &m.arg(),
                    offsets: &offsets.arg(),
                    n: m.numel(),
                    expand: true,
                })
            })?;
        }
        Ok(out)
    }

    /// In-place [`Tensor::masked_scatter`] (`Tensor.masked_scatter_`): the
    /// mask broadcasts to self's shape (a mask that would enlarge self is a
    /// broadcast error); the set positions of self, in row-major order, take
    /// `source`'s first elements. Written through `copy_`, so views of self
    /// see it and the version counter moves.
    ///
    /// A `source` that shares self's memory (wholly or in part), or a mask
    /// that shares part of it, is a [`TensorError::Overlap`]: PyTorch 2.15's
    /// CPU loop reads such a source after writing through it, so its answer
    /// is an artefact of that loop's order (`x.masked_scatter_(m, x)` with
    /// `m = [F, T, T, F, T, T]` on `arange(6.)` gives `[0, 0, 0, 3, 0, 3]`),
    /// one no parallel kernel reproduces; clone the source first.
    pub fn masked_scatter_(&self, mask: &Tensor, source: &Tensor) -> Result<Tensor> {
        const OP: &str = "masked_scatter_";
        same_device(OP, self, mask)?;
        // Before any work, naming this op (not the final `copy_`).
        check_inplace(OP, self, &mut [])?;
        // PyTorch 2.15's order: self's own overlap, the source's dtype, the
        // mask's broadcast to self, then the mask's dtype (a non-bool mask
        // that does not broadcast is a broadcast error there).
        check_source_dtype(OP, self, source)?;
        let shape = broadcast_shapes(OP, self.shape(), mask.shape())?;
        if shape != self.shape() {
            return Err(TensorError::InPlaceBroadcast {
                op: OP,
                out: self.shape().to_vec(),
                result: shape,
            });
        }
        check_mask(OP, self, mask)?;
        // strata's own refusals (PyTorch accepts these overlaps and its
        // answer depends on its loop order), after PyTorch's checks.
        check_no_overlap(OP, self, &[source])?;
        check_no_partial_overlap(OP, self, mask)?;
        let scattered = self.masked_scatter(mask, source)?;
        self.copy_(&scattered)
    }

    /// `torch.triu(self, diagonal)`: in each matrix of the last two dims,
    /// the elements with `col - row >= diagonal`, zeros elsewhere.
    pub fn triu(&self, diagonal: i64) -> Result<Tensor> {
        self.triangle("triu", diagonal, true)
    }

    /// `torch.tril(self, diagonal)`: the elements with `col - row <= diagonal`.
    pub fn tril(&self, diagonal: i64) -> Result<Tensor> {
        self.triangle("tril", diagonal, false)
    }

    /// In-place [`Tensor::triu`]. As in PyTorch, also on a tensor whose
    /// elements share memory (an expanded one): an element is zeroed when
    /// any of the positions that share it lies below the triangle.
    pub fn triu_(&self, diagonal: i64) -> Result<Tensor> {
        if self.layout().may_overlap() {
            return self.zero_outside_triangle("triu_", diagonal, true);
        }
        check_inplace("triu_", self, &mut [])?;
        let t = self.triangle("triu_", diagonal, true)?;
        self.copy_(&t)
    }

    /// In-place [`Tensor::tril`]. As in PyTorch, also on a tensor whose
    /// elements share memory (an expanded one): an element is zeroed when
    /// any of the positions that share it lies above the triangle.
    pub fn tril_(&self, diagonal: i64) -> Result<Tensor> {
        if self.layout().may_overlap() {
            return self.zero_outside_triangle("tril_", diagonal, false);
        }
        check_inplace("tril_", self, &mut [])?;
        let t = self.triangle("tril_", diagonal, false)?;
        self.copy_(&t)
    }

    /// `tril_`/`triu_` of a tensor whose elements may share memory: zeros
    /// written where the positions outside the triangle are, nothing
    /// written inside it (PyTorch's in-place kernel writes only those
    /// zeros, so an element shared by a position inside and one outside
    /// ends zero; copying a computed triangle back, as for other tensors,
    /// would make the result depend on the order of the writes).
    fn zero_outside_triangle(
        &self,
        op: &'static str,
        diagonal: i64,
        upper: bool,
    ) -> Result<Tensor> {
        let n = self.matrix_dims(op)?;
        // Outside triu(k): col - row < k, i.e. tril(k - 1); outside
        // tril(k): col - row > k, i.e. triu(k + 1). Nothing lies outside
        // past the ends of i64.
        let outside = if upper {
            diagonal.checked_sub(1)
        } else {
            diagonal.checked_add(1)
        };
        let Some(outside) = outside.filter(|_| self.numel() > 0) else {
            self.bump_version();
            return Ok(self.clone());
        };
        let mask = Tensor::triangle_mask(
            self.shape()[n - 2],
            self.shape()[n - 1],
            outside,
            !upper,
            self.device(),
        )?;
        self.masked_fill_(&mask, Scalar::Int(0))
    }

    /// The number of dims of a triangle op's input: at least 2 (the last two
    /// are the matrix).
    fn matrix_dims(&self, op: &'static str) -> Result<usize> {
        let n = self.ndim();
        if n < 2 {
            return Err(TensorError::shape(
                op,
                format!(
                    "the input must have at least 2 dims, got shape {:?}",
                    self.shape()
                ),
            ));
        }
        Ok(n)
    }

    /// The bool mask `[rows, cols]` of triu (upper) or tril on `device`.
    pub(crate) fn triangle_mask(
        rows: usize,
        cols: usize,
        diagonal: i64,
        upper: bool,
        device: Device,
    ) -> Result<Tensor> {
        let r = Tensor::arange(
            Scalar::Int(0),
            Scalar::Int(rows as i64),
            Scalar::Int(1),
            Some(DType::I64),
            device,
        )?
        .reshape(&[-1, 1])?;
        let c = Tensor::arange(
            Scalar::Int(0),
            Scalar::Int(cols as i64),
            Scalar::Int(1),
            Some(DType::I64),
            device,
        )?
        .reshape(&[1, -1])?;
        let d = c.sub(&r)?;
        if upper {
            d.ge(diagonal)
        } else {
            d.le(diagonal)
        }
    }

    fn triangle(&self, op: &'static str, diagonal: i64, upper: bool) -> Result<Tensor> {
        let n = self.matrix_dims(op)?;
        if self.numel() == 0 {
            // Nothing to keep or zero: no mask (whose rows or columns alone
            // could be a huge allocation for a [2^40, 0] input).
            return Tensor::uninit(op, self.shape(), self.dtype(), self.device());
        }
        let keep = Tensor::triangle_mask(
            self.shape()[n - 2],
            self.shape()[n - 1],
            diagonal,
            upper,
            self.device(),
        )?;
        let zero = Tensor::zeros(&[], self.dtype(), self.device())?;
        // Row-major, as PyTorch's (`empty_like` in the contiguous format).
        Tensor::where_impl(&keep, Operand::Tensor(self), Operand::Tensor(&zero), true)
    }
}

/// The count and scan passes of a stream compaction over the contiguous
/// bool `mask`: the number of set elements (one read to the host) and the
/// inclusive sums of the per-chunk counts (i64, one per [`MASK_CHUNK`]).
pub(crate) fn mask_offsets(mask: &Tensor) -> Result<(usize, Tensor)> {
    let n = mask.numel();
    let blocks = n.div_ceil(MASK_CHUNK);
    let counts = Tensor::uninit("masked_select", &[blocks], DType::I64, mask.device())?;
    if n == 0 {
        return Ok((0, counts));
    }
    launch(&counts, &[mask], |be| {
        be.nn(NnKernel::MaskCount {
            counts: &counts.arg(),
            mask: &mask.arg(),
            n,
        })
    })?;
    let offsets = counts.cumsum(0, None)?;
    let total = offsets.narrow(0, blocks as i64 - 1, 1)?.to_scalars()?[0].to_i64();
    Ok((total as usize, offsets))
}

fn check_mask(op: &'static str, x: &Tensor, mask: &Tensor) -> Result<()> {
    same_device(op, x, mask)?;
    if mask.dtype() != DType::Bool {
        return Err(TensorError::dtype(
            op,
            format!(
                "the mask must be bool, not {}; compare to get one (mask.ne(0))",
                mask.dtype()
            ),
        ));
    }
    Ok(())
}

/// masked_fill's rule for a tensor value: it has no dims.
fn check_masked_value_dims(op: &'static str, value: &Operand) -> Result<()> {
    match value {
        Operand::Tensor(t) if t.ndim() != 0 => Err(TensorError::shape(
            op,
            format!(
                "the value must be a scalar or a 0-d tensor, got shape {:?}",
                t.shape()
            ),
        )),
        _ => Ok(()),
    }
}

/// masked_scatter's rule: the source has self's dtype.
fn check_source_dtype(op: &'static str, this: &Tensor, source: &Tensor) -> Result<()> {
    if source.dtype() != this.dtype() {
        return Err(TensorError::dtype(
            op,
            format!(
                "source is {} but self is {}; they must have the same dtype",
                source.dtype(),
                this.dtype()
            ),
        ));
    }
    Ok(())
}

impl Tensor {
    /// `F.one_hot(self, num_classes)` of an i64 tensor of class indices: a
    /// new last dim of `num_classes` (`None`: the largest index + 1, as
    /// PyTorch's -1), 1 at each index and 0 elsewhere, i64. A negative
    /// index, one at or past `num_classes`, another dtype, or an empty
    /// input without `num_classes` is a typed error.
    ///
    /// ```
    /// use strata_tensor::{Device, Tensor};
    /// let t = Tensor::from_slice(&[2i64, 0], &[2], Device::Cpu)?;
    /// assert_eq!(t.one_hot(Some(3))?.to_vec::<i64>()?, [0, 0, 1, 1, 0, 0]);
    /// assert!(t.one_hot(Some(2)).is_err());
    /// # Ok::<(), strata_tensor::TensorError>(())
    /// ```
    pub fn one_hot(&self, num_classes: Option<usize>) -> Result<Tensor> {
        const OP: &str = "one_hot";
        if self.dtype() != DType::I64 {
            return Err(TensorError::dtype(
                OP,
                format!(
                    "one_hot takes an i64 tensor of class indices, got {:?}",
                    self.dtype()
                ),
            ));
        }
        let (lo, hi) = if self.numel() == 0 {
            (0, -1)
        } else {
            (self.min()?.item::<i64>()?, self.max()?.item::<i64>()?)
        };
        let classes = match num_classes {
            // PyTorch infers nothing from an empty tensor, and takes 0 for
            // "infer" there.
            Some(n) if n > 0 || self.numel() > 0 => n,
            _ if self.numel() == 0 => {
                return Err(TensorError::value(
                    OP,
                    "cannot infer the number of classes from an empty tensor; give num_classes",
                ))
            }
            _ => (hi.max(-1) + 1) as usize,
        };
        if lo < 0 {
            return Err(TensorError::value(
                OP,
                format!("class values must be non-negative, got {lo}"),
            ));
        }
        if hi >= 0 && hi as u64 >= classes as u64 {
            return Err(TensorError::value(
                OP,
                format!("class values must be smaller than num_classes ({classes}), got {hi}"),
            ));
        }
        let mut shape = self.shape().to_vec();
        shape.push(classes);
        crate::shape::checked_numel(OP, &shape)?;
        let out = Tensor::zeros(&shape, DType::I64, self.device())?;
        if self.numel() == 0 || classes == 0 {
            return Ok(out);
        }
        out.scatter_value(-1, &self.unsqueeze(-1)?, 1i64)
    }
}
