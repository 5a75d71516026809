//! `linear`: `x W^T + b` (PyTorch's `F.linear`), the layer every model is
//! made of. The leading dims of `x` are folded into one before the product,
//! so the weight's gradient is one matrix product (not one per batch entry
//! summed afterwards).
//!
//! `gelu_linear` is `linear(gelu(x))` as one recorded op that keeps only
//! the GELU's input (which the GELU keeps anyway) and recomputes the GELU's
//! output in backward, so the MLP's hidden activation is kept once instead
//! of twice (the op-by-op graph keeps the GELU's input for the GELU and its
//! output for the second Linear: 100 MB each per GPT-2 layer at 8 × 1024
//! tokens in f32).

use super::{formula, sum_to};
use crate::error::{AutogradError, Result};
use crate::var::{record, Var};
use strata_tensor::{DType, GeluApprox, Tensor, TensorError};

/// The number of rows `shape`'s leading dims (all but the last) fold into.
/// Reshaping to `[rows, last]` names it instead of inferring it with `-1`,
/// which is ambiguous for a size-0 last dim (`[-1, 0]` of 0 elements).
fn rows_of(op: &'static str, shape: &[usize]) -> Result<i64> {
    shape[..shape.len().saturating_sub(1)]
        .iter()
        .try_fold(1i64, |acc, &d| acc.checked_mul(i64::try_from(d).ok()?))
        .ok_or_else(|| {
            AutogradError::Tensor(TensorError::SizeOverflow {
                op,
                msg: format!("the leading dims of {shape:?} hold more than i64::MAX rows"),
            })
        })
}

/// Checks `linear`'s operand shapes (the weight `[out, in]` with `in` the
/// input's last dim, the bias `[out]`; or, without a bias, the weight
/// `[in]`, as `F.linear` takes it: the product with a vector).
fn check_linear(op: &'static str, x: &Var, weight: &Var, bias: Option<&Var>) -> Result<()> {
    let in_dim = x.ndim().checked_sub(1).map(|d| x.shape()[d]);
    let shape_ok = match weight.ndim() {
        2 => {
            in_dim == Some(weight.shape()[1])
                && bias.is_none_or(|b| b.shape() == [weight.shape()[0]])
        }
        1 => in_dim == Some(weight.shape()[0]) && bias.is_none(),
        _ => false,
    };
    if shape_ok {
        return Ok(());
    }
    Err(AutogradError::Module {
        module: op,
        msg: format!(
            "input {:?}, weight {:?} and bias {:?} do not fit: the weight must be \
             [out, in] with `in` the input's last dim, and the bias [out] (or, without a \
             bias, the weight [in])",
            x.shape(),
            weight.shape(),
            bias.map(|b| b.shape().to_vec())
        ),
    })
}

/// Refuses a bias whose dtype is not the weight's (after autocast, if any,
/// cast them): PyTorch's `F.linear` adds the bias inside `addmm`, which
/// refuses it ("self and mat2 must have the same dtype, but got Double and
/// Float"), also in an autocast region (an f64 bias is not cast). strata
/// added such a bias after the product, promoting the result.
fn check_bias_dtype(op: &'static str, weight: &Var, bias: Option<&Var>) -> Result<()> {
    match bias {
        Some(b) if b.dtype() != weight.dtype() => Err(TensorError::DType {
            op,
            msg: format!(
                "the bias is {} but the weight is {}; they must match (PyTorch's F.linear \
                 refuses it too): convert the bias with to_dtype",
                b.dtype(),
                weight.dtype()
            ),
        }
        .into()),
        _ => Ok(()),
    }
}

impl Var {
    /// `self @ weight^T + bias` for `self` of shape `[..., in]`, `weight`
    /// `[out, in]` and `bias` `[out]`; the result is `[..., out]`. As
    /// PyTorch's `F.linear`, a weight `[in]` without a bias gives the
    /// product with that vector, `[...]`. Under autocast all three are cast
    /// to the region's low precision.
    pub fn linear(&self, weight: &Var, bias: Option<&Var>) -> Result<Var> {
        check_linear("linear", self, weight, bias)?;
        let mut ins = vec![self, weight];
        ins.extend(bias);
        if let Some(c) = crate::autocast::cast_inputs("linear", &ins)? {
            return c[0].linear_uncast(&c[1], c.get(2));
        }
        self.linear_uncast(weight, bias)
    }

    fn linear_uncast(&self, weight: &Var, bias: Option<&Var>) -> Result<Var> {
        check_bias_dtype("linear", weight, bias)?;
        if weight.ndim() == 1 {
            // `F.linear` with a weight `[in]` (no bias, checked): the
            // product with a vector, of shape `[...]`.
            return self.matmul_uncast(weight);
        }
        let (in_f, out_f) = (weight.shape()[1] as i64, weight.shape()[0] as i64);
        let lead: Vec<i64> = self.shape()[..self.ndim() - 1]
            .iter()
            .map(|&d| d as i64)
            .collect();
        let x2 = if self.ndim() == 2 {
            self.clone()
        } else {
            self.reshape(&[rows_of("linear", self.shape())?, in_f])?
        };
        // With a bias (of the weight's dtype, checked), `addmm` (one
        // rounding, as PyTorch's `F.linear`); an input of another dtype
        // than the weight's is the product's dtype error.
        let y = match bias {
            Some(b) if x2.dtype() == weight.dtype() => b.addmm_uncast(&x2, &weight.t()?)?,
            Some(b) => x2.matmul_uncast(&weight.t()?)?.add(b)?,
            None => x2.matmul_uncast(&weight.t()?)?,
        };
        if self.ndim() == 2 {
            return Ok(y);
        }
        let mut out_shape = lead;
        out_shape.push(out_f);
        y.reshape(&out_shape)
    }
}

impl Var {
    /// `linear(gelu(self, approximate), weight, bias)` (an MLP's second
    /// layer after its activation) as one recorded op: the same values as
    /// `self.gelu(approximate)?.linear(weight, bias)`, but only `self` (the
    /// GELU's input) and the weight are saved; the GELU's output is
    /// recomputed in backward (one element-wise pass) instead of being kept
    /// next to its input. Under autocast the weight and bias are cast as
    /// `linear`'s and the GELU runs on `self` in `self`'s dtype, its output
    /// cast as `linear` casts its input (PyTorch's autocast graph: `gelu`
    /// has no policy); after a low-precision `fc1` `self` is already in the
    /// region's dtype, and so is the GELU.
    ///
    /// ```
    /// use strata_autograd::Var;
    /// use strata_tensor::{DType, Device, GeluApprox, Tensor};
    /// let x = Var::parameter(Tensor::randn(&[4, 8], DType::F64, 1, Device::Cpu).unwrap()).unwrap();
    /// let w = Var::parameter(Tensor::randn(&[3, 8], DType::F64, 2, Device::Cpu).unwrap()).unwrap();
    /// let y = x.gelu_linear(GeluApprox::Tanh, &w, None).unwrap();
    /// let r = x.gelu(GeluApprox::Tanh).unwrap().linear(&w, None).unwrap();
    /// let (y, r) = (y.to_vec::<f64>().unwrap(), r.to_vec::<f64>().unwrap());
    /// assert!(y.iter().zip(&r).all(|(a, b)| (a - b).abs() < 1e-12));
    /// ```
    pub fn gelu_linear(
        &self,
        approximate: GeluApprox,
        weight: &Var,
        bias: Option<&Var>,
    ) -> Result<Var> {
        check_linear("gelu_linear", self, weight, bias)?;
        if weight.ndim() == 1 {
            // A weight `[in]` (no bias): `linear`'s product with a vector.
            return self.gelu(approximate)?.linear(weight, None);
        }
        let mut ins = vec![self, weight];
        ins.extend(bias);
        if let Some(c) = crate::autocast::cast_inputs("linear", &ins)? {
            // Autocast casts `linear`'s operands, and the GELU's output is
            // the product's input: the GELU runs on `self` in its own dtype
            // (PyTorch's autocast has no policy for `gelu`) and its output
            // is cast as `linear` would cast `self`. Casting `self` first
            // rounded the GELU's input to the region's dtype (seed 340,
            // program 1006: an f32 input in a bf16 region, outputs 1-2 bf16
            // ulps off).
            return self.gelu_linear_uncast(approximate, &c[1], c.get(2), Some(c[0].dtype()));
        }
        self.gelu_linear_uncast(approximate, weight, bias, None)
    }

    /// `h_dtype`: the dtype the GELU's output is cast to before the
    /// product (autocast's), if any.
    fn gelu_linear_uncast(
        &self,
        approximate: GeluApprox,
        weight: &Var,
        bias: Option<&Var>,
        h_dtype: Option<DType>,
    ) -> Result<Var> {
        check_bias_dtype("gelu_linear", weight, bias)?;
        let (in_f, out_f) = (weight.shape()[1], weight.shape()[0]);
        let x_shape = self.shape().to_vec();
        let mut out_shape: Vec<i64> = x_shape[..x_shape.len() - 1]
            .iter()
            .map(|&d| d as i64)
            .collect();
        out_shape.push(out_f as i64);
        let rows = rows_of("gelu_linear", &x_shape)?;
        let x2 = self.data().reshape(&[rows, in_f as i64])?;
        let gelu_of = move |x2: &Tensor| -> strata_tensor::Result<Tensor> {
            let h = x2.gelu(approximate)?;
            match h_dtype {
                Some(d) if d != h.dtype() => h.to_dtype_contiguous(d),
                _ => Ok(h),
            }
        };
        let h = gelu_of(&x2)?;
        let wt = weight.data().t()?;
        // The bias (of the weight's dtype, checked) added in the product's
        // accumulator (`linear`'s rule).
        let y = match bias {
            Some(b) if h.dtype() == wt.dtype() => b.data().addmm(&h, &wt)?,
            Some(b) => h.matmul(&wt)?.add(b.data())?,
            None => h.matmul(&wt)?,
        };
        drop(h);
        let y = y.reshape(&out_shape)?;
        let (x_t, w_t) = (self.data().clone(), weight.data().clone());
        let saved = move || vec![x_t, w_t];
        let (w_shape, w_dtype) = (weight.shape().to_vec(), weight.dtype());
        let b_dtype = bias.map(|b| b.dtype());
        let x_dtype = self.dtype();
        let f = formula(move |g, s, needs| {
            let x2 = s[0].reshape(&[rows, in_f as i64])?;
            let g2 = g.reshape(&[rows, out_f as i64])?;
            let dw = if needs[1] {
                let h = gelu_of(&x2)?;
                Some(sum_to(&g2.t()?.matmul(&h)?, &w_shape, w_dtype)?)
            } else {
                None
            };
            let db = match (needs.get(2), b_dtype) {
                (Some(true), Some(d)) => Some(g2.sum(Some(&[0]), false)?.to_dtype_contiguous(d)?),
                _ => None,
            };
            let dx = if needs[0] {
                let dh = g2.matmul(&s[1].to_dtype_contiguous(g2.dtype())?)?;
                let dx = dh.gelu_backward(&x2, approximate)?;
                Some(sum_to(&dx.reshape(&dims(&x_shape))?, &x_shape, x_dtype)?)
            } else {
                None
            };
            let mut out = vec![dx, dw];
            if b_dtype.is_some() {
                out.push(db);
            }
            Ok(out)
        });
        record(
            "GeluLinearBackward",
            y,
            &[Some(self), Some(weight), bias],
            saved,
            f,
            false,
        )
    }
}

fn dims(shape: &[usize]) -> Vec<i64> {
    shape.iter().map(|&d| d as i64).collect()
}
