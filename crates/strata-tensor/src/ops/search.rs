//! Binary search and counting: `searchsorted`, `bucketize`, `isin` (session
//! 82), `bincount` and
//! `histc` (session 77).
//!
//! Everything here is composed of existing tensor ops, so it runs on every
//! device without kernels of its own. `searchsorted` runs PyTorch's binary
//! search itself, one step for all values at once: `start`/`end` tensors,
//! the middle element fetched with `gather` (through the sorter when there
//! is one), one comparison and two `where`s per step, `bit_length(n)` steps
//! for a sequence of `n`. Taking PyTorch's exact steps (`!(mid >= v)` moves
//! right) rather than another search gives its answers also where the
//! sequence is not sorted or holds NaN (a NaN value is placed after every
//! element; a NaN in the sequence is never `>=` a value, so the search
//! passes it to the right, wherever that leads). `bincount` and `histc`
//! count with `scatter_add`; their sizes (the largest value, the data range)
//! cost one read back to the host, as in PyTorch.

use crate::dtype::DType;
use crate::error::{Result, TensorError};
use crate::ops::checks::check_fits;
use crate::ops::elementwise::{result_type, same_device};
use crate::ops::Operand;
use crate::scalar::Scalar;
use crate::tensor::Tensor;

/// The number of binary-search steps that settle every position of a
/// sequence of `n` elements: after `k` steps a search range holds at most
/// `n >> k` elements.
fn search_steps(n: usize) -> u32 {
    usize::BITS - n.leading_zeros()
}

impl Tensor {
    /// `torch.searchsorted(self, values, out_int32, right, side, sorter)`:
    /// for each value, the index at which it would be inserted into the
    /// sorted sequence `self` (each row along the last dim), keeping the
    /// sequence sorted: the first position whose element is `>= v` (left,
    /// the default) or `> v` (`right`, or `side = Some("right")`). The result
    /// has the values' shape and dtype i64 (i32 with `out_int32`).
    ///
    /// `self` is 1-D (then `values` may have any shape, 0-d or a scalar
    /// included) or N-D with `values` of the same rank and the same leading
    /// sizes (row `i` of `values` searches row `i` of `self`). `sorter`
    /// (i64, `self`'s shape) gives the sequence's ascending order when
    /// `self` itself is not sorted. The sequence and the values are compared
    /// in their promoted dtype (PyTorch's `result_type`: a Python scalar or
    /// a 0-d tensor ranks below a tensor with dims). Each step is PyTorch's
    /// (`cus_lower_bound`/`cus_upper_bound`), so NaN values land after every
    /// element and a sequence holding NaN gives PyTorch's indices.
    ///
    /// Errors ([`TensorError`]): `side` other than "left"/"right" or
    /// contradicting `right` (`Value`), a 0-d sequence, mismatched leading
    /// sizes, a 0-d value for an N-D sequence (`Shape`), bool operands or a
    /// sorter that is not i64 (`DType`), a sorter of another shape
    /// (`Shape`) or with an index outside the row (`Index`), operands on
    /// different devices.
    ///
    /// ```
    /// use strata_tensor::{Tensor, Device};
    /// let s = Tensor::from_slice(&[1.0f32, 3.0, 5.0, 7.0], &[4], Device::Cpu).unwrap();
    /// let v = Tensor::from_slice(&[3.0f32, 6.0, 9.0, f32::NAN], &[4], Device::Cpu).unwrap();
    /// let i = s.searchsorted(&v, false, false, None, None).unwrap();
    /// assert_eq!(i.to_vec::<i64>().unwrap(), vec![1, 3, 4, 4]);
    /// let i = s.searchsorted(&v, true, true, None, None).unwrap();
    /// assert_eq!(i.to_vec::<i32>().unwrap(), vec![2, 3, 4, 4]);
    /// let i = s.searchsorted(5.0, false, false, Some("right"), None).unwrap();
    /// assert_eq!((i.shape().len(), i.item::<i64>().unwrap()), (0, 3));
    /// ```
    pub fn searchsorted<'a>(
        &self,
        values: impl Into<Operand<'a>>,
        out_int32: bool,
        right: bool,
        side: Option<&str>,
        sorter: Option<&Tensor>,
    ) -> Result<Tensor> {
        const OP: &str = "searchsorted";
        let right = match side {
            None => right,
            Some("right") => true,
            Some("left") if !right => false,
            Some("left") => return Err(TensorError::value(
                OP,
                "side and right can't be set to opposites: side is \"left\" while right is true",
            )),
            Some(s) => {
                return Err(TensorError::value(
                    OP,
                    format!("side can only be \"left\" or \"right\", got {s:?}"),
                ))
            }
        };
        let values = values.into();
        // The common dtype of the comparisons.
        let common = match values {
            Operand::Tensor(t) if t.dtype() == self.dtype() => self.dtype(),
            _ => result_type(&[Operand::Tensor(self), values]),
        };
        // A Python-like scalar is wrapped at full precision (i64, f64 or
        // bool, PyTorch's `scalar_to_tensor`) and converted to the common
        // dtype with the other operands, a plain cast: an int that does not
        // fit an integer sequence's dtype wraps (300 in a u8 sequence is
        // searched as 44, 2^40 in an i32 one as 0), as in PyTorch.
        let v = match values {
            Operand::Tensor(t) => t.clone(),
            Operand::Scalar(s) => {
                let wide = match s {
                    Scalar::Bool(_) => DType::Bool,
                    Scalar::Int(_) => DType::I64,
                    Scalar::Float(_) => DType::F64,
                };
                Tensor::scalar(s, wide, self.device())?
            }
        };
        same_device(OP, self, &v)?;
        if let Some(s) = sorter {
            same_device(OP, self, s)?;
        }
        if self.ndim() == 0 {
            return Err(TensorError::shape(
                OP,
                "the sorted sequence should have at least 1 dimension, got a 0-d tensor",
            ));
        }
        let nd = self.ndim();
        if nd > 1 && (v.ndim() != nd || self.shape()[..nd - 1] != v.shape()[..nd - 1]) {
            return Err(TensorError::shape(
                OP,
                format!(
                    "the sorted sequence should be 1-D or the first N-1 sizes of it and of the values must match, \
                     but got a sequence of shape {:?} and values of shape {:?}",
                    self.shape(),
                    v.shape()
                ),
            ));
        }
        if let Some(s) = sorter {
            if s.dtype() != DType::I64 {
                return Err(TensorError::dtype(
                    OP,
                    format!(
                        "the sorter must be a tensor of dtype i64, got {}",
                        s.dtype()
                    ),
                ));
            }
            if s.shape() != self.shape() {
                return Err(TensorError::shape(
                    OP,
                    format!(
                        "the sorter's shape {:?} must equal the sorted sequence's {:?}",
                        s.shape(),
                        self.shape()
                    ),
                ));
            }
        }
        let n = self.shape()[nd - 1];
        if let Some(s) = sorter.filter(|s| s.numel() > 0) {
            let lo = s.min()?.item::<i64>()?;
            let hi = s.max()?.item::<i64>()?;
            if lo < 0 || hi >= n as i64 {
                return Err(TensorError::index(
                    OP,
                    format!("sorter index out of range: its indices lie in [{lo}, {hi}], the rows have {n} elements"),
                ));
            }
        }
        if out_int32 && n >= i32::MAX as usize {
            return Err(TensorError::value(
                OP,
                format!("the sequence's last dim ({n}) is too large for out_int32; pass out_int32 = false"),
            ));
        }
        let out_dtype = if out_int32 { DType::I32 } else { DType::I64 };
        // PyTorch returns an empty result before its kernel's dtype check.
        if v.numel() == 0 {
            return Tensor::zeros(v.shape(), out_dtype, self.device());
        }
        if common == DType::Bool {
            return Err(TensorError::unsupported(OP, DType::Bool));
        }
        if n == 0 {
            return Tensor::zeros(v.shape(), out_dtype, self.device());
        }
        let rows = self.numel() / n;
        let seq = self.to_dtype(common)?.reshape(&[rows as i64, n as i64])?;
        let vals = v.to_dtype(common)?.reshape(&[rows as i64, -1])?;
        let sorter = match sorter {
            Some(s) => Some(s.reshape(&[rows as i64, n as i64])?),
            None => None,
        };
        let mut start = Tensor::zeros(vals.shape(), DType::I64, self.device())?;
        let mut end = Tensor::full(vals.shape(), n as i64, DType::I64, self.device())?;
        for _ in 0..search_steps(n) {
            // PyTorch's `mid = start + ((end - start) >> 1)`; the settled
            // positions (start == end == n) read a valid element, unused.
            let mid = start.add(&end)?.div_mode(2, crate::RoundingMode::Floor)?;
            let at = mid.clamp(None::<i64>, Some(n as i64 - 1))?;
            let at = match &sorter {
                Some(s) => s.gather(1, &at)?,
                None => at,
            };
            let m = seq.gather(1, &at)?;
            let left_half = if right { m.gt(&vals)? } else { m.ge(&vals)? };
            let active = start.lt(&end)?;
            let go_left = active.logical_and(&left_half)?;
            let go_right = active.logical_and(&left_half.logical_not()?)?;
            end = Tensor::where_cond(&go_left, &mid, &end)?;
            start = Tensor::where_cond(&go_right, &mid.add(1)?, &start)?;
        }
        let shape: Vec<i64> = v.shape().iter().map(|&s| s as i64).collect();
        let out = start.reshape(&shape)?;
        let out = if out_int32 {
            out.to_dtype(DType::I32)?
        } else {
            out
        };
        out.remember_value_range(0, n as i64);
        Ok(out)
    }

    /// `torch.bucketize(self, boundaries, out_int32, right)`: for each
    /// element, the index of the bucket it falls in among the 1-D sorted
    /// `boundaries`: [`Tensor::searchsorted`] of `self` in `boundaries`
    /// (`right = false`: `boundaries[i-1] < x <= boundaries[i]`; `right`:
    /// `boundaries[i-1] <= x < boundaries[i]`). The result has self's shape
    /// (0-d included), dtype i64 (i32 with `out_int32`).
    ///
    /// Errors: boundaries that are not 1-D ([`TensorError::Shape`]), and
    /// those of [`Tensor::searchsorted`].
    ///
    /// ```
    /// use strata_tensor::{Tensor, Device};
    /// let b = Tensor::from_slice(&[1i64, 3, 5, 7, 9], &[5], Device::Cpu).unwrap();
    /// let x = Tensor::from_slice(&[3i64, 6, 9], &[3], Device::Cpu).unwrap();
    /// assert_eq!(x.bucketize(&b, false, false).unwrap().to_vec::<i64>().unwrap(), vec![1, 3, 4]);
    /// assert_eq!(x.bucketize(&b, false, true).unwrap().to_vec::<i64>().unwrap(), vec![2, 3, 5]);
    /// ```
    pub fn bucketize(&self, boundaries: &Tensor, out_int32: bool, right: bool) -> Result<Tensor> {
        if boundaries.ndim() != 1 {
            return Err(TensorError::shape(
                "bucketize",
                format!(
                    "the boundaries must be 1-D, got a tensor of shape {:?}",
                    boundaries.shape()
                ),
            ));
        }
        boundaries.searchsorted(self, out_int32, right, None, None)
    }

    /// `torch.isin(self, test_elements, invert=invert)`: whether each
    /// element of self is one of `test_elements` (a tensor of any shape, or
    /// a scalar), a bool tensor of self's shape (negated with `invert`).
    /// The two are compared in their promoted dtype (an i32 300 is not a u8
    /// 44); NaN is never found, -0.0 finds 0.0. Bool operands are refused
    /// ([`TensorError::DType`], as PyTorch's). A sort of the test elements
    /// and one `searchsorted` of every element, so any layout and device.
    /// (PyTorch's `assume_unique` only speeds its search; it is not taken.)
    ///
    /// ```
    /// use strata_tensor::{Device, Tensor};
    /// let x = Tensor::from_slice(&[1i64, 2, 3, 4], &[2, 2], Device::Cpu)?;
    /// let t = Tensor::from_slice(&[4i64, 1, 9], &[3], Device::Cpu)?;
    /// assert_eq!(x.isin(&t, false)?.to_vec::<bool>()?, [true, false, false, true]);
    /// assert_eq!(x.isin(2.0, true)?.to_vec::<bool>()?, [true, false, true, true]);
    /// # Ok::<(), strata_tensor::TensorError>(())
    /// ```
    pub fn isin<'a>(&self, test_elements: impl Into<Operand<'a>>, invert: bool) -> Result<Tensor> {
        const OP: &str = "isin";
        let test = test_elements.into();
        if let Operand::Tensor(t) = test {
            same_device(OP, self, t)?;
        }
        if self.dtype() == DType::Bool || test.dtype() == DType::Bool {
            return Err(TensorError::dtype(
                OP,
                "Unsupported input type encountered for isin(): Bool; convert bool operands \
                 to u8 first",
            ));
        }
        let d = result_type(&[Operand::Tensor(self), test]);
        let pool = match test {
            Operand::Tensor(t) => t.to_dtype(d)?.reshape(&[-1])?,
            Operand::Scalar(s) => Tensor::scalar(s.cast_to(d), d, self.device())?.reshape(&[1])?,
        };
        let x = self.to_dtype(d)?;
        let n = pool.numel();
        let found = if n == 0 || x.numel() == 0 {
            Tensor::zeros(x.shape(), DType::Bool, x.device())?
        } else {
            // A NaN test element finds nothing, but the binary search would
            // pass it to the right wherever it stands: it becomes -inf
            // (sorted first), and whether -inf itself is found is decided
            // by the test elements as they were.
            let neg_inf = f64::NEG_INFINITY;
            let (pool, has_neg_inf) = if d.is_float() {
                let has = pool.eq(neg_inf)?.any()?;
                (
                    Tensor::where_cond(&pool.isnan()?, neg_inf, &pool)?,
                    Some(has),
                )
            } else {
                (pool, None)
            };
            // The first test element >= each element, or the last one;
            // found where it equals the element.
            let sorted = pool.sort(0, false, false)?.0;
            let at = sorted.searchsorted(&x, false, false, None, None)?;
            let at = Tensor::where_cond(&at.ge(n as i64)?, (n - 1) as i64, &at)?;
            let found = sorted
                .index_select(0, &at.reshape(&[-1])?)?
                .reshape(&crate::shape::as_i64(x.shape()))?
                .eq(&x)?;
            match has_neg_inf {
                Some(has) => Tensor::where_cond(&x.eq(neg_inf)?, &has, &found)?,
                None => found,
            }
        };
        if invert {
            found.logical_not()
        } else {
            Ok(found)
        }
    }

    /// `torch.bincount(self, weights, minlength)`: the number of times each
    /// value `0..=max` occurs in the 1-D non-negative integer (u8, i32,
    /// i64) `self`, at least `minlength` bins. With `weights` (1-D, self's
    /// length) each occurrence adds its weight instead of 1.
    ///
    /// The dtype is PyTorch's: i64 without weights; with weights f32 for
    /// f32 weights and f64 for every other dtype (f16, bf16, integers and
    /// bool weights are converted to f64 first); an empty input gives i64
    /// zeros of `minlength`, weights or not (and its weights are not
    /// checked), as PyTorch's CPU kernel. Weights add in input order on the
    /// CPU (PyTorch's loop); on a GPU atomically, so f32 sums may differ
    /// in the last places.
    ///
    /// Errors: a negative `minlength` ([`TensorError::Value`]); a float or
    /// bool input ([`TensorError::DType`]); an input that is not 1-D
    /// ([`TensorError::Shape`]) or holds a negative value, or the value
    /// `i64::MAX` ([`TensorError::Value`]); weights of another shape
    /// ([`TensorError::Shape`]).
    ///
    /// ```
    /// use strata_tensor::{Tensor, Device, DType};
    /// let x = Tensor::from_slice(&[1i64, 1, 3], &[3], Device::Cpu).unwrap();
    /// assert_eq!(x.bincount(None, 0).unwrap().to_vec::<i64>().unwrap(), vec![0, 2, 0, 1]);
    /// let w = Tensor::from_slice(&[0.5f32, 1.0, 2.0], &[3], Device::Cpu).unwrap();
    /// let h = x.bincount(Some(&w), 6).unwrap();
    /// assert_eq!(h.dtype(), DType::F32);
    /// assert_eq!(h.to_vec::<f32>().unwrap(), vec![0.0, 1.5, 0.0, 2.0, 0.0, 0.0]);
    /// ```
    pub fn bincount(&self, weights: Option<&Tensor>, minlength: i64) -> Result<Tensor> {
        const OP: &str = "bincount";
        if !matches!(self.dtype(), DType::U8 | DType::I32 | DType::I64) {
            return Err(TensorError::dtype(
                OP,
                format!(
                    "the input must be of an integer dtype (u8, i32, i64), got {}",
                    self.dtype()
                ),
            ));
        }
        if let Some(w) = weights {
            same_device(OP, self, w)?;
        }
        if minlength < 0 {
            return Err(TensorError::value(
                OP,
                format!("minlength should be >= 0, got {minlength}"),
            ));
        }
        if self.ndim() == 1 && self.numel() == 0 {
            return Tensor::zeros(&[minlength as usize], DType::I64, self.device());
        }
        if self.ndim() != 1 {
            return Err(TensorError::shape(
                OP,
                format!(
                    "only 1-D non-negative integer inputs are supported, got shape {:?}",
                    self.shape()
                ),
            ));
        }
        let lo = self.min()?.item::<i64>()?;
        if lo < 0 {
            return Err(TensorError::value(
                OP,
                format!("only non-negative integer inputs are supported, got the value {lo}"),
            ));
        }
        let hi = self.max()?.item::<i64>()?;
        if hi == i64::MAX {
            return Err(TensorError::value(
                OP,
                format!("the input's maximum must be < {}, got {hi}", i64::MAX),
            ));
        }
        if let Some(w) = weights {
            if w.ndim() != 1 || w.shape()[0] != self.shape()[0] {
                return Err(TensorError::shape(
                    OP,
                    format!(
                        "the weights should be 1-D and as long as the input ({}), got shape {:?}",
                        self.shape()[0],
                        w.shape()
                    ),
                ));
            }
        }
        let bins = (hi + 1).max(minlength);
        let bins = usize::try_from(bins).map_err(|_| {
            TensorError::overflow(OP, format!("{bins} bins do not fit this machine's sizes"))
        })?;
        let index = self.to_dtype(DType::I64)?;
        match weights {
            None => {
                let ones = Tensor::ones(&[self.numel()], DType::I64, self.device())?;
                Tensor::zeros(&[bins], DType::I64, self.device())?.scatter_add(0, &index, &ones)
            }
            Some(w) => {
                let dt = if w.dtype() == DType::F32 {
                    DType::F32
                } else {
                    DType::F64
                };
                let w = w.to_dtype(dt)?;
                Tensor::zeros(&[bins], dt, self.device())?.scatter_add(0, &index, &w)
            }
        }
    }

    /// `torch.histc(self, bins, min, max)`: the histogram of a float
    /// tensor's elements over `bins` equal bins spanning `[min, max]`, in
    /// self's dtype. Where `min == max` (the default 0, 0 included) the
    /// data's own minimum and maximum are the range (read back to the
    /// host), and a range that is still one point is widened by 1 on each
    /// side. Elements outside the range, and NaN, are not counted; the last
    /// bin includes its right edge.
    ///
    /// Each element's bin is PyTorch's CPU formula in self's dtype:
    /// `trunc((x - lo) * bins / (hi - lo))` with `lo`, `hi` rounded to the
    /// dtype and each operation rounded to it (so an element very near an
    /// edge lands where PyTorch's lands). Counts are PyTorch's
    /// single-thread counts: they accumulate in the dtype, so an f16 bin
    /// stops at 2048 and a bf16 bin at 256 (f32 at 2^24); PyTorch's
    /// multi-threaded CPU kernel adds per-thread histograms, whose bins can
    /// go further. Where the dtype rounds the two range ends together, or
    /// `(x - lo) * bins` overflows it, PyTorch's bin index is undefined;
    /// strata clamps it into the histogram. Where the range's width
    /// `hi - lo` overflows the dtype (f32 for f16 and bf16), PyTorch's outer
    /// bin edges are NaN and nothing is counted: the histogram is zeros.
    ///
    /// Errors: an integer or bool input ([`TensorError::DType`]),
    /// `bins <= 0`, a range that is not finite (NaN or ±inf in the data when
    /// `min == max`), `min > max`, or range ends beyond the dtype's finite
    /// range (f16 data all at 65504 widens to `[65503, 65505]`)
    /// ([`TensorError::Value`]).
    ///
    /// ```
    /// use strata_tensor::{Tensor, Device};
    /// let x = Tensor::from_slice(&[1.0f32, 2.0, 1.0, 2.5, 9.0], &[5], Device::Cpu).unwrap();
    /// let h = x.histc(4, 0.0, 3.0).unwrap();
    /// assert_eq!(h.to_vec::<f32>().unwrap(), vec![0.0, 2.0, 1.0, 1.0]);
    /// let h = x.histc(2, 0.0, 0.0).unwrap(); // the data's range, [1, 9]
    /// assert_eq!(h.to_vec::<f32>().unwrap(), vec![4.0, 1.0]);
    /// ```
    pub fn histc(&self, bins: i64, min: f64, max: f64) -> Result<Tensor> {
        const OP: &str = "histc";
        let dt = self.dtype();
        if !dt.is_float() {
            return Err(TensorError::dtype(
                OP,
                format!("the input must be of a float dtype, got {dt}"),
            ));
        }
        if bins <= 0 {
            return Err(TensorError::value(
                OP,
                format!("bins must be > 0, got {bins}"),
            ));
        }
        let (mut lo, mut hi) = (min, max);
        if lo == hi && self.numel() > 0 {
            lo = self.min()?.item::<f64>()?;
            hi = self.max()?.item::<f64>()?;
        }
        if lo == hi {
            lo -= 1.0;
            hi += 1.0;
        }
        if !lo.is_finite() || !hi.is_finite() {
            return Err(TensorError::value(
                OP,
                format!("the range [{lo}, {hi}] is not finite"),
            ));
        }
        if lo >= hi {
            return Err(TensorError::value(
                OP,
                format!("max must be larger than min, got min {lo} and max {hi}"),
            ));
        }
        // PyTorch converts both ends to the dtype (its `linspace` of the bin
        // edges) with an overflow check: min = -70000 on f16 is an error,
        // not -inf, and so is f16 data all at 65504, whose range widens to
        // [65503, 65505].
        for end in [lo, hi] {
            check_fits(OP, Scalar::Float(end), dt)?;
        }
        let nbins = usize::try_from(bins)
            .map_err(|_| TensorError::overflow(OP, format!("{bins} bins do not fit")))?;
        // PyTorch's edges are `linspace(lo, hi, bins + 1)`, whose step is
        // computed in the dtype (f32 for f16 and bf16): where `hi - lo`
        // overflows it, the step is inf and both outer edges `lo + 0 * inf`
        // and `hi - 0 * inf` are NaN, so no element is counted.
        let rounded = |v: f64| -> f32 {
            match dt {
                DType::F16 => half::f16::from_f64(v).to_f32(),
                DType::BF16 => half::bf16::from_f64(v).to_f32(),
                _ => v as f32,
            }
        };
        let width_overflows = match dt {
            DType::F64 => (hi - lo).is_infinite(),
            _ => (rounded(hi) - rounded(lo)).is_infinite(),
        };
        if self.numel() == 0 || width_overflows {
            return Tensor::zeros(&[nbins], dt, self.device());
        }
        let dev = self.device();
        // The range's ends and the bin count as PyTorch's kernel holds them:
        // in the dtype (`bin_edges` is a linspace of the dtype; `x * bins`
        // converts the int64 count to the dtype).
        let lo_t = Tensor::scalar(lo, dt, dev)?;
        let hi_t = Tensor::scalar(hi, dt, dev)?;
        let width = hi_t.sub(&lo_t)?;
        let count_t = Tensor::scalar(bins, dt, dev)?;
        let x = self.reshape(&[-1])?;
        let inside = x.ge(&lo_t)?.logical_and(&x.le(&hi_t)?)?;
        let pos = x.sub(&lo_t)?.mul(&count_t)?.div(&width)?;
        // Undefined in PyTorch (NaN or beyond the histogram): kept inside.
        let pos = Tensor::where_cond(&pos.isnan()?, 0.0, &pos)?
            .clamp(Some(0.0), Some(bins as f64))?
            .to_dtype(DType::I64)?;
        // The last bin holds its right edge; uncounted elements go to an
        // extra bin that is cut off.
        let pos = pos.clamp(None::<i64>, Some(bins - 1))?;
        let pos = Tensor::where_cond(&inside, &pos, bins)?;
        let ones = Tensor::ones(&[x.numel()], DType::I64, dev)?;
        let counts = Tensor::zeros(&[nbins + 1], DType::I64, dev)?
            .scatter_add(0, &pos, &ones)?
            .narrow(0, 0, bins)?;
        // A count accumulated by adding 1 in the dtype stops where x + 1
        // rounds back to x: 2^(mantissa bits + 1).
        let saturation: i64 = match dt {
            DType::F16 => 1 << 11,
            DType::BF16 => 1 << 8,
            DType::F32 => 1 << 24,
            _ => 1 << 53,
        };
        counts.clamp(None::<i64>, Some(saturation))?.to_dtype(dt)
    }
}
