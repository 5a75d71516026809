//! What convolution and pooling share: their windows ([`Windows`], taken
//! with the view ops of [`Composite`](crate::Composite), so
//! that one plan drives the `Tensor` and the `Var` forms), the rank check of
//! an input with or without a batch dim, and the int-or-tuple option lists.

use crate::backend::{NnKernel, WindowKernel};
use crate::dtype::DType;
use crate::error::{Result, TensorError};
use crate::ops::composite::Composite;
use crate::ops::elementwise::launch;
use crate::scalar::Scalar;
use crate::shape;
use crate::tensor::Tensor;

/// The sliding windows of a convolution's columns or of a pooling over one
/// to three spatial dims of an `[N, C, L...]` input: per spatial dim the
/// input's size, the number of windows, the kernel size, the stride, the
/// implicit padding before (positions before the input or past its end
/// hold nothing: zeros in columns, skipped by pooling) and the dilation.
/// The arrays hold the spatial dims last, after `3 - spatial` unit dims
/// (size 1, one window of one element), so kernels see three dims always.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Windows {
    /// The number of spatial dims (1, 2 or 3).
    pub spatial: usize,
    /// The input's spatial sizes.
    pub input: [usize; 3],
    /// The windows per dim (the output's spatial sizes).
    pub out: [usize; 3],
    /// The kernel's size.
    pub kernel: [usize; 3],
    /// The step between windows.
    pub stride: [usize; 3],
    /// The implicit padding before each dim.
    pub pad: [usize; 3],
    /// The spacing of a window's elements.
    pub dilation: [usize; 3],
}

impl Windows {
    /// Windows of `kernel` over `input`, `out` of them per dim, each list
    /// one value per spatial dim (1 to 3 dims, all lists equally long).
    pub fn new(
        input: &[usize],
        out: &[usize],
        kernel: &[usize],
        stride: &[usize],
        pad: &[usize],
        dilation: &[usize],
    ) -> Windows {
        let spatial = input.len();
        debug_assert!((1..=3).contains(&spatial));
        let fill = |v: &[usize], unit: usize| {
            let mut a = [unit; 3];
            a[3 - spatial..].copy_from_slice(v);
            a
        };
        Windows {
            spatial,
            input: fill(input, 1),
            out: fill(out, 1),
            kernel: fill(kernel, 1),
            stride: fill(stride, 1),
            pad: fill(pad, 0),
            dilation: fill(dilation, 1),
        }
    }

    /// Elements per window (the product of the kernel).
    pub fn kernel_numel(&self) -> usize {
        self.kernel.iter().product()
    }

    /// Windows per channel (the product of the output's spatial sizes).
    pub fn out_numel(&self) -> usize {
        self.out.iter().product()
    }

    /// Input elements per channel.
    pub fn input_numel(&self) -> usize {
        self.input.iter().product()
    }

    /// Whether every window is one input element in order (a unit kernel,
    /// stride 1, no padding): the columns are the input itself.
    pub fn is_identity(&self) -> bool {
        self.kernel == [1; 3]
            && self.stride == [1; 3]
            && self.pad == [0; 3]
            && self.out == self.input
    }

    /// The spatial sizes of the input (`input`) or of the windows (`out`)
    /// without the unit dims.
    pub fn spatial_of(&self, sizes: &[usize; 3]) -> Vec<usize> {
        sizes[3 - self.spatial..].to_vec()
    }
}

/// The divisor of an average pooling's windows: the window's size clipped
/// to the padded input (`count_include_pad`) or to the input, or
/// `divisor_override`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AvgMode {
    /// Whether padded positions count in a window's size.
    pub count_include_pad: bool,
    /// A divisor used instead of the window's size (not 0).
    pub divisor_override: Option<i64>,
}

/// `x` with a batch dim (added where the input has none).
pub fn with_batch<T: Composite>(x: &T, batched: bool) -> std::result::Result<T, T::Error> {
    if batched {
        Ok(x.clone())
    } else {
        x.unsqueeze(0)
    }
}

/// A result without the batch dim [`with_batch`] added.
pub fn without_batch<T: Composite>(y: T, batched: bool) -> std::result::Result<T, T::Error> {
    if batched {
        Ok(y)
    } else {
        y.squeeze_dims(&[0])
    }
}

/// Whether an input of `shape` to an op over `spatial` dims has a batch dim
/// (`spatial + 2` dims) or not (`spatial + 1`); any other rank is an error.
pub(crate) fn is_batched(op: &'static str, shape: &[usize], spatial: usize) -> Result<bool> {
    if shape.len() != spatial + 1 && shape.len() != spatial + 2 {
        return Err(TensorError::shape(
            op,
            format!(
                "expected a {}-D (unbatched) or {}-D (batched) input, but got input of shape {shape:?}",
                spatial + 1,
                spatial + 2
            ),
        ));
    }
    Ok(shape.len() == spatial + 2)
}

/// One value per spatial dim from an int-or-tuple list (PyTorch's
/// `expand_param_if_needed`).
pub(crate) fn per_dim<V: Copy + std::fmt::Debug>(
    op: &'static str,
    name: &str,
    values: &[V],
    spatial: usize,
) -> Result<Vec<V>> {
    match values.len() {
        1 => Ok(vec![values[0]; spatial]),
        n if n == spatial => Ok(values.to_vec()),
        _ => Err(TensorError::shape(
            op,
            format!(
                "expected {name} to be a single value or a list of {spatial} values to match the \
                 {spatial} spatial dims, but got {name}={values:?}"
            ),
        )),
    }
}

/// The batch and channel counts of an `[N, C, L...]` input to a window op
/// over `windows`, after checking its rank, its spatial sizes and the
/// geometry (no zero kernel, stride or dilation; positions fit an i64).
fn check_input(op: &'static str, shape: &[usize], windows: &Windows) -> Result<(usize, usize)> {
    let w = windows;
    if !(1..=3).contains(&w.spatial) {
        return Err(TensorError::value(
            op,
            format!("windows span 1 to 3 spatial dims, not {}", w.spatial),
        ));
    }
    let unit = 3 - w.spatial;
    if (0..unit).any(|i| {
        (
            w.input[i],
            w.out[i],
            w.kernel[i],
            w.stride[i],
            w.pad[i],
            w.dilation[i],
        ) != (1, 1, 1, 1, 0, 1)
    }) {
        return Err(TensorError::value(
            op,
            format!("the windows {w:?} have a unit dim that is not one element"),
        ));
    }
    if [w.kernel, w.stride, w.dilation]
        .iter()
        .any(|a| a.contains(&0))
    {
        return Err(TensorError::value(
            op,
            format!("the windows {w:?} have a kernel size, stride or dilation of 0"),
        ));
    }
    if shape.len() != 2 + w.spatial || shape[2..] != w.input[unit..] {
        return Err(TensorError::shape(
            op,
            format!(
                "expected an [N, C, {:?}] input for the windows {w:?}, but got input of shape {shape:?}",
                &w.input[unit..]
            ),
        ));
    }
    // Every position a window names (`o * stride + k * dilation`, before
    // the padding is taken off) fits an i64, and so does every product.
    let empty = shape.contains(&0);
    let far = empty
        || (0..3).all(|i| {
            let o = w.out[i].saturating_sub(1) as u128 * w.stride[i] as u128;
            let k = (w.kernel[i] - 1) as u128 * w.dilation[i] as u128;
            o + k + w.input[i] as u128 + w.pad[i] as u128 <= shape::MAX_NUMEL as u128
        });
    if !far {
        return Err(TensorError::overflow(
            op,
            format!("the windows {w:?} reach past {} elements", shape::MAX_NUMEL),
        ));
    }
    shape::checked_numel(op, &w.kernel)?;
    shape::checked_numel(op, &w.out)?;
    Ok((shape[0], shape[1]))
}

/// The geometry pooling's kernels need beyond [`check_input`]'s: every
/// window reaches the input (its first position `o * stride - pad` before
/// the input's end, its last `o * stride - pad + (kernel - 1) * dilation`
/// at or after its start), as every window of PyTorch's pooling does (its
/// padding is at most half the kernel, its last window starts inside the
/// input or the left padding); average pooling also has no dilation. A
/// hand-built [`Windows`] with a window wholly in the padding, past the
/// input or over an empty input would give a NaN or -0.0 mean (its divisor
/// 0 or negative) or an index outside the window.
fn check_pooling(op: &'static str, windows: &Windows, average: bool) -> Result<()> {
    let w = windows;
    if average && w.dilation != [1; 3] {
        return Err(TensorError::value(
            op,
            format!("average pooling has no dilation, but the windows {w:?} have one"),
        ));
    }
    for i in 3 - w.spatial..3 {
        if w.out[i] == 0 {
            continue;
        }
        let first_end = (w.kernel[i] as u128).saturating_sub(1) * w.dilation[i] as u128;
        let last_start = (w.out[i] - 1) as u128 * w.stride[i] as u128;
        if w.input[i] == 0
            || first_end < w.pad[i] as u128
            || last_start >= w.input[i] as u128 + w.pad[i] as u128
        {
            return Err(TensorError::value(
                op,
                format!(
                    "the windows {w:?} have a window along spatial dim {} that holds no input \
                     position (wholly in the padding or past the input); pooling needs the padding \
                     at most (kernel - 1) * dilation and the last window starting before input + \
                     padding, as PoolPlan's windows are",
                    i - (3 - w.spatial)
                ),
            ));
        }
    }
    Ok(())
}

/// `[N, C, sizes...]` for the spatial `sizes` of `windows`.
fn planes_shape(n: usize, c: usize, windows: &Windows, sizes: &[usize; 3]) -> Vec<usize> {
    let mut s = vec![n, c];
    s.extend(windows.spatial_of(sizes));
    s
}

/// Max pooling's value for a window without an input element: the
/// dtype's lowest (-inf for floats).
pub(crate) fn lowest(dtype: DType) -> Scalar {
    match dtype {
        d if d.is_float() => Scalar::Float(f64::NEG_INFINITY),
        DType::I32 => Scalar::Int(i64::from(i32::MIN)),
        DType::U8 => Scalar::Int(0),
        _ => Scalar::Int(i64::MIN),
    }
}

impl Tensor {
    /// im2col (PyTorch's `F.unfold` layout over one to three spatial dims):
    /// the windows of this `[N, C, L...]` tensor as columns `[N, C * K, O]`
    /// (`K` the kernel's elements, `O` the windows), row `c * K + k` and
    /// column `o` holding channel `c`'s element at kernel offset `k`
    /// (row-major) of window `o`, zero in the padding. Any dtype; one pass.
    ///
    /// ```
    /// use strata_tensor::{Device, Tensor, Windows};
    /// let x = Tensor::arange(0.0, 4.0, 1.0, None, Device::Cpu)?.reshape(&[1, 1, 4])?;
    /// // Windows of 2 with stride 2 and one padded zero in front: [0, 0], [1, 2].
    /// let w = Windows::new(&[4], &[2], &[2], &[2], &[1], &[1]);
    /// let cols = x.window_columns(&w)?;
    /// assert_eq!(cols.shape(), [1, 2, 2]);
    /// assert_eq!(cols.to_vec::<f32>()?, [0., 1., 0., 2.]);
    /// # Ok::<(), strata_tensor::TensorError>(())
    /// ```
    pub fn window_columns(&self, windows: &Windows) -> Result<Tensor> {
        const OP: &str = "window_columns";
        let (n, c) = check_input(OP, self.shape(), windows)?;
        let rows = c.checked_mul(windows.kernel_numel()).ok_or_else(|| {
            TensorError::overflow(OP, format!("{c} channels of {windows:?} windows overflow"))
        })?;
        let out = Tensor::uninit(
            OP,
            &[n, rows, windows.out_numel()],
            self.dtype(),
            self.device(),
        )?;
        if out.numel() > 0 {
            launch(&out, &[self], |be| {
                be.nn(NnKernel::Window {
                    windows,
                    op: WindowKernel::Im2col {
                        cols: &out.arg(),
                        x: &self.arg(),
                    },
                })
            })?;
        }
        Ok(out)
    }

    /// col2im, the adjoint of [`Tensor::window_columns`] (PyTorch's
    /// `F.fold` of columns): this `[N, C * K, O]` float (or i64) tensor's
    /// entries added back to the input positions they were read from, giving
    /// `[N, C, L...]` (positions no window reads are zero). Sums are in the
    /// computation type, by kernel offset; i64 wraps; bool columns add as a
    /// logical or.
    pub fn window_columns_sum(&self, windows: &Windows) -> Result<Tensor> {
        const OP: &str = "window_columns_sum";
        if !(self.dtype().is_float() || matches!(self.dtype(), DType::Bool | DType::I64)) {
            return Err(TensorError::unsupported(OP, self.dtype()));
        }
        let (k, o) = (windows.kernel_numel(), windows.out_numel());
        let s = self.shape();
        if s.len() != 3 || k == 0 || !s[1].is_multiple_of(k) || s[2] != o {
            return Err(TensorError::shape(
                OP,
                format!(
                    "expected columns [N, C * {k}, {o}] for the windows {windows:?}, but got shape {s:?}"
                ),
            ));
        }
        let shape = planes_shape(s[0], s[1] / k, windows, &windows.input);
        check_input(OP, &shape, windows)?;
        let cols = self.contiguous()?;
        let x = Tensor::uninit(OP, &shape, self.dtype(), self.device())?;
        if x.numel() > 0 {
            launch(&x, &[&cols], |be| {
                be.nn(NnKernel::Window {
                    windows,
                    op: WindowKernel::Col2im {
                        x: &x.arg(),
                        cols: &cols.arg(),
                    },
                })
            })?;
        }
        Ok(x)
    }

    /// Max pooling of this `[N, C, L...]` tensor (float or integer) over
    /// `windows`: the values and their indices into the flattened spatial
    /// dims (i64), each `[N, C, O...]`, as PyTorch's scan finds them (the
    /// first maximum, the last NaN). A window without an input element
    /// gives the dtype's lowest value (-inf for floats) and the index of
    /// its first position past the left padding, as PyTorch (a dilated
    /// window can step over the whole input).
    ///
    /// Errors: besides a geometry that does not fit the input, windows one
    /// of which lies wholly in the padding or past the input
    /// ([`TensorError::Value`]), which PyTorch's pooling never makes.
    pub fn window_max(&self, windows: &Windows) -> Result<(Tensor, Tensor)> {
        const OP: &str = "window_max";
        if self.dtype() == DType::Bool {
            return Err(TensorError::unsupported(OP, self.dtype()));
        }
        let (n, c) = check_input(OP, self.shape(), windows)?;
        check_pooling(OP, windows, false)?;
        let shape = planes_shape(n, c, windows, &windows.out);
        let values = Tensor::uninit(OP, &shape, self.dtype(), self.device())?;
        let indices = Tensor::uninit(OP, &shape, DType::I64, self.device())?;
        if values.numel() > 0 {
            launch(&values, &[self, &indices], |be| {
                be.nn(NnKernel::Window {
                    windows,
                    op: WindowKernel::MaxPool {
                        values: &values.arg(),
                        indices: &indices.arg(),
                        x: &self.arg(),
                    },
                })
            })?;
        }
        Ok((values, indices))
    }

    /// Average pooling of this `[N, C, L...]` tensor (float or i64) over
    /// `windows`: each window's input elements summed in scan order (in the
    /// computation type: f32 for f16/bf16) over its divisor ([`AvgMode`];
    /// i64 divides with truncation), `[N, C, O...]`.
    ///
    /// Errors: besides a geometry that does not fit the input, windows one
    /// of which lies wholly in the padding or past the input, or a dilation
    /// other than 1 ([`TensorError::Value`]: the divisor would be 0 or
    /// negative, the mean NaN or -0.0).
    pub fn window_means(&self, windows: &Windows, mode: AvgMode) -> Result<Tensor> {
        const OP: &str = "window_means";
        if !(self.dtype().is_float() || self.dtype() == DType::I64) {
            return Err(TensorError::unsupported(OP, self.dtype()));
        }
        if mode.divisor_override == Some(0) {
            return Err(TensorError::value(OP, "divisor must be not zero"));
        }
        let (n, c) = check_input(OP, self.shape(), windows)?;
        check_pooling(OP, windows, true)?;
        let shape = planes_shape(n, c, windows, &windows.out);
        let out = Tensor::uninit(OP, &shape, self.dtype(), self.device())?;
        if out.numel() > 0 {
            launch(&out, &[self], |be| {
                be.nn(NnKernel::Window {
                    windows,
                    op: WindowKernel::AvgPool {
                        out: &out.arg(),
                        x: &self.arg(),
                        mode,
                    },
                })
            })?;
        }
        Ok(out)
    }

    /// Checks this output gradient of a pooling over `windows` (float,
    /// `[N, C, O...]`); the input's shape.
    fn check_window_gradient(
        &self,
        op: &'static str,
        windows: &Windows,
        average: bool,
    ) -> Result<Vec<usize>> {
        if !self.dtype().is_float() {
            return Err(TensorError::unsupported(op, self.dtype()));
        }
        let s = self.shape();
        if s.len() != 2 + windows.spatial || s[2..] != windows.spatial_of(&windows.out)[..] {
            return Err(TensorError::shape(
                op,
                format!(
                    "expected a gradient [N, C, {:?}], but got shape {s:?}",
                    windows.spatial_of(&windows.out)
                ),
            ));
        }
        let shape = planes_shape(s[0], s[1], windows, &windows.input);
        check_input(op, &shape, windows)?;
        check_pooling(op, windows, average)?;
        Ok(shape)
    }

    /// The input gradient of [`Tensor::window_means`] given this output
    /// gradient (`[N, C, O...]`, float): each window's gradient over its
    /// divisor added to its input elements, `[N, C, L...]`. Errors: those
    /// of [`Tensor::window_means`].
    pub fn window_means_backward(&self, windows: &Windows, mode: AvgMode) -> Result<Tensor> {
        const OP: &str = "window_means_backward";
        if mode.divisor_override == Some(0) {
            return Err(TensorError::value(OP, "divisor must be not zero"));
        }
        let shape = self.check_window_gradient(OP, windows, true)?;
        let dy = self.contiguous()?;
        let dx = Tensor::uninit(OP, &shape, self.dtype(), self.device())?;
        if dx.numel() > 0 {
            launch(&dx, &[&dy], |be| {
                be.nn(NnKernel::Window {
                    windows,
                    op: WindowKernel::AvgPoolBackward {
                        dx: &dx.arg(),
                        dy: &dy.arg(),
                        mode,
                    },
                })
            })?;
        }
        Ok(dx)
    }

    /// The input gradient of [`Tensor::window_max`] given this output
    /// gradient (`[N, C, O...]`, float) and the forward's `indices`: each
    /// input element sums, in window order, the gradients of the windows
    /// that hold it and chose it; `[N, C, L...]`. A window without an input
    /// element passes nothing (PyTorch writes its gradient through an index
    /// outside the window). Errors: those of [`Tensor::window_max`].
    pub fn window_max_backward(&self, indices: &Tensor, windows: &Windows) -> Result<Tensor> {
        const OP: &str = "window_max_backward";
        if indices.dtype() != DType::I64 {
            return Err(TensorError::unsupported(OP, indices.dtype()));
        }
        let shape = self.check_window_gradient(OP, windows, false)?;
        if indices.shape() != self.shape() {
            return Err(TensorError::shape(
                OP,
                format!(
                    "expected indices of the gradient's shape {:?}, but got {:?}",
                    self.shape(),
                    indices.shape()
                ),
            ));
        }
        if indices.device() != self.device() {
            return Err(TensorError::DeviceMismatch {
                op: OP,
                lhs: self.device(),
                rhs: indices.device(),
            });
        }
        let (dy, idx) = (self.contiguous()?, indices.contiguous()?);
        let dx = Tensor::uninit(OP, &shape, self.dtype(), self.device())?;
        if dx.numel() > 0 {
            launch(&dx, &[&dy, &idx], |be| {
                be.nn(NnKernel::Window {
                    windows,
                    op: WindowKernel::MaxPoolBackward {
                        dx: &dx.arg(),
                        dy: &dy.arg(),
                        indices: &idx.arg(),
                    },
                })
            })?;
        }
        Ok(dx)
    }
}
