//! Stochastic gradient descent with momentum (PyTorch's `SGD`, no dampening,
//! no Nesterov): `buf = momentum * buf + g; p -= lr * buf`.

use super::{check_non_negative, Optimizer};
use crate::error::Result;
use crate::var::Var;
use strata_tensor::Tensor;

/// SGD with optional momentum and weight decay.
pub struct Sgd {
    params: Vec<Var>,
    lr: f64,
    momentum: f64,
    weight_decay: f64,
    /// One momentum buffer per parameter, created at its first step.
    buffers: Vec<Option<Tensor>>,
}

impl Sgd {
    /// SGD over `params` with learning rate `lr` and `momentum` (0 for plain SGD).
    pub fn new(params: Vec<Var>, lr: f64, momentum: f64) -> Result<Sgd> {
        check_non_negative("SGD", "learning rate", lr)?;
        check_non_negative("SGD", "momentum", momentum)?;
        super::check_distinct("SGD", &params)?;
        let buffers = vec![None; params.len()];
        Ok(Sgd {
            params,
            lr,
            momentum,
            weight_decay: 0.0,
            buffers,
        })
    }

    /// Adds `weight_decay * p` to each gradient before the update.
    pub fn with_weight_decay(mut self, weight_decay: f64) -> Result<Sgd> {
        check_non_negative("SGD", "weight decay", weight_decay)?;
        self.weight_decay = weight_decay;
        Ok(self)
    }

    /// Bytes held by the momentum buffers.
    pub fn state_bytes(&self) -> usize {
        self.buffers
            .iter()
            .flatten()
            .map(|b| b.numel() * b.dtype().size())
            .sum()
    }
}

impl Optimizer for Sgd {
    fn params(&self) -> &[Var] {
        &self.params
    }

    fn step(&mut self) -> Result<()> {
        super::check_step("SGD", &self.params, false)?;
        for (p, buf) in self.params.iter().zip(self.buffers.iter_mut()) {
            let Some(g) = p.grad() else { continue };
            let g = if self.weight_decay != 0.0 {
                g.add(&p.data().mul(self.weight_decay)?)?
            } else {
                g
            };
            let d = if self.momentum != 0.0 {
                match buf {
                    Some(b) => {
                        b.mul_(self.momentum)?.add_(&g)?;
                        b.clone()
                    }
                    None => {
                        let b = g.deep_clone()?;
                        *buf = Some(b.clone());
                        b
                    }
                }
            } else {
                g
            };
            p.data().sub_(&d.mul(self.lr)?)?;
        }
        Ok(())
    }
}
