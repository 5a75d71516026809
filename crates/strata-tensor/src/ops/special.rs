//! Session 79: the element-wise math PyTorch users expect that strata
//! lacked: special functions (`erfinv`, `lgamma`, `digamma`, `polygamma`,
//! `mvlgamma`, `i0` and `torch.special`'s `i0e`/`i1`/`i1e`, `ndtr`,
//! `ndtri`, `log_ndtr`, `erfcx`, `entr`), `sinc`, `logit`, `xlog1py`,
//! `hypot`, `copysign`, `nextafter`, `fmax`/`fmin`, `heaviside`, `gcd`/
//! `lcm`, the bit shifts, `signbit`, `ldexp`, `frexp`, `float_power`,
//! `true_divide`/`floor_divide`, `isclose`, `isreal`, `rad2deg`/`deg2rad`,
//! `angle` and `positive`.
//!
//! The kernels are rows of the element-wise tables (`ops::table`, scalar
//! math in `ops::special_math`), so every device has them; the rest are
//! compositions. Each follows PyTorch 2.15's CPU: its dtype promotion
//! (integers and bool to f32 for the float-valued ops), its refusals (the
//! same dtypes fail, with a [`TensorError::DType`] error; a bad argument is
//! a [`TensorError::Value`]), f16/bf16 computed in f32 and rounded once.

use super::elementwise::{result_type, Operand, RoundingMode};
use super::table::{BinaryOp, UnaryFn};
use crate::backend::UnaryOp;
use crate::dtype::DType;
use crate::error::{Result, TensorError};
use crate::scalar::Scalar;
use crate::tensor::Tensor;

/// `180 / pi` and `pi / 180` as PyTorch's `rad2deg`/`deg2rad` use them.
/// The most elements of `mvlgamma`'s `[..., p]` tensor of arguments made at
/// once (2^24): a larger one is summed a block of `p` at a time.
const MVLGAMMA_CHUNK: usize = 1 << 24;
/// The most `lgamma` terms `mvlgamma` computes (2^32, tens of seconds).
const MVLGAMMA_MAX_TERMS: u128 = 1 << 32;
const DEG_PER_RAD: f64 = 57.295_779_513_082_32;
const RAD_PER_DEG: f64 = 0.017_453_292_519_943_295;

/// The dtype of `torch.ldexp(a, b)`: their promoted dtype, f32 if that is
/// an integer or bool dtype.
pub fn ldexp_dtype(a: &Tensor, b: &Tensor) -> DType {
    let d = result_type(&[Operand::Tensor(a), Operand::Tensor(b)]);
    if d.is_float() {
        d
    } else {
        DType::F32
    }
}

impl Tensor {
    fn special_unary(&self, f: UnaryFn, name: &'static str, halves: bool) -> Result<Tensor> {
        if !halves && matches!(self.dtype(), DType::F16 | DType::BF16) {
            return Err(TensorError::unsupported(name, self.dtype()));
        }
        self.unary(UnaryOp::Map(f), name, false)
    }

    /// PyTorch checks the broadcast before the kernel's dtype.
    fn broadcasts_with(&self, name: &'static str, b: &Operand) -> Result<()> {
        if let Operand::Tensor(t) = b {
            crate::shape::broadcast_shapes(name, self.shape(), t.shape())?;
        }
        Ok(())
    }

    /// The promoted dtype of `self` and `b`, which must be a float dtype
    /// (PyTorch's kernels of `hypot` and `nextafter` have none for integers).
    fn float_pair(&self, name: &'static str, b: &Operand) -> Result<()> {
        self.broadcasts_with(name, b)?;
        let d = result_type(&[Operand::Tensor(self), *b]);
        if d.is_float() {
            Ok(())
        } else {
            Err(TensorError::unsupported(name, d))
        }
    }

    /// The promoted dtype of `self` and `b`, which must be an integer dtype
    /// (`gcd`, `lcm`, the shifts).
    fn integer_pair(&self, name: &'static str, b: &Operand) -> Result<()> {
        self.broadcasts_with(name, b)?;
        let d = result_type(&[Operand::Tensor(self), *b]);
        if d.is_float() || d == DType::Bool {
            Err(TensorError::unsupported(name, d))
        } else {
            Ok(())
        }
    }

    /// `torch.erfinv`: the inverse error function (±inf at ±1, NaN outside
    /// [-1, 1]; integer and bool inputs give f32).
    ///
    /// ```
    /// use strata_tensor::{DType, Device, Tensor};
    /// let x = Tensor::from_slice(&[0.0f64, 1.0], &[2], Device::Cpu).unwrap();
    /// assert_eq!(x.erfinv().unwrap().to_vec::<f64>().unwrap(), vec![0.0, f64::INFINITY]);
    /// ```
    pub fn erfinv(&self) -> Result<Tensor> {
        self.special_unary(UnaryFn::Erfinv, "erfinv", true)
    }

    /// `torch.lgamma`: `ln |Gamma(x)|` (inf at 0 and the negative integers).
    ///
    /// ```
    /// use strata_tensor::{Device, Tensor};
    /// let x = Tensor::from_slice(&[1.0f64, 3.0, -1.0], &[3], Device::Cpu).unwrap();
    /// let y = x.lgamma().unwrap().to_vec::<f64>().unwrap();
    /// assert_eq!((y[0], y[2]), (0.0, f64::INFINITY));
    /// assert!((y[1] - 2f64.ln()).abs() < 1e-15);
    /// ```
    pub fn lgamma(&self) -> Result<Tensor> {
        self.special_unary(UnaryFn::Lgamma, "lgamma", true)
    }

    /// `torch.digamma` (`torch.special.psi`): `Gamma'(x) / Gamma(x)`;
    /// `digamma(0)` is `-inf`, `digamma(-0.0)` `inf`, NaN at the negative
    /// integers, as PyTorch.
    pub fn digamma(&self) -> Result<Tensor> {
        self.special_unary(UnaryFn::Digamma, "digamma", true)
    }

    /// `torch.polygamma(n, self)`: the `n`-th derivative of digamma
    /// (`n = 0` is digamma, `n = 1` trigamma, larger `n`
    /// `(-1)^(n+1) n! zeta(n + 1, x)`). A negative `n` is a
    /// [`TensorError::Value`].
    ///
    /// ```
    /// use strata_tensor::{Device, Tensor};
    /// let x = Tensor::from_slice(&[1.0f64], &[1], Device::Cpu).unwrap();
    /// // polygamma(2, 1) = -2 zeta(3)
    /// let t = x.polygamma(2).unwrap().to_vec::<f64>().unwrap()[0];
    /// assert!((t + 2.0 * 1.2020569031595942).abs() < 1e-12);
    /// assert!(x.polygamma(-1).is_err());
    /// ```
    pub fn polygamma(&self, n: i64) -> Result<Tensor> {
        if n > i64::from(i32::MAX) {
            // PyTorch's CPU kernel takes `n` as a C `int`: an `n` past
            // i32::MAX wraps, to a negative order (every value NaN) or to
            // `n mod 2^32` (`n + 1` once overflowed here, a panic).
            let n32 = n as i32;
            if n32 < 0 {
                let d = if self.dtype().is_float() {
                    self.dtype()
                } else {
                    DType::F32
                };
                return Tensor::full(self.shape(), f64::NAN, d, self.device());
            }
            return self.polygamma(i64::from(n32));
        }
        match n {
            ..0 => Err(TensorError::value(
                "polygamma",
                format!("polygamma(n, x) does not support negative n (got {n})"),
            )),
            0 => self.digamma(),
            1 => self.special_unary(UnaryFn::Trigamma, "polygamma", true),
            _ => {
                let z = self.binary(BinaryOp::Zeta, Operand::Scalar(Scalar::Int(n + 1)), false)?;
                let sign = if n % 2 == 1 { 1.0 } else { -1.0 };
                // n! as PyTorch's kernel forms it: `exp(lgamma(n + 1))` in
                // the dtype's compute type (`n` rounded to f16/bf16 first).
                let factor = match z.dtype() {
                    DType::F64 => libm::lgamma(n as f64 + 1.0).exp(),
                    d => {
                        let n1 = match d {
                            DType::F16 => f32::from(half::f16::from_f32(n as f32)) + 1.0,
                            DType::BF16 => f32::from(half::bf16::from_f32(n as f32)) + 1.0,
                            _ => n as f32 + 1.0,
                        };
                        let n1 = match d {
                            DType::F16 => f32::from(half::f16::from_f32(n1)),
                            DType::BF16 => f32::from(half::bf16::from_f32(n1)),
                            _ => n1,
                        };
                        f64::from(libm::lgammaf(n1).exp())
                    }
                };
                z.mul(sign * factor)
            }
        }
    }

    /// `torch.mvlgamma(self, p)`: the multivariate log-gamma function,
    /// `sum_j lgamma(x - j / 2) + p (p - 1) / 4 ln pi` over `j < p`. Bool
    /// input and `p < 1` are errors; integer input gives f32.
    pub fn mvlgamma(&self, p: i64) -> Result<Tensor> {
        if self.dtype() == DType::Bool {
            return Err(TensorError::dtype(
                "mvlgamma",
                "the input tensor may not be a boolean tensor",
            ));
        }
        if p < 1 {
            return Err(TensorError::value(
                "mvlgamma",
                format!("p has to be greater than or equal to 1 (got {p})"),
            ));
        }
        let d = if self.dtype().is_float() {
            self.dtype()
        } else {
            DType::F32
        };
        // PyTorch's composition: the sum over j < p of lgamma(x - j / 2),
        // from an `[..., p]` tensor of the arguments. Where that tensor would
        // pass MVLGAMMA_CHUNK elements (a huge p), the terms are summed a
        // block of j at a time, so that memory stays bounded (PyTorch
        // allocates the whole tensor, and a p of 2^31 exhausts a host).
        // More terms than MVLGAMMA_MAX_TERMS would take minutes to hours
        // (counted as at least one element: the arguments alone are p)
        // (p = i64::MAX would never end; PyTorch fails to make the tensor).
        let terms_count = (self.numel().max(1) as u128).saturating_mul(p as u128);
        if terms_count > MVLGAMMA_MAX_TERMS {
            return Err(TensorError::value(
                "mvlgamma",
                format!(
                    "p = {p} over {} elements makes {terms_count} lgamma terms (PyTorch's \
                     composition builds a [..., p] tensor of them); strata computes at most \
                     {MVLGAMMA_MAX_TERMS}: use a smaller p or fewer elements",
                    self.numel()
                ),
            ));
        }
        let step = (MVLGAMMA_CHUNK / self.numel().max(1)).max(1) as i64;
        let x = self.unsqueeze(-1)?;
        let terms = |lo: i64, hi: i64| -> Result<Tensor> {
            // j from p - 1 - lo down to p - hi: -(p - 1 - lo) / 2 upwards.
            let start = -((p - 1 - lo) as f64) * 0.5;
            let end = -((p - hi) as f64) * 0.5 + 0.5;
            let args = Tensor::arange(start, end, 0.5, Some(d), self.device())?;
            args.add(&x)?.lgamma()?.sum(Some(&[-1]), false)
        };
        let mut sum = terms(0, step.min(p))?;
        let mut lo = step;
        while lo < p {
            sum = sum.add(&terms(lo, (lo + step).min(p))?)?;
            lo += step;
        }
        let c = p as f64 * (p as f64 - 1.0) * std::f64::consts::PI.ln() * 0.25;
        sum.add(c)
    }

    /// `torch.i0`: the modified Bessel function of the first kind, order 0.
    pub fn i0(&self) -> Result<Tensor> {
        self.special_unary(UnaryFn::I0, "i0", true)
    }

    /// `torch.special.i0e`: `exp(-|x|) i0(x)`.
    pub fn special_i0e(&self) -> Result<Tensor> {
        self.special_unary(UnaryFn::I0e, "special_i0e", true)
    }

    /// `torch.special.i1`: the modified Bessel function of the first kind,
    /// order 1.
    pub fn special_i1(&self) -> Result<Tensor> {
        self.special_unary(UnaryFn::I1, "special_i1", true)
    }

    /// `torch.special.i1e`: `exp(-|x|) i1(x)`.
    pub fn special_i1e(&self) -> Result<Tensor> {
        self.special_unary(UnaryFn::I1e, "special_i1e", true)
    }

    /// `torch.sinc`: `sin(pi x) / (pi x)`, 1 at 0.
    pub fn sinc(&self) -> Result<Tensor> {
        self.special_unary(UnaryFn::Sinc, "sinc", true)
    }

    /// `torch.special.entr`: `-x ln x`, 0 at 0, `-inf` below 0.
    pub fn special_entr(&self) -> Result<Tensor> {
        self.special_unary(UnaryFn::Entr, "special_entr", true)
    }

    /// `torch.special.ndtr`: the standard normal distribution function.
    pub fn special_ndtr(&self) -> Result<Tensor> {
        self.special_unary(UnaryFn::Ndtr, "special_ndtr", true)
    }

    /// `torch.special.ndtri`: the inverse of [`Tensor::special_ndtr`]
    /// (f16/bf16 are refused, as PyTorch's CPU kernel has none for them).
    pub fn special_ndtri(&self) -> Result<Tensor> {
        self.special_unary(UnaryFn::Ndtri, "special_ndtri", false)
    }

    /// `torch.special.log_ndtr`: `ln ndtr(x)`, accurate far into the
    /// lower tail (f16/bf16 refused, as PyTorch's CPU).
    pub fn special_log_ndtr(&self) -> Result<Tensor> {
        self.special_unary(UnaryFn::LogNdtr, "special_log_ndtr", false)
    }

    /// `torch.special.erfcx`: `exp(x^2) erfc(x)` (f16/bf16 refused, as
    /// PyTorch's CPU).
    pub fn special_erfcx(&self) -> Result<Tensor> {
        self.special_unary(UnaryFn::Erfcx, "special_erfcx", false)
    }

    /// `torch.logit(self, eps)`: `ln(z / (1 - z))`, `z` the input clamped
    /// to `[eps, 1 - eps]` when `eps` is given (a negative `eps` clamps
    /// nothing, as PyTorch).
    ///
    /// ```
    /// use strata_tensor::{Device, Tensor};
    /// let x = Tensor::from_slice(&[0.5f64, 0.0], &[2], Device::Cpu).unwrap();
    /// assert_eq!(x.logit(None).unwrap().to_vec::<f64>().unwrap(), vec![0.0, f64::NEG_INFINITY]);
    /// let clamped = x.logit(Some(0.25)).unwrap().to_vec::<f64>().unwrap();
    /// assert_eq!(clamped[1], (0.25f64 / 0.75).ln());
    /// ```
    pub fn logit(&self, eps: Option<f64>) -> Result<Tensor> {
        let eps = eps.unwrap_or(-1.0);
        if matches!(self.dtype(), DType::F16 | DType::BF16) {
            // PyTorch's kernel computes in the half type: the clamped value,
            // `1 - z`, the quotient and the log each rounded to it.
            let z = if eps >= 0.0 {
                // `x < eps ? eps : (x > 1 - eps ? 1 - eps : x)` as PyTorch's
                // kernel: with eps > 0.5 the bounds cross, and values below
                // eps take eps (a clamp gave 1 - eps to all of them).
                let hi = Tensor::where_cond(&self.gt(1.0 - eps)?, 1.0 - eps, self)?;
                Tensor::where_cond(&self.lt(eps)?, eps, &hi)?
            } else {
                self.clone()
            };
            return z.div(&z.neg()?.add(1.0)?)?.log();
        }
        self.binary(BinaryOp::Logit, Operand::Scalar(Scalar::Float(eps)), false)
    }

    /// `torch.xlog1py(self, other)` (`torch.special.xlog1py`):
    /// `self ln(1 + other)`, 0 where self is 0 unless `other` is NaN;
    /// broadcasting, integer and bool operands promoting to f32.
    pub fn xlog1py<'a>(&self, other: impl Into<Operand<'a>>) -> Result<Tensor> {
        let b = other.into();
        let d = result_type(&[Operand::Tensor(self), b]);
        if matches!(d, DType::F16 | DType::BF16) {
            // PyTorch's kernel computes in the half type: `log1p(other)`
            // rounded to it before the product (a scalar `other` too, which
            // it wraps into a tensor of that dtype).
            self.broadcasts_with("xlog1py", &b)?;
            let x = self.to_dtype(d)?;
            let y = match b {
                Operand::Tensor(t) => t.to_dtype(d)?,
                Operand::Scalar(s) => Tensor::full(&[], s, d, self.device())?,
            };
            let prod = x.mul(&y.log1p()?)?;
            let zeroed = Tensor::where_cond(&x.eq(0)?, 0.0, &prod)?;
            return Tensor::where_cond(&y.isnan()?, f64::NAN, &zeroed);
        }
        self.binary(BinaryOp::Xlog1py, b, false)
    }

    /// `torch.special.xlog1py`, the same as [`Tensor::xlog1py`].
    pub fn special_xlog1py<'a>(&self, other: impl Into<Operand<'a>>) -> Result<Tensor> {
        self.xlog1py(other)
    }

    /// `torch.hypot(self, other)`: `sqrt(self^2 + other^2)` without
    /// overflow; float operands only (PyTorch has no integer kernel).
    pub fn hypot(&self, other: &Tensor) -> Result<Tensor> {
        let b = Operand::Tensor(other);
        self.float_pair("hypot", &b)?;
        self.binary(BinaryOp::Hypot, b, false)
    }

    /// `torch.copysign(self, other)`: `|self|` with the sign of `other`
    /// (its sign bit: -0.0 and -NaN count as negative); integer and bool
    /// operands promote to f32.
    ///
    /// ```
    /// use strata_tensor::{Device, Tensor};
    /// let x = Tensor::from_slice(&[1.0f64, -2.0], &[2], Device::Cpu).unwrap();
    /// assert_eq!(x.copysign(-0.0).unwrap().to_vec::<f64>().unwrap(), vec![-1.0, -2.0]);
    /// ```
    pub fn copysign<'a>(&self, other: impl Into<Operand<'a>>) -> Result<Tensor> {
        self.binary(BinaryOp::Copysign, other.into(), false)
    }

    /// `torch.nextafter(self, other)`: the next value of the operands'
    /// (float) dtype after self toward other.
    pub fn nextafter(&self, other: &Tensor) -> Result<Tensor> {
        let b = Operand::Tensor(other);
        self.float_pair("nextafter", &b)?;
        self.binary(BinaryOp::Nextafter, b, false)
    }

    /// `torch.fmax(self, other)`: the maximum, a NaN operand ignored (NaN
    /// only where both are NaN); every dtype.
    pub fn fmax(&self, other: &Tensor) -> Result<Tensor> {
        self.binary(BinaryOp::Fmax, Operand::Tensor(other), false)
    }

    /// `torch.fmin(self, other)`: the minimum, a NaN operand ignored.
    pub fn fmin(&self, other: &Tensor) -> Result<Tensor> {
        self.binary(BinaryOp::Fmin, Operand::Tensor(other), false)
    }

    /// `torch.heaviside(self, values)`: `values` where self is 0, else 1
    /// where self is positive and 0 where negative (or NaN). Both tensors
    /// must have one dtype, as PyTorch requires.
    pub fn heaviside(&self, values: &Tensor) -> Result<Tensor> {
        if self.dtype() != values.dtype() {
            return Err(TensorError::dtype(
                "heaviside",
                format!(
                    "heaviside is not yet implemented for tensors with different dtypes ({} and {})",
                    self.dtype(),
                    values.dtype()
                ),
            ));
        }
        self.binary(BinaryOp::Heaviside, Operand::Tensor(values), false)
    }

    /// `torch.gcd(self, other)`: the greatest common divisor of the
    /// absolute values (integer dtypes only).
    ///
    /// ```
    /// use strata_tensor::{Device, Tensor};
    /// let a = Tensor::from_slice(&[12i64, -9, 0], &[3], Device::Cpu).unwrap();
    /// let b = Tensor::from_slice(&[18i64, 6, 0], &[3], Device::Cpu).unwrap();
    /// assert_eq!(a.gcd(&b).unwrap().to_vec::<i64>().unwrap(), vec![6, 3, 0]);
    /// assert_eq!(a.lcm(&b).unwrap().to_vec::<i64>().unwrap(), vec![36, 18, 0]);
    /// ```
    pub fn gcd(&self, other: &Tensor) -> Result<Tensor> {
        let b = Operand::Tensor(other);
        self.integer_pair("gcd", &b)?;
        self.binary(BinaryOp::Gcd, b, false)
    }

    /// `torch.lcm(self, other)`: the least common multiple (integer
    /// dtypes only; it wraps as PyTorch's where it overflows).
    pub fn lcm(&self, other: &Tensor) -> Result<Tensor> {
        let b = Operand::Tensor(other);
        self.integer_pair("lcm", &b)?;
        self.binary(BinaryOp::Lcm, b, false)
    }

    /// `torch.bitwise_left_shift(self, other)` (`self << other`): integer
    /// dtypes only; a shift by a negative amount or by the width or more
    /// gives 0.
    pub fn bitwise_left_shift<'a>(&self, other: impl Into<Operand<'a>>) -> Result<Tensor> {
        let b = other.into();
        self.integer_pair("bitwise_left_shift", &b)?;
        self.binary(BinaryOp::ShiftLeft, b, false)
    }

    /// `torch.bitwise_right_shift(self, other)` (`self >> other`,
    /// arithmetic): integer dtypes only; a shift by a negative amount or
    /// by the width or more gives the sign (0 or -1).
    pub fn bitwise_right_shift<'a>(&self, other: impl Into<Operand<'a>>) -> Result<Tensor> {
        let b = other.into();
        self.integer_pair("bitwise_right_shift", &b)?;
        self.binary(BinaryOp::ShiftRight, b, false)
    }

    /// `torch.bitwise_not(self)` (`~self`; logical not for bool): integer
    /// and bool dtypes only. Computed as `self ^ all-ones` (`-1` in the
    /// dtype, `true` for bool).
    pub fn bitwise_not(&self) -> Result<Tensor> {
        self.bitwise_not_checked("bitwise_not", false)?;
        self.bitwise_xor(self.all_bits_set())
    }

    /// In place `~self` ([`bitwise_not`](Tensor::bitwise_not)).
    pub fn bitwise_not_(&self) -> Result<Tensor> {
        self.bitwise_not_checked("bitwise_not_", true)?;
        self.bitwise_xor_(self.all_bits_set())
    }

    /// PyTorch's checks of `bitwise_not(_)`: an in-place output's overlap,
    /// then the dtype.
    fn bitwise_not_checked(&self, name: &'static str, inplace: bool) -> Result<()> {
        if inplace {
            super::elementwise::check_inplace_early(name, self, &[])?;
        }
        if self.dtype().is_float() {
            return Err(TensorError::unsupported(name, self.dtype()));
        }
        Ok(())
    }

    /// Every bit set in self's (integer or bool) dtype.
    fn all_bits_set(&self) -> Scalar {
        if self.dtype() == DType::Bool {
            Scalar::Bool(true)
        } else {
            Scalar::Int(-1)
        }
    }

    /// `torch.signbit`: whether each element's sign bit is set (bool;
    /// true for -0.0 and negative NaN; false for unsigned and bool).
    pub fn signbit(&self) -> Result<Tensor> {
        match self.dtype() {
            d if d.is_float() => self.full_like(1.0, None)?.copysign(self)?.lt(0),
            DType::U8 | DType::Bool => self.zeros_like(Some(DType::Bool)),
            _ => self.lt(0),
        }
    }

    /// `torch.ldexp(self, other)`: `self * 2^other` as PyTorch computes it:
    /// `2^other` in `other`'s (float-promoted) dtype, the product in the
    /// promoted dtype of `self` and that power, the result in the promoted
    /// dtype of `self` and `other` (integers give f32): an f16 tensor times
    /// `2^20` from an i64 exponent is rounded once from its f32 product,
    /// from an f16 exponent it is `inf` (`2^20` is, in f16).
    pub fn ldexp(&self, other: &Tensor) -> Result<Tensor> {
        let d = ldexp_dtype(self, other);
        if self.dtype().is_float() && !other.dtype().is_float() {
            return self.ldexp_integer(other, d);
        }
        let prod = self.mul(&Tensor::scalar_pow(2.0, other)?)?;
        if prod.dtype() == d {
            Ok(prod)
        } else {
            prod.to_dtype(d)
        }
    }

    /// `ldexp` of a float tensor by an integer (or bool) exponent (an
    /// integer tensor goes through `x * 2^e` in f32 in PyTorch too, so
    /// `ldexp(0, 255)` is NaN there): PyTorch's kernel calls
    /// `std::ldexp(x, int(e))` (the exponent wrapped to 32 bits), so
    /// `ldexp(0, 2000)` is 0 and `ldexp(inf, -2000)` inf, not the NaN of
    /// `x * 2^e`, and `ldexp(1.5, -1075)` rounds once to the smallest
    /// subnormal. Here: the exponent clamped to ±2200 (every result is 0
    /// or inf beyond) and split in three powers of two that f64 holds
    /// exactly, the products formed in f64 from `self` in the result's
    /// dtype (exact until the last, which rounds as ldexp does), then
    /// rounded once to that dtype. A bool exponent is refused (after the
    /// broadcast check), as PyTorch's kernel has no bool exponent.
    fn ldexp_integer(&self, other: &Tensor, d: DType) -> Result<Tensor> {
        crate::shape::broadcast_shapes("ldexp", self.shape(), other.shape())?;
        if other.dtype() == DType::Bool {
            return Err(TensorError::unsupported("ldexp_cpu_exp", DType::Bool));
        }
        let e = other
            .to_dtype(DType::I64)?
            .to_dtype(DType::I32)?
            .to_dtype(DType::F64)?
            .clamp(Some(-2200.0), Some(2200.0))?;
        let a = e.div_mode(3.0, RoundingMode::Trunc)?;
        let c = e.sub(&a.mul(2.0)?)?;
        let x = self.to_dtype(d)?.to_dtype(DType::F64)?;
        let y = x
            .mul(&Tensor::scalar_pow(2.0, &a)?)?
            .mul(&Tensor::scalar_pow(2.0, &a)?)?
            .mul(&Tensor::scalar_pow(2.0, &c)?)?;
        y.to_dtype(d)
    }

    /// `torch.frexp`: the mantissa (self's dtype, in `[0.5, 1)` in
    /// magnitude) and the exponent (i32) with `self = mantissa * 2^exponent`;
    /// 0, infinities and NaN give themselves and exponent 0. Float tensors
    /// only.
    ///
    /// ```
    /// use strata_tensor::{DType, Device, Tensor};
    /// let x = Tensor::from_slice(&[8.0f32, -3.0], &[2], Device::Cpu).unwrap();
    /// let (m, e) = x.frexp().unwrap();
    /// assert_eq!(m.to_vec::<f32>().unwrap(), vec![0.5, -0.75]);
    /// assert_eq!((e.dtype(), e.to_vec::<i32>().unwrap()), (DType::I32, vec![4, 2]));
    /// ```
    pub fn frexp(&self) -> Result<(Tensor, Tensor)> {
        if !self.dtype().is_float() {
            return Err(TensorError::dtype(
                "frexp",
                format!(
                    "torch.frexp() only supports floating-point dtypes (got {})",
                    self.dtype()
                ),
            ));
        }
        let m = self.unary(UnaryOp::Map(UnaryFn::FrexpMantissa), "frexp", false)?;
        let e = self.unary(UnaryOp::Map(UnaryFn::FrexpExponent), "frexp", false)?;
        Ok((m, e.to_dtype(DType::I32)?))
    }

    /// `torch.float_power(self, exponent)`: both operands in f64, then
    /// `pow` (the result is always f64).
    pub fn float_power<'a>(&self, exponent: impl Into<Operand<'a>>) -> Result<Tensor> {
        let x = self.to_dtype(DType::F64)?;
        match exponent.into() {
            Operand::Tensor(e) => x.pow(&e.to_dtype(DType::F64)?),
            Operand::Scalar(s) => x.pow(Scalar::Float(s.to_f64())),
        }
    }

    /// `torch.true_divide`, the same as [`Tensor::div`].
    pub fn true_divide<'a>(&self, other: impl Into<Operand<'a>>) -> Result<Tensor> {
        self.div(other)
    }

    /// `torch.floor_divide`: division rounded toward negative infinity
    /// (`div(rounding_mode="floor")`), keeping the promoted dtype.
    pub fn floor_divide<'a>(&self, other: impl Into<Operand<'a>>) -> Result<Tensor> {
        self.div_mode(other, RoundingMode::Floor)
    }

    /// `torch.isclose(self, other, rtol, atol, equal_nan)`: element-wise
    /// `|self - other| <= atol + rtol |other|` (finite) or equal, NaNs
    /// equal when `equal_nan`; a bool tensor, broadcasting. The dtypes must
    /// match and the tolerances be non-negative, as in PyTorch; integer and
    /// bool tensors are compared in f32, as [`Tensor::allclose`] does.
    ///
    /// ```
    /// use strata_tensor::{Device, Tensor};
    /// let a = Tensor::from_slice(&[1.0f64, f64::NAN, 2.0], &[3], Device::Cpu).unwrap();
    /// let b = Tensor::from_slice(&[1.0f64 + 1e-9, f64::NAN, 2.1], &[3], Device::Cpu).unwrap();
    /// let c = a.isclose(&b, 1e-5, 1e-8, true).unwrap();
    /// assert_eq!(c.to_vec::<bool>().unwrap(), vec![true, true, false]);
    /// ```
    pub fn isclose(&self, other: &Tensor, rtol: f64, atol: f64, equal_nan: bool) -> Result<Tensor> {
        if self.dtype() != other.dtype() {
            return Err(TensorError::dtype(
                "isclose",
                format!("{} did not match {}", self.dtype(), other.dtype()),
            ));
        }
        if rtol.is_nan() || rtol < 0.0 {
            return Err(TensorError::value(
                "isclose",
                format!("rtol must be greater than or equal to zero, but got {rtol}"),
            ));
        }
        if atol.is_nan() || atol < 0.0 {
            return Err(TensorError::value(
                "isclose",
                format!("atol must be greater than or equal to zero, but got {atol}"),
            ));
        }
        let mut close = self.eq(other)?;
        if equal_nan && self.dtype().is_float() {
            close = close.logical_or(&self.isnan()?.logical_and(&other.isnan()?)?)?;
        }
        if rtol == 0.0 && atol == 0.0 {
            return Ok(close);
        }
        let float = if self.dtype().is_float() {
            self.dtype()
        } else {
            DType::F32
        };
        let (a, b) = (self.to_dtype(float)?, other.to_dtype(float)?);
        let allowed = b.mul(rtol)?.abs()?.add(atol)?;
        let actual = a.sub(&b)?.abs()?;
        close.logical_or(&actual.isfinite()?.logical_and(&actual.le(&allowed)?)?)
    }

    /// `torch.isreal`: true everywhere (strata has no complex dtypes).
    pub fn isreal(&self) -> Result<Tensor> {
        self.ones_like(Some(DType::Bool))
    }

    /// `torch.rad2deg`: `self * 180 / pi` (integer and bool inputs give f32).
    pub fn rad2deg(&self) -> Result<Tensor> {
        self.float_or_f32()?.mul(DEG_PER_RAD)
    }

    /// `torch.deg2rad`: `self * pi / 180` (integer and bool inputs give f32).
    pub fn deg2rad(&self) -> Result<Tensor> {
        self.float_or_f32()?.mul(RAD_PER_DEG)
    }

    /// `torch.angle` of a real tensor: `pi` where negative, 0 elsewhere,
    /// NaN kept (integer and bool inputs give f32).
    pub fn angle(&self) -> Result<Tensor> {
        let x = self.float_or_f32()?;
        let pi = x.full_like(std::f64::consts::PI, None)?;
        let a = Tensor::where_cond(&x.lt(0)?, &pi, &x.zeros_like(None)?)?;
        Tensor::where_cond(&x.isnan()?, &x, &a)
    }

    /// `torch.positive`: self (bool is refused, as PyTorch's unary `+`).
    pub fn positive(&self) -> Result<Tensor> {
        if self.dtype() == DType::Bool {
            return Err(TensorError::dtype(
                "positive",
                "the `+` operator, on a bool tensor is not supported",
            ));
        }
        Ok(self.clone())
    }

    /// Self, or self converted to f32 when it is not a float tensor.
    fn float_or_f32(&self) -> Result<Tensor> {
        if self.dtype().is_float() {
            Ok(self.clone())
        } else {
            self.to_dtype(DType::F32)
        }
    }
}
