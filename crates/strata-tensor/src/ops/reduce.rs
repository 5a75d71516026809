//! Reductions over dims, with `keepdim`.

use crate::backend::ReduceOp;
use crate::dtype::DType;
use crate::error::{Result, TensorError};
use crate::shape;
use crate::storage::AccessGuard;
use crate::tensor::Tensor;

impl Tensor {
    /// Normalised reduced dims (`None` or empty: all) and the output shape.
    fn reduced_dims(
        &self,
        op: &'static str,
        dims: Option<&[i64]>,
        keepdim: bool,
    ) -> Result<(Vec<usize>, Vec<usize>)> {
        let nd = self.ndim();
        let dims = match dims {
            Some(ds) if !ds.is_empty() => {
                let d = shape::normalize_dims(op, ds, nd)?;
                if nd == 0 {
                    vec![]
                } else {
                    d
                }
            }
            _ => (0..nd).collect(),
        };
        let out_shape = (0..nd)
            .filter_map(|d| {
                if dims.contains(&d) {
                    keepdim.then_some(1)
                } else {
                    Some(self.shape()[d])
                }
            })
            .collect();
        Ok((dims, out_shape))
    }

    fn run_reduce(
        &self,
        op: ReduceOp,
        dims: &[usize],
        values: Option<&Tensor>,
        indices: Option<&Tensor>,
    ) -> Result<()> {
        let be = self.backend()?;
        let out = values.or(indices).expect("an output");
        let _g = AccessGuard::lock(Some(out.storage()), &[self.storage()]);
        let _g2 = match (values, indices) {
            (Some(_), Some(i)) => Some(AccessGuard::lock(Some(i.storage()), &[])),
            _ => None,
        };
        be.reduce(
            op,
            values.map(|t| t.arg()).as_ref(),
            indices.map(|t| t.arg()).as_ref(),
            &self.arg(),
            dims,
        )
    }

    /// `torch.prod`: the product of the elements along `dim` (of all of them
    /// when `None`, a 0-d result, or with `keepdim` one of 1s); an empty dim's
    /// product is 1. Integer and bool inputs multiply in i64 (wrapping as
    /// PyTorch's), floats in their dtype, in index order (PyTorch's CPU
    /// kernel may pair them otherwise: results can differ in the last bits).
    ///
    /// ```
    /// use strata_tensor::{Tensor, Device};
    /// let a = Tensor::from_slice(&[1i32, 2, 3, 4], &[2, 2], Device::Cpu)?;
    /// assert_eq!(a.prod(Some(1), false)?.to_vec::<i64>()?, vec![2, 12]);
    /// assert_eq!(a.prod(None, false)?.to_vec::<i64>()?, vec![24]);
    /// # Ok::<(), strata_tensor::TensorError>(())
    /// ```
    pub fn prod(&self, dim: Option<i64>, keepdim: bool) -> Result<Tensor> {
        const OP: &str = "prod";
        let Some(dim) = dim else {
            let p = self.reshape(&[-1])?.prod(Some(0), false)?;
            return if keepdim {
                p.reshape(&vec![1; self.ndim()])
            } else {
                Ok(p)
            };
        };
        let d = shape::normalize_dim(OP, dim, self.ndim())?;
        let dtype = if self.dtype().is_float() {
            self.dtype()
        } else {
            DType::I64
        };
        let x = if self.ndim() == 0 {
            self.reshape(&[1])?
        } else {
            self.clone()
        };
        let n = x.shape()[d];
        let mut kept = x.shape().to_vec();
        kept[d] = 1;
        let p = if n == 0 {
            Tensor::ones(&kept, dtype, self.device())?
        } else {
            // The last of the running products (the scan kernels of cumprod
            // on either device).
            x.cumprod(d as i64, Some(dtype))?
                .narrow(d as i64, n as i64 - 1, 1)?
                .contiguous()?
        };
        let mut out: Vec<i64> = self.shape().iter().map(|&s| s as i64).collect();
        if self.ndim() > 0 {
            if keepdim {
                out[d] = 1;
            } else {
                out.remove(d);
            }
        }
        p.reshape(&out)
    }

    /// Sum over `dims` (all when `None` or empty). Integer and bool inputs
    /// sum to i64; f16/bf16 accumulate in f32.
    ///
    /// ```
    /// use strata_tensor::{Tensor, Device};
    /// let a = Tensor::from_slice(&[1i32, 2, 3, 4], &[2, 2], Device::Cpu).unwrap();
    /// assert_eq!(a.sum(Some(&[0]), false).unwrap().to_vec::<i64>().unwrap(), vec![4, 6]);
    /// assert_eq!(a.sum(None, true).unwrap().shape(), &[1, 1]);
    /// ```
    pub fn sum(&self, dims: Option<&[i64]>, keepdim: bool) -> Result<Tensor> {
        let (dims, out_shape) = self.reduced_dims("sum", dims, keepdim)?;
        let dtype = if self.dtype().is_float() {
            self.dtype()
        } else {
            DType::I64
        };
        let input = self.to_dtype_contiguous(dtype)?;
        let out = Tensor::uninit("sum", &out_shape, dtype, self.device())?;
        input.run_reduce(ReduceOp::Sum, &dims, Some(&out), None)?;
        Ok(out)
    }

    /// `torch.linalg.vector_norm(self, p, dims, keepdim)` for float `self`
    /// (all dims when `dims` is `None` or empty), in self's dtype. On the
    /// CPU orders other than 0 and ±inf are computed as PyTorch's CPU
    /// kernel computes them (`NormOps`: `|x|^p` with the C library's `pow`
    /// in f32 for f32/f16/bf16 and f64 for f64, summed one element at a time
    /// in the order of PyTorch's iterator, then `^(1/p)`; `NormOneOps`: the
    /// same sum of `|x|`; `NormTwoOps`: of `x * x`, then `sqrt`, or for
    /// f32/f64/bf16 reduced over one contiguous innermost run, PyTorch's
    /// vectorised lanes), so that the values agree bit for bit; other
    /// devices compose them from `abs`, `pow`, `mul`, `sum` and `sqrt`.
    /// Orders 0 and ±inf are the compositions `ne(0).sum` and the max/min
    /// of `abs` (f16/bf16 widened to f32 for the sums). Over
    /// one element (every reduced dim of size 1) it is `|x|` (`x != 0` for
    /// p = 0); over none, 0, and an error for p < 0 or ±inf. The result is
    /// row-major whatever `self`'s layout, as PyTorch's (session 59).
    ///
    /// ```
    /// use strata_tensor::{Device, Tensor};
    /// let x = Tensor::from_slice(&[3.0f32, -4.0], &[2], Device::Cpu).unwrap();
    /// assert_eq!(x.vector_norm(2.0, None, false).unwrap().item::<f32>().unwrap(), 5.0);
    /// assert_eq!(x.vector_norm(3.0, None, false).unwrap().item::<f32>().unwrap(), 4.497_941_5);
    /// ```
    pub fn vector_norm(&self, p: f64, dims: Option<&[i64]>, keepdim: bool) -> Result<Tensor> {
        const OP: &str = "vector_norm";
        let dims_arg = dims;
        if !self.dtype().is_float() {
            return Err(TensorError::dtype(
                OP,
                format!("vector_norm needs a float dtype, got {}", self.dtype()),
            ));
        }
        // PyTorch checks an order without identity on an empty tensor before
        // it looks for repeated dims: each dim in turn is wrapped (a dim out
        // of range is refused first) and must not be empty.
        if self.numel() == 0 && (p < 0.0 || p.is_infinite()) {
            // PyTorch: "cannot compute the {p} norm on an empty tensor
            // because the operation does not have an identity", the class
            // of max/min over zero elements.
            let no_identity = || TensorError::Empty {
                op: OP,
                shape: self.shape().to_vec(),
            };
            match dims {
                Some(ds) if !ds.is_empty() => {
                    for &d in ds {
                        let k = shape::normalize_dim(OP, d, self.ndim())?;
                        if self.shape().get(k) == Some(&0) {
                            return Err(no_identity());
                        }
                    }
                }
                _ => return Err(no_identity()),
            }
        }
        let (dims, out_shape) = self.reduced_dims(OP, dims, keepdim)?;
        let count: usize = dims.iter().map(|&d| self.shape()[d]).product();
        let d: Vec<i64> = dims.iter().map(|&d| d as i64).collect();
        // PyTorch's shortcut for one element (`|x|`, or `x != 0` for order
        // 0) looks at the sizes of the dims named; a 0-d tensor with dims
        // named (0 or -1) has none to look at and runs the kernel, which for
        // order 2 squares (1e30f32 gives inf) and for NaN orders gives NaN.
        let zero_d_with_dims = self.ndim() == 0 && dims_arg.is_some_and(|ds| !ds.is_empty());
        if count == 1 && !zero_d_with_dims {
            let one = if p == 0.0 {
                self.ne(0.0)?.to_dtype_contiguous(self.dtype())?
            } else {
                self.abs()?
            };
            // PyTorch writes it into the row-major result its meta function
            // allocates, whatever `self`'s layout (`|x|` of a permuted `x`
            // keeps `x`'s order; the norm is row-major).
            return one
                .reshape(&out_shape.iter().map(|&n| n as i64).collect::<Vec<_>>())?
                .contiguous();
        }
        // Nothing to read: every norm over no element is 0 (an empty kept
        // dim leaves an empty result). Built directly, so that an empty
        // input of huge logical size ([0, 2^40, 2^40] f16) is not widened
        // to a contiguous copy whose strides overflow; PyTorch 2.15 answers
        // such inputs (hostile_sweep_s53b).
        if self.numel() == 0 {
            return Tensor::zeros(&out_shape, self.dtype(), self.device());
        }
        let sum = |t: &Tensor| t.sum(Some(&d), keepdim);
        // The compositions work on f16/bf16 widened to f32.
        let wide = if matches!(self.dtype(), DType::F16 | DType::BF16) {
            self.to_dtype_contiguous(DType::F32)?
        } else {
            self.clone()
        };
        if count == 0 {
            return sum(&wide.abs()?)?.to_dtype_contiguous(self.dtype());
        }
        if p == 0.0 {
            return sum(&wide.ne(0.0)?.to_dtype_contiguous(wide.dtype())?)?
                .to_dtype_contiguous(self.dtype());
        } else if p.is_infinite() {
            let mut a = self.abs()?;
            // The highest dim first, so that the lower ones keep their
            // indices when `keepdim` is false (dims may come in any order).
            let mut desc = d.clone();
            desc.sort_unstable_by(|x, y| y.cmp(x));
            for &i in &desc {
                a = if p > 0.0 {
                    a.max_dim(i, keepdim)?.0
                } else {
                    a.min_dim(i, keepdim)?.0
                };
            }
            // The row-major result PyTorch allocates.
            return a.contiguous();
        }
        let out = Tensor::uninit(OP, &out_shape, self.dtype(), self.device())?;
        let done = {
            let be = self.backend()?;
            let _g = AccessGuard::lock(Some(out.storage()), &[self.storage()]);
            be.pnorm(&out.arg(), &self.arg(), &dims, keepdim, p)?
        };
        if done {
            return Ok(out);
        }
        if p == 1.0 {
            return sum(&wide.abs()?)?.to_dtype_contiguous(self.dtype());
        } else if p == 2.0 {
            return sum(&wide.mul(&wide)?)?
                .sqrt()?
                .to_dtype_contiguous(self.dtype());
        }
        sum(&wide.abs()?.pow(p)?)?
            .pow(1.0 / p)?
            .to_dtype_contiguous(self.dtype())
    }

    /// Mean over `dims` (float dtypes only).
    pub fn mean(&self, dims: Option<&[i64]>, keepdim: bool) -> Result<Tensor> {
        if !self.dtype().is_float() {
            return Err(TensorError::dtype(
                "mean",
                format!("mean needs a float dtype, got {}", self.dtype()),
            ));
        }
        let (dims, out_shape) = self.reduced_dims("mean", dims, keepdim)?;
        let out = Tensor::uninit("mean", &out_shape, self.dtype(), self.device())?;
        self.run_reduce(ReduceOp::Mean, &dims, Some(&out), None)?;
        Ok(out)
    }

    /// The largest element of every slice over `dims` (`torch.amax`; all
    /// dims when `None` or empty), NaN propagating; every dtype, bool
    /// included. Unlike [`max_dim`](Tensor::max_dim) it takes several dims
    /// and returns no indices. Reducing a dim of size 0, or every dim of a
    /// tensor without elements, fails with [`TensorError::Empty`] (no
    /// identity: `max_dim`'s error there; PyTorch raises too).
    ///
    /// ```
    /// use strata_tensor::tensor;
    /// let x = tensor![[[1., 7.], [3., 2.]], [[0., 4.], [9., 5.]]]?;
    /// assert_eq!(x.amax(Some(&[0, 2]), false)?.to_vec::<f32>()?, [7., 9.]);
    /// assert_eq!(x.amin(None, true)?.shape(), &[1, 1, 1]);
    /// # Ok::<(), strata_tensor::TensorError>(())
    /// ```
    pub fn amax(&self, dims: Option<&[i64]>, keepdim: bool) -> Result<Tensor> {
        self.extreme_over(ReduceOp::Max, "amax", dims, keepdim)
    }

    /// The smallest element of every slice over `dims` (`torch.amin`), as
    /// [`amax`](Tensor::amax).
    pub fn amin(&self, dims: Option<&[i64]>, keepdim: bool) -> Result<Tensor> {
        self.extreme_over(ReduceOp::Min, "amin", dims, keepdim)
    }

    fn extreme_over(
        &self,
        op: ReduceOp,
        name: &'static str,
        dims: Option<&[i64]>,
        keepdim: bool,
    ) -> Result<Tensor> {
        let no_identity = || TensorError::Empty {
            op: name,
            shape: self.shape().to_vec(),
        };
        if dims.is_none_or(|d| d.is_empty()) && self.numel() == 0 {
            // PyTorch: "Expected reduction dim to be specified for
            // input.numel() == 0".
            return Err(no_identity());
        }
        let (dims, out_shape) = self.reduced_dims(name, dims, keepdim)?;
        if dims.iter().any(|&d| self.shape()[d] == 0) {
            // PyTorch: "Expected reduction dim {d} to have non-zero size".
            return Err(no_identity());
        }
        let out = Tensor::uninit(name, &out_shape, self.dtype(), self.device())?;
        if out.numel() > 0 {
            self.run_reduce(op, &dims, Some(&out), None)?;
        }
        Ok(out)
    }

    fn extreme_all(&self, op: ReduceOp, name: &'static str) -> Result<Tensor> {
        if self.numel() == 0 {
            return Err(TensorError::Empty {
                op: name,
                shape: self.shape().to_vec(),
            });
        }
        let dims: Vec<usize> = (0..self.ndim()).collect();
        let out = Tensor::uninit(name, &[], self.dtype(), self.device())?;
        // PyTorch's CPU max_all/min_all fold the row-major elements (the
        // input made contiguous), which decides which of equal values
        // (+0.0, -0.0) comes back; the CPU backend follows its fold.
        let x = if self.device() == crate::Device::Cpu && self.dtype().is_float() {
            self.contiguous()?
        } else {
            self.clone()
        };
        x.run_reduce(op, &dims, Some(&out), None)?;
        Ok(out)
    }

    fn extreme_dim(
        &self,
        op: ReduceOp,
        name: &'static str,
        dim: i64,
        keepdim: bool,
    ) -> Result<(Tensor, Tensor)> {
        let (dims, out_shape) = self.reduced_dims(name, Some(&[dim]), keepdim)?;
        if dims.iter().any(|&d| self.shape()[d] == 0) {
            return Err(TensorError::Empty {
                op: name,
                shape: self.shape().to_vec(),
            });
        }
        let values = Tensor::uninit(name, &out_shape, self.dtype(), self.device())?;
        let indices = Tensor::uninit(name, &out_shape, DType::I64, self.device())?;
        self.run_reduce(op, &dims, Some(&values), Some(&indices))?;
        Ok((values, indices))
    }

    /// The largest element (NaN counts as the largest), as a 0-d tensor.
    pub fn max(&self) -> Result<Tensor> {
        self.extreme_all(ReduceOp::Max, "max")
    }

    /// The smallest element (NaN counts as the smallest), as a 0-d tensor.
    pub fn min(&self) -> Result<Tensor> {
        self.extreme_all(ReduceOp::Min, "min")
    }

    /// Largest values along `dim` and their (first) indices.
    pub fn max_dim(&self, dim: i64, keepdim: bool) -> Result<(Tensor, Tensor)> {
        self.extreme_dim(ReduceOp::Max, "max", dim, keepdim)
    }

    /// Smallest values along `dim` and their (first) indices.
    pub fn min_dim(&self, dim: i64, keepdim: bool) -> Result<(Tensor, Tensor)> {
        self.extreme_dim(ReduceOp::Min, "min", dim, keepdim)
    }

    /// Index of the first maximum along `dim`, or into the row-major
    /// flattening when `dim` is `None`.
    pub fn argmax(&self, dim: Option<i64>, keepdim: bool) -> Result<Tensor> {
        if self.dtype() == DType::Bool {
            return Err(TensorError::unsupported("argmax", DType::Bool));
        }
        match dim {
            Some(d) => Ok(self.extreme_dim(ReduceOp::Max, "argmax", d, keepdim)?.1),
            None => {
                if self.numel() == 0 {
                    return Err(TensorError::Empty {
                        op: "argmax",
                        shape: self.shape().to_vec(),
                    });
                }
                let (dims, out_shape) = self.reduced_dims("argmax", None, keepdim)?;
                let indices = Tensor::uninit("argmax", &out_shape, DType::I64, self.device())?;
                self.run_reduce(ReduceOp::Max, &dims, None, Some(&indices))?;
                Ok(indices)
            }
        }
    }
}

// ---------------------------------------------------------------------------
// argmin, var/std and logsumexp (issue 12). Built on the reduction kernels
// above (and element-wise ops), so they run on every backend.
// ---------------------------------------------------------------------------

impl Tensor {
    /// Index of the first minimum along `dim` (the first NaN if any: NaN
    /// counts as the smallest), or into the row-major flattening when `dim`
    /// is `None` (shape `[1; ndim]` with `keepdim`). Bool inputs are rejected;
    /// reducing over zero elements fails with [`TensorError::Empty`].
    ///
    /// ```
    /// use strata_tensor::{Tensor, Device};
    /// let a = Tensor::from_slice(&[3.0f32, 1.0, 1.0, 5.0], &[2, 2], Device::Cpu).unwrap();
    /// assert_eq!(a.argmin(None, false).unwrap().item::<i64>().unwrap(), 1);
    /// assert_eq!(a.argmin(Some(0), false).unwrap().to_vec::<i64>().unwrap(), vec![1, 0]);
    /// ```
    pub fn argmin(&self, dim: Option<i64>, keepdim: bool) -> Result<Tensor> {
        if self.dtype() == DType::Bool {
            return Err(TensorError::unsupported("argmin", DType::Bool));
        }
        match dim {
            Some(d) => Ok(self.extreme_dim(ReduceOp::Min, "argmin", d, keepdim)?.1),
            None => {
                if self.numel() == 0 {
                    return Err(TensorError::Empty {
                        op: "argmin",
                        shape: self.shape().to_vec(),
                    });
                }
                let (dims, out_shape) = self.reduced_dims("argmin", None, keepdim)?;
                let indices = Tensor::uninit("argmin", &out_shape, DType::I64, self.device())?;
                self.run_reduce(ReduceOp::Min, &dims, None, Some(&indices))?;
                Ok(indices)
            }
        }
    }

    /// Variance over `dims` (all when `None` or empty): the sum of squared
    /// deviations from the mean divided by `max(0, N - correction)`, `N` the
    /// number of reduced elements (PyTorch's `torch.var(x, dim, correction=,
    /// keepdim=)`; `correction` 1 is Bessel's correction, 0 the population
    /// variance, fractional and negative values are allowed). A zero divisor
    /// (a NaN correction makes one, as in PyTorch) gives inf, or NaN for
    /// 0/0; no element at all (N = 0) gives NaN.
    /// Float dtypes only; f32 and bf16 accumulate in f64 (as PyTorch on the
    /// CPU), f16 in f32, and round once.
    ///
    /// ```
    /// use strata_tensor::{Tensor, Device};
    /// let a = Tensor::from_slice(&[1.0f64, 2.0, 3.0, 4.0], &[4], Device::Cpu).unwrap();
    /// assert_eq!(a.var(None, 1.0, false).unwrap().item::<f64>().unwrap(), 5.0 / 3.0);
    /// assert_eq!(a.var(None, 0.0, false).unwrap().item::<f64>().unwrap(), 1.25);
    /// ```
    pub fn var(&self, dims: Option<&[i64]>, correction: f64, keepdim: bool) -> Result<Tensor> {
        self.moments("var", dims, correction, keepdim, false)
    }

    /// Standard deviation over `dims`: the square root of
    /// [`var`](Tensor::var) with the same arguments.
    ///
    /// ```
    /// use strata_tensor::{Tensor, Device};
    /// let a = Tensor::from_slice(&[2.0f64, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0], &[8], Device::Cpu).unwrap();
    /// let s = a.std(None, 0.0, false).unwrap().item::<f64>().unwrap();
    /// assert!((s - 2.0).abs() < 1e-12);
    /// ```
    pub fn std(&self, dims: Option<&[i64]>, correction: f64, keepdim: bool) -> Result<Tensor> {
        self.moments("std", dims, correction, keepdim, true)
    }

    /// `var` (or `std` where `sqrt`), two-pass: the mean, then the squared
    /// deviations from it (no cancellation on inputs with a large offset).
    fn moments(
        &self,
        name: &'static str,
        dims: Option<&[i64]>,
        correction: f64,
        keepdim: bool,
        sqrt: bool,
    ) -> Result<Tensor> {
        if !self.dtype().is_float() {
            return Err(TensorError::dtype(
                name,
                format!("{name} needs a float dtype, got {}", self.dtype()),
            ));
        }
        let (rdims, out_shape) = self.reduced_dims(name, dims, keepdim)?;
        // Saturating: the reduced dims of an empty view may multiply past usize
        // (their count is then irrelevant: the result is empty).
        let n = rdims
            .iter()
            .fold(1usize, |a, &d| a.saturating_mul(self.shape()[d]));
        if n == 0 {
            // The mean of nothing is NaN, and so is every statistic built on
            // it, whatever the correction (PyTorch: also 0 - (-1) = 1).
            return Tensor::full(&out_shape, f64::NAN, self.dtype(), self.device());
        }
        // f32 and bf16 accumulate in f64, as PyTorch's CPU kernel does: the
        // squared deviations of values beyond ~1.8e19 overflow f32, while
        // their std (and an f64 reference) is finite. f16 squares fit f32.
        let wide = match self.dtype() {
            DType::F16 => DType::F32,
            _ => DType::F64,
        };
        let x = self.to_dtype_contiguous(wide)?;
        let d64: Vec<i64> = rdims.iter().map(|&d| d as i64).collect();
        // A 0-d tensor reduces no dim (`d64` empty): `None` then means "all",
        // which is none there too.
        let d = (!d64.is_empty()).then_some(d64.as_slice());
        // The mean. For several outputs, on the GPU and for half dtypes
        // PyTorch's kernel is Welford's, whose running mean of equal values
        // stays exact: there the mean here is refined once instead. The deviations
        // from the rounded mean sum to a small s1 instead of 0, and adding
        // s1/n to the mean takes that error out (a constant
        // 875807486907059.0 has variance 0, where the plain sum of squares
        // gave 0.0156; six copies of -1e200 summed one by one give a mean
        // an ulp off -1e200, whose deviations, ~1e184, square to +inf,
        // where Welford's gives 0). Where s1 is not finite (infinite or NaN
        // input, or deviations past the largest float) the mean stays as
        // it was, and the squares give inf or NaN as PyTorch's do
        // (deviations of ~1e200 square to +inf).
        let whole = out_shape.iter().product::<usize>() == 1;
        let mean = if whole
            && self.device() == crate::Device::Cpu
            && matches!(self.dtype(), DType::F32 | DType::F64)
        {
            // PyTorch's CPU kernel for a whole f32 or f64 tensor
            // (`std_var_all_cpu`) is a plain two-pass: the mean in the
            // tensor's dtype, then the squared deviations from it in f64,
            // with no refinement. Where the mean is a rounding off (six
            // copies of -1e200 summed one by one), the deviations of ~1e184
            // square to +inf there, while ten copies give 0.
            self.mean(d, true)?.to_dtype_contiguous(wide)?
        } else {
            let mean = x.mean(d, true)?;
            let s1 = x.sub(&mean)?.sum(d, true)?;
            let largest = match wide {
                DType::F32 => f32::MAX as f64,
                _ => f64::MAX,
            };
            let finite = s1.abs()?.le(largest)?;
            let step = Tensor::where_cond(&finite, &s1.div(n as f64)?, 0.0)?;
            mean.add(&step)?
        };
        let dev = x.sub(&mean)?;
        let ss = dev.mul(&dev)?.sum(d, keepdim)?;
        // PyTorch's divisor `max(0, N - correction)`; a NaN correction
        // makes it 0 there as here (`f64::max` ignores the NaN), so the
        // result is +inf, or NaN where the deviations are 0, as PyTorch's.
        let v = ss.div((n as f64 - correction).max(0.0))?;
        let v = if sqrt { sqrt_nonneg(&v)? } else { v };
        v.to_dtype_contiguous(self.dtype())
    }

    /// `log(sum(exp(x)))` over `dims`, computed without overflow (the
    /// largest element is subtracted first): NaN if any element is NaN, else
    /// +inf if any is +inf, -inf if all are -inf or there are none. Integer
    /// and bool inputs compute in f32. f16/bf16 compute as PyTorch's
    /// composite `(x - max).exp().sum().log() + max` does, each step rounded
    /// to the input's dtype (the sum accumulated in f32): a bf16
    /// `[-0.5, -0.5, -7]` gives 0.19140625 (`log` of the sum 2.0015 rounded
    /// to 2), not the correctly rounded 0.1943359375.
    ///
    /// An empty `dims` list reduces every dim with `keepdim` and fails with
    /// [`TensorError::Broadcast`] without it (PyTorch's behaviour), except
    /// for 0-d and empty inputs, which reduce to 0-d.
    ///
    /// ```
    /// use strata_tensor::{Tensor, Device};
    /// let a = Tensor::from_slice(&[1000.0f64, 1000.0], &[2], Device::Cpu).unwrap();
    /// let r = a.logsumexp(&[0], false).unwrap().item::<f64>().unwrap();
    /// assert!((r - (1000.0 + 2f64.ln())).abs() < 1e-12);
    /// ```
    pub fn logsumexp(&self, dims: &[i64], keepdim: bool) -> Result<Tensor> {
        if dims.is_empty() && !keepdim {
            if self.ndim() == 0 {
                return self.logsumexp(&[0], false);
            }
            if self.numel() == 0 {
                // PyTorch's path for empty inputs sums with the empty list,
                // which reduces every dim to a 0-d -inf.
                let all: Vec<i64> = (0..self.ndim() as i64).collect();
                return self.logsumexp(&all, false);
            }
            // PyTorch reduces every dim with keepdim, then cannot squeeze the
            // kept dims into the 0-d result it wants without keepdim.
            return Err(TensorError::Broadcast {
                op: "logsumexp",
                lhs: vec![1; self.ndim()],
                rhs: vec![],
            });
        }
        let (rdims, out_shape) = self.reduced_dims("logsumexp", Some(dims), keepdim)?;
        let out_dtype = if self.dtype().is_float() {
            self.dtype()
        } else {
            DType::F32
        };
        let keep_shape: Vec<usize> = (0..self.ndim())
            .map(|d| {
                if rdims.contains(&d) {
                    1
                } else {
                    self.shape()[d]
                }
            })
            .collect();
        let x = self.to_dtype_contiguous(out_dtype)?;
        if rdims.iter().any(|&d| self.shape()[d] == 0) {
            // log(0): nothing to sum.
            return Tensor::full(&out_shape, f64::NEG_INFINITY, out_dtype, self.device());
        }
        let m = Tensor::uninit("logsumexp", &keep_shape, x.dtype(), self.device())?;
        if m.numel() > 0 {
            x.run_reduce(ReduceOp::Max, &rdims, Some(&m), None)?;
        }
        // An infinite maximum is not subtracted: +inf stays +inf (inf - inf
        // would be NaN) and an all -inf slice gives log(0) = -inf.
        let m = Tensor::where_cond(&m.eq(f64::INFINITY)?, 0.0, &m)?;
        let m = Tensor::where_cond(&m.eq(f64::NEG_INFINITY)?, 0.0, &m)?;
        let d64: Vec<i64> = rdims.iter().map(|&d| d as i64).collect();
        let d = (!d64.is_empty()).then_some(d64.as_slice());
        let s = x.sub(&m)?.exp()?.sum(d, true)?;
        let r = s.log()?.add(&m)?;
        let shape: Vec<i64> = out_shape.iter().map(|&s| s as i64).collect();
        r.reshape(&shape)?.to_dtype_contiguous(out_dtype)
    }
}

/// Square root of a tensor of non-negative values (or inf/NaN), computed in
/// f64 and rounded once to the tensor's dtype: the correctly rounded root,
/// as PyTorch's (`std` of an f64 `[0, 6]` without correction is exactly 3;
/// the `exp(ln(v) / 2)` used before gave 3.0000000000000004). `sqrt(0) = 0`,
/// `sqrt(inf) = inf`, NaN stays NaN.
fn sqrt_nonneg(v: &Tensor) -> Result<Tensor> {
    v.to_dtype_contiguous(DType::F64)?
        .sqrt()?
        .to_dtype_contiguous(v.dtype())
}
