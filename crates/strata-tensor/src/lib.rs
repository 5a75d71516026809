//! Session 79: the special functions and the rest of PyTorch's element-wise
//! math on variables (the forwards are `Tensor`'s, `strata_tensor`'s
//! `ops/special.rs`), each with the gradient of PyTorch 2.15's
//! `derivatives.yaml` and its saved tensors:
//!
//! * `erfinv`: `g sqrt(pi) / 2 exp(erfinv(x)^2)`; `lgamma`: `g digamma(x)`;
//!   `digamma`: `g polygamma(1, x)`; `polygamma(n)`: `g polygamma(n + 1, x)`;
//!   `mvlgamma(p)`: `g sum_j digamma(x - j / 2)`;
//! * `i0`: `g i1(x)`; `i0e`: `g (i1e(x) - sgn(x) i0e(x))`; `i1`:
//!   `g (i0(x) - i1(x) / x)` and `i1e`: `g (i0e(x) - i1e(x) (sgn(x) + 1 / x))`,
//!   both 0.5 where `|x|` is at most the dtype's epsilon;
//! * `sinc`: `g (pi x cos(pi x) - sin(pi x)) / (pi x^2)`, 0 at 0; `entr`:
//!   `-g (1 + ln x)`; `ndtr`: `g exp(-x^2 / 2) / sqrt(2 pi)`; `ndtri`:
//!   `g sqrt(2 pi) exp(y^2 / 2)`; `log_ndtr`: `g exp(-(y + x^2 / 2)) / sqrt(2 pi)`;
//!   `erfcx`: `g (2 x y - 2 / sqrt(pi))`;
//! * `logit(eps)`: `g / (x (1 - x))`, NaN outside [0, 1] without `eps`, 0
//!   outside `[eps, 1 - eps]` with it; `g inf` at 0 and 1;
//! * `xlog1py`: `xlog1py(g, y)` (0 where `x == 0` and `y <= -1`) and
//!   `g x / (1 + y)`; `hypot`: `g x / r`, `g y / r`; `copysign`:
//!   `g r / x` (0 where `x == 0`) and 0; `fmax`/`fmin`: `g` to the operand
//!   chosen, half to each of equal operands (to `self` where `other` is NaN);
//! * `rad2deg`/`deg2rad`: `g 180 / pi`, `g pi / 180`; `angle` of a real
//!   tensor: 0; `positive`: `g`;
//! * `ldexp`, `float_power` and `true_divide` are PyTorch's compositions
//!   (`self * 2^other`, `pow` in f64, `div`), recorded as those ops.

use super::gated_activations::record_pair;
use super::math::Save;
use crate::error::Result;
use crate::var::Var;
use strata_tensor::{DType, Tensor};

/// `sqrt(2 pi)`.
const SQRT_2PI: f64 = 2.506_628_274_631_000_7;

/// 0.5 where `|x|` is at most the dtype's epsilon (i1's and i1e's limit at
/// 0), else `f(x)`, as PyTorch's `i1_backward`.
fn tiny_safe(
    x: &Tensor,
    f: impl Fn(&Tensor) -> strata_tensor::Result<Tensor>,
) -> strata_tensor::Result<Tensor> {
    let eps = match x.dtype() {
        DType::F64 => f64::EPSILON,
        DType::F16 => 2f64.powi(-10),
        DType::BF16 => 2f64.powi(-7),
        _ => f64::from(f32::EPSILON),
    };
    // `|x| <= eps` (a NaN is not tiny: its gradient is NaN, as PyTorch's).
    let tiny = x.abs()?.le(eps)?;
    let safe = Tensor::where_cond(&tiny, eps, x)?;
    Tensor::where_cond(&tiny, 0.5, &f(&safe)?)
}

/// The gradients of `fmax`/`fmin` where `x_wins`/`y_wins` say which
/// operand was chosen strictly: equal operands share `g`, a NaN `y` sends
/// it to `x`, a NaN `x` (only) to `y`.
fn extreme_grads(
    g: &Tensor,
    x: &Tensor,
    y: &Tensor,
    n: [bool; 2],
    x_wins: &Tensor,
    y_wins: &Tensor,
) -> strata_tensor::Result<[Option<Tensor>; 2]> {
    let y_nan = y.isnan()?;
    let tie = x.eq(y)?;
    let half = g.div(2.0)?;
    let gx = if n[0] {
        let chosen = Tensor::where_cond(x_wins, g, 0.0)?;
        let t = Tensor::where_cond(&tie, &half, &chosen)?;
        Some(Tensor::where_cond(&y_nan, g, &t)?)
    } else {
        None
    };
    let gy = if n[1] {
        let chosen = Tensor::where_cond(&y_wins.logical_or(&x.isnan()?)?, g, 0.0)?;
        let t = Tensor::where_cond(&tie, &half, &chosen)?;
        Some(Tensor::where_cond(&y_nan, 0.0, &t)?)
    } else {
        None
    };
    Ok([gx, gy])
}

impl Var {
    /// `torch.erfinv` ([`Tensor::erfinv`]); the input is saved.
    pub fn erfinv(&self) -> Result<Var> {
        let out = self.data().erfinv()?;
        self.unary_op("ErfinvBackward", out, Save::Input, |g, x| {
            let e = x.erfinv()?;
            g.mul(&e.mul(&e)?.exp()?.mul(0.5 * std::f64::consts::PI.sqrt())?)
        })
    }

    /// `torch.lgamma` ([`Tensor::lgamma`]); the input is saved.
    pub fn lgamma(&self) -> Result<Var> {
        let out = self.data().lgamma()?;
        self.unary_op("LgammaBackward", out, Save::Input, |g, x| {
            g.mul(&x.digamma()?)
        })
    }

    /// `torch.digamma` ([`Tensor::digamma`]); the input is saved.
    pub fn digamma(&self) -> Result<Var> {
        let out = self.data().digamma()?;
        self.unary_op("DigammaBackward", out, Save::Input, |g, x| {
            g.mul(&x.polygamma(1)?)
        })
    }

    /// `torch.polygamma(n, self)` ([`Tensor::polygamma`]); the input is saved.
    pub fn polygamma(&self, n: i64) -> Result<Var> {
        let out = self.data().polygamma(n)?;
        self.unary_op("PolygammaBackward", out, Save::Input, move |g, x| {
            g.mul(&x.polygamma(n + 1)?)
        })
    }

    /// `torch.mvlgamma(self, p)` ([`Tensor::mvlgamma`]); the input is saved.
    pub fn mvlgamma(&self, p: i64) -> Result<Var> {
        let out = self.data().mvlgamma(p)?;
        self.unary_op("MvlgammaBackward", out, Save::Input, move |g, x| {
            let args = Tensor::arange(
                -(p as f64) * 0.5 + 0.5,
                0.5,
                0.5,
                Some(x.dtype()),
                x.device(),
            )?;
            let args = args.add(&x.unsqueeze(-1)?)?;
            g.mul(&args.digamma()?.sum(Some(&[-1]), false)?)
        })
    }

    /// `torch.i0` ([`Tensor::i0`]); the input is saved.
    pub fn i0(&self) -> Result<Var> {
        let out = self.data().i0()?;
        self.unary_op("I0Backward", out, Save::Input, |g, x| {
            g.mul(&x.special_i1()?)
        })
    }

    /// `torch.special.i0e` ([`Tensor::special_i0e`]); the input is saved.
    pub fn special_i0e(&self) -> Result<Var> {
        let out = self.data().special_i0e()?;
        self.unary_op("SpecialI0EBackward", out, Save::Input, |g, x| {
            let y = x.special_i0e()?;
            g.mul(&x.special_i1e()?.sub(&x.sign()?.mul(&y)?)?)
        })
    }

    /// `torch.special.i1` ([`Tensor::special_i1`]); the input is saved.
    pub fn special_i1(&self) -> Result<Var> {
        let out = self.data().special_i1()?;
        self.unary_op("SpecialI1Backward", out, Save::Input, |g, x| {
            let d = tiny_safe(x, |s| s.i0()?.sub(&s.special_i1()?.mul(&s.reciprocal()?)?))?;
            g.mul(&d)
        })
    }

    /// `torch.special.i1e` ([`Tensor::special_i1e`]); the input is saved.
    pub fn special_i1e(&self) -> Result<Var> {
        let out = self.data().special_i1e()?;
        self.unary_op("SpecialI1EBackward", out, Save::Input, |g, x| {
            let d = tiny_safe(x, |s| {
                let k = s.sign()?.add(&s.reciprocal()?)?;
                s.special_i0e()?.sub(&s.special_i1e()?.mul(&k)?)
            })?;
            g.mul(&d)
        })
    }

    /// `torch.sinc` ([`Tensor::sinc`]); the input is saved.
    pub fn sinc(&self) -> Result<Var> {
        let out = self.data().sinc()?;
        self.unary_op("SincBackward", out, Save::Input, |g, x| {
            let pi = std::f64::consts::PI;
            let xp = x.mul(pi)?;
            let sq = x.mul(x)?.mul(pi)?;
            let d = g.mul(&xp.mul(&xp.cos()?)?.sub(&xp.sin()?)?)?.div(&sq)?;
            Tensor::where_cond(&sq.eq(0.0)?, 0.0, &d)
        })
    }

    /// `torch.special.entr` ([`Tensor::special_entr`]); the input is saved.
    pub fn special_entr(&self) -> Result<Var> {
        let out = self.data().special_entr()?;
        self.unary_op("SpecialEntrBackward", out, Save::Input, |g, x| {
            g.mul(&x.log()?.add(1.0)?.neg()?)
        })
    }

    /// `torch.special.ndtr` ([`Tensor::special_ndtr`]); the input is saved.
    pub fn special_ndtr(&self) -> Result<Var> {
        let out = self.data().special_ndtr()?;
        self.unary_op("SpecialNdtrBackward", out, Save::Input, |g, x| {
            g.mul(&x.mul(x)?.mul(-0.5)?.exp()?.div(SQRT_2PI)?)
        })
    }

    /// `torch.special.ndtri` ([`Tensor::special_ndtri`]); the result is saved.
    pub fn special_ndtri(&self) -> Result<Var> {
        let out = self.data().special_ndtri()?;
        self.unary_op("SpecialNdtriBackward", out, Save::Output, |g, y| {
            g.mul(SQRT_2PI)?.mul(&y.mul(y)?.div(2.0)?.exp()?)
        })
    }

    /// `torch.special.log_ndtr` ([`Tensor::special_log_ndtr`]); the input
    /// and the result are saved.
    pub fn special_log_ndtr(&self) -> Result<Var> {
        let out = self.data().special_log_ndtr()?;
        let y = out.clone();
        self.unary_op("SpecialLogNdtrBackward", out, Save::Input, move |g, x| {
            let e = y.add(&x.mul(x)?.div(2.0)?)?.neg()?.exp()?;
            g.div(SQRT_2PI)?.mul(&e)
        })
    }

    /// `torch.special.erfcx` ([`Tensor::special_erfcx`]); the input and the
    /// result are saved.
    pub fn special_erfcx(&self) -> Result<Var> {
        let out = self.data().special_erfcx()?;
        let y = out.clone();
        self.unary_op("SpecialErfcxBackward", out, Save::Input, move |g, x| {
            let two_over_sqrt_pi = std::f64::consts::FRAC_2_SQRT_PI;
            x.mul(2.0)?.mul(&y)?.sub(two_over_sqrt_pi)?.mul(g)
        })
    }

    /// `torch.logit(self, eps)` ([`Tensor::logit`]); the input is saved.
    pub fn logit(&self, eps: Option<f64>) -> Result<Var> {
        let out = self.data().logit(eps)?;
        self.unary_op("LogitBackward", out, Save::Input, move |g, x| {
            let edge = x.eq(0.0)?.logical_or(&x.eq(1.0)?)?;
            let inner = Tensor::where_cond(
                &edge,
                &g.mul(f64::INFINITY)?,
                &g.div(&x.mul(&x.neg()?.add(1.0)?)?)?,
            )?;
            match eps.filter(|&e| e >= 0.0) {
                None => {
                    let out = x.lt(0.0)?.logical_or(&x.gt(1.0)?)?;
                    Tensor::where_cond(&out, f64::NAN, &inner)
                }
                Some(e) => {
                    let out = x.lt(e)?.logical_or(&x.gt(1.0 - e)?)?;
                    Tensor::where_cond(&out, 0.0, &inner)
                }
            }
        })
    }

    /// `torch.special.xlog1py` ([`Tensor::xlog1py`]); both operands are saved.
    pub fn xlog1py(&self, other: &Var) -> Result<Var> {
        let out = self.data().xlog1py(other.data())?;
        record_pair("SpecialXlog1PyBackward", out, self, other, |g, x, y, n| {
            let gx = if n[0] {
                let masked = x.eq(0)?.logical_and(&y.le(-1)?)?;
                Some(Tensor::where_cond(&masked, 0.0, &g.xlog1py(y)?)?)
            } else {
                None
            };
            let gy = n[1].then(|| g.mul(x)?.div(&y.add(1)?)).transpose()?;
            Ok([gx, gy])
        })
    }

    /// `torch.special.xlog1py`, the same as [`Var::xlog1py`].
    pub fn special_xlog1py(&self, other: &Var) -> Result<Var> {
        self.xlog1py(other)
    }

    /// `torch.hypot` ([`Tensor::hypot`]); both operands and the result are
    /// saved.
    pub fn hypot(&self, other: &Var) -> Result<Var> {
        let out = self.data().hypot(other.data())?;
        let r = out.clone();
        record_pair("HypotBackward", out, self, other, move |g, x, y, n| {
            let gx = n[0].then(|| g.mul(x)?.div(&r)).transpose()?;
            let gy = n[1].then(|| g.mul(y)?.div(&r)).transpose()?;
            Ok([gx, gy])
        })
    }

    /// `torch.copysign` of two tensors ([`Tensor::copysign`]): `g r / x`
    /// (0 where `x == 0`) for self, 0 for `other`.
    pub fn copysign(&self, other: &Var) -> Result<Var> {
        let out = self.data().copysign(other.data())?;
        let r = out.clone();
        record_pair("CopysignBackward0", out, self, other, move |g, x, y, n| {
            let gx = if n[0] {
                let ratio = Tensor::where_cond(&x.eq(0)?, 0.0, &r.div(x)?)?;
                Some(g.mul(&ratio)?)
            } else {
                None
            };
            let gy = n[1].then(|| y.zeros_like(Some(g.dtype()))).transpose()?;
            Ok([gx, gy])
        })
    }

    /// `torch.fmax` ([`Tensor::fmax`]): the gradient goes to the operand
    /// chosen, half to each where they are equal; to `self` where `other`
    /// is NaN, to `other` where only `self` is (PyTorch 2.15's).
    pub fn fmax(&self, other: &Var) -> Result<Var> {
        let out = self.data().fmax(other.data())?;
        record_pair("FmaxBackward0", out, self, other, |g, x, y, n| {
            extreme_grads(g, x, y, n, &x.gt(y)?, &y.gt(x)?)
        })
    }

    /// `torch.fmin` ([`Tensor::fmin`]): as [`Var::fmax`], for the smaller.
    pub fn fmin(&self, other: &Var) -> Result<Var> {
        let out = self.data().fmin(other.data())?;
        record_pair("FminBackward0", out, self, other, |g, x, y, n| {
            extreme_grads(g, x, y, n, &x.lt(y)?, &y.lt(x)?)
        })
    }

    /// `torch.rad2deg` ([`Tensor::rad2deg`]): `g 180 / pi`.
    pub fn rad2deg(&self) -> Result<Var> {
        let out = self.data().rad2deg()?;
        self.unary_op("Rad2DegBackward", out, Save::Nothing, |g, _| {
            g.mul(180.0 / std::f64::consts::PI)
        })
    }

    /// `torch.deg2rad` ([`Tensor::deg2rad`]): `g pi / 180`.
    pub fn deg2rad(&self) -> Result<Var> {
        let out = self.data().deg2rad()?;
        self.unary_op("Deg2RadBackward", out, Save::Nothing, |g, _| {
            g.mul(std::f64::consts::PI / 180.0)
        })
    }

    /// `torch.angle` of a real tensor ([`Tensor::angle`]): gradient 0.
    pub fn angle(&self) -> Result<Var> {
        let out = self.data().angle()?;
        self.unary_op("AngleBackward", out, Save::Nothing, |g, _| {
            g.zeros_like(None)
        })
    }

    /// `torch.positive` ([`Tensor::positive`]): the gradient passes.
    pub fn positive(&self) -> Result<Var> {
        let out = self.data().positive()?;
        self.unary_op("PositiveBackward", out, Save::Nothing, |g, _| Ok(g.clone()))
    }

    /// `torch.ldexp(self, other)` ([`Tensor::ldexp`]): `self * 2^other`,
    /// recorded as PyTorch's composition (`other` takes no gradient here: it is usually an
    /// integer tensor, and `2^other`'s gradient is `pow`'s).
    pub fn ldexp(&self, other: &Tensor) -> Result<Var> {
        let d = strata_tensor::ldexp_dtype(self.data(), other);
        let prod = self.mul(&Var::new(Tensor::scalar_pow(2.0, other)?))?;
        if prod.dtype() == d {
            Ok(prod)
        } else {
            prod.to_dtype(d)
        }
    }

    /// `torch.float_power(self, exponent)`: both in f64, then `pow`.
    pub fn float_power(&self, exponent: &Var) -> Result<Var> {
        self.to_dtype(DType::F64)?
            .pow(&exponent.to_dtype(DType::F64)?)
    }

    /// `torch.true_divide`, the same as `div`.
    pub fn true_divide(&self, other: &Var) -> Result<Var> {
        self.div(other)
    }
}
