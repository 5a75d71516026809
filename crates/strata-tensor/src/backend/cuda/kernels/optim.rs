//! Fused optimizer steps: `adam_step` updates a parameter and its two moment
//! estimates from its gradient in one pass (read p, g, m, v; write p, m, v;
//! with AMSGrad also read and write the running maximum x),
//! with 16-byte vectors when every operand is aligned. f16/bf16 compute in
//! f32 and round once. `adam_step_list` does the same for up to `LIST`
//! tensors in one launch: each block takes one chunk of one tensor.

use super::{compute_ty, load, storage_ty, store, PRELUDE};
use crate::dtype::DType;

/// Tensors per launch of `adam_step_list` (its by-value argument stays
/// under the 4 KiB of kernel parameters).
pub(crate) const LIST: usize = 64;

/// The module for parameters of the float dtype `d`: kernels `adam_step`
/// and `adam_step_list`.
pub(crate) fn source(d: DType) -> String {
    let vec = 16 / d.size();
    let (sq, fm) = if d == DType::F64 {
        ("sqrt", "fma")
    } else {
        ("sqrtf", "fmaf")
    };
    let mut s = String::from(PRELUDE);
    s.push_str(&format!(
        "typedef {t} T;\ntypedef {c} C;\nconstexpr int V = {vec};\n\
         __device__ __forceinline__ C ld(T x) {{ return {ld}; }}\n\
         __device__ __forceinline__ T st(C v) {{ return {st}; }}\n\
         __device__ __forceinline__ C csqrt(C x) {{ return {sq}(x); }}\n\
         __device__ __forceinline__ C cfma(C a, C b, C c) {{ return {fm}(a, b, c); }}\n",
        t = storage_ty(d),
        c = compute_ty(d),
        ld = load(d, "x"),
        st = store(d, "v"),
    ));
    s.push_str(&format!("#define LIST {LIST}\n"));
    s.push_str(TEMPLATE);
    s
}

const TEMPLATE: &str = r#"
// The hyper-parameters as the host passes them (`AdamArgs` there), and as
// the update computes with them. `maximize`: the step uses -g (PyTorch's
// `maximize=True`); `amsgrad`: a fifth operand holds the running maximum of
// the second moment, whose root divides instead of v's.
struct AdamArgs {
  double decay, one_b1, b2, one_b2, c2_sqrt, eps, step_size;
  int decays, maximize, amsgrad;
};
// `one_b1_m1` and `small` as the CPU kernel derives them (in C): PyTorch's
// `lerp` weight minus one, and whether the weight is below 0.5 in size.
struct Adam {
  C decay, one_b1, one_b1_m1, b2, one_b2, c2_sqrt, eps, step_size;
  int small, decays, maximize, amsgrad;
};
__device__ __forceinline__ Adam adam_of(const AdamArgs& h) {
  const C w = (C)h.one_b1;
  return {(C)h.decay, w, w - (C)1, (C)h.b2, (C)h.one_b2, (C)h.c2_sqrt, (C)h.eps, (C)h.step_size,
          (w < (C)0 ? -w : w) < (C)0.5, h.decays, h.maximize, h.amsgrad};
}
// max(a, b), NaN if either is (PyTorch's `maximum`).
__device__ __forceinline__ C max_nan(C a, C b) { return (a != a) ? a : ((b != b || b > a) ? b : a); }
// One element; `x` (the running maximum of v) is read and written only with
// `a.amsgrad`.
__device__ __forceinline__ void adam1(T& p, T g, T& m, T& v, T& x, const Adam& a) {
  C gr = ld(g);
  if (a.maximize) gr = -gr;
  C pr = ld(p);
  if (a.decays) pr *= a.decay;
  // The CPU kernel's expressions and roundings (PyTorch's fused CPU kernel:
  // backend/cpu/optim.rs), each multiply-add explicit (NVRTC runs with
  // --fmad=false, so nothing else is contracted): the same bits as the CPU.
  const C m0 = ld(m);
  const C d = gr - m0;
  const C mr = a.small ? cfma(a.one_b1, d, m0) : cfma(a.one_b1_m1, d, gr);
  const C vr = cfma(a.one_b2 * gr, gr, ld(v) * a.b2);
  C root_of = vr;
  if (a.amsgrad) {
    // The maximum with the unrounded new v (f32 for f16/bf16), used
    // unrounded; the stored copy is rounded (PyTorch's fused kernels).
    root_of = max_nan(ld(x), vr);
    x = st(root_of);
  }
  const C denom = csqrt(root_of) / a.c2_sqrt + a.eps;
  pr = pr - (a.step_size * mr) / denom;
  m = st(mr);
  v = st(vr);
  p = st(pr);
}
// Updates elements [0, n) of p, g, m, v (and x with AMSGrad; otherwise x
// is never touched and may be null): this thread takes `first`, then every
// `step`-th. `vec`: every base is 16-byte aligned, so the first n / V * V
// elements go by vectors of V.
__device__ __forceinline__ void adam_range(T* p, const T* g, T* m, T* v, T* x, i64 n, i64 first,
    i64 step, bool vec, const Adam& a) {
  i64 done = 0;
  if (vec) {
    const i64 nv = n / V;
    for (i64 i = first; i < nv; i += step) {
      Vec<T, V> pv = reinterpret_cast<Vec<T, V>*>(p)[i];
      const Vec<T, V> gv = reinterpret_cast<const Vec<T, V>*>(g)[i];
      Vec<T, V> mv = reinterpret_cast<Vec<T, V>*>(m)[i];
      Vec<T, V> vv = reinterpret_cast<Vec<T, V>*>(v)[i];
      Vec<T, V> xv;
      if (a.amsgrad) xv = reinterpret_cast<Vec<T, V>*>(x)[i];
#pragma unroll
      for (int j = 0; j < V; j++) adam1(pv.v[j], gv.v[j], mv.v[j], vv.v[j], xv.v[j], a);
      reinterpret_cast<Vec<T, V>*>(p)[i] = pv;
      reinterpret_cast<Vec<T, V>*>(m)[i] = mv;
      reinterpret_cast<Vec<T, V>*>(v)[i] = vv;
      if (a.amsgrad) reinterpret_cast<Vec<T, V>*>(x)[i] = xv;
    }
    done = nv * V;
  }
  for (i64 i = done + first; i < n; i += step) {
    T unused;
    adam1(p[i], g[i], m[i], v[i], a.amsgrad ? x[i] : unused, a);
  }
}
// One tensor, grid-stride.
extern "C" __global__ void adam_step(char* pp, const char* gp, char* mp, char* vp, char* xp,
    i64 n, AdamArgs h, int vec) {
  const i64 tid = (i64)blockIdx.x * blockDim.x + threadIdx.x;
  const i64 stride = (i64)gridDim.x * blockDim.x;
  adam_range(reinterpret_cast<T*>(pp), reinterpret_cast<const T*>(gp), reinterpret_cast<T*>(mp),
             reinterpret_cast<T*>(vp), reinterpret_cast<T*>(xp), n, tid, stride, vec != 0,
             adam_of(h));
}
// Up to LIST tensors, laid out as `AdamList` on the host: tensor t owns
// blocks [first_block[t], first_block[t + 1]), each `chunk` elements (a
// multiple of V) from the tensor's start.
// The table is read in place from parameter memory where the compiler and
// the device allow it (CUDA 11.7+, compute capability 7.0+); elsewhere it
// is an ordinary by-value parameter.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700 && \
    (__CUDACC_VER_MAJOR__ > 11 || (__CUDACC_VER_MAJOR__ == 11 && __CUDACC_VER_MINOR__ >= 7))
#define GRID_CONST __grid_constant__
#else
#define GRID_CONST
#endif
struct AdamList {
  char* p[LIST];
  const char* g[LIST];
  char* m[LIST];
  char* v[LIST];
  char* x[LIST];
  i64 n[LIST];
  int first_block[LIST + 1];
  int count;
};
extern "C" __global__ void adam_step_list(const GRID_CONST AdamList L, i64 chunk, AdamArgs h) {
  const int b = blockIdx.x;
  int t = 0;
  while (t + 1 < L.count && b >= L.first_block[t + 1]) t++;
  const i64 start = (i64)(b - L.first_block[t]) * chunk;
  const i64 rest = L.n[t] - start;
  const i64 len = rest < chunk ? rest : chunk;
  T* p = reinterpret_cast<T*>(L.p[t]) + start;
  const T* g = reinterpret_cast<const T*>(L.g[t]) + start;
  T* m = reinterpret_cast<T*>(L.m[t]) + start;
  T* v = reinterpret_cast<T*>(L.v[t]) + start;
  T* x = h.amsgrad ? reinterpret_cast<T*>(L.x[t]) + start : nullptr;
  const bool vec = ((reinterpret_cast<size_t>(p) | reinterpret_cast<size_t>(g) |
                     reinterpret_cast<size_t>(m) | reinterpret_cast<size_t>(v) |
                     reinterpret_cast<size_t>(x)) & 15) == 0;
  adam_range(p, g, m, v, x, len, threadIdx.x, blockDim.x, vec, adam_of(h));
}
"#;
