//! The element-wise kernel family. One module per op and dtypes; the host
//! side (`launch`) picks the kernel from the iteration plan:
//!
//! * `contig_v` / `contig_1`: every operand contiguous (one coalesced dim).
//!   Each thread moves `UNROLL` vectors of `V` elements (16 bytes for the
//!   widest operand), all loads issued before the first use.
//! * `rows_v` / `rows_1`: the fastest dim innermost (coalesced across the
//!   warp), the other dims decomposed once per row by the block's y index;
//!   vectorised when each operand steps one element (or zero, a broadcast)
//!   along the fastest dim. Broadcast rows/columns and slices take this path.
//! * `rowsp_v` / `rowsp_1`: the same layouts with rows shorter than a block
//!   (a head's 64 elements, say): a block holds several rows of `m.tile`
//!   threads each (a power of two), every thread handling `UNROLL` rows, so
//!   no thread idles on a row end. Such rows come from the copies that make
//!   `[b, t, h, d]` views contiguous as `[b, h, t, d]` in attention.
//! * `general`: any strides, one element per thread, for very short fastest dims.
//! * `tiled`: an input whose fastest dim is another dim of the output (a
//!   transpose) is staged through a 32x33 shared-memory tile so that both its
//!   reads and the output's writes are coalesced.
//!
//! Strides are byte strides and travel in the `Meta` kernel argument, by value:
//! nothing is allocated or copied per launch.

use super::PRELUDE;

/// Threads per block of the 1-D kernels.
pub(crate) const BLOCK: u32 = 128;
/// Vectors (or elements) per thread.
pub(crate) const UNROLL: u32 = 4;
/// Tile edge of the tiled kernel (a multiple of 32) and rows of 32 threads
/// per block: each thread handles `(TILE / TILE_ROWS) * (TILE / 32)` elements.
/// `STRATA_CUDA_TILE=EDGE,ROWS` overrides them (for tuning).
pub(crate) fn tile_geometry() -> (u32, u32) {
    static G: std::sync::OnceLock<(u32, u32)> = std::sync::OnceLock::new();
    *G.get_or_init(|| {
        std::env::var("STRATA_CUDA_TILE")
            .ok()
            .and_then(|s| {
                let (a, b) = s.split_once(',')?;
                let (e, r): (u32, u32) = (a.trim().parse().ok()?, b.trim().parse().ok()?);
                (e % 32 == 0 && e > 0 && r > 0 && e % r == 0 && 32 * r <= 1024).then_some((e, r))
            })
            .unwrap_or((TILE, TILE_ROWS))
    })
}

/// Default tile edge.
pub(crate) const TILE: u32 = 32;
/// Default rows of threads per tile.
pub(crate) const TILE_ROWS: u32 = 4;

/// Kernel names in the module, in this order.
pub(crate) const NAMES: [&str; 9] = [
    "contig_v", "contig_1", "rows_v", "rows_1", "general", "tiled", "rowsp_v", "rowsp_1", "tiled_v",
];

/// Threads per block of `tiled_v`.
pub(crate) const TILED_V_THREADS: u32 = 256;

/// `tiled_v`'s tile edge for these operand element sizes (output first): 64
/// when the shared-memory tiles of every input fit in 40 KiB, else 32.
pub(crate) fn tiled_v_edge(sizes: &[usize]) -> u32 {
    let staged: usize = sizes[1..].iter().map(|s| 64 * 65 * s).sum();
    if staged <= 40 << 10 {
        64
    } else {
        32
    }
}

/// `tiled_v`'s block: `edge / v` threads along the output's fastest dim
/// (one vector each), and rows of them up to [`TILED_V_THREADS`] (at most
/// `edge`).
pub(crate) fn tiled_v_block(edge: u32, v: u32) -> (u32, u32) {
    let tx = (edge / v).max(1);
    (tx, (TILED_V_THREADS / tx).clamp(1, edge))
}

/// The module's source: storage types of the output and up to three inputs
/// (unused inputs are `u8`), the number of inputs, the vector width and the body.
pub(crate) fn source(tys: [&str; 4], nin: usize, v: u32, body: &str, sizes: &[usize]) -> String {
    let (td, tr) = tile_geometry();
    let tdv = tiled_v_edge(sizes);
    let (txv, trv) = tiled_v_block(tdv, v);
    let mut s = String::with_capacity(PRELUDE.len() + TEMPLATE.len() + 256);
    s.push_str(PRELUDE);
    // Session 79: the special functions' helpers, only where the body uses one.
    if body.contains("sp_") {
        s.push_str(super::special::SPECIAL_PRELUDE);
    }
    s.push_str(&format!(
        "typedef {} T0;\ntypedef {} T1;\ntypedef {} T2;\ntypedef {} T3;\n\
         constexpr int NIN = {nin};\nconstexpr int V = {v};\nconstexpr int BLOCK = {BLOCK};\n\
         constexpr int UNROLL = {UNROLL};\nconstexpr int TD = {td};\nconstexpr int TR = {tr};\n\
         constexpr int TDV = {tdv};\nconstexpr int TXV = {txv};\nconstexpr int TRV = {trv};\n\
         __device__ __forceinline__ T0 apply(T1 x1, T2 x2, T3 x3, const Params& prm) {{ {body} }}\n",
        tys[0], tys[1], tys[2], tys[3]
    ));
    s.push_str(TEMPLATE);
    s
}

const TEMPLATE: &str = r#"
template <int W>
__device__ __forceinline__ void contig_impl(char* p0, const char* p1, const char* p2, const char* p3, i64 n, const Params& prm) {
  const i64 span = (i64)BLOCK * UNROLL * W;
  const i64 base = (i64)blockIdx.x * span;
  if (base + span <= n) {
    Vec<T1, W> a1[UNROLL]; Vec<T2, W> a2[UNROLL]; Vec<T3, W> a3[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; u++) {
      const i64 i = base + ((i64)u * BLOCK + threadIdx.x) * W;
      if constexpr (NIN > 0) a1[u] = *reinterpret_cast<const Vec<T1, W>*>(p1 + i * (i64)sizeof(T1));
      if constexpr (NIN > 1) a2[u] = *reinterpret_cast<const Vec<T2, W>*>(p2 + i * (i64)sizeof(T2));
      if constexpr (NIN > 2) a3[u] = *reinterpret_cast<const Vec<T3, W>*>(p3 + i * (i64)sizeof(T3));
    }
#pragma unroll
    for (int u = 0; u < UNROLL; u++) {
      const i64 i = base + ((i64)u * BLOCK + threadIdx.x) * W;
      Vec<T0, W> r;
#pragma unroll
      for (int j = 0; j < W; j++) {
        T1 x1 = T1(); T2 x2 = T2(); T3 x3 = T3();
        if constexpr (NIN > 0) x1 = a1[u].v[j];
        if constexpr (NIN > 1) x2 = a2[u].v[j];
        if constexpr (NIN > 2) x3 = a3[u].v[j];
        r.v[j] = apply(x1, x2, x3, prm);
      }
      *reinterpret_cast<Vec<T0, W>*>(p0 + i * (i64)sizeof(T0)) = r;
    }
  } else {
    for (i64 i = base + threadIdx.x; i < n; i += BLOCK) {
      T1 x1 = T1(); T2 x2 = T2(); T3 x3 = T3();
      if constexpr (NIN > 0) x1 = reinterpret_cast<const T1*>(p1)[i];
      if constexpr (NIN > 1) x2 = reinterpret_cast<const T2*>(p2)[i];
      if constexpr (NIN > 2) x3 = reinterpret_cast<const T3*>(p3)[i];
      reinterpret_cast<T0*>(p0)[i] = apply(x1, x2, x3, prm);
    }
  }
}

extern "C" __global__ void __launch_bounds__(BLOCK) contig_v(char* p0, const char* p1, const char* p2, const char* p3, i64 n, Params prm) {
  contig_impl<V>(p0, p1, p2, p3, n, prm);
}
extern "C" __global__ void __launch_bounds__(BLOCK) contig_1(char* p0, const char* p1, const char* p2, const char* p3, i64 n, Params prm) {
  contig_impl<1>(p0, p1, p2, p3, n, prm);
}

// Loads W elements of an operand along the fastest dim: a vector when the
// operand steps one element, one element repeated when it steps zero.
template <class T, int W>
__device__ __forceinline__ void load_w(T (&dst)[W], const char* q, i64 i, i64 s) {
  if constexpr (W == 1) {
    dst[0] = *reinterpret_cast<const T*>(q + i * s);
  } else {
    if (s == 0) {
      const T x = *reinterpret_cast<const T*>(q);
#pragma unroll
      for (int j = 0; j < W; j++) dst[j] = x;
    } else {
      const Vec<T, W> x = *reinterpret_cast<const Vec<T, W>*>(q + i * (i64)sizeof(T));
#pragma unroll
      for (int j = 0; j < W; j++) dst[j] = x.v[j];
    }
  }
}

// Byte offsets of every operand at the start of row `r` (dims 1.. of the plan).
__device__ __forceinline__ void row_offsets(const Meta& m, i64 r, i64 (&o)[4]) {
  o[0] = 0; o[1] = 0; o[2] = 0; o[3] = 0;
  i64 rem = r;
  for (int d = 1; d < m.nd; d++) {
    const i64 sz = m.size[d];
    const i64 idx = rem % sz;
    rem /= sz;
    o[0] += idx * m.st[0][d];
    if constexpr (NIN > 0) o[1] += idx * m.st[1][d];
    if constexpr (NIN > 1) o[2] += idx * m.st[2][d];
    if constexpr (NIN > 2) o[3] += idx * m.st[3][d];
  }
}

// Applies the op to W loaded elements and stores them at element i of the
// output row q0 (a vector store when W > 1: the output steps one element).
template <int W>
__device__ __forceinline__ void store_w(char* q0, i64 i, i64 s0, const T1 (&a1)[W], const T2 (&a2)[W], const T3 (&a3)[W], const Params& prm) {
  if constexpr (W == 1) {
    T1 x1 = T1(); T2 x2 = T2(); T3 x3 = T3();
    if constexpr (NIN > 0) x1 = a1[0];
    if constexpr (NIN > 1) x2 = a2[0];
    if constexpr (NIN > 2) x3 = a3[0];
    *reinterpret_cast<T0*>(q0 + i * s0) = apply(x1, x2, x3, prm);
  } else {
    Vec<T0, W> res;
#pragma unroll
    for (int j = 0; j < W; j++) {
      T1 x1 = T1(); T2 x2 = T2(); T3 x3 = T3();
      if constexpr (NIN > 0) x1 = a1[j];
      if constexpr (NIN > 1) x2 = a2[j];
      if constexpr (NIN > 2) x3 = a3[j];
      res.v[j] = apply(x1, x2, x3, prm);
    }
    *reinterpret_cast<Vec<T0, W>*>(q0 + i * (i64)sizeof(T0)) = res;
  }
}

template <int W>
__device__ __forceinline__ void rows_impl(char* p0, const char* p1, const char* p2, const char* p3, const Meta& m, const Params& prm) {
  const i64 n0 = m.size[0];
  const i64 s0 = m.st[0][0], s1 = m.st[1][0], s2 = m.st[2][0], s3 = m.st[3][0];
  const i64 start = (i64)blockIdx.x * BLOCK * UNROLL * W;
  for (i64 r = blockIdx.y; r < m.outer; r += gridDim.y) {
    i64 o[4];
    row_offsets(m, r, o);
    char* q0 = p0 + o[0];
    const char* q1 = p1 + o[1];
    const char* q2 = p2 + o[2];
    const char* q3 = p3 + o[3];
    T1 a1[UNROLL][W]; T2 a2[UNROLL][W]; T3 a3[UNROLL][W];
#pragma unroll
    for (int u = 0; u < UNROLL; u++) {
      const i64 i = start + ((i64)u * BLOCK + threadIdx.x) * W;
      if (i < n0) {
        if constexpr (NIN > 0) load_w<T1, W>(a1[u], q1, i, s1);
        if constexpr (NIN > 1) load_w<T2, W>(a2[u], q2, i, s2);
        if constexpr (NIN > 2) load_w<T3, W>(a3[u], q3, i, s3);
      }
    }
#pragma unroll
    for (int u = 0; u < UNROLL; u++) {
      const i64 i = start + ((i64)u * BLOCK + threadIdx.x) * W;
      if (i < n0) store_w<W>(q0, i, s0, a1[u], a2[u], a3[u], prm);
    }
  }
}

extern "C" __global__ void __launch_bounds__(BLOCK) rows_v(char* p0, const char* p1, const char* p2, const char* p3, Meta m, Params prm) {
  rows_impl<V>(p0, p1, p2, p3, m, prm);
}
extern "C" __global__ void __launch_bounds__(BLOCK) rows_1(char* p0, const char* p1, const char* p2, const char* p3, Meta m, Params prm) {
  rows_impl<1>(p0, p1, p2, p3, m, prm);
}

// Rows shorter than a block: BLOCK / TPR rows of TPR threads (TPR = m.tile, a
// power of two) per block, each thread taking UNROLL rows a block's rows
// apart, every load of a thread issued before the first store.
template <int W>
__device__ __forceinline__ void rowsp_impl(char* p0, const char* p1, const char* p2, const char* p3, const Meta& m, const Params& prm) {
  const int tpr = m.tile;
  const int rpb = BLOCK / tpr;
  const int lane = threadIdx.x % tpr, sub = threadIdx.x / tpr;
  const i64 n0 = m.size[0];
  const i64 s0 = m.st[0][0], s1 = m.st[1][0], s2 = m.st[2][0], s3 = m.st[3][0];
  const i64 per_block = (i64)rpb * UNROLL;
  for (i64 rb = (i64)blockIdx.x * per_block; rb < m.outer; rb += (i64)gridDim.x * per_block) {
    i64 o[UNROLL][4];
    bool live[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; u++) {
      const i64 r = rb + (i64)u * rpb + sub;
      live[u] = r < m.outer;
      row_offsets(m, r, o[u]);
    }
    for (i64 i = (i64)lane * W; i < n0; i += (i64)tpr * W) {
      T1 a1[UNROLL][W]; T2 a2[UNROLL][W]; T3 a3[UNROLL][W];
#pragma unroll
      for (int u = 0; u < UNROLL; u++) {
        if (live[u]) {
          if constexpr (NIN > 0) load_w<T1, W>(a1[u], p1 + o[u][1], i, s1);
          if constexpr (NIN > 1) load_w<T2, W>(a2[u], p2 + o[u][2], i, s2);
          if constexpr (NIN > 2) load_w<T3, W>(a3[u], p3 + o[u][3], i, s3);
        }
      }
#pragma unroll
      for (int u = 0; u < UNROLL; u++) {
        if (live[u]) store_w<W>(p0 + o[u][0], i, s0, a1[u], a2[u], a3[u], prm);
      }
    }
  }
}
extern "C" __global__ void __launch_bounds__(BLOCK) rowsp_v(char* p0, const char* p1, const char* p2, const char* p3, Meta m, Params prm) {
  rowsp_impl<V>(p0, p1, p2, p3, m, prm);
}
extern "C" __global__ void __launch_bounds__(BLOCK) rowsp_1(char* p0, const char* p1, const char* p2, const char* p3, Meta m, Params prm) {
  rowsp_impl<1>(p0, p1, p2, p3, m, prm);
}

extern "C" __global__ void __launch_bounds__(BLOCK) general(char* p0, const char* p1, const char* p2, const char* p3, Meta m, i64 n, Params prm) {
  for (i64 idx = (i64)blockIdx.x * BLOCK + threadIdx.x; idx < n; idx += (i64)gridDim.x * BLOCK) {
    i64 o0 = 0, o1 = 0, o2 = 0, o3 = 0, rem = idx;
    for (int d = 0; d < m.nd; d++) {
      const i64 sz = m.size[d];
      const i64 k = rem % sz;
      rem /= sz;
      o0 += k * m.st[0][d];
      if constexpr (NIN > 0) o1 += k * m.st[1][d];
      if constexpr (NIN > 1) o2 += k * m.st[2][d];
      if constexpr (NIN > 2) o3 += k * m.st[3][d];
    }
    T1 x1 = T1(); T2 x2 = T2(); T3 x3 = T3();
    if constexpr (NIN > 0) x1 = *reinterpret_cast<const T1*>(p1 + o1);
    if constexpr (NIN > 1) x2 = *reinterpret_cast<const T2*>(p2 + o2);
    if constexpr (NIN > 2) x3 = *reinterpret_cast<const T3*>(p3 + o3);
    *reinterpret_cast<T0*>(p0 + o0) = apply(x1, x2, x3, prm);
  }
}

// Byte offsets of every operand at index `rem` of the dims other than 0 and
// k (the tile kernels' outer dims).
__device__ __forceinline__ void tile_offsets(const Meta& m, int k, i64 rem, i64& o0, i64& o1, i64& o2, i64& o3) {
  o0 = 0; o1 = 0; o2 = 0; o3 = 0;
  for (int d = 1; d < m.nd; d++) {
    if (d == k) continue;
    const i64 sz = m.size[d];
    const i64 idx = rem % sz;
    rem /= sz;
    o0 += idx * m.st[0][d];
    if constexpr (NIN > 0) o1 += idx * m.st[1][d];
    if constexpr (NIN > 1) o2 += idx * m.st[2][d];
    if constexpr (NIN > 2) o3 += idx * m.st[3][d];
  }
}

// Block (32, TR) over a TD x TD tile of dims 0 and k; each thread handles
// (TD / TR) * (TD / 32) elements. All global loads of a tile (the staging of
// transposed inputs and the direct reads of the others) are issued before the
// barrier, so they are in flight together.
constexpr int TH = TD / 32;
constexpr int TJ = TD / TR;
constexpr int GROUP = 16;
template <class T>
__device__ __forceinline__ void stage_or_read(bool tr, T* sm, T (&r)[TJ][TH], const char* q, i64 s0, i64 sk,
                                              i64 c0, i64 ck, i64 n0, i64 nk, int tx, int ty) {
  if (tr) {
#pragma unroll
    for (int j = 0; j < TJ; j++)
#pragma unroll
      for (int h = 0; h < TH; h++) {
        const i64 i0 = c0 + ty + j * TR, ik = ck + tx + 32 * h;
        if (i0 < n0 && ik < nk) sm[(ty + j * TR) * (TD + 1) + tx + 32 * h] = *reinterpret_cast<const T*>(q + i0 * s0 + ik * sk);
      }
  } else {
#pragma unroll
    for (int j = 0; j < TJ; j++)
#pragma unroll
      for (int h = 0; h < TH; h++) {
        const i64 q0 = c0 + tx + 32 * h, qk = ck + ty + j * TR;
        if (q0 < n0 && qk < nk) r[j][h] = *reinterpret_cast<const T*>(q + q0 * s0 + qk * sk);
      }
  }
}
extern "C" __global__ void __launch_bounds__(32 * TR) tiled(char* p0, const char* p1, const char* p2, const char* p3, Meta m, Params prm) {
  __shared__ T1 s1[NIN > 0 ? TD : 1][TD + 1];
  __shared__ T2 s2[NIN > 1 ? TD : 1][TD + 1];
  __shared__ T3 s3[NIN > 2 ? TD : 1][TD + 1];
  const int k = m.tile;
  const i64 n0 = m.size[0], nk = m.size[k];
  const i64 t0n = (n0 + TD - 1) / TD, tkn = (nk + TD - 1) / TD;
  const i64 ntiles = t0n * tkn * m.outer;
  const i64 a0 = m.st[0][0], ak = m.st[0][k];
  const i64 b10 = m.st[1][0], b1k = m.st[1][k];
  const i64 b20 = m.st[2][0], b2k = m.st[2][k];
  const i64 b30 = m.st[3][0], b3k = m.st[3][k];
  const bool tr1 = NIN > 0 && b10 != 0 && b1k != 0 && b1k < b10;
  const bool tr2 = NIN > 1 && b20 != 0 && b2k != 0 && b2k < b20;
  const bool tr3 = NIN > 2 && b30 != 0 && b3k != 0 && b3k < b30;
  const int tx = threadIdx.x, ty = threadIdx.y;
  const i64 per_outer = t0n * tkn;
  for (i64 t = blockIdx.x; t < ntiles; t += gridDim.x) {
    // Grouped tile order: GROUP tiles along dim 0, then along dim k, so the
    // blocks in flight cover a compact region of both operands (DRAM pages).
    i64 rem = t / per_outer;
    const i64 tt = t % per_outer;
    const i64 first0 = (tt / (GROUP * tkn)) * GROUP;
    const i64 gsz = (t0n - first0) < GROUP ? (t0n - first0) : GROUP;
    const i64 tin = tt % (GROUP * tkn);
    const i64 c0 = (first0 + tin % gsz) * TD;
    const i64 ck = (tin / gsz) * TD;
    i64 o0, o1, o2, o3;
    tile_offsets(m, k, rem, o0, o1, o2, o3);
    T1 r1[TJ][TH]; T2 r2[TJ][TH]; T3 r3[TJ][TH];
    // Transposed inputs are staged (element (c0 + ty + j*TR, ck + tx + 32h),
    // read along dim k); the others are read at this thread's output positions
    // (c0 + tx + 32h, ck + ty + j*TR). Branches are per operand, outside the
    // unrolled loops, so each operand's loads are issued together.
    if constexpr (NIN > 0) stage_or_read<T1>(tr1, &s1[0][0], r1, p1 + o1, b10, b1k, c0, ck, n0, nk, tx, ty);
    if constexpr (NIN > 1) stage_or_read<T2>(tr2, &s2[0][0], r2, p2 + o2, b20, b2k, c0, ck, n0, nk, tx, ty);
    if constexpr (NIN > 2) stage_or_read<T3>(tr3, &s3[0][0], r3, p3 + o3, b30, b3k, c0, ck, n0, nk, tx, ty);
    __syncthreads();
#pragma unroll
    for (int j = 0; j < TJ; j++) {
#pragma unroll
      for (int h = 0; h < TH; h++) {
        const i64 q0 = c0 + tx + 32 * h, qk = ck + ty + j * TR;
        if (q0 < n0 && qk < nk) {
          T1 x1 = T1(); T2 x2 = T2(); T3 x3 = T3();
          if constexpr (NIN > 0) x1 = tr1 ? s1[tx + 32 * h][ty + j * TR] : r1[j][h];
          if constexpr (NIN > 1) x2 = tr2 ? s2[tx + 32 * h][ty + j * TR] : r2[j][h];
          if constexpr (NIN > 2) x3 = tr3 ? s3[tx + 32 * h][ty + j * TR] : r3[j][h];
          *reinterpret_cast<T0*>(p0 + o0 + q0 * a0 + qk * ak) = apply(x1, x2, x3, prm);
        }
      }
    }
    __syncthreads();
  }
}

// The vectorised transpose: a TDV x TDV tile of dims 0 and k per block
// (blockIdx.x along dim 0, .y along k, .z over the other dims), TXV x TRV
// threads, every global access a V-element vector. Inputs that step one
// element along k (transposed) are read as vectors along k and stored into
// shared memory transposed; the others, like the output, step one element
// along dim 0 and are read as vectors at the thread's output positions. The
// host checks the layouts (unit strides, 16-byte alignment, n0 and nk
// multiples of V), so a vector never straddles a tile edge.
constexpr int JV = TDV / TRV;
template <class T>
__device__ __forceinline__ void stage_or_read_v(bool tr, T* sm, Vec<T, V> (&r)[JV], const char* q, i64 s0, i64 sk,
                                                i64 c0, i64 ck, i64 n0, i64 nk, int tx, int ty) {
  if (tr) {
#pragma unroll
    for (int j = 0; j < JV; j++) {
      const int rl = ty + j * TRV;
      const i64 i0 = c0 + rl, ik = ck + (i64)tx * V;
      if (i0 < n0 && ik < nk) {
        const Vec<T, V> x = *reinterpret_cast<const Vec<T, V>*>(q + i0 * s0 + ik * (i64)sizeof(T));
#pragma unroll
        for (int e = 0; e < V; e++) sm[(tx * V + e) * (TDV + 1) + rl] = x.v[e];
      }
    }
  } else {
#pragma unroll
    for (int j = 0; j < JV; j++) {
      const i64 qk = ck + ty + j * TRV, q0 = c0 + (i64)tx * V;
      if (q0 < n0 && qk < nk) r[j] = *reinterpret_cast<const Vec<T, V>*>(q + qk * sk + q0 * (i64)sizeof(T));
    }
  }
}
extern "C" __global__ void __launch_bounds__(TXV * TRV) tiled_v(char* p0, const char* p1, const char* p2, const char* p3, Meta m, Params prm) {
  __shared__ T1 s1[NIN > 0 ? TDV : 1][TDV + 1];
  __shared__ T2 s2[NIN > 1 ? TDV : 1][TDV + 1];
  __shared__ T3 s3[NIN > 2 ? TDV : 1][TDV + 1];
  const int k = m.tile;
  const i64 n0 = m.size[0], nk = m.size[k];
  const i64 c0 = (i64)blockIdx.x * TDV, ck = (i64)blockIdx.y * TDV;
  const i64 ak = m.st[0][k];
  const i64 b10 = m.st[1][0], b1k = m.st[1][k];
  const i64 b20 = m.st[2][0], b2k = m.st[2][k];
  const i64 b30 = m.st[3][0], b3k = m.st[3][k];
  const bool tr1 = NIN > 0 && b1k == (i64)sizeof(T1) && b10 != (i64)sizeof(T1);
  const bool tr2 = NIN > 1 && b2k == (i64)sizeof(T2) && b20 != (i64)sizeof(T2);
  const bool tr3 = NIN > 2 && b3k == (i64)sizeof(T3) && b30 != (i64)sizeof(T3);
  const int tx = threadIdx.x, ty = threadIdx.y;
  i64 o0, o1, o2, o3;
  tile_offsets(m, k, blockIdx.z, o0, o1, o2, o3);
  Vec<T1, V> r1[JV]; Vec<T2, V> r2[JV]; Vec<T3, V> r3[JV];
  if constexpr (NIN > 0) stage_or_read_v<T1>(tr1, &s1[0][0], r1, p1 + o1, b10, b1k, c0, ck, n0, nk, tx, ty);
  if constexpr (NIN > 1) stage_or_read_v<T2>(tr2, &s2[0][0], r2, p2 + o2, b20, b2k, c0, ck, n0, nk, tx, ty);
  if constexpr (NIN > 2) stage_or_read_v<T3>(tr3, &s3[0][0], r3, p3 + o3, b30, b3k, c0, ck, n0, nk, tx, ty);
  __syncthreads();
#pragma unroll
  for (int j = 0; j < JV; j++) {
    const int kl = ty + j * TRV;
    const i64 qk = ck + kl, q0 = c0 + (i64)tx * V;
    if (q0 < n0 && qk < nk) {
      Vec<T0, V> res;
#pragma unroll
      for (int e = 0; e < V; e++) {
        T1 x1 = T1(); T2 x2 = T2(); T3 x3 = T3();
        if constexpr (NIN > 0) x1 = tr1 ? s1[kl][tx * V + e] : r1[j].v[e];
        if constexpr (NIN > 1) x2 = tr2 ? s2[kl][tx * V + e] : r2[j].v[e];
        if constexpr (NIN > 2) x3 = tr3 ? s3[kl][tx * V + e] : r3[j].v[e];
        res.v[e] = apply(x1, x2, x3, prm);
      }
      *reinterpret_cast<Vec<T0, V>*>(p0 + o0 + qk * ak + q0 * (i64)sizeof(T0)) = res;
    }
  }
}
"#;
