//! Conversions between tensors and `ndarray` arrays (the `ndarray` feature).
//!
//! Both directions copy. A zero-copy `ArrayView` of a tensor's storage would
//! be unsound here: strata's in-place ops take `&self` and write through
//! every handle on the storage (`a.clone().add_(1.0)` changes `a`), so a
//! shared borrow of the elements cannot promise that they stay unchanged,
//! which `ArrayView` requires; and a GPU tensor has no host memory to view.
//! An array is read in its logical order whatever its strides (negative,
//! broadcast, Fortran), so the tensor always holds `array[[i, j, ...]]` at
//! `[i, j, ...]`.
//!
//! ```
//! use ndarray::{array, ArrayD};
//! use strata_tensor::{Device, Tensor};
//! let a = array![[1.0f32, 2.0, 3.0], [4.0, 5.0, 6.0]];
//! let t = Tensor::from_ndarray(&a.t(), Device::Cpu)?;   // a strided view
//! assert_eq!(t.shape(), &[3, 2]);
//! assert_eq!(t.to_vec::<f32>()?, vec![1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
//! let back: ArrayD<f32> = (&t).try_into()?;
//! assert_eq!(back, a.t().into_dyn());
//! # Ok::<(), strata_tensor::TensorError>(())
//! ```

use crate::dtype::Element;
use crate::error::{Result, TensorError};
use crate::tensor::Tensor;
use ::ndarray::{ArrayBase, ArrayD, Data, Dimension, IxDyn};
use strata_alloc::Device;

impl Tensor {
    /// A tensor on `device` holding a copy of `array` (any element type
    /// strata has, any dimensionality, any strides), with the dtype of `T`.
    pub fn from_ndarray<T, S, D>(array: &ArrayBase<S, D>, device: Device) -> Result<Tensor>
    where
        T: Element,
        S: Data<Elem = T>,
        D: Dimension,
    {
        match array.as_slice() {
            // Row-major and contiguous: one copy.
            Some(s) => Tensor::from_slice(s, array.shape(), device),
            None => {
                let mut v = Vec::new();
                v.try_reserve_exact(array.len()).map_err(|_| {
                    TensorError::value(
                        "from_ndarray",
                        format!("cannot allocate a host buffer of {} elements", array.len()),
                    )
                })?;
                v.extend(array.iter().copied());
                Tensor::from_slice(&v, array.shape(), device)
            }
        }
    }

    /// A copy of the tensor (any device, any layout) as an owned row-major
    /// `ndarray` array. `T` must be the tensor's dtype
    /// ([`TensorError::DType`] otherwise; convert with `to_dtype` first).
    pub fn to_ndarray<T: Element>(&self) -> Result<ArrayD<T>> {
        let v = self.to_vec::<T>()?;
        ArrayD::from_shape_vec(IxDyn(self.shape()), v)
            .map_err(|e| TensorError::shape("to_ndarray", format!("shape {:?}: {e}", self.shape())))
    }
}

/// A CPU tensor holding a copy of the array.
impl<T, S, D> TryFrom<&ArrayBase<S, D>> for Tensor
where
    T: Element,
    S: Data<Elem = T>,
    D: Dimension,
{
    type Error = TensorError;
    fn try_from(array: &ArrayBase<S, D>) -> Result<Tensor> {
        Tensor::from_ndarray(array, Device::Cpu)
    }
}

/// A CPU tensor holding the array's elements.
impl<T: Element, D: Dimension> TryFrom<::ndarray::Array<T, D>> for Tensor {
    type Error = TensorError;
    fn try_from(array: ::ndarray::Array<T, D>) -> Result<Tensor> {
        Tensor::from_ndarray(&array, Device::Cpu)
    }
}

/// A copy of the tensor's elements; `T` must be its dtype.
impl<T: Element> TryFrom<&Tensor> for ArrayD<T> {
    type Error = TensorError;
    fn try_from(t: &Tensor) -> Result<ArrayD<T>> {
        t.to_ndarray()
    }
}

/// A copy of the tensor's elements; `T` must be its dtype.
impl<T: Element> TryFrom<Tensor> for ArrayD<T> {
    type Error = TensorError;
    fn try_from(t: Tensor) -> Result<ArrayD<T>> {
        t.to_ndarray()
    }
}
