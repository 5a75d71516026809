//! Scans, any/all, nonzero, and the index and scatter family (session 60):
//! `cumprod`, `cummax`/`cummin`, `logcumsumexp`, `any`/`all` (whole and
//! along a dim), `count_nonzero`, `nonzero`/`argwhere`, `index_add(_)`,
//! `index_copy(_)`, `index_fill(_)`, `scatter(_)`, `scatter_value(_)`,
//! `scatter_reduce(_)` and `index_put(_)`.
//!
//! The scans take the path of `cumsum` (`ops/softmax.rs`): the input made
//! contiguous, seen as `outer x n x inner` ([`DimShape`]), one pass per line
//! ([`ScatterKernel::Scan`]). Every scatter-like op is one
//! [`ScatterKernel::Scatter`] over a set of positions whose index tensor
//! and source are laid out (broadcast with stride 0 where they repeat) to
//! the positions' shape: `index_add`, `index_copy` and `index_fill` see their
//! 1-D index broadcast across the other dims, `index_put` a precomputed
//! element offset. Every index is checked before any kernel runs (typed
//! [`TensorError::Index`], nothing written), as `scatter_add` does
//! (`ops/index.rs`; no device read where the index's value range is known,
//! `value_range.rs`). On the CPU the positions are visited in row-major
//! order, one after the other, in the dtype: duplicates accumulate in
//! PyTorch's CPU order and with its rounding, and for non-reducing scatters
//! the last duplicate wins. On a GPU reductions are atomic (f16/bf16 in an
//! f32 copy, u8/bool in an i32 copy), so float sums of duplicates may round
//! differently, and which duplicate a non-reducing scatter keeps is
//! unspecified (as in PyTorch).
//!
//! `any`, `all`, `count_nonzero` are a comparison with 0 and a sum;
//! `nonzero` is `masked_select`'s stream compaction (one read of the count
//! back to the host, as in PyTorch) of the flat positions, split into
//! coordinates by integer division.

use super::elementwise::{
    check_inplace, check_no_overlap, launch, overlap, same_device, Overlap, RoundingMode,
};
use super::index::{
    arg_with, at_least_1d, check_index_range, check_signed_index_range, mask_offsets, nonempty_size,
};
use crate::backend::{Arg, DimShape, NnKernel};
use crate::dtype::DType;
use crate::error::{Result, TensorError};
use crate::layout::Layout;
use crate::scalar::Scalar;
use crate::shape::{broadcast_shapes, normalize_dim};
use crate::storage::AccessGuard;
use crate::tensor::Tensor;
use strata_alloc::Device;

/// The scans along one dim.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ScanOp {
    /// Running product (`cumprod`).
    Prod,
    /// Running maximum with its index (`cummax`).
    Max,
    /// Running minimum with its index (`cummin`).
    Min,
    /// Running `log(sum(exp))` (`logcumsumexp`).
    LogSumExp,
}

/// How a scatter combines a source element with the element it lands on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Combine {
    /// Overwrite.
    Assign,
    /// Add (bool ors, integers wrap).
    Sum,
    /// Multiply (bool ands, integers wrap).
    Prod,
    /// PyTorch's scatter `amax`: a NaN source wins, a NaN target stays.
    Max,
    /// PyTorch's scatter `amin`.
    Min,
}

/// The reduction of [`Tensor::scatter_reduce`] (PyTorch's `reduce` string).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScatterReduce {
    /// `"sum"`.
    Sum,
    /// `"prod"`.
    Prod,
    /// `"mean"` (integers: floor division by the count).
    Mean,
    /// `"amax"` (NaN propagates).
    Amax,
    /// `"amin"` (NaN propagates).
    Amin,
}

/// The kernels of this module, handed to [`Backend::scatter_ops`](crate::backend::Backend::scatter_ops).
pub(crate) enum ScatterKernel<'a> {
    /// Inclusive scan along the `n` dim of `s` of the contiguous `input`
    /// into the contiguous `out` (same dtype); `indices` (contiguous i64,
    /// for Max/Min only) receives the position along `n` of each running
    /// extremum: the latest among ties, the latest NaN once one was seen
    /// (PyTorch's `cummax`/`cummin`). Prod: integers wrap, floats keep the
    /// product in the CPU's `acc_type` (f64 for f32 and f64, f32 for
    /// f16/bf16; on a GPU f32 for f32). LogSumExp (floats only) combines as
    /// PyTorch's `_log_add_exp_helper`, in the same types.
    Scan {
        op: ScanOp,
        out: &'a Arg<'a>,
        indices: Option<&'a Arg<'a>>,
        input: &'a Arg<'a>,
        s: DimShape,
    },
    /// For every position `p` of `index`'s shape: `out[p with dim replaced
    /// by index[p]] = combine(that, src[p])`. `index` (i64 or i32) and
    /// `src` (out's dtype) are laid out with index's shape (stride 0 where
    /// broadcast); `out` has no internal overlap. An index outside
    /// `[0, bound)` (which the tensor layer excludes) writes nothing. The CPU
    /// visits the positions in row-major order; GPUs receive Sum/Prod/Max/Min
    /// only for f32, f64, i32 and i64 outputs (the caller widens the others).
    Scatter {
        combine: Combine,
        out: &'a Arg<'a>,
        index: &'a Arg<'a>,
        src: &'a Arg<'a>,
        dim: usize,
        bound: usize,
    },
}

/// Runs one of this module's kernels on `out`'s device with the storages
/// locked (`out` written, `reads` read).
fn run(out: &Tensor, reads: &[&Tensor], k: ScatterKernel<'_>) -> Result<()> {
    let be = out.backend()?;
    let st: Vec<&crate::storage::Storage> = reads.iter().map(|t| t.storage()).collect();
    let _g = AccessGuard::lock(Some(out.storage()), &st);
    be.scatter_ops(k)
}

/// The dtype a GPU scatter of `combine` into `d` runs in (atomics exist for
/// f32, f64, i32 and i64 only), `None` when `d` itself.
fn wide_dtype(device: Device, d: DType, combine: Combine) -> Option<DType> {
    match (device, combine, d) {
        (Device::Cpu, ..) | (_, Combine::Assign, _) => None,
        (_, _, DType::F16 | DType::BF16) => Some(DType::F32),
        (_, _, DType::U8 | DType::Bool) => Some(DType::I32),
        _ => None,
    }
}

/// The index tensor of the `index_*` ops: 1-D or 0-d (PyTorch's message).
fn check_vector_index(op: &'static str, index: &Tensor) -> Result<()> {
    if index.ndim() > 1 {
        return Err(TensorError::index(
            op,
            format!(
                "the index is supposed to be a vector (1-D or 0-d), got shape {:?}",
                index.shape()
            ),
        ));
    }
    Ok(())
}

/// An index that must be int64 (`index_copy`, `index_fill`).
fn check_long_index(op: &'static str, index: &Tensor) -> Result<()> {
    if index.dtype() != DType::I64 {
        return Err(TensorError::dtype(
            op,
            format!(
                "the index must be int64, not {}; convert it with to_dtype(DType::I64)",
                index.dtype()
            ),
        ));
    }
    Ok(())
}

/// An index that must be int64 or int32.
fn check_int_index(op: &'static str, index: &Tensor) -> Result<()> {
    if !matches!(index.dtype(), DType::I64 | DType::I32) {
        return Err(TensorError::dtype(
            op,
            format!(
                "the index must be int64 or int32, not {}; convert it with to_dtype(DType::I64)",
                index.dtype()
            ),
        ));
    }
    Ok(())
}

fn same_dtype(op: &'static str, what: &str, this: &Tensor, other: &Tensor) -> Result<()> {
    if this.dtype() != other.dtype() {
        return Err(TensorError::dtype(
            op,
            format!(
                "{what} is {} but self is {}; they must have the same dtype",
                other.dtype(),
                this.dtype()
            ),
        ));
    }
    Ok(())
}

impl Tensor {
    /// `torch.cumprod(self, dim, dtype)`: inclusive running products along
    /// `dim`. Without a dtype integer and bool inputs give i64; with one the
    /// input is converted first (integer products wrap). f32 multiplies in
    /// f64 on the CPU (PyTorch's CPU kernel), f16/bf16 in f32. A bool dtype
    /// is an error except for a 0-d or empty input (as in PyTorch); a 0-d
    /// input's result is the input itself, converted.
    ///
    /// ```
    /// use strata_tensor::{Tensor, Device, DType};
    /// let x = Tensor::from_slice(&[1i32, 2, 3, 4], &[4], Device::Cpu).unwrap();
    /// let c = x.cumprod(0, None).unwrap();
    /// assert_eq!(c.dtype(), DType::I64);
    /// assert_eq!(c.to_vec::<i64>().unwrap(), vec![1, 2, 6, 24]);
    /// ```
    pub fn cumprod(&self, dim: i64, dtype: Option<DType>) -> Result<Tensor> {
        const OP: &str = "cumprod";
        let d = normalize_dim(OP, dim, self.ndim())?;
        let target = match dtype {
            Some(DType::Bool) if self.ndim() > 0 && self.numel() > 0 => {
                return Err(TensorError::dtype(
                    OP,
                    "a bool dtype is not supported; use an integer or float dtype",
                ))
            }
            Some(t) => t,
            None if self.dtype().is_float() => self.dtype(),
            None => DType::I64,
        };
        let out = Tensor::uninit(OP, self.shape(), target, self.device())?;
        if target == DType::Bool || self.ndim() == 0 {
            if self.numel() > 0 {
                out.copy_(self)?;
            }
            return Ok(out);
        }
        let x = self.to_dtype_contiguous(target)?.contiguous()?;
        scan(ScanOp::Prod, &out, None, &x, d)?;
        Ok(out)
    }

    /// `torch.cummax(self, dim)`: the running maximum along `dim` and, as
    /// i64, the position it was taken from. Among equal values the latest
    /// position is reported (`-0.0` and `0.0` are equal); a NaN, once seen,
    /// is the maximum from then on, reported at the latest NaN. Every dtype;
    /// a 0-d input gives itself and index 0.
    ///
    /// ```
    /// use strata_tensor::{Tensor, Device};
    /// let x = Tensor::from_slice(&[1.0f32, 3.0, 2.0, 3.0], &[4], Device::Cpu).unwrap();
    /// let (v, i) = x.cummax(0).unwrap();
    /// assert_eq!(v.to_vec::<f32>().unwrap(), vec![1.0, 3.0, 3.0, 3.0]);
    /// assert_eq!(i.to_vec::<i64>().unwrap(), vec![0, 1, 1, 3]);
    /// ```
    pub fn cummax(&self, dim: i64) -> Result<(Tensor, Tensor)> {
        self.cum_extremum("cummax", dim, ScanOp::Max)
    }

    /// `torch.cummin(self, dim)`: [`Tensor::cummax`] for the minimum.
    ///
    /// ```
    /// use strata_tensor::{Tensor, Device};
    /// let x = Tensor::from_slice(&[3i64, 1, 2, 1], &[4], Device::Cpu).unwrap();
    /// let (v, i) = x.cummin(0).unwrap();
    /// assert_eq!(v.to_vec::<i64>().unwrap(), vec![3, 1, 1, 1]);
    /// assert_eq!(i.to_vec::<i64>().unwrap(), vec![0, 1, 1, 3]);
    /// ```
    pub fn cummin(&self, dim: i64) -> Result<(Tensor, Tensor)> {
        self.cum_extremum("cummin", dim, ScanOp::Min)
    }

    fn cum_extremum(
        &self,
        op: &'static str,
        dim: i64,
        scan_op: ScanOp,
    ) -> Result<(Tensor, Tensor)> {
        let d = normalize_dim(op, dim, self.ndim())?;
        let values = Tensor::uninit(op, self.shape(), self.dtype(), self.device())?;
        let indices = Tensor::uninit(op, self.shape(), DType::I64, self.device())?;
        if self.ndim() == 0 {
            values.copy_(self)?;
            indices.fill_(0)?;
        } else if self.numel() > 0 {
            let x = self.contiguous()?;
            scan(scan_op, &values, Some(&indices), &x, d)?;
        }
        Ok((values, indices))
    }

    /// `torch.logcumsumexp(self, dim)`: `log(cumsum(exp(self)))` along
    /// `dim`, computed stably (each step `log1p(exp(min - max)) + max`, as
    /// PyTorch's kernel: -inf steps leave the sum, +inf makes it +inf, NaN
    /// propagates). Float dtypes only; f32 in f64 on the CPU, f16/bf16 in
    /// f32.
    ///
    /// ```
    /// use strata_tensor::{Tensor, Device};
    /// let x = Tensor::from_slice(&[0.0f64, 0.0], &[2], Device::Cpu).unwrap();
    /// let y = x.logcumsumexp(0).unwrap().to_vec::<f64>().unwrap();
    /// assert_eq!(y, vec![0.0, 2f64.ln()]);
    /// ```
    pub fn logcumsumexp(&self, dim: i64) -> Result<Tensor> {
        const OP: &str = "logcumsumexp";
        let d = normalize_dim(OP, dim, self.ndim())?;
        if !self.dtype().is_float() {
            return Err(TensorError::dtype(
                OP,
                format!(
                    "not implemented for {}; convert to a float dtype first",
                    self.dtype()
                ),
            ));
        }
        let out = Tensor::uninit(OP, self.shape(), self.dtype(), self.device())?;
        if self.ndim() == 0 {
            out.copy_(self)?;
            return Ok(out);
        }
        if self.numel() > 0 {
            let x = self.contiguous()?;
            scan(ScanOp::LogSumExp, &out, None, &x, d)?;
        }
        Ok(out)
    }

    /// `torch.any(self)`: whether any element is nonzero (NaN counts as
    /// nonzero), as a 0-d bool tensor (u8 for a u8 input, as in PyTorch);
    /// false for an empty tensor.
    ///
    /// ```
    /// use strata_tensor::{Tensor, Device};
    /// let x = Tensor::from_slice(&[0.0f32, f32::NAN], &[2], Device::Cpu).unwrap();
    /// assert!(x.any().unwrap().item::<bool>().unwrap());
    /// ```
    pub fn any(&self) -> Result<Tensor> {
        self.any_all(None, false, true)
    }

    /// `torch.any(self, dim, keepdim)`: [`Tensor::any`] along one dim.
    ///
    /// ```
    /// use strata_tensor::{Tensor, Device};
    /// let x = Tensor::from_slice(&[0i64, 0, 0, 5], &[2, 2], Device::Cpu).unwrap();
    /// assert_eq!(x.any_dim(1, false).unwrap().to_vec::<bool>().unwrap(), vec![false, true]);
    /// ```
    pub fn any_dim(&self, dim: i64, keepdim: bool) -> Result<Tensor> {
        self.any_all(Some(dim), keepdim, true)
    }

    /// `torch.all(self)`: whether every element is nonzero (NaN counts as
    /// nonzero), a 0-d bool (u8 for a u8 input); true for an empty tensor.
    ///
    /// ```
    /// use strata_tensor::{Tensor, Device};
    /// let x = Tensor::from_slice(&[1.0f32, f32::NAN], &[2], Device::Cpu).unwrap();
    /// assert!(x.all().unwrap().item::<bool>().unwrap());
    /// ```
    pub fn all(&self) -> Result<Tensor> {
        self.any_all(None, false, false)
    }

    /// `torch.all(self, dim, keepdim)`: [`Tensor::all`] along one dim.
    ///
    /// ```
    /// use strata_tensor::{Tensor, Device};
    /// let x = Tensor::from_slice(&[1i64, 0, 2, 5], &[2, 2], Device::Cpu).unwrap();
    /// assert_eq!(x.all_dim(1, false).unwrap().to_vec::<bool>().unwrap(), vec![false, true]);
    /// ```
    pub fn all_dim(&self, dim: i64, keepdim: bool) -> Result<Tensor> {
        self.any_all(Some(dim), keepdim, false)
    }

    fn any_all(&self, dim: Option<i64>, keepdim: bool, any: bool) -> Result<Tensor> {
        let op = match (any, dim) {
            (true, None) => "any",
            (true, Some(_)) => "any_dim",
            (false, None) => "all",
            (false, Some(_)) => "all_dim",
        };
        let dims = match dim {
            Some(d) => {
                normalize_dim(op, d, self.ndim())?;
                Some([d])
            }
            None => None,
        };
        let hits = if any { self.ne(0)? } else { self.eq(0)? };
        let count = hits.sum(dims.as_ref().map(|d| &d[..]), keepdim)?;
        let r = if any { count.gt(0)? } else { count.eq(0)? };
        if self.dtype() == DType::U8 {
            r.to_dtype(DType::U8)
        } else {
            Ok(r)
        }
    }

    /// `torch.count_nonzero(self, dims)`: the number of nonzero elements
    /// (NaN counts) over `dims` (all dims for `None` or an empty list, as
    /// PyTorch), as i64. A dim given twice is an error.
    ///
    /// ```
    /// use strata_tensor::{Tensor, Device};
    /// let x = Tensor::from_slice(&[0.0f32, 1.0, 2.0, 0.0], &[2, 2], Device::Cpu).unwrap();
    /// assert_eq!(x.count_nonzero(Some(&[0])).unwrap().to_vec::<i64>().unwrap(), vec![1, 1]);
    /// assert_eq!(x.count_nonzero(None).unwrap().item::<i64>().unwrap(), 2);
    /// ```
    pub fn count_nonzero(&self, dims: Option<&[i64]>) -> Result<Tensor> {
        const OP: &str = "count_nonzero";
        if let Some(ds) = dims {
            let mut seen = Vec::with_capacity(ds.len());
            for &d in ds {
                let n = normalize_dim(OP, d, self.ndim())?;
                if seen.contains(&n) {
                    return Err(TensorError::dim(
                        OP,
                        format!("dim {n} appears multiple times in the list of dims {ds:?}"),
                    ));
                }
                seen.push(n);
            }
        }
        // An empty dim list reduces every dim, as `None` does (PyTorch 2.15:
        // `torch.count_nonzero(x, [])` is the count over all of `x`).
        self.ne(0)?.sum(dims.filter(|d| !d.is_empty()), false)
    }

    /// `torch.nonzero(self)`: the coordinates of the nonzero elements (NaN
    /// counts) in row-major order, an i64 tensor `[n, ndim]` (laid out as
    /// PyTorch's, column-major: strides `[1, n]`). A 0-d input gives
    /// `[1, 0]` or `[0, 0]`. On a GPU `n` costs one read back to the host,
    /// as in PyTorch.
    ///
    /// ```
    /// use strata_tensor::{Tensor, Device};
    /// let x = Tensor::from_slice(&[0i64, 1, 2, 0], &[2, 2], Device::Cpu).unwrap();
    /// let nz = x.nonzero().unwrap();
    /// assert_eq!(nz.shape(), &[2, 2]);
    /// assert_eq!(nz.contiguous().unwrap().to_vec::<i64>().unwrap(), vec![0, 1, 1, 0]);
    /// ```
    pub fn nonzero(&self) -> Result<Tensor> {
        const OP: &str = "nonzero";
        let mask = self.ne(0)?.contiguous()?;
        let (count, offsets) = mask_offsets(&mask)?;
        let n = mask.numel();
        let flat = Tensor::uninit(OP, &[count], DType::I64, self.device())?;
        if count > 0 {
            let positions = Tensor::arange(0i64, n as i64, 1i64, Some(DType::I64), self.device())?;
            launch(&flat, &[&positions, &mask, &offsets], |be| {
                be.nn(NnKernel::MaskCompact {
                    out: &flat.arg(),
                    src: &positions.arg(),
                    mask: &mask.arg(),
                    offsets: &offsets.arg(),
                    n,
                    expand: false,
                })
            })?;
        }
        let nd = self.ndim();
        if nd == 0 {
            return Tensor::uninit(OP, &[count, 0], DType::I64, self.device());
        }
        let mut coords = Vec::with_capacity(nd);
        let mut stride = 1i64;
        for d in (0..nd).rev() {
            let size = self.shape()[d] as i64;
            let q = if stride == 1 {
                flat.clone()
            } else {
                flat.div_mode(stride, RoundingMode::Floor)?
            };
            let c = if d == 0 {
                q
            } else {
                q.sub(&q.div_mode(size, RoundingMode::Floor)?.mul(size)?)?
            };
            coords.push(c);
            stride = stride.saturating_mul(size.max(1));
        }
        coords.reverse();
        let refs: Vec<&Tensor> = coords.iter().collect();
        Tensor::stack(&refs, 0)?.t()
    }

    /// `torch.argwhere(self)`: the same as [`Tensor::nonzero`].
    ///
    /// ```
    /// use strata_tensor::{Tensor, Device};
    /// let x = Tensor::from_slice(&[0.0f32, 3.0, 0.0], &[3], Device::Cpu).unwrap();
    /// assert_eq!(x.argwhere().unwrap().to_vec::<i64>().unwrap(), vec![1]);
    /// ```
    pub fn argwhere(&self) -> Result<Tensor> {
        self.nonzero()
    }

    /// `torch.index_add(self, dim, index, source, alpha)`: a copy of self to
    /// whose slice `index[i]` along `dim` `alpha * source`'s slice `i` is
    /// added, for every `i`. `index` (i64 or i32, 1-D or 0-d) has
    /// `source.size(dim)` entries in `[0, self.size(dim))`; `source` has
    /// self's dtype and self's sizes on the other dims. Duplicate indices
    /// accumulate: on the CPU in index order and in the dtype, as PyTorch's
    /// CPU kernel (f16 rounds after each addition; along the first or last
    /// of several dims with alpha 1 and an int64 index, PyTorch's
    /// scatter-add path, f16/bf16 sum in f32 and round once); on a GPU
    /// atomically.
    /// `alpha` is converted to self's dtype (1.5 into an integer tensor is
    /// 1, as in PyTorch). On the CPU each step rounds as PyTorch's: a 1-D
    /// tensor adds `source * alpha` rounded to the dtype; a float tensor of
    /// more than one dim adds `alpha * source` with one rounding (f32, f64;
    /// f16/bf16 in the vectorised chunks of 32 elements of a contiguous
    /// inner loop, two roundings in the other elements), as PyTorch's `add`
    /// kernel does. On a GPU the source is multiplied by alpha first.
    /// Indices lie in [0, size); as in PyTorch, none is checked when self
    /// has more than one dim and no elements.
    ///
    /// ```
    /// use strata_tensor::{Tensor, Device};
    /// let x = Tensor::zeros(&[3], strata_tensor::DType::F32, Device::Cpu).unwrap();
    /// let i = Tensor::from_slice(&[0i64, 2, 0], &[3], Device::Cpu).unwrap();
    /// let s = Tensor::from_slice(&[1.0f32, 2.0, 3.0], &[3], Device::Cpu).unwrap();
    /// let y = x.index_add(0, &i, &s, 2.0).unwrap();
    /// assert_eq!(y.to_vec::<f32>().unwrap(), vec![8.0, 0.0, 4.0]);
    /// ```
    pub fn index_add(
        &self,
        dim: i64,
        index: &Tensor,
        source: &Tensor,
        alpha: impl Into<Scalar>,
    ) -> Result<Tensor> {
        let out = self.clone_contiguous_checked("index_add", dim, index, source)?;
        out.index_slices("index_add", dim, index, source, Combine::Sum, alpha.into())?;
        Ok(out)
    }

    /// In-place [`Tensor::index_add`]. self must not have elements that
    /// share memory, and neither `index` nor `source` may share memory
    /// with self (a typed [`TensorError::Overlap`], as PyTorch refuses).
    ///
    /// ```
    /// use strata_tensor::{Tensor, Device, DType};
    /// let x = Tensor::zeros(&[2, 2], DType::F32, Device::Cpu).unwrap();
    /// let i = Tensor::from_slice(&[1i64, 1], &[2], Device::Cpu).unwrap();
    /// let s = Tensor::ones(&[2, 2], DType::F32, Device::Cpu).unwrap();
    /// x.index_add_(1, &i, &s, 1).unwrap();
    /// assert_eq!(x.to_vec::<f32>().unwrap(), vec![0.0, 2.0, 0.0, 2.0]);
    /// ```
    pub fn index_add_(
        &self,
        dim: i64,
        index: &Tensor,
        source: &Tensor,
        alpha: impl Into<Scalar>,
    ) -> Result<Tensor> {
        const OP: &str = "index_add_";
        self.index_slices_checks(OP, dim, index, source)?;
        self.inplace_checks(OP, &[index, source])?;
        self.index_slices(OP, dim, index, source, Combine::Sum, alpha.into())?;
        self.bump_version();
        Ok(self.clone())
    }

    /// `torch.index_copy(self, dim, index, source)`: a copy of self whose
    /// slice `index[i]` along `dim` is `source`'s slice `i`. `index` is i64
    /// (as PyTorch requires here), 1-D or 0-d, one entry per slice of
    /// `source`, in [0, size) (as in PyTorch, not checked when `source` is
    /// empty). With duplicate indices the CPU keeps the last slice (as
    /// PyTorch's CPU); on a GPU which one is unspecified.
    ///
    /// ```
    /// use strata_tensor::{Tensor, Device, DType};
    /// let x = Tensor::zeros(&[4], DType::F32, Device::Cpu).unwrap();
    /// let i = Tensor::from_slice(&[1i64, 3], &[2], Device::Cpu).unwrap();
    /// let s = Tensor::from_slice(&[5.0f32, 6.0], &[2], Device::Cpu).unwrap();
    /// assert_eq!(x.index_copy(0, &i, &s).unwrap().to_vec::<f32>().unwrap(), vec![0.0, 5.0, 0.0, 6.0]);
    /// ```
    pub fn index_copy(&self, dim: i64, index: &Tensor, source: &Tensor) -> Result<Tensor> {
        let out = self.clone_contiguous_checked("index_copy", dim, index, source)?;
        out.index_slices(
            "index_copy",
            dim,
            index,
            source,
            Combine::Assign,
            Scalar::Int(1),
        )?;
        Ok(out)
    }

    /// In-place [`Tensor::index_copy`] (overlap rules of [`Tensor::index_add_`]).
    ///
    /// ```
    /// use strata_tensor::{Tensor, Device, DType};
    /// let x = Tensor::zeros(&[3], DType::I64, Device::Cpu).unwrap();
    /// let i = Tensor::from_slice(&[2i64], &[1], Device::Cpu).unwrap();
    /// x.index_copy_(0, &i, &Tensor::from_slice(&[7i64], &[1], Device::Cpu).unwrap()).unwrap();
    /// assert_eq!(x.to_vec::<i64>().unwrap(), vec![0, 0, 7]);
    /// ```
    pub fn index_copy_(&self, dim: i64, index: &Tensor, source: &Tensor) -> Result<Tensor> {
        const OP: &str = "index_copy_";
        self.index_slices_checks(OP, dim, index, source)?;
        self.inplace_checks(OP, &[index, source])?;
        self.index_slices(OP, dim, index, source, Combine::Assign, Scalar::Int(1))?;
        self.bump_version();
        Ok(self.clone())
    }

    fn clone_contiguous_checked(
        &self,
        op: &'static str,
        dim: i64,
        index: &Tensor,
        source: &Tensor,
    ) -> Result<Tensor> {
        self.index_slices_checks(op, dim, index, source)?;
        self.clone_contiguous()
    }

    /// self has no aliased elements and shares no memory with `inputs`.
    /// An input in self's storage whose overlap PyTorch cannot tell (a
    /// strided view of self: its CPU loop then reads elements it has
    /// already written, an order-dependent answer) is refused too, as
    /// `masked_scatter_` refuses it; clone it first.
    fn inplace_checks(&self, op: &'static str, inputs: &[&Tensor]) -> Result<()> {
        check_inplace(op, self, &mut [])?;
        check_no_overlap(op, self, inputs)?;
        for t in inputs {
            if overlap(self, t) == Overlap::TooHard {
                return Err(TensorError::overlap(
                    op,
                    format!(
                        "an input (shape {:?}, strides {:?}) shares memory with the output (shape {:?}, strides {:?}); clone() the input first",
                        t.shape(),
                        t.strides(),
                        self.shape(),
                        self.strides()
                    ),
                ));
            }
        }
        Ok(())
    }

    /// PyTorch's checks of `index_add`/`index_copy`, in its order, and the
    /// range of every index where PyTorch looks at it: `index_copy`'s
    /// kernel visits the source's elements, so an empty source checks no
    /// index; `index_add` of a tensor of more than one dim returns before
    /// its loop when self is empty (a 0-d or 1-D self checks every index
    /// against its elements).
    fn index_slices_checks(
        &self,
        op: &'static str,
        dim: i64,
        index: &Tensor,
        source: &Tensor,
    ) -> Result<()> {
        same_device(op, self, index)?;
        same_device(op, self, source)?;
        let d = normalize_dim(op, dim, self.ndim())?;
        check_vector_index(op, index)?;
        if op.starts_with("index_copy") {
            check_long_index(op, index)?;
        } else {
            check_int_index(op, index)?;
        }
        same_dtype(op, "source", self, source)?;
        let (sd, td) = (source.ndim().max(1), self.ndim().max(1));
        if sd != td || (0..td).any(|k| k != d && nonempty_size(self, k) != nonempty_size(source, k))
        {
            return Err(TensorError::shape(
                op,
                format!(
                    "source {:?} must have self's shape {:?} on every dim but dim {d}",
                    source.shape(),
                    self.shape()
                ),
            ));
        }
        if index.numel() != nonempty_size(source, d) {
            return Err(TensorError::shape(
                op,
                format!(
                    "the number of indices ({}) must equal source's size along dim {d} ({})",
                    index.numel(),
                    nonempty_size(source, d)
                ),
            ));
        }
        let looked_at = if op.starts_with("index_copy") {
            source.numel() > 0
        } else {
            self.ndim() <= 1 || self.numel() > 0
        };
        if !looked_at {
            return Ok(());
        }
        check_index_range(op, &index.reshape(&[-1])?, nonempty_size(self, d))
    }

    /// The scatter of `index_add`/`index_copy` into self (checked).
    fn index_slices(
        &self,
        op: &'static str,
        dim: i64,
        index: &Tensor,
        source: &Tensor,
        combine: Combine,
        alpha: Scalar,
    ) -> Result<()> {
        if source.numel() == 0 || self.numel() == 0 {
            return Ok(());
        }
        let d = normalize_dim(op, dim, self.ndim())?;
        let this = at_least_1d(self)?;
        let src = at_least_1d(source)?;
        let idx = index.reshape(&[-1])?;
        let alpha = alpha.cast_to(self.dtype());
        let unit = alpha == Scalar::Int(1).cast_to(self.dtype());
        if combine == Combine::Sum
            && !unit
            && self.ndim() > 1
            && self.device() == Device::Cpu
            && self.dtype().is_float()
        {
            return index_add_alpha_cpu(&this, d, &idx, &src, alpha);
        }
        let src = if combine == Combine::Sum && !unit {
            src.mul(&Tensor::scalar(alpha, self.dtype(), self.device())?)?
        } else {
            src
        };
        // PyTorch's CPU index_add along the first or the last dim of a
        // tensor of more than one dim, with alpha 1 and an int64 index, is a
        // scatter-add, whose f16/bf16 sums are formed in f32 and rounded
        // once per element (`[[2048]]` plus four 1s is 2052); a middle dim,
        // a 1-D tensor, an int32 index or another alpha add slice by slice,
        // rounding each step (2048).
        if combine == Combine::Sum
            && unit
            && self.ndim() > 1
            && (d == 0 || d == self.ndim() - 1)
            && idx.dtype() == DType::I64
            && matches!(self.dtype(), DType::F16 | DType::BF16)
        {
            let wide = this.to_dtype_contiguous(DType::F32)?;
            let src = src.to_dtype_contiguous(DType::F32)?;
            let mut istrides = vec![0; src.ndim()];
            istrides[d] = idx.strides()[0];
            let il = Layout {
                shape: src.shape().to_vec(),
                strides: istrides,
                offset: idx.offset(),
            };
            scatter_into(&wide, &idx, il, &src, src.layout().clone(), d, combine)?;
            this.copy_(&wide)?;
            return Ok(());
        }
        let mut istrides = vec![0; src.ndim()];
        istrides[d] = idx.strides()[0];
        let il = Layout {
            shape: src.shape().to_vec(),
            strides: istrides,
            offset: idx.offset(),
        };
        scatter_into(&this, &idx, il, &src, src.layout().clone(), d, combine)
    }

    /// `torch.index_fill(self, dim, index, value)`: a copy of self whose
    /// slices `index` along `dim` are filled with `value` (converted to
    /// self's dtype; a value the dtype cannot hold is an error, as in
    /// PyTorch). `index` is i64, 1-D or 0-d, in [-size, size) (negative
    /// entries count from the end); duplicates are harmless. As in
    /// PyTorch, the indices are checked only where a slice they name has
    /// elements to fill.
    ///
    /// ```
    /// use strata_tensor::{Tensor, Device, DType};
    /// let x = Tensor::zeros(&[2, 3], DType::F32, Device::Cpu).unwrap();
    /// let i = Tensor::from_slice(&[0i64, 2], &[2], Device::Cpu).unwrap();
    /// let y = x.index_fill(1, &i, -1.5).unwrap();
    /// assert_eq!(y.to_vec::<f32>().unwrap(), vec![-1.5, 0.0, -1.5, -1.5, 0.0, -1.5]);
    /// ```
    pub fn index_fill(&self, dim: i64, index: &Tensor, value: impl Into<Scalar>) -> Result<Tensor> {
        let value = value.into();
        self.index_fill_checks("index_fill", dim, index, value)?;
        let out = self.clone_contiguous()?;
        out.index_fill_impl("index_fill", dim, index, value)?;
        Ok(out)
    }

    /// In-place [`Tensor::index_fill`] (self must not alias itself, and the
    /// index must not share its memory).
    ///
    /// ```
    /// use strata_tensor::{Tensor, Device, DType};
    /// let x = Tensor::zeros(&[3], DType::Bool, Device::Cpu).unwrap();
    /// x.index_fill_(0, &Tensor::from_slice(&[0i64], &[1], Device::Cpu).unwrap(), true).unwrap();
    /// assert_eq!(x.to_vec::<bool>().unwrap(), vec![true, false, false]);
    /// ```
    pub fn index_fill_(
        &self,
        dim: i64,
        index: &Tensor,
        value: impl Into<Scalar>,
    ) -> Result<Tensor> {
        const OP: &str = "index_fill_";
        let value = value.into();
        self.index_fill_checks(OP, dim, index, value)?;
        self.inplace_checks(OP, &[index])?;
        self.index_fill_impl(OP, dim, index, value)?;
        self.bump_version();
        Ok(self.clone())
    }

    fn index_fill_checks(
        &self,
        op: &'static str,
        dim: i64,
        index: &Tensor,
        value: Scalar,
    ) -> Result<()> {
        same_device(op, self, index)?;
        let d = normalize_dim(op, dim, self.ndim())?;
        check_vector_index(op, index)?;
        check_long_index(op, index)?;
        super::checks::check_fits(op, value, self.dtype())?;
        // PyTorch's kernel visits self with dim `d` replaced by the index's
        // length, and checks each index it meets against [-size, size).
        let size = nonempty_size(self, d);
        let others: usize = (0..self.ndim())
            .filter(|&k| k != d)
            .map(|k| self.shape()[k])
            .product();
        if others == 0 {
            return Ok(());
        }
        check_signed_index_range(op, index, d, size)
    }

    fn index_fill_impl(
        &self,
        op: &'static str,
        dim: i64,
        index: &Tensor,
        value: Scalar,
    ) -> Result<()> {
        if index.numel() == 0 || self.numel() == 0 {
            return Ok(());
        }
        let d = normalize_dim(op, dim, self.ndim())?;
        let this = at_least_1d(self)?;
        let idx = wrap_negative(&index.reshape(&[-1])?, this.shape()[d])?;
        let mut shape = this.shape().to_vec();
        shape[d] = idx.numel();
        let mut istrides = vec![0; shape.len()];
        istrides[d] = idx.strides()[0];
        let il = Layout {
            shape: shape.clone(),
            strides: istrides,
            offset: idx.offset(),
        };
        let v = Tensor::scalar(value, self.dtype(), self.device())?;
        let vl = Layout {
            shape: shape.clone(),
            strides: vec![0; shape.len()],
            offset: v.offset(),
        };
        scatter_into(&this, &idx, il, &v, vl, d, Combine::Assign)
    }

    /// `torch.scatter(self, dim, index, src)`: a copy of self with
    /// `out[i][index[i][j]] = src[i][j]` (dim 1) for every position of
    /// `index` (i64 or i32, self's rank, no larger than `src` on any dim
    /// nor than self on the others; a 0-d tensor counts as 1-D). Which of
    /// duplicate indices wins is unspecified in PyTorch: the CPU keeps the
    /// last in row-major order, a GPU any.
    ///
    /// ```
    /// use strata_tensor::{Tensor, Device, DType};
    /// let x = Tensor::zeros(&[2, 4], DType::F32, Device::Cpu).unwrap();
    /// let i = Tensor::from_slice(&[1i64, 3, 0, 2], &[2, 2], Device::Cpu).unwrap();
    /// let s = Tensor::from_slice(&[1.0f32, 2.0, 5.0, 6.0], &[2, 2], Device::Cpu).unwrap();
    /// let y = x.scatter(1, &i, &s).unwrap();
    /// assert_eq!(y.to_vec::<f32>().unwrap(), vec![0.0, 1.0, 0.0, 2.0, 5.0, 0.0, 6.0, 0.0]);
    /// ```
    pub fn scatter(&self, dim: i64, index: &Tensor, src: &Tensor) -> Result<Tensor> {
        self.scatter_checks("scatter", dim, index, Some(src))?;
        let out = self.clone_contiguous()?;
        out.scatter_impl("scatter", dim, index, src, Combine::Assign)?;
        Ok(out)
    }

    /// In-place [`Tensor::scatter`]; neither `index` nor `src` may share
    /// memory with self, nor self with itself (typed
    /// [`TensorError::Overlap`], as PyTorch refuses).
    ///
    /// ```
    /// use strata_tensor::{Tensor, Device, DType};
    /// let x = Tensor::zeros(&[3], DType::F64, Device::Cpu).unwrap();
    /// let i = Tensor::from_slice(&[2i64, 0], &[2], Device::Cpu).unwrap();
    /// let s = Tensor::from_slice(&[1.0f64, 2.0], &[2], Device::Cpu).unwrap();
    /// x.scatter_(0, &i, &s).unwrap();
    /// assert_eq!(x.to_vec::<f64>().unwrap(), vec![2.0, 0.0, 1.0]);
    /// ```
    pub fn scatter_(&self, dim: i64, index: &Tensor, src: &Tensor) -> Result<Tensor> {
        const OP: &str = "scatter_";
        self.scatter_checks(OP, dim, index, Some(src))?;
        self.inplace_checks(OP, &[index, src])?;
        self.scatter_impl(OP, dim, index, src, Combine::Assign)?;
        self.bump_version();
        Ok(self.clone())
    }

    /// `torch.scatter(self, dim, index, value)` with a scalar `value`
    /// (converted to self's dtype; a value the dtype cannot hold is an
    /// error): `out[i][index[i][j]] = value`.
    ///
    /// ```
    /// use strata_tensor::{Tensor, Device, DType};
    /// let x = Tensor::zeros(&[2, 3], DType::F32, Device::Cpu).unwrap();
    /// let i = Tensor::from_slice(&[1i64, 2], &[2, 1], Device::Cpu).unwrap();
    /// let y = x.scatter_value(1, &i, 7.5).unwrap();
    /// assert_eq!(y.to_vec::<f32>().unwrap(), vec![0.0, 7.5, 0.0, 0.0, 0.0, 7.5]);
    /// ```
    pub fn scatter_value(
        &self,
        dim: i64,
        index: &Tensor,
        value: impl Into<Scalar>,
    ) -> Result<Tensor> {
        let value = value.into();
        self.scatter_checks("scatter_value", dim, index, None)?;
        super::checks::check_fits("scatter_value", value, self.dtype())?;
        let out = self.clone_contiguous()?;
        let v = out.value_source(index, value)?;
        out.scatter_impl("scatter_value", dim, index, &v, Combine::Assign)?;
        Ok(out)
    }

    /// In-place [`Tensor::scatter_value`].
    ///
    /// ```
    /// use strata_tensor::{Tensor, Device, DType};
    /// let x = Tensor::zeros(&[3], DType::U8, Device::Cpu).unwrap();
    /// x.scatter_value_(0, &Tensor::from_slice(&[1i64], &[1], Device::Cpu).unwrap(), 9).unwrap();
    /// assert_eq!(x.to_vec::<u8>().unwrap(), vec![0, 9, 0]);
    /// ```
    pub fn scatter_value_(
        &self,
        dim: i64,
        index: &Tensor,
        value: impl Into<Scalar>,
    ) -> Result<Tensor> {
        const OP: &str = "scatter_value_";
        let value = value.into();
        self.scatter_checks(OP, dim, index, None)?;
        super::checks::check_fits(OP, value, self.dtype())?;
        self.inplace_checks(OP, &[index])?;
        let v = self.value_source(index, value)?;
        self.scatter_impl(OP, dim, index, &v, Combine::Assign)?;
        self.bump_version();
        Ok(self.clone())
    }

    /// `value` as a tensor of self's dtype expanded to index's shape.
    fn value_source(&self, index: &Tensor, value: Scalar) -> Result<Tensor> {
        let v = Tensor::scalar(value, self.dtype(), self.device())?;
        v.broadcast_to(index.shape())
    }

    /// `torch.scatter_reduce(self, dim, index, src, reduce, include_self)`:
    /// a copy of self where each element that `index` addresses becomes the
    /// reduction of the `src` elements scattered to it, and of itself with
    /// `include_self` (elements nothing is scattered to keep self's value).
    /// `Mean` divides by the count (floor division for integers; not for
    /// bool); `Amax`/`Amin` propagate NaN. Index rules of
    /// [`Tensor::scatter`]. On the CPU the reduction runs in row-major order
    /// of the index, as PyTorch's CPU kernel: in the dtype, except that
    /// f16/bf16 sums, products and means accumulate in f32 and round once
    /// (a mean then divides the rounded sum by the count in the dtype).
    ///
    /// ```
    /// use strata_tensor::{Tensor, Device, ScatterReduce};
    /// let x = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[4], Device::Cpu).unwrap();
    /// let i = Tensor::from_slice(&[0i64, 0, 1, 3, 3], &[5], Device::Cpu).unwrap();
    /// let s = Tensor::from_slice(&[5.0f32, 6.0, 7.0, 8.0, 9.0], &[5], Device::Cpu).unwrap();
    /// let y = x.scatter_reduce(0, &i, &s, ScatterReduce::Prod, true).unwrap();
    /// assert_eq!(y.to_vec::<f32>().unwrap(), vec![30.0, 14.0, 3.0, 288.0]);
    /// ```
    pub fn scatter_reduce(
        &self,
        dim: i64,
        index: &Tensor,
        src: &Tensor,
        reduce: ScatterReduce,
        include_self: bool,
    ) -> Result<Tensor> {
        self.scatter_reduce_checks("scatter_reduce", dim, index, src, reduce)?;
        let out = self.clone_contiguous()?;
        out.scatter_reduce_impl("scatter_reduce", dim, index, src, reduce, include_self)?;
        Ok(out)
    }

    /// In-place [`Tensor::scatter_reduce`] (overlap rules of
    /// [`Tensor::scatter_`]).
    ///
    /// ```
    /// use strata_tensor::{Tensor, Device, ScatterReduce};
    /// let x = Tensor::from_slice(&[5i64, 5], &[2], Device::Cpu).unwrap();
    /// let i = Tensor::from_slice(&[0i64, 0], &[2], Device::Cpu).unwrap();
    /// let s = Tensor::from_slice(&[-2i64, 0], &[2], Device::Cpu).unwrap();
    /// x.scatter_reduce_(0, &i, &s, ScatterReduce::Mean, false).unwrap();
    /// assert_eq!(x.to_vec::<i64>().unwrap(), vec![-1, 5]);
    /// ```
    pub fn scatter_reduce_(
        &self,
        dim: i64,
        index: &Tensor,
        src: &Tensor,
        reduce: ScatterReduce,
        include_self: bool,
    ) -> Result<Tensor> {
        const OP: &str = "scatter_reduce_";
        self.scatter_reduce_checks(OP, dim, index, src, reduce)?;
        self.inplace_checks(OP, &[index, src])?;
        self.scatter_reduce_impl(OP, dim, index, src, reduce, include_self)?;
        self.bump_version();
        Ok(self.clone())
    }

    fn scatter_reduce_checks(
        &self,
        op: &'static str,
        dim: i64,
        index: &Tensor,
        src: &Tensor,
        reduce: ScatterReduce,
    ) -> Result<()> {
        self.scatter_checks(op, dim, index, Some(src))?;
        if reduce == ScatterReduce::Mean && self.dtype() == DType::Bool {
            return Err(TensorError::dtype(
                op,
                "the mean reduction is not implemented for bool; convert to an integer or float dtype",
            ));
        }
        Ok(())
    }

    fn scatter_reduce_impl(
        &self,
        op: &'static str,
        dim: i64,
        index: &Tensor,
        src: &Tensor,
        reduce: ScatterReduce,
        include_self: bool,
    ) -> Result<()> {
        if index.numel() == 0 {
            return Ok(());
        }
        let dt = self.dtype();
        if self.device() == Device::Cpu
            && matches!(dt, DType::F16 | DType::BF16)
            && matches!(
                reduce,
                ScatterReduce::Sum | ScatterReduce::Prod | ScatterReduce::Mean
            )
        {
            // PyTorch 2.15's CPU sums and multiplies f16/bf16 in f32 and
            // rounds each element once (a mean is that sum, rounded, then
            // divided by the count in the dtype): the reduction runs on an
            // f32 copy, in the same order.
            let wide = self.to_dtype_contiguous(DType::F32)?;
            let src = src.to_dtype_contiguous(DType::F32)?;
            let inner = match reduce {
                ScatterReduce::Prod => ScatterReduce::Prod,
                _ => ScatterReduce::Sum,
            };
            wide.scatter_reduce_impl(op, dim, index, &src, inner, include_self)?;
            self.copy_(&wide)?;
            if reduce == ScatterReduce::Mean {
                self.divide_by_scatter_count(op, dim, index, include_self)?;
            }
            return Ok(());
        }
        if !include_self {
            // PyTorch first writes the reduction's identity where anything
            // lands, so that self's values there take no part.
            let init = match reduce {
                ScatterReduce::Sum | ScatterReduce::Mean => Scalar::Int(0),
                ScatterReduce::Prod => Scalar::Int(1),
                ScatterReduce::Amax => lowest(dt),
                ScatterReduce::Amin => highest(dt),
            };
            let v = self.value_source(index, init)?;
            self.scatter_impl(op, dim, index, &v, Combine::Assign)?;
        }
        let combine = match reduce {
            ScatterReduce::Sum | ScatterReduce::Mean => Combine::Sum,
            ScatterReduce::Prod => Combine::Prod,
            ScatterReduce::Amax => Combine::Max,
            ScatterReduce::Amin => Combine::Min,
        };
        self.scatter_impl(op, dim, index, src, combine)?;
        if reduce == ScatterReduce::Mean {
            self.divide_by_scatter_count(op, dim, index, include_self)?;
        }
        Ok(())
    }

    /// The last step of a `Mean` scatter_reduce: self (holding the sums)
    /// divided by how many values each element took (itself too with
    /// `include_self`; 1 where nothing landed), counted in self's dtype;
    /// floor division for integers.
    fn divide_by_scatter_count(
        &self,
        op: &'static str,
        dim: i64,
        index: &Tensor,
        include_self: bool,
    ) -> Result<()> {
        let dt = self.dtype();
        let count = if include_self {
            Tensor::ones(self.shape(), dt, self.device())?
        } else {
            Tensor::zeros(self.shape(), dt, self.device())?
        };
        let ones = Tensor::ones(index.shape(), dt, self.device())?;
        count.scatter_impl(op, dim, index, &ones, Combine::Sum)?;
        let count = count.masked_fill(&count.eq(0)?, 1)?;
        let mean = if dt.is_float() {
            self.div(&count)?
        } else {
            self.div_mode(&count, RoundingMode::Floor)?
        };
        self.copy_(&mean)?;
        Ok(())
    }

    /// PyTorch's checks of `scatter`-like ops (the dim, the index's dtype,
    /// src's dtype, the ranks and sizes), then the index values' range.
    /// `src` is `None` for a scalar value.
    fn scatter_checks(
        &self,
        op: &'static str,
        dim: i64,
        index: &Tensor,
        src: Option<&Tensor>,
    ) -> Result<()> {
        same_device(op, self, index)?;
        if let Some(s) = src {
            same_device(op, self, s)?;
        }
        let d = normalize_dim(op, dim, self.ndim())?;
        if index.numel() > 0 {
            check_int_index(op, index)?;
        }
        if let Some(s) = src {
            same_dtype(op, "src", self, s)?;
        }
        if index.numel() == 0 {
            return Ok(());
        }
        let rank = index.ndim().max(1);
        let bad_rank = self.ndim().max(1) != rank || src.is_some_and(|s| s.ndim().max(1) != rank);
        let too_big = !bad_rank
            && (0..rank).any(|k| {
                let n = nonempty_size(index, k);
                src.is_some_and(|s| n > nonempty_size(s, k))
                    || (k != d && n > nonempty_size(self, k))
            });
        if bad_rank || too_big {
            return Err(TensorError::shape(
                op,
                format!(
                    "index {:?} must have self's rank and be no larger than {}self {:?} on dims other than {d}",
                    index.shape(),
                    src.map_or(String::new(), |s| format!("src {:?} on every dim and than ", s.shape())),
                    self.shape()
                ),
            ));
        }
        check_index_range(op, &index.reshape(&[-1])?, nonempty_size(self, d))
    }

    /// The scatter itself into self (checked): positions of index's shape,
    /// `src` read with its own strides over them.
    fn scatter_impl(
        &self,
        op: &'static str,
        dim: i64,
        index: &Tensor,
        src: &Tensor,
        combine: Combine,
    ) -> Result<()> {
        if index.numel() == 0 {
            return Ok(());
        }
        let d = normalize_dim(op, dim, self.ndim())?;
        let (this, idx, src) = (at_least_1d(self)?, at_least_1d(index)?, at_least_1d(src)?);
        let sl = Layout {
            shape: idx.shape().to_vec(),
            strides: src.strides().to_vec(),
            offset: src.offset(),
        };
        let il = idx.layout().clone();
        scatter_into(&this, &idx, il, &src, sl, d, combine)
    }

    /// `torch.index_put(self, indices, values, accumulate)`: a copy of self
    /// with `out[indices] = values` (or `+=` with `accumulate`), PyTorch's
    /// advanced indexing: `indices[k]` indexes dim `k` (`None` takes the
    /// whole dim); i64/i32 indices (negative ones count from the end) are
    /// broadcast together, a bool index of `m` dims stands for the
    /// coordinates of its true elements in those dims (its shape must match
    /// them). `values` (self's dtype) broadcast to the indexing result's
    /// shape: the broadcast index shape where the indexed dims were, when
    /// they are adjacent, else in front, then the other dims. Duplicate
    /// positions accumulate (on the CPU in the dtype, in the order
    /// PyTorch's CPU kernel visits them: the index dims ordered by the
    /// values' strides, then the indices'); without `accumulate` which
    /// duplicate wins is unspecified (the CPU keeps the last).
    ///
    /// ```
    /// use strata_tensor::{Tensor, Device, DType};
    /// let x = Tensor::zeros(&[3], DType::F32, Device::Cpu).unwrap();
    /// let i = Tensor::from_slice(&[0i64, 0, -1], &[3], Device::Cpu).unwrap();
    /// let v = Tensor::from_slice(&[1.0f32, 2.0, 3.0], &[3], Device::Cpu).unwrap();
    /// let y = x.index_put(&[Some(&i)], &v, true).unwrap();
    /// assert_eq!(y.to_vec::<f32>().unwrap(), vec![3.0, 0.0, 3.0]);
    /// ```
    pub fn index_put(
        &self,
        indices: &[Option<&Tensor>],
        values: &Tensor,
        accumulate: bool,
    ) -> Result<Tensor> {
        let plan = self.index_put_plan("index_put", indices, values)?;
        let out = self.clone_contiguous()?;
        out.index_put_apply(plan, accumulate)?;
        Ok(out)
    }

    /// In-place [`Tensor::index_put`]: self must not alias itself, and
    /// neither the values nor an index may share memory with self.
    ///
    /// ```
    /// use strata_tensor::{Tensor, Device, DType};
    /// let x = Tensor::zeros(&[2, 2], DType::F32, Device::Cpu).unwrap();
    /// let m = Tensor::from_slice(&[true, false, false, true], &[2, 2], Device::Cpu).unwrap();
    /// let v = Tensor::from_slice(&[1.0f32, 2.0], &[2], Device::Cpu).unwrap();
    /// x.index_put_(&[Some(&m)], &v, false).unwrap();
    /// assert_eq!(x.to_vec::<f32>().unwrap(), vec![1.0, 0.0, 0.0, 2.0]);
    /// ```
    pub fn index_put_(
        &self,
        indices: &[Option<&Tensor>],
        values: &Tensor,
        accumulate: bool,
    ) -> Result<Tensor> {
        const OP: &str = "index_put_";
        let plan = self.index_put_plan(OP, indices, values)?;
        let mut others: Vec<&Tensor> = indices.iter().flatten().copied().collect();
        others.push(values);
        self.inplace_checks(OP, &others)?;
        self.index_put_apply(plan, accumulate)?;
        self.bump_version();
        Ok(self.clone())
    }

    /// `self[indices]` with PyTorch's advanced indexing (the gather that
    /// [`Tensor::index_put`] writes back): the result has the indexing
    /// result's shape (see there).
    ///
    /// ```
    /// use strata_tensor::{Tensor, Device};
    /// let x = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[2, 2], Device::Cpu).unwrap();
    /// let i = Tensor::from_slice(&[1i64, 0], &[2], Device::Cpu).unwrap();
    /// let y = x.index_tensors(&[None, Some(&i)]).unwrap();
    /// assert_eq!(y.to_vec::<f32>().unwrap(), vec![2.0, 1.0, 4.0, 3.0]);
    /// ```
    pub fn index_tensors(&self, indices: &[Option<&Tensor>]) -> Result<Tensor> {
        const OP: &str = "index";
        let plan = self.index_plan(OP, indices)?;
        // out[b, r] = self.flat[offset[b] + rest offset r]: a gather along a
        // dim of stride 1 over self's storage.
        let x = self.contiguous()?;
        let offs = plan.element_offsets(x.strides())?;
        let (xl, il) = plan.offset_layouts(&x, &offs);
        let out = Tensor::uninit(OP, &xl.shape, x.dtype(), x.device())?;
        if out.numel() > 0 {
            let bound = plan.span(x.strides());
            launch(&out, &[&x, &offs], |be| {
                be.nn(NnKernel::Gather {
                    out: &out.arg(),
                    src: &arg_with(&x, xl),
                    index: &arg_with(&offs, il),
                    dim: 0,
                    bound,
                })
            })?;
        }
        plan.arrange_result(&out)
    }

    fn index_put_plan(
        &self,
        op: &'static str,
        indices: &[Option<&Tensor>],
        values: &Tensor,
    ) -> Result<(IndexPlan, Tensor)> {
        same_device(op, self, values)?;
        let plan = self.index_plan(op, indices)?;
        if values.dtype() != self.dtype() {
            return Err(TensorError::dtype(
                op,
                format!(
                    "the values are {} but self is {}; index_put needs the same dtype",
                    values.dtype(),
                    self.dtype()
                ),
            ));
        }
        let result = plan.result_shape(self.shape());
        let fits = broadcast_shapes(op, values.shape(), &result)
            .map(|s| s == result)
            .unwrap_or(false);
        if !fits {
            return Err(TensorError::shape(
                op,
                format!(
                    "values of shape {:?} cannot be broadcast to the indexing result's shape {result:?}",
                    values.shape()
                ),
            ));
        }
        // Values as [nb, rest...]: the index dims first, contiguous.
        let vb = values.broadcast_to(&result)?;
        let first = if plan.adjacent { plan.dims[0] } else { 0 };
        let value_strides = vb.strides()[first..first + plan.b.len()].to_vec();
        let vb = plan.to_positions(&vb)?;
        plan.in_pytorch_order(&value_strides, vb)
    }

    fn index_put_apply(&self, (plan, vals): (IndexPlan, Tensor), accumulate: bool) -> Result<()> {
        if vals.numel() == 0 {
            return Ok(());
        }
        let offs = plan.element_offsets(self.strides())?;
        let (tl, il) = plan.offset_layouts(self, &offs);
        let combine = if accumulate {
            Combine::Sum
        } else {
            Combine::Assign
        };
        let bound = plan.span(self.strides());
        scatter_into_layout(
            self,
            tl,
            &offs,
            il,
            &vals,
            vals.layout().clone(),
            0,
            combine,
            bound,
        )
    }

    /// The checked, normalised form of an advanced index.
    fn index_plan(&self, op: &'static str, indices: &[Option<&Tensor>]) -> Result<IndexPlan> {
        if indices.iter().all(|i| i.is_none()) {
            return Err(TensorError::index(
                op,
                "at least one index tensor is needed (an empty list or only None indexes nothing)",
            ));
        }
        // Bool masks become the coordinates of their true elements.
        let mut per_dim: Vec<Option<Tensor>> = Vec::new();
        for i in indices {
            match i {
                None => per_dim.push(None),
                Some(t) => {
                    same_device(op, self, t)?;
                    match t.dtype() {
                        DType::I64 | DType::I32 => per_dim.push(Some((*t).clone())),
                        DType::Bool => {
                            let at = per_dim.len();
                            let m = t.ndim();
                            if m == 0 {
                                return Err(TensorError::index(
                                    op,
                                    "a 0-d bool index is not supported; use a 1-D mask or an integer index",
                                ));
                            }
                            if at + m > self.ndim() || self.shape()[at..at + m] != *t.shape() {
                                return Err(TensorError::index(
                                    op,
                                    format!(
                                        "the mask of shape {:?} at index {at} does not match the indexed tensor's shape {:?} there",
                                        t.shape(),
                                        self.shape()
                                    ),
                                ));
                            }
                            let nz = t.nonzero()?;
                            for k in 0..m {
                                per_dim.push(Some(nz.select(1, k as i64)?));
                            }
                        }
                        other => {
                            return Err(TensorError::dtype(
                                op,
                                format!(
                                "tensors used as indices must be int64, int32 or bool, not {other}"
                            ),
                            ))
                        }
                    }
                }
            }
        }
        if per_dim.len() > self.ndim() {
            return Err(TensorError::index(
                op,
                format!(
                    "too many indices for a tensor of {} dims (got {})",
                    self.ndim(),
                    per_dim.len()
                ),
            ));
        }
        let dims: Vec<usize> = (0..per_dim.len())
            .filter(|&k| per_dim[k].is_some())
            .collect();
        let mut b: Vec<usize> = Vec::new();
        for (n, t) in per_dim.iter().flatten().enumerate() {
            b = if n == 0 {
                t.shape().to_vec()
            } else {
                broadcast_shapes(op, &b, t.shape()).map_err(|_| {
                    TensorError::index(
                        op,
                        format!(
                            "the index tensors do not broadcast together (shapes {:?})",
                            per_dim
                                .iter()
                                .flatten()
                                .map(|t| t.shape().to_vec())
                                .collect::<Vec<_>>()
                        ),
                    )
                })?
            };
        }
        // Each index's strides over b, as PyTorch's iterator sees the
        // expanded index (they order index_put's positions).
        let idx_strides: Vec<Vec<usize>> = per_dim
            .iter()
            .flatten()
            .map(|t| t.layout().broadcast_strides(&b))
            .collect();
        // Each index in [-size, size), negatives wrapped, as i64 over b.
        // PyTorch's kernel checks the indices as it visits the result's
        // elements: where the result is empty (no index position, or an
        // empty dim left unindexed) it checks none, and no element is read
        // or written, so the plan holds zeros.
        let rest_numel: usize = (0..self.ndim())
            .filter(|k| !dims.contains(k))
            .map(|k| self.shape()[k])
            .product();
        let nb: usize = b.iter().product();
        let mut idx = Vec::with_capacity(dims.len());
        for &k in &dims {
            let Some(t) = per_dim[k].as_ref() else {
                continue;
            };
            if nb == 0 || rest_numel == 0 {
                idx.push(Tensor::zeros(&[nb], DType::I64, self.device())?);
                continue;
            }
            let size = self.shape()[k];
            let t = t.to_dtype_contiguous(DType::I64)?;
            check_signed_index_range(op, &t, k, size)?;
            let t = wrap_negative(&t, size)?;
            idx.push(t.broadcast_to(&b)?.contiguous()?.reshape(&[-1])?);
        }
        let adjacent = dims.windows(2).all(|w| w[1] == w[0] + 1);
        let rest: Vec<usize> = (0..self.ndim()).filter(|k| !dims.contains(k)).collect();
        Ok(IndexPlan {
            dims,
            idx,
            idx_strides,
            b,
            nb,
            rest,
            adjacent,
            sizes: self.shape().to_vec(),
        })
    }
}

/// An advanced index, normalised: the indexed dims, their (wrapped, i64,
/// flattened) index tensors over the broadcast index shape `b`, and the
/// other dims.
pub(crate) struct IndexPlan {
    dims: Vec<usize>,
    idx: Vec<Tensor>,
    /// The index tensors' strides broadcast over `b` (before `idx` made
    /// them contiguous).
    idx_strides: Vec<Vec<usize>>,
    b: Vec<usize>,
    nb: usize,
    rest: Vec<usize>,
    adjacent: bool,
    sizes: Vec<usize>,
}

impl IndexPlan {
    /// The plan and its values `vals` (`[nb, rest...]`) with the index
    /// positions in the order PyTorch's CPU `index_put` visits them: its
    /// TensorIterator orders the index dims by the values' strides there,
    /// then the index tensors' (the output's are 0 on them), innermost
    /// first, and accumulates (or, without `accumulate`, lets the last
    /// write win) in that order. Row-major order is kept as is, and a GPU's
    /// positions are left in it (its atomic adds have no order).
    fn in_pytorch_order(mut self, value_strides: &[usize], vals: Tensor) -> Result<(Self, Tensor)> {
        let nbd = self.b.len();
        if nbd < 2 || self.nb < 2 || vals.device() != Device::Cpu {
            return Ok((self, vals));
        }
        let mut operands: Vec<&[usize]> = vec![value_strides];
        operands.extend(self.idx_strides.iter().map(Vec::as_slice));
        let order = crate::layout::pytorch_reorder_dims(&self.b, None, &operands)?;
        if order.iter().rev().copied().eq(0..nbd) {
            return Ok((self, vals));
        }
        // `[nb, rest...]` seen over b, its index dims permuted outermost
        // first and copied: row-major order of the copy visits order[0]
        // fastest.
        let outer_first: Vec<i64> = order.iter().rev().map(|&d| d as i64).collect();
        let b: Vec<i64> = self.b.iter().map(|&s| s as i64).collect();
        let visit = |t: &Tensor| -> Result<Tensor> {
            let rest = &t.shape()[1..];
            let mut shape = b.clone();
            shape.extend(rest.iter().map(|&s| s as i64));
            let mut perm = outer_first.clone();
            perm.extend((nbd..nbd + rest.len()).map(|k| k as i64));
            let mut flat = vec![self.nb as i64];
            flat.extend(rest.iter().map(|&s| s as i64));
            t.reshape(&shape)?
                .permute(&perm)?
                .contiguous()?
                .reshape(&flat)
        };
        let idx = self.idx.iter().map(&visit).collect::<Result<Vec<_>>>()?;
        let vals = visit(&vals)?;
        self.idx = idx;
        Ok((self, vals))
    }

    /// The shape of `self[indices]` for a tensor of shape `sizes`.
    fn result_shape(&self, sizes: &[usize]) -> Vec<usize> {
        let mut out = Vec::new();
        if self.adjacent {
            let first = self.dims[0];
            out.extend(&sizes[..first]);
            out.extend(&self.b);
            out.extend(self.rest.iter().filter(|&&k| k > first).map(|&k| sizes[k]));
        } else {
            out.extend(&self.b);
            out.extend(self.rest.iter().map(|&k| sizes[k]));
        }
        out
    }

    /// A tensor of the result's shape rearranged as `[nb, rest...]`
    /// (contiguous).
    fn to_positions(&self, t: &Tensor) -> Result<Tensor> {
        let nbd = self.b.len();
        let t = if self.adjacent {
            let pre = self.dims[0];
            let mut perm: Vec<i64> = (pre..pre + nbd).map(|k| k as i64).collect();
            perm.extend((0..pre).map(|k| k as i64));
            perm.extend((pre + nbd..t.ndim()).map(|k| k as i64));
            t.permute(&perm)?
        } else {
            t.clone()
        };
        let mut shape = vec![self.nb as i64];
        shape.extend(t.shape()[nbd..].iter().map(|&s| s as i64));
        t.contiguous()?.reshape(&shape)
    }

    /// `[nb, rest...]` back to the result's shape.
    fn arrange_result(&self, t: &Tensor) -> Result<Tensor> {
        let nbd = self.b.len();
        let mut shape: Vec<i64> = self.b.iter().map(|&s| s as i64).collect();
        shape.extend(t.shape()[1..].iter().map(|&s| s as i64));
        let t = t.reshape(&shape)?;
        if !self.adjacent {
            return Ok(t);
        }
        let pre = self.dims[0];
        // t is [b..., pre dims..., post dims...]: move b after the pre dims.
        let mut perm: Vec<i64> = (nbd..nbd + pre).map(|k| k as i64).collect();
        perm.extend((0..nbd).map(|k| k as i64));
        perm.extend((nbd + pre..t.ndim()).map(|k| k as i64));
        t.permute(&perm)?.contiguous()
    }

    /// The element offset `Σ idx_k * strides[dims[k]]` of every index
    /// position (i64 `[nb]`).
    fn element_offsets(&self, strides: &[usize]) -> Result<Tensor> {
        let mut acc: Option<Tensor> = None;
        for (t, &k) in self.idx.iter().zip(&self.dims) {
            let term = t.mul(strides[k] as i64)?;
            acc = Some(match acc {
                None => term,
                Some(a) => a.add(&term)?,
            });
        }
        acc.ok_or_else(|| TensorError::index("index_put", "no index tensor"))?
            .contiguous()
    }

    /// `t` and the offsets `offs` ([`IndexPlan::element_offsets`]) seen
    /// as `[nb, rest...]`: `t` through a first dim of stride 1 that the
    /// offsets address (its nominal size may reach past `t`'s storage;
    /// only offsets below [`IndexPlan::span`] are ever read or written),
    /// then `t`'s other dims; the offsets broadcast over the rest.
    fn offset_layouts(&self, t: &Tensor, offs: &Tensor) -> (Layout, Layout) {
        let mut shape = vec![self.nb];
        shape.extend(self.rest.iter().map(|&k| t.shape()[k]));
        let mut strides = vec![1];
        strides.extend(self.rest.iter().map(|&k| t.strides()[k]));
        let mut is = vec![0; shape.len()];
        is[0] = 1;
        let il = Layout {
            shape: shape.clone(),
            strides: is,
            offset: offs.offset(),
        };
        let tl = Layout {
            shape,
            strides,
            offset: t.offset(),
        };
        (tl, il)
    }

    /// One past the largest offset [`IndexPlan::element_offsets`] can give.
    fn span(&self, strides: &[usize]) -> usize {
        1 + self
            .dims
            .iter()
            .map(|&k| self.sizes[k].saturating_sub(1) * strides[k])
            .sum::<usize>()
    }
}

/// An i64 or i32 index tensor with its negative entries (already checked to
/// lie in [-size, 0)) counted from the end: `size` added to them.
fn wrap_negative(t: &Tensor, size: usize) -> Result<Tensor> {
    if t.numel() == 0 || t.known_value_range().is_some_and(|(lo, _)| lo >= 0) {
        return Ok(t.clone());
    }
    let neg = t.lt(0)?;
    Tensor::where_cond(&neg, &t.add(size as i64)?, t)
}

/// The highest value of `d` (+inf for floats): `amin`'s identity.
fn highest(d: DType) -> Scalar {
    match d {
        DType::F32 | DType::F64 | DType::F16 | DType::BF16 => Scalar::Float(f64::INFINITY),
        DType::I32 => Scalar::Int(i32::MAX as i64),
        DType::I64 => Scalar::Int(i64::MAX),
        DType::U8 => Scalar::Int(255),
        DType::Bool => Scalar::Bool(true),
    }
}

/// The lowest value of `d` (-inf for floats): `amax`'s identity.
fn lowest(d: DType) -> Scalar {
    match d {
        DType::F32 | DType::F64 | DType::F16 | DType::BF16 => Scalar::Float(f64::NEG_INFINITY),
        DType::I32 => Scalar::Int(i32::MIN as i64),
        DType::I64 => Scalar::Int(i64::MIN),
        DType::U8 => Scalar::Int(0),
        DType::Bool => Scalar::Bool(false),
    }
}

/// Runs a scan of the contiguous `x` along `d` into `out` (and `indices`).
fn scan(op: ScanOp, out: &Tensor, indices: Option<&Tensor>, x: &Tensor, d: usize) -> Result<()> {
    if out.numel() == 0 {
        return Ok(());
    }
    let s = DimShape::new(x.shape(), d);
    let mut reads = vec![x];
    if let Some(i) = indices {
        reads.push(i);
    }
    let ia = indices.map(|i| i.arg());
    run(
        out,
        &reads,
        ScatterKernel::Scan {
            op,
            out: &out.arg(),
            indices: ia.as_ref(),
            input: &x.arg(),
            s,
        },
    )
}

/// A scatter into `target` (self's layout; widened on a GPU where atomics
/// need it) over positions of `il.shape`.
#[allow(clippy::too_many_arguments)]
fn scatter_into(
    target: &Tensor,
    index: &Tensor,
    il: Layout,
    src: &Tensor,
    sl: Layout,
    dim: usize,
    combine: Combine,
) -> Result<()> {
    let bound = target.shape()[dim];
    scatter_into_layout(
        target,
        target.layout().clone(),
        index,
        il,
        src,
        sl,
        dim,
        combine,
        bound,
    )
}

/// PyTorch's CPU `index_add_` of a float tensor of more than one dim with
/// an alpha other than 1: slice by slice in index order, each through
/// `add_stub(iter, alpha)`, `self + alpha * source` per element, rounded
/// once (f32 and f64: a fused multiply-add, in the vectorised chunks and
/// the scalar tails alike; f16/bf16: in f32, then to the dtype, in the
/// vectorised chunks of 32 elements of a contiguous inner loop) or, in
/// f16/bf16's scalar loop, twice (`alpha * source` rounded to the dtype,
/// then the sum). `alpha` is already self's dtype; the indices are checked.
/// Fixture: `tests/data/oracle_s61.json.gz` (`benches/anchors/gen_oracle_s61.py`).
fn index_add_alpha_cpu(
    this: &Tensor,
    d: usize,
    idx: &Tensor,
    src: &Tensor,
    alpha: Scalar,
) -> Result<()> {
    let dt = this.dtype();
    let a = alpha.to_f64();
    let rows = idx.to_vec_as::<i64>()?;
    for (j, &i) in rows.iter().enumerate() {
        let xs = this.select(d as i64, i)?;
        let ss = src.select(d as i64, j as i64)?;
        if xs.numel() == 0 {
            continue;
        }
        let x = xs.to_vec_as::<f64>()?;
        let s = ss.to_vec_as::<f64>()?;
        let sum = match dt {
            DType::F64 => {
                let v: Vec<f64> = x.iter().zip(&s).map(|(&x, &s)| s.mul_add(a, x)).collect();
                Tensor::from_vec(v, xs.shape(), Device::Cpu)?
            }
            DType::F32 => {
                let a = a as f32;
                let v: Vec<f32> = x
                    .iter()
                    .zip(&s)
                    .map(|(&x, &s)| (s as f32).mul_add(a, x as f32))
                    .collect();
                Tensor::from_vec(v, xs.shape(), Device::Cpu)?
            }
            _ => {
                // f16/bf16: which elements PyTorch's `cpu_kernel_vec` hands
                // to its scalar functor (output, self, source).
                let st = [xs.strides(), xs.strides(), ss.strides()];
                let order = crate::layout::reorder_dims(xs.shape(), None, &st);
                let scalar = crate::layout::pytorch_scalar_loop_mask(
                    xs.shape(),
                    &order,
                    &st,
                    super::elementwise::HALF_VEC_CHUNK,
                )?;
                let round = |v: f32| -> f32 {
                    if dt == DType::F16 {
                        half::f16::from_f32(v).to_f32()
                    } else {
                        half::bf16::from_f32(v).to_f32()
                    }
                };
                let a = a as f32;
                let v: Vec<f32> = x
                    .iter()
                    .zip(&s)
                    .enumerate()
                    .map(|(k, (&x, &s))| {
                        let (x, s) = (x as f32, s as f32);
                        if scalar.as_ref().is_some_and(|m| m[k]) {
                            round(x + round(a * s))
                        } else {
                            round(s.mul_add(a, x))
                        }
                    })
                    .collect();
                Tensor::from_vec(v, xs.shape(), Device::Cpu)?.to_dtype(dt)?
            }
        };
        xs.copy_(&sum)?;
    }
    Ok(())
}

/// [`scatter_into`] with `target` seen through `tl`.
#[allow(clippy::too_many_arguments)]
fn scatter_into_layout(
    target: &Tensor,
    tl: Layout,
    index: &Tensor,
    il: Layout,
    src: &Tensor,
    sl: Layout,
    dim: usize,
    combine: Combine,
    bound: usize,
) -> Result<()> {
    if il.numel() == 0 {
        return Ok(());
    }
    match wide_dtype(target.device(), target.dtype(), combine) {
        None => run(
            target,
            &[index, src],
            ScatterKernel::Scatter {
                combine,
                out: &arg_with(target, tl),
                index: &arg_with(index, il),
                src: &arg_with(src, sl),
                dim,
                bound,
            },
        ),
        Some(w) => {
            // A wide copy of the storage range self covers, scattered into,
            // then narrowed back (every dtype widened here converts back
            // exactly, so elements nothing lands on keep their bits).
            // The target's layout `tl` may reach past the storage
            // (index_put's first dim is addressed by the offsets, its size
            // the number of index positions, which duplicates make larger
            // than the target): the wide buffer is as long as `tl` says,
            // and only the target's own range, the one the checked indices
            // reach, is copied in and back.
            let start = target.offset();
            let own = target.layout().storage_extent().saturating_sub(start);
            let len = own.max(tl.storage_extent().saturating_sub(start));
            let flat = target.as_strided(&[own as i64], &[1], Some(start as i64))?;
            let wide = if len == own {
                flat.to_dtype_contiguous(w)?
            } else {
                let wide = Tensor::zeros(&[len], w, target.device())?;
                wide.narrow(0, 0, own as i64)?.copy_(&flat)?;
                wide
            };
            let wl = Layout {
                offset: tl.offset - start,
                ..tl
            };
            let src_w = src
                .as_strided(
                    &sl.shape.iter().map(|&s| s as i64).collect::<Vec<_>>(),
                    &sl.strides.iter().map(|&s| s as i64).collect::<Vec<_>>(),
                    Some(sl.offset as i64),
                )?
                .to_dtype_contiguous(w)?;
            run(
                &wide,
                &[index, &src_w],
                ScatterKernel::Scatter {
                    combine,
                    out: &arg_with(&wide, wl),
                    index: &arg_with(index, il),
                    src: &src_w.arg(),
                    dim,
                    bound,
                },
            )?;
            flat.copy_(&wide.narrow(0, 0, own as i64)?)?;
            Ok(())
        }
    }
}
