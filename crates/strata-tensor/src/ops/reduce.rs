//! Reductions over dims, with `keepdim`.

use crate::backend::ReduceOp;
use crate::dtype::DType;
use crate::error::{Result, TensorError};
use crate::shape;
use crate::storage::AccessGuard;
use crate::tensor::Tensor;

impl Tensor {
    /// Normalised reduced dims (`None` or empty: all) and the output shape.
    fn reduced_dims(
        &self,
        op: &'static str,
        dims: Option<&[i64]>,
        keepdim: bool,
    ) -> Result<(Vec<usize>, Vec<usize>)> {
        let nd = self.ndim();
        let dims = match dims {
            Some(ds) if !ds.is_empty() => {
                let d = shape::normalize_dims(op, ds, nd)?;
                if nd == 0 {
                    vec![]
                } else {
                    d
                }
            }
            _ => (0..nd).collect(),
        };
        let out_shape = (0..nd)
            .filter_map(|d| {
                if dims.contains(&d) {
                    keepdim.then_some(1)
                } else {
                    Some(self.shape()[d])
                }
            })
            .collect();
        Ok((dims, out_shape))
    }

    fn run_reduce(
        &self,
        op: ReduceOp,
        dims: &[usize],
        values: Option<&Tensor>,
        indices: Option<&Tensor>,
    ) -> Result<()> {
        let be = self.backend()?;
        let out = values.or(indices).expect("an output");
        let _g = AccessGuard::lock(Some(out.storage()), &[self.storage()]);
        let _g2 = match (values, indices) {
            (Some(_), Some(i)) => Some(AccessGuard::lock(Some(i.storage()), &[])),
            _ => None,
        };
        be.reduce(
            op,
            values.map(|t| t.arg()).as_ref(),
            indices.map(|t| t.arg()).as_ref(),
            &self.arg(),
            dims,
        )
    }

    /// Sum over `dims` (all when `None` or empty). Integer and bool inputs
    /// sum to i64; f16/bf16 accumulate in f32.
    ///
    /// ```
    /// use strata_tensor::{Tensor, Device};
    /// let a = Tensor::from_slice(&[1i32, 2, 3, 4], &[2, 2], Device::Cpu).unwrap();
    /// assert_eq!(a.sum(Some(&[0]), false).unwrap().to_vec::<i64>().unwrap(), vec![4, 6]);
    /// assert_eq!(a.sum(None, true).unwrap().shape(), &[1, 1]);
    /// ```
    pub fn sum(&self, dims: Option<&[i64]>, keepdim: bool) -> Result<Tensor> {
        let (dims, out_shape) = self.reduced_dims("sum", dims, keepdim)?;
        let dtype = if self.dtype().is_float() {
            self.dtype()
        } else {
            DType::I64
        };
        let input = self.to_dtype(dtype)?;
        let out = Tensor::empty(&out_shape, dtype, self.device())?;
        input.run_reduce(ReduceOp::Sum, &dims, Some(&out), None)?;
        Ok(out)
    }

    /// Mean over `dims` (float dtypes only).
    pub fn mean(&self, dims: Option<&[i64]>, keepdim: bool) -> Result<Tensor> {
        if !self.dtype().is_float() {
            return Err(TensorError::dtype(
                "mean",
                format!("mean needs a float dtype, got {}", self.dtype()),
            ));
        }
        let (dims, out_shape) = self.reduced_dims("mean", dims, keepdim)?;
        let out = Tensor::empty(&out_shape, self.dtype(), self.device())?;
        self.run_reduce(ReduceOp::Mean, &dims, Some(&out), None)?;
        Ok(out)
    }

    fn extreme_all(&self, op: ReduceOp, name: &'static str) -> Result<Tensor> {
        if self.numel() == 0 {
            return Err(TensorError::Empty {
                op: name,
                shape: self.shape().to_vec(),
            });
        }
        let dims: Vec<usize> = (0..self.ndim()).collect();
        let out = Tensor::empty(&[], self.dtype(), self.device())?;
        self.run_reduce(op, &dims, Some(&out), None)?;
        Ok(out)
    }

    fn extreme_dim(
        &self,
        op: ReduceOp,
        name: &'static str,
        dim: i64,
        keepdim: bool,
    ) -> Result<(Tensor, Tensor)> {
        let (dims, out_shape) = self.reduced_dims(name, Some(&[dim]), keepdim)?;
        if dims.iter().any(|&d| self.shape()[d] == 0) {
            return Err(TensorError::Empty {
                op: name,
                shape: self.shape().to_vec(),
            });
        }
        let values = Tensor::empty(&out_shape, self.dtype(), self.device())?;
        let indices = Tensor::empty(&out_shape, DType::I64, self.device())?;
        self.run_reduce(op, &dims, Some(&values), Some(&indices))?;
        Ok((values, indices))
    }

    /// The largest element (NaN counts as the largest), as a 0-d tensor.
    pub fn max(&self) -> Result<Tensor> {
        self.extreme_all(ReduceOp::Max, "max")
    }

    /// The smallest element (NaN counts as the smallest), as a 0-d tensor.
    pub fn min(&self) -> Result<Tensor> {
        self.extreme_all(ReduceOp::Min, "min")
    }

    /// Largest values along `dim` and their (first) indices.
    pub fn max_dim(&self, dim: i64, keepdim: bool) -> Result<(Tensor, Tensor)> {
        self.extreme_dim(ReduceOp::Max, "max", dim, keepdim)
    }

    /// Smallest values along `dim` and their (first) indices.
    pub fn min_dim(&self, dim: i64, keepdim: bool) -> Result<(Tensor, Tensor)> {
        self.extreme_dim(ReduceOp::Min, "min", dim, keepdim)
    }

    /// Index of the first maximum along `dim`, or into the row-major
    /// flattening when `dim` is `None`.
    pub fn argmax(&self, dim: Option<i64>, keepdim: bool) -> Result<Tensor> {
        if self.dtype() == DType::Bool {
            return Err(TensorError::unsupported("argmax", DType::Bool));
        }
        match dim {
            Some(d) => Ok(self.extreme_dim(ReduceOp::Max, "argmax", d, keepdim)?.1),
            None => {
                if self.numel() == 0 {
                    return Err(TensorError::Empty {
                        op: "argmax",
                        shape: self.shape().to_vec(),
                    });
                }
                let (dims, out_shape) = self.reduced_dims("argmax", None, keepdim)?;
                let indices = Tensor::empty(&out_shape, DType::I64, self.device())?;
                self.run_reduce(ReduceOp::Max, &dims, None, Some(&indices))?;
                Ok(indices)
            }
        }
    }
}
