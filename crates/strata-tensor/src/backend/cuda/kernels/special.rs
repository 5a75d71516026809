//! Session 79: the CUDA C helpers of the special element-wise ops
//! (`ops::special`), appended to an element-wise module's source only when
//! its body names one (every helper is `sp_`-prefixed), so other kernels
//! compile as before.
//!
//! CUDA's device library has `lgamma`, `erfinv`, `erfcx`, `normcdfinv`,
//! `hypot`, `copysign`, `nextafter`, `fmax`/`fmin`, which the table's
//! templates call directly. What it lacks is written here with the
//! algorithms of the CPU kernels (`ops::special_math`, after PyTorch's
//! `ATen/native/Math.h`): Cephes' digamma, trigamma, Hurwitz zeta and the
//! Chebyshev series of `i0`/`i0e`/`i1`/`i1e` (Cephes Math Library,
//! Copyright (c) 2018 Steven Moshier, 3-clause BSD licence), evaluated in
//! the compute type (f32 for f32/f16/bf16, as PyTorch's CUDA kernels do),
//! and `nextafter` stepping the bits of f16/bf16.

/// The helpers (after `PRELUDE`).
pub(crate) const SPECIAL_PRELUDE: &str = r#"
// ----- session 79: special functions (ops::special) -----
__device__ __forceinline__ double sp_inf() { return __longlong_as_double(0x7ff0000000000000ULL); }
__device__ __forceinline__ double sp_nan() { return __longlong_as_double(0x7ff8000000000000ULL); }
__device__ __forceinline__ float sp_exp(float x) { return expf(x); }
__device__ __forceinline__ double sp_exp(double x) { return exp(x); }
__device__ __forceinline__ float sp_log(float x) { return logf(x); }
__device__ __forceinline__ double sp_log(double x) { return log(x); }
__device__ __forceinline__ float sp_log1p(float x) { return log1pf(x); }
__device__ __forceinline__ double sp_log1p(double x) { return log1p(x); }
__device__ __forceinline__ float sp_sqrt(float x) { return sqrtf(x); }
__device__ __forceinline__ double sp_sqrt(double x) { return sqrt(x); }
__device__ __forceinline__ float sp_sin(float x) { return sinf(x); }
__device__ __forceinline__ double sp_sin(double x) { return sin(x); }
__device__ __forceinline__ float sp_fabs(float x) { return fabsf(x); }
__device__ __forceinline__ double sp_fabs(double x) { return fabs(x); }
__device__ __forceinline__ float sp_trunc(float x) { return truncf(x); }
__device__ __forceinline__ double sp_trunc(double x) { return trunc(x); }
__device__ __forceinline__ float sp_floor(float x) { return floorf(x); }
__device__ __forceinline__ double sp_floor(double x) { return floor(x); }
__device__ __forceinline__ float sp_pow(float x, float y) { return powf(x, y); }
__device__ __forceinline__ double sp_pow(double x, double y) { return pow(x, y); }
__device__ __forceinline__ float sp_erfc(float x) { return erfcf(x); }
__device__ __forceinline__ double sp_erfc(double x) { return erfc(x); }
__device__ __forceinline__ float sp_erfcx(float x) { return erfcxf(x); }
__device__ __forceinline__ double sp_erfcx(double x) { return erfcx(x); }
__device__ __forceinline__ float sp_copysign(float x, float y) { return copysignf(x, y); }
__device__ __forceinline__ double sp_copysign(double x, double y) { return copysign(x, y); }
__device__ __forceinline__ float sp_frexp(float x, int* e) { return frexpf(x, e); }
__device__ __forceinline__ double sp_frexp(double x, int* e) { return frexp(x, e); }

// digamma for x > 0: recurrence up to 10, then the asymptotic series.
__constant__ double SP_DIGAMMA_A[7] = {
  8.33333333333333333333E-2, -2.10927960927960927961E-2, 7.57575757575757575758E-3,
  -4.16666666666666666667E-3, 3.96825396825396825397E-3, -8.33333333333333333333E-3,
  8.33333333333333333333E-2};
template <class T> __device__ T sp_digamma_pos(T x) {
  T result = (T)0;
  while (x < (T)10) { result -= (T)1 / x; x += (T)1; }
  if (x == (T)10) return result + (T)2.25175258906672110764;
  T y = (T)0;
  if (x < (T)1.0e17) {
    const T z = (T)1 / (x * x);
    T p = (T)0;
    for (int i = 0; i < 7; i++) p = p * z + (T)SP_DIGAMMA_A[i];
    y = z * p;
  }
  return result + sp_log(x) - ((T)0.5 / x) - y;
}
template <class T> __device__ T sp_digamma(T x) {
  if (x == (T)0) return sp_copysign((T)sp_inf(), -x);
  if (x < (T)0) {
    if (x == sp_trunc(x)) return (T)sp_nan();
    // pi / tan(pi r) of the fractional part r, in double.
    const double r = (double)x - trunc((double)x);
    const T q = (T)(3.14159265358979323846 / tan(3.14159265358979323846 * r));
    return sp_digamma_pos<T>((T)1 - x) - q;
  }
  return sp_digamma_pos<T>(x);
}
template <class T> __device__ T sp_trigamma(T x) {
  const T pi = (T)3.14159265358979323846;
  T sign = (T)1, result = (T)0;
  if (x < (T)0.5) {
    sign = (T)-1;
    const T s = sp_sin(pi * x);
    result -= (pi * pi) / (s * s);
    x = (T)1 - x;
  }
  for (int i = 0; i < 6; ++i) { result += (T)1 / (x * x); x += (T)1; }
  const T ixx = (T)1 / (x * x);
  result += ((T)1 + (T)1 / ((T)2 * x) + ixx * ((T)1 / (T)6 - ixx * ((T)1 / (T)30 - ixx * ((T)1 / (T)42)))) / x;
  return sign * result;
}
// The Hurwitz zeta function zeta(x, q) (Euler-Maclaurin, Cephes).
__constant__ double SP_ZETA_A[12] = {
  12.0, -720.0, 30240.0, -1209600.0, 47900160.0, -1.8924375803183791606e9, 7.47242496e10,
  -2.950130727918164224e12, 1.1646782814350067249e14, -4.5979787224074726105e15,
  1.8152105401943546773e17, -7.1661652561756670113e18};
template <class T> __device__ T sp_zeta(T x, T q) {
  const T machep = (T)1.11022302462515654042E-16;
  if (x == (T)1) return (T)sp_inf();
  if (x < (T)1) return (T)sp_nan();
  if (q <= (T)0) {
    if (q == sp_floor(q)) return (T)sp_inf();
    if (x != sp_floor(x)) return (T)sp_nan();
  }
  T s = sp_pow(q, -x), a = q, b = (T)0;
  int i = 0;
  while (i < 9 || a <= (T)9) {
    i += 1; a += (T)1; b = sp_pow(a, -x); s += b;
    if (-machep * s < b && b < machep * s) return s;
  }
  const T w = a;
  s += b * w / (x - (T)1);
  s -= (T)0.5 * b;
  a = (T)1;
  T k = (T)0;
  for (i = 0; i < 12; i++) {
    a *= x + k; b /= w;
    T t = a * b / (T)SP_ZETA_A[i];
    s = s + t;
    t = sp_fabs(t / s);
    if (t < machep) return s;
    k += (T)1; a *= x + k; b /= w; k += (T)1;
  }
  return s;
}
// Cephes' Chebyshev series (zero order last) and the tables of i0e/i1e.
template <class T> __device__ T sp_chbevl(T x, const double* c, int n) {
  T b0 = (T)c[0], b1 = (T)0, b2 = (T)0;
  for (int i = 1; i < n; ++i) { b2 = b1; b1 = b0; b0 = x * b1 - b2 + (T)c[i]; }
  return (T)0.5 * (b0 - b2);
}
__constant__ double SP_I0E_A[30] = {
  -4.41534164647933937950E-18, 3.33079451882223809783E-17, -2.43127984654795469359E-16,
  1.71539128555513303061E-15, -1.16853328779934516808E-14, 7.67618549860493561688E-14,
  -4.85644678311192946090E-13, 2.95505266312963983461E-12, -1.72682629144155570723E-11,
  9.67580903537323691224E-11, -5.18979560163526290666E-10, 2.65982372468238665035E-9,
  -1.30002500998624804212E-8, 6.04699502254191894932E-8, -2.67079385394061173391E-7,
  1.11738753912010371815E-6, -4.41673835845875056359E-6, 1.64484480707288970893E-5,
  -5.75419501008210370398E-5, 1.88502885095841655729E-4, -5.76375574538582365885E-4,
  1.63947561694133579842E-3, -4.32430999505057594430E-3, 1.05464603945949983183E-2,
  -2.37374148058994688156E-2, 4.93052842396707084878E-2, -9.49010970480476444210E-2,
  1.71620901522208775349E-1, -3.04682672343198398683E-1, 6.76795274409476084995E-1};
__constant__ double SP_I0E_B[25] = {
  -7.23318048787475395456E-18, -4.83050448594418207126E-18, 4.46562142029675999901E-17,
  3.46122286769746109310E-17, -2.82762398051658348494E-16, -3.42548561967721913462E-16,
  1.77256013305652638360E-15, 3.81168066935262242075E-15, -9.55484669882830764870E-15,
  -4.15056934728722208663E-14, 1.54008621752140982691E-14, 3.85277838274214270114E-13,
  7.18012445138366623367E-13, -1.79417853150680611778E-12, -1.32158118404477131188E-11,
  -3.14991652796324136454E-11, 1.18891471078464383424E-11, 4.94060238822496958910E-10,
  3.39623202570838634515E-9, 2.26666899049817806459E-8, 2.04891858946906374183E-7,
  2.89137052083475648297E-6, 6.88975834691682398426E-5, 3.36911647825569408990E-3,
  8.04490411014108831608E-1};
__constant__ double SP_I1E_A[29] = {
  2.77791411276104639959E-18, -2.11142121435816608115E-17, 1.55363195773620046921E-16,
  -1.10559694773538630805E-15, 7.60068429473540693410E-15, -5.04218550472791168711E-14,
  3.22379336594557470981E-13, -1.98397439776494371520E-12, 1.17361862988909016308E-11,
  -6.66348972350202774223E-11, 3.62559028155211703701E-10, -1.88724975172282928790E-9,
  9.38153738649577178388E-9, -4.44505912879632808065E-8, 2.00329475355213526229E-7,
  -8.56872026469545474066E-7, 3.47025130813767847674E-6, -1.32731636560394358279E-5,
  4.78156510755005422638E-5, -1.61760815825896745588E-4, 5.12285956168575772895E-4,
  -1.51357245063125314899E-3, 4.15642294431288815669E-3, -1.05640848946261981558E-2,
  2.47264490306265168283E-2, -5.29459812080949914269E-2, 1.02643658689847095384E-1,
  -1.76416518357834055153E-1, 2.52587186443633654823E-1};
__constant__ double SP_I1E_B[25] = {
  7.51729631084210481353E-18, 4.41434832307170791151E-18, -4.65030536848935832153E-17,
  -3.20952592199342395980E-17, 2.96262899764595013876E-16, 3.30820231092092828324E-16,
  -1.88035477551078244854E-15, -3.81440307243700780478E-15, 1.04202769841288027642E-14,
  4.27244001671195135429E-14, -2.10154184277266431302E-14, -4.08355111109219731823E-13,
  -7.19855177624590851209E-13, 2.03562854414708950722E-12, 1.41258074366137813316E-11,
  3.25260358301548823856E-11, -1.89749581235054123450E-11, -5.58974346219658380687E-10,
  -3.83538038596423702205E-9, -2.63146884688951950684E-8, -2.51223623787020892529E-7,
  -3.88256480887769039346E-6, -1.10588938762623716291E-4, -9.76109749136146840777E-3,
  7.78576235018280120474E-1};
template <class T> __device__ T sp_i0e(T v) {
  const T x = sp_fabs(v);
  if (x <= (T)8) return sp_chbevl<T>(x / (T)2 - (T)2, SP_I0E_A, 30);
  return sp_chbevl<T>((T)32 / x - (T)2, SP_I0E_B, 25) / sp_sqrt(x);
}
template <class T> __device__ T sp_i0(T v) {
  const T x = sp_fabs(v);
  if (x <= (T)8) return sp_exp(x) * sp_chbevl<T>(x / (T)2 - (T)2, SP_I0E_A, 30);
  return sp_exp(x) * sp_chbevl<T>((T)32 / x - (T)2, SP_I0E_B, 25) / sp_sqrt(x);
}
template <class T> __device__ T sp_i1e(T v) {
  const T x = sp_fabs(v);
  const T out = x <= (T)8 ? sp_chbevl<T>(x / (T)2 - (T)2, SP_I1E_A, 29) * x
                          : sp_chbevl<T>((T)32 / x - (T)2, SP_I1E_B, 25) / sp_sqrt(x);
  return v < (T)0 ? -out : out;
}
template <class T> __device__ T sp_i1(T v) {
  const T x = sp_fabs(v);
  const T out = x <= (T)8 ? sp_exp(x) * x * sp_chbevl<T>(x / (T)2 - (T)2, SP_I1E_A, 29)
                          : sp_exp(x) * sp_chbevl<T>((T)32 / x - (T)2, SP_I1E_B, 25) / sp_sqrt(x);
  return v < (T)0 ? -out : out;
}
template <class T> __device__ T sp_sinc(T x) {
  if (x == (T)0) return (T)1;
  const T p = (T)3.14159265358979323846 * x;
  return sp_sin(p) / p;
}
template <class T> __device__ T sp_entr(T x) {
  if (x != x) return x;
  if (x > (T)0) return -x * sp_log(x);
  if (x == (T)0) return (T)0;
  return -(T)sp_inf();
}
template <class T> __device__ T sp_log_ndtr(T x) {
  const T t = x * (T)0.70710678118654752440;
  if (x < (T)-1) return sp_log(sp_erfcx(-t) / (T)2) - t * t;
  return sp_log1p(-sp_erfc(t) / (T)2);
}
template <class T> __device__ T sp_frexp_m(T x) {
  if (x == (T)0 || !(x - x == (T)0)) return x;
  int e;
  return sp_frexp(x, &e);
}
template <class T> __device__ T sp_frexp_e(T x) {
  if (x == (T)0 || !(x - x == (T)0)) return (T)0;
  int e;
  sp_frexp(x, &e);
  return (T)e;
}
template <class T> __device__ T sp_xlog1py(T a, T b) {
  if (b != b) return (T)sp_nan();
  if (a == (T)0) return (T)0;
  return a * sp_log1p(b);
}
template <class T> __device__ T sp_logit(T x, T eps) {
  if (eps >= (T)0) {
    const T lo = eps, hi = (T)1 - eps;
    x = x < lo ? lo : (x > hi ? hi : x);
  }
  return x == (T)1 ? (T)sp_inf() : sp_log(x / ((T)1 - x));
}
__device__ __forceinline__ float sp_nextafterf(float a, float b) { return nextafterf(a, b); }
__device__ __forceinline__ double sp_nextafter(double a, double b) { return nextafter(a, b); }
// One step of a 16-bit float pattern (c10::nextafter of Half/BFloat16).
__device__ __forceinline__ u16 sp_next16(u16 ua, u16 ub, bool a_nan, bool b_nan, bool* pass) {
  *pass = false;
  if (a_nan || b_nan) { *pass = true; return 0; }
  if (ua == ub) return ua;
  const u16 sign = 0x8000, abs_a = ua & 0x7fff, abs_b = ub & 0x7fff;
  if (abs_a == 0) {
    if (abs_b == 0) return ub;
    return (u16)((ub & sign) | 1);
  }
  if (abs_a > abs_b || ((ua ^ ub) & sign)) return (u16)(ua - 1);
  return (u16)(ua + 1);
}
__device__ __forceinline__ float sp_nextafterf_h(float a, float b) {
  bool pass;
  const u16 r = sp_next16(f2h(a), f2h(b), a != a, b != b, &pass);
  return pass ? a + b : h2f(r);
}
__device__ __forceinline__ float sp_nextafterf_bf(float a, float b) {
  bool pass;
  const u16 r = sp_next16(f2bf(a), f2bf(b), a != a, b != b, &pass);
  return pass ? a + b : bf2f(r);
}
// Integer gcd/lcm and shifts with PyTorch's rules (u8, int, i64).
template <class T> struct sp_int;
template <> struct sp_int<u8> { typedef u8 U; typedef signed char S; };
template <> struct sp_int<int> { typedef u32 U; typedef int S; };
template <> struct sp_int<i64> { typedef u64 U; typedef i64 S; };
template <class T> __device__ T sp_abs(T v) { return (T)((typename sp_int<T>::S)v < 0 && (T)-1 < (T)0 ? (T)((typename sp_int<T>::U)0 - (typename sp_int<T>::U)v) : v); }
template <class T> __device__ T sp_gcd(T a, T b) {
  a = sp_abs<T>(a); b = sp_abs<T>(b);
  while (a != (T)0) {
    const T c = a;
    a = (b == (T)(((typename sp_int<T>::U)1) << (sizeof(T) * 8 - 1)) && a == (T)-1) ? (T)0 : (T)(b % a);
    b = c;
  }
  return b;
}
template <class T> __device__ T sp_lcm(T a, T b) {
  const T g = sp_gcd<T>(a, b);
  if (g == (T)0) return (T)0;
  const T q = (g == (T)-1) ? (T)((typename sp_int<T>::U)0 - (typename sp_int<T>::U)a) : (T)(a / g);
  return sp_abs<T>((T)((typename sp_int<T>::U)q * (typename sp_int<T>::U)b));
}
template <class T> __device__ T sp_shl(T a, T b) {
  const i64 bits = (i64)sizeof(T) * 8;
  if ((typename sp_int<T>::S)b < 0 || (i64)b >= bits) return (T)0;
  return (T)((typename sp_int<T>::U)a << (int)b);
}
template <class T> __device__ T sp_shr(T a, T b) {
  const bool is_signed = (T)-1 < (T)0;
  const i64 max = (i64)sizeof(T) * 8 - (is_signed ? 1 : 0);
  const int s = ((typename sp_int<T>::S)b < 0 || (i64)b >= max) ? (int)max : (int)b;
  if (!is_signed && s >= (int)(sizeof(T) * 8)) return (T)0;
  return (T)(a >> s);
}
"#;

#[cfg(test)]
mod tests {
    use super::super::{elementwise as ew, ops, storage_ty};
    use crate::backend::{BinaryOp, UnaryFn, UnaryOp};
    use crate::dtype::DType;

    /// The session's unary rows and the dtypes their kernels serve.
    const UNARY: [UnaryFn; 16] = [
        UnaryFn::Erfinv,
        UnaryFn::Lgamma,
        UnaryFn::Digamma,
        UnaryFn::Trigamma,
        UnaryFn::I0,
        UnaryFn::I0e,
        UnaryFn::I1,
        UnaryFn::I1e,
        UnaryFn::Sinc,
        UnaryFn::Entr,
        UnaryFn::Ndtr,
        UnaryFn::Ndtri,
        UnaryFn::LogNdtr,
        UnaryFn::Erfcx,
        UnaryFn::FrexpMantissa,
        UnaryFn::FrexpExponent,
    ];
    const FLOATS: [DType; 4] = [DType::F32, DType::F64, DType::F16, DType::BF16];
    const INTS: [DType; 3] = [DType::I32, DType::I64, DType::U8];

    /// Every module source of the session's ops: (key, source).
    fn sources() -> Vec<(String, String)> {
        let mut out = Vec::new();
        let mut add = |key: String, tys: [&str; 4], nin: usize, body: String, d: DType| {
            let sizes = [d.size(); 4];
            out.push((key, ew::source(tys, nin, 1, &body, &sizes[..=nin])));
        };
        for f in UNARY {
            for d in FLOATS {
                let t = storage_ty(d);
                let body = ops::unary(UnaryOp::Map(f), d);
                add(
                    format!("{}_{}", f.key(), d.name()),
                    [t, t, "u8", "u8"],
                    1,
                    body,
                    d,
                );
            }
        }
        let float_ops = [
            BinaryOp::Hypot,
            BinaryOp::Copysign,
            BinaryOp::Nextafter,
            BinaryOp::Fmax,
            BinaryOp::Fmin,
            BinaryOp::Xlog1py,
            BinaryOp::Heaviside,
            BinaryOp::Zeta,
            BinaryOp::Logit,
        ];
        let int_ops = [
            BinaryOp::Gcd,
            BinaryOp::Lcm,
            BinaryOp::ShiftLeft,
            BinaryOp::ShiftRight,
            BinaryOp::Fmax,
            BinaryOp::Fmin,
            BinaryOp::Heaviside,
        ];
        let cases = float_ops
            .iter()
            .flat_map(|&op| FLOATS.map(|d| (op, d)))
            .chain(int_ops.iter().flat_map(|&op| INTS.map(|d| (op, d))))
            .chain(
                [BinaryOp::Fmax, BinaryOp::Fmin, BinaryOp::Heaviside].map(|op| (op, DType::Bool)),
            );
        for (op, d) in cases {
            let t = storage_ty(d);
            for scalar in [false, true] {
                let body = ops::binary(op, d, scalar);
                let (tys, nin) = if scalar {
                    ([t, t, "u8", "u8"], 1)
                } else {
                    ([t, t, t, "u8"], 2)
                };
                add(format!("{op:?}_{}_{scalar}", d.name()), tys, nin, body, d);
            }
        }
        out
    }

    #[test]
    fn every_special_kernel_names_its_helpers() {
        let all = sources();
        assert_eq!(all.len(), 16 * 4 + 9 * 4 * 2 + 7 * 3 * 2 + 3 * 2);
        for (key, src) in &all {
            // A helper the body calls is defined (the prelude is included).
            let body = src.split("apply(").nth(1).unwrap_or("");
            if body.contains("sp_") {
                assert!(src.contains("sp_digamma_pos"), "{key}: no special prelude");
            }
        }
        // Other kernels do not carry the helpers.
        let add = ops::binary(BinaryOp::Add, DType::F32, false);
        assert!(!ew::source(["float"; 4], 2, 1, &add, &[4, 4, 4]).contains("sp_digamma"));
    }

    /// Every op body, as one program: each body a device function of its
    /// own (the bodies read `x1`, `x2` and `prm` and name the storage types
    /// explicitly), all called from one kernel so that each is compiled,
    /// after `PRELUDE` and the helpers. Plus two whole element-wise modules
    /// (`ew::source`) to check that the helpers are included where needed.
    fn program() -> (String, Vec<String>) {
        let mut fns = String::new();
        let mut calls = String::new();
        let mut keys = Vec::new();
        for (k, (key, src)) in sources().into_iter().enumerate() {
            let body_start = src
                .find("apply(T1 x1, T2 x2, T3 x3, const Params& prm) {")
                .unwrap();
            let head = &src[..body_start];
            let ty = |name: &str| -> String {
                let tag = "typedef ";
                let line = head
                    .lines()
                    .rev()
                    .find(|l| l.starts_with(tag) && l.ends_with(&format!(" {name};")))
                    .unwrap();
                line[tag.len()..line.len() - name.len() - 2].to_string()
            };
            let rest = &src[body_start..];
            let open = rest.find('{').unwrap();
            let close = rest.find(" }\n").unwrap();
            let body = &rest[open + 1..close];
            fns.push_str(&format!(
                "__device__ {} f{k}({} x1, {} x2, {} x3, const Params& prm) {{ {body} }}\n",
                ty("T0"),
                ty("T1"),
                ty("T2"),
                ty("T3")
            ));
            calls.push_str(&format!(
                "  out[{k}] = (double)f{k}(({})seed, ({})seed, ({})seed, prm);\n",
                ty("T1"),
                ty("T2"),
                ty("T3")
            ));
            keys.push(key);
        }
        let src = format!(
            "{}{}{fns}extern \"C\" __global__ void all(double* out, int seed, Params prm) {{\n{calls}}}\n",
            super::super::PRELUDE,
            super::SPECIAL_PRELUDE
        );
        (src, keys)
    }

    /// Compiles every op body with NVRTC for sm_80 and sm_90 (no GPU
    /// needed: NVRTC only compiles). Ignored where it cannot run: it needs
    /// NVRTC (`libnvrtc`, e.g. PyTorch's wheel's `nvidia/cu13/lib` on
    /// `LD_LIBRARY_PATH`), and fails without it when asked for with
    /// `--include-ignored`.
    #[test]
    #[ignore = "needs NVRTC (libnvrtc on LD_LIBRARY_PATH); run with --include-ignored where it is installed"]
    fn every_special_kernel_compiles_with_nvrtc() {
        if let Err(why) = crate::backend::cuda::nvrtc::ensure_nvrtc() {
            panic!("NVRTC cannot be loaded: {why}");
        }
        let (src, keys) = program();
        assert_eq!(keys.len(), sources().len());
        for arch in ["sm_80", "sm_90"] {
            if let Err(log) = compile(&src, arch) {
                panic!("the special op bodies ({arch}): {log}");
            }
        }
        // Two whole modules, a unary and a binary one of f16/bf16.
        let all = sources();
        for key in ["Digamma_f16", "Nextafter_bf16_false"] {
            let (_, src) = all.iter().find(|(k, _)| k == key).unwrap();
            if let Err(log) = compile(src, "sm_90") {
                panic!("{key}: {log}");
            }
        }
    }

    fn compile(src: &str, arch: &str) -> Result<(), String> {
        use std::ffi::CString;
        let csrc = CString::new(src).unwrap();
        let prog =
            cudarc::nvrtc::result::create_program(&csrc, Some(&CString::new("t.cu").unwrap()))
                .map_err(|e| format!("{e:?}"))?;
        let opts = [
            format!("--gpu-architecture={arch}"),
            "--std=c++17".to_string(),
            "--fmad=false".to_string(),
        ];
        // SAFETY: `prog` was created above and is destroyed below, once.
        let r = unsafe { cudarc::nvrtc::result::compile_program(prog, &opts) };
        let out = match r {
            Ok(()) => Ok(()),
            Err(e) => {
                // SAFETY: `prog` is live; the log is read before it is destroyed.
                let log = unsafe { cudarc::nvrtc::result::get_program_log(prog) }
                    .map(|l| {
                        let bytes: Vec<u8> =
                            l.iter().map(|&c| c as u8).take_while(|&c| c != 0).collect();
                        String::from_utf8_lossy(&bytes).into_owned()
                    })
                    .unwrap_or_default();
                Err(format!("{e:?}: {log}"))
            }
        };
        // SAFETY: `prog` is live and destroyed exactly once here.
        let _ = unsafe { cudarc::nvrtc::result::destroy_program(prog) };
        out
    }
}
