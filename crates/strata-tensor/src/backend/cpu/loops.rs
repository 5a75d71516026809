//! Executes an [`IterPlan`] on the CPU: an odometer over the outer dims hands
//! blocks of rows ([`Rows`]: dims 0 and 1) to a kernel; tiled plans walk dims
//! 0 and `tile_dim` in blocks, transposing the operands that disagree with the
//! output into a small buffer first; large plans are split along the
//! outermost dim across rayon's threads.

use super::simd;
use crate::iter_plan::IterPlan;
use rayon::prelude::*;
use std::mem::size_of;

/// A block of `m` rows of `n` elements handed to a kernel: element `j` of
/// row `r` of operand `i` is at `ptrs[i] + r * outer[i] + j * inner[i]`
/// (byte offsets).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Rows<const N: usize> {
    /// Elements per row.
    pub(crate) n: usize,
    /// Number of rows.
    pub(crate) m: usize,
    /// First element of row 0 of each operand.
    pub(crate) ptrs: [*mut u8; N],
    /// Byte step between neighbouring elements of a row.
    pub(crate) inner: [isize; N],
    /// Byte step between rows.
    pub(crate) outer: [isize; N],
}

impl<const N: usize> Rows<N> {
    /// Start of row `r` of every operand.
    #[inline(always)]
    pub(crate) fn row(&self, r: usize) -> [*mut u8; N] {
        offset(self.ptrs, &self.outer, r)
    }
}

/// Below this many elements an op runs on the calling thread.
pub(crate) const PARALLEL_THRESHOLD: usize = 1 << 16;

/// Block edges (in elements) of tiled loops along dim 0 and the tile dim;
/// chosen by measurement on f32 4096 x 4096 (`a.add_(&b.t())`).
/// Tiles of plans with a tile dim: `TILE0` elements along dim 0 by `TILEK`
/// along the tile dim. An operand staged through the buffer reads `TILE0`
/// rows of `TILEK` elements (1 KiB of f32), the others `TILEK` rows of `TILE0`:
/// long enough for the hardware prefetchers, small enough that a tile of
/// each stays in L2. Chosen by measurement on f32 4096 x 4096
/// (`a.add_(&b.t())`, see docs/benchmarks.md).
const TILE0: usize = 256;
const TILEK: usize = 256;

/// A tile is staged and computed `SLICE` rows (along the tile dim) at a
/// time, so the buffer is still in L1 when the kernel reads it.
const SLICE: usize = 32;

/// The staged operand's rows are prefetched this many rows ahead of the
/// transpose (they are short segments of many rows, which the hardware
/// prefetchers do not follow).
const PREFETCH_ROWS: usize = 16;

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

/// Runs `kernel` over every block of rows of the plan.
///
/// # Safety
/// Every address `base[i] + sum_d idx_d * plan.strides[d][i]` for indices
/// within `plan.shape` must be valid for the element type the kernel uses for
/// operand `i`, and operand 0 must not be read through another operand at an
/// address that a different element writes (the callers check overlap).
pub(crate) unsafe fn run<const N: usize, F>(plan: &IterPlan<N>, base: [*mut u8; N], kernel: F)
where
    F: Fn(Rows<N>) + Sync,
{
    // SAFETY: forwarded contract.
    unsafe { run_dyn(plan, base, &kernel) }
}

/// [`run`] with the kernel behind a reference to a trait object: the loop
/// nest, the tiling and the rayon tasks are compiled once per operand count
/// instead of once per kernel (several hundred of them: dtypes times ops),
/// which was most of this crate's build time; the kernel is called through
/// it once per block of rows, never per element.
///
/// # Safety
/// As [`run`].
unsafe fn run_dyn<const N: usize>(
    plan: &IterPlan<N>,
    base: [*mut u8; N],
    kernel: &(dyn Fn(Rows<N>) + Sync),
) {
    let numel = plan.numel();
    if numel == 0 {
        return;
    }
    if plan.ndim() == 0 {
        kernel(Rows {
            n: 1,
            m: 1,
            ptrs: base,
            inner: [0; N],
            outer: [0; N],
        });
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
                kernel,
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
                kernel,
            )
        };
    });
}

/// # Safety
/// As [`run`].
unsafe fn run_serial<const N: usize>(
    shape: &[usize],
    strides: &[[isize; N]],
    tile_dim: Option<usize>,
    elem_sizes: [usize; N],
    base: [*mut u8; N],
    kernel: &dyn Fn(Rows<N>),
) {
    let nd = shape.len();
    match tile_dim {
        None => {
            let (m, outer_stride) = if nd > 1 {
                (shape[1], strides[1])
            } else {
                (1, [0; N])
            };
            let outer: Vec<usize> = (2..nd).collect();
            for_each_outer(shape, strides, &outer, base, |p| {
                kernel(Rows {
                    n: shape[0],
                    m,
                    ptrs: p,
                    inner: strides[0],
                    outer: outer_stride,
                })
            });
        }
        Some(k) => {
            // Operands that step by one element along the tile dim (not dim 0)
            // are transposed slice by slice into a small buffer, read along
            // their own fast dim, so the kernel sees contiguous rows for them.
            let es: [isize; N] = elem_sizes.map(|e| e as isize);
            let staged: Vec<usize> = (1..N)
                .filter(|&i| {
                    matches!(es[i], 1 | 2 | 4 | 8)
                        && strides[0][i] != es[i]
                        && strides[k][i] == es[i]
                })
                .collect();
            let avx = simd::avx2();
            let area = TILE0 * SLICE;
            let mut buf = vec![0u64; staged.len() * area];
            // The kernel reads staged operands from the buffer: rows of
            // `TILE0` elements, one per index along the tile dim.
            let mut inner = strides[0];
            let mut outer_strides = strides[k];
            for &i in &staged {
                inner[i] = es[i];
                outer_strides[i] = (TILE0 as isize) * es[i];
            }
            // The operands read directly (not staged) that step by one
            // element along dim 0, except those that are operand 0 itself
            // (in place): their rows are prefetched a slice ahead.
            let direct_ops: Vec<usize> = (0..N)
                .filter(|&o| {
                    let aliases_out =
                        o > 0 && base[o] == base[0] && strides.iter().all(|s| s[o] == s[0]);
                    !staged.contains(&o) && !aliases_out && strides[0][o] == es[o]
                })
                .collect();
            let outer: Vec<usize> = (1..nd).filter(|&d| d != k).collect();
            let (n0, nk) = (shape[0], shape[k]);
            for_each_outer(shape, strides, &outer, base, |p| {
                for kb in (0..nk).step_by(TILEK) {
                    for ib in (0..n0).step_by(TILE0) {
                        let len = TILE0.min(n0 - ib);
                        let klen = TILEK.min(nk - kb);
                        let tile = offset(offset(p, &strides[0], ib), &strides[k], kb);
                        for jb in (0..klen).step_by(SLICE) {
                            let jlen = SLICE.min(klen - jb);
                            let mut ptrs = offset(tile, &strides[k], jb);
                            // The direct operands' rows of the slice after this
                            // one (possibly in the next tile), prefetched bit by
                            // bit while this slice is staged.
                            let next = if jb + SLICE < klen {
                                Some((
                                    offset(tile, &strides[k], jb + SLICE),
                                    len,
                                    SLICE.min(klen - jb - SLICE),
                                ))
                            } else if ib + TILE0 < n0 {
                                let t = offset(tile, &strides[0], TILE0);
                                Some((t, TILE0.min(n0 - ib - TILE0), SLICE.min(klen)))
                            } else if kb + TILEK < nk {
                                let t = offset(p, &strides[k], kb + TILEK);
                                Some((t, TILE0.min(n0), SLICE.min(nk - kb - TILEK)))
                            } else {
                                None
                            };
                            let mut direct = |part: usize, parts: usize| {
                                let Some((q, qlen, qrows)) = next else { return };
                                for &o in &direct_ops {
                                    let bytes = qlen * es[o] as usize;
                                    for r in part * qrows / parts..(part + 1) * qrows / parts {
                                        prefetch_row(
                                            q[o].wrapping_offset(r as isize * strides[k][o]),
                                            bytes,
                                        );
                                    }
                                }
                            };
                            for (slot, &i) in staged.iter().enumerate() {
                                let b = buf[slot * area..].as_mut_ptr() as *mut u8;
                                // SAFETY: the slice's `len` rows of `jlen`
                                // elements lie inside operand i (indices within
                                // the plan's shape); the buffer holds
                                // TILE0 * SLICE elements of at most 8 bytes.
                                unsafe {
                                    stage_rows(
                                        b,
                                        ptrs[i],
                                        strides[0][i],
                                        es[i],
                                        len,
                                        jlen,
                                        avx,
                                        &mut direct,
                                    )
                                };
                                ptrs[i] = b;
                            }
                            kernel(Rows {
                                n: len,
                                m: jlen,
                                ptrs,
                                inner,
                                outer: outer_strides,
                            });
                        }
                    }
                }
            });
        }
    }
}

/// Stages a slice (see [`stage`]) eight source rows at a time, prefetching
/// the rows [`PREFETCH_ROWS`] ahead; `between(part, parts)` runs after each
/// of the `parts` groups (the caller's other prefetches go there, spread out
/// so that they do not stall the loads in one burst).
#[allow(clippy::too_many_arguments)]
///
/// # Safety
/// As [`stage`] with `t0 = TILE0`.
unsafe fn stage_rows(
    buf: *mut u8,
    src: *mut u8,
    row_stride: isize,
    es: isize,
    len: usize,
    klen: usize,
    avx: bool,
    between: &mut impl FnMut(usize, usize),
) {
    const R: usize = 8;
    let bytes = klen * es as usize;
    let parts = len.div_ceil(R);
    for rb in (0..len).step_by(R) {
        between(rb / R, parts);
        for r in rb + PREFETCH_ROWS..(rb + PREFETCH_ROWS + R).min(len) {
            prefetch_row(src.wrapping_offset(r as isize * row_stride), bytes);
        }
        // SAFETY: rows rb .. rb + R of the slice and the buffer columns
        // from element rb on are inside the caller's block and buffer.
        unsafe {
            stage(
                buf.wrapping_add(rb * es as usize),
                TILE0,
                src.wrapping_offset(rb as isize * row_stride),
                row_stride,
                es,
                R.min(len - rb),
                klen,
                avx,
            )
        };
    }
}

/// Prefetches the cache lines of `bytes` bytes from `row`.
#[inline(always)]
fn prefetch_row(row: *const u8, bytes: usize) {
    for off in (0..bytes).step_by(64) {
        prefetch(row.wrapping_add(off));
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
/// goes to `buf[c * t0 + r]`. With `avx`, 4- and 8-byte elements move through
/// AVX registers (the caller checked the CPU has AVX2).
///
/// # Safety
/// The block must be readable and `buf` must hold `klen * t0` elements.
#[allow(clippy::too_many_arguments)]
unsafe fn stage(
    buf: *mut u8,
    t0: usize,
    src: *mut u8,
    row_stride: isize,
    es: isize,
    len: usize,
    klen: usize,
    avx: bool,
) {
    let src = src as *const u8;
    #[cfg(not(target_arch = "x86_64"))]
    let _ = avx;
    // SAFETY (all arms): forwarded contract; the AVX arms only run where the
    // caller found AVX2 on this CPU.
    unsafe {
        match es {
            1 => stage_blocks::<u8, 8>(buf as _, t0, src, row_stride, len, klen, scalar_block),
            2 => stage_blocks::<u16, 8>(buf as _, t0, src, row_stride, len, klen, scalar_block),
            #[cfg(target_arch = "x86_64")]
            4 if avx => x86::stage4_avx(buf as _, t0, src, row_stride, len, klen),
            #[cfg(target_arch = "x86_64")]
            4 => stage_blocks::<u32, 4>(
                buf as _,
                t0,
                src,
                row_stride,
                len,
                klen,
                x86::transpose4_sse,
            ),
            #[cfg(target_arch = "x86_64")]
            8 if avx => x86::stage8_avx(buf as _, t0, src, row_stride, len, klen),
            #[cfg(target_arch = "x86_64")]
            8 => stage_blocks::<u64, 2>(
                buf as _,
                t0,
                src,
                row_stride,
                len,
                klen,
                x86::transpose2_sse,
            ),
            #[cfg(not(target_arch = "x86_64"))]
            4 => stage_blocks::<u32, 8>(buf as _, t0, src, row_stride, len, klen, scalar_block),
            _ => stage_blocks::<u64, 8>(buf as _, t0, src, row_stride, len, klen, scalar_block),
        }
    }
}

/// Transposes a `B x B` block: `dst[c * dst_stride + r] = src_row_r[c]`,
/// source rows `row_stride` bytes apart.
type BlockFn<T> = unsafe fn(*mut T, usize, *const u8, isize);

/// Stages the block in `B x B` micro-blocks through `block`, then the ragged
/// edges element by element. Small micro-blocks keep the `B` source rows
/// and `B` buffer rows in flight in L1 whatever the source stride.
///
/// # Safety
/// As [`stage`], with `T` of the operand's element size; `block` must be
/// sound to call on any in-bounds `B x B` block.
#[inline(always)]
unsafe fn stage_blocks<T: Copy, const B: usize>(
    buf: *mut T,
    t0: usize,
    src: *const u8,
    row_stride: isize,
    len: usize,
    klen: usize,
    block: BlockFn<T>,
) {
    let (full_r, full_c) = (len / B * B, klen / B * B);
    for rb in (0..full_r).step_by(B) {
        for cb in (0..full_c).step_by(B) {
            // SAFETY: rows rb..rb+B and columns cb..cb+B lie inside the
            // block and the buffer (forwarded contract).
            unsafe {
                block(
                    buf.add(cb * t0 + rb),
                    t0,
                    src.offset(rb as isize * row_stride)
                        .add(cb * size_of::<T>()),
                    row_stride,
                )
            };
        }
    }
    // SAFETY: forwarded contract, every index is inside the block.
    unsafe { ragged(buf, t0, src, row_stride, len, klen, full_r, full_c) };
}

/// The elements [`stage_blocks`] leaves: columns past `full_c` for every
/// row, and rows past `full_r` for the first `full_c` columns.
///
/// # Safety
/// As [`stage`].
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn ragged<T: Copy>(
    buf: *mut T,
    t0: usize,
    src: *const u8,
    row_stride: isize,
    len: usize,
    klen: usize,
    full_r: usize,
    full_c: usize,
) {
    for r in 0..len {
        let c0 = if r < full_r { full_c } else { 0 };
        // SAFETY: forwarded contract.
        let row = unsafe { src.offset(r as isize * row_stride) } as *const T;
        for c in c0..klen {
            // SAFETY: forwarded contract.
            unsafe { *buf.add(c * t0 + r) = row.add(c).read_unaligned() };
        }
    }
}

/// An 8 x 8 block element by element.
///
/// # Safety
/// As [`BlockFn`]'s contract for `B = 8`.
unsafe fn scalar_block<T: Copy>(dst: *mut T, dst_stride: usize, src: *const u8, row_stride: isize) {
    for r in 0..8 {
        // SAFETY: forwarded contract.
        let row = unsafe { src.offset(r as isize * row_stride) } as *const T;
        for c in 0..8 {
            // SAFETY: forwarded contract.
            unsafe { *dst.add(c * dst_stride + r) = row.add(c).read_unaligned() };
        }
    }
}

/// Register transposes for x86_64: SSE/SSE2 (the baseline) and AVX.
#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::stage_blocks;
    use std::arch::x86_64::*;

    /// A 4 x 4 block of 4-byte elements through SSE registers (the moves and
    /// shuffles copy bits; they do no arithmetic).
    ///
    /// # Safety
    /// Four rows of four elements at `src + r * row_stride` readable,
    /// `dst + c * dst_stride .. + 4` writable for every `c < 4`.
    #[inline(always)]
    pub(super) unsafe fn transpose4_sse(
        dst: *mut u32,
        dst_stride: usize,
        src: *const u8,
        row_stride: isize,
    ) {
        // SAFETY: forwarded contract; unaligned loads and stores.
        unsafe {
            let r0 = _mm_loadu_ps(src as *const f32);
            let r1 = _mm_loadu_ps(src.offset(row_stride) as *const f32);
            let r2 = _mm_loadu_ps(src.offset(2 * row_stride) as *const f32);
            let r3 = _mm_loadu_ps(src.offset(3 * row_stride) as *const f32);
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

    /// A 2 x 2 block of 8-byte elements through SSE2 registers.
    ///
    /// # Safety
    /// As [`transpose4_sse`] for two rows of two elements.
    #[inline(always)]
    pub(super) unsafe fn transpose2_sse(
        dst: *mut u64,
        dst_stride: usize,
        src: *const u8,
        row_stride: isize,
    ) {
        // SAFETY: forwarded contract; unaligned loads and stores.
        unsafe {
            let r0 = _mm_loadu_pd(src as *const f64);
            let r1 = _mm_loadu_pd(src.offset(row_stride) as *const f64);
            _mm_storeu_pd(dst as *mut f64, _mm_unpacklo_pd(r0, r1));
            _mm_storeu_pd(dst.add(dst_stride) as *mut f64, _mm_unpackhi_pd(r0, r1));
        }
    }

    /// Loads 4 elements of row `lo` into the low half and of row `lo + 4`
    /// into the high half of one AVX register.
    ///
    /// # Safety
    /// 16 bytes readable at both rows.
    #[inline]
    #[target_feature(enable = "avx")]
    unsafe fn load_pair(src: *const u8, row_stride: isize, lo: isize, hi: isize) -> __m256 {
        // SAFETY: forwarded contract; unaligned loads.
        unsafe {
            let l = _mm_loadu_ps(src.offset(lo * row_stride) as *const f32);
            let h = _mm_loadu_ps(src.offset(hi * row_stride) as *const f32);
            _mm256_insertf128_ps::<1>(_mm256_castps128_ps256(l), h)
        }
    }

    /// An 8 x 8 block of 4-byte elements: rows r and r + 4 share a register
    /// (the upper half loaded straight from memory), then two rounds of
    /// in-lane shuffles finish the transpose.
    ///
    /// # Safety
    /// Eight rows of eight elements readable at `src + r * row_stride`,
    /// `dst + c * dst_stride .. + 8` writable for every `c < 8`.
    #[inline]
    #[target_feature(enable = "avx")]
    unsafe fn transpose8_avx(dst: *mut u32, dst_stride: usize, src: *const u8, row_stride: isize) {
        // SAFETY: forwarded contract; unaligned loads and stores.
        unsafe {
            let right = src.add(16);
            let t0 = load_pair(src, row_stride, 0, 4);
            let t1 = load_pair(src, row_stride, 1, 5);
            let t2 = load_pair(src, row_stride, 2, 6);
            let t3 = load_pair(src, row_stride, 3, 7);
            let t4 = load_pair(right, row_stride, 0, 4);
            let t5 = load_pair(right, row_stride, 1, 5);
            let t6 = load_pair(right, row_stride, 2, 6);
            let t7 = load_pair(right, row_stride, 3, 7);
            for (half, [a, b, c, d]) in [(0, [t0, t1, t2, t3]), (4, [t4, t5, t6, t7])] {
                let u0 = _mm256_unpacklo_ps(a, b);
                let u1 = _mm256_unpackhi_ps(a, b);
                let u2 = _mm256_unpacklo_ps(c, d);
                let u3 = _mm256_unpackhi_ps(c, d);
                let cols = [
                    _mm256_shuffle_ps::<0x44>(u0, u2),
                    _mm256_shuffle_ps::<0xEE>(u0, u2),
                    _mm256_shuffle_ps::<0x44>(u1, u3),
                    _mm256_shuffle_ps::<0xEE>(u1, u3),
                ];
                for (j, v) in cols.into_iter().enumerate() {
                    _mm256_storeu_ps(dst.add((half + j) * dst_stride) as *mut f32, v);
                }
            }
        }
    }

    /// A 4 x 4 block of 8-byte elements: rows r and r + 2 share a register.
    ///
    /// # Safety
    /// Four rows of four elements readable, `dst + c * dst_stride .. + 4`
    /// writable for every `c < 4`.
    #[inline]
    #[target_feature(enable = "avx")]
    unsafe fn transpose4x8_avx(
        dst: *mut u64,
        dst_stride: usize,
        src: *const u8,
        row_stride: isize,
    ) {
        // SAFETY: forwarded contract; unaligned loads and stores.
        unsafe {
            let pair = |p: *const u8, lo: isize| {
                let l = _mm_loadu_pd(p.offset(lo * row_stride) as *const f64);
                let h = _mm_loadu_pd(p.offset((lo + 2) * row_stride) as *const f64);
                _mm256_insertf128_pd::<1>(_mm256_castpd128_pd256(l), h)
            };
            let right = src.add(16);
            let (t0, t1, t2, t3) = (pair(src, 0), pair(src, 1), pair(right, 0), pair(right, 1));
            _mm256_storeu_pd(dst as *mut f64, _mm256_unpacklo_pd(t0, t1));
            _mm256_storeu_pd(dst.add(dst_stride) as *mut f64, _mm256_unpackhi_pd(t0, t1));
            _mm256_storeu_pd(
                dst.add(2 * dst_stride) as *mut f64,
                _mm256_unpacklo_pd(t2, t3),
            );
            _mm256_storeu_pd(
                dst.add(3 * dst_stride) as *mut f64,
                _mm256_unpackhi_pd(t2, t3),
            );
        }
    }

    /// [`super::stage`] for 4-byte elements in 8 x 8 AVX blocks.
    ///
    /// # Safety
    /// As [`super::stage`]; the CPU must have AVX.
    #[target_feature(enable = "avx")]
    pub(super) unsafe fn stage4_avx(
        buf: *mut u32,
        t0: usize,
        src: *const u8,
        row_stride: isize,
        len: usize,
        klen: usize,
    ) {
        // SAFETY: forwarded contract; this function has AVX enabled, as the
        // block transpose needs.
        unsafe { stage_blocks::<u32, 8>(buf, t0, src, row_stride, len, klen, transpose8_avx) }
    }

    /// [`super::stage`] for 8-byte elements in 4 x 4 AVX blocks.
    ///
    /// # Safety
    /// As [`super::stage`]; the CPU must have AVX.
    #[target_feature(enable = "avx")]
    pub(super) unsafe fn stage8_avx(
        buf: *mut u64,
        t0: usize,
        src: *const u8,
        row_stride: isize,
        len: usize,
        klen: usize,
    ) {
        // SAFETY: as in `stage4_avx`.
        unsafe { stage_blocks::<u64, 4>(buf, t0, src, row_stride, len, klen, transpose4x8_avx) }
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
