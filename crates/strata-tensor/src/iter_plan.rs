//! Device-independent iteration plans for element-wise kernels, in the manner
//! of PyTorch's TensorIterator: drop size-1 dims, order dims by the output's
//! strides (fastest first), coalesce dims that are contiguous together, and
//! pick a second dim to tile with when an input's fastest dim differs from the
//! output's (`a.add_(&b.t())`), so both are walked in cache-sized blocks.

/// A loop nest over `N` operands (operand 0 is the output).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IterPlan<const N: usize> {
    /// Loop sizes, fastest dim first.
    pub shape: Vec<usize>,
    /// Byte strides of each operand along each loop dim.
    pub strides: Vec<[isize; N]>,
    /// A dim to block together with dim 0 (see the module docs).
    pub tile_dim: Option<usize>,
    /// Bytes per element of each operand.
    pub elem_sizes: [usize; N],
}

impl<const N: usize> IterPlan<N> {
    /// Plans a loop over `shape` where operand `i` has element strides
    /// `strides[i]` (already broadcast to `shape`) and elements of `elem_sizes[i]` bytes.
    pub fn new(shape: &[usize], strides: [&[usize]; N], elem_sizes: [usize; N]) -> IterPlan<N> {
        if shape.contains(&0) {
            // Nothing to visit. The strides of an empty tensor are not bounded
            // by any storage (`zeros(&[0, 0, 1 << 62], F64)` has an element
            // stride of 2^62, 2^65 bytes), so none is scaled to bytes.
            return IterPlan {
                shape: vec![0],
                strides: vec![[0; N]],
                tile_dim: None,
                elem_sizes,
            };
        }
        let byte_stride = |d: usize| -> [isize; N] {
            std::array::from_fn(|i| (strides[i][d] * elem_sizes[i]) as isize)
        };
        // Dims of size 1 address nothing; start from C order, fastest first.
        let mut dims: Vec<usize> = (0..shape.len()).rev().filter(|&d| shape[d] != 1).collect();
        // Insertion sort with PyTorch's comparator (not a total order, so stable and local).
        let should_swap = |d0: usize, d1: usize| -> bool {
            let (s0, s1) = (byte_stride(d0), byte_stride(d1));
            for i in 0..N {
                if s0[i] == 0 || s1[i] == 0 {
                    continue;
                }
                if s0[i] != s1[i] {
                    return s0[i] > s1[i];
                }
                if shape[d0] > shape[d1] {
                    return true;
                }
            }
            false
        };
        for i in 1..dims.len() {
            let mut j = i;
            while j > 0 && should_swap(dims[j - 1], dims[j]) {
                dims.swap(j - 1, j);
                j -= 1;
            }
        }
        // Coalesce neighbours that every operand walks as one dim.
        let mut out_shape: Vec<usize> = Vec::with_capacity(dims.len());
        let mut out_strides: Vec<[isize; N]> = Vec::with_capacity(dims.len());
        for &d in &dims {
            let s = byte_stride(d);
            if let (Some(&last_n), Some(last_s)) = (out_shape.last(), out_strides.last()) {
                if (0..N).all(|i| s[i] == last_s[i] * last_n as isize) {
                    *out_shape.last_mut().unwrap() *= shape[d];
                    continue;
                }
            }
            out_shape.push(shape[d]);
            out_strides.push(s);
        }
        let tile_dim = Self::choose_tile(&out_shape, &out_strides, elem_sizes);
        IterPlan {
            shape: out_shape,
            strides: out_strides,
            tile_dim,
            elem_sizes,
        }
    }

    /// An input that steps by more than one element along dim 0 but by exactly
    /// one element along some other dim reads across cache lines in the plain
    /// loop order: block dims 0 and that dim together.
    fn choose_tile(
        shape: &[usize],
        strides: &[[isize; N]],
        elem_sizes: [usize; N],
    ) -> Option<usize> {
        if shape.len() < 2 {
            return None;
        }
        for i in 1..N {
            let es = elem_sizes[i] as isize;
            let s0 = strides[0][i];
            if s0 == 0 || s0 == es {
                continue;
            }
            if let Some(k) = (1..shape.len()).find(|&k| strides[k][i] == es && shape[k] > 1) {
                return Some(k);
            }
        }
        None
    }

    /// Number of loop dims.
    pub fn ndim(&self) -> usize {
        self.shape.len()
    }

    /// Number of elements visited.
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contiguous_coalesces_to_one_dim() {
        let p = IterPlan::<2>::new(&[4, 5, 6], [&[30, 6, 1], &[30, 6, 1]], [4, 4]);
        assert_eq!(p.shape, vec![120]);
        assert_eq!(p.strides, vec![[4, 4]]);
        assert_eq!(p.tile_dim, None);
    }

    #[test]
    fn transposed_input_is_tiled() {
        let p = IterPlan::<2>::new(&[8, 8], [&[8, 1], &[1, 8]], [4, 4]);
        assert_eq!(p.shape, vec![8, 8]);
        assert_eq!(p.strides, vec![[4, 32], [32, 4]]);
        assert_eq!(p.tile_dim, Some(1));
    }

    #[test]
    fn output_order_wins_for_transposed_output() {
        // out is the transpose of a contiguous block: loops follow out's memory order.
        let p = IterPlan::<2>::new(&[3, 5], [&[1, 3], &[1, 3]], [8, 8]);
        assert_eq!(p.shape, vec![15]);
    }

    #[test]
    fn broadcast_row_keeps_two_dims() {
        let p = IterPlan::<3>::new(&[4, 6], [&[6, 1], &[6, 1], &[0, 1]], [4, 4, 4]);
        assert_eq!(p.shape, vec![6, 4]);
        assert_eq!(p.strides, vec![[4, 4, 4], [24, 24, 0]]);
        assert_eq!(p.tile_dim, None);
    }

    #[test]
    fn empty_shapes_plan_nothing_whatever_their_strides() {
        // zeros(&[0, 0, 1 << 62], F64): element strides [2^62, 2^62, 1].
        let p = IterPlan::<1>::new(&[0, 0, 1 << 62], [&[1 << 62, 1 << 62, 1]], [8]);
        assert_eq!(p.shape.iter().product::<usize>(), 0);
        // expand of [1, 1, 0] to [2^40, 2^40, 0]: sizes whose product overflows.
        let p = IterPlan::<2>::new(&[1 << 40, 1 << 40, 0], [&[0, 0, 1], &[0, 0, 1]], [4, 4]);
        assert_eq!(p.shape.iter().product::<usize>(), 0);
    }
}
