//! The gradient of softmax and log-softmax along one dim, one fused kernel
//! per row: `dx = y (g - sum(g y))` (softmax) or `dx = g - exp(y) sum(g)`
//! (log-softmax), from the output gradient `g` and the forward's output `y`.
//! Operands are contiguous and seen as `outer x n x inner`:
//!
//! * `smb_warp`: `inner == 1`, rows up to [`WARP_ROW_MAX`] elements: a warp
//!   per row; with 16-byte vectors the row is held in registers between the
//!   sum and the outputs (read once), otherwise it is read twice (the second
//!   time from cache).
//! * `smb_block`: `inner == 1`, longer rows: a block per row, the sum
//!   combined through shared memory, the row read twice.
//! * `smb_cols`: `inner > 1`: a thread per (outer, inner) column.
//!
//! f16/bf16 are computed in f32 (as PyTorch's kernels do), so the gradient
//! is rounded once, not at each step of the composition. Log-softmax's
//! gradient is one fused multiply-add, and `smb_cols` sums softmax's `g y`
//! with fused multiply-adds in the CPU kernel's order, so a softmax gradient
//! along a dim other than the last has the CPU's bits.

use super::dimops::{SM_BLOCK, WARP_ROW_MAX};
use super::{compute_ty, load, storage_ty, store, PRELUDE};
use crate::dtype::DType;

/// The module for elements of the float dtype `d`: kernels `smb_warp`,
/// `smb_block`, `smb_cols`.
pub(crate) fn source(d: DType) -> String {
    let vec = 16 / d.size();
    let f = if d == DType::F64 { "" } else { "f" };
    let mut s = String::from(PRELUDE);
    s.push_str(&format!(
        "typedef {t} T;\ntypedef {c} C;\nconstexpr int V = {vec};\nconstexpr int SB = {SM_BLOCK};\n\
         constexpr int KMAX = {kmax};\n\
         __device__ __forceinline__ C ld(T x) {{ return {ld}; }}\n\
         __device__ __forceinline__ T st(C v) {{ return {st}; }}\n\
         __device__ __forceinline__ C cexp(C x) {{ return exp{f}(x); }}\n\
         __device__ __forceinline__ C cfma(C a, C b, C c) {{ return fma{f}(a, b, c); }}\n",
        t = storage_ty(d),
        c = compute_ty(d),
        kmax = (WARP_ROW_MAX / (32 * vec)).max(1),
        ld = load(d, "x"),
        st = store(d, "v"),
    ));
    s.push_str(TEMPLATE);
    s
}

const TEMPLATE: &str = r#"
// The summand of one element and the gradient given the row's sum.
__device__ __forceinline__ C term(C g, C y, int log_) { return log_ ? g : g * y; }
// Log-softmax's g - exp(y) s rounded once (NVRTC runs with --fmad=false, so
// the fused multiply-add is explicit), as PyTorch's CUDA build contracts it
// and strata's CPU kernel computes it.
__device__ __forceinline__ C grad_of(C g, C y, C s, int log_) { return log_ ? cfma(-cexp(y), s, g) : y * (g - s); }
__device__ __forceinline__ C warp_sum(C v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
// The row's sum by `lanes` threads numbered `lane` (partial per thread).
__device__ __forceinline__ C row_sum(const T* g, const T* y, i64 n, int lane, int lanes, bool vec, int log_) {
  C acc = (C)0;
  if (vec) {
    for (i64 k = (i64)lane * V; k < n; k += (i64)lanes * V) {
      const Vec<T, V> a = *reinterpret_cast<const Vec<T, V>*>(g + k);
      const Vec<T, V> b = *reinterpret_cast<const Vec<T, V>*>(y + k);
#pragma unroll
      for (int j = 0; j < V; j++) acc += term(ld(a.v[j]), ld(b.v[j]), log_);
    }
  } else {
    for (i64 k = lane; k < n; k += lanes) acc += term(ld(g[k]), ld(y[k]), log_);
  }
  return acc;
}
__device__ __forceinline__ void row_grad(const T* g, const T* y, T* dx, i64 n, int lane, int lanes, bool vec, C s, int log_) {
  if (vec) {
    for (i64 k = (i64)lane * V; k < n; k += (i64)lanes * V) {
      const Vec<T, V> a = *reinterpret_cast<const Vec<T, V>*>(g + k);
      const Vec<T, V> b = *reinterpret_cast<const Vec<T, V>*>(y + k);
      Vec<T, V> o;
#pragma unroll
      for (int j = 0; j < V; j++) o.v[j] = st(grad_of(ld(a.v[j]), ld(b.v[j]), s, log_));
      *reinterpret_cast<Vec<T, V>*>(dx + k) = o;
    }
  } else {
    for (i64 k = lane; k < n; k += lanes) dx[k] = st(grad_of(ld(g[k]), ld(y[k]), s, log_));
  }
}

// A warp per row, SB / 32 rows per block. `vec`: rows start 16-byte aligned
// and n is a multiple of V; then rows of at most 32 * V * KMAX elements are
// held in registers.
extern "C" __global__ void __launch_bounds__(SB) smb_warp(const char* gp, const char* yp, char* op, i64 rows, i64 n, int log_, int vec) {
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  const i64 per = SB / 32;
  for (i64 r0 = (i64)blockIdx.x * per; r0 < rows; r0 += (i64)gridDim.x * per) {
    const i64 r = r0 + w;
    if (r >= rows) continue;  // uniform across the warp
    const T* g = reinterpret_cast<const T*>(gp) + r * n;
    const T* y = reinterpret_cast<const T*>(yp) + r * n;
    T* dx = reinterpret_cast<T*>(op) + r * n;
    if (vec && n <= (i64)32 * V * KMAX) {
      Vec<T, V> a[KMAX], b[KMAX];
      C acc = (C)0;
#pragma unroll
      for (int q = 0; q < KMAX; q++) {
        const i64 k = ((i64)q * 32 + lane) * V;
        if (k < n) {
          a[q] = *reinterpret_cast<const Vec<T, V>*>(g + k);
          b[q] = *reinterpret_cast<const Vec<T, V>*>(y + k);
        }
      }
#pragma unroll
      for (int q = 0; q < KMAX; q++) {
        const i64 k = ((i64)q * 32 + lane) * V;
        if (k < n) {
#pragma unroll
          for (int j = 0; j < V; j++) acc += term(ld(a[q].v[j]), ld(b[q].v[j]), log_);
        }
      }
      const C s = warp_sum(acc);
#pragma unroll
      for (int q = 0; q < KMAX; q++) {
        const i64 k = ((i64)q * 32 + lane) * V;
        if (k < n) {
          Vec<T, V> o;
#pragma unroll
          for (int j = 0; j < V; j++) o.v[j] = st(grad_of(ld(a[q].v[j]), ld(b[q].v[j]), s, log_));
          *reinterpret_cast<Vec<T, V>*>(dx + k) = o;
        }
      }
    } else {
      const C s = warp_sum(row_sum(g, y, n, lane, 32, vec != 0, log_));
      row_grad(g, y, dx, n, lane, 32, vec != 0, s, log_);
    }
  }
}

// A block per row.
extern "C" __global__ void __launch_bounds__(SB) smb_block(const char* gp, const char* yp, char* op, i64 rows, i64 n, int log_, int vec) {
  __shared__ C part[SB / 32];
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  for (i64 r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* g = reinterpret_cast<const T*>(gp) + r * n;
    const T* y = reinterpret_cast<const T*>(yp) + r * n;
    T* dx = reinterpret_cast<T*>(op) + r * n;
    C acc = warp_sum(row_sum(g, y, n, threadIdx.x, SB, vec != 0, log_));
    if (lane == 0) part[w] = acc;
    __syncthreads();
    C s = (C)0;
#pragma unroll
    for (int q = 0; q < SB / 32; q++) s += part[q];
    __syncthreads();  // part is rewritten by the next row
    row_grad(g, y, dx, n, threadIdx.x, SB, vec != 0, s, log_);
  }
}

// A thread per (outer, inner) column, walking n with stride inner.
extern "C" __global__ void __launch_bounds__(SB) smb_cols(const char* gp, const char* yp, char* op, i64 outer, i64 n, i64 inner, int log_) {
  const T* g = reinterpret_cast<const T*>(gp);
  const T* y = reinterpret_cast<const T*>(yp);
  T* dx = reinterpret_cast<T*>(op);
  for (i64 c = (i64)blockIdx.x * SB + threadIdx.x; c < outer * inner; c += (i64)gridDim.x * SB) {
    const i64 base = (c / inner) * n * inner + c % inner;
    // Softmax's sum of g y with a fused multiply-add per element, in the
    // order of the CPU kernel along a dim that is not the last (PyTorch's
    // CPU kernel there): the same bits as the CPU.
    C s = (C)0;
    for (i64 k = 0; k < n; k++) {
      const C gk = ld(g[base + k * inner]);
      s = log_ ? s + gk : cfma(gk, ld(y[base + k * inner]), s);
    }
    for (i64 k = 0; k < n; k++) {
      const i64 i = base + k * inner;
      dx[i] = st(grad_of(ld(g[i]), ld(y[i]), s, log_));
    }
  }
}
"#;
