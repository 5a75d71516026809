//! Sorting along one dim: `sort`, `argsort`, `msort`, `topk`, `kthvalue`,
//! `median` and `nanmedian` (of a dim and of every element).
//!
//! PyTorch's order on every device: NaN is greater than +inf (last in an
//! ascending sort, first in a descending one), -0.0 and 0.0 are equal, and
//! equal elements keep their input order: every sort here is stable, with
//! `stable = false` too, so that results are deterministic and the same on
//! every device (PyTorch's CPU sort with `stable = false` is `std::sort`:
//! stable for rows of up to 16 elements, its insertion sort, and in an
//! unspecified order among ties beyond; with `stable = true` it is the
//! order here, bit for bit). The input is
//! seen as contiguous rows along the dim (a copy unless the dim is already
//! innermost and dense) and the backend sorts the rows: `backend::cpu::sort`
//! (packed key/position integers, rows across threads, a selection instead
//! of a full sort for `topk`'s small `k`, `kthvalue` and `median`) and the
//! CUDA `backend::cuda::sort` (order-preserving keys sorted in shared memory
//! per chunk, then merged run by run; `topk` keeps only the best `k` of each
//! chunk and run).

use crate::backend::{SortKernel, SortPick};
use crate::dtype::DType;
use crate::error::{Result, TensorError};
use crate::shape::normalize_dim;
use crate::storage::WriteGuard;
use crate::tensor::Tensor;

impl Tensor {
    /// `torch.sort(self, dim, descending, stable)`: the elements along `dim`
    /// in order, and their positions along `dim` (i64). NaN is greater than
    /// +inf, -0.0 equals 0.0 (the values keep their own bits), and equal
    /// elements keep their input order, with `stable` false too (the flag
    /// is accepted for PyTorch's signature: PyTorch's CPU kernel then calls
    /// `std::sort`, which leaves ties beyond 16 elements in an unspecified
    /// order; strata's order is always the stable one, PyTorch's with
    /// `stable = true`). The results are laid out as PyTorch lays them out: the
    /// input's strides when it is non-overlapping and dense (a transposed
    /// input gives transposed results), else dense in the order of its
    /// strides. A 0-d input gives itself and index 0.
    ///
    /// Errors: `dim` out of range ([`TensorError::Dim`]).
    ///
    /// ```
    /// use strata_tensor::{Tensor, Device};
    /// let x = Tensor::from_slice(&[2.0f32, f32::NAN, -1.0, 2.0], &[4], Device::Cpu).unwrap();
    /// let (v, i) = x.sort(0, false, true).unwrap();
    /// assert_eq!(i.to_vec::<i64>().unwrap(), vec![2, 0, 3, 1]);
    /// let (_, i) = x.sort(-1, true, false).unwrap();
    /// assert_eq!(i.to_vec::<i64>().unwrap(), vec![1, 0, 3, 2]);
    /// assert!(v.to_vec::<f32>().unwrap()[3].is_nan());
    /// ```
    pub fn sort(&self, dim: i64, descending: bool, stable: bool) -> Result<(Tensor, Tensor)> {
        let _ = stable;
        const OP: &str = "sort";
        let d = normalize_dim(OP, dim, self.ndim())?;
        let values = self.uninit_preserving(OP, self.dtype())?;
        let indices = self.uninit_preserving(OP, DType::I64)?;
        if self.ndim() == 0 {
            values.copy_(self)?;
            indices.fill_(0)?;
            return Ok((values, indices));
        }
        // Rows in the order of the result's strides, the sorted dim last:
        // when that dim is innermost in the result (and it is dense, as it
        // is) the kernel writes the result in place.
        let mut order: Vec<usize> = (0..self.ndim()).filter(|&i| i != d).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(values.strides()[i]));
        order.push(d);
        let n = self.shape()[d];
        let pick = SortPick::Head(n);
        self.sort_rows(OP, &order, n, descending, pick, &values, &indices)?;
        Ok((values, indices))
    }

    /// `torch.argsort(self, dim, descending, stable)`: the indices of
    /// [`Tensor::sort`] (stable in every case).
    ///
    /// ```
    /// use strata_tensor::{Tensor, Device};
    /// let x = Tensor::from_slice(&[3i64, 1, 3, 1], &[4], Device::Cpu).unwrap();
    /// let i = x.argsort(0, true, false).unwrap();
    /// assert_eq!(i.to_vec::<i64>().unwrap(), vec![0, 2, 1, 3]);
    /// ```
    pub fn argsort(&self, dim: i64, descending: bool, stable: bool) -> Result<Tensor> {
        Ok(self.sort(dim, descending, stable)?.1)
    }

    /// `torch.msort(self)`: the values of [`Tensor::sort`] along dim 0,
    /// ascending.
    ///
    /// ```
    /// use strata_tensor::{Tensor, Device};
    /// let x = Tensor::from_slice(&[3i32, 0, 1, 2], &[2, 2], Device::Cpu).unwrap();
    /// assert_eq!(x.msort().unwrap().to_vec::<i32>().unwrap(), vec![1, 0, 3, 2]);
    /// ```
    pub fn msort(&self) -> Result<Tensor> {
        Ok(self.sort(0, false, false)?.0)
    }

    /// `torch.topk(self, k, dim, largest, sorted)`: the `k` largest elements
    /// along `dim` (the smallest without `largest`), largest first (smallest
    /// first), and their positions along `dim` (i64); contiguous results
    /// whose `dim` has size `k`. NaN counts as greater than +inf.
    ///
    /// Among equal elements PyTorch leaves the choice of indices (and their
    /// order) unspecified (its CPU kernel uses an unstable partial sort);
    /// strata takes them as a stable sort does: the first in input order
    /// first, on every device. With `sorted` false PyTorch's order is
    /// unspecified too; strata returns the sorted order in every case. A
    /// 0-d input takes `k` 0 or 1 and gives itself and index 0 (both, as
    /// PyTorch, even for `k` 0).
    ///
    /// Errors: `dim` out of range ([`TensorError::Dim`]), `k` larger than the
    /// dim ([`TensorError::Index`]), a bool input ([`TensorError::DType`],
    /// as PyTorch's CPU kernel).
    ///
    /// ```
    /// use strata_tensor::{Tensor, Device};
    /// let x = Tensor::from_slice(&[1.0f32, 5.0, 3.0, 5.0, 0.0], &[5], Device::Cpu).unwrap();
    /// let (v, i) = x.topk(3, 0, true, true).unwrap();
    /// assert_eq!(v.to_vec::<f32>().unwrap(), vec![5.0, 5.0, 3.0]);
    /// assert_eq!(i.to_vec::<i64>().unwrap(), vec![1, 3, 2]);
    /// let (v, _) = x.topk(2, -1, false, true).unwrap();
    /// assert_eq!(v.to_vec::<f32>().unwrap(), vec![0.0, 1.0]);
    /// ```
    pub fn topk(
        &self,
        k: usize,
        dim: i64,
        largest: bool,
        sorted: bool,
    ) -> Result<(Tensor, Tensor)> {
        let _ = sorted;
        const OP: &str = "topk";
        let d = normalize_dim(OP, dim, self.ndim())?;
        let n = if self.ndim() == 0 { 1 } else { self.shape()[d] };
        if k > n {
            return Err(TensorError::Index {
                op: OP,
                msg: format!(
                    "selected index k = {k} out of range: dim {dim} has {n} elements (shape {:?})",
                    self.shape()
                ),
            });
        }
        if self.dtype() == DType::Bool {
            return Err(TensorError::dtype(
                OP,
                "not defined for dtype bool (as PyTorch's CPU kernel); convert it first (to_dtype(DType::U8))",
            ));
        }
        if self.ndim() == 0 {
            return self.scalar_pick(OP);
        }
        let mut shape = self.shape().to_vec();
        shape[d] = k;
        let values = Tensor::uninit(OP, &shape, self.dtype(), self.device())?;
        let indices = Tensor::uninit(OP, &shape, DType::I64, self.device())?;
        let order = dim_last(self.ndim(), d);
        self.sort_rows(OP, &order, n, largest, SortPick::Head(k), &values, &indices)?;
        Ok((values, indices))
    }

    /// `torch.kthvalue(self, k, dim, keepdim)`: the `k`-th smallest element
    /// along `dim` (`k` from 1; NaN counts as greater than +inf) and its
    /// position along `dim` (i64), with `dim` removed (kept as size 1 with
    /// `keepdim`); contiguous results.
    ///
    /// Among equal elements PyTorch leaves the index unspecified (its
    /// quickselect's choice); strata returns the one a stable sort puts
    /// `k`-th, on every device. A 0-d input takes `k` 1.
    ///
    /// Errors: `dim` out of range ([`TensorError::Dim`]), a dim of size 0
    /// ([`TensorError::Empty`]), `k` not in `1..=n` ([`TensorError::Index`]),
    /// a bool input ([`TensorError::DType`]).
    ///
    /// ```
    /// use strata_tensor::{Tensor, Device};
    /// let x = Tensor::from_slice(&[4i64, 1, 3, 1, 2, 5], &[2, 3], Device::Cpu).unwrap();
    /// let (v, i) = x.kthvalue(2, 1, false).unwrap();
    /// assert_eq!(v.to_vec::<i64>().unwrap(), vec![3, 2]);
    /// assert_eq!(i.to_vec::<i64>().unwrap(), vec![2, 1]);
    /// ```
    pub fn kthvalue(&self, k: usize, dim: i64, keepdim: bool) -> Result<(Tensor, Tensor)> {
        const OP: &str = "kthvalue";
        let (d, n) = self.reduce_dim(OP, dim)?;
        if k == 0 || k > n {
            return Err(TensorError::Index {
                op: OP,
                msg: format!(
                    "selected number k = {k} out of range for dimension {dim} of {n} elements (k counts from 1)"
                ),
            });
        }
        self.pick_along(OP, d, keepdim, SortPick::Nth(k - 1))
    }

    /// `torch.median(self, dim, keepdim)`: the lower median along `dim` (of
    /// `n` elements, the `(n - 1) / 2`-th smallest, counting from 0) and its
    /// position (i64), with `dim` removed (kept as size 1 with `keepdim`).
    /// A slice holding a NaN gives NaN and the position of its first NaN,
    /// as PyTorch's.
    ///
    /// Among equal elements PyTorch leaves the index unspecified; strata
    /// returns the one a stable sort puts at the median's position, on
    /// every device. A 0-d input gives itself and index 0. (PyTorch 2.15's
    /// CPU `median`/`nanmedian` along a dim of an input expanded along
    /// another dim, stride 0, returns values that are not in the input,
    /// `torch.median(torch.arange(5.).expand(3, 5), 0)` among them; strata
    /// returns the medians of the values, those PyTorch gives for the same
    /// values in a contiguous tensor.)
    ///
    /// Errors: `dim` out of range ([`TensorError::Dim`]), a dim of size 0
    /// ([`TensorError::Empty`]), a bool input ([`TensorError::DType`]).
    ///
    /// ```
    /// use strata_tensor::{Tensor, Device};
    /// let x = Tensor::from_slice(&[4.0f32, 1.0, 3.0, 2.0, f32::NAN, 0.0], &[2, 3], Device::Cpu).unwrap();
    /// let (v, i) = x.median_dim(1, false).unwrap();
    /// assert_eq!(v.to_vec::<f32>().unwrap()[0], 3.0);
    /// assert!(v.to_vec::<f32>().unwrap()[1].is_nan());
    /// assert_eq!(i.to_vec::<i64>().unwrap(), vec![2, 1]);
    /// ```
    pub fn median_dim(&self, dim: i64, keepdim: bool) -> Result<(Tensor, Tensor)> {
        const OP: &str = "median";
        let (d, _) = self.reduce_dim(OP, dim)?;
        self.pick_along(OP, d, keepdim, SortPick::Median { skip_nan: false })
    }

    /// `torch.nanmedian(self, dim, keepdim)`: [`Tensor::median_dim`]
    /// ignoring NaNs: the lower median of a slice's other elements, and NaN
    /// (with the position of its first NaN, 0) for a slice of NaNs only.
    ///
    /// ```
    /// use strata_tensor::{Tensor, Device};
    /// let x = Tensor::from_slice(&[f32::NAN, 1.0, 3.0, 2.0], &[4], Device::Cpu).unwrap();
    /// let (v, i) = x.nanmedian_dim(0, false).unwrap();
    /// assert_eq!((v.to_vec::<f32>().unwrap()[0], i.to_vec::<i64>().unwrap()[0]), (2.0, 3));
    /// ```
    pub fn nanmedian_dim(&self, dim: i64, keepdim: bool) -> Result<(Tensor, Tensor)> {
        const OP: &str = "nanmedian";
        let (d, _) = self.reduce_dim(OP, dim)?;
        self.pick_along(OP, d, keepdim, SortPick::Median { skip_nan: true })
    }

    /// `torch.median(self)`: the lower median of every element (the
    /// `(n - 1) / 2`-th smallest), as a 0-d tensor; NaN when any element is
    /// NaN. An empty input gives NaN converted to its dtype, as PyTorch's
    /// (`i64::MIN` for i64, `i32::MIN` for i32, 0 for u8).
    ///
    /// Errors: a bool input ([`TensorError::DType`]).
    ///
    /// ```
    /// use strata_tensor::{Tensor, Device};
    /// let x = Tensor::from_slice(&[4i32, 1, 3, 2], &[2, 2], Device::Cpu).unwrap();
    /// assert_eq!(x.median().unwrap().to_vec::<i32>().unwrap(), vec![2]);
    /// ```
    pub fn median(&self) -> Result<Tensor> {
        self.median_all("median", false)
    }

    /// `torch.nanmedian(self)`: [`Tensor::median`] ignoring NaNs (NaN when
    /// every element is NaN, or there is none).
    ///
    /// ```
    /// use strata_tensor::{Tensor, Device};
    /// let x = Tensor::from_slice(&[f32::NAN, 1.0, 3.0], &[3], Device::Cpu).unwrap();
    /// assert_eq!(x.nanmedian().unwrap().to_vec::<f32>().unwrap(), vec![1.0]);
    /// ```
    pub fn nanmedian(&self) -> Result<Tensor> {
        self.median_all("nanmedian", true)
    }

    fn median_all(&self, op: &'static str, skip_nan: bool) -> Result<Tensor> {
        if self.dtype() == DType::Bool {
            return Err(TensorError::unsupported(op, DType::Bool));
        }
        if self.numel() == 0 {
            // PyTorch: `full({}, NaN)` converted to the input's dtype.
            return Tensor::full(&[], f32::NAN, DType::F32, self.device())?.to_dtype(self.dtype());
        }
        let flat = self.reshape(&[-1])?;
        let (v, _) = flat.pick_along(op, 0, false, SortPick::Median { skip_nan })?;
        Ok(v)
    }

    /// Checks a dim reduced by `kthvalue`/`median`: in range, not of size
    /// 0, and the dtype not bool. Returns the dim and its size (1 for a 0-d
    /// tensor).
    fn reduce_dim(&self, op: &'static str, dim: i64) -> Result<(usize, usize)> {
        let d = normalize_dim(op, dim, self.ndim())?;
        let n = if self.ndim() == 0 { 1 } else { self.shape()[d] };
        if n == 0 {
            return Err(TensorError::Empty {
                op,
                shape: self.shape().to_vec(),
            });
        }
        if self.dtype() == DType::Bool {
            return Err(TensorError::unsupported(op, DType::Bool));
        }
        Ok((d, n))
    }

    /// One element per slice along `d` (`pick` is `Nth` or `Median`), as
    /// contiguous values and indices with `d` of size 1 (removed unless
    /// `keepdim`).
    fn pick_along(
        &self,
        op: &'static str,
        d: usize,
        keepdim: bool,
        pick: SortPick,
    ) -> Result<(Tensor, Tensor)> {
        if self.ndim() == 0 {
            return self.scalar_pick(op);
        }
        let mut shape = self.shape().to_vec();
        let n = shape[d];
        shape[d] = 1;
        let values = Tensor::uninit(op, &shape, self.dtype(), self.device())?;
        let indices = Tensor::uninit(op, &shape, DType::I64, self.device())?;
        let order = dim_last(self.ndim(), d);
        self.sort_rows(op, &order, n, false, pick, &values, &indices)?;
        if keepdim {
            Ok((values, indices))
        } else {
            let dd = [d as i64];
            Ok((values.squeeze_dims(&dd)?, indices.squeeze_dims(&dd)?))
        }
    }

    /// A 0-d input's one element and index 0 (fresh tensors).
    fn scalar_pick(&self, op: &'static str) -> Result<(Tensor, Tensor)> {
        let values = Tensor::uninit(op, &[], self.dtype(), self.device())?;
        values.copy_(self)?;
        let indices = Tensor::zeros(&[], DType::I64, self.device())?;
        Ok((values, indices))
    }

    /// Sorts the rows of `self` along its dim `order.last()` (`n` elements;
    /// the other dims in `order` give the rows' order) into `values` and
    /// `indices`, whose sizes are self's with that dim of size
    /// `pick.width()`: written in place when their permutation by `order`
    /// is contiguous, else through contiguous temporaries copied in.
    #[allow(clippy::too_many_arguments)]
    fn sort_rows(
        &self,
        op: &'static str,
        order: &[usize],
        n: usize,
        descending: bool,
        pick: SortPick,
        values: &Tensor,
        indices: &Tensor,
    ) -> Result<()> {
        if values.numel() == 0 {
            return Ok(());
        }
        crate::ops::elementwise::same_device(op, self, values)?;
        let perm: Vec<i64> = order.iter().map(|&i| i as i64).collect();
        let x = self.permute(&perm)?.contiguous()?;
        let (vp, ip) = (values.permute(&perm)?, indices.permute(&perm)?);
        let direct = vp.is_contiguous() && ip.is_contiguous();
        let (vo, io) = if direct {
            (vp.clone(), ip.clone())
        } else {
            (
                Tensor::uninit(op, vp.shape(), vp.dtype(), vp.device())?,
                Tensor::uninit(op, ip.shape(), DType::I64, ip.device())?,
            )
        };
        let rows = x.numel() / n;
        {
            let be = vo.backend()?;
            let _g = WriteGuard::lock(&[vo.storage(), io.storage()], &[x.storage()]);
            be.sort(SortKernel {
                values: &vo.arg(),
                indices: &io.arg(),
                input: &x.arg(),
                rows,
                n,
                descending,
                pick,
            })?;
        }
        if !direct {
            vp.copy_(&vo)?;
            ip.copy_(&io)?;
        }
        indices.remember_value_range(0, n as i64 - 1);
        Ok(())
    }
}

/// The dims `0..ndim` with `d` moved last.
fn dim_last(ndim: usize, d: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..ndim).filter(|&i| i != d).collect();
    order.push(d);
    order
}
