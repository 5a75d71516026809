//! CUDA C source generation. Every kernel is generated for one op and one
//! set of dtypes, compiled once by NVRTC and cached (see `nvrtc`).
//!
//! * [`elementwise`]: one module per op and dtypes with four kernels sharing
//!   the op's body: a vectorised contiguous path, a row path (fastest dim
//!   innermost, the coalesced outer dims decomposed once per row, vectorised
//!   where strides allow), a general strided path, and a shared-memory tiled
//!   path for operands whose fastest dim differs from the output's.
//! * [`ops`]: the op bodies (arithmetic with the CPU's semantics: wrapping
//!   integers, PyTorch's floor division, f16/bf16 computed in f32).
//! * [`reduce`]: sum/mean/max/min with indices.
//!
//! No CUDA header is included: half and bfloat16 conversions are inline PTX,
//! so compilation needs nothing but NVRTC and its builtins.

pub(crate) mod dimops;
pub(crate) mod elementwise;
pub(crate) mod ops;
pub(crate) mod optim;
pub(crate) mod reduce;
pub(crate) mod softmax_backward;
pub(crate) mod sort;
// session 79: the special functions' helpers
pub(crate) mod special;

use crate::dtype::DType;

/// Maximum number of (coalesced) dims a kernel accepts.
pub(crate) const MAXD: usize = 12;

/// Definitions shared by every module.
pub(crate) const PRELUDE: &str = r#"
typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef long long i64;
typedef unsigned long long u64;
#define MAXD 12
struct Meta { int nd; int tile; i64 outer; i64 size[MAXD]; i64 st[4][MAXD]; };
struct Params { double f0; double f1; i64 i0; i64 i1; u64 bits; int has0; int has1; };
__device__ __forceinline__ float h2f(u16 h) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
__device__ __forceinline__ u16 f2h(float f) { u16 h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }
__device__ __forceinline__ float bf2f(u16 h) { return __uint_as_float(((u32)h) << 16); }
__device__ __forceinline__ u16 f2bf(float f) { u16 h; asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }
template <class T, int N> struct alignas(sizeof(T) * N) Vec { T v[N]; };
template <class T> __device__ __forceinline__ bool isnan_(T x) { return x != x; }
template <class T> __device__ __forceinline__ T max_nan(T a, T b) {
  if (isnan_(a) || isnan_(b)) return isnan_(a) ? a : b;
  return b > a ? b : a;
}
// g * d/dx of GELU's tanh approximation at x (float or double).
template <class T> __device__ __forceinline__ T gelu_tanh_grad(T g, T x) {
  const T k = (T)0.79788456080286535588, c = (T)0.044715;
  const T t = tanh(k * (x + c * x * x * x));
  return g * ((T)0.5 * ((T)1 + t) + (T)0.5 * x * ((T)1 - t * t) * k * ((T)1 + (T)3 * c * x * x));
}
template <class T> __device__ __forceinline__ T min_nan(T a, T b) {
  if (isnan_(a) || isnan_(b)) return isnan_(a) ? a : b;
  return b < a ? b : a;
}
template <class T> __device__ __forceinline__ T clamp_nan(T v, bool h0, T lo, bool h1, T hi) {
  if (h0) v = max_nan(v, lo);
  if (h1) v = min_nan(v, hi);
  return v;
}
__device__ __forceinline__ float divfloorf(float a, float b) {
  if (b == 0.0f) return a / b;
  float m = fmodf(a, b);
  float d = (a - m) / b;
  if (m != 0.0f && ((b < 0.0f) != (m < 0.0f))) d -= 1.0f;
  if (d != 0.0f) { float fl = floorf(d); if (d - fl > 0.5f) fl += 1.0f; return fl; }
  return copysignf(0.0f, a / b);
}
__device__ __forceinline__ double divfloor(double a, double b) {
  if (b == 0.0) return a / b;
  double m = fmod(a, b);
  double d = (a - m) / b;
  if (m != 0.0 && ((b < 0.0) != (m < 0.0))) d -= 1.0;
  if (d != 0.0) { double fl = floor(d); if (d - fl > 0.5) fl += 1.0; return fl; }
  return copysign(0.0, a / b);
}
// Rounding to f16 / bf16 precision (`{r}` of the op templates: `_h`, `_bf`;
// `rnd` is the identity): PyTorch's f16/bf16 kernels of two tensors round
// the steps of trunc and floor division to the dtype.
__device__ __forceinline__ float rnd(float x) { return x; }
__device__ __forceinline__ double rnd(double x) { return x; }
__device__ __forceinline__ float rnd_h(float x) { return h2f(f2h(x)); }
__device__ __forceinline__ float rnd_bf(float x) { return bf2f(f2bf(x)); }
struct RndH { __device__ __forceinline__ float operator()(float x) const { return rnd_h(x); } };
struct RndBf { __device__ __forceinline__ float operator()(float x) const { return rnd_bf(x); } };
// divfloorf with every step rounded by R (RndH or RndBf).
template <class R> __device__ __forceinline__ float divfloorf_r(float a, float b) {
  R r;
  if (b == 0.0f) return a / b;
  const float m = r(fmodf(a, b));
  float d = r(r(a - m) / b);
  if (m != 0.0f && ((b < 0.0f) != (m < 0.0f))) d = r(d - 1.0f);
  if (d != 0.0f) { float fl = floorf(d); if (r(d - fl) > 0.5f) fl = r(fl + 1.0f); return fl; }
  return copysignf(0.0f, r(a / b));
}
__device__ __forceinline__ float divfloorf_h(float a, float b) { return divfloorf_r<RndH>(a, b); }
__device__ __forceinline__ float divfloorf_bf(float a, float b) { return divfloorf_r<RndBf>(a, b); }
template <class T, class U> __device__ __forceinline__ T wadd(T a, T b) { return (T)((U)a + (U)b); }
template <class T, class U> __device__ __forceinline__ T wsub(T a, T b) { return (T)((U)a - (U)b); }
template <class T, class U> __device__ __forceinline__ T wmul(T a, T b) { return (T)((U)a * (U)b); }
template <class T, class U> __device__ __forceinline__ T wneg(T a) { return (T)((U)0 - (U)a); }
template <class T, class U> __device__ __forceinline__ T sdiv(T a, T b) {
  if (b == 0) return 0;
  if (b == (T)-1) return wneg<T, U>(a);
  return a / b;
}
template <class T, class U> __device__ __forceinline__ T sdivfloor(T a, T b) {
  if (b == 0) return 0;
  if (b == (T)-1) return wneg<T, U>(a);
  T q = a / b;
  T r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) q = wsub<T, U>(q, (T)1);
  return q;
}
__device__ __forceinline__ u8 udiv(u8 a, u8 b) { return b == 0 ? (u8)0 : (u8)(a / b); }
// ----- session 74: Python's remainder and C's fmod (an integer divisor of 0 gives 0: refused before) -----
__device__ __forceinline__ float pyremf(float a, float b) {
  float m = fmodf(a, b);
  return (m != 0.0f && ((b < 0.0f) != (m < 0.0f))) ? m + b : m;
}
__device__ __forceinline__ double pyrem(double a, double b) {
  double m = fmod(a, b);
  return (m != 0.0 && ((b < 0.0) != (m < 0.0))) ? m + b : m;
}
template <class T> __device__ __forceinline__ T ifmod(T a, T b) {
  if (b == (T)0) return (T)0;
  if ((T)-1 < (T)0 && b == (T)-1) return (T)0;
  return (T)(a % b);
}
template <class T> __device__ __forceinline__ T irem(T a, T b) {
  T m = ifmod<T>(a, b);
  return (m != (T)0 && ((b < (T)0) != (m < (T)0))) ? (T)(m + b) : m;
}
// ----- issue 12: integer pow (wrapping; a negative exponent truncates 1 / b^n) -----
template <class T, class U> __device__ __forceinline__ T ipow(T b, T e) {
  if (e < (T)0) {
    if (b == (T)1) return (T)1;
    if (b == (T)0 - (T)1) return (e & (T)1) ? b : (T)1;
    return (T)0;
  }
  U r = 1, x = (U)b, n = (U)e;
  while (n != 0) { if (n & 1) r *= x; x *= x; n >>= 1; }
  return (T)r;
}
"#;

/// The C type elements of `d` are stored as.
pub(crate) fn storage_ty(d: DType) -> &'static str {
    match d {
        DType::F32 => "float",
        DType::F64 => "double",
        DType::F16 | DType::BF16 => "u16",
        DType::I32 => "int",
        DType::I64 => "i64",
        DType::U8 | DType::Bool => "u8",
    }
}

/// Expands a CUDA expression template (see `ops::table`) for dtype `d`
/// with operands `a` and `b`.
pub(crate) fn expand(template: &str, d: DType, a: &str, b: &str) -> String {
    let mut out = String::with_capacity(template.len() + a.len() + b.len());
    let mut rest = template;
    while let Some(i) = rest.find('{') {
        out.push_str(&rest[..i]);
        let tail = &rest[i..];
        let sub = match tail.get(..3) {
            Some("{a}") => Some(a),
            Some("{b}") => Some(b),
            Some("{c}") => Some(compute_ty(d)),
            Some("{u}") => Some(wrap_ty(d)),
            Some("{f}") => Some(if d == DType::F64 { "" } else { "f" }),
            Some("{r}") => Some(round_suffix(d)),
            _ => None,
        };
        match sub {
            Some(s) => {
                out.push_str(s);
                rest = &tail[3..];
            }
            None => {
                out.push('{');
                rest = &tail[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// The C type arithmetic on `d` is done in (the CPU's `Element::Acc`).
pub(crate) fn compute_ty(d: DType) -> &'static str {
    match d {
        DType::F32 | DType::F16 | DType::BF16 => "float",
        DType::F64 => "double",
        DType::I32 => "int",
        DType::I64 => "i64",
        DType::U8 => "u8",
        DType::Bool => "bool",
    }
}

/// The `{r}` suffix of `d`: the rounding helpers of f16 (`_h`) and bf16
/// (`_bf`) in [`PRELUDE`]; empty (`rnd`, the identity, and the unrounded
/// helpers) for the other dtypes.
pub(crate) fn round_suffix(d: DType) -> &'static str {
    match d {
        DType::F16 => "_h",
        DType::BF16 => "_bf",
        _ => "",
    }
}

/// The unsigned C type integer arithmetic of `d` wraps in.
pub(crate) fn wrap_ty(d: DType) -> &'static str {
    match d {
        DType::I64 => "u64",
        _ => "u32",
    }
}

/// `x` (a stored element of `d`) widened to the compute type.
pub(crate) fn load(d: DType, x: &str) -> String {
    match d {
        DType::F16 => format!("h2f({x})"),
        DType::BF16 => format!("bf2f({x})"),
        DType::Bool => format!("({x} != 0)"),
        _ => format!("({x})"),
    }
}

/// `v` (a compute-type value of `d`) rounded to the stored type.
pub(crate) fn store(d: DType, v: &str) -> String {
    match d {
        DType::F16 => format!("f2h({v})"),
        DType::BF16 => format!("f2bf({v})"),
        DType::Bool => format!("((u8)(({v}) ? 1 : 0))"),
        _ => format!("(({})({v}))", storage_ty(d)),
    }
}

/// Short dtype name for kernel keys.
pub(crate) fn tag(d: DType) -> &'static str {
    d.name()
}
