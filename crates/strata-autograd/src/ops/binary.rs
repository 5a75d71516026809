//! Binary element-wise ops with broadcasting: add, sub, mul, div. Gradients
//! are summed back to each input's shape.

use super::{formula, sum_to};
use crate::error::Result;
use crate::var::{record, Var, VarOperand};
use strata_tensor::{Scalar, Tensor};

/// The divisor's gradient of `a / b` for the upstream gradient `g`, before
/// it is summed back to `b`'s shape: PyTorch's `div_tensor_other_backward`,
/// `-g * ((a / b) / b)`, in that order: `-((g a) / b) / b`, strata's
/// until session 56, rounds differently, which a divisor's gradient summed
/// over a broadcast (terms that cancel) magnifies past the oracle's
/// tolerance. Also the in-place `div_`'s, with `a` self's old value.
pub(crate) fn div_other_grad(g: &Tensor, a: &Tensor, b: &Tensor) -> Result<Tensor> {
    Ok(g.neg()?.mul(&a.div(b)?.div(b)?)?)
}

#[derive(Clone, Copy)]
enum Kind {
    Add,
    Sub,
    Mul,
    Div,
}

impl Var {
    fn binary<'a>(&self, kind: Kind, other: impl Into<VarOperand<'a>>) -> Result<Var> {
        let other = other.into();
        let a = self.data();
        let b = other.operand();
        let out = match kind {
            Kind::Add => a.add(b)?,
            Kind::Sub => a.sub(b)?,
            Kind::Mul => a.mul(b)?,
            Kind::Div => a.div(b)?,
        };
        let (a_shape, a_dtype) = (self.shape().to_vec(), self.dtype());
        let inputs = [Some(self), other.var()];
        match other {
            VarOperand::Scalar(c) => {
                let name =
                    ["AddBackward", "SubBackward", "MulBackward", "DivBackward"][kind as usize];
                let f = formula(move |g, _saved, _needs| {
                    let ga = match kind {
                        Kind::Add | Kind::Sub => g.clone(),
                        Kind::Mul => g.mul(c)?,
                        Kind::Div => g.div(c)?,
                    };
                    Ok(vec![Some(sum_to(&ga, &a_shape, a_dtype)?), None])
                });
                let out = record(name, out, &inputs, Vec::new, f, false)?;
                if matches!(kind, Kind::Mul | Kind::Div) {
                    // PyTorch's MulBackward0/DivBackward0 save the scalar
                    // (as a wrapped tensor): a second backward is refused.
                    if let Some(node) = out.grad_fn() {
                        node.mark_saves();
                    }
                }
                Ok(out)
            }
            VarOperand::Var(bv) => {
                let (b_shape, b_dtype) = (bv.shape().to_vec(), bv.dtype());
                let (a_req, b_req) = (self.requires_grad(), bv.requires_grad());
                match kind {
                    Kind::Add | Kind::Sub => {
                        let name = if matches!(kind, Kind::Add) {
                            "AddBackward"
                        } else {
                            "SubBackward"
                        };
                        let f = formula(move |g, _saved, needs| {
                            let ga = if needs[0] {
                                Some(sum_to(g, &a_shape, a_dtype)?)
                            } else {
                                None
                            };
                            let gb = if needs[1] {
                                let gb = sum_to(g, &b_shape, b_dtype)?;
                                Some(if matches!(kind, Kind::Sub) {
                                    gb.neg()?
                                } else {
                                    gb
                                })
                            } else {
                                None
                            };
                            Ok(vec![ga, gb])
                        });
                        record(name, out, &inputs, Vec::new, f, false)
                    }
                    Kind::Mul => {
                        // d(a*b)/da = b, d(a*b)/db = a: save only what is needed
                        // (b first when a needs grad, then a when b does).
                        let saved = || {
                            let mut v = Vec::new();
                            if a_req {
                                v.push(bv.data().clone());
                            }
                            if b_req {
                                v.push(a.clone());
                            }
                            v
                        };
                        let f = formula(move |g, s, needs| {
                            let ga = if needs[0] {
                                Some(sum_to(&g.mul(&s[0])?, &a_shape, a_dtype)?)
                            } else {
                                None
                            };
                            let gb = if needs[1] {
                                // b's value was saved first when a requires grad,
                                // whether or not this pass needs a's gradient
                                // (a `grad` pass that asks only for b's).
                                let sa = &s[a_req as usize];
                                Some(sum_to(&g.mul(sa)?, &b_shape, b_dtype)?)
                            } else {
                                None
                            };
                            Ok(vec![ga, gb])
                        });
                        record("MulBackward", out, &inputs, saved, f, false)
                    }
                    Kind::Div => {
                        // d(a/b)/da = 1/b, d(a/b)/db = -a/b²: save b, and a when b needs grad.
                        let saved = || {
                            let mut v = vec![bv.data().clone()];
                            if b_req {
                                v.push(a.clone());
                            }
                            v
                        };
                        let f = formula(move |g, s, needs| {
                            let ga = if needs[0] {
                                Some(sum_to(&g.div(&s[0])?, &a_shape, a_dtype)?)
                            } else {
                                None
                            };
                            let gb = if needs[1] {
                                Some(sum_to(
                                    &div_other_grad(g, &s[1], &s[0])?,
                                    &b_shape,
                                    b_dtype,
                                )?)
                            } else {
                                None
                            };
                            Ok(vec![ga, gb])
                        });
                        record("DivBackward", out, &inputs, saved, f, false)
                    }
                }
            }
        }
    }

    /// `self + other`, broadcasting (gradients are summed back to each shape).
    pub fn add<'a>(&self, other: impl Into<VarOperand<'a>>) -> Result<Var> {
        self.binary(Kind::Add, other)
    }

    /// `self - other`, broadcasting.
    pub fn sub<'a>(&self, other: impl Into<VarOperand<'a>>) -> Result<Var> {
        self.binary(Kind::Sub, other)
    }

    /// `self * other`, broadcasting.
    pub fn mul<'a>(&self, other: impl Into<VarOperand<'a>>) -> Result<Var> {
        self.binary(Kind::Mul, other)
    }

    /// `self / other` (true division), broadcasting.
    pub fn div<'a>(&self, other: impl Into<VarOperand<'a>>) -> Result<Var> {
        self.binary(Kind::Div, other)
    }

    /// `c - self` for a scalar `c` (recorded as a negation and an addition).
    pub fn rsub(&self, c: impl Into<Scalar>) -> Result<Var> {
        self.neg()?.add(VarOperand::Scalar(c.into()))
    }
}
