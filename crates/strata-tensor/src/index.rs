//! Indexing views with a slice list, in the spirit of ndarray's `s![]` and
//! PyTorch's `x[:, 1:3, ::2, -1]`: [`s!`] builds the list, [`Tensor::i`]
//! applies it. Every result is a view (no element is copied).

use crate::error::{Result, TensorError};
use crate::tensor::Tensor;
use std::ops::{Range, RangeFrom, RangeFull, RangeInclusive, RangeTo, RangeToInclusive};

/// One entry of an index list: a single index (drops the dim) or a range
/// with a step. Negative numbers count from the end, as in Python.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SliceItem {
    /// `x[i]`: index `i` of the dim, which is dropped.
    Index(i64),
    /// `x[start:end:step]` (Python's slice rules, `step >= 1`).
    Range {
        /// First index (`None`: the beginning).
        start: Option<i64>,
        /// One past the last index (`None`: the end).
        end: Option<i64>,
        /// Step (at least 1).
        step: i64,
    },
}

impl SliceItem {
    /// The same range with another step (`s![..;2]` calls this); an index
    /// stays an index.
    pub fn step_by(self, step: i64) -> SliceItem {
        match self {
            SliceItem::Range { start, end, .. } => SliceItem::Range { start, end, step },
            i => i,
        }
    }
}

macro_rules! slice_item_from {
    ($($t:ty),*) => {$(
        impl From<$t> for SliceItem {
            fn from(i: $t) -> SliceItem {
                SliceItem::Index(to_i64(i))
            }
        }
        impl From<Range<$t>> for SliceItem {
            fn from(r: Range<$t>) -> SliceItem {
                SliceItem::Range { start: Some(to_i64(r.start)), end: Some(to_i64(r.end)), step: 1 }
            }
        }
        impl From<RangeFrom<$t>> for SliceItem {
            fn from(r: RangeFrom<$t>) -> SliceItem {
                SliceItem::Range { start: Some(to_i64(r.start)), end: None, step: 1 }
            }
        }
        impl From<RangeTo<$t>> for SliceItem {
            fn from(r: RangeTo<$t>) -> SliceItem {
                SliceItem::Range { start: None, end: Some(to_i64(r.end)), step: 1 }
            }
        }
        impl From<RangeInclusive<$t>> for SliceItem {
            fn from(r: RangeInclusive<$t>) -> SliceItem {
                SliceItem::Range { start: Some(to_i64(*r.start())), end: inclusive_end(to_i64(*r.end())), step: 1 }
            }
        }
        impl From<RangeToInclusive<$t>> for SliceItem {
            fn from(r: RangeToInclusive<$t>) -> SliceItem {
                SliceItem::Range { start: None, end: inclusive_end(to_i64(r.end)), step: 1 }
            }
        }
    )*};
}
slice_item_from!(i32, i64, usize);

/// An index or bound as i64. A `usize` above `i64::MAX` saturates to
/// `i64::MAX` (past the end of every dim: an out-of-range index, an empty or
/// full range) instead of wrapping to a negative index counted from the end.
fn to_i64<T: TryInto<i64>>(v: T) -> i64 {
    v.try_into().unwrap_or(i64::MAX)
}

/// `..=e` as an exclusive end: `..=-1` reaches the last element.
fn inclusive_end(e: i64) -> Option<i64> {
    // `..=-1` and `..=i64::MAX` run to the end of the dim (`e + 1` would be
    // 0, or would overflow).
    if e == -1 {
        None
    } else {
        e.checked_add(1)
    }
}

impl From<RangeFull> for SliceItem {
    fn from(_: RangeFull) -> SliceItem {
        SliceItem::Range {
            start: None,
            end: None,
            step: 1,
        }
    }
}

/// An index list for [`Tensor::i`]: ranges (`1..3`, `..`, `2..`, `..=4`),
/// ranges with a step (`..;2`, `1..;3`), single indices that drop their dim
/// (`0`, `-1`), one entry per leading dim (the rest are kept whole).
///
/// ```
/// use strata_tensor::{s, Tensor, Device};
/// let x = Tensor::arange(0, 24, 1, None, Device::Cpu)?.view(&[2, 3, 4])?;
/// let v = x.i(s![.., 1..3, ..;2])?;            // x[:, 1:3, ::2]
/// assert_eq!(v.shape(), &[2, 2, 2]);
/// assert_eq!(v.to_vec::<i64>()?, vec![4, 6, 8, 10, 16, 18, 20, 22]);
/// let last = x.i(s![-1, 0])?;                    // x[-1, 0]
/// assert_eq!(last.to_vec::<i64>()?, vec![12, 13, 14, 15]);
/// assert!(x.i(s![0, 0, 0, 0]).is_err());         // too many indices
/// # Ok::<(), strata_tensor::TensorError>(())
/// ```
#[macro_export]
macro_rules! s {
    (@acc [$($acc:expr),*]) => { [$($acc),*] };
    (@acc [$($acc:expr),*] $r:expr ; $step:expr , $($rest:tt)*) => {
        $crate::s!(@acc [$($acc,)* $crate::SliceItem::from($r).step_by($step)] $($rest)*)
    };
    (@acc [$($acc:expr),*] $r:expr ; $step:expr) => {
        $crate::s!(@acc [$($acc,)* $crate::SliceItem::from($r).step_by($step)])
    };
    (@acc [$($acc:expr),*] $r:expr , $($rest:tt)*) => {
        $crate::s!(@acc [$($acc,)* $crate::SliceItem::from($r)] $($rest)*)
    };
    (@acc [$($acc:expr),*] $r:expr) => {
        $crate::s!(@acc [$($acc,)* $crate::SliceItem::from($r)])
    };
    ($($t:tt)*) => { $crate::s!(@acc [] $($t)*) };
}

impl Tensor {
    /// A view selected by an index list built with [`s!`]: `x.i(s![.., 1..3])`
    /// is PyTorch's `x[:, 1:3]`. Errors name the entry that does not fit.
    pub fn i(&self, index: impl AsRef<[SliceItem]>) -> Result<Tensor> {
        let items = index.as_ref();
        if items.len() > self.ndim() {
            return Err(TensorError::index(
                "i",
                format!(
                    "{} indices for a tensor of shape {:?} ({} dims)",
                    items.len(),
                    self.shape(),
                    self.ndim()
                ),
            ));
        }
        let mut out = self.clone();
        let mut dim = 0i64;
        for item in items {
            out = match *item {
                SliceItem::Index(i) => out.select(dim, i)?,
                SliceItem::Range { start, end, step } => {
                    dim += 1;
                    out.slice(dim - 1, start, end, step)?
                }
            };
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use crate::{Device, Tensor};
    use proptest::prelude::*;

    fn py_range(n: i64, start: Option<i64>, end: Option<i64>, step: i64) -> Vec<i64> {
        let clamp = |v: i64| if v < 0 { (v + n).max(0) } else { v.min(n) };
        let (s, e) = (start.map_or(0, clamp), end.map_or(n, clamp));
        (s..e).step_by(step as usize).collect()
    }

    proptest! {
        // x.i(s![a..b;step, k]) picks the same elements as Python's x[a:b:step, k].
        #[test]
        fn matches_python_slicing(rows in 1usize..7, cols in 1usize..5,
                                  a in -8i64..8, b in -8i64..8, step in 1i64..4, k in 0usize..5) {
            let x = Tensor::arange(0, (rows * cols) as i64, 1, None, Device::Cpu).unwrap()
                .view(&[rows as i64, cols as i64]).unwrap();
            let k = (k % cols) as i64 - cols as i64; // a negative column
            let v = x.i(crate::s![a..b;step, k]).unwrap();
            let want: Vec<i64> = py_range(rows as i64, Some(a), Some(b), step).iter()
                .map(|r| r * cols as i64 + (k + cols as i64)).collect();
            prop_assert_eq!(v.shape(), &[want.len()][..]);
            prop_assert_eq!(v.to_vec::<i64>().unwrap(), want);
            prop_assert!(v.same_storage(&x));
        }
    }

    #[test]
    fn forms_and_errors() {
        let x = Tensor::arange(0, 12, 1, None, Device::Cpu)
            .unwrap()
            .view(&[3, 4])
            .unwrap();
        assert_eq!(x.i(crate::s![..]).unwrap().shape(), &[3, 4]);
        assert_eq!(
            x.i(crate::s![1]).unwrap().to_vec::<i64>().unwrap(),
            vec![4, 5, 6, 7]
        );
        assert_eq!(
            x.i(crate::s![..=1, 2..]).unwrap().to_vec::<i64>().unwrap(),
            vec![2, 3, 6, 7]
        );
        assert_eq!(
            x.i(crate::s![-2..=-1, -1])
                .unwrap()
                .to_vec::<i64>()
                .unwrap(),
            vec![7, 11]
        );
        assert_eq!(
            x.i(crate::s![..;2, 1..;2])
                .unwrap()
                .to_vec::<i64>()
                .unwrap(),
            vec![1, 3, 9, 11]
        );
        assert!(x.i(crate::s![3]).is_err()); // out of range
        assert!(x.i(crate::s![..;0]).is_err()); // zero step
        assert!(x.i(crate::s![0, 0, 0]).is_err()); // too many
    }
}
