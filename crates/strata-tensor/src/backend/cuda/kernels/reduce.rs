//! Reductions. Every module holds five kernels for one op and dtype:
//!
//! * `rows`: the reduced elements of each output are contiguous (one merged
//!   reduced dim of stride 1: a full reduction, or one over the innermost
//!   dims). A block folds a row (or a part of one) with 16-byte vector
//!   loads from the first 16-byte boundary on (the elements before it and
//!   after the last whole vector are folded one by one), four loads in
//!   flight per thread, then a warp-shuffle block reduction.
//!   Rows of at most [`WARP_ROW_MAX`] elements take `rows_warp` instead: a
//!   warp per output, several outputs per block.
//! * `cols`: the kept innermost dim has stride 1 and the reduced elements
//!   form one merged dim (a reduction over outer dims, such as dim 0 of a
//!   row-major matrix). Each thread owns `CV` (up to 4) neighbouring columns
//!   (one vector load per reduced row where aligned; `cols1`, with one
//!   column per thread, where not), the block's
//!   rows of threads split the reduced dim, and `blockIdx.y` splits it
//!   further over parts when there are too few column tiles to fill the GPU.
//! * `reduce`: any layout. One block per output position (the kept dims,
//!   row-major), its threads folding the reduced dims (row-major positions
//!   `k`).
//! * `combine` / `combine_t`: the second pass where an output was split over
//!   several parts: a block per output over partials stored `[out][part]`, or
//!   a thread per output over partials stored `[part][out]` (coalesced).
//!
//! Max/min keep the position too: a NaN wins (the first one), otherwise the
//! extreme value, ties going to the first position, as on the CPU; every
//! combination step compares positions, so the order in which threads fold
//! does not change the result.

use super::ops::{arith, scalar};
use super::{compute_ty, load, storage_ty, store, PRELUDE};
use crate::backend::{BinaryOp, ReduceOp};
use crate::dtype::DType;

/// Threads per block.
pub(crate) const RBLOCK: u32 = 256;

/// The longest rows `rows_warp` folds (a warp per output).
pub(crate) const WARP_ROW_MAX: usize = 1024;

/// Threads of a `cols` block along the columns (one warp) and along the
/// reduced dim.
pub(crate) const CBLOCK_X: u32 = 32;
/// See [`CBLOCK_X`].
pub(crate) const CBLOCK_Y: u32 = 16;

/// Elements of `d` in one 16-byte vector load.
pub(crate) fn vec_width(d: DType) -> usize {
    16 / d.size()
}

/// The reduction module for `op` over elements of `d`; kernels `reduce`,
/// `combine`, `rows`, `cols` (and `cols1`, its unvectorised form) and
/// `combine_t`.
pub(crate) fn source(op: ReduceOp, d: DType) -> String {
    let c = compute_ty(d);
    let opn = match op {
        ReduceOp::Sum => 0,
        ReduceOp::Mean => 1,
        ReduceOp::Max => 2,
        ReduceOp::Min => 3,
    };
    let mut s = String::from(PRELUDE);
    s.push_str(&format!(
        "typedef {t} T;\ntypedef {c} C;\nconstexpr int OP = {opn};\nconstexpr int RB = {RBLOCK};\n\
         constexpr int VEC = {vec};\nconstexpr int CX = {CBLOCK_X};\nconstexpr int CY = {CBLOCK_Y};\n\
         __device__ __forceinline__ C ld(T x) {{ return {ld}; }}\n\
         __device__ __forceinline__ T st(C v) {{ return {st}; }}\n\
         __device__ __forceinline__ C add(C a, C b) {{ return {add}; }}\n\
         __device__ __forceinline__ C divc(C a, const Params& prm) {{ const C b = {cnt}; return {div}; }}\n",
        t = storage_ty(d),
        ld = load(d, "x"),
        st = store(d, "v"),
        add = arith(BinaryOp::Add, d, "a", "b"),
        cnt = scalar(d, 0),
        div = arith(BinaryOp::Div, d, "a", "b"),
        vec = vec_width(d),
    ));
    s.push_str(TEMPLATE);
    s
}

const TEMPLATE: &str = r#"
struct RMeta { int nk; int nr; i64 nout; i64 nred; i64 ksize[MAXD]; i64 kst[MAXD]; i64 rsize[MAXD]; i64 rst[MAXD]; };

// Whether x (at position kx) is preferred over b (at kb) by max/min.
__device__ __forceinline__ bool better(C x, i64 kx, C b, i64 kb) {
  const bool xn = isnan_(x), bn = isnan_(b);
  if (xn || bn) {
    if (xn && bn) return kx < kb;
    return xn;
  }
  if (OP == 2) { if (x > b) return true; if (x < b) return false; }
  else { if (x < b) return true; if (x > b) return false; }
  return kx < kb;
}

// Folds (b, kb) into (a, ka): a sum, or the preferred of two candidates
// (kb < 0: no candidate).
__device__ __forceinline__ void merge(C& a, i64& ka, C b, i64 kb) {
  if constexpr (OP <= 1) {
    a = add(a, b);
  } else {
    if (kb >= 0 && (ka < 0 || better(b, kb, a, ka))) { a = b; ka = kb; }
  }
}

// Lane 0 ends with the warp's fold. Neighbouring lanes merge first (1 apart,
// then 2, 4, 8, 16): lane 0's sum is the pairwise ((a0 + a1) + (a2 + a3)) +
// ..., so where neighbours cancel (1e30 next to -1e30) the short run is added
// as the CPU's sum adds it, not (a0 + a2) + (a1 + a3), which can lose the
// rest to the large terms.
__device__ __forceinline__ void warp_merge(C& a, i64& ka) {
  for (int s = 1; s < 32; s <<= 1) {
    const C b = __shfl_down_sync(0xffffffffu, a, s);
    i64 kb = 0;
    if constexpr (OP > 1) kb = __shfl_down_sync(0xffffffffu, ka, s);
    merge(a, ka, b, kb);
  }
}

// Combines the block's (value, position) pairs in shared memory into sv[0],
// sk[0]: halves down to one warp's worth in shared memory, then the warp
// merges neighbours first (`warp_merge`), so thread i's value, which holds
// element i of a short run, meets its neighbour's first.
__device__ __forceinline__ void block_combine(C* sv, i64* sk, int tid) {
  __syncthreads();
  for (int s = RB / 2; s >= 32; s >>= 1) {
    if (tid < s) {
      C a = sv[tid];
      i64 ka = sk[tid];
      merge(a, ka, sv[tid + s], sk[tid + s]);
      sv[tid] = a;
      sk[tid] = ka;
    }
    __syncthreads();
  }
  if (tid < 32) {
    C a = sv[tid];
    i64 ka = sk[tid];
    warp_merge(a, ka);
    if (tid == 0) { sv[0] = a; sk[0] = ka; }
  }
  __syncthreads();
}

__device__ __forceinline__ void write_final(C r, i64 k, i64 o, char* vals, char* idxs, const Params& prm) {
  if constexpr (OP == 1) r = divc(r, prm);
  if (vals != nullptr) reinterpret_cast<T*>(vals)[o] = st(r);
  if (idxs != nullptr) reinterpret_cast<i64*>(idxs)[o] = k;
}

// Block b reduces part (b % parts) of output (b / parts): with one part it
// writes the result, with several it writes a partial to pv/pk for `combine`.
extern "C" __global__ void __launch_bounds__(RB) reduce(const char* in, char* vals, char* idxs, RMeta m, Params prm,
                                                       int parts, char* pv, char* pk) {
  __shared__ C sv[RB];
  __shared__ i64 sk[RB];
  const int tid = threadIdx.x;
  const i64 nb = m.nout * parts;
  for (i64 b = blockIdx.x; b < nb; b += gridDim.x) {
    const i64 o = b / parts, part = b % parts;
    i64 rem = o, base = 0;
    for (int d = m.nk - 1; d >= 0; d--) {
      base += (rem % m.ksize[d]) * m.kst[d];
      rem /= m.ksize[d];
    }
    C acc = C(0);
    i64 bk = -1;
    const i64 rst0 = m.rst[0];
    for (i64 k = part * RB + tid; k < m.nred; k += (i64)RB * parts) {
      i64 off = base;
      if (m.nr == 1) {
        off += k * rst0;
      } else {
        i64 rr = k;
        for (int d = m.nr - 1; d >= 0; d--) {
          off += (rr % m.rsize[d]) * m.rst[d];
          rr /= m.rsize[d];
        }
      }
      const C x = ld(reinterpret_cast<const T*>(in)[off]);
      if constexpr (OP <= 1) {
        acc = add(acc, x);
      } else {
        if (bk < 0 || better(x, k, acc, bk)) { acc = x; bk = k; }
      }
    }
    sv[tid] = acc;
    sk[tid] = bk;
    block_combine(sv, sk, tid);
    if (tid == 0) {
      if (parts == 1) {
        write_final(sv[0], sk[0], o, vals, idxs, prm);
      } else {
        reinterpret_cast<C*>(pv)[b] = sv[0];
        reinterpret_cast<i64*>(pk)[b] = sk[0];
      }
    }
    __syncthreads();
  }
}

// Second pass: one block per output folds its `parts` partials.
extern "C" __global__ void __launch_bounds__(RB) combine(const char* pv, const char* pk, char* vals, char* idxs, i64 nout,
                                                        int parts, Params prm) {
  __shared__ C sv[RB];
  __shared__ i64 sk[RB];
  const int tid = threadIdx.x;
  for (i64 o = blockIdx.x; o < nout; o += gridDim.x) {
    C acc = C(0);
    i64 bk = -1;
    for (int q = tid; q < parts; q += RB) {
      const C x = reinterpret_cast<const C*>(pv)[o * parts + q];
      const i64 kx = reinterpret_cast<const i64*>(pk)[o * parts + q];
      if constexpr (OP <= 1) {
        acc = add(acc, x);
      } else {
        if (kx >= 0 && (bk < 0 || better(x, kx, acc, bk))) { acc = x; bk = kx; }
      }
    }
    sv[tid] = acc;
    sk[tid] = bk;
    block_combine(sv, sk, tid);
    if (tid == 0) write_final(sv[0], sk[0], o, vals, idxs, prm);
    __syncthreads();
  }
}

// ---- fast paths ---------------------------------------------------------

// The storage offset of output o's first element (kept dims, row-major).
// (With nk = m.nk - 1: the base of a group of the `cols` kernel.)
__device__ __forceinline__ i64 kbase(const RMeta& m, i64 o, int nk) {
  i64 base = 0;
  for (int d = nk - 1; d >= 0; d--) {
    base += (o % m.ksize[d]) * m.kst[d];
    o /= m.ksize[d];
  }
  return base;
}

// Block-wide merge of every thread's (a, ka) (nthreads a multiple of 32, at
// most 1024); the result is in thread 0's. Ends with a barrier so the shared
// scratch can be reused.
__device__ __forceinline__ void block_merge(C& a, i64& ka, int tid, int nthreads) {
  __shared__ C wv[32];
  __shared__ i64 wk[32];
  warp_merge(a, ka);
  const int warp = tid >> 5, lane = tid & 31, nw = nthreads >> 5;
  if (lane == 0) { wv[warp] = a; wk[warp] = ka; }
  __syncthreads();
  if (warp == 0) {
    a = lane < nw ? wv[lane] : C(0);
    ka = lane < nw ? wk[lane] : (i64)-1;
    warp_merge(a, ka);
  }
  __syncthreads();
}

typedef Vec<T, VEC> V;

// Folds the VEC elements of v, at positions k0.. .
__device__ __forceinline__ void fold_vec(C& acc, i64& bk, const V& v, i64 k0) {
  #pragma unroll
  for (int j = 0; j < VEC; j++) merge(acc, bk, ld(v.v[j]), k0 + j);
}

// Output o's m.nred reduced elements are contiguous from kbase(o). Block b
// folds part (b % parts) of output (b / parts); with several parts it writes
// a partial to pv/pk ([out][part]) for `combine`.
extern "C" __global__ void __launch_bounds__(RB) rows(const char* in, char* vals, char* idxs, RMeta m, Params prm,
                                                     int parts, char* pv, char* pk) {
  const int tid = threadIdx.x;
  const i64 nb = m.nout * parts, n = m.nred;
  for (i64 b = blockIdx.x; b < nb; b += gridDim.x) {
    const i64 o = b / parts;
    const int part = (int)(b % parts);
    const T* row = reinterpret_cast<const T*>(in) + kbase(m, o, m.nk);
    // Elements before the first 16-byte boundary, then whole vectors.
    i64 head = (i64)(((16u - ((u64)row & 15u)) & 15u) / sizeof(T));
    if (head > n) head = n;
    const i64 nv = (n - head) / VEC, tail0 = head + nv * VEC;
    const i64 per = (nv + parts - 1) / parts;
    const i64 v0 = (i64)part * per;
    const i64 v1 = v0 + per < nv ? v0 + per : nv;
    C acc = C(0);
    i64 bk = -1;
    if (part == 0) {
      for (i64 k = tid; k < head; k += RB) merge(acc, bk, ld(row[k]), k);
      for (i64 k = tail0 + tid; k < n; k += RB) merge(acc, bk, ld(row[k]), k);
    }
    const V* vr = reinterpret_cast<const V*>(row + head);
    i64 i = v0 + tid;
    for (; i + 3 * RB < v1; i += 4 * RB) {
      const V a0 = vr[i], a1 = vr[i + RB], a2 = vr[i + 2 * RB], a3 = vr[i + 3 * RB];
      fold_vec(acc, bk, a0, head + i * VEC);
      fold_vec(acc, bk, a1, head + (i + RB) * VEC);
      fold_vec(acc, bk, a2, head + (i + 2 * RB) * VEC);
      fold_vec(acc, bk, a3, head + (i + 3 * RB) * VEC);
    }
    for (; i < v1; i += RB) fold_vec(acc, bk, vr[i], head + i * VEC);
    block_merge(acc, bk, tid, RB);
    if (tid == 0) {
      if (parts == 1) {
        write_final(acc, bk, o, vals, idxs, prm);
      } else {
        reinterpret_cast<C*>(pv)[b] = acc;
        reinterpret_cast<i64*>(pk)[b] = bk;
      }
    }
  }
}

// Short rows (session 76): one warp per output, lane l folding the l-th of
// 32 contiguous runs of the row's m.nred elements in order, then the warp
// merge (neighbouring runs first, as `rows` merges its threads' runs); RB /
// 32 outputs per block (a block per short row left most of its threads
// idle). The parameters are `rows`' (parts is 1; pv, pk unused).
extern "C" __global__ void __launch_bounds__(RB) rows_warp(const char* in, char* vals, char* idxs, RMeta m, Params prm,
                                                          int parts, char* pv, char* pk) {
  const int lane = threadIdx.x & 31;
  const i64 step = (i64)gridDim.x * (RB / 32);
  for (i64 o = (i64)blockIdx.x * (RB / 32) + (threadIdx.x >> 5); o < m.nout; o += step) {
    const T* row = reinterpret_cast<const T*>(in) + kbase(m, o, m.nk);
    C acc = C(0);
    i64 bk = -1;
    const i64 run = (m.nred + 31) / 32, k1 = (lane + 1) * run < m.nred ? (lane + 1) * run : m.nred;
    for (i64 k = lane * run; k < k1; k++) merge(acc, bk, ld(row[k]), k);
    warp_merge(acc, bk);
    if (lane == 0) write_final(acc, bk, o, vals, idxs, prm);
  }
}

// Columns per thread of `cols` (4 at most: its shared memory stays within 24 KiB).
constexpr int CV = VEC < 4 ? VEC : 4;

// Outputs: m.nout / ncols groups of ncols contiguous columns (the kept
// innermost dim, stride 1; the other kept dims give each group's base); each
// output folds m.nred elements m.rst[0] apart. Block (x, y) threads: x owns
// W neighbouring columns of a tile of CX * W, y strides over the reduced dim;
// blockIdx.x = group * tiles + tile, blockIdx.y = part. With several parts
// the partials go to pv/pk as [part][out] for `combine_t`.
template <int W>
__device__ __forceinline__ void cols_body(const char* in, char* vals, char* idxs, const RMeta& m, const Params& prm,
                                          i64 ncols, i64 tiles, char* pv, char* pk) {
  typedef Vec<T, W> VW;
  __shared__ C sv[CY][CX * W];
  __shared__ i64 sk[CY][CX * W];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int parts = gridDim.y, part = blockIdx.y;
  const i64 ngroups = m.nout / ncols, nblk = ngroups * tiles;
  const i64 n = m.nred, rs = m.rst[0];
  const i64 per = (n + parts - 1) / parts;
  const i64 r0 = (i64)part * per;
  const i64 r1 = r0 + per < n ? r0 + per : n;
  for (i64 blk = blockIdx.x; blk < nblk; blk += gridDim.x) {
    const i64 g = blk / tiles, tile = blk % tiles;
    const i64 c0 = tile * (CX * W) + (i64)tx * W;
    // The group's base: the kept dims but the innermost.
    const i64 gbase = kbase(m, g, m.nk - 1);
    C acc[W];
    i64 bk[W];
    #pragma unroll
    for (int j = 0; j < W; j++) { acc[j] = C(0); bk[j] = -1; }
    if (c0 < ncols) {
      const T* p = reinterpret_cast<const T*>(in) + gbase + c0;
      const int nc = ncols - c0 < W ? (int)(ncols - c0) : W;
      i64 r = r0 + ty;
      if (W > 1 && nc == W) {
        for (; r + 3 * CY < r1; r += 4 * CY) {
          const VW a0 = *reinterpret_cast<const VW*>(p + r * rs);
          const VW a1 = *reinterpret_cast<const VW*>(p + (r + CY) * rs);
          const VW a2 = *reinterpret_cast<const VW*>(p + (r + 2 * CY) * rs);
          const VW a3 = *reinterpret_cast<const VW*>(p + (r + 3 * CY) * rs);
          #pragma unroll
          for (int j = 0; j < W; j++) {
            merge(acc[j], bk[j], ld(a0.v[j]), r);
            merge(acc[j], bk[j], ld(a1.v[j]), r + CY);
            merge(acc[j], bk[j], ld(a2.v[j]), r + 2 * CY);
            merge(acc[j], bk[j], ld(a3.v[j]), r + 3 * CY);
          }
        }
        for (; r < r1; r += CY) {
          const VW a = *reinterpret_cast<const VW*>(p + r * rs);
          #pragma unroll
          for (int j = 0; j < W; j++) merge(acc[j], bk[j], ld(a.v[j]), r);
        }
      } else {
        for (; r + 3 * CY < r1; r += 4 * CY) {
          for (int j = 0; j < nc; j++) {
            const T x0 = p[r * rs + j], x1 = p[(r + CY) * rs + j];
            const T x2 = p[(r + 2 * CY) * rs + j], x3 = p[(r + 3 * CY) * rs + j];
            merge(acc[j], bk[j], ld(x0), r);
            merge(acc[j], bk[j], ld(x1), r + CY);
            merge(acc[j], bk[j], ld(x2), r + 2 * CY);
            merge(acc[j], bk[j], ld(x3), r + 3 * CY);
          }
        }
        for (; r < r1; r += CY) {
          for (int j = 0; j < nc; j++) merge(acc[j], bk[j], ld(p[r * rs + j]), r);
        }
      }
    }
    // Merge the CY row groups of each column in shared memory.
    #pragma unroll
    for (int j = 0; j < W; j++) { sv[ty][tx * W + j] = acc[j]; sk[ty][tx * W + j] = bk[j]; }
    __syncthreads();
    for (int c = ty * CX + tx; c < CX * W; c += CX * CY) {
      C a = sv[0][c];
      i64 ka = sk[0][c];
      for (int y = 1; y < CY; y++) merge(a, ka, sv[y][c], sk[y][c]);
      const i64 col = tile * (CX * W) + c;
      if (col < ncols) {
        const i64 o = g * ncols + col;
        if (parts == 1) {
          write_final(a, ka, o, vals, idxs, prm);
        } else {
          reinterpret_cast<C*>(pv)[(i64)part * m.nout + o] = a;
          reinterpret_cast<i64*>(pk)[(i64)part * m.nout + o] = ka;
        }
      }
    }
    __syncthreads();
  }
}

extern "C" __global__ void __launch_bounds__(CX * CY) cols(const char* in, char* vals, char* idxs, RMeta m, Params prm,
                                                          i64 ncols, i64 tiles, char* pv, char* pk) {
  cols_body<CV>(in, vals, idxs, m, prm, ncols, tiles, pv, pk);
}

extern "C" __global__ void __launch_bounds__(CX * CY) cols1(const char* in, char* vals, char* idxs, RMeta m, Params prm,
                                                           i64 ncols, i64 tiles, char* pv, char* pk) {
  cols_body<1>(in, vals, idxs, m, prm, ncols, tiles, pv, pk);
}

// Second pass over partials stored [part][out]: one thread per output, the
// parts folded in order.
extern "C" __global__ void __launch_bounds__(RB) combine_t(const char* pv, const char* pk, char* vals, char* idxs,
                                                          i64 nout, int parts, Params prm) {
  for (i64 o = (i64)blockIdx.x * RB + threadIdx.x; o < nout; o += (i64)gridDim.x * RB) {
    C a = C(0);
    i64 ka = -1;
    for (int q = 0; q < parts; q++) {
      merge(a, ka, reinterpret_cast<const C*>(pv)[(i64)q * nout + o], reinterpret_cast<const i64*>(pk)[(i64)q * nout + o]);
    }
    write_final(a, ka, o, vals, idxs, prm);
  }
}
"#;

/// Kernel metadata, laid out as `RMeta` in the source.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub(crate) struct RMeta {
    pub nk: i32,
    pub nr: i32,
    pub nout: i64,
    pub nred: i64,
    pub ksize: [i64; super::MAXD],
    pub kst: [i64; super::MAXD],
    pub rsize: [i64; super::MAXD],
    pub rst: [i64; super::MAXD],
}

// SAFETY: `#[repr(C)]`, laid out as `RMeta` in the source.
unsafe impl crate::backend::cuda::launch::KernelParam for RMeta {}
