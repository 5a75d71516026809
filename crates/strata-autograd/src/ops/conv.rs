//! Session 75: convolution and pooling on variables. The compositions are
//! strata-tensor's (`ConvPlan::convolve`, `PoolPlan::average`,
//! `adaptive_average`), written once over its `Composite` ops; `Var`
//! implements those ops by recording them (`ops::composite`), so the same code
//! computes the `Tensor` forms and differentiates the `Var` forms. The
//! fused window ops (session 76) are recorded with their fused adjoints:
//! the columns' backward adds them back (`window_columns_sum`), average
//! pooling's is `window_means_backward`, and max pooling (the values the
//! `Tensor` form finds) sends each window's gradient to the element its
//! index names (`window_max_backward`), as PyTorch's.

use super::formula;
use crate::error::Result;
use crate::var::{record, Var};
use strata_tensor::{
    adaptive_pool, convolution, interpolate_plan, pixel_shuffle_of, pool_plan, with_batch,
    without_batch, ConvKind, ConvOptions, FoldOptions, InterpolateOptions, PoolKind, PoolOptions,
    Tensor,
};

impl Var {
    fn convolution_nd(
        &self,
        op: &'static str,
        kind: ConvKind,
        spatial: usize,
        weight: &Var,
        bias: Option<&Var>,
        opts: &ConvOptions,
    ) -> Result<Var> {
        let inputs: Vec<&Var> = [Some(self), Some(weight), bias]
            .into_iter()
            .flatten()
            .collect();
        if let Some(c) = crate::autocast::cast_inputs(op, &inputs)? {
            let _off = crate::autocast::AutocastGuard::disabled();
            return c[0].convolution_nd(op, kind, spatial, &c[1], c.get(2), opts);
        }
        convolution(op, kind, spatial, self, weight, bias, opts)?.convolve(self, weight, bias)
    }

    /// `F.pixel_shuffle` (see [`Tensor::pixel_shuffle`]), recorded as its
    /// reshape and permute.
    pub fn pixel_shuffle(&self, upscale_factor: i64) -> Result<Var> {
        pixel_shuffle_of("pixel_shuffle", self, upscale_factor, false)
    }

    /// `F.pixel_unshuffle` (see [`Tensor::pixel_unshuffle`]), recorded as
    /// its reshape and permute.
    pub fn pixel_unshuffle(&self, downscale_factor: i64) -> Result<Var> {
        pixel_shuffle_of("pixel_unshuffle", self, downscale_factor, true)
    }

    /// `F.unfold` (see [`Tensor::im2col`]): the sliding blocks as
    /// columns; the gradient is the columns' gradient folded back
    /// ([`Tensor::col2im`]).
    #[doc(alias = "unfold")]
    pub fn im2col(&self, opts: &FoldOptions) -> Result<Var> {
        let out = self.data().im2col(opts)?;
        let shape = self.shape();
        let size = shape[shape.len() - 2..].to_vec();
        let opts = opts.clone();
        let f = formula(move |g, _s, _n| Ok(vec![Some(g.col2im(&size, &opts)?)]));
        record("Im2ColBackward", out, &[Some(self)], Vec::new, f, false)
    }

    /// `F.fold` (see [`Tensor::col2im`]): columns added back into an image;
    /// the gradient is the image's gradient unfolded ([`Tensor::im2col`]).
    #[doc(alias = "fold")]
    pub fn col2im(&self, output_size: &[usize], opts: &FoldOptions) -> Result<Var> {
        let out = self.data().col2im(output_size, opts)?;
        let opts = opts.clone();
        let f = formula(move |g, _s, _n| Ok(vec![Some(g.im2col(&opts)?)]));
        record("Col2ImBackward", out, &[Some(self)], Vec::new, f, false)
    }

    /// `F.interpolate` (see [`strata_tensor::Tensor::interpolate`]):
    /// recorded as its gathers and weighted sums (or its adaptive average
    /// pooling for `area`), so the input's gradient is PyTorch's.
    pub fn interpolate(&self, opts: &InterpolateOptions) -> Result<Var> {
        interpolate_plan(self.shape(), self.dtype(), opts)?.resize(self)
    }

    /// Max pooling recorded as one op (the values the `Tensor` form found):
    /// its backward sends each window's gradient to the element its index
    /// names ([`Tensor::window_max_backward`]); windows without an input
    /// element keep the tensor form's -inf and pass no gradient.
    fn max_pool_nd(
        &self,
        op: &'static str,
        spatial: usize,
        opts: &PoolOptions,
        (values, indices): (Tensor, Tensor),
    ) -> Result<(Var, Tensor)> {
        let plan = pool_plan(op, PoolKind::Max, spatial, self.shape(), self.dtype(), opts)?;
        let (batched, windows) = (plan.batched, plan.windows);
        // The indices are the node's saved tensor.
        let f = formula(move |g, s, _n| {
            let g = with_batch(g, batched)?;
            let index = with_batch(&s[0], batched)?;
            let dx = g.window_max_backward(&index, &windows)?;
            Ok(vec![Some(without_batch(dx, batched)?)])
        });
        let saved = indices.clone();
        let y = record(
            "MaxPoolWithIndicesBackward",
            values,
            &[Some(self)],
            move || vec![saved],
            f,
            false,
        )?;
        Ok((y, indices))
    }

    fn avg_pool_nd(&self, op: &'static str, spatial: usize, opts: &PoolOptions) -> Result<Var> {
        let plan = pool_plan(op, PoolKind::Avg, spatial, self.shape(), self.dtype(), opts)?;
        if !self.dtype().is_float() {
            // Integers have no gradient: the tensor form's truncating division.
            let x = self.data();
            return Ok(Var::new(match spatial {
                1 => x.avg_pool1d(opts),
                2 => x.avg_pool2d(opts),
                _ => x.avg_pool3d(opts),
            }?));
        }
        plan.average(self, opts)
    }

    fn adaptive_avg_pool_nd(
        &self,
        op: &'static str,
        spatial: usize,
        output_size: &[usize],
    ) -> Result<Var> {
        adaptive_pool(op, spatial, self, output_size)
    }
}

/// The ops the shared compositions of strata-tensor's `ops::conv` and
/// `ops::pool` are written in, recorded.
/// Records a convolution's result `out` (of `x` by `weight` plus `bias`) as
/// one node that saves the input and the weight (not the columns, which are
/// recomputed) and whose gradients `backward(g, x, weight, needs)` gives.
pub(super) fn record_convolution(
    out: Tensor,
    x: &Var,
    weight: &Var,
    bias: Option<&Var>,
    backward: impl Fn(&Tensor, &Tensor, &Tensor, [bool; 3]) -> strata_tensor::Result<[Option<Tensor>; 3]>
        + Send
        + Sync
        + 'static,
) -> Result<Var> {
    let f = formula(move |g, s, n| {
        let needs = [n[0], n[1], n.get(2).copied().unwrap_or(false)];
        Ok(backward(g, &s[0], &s[1], needs)?.into())
    });
    let (xd, wd) = (x.data().clone(), weight.data().clone());
    record(
        "ConvolutionBackward",
        out,
        &[Some(x), Some(weight), bias],
        move || vec![xd, wd],
        f,
        false,
    )
}

/// Declares the 1-, 2- and 3-D forms of each pooling on variables.
macro_rules! pooling_forms {
    ($($d:literal: $max:ident, $max_idx:ident, $avg:ident, $adaptive:ident;)*) => {
        impl Var {
            $(
                #[doc = concat!("`F.", stringify!($max), "` (see [`strata_tensor::Tensor::", stringify!($max), "`]); the gradient goes to each window's maximum, as PyTorch's.")]
                pub fn $max(&self, opts: &PoolOptions) -> Result<Var> {
                    Ok(self.$max_idx(opts)?.0)
                }

                #[doc = concat!("`F.", stringify!($max), "(..., return_indices=True)`: the values (differentiable) and their indices in the input's flattened spatial dims.")]
                pub fn $max_idx(&self, opts: &PoolOptions) -> Result<(Var, Tensor)> {
                    let found = self.data().$max_idx(opts)?;
                    self.max_pool_nd(stringify!($max), $d, opts, found)
                }

                #[doc = concat!("`F.", stringify!($avg), "` (see [`strata_tensor::Tensor::", stringify!($avg), "`]).")]
                pub fn $avg(&self, opts: &PoolOptions) -> Result<Var> {
                    self.avg_pool_nd(stringify!($avg), $d, opts)
                }

                #[doc = concat!("`F.", stringify!($adaptive), "` (see [`strata_tensor::Tensor::", stringify!($adaptive), "`]).")]
                pub fn $adaptive(&self, output_size: &[usize]) -> Result<Var> {
                    self.adaptive_avg_pool_nd(stringify!($adaptive), $d, output_size)
                }
            )*
        }
    };
}

pooling_forms! {
    1: max_pool1d, max_pool1d_with_indices, avg_pool1d, adaptive_avg_pool1d;
    2: max_pool2d, max_pool2d_with_indices, avg_pool2d, adaptive_avg_pool2d;
    3: max_pool3d, max_pool3d_with_indices, avg_pool3d, adaptive_avg_pool3d;
}

/// Declares the public convolutions, each a call of `convolution_nd`.
macro_rules! conv_forms {
    ($($(#[$doc:meta])* $name:ident: $kind:ident, $d:literal;)*) => {
        impl Var {
            $(
                $(#[$doc])*
                pub fn $name(&self, weight: &Var, bias: Option<&Var>, opts: &ConvOptions) -> Result<Var> {
                    self.convolution_nd(stringify!($name), ConvKind::$kind, $d, weight, bias, opts)
                }
            )*
        }
    };
}

conv_forms! {
    /// `F.conv1d` (see [`strata_tensor::Tensor::conv1d`]); the input,
    /// weight and bias are all differentiable.
    conv1d: Plain, 1;
    /// `F.conv2d` (see [`strata_tensor::Tensor::conv2d`]); the input,
    /// weight and bias are all differentiable. Under autocast it runs in
    /// the region's low-precision dtype, as PyTorch's.
    ///
    /// ```
    /// use strata_autograd::Var;
    /// use strata_tensor::{ConvOptions, DType, Device, Tensor};
    /// let x = Var::parameter(Tensor::ones(&[1, 1, 3, 3], DType::F32, Device::Cpu)?)?;
    /// let w = Var::parameter(Tensor::ones(&[1, 1, 2, 2], DType::F32, Device::Cpu)?)?;
    /// x.conv2d(&w, None, &ConvOptions::new())?.sum(None, false)?.backward()?;
    /// // The centre is in all four windows, a corner in one.
    /// assert_eq!(x.grad().unwrap().to_vec::<f32>()?, [1., 2., 1., 2., 4., 2., 1., 2., 1.]);
    /// assert_eq!(w.grad().unwrap().to_vec::<f32>()?, [4., 4., 4., 4.]);
    /// # Ok::<(), strata_autograd::AutogradError>(())
    /// ```
    conv2d: Plain, 2;
    /// `F.conv3d` (see [`strata_tensor::Tensor::conv3d`]); the input,
    /// weight and bias are all differentiable.
    conv3d: Plain, 3;
    /// `F.conv_transpose1d` (see
    /// [`strata_tensor::Tensor::conv_transpose1d`]); input, weight and
    /// bias are differentiable.
    conv_transpose1d: Transposed, 1;
    /// `F.conv_transpose2d` (see
    /// [`strata_tensor::Tensor::conv_transpose2d`]); input, weight and
    /// bias are differentiable. Under autocast it runs in the region's
    /// low-precision dtype, as PyTorch's.
    conv_transpose2d: Transposed, 2;
    /// `F.conv_transpose3d` (see
    /// [`strata_tensor::Tensor::conv_transpose3d`]).
    conv_transpose3d: Transposed, 3;
}
