//! `unique` and `unique_consecutive`, of every element or of slices along a
//! dim (session 77).
//!
//! Composed of existing ops, so every device runs them: a stable sort
//! (`unique` only), a comparison of each element (slice) with the one
//! before it, a running sum of the "new" marks that numbers the groups,
//! then the first element of each group, the inverse (the group numbers put
//! back in input order with `scatter`) and the counts (`scatter_add` of
//! ones). The number of groups is read back to the host, as PyTorch reads
//! it. Whole slices (`unique` with a dim) are ordered on the host, as
//! PyTorch's CPU `unique_dim` sorts them: one stable sort of the slice
//! indices whose comparator walks two slices element by element in the
//! element sort's order ([`OrderKey`]), which gives the permutation that
//! stable sorts by each column from the last would (before session 78 it
//! ran those sorts, one per column: seconds for two long slices).
//!
//! As PyTorch's kernels: NaN equals nothing, not even another NaN, so each
//! NaN is a group of its own (after every number in `unique`); -0.0 and
//! 0.0 are one group, represented by whichever comes first in the sorted
//! (stable) order; `unique` always sorts (PyTorch's CPU and CUDA kernels
//! sort whatever `sorted` says).

use crate::dispatch_dtype;
use crate::dtype::{DType, Element};
use crate::error::{Result, TensorError};
use crate::shape::normalize_dim;
use crate::tensor::Tensor;
use rayon::slice::ParallelSliceMut;
use std::cmp::Ordering;

/// An element's key whose unsigned order is the order [`Tensor::sort`]
/// puts values in: for floats NaN (any payload or sign) above +inf and
/// -0.0 equal to 0.0 (otherwise the sign bit flipped for positive values
/// and every bit for negative ones), signed integers with their sign bit
/// flipped, u8 and bool as they are.
trait OrderKey: Element {
    fn order_key(self) -> u64;
}

macro_rules! float_order_key {
    ($t:ty, $bits:expr, $to_bits:expr) => {
        impl OrderKey for $t {
            fn order_key(self) -> u64 {
                if self.is_nan() {
                    return u64::MAX;
                }
                let b: u64 = if self == <$t>::from_f32(0.0) {
                    0
                } else {
                    u64::from($to_bits(self))
                };
                let sign = 1u64 << ($bits - 1);
                if b & sign != 0 {
                    !b & (u64::MAX >> (64 - $bits))
                } else {
                    b | sign
                }
            }
        }
    };
}

/// `from_f32` for the float types the macro covers (half's are inherent).
trait FromF32 {
    fn from_f32(x: f32) -> Self;
}
impl FromF32 for f32 {
    fn from_f32(x: f32) -> Self {
        x
    }
}
impl FromF32 for f64 {
    fn from_f32(x: f32) -> Self {
        f64::from(x)
    }
}
float_order_key!(f32, 32, f32::to_bits);
float_order_key!(f64, 64, f64::to_bits);
float_order_key!(half::f16, 16, half::f16::to_bits);
float_order_key!(half::bf16, 16, half::bf16::to_bits);

impl OrderKey for i32 {
    fn order_key(self) -> u64 {
        u64::from((self as u32) ^ (1 << 31))
    }
}
impl OrderKey for i64 {
    fn order_key(self) -> u64 {
        (self as u64) ^ (1 << 63)
    }
}
impl OrderKey for u8 {
    fn order_key(self) -> u64 {
        u64::from(self)
    }
}
impl OrderKey for bool {
    fn order_key(self) -> u64 {
        u64::from(self)
    }
}

/// Slices this many or more are sorted on rayon's threads (a stable
/// parallel merge sort: the same permutation).
const PARALLEL_SLICES: usize = 1 << 14;

/// The stable lexicographic order of the `n` rows of `cols` elements each
/// in `data` (row-major), comparing elements by [`OrderKey`]: the
/// permutation that stable sorts by each column, from the last to the
/// first, give.
fn lexicographic_order<T: OrderKey>(data: &[T], n: usize, cols: usize) -> Vec<i64> {
    let row = |i: usize| &data[i * cols..(i + 1) * cols];
    let cmp = |&a: &i64, &b: &i64| -> Ordering {
        row(a as usize)
            .iter()
            .zip(row(b as usize))
            .map(|(x, y)| x.order_key().cmp(&y.order_key()))
            .find(|o| o.is_ne())
            .unwrap_or(Ordering::Equal)
    };
    let mut order: Vec<i64> = (0..n as i64).collect();
    if n >= PARALLEL_SLICES {
        order.par_sort_by(cmp);
    } else {
        order.sort_by(cmp);
    }
    order
}

/// What [`Tensor::unique`] and [`Tensor::unique_consecutive`] return:
/// PyTorch's tuple `(output, inverse_indices, counts)`, the last two only
/// when asked for.
#[derive(Debug, Clone)]
pub struct Unique {
    /// The distinct elements (1-D), or the distinct slices along the dim
    /// (the input's shape with that dim shortened).
    pub values: Tensor,
    /// For each input element (the input's shape), or each slice along the
    /// dim (1-D), the index of its value in `values` (i64).
    pub inverse: Option<Tensor>,
    /// How many input elements (slices) each value stands for (i64, 1-D).
    pub counts: Option<Tensor>,
}

/// The groups of a sequence whose element `i` starts a new group where
/// `is_new[i]` (`is_new[0]` is true): the group of each element (i64) and
/// the number of groups.
fn groups(is_new: &Tensor) -> Result<(Tensor, usize)> {
    let n = is_new.numel();
    let group = is_new.cumsum(0, Some(DType::I64))?.sub(1)?;
    let k = group.select(0, n as i64 - 1)?.item::<i64>()? + 1;
    Ok((group, k as usize))
}

/// `[true]` followed by `differs` (bool, 1-D).
/// Where asked, the inverse (each element's group, in the input's order:
/// `group` is in the sorted order `order`, or already in the input's) and
/// the counts of the `k` groups.
fn inverse_and_counts(
    order: Option<&Tensor>,
    group: &Tensor,
    k: usize,
    return_inverse: bool,
    return_counts: bool,
) -> Result<(Option<Tensor>, Option<Tensor>)> {
    let (n, dev) = (group.numel(), group.device());
    let inverse = if return_inverse {
        Some(match order {
            Some(o) => Tensor::zeros(&[n], DType::I64, dev)?.scatter(0, o, group)?,
            None => group.clone(),
        })
    } else {
        None
    };
    let counts = if return_counts {
        let ones = Tensor::ones(&[n], DType::I64, dev)?;
        Some(Tensor::zeros(&[k], DType::I64, dev)?.scatter_add(0, group, &ones)?)
    } else {
        None
    };
    Ok((inverse, counts))
}

fn first_and(differs: &Tensor) -> Result<Tensor> {
    let first = Tensor::ones(&[1], DType::Bool, differs.device())?;
    Tensor::cat(&[&first, differs], 0)
}

impl Tensor {
    /// `torch.unique(self, sorted, return_inverse, return_counts, dim)`:
    /// the distinct elements of self in ascending order (1-D), or with
    /// `dim` the distinct slices along `dim` in lexicographic order; with
    /// `return_inverse` the index of each element's (slice's) value, with
    /// `return_counts` how often each value occurs. The values are always
    /// sorted, as PyTorch's are (`sorted` is accepted for its signature).
    ///
    /// Without `dim` every dtype works, a 0-d input gives one value and a
    /// 0-d inverse, an empty one no values and an empty inverse of its
    /// shape. With `dim`: a dim of size 0 gives an empty result of self's
    /// shape when no other dim is 0. NaN equals nothing (each NaN its own
    /// value); -0.0 equals 0.0. (PyTorch's CPU sort of slices holding NaN
    /// compares them with `<` and `>` only, an order that is not one;
    /// strata puts a NaN after every number there as everywhere.) Among
    /// equal sort keys strata keeps input order; PyTorch's CPU sort does
    /// too up to 16 elements and leaves the order unspecified beyond, so
    /// there the inverse indices of several NaNs, and whether -0.0 or 0.0
    /// stands for zero, may differ from PyTorch's.
    ///
    /// Errors: `dim` out of range or given for a 0-d input
    /// ([`TensorError::Dim`]); with `dim`, a zero-sized dim other than
    /// `dim` ([`TensorError::Shape`]).
    ///
    /// ```
    /// use strata_tensor::{Tensor, Device};
    /// let x = Tensor::from_slice(&[2i64, 1, 2, 5, 1], &[5], Device::Cpu).unwrap();
    /// let u = x.unique(true, true, true, None).unwrap();
    /// assert_eq!(u.values.to_vec::<i64>().unwrap(), vec![1, 2, 5]);
    /// assert_eq!(u.inverse.unwrap().to_vec::<i64>().unwrap(), vec![1, 0, 1, 2, 0]);
    /// assert_eq!(u.counts.unwrap().to_vec::<i64>().unwrap(), vec![2, 2, 1]);
    /// let rows = Tensor::from_slice(&[1i64, 2, 0, 5, 1, 2], &[3, 2], Device::Cpu).unwrap();
    /// let u = rows.unique(true, false, true, Some(0)).unwrap();
    /// assert_eq!(u.values.to_vec::<i64>().unwrap(), vec![0, 5, 1, 2]);
    /// assert_eq!(u.counts.unwrap().to_vec::<i64>().unwrap(), vec![1, 2]);
    /// ```
    pub fn unique(
        &self,
        sorted: bool,
        return_inverse: bool,
        return_counts: bool,
        dim: Option<i64>,
    ) -> Result<Unique> {
        let _ = sorted;
        match dim {
            None => self.unique_flat(false, return_inverse, return_counts),
            Some(d) => self.unique_dim("unique", d, false, return_inverse, return_counts),
        }
    }

    /// `torch.unique_consecutive(self, return_inverse, return_counts, dim)`:
    /// [`Tensor::unique`] of each run of equal consecutive elements (of
    /// the flattened input, or of slices along `dim`), in input order,
    /// without sorting: `[1, 1, 2, 1]` gives `[1, 2, 1]`.
    ///
    /// Errors: those of [`Tensor::unique`].
    ///
    /// ```
    /// use strata_tensor::{Tensor, Device};
    /// let x = Tensor::from_slice(&[1.0f32, 1.0, 2.0, 1.0, f32::NAN, f32::NAN], &[6], Device::Cpu).unwrap();
    /// let u = x.unique_consecutive(true, true, None).unwrap();
    /// assert_eq!(u.values.numel(), 5); // 1, 2, 1, NaN, NaN
    /// assert_eq!(u.inverse.unwrap().to_vec::<i64>().unwrap(), vec![0, 0, 1, 2, 3, 4]);
    /// assert_eq!(u.counts.unwrap().to_vec::<i64>().unwrap(), vec![2, 1, 1, 1, 1]);
    /// ```
    pub fn unique_consecutive(
        &self,
        return_inverse: bool,
        return_counts: bool,
        dim: Option<i64>,
    ) -> Result<Unique> {
        match dim {
            None => self.unique_flat(true, return_inverse, return_counts),
            Some(d) => {
                self.unique_dim("unique_consecutive", d, true, return_inverse, return_counts)
            }
        }
    }

    /// `unique` (`consecutive` false) or `unique_consecutive` of every
    /// element.
    fn unique_flat(
        &self,
        consecutive: bool,
        return_inverse: bool,
        return_counts: bool,
    ) -> Result<Unique> {
        let dev = self.device();
        let n = self.numel();
        if n == 0 {
            return Ok(Unique {
                values: Tensor::zeros(&[0], self.dtype(), dev)?,
                inverse: if return_inverse {
                    Some(Tensor::zeros(self.shape(), DType::I64, dev)?)
                } else {
                    None
                },
                counts: if return_counts {
                    Some(Tensor::zeros(&[0], DType::I64, dev)?)
                } else {
                    None
                },
            });
        }
        let flat = self.reshape(&[-1])?;
        let (seq, order) = if consecutive {
            (flat, None)
        } else {
            let (v, i) = flat.sort(0, false, true)?;
            (v, Some(i))
        };
        let m = n as i64 - 1;
        let differs = seq.narrow(0, 1, m)?.ne(&seq.narrow(0, 0, m)?)?;
        let is_new = first_and(&differs)?;
        let (group, k) = groups(&is_new)?;
        let values = seq.masked_select(&is_new)?;
        let shape: Vec<i64> = self.shape().iter().map(|&s| s as i64).collect();
        let (inverse, counts) =
            inverse_and_counts(order.as_ref(), &group, k, return_inverse, return_counts)?;
        Ok(Unique {
            values,
            inverse: inverse.map(|i| i.reshape(&shape)).transpose()?,
            counts,
        })
    }

    /// `unique` or `unique_consecutive` of the slices along `dim`.
    fn unique_dim(
        &self,
        op: &'static str,
        dim: i64,
        consecutive: bool,
        return_inverse: bool,
        return_counts: bool,
    ) -> Result<Unique> {
        if self.ndim() == 0 {
            return Err(TensorError::dim(
                op,
                format!("dimension specified as {dim} but the tensor has no dimensions"),
            ));
        }
        let d = normalize_dim(op, dim, self.ndim())?;
        let dev = self.device();
        let zero_dims = self.shape().iter().filter(|&&s| s == 0).count();
        let empty_i64 = || Tensor::zeros(&[0], DType::I64, dev);
        if self.shape()[d] == 0 {
            if zero_dims != 1 {
                return Err(TensorError::shape(
                    op,
                    format!(
                        "more than one dim of shape {:?} has size 0, so unique cannot be applied",
                        self.shape()
                    ),
                ));
            }
            return Ok(Unique {
                values: Tensor::zeros(self.shape(), self.dtype(), dev)?,
                inverse: if return_inverse {
                    Some(empty_i64()?)
                } else {
                    None
                },
                counts: if return_counts {
                    Some(empty_i64()?)
                } else {
                    None
                },
            });
        }
        if zero_dims > 0 {
            return Err(TensorError::shape(
                op,
                format!(
                    "shape {:?} has dims of size 0 other than dim {d}, so unique cannot be applied",
                    self.shape()
                ),
            ));
        }
        // The slices as rows: dim first, the other dims flattened.
        let mut perm: Vec<i64> = vec![d as i64];
        perm.extend((0..self.ndim() as i64).filter(|&i| i != d as i64));
        let moved = self.permute(&perm)?;
        let n = self.shape()[d];
        let rows = moved.reshape(&[n as i64, -1])?;
        let cols = rows.shape()[1];
        let (sorted_rows, order) = if consecutive {
            (rows, None)
        } else {
            // One stable lexicographic sort of the slices, on the host.
            let order = dispatch_dtype!(rows.dtype(), T => {
                lexicographic_order::<T>(&rows.to_vec::<T>()?, n, cols)
            });
            let order = Tensor::from_slice(&order, &[n], dev)?;
            (rows.index_select(0, &order)?, Some(order))
        };
        let m = n as i64 - 1;
        let differs = sorted_rows
            .narrow(0, 1, m)?
            .ne(&sorted_rows.narrow(0, 0, m)?)?
            .any_dim(1, false)?;
        let is_new = first_and(&differs)?;
        let (group, k) = groups(&is_new)?;
        let firsts = is_new.nonzero()?.reshape(&[-1])?;
        let mut shape: Vec<i64> = moved.shape().iter().map(|&s| s as i64).collect();
        shape[0] = k as i64;
        let mut back: Vec<i64> = vec![0; self.ndim()];
        for (i, &p) in perm.iter().enumerate() {
            back[p as usize] = i as i64;
        }
        let values = sorted_rows
            .index_select(0, &firsts)?
            .reshape(&shape)?
            .permute(&back)?;
        let (inverse, counts) =
            inverse_and_counts(order.as_ref(), &group, k, return_inverse, return_counts)?;
        Ok(Unique {
            values,
            inverse,
            counts,
        })
    }
}
