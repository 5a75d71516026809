//! Coordinate grids: `meshgrid`, `cartesian_prod`, and the index lists of a
//! matrix's triangles, `tril_indices`/`triu_indices` (session 77).
//!
//! `meshgrid` returns views (each input viewed along its own dim and
//! expanded), as PyTorch's; `cartesian_prod` stacks their flattened copies.
//! The triangle indices are made on the device from `arange`s: the rows
//! that hold any index, each repeated as often as it holds indices
//! (`repeat_interleave`), and each index's column from its position in its
//! row; the host computes only the count (PyTorch's closed form, in 128-bit
//! integers so that no argument wraps) and the first and last such row.

use crate::dtype::DType;
use crate::error::{Result, TensorError};
use crate::ops::elementwise::same_device;
use crate::tensor::Tensor;
use strata_alloc::Device;

/// PyTorch's `get_tril_size`: the number of positions `(r, c)` of a
/// `row x col` matrix with `c - r <= offset`.
fn tril_size(row: i128, col: i128, offset: i128) -> i128 {
    if row == 0 || col == 0 {
        return 0;
    }
    let m_first_row = if offset > 0 {
        col.min(1 + offset)
    } else {
        i128::from(row + offset > 0)
    };
    let m_last_row = col.min(row + offset).max(0);
    let n_row_all = row.min(row + offset).max(0);
    let n_row_trapezoid = m_last_row - m_first_row + 1;
    let mut size = (m_first_row + m_last_row) * n_row_trapezoid / 2;
    let diff_row = n_row_all - n_row_trapezoid;
    if diff_row > 0 {
        size += diff_row * col;
    }
    size
}

impl Tensor {
    /// `torch.meshgrid(*tensors, indexing)`: for `k` tensors of 0 or 1 dims
    /// (a 0-d one counts as one element) with sizes `n_1..n_k`, `k` grids of
    /// shape `[n_1, .., n_k]`, grid `i` holding tensor `i`'s element along
    /// dim `i` (`indexing = "ij"`); with `"xy"` the first two dims are
    /// swapped (`[n_2, n_1, n_3, ..]`, Cartesian order). The grids are
    /// views of the inputs (expanded, stride 0 along the other dims), as
    /// PyTorch's.
    ///
    /// Errors: no tensors, an indexing other than "ij" or "xy"
    /// ([`TensorError::Value`]), tensors of different dtypes
    /// ([`TensorError::DType`]) or devices, a tensor of 2 dims or more
    /// ([`TensorError::Shape`]).
    ///
    /// ```
    /// use strata_tensor::{Tensor, Device};
    /// let x = Tensor::from_slice(&[1i64, 2, 3], &[3], Device::Cpu).unwrap();
    /// let y = Tensor::from_slice(&[4i64, 5], &[2], Device::Cpu).unwrap();
    /// let g = Tensor::meshgrid(&[&x, &y], "ij").unwrap();
    /// assert_eq!(g[0].shape(), &[3, 2]);
    /// assert_eq!(g[0].contiguous().unwrap().to_vec::<i64>().unwrap(), vec![1, 1, 2, 2, 3, 3]);
    /// assert_eq!(g[1].contiguous().unwrap().to_vec::<i64>().unwrap(), vec![4, 5, 4, 5, 4, 5]);
    /// let g = Tensor::meshgrid(&[&x, &y], "xy").unwrap();
    /// assert_eq!(g[0].shape(), &[2, 3]);
    /// ```
    pub fn meshgrid(tensors: &[&Tensor], indexing: &str) -> Result<Vec<Tensor>> {
        const OP: &str = "meshgrid";
        if tensors.is_empty() {
            return Err(TensorError::value(
                OP,
                "expects a non-empty list of tensors",
            ));
        }
        for w in tensors.windows(2) {
            if w[0].dtype() != w[1].dtype() {
                return Err(TensorError::dtype(
                    OP,
                    format!(
                        "expects all tensors to have the same dtype, got {} and {}",
                        w[0].dtype(),
                        w[1].dtype()
                    ),
                ));
            }
            same_device(OP, w[0], w[1])?;
        }
        let swap = match indexing {
            "xy" => tensors.len() >= 2,
            "ij" => false,
            other => {
                return Err(TensorError::value(
                    OP,
                    format!("indexing must be one of \"xy\" or \"ij\", got {other:?}"),
                ))
            }
        };
        let mut refs: Vec<&Tensor> = tensors.to_vec();
        if swap {
            refs.swap(0, 1);
        }
        let mut shape = Vec::with_capacity(refs.len());
        for t in &refs {
            if t.ndim() > 1 {
                return Err(TensorError::shape(
                    OP,
                    format!(
                        "expected 0-d or 1-D tensors, got one of shape {:?}",
                        t.shape()
                    ),
                ));
            }
            shape.push(t.numel() as i64);
        }
        let mut grids = Vec::with_capacity(refs.len());
        let mut view = vec![1i64; refs.len()];
        for (i, t) in refs.iter().enumerate() {
            view[i] = -1;
            grids.push(t.reshape(&view)?.expand(&shape)?);
            view[i] = 1;
        }
        if swap {
            grids.swap(0, 1);
        }
        Ok(grids)
    }

    /// `torch.cartesian_prod(*tensors)`: every combination of one element
    /// of each 1-D tensor, in row-major order, as the rows of a
    /// `[n_1 * .. * n_k, k]` tensor; a single tensor is returned itself
    /// (the same storage, as PyTorch returns it).
    ///
    /// Errors: a tensor that is not 1-D ([`TensorError::Shape`]), and those
    /// of [`Tensor::meshgrid`] (no tensors, different dtypes).
    ///
    /// ```
    /// use strata_tensor::{Tensor, Device};
    /// let a = Tensor::from_slice(&[1i64, 2], &[2], Device::Cpu).unwrap();
    /// let b = Tensor::from_slice(&[3i64, 4, 5], &[3], Device::Cpu).unwrap();
    /// let p = Tensor::cartesian_prod(&[&a, &b]).unwrap();
    /// assert_eq!(p.shape(), &[6, 2]);
    /// assert_eq!(p.to_vec::<i64>().unwrap(), vec![1, 3, 1, 4, 1, 5, 2, 3, 2, 4, 2, 5]);
    /// ```
    pub fn cartesian_prod(tensors: &[&Tensor]) -> Result<Tensor> {
        for t in tensors {
            if t.ndim() != 1 {
                return Err(TensorError::shape(
                    "cartesian_prod",
                    format!("expected 1-D tensors, got one of shape {:?}", t.shape()),
                ));
            }
        }
        if let [one] = tensors {
            return Ok((*one).clone());
        }
        let grids = Tensor::meshgrid(tensors, "ij")?;
        let flat = grids
            .iter()
            .map(|g| g.reshape(&[-1]))
            .collect::<Result<Vec<_>>>()?;
        let refs: Vec<&Tensor> = flat.iter().collect();
        Tensor::stack(&refs, 1)
    }

    /// `torch.tril_indices(row, col, offset, dtype)`: the coordinates of the
    /// lower triangle of a `row x col` matrix, the positions `(r, c)` with
    /// `c - r <= offset` (0: the main diagonal and below; positive: that
    /// many diagonals above it too), as a `[2, n]` tensor of rows then
    /// columns, in row-major order; dtype i64 (default) or i32.
    ///
    /// Errors: a negative `row` or `col`, an `offset` whose sum with `row`
    /// overflows i64 (PyTorch's sizes wrap there; `offset - 1` for
    /// [`Tensor::triu_indices`]) ([`TensorError::Value`]), a dtype other
    /// than i64 or i32 ([`TensorError::DType`]), a count too large to
    /// allocate.
    ///
    /// ```
    /// use strata_tensor::{Tensor, Device};
    /// let t = Tensor::tril_indices(3, 3, 0, None, Device::Cpu).unwrap();
    /// assert_eq!(t.to_vec::<i64>().unwrap(), vec![0, 1, 1, 2, 2, 2, 0, 0, 1, 0, 1, 2]);
    /// let t = Tensor::tril_indices(2, 4, 1, None, Device::Cpu).unwrap();
    /// assert_eq!(t.to_vec::<i64>().unwrap(), vec![0, 0, 1, 1, 1, 0, 1, 0, 1, 2]);
    /// ```
    pub fn tril_indices(
        row: i64,
        col: i64,
        offset: i64,
        dtype: Option<DType>,
        device: Device,
    ) -> Result<Tensor> {
        Tensor::triangle_indices("tril_indices", false, row, col, offset, dtype, device)
    }

    /// `torch.triu_indices(row, col, offset, dtype)`: the coordinates of the
    /// upper triangle of a `row x col` matrix, the positions `(r, c)` with
    /// `c - r >= offset`, as [`Tensor::tril_indices`] gives the lower.
    ///
    /// Errors: those of [`Tensor::tril_indices`].
    ///
    /// ```
    /// use strata_tensor::{Tensor, Device, DType};
    /// let t = Tensor::triu_indices(3, 3, 1, Some(DType::I32), Device::Cpu).unwrap();
    /// assert_eq!(t.to_vec::<i32>().unwrap(), vec![0, 0, 1, 1, 2, 2]);
    /// ```
    pub fn triu_indices(
        row: i64,
        col: i64,
        offset: i64,
        dtype: Option<DType>,
        device: Device,
    ) -> Result<Tensor> {
        Tensor::triangle_indices("triu_indices", true, row, col, offset, dtype, device)
    }

    fn triangle_indices(
        op: &'static str,
        upper: bool,
        row: i64,
        col: i64,
        offset: i64,
        dtype: Option<DType>,
        device: Device,
    ) -> Result<Tensor> {
        let dtype = dtype.unwrap_or(DType::I64);
        if row < 0 || col < 0 {
            let (what, v) = if row < 0 { ("row", row) } else { ("col", col) };
            return Err(TensorError::value(
                op,
                format!("{what} must be non-negative, got {v}"),
            ));
        }
        if !matches!(dtype, DType::I64 | DType::I32) {
            return Err(TensorError::dtype(
                op,
                format!("the dtype must be i64 or i32, got {dtype}"),
            ));
        }
        let (r, c, o) = (i128::from(row), i128::from(col), i128::from(offset));
        // PyTorch sizes the triangle in 64-bit integers (`row + offset`, and
        // `offset - 1` for the upper one); an offset that overflows them
        // gives its errors or a wrong count ("negative dimension", 8 indices
        // of a 5 x 2 lower triangle for offset i64::MAX), so it is refused.
        let shifted = if upper { o - 1 } else { o };
        if row > 0
            && col > 0
            && (shifted < i128::from(i64::MIN) || r + shifted > i128::from(i64::MAX))
        {
            return Err(TensorError::value(
                op,
                format!(
                    "offset {offset} overflows 64-bit index arithmetic with {row} rows; \
                     an offset within [-row, col] selects the same triangles"
                ),
            ));
        }
        let size = if upper {
            r * c - tril_size(r, c, o - 1)
        } else {
            tril_size(r, c, o)
        };
        let n = usize::try_from(size)
            .ok()
            .filter(|&n| n <= i64::MAX as usize / 2)
            .ok_or_else(|| {
                TensorError::overflow(
                    op,
                    format!("{size} indices of a {row} x {col} matrix do not fit in a tensor"),
                )
            })?;
        // Allocate the result first: a count too large fails here, before
        // any work proportional to it.
        let out = Tensor::empty(&[2, n], DType::I64, device)?;
        if n == 0 {
            return out.to_dtype(dtype);
        }
        // The rows holding indices, [r0, r1): the lower triangle's start at
        // -offset; the upper triangle's end at col - offset.
        let (r0, r1) = if upper {
            (0, r.min(c - o))
        } else {
            ((-o).max(0), r)
        };
        let (r0, r1) = (r0 as i64, r1 as i64);
        let rows = Tensor::arange(r0, r1, 1i64, Some(DType::I64), device)?;
        // Each row's first column and its number of indices.
        let (first, counts) = if upper {
            let first = rows.add(offset)?.clamp(Some(0i64), None::<i64>)?;
            let counts = first.neg()?.add(col)?;
            (first, counts)
        } else {
            // Beyond `col` every row is full: the smaller offset cannot wrap.
            let first = Tensor::zeros(rows.shape(), DType::I64, device)?;
            let counts = rows
                .add(offset.min(col))?
                .add(1)?
                .clamp(None::<i64>, Some(col))?;
            (first, counts)
        };
        let row_of = rows.repeat_interleave(&counts, Some(0))?;
        // Position within its row: the index minus the row's start in the
        // flat list (an exclusive running sum of the counts).
        let starts = counts.cumsum(0, None)?.sub(&counts)?;
        let shift = first.sub(&starts)?.repeat_interleave(&counts, Some(0))?;
        let col_of = Tensor::arange(0i64, n as i64, 1i64, Some(DType::I64), device)?.add(&shift)?;
        out.select(0, 0)?.copy_(&row_of)?;
        out.select(0, 1)?.copy_(&col_of)?;
        out.to_dtype(dtype)
    }
}
