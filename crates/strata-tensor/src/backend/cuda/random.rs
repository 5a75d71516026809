//! Generated sequences on the GPU: `arange` and the seeded Philox 4x32-10
//! streams of `rand`/`randn`, computed exactly as [`crate::random`] and
//! [`crate::generate::Sequence::at`] compute them on the host, into a
//! contiguous f64, f32 or i64 tensor (the caller converts to the dtype).

use super::context::{failure, CudaDevice};
use super::launch::{base_ptr, launch, KArg};
use crate::backend::Arg;
use crate::error::Result;
use crate::generate::Sequence;
use crate::random::{Dist, PHILOX_M, PHILOX_W};

/// Threads per block.
const BLOCK: u32 = 256;

/// The CUDA C source: one kernel per sequence kind, grid-stride loops over
/// 64-bit positions.
fn source() -> String {
    format!(
        r#"
typedef unsigned int u32;
typedef long long i64;
typedef unsigned long long u64;

__device__ __forceinline__ void philox(u32 c[4], u32 k0, u32 k1) {{
  for (int r = 0; r < 10; ++r) {{
    if (r > 0) {{ k0 += {w0}u; k1 += {w1}u; }}
    u32 lo0 = {m0}u * c[0], hi0 = __umulhi({m0}u, c[0]);
    u32 lo1 = {m1}u * c[2], hi1 = __umulhi({m1}u, c[2]);
    u32 n0 = hi1 ^ c[1] ^ k0, n2 = hi0 ^ c[3] ^ k1;
    c[0] = n0; c[1] = lo1; c[2] = n2; c[3] = lo0;
  }}
}}

__device__ __forceinline__ double fraction(u64 x, int bits) {{
  return ldexp((double)(x >> (64 - bits)), -bits);
}}

__device__ __forceinline__ u64 join(u32 hi, u32 lo) {{ return ((u64)hi << 32) | (u64)lo; }}

extern "C" __global__ void uniform(double* out, i64 n, u64 seed, int bits) {{
  for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {{
    u64 b = (u64)i / 2;
    u32 c[4] = {{(u32)b, (u32)(b >> 32), 0u, 0u}};
    philox(c, (u32)seed, (u32)(seed >> 32));
    int j = 2 * (int)(i % 2);
    out[i] = fraction(join(c[j], c[j + 1]), bits);
  }}
}}

extern "C" __global__ void normal(double* out, i64 n, u64 seed) {{
  const double tau = 6.283185307179586;
  for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {{
    u64 b = (u64)i / 2;
    u32 c[4] = {{(u32)b, (u32)(b >> 32), 1u, 0u}};
    philox(c, (u32)seed, (u32)(seed >> 32));
    double u1 = fraction(join(c[0], c[1]), 53);
    double u2 = fraction(join(c[2], c[3]), 53);
    double r = sqrt(-2.0 * log(1.0 - u1));
    double t = tau * u2;
    out[i] = (i % 2 == 0) ? r * cos(t) : r * sin(t);
  }}
}}

// arange as PyTorch's CPU kernel rounds it (crate::generate's
// `vector_lane`): whole blocks of 2 * lanes elements built a vector at a
// time from each vector's first element rounded to the tensor's dtype, the
// rest `start + i * step` in one rounding (an FMA).
extern "C" __global__ void range_f64(double* out, i64 n, double start, double step, int f32) {{
  const i64 lanes = f32 ? 8 : 4, whole = n - n % (2 * lanes);
  for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {{
    double v;
    if (i < whole) {{
      i64 k = i % lanes;
      double base = __fma_rn(step, (double)(i - k), start);
      if (k == 0) v = base;
      else {{
        if (f32) base = (double)__double2float_rn(base);
        v = __fma_rn((double)k, step, base);
      }}
    }} else v = __fma_rn(step, (double)i, start);
    out[i] = v;
  }}
}}

extern "C" __global__ void range_f32(float* out, i64 n, float start, float step, int bf16) {{
  const i64 whole = n - n % 32;
  for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {{
    float v;
    if (i < whole) {{
      i64 k = i % 16;
      float b = __fmaf_rn(step, (float)(i - k), start);
      if (k == 0) v = b;
      else if (bf16) {{
        unsigned short h; asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(b));
        v = __fadd_rn(__uint_as_float(((u32)h) << 16), __fmul_rn((float)k, step));
      }} else {{
        unsigned short h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(b));
        float hb; asm("cvt.f32.f16 %0, %1;" : "=f"(hb) : "h"(h));
        v = __fmaf_rn((float)k, step, hb);
      }}
    }} else v = __fmaf_rn(step, (float)i, start);
    out[i] = v;
  }}
}}

extern "C" __global__ void randint(i64* out, i64 n, u64 seed, i64 low, u64 range) {{
  for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {{
    u64 b = (u64)i / 2;
    u32 c[4] = {{(u32)b, (u32)(b >> 32), 2u, 0u}};
    philox(c, (u32)seed, (u32)(seed >> 32));
    int j = 2 * (int)(i % 2);
    out[i] = (i64)((u64)low + join(c[j], c[j + 1]) % range);
  }}
}}

extern "C" __global__ void range_i64(i64* out, i64 n, i64 start, i64 step) {{
  for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x)
    out[i] = (i64)((u64)start + (u64)i * (u64)step);
}}
"#,
        m0 = PHILOX_M[0],
        m1 = PHILOX_M[1],
        w0 = PHILOX_W[0],
        w1 = PHILOX_W[1],
    )
}

/// Writes `seq` into the contiguous tensor `out`, whose dtype is
/// `seq.compute_dtype()` (the caller holds its write lock).
pub(crate) fn generate(dev: &CudaDevice, out: &Arg, seq: Sequence) -> Result<()> {
    let n = out.layout.numel();
    if n == 0 {
        return Ok(());
    }
    if out.dtype != seq.compute_dtype() || !out.layout.is_contiguous() {
        return Err(failure(
            dev.device(),
            "generate",
            format!(
                "internal: a {} contiguous output is needed, got {} with layout {:?}",
                seq.compute_dtype(),
                out.dtype,
                out.layout
            ),
        ));
    }
    let f = super::nvrtc::functions(
        dev,
        "generate",
        source,
        &[
            "uniform",
            "normal",
            "range_f64",
            "range_f32",
            "range_i64",
            "randint",
        ],
    )?;
    let ptr = base_ptr(out);
    let n = n as i64;
    let grid = (n as u64).div_ceil(u64::from(BLOCK)).clamp(1, 1 << 16) as u32;
    // Each arm launches with the parameters its kernel declares, in order.
    macro_rules! go {
        ($what:literal, $k:expr, $($v:expr),+) => {{
            // SAFETY: the arguments match the kernel's parameters (pointer,
            // i64 n, then the arm's scalars in declaration order); the kernel
            // writes `n` elements of the compute dtype from `ptr`, the start
            // of the contiguous output that holds them.
            unsafe {
                launch(dev, $what, f[$k], (grid, 1, 1), (BLOCK, 1, 1), dev.stream(),
                    [KArg::of(&ptr), KArg::of(&n), $(KArg::of(&$v)),+])
            }
        }};
    }
    match seq {
        Sequence::Random {
            dist: Dist::Uniform { bits },
            seed,
        } => go!("uniform", 0, seed, bits as i32),
        Sequence::Random {
            dist: Dist::Normal,
            seed,
        } => go!("normal", 1, seed),
        // `len` is `n`: the kernels take the element count from it.
        Sequence::FloatRange {
            start, step, f32, ..
        } => go!("range_f64", 2, start, step, i32::from(f32)),
        Sequence::Float32Range {
            start, step, bf16, ..
        } => go!("range_f32", 3, start, step, i32::from(bf16)),
        Sequence::IntRange { start, step } => go!("range_i64", 4, start, step),
        Sequence::RandInt { low, range, seed } => go!("randint", 5, seed, low, range.max(1)),
    }
}
