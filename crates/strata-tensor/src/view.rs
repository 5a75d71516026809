//! View ops: new layouts over the same storage (no element is copied, except
//! by `reshape`/`flatten` when no view exists, as in PyTorch).

use crate::error::{Result, TensorError};
use crate::layout::Layout;
use crate::shape;
use crate::tensor::Tensor;

impl Tensor {
    /// A view with another shape (one `-1` is inferred); fails with
    /// [`TensorError::Layout`] when the strides do not allow it.
    ///
    /// ```
    /// use strata_tensor::{Tensor, DType, Device};
    /// let a = Tensor::zeros(&[3, 4], DType::F32, Device::Cpu).unwrap();
    /// assert_eq!(a.view(&[2, -1]).unwrap().shape(), &[2, 6]);
    /// assert!(a.t().unwrap().view(&[12]).is_err());
    /// ```
    pub fn view(&self, shape: &[i64]) -> Result<Tensor> {
        let target = shape::infer_shape("view", shape, self.numel())?;
        match shape::view_strides(self.shape(), self.strides(), &target) {
            Some(strides) => Ok(self.with_layout(Layout {
                shape: target,
                strides,
                offset: self.offset(),
            })),
            None => Err(TensorError::Layout {
                shape: self.shape().to_vec(),
                strides: self.strides().to_vec(),
                target: shape.to_vec(),
            }),
        }
    }

    /// Like [`Tensor::view`] where possible, else a contiguous copy.
    pub fn reshape(&self, shape: &[i64]) -> Result<Tensor> {
        let target = shape::infer_shape("reshape", shape, self.numel())?;
        match shape::view_strides(self.shape(), self.strides(), &target) {
            Some(strides) => Ok(self.with_layout(Layout {
                shape: target,
                strides,
                offset: self.offset(),
            })),
            None => {
                let c = self.clone_contiguous()?;
                Ok(c.with_layout(Layout::contiguous(&target)))
            }
        }
    }

    /// Swaps two dims.
    pub fn transpose(&self, d0: i64, d1: i64) -> Result<Tensor> {
        Ok(self.with_layout(self.layout().transpose(d0, d1)?))
    }

    /// Transpose of a 2-D tensor (0-d and 1-D unchanged).
    pub fn t(&self) -> Result<Tensor> {
        Ok(self.with_layout(self.layout().t()?))
    }

    /// Reorders the dims.
    pub fn permute(&self, dims: &[i64]) -> Result<Tensor> {
        Ok(self.with_layout(self.layout().permute(dims)?))
    }

    /// `length` elements of `dim` from `start` (which may be negative).
    pub fn narrow(&self, dim: i64, start: i64, length: i64) -> Result<Tensor> {
        Ok(self.with_layout(self.layout().narrow(dim, start, length)?))
    }

    /// Index `index` of `dim`, dropping the dim.
    pub fn select(&self, dim: i64, index: i64) -> Result<Tensor> {
        Ok(self.with_layout(self.layout().select(dim, index)?))
    }

    /// `x[..., start:end:step]` along `dim` (Python's slice rules, step >= 1).
    ///
    /// ```
    /// use strata_tensor::{Tensor, Device};
    /// let a = Tensor::arange(0, 10, 1, None, Device::Cpu).unwrap();
    /// let s = a.slice(0, Some(1), None, 3).unwrap();
    /// assert_eq!(s.to_vec::<i64>().unwrap(), vec![1, 4, 7]);
    /// ```
    pub fn slice(
        &self,
        dim: i64,
        start: Option<i64>,
        end: Option<i64>,
        step: i64,
    ) -> Result<Tensor> {
        Ok(self.with_layout(self.layout().slice(dim, start, end, step)?))
    }

    /// The windows of `size` elements every `step` along `dim` (a view, as
    /// PyTorch's `x.unfold(dim, size, step)`): `dim` becomes the window
    /// count `(len - size) / step + 1` and a new last dim of `size` holds
    /// each window. Windows overlap where `step < size`, so the view is
    /// read-only in practice (an in-place op on it is refused).
    ///
    /// ```
    /// use strata_tensor::{Tensor, Device};
    /// let a = Tensor::arange(0, 7, 1, None, Device::Cpu)?;
    /// let w = a.unfold(0, 3, 2)?;
    /// assert_eq!(w.shape(), &[3, 3]);
    /// assert_eq!(w.to_vec::<i64>()?, [0, 1, 2, 2, 3, 4, 4, 5, 6]);
    /// # Ok::<(), strata_tensor::TensorError>(())
    /// ```
    pub fn unfold(&self, dim: i64, size: i64, step: i64) -> Result<Tensor> {
        Ok(self.with_layout(self.layout().unfold(dim, size, step)?))
    }

    /// Broadcast view (stride 0 on stretched dims); `-1` keeps a size.
    pub fn expand(&self, shape: &[i64]) -> Result<Tensor> {
        Ok(self.with_layout(self.layout().expand(shape)?))
    }

    /// `self.expand_as(other)`: [`expand`](Tensor::expand) to `other`'s shape.
    pub fn expand_as(&self, other: &Tensor) -> Result<Tensor> {
        self.broadcast_to(other.shape())
    }

    /// `self.view_as(other)`: [`view`](Tensor::view) to `other`'s shape.
    pub fn view_as(&self, other: &Tensor) -> Result<Tensor> {
        self.view(&crate::shape::as_i64(other.shape()))
    }

    /// `self.reshape_as(other)`: [`reshape`](Tensor::reshape) to `other`'s
    /// shape (a view when possible).
    ///
    /// ```
    /// use strata_tensor::{DType, Device, Tensor};
    /// let a = Tensor::arange(0, 6, 1, None, Device::Cpu)?;
    /// let like = Tensor::zeros(&[2, 3], DType::F32, Device::Cpu)?;
    /// assert_eq!(a.reshape_as(&like)?.shape(), &[2, 3]);
    /// assert_eq!(a.view_as(&like)?.type_as(&like)?.dtype(), DType::F32);
    /// let row = Tensor::ones(&[3], DType::F32, Device::Cpu)?;
    /// assert_eq!(row.expand_as(&like)?.strides(), &[0, 1]);
    /// # Ok::<(), strata_tensor::TensorError>(())
    /// ```
    pub fn reshape_as(&self, other: &Tensor) -> Result<Tensor> {
        self.reshape(&crate::shape::as_i64(other.shape()))
    }

    /// Broadcast view to `shape`. A size above `i64::MAX` (no tensor has
    /// one) is [`TensorError::SizeOverflow`]; it is never read as a negative
    /// `expand` size (`usize::MAX as i64` is -1, "keep this size").
    pub fn broadcast_to(&self, shape: &[usize]) -> Result<Tensor> {
        let s = shape
            .iter()
            .map(|&x| i64::try_from(x))
            .collect::<std::result::Result<Vec<i64>, _>>()
            .map_err(|_| {
                TensorError::overflow(
                    "broadcast_to",
                    format!(
                        "shape {shape:?} has a size above {} (i64::MAX), the largest a tensor may have",
                        shape::MAX_NUMEL
                    ),
                )
            })?;
        self.expand(&s)
    }

    /// Removes every size-1 dim.
    pub fn squeeze(&self) -> Result<Tensor> {
        Ok(self.with_layout(self.layout().squeeze(None)?))
    }

    /// Removes the listed dims where their size is 1.
    pub fn squeeze_dims(&self, dims: &[i64]) -> Result<Tensor> {
        Ok(self.with_layout(self.layout().squeeze(Some(dims))?))
    }

    /// Inserts a size-1 dim at `dim`.
    pub fn unsqueeze(&self, dim: i64) -> Result<Tensor> {
        Ok(self.with_layout(self.layout().unsqueeze(dim)?))
    }

    /// Merges dims `start..=end` into one (a view when possible, like reshape).
    pub fn flatten(&self, start: i64, end: i64) -> Result<Tensor> {
        if self.ndim() == 0 {
            shape::normalize_dim("flatten", start, 0)?;
            shape::normalize_dim("flatten", end, 0)?;
            return self.reshape(&[1]);
        }
        let s = shape::normalize_dim("flatten", start, self.ndim())?;
        let e = shape::normalize_dim("flatten", end, self.ndim())?;
        if s > e {
            return Err(TensorError::dim(
                "flatten",
                format!(
                    "start dim {start} comes after end dim {end} (shape {:?})",
                    self.shape()
                ),
            ));
        }
        // PyTorch returns the tensor itself when there is nothing to merge
        // (its strides on dims of size 1 included).
        if s == e {
            return Ok(self.clone());
        }
        let mut target: Vec<i64> = self.shape()[..s].iter().map(|&x| x as i64).collect();
        target.push(shape::numel(&self.shape()[s..=e]) as i64);
        target.extend(self.shape()[e + 1..].iter().map(|&x| x as i64));
        self.reshape(&target)
    }

    /// A view with explicit sizes, strides and storage offset (the tensor's own
    /// offset when `None`), checked against the storage's bounds.
    pub fn as_strided(&self, size: &[i64], stride: &[i64], offset: Option<i64>) -> Result<Tensor> {
        let off = offset.unwrap_or(self.offset() as i64);
        Ok(self.with_layout(Layout::as_strided(size, stride, off, self.storage_len())?))
    }
}
