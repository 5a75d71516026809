//! The ops that ask what kind of value each element holds (`isnan`,
//! `isinf`, `isfinite`, `isposinf`, `isneginf`), the one that replaces the
//! non-finite ones (`nan_to_num`), the logical ops (`logical_not`, `_and`,
//! `_or`, `_xor`) and `square`: compositions of the element-wise table's ops,
//! so they run on every device and keep their input's layout.

use crate::dtype::DType;
use crate::error::Result;
use crate::ops::Operand;
use crate::scalar::Scalar;
use crate::tensor::Tensor;

/// The largest finite value of a float dtype (`torch.finfo(dtype).max`).
fn finite_max(d: DType) -> f64 {
    match d {
        DType::F16 => half::f16::MAX.to_f64(),
        DType::BF16 => half::bf16::MAX.to_f64(),
        DType::F32 => f64::from(f32::MAX),
        _ => f64::MAX,
    }
}

impl Tensor {
    /// Where each element is NaN (`torch.isnan`; bool result, all false
    /// for integer and bool tensors).
    ///
    /// ```
    /// use strata_tensor::{Tensor, Device};
    /// let x = Tensor::from_slice(&[1.0f32, f32::NAN, f32::INFINITY], &[3], Device::Cpu).unwrap();
    /// assert_eq!(x.isnan().unwrap().to_vec::<bool>().unwrap(), vec![false, true, false]);
    /// assert_eq!(x.isinf().unwrap().to_vec::<bool>().unwrap(), vec![false, false, true]);
    /// assert_eq!(x.isfinite().unwrap().to_vec::<bool>().unwrap(), vec![true, false, false]);
    /// ```
    pub fn isnan(&self) -> Result<Tensor> {
        self.ne(self)
    }

    /// Where each element is +inf or -inf (`torch.isinf`; all false for
    /// integer and bool tensors).
    pub fn isinf(&self) -> Result<Tensor> {
        if self.dtype().is_float() {
            self.abs()?.eq(f64::INFINITY)
        } else {
            self.ne(self)
        }
    }

    /// Where each element is +inf (`torch.isposinf`).
    pub fn isposinf(&self) -> Result<Tensor> {
        if self.dtype().is_float() {
            self.eq(f64::INFINITY)
        } else {
            self.ne(self)
        }
    }

    /// Where each element is -inf (`torch.isneginf`).
    pub fn isneginf(&self) -> Result<Tensor> {
        if self.dtype().is_float() {
            self.eq(f64::NEG_INFINITY)
        } else {
            self.ne(self)
        }
    }

    /// Where each element is neither NaN nor infinite (`torch.isfinite`;
    /// all true for integer and bool tensors).
    pub fn isfinite(&self) -> Result<Tensor> {
        if self.dtype().is_float() {
            // x - x is 0 for every finite x and NaN for NaN and the infinities.
            self.sub(self)?.eq(0)
        } else {
            self.eq(self)
        }
    }

    /// NaN, +inf and -inf replaced (`torch.nan_to_num`): by `nan` (default
    /// 0), `posinf` and `neginf` (default the dtype's largest and lowest
    /// finite values), each converted to the dtype (so a `posinf` too large
    /// for f16 is +inf again, as in PyTorch). Integer and bool tensors are
    /// copied unchanged.
    ///
    /// ```
    /// use strata_tensor::{Tensor, Device};
    /// let x = Tensor::from_slice(&[f32::NAN, f32::INFINITY, -f32::INFINITY, 2.0], &[4], Device::Cpu).unwrap();
    /// let y = x.nan_to_num(None, Some(1e4), None).unwrap();
    /// assert_eq!(y.to_vec::<f32>().unwrap(), vec![0.0, 1e4, f32::MIN, 2.0]);
    /// ```
    pub fn nan_to_num(
        &self,
        nan: Option<f64>,
        posinf: Option<f64>,
        neginf: Option<f64>,
    ) -> Result<Tensor> {
        let d = self.dtype();
        if !d.is_float() {
            return self.deep_clone();
        }
        // Each element's replacement is chosen from its own value, so a NaN
        // replaced by +inf stays +inf.
        let is_nan = self.isnan()?;
        let is_pos = self.isposinf()?;
        let is_neg = self.isneginf()?;
        // The replacements are converted as PyTorch's kernel converts them
        // (`static_cast`: too large is infinite), not checked as `where`'s
        // scalars are.
        let neg = Scalar::Float(neginf.unwrap_or(-finite_max(d))).cast_to(d);
        let pos = Scalar::Float(posinf.unwrap_or(finite_max(d))).cast_to(d);
        let nan = Scalar::Float(nan.unwrap_or(0.0)).cast_to(d);
        let r = Tensor::where_cond(&is_neg, neg, self)?;
        let r = Tensor::where_cond(&is_pos, pos, &r)?;
        Tensor::where_cond(&is_nan, nan, &r)
    }

    /// In place [`Tensor::nan_to_num`].
    pub fn nan_to_num_(
        &self,
        nan: Option<f64>,
        posinf: Option<f64>,
        neginf: Option<f64>,
    ) -> Result<Tensor> {
        if !self.dtype().is_float() {
            return Ok(self.clone());
        }
        let r = self.nan_to_num(nan, posinf, neginf)?;
        self.copy_(&r)
    }

    /// `self * self` (`torch.square`, which is `pow(self, 2)`: a bool
    /// tensor gives i64).
    pub fn square(&self) -> Result<Tensor> {
        self.pow(2)
    }

    /// In place `self * self` (`pow_(2)`; a bool tensor is an error, as its
    /// i64 result cannot be stored in it).
    pub fn square_(&self) -> Result<Tensor> {
        self.pow_(2)
    }

    /// Where each element is zero (`torch.logical_not`; NaN is not zero).
    pub fn logical_not(&self) -> Result<Tensor> {
        self.eq(0)
    }

    /// Where both operands are nonzero (`torch.logical_and`), broadcasting;
    /// NaN counts as nonzero.
    pub fn logical_and(&self, other: &Tensor) -> Result<Tensor> {
        self.ne(0)?.mul(&other.ne(0)?)
    }

    /// Where either operand is nonzero (`torch.logical_or`), broadcasting.
    pub fn logical_or(&self, other: &Tensor) -> Result<Tensor> {
        self.ne(0)?.add(&other.ne(0)?)
    }

    /// Where exactly one operand is nonzero (`torch.logical_xor`),
    /// broadcasting.
    pub fn logical_xor(&self, other: &Tensor) -> Result<Tensor> {
        self.ne(0)?.ne(Operand::Tensor(&other.ne(0)?))
    }
}
