//! Session 78: `logaddexp`, `logaddexp2`, `xlogy` and `addcdiv` on
//! variables (the forwards are `Tensor`'s), with the gradients of PyTorch
//! 2.15's `derivatives.yaml`: `g / (1 + e^(y - x))` and
//! `g / (1 + e^(x - y))` (base 2: `2^`); xlogy's `xlogy(g, y)` (0 where
//! `x == 0` and `y <= 0`) and `g x / y`; addcdiv's `g`, `g value / t2` and
//! `-g value t1 / t2²`. Each gradient is summed back to its operand's shape.

use super::gated_activations::record_pair;
use super::{formula, sum_to};
use crate::error::Result;
use crate::var::{record, Var};
use strata_tensor::{addcdiv_plan, Tensor};

impl Var {
    /// `torch.logaddexp` ([`Tensor::logaddexp`]); both operands are saved.
    pub fn logaddexp(&self, other: &Var) -> Result<Var> {
        let out = self.data().logaddexp(other.data())?;
        record_pair("LogaddexpBackward", out, self, other, |g, x, y, n| {
            let gx = n[0].then(|| g.div(&y.sub(x)?.exp()?.add(1)?)).transpose()?;
            let gy = n[1].then(|| g.div(&x.sub(y)?.exp()?.add(1)?)).transpose()?;
            Ok([gx, gy])
        })
    }

    /// `torch.logaddexp2` ([`Tensor::logaddexp2`]); both operands are saved.
    pub fn logaddexp2(&self, other: &Var) -> Result<Var> {
        let out = self.data().logaddexp2(other.data())?;
        record_pair("Logaddexp2Backward", out, self, other, |g, x, y, n| {
            let gx = n[0]
                .then(|| g.div(&y.sub(x)?.exp2()?.add(1)?))
                .transpose()?;
            let gy = n[1]
                .then(|| g.div(&x.sub(y)?.exp2()?.add(1)?))
                .transpose()?;
            Ok([gx, gy])
        })
    }

    /// `torch.xlogy` ([`Tensor::xlogy`]); both operands are saved.
    pub fn xlogy(&self, other: &Var) -> Result<Var> {
        let out = self.data().xlogy(other.data())?;
        record_pair("XlogyBackward", out, self, other, |g, x, y, n| {
            let gx = if n[0] {
                let masked = x.eq(0)?.logical_and(&y.le(0)?)?;
                Some(Tensor::where_cond(&masked, 0.0, &g.xlogy(y)?)?)
            } else {
                None
            };
            let gy = n[1].then(|| g.mul(x)?.div(y)).transpose()?;
            Ok([gx, gy])
        })
    }

    /// `torch.addcdiv(self, t1, t2, value=value)` ([`Tensor::addcdiv`]);
    /// the divisor and (where `t2` requires grad) `t1` are saved.
    pub fn addcdiv(&self, t1: &Var, t2: &Var, value: f64) -> Result<Var> {
        addcdiv_plan(self.data(), t1.data(), t2.data(), value)?;
        let out = self.data().addcdiv(t1.data(), t2.data(), value)?;
        let shapes = [self, t1, t2].map(|v| (v.shape().to_vec(), v.dtype()));
        let (a, b) = (t1.data().clone(), t2.data().clone());
        let saved = move || vec![a, b];
        let f = formula(move |g, s, needs| {
            let (a, b) = (&s[0], &s[1]);
            let g0 = if needs[0] {
                Some(sum_to(g, &shapes[0].0, shapes[0].1)?)
            } else {
                None
            };
            let g1 = if needs[1] {
                let q = b.full_like(value, None)?.div(b)?;
                Some(sum_to(&g.mul(&q)?, &shapes[1].0, shapes[1].1)?)
            } else {
                None
            };
            let g2 = if needs[2] {
                let q = a.mul(value)?.div(&b.mul(b)?)?;
                Some(sum_to(&g.neg()?.mul(&q)?, &shapes[2].0, shapes[2].1)?)
            } else {
                None
            };
            Ok(vec![g0, g1, g2])
        });
        record(
            "AddcdivBackward",
            out,
            &[Some(self), Some(t1), Some(t2)],
            saved,
            f,
            false,
        )
    }
}
