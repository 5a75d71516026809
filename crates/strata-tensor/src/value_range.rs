//! Cached value ranges of integer tensors, so that index checks
//! (`embedding`, `index_select`, `gather`, `scatter_add`, cross-entropy's
//! targets) need no device read in the common case.
//!
//! An index check must see every value of the index tensor: on a GPU that
//! is a read back to the host, a synchronisation that costs more than the
//! gather itself. Where the values are known without reading the device,
//! the storage remembers `[lo, hi]`, the range of **all** its elements (so
//! every view of it is covered), with the storage's write stamp at that
//! moment:
//!
//! * host data copied in ([`Tensor::from_slice`] and what builds on it,
//!   `from_raw_bytes`, and a CPU tensor copied to a GPU): the range is
//!   computed on the host side of the copy;
//! * [`Tensor::randint`] (`[low, high - 1]`) and integer [`Tensor::arange`]
//!   (its first and last values);
//! * a copy of a tensor whose range is known (`contiguous`, `deep_clone`,
//!   `to_dtype` into an integer dtype that holds the range, device copies);
//! * cross-entropy's targets once its check has read them: every target in
//!   `[lo, hi]` *or equal to `ignore_index`* (a range with an exception,
//!   used only by that check), so that the backward's check of the same
//!   targets reads nothing.
//!
//! The range is trusted only while the stamp is unchanged. The stamp is
//! (writes, version): `writes` counts every write lock a kernel takes on the
//! storage (`Storage::write`, which every strata write path goes through:
//! element-wise ops with an output, `copy_`, `fill_`, `scatter_add_`,
//! `masked_scatter`, `index_put`-like ops, device copies into it) and every
//! version bump. Anything else (a range never recorded, a stale one, another
//! dtype viewing the bytes) falls back to reading the extremes from the
//! device. As defence in depth the gather and scatter kernels of both
//! backends also bound every index they read (an out-of-range index reads
//! zeros or adds nothing), so even a wrong range cannot cause an
//! out-of-bounds access.

use crate::dtype::DType;
use crate::scalar::Scalar;
use crate::tensor::Tensor;

/// A remembered range of a storage's integer contents.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CachedRange {
    stamp: (u64, u64),
    dtype: DType,
    lo: i64,
    hi: i64,
    /// A value the elements may also hold outside `[lo, hi]` (a class
    /// target equal to `ignore_index`); `None` when `[lo, hi]` bounds all.
    besides: Option<i64>,
}

/// Whether `d` is an integer dtype whose values a range describes.
fn is_int(d: DType) -> bool {
    matches!(d, DType::I32 | DType::I64 | DType::U8)
}

/// Whether `v` is exactly representable in the integer dtype `d`.
fn fits(v: i64, d: DType) -> bool {
    Scalar::Int(v).fits(d) && (d != DType::U8 || v >= 0)
}

/// The minimum and maximum of little-endian host elements of `dtype`
/// (`None` for non-integer dtypes or no elements).
pub(crate) fn host_range(dtype: DType, bytes: &[u8]) -> Option<(i64, i64)> {
    fn fold(it: impl Iterator<Item = i64>) -> Option<(i64, i64)> {
        it.fold(None, |acc, v| match acc {
            None => Some((v, v)),
            Some((lo, hi)) => Some((lo.min(v), hi.max(v))),
        })
    }
    match dtype {
        DType::I64 => fold(
            bytes
                .chunks_exact(8)
                .map(|c| i64::from_le_bytes(c.try_into().unwrap_or([0; 8]))),
        ),
        DType::I32 => fold(
            bytes
                .chunks_exact(4)
                .map(|c| i64::from(i32::from_le_bytes(c.try_into().unwrap_or([0; 4])))),
        ),
        DType::U8 => fold(bytes.iter().map(|&b| i64::from(b))),
        _ => None,
    }
}

impl Tensor {
    /// Remembers that every element of self's storage lies in `[lo, hi]`
    /// (integer dtypes only; call it right after the storage was written,
    /// before anyone else sees it).
    pub(crate) fn remember_value_range(&self, lo: i64, hi: i64) {
        self.remember(lo, hi, None, self.storage().write_stamp());
    }

    /// Remembers that every element of self's storage lies in `[lo, hi]` or
    /// equals `besides`, as read from the memory when its write stamp was
    /// `stamp` (nothing is remembered if the storage was written since).
    /// Cross-entropy records what its target check read, so that the
    /// backward, or another loss over the same targets, need not read them
    /// again.
    pub(crate) fn remember_value_range_besides(
        &self,
        lo: i64,
        hi: i64,
        besides: i64,
        stamp: (u64, u64),
    ) {
        self.remember(lo, hi, Some(besides), stamp);
    }

    /// Records `[lo, hi]` (and `besides`) for self's storage as of write
    /// stamp `stamp`, unless it was written since.
    fn remember(&self, lo: i64, hi: i64, besides: Option<i64>, stamp: (u64, u64)) {
        let d = self.dtype();
        if !is_int(d) || lo > hi || !fits(lo, d) || !fits(hi, d) {
            return;
        }
        let st = self.storage();
        let mut slot = st.range_slot().lock();
        if st.write_stamp() == stamp {
            *slot = Some(CachedRange {
                stamp,
                dtype: d,
                lo,
                hi,
                besides,
            });
        }
    }

    /// The cached range of self's storage, while it is current and of self's
    /// dtype.
    fn cached_range(&self) -> Option<CachedRange> {
        let st = self.storage();
        let c = (*st.range_slot().lock())?;
        (c.stamp == st.write_stamp() && c.dtype == self.dtype()).then_some(c)
    }

    /// `[lo, hi]` such that every element of self lies in it or equals
    /// `besides`, when known without reading the memory.
    pub(crate) fn known_value_range_besides(&self, besides: i64) -> Option<(i64, i64)> {
        self.cached_range()
            .filter(|c| c.besides.is_none_or(|b| b == besides))
            .map(|c| (c.lo, c.hi))
    }

    /// Remembers the range of host data just copied into self's storage.
    pub(crate) fn remember_host_range(&self, bytes: &[u8]) {
        if let Some((lo, hi)) = host_range(self.dtype(), bytes) {
            self.remember_value_range(lo, hi);
        }
    }

    /// `[lo, hi]` bounding every element of self, when known without
    /// reading the memory (see the module docs); `None` otherwise.
    pub(crate) fn known_value_range(&self) -> Option<(i64, i64)> {
        self.cached_range()
            .filter(|c| c.besides.is_none())
            .map(|c| (c.lo, c.hi))
    }

    /// After `out` was filled with a copy of self (converted to out's
    /// dtype), gives out self's range when the conversion keeps every
    /// value of it exactly.
    pub(crate) fn pass_value_range(&self, out: &Tensor) {
        if let Some((lo, hi)) = self.known_value_range() {
            if is_int(out.dtype()) && fits(lo, out.dtype()) && fits(hi, out.dtype()) {
                out.remember_value_range(lo, hi);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Device;
    use proptest::prelude::*;

    const CPU: Device = Device::Cpu;

    #[test]
    fn host_data_records_its_extremes() {
        let t = Tensor::from_slice(&[5i64, -2, 9, 0], &[4], CPU).unwrap();
        assert_eq!(t.known_value_range(), Some((-2, 9)));
        let v = t.narrow(0, 1, 2).unwrap();
        // Views are bounded by the storage's range.
        assert_eq!(v.known_value_range(), Some((-2, 9)));
        let f = Tensor::from_slice(&[1.0f32, 2.0], &[2], CPU).unwrap();
        assert_eq!(f.known_value_range(), None);
    }

    #[test]
    fn generated_ranges() {
        let r = Tensor::randint(-3, 7, &[100], None, 1, CPU).unwrap();
        assert_eq!(r.known_value_range(), Some((-3, 6)));
        let a = Tensor::arange(10, 0, -3, None, CPU).unwrap();
        assert_eq!(a.to_vec::<i64>().unwrap(), vec![10, 7, 4, 1]);
        assert_eq!(a.known_value_range(), Some((1, 10)));
        let e = Tensor::arange(0, 0, 1, None, CPU).unwrap();
        assert_eq!(e.known_value_range(), None);
    }

    /// Targets whose range is unknown (computed, with ignore_index among
    /// them): cross-entropy's check reads them once and remembers what it
    /// read for the backward; a write forgets it.
    #[test]
    fn cross_entropy_remembers_the_targets_it_checked() {
        use crate::{CrossEntropyArgs, Reduction};
        let logits = Tensor::from_slice(&[0.5f32, 1.0, -1.0, 2.0, 0.0, 1.5], &[3, 2], CPU).unwrap();
        // [1, -100, 0], computed (no range known).
        let t = Tensor::from_slice(&[2i64, -99, 1], &[3], CPU)
            .unwrap()
            .sub(&Tensor::scalar(1i64, DType::I64, CPU).unwrap())
            .unwrap();
        assert_eq!(t.known_value_range(), None);
        let args = CrossEntropyArgs {
            reduction: Reduction::Mean,
            ..Default::default()
        };
        let (loss, saved) = logits.cross_entropy_forward(&t, args).unwrap();
        assert!(loss.item::<f32>().unwrap().is_finite());
        // The checked targets (-100 read as 0) lie in [0, 1] besides -100.
        assert_eq!(t.known_value_range_besides(-100), Some((0, 1)));
        assert_eq!(
            t.known_value_range_besides(-1),
            None,
            "another ignore_index"
        );
        assert_eq!(t.known_value_range(), None, "not a bound of every element");
        // The backward reuses it; after a write the check reads again.
        let g = Tensor::scalar(1.0f32, DType::F32, CPU).unwrap();
        logits
            .cross_entropy_backward(&g, &saved.unwrap(), args)
            .unwrap();
        t.fill_(5).unwrap();
        assert_eq!(t.known_value_range_besides(-100), None);
        assert!(
            logits.cross_entropy_forward(&t, args).is_err(),
            "5 is out of range"
        );
    }

    #[test]
    fn a_range_read_before_a_write_is_not_remembered() {
        let t = Tensor::from_slice(&[1i64, 2], &[2], CPU)
            .unwrap()
            .add(&Tensor::scalar(0i64, DType::I64, CPU).unwrap())
            .unwrap();
        let stamp = t.storage().write_stamp();
        t.fill_(7).unwrap();
        t.remember_value_range_besides(1, 2, -100, stamp);
        assert_eq!(t.known_value_range_besides(-100), None);
    }

    /// Every write path through strata drops the range.
    #[test]
    fn writes_invalidate() {
        type Write = fn(&Tensor);
        let writes: [(&str, Write); 7] = [
            ("fill_", |t| {
                t.fill_(3).unwrap();
            }),
            ("copy_", |t| {
                t.copy_(&Tensor::from_slice(&[9i64; 4], &[4], CPU).unwrap())
                    .unwrap();
            }),
            ("add_", |t| {
                t.add_(&Tensor::scalar(1i64, DType::I64, CPU).unwrap())
                    .unwrap();
            }),
            ("scatter_add_", |t| {
                let i = Tensor::from_slice(&[0i64], &[1], CPU).unwrap();
                let s = Tensor::from_slice(&[7i64], &[1], CPU).unwrap();
                t.scatter_add_(0, &i, &s).unwrap();
            }),
            ("masked_scatter_ on a view", |t| {
                let m = Tensor::from_slice(&[true, false], &[2], CPU).unwrap();
                let s = Tensor::from_slice(&[100i64, 100], &[2], CPU).unwrap();
                let v = t.narrow(0, 2, 2).unwrap();
                v.copy_(&v.masked_scatter(&m, &s).unwrap()).unwrap();
            }),
            ("masked_fill_", |t| {
                let m = Tensor::from_slice(&[true, false, false, false], &[4], CPU).unwrap();
                t.masked_fill_(&m, 50).unwrap();
            }),
            ("clamp_ through a view", |t| {
                t.narrow(0, 0, 1).unwrap().neg_().unwrap();
            }),
        ];
        for (what, w) in writes {
            let t = Tensor::from_slice(&[0i64, 1, 2, 3], &[4], CPU).unwrap();
            let view = t.narrow(0, 1, 3).unwrap();
            assert!(t.known_value_range().is_some(), "{what}");
            w(&t);
            assert_eq!(t.known_value_range(), None, "{what} kept the range");
            assert_eq!(view.known_value_range(), None, "{what} (view)");
        }
    }

    #[test]
    fn copies_pass_the_range() {
        let t = Tensor::from_slice(&[0i64, 4, 2, 3, 1, 5], &[2, 3], CPU).unwrap();
        let c = t.t().unwrap().contiguous().unwrap();
        assert_eq!(c.known_value_range(), Some((0, 5)));
        assert_eq!(
            t.to_dtype_contiguous(DType::I32)
                .unwrap()
                .known_value_range(),
            Some((0, 5))
        );
        assert_eq!(
            t.to_dtype_contiguous(DType::U8)
                .unwrap()
                .known_value_range(),
            Some((0, 5))
        );
        let big = Tensor::from_slice(&[0i64, 1 << 40], &[2], CPU).unwrap();
        // The conversion wraps: no range.
        assert_eq!(
            big.to_dtype_contiguous(DType::I32)
                .unwrap()
                .known_value_range(),
            None
        );
        assert_eq!(
            t.to_dtype_contiguous(DType::F32)
                .unwrap()
                .known_value_range(),
            None
        );
    }

    /// A stale range is never used: an index written out of range after
    /// creation is still caught, with the typed error.
    #[test]
    fn stale_range_falls_back_to_the_check() {
        let w = Tensor::from_slice(&[1.0f32; 12], &[4, 3], CPU).unwrap();
        let i = Tensor::from_slice(&[0i64, 1, 2], &[3], CPU).unwrap();
        assert!(Tensor::embedding(&i, &w, None).is_ok());
        i.narrow(0, 2, 1).unwrap().fill_(4).unwrap();
        let e = Tensor::embedding(&i, &w, None).unwrap_err();
        assert!(e.to_string().contains("index 4 is out of bounds"), "{e}");
        let x = Tensor::zeros(&[3, 4], DType::F32, CPU).unwrap();
        let t = Tensor::from_slice(&[0i64, 1, 2], &[3], CPU).unwrap();
        t.add_(&Tensor::scalar(2i64, DType::I64, CPU).unwrap())
            .unwrap();
        let e = x
            .cross_entropy(&t, crate::CrossEntropyArgs::default())
            .unwrap_err();
        assert!(e.to_string().contains("target 4 is out of bounds"), "{e}");
    }

    proptest! {
        /// The recorded range bounds every value, for any host data.
        #[test]
        fn host_range_bounds_the_data(v in proptest::collection::vec(any::<i32>(), 1..64)) {
            let t = Tensor::from_slice(&v, &[v.len()], CPU).unwrap();
            let (lo, hi) = t.known_value_range().unwrap();
            prop_assert_eq!(lo, i64::from(*v.iter().min().unwrap()));
            prop_assert_eq!(hi, i64::from(*v.iter().max().unwrap()));
        }

        /// randint's range holds its values.
        #[test]
        fn randint_range_holds(low in -50i64..50, span in 1i64..40, seed in 0u64..1000) {
            let t = Tensor::randint(low, low + span, &[257], None, seed, CPU).unwrap();
            let (lo, hi) = t.known_value_range().unwrap();
            prop_assert!(t.to_vec::<i64>().unwrap().iter().all(|x| (lo..=hi).contains(x)));
        }
    }
}
