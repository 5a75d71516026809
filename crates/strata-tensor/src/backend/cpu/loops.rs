//! Executes an [`IterPlan`] on the CPU: an odometer over the outer dims calls
//! an inner 1-D kernel; tiled plans walk dims 0 and `tile_dim` in blocks; large
//! plans are split along the outermost dim across rayon's threads.

use crate::iter_plan::IterPlan;
use rayon::prelude::*;

/// Below this many elements an op runs on the calling thread.
pub(crate) const PARALLEL_THRESHOLD: usize = 1 << 16;

/// Block edge (in elements) of tiled loops along dim 0 and the tile dim.
const TILE: usize = 64;

/// Base pointers of the operands, sendable to worker threads.
#[derive(Clone, Copy)]
pub(crate) struct Ptrs<const N: usize>(pub(crate) [*mut u8; N]);

// SAFETY: the pointers are only dereferenced inside kernels over disjoint
// chunks of the output (each worker gets its own range of the outermost dim),
// while the caller holds the storages' access locks for the whole op.
unsafe impl<const N: usize> Send for Ptrs<N> {}
// SAFETY: as above; sharing the base pointers between workers is read-only.
unsafe impl<const N: usize> Sync for Ptrs<N> {}

impl<const N: usize> Ptrs<N> {
    /// The pointers (a method, so closures capture the `Send` wrapper).
    #[inline(always)]
    pub(crate) fn get(&self) -> [*mut u8; N] {
        self.0
    }
}

#[inline(always)]
fn offset<const N: usize>(p: [*mut u8; N], strides: &[isize; N], k: usize) -> [*mut u8; N] {
    std::array::from_fn(|i| p[i].wrapping_offset(strides[i] * k as isize))
}

/// Runs `kernel(n, ptrs, strides)` over every inner row of the plan.
///
/// # Safety
/// Every address `base[i] + sum_d idx_d * plan.strides[d][i]` for indices
/// within `plan.shape` must be valid for the element type the kernel uses for
/// operand `i`, and operand 0 must not be read through another operand at an
/// address that a different element writes (the callers check overlap).
pub(crate) unsafe fn run<const N: usize, F>(plan: &IterPlan<N>, base: [*mut u8; N], kernel: F)
where
    F: Fn(usize, [*mut u8; N], [isize; N]) + Sync,
{
    let numel = plan.numel();
    if numel == 0 {
        return;
    }
    if plan.ndim() == 0 {
        kernel(1, base, [0; N]);
        return;
    }
    let threads = rayon::current_num_threads();
    if numel < PARALLEL_THRESHOLD || threads < 2 {
        // SAFETY: forwarded contract.
        unsafe { run_serial(&plan.shape, &plan.strides, plan.tile_dim, base, &kernel) };
        return;
    }
    let outer = plan.ndim() - 1;
    let size = plan.shape[outer];
    // Chunks aligned to tiles where the outer dim is tiled or is the only dim.
    let align = if plan.tile_dim == Some(outer) || outer == 0 {
        TILE
    } else {
        1
    };
    let chunks = (threads * 4).min(size.div_ceil(align)).max(1);
    let per = size.div_ceil(chunks).div_ceil(align) * align;
    let ptrs = Ptrs(base);
    (0..size.div_ceil(per)).into_par_iter().for_each(|c| {
        let lo = c * per;
        let hi = (lo + per).min(size);
        let mut shape = plan.shape.clone();
        shape[outer] = hi - lo;
        let p = offset(ptrs.get(), &plan.strides[outer], lo);
        // SAFETY: the chunk is a sub-range of the outer dim, so its addresses
        // are a subset of the plan's; chunks write disjoint output elements.
        unsafe { run_serial(&shape, &plan.strides, plan.tile_dim, p, &kernel) };
    });
}

/// # Safety
/// As [`run`].
unsafe fn run_serial<const N: usize, F>(
    shape: &[usize],
    strides: &[[isize; N]],
    tile_dim: Option<usize>,
    base: [*mut u8; N],
    kernel: &F,
) where
    F: Fn(usize, [*mut u8; N], [isize; N]),
{
    let nd = shape.len();
    match tile_dim {
        None => {
            let outer: Vec<usize> = (1..nd).collect();
            for_each_outer(shape, strides, &outer, base, |p| {
                kernel(shape[0], p, strides[0])
            });
        }
        Some(k) => {
            let outer: Vec<usize> = (1..nd).filter(|&d| d != k).collect();
            let (n0, nk) = (shape[0], shape[k]);
            for_each_outer(shape, strides, &outer, base, |p| {
                for kb in (0..nk).step_by(TILE) {
                    let ke = (kb + TILE).min(nk);
                    for ib in (0..n0).step_by(TILE) {
                        let len = TILE.min(n0 - ib);
                        let pi = offset(p, &strides[0], ib);
                        for j in kb..ke {
                            kernel(len, offset(pi, &strides[k], j), strides[0]);
                        }
                    }
                }
            });
        }
    }
}

/// Calls `f` with the operand pointers at every index of the `outer` dims.
#[inline]
fn for_each_outer<const N: usize>(
    shape: &[usize],
    strides: &[[isize; N]],
    outer: &[usize],
    base: [*mut u8; N],
    mut f: impl FnMut([*mut u8; N]),
) {
    let count: usize = outer.iter().map(|&d| shape[d]).product();
    let mut idx = vec![0usize; outer.len()];
    let mut p = base;
    for _ in 0..count {
        f(p);
        for (j, &d) in outer.iter().enumerate() {
            idx[j] += 1;
            p = offset(p, &strides[d], 1);
            if idx[j] < shape[d] {
                break;
            }
            p = std::array::from_fn(|i| p[i].wrapping_offset(-(strides[d][i] * shape[d] as isize)));
            idx[j] = 0;
        }
    }
}
