//! Conversions into and out of tensors: nested arrays and vectors
//! ([`TensorData`], [`Tensor::from_data`], `TryFrom`, the [`tensor!`]
//! literal), reading with dtype conversion ([`Tensor::to_vec_as`]), and
//! parsing dtype names (`"f32".parse::<DType>()`).

use crate::dtype::{DType, Element};
use crate::error::{Result, TensorError};
use crate::tensor::Tensor;
use std::str::FromStr;
use strata_alloc::Device;

/// Nested arrays, vectors and slices of elements that a tensor can be built
/// from: `[[1.0f32, 2.0], [3.0, 4.0]]`, `vec![vec![1i64], vec![2]]`.
///
/// Vectors must not be ragged: [`Tensor::from_data`] reports a
/// [`TensorError::Shape`] naming the first row of the wrong length.
pub trait TensorData {
    /// The element type.
    type Elem: Element;
    /// Appends the sizes of this value's dims (read from its first entries).
    fn push_shape(&self, shape: &mut Vec<usize>);
    /// Appends the elements in row-major order, checking them against `shape`.
    fn flatten_into(&self, shape: &[usize], out: &mut Vec<Self::Elem>) -> Result<()>;
}

macro_rules! element_data {
    ($($t:ty),*) => {$(
        impl TensorData for $t {
            type Elem = $t;
            fn push_shape(&self, _: &mut Vec<usize>) {}
            fn flatten_into(&self, shape: &[usize], out: &mut Vec<$t>) -> Result<()> {
                if !shape.is_empty() {
                    return Err(ragged(shape, 0));
                }
                out.push(*self);
                Ok(())
            }
        }
    )*};
}
element_data!(f32, f64, half::f16, half::bf16, i32, i64, u8, bool);

fn ragged(expected: &[usize], got: usize) -> TensorError {
    TensorError::shape(
        "from_data",
        format!(
            "ragged nested data: a row has {got} entries where the first row of this \
             depth has {} (every row must have shape {expected:?})",
            expected.first().copied().unwrap_or(0)
        ),
    )
}

fn flatten_rows<U: TensorData>(rows: &[U], shape: &[usize], out: &mut Vec<U::Elem>) -> Result<()> {
    match shape.split_first() {
        Some((&n, rest)) if n == rows.len() => {
            rows.iter().try_for_each(|r| r.flatten_into(rest, out))
        }
        _ => Err(ragged(shape, rows.len())),
    }
}

fn push_rows<U: TensorData>(rows: &[U], shape: &mut Vec<usize>) {
    shape.push(rows.len());
    if let Some(first) = rows.first() {
        first.push_shape(shape);
    }
}

impl<U: TensorData, const N: usize> TensorData for [U; N] {
    type Elem = U::Elem;
    fn push_shape(&self, shape: &mut Vec<usize>) {
        push_rows(self, shape)
    }
    fn flatten_into(&self, shape: &[usize], out: &mut Vec<U::Elem>) -> Result<()> {
        flatten_rows(self, shape, out)
    }
}

impl<U: TensorData> TensorData for Vec<U> {
    type Elem = U::Elem;
    fn push_shape(&self, shape: &mut Vec<usize>) {
        push_rows(self, shape)
    }
    fn flatten_into(&self, shape: &[usize], out: &mut Vec<U::Elem>) -> Result<()> {
        flatten_rows(self, shape, out)
    }
}

impl<U: TensorData> TensorData for &[U] {
    type Elem = U::Elem;
    fn push_shape(&self, shape: &mut Vec<usize>) {
        push_rows(self, shape)
    }
    fn flatten_into(&self, shape: &[usize], out: &mut Vec<U::Elem>) -> Result<()> {
        flatten_rows(self, shape, out)
    }
}

impl Tensor {
    /// A tensor from nested arrays, vectors or slices; the dtype is the
    /// element type's (`f32` gives [`DType::F32`], `i64` gives [`DType::I64`]).
    ///
    /// ```
    /// use strata_tensor::{DType, Device, Tensor};
    /// let t = Tensor::from_data([[1.0f32, 2.0, 3.0], [4.0, 5.0, 6.0]], Device::Cpu)?;
    /// assert_eq!((t.shape(), t.dtype()), (&[2, 3][..], DType::F32));
    /// let ragged = vec![vec![1i64, 2], vec![3]];
    /// assert!(Tensor::from_data(ragged, Device::Cpu).is_err());
    /// # Ok::<(), strata_tensor::TensorError>(())
    /// ```
    pub fn from_data<D: TensorData>(data: D, device: Device) -> Result<Tensor> {
        let mut shape = Vec::new();
        data.push_shape(&mut shape);
        // No reservation from `shape`: it is read from the first row at each
        // depth only, so ragged data (a long first row, the others empty)
        // could claim a product of sizes far beyond the elements it holds
        // (2^60 for 50 MB of vectors), and reserving that aborts the process.
        // Only elements that exist are pushed; the first ragged row stops it.
        let mut flat = Vec::new();
        data.flatten_into(&shape, &mut flat)?;
        Tensor::from_slice(&flat, &shape, device)
    }

    /// Like [`Tensor::from_data`] on the CPU, but with `torch.tensor`'s
    /// default dtypes for Rust's default literal types: `f64` elements give
    /// an f32 tensor and `i32` elements an i64 tensor (other types keep
    /// theirs). This is what [`tensor!`](crate::tensor!) calls.
    pub fn from_literal<D: TensorData>(data: D) -> Result<Tensor> {
        let t = Tensor::from_data(data, Device::Cpu)?;
        match t.dtype() {
            DType::F64 => t.to_dtype_contiguous(DType::F32),
            DType::I32 => t.to_dtype_contiguous(DType::I64),
            _ => Ok(t),
        }
    }

    /// The elements in row-major order converted to `T` from whatever the
    /// tensor's dtype is, with PyTorch's cast rules (as `tensor.to(dtype)`:
    /// float to integer truncates toward zero). The conversion runs on the
    /// tensor's device before the copy to the host.
    ///
    /// ```
    /// use strata_tensor::{DType, Device, Tensor};
    /// let t = Tensor::from_slice(&[1.5f32, -2.5], &[2], Device::Cpu)?.to_dtype(DType::BF16)?;
    /// assert_eq!(t.to_vec_as::<f32>()?, vec![1.5, -2.5]);
    /// assert_eq!(t.to_vec_as::<i64>()?, vec![1, -2]);
    /// # Ok::<(), strata_tensor::TensorError>(())
    /// ```
    pub fn to_vec_as<T: Element>(&self) -> Result<Vec<T>> {
        if self.numel() == 0 {
            // Nothing to convert: an empty tensor's shape may have no
            // contiguous strides below i64::MAX (`[5, 3, 0, 2^62]`, expanded
            // from `[3, 0, 2^62]`), so the converted copy could not be made.
            return Ok(Vec::new());
        }
        self.to_dtype_contiguous(T::DTYPE)?.to_vec::<T>()
    }
}

macro_rules! try_from_data {
    ($($ty:ty),*) => {$(
        impl<U: TensorData> TryFrom<$ty> for Tensor {
            type Error = TensorError;
            /// A CPU tensor (see [`Tensor::from_data`]).
            fn try_from(data: $ty) -> Result<Tensor> {
                Tensor::from_data(data, Device::Cpu)
            }
        }
    )*};
}
try_from_data!(Vec<U>, &[U]);

impl<U: TensorData, const N: usize> TryFrom<[U; N]> for Tensor {
    type Error = TensorError;
    /// A CPU tensor (see [`Tensor::from_data`]).
    fn try_from(data: [U; N]) -> Result<Tensor> {
        Tensor::from_data(data, Device::Cpu)
    }
}

/// A CPU tensor from a literal, like `torch.tensor`: nested brackets give
/// the shape; float literals give f32 and integer literals i64 (PyTorch's
/// defaults; a suffix such as `1u8` or `0.5f32` keeps that type, except that
/// `f64`/`i32` suffixes are the Rust defaults and also become f32/i64 — use
/// [`Tensor::from_data`] to keep them). Gives a `Result<Tensor>`; append
/// `; device` to place the tensor.
///
/// ```
/// use strata_tensor::{tensor, DType, Device};
/// let t = tensor![[1., 2.], [3., 4.]]?;
/// assert_eq!((t.shape(), t.dtype()), (&[2, 2][..], DType::F32));
/// let i = tensor![1, 2, 3; Device::Cpu]?;
/// assert_eq!(i.to_vec::<i64>()?, vec![1, 2, 3]);
/// # Ok::<(), strata_tensor::TensorError>(())
/// ```
#[macro_export]
macro_rules! tensor {
    ($($x:expr),+ $(,)? ; $device:expr) => {
        $crate::Tensor::from_literal([$($x),+]).and_then(|t| t.to($device))
    };
    ($($x:expr),+ $(,)?) => {
        $crate::Tensor::from_literal([$($x),+])
    };
}

impl FromStr for DType {
    type Err = TensorError;
    /// Parses strata's names (`f32`, `bf16`, `i64`, `u8`, `bool`), NumPy's
    /// and PyTorch's (`float32`, `bfloat16`, `int64`, `uint8`, with or without
    /// `torch.`) and PyTorch's aliases (`float`, `double`, `half`, `int`, `long`).
    ///
    /// ```
    /// use strata_tensor::DType;
    /// assert_eq!("bf16".parse::<DType>()?, DType::BF16);
    /// assert_eq!("torch.float32".parse::<DType>()?, DType::F32);
    /// assert!("complex64".parse::<DType>().is_err());
    /// # Ok::<(), strata_tensor::TensorError>(())
    /// ```
    fn from_str(s: &str) -> Result<DType> {
        let t = s.trim().to_ascii_lowercase();
        let name = t.strip_prefix("torch.").unwrap_or(&t);
        let d = match name {
            "float32" | "float" => Some(DType::F32),
            "float64" | "double" => Some(DType::F64),
            "float16" | "half" => Some(DType::F16),
            "bfloat16" => Some(DType::BF16),
            "int32" | "int" => Some(DType::I32),
            "int64" | "long" => Some(DType::I64),
            "uint8" => Some(DType::U8),
            other => DType::parse(other),
        };
        d.ok_or_else(|| {
            TensorError::value(
                "parse dtype",
                format!(
                    "unknown dtype {s:?}; expected one of f32, f64, f16, bf16, i32, i64, u8, bool \
                     (or float32, bfloat16, int64, ... with or without `torch.`)"
                ),
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::{DType, Device, Tensor};

    #[test]
    fn nested_data_gives_shape_dtype_and_row_major_elements() {
        let t = Tensor::from_data([[[1u8, 2], [3, 4]], [[5, 6], [7, 8]]], Device::Cpu).unwrap();
        assert_eq!(t.shape(), &[2, 2, 2]);
        assert_eq!(t.dtype(), DType::U8);
        assert_eq!(t.to_vec::<u8>().unwrap(), (1..=8).collect::<Vec<u8>>());
        let v: Tensor = vec![vec![1.0f32, 2.0], vec![3.0, 4.0]].try_into().unwrap();
        assert_eq!(v.shape(), &[2, 2]);
        let s: Tensor = (&[1i64, 2, 3][..]).try_into().unwrap();
        assert_eq!(s.to_vec::<i64>().unwrap(), vec![1, 2, 3]);
        let scalar = Tensor::from_data(2.5f64, Device::Cpu).unwrap();
        assert_eq!(scalar.shape(), &[] as &[usize]);
        let empty = Tensor::from_data(Vec::<f32>::new(), Device::Cpu).unwrap();
        assert_eq!(empty.shape(), &[0]);
    }

    #[test]
    fn ragged_vectors_are_refused() {
        let e = Tensor::from_data(vec![vec![1i64, 2], vec![3]], Device::Cpu).unwrap_err();
        assert!(matches!(e, crate::TensorError::Shape { .. }), "{e}");
        let e =
            Tensor::from_data(vec![vec![vec![1i64]], vec![vec![2, 3]]], Device::Cpu).unwrap_err();
        assert!(e.to_string().contains("ragged"), "{e}");
    }

    #[test]
    fn literal_macro_uses_torch_default_dtypes() {
        let f = crate::tensor![[1., 2.], [3., 4.]].unwrap();
        assert_eq!((f.shape(), f.dtype()), (&[2, 2][..], DType::F32));
        let i = crate::tensor![[1, 2, 3]].unwrap();
        assert_eq!((i.shape(), i.dtype()), (&[1, 3][..], DType::I64));
        let b = crate::tensor![true, false].unwrap();
        assert_eq!(b.dtype(), DType::Bool);
    }

    #[test]
    fn dtype_names_parse() {
        for d in DType::ALL {
            assert_eq!(d.name().parse::<DType>().unwrap(), d);
            assert_eq!(d.torch_name().parse::<DType>().unwrap(), d);
        }
        assert_eq!("Float".parse::<DType>().unwrap(), DType::F32);
        assert_eq!("long".parse::<DType>().unwrap(), DType::I64);
        let e = "f128".parse::<DType>().unwrap_err();
        assert!(e.to_string().contains("f128"), "{e}");
    }

    #[test]
    fn item_and_to_vec_as_convert_any_dtype() {
        let loss = Tensor::from_slice(&[0.3125f32], &[], Device::Cpu)
            .unwrap()
            .to_dtype_contiguous(DType::BF16)
            .unwrap();
        assert_eq!(loss.item::<f32>().unwrap(), 0.3125);
        assert_eq!(loss.item::<f64>().unwrap(), 0.3125);
        let i = Tensor::from_slice(&[7i64, -3], &[2], Device::Cpu).unwrap();
        assert_eq!(i.to_vec_as::<f64>().unwrap(), vec![7.0, -3.0]);
        assert_eq!(i.to_vec_as::<bool>().unwrap(), vec![true, true]);
        assert_eq!(i.select(0, 1).unwrap().item::<f32>().unwrap(), -3.0);
        // `to_vec` stays exact: it refuses another dtype.
        assert!(i.to_vec::<f64>().is_err());
    }
}
