//! Session 82: random sampling PyTorch users reach for, built on strata's
//! seeded Philox uniforms ([`Tensor::rand`]) and existing ops, so each runs
//! on every device and the same seed gives the same result on each:
//! `randperm` (a stable sort of random keys), `bernoulli` / `bernoulli_`
//! (uniforms compared with the probabilities) and `multinomial` (with
//! replacement: the inverse of each row's normalised cumulative sum; without:
//! the exponential race, PyTorch's own algorithm, `topk` of `p / E` for
//! exponential `E`). PyTorch's checks, in its order, with typed errors.
//!
//! The draws are strata's, not PyTorch's: the same seed gives other numbers
//! than `torch.manual_seed` does (`torch_random` reproduces PyTorch's streams
//! where a program must match them).

use crate::dtype::DType;
use crate::error::{Result, TensorError};
use crate::ops::acc_dtype;
use crate::tensor::Tensor;
use crate::Device;

/// The largest `n` whose permutation `dtype` holds exactly (`n - 1` is the
/// largest value): PyTorch's bound for f16 (2049), and the same rule for
/// bf16 (257; PyTorch 2.15 does not check bf16, whose permutations past
/// 257 hold repeated values).
fn randperm_limit(dtype: DType) -> Option<u64> {
    Some(match dtype {
        DType::U8 => 256,
        DType::I32 => 1 << 31,
        DType::I64 => return None,
        DType::F16 => (1 << 11) + 1,
        DType::BF16 => (1 << 8) + 1,
        DType::F32 => (1 << 24) + 1,
        DType::F64 => (1 << 53) + 1,
        DType::Bool => 0,
    })
}

impl Tensor {
    /// `torch.randperm(n, dtype)`: a random permutation of `0..n` (`dtype`
    /// i64 unless given), from the seeded Philox stream: the stable
    /// ascending order of `n` f64 uniforms drawn with `seed`, so the same
    /// seed gives the same permutation on every device. A dtype that cannot
    /// hold `n - 1` exactly (u8 past 256, f16 past 2049, bf16 past 257, ...)
    /// is [`TensorError::Value`]; bool is [`TensorError::DType`].
    ///
    /// ```
    /// use strata_tensor::{Device, Tensor};
    /// let p = Tensor::randperm(6, None, 7, Device::Cpu)?.to_vec::<i64>()?;
    /// let mut sorted = p.clone();
    /// sorted.sort();
    /// assert_eq!(sorted, [0, 1, 2, 3, 4, 5]);
    /// assert_eq!(Tensor::randperm(6, None, 7, Device::Cpu)?.to_vec::<i64>()?, p);
    /// assert!(Tensor::randperm(300, Some(strata_tensor::DType::U8), 7, Device::Cpu).is_err());
    /// # Ok::<(), strata_tensor::TensorError>(())
    /// ```
    pub fn randperm(n: usize, dtype: Option<DType>, seed: u64, device: Device) -> Result<Tensor> {
        const OP: &str = "randperm";
        let dtype = dtype.unwrap_or(DType::I64);
        if dtype == DType::Bool {
            return Err(TensorError::unsupported(OP, dtype));
        }
        if let Some(limit) = randperm_limit(dtype) {
            if n as u64 > limit {
                return Err(TensorError::value(
                    OP,
                    format!(
                        "n = {n} is too large for {dtype}: it holds permutations of at most \
                         {limit} elements exactly; use a wider dtype (i64 by default)"
                    ),
                ));
            }
        }
        let keys = Tensor::rand(&[n], DType::F64, seed, device)?;
        keys.argsort(0, false, true)?.to_dtype(dtype)
    }

    /// `torch.bernoulli(self)`: 1 with probability `self[i]`, else 0, in
    /// self's (float) dtype and shape, from the Philox uniforms of `seed`
    /// (`u < p`, `u` uniform in `[0, 1)`, computed in f32, f64 for f64).
    /// Every probability must lie in `[0, 1]` (NaN does not): otherwise
    /// [`TensorError::Value`], as PyTorch refuses it; integer and bool
    /// inputs are [`TensorError::DType`].
    ///
    /// ```
    /// use strata_tensor::{Device, Tensor};
    /// let p = Tensor::from_slice(&[0.0f32, 1.0, 0.0, 1.0], &[2, 2], Device::Cpu)?;
    /// assert_eq!(p.bernoulli(3)?.to_vec::<f32>()?, [0.0, 1.0, 0.0, 1.0]);
    /// let half = Tensor::full(&[10_000], 0.5, strata_tensor::DType::F64, Device::Cpu)?;
    /// let ones = half.bernoulli(3)?.sum(None, false)?.item::<f64>()?;
    /// assert!((4_800.0..5_200.0).contains(&ones));
    /// # Ok::<(), strata_tensor::TensorError>(())
    /// ```
    pub fn bernoulli(&self, seed: u64) -> Result<Tensor> {
        const OP: &str = "bernoulli";
        if !self.dtype().is_float() {
            return Err(TensorError::unsupported(OP, self.dtype()));
        }
        // f32, or f64 for f64 probabilities.
        let c = acc_dtype(self.dtype());
        let p = self.to_dtype(c)?;
        let in_range = p.ge(0.0)?.logical_and(&p.le(1.0)?)?.all()?;
        if !in_range.item::<bool>()? {
            return Err(TensorError::value(
                OP,
                "every probability must lie in [0, 1] (NaN does not); \
                 clamp them first (clamp(Some(0.0), Some(1.0)))",
            ));
        }
        Tensor::rand(self.shape(), c, seed, self.device())?
            .lt(&p)?
            .to_dtype(self.dtype())
    }

    /// `self.bernoulli_(p)`: fills self (any dtype; bool with `true`) in
    /// place with 1 with probability `p`, else 0, from the Philox uniforms
    /// of `seed`. `p` outside `[0, 1]` (or NaN) is [`TensorError::Value`]
    /// and self is left as it was; a self whose elements share memory (an
    /// expanded tensor) is refused as by `copy_`.
    pub fn bernoulli_(&self, p: f64, seed: u64) -> Result<Tensor> {
        const OP: &str = "bernoulli_";
        if !(0.0..=1.0).contains(&p) {
            return Err(TensorError::value(
                OP,
                format!("bernoulli_ expects p to be in [0, 1], but got p={p}"),
            ));
        }
        let draws = Tensor::rand(self.shape(), DType::F64, seed, self.device())?.lt(p)?;
        self.copy_(&draws)?;
        Ok(self.clone())
    }

    /// `torch.multinomial(self, num_samples, replacement)`: for each row of
    /// the 1-D or 2-D float weights `self` (non-negative, finite, each row
    /// summing to more than 0; they need not sum to 1), `num_samples`
    /// category indices (i64; shape `[num_samples]` or `[rows,
    /// num_samples]`), drawn from the Philox uniforms of `seed` in f64.
    ///
    /// With `replacement` each draw is independent: the first category whose
    /// cumulative weight exceeds a uniform fraction of the row's total, so a
    /// zero-weight category is never drawn. Without it, the draws are
    /// distinct (PyTorch's exponential race: the `num_samples` largest of
    /// `w / E` for independent exponentials `E`, in decreasing order); past
    /// the categories of non-zero weight the rest come from the zero-weight
    /// ones in random order, as in PyTorch.
    ///
    /// Errors, in PyTorch's order: integer or bool weights
    /// ([`TensorError::DType`]), other ranks ([`TensorError::Shape`]),
    /// `num_samples == 0`, more samples than categories without replacement,
    /// more than 2^24 categories, a negative, infinite or NaN weight, a row
    /// whose weights sum to 0 (all [`TensorError::Value`]).
    ///
    /// ```
    /// use strata_tensor::{Device, Tensor};
    /// let w = Tensor::from_slice(&[0.0f32, 1.0, 0.0, 3.0], &[4], Device::Cpu)?;
    /// let s = w.multinomial(1000, true, 5)?.to_vec::<i64>()?;
    /// assert!(s.iter().all(|&i| i == 1 || i == 3)); // never a zero weight
    /// let mut d = w.multinomial(4, false, 5)?.to_vec::<i64>()?;
    /// assert!(d[..2].contains(&1) && d[..2].contains(&3)); // the weighted ones first
    /// d.sort();
    /// assert_eq!(d, [0, 1, 2, 3]);
    /// # Ok::<(), strata_tensor::TensorError>(())
    /// ```
    pub fn multinomial(&self, num_samples: usize, replacement: bool, seed: u64) -> Result<Tensor> {
        const OP: &str = "multinomial";
        if !self.dtype().is_float() {
            return Err(TensorError::dtype(
                OP,
                format!(
                    "multinomial only supports floating-point dtypes for input, got {}",
                    self.dtype()
                ),
            ));
        }
        if !matches!(self.ndim(), 1 | 2) {
            return Err(TensorError::shape(
                OP,
                format!(
                    "the weights must be 1-D or 2-D (rows of categories), got shape {:?}",
                    self.shape()
                ),
            ));
        }
        if num_samples == 0 {
            return Err(TensorError::value(
                OP,
                "cannot sample n_sample <= 0 samples",
            ));
        }
        let categories = self.shape()[self.ndim() - 1];
        if !replacement && num_samples > categories {
            return Err(TensorError::value(
                OP,
                format!(
                    "cannot sample {num_samples} > {categories} categories without replacement; \
                     sample with replacement or fewer"
                ),
            ));
        }
        if categories > 1 << 24 {
            return Err(TensorError::value(
                OP,
                format!("number of categories ({categories}) cannot exceed 2^24"),
            ));
        }
        let w = self.to_dtype(DType::F64)?;
        let w = if self.ndim() == 1 {
            w.reshape(&[1, -1])?
        } else {
            w
        };
        let rows = w.shape()[0];
        if !w
            .isfinite()?
            .logical_and(&w.ge(0.0)?)?
            .all()?
            .item::<bool>()?
        {
            return Err(TensorError::value(
                OP,
                "probability tensor contains either `inf`, `nan` or element < 0",
            ));
        }
        if rows > 0 && !w.sum(Some(&[1]), false)?.gt(0.0)?.all()?.item::<bool>()? {
            return Err(TensorError::value(
                OP,
                "invalid multinomial distribution (sum of probabilities <= 0)",
            ));
        }
        let device = self.device();
        let out = if rows == 0 {
            Tensor::zeros(&[0, num_samples], DType::I64, device)?
        } else if replacement {
            // The first category whose cumulative weight exceeds u times the
            // row's total: the last cumulative weight divided by itself is 1
            // exactly, so every u in [0, 1) finds one.
            let cdf = w.cumsum(1, None)?;
            let total = cdf.narrow(1, categories as i64 - 1, 1)?;
            let cdf = cdf.div(&total)?;
            let u = Tensor::rand(&[rows, num_samples], DType::F64, seed, device)?;
            cdf.contiguous()?
                .searchsorted(&u, false, true, None, None)?
        } else {
            // E = -ln(1 - u) is exponential; w / E races the categories.
            // Zero weights get -E (below every positive key, in random
            // order among themselves).
            let u = Tensor::rand(&[rows, categories], DType::F64, seed, device)?;
            let e = u.neg()?.log1p()?.neg()?;
            let keys = Tensor::where_cond(&w.gt(0.0)?, &w.div(&e)?, &e.neg()?)?;
            keys.topk(num_samples, 1, true, true)?.1
        };
        if self.ndim() == 1 {
            out.reshape(&[-1])
        } else {
            Ok(out)
        }
    }
}
