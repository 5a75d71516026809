//! Kernels along one dim: softmax / log-softmax (one fused kernel per row:
//! online max and sum, then the outputs) and cumsum (a warp-wide scan per
//! row). Operands are contiguous and seen as `outer x n x inner`:
//!
//! The row kernels (`inner == 1`) also take attention's fused `scale` (each
//! element is multiplied by it first) and causal mask (`crow > 0`: row `r`
//! is row `r % crow` of its matrix and keeps its first `r % crow + 1`
//! elements; the rest are -inf, never read, and come out 0, or -inf for
//! log-softmax, except in a NaN row, where they are NaN too).
//!
//! * `sm_warp`: `inner == 1`, rows up to [`WARP_ROW_MAX`] elements: a warp
//!   per row, [`SM_BLOCK`]` / 32` rows per block; 16-byte vector loads when
//!   the row allows them.
//! * `sm_block`: `inner == 1`, longer rows: a block of [`SM_BLOCK`] threads
//!   per row, warps combined through shared memory.
//! * `sm_rw{1..32}` / `sm_rb{8,16,32}`: the fast paths for `inner == 1`:
//!   the row is cached in registers (`ITEMS` values per thread; a warp per
//!   row up to [`WARP_ROW_MAX`] elements, [`sm_warp_block`]` / 32` rows per
//!   block, a block per row up to [`REG_BLOCK_ROW_MAX`]), so it is read from
//!   memory once: max by shuffles, then `exp(x - max)` computed once, kept
//!   and summed, then the outputs; 16-byte loads and stores when the row
//!   allows them. A row without scale or mask (plain softmax) is loaded as
//!   it is, without the per-element scale and mask test.
//! * `sm_cols`: `inner > 1`: a thread per (outer, inner) column, adjacent
//!   threads on adjacent columns (coalesced), walking `n` with stride `inner`.
//! * `cs_warp` / `cs_cols`: cumsum, a warp per contiguous row (32 elements
//!   per step, shuffle scan, carry) or a thread per column.
//!
//! f16/bf16 are computed in f32; max and sum are combined "online"
//! (`m`, `s` with `s` rescaled when `m` grows), so the row is read twice
//! (statistics, outputs) and written once. NaN or +inf in a row, and an all
//! -inf row, give NaN, as on the CPU and in PyTorch.

use super::ops::arith;
use super::{compute_ty, load, storage_ty, store, PRELUDE};
use crate::backend::BinaryOp;
use crate::dtype::DType;

/// Threads per block of every kernel here.
pub(crate) const SM_BLOCK: u32 = 256;
/// Threads per block of the register-cached warp-per-row softmax kernels
/// (`sm_rw*`) for elements of `d`: 4 rows per block. On the H200, 4 rather
/// than 8 rows per block (and a block for every 4 rows rather than a grid
/// capped at 32 blocks per SM) took the f32 softmax of `[98304, 1024]` from
/// 0.204 to 0.198 ms (docs/benchmarks.md, session 45). f64 rows keep 8 rows
/// per block: under `__launch_bounds__(128)` NVRTC gives its 16- and
/// 8-value kernels 56-72 registers and spills (up to 576 bytes a thread),
/// where 256 threads a block leave them 64-110 registers and no spill.
pub(crate) fn sm_warp_block(d: DType) -> u32 {
    if d == DType::F64 {
        SM_BLOCK
    } else {
        128
    }
}
/// Longest row the warp-per-row softmax takes.
pub(crate) const WARP_ROW_MAX: usize = 1024;
/// Longest row the block-per-row register-cached softmax takes (`SM_BLOCK`
/// threads of 32 values each); longer rows go to `sm_block`.
pub(crate) const REG_BLOCK_ROW_MAX: usize = SM_BLOCK as usize * 32;
/// The kernels of the softmax module, in the order `softmax_source` defines
/// them: the three general ones, then the register-cached warp kernels for
/// 1, 2, 4, ..., 32 values per lane, then the block kernels for 8, 16, 32.
pub(crate) const SOFTMAX_NAMES: [&str; 12] = [
    "sm_warp", "sm_block", "sm_cols", "sm_rw1", "sm_rw2", "sm_rw4", "sm_rw8", "sm_rw16", "sm_rw32",
    "sm_rb8", "sm_rb16", "sm_rb32",
];

/// The softmax module for elements of the float dtype `d`: kernels
/// `sm_warp`, `sm_block`, `sm_cols`.
pub(crate) fn softmax_source(d: DType) -> String {
    reg_header(d) + &format!("constexpr int SWB = {};\n", sm_warp_block(d)) + REG_ROWS + SOFTMAX
}

/// The cumsum module for elements of `d` (not bool): kernels `cs_warp`, `cs_cols`.
pub(crate) fn cumsum_source(d: DType) -> String {
    header(d) + CUMSUM
}

/// The helpers of the register-cached row kernels (`sm_rw*`/`sm_rb*` here,
/// cross-entropy's `ce_rw*`/`ce_rb*` and layer norm's `ln_rw*` in
/// `backend/cuda/nn.rs`): `nmax` (NaN-propagating), `reg_load` /
/// `reg_store` (a row spread over `lanes` threads, `ITEMS` values each,
/// 16-byte vectors when allowed, slots past the row -inf), `reg_col` (the
/// column of a slot), `warp_max`, `warp_sum`, `local_max`. They need the
/// definitions of [`reg_header`].
pub(crate) const REG_ROWS: &str = r#"
// NaN-propagating max (a NaN anywhere makes the row NaN, as on the CPU).
__device__ __forceinline__ C nmax(C a, C b) { return (b > a || b != b) ? b : a; }

// x[k] * scale for the first `keep` elements of a row, -inf after them.
__device__ __forceinline__ C lx(T v, C scale, i64 k, i64 keep) { return k < keep ? ld(v) * scale : ninf(); }
// Slot i of thread `lane` (of `lanes`) holds x[(i / V * lanes + lane) * V +
// i % V] with vectors (rows start aligned and n % V == 0), x[i * lanes +
// lane] without. Slots past the row, and the causally masked ones (from
// `keep` on, not read), hold -inf, which adds nothing to a finite row's sum
// (a row whose max is not finite is NaN anyway); the others hold x * scale
// (SCALED) or x as it is (plain: keep is the row's length n, and a vector
// lies wholly inside the row or wholly past it, as n % V == 0 with vectors).
template <int ITEMS, bool SCALED>
__device__ __forceinline__ void reg_fill(const T* x, i64 keep, int lane, int lanes, bool vec, C scale, C (&v)[ITEMS]) {
  if constexpr (ITEMS % V == 0) {
    if (vec) {
#pragma unroll
      for (int c = 0; c < ITEMS / V; c++) {
        const i64 k = ((i64)c * lanes + lane) * V;
        if (k < keep) {
          const Vec<T, V> w = *reinterpret_cast<const Vec<T, V>*>(x + k);
#pragma unroll
          for (int j = 0; j < V; j++) v[c * V + j] = SCALED ? lx(w.v[j], scale, k + j, keep) : ld(w.v[j]);
        } else {
#pragma unroll
          for (int j = 0; j < V; j++) v[c * V + j] = ninf();
        }
      }
      return;
    }
  }
#pragma unroll
  for (int i = 0; i < ITEMS; i++) {
    const i64 k = (i64)i * lanes + lane;
    v[i] = k < keep ? (SCALED ? ld(x[k]) * scale : ld(x[k])) : ninf();
  }
}
// The first `keep` elements times `scale`, -inf after them.
template <int ITEMS>
__device__ __forceinline__ void reg_load(const T* x, i64 keep, int lane, int lanes, bool vec, C scale, C (&v)[ITEMS]) {
  reg_fill<ITEMS, true>(x, keep, lane, lanes, vec, scale, v);
}
// Without a mask or scale: the whole row of n elements as it is.
template <int ITEMS>
__device__ __forceinline__ void reg_load(const T* x, i64 n, int lane, int lanes, bool vec, C (&v)[ITEMS]) {
  reg_fill<ITEMS, false>(x, n, lane, lanes, vec, (C)1, v);
}
template <int ITEMS>
__device__ __forceinline__ void reg_store(T* y, i64 n, int lane, int lanes, bool vec, const C (&v)[ITEMS]) {
  if constexpr (ITEMS % V == 0) {
    if (vec) {
#pragma unroll
      for (int c = 0; c < ITEMS / V; c++) {
        const i64 k = ((i64)c * lanes + lane) * V;
        if (k < n) {
          Vec<T, V> w;
#pragma unroll
          for (int j = 0; j < V; j++) w.v[j] = st(v[c * V + j]);
          *reinterpret_cast<Vec<T, V>*>(y + k) = w;
        }
      }
      return;
    }
  }
#pragma unroll
  for (int i = 0; i < ITEMS; i++) {
    const i64 k = (i64)i * lanes + lane;
    if (k < n) y[k] = st(v[i]);
  }
}
__device__ __forceinline__ C warp_max(C m) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) m = nmax(m, __shfl_xor_sync(0xffffffffu, m, o));
  return m;
}
__device__ __forceinline__ C warp_sum(C s) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  return s;
}
template <int ITEMS>
__device__ __forceinline__ C local_max(const C (&v)[ITEMS]) {
  C m = ninf();
#pragma unroll
  for (int i = 0; i < ITEMS; i++) m = nmax(m, v[i]);
  return m;
}
// The column of slot i of thread `lane` (of `lanes`), as reg_load<ITEMS>
// lays it out (vectors only when ITEMS is a multiple of V).
template <int ITEMS>
__device__ __forceinline__ i64 reg_col(int i, int lane, int lanes, bool vec) {
  if constexpr (ITEMS % V == 0) {
    if (vec) return ((i64)(i / V) * lanes + lane) * V + i % V;
  }
  return (i64)i * lanes + lane;
}"#;

/// [`header`] plus `ninf`, `cexp` and `clog` of the compute type: what
/// [`REG_ROWS`] and the softmax kernels build on.
pub(crate) fn reg_header(d: DType) -> String {
    let (ninf, f) = if d == DType::F64 {
        ("__longlong_as_double((long long)0xfff0000000000000ULL)", "")
    } else {
        ("__int_as_float((int)0xff800000u)", "f")
    };
    header(d)
        + &format!(
            "__device__ __forceinline__ C ninf() {{ return {ninf}; }}\n\
             __device__ __forceinline__ C cexp(C x) {{ return exp{f}(x); }}\n\
             __device__ __forceinline__ C clog(C x) {{ return log{f}(x); }}\n"
        )
}

/// The shared definitions: element and compute types, conversions, add.
fn header(d: DType) -> String {
    let c = compute_ty(d);
    let vec = 16 / d.size();
    let mut s = String::from(PRELUDE);
    s.push_str(&format!(
        "typedef {t} T;\ntypedef {c} C;\nconstexpr int V = {vec};\nconstexpr int SB = {SM_BLOCK};\n\
         __device__ __forceinline__ C ld(T x) {{ return {ld}; }}\n\
         __device__ __forceinline__ T st(C v) {{ return {st}; }}\n\
         __device__ __forceinline__ C cadd(C a, C b) {{ return {add}; }}\n",
        t = storage_ty(d),
        ld = load(d, "x"),
        st = store(d, "v"),
        add = arith(BinaryOp::Add, d, "a", "b"),
    ));
    s
}

const SOFTMAX: &str = r#"
// Online (max, sum of exp(x - max)) of the elements seen so far.
__device__ __forceinline__ void ms_add(C& m, C& s, C x) {
  if (x > m) {
    // (x - x) is NaN for x = +inf: a row holding +inf gives NaN.
    s = s * cexp(m - x) + ((C)1 + (x - x));
    m = x;
  } else if (x != ninf()) {
    // NaN lands here and makes the sum NaN.
    s += cexp(x - m);
  }
}
__device__ __forceinline__ void ms_merge(C& m, C& s, C m2, C s2) {
  const C mm = m2 > m ? m2 : m;
  const C a = (s == (C)0) ? (C)0 : s * cexp(m - mm);
  const C b = (s2 == (C)0) ? (C)0 : s2 * cexp(m2 - mm);
  m = mm;
  s = a + b;
}
__device__ __forceinline__ void ms_warp(C& m, C& s) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const C m2 = __shfl_xor_sync(0xffffffffu, m, o);
    const C s2 = __shfl_xor_sync(0xffffffffu, s, o);
    ms_merge(m, s, m2, s2);
  }
}
__device__ __forceinline__ C sm_out(C x, C m, C s, C ls, int log_) {
  return log_ ? (x - m) - ls : cexp(x - m) / s;
}
// The elements of a row that count: the first `keep` (all but the causally
// masked ones, which are -inf and never read), each times `scale`.
__device__ __forceinline__ i64 row_keep(i64 r, i64 n, i64 crow) {
  if (crow <= 0) return n;
  const i64 k = r % crow + 1;
  return k < n ? k : n;
}
// Statistics of the row x[0..n) by the `lanes` threads numbered `lane`
// (elements from `keep` on are -inf and add nothing).
__device__ __forceinline__ void row_stats(const T* x, i64 n, int lane, int lanes, bool vec, C scale, i64 keep, C& m, C& s) {
  if (vec) {
    for (i64 k = (i64)lane * V; k < keep; k += (i64)lanes * V) {
      const Vec<T, V> v = *reinterpret_cast<const Vec<T, V>*>(x + k);
#pragma unroll
      for (int j = 0; j < V; j++) ms_add(m, s, lx(v.v[j], scale, k + j, keep));
    }
  } else {
    for (i64 k = lane; k < keep; k += lanes) ms_add(m, s, ld(x[k]) * scale);
  }
}
__device__ __forceinline__ void row_write(const T* x, T* y, i64 n, int lane, int lanes, bool vec, C scale, i64 keep, C m, C s, int log_) {
  const C ls = clog(s);
  if (vec) {
    for (i64 k = (i64)lane * V; k < n; k += (i64)lanes * V) {
      Vec<T, V> o;
      if (k < keep) {
        const Vec<T, V> v = *reinterpret_cast<const Vec<T, V>*>(x + k);
#pragma unroll
        for (int j = 0; j < V; j++) o.v[j] = st(sm_out(lx(v.v[j], scale, k + j, keep), m, s, ls, log_));
      } else {
#pragma unroll
        for (int j = 0; j < V; j++) o.v[j] = st(sm_out(ninf(), m, s, ls, log_));
      }
      *reinterpret_cast<Vec<T, V>*>(y + k) = o;
    }
  } else {
    for (i64 k = lane; k < n; k += lanes) {
      const C v = k < keep ? ld(x[k]) * scale : ninf();
      y[k] = st(sm_out(v, m, s, ls, log_));
    }
  }
}

// A warp per row, SB / 32 rows per block. `vec`: rows start 16-byte aligned
// and n is a multiple of V.
extern "C" __global__ void __launch_bounds__(SB) sm_warp(const char* in, char* out, i64 rows, i64 n, int log_, int vec, C scale, i64 crow) {
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  const i64 per = SB / 32;
  for (i64 r0 = (i64)blockIdx.x * per; r0 < rows; r0 += (i64)gridDim.x * per) {
    const i64 r = r0 + w;
    if (r >= rows) continue;  // uniform across the warp
    const T* x = reinterpret_cast<const T*>(in) + r * n;
    T* y = reinterpret_cast<T*>(out) + r * n;
    const i64 keep = row_keep(r, n, crow);
    C m = ninf(), s = (C)0;
    row_stats(x, n, lane, 32, vec != 0, scale, keep, m, s);
    ms_warp(m, s);
    row_write(x, y, n, lane, 32, vec != 0, scale, keep, m, s, log_);
  }
}

// A block per row.
extern "C" __global__ void __launch_bounds__(SB) sm_block(const char* in, char* out, i64 rows, i64 n, int log_, int vec, C scale, i64 crow) {
  __shared__ C pm[SB / 32], ps[SB / 32];
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  for (i64 r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* x = reinterpret_cast<const T*>(in) + r * n;
    T* y = reinterpret_cast<T*>(out) + r * n;
    const i64 keep = row_keep(r, n, crow);
    C m = ninf(), s = (C)0;
    row_stats(x, n, threadIdx.x, SB, vec != 0, scale, keep, m, s);
    ms_warp(m, s);
    if (lane == 0) { pm[w] = m; ps[w] = s; }
    __syncthreads();
    m = pm[0]; s = ps[0];
    for (int q = 1; q < SB / 32; q++) ms_merge(m, s, pm[q], ps[q]);
    __syncthreads();  // pm/ps are rewritten by the next row
    row_write(x, y, n, threadIdx.x, SB, vec != 0, scale, keep, m, s, log_);
  }
}

// ---- Register-cached rows: read once (helpers in REG_ROWS). ----
// Replaces v by exp(v - m) for softmax (kept for the outputs); returns the
// local sum of exp(v - m).
template <int ITEMS>
__device__ __forceinline__ C local_exp_sum(C (&v)[ITEMS], C m, int log_) {
  C s = (C)0;
#pragma unroll
  for (int i = 0; i < ITEMS; i++) {
    const C e = cexp(v[i] - m);
    if (!log_) v[i] = e;
    s += e;
  }
  return s;
}
template <int ITEMS>
__device__ __forceinline__ void finish(C (&v)[ITEMS], C m, C s, int log_) {
  if (log_) {
    const C ls = clog(s);
#pragma unroll
    for (int i = 0; i < ITEMS; i++) v[i] = (v[i] - m) - ls;
  } else {
    // One division per row, then a multiply per element (a division per
    // element costs a slow-path sequence each; the result differs by at
    // most an ulp).
    const C inv = (C)1 / s;
#pragma unroll
    for (int i = 0; i < ITEMS; i++) v[i] = v[i] * inv;
  }
}

// Loads row r: as it is without scale or mask, else scaled and masked.
template <int ITEMS>
__device__ __forceinline__ void sm_load(const char* in, i64 r, i64 n, int lane, int lanes, int vec, C scale, i64 crow, C (&v)[ITEMS]) {
  const T* x = reinterpret_cast<const T*>(in) + r * n;
  if (crow <= 0 && scale == (C)1) {
    reg_load<ITEMS>(x, n, lane, lanes, vec != 0, v);
  } else {
    reg_load<ITEMS>(x, row_keep(r, n, crow), lane, lanes, vec != 0, scale, v);
  }
}

// A warp per row of at most 32 * ITEMS elements, SWB / 32 rows per block.
template <int ITEMS>
__device__ __forceinline__ void sm_rw(const char* in, char* out, i64 rows, i64 n, int log_, int vec, C scale, i64 crow) {
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  const i64 per = SWB / 32;
  for (i64 r0 = (i64)blockIdx.x * per; r0 < rows; r0 += (i64)gridDim.x * per) {
    const i64 r = r0 + w;
    if (r >= rows) continue;  // uniform across the warp
    C v[ITEMS];
    sm_load<ITEMS>(in, r, n, lane, 32, vec, scale, crow, v);
    const C m = warp_max(local_max<ITEMS>(v));
    const C s = warp_sum(local_exp_sum<ITEMS>(v, m, log_));
    finish<ITEMS>(v, m, s, log_);
    reg_store<ITEMS>(reinterpret_cast<T*>(out) + r * n, n, lane, 32, vec != 0, v);
  }
}

// A block of SB threads per row of at most SB * ITEMS elements.
template <int ITEMS>
__device__ __forceinline__ void sm_rb(const char* in, char* out, i64 rows, i64 n, int log_, int vec, C scale, i64 crow) {
  __shared__ C red[SB / 32];
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  for (i64 r = blockIdx.x; r < rows; r += gridDim.x) {
    C v[ITEMS];
    sm_load<ITEMS>(in, r, n, threadIdx.x, SB, vec, scale, crow, v);
    C m = warp_max(local_max<ITEMS>(v));
    if (lane == 0) red[w] = m;
    __syncthreads();
    m = red[0];
#pragma unroll
    for (int q = 1; q < SB / 32; q++) m = nmax(m, red[q]);
    __syncthreads();
    C s = warp_sum(local_exp_sum<ITEMS>(v, m, log_));
    if (lane == 0) red[w] = s;
    __syncthreads();
    s = red[0];
#pragma unroll
    for (int q = 1; q < SB / 32; q++) s += red[q];
    __syncthreads();  // red is rewritten by the next row
    finish<ITEMS>(v, m, s, log_);
    reg_store<ITEMS>(reinterpret_cast<T*>(out) + r * n, n, threadIdx.x, SB, vec != 0, v);
  }
}

#define SM_RW(I) extern "C" __global__ void __launch_bounds__(SWB) sm_rw##I(const char* in, char* out, i64 rows, i64 n, int log_, int vec, C scale, i64 crow) { sm_rw<I>(in, out, rows, n, log_, vec, scale, crow); }
#define SM_RB(I) extern "C" __global__ void __launch_bounds__(SB) sm_rb##I(const char* in, char* out, i64 rows, i64 n, int log_, int vec, C scale, i64 crow) { sm_rb<I>(in, out, rows, n, log_, vec, scale, crow); }
SM_RW(1) SM_RW(2) SM_RW(4) SM_RW(8) SM_RW(16) SM_RW(32)
SM_RB(8) SM_RB(16) SM_RB(32)

// A thread per (outer, inner) column of a row strided by `inner`.
extern "C" __global__ void __launch_bounds__(SB) sm_cols(const char* in, char* out, i64 outer, i64 n, i64 inner, int log_) {
  const i64 cols = outer * inner;
  for (i64 c = (i64)blockIdx.x * SB + threadIdx.x; c < cols; c += (i64)gridDim.x * SB) {
    const i64 o = c / inner, i = c % inner;
    const T* x = reinterpret_cast<const T*>(in) + o * n * inner + i;
    T* y = reinterpret_cast<T*>(out) + o * n * inner + i;
    C m = ninf(), s = (C)0;
    for (i64 k = 0; k < n; k++) ms_add(m, s, ld(x[k * inner]));
    const C ls = clog(s);
    for (i64 k = 0; k < n; k++) y[k * inner] = st(sm_out(ld(x[k * inner]), m, s, ls, log_));
  }
}

"#;

const CUMSUM: &str = r#"
// Warp shuffles of the compute type (u8 travels as int).
template <class X> __device__ __forceinline__ X shup(X v, int o) { return __shfl_up_sync(0xffffffffu, v, o); }
__device__ __forceinline__ u8 shup(u8 v, int o) { return (u8)__shfl_up_sync(0xffffffffu, (int)v, o); }
template <class X> __device__ __forceinline__ X shget(X v, int l) { return __shfl_sync(0xffffffffu, v, l); }
__device__ __forceinline__ u8 shget(u8 v, int l) { return (u8)__shfl_sync(0xffffffffu, (int)v, l); }

// Cumsum: a warp per contiguous row, 32 elements per step (shuffle scan), the
// running total carried between steps.
extern "C" __global__ void __launch_bounds__(SB) cs_warp(const char* in, char* out, i64 rows, i64 n) {
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  const i64 per = SB / 32;
  for (i64 r0 = (i64)blockIdx.x * per; r0 < rows; r0 += (i64)gridDim.x * per) {
    const i64 r = r0 + w;
    if (r >= rows) continue;  // uniform across the warp
    const T* x = reinterpret_cast<const T*>(in) + r * n;
    T* y = reinterpret_cast<T*>(out) + r * n;
    C carry = (C)0;
    for (i64 k0 = 0; k0 < n; k0 += 32) {
      const i64 k = k0 + lane;
      C v = k < n ? ld(x[k]) : (C)0;
#pragma unroll
      for (int o = 1; o < 32; o <<= 1) {
        const C u = shup(v, o);
        if (lane >= o) v = cadd(u, v);
      }
      v = cadd(carry, v);
      if (k < n) y[k] = st(v);
      carry = shget(v, 31);
    }
  }
}

// Cumsum: a thread per (outer, inner) column.
extern "C" __global__ void __launch_bounds__(SB) cs_cols(const char* in, char* out, i64 outer, i64 n, i64 inner) {
  const i64 cols = outer * inner;
  for (i64 c = (i64)blockIdx.x * SB + threadIdx.x; c < cols; c += (i64)gridDim.x * SB) {
    const i64 o = c / inner, i = c % inner;
    const T* x = reinterpret_cast<const T*>(in) + o * n * inner + i;
    T* y = reinterpret_cast<T*>(out) + o * n * inner + i;
    C acc = (C)0;
    for (i64 k = 0; k < n; k++) {
      acc = cadd(acc, ld(x[k * inner]));
      y[k * inner] = st(acc);
    }
  }
}
"#;
