//! `F.pixel_shuffle` and `F.pixel_unshuffle` (session 76): the channels of
//! an image regrouped into `r x r` blocks of pixels and back, as one
//! reshape-permute-reshape written once over [`Composite`] (so the `Var`
//! forms record it and differentiate themselves), with PyTorch 2.15's
//! checks: at least three dims, a positive factor, the channels (or the
//! height and width) divisible by it. As PyTorch's, `pixel_unshuffle` of an
//! empty input returns it with its shape unchanged.

use crate::error::{Result, TensorError};
use crate::ops::composite::Composite;
use crate::tensor::Tensor;

/// The three steps of a pixel (un)shuffle of a tensor of `shape`.
struct Plan {
    split: Vec<i64>,
    perm: Vec<i64>,
    out: Vec<i64>,
}

fn plan(op: &'static str, shape: &[usize], factor: i64, down: bool) -> Result<Plan> {
    let nd = shape.len();
    if nd < 3 {
        return Err(TensorError::shape(
            op,
            format!("expected an input of at least 3 dims, but got input of shape {shape:?}"),
        ));
    }
    let what = if down {
        "downscale_factor"
    } else {
        "upscale_factor"
    };
    if factor <= 0 {
        return Err(TensorError::value(
            op,
            format!("expected a positive {what}, but got {factor}"),
        ));
    }
    let r = factor as u128;
    let (c, h, w) = (
        shape[nd - 3] as u128,
        shape[nd - 2] as u128,
        shape[nd - 1] as u128,
    );
    let batch: Vec<i64> = shape[..nd - 3].iter().map(|&s| s as i64).collect();
    let b = batch.len() as i64;
    let fits = |v: u128| {
        i64::try_from(v)
            .ok()
            .filter(|&v| v as u128 <= crate::shape::MAX_NUMEL as u128)
            .ok_or_else(|| TensorError::overflow(op, format!("{shape:?} by {factor} overflows")))
    };
    let with = |tail: &[i64]| batch.iter().chain(tail).copied().collect::<Vec<i64>>();
    let perm = |tail: [i64; 5]| (0..b).chain(tail.map(|d| b + d)).collect::<Vec<i64>>();
    if down {
        for (name, size, dim) in [("height", h, -2), ("width", w, -1)] {
            if size % r != 0 {
                return Err(TensorError::shape(
                    op,
                    format!(
                        "expected the {name} to be divisible by {what}, but input.size({dim})={size} \
                         is not divisible by {factor}"
                    ),
                ));
            }
        }
        let (oh, ow, rr) = (fits(h / r)?, fits(w / r)?, fits(r)?);
        if shape.contains(&0) {
            // PyTorch returns an empty input as it is (its shape kept).
            let same: Vec<i64> = shape.iter().map(|&s| s as i64).collect();
            return Ok(Plan {
                split: same.clone(),
                perm: (0..nd as i64).collect(),
                out: same,
            });
        }
        Ok(Plan {
            split: with(&[c as i64, oh, rr, ow, rr]),
            perm: perm([0, 2, 4, 1, 3]),
            out: with(&[fits(c * r * r)?, oh, ow]),
        })
    } else {
        if c % (r * r) != 0 || r.checked_mul(r).is_none() {
            return Err(TensorError::shape(
                op,
                format!(
                    "expected the channel dim to be divisible by the square of {what}, but \
                     input.size(-3)={c} is not divisible by {}",
                    r * r
                ),
            ));
        }
        let rr = fits(r)?;
        Ok(Plan {
            split: with(&[fits(c / (r * r))?, rr, rr, h as i64, w as i64]),
            perm: perm([0, 3, 1, 4, 2]),
            out: with(&[fits(c / (r * r))?, fits(h * r)?, fits(w * r)?]),
        })
    }
}

/// Pixel shuffle (`down` false) or unshuffle of `x` (a `Tensor` or a `Var`).
pub fn pixel_shuffle_of<T: Composite>(
    op: &'static str,
    x: &T,
    factor: i64,
    down: bool,
) -> std::result::Result<T, T::Error> {
    let p = plan(op, x.shape(), factor, down)?;
    x.reshape(&p.split)?.permute(&p.perm)?.reshape(&p.out)
}

impl Tensor {
    /// `F.pixel_shuffle(input, upscale_factor)`: `[*, C * r^2, H, W]` to
    /// `[*, C, H * r, W * r]`, each group of `r^2` channels spread over an
    /// `r x r` block of pixels.
    ///
    /// ```
    /// use strata_tensor::{Device, Tensor};
    /// let x = Tensor::arange(0.0, 4.0, 1.0, None, Device::Cpu)?.reshape(&[1, 4, 1, 1])?;
    /// let y = x.pixel_shuffle(2)?;
    /// assert_eq!(y.shape(), [1, 1, 2, 2]);
    /// assert_eq!(y.to_vec::<f32>()?, [0., 1., 2., 3.]);
    /// assert_eq!(y.pixel_unshuffle(2)?.to_vec::<f32>()?, [0., 1., 2., 3.]);
    /// # Ok::<(), strata_tensor::TensorError>(())
    /// ```
    pub fn pixel_shuffle(&self, upscale_factor: i64) -> Result<Tensor> {
        pixel_shuffle_of("pixel_shuffle", self, upscale_factor, false)
    }

    /// `F.pixel_unshuffle(input, downscale_factor)`: the inverse of
    /// [`Tensor::pixel_shuffle`], `[*, C, H * r, W * r]` to
    /// `[*, C * r^2, H, W]`.
    pub fn pixel_unshuffle(&self, downscale_factor: i64) -> Result<Tensor> {
        pixel_shuffle_of("pixel_unshuffle", self, downscale_factor, true)
    }
}
