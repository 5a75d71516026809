//! Element types, PyTorch's type-promotion lattice, and the [`Element`] trait
//! that generic kernels are written against.

use crate::scalar::Scalar;
use half::{bf16, f16};
use std::fmt;

/// The element type of a tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DType {
    /// 32-bit float (the default float dtype).
    F32,
    /// 64-bit float.
    F64,
    /// IEEE half precision.
    F16,
    /// bfloat16.
    BF16,
    /// 32-bit signed integer.
    I32,
    /// 64-bit signed integer (the default integer dtype).
    I64,
    /// 8-bit unsigned integer.
    U8,
    /// Boolean, one byte per element.
    Bool,
}

/// Broad kind of a dtype, ordered as PyTorch's promotion categories.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Category {
    /// `bool`.
    Bool,
    /// `u8`, `i32`, `i64`.
    Integer,
    /// `f16`, `bf16`, `f32`, `f64`.
    Float,
}

impl DType {
    /// Every dtype.
    pub const ALL: [DType; 8] = [
        DType::F32,
        DType::F64,
        DType::F16,
        DType::BF16,
        DType::I32,
        DType::I64,
        DType::U8,
        DType::Bool,
    ];

    /// Bytes per element.
    pub const fn size(self) -> usize {
        match self {
            DType::F64 | DType::I64 => 8,
            DType::F32 | DType::I32 => 4,
            DType::F16 | DType::BF16 => 2,
            DType::U8 | DType::Bool => 1,
        }
    }

    /// The short name (`f32`, `bf16`, `bool`, ...).
    pub const fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F64 => "f64",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::I32 => "i32",
            DType::I64 => "i64",
            DType::U8 => "u8",
            DType::Bool => "bool",
        }
    }

    /// Parses a short name as written by [`DType::name`].
    ///
    /// ```
    /// use strata_tensor::DType;
    /// assert_eq!(DType::parse("bf16"), Some(DType::BF16));
    /// assert_eq!(DType::parse("complex"), None);
    /// ```
    pub fn parse(s: &str) -> Option<DType> {
        DType::ALL.into_iter().find(|d| d.name() == s)
    }

    /// The promotion category.
    pub const fn category(self) -> Category {
        match self {
            DType::Bool => Category::Bool,
            DType::U8 | DType::I32 | DType::I64 => Category::Integer,
            _ => Category::Float,
        }
    }

    /// Whether this is a floating-point dtype.
    pub const fn is_float(self) -> bool {
        matches!(self.category(), Category::Float)
    }

    /// PyTorch's name for the dtype (`torch.float32`).
    pub const fn torch_name(self) -> &'static str {
        match self {
            DType::F32 => "torch.float32",
            DType::F64 => "torch.float64",
            DType::F16 => "torch.float16",
            DType::BF16 => "torch.bfloat16",
            DType::I32 => "torch.int32",
            DType::I64 => "torch.int64",
            DType::U8 => "torch.uint8",
            DType::Bool => "torch.bool",
        }
    }

    /// `torch.promote_types`: the smallest dtype both convert to.
    ///
    /// ```
    /// use strata_tensor::DType;
    /// assert_eq!(DType::U8.promote(DType::I32), DType::I32);
    /// assert_eq!(DType::F16.promote(DType::BF16), DType::F32);
    /// assert_eq!(DType::I64.promote(DType::F16), DType::F16);
    /// ```
    pub fn promote(self, other: DType) -> DType {
        use DType::*;
        if self == other {
            return self;
        }
        match (self.category(), other.category()) {
            (Category::Bool, _) => other,
            (_, Category::Bool) => self,
            (Category::Integer, Category::Float) => other,
            (Category::Float, Category::Integer) => self,
            (Category::Integer, Category::Integer) => {
                let rank = |d| match d {
                    U8 => 0,
                    I32 => 1,
                    _ => 2,
                };
                if rank(self) >= rank(other) {
                    self
                } else {
                    other
                }
            }
            (Category::Float, Category::Float) => match (self, other) {
                (F64, _) | (_, F64) => F64,
                _ => F32, // f16/bf16/f32 mixed
            },
        }
    }

    /// `torch.can_cast`: whether a result of dtype `self` may be stored in
    /// `to` by an in-place op (no float into an integer, nothing but bool into bool).
    pub fn can_cast_to(self, to: DType) -> bool {
        self.category() <= to.category()
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A Rust type that is the element of some [`DType`].
///
/// Kernels are generic over it; `Acc` is the type arithmetic is done in
/// (f32 for f16/bf16, the type itself otherwise).
pub trait Element: Copy + Send + Sync + PartialOrd + fmt::Debug + 'static {
    /// The dtype this type represents.
    const DTYPE: DType;
    /// The computation type.
    type Acc: Arith;
    /// Widens to the computation type.
    fn to_acc(self) -> Self::Acc;
    /// Rounds from the computation type.
    fn from_acc(a: Self::Acc) -> Self;
    /// The value as a scalar (exact).
    fn to_scalar(self) -> Scalar;
    /// Converts a scalar with PyTorch's cast rules (float to int truncates,
    /// integers wrap, anything to bool is `!= 0`, f64/i64 to f16/bf16 go through f32).
    fn from_scalar(s: Scalar) -> Self;
    /// `a / b` rounded toward zero as PyTorch's kernel for two tensors of
    /// this dtype computes it: f16 and bf16 round the quotient to the dtype
    /// and truncate that; the others are [`Arith::div_trunc`].
    #[doc(hidden)]
    #[inline(always)]
    fn div_trunc_elem(a: Self::Acc, b: Self::Acc) -> Self::Acc {
        a.div_trunc(b)
    }
    /// Floor division as PyTorch's kernel for two tensors of this dtype
    /// computes it: f16 and bf16 run [`Arith::div_floor`]'s algorithm with
    /// every step an operation of the dtype (each intermediate rounded to
    /// it); the others are [`Arith::div_floor`].
    #[doc(hidden)]
    #[inline(always)]
    fn div_floor_elem(a: Self::Acc, b: Self::Acc) -> Self::Acc {
        a.div_floor(b)
    }
}

/// PyTorch's `div_floor_floating` on f16/bf16 operands (widened to f32):
/// each step is an operation of the half dtype, so `r` (rounding an f32 to
/// that dtype and back) follows every one. The remainder is exact.
#[inline]
fn half_div_floor(a: f32, b: f32, r: impl Fn(f32) -> f32) -> f32 {
    if b == 0.0 {
        return a / b;
    }
    let m = r(a % b);
    let mut div = r(r(a - m) / b);
    if m != 0.0 && ((b < 0.0) != (m < 0.0)) {
        div = r(div - 1.0);
    }
    if div != 0.0 {
        let mut fl = div.floor();
        if r(div - fl) > 0.5 {
            fl = r(fl + 1.0);
        }
        fl
    } else {
        0.0f32.copysign(r(a / b))
    }
}

/// Arithmetic of a computation type. Integer arithmetic wraps; operations a
/// dtype does not define (checked before any kernel runs) return a neutral value.
pub trait Arith: Copy + Send + Sync + PartialOrd + 'static {
    /// Additive identity.
    const ZERO: Self;
    /// Multiplicative identity.
    const ONE: Self;
    /// The value nearest to `v` (`as` conversion: integers truncate and
    /// saturate, bool is `v != 0`).
    fn from_f64(v: f64) -> Self;
    /// `a + b`.
    fn add(self, b: Self) -> Self;
    /// `a - b`.
    fn sub(self, b: Self) -> Self;
    /// `a * b`.
    fn mul(self, b: Self) -> Self;
    /// `a * b + c`: rounded once for floats (a fused multiply-add, as the
    /// compiler contracts PyTorch's `x + v * t1 * t2` in its CPU addcmul
    /// kernel), `mul` then `add` otherwise.
    #[inline(always)]
    fn mul_add(self, b: Self, c: Self) -> Self {
        self.mul(b).add(c)
    }
    /// True division (floats) or truncating division (integers, b != 0).
    fn div(self, b: Self) -> Self;
    /// Division rounded toward zero.
    fn div_trunc(self, b: Self) -> Self;
    /// Division rounded toward negative infinity (PyTorch's algorithm for floats).
    fn div_floor(self, b: Self) -> Self;
    /// `-a`.
    fn neg(self) -> Self;
    /// `e^a` (floats only).
    fn exp(self) -> Self;
    /// `ln a` (floats only).
    fn ln(self) -> Self;
    /// Whether the value is NaN.
    fn is_nan(self) -> bool;
    /// `max(a, b)` with NaN propagating.
    fn max_nan(self, b: Self) -> Self {
        if self.is_nan() || b.is_nan() {
            if self.is_nan() {
                self
            } else {
                b
            }
        } else if b > self {
            b
        } else {
            self
        }
    }
    /// `min(a, b)` with NaN propagating.
    fn min_nan(self, b: Self) -> Self {
        if self.is_nan() || b.is_nan() {
            if self.is_nan() {
                self
            } else {
                b
            }
        } else if b < self {
            b
        } else {
            self
        }
    }
}

macro_rules! float_arith {
    ($t:ty) => {
        impl Arith for $t {
            const ZERO: Self = 0.0;
            const ONE: Self = 1.0;
            #[inline(always)]
            fn from_f64(v: f64) -> Self {
                v as $t
            }
            #[inline(always)]
            fn add(self, b: Self) -> Self {
                self + b
            }
            #[inline(always)]
            fn mul_add(self, b: Self, c: Self) -> Self {
                <$t>::mul_add(self, b, c)
            }
            #[inline(always)]
            fn sub(self, b: Self) -> Self {
                self - b
            }
            #[inline(always)]
            fn mul(self, b: Self) -> Self {
                self * b
            }
            #[inline(always)]
            fn div(self, b: Self) -> Self {
                self / b
            }
            #[inline(always)]
            fn div_trunc(self, b: Self) -> Self {
                (self / b).trunc()
            }
            #[inline]
            fn div_floor(self, b: Self) -> Self {
                // PyTorch's div_floor_floating.
                if b == 0.0 {
                    return self / b;
                }
                let m = self % b;
                let mut div = (self - m) / b;
                if m != 0.0 && ((b < 0.0) != (m < 0.0)) {
                    div -= 1.0;
                }
                if div != 0.0 {
                    let mut fl = div.floor();
                    if div - fl > 0.5 {
                        fl += 1.0;
                    }
                    fl
                } else {
                    (0.0 as $t).copysign(self / b)
                }
            }
            #[inline(always)]
            fn neg(self) -> Self {
                -self
            }
            #[inline(always)]
            fn exp(self) -> Self {
                self.exp()
            }
            #[inline(always)]
            fn ln(self) -> Self {
                self.ln()
            }
            #[inline(always)]
            fn is_nan(self) -> bool {
                self != self
            }
        }
    };
}
float_arith!(f32);
float_arith!(f64);

macro_rules! int_arith {
    ($t:ty) => {
        impl Arith for $t {
            const ZERO: Self = 0;
            const ONE: Self = 1;
            #[inline(always)]
            fn from_f64(v: f64) -> Self {
                v as $t
            }
            #[inline(always)]
            fn add(self, b: Self) -> Self {
                self.wrapping_add(b)
            }
            #[inline(always)]
            fn sub(self, b: Self) -> Self {
                self.wrapping_sub(b)
            }
            #[inline(always)]
            fn mul(self, b: Self) -> Self {
                self.wrapping_mul(b)
            }
            #[inline(always)]
            fn div(self, b: Self) -> Self {
                if b == 0 {
                    0
                } else {
                    self.wrapping_div(b)
                }
            }
            #[inline(always)]
            fn div_trunc(self, b: Self) -> Self {
                Arith::div(self, b)
            }
            #[inline]
            fn div_floor(self, b: Self) -> Self {
                if b == 0 {
                    return 0;
                }
                let q = self.wrapping_div(b);
                let r = self.wrapping_rem(b);
                #[allow(unused_comparisons)]
                let signs_differ = (r < 0) != (b < 0);
                if r != 0 && signs_differ {
                    q.wrapping_sub(1)
                } else {
                    q
                }
            }
            #[inline(always)]
            fn neg(self) -> Self {
                (0 as $t).wrapping_sub(self)
            }
            #[inline(always)]
            fn exp(self) -> Self {
                self
            }
            #[inline(always)]
            fn ln(self) -> Self {
                self
            }
            #[inline(always)]
            fn is_nan(self) -> bool {
                false
            }
        }
    };
}
int_arith!(i32);
int_arith!(i64);
int_arith!(u8);

impl Arith for bool {
    const ZERO: Self = false;
    const ONE: Self = true;
    #[inline(always)]
    fn from_f64(v: f64) -> Self {
        v != 0.0
    }
    #[inline(always)]
    fn add(self, b: Self) -> Self {
        self | b
    }
    #[inline(always)]
    fn sub(self, b: Self) -> Self {
        self ^ b
    }
    #[inline(always)]
    fn mul(self, b: Self) -> Self {
        self & b
    }
    #[inline(always)]
    fn div(self, b: Self) -> Self {
        self & b
    }
    #[inline(always)]
    fn div_trunc(self, b: Self) -> Self {
        self & b
    }
    #[inline(always)]
    fn div_floor(self, b: Self) -> Self {
        self & b
    }
    #[inline(always)]
    fn neg(self) -> Self {
        self
    }
    #[inline(always)]
    fn exp(self) -> Self {
        self
    }
    #[inline(always)]
    fn ln(self) -> Self {
        self
    }
    #[inline(always)]
    fn is_nan(self) -> bool {
        false
    }
}

macro_rules! native_element {
    ($t:ty, $dt:expr, float) => {
        impl Element for $t {
            const DTYPE: DType = $dt;
            type Acc = $t;
            #[inline(always)]
            fn to_acc(self) -> $t {
                self
            }
            #[inline(always)]
            fn from_acc(a: $t) -> $t {
                a
            }
            #[inline]
            fn to_scalar(self) -> Scalar {
                Scalar::Float(self as f64)
            }
            #[inline]
            fn from_scalar(s: Scalar) -> $t {
                match s {
                    Scalar::Bool(b) => b as u8 as $t,
                    Scalar::Int(i) => i as $t,
                    Scalar::Float(f) => f as $t,
                }
            }
        }
    };
    ($t:ty, $dt:expr, int, $from_float:expr) => {
        impl Element for $t {
            const DTYPE: DType = $dt;
            type Acc = $t;
            #[inline(always)]
            fn to_acc(self) -> $t {
                self
            }
            #[inline(always)]
            fn from_acc(a: $t) -> $t {
                a
            }
            #[inline]
            fn to_scalar(self) -> Scalar {
                Scalar::Int(self as i64)
            }
            #[inline]
            fn from_scalar(s: Scalar) -> $t {
                match s {
                    Scalar::Bool(b) => b as $t,
                    Scalar::Int(i) => i as $t,
                    // PyTorch's x86 CPU conversion (see `float_to_i64`).
                    Scalar::Float(f) => $from_float(f),
                }
            }
        }
    };
}
native_element!(f32, DType::F32, float);
native_element!(f64, DType::F64, float);
native_element!(i32, DType::I32, int, float_to_i32);
native_element!(i64, DType::I64, int, float_to_i64);
native_element!(u8, DType::U8, int, |f| float_to_i64(f) as u8);

/// `f` truncated toward zero, if that lies in `[-limit, limit)`: the floats
/// x86's truncating conversions (`cvttsd2si`) turn into an integer of the
/// width whose range that is; NaN and anything else give the "integer
/// indefinite" value, the width's minimum.
#[inline]
fn truncated_within(f: f64, limit: f64) -> Option<f64> {
    let t = f.trunc();
    (-limit..limit).contains(&t).then_some(t)
}

/// A float converted to i64 as PyTorch 2.15's CPU kernels do on x86
/// (`cvttsd2si`): truncated toward zero, and where that is NaN or outside
/// i64's range (±inf, 1e30), the "integer indefinite" value `i64::MIN`.
/// u8 takes the low byte of this (`torch.tensor([-1., 3e9+1]).double()
/// .to(torch.uint8)` is `[255, 1]`; NaN and inf give 0).
#[inline]
pub(crate) fn float_to_i64(f: f64) -> i64 {
    // 2^63 is exact in f64.
    truncated_within(f, 9_223_372_036_854_775_808.0).map_or(i64::MIN, |t| t as i64)
}

/// A float converted to i32 as PyTorch 2.15's CPU kernels do on x86
/// (`cvttss2si`/`cvttsd2si` to 32 bits): truncated toward zero, and
/// `i32::MIN` where that is NaN or outside i32's range
/// (`torch.tensor([nan, inf, 3e9]).to(torch.int32)` is all -2147483648).
#[inline]
pub(crate) fn float_to_i32(f: f64) -> i32 {
    truncated_within(f, 2_147_483_648.0).map_or(i32::MIN, |t| t as i32)
}

macro_rules! half_element {
    ($t:ty, $dt:expr) => {
        impl Element for $t {
            const DTYPE: DType = $dt;
            type Acc = f32;
            #[inline(always)]
            fn to_acc(self) -> f32 {
                self.to_f32()
            }
            #[inline(always)]
            fn from_acc(a: f32) -> $t {
                <$t>::from_f32(a)
            }
            #[inline]
            fn to_scalar(self) -> Scalar {
                Scalar::Float(self.to_f64())
            }
            #[inline]
            fn from_scalar(s: Scalar) -> $t {
                match s {
                    Scalar::Bool(b) => <$t>::from_f32(b as u8 as f32),
                    Scalar::Int(i) => <$t>::from_f32(i as f32),
                    Scalar::Float(f) => <$t>::from_f32(f as f32),
                }
            }
            #[inline(always)]
            fn div_trunc_elem(a: f32, b: f32) -> f32 {
                <$t>::from_f32(a / b).to_f32().trunc()
            }
            #[inline]
            fn div_floor_elem(a: f32, b: f32) -> f32 {
                half_div_floor(a, b, |x| <$t>::from_f32(x).to_f32())
            }
        }
    };
}
half_element!(f16, DType::F16);
half_element!(bf16, DType::BF16);

impl Element for bool {
    const DTYPE: DType = DType::Bool;
    type Acc = bool;
    #[inline(always)]
    fn to_acc(self) -> bool {
        self
    }
    #[inline(always)]
    fn from_acc(a: bool) -> bool {
        a
    }
    #[inline]
    fn to_scalar(self) -> Scalar {
        Scalar::Bool(self)
    }
    #[inline]
    fn from_scalar(s: Scalar) -> bool {
        match s {
            Scalar::Bool(b) => b,
            Scalar::Int(i) => i != 0,
            Scalar::Float(f) => f != 0.0,
        }
    }
}

/// Runs `$body` with the type alias `$T` bound to the Rust type of `$dtype`:
/// per-dtype code is written once, generically, and instantiated here.
#[macro_export]
#[doc(hidden)]
macro_rules! dispatch_dtype {
    ($dtype:expr, $T:ident => $body:expr) => {
        match $dtype {
            $crate::DType::F32 => {
                type $T = f32;
                $body
            }
            $crate::DType::F64 => {
                type $T = f64;
                $body
            }
            $crate::DType::F16 => {
                type $T = ::half::f16;
                $body
            }
            $crate::DType::BF16 => {
                type $T = ::half::bf16;
                $body
            }
            $crate::DType::I32 => {
                type $T = i32;
                $body
            }
            $crate::DType::I64 => {
                type $T = i64;
                $body
            }
            $crate::DType::U8 => {
                type $T = u8;
                $body
            }
            $crate::DType::Bool => {
                type $T = bool;
                $body
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn promotion_lattice() {
        assert_eq!(DType::Bool.promote(DType::U8), DType::U8);
        assert_eq!(DType::I32.promote(DType::I64), DType::I64);
        assert_eq!(DType::BF16.promote(DType::F32), DType::F32);
        assert_eq!(DType::F64.promote(DType::F16), DType::F64);
        assert_eq!(DType::U8.promote(DType::BF16), DType::BF16);
        assert!(DType::I32.can_cast_to(DType::F16));
        assert!(!DType::F32.can_cast_to(DType::I64));
        assert!(!DType::U8.can_cast_to(DType::Bool));
    }

    #[test]
    fn casts_follow_torch() {
        assert_eq!(u8::from_scalar(Scalar::Int(-1)), 255);
        assert_eq!(i32::from_scalar(Scalar::Float(-2.7)), -2);
        assert!(bool::from_scalar(Scalar::Float(f64::NAN)));
        assert_eq!(Arith::div_floor(-7.0f64, 2.0), -4.0);
        assert_eq!(Arith::div_floor(-7i64, 2), -4);
        assert_eq!(Arith::div_trunc(-7i64, 2), -3);
    }
}
