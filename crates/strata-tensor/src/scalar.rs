//! Python-like scalars: the kind (bool, int, float) matters for type promotion.

use crate::dtype::DType;
use std::fmt;

/// A scalar operand or value, as a Python scalar: `tensor_i32 + Scalar::Int(2)`
/// stays i32, `+ Scalar::Float(2.0)` gives f32.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Scalar {
    /// A boolean.
    Bool(bool),
    /// An integer.
    Int(i64),
    /// A float.
    Float(f64),
}

impl Scalar {
    /// The dtype PyTorch gives a wrapped scalar when promoting: bool, i64, or
    /// the default float dtype f32.
    pub fn promotion_dtype(self) -> DType {
        match self {
            Scalar::Bool(_) => DType::Bool,
            Scalar::Int(_) => DType::I64,
            Scalar::Float(_) => DType::F32,
        }
    }

    /// The value as an f64 (booleans as 0/1).
    pub fn to_f64(self) -> f64 {
        match self {
            Scalar::Bool(b) => b as u8 as f64,
            Scalar::Int(i) => i as f64,
            Scalar::Float(f) => f,
        }
    }

    /// The value as an i64 (floats truncated).
    pub fn to_i64(self) -> i64 {
        match self {
            Scalar::Bool(b) => b as i64,
            Scalar::Int(i) => i,
            Scalar::Float(f) => f as i64,
        }
    }

    /// The value converted to `dtype` with PyTorch's cast rules, as a scalar.
    ///
    /// ```
    /// use strata_tensor::{DType, Scalar};
    /// assert_eq!(Scalar::Int(300).cast_to(DType::U8), Scalar::Int(44));
    /// assert_eq!(Scalar::Float(2049.0).cast_to(DType::F16), Scalar::Float(2048.0));
    /// ```
    pub fn cast_to(self, dtype: DType) -> Scalar {
        use crate::dtype::Element;
        crate::dispatch_dtype!(dtype, T => T::from_scalar(self).to_scalar())
    }

    /// Whether a fill of `numel` elements of `dtype` (`fill_`, `full`,
    /// `full_like`) takes the value: PyTorch checks the conversion
    /// ([`fits`](Self::fits)), but not for a single f16/bf16 element (its
    /// one-element fill converts unchecked, so an out-of-range value becomes
    /// ±inf there).
    pub(crate) fn fill_fits(self, dtype: DType, numel: usize) -> bool {
        self.fits(dtype) || (numel == 1 && matches!(dtype, DType::F16 | DType::BF16))
    }

    /// Whether the value converts to `dtype` without overflow, by PyTorch's
    /// `checked_convert` (used by `fill_`, `full`, `clamp`'s bounds...):
    /// integers must lie in the dtype's range (u8 also takes -255..=-1, which
    /// wraps; f16 takes ±65504), floats must lie within the finite range
    /// (infinities pass for float dtypes, NaN for float dtypes only), and
    /// anything converts to bool. A float into an integer dtype fits from
    /// the dtype's lowest value up to, but not including, its largest plus
    /// one, as in PyTorch 2.15: 255.5 fits u8 (and truncates to 255), -0.5
    /// does not, and 2^63 does not fit i64.
    ///
    /// ```
    /// use strata_tensor::{DType, Scalar};
    /// assert!(!Scalar::Int(70000).fits(DType::F16));
    /// assert!(Scalar::Float(2.7).fits(DType::I32)); // truncates to 2
    /// assert!(!Scalar::Float(f64::NAN).fits(DType::I64));
    /// assert!(Scalar::Float(255.5).fits(DType::U8));
    /// assert!(!Scalar::Float(9.223372036854775808e18).fits(DType::I64));
    /// ```
    pub fn fits(self, dtype: DType) -> bool {
        let (lo, hi) = match dtype {
            DType::U8 => (0.0, 255.0),
            DType::I32 => (i32::MIN as f64, i32::MAX as f64),
            DType::I64 => (i64::MIN as f64, i64::MAX as f64),
            DType::F16 => (-65504.0, 65504.0),
            DType::BF16 => (-3.3895313892515355e38, 3.3895313892515355e38),
            DType::F32 => (f32::MIN as f64, f32::MAX as f64),
            DType::F64 | DType::Bool => return true,
        };
        match self {
            Scalar::Bool(_) => true,
            Scalar::Int(i) => match dtype {
                DType::U8 => (-255..=255).contains(&i),
                DType::I32 => i32::try_from(i).is_ok(),
                // Every i64 is within f32/bf16/f64's range, not f16's.
                DType::F16 => (-65504..=65504).contains(&i),
                _ => true,
            },
            Scalar::Float(f) => {
                if dtype.is_float() {
                    return f.is_infinite() || f.is_nan() || (lo <= f && f <= hi);
                }
                // An integer dtype: `f` truncates into [lo, hi] when it lies
                // in [lo, hi + 1) (PyTorch's check; the lower end is not
                // widened: -0.5 into u8 is an overflow there). `hi + 1.0` is
                // exact for u8 and i32 and rounds to 2^63 for i64, which is
                // the end wanted (i64::MAX as f64 is already 2^63, which
                // the old `f <= hi` let through and saturated).
                !f.is_nan() && lo <= f && f < hi + 1.0
            }
        }
    }
}

impl fmt::Display for Scalar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scalar::Bool(b) => write!(f, "{}", if *b { "True" } else { "False" }),
            Scalar::Int(i) => write!(f, "{i}"),
            Scalar::Float(x) => write!(f, "{x}"),
        }
    }
}

macro_rules! scalar_from {
    ($($t:ty => $v:ident as $w:ty),*) => {$(
        impl From<$t> for Scalar {
            fn from(x: $t) -> Scalar {
                Scalar::$v(x as $w)
            }
        }
    )*};
}
scalar_from!(i32 => Int as i64, i64 => Int as i64, u8 => Int as i64,
             f32 => Float as f64, f64 => Float as f64);

/// A `usize` up to `i64::MAX` is an [`Scalar::Int`]; a larger one (which no
/// i64 holds) keeps its magnitude as a [`Scalar::Float`] instead of wrapping
/// to a negative integer (`usize::MAX as i64` is -1), so converting it to an
/// integer dtype is the overflow error of [`Scalar::fits`] (as PyTorch's
/// `fill_(2**64 - 1)` on an int64 tensor is), never a silent -1.
impl From<usize> for Scalar {
    fn from(x: usize) -> Scalar {
        match i64::try_from(x) {
            Ok(i) => Scalar::Int(i),
            Err(_) => Scalar::Float(x as f64),
        }
    }
}

impl From<bool> for Scalar {
    fn from(b: bool) -> Scalar {
        Scalar::Bool(b)
    }
}
impl From<half::f16> for Scalar {
    fn from(x: half::f16) -> Scalar {
        Scalar::Float(x.to_f64())
    }
}
impl From<half::bf16> for Scalar {
    fn from(x: half::bf16) -> Scalar {
        Scalar::Float(x.to_f64())
    }
}
