//! `Linear`: `y = x W^T + b` with PyTorch's initialisation.

use super::{visit_weight_bias, visit_weight_bias_mut, Module};
use crate::error::{AutogradError, Result};
use crate::var::Var;
use strata_tensor::generator::next_seed;
use strata_tensor::{DType, Device, Tensor};

/// A fully connected layer (PyTorch's `nn.Linear`): weight `[out, in]`,
/// optional bias `[out]`.
///
/// ```
/// use strata_autograd::nn::{Linear, Module};
/// use strata_autograd::Var;
/// use strata_tensor::{DType, Device, Tensor};
/// let lin = Linear::new(4, 3, true, Device::Cpu).unwrap();
/// let names: Vec<String> = lin.named_parameters().into_iter().map(|p| p.0).collect();
/// assert_eq!(names, ["weight", "bias"]);
/// let y = lin.forward(&Var::new(Tensor::ones(&[2, 5, 4], DType::F32, Device::Cpu).unwrap())).unwrap();
/// assert_eq!(y.shape(), &[2, 5, 3]);
/// ```
pub struct Linear {
    /// `[out_features, in_features]`.
    pub weight: Var,
    /// `[out_features]`, if the layer has a bias.
    pub bias: Option<Var>,
    training: bool,
}

/// `Uniform(-bound, bound)` of `shape` in f32, from the default generator.
pub(crate) fn uniform(shape: &[usize], bound: f64, device: Device) -> Result<Tensor> {
    let u = Tensor::rand(shape, DType::F32, next_seed(), device)?;
    Ok(u.mul_(2.0 * bound)?.sub_(bound)?)
}

impl Linear {
    /// A layer with PyTorch's initialisation, f32 on `device`: the weight
    /// Kaiming-uniform with `a = sqrt(5)`, which is `Uniform(±1/sqrt(in))`,
    /// and the bias `Uniform(±1/sqrt(in))`.
    ///
    /// Either size may be 0, as in PyTorch: the weight is then empty, and
    /// with `in_features = 0` the bias is zeros (PyTorch's bound is 0 for a
    /// fan-in of 0), so the layer maps every input to its bias.
    pub fn new(
        in_features: usize,
        out_features: usize,
        bias: bool,
        device: Device,
    ) -> Result<Linear> {
        let bound = if in_features == 0 {
            0.0
        } else {
            1.0 / (in_features as f64).sqrt()
        };
        let weight = Var::parameter(uniform(&[out_features, in_features], bound, device)?)?;
        let bias = if bias {
            Some(Var::parameter(uniform(&[out_features], bound, device)?)?)
        } else {
            None
        };
        Ok(Linear {
            weight,
            bias,
            training: true,
        })
    }

    /// A layer from given tensors (weight `[out, in]`, bias `[out]`), made parameters.
    pub fn from_tensors(weight: Tensor, bias: Option<Tensor>) -> Result<Linear> {
        let ok = weight.ndim() == 2
            && bias
                .as_ref()
                .is_none_or(|b| b.shape() == [weight.shape()[0]]);
        if !ok {
            return Err(AutogradError::Module {
                module: "Linear",
                msg: format!(
                    "weight {:?} and bias {:?}: the weight must be [out, in] and the bias [out]",
                    weight.shape(),
                    bias.as_ref().map(|b| b.shape().to_vec())
                ),
            });
        }
        if let Some(b) = &bias {
            if b.dtype() != weight.dtype() || b.device() != weight.device() {
                return Err(AutogradError::Module {
                    module: "Linear",
                    msg: format!(
                        "the bias is {} on {} but the weight is {} on {}; convert the bias \
                         (`to_dtype`, `to`) to match the weight",
                        b.dtype(),
                        b.device(),
                        weight.dtype(),
                        weight.device()
                    ),
                });
            }
        }
        Ok(Linear {
            weight: Var::parameter(weight)?,
            bias: bias.map(Var::parameter).transpose()?,
            training: true,
        })
    }

    /// `in_features`.
    pub fn in_features(&self) -> usize {
        self.weight.shape()[1]
    }

    /// `out_features`.
    pub fn out_features(&self) -> usize {
        self.weight.shape()[0]
    }

    /// `x W^T + b` for `x` of shape `[..., in_features]`.
    pub fn forward(&self, x: &Var) -> Result<Var> {
        x.linear(&self.weight, self.bias.as_ref())
    }
}

impl Module for Linear {
    fn visit(&self, prefix: &str, f: &mut dyn FnMut(String, &Var)) {
        visit_weight_bias(prefix, &self.weight, self.bias.as_ref(), f);
    }

    fn visit_mut(
        &mut self,
        prefix: &str,
        f: &mut dyn FnMut(String, &mut Var) -> Result<()>,
    ) -> Result<()> {
        visit_weight_bias_mut(prefix, &mut self.weight, self.bias.as_mut(), f)
    }

    fn set_training(&mut self, training: bool) {
        self.training = training;
    }

    fn is_training(&self) -> bool {
        self.training
    }
}
