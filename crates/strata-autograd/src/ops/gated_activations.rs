//! Session 78: `hardshrink`, `softshrink`, `tanhshrink`, `softmin`, `glu`
//! and `prelu` on variables (the forwards are `Tensor`'s), with the
//! gradients of PyTorch 2.15's `derivatives.yaml`: the shrinks pass the
//! gradient outside `[-lambd, lambd]` (0 at NaN); `glu` saves its input
//! (`g sigmoid(b)` for the first half, `g a sigmoid(b) (1 - sigmoid(b))`
//! for the second); `tanhshrink`, `softmin` and `prelu` are recorded as
//! their compositions, as PyTorch's autograd differentiates them.

use super::math::Save;
use super::{formula, sum_to};
use crate::error::Result;
use crate::var::{record, Var};
use strata_tensor::{glu_halves, prelu_weight, DType, Tensor};

/// The shrinks' gradient: 0 where `-lambd <= x <= lambd`, `g` elsewhere
/// (`hard`: also at a NaN input or with a NaN `lambd`, where hardshrink
/// keeps `x`), or `g` only where `x < -lambd` or `x > lambd` (softshrink).
/// (At a NaN input PyTorch's CPU kernels give 0 in their vectorised loop
/// and `g` in their scalar loop, which takes small tensors and the tail of
/// a row; strata picks one answer per op.)
fn shrink_grad(g: &Tensor, x: &Tensor, lambd: f64, hard: bool) -> strata_tensor::Result<Tensor> {
    if hard {
        let inside = x.ge(-lambd)?.logical_and(&x.le(lambd)?)?;
        Tensor::where_cond(&inside, 0.0, g)
    } else {
        let outside = x.lt(-lambd)?.logical_or(&x.gt(lambd)?)?;
        Tensor::where_cond(&outside, g, 0.0)
    }
}

impl Var {
    /// `F.hardshrink` ([`Tensor::hardshrink`]).
    pub fn hardshrink(&self, lambd: f64) -> Result<Var> {
        let out = self.data().hardshrink(lambd)?;
        self.unary_op("HardshrinkBackward", out, Save::Input, move |g, x| {
            shrink_grad(g, x, lambd, true)
        })
    }

    /// `F.softshrink` ([`Tensor::softshrink`]).
    pub fn softshrink(&self, lambd: f64) -> Result<Var> {
        let out = self.data().softshrink(lambd)?;
        self.unary_op("SoftshrinkBackward", out, Save::Input, move |g, x| {
            shrink_grad(g, x, lambd, false)
        })
    }

    /// `F.tanhshrink`, `x - tanh(x)`, recorded as those ops.
    pub fn tanhshrink(&self) -> Result<Var> {
        self.sub(&self.tanh()?)
    }

    /// `F.softmin`, `softmax(-x)`, recorded as those ops.
    pub fn softmin(&self, dim: i64, dtype: Option<DType>) -> Result<Var> {
        self.neg()?.softmax(dim, dtype)
    }

    /// `F.glu` ([`Tensor::glu`]); the input is saved.
    pub fn glu(&self, dim: i64) -> Result<Var> {
        let out = self.data().glu(dim)?;
        self.unary_op("GluBackward", out, Save::Input, move |g, x| {
            let (a, b, d) = glu_halves(x, dim)?;
            let wide = |t: &Tensor| match t.dtype() {
                DType::F16 | DType::BF16 => t.to_dtype(DType::F32),
                _ => Ok(t.clone()),
            };
            let (a, b, gw) = (wide(&a)?, wide(&b)?, wide(g)?);
            let s = b.sigmoid()?;
            let ga = gw.mul(&s)?;
            let gb = gw.mul(&a)?.mul(&s)?.mul(&s.neg()?.add(1.0)?)?;
            Tensor::cat(&[&ga, &gb], d as i64)?.to_dtype(x.dtype())
        })
    }

    /// `F.prelu` ([`Tensor::prelu`]), with PyTorch's `_prelu_kernel_backward`:
    /// the input's gradient is `g` where it is positive, `w g` elsewhere,
    /// the weight's `x g` summed over the non-positive elements of its
    /// channel (0 at positive ones, whatever they hold).
    pub fn prelu(&self, weight: &Var) -> Result<Var> {
        let w = prelu_weight(self.data(), weight.data())?;
        let shape: Vec<i64> = w.shape().iter().map(|&s| s as i64).collect();
        let w = if weight.shape() == w.shape() {
            weight.clone()
        } else {
            weight.reshape(&shape)?
        };
        let out = self.data().prelu(weight.data())?;
        record_pair("PreluKernelBackward", out, self, &w, |g, x, w, n| {
            let pos = x.gt(0)?;
            let gx = n[0]
                .then(|| Tensor::where_cond(&pos, g, &w.mul(g)?))
                .transpose()?;
            let gw = n[1]
                .then(|| Tensor::where_cond(&pos, 0.0, &x.mul(g)?))
                .transpose()?;
            Ok([gx, gw])
        })
    }
}

/// Records a two-operand node whose gradients `grads(g, x, y)` (before
/// they are summed back to each operand's shape) use both operands.
pub(super) fn record_pair(
    name: &'static str,
    out: Tensor,
    x: &Var,
    y: &Var,
    grads: impl Fn(&Tensor, &Tensor, &Tensor, [bool; 2]) -> strata_tensor::Result<[Option<Tensor>; 2]>
        + Send
        + Sync
        + 'static,
) -> Result<Var> {
    let (a, b) = (x.data().clone(), y.data().clone());
    let (xs, xd) = (x.shape().to_vec(), x.dtype());
    let (ys, yd) = (y.shape().to_vec(), y.dtype());
    let saved = move || vec![a, b];
    let f = formula(move |g, s, needs| {
        let [gx, gy] = grads(g, &s[0], &s[1], [needs[0], needs[1]])?;
        let gx = match gx.filter(|_| needs[0]) {
            Some(t) => Some(sum_to(&t, &xs, xd)?),
            None => None,
        };
        let gy = match gy.filter(|_| needs[1]) {
            Some(t) => Some(sum_to(&t, &ys, yd)?),
            None => None,
        };
        Ok(vec![gx, gy])
    });
    record(name, out, &[Some(x), Some(y)], saved, f, false)
}
