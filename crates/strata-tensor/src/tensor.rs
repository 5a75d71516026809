//! The [`Tensor`] type: a cheap handle (one `Arc`) on a strided view of a
//! reference-counted storage, and the basic accessors and creation functions.

use crate::backend::{Arg, Backend};
use crate::dispatch_dtype;
use crate::dtype::{DType, Element};
use crate::error::{Result, TensorError};
use crate::layout::Layout;
use crate::scalar::Scalar;
use crate::shape;
use crate::storage::{AccessGuard, Storage};
use std::sync::Arc;
use strata_alloc::Device;

/// An n-dimensional array with PyTorch's semantics: views share storage,
/// in-place ops (`add_`, ...) write through every view, and memory comes from
/// strata's caching allocator.
///
/// Cloning a `Tensor` is cheap and yields another handle on the same view (it
/// does not copy elements; see [`Tensor::deep_clone`]).
///
/// ```
/// use strata_tensor::{Tensor, DType, Device};
/// let a = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[2, 2], Device::Cpu).unwrap();
/// let at = a.t().unwrap();            // a view: same storage
/// at.add_(10.0).unwrap();             // writes through to `a`
/// assert_eq!(a.to_vec::<f32>().unwrap(), vec![11.0, 12.0, 13.0, 14.0]);
/// assert!(a.same_storage(&at));
/// ```
#[derive(Clone)]
pub struct Tensor {
    inner: Arc<Inner>,
}

struct Inner {
    storage: Arc<Storage>,
    layout: Layout,
    dtype: DType,
}

impl Tensor {
    pub(crate) fn from_parts(storage: Arc<Storage>, layout: Layout, dtype: DType) -> Tensor {
        Tensor {
            inner: Arc::new(Inner {
                storage,
                layout,
                dtype,
            }),
        }
    }

    /// A new view of this tensor's storage with another layout.
    pub(crate) fn with_layout(&self, layout: Layout) -> Tensor {
        Tensor::from_parts(Arc::clone(&self.inner.storage), layout, self.inner.dtype)
    }

    /// `torch.empty`: a contiguous tensor whose elements are uninitialised
    /// (whatever the allocator's block held; write before reading). Nothing
    /// is written, so this is the cheapest way to get an output buffer.
    ///
    /// Except for `bool`: its elements start `false`. A byte other than 0 or
    /// 1 is not a valid `bool` (reading one is undefined behaviour in Rust,
    /// and ops would disagree on its value), and the block may hold any bytes
    /// of an earlier tensor; PyTorch's `torch.empty(dtype=torch.bool)` leaves
    /// them as they are.
    ///
    /// ```
    /// use strata_tensor::{Tensor, DType, Device};
    /// drop(Tensor::full(&[256], 240, DType::U8, Device::Cpu).unwrap());
    /// let b = Tensor::empty(&[256], DType::Bool, Device::Cpu).unwrap();
    /// assert_eq!(b.to_vec::<bool>().unwrap(), vec![false; 256]);
    /// ```
    #[track_caller]
    pub fn empty(shape: &[usize], dtype: DType, device: Device) -> Result<Tensor> {
        let t = Tensor::uninit("empty", shape, dtype, device)?;
        if dtype == DType::Bool {
            t.fill_(false)?;
        }
        Ok(t)
    }

    /// [`Tensor::empty`] without filling `bool`: an output buffer that the
    /// caller writes in full before anything reads it.
    #[track_caller]
    /// `op` names the operation whose result it is, for errors.
    pub(crate) fn uninit(
        op: &'static str,
        shape: &[usize],
        dtype: DType,
        device: Device,
    ) -> Result<Tensor> {
        let numel = shape::check_contiguous(op, shape)?;
        let nbytes = shape::checked_nbytes(op, shape, numel, dtype.size())?;
        let storage = Storage::new(nbytes, device)?;
        Ok(Tensor::from_parts(
            Arc::new(storage),
            Layout::contiguous(shape),
            dtype,
        ))
    }

    /// The backend of the tensor's storage (no lookup).
    pub(crate) fn backend(&self) -> Result<&'static dyn Backend> {
        Ok(self.inner.storage.backend())
    }

    pub(crate) fn arg(&self) -> Arg<'_> {
        Arg {
            mem: self.inner.storage.mem(),
            layout: self.inner.layout.clone(),
            dtype: self.inner.dtype,
        }
    }

    /// The operand broadcast to `shape` (stride 0 on stretched dims).
    pub(crate) fn arg_as(&self, shape: &[usize]) -> Arg<'_> {
        let l = &self.inner.layout;
        Arg {
            mem: self.inner.storage.mem(),
            layout: Layout {
                shape: shape.to_vec(),
                strides: l.broadcast_strides(shape),
                offset: l.offset,
            },
            dtype: self.inner.dtype,
        }
    }

    /// [`Tensor::uninit`] laid out channels-last (4-D) or channels-last-3d
    /// (5-D) when `channels_last` holds and `shape` has such a layout,
    /// else row-major: the memory format PyTorch's ops pass on from an
    /// input's `suggest_memory_format`.
    pub(crate) fn uninit_channels_last_if(
        op: &'static str,
        shape: &[usize],
        channels_last: bool,
        dtype: DType,
        device: Device,
    ) -> Result<Tensor> {
        let t = Tensor::uninit(op, shape, dtype, device)?;
        if !channels_last || crate::layout::channels_last_order(shape.len()).is_none() {
            return Ok(t);
        }
        Ok(t.with_layout(Layout {
            shape: shape.to_vec(),
            strides: crate::layout::channels_last_strides(shape),
            offset: 0,
        }))
    }

    /// [`Tensor::uninit`] laid out densely in `order` (dims innermost
    /// first), as PyTorch's TensorIterator allocates an output whose dims
    /// it has reordered.
    pub(crate) fn uninit_in_order(
        op: &'static str,
        shape: &[usize],
        order: &[usize],
        dtype: DType,
        device: Device,
    ) -> Result<Tensor> {
        let t = Tensor::uninit(op, shape, dtype, device)?;
        if order.iter().copied().eq((0..shape.len()).rev()) {
            return Ok(t);
        }
        Ok(t.with_layout(Layout {
            shape: shape.to_vec(),
            strides: crate::layout::dense_strides_in_order(shape, order),
            offset: 0,
        }))
    }

    /// A fresh tensor of `shape` laid out as PyTorch's TensorIterator lays
    /// out an output it allocates for inputs of layouts `inputs` (each of
    /// which broadcasts to `shape`; a Python scalar that PyTorch wraps into
    /// a 0-d operand, as `x + 1` and `x.lt(0)` do, is a 0-d layout here).
    /// When every input has `shape` (its `fast_set_up`): row-major when they
    /// are all contiguous (or there is none), else channels-last when they
    /// are all 4-D and channels-last contiguous (PyTorch's fast path asks
    /// only `torch.channels_last`, not `torch.channels_last_3d`), else their own strides when
    /// they all have the same non-overlapping and dense strides. Otherwise
    /// (a broadcast, a 0-d operand beside others, different or gapped
    /// layouts) dense in the order of their strides broadcast to `shape`
    /// ([`crate::layout::pytorch_dim_order`]), dims of size 1 included.
    pub(crate) fn uninit_iter_output(
        op: &'static str,
        shape: &[usize],
        inputs: &[Layout],
        dtype: DType,
        device: Device,
    ) -> Result<Tensor> {
        let same_shape = inputs.iter().all(|l| l.shape == shape);
        if same_shape && inputs.iter().all(Layout::is_contiguous) {
            return Tensor::uninit(op, shape, dtype, device);
        }
        if let Some(last) = inputs.last() {
            let with = |strides: Vec<usize>| -> Result<Tensor> {
                let t = Tensor::uninit(op, shape, dtype, device)?;
                Ok(t.with_layout(Layout {
                    shape: shape.to_vec(),
                    strides,
                    offset: 0,
                }))
            };
            if same_shape && inputs.iter().all(Layout::is_channels_last_contiguous) {
                return with(crate::layout::channels_last_strides(shape));
            }
            if same_shape
                && inputs
                    .iter()
                    .all(|l| l.is_dense() && l.strides == last.strides)
            {
                return with(last.strides.clone());
            }
        }
        let strides: Vec<Vec<usize>> = inputs.iter().map(|l| l.broadcast_strides(shape)).collect();
        let order = crate::layout::pytorch_dim_order(shape, &strides);
        Tensor::uninit_in_order(op, shape, &order, dtype, device)
    }

    /// A fresh tensor of `self`'s shape and `dtype` laid out as PyTorch's
    /// `empty_like(self, memory_format=torch.preserve_format)` lays it out
    /// ([`crate::layout::preserve_format_strides`]): a non-overlapping and
    /// dense `self` keeps its strides exactly (those of dims of size 1
    /// too), any other becomes dense in the order of its strides.
    /// An empty `self` keeps its strides, whatever they are (PyTorch's
    /// `empty_like` does: they address nothing), so that one whose shape has
    /// no row-major strides below i64::MAX (`[0, 2^62, 2^62]`, a permuted
    /// view of `zeros([2^62, 0, 2^62])`) is accepted as in PyTorch.
    pub(crate) fn uninit_preserving(&self, op: &'static str, dtype: DType) -> Result<Tensor> {
        self.uninit_preserving_on(op, dtype, self.device())
    }

    /// [`Tensor::uninit_preserving`] on `device` (a copy to another device
    /// keeps the layout as PyTorch's `.to(device)` does).
    pub(crate) fn uninit_preserving_on(
        &self,
        op: &'static str,
        dtype: DType,
        device: Device,
    ) -> Result<Tensor> {
        if self.numel() == 0 {
            let t = Tensor::uninit(op, &[0], dtype, device)?;
            return Ok(t.with_layout(self.preserved_layout()));
        }
        let t = Tensor::uninit(op, self.shape(), dtype, device)?;
        if self.is_contiguous() && self.strides() == t.strides() {
            return Ok(t);
        }
        Ok(t.with_layout(self.preserved_layout()))
    }

    /// The layout of [`Tensor::uninit_preserving`]'s result: `self`'s
    /// shape at offset 0, with `self`'s strides where it is empty, else
    /// [`crate::layout::preserve_format_strides`].
    pub(crate) fn preserved_layout(&self) -> Layout {
        let strides = if self.numel() == 0 {
            self.strides().to_vec()
        } else {
            crate::layout::preserve_format_strides(self.shape(), self.strides())
        };
        Layout {
            shape: self.shape().to_vec(),
            strides,
            offset: 0,
        }
    }

    pub(crate) fn storage(&self) -> &Storage {
        &self.inner.storage
    }

    /// The layout (shape, strides, offset).
    pub fn layout(&self) -> &Layout {
        &self.inner.layout
    }

    /// Size of each dimension.
    pub fn shape(&self) -> &[usize] {
        &self.inner.layout.shape
    }

    /// Strides in elements.
    pub fn strides(&self) -> &[usize] {
        &self.inner.layout.strides
    }

    /// Storage offset in elements.
    pub fn offset(&self) -> usize {
        self.inner.layout.offset
    }

    /// Number of dimensions.
    pub fn ndim(&self) -> usize {
        self.inner.layout.ndim()
    }

    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.inner.layout.numel()
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.inner.dtype
    }

    /// The device the storage lives on.
    pub fn device(&self) -> Device {
        self.inner.storage.device()
    }

    /// PyTorch's `is_contiguous()` (size-1 dims ignored; empty tensors are contiguous).
    pub fn is_contiguous(&self) -> bool {
        self.inner.layout.is_contiguous()
    }

    /// The address of the first element in the device's memory (PyTorch's
    /// `data_ptr()`): the storage's allocation plus the view's offset. For a
    /// tensor of no bytes, the allocation's address (0 where nothing was
    /// allocated).
    ///
    /// ```
    /// use strata_tensor::{s, DType, Device, Tensor};
    /// let t = Tensor::zeros(&[4, 4], DType::F32, Device::Cpu)?;
    /// let row = t.i(s![1])?;
    /// assert_eq!(row.data_ptr(), t.data_ptr() + 16);
    /// # Ok::<(), strata_tensor::TensorError>(())
    /// ```
    pub fn data_ptr(&self) -> u64 {
        let base = self.inner.storage.allocation().ptr();
        if self.numel() == 0 {
            return base;
        }
        base + (self.offset() * self.dtype().size()) as u64
    }

    /// An identity of the storage (stable while it lives), equal for all views
    /// of it; see also [`Tensor::same_storage`].
    pub fn storage_ptr(&self) -> u64 {
        // The storage's own address, so zero-byte storages stay distinct.
        Arc::as_ptr(&self.inner.storage) as usize as u64
    }

    /// Whether two tensors are views of the same storage.
    pub fn same_storage(&self, other: &Tensor) -> bool {
        Arc::ptr_eq(&self.inner.storage, &other.inner.storage)
    }

    /// Whether `other` is this very tensor (a clone of the handle, not
    /// another view of the storage): PyTorch's `is_same`, one `TensorImpl`.
    pub(crate) fn is_same(&self, other: &Tensor) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// Elements the storage can hold (in this tensor's dtype).
    pub fn storage_len(&self) -> usize {
        self.inner.storage.nbytes() / self.inner.dtype.size()
    }

    /// Count of in-place modifications of the storage (shared by all views),
    /// for autograd's saved-tensor checks.
    pub fn version(&self) -> u64 {
        self.inner.storage.version()
    }

    pub(crate) fn bump_version(&self) {
        self.inner.storage.bump_version()
    }

    // ----- creation ---------------------------------------------------------

    /// A tensor filled with `value` converted to `dtype`.
    ///
    /// ```
    /// use strata_tensor::{Tensor, DType, Device};
    /// let t = Tensor::full(&[2, 2], 7, DType::I32, Device::Cpu).unwrap();
    /// assert_eq!(t.to_vec::<i32>().unwrap(), vec![7; 4]);
    /// ```
    #[track_caller]
    pub fn full(
        shape: &[usize],
        value: impl Into<Scalar>,
        dtype: DType,
        device: Device,
    ) -> Result<Tensor> {
        let t = Tensor::uninit("full", shape, dtype, device)?;
        t.fill_(value)?;
        Ok(t)
    }

    /// [`Tensor::full`] with signed sizes, as PyTorch's `torch.full`,
    /// `torch.zeros` and `torch.ones` take them: a negative size is a
    /// [`TensorError::Shape`] error (checked before the value, as PyTorch
    /// allocates before it fills).
    ///
    /// ```
    /// use strata_tensor::{Tensor, DType, Device, TensorError};
    /// let e = Tensor::full_sizes(&[2, -1], 0, DType::F32, Device::Cpu).unwrap_err();
    /// assert!(matches!(e, TensorError::Shape { .. }));
    /// ```
    #[track_caller]
    pub fn full_sizes(
        shape: &[i64],
        value: impl Into<Scalar>,
        dtype: DType,
        device: Device,
    ) -> Result<Tensor> {
        if let Some(s) = shape.iter().find(|&&s| s < 0) {
            return Err(TensorError::shape(
                "full",
                format!("trying to create a tensor with negative dimension {s}: {shape:?}"),
            ));
        }
        let shape: Vec<usize> = shape.iter().map(|&s| s as usize).collect();
        Tensor::full(&shape, value, dtype, device)
    }

    /// A tensor of zeros.
    #[track_caller]
    pub fn zeros(shape: &[usize], dtype: DType, device: Device) -> Result<Tensor> {
        Tensor::full(shape, Scalar::Int(0), dtype, device)
    }

    /// A tensor of ones.
    #[track_caller]
    pub fn ones(shape: &[usize], dtype: DType, device: Device) -> Result<Tensor> {
        Tensor::full(shape, Scalar::Int(1), dtype, device)
    }

    /// A 0-d tensor holding `value`.
    #[track_caller]
    pub fn scalar(value: impl Into<Scalar>, dtype: DType, device: Device) -> Result<Tensor> {
        Tensor::full(&[], value, dtype, device)
    }

    /// `torch.arange(start, end, step, dtype)`: `ceil((end - start) / step)`
    /// values `start + i * step`. Without a dtype: i64 when all three are
    /// integers, else f32. PyTorch's checks apply: a nonzero step whose sign
    /// agrees with `end - start`, finite bounds, a length within `i64::MAX`
    /// ([`TensorError::Value`] otherwise), no bool dtype; with an integer
    /// dtype the arguments are truncated toward zero first. The tensor is
    /// allocated first and filled in place on its device.
    ///
    /// ```
    /// use strata_tensor::{Tensor, Device};
    /// let t = Tensor::arange(0, 5, 2, None, Device::Cpu).unwrap();
    /// assert_eq!(t.to_vec::<i64>().unwrap(), vec![0, 2, 4]);
    /// assert!(Tensor::arange(0.0, f64::INFINITY, 1.0, None, Device::Cpu).is_err());
    /// ```
    #[track_caller]
    pub fn arange(
        start: impl Into<Scalar>,
        end: impl Into<Scalar>,
        step: impl Into<Scalar>,
        dtype: Option<DType>,
        device: Device,
    ) -> Result<Tensor> {
        let plan = crate::creation::arange_plan(start.into(), end.into(), step.into(), dtype)?;
        let t = Tensor::generated(&[plan.len], plan.dtype, device, plan.seq)?;
        if let (crate::generate::Sequence::IntRange { start, step }, 1..) = (plan.seq, plan.len) {
            let last = (plan.len as i64)
                .checked_sub(1)
                .and_then(|n| n.checked_mul(step))
                .and_then(|d| d.checked_add(start));
            if let Some(last) = last {
                t.remember_value_range(start.min(last), start.max(last));
            }
        }
        Ok(t)
    }

    /// A tensor from elements in row-major order.
    ///
    /// ```
    /// use strata_tensor::{Tensor, Device};
    /// let t = Tensor::from_slice(&[1i64, 2, 3, 4, 5, 6], &[2, 3], Device::Cpu).unwrap();
    /// assert_eq!(t.shape(), &[2, 3]);
    /// assert!(Tensor::from_slice(&[1i64, 2], &[3], Device::Cpu).is_err());
    /// ```
    #[track_caller]
    pub fn from_slice<T: Element>(data: &[T], shape: &[usize], device: Device) -> Result<Tensor> {
        if shape::check_contiguous("from_slice", shape)? != data.len() {
            return Err(TensorError::shape(
                "from_slice",
                format!("{} elements cannot have shape {shape:?}", data.len()),
            ));
        }
        let t = Tensor::uninit("from_slice", shape, T::DTYPE, device)?;
        // SAFETY: `T: Element` types are plain old data (no padding, every
        // byte initialised), so viewing the slice as bytes is sound.
        let bytes = unsafe {
            std::slice::from_raw_parts(data.as_ptr() as *const u8, std::mem::size_of_val(data))
        };
        t.backend()?.write_from_host(t.storage().mem(), bytes)?;
        t.remember_host_range(bytes);
        Ok(t)
    }

    /// A tensor from a vector of elements in row-major order.
    #[track_caller]
    pub fn from_vec<T: Element>(data: Vec<T>, shape: &[usize], device: Device) -> Result<Tensor> {
        Tensor::from_slice(&data, shape, device)
    }

    /// A tensor of `dtype` from scalars (converted with PyTorch's cast rules).
    #[track_caller]
    pub fn from_scalars(
        values: &[Scalar],
        shape: &[usize],
        dtype: DType,
        device: Device,
    ) -> Result<Tensor> {
        dispatch_dtype!(dtype, T => {
            let v: Vec<T> = values.iter().map(|&s| T::from_scalar(s)).collect();
            Tensor::from_slice(&v, shape, device)
        })
    }

    /// Uniform samples in `[0, 1)` (at the dtype's precision) from the
    /// counter-based Philox generator seeded with `seed`: the same numbers on
    /// every device for the same seed and shape, generated in place (see the
    /// seed and offset semantics in the crate docs' "Random numbers").
    ///
    /// ```
    /// use strata_tensor::{Tensor, DType, Device};
    /// let a = Tensor::rand(&[1000], DType::F32, 7, Device::Cpu).unwrap();
    /// let v = a.to_vec::<f32>().unwrap();
    /// assert!(v.iter().all(|&x| (0.0..1.0).contains(&x)));
    /// // A shorter tensor with the same seed is a prefix.
    /// let b = Tensor::rand(&[10], DType::F32, 7, Device::Cpu).unwrap();
    /// assert_eq!(b.to_vec::<f32>().unwrap(), v[..10].to_vec());
    /// ```
    #[track_caller]
    pub fn rand(shape: &[usize], dtype: DType, seed: u64, device: Device) -> Result<Tensor> {
        Tensor::random_of(shape, dtype, device, "rand", seed, |d| {
            crate::random::Dist::Uniform {
                bits: crate::random::uniform_bits(d),
            }
        })
    }

    /// Standard normal samples from the counter-based Philox generator seeded
    /// with `seed` (Box–Muller; the same stream on every device), generated in place.
    #[track_caller]
    pub fn randn(shape: &[usize], dtype: DType, seed: u64, device: Device) -> Result<Tensor> {
        Tensor::random_of(shape, dtype, device, "randn", seed, |_| {
            crate::random::Dist::Normal
        })
    }

    #[track_caller]
    fn random_of(
        shape: &[usize],
        dtype: DType,
        device: Device,
        op: &'static str,
        seed: u64,
        dist: impl FnOnce(DType) -> crate::random::Dist,
    ) -> Result<Tensor> {
        if !dtype.is_float() {
            return Err(TensorError::unsupported(op, dtype));
        }
        let seq = crate::generate::Sequence::Random {
            dist: dist(dtype),
            seed,
        };
        Tensor::generated(shape, dtype, device, seq)
    }

    // ----- reading ----------------------------------------------------------

    /// The elements in row-major order; `T` must be the tensor's dtype.
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        if T::DTYPE != self.dtype() {
            return Err(TensorError::dtype(
                "to_vec",
                format!(
                    "asked for {} elements of a {} tensor",
                    T::DTYPE,
                    self.dtype()
                ),
            ));
        }
        let c = self.contiguous()?;
        let n = c.numel();
        if n == 0 {
            return Ok(Vec::new());
        }
        // A GPU tensor can be larger than the host's memory: a typed error,
        // not the abort of an infallible reservation.
        let mut out: Vec<T> = Vec::new();
        out.try_reserve_exact(n)
            .map_err(|e| TensorError::SizeOverflow {
                op: "to_vec",
                msg: format!(
                "{n} elements of {} cannot be allocated on the host ({e}); copy a slice at a time \
                 (e.g. `t.narrow(0, start, len)?.to_vec()`)",
                self.dtype()
            ),
            })?;
        let be = c.backend()?;
        let _g = AccessGuard::lock(None, &[c.storage()]);
        // SAFETY: the vector has capacity for `n` elements; viewing its spare
        // capacity as bytes is sound for plain-old-data `T`, and after the
        // copy every one of the `n` elements is initialised.
        unsafe {
            let bytes = std::slice::from_raw_parts_mut(
                out.as_mut_ptr() as *mut u8,
                n * std::mem::size_of::<T>(),
            );
            be.read_to_host(c.storage().mem(), c.offset() * c.dtype().size(), bytes)?;
            out.set_len(n);
        }
        Ok(out)
    }

    /// The elements in row-major order as [`Scalar`]s, whatever the dtype.
    pub fn to_scalars(&self) -> Result<Vec<Scalar>> {
        dispatch_dtype!(self.dtype(), T => Ok(self.to_vec::<T>()?.into_iter().map(|x| x.to_scalar()).collect()))
    }

    /// The single element of a one-element tensor, converted to `T` from
    /// whatever the tensor's dtype is (PyTorch's `item()`: a bf16 loss reads
    /// as `item::<f32>()`; float to integer truncates toward zero).
    pub fn item<T: Element>(&self) -> Result<T> {
        if self.numel() != 1 {
            return Err(TensorError::shape(
                "item",
                format!(
                    "a tensor of shape {:?} has {} elements, not 1",
                    self.shape(),
                    self.numel()
                ),
            ));
        }
        Ok(self.to_vec_as::<T>()?[0])
    }

    /// A copy with fresh storage (PyTorch's `clone()`, whose memory format
    /// is `torch.preserve_format`): a non-overlapping and dense tensor's
    /// copy keeps its strides exactly (`x.t().deep_clone()` is still
    /// transposed), any other's is dense in the order of its strides (a
    /// stepped slice of a transposed tensor gives a transposed copy without
    /// the gaps; an expanded one gives a dense copy), and an empty tensor's
    /// keeps its strides (they address nothing). [`Tensor::clone_contiguous`]
    /// is the row-major copy.
    #[track_caller]
    pub fn deep_clone(&self) -> Result<Tensor> {
        let out = self.uninit_preserving("clone", self.dtype())?;
        out.copy_from_unchecked(self)?;
        self.pass_value_range(&out);
        Ok(out)
    }

    /// A row-major copy with fresh storage, whatever `self`'s layout
    /// (PyTorch's `clone(memory_format=torch.contiguous_format)`). So an
    /// empty tensor whose shape has no row-major strides below i64::MAX
    /// (`[0, 2^62, 2^62]`) is refused ([`TensorError::SizeOverflow`]), as
    /// PyTorch refuses it; its [`Tensor::deep_clone`] keeps its strides.
    #[track_caller]
    pub fn clone_contiguous(&self) -> Result<Tensor> {
        let out = Tensor::uninit("clone", self.shape(), self.dtype(), self.device())?;
        out.copy_from_unchecked(self)?;
        self.pass_value_range(&out);
        Ok(out)
    }

    /// The tensor itself when its strides are row-major on every dim (those
    /// of dims of size 1 too), else a row-major copy: the result of an op
    /// that PyTorch allocates with `at::empty(shape)`.
    pub(crate) fn row_major_exact(&self) -> Result<Tensor> {
        if self.strides() == crate::shape::contiguous_strides(self.shape()) {
            Ok(self.clone())
        } else {
            self.clone_contiguous()
        }
    }

    /// The tensor itself if contiguous, else a row-major copy (PyTorch's
    /// `contiguous()`).
    pub fn contiguous(&self) -> Result<Tensor> {
        if self.is_contiguous() {
            Ok(self.clone())
        } else {
            self.clone_contiguous()
        }
    }

    /// `self.type_as(other)`: [`to_dtype`](Tensor::to_dtype) to `other`'s
    /// dtype (self itself when it already has it).
    #[track_caller]
    pub fn type_as(&self, other: &Tensor) -> Result<Tensor> {
        self.to_dtype(other.dtype())
    }

    /// Conversion to another dtype (the tensor itself for the same dtype),
    /// laid out as PyTorch's `.to(dtype)` lays it out (`_to_copy` with
    /// `torch.preserve_format`, as [`Tensor::deep_clone`]): a
    /// non-overlapping and dense tensor keeps its strides, any other becomes
    /// dense in the order of its strides, an empty one keeps its strides.
    /// [`Tensor::to_dtype_contiguous`] gives a row-major result.
    ///
    /// Float to int truncates toward zero, anything to bool is `!= 0`. A
    /// float that is NaN or out of the integer's range converts as in
    /// PyTorch's x86 CPU kernels: `i32::MIN` for i32, `i64::MIN` for i64,
    /// and the low byte of that i64 conversion for u8 (0 for NaN and ±inf).
    #[track_caller]
    pub fn to_dtype(&self, dtype: DType) -> Result<Tensor> {
        if dtype == self.dtype() {
            return Ok(self.clone());
        }
        let out = self.uninit_preserving("to_dtype", dtype)?;
        if self.numel() > 0 {
            out.copy_from_unchecked(self)?;
            self.pass_value_range(&out);
        }
        Ok(out)
    }

    /// [`Tensor::to_dtype`] with a row-major result for a tensor with
    /// elements (PyTorch's `.to(dtype, memory_format=torch.contiguous_format)`
    /// for another dtype); the tensor itself for its own dtype, whatever its
    /// layout, and an empty tensor keeps its strides (any layout without
    /// elements is contiguous), so that one whose shape has no row-major
    /// strides below i64::MAX (`[0, 2^62, 2^62]`) is converted, not refused.
    #[track_caller]
    pub fn to_dtype_contiguous(&self, dtype: DType) -> Result<Tensor> {
        if dtype == self.dtype() {
            return Ok(self.clone());
        }
        if self.numel() == 0 {
            return self.uninit_preserving("to_dtype", dtype);
        }
        let out = Tensor::uninit("to_dtype", self.shape(), dtype, self.device())?;
        out.copy_from_unchecked(self)?;
        self.pass_value_range(&out);
        Ok(out)
    }

    /// Copies `src` (same shape) into `self`, a fresh tensor no one else sees.
    pub(crate) fn copy_from_unchecked(&self, src: &Tensor) -> Result<()> {
        let be = self.backend()?;
        let _g = AccessGuard::lock(Some(self.storage()), &[src.storage()]);
        be.copy(&self.arg(), &src.arg_as(self.shape()))
    }
}

impl std::fmt::Debug for Tensor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tensor")
            .field("shape", &self.shape())
            .field("strides", &self.strides())
            .field("offset", &self.offset())
            .field("dtype", &self.dtype())
            .field("device", &self.device())
            .finish()
    }
}
