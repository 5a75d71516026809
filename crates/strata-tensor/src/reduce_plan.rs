//! Device-independent plans for reductions, shared by every backend: a
//! reduction over some dims of a strided input is a loop over the kept dims
//! (one output each, row-major) around a fold over the reduced dims
//! (row-major, so "first" on ties means first in that order).
//!
//! Within each group, neighbouring dims that are contiguous together
//! (`stride[d] == stride[d + 1] * shape[d + 1]`) are merged and size-1 dims
//! dropped. Merging keeps row-major order, so output positions and the
//! positions `k` along the reduced dims are those of the unmerged dims.

/// One (possibly merged) loop dim: its size and element stride.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReduceDim {
    /// Number of elements along the dim.
    pub size: usize,
    /// Elements between neighbours along the dim.
    pub stride: usize,
}

/// The loops of a reduction. Summing a contiguous `[2, 3, 4]` over dims 1 and
/// 2 gives two outputs, each a fold of one run of 12 contiguous elements
/// (the unit test `a_contiguous_reduction_is_one_run_per_output`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReducePlan {
    /// The kept dims, merged, outermost first.
    pub kept: Vec<ReduceDim>,
    /// The reduced dims, merged, outermost first.
    pub reduced: Vec<ReduceDim>,
    /// Number of outputs (the product of the kept sizes).
    pub outputs: usize,
    /// Elements folded into each output (the product of the reduced sizes).
    pub count: usize,
}

impl ReducePlan {
    /// Plans the reduction of an input of `shape` with element `strides` over
    /// `dims` (each dim at most once; the others are kept).
    pub fn new(shape: &[usize], strides: &[usize], dims: &[usize]) -> ReducePlan {
        let group = |reduced: bool| -> Vec<(usize, usize)> {
            (0..shape.len())
                .filter(|d| dims.contains(d) == reduced)
                .map(|d| (shape[d], strides[d]))
                .collect()
        };
        let (kept, reduced) = (group(false), group(true));
        ReducePlan {
            // Saturating: one side of an empty input may multiply past usize.
            outputs: kept.iter().fold(1usize, |a, &(n, _)| a.saturating_mul(n)),
            count: reduced
                .iter()
                .fold(1usize, |a, &(n, _)| a.saturating_mul(n)),
            kept: merge_row_major(&kept),
            reduced: merge_row_major(&reduced),
        }
    }

    /// The storage offset (in elements, from the input's first element) at
    /// which each output's fold starts, in row-major order of the outputs.
    pub fn output_offsets(&self) -> impl Iterator<Item = usize> + '_ {
        let nd = self.kept.len();
        let mut idx = vec![0usize; nd];
        let mut pos = 0usize;
        (0..self.outputs).map(move |k| {
            if k > 0 {
                let mut d = nd;
                while d > 0 {
                    d -= 1;
                    idx[d] += 1;
                    pos += self.kept[d].stride;
                    if idx[d] < self.kept[d].size {
                        break;
                    }
                    pos -= self.kept[d].stride * idx[d];
                    idx[d] = 0;
                }
            }
            pos
        })
    }
}

/// Merges neighbouring `(size, stride)` dims `d`, `d + 1` where
/// `stride[d] == stride[d + 1] * size[d + 1]` (row-major order is preserved);
/// size-1 dims are dropped.
fn merge_row_major(dims: &[(usize, usize)]) -> Vec<ReduceDim> {
    let mut v: Vec<ReduceDim> = Vec::with_capacity(dims.len());
    for &(size, stride) in dims {
        if size == 1 {
            continue;
        }
        // Checked: the dims of an empty view (a size 0 elsewhere) may
        // multiply past usize; such dims are then kept apart.
        match v.last_mut() {
            Some(last)
                if stride.checked_mul(size) == Some(last.stride)
                    && last.size.checked_mul(size).is_some() =>
            {
                last.size *= size;
                last.stride = stride;
            }
            _ => v.push(ReduceDim { size, stride }),
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::Layout;
    use proptest::prelude::*;

    fn dims(v: &[(usize, usize)]) -> Vec<ReduceDim> {
        v.iter()
            .map(|&(size, stride)| ReduceDim { size, stride })
            .collect()
    }

    #[test]
    fn a_contiguous_reduction_is_one_run_per_output() {
        let p = ReducePlan::new(&[2, 3, 4], &[12, 4, 1], &[1, 2]);
        assert_eq!((p.outputs, p.count), (2, 12));
        assert_eq!(p.reduced.len(), 1);
        assert_eq!(p.output_offsets().collect::<Vec<_>>(), vec![0, 12]);
    }

    #[test]
    fn merging_keeps_row_major_order() {
        assert_eq!(
            merge_row_major(&[(2, 12), (3, 4), (4, 1)]),
            dims(&[(24, 1)])
        );
        assert_eq!(merge_row_major(&[(3, 1), (4, 3)]), dims(&[(3, 1), (4, 3)]));
        assert_eq!(
            merge_row_major(&[(3, 8), (1, 99), (4, 2)]),
            dims(&[(12, 2)])
        );
        assert_eq!(merge_row_major(&[(1, 5)]), dims(&[]));
    }

    /// Offsets of the elements of a merged group in row-major order.
    fn walk(group: &[ReduceDim]) -> Vec<usize> {
        Layout {
            shape: group.iter().map(|d| d.size).collect(),
            strides: group.iter().map(|d| d.stride).collect(),
            offset: 0,
        }
        .indices()
        .collect()
    }

    proptest! {
        /// On random shapes, permuted strides and dim sets: every output's
        /// start and every reduced element's offset, in order, are those of
        /// the unmerged dims (a plain row-major walk of the input's layout).
        #[test]
        fn plan_walks_the_input_in_row_major_order(
            shape in proptest::collection::vec(1usize..4, 0..5),
            perm_seed in any::<u64>(),
            mask in any::<u8>(),
        ) {
            let nd = shape.len();
            // Strides of a contiguous tensor whose dims were permuted.
            let mut order: Vec<usize> = (0..nd).collect();
            let mut s = perm_seed;
            for i in (1..nd).rev() {
                order.swap(i, (s % (i as u64 + 1)) as usize);
                s /= i as u64 + 1;
            }
            let mut strides = vec![0usize; nd];
            let mut acc = 1;
            for &d in order.iter().rev() {
                strides[d] = acc;
                acc *= shape[d];
            }
            let red: Vec<usize> = (0..nd).filter(|d| mask & (1 << d) != 0).collect();
            let p = ReducePlan::new(&shape, &strides, &red);
            let sub = |reduced: bool| Layout {
                shape: (0..nd).filter(|d| red.contains(d) == reduced).map(|d| shape[d]).collect(),
                strides: (0..nd).filter(|d| red.contains(d) == reduced).map(|d| strides[d]).collect(),
                offset: 0,
            };
            let (kept, reduced) = (sub(false), sub(true));
            prop_assert_eq!(p.outputs, kept.numel());
            prop_assert_eq!(p.count, reduced.numel());
            prop_assert_eq!(p.output_offsets().collect::<Vec<_>>(), kept.indices().collect::<Vec<_>>());
            prop_assert_eq!(walk(&p.kept), kept.indices().collect::<Vec<_>>());
            prop_assert_eq!(walk(&p.reduced), reduced.indices().collect::<Vec<_>>());
        }
    }
}
