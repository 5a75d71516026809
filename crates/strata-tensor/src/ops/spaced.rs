//! `torch.linspace` and `torch.logspace`: evenly spaced values, computed as
//! PyTorch 2.15's CPU kernel computes them (`start + step * i` for the first
//! half, `end - step * (steps - 1 - i)` for the second, so both ends are
//! exact; in the dtype's own arithmetic for floats, in f64 for integers,
//! then truncated).

use crate::dtype::DType;
use crate::error::{Result, TensorError};
use crate::ops::checks::check_fits;
use crate::scalar::Scalar;
use crate::tensor::Tensor;
use crate::Device;

/// The evenly spaced `steps` values from `start` to `end` in `dtype`'s
/// arithmetic (f64 for an integer dtype, and for a single step, whose value
/// is `start` itself).
fn spaced(
    op: &'static str,
    start: f64,
    end: f64,
    steps: usize,
    dtype: DType,
    device: Device,
) -> Result<Tensor> {
    if dtype == DType::Bool {
        return Err(TensorError::unsupported(op, dtype));
    }
    let c = if dtype.is_float() { dtype } else { DType::F64 };
    if steps == 0 {
        return Tensor::zeros(&[0], c, device);
    }
    let n =
        i64::try_from(steps).map_err(|_| TensorError::overflow(op, format!("{steps} steps")))?;
    // With two steps or more PyTorch converts both ends to the dtype first
    // (an integer dtype truncates them).
    let (start, end) = if steps == 1 {
        (start, end)
    } else {
        for v in [start, end] {
            check_fits(op, Scalar::Float(v), dtype)?;
        }
        if dtype.is_float() {
            (start, end)
        } else {
            (start.trunc(), end.trunc())
        }
    };
    if steps == 1 {
        // PyTorch fills the one value: cast (an f16 overflow is inf), but
        // an integer dtype takes no NaN or infinity.
        if !dtype.is_float() {
            check_fits(op, Scalar::Float(start), dtype)?;
        }
        return Tensor::full(&[1], start, DType::F64, device);
    }
    let start_t = Tensor::full(&[], start, c, device)?;
    let end_t = Tensor::full(&[], end, c, device)?;
    let step = end_t
        .sub(&start_t)?
        .div(&Tensor::full(&[], (n - 1) as f64, c, device)?)?;
    let idx = Tensor::arange(0i64, n, 1i64, None, device)?;
    let rev = idx.neg()?.add(n - 1)?;
    let first = start_t.add(&step.mul(&idx.to_dtype(c)?)?)?;
    let second = end_t.sub(&step.mul(&rev.to_dtype(c)?)?)?;
    Tensor::where_cond(&idx.lt(n / 2)?, &first, &second)
}

impl Tensor {
    /// `torch.linspace(start, end, steps, dtype)`: `steps` evenly spaced
    /// values from `start` to `end` (both included; f32 by default, as
    /// PyTorch's default dtype). An integer dtype truncates the f64 values.
    ///
    /// ```
    /// use strata_tensor::{Device, Tensor};
    /// let t = Tensor::linspace(0.0, 1.0, 5, None, Device::Cpu)?;
    /// assert_eq!(t.to_vec::<f32>()?, [0.0, 0.25, 0.5, 0.75, 1.0]);
    /// # Ok::<(), strata_tensor::TensorError>(())
    /// ```
    pub fn linspace(
        start: f64,
        end: f64,
        steps: usize,
        dtype: Option<DType>,
        device: Device,
    ) -> Result<Tensor> {
        let dtype = dtype.unwrap_or(DType::F32);
        spaced("linspace", start, end, steps, dtype, device)?.to_dtype(dtype)
    }

    /// `torch.logspace(start, end, steps, base, dtype)`: `base` to the
    /// powers of [`Tensor::linspace`]`(start, end, steps)`.
    pub fn logspace(
        start: f64,
        end: f64,
        steps: usize,
        base: f64,
        dtype: Option<DType>,
        device: Device,
    ) -> Result<Tensor> {
        let dtype = dtype.unwrap_or(DType::F32);
        if steps == 1 && !dtype.is_float() {
            // The one value must fit the integer dtype, as in PyTorch.
            check_fits("logspace", Scalar::Float(base.powf(start)), dtype)?;
        }
        // The exponents in the dtype's arithmetic, the power in f64, on the
        // host: an integer dtype truncates the power, so a GPU's `pow`
        // (within an ulp of the exact power) would give 2047 for 2^11; and
        // an out-of-range cast gives PyTorch's CPU value there.
        let exponents =
            spaced("logspace", start, end, steps, dtype, Device::Cpu)?.to_dtype(DType::F64)?;
        Tensor::full(&[], base, DType::F64, Device::Cpu)?
            .pow(&exponents)?
            .to_dtype(dtype)?
            .to(device)
    }
}
