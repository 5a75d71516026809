//! `linear`: `x W^T + b` (PyTorch's `F.linear`), the layer every model is
//! made of. The leading dims of `x` are folded into one before the product,
//! so the weight's gradient is one matrix product (not one per batch entry
//! summed afterwards).

use crate::error::{AutogradError, Result};
use crate::var::Var;

impl Var {
    /// `self @ weight^T + bias` for `self` of shape `[..., in]`, `weight`
    /// `[out, in]` and `bias` `[out]`; the result is `[..., out]`. Under
    /// autocast all three are cast to the region's low precision.
    pub fn linear(&self, weight: &Var, bias: Option<&Var>) -> Result<Var> {
        let shape_ok = weight.ndim() == 2
            && self.ndim() >= 1
            && self.shape()[self.ndim() - 1] == weight.shape()[1]
            && bias.is_none_or(|b| b.shape() == [weight.shape()[0]]);
        if !shape_ok {
            return Err(AutogradError::Module {
                module: "linear",
                msg: format!(
                    "input {:?}, weight {:?} and bias {:?} do not fit: the weight must be \
                     [out, in] with `in` the input's last dim, and the bias [out]",
                    self.shape(),
                    weight.shape(),
                    bias.map(|b| b.shape().to_vec())
                ),
            });
        }
        let mut ins = vec![self, weight];
        ins.extend(bias);
        if let Some(c) = crate::autocast::cast_inputs("linear", &ins)? {
            return c[0].linear_uncast(&c[1], c.get(2));
        }
        self.linear_uncast(weight, bias)
    }

    fn linear_uncast(&self, weight: &Var, bias: Option<&Var>) -> Result<Var> {
        let (in_f, out_f) = (weight.shape()[1] as i64, weight.shape()[0] as i64);
        let lead: Vec<i64> = self.shape()[..self.ndim() - 1]
            .iter()
            .map(|&d| d as i64)
            .collect();
        let x2 = if self.ndim() == 2 {
            self.clone()
        } else {
            self.reshape(&[-1, in_f])?
        };
        let mut y = x2.matmul_uncast(&weight.t()?)?;
        if let Some(b) = bias {
            y = y.add(b)?;
        }
        if self.ndim() == 2 {
            return Ok(y);
        }
        let mut out_shape = lead;
        out_shape.push(out_f);
        y.reshape(&out_shape)
    }
}
