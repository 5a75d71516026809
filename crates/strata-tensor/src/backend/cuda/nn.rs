//! CUDA kernels of [`NnKernel`] (issue 12): index gathers (a row-copy fast
//! path for `embedding`/`index_select` along dim 0 of a matrix, and a general
//! strided kernel), scatter-add with atomics, and the fused row kernels:
//! layer norm forward (`ln_rw*`/`ln_rb*`: the row held in registers, a warp
//! per row up to 1024 elements, a block up to 8192; `ln_fwd` beyond: one
//! block per row, two passes over a row cached in shared memory; f32 or f64
//! statistics), its input backward (one block per row) and its weight/bias
//! backward (a column reduction into per-part partials that the caller
//! sums), and cross-entropy's fused log-softmax + NLL (`ce_rw*`/`ce_rb*`:
//! the row read once into registers, max then one exp per element; `ce_fwd`
//! beyond 8192 classes: one block per row with an online max/sum; both write
//! only the row's logsumexp, as its max m and log Σ exp(x - m), and losses
//! formed from x - m; the backward recomputes softmax - one-hot on the fly
//! from the saved m and log-sum).
//!
//! Index values were checked by the tensor layer before launch (a typed
//! error on every device, from a cached value range where one is known), and
//! every kernel that reads an index also bounds it (`lim`), so no kernel
//! reads or writes out of bounds even if a cached range were wrong.

use super::context::{failure, CudaDevice};
use super::dimops::{grid, reg_row_plan, RegRow};
use super::kernels::dimops::{reg_header, REG_ROWS};
use super::kernels::{compute_ty, load, storage_ty, store, tag, MAXD, PRELUDE};
use super::launch::{
    base_ptr, grid_x, launch, looped_offsets, split_dims_among, KArg, KernelParam,
};
use crate::backend::{Arg, NnKernel, MASK_CHUNK};
use crate::dtype::DType;
use crate::error::Result;

/// Threads per block of every kernel here.
pub(super) const NT: u32 = 256;

/// Index-kernel metadata, laid out as `IMeta` in the source (strides in
/// elements, dims row-major).
#[repr(C)]
#[derive(Clone, Copy)]
pub(super) struct IMeta {
    nd: i32,
    dim: i32,
    pub(super) n: i64,
    size: [i64; MAXD],
    so: [i64; MAXD],
    ss: [i64; MAXD],
    si: [i64; MAXD],
}

// SAFETY: `#[repr(C)]` with two i32 then i64s (no padding), laid out as
// `IMeta` in the source; no pointers.
unsafe impl KernelParam for IMeta {}

pub(super) const IMETA: &str = r#"
struct IMeta { int nd; int dim; i64 n; i64 size[MAXD]; i64 so[MAXD]; i64 ss[MAXD]; i64 si[MAXD]; };
"#;

/// The storage type of an element of `size` bytes (copies move bits only).
pub(super) fn bits_ty(size: usize) -> &'static str {
    match size {
        1 => "u8",
        2 => "u16",
        4 => "u32",
        _ => "u64",
    }
}

fn gather_source(esize: usize, idx: DType) -> String {
    format!(
        "{PRELUDE}{IMETA}typedef {e} E;\ntypedef {i} I;\n{body}",
        e = bits_ty(esize),
        i = storage_ty(idx),
        body = r#"
// Every kernel here bounds the index values it reads by `lim` (src's size
// along the gathered dim): the tensor layer checked them, possibly from a
// cached value range, and an index outside [0, lim) reads zeros rather than
// memory outside src (defence in depth; no device-side assert).
extern "C" __global__ void gather(E* out, const E* src, const I* idx, IMeta m, i64 lim) {
  for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < m.n; i += (i64)gridDim.x * blockDim.x) {
    i64 r = i, oo = 0, os = 0, oi = 0;
    for (int d = m.nd - 1; d >= 0; --d) {
      const i64 c = r % m.size[d];
      r /= m.size[d];
      oo += c * m.so[d];
      oi += c * m.si[d];
      if (d != m.dim) os += c * m.ss[d];
    }
    const i64 k = (i64)idx[oi];
    out[oo] = (k >= 0 && k < lim) ? src[os + k * m.ss[m.dim]] : (E)0;
  }
}

// out[r, c] = src[idx[r * is], c] for a contiguous [rows, cols] out and a
// source whose rows are contiguous (row stride rs).
extern "C" __global__ void take_rows(E* out, const E* src, const I* idx, i64 rows, i64 cols, i64 rs, i64 is, i64 lim) {
  for (i64 r = blockIdx.x; r < rows; r += gridDim.x) {
    const i64 k = (i64)idx[r * is];
    const bool ok = k >= 0 && k < lim;
    const E* s = src + (ok ? k : 0) * rs;
    E* o = out + r * cols;
    for (i64 c = threadIdx.x; c < cols; c += blockDim.x) o[c] = ok ? s[c] : (E)0;
  }
}

// take_rows in 16-byte units (every row start aligned): `units` units per
// row, source row stride `rsu` units; `tpr` threads (a power of two) per
// row, blockDim.x / tpr rows per block, so short rows still fill the block.
typedef Vec<u32, 4> U;
extern "C" __global__ void take_rows_v(U* out, const U* src, const I* idx, i64 rows, i64 units, i64 rsu, i64 is, int tpr, i64 lim) {
  const int sub = threadIdx.x & (tpr - 1);
  const int rpb = blockDim.x / tpr;
  U z;
#pragma unroll
  for (int q = 0; q < 4; q++) z.v[q] = 0u;
  for (i64 r = (i64)blockIdx.x * rpb + threadIdx.x / tpr; r < rows; r += (i64)gridDim.x * rpb) {
    const i64 k = (i64)idx[r * is];
    const bool ok = k >= 0 && k < lim;
    const U* s = src + (ok ? k : 0) * rsu;
    U* o = out + r * units;
    for (i64 c = sub; c < units; c += tpr) o[c] = ok ? s[c] : z;
  }
}
"#
    )
}

/// The stream-compaction kernels of masked_select / masked_scatter for
/// elements of `esize` bytes: `mask_count` (a block per chunk of
/// [`MASK_CHUNK`] mask bytes writes its set count) and `mask_compact` (a
/// block per chunk walks it in steps of `NT` positions: a warp ballot gives
/// each set position its rank in the warp, the warps' totals in shared
/// memory its rank in the step, the chunk's exclusive offset its place).
fn mask_source(esize: usize) -> String {
    format!(
        "{PRELUDE}typedef {e} E;\n#define NT {NT}\n#define CHUNK {MASK_CHUNK}\n{body}",
        e = bits_ty(esize),
        body = r#"
extern "C" __global__ void __launch_bounds__(NT) mask_count(i64* counts, const u8* mask, i64 n) {
  __shared__ int sh[NT / 32];
  const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
  for (i64 b = blockIdx.x; b * CHUNK < n; b += gridDim.x) {
    const i64 s = b * CHUNK, e = s + CHUNK < n ? s + CHUNK : n;
    int c = 0;
    for (i64 i = s + threadIdx.x; i < e; i += NT) c += mask[i] != 0;
    for (int o = 16; o > 0; o >>= 1) c += __shfl_xor_sync(0xffffffffu, c, o);
    if (lane == 0) sh[wid] = c;
    __syncthreads();
    if (threadIdx.x == 0) {
      i64 t = 0;
      for (int q = 0; q < NT / 32; q++) t += sh[q];
      counts[b] = t;
    }
    __syncthreads();
  }
}

// offs: inclusive sums of the chunks' counts. expand == 0: out[k] = src[i];
// otherwise out[i] = src[k] (i the k-th set position).
extern "C" __global__ void __launch_bounds__(NT) mask_compact(E* out, const E* src, const u8* mask, const i64* offs,
                                                             i64 n, int expand) {
  __shared__ int wsum[NT / 32];
  const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
  const unsigned below = (1u << lane) - 1u;
  for (i64 b = blockIdx.x; b * CHUNK < n; b += gridDim.x) {
    const i64 s = b * CHUNK, e = s + CHUNK < n ? s + CHUNK : n;
    i64 base = b == 0 ? 0 : offs[b - 1];
    for (i64 t0 = s; t0 < e; t0 += NT) {
      const i64 i = t0 + threadIdx.x;
      const bool f = i < e && mask[i] != 0;
      const unsigned bal = __ballot_sync(0xffffffffu, f);
      if (lane == 0) wsum[wid] = __popc(bal);
      __syncthreads();
      int before = 0, total = 0;
#pragma unroll
      for (int q = 0; q < NT / 32; q++) {
        const int v = wsum[q];
        before += q < wid ? v : 0;
        total += v;
      }
      __syncthreads();  // wsum is rewritten by the next step
      if (f) {
        const i64 k = base + before + __popc(bal & below);
        if (expand) out[i] = src[k]; else out[k] = src[i];
      }
      base += total;
    }
  }
}
"#
    )
}

fn scatter_source(d: DType, idx: DType) -> String {
    format!(
        "{PRELUDE}{IMETA}typedef {e} E;\ntypedef {i} I;\n{body}",
        e = storage_ty(d),
        i = storage_ty(idx),
        body = r#"
__device__ __forceinline__ void aadd(float* p, float v) { atomicAdd(p, v); }
__device__ __forceinline__ void aadd(double* p, double v) { atomicAdd(p, v); }
__device__ __forceinline__ void aadd(int* p, int v) { atomicAdd(p, v); }
__device__ __forceinline__ void aadd(i64* p, i64 v) { atomicAdd((u64*)p, (u64)v); }

// An index outside [0, lim) (out's size along dim) adds nothing: the tensor
// layer excluded it; this is defence in depth.
extern "C" __global__ void scatter_add(E* out, const E* src, const I* idx, IMeta m, i64 lim) {
  for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < m.n; i += (i64)gridDim.x * blockDim.x) {
    i64 r = i, oo = 0, os = 0, oi = 0;
    for (int d = m.nd - 1; d >= 0; --d) {
      const i64 c = r % m.size[d];
      r /= m.size[d];
      if (d != m.dim) oo += c * m.so[d];
      oi += c * m.si[d];
      os += c * m.ss[d];
    }
    const i64 k = (i64)idx[oi];
    if (k >= 0 && k < lim) aadd(out + oo + k * m.so[m.dim], src[os]);
  }
}
"#
    )
}

/// Helpers of the row kernels: the stored type `T`, the statistics type `C`,
/// the weight type `W`, conversions, math overloads and block sums.
fn rows_prelude(d: DType, w: DType) -> String {
    let c = compute_ty(d);
    format!(
        "{PRELUDE}typedef {t} T;\ntypedef {c} C;\ntypedef {wt} W;\n\
         #define NT {NT}\n\
         __device__ __forceinline__ C ld(T x) {{ return (C){ld}; }}\n\
         __device__ __forceinline__ T st(C v) {{ return {st}; }}\n\
         __device__ __forceinline__ C ldw(W x) {{ return (C){ldw}; }}\n{body}",
        t = storage_ty(d),
        wt = storage_ty(w),
        ld = load(d, "x"),
        st = store(d, "v"),
        ldw = load(w, "x"),
        body = r#"
__device__ __forceinline__ float ex(float x) { return expf(x); }
__device__ __forceinline__ double ex(double x) { return exp(x); }
__device__ __forceinline__ float lg(float x) { return logf(x); }
__device__ __forceinline__ double lg(double x) { return log(x); }
__device__ __forceinline__ float sq(float x) { return sqrtf(x); }
__device__ __forceinline__ double sq(double x) { return sqrt(x); }
#define C_INF ((C)__longlong_as_double(0x7ff0000000000000LL))
#define C_NAN ((C)__longlong_as_double(0x7ff8000000000000LL))

// The sum of v over the block (blockDim.x == NT, a multiple of 32); every
// thread gets it. sh holds 32 values.
__device__ __forceinline__ C block_sum(C v, C* sh) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
  __syncthreads();
  if (lane == 0) sh[wid] = v;
  __syncthreads();
  if (wid == 0) {
    C r = lane < (NT >> 5) ? sh[lane] : (C)0;
    for (int o = 16; o > 0; o >>= 1) r += __shfl_xor_sync(0xffffffffu, r, o);
    if (lane == 0) sh[0] = r;
  }
  __syncthreads();
  return sh[0];
}
"#
    )
}

/// Row elements cached in shared memory by the layer-norm forward (16 KiB).
const LN_CACHE_BYTES: usize = 16384;

fn ln_source(d: DType, w: DType) -> String {
    let cache = LN_CACHE_BYTES / compute_ty_size(d);
    format!(
        "{}#define CACHE {cache}\n{}",
        rows_prelude(d, w),
        r#"
extern "C" __global__ void ln_fwd(T* out, C* mean, C* rstd, const T* x, const W* w, const W* b,
                                  i64 rows, i64 cols, double eps) {
  __shared__ C sh[32];
  __shared__ C cache[CACHE];
  const bool cached = cols <= CACHE;
  for (i64 r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * cols;
    C s = 0;
    for (i64 j = threadIdx.x; j < cols; j += NT) {
      const C v = ld(xr[j]);
      if (cached) cache[j] = v;
      s += v;
    }
    const C m = block_sum(s, sh) / (C)cols;
    C q = 0;
    for (i64 j = threadIdx.x; j < cols; j += NT) {
      const C dv = (cached ? cache[j] : ld(xr[j])) - m;
      q += dv * dv;
    }
    const C var = block_sum(q, sh) / (C)cols;
    const C rs = (C)1 / sq(var + (C)eps);
    if (threadIdx.x == 0) { mean[r] = m; rstd[r] = rs; }
    T* orow = out + r * cols;
    for (i64 j = threadIdx.x; j < cols; j += NT) {
      C y = ((cached ? cache[j] : ld(xr[j])) - m) * rs;
      if (w != nullptr) y *= ldw(w[j]);
      // `* gamma + beta` with beta 0 when absent, as PyTorch's CPU kernel
      // and its general CUDA one: a zero product becomes +0.0.
      y += b != nullptr ? ldw(b[j]) : (C)0;
      orow[j] = st(y);
    }
  }
}

extern "C" __global__ void ln_bwd(T* dx, const T* dy, const T* x, const C* mean, const C* rstd,
                                  const W* w, i64 rows, i64 cols) {
  __shared__ C sh[32];
  for (i64 r = blockIdx.x; r < rows; r += gridDim.x) {
    const C m = mean[r], rs = rstd[r];
    const T* xr = x + r * cols;
    const T* gr = dy + r * cols;
    C a = 0, b = 0;
    for (i64 j = threadIdx.x; j < cols; j += NT) {
      C g = ld(gr[j]);
      if (w != nullptr) g *= ldw(w[j]);
      const C xh = (ld(xr[j]) - m) * rs;
      a += g;
      b += g * xh;
    }
    a = block_sum(a, sh) / (C)cols;
    b = block_sum(b, sh) / (C)cols;
    T* dr = dx + r * cols;
    for (i64 j = threadIdx.x; j < cols; j += NT) {
      C g = ld(gr[j]);
      if (w != nullptr) g *= ldw(w[j]);
      const C xh = (ld(xr[j]) - m) * rs;
      dr[j] = st(rs * (g - a - xh * b));
    }
  }
}

// Part blockIdx.y of the rows, columns over blockIdx.x * NT + threadIdx.x.
extern "C" __global__ void ln_params(C* dw, C* db, const T* dy, const T* x, const C* mean,
                                     const C* rstd, i64 rows, i64 cols, i64 parts) {
  const i64 j = blockIdx.x * (i64)NT + threadIdx.x;
  if (j >= cols) return;
  const i64 per = (rows + parts - 1) / parts;
  const i64 p = blockIdx.y;
  const i64 r1 = (p + 1) * per < rows ? (p + 1) * per : rows;
  C sw = 0, sb = 0;
  for (i64 r = p * per; r < r1; ++r) {
    const C g = ld(dy[r * cols + j]);
    sw += g * (ld(x[r * cols + j]) - mean[r]) * rstd[r];
    sb += g;
  }
  if (dw != nullptr) dw[p * cols + j] = sw;
  if (db != nullptr) db[p * cols + j] = sb;
}
"#
    )
}

fn compute_ty_size(d: DType) -> usize {
    if d == DType::F64 {
        8
    } else {
        4
    }
}

fn ce_source(d: DType) -> String {
    format!(
        "{}{}",
        rows_prelude(d, d),
        r#"
// Merges the running (max, sum of exp(x - max)) pair (m2, s2) into (m, s).
__device__ __forceinline__ void comb(C& m, C& s, C m2, C s2) {
  if (m2 == -C_INF) return;
  if (m == -C_INF) { m = m2; s = s2; return; }
  if (m2 > m) { s = s * ex(m - m2) + s2; m = m2; } else { s += s2 * ex(m2 - m); }
}

extern "C" __global__ void ce_fwd(C* lse, C* nll, C* smooth, C* wt, const T* x, const i64* tgt,
                                  const T* w, i64 rows, i64 classes, i64 ignore) {
  __shared__ C shm[32];
  __shared__ C shs[32];
  __shared__ C sh[32];
  const bool want_s = smooth != nullptr && tgt != nullptr;
  for (i64 r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * classes;
    C m = -C_INF, s = 0, sx = 0, bad = 0;
    for (i64 c = threadIdx.x; c < classes; c += NT) {
      const C v = ld(xr[c]);
      if (v != v) bad = 1;
      else if (v > m) { s = (m == -C_INF ? (C)0 : s * ex(m - v)) + 1; m = v; }
      else if (v != -C_INF) s += ex(v - m);
    }
    for (int o = 16; o > 0; o >>= 1) {
      const C m2 = __shfl_xor_sync(0xffffffffu, m, o);
      const C s2 = __shfl_xor_sync(0xffffffffu, s, o);
      comb(m, s, m2, s2);
    }
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
    __syncthreads();
    if (lane == 0) { shm[wid] = m; shs[wid] = s; }
    __syncthreads();
    if (wid == 0) {
      m = lane < (NT >> 5) ? shm[lane] : -C_INF;
      s = lane < (NT >> 5) ? shs[lane] : (C)0;
      for (int o = 16; o > 0; o >>= 1) {
        const C m2 = __shfl_xor_sync(0xffffffffu, m, o);
        const C s2 = __shfl_xor_sync(0xffffffffu, s, o);
        comb(m, s, m2, s2);
      }
      if (lane == 0) { shm[0] = m; shs[0] = s; }
    }
    bad = block_sum(bad, sh);  // its __syncthreads also publish shm[0]
    if (want_s) {
      // -Σ log p[c] w[c] = -Σ ((x[c] - m) - ls) w[c] (PyTorch's
      // `-(input * weight).sum(class_dim)`), term by term as the CPU sums
      // it (ls Σ w - Σ w (x - m) would make inf * 0 = NaN of a weight of
      // ±inf where x[c] is the max, and cancel where |m| is huge): a
      // second read of the row, with m and ls as thread 0 sets them below.
      C mr = shm[0], lr;
      if (bad != (C)0 || mr == C_INF) { mr = C_NAN; lr = C_NAN; }
      else if (mr == -C_INF) lr = (C)0;
      else lr = lg(shs[0]);
      for (i64 c = threadIdx.x; c < classes; c += NT)
        sx += ((ld(xr[c]) - mr) - lr) * (w != nullptr ? ld(w[c]) : (C)1);
      sx = block_sum(sx, sh);
    }
    if (threadIdx.x == 0) {
      m = shm[0];
      s = shs[0];
      // The logsumexp as m + ls, kept apart: -log p = ls - (x - m), which
      // m + ls would lose where |m| is huge (the CPU's max_and_log_sum).
      C ls;
      if (bad != (C)0 || m == C_INF) { m = C_NAN; ls = C_NAN; }
      else if (m == -C_INF) ls = (C)0;
      else ls = lg(s);
      lse[2 * r] = m;
      lse[2 * r + 1] = ls;
      if (tgt != nullptr) {
        const i64 t = tgt[r];
        C n = 0, sm = 0, wv = 0;
        if (t != ignore) {
          // A target outside [0, classes) (excluded by the tensor layer)
          // reads nothing: a NaN loss, as defence in depth.
          const bool ok = t >= 0 && t < classes;
          wv = ok && w != nullptr ? ld(w[t]) : (C)1;
          n = ok ? -((ld(xr[t]) - m) - ls) * wv : C_NAN;
          if (want_s) sm = -sx;
        }
        if (nll != nullptr) nll[r] = n;
        if (smooth != nullptr) smooth[r] = sm;
        if (wt != nullptr) wt[r] = wv;
      }
    }
    __syncthreads();
  }
}

extern "C" __global__ void ce_bwd(T* dx, const T* x, const C* lse, const i64* tgt, const T* w,
                                  const C* coef, i64 rows, i64 classes, i64 ignore, double eps,
                                  double wsum, int last) {
  for (i64 r = blockIdx.x; r < rows; r += gridDim.x) {
    const i64 t = tgt[r];
    const bool kept = t != ignore;
    T* dr = dx + r * classes;
    const T* xr = x + r * classes;
    const C m = lse[2 * r], ls = lse[2 * r + 1], g = coef[r];
    const bool ok = t >= 0 && t < classes;  // checked before; defence in depth
    // PyTorch's chain, as the CPU kernel: gl, the gradient of the log
    // probabilities, is nll_loss's -w[t] g (1 - eps) at the target (0
    // elsewhere and in an ignored row) plus, with smoothing, (-g eps / C)
    // w[c] (0 where ignored); then log_softmax's gl - exp(log p) sum(gl),
    // NaN in every class of a row whose log-probabilities are NaN, ignored
    // or not. sum(gl) = gn + (-gs) sum(w), from +0.0 as PyTorch's sum,
    // except one class along the last dim: PyTorch's sum is gl[0] itself.
    const C gn = kept ? (ok && w != nullptr ? ld(w[t]) : (C)1) * -((C)(1.0 - eps) * g) : (C)0;
    const C gs = kept ? g * (C)(eps / (double)classes) : (C)0;
    C s = (C)0;
    if (kept) s += gn;
    if (eps != 0.0) s += -gs * (C)wsum;
    if (last != 0 && classes == 1) {
      s = kept ? gn : (C)0;
      if (eps != 0.0) s += -gs * (w != nullptr ? ld(w[0]) : (C)1);
    }
    for (i64 c = threadIdx.x; c < classes; c += NT) {
      C gl = kept && c == t ? gn : (C)0;
      if (eps != 0.0) gl += -gs * (w != nullptr ? ld(w[c]) : (C)1);
      const C p = ex((ld(xr[c]) - m) - ls);
      dr[c] = st(gl - p * s);
    }
  }
}
"#
    )
}

/// Sums and maxima over the threads holding one row: a warp (`BLK` false)
/// or the whole block of `SB` threads (`BLK` true, through `red`, which
/// holds `SB / 32` values; every thread of the block must call them).
const GROUP_REDUCE: &str = r#"
template <bool BLK> __device__ __forceinline__ C grp_sum(C v, C* red) {
  v = warp_sum(v);
  if constexpr (BLK) {
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    if (lane == 0) red[w] = v;
    __syncthreads();
    v = red[0];
#pragma unroll
    for (int q = 1; q < SB / 32; q++) v += red[q];
    __syncthreads();  // red is rewritten by the next reduction
  }
  return v;
}
template <bool BLK> __device__ __forceinline__ C grp_max(C v, C* red) {
  v = warp_max(v);
  if constexpr (BLK) {
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    if (lane == 0) red[w] = v;
    __syncthreads();
    v = red[0];
#pragma unroll
    for (int q = 1; q < SB / 32; q++) v = nmax(v, red[q]);
    __syncthreads();
  }
  return v;
}
"#;

/// The register-cached cross-entropy forward (`ce_rw{1..32}`: a warp per
/// row of up to 1024 classes; `ce_rb{8,16,32}`: a block per row of up to
/// 8192): the row is read from memory once, with 16-byte loads when rows
/// start aligned, into registers; then the max (shuffles, NaN-propagating),
/// the sum of `exp(x - max)` (one exp per element), and for label smoothing
/// `Σ w[c] x[c]` and `Σ w[c]`, all in the statistics type (f32 for
/// f16/bf16). The outputs are those of `ce_fwd` (see
/// [`NnKernel::CrossEntropy`]).
fn ce_reg_source(d: DType) -> String {
    format!(
        "{}{REG_ROWS}{GROUP_REDUCE}{}",
        reg_header(d),
        r#"
template <int ITEMS, bool BLK, bool SMOOTH>
__device__ __forceinline__ void ce_row(C* lse, C* nll, C* smooth, C* wt, const T* x, const i64* tgt,
                                       const T* w, i64 rows, i64 n, i64 ignore, int vec) {
  __shared__ C red[SB / 32];
  const int lanes = BLK ? SB : 32;
  const int lane = BLK ? (int)threadIdx.x : (int)(threadIdx.x & 31);
  const i64 per = BLK ? 1 : SB / 32;
  // Label smoothing's sums are compiled only into the `ces_*` kernels: kept
  // out of the plain ones, they cost no registers there (with them, the
  // 32-item block kernel needed 170 registers and ran one block per SM).
  const bool want_s = SMOOTH && smooth != nullptr && tgt != nullptr;
  for (i64 r0 = (i64)blockIdx.x * per; r0 < rows; r0 += (i64)gridDim.x * per) {
    const i64 r = BLK ? r0 : r0 + (threadIdx.x >> 5);
    if (!BLK && r >= rows) continue;  // uniform across the warp
    const T* xr = x + r * n;
    C v[ITEMS];
    reg_load<ITEMS>(xr, n, lane, lanes, vec != 0, v);
    const C m = grp_max<BLK>(local_max<ITEMS>(v), red);
    // Slots past the row are -inf: exp(-inf - m) = 0 for a finite m (a row
    // whose max is not finite gets NaN or -inf below, whatever s is).
    C s = (C)0;
#pragma unroll
    for (int i = 0; i < ITEMS; i++) s += cexp(v[i] - m);
    s = grp_sum<BLK>(s, red);
    // The logsumexp as mm + ls, kept apart (see ce_fwd); every lane has it.
    C mm = m, ls;
    if (m != m || m == -ninf()) { mm = -ninf() - -ninf(); ls = mm; }  // NaN or +inf in the row: NaN
    else if (m == ninf()) ls = (C)0;
    else ls = clog(s);
    // Label smoothing's -Σ (x[c] - m - ls) w[c], term by term (see ce_fwd).
    C sx = (C)0;
    if constexpr (SMOOTH) if (want_s) {
#pragma unroll
      for (int i = 0; i < ITEMS; i++) {
        const i64 c = reg_col<ITEMS>(i, lane, lanes, vec != 0);
        if (c < n) {
          const C wc = w != nullptr ? ld(w[c]) : (C)1;
          sx += ((v[i] - mm) - ls) * wc;
        }
      }
      sx = grp_sum<BLK>(sx, red);
    }
    if (lane == 0) {
      lse[2 * r] = mm;
      lse[2 * r + 1] = ls;
      if (tgt != nullptr) {
        const i64 t = tgt[r];
        C nl = (C)0, sm = (C)0, wv = (C)0;
        // A target outside [0, n) was excluded by the tensor layer; it
        // reads nothing here (NaN loss) as defence in depth.
        if (t != ignore) {
          const bool ok = t >= 0 && t < n;
          wv = !ok ? (C)1 : (w != nullptr ? ld(w[t]) : (C)1);
          // PyTorch's -log p[t] * w[t], negated as it negates (a log
          // probability of +0.0 gives -0.0).
          nl = ok ? -((ld(xr[t]) - mm) - ls) * wv : -ninf() - -ninf();
          if (want_s) sm = -sx;
        }
        if (nll != nullptr) nll[r] = nl;
        if (smooth != nullptr) smooth[r] = sm;
        if (wt != nullptr) wt[r] = wv;
      }
    }
  }
}

#define CE_ARGS C* lse, C* nll, C* smooth, C* wt, const T* x, const i64* tgt, const T* w, i64 rows, i64 n, i64 ignore, int vec
#define CE_PASS lse, nll, smooth, wt, x, tgt, w, rows, n, ignore, vec
#define CE_RW(I) extern "C" __global__ void __launch_bounds__(SB) ce_rw##I(CE_ARGS) { ce_row<I, false, false>(CE_PASS); } \
  extern "C" __global__ void __launch_bounds__(SB) ces_rw##I(CE_ARGS) { ce_row<I, false, true>(CE_PASS); }
#define CE_RB(I) extern "C" __global__ void __launch_bounds__(SB) ce_rb##I(CE_ARGS) { ce_row<I, true, false>(CE_PASS); } \
  extern "C" __global__ void __launch_bounds__(SB) ces_rb##I(CE_ARGS) { ce_row<I, true, true>(CE_PASS); }
CE_RW(1) CE_RW(2) CE_RW(4) CE_RW(8) CE_RW(16) CE_RW(32)
CE_RB(8) CE_RB(16) CE_RB(32)
"#
    )
}

/// The kernels of [`ce_reg_source`]: the warp kernels for 1, 2, ..., 32
/// values per lane, then the block kernels for 8, 16, 32; then the same
/// nine with label smoothing's sums (`ces_*`, at index + [`CE_SMOOTH`]).
const CE_REG_NAMES: [&str; 18] = [
    "ce_rw1", "ce_rw2", "ce_rw4", "ce_rw8", "ce_rw16", "ce_rw32", "ce_rb8", "ce_rb16", "ce_rb32",
    "ces_rw1", "ces_rw2", "ces_rw4", "ces_rw8", "ces_rw16", "ces_rw32", "ces_rb8", "ces_rb16",
    "ces_rb32",
];

/// Offset of the label-smoothing kernels in [`CE_REG_NAMES`].
const CE_SMOOTH: usize = 9;

/// The register-cached layer-norm forward (`ln_rw{1..32}`: a warp per row
/// of up to 1024 elements, eight rows per block; `ln_rb{8,16,32}`: a block
/// per row of up to 8192): the row is read once, with 16-byte loads and
/// stores when rows start aligned, into registers; mean and variance are
/// two passes over the registers (exact two-pass statistics, in f32 for
/// f16/bf16), then the outputs are written from them. Weight and bias are
/// `W` (x's dtype or f32). Writes what [`NnKernel::LayerNorm`] says.
fn ln_reg_source(d: DType, w: DType) -> String {
    format!(
        "{}typedef {wt} W;\n__device__ __forceinline__ C ldw(W x) {{ return (C){ldw}; }}\n\
         __device__ __forceinline__ float csqrt(float x) {{ return sqrtf(x); }}\n\
         __device__ __forceinline__ double csqrt(double x) {{ return sqrt(x); }}\n\
         {REG_ROWS}{GROUP_REDUCE}{}",
        reg_header(d),
        r#"
template <int ITEMS, bool BLK>
__device__ __forceinline__ void ln_row(T* out, C* mean, C* rstd, const T* x, const W* w, const W* b,
                                       i64 rows, i64 n, double eps, int vec) {
  __shared__ C red[SB / 32];
  const int lanes = BLK ? SB : 32;
  const int lane = BLK ? (int)threadIdx.x : (int)(threadIdx.x & 31);
  const i64 per = BLK ? 1 : SB / 32;
  const bool vc = vec != 0;
  for (i64 r0 = (i64)blockIdx.x * per; r0 < rows; r0 += (i64)gridDim.x * per) {
    const i64 r = BLK ? r0 : r0 + (threadIdx.x >> 5);
    if (!BLK && r >= rows) continue;  // uniform across the warp
    C v[ITEMS];
    reg_load<ITEMS>(x + r * n, n, lane, lanes, vc, v);
    C s = (C)0;
#pragma unroll
    for (int i = 0; i < ITEMS; i++) s += reg_col<ITEMS>(i, lane, lanes, vc) < n ? v[i] : (C)0;
    const C m = grp_sum<BLK>(s, red) / (C)n;
    C q = (C)0;
#pragma unroll
    for (int i = 0; i < ITEMS; i++) {
      const C dv = v[i] - m;
      q += reg_col<ITEMS>(i, lane, lanes, vc) < n ? dv * dv : (C)0;
    }
    const C var = grp_sum<BLK>(q, red) / (C)n;
    const C rs = (C)1 / csqrt(var + (C)eps);
    if (lane == 0) { mean[r] = m; rstd[r] = rs; }
#pragma unroll
    for (int i = 0; i < ITEMS; i++) {
      const i64 c = reg_col<ITEMS>(i, lane, lanes, vc);
      C y = (v[i] - m) * rs;
      if (c < n) {
        if (w != nullptr) y *= ldw(w[c]);
        y += b != nullptr ? ldw(b[c]) : (C)0;  // +0.0 for no bias, as ln_fwd
      }
      v[i] = y;
    }
    reg_store<ITEMS>(out + r * n, n, lane, lanes, vc, v);
  }
}

#define LN_ARGS T* out, C* mean, C* rstd, const T* x, const W* w, const W* b, i64 rows, i64 n, double eps, int vec
#define LN_PASS out, mean, rstd, x, w, b, rows, n, eps, vec
#define LN_RW(I) extern "C" __global__ void __launch_bounds__(SB) ln_rw##I(LN_ARGS) { ln_row<I, false>(LN_PASS); }
#define LN_RB(I) extern "C" __global__ void __launch_bounds__(SB) ln_rb##I(LN_ARGS) { ln_row<I, true>(LN_PASS); }
LN_RW(1) LN_RW(2) LN_RW(4) LN_RW(8) LN_RW(16) LN_RW(32)
LN_RB(8) LN_RB(16) LN_RB(32)
"#,
        wt = storage_ty(w),
        ldw = load(w, "x"),
    )
}

/// The kernels of [`ln_reg_source`], in [`reg_index`]'s order.
const LN_REG_NAMES: [&str; 9] = [
    "ln_rw1", "ln_rw2", "ln_rw4", "ln_rw8", "ln_rw16", "ln_rw32", "ln_rb8", "ln_rb16", "ln_rb32",
];

/// The index in `CE_REG_NAMES`/`LN_REG_NAMES` of a register-cached kernel.
fn reg_index(plan: RegRow) -> usize {
    match plan {
        RegRow::Warp(items) => items.trailing_zeros() as usize,
        RegRow::Block(items) => 6 + (items / 8).trailing_zeros() as usize,
    }
}

/// The device address of an optional operand (0 for none).
fn opt_ptr(a: Option<&Arg>) -> u64 {
    a.map_or(0, base_ptr)
}

/// Blocks for a grid-stride loop over `n` items, `per` items per block.
pub(super) fn grid_for(n: usize, per: usize) -> u32 {
    (n.div_ceil(per.max(1))).clamp(1, 1 << 20) as u32
}

/// The dims an index kernel (`gather`, `scatter_add`) walks and those the
/// host loops over, for a loop of `shape` gathering or scattering along
/// `dim`: every dim larger than 1 and `dim` itself (its stride scales the
/// index values) are walked, up to `MAXD`; beyond that the smallest dims
/// other than `dim` are looped over on the host, one launch per position.
/// Returns `(walked, looped)`, each in increasing order.
pub(super) fn index_dims(shape: &[usize], dim: usize) -> (Vec<usize>, Vec<usize>) {
    let live: Vec<usize> = (0..shape.len())
        .filter(|&d| d == dim || shape[d] != 1)
        .collect();
    split_dims_among(shape, live, dim, MAXD)
}

/// The metadata of an index kernel over the `walked` dims of `shape`
/// (see [`index_dims`]; `dim` is one of them).
pub(super) fn index_meta(
    shape: &[usize],
    dim: usize,
    walked: &[usize],
    so: &[usize],
    ss: &[usize],
    si: &[usize],
) -> IMeta {
    let mut m = IMeta {
        nd: walked.len() as i32,
        dim: walked.iter().position(|&d| d == dim).unwrap_or(0) as i32,
        n: walked.iter().map(|&d| shape[d]).product::<usize>() as i64,
        size: [1; MAXD],
        so: [0; MAXD],
        ss: [0; MAXD],
        si: [0; MAXD],
    };
    for (j, &d) in walked.iter().enumerate() {
        m.size[j] = shape[d] as i64;
        m.so[j] = so[d] as i64;
        m.ss[j] = ss[d] as i64;
        m.si[j] = si[d] as i64;
    }
    m
}

/// Calls `f` with the byte offsets of out, src and index at every position
/// of the `looped` dims of `shape` (one call, at 0, when there are none):
/// element strides `so`, `ss`, `si`, element sizes `es` (out, src, index).
pub(super) fn for_each_position(
    shape: &[usize],
    looped: &[usize],
    (so, ss, si): (&[usize], &[usize], &[usize]),
    es: [u64; 3],
    mut f: impl FnMut([u64; 3]) -> Result<()>,
) -> Result<()> {
    // Byte strides `[dim][operand]`, as the element-wise launcher's.
    let strides: Vec<Vec<isize>> = (0..shape.len())
        .map(|d| {
            vec![
                (so[d] as u64 * es[0]) as isize,
                (ss[d] as u64 * es[1]) as isize,
                (si[d] as u64 * es[2]) as isize,
            ]
        })
        .collect();
    for off in looped_offsets(shape, &strides, looped, 3) {
        f([off[0] as u64, off[1] as u64, off[2] as u64])?;
    }
    Ok(())
}

/// Runs `k` on `dev`'s current stream.
pub(crate) fn run(dev: &CudaDevice, k: NnKernel) -> Result<()> {
    let stream = dev.stream();
    match k {
        NnKernel::MapCopy {
            out,
            src,
            maps,
            fill,
        } => super::shape_ops::map_copy(dev, out, src, maps, fill),
        NnKernel::Gather {
            out,
            src,
            index,
            dim,
            bound,
        } => {
            let lim = bound as i64;
            let n = out.layout.numel();
            if n == 0 {
                return Ok(());
            }
            let key = format!("nn:gather:{}:{}", out.dtype.size(), tag(index.dtype));
            let f = super::nvrtc::functions(
                dev,
                &key,
                || gather_source(out.dtype.size(), index.dtype),
                &["gather", "take_rows", "take_rows_v"],
            )?;
            let (po, ps, pi) = (base_ptr(out), base_ptr(src), base_ptr(index));
            let (ol, sl, il) = (&out.layout, &src.layout, &index.layout);
            if ol.ndim() == 2
                && dim == 0
                && ol.is_contiguous()
                && sl.strides[1] == 1
                && il.strides[1] == 0
            {
                let (rows, cols) = (ol.shape[0] as i64, ol.shape[1] as i64);
                let (rs, is) = (sl.strides[0] as i64, il.strides[0] as i64);
                let es = out.dtype.size() as u64;
                let row_bytes = ol.shape[1] as u64 * es;
                if row_bytes.is_multiple_of(16)
                    && (sl.strides[0] as u64 * es).is_multiple_of(16)
                    && po.is_multiple_of(16)
                    && ps.is_multiple_of(16)
                {
                    let units = (row_bytes / 16) as i64;
                    let rsu = (sl.strides[0] as u64 * es / 16) as i64;
                    let tpr = (units.clamp(1, NT as i64) as u32).next_power_of_two();
                    let rpb = (NT / tpr) as usize;
                    let tpr = tpr as i32;
                    // SAFETY: parameters match `take_rows_v` (out, src, idx,
                    // rows, units, row stride in units, index stride, threads
                    // per row, lim); out, src and every src row start are 16-byte
                    // aligned and rows are whole units; indices were checked
                    // to lie in [0, src rows).
                    return unsafe {
                        launch(
                            dev,
                            "take_rows_v",
                            f[2],
                            (grid_for(rows as usize, rpb), 1, 1),
                            (NT, 1, 1),
                            stream,
                            [
                                KArg::of(&po),
                                KArg::of(&ps),
                                KArg::of(&pi),
                                KArg::of(&rows),
                                KArg::of(&units),
                                KArg::of(&rsu),
                                KArg::of(&is),
                                KArg::of(&tpr),
                                KArg::of(&lim),
                            ],
                        )
                    };
                }
                // SAFETY: parameters match `take_rows` (out, src, idx, rows,
                // cols, row stride, index stride, lim); every index was checked
                // to lie in [0, src rows) and the kernel reads only rows in
                // [0, lim), so reads stay in src's storage; writes
                // cover the contiguous out.
                return unsafe {
                    launch(
                        dev,
                        "take_rows",
                        f[1],
                        (grid_for(rows as usize, 1), 1, 1),
                        (NT, 1, 1),
                        stream,
                        [
                            KArg::of(&po),
                            KArg::of(&ps),
                            KArg::of(&pi),
                            KArg::of(&rows),
                            KArg::of(&cols),
                            KArg::of(&rs),
                            KArg::of(&is),
                            KArg::of(&lim),
                        ],
                    )
                };
            }
            let (walked, looped) = index_dims(&ol.shape, dim);
            let m = index_meta(
                &ol.shape,
                dim,
                &walked,
                &ol.strides,
                &sl.strides,
                &il.strides,
            );
            let es = [
                out.dtype.size() as u64,
                src.dtype.size() as u64,
                index.dtype.size() as u64,
            ];
            let strides = (&ol.strides[..], &sl.strides[..], &il.strides[..]);
            for_each_position(&ol.shape, &looped, strides, es, |off| {
                let (qo, qs, qi) = (po + off[0], ps + off[1], pi + off[2]);
                // SAFETY: parameters match `gather` (out, src, idx, IMeta, lim);
                // the metadata describes the operands' own layouts over the
                // walked dims from their elements at this position of the
                // looped ones (src covers index's shape but along `dim`, as
                // gather requires), and the kernel reads src only at index
                // values in [0, lim).
                unsafe {
                    launch(
                        dev,
                        "gather",
                        f[0],
                        (grid_for(m.n as usize, NT as usize), 1, 1),
                        (NT, 1, 1),
                        stream,
                        [
                            KArg::of(&qo),
                            KArg::of(&qs),
                            KArg::of(&qi),
                            KArg::of(&m),
                            KArg::of(&lim),
                        ],
                    )
                }
            })
        }
        NnKernel::ScatterAdd {
            out,
            index,
            src,
            dim,
            bound,
        } => {
            let lim = bound as i64;
            let n = index.layout.numel();
            if n == 0 {
                return Ok(());
            }
            if !matches!(out.dtype, DType::F32 | DType::F64 | DType::I32 | DType::I64) {
                return Err(failure(
                    dev.device(),
                    "scatter_add",
                    format!("internal: {} output (the caller widens it)", out.dtype),
                ));
            }
            let key = format!("nn:scatter:{}:{}", tag(out.dtype), tag(index.dtype));
            let f = super::nvrtc::functions(
                dev,
                &key,
                || scatter_source(out.dtype, index.dtype),
                &["scatter_add"],
            )?;
            let shape = &index.layout.shape;
            let (walked, looped) = index_dims(shape, dim);
            let (so, ss, si) = (
                &out.layout.strides[..],
                &src.layout.strides[..],
                &index.layout.strides[..],
            );
            let m = index_meta(shape, dim, &walked, so, ss, si);
            let (po, ps, pi) = (base_ptr(out), base_ptr(src), base_ptr(index));
            let es = [
                out.dtype.size() as u64,
                src.dtype.size() as u64,
                index.dtype.size() as u64,
            ];
            for_each_position(shape, &looped, (so, ss, si), es, |off| {
                let (qo, qs, qi) = (po + off[0], ps + off[1], pi + off[2]);
                // SAFETY: parameters match `scatter_add`; positions range over
                // index's shape (the walked dims from this position of the
                // looped ones), which src covers and out covers except along
                // `dim`, where the index values in [0, lim) address out.
                unsafe {
                    launch(
                        dev,
                        "scatter_add",
                        f[0],
                        (grid_for(m.n as usize, NT as usize), 1, 1),
                        (NT, 1, 1),
                        stream,
                        [
                            KArg::of(&qo),
                            KArg::of(&qs),
                            KArg::of(&qi),
                            KArg::of(&m),
                            KArg::of(&lim),
                        ],
                    )
                }
            })
        }
        NnKernel::LayerNorm {
            out,
            mean,
            rstd,
            x,
            weight,
            bias,
            rows,
            cols,
            eps,
        } => {
            if rows == 0 {
                return Ok(());
            }
            let wd = weight.or(bias).map_or(x.dtype, |w| w.dtype);
            let d = x.dtype;
            let (po, pm, pr, px) = (base_ptr(out), base_ptr(mean), base_ptr(rstd), base_ptr(x));
            let (pw, pb) = (opt_ptr(weight), opt_ptr(bias));
            let (r, c) = (rows as i64, cols as i64);
            // 16-byte loads and stores when every row of x and out starts
            // aligned.
            let vec = px.is_multiple_of(16)
                && po.is_multiple_of(16)
                && (cols * d.size()).is_multiple_of(16);
            if let Some(plan) = reg_row_plan(cols, 16 / d.size(), vec) {
                let key = format!("nn:lnr:{}:{}", tag(d), tag(wd));
                let f = super::nvrtc::functions(dev, &key, || ln_reg_source(d, wd), &LN_REG_NAMES)?;
                let vec_i = i32::from(vec);
                // SAFETY: parameters match `ln_rw*`/`ln_rb*` (LN_ARGS: the
                // pointers of `ln_fwd`, rows, cols, eps, vec); operands are
                // contiguous with the sizes the kernel indexes ([rows, cols],
                // [rows], [cols]; absent weight/bias null, tested); the
                // plan's kernel holds a row of `cols`; `vec` only when x's
                // and out's bases and the row length keep every row start
                // 16-byte aligned.
                return unsafe {
                    launch(
                        dev,
                        &key,
                        f[reg_index(plan)],
                        (grid(dev, rows, plan.rows_per_block()), 1, 1),
                        (NT, 1, 1),
                        stream,
                        [
                            KArg::of(&po),
                            KArg::of(&pm),
                            KArg::of(&pr),
                            KArg::of(&px),
                            KArg::of(&pw),
                            KArg::of(&pb),
                            KArg::of(&r),
                            KArg::of(&c),
                            KArg::of(&eps),
                            KArg::of(&vec_i),
                        ],
                    )
                };
            }
            let f = ln_functions(dev, d, wd)?;
            // SAFETY: parameters match `ln_fwd`; all operands are contiguous
            // with the sizes the kernel indexes ([rows, cols], [rows], [cols]),
            // absent weight/bias are null pointers the kernel tests.
            unsafe {
                launch(
                    dev,
                    "ln_fwd",
                    f[0],
                    (grid_for(rows, 1), 1, 1),
                    (NT, 1, 1),
                    stream,
                    [
                        KArg::of(&po),
                        KArg::of(&pm),
                        KArg::of(&pr),
                        KArg::of(&px),
                        KArg::of(&pw),
                        KArg::of(&pb),
                        KArg::of(&r),
                        KArg::of(&c),
                        KArg::of(&eps),
                    ],
                )
            }
        }
        NnKernel::LayerNormBackward {
            dx,
            dy,
            x,
            mean,
            rstd,
            weight,
            rows,
            cols,
        } => {
            if rows == 0 {
                return Ok(());
            }
            let wd = weight.map_or(x.dtype, |w| w.dtype);
            let f = ln_functions(dev, x.dtype, wd)?;
            let (pdx, pdy, px) = (base_ptr(dx), base_ptr(dy), base_ptr(x));
            let (pm, pr, pw) = (base_ptr(mean), base_ptr(rstd), opt_ptr(weight));
            let (r, c) = (rows as i64, cols as i64);
            // SAFETY: parameters match `ln_bwd`; operands as in `ln_fwd`.
            unsafe {
                launch(
                    dev,
                    "ln_bwd",
                    f[1],
                    (grid_for(rows, 1), 1, 1),
                    (NT, 1, 1),
                    stream,
                    [
                        KArg::of(&pdx),
                        KArg::of(&pdy),
                        KArg::of(&px),
                        KArg::of(&pm),
                        KArg::of(&pr),
                        KArg::of(&pw),
                        KArg::of(&r),
                        KArg::of(&c),
                    ],
                )
            }
        }
        NnKernel::LayerNormParamsBackward {
            dw,
            db,
            dy,
            x,
            mean,
            rstd,
            rows,
            cols,
            parts,
        } => {
            if cols == 0 || parts == 0 {
                return Ok(());
            }
            let f = ln_functions(dev, x.dtype, x.dtype)?;
            let (pdw, pdb) = (opt_ptr(dw), opt_ptr(db));
            let (pdy, px, pm, pr) = (base_ptr(dy), base_ptr(x), base_ptr(mean), base_ptr(rstd));
            let (r, c, p) = (rows as i64, cols as i64, parts as i64);
            let gx = grid_x(cols.div_ceil(NT as usize) as u64).ok_or_else(|| {
                failure(
                    dev.device(),
                    "layer_norm_backward",
                    format!("{cols} columns are too many for one launch"),
                )
            })?;
            // SAFETY: parameters match `ln_params`; the grid has one block
            // row per part (parts <= 65535, chosen by the caller) and the
            // kernel bounds columns by `cols`; outputs are [parts, cols].
            unsafe {
                launch(
                    dev,
                    "ln_params",
                    f[2],
                    (gx, parts as u32, 1),
                    (NT, 1, 1),
                    stream,
                    [
                        KArg::of(&pdw),
                        KArg::of(&pdb),
                        KArg::of(&pdy),
                        KArg::of(&px),
                        KArg::of(&pm),
                        KArg::of(&pr),
                        KArg::of(&r),
                        KArg::of(&c),
                        KArg::of(&p),
                    ],
                )
            }
        }
        NnKernel::CrossEntropy {
            lse,
            nll,
            smooth,
            wt,
            logits,
            target,
            weight,
            ignore_index,
            rows,
            classes,
            class_last: _,
            inner: _,
        } => {
            if rows == 0 {
                return Ok(());
            }
            let d = logits.dtype;
            let (pl, pn, ps, pwt) = (base_ptr(lse), opt_ptr(nll), opt_ptr(smooth), opt_ptr(wt));
            let (px, pt, pw) = (base_ptr(logits), opt_ptr(target), opt_ptr(weight));
            let (r, c) = (rows as i64, classes as i64);
            // 16-byte loads when every row starts aligned.
            let vec = px.is_multiple_of(16) && (classes * d.size()).is_multiple_of(16);
            if let Some(plan) = reg_row_plan(classes, 16 / d.size(), vec) {
                let key = format!("nn:cer:{}", tag(d));
                let f = super::nvrtc::functions(dev, &key, || ce_reg_source(d), &CE_REG_NAMES)?;
                let vec_i = i32::from(vec);
                // SAFETY: parameters match `ce_rw*`/`ce_rb*` (CE_ARGS: the
                // pointers of `ce_fwd`, rows, classes, ignore_index, vec);
                // operands are contiguous with the sizes the kernel indexes
                // (absent ones null, tested); the plan's kernel holds a row
                // of `classes`; `vec` only when logits' base and row length
                // keep every row start 16-byte aligned; targets outside
                // [0, classes) are not read through.
                return unsafe {
                    launch(
                        dev,
                        &key,
                        f[reg_index(plan) + if smooth.is_some() { CE_SMOOTH } else { 0 }],
                        (grid(dev, rows, plan.rows_per_block()), 1, 1),
                        (NT, 1, 1),
                        stream,
                        [
                            KArg::of(&pl),
                            KArg::of(&pn),
                            KArg::of(&ps),
                            KArg::of(&pwt),
                            KArg::of(&px),
                            KArg::of(&pt),
                            KArg::of(&pw),
                            KArg::of(&r),
                            KArg::of(&c),
                            KArg::of(&ignore_index),
                            KArg::of(&vec_i),
                        ],
                    )
                };
            }
            let f = ce_functions(dev, d)?;
            // SAFETY: parameters match `ce_fwd`; operands are contiguous with
            // the sizes the kernel indexes; targets were checked to lie in
            // [0, classes) or equal ignore_index; absent ones are null.
            unsafe {
                launch(
                    dev,
                    "ce_fwd",
                    f[0],
                    (grid_for(rows, 1), 1, 1),
                    (NT, 1, 1),
                    stream,
                    [
                        KArg::of(&pl),
                        KArg::of(&pn),
                        KArg::of(&ps),
                        KArg::of(&pwt),
                        KArg::of(&px),
                        KArg::of(&pt),
                        KArg::of(&pw),
                        KArg::of(&r),
                        KArg::of(&c),
                        KArg::of(&ignore_index),
                    ],
                )
            }
        }
        NnKernel::Window { windows, op } => super::windows::run(dev, windows, op),
        NnKernel::MaskCount { counts, mask, n } => {
            if n == 0 {
                return Ok(());
            }
            let f = mask_functions(dev, 1)?;
            let (pc, pm, nn) = (base_ptr(counts), base_ptr(mask), n as i64);
            // SAFETY: parameters match `mask_count(i64*, const u8*, i64)`;
            // the contiguous mask holds n bytes and counts one i64 per chunk
            // of MASK_CHUNK, the kernel's chunk.
            unsafe {
                launch(
                    dev,
                    "mask_count",
                    f[0],
                    (grid_for(n, MASK_CHUNK), 1, 1),
                    (NT, 1, 1),
                    stream,
                    [KArg::of(&pc), KArg::of(&pm), KArg::of(&nn)],
                )
            }
        }
        NnKernel::MaskCompact {
            out,
            src,
            mask,
            offsets,
            n,
            expand,
        } => {
            if n == 0 {
                return Ok(());
            }
            let f = mask_functions(dev, out.dtype.size())?;
            let (po, ps, pm, pf) = (
                base_ptr(out),
                base_ptr(src),
                base_ptr(mask),
                base_ptr(offsets),
            );
            let (nn, ex) = (n as i64, i32::from(expand));
            // SAFETY: parameters match `mask_compact(E*, const E*, const u8*,
            // const i64*, i64, int)` with E of out's element size; offsets
            // are the inclusive sums of the counts of `mask_count` over the
            // same chunks, so every compacted index lies below the count,
            // which out (or src, expanding) holds; the other holds n.
            unsafe {
                launch(
                    dev,
                    "mask_compact",
                    f[1],
                    (grid_for(n, MASK_CHUNK), 1, 1),
                    (NT, 1, 1),
                    stream,
                    [
                        KArg::of(&po),
                        KArg::of(&ps),
                        KArg::of(&pm),
                        KArg::of(&pf),
                        KArg::of(&nn),
                        KArg::of(&ex),
                    ],
                )
            }
        }
        NnKernel::CrossEntropyBackward {
            dx,
            logits,
            lse,
            target,
            weight,
            coef,
            ignore_index,
            smoothing,
            weight_sum,
            rows,
            classes,
            class_last,
        } => {
            if rows == 0 {
                return Ok(());
            }
            let f = ce_functions(dev, logits.dtype)?;
            let (pdx, px, pl) = (base_ptr(dx), base_ptr(logits), base_ptr(lse));
            let (pt, pw, pc) = (base_ptr(target), opt_ptr(weight), base_ptr(coef));
            let (r, c) = (rows as i64, classes as i64);
            let last = i32::from(class_last);
            // SAFETY: parameters match `ce_bwd`; operands as in `ce_fwd`.
            unsafe {
                launch(
                    dev,
                    "ce_bwd",
                    f[1],
                    (grid_for(rows, 1), 1, 1),
                    (NT, 1, 1),
                    stream,
                    [
                        KArg::of(&pdx),
                        KArg::of(&px),
                        KArg::of(&pl),
                        KArg::of(&pt),
                        KArg::of(&pw),
                        KArg::of(&pc),
                        KArg::of(&r),
                        KArg::of(&c),
                        KArg::of(&ignore_index),
                        KArg::of(&smoothing),
                        KArg::of(&weight_sum),
                        KArg::of(&last),
                    ],
                )
            }
        }
    }
}

fn ln_functions(
    dev: &CudaDevice,
    d: DType,
    w: DType,
) -> Result<std::sync::Arc<[super::context::Function]>> {
    let key = format!("nn:ln:{}:{}", tag(d), tag(w));
    super::nvrtc::functions(
        dev,
        &key,
        || ln_source(d, w),
        &["ln_fwd", "ln_bwd", "ln_params"],
    )
}

fn mask_functions(
    dev: &CudaDevice,
    esize: usize,
) -> Result<std::sync::Arc<[super::context::Function]>> {
    let key = format!("nn:mask:{esize}");
    super::nvrtc::functions(
        dev,
        &key,
        || mask_source(esize),
        &["mask_count", "mask_compact"],
    )
}

fn ce_functions(dev: &CudaDevice, d: DType) -> Result<std::sync::Arc<[super::context::Function]>> {
    let key = format!("nn:ce:{}", tag(d));
    super::nvrtc::functions(dev, &key, || ce_source(d), &["ce_fwd", "ce_bwd"])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Index kernels walk every dim larger than 1 and the indexed dim (even
    /// of size 1), up to `MAXD`; past that the smallest other dims are
    /// looped over on the host.
    #[test]
    fn index_dims_drop_size_one_dims_and_loop_past_the_limit() {
        let (w, l) = index_dims(&[1, 4, 1, 3, 1], 2);
        assert_eq!((w, l), (vec![1, 2, 3], vec![]));
        // 30 dims of 1 and 2: the size-1 dims go, 12 of the rest are walked.
        let shape: Vec<usize> = (0..30).map(|d| 1 + d % 2).collect();
        let (w, l) = index_dims(&shape, 4);
        assert!(w.len() == MAXD && w.contains(&4));
        assert!(l.iter().all(|&d| d != 4 && shape[d] == 2));
        assert_eq!(w.len() + l.len(), 16); // 15 dims of 2 and dim 4
        let (w, l) = index_dims(&[3; 15], 14);
        assert_eq!((w.len(), l.len()), (MAXD, 3));
        assert!(w.contains(&14) && !l.contains(&14));
        // The metadata names the indexed dim's place among the walked ones.
        let shape = [2, 1, 3, 1, 5];
        let (w, _) = index_dims(&shape, 3);
        let st = [15, 15, 5, 5, 1];
        let m = index_meta(&shape, 3, &w, &st, &st, &st);
        assert_eq!((m.nd, m.dim, m.n), (4, 2, 30));
        assert_eq!(&m.size[..4], &[2, 3, 1, 5]);
        assert_eq!(&m.ss[..4], &[15, 5, 5, 1]);
    }

    /// Every position of the looped dims is visited once, at its byte
    /// offsets in each operand.
    #[test]
    fn for_each_position_visits_every_looped_position() {
        let shape = [2, 3, 4];
        let mut seen = Vec::new();
        for_each_position(
            &shape,
            &[0, 2],
            (&[12, 4, 1], &[24, 8, 2], &[0, 0, 1]),
            [4, 2, 8],
            |off| {
                seen.push(off);
                Ok(())
            },
        )
        .unwrap();
        let mut want = Vec::new();
        for a in 0..2u64 {
            for c in 0..4u64 {
                want.push([(12 * a + c) * 4, (24 * a + 2 * c) * 2, c * 8]);
            }
        }
        seen.sort_unstable();
        want.sort_unstable();
        assert_eq!(seen, want);
        let mut calls = 0;
        for_each_position(&shape, &[], (&[0; 3], &[0; 3], &[0; 3]), [1; 3], |off| {
            assert_eq!(off, [0; 3]);
            calls += 1;
            Ok(())
        })
        .unwrap();
        assert_eq!(calls, 1);
    }

    /// The generated sources are well-formed enough to name every kernel
    /// (they are compiled by NVRTC only on a GPU).
    #[test]
    fn sources_name_their_kernels() {
        let g = gather_source(4, DType::I64);
        assert!(g.contains("void gather(") && g.contains("void take_rows("));
        assert!(g.contains("void take_rows_v("));
        let s = scatter_source(DType::F32, DType::I32);
        assert!(s.contains("void scatter_add(") && s.contains("typedef int I;"));
        let l = ln_source(DType::BF16, DType::F32);
        assert!(l.contains("typedef float C;") && l.contains("#define CACHE 4096"));
        let c = ce_source(DType::F64);
        assert!(c.contains("typedef double C;") && c.contains("void ce_bwd("));
        let cr = ce_reg_source(DType::BF16);
        // The kernels are defined by macros: `ce_rw1` by `CE_RW(1)`.
        let defined =
            |src: &str, k: &str| src.contains(&format!("{}({})", k[..5].to_uppercase(), &k[5..]));
        // `ces_rw1` is defined beside `ce_rw1`, by the same macro.
        assert!(CE_REG_NAMES[..CE_SMOOTH].iter().all(|k| defined(&cr, k)));
        assert!(CE_REG_NAMES[CE_SMOOTH..]
            .iter()
            .all(|k| cr.contains(&format!(" {}##I(", &k[..6]))
                && defined(&cr, &k.replacen("ces", "ce", 1))));
        let lr = ln_reg_source(DType::F16, DType::F32);
        assert!(LN_REG_NAMES.iter().all(|k| defined(&lr, k)) && lr.contains("typedef float W;"));
        assert_eq!(reg_index(RegRow::Warp(1)), 0);
        assert_eq!(reg_index(RegRow::Warp(32)), 5);
        assert_eq!(reg_index(RegRow::Block(32)), 8);
        let m = mask_source(2);
        assert!(
            m.contains(" mask_count(")
                && m.contains(" mask_compact(")
                && m.contains("typedef u16 E;")
        );
    }
}
