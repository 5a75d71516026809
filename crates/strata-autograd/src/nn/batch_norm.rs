//! `BatchNorm1d`, `BatchNorm2d` and `BatchNorm3d`: batch normalisation
//! layers with running statistics (buffers), as PyTorch's (see
//! [`Var::batch_norm`] for the computation).

use super::{join, visit_weight_bias, visit_weight_bias_mut, Module};
use crate::error::{AutogradError, Result};
use crate::var::Var;
use strata_tensor::{DType, Device, Tensor};

/// Declares a batch norm layer over inputs of the ranks `$ranks`.
macro_rules! batch_norm_layer {
    ($name:ident, $ranks:expr, $ranks_text:literal, $example:literal) => {
        #[doc = concat!("A batch normalisation layer (PyTorch's `nn.", stringify!($name), "`) over ", $ranks_text, " inputs `[N, C, ...]`: in training mode each channel is normalised by the batch's statistics and the running statistics are updated (`momentum`, or a cumulative average where it is `None`); in evaluation mode by the running statistics. With `affine`, a weight (1) and bias (0) per channel are parameters; with `track_running_stats`, `running_mean` (0), `running_var` (1) and `num_batches_tracked` (0, i64) are buffers.")]
        ///
        /// ```
        /// use strata_autograd::nn::{Module, self};
        /// use strata_autograd::Var;
        /// use strata_tensor::{DType, Device, Tensor};
        #[doc = concat!("let mut bn = nn::", stringify!($name), "::new(3, 1e-5, Some(0.1), true, true, Device::Cpu)?;")]
        /// let names: Vec<String> = bn.named_buffers().into_iter().map(|b| b.0).collect();
        /// assert_eq!(names, ["running_mean", "running_var", "num_batches_tracked"]);
        #[doc = concat!("let x = Var::new(Tensor::randn(&", $example, ", DType::F32, 1, Device::Cpu)?);")]
        /// bn.forward(&x)?;
        /// assert_eq!(bn.num_batches_tracked.item::<i64>()?, 1);
        /// bn.eval();
        /// assert_eq!(bn.forward(&x)?.shape(), x.shape());
        /// # Ok::<(), strata_autograd::AutogradError>(())
        /// ```
        pub struct $name {
            /// Per-channel scale, if the layer is affine.
            pub weight: Option<Var>,
            /// Per-channel shift, if the layer is affine.
            pub bias: Option<Var>,
            /// The running mean (a buffer), if tracked.
            pub running_mean: Option<Tensor>,
            /// The running (unbiased) variance (a buffer), if tracked.
            pub running_var: Option<Tensor>,
            /// Batches seen in training (a 0-d i64 buffer; 0 if untracked).
            pub num_batches_tracked: Tensor,
            /// The running statistics' update factor; `None`: a cumulative
            /// average (`1 / num_batches_tracked`).
            pub momentum: Option<f64>,
            /// Added to the variance.
            pub eps: f64,
            training: bool,
        }

        impl $name {
            /// A layer over `num_features` channels, f32 on `device`.
            pub fn new(
                num_features: usize,
                eps: f64,
                momentum: Option<f64>,
                affine: bool,
                track_running_stats: bool,
                device: Device,
            ) -> Result<$name> {
                let c = [num_features];
                let param = |t: Tensor| Var::parameter(t);
                Ok($name {
                    weight: affine
                        .then(|| Tensor::ones(&c, DType::F32, device))
                        .transpose()?
                        .map(param)
                        .transpose()?,
                    bias: affine
                        .then(|| Tensor::zeros(&c, DType::F32, device))
                        .transpose()?
                        .map(param)
                        .transpose()?,
                    running_mean: track_running_stats
                        .then(|| Tensor::zeros(&c, DType::F32, device))
                        .transpose()?,
                    running_var: track_running_stats
                        .then(|| Tensor::ones(&c, DType::F32, device))
                        .transpose()?,
                    num_batches_tracked: Tensor::zeros(&[], DType::I64, device)?,
                    momentum,
                    eps,
                    training: true,
                })
            }

            /// The normalised `x`.
            pub fn forward(&self, x: &Var) -> Result<Var> {
                let ranks: &[usize] = &$ranks;
                if !ranks.contains(&x.ndim()) {
                    return Err(AutogradError::Module {
                        module: stringify!($name),
                        msg: format!(
                            "expected a {} input, got shape {:?}",
                            $ranks_text,
                            x.shape()
                        ),
                    });
                }
                let tracked = self.running_mean.is_some();
                let counting = self.training && tracked;
                // The batch counts in the cumulative average's factor
                // (PyTorch counts it first); the counter moves only once the
                // batch is normalised, so a refused input changes nothing.
                let n = self.num_batches_tracked.item::<i64>()? + 1;
                let factor = match self.momentum {
                    Some(m) => m,
                    None if counting => 1.0 / n as f64,
                    None => 0.0,
                };
                // Batch statistics in training, or where none are tracked.
                let use_batch = self.training || !tracked;
                let (rm, rv) = if !self.training || tracked {
                    (self.running_mean.as_ref(), self.running_var.as_ref())
                } else {
                    (None, None)
                };
                let y = x.batch_norm(
                    rm,
                    rv,
                    self.weight.as_ref(),
                    self.bias.as_ref(),
                    use_batch,
                    factor,
                    self.eps,
                )?;
                if counting {
                    self.num_batches_tracked.fill_(n)?;
                }
                Ok(y)
            }
        }

        impl Module for $name {
            fn visit(&self, prefix: &str, f: &mut dyn FnMut(String, &Var)) {
                if let Some(w) = &self.weight {
                    visit_weight_bias(prefix, w, self.bias.as_ref(), f);
                }
            }

            fn visit_mut(
                &mut self,
                prefix: &str,
                f: &mut dyn FnMut(String, &mut Var) -> Result<()>,
            ) -> Result<()> {
                match &mut self.weight {
                    Some(w) => visit_weight_bias_mut(prefix, w, self.bias.as_mut(), f),
                    None => Ok(()),
                }
            }

            fn visit_buffers(&self, prefix: &str, f: &mut dyn FnMut(String, &Tensor)) {
                if let (Some(m), Some(v)) = (&self.running_mean, &self.running_var) {
                    f(join(prefix, "running_mean"), m);
                    f(join(prefix, "running_var"), v);
                    f(join(prefix, "num_batches_tracked"), &self.num_batches_tracked);
                }
            }

            fn visit_buffers_mut(
                &mut self,
                prefix: &str,
                f: &mut dyn FnMut(String, &mut Tensor) -> Result<()>,
            ) -> Result<()> {
                if let (Some(m), Some(v)) = (&mut self.running_mean, &mut self.running_var) {
                    f(join(prefix, "running_mean"), m)?;
                    f(join(prefix, "running_var"), v)?;
                    f(join(prefix, "num_batches_tracked"), &mut self.num_batches_tracked)?;
                }
                Ok(())
            }

            fn set_training(&mut self, training: bool) {
                self.training = training;
            }

            fn is_training(&self) -> bool {
                self.training
            }
        }
    };
}

batch_norm_layer!(BatchNorm1d, [2, 3], "2-D or 3-D", "[4, 3]");
batch_norm_layer!(BatchNorm2d, [4], "4-D", "[2, 3, 4, 4]");
batch_norm_layer!(BatchNorm3d, [5], "5-D", "[2, 3, 2, 2, 2]");
