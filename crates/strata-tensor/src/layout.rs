//! Device-independent strided layouts (shape, strides in elements, storage
//! offset) and the view transforms on them. Nothing here touches memory.

use crate::error::{Result, TensorError};
use crate::shape::{self, normalize_dim, normalize_dim_strict};

/// How a tensor's elements sit in its storage.
///
/// The fields are public, so a layout may be built by hand with a stride
/// list whose length differs from the shape's ([`Layout::is_well_formed`]
/// says no). No method indexes past the shorter list: the view transforms
/// refuse such a layout with [`TensorError::Shape`], and the predicates
/// answer conservatively (not contiguous, not dense, may overlap, no
/// extent, no indices).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Size of each dimension.
    pub shape: Vec<usize>,
    /// Distance in elements between neighbours along each dimension.
    pub strides: Vec<usize>,
    /// Element index of the first element in the storage.
    pub offset: usize,
}

impl Layout {
    /// A row-major layout at offset 0.
    pub fn contiguous(shape: &[usize]) -> Layout {
        Layout {
            shape: shape.to_vec(),
            strides: shape::contiguous_strides(shape),
            offset: 0,
        }
    }

    /// Number of dimensions.
    pub fn ndim(&self) -> usize {
        self.shape.len()
    }

    /// Whether the layout has exactly one stride per size (every layout a
    /// tensor has does; one built by hand may not).
    pub fn is_well_formed(&self) -> bool {
        self.shape.len() == self.strides.len()
    }

    /// [`TensorError::Shape`] naming `op` for a layout that is not
    /// [well formed](Layout::is_well_formed).
    fn check_well_formed(&self, op: &'static str) -> Result<()> {
        if self.is_well_formed() {
            return Ok(());
        }
        Err(TensorError::shape(
            op,
            format!(
                "malformed layout: {} sizes {:?} but {} strides {:?}; give one stride per dim \
                 (Layout::contiguous builds a row-major layout)",
                self.shape.len(),
                self.shape,
                self.strides.len(),
                self.strides
            ),
        ))
    }

    /// Number of elements.
    pub fn numel(&self) -> usize {
        shape::numel(&self.shape)
    }

    /// PyTorch's `is_contiguous`: row-major, ignoring dims of size 1; any
    /// tensor without elements is contiguous.
    /// A malformed layout (see [`Layout::is_well_formed`]) is not.
    pub fn is_contiguous(&self) -> bool {
        if !self.is_well_formed() {
            return false;
        }
        if self.numel() == 0 {
            return true;
        }
        let mut expected = 1usize;
        for d in (0..self.ndim()).rev() {
            if self.shape[d] != 1 {
                if self.strides[d] != expected {
                    return false;
                }
                // Saturates only past usize (a hand-built shape), where no
                // later stride can match anyway.
                expected = expected.saturating_mul(self.shape[d]);
            }
        }
        true
    }

    /// Whether the elements fill a gap-free block of memory without aliasing,
    /// in some dim order (PyTorch's `is_non_overlapping_and_dense`: the
    /// strides of dims of size 0 and 1 do not count, and a tensor without
    /// elements is dense, as it is contiguous). A malformed layout (see
    /// [`Layout::is_well_formed`]) is not.
    pub fn is_dense(&self) -> bool {
        if !self.is_well_formed() {
            return false;
        }
        if self.numel() == 0 {
            return true;
        }
        let mut dims: Vec<usize> = (0..self.ndim()).filter(|&d| self.shape[d] > 1).collect();
        dims.sort_by_key(|&d| self.strides[d]);
        let mut expected = 1;
        for d in dims {
            if self.strides[d] != expected {
                return false;
            }
            expected = expected.saturating_mul(self.shape[d]);
        }
        true
    }

    /// PyTorch's `is_contiguous(memory_format=torch.channels_last)`: a 4-D
    /// layout dense in the dim order 1, 3, 2, 0 (innermost first), dims of
    /// size 1 not counting; any other rank is not. (TensorIterator's fast
    /// path asks only this, never `torch.channels_last_3d`: same-shape 5-D
    /// operands keep their common dense strides, size-1 dims' included.)
    pub(crate) fn is_channels_last_contiguous(&self) -> bool {
        if !self.is_well_formed() || self.ndim() != 4 {
            return false;
        }
        let mut expected = 1usize;
        for &d in channels_last_order(4).expect("4-D has a channels-last order") {
            if self.shape[d] != 1 {
                if self.strides[d] != expected {
                    return false;
                }
                expected = expected.saturating_mul(self.shape[d]);
            }
        }
        true
    }

    /// PyTorch's `is_strides_like_channels_last` (`is_channels_last_strides_2d`)
    /// for a 4-D layout and `is_strides_like_channels_last_3d`
    /// (`is_channels_last_strides_3d`) for a 5-D one, which make
    /// `suggest_memory_format` answer channels-last(-3d): no dim of size 0,
    /// strides that do not decrease in the dim order [`channels_last_order`],
    /// each at least the previous one times its size (where that size is
    /// above 1), with PyTorch's tie rules (a channel stride of 0, or a batch
    /// stride equal to the channel stride, is not channels-last). Any other
    /// rank is not.
    pub(crate) fn is_strides_like_channels_last(&self) -> bool {
        let Some(order) = channels_last_order(self.ndim()) else {
            return false;
        };
        if !self.is_well_formed() || self.strides[1] == 0 {
            return false;
        }
        let mut min = 0usize;
        for &d in order {
            if self.shape[d] == 0 || self.strides[d] < min {
                return false;
            }
            if d == 0 && min == self.strides[1] {
                return false;
            }
            min = self.strides[d];
            if self.shape[d] > 1 {
                min = min.saturating_mul(self.shape[d]);
            }
        }
        true
    }

    /// Whether two elements share an address (a stride 0 on a dim of size > 1).
    pub fn has_internal_overlap(&self) -> bool {
        self.shape
            .iter()
            .zip(&self.strides)
            .any(|(&s, &st)| s > 1 && st == 0)
    }

    /// Whether two elements might share an address: stride 0 on a dim of
    /// size > 1, or strides too small to keep dims apart (a sufficient test:
    /// each dim, in stride order, must step past everything the faster dims
    /// cover). A malformed layout (see [`Layout::is_well_formed`]) may.
    pub fn may_overlap(&self) -> bool {
        if !self.is_well_formed() {
            return true;
        }
        // No element, no alias (PyTorch writes into an empty expanded tensor).
        if self.numel() == 0 {
            return false;
        }
        let mut dims: Vec<usize> = (0..self.ndim()).filter(|&d| self.shape[d] > 1).collect();
        dims.sort_by_key(|&d| self.strides[d]);
        let mut covered = 0usize;
        for d in dims {
            if self.strides[d] <= covered || self.strides[d] == 0 {
                return true;
            }
            covered = covered.saturating_add((self.shape[d] - 1).saturating_mul(self.strides[d]));
        }
        false
    }

    /// One past the largest storage index the layout touches (0 if it has no
    /// elements); saturates at `usize::MAX` (see [`Layout::checked_extent`]).
    pub fn storage_extent(&self) -> usize {
        self.checked_extent().unwrap_or(usize::MAX)
    }

    /// One past the largest storage index the layout touches (0 if it has no
    /// elements), or `None` when that exceeds [`shape::MAX_NUMEL`] or the
    /// layout is malformed (see [`Layout::is_well_formed`]).
    pub fn checked_extent(&self) -> Option<usize> {
        if !self.is_well_formed() {
            return None;
        }
        if self.numel() == 0 {
            return Some(0);
        }
        let mut end = self.offset;
        for (&s, &st) in self.shape.iter().zip(&self.strides) {
            end = end.checked_add((s - 1).checked_mul(st)?)?;
        }
        end.checked_add(1).filter(|&e| e <= shape::MAX_NUMEL)
    }

    /// Swaps two dims.
    pub fn transpose(&self, d0: i64, d1: i64) -> Result<Layout> {
        self.check_well_formed("transpose")?;
        let a = normalize_dim("transpose", d0, self.ndim())?;
        let b = normalize_dim("transpose", d1, self.ndim())?;
        let mut l = self.clone();
        if self.ndim() > 0 {
            l.shape.swap(a, b);
            l.strides.swap(a, b);
        }
        Ok(l)
    }

    /// `t()`: transpose of a 2-D layout; 0-d and 1-D unchanged.
    pub fn t(&self) -> Result<Layout> {
        self.check_well_formed("t")?;
        match self.ndim() {
            0 | 1 => Ok(self.clone()),
            2 => self.transpose(0, 1),
            n => Err(TensorError::shape(
                "t",
                format!(
                    "t() expects a tensor with <= 2 dims, got shape {:?} ({n} dims)",
                    self.shape
                ),
            )),
        }
    }

    /// Reorders the dims.
    pub fn permute(&self, dims: &[i64]) -> Result<Layout> {
        self.check_well_formed("permute")?;
        if dims.len() != self.ndim() {
            return Err(TensorError::shape(
                "permute",
                format!(
                    "permute of shape {:?} needs {} dims, got {dims:?}",
                    self.shape,
                    self.ndim()
                ),
            ));
        }
        let dims = shape::normalize_dims("permute", dims, self.ndim())?;
        Ok(Layout {
            shape: dims.iter().map(|&d| self.shape[d]).collect(),
            strides: dims.iter().map(|&d| self.strides[d]).collect(),
            offset: self.offset,
        })
    }

    /// `narrow(dim, start, length)`; `start` may be negative.
    pub fn narrow(&self, dim: i64, start: i64, length: i64) -> Result<Layout> {
        self.check_well_formed("narrow")?;
        // PyTorch checks the length before the dim (but after rejecting 0-d).
        if length < 0 && self.ndim() > 0 {
            return Err(TensorError::value(
                "narrow",
                format!("length {length} must be non-negative"),
            ));
        }
        let d = normalize_dim_strict("narrow", dim, self.ndim())?;
        let size = self.shape[d] as i64;
        if start < -size || start > size {
            return Err(TensorError::index(
                "narrow",
                format!(
                    "start {start} out of range for dimension {d} of size {size} (shape {:?})",
                    self.shape
                ),
            ));
        }
        let start = if start < 0 { start + size } else { start };
        if length > size - start {
            return Err(TensorError::index(
                "narrow",
                format!("start {start} + length {length} exceeds dimension {d} of size {size} (shape {:?})", self.shape),
            ));
        }
        let mut l = self.clone();
        l.shape[d] = length as usize;
        // Also for an empty result, as PyTorch (narrow(0, 1, 0) of a
        // one-element tensor is at offset 1, which `as_strided` then checks).
        l.offset = self.view_offset("narrow", start as usize, d)?;
        Ok(l)
    }

    /// The storage offset of index `i` along dim `d`: `offset + i *
    /// stride`. Within a view that has elements it stays inside the
    /// storage, but an empty view may have any strides (it addresses
    /// nothing), so the sum is checked: beyond `i64::MAX` it is
    /// [`TensorError::SizeOverflow`] (PyTorch: "invalid storage offset"),
    /// never a wrapped offset.
    fn view_offset(&self, op: &'static str, i: usize, d: usize) -> Result<usize> {
        i.checked_mul(self.strides[d])
            .and_then(|step| self.offset.checked_add(step))
            .filter(|&o| o <= shape::MAX_NUMEL)
            .ok_or_else(|| {
                TensorError::overflow(
                    op,
                    format!(
                        "the view would start at storage offset {} + {i} * {} (index {i} of dimension {d} \
                         of shape {:?}, strides {:?}), beyond {} (i64::MAX); such a view holds no \
                         element (only empty views have strides that reach so far): take it from a \
                         tensor with smaller strides (e.g. `contiguous()` first)",
                        self.offset,
                        self.strides[d],
                        self.shape,
                        self.strides,
                        shape::MAX_NUMEL
                    ),
                )
            })
    }

    /// `select(dim, index)`: drops the dim.
    pub fn select(&self, dim: i64, index: i64) -> Result<Layout> {
        self.check_well_formed("select")?;
        let d = normalize_dim_strict("select", dim, self.ndim())?;
        let size = self.shape[d] as i64;
        if index < -size || index >= size {
            return Err(TensorError::index(
                "select",
                format!(
                    "index {index} out of range for dimension {d} of size {size} (shape {:?})",
                    self.shape
                ),
            ));
        }
        let i = if index < 0 { index + size } else { index } as usize;
        let mut l = self.clone();
        l.offset = self.view_offset("select", i, d)?;
        l.shape.remove(d);
        l.strides.remove(d);
        Ok(l)
    }

    /// `x[..., start:end:step]` along `dim` with Python's slice rules.
    pub fn slice(
        &self,
        dim: i64,
        start: Option<i64>,
        end: Option<i64>,
        step: i64,
    ) -> Result<Layout> {
        self.check_well_formed("slice")?;
        // PyTorch checks the dim before the step.
        let d = normalize_dim_strict("slice", dim, self.ndim())?;
        if step <= 0 {
            return Err(TensorError::value(
                "slice",
                format!("slice step must be positive, got {step}"),
            ));
        }
        let size = self.shape[d] as i64;
        let clamp = |v: i64| {
            let v = if v < 0 { v + size } else { v };
            v.clamp(0, size)
        };
        let s = clamp(start.unwrap_or(0));
        let e = clamp(end.unwrap_or(size));
        let len = if e > s { (e - s - 1) / step + 1 } else { 0 };
        let mut l = self.clone();
        l.shape[d] = len as usize;
        l.strides[d] = self.stepped_stride(d, step as usize);
        // Also for an empty result, as PyTorch (`x[4:]` of 4 rows of 3 is
        // at offset 12).
        l.offset = self.view_offset("slice", s as usize, d)?;
        Ok(l)
    }

    /// Dim `d`'s stride taken every `step` elements (by `slice` and
    /// `unfold`). With two or more elements the stepped stride stays inside
    /// the storage; otherwise it addresses nothing and only must not wrap,
    /// so an overflowing product keeps the dim's own stride.
    fn stepped_stride(&self, d: usize, step: usize) -> usize {
        self.strides[d]
            .checked_mul(step)
            .filter(|&st| st <= shape::MAX_NUMEL)
            .unwrap_or(self.strides[d])
    }

    /// `unfold(dim, size, step)`: the windows of `size` elements every
    /// `step` along `dim`, as PyTorch's `Tensor.unfold`. `dim` keeps the
    /// window count `(len - size) / step + 1` (stride `step` times its
    /// own) and a new last dim of `size` walks one window. A 0-d layout
    /// has one window of at most one element.
    pub fn unfold(&self, dim: i64, size: i64, step: i64) -> Result<Layout> {
        self.check_well_formed("unfold")?;
        let d = normalize_dim("unfold", dim, self.ndim())?;
        let max = if self.ndim() == 0 { 1 } else { self.shape[d] };
        if size < 0 {
            return Err(TensorError::value(
                "unfold",
                format!("size is {size} but must be >= 0"),
            ));
        }
        if size as u64 > max as u64 {
            return Err(TensorError::value(
                "unfold",
                format!(
                    "maximum size for tensor at dimension {d} is {max} but size is {size} \
                     (shape {:?})",
                    self.shape
                ),
            ));
        }
        if step <= 0 {
            return Err(TensorError::value(
                "unfold",
                format!("step is {step} but must be > 0"),
            ));
        }
        let mut l = self.clone();
        if self.ndim() == 0 {
            l.shape.push(size as usize);
            l.strides.push(1);
            return Ok(l);
        }
        let (size, step) = (size as usize, step as usize);
        l.shape[d] = (self.shape[d] - size) / step + 1;
        l.strides[d] = self.stepped_stride(d, step);
        l.shape.push(size);
        l.strides.push(self.strides[d]);
        Ok(l)
    }

    /// `expand(shape)`: stretched size-1 dims and new leading dims of another
    /// size get stride 0; -1 keeps a size. A new leading dim of size 1 gets
    /// the next dim's size times its stride, as in PyTorch.
    pub fn expand(&self, target: &[i64]) -> Result<Layout> {
        self.check_well_formed("expand")?;
        let err = || {
            TensorError::shape(
                "expand",
                format!("cannot expand shape {:?} to {target:?}", self.shape),
            )
        };
        if target.len() < self.ndim() {
            return Err(err());
        }
        let lead = target.len() - self.ndim();
        let mut shape = Vec::with_capacity(target.len());
        let mut strides = Vec::with_capacity(target.len());
        for (i, &t) in target.iter().enumerate() {
            if i < lead {
                if t < 0 {
                    return Err(err());
                }
                shape.push(t as usize);
                strides.push(0);
                continue;
            }
            let (s, st) = (self.shape[i - lead], self.strides[i - lead]);
            if t == -1 || t as usize == s && t >= 0 {
                shape.push(s);
                strides.push(st);
            } else if t < 0 || s != 1 {
                return Err(err());
            } else {
                shape.push(t as usize);
                strides.push(0);
            }
        }
        // PyTorch's `inferExpandGeometry`: a new leading dim of size 1 takes
        // the stride of the dim after it times that dim's size (of a 0-d
        // tensor's expansion, 0), so that `x.expand(1, n)` of a contiguous
        // `x` is contiguous on every dim.
        for i in (0..lead).rev() {
            if shape[i] == 1 {
                strides[i] = match (self.ndim(), shape.get(i + 1)) {
                    (0, _) | (_, None) => 0,
                    (_, Some(&next)) => next.saturating_mul(strides[i + 1]).min(shape::MAX_NUMEL),
                };
            }
        }
        shape::checked_numel("expand", &shape)?;
        Ok(Layout {
            shape,
            strides,
            offset: self.offset,
        })
    }

    /// Removes the given size-1 dims (all size-1 dims when `dims` is `None`);
    /// a listed dim whose size is not 1 is kept.
    pub fn squeeze(&self, dims: Option<&[i64]>) -> Result<Layout> {
        self.check_well_formed("squeeze")?;
        let remove: Vec<usize> = match dims {
            None => (0..self.ndim()).filter(|&d| self.shape[d] == 1).collect(),
            Some(ds) => shape::normalize_dims("squeeze", ds, self.ndim())?
                .into_iter()
                .filter(|&d| d < self.ndim() && self.shape[d] == 1)
                .collect(),
        };
        let keep = |d: &usize| !remove.contains(d);
        Ok(Layout {
            shape: (0..self.ndim())
                .filter(keep)
                .map(|d| self.shape[d])
                .collect(),
            strides: (0..self.ndim())
                .filter(keep)
                .map(|d| self.strides[d])
                .collect(),
            offset: self.offset,
        })
    }

    /// Inserts a size-1 dim at `dim` (in `[-ndim-1, ndim]`).
    pub fn unsqueeze(&self, dim: i64) -> Result<Layout> {
        self.check_well_formed("unsqueeze")?;
        let d = normalize_dim("unsqueeze", dim, self.ndim() + 1)?;
        let stride = if d < self.ndim() {
            // Addresses nothing (the new dim has size 1); saturate, never wrap.
            self.shape[d]
                .saturating_mul(self.strides[d])
                .min(shape::MAX_NUMEL)
        } else {
            1
        };
        let mut l = self.clone();
        l.shape.insert(d, 1);
        l.strides.insert(d, stride);
        Ok(l)
    }

    /// A layout over the same storage with explicit sizes, strides and offset,
    /// checked against a storage of `storage_len` elements.
    pub fn as_strided(
        size: &[i64],
        stride: &[i64],
        offset: i64,
        storage_len: usize,
    ) -> Result<Layout> {
        if size.len() != stride.len() {
            return Err(TensorError::shape(
                "as_strided",
                format!("size {size:?} and stride {stride:?} have different lengths"),
            ));
        }
        if let Some(s) = size.iter().find(|&&s| s < 0) {
            return Err(TensorError::shape(
                "as_strided",
                format!("negative size {s} in {size:?}"),
            ));
        }
        if let Some(s) = stride.iter().find(|&&s| s < 0) {
            return Err(TensorError::value(
                "as_strided",
                format!("negative stride {s} in {stride:?}"),
            ));
        }
        if offset < 0 {
            return Err(TensorError::value(
                "as_strided",
                format!("negative storage offset {offset}"),
            ));
        }
        let l = Layout {
            shape: size.iter().map(|&s| s as usize).collect(),
            strides: stride.iter().map(|&s| s as usize).collect(),
            offset: offset as usize,
        };
        // The extent first, as PyTorch's `setStorage`: a view reaching past
        // its storage is a bounds error even when its sizes multiply past
        // i64 (sizes [2^63 - 1, 2], strides [1, 0] over one element).
        let Some(needed) = l.checked_extent() else {
            return Err(TensorError::overflow(
                "as_strided",
                format!(
                    "the view of size {size:?}, stride {stride:?}, offset {offset} reaches past element {} (i64::MAX)",
                    shape::MAX_NUMEL
                ),
            ));
        };
        if needed > storage_len {
            return Err(TensorError::OutOfBounds {
                shape: l.shape,
                strides: l.strides,
                offset: l.offset,
                needed,
                available: storage_len,
            });
        }
        shape::checked_numel("as_strided", &l.shape)?;
        Ok(l)
    }

    /// Broadcast strides of this layout against a (broadcast) `target` shape:
    /// new leading dims and stretched size-1 dims get stride 0.
    pub(crate) fn broadcast_strides(&self, target: &[usize]) -> Vec<usize> {
        let lead = target.len() - self.ndim();
        (0..target.len())
            .map(|i| {
                if i < lead || self.shape[i - lead] != target[i] {
                    0
                } else {
                    self.strides[i - lead]
                }
            })
            .collect()
    }

    /// Storage index of each element in row-major logical order. A layout
    /// [`Layout::checked_extent`] refuses (malformed, or reaching past
    /// `i64::MAX`) yields nothing: its positions would index past the
    /// strides or wrap.
    pub fn indices(&self) -> impl Iterator<Item = usize> + '_ {
        let n = if self.checked_extent().is_some() {
            self.numel()
        } else {
            0
        };
        let nd = self.ndim();
        let mut idx = vec![0usize; nd];
        let mut pos = self.offset;
        (0..n).map(move |k| {
            if k > 0 {
                let mut d = nd;
                while d > 0 {
                    d -= 1;
                    idx[d] += 1;
                    pos += self.strides[d];
                    if idx[d] < self.shape[d] {
                        break;
                    }
                    pos -= self.strides[d] * idx[d];
                    idx[d] = 0;
                }
            }
            pos
        })
    }
}

/// The order (innermost first) in which PyTorch's TensorIterator walks the
/// dims of an element-wise op whose output it allocates, from the inputs'
/// strides broadcast to `shape`; the output is then dense in this order.
/// See [`pytorch_reorder_dims`].
pub(crate) fn pytorch_dim_order(shape: &[usize], inputs: &[Vec<usize>]) -> Vec<usize> {
    let inputs: Vec<&[usize]> = inputs.iter().map(Vec::as_slice).collect();
    reorder_dims(shape, None, &inputs)
}

/// The strides PyTorch gives a fresh tensor laid out like one of `shape`
/// and `strides` (`empty_like(x, memory_format=torch.preserve_format)`, as
/// `.to(dtype)`, `clone()` and `zeros_like` allocate): a non-overlapping and
/// dense layout's own strides, else dense in the order of its strides
/// (`infer_dense_strides`: TensorIterator's order of one operand, a stride
/// of 0 left where it is).
pub(crate) fn preserve_format_strides(shape: &[usize], strides: &[usize]) -> Vec<usize> {
    let l = Layout {
        shape: shape.to_vec(),
        strides: strides.to_vec(),
        offset: 0,
    };
    if l.is_dense() {
        return l.strides;
    }
    dense_strides_in_order(shape, &reorder_dims(shape, None, &[strides]))
}

/// The dim order (innermost first) of PyTorch's channels-last memory
/// formats: `torch.channels_last` for 4-D (1, 3, 2, 0) and
/// `torch.channels_last_3d` for 5-D (1, 4, 3, 2, 0); no other rank has one.
pub(crate) fn channels_last_order(ndim: usize) -> Option<&'static [usize]> {
    match ndim {
        4 => Some(&[1, 3, 2, 0]),
        5 => Some(&[1, 4, 3, 2, 0]),
        _ => None,
    }
}

/// The strides of a fresh 4-D or 5-D tensor in PyTorch's channels-last
/// format (`get_channels_last_strides_2d`/`_3d`: dense in the dim order
/// [`channels_last_order`]; a size of 0 makes the outer strides 0); any other
/// rank is row-major.
pub(crate) fn channels_last_strides(shape: &[usize]) -> Vec<usize> {
    match channels_last_order(shape.len()) {
        Some(order) => dense_strides_in_order(shape, order),
        None => dense_strides_in_order(shape, &(0..shape.len()).rev().collect::<Vec<_>>()),
    }
}

/// Strides dense in `order` (innermost dim first): the layout PyTorch's
/// TensorIterator gives an output it allocates (`compatible_stride`).
pub(crate) fn dense_strides_in_order(shape: &[usize], order: &[usize]) -> Vec<usize> {
    let mut strides = vec![0usize; shape.len()];
    let mut s = 1usize;
    for &d in order {
        strides[d] = s;
        // An empty tensor's strides address nothing: they saturate rather
        // than wrap where its other sizes are huge.
        s = s.saturating_mul(shape[d]);
    }
    strides
}

/// PyTorch's TensorIterator `reorder_dimensions`, innermost dim first: an
/// insertion sort from the innermost dim out whose `should_swap` compares
/// each operand's strides in turn (the output's first, when there is one),
/// skipping a broadcast (0) stride, a tie broken by the smaller size first,
/// and keeps scanning past an undecided comparison. `reduced_output` is a
/// reduction's output strides (0 along reduced dims): a dim reduced in it
/// goes inside one that is not, as in PyTorch.
///
/// ```
/// use strata_tensor::layout::pytorch_reorder_dims;
/// // A transposed 2 x 3 operand (strides 1, 2): dim 0 is innermost.
/// assert_eq!(pytorch_reorder_dims(&[2, 3], None, &[&[1, 2]])?, [0, 1]);
/// // Contiguous (strides 3, 1): dim 1 is innermost.
/// assert_eq!(pytorch_reorder_dims(&[2, 3], None, &[&[3, 1]])?, [1, 0]);
/// // An operand needs one stride per dim.
/// assert!(pytorch_reorder_dims(&[2, 3], None, &[&[1]]).is_err());
/// # Ok::<(), strata_tensor::TensorError>(())
/// ```
///
/// Errors: [`TensorError::Shape`] when `reduced_output` or an input has
/// not one stride per dim of `shape`.
pub fn pytorch_reorder_dims(
    shape: &[usize],
    reduced_output: Option<&[usize]>,
    inputs: &[&[usize]],
) -> Result<Vec<usize>> {
    const OP: &str = "pytorch_reorder_dims";
    for (k, st) in reduced_output
        .into_iter()
        .chain(inputs.iter().copied())
        .enumerate()
    {
        check_operand_strides(OP, shape, k, st)?;
    }
    Ok(reorder_dims(shape, reduced_output, inputs))
}

/// [`TensorError::Shape`] naming `op` unless operand `k`'s `strides` has
/// one stride per dim of `shape`.
fn check_operand_strides(
    op: &'static str,
    shape: &[usize],
    k: usize,
    strides: &[usize],
) -> Result<()> {
    if strides.len() == shape.len() {
        return Ok(());
    }
    Err(TensorError::shape(
        op,
        format!(
            "operand {k} has {} strides {strides:?} for the {} dims of shape {shape:?}; give \
             each operand one stride per dim (its strides broadcast to the shape)",
            strides.len(),
            shape.len()
        ),
    ))
}

/// [`pytorch_reorder_dims`] for operands known to have one stride per dim
/// (strata's own tensors and their broadcasts).
pub(crate) fn reorder_dims(
    shape: &[usize],
    reduced_output: Option<&[usize]>,
    inputs: &[&[usize]],
) -> Vec<usize> {
    let nd = shape.len();
    let should_swap = |d0: usize, d1: usize| -> i32 {
        let operands = reduced_output
            .map(|o| (o, true))
            .into_iter()
            .chain(inputs.iter().map(|&st| (st, false)));
        for (st, is_output) in operands {
            let (s0, s1) = (st[d0], st[d1]);
            if is_output && ((s0 == 0) != (s1 == 0)) {
                return if s1 == 0 { 1 } else { -1 };
            }
            if s0 == 0 || s1 == 0 {
                continue;
            } else if s0 < s1 {
                return -1;
            } else if s0 > s1 {
                return 1;
            }
            if shape[d0] > shape[d1] {
                return 1;
            }
        }
        0
    };
    let mut perm: Vec<usize> = (0..nd).rev().collect();
    for i in 1..nd {
        let mut dim1 = i;
        for dim0 in (0..i).rev() {
            let c = should_swap(perm[dim0], perm[dim1]);
            if c > 0 {
                perm.swap(dim0, dim1);
                dim1 = dim0;
            } else if c < 0 {
                break;
            }
        }
    }
    perm
}

/// Which elements of an element-wise op PyTorch's CPU `cpu_kernel_vec`
/// hands to its scalar functor rather than its vectorised one, in
/// row-major order of `shape` (`None` when there is none). `order` is
/// TensorIterator's order of the dims (innermost first,
/// [`pytorch_reorder_dims`]); `strides` are the operands' strides, the
/// output's first (as PyTorch allocates it, dense in `order`, when it
/// does); `chunk` is how many elements one step of `vectorized_loop` takes
/// (two vectors: 32 for f16/bf16 under AVX2). TensorIterator coalesces the
/// dims in `order` (`coalesce_dimensions`), then runs each inner row with
/// the vectorised loop when every operand is contiguous along it (or one
/// input has stride 0 there and the others are contiguous), leaving the
/// last `size % chunk` elements of the row to the scalar functor, and runs
/// every element with the scalar functor otherwise (`basic_loop`); a 0-d
/// op is one scalar element. One thread: `parallel_for`'s grain (32,768
/// elements) would split rows under several.
///
/// ```
/// use strata_tensor::layout::pytorch_scalar_loop_mask;
/// // 35 contiguous elements: the last 3 take the scalar loop.
/// let m = pytorch_scalar_loop_mask(&[35], &[0], &[&[1], &[1]], 32)?.unwrap();
/// assert_eq!(m.iter().filter(|&&b| b).count(), 3);
/// // A stepped input: every element.
/// let m = pytorch_scalar_loop_mask(&[64], &[0], &[&[1], &[2]], 32)?.unwrap();
/// assert!(m.iter().all(|&b| b));
/// assert!(pytorch_scalar_loop_mask(&[64], &[0], &[&[1], &[1]], 32)?.is_none());
/// // A chunk of 0 elements is refused.
/// assert!(pytorch_scalar_loop_mask(&[64], &[0], &[&[1], &[1]], 0).is_err());
/// # Ok::<(), strata_tensor::TensorError>(())
/// ```
///
/// Errors, before anything is computed: [`TensorError::Shape`] when `order`
/// is not a permutation of the dims, `strides` is empty (the output's come
/// first) or an operand has not one stride per dim; [`TensorError::Value`]
/// for a `chunk` of 0; [`TensorError::SizeOverflow`] when `shape` has more
/// than [`shape::MAX_NUMEL`] elements or the mask (one `bool` per element)
/// cannot be allocated.
pub fn pytorch_scalar_loop_mask(
    shape: &[usize],
    order: &[usize],
    strides: &[&[usize]],
    chunk: usize,
) -> Result<Option<Vec<bool>>> {
    const OP: &str = "pytorch_scalar_loop_mask";
    let nd = shape.len();
    let mut seen = vec![false; nd];
    if order.len() != nd
        || !order
            .iter()
            .all(|&d| d < nd && !std::mem::replace(&mut seen[d], true))
    {
        return Err(TensorError::shape(
            OP,
            format!(
                "order {order:?} is not a permutation of the {nd} dims of shape {shape:?}; pass \
                 each dim once, innermost first (pytorch_reorder_dims gives TensorIterator's order)"
            ),
        ));
    }
    if strides.is_empty() {
        return Err(TensorError::shape(
            OP,
            "no operand strides given; pass the output's strides first, then each input's",
        ));
    }
    for (k, st) in strides.iter().enumerate() {
        check_operand_strides(OP, shape, k, st)?;
    }
    if chunk == 0 {
        return Err(TensorError::value(
            OP,
            "chunk must be at least 1 (the elements one step of the vectorised loop takes: 32 \
             for f16/bf16, 16 for f32 under AVX2)",
        ));
    }
    let n = shape::checked_numel(OP, shape)?;
    if n == 0 {
        return Ok(None);
    }
    // Dims and strides in iteration order, then coalesced as PyTorch's.
    let mut sh: Vec<usize> = order.iter().map(|&d| shape[d]).collect();
    let mut st: Vec<Vec<usize>> = strides
        .iter()
        .map(|s| order.iter().map(|&d| s[d]).collect())
        .collect();
    // How many dims of `order` fold into the inner dim.
    let mut inner_dims = sh.len().min(1);
    let mut prev = 0;
    for dim in 1..sh.len() {
        let can = sh[prev] == 1
            || sh[dim] == 1
            || st
                .iter()
                .all(|s| sh[prev].checked_mul(s[prev]) == Some(s[dim]));
        if can {
            if sh[prev] == 1 {
                for s in st.iter_mut() {
                    s[prev] = s[dim];
                }
            }
            sh[prev] *= sh[dim];
            if prev == 0 {
                inner_dims = dim + 1;
            }
        } else {
            prev += 1;
            if prev != dim {
                for s in st.iter_mut() {
                    s[prev] = s[dim];
                }
                sh[prev] = sh[dim];
            }
        }
    }
    let n0 = sh.first().copied().unwrap_or(1);
    let inner: Vec<usize> = st.iter().map(|s| s.first().copied().unwrap_or(1)).collect();
    let inputs = &inner[1..];
    let vectorized = !shape.is_empty()
        && inner[0] == 1
        && (inputs.iter().all(|&s| s == 1)
            || (inputs.iter().filter(|&&s| s == 0).count() == 1 && inputs.iter().all(|&s| s <= 1)));
    let first_scalar = if vectorized { n0 - n0 % chunk } else { 0 };
    if first_scalar == n0 {
        return Ok(None);
    }
    // Each element's position along the (coalesced) inner dim, from its
    // coordinates along the dims folded into it.
    let mut weight = vec![0usize; nd];
    let mut acc = 1;
    for &d in &order[..inner_dims] {
        weight[d] = acc;
        acc *= shape[d];
    }
    let mut mask = Vec::new();
    mask.try_reserve_exact(n).map_err(|e| {
        TensorError::overflow(
            OP,
            format!("a mask of {n} elements cannot be allocated on the host ({e}); ask for a smaller shape"),
        )
    })?;
    let mut coord = vec![0usize; nd];
    for _ in 0..n {
        let j: usize = coord.iter().zip(&weight).map(|(c, w)| c * w).sum();
        mask.push(j >= first_scalar);
        for d in (0..nd).rev() {
            coord[d] += 1;
            if coord[d] < shape[d] {
                break;
            }
            coord[d] = 0;
        }
    }
    Ok(Some(mask))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slicing_with_step() {
        let l = Layout::contiguous(&[4, 6]);
        let s = l.slice(1, Some(1), None, 2).unwrap();
        assert_eq!(
            (s.shape.clone(), s.strides.clone(), s.offset),
            (vec![4, 3], vec![6, 2], 1)
        );
        assert!(!s.is_contiguous());
        assert_eq!(s.indices().take(4).collect::<Vec<_>>(), vec![1, 3, 5, 7]);
        assert!(l.slice(0, None, None, 0).is_err());
    }

    #[test]
    fn expand_and_overlap() {
        let l = Layout::contiguous(&[3, 1]);
        let e = l.expand(&[2, 3, 4]).unwrap();
        assert_eq!(e.strides, vec![0, 1, 0]);
        assert!(e.has_internal_overlap());
        assert!(e.may_overlap());
        let diag = Layout::as_strided(&[3, 3], &[1, 1], 0, 9).unwrap();
        assert!(!diag.has_internal_overlap() && diag.may_overlap());
        assert!(!Layout::contiguous(&[3, 4]).t().unwrap().may_overlap());
        assert!(!Layout::contiguous(&[4, 6])
            .slice(1, None, None, 2)
            .unwrap()
            .may_overlap());
        assert!(l.expand(&[3, 4, 2]).is_err());
    }

    #[test]
    fn bounds_are_checked() {
        assert!(Layout::as_strided(&[4, 4], &[4, 1], 0, 12).is_err());
        assert!(Layout::as_strided(&[3, 4], &[4, 1], 0, 12).is_ok());
        // Past the storage before past i64 in elements: PyTorch's bounds
        // error (its setStorage), not a size overflow.
        assert!(matches!(
            Layout::as_strided(&[i64::MAX, 2], &[1, 0], 0, 1),
            Err(TensorError::OutOfBounds { .. })
        ));
        // Inside the storage with sizes multiplying past i64: a size error.
        assert!(matches!(
            Layout::as_strided(&[1 << 62, 4], &[0, 0], 0, 1),
            Err(TensorError::SizeOverflow { .. })
        ));
    }
}
