//! Session 82: `take` and `put_` (indexing a tensor as if it were flat, in
//! its logical row-major order, whatever its layout) and
//! `broadcast_tensors`, composed of `index_select`, `index_put_` and
//! `broadcast_to`, so every device at once, with PyTorch's checks.

use super::elementwise::RoundingMode;
use crate::dtype::DType;
use crate::error::{Result, TensorError};
use crate::shape::broadcast_shapes;
use crate::tensor::Tensor;

impl Tensor {
    /// `torch.take(self, index)`: the elements of self at the flat
    /// positions `index` (i64, any shape; negative positions count from the
    /// end) in self's logical row-major order, shaped as `index`. A position
    /// outside `[-numel, numel)` is [`TensorError::Index`] (one read of the
    /// index's range to the host where it is not known).
    ///
    /// ```
    /// use strata_tensor::{Device, Tensor};
    /// let a = Tensor::arange(0.0, 6.0, 1.0, None, Device::Cpu)?.reshape(&[2, 3])?;
    /// let i = Tensor::from_slice(&[0i64, -1, 4, 2], &[2, 2], Device::Cpu)?;
    /// assert_eq!(a.take(&i)?.to_vec::<f32>()?, [0.0, 5.0, 4.0, 2.0]);
    /// // The transpose in its own row-major order: [0, 3, 1, 4, 2, 5].
    /// assert_eq!(a.t()?.take(&i)?.to_vec::<f32>()?, [0.0, 5.0, 2.0, 1.0]);
    /// # Ok::<(), strata_tensor::TensorError>(())
    /// ```
    pub fn take(&self, index: &Tensor) -> Result<Tensor> {
        let flat = self.flat_positions("take", index)?;
        self.reshape(&[-1])?
            .index_select(0, &flat.reshape(&[-1])?)?
            .reshape(&crate::shape::as_i64(index.shape()))
    }

    /// `self.put_(index, source, accumulate)`: writes `source`'s elements
    /// (self's dtype, as many as `index` has) at the flat positions `index`
    /// of self (i64, negative ones counting from the end) in self's logical
    /// row-major order, whatever its layout; with `accumulate` adds them
    /// (repeated positions add up). Where a position repeats without
    /// `accumulate`, which write lands is unspecified, as in PyTorch. The
    /// checks come first (self is unchanged on error): the dtypes, the
    /// counts, the positions' range ([`TensorError::Index`]).
    ///
    /// ```
    /// use strata_tensor::{DType, Device, Tensor};
    /// let a = Tensor::zeros(&[2, 3], DType::F32, Device::Cpu)?;
    /// let i = Tensor::from_slice(&[0i64, -1, 0], &[3], Device::Cpu)?;
    /// let v = Tensor::from_slice(&[1.0f32, 2.0, 3.0], &[3], Device::Cpu)?;
    /// a.put_(&i, &v, true)?;
    /// assert_eq!(a.to_vec::<f32>()?, [4.0, 0.0, 0.0, 0.0, 0.0, 2.0]);
    /// # Ok::<(), strata_tensor::TensorError>(())
    /// ```
    pub fn put_(&self, index: &Tensor, source: &Tensor, accumulate: bool) -> Result<Tensor> {
        const OP: &str = "put_";
        if source.dtype() != self.dtype() {
            return Err(TensorError::dtype(
                OP,
                format!(
                    "self and source must have the same dtype, got {} and {}; convert the source \
                     (to_dtype)",
                    self.dtype(),
                    source.dtype()
                ),
            ));
        }
        if source.numel() != index.numel() {
            return Err(TensorError::index(
                OP,
                format!(
                    "source and index must have the same number of elements, got {} and {}",
                    source.numel(),
                    index.numel()
                ),
            ));
        }
        let flat = self.flat_positions(OP, index)?.reshape(&[-1])?;
        // A 0-d self is written through its one-element view.
        let target = if self.ndim() == 0 {
            self.unsqueeze(0)?
        } else {
            self.clone()
        };
        // The flat positions as one index per dim (row-major).
        let mut per_dim: Vec<Tensor> = Vec::with_capacity(target.ndim());
        let mut rest = flat;
        for &size in target.shape().iter().rev() {
            per_dim.push(rest.remainder(size as i64)?);
            rest = rest.div_mode(size as i64, RoundingMode::Floor)?;
        }
        per_dim.reverse();
        let indices: Vec<Option<&Tensor>> = per_dim.iter().map(Some).collect();
        target.index_put_(&indices, &source.reshape(&[-1])?, accumulate)?;
        Ok(self.clone())
    }

    /// `index` (i64) as positions in `[0, numel)`: negative ones wrapped,
    /// every one checked.
    fn flat_positions(&self, op: &'static str, index: &Tensor) -> Result<Tensor> {
        if index.dtype() != DType::I64 {
            return Err(TensorError::dtype(
                op,
                format!(
                    "the index must be i64, got {}; convert it (to_dtype(DType::I64))",
                    index.dtype()
                ),
            ));
        }
        let n = self.numel() as i64;
        if index.numel() == 0 {
            return Ok(index.clone());
        }
        if n == 0 {
            return Err(TensorError::index(
                op,
                format!(
                    "tried to index an empty tensor with {} positions",
                    index.numel()
                ),
            ));
        }
        let outside = index.lt(-n)?.logical_or(&index.ge(n)?)?.any()?;
        if outside.item::<bool>()? {
            return Err(TensorError::index(
                op,
                format!("a position lies outside [-{n}, {n}) (self has {n} elements)"),
            ));
        }
        Tensor::where_cond(&index.lt(0)?, &index.add(n)?, index)
    }

    /// `torch.broadcast_tensors(tensors)`: every tensor expanded (a view) to
    /// the shape they broadcast to; shapes that do not broadcast are
    /// [`TensorError::Broadcast`].
    ///
    /// ```
    /// use strata_tensor::{DType, Device, Tensor};
    /// let a = Tensor::ones(&[3, 1], DType::F32, Device::Cpu)?;
    /// let b = Tensor::ones(&[4], DType::I64, Device::Cpu)?;
    /// let v = Tensor::broadcast_tensors(&[&a, &b])?;
    /// assert_eq!((v[0].shape(), v[1].shape()), (&[3usize, 4][..], &[3usize, 4][..]));
    /// # Ok::<(), strata_tensor::TensorError>(())
    /// ```
    pub fn broadcast_tensors(tensors: &[&Tensor]) -> Result<Vec<Tensor>> {
        let mut shape: Vec<usize> = Vec::new();
        for t in tensors {
            shape = broadcast_shapes("broadcast_tensors", &shape, t.shape())?;
        }
        tensors.iter().map(|t| t.broadcast_to(&shape)).collect()
    }
}
