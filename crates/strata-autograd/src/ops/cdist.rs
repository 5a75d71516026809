//! Session 78: `torch.cdist` on variables, with PyTorch 2.15's gradients.
//!
//! The forward is [`Tensor::cdist`]'s (the difference form for every `p`,
//! so a distance of 0 is exactly 0). The backward follows what PyTorch's
//! `cdist` records, which depends on `compute_mode`:
//!
//! - Where PyTorch computes through `_cdist_forward` (every `p` other than 2,
//!   and `p = 2` without the matrix-product form), its `_cdist_backward`:
//!   each pair `(i, j)` adds, coordinate by coordinate, a term of the
//!   difference `d = x1_i - x2_j`, the upstream gradient `g_ij` and the
//!   distance `r_ij` to `x1_i`'s gradient (and its negation to `x2_j`'s):
//!   `p = 0`: nothing; `p = 1`: `g sign(d)`; `p < 2`:
//!   `sign(d) |d|^(p-1) g / r^(p-1)`, 0 where `r = 0` and, for `p < 1`,
//!   where `d = 0`; `p = 2`: `g d / r`, 0 where `r = 0`; `p = inf`:
//!   `g sign(d)` on every coordinate whose `|d|` equals the distance (each
//!   tie gets the whole gradient, as PyTorch's kernel gives it), 0 on the
//!   others; other `p`: `d |d|^(p-2) g / r^(p-1)`, 0 where `r = 0`. The
//!   exponents take `p` rounded to the inputs' dtype, as PyTorch's kernel.
//! - Where PyTorch uses the matrix-product form (`p = 2` with
//!   `use_mm_for_euclid_dist`, or by default with more than 25 rows on
//!   either side), autograd differentiates `_euclidean_dist`:
//!   `ratio = g / r` (0 where `r = 0`), `x1 sum_j ratio - ratio x2` and
//!   `x2 sum_i ratio - ratioᵀ x1`, two matrix products, with their rounding.
//!   PyTorch's `r` there is the matrix-product distance (`|a|² - 2 a·b +
//!   |b|²`, clamped at 1e-30 before its root), which rounding can leave a
//!   little above 0 for identical points, and the gradient then adds that
//!   pair's rounding noise divided by a tiny distance; strata's `r` is the
//!   exact distance, 0 for identical points, whose pair adds nothing.

use super::{formula, sum_to};
use crate::error::Result;
use crate::var::{record, Var};
use strata_tensor::{DType, Tensor, TensorError};

/// PyTorch's `compute_mode` of `torch.cdist`: where `p = 2` takes the
/// matrix-product form. strata's forward is the exact difference form in
/// every mode ([`Tensor::cdist`]); the mode decides which of PyTorch's
/// backward formulas [`Var::cdist_with_mode`] records (see the module
/// documentation) and, as in PyTorch, whether f16/bf16 inputs are taken.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum CdistMode {
    /// `"use_mm_for_euclid_dist_if_necessary"` (PyTorch's default): the
    /// matrix-product form for `p = 2` when either input has more than 25
    /// rows.
    #[default]
    UseMmIfNecessary,
    /// `"use_mm_for_euclid_dist"`: the matrix-product form for every `p = 2`.
    UseMm,
    /// `"donot_use_mm_for_euclid_dist"`: never the matrix-product form.
    DoNotUseMm,
}

/// The most difference elements the backward holds at once (per block of
/// x1's rows, unless one row's differences with x2 alone are more), as the
/// forward's blocks.
const BLOCK: usize = 1 << 22;

impl Var {
    /// `torch.cdist(self, x2, p)`: the `p`-norm distance between each row of
    /// self (`[.., r1, c]`) and each row of `x2` (`[.., r2, c]`), `[.., r1,
    /// r2]` ([`Tensor::cdist`]), with PyTorch's default `compute_mode`
    /// ([`CdistMode::UseMmIfNecessary`]); both operands are differentiable.
    /// The gradient at a zero distance is 0, `p = 0` has zero gradient, and
    /// `p = inf` sends each distance's gradient to the coordinate(s) where
    /// it is reached (see [`Var::cdist_with_mode`]).
    ///
    /// Errors: those of [`Tensor::cdist`].
    ///
    /// ```
    /// use strata_autograd::Var;
    /// use strata_tensor::tensor;
    /// let a = Var::parameter(tensor![[0.0, 0.0], [3.0, 4.0]]?)?;
    /// let b = Var::parameter(tensor![[3.0, 4.0]]?)?;
    /// let d = a.cdist(&b, 2.0)?;
    /// assert_eq!(d.to_vec::<f32>()?, vec![5.0, 0.0]);
    /// d.sum(None, false)?.backward()?;
    /// // (0 - 3) / 5, (0 - 4) / 5; the zero distance adds nothing.
    /// assert_eq!(a.grad().unwrap().to_vec::<f32>()?, vec![-0.6, -0.8, 0.0, 0.0]);
    /// assert_eq!(b.grad().unwrap().to_vec::<f32>()?, vec![0.6, 0.8]);
    /// # Ok::<(), strata_autograd::AutogradError>(())
    /// ```
    pub fn cdist(&self, x2: &Var, p: f64) -> Result<Var> {
        self.cdist_with_mode(x2, p, CdistMode::default())
    }

    /// `torch.cdist(self, x2, p, compute_mode)`: [`Var::cdist`] with the
    /// backward formula `mode` gives PyTorch (the module documentation of
    /// `ops/cdist.rs` lists both): for `p = 2` in the matrix-product form,
    /// the gradient of `_euclidean_dist` (two matrix products); otherwise
    /// that of `_cdist_backward`. The values are [`Tensor::cdist`]'s in
    /// every mode. f16 and bf16 are taken only where the mode gives the
    /// matrix-product form, as PyTorch's CPU takes them (computed in f32,
    /// rounded once). In an autocast region both operands are cast to f32
    /// first (`cdist` is on PyTorch's CPU and CUDA f32 lists).
    ///
    /// Errors: those of [`Tensor::cdist`]; f16/bf16 inputs outside the
    /// matrix-product form ([`TensorError::DType`]).
    ///
    /// ```
    /// use strata_autograd::{CdistMode, Var};
    /// use strata_tensor::tensor;
    /// let a = Var::parameter(tensor![[0.0, 0.0]]?)?;
    /// let b = Var::new(tensor![[1.0, 1.0], [0.5, 2.0]]?);
    /// let d = a.cdist_with_mode(&b, f64::INFINITY, CdistMode::DoNotUseMm)?;
    /// assert_eq!(d.to_vec::<f32>()?, vec![1.0, 2.0]);
    /// d.sum(None, false)?.backward()?;
    /// // Both coordinates of the first pair reach its distance, only the
    /// // second of the second pair: (-1, -1) + (0, -1).
    /// assert_eq!(a.grad().unwrap().to_vec::<f32>()?, vec![-1.0, -2.0]);
    /// # Ok::<(), strata_autograd::AutogradError>(())
    /// ```
    pub fn cdist_with_mode(&self, x2: &Var, p: f64, mode: CdistMode) -> Result<Var> {
        const OP: &str = "cdist";
        // On both of PyTorch's autocast f32 lists.
        if let Some(c) = crate::autocast::cast_inputs(OP, &[self, x2])? {
            return c[0].cdist_with_mode(&c[1], p, mode);
        }
        // The tensor form checks ranks, columns, dtypes, p and the batch dims.
        let rows = |v: &Var| v.shape().get(v.ndim().wrapping_sub(2)).copied();
        let (r1, r2) = (rows(self).unwrap_or(0), rows(x2).unwrap_or(0));
        let euclid = p == 2.0
            && match mode {
                CdistMode::UseMm => true,
                CdistMode::DoNotUseMm => false,
                CdistMode::UseMmIfNecessary => r1 > 25 || r2 > 25,
            };
        let dt = self.dtype();
        let half = matches!(dt, DType::F16 | DType::BF16);
        let out = if half && euclid && self.ndim() >= 2 && x2.ndim() >= 2 && x2.dtype() == dt {
            // Tensor::cdist takes f16/bf16 only with more than 25 rows (the
            // default mode); PyTorch's `use_mm_for_euclid_dist` takes them
            // with any: computed in f32, rounded once, as the tensor form.
            let f = |t: &Tensor| t.to_dtype(DType::F32);
            f(self.data())?.cdist(&f(x2.data())?, p)?.to_dtype(dt)?
        } else {
            self.data().cdist(x2.data(), p)?
        };
        if half && !euclid && out.numel() > 0 && self.shape().last() != Some(&0) {
            return Err(TensorError::DType {
                op: OP,
                msg: format!(
                    "not implemented for {dt} without the matrix-product form (PyTorch's CPU takes \
                     f16/bf16 only for p = 2 with use_mm_for_euclid_dist); convert to f32"
                ),
            }
            .into());
        }
        let (a, b, r) = (self.data().clone(), x2.data().clone(), out.clone());
        let saved = move || vec![a, b, r];
        let name = if euclid {
            "EuclideanDistBackward"
        } else {
            "CdistBackward"
        };
        let f = formula(move |g, s, needs| {
            let (x1, x2, dist) = (&s[0], &s[1], &s[2]);
            let (g1, g2) = if euclid {
                euclidean_backward(g, x1, x2, dist)?
            } else {
                cdist_backward(g, x1, x2, dist, p)?
            };
            Ok(vec![needs[0].then_some(g1), needs[1].then_some(g2)])
        });
        record(name, out, &[Some(self), Some(x2)], saved, f, false)
    }
}

/// The operands of a backward as `[B, r, c]` tensors of the computation
/// dtype (the batch dims broadcast and flattened, as PyTorch's `cdist`
/// reshapes them), the gradient and distances as `[B, r1, r2]`, and the
/// broadcast batch shape; `None` where the result or an operand is empty.
struct Flat {
    x1: Tensor,
    x2: Tensor,
    g: Tensor,
    dist: Tensor,
    batch: Vec<i64>,
}

fn flatten(g: &Tensor, x1: &Tensor, x2: &Tensor, dist: &Tensor) -> Result<Option<Flat>> {
    let nd = dist.ndim();
    let batch: Vec<i64> = dist.shape()[..nd - 2].iter().map(|&s| s as i64).collect();
    let (r1, r2) = (dist.shape()[nd - 2] as i64, dist.shape()[nd - 1] as i64);
    let c = *x1.shape().last().unwrap_or(&0) as i64;
    if dist.numel() == 0 || c == 0 {
        return Ok(None);
    }
    let nb: i64 = batch.iter().product();
    let work = match x1.dtype() {
        DType::F16 | DType::BF16 => DType::F32,
        d => d,
    };
    let as_work = |t: &Tensor| {
        if t.dtype() == work {
            Ok(t.clone())
        } else {
            t.to_dtype(work)
        }
    };
    let flat = |x: &Tensor, r: i64| -> Result<Tensor> {
        let mut shape = batch.clone();
        shape.extend([r, c]);
        Ok(as_work(&x.expand(&shape)?.reshape(&[nb, r, c])?)?)
    };
    Ok(Some(Flat {
        x1: flat(x1, r1)?,
        x2: flat(x2, r2)?,
        g: as_work(&g.reshape(&[nb, r1, r2])?)?,
        dist: as_work(&dist.reshape(&[nb, r1, r2])?)?,
        batch,
    }))
}

/// `[B, r, c]` gradients back to the broadcast batch shape, then summed to
/// each operand's shape and dtype.
fn unflatten(
    flat: &Flat,
    gx1: Tensor,
    gx2: Tensor,
    x1: &Tensor,
    x2: &Tensor,
) -> Result<(Tensor, Tensor)> {
    let back = |gx: Tensor, x: &Tensor| -> Result<Tensor> {
        let mut shape = flat.batch.clone();
        shape.extend(gx.shape()[1..].iter().map(|&s| s as i64));
        sum_to(&gx.reshape(&shape)?, x.shape(), x.dtype())
    };
    Ok((back(gx1, x1)?, back(gx2, x2)?))
}

fn zeros_like(x: &Tensor) -> Result<Tensor> {
    Ok(Tensor::zeros(x.shape(), x.dtype(), x.device())?)
}

/// PyTorch's `_euclidean_dist_backward`: `ratio = g / r` (0 where `r` is
/// 0), then `x1 * ratio.sum(-1, keepdim) - ratio @ x2` and
/// `x2 * ratio.sum(-2).unsqueeze(-1) - ratio.mT @ x1`.
fn euclidean_backward(
    g: &Tensor,
    x1: &Tensor,
    x2: &Tensor,
    dist: &Tensor,
) -> Result<(Tensor, Tensor)> {
    let Some(flat) = flatten(g, x1, x2, dist)? else {
        return Ok((zeros_like(x1)?, zeros_like(x2)?));
    };
    let ratio = Tensor::where_cond(&flat.dist.eq(0.0)?, 0.0, &flat.g.div(&flat.dist)?)?;
    let gx1 = flat
        .x1
        .mul(&ratio.sum(Some(&[-1]), true)?)?
        .sub(&ratio.matmul(&flat.x2)?)?;
    let gx2 = flat
        .x2
        .mul(&ratio.sum(Some(&[-2]), false)?.unsqueeze(-1)?)?
        .sub(&ratio.transpose(-2, -1)?.matmul(&flat.x1)?)?;
    unflatten(&flat, gx1, gx2, x1, x2)
}

/// PyTorch's `_cdist_backward` for both operands: the term of each pair
/// (`cdist_term`) summed over x2's rows for x1's gradient and, negated,
/// over x1's rows for x2's, a block of x1's rows at a time.
fn cdist_backward(
    g: &Tensor,
    x1: &Tensor,
    x2: &Tensor,
    dist: &Tensor,
    p: f64,
) -> Result<(Tensor, Tensor)> {
    let Some(flat) = flatten(g, x1, x2, dist)? else {
        return Ok((zeros_like(x1)?, zeros_like(x2)?));
    };
    let (nb, r1, c) = (flat.x1.shape()[0], flat.x1.shape()[1], flat.x1.shape()[2]);
    let r2 = flat.x2.shape()[1];
    let (work, dev) = (flat.x1.dtype(), flat.x1.device());
    if p == 0.0 {
        let gx1 = Tensor::zeros(&[nb, r1, c], work, dev)?;
        let gx2 = Tensor::zeros(&[nb, r2, c], work, dev)?;
        return unflatten(&flat, gx1, gx2, x1, x2);
    }
    // `p - k` in the computation dtype, as PyTorch's kernel computes the
    // exponents (`p` rounded to the dtype, then `p - 1`, `p - 2`).
    let less = |k: f64| {
        if work == DType::F32 {
            f64::from(p as f32 - k as f32)
        } else {
            p - k
        }
    };
    let pw = [less(0.0), less(1.0), less(2.0)];
    let a = flat.x1.unsqueeze(2)?;
    let b = flat.x2.unsqueeze(1)?;
    let per_row = r2.saturating_mul(c);
    let per_batch = per_row.saturating_mul(r1);
    let (batches, rows) = if per_batch <= BLOCK {
        ((BLOCK / per_batch).min(nb), r1)
    } else {
        (1, (BLOCK / per_row).clamp(1, r1))
    };
    if batches == nb && rows == r1 {
        let t = cdist_term(
            &a.sub(&b)?,
            &flat.g.unsqueeze(-1)?,
            &flat.dist.unsqueeze(-1)?,
            p,
            pw,
        )?;
        let gx1 = t.sum(Some(&[2]), false)?;
        let gx2 = t.sum(Some(&[1]), false)?.neg()?;
        return unflatten(&flat, gx1, gx2, x1, x2);
    }
    let gx1 = Tensor::empty(&[nb, r1, c], work, dev)?;
    let gx2 = Tensor::zeros(&[nb, r2, c], work, dev)?;
    for b0 in (0..nb).step_by(batches) {
        let bn = batches.min(nb - b0) as i64;
        let b0 = b0 as i64;
        let (ab, bb) = (a.narrow(0, b0, bn)?, b.narrow(0, b0, bn)?);
        let (gb, db) = (flat.g.narrow(0, b0, bn)?, flat.dist.narrow(0, b0, bn)?);
        let acc = gx2.narrow(0, b0, bn)?;
        for r0 in (0..r1).step_by(rows) {
            let (r0, rn) = (r0 as i64, rows.min(r1 - r0) as i64);
            let t = cdist_term(
                &ab.narrow(1, r0, rn)?.sub(&bb)?,
                &gb.narrow(1, r0, rn)?.unsqueeze(-1)?,
                &db.narrow(1, r0, rn)?.unsqueeze(-1)?,
                p,
                pw,
            )?;
            gx1.narrow(0, b0, bn)?
                .narrow(1, r0, rn)?
                .copy_(&t.sum(Some(&[2]), false)?)?;
            acc.copy_(&acc.sub(&t.sum(Some(&[1]), false)?)?)?;
        }
    }
    unflatten(&flat, gx1, gx2, x1, x2)
}

/// The term of PyTorch's `_cdist_backward` kernel for the differences `d`
/// (`x1_i - x2_j`), the upstream gradient `g` and the distances `r`
/// (broadcasting), in its order of operations; `p` picks the norm (as
/// PyTorch's dispatch, in f64), `pw` holds `p`, `p - 1` and `p - 2` in the
/// computation dtype.
fn cdist_term(d: &Tensor, g: &Tensor, r: &Tensor, p: f64, pw: [f64; 3]) -> Result<Tensor> {
    let sign = d.sign()?;
    if p == 1.0 {
        return Ok(g.mul(&sign)?);
    }
    if p.is_infinite() {
        // g sign(d) (1 - min(1, ceil(| |d| - r |))): 1 where |d| is r.
        let off = d
            .abs()?
            .sub(r)?
            .abs()?
            .ceil()?
            .clamp(None::<f64>, Some(1.0))?;
        return Ok(g.mul(&sign)?.mul(&off.neg()?.add(1.0)?)?);
    }
    let t = if p < 2.0 {
        sign.mul(&d.abs()?.pow(pw[1])?)?
            .mul(g)?
            .div(&r.pow(pw[1])?)?
    } else if p == 2.0 {
        g.mul(d)?.div(r)?
    } else {
        d.mul(&d.abs()?.pow(pw[2])?)?.mul(g)?.div(&r.pow(pw[1])?)?
    };
    let t = Tensor::where_cond(&r.eq(0.0)?, 0.0, &t)?;
    Ok(if p < 2.0 && pw[0] < 1.0 {
        Tensor::where_cond(&d.eq(0.0)?, 0.0, &t)?
    } else {
        t
    })
}
