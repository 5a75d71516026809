//! Iteration over a dim: [`Tensor::iter_dim`] yields the views
//! `x.select(dim, 0)`, `x.select(dim, 1)`, ... (PyTorch's `for row in x`
//! and `x.unbind(dim)`).

use crate::error::{Result, TensorError};
use crate::tensor::Tensor;

/// The views along one dim of a tensor, from [`Tensor::iter_dim`].
#[derive(Clone, Debug)]
pub struct DimIter {
    tensor: Tensor,
    dim: i64,
    front: usize,
    back: usize,
}

impl Iterator for DimIter {
    type Item = Tensor;
    fn next(&mut self) -> Option<Tensor> {
        if self.front == self.back {
            return None;
        }
        self.front += 1;
        // In range, and the last view's offset was checked by `iter_dim`,
        // so select cannot fail.
        self.tensor.select(self.dim, self.front as i64 - 1).ok()
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.back - self.front, Some(self.back - self.front))
    }
}

impl DoubleEndedIterator for DimIter {
    fn next_back(&mut self) -> Option<Tensor> {
        if self.front == self.back {
            return None;
        }
        self.back -= 1;
        self.tensor.select(self.dim, self.back as i64).ok()
    }
}

impl ExactSizeIterator for DimIter {}

impl Tensor {
    /// The views `select(dim, i)` for each index `i` of `dim` (negative dims
    /// count from the end); each shares this tensor's storage.
    ///
    /// ```
    /// use strata_tensor::tensor;
    /// let x = tensor![[1., 2.], [3., 4.]]?;
    /// let sums: Vec<f32> = x
    ///     .iter_dim(0)?
    ///     .map(|row| row.sum(None, false)?.item::<f32>())
    ///     .collect::<Result<_, _>>()?;
    /// assert_eq!(sums, vec![3.0, 7.0]);
    /// assert!(tensor![1.0]?.sum(None, false)?.iter_dim(0).is_err()); // 0-d
    /// # Ok::<(), strata_tensor::TensorError>(())
    /// ```
    pub fn iter_dim(&self, dim: i64) -> Result<DimIter> {
        self.iter_dim_op("iter_dim", dim)
    }

    /// [`Tensor::iter_dim`], its errors naming `op`.
    fn iter_dim_op(&self, op: &'static str, dim: i64) -> Result<DimIter> {
        if self.ndim() == 0 {
            return Err(TensorError::dim(
                op,
                "a 0-d tensor has no dim to iterate over",
            ));
        }
        let d = crate::shape::normalize_dim(op, dim, self.ndim())?;
        // Every view must exist, so the iterator never stops short: the
        // last one has the largest storage offset, which may overflow on an
        // empty tensor with huge strides (`TensorError::SizeOverflow`).
        if let Some(last) = self.shape()[d].checked_sub(1) {
            self.layout().select(d as i64, last as i64)?;
        }
        Ok(DimIter {
            tensor: self.clone(),
            dim: d as i64,
            front: 0,
            back: self.shape()[d],
        })
    }

    /// `torch.unbind`: the views along `dim`, collected. At most
    /// [`MAX_PIECES`](crate::MAX_PIECES) views, as `split` and `chunk` return
    /// (a [`TensorError::Value`] beyond: each view is a handle in host memory,
    /// so an expanded dim of 2^40 would need terabytes of them).
    pub fn unbind(&self, dim: i64) -> Result<Vec<Tensor>> {
        let views = self.iter_dim_op("unbind", dim)?;
        crate::ops::check_pieces("unbind", i64::try_from(views.len()).unwrap_or(i64::MAX))?;
        Ok(views.collect())
    }
}

#[cfg(test)]
mod tests {
    use crate::{Device, Tensor};

    #[test]
    fn iterates_views_in_both_directions() {
        let x = Tensor::arange(0, 6, 1, None, Device::Cpu)
            .unwrap()
            .view(&[2, 3])
            .unwrap();
        let cols: Vec<Vec<i64>> = x
            .iter_dim(-1)
            .unwrap()
            .map(|c| c.to_vec().unwrap())
            .collect();
        assert_eq!(cols, vec![vec![0, 3], vec![1, 4], vec![2, 5]]);
        let mut it = x.iter_dim(0).unwrap();
        assert_eq!(it.len(), 2);
        let last = it.next_back().unwrap();
        assert_eq!(last.to_vec::<i64>().unwrap(), vec![3, 4, 5]);
        assert!(last.same_storage(&x));
        assert_eq!(it.next().unwrap().to_vec::<i64>().unwrap(), vec![0, 1, 2]);
        assert!(it.next().is_none() && it.next_back().is_none());
        assert!(x.iter_dim(2).is_err());
        assert_eq!(x.unbind(1).unwrap().len(), 3);
    }
}
