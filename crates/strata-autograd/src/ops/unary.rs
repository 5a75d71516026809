//! Unary element-wise ops: neg, relu, exp, log.

use super::formula;
use crate::error::Result;
use crate::var::{record, Var};
use strata_tensor::Tensor;

impl Var {
    /// `-self`.
    pub fn neg(&self) -> Result<Var> {
        let out = self.data().neg()?;
        let f = formula(|g, _s, _n| Ok(vec![Some(g.neg()?)]));
        record("NegBackward", out, &[Some(self)], Vec::new, f, false)
    }

    /// `max(self, 0)`; the gradient is passed except where the result is
    /// `<= 0` (the result is saved, as in PyTorch's `threshold_backward`:
    /// a NaN input passes it, as in PyTorch; it got 0).
    pub fn relu(&self) -> Result<Var> {
        let out = self.data().relu()?;
        let saved = || vec![out.clone()];
        let f = formula(|g, s, _n| {
            let blocked = s[0].le(0.0)?;
            Ok(vec![Some(Tensor::where_cond(&blocked, 0.0, g)?)])
        });
        record("ReluBackward", out.clone(), &[Some(self)], saved, f, false)
    }

    /// `e^self`; the result is saved (its gradient is `g * e^self`).
    pub fn exp(&self) -> Result<Var> {
        if let Some(c) = crate::autocast::cast_inputs("exp", &[self])? {
            return c[0].exp();
        }
        let out = self.data().exp()?;
        let saved = || vec![out.clone()];
        let f = formula(|g, s, _n| Ok(vec![Some(g.mul(&s[0])?)]));
        record("ExpBackward", out.clone(), &[Some(self)], saved, f, false)
    }

    /// Natural logarithm; the input is saved (its gradient is `g / self`).
    pub fn log(&self) -> Result<Var> {
        if let Some(c) = crate::autocast::cast_inputs("log", &[self])? {
            return c[0].log();
        }
        let out = self.data().log()?;
        let input = self.data().clone();
        let saved = || vec![input];
        let f = formula(|g, s, _n| Ok(vec![Some(g.div(&s[0])?)]));
        record("LogBackward", out, &[Some(self)], saved, f, false)
    }
}
