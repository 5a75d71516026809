//! Session 79 (helper 134): the statistics of PyTorch that strata lacked,
//! composed of existing ops as PyTorch 2.15 composes them (so every device
//! at once, no kernel of their own): `quantile`/`nanquantile` (a sort, the
//! ranks in the input's dtype, two gathers and `lerp`), `cov` (weighted
//! means and one `mm`) and `corrcoef`, `aminmax`, `trapezoid`/
//! `cumulative_trapezoid` (with sample points `x` or a spacing `dx`),
//! `renorm` (`vector_norm` and PyTorch's scale factor), `pdist` (`cdist`'s
//! exact difference form, the pairs above the diagonal) and `histogram`
//! (`searchsorted` into the bin edges and a `scatter_add`). The checks and
//! messages are PyTorch's; the recorded forms are in strata-autograd's
//! `ops/statistics.rs`, over the same plans.

use crate::dtype::DType;
use crate::error::{Result, TensorError};
use crate::ops::composite::Composite;
use crate::shape::{normalize_dim, normalize_dim_strict};
use crate::tensor::Tensor;

/// How `quantile` picks between the two order statistics around a rank
/// (PyTorch's `interpolation`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum QuantileInterpolation {
    /// `"linear"`: `lerp` of the two by the rank's fraction.
    #[default]
    Linear,
    /// `"lower"`: the one below.
    Lower,
    /// `"higher"`: the one above.
    Higher,
    /// `"midpoint"`: their mean (`lerp` by 0.5).
    Midpoint,
    /// `"nearest"`: the one at the rank rounded half to even.
    Nearest,
}

impl std::str::FromStr for QuantileInterpolation {
    type Err = TensorError;
    fn from_str(s: &str) -> Result<Self> {
        Ok(match s {
            "linear" => Self::Linear,
            "lower" => Self::Lower,
            "higher" => Self::Higher,
            "midpoint" => Self::Midpoint,
            "nearest" => Self::Nearest,
            _ => {
                return Err(TensorError::value(
                    "quantile",
                    format!(
                        "quantile() interpolation must be one of linear, lower, higher, midpoint or nearest. Got {s}"
                    ),
                ))
            }
        })
    }
}

/// The quantiles asked of `quantile`: one probability, or a 1-D tensor of
/// them (of the input's dtype) giving a leading dim.
#[derive(Clone, Copy, Debug)]
pub enum QuantileQ<'a> {
    /// `q` a Python float.
    Scalar(f64),
    /// `q` a tensor of at most one dim.
    Tensor(&'a Tensor),
}

impl From<f64> for QuantileQ<'_> {
    fn from(q: f64) -> Self {
        QuantileQ::Scalar(q)
    }
}

impl<'a> From<&'a Tensor> for QuantileQ<'a> {
    fn from(q: &'a Tensor) -> Self {
        QuantileQ::Tensor(q)
    }
}

/// What `quantile` computes, after PyTorch's checks: the sorted rows
/// `[B, n]` are given by the caller; `ranks_below`/`ranks_above` (i64) and
/// `weights` are `[B, Q]`; the result `[B, Q]` is reshaped by `finish`.
/// Shared with strata-autograd.
pub struct QuantilePlan {
    /// The rows to sort: the input with `dim` last, as `[B, n]`.
    pub rows: Tensor,
    /// The indices below each rank, `[B, Q]`.
    pub below: Tensor,
    /// The indices above (`None` where no interpolation is needed).
    pub above: Option<Tensor>,
    /// `lerp`'s weights, `[B, Q]` in the input's dtype.
    pub weights: Option<Tensor>,
    /// The result's shape before the quantile dim moves first: the kept dims
    /// then `Q` (no `Q` for a scalar `q`).
    kept: Vec<i64>,
    scalar_q: bool,
}

impl QuantilePlan {
    /// The result `[B, Q]` (values at the ranks, interpolated) in
    /// PyTorch's shape: `[Q, kept...]`, or `[kept...]` for a scalar `q`.
    pub fn finish_shape(&self) -> (Vec<i64>, bool) {
        (self.kept.clone(), self.scalar_q)
    }
}

/// PyTorch's checks of `quantile(x, q, dim, keepdim, interpolation)` and the
/// ranks it computes, in the input's dtype (`nan_aware`: `nanquantile`'s
/// ranks over each row's non-NaN count). `sorted` is the input's rows
/// `[B, n]` sorted (NaN last), as the caller sorts them.
pub fn quantile_plan(
    x: &Tensor,
    q: QuantileQ,
    dim: Option<i64>,
    keepdim: bool,
    interpolation: QuantileInterpolation,
    nan_aware: bool,
) -> Result<QuantilePlan> {
    let op = if nan_aware { "nanquantile" } else { "quantile" };
    let dt = x.dtype();
    if x.numel() == 0 {
        return Err(TensorError::shape(
            op,
            "quantile() input tensor must be non-empty",
        ));
    }
    if !matches!(dt, DType::F32 | DType::F64) {
        return Err(TensorError::dtype(
            op,
            format!("quantile() input tensor must be either float or double dtype, got {dt}; convert it first"),
        ));
    }
    let qt = match q {
        QuantileQ::Scalar(v) => {
            if !(0.0..=1.0).contains(&v) {
                return Err(TensorError::value(
                    op,
                    format!("quantile() q must be in the range [0, 1] but got {v}"),
                ));
            }
            Tensor::scalar(v, dt, x.device())?
        }
        QuantileQ::Tensor(t) => {
            if t.ndim() > 1 {
                return Err(TensorError::shape(
                    op,
                    "quantile() q must be a scalar or 1D tensor",
                ));
            }
            if t.dtype() != dt {
                return Err(TensorError::dtype(
                    op,
                    format!(
                        "quantile() q tensor must be same dtype as the input tensor ({} and {dt})",
                        t.dtype()
                    ),
                ));
            }
            crate::ops::elementwise::same_device(op, x, t)?;
            if t.numel() > 0 {
                let bad = t
                    .lt(0.0)?
                    .logical_or(&t.gt(1.0)?)?
                    .logical_or(&t.isnan()?)?;
                if bad.any()?.item::<bool>()? {
                    return Err(TensorError::value(
                        op,
                        "quantile() q values must be in the range [0, 1]",
                    ));
                }
            }
            t.clone()
        }
    };
    let scalar_q = qt.ndim() == 0;
    let nq = qt.numel() as i64;
    // The rows: `dim` last, the others in order.
    let (rows, kept) = match dim {
        None => {
            let kept = if keepdim {
                vec![1; x.ndim()]
            } else {
                Vec::new()
            };
            (x.reshape(&[1, -1])?, kept)
        }
        Some(d) => {
            let d = normalize_dim(op, d, x.ndim())?;
            if x.ndim() == 0 {
                (x.reshape(&[1, 1])?, Vec::new())
            } else {
                let n = x.shape()[d] as i64;
                let moved = x.movedim(&[d as i64], &[-1])?;
                let mut kept: Vec<i64> = x.shape().iter().map(|&s| s as i64).collect();
                if keepdim {
                    kept[d] = 1;
                } else {
                    kept.remove(d);
                }
                (moved.reshape(&[-1, n])?, kept)
            }
        }
    };
    let n = rows.shape()[1] as i64;
    let sorted = rows.sort(-1, false, false)?.0;
    // The ranks in f64 (PyTorch 2.15's CPU rounds `q * last_index` of an
    // f32 input as the f64 product: `nearest` with q = 0.7 of 6 elements
    // picks index 3, not the f32 product 3.5's 4); the weights in `x`'s dtype.
    let qrow = qt.reshape(&[1, nq])?.to_dtype(DType::F64)?;
    let ranks = if nan_aware {
        // q * (count of non-NaN - 1), negative (all NaN) ranks set to 0.
        let count = sorted.isnan()?.logical_not()?.sum(Some(&[-1]), true)?;
        let r = qrow.mul(&count.sub(1)?)?;
        r.masked_fill(&r.lt(0.0)?, 0.0)?
    } else {
        // q * last index, a row holding NaN ranked last (its result NaN).
        let r = qrow.mul(n - 1)?;
        let has_nan = sorted.isnan()?.any_dim(-1, true)?;
        let shape = crate::shape::broadcast_shapes(op, r.shape(), has_nan.shape())?;
        r.broadcast_to(&shape)?
            .masked_fill(&has_nan.broadcast_to(&shape)?, (n - 1) as f64)?
    };
    let ranks = match interpolation {
        QuantileInterpolation::Lower => ranks.floor()?,
        QuantileInterpolation::Higher => ranks.ceil()?,
        QuantileInterpolation::Nearest => ranks.round()?,
        _ => ranks,
    };
    let b = rows.shape()[0] as i64;
    let ranks = ranks.expand(&[b, nq])?;
    let below = ranks.to_dtype_contiguous(DType::I64)?;
    let (above, weights) = match interpolation {
        QuantileInterpolation::Linear | QuantileInterpolation::Midpoint => {
            let w = if interpolation == QuantileInterpolation::Midpoint {
                Tensor::full(&[b as usize, nq as usize], 0.5, dt, x.device())?
            } else {
                ranks.sub(&below)?.to_dtype(dt)?
            };
            (
                Some(ranks.ceil()?.to_dtype_contiguous(DType::I64)?),
                Some(w),
            )
        }
        _ => (None, None),
    };
    let mut kept = kept;
    if !scalar_q {
        kept.push(nq);
    }
    Ok(QuantilePlan {
        rows,
        below,
        above,
        weights,
        kept,
        scalar_q,
    })
}

/// The permutation moving the quantile dim (last of `kept` + Q) first.
pub fn quantile_dim_first(ndim: usize) -> Vec<i64> {
    let mut p = vec![ndim as i64 - 1];
    p.extend(0..ndim as i64 - 1);
    p
}

/// `cov`'s checks and the weights it multiplies by: `fweights * aweights`
/// (or either, or none). Shared with strata-autograd.
pub fn cov_weights(
    x: &Tensor,
    fweights: Option<&Tensor>,
    aweights: Option<&Tensor>,
) -> Result<(Tensor, Option<Tensor>)> {
    const OP: &str = "cov";
    if x.ndim() > 2 {
        return Err(TensorError::shape(
            OP,
            format!(
                "cov(): expected input to have two or fewer dimensions but got an input with {} dimensions",
                x.ndim()
            ),
        ));
    }
    if x.dtype() == DType::Bool {
        return Err(TensorError::dtype(
            OP,
            "cov(): bool dtype is not supported for input; convert it first (to_dtype(DType::F32))",
        ));
    }
    let input = if x.ndim() < 2 {
        x.view(&[1, -1])?
    } else {
        x.clone()
    };
    let n = input.shape()[1];
    let mut w: Option<Tensor> = None;
    // PyTorch's `weights.min() >= 0`: a NaN weight fails it too.
    let nonneg = |t: &Tensor| -> Result<bool> {
        Ok(n == 0 || !(t.lt(0)?.any()?.item::<bool>()? || t.isnan()?.any()?.item::<bool>()?))
    };
    if let Some(f) = fweights {
        if f.ndim() > 1 {
            return Err(TensorError::shape(
                OP,
                format!("cov(): expected fweights to have one or fewer dimensions but got fweights with {} dimensions", f.ndim()),
            ));
        }
        if f.dtype().is_float() || f.dtype() == DType::Bool {
            return Err(TensorError::dtype(
                OP,
                format!("cov(): expected fweights to have integral dtype but got fweights with {} dtype", f.dtype()),
            ));
        }
        if f.numel() != n {
            return Err(TensorError::shape(
                OP,
                format!("cov(): expected fweights to have the same numel as there are observations in the input but got {} != {n}", f.numel()),
            ));
        }
        crate::ops::elementwise::same_device(OP, x, f)?;
        if !nonneg(f)? {
            return Err(TensorError::value(OP, "cov(): fweights cannot be negative"));
        }
        w = Some(f.clone());
    }
    if let Some(a) = aweights {
        if a.ndim() > 1 {
            return Err(TensorError::shape(
                OP,
                format!("cov(): expected aweights to have one or fewer dimensions but got aweights with {} dimensions", a.ndim()),
            ));
        }
        if !a.dtype().is_float() {
            return Err(TensorError::dtype(
                OP,
                format!("cov(): expected aweights to have floating point dtype but got aweights with {} dtype", a.dtype()),
            ));
        }
        if a.numel() != n {
            return Err(TensorError::shape(
                OP,
                format!("cov(): expected aweights to have the same numel as there are observations in the input but got {} != {n}", a.numel()),
            ));
        }
        crate::ops::elementwise::same_device(OP, x, a)?;
        if !nonneg(a)? {
            return Err(TensorError::value(OP, "cov(): aweights cannot be negative"));
        }
        w = Some(match w {
            Some(f) => f.mul(a)?,
            None => a.clone(),
        });
    }
    Ok((input, w))
}

/// `cov`'s weight sum (a 0-d tensor: the observation count, i64, without
/// weights) and normalisation factor, checked as PyTorch checks them.
pub fn cov_norm(
    n: usize,
    w: Option<&Tensor>,
    aweights: Option<&Tensor>,
    correction: i64,
    device: crate::Device,
) -> Result<(Tensor, Tensor)> {
    let w_sum = match w {
        Some(w) => w.sum(None, false)?,
        None => Tensor::scalar(n as i64, DType::I64, device)?,
    };
    if w.is_some() && w_sum.eq(0)?.item::<bool>()? {
        return Err(TensorError::value(
            "cov",
            "cov(): weights sum to zero, can't be normalized",
        ));
    }
    let norm = match (w, aweights) {
        (Some(w), Some(a)) if correction != 0 => {
            let s = w.mul(a)?.sum(None, false)?;
            w_sum.sub(&s.mul(correction)?.div(&w_sum)?)?
        }
        _ => w_sum.sub(correction)?,
    };
    // Degrees of freedom <= 0: PyTorch warns and divides by zero.
    let norm = if norm.le(0)?.item::<bool>()? {
        norm.zeros_like(None)?
    } else {
        norm
    };
    Ok((w_sum, norm))
}

/// `trapezoid`'s and `cumulative_trapezoid`'s spacing: sample points or
/// one distance.
#[derive(Clone, Copy, Debug)]
pub enum Spacing<'a> {
    /// `x`: the sample points (1-D along `dim`, or broadcasting with `y`).
    X(&'a Tensor),
    /// `dx`: one distance between all samples.
    Dx(f64),
}

/// The differences `x[1:] - x[:-1]` along `dim` of `y` (PyTorch's view of a
/// 1-D or shorter `x`), with its checks. Shared with strata-autograd.
pub fn trapezoid_dx(op: &'static str, y: &Tensor, x: &Tensor, dim: usize) -> Result<Tensor> {
    if y.dtype() == DType::Bool || x.dtype() == DType::Bool {
        return Err(TensorError::dtype(
            op,
            format!("{op}: received a bool input for `x` or `y`, but bool is not supported"),
        ));
    }
    let xv = if x.ndim() == 1 {
        if x.shape()[0] != y.shape()[dim] {
            return Err(TensorError::shape(
                op,
                format!("{op}: There must be one `x` value for each sample point"),
            ));
        }
        let mut s = vec![1i64; y.ndim()];
        s[dim] = x.shape()[0] as i64;
        x.view(&s)?
    } else if x.ndim() < y.ndim() {
        let mut s = vec![1i64; y.ndim() - x.ndim()];
        s.extend(x.shape().iter().map(|&v| v as i64));
        x.view(&s)?
    } else {
        x.clone()
    };
    let d = dim as i64;
    xv.slice(d, Some(1), None, 1)?
        .sub(&xv.slice(d, Some(0), Some(-1), 1)?)
}

fn no_bool_y(op: &'static str, y: &Tensor) -> Result<()> {
    if y.dtype() == DType::Bool {
        return Err(TensorError::dtype(
            op,
            format!("{op}: received a bool input for `y`, but bool is not supported"),
        ));
    }
    Ok(())
}

/// `renorm`'s checks: `p > 0`, `maxnorm >= 0`, at least 2 dims; the dims the
/// norm reduces and the dtype it is computed in. Shared with strata-autograd.
pub fn renorm_plan(x: &Tensor, p: f64, dim: i64, maxnorm: f64) -> Result<(Vec<i64>, DType)> {
    const OP: &str = "renorm";
    if p.is_nan() || p <= 0.0 {
        return Err(TensorError::value(
            OP,
            "renorm: non-positive-norm not supported",
        ));
    }
    if maxnorm.is_nan() || maxnorm < 0.0 {
        return Err(TensorError::value(
            OP,
            format!("renorm: expected maxnorm to be >= 0 but got {maxnorm}"),
        ));
    }
    if x.ndim() <= 1 {
        return Err(TensorError::shape(
            OP,
            format!(
                "renorm: input needs at least 2 dimensions, got {} dimensions",
                x.ndim()
            ),
        ));
    }
    if !x.dtype().is_float() {
        return Err(TensorError::dtype(
            OP,
            format!(
                "linalg.vector_norm: Expected a floating point or complex tensor as input. Got {}",
                x.dtype()
            ),
        ));
    }
    let d = normalize_dim(OP, dim, x.ndim())?;
    let dims = (0..x.ndim() as i64).filter(|&i| i != d as i64).collect();
    let acc = match x.dtype() {
        DType::F16 | DType::BF16 => DType::F32,
        t => t,
    };
    Ok((dims, acc))
}

/// `pdist`'s checks and the flat positions `i * n + j` (`i < j`) of the
/// pairs in a `[n, n]` distance matrix. Shared with strata-autograd.
pub fn pdist_pairs(x: &Tensor, p: f64) -> Result<Tensor> {
    const OP: &str = "pdist";
    if x.ndim() != 2 {
        return Err(TensorError::shape(
            OP,
            format!("pdist only supports 2D tensors, got: {}D", x.ndim()),
        ));
    }
    if !x.dtype().is_float() {
        return Err(TensorError::dtype(
            OP,
            "pdist only supports floating-point dtypes",
        ));
    }
    if p.is_nan() || p < 0.0 {
        return Err(TensorError::value(
            OP,
            "pdist only supports non-negative p values",
        ));
    }
    let n = x.shape()[0];
    // n (n - 1) / 2 distances (an input of no columns may have rows
    // beyond what its square allows): refused before any is listed where
    // they cannot form a tensor or do not fit in memory.
    let count = n as u128 * n.saturating_sub(1) as u128 / 2;
    if count * 8 > crate::shape::MAX_NUMEL as u128 {
        return Err(TensorError::overflow(
            OP,
            format!("pdist of {n} rows has {count} distances, more than a tensor can hold"),
        ));
    }
    let mut pos = Vec::new();
    pos.try_reserve_exact(count as usize).map_err(|_| {
        TensorError::overflow(
            OP,
            format!("pdist of {n} rows: the {count} distances do not fit in host memory"),
        )
    })?;
    for i in 0..n {
        for j in i + 1..n {
            pos.push((i * n + j) as i64);
        }
    }
    let len = pos.len();
    Tensor::from_slice(&pos, &[len], x.device())
}

impl Tensor {
    /// `torch.quantile(x, q, dim, keepdim, interpolation)`: the `q`-th
    /// quantiles along `dim` (of every element with `dim = None`); a row
    /// holding NaN gives NaN. f32 and f64 inputs; a tensor `q` (of the
    /// input's dtype, at most 1-D) gives a leading dim of its length.
    ///
    /// ```
    /// use strata_tensor::{tensor, QuantileInterpolation};
    /// let x = tensor![[1., 2., 3., 4.]]?;
    /// let m = x.quantile(0.5, Some(1), false, QuantileInterpolation::Linear)?;
    /// assert_eq!(m.to_vec::<f32>()?, [2.5]);
    /// # Ok::<(), strata_tensor::TensorError>(())
    /// ```
    pub fn quantile<'a>(
        &self,
        q: impl Into<QuantileQ<'a>>,
        dim: Option<i64>,
        keepdim: bool,
        interpolation: QuantileInterpolation,
    ) -> Result<Tensor> {
        self.quantile_impl(q.into(), dim, keepdim, interpolation, false)
    }

    /// `torch.nanquantile`: [`Tensor::quantile`] ignoring NaN (a row of
    /// NaN only gives NaN).
    pub fn nanquantile<'a>(
        &self,
        q: impl Into<QuantileQ<'a>>,
        dim: Option<i64>,
        keepdim: bool,
        interpolation: QuantileInterpolation,
    ) -> Result<Tensor> {
        self.quantile_impl(q.into(), dim, keepdim, interpolation, true)
    }

    fn quantile_impl(
        &self,
        q: QuantileQ,
        dim: Option<i64>,
        keepdim: bool,
        interpolation: QuantileInterpolation,
        nan_aware: bool,
    ) -> Result<Tensor> {
        let plan = quantile_plan(self, q, dim, keepdim, interpolation, nan_aware)?;
        // The plan's rows; a contiguous result (a copy where the quantile dim
        // moved first).
        quantile_of(&plan.rows, &plan)?.contiguous()
    }

    /// `torch.cov(x, correction, fweights, aweights)`: the covariance of
    /// the variables (rows of a 2-D `x`, or the one row of a 1-D one) over
    /// the observations (columns), with integer frequency weights and float
    /// observation weights; a single variable gives a 0-d result.
    ///
    /// ```
    /// use strata_tensor::tensor;
    /// let c = tensor![[0., 1., 2.], [2., 1., 0.]]?.cov(1, None, None)?;
    /// assert_eq!(c.to_vec::<f32>()?, [1., -1., -1., 1.]);
    /// # Ok::<(), strata_tensor::TensorError>(())
    /// ```
    pub fn cov(
        &self,
        correction: i64,
        fweights: Option<&Tensor>,
        aweights: Option<&Tensor>,
    ) -> Result<Tensor> {
        cov_of(self, correction, fweights, aweights)
    }

    /// `torch.corrcoef(x)`: Pearson's correlation coefficients of the rows
    /// (`cov` normalised by the standard deviations, clipped to [-1, 1]).
    pub fn corrcoef(&self) -> Result<Tensor> {
        corrcoef_of(self)
    }

    /// `torch.aminmax(x, dim, keepdim)`: `(min, max)` along `dim` (of every
    /// element with `dim = None`), NaN propagating; no dim may be empty.
    ///
    /// ```
    /// use strata_tensor::tensor;
    /// let (lo, hi) = tensor![[1., 5.], [3., 2.]]?.aminmax(Some(1), false)?;
    /// assert_eq!((lo.to_vec::<f32>()?, hi.to_vec::<f32>()?), (vec![1., 2.], vec![5., 3.]));
    /// # Ok::<(), strata_tensor::TensorError>(())
    /// ```
    pub fn aminmax(&self, dim: Option<i64>, keepdim: bool) -> Result<(Tensor, Tensor)> {
        aminmax_of(self, dim, keepdim)
    }

    /// `torch.dist(self, other, p)`: the `p`-norm of `self - other` over
    /// every element (the operands broadcast and promote; float results
    /// only, as [`vector_norm`](Tensor::vector_norm), whose orders and
    /// refusals it takes).
    ///
    /// ```
    /// use strata_tensor::tensor;
    /// let (a, b) = (tensor![[1., 2.], [3., 4.]]?, tensor![1., 0.]?);
    /// assert_eq!(a.dist(&b, 1.0)?.item::<f32>()?, 8.0);
    /// assert_eq!(a.dist(&b, f64::INFINITY)?.item::<f32>()?, 4.0);
    /// # Ok::<(), strata_tensor::TensorError>(())
    /// ```
    pub fn dist(&self, other: &Tensor, p: f64) -> Result<Tensor> {
        dist_of(self, other, p)
    }

    /// `torch.trapezoid(y, x | dx, dim)`: the trapezoid rule's integral of
    /// `y` along `dim`; an empty dim integrates to zeros of `y`'s dtype.
    ///
    /// ```
    /// use strata_tensor::{tensor, Spacing};
    /// let y = tensor![1., 2., 4.]?;
    /// assert_eq!(y.trapezoid(Spacing::Dx(1.0), -1)?.item::<f32>()?, 4.5);
    /// assert_eq!(y.trapezoid(Spacing::X(&tensor![0., 1., 3.]?), -1)?.item::<f32>()?, 7.5);
    /// # Ok::<(), strata_tensor::TensorError>(())
    /// ```
    pub fn trapezoid(&self, spacing: Spacing, dim: i64) -> Result<Tensor> {
        trapezoid_of(self, spacing, dim)
    }

    /// `torch.cumulative_trapezoid(y, x | dx, dim)`: the running trapezoid
    /// rule along `dim` (one element shorter than `y` there).
    pub fn cumulative_trapezoid(&self, spacing: Spacing, dim: i64) -> Result<Tensor> {
        cumulative_trapezoid_of(self, spacing, dim)
    }

    /// `torch.renorm(x, p, dim, maxnorm)`: each slice along `dim` whose
    /// `p`-norm exceeds `maxnorm` scaled to `maxnorm / (norm + 1e-7)`
    /// (f16/bf16 norms and factors computed in f32, as PyTorch).
    ///
    /// ```
    /// use strata_tensor::tensor;
    /// let y = tensor![[3., 4.], [0.3, 0.4]]?.renorm(2.0, 0, 1.0)?;
    /// let v = y.to_vec::<f32>()?;
    /// assert!((v[0] - 0.6).abs() < 1e-6 && v[2] == 0.3);
    /// # Ok::<(), strata_tensor::TensorError>(())
    /// ```
    pub fn renorm(&self, p: f64, dim: i64, maxnorm: f64) -> Result<Tensor> {
        renorm_of(self, p, dim, maxnorm)
    }

    /// `torch.pdist(x, p)` (`F.pdist`): the `p`-norm distances between the
    /// rows of a 2-D `x`, the pairs `(i, j)`, `i < j`, in row-major order.
    ///
    /// ```
    /// use strata_tensor::tensor;
    /// let d = tensor![[0., 0.], [3., 4.], [0., 1.]]?.pdist(2.0)?;
    /// assert_eq!(d.to_vec::<f32>()?, [5., 1., 4.2426405]);
    /// # Ok::<(), strata_tensor::TensorError>(())
    /// ```
    pub fn pdist(&self, p: f64) -> Result<Tensor> {
        // No pairs: an empty result of the input's dtype.
        pdist_of(self, p, |x| Tensor::zeros(&[0], x.dtype(), x.device()))
    }

    /// `torch.histogram(x, bins, range, weight, density)`: `(hist,
    /// bin_edges)`. `bins` a count (equal bins over `range`, by default the
    /// input's minimum and maximum, widened by 0.5 each way when they are
    /// equal) or the edges (1-D, increasing, of the input's dtype). The
    /// last bin includes its right edge; elements outside the edges and NaN
    /// are not counted. Float inputs; f16/bf16 need a range or edges (as
    /// PyTorch's CPU, which cannot find their range).
    ///
    /// ```
    /// use strata_tensor::{tensor, HistogramBins};
    /// let (h, e) = tensor![1., 2., 1.]?.histogram(HistogramBins::Count(4), None, None, false)?;
    /// assert_eq!(h.to_vec::<f32>()?, [2., 0., 0., 1.]);
    /// assert_eq!(e.to_vec::<f32>()?, [1., 1.25, 1.5, 1.75, 2.]);
    /// # Ok::<(), strata_tensor::TensorError>(())
    /// ```
    pub fn histogram(
        &self,
        bins: HistogramBins,
        range: Option<(f64, f64)>,
        weight: Option<&Tensor>,
        density: bool,
    ) -> Result<(Tensor, Tensor)> {
        const OP: &str = "histogram";
        let dt = self.dtype();
        if !dt.is_float() {
            return Err(TensorError::dtype(
                OP,
                format!("\"histogram_cpu\" not implemented for {dt}; convert the input to a float dtype"),
            ));
        }
        let half = matches!(dt, DType::F16 | DType::BF16);
        if half && range.is_none() && self.numel() > 0 && matches!(bins, HistogramBins::Count(_)) {
            // PyTorch's CPU finds the range of f16/bf16 inputs with a kernel
            // it lacks for them.
            return Err(TensorError::dtype(
                OP,
                format!("\"histogramdd\" not implemented for {dt} without a range; give `range` or the bin edges, or convert the input to f32"),
            ));
        }
        if let Some(w) = weight {
            if w.dtype() != dt {
                return Err(TensorError::dtype(
                    OP,
                    format!("torch.histogramdd: if weight tensor is provided, input tensor and weight tensor should have the same dtype, but got input({dt}), and weight({})", w.dtype()),
                ));
            }
            // PyTorch flattens both: the same number of elements will do.
            if w.numel() != self.numel() {
                return Err(TensorError::shape(
                    OP,
                    format!(
                        "torch.histogram: the weight tensor should have as many elements as the input ({:?} and {:?})",
                        w.shape(),
                        self.shape()
                    ),
                ));
            }
            crate::ops::elementwise::same_device(OP, self, w)?;
        }
        let edges = match bins {
            HistogramBins::Count(k) => {
                if k <= 0 {
                    return Err(TensorError::value(
                        OP,
                        format!("torch.histogram(): bins must be > 0, but got {k} for dimension 0"),
                    ));
                }
                let (mut lo, mut hi) = match range {
                    Some(r) => r,
                    None if self.numel() > 0 => {
                        let (lo, hi) = self.aminmax(None, false)?;
                        (
                            lo.to_dtype(DType::F64)?.item::<f64>()?,
                            hi.to_dtype(DType::F64)?.item::<f64>()?,
                        )
                    }
                    // PyTorch's default range of an empty input.
                    None => (0.0, 1.0),
                };
                if !lo.is_finite() || !hi.is_finite() {
                    return Err(TensorError::value(
                        OP,
                        format!(
                            "torch.histogramdd: dimension 0's range [{lo}, {hi}] is not finite"
                        ),
                    ));
                }
                if lo > hi {
                    return Err(TensorError::value(
                        OP,
                        format!("torch.histogramdd: min should not exceed max, but got min {lo} max {hi} for dimension 0"),
                    ));
                }
                if lo == hi {
                    lo -= 0.5;
                    hi += 0.5;
                }
                Tensor::linspace(lo, hi, k as usize + 1, Some(dt), self.device())?
            }
            HistogramBins::Edges(e) => {
                if e.dtype() != dt {
                    return Err(TensorError::dtype(
                        OP,
                        format!("torch.histogramdd: input tensor and bins tensors should have the same dtype, but got input {dt} and bins {}", e.dtype()),
                    ));
                }
                if e.ndim() != 1 {
                    return Err(TensorError::shape(
                        OP,
                        format!("torch.histogramdd: bins tensor should have one dimension, but got {} dimensions", e.ndim()),
                    ));
                }
                if e.numel() < 2 {
                    return Err(TensorError::value(
                        OP,
                        "torch.histogram(): bins must be > 0, but got 0 for dimension 0",
                    ));
                }
                crate::ops::elementwise::same_device(OP, self, e)?;
                e.contiguous()?
            }
        };
        let nb = edges.numel() - 1;
        let flat = self.reshape(&[-1])?;
        // Bin k holds e[k] <= x < e[k + 1], the last one e[nb] too: the
        // index of the last edge <= x, pulled down from nb to nb - 1.
        let upper = edges.searchsorted(&flat, false, true, None, None)?;
        let last = Tensor::where_cond(&upper.gt(nb as i64)?, nb as i64, &upper)?;
        let idx = last.sub(1)?;
        let idx = Tensor::where_cond(&idx.lt(0i64)?, 0i64, &idx)?;
        let lo = edges.narrow(0, 0, 1)?;
        let hi = edges.narrow(0, nb as i64, 1)?;
        let inside = flat.ge(&lo)?.logical_and(&flat.le(&hi)?)?;
        let ones = match weight {
            Some(w) => w.reshape(&[-1])?,
            None => Tensor::ones(flat.shape(), dt, self.device())?,
        };
        let w = Tensor::where_cond(&inside, &ones, 0.0)?;
        let hist = Tensor::zeros(&[nb], dt, self.device())?.scatter_add(0, &idx, &w)?;
        let hist = if density {
            let total = hist.sum(None, false)?.to_dtype(DType::F64)?.item::<f64>()?;
            let widths = edges
                .slice(0, Some(1), None, 1)?
                .sub(&edges.narrow(0, 0, nb as i64)?)?;
            hist.div(total)?.div(&widths)?
        } else {
            hist
        };
        Ok((hist, edges))
    }
}

/// How `histogram` bins: a count of equal bins, or the edges.
#[derive(Clone, Copy, Debug)]
pub enum HistogramBins<'a> {
    /// `bins=k`: `k > 0` equal bins over the range.
    Count(i64),
    /// `bins=tensor`: the `k + 1` edges.
    Edges(&'a Tensor),
}

type Of<T> = std::result::Result<T, <T as Composite>::Error>;

/// `quantile` from the rows `[B, n]` (a tensor or a variable) and the plan:
/// the sorted rows at the ranks below, `lerp`ed toward those above (so a
/// variable's gradient goes to the order statistics by their weights), in
/// PyTorch's shape (the quantile dim first, a view).
pub fn quantile_of<T: Composite>(rows: &T, plan: &QuantilePlan) -> Of<T> {
    let sorted = rows.sort_values(-1, false, false)?;
    let mut v = sorted.gather(-1, &plan.below)?;
    if let (Some(above), Some(w)) = (&plan.above, &plan.weights) {
        v = v.lerp(&sorted.gather(-1, above)?, &T::constant(w.clone()))?;
    }
    let (kept, scalar_q) = plan.finish_shape();
    let v = v.reshape(&kept)?;
    if scalar_q || kept.len() == 1 {
        Ok(v)
    } else {
        v.permute(&quantile_dim_first(kept.len()))
    }
}

/// `cov` of a tensor or a variable (the weights are constants): the
/// weighted mean removed, `mm` of the centred rows, divided by the
/// normalisation; PyTorch's checks in `cov_weights` and `cov_norm`.
pub fn cov_of<T: Composite>(
    x: &T,
    correction: i64,
    fweights: Option<&Tensor>,
    aweights: Option<&Tensor>,
) -> Of<T> {
    let (input, w) = cov_weights(x.data(), fweights, aweights)?;
    let n = input.shape()[1];
    let (w_sum, norm) = cov_norm(n, w.as_ref(), aweights, correction, x.device())?;
    let x = if x.shape().len() < 2 {
        x.view(&[1, -1])?
    } else {
        x.clone()
    };
    let weighted = |t: &T| -> Of<T> {
        match &w {
            Some(w) => t.mul(&T::constant(w.clone())),
            None => Ok(t.clone()),
        }
    };
    let avg = weighted(&x)?
        .sum(Some(&[1]), false)?
        .div(&T::constant(w_sum))?;
    let centred = x.sub(&avg.unsqueeze(1)?)?;
    let c = centred.mm(&weighted(&centred)?.t()?)?;
    let c = c.div(&T::constant(norm))?;
    let ones: Vec<i64> = (0..c.shape().len() as i64)
        .filter(|&d| c.shape()[d as usize] == 1)
        .collect();
    c.squeeze_dims(&ones)
}

/// `corrcoef` of a tensor or a variable (through `cov`, `sqrt` and
/// `clamp`).
pub fn corrcoef_of<T: Composite>(x: &T) -> Of<T> {
    let ndim = x.shape().len();
    if ndim > 2 {
        return Err(TensorError::shape(
            "corrcoef",
            format!(
                "corrcoef(): expected input to have two or fewer dimensions but got an input with {ndim} dimensions"
            ),
        )
        .into());
    }
    let c = cov_of(x, 1, None, None)?;
    if c.shape().is_empty() {
        return c.div(&c);
    }
    let sd = c.diagonal(0, 0, 1)?.sqrt()?;
    let c = c.div(&sd.view(&[-1, 1])?)?.div(&sd.view(&[1, -1])?)?;
    c.clamp(Some(-1.0), Some(1.0))
}

/// `aminmax` of a tensor or a variable: `amin` and `amax` over `dim` (every
/// dim for `None`), after PyTorch's checks (no reduced dim may be empty).
pub fn aminmax_of<T: Composite>(
    x: &T,
    dim: Option<i64>,
    keepdim: bool,
) -> std::result::Result<(T, T), T::Error> {
    const OP: &str = "aminmax";
    let shape = x.shape();
    let dims = match dim {
        None => {
            if shape.iter().product::<usize>() == 0 {
                return Err(TensorError::Empty {
                    op: OP,
                    shape: shape.to_vec(),
                }
                .into());
            }
            None
        }
        Some(d) => {
            let dd = normalize_dim(OP, d, shape.len())?;
            if shape.get(dd) == Some(&0) {
                // PyTorch: "Expected reduction dim {dd} to have non-zero size".
                return Err(TensorError::Empty {
                    op: OP,
                    shape: shape.to_vec(),
                }
                .into());
            }
            Some([d])
        }
    };
    let dims = dims.as_ref().map(|d| &d[..]);
    Ok((x.amin(dims, keepdim)?, x.amax(dims, keepdim)?))
}

/// `torch.dist(x, y, p)` of tensors or variables: the `p`-norm of `x - y`
/// (broadcast, promoted) over every element, a 0-d result.
pub fn dist_of<T: Composite>(x: &T, y: &T, p: f64) -> Of<T> {
    x.sub(y)?.vector_norm(p, &[], false)
}

/// `trapezoid` of a tensor or a variable (the sample points are
/// constants); an empty dim integrates to constant zeros.
pub fn trapezoid_of<T: Composite>(y: &T, spacing: Spacing, dim: i64) -> Of<T> {
    const OP: &str = "trapezoid";
    let yv = y.data();
    let d = normalize_dim_strict(OP, dim, yv.ndim())?;
    if yv.shape()[d] == 0 {
        let mut s = yv.shape().to_vec();
        s.remove(d);
        return Ok(T::constant(Tensor::zeros(&s, yv.dtype(), yv.device())?));
    }
    let di = d as i64;
    match spacing {
        Spacing::X(x) => {
            let dx = trapezoid_dx(OP, yv, x, d)?;
            let (left, right) = (
                y.slice(di, Some(0), Some(-1), 1)?,
                y.slice(di, Some(1), None, 1)?,
            );
            left.add(&right)?
                .mul(&T::constant(dx))?
                .sum(Some(&[di]), false)?
                .div_scalar(2.0)
        }
        Spacing::Dx(dx) => {
            no_bool_y(OP, yv)?;
            let ends = y.select(di, 0)?.add(&y.select(di, -1)?)?.mul_scalar(0.5)?;
            y.sum(Some(&[di]), false)?.sub(&ends)?.mul_scalar(dx)
        }
    }
}

/// `cumulative_trapezoid` of a tensor or a variable (the sample points
/// are constants).
pub fn cumulative_trapezoid_of<T: Composite>(y: &T, spacing: Spacing, dim: i64) -> Of<T> {
    const OP: &str = "cumulative_trapezoid";
    let yv = y.data();
    if let Spacing::Dx(_) = spacing {
        no_bool_y(OP, yv)?;
    }
    if yv.ndim() == 0 {
        return Err(TensorError::dim(OP, "slice() cannot be applied to a 0-dim tensor.").into());
    }
    let d = normalize_dim(OP, dim, yv.ndim())?;
    let di = d as i64;
    let (left, right) = (
        y.slice(di, Some(0), Some(-1), 1)?,
        y.slice(di, Some(1), None, 1)?,
    );
    match spacing {
        Spacing::X(x) => {
            let dx = trapezoid_dx(OP, yv, x, d)?;
            left.add(&right)?
                .mul(&T::constant(dx))?
                .cumsum(di)?
                .div_scalar(2.0)
        }
        Spacing::Dx(dx) => {
            // PyTorch: (dx / 2. * (left + right)).cumsum(dim).
            left.add(&right)?.mul_scalar(dx / 2.0)?.cumsum(di)
        }
    }
}

/// `renorm` of a tensor or a variable: PyTorch's scale factor
/// `maxnorm / (norm + 1e-7)` where `norm > maxnorm`, else 1, in the norm's
/// dtype (f32 for f16/bf16); its gradient is derivatives.yaml's
/// `renorm_backward`.
pub fn renorm_of<T: Composite>(x: &T, p: f64, dim: i64, maxnorm: f64) -> Of<T> {
    let (dims, acc) = renorm_plan(x.data(), p, dim, maxnorm)?;
    let norm = x.to_dtype(acc)?.vector_norm(p, &dims, true)?;
    let nv = norm.data();
    let big = nv.gt(maxnorm)?;
    let top = T::constant(Tensor::full(nv.shape(), maxnorm, acc, nv.device())?);
    let scaled = top.div(&norm.add_scalar(1e-7)?)?;
    let one = T::constant(Tensor::ones(nv.shape(), acc, nv.device())?);
    let factor = T::where_cond(&big, &scaled, &one)?;
    x.mul(&factor.to_dtype(x.dtype())?)
}

/// `pdist` of a tensor or a variable (through `cdist`); `empty` gives the
/// result when there are no pairs.
pub fn pdist_of<T: Composite>(x: &T, p: f64, empty: impl FnOnce(&T) -> Of<T>) -> Of<T> {
    let pairs = pdist_pairs(x.data(), p)?;
    if pairs.numel() == 0 {
        return empty(x);
    }
    let y = x.cdist(x, p)?.reshape(&[-1])?.index_select(0, &pairs)?;
    if !p.is_infinite() {
        return Ok(y);
    }
    // cdist's ±inf norm (a max or min) passes over NaN; PyTorch's pdist
    // gives NaN for a pair with a NaN in either row.
    let v = x.data();
    let cols = v.shape()[1];
    let vals = v.to_dtype(DType::F64)?.contiguous()?.to_vec::<f64>()?;
    let nan_row: Vec<bool> = vals
        .chunks(cols.max(1))
        .map(|r| r.iter().any(|z| z.is_nan()))
        .collect();
    if !nan_row.iter().any(|&b| b) {
        return Ok(y);
    }
    let n = v.shape()[0];
    let mask: Vec<bool> = pairs
        .to_vec::<i64>()?
        .iter()
        .map(|&k| nan_row[k as usize / n] || nan_row[k as usize % n])
        .collect();
    let len = mask.len();
    let mask = Tensor::from_vec(mask, &[len], v.device())?;
    let nan = T::constant(Tensor::full(&[len], f64::NAN, y.dtype(), v.device())?);
    T::where_cond(&mask, &nan, &y)
}
