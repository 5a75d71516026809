//! Executes an [`IterPlan`] on the CPU: an odometer over the outer dims calls
//! an inner 1-D kernel; tiled plans walk dims 0 and `tile_dim` in blocks; large
//! plans are split along the outermost dim across rayon's threads.

use crate::iter_plan::IterPlan;
use rayon::prelude::*;

/// Below this many elements an op runs on the calling thread.
pub(crate) const PARALLEL_THRESHOLD: usize = 1 << 16;

/// Block edges (in elements) of tiled loops along dim 0 and the tile dim;
/// chosen by measurement on f32 4096 x 4096 (`a.add_(&b.t())`).
const TILE0: usize = 64;
const TILEK: usize = 128;

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
        unsafe {
            run_serial(
                &plan.shape,
                &plan.strides,
                plan.tile_dim,
                plan.elem_sizes,
                base,
                &kernel,
            )
        };
        return;
    }
    let outer = plan.ndim() - 1;
    let size = plan.shape[outer];
    // Chunks aligned to tiles where the outer dim is tiled or is the only dim.
    let align = if plan.tile_dim == Some(outer) {
        TILEK
    } else if outer == 0 {
        64
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
        unsafe {
            run_serial(
                &shape,
                &plan.strides,
                plan.tile_dim,
                plan.elem_sizes,
                p,
                &kernel,
            )
        };
    });
}

/// # Safety
/// As [`run`].
unsafe fn run_serial<const N: usize, F>(
    shape: &[usize],
    strides: &[[isize; N]],
    tile_dim: Option<usize>,
    elem_sizes: [usize; N],
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
            // Operands that step by one element along the tile dim (not dim 0)
            // are transposed block by block into a small buffer, read along
            // their own fast dim, so the kernel sees contiguous rows for them.
            let es: [isize; N] = elem_sizes.map(|e| e as isize);
            let staged: Vec<usize> = (1..N)
                .filter(|&i| {
                    matches!(es[i], 1 | 2 | 4 | 8)
                        && strides[0][i] != es[i]
                        && strides[k][i] == es[i]
                })
                .collect();
            let (t0, tk) = (TILE0, TILEK);
            let area = t0 * tk;
            let mut buf = vec![0u64; staged.len() * area];
            let outer: Vec<usize> = (1..nd).filter(|&d| d != k).collect();
            let (n0, nk) = (shape[0], shape[k]);
            for_each_outer(shape, strides, &outer, base, |p| {
                let mut tile = |ib: usize, kb: usize| {
                    let len = t0.min(n0 - ib);
                    let klen = tk.min(nk - kb);
                    let pi = offset(offset(p, &strides[0], ib), &strides[k], kb);
                    let mut row_strides = strides[0];
                    // Prefetch the next tile's rows of every operand: they are
                    // short segments of many rows, which the hardware prefetcher
                    // does not follow (for a pure copy this halves the time).
                    if ib + t0 < n0 {
                        let next = (n0 - ib - t0).min(t0);
                        for i in 0..N {
                            if i > 0 && pi[i] == pi[0] {
                                continue; // in place: operand 0's lines
                            }
                            if staged.contains(&i) {
                                let np = pi[i].wrapping_offset(t0 as isize * strides[0][i]);
                                for r in 0..next {
                                    let row = np.wrapping_offset(r as isize * strides[0][i]);
                                    for line in (0..klen * es[i] as usize).step_by(64) {
                                        prefetch(row.wrapping_add(line));
                                    }
                                }
                            } else {
                                let np = pi[i].wrapping_offset(t0 as isize * strides[0][i]);
                                for j in 0..klen {
                                    let row = np.wrapping_offset(j as isize * strides[k][i]);
                                    for line in (0..next * es[i] as usize).step_by(64) {
                                        prefetch(row.wrapping_add(line));
                                    }
                                }
                            }
                        }
                    }
                    for (slot, &i) in staged.iter().enumerate() {
                        let b = buf[slot * area..].as_mut_ptr() as *mut u8;
                        // SAFETY: the source block lies inside operand i's
                        // rows (indices < len, klen); the buffer holds
                        // t0 * tk elements of at most 8 bytes.
                        unsafe { stage(b, t0, pi[i], strides[0][i], es[i], len, klen) };
                        row_strides[i] = es[i];
                    }
                    for j in 0..klen {
                        let mut pj = offset(pi, &strides[k], j);
                        for (slot, &i) in staged.iter().enumerate() {
                            let b = buf[slot * area..].as_mut_ptr() as *mut u8;
                            pj[i] = b.wrapping_add(j * t0 * es[i] as usize);
                        }
                        kernel(len, pj, row_strides);
                    }
                };
                for kb in (0..nk).step_by(tk) {
                    for ib in (0..n0).step_by(t0) {
                        tile(ib, kb);
                    }
                }
            });
        }
    }
}

/// Transposes a 4 x 4 block of 4-byte elements: `dst[c * dst_stride + r] =
/// src_row_r[c]`.
///
/// # Safety
/// Four rows of four elements at `src + r * src_stride` must be readable and
/// `dst + c * dst_stride .. + 4` writable for every `c < 4`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn transpose4(dst: *mut u32, dst_stride: usize, src: *const u8, src_stride: isize) {
    use std::arch::x86_64::*;
    // SAFETY: forwarded contract; unaligned loads and stores.
    unsafe {
        let r0 = _mm_loadu_ps(src as *const f32);
        let r1 = _mm_loadu_ps(src.offset(src_stride) as *const f32);
        let r2 = _mm_loadu_ps(src.offset(2 * src_stride) as *const f32);
        let r3 = _mm_loadu_ps(src.offset(3 * src_stride) as *const f32);
        let t0 = _mm_unpacklo_ps(r0, r1);
        let t1 = _mm_unpacklo_ps(r2, r3);
        let t2 = _mm_unpackhi_ps(r0, r1);
        let t3 = _mm_unpackhi_ps(r2, r3);
        _mm_storeu_ps(dst as *mut f32, _mm_movelh_ps(t0, t1));
        _mm_storeu_ps(dst.add(dst_stride) as *mut f32, _mm_movehl_ps(t1, t0));
        _mm_storeu_ps(dst.add(2 * dst_stride) as *mut f32, _mm_movelh_ps(t2, t3));
        _mm_storeu_ps(dst.add(3 * dst_stride) as *mut f32, _mm_movehl_ps(t3, t2));
    }
}

/// Hints that the cache line at `p` will be needed soon (into L2).
#[inline(always)]
fn prefetch(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint; it does not fault on any address.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T1 }>(p as *const i8)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Copies a `len` x `klen` block (rows `src + r * row_stride`, elements of
/// `es` bytes contiguous within a row) into `buf` transposed: element (r, c)
/// goes to `buf[c * t0 + r]`.
///
/// # Safety
/// The block must be readable and `buf` must hold `klen * t0` elements.
unsafe fn stage(
    buf: *mut u8,
    t0: usize,
    src: *mut u8,
    row_stride: isize,
    es: isize,
    len: usize,
    klen: usize,
) {
    // 8 x 8 micro-blocks: the 8 source rows and the 8 buffer rows in flight
    // stay in L1 and in distinct cache sets whatever the source stride.
    const MB: usize = 8;
    macro_rules! go {
        ($t:ty) => {{
            let b = buf as *mut $t;
            for rb in (0..len).step_by(MB) {
                let re = (rb + MB).min(len);
                for cb in (0..klen).step_by(MB) {
                    let ce = (cb + MB).min(klen);
                    for r in rb..re {
                        // SAFETY: forwarded contract.
                        let row = unsafe { src.offset(r as isize * row_stride) } as *const $t;
                        for c in cb..ce {
                            // SAFETY: forwarded contract.
                            unsafe { *b.add(c * t0 + r) = *row.add(c) };
                        }
                    }
                }
            }
        }};
    }
    match es {
        1 => go!(u8),
        2 => go!(u16),
        #[cfg(target_arch = "x86_64")]
        4 => {
            // 4 x 4 blocks through SSE registers (SSE is part of x86_64's
            // baseline); the moves and shuffles copy bits, they do no arithmetic.
            let (full_r, full_c) = (len / 4 * 4, klen / 4 * 4);
            let b = buf as *mut u32;
            for rb in (0..full_r).step_by(4) {
                for cb in (0..full_c).step_by(4) {
                    // SAFETY: rows rb..rb+4 and columns cb..cb+4 lie inside
                    // the block and the buffer (forwarded contract).
                    unsafe {
                        transpose4(
                            b.add(cb * t0 + rb),
                            t0,
                            src.offset(rb as isize * row_stride).add(cb * 4),
                            row_stride,
                        )
                    };
                }
            }
            // Ragged edges: the columns past full_c for all rows, the rows
            // past full_r for the full columns.
            for r in 0..len {
                let c0 = if r < full_r { full_c } else { 0 };
                // SAFETY: forwarded contract.
                let row = unsafe { src.offset(r as isize * row_stride) } as *const u32;
                for c in c0..klen {
                    // SAFETY: forwarded contract.
                    unsafe { *b.add(c * t0 + r) = *row.add(c) };
                }
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        4 => go!(u32),
        _ => go!(u64),
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
