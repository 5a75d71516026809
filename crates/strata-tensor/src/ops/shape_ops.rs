//! Shape-changing copies (session 60): `flip`, `fliplr`, `flipud`, `roll`,
//! `repeat`, `tile`, `repeat_interleave`, `pad` (PyTorch's `F.pad`: constant,
//! reflect, replicate, circular), and `clamp` with tensor bounds.
//!
//! flip, roll, repeat, tile, `repeat_interleave` with a count and pad are
//! one pass each: every output element reads the source element that a
//! per-dim map ([`DimMap`]) of its coordinates names, or the padding value
//! where a map leaves the source ([`NnKernel::MapCopy`]: CPU in
//! `backend/cpu/shape_ops.rs`, CUDA in `backend/cuda/shape_ops.rs`). No
//! intermediate tensor is made, whatever the input's strides (transposed,
//! expanded and offset views are read in place). `repeat_interleave` with a
//! tensor of counts reads the counts back once (PyTorch synchronises there
//! too, to size its result) and is an `index_select`; `clamp_tensor` is
//! `minimum(maximum(x, min), max)` in the common dtype, which gives
//! PyTorch's NaN propagation of every operand, its result `max` where
//! `min > max`, and its choice between +0.0 and -0.0 on ties.

use super::elementwise::{check_inplace, check_inplace_early, result_type, same_device, Operand};
use crate::backend::NnKernel;
use crate::dtype::{DType, Element};
use crate::error::{Result, TensorError};
use crate::layout::Layout;
use crate::scalar::Scalar;
use crate::shape::{check_contiguous, normalize_dim_strict, normalize_dims};
use crate::tensor::Tensor;

/// How an output coordinate `o` along one dim names the source coordinate
/// (`n` is the source's size there); a coordinate outside `[0, n)` (or a
/// map with nothing to read) means "the padding value".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DimMap {
    /// `o`.
    Id,
    /// `n - 1 - o` (flip).
    Flip,
    /// `((o - a) mod w) + b`, the modulus taken non-negative (roll:
    /// `a` = the shift, `w` = `n`; repeat: `a = 0`; circular padding).
    Wrap { a: i64, w: i64, b: i64 },
    /// `o / r` (repeat_interleave with `r > 0` copies).
    Div(i64),
    /// `o - a`, the padding value outside `[0, n)` (constant padding).
    Const(i64),
    /// `o - a` reflected at both ends without repeating the edge.
    Reflect(i64),
    /// `o - a` clamped into `[0, n - 1]`.
    Replicate(i64),
}

impl DimMap {
    /// The source coordinate of output coordinate `o`, or `None` for the
    /// padding value. The kernels compute the same arithmetic (in i64; the
    /// tensor layer keeps every operand far from overflow).
    pub(crate) fn source(self, o: i64, n: i64) -> Option<i64> {
        let s = match self {
            DimMap::Id => o,
            DimMap::Flip => n - 1 - o,
            DimMap::Wrap { a, w, b } => {
                if w <= 0 {
                    return None;
                }
                (o - a).rem_euclid(w) + b
            }
            DimMap::Div(r) => {
                if r <= 0 {
                    return None;
                }
                o / r
            }
            DimMap::Const(a) => o - a,
            DimMap::Reflect(a) => {
                let i = o - a;
                if i < 0 {
                    -i
                } else if i >= n {
                    2 * (n - 1) - i
                } else {
                    i
                }
            }
            DimMap::Replicate(a) => {
                if n <= 0 {
                    return None;
                }
                (o - a).clamp(0, n - 1)
            }
        };
        (0..n).contains(&s).then_some(s)
    }

    /// The kind code and three parameters the CUDA kernel reads.
    pub(crate) fn encode(self) -> (i64, i64, i64, i64) {
        match self {
            DimMap::Id => (0, 0, 0, 0),
            DimMap::Flip => (1, 0, 0, 0),
            DimMap::Wrap { a, w, b } => (2, a, w, b),
            DimMap::Div(r) => (3, r, 0, 0),
            DimMap::Const(a) => (4, a, 0, 0),
            DimMap::Reflect(a) => (5, a, 0, 0),
            DimMap::Replicate(a) => (6, a, 0, 0),
        }
    }
}

/// The mode of [`Tensor::pad`] (PyTorch's `F.pad` `mode` and `value`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum PadMode {
    /// `mode="constant"` with `value` (PyTorch's default `value=None` is 0).
    /// Negative pads crop.
    Constant(Scalar),
    /// `mode="reflect"`: mirrored at the edge without repeating it; each
    /// pad must be smaller than the dim it pads.
    Reflect,
    /// `mode="replicate"`: the edge element repeated.
    Replicate,
    /// `mode="circular"`: wrapped around, at most once.
    Circular,
}

impl PadMode {
    fn name(self) -> &'static str {
        match self {
            PadMode::Constant(_) => "constant",
            PadMode::Reflect => "reflect",
            PadMode::Replicate => "replicate",
            PadMode::Circular => "circular",
        }
    }
}

/// The repeats of [`Tensor::repeat_interleave`]: one count for every
/// element, or a 0-d or 1-D integer tensor of counts (one per element along
/// the dim, or one for all).
#[derive(Clone, Copy, Debug)]
pub enum Repeats<'a> {
    /// Every element `n` times.
    Count(usize),
    /// Element `i` `counts[i]` times (a 0-d or one-element tensor: all alike).
    Tensor(&'a Tensor),
}

impl From<usize> for Repeats<'_> {
    fn from(n: usize) -> Self {
        Repeats::Count(n)
    }
}

impl<'a> From<&'a Tensor> for Repeats<'a> {
    fn from(t: &'a Tensor) -> Self {
        Repeats::Tensor(t)
    }
}

/// A size computed in i128 as a usize, or the overflow error naming `what`.
fn size_of(op: &'static str, v: i128, what: impl FnOnce() -> String) -> Result<usize> {
    if v < 0 {
        return Err(TensorError::shape(op, what()));
    }
    usize::try_from(v)
        .ok()
        .filter(|&s| s <= crate::shape::MAX_NUMEL)
        .ok_or_else(|| {
            TensorError::overflow(op, format!("{} (a size of {v} exceeds i64::MAX)", what()))
        })
}

/// The bits of `value` in `dtype`, little-endian in a u64 (what the kernels
/// write for the padding value).
fn fill_bits(dtype: DType, value: Scalar) -> u64 {
    crate::dispatch_dtype!(dtype, T => {
        let v = <T as Element>::from_scalar(value);
        let mut bytes = [0u8; 8];
        let n = std::mem::size_of::<T>();
        // SAFETY: `v` is a plain element of `n` <= 8 bytes; its bytes are
        // copied into a buffer of 8.
        unsafe { std::ptr::copy_nonoverlapping((&v as *const T).cast::<u8>(), bytes.as_mut_ptr(), n) };
        u64::from_le_bytes(bytes)
    })
}

impl Tensor {
    /// Writes `out[p] = self[maps(p)]` (or the padding value `fill`) over
    /// the fresh `out` of self's rank and dtype: one pass on the device.
    fn map_copy(&self, out: &Tensor, maps: &[DimMap], fill: Scalar) -> Result<()> {
        debug_assert_eq!(maps.len(), self.ndim());
        debug_assert_eq!(out.ndim(), self.ndim());
        if out.numel() == 0 {
            return Ok(());
        }
        let bits = fill_bits(out.dtype(), fill);
        super::elementwise::launch(out, &[self], |be| {
            be.nn(NnKernel::MapCopy {
                out: &out.arg(),
                src: &self.arg(),
                maps,
                fill: bits,
            })
        })
    }

    /// `torch.flip(self, dims)`: the elements in reverse order along each
    /// of `dims` (negative dims count from the end; each at most once; a
    /// 0-d tensor takes 0 and -1), as a new tensor laid out as `self` is
    /// (PyTorch's `preserve_format`).
    ///
    /// ```
    /// use strata_tensor::{tensor, Tensor};
    /// let x = tensor![[1., 2., 3.], [4., 5., 6.]]?;
    /// assert_eq!(x.flip(&[1])?.to_vec::<f32>()?, [3., 2., 1., 6., 5., 4.]);
    /// assert_eq!(x.flip(&[0, -1])?.to_vec::<f32>()?, [6., 5., 4., 3., 2., 1.]);
    /// # Ok::<(), strata_tensor::TensorError>(())
    /// ```
    pub fn flip(&self, dims: &[i64]) -> Result<Tensor> {
        const OP: &str = "flip";
        let ds = normalize_dims(OP, dims, self.ndim())?;
        let out = self.uninit_preserving(OP, self.dtype())?;
        let mut maps = vec![DimMap::Id; self.ndim()];
        for d in ds {
            if d < maps.len() {
                maps[d] = DimMap::Flip;
            }
        }
        self.map_copy(&out, &maps, Scalar::Int(0))?;
        Ok(out)
    }

    /// `torch.fliplr`: [`Tensor::flip`] of dim 1 (the tensor must be at
    /// least 2-D).
    ///
    /// ```
    /// use strata_tensor::tensor;
    /// let x = tensor![[1., 2.], [3., 4.]]?;
    /// assert_eq!(x.fliplr()?.to_vec::<f32>()?, [2., 1., 4., 3.]);
    /// # Ok::<(), strata_tensor::TensorError>(())
    /// ```
    pub fn fliplr(&self) -> Result<Tensor> {
        if self.ndim() < 2 {
            return Err(TensorError::shape(
                "fliplr",
                format!(
                    "the input must be at least 2-D, got shape {:?}; use flip(&[-1]) for a 1-D tensor",
                    self.shape()
                ),
            ));
        }
        self.flip(&[1])
    }

    /// `torch.flipud`: [`Tensor::flip`] of dim 0 (the tensor must be at
    /// least 1-D).
    ///
    /// ```
    /// use strata_tensor::tensor;
    /// let x = tensor![[1., 2.], [3., 4.]]?;
    /// assert_eq!(x.flipud()?.to_vec::<f32>()?, [3., 4., 1., 2.]);
    /// # Ok::<(), strata_tensor::TensorError>(())
    /// ```
    pub fn flipud(&self) -> Result<Tensor> {
        if self.ndim() < 1 {
            return Err(TensorError::shape(
                "flipud",
                "the input must be at least 1-D, got a 0-d tensor",
            ));
        }
        self.flip(&[0])
    }

    /// `torch.roll(self, shifts, dims)`: element `i` along `dims[k]` moves
    /// to `(i + shifts[k]) mod size` (a dim named twice is shifted twice).
    /// With `dims` empty and one shift, the tensor is rolled as if
    /// flattened and given back its shape. The result is laid out as
    /// PyTorch's, which rolls one (shift, dim) pair at a time as a `cat` of
    /// two pieces: channels-last(-3d) where both pieces of the last pair
    /// are (a channels-last input rolled by a shift that is not a multiple
    /// of the size), else row-major. An empty input is copied with its
    /// layout, its dims unchecked (as PyTorch, which returns before it looks
    /// at them); `shifts` and `dims` must still align.
    ///
    /// ```
    /// use strata_tensor::tensor;
    /// let x = tensor![[1., 2., 3.], [4., 5., 6.]]?;
    /// assert_eq!(x.roll(&[1], &[1])?.to_vec::<f32>()?, [3., 1., 2., 6., 4., 5.]);
    /// assert_eq!(x.roll(&[1], &[])?.to_vec::<f32>()?, [6., 1., 2., 3., 4., 5.]);
    /// # Ok::<(), strata_tensor::TensorError>(())
    /// ```
    pub fn roll(&self, shifts: &[i64], dims: &[i64]) -> Result<Tensor> {
        const OP: &str = "roll";
        if shifts.is_empty() {
            return Err(TensorError::value(
                OP,
                "`shifts` required: give one shift per dim",
            ));
        }
        if dims.is_empty() && shifts.len() == 1 {
            let flat = self.reshape(&[-1])?;
            let rolled = flat.roll(shifts, &[0])?;
            let shape: Vec<i64> = self.shape().iter().map(|&s| s as i64).collect();
            return rolled.view(&shape);
        }
        if shifts.len() != dims.len() {
            return Err(TensorError::shape(
                OP,
                format!(
                    "shifts and dims must align: {} shifts {shifts:?} but {} dims {dims:?}",
                    shifts.len(),
                    dims.len()
                ),
            ));
        }
        if self.numel() == 0 {
            // PyTorch returns a copy of an empty input before it looks at
            // the dims (`torch.roll(torch.zeros(0, 2), [1], [5])` is a
            // `[0, 2]` tensor), on the CPU and on CUDA.
            return self.uninit_preserving(OP, self.dtype());
        }
        let mut total = vec![0i128; self.ndim()];
        for (&s, &d) in shifts.iter().zip(dims) {
            let d = normalize_dim_strict(OP, d, self.ndim())?;
            total[d] += i128::from(s);
        }
        let out = Tensor::uninit_channels_last_if(
            OP,
            self.shape(),
            self.roll_is_channels_last(shifts, dims)?,
            self.dtype(),
            self.device(),
        )?;
        let maps: Vec<DimMap> = (0..self.ndim())
            .map(|d| {
                let n = self.shape()[d] as i128;
                let a = if n > 0 { total[d].rem_euclid(n) } else { 0 };
                if a == 0 {
                    DimMap::Id
                } else {
                    DimMap::Wrap {
                        a: a as i64,
                        w: n as i64,
                        b: 0,
                    }
                }
            })
            .collect();
        self.map_copy(&out, &maps, Scalar::Int(0))?;
        Ok(out)
    }

    /// Whether PyTorch's `roll` of this (non-empty) tensor comes out
    /// channels-last: it rolls one (shift, dim) pair at a time, each as the
    /// `cat` of two narrowed pieces, whose output is channels-last(-3d) when
    /// both pieces' strides are (`cat`'s rule; a shift that is a multiple of
    /// the size leaves an empty piece, and a row-major result), else
    /// row-major; the next pair rolls that result.
    fn roll_is_channels_last(&self, shifts: &[i64], dims: &[i64]) -> Result<bool> {
        if crate::layout::channels_last_order(self.ndim()).is_none() {
            return Ok(false);
        }
        let mut layout = self.layout().clone();
        let mut cl = false;
        for (&s, &d) in shifts.iter().zip(dims) {
            let d = normalize_dim_strict("roll", d, self.ndim())?;
            let n = self.shape()[d] as i128;
            let start = (n - i128::from(s)).rem_euclid(n) as usize;
            let piece = |len: usize| {
                let mut l = layout.clone();
                l.shape[d] = len;
                l.offset = 0;
                l.is_strides_like_channels_last()
            };
            cl = start != 0 && piece(n as usize - start) && piece(start);
            layout = Layout {
                strides: if cl {
                    crate::layout::channels_last_strides(self.shape())
                } else {
                    Layout::contiguous(self.shape()).strides
                },
                shape: self.shape().to_vec(),
                offset: 0,
            };
        }
        Ok(cl)
    }

    /// `Tensor.repeat(*sizes)`: the tensor tiled `sizes[d]` times along
    /// each dim. `sizes` must have at least as many entries as the tensor
    /// has dims; extra leading entries add leading dims. A count must be
    /// non-negative unless its dim is empty (PyTorch refuses a negative
    /// product only). A contiguous copy.
    ///
    /// ```
    /// use strata_tensor::tensor;
    /// let x = tensor![1., 2.]?;
    /// let r = x.repeat(&[2, 2])?;
    /// assert_eq!(r.shape(), [2, 4]);
    /// assert_eq!(r.to_vec::<f32>()?, [1., 2., 1., 2., 1., 2., 1., 2.]);
    /// # Ok::<(), strata_tensor::TensorError>(())
    /// ```
    pub fn repeat(&self, sizes: &[i64]) -> Result<Tensor> {
        const OP: &str = "repeat";
        if sizes.len() < self.ndim() {
            return Err(TensorError::shape(
                OP,
                format!(
                    "{} repeat sizes {sizes:?} for a tensor of {} dims (shape {:?}); give at least one per dim",
                    sizes.len(),
                    self.ndim(),
                    self.shape()
                ),
            ));
        }
        let lead = sizes.len() - self.ndim();
        let mut src_shape = vec![1usize; lead];
        src_shape.extend_from_slice(self.shape());
        // PyTorch multiplies each size by its count and refuses a negative
        // product only: a negative count on an empty dim gives an empty dim.
        if let Some((&r, &n)) = sizes
            .iter()
            .zip(&src_shape)
            .find(|&(&r, &n)| r < 0 && n > 0)
        {
            return Err(TensorError::value(
                OP,
                format!(
                    "repeat sizes must be non-negative, got {r} for a dim of size {n} in {sizes:?}"
                ),
            ));
        }
        let mut out_shape = Vec::with_capacity(sizes.len());
        for (d, &r) in sizes.iter().enumerate() {
            // An empty dim stays empty whatever its count.
            let v = src_shape[d] as i128 * r.max(0) as i128;
            out_shape.push(size_of(OP, v, || {
                format!("shape {:?} repeated {sizes:?} is too large", self.shape())
            })?);
        }
        check_contiguous(OP, &out_shape)?;
        let src = self.leading_ones(lead)?;
        let out = Tensor::uninit(OP, &out_shape, self.dtype(), self.device())?;
        let maps: Vec<DimMap> = sizes
            .iter()
            .zip(&src_shape)
            .map(|(&r, &n)| {
                if r == 1 {
                    DimMap::Id
                } else {
                    DimMap::Wrap {
                        a: 0,
                        w: n as i64,
                        b: 0,
                    }
                }
            })
            .collect();
        src.map_copy(&out, &maps, Scalar::Int(0))?;
        Ok(out)
    }

    /// `self` viewed with `lead` leading dims of size 1.
    fn leading_ones(&self, lead: usize) -> Result<Tensor> {
        if lead == 0 {
            return Ok(self.clone());
        }
        let mut shape = vec![1usize; lead];
        shape.extend_from_slice(self.shape());
        let mut strides = vec![0usize; lead];
        strides.extend_from_slice(self.strides());
        Ok(self.with_layout(Layout {
            shape,
            strides,
            offset: self.offset(),
        }))
    }

    /// `torch.tile(self, dims)`: [`Tensor::repeat`] with `reps` padded with
    /// leading 1s to the tensor's rank (fewer entries than dims are fine).
    ///
    /// ```
    /// use strata_tensor::tensor;
    /// let x = tensor![[1., 2.], [3., 4.]]?;
    /// let t = x.tile(&[2])?; // as tile(&[1, 2])
    /// assert_eq!(t.to_vec::<f32>()?, [1., 2., 1., 2., 3., 4., 3., 4.]);
    /// # Ok::<(), strata_tensor::TensorError>(())
    /// ```
    pub fn tile(&self, reps: &[i64]) -> Result<Tensor> {
        if reps.len() >= self.ndim() {
            return self.repeat(reps);
        }
        let mut full = vec![1i64; self.ndim() - reps.len()];
        full.extend_from_slice(reps);
        self.repeat(&full)
    }

    /// `torch.repeat_interleave(self, repeats, dim)`: each element along
    /// `dim` repeated (`dim = None`: of the flattened tensor, giving a 1-D
    /// result). `repeats` is a count for every element
    /// ([`Repeats::Count`], one pass on the device) or an integer tensor
    /// (u8, i32 or i64) of counts, 0-d or 1-D with one count per element or
    /// one for all: its values are read back once (one synchronisation on a
    /// GPU, as in PyTorch) and the result is an `index_select`. A
    /// contiguous result. With u8 counts PyTorch builds its index in u8,
    /// so past 256 elements along `dim` the positions wrap (element 256
    /// reads element 0); strata reads the same elements.
    ///
    /// ```
    /// use strata_tensor::{tensor, Tensor};
    /// let x = tensor![[1., 2.], [3., 4.]]?;
    /// let r = x.repeat_interleave(2, Some(0))?;
    /// assert_eq!(r.to_vec::<f32>()?, [1., 2., 1., 2., 3., 4., 3., 4.]);
    /// let counts = tensor![1i64, 2]?;
    /// let r = x.repeat_interleave(&counts, Some(1))?;
    /// assert_eq!(r.to_vec::<f32>()?, [1., 2., 2., 3., 4., 4.]);
    /// assert_eq!(x.repeat_interleave(2, None)?.shape(), [8]);
    /// # Ok::<(), strata_tensor::TensorError>(())
    /// ```
    pub fn repeat_interleave<'a>(
        &self,
        repeats: impl Into<Repeats<'a>>,
        dim: Option<i64>,
    ) -> Result<Tensor> {
        const OP: &str = "repeat_interleave";
        let repeats = repeats.into();
        if let Repeats::Tensor(r) = repeats {
            same_device(OP, self, r)?;
        }
        let (input, d) = match dim {
            None => (self.reshape(&[-1])?, 0),
            Some(d) => (self.clone(), normalize_dim_strict(OP, d, self.ndim())?),
        };
        let n = input.shape()[d];
        match repeats {
            Repeats::Count(r) => {
                let v = n as i128 * r as i128;
                let mut shape = input.shape().to_vec();
                shape[d] = size_of(OP, v, || {
                    format!("{n} elements repeated {r} times is too large")
                })?;
                check_contiguous(OP, &shape)?;
                let out = Tensor::uninit(OP, &shape, input.dtype(), input.device())?;
                let mut maps = vec![DimMap::Id; input.ndim()];
                if r != 1 {
                    maps[d] = DimMap::Div(r as i64);
                }
                input.map_copy(&out, &maps, Scalar::Int(0))?;
                Ok(out)
            }
            Repeats::Tensor(r) => {
                let index = repeat_index(OP, r, n)?;
                input.index_select(d as i64, &index)
            }
        }
    }

    /// PyTorch's `F.pad(self, pad, mode, value)`: `pad` holds (before,
    /// after) pairs for the last dim, then the one before it, and so on
    /// (at most one pair per dim). [`PadMode::Constant`] pads any dims of
    /// any tensor with its value (negative pads crop); reflect, replicate
    /// and circular pad the last 1, 2 or 3 dims of a tensor with one or two
    /// more dims than that (PyTorch's limits), reflect by less than the
    /// dim's size. The result is contiguous (channels-last(-3d) for a 4-D
    /// or 5-D input laid out so, as PyTorch's constant, reflection and
    /// replication padding; circular padding's is always row-major);
    /// constant padding without a positive pad is a crop copied as `self`
    /// is laid out.
    ///
    /// ```
    /// use strata_tensor::{tensor, PadMode};
    /// let x = tensor![[1., 2., 3.]]?;
    /// let c = x.pad(&[1, 2], PadMode::Constant(0.5.into()))?;
    /// assert_eq!(c.to_vec::<f32>()?, [0.5, 1., 2., 3., 0.5, 0.5]);
    /// assert_eq!(x.pad(&[2, 1], PadMode::Reflect)?.to_vec::<f32>()?, [3., 2., 1., 2., 3., 2.]);
    /// assert_eq!(x.pad(&[1, 1], PadMode::Replicate)?.to_vec::<f32>()?, [1., 1., 2., 3., 3.]);
    /// assert_eq!(x.pad(&[1, 1], PadMode::Circular)?.to_vec::<f32>()?, [3., 1., 2., 3., 1.]);
    /// # Ok::<(), strata_tensor::TensorError>(())
    /// ```
    pub fn pad(&self, pad: &[i64], mode: PadMode) -> Result<Tensor> {
        const OP: &str = "pad";
        if !pad.len().is_multiple_of(2) {
            return Err(TensorError::shape(
                OP,
                format!(
                    "the padding length must be divisible by 2 (one (before, after) pair per dim), got {} values {pad:?}",
                    pad.len()
                ),
            ));
        }
        let k = pad.len() / 2;
        let nd = self.ndim();
        if k > nd {
            return Err(TensorError::shape(
                OP,
                format!(
                    "padding length should be at most two times the input's dims, but got padding length {} for an input of {nd} dims (shape {:?})",
                    pad.len(),
                    self.shape()
                ),
            ));
        }
        // (dim, before, after) for each padded dim.
        let pairs: Vec<(usize, i64, i64)> = (0..k)
            .map(|i| (nd - 1 - i, pad[2 * i], pad[2 * i + 1]))
            .collect();
        match mode {
            PadMode::Constant(value) => self.pad_constant(&pairs, value),
            _ => self.pad_other(&pairs, mode),
        }
    }

    fn pad_constant(&self, pairs: &[(usize, i64, i64)], value: Scalar) -> Result<Tensor> {
        const OP: &str = "pad";
        // F.pad's value is a Python float: an integer or bool converts to
        // f64 first (so -1 does not fit u8 here, and 2^63 - 1 not i64).
        let value = Scalar::Float(value.to_f64());
        let mut shape = self.shape().to_vec();
        let mut maps = vec![DimMap::Id; self.ndim()];
        for &(d, l, r) in pairs {
            let n = self.shape()[d] as i128;
            let (l, r) = (i128::from(l), i128::from(r));
            let crop = (-l).max(0) + (-r).max(0);
            if crop > n {
                return Err(TensorError::shape(
                    OP,
                    format!(
                        "negative padding ({l}, {r}) crops {crop} elements from dim {d} of size {n} (shape {:?}); crop at most the dim's size",
                        self.shape()
                    ),
                ));
            }
            shape[d] = size_of(OP, n + l + r, || {
                format!("padding ({l}, {r}) of dim {d} of size {n} gives a size beyond i64::MAX")
            })?;
            if l != 0 || r != 0 {
                maps[d] = DimMap::Const(l as i64);
            }
        }
        if pairs.iter().all(|&(_, l, r)| l <= 0 && r <= 0) {
            // PyTorch: a crop (narrow) copied with `clone()`.
            let mut v = self.clone();
            for &(d, l, _) in pairs {
                v = v.narrow(d as i64, -l, shape[d] as i64)?;
            }
            return v.deep_clone();
        }
        check_contiguous(OP, &shape)?;
        let numel = crate::shape::numel(&shape);
        if !value.fill_fits(self.dtype(), numel) {
            return Err(TensorError::value(
                OP,
                format!(
                    "the padding value {value} cannot be converted to {} without overflow",
                    self.dtype()
                ),
            ));
        }
        let out = Tensor::uninit_channels_last_if(
            OP,
            &shape,
            self.layout().is_strides_like_channels_last(),
            self.dtype(),
            self.device(),
        )?;
        self.map_copy(&out, &maps, value)?;
        Ok(out)
    }

    fn pad_other(&self, pairs: &[(usize, i64, i64)], mode: PadMode) -> Result<Tensor> {
        const OP: &str = "pad";
        let (k, nd) = (pairs.len(), self.ndim());
        if k == 0 || k > 3 || (nd != k + 1 && nd != k + 2) {
            return Err(TensorError::shape(
                OP,
                format!(
                    "{} padding of {} values is not supported for a {nd}-D input (shape {:?}): {} pads the last 1, 2 or 3 dims of a 2-D/3-D, 3-D/4-D or 4-D/5-D input (constant padding takes any)",
                    mode.name(),
                    2 * k,
                    self.shape(),
                    mode.name()
                ),
            ));
        }
        if matches!(mode, PadMode::Reflect | PadMode::Replicate) {
            let first = if nd == k + 2 { 1 } else { 0 };
            if self.shape()[first..].contains(&0) {
                return Err(TensorError::shape(
                    OP,
                    format!(
                        "{} padding expects a {}-D or {}-D (batch mode) input with possibly 0 batch size and other non-zero dims, got shape {:?}",
                        mode.name(),
                        k + 1,
                        k + 2,
                        self.shape()
                    ),
                ));
            }
        }
        let mut shape = self.shape().to_vec();
        let mut maps = vec![DimMap::Id; nd];
        if mode == PadMode::Reflect {
            // PyTorch checks every pad against its dim before any size.
            for &(d, l, r) in pairs {
                let n = self.shape()[d] as i64;
                if l >= n || r >= n {
                    return Err(TensorError::value(
                        OP,
                        format!(
                            "reflect padding ({l}, {r}) of dim {d} must be smaller than the dim's size {n} (input shape {:?})",
                            self.shape()
                        ),
                    ));
                }
            }
        }
        // Circular padding checks the dims outermost first, as PyTorch.
        let order: Vec<(usize, i64, i64)> = if mode == PadMode::Circular {
            pairs.iter().rev().copied().collect()
        } else {
            pairs.to_vec()
        };
        let mut wraps_twice = None;
        for &(d, l, r) in &order {
            let n = self.shape()[d] as i128;
            let (l, r) = (i128::from(l), i128::from(r));
            let m = n + l + r;
            if mode == PadMode::Circular {
                if l > n || r > n {
                    return Err(TensorError::value(
                        OP,
                        format!(
                            "circular padding ({l}, {r}) of dim {d} of size {n} wraps around more than once (input shape {:?}); pad by at most the dim's size",
                            self.shape()
                        ),
                    ));
                }
                if m < 0 {
                    return Err(TensorError::shape(
                        OP,
                        format!(
                            "negative circular padding ({l}, {r}) of dim {d} of size {n} leaves a negative size"
                        ),
                    ));
                }
                // The part of the input kept between the crops, which the
                // pads wrap around (PyTorch copies them from it).
                let w = n + l.min(0) + r.min(0);
                if (l > w || r > w) && wraps_twice.is_none() {
                    // After PyTorch's own checks of every dim: it copies
                    // such pads from elements it has not written yet.
                    wraps_twice = Some(TensorError::value(
                        OP,
                        format!(
                            "circular padding ({l}, {r}) of dim {d} of size {n} wraps around the {w} elements left after the crop more than once; pad by at most that many"
                        ),
                    ));
                }
                maps[d] = DimMap::Wrap {
                    a: l.max(0) as i64,
                    w: w as i64,
                    b: (-l).max(0) as i64,
                };
            } else {
                if m < 1 {
                    return Err(TensorError::shape(
                        OP,
                        format!(
                            "input dim {d} of size {n} is too small for {} padding ({l}, {r}): the output size would be {m}",
                            mode.name()
                        ),
                    ));
                }
                maps[d] = if mode == PadMode::Reflect {
                    DimMap::Reflect(l as i64)
                } else {
                    DimMap::Replicate(l as i64)
                };
            }
            shape[d] = size_of(OP, m, || {
                format!("padding ({l}, {r}) of dim {d} of size {n} is too large")
            })?;
        }
        if let Some(e) = wraps_twice {
            return Err(e);
        }
        // PyTorch's kernels come after its checks: no bool reflect/replicate.
        if matches!(mode, PadMode::Reflect | PadMode::Replicate) && self.dtype() == DType::Bool {
            return Err(TensorError::dtype(
                OP,
                format!(
                    "{} padding is not defined for bool tensors (as in PyTorch); convert to another dtype or use circular padding",
                    mode.name()
                ),
            ));
        }
        check_contiguous(OP, &shape)?;
        // PyTorch's reflection and replication pads lay a 4-D/5-D output
        // out in the input's `suggest_memory_format` (channels-last(-3d)
        // inputs give channels-last(-3d) outputs); circular padding's is
        // row-major.
        let out = Tensor::uninit_channels_last_if(
            OP,
            &shape,
            mode != PadMode::Circular && self.layout().is_strides_like_channels_last(),
            self.dtype(),
            self.device(),
        )?;
        self.map_copy(&out, &maps, Scalar::Int(0))?;
        Ok(out)
    }

    /// `torch.clamp(self, min, max)` with tensor bounds: `min(max(self,
    /// min), max)` broadcast over the three and computed in their common
    /// dtype (PyTorch's type promotion: a 0-d bound does not widen a
    /// tensor of its category). NaN in any operand gives NaN; where `min >
    /// max` the result is `max`. At least one bound must be given; both
    /// bounds in a bool common dtype are a dtype error, as in PyTorch.
    ///
    /// ```
    /// use strata_tensor::tensor;
    /// let x = tensor![-2., 0.5, 3.]?;
    /// let lo = tensor![0., 0., 0.]?;
    /// let hi = tensor![1.]?;
    /// let c = x.clamp_tensor(Some(&lo), Some(&hi))?;
    /// assert_eq!(c.to_vec::<f32>()?, [0., 0.5, 1.]);
    /// # Ok::<(), strata_tensor::TensorError>(())
    /// ```
    pub fn clamp_tensor(&self, min: Option<&Tensor>, max: Option<&Tensor>) -> Result<Tensor> {
        self.clamp_tensor_impl("clamp", min, max, None)
    }

    /// In-place [`Tensor::clamp_tensor`]: the broadcast shape must be
    /// self's, and the common dtype must cast to self's (a float bound on
    /// an integer tensor is an error, as in PyTorch).
    ///
    /// ```
    /// use strata_tensor::tensor;
    /// let x = tensor![-2., 0.5, 3.]?;
    /// x.clamp_tensor_(None, Some(&tensor![0.]?))?;
    /// assert_eq!(x.to_vec::<f32>()?, [-2., 0., 0.]);
    /// # Ok::<(), strata_tensor::TensorError>(())
    /// ```
    pub fn clamp_tensor_(&self, min: Option<&Tensor>, max: Option<&Tensor>) -> Result<Tensor> {
        const OP: &str = "clamp_";
        let bounds: Vec<Tensor> = min.iter().chain(max.iter()).map(|t| (*t).clone()).collect();
        check_inplace_early(OP, self, &bounds)?;
        // PyTorch's order: the broadcast shape, then the result's cast.
        let compute = clamp_compute(OP, self, min, max)?;
        let shape = clamp_shape(OP, self, min, max)?;
        if shape != self.shape() {
            return Err(TensorError::InPlaceBroadcast {
                op: OP,
                out: self.shape().to_vec(),
                result: shape,
            });
        }
        if !compute.can_cast_to(self.dtype()) {
            return Err(TensorError::dtype(
                OP,
                format!(
                    "result type {compute} cannot be stored in the {} tensor",
                    self.dtype()
                ),
            ));
        }
        let mut inputs = bounds;
        check_inplace(OP, self, &mut inputs)?;
        let r = self.clamp_tensor_impl(OP, min, max, Some(self.strides()))?;
        self.copy_(&r)?;
        Ok(self.clone())
    }

    /// The clamp of [`Tensor::clamp_tensor`] as a fresh tensor; `inplace`
    /// holds the strides of the tensor it will be written into (PyTorch's
    /// output for `clamp_`), `None` for a result PyTorch allocates.
    fn clamp_tensor_impl(
        &self,
        op: &'static str,
        min: Option<&Tensor>,
        max: Option<&Tensor>,
        inplace: Option<&[usize]>,
    ) -> Result<Tensor> {
        let compute = clamp_compute(op, self, min, max)?;
        clamp_shape(op, self, min, max)?;
        // PyTorch's kernel of both bounds has no bool loop (one bound goes
        // to `clamp_min`/`clamp_max`, which have); it is chosen after the
        // shape and cast checks.
        if compute == DType::Bool && min.is_some() && max.is_some() {
            return Err(TensorError::dtype(
                op,
                "clamp with both bounds is not implemented for bool tensors (as in PyTorch); \
                 clamp with one bound at a time, or convert to an integer dtype first",
            ));
        }
        let conv = |t: &Tensor| -> Result<Tensor> {
            if t.dtype() == compute {
                Ok(t.clone())
            } else {
                t.to_dtype(compute)
            }
        };
        let mut r = conv(self)?;
        if let Some(lo) = min {
            r = r.maximum(&conv(lo)?)?;
        }
        if let Some(hi) = max {
            r = r.minimum(&conv(hi)?)?;
        }
        if let (Some(lo), Some(hi)) = (min, max) {
            if compute.is_float() && self.device() == crate::Device::Cpu && r.numel() > 0 {
                return clamp_zero_ties(&conv(self)?, &conv(lo)?, &conv(hi)?, r, inplace);
            }
        }
        Ok(r)
    }
}

/// PyTorch's CPU clamp with two tensor bounds keeps the element where it
/// ties a bound in its scalar loop (`std::min(std::max(a, min), max)`) and
/// takes the bound in its vectorised one (`_mm256_max_ps`/`_min_ps` return
/// their second operand on equal values): the two differ only in the sign
/// of a zero that ties a zero bound. `r` is the clamp by strata's
/// `maximum`/`minimum` (its NaNs stand); each other element takes the
/// zero of the loop PyTorch runs it in ([`crate::layout::
/// pytorch_scalar_loop_mask`] over the converted operands and the output:
/// `inplace`'s strides, else dense in the iterator's order).
fn clamp_zero_ties(
    a: &Tensor,
    lo: &Tensor,
    hi: &Tensor,
    r: Tensor,
    inplace: Option<&[usize]>,
) -> Result<Tensor> {
    let shape = r.shape().to_vec();
    let chunk = super::elementwise::pytorch_vec_chunk(r.dtype());
    let (sa, sl, sh) = (
        a.layout().broadcast_strides(&shape),
        lo.layout().broadcast_strides(&shape),
        hi.layout().broadcast_strides(&shape),
    );
    let mask = if shape.is_empty() {
        // A 0-d op is one scalar element.
        Some(vec![true])
    } else {
        let (order, out) = match inplace {
            Some(out) => (
                crate::layout::reorder_dims(&shape, None, &[out, &sa, &sl, &sh]),
                out.to_vec(),
            ),
            None => {
                let order = crate::layout::reorder_dims(&shape, None, &[&sa, &sl, &sh]);
                let out = crate::layout::dense_strides_in_order(&shape, &order);
                (order, out)
            }
        };
        crate::layout::pytorch_scalar_loop_mask(&shape, &order, &[&out, &sa, &sl, &sh], chunk)?
    };
    let a = a.broadcast_to(&shape)?;
    let vector = {
        let m = Tensor::where_cond(&a.gt(lo)?, &a, lo)?;
        Tensor::where_cond(&m.lt(hi)?, &m, hi)?
    };
    let picked = match mask {
        None => vector,
        Some(mask) => {
            let m = Tensor::where_cond(&a.lt(lo)?, lo, &a)?;
            let scalar = Tensor::where_cond(&hi.lt(&m)?, hi, &m)?;
            let mask = Tensor::from_vec(mask, &shape, crate::Device::Cpu)?;
            Tensor::where_cond(&mask, &scalar, &vector)?
        }
    };
    r.copy_(&Tensor::where_cond(&r.ne(&r)?, &r, &picked)?)?;
    Ok(r)
}

/// The common dtype of clamp's operands (and the checks PyTorch makes
/// first: a bound given, one device).
fn clamp_compute(
    op: &'static str,
    x: &Tensor,
    min: Option<&Tensor>,
    max: Option<&Tensor>,
) -> Result<DType> {
    if min.is_none() && max.is_none() {
        return Err(TensorError::value(
            op,
            "at least one of min and max must be given",
        ));
    }
    let mut ops = vec![Operand::Tensor(x)];
    for b in min.iter().chain(max.iter()) {
        same_device(op, x, b)?;
        ops.push(Operand::Tensor(b));
    }
    Ok(result_type(&ops))
}

/// The broadcast shape of clamp's operands.
fn clamp_shape(
    op: &'static str,
    x: &Tensor,
    min: Option<&Tensor>,
    max: Option<&Tensor>,
) -> Result<Vec<usize>> {
    let mut shape = x.shape().to_vec();
    for b in min.iter().chain(max.iter()) {
        shape = crate::shape::broadcast_shapes(op, &shape, b.shape())?;
    }
    Ok(shape)
}

/// The index of `repeat_interleave` with a tensor of counts for `n`
/// elements: `i` repeated `counts[i]` times, built on the host from the
/// counts read back once, as an i64 tensor on the counts' device.
fn repeat_index(op: &'static str, counts: &Tensor, n: usize) -> Result<Tensor> {
    if counts.ndim() > 1 {
        return Err(TensorError::shape(
            op,
            format!(
                "repeats must be a 0-d or 1-D tensor, got shape {:?}",
                counts.shape()
            ),
        ));
    }
    if !matches!(counts.dtype(), DType::I64 | DType::I32 | DType::U8) {
        return Err(TensorError::dtype(
            op,
            format!(
                "repeats must be an integer tensor (int64, int32 or uint8), not {}",
                counts.dtype()
            ),
        ));
    }
    let one = counts.numel() == 1;
    if !one && counts.numel() != n {
        return Err(TensorError::shape(
            op,
            format!(
                "repeats must have the same size as the input along dim, but got {} counts for {n} elements",
                counts.numel()
            ),
        ));
    }
    let values: Vec<i64> = counts.to_dtype(DType::I64)?.to_vec::<i64>()?;
    // One count stands for every element (PyTorch expands it to n): with
    // no elements it is never used, and not checked.
    let used = if one && n == 0 { &[][..] } else { &values[..] };
    if let Some(&bad) = used.iter().find(|&&v| v < 0) {
        return Err(TensorError::value(
            op,
            format!("repeats can not be negative, got {bad}"),
        ));
    }
    let per = |i: usize| if one { values[0] } else { values[i] } as u128;
    let total: u128 = (0..n).map(per).sum();
    let total = usize::try_from(total)
        .ok()
        .filter(|&t| t <= crate::shape::MAX_NUMEL)
        .ok_or_else(|| {
            TensorError::overflow(
                op,
                format!("the counts add up to {total} elements, beyond i64::MAX"),
            )
        })?;
    let mut index: Vec<i64> = Vec::new();
    index.try_reserve_exact(total).map_err(|_| {
        TensorError::overflow(
            op,
            format!("an index of {total} elements does not fit in host memory"),
        )
    })?;
    // PyTorch builds the index in the counts' dtype: with uint8 counts the
    // positions wrap at 256 (element 256 of the input is read as element
    // 0 again), and strata reads the same elements.
    let wrap = |i: usize| {
        if counts.dtype() == DType::U8 {
            (i % 256) as i64
        } else {
            i as i64
        }
    };
    for i in 0..n {
        let c = per(i) as usize;
        index.extend(std::iter::repeat_n(wrap(i), c));
    }
    Tensor::from_vec(index, &[total], counts.device())
}

#[cfg(test)]
mod tests {
    use super::DimMap;

    #[test]
    fn maps_match_their_definitions() {
        let n = 4;
        let f = |m: DimMap| (0..6).map(|o| m.source(o, n)).collect::<Vec<_>>();
        assert_eq!(f(DimMap::Flip)[..4], [Some(3), Some(2), Some(1), Some(0)]);
        assert_eq!(
            f(DimMap::Reflect(2)),
            [Some(2), Some(1), Some(0), Some(1), Some(2), Some(3)]
        );
        assert_eq!(
            f(DimMap::Replicate(1)),
            [Some(0), Some(0), Some(1), Some(2), Some(3), Some(3)]
        );
        assert_eq!(
            f(DimMap::Const(1)),
            [None, Some(0), Some(1), Some(2), Some(3), None]
        );
        assert_eq!(f(DimMap::Div(2))[..4], [Some(0), Some(0), Some(1), Some(1)]);
        assert_eq!(
            f(DimMap::Wrap { a: 1, w: 4, b: 0 }),
            [Some(3), Some(0), Some(1), Some(2), Some(3), Some(0)]
        );
        assert_eq!(DimMap::Div(0).source(0, n), None);
        assert_eq!(DimMap::Replicate(0).source(0, 0), None);
    }
}
