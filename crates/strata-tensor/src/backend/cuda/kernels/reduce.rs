//! Reductions: one block per output position (the kept dims, row-major), its
//! threads folding the reduced dims (row-major positions `k`) and combining in
//! shared memory. When there are few outputs and many elements each, every
//! output is split over several blocks that write partials, and a second
//! kernel (`combine`) folds them. Max/min keep the position too: a NaN wins (the first one),
//! otherwise the extreme value, ties going to the first position, as on the CPU.

use super::ops::{arith, scalar};
use super::{compute_ty, load, storage_ty, store, PRELUDE};
use crate::backend::{BinaryOp, ReduceOp};
use crate::dtype::DType;

/// Threads per block.
pub(crate) const RBLOCK: u32 = 256;

/// The reduction module for `op` over elements of `d`; kernel `reduce`.
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

// Combines the block's (value, position) pairs in shared memory into sv[0], sk[0].
__device__ __forceinline__ void block_combine(C* sv, i64* sk, int tid) {
  __syncthreads();
  for (int s = RB / 2; s > 0; s >>= 1) {
    if (tid < s) {
      if constexpr (OP <= 1) {
        sv[tid] = add(sv[tid], sv[tid + s]);
      } else {
        const C x = sv[tid + s];
        const i64 kx = sk[tid + s];
        if (kx >= 0 && (sk[tid] < 0 || better(x, kx, sv[tid], sk[tid]))) { sv[tid] = x; sk[tid] = kx; }
      }
    }
    __syncthreads();
  }
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
