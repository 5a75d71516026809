//! PyTorch's argument rules for the creation ops that compute their size:
//! `arange`'s dtype, bounds and length.

use crate::dtype::DType;
use crate::error::{Result, TensorError};
use crate::generate::Sequence;
use crate::scalar::Scalar;

/// What `arange(start, end, step, dtype)` creates: its dtype, length and values.
#[derive(Debug, PartialEq)]
pub(crate) struct ArangePlan {
    pub dtype: DType,
    pub len: usize,
    pub seq: Sequence,
}

/// The scalar as an i64 the way PyTorch's `Scalar::to<int64_t>` converts it:
/// floats truncate toward zero, values outside i64 (and NaN) are an error.
fn to_i64_checked(s: Scalar) -> Result<i64> {
    match s {
        Scalar::Float(f) if f.is_nan() || f < i64::MIN as f64 || f >= -(i64::MIN as f64) => {
            Err(TensorError::value(
                "arange",
                format!("value {s} cannot be converted to type int64 without overflow"),
            ))
        }
        _ => Ok(s.to_i64()),
    }
}

/// Checks `arange`'s arguments as PyTorch does and computes its length.
///
/// * dtype: given, or i64 when all three are integers (or bools), else f32;
///   bool is rejected (PyTorch has no bool `arange` kernel).
/// * The step must be finite, whatever the dtype (PyTorch 2.15 checks this
///   first: "step must be finite but got inf").
/// * Then, in this order, the step must be nonzero, the bounds finite, and
///   the step's sign must agree with `end - start`, compared on the bounds
///   as f64 for every dtype (integers above 2^53 that round to one f64 are
///   equal there; f16/bf16 included: `arange(1e-50, 0, 1, f16)` is
///   inconsistent).
/// * f16/bf16: the start and the step must fit in f32, their accumulate
///   type (PyTorch converts them with its overflow check after the length;
///   the end is only used for the length, so `arange(0, 1e39, 1e38)` of f16
///   is allowed and `arange(0, 1, 1e39)` is not).
/// * Length: `ceil((end - start) / step)`, computed exactly on the converted
///   values for i64, and in f64 on the original values for every other dtype
///   (as PyTorch does); it must lie in `[0, i64::MAX]`.
/// * An integer dtype with a float argument follows PyTorch 2.15: checks and
///   length on the f64 values, elements `trunc(start) + i * trunc(step)`.
pub(crate) fn arange_plan(
    start: Scalar,
    end: Scalar,
    step: Scalar,
    dtype: Option<DType>,
) -> Result<ArangePlan> {
    let all_int = [start, end, step]
        .iter()
        .all(|s| !matches!(s, Scalar::Float(_)));
    let dtype = dtype.unwrap_or(if all_int { DType::I64 } else { DType::F32 });
    if dtype == DType::Bool {
        return Err(TensorError::unsupported("arange", dtype));
    }
    // PyTorch 2.15's first check, before the dtype's conversions.
    let stf = step.to_f64();
    if !stf.is_finite() {
        return Err(TensorError::value(
            "arange",
            format!("step must be finite but got {step}"),
        ));
    }
    let inconsistent = || {
        TensorError::value(
            "arange",
            format!("upper bound {end} and lower bound {start} inconsistent with step sign {step}"),
        )
    };
    let step_zero = || TensorError::value("arange", format!("step must be nonzero (got {step})"));
    let too_long = |len: String| {
        TensorError::value(
            "arange",
            format!(
                "invalid size {len} for arange({start}, {end}, {step}): possible overflow (at most i64::MAX elements)"
            ),
        )
    };
    // The f64 length rule of every dtype but i64.
    let float_len = || -> Result<usize> {
        let d = ((end.to_f64() - start.to_f64()) / step.to_f64()).ceil();
        if d.is_nan() || d < 0.0 || d >= -(i64::MIN as f64) {
            return Err(too_long(format!("{d}")));
        }
        Ok(d as usize)
    };
    // The checks of a range given in floats, in PyTorch's order: a nonzero
    // step, finite bounds, then a step whose sign agrees with the bounds.
    let checked = |s: f64, e: f64, st: f64| -> Result<()> {
        if st == 0.0 || st.is_nan() {
            return Err(step_zero());
        }
        if !(s.is_finite() && e.is_finite()) {
            return Err(unsupported_range(start, end));
        }
        if (st > 0.0 && e < s) || (st < 0.0 && e > s) {
            return Err(inconsistent());
        }
        Ok(())
    };
    if !dtype.is_float() && !all_int {
        // PyTorch 2.15 with a float argument: the checks and the length use
        // the values as given (f64), the elements are trunc(start) + i *
        // trunc(step) (in i64, wrapped into the dtype), so
        // `arange(0.5, 3.7, 1, i64)` is [0, 1, 2, 3] and
        // `arange(0, 5, 0.5, i64)` ten zeros (2.11 truncated first: [0, 1, 2]
        // and a zero-step error).
        checked(start.to_f64(), end.to_f64(), stf)?;
        let len = float_len()?;
        return Ok(ArangePlan {
            dtype,
            len,
            seq: Sequence::IntRange {
                start: to_i64_checked(start)?,
                step: to_i64_checked(step)?,
            },
        });
    }
    if !dtype.is_float() {
        let (s, e, st) = (
            to_i64_checked(start)?,
            to_i64_checked(end)?,
            to_i64_checked(step)?,
        );
        // PyTorch 2.15 checks the bounds as f64, whatever the dtype: bounds
        // beyond 2^53 that round to one f64 pass the sign check
        // (`arange(2**62, 2**62 + 2, -1, dtype=torch.int32)` is empty; for
        // i64 the exact length below is then negative, an invalid size).
        checked(s as f64, e as f64, st as f64)?;
        let len = if dtype == DType::I64 {
            let (s, e, st) = (i128::from(s), i128::from(e), i128::from(st));
            let l = (e - s + st - st.signum()) / st;
            if !(0..=i128::from(i64::MAX)).contains(&l) {
                return Err(too_long(format!("{l}")));
            }
            l as usize
        } else {
            float_len()?
        };
        return Ok(ArangePlan {
            dtype,
            len,
            seq: Sequence::IntRange { start: s, step: st },
        });
    }
    let (s, e, st) = (start.to_f64(), end.to_f64(), step.to_f64());
    let seq = match dtype {
        DType::F16 | DType::BF16 => {
            // The checks and the length take the values as given (PyTorch
            // accepts `arange(0, 1e39, 1e38, dtype=f16)`: ten elements, all
            // but the first rounding to inf, and refuses `arange(1e-50, 0,
            // 1)`); the sequence is computed in f32, from a start and a step
            // that must fit in it.
            checked(s, e, st)?;
            let len = float_len()? as u64;
            for v in [s, st] {
                if v.abs() > f64::from(f32::MAX) {
                    return Err(TensorError::value(
                        "arange",
                        format!(
                            "value {v:e} cannot be converted to type f32 (the accumulate type \
                             of {dtype}) without overflow; give an f32 or f64 dtype"
                        ),
                    ));
                }
            }
            let (s32, st32) = (s as f32, st as f32);
            Sequence::Float32Range {
                start: s32,
                step: st32,
                len,
                bf16: dtype == DType::BF16,
            }
        }
        _ => {
            checked(s, e, st)?;
            Sequence::FloatRange {
                start: s,
                step: st,
                len: float_len()? as u64,
                f32: dtype == DType::F32,
            }
        }
    };
    Ok(ArangePlan {
        dtype,
        len: float_len()?,
        seq,
    })
}

fn unsupported_range(start: Scalar, end: Scalar) -> TensorError {
    TensorError::value(
        "arange",
        format!("unsupported range: {start} -> {end} (the bounds must be finite)"),
    )
}

// ----- issue 12: creation on the device (`*_like`, `empty`, `eye`, `randint`) -----

impl crate::tensor::Tensor {
    /// `torch.empty_like(self, dtype)`: a fresh uninitialised tensor of
    /// self's shape and device (self's dtype unless one is given; `bool`
    /// elements start `false`, as in [`Tensor::empty`](crate::Tensor::empty)), laid out as
    /// PyTorch's `torch.preserve_format` lays it out: with self's strides
    /// when self is non-overlapping and dense (a transposed tensor gives a
    /// transposed one), else dense in the order of self's strides. A self
    /// without elements keeps its strides, whatever they are, as in PyTorch.
    ///
    /// ```
    /// use strata_tensor::{Tensor, Device, DType};
    /// let a = Tensor::zeros(&[2, 3], DType::F32, Device::Cpu).unwrap();
    /// assert_eq!(a.t().unwrap().empty_like(None).unwrap().strides(), &[1, 3]);
    /// ```
    #[track_caller]
    pub fn empty_like(&self, dtype: Option<DType>) -> Result<crate::tensor::Tensor> {
        let t = self.uninit_preserving("empty_like", dtype.unwrap_or(self.dtype()))?;
        if t.dtype() == DType::Bool {
            t.fill_(false)?;
        }
        Ok(t)
    }

    /// `torch.zeros_like(self, dtype)`: zeros of self's shape and device,
    /// filled on the device (fresh storage laid out as in
    /// [`Tensor::empty_like`](crate::Tensor::empty_like)).
    ///
    /// ```
    /// use strata_tensor::{Tensor, Device, DType};
    /// let a = Tensor::ones(&[2, 3], DType::U8, Device::Cpu).unwrap();
    /// let z = a.t().unwrap().zeros_like(Some(DType::F64)).unwrap();
    /// assert_eq!((z.shape(), z.dtype()), (&[3usize, 2][..], DType::F64));
    /// ```
    #[track_caller]
    pub fn zeros_like(&self, dtype: Option<DType>) -> Result<crate::tensor::Tensor> {
        self.full_like(Scalar::Int(0), dtype)
    }

    /// `self.new_full(shape, value)`: a contiguous tensor of `shape` filled
    /// with `value`, in self's dtype and on self's device (PyTorch's
    /// `new_full`; `value` is converted as [`full_like`](Self::full_like)
    /// converts it). `new_zeros` and `new_ones` are its 0 and 1.
    ///
    /// ```
    /// use strata_tensor::{DType, Device, Tensor};
    /// let a = Tensor::ones(&[5], DType::I32, Device::Cpu)?;
    /// let b = a.new_full(&[2, 2], 7)?;
    /// assert_eq!((b.dtype(), b.to_vec::<i32>()?), (DType::I32, vec![7; 4]));
    /// assert_eq!(a.new_zeros(&[3])?.to_vec::<i32>()?, [0, 0, 0]);
    /// assert!(a.to_dtype(DType::U8)?.new_full(&[1], 300).is_err());
    /// # Ok::<(), strata_tensor::TensorError>(())
    /// ```
    #[track_caller]
    pub fn new_full(
        &self,
        shape: &[usize],
        value: impl Into<Scalar>,
    ) -> Result<crate::tensor::Tensor> {
        // `full`'s `fill_` refuses a value the dtype cannot hold.
        crate::tensor::Tensor::full(shape, value, self.dtype(), self.device())
    }

    /// `self.new_zeros(shape)`: [`new_full`](Self::new_full) with 0.
    #[track_caller]
    pub fn new_zeros(&self, shape: &[usize]) -> Result<crate::tensor::Tensor> {
        self.new_full(shape, Scalar::Int(0))
    }

    /// `self.new_ones(shape)`: [`new_full`](Self::new_full) with 1.
    #[track_caller]
    pub fn new_ones(&self, shape: &[usize]) -> Result<crate::tensor::Tensor> {
        self.new_full(shape, Scalar::Int(1))
    }

    /// `torch.ones_like(self, dtype)`.
    #[track_caller]
    pub fn ones_like(&self, dtype: Option<DType>) -> Result<crate::tensor::Tensor> {
        self.full_like(Scalar::Int(1), dtype)
    }

    /// `torch.full_like(self, value, dtype)`: the dtype is self's unless
    /// given, never inferred from the value, which is converted to it (a
    /// value out of the dtype's range, or NaN into an integer dtype, is
    /// [`TensorError::Value`]).
    #[track_caller]
    pub fn full_like(
        &self,
        value: impl Into<Scalar>,
        dtype: Option<DType>,
    ) -> Result<crate::tensor::Tensor> {
        let value = value.into();
        let dtype = dtype.unwrap_or(self.dtype());
        // As `fill_` (a single f16/bf16 element takes an out-of-range value
        // as ±inf).
        if !value.fill_fits(dtype, self.numel()) {
            return Err(TensorError::value(
                "full_like",
                format!("value {value} cannot be converted to {dtype} without overflow"),
            ));
        }
        // Laid out as `empty_like` (PyTorch's `full_like` is `empty_like`
        // and `fill_`).
        let t = self.uninit_preserving("full_like", dtype)?;
        t.fill_(value)?;
        Ok(t)
    }

    /// `empty` (a fresh tensor without elements, its dtype checked by the
    /// op that made it) with self's shape and strides.
    fn empty_layout_of(&self, empty: &crate::tensor::Tensor) -> crate::tensor::Tensor {
        empty.with_layout(crate::layout::Layout {
            shape: self.shape().to_vec(),
            strides: self.strides().to_vec(),
            offset: 0,
        })
    }

    /// `torch.eye(n, m, dtype)`: an `n x m` matrix (`m = n` when `None`)
    /// with ones where row == col, zeros elsewhere; written on the device
    /// (a fill, then a fill of the diagonal through a strided view).
    ///
    /// ```
    /// use strata_tensor::{Tensor, Device, DType};
    /// let e = Tensor::eye(2, Some(3), DType::I64, Device::Cpu).unwrap();
    /// assert_eq!(e.to_vec::<i64>().unwrap(), vec![1, 0, 0, 0, 1, 0]);
    /// ```
    #[track_caller]
    pub fn eye(
        n: usize,
        m: Option<usize>,
        dtype: DType,
        device: strata_alloc::Device,
    ) -> Result<crate::tensor::Tensor> {
        let m = m.unwrap_or(n);
        // A shape too large is named as this op's (not `full`'s).
        crate::shape::check_contiguous("eye", &[n, m])?;
        let out = crate::tensor::Tensor::zeros(&[n, m], dtype, device)?;
        let k = n.min(m);
        if k > 0 {
            let diag = out.with_layout(crate::layout::Layout {
                shape: vec![k],
                strides: vec![m + 1],
                offset: 0,
            });
            diag.fill_(Scalar::Int(1))?;
        }
        Ok(out)
    }

    /// `torch.randint(low, high, shape, dtype)`: integers uniform in
    /// `[low, high)` (`dtype` i64 unless given; a float dtype holds
    /// integer values) from the seeded counter-based Philox generator,
    /// generated on the device. `low >= high`, or bounds the dtype cannot
    /// hold, are [`TensorError::Value`]; a bool dtype takes `0 <= low < high
    /// <= 2`, as in PyTorch (drawn as u8 and converted).
    ///
    /// ```
    /// use strata_tensor::{Tensor, Device};
    /// let t = Tensor::randint(-3, 4, &[1000], None, 7, Device::Cpu).unwrap();
    /// let v = t.to_vec::<i64>().unwrap();
    /// assert!(v.iter().all(|x| (-3..4).contains(x)));
    /// assert!(Tensor::randint(4, 4, &[1], None, 7, Device::Cpu).is_err());
    /// ```
    #[track_caller]
    pub fn randint(
        low: i64,
        high: i64,
        shape: &[usize],
        dtype: Option<DType>,
        seed: u64,
        device: strata_alloc::Device,
    ) -> Result<crate::tensor::Tensor> {
        let dtype = dtype.unwrap_or(DType::I64);
        if low >= high {
            return Err(TensorError::value(
                "randint",
                format!("low ({low}) must be less than high ({high})"),
            ));
        }
        let exact = |v: i64| match dtype {
            // Integers beyond 2^mantissa would not be represented exactly.
            DType::F16 => v.unsigned_abs() <= 1 << 11,
            DType::BF16 => v.unsigned_abs() <= 1 << 8,
            DType::F32 => v.unsigned_abs() <= 1 << 24,
            DType::F64 => v.unsigned_abs() <= 1 << 53,
            // PyTorch's bool bounds: `low` and `high - 1` in {0, 1}.
            DType::Bool => (0..=1).contains(&v),
            d => Scalar::Int(v).fits(d) && (d != DType::U8 || v >= 0),
        };
        if !exact(low) || !exact(high - 1) {
            return Err(TensorError::value(
                "randint",
                format!("the range [{low}, {high}) does not fit in {dtype}"),
            ));
        }
        if dtype == DType::Bool {
            // Drawn as u8 (0 or 1, the same stream) and converted.
            return Self::randint(low, high, shape, Some(DType::U8), seed, device)?
                .to_dtype_contiguous(DType::Bool);
        }
        let range = (i128::from(high) - i128::from(low)) as u64;
        let seq = Sequence::RandInt { low, range, seed };
        let t = crate::tensor::Tensor::generated(shape, dtype, device, seq)?;
        t.remember_value_range(low, high - 1);
        Ok(t)
    }

    /// `torch.rand_like(self, dtype)`: [`Tensor::rand`](crate::Tensor::rand) of self's shape and
    /// device (self's dtype unless given; a float dtype). A self without
    /// elements keeps its strides, as PyTorch's does (see
    /// [`Tensor::empty_like`](crate::Tensor::empty_like)).
    #[track_caller]
    pub fn rand_like(&self, dtype: Option<DType>, seed: u64) -> Result<crate::tensor::Tensor> {
        if self.numel() == 0 {
            let t = crate::tensor::Tensor::rand(
                &[0],
                dtype.unwrap_or(self.dtype()),
                seed,
                self.device(),
            )?;
            return Ok(self.empty_layout_of(&t));
        }
        crate::tensor::Tensor::rand(
            self.shape(),
            dtype.unwrap_or(self.dtype()),
            seed,
            self.device(),
        )
    }

    /// `torch.randn_like(self, dtype)`: [`Tensor::randn`](crate::Tensor::randn) of self's shape
    /// and device (self's dtype unless given; a float dtype). A self without
    /// elements keeps its strides, as in [`Tensor::rand_like`](crate::Tensor::rand_like).
    #[track_caller]
    pub fn randn_like(&self, dtype: Option<DType>, seed: u64) -> Result<crate::tensor::Tensor> {
        if self.numel() == 0 {
            let t = crate::tensor::Tensor::randn(
                &[0],
                dtype.unwrap_or(self.dtype()),
                seed,
                self.device(),
            )?;
            return Ok(self.empty_layout_of(&t));
        }
        crate::tensor::Tensor::randn(
            self.shape(),
            dtype.unwrap_or(self.dtype()),
            seed,
            self.device(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// PyTorch 2.15's answers (probed on the CPU): an integer dtype with a
    /// float argument takes its length from the f64 values and its elements
    /// from the truncated start and step.
    #[test]
    fn integer_arange_with_float_arguments_follows_torch_2_15() {
        let ints = |s: Scalar, e: Scalar, st: Scalar, d: DType| {
            crate::tensor::Tensor::arange(s, e, st, Some(d), crate::Device::Cpu)
                .and_then(|t| t.to_vec_as::<i64>())
        };
        let (f, i) = (Scalar::Float, Scalar::Int);
        assert_eq!(
            ints(f(0.5), f(3.7), i(1), DType::I64).unwrap(),
            vec![0, 1, 2, 3]
        );
        assert_eq!(
            ints(f(-2.5), f(2.5), i(1), DType::I64).unwrap(),
            vec![-2, -1, 0, 1, 2]
        );
        assert_eq!(
            ints(f(-2.5), f(2.5), i(1), DType::U8).unwrap(),
            vec![254, 255, 0, 1, 2]
        );
        assert_eq!(ints(i(0), i(5), f(0.5), DType::I32).unwrap(), vec![0; 10]);
        assert_eq!(
            ints(i(0), i(10), f(2.9), DType::I64).unwrap(),
            vec![0, 2, 4, 6]
        );
        assert_eq!(
            ints(f(3.7), f(0.5), i(-1), DType::I64).unwrap(),
            vec![3, 2, 1, 0]
        );
        assert!(ints(i(0), i(1), f(f64::NAN), DType::I64).is_err());
        assert!(ints(f(0.0), f(1.0), f(-0.5), DType::I64).is_err());
    }

    fn len(s: impl Into<Scalar>, e: impl Into<Scalar>, st: impl Into<Scalar>) -> Result<usize> {
        arange_plan(s.into(), e.into(), st.into(), None).map(|p| p.len)
    }

    #[test]
    fn lengths_follow_ceil_of_the_span_over_the_step() {
        assert_eq!(len(0, 10, 3).unwrap(), 4);
        assert_eq!(len(10, 0, -3).unwrap(), 4);
        assert_eq!(len(0.0, 1.0, 0.3).unwrap(), 4);
        assert_eq!(len(0, 0, 1).unwrap(), 0);
        assert_eq!(len(i64::MIN, i64::MIN + 5, 2).unwrap(), 3);
    }

    #[test]
    fn hostile_bounds_are_value_errors() {
        for r in [
            len(0.0, f64::INFINITY, 1.0),
            len(f64::NAN, 1.0, 1.0),
            len(0.0, 1.0, f64::NAN),
            len(i64::MIN, i64::MAX, 1),
            len(0, 1, 0),
            len(1, 0, 1),
            len(-1e308, 1e308, 1e-308),
        ] {
            assert!(matches!(r, Err(TensorError::Value { .. })), "{r:?}");
        }
        let b = arange_plan(0.into(), 2.into(), 1.into(), Some(DType::Bool));
        assert!(matches!(b, Err(TensorError::DType { .. })));
    }
}
