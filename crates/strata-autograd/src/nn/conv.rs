//! `Conv1d/2d/3d` and `ConvTranspose1d/2d/3d`: convolution layers with
//! PyTorch's initialisation (see [`Var::conv2d`] and
//! [`Var::conv_transpose2d`] for the computations).

use super::linear::uniform;
use super::{visit_weight_bias, visit_weight_bias_mut, Module};
use crate::error::{AutogradError, Result};
use crate::var::Var;
use strata_tensor::{ConvOptions, Device};

/// Declares a convolution layer with `$d` spatial dims.
macro_rules! conv_layer {
    ($name:ident, $d:literal, $func:ident, $transposed:literal, $example_in:literal, $example_out:literal) => {
        #[doc = concat!("A convolution layer (PyTorch's `nn.", stringify!($name), "`) with ", stringify!($d), " kernel dims: weight `[out_channels, in_channels / groups, kernel...]` (transposed: `[in_channels, out_channels / groups, kernel...]`), optional bias `[out_channels]`, and the stride, padding, dilation, groups (and a transposed layer's output padding) of its [`ConvOptions`].")]
        ///
        /// ```
        /// use strata_autograd::nn::{Module, self};
        /// use strata_autograd::Var;
        /// use strata_tensor::{ConvOptions, DType, Device, Tensor};
        #[doc = concat!("let conv = nn::", stringify!($name), "::new(4, 6, &[3], ConvOptions::new().padding(&[1]), true, Device::Cpu)?;")]
        /// let names: Vec<String> = conv.named_parameters().into_iter().map(|p| p.0).collect();
        /// assert_eq!(names, ["weight", "bias"]);
        #[doc = concat!("let x = Var::new(Tensor::ones(&", $example_in, ", DType::F32, Device::Cpu)?);")]
        #[doc = concat!("assert_eq!(conv.forward(&x)?.shape(), &", $example_out, ");")]
        /// # Ok::<(), strata_autograd::AutogradError>(())
        /// ```
        pub struct $name {
            /// `[out_channels, in_channels / groups, kernel...]`.
            pub weight: Var,
            /// `[out_channels]`, if the layer has a bias.
            pub bias: Option<Var>,
            /// Stride, padding, dilation and groups.
            pub options: ConvOptions,
            training: bool,
        }

        impl $name {
            /// A layer with PyTorch's initialisation, f32 on `device`: the
            /// weight Kaiming-uniform with `a = sqrt(5)`, which is
            /// `Uniform(±1/sqrt(fan_in))` for `fan_in` the weight's dim 1
            /// times `prod(kernel_size)`, and the bias
            /// `Uniform(±1/sqrt(fan_in))`.
            /// `kernel_size` holds one size for every dim or one per dim.
            pub fn new(
                in_channels: usize,
                out_channels: usize,
                kernel_size: &[usize],
                options: ConvOptions,
                bias: bool,
                device: Device,
            ) -> Result<$name> {
                let groups = options.groups;
                let n = kernel_size.len();
                let kernel = if n == 1 {
                    vec![kernel_size[0]; $d]
                } else if n == $d {
                    kernel_size.to_vec()
                } else {
                    return Err(AutogradError::Module {
                        module: stringify!($name),
                        msg: format!(
                            "kernel_size {kernel_size:?} has {n} values; give one, or one for \
                             each of the {} spatial dims",
                            $d
                        ),
                    });
                };
                if groups == 0 || in_channels % groups != 0 || out_channels % groups != 0 {
                    return Err(AutogradError::Module {
                        module: stringify!($name),
                        msg: format!(
                            "in_channels {in_channels} and out_channels {out_channels} must both \
                             divide into groups={groups} (a positive number)"
                        ),
                    });
                }
                let mut shape = if $transposed {
                    vec![in_channels, out_channels / groups]
                } else {
                    vec![out_channels, in_channels / groups]
                };
                shape.extend(&kernel);
                let fan_in: usize = shape[1..].iter().product();
                let bound = if fan_in == 0 {
                    0.0
                } else {
                    1.0 / (fan_in as f64).sqrt()
                };
                let weight = Var::parameter(uniform(&shape, bound, device)?)?;
                let bias = if bias {
                    Some(Var::parameter(uniform(&[out_channels], bound, device)?)?)
                } else {
                    None
                };
                Ok($name {
                    weight,
                    bias,
                    options,
                    training: true,
                })
            }

            /// The convolution of `x` (`[N, C_in, ...]` or `[C_in, ...]`).
            pub fn forward(&self, x: &Var) -> Result<Var> {
                x.$func(&self.weight, self.bias.as_ref(), &self.options)
            }
        }

        impl Module for $name {
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
    };
}

conv_layer!(Conv1d, 1, conv1d, false, "[2, 4, 10]", "[2, 6, 10]");
conv_layer!(Conv2d, 2, conv2d, false, "[2, 4, 5, 5]", "[2, 6, 5, 5]");
conv_layer!(Conv3d, 3, conv3d, false, "[4, 3, 3, 3]", "[6, 3, 3, 3]");
conv_layer!(
    ConvTranspose1d,
    1,
    conv_transpose1d,
    true,
    "[2, 4, 10]",
    "[2, 6, 10]"
);
conv_layer!(
    ConvTranspose2d,
    2,
    conv_transpose2d,
    true,
    "[2, 4, 5, 5]",
    "[2, 6, 5, 5]"
);
conv_layer!(
    ConvTranspose3d,
    3,
    conv_transpose3d,
    true,
    "[4, 3, 3, 3]",
    "[6, 3, 3, 3]"
);
