//! Fused optimizer steps: `adam_step` updates a parameter and its two moment
//! estimates from its gradient in one pass (read p, g, m, v; write p, m, v),
//! with 16-byte vectors when every operand is aligned. f16/bf16 compute in
//! f32 and round once.

use super::{compute_ty, load, storage_ty, store, PRELUDE};
use crate::dtype::DType;

/// The module for parameters of the float dtype `d`: kernel `adam_step`.
pub(crate) fn source(d: DType) -> String {
    let vec = 16 / d.size();
    let sq = if d == DType::F64 { "sqrt" } else { "sqrtf" };
    let mut s = String::from(PRELUDE);
    s.push_str(&format!(
        "typedef {t} T;\ntypedef {c} C;\nconstexpr int V = {vec};\n\
         __device__ __forceinline__ C ld(T x) {{ return {ld}; }}\n\
         __device__ __forceinline__ T st(C v) {{ return {st}; }}\n\
         __device__ __forceinline__ C csqrt(C x) {{ return {sq}(x); }}\n",
        t = storage_ty(d),
        c = compute_ty(d),
        ld = load(d, "x"),
        st = store(d, "v"),
    ));
    s.push_str(TEMPLATE);
    s
}

const TEMPLATE: &str = r#"
struct Adam { C decay, one_b1, b2, one_b2, c2_sqrt, eps, step_size; int decays; };
__device__ __forceinline__ void adam1(T& p, T g, T& m, T& v, const Adam& a) {
  const C gr = ld(g);
  C pr = ld(p);
  if (a.decays) pr *= a.decay;
  C mr = ld(m);
  mr = mr + a.one_b1 * (gr - mr);
  const C vr = a.b2 * ld(v) + a.one_b2 * (gr * gr);
  const C denom = csqrt(vr) / a.c2_sqrt + a.eps;
  pr = pr - a.step_size * (mr / denom);
  m = st(mr);
  v = st(vr);
  p = st(pr);
}
// Grid-stride over n elements; `vec`: every base is 16-byte aligned, so the
// first n / V * V elements go by vectors of V.
extern "C" __global__ void adam_step(char* pp, const char* gp, char* mp, char* vp, i64 n,
    double decay, double one_b1, double b2, double one_b2, double c2_sqrt, double eps,
    double step_size, int decays, int vec) {
  const Adam a = {(C)decay, (C)one_b1, (C)b2, (C)one_b2, (C)c2_sqrt, (C)eps, (C)step_size, decays};
  T* p = reinterpret_cast<T*>(pp);
  const T* g = reinterpret_cast<const T*>(gp);
  T* m = reinterpret_cast<T*>(mp);
  T* v = reinterpret_cast<T*>(vp);
  const i64 tid = (i64)blockIdx.x * blockDim.x + threadIdx.x;
  const i64 stride = (i64)gridDim.x * blockDim.x;
  i64 done = 0;
  if (vec) {
    const i64 nv = n / V;
    for (i64 i = tid; i < nv; i += stride) {
      Vec<T, V> pv = reinterpret_cast<Vec<T, V>*>(p)[i];
      const Vec<T, V> gv = reinterpret_cast<const Vec<T, V>*>(g)[i];
      Vec<T, V> mv = reinterpret_cast<Vec<T, V>*>(m)[i];
      Vec<T, V> vv = reinterpret_cast<Vec<T, V>*>(v)[i];
#pragma unroll
      for (int j = 0; j < V; j++) adam1(pv.v[j], gv.v[j], mv.v[j], vv.v[j], a);
      reinterpret_cast<Vec<T, V>*>(p)[i] = pv;
      reinterpret_cast<Vec<T, V>*>(m)[i] = mv;
      reinterpret_cast<Vec<T, V>*>(v)[i] = vv;
    }
    done = nv * V;
  }
  for (i64 i = done + tid; i < n; i += stride) adam1(p[i], g[i], m[i], v[i], a);
}
"#;
