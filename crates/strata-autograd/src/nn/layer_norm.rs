//! `LayerNorm` over the last dims, with learnable weight and bias.

use super::{join, Module};
use crate::error::{AutogradError, Result};
use crate::var::Var;
use strata_tensor::{DType, Device, Tensor};

/// PyTorch's `nn.LayerNorm(normalized_shape, eps, elementwise_affine=True)`:
/// weight 1 and bias 0 at creation, f32.
pub struct LayerNorm {
    /// The normalised trailing shape.
    pub normalized_shape: Vec<usize>,
    /// Added to the variance.
    pub eps: f64,
    /// Scale, of `normalized_shape`.
    pub weight: Var,
    /// Shift, of `normalized_shape`.
    pub bias: Var,
    training: bool,
}

impl LayerNorm {
    /// A layer norm over the trailing `normalized_shape` (at least one dim;
    /// sizes of 0 are allowed, as in PyTorch: the output is empty). Any
    /// `eps` is taken, as `nn.LayerNorm` takes it (a negative or NaN one
    /// gives NaN rows where `var + eps` is not positive, as there).
    pub fn new(normalized_shape: &[usize], eps: f64, device: Device) -> Result<LayerNorm> {
        if normalized_shape.is_empty() {
            return Err(AutogradError::Module {
                module: "LayerNorm",
                msg: format!(
                    "normalized_shape {normalized_shape:?} must have at least one dim \
                     (the trailing dims to normalise, e.g. [hidden_size])"
                ),
            });
        }
        Ok(LayerNorm {
            normalized_shape: normalized_shape.to_vec(),
            eps,
            weight: Var::parameter(Tensor::ones(normalized_shape, DType::F32, device)?)?,
            bias: Var::parameter(Tensor::zeros(normalized_shape, DType::F32, device)?)?,
            training: true,
        })
    }

    /// The normalised `x` (its trailing dims must be `normalized_shape`).
    pub fn forward(&self, x: &Var) -> Result<Var> {
        x.layer_norm(
            &self.normalized_shape,
            Some(&self.weight),
            Some(&self.bias),
            self.eps,
        )
    }
}

impl Module for LayerNorm {
    fn visit(&self, prefix: &str, f: &mut dyn FnMut(String, &Var)) {
        f(join(prefix, "weight"), &self.weight);
        f(join(prefix, "bias"), &self.bias);
    }

    fn visit_mut(
        &mut self,
        prefix: &str,
        f: &mut dyn FnMut(String, &mut Var) -> Result<()>,
    ) -> Result<()> {
        f(join(prefix, "weight"), &mut self.weight)?;
        f(join(prefix, "bias"), &mut self.bias)
    }

    fn set_training(&mut self, training: bool) {
        self.training = training;
    }

    fn is_training(&self) -> bool {
        self.training
    }
}
