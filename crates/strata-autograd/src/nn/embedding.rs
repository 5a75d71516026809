//! `Embedding`: a lookup table of vectors.

use super::{join, Module};
use crate::error::{AutogradError, Result};
use crate::var::Var;
use strata_tensor::generator::next_seed;
use strata_tensor::{DType, Device, Tensor};

/// PyTorch's `nn.Embedding(num_embeddings, embedding_dim)`: weight
/// `[num, dim]` drawn from N(0, 1) at creation (PyTorch's default), f32.
pub struct Embedding {
    /// `[num_embeddings, embedding_dim]`.
    pub weight: Var,
    training: bool,
}

impl Embedding {
    /// A table of `num` vectors of `dim` elements, N(0, 1) from the default
    /// generator. Either size may be 0, as in PyTorch (an empty table; with
    /// `num = 0` every index is out of range).
    pub fn new(num: usize, dim: usize, device: Device) -> Result<Embedding> {
        let w = Tensor::randn(&[num, dim], DType::F32, next_seed(), device)?;
        Embedding::from_tensor(w)
    }

    /// A table from a given `[num, dim]` tensor, made a parameter.
    pub fn from_tensor(weight: Tensor) -> Result<Embedding> {
        if weight.ndim() != 2 {
            return Err(AutogradError::Module {
                module: "Embedding",
                msg: format!("the weight must be [num, dim], not {:?}", weight.shape()),
            });
        }
        Ok(Embedding {
            weight: Var::parameter(weight)?,
            training: true,
        })
    }

    /// The rows of the table at `indices` (an integer tensor of any shape):
    /// shape `[..indices, dim]`.
    pub fn forward(&self, indices: &Tensor) -> Result<Var> {
        self.weight.embedding(indices, None)
    }
}

impl Module for Embedding {
    fn visit(&self, prefix: &str, f: &mut dyn FnMut(String, &Var)) {
        f(join(prefix, "weight"), &self.weight);
    }

    fn visit_mut(
        &mut self,
        prefix: &str,
        f: &mut dyn FnMut(String, &mut Var) -> Result<()>,
    ) -> Result<()> {
        f(join(prefix, "weight"), &mut self.weight)
    }

    fn set_training(&mut self, training: bool) {
        self.training = training;
    }

    fn is_training(&self) -> bool {
        self.training
    }
}
