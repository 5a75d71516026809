//! Sorting kernels (`sort`, `topk`, `kthvalue`, `median`): rows of a
//! contiguous `[rows, n]` input, sorted as (key, position) pairs.
//!
//! Every element becomes an order-preserving unsigned 64-bit key (the CPU's
//! `SortKey`: NaN the largest, -0.0 equal to 0.0; XOR-ed with `flip` for a
//! descending sort) paired with its position in the row. Pairs are
//! compared as (key, position): all pairs of a row differ, so the sorted
//! order is unique, and equal keys keep input order (a stable sort).
//!
//! * `sort_chunks`: a block sorts one chunk of up to [`CHUNK`] elements of a
//!   row in shared memory (a bitonic network over the padded chunk; padding
//!   pairs sort after every real one) and writes the chunk's first `cap`
//!   pairs as run `c` of the row in the pair buffers.
//! * `merge_runs`: one pass merges runs `2J` and `2J + 1` of every row into
//!   run `J`: each pair's place in the merged run is its rank in its own run
//!   plus the number of pairs of the partner run that are smaller (a binary
//!   search); pairs placed at `ncap` or beyond (`topk`'s truncation) are
//!   dropped. Passes repeat until each row is one run.
//! * `finish_head`: values (the input's elements, copied as they are) and
//!   positions of the first `k` pairs of each row's run.
//! * `finish_pick`: one pair per row: position `p` (`kthvalue`) or the lower
//!   median of a fully sorted row (NaN pairs are last: the first NaN pair
//!   is found by a binary search for the NaN key).
//!
//! Runs: in a buffer of rows of `rowlen` pairs, run `j` of a row starts at
//! `j * cap` and holds `cap` pairs, except the last run (`last` pairs,
//! `rowlen = (nruns - 1) * cap + last`). Every index is 64-bit, every loop
//! strides over the grid, and every read and write is bounded by the sizes
//! passed in.

use super::{storage_ty, PRELUDE};
use crate::dtype::DType;

/// Elements per chunk sorted in shared memory (a power of two), two per
/// thread of a block of `CHUNK / 2` threads.
pub(crate) const CHUNK: usize = 2048;

/// The kernels of [`sort_source`], in the order `functions` returns them.
pub(crate) const SORT_NAMES: [&str; 4] =
    ["sort_chunks", "merge_runs", "finish_head", "finish_pick"];

/// The body of `sort_key(T v)` for dtype `d`: the key in the low bits.
fn key_body(d: DType) -> &'static str {
    match d {
        DType::F32 => {
            "if (v != v) return 0xffffffffull;\n  u32 b = (v == 0.0f) ? 0u : __float_as_uint(v);\n  return (u64)((b & 0x80000000u) ? ~b : (b | 0x80000000u));"
        }
        DType::F64 => {
            "if (v != v) return 0xffffffffffffffffull;\n  u64 b = (v == 0.0) ? 0ull : (u64)__double_as_longlong(v);\n  return (b & 0x8000000000000000ull) ? ~b : (b | 0x8000000000000000ull);"
        }
        DType::F16 => {
            "if ((v & 0x7fff) > 0x7c00) return 0xffffull;\n  u32 b = ((v & 0x7fff) == 0) ? 0u : (u32)v;\n  return (u64)((b & 0x8000u) ? (~b & 0xffffu) : (b | 0x8000u));"
        }
        DType::BF16 => {
            "if ((v & 0x7fff) > 0x7f80) return 0xffffull;\n  u32 b = ((v & 0x7fff) == 0) ? 0u : (u32)v;\n  return (u64)((b & 0x8000u) ? (~b & 0xffffu) : (b | 0x8000u));"
        }
        DType::I32 => "return (u64)(((u32)v) ^ 0x80000000u);",
        DType::I64 => "return ((u64)v) ^ 0x8000000000000000ull;",
        DType::U8 | DType::Bool => "return (u64)v;",
    }
}

/// The sorting kernels for elements of `d`.
pub(crate) fn sort_source(d: DType) -> String {
    let t = storage_ty(d);
    let key = key_body(d);
    format!(
        r#"{PRELUDE}
typedef {t} T;
#define CHUNK {CHUNK}
__device__ __forceinline__ u64 sort_key(T v) {{
  {key}
}}
// (ka, ia) < (kb, ib)
__device__ __forceinline__ bool pair_less(u64 ka, i64 ia, u64 kb, i64 ib) {{
  return ka < kb || (ka == kb && ia < ib);
}}

// Grid-stride over (row, chunk) blocks; `c2 = blockDim.x * 2` elements per
// chunk (a power of two, at most CHUNK), `nchunks` chunks per row.
extern "C" __global__ void __launch_bounds__(CHUNK / 2) sort_chunks(
    const T* x, u64* okey, i64* oidx, i64 rows, i64 n, i64 nchunks, i64 cap, i64 rowlen, u64 flip) {{
  __shared__ u64 sk[CHUNK];
  __shared__ u32 si[CHUNK];
  const u32 c2 = blockDim.x * 2u;
  const u32 tid = threadIdx.x;
  for (i64 b = blockIdx.x; b < rows * nchunks; b += gridDim.x) {{
    const i64 row = b / nchunks;
    const i64 c = b - row * nchunks;
    const i64 start = c * (i64)c2;
    const i64 rem = n - start;
    const u32 valid = rem < (i64)c2 ? (u32)rem : c2;
    for (u32 t = tid; t < c2; t += blockDim.x) {{
      if (t < valid) {{
        sk[t] = sort_key(x[row * n + start + t]) ^ flip;
        si[t] = t;
      }} else {{
        // Padding: after every real pair (a real position is < c2).
        sk[t] = 0xffffffffffffffffull;
        si[t] = 0xffffffffu;
      }}
    }}
    __syncthreads();
    for (u32 size = 2; size <= c2; size <<= 1) {{
      for (u32 stride = size >> 1; stride > 0; stride >>= 1) {{
        // Thread `tid` compares elements `lo` and `lo + stride`.
        const u32 lo = 2u * tid - (tid & (stride - 1u));
        const u32 hi = lo + stride;
        const bool up = (lo & size) == 0;
        const u64 ka = sk[lo], kb = sk[hi];
        const u32 ia = si[lo], ib = si[hi];
        const bool greater = ka > kb || (ka == kb && ia > ib);
        if (greater == up) {{
          sk[lo] = kb; sk[hi] = ka;
          si[lo] = ib; si[hi] = ia;
        }}
        __syncthreads();
      }}
    }}
    const u32 keep = (i64)valid < cap ? valid : (u32)cap;
    for (u32 t = tid; t < keep; t += blockDim.x) {{
      const i64 o = row * rowlen + c * cap + t;
      okey[o] = sk[t];
      oidx[o] = start + (i64)si[t];
    }}
    __syncthreads();
  }}
}}

// Merges runs 2J and 2J + 1 of every row (see the module's docs).
extern "C" __global__ void merge_runs(
    const u64* ikey, const i64* iidx, u64* okey, i64* oidx, i64 rows,
    i64 nruns, i64 cap, i64 last, i64 rowlen, i64 ncap, i64 nlast, i64 nrowlen) {{
  const i64 total = rows * rowlen;
  const i64 nnruns = (nruns + 1) / 2;
  for (i64 g = (i64)blockIdx.x * blockDim.x + threadIdx.x; g < total; g += (i64)gridDim.x * blockDim.x) {{
    const i64 row = g / rowlen;
    const i64 p = g - row * rowlen;
    const i64 j = p / cap;
    const i64 pos = p - j * cap;
    const u64 k = ikey[g];
    const i64 id = iidx[g];
    const i64 partner = j ^ 1;
    i64 smaller = 0;
    if (partner < nruns) {{
      // Pairs of the partner run smaller than (k, id): a lower bound.
      const i64 base = row * rowlen + partner * cap;
      i64 lo = 0, hi = (partner == nruns - 1) ? last : cap;
      while (lo < hi) {{
        const i64 mid = lo + (hi - lo) / 2;
        if (pair_less(ikey[base + mid], iidx[base + mid], k, id)) lo = mid + 1; else hi = mid;
      }}
      smaller = lo;
    }}
    const i64 q = pos + smaller;
    const i64 J = j >> 1;
    const i64 jlen = (J == nnruns - 1) ? nlast : ncap;
    if (q < jlen) {{
      const i64 o = row * nrowlen + J * ncap + q;
      okey[o] = k;
      oidx[o] = id;
    }}
  }}
}}

// vals/oidx[row, j] for j < k from the one sorted run of each row.
extern "C" __global__ void finish_head(
    const T* x, const i64* iidx, T* vals, i64* oidx, i64 rows, i64 n, i64 k, i64 rowlen) {{
  for (i64 g = (i64)blockIdx.x * blockDim.x + threadIdx.x; g < rows * k; g += (i64)gridDim.x * blockDim.x) {{
    const i64 row = g / k;
    const i64 j = g - row * k;
    i64 i = iidx[row * rowlen + j];
    if (i < 0 || i >= n) i = 0;  // never: positions come from the row
    vals[g] = x[row * n + i];
    oidx[g] = i;
  }}
}}

// One pair per row: mode 0 position p; mode 1 the median (the first NaN
// when there is one); mode 2 the median of the non-NaN pairs (the first NaN
// when all are NaN). `has_nan`: the dtype has NaNs (keys equal to nan_key).
extern "C" __global__ void finish_pick(
    const T* x, const u64* ikey, const i64* iidx, T* vals, i64* oidx, i64 rows, i64 n,
    i64 rowlen, int mode, i64 p, int has_nan, u64 nan_key) {{
  for (i64 row = (i64)blockIdx.x * blockDim.x + threadIdx.x; row < rows; row += (i64)gridDim.x * blockDim.x) {{
    const i64 base = row * rowlen;
    i64 pos = p;
    if (mode != 0) {{
      i64 m = rowlen;
      if (has_nan) {{
        i64 lo = 0, hi = rowlen;
        while (lo < hi) {{
          const i64 mid = lo + (hi - lo) / 2;
          if (ikey[base + mid] < nan_key) lo = mid + 1; else hi = mid;
        }}
        m = lo;
      }}
      if (m < rowlen && mode == 1) pos = m;
      else if (m == 0) pos = 0;
      else pos = (m - 1) / 2;
    }}
    if (pos < 0 || pos >= rowlen) pos = 0;  // never: checked by the host
    i64 i = iidx[base + pos];
    if (i < 0 || i >= n) i = 0;  // never: positions come from the row
    vals[row] = x[row * n + i];
    oidx[row] = i;
  }}
}}
"#
    )
}

#[cfg(test)]
mod tests {
    use super::sort_source;
    use crate::dtype::DType;

    /// Every dtype's kernels compile with NVRTC for the H100/H200
    /// (`sm_90`, the backend's options) wherever NVRTC can be loaded (set
    /// `VIRTUAL_ENV` to a Python environment holding PyTorch's
    /// `nvidia/cu13` libraries, say): no GPU is needed. Without NVRTC the
    /// test says so and checks nothing.
    #[test]
    fn sources_compile_with_nvrtc() {
        if let Err(why) = crate::backend::cuda::nvrtc::ensure_nvrtc() {
            eprintln!("NVRTC not loadable, nothing compiled: {why}");
            return;
        }
        let opts = ["--gpu-architecture=sm_90", "--std=c++17", "--fmad=false"];
        for d in [
            DType::F32,
            DType::F64,
            DType::F16,
            DType::BF16,
            DType::I32,
            DType::I64,
            DType::U8,
            DType::Bool,
        ] {
            let src = std::ffi::CString::new(sort_source(d)).unwrap();
            let prog = cudarc::nvrtc::result::create_program(&src, None).unwrap();
            // SAFETY: `prog` was created above and is destroyed below, once;
            // its log is read before that.
            unsafe {
                let r = cudarc::nvrtc::result::compile_program(prog, &opts);
                let log = cudarc::nvrtc::result::get_program_log(prog)
                    .map(|l| l.iter().map(|&c| c as u8 as char).collect::<String>())
                    .unwrap_or_default();
                let _ = cudarc::nvrtc::result::destroy_program(prog);
                assert!(r.is_ok(), "{d:?}: {r:?}\n{log}");
            }
        }
    }
}
