//! Session 78: `F.softmin`, the softmax of `-x` (PyTorch's own
//! composition: a bool input is an error at the negation, an integer one
//! at the softmax unless a float `dtype` is given).

use crate::dtype::DType;
use crate::error::Result;
use crate::tensor::Tensor;

impl Tensor {
    /// `F.softmin(self, dim, dtype)`: `softmax(-self, dim, dtype)`.
    ///
    /// ```
    /// use strata_tensor::tensor;
    /// let x = tensor![0.0f64, 0.0].unwrap().to_dtype(strata_tensor::DType::F64).unwrap();
    /// assert_eq!(x.softmin(0, None).unwrap().to_vec::<f64>().unwrap(), vec![0.5, 0.5]);
    /// ```
    pub fn softmin(&self, dim: i64, dtype: Option<DType>) -> Result<Tensor> {
        self.neg()?.softmax(dim, dtype)
    }
}
