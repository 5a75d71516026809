//! Gradients of session 60's shape ops (`flip`, `roll`, `repeat`, `tile`,
//! `repeat_interleave`, `pad`) and of `clamp` with tensor bounds. Nothing
//! is saved but shapes and arguments, except clamp (its three operands) and
//! `repeat_interleave` with a tensor of counts (an `index_select`, which
//! saves its index). flip and roll send the gradient back through the
//! inverse copy; repeat, tile and `repeat_interleave` with a count sum it
//! over a view that splits each repeated dim in two; constant padding pads
//! the gradient with the negated pads; reflect, replicate and circular
//! padding scatter-add it at the source positions, which the forward op
//! itself gives when applied to the input's flat positions.

use super::{formula, sum_to};
use crate::error::Result;
use crate::var::{record, Var};
use strata_tensor::{DType, PadMode, Repeats, Tensor};

fn sizes(shape: &[usize]) -> Vec<i64> {
    shape.iter().map(|&s| s as i64).collect()
}

/// The gradient of a result whose dim `d` of size `n * r` holds `r` copies
/// of each of `n` source rows, interleaved (`outer == false`: row `i` at
/// `i * r ..`) or whole (`outer == true`: copy `k` at `k * n ..`), summed
/// back over the copies; done for every dim at once.
fn sum_copies(g: &Tensor, src: &[usize], reps: &[usize], outer: bool) -> Result<Tensor> {
    let mut split = Vec::with_capacity(2 * src.len());
    let mut dims = Vec::new();
    for (d, (&n, &r)) in src.iter().zip(reps).enumerate() {
        if outer {
            split.extend([r as i64, n as i64]);
            dims.push(2 * d as i64);
        } else {
            split.extend([n as i64, r as i64]);
            dims.push(2 * d as i64 + 1);
        }
    }
    let summed = g.reshape(&split)?.sum(Some(&dims), false)?;
    Ok(summed.reshape(&sizes(src))?)
}

impl Var {
    /// [`Tensor::flip`] (gradient: flipped back).
    ///
    /// ```
    /// use strata_autograd::Var;
    /// use strata_tensor::tensor;
    /// let x = Var::parameter(tensor![1., 2., 3.]?)?;
    /// x.flip(&[0])?.mul(&Var::new(tensor![1., 10., 100.]?))?.sum(None, false)?.backward()?;
    /// assert_eq!(x.grad().unwrap().to_vec::<f32>()?, [100., 10., 1.]);
    /// # Ok::<(), strata_autograd::AutogradError>(())
    /// ```
    pub fn flip(&self, dims: &[i64]) -> Result<Var> {
        let out = self.data().flip(dims)?;
        let dims = dims.to_vec();
        let f = formula(move |g, _s, _n| Ok(vec![Some(g.flip(&dims)?)]));
        record("FlipBackward", out, &[Some(self)], Vec::new, f, false)
    }

    /// [`Tensor::fliplr`] (dim 1 of an at least 2-D variable).
    ///
    /// ```
    /// use strata_autograd::Var;
    /// use strata_tensor::tensor;
    /// let x = Var::parameter(tensor![[1., 2.]]?)?;
    /// x.fliplr()?.mul(&Var::new(tensor![[1., 10.]]?))?.sum(None, false)?.backward()?;
    /// assert_eq!(x.grad().unwrap().to_vec::<f32>()?, [10., 1.]);
    /// # Ok::<(), strata_autograd::AutogradError>(())
    /// ```
    pub fn fliplr(&self) -> Result<Var> {
        self.data().fliplr()?;
        self.flip(&[1])
    }

    /// [`Tensor::flipud`] (dim 0 of an at least 1-D variable).
    ///
    /// ```
    /// use strata_autograd::Var;
    /// use strata_tensor::tensor;
    /// let x = Var::parameter(tensor![1., 2.]?)?;
    /// x.flipud()?.mul(&Var::new(tensor![1., 10.]?))?.sum(None, false)?.backward()?;
    /// assert_eq!(x.grad().unwrap().to_vec::<f32>()?, [10., 1.]);
    /// # Ok::<(), strata_autograd::AutogradError>(())
    /// ```
    pub fn flipud(&self) -> Result<Var> {
        self.data().flipud()?;
        self.flip(&[0])
    }

    /// [`Tensor::roll`] (gradient: rolled back).
    ///
    /// ```
    /// use strata_autograd::Var;
    /// use strata_tensor::tensor;
    /// let x = Var::parameter(tensor![1., 2., 3.]?)?;
    /// x.roll(&[1], &[0])?.mul(&Var::new(tensor![1., 10., 100.]?))?.sum(None, false)?.backward()?;
    /// assert_eq!(x.grad().unwrap().to_vec::<f32>()?, [10., 100., 1.]);
    /// # Ok::<(), strata_autograd::AutogradError>(())
    /// ```
    pub fn roll(&self, shifts: &[i64], dims: &[i64]) -> Result<Var> {
        let out = self.data().roll(shifts, dims)?;
        let shape = self.shape().to_vec();
        if out.numel() == 0 {
            // An empty tensor rolls to a copy before its shifts and dims are
            // checked (as PyTorch's): nothing to roll back, and the dims
            // need not name any.
            let f = formula(move |g, _s, _n| Ok(vec![Some(g.clone())]));
            return record("RollBackward", out, &[Some(self)], Vec::new, f, false);
        }
        // The inverse shifts, reduced modulo each size (no overflow).
        let back: Vec<i64> = if dims.is_empty() {
            let n = shape.iter().product::<usize>().max(1) as i128;
            vec![(n - i128::from(shifts[0]).rem_euclid(n)) as i64]
        } else {
            shifts
                .iter()
                .zip(dims)
                .map(|(&s, &d)| {
                    let d = if d < 0 { d + shape.len() as i64 } else { d } as usize;
                    let n = shape[d].max(1) as i128;
                    (n - i128::from(s).rem_euclid(n)) as i64
                })
                .collect()
        };
        let dims = dims.to_vec();
        let f = formula(move |g, _s, _n| Ok(vec![Some(g.roll(&back, &dims)?)]));
        record("RollBackward", out, &[Some(self)], Vec::new, f, false)
    }

    /// [`Tensor::repeat`] (gradient: summed over the copies).
    ///
    /// ```
    /// use strata_autograd::Var;
    /// use strata_tensor::tensor;
    /// let x = Var::parameter(tensor![1., 2.]?)?;
    /// x.repeat(&[3])?.sum(None, false)?.backward()?;
    /// assert_eq!(x.grad().unwrap().to_vec::<f32>()?, [3., 3.]);
    /// # Ok::<(), strata_autograd::AutogradError>(())
    /// ```
    pub fn repeat(&self, reps: &[i64]) -> Result<Var> {
        let out = self.data().repeat(reps)?;
        let shape = self.shape().to_vec();
        let mut src = vec![1usize; reps.len() - shape.len()];
        src.extend_from_slice(&shape);
        // A negative count is allowed on an empty dim only (its copies are
        // empty): as 0 there.
        let reps: Vec<usize> = reps.iter().map(|&r| r.max(0) as usize).collect();
        let empty = out.numel() == 0;
        let f = formula(move |g, _s, _n| {
            if empty {
                // No copy of any element (a count of 0, or an empty
                // tensor, whose counts may be as large as an i64 holds).
                return Ok(vec![Some(Tensor::zeros(&shape, g.dtype(), g.device())?)]);
            }
            let s = sum_copies(g, &src, &reps, true)?;
            Ok(vec![Some(s.reshape(&sizes(&shape))?)])
        });
        record("RepeatBackward", out, &[Some(self)], Vec::new, f, false)
    }

    /// [`Tensor::tile`] ([`Var::repeat`] with leading 1s).
    ///
    /// ```
    /// use strata_autograd::Var;
    /// use strata_tensor::tensor;
    /// let x = Var::parameter(tensor![[1., 2.], [3., 4.]]?)?;
    /// x.tile(&[2])?.sum(None, false)?.backward()?; // as repeat(&[1, 2])
    /// assert_eq!(x.grad().unwrap().to_vec::<f32>()?, [2., 2., 2., 2.]);
    /// # Ok::<(), strata_autograd::AutogradError>(())
    /// ```
    pub fn tile(&self, reps: &[i64]) -> Result<Var> {
        if reps.len() >= self.ndim() {
            return self.repeat(reps);
        }
        let mut full = vec![1i64; self.ndim() - reps.len()];
        full.extend_from_slice(reps);
        self.repeat(&full)
    }

    /// [`Tensor::repeat_interleave`]: with a count the gradient is summed
    /// over the copies; with a tensor of counts it is an `index_select`
    /// (the counts read back once), whose gradient scatter-adds.
    ///
    /// ```
    /// use strata_autograd::Var;
    /// use strata_tensor::tensor;
    /// let x = Var::parameter(tensor![1., 2.]?)?;
    /// let counts = tensor![1i64, 3]?;
    /// x.repeat_interleave(&counts, Some(0))?.sum(None, false)?.backward()?;
    /// assert_eq!(x.grad().unwrap().to_vec::<f32>()?, [1., 3.]);
    /// # Ok::<(), strata_autograd::AutogradError>(())
    /// ```
    pub fn repeat_interleave<'a>(
        &self,
        repeats: impl Into<Repeats<'a>>,
        dim: Option<i64>,
    ) -> Result<Var> {
        let repeats = repeats.into();
        match repeats {
            Repeats::Tensor(counts) => {
                // Checks (and errors) as the tensor op, then the same
                // elements through index_select: the index is the op applied
                // to the positions 0..n.
                let (x, d) = match dim {
                    None => (self.reshape(&[-1])?, 0),
                    Some(d) => {
                        let nd = self.ndim() as i64;
                        if nd == 0 || d < -nd || d >= nd {
                            self.data().repeat_interleave(counts, dim)?;
                        }
                        (self.clone(), if d < 0 { d + nd } else { d })
                    }
                };
                let n = x.shape()[d as usize];
                let pos = Tensor::arange(0i64, n as i64, 1i64, Some(DType::I64), counts.device())?;
                let index = pos.repeat_interleave(counts, Some(0))?;
                x.index_select(d, &index)
            }
            Repeats::Count(r) => {
                let out = self.data().repeat_interleave(r, dim)?;
                let shape = self.shape().to_vec();
                let (src, d) = match dim {
                    None => (vec![shape.iter().product::<usize>()], 0),
                    Some(d) => {
                        let d = if d < 0 { d + shape.len() as i64 } else { d } as usize;
                        (shape.clone(), d)
                    }
                };
                let f = formula(move |g, _s, _n| {
                    let mut reps = vec![1usize; src.len()];
                    reps[d] = r;
                    let s = sum_copies(g, &src, &reps, false)?;
                    Ok(vec![Some(s.reshape(&sizes(&shape))?)])
                });
                record(
                    "RepeatInterleaveBackward",
                    out,
                    &[Some(self)],
                    Vec::new,
                    f,
                    false,
                )
            }
        }
    }

    /// [`Tensor::pad`]: the gradient of constant padding is the upstream
    /// gradient cropped (and zero-padded where the pads cropped); reflect,
    /// replicate and circular padding add it up at each source position.
    ///
    /// ```
    /// use strata_autograd::Var;
    /// use strata_tensor::{tensor, PadMode};
    /// let x = Var::parameter(tensor![[1., 2., 3.]]?)?;
    /// x.pad(&[2, 0], PadMode::Reflect)?.sum(None, false)?.backward()?;
    /// assert_eq!(x.grad().unwrap().to_vec::<f32>()?, [1., 2., 2.]);
    /// # Ok::<(), strata_autograd::AutogradError>(())
    /// ```
    pub fn pad(&self, pad: &[i64], mode: PadMode) -> Result<Var> {
        let out = self.data().pad(pad, mode)?;
        let pad = pad.to_vec();
        let shape = self.shape().to_vec();
        let f = formula(move |g, _s, _n| {
            Ok(vec![Some(match mode {
                PadMode::Constant(_) => {
                    let back: Vec<i64> = pad.iter().map(|&p| -p).collect();
                    g.pad(&back, PadMode::Constant(0.0.into()))?
                }
                _ => {
                    let n = shape.iter().product::<usize>();
                    let pos = Tensor::arange(0i64, n as i64, 1i64, Some(DType::I64), g.device())?
                        .reshape(&sizes(&shape))?;
                    let index = pos.pad(&pad, mode)?.reshape(&[-1])?;
                    let z = Tensor::zeros(&[n], g.dtype(), g.device())?;
                    z.scatter_add(0, &index, &g.reshape(&[-1])?)?
                        .reshape(&sizes(&shape))?
                }
            })])
        });
        record("PadBackward", out, &[Some(self)], Vec::new, f, false)
    }

    /// [`Tensor::clamp_tensor`] with variable bounds. Gradients as
    /// PyTorch 2.15's: with one bound those of `maximum`/`minimum` (a tie
    /// splits the gradient in two; NaN gives it to both); with both, `x`
    /// gets it where it is neither below `min` nor above `max` (half where
    /// it ties one bound and `min < max`), `min` where `x < min <= max`
    /// (half on a tie), `max` where `min > max` or `x > max >= min` (half
    /// on a tie). Each is summed back to its operand's shape.
    ///
    /// ```
    /// use strata_autograd::Var;
    /// use strata_tensor::tensor;
    /// let x = Var::parameter(tensor![-1., 0.5, 2.]?)?;
    /// let lo = Var::parameter(tensor![0.]?)?;
    /// let hi = Var::parameter(tensor![1., 1., 1.]?)?;
    /// x.clamp_tensor(Some(&lo), Some(&hi))?.sum(None, false)?.backward()?;
    /// assert_eq!(x.grad().unwrap().to_vec::<f32>()?, [0., 1., 0.]);
    /// assert_eq!(lo.grad().unwrap().to_vec::<f32>()?, [1.]);
    /// assert_eq!(hi.grad().unwrap().to_vec::<f32>()?, [0., 0., 1.]);
    /// # Ok::<(), strata_autograd::AutogradError>(())
    /// ```
    pub fn clamp_tensor(&self, min: Option<&Var>, max: Option<&Var>) -> Result<Var> {
        let out = self
            .data()
            .clamp_tensor(min.map(|v| v.data()), max.map(|v| v.data()))?;
        let compute = out.dtype();
        let (has_lo, has_hi) = (min.is_some(), max.is_some());
        let shapes: Vec<(Vec<usize>, DType)> = [Some(self), min, max]
            .iter()
            .flatten()
            .map(|v| (v.shape().to_vec(), v.dtype()))
            .collect();
        let mut tensors = vec![self.data().clone()];
        tensors.extend(min.map(|v| v.data().clone()));
        tensors.extend(max.map(|v| v.data().clone()));
        let saved = move || tensors;
        let f = formula(move |g, s, _n| {
            let c = |t: &Tensor| -> Result<Tensor> { Ok(t.to_dtype(compute)?) };
            let m = |t: Tensor| -> Result<Tensor> { Ok(t.to_dtype(g.dtype())?) };
            let x = c(&s[0])?;
            let one = |t: &Tensor| -> Result<Tensor> { Ok(t.neg()?.add(1.0)?) };
            // g * coef where coef > 0, else exactly 0 (as PyTorch's where).
            let pass = |coef: &Tensor| -> Result<Tensor> {
                Ok(Tensor::where_cond(&coef.gt(0.0)?, &g.mul(coef)?, 0.0)?)
            };
            let coefs: Vec<Tensor> = match (has_lo, has_hi) {
                (true, true) => {
                    let (lo, hi) = (c(&s[1])?, c(&s[2])?);
                    let lt_lohi = m(lo.lt(&hi)?)?;
                    let le_lohi = m(lo.le(&hi)?)?;
                    let (x_lt, x_gt) = (m(x.lt(&lo)?)?, m(x.gt(&hi)?)?);
                    let (eq_lo, eq_hi) = (m(x.eq(&lo)?)?, m(x.eq(&hi)?)?);
                    let half = eq_lo.add(&eq_hi)?.mul(&lt_lohi)?;
                    let cx = one(&x_lt)?.mul(&one(&x_gt)?)?.mul(&one(&half.mul(0.5)?)?)?;
                    let clo = x_lt.mul(&le_lohi)?.add(&eq_lo.mul(&lt_lohi)?.mul(0.5)?)?;
                    let chi = m(lo.gt(&hi)?)?
                        .add(&x_gt.mul(&le_lohi)?)?
                        .add(&eq_hi.mul(&lt_lohi)?.mul(0.5)?)?;
                    vec![cx, clo, chi]
                }
                (true, false) => {
                    let lo = c(&s[1])?;
                    let tie = one(&m(x.eq(&lo)?)?.mul(0.5)?)?;
                    vec![
                        one(&m(x.lt(&lo)?)?)?.mul(&tie)?,
                        one(&m(x.gt(&lo)?)?)?.mul(&tie)?,
                    ]
                }
                _ => {
                    let hi = c(&s[1])?;
                    let tie = one(&m(x.eq(&hi)?)?.mul(0.5)?)?;
                    vec![
                        one(&m(x.gt(&hi)?)?)?.mul(&tie)?,
                        one(&m(x.lt(&hi)?)?)?.mul(&tie)?,
                    ]
                }
            };
            let mut grads = Vec::with_capacity(3);
            for (coef, (shape, dtype)) in coefs.iter().zip(&shapes) {
                grads.push(Some(sum_to(&pass(coef)?, shape, *dtype)?));
            }
            Ok(grads)
        });
        let inputs: Vec<Option<&Var>> = [Some(self), min, max]
            .into_iter()
            .flatten()
            .map(Some)
            .collect();
        record("ClampBackward", out, &inputs, saved, f, false)
    }
}
